"""Each perturbation on reports we wrote: exactly what changed, and the recorded verdict."""

from __future__ import annotations

import pytest

from cxreval.meta.perturb import (
    ALL_TYPES,
    EXPECTED,
    NORMAL_PARAPHRASES,
    SIGNIFICANT,
    Layout,
    PerturbationSuite,
    PerturbedPair,
    read_suite,
    replace_spans,
    write_suite,
)

REF = (
    "Findings: The heart is mildly enlarged. Small left pleural effusion. No pneumothorax. "
    "The lungs are clear. Impression: Mild cardiomegaly."
)


@pytest.fixture(scope="module")
def suite() -> PerturbationSuite:
    return PerturbationSuite(seed=0, per_type=10)


def variants(suite: PerturbationSuite, ptype: str, text: str = REF) -> list[PerturbedPair]:
    out = [p for p in suite.perturb("r1", text) if p.perturbation == ptype]
    for p in out:
        assert p.reference == text and p.candidate != text
        assert p.significant == (ptype in SIGNIFICANT)
        assert p.expected == EXPECTED.get(ptype, "no error")
    return out


def by_target(pairs: list[PerturbedPair]) -> dict[str | None, PerturbedPair]:
    return {p.target_entity: p for p in pairs}


def test_layout_sentences_headers_and_list_markers() -> None:
    text = "Findings: No effusion. Heart normal. Impression: 1. No acute disease. 2. Mild cardiomegaly."
    lay = Layout(text)
    assert [h.title for h in lay.headers] == ["Findings", "Impression"]
    assert [text[s.start : s.end] for s in lay.sentences] == [
        "No effusion.",
        "Heart normal.",
        "1. No acute disease.",
        "2. Mild cardiomegaly.",
    ]
    assert [s.marker for s in lay.sentences] == ["", "", "1. ", "2. "]
    assert [s.section for s in lay.sentences] == [1, 1, 2, 2]


def test_replace_spans_refuses_overlaps() -> None:
    assert replace_spans("a b c", [(2, 3, "x")]) == "a x c"
    with pytest.raises(ValueError):
        replace_spans("abcdef", [(0, 3, ""), (2, 4, "")])


def test_omit_removes_every_sentence_stating_the_finding(suite: PerturbationSuite) -> None:
    got = by_target(variants(suite, "omit_finding"))
    assert set(got) == {"cardiomegaly", "pleural_effusion"}
    # both cardiomegaly sentences go, and the impression title with its now empty section
    assert got["cardiomegaly"].candidate == ("Findings: Small left pleural effusion. No pneumothorax. The lungs are clear.")
    assert got["cardiomegaly"].before == "The heart is mildly enlarged. Mild cardiomegaly."
    assert got["pleural_effusion"].candidate == REF.replace("Small left pleural effusion. ", "")
    assert got["pleural_effusion"].expected == "FN"


def test_omit_skips_a_sentence_that_states_two_findings(suite: PerturbationSuite) -> None:
    text = "Findings: Small left pleural effusion and left basilar atelectasis. No pneumothorax."
    assert variants(suite, "omit_finding", text) == []


def test_negate_replaces_each_statement_by_a_plain_denial(suite: PerturbationSuite) -> None:
    got = by_target(variants(suite, "negate_finding"))
    assert got["cardiomegaly"].candidate == (
        "Findings: No cardiomegaly. Small left pleural effusion. No pneumothorax. "
        "The lungs are clear. Impression: No cardiomegaly."
    )
    assert got["pleural_effusion"].candidate == REF.replace("Small left pleural effusion.", "No pleural effusion.")
    assert got["pleural_effusion"].after == "No pleural effusion."


def test_negate_keeps_list_markers(suite: PerturbationSuite) -> None:
    text = "Impression: 1. Small right pleural effusion. 2. No pneumothorax."
    (p,) = variants(suite, "negate_finding", text)
    assert p.candidate == "Impression: 1. No pleural effusion. 2. No pneumothorax."


