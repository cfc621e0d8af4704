"""The HTML report: content, escaping, sortable tables, signatures, and no network references."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from cxreval.bench.models import BenchmarkResult, ExamplePair
from cxreval.page import charts, render_html, write_html

from .report_support import make_result

EVIL = '<script>alert("pwned")</script>'


class _Doc(HTMLParser):
    """Collects elements (tag, attrs), script bodies and the text of the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.text: list[str] = []
        self._in_script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            attrs, body = self.scripts[-1]
            self.scripts[-1] = (attrs, body + data)
        else:
            self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.elements if t == tag and all(a.get(k) == v for k, v in attrs.items())]

    def with_class(self, tag: str, cls: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.elements if t == tag and cls in (a.get("class") or "").split()]


def _parse(html: str) -> _Doc:
    doc = _Doc()
    doc.feed(html)
    doc.close()
    return doc


@pytest.fixture(scope="module")
def result() -> BenchmarkResult:
    return make_result(n_systems=5, datasets=["MIMIC-CXR", "IU X-ray"], n_sites=4)


@pytest.fixture(scope="module")
def page(result: BenchmarkResult) -> str:
    return render_html(result)


def _evil_result() -> BenchmarkResult:
    base = make_result(n_systems=3, datasets=["MIMIC-CXR"], n_sites=2)
    data = base.model_dump()
    renamed = {base.systems[0]: EVIL}

    def fix(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: fix(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [fix(v) for v in obj]
        if isinstance(obj, str):
            return renamed.get(obj, obj)
        return obj

    data = fix(data)
    data["name"] = f"Bench {EVIL} & co"
    data["notes"] = [f"note with {EVIL}", "<b>not bold</b>"]
    data["metrics"][0]["label"] = f"F1 {EVIL}"
    data["groups"][0]["name"] = f"group {EVIL}"
    for e in data["entities"]:
        if e["system"] == EVIL:
            e["name"] = f"<img src=x onerror=alert(1)> {e['name']}"
            e["examples"] = [
                {
                    "pair_id": "p</script>1",
                    "kind": "FN",
                    "reference": f"Effusion {EVIL}.",
                    "candidate": "</script><script>alert(2)</script>",
                }
            ]
            break
    return BenchmarkResult.model_validate(data)


def test_text_from_the_result_is_escaped() -> None:
    res = _evil_result()
    html = render_html(res)
    # nothing from the data becomes markup: no injected tags or attributes
    assert EVIL not in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<b>not bold</b>" not in html and "&lt;b&gt;not bold&lt;/b&gt;" in html
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in html
    doc = _parse(html)
    assert not [a for _, a in doc.elements if any(k.startswith("on") for k in a)]
    assert not doc.find("img")
    # exactly our two scripts: the JSON data block and the page's code
    assert [a.get("type") for a, _ in doc.scripts] == ["application/json", None]
    assert html.count("<script") == 2 and html.count("</script>") == 2
    # the embedded JSON round-trips the raw strings, so the drill-down shows them as text
    data = json.loads(doc.scripts[0][1])
    assert EVIL in data["datasets"][0]["systems"]
    assert f"Effusion {EVIL}." in data["texts"]
    assert "</script><script>alert(2)</script>" in data["texts"]
    # the visible text (as a browser shows it) contains the names literally
    text = "".join(doc.text)
    assert EVIL in text and "<b>not bold</b>" in text
    # the drill-down code writes report text with textContent / text nodes, never innerHTML
    code = doc.scripts[1][1]
    assert "innerHTML" not in code and "insertAdjacentHTML" not in code and "document.write" not in code


def test_every_system_metric_group_and_dataset_is_on_the_page(result: BenchmarkResult, page: str) -> None:
    doc = _parse(page)
    text = "".join(doc.text)
    tabs = re.findall(r'<button type="button" role="tab"[^>]*>([^<]*)</button>', page)
    assert tabs[: len(result.datasets)] == result.datasets
    for ds in result.datasets:
        assert any(ds == (a.get("aria-label") or "").rsplit(" on ", 1)[-1] for a in doc.find("svg"))
    for s in result.systems:
        assert len([a for a in doc.find("tr") if a.get("data-system") == s]) >= len(
            [lb for lb in result.leaderboards if any(r.system == s for r in lb.rows)]
        )
        assert doc.find("g", **{"class": "series", "data-system": s})  # on the spider charts
        assert doc.find("input", type="checkbox", **{"data-system": s})  # legend toggle
    for m in result.metrics:
        assert m.label in text
    for g in {g.name for g in result.groups}:
        assert g in text or g.split()[0] in text  # axis labels wrap over lines
        assert any(t == g for t in re.findall(r"<title>([^<]*)</title>", page))
    for e in {e.name for e in result.entities}:
        assert f">{e}" in page  # entity matrix rows
    # every leaderboard table has one row per system on that board
    boards = re.findall(r'<div class="board" id="board-([^"]+)" data-stratum="([^"]+)"', page)
    assert len(boards) == len(result.leaderboards)
    for lb in result.leaderboards:
        assert lb.stratum in {s for _, s in boards}


def test_leaderboard_rows_follow_rank_and_show_intervals(result: BenchmarkResult, page: str) -> None:
    lb = result.leaderboard(result.datasets[0], "all")
    block = page.split('data-stratum="all"', 1)[1].split("</table>", 1)[0]
    order = re.findall(r'<tr data-system="([^"]+)">', block)
    assert order == [r.system for r in sorted(lb.rows, key=lambda r: r.rank)]
    top = sorted(lb.rows, key=lambda r: r.rank)[0]
    iv = top.metrics[result.primary_metric]
    assert f"{iv.value:.3f}" in block and f"{iv.low:.3f} \u2013 {iv.high:.3f}" in block
    assert f"{top.rank_low}\u2013{top.rank_high}" in block or top.rank_low == top.rank_high


def test_tables_are_sortable_with_numeric_sort_keys(page: str) -> None:
    doc = _parse(page)
    tables = doc.with_class("table", "sortable")
    assert len(tables) >= 3
    headers = [a for t, a in doc.elements if t == "th" and a.get("data-kind")]
    assert headers and all(a["data-kind"] in ("num", "text") for a in headers)
    assert all(a.get("data-first") in ("asc", "desc") for a in headers)
    assert all(a.get("aria-sort") == "none" for a in headers)
    # lower-is-better metrics sort ascending on the first click
    firsts = re.findall(r'<th scope="col" data-kind="num" data-first="(\w+)"[^>]*>([^<]+)<', page)
    err = [f for f, label in firsts if label.startswith("Errors per report")]
    f1 = [f for f, label in firsts if label.startswith("SPEC presence macro F1")]
    assert err and set(err) == {"asc"} and f1 and set(f1) == {"desc"}
    # every numeric cell carries a parseable sort key (empty for n/a)
    keys = [a["data-v"] for t, a in doc.elements if t == "td" and "data-v" in a]
    assert keys
    for k in keys:
        if k and not re.match(r"^[a-z<]", k):
            float(k)
    assert "sortBy" in doc.scripts[1][1]


def test_undefined_values_are_na_not_zero(result: BenchmarkResult, page: str) -> None:
    # chexbert_f1 is None for the last system on the 'normal' boards of the fixture
    lb = result.leaderboard(result.datasets[0], "normal")
    row = next(r for r in lb.rows if r.metrics["chexbert_f1"].value is None)
    block = page.split(f'id="board-{_board_id(page, result.datasets[0], "normal")}"', 1)[1].split("</table>", 1)[0]
    tr = block.split(f'<tr data-system="{row.system}">', 1)[1].split("</tr>", 1)[0]
    assert '<td data-v="" class="na">n/a</td>' in tr


def _board_id(page: str, dataset: str, stratum: str) -> str:
    ids = re.findall(r'<div class="board" id="board-([^"]+)" data-stratum="' + re.escape(stratum) + '"', page)
    slug = re.sub(r"[^a-z0-9]+", "-", dataset.lower()).strip("-")
    return next(i for i in ids if i.startswith(slug))


def test_signatures_and_provenance_are_shown(result: BenchmarkResult, page: str) -> None:
    for m in result.metrics:
        assert f'<code class="sig">{m.signature}</code>' in page
        assert m.signature in page.split('id="signatures"', 1)[1]
    assert result.engine_signature in page and result.ontology in page
    assert result.cxreval_version in page and result.created in page
    # the header of each metric column carries its signature as a tooltip
    assert f'title="{result.metrics[0].signature}  (higher is better)"' in page


def test_page_references_no_network_resource(page: str) -> None:
    assert "http://" not in page and "https://" not in page
    assert "//" not in re.sub(r"<script>.*?</script>", "", page, flags=re.S).replace("<!--", "")
    doc = _parse(page)
    for tag, attrs in doc.elements:
        assert "src" not in attrs, (tag, attrs)
        if tag == "link":
            assert attrs.get("href") == "data:,", attrs
        assert tag not in ("img", "iframe", "object", "embed", "video", "audio", "base")
    assert "@import" not in page and "url(" not in page
    csp = doc.find("meta", **{"http-equiv": "Content-Security-Policy"})
    assert csp and "default-src 'none'" in (csp[0]["content"] or "")
    code = doc.scripts[1][1]
    for api in ("fetch(", "XMLHttpRequest", "WebSocket", "import(", "sendBeacon", "EventSource"):
        assert api not in code


def test_spider_charts_default_to_top_k_and_skip_undefined_points(result: BenchmarkResult) -> None:
    html = render_html(result, top_k=2)
    doc = _parse(html)
    radars = doc.with_class("svg", "radar")
    assert len(radars) == 4 * len(result.datasets)  # presence + 3 attributes per dataset
    series = doc.find("g", **{"class": "series"})
    shown = [a for a in series if "display:none" not in (a.get("style") or "")]
    assert len(shown) == 2 * 4 * len(result.datasets)
    checked = [a for a in doc.find("input", type="checkbox") if "checked" in a]
    assert len(checked) == 2 * len(result.datasets)


def test_radar_and_heatmap_svg() -> None:
    chart = charts.RadarChart(
        axes=["a", "b", "c", "<d>"],
        series=[
            charts.RadarSeries("full", "#123456", [0.5, 0.5, 0.5, 0.5]),
            charts.RadarSeries("gap & co", "#654321", [0.5, None, 0.5, 0.5], visible=False),
        ],
    )
    svg = str(charts.radar_svg(chart))
    assert svg.count('<polygon class="poly"') == 1  # only the complete series is a polygon
    assert svg.count("<circle") == 4 + 3  # no point for the undefined value
    path = re.search(r'<path class="line" d="([^"]+)"', svg)
    assert path and path.group(1).count("M") == 2  # c-d and d-a: segments skip the gap
    assert "&lt;d&gt;" in svg and "<d>" not in svg and "gap &amp; co" in svg
    assert 'style="display:none"' in svg
    hm = charts.heatmap_svg(
        charts.Heatmap(
            rows=["r1", "r2"], cols=["c1", "c2", "c3"], values=[[0.1, None, 1.0], [0.5, 0.2, 0.0]], color=charts.sequential_color
        )
    )
    text = str(hm)
    assert text.count('<g class="cell">') == 6
    assert ">n/a</text>" in text and ">0.10</text>" in text
    assert charts.sequential_color(None) == charts.NA_FILL
    assert charts.diverging_color(0.0) == "#f7f7f7"
    assert charts.text_color(charts.sequential_color(1.0)) == "#fff"
    assert len({charts.system_color(i) for i in range(30)}) == 30


def test_write_html_is_deterministic_and_round_trips_json(tmp_path: Path, result: BenchmarkResult, page: str) -> None:
    out = write_html(result, tmp_path / "deep" / "report.html")
    assert out == tmp_path / "deep" / "report.html" and out.read_text(encoding="utf-8") == page
    again = BenchmarkResult.model_validate_json(result.model_dump_json())
    assert render_html(again) == page


def test_minimal_result_without_optional_sections_renders() -> None:
    base = make_result(n_systems=2, datasets=["IU X-ray"], n_sites=0)
    bare = base.model_copy(update={"entities": [], "groups": [], "correlations": [], "sites": [], "notes": []})
    html = render_html(bare)
    doc = _parse(html)
    assert not doc.with_class("svg", "radar") and not doc.with_class("svg", "heatmap")
    assert 'class="card matrix-block"' not in html and 'class="card sites-block"' not in html
    assert 'class="card spider-block"' not in html and 'class="card corr-block"' not in html
    assert len(doc.find("tr", **{"data-system": base.systems[0]})) == 3  # all / normal / abnormal
    data = json.loads(doc.scripts[0][1])
    assert data["datasets"] == [{}]


def test_drilldown_data_has_every_example(result: BenchmarkResult, page: str) -> None:
    data = json.loads(_parse(page).scripts[0][1])
    n_examples = 0
    for di, ds in enumerate(result.datasets):
        d = data["datasets"][di]
        assert d["name"] == ds
        for e in (x for x in result.entities if x.dataset == ds):
            si = d["systems"].index(e.system)
            ei = [x[0] for x in d["entities"]].index(e.entity)
            cell = d["cells"][f"{si}_{ei}"]
            assert cell[:3] == [e.tp, e.fp, e.fn]
            got = [
                ExamplePair(
                    pair_id=p,
                    kind=k,
                    reference=data["texts"][r],
                    candidate=data["texts"][c],
                    reference_rules=rr,
                    candidate_rules=cr,
                )
                for p, k, r, c, rr, cr in cell[12]
            ]
            assert got == e.examples
            n_examples += len(got)
    assert n_examples > 0


def test_report_command_renders_a_saved_result(tmp_path):
    import subprocess
    import sys

    from tests.report_support import make_result

    saved = tmp_path / "result.json"
    saved.write_text(make_result().model_dump_json(), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "cxreval", "report", str(saved)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    page = tmp_path / "report.html"
    assert page.read_text(encoding="utf-8") == render_html(make_result())
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": 1}')
    refused = subprocess.run([sys.executable, "-m", "cxreval", "report", str(bad)], capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "not a cxreval bench result.json" in refused.stderr
