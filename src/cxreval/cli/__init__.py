"""Command line: ``cxreval evaluate``, ``compare``, ``report``, ``extract``, ``ontology``, ``cache``, ``agree``,
``prompts``, ``baseline``, ``bench``, ``meta``, ``rules``, ``snapshot``, ``weights`` and ``review``.

Exit codes (docs/cli.md): 0 done; 1 results could not be written; 2 bad input or settings; 3 an LLM run stopped early
(``--max-cost`` reached, or the endpoint refused the run); 4 more pairs left unscored (listed in
``failures.jsonl``) than ``--allow-failures`` accepts; 130 interrupted (Ctrl-C), 143 stopped by
SIGTERM; 5 (``cxreval weights fetch`` only) a download failed or was refused. What was finished is cached, the earlier results are left whole, and rerunning resumes.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from collections.abc import Callable, Sequence
from enum import Enum, StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec

import typer
from rich.markup import escape

from cxreval._version import __version__
from cxreval.cli.agree import agree
from cxreval.cli.baseline import baseline
from cxreval.cli.bench import bench
from cxreval.cli.common import (
    EXIT_INPUT,  # noqa: F401  (re-exported: the exit codes are part of cxreval.cli)
    EXIT_INTERRUPTED,  # noqa: F401  (re-exported)
    EXIT_STOPPED,
    EXIT_UNSCORED,
    EXIT_WRITE,
    LLM_PANEL,
    FlatOption,
    LLMConfigOption,
    RulesOption,
    SpecCompatOption,
    choice_members,
    err_console,
    fail,
    first_problem,
    interrupt_code,
    ontology_or_fail,
    out_console,
    sigterm_as_interrupt,
    user_rules,
)
from cxreval.cli.extract import extract
from cxreval.cli.llm_options import with_llm_options
from cxreval.cli.meta import meta_app
from cxreval.cli.prompts import prompts
from cxreval.cli.review import review_app
from cxreval.cli.rules import rules_app
from cxreval.cli.snapshot import snapshot_app
from cxreval.cli.weights import weights_app
from cxreval.evaluate_files import example_path  # noqa: F401  (re-exported: it has always been importable from here)
from cxreval.io import CopiedCandidatesWarning, InputError, MissingIdsSkipped, StudiesWithoutText
from cxreval.literals import (
    DATASET_LAYOUTS,
    ENGINES,
    EXECUTORS,
    INPUT_FORMATS,
    ON_MISSING,
    REPORT_SECTIONS,
    ROW_STYLES,
    UNCERTAIN_POLICIES,
)
from cxreval.ontology import OntologyError, load_ontology
from cxreval.summary import print_summary

if TYPE_CHECKING:
    from cxreval.evaluate import EvaluationScores, Evaluator
    from cxreval.evaluate_files import FilesInput, FilesOutcome
    from cxreval.io.writers import OutputRun
    from cxreval.judge.files import RowsFormat

app = typer.Typer(
    help="Entity-level evaluation of generated chest X-ray reports (offline rule engine by default).",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    # click's plain help: no <bool> metavars, choices never broken mid-word, [default: x] kept
    rich_markup_mode=None,
)


# The choices of evaluate's options, from cxreval.literals (the engines' names: the registry,
# cxreval.engines, holds the same ones; a test keeps them so): the engines are not imported here.
Uncertain = Enum("Uncertain", choice_members(UNCERTAIN_POLICIES), type=str)  # type: ignore[misc]
Section = Enum("Section", choice_members(REPORT_SECTIONS), type=str)  # type: ignore[misc]
OnMissingChoice = Enum("OnMissingChoice", choice_members(ON_MISSING), type=str)  # type: ignore[misc]
RefsLayout = Enum("RefsLayout", choice_members(DATASET_LAYOUTS), type=str)  # type: ignore[misc]
InputFormat = Enum("InputFormat", choice_members(INPUT_FORMATS), type=str)  # type: ignore[misc]
Engine = Enum("Engine", choice_members(ENGINES), type=str)  # type: ignore[misc]
Executor = Enum("Executor", choice_members(EXECUTORS), type=str)  # type: ignore[misc]
Rows = Enum("Rows", choice_members(ROW_STYLES), type=str)  # type: ignore[misc]


LLM = LLM_PANEL
INPUT = "Input"

P = ParamSpec("P")


_fail = fail


def _version_callback(value: bool) -> None:
    if value:
        out_console.print(f"cxreval {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool | None, typer.Option("--version", callback=_version_callback, is_eager=True, help="Show the version.")
    ] = None,
) -> None:
    """cxreval: which clinical findings does a report generator get wrong?"""
    warnings.showwarning = _show_warning


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: object = None, line: str | None = None
) -> None:
    """A warning as one ``WARNING:`` line on standard error (no file and line of cxreval's code)."""
    err_console.print(f"[bold yellow]WARNING:[/] {escape(str(message))}", highlight=False, soft_wrap=True)


def _interruptible(command: Callable[P, None]) -> Callable[P, None]:
    """Ctrl-C or SIGTERM anywhere in ``command`` (outside its own, more precise handler) ends in
    one line and exit 130 (143 for SIGTERM)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            with sigterm_as_interrupt():
                command(*args, **kwargs)
        except KeyboardInterrupt as exc:
            err_console.print(
                "[bold yellow]interrupted:[/] before any result was written; rerun the same command",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(interrupt_code(exc)) from None

    return wrapper


@app.command()
@_interruptible
@with_llm_options
def evaluate(
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Folder for judgements.jsonl.gz, errors.csv, scores.json (checked before any work)."),
    ],
    pairs: Annotated[
        Path | None,
        typer.Option(
            "--pairs", help="One file with id, reference and candidate columns; - reads standard input.", rich_help_panel=INPUT
        ),
    ] = None,
    refs: Annotated[
        Path | None,
        typer.Option(
            "--refs", help="References file (tabular, or ReXrank JSON), joined on id with --cands.", rich_help_panel=INPUT
        ),
    ] = None,
    cands: Annotated[
        Path | None,
        typer.Option("--cands", help="Candidates file, joined on id with --refs; - reads standard input.", rich_help_panel=INPUT),
    ] = None,
    example: Annotated[
        bool, typer.Option("--example", help="Score the small example shipped with the package.", rich_help_panel=INPUT)
    ] = False,
    input_format: Annotated[
        InputFormat | None,
        typer.Option(
            "--format",
            help="Input format: of each file whose suffix does not tell (needed for -), or of every file when all suffixes tell.",
            rich_help_panel=INPUT,
        ),
    ] = None,
    id_col: Annotated[str | None, typer.Option("--id-col", help="Id column [default: id].", rich_help_panel=INPUT)] = None,
    ref_id_col: Annotated[
        str | None,
        typer.Option(
            "--ref-id-col", help="Id column of --refs, when it differs from --cands [default: --id-col].", rich_help_panel=INPUT
        ),
    ] = None,
    cand_id_col: Annotated[
        str | None, typer.Option("--cand-id-col", help="Id column of --cands [default: --id-col].", rich_help_panel=INPUT)
    ] = None,
    reference_col: Annotated[
        str | None,
        typer.Option(
            "--reference-col", help="Reference text column [default: reference; ReXrank JSON: --section].", rich_help_panel=INPUT
        ),
    ] = None,
    candidate_col: Annotated[
        str | None,
        typer.Option(
            "--candidate-col",
            help="Candidate text column [default: candidate; ReXrank JSON: model_prediction].",
            rich_help_panel=INPUT,
        ),
    ] = None,
    system_col: Annotated[
        str | None,
        typer.Option(
            "--system-col",
            help="Long format: the column naming the system; every system is scored, one folder each.",
            rich_help_panel=INPUT,
        ),
    ] = None,
    meta_col: Annotated[
        list[str] | None,
        typer.Option("--meta-col", metavar="COL", help="Extra column to keep in errors.csv (repeatable).", rich_help_panel=INPUT),
    ] = None,
    section: Annotated[
        Section | None,
        typer.Option(
            "--section",
            help="Which text of a ReXrank JSON or --refs-layout references file [default: report].",
            rich_help_panel=INPUT,
        ),
    ] = None,
    refs_layout: Annotated[
        RefsLayout | None,
        typer.Option(
            "--refs-layout",
            metavar="LAYOUT",
            help="--refs is a public dataset in its own layout, a pool of references; --section picks the text: mimic-cxr (the report tree), mimic-cxr-sectioned, chexpert-plus, rexgradient or rexrank (docs/data.md).",
            rich_help_panel=INPUT,
        ),
    ] = None,
    on_missing: Annotated[
        OnMissingChoice,
        typer.Option(
            "--on-missing",
            help="Two files: an id in one only stops the run (error), or is left out and counted (skip).",
            rich_help_panel=INPUT,
        ),
    ] = OnMissingChoice.error,  # type: ignore[attr-defined]
    ontology: Annotated[
        Path | None, typer.Option("--ontology", help="Your own ontology YAML instead of the packaged one.")
    ] = None,
    rules: RulesOption = None,
    uncertain: Annotated[
        Uncertain,
        typer.Option(
            "--uncertain",
            help="Count hedged mentions as positive, negative, positive only when probable ('likely'; not 'may', 'X or Y'), or when probable or an alternative ('X or Y'; not 'may').",
        ),
    ] = Uncertain["positive"],
    spec_compat: SpecCompatOption = False,
    flat: FlatOption = False,
    progress: Annotated[
        bool | None, typer.Option("--progress/--no-progress", help="Progress bar [default: on for long inputs in a terminal].")
    ] = None,
    top: Annotated[
        int, typer.Option("--top", min=0, metavar="N", help="Entities to list in the summary (by reference support).")
    ] = 15,
    as_json: Annotated[bool, typer.Option("--json", help="Print the headline metrics as JSON instead of tables.")] = False,
    rows: Annotated[
        Rows,
        typer.Option(
            "--rows",
            help="judgements.jsonl.gz: compact (rows that count in a score, evidence as offsets into the input, not sentences) or full (every row, evidence as text). Scores are the same.",
        ),
    ] = Rows["compact"],
    parquet: Annotated[
        bool | None,
        typer.Option("--parquet/--no-parquet", help="Also write judgements.parquet [default: when pyarrow is installed]."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            metavar="N",
            help="Processes for the rule engine on inputs of 2,000 pairs or more (results identical) [default: all cores, at most one per 250 MiB of half the available memory].",
        ),
    ] = None,
    executor: Annotated[
        Executor | None,
        typer.Option(
            "--executor",
            help="Where the rule engine judges: local processes, or Ray actors (--workers of them; optional extra 'ray'; results identical) [default: local; ray with --ray-address].",
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            metavar="ADDR",
            help="An existing Ray cluster for --executor ray: auto, ray://head:10001, head:6379 [default: start a local one].",
        ),
    ] = None,
    allow_failures: Annotated[
        float,
        typer.Option(
            "--allow-failures",
            min=0.0,
            max=1.0,
            metavar="SHARE",
            help="Share of pairs an LLM run may leave unscored before exiting 4.",
        ),
    ] = 0.0,
    engine: Annotated[
        Engine,
        typer.Option(
            "--engine",
            help="rules (offline), llm-extract (one call per report), llm-pairwise (SPEC-CXR, one call per pair) or llm-pairwise-2pass (then a verification call per pair).",
        ),
    ] = Engine["rules"],
    llm_config: LLMConfigOption = None,
    runs: Annotated[
        int, typer.Option("--runs", min=1, metavar="N", help="Independent runs; scores as mean +- sd.", rich_help_panel=LLM)
    ] = 1,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Ask again where a stored answer was invalid.", rich_help_panel=LLM)
    ] = False,
    llm_options: dict[str, Any] | None = None,
) -> None:
    """Score candidate reports against references, entity by entity (SPEC-CXR).

    Exit codes: 0 every pair scored; 2 bad input or settings; 3 an LLM run stopped early
    (--max-cost, or the endpoint refused); 4 more pairs unscored than --allow-failures lets
    through; 130 interrupted, 143 SIGTERM (the earlier results are left whole; rerun to resume).
    """
    from pydantic import ValidationError

    from cxreval.evaluate_files import FilesInput, check_executor
    from cxreval.io.writers import OutputError, check_out_dir
    from cxreval.judge.files import RowsFormat
    from cxreval.ray_executor import RayUnavailable

    try:
        source = FilesInput(
            pairs=pairs,
            refs=refs,
            cands=cands,
            example=example,
            format=input_format.value if input_format else None,
            id_col=id_col,
            ref_id_col=ref_id_col,
            cand_id_col=cand_id_col,
            reference_col=reference_col,
            candidate_col=candidate_col,
            system_col=system_col,
            meta_cols=meta_col or [],
            section=section.value if section else None,
            refs_layout=refs_layout.value if refs_layout else None,
            on_missing=on_missing.value,
        )
        where = executor.value if executor else ("ray" if ray_address else "local")
        check_executor(engine.value, where, ray_address, runs)
        check_out_dir(out)
        rows_format = RowsFormat.choose(rows.value, parquet)  # ValueError: --parquet without pyarrow
    except (ValidationError, OutputError, ValueError, RayUnavailable) as exc:
        _fail(first_problem(exc))
        return
    evaluator = _evaluator(
        engine.value,
        ontology,
        rules,
        uncertain.value,
        workers,
        spec_compat,
        flat,
        retry_failed,
        llm_config if engine.value != "rules" else None,
        llm_options,
    )
    outcome = _run_evaluate(
        source,
        out,
        evaluator,
        runs=runs,
        rows=rows_format,
        progress=progress,
        executor=where,
        ray_address=ray_address,
    )
    if system_col:
        _print_systems(outcome.systems, out, as_json)
    else:
        _print_results(outcome.systems[0][1], out, as_json, top)
    _warn_flagged(outcome.scores)
    _exit_for_unscored(outcome, allow_failures)


def _exit_for_unscored(outcome: FilesOutcome, allow_failures: float) -> None:
    """Exit 3 when an LLM run stopped early, 4 when more pairs are unscored than ``--allow-failures``."""
    stopped = next((r.usage.stopped for r in outcome.scores if r.usage is not None and r.usage.stopped), None)
    if stopped:
        err_console.print(
            f"[bold yellow]stopped early:[/] {escape(stopped)}. Pairs not judged are listed in failures.jsonl; "
            "finished calls are cached, so rerunning the same command resumes.",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_STOPPED)
    unscored = [
        msg for system, results in outcome.systems if (msg := _unscored(system, results, outcome.counts[system], allow_failures))
    ]
    if unscored:
        for msg in unscored:
            err_console.print(f"[bold red]unscored:[/] {escape(msg)}", highlight=False, soft_wrap=True)
        err_console.print("failures.jsonl lists why; rerun with --retry-failed to ask again.", highlight=False)
        raise typer.Exit(EXIT_UNSCORED)


def _evaluator(
    engine: str,
    ontology: Path | None,
    rules: Path | None,
    uncertain: str,
    workers: int | None,
    spec_compat: bool,
    flat: bool,
    retry_failed: bool,
    llm_config: Path | None,
    llm_options: dict[str, object] | None,
) -> Evaluator:
    """The evaluator of ``cxreval evaluate``'s settings; ends the command on a bad one (the ontology,
    a rule file, the LLM settings) before any input is read."""
    from cxreval.evaluate import Evaluator
    from cxreval.llm.config import LLMConfig, LLMConfigError
    from cxreval.parallel import default_workers

    try:
        onto = load_ontology(ontology)
        rule_set = user_rules(onto, rules, engine)
        llm = None
        if engine != "rules":
            llm = LLMConfig.load(llm_config, **(llm_options or {}))  # type: ignore[arg-type]
            if llm.max_cost is not None and llm.price_input == 0 and llm.price_output == 0:
                _fail("--max-cost needs prices: give --price-input and --price-output (USD per million tokens)")
            from cxreval.llm.cache import check_answer_store

            check_answer_store(llm.resolved_cache_path())  # NotAnAnswerStore is a ValueError
        return Evaluator(
            onto,
            uncertain=uncertain,  # type: ignore[arg-type]
            engine=engine,  # type: ignore[arg-type]
            llm=llm,
            retry_failed=retry_failed,
            workers=workers if workers is not None else default_workers(),
            spec_compat=spec_compat,
            rules=rule_set,
            hierarchy=not flat,
        )
    except (OntologyError, LLMConfigError, ValueError) as exc:
        _fail(str(exc))
        raise AssertionError("unreachable") from exc


def _run_evaluate(
    source: FilesInput,
    out: Path,
    evaluator: Evaluator,
    *,
    runs: int,
    rows: RowsFormat,
    progress: bool | None,
    executor: str,
    ray_address: str | None,
) -> FilesOutcome:
    """:func:`cxreval.evaluate_files.evaluate_files`, with the command's messages and exit codes:
    what was kept when interrupted, a bad input or folder (2), a disk that fails (1)."""
    from cxreval.evaluate_files import evaluate_files
    from cxreval.io.writers import OutputError, OutputRun
    from cxreval.ray_executor import RayUnavailable

    run = OutputRun()  # every file lands beside the earlier run's, and replaces it when all are written
    try:
        with warnings.catch_warnings(record=True) as caught:
            for notice in _INPUT_NOTICES:
                warnings.simplefilter("always", notice)
            outcome = evaluate_files(
                source,
                out,
                evaluator,
                runs=runs,
                rows=rows,
                progress=progress,
                executor=executor,
                ray_address=ray_address,
                outputs=run,
            )
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        llm = evaluator.llm
        kept = (
            f"finished LLM answers are kept in {llm.resolved_cache_path()}, so rerunning the same command resumes"
            if llm is not None
            else "rerun the same command to score again"
        )
        err_console.print(
            f"[bold yellow]interrupted:[/] {escape(_what_was_kept(run, out) + kept)}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(interrupt_code(exc)) from None
    except (InputError, OutputError, RayUnavailable, ValueError) as exc:  # a bad input, a folder in use, no Ray
        _fail(str(exc))
    except OSError as exc:  # a full disk, a folder removed under us: the files written so far are whole
        _fail(f"cannot write the results to {out}: {exc.strerror or exc}", EXIT_WRITE)
    finally:
        _print_copied(caught)
        for w in caught:  # every other warning (look-alike letters) as it would have been shown
            if not issubclass(w.category, _INPUT_NOTICES):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return outcome


#: What the readers say of an input that was read: candidates that copy their reference, ids
#: ``--on-missing skip`` left out, dataset studies without the text asked for.
_INPUT_NOTICES = (CopiedCandidatesWarning, MissingIdsSkipped, StudiesWithoutText)


def _print_copied(caught: Sequence[warnings.WarningMessage]) -> None:
    """Say on stderr what the readers noticed of the input (:data:`_INPUT_NOTICES`)."""
    for w in caught:
        if issubclass(w.category, _INPUT_NOTICES):
            err_console.print(f"[bold yellow]WARNING:[/] {escape(str(w.message))}", highlight=False, soft_wrap=True)


def _warn_flagged(results: Sequence[EvaluationScores]) -> None:
    """Say on stderr how many pairs read like instructions to the judge, and how many of them were
    left unscored because the LLM's answer and the rule engine disagree (:mod:`cxreval.judge.crosscheck`)."""
    flagged = {f.pair_id for r in results for f in r.flags}
    if not flagged:
        return
    listed = {f.pair_id for r in results for f in r.flags if f.listed}
    err_console.print(
        f"[bold yellow]flagged:[/] {len(flagged)} pairs hold text that reads like instructions to the judge "
        f"(scores.json, injection_check); {len(listed)} of them disagree with the rule engine and are not scored "
        "(failures.jsonl, reason injection).",
        highlight=False,
        soft_wrap=True,
    )


