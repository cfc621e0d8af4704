"""The packaged default ontology and the loader's validation of user ontologies."""

from __future__ import annotations

import copy
import os
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from cxreval.ontology import Ontology, OntologyError, load_ontology, normalize_term
from cxreval.ontology.mesh import SEVERITY_SCALE, SIDE_ALIASES

CHEXPERT14 = [
    "No Finding",
    "Enlarged Cardiomediastinum",
    "Cardiomegaly",
    "Lung Opacity",
    "Lung Lesion",
    "Edema",
    "Consolidation",
    "Pneumonia",
    "Atelectasis",
    "Pneumothorax",
    "Pleural Effusion",
    "Pleural Other",
    "Fracture",
    "Support Devices",
]
RAN21 = [
    "Atelectasis",
    "Cardiomegaly",
    "Consolidation",
    "Edema",
    "Enlarged Cardiomediastinum",
    "Fracture",
    "Lung Lesion",
    "No Finding",
    "Pleural Effusion",
    "Pleural Other",
    "Lung Opacity",
    "Pneumonia",
    "Pneumothorax",
    "Support Devices",
    "Emphysema",
    "Interstitial Lung Disease",
    "Calcification (Lung/Mediastinal)",
    "Trachea and Bronchus",
    "Cavity and Cyst",
    "Mediastinal Other",
    "Pulmonary Vascular Abnormal",
]
CHESTXRAY14 = [
    "Atelectasis",
    "Cardiomegaly",
    "Effusion",
    "Infiltration",
    "Mass",
    "Nodule",
    "Pneumonia",
    "Pneumothorax",
    "Consolidation",
    "Edema",
    "Emphysema",
    "Fibrosis",
    "Pleural_Thickening",
    "Hernia",
]


def iu_reports_csv() -> Path | None:
    """IU X-ray reports beside the repository (or under $CXREVAL_DATA_DIR); None when absent."""
    env = os.environ.get("CXREVAL_DATA_DIR")
    base = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"
    path = base / "iu-xray" / "indiana_reports.csv"
    return path if path.is_file() else None


@pytest.fixture(scope="module")
def onto() -> Ontology:
    return load_ontology()


def term_owners(onto: Ontology) -> dict[str, set[str]]:
    owners: dict[str, set[str]] = defaultdict(set)
    for e in onto.entities:
        for t in e.terms:
            owners[t].add(e.id)
    return owners


# ----------------------------------------------------------------------------- the default set


def test_default_loads_with_signature(onto: Ontology) -> None:
    assert onto.signature == "cxreval-cxr@1.18.0"
    assert load_ontology() is onto  # cached


def test_counts_match_spec(onto: Ontology) -> None:
    assert len(onto.findings()) >= 89
    assert len(onto.differentials()) >= 33
    assert 13 <= len(onto.groups) <= 17
    assert len(onto.entities) == len(set(onto.entity_ids))


def test_every_group_is_used_and_differentials_are_separate(onto: Ontology) -> None:
    used = {e.group for e in onto.entities}
    assert used == {g.id for g in onto.groups}
    diff_groups = {g.id for g in onto.groups if g.category == "differential"}
    assert 1 <= len(diff_groups) <= 3
    for e in onto.entities:
        assert (e.kind == "differential") == (e.group in diff_groups), e.id


def test_required_categories_have_entities(onto: Ontology) -> None:
    by_cat = defaultdict(list)
    for e in onto.entities:
        by_cat[e.category].append(e.id)
    for cat in (
        "lung",
        "pleura",
        "heart",
        "mediastinum_hila",
        "vessels",
        "bones_joints",
        "soft_tissue",
        "diaphragm_abdomen",
        "devices",
        "post_treatment",
        "exam_quality",
        "differential",
    ):
        assert by_cat[cat], cat
    assert "low_lung_volumes" in by_cat["exam_quality"]
    assert {"endotracheal_tube", "pacemaker", "central_venous_catheter", "picc"} <= set(by_cat["devices"])
    assert {"pneumonia", "heart_failure", "copd", "tuberculosis"} <= set(by_cat["differential"])


def test_every_entity_is_described(onto: Ontology) -> None:
    for e in onto.entities:
        assert e.description.strip(), e.id
        assert "\n" not in e.description.strip(), e.id