def test_add_inserts_one_false_finding_at_the_end_of_the_findings(suite: PerturbationSuite) -> None:
    pairs = variants(suite, "add_finding")
    assert pairs
    for p in pairs:
        assert p.target_entity not in {"cardiomegaly", "pleural_effusion", "pneumothorax"}  # already mentioned
        assert p.candidate == REF.replace(" Impression:", f" {p.after} Impression:")
        assert p.expected == "FP"


def test_flip_laterality_swaps_the_side_word_only(suite: PerturbationSuite) -> None:
    (p,) = variants(suite, "flip_laterality")
    assert p.target_entity == "pleural_effusion"
    assert p.candidate == REF.replace("Small left", "Small right")
    assert (p.before, p.after) == ("left", "right")


def test_flip_laterality_skips_bilateral_statements(suite: PerturbationSuite) -> None:
    assert variants(suite, "flip_laterality", "Findings: Left and right pleural effusions, left greater than right.") == []


def test_change_severity_moves_every_degree_word_to_one_other_bucket(suite: PerturbationSuite) -> None:
    got = by_target(variants(suite, "change_severity"))
    assert got["cardiomegaly"].candidate == (
        "Findings: The heart is markedly enlarged. Small left pleural effusion. "
        "No pneumothorax. The lungs are clear. Impression: Severe cardiomegaly."
    )
    assert got["pleural_effusion"].candidate == REF.replace("Small left", "Large left")


def test_change_severity_skips_predicative_size_words(suite: PerturbationSuite) -> None:
    # "the heart is large" -> "the heart is small" would deny the finding, not change its degree
    assert variants(suite, "change_severity", "Findings: The heart is large. No effusion.") == []


def test_false_change_claims_a_change_from_a_prior(suite: PerturbationSuite) -> None:
    pairs = variants(suite, "false_change")
    assert {p.target_entity for p in pairs} == {"cardiomegaly", "pleural_effusion"}
    for p in pairs:
        assert p.expected == "adding-unmentioned-comparison"
        assert "prior" in p.after
        assert p.after in p.candidate
        # nothing else changed: removing the added words gives the reference back
        back = p.candidate.replace(f", {p.after}", "").replace(f" {p.after}", "")
        assert back == REF


def test_false_change_skips_findings_already_compared(suite: PerturbationSuite) -> None:
    assert variants(suite, "false_change", "Findings: Small left pleural effusion, unchanged.") == []


def test_reorder_permutes_sentences_within_sections(suite: PerturbationSuite) -> None:
    (p,) = variants(suite, "reorder_sentences")
    ref_sents = REF.split("Impression:")[0].replace("Findings: ", "").strip().split(". ")
    cand_findings, cand_impr = p.candidate.split("Impression:")
    assert sorted(cand_findings.replace("Findings: ", "").strip().rstrip(".").split(". ")) == sorted(
        s.rstrip(".") for s in ref_sents
    )
    assert cand_findings.startswith("Findings: ") and cand_impr == " Mild cardiomegaly."


def test_reorder_skips_sections_with_anaphora(suite: PerturbationSuite) -> None:
    assert variants(suite, "reorder_sentences", "Findings: Small left pleural effusion. This is unchanged.") == []


def test_synonym_swap_uses_an_ontology_synonym_of_the_same_entity(suite: PerturbationSuite) -> None:
    pairs = variants(suite, "synonym_swap")
    assert pairs
    for p in pairs:
        entity = p.description.split(":")[0]
        terms = suite.ontology.entity(entity).terms
        assert p.before.lower() in terms and p.after.lower() in terms and p.before.lower() != p.after.lower()
        assert p.candidate == REF.replace(p.before, p.after, 1)
        assert p.target_entity is None and p.expected == "no error"


def test_paraphrase_swaps_a_normal_statement_within_its_group(suite: PerturbationSuite) -> None:
    pairs = variants(suite, "paraphrase_normal")
    assert {p.before for p in pairs} == {"The lungs are clear.", "No pneumothorax."}
    for p in pairs:
        group = next(g for g in NORMAL_PARAPHRASES if p.before.rstrip(".") in g)
        assert p.after.rstrip(".") in group
        assert p.candidate == REF.replace(p.before, p.after)


