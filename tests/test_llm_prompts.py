"""The LLM judges' prompts as the papers define the task: meanings, hierarchy, attribute
definitions, worked pairs, quotes, no true negatives, a prefix the same for every call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cxreval import Evaluator, ReportPair
from cxreval.extract.llm import LLMExtractor
from cxreval.judge.llm_pairwise import LLMPairwiseJudge
from cxreval.judge.llm_verdicts import pairwise_schema, parse_pairwise
from cxreval.judge.models import row_errors
from cxreval.llm.backends import _prompt_tokens
from cxreval.llm.prompts import attribute_rules, entity_list, read_fenced, worked_examples
from cxreval.llm.runner import WHITESPACE_LOOP_CHARS, cut_off_reason
from cxreval.ontology import load_ontology
from cxreval.show_prompts import prompts_markdown
from cxreval.testing.loopback import LoopbackServer

from .llm_support import loop_config


@pytest.fixture(scope="module")
def onto():
    return load_ontology()


def _judge(onto, tmp_path: Path, **kw) -> LLMPairwiseJudge:
    return LLMPairwiseJudge(onto, loop_config("http://127.0.0.1:9/v1", tmp_path / "c.sqlite", **kw))


def test_the_entity_list_gives_each_entity_its_meaning_and_parents(onto):
    lines = {line.split(":", 1)[0]: line for line in entity_list(onto, "pairwise").splitlines()}
    tension = lines["- tension_pneumothorax"]
    assert "is a: pneumothorax" in tension and tension.endswith(onto.entity("tension_pneumothorax").description)
    assert all(onto.entity(e.id).description in lines[f"- {e.id}"] for e in onto.entities)


def test_attribute_rules_come_from_the_vocabulary_and_the_device_positions(onto):
    rules = attribute_rules(onto)
    assert "severe (" in rules and "large" in rules.split("severe (", 1)[1].split(")", 1)[0]
    assert "unchanged (" in rules and "stable" in rules
    assert "- endotracheal_tube: belongs at trachea; malpositioned at: pharynx" in rules


@pytest.mark.parametrize("example", worked_examples("pairwise", load_ontology()), ids=lambda e: e["why"][:30])
def test_each_worked_answer_is_the_judgement_rule_of_the_pair(onto, example):
    """The worked pairs teach what docs/scoring.md says: each answer is the rule engine's judgement
    (its rows other than TN), and each quote is words of its report."""
    pair = ReportPair(pair_id="x", reference=example["reference"], candidate=example["candidate"])
    rows = Evaluator(onto, spec_compat=True).evaluate([pair]).judgements
    expected = {(r.entity, r.presence, r.specificity, r.location, r.severity, r.comparison) for r in rows if r.presence != "TN"}
    given = {
        (i["entity"], i["presence"], i["specificity"], i["location"], i["severity"], i["comparison"]) for i in example["entities"]
    }
    assert given == expected
    for item in example["entities"]:
        assert item["reference_quote"] in pair.reference and item["candidate_quote"] in pair.candidate
        assert bool(item["reference_quote"]) == (item["presence"] in ("TP", "FN"))
        assert bool(item["candidate_quote"]) == (item["presence"] in ("TP", "FP"))


def test_an_example_naming_an_entity_the_ontology_lacks_is_left_out_whole(tiny, onto):
    assert len(worked_examples("pairwise", onto)) == 3
    assert worked_examples("pairwise", tiny) == []


def test_the_prefix_is_the_same_for_every_call_and_the_pair_comes_last(onto, tmp_path):
    judge = _judge(onto, tmp_path)
    a = judge.messages("Small left pleural effusion.", "No effusion.")
    b = judge.messages("Right upper lobe consolidation.", "Normal chest.")
    assert [m["role"] for m in a] == ["system", "user", "assistant"] * 1 + ["user", "assistant"] * 2 + ["user"]
    assert a[:-1] == b[:-1]  # system and worked pairs: one prefix a server's cache keeps
    assert read_fenced(a[-1]["content"]) == {"reference": "Small left pleural effusion.", "candidate": "No effusion."}
    system = a[0]["content"]
    for words in ("is a: pneumothorax", "specificity less-specific", "do not list it", "Quote before you judge", "Device tips"):
        assert words in system
    for example in a[2:-1:2]:  # every worked answer is valid under the call's own schema
        parse_pairwise(example["content"], "sparse", onto, max_items=40, max_evidence=200)


def test_a_dense_answer_keeps_spec_cxrs_layout_without_worked_pairs(onto, tmp_path):
    judge = _judge(onto, tmp_path, schema_style="dense")
    messages = judge.messages("Small left pleural effusion.", "No effusion.")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "Quote before you judge" not in messages[0]["content"] and "TN with not-available" in messages[0]["content"]
    verdict = pairwise_schema("dense", onto)["properties"]["pneumothorax"]["properties"]
    assert list(verdict) == ["presence", "location", "severity", "comparison"]


def test_a_sparse_answer_quotes_first_lists_no_true_negative_and_says_how_specific(onto):
    item = pairwise_schema("sparse", onto, max_evidence=120)["properties"]["entities"]["items"]
    assert list(item["properties"])[:4] == ["entity", "reference_quote", "candidate_quote", "presence"]
    assert (
        item["properties"]["presence"]["enum"] == ["TP", "FN", "FP"] and item["properties"]["reference_quote"]["maxLength"] == 120
    )
    assert "specificity" in item["properties"]
    no_quotes = pairwise_schema("sparse", onto, max_evidence=0)["properties"]["entities"]["items"]["properties"]
    assert "reference_quote" not in no_quotes


def test_quotes_and_specificity_reach_the_judgement_rows(onto, tmp_path):
    judge = _judge(onto, tmp_path)
    answer = {
        "entities": [
            {
                "entity": "tension_pneumothorax",
                "reference_quote": "Right tension pneumothorax.",
                "candidate_quote": "Right pneumothorax.",
                "presence": "TP",
                "specificity": "less-specific",
                "location": "aligned",
                "severity": "not-available",
                "comparison": "other",
            }
        ]
    }
    parsed = judge.parse(json.dumps(answer), "Right tension pneumothorax.", "Right pneumothorax.")
    (row,) = judge.rows("p", {"items": parsed.items})
    assert (row.specificity, row.reference, row.candidate) == (
        "less-specific",
        "Right tension pneumothorax.",
        "Right pneumothorax.",
    )
    assert (
        row_errors(row.presence, row.location, row.severity, row.comparison, row.specificity) == 1
    )  # less specific: one error, where the flat rule counts a false and a missed finding


def test_the_extract_prompt_keeps_its_instructions_in_the_system_message(onto, tmp_path):
    ex = LLMExtractor(onto, loop_config("http://127.0.0.1:9/v1", tmp_path / "c.sqlite"))
    a, b = ex.messages("Small left pleural effusion."), ex.messages("Normal chest.")
    assert a[0] == b[0] and "is a: pneumothorax" in a[0]["content"] and "may represent" in a[0]["content"]
    assert read_fenced(a[1]["content"]) == {"report": "Small left pleural effusion."}


def test_anthropic_requests_mark_the_prefix_for_the_prompt_cache(tmp_path):
    pair = ReportPair(pair_id="a", reference="Small left pleural effusion.", candidate="Left pleural effusion.")
    with LoopbackServer() as srv:
        cfg = loop_config(srv.anthropic_url, tmp_path / "c.sqlite", provider="anthropic", api_key_env="PATH")
        result = Evaluator(engine="llm-pairwise", llm=cfg).evaluate([pair])
        assert result.n_failed == 0 and srv.log and all(e["cached_prefix"] for e in srv.log)
    # cached prompt tokens are counted (Anthropic's input_tokens leave them out)
    usage = {"input_tokens": 12, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0, "output_tokens": 5}
    assert _prompt_tokens(usage) == 3012 and _prompt_tokens({"input_tokens": 7}) == 7 and _prompt_tokens({}) is None


def test_a_cut_off_answer_says_whether_whitespace_ran_away():
    assert cut_off_reason('{"entities": [', 100) == " (the answer was cut off at max_tokens=100)"
    looped = cut_off_reason('{"entities": [' + " " * WHITESPACE_LOOP_CHARS, 100)
    assert "whitespace loop of guided JSON decoding" in looped and "disable_any_whitespace" in looped


def test_docs_show_the_prompts_as_they_are_sent():
    """docs/prompts.md is what the engines send today (regenerate with prompts_markdown())."""
    page = Path(__file__).resolve().parents[1] / "docs" / "prompts.md"
    assert page.read_text(encoding="utf-8") == prompts_markdown()


def test_the_prompts_command_prints_a_users_pair_as_sent(tmp_path):
    from typer.testing import CliRunner

    from cxreval.cli import app

    res = CliRunner().invoke(app, ["prompts", "llm-pairwise", "--reference", "Left effusion.", "--candidate", "No effusion."])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("--- system ---") and "<reference-" in res.output and "Left effusion." in res.output
    assert "more, one line each" in res.output
    full = CliRunner().invoke(app, ["prompts", "llm-pairwise", "--full"])
    assert "more, one line each" not in full.output and "- hemothorax: Hemothorax" in full.output
    bad = CliRunner().invoke(app, ["prompts", "gpt"])
    assert bad.exit_code == 2 and "unknown engine 'gpt'" in bad.output


def test_an_empty_answer_is_right_where_only_hedges_the_policy_does_not_count(onto, tmp_path):
    """A sparse answer lists no true negative: "possible pneumonia" against a normal candidate is an
    empty answer under the negative policy, and must not be refused (nor under positive accepted)."""
    from cxreval.llm.schemas import AnswerError

    ref, cand = "Possible right lower lobe pneumonia.", "No focal consolidation."
    negative = _judge(onto, tmp_path, schema_style="sparse")
    negative = LLMPairwiseJudge(onto, negative.config, "negative")
    assert negative.parse('{"entities": []}', ref, cand).items == []
    positive = LLMPairwiseJudge(onto, negative.config, "positive")
    with pytest.raises(AnswerError, match="the reference report states 1 finding"):
        positive.parse('{"entities": []}', ref, cand)


def test_every_rendered_rule_is_part_of_the_cache_key(onto, tmp_path):
    config = _judge(onto, tmp_path).config
    keys = {
        LLMPairwiseJudge(onto, config, "positive", True).key("a", "b"),
        LLMPairwiseJudge(onto, config, "positive", False).key("a", "b"),
        LLMPairwiseJudge(onto, config, "probable", True).key("a", "b"),
        LLMPairwiseJudge(onto, config, "negative", True).key("a", "b"),
    }
    assert len(keys) == 4


def test_the_flat_judge_neither_asks_nor_keeps_a_specificity(onto, tmp_path):
    flat = LLMPairwiseJudge(onto, _judge(onto, tmp_path).config, "positive", hierarchy=False)
    assert "specificity" not in flat.schema["properties"]["entities"]["items"]["properties"]
    answer = {"entities": [{"entity": "pneumothorax", "presence": "TP", "specificity": "less-specific"}]}
    (row,) = flat.rows("p", {"items": flat.parse(json.dumps(answer), "Pneumothorax.", "Pneumothorax.").items})
    assert row.specificity == "exact"
