"""The rule records: every packaged record's example reads as it says, by the rule it names; a
user's rule file adds and overrides records by id, and names its own mistakes with file and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cxreval.extract.models import Mention
from cxreval.extract.rules import RuleExtractor, RulesError, load_rules
from cxreval.extract.rules.ruleset import (
    STEP_IDS,
    CueRecord,
    Record,
    SiteRecord,
)
from cxreval.ontology import load_ontology

ONTO = load_ontology()
RULES = load_rules(ONTO)
EXTRACTOR = RuleExtractor(ONTO, RULES)
#: Steps whose decisions name the cue record that decided, not the step.
_SCOPED = {"scope.backward", "scope.forward", "finding.stated"}


#: Cue categories whose phrases decide a status themselves (the others end a scope, join findings or
#: serve one step, which then names itself).
_DECIDING = {"negation_pre", "negation_post", "uncertain_pre", "uncertain_post", "historical_pre"}
#: Records that shape a reading without being named by it (windows, phrase lists).
_SHAPING = {"attribute.window", "attribute.site_window", "finding.modifiers", "finding.not_a_finding"}


def _shown_by(record: Record, m: Mention) -> bool:
    """Whether mention ``m`` names ``record`` among the rules behind its reading, where it should."""
    assert m.rules is not None
    ids = {v for _, v in m.rules.items()}
    if record.id in _SHAPING or record.id in _SCOPED:
        return True  # a scope step's decision carries the deciding cue record's id ("negation.pre")
    if isinstance(record, CueRecord) and record.category not in _DECIDING:
        return True  # its step names itself ("negation.prefix") or another rule decides
    return record.id in ids


def _check(record: Record) -> None:
    example = record.example
    assert example is not None
    mentions = EXTRACTOR.extract(example.text).mentions
    given = example.model_fields_set
    found: list[Mention] = []
    if example.entity is None:
        assert mentions, f"{record.id}: {example.text!r} reads no mention"
    else:
        found = [m for m in mentions if m.entity == example.entity]
        if "status" in given and example.status is None:
            assert not found, f"{record.id}: {example.text!r} should make no {example.entity} mention"
            return
        assert found, f"{record.id}: {example.text!r} reads {[m.entity for m in mentions]}, not {example.entity}"
    want = {
        "status": example.status,
        "certainty": example.grade,
        "side": example.side,
        "severity": example.severity,
        "comparison": example.change,
        "historical": example.historical,
        "zones": tuple(example.zones) if example.zones is not None else None,
        "tip": example.tip,
        "tip_mm": example.tip_mm,
        "size_mm": example.size_mm,
    }
    want = {k: v for k, v in want.items() if v is not None}
    candidates = found if example.entity is not None else mentions[:1]
    read = [({k: getattr(m, k) for k in want}, m.rules) for m in candidates]
    assert any(got == want and _shown_by(record, m) for m, (got, _) in zip(candidates, read)), (
        f"{record.id}: {example.text!r} reads {read}, not {want} by this rule"
    )


@pytest.mark.parametrize("rule_id", sorted(RULES.records))
def test_every_record_has_a_doc_and_its_example_reads_as_it_says(rule_id: str) -> None:
    record = RULES.records[rule_id]
    assert record.doc.strip() and "\n" not in record.doc
    if record.example is not None:
        _check(record)


def test_every_packaged_record_has_an_example() -> None:
    missing = [rid for rid, r in RULES.records.items() if r.example is None and rid != "normal.pleura"]
    assert not missing


def test_the_steps_run_in_their_documented_order() -> None:
    assert RULES.steps == STEP_IDS


# -- a user's rule file -----------------------------------------------------------------------------

#: A local abbreviation ("PNX") and a local cue ("nil"), neither packaged.
LOCAL = (Path(__file__).parent / "rules" / "local.yaml").read_text(encoding="utf-8")


def _write(tmp_path: Path, text: str, name: str = "local.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_local_abbreviation_and_a_local_cue_are_read_and_named(tmp_path: Path) -> None:
    rules = load_rules(ONTO, _write(tmp_path, LOCAL))
    ex = RuleExtractor(ONTO, rules)
    (ptx,) = ex.extract("Small left PNX.").mentions
    assert (ptx.entity, ptx.status, ptx.side, ptx.rules.entity) == ("pneumothorax", "present", "left", "local.pnx")
    (nil,) = ex.extract("Nil effusion.").mentions
    assert (nil.entity, nil.status, nil.cue, nil.rules.status) == ("pleural_effusion", "absent", "nil", "local.nil")
    (both,) = ex.extract("Nil PNX.").mentions
    assert (both.status, both.rules.entity, both.rules.status) == ("absent", "local.pnx", "local.nil")
    # the packaged engine reads neither
    assert not EXTRACTOR.extract("Small left PNX.").mentions
    for rid in ("local.pnx", "local.nil"):  # the user's examples read as they say, too
        EXTRACTOR_LOCAL = ex
        example = rules.records[rid].example
        assert example is not None
        got = [m for m in EXTRACTOR_LOCAL.extract(example.text).mentions if m.entity == example.entity]
        assert got and got[0].status == example.status


def test_the_rule_file_hash_is_in_the_signature(tmp_path: Path) -> None:
    import hashlib

    path = _write(tmp_path, LOCAL)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    ex = RuleExtractor(ONTO, load_rules(ONTO, path))
    assert ex.signature == f"{EXTRACTOR.signature}.u{digest}"
    changed = _write(tmp_path, LOCAL.replace('["nil"]', '["nil", "nought"]'), "other.yaml")
    assert RuleExtractor(ONTO, load_rules(ONTO, changed)).signature != ex.signature


def test_a_packaged_rule_is_overridden_by_its_id(tmp_path: Path) -> None:
    text = "No pleural effusion, pneumothorax or consolidation."
    assert {m.status for m in EXTRACTOR.extract(text).mentions} == {"absent"}
    short = RuleExtractor(ONTO, load_rules(ONTO, _write(tmp_path, "rules:\n  - {id: scope.backward, max_tokens: 2}\n")))
    states = short.extract(text).states()
    # two words back reach no "no": consolidation is offered as pneumothorax's alternative instead
    assert states["pleural_effusion"].status == "absent" and states["consolidation"].status == "uncertain"
    off = RuleExtractor(ONTO, load_rules(ONTO, _write(tmp_path, "rules:\n  - {id: negation.copula, enabled: false}\n", "o.yaml")))
    assert EXTRACTOR.extract("This is not a pneumothorax.").states()["pneumothorax"].status == "absent"
    assert off.extract("This is not a pneumothorax.").states()["pneumothorax"].status == "present"
    fewer = RuleExtractor(
        ONTO,
        load_rules(
            ONTO,
            _write(
                tmp_path,
                "rules:\n  - {id: negation.pre, remove_phrases: [free of]}\nlexicon:\n  closing_verbs: {remove: [seen]}\n",
                "r.yaml",
            ),
        ),
    )
    assert fewer.extract("Free of pneumothorax.").states()["pneumothorax"].status == "present"
    same = load_rules(ONTO, _write(tmp_path, "rules:\n  - {id: negation.pre, remove_phrases: [FREE  Of]}\n", "c.yaml"))
    assert RuleExtractor(ONTO, same).extract("Free of pneumothorax.").states()["pneumothorax"].status == "present"
    # a labelled value is read by its ":" token, whatever the cue records say
    no_ends = RuleExtractor(
        ONTO, load_rules(ONTO, _write(tmp_path, "rules:\n  - {id: scope.terminator, enabled: false}\n", "t.yaml"))
    )
    (labelled,) = no_ends.extract("Pneumothorax: none").mentions
    assert (labelled.status, labelled.rules.status) == ("absent", "label.value")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "rules:\n  - {id: local.x, doc: d, phrases: [x]}\n",
            r"local.yaml:2: unknown rule id 'local.x'; to add a rule give `kind:`",
        ),
        (
            "rules:\n  - {id: local.x, kind: normal, doc: d, pattern: '(', entities: [pneumonia]}\n",
            r"local.yaml:2: rule 'local.x' has a bad pattern",
        ),
        ("rules:\n  - {id: local.x, kind: name, doc: d, entity: nothing, phrases: [x]}\n", r"local.yaml:2: .*not in ontology"),
        ("rules:\n  - {id: local.x, kind: cue, doc: d, category: denial, phrases: [x]}\n", r"local.yaml:2: .*category"),
        (
            "rules:\n  - {id: local.x, kind: name, doc: d, entity: pneumothorax, phrases: [pnx], unless: [rib]}\n",
            r"local.yaml:2: .*`unless` words need `near` words",
        ),
        (
            "\nrules:\n  - {id: negation.pre, doc: d}\n  - {id: label.value, order: 50}\n",
            r"local.yaml:4: conflicting order: steps 'scope.backward' and 'label.value' both have order 50",
        ),
        ("rules:\n  - {id: local.step, kind: step, doc: d, order: 5}\n", r"local.yaml:2: unknown rule id 'local.step'"),
        ("rules:\n  - {id: attribute.window, enabled: false}\n", r"local.yaml:2: rule 'attribute.window' cannot be turned off"),
        ("rules:\n  - {id: negation.pre, remove_phrases: [never said]}\n", r"local.yaml:2: .*no phrases \['never said'\]"),
        ("lexicon:\n  verbs: {add: [x]}\n", r"local.yaml:2: unknown word list 'verbs'"),
        ("lexicon:\n  closing_verbs: {add: confirmed}\n", r"local.yaml:2: lexicon.closing_verbs: .* take a list"),
        ("lexicon:\n  list_openers: {add: [such as]}\n", r"local.yaml:2: lexicon.list_openers: 'such as' is 2 words"),
        ("lexicon:\n  closing_verbs: {remove: [confirmed]}\n", r"local.yaml:2: word list 'closing_verbs' has no words"),
        (
            "rules:\n  - {id: negation.pre, kind: cue, category: negation_pre, doc: d, phrases: [nil]}\n",
            r"local.yaml:2: 'negation.pre' is a packaged rule: to change it leave out `kind`",
        ),
        (
            "rules:\n  - {id: local.a, kind: cue, category: negation_pre, doc: d, phrases: [nil]}\n"
            + "  - {id: local.a, kind: cue, category: negation_pre, doc: d, phrases: [nought]}\n",
            r"local.yaml:3: rule id 'local.a' is given twice in this file \(first at .*local.yaml:2\)",
        ),
        (
            "rules:\n  - {id: local.a, kind: cue, category: negation_pre, doc: d, phrases: [nil]}\n"
            + "rules:\n  - {id: local.b, kind: cue, category: negation_pre, doc: d, phrases: [nought]}\n",
            r"local.yaml:3: `rules` is given twice \(first on line 1\)",
        ),
        ("rules:\n  - {id: negation.copula, max_tokens: 3}\n", r"local.yaml:2: rule 'negation.copula' reads no max_tokens"),
        ("rules:\n  - {id: attribute.side, back: 3}\n", r"local.yaml:2: rule 'attribute.side' reads no back"),
        ("rules:\n  - {id: finding.stated, enabled: false}\n", r"local.yaml:2: rule 'finding.stated' cannot be turned off"),
        ("rules:\n  - {id: alternative.or, order: 200}\n", r"local.yaml:2: step 'alternative.or' \(order 200\) would come after"),
        ("rules:\n  - {id: negation.pre, add_phrases: [no]}\n", r"local.yaml:2: .*quote it in YAML"),
        ("rules: [\n", r"local.yaml: not a YAML rule file"),
    ],
)
def test_a_bad_rule_file_is_named_with_its_line(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(RulesError, match=problem):
        load_rules(ONTO, _write(tmp_path, text))


def test_a_site_rule_names_itself_as_what_set_the_entity() -> None:
    (m,) = [m for m in EXTRACTOR.extract("Degenerative changes are seen at the right hip.").mentions]
    site = [r for r in RULES.records.values() if isinstance(r, SiteRecord) and r.to == m.entity]
    assert m.rules is not None and m.rules.entity in {r.id for r in site}
    assert re.fullmatch(r"site\.degenerative_spine\.degenerative_joint_disease", m.rules.entity)


#: The digest of the packaged rules' reading content, per signature (``RuleSet.digest``). An edit
#: to the data that changes it needs a new version in the signature (``version:`` of the data
#: files, or of normal_statements.yaml), then a new line here.
PINNED = {"c32.n4.a11": "7d4193f3093194af"}


def test_the_packaged_rules_change_only_with_their_version() -> None:
    assert RULES.version in PINNED, f"a new rule data version {RULES.version}: pin its digest {RULES.digest()}"
    assert RULES.digest() == PINNED[RULES.version], (
        f"the packaged rules changed ({RULES.digest()}) but their version did not: bump `version:` in "
        "src/cxreval/extract/rules/data/ (all files but normal_statements.yaml share it) and pin the new digest"
    )


def test_every_step_has_its_trigger_categories() -> None:
    from cxreval.extract.rules.interpreter import TRIGGERS
    from cxreval.extract.rules.ruleset import STATED

    assert set(TRIGGERS) == set(STEP_IDS) - {STATED}


def test_a_name_with_near_words_names_its_entity_only_beside_them(tmp_path: Path) -> None:
    """A user's name record with ``near`` words (as the packaged ``name.lucency.hyperlucency``):
    the words name the entity beside a near word, and nothing beside an ``unless`` word or none."""
    rules = load_rules(
        ONTO,
        _write(
            tmp_path,
            "rules:\n  - {id: local.ptx, kind: name, doc: d, entity: pneumothorax,"
            " phrases: [air], near: [apex, apical], unless: [stomach], reach: sentence}\n",
            "near.yaml",
        ),
    )
    ex = RuleExtractor(ONTO, rules)
    assert ex.extract("Air at the right apex.").states()["pneumothorax"].status == "present"
    assert "pneumothorax" not in ex.extract("Air in the stomach.").states()
    assert "pneumothorax" not in ex.extract("Air at the apex of the stomach.").states()
