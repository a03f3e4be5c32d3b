"""The run's artefacts as types: a model card (:class:`ModelCard`), the latency trust (:class:`LatencyTrust`) and
the run summary (:class:`RunSummary`) each round-trip through their JSON and read every earlier form of it; the
Python API, ``nas report`` and the HTML report show one summary, read from the run directory the same way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hwnas.architecture import Architecture
from hwnas.cli import main
from hwnas.errors import HwnasError, RunDirectoryError
from hwnas.experiments import run_experiment
from hwnas.experiments.export import ModelCard, plan_export, read_cards
from hwnas.experiments.export.card import CardTop1, CardWeights
from hwnas.experiments.report.html import collect, render_html
from hwnas.experiments.report.summary import (
    FROM_JOURNAL,
    RunSummary,
    SearchFacts,
    TrialCounts,
    read_summary,
    summary_of,
)
from hwnas.experiments.report.trust import LatencyTrust, TrustEntry, describe_trust
from hwnas.objectives import Constraint, Objective, Trial

from .conftest import TINY_SPACE

# ------------------------------------------------------------------------------------------------ model cards

#: A card as this version's exporter writes it (every key, in its order).
CARD: dict[str, Any] = {
    "arch_id": "aaaa000011112222", "arch": {"space": "mbv3", "genes": {"d0": 1}}, "trial": 7,
    "input_shape": [1, 3, 32, 32], "params_m": 0.25, "flops_m": 12.5,
    "measured_metrics": {"top1": 0.8, "latency_ms": 3.2},
    "onnx": {"file": "aaaa000011112222.onnx", "opset": 17, "batch": "fixed", "simplified": True,
             "sha256": "ab" * 32, "max_abs_diff_vs_torch": 1.5e-6, "checked_inputs": 32, "top1_heldout": 0.81},
    "classes": ["0", "1"],
    "formats": {"onnx_int8": {"file": "aaaa000011112222.int8.onnx", "top1_heldout": 0.8, "top1_lost_vs_fp32": 0.01}},
    "weights": {"kind": "trained", "detail": "trained from scratch by the train evaluator's recipe"},
    "trained_weights": True, "weights_source": "trained from scratch by the train evaluator's recipe",
    "top1": {"value": 0.81, "how": "the exported ONNX file in onnxruntime"},
    "latency": [{"context": "cpu", "name": "this-cpu", "file": "aaaa000011112222.onnx",
                 "measured": {"median_ms": 3.1, "p90_ms": 3.4, "count": 200, "rounds": 2}, "not_measured": None,
                 "predicted_ms": 3.2, "error_pct": 3.2}],
    "latency_rounds": 2,
}

#: A card of the first exporter (before weights, top-1, params, formats and latency were recorded).
FIRST_CARD: dict[str, Any] = {
    "arch_id": "bbbb000011112222", "arch": {"space": "mbv3", "genes": {"d0": 2}}, "trial": 3,
    "input_shape": [1, 1, 8, 8], "trained_weights": False, "measured_metrics": {"flops_m": 0.2},
    "onnx": {"file": "bbbb000011112222.onnx", "opset": 17, "sha256": "cd" * 32, "max_abs_diff_vs_torch": 2e-7,
             "checked_inputs": 32},
    "note": "exported with its seeded initialisation: no trained weights were kept for it",
}


def test_a_card_round_trips_through_its_json_in_the_exporters_key_order():
    card = ModelCard.from_dict(CARD)
    assert card.to_dict() == CARD and list(card.to_dict()) == list(CARD)
    assert card.weights == CardWeights("trained", CARD["weights"]["detail"])
    assert card.top1 == CardTop1(0.81, "the exported ONNX file in onnxruntime")
    assert card.input_shape == (1, 3, 32, 32) and card.classes == ("0", "1") and card.latency_rounds == 2
    assert card.onnx_file == "aaaa000011112222.onnx" and card.max_abs_diff == 1.5e-6
    assert card.format_record("onnx_int8")["top1_lost_vs_fp32"] == 0.01 and card.format_record("tensorrt") == {}
    assert [row["name"] for row in card.measured_latency()] == ["this-cpu"] and card.extra == {}
    assert ModelCard.from_dict(json.loads(json.dumps(card.to_dict()))) == card


def test_a_card_of_an_earlier_exporter_or_of_another_shape_is_read_and_kept_as_it_is():
    first = ModelCard.from_dict(FIRST_CARD)
    assert first.weights is None and first.top1 is None and first.latency is None and first.params_m is None
    assert first.trained_weights is False and first.note is not None and first.max_abs_diff == 2e-7
    assert first.to_dict() == FIRST_CARD
    # keys this version does not know, and values of another type than it writes: kept as read, never an error
    odd = {"arch_id": "cccc000011112222", "onnx": None, "formats": [1], "latency": "?", "top1": 0.5, "weights": 3,
           "future_key": {"nested": [1, 2]}}
    card = ModelCard.from_dict(odd)
    assert card.onnx is None and card.formats is None and card.latency is None and card.top1 is None
    assert card.weights is None and card.onnx_file is None and card.max_abs_diff is None
    assert card.extra == {k: v for k, v in odd.items() if k != "arch_id"}
    assert card.to_dict() == odd
    assert ModelCard.from_dict({}).to_dict() == {}  # not even an id


def test_read_cards_follows_the_index_and_names_what_it_cannot_read(tmp_path):
    (tmp_path / f"{CARD['arch_id']}.json").write_text(json.dumps(CARD))
    (tmp_path / f"{FIRST_CARD['arch_id']}.json").write_text(json.dumps(FIRST_CARD))
    index = {"selection": "Pareto front", "models": [CARD["arch_id"], "dddd000011112222", FIRST_CARD["arch_id"]]}
    (tmp_path / "export.json").write_text(json.dumps(index))
    cards, problems, info = read_cards(tmp_path)
    assert [c.arch_id for c in cards] == [CARD["arch_id"], FIRST_CARD["arch_id"]]
    assert all(isinstance(c, ModelCard) for c in cards) and cards[0].weights is not None
    assert problems == ["dddd000011112222.json: listed in export.json but missing"]
    assert info == {"selection": "Pareto front"}
    (tmp_path / "export.json").unlink()  # no index: every card in the folder, by name
    cards, problems, info = read_cards(tmp_path)
    assert [c.arch_id for c in cards] == [CARD["arch_id"], FIRST_CARD["arch_id"]] and not problems and info is None


# ----------------------------------------------------------------------------------------------- latency trust

FIGURES = {"n": 20, "mape_pct": 4.2, "within_5pct": 0.6, "within_10pct": 0.9, "kendall_tau": 0.88}

#: latency_trust as pareto.json holds it: a table answering with its calibration and priced at other
#: resolutions too, a few-shot model, a table never validated.
TRUST: dict[str, Any] = {
    "latency_ms@a": {"networks": 50, "raw": FIGURES, "calibrated_heldout": FIGURES, "learned_heldout": None,
                     "calibrated": True, "answers": "calibration", "how": "50 networks", "figures": FIGURES,
                     "figures_are": "calibrated, held-out",
                     "interpolated": {"figures": FIGURES, "measured_resolutions": [128, 160],
                                      "figures_are": "interpolated, held-out"}},
    "latency_ms@b": {"answers": "fewshot", "how": "k networks", "networks": 8, "figures": FIGURES,
                     "figures_are": "leave-one-out"},
    "latency_ms@c": None,
}


def test_latency_trust_round_trips_and_is_described_the_same_as_its_json():
    trust = LatencyTrust.from_dict(TRUST)
    assert trust.to_dict() == TRUST
    keys = [list(e.to_dict()) if e else None for e in trust.values()]
    assert keys == [list(v) if v else None for v in TRUST.values()]  # and in the order latency_trust writes them
    assert isinstance(trust["latency_ms@a"], TrustEntry) and trust["latency_ms@c"] is None
    assert trust["latency_ms@b"].answers == "fewshot" and trust["latency_ms@a"].calibrated is True
    assert describe_trust(trust) == describe_trust(TRUST)
    assert describe_trust(trust) == [
        "latency_ms@a: table validated on 50 networks (calibrated, held-out): MAPE 4.2%, 90% within ±10%, "
        "Kendall τ 0.88",
        "latency_ms@a: at resolutions other than the measured [128, 160] (interpolated, held-out, 20 networks): "
        "MAPE 4.2%, 90% within ±10%, Kendall τ 0.88",
        "latency_ms@b: few-shot model validated on 8 networks (leave-one-out): MAPE 4.2%, 90% within ±10%, "
        "Kendall τ 0.88",
        "latency_ms@c: from a table that was never validated (nas latency validate TABLE)"]


def test_latency_trust_of_the_first_versions_is_kept_as_written_but_not_described():
    first = {"latency_ms@pixel3": {"networks": 30, "raw": FIGURES, "calibrated_heldout": None, "calibrated": False,
                                   "how": "30 networks"}}  # before "answers" and "figures"
    trust = LatencyTrust.from_dict(first)
    assert trust.to_dict() == first
    with pytest.raises((KeyError, TypeError, ValueError)):
        describe_trust(trust)
    odd = {"m": {"figures": {}, "future": 1}, "n": "not an entry"}
    assert LatencyTrust.from_dict(odd).to_dict() == {"m": {"figures": {}, "future": 1}, "n": {}}
    assert LatencyTrust.from_dict(None) == LatencyTrust() and not LatencyTrust.from_dict([1, 2])


# ------------------------------------------------------------------------------------------------ run summary


def _trials() -> list[Trial]:
    metrics = [(0.8, 3.0), (0.7, 2.0), (0.9, 5.0), (0.6, 4.0)]
    out = [Trial(i, Architecture("toy", {"i": i}), {"top1": a, "latency_ms": b}, "ok", cost_s=1.5)
           for i, (a, b) in enumerate(metrics)]
    out.append(Trial(4, Architecture("toy", {"i": 4}), {"latency_ms": 9.0}, "infeasible", error="latency_ms > 6"))
    out.append(Trial(5, Architecture("toy", {"i": 5}), {}, "failed", error="boom"))
    return out


OBJECTIVES = [Objective("top1", "max"), Objective("latency_ms", "min")]
CONSTRAINTS = [Constraint("latency_ms", max=6.0)]


def test_a_run_summary_round_trips_through_summary_json_and_pareto_json():
    search = SearchFacts(setup_s=1.25, wall_s=10.5, journal_evaluation_s=6.0, evaluated=6, reused=0,
                         stopped_early=None)
    summary = summary_of(_trials(), OBJECTIVES, CONSTRAINTS, latency_trust=LatencyTrust.from_dict(TRUST),
                         search=search).with_export([ModelCard.from_dict(CARD)])
    assert summary.trials == TrialCounts(ok=4, infeasible=1, failed=1) and summary.trials.total == 6
    assert sorted(t.number for t in summary.front) == [0, 1, 2]
    assert summary.hypervolume is not None and summary.reference.values == (0.0, 6.0)
    assert summary.exported == (CARD["onnx"]["file"],) and summary.max_abs_diff == 1.5e-6
    doc, pareto = json.loads(json.dumps(summary.to_dict())), json.loads(json.dumps(summary.pareto_dict()))
    assert list(doc) == ["front", "hypervolume", "trials", "search", "exported", "max_abs_diff"]
    assert list(pareto) == ["objectives", "front", "latency_trust", "constraints", "trials", "hypervolume",
                            "hypervolume_reference"]
    back = RunSummary.from_dict(doc, pareto)
    assert back.to_dict() == doc and back.pareto_dict() == pareto
    assert back.front == summary.front and back.constraints == summary.constraints
    assert back.search == search and back.latency_trust == summary.latency_trust
    assert back.hypervolume == summary.hypervolume and back.reference.values == summary.reference.values


def test_summary_and_pareto_json_of_earlier_versions_are_read_with_what_they_hold():
    old_summary = {"front": 3, "hypervolume": 1.5, "trials": {"ok": 4, "infeasible": 1, "failed": 1}}
    back = RunSummary.from_dict(old_summary)  # before "search" and the export's keys
    assert back.search is None and back.exported is None and back.hypervolume == 1.5
    assert back.to_dict() == {**old_summary, "front": 0}  # the front itself is pareto.json's
    old_pareto = {"objectives": [{"metric": "top1", "direction": "max"}], "front": [],
                  "latency_trust": {}, "constraints": [{"metric": "latency_ms", "max": 6.0, "min": None}],
                  "future": 1}  # before trial counts, hypervolume and its reference point
    back = RunSummary.from_dict({"front": 0, "extra_key": [1]}, old_pareto)
    assert back.objectives == (Objective("top1", "max"),) and back.constraints == (Constraint("latency_ms", 6.0),)
    assert back.hypervolume is None and not back.reference.values and back.trials == TrialCounts()
    assert back.extra == {"extra_key": [1]} and back.to_dict()["extra_key"] == [1]
    assert RunSummary.from_dict(None, None) == RunSummary(hypervolume_from="summary.json")


# ------------------------------------------------------------------------------- one summary, everywhere

FAST = """\
name: fast
seed: 1
""" + TINY_SPACE + """\
evaluators:
  - name: complexity
