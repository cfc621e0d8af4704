"""Public datasets read in their own layouts (cxreval.io.datasets), on synthetic files written here.

The report texts below are made up in each dataset's layout; no dataset text is used."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from cxreval.bench.config import load_config
from cxreval.bench.runner import run_benchmark
from cxreval.cli import app
from cxreval.io import InputError, StudiesWithoutText, load_layout, read_pair_files, read_reports
from cxreval.io.datasets import compose_report, mimic_section_name, mimic_sections

# -- MIMIC-CXR: the report tree and the official sectioned CSV ------------------------------------

#: Made-up reports in MIMIC-CXR's text layout (lines start with one space, headers in capitals).
MIMIC = {
    ("p10", "p10000001", "s50000001"): (
        "                                 FINAL REPORT\n"
        " EXAMINATION:  CHEST (PA AND LAT)\n \n"
        " INDICATION:  ___ with cough.\n \n"
        " COMPARISON:  None.\n \n"
        " FINDINGS: \n \n"
        " Large right pleural effusion.  No pneumothorax.\n \n"
        " IMPRESSION: \n \n"
        " Large right pleural effusion.\n"
    ),
    # a view line as header: the official rules make it findings; an empty FINDINGS is dropped
    ("p10", "p10000001", "s50000002"): (
        "                                 FINAL REPORT\n"
        " INDICATION:  Fever.\n \n"
        " FINDINGS: \n \n"
        " PA AND LATERAL CHEST:  Left lower lobe consolidation.\n \n"
        " IMPRESSON:  Pneumonia in the left lower lobe.\n"
    ),
    # neither findings nor impression: the last paragraph is a section of its own
    ("p11", "p11000002", "s50000003"): (
        "                                 FINAL REPORT\n"
        " WET READ:  normal heart size\n \n"
        " Heart size is normal.  Lungs are clear.\n"
    ),
    # two impressions: the last one counts; FINDINGS AND IMPRESSION is an impression
    ("p11", "p11000002", "s50000004"): (
        "                                 FINAL REPORT\n"
        " IMPRESSION:  Cardiomegaly.\n \n"
        " FINDINGS AND IMPRESSION:  Mild cardiomegaly.  Small left effusion.\n"
    ),
    # sectioned by hand in the official tool (custom_mimic_cxr_rules): left out of both layouts
    ("p11", "p11851243", "s50913680"): " FINDINGS:  Clear lungs.\n \n IMPRESSION:  Normal.\n",
}

#: What the official create_section_files.py writes for these reports (mimic_cxr_sectioned.csv).
SECTIONED = [
    {
        "study": "s50000001",
        "impression": "Large right pleural effusion.",
        "findings": "Large right pleural effusion.  No pneumothorax.",
        "last_paragraph": "",
        "comparison": "None.",
    },
    {
        "study": "s50000002",
        "impression": "Pneumonia in the left lower lobe.",
        "findings": "Left lower lobe consolidation.",
        "last_paragraph": "",
        "comparison": "",
    },
    {
        "study": "s50000003",
        "impression": "",
        "findings": "",
        "last_paragraph": "Heart size is normal.  Lungs are clear.",
        "comparison": "",
    },
    {
        "study": "s50000004",
        "impression": "Mild cardiomegaly.  Small left effusion.",
        "findings": "",
        "last_paragraph": "",
        "comparison": "",
    },
]


def _mimic_tree(root: Path) -> Path:
    files = root / "files"
    for (group, patient, study), text in MIMIC.items():
        folder = files / group / patient
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{study}.txt").write_text(text, encoding="utf-8")
    (files / "p10" / "index.html").write_text("not a report", encoding="utf-8")  # other files are not read
    crlf = files / "p11" / "p11000002" / "s50000003.txt"  # Windows line ends read as the official tool's text mode does
    crlf.write_bytes(crlf.read_bytes().replace(b"\n", b"\r\n"))
    return files


def _csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_mimic_section_names_follow_the_official_rules() -> None:
    assert mimic_section_name("IMPRESSON") == "impression"  # a typo the official list names
    assert mimic_section_name("Findings/Impression") == "impression"
    assert mimic_section_name("REASON FOR EXAM") == "indication"
    assert mimic_section_name("FINAL IMPRESSION") == "impression"  # a main section named inside
    assert mimic_section_name("PORTABLE UPRIGHT") == "findings"  # a view line
    assert mimic_section_name("OTHER NOTE") == "other note"  # anything else keeps its name


def test_mimic_tree_gives_the_sections_of_the_official_sectioned_csv(tmp_path: Path) -> None:
    tree = _mimic_tree(tmp_path)
    table = load_layout(tree, "mimic-cxr")
    by_id = {r.key: r.values for r in table.records}
    assert sorted(by_id) == ["s50000001", "s50000002", "s50000003", "s50000004"]  # the hand-sectioned one is out
    for row in SECTIONED:
        got = by_id[row["study"]]
        assert (got["section_findings"] or "", got["section_impression"] or "") == (row["findings"], row["impression"])
        assert (got["last_paragraph"] or "", got["comparison"] or "") == (row["last_paragraph"], row["comparison"])
    assert by_id["s50000001"]["subject"] == "p10000001"
    # and the sectioned CSV layout reads the same texts
    sectioned = {
        r.key: r.values for r in load_layout(_csv(tmp_path / "mimic_cxr_sectioned.csv", SECTIONED), "mimic-cxr-sectioned").records
    }
    for study, values in by_id.items():
        for field in ("section_findings", "section_impression", "report"):
            assert sectioned[study][field] == values[field], (study, field)


def test_mimic_sections_of_one_report() -> None:
    text = MIMIC[("p10", "p10000001", "s50000001")]
    assert mimic_sections(text) == {
        "impression": "Large right pleural effusion.",
        "findings": "Large right pleural effusion.  No pneumothorax.",
        "comparison": "None.",
    }
    assert compose_report("A.", "B.") == "Findings: A. Impression: B."
    assert compose_report(None, "B.") == "Impression: B."


def test_references_by_section_leave_out_studies_without_it(tmp_path: Path) -> None:
    tree = _mimic_tree(tmp_path)
    with pytest.warns(StudiesWithoutText, match="2 of 4 studies"):
        findings = read_reports(tree, layout="mimic-cxr", section="findings")
    assert findings == {
        "s50000001": "Large right pleural effusion.  No pneumothorax.",
        "s50000002": "Left lower lobe consolidation.",
    }
    report = read_reports(tree, layout="mimic-cxr", section="report")["s50000002"]
    assert report == "Findings: Left lower lobe consolidation. Impression: Pneumonia in the left lower lobe."
    # any other field is a text too, named as a column is
    assert read_reports(tree, layout="mimic-cxr", text_col="last_paragraph") == {
        "s50000003": "Heart size is normal.  Lungs are clear."
    }


def test_the_dataset_is_a_pool_but_every_candidate_needs_its_reference(tmp_path: Path) -> None:
    tree = _mimic_tree(tmp_path)
    cands = _csv(tmp_path / "c.csv", [{"id": "s50000002", "candidate": "Left lower lobe pneumonia."}])
    pairs = read_pair_files(tree, cands, reference_layout="mimic-cxr", section="impression")
    assert [(p.pair_id, p.reference) for p in pairs] == [("s50000002", "Pneumonia in the left lower lobe.")]
    missing = _csv(tmp_path / "m.csv", [{"id": "s50000003", "candidate": "Clear lungs."}])  # has no findings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudiesWithoutText)
        with pytest.raises(InputError, match="s50000003.*id has no reference"):
            read_pair_files(tree, missing, reference_layout="mimic-cxr", section="findings")


def test_evaluate_reads_the_report_tree(tmp_path: Path) -> None:
    tree = _mimic_tree(tmp_path)
    cands = _csv(
        tmp_path / "c.csv",
        [
            {"id": "s50000001", "candidate": "Small right pleural effusion."},
            {"id": "s50000002", "candidate": "No consolidation."},
        ],
    )
    args = ["evaluate", "--refs", str(tree), "--refs-layout", "mimic-cxr", "--section", "findings"]
    res = CliRunner().invoke(app, [*args, "--cands", str(cands), "--out", str(tmp_path / "out"), "--json"])
    assert res.exit_code == 0, res.output
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["n_pairs"] == 2
    assert "2 of 4 studies" in res.output  # what the pool left out is said
    res = CliRunner().invoke(
        app, ["evaluate", "--pairs", str(cands), "--refs-layout", "mimic-cxr", "--out", str(tmp_path / "o2")]
    )
    assert res.exit_code == 2 and "--refs-layout" in res.output


# -- CheXpert Plus, ReXGradient, ReXrank ------------------------------------------------------------


def _chexpert_plus(path: Path) -> Path:
    rows = []
    for study, split, findings, impression in [
        ("train/patient00001/study1", "train", "Small left pleural effusion.", "Left effusion."),
        ("valid/patient00002/study1", "valid", "The lungs are clear.", "No acute disease."),
        ("valid/patient00003/study2", "valid", "", "Right upper lobe pneumonia."),
    ]:
        for view in ("view1_frontal.jpg", "view2_lateral.jpg"):
            rows.append(
                {
                    "path_to_image": f"{study}/{view}",
                    "deid_patient_id": study.split("/")[1],
                    "report": f"FINDINGS: {findings} IMPRESSION: {impression}",
                    "section_findings": findings,
                    "section_impression": impression,
                    "split": split,
                }
            )
    return _csv(path, rows)


def test_chexpert_plus_one_study_per_folder(tmp_path: Path) -> None:
    path = _chexpert_plus(tmp_path / "df_chexpert_plus_240401.csv")
    impressions = read_reports(path, layout="chexpert-plus", section="impression", where={"split": "valid"})
    assert impressions == {
        "valid/patient00002/study1": "No acute disease.",
        "valid/patient00003/study2": "Right upper lobe pneumonia.",
    }
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    rows[1]["section_findings"] = "Another text."  # the lateral image's row disagrees with the frontal's
    with pytest.raises(InputError, match=r"line 3 \(id 'train/patient00001/study1'\).*another text than at line 2"):
        read_reports(_csv(tmp_path / "bad.csv", rows), layout="chexpert-plus", section="findings")
    with pytest.raises(InputError, match="no such field to select on"):
        read_reports(path, layout="chexpert-plus", where={"fold": "1"})


def test_rexgradient_metadata_csv_and_json(tmp_path: Path) -> None:
    rows = [
        {"id": "GRDN1_s1", "Findings": "Heart is enlarged.", "Impression": "Cardiomegaly.", "split": "test"},
        {"id": "GRDN2_s1", "Findings": "No effusion.", "Impression": "", "split": "test"},
    ]
    path = _csv(tmp_path / "test_metadata.csv", rows)
    assert read_reports(path, layout="rexgradient", section="report") == {
        "GRDN1_s1": "Findings: Heart is enlarged. Impression: Cardiomegaly.",
        "GRDN2_s1": "Findings: No effusion.",
    }
    keyed = tmp_path / "test_metadata.json"
    keyed.write_text(json.dumps({r["id"]: {k: v for k, v in r.items() if k != "id"} for r in rows}))
    assert read_reports(keyed, layout="rexgradient", section="findings") == {
        "GRDN1_s1": "Heart is enlarged.",
        "GRDN2_s1": "No effusion.",
    }
    no_id = _csv(tmp_path / "x.csv", [{"Findings": "a", "Impression": "b"}])
    with pytest.raises(InputError, match="needs a study id"):
        read_reports(no_id, layout="rexgradient")


def test_rexrank_json_of_any_dataset(tmp_path: Path) -> None:
    path = tmp_path / "ReXRank_MIMICCXR_test.json"
    path.write_text(
        json.dumps(
            {
                "mimic_1": {"section_findings": "Lungs clear.", "section_impression": None, "reports": "Findings: Lungs clear."},
                "mimic_2": {"section_findings": None, "section_impression": "Edema.", "reports": "Impression: Edema."},
            }
        )
    )
    with pytest.warns(StudiesWithoutText, match="1 of 2"):
        assert read_reports(path, layout="rexrank", section="findings") == {"mimic_1": "Lungs clear."}
    assert read_reports(path, layout="rexrank", section="report") == {
        "mimic_1": "Findings: Lungs clear.",
        "mimic_2": "Impression: Edema.",
    }


def test_a_file_not_in_the_layout_says_what_is_missing(tmp_path: Path) -> None:
    other = _csv(tmp_path / "other.csv", [{"id": "1", "report": "x"}])
    with pytest.raises(InputError, match="'path_to_image'.*column of this layout is missing"):
        load_layout(other, "chexpert-plus")
    with pytest.raises(InputError, match="report tree"):
        load_layout(other, "mimic-cxr")


# -- one benchmark over two datasets in their own layouts ----------------------------------------


def test_bench_config_over_two_dataset_layouts(tmp_path: Path) -> None:
    _mimic_tree(tmp_path)
    sectioned = _csv(tmp_path / "mimic_cxr_sectioned.csv", SECTIONED)
    chexpert = _chexpert_plus(tmp_path / "df_chexpert_plus_240401.csv")
    split = _csv(
        tmp_path / "mimic-cxr-2.0.0-split.csv",
        [
            {"dicom_id": f"d{n}", "study_id": study, "subject_id": "10000001", "split": split}
            for n, (study, split) in enumerate(
                [("50000001", "test"), ("50000001", "test"), ("50000002", "test"), ("50000004", "train")]
            )
        ],
    )
    mimic_test_preds = _csv(
        tmp_path / "mimic_test_preds.csv",
        [{"id": "s50000001", "report": "Small right pleural effusion."}, {"id": "s50000002", "report": "Clear lungs."}],
    )
    mimic_preds = _csv(
        tmp_path / "mimic_preds.csv",
        [
            {"id": "s50000001", "report": "Small right pleural effusion."},
            {"id": "s50000002", "report": "Left lower lobe pneumonia."},
            {"id": "s50000004", "report": "Normal heart size."},
        ],
    )
    chexpert_preds = _csv(
        tmp_path / "chexpert_preds.csv",
        [
            {"id": "valid/patient00002/study1", "report": "No acute disease."},
            {"id": "valid/patient00003/study2", "report": "No acute disease."},
        ],
    )
    cfg = {
        "name": "two-layouts",
        "out": str(tmp_path / "out"),
        "metrics": ["spec-errors"],
        "bootstrap": {"resamples": 0},
        "datasets": [
            {
                "name": "mimic",
                "references": {"path": str(sectioned), "layout": "mimic-cxr-sectioned", "section": "impression"},
            },
            {  # the report tree, its test split chosen by the official split file (one row per image)
                "name": "mimic-test",
                "references": {
                    "path": str(tmp_path / "files"),
                    "layout": "mimic-cxr",
                    "section": "findings",
                    "studies": {"path": str(split), "id_col": "study_id", "where": {"split": "test"}},
                },
            },
            {
                "name": "chexpert-plus-valid",
                "references": {
                    "path": str(chexpert),
                    "layout": "chexpert-plus",
                    "section": "impression",
                    "where": {"split": "valid"},
                },
            },
        ],
        "systems": [
            {"name": "model-m", "path": str(mimic_preds), "text_col": "report", "datasets": ["mimic"]},
            {"name": "model-t", "path": str(mimic_test_preds), "text_col": "report", "datasets": ["mimic-test"]},
            {"name": "model-c", "path": str(chexpert_preds), "text_col": "report", "datasets": ["chexpert-plus-valid"]},
            {"name": "copy-reference", "baseline": "copy-reference"},
        ],
    }
    path = tmp_path / "bench.yaml"
    path.write_text(yaml.safe_dump(cfg))
    said: list[str] = []
    result, stats = run_benchmark(load_config(path), warn=said.append)
    assert (
        said
        == stats.warnings
        == [
            f"dataset 'mimic': 1 of 4 studies in {sectioned} have no 'section_impression' and are not references",
            f"dataset 'mimic-test': 1 studies in {tmp_path / 'files'} are sectioned by hand in the official tool and "
            "left out, as its mimic_cxr_sectioned.csv leaves them out",
        ]
    )
    assert result.datasets == ["mimic", "mimic-test", "chexpert-plus-valid"]
    boards = {d: {r.system: r for r in result.leaderboard(d).rows} for d in result.datasets}
    assert set(boards["mimic"]) == {"model-m", "copy-reference"}
    assert set(boards["chexpert-plus-valid"]) == {"model-c", "copy-reference"}
    assert boards["mimic"]["model-m"].n_pairs == 3  # the studies with an impression
    assert boards["mimic-test"]["model-t"].n_pairs == 2  # the test split's studies, each once
    assert boards["chexpert-plus-valid"]["model-c"].n_pairs == 2  # the valid split only
    assert boards["chexpert-plus-valid"]["copy-reference"].metrics["spec-errors"].value == 0.0
    # model-c missed the pneumonia of one study of two: errors per report above zero
    assert boards["chexpert-plus-valid"]["model-c"].metrics["spec-errors"].value > 0


# -- what a fresh reading of the readers found ---------------------------------------------------


def test_parquet_layouts_read_every_column(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [
        {"id": "GRDN1_s1", "Findings": "Heart is enlarged.", "Impression": "Cardiomegaly.", "split": "test", "PatientAge": 61.0},
        {"id": "GRDN2_s1", "Findings": "No effusion.", "Impression": None, "split": "valid", "PatientAge": None},
    ]
    path = tmp_path / "test_metadata.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert read_reports(path, layout="rexgradient", section="findings", where={"split": "test"}) == {
        "GRDN1_s1": "Heart is enlarged."
    }
    # numbers and text compare as text; an absent value matches nothing
    assert list(read_reports(path, layout="rexgradient", section="findings", where={"PatientAge": 61})) == ["GRDN1_s1"]
    assert list(read_reports(path, layout="rexgradient", section="findings", where={"PatientAge": ["61", "None"]})) == [
        "GRDN1_s1"
    ]
    with pytest.raises(InputError, match=r"no study meets the selection .*split: test, valid"):
        read_reports(path, layout="rexgradient", where={"split": "validation"})


def test_ids_and_texts_of_the_wrong_type_are_reported_not_guessed(tmp_path: Path) -> None:
    path = tmp_path / "meta.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": None, "Findings": "Clear.", "Impression": ""},
                {"id": 7.5, "Findings": "Effusion.", "Impression": ""},
                {"id": "S3", "Findings": 5, "Impression": ""},
            ]
        )
    )
    with pytest.raises(InputError) as err:
        read_reports(path, layout="rexgradient", section="findings")
    text = str(err.value)
    assert "line 1, field 'id': empty id (null)" in text
    assert "line 2, field 'id': id must be text or an integer" in text
    assert "line 3 (id 'S3'), field 'section_findings': expected report text, got number" in text


def test_a_named_id_column_is_the_one_used_or_refused_with_the_reason(tmp_path: Path) -> None:
    rows = [
        {"id": "a1", "StudyInstanceUid": "1.2.3", "Findings": "Clear.", "Impression": "Normal."},
        {"id": "a2", "StudyInstanceUid": "1.2.4", "Findings": "Effusion.", "Impression": "Effusion."},
    ]
    path = _csv(tmp_path / "test_metadata.csv", rows)
    assert list(read_reports(path, layout="rexgradient", id_col="StudyInstanceUid", section="findings")) == ["1.2.3", "1.2.4"]
    tree = _mimic_tree(tmp_path)
    with pytest.raises(InputError, match="names its study ids itself.*--cand-id-col"):
        read_reports(tree, layout="mimic-cxr", id_col="study")
    # --id-col with a layout names the candidates' column only
    cands = _csv(tmp_path / "c.csv", [{"study": "s50000002", "candidate": "Pneumonia."}])
    pairs = read_pair_files(tree, cands, id_col="study", reference_layout="mimic-cxr", section="impression")
    assert [p.pair_id for p in pairs] == ["s50000002"]


def test_what_leaves_the_pool_is_counted_and_named(tmp_path: Path) -> None:
    tree = _mimic_tree(tmp_path)
    with pytest.warns(StudiesWithoutText, match="1 studies .* sectioned by hand"):
        load_layout(tree, "mimic-cxr")
    cands = _csv(tmp_path / "c.csv", [{"id": "s50000003", "candidate": "Clear."}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudiesWithoutText)
        with pytest.raises(
            InputError, match=r"id has no reference in .* \(the study is in the dataset but has no 'section_findings'\)"
        ):
            read_pair_files(tree, cands, reference_layout="mimic-cxr", section="findings")


def test_chexpert_plus_keeps_study_fields_and_its_own_report_column(tmp_path: Path) -> None:
    path = _chexpert_plus(tmp_path / "df.csv")
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    for i, row in enumerate(rows):
        row["frontal_lateral"] = "Frontal" if i % 2 == 0 else "Lateral"  # one value per image
    table = load_layout(_csv(tmp_path / "views.csv", rows), "chexpert-plus")
    assert "frontal_lateral" not in table.columns  # a field of one image is no field of the study
    assert {"split", "deid_patient_id", "release_report"} <= set(table.columns)
    first = table.records[0].values
    assert first["release_report"].startswith("FINDINGS: Small left pleural effusion.")  # the release's column, kept
    assert first["report"] == "Findings: Small left pleural effusion. Impression: Left effusion."
