"""MetricTester: the checks every report metric must pass, for cxreval's metrics and plug-ins.

After torchmetrics' ``MetricTester``: a :class:`MetricCase` says what a metric promises (its
bounds, the value of identical reports, when it gives NaN, the options that change its numbers
and what they put in the signature) and what it is checked against (a reference implementation,
a functional form, judgement tables computed by hand); :class:`MetricTester` runs the checks on
the fixed pairs of :func:`report_pairs`. cxreval runs it over every registered metric
(``tests/test_metric_tester.py``, cases in ``tests/metric_tester.py``, which are worked
examples of every kind of case); a plug-in runs it on its own metric::

    import numpy as np
    from cxreval.testing.metric_tester import MetricCase, MetricTester

    def by_hand(options, references, candidates):  # written independently of the metric
        return np.array([float(r.split() == c.split()) for r, c in zip(references, candidates)])

    def test_my_metric():
        case = MetricCase("exact-words", "exact-words", bounds=(0, 1), perfect=1.0, reference=by_hand)
        MetricTester(case).run()  # every check that applies; AssertionError names the one that fails

``MetricTester(case, {"model_path": folder})`` gives every build of the metric (and the
references) the options it always needs (a checkpoint folder, an LLM endpoint). Each ``check_*`` method asserts one promise, so a
test suite may also run them one by one (``MetricTester.CHECKS``) for separate test ids.

The checks: (a) one finite float per pair, within the bounds, identical reports at ``perfect``,
input order kept, unequal lengths refused; (b) equal to the reference implementation, with the
default options and each scored :class:`Variant`; (c) a pair's value independent of the other
pairs, per-pair statistics that add up over halves, ``compute`` row by row, ``corpus_score``
with and without a bootstrap interval; (d) ``higher_is_better`` a bool that agrees with
``perfect``, a signature that reads back, every option of the factory shown in the signature or
listed in ``unsigned`` with the reason, unknown options refused; (e) the same values after
pickling; (f) the class equal to its functional form; (g) for metrics computed from the
judgement table, the values of tables written by hand (:class:`HandTable`).

The pairs are the package example (20 pairs), ten pairs that cross its references with other
candidates (so references repeat, as they do in a benchmark), and edge cases: identical reports,
reports differing only in case, one-token and empty reports, whitespace, no-break spaces,
ligatures, accents, CJK, emoji, a long repeated report.
"""

from __future__ import annotations

import fnmatch
import inspect
import json
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np

from cxreval.metrics import Metric, get_metric

Options = dict[str, Any]
#: ``(options, references, candidates) -> per-pair values``: a reference implementation.
Reference = Callable[[Options, Sequence[str], Sequence[str]], np.ndarray]
#: ``(options, references, candidates) -> the system value``.
CorpusReference = Callable[[Options, Sequence[str], Sequence[str]], float]
#: ``(metric, reference, candidate) -> the pair's value``: a metric's functional form.
Functional = Callable[[Metric, str, str], float]

# --------------------------------------------------------------------------------------------
# The pairs
# --------------------------------------------------------------------------------------------

_LONG = (
    "Findings: The heart is normal in size. The mediastinum is unremarkable. The lungs are clear "
    "without focal consolidation, pleural effusion or pneumothorax. No acute bony abnormality. "
)

#: Identical or case-only-different reports of at least four words: every metric's best value.
IDENTICAL: list[tuple[str, str]] = [
    ("No acute cardiopulmonary process.", "No acute cardiopulmonary process."),
    ("NO PLEURAL EFFUSION OR PNEUMOTHORAX.", "no pleural effusion or pneumothorax."),
    (_LONG * 3, _LONG * 3),
]

