"""The IU X-ray gold-standard builder and the extraction-accuracy scorer, on data we write."""

from __future__ import annotations

import csv
import json

import pytest

from cxreval.datasets.iu_xray import load_iu_gold, report_text
from cxreval.extract import default_extractor
from cxreval.extract.models import EntityState
from cxreval.meta.extraction_accuracy import (
    CODERS_POLICY,
    counts_as_positive,
    disagreements,
    evaluate_extraction,
    mesh_universe,
)
from cxreval.ontology import load_ontology
from tests.conftest import shared_data_dir

ROWS = [
    # uid, MeSH, findings, impression
    ("1", "normal", "The lungs are clear. No pleural effusion.", "Normal chest."),
    ("2", "Pleural Effusion/left/small;Cardiomegaly/mild", "Small left pleural effusion. Mild cardiomegaly.", ""),
    ("3", "Opacity/lung/base/right;Pneumonia", "Right basilar opacity.", "May represent pneumonia."),
    ("4", "No Indexing", "Something.", ""),
    ("5", "Catheters, Indwelling/right", "Right PICC tip in the SVC.", ""),
    (
        "6",
        "Calcinosis/aorta;Fractures, Bone/ribs/left;Technical Quality of Image Unsatisfactory",
        "Calcified aorta. Old left rib fracture. Patient is rotated.",
        "",
    ),
    ("7", "Pleural Effusion/right;Pleural Effusion/left", "", "Bilateral effusions."),
    ("8", "Cardiomegaly", "", ""),
    ("9", "normal", "Lungs are clear.", ""),
]


