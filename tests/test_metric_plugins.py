"""Third-party metrics through the ``cxreval.metrics`` entry-point group (issue 30): real
distributions written into a folder on ``sys.path`` (a package and its ``*.dist-info`` with
``METADATA`` and ``entry_points.txt``), found by ``importlib.metadata`` as an installed plug-in
would be, then run through the MetricTester that ships in ``cxreval.testing``."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from cxreval.metrics import available_metrics, base, get_metric, metric_spec
from cxreval.metrics.base import MetricPluginWarning
from cxreval.testing.metric_tester import MetricCase, MetricTester, Options, Variant

PLUGIN = '''
"""A plug-in metric: the Jaccard index of the two reports' word sets."""

import re

import numpy as np

from cxreval.metrics import PairMeanMetric, register_metric
from cxreval.metrics.base import check_lengths
from cxreval.scores.signature import Signature


class TokenJaccard(PairMeanMetric):
    name = "demo-token-jaccard"
    label = "Word Jaccard"
    higher_is_better = True

    def __init__(self, lowercase: bool = True) -> None:
        self.lowercase = lowercase

    @property
    def signature(self):
        return Signature(metric=self.name, ontology="none", engine="none",
                         options={"case": "lower" if self.lowercase else "mixed"})

    def words(self, text):
        return set(re.findall(r"\\w+", text.lower() if self.lowercase else text))

    def pair_values(self, references, candidates):
        check_lengths(references, candidates)
        out = []
        for r, c in zip(references, candidates):
            a, b = self.words(r), self.words(c)
            out.append(len(a & b) / len(a | b) if a | b else float("nan"))
        return np.array(out, dtype=float)


