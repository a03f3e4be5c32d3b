"""Measured metrics as predictor features (``metric:NAME``): zero-cost proxies from a journal, computed in a run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hwnas.cli import main
from hwnas.errors import ConfigError
from hwnas.predictors import featurize, parse_features
from hwnas.search_spaces import SPACES

SPACE = """space:
  name: mbv3
  params:
    resolution: 16
    stem_channels: 8
    head_channels: 16
    stages:
      - {channels: 4, stride: 2, depths: [1, 2]}
      - {channels: 8, stride: 2, depths: [1, 2]}
dataset: {name: digits, val_fraction: 0.4}
"""


def test_metric_parts_are_columns_of_the_given_metrics():
    space = SPACES.create("nb201", {})
    archs = [space.sample(np.random.default_rng(i)) for i in range(3)]
    metrics = [{"zc_synflow": float(i), "other": 9.0} for i in range(3)]
    X = featurize(space, archs, "encode+metric:zc_synflow", metrics)
    np.testing.assert_array_equal(X[:, -1], [0.0, 1.0, 2.0])
    assert X.shape[1] == featurize(space, archs, "encode").shape[1] + 1
    with pytest.raises(ConfigError, match="none are given here"):
        featurize(space, archs, "encode+metric:zc_synflow")
    with pytest.raises(ConfigError, match=f"{archs[1].arch_id} has no zc_naswot"):
        featurize(space, archs, "metric:zc_naswot", [{"zc_naswot": 1.0}, {}, {"zc_naswot": 2.0}])
    with pytest.raises(ConfigError, match="names no metric"):
        parse_features("encode+metric:")


def test_guided_strategies_refuse_metric_features():
    from hwnas.objectives import Objective
    from hwnas.strategies import STRATEGIES

    with pytest.raises(ConfigError, match="not measured yet"):
        STRATEGIES.get("predictor_guided")(space=SPACES.create("nb201", {}), objectives=[Objective("a", "max")],
                                           constraints=[], rng=np.random.default_rng(0), features="cell+metric:x")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_zero_cost_features_from_a_journal_are_computed_again_in_a_run(tmp_path):
    """Fit on a run's zc_synflow (+ encoding) -> params_m; a second run's predictor evaluator computes zc itself."""
    from hwnas.experiments import run_experiment
    from hwnas.experiments.journal import read_trials
    from hwnas.predictors import load_predictor

    first = _write(tmp_path / "zc.yaml", f"""name: zc
seed: 0
{SPACE}
evaluators:
  - name: complexity
  - name: zero_cost
    params: {{proxies: [synflow], batch_size: 16}}
objectives:
  - {{metric: params_m, direction: min}}
strategy: {{name: random}}
budget: {{trials: 10, batch_size: 10}}
export: {{enabled: false}}
""")
    run_experiment(first, run_dir=tmp_path / "zc_run")
    pred_file = tmp_path / "p.json"
    assert main(["predictor", "fit", "--run", str(tmp_path / "zc_run"), "--target", "params_m", "--predictor", "gbt",
                 "--params", '{"n_estimators": 30}', "--features", "encode+metric:zc_synflow", "--folds", "0",
                 "-o", str(pred_file)]) == 0
    assert json.loads(pred_file.read_text())["meta"]["features"] == "encode+metric:zc_synflow"
    second = _write(tmp_path / "use.yaml", f"""name: use
seed: 0
{SPACE}
evaluators:
  - name: complexity
  - name: predictor
    params: {{file: "{pred_file}", metric: params_pred}}
objectives:
  - {{metric: params_pred, direction: min}}
strategy: {{name: random}}
budget: {{trials: 10, batch_size: 10}}
export: {{enabled: false}}
""")
    run_experiment(second, run_dir=tmp_path / "use_run")
    zc = {t.arch.arch_id: t.metrics for t in read_trials(tmp_path / "zc_run")}
    used = read_trials(tmp_path / "use_run")
    assert [t.arch.arch_id for t in used] == list(zc)  # same seed, same strategy: the same architectures
    space = SPACES.create("mbv3", {"resolution": 16, "stem_channels": 8, "head_channels": 16, "stages": [
        {"channels": 4, "stride": 2, "depths": [1, 2]}, {"channels": 8, "stride": 2, "depths": [1, 2]}]})
    X = featurize(space, [t.arch for t in used], "encode+metric:zc_synflow", [zc[t.arch.arch_id] for t in used])
    np.testing.assert_allclose([t.metrics["params_pred"] for t in used], load_predictor(pred_file).predict(X))
    # without a dataset the evaluator cannot compute the proxies: the experiment does not build
    no_data = _write(tmp_path / "nodata.yaml", second.read_text().replace(
        "dataset: {name: digits, val_fraction: 0.4}\n", ""))
    assert main(["validate", str(no_data)]) == 2


def test_refit_with_zero_cost_features_scores_each_architecture_once(tmp_path):
    """A refitting predictor evaluator with zc features: the proxies of an evaluated architecture are reused."""
    from hwnas.experiments import load_experiment
    from hwnas.objectives import Trial
    from hwnas.predictors import PREDICTORS

    space = SPACES.create("mbv3", {"resolution": 16, "stem_channels": 8, "head_channels": 16, "stages": [
        {"channels": 4, "stride": 2, "depths": [1, 2]}, {"channels": 8, "stride": 2, "depths": [1, 2]}]})
    archs = [space.sample(np.random.default_rng(i)) for i in range(12)]
    metrics = [{"zc_synflow": float(i % 5), "params_m": float(i)} for i in range(12)]
    pred_file = tmp_path / "p.json"
    model = PREDICTORS.create("gbt", {"n_estimators": 20}, rng=np.random.default_rng(0))
    model.fit(featurize(space, archs, "encode+metric:zc_synflow", metrics), [m["params_m"] for m in metrics])
    model.meta = {"space": "mbv3", "features": "encode+metric:zc_synflow", "target": "params_m"}
    model.save(pred_file)
    cfg = _write(tmp_path / "refit.yaml", f"""name: refit_zc
seed: 3
{SPACE}
evaluators:
  - name: predictor
    params: {{file: "{pred_file}", metric: params_pred, refit_every: 8, refit_on: params_m}}
  - name: complexity      # provides params_m, the metric the predictor is refitted on
objectives:
  - {{metric: params_pred, direction: min}}
strategy: {{name: random}}
budget: {{trials: 12}}
""")
    ev = load_experiment(cfg).evaluators[0]
    calls = []
    score_one = ev._zc.score_one
    ev._zc.score_one = lambda arch: calls.append(arch.arch_id) or score_one(arch)
    first = ev.evaluate(archs[:8])
    assert len(calls) == 8
    ev.observe([Trial(i, a, {**m, "params_m": float(i)}) for i, (a, m) in enumerate(zip(archs[:8], first))])
    assert len(calls) == 8 and ev.refits == 1  # refitted on the 8 without scoring them again
    X = featurize(space, archs[:8], "encode+metric:zc_synflow", [ev._zc.score_one(a) for a in archs[:8]])
    refit = PREDICTORS.create("gbt", model.params.model_dump(), rng=np.random.default_rng([3, 0]))
    refit.fit(X, np.arange(8.0))
    later = ev.evaluate(archs[8:])
    X_later = featurize(space, archs[8:], "encode+metric:zc_synflow", [ev._zc.score_one(a) for a in archs[8:]])
    np.testing.assert_allclose([m["params_pred"] for m in later], refit.predict(X_later))