def _unscored(system: str | None, results: Sequence[EvaluationScores], n_total: int, allow: float) -> str | None:
    """Why a system's pairs left unscored fail the run (``--allow-failures``), or None.

    Per system and per run (the worst run decides: a pair unscored in any run is a hole in that
    run's numbers); a system with no pair scored always fails. The share is compared with a
    tolerance, so ``--allow-failures 0.29`` accepts 29 of 100.
    """
    n_failed = max(r.n_failed for r in results)
    if not n_failed:
        return None
    limit = math.floor(allow * n_total + 1e-9)
    if n_failed <= limit and n_failed < n_total:
        return None
    who = f"system {system!r}: " if system is not None else ""
    return (
        f"{who}{n_failed} of {n_total} pairs were not scored; --allow-failures {allow:g} accepts at most "
        f"{min(limit, n_total - 1)}"
    )


def _what_was_kept(run: OutputRun, out: Path) -> str:
    """The start of the line an interrupted evaluate prints: what its folder now holds."""
    from cxreval.io.writers import PARTIAL

    if run.committed:
        return f"the results were written to {out} just before; "
    if any(m.files for m in run.folders.values()):
        return f"nothing in {out} was replaced (this run's unfinished files end in {PARTIAL}; the next run removes them); "
    return ""


