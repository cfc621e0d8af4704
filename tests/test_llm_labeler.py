"""The Ran-style LLM labeler: exemplar library, schema, validation, and a run against loopback."""

from __future__ import annotations

import pytest

from cxreval import ReportPair
from cxreval.labelers import (
    LLMLabeler,
    answer_json,
    label_key,
    label_reports,
    llm_label_metrics,
    load_exemplars,
)
from cxreval.llm.schemas import AnswerError
from cxreval.ontology import load_ontology
from cxreval.scores.labels import label_metrics, project_states
from cxreval.testing.loopback import LoopbackServer

from .llm_support import loop_config


@pytest.fixture(scope="module")
def onto():
    return load_ontology()


def test_exemplar_library_covers_ran21(onto):
    lib = load_exemplars("ran21")
    assert set(lib.labels) == set(onto.labelsets["ran21"].labels)
    assert all(ex.positive and ex.negative for ex in lib.labels.values())
    assert lib.signature == "ran21-exemplars@2"


def test_prompt_and_schema(onto, tmp_path):
    lab = LLMLabeler(onto, loop_config("http://127.0.0.1:9/v1", tmp_path / "c.sqlite"))
    assert len(lab.schema["properties"]) == 21 and lab.schema["required"] == list(lab.keys)
    assert all(v == {"type": "integer", "enum": [1, 0, -1]} for v in lab.schema["properties"].values())
    user = lab.messages("Small left pleural effusion.")[1]["content"]
    assert "pleural_effusion (Pleural Effusion)" in user and "Small left pleural effusion." in user
    assert '"Bibasilar subsegmental atelectasis."' in user  # an exemplar made it into the prompt
    assert lab.prompt_signature == "labels@3+ran21-exemplars@2"
    assert label_key("Calcification (Lung/Mediastinal)") == "calcification_lung_mediastinal"


def test_answers_are_validated(onto, tmp_path):
    lab = LLMLabeler(onto, loop_config("http://127.0.0.1:9/v1", tmp_path / "c.sqlite"))
    good = {label: 0 for label in lab.labels} | {"Pleural Effusion": 1}
    parsed = lab.parse(answer_json(good))
    assert {i["label"]: i["value"] for i in parsed.items}["Pleural Effusion"] == 1
    assert lab.parse(answer_json(good).replace(": 1", ": true")).items  # booleans accepted
    with pytest.raises(AnswerError, match="pneumothorax: missing"):
        lab.parse(answer_json({k: v for k, v in good.items() if k != "Pneumothorax"}))
    with pytest.raises(AnswerError, match="is not 1, 0 or -1"):
        lab.parse(answer_json(good).replace('"atelectasis": 0', '"atelectasis": 2'))
    with pytest.raises(AnswerError, match="unknown label keys"):
        lab.parse(answer_json(good)[:-1] + ', "mystery": 1}')


def test_mismatched_library_is_refused(onto, tmp_path):
    lib = load_exemplars("ran21")
    partial = lib.model_copy(update={"labels": dict(list(lib.labels.items())[:5])})
    with pytest.raises(ValueError, match="does not match label set"):
        LLMLabeler(onto, loop_config("http://127.0.0.1:9/v1", tmp_path / "c.sqlite"), exemplars=partial)


REPORTS = {
    "a": "Small left pleural effusion. Mild cardiomegaly.",
    "b": "No focal consolidation, pleural effusion or pneumothorax. The lungs are clear.",
    "c": "Right upper lobe consolidation consistent with pneumonia.",
    "d": "Small right apical pneumothorax. Endotracheal tube in place.",
    "e": "Right basilar opacity, possibly pneumonia.",
}


def test_labels_from_a_real_server_match_the_rule_projection(onto, tmp_path):
    with LoopbackServer() as srv:
        cfg = loop_config(srv.base_url, tmp_path / "c.sqlite")
        run = label_reports(REPORTS | {"a2": REPORTS["a"]}, onto, cfg)
        assert run.failures == [] and run.usage.requests == 5  # the repeated text cost no call
        from cxreval.extract import default_extractor

        for rid, text in REPORTS.items():  # present 1, uncertain -1 (the Ran Score paper's), else 0
            projected = project_states(default_extractor().extract(text).states(), onto, "ran21")
            assert run.labels.loc[rid].tolist() == [1 if v == 1 else -1 if v == -1 else 0 for v in projected.values()]
        assert run.labels.loc["e", "Pneumonia"] == -1
        assert run.labels.loc["a", "Pleural Effusion"] == 1 and run.labels.loc["b", "No Finding"] == 1
        again = label_reports(REPORTS, onto, cfg)
        assert again.usage.requests == 0 and again.usage.cache_hits == 5


def test_pair_metrics_leave_failed_pairs_out(onto, tmp_path):
    pairs = [ReportPair(pair_id=k, reference=v, candidate=REPORTS["a"]) for k, v in REPORTS.items()]
    pairs.append(ReportPair(pair_id="bad", reference="Mild cardiomegaly. FAULT:schema-always", candidate=REPORTS["b"]))
    with LoopbackServer() as srv:
        out = llm_label_metrics(pairs, onto, loop_config(srv.base_url, tmp_path / "c.sqlite"))
    assert set(out.failed_pairs) == {"bad"}
    assert out.failed_pairs["bad"][0].reason == "answer" and out.failed_pairs["bad"][0].raw
    m = out.metrics
    assert m.n_reports == 5
    sig = m.signature
    assert sig.engine == "llm-labels@3" and sig.prompt == "labels@3+ran21-exemplars@2" and sig.model == "loopback"
    assert "metric:ran-score" in str(sig)
    # the same numbers as label_metrics on the labels the server gave
    run = out.run
    ids = [p.pair_id for p in pairs if p.pair_id != "bad"]
    ref = run.labels.loc[[f"reference:{i}" for i in ids]].set_axis(ids)
    cand = run.labels.loc[[f"candidate:{i}" for i in ids]].set_axis(ids)
    assert label_metrics(ref, cand, labelset="ran21", uncertain="exclude").macro_f1 == pytest.approx(m.macro_f1)
    pneumonia = next(c for c in m.labels if c.label == "Pneumonia")
    assert pneumonia.excluded == 1  # the hedged reference "possibly pneumonia" is left out, not scored 0