EDGE: list[tuple[str, str]] = [
    (".", "."),  # one token, identical
    ("a", "a"),
    ("", "No pneumothorax."),  # empty reference
    ("No pneumothorax.", ""),  # empty candidate
    ("", ""),
    ("\t \n", "   "),  # whitespace only
    ("\u00a0No\u00a0pneumothorax.\u00a0", "No pneumothorax."),  # no-break spaces
    ("ﬁndings: small left eﬀusion.", "Findings: small left effusion."),  # ligatures (NFKC)
    ("Épanchement pleural gauche, modéré.", "Épanchement pleural gauche, modéré."),  # accents, identical
    ("Pleural effusion — small, left-sided (≈ 2 cm).", "Small left pleural effusion ≈ 2 cm."),
    ("肺野清晰。心影不大。", "肺野清晰。心影不大。"),  # CJK, identical
    ("No effusion 🙂. Heart normal ✓", "No effusion. Heart normal 🙂"),  # emoji, symbols
    ("the the the the the the", "the the"),  # clipping of repeated n-grams
    (_LONG * 3, _LONG + "Small right pleural effusion."),  # long vs short
]


def example_pairs() -> list[tuple[str, str]]:
    """The 20 (reference, candidate) pairs of the package example, in file order."""
    from cxreval.io import read_pairs

    with resources.as_file(resources.files("cxreval.examples").joinpath("example_pairs.csv")) as path:
        return [(p.reference, p.candidate) for p in read_pairs(path)]


def report_pairs() -> tuple[list[str], list[str]]:
    """The fixed pairs every metric is run on (references, candidates): 47 pairs."""
    ex = example_pairs()
    crossed = [(ex[i][0], ex[(i + 7) % len(ex)][1]) for i in range(0, len(ex), 2)]
    pairs = ex + crossed + IDENTICAL + EDGE
    return [r for r, _ in pairs], [c for _, c in pairs]


# --------------------------------------------------------------------------------------------
# What a metric promises
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """Non-default options for the factory, and what they must put in the signature."""

    options: Callable[[], Options]
    shows: tuple[str, ...]  # whole ``key:value`` fields; ``key:prefix@`` matches a versioned value
    scored: bool = True  # False: built for its signature only (e.g. an LLM engine with no server)


@dataclass(frozen=True)
class HandTable:
    """A judgement table written by hand and the values a table metric must give on it.

    ``table`` builds the :class:`~cxreval.judge.table.JudgementTable` (rows written out in the
    test); ``pair_values`` are each pair's values in ``table.pair_ids`` order (NaN where the
    metric is undefined) and ``corpus`` the value of the whole table, both worked out by hand
    (write the arithmetic beside them); ``options`` are the factory's (``ontology=...``).
    """

    table: Callable[[], Any]
    pair_values: tuple[float, ...]
    corpus: float
    options: Callable[[], Options] = dict
    note: str = ""


@dataclass(frozen=True)
class MetricCase:
    """What one metric promises, and what it is checked against (see the module doc)."""

    name: str  # the registry's name
    signature_metric: str  # ``metric:`` field of the signature
    bounds: tuple[float, float]
    perfect: float  # the value for :data:`IDENTICAL` pairs
    variants: tuple[Variant, ...] = ()
    unsigned: dict[str, str] = field(default_factory=dict)  # option -> why it is not in the signature
    nan: str | None = None  # when the metric documents NaN; None: never
    integer: bool = False
    reference: Reference | None = None  # options, refs, cands -> per-pair values
    corpus_reference: CorpusReference | None = None
    reference_elsewhere: tuple[str, ...] = ()  # tests that already check the values exactly
    functional: Functional | None = None  # a per-pair function the class must agree with
    tables: tuple[HandTable, ...] = ()  # judgement tables computed by hand (table metrics)
    atol: float = 0.0  # batch composition may move values this much (padding in an encoder)
    slack: float = 0.0  # rounding past the bounds that the metric's own reference also shows
    extra: str = ""  # what to install when the metric is unavailable
    cased: str = ""  # why reports that differ only in case are not perfect (a cased encoder); "" : they are


# --------------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------------