register_metric("demo-token-jaccard", higher_is_better=True)(TokenJaccard)
'''


def _distribution(site: Path, name: str, entry_points: str, modules: dict[str, str]) -> None:
    """A distribution as pip installs one: its modules, and ``<name>-0.1.dist-info``."""
    for module, source in modules.items():
        path = site / Path(*module.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on ``sys.path`` for distributions, and a registry that loads its plug-ins afresh
    (restored afterwards, with the plug-in modules dropped from ``sys.modules``)."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    available_metrics()  # the built-ins are in before the registry is copied
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_PLUGINS_LOADED", False)
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for module in set(sys.modules) - before:
        if module.startswith("cxreval_demo"):
            del sys.modules[module]


def _jaccard_by_hand(options: Options, refs: Sequence[str], cands: Sequence[str]) -> np.ndarray:
    def words(text: str) -> set[str]:
        return set(re.findall(r"\w+", text if options.get("lowercase") is False else text.lower()))

    return np.array(
        [len(words(r) & words(c)) / len(words(r) | words(c)) if words(r) | words(c) else np.nan for r, c in zip(refs, cands)]
    )


JACCARD = MetricCase(
    "demo-token-jaccard",
    "demo-token-jaccard",
    bounds=(0, 1),
    perfect=1.0,
    variants=(Variant(lambda: {"lowercase": False}, ("case:mixed",)),),
    nan="neither report has a word",
    reference=_jaccard_by_hand,
)


def test_a_plugin_distribution_registers_its_metric_and_passes_the_tester(site: Path) -> None:
    _distribution(
        site, "cxreval-demo-jaccard", "[cxreval.metrics]\njaccard = cxreval_demo_jaccard\n", {"cxreval_demo_jaccard": PLUGIN}
    )
    assert "cxreval_demo_jaccard" not in sys.modules
    names = available_metrics()
    assert "demo-token-jaccard" in names and "bleu2" in names and "spec-errors" in names
    assert metric_spec("demo-token-jaccard").higher_is_better is True
    assert get_metric("demo-token-jaccard").score_pairs(["Small left effusion."], ["Left effusion."]).tolist() == [2 / 3]
    done = MetricTester(JACCARD).run()
    assert done == ["values", "order", "lengths_refused", "reference", "halves", "signature", "options", "pickle"]


def test_a_function_entry_point_is_called(site: Path) -> None:
    _distribution(
        site,
        "cxreval-demo-fn",
        "[cxreval.metrics]\nlength = cxreval_demo_fn:register\n",
        {
            "cxreval_demo_fn": """
                      import numpy as np
                      from cxreval.metrics import register_metric
                      from cxreval.scores.signature import Signature

                      class Length:
                          name = "demo-length-diff"
                          higher_is_better = False
                          signature = Signature(metric="demo-length-diff", ontology="none", engine="none")

                          def score_pairs(self, references, candidates):
                              return np.array([abs(len(r) - len(c)) for r, c in zip(references, candidates)], float)

                      def register():
                          register_metric("demo-length-diff", higher_is_better=False)(lambda: Length())
                  """
        },
    )
    assert "demo-length-diff" in available_metrics()
    assert get_metric("demo-length-diff").score_pairs(["abc"], ["a"]).tolist() == [2.0]


def test_a_broken_plugin_is_named_and_the_registry_still_works(site: Path) -> None:
    _distribution(
        site, "cxreval-demo-jaccard", "[cxreval.metrics]\njaccard = cxreval_demo_jaccard\n", {"cxreval_demo_jaccard": PLUGIN}
    )
    _distribution(
        site,
        "cxreval-demo-broken",
        "[cxreval.metrics]\nbroken = cxreval_demo_broken.metrics\n",
        {
            "cxreval_demo_broken.__init__": "",
            "cxreval_demo_broken.metrics": """
                      from cxreval.metrics import register_metric
                      register_metric("demo-half-registered")(lambda: None)
                      import a_module_nobody_installed
                  """,
        },
    )
    _distribution(
        site,
        "cxreval-demo-missing",
        "[cxreval.metrics]\nmissing = cxreval_demo_missing:register\n",
        {"cxreval_demo_missing": "X = 1\n"},
    )
    with pytest.warns(MetricPluginWarning) as caught:
        names = available_metrics()
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2, messages
    assert re.search(
        r"metric plug-in 'broken' \(cxreval_demo_broken\.metrics, from cxreval-demo-broken 0\.1\) "
        r"failed to load and is skipped: ModuleNotFoundError: .*a_module_nobody_installed",
        messages[0],
    )
    assert re.search(
        r"metric plug-in 'missing' \(cxreval_demo_missing:register, from cxreval-demo-missing 0\.1\) "
        r"failed to load .*AttributeError",
        messages[1],
    )
    # the other plug-in and every built-in are served; nothing of the broken one stays registered
    assert "demo-token-jaccard" in names and "bleu2" in names and "demo-half-registered" not in names
    assert get_metric("bleu2").score_pairs(["a b c"], ["a b c"]).tolist() == [1.0]
    available_metrics()  # loaded once: no second warning (pytest.warns would not see it, -W error would)


def test_a_plugin_cannot_replace_a_registered_metric(site: Path) -> None:
    builtin = base._REGISTRY["bleu2"]  # not metric_spec: that would load the (not yet written) plug-ins
    _distribution(
        site,
        "cxreval-demo-clash",
        "[cxreval.metrics]\nclash = cxreval_demo_clash\n",
        {
            "cxreval_demo_clash": """
                      from cxreval.metrics import register_metric
                      register_metric("bleu2")(lambda: None)
                      register_metric("demo-own")(lambda: None)
                  """
        },
    )
    with pytest.warns(MetricPluginWarning, match=r"'clash' .* registers bleu2, already registered: the earlier"):
        names = available_metrics()
    assert metric_spec("bleu2") is builtin and "demo-own" in names


def test_no_plugin_installed_changes_nothing(site: Path) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert available_metrics() == sorted(base._REGISTRY)
    assert base._PLUGINS_LOADED is True
