"""The shape the code promises, checked by the tools configured in pyproject.toml:

- ``ruff check``: pycodestyle, pyflakes, import order, pyupgrade, bugbear, and no function of the
  package above cyclomatic complexity 15 (C901, the mccabe count), so each stays small enough to read;
- ``ruff format --check``: one layout everywhere;
- ``mypy``: every module type-checked, the public API under strict's flags.

Run by the README's test command, so by ``.ci/run``.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ["src", "tests", "benchmarks", "mkdocs_hooks.py"]


def _ruff() -> str:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed: pip install -e '.[test]' brings it")
    return ruff


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=ROOT, capture_output=True, text=True, check=False, timeout=900)


def test_ruff_finds_nothing() -> None:
    done = _run(_ruff(), "check", "--no-cache", "--output-format", "concise", *CHECKED)
    assert done.returncode == 0, f"ruff check:\n{done.stdout}{done.stderr}"


def test_the_code_is_formatted() -> None:
    done = _run(_ruff(), "format", "--no-cache", "--check", *CHECKED)
    assert done.returncode == 0, f"ruff format --check (run `ruff format {' '.join(CHECKED)}`):\n{done.stdout}{done.stderr}"


def test_the_complexity_limit_holds_in_the_package() -> None:
    """The limit itself, apart from the other rules: a change to the configuration cannot lift it."""
    done = _run(
        _ruff(),
        "check",
        "--no-cache",
        "--select",
        "C901",
        "--config",
        "lint.mccabe.max-complexity=15",
        "--output-format",
        "concise",
        "src",
    )
    assert done.returncode == 0, f"functions above complexity 15:\n{done.stdout}{done.stderr}"


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: pip install -e '.[test]' brings it")
    done = _run(sys.executable, "-m", "mypy")
    assert done.returncode == 0, f"mypy:\n{done.stdout[-6000:]}{done.stderr}"
