"""``nas report RUN [RUN ...] --html``: one page comparing runs of NAS-Bench-201 priced by the published tables
(seconds each). Each compared run's traces are in the interactive figures, plotly.js is inlined exactly once and
nothing is fetched; the table filters by run; runs with other objectives are named, not compared; export folders
given with --exports, or listed by the run's own export.json, are read, one of another run named; a folder that is
not a run is one line before any work; nothing already written is replaced. One Chromium check: the page's
script and plotly.js run without an error and draw every plot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hwnas.cli import main
from hwnas.experiments.report.compare import (
    ComparedRun,
    Comparison,
    ReportData,
    drawn_points,
    shared_reference,
    table_trials,
)
from hwnas.objectives import Objective, Trial
from hwnas.testing.experiments import PIXEL3, nb201_benchmark_yaml

from .test_report_html import (
    CHROMIUM,
    _chromium,
    _device_trials,
    _dump_dom,
    _one_error_line,
    _snapshot,
    assert_self_contained,
)


def _figure(text: str, slot: str) -> dict:
    m = re.search(rf'<script type="application/json" id="fig-{slot}">(.*?)</script>', text, re.S)
    assert m, f"no figure {slot}"
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> dict[str, Path]:
    """Two comparable runs (seeds 1 and 2) and one with other objectives, 16 trials each."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    two = [{"metric": "top1", "direction": "max"}, {"metric": PIXEL3, "direction": "min", "reference": 40}]
    for name, seed, objectives in (("a", 1, two), ("b", 2, two),
                                   ("other", 1, [{"metric": "top1", "direction": "max"}])):
        yaml = root / f"{name}.yaml"
        yaml.write_text(nb201_benchmark_yaml(shared_data, trials=16, seed=seed, batch_size=8, name=name,
                                             objectives=objectives))
        assert main(["run", str(yaml), "--quiet", "--run-dir", str(root / name)]) == 0
        out[name] = root / name
    return out


def _journal(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]


