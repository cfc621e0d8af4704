"""The finding hierarchy of the ontology (issue 31, item 1): is-a parents for every entity, each
anchored in a declared source, near-synonym classes, the helpers that walk them, and the loader's
checks of both on broken copies of the packaged file and on user files."""

from __future__ import annotations

import copy
import re
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
import yaml

from cxreval.ontology import Ontology, OntologyError, load_ontology

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = resources.files("cxreval.ontology") / "data" / "cxr-entities.yaml"


@pytest.fixture(scope="module")
def onto() -> Ontology:
    return load_ontology()


@pytest.fixture(scope="module")
def packaged_data() -> dict:
    return yaml.safe_load(PACKAGED.read_text(encoding="utf-8"))


def links(onto: Ontology) -> list[tuple[str, str, str]]:
    """(child, parent, source) for every parent link, in declaration order."""
    return [(e.id, p.id, p.source) for e in onto.entities for p in e.parents]


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "onto.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def load_error(tmp_path: Path, data: dict) -> str:
    with pytest.raises(OntologyError) as info:
        load_ontology(write(tmp_path, data))
    return str(info.value)


def entity(data: dict, entity_id: str) -> dict:
    return next(e for e in data["entities"] if e["id"] == entity_id)


# ----------------------------------------------------------------------------- the packaged hierarchy


def test_every_packaged_entity_lists_its_parents(onto: Ontology, packaged_data: dict) -> None:
    assert onto.has_hierarchy
    assert all("parents" in e for e in packaged_data["entities"])  # written out, [] included
    assert all("parents" in e.model_fields_set for e in onto.entities)
    assert len(onto.entities) == 173


def test_packaged_hierarchy_is_acyclic(onto: Ontology) -> None:
    for e in onto.entities:
        above = onto.ancestors(e.id)
        assert e.id not in above
        assert not set(above) & set(onto.descendants(e.id)), e.id
        for p in e.parents:
            assert e.id not in onto.ancestors(p.id), f"{e.id} is an ancestor of its parent {p.id}"


def test_counts_per_source(onto: Ontology) -> None:
    """The figures docs/engine.md gives; change both together."""
    per_source = Counter(source for *_, source in links(onto))
    assert per_source == {"chexpert": 5, "chexpert-labeler": 23, "fleischner": 7, "cxreval": 20}
    assert set(per_source) == set(onto.hierarchy_sources)  # every declared source anchors something
    assert sum(1 for e in onto.entities if not e.parents) == 119
    assert [c.id for c in onto.near_synonyms] == ["airspace_opacity", "pneumonia_infection"]


@pytest.mark.parametrize("child", ["pulmonary_edema", "consolidation", "pneumonia", "atelectasis", "lung_nodule", "lung_mass"])
def test_chexpert_lung_opacity_is_above_its_children(onto: Ontology, child: str) -> None:
    assert "lung_opacity" in onto.ancestors(child)
    assert child in onto.descendants("lung_opacity")


def test_chexpert_links_are_present_with_their_source(onto: Ontology) -> None:
    chexpert = {(c, p) for c, p, s in links(onto) if s == "chexpert"}
    assert chexpert == {
        ("consolidation", "lung_opacity"),
        ("atelectasis", "lung_opacity"),
        ("pulmonary_edema", "lung_opacity"),
        ("pneumonia", "consolidation"),
        ("cardiomegaly", "enlarged_cardiomediastinal_silhouette"),
    }
    assert onto.ancestors("cardiomegaly") == ["enlarged_cardiomediastinal_silhouette"]
    assert onto.ancestors("tension_pneumothorax") == ["pneumothorax"]
    assert onto.ancestors("pneumonia") == ["consolidation", "lung_opacity"]