def test_change_case(suite: PerturbationSuite) -> None:
    assert {p.candidate for p in variants(suite, "change_case")} == {REF.lower(), REF.upper()}


def test_punctuation(suite: PerturbationSuite) -> None:
    got = {p.after: p.candidate for p in variants(suite, "punctuation")}
    assert got["no final full stop"] == REF[:-1]
    assert got["space before punctuation"].startswith("Findings : The heart is mildly enlarged . Small")
    assert got["doubled full stops"].endswith("Mild cardiomegaly..")


def test_line_breaks_keep_every_word(suite: PerturbationSuite) -> None:
    (p,) = variants(suite, "line_breaks")
    assert p.candidate == (
        "Findings: The heart is mildly enlarged.\nSmall left pleural effusion.\nNo pneumothorax.\n"
        "The lungs are clear.\n\nImpression: Mild cardiomegaly."
    )
    assert p.candidate.split() == REF.split()


def test_merge_and_split(suite: PerturbationSuite) -> None:
    merges = variants(suite, "merge_split")
    assert "Small left pleural effusion; no pneumothorax." in {p.after for p in merges}
    for p in merges:
        assert p.candidate == REF.replace(p.before, p.after)
    (split,) = [
        p
        for p in variants(suite, "merge_split", "Findings: No pneumothorax; small left effusion.")
        if p.description.startswith("split")
    ]
    assert split.candidate == "Findings: No pneumothorax. Small left effusion."


def test_section_headers_drop_and_add(suite: PerturbationSuite) -> None:
    got = {p.description: p.candidate for p in variants(suite, "section_headers")}
    assert got["dropped 'Findings:'"] == REF.replace("Findings: ", "")
    assert got["dropped 'Impression:'"] == REF.replace("Impression: ", "")
    assert got["dropped every section title"] == REF.replace("Findings: ", "").replace("Impression: ", "")
    added = {p.description: p.candidate for p in variants(suite, "section_headers", "No effusion. Heart normal.")}
    assert added == {"added 'Findings:'": "Findings: No effusion. Heart normal."}
    impr = {p.description: p.candidate for p in variants(suite, "section_headers", "Impression: No effusion. Mild cardiomegaly.")}
    assert impr["added 'Findings:' (all but the last sentence)"] == "Findings: No effusion. Impression: Mild cardiomegaly."


def test_seeded_and_reproducible(tmp_path) -> None:
    reports = [("a", REF), ("b", "Findings: Right upper lobe consolidation. No effusion. Impression: Pneumonia.")]
    one = PerturbationSuite(seed=3).build(reports)
    two = PerturbationSuite(seed=3).build(reports)
    assert one == two
    # a report's variants do not depend on the other reports in the suite
    assert [p for p in one if p.source_uid == "b"] == PerturbationSuite(seed=3).build(reports[1:])
    assert len({p.pair_id for p in one}) == len(one)
    assert {p.perturbation for p in one} <= set(ALL_TYPES)
    for name in ("suite.jsonl", "suite.csv"):
        path = write_suite(one, tmp_path / name)
        assert read_suite(path) == one


def test_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown perturbation"):
        PerturbationSuite(types=["shuffle_words"])  # type: ignore[list-item]


# ---------------------------------------------------------------- generalise and over-specify (issue 31)
def test_generalise_names_the_finding_by_its_parents_wording(suite: PerturbationSuite) -> None:
    text = "Findings: Left tension pneumothorax. Impression: Left tension pneumothorax, increased."
    got = by_target(variants(suite, "generalise", text))
    pair = got["tension_pneumothorax"]
    assert pair.candidate == "Findings: Left pneumothorax. Impression: Left pneumothorax, increased."
    assert (pair.before, pair.after, pair.expected) == ("tension pneumothorax", "pneumothorax", "less-specific")
    assert "Fleischner" in pair.description


