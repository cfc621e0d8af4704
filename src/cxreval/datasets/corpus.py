"""The project's readings corpus: every public text the rule engine's snapshot pins.

Read at run time from the shared data folder (never copied: IU X-ray is CC BY-NC-ND, the
CvT2DistilGPT2 file GPL-3.0). Ids say where each text comes from:

- ``iu/<uid>``: every IU X-ray report, as the engine reads it (:func:`~cxreval.datasets.iu_xray.report_text`);
- ``rexrank-iu-<split>/<section>/<study>``: ReXrank's IU test and validation references, each
  section a user can score (``report``, ``findings``, ``impression``);
- ``moerad/<study>``, ``cvt2distilgpt2/<study>``: the two systems' generated reports.
"""

from __future__ import annotations

from pathlib import Path

from cxreval.datasets.iu_xray import read_iu_reports, report_text
from cxreval.io import read_reports
from cxreval.literals import REPORT_SECTIONS

#: (corpus name, file under the data folder, id column) of the generated reports; the text column is ``report``.
_SYSTEMS = (
    ("moerad", "iu-gen-moerad/preds.csv", "study_id"),
    ("cvt2distilgpt2", "iu-gen-cvt2distilgpt2/test_reports_epoch-0_16-05-2023_12-46-42.csv", "dicom_id"),
)


def readings_corpus(data_dir: Path) -> dict[str, str]:
    """Text id -> text of every IU X-ray report, ReXrank IU reference and generated report.

    Empty texts (a report with no impression) are kept: the engine must read nothing in them.
    """
    texts = {f"iu/{uid}": report_text(findings, impression) for uid, _, findings, impression in read_iu_reports(data_dir)}
    for split in ("test", "valid"):
        path = data_dir / "rexrank-iu" / f"ReXRank_IUXray_{split}.json"
        for section in REPORT_SECTIONS:
            for study, text in read_reports(path, section=section).items():
                texts[f"rexrank-iu-{split}/{section}/{study}"] = text
    for name, file, id_col in _SYSTEMS:
        for study, text in read_reports(data_dir / file, id_col=id_col, text_col="report").items():
            texts[f"{name}/{study}"] = text
    return texts
