"""The attribute vocabulary: words for side, zone, severity and change, and their buckets.

One data file (``data/attributes.yaml``) serves both the rule engine, which reads report words,
and the MeSH mapper, which reads IU qualifiers, so a gold standard built from MeSH codes and
the engine's output speak the same buckets.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, model_validator

from cxreval import yaml_files

KINDS = ("sides", "zones", "severity", "comparison", "landmarks", "units")
#: Millimetres in each unit bucket of ``units`` (a size or a distance is held in millimetres).
UNIT_MM: dict[str, float] = {"mm": 1.0, "cm": 10.0}


class AttributeVocabulary(BaseModel):
    """Phrase -> bucket maps for each attribute kind, validated against the bucket lists."""

    model_config = ConfigDict(frozen=True)

    version: str
    buckets: dict[str, list[str]]
    sides: dict[str, str]
    zones: dict[str, str]
    severity: dict[str, str]
    comparison: dict[str, str]
    #: Where a device's tip lies: phrase -> landmark (``device_positions`` of the ontology).
    landmarks: dict[str, str] = {}
    #: The unit a size or distance is written in: phrase -> ``mm`` or ``cm`` (:data:`UNIT_MM`).
    units: dict[str, str] = {}
    #: Landmarks whose "right" or "left" names the structure (the heart's chambers): no side for
    #: any finding. Another landmark's side and zone words still place a finding that is no device.
    landmarks_without_side: list[str] = []

    @model_validator(mode="after")
    def _values_are_buckets(self) -> AttributeVocabulary:
        for kind in KINDS:
            allowed = set(self.buckets.get(kind, []))
            bad = {k: v for k, v in getattr(self, kind).items() if v not in allowed}
            if bad:
                raise ValueError(f"{kind}: values not among buckets {sorted(allowed)}: {bad}")
        unknown = set(self.landmarks_without_side) - set(self.buckets.get("landmarks", []))
        if unknown:
            raise ValueError(f"landmarks_without_side: not among the landmark buckets: {sorted(unknown)}")
        if set(self.buckets.get("units", [])) - UNIT_MM.keys():
            raise ValueError(f"units: buckets must be among {sorted(UNIT_MM)}")
        return self

    def severity_rank(self, bucket: str) -> int:
        return self.buckets["severity"].index(bucket)


@lru_cache(maxsize=1)
def attribute_vocabulary() -> AttributeVocabulary:
    """The packaged vocabulary (read once per process)."""
    ref = resources.files("cxreval.ontology") / "data" / "attributes.yaml"
    return AttributeVocabulary.model_validate(yaml_files.safe_load(ref.read_text(encoding="utf-8")))