def _print_results(results: Sequence[EvaluationScores], out: Path, as_json: bool, top: int) -> None:
    from cxreval.evaluate import summarize_runs
    from cxreval.summary import print_runs

    if len(results) == 1:
        result = results[0]
        if as_json:
            out_console.print_json(json.dumps(result.to_dict()["metrics"]))
            return
        print_summary(result, out_console, top=top)
        twin = " (+ .parquet)" if (out / "judgements.parquet").is_file() else ""
        out_console.print(
            f"wrote {out}/: judgements.jsonl.gz{twin}, errors.csv, scores.json"
            + (", failures.jsonl" if result.usage is not None or result.failures else ""),
            style="dim",
            highlight=False,
            soft_wrap=True,
        )
        return
    summary = summarize_runs(results)
    if as_json:
        out_console.print_json(json.dumps(summary["metrics"]))
        return
    print_runs(results, summary, out_console)
    out_console.print(
        f"wrote {out / 'runs.json'} and {out}/run-1 ... run-{len(results)}", style="dim", highlight=False, soft_wrap=True
    )


def _print_systems(outcomes: list[tuple[str | None, Sequence[EvaluationScores]]], out: Path, as_json: bool) -> None:
    from cxreval.evaluate import systems_frame, systems_signature
    from cxreval.io.writers import SYSTEMS_DIR
    from cxreval.summary import print_systems

    frame = systems_frame({str(s): results for s, results in outcomes})
    if as_json:
        out_console.print_json(frame.reset_index().to_json(orient="records"))
        return
    print_systems(frame, out_console, signature=systems_signature([r for _, r in outcomes]))
    out_console.print(
        f"wrote {out / 'systems.csv'} and one folder per system in {out / SYSTEMS_DIR}",
        style="dim",
        highlight=False,
        soft_wrap=True,
    )


