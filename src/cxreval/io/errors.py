"""What is wrong with an input file: :class:`InputProblem` (file, position, field, message) and
:class:`InputError`, which lists every problem found, never only the first."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

#: How many problems ``str(InputError)`` lists before summarising the rest.
MAX_LISTED_PROBLEMS = 20

Unit = Literal["line", "row", "item"]


class InputProblem(BaseModel):
    """One thing wrong with an input file, precise enough to find and fix it.

    ``row`` is a 1-based position whose meaning is given by ``unit``: ``line`` (CSV/TSV record
    start line, JSONL line), ``row`` (Parquet data row) or ``item`` (JSON list index). It is
    ``None`` for file-level problems (missing column, unreadable file) and for ReXrank-layout
    studies, which are named by ``id`` instead.
    """

    model_config = ConfigDict(frozen=True)

    file: str
    row: int | None = None
    field: str | None = None
    message: str
    unit: Unit = "row"
    id: str | None = None

    def __str__(self) -> str:
        where = [self.file]
        if self.row is not None:
            pos = f"{self.unit} {self.row}"
            if self.id is not None:
                pos += f" (id {self.id!r})"
            where.append(pos)
        elif self.id is not None:
            where.append(f"id {self.id!r}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}"


class InputError(ValueError):
    """Input files that cannot be used; ``problems`` holds every problem found, not just the first."""

    def __init__(self, problems: Iterable[InputProblem], not_kept: int = 0) -> None:
        self.problems: list[InputProblem] = list(problems)
        self.not_kept = not_kept
        """Problems found but not kept (a streamed check keeps :data:`MAX_KEPT_PROBLEMS`)."""
        super().__init__(self._render())

    @property
    def n_problems(self) -> int:
        """Every problem found, kept or not."""
        return len(self.problems) + self.not_kept

    def _render(self) -> str:
        n = self.n_problems
        head = f"{n} problem{'s' if n != 1 else ''} in input:"
        lines = [f"  - {p}" for p in self.problems[:MAX_LISTED_PROBLEMS]]
        if n > MAX_LISTED_PROBLEMS:
            more = n - MAX_LISTED_PROBLEMS
            lines.append(f"  ... and {more} more problem{'s' if more != 1 else ''}")
        return "\n".join([head, *lines])

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the exception picklable (e.g. across multiprocessing) despite the custom __init__.
        return (type(self), (self.problems, self.not_kept))


def file_error(file: str, message: str, row: int | None = None, unit: Unit = "line") -> InputError:
    return InputError([InputProblem(file=file, row=row, unit=unit, message=message)])
