"""The hypervolume reference point is fixed by the experiment, not by each run's own worst point, so that
fronts of different runs compare (issue: fronts were not comparable across runs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hwnas.experiments import run_experiment
from hwnas.experiments.report.front import front_hypervolume
from hwnas.objectives import Constraint, Objective, Trial, hypervolume, pareto_front, reference_point
from hwnas.search_spaces.nb201 import NB201Space
from hwnas.testing.experiments import PIXEL3, nb201_benchmark_yaml


def test_reference_comes_from_the_objective_then_a_constraint_then_the_metric_then_nowhere():
    objectives = [Objective("top1", "max"), Objective("latency_ms", "min"), Objective("params_m", "min", 5.0),
                  Objective("energy_mj", "min"), Objective("score", "max")]
    constraints = [Constraint("latency_ms", max=30.0), Constraint("latency_ms", max=20.0, min=1.0),
                   Constraint("top1", min=50.0), Constraint("params_m", max=3.0)]
    ref = reference_point(objectives, constraints)
    assert ref.values == (50.0, 20.0, 5.0, None, None)  # the tightest bound on the worse side; YAML first
    assert ref.sources[:3] == ("constraints[2].min", "constraints[1].max", "objectives[2].reference")
    assert ref.missing() == ["energy_mj", "score"] and not ref.complete
    with pytest.raises(ValueError, match="energy_mj, score"):
        ref.point()
    natural = reference_point([Objective("top1@cifar100", "max"), Objective("latency_ms", "min", 12.5)])
    assert natural.values == (0.0, 12.5) and "natural bound" in natural.sources[0]
    assert list(natural.point()) == [-0.0, 12.5]  # on the minimise scale
    assert reference_point([Objective("top1", "min")]).values == (None,)  # accuracy minimised: no natural worst


def _trial(n, acc, ms):
    return Trial(n, NB201Space().from_ops((n % 5, 0, 0, 0, 0, 0)), {"top1": acc, "latency_ms": ms})


def test_a_better_front_scores_higher_whatever_else_either_run_found():
    objectives = [Objective("top1", "max"), Objective("latency_ms", "min", 40.0)]
    ref = reference_point(objectives)
    a = [_trial(0, 90.0, 20.0), _trial(1, 80.0, 10.0), _trial(2, 5.0, 39.0)]  # a also found a poor point
    b = [_trial(0, 91.0, 19.0), _trial(1, 81.0, 9.0)]  # b's front dominates a's
    hv_a, hv_b = (front_hypervolume(pareto_front(t, objectives), ref) for t in (a, b))
    assert hv_b > hv_a > 0
    # the old figure (each run's own worst ok point as reference) ranked them the other way round
    own = [hypervolume(np.array([[-t.metrics["top1"], t.metrics["latency_ms"]] for t in pareto_front(ts, objectives)]),
                       np.array([[-t.metrics["top1"], t.metrics["latency_ms"]] for t in ts]).max(0) + 1e-9)
           for ts in (a, b)]
    assert own[0] > own[1]
    assert front_hypervolume(pareto_front(a, [Objective("top1", "max"), Objective("latency_ms", "min")]),
                             reference_point([Objective("top1", "max"), Objective("latency_ms", "min")])) is None




def test_runs_record_their_reference_and_their_hypervolumes_compare(shared_data, tmp_path, caplog):
    path = tmp_path / "exp.yaml"
    objectives = [{"metric": "top1", "direction": "max"}, {"metric": PIXEL3, "direction": "min", "reference": 40}]
    path.write_text(nb201_benchmark_yaml(shared_data, name="ref", seed=1, trials=60, batch_size=10,
                                         objectives=objectives))
    small = run_experiment(path, run_dir=tmp_path / "small", overrides=["budget.trials=20"])
    large = run_experiment(path, run_dir=tmp_path / "large")  # the same seed: its first 20 trials are small's
    assert [t.arch for t in large.trials[:20]] == [t.arch for t in small.trials]
    pareto = [json.loads((r.run_dir / "pareto.json").read_text()) for r in (small, large)]
    for p in pareto:
        natural = "the metric's natural bound (an accuracy is at least 0)"
        assert p["hypervolume_reference"] == {"top1": {"value": 0.0, "from": natural},
                                              "latency_ms@pixel3": {"value": 40.0, "from": "objectives[1].reference"}}
    assert pareto[1]["hypervolume"] >= pareto[0]["hypervolume"] > 0  # more trials: a front at least as good

    path.write_text(nb201_benchmark_yaml(shared_data, name="ref", seed=1, trials=60, batch_size=10))
    with caplog.at_level("WARNING"):
        unreferenced = run_experiment(path, run_dir=tmp_path / "none", overrides=["budget.trials=10"])
    p = json.loads((unreferenced.run_dir / "pareto.json").read_text())
    assert p["hypervolume"] is None and p["hypervolume_reference"]["latency_ms@pixel3"]["value"] is None
    assert "latency_ms@pixel3 has no reference point" in caplog.text