def test_a_page_comparing_runs(runs, tmp_path, capsys):
    pytest.importorskip("plotly", reason="the interactive plots need hwnas[plotly]")
    a, b, other = runs["a"], runs["b"], runs["other"]
    before = {name: _snapshot(p) for name, p in runs.items()}
    page = tmp_path / "compare.html"
    capsys.readouterr()
    assert main(["report", str(a), str(b), str(other), "--html", "--out", str(page)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == f"wrote {page}"
    # the run with other objectives is named on stderr and on the page, and not compared
    warning = [line for line in captured.err.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and f"other ({other}) is not compared" in warning[0]
    assert "its objectives top1 (max) are not" in warning[0] and "latency_ms@pixel3 (min)" in warning[0]
    assert {name: _snapshot(p) for name, p in runs.items()} == before  # every run left byte for byte

    text = page.read_text()
    assert_self_contained(text)
    from plotly.offline import get_plotlyjs

    assert text.count(get_plotlyjs()) == 1  # plotly.js inlined exactly once
    assert "is not compared: its objectives top1 (max) are not the compared runs&#x27;" in text
    assert "<h1>Comparing 2 runs</h1>" in text
    # each compared run's front and other trials in the device's plot; a point's customdata is [run, trial]
    front = _figure(text, "front-0")
    names = [t["name"] for t in front["data"]]
    assert [n.split(":")[0] for n in names] == ["a", "a", "b", "b"] and not any("other" == n for n in names)
    assert all(t["type"] == "scattergl" for t in front["data"])
    plotted = {(c[0], c[1]) for t in front["data"] for c in t["customdata"]}
    for k, run in enumerate((a, b)):
        ok = {(k, t["number"]) for t in _journal(run) if t["status"] == "ok"}
        assert ok and ok <= plotted
    progress = _figure(text, "progress")
    assert [t["name"] for t in progress["data"]] == ["a", "b"]
    assert all(len(t["y"]) == 16 for t in progress["data"])
    genes = _figure(text, "genes")
    assert genes["data"][0]["type"] == "parcoords" and genes["data"][0]["dimensions"][0]["label"] == "run"
    # one hypervolume reference for both, said where it comes from
    assert "latency_ms@pixel3 = <b>40</b>" in text and "the same in every compared run" in text
    # the table across runs, filtered by run: rows of both runs, the filter and its script
    rows = re.findall(r'<tr[^>]* data-run="(\d)" data-n="(\d+)"', text)
    assert sorted({r for r, _ in rows}) == ["0", "1"] and len(rows) == 32
    assert '<select id="run-filter"' in text and '<option value="1">b</option>' in text
    assert "getAttribute('data-run') === run" in text and "hwnasShowTrial" in text and "plotly_click" in text
    assert "<h2>Runs side by side</h2>" in text and "config differs from the first run at" in text
    # the static fallback of every plot
    assert text.count('<img class="static" src="data:image/png;base64,') == 3

    if CHROMIUM is not None:  # the page's script and plotly.js run without an error; #run=1 filters the table
        dom = _dump_dom(page, tmp_path / "profile", "#run=1")
        assert dom.body.get("data-js-errors") == "0", dom.body
        assert dom.body["data-plots-drawn"] in ("3", "0")  # 0: no WebGL in this Chromium, the images stay
        assert dom.body["data-images-loaded"] == dom.body["data-images-total"] == "3"
        assert dom.table["data-shown"] == "16"


def test_bad_input_is_one_line_and_replaces_nothing(runs, tmp_path, capsys):
    a, b = runs["a"], runs["b"]
    before = _snapshot(a)
    out = tmp_path / "page.html"
    # a folder that is not a run: one line naming it, before any work
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    assert main(["report", str(a), str(empty), "--html", "--out", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(empty) in line and "not a run directory" in line and not out.exists()
    # several runs need --out; --out onto a file of a run is refused even with --force
    assert main(["report", str(a), str(b), "--html"]) == 2
    assert "--out" in _one_error_line(capsys.readouterr().err)
    for target in (a / "trials.jsonl", a / "summary.json"):
        assert main(["report", str(a), str(b), "--html", "--out", str(target), "--force"]) == 2
        assert "never replaces" in _one_error_line(capsys.readouterr().err)
    (a / "report.html").write_text("the run's own page\n")
    try:  # a comparison never replaces a run's own page either; one run's page is replaced only with --force
        assert main(["report", str(a), str(b), "--html", "--out", str(a / "report.html"), "--force"]) == 2
        capsys.readouterr()
        assert (a / "report.html").read_text() == "the run's own page\n"
        assert main(["report", str(a), "--html"]) == 2
        assert "--force" in _one_error_line(capsys.readouterr().err)
        assert (a / "report.html").read_text() == "the run's own page\n"
    finally:
        (a / "report.html").unlink()
    assert _snapshot(a) == before
    out.write_text("keep me\n")
    assert main(["report", str(a), str(b), "--html", "--out", str(out)]) == 2
    assert "--force" in _one_error_line(capsys.readouterr().err) and out.read_text() == "keep me\n"
    assert main(["report", str(a), "--html", "--out", str(out), "--exports", str(tmp_path / "nowhere")]) == 2
    assert "--exports" in _one_error_line(capsys.readouterr().err) and out.read_text() == "keep me\n"


def _export(folder: Path, run: Path, trial: dict) -> None:
    """An export folder as nas export writes it (its index and one card), without the model files."""
    folder.mkdir(parents=True)
    arch = trial["arch"]["arch_id"] if "arch_id" in trial["arch"] else trial["arch_id"]
    (folder / "export.json").write_text(json.dumps({"run": str(run), "formats": ["onnx", "onnx_int8"],
                                                    "models": [arch]}))
    (folder / f"{arch}.json").write_text(json.dumps({
        "arch_id": arch, "trial": trial["number"], "onnx": {"file": f"{arch}.onnx", "top1_heldout": 0.5},
        "formats": {"onnx_int8": {"file": f"{arch}.int8.onnx", "top1_heldout": 0.49}}}))
    (folder / f"{arch}.onnx").write_bytes(b"onnx")


def _arch_id(run: Path, k: int = 0) -> dict:
    from hwnas.objectives import Trial

    t = _journal(run)[k]
    return {"number": t["number"], "arch_id": Trial.from_dict(t).arch.arch_id, "arch": {}}


def test_export_folders_elsewhere_are_read_and_another_runs_is_named(runs, tmp_path, capsys):
    a, b = runs["a"], runs["b"]
    mine, theirs, listed = tmp_path / "exported", tmp_path / "b-exported", tmp_path / "listed"
    _export(mine, a, _arch_id(a, 0))
    _export(theirs, b, _arch_id(b, 3))
    page = tmp_path / "a.html"
    assert main(["report", str(a), "--html", "--out", str(page), "--exports", str(mine), "--exports",
                 str(theirs)]) == 0
    err = capsys.readouterr().err
    text = page.read_text()
    own = _arch_id(a, 0)["arch_id"]
    # this run's export: its card, every format, the files linked relative to the page
    assert f'id="model-0-{own}"' in text and "onnx_int8" in text and 'href="exported/' + own + '.onnx"' in text
    assert f'<a href="#model-0-{own}" title="its card">{own}</a>' in text  # the trial's row links to its card
    assert str(mine) in text and "--exports" in text
    # the other run's export is shown, and named on the page and on stderr
    named = f"{theirs} is an export of another run than {a}"
    assert named in text and f"warning: {named}" in err and f"names the run {b}" in err
    assert str(mine) + " is an export" not in err
    if CHROMIUM is not None:  # #trial=RUN:NUMBER does what a click on the point does: its row and card highlighted
        number = _arch_id(a, 0)["number"]
        proc = _chromium(tmp_path / "profile", "--dump-dom", page.resolve().as_uri() + f"#trial=0:{number}")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert re.search(rf'<tr class="[^"]*picked[^"]*" id="t-0-{number}"', proc.stdout)
        assert re.search(rf'<article class="card picked" id="model-0-{own}"', proc.stdout)
        assert "is highlighted in the table" in proc.stdout

    # a folder the run's own models/export.json lists is read as well
    models = a / "models"
    models.mkdir()
    try:
        (models / "export.json").write_text(json.dumps({"run": str(a), "models": [], "exports": [str(listed)]}))
        _export(listed, a, _arch_id(a, 1))
        assert main(["report", str(a), "--html", "--out", str(page), "--force"]) == 0
        text = page.read_text()
        assert f"listed in {models / 'export.json'}" in text and _arch_id(a, 1)["arch_id"] in text
        assert "is an export of another run" not in text
    finally:
        for p in sorted(models.iterdir()):
            p.unlink()
        models.rmdir()


# ------------------------------------------------------------------------ the pieces, on hand-made trials


def test_the_shared_reference_and_the_limits_for_large_runs():
    objectives = [Objective("top1", "max"), Objective("latency_ms@a", "min")]  # no reference for the latency
    one = ReportData(name="one", trials=_device_trials(30, seed=1), objectives=objectives)
    two = ReportData(name="two", trials=_device_trials(30, seed=2), objectives=objectives)
    ref = shared_reference([one, two], objectives)
    worst = max(t.metrics["latency_ms@a"] for d in (one, two) for t in d.trials if t.status == "ok")
    best = min(t.metrics["latency_ms@a"] for d in (one, two) for t in d.trials if t.status == "ok")
    assert ref.values[0] == 0.0 and ref.values[1] == pytest.approx(worst + 0.1 * (worst - best))
    assert "derived from the" in ref.sources[1] and "no compared run fixes one" in ref.sources[1]
    assert shared_reference([one], objectives).values[1] is None  # one run: its own (none), as its summary says
    comparison = Comparison.of([ComparedRun("one", one), ComparedRun("two", two)])
    assert all(h is not None and len(h) == 30 for h in comparison.histories)

    trials = [Trial(i, t.arch, t.metrics, t.status) for i, t in enumerate(_device_trials(500))]
    front = trials[:3]
    drawn, total = drawn_points(trials, "latency_ms@a", "top1", front, limit=50)
    assert len(drawn) == 50 and total > 50 and not {id(t) for t in front} & {id(t) for t in drawn}
    assert drawn == drawn_points(trials, "latency_ms@a", "top1", front, limit=50)[0]  # seeded: the same sample
    kept = table_trials(trials, trials[-3:], limit=20)
    assert len(kept) == 20 and trials[-1] in kept and kept[:17] == trials[:17]


def test_a_copied_runs_own_export_is_not_another_runs(tmp_path):
    from hwnas.experiments.export.card import ModelCard
    from hwnas.experiments.report.compare import ExportFolder, foreign_export

    trials = _device_trials(5)
    elsewhere = tmp_path / "original-run"
    elsewhere.mkdir()
    card = ModelCard(arch_id=trials[2].arch.arch_id, trial=2)
    mine = ExportFolder(tmp_path / "copy" / "models", "the run's models/", cards=[card], info={"run": str(elsewhere)})
    assert foreign_export(mine, tmp_path / "copy", trials) is None  # the cards are this run's trials
    stranger = ModelCard(arch_id=trials[2].arch.arch_id, trial=3)
    why = foreign_export(ExportFolder(tmp_path / "x", "--exports", cards=[stranger]), tmp_path / "copy", trials)
    assert why is not None and "1 of its 1 models are not this run's trials" in why
    empty = ExportFolder(tmp_path / "y", "--exports", info={"run": str(elsewhere)})
    assert f"names the run {elsewhere}" in (foreign_export(empty, tmp_path / "copy", trials) or "")