objectives:
  - {metric: params_m, direction: min, reference: 0.05}
  - {metric: flops_m, direction: min, reference: 2.0}
constraints:
  - {metric: params_m, max: 0.011}
strategy:
  name: random
budget:
  trials: 6
  batch_size: 3
export:
  enabled: false
"""


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A finished run of complexity figures alone (seconds, no training), as the Python API returns it."""
    root = tmp_path_factory.mktemp("artefacts")
    path = root / "fast.yaml"
    path.write_text(FAST + f"output:\n  root: {root / 'runs'}\n")
    return run_experiment(path)


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / "run", ignore=shutil.ignore_patterns(".lock")))


def _report(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_the_api_nas_report_and_the_html_report_show_one_summary(fast_run, tmp_path, capsys):
    summary = fast_run.summary
    assert isinstance(summary, RunSummary) and summary.hypervolume and summary.search is not None
    assert summary.front and summary.trials.ok and summary.trials.infeasible
    run_dir = fast_run.run_dir
    assert json.loads((run_dir / "summary.json").read_text()) == fast_run.outputs == summary.to_dict()
    assert json.loads((run_dir / "pareto.json").read_text()) == json.loads(json.dumps(summary.pareto_dict()))
    read = read_summary(run_dir)
    assert read.to_dict() == summary.to_dict() and read.pareto_dict() == summary.pareto_dict()
    assert read.hypervolume_from == "pareto.json"
    counts = summary.trials
    line = (f"{counts.total} trials: {counts.ok} ok, {counts.infeasible} infeasible, {counts.failed} failed; front "
            f"{len(summary.front)}; hypervolume {summary.hypervolume:.4g}")
    assert line in _report(run_dir, capsys)
    data = collect(run_dir)
    assert data.summary == read
    assert f"<b>{summary.hypervolume:.4g}</b> <span class=muted>(pareto.json)</span>" in render_html(data)

    # all three read the figures the run wrote: change them there and each shows the change
    copy = _copy(run_dir, tmp_path)
    doc = json.loads((copy / "pareto.json").read_text())
    doc["hypervolume"] = 123.0
    (copy / "pareto.json").write_text(json.dumps(doc))
    assert read_summary(copy).hypervolume == 123.0
    assert "; hypervolume 123" in _report(copy, capsys)
    assert "<b>123</b>" in render_html(collect(copy))


def test_a_run_directory_of_an_earlier_version_is_summarised_from_its_journal(fast_run, tmp_path, capsys):
    copy = _copy(fast_run.run_dir, tmp_path)
    summary = fast_run.summary
    doc = json.loads((copy / "pareto.json").read_text())
    # pareto.json as the first versions wrote it: no counts, hypervolume or reference point; trust of old form
    old = {"objectives": doc["objectives"], "front": doc["front"], "constraints": doc["constraints"],
           "latency_trust": {"latency_ms@x": {"networks": 3, "raw": None, "calibrated_heldout": None,
                                              "calibrated": False, "how": None}}}
    (copy / "pareto.json").write_text(json.dumps(old))
    (copy / "summary.json").unlink()
    read = read_summary(copy)
    assert read.hypervolume_from == FROM_JOURNAL and read.hypervolume == pytest.approx(summary.hypervolume)
    assert [t.arch for t in read.front] == [t.arch for t in summary.front] and read.trials == summary.trials
    assert read.search is None and read.exported is None
    assert read.latency_trust == LatencyTrust()  # not describable: the experiment's own (it has no table)
    text = _report(copy, capsys)
    assert f"hypervolume {summary.hypervolume:.4g}" in text and "latency trust" not in text
    page = render_html(collect(copy))
    assert f"({FROM_JOURNAL})" in page and "No latency table in this run." in page

    # summary.json of an earlier version (no search facts): a finished run resumed gives it back as it was
    first = {"front": len(summary.front), "hypervolume": summary.hypervolume, "trials": summary.trials.to_dict()}
    (copy / "summary.json").write_text(json.dumps(first))
    (copy / "pareto.json").write_text(json.dumps(doc))
    resumed = run_experiment(resume=copy)
    assert resumed.evaluated == 0 and resumed.outputs == first
    assert resumed.summary is not None and resumed.summary.search is None
    assert json.loads((copy / "summary.json").read_text()) == first  # left as it was


def test_plan_export_checks_everything_before_anything_is_written(fast_run, tmp_path):
    run_dir, out = fast_run.run_dir, tmp_path / "models"
    with pytest.raises(HwnasError, match=r"^--top-k needs --by METRIC"):
        plan_export(run_dir, out=out, top_k=1)
    with pytest.raises(HwnasError, match=r"^--formats onnx,bogus: unknown export format"):
        plan_export(run_dir, out=out, formats="onnx,bogus")
    with pytest.raises(RunDirectoryError, match="no trained weights"):  # complexity keeps no weights
        plan_export(run_dir, out=out)
    plan = plan_export(run_dir, out=out, formats="onnx", random_init=True)
    assert [t.arch for t in plan.models] == [t.arch for t in fast_run.front]
    assert plan.out_dir == out and plan.formats == ("onnx",)
    assert plan.selection.startswith("Pareto front") and plan.opset == 17
    assert not out.exists()