def test_over_specify_names_the_finding_by_a_childs_wording(suite: PerturbationSuite) -> None:
    got = by_target(variants(suite, "over_specify", "Left basilar opacity. No pneumothorax."))
    pair = got["lung_opacity"]
    assert pair.expected == "more-specific" and pair.before == "opacity"
    assert pair.candidate == f"Left basilar {pair.after}. No pneumothorax."
    assert pair.after in {"atelectasis", "nodule", "mass", "ground glass opacity"}


@pytest.mark.parametrize(
    ("ptype", "text", "why"),
    [
        (
            "generalise",
            "Nodular density over the left 4th rib represents a healing rib fracture.",
            "the sentence keeps the dropped detail (rib)",
        ),
        ("generalise", "Calcified lingular granuloma.", "a qualifier (calcified) is part of the finding's name"),
        ("generalise", "Stable 5 mm calcified right midlung nodule.", "a measured, calcified nodule is no plain nodule"),
        ("over_specify", "Left clavicle fracture.", "a noun before the wording would make a wrong phrase"),
        ("over_specify", "Old fracture of the posterior left 6th rib.", "the sentence says the child already (rib)"),
        (
            "over_specify",
            "Right upper lobe consolidation. Impression: Right upper lobe pneumonia.",
            "the report names the child already: saying it again adds no specificity",
        ),
        ("generalise", "Compression fracture of T12.", "the engine still reads the child (a fracture of a vertebra)"),
        ("generalise", "Left basilar atelectasis-like change.", "a hyphen ends no word"),
        ("generalise", "Small left tension pneumothorax. No tension pneumothorax on the right.", "the finding is also denied"),
    ],
)
def test_no_variant_where_the_wording_would_read_two_ways(suite: PerturbationSuite, ptype: str, text: str, why: str) -> None:
    assert variants(suite, ptype, text) == [], why


def test_over_specify_keeps_to_children_the_phrase_allows_and_the_case(suite: PerturbationSuite) -> None:
    for seed in range(12):  # a patchy opacity is no rounded nodule or mass, whatever the draw
        patchy = PerturbationSuite(seed=seed, types=("over_specify",)).perturb("r", "There is patchy retrocardiac opacity.")
        assert len(patchy) == 1 and patchy[0].after not in ("nodule", "mass")
    upper = by_target(variants(suite, "generalise", "RIGHT UPPER LOBE NODULE."))
    assert upper["lung_nodule"].candidate == "RIGHT UPPER LOBE OPACITY."


def test_the_wordings_name_their_sources_and_are_not_the_ontologys() -> None:
    from cxreval.meta.perturb import SPECIFICITY_WORDINGS

    assert len({(w.child, w.parent) for w in SPECIFICITY_WORDINGS}) == len(SPECIFICITY_WORDINGS)
    assert all(w.source.split(":")[0] in {"CheXpert", "CheXpert labeler", "Fleischner glossary"} for w in SPECIFICITY_WORDINGS)
    assert {"generalise", "over_specify"} <= set(SIGNIFICANT) and set(SIGNIFICANT) <= set(ALL_TYPES)


