"""`cxreval agree` on IU X-ray: the rule engine's CheXpert-14 labels vs the MeSH-derived gold.

Both sides are projected onto CheXpert-14 through the ontology's mappings: the gold from the
entities its MeSH codes map to (positive, else blank), the engine from its extractions (positive,
negative, uncertain or blank). "No Finding" follows the CheXpert labeler rule on both sides.
Blank counts as negative; uncertain as negative (`--uncertain` changes it). The label files are
written to a scratch folder (they hold no report text) and the real command is run on them.

Run: python benchmarks/iu_agree.py [--split val,test] [--uncertain negative|positive|exclude] [--format table|latex]
Data: ../shared/data/iu-xray (CC BY-NC-ND 4.0, read at run time), Rad-ReStruct splits.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
from _data import data_dir

from cxreval.datasets.iu_xray import load_iu_gold
from cxreval.extract.models import EntityState
from cxreval.extract.rules import RuleExtractor
from cxreval.ontology import load_ontology
from cxreval.scores.labels import project_states


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--split", default="val,test")
    ap.add_argument("--uncertain", default="negative", choices=["negative", "positive", "exclude"])
    ap.add_argument("--format", default="table", choices=["table", "latex", "json", "csv"])
    ap.add_argument("--workdir", help="keep the label files here (default: a temporary folder)")
    args = ap.parse_args()
    splits = [s.strip() for s in args.split.split(",")]
    onto = load_ontology()
    extractor = RuleExtractor(onto)
    gold = load_iu_gold(data_dir(), onto, splits=splits)  # type: ignore[arg-type]
    pred_rows, gold_rows = {}, {}
    for report in gold:
        pred_rows[report.uid] = project_states(extractor.extract(report.text).states(), onto, "chexpert14")
        coded = {e: EntityState(entity=e, status="present") for e in report.entities}
        gold_rows[report.uid] = project_states(coded, onto, "chexpert14")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.workdir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        pred_file, gold_file = folder / "rules_chexpert14.csv", folder / "mesh_gold_chexpert14.csv"
        for rows, path in ((pred_rows, pred_file), (gold_rows, gold_file)):
            pd.DataFrame.from_dict(rows, orient="index").rename_axis("id").to_csv(path)
        print(f"data: IU X-ray MeSH gold, split {'+'.join(splits)}, {len(gold)} reports; engine {extractor.signature}")
        cmd = [
            sys.executable,
            "-m",
            "cxreval",
            "agree",
            str(pred_file),
            "--gold",
            str(gold_file),
            "--labelset",
            "chexpert14",
            "--uncertain",
            args.uncertain,
            "--format",
            args.format,
        ]
        print("$ cxreval agree " + " ".join(cmd[4:]))
        sys.exit(subprocess.run(cmd).returncode)


if __name__ == "__main__":
    main()