def test_decisions_the_docs_state(onto: Ontology) -> None:
    assert onto.ancestors("hydropneumothorax") == ["pneumothorax", "pleural_effusion"]
    assert onto.ancestors("miliary_nodules") == ["lung_nodule", "lung_opacity"]
    assert onto.ancestors("calcified_granuloma") == ["granuloma", "lung_nodule", "lung_opacity"]
    assert {"rib_fracture", "vertebral_compression_fracture"} <= set(onto.descendants("fracture"))
    assert {"endotracheal_tube", "pacemaker", "picc", "malpositioned_device"} <= set(onto.descendants("support_device"))
    # nodule and mass: siblings by size, neither is-a the other nor near-synonyms
    assert "lung_mass" not in onto.ancestors("lung_nodule") and "lung_nodule" not in onto.ancestors("lung_mass")
    assert onto.near_synonym_class("lung_nodule") is None and onto.near_synonym_class("lung_mass") is None
    # disease-level differentials are parents of no imaging finding, and no finding has a differential above it
    for e in onto.findings():
        assert all(onto.entity(a).kind == "finding" for a in onto.ancestors(e.id)), e.id
    assert onto.descendants("heart_failure") == [] and onto.descendants("copd") == []


def test_every_cxreval_link_has_a_reason_in_the_yaml_and_a_row_in_the_docs(onto: Ontology) -> None:
    text = PACKAGED.read_text(encoding="utf-8")
    docs = (ROOT / "docs" / "engine.md").read_text(encoding="utf-8")
    section = docs.split("### Links from cxreval's own judgement", 1)[1]
    own = [(c, p) for c, p, s in links(onto) if s == "cxreval"]
    assert own
    for child, parent in own:
        block = text.split(f"  - id: {child}\n", 1)[1].split("\n  - id: ", 1)[0]
        assert re.search(rf"# is-a {parent} \(cxreval\): \S", block), f"{child} -> {parent}: no reason comment"
        assert re.search(rf"^\| `{child}` \| `{parent}` \| \S", section, re.M), f"{child} -> {parent}: no docs row"


def test_near_synonym_classes(onto: Ontology) -> None:
    assert onto.near_synonym_members("airspace_disease") == ["lung_opacity", "airspace_disease"]
    assert onto.near_synonym_class("lung_opacity") == "airspace_opacity"
    assert onto.near_synonym_class("consolidation") is None  # a specific opacity, not a synonym of one
    assert onto.near_synonym_members("consolidation") == ["consolidation"]
    assert onto.near_synonym_class("infection") == "pneumonia_infection"
    # both rules apply to airspace_disease / lung_opacity: in one class, and one is-a the other
    assert onto.ancestors("airspace_disease") == ["lung_opacity"]


def test_a_class_is_one_node_with_classes_true(onto: Ontology) -> None:
    assert onto.ancestors("infection") == []
    assert onto.ancestors("infection", classes=True) == ["consolidation", "lung_opacity"]
    assert onto.ancestors("airspace_disease", classes=True) == []  # its class-mate is left out
    below = onto.descendants("airspace_disease", classes=True)
    assert "consolidation" in below and "lung_opacity" not in below and "airspace_disease" not in below
    assert onto.descendants("infection", classes=True) == ["viral_pneumonia", "covid19"]


def test_helpers_order_and_unknown_ids(onto: Ontology) -> None:
    assert onto.ancestors("covid19") == ["viral_pneumonia", "pneumonia", "consolidation", "lung_opacity"]
    assert onto.descendants("pneumothorax") == ["tension_pneumothorax", "hydropneumothorax"]
    first = onto.descendants("lung_opacity")
    assert first[:4] == ["airspace_disease", "consolidation", "atelectasis", "pulmonary_edema"]  # nearest first
    assert first.index("pneumonia") < first.index("viral_pneumonia") < first.index("covid19")
    assert onto.ancestors("lung_opacity") == [] and onto.near_synonym_class("cardiomegaly") is None
    for call in (onto.ancestors, onto.descendants, onto.near_synonym_class, onto.near_synonym_members):
        with pytest.raises(KeyError, match="unknown entity 'ghost'"):
            call("ghost")


def test_default_file_round_trips_with_its_hierarchy(tmp_path: Path, onto: Ontology) -> None:
    again = load_ontology(write(tmp_path, onto.model_dump(mode="json")))
    assert links(again) == links(onto)
    assert again.near_synonyms == onto.near_synonyms
    assert again.hierarchy_sources == onto.hierarchy_sources


# ----------------------------------------------------------------------------- the loader's checks


