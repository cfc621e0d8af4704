"""The benchmark result contract: what ``cxreval bench`` computes and every renderer reads.

Frozen pydantic v2 models. ``None`` means undefined (never zero). Lists are sorted the way a
reader wants them (leaderboard rows by rank). ``BenchmarkResult`` is written as ``result.json``
and can be read back with ``BenchmarkResult.model_validate_json``.

Report text lives in one place only: the example pairs (:class:`ExamplePair`: evidence sentences,
and the cue phrases their rule lines quote). :meth:`BenchmarkResult.without_text` leaves it out.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

#: The note a result without report text carries (:meth:`BenchmarkResult.without_text`); the page shows it.
TEXT_LEFT_OUT = (
    "report text left out (--no-text): example pairs give their pair id, error kind and rule ids, no sentence or quoted cue"
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class MetricInfo(_Frozen):
    """A metric in the benchmark: registry name, direction, signature and display label."""

    name: str
    higher_is_better: bool
    signature: str
    label: str
    level: str = "pair"  # "pair" (mean over pairs, bootstrapped) | "corpus" (one value per system)
    description: str = ""


class Interval(_Frozen):
    """A point estimate with its 95 % bootstrap interval (``low``/``high`` None when not computed)."""

    value: float | None
    low: float | None = None
    high: float | None = None


class LeaderboardRow(_Frozen):
    """One system on one leaderboard; ``rank_low``/``rank_high`` bound its rank over resamples."""

    system: str
    n_pairs: int
    n_failed: int = 0
    metrics: dict[str, Interval]
    rank: int
    rank_low: int
    rank_high: int
    error_free: Interval | None = None
    critical_error_free: Interval | None = None
    baseline: bool = False


class Leaderboard(_Frozen):
    """Systems on one dataset (and stratum), ranked by ``rank_by``."""

    dataset: str
    stratum: str  # "all" | "normal" | "abnormal" | "site:<name>"
    rank_by: str
    rows: list[LeaderboardRow]  # sorted by rank
    n_pairs: int = 0  # studies in this stratum


class ExamplePair(_Frozen):
    """A pair behind an error cell, with the evidence sentences (or report excerpts) and the rules
    that read them (the rule engine's, :func:`cxreval.extract.explain.rules_line`; empty for an
    LLM engine and in results written before cxreval 0.3)."""

    pair_id: str
    kind: str  # FP | FN | location | severity | comparison | less-specific | more-specific
    reference: str
    candidate: str
    reference_rules: str = ""
    candidate_rules: str = ""


class SystemSummary(_Frozen):
    """One system's SPEC headline numbers on one dataset, all studies: the same numbers, under the
    same names, as ``cxreval evaluate`` prints (:data:`cxreval.metrics.table.HEADLINE`)."""

    system: str
    dataset: str
    n_pairs: int
    values: dict[str, float | None]


class EntityResult(_Frozen):
    """Per-entity presence / attribute results of one system on one dataset."""

    system: str
    dataset: str
    entity: str
    name: str
    group: str
    tp: int
    fp: int
    fn: int
    precision: float | None
    recall: float | None
    f1: float | None
    location_acc: float | None
    severity_acc: float | None
    comparison_acc: float | None
    examples: list[ExamplePair]
    critical: bool = False
    location_errors: int = 0
    severity_errors: int = 0
    comparison_errors: int = 0


class GroupResult(_Frozen):
    """Per-group (plot group of the ontology) results of one system on one dataset."""

    system: str
    dataset: str
    group: str
    name: str
    support: int
    precision: float | None
    recall: float | None
    f1: float | None
    location_acc: float | None
    severity_acc: float | None
    comparison_acc: float | None


class Correlation(_Frozen):
    """Correlation matrix between per-pair metric values (all systems' pairs pooled)."""

    dataset: str
    method: str  # pearson | kendall
    metrics: list[str]
    matrix: list[list[float | None]]
    n: int = 0  # pairs used


class SiteCell(_Frozen):
    """One system's value of one metric at one site, and its rank among systems there."""

    dataset: str
    site: str
    system: str
    metric: str
    value: float | None
    rank: int | None
    n_pairs: int = 0


class BenchmarkResult(_Frozen):
    """Everything a benchmark run produced, for the HTML page and the tables."""

    name: str
    created: str
    cxreval_version: str
    engine_signature: str
    ontology: str
    metrics: list[MetricInfo]
    primary_metric: str
    datasets: list[str]
    systems: list[str]
    leaderboards: list[Leaderboard]
    groups: list[GroupResult]
    entities: list[EntityResult]
    summaries: list[SystemSummary] = []
    correlations: list[Correlation]
    sites: list[SiteCell]
    notes: list[str] = []
    baselines: list[str] = []  # systems that are built-in baselines
    timings: dict[str, float] = {}  # seconds per stage

    @property
    def has_text(self) -> bool:
        """False for a result made by :meth:`without_text` (it carries :data:`TEXT_LEFT_OUT`)."""
        return TEXT_LEFT_OUT not in self.notes

    def without_text(self) -> BenchmarkResult:
        """This result with no report text, to share it (``--no-text``): the example pairs keep
        their pair id, kind and rule ids, lose their sentences and the cue phrases their rule lines
        quote from the reports, and a note says so. Every number is unchanged."""
        from cxreval.extract.explain import without_cues

        def bare(x: ExamplePair) -> ExamplePair:
            rules = {"reference_rules": without_cues(x.reference_rules), "candidate_rules": without_cues(x.candidate_rules)}
            return x.model_copy(update={"reference": "", "candidate": "", **rules})

        entities = [e.model_copy(update={"examples": [bare(x) for x in e.examples]}) for e in self.entities]
        notes = self.notes if not self.has_text else [*self.notes, TEXT_LEFT_OUT]
        return self.model_copy(update={"entities": entities, "notes": notes})

    def metric(self, name: str) -> MetricInfo:
        """The ``MetricInfo`` called ``name`` (KeyError if absent)."""
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    def leaderboard(self, dataset: str, stratum: str = "all") -> Leaderboard:
        """The leaderboard of ``dataset`` / ``stratum`` (KeyError if absent)."""
        for lb in self.leaderboards:
            if lb.dataset == dataset and lb.stratum == stratum:
                return lb
        raise KeyError(f"{dataset}/{stratum}")
