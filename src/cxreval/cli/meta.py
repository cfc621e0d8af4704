"""``cxreval meta``: human alignment, perturbation suites, discrimination / robustness.

Registered by the main CLI as ``app.add_typer(meta_app, name="meta")``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from cxreval.cli.common import (
    EXIT_STOPPED,
    EXIT_UNSCORED,
    LLMConfigOption,
    fail,
    out_console,
)
from cxreval.cli.llm_options import with_llm_options
from cxreval.literals import LLM_PAIRWISE_ENGINES

meta_app = typer.Typer(
    help="Meta-evaluation: human alignment, perturbation suite, discrimination / robustness.", no_args_is_help=True
)

_METRIC_HELP = (
    "metric names (repeat): any registered metric (spec-errors, bleu2, rouge-l, bertscore...), "
    "or llm-pairwise / llm-pairwise-2pass with --llm-config or --base-url/--model"
)


def _llm_config(llm_config: Path | None, llm_options: dict[str, Any]) -> Any:
    """The LLM settings of the file and options given, or None when neither names a model."""
    if llm_config is None and not llm_options.get("model"):
        return None
    from cxreval.llm.config import LLMConfig

    return LLMConfig.load(llm_config, **llm_options)


def build_metrics(names: list[str], llm: Any = None) -> list[Any]:
    """Metrics by name (``spec-errors`` is entity-level: it gives judgement rows too); llm-* need ``llm``."""
    from cxreval.metrics import get_metric

    out: list[Any] = []
    for name in names:
        if name in LLM_PAIRWISE_ENGINES:
            if llm is None:
                raise typer.BadParameter(f"{name} needs --llm-config or --base-url and --model")
            from cxreval.meta.judge_passes import LLMJudgeMetric

            out.append(LLMJudgeMetric(llm, passes=2 if name.endswith("2pass") else 1))
        else:
            out.append(get_metric(name))
    return out


_fail = fail


@meta_app.command("human")
@with_llm_options
def human(
    file: Path = typer.Argument(
        ...,
        help="plain CSV (id, reference, candidate, rater_1..k) or ReXVal's "
        "50_samples_gt_and_candidates.csv with --rexval-ratings",
    ),
    rexval_ratings: Path | None = typer.Option(None, help="ReXVal's 6_valid_raters_per_rater_error_categories.csv"),
    metric: list[str] = typer.Option(["spec-errors"], "--metric", "-m", metavar="NAME", help=_METRIC_HELP),
    runs: int = typer.Option(1, min=1, metavar="N", help="repeated runs (stochastic metrics): mean +- sd of tau"),
    resamples: int = typer.Option(1000, min=0, metavar="N", help="bootstrap resamples for the CI of tau-b"),
    seed: int = typer.Option(0, help="seed of the bootstrap resamples"),
    significance: str = typer.Option("all", help="ReXVal: all, significant or insignificant errors"),
    by_category: bool = typer.Option(True, help="also correlate per error category where the file has them"),
    id_col: str = typer.Option("id", help="id column of the ratings file"),
    reference_col: str = typer.Option("reference", help="reference text column of the ratings file"),
    candidate_col: str = typer.Option("candidate", help="candidate text column of the ratings file"),
    rater_prefix: str = typer.Option("rater_", help="columns starting with this hold one rater's error count each"),
    rexval_columns: str | None = typer.Option(None, help="JSON object overriding ReXVal column names"),
    out: Path | None = typer.Option(None, help="write the alignment as JSON"),
    llm_config: LLMConfigOption = None,
    llm_options: dict[str, Any] | None = None,
) -> None:
    """Kendall tau-b and Spearman between each metric and the mean rater error count."""
    from cxreval.meta.human import RexvalColumns, human_alignment, read_plain_ratings, read_rexval

    try:
        if rexval_ratings is not None:
            cols = RexvalColumns(**json.loads(rexval_columns)) if rexval_columns else RexvalColumns()
            ratings = read_rexval(file, rexval_ratings, columns=cols, significance=significance)
        else:
            ratings = read_plain_ratings(
                file, id_col=id_col, reference_col=reference_col, candidate_col=candidate_col, rater_prefix=rater_prefix
            )
    except (OSError, ValueError) as exc:  # InputError (every problem of the files) is a ValueError
        _fail(str(exc))
    llm = _llm_config(llm_config, llm_options or {})
    results = []
    cats = None if by_category else ["total"]
    for m in build_metrics(metric, llm):
        a = human_alignment(m, ratings, runs=runs, categories=cats, resamples=resamples, seed=seed)
        results.append(a)
        typer.echo(f"{a.metric}  ({len(ratings.ids)} pairs, {len(ratings.raters)} raters; scores oriented higher = more errors)")
        for c in a.correlations:
            tau = "n/a" if c.tau_b is None else f"{c.tau_b:.3f}"
            ci = "" if c.tau_b_ci[0] is None else f" [{c.tau_b_ci[0]:.3f}, {c.tau_b_ci[1]:.3f}]"
            rho = "n/a" if c.spearman is None else f"{c.spearman:.3f}"
            sd = f"  runs: {c.tau_b_mean:.3f} +- {c.tau_b_sd:.3f}" if c.tau_b_sd is not None else ""
            typer.echo(f"  {c.category:32s} tau-b {tau}{ci}  spearman {rho}{sd}")
        typer.echo(f"  signature: {a.signature}")
    if out is not None:
        out.write_text(json.dumps([a.model_dump() for a in results], indent=2) + "\n", encoding="utf-8")


@meta_app.command("perturb")
def perturb(
    out: Path = typer.Option(..., help="suite file: .jsonl or .csv"),
    refs: Path | None = typer.Option(
        None, help="references (id, reference) instead of IU X-ray: CSV, or TSV, JSONL, JSON, Parquet by suffix"
    ),
    id_col: str = typer.Option("id", help="id column of --refs"),
    reference_col: str = typer.Option("reference", help="reference text column of --refs"),
    data_dir: Path | None = typer.Option(None, help="shared data folder (default $CXREVAL_DATA_DIR)"),
    split: str = typer.Option("val,test", help="IU X-ray splits, comma separated"),
    seed: int = typer.Option(0, help="seed of the perturbation draws"),
    per_type: int = typer.Option(1, min=1, metavar="N", help="variants per report and type"),
    types: str | None = typer.Option(None, help="comma-separated perturbation types (default: all)"),
    targets: str = typer.Option(
        "mesh,engine",
        help="target variants of the significant types, comma separated: "
        "mesh (the human MeSH codes, sentences by word search) and/or "
        "engine (the rule engine's mentions)",
    ),
    mesh_col: str | None = typer.Option(None, help="MeSH field column of --refs (needed for mesh targets there)"),
) -> None:
    """Turn reference reports into labelled (reference, candidate) pairs."""
    from cxreval.io import InputError
    from cxreval.meta.perturb import (
        ALL_TYPES,
        PerturbationSuite,
        gold_references,
        read_references,
        suite_summary_by_targets,
        write_suite,
    )

    chosen = tuple(t.strip() for t in types.split(",")) if types else ALL_TYPES
    variants = tuple(t.strip() for t in targets.split(",") if t.strip())
    try:
        suite = PerturbationSuite(seed=seed, per_type=per_type, types=chosen, targets=variants)  # type: ignore[arg-type]
    except ValueError as exc:
        _fail(str(exc))
    try:
        if refs is not None:
            reports = read_references(refs, id_col=id_col, reference_col=reference_col, mesh_col=mesh_col)
            if "mesh" in suite.targets and mesh_col is None:
                typer.echo("note: --refs without --mesh-col: no mesh-target variants (engine targets only)", err=True)
        else:
            from cxreval.datasets.iu_xray import load_iu_gold

            gold = load_iu_gold(data_dir, splits=[s.strip() for s in split.split(",")])  # type: ignore[misc]
            reports = gold_references(gold)
    except (FileNotFoundError, InputError) as exc:
        _fail(str(exc))
    pairs = suite.build(reports)
    write_suite(pairs, out)
    counts = suite_summary_by_targets(pairs)
    typer.echo(f"{len(pairs)} pairs from {len(reports)} references -> {out}  ({suite.signature})")
    labels = [v for v in (*suite.targets, "shared") if any(v in c for c in counts.values())]
    typer.echo(f"  {'type':20s} " + " ".join(f"{v:>7s}" for v in labels))
    for t, c in counts.items():
        typer.echo(f"  {t:20s} " + " ".join(f"{c.get(v, 0):7d}" for v in labels))


@meta_app.command("score")
@with_llm_options
def score(
    suite_file: Path = typer.Argument(..., help="suite from `cxreval meta perturb`"),
    metric: list[str] = typer.Option(["spec-errors"], "--metric", "-m", metavar="NAME", help=_METRIC_HELP),
    html: Path | None = typer.Option(None, help="write the HTML section (table + SVG) as a page"),
    out: Path | None = typer.Option(None, help="write the report as JSON"),
    failures_out: Path | None = typer.Option(None, help="JSONL of the variants each metric got wrong"),
    table: str = typer.Option(
        "markdown", "--table", metavar="FORMAT", help="how the table is printed: markdown, latex, csv or json"
    ),
    llm_config: LLMConfigOption = None,
    llm_options: dict[str, Any] | None = None,
) -> None:
    """Discrimination and robustness of each metric, per perturbation type."""
    from cxreval.io import InputError
    from cxreval.meta.page_section import write_page
    from cxreval.meta.perturb import read_suite
    from cxreval.meta.robustness import TABLE_FORMATS, failures, format_table, score_suite

    if table not in TABLE_FORMATS:
        _fail(f"--table {table!r}: one of {', '.join(TABLE_FORMATS)}")
    try:
        pairs = read_suite(suite_file)
    except InputError as exc:
        _fail(str(exc))
    llm = _llm_config(llm_config, llm_options or {})
    report, runs = score_suite(pairs, build_metrics(metric, llm), suite=str(suite_file))
    typer.echo(format_table(report, table).rstrip("\n"))
    typer.echo(  # below a Markdown table it reads as its legend; CSV and JSON on stdout stay machine-readable
        "cells: discrimination (right entity) for significant types, robustness for insignificant ones"
        + ("; [mesh] / [engine]: target variants (insignificant pairs are shared)" if len(report.variants) > 1 else ""),
        err=table != "markdown",
    )
    if out is not None:
        out.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if html is not None:
        write_page(report, html)
        typer.echo(f"HTML -> {html}", err=table != "markdown")
    if failures_out is not None:
        with failures_out.open("w", encoding="utf-8") as fh:
            for run in runs:
                for p in failures(run, pairs):
                    fh.write(json.dumps({"metric": run.metric, **p.model_dump()}) + "\n")


meta_app.command("robustness", hidden=True)(score)


@meta_app.command("judge-agreement")
@with_llm_options
def judge_agreement_cmd(
    pairs: Path | None = typer.Argument(None, metavar="PAIRS", help="pairs file (id, reference, candidate columns)"),
    example: bool = typer.Option(False, "--example", help="judge the small example pairs shipped with cxreval"),
    engine: str = typer.Option("llm-pairwise", "--engine", help="the LLM engine set against the rule engine"),
    out: Path = typer.Option(..., "--out", "-o", help="folder for both engines' results and the agreement tables"),
    review_db: Path | None = typer.Option(
        None, "--review-db", metavar="FILE", help="draw disagreeing pairs into a new review database"
    ),
    review_n: int = typer.Option(50, "--review-n", min=1, metavar="N", help="disagreeing pairs to draw for review"),
    seed: int = typer.Option(0, "--seed", help="seed of the review draw"),
    top: int = typer.Option(20, "--top", min=1, metavar="N", help="entities shown (all in agreement.csv)"),
    llm_config: LLMConfigOption = None,
    llm_options: dict[str, Any] | None = None,
) -> None:
    """The rule engine against an LLM engine on your pairs: per-entity agreement and every disagreement."""

    from cxreval.evaluate import Evaluator
    from cxreval.evaluate_files import example_path
    from cxreval.io import InputError, read_pairs
    from cxreval.io.writers import OutputError, atomic_write_text, check_out_dir, csv_text
    from cxreval.llm.config import LLMConfigError
    from cxreval.meta.judge_agreement import agreement_table, disagreement_rows, entity_rows, judge_agreement
    from cxreval.render import print_table

    if engine not in LLM_PAIRWISE_ENGINES + ("llm-extract",):
        _fail(f"--engine {engine!r}: one of {', '.join((*LLM_PAIRWISE_ENGINES, 'llm-extract'))}")
    if (pairs is None) == (not example):
        _fail("give a PAIRS file or --example (one of them)")
    try:
        check_out_dir(out)
        llm = _llm_config(llm_config, llm_options or {})
        if llm is None:
            _fail(f"{engine} needs --llm-config or --base-url and --model")
        source = example_path() if example else pairs
        assert source is not None
        read = read_pairs(source)
    except (InputError, OutputError, LLMConfigError) as exc:
        _fail(str(exc))
    judge = Evaluator(engine=engine, llm=llm)
    # the rule engine judges as the other does: SPEC-CXR's three comparison values for a pairwise
    # engine, and the same rule (the finding hierarchy, or flat: a dense pairwise answer is flat)
    spec = engine in LLM_PAIRWISE_ENGINES
    hierarchy = bool(getattr(judge.judge_engine, "judged_by_hierarchy", True))
    rules = Evaluator(spec_compat=spec, hierarchy=hierarchy).evaluate(read)
    other = judge.evaluate(read)
    scored = [p for p in rules.pair_ids if p in set(other.pair_ids)]
    result = judge_agreement(
        rules.judgements,
        other.judgements,
        scored,
        rules.ontology,
        names=("rules", engine),
        signatures=(rules.signature, other.signature),
    )
    rules.save(out / "rules")
    other.save(out / engine)
    atomic_write_text(out / "agreement.csv", csv_text(entity_rows(result)))
    atomic_write_text(out / "disagreements.csv", csv_text(disagreement_rows(result)))
    print_table(agreement_table(result, top), out_console)
    typer.echo(
        f"{len(result.disagreements)} disagreements on {len(result.disagreeing_pairs)} pairs -> {out / 'disagreements.csv'}"
    )
    if review_db is not None:
        _review_disagreements(
            result.disagreeing_pairs, read, out, review_db, review_n, seed, spec_compat=spec, hierarchy=hierarchy
        )
    if other.failures:
        typer.echo(f"{other.n_failed} pair(s) the {engine} engine did not score: {out / engine / 'failures.jsonl'}", err=True)
        stopped = other.usage is not None and other.usage.stopped
        raise typer.Exit(EXIT_STOPPED if stopped else EXIT_UNSCORED)


def _review_disagreements(
    pair_ids: list[str], pairs: list[Any], out: Path, db: Path, n: int, seed: int, *, spec_compat: bool, hierarchy: bool
) -> None:
    """A review database of a seeded, stratified draw of the disagreeing pairs (the rule engine's
    rows on them, which reviewers confirm or correct)."""
    from cxreval.evaluate import Evaluator
    from cxreval.review.db import ReviewDBError
    from cxreval.review.sampling import ReviewSetupError, init_review

    if not pair_ids:
        typer.echo("no disagreement: nothing to review")
        return
    wanted = set(pair_ids)
    chosen = [p for p in pairs if p.pair_id in wanted]
    Evaluator(spec_compat=spec_compat, hierarchy=hierarchy).evaluate(chosen).save(out / "review-rules")
    try:
        sample = init_review(out / "review-rules", db, chosen, n, seed=seed, pairs_file="disagreeing pairs")
    except (ReviewSetupError, ReviewDBError) as exc:
        _fail(str(exc))
    typer.echo(f"{len(sample.pairs)} of {len(chosen)} disagreeing pairs drawn into {db}: cxreval review serve {db}")