# ---------------------------------------------------------------- tips, sizes and places (issue 32)
def test_move_tip_moves_a_devices_tip_to_another_place(suite: PerturbationSuite) -> None:
    line = by_target(variants(suite, "move_tip", "Findings: Right IJ central line with tip in the SVC. No pneumothorax."))
    pair = line["central_venous_catheter"]
    assert pair.candidate == "Findings: Right IJ central line with tip in the right atrium. No pneumothorax."
    assert (pair.before, pair.after, pair.expected) == ("SVC", "right atrium", "location not-aligned")
    tube = by_target(variants(suite, "move_tip", "Nasogastric tube with tip in the stomach."))
    assert tube["enteric_tube"].candidate == "Nasogastric tube with tip in the distal esophagus."
    ett = by_target(variants(suite, "move_tip", "The endotracheal tube tip is 4 cm above the carina."))
    assert ett["endotracheal_tube"].candidate == "The endotracheal tube tip is 1 cm above the carina."
    low = by_target(variants(suite, "move_tip", "The endotracheal tube tip is 1.5 cm above the carina."))
    assert low["endotracheal_tube"].after == "5 cm above the carina"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Tip in the SVC.", "the landmark is the line's only name"),
        ("Enteric tube coursing below the diaphragm with tip in the stomach.", "two places named: moving one reads two ways"),
        ("Left PICC tip near the junction of the brachiocephalic vein and SVC.", "two places named"),
    ],
)
def test_no_tip_move_that_would_read_two_ways(suite: PerturbationSuite, text: str, why: str) -> None:
    assert variants(suite, "move_tip", text) == [], why


def test_resize_moves_a_size_across_three_cm_by_a_factor_of_three(suite: PerturbationSuite) -> None:
    small = by_target(variants(suite, "resize", "There is a 6 mm nodule in the right upper lobe."))
    assert small["lung_nodule"].candidate == "There is a 40 mm nodule in the right upper lobe."
    large = by_target(variants(suite, "resize", "A 4.8 cm mass in the left lower lobe."))
    assert (large["lung_mass"].after, large["lung_mass"].expected) == ("1.5 cm", "severity not-aligned")
    dims = by_target(variants(suite, "resize", "A 2.2 x 1.6 cm nodule in the lingula."))
    assert dims["lung_nodule"].after == "6.6 x 4.8 cm"
    # a size that is another's (the displacement of a fracture) is not moved
    assert variants(suite, "resize", "Left humeral neck fracture, with 5 mm displacement.") == []


def test_drop_place_keeps_the_first_place_of_a_list_on_two_sides(suite: PerturbationSuite) -> None:
    got = by_target(variants(suite, "drop_place", "Calcified granulomas in the right upper and left lower lobes."))
    pair = got["calcified_granuloma"]
    assert pair.candidate == "Calcified granulomas in the right upper lobe."
    assert pair.expected == "location not-aligned"
    # one side: dropping a lobe keeps the side, and the judge does not count zones apart
    assert variants(suite, "drop_place", "Calcified granulomas in the right middle lobe and right upper lobe.") == []


def test_the_new_variants_are_judged_as_expected() -> None:
    """The rule engine's judgement of each new variant is the one the suite records."""
    import cxreval
    from cxreval.io import ReportPair

    suite = PerturbationSuite(seed=0, types=("move_tip", "resize", "drop_place"), targets=("engine",))
    pairs = suite.build(
        [
            ("a", "Findings: Right IJ central line with tip in the SVC."),
            ("b", "Findings: There is a 6 mm nodule in the right upper lobe."),
            ("c", "Findings: Calcified granulomas in the right upper and left lower lobes."),
        ]
    )
    assert {p.perturbation for p in pairs} == {"move_tip", "resize", "drop_place"}
    result = cxreval.Evaluator().evaluate(
        [ReportPair(pair_id=p.pair_id, reference=p.reference, candidate=p.candidate) for p in pairs]
    )
    rows = {(r.pair_id, r.entity): r for r in result.judgements}
    for p in pairs:
        row = rows[p.pair_id, p.target_entity]
        attribute, verdict = p.expected.split()
        assert row.presence == "TP" and getattr(row, attribute) == verdict, p


def test_sizes_that_would_read_two_ways_are_not_resized(suite: PerturbationSuite) -> None:
    assert variants(suite, "resize", "A 0 mm nodule in the right upper lobe.") == []
    assert variants(suite, "resize", "A 1.2 cm x 8 mm nodule in the right upper lobe.") == []
    assert variants(suite, "resize", "2-3 mm nodules in the right upper lobe.") == []
    both = by_target(variants(suite, "drop_place", "Right and left lower lobe atelectasis."))
    assert both["atelectasis"].candidate == "Right lower lobe atelectasis."