class CIMethodChoice(StrEnum):
    bca = "bca"
    percentile = "percentile"


@app.command()
@_interruptible
def compare(
    a_dir: Annotated[Path, typer.Argument(metavar="A_DIR", help="Results folder of system A (from cxreval evaluate).")],
    b_dir: Annotated[Path, typer.Argument(metavar="B_DIR", help="Results folder of system B, same pairs, same signature.")],
    resamples: Annotated[int, typer.Option("--resamples", min=1, metavar="N", help="Paired bootstrap resamples.")] = 1000,
    permutations: Annotated[
        int, typer.Option("--permutations", min=1, metavar="N", help="Approximate-randomisation permutations.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the resamples and permutations.")] = 0,
    method: Annotated[
        CIMethodChoice, typer.Option("--method", help="Bootstrap interval of the difference.")
    ] = CIMethodChoice.bca,
    confidence: Annotated[
        float, typer.Option("--confidence", min=0.5, max=0.999, metavar="LEVEL", help="Confidence level of the interval.")
    ] = 0.95,
    all_scores: Annotated[
        bool, typer.Option("--all", help="Every score (each entity's P/R/F1 too), not only the overall ones.")
    ] = False,
    ontology: Annotated[
        Path | None, typer.Option("--ontology", help="The ontology YAML both runs used, if not the packaged one.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Paired test of two evaluations on the same pairs: A - B with its CI and p-values.

    Refuses results whose signatures differ (other engine, ontology, policy or model).
    """
    from cxreval.evaluate import ResultsError, load_result
    from cxreval.metrics.intervals import compare_evaluations
    from cxreval.scores import SignatureMismatch

    try:
        onto = load_ontology(ontology)
        a = load_result(a_dir, onto)
        b = load_result(b_dir, onto)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            result = compare_evaluations(
                a, b, resamples=resamples, permutations=permutations, seed=seed, method=method.value, confidence=confidence
            )
    except (ResultsError, OntologyError, SignatureMismatch, ValueError) as exc:
        _fail(str(exc))
        return
    for w in caught:
        err_console.print(f"[bold yellow]WARNING:[/] {escape(str(w.message))}", highlight=False, soft_wrap=True)
    entity_ids = {e.id for e in onto.entities}
    tests = [t for t in result.tests if all_scores or t.name.split("/", 1)[0] not in entity_ids]
    if as_json:
        doc = {**result.model_dump(mode="json"), "tests": [t.model_dump() for t in tests], "signature": str(result.signature)}
        out_console.print_json(json.dumps(doc))
        return
    from cxreval.render import Column, Table, print_table

    def f(v: float | None, digits: int = 3) -> str:
        return "n/a" if v is None else f"{v:.{digits}f}"

    out_console.print(
        f"[bold]A[/] {escape(str(a_dir))}  vs  [bold]B[/] {escape(str(b_dir))}: {result.n_pairs} paired reports",
        highlight=False,
        soft_wrap=True,
    )
    ci = f"{confidence:.0%} CI"
    print_table(
        Table(
            [
                Column("score", "left"),
                Column("A", keep=5),
                Column("B", keep=5),
                Column("A-B", keep=7),
                Column(ci, keep=6),
                Column("p boot", keep=3),
                Column("p rand", keep=4),
            ],
            [
                (
                    t.name,
                    f(t.a),
                    f(t.b),
                    f(t.difference),
                    f"[{f(t.low)}, {f(t.high)}]",
                    f(t.p_bootstrap),
                    f(t.p_randomization),
                )
                for t in tests
            ],
            title=f"A - B ({method.value} {ci}, {resamples} resamples; p: bootstrap, randomisation)",
            note="--json prints them all",
            signature=str(result.signature),
        ),
        out_console,
    )


@app.command("report")
def report_cmd(
    result: Annotated[Path, typer.Argument(metavar="RESULT_JSON", help="A result.json written by cxreval bench.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="The page to write [default: report.html beside RESULT_JSON].")
    ] = None,
    no_text: Annotated[
        bool, typer.Option("--no-text", help="No report text on the page (example sentences, quoted cues), to share it.")
    ] = False,
) -> None:
    """Render a saved benchmark result as the self-contained HTML page again."""
    from pydantic import ValidationError

    from cxreval.bench.models import BenchmarkResult
    from cxreval.page import write_html

    try:
        loaded = BenchmarkResult.model_validate_json(result.read_text(encoding="utf-8"))
    except OSError as exc:
        _fail(f"{result}: cannot read ({exc.strerror or exc})")
        return
    except ValidationError as exc:
        _fail(f"{result}: not a cxreval bench result.json ({exc.error_count()} problems, first: {first_problem(exc)})")
        return
    page = write_html(loaded, out or result.with_name("report.html"), include_text=not no_text)
    out_console.print(str(page), highlight=False, soft_wrap=True)


@app.command("ontology")
def ontology_cmd(
    path: Annotated[Path | None, typer.Argument(help="An ontology YAML to validate (default: the packaged one).")] = None,
    list_entities: Annotated[bool, typer.Option("--list", help="List every entity.")] = False,
) -> None:
    """Validate an ontology and summarise it."""
    onto = ontology_or_fail(path)
    out_console.print(
        f"{onto.signature}: {len(onto.findings())} findings, {len(onto.differentials())} differential "
        f"diagnoses, {len(onto.groups)} groups, label sets: {', '.join(onto.labelsets)}",
        highlight=False,
    )
    if list_entities:
        from cxreval.render import Column, Table, print_table

        columns = [Column("id", "left"), Column("name", "left", keep=5), Column("kind", "left", keep=4)]
        columns += [Column("group", "left", keep=3), Column("attributes", "left", keep=1), Column("critical", "left", keep=2)]
        body = [[e.id, e.name, e.kind, e.group, ",".join(e.attributes), "yes" if e.critical else ""] for e in onto.entities]
        print_table(Table(columns, body, note="all in the ontology's YAML"), out_console)


@app.command("cache")
def cache_cmd(
    path: Annotated[Path | None, typer.Option("--path", help="The SQLite answer store (default: the user cache).")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Delete entries (all, or those chosen by --model / --failed).")] = False,
    model: Annotated[str | None, typer.Option("--model", help="Only this model's entries.")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only entries whose answer stayed invalid.")] = False,
    reset_budget: Annotated[
        bool, typer.Option("--reset-budget", help="Start a new --max-cost budget for this store (answers are kept).")
    ] = False,
) -> None:
    """Show (or clear) the LLM answer store: entries, calls, tokens and cost per engine and model."""
    from cxreval.llm.cache import AnswerCache, NotAnAnswerStore, check_answer_store
    from cxreval.llm.config import default_cache_path
    from cxreval.render import Column, Table, print_table

    target = path or default_cache_path()
    if not target.exists() or (target.is_file() and target.stat().st_size == 0):
        out_console.print(f"{target}: no cache yet", highlight=False)
        return
    try:
        check_answer_store(target)
    except NotAnAnswerStore as exc:
        _fail(str(exc))
    with AnswerCache(target) as store:
        if reset_budget:
            spent = store.reset_budget()
            out_console.print(f"{target}: new budget (the old one had spent {spent:.4f} USD)", highlight=False)
            return
        if clear:
            n = store.clear(model=model, status="failed" if failed else None)
            out_console.print(f"{target}: deleted {n} entr{'y' if n == 1 else 'ies'}", highlight=False)
            return
        rows = [r for r in store.stats() if (model is None or r["model"] == model) and (not failed or r["status"] == "failed")]
        budget_spent = store.spent()
    size = sum(p.stat().st_size for p in target.parent.glob(target.name + "*") if p.is_file())
    columns = [Column("kind", "left"), Column("engine", "left", keep=2), Column("model", "left", keep=6)]
    columns += [Column("status", "left", keep=5), Column("entries", keep=7), Column("calls", keep=4)]
    columns += [Column("input tokens", keep=3), Column("output tokens", keep=3), Column("cost USD", keep=8)]
    body = [
        [
            r["kind"],
            r["engine"],
            r["model"],
            r["status"],
            str(r["entries"]),
            str(r["calls"]),
            f"{r['input_tokens']:,}",
            f"{r['output_tokens']:,}",
            f"{r['cost']:.4f}",
        ]
        for r in rows
    ]
    print_table(Table(columns, body, title=f"{target} ({size / 1e6:.1f} MB)", note="widen the terminal to see them"), out_console)
    out_console.print(
        f"budget: {budget_spent:.4f} USD spent since the last --reset-budget (what --max-cost counts)", highlight=False
    )


# `cxreval agree` lives with its readers and tables in cxreval.agree.
app.command("agree")(agree)
app.command("extract")(extract)
app.command("prompts")(prompts)
app.command("baseline")(baseline)
app.command("bench")(bench)
app.add_typer(meta_app, name="meta", help="Meta-evaluation: human alignment, perturbation suite, discrimination and robustness.")
app.add_typer(rules_app, name="rules", help="The rule engine's rules: ids, kinds and docs (what --explain names).")
app.add_typer(snapshot_app, name="snapshot", help="Pin what the rule engine reads in a corpus; show what a change alters.")
app.add_typer(
    weights_app, name="weights", help="Fetch the weight-based metrics' checkpoints (only when asked); list what is present."
)
app.add_typer(
    review_app, name="review", help="Radiologists check the engine's judgements in a browser; its accuracy on your data."
)