def shows(signature: str, part: str) -> bool:
    """``part`` is a whole ``key:value`` field of the signature: ``key:prefix@`` matches a
    versioned value, and a part with ``*`` is a shell-style pattern (``engine:rules@*.u1a2b``)."""
    fields = signature.split("|")
    if "*" in part:
        return any(fnmatch.fnmatchcase(f, part) for f in fields)
    return part in fields or (part.endswith("@") and any(f.startswith(part) for f in fields))


def build_metric(name: str, cache: dict[tuple[str, str], Metric] | None = None, **defaults: Any) -> Callable[..., Metric]:
    """``options -> get_metric(name, **defaults, **options)``, built once per distinct options
    (``cache`` may be shared between testers; ``defaults`` are options every build gets, such
    as a checkpoint folder or an LLM endpoint)."""
    built: dict[tuple[str, str], Metric] = {} if cache is None else cache

    def build(**options: Any) -> Metric:
        merged = {**defaults, **options}
        key = (name, repr(sorted(merged.items())))
        if key not in built:
            built[key] = get_metric(name, **merged)
        return built[key]

    return build


_WHOLE: dict[int, tuple[Metric, np.ndarray]] = {}  # the metric is kept so that its id stays its own


class MetricTester:
    """Runs every check on one metric; each ``check_*`` method asserts one promise."""

    #: The checks :meth:`run` runs, in order (``check_<name>``); those that need something the
    #: case does not give (a reference, a functional form, hand tables) are left out there.
    CHECKS: tuple[str, ...] = (
        "values",
        "order",
        "lengths_refused",
        "reference",
        "halves",
        "signature",
        "options",
        "pickle",
        "functional",
        "tables",
    )

    def __init__(
        self,
        case: MetricCase,
        options: Options | None = None,
        *,
        cache: dict[tuple[str, str], Metric] | None = None,
        build: Callable[..., Metric] | None = None,
    ) -> None:
        """``options``: what every build of the metric gets (a checkpoint folder, an LLM endpoint),
        given to the references too; ``cache``: built metrics shared between testers;
        ``build``: ``options -> metric`` in place of :func:`build_metric`."""
        self.case = case
        self.options: Options = dict(options or {})
        self.build = build or build_metric(case.name, cache, **self.options)  # options -> metric (cached)
        self.refs, self.cands = report_pairs()

    @property
    def metric(self) -> Metric:
        return self.build()

    def applies(self, check: str) -> bool:
        """Whether the case gives what ``check`` needs."""
        c = self.case
        return {"reference": c.reference is not None, "functional": c.functional is not None, "tables": bool(c.tables)}.get(
            check, True
        )

    def run(self) -> list[str]:
        """Run every check that applies (:attr:`CHECKS`); the names of those run."""
        done = []
        for check in self.CHECKS:
            if self.applies(check):
                if check == "reference":
                    self.check_references()
                else:
                    getattr(self, f"check_{check}")()
                done.append(check)
        return done

    def scores(
        self, metric: Metric | None = None, refs: Sequence[str] | None = None, cands: Sequence[str] | None = None
    ) -> np.ndarray:
        m = metric if metric is not None else self.metric
        return m.score_pairs(self.refs if refs is None else refs, self.cands if cands is None else cands)

    def whole(self) -> np.ndarray:
        """The default metric's values on all the pairs, computed once per metric object."""
        m = self.metric
        if id(m) not in _WHOLE:
            _WHOLE[id(m)] = (m, self.scores(m))
        return _WHOLE[id(m)][1]

    def close(self, a: np.ndarray, b: np.ndarray, atol: float | None = None) -> bool:
        tol = self.case.atol if atol is None else atol
        return bool(np.allclose(a, b, rtol=0, atol=tol, equal_nan=True))

    # (a) values: one finite float per pair, in input order --------------------------------
    def check_values(self) -> None:
        c, v = self.case, self.scores()  # a fresh call: its type is checked
        assert isinstance(v, np.ndarray) and v.dtype.kind == "f", f"{c.name}: {type(v)} {getattr(v, 'dtype', '')}"
        assert v.shape == (len(self.refs),), f"{c.name}: shape {v.shape} for {len(self.refs)} pairs"
        nan = np.isnan(v)
        assert c.nan is not None or not nan.any(), (
            f"{c.name}: NaN for pairs {np.flatnonzero(nan).tolist()}, which it never documents"
        )
        assert not np.isinf(v).any(), f"{c.name}: infinite values at {np.flatnonzero(np.isinf(v)).tolist()}"
        lo, hi = c.bounds[0] - c.slack, c.bounds[1] + c.slack
        ok = v[~nan]
        assert ((ok >= lo) & (ok <= hi)).all(), f"{c.name}: values outside [{lo}, {hi}]: {ok[(ok < lo) | (ok > hi)]}"
        if c.integer:
            assert np.array_equal(ok, np.round(ok)), f"{c.name}: non-integer counts {ok}"
        identical = [(r, x) for r, x in IDENTICAL if not (c.cased and r != x)]
        same = self.scores(refs=[r for r, _ in identical], cands=[x for _, x in identical])
        if c.nan is not None:  # undefined for identical reports that state nothing it counts
            same = np.where(np.isnan(same), c.perfect, same)
        assert self.close(same, np.full(len(identical), c.perfect), atol=max(c.atol, 1e-12)), (
            f"{c.name}: identical reports score {same}, not {c.perfect}"
        )
        empty = self.metric.score_pairs([], [])
        assert isinstance(empty, np.ndarray) and empty.shape == (0,)

    def check_order(self) -> None:
        v = self.whole()
        perm = np.random.default_rng(12).permutation(len(self.refs))
        shuffled = self.scores(refs=tuple(self.refs[i] for i in perm), cands=tuple(self.cands[i] for i in perm))
        assert self.close(shuffled, v[perm]), f"{self.case.name}: shuffling the pairs does not permute the values"
        assert self.close(self.scores(), v), f"{self.case.name}: a second call gives other values"

    def check_lengths_refused(self) -> None:
        try:
            self.metric.score_pairs(self.refs[:3], self.cands[:2])
        except ValueError as exc:
            assert "3" in str(exc) and "2" in str(exc), exc
        else:
            raise AssertionError(f"{self.case.name}: 3 references and 2 candidates were accepted")

    # (b) a reference implementation -----------------------------------------------------
    def check_reference(self, options: Options) -> None:
        c = self.case
        assert c.reference is not None
        ours = self.build(**options).score_pairs(self.refs, self.cands) if options else self.whole()
        theirs = np.asarray(c.reference({**self.options, **options}, self.refs, self.cands), dtype=float)
        bad = ~np.isclose(ours, theirs, rtol=0, atol=max(c.atol, 1e-12), equal_nan=True)
        assert not bad.any(), (
            f"{c.name} {options}: differs from the reference at pairs "
            f"{np.flatnonzero(bad).tolist()}: {ours[bad]} vs {theirs[bad]}"
        )

    def check_references(self) -> None:
        """:meth:`check_reference` with the default options and each scored variant's."""
        self.check_reference({})
        for variant in self.case.variants:
            if variant.scored:
                self.check_reference(variant.options())

    # (c) sufficient statistics and pair independence --------------------------------------
    def check_halves(self) -> None:
        m, n = self.metric, len(self.refs) // 2
        whole = self.whole()
        parts = np.concatenate(
            [self.scores(refs=self.refs[:n], cands=self.cands[:n]), self.scores(refs=self.refs[n:], cands=self.cands[n:])]
        )
        assert self.close(parts, whole), f"{self.case.name}: a pair's value depends on the other pairs in the call"
        stats = np.asarray(m.pair_stats(self.refs, self.cands), dtype=float)
        assert stats.ndim == 2 and len(stats) == len(self.refs) and np.isfinite(stats).all()
        first = np.asarray(m.pair_stats(self.refs[:n], self.cands[:n]))
        second = np.asarray(m.pair_stats(self.refs[n:], self.cands[n:]))
        assert self.close(np.concatenate([first, second]), stats), (  # exact unless the case has an atol
            f"{self.case.name}: a pair's statistics depend on the other pairs in the call"
        )
        summed = stats.sum(axis=0)  # in the order corpus_score sums them
        halves = stats[:n].sum(axis=0) + stats[n:].sum(axis=0)  # float values: equal up to summation order
        assert np.allclose(halves, summed, rtol=1e-12, atol=0), f"{self.case.name}: statistics do not add up over halves"
        corpus = m.compute
        whole_corpus = float(np.asarray(corpus(summed[None, :])).reshape(-1)[0])
        score = m.corpus_score(self.refs, self.cands)
        assert score.value == whole_corpus or (np.isnan(score.value) and np.isnan(whole_corpus))
        assert score.low is None and str(score.signature) == str(m.signature)
        boot = m.corpus_score(self.refs, self.cands, n_bootstrap=50, seed=3)
        assert boot.low is not None and boot.high is not None and boot.low <= boot.high, f"{self.case.name}: interval {boot}"
        assert all(shows(str(boot.signature), f) for f in ("resamples:50", "seed:3", "ci:percentile"))
        # several rows at once (the bootstrap's replicates), as JSON floats (the bench cache)
        rows = np.stack([first.sum(axis=0), second.sum(axis=0), summed])  # JSON keeps floats exactly
        rows = np.asarray(json.loads(json.dumps(rows.tolist())))
        assert np.array_equal(np.asarray(corpus(rows)), [corpus(r.reshape(1, -1))[0] for r in rows], equal_nan=True), (
            f"{self.case.name}: rows interact"
        )
        assert self.close(np.asarray(corpus(rows))[2:], np.array([whole_corpus]), atol=0)
        # per-pair rows give the per-pair values (bench correlates those)
        assert self.close(np.asarray(corpus(stats), dtype=float), whole, atol=0)
        if self.case.corpus_reference is not None:
            want = self.case.corpus_reference(self.options, self.refs, self.cands)
            assert abs(whole_corpus - want) <= 1e-12 or (np.isnan(whole_corpus) and np.isnan(want)), (
                f"{self.case.name}: corpus {whole_corpus} vs reference {want}"
            )
            half = self.case.corpus_reference(self.options, self.refs[:n], self.cands[:n])
            got = float(np.asarray(corpus(first.sum(axis=0)[None, :])).reshape(-1)[0])
            assert abs(got - half) <= 1e-12 or (np.isnan(got) and np.isnan(half)), (
                f"{self.case.name}: first half's corpus {got} vs reference {half}"
            )

    # (d) direction and signature ----------------------------------------------------------
    def check_signature(self) -> None:
        from cxreval.scores.signature import Signature

        c, m = self.case, self.metric
        assert isinstance(m, Metric)
        assert type(m.higher_is_better) is bool, f"{c.name}: higher_is_better is {m.higher_is_better!r}"
        assert c.perfect == (c.bounds[1] if m.higher_is_better else c.bounds[0])
        sig = m.signature
        assert sig.metric == c.signature_metric, f"{c.name}: signature names metric {sig.metric!r}"
        assert f"metric:{c.signature_metric}" in str(sig)
        assert Signature.parse(str(sig)) == sig, f"{c.name}: signature does not read back: {sig}"
        assert str(self.build().signature) == str(sig), f"{c.name}: two default builds differ in signature"

    def check_options(self) -> None:
        """Every option of the factory is shown in the signature, or listed as not changing values."""
        c, default = self.case, str(self.metric.signature)
        given: set[str] = set()
        for variant in c.variants:
            options = variant.options()
            given |= options.keys()
            sig = str(self.build(**options).signature)
            for part in variant.shows:
                assert shows(sig, part), f"{c.name} {sorted(options)}: {part!r} not in {sig}"
                assert not shows(default, part), f"{c.name}: {part!r} is already in the default signature {default}"
        missing = self.factory_options() - given - c.unsigned.keys()
        assert not missing, f"{c.name}: options {sorted(missing)} have no Variant (signature) nor an unsigned reason"
        try:
            self.build(no_such_option=1)
        except TypeError:
            pass
        else:
            raise AssertionError(f"{c.name}: an unknown option is accepted and ignored")

    def factory_options(self) -> set[str]:
        """The named options of the registered factory; where it passes ``**options`` on (or is
        not registered), those of the metric's class as well."""
        from cxreval.metrics import UnknownMetric, metric_spec

        def named(fn: Any) -> tuple[set[str], bool]:
            params = inspect.signature(fn).parameters.values()
            rest = (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
            return (
                {p.name for p in params if p.name != "self" and p.kind not in rest},
                any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params),
            )

        try:
            options, passes_on = named(metric_spec(self.case.name).factory)
        except UnknownMetric:
            options, passes_on = set(), True
        if passes_on:
            options |= named(type(self.metric).__init__)[0]
        return options

    # (e) pickling -------------------------------------------------------------------------
    def check_pickle(self) -> None:
        m = self.metric
        back = pickle.loads(pickle.dumps(m))
        assert str(back.signature) == str(m.signature) and back.higher_is_better is m.higher_is_better
        assert self.close(self.scores(back), self.whole()), f"{self.case.name}: values change after pickling"
        assert np.array_equal(back.pair_stats(self.refs, self.cands), m.pair_stats(self.refs, self.cands))

    # (f) class and functional form --------------------------------------------------------
    def check_functional(self) -> None:
        c, m = self.case, self.metric
        assert c.functional is not None
        want = np.array([c.functional(m, r, x) for r, x in zip(self.refs, self.cands)])
        got = self.whole()
        bad = ~np.isclose(got, want, rtol=0, atol=max(c.atol, 1e-15), equal_nan=True)
        assert not bad.any(), f"{c.name}: class and function differ at pairs {np.flatnonzero(bad).tolist()}"

    # (g) judgement tables computed by hand ------------------------------------------------
    def check_tables(self) -> None:
        """Each :class:`HandTable`: the metric's value of every pair and of the whole table, and
        the same through its statistics (``table_stats`` summed, then ``compute``)."""
        c = self.case
        assert c.tables, f"{c.name}: no hand-computed table"
        for k, hand in enumerate(c.tables):
            m: Any = self.build(**hand.options())  # a table metric: value_of_table, table_pair_values
            table = hand.table()
            where = f"{c.name} table {k}{f' ({hand.note})' if hand.note else ''}"
            want = np.asarray(hand.pair_values, dtype=float)
            got = np.asarray(m.table_pair_values(table), dtype=float)
            assert got.shape == want.shape, f"{where}: {got.shape} pair values for {want.shape} pairs"
            bad = ~np.isclose(got, want, rtol=0, atol=1e-12, equal_nan=True)
            assert not bad.any(), f"{where}: pairs {np.flatnonzero(bad).tolist()}: {got[bad]} vs by hand {want[bad]}"
            value = float(m.value_of_table(table))
            assert abs(value - hand.corpus) <= 1e-12 or (np.isnan(value) and np.isnan(hand.corpus)), (
                f"{where}: the table's value {value} vs by hand {hand.corpus}"
            )
            if hasattr(m, "table_stats"):
                from cxreval.scores.statistics import TableStatistics

                stats = np.asarray(m.table_stats(TableStatistics(table, m.ontology)), dtype=float)
                assert len(stats) == len(want) and np.isfinite(stats).all(), f"{where}: statistics {stats.shape}"
                summed = float(np.asarray(m.compute(stats.sum(axis=0, keepdims=True)), dtype=float)[0])
                assert summed == value or (np.isnan(summed) and np.isnan(value)), (
                    f"{where}: compute of the summed statistics {summed} vs value_of_table {value}"
                )


__all__ = [
    "EDGE",
    "IDENTICAL",
    "CorpusReference",
    "Functional",
    "HandTable",
    "MetricCase",
    "MetricTester",
    "Options",
    "Reference",
    "Variant",
    "build_metric",
    "example_pairs",
    "report_pairs",
    "shows",
]
