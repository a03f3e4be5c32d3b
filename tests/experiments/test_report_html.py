"""``nas report RUN_DIR --html``: one self-contained page, built from a real run and opened in real headless
Chromium (no mocks). After the page's own script ran: every image decoded, one row per trial, the front rows
marked, ``#sort=COLUMN:desc`` sorted the table; a screenshot is taken. Bad input is one line and replaces nothing.
The renderer is also fed hand-made trials with two hardware objectives (a front plot per device) and model cards
of every shape the exporter writes."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.cli import main
from hwnas.experiments.report.front import front_hypervolume
from hwnas.experiments.report.html import ReportData, front_pairs, hypervolume_progress, render_html
from hwnas.objectives import Constraint, Objective, Trial, pareto_front, reference_point

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (apt-get install chromium); the page is not opened")


# ------------------------------------------------------------------------------------------------- helpers


class Dom(HTMLParser):
    """What the tests read from a page: h2 texts, body attributes, images, and the trial table's header keys and
    rows (attributes, cell texts, cell data-v values)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.h2: list[str] = []
        self.body: dict[str, str] = {}
        self.imgs: list[dict[str, str]] = []
        self.table: dict[str, str] = {}
        self.keys: list[str] = []
        self.rows: list[dict[str, Any]] = []
        self._h2: list[str] | None = None
        self._in_table = False
        self._cell: dict[str, Any] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "h2":
            self._h2 = []
        elif tag == "body":
            self.body = a
        elif tag == "img":
            self.imgs.append(a)
        elif tag == "table" and a.get("id") == "trial-table":
            self._in_table, self.table = True, a
        elif self._in_table and tag == "th" and "data-key" in a:
            self.keys.append(a["data-key"])
        elif self._in_table and tag == "tr" and "data-n" in a:
            self.rows.append({"attrs": a, "text": [], "v": []})
        elif self._in_table and tag == "td" and self.rows:
            self._cell = {"v": a.get("data-v"), "text": ""}

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2" and self._h2 is not None:
            self.h2.append("".join(self._h2).strip())
            self._h2 = None
        elif tag == "table" and self._in_table:
            self._in_table = False
        elif tag == "td" and self._cell is not None:
            self.rows[-1]["text"].append(self._cell["text"].strip())
            self.rows[-1]["v"].append(self._cell["v"])
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._h2 is not None:
            self._h2.append(data)
        if self._cell is not None:
            self._cell["text"] += data

    def column(self, key: str) -> list[str | None]:
        """The sort values of a column, in row order (data-v, or the cell text when there is none)."""
        i = self.keys.index(key)
        return [r["v"][i] if r["v"][i] is not None else r["text"][i] for r in self.rows]

    def numbers(self) -> list[int]:
        return [int(r["attrs"]["data-n"]) for r in self.rows]

    def front_numbers(self) -> set[int]:
        return {int(r["attrs"]["data-n"]) for r in self.rows if "front" in r["attrs"].get("class", "").split()}