@pytest.mark.parametrize(("labelset", "expected"), [("chexpert14", CHEXPERT14), ("ran21", RAN21), ("chestxray14", CHESTXRAY14)])
def test_labelsets_are_spelled_exactly_and_all_targeted(onto: Ontology, labelset: str, expected: list[str]) -> None:
    assert onto.labelsets[labelset].labels == expected
    targeted = {t for e in onto.entities for t in e.mappings.get(labelset, [])}
    missing = set(expected) - {"No Finding"} - targeted
    assert not missing, f"{labelset} labels with no entity: {sorted(missing)}"
    assert "No Finding" not in targeted


def test_mesh_labelset_lists_all_iu_headings(onto: Ontology) -> None:
    mesh = onto.labelsets["mesh"]
    assert mesh.kind == "mesh"
    assert len(mesh.labels) == len(set(mesh.labels)) == 121
    for odd in ("normal", "No Indexing", "Subcutaneous  Emphysema", "Thoracic vertebrae", "Lymph nodes"):
        assert odd in mesh.labels
    csv = iu_reports_csv()
    if csv is not None:
        import pandas as pd

        heads = {
            code.split("/")[0].strip()
            for field in pd.read_csv(csv, usecols=["MeSH"])["MeSH"].dropna()
            for code in field.split(";")
            if code.strip()
        }
        assert set(mesh.labels) == heads


def test_mesh_disease_headings_map_to_differentials(onto: Ontology) -> None:
    for heading in (
        "Pulmonary Disease, Chronic Obstructive",
        "Heart Failure",
        "Granulomatous Disease",
        "Sarcoidosis",
        "Tuberculosis",
        "Cystic Fibrosis",
        "Hypertension, Pulmonary",
        "Bronchitis",
        "Pneumonia",
        "Lung Diseases, Interstitial",
    ):
        owners = [e for e in onto.entities if heading in e.mappings.get("mesh", [])]
        assert len(owners) == 1 and owners[0].kind == "differential", heading


def test_mesh_patterns_do_not_use_side_zone_or_severity_qualifiers(onto: Ontology) -> None:
    banned = (
        set(SIDE_ALIASES)
        | set(SEVERITY_SCALE)
        | {
            "base",
            "upper lobe",
            "middle lobe",
            "lower lobe",
            "apex",
            "lingula",
            "retrocardiac",
        }
    )
    for e in onto.entities:
        for pattern in e.mappings.get("mesh", []):
            quals = {normalize_term(q) for q in pattern.split("/")[1:]}
            assert not quals & banned, f"{e.id}: {pattern}"


def test_synonyms_are_mutually_exclusive(onto: Ontology) -> None:
    shared = {t: ids for t, ids in term_owners(onto).items() if len(ids) > 1}
    assert set(shared) <= set(onto.precedence), shared


@pytest.mark.parametrize(
    ("word", "owner"),
    [
        ("opacity", "lung_opacity"),
        ("density", "lung_opacity"),
        ("infiltrate", "airspace_disease"),
        ("airspace disease", "airspace_disease"),
        ("effusion", "pleural_effusion"),
        ("calcification", "calcified_granuloma"),
        ("calcified lymph nodes", "calcified_lymph_nodes"),
        ("aortic calcification", "aortic_calcification"),
        ("hypoinflation", "low_lung_volumes"),
        ("hyperexpanded", "hyperinflation"),
        ("degenerative changes", "degenerative_spine"),
        ("subcutaneous emphysema", "subcutaneous_emphysema"),
        ("emphysema", "emphysema"),
        ("free air", "pneumoperitoneum"),
        ("chf", "heart_failure"),
        ("copd", "copd"),
        ("sternotomy wires", "sternotomy"),
        ("ng tube", "enteric_tube"),
        ("picc line", "picc"),
        ("bronchovascular crowding", "interstitial_markings"),
    ],
)
def test_ambiguous_words_have_one_deliberate_owner(onto: Ontology, word: str, owner: str) -> None:
    assert term_owners(onto)[normalize_term(word)] == {owner}


