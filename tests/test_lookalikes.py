"""Look-alike letters in scored pairs (issue 27, item 7): read as the letters they imitate,
counted per pair in errors.csv, warned about once per run, on the batch and the streaming paths."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

from cxreval import Evaluator
from cxreval.evaluate import LookalikeWarning
from cxreval.extract.text import lookalike_count
from cxreval.io import ReportPair
from cxreval.streaming import evaluate_to

PAIRS = [
    ReportPair(pair_id="plain", reference="Right pneumothorax.", candidate="Right pneumothorax."),
    # a Cyrillic "о" twice: the candidate still states the pneumothorax
    ReportPair(pair_id="cyrillic", reference="Right pneumothorax.", candidate="Right pneum\u043eth\u043erax."),
    # a combining accent in the reference, a dotless i in the candidate
    ReportPair(pair_id="accents", reference="Left pleural effu\u0301sion.", candidate="Left pleural effus\u0131on."),
]


def test_counts() -> None:
    assert lookalike_count("Right pneumothorax.") == 0
    assert lookalike_count("Right pneum\u043eth\u043erax.") == 2
    assert lookalike_count("Pneumo\u0301thorax.") == 1  # a combining accent put on a letter
    assert lookalike_count("L\u00f6fgren syndrome; Sj\u00f6gren.") == 0  # precomposed letters people write
    assert (
        lookalike_count("\u041d\u0435\u0442 \u043f\u043d\u0435\u0432\u043c\u043e\u0442\u043e\u0440\u0430\u043a\u0441\u0430.") == 0
    )  # Russian, not mixed


def test_errors_csv_counts_them_and_one_warning_says_so(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = Evaluator().evaluate(PAIRS)
    said = [w for w in seen if issubclass(w.category, LookalikeWarning)]
    assert len(said) == 1 and "2 pairs" in str(said[0].message)
    assert int(result.errors.loc["cyrillic", "errors"]) == 0  # read as what it imitates: no error
    table = result.errors_table()
    assert table["lookalikes"].to_dict() == {"plain": 0, "cyrillic": 2, "accents": 2}
    result.save(tmp_path / "batch")
    batch = pd.read_csv(tmp_path / "batch" / "errors.csv", dtype={"pair_id": str}).set_index("pair_id")
    assert batch["lookalikes"].to_dict() == {"plain": 0, "cyrillic": 2, "accents": 2}

    with pytest.warns(LookalikeWarning, match="2 pairs"):
        evaluate_to(Evaluator(), tmp_path / "stream", iter(PAIRS))
    stream = pd.read_csv(tmp_path / "stream" / "errors.csv", dtype={"pair_id": str}).set_index("pair_id")
    pd.testing.assert_frame_equal(stream, batch)


def test_no_warning_and_zeros_for_plain_text() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", LookalikeWarning)
        result = Evaluator().evaluate(PAIRS[:1])
    assert result.errors_table()["lookalikes"].tolist() == [0]
