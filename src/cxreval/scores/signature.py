"""Signatures: what produced a number, sacreBLEU style.

Two numbers with different signatures are not comparable; cxreval prints the signature next to
every score and refuses to compare results whose signatures differ.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cxreval._version import __version__

#: Keys of the short form (:meth:`Signature.short`); options not listed keep their name.
SHORT_KEYS: dict[str, str] = {
    "metric": "m",
    "ontology": "o",
    "engine": "e",
    "model": "md",
    "prompt": "p",
    "version": "v",
    "uncertain": "u",
    "resamples": "rs",
    "seed": "sd",
    "confidence": "cl",
    "permutations": "pm",
}
LONG_KEYS: dict[str, str] = {short: long for long, short in SHORT_KEYS.items()}


class Signature(BaseModel):
    """Everything that determines a score: metric, ontology, engine, model, prompt, options."""

    model_config = ConfigDict(frozen=True)

    metric: str
    ontology: str
    engine: str
    model: str = "none"
    prompt: str = "none"
    options: dict[str, str] = Field(default_factory=dict)
    version: str = __version__

    def __str__(self) -> str:
        parts = [
            f"metric:{self.metric}",
            f"ontology:{self.ontology}",
            f"engine:{self.engine}",
            f"model:{self.model}",
            f"prompt:{self.prompt}",
        ]
        parts += [f"{k}:{v}" for k, v in sorted(self.options.items())]
        parts.append(f"version:{self.version}")
        return "|".join(parts)

    def short(self) -> str:
        """The same signature with short keys (``m:...|o:...|e:...``), for tables and plots;
        :meth:`parse` reads both forms."""
        parts = [
            f"{SHORT_KEYS.get(k, k)}:{v}"
            for k, v in (
                ("metric", self.metric),
                ("ontology", self.ontology),
                ("engine", self.engine),
                ("model", self.model),
                ("prompt", self.prompt),
            )
        ]
        parts += [f"{SHORT_KEYS.get(k, k)}:{v}" for k, v in sorted(self.options.items())]
        parts.append(f"v:{self.version}")
        return "|".join(parts)

    def with_intervals(self, *, method: str, resamples: int, seed: int, confidence: float) -> Signature:
        """This signature with the settings of an attached interval (how it was resampled)."""
        extra = {"ci": method, "resamples": str(resamples), "seed": str(seed), "confidence": f"{confidence:g}"}
        return self.model_copy(update={"options": {**self.options, **extra}})

    @classmethod
    def parse(cls, text: str) -> Signature:
        """The inverse of ``str(signature)`` (and of :meth:`short`); raises ValueError on a malformed string."""
        fields: dict[str, str] = {}
        for part in text.strip().split("|"):
            key, sep, value = part.partition(":")
            if not sep or not key:
                raise ValueError(f"not a cxreval signature: {text!r}")
            fields[LONG_KEYS.get(key, key)] = value
        named = {k: fields.pop(k) for k in ("metric", "ontology", "engine", "model", "prompt", "version") if k in fields}
        if not {"metric", "ontology", "engine"} <= named.keys():
            raise ValueError(f"not a cxreval signature (needs metric, ontology, engine): {text!r}")
        return cls(**named, options=fields)

    def with_metric(self, metric: str) -> Signature:
        return self.model_copy(update={"metric": metric})


class SignatureMismatch(ValueError):
    """Raised when results with different signatures would be compared."""


def check_comparable(a: Signature, b: Signature) -> None:
    """Refuse to compare two results unless everything but the package version agrees."""
    da = a.model_dump(exclude={"version"})
    db = b.model_dump(exclude={"version"})
    if da != db:
        diffs = [k for k in da if da[k] != db[k]]
        raise SignatureMismatch(f"results are not comparable; signatures differ in {diffs}: {a} vs {b}")
