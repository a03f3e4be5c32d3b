"""``nas run`` with a one-shot strategy: the search, its derived architectures as trials, resume, and bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hwnas.errors import ConfigError
from hwnas.experiments.api import run_experiment
from hwnas.experiments.config import load_experiment
from hwnas.experiments.oneshot import ONE_SHOT_FILE
from hwnas.search_spaces.nb201 import NB201Space

REPO = Path(__file__).resolve().parents[2]


def _yaml(tmp_path: Path, shared: Path, *, strategy: str = "darts", params: str = "targets_ms: [8, 16]",
          space: str = "nb201", space_params: str = "{resolution: 8, channels: 8, cells_per_stage: 1}",
          dataset: str = "dataset: {name: digits, val_fraction: 0.3}", extra_objective: str = "") -> Path:
    text = f"""
name: os
seed: 0
space: {{name: {space}, params: {space_params}}}
{dataset}
evaluators:
  - name: benchmark
    params:
      table: {shared}/help-latency/nb201_latency.csv
      columns: {{"latency_ms@pixel3": pixel3}}
  - name: train
    params: {{epochs: 1, batch_size: 64}}
objectives:
  - {{metric: top1, direction: max}}
  - {{metric: "latency_ms@pixel3", direction: min, reference: 40}}
{extra_objective}
strategy:
  name: {strategy}
  params: {{steps: 12, warmup_steps: 4, batch_size: 32, relinearize_every: 4, {params}}}
