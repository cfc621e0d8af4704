"""Command line: ``cxreval evaluate``, ``extract``, ``ontology``, ``cache``, ``agree``, ``bench`` and ``meta``.

Exit codes: 0 done (pairs whose LLM answer stayed invalid are listed in ``failures.jsonl``),
2 bad input or settings, 3 an LLM run stopped early (``--max-cost`` reached, or the endpoint
refused the run); what was finished is saved and cached, and rerunning resumes.
"""

from __future__ import annotations

import json
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from cxreval._version import __version__
from cxreval.agree import agree
from cxreval.bench.cli import bench
from cxreval.meta.cli import meta_app
from cxreval.io import InputError, read_pair_files, read_pairs
from cxreval.ontology import OntologyError, load_ontology
from cxreval.summary import print_summary

app = typer.Typer(
    help="Entity-level evaluation of generated chest X-ray reports (offline rule engine by default).",
    no_args_is_help=True,
    add_completion=False,
)
out_console = Console()
if not out_console.is_terminal:
    out_console = Console(width=120)  # pipes and CI logs: wide enough for the summary tables
err_console = Console(stderr=True)


class Uncertain(str, Enum):
    positive = "positive"
    negative = "negative"


class Section(str, Enum):
    report = "report"
    findings = "findings"
    impression = "impression"


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


class Engine(str, Enum):
    rules = "rules"
    llm_extract = "llm-extract"
    llm_pairwise = "llm-pairwise"


class Provider(str, Enum):
    openai = "openai"
    anthropic = "anthropic"


class ResponseFormat(str, Enum):
    auto = "auto"
    json_schema = "json_schema"
    json_object = "json_object"
    none = "none"


class SchemaStyle(str, Enum):
    sparse = "sparse"
    dense = "dense"


LLM = "LLM engines"


def example_path() -> Path:
    """The small example pairs file shipped inside the package."""
    return Path(str(resources.files("cxreval.examples") / "example_pairs.csv"))


def _fail(message: str, code: int = 2) -> None:
    # soft_wrap: never break a path or a line number across lines; escape: messages may hold "[".
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _version_callback(value: bool) -> None:
    if value:
        out_console.print(f"cxreval {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version_callback, is_eager=True, help="Show the version.")
    ] = None,
) -> None:
    """cxreval: which clinical findings does a report generator get wrong?"""