@pytest.fixture
def data_dir(tmp_path):
    iu = tmp_path / "iu-xray"
    iu.mkdir()
    with (iu / "indiana_reports.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["uid", "MeSH", "Problems", "image", "indication", "comparison", "findings", "impression"])
        for uid, mesh, findings, impression in ROWS:
            w.writerow([uid, mesh, "", "", "", "", findings, impression])
    splits = tmp_path / "radrestruct-template"
    splits.mkdir()
    (splits / "train_ids.json").write_text(json.dumps(["1", "2", "3"]))
    (splits / "val_ids.json").write_text(json.dumps(["5", "6"]))
    (splits / "test_ids.json").write_text(json.dumps(["7", "8", "9"]))
    return tmp_path


def test_gold_builder(data_dir):
    gold = {g.uid: g for g in load_iu_gold(data_dir)}
    # No Indexing and text-less reports are left out
    assert set(gold) == {"1", "2", "3", "5", "6", "7", "9"}
    assert gold["1"].normal and gold["1"].entities == {}
    eff = gold["2"].entities["pleural_effusion"]
    assert (eff.side, eff.severity, eff.codes) == ("left", "mild", ("Pleural Effusion/left/small",))
    # two codes of one entity merge: two sides make it bilateral
    assert gold["7"].entities["pleural_effusion"].side == "bilateral"
    assert gold["2"].split == "train" and gold["7"].split == "test"
    assert gold["2"].text == "Findings: Small left pleural effusion. Mild cardiomegaly."
    # generic headings accept the family
    assert "picc" in gold["5"].entities["central_venous_catheter"].accept
    assert "rotation" in gold["6"].entities["limited_exam"].accept


def test_split_filter_and_missing_data(data_dir, tmp_path):
    assert [g.uid for g in load_iu_gold(data_dir, splits=["val"])] == ["5", "6"]
    with pytest.raises(FileNotFoundError, match="indiana_reports.csv"):
        load_iu_gold(tmp_path / "nowhere")


def test_report_text():
    assert report_text("A.", " ") == "Findings: A."
    assert report_text("", "B.") == "Impression: B."


def test_accuracy_arithmetic(data_dir):
    onto = load_ontology()
    ex = default_extractor()
    gold = load_iu_gold(data_dir, onto)
    acc = evaluate_extraction(gold, ex.extract, onto, data="fake", engine=ex.signature, min_support=1)
    rows = {r.entity: r.presence for r in acc.entities}
    assert (rows["pleural_effusion"].tp, rows["pleural_effusion"].fn, rows["pleural_effusion"].fp) == (2, 0, 0)
    # "May represent pneumonia": a possible-grade hedge, which the coders' policy does not count -> FN
    assert rows["pneumonia"].fn == 1 and rows["pneumonia"].tp == 0
    # the PICC satisfies the generic catheter code; the rotation satisfies the technical-quality code
    assert rows["central_venous_catheter"].tp == 1
    assert rows["limited_exam"].tp == 1
    assert acc.normal.tp == 2 and acc.normal.fp == 0 and acc.normal.fn == 0
    assert acc.side.accuracy == 1.0 and acc.severity.accuracy == 1.0
    total = acc.micro
    assert total.tp == sum(r.tp for r in rows.values())
    assert acc.universe == len(mesh_universe(onto))
    listed = disagreements(gold, ex.extract, onto)
    assert [(d.uid, d.kind, d.entity) for d in listed] == [("3", "FN", "pneumonia")]


def test_coders_policy_reads_the_engine_grades():
    """The benchmark keeps no hedge list: the engine's grade and the named policy decide."""
    assert CODERS_POLICY == "probable-alternative"
    hedge = lambda grade: EntityState(entity="x", status="uncertain", certainty=grade)
    assert counts_as_positive(hedge("alternative"))  # "atelectasis or scarring"
    assert counts_as_positive(hedge("probable"))  # "probable pneumonia", "most suggestive of edema"
    assert not counts_as_positive(hedge("possible"))  # "may represent", "differential includes"
    assert counts_as_positive(hedge("possible"), "positive")
    assert not counts_as_positive(EntityState(entity="x", status="absent"), "positive")
    assert counts_as_positive(hedge("possible"), frozenset({"possible"}))


@pytest.mark.parametrize(
    "text, entity, counted",
    [
        ("Opacities most suggestive of pulmonary edema.", "pulmonary_edema", True),
        ("Findings suggestive of emphysema.", "emphysema", False),
        ("Atelectasis versus scarring.", "scarring", True),
        ("Streaky opacities, differential diagnosis includes pneumonia.", "pneumonia", False),
        ("May represent pneumonia.", "pneumonia", False),
        ("Probable pneumonia.", "pneumonia", True),
    ],
)
def test_hedged_sentences_under_the_coders_policy(text, entity, counted):
    state = default_extractor().extract(text).states()[entity]
    assert state.status == "uncertain"
    assert counts_as_positive(state) is counted


@pytest.mark.skipif(shared_data_dir() is None, reason="shared data not present")
def test_real_iu_gold_has_the_documented_shape():
    gold = load_iu_gold(shared_data_dir())
    by_split = {s: sum(g.split == s for g in gold) for s in ("train", "val", "test")}
    assert by_split == {"train": 2858, "val": 357, "test": 359}
    assert sum(len(g.unmapped) for g in gold) <= 3


def test_one_finding_coded_under_two_headings_is_one_entity():
    """A nodule coded with a Calcinosis code of the same qualifiers is one calcified nodule."""
    from cxreval.datasets.iu_xray import join_same_findings, load_same_finding
    from cxreval.ontology.mesh import MeshMapper, parse_mesh_field

    onto = load_ontology()
    mapper = MeshMapper(onto)
    same = load_same_finding()

    def entities(field: str) -> list[str]:
        matches = [mapper.map_code(c) for c in parse_mesh_field(field)]
        return [m.entity_id for m in join_same_findings([m for m in matches if m], same)]

    # same qualifiers: the nodule joins the calcification's entity
    assert entities("Nodule/lung/base/right;Calcinosis/lung/base/right") == ["calcified_granuloma"] * 2
    assert entities("Density/lung/apex/left;Nodule/lung/apex/left") == ["lung_nodule"] * 2
    # different qualifiers, or none: two findings
    assert entities("Nodule/lung/base/right;Calcinosis/lung/base/left") == ["lung_nodule", "calcified_granuloma"]
    assert entities("Nodule;Calcinosis") == ["lung_nodule", "calcified_granuloma"]
    # only the listed pairs join (a granuloma beside a nodule stays two entities)
    assert entities("Nodule/lung/hilum/right;Granuloma/lung/hilum/right") == ["lung_nodule", "granuloma"]


def test_joined_codes_merge_in_the_gold_standard(tmp_path):
    iu = tmp_path / "iu-xray"
    iu.mkdir()
    with (iu / "indiana_reports.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["uid", "MeSH", "findings", "impression"])
        w.writerow(
            [
                "1",
                "Nodule/lung/upper lobe/left/small;Calcinosis/lung/upper lobe/left/small",
                "A small calcified nodule in the left upper lobe.",
                "",
            ]
        )
    gold = load_iu_gold(tmp_path)[0]
    assert set(gold.entities) == {"calcified_granuloma"}
    entity = gold.entities["calcified_granuloma"]
    assert entity.side == "left" and len(entity.codes) == 2
