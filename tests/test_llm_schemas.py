"""Schemas generated from the ontology, answer validation, votes, prompts."""

from __future__ import annotations

import json

import pytest

from cxreval.judge.llm_verdicts import build_schema, parse_answer
from cxreval.llm.prompts import entity_list, load_prompt
from cxreval.llm.schemas import AnswerError
from cxreval.ontology import load_ontology


@pytest.fixture(scope="module")
def onto():
    return load_ontology()


def _walk(node, path="$"):
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}[{i}]")


@pytest.mark.parametrize("mode", ["pairwise", "extract"])
@pytest.mark.parametrize("style", ["dense", "sparse"])
def test_every_array_and_string_is_bounded(onto, mode, style):
    schema = build_schema(mode, style, onto, max_items=25, max_evidence=150)
    arrays = strings = 0
    for path, node in _walk(schema):
        if isinstance(node, dict) and node.get("type") == "array":
            arrays += 1
            assert isinstance(node.get("maxItems"), int), path
        if isinstance(node, dict) and node.get("type") == "string":
            strings += 1
            assert "enum" in node or isinstance(node.get("maxLength"), int), path
        if isinstance(node, dict) and node.get("type") == "object":
            assert node["additionalProperties"] is False and set(node["required"]) == set(node["properties"]), path
    assert strings > 0
    if style == "sparse":
        assert arrays >= 1


def test_dense_has_one_field_per_entity_sparse_an_enum_of_ids(onto):
    dense = build_schema("pairwise", "dense", onto)
    assert list(dense["properties"]) == onto.entity_ids
    assert dense["properties"]["pneumothorax"]["properties"]["presence"]["enum"] == ["TP", "FP", "FN", "TN"]
    sparse = build_schema("pairwise", "sparse", onto, max_items=40)
    items = sparse["properties"]["entities"]
    assert items["maxItems"] == 40
    assert items["items"]["properties"]["entity"]["enum"] == onto.entity_ids
    extract = build_schema("extract", "sparse", onto, max_evidence=120)
    props = extract["properties"]["entities"]["items"]["properties"]
    assert props["evidence"]["maxLength"] == 120
    assert props["status"]["enum"] == ["present", "absent", "uncertain"]


def _item(entity, presence="TP", location="aligned", severity="not-available", comparison="other"):
    return {"entity": entity, "presence": presence, "location": location, "severity": severity, "comparison": comparison}


def test_sparse_pairwise_answer_validates_and_normalises_ids(onto):
    raw = "```json\n" + json.dumps({"entities": [_item("pleural_effusion"), _item("Pneumothorax", "FN")]}) + "\n```"
    parsed = parse_answer(raw, "pairwise", "sparse", onto)
    assert [(i["entity"], i["presence"]) for i in parsed.items] == [("pleural_effusion", "TP"), ("pneumothorax", "FN")]


def test_unknown_entity_is_an_error_that_suggests_the_id(onto):
    raw = json.dumps({"entities": [_item("pleural_efusion")]})
    with pytest.raises(AnswerError, match=r"unknown entity ids: 'pleural_efusion' \(did you mean 'pleural_effusion'\?\)"):
        parse_answer(raw, "pairwise", "sparse", onto)


def test_value_outside_enum_is_an_error_naming_the_field(onto):
    raw = json.dumps({"entities": [_item("pleural_effusion", presence="MAYBE")]})
    with pytest.raises(AnswerError, match=r"entities\.0\.presence.*MAYBE"):
        parse_answer(raw, "pairwise", "sparse", onto)


def test_truncated_json_is_an_error(onto):
    raw = json.dumps({"entities": [_item("pleural_effusion"), _item("pneumothorax")]})
    with pytest.raises(AnswerError, match="not valid JSON"):
        parse_answer(raw[: len(raw) // 2], "pairwise", "sparse", onto)


def test_too_many_items_is_an_error(onto):
    raw = json.dumps({"entities": [_item(e) for e in onto.entity_ids[:5]]})
    with pytest.raises(AnswerError, match="at most 3"):
        parse_answer(raw, "pairwise", "sparse", onto, max_items=3)


def test_duplicates_majority_vote_and_tie_keeps_first(onto):
    raw = json.dumps(
        {
            "entities": [
                _item("atelectasis", "FN"),
                _item("atelectasis", "TP"),
                _item("atelectasis", "TP"),
                _item("pneumothorax", "FP"),
                _item("pneumothorax", "TN"),
            ]
        }
    )
    parsed = parse_answer(raw, "pairwise", "sparse", onto)
    got = {i["entity"]: i["presence"] for i in parsed.items}
    assert got == {"atelectasis": "TP", "pneumothorax": "FP"}
    assert len(parsed.notes) == 2


def test_dense_answer_with_duplicate_keys_is_voted(onto):
    ids = onto.entity_ids
    tn = {"presence": "TN", "location": "not-available", "severity": "not-available", "comparison": "other"}
    tp = {**tn, "presence": "TP"}
    body = ", ".join(
        [f'"{ids[0]}": {json.dumps(tp)}', f'"{ids[0]}": {json.dumps(tn)}', f'"{ids[0]}": {json.dumps(tp)}']
        + [f'"{e}": {json.dumps(tn)}' for e in ids[1:]]
    )
    parsed = parse_answer("{" + body + "}", "pairwise", "dense", onto)
    assert {i["entity"]: i["presence"] for i in parsed.items}[ids[0]] == "TP"
    assert len(parsed.items) == len(ids)


def test_extract_sparse_keeps_repeated_mentions_and_checks_zones(onto):
    m = {
        "entity": "pleural_effusion",
        "status": "present",
        "side": "left",
        "zones": ["lower"],
        "severity": "mild",
        "comparison": "none",
        "evidence": "x" * 500,
    }
    parsed = parse_answer(json.dumps({"entities": [m, {**m, "status": "absent"}]}), "extract", "sparse", onto, max_evidence=50)
    assert [i["status"] for i in parsed.items] == ["present", "absent"]
    assert parsed.items[0]["comparison"] is None and len(parsed.items[0]["evidence"]) == 50
    with pytest.raises(AnswerError, match="zones"):
        parse_answer(json.dumps({"entities": [{**m, "zones": ["knee"]}]}), "extract", "sparse", onto)


def test_extract_dense_drops_not_mentioned(onto):
    none = {"status": "not-mentioned", "side": "none", "zones": [], "severity": "none", "comparison": "none"}
    ans = {e: none for e in onto.entity_ids}
    ans["cardiomegaly"] = {**none, "status": "present", "severity": "mild"}
    parsed = parse_answer(json.dumps(ans), "extract", "dense", onto)
    assert parsed.items == [
        {
            "entity": "cardiomegaly",
            "status": "present",
            "side": None,
            "zones": [],
            "severity": "mild",
            "comparison": None,
            "evidence": "",
        }
    ]


def test_prompts_are_versioned_files_and_list_every_entity(onto):
    for name, version in (("pairwise", 3), ("extract", 3), ("reask", 2)):
        p = load_prompt(name)
        assert p.signature == f"{name}@{version}" and len(p.sha256) == 64
    listing = entity_list(onto, "pairwise")
    assert len(listing.splitlines()) == len(onto.entities)
    assert "- pleural_effusion: Pleural effusion" in listing