budget: {{trials: 6, batch_size: 3}}
export: {{enabled: false}}
"""
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path


def test_a_target_sweep_runs_lands_and_resumes_without_searching_again(tmp_path, shared_data):
    path = _yaml(tmp_path, shared_data)
    run_dir = tmp_path / "run"
    result = run_experiment(path, run_dir=run_dir)
    state = json.loads((run_dir / ONE_SHOT_FILE).read_text())
    searches = [state["searches"][k] for k in ("0", "1")]
    assert [s["overrides"] for s in searches] == [{"target_ms": 8.0}, {"target_ms": 16.0}]
    derived = [s["archs"][0] for s in searches]
    # the derived cells are the run's trials, evaluated by the configured evaluators (published latency, training)
    assert {json.dumps(t.arch.to_dict(), sort_keys=True) for t in result.trials} == \
        {json.dumps(d, sort_keys=True) for d in derived}
    assert all(t.status == "ok" and "top1" in t.metrics for t in result.trials)
    for s in searches:
        rec = s["record"]
        got = next(t.metrics["latency_ms@pixel3"] for t in result.trials if t.arch.to_dict() == s["archs"][0])
        assert rec["derived_ms"] == pytest.approx(got)
        if rec["landed"]:
            assert abs(got / rec["target_ms"] - 1) <= 0.05 + 1e-9
    assert any(s["record"]["landed"] for s in searches)
    assert result.stopped_early and "no more architectures" in result.stopped_early
    assert (run_dir / "oneshot.png").stat().st_size > 0
    # every trial is a cell as written (a latency objective: no isomorphism merging)
    assert all(t.arch == NB201Space(merge_isomorphic=False).canonicalize(t.arch) for t in result.trials)

    before = (run_dir / ONE_SHOT_FILE).read_bytes()
    again = run_experiment(resume=run_dir)
    assert (run_dir / ONE_SHOT_FILE).read_bytes() == before  # read back, not searched again
    assert again.evaluated == 0 and again.reused == len(result.trials)


def test_an_interrupted_sweep_runs_only_its_missing_searches(tmp_path, shared_data):
    path = _yaml(tmp_path, shared_data, params="latency_weights: [0, 0.5]")
    full = tmp_path / "full"
    run_experiment(path, run_dir=full)
    whole = json.loads((full / ONE_SHOT_FILE).read_text())
    # a run that stopped after its first search: the file holds only that one
    part = tmp_path / "part"
    run_experiment(path, run_dir=part)
    state = json.loads((part / ONE_SHOT_FILE).read_text())
    del state["searches"]["1"]
    (part / ONE_SHOT_FILE).write_text(json.dumps(state))
    (part / "trials.jsonl").write_text("")
    run_experiment(resume=part)
    redone = json.loads((part / ONE_SHOT_FILE).read_text())
    assert redone["searches"]["0"] == state["searches"]["0"]
    # the missing search reproduces the uninterrupted one (same seed, same warm-up)
    assert redone["searches"]["1"]["archs"] == whole["searches"]["1"]["archs"]
    assert redone["searches"]["1"]["logits"] == whole["searches"]["1"]["logits"]


def test_a_foreign_or_corrupt_oneshot_file_is_refused_naming_it(tmp_path, shared_data):
    path = _yaml(tmp_path, shared_data, params="targets_ms: [8]")
    run_dir = tmp_path / "run"
    run_experiment(path, run_dir=run_dir)
    state = json.loads((run_dir / ONE_SHOT_FILE).read_text())
    (run_dir / "trials.jsonl").write_text("")
    (run_dir / ONE_SHOT_FILE).write_text(json.dumps({**state, "fingerprint": "0" * 16}))
    with pytest.raises(ConfigError, match=r"oneshot\.json: its searches were made under another config"):
        run_experiment(resume=run_dir)
    (run_dir / ONE_SHOT_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match=r"oneshot\.json: cannot be read back"):
        run_experiment(resume=run_dir)
    assert (run_dir / ONE_SHOT_FILE).read_text() == "{not json"  # nothing overwritten


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"space": "convnext", "space_params": "{}"}, "'darts' cannot relax space 'convnext'"),
    ({"dataset": ""}, "trains a supernet and needs a dataset section"),
    ({"params": "latency_weight: 1.0, latency_metric: latency_ms@jetson"}, "no evaluator provides 'latency_ms@jetson'"),
    ({"params": "targets_ms: [8], latency_metric: top1"}, None),
    ({"params": "targets_ms: [8], latency_weights: [1]"}, "not both"),
    ({"params": "targets_ms: [8], steps: 0"}, "steps"),
    ({"strategy": "dartz"}, "did you mean 'darts'"),
], ids=["unrelaxable-space", "no-dataset", "unknown-metric", "metric-not-latency", "two-sweeps", "zero-steps",
        "misspelt"])
def test_bad_one_shot_configs_are_refused_before_anything_runs(tmp_path, shared_data, kwargs, match):
    path = _yaml(tmp_path, shared_data, **kwargs)
    if match is None:  # top1 comes from the expensive train evaluator: it cannot price a latency term
        match = "'top1' comes from the 'train' evaluator, which is expensive"
    with pytest.raises(ConfigError, match=match):
        load_experiment(path)


def test_a_target_below_the_fastest_cell_stops_before_training(tmp_path, shared_data):
    path = _yaml(tmp_path, shared_data, params="targets_ms: [0.001]")
    with pytest.raises(ConfigError, match=r"strategy\.params\.targets_ms\[0\]: target_ms 0.001 is below the fastest "
                                          r"member of space 'nb201' \("):
        run_experiment(path, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before the run's folder was made


def test_nas_validate_finds_an_unreachable_target_and_a_budget_short_of_the_searches(tmp_path, shared_data, capsys):
    from hwnas.cli import main

    path = _yaml(tmp_path, shared_data, params="targets_ms: [8, 0.001, 16]")
    path.write_text(path.read_text().replace("budget: {trials: 6", "budget: {trials: 2"))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "error: 2 problems:" in err
    assert "budget.trials: 2 is fewer than the 3 one-shot searches: the architectures of the last 1" in err
    assert re.search(r"exp\.yaml:\d+: strategy\.params\.targets_ms\[1\]: target_ms 0\.001 is below the fastest", err)


def test_the_example_experiment_validates(monkeypatch, shared_data):
    if (REPO.parent / "shared" / "data").resolve() != shared_data.resolve():
        pytest.skip("the example's paths assume the data at ../shared/data")
    monkeypatch.chdir(REPO)
    exp = load_experiment(REPO / "experiments" / "oneshot_nb201.yaml")
    assert exp.config.strategy.name == "darts" and exp.params["strategy"]["targets_ms"] == [8, 14, 20]
    assert exp.params["space"]["merge_isomorphic"] is False  # a latency objective: cells as written


@pytest.fixture(scope="module")
def fbnet_table(tmp_path_factory) -> Path:
    """A real latency table of the FBNet space for digits (1 channel, 10 classes), profiled on this CPU with
    onnxruntime (a quick protocol: the test needs a table that covers every op, not a precise one)."""
    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.latency.tables import profile_space
    from hwnas.search_spaces import SPACES

    path = tmp_path_factory.mktemp("fbnet") / "fbnet_cpu.json"
    space = SPACES.create("fbnet", {"in_chans": 1, "num_classes": 10})
    profile_space(space, BACKENDS.get("onnxruntime")(threads=1), device="this-cpu", out=path,
                  protocol=MeasureProtocol(warmup=1, repeats=2))
    return path


@pytest.mark.parametrize(("strategy", "steps"), [("fbnet", 2), ("gdas", 4)])
def test_fbnet_and_gdas_search_the_fbnet_space_with_a_latency_budget(tmp_path, fbnet_table, strategy, steps):
    # fbnet's soft mixture computes all 9 ops of all 22 layers per step (about 2 s a step here): few steps
    from hwnas.latency.tables import LatencyTable
    from hwnas.search_spaces import SPACES

    table = LatencyTable.load(fbnet_table)
    space = SPACES.create("fbnet", {"in_chans": 1, "num_classes": 10})
    lo = table.sum_ms(space.layers(space.from_op_indices([8] * 22)))  # every layer skip: near the fastest
    hi = table.sum_ms(space.layers(space.largest()))
    target = round(lo + 0.5 * (hi - lo), 3)
    path = tmp_path / "exp.yaml"
    path.write_text(f"""