def _chromium(profile: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """Headless Chromium on a file:// page only: its own profile, no background networking, every host name
    unresolvable (the page itself forbids any fetch with its Content-Security-Policy)."""
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-default-apps", "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND",
           "--virtual-time-budget=5000", *args]
    assert all(a.startswith("--") or a.startswith("file://") for a in args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _dump_dom(page: Path, profile: Path, fragment: str = "") -> Dom:
    proc = _chromium(profile, "--dump-dom", page.resolve().as_uri() + fragment)
    assert proc.returncode == 0 and "<body" in proc.stdout, proc.stderr[-2000:]
    return Dom(proc.stdout)


def assert_self_contained(text: str) -> str:
    """Assert that a page fetches nothing (no script or style from elsewhere, no http(s) address outside the
    inlined plotly.js, which holds some as strings; its Content-Security-Policy forbids any fetch) and inlines
    plotly.js at most once; returns the page without plotly.js."""
    assert "default-src 'none'" in text and "<link" not in text
    assert not re.search(r"<script[^>]*\bsrc=", text)
    rest = text
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        pass
    else:
        library = get_plotlyjs()
        assert text.count(library[:4000]) <= 1
        rest = text.replace(library, "")
    assert "http://" not in rest and "https://" not in rest
    return rest


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _assert_sorted(values: list[str | None], desc: bool, numeric: bool = True) -> None:
    """Non-empty values in order (numbers compared as numbers), missing ones last."""
    present = [v for v in values if v not in (None, "")]
    assert values[: len(present)] == present, "missing values must come last"
    keys = [float(v) for v in present] if numeric else present
    assert keys == sorted(keys, reverse=desc)  # type: ignore[type-var]


# -------------------------------------------------------------------------------------- a real run, in Chromium


@needs_chromium
def test_html_report_of_a_real_run_in_headless_chromium(tiny_yaml, tmp_path, capsys):
    # the tiny search, with a hypervolume reference for flops_m so that the progress curve is drawn
    assert main(["run", str(tiny_yaml), "--quiet", "--set", "objectives.1.reference=1.0"]) == 0
    run_dir = tmp_path / "runs" / "tiny"
    trials = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    front = {t["number"] for t in json.loads((run_dir / "pareto.json").read_text())["front"]}
    before = _snapshot(run_dir)
    capsys.readouterr()

    assert main(["report", str(run_dir), "--html"]) == 0
    page = run_dir / "report.html"
    assert capsys.readouterr().out.strip() == f"wrote {page}"
    assert _snapshot(run_dir) == {**before, "report.html": page.read_bytes()}  # the page is all it wrote

    text = page.read_text()
    page_text = assert_self_contained(text)  # nothing to fetch; plotly.js at most once
    assert page_text.count('src="data:image/png;base64,') == page_text.count("<img ")

    profile = tmp_path / "chromium-profile"
    dom = _dump_dom(page, profile)
    assert dom.h2[:2] == ["Pareto front per device", "Search progress"]
    assert {"Every trial (10)", "Exported models (1)", "Latency tables' validation", "Resolved config"} <= set(dom.h2)
    # the page's own script counted, on load, the images that decoded
    assert int(dom.body["data-images-loaded"]) == int(dom.body["data-images-total"]) == len(dom.imgs) >= 2
    assert dom.numbers() == [t["number"] for t in trials]  # one row per trial, in journal order
    assert dom.front_numbers() == front and front
    assert dom.keys[:5] == ["number", "arch_id", "status", "top1", "flops_m"]
    assert "no latency table in this run" in text.lower()
    assert "tiny" in text and "nsga2" in text and "mbv3" in text

    # #sort=COLUMN:asc|desc sorts at load (numbers as numbers, missing values last), the header marks it
    dom = _dump_dom(page, profile, "#sort=top1:desc")
    assert dom.table["data-sorted"] == "top1:desc"
    _assert_sorted(dom.column("top1"), desc=True)
    assert sorted(dom.numbers()) == [t["number"] for t in trials] and dom.front_numbers() == front
    dom = _dump_dom(page, profile, "#sort=arch_id:desc")
    _assert_sorted(dom.column("arch_id"), desc=True, numeric=False)
    dom = _dump_dom(page, profile, "#sort=no_such_column:desc")  # an unknown column leaves the journal order
    assert dom.numbers() == [t["number"] for t in trials] and "data-sorted" not in dom.table

    # a screenshot at 1280 px wide: a real PNG of that size, not a blank page
    shot = tmp_path / "report.png"
    proc = _chromium(profile, f"--screenshot={shot}", "--window-size=1280,2000", "--hide-scrollbars",
                     page.resolve().as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (2000, 1280) and float(pixels[..., :3].std()) > 0.05

    # an existing page is not replaced without --force: one line, the file unchanged
    page.write_text("keep me\n")
    assert main(["report", str(run_dir), "--html"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(page) in line and "--force" in line
    assert page.read_text() == "keep me\n"
    assert main(["report", str(run_dir), "--html", "--force"]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>")

    # --out elsewhere: the run directory is left byte for byte, the models link points back into it
    now = _snapshot(run_dir)
    out = tmp_path / "elsewhere" / "page.html"
    assert main(["report", str(run_dir), "--html", "--out", str(out)]) == 0
    assert _snapshot(run_dir) == now
    assert 'href="../runs/tiny/models/' in out.read_text()


# --------------------------------------------------------------------------------------------- bad input


def test_html_report_of_a_directory_that_is_not_a_run_is_one_line(tiny_yaml, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty), "--html"]) == 2
    assert "not a run directory (no config.yaml)" in _one_error_line(capsys.readouterr().err)
    assert not (empty / "report.html").exists()

    assert main(["report", str(tmp_path / "missing"), "--html"]) == 2
    assert "no such folder" in _one_error_line(capsys.readouterr().err)

    # a run that never recorded a trial: the line names the missing journal
    started = tmp_path / "started"
    started.mkdir()
    shutil.copy(tiny_yaml, started / "config.yaml")
    assert main(["report", str(started), "--html"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "no trials.jsonl" in line and f"nas run --resume {started}" in line
    assert sorted(p.name for p in started.iterdir()) == ["config.yaml"]

    # --out / --force belong to --html
    assert main(["report", str(started), "--out", str(tmp_path / "x.html")]) == 2
    assert "--html" in _one_error_line(capsys.readouterr().err)


def test_html_report_refuses_to_replace_a_page_before_reading_the_run(tiny_yaml, tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(tiny_yaml, run_dir / "config.yaml")
    (run_dir / "trials.jsonl").write_text("")
    out = tmp_path / "page.html"
    out.write_text("keep me\n")
    assert main(["report", str(run_dir), "--html", "--out", str(out)]) == 2
    assert "--force" in _one_error_line(capsys.readouterr().err)
    assert out.read_text() == "keep me\n"
    # a folder where the page should go is refused even with --force
    assert main(["report", str(run_dir), "--html", "--out", str(tmp_path), "--force"]) == 2
    assert "is a directory" in _one_error_line(capsys.readouterr().err)
    # an empty journal still makes a page (nothing to plot, said in words)
    assert main(["report", str(run_dir), "--html", "--out", str(out), "--force"]) == 0
    text = out.read_text()
    assert "Every trial (0)" in text and "No trial yet." in text


# ------------------------------------------------------------------------ the renderer on hand-made data


def _device_trials(n: int = 40, seed: int = 0) -> list[Trial]:
    """Trials with top-1 and the latency on two devices; every ninth infeasible (no top-1)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        lat_a = float(rng.uniform(1, 10))
        metrics = {"latency_ms@a": lat_a, "latency_ms@b": lat_a * float(rng.uniform(0.5, 2.0))}
        status = "infeasible" if i % 9 == 4 else "ok"
        if status == "ok":
            metrics["top1"] = 0.5 + 0.4 * (1 - math.exp(-lat_a / 4)) + float(rng.normal(0, 0.03))
        out.append(Trial(i, Architecture("toy", {"i": i}), metrics, status))  # type: ignore[arg-type]
    return out


OBJECTIVES = [Objective("top1", "max"), Objective("latency_ms@a", "min", reference=12.0),
              Objective("latency_ms@b", "min", reference=25.0)]

CARDS: list[dict[str, Any]] = [
    {  # the newest card: every key the exporter writes
        "arch_id": "aaaa000011112222", "trial": 7, "input_shape": [1, 3, 32, 32],
        "weights": {"kind": "supernet", "detail": "inherited <b>from</b> the supernet"},
        "params_m": 0.25, "flops_m": 12.5, "top1": {"value": 0.81, "how": "onnx on held-out"},
        "measured_metrics": {"top1": 0.8, "latency_ms@a": 3.2},
        "onnx": {"file": "aaaa000011112222.onnx", "opset": 17, "batch": "dynamic", "simplified": True,
                 "sha256": "ab" * 32, "max_abs_diff_vs_torch": 1.5e-6, "checked_inputs": 32, "top1_heldout": 0.81},
        "formats": {
            "onnx_fp16": {"skipped": "no GPU here"},
            "onnx_int8": {"error": "calibration failed: <script>alert(1)</script>"},
            "torch_export": {"file": "aaaa000011112222.pt2"},
            "tensorrt": {"not_built": "no TensorRT", "trtexec": "trtexec --onnx=aaaa000011112222.onnx --fp16 "
                                                                "--saveEngine=aaaa000011112222.engine"},
        },
        "latency": [
            {"context": "this host, onnxruntime CPU", "metric": "latency_ms", "file": "aaaa000011112222.onnx",
             "measured": {"median_ms": 3.1, "p90_ms": 3.4, "count": 200}, "not_measured": None,
             "predicted_ms": 3.2, "predicted_by": "the search", "error_pct": 3.2},
            {"context": "pixel3", "metric": "latency_ms@pixel3", "file": None, "measured": None,
             "not_measured": "no such device attached", "predicted_ms": 41.0, "predicted_by": "table pixel3",
             "error_pct": None},
        ],
        "future_key": {"nested": [1, 2, 3]},
    },
    {"arch_id": "bbbb000011112222", "trained_weights": False, "weights_source": "seeded initialisation"},  # older
    {"arch_id": "cccc000011112222"},  # nothing but its id
    {"arch_id": "dddd000011112222", "onnx": None, "formats": [1], "latency": "?", "top1": 0.5, "weights": 3},
    {"arch_id": "eeee000011112222", "formats": {"tensorrt": {"not_built": "no TensorRT", "trtexec": {
        "tensorrt10": "trtexec --onnx=e.onnx --fp16", "tensorrt11": "trtexec --onnx=e.fp16.onnx"}}}},
]


def _device_data(**kw: Any) -> ReportData:
    return ReportData(name="toy <run>", trials=_device_trials(), objectives=list(OBJECTIVES), space="toy",
                      strategy="random", budget=40, **kw)


def test_a_front_plot_per_device_and_every_card_shape(tmp_path):
    assert [(a.metric, b.metric) for a, b in front_pairs(OBJECTIVES)] == [("top1", "latency_ms@a"),
                                                                          ("top1", "latency_ms@b")]
    assert [(a.metric, b.metric) for a, b in front_pairs([Objective("top1", "max"), Objective("flops_m")])] == [
        ("top1", "flops_m")]
    trust = {"latency_ms@a": {"answers": "calibration", "networks": 12, "figures_are": "calibrated, held-out",
                              "figures": {"mape_pct": 4.2, "within_10pct": 0.9, "kendall_tau": 0.88}},
             "latency_ms@b": None,
             "latency_ms@c": {"figures": {}}}  # figures of another version: shown as they are, no crash
    data = _device_data(cards=CARDS, model_files={"aaaa000011112222.onnx"}, trust=trust,
                        config_text="name: toy <run>\n", env={"host": "vm", "versions": {"torch": "2.5", "ray": None}})
    text = render_html(data)
    dom = Dom(text)
    assert dom.h2[0] == "Pareto front per device"
    fronts = text[text.index('id="fronts"'):text.index('id="progress"')]
    assert fronts.count("<img ") == 2 and "on a" in fronts and "on b" in fronts
    assert len(dom.imgs) == 4  # two fronts, the progress curve and genes against metrics
    assert dom.numbers() == list(range(40))
    assert dom.front_numbers() == {t.number for t in pareto_front(data.trials, OBJECTIVES)}
    # every text from the run is escaped
    assert "<script>alert" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "toy &lt;run&gt;" in text and "inherited &lt;b&gt;from&lt;/b&gt;" in text
    # the cards: formats, the trtexec line in a code block, measured and not measured latency, unknown keys
    assert "Exported models (5)" in dom.h2
    assert '<pre class="cmd"><code>trtexec --onnx=aaaa000011112222.onnx --fp16' in text
    assert "tensorrt10</span><pre class=\"cmd\"><code>trtexec --onnx=e.onnx --fp16</code>" in text
    assert "tensorrt11</span><pre class=\"cmd\"><code>trtexec --onnx=e.fp16.onnx</code>" in text
    assert "not measured: no such device attached" in text and "+3.2 %" in text
    assert "skipped</span>: no GPU here" in text and "not built</span>: no TensorRT" in text
    assert "future_key" in text and "nested" in text
    assert "random-init" in text and "seeded initialisation" in text
    assert "aaaa000011112222.pt2</code> <span class=failed>(missing)" in text
    assert "bbbb000011112222.onnx is not in models/" in text
    # the latency validation figures, through describe_trust
    assert "MAPE 4.2%, 90% within ±10%, Kendall τ 0.88" in text and "never validated" in text
    assert "latency_ms@c: {&quot;figures&quot;: {}}" in text

    if CHROMIUM is not None:  # the same page in Chromium: three images decoded, #sort on a device's column
        page = tmp_path / "toy.html"
        page.write_text(text)
        dom = _dump_dom(page, tmp_path / "profile", "#sort=latency_ms%40b:desc")
        assert dom.body["data-images-loaded"] == dom.body["data-images-total"] == "4"
        assert dom.table["data-sorted"] == "latency_ms@b:desc"
        _assert_sorted(dom.column("latency_ms@b"), desc=True)
        dom = _dump_dom(page, tmp_path / "profile", "#sort=top1:asc")
        _assert_sorted(dom.column("top1"), desc=False)
        assert dom.numbers()[-4:] == [4, 13, 22, 31]  # the infeasible trials have no top-1: last, by number


def test_progress_is_skipped_with_a_reason_and_no_model_or_table_is_said():
    objectives = [Objective("top1", "max"), Objective("latency_ms@a", "min")]  # no reference for the latency
    text = render_html(ReportData(name="r", trials=_device_trials(12), objectives=objectives, trust={}))
    assert "No hypervolume to follow: latency_ms@a has no reference point" in text
    assert "No exported model in this run" in text and "No latency table in this run." in text
    assert text.count("<img ") == 2  # the one device's front, and genes against metrics
    one = render_html(ReportData(name="r", trials=_device_trials(5), objectives=[Objective("top1", "max")]))
    assert "A single objective: there is no front to plot." in one


# ------------------------------------------------------------------------------------- hypervolume progress


@pytest.mark.parametrize("k", [2, 3])
def test_hypervolume_progress_matches_the_front_of_each_prefix(k):
    rng = np.random.default_rng(k)
    objectives = [Objective("top1", "max"), Objective("latency_ms", "min", reference=0.9),
                  Objective("energy_mj", "min", reference=0.95)][:k]
    trials = []
    for i in range(120):
        metrics = {"top1": float(rng.uniform()), "latency_ms": float(rng.uniform()), "energy_mj": float(rng.uniform())}
        if i % 17 == 3:
            metrics["top1"] = math.nan
        status = "failed" if i % 23 == 5 else "ok"
        trials.append(Trial(i, Architecture("toy", {"i": i % 100}), metrics, status))  # type: ignore[arg-type]
    ref = reference_point(objectives, [Constraint("latency_ms", max=2.0)])
    got = hypervolume_progress(list(reversed(trials)), objectives, ref)  # ordered by number, not by position
    assert got is not None and len(got) == len(trials)
    for i in range(1, len(trials) + 1):
        want = front_hypervolume(pareto_front(trials[:i], objectives), ref)
        assert want is not None and math.isclose(got[i - 1], want, rel_tol=1e-12, abs_tol=1e-15), i
    assert hypervolume_progress(trials, [Objective("top1", "max"), Objective("flops_m")],
                                reference_point([Objective("top1", "max"), Objective("flops_m")])) is None


def test_hypervolume_progress_of_thousands_of_trials_ends_at_the_front_hypervolume():
    rng = np.random.default_rng(0)
    objectives = [Objective("top1", "max"), Objective("latency_ms", "min", reference=1.0)]
    trials = [Trial(i, Architecture("toy", {"i": i}), {"top1": float(rng.uniform()),  # type: ignore[arg-type]
                                                       "latency_ms": float(rng.uniform())})
              for i in range(5000)]
    got = hypervolume_progress(trials, objectives, reference_point(objectives))
    assert got is not None and got == sorted(got)  # it never decreases
    assert math.isclose(got[-1], front_hypervolume(pareto_front(trials, objectives), reference_point(objectives)))