def test_no_negated_or_normal_statements_as_synonyms(onto: Ontology) -> None:
    for e in onto.entities:
        for t in e.terms:
            first = t.split()[0]
            assert first not in {"no", "without", "normal", "negative", "absent", "resolved"}, (e.id, t)


def test_critical_entities(onto: Ontology) -> None:
    critical = {e.id for e in onto.entities if e.critical}
    assert {
        "pneumothorax",
        "tension_pneumothorax",
        "pneumoperitoneum",
        "malpositioned_device",
        "aortic_dissection",
        "pneumomediastinum",
    } <= critical
    assert "cardiomegaly" not in critical and "degenerative_spine" not in critical


# ----------------------------------------------------------------------------- user files and errors


def minimal() -> dict:
    return {
        "id": "mine",
        "version": "0.1",
        "categories": [{"id": "lung", "name": "Lung"}, {"id": "pleura", "name": "Pleura"}],
        "groups": [
            {"id": "parenchyma", "name": "Parenchyma", "category": "lung"},
            {"id": "pleural", "name": "Pleural", "category": "pleura"},
        ],
        "labelsets": {
            "chexpert14": {"name": "CheXpert", "labels": ["Pleural Effusion", "Consolidation"]},
            "mesh": {"name": "IU MeSH", "kind": "mesh", "labels": ["Pleural Effusion", "Consolidation"]},
        },
        "entities": [
            {
                "id": "effusion",
                "name": "Pleural effusion",
                "kind": "finding",
                "category": "pleura",
                "group": "pleural",
                "synonyms": ["effusion", "pleural fluid"],
                "mappings": {"chexpert14": ["Pleural Effusion"], "mesh": ["Pleural Effusion"]},
            },
            {
                "id": "consolidation",
                "name": "Consolidation",
                "kind": "finding",
                "category": "lung",
                "group": "parenchyma",
                "synonyms": ["airspace consolidation"],
                "mappings": {"chexpert14": ["Consolidation"], "mesh": ["Consolidation/lung"]},
            },
        ],
    }


def write(tmp_path: Path, data: dict | str) -> Path:
    path = tmp_path / "onto.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def load_error(tmp_path: Path, data: dict | str) -> str:
    with pytest.raises(OntologyError) as info:
        load_ontology(write(tmp_path, data))
    return str(info.value)


def test_user_yaml_loads(tmp_path: Path) -> None:
    onto = load_ontology(write(tmp_path, minimal()))
    assert onto.signature == "mine@0.1"
    assert onto.entity("effusion").terms == ["pleural effusion", "effusion", "pleural fluid"]
    assert [e.id for e in onto.findings()] == ["effusion", "consolidation"]


def test_default_file_round_trips_through_user_path(tmp_path: Path, onto: Ontology) -> None:
    dumped = onto.model_dump(mode="json")
    again = load_ontology(write(tmp_path, dumped))
    assert again.entity_ids == onto.entity_ids


def test_duplicate_entity_id(tmp_path: Path) -> None:
    data = minimal()
    dup = copy.deepcopy(data["entities"][0])
    dup["synonyms"] = []
    dup["name"] = "Another effusion"
    data["entities"].append(dup)
    assert "entity 'effusion' is defined more than once" in load_error(tmp_path, data)


def test_unknown_group_and_category(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][0]["group"] = "nowhere"
    data["entities"][1]["category"] = "heart"
    msg = load_error(tmp_path, data)
    assert "names unknown group 'nowhere'" in msg
    assert "names unknown category 'heart'" in msg
    assert "is in category 'heart' but its group 'parenchyma' belongs to 'lung'" in msg
    assert "3 problem(s)" in msg


def test_group_category_mismatch(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][0]["group"] = "parenchyma"
    assert "but its group 'parenchyma' belongs to 'lung'" in load_error(tmp_path, data)


def test_synonym_claimed_twice_needs_precedence(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][1]["synonyms"].append("Pleural-Fluid")  # normalises to 'pleural fluid'
    msg = load_error(tmp_path, data)
    assert "synonym 'pleural fluid' is claimed by ['consolidation', 'effusion']" in msg
    assert "precedence" in msg