@app.command()
def evaluate(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for judgements.jsonl, errors.csv, scores.json.")],
    pairs: Annotated[Optional[Path], typer.Option("--pairs", help="One file with id, reference and candidate columns (CSV, TSV, JSONL, Parquet, JSON).")] = None,
    refs: Annotated[Optional[Path], typer.Option("--refs", help="References file (tabular, or ReXrank JSON), joined on id with --cands.")] = None,
    cands: Annotated[Optional[Path], typer.Option("--cands", help="Candidates file, joined on id with --refs.")] = None,
    example: Annotated[bool, typer.Option("--example", help="Score the small example shipped with the package.")] = False,
    id_col: Annotated[str, typer.Option("--id-col", help="Id column.")] = "id",
    reference_col: Annotated[str, typer.Option("--reference-col", help="Reference text column.")] = "reference",
    candidate_col: Annotated[str, typer.Option("--candidate-col", help="Candidate text column.")] = "candidate",
    meta_col: Annotated[Optional[list[str]], typer.Option("--meta-col", help="Extra column to keep (repeatable).")] = None,
    section: Annotated[Section, typer.Option("--section", help="Which text of a ReXrank JSON file to use.")] = Section.report,
    ontology: Annotated[Optional[Path], typer.Option("--ontology", help="Your own ontology YAML instead of the packaged one.")] = None,
    uncertain: Annotated[Uncertain, typer.Option("--uncertain", help="Count hedged mentions as positive or negative.")] = Uncertain.positive,
    progress: Annotated[Optional[bool], typer.Option("--progress/--no-progress", help="Progress bar (default: on for long inputs in a terminal).")] = None,
    top: Annotated[int, typer.Option("--top", help="Entities to list in the summary (by reference support).")] = 15,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="Summary on stdout as a text table or JSON.")] = OutputFormat.text,
    engine: Annotated[Engine, typer.Option("--engine", help="rules (offline), llm-extract (one call per report) or llm-pairwise (SPEC-CXR, one call per pair).")] = Engine.rules,
    llm_config: Annotated[Optional[Path], typer.Option("--llm-config", help="YAML file of LLM settings (flags and CXREVAL_LLM_* variables override it).", rich_help_panel=LLM)] = None,
    provider: Annotated[Optional[Provider], typer.Option("--provider", help="openai (any OpenAI-compatible server) or anthropic.", rich_help_panel=LLM)] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="Endpoint, e.g. http://127.0.0.1:8000/v1 (vLLM, SGLang, llama.cpp, Ollama).", rich_help_panel=LLM)] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Model name as the server knows it.", rich_help_panel=LLM)] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="Name of the environment variable holding the key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).", rich_help_panel=LLM)] = None,
    temperature: Annotated[Optional[float], typer.Option("--temperature", rich_help_panel=LLM)] = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Max output tokens per call.", rich_help_panel=LLM)] = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", help="Seconds per request.", rich_help_panel=LLM)] = None,
    concurrency: Annotated[Optional[int], typer.Option("--concurrency", help="Calls in flight at once.", rich_help_panel=LLM)] = None,
    retries: Annotated[Optional[int], typer.Option("--retries", help="Retries per call on 429 / 5xx / timeouts (Retry-After is honoured).", rich_help_panel=LLM)] = None,
    rate_limit: Annotated[Optional[float], typer.Option("--rate-limit", help="Max requests per second.", rich_help_panel=LLM)] = None,
    response_format: Annotated[Optional[ResponseFormat], typer.Option("--response-format", help="Structured-output variant; auto tries json_schema, then json_object, then none.", rich_help_panel=LLM)] = None,
    schema: Annotated[Optional[SchemaStyle], typer.Option("--schema", help="sparse: list of mentioned entities; dense: one field per entity (SPEC-CXR).", rich_help_panel=LLM)] = None,
    price_input: Annotated[Optional[float], typer.Option("--price-input", help="USD per million input tokens.", rich_help_panel=LLM)] = None,
    price_output: Annotated[Optional[float], typer.Option("--price-output", help="USD per million output tokens.", rich_help_panel=LLM)] = None,
    max_cost: Annotated[Optional[float], typer.Option("--max-cost", help="USD; start no call once this much is spent (needs prices).", rich_help_panel=LLM)] = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Independent runs; scores as mean +- sd.", rich_help_panel=LLM)] = 1,
    local_only: Annotated[Optional[bool], typer.Option("--local-only", help="Refuse any endpoint not on loopback.", rich_help_panel=LLM)] = None,
    cache: Annotated[Optional[Path], typer.Option("--cache", help="SQLite answer store (default ~/.cache/cxreval/llm-answers.sqlite).", rich_help_panel=LLM)] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Ask again where a stored answer was invalid.", rich_help_panel=LLM)] = False,
) -> None:
    """Score candidate reports against references, entity by entity (SPEC-CXR)."""
    from cxreval.evaluate import Evaluator
    from cxreval.llm.config import LLMConfig, LLMConfigError

    sources = sum([pairs is not None, refs is not None or cands is not None, example])
    if sources != 1:
        _fail("give exactly one input: --pairs FILE, or --refs FILE --cands FILE, or --example")
    if (refs is None) != (cands is None):
        _fail("--refs and --cands go together")
    try:
        onto = load_ontology(ontology)
        if example or pairs is not None:
            source = example_path() if example else pairs
            assert source is not None
            loaded = read_pairs(
                source,
                id_col=id_col,
                reference_col=reference_col,
                candidate_col=candidate_col,
                meta_cols=meta_col or [],
            )
        else:
            assert refs is not None and cands is not None
            loaded = read_pair_files(
                refs,
                cands,
                id_col=id_col,
                reference_col=reference_col,
                candidate_col=candidate_col,
                section=section.value,
            )
    except (InputError, OntologyError) as exc:
        _fail(str(exc))
        return
    if not loaded:
        _fail("the input holds no pairs")
    llm = None
    try:
        if engine is not Engine.rules:
            llm = LLMConfig.load(
                llm_config, provider=provider.value if provider else None, base_url=base_url, model=model,
                api_key_env=api_key_env, temperature=temperature, max_tokens=max_tokens, timeout=timeout,
                concurrency=concurrency, retries=retries, rate_limit=rate_limit,
                response_format=response_format.value if response_format else None,
                schema_style=schema.value if schema else None, price_input=price_input,
                price_output=price_output, max_cost=max_cost, local_only=local_only, cache_path=cache,
            )
            if llm.max_cost is not None and llm.price_input == 0 and llm.price_output == 0:
                _fail("--max-cost needs prices: give --price-input and --price-output (USD per million tokens)")
        evaluator = Evaluator(onto, uncertain=uncertain.value, engine=engine.value, llm=llm, retry_failed=retry_failed)
    except (LLMConfigError, ValueError) as exc:
        _fail(str(exc))
        return
    results = evaluator.evaluate_runs(loaded, runs=runs, progress=progress)
    stopped = next((r.usage.stopped for r in results if r.usage is not None and r.usage.stopped), None)
    if runs == 1:
        result = results[0]
        paths = result.save(out)
        if fmt is OutputFormat.json:
            out_console.print_json(json.dumps(result.to_dict()["metrics"]))
        else:
            print_summary(result, out_console, top=top)
            out_console.print(
                "wrote " + ", ".join(str(p) for p in paths.values()), style="dim", highlight=False
            )
    else:
        from cxreval.evaluate import summarize_runs
        from cxreval.summary import print_runs

        summary = summarize_runs(results)
        out.mkdir(parents=True, exist_ok=True)
        for r in results:
            r.save(out / f"run-{r.run}")
        (out / "runs.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        if fmt is OutputFormat.json:
            out_console.print_json(json.dumps(summary["metrics"]))
        else:
            print_runs(results, summary, out_console)
            out_console.print(f"wrote {out / 'runs.json'} and {out}/run-1 ... run-{runs}", style="dim", highlight=False)
    if stopped:
        err_console.print(
            f"[bold yellow]stopped early:[/] {escape(stopped)}. Pairs not judged are listed in failures.jsonl; "
            "finished calls are cached, so rerunning the same command resumes.",
            highlight=False, soft_wrap=True,
        )
        raise typer.Exit(3)


@app.command()
def extract(
    text: Annotated[str, typer.Argument(help="Report text to read.")],
    ontology: Annotated[Optional[Path], typer.Option("--ontology", help="Your own ontology YAML.")] = None,
) -> None:
    """Show what the rule engine reads in one report (for checking rules)."""
    from rich.table import Table

    from cxreval.extract import RuleExtractor

    try:
        onto = load_ontology(ontology)
    except OntologyError as exc:
        _fail(str(exc))
        return
    extraction = RuleExtractor(onto).extract(text)
    table = Table(title=f"mentions ({extraction.engine})")
    for col in ("entity", "status", "side", "zones", "severity", "comparison", "cue", "section"):
        table.add_column(col)
    for m in extraction.mentions:
        table.add_row(
            m.entity + (" (implied)" if m.implied else "") + (" (history)" if m.historical else ""),
            m.status,
            m.side or "",
            ",".join(m.zones),
            m.severity or "",
            m.comparison or "",
            m.cue or "",
            m.section,
        )
    out_console.print(table)


@app.command("ontology")
def ontology_cmd(
    path: Annotated[Optional[Path], typer.Argument(help="An ontology YAML to validate (default: the packaged one).")] = None,
    list_entities: Annotated[bool, typer.Option("--list", help="List every entity.")] = False,
) -> None:
    """Validate an ontology and summarise it."""
    try:
        onto = load_ontology(path)
    except OntologyError as exc:
        _fail(str(exc))
        return
    out_console.print(
        f"{onto.signature}: {len(onto.findings())} findings, {len(onto.differentials())} differential "
        f"diagnoses, {len(onto.groups)} groups, label sets: {', '.join(onto.labelsets)}",
        highlight=False,
    )
    if list_entities:
        from rich.table import Table

        table = Table()
        for col in ("id", "name", "kind", "group", "attributes", "critical"):
            table.add_column(col)
        for e in onto.entities:
            table.add_row(e.id, e.name, e.kind, e.group, ",".join(e.attributes), "yes" if e.critical else "")
        out_console.print(table)


@app.command("cache")
def cache_cmd(
    path: Annotated[Optional[Path], typer.Option("--path", help="The SQLite answer store (default: the user cache).")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Delete entries (all, or those chosen by --model / --failed).")] = False,
    model: Annotated[Optional[str], typer.Option("--model", help="Only this model's entries.")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only entries whose answer stayed invalid.")] = False,
) -> None:
    """Show (or clear) the LLM answer store: entries, calls, tokens and cost per engine and model."""
    from rich.table import Table

    from cxreval.llm.cache import AnswerCache
    from cxreval.llm.config import default_cache_path

    target = path or default_cache_path()
    if not target.exists():
        out_console.print(f"{target}: no cache yet", highlight=False)
        return
    with AnswerCache(target) as store:
        if clear:
            n = store.clear(model=model, status="failed" if failed else None)
            out_console.print(f"{target}: deleted {n} entr{'y' if n == 1 else 'ies'}", highlight=False)
            return
        rows = [r for r in store.stats() if (model is None or r["model"] == model) and (not failed or r["status"] == "failed")]
    size = sum(p.stat().st_size for p in target.parent.glob(target.name + "*") if p.is_file())
    table = Table(title=f"{target} ({size / 1e6:.1f} MB)", title_justify="left")
    for col in ("kind", "engine", "model", "status", "entries", "calls", "input tokens", "output tokens", "cost USD"):
        table.add_column(col, justify="right" if col[0] in "eciosc" and col not in ("engine",) else "left")
    for r in rows:
        table.add_row(r["kind"], r["engine"], r["model"], r["status"], str(r["entries"]), str(r["calls"]),
                      f"{r['input_tokens']:,}", f"{r['output_tokens']:,}", f"{r['cost']:.4f}")
    out_console.print(table)


# `cxreval agree` lives with its readers and tables in cxreval.agree.
app.command("agree")(agree)
app.command("bench")(bench)
app.add_typer(meta_app, name="meta", help="Meta-evaluation: human alignment, perturbation suite, discrimination and robustness.")