def test_unknown_parent_and_source(tmp_path: Path, packaged_data: dict) -> None:
    data = copy.deepcopy(packaged_data)
    entity(data, "cardiomegaly")["parents"] = [{"id": "big_heart", "source": "chexpert"}]
    entity(data, "tension_pneumothorax")["parents"] = [{"id": "pneumothorax", "source": "radlex"}]
    msg = load_error(tmp_path, data)
    assert str(tmp_path / "onto.yaml") in msg and "2 problem(s)" in msg
    assert "entity 'cardiomegaly' names unknown parent 'big_heart'" in msg
    assert (
        "entity 'tension_pneumothorax' links to 'pneumothorax' with unknown source 'radlex' "
        "(hierarchy_sources: ['chexpert', 'chexpert-labeler', 'cxreval', 'fleischner'])"
    ) in msg


def test_a_cycle_is_reported_once_with_its_path(tmp_path: Path, packaged_data: dict) -> None:
    data = copy.deepcopy(packaged_data)
    entity(data, "lung_opacity")["parents"] = [{"id": "pneumonia", "source": "cxreval"}]
    msg = load_error(tmp_path, data)
    assert "entity 'lung_opacity' is its own ancestor: lung_opacity -> pneumonia -> consolidation -> lung_opacity" in msg
    assert msg.count("is its own ancestor") == 1


def test_an_entity_its_own_parent(tmp_path: Path, packaged_data: dict) -> None:
    data = copy.deepcopy(packaged_data)
    entity(data, "fracture")["parents"] = [{"id": "fracture", "source": "cxreval"}, {"id": "fracture", "source": "cxreval"}]
    msg = load_error(tmp_path, data)
    assert "entity 'fracture' is its own ancestor: fracture -> fracture" in msg
    assert "entity 'fracture' names parent 'fracture' more than once" in msg


def test_parents_key_missing_where_the_file_declares_a_hierarchy(tmp_path: Path, packaged_data: dict) -> None:
    data = copy.deepcopy(packaged_data)
    del entity(data, "scoliosis")["parents"]
    msg = load_error(tmp_path, data)
    assert "entity 'scoliosis' has no 'parents' key" in msg and "[] for none" in msg
    assert "1 problem(s)" in msg


def test_a_finding_under_a_differential(tmp_path: Path, packaged_data: dict) -> None:
    data = copy.deepcopy(packaged_data)
    entity(data, "pulmonary_edema")["parents"] = [{"id": "heart_failure", "source": "cxreval"}]
    msg = load_error(tmp_path, data)
    assert "entity 'pulmonary_edema' is a finding but names the differential 'heart_failure' as its parent" in msg


def test_near_synonym_members_unknown_twice_or_alone(tmp_path: Path, packaged_data: dict) -> None:
    data = copy.deepcopy(packaged_data)
    data["near_synonyms"] += [
        {"id": "ghosts", "members": ["lung_opacity", "ghost"], "source": "cxreval"},
        {"id": "alone", "members": ["scarring"], "source": "nowhere"},
        {"id": "alone", "members": ["fibrosis", "scarring"], "source": "cxreval"},
    ]
    msg = load_error(tmp_path, data)
    assert "near-synonym class 'ghosts' names unknown entity 'ghost'" in msg
    assert "entity 'lung_opacity' is in near-synonym classes 'airspace_opacity' and 'ghosts'" in msg
    assert "near-synonym class 'alone' has unknown source 'nowhere'" in msg
    assert "near-synonym class 'alone' has fewer than two members" in msg
    assert "near-synonym class 'alone' is defined more than once" in msg
    assert "entity 'scarring' is in near-synonym classes 'alone' and 'alone'" in msg


def test_a_class_may_hold_a_parent_and_child_but_nothing_between_members(tmp_path: Path, packaged_data: dict) -> None:
    """airspace_disease is-a lung_opacity in one class: allowed (near-synonymy wins). A class of
    lung_opacity and pneumonia is not: consolidation lies between them and is no member."""
    assert load_ontology(write(tmp_path, packaged_data)).near_synonym_class("airspace_disease") == "airspace_opacity"
    data = copy.deepcopy(packaged_data)
    data["near_synonyms"][0]["members"] = ["lung_opacity", "airspace_disease", "pneumonia"]
    data["near_synonyms"].pop(1)
    msg = load_error(tmp_path, data)
    assert (
        "near-synonym class 'airspace_opacity': 'consolidation' is an ancestor of member 'pneumonia' and a "
        "descendant of member 'lung_opacity'"
    ) in msg
    assert "mixes findings and differentials" in msg


