"""MeSH code parsing, pattern matching, attribute extraction and coverage."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from cxreval.ontology import Ontology, load_ontology, parse_ontology
from cxreval.ontology.mesh import (
    SEVERITY_LEVELS,
    SEVERITY_SCALE,
    SIDE_ALIASES,
    SIDES,
    ZONE_ALIASES,
    ZONES,
    AmbiguousMeshCode,
    MeshCode,
    MeshMapper,
    coverage,
    is_normal,
    is_unindexed,
    normalize_mesh_part,
    parse_mesh_field,
)


def iu_reports_csv() -> Path | None:
    """IU X-ray reports beside the repository (or under $CXREVAL_DATA_DIR); None when absent."""
    env = os.environ.get("CXREVAL_DATA_DIR")
    base = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"
    path = base / "iu-xray" / "indiana_reports.csv"
    return path if path.is_file() else None


def small_ontology(extra: list[dict] | None = None) -> Ontology:
    heads = ["Opacity", "Calcinosis", "Pleural Effusion", "Nodule", "normal", "No Indexing"]

    def ent(eid: str, patterns: list[str]) -> dict:
        return {
            "id": eid,
            "name": eid.replace("_", " "),
            "kind": "finding",
            "category": "c",
            "group": "g",
            "mappings": {"mesh": patterns},
        }

    entities = [
        ent("opacity", ["Opacity"]),
        ent("nodule", ["Opacity/round", "Nodule"]),
        ent("aortic_calcification", ["Calcinosis/aorta"]),
        ent("calcified_nodes", ["Calcinosis/lymph nodes", "Calcinosis/aorta/lymph nodes"]),
        ent("effusion", ["Pleural Effusion"]),
        *(extra or []),
    ]
    return parse_ontology(
        {
            "id": "small",
            "version": "0",
            "categories": [{"id": "c", "name": "C"}],
            "groups": [{"id": "g", "name": "G", "category": "c"}],
            "labelsets": {"mesh": {"name": "mesh", "kind": "mesh", "labels": heads}},
            "entities": entities,
        }
    )


@pytest.fixture(scope="module")
def mapper() -> MeshMapper:
    return MeshMapper(small_ontology())


@pytest.fixture(scope="module")
def default_mapper() -> MeshMapper:
    return MeshMapper(load_ontology())


# ----------------------------------------------------------------------------- parsing


def test_parse_field_splits_codes_and_qualifiers() -> None:
    codes = parse_mesh_field("Opacity/lung/base/left/streaky;Cardiomegaly/mild")
    assert [c.heading for c in codes] == ["Opacity", "Cardiomegaly"]
    assert codes[0].qualifiers == ("lung", "base", "left", "streaky")
    assert codes[1].qualifiers == ("mild",)
    assert codes[0].raw == "Opacity/lung/base/left/streaky"


def test_parse_collapses_whitespace_and_skips_empties() -> None:
    codes = parse_mesh_field(" Subcutaneous  Emphysema / right ;; Technical Quality of Image Unsatisfactory ;")
    assert [c.heading for c in codes] == ["Subcutaneous Emphysema", "Technical Quality of Image Unsatisfactory"]
    assert codes[0].qualifiers == ("right",)
    assert codes[1].qualifiers == ()
    assert codes[0].key == "subcutaneous emphysema/right"


def test_parse_tolerates_missing_fields() -> None:
    assert parse_mesh_field(None) == []
    assert parse_mesh_field(math.nan) == []  # pandas NaN for an empty cell
    assert parse_mesh_field("") == []
    assert parse_mesh_field(" ; ") == []


def test_code_parse_and_normalisation() -> None:
    code = MeshCode.parse("Fractures, Bone/Thoracic Vertebrae")
    assert code.heading == "Fractures, Bone" and code.qualifiers == ("Thoracic Vertebrae",)
    assert normalize_mesh_part("  Thoracic   Vertebrae ") == "thoracic vertebrae"


def test_normal_and_unindexed_helpers() -> None:
    normal, unindexed, other = parse_mesh_field("normal;No Indexing;Opacity")
    assert is_normal(normal) and not is_unindexed(normal)
    assert is_unindexed(unindexed) and not is_normal(unindexed)
    assert not is_normal(other) and not is_unindexed(other)
    assert is_normal(MeshCode.parse("Normal"))
    assert is_unindexed(MeshCode.parse("no  indexing"))


# ----------------------------------------------------------------------------- matching


def test_qualifier_subset_matching(mapper: MeshMapper) -> None:
    match = mapper.map_code(MeshCode.parse("Opacity/lung/base/left/streaky"))
    assert match is not None and match.entity_id == "opacity" and match.pattern == "Opacity"
    assert mapper.map_code(MeshCode.parse("Calcinosis/lung")) is None  # no pattern is a subset
    assert mapper.map_code(MeshCode.parse("Cardiomegaly")) is None  # unknown heading


def test_most_specific_pattern_wins(mapper: MeshMapper) -> None:
    assert mapper.map_code(MeshCode.parse("Opacity/lung/upper lobe/round/small")).entity_id == "nodule"
    assert mapper.map_code(MeshCode.parse("Calcinosis/aorta")).entity_id == "aortic_calcification"
    both = mapper.map_code(MeshCode.parse("Calcinosis/aorta/lymph nodes/mild"))
    assert both.entity_id == "calcified_nodes" and both.pattern == "Calcinosis/aorta/lymph nodes"


def test_matching_ignores_case_and_spacing(mapper: MeshMapper) -> None:
    assert mapper.map_code(MeshCode.parse("opacity/ROUND")).entity_id == "nodule"
    assert mapper.map_code(MeshCode.parse("pleural  effusion/bilateral")).entity_id == "effusion"


def test_tie_between_entities_is_an_error() -> None:
    onto = small_ontology(
        [
            {
                "id": "streaky_thing",
                "name": "streaky thing",
                "kind": "finding",
                "category": "c",
                "group": "g",
                "mappings": {"mesh": ["Opacity/streaky"]},
            }
        ]
    )
    tied = MeshMapper(onto)
    code = MeshCode.parse("Opacity/round/streaky")
    assert tied.resolve(code) == ("nodule", "streaky_thing")
    with pytest.raises(AmbiguousMeshCode, match="matches equally"):
        tied.map_code(code)
    report = coverage(tied, ["Opacity/round/streaky;Opacity/streaky"])
    assert report.ambiguous == {"opacity/round/streaky": 1}
    assert report.mapped == 1 and report.total == 2


def test_same_pattern_in_two_entities_is_rejected() -> None:
    onto = small_ontology(
        [
            {
                "id": "copycat",
                "name": "copycat",
                "kind": "finding",
                "category": "c",
                "group": "g",
                "mappings": {"mesh": ["Opacity/ ROUND"]},
            }
        ]
    )
    with pytest.raises(AmbiguousMeshCode, match="mapped by both 'nodule' and 'copycat'"):
        MeshMapper(onto)


def test_other_labelset_name() -> None:
    onto = small_ontology()
    assert MeshMapper(onto, labelset="chexpert14").map_code(MeshCode.parse("Opacity")) is None


# ----------------------------------------------------------------------------- attributes


@pytest.mark.parametrize(
    ("code", "sides", "zones", "severity"),
    [
        ("Opacity/lung/upper lobe/right/mild", ("right",), ("upper",), "mild"),
        ("Pleural Effusion/bilateral/small", ("bilateral",), (), "mild"),
        ("Opacity/lung/base/right/left", ("right", "left"), ("lower",), None),
        ("Opacity/right/bilateral", ("bilateral",), (), None),
        ("Opacity/apex/lingula/hilum/retrocardiac", (), ("upper", "middle", "hilar", "retrocardiac"), None),
        ("Opacity/lower lobe/base/costophrenic angle", (), ("lower",), None),
        ("Opacity/small/large", (), (), "severe"),
        ("Opacity/borderline", (), (), "mild"),
        ("Opacity/moderate/Severe", (), (), "severe"),
    ],
)
def test_sides_zones_severity(mapper: MeshMapper, code: str, sides: tuple, zones: tuple, severity: str | None) -> None:
    match = mapper.map_code(MeshCode.parse(code))
    assert (match.sides, match.zones, match.severity) == (sides, zones, severity)


def test_vocabularies_are_consistent() -> None:
    assert set(SIDE_ALIASES.values()) <= set(SIDES)
    assert set(ZONE_ALIASES.values()) <= set(ZONES)
    assert set(SEVERITY_SCALE.values()) == set(SEVERITY_LEVELS)
    for word in ("mild", "moderate", "severe", "small", "large", "borderline"):  # IU severity qualifiers
        assert word in SEVERITY_SCALE
    assert SEVERITY_SCALE["minimal"] == "mild" and SEVERITY_SCALE["trace"] == "mild"
    for word in ("right", "left", "bilateral"):
        assert SIDE_ALIASES[word] == word


# ----------------------------------------------------------------------------- fields and coverage


def test_map_field_sets_normal_and_unindexed_apart(mapper: MeshMapper) -> None:
    assert mapper.map_field("normal") == ([], [])
    assert mapper.map_field("No Indexing") == ([], [])
    matched, unmapped = mapper.map_field("Opacity/lung;normal;Cardiomegaly/mild;Nodule/lung/left")
    assert [m.entity_id for m in matched] == ["opacity", "nodule"]
    assert [c.raw for c in unmapped] == ["Cardiomegaly/mild"]


def test_coverage_counts_by_occurrence(mapper: MeshMapper) -> None:
    fields = [
        "normal",
        "No Indexing",
        "Opacity/lung/base;Opacity/round",
        "Cardiomegaly/mild;Calcinosis/aorta",
        "Cardiomegaly/mild",
        None,
    ]
    report = coverage(mapper, fields)
    assert (report.fields, report.total, report.mapped) == (6, 5, 3)
    assert (report.normal, report.unindexed) == (1, 1)
    assert report.unmapped == {"cardiomegaly/mild": 2}
    assert report.by_entity == {"opacity": 1, "nodule": 1, "aortic_calcification": 1}
    assert report.coverage == pytest.approx(3 / 5)
    assert "cardiomegaly/mild" in report.summary()
    assert coverage(mapper, ["normal"]).coverage == 1.0


# ----------------------------------------------------------------------------- the default ontology


@pytest.mark.parametrize(
    ("code", "entity"),
    [
        ("Lung/hypoinflation/mild", "low_lung_volumes"),
        ("Lung/hyperdistention", "hyperinflation"),
        ("Lung/hilum/lymph nodes/bilateral/enlarged", "lymphadenopathy"),
        ("Thoracic Vertebrae/degenerative/mild", "degenerative_spine"),
        ("Thoracic vertebrae/degenerative", "degenerative_spine"),
        ("Spine/degenerative", "degenerative_spine"),
        ("Calcinosis/aorta", "aortic_calcification"),
        ("Calcinosis/aorta, thoracic", "aortic_calcification"),
        ("Calcinosis/lymph nodes", "calcified_lymph_nodes"),
        ("Calcinosis/lung/hilum/lymph nodes/right", "calcified_lymph_nodes"),
        ("Calcinosis/lung/lingula", "calcified_granuloma"),
        ("Calcinosis", "calcified_granuloma"),
        ("Markings/bronchovascular", "interstitial_markings"),
        ("Markings/lung/interstitial/prominent", "interstitial_markings"),
        ("Diaphragm/right/elevated", "elevated_hemidiaphragm"),
        ("Diaphragm/bilateral/flattened", "flattened_diaphragm"),
        ("Costophrenic Angle/bilateral/blunted", "blunted_costophrenic_angle"),
        ("Cardiac Shadow/enlarged/mild", "cardiomegaly"),
        ("Technical Quality of Image Unsatisfactory", "limited_exam"),
        ("Deformity/thoracic vertebrae/anterior/mild", "vertebral_compression_fracture"),
        ("Deformity/ribs/right/multiple", "rib_fracture"),
        ("Fractures, Bone/Thoracic Vertebrae", "vertebral_compression_fracture"),
        ("Fractures, Bone/clavicle/left/healed", "fracture"),
        ("Density/lung/base/left", "lung_opacity"),
        ("Density/lung/middle lobe/right/round", "lung_nodule"),
        ("Subcutaneous  Emphysema/right", "subcutaneous_emphysema"),
        ("Catheters, Indwelling/right", "central_venous_catheter"),
        ("Surgical Instruments/abdomen/right", "surgical_clips"),
        ("Implanted Medical Device/left", "pacemaker"),
        ("Implanted Medical Device/aortic valve", "prosthetic_valve"),
        ("Medical Device", "monitoring_leads"),
        ("Tube, Inserted/trachea, carina", "tracheostomy_tube"),
        ("Foreign Bodies/thorax/left", "foreign_body"),
        ("Stents/coronary vessels", "stent"),
        ("Sutures/lung/apex/right", "surgical_sutures"),
        ("Contrast Media/abdomen", "contrast_material"),
        ("Pulmonary Disease, Chronic Obstructive", "copd"),
        ("Granulomatous Disease/chronic", "granulomatous_disease"),
        ("Heart Failure/mild", "heart_failure"),
        ("Hypertension, Pulmonary", "pulmonary_hypertension"),
    ],
)
def test_default_ontology_maps_representative_codes(default_mapper: MeshMapper, code: str, entity: str) -> None:
    assert default_mapper.map_code(MeshCode.parse(code)).entity_id == entity


def test_default_ontology_covers_every_listed_heading(default_mapper: MeshMapper) -> None:
    labels = default_mapper.ontology.labelsets["mesh"].labels
    needed = {normalize_mesh_part(h) for h in labels} - {"normal", "no indexing"}
    assert needed <= default_mapper.headings


def test_iu_xray_coverage(default_mapper: MeshMapper) -> None:
    csv = iu_reports_csv()
    if csv is None:
        pytest.skip("IU X-ray reports not available (set CXREVAL_DATA_DIR)")
    import pandas as pd

    fields = pd.read_csv(csv, usecols=["MeSH"])["MeSH"]
    report = coverage(default_mapper, fields)
    assert report.fields == len(fields)
    assert report.total > 5000
    assert not report.ambiguous, f"codes tied between entities: {dict(report.ambiguous)}"
    assert report.coverage >= 0.97, report.summary()