name: os-fbnet
seed: 0
space: {{name: fbnet}}
dataset: {{name: digits, val_fraction: 0.3, max_images: 300}}
evaluators:  # the derived network's trial is priced by the table (training trials: the nb201 tests above)
  - name: latency_table
    params: {{table: {fbnet_table}, calibrated: false}}
objectives:
  - {{metric: "latency_ms@this-cpu", direction: min}}
strategy:
  name: {strategy}
  params: {{steps: {steps}, warmup_steps: 1, batch_size: 8, relinearize_every: 2, targets_ms: [{target}]}}
budget: {{trials: 2, batch_size: 1}}
export: {{enabled: false}}
""")
    run_dir = tmp_path / "run"
    result = run_experiment(path, run_dir=run_dir)
    state = json.loads((run_dir / ONE_SHOT_FILE).read_text())
    (search,) = state["searches"].values()
    (trial,) = result.trials
    assert trial.status == "ok" and trial.arch.to_dict() == search["archs"][0]
    got = trial.metrics["latency_ms@this-cpu"]
    assert search["record"]["derived_ms"] == pytest.approx(got)
    # the table is additive, so the knapsack lands the derived network within 5 % of the target by the table
    assert search["record"]["landed"] and abs(got / target - 1) <= 0.05 + 1e-9


def test_a_landing_metric_measures_and_corrects_the_derived_network(tmp_path, fbnet_table):
    from hwnas.latency.tables import LatencyTable
    from hwnas.search_spaces import SPACES

    table = LatencyTable.load(fbnet_table)
    space = SPACES.create("fbnet", {"in_chans": 1, "num_classes": 10})
    # a quarter of the way up the table's range: above the fastest member by the table, which the strategy checks
    # before training (half of the mid-range point, as this test once aimed, fell below it when the machine's
    # timings made the range narrow: the table is profiled by a fixture, on this machine)
    lo = table.sum_ms(space.layers(space.from_op_indices([8] * 22)))
    hi = table.sum_ms(space.layers(space.largest()))
    target = round(lo + 0.25 * (hi - lo), 3)
    path = tmp_path / "exp.yaml"
    path.write_text(f"""
name: os-landing
seed: 0
space: {{name: fbnet}}
dataset: {{name: digits, val_fraction: 0.3, max_images: 300}}
evaluators:
  - name: latency_table
    params: {{table: {fbnet_table}, calibrated: false}}
  - name: ort_latency
    params: {{device: cpu-measured, warmup: 3, repeats: 20}}
objectives:
  - {{metric: "latency_ms@this-cpu", direction: min}}
  - {{metric: "latency_ms@cpu-measured", direction: min}}
strategy:
  name: gdas
  params: {{steps: 2, warmup_steps: 1, batch_size: 8, targets_ms: [{target}],
            latency_metric: "latency_ms@this-cpu", landing_metric: "latency_ms@cpu-measured"}}
budget: {{trials: 2, batch_size: 1}}
export: {{enabled: false}}
""")
    run_dir = tmp_path / "run"
    result = run_experiment(path, run_dir=run_dir)
    (search,) = json.loads((run_dir / ONE_SHOT_FILE).read_text())["searches"].values()
    rec = search["record"]
    assert rec["landed_by"] == "measurement" and rec["landing"]
    assert rec["landing"][0]["model_target_ms"] == pytest.approx(target)
    kept = min(rec["landing"], key=lambda r: abs(r["measured_ms"] / target - 1))
    assert rec["measured_ms"] == kept["measured_ms"]
    assert rec["landed"] == (abs(kept["measured_ms"] / target - 1) <= 0.05)
    (trial,) = result.trials
    assert trial.arch.arch_id == kept["arch_id"] and trial.metrics["latency_ms@this-cpu"] == pytest.approx(
        rec["derived_ms"], abs=1e-5)
    # measured by ort_latency side by side with the space's largest member, 5 timings a network
    rounds = len({row["round"] for row in rec["landing"]})
    assert rec["landing_anchor"] == space.largest().arch_id and rec["anchor_timings"] == 5 * rounds
    for row in rec["landing"]:
        assert row["measured_ms"] == pytest.approx(row["ratio_to_anchor"] * rec["anchor_ms"], abs=2e-6)


def test_a_landing_metric_from_no_evaluator_is_refused(tmp_path, shared_data):
    path = _yaml(tmp_path, shared_data, params="targets_ms: [8], landing_metric: latency_ms@board")
    with pytest.raises(ConfigError, match="landing_metric: no evaluator provides 'latency_ms@board'"):
        load_experiment(path)