def test_matched_pairs(onto: Ontology) -> None:
    """Airspace disease and consolidation name one finding, a pair that does not carry over to lung
    opacity; nodule and mass are one lesion at two sizes (Fleischner's 3 cm)."""
    assert onto.matched_pair("consolidation", "airspace_disease") == "synonym"
    assert onto.matched_pair("airspace_disease", "consolidation") == "synonym"
    assert onto.matched_pair("lung_opacity", "consolidation") is None
    assert onto.matched_pair("lung_nodule", "lung_mass") == onto.matched_pair("lung_mass", "lung_nodule") == "size"
    assert [p.members for p in onto.matched_pairs if p.how == "size"] == [("lung_nodule", "lung_mass")]


def test_matched_pair_problems(tmp_path: Path, packaged_data: dict) -> None:
    data = copy.deepcopy(packaged_data)
    data["matched_pairs"] += [
        {"members": ["lung_opacity", "ghost"], "how": "synonym", "source": "cxreval"},
        {"members": ["pneumonia", "consolidation"], "how": "synonym", "source": "nowhere"},
        {"members": ["lung_nodule", "lung_mass"], "how": "size", "source": "fleischner"},
        {"members": ["pleural_effusion", "heart_failure"], "how": "synonym", "source": "cxreval"},
    ]
    msg = load_error(tmp_path, data)
    assert "matched pair ['lung_opacity', 'ghost'] names unknown entities ['ghost']" in msg
    assert "matched pair ['pneumonia', 'consolidation'] has unknown source 'nowhere'" in msg
    assert "matched pair ['pneumonia', 'consolidation'] already match by the hierarchy" in msg
    assert "matched pair ['lung_nodule', 'lung_mass'] pairs an entity with itself or is listed twice" in msg
    assert "matched pair ['pleural_effusion', 'heart_failure'] mixes findings and differentials" in msg


# ----------------------------------------------------------------------------- user ontologies


def minimal() -> dict:
    return {
        "id": "mine",
        "version": "0.1",
        "categories": [{"id": "pleura", "name": "Pleura"}],
        "groups": [{"id": "pleural", "name": "Pleural", "category": "pleura"}],
        "entities": [
            {"id": "pneumothorax", "name": "Pneumothorax", "kind": "finding", "category": "pleura", "group": "pleural"},
            {
                "id": "tension_pneumothorax",
                "name": "Tension pneumothorax",
                "kind": "finding",
                "category": "pleura",
                "group": "pleural",
            },
        ],
    }


def test_a_user_ontology_without_hierarchy_keys_loads(tmp_path: Path) -> None:
    onto = load_ontology(write(tmp_path, minimal()))
    assert not onto.has_hierarchy and onto.near_synonyms == [] and onto.hierarchy_sources == {}
    assert all(e.parents == [] for e in onto.entities)
    assert onto.ancestors("tension_pneumothorax") == [] and onto.descendants("pneumothorax") == []
    assert onto.near_synonym_class("pneumothorax") is None


def test_a_user_hierarchy(tmp_path: Path) -> None:
    data = minimal()
    data["hierarchy_sources"] = {"mine": "my own reading"}
    data["entities"][1]["parents"] = [{"id": "pneumothorax", "source": "mine"}]
    msg = load_error(tmp_path, data)  # declares a hierarchy, so every entity must say parents
    assert "entity 'pneumothorax' has no 'parents' key" in msg
    data["entities"][0]["parents"] = []
    onto = load_ontology(write(tmp_path, data))
    assert onto.ancestors("tension_pneumothorax") == ["pneumothorax"]


def test_links_without_declared_sources_are_refused(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][1]["parents"] = [{"id": "pneumothorax", "source": "mine"}]
    data["near_synonyms"] = [{"id": "ptx", "members": ["pneumothorax", "tension_pneumothorax"], "source": "mine"}]
    msg = load_error(tmp_path, data)
    assert "entity 'tension_pneumothorax' links to 'pneumothorax' with unknown source 'mine' (hierarchy_sources: [])" in msg
    assert "near-synonym class 'ptx' has unknown source 'mine'" in msg


def test_a_malformed_link_is_a_model_error(tmp_path: Path) -> None:
    data = minimal()
    data["entities"][1]["parents"] = ["pneumothorax"]
    msg = load_error(tmp_path, data)
    assert "invalid ontology" in msg and "parents" in msg