def test_precedence_resolves_a_shared_synonym(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][1]["synonyms"].append("pleural fluid")
    data["precedence"] = {"pleural fluid": "effusion"}
    onto = load_ontology(write(tmp_path, data))
    assert onto.precedence == {"pleural fluid": "effusion"}


def test_precedence_must_name_a_claimant_and_be_normalised(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][1]["synonyms"].append("pleural fluid")
    data["precedence"] = {"pleural fluid": "ghost", "Pleural-Effusion": "effusion"}
    msg = load_error(tmp_path, data)
    assert "names 'ghost', which does not claim it" in msg
    assert "unknown entity 'ghost'" in msg
    assert "must be written normalised: 'pleural effusion'" in msg


def test_unknown_mapping_target(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][0]["mappings"]["chexpert14"] = ["Pleural Efusion"]
    data["entities"][1]["mappings"]["ran21"] = ["Consolidation"]
    msg = load_error(tmp_path, data)
    assert "maps to 'Pleural Efusion', which is not a label of 'chexpert14'" in msg
    assert "maps to unknown label set 'ran21'" in msg


def test_mesh_targets_check_only_the_heading(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][1]["mappings"]["mesh"] = ["Consolidation/lung/anything", "Airspace Disease/lung"]
    msg = load_error(tmp_path, data)
    assert "'Airspace Disease/lung', which is not a label of 'mesh'" in msg
    assert "Consolidation/lung/anything" not in msg


def test_invalid_model_values(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][0]["id"] = "Bad-Id"
    data["entities"][1]["kind"] = "disease"
    msg = load_error(tmp_path, data)
    assert "invalid ontology" in msg
    assert "snake_case" in msg


def test_bad_yaml(tmp_path: Path) -> None:
    msg = load_error(tmp_path, "id: x\nentities: [unclosed\n")
    assert "not valid YAML" in msg


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    assert "expected a mapping at the top level" in load_error(tmp_path, "- just\n- a list\n")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(OntologyError, match="cannot read ontology file"):
        load_ontology(tmp_path / "missing.yaml")
    with pytest.raises(OntologyError, match="cannot read ontology file"):
        load_ontology(tmp_path)  # a directory


def test_device_positions_and_size_thresholds_are_checked(tmp_path: Path) -> None:
    data = minimal()
    data["measure_sources"] = {"godoy": "Godoy et al., AJR 2012."}
    data["device_positions"] = [
        {
            "device": "effusion",
            "landmarks": ["stomach", "gizzard"],
            "expected": ["stomach", "trachea"],
            "malpositioned": ["stomach"],
            "distance": {"landmark": "carina", "above": "trachea"},
            "source": "godoy",
        },
        {"device": "nothing", "landmarks": ["stomach"], "expected": ["stomach"], "source": "nobody"},
    ]
    data["size_thresholds"] = [
        {"entity": "effusion", "mm": [30], "source": "godoy"},
        {"entity": "effusion", "mm": [0], "source": "godoy"},
    ]
    message = load_error(tmp_path, data)
    for problem in (
        "unknown landmark 'gizzard'",
        "'trachea' is expected or malpositioned but not among its landmarks",
        "'stomach' is both expected and malpositioned",
        "distance landmark 'carina' is not among its landmarks",
        "device position of 'nothing': unknown entity",
        "unknown source 'nobody'",
        "has no severity attribute",
        "size threshold of 'effusion' is listed twice",
        "sizes > 0 mm",
    ):
        assert problem in message, problem


def test_the_packaged_device_positions_place_a_tip() -> None:
    onto = load_ontology()
    ett = onto.device_position("endotracheal_tube")
    assert ett is not None and onto.device_position("lung_nodule") is None
    assert [ett.place("carina", mm) for mm in (10.0, 50.0, 90.0, None)] == [
        "carina:below",
        "carina:expected",
        "carina:above",
        "carina:below",
    ]
    assert ett.is_expected("trachea") and ett.is_expected("expected_position") and not ett.is_expected("bronchus")
    trach = onto.device_position("tracheostomy_tube")
    assert trach is not None and trach.place("carina", 60.0) == "trachea"
    assert onto.size_thresholds_of("lung_nodule") == (30.0,) and onto.size_thresholds_of("pneumothorax") == ()
