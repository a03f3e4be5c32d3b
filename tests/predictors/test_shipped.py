"""The shipped predictors (gbt, mlp, gp, linear, ensemble), the rank target, and their refusals of bad input."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from hwnas.predictors import PREDICTORS, load_predictor
from hwnas.predictors.base import RankTarget, pack_array, unpack_array
from hwnas.predictors.gbt import GBTPredictor
from hwnas.predictors.mlp import MLPPredictor


def _data(n: int = 120, width: int = 12, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, width))
    y = X @ rng.standard_normal(width) + np.sin(4 * X[:, 0])
    return X, y


def test_gbt_walk_equals_scikit_learn_predict():
    from sklearn.ensemble import GradientBoostingRegressor

    X, y = _data()
    params = {"n_estimators": 60, "max_depth": 3, "target": "raw"}
    ours = GBTPredictor(rng=np.random.default_rng(3), **params).fit(X, y)
    p = ours.params
    ref = GradientBoostingRegressor(n_estimators=p.n_estimators, max_depth=p.max_depth, learning_rate=p.learning_rate,
                                    subsample=p.subsample, max_features=p.max_features,
                                    random_state=ours.seed).fit(X, y)
    X_new, _ = _data(5000, seed=1)
    np.testing.assert_allclose(ours.predict(X_new), ref.predict(X_new), rtol=0, atol=1e-9)


def test_linear_equals_scikit_learn_bayesian_ridge_and_survives_a_round_trip(tmp_path):
    """Mean and predictive spread are BayesianRidge's own (noise included); a saved file predicts the same."""
    from sklearn.linear_model import BayesianRidge

    from hwnas.predictors.linear import LinearPredictor

    X, y = _data()
    ours = LinearPredictor(rng=np.random.default_rng(0)).fit(X, y)
    mean, std = BayesianRidge().fit(X, y).predict(_data(500, seed=1)[0], return_std=True)
    X_new = _data(500, seed=1)[0]
    np.testing.assert_allclose(ours.predict(X_new), mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ours.predict_std(X_new), std, rtol=1e-9, atol=0)
    ours.save(tmp_path / "linear.json")
    again = load_predictor(tmp_path / "linear.json")
    np.testing.assert_array_equal(again.predict(X_new), ours.predict(X_new))


def test_linear_is_exact_on_a_sum_of_per_gene_costs_where_trees_are_not():
    """A lookup-table metric (a sum over 22 layers of 9 choices, one-hot features) is predicted exactly beyond the
    training range once the model has seen more rows than features; the trees cannot go past what they saw."""
    rng = np.random.default_rng(0)
    layers, choices = 22, 9
    cost = rng.random((layers, choices))

    def rows(n: int) -> tuple[np.ndarray, np.ndarray]:
        ops = rng.integers(choices, size=(n, layers))
        X = np.zeros((n, layers * choices))
        X[np.arange(n)[:, None], np.arange(layers) * choices + ops] = 1.0
        return X, cost[np.arange(layers), ops].sum(axis=1)

    X, y = rows(400)
    X_new, y_new = rows(200)
    extreme = np.zeros((1, layers * choices))
    extreme[0, np.arange(layers) * choices + cost.argmax(axis=1)] = 1.0  # the costliest network: far beyond X
    linear = PREDICTORS.create("linear", None, rng=np.random.default_rng(0)).fit(X, y)
    np.testing.assert_allclose(linear.predict(X_new), y_new, atol=1e-3)
    np.testing.assert_allclose(linear.predict(extreme), [cost.max(axis=1).sum()], rtol=1e-4)
    assert float(linear.predict_std(X_new).max()) < 1e-2
    trees = PREDICTORS.create("gbt", {"n_estimators": 200}, rng=np.random.default_rng(0)).fit(X, y)
    assert float(trees.predict(extreme)[0]) <= y.max() + 1e-9 < cost.max(axis=1).sum()


def test_rank_target_keeps_order_and_units():
    rng = np.random.default_rng(0)
    y = np.concatenate([rng.normal(90, 2, 50), np.full(5, 10.0)])  # a long tail, with ties
    rt = RankTarget()
    u = rt.fit(y)
    np.testing.assert_allclose(rt.inverse(u), y)  # training quantiles map back to their values
    grid = np.linspace(-0.5, 1.5, 401)
    mapped = rt.inverse(grid)
    assert np.all(np.diff(mapped) >= 0)
    outside = (grid < u.min()) | (grid > u.max())
    assert np.all(np.diff(mapped[outside][grid[outside] > 1]) > 0)  # no ties created past the training range
    again = RankTarget.from_state(json.loads(json.dumps(rt.state())))
    np.testing.assert_array_equal(again.inverse(grid), mapped)


@pytest.mark.parametrize("name", ["gbt", "mlp"])
def test_rank_target_ranks_a_long_tailed_target_better_than_raw(name):
    """A signal whose tail is a few outliers: fitting quantiles ranks the bulk better (measured, not assumed)."""
    from scipy.stats import kendalltau

    rng = np.random.default_rng(5)
    X = rng.random((400, 8))
    score = X @ np.array([3, 2, 1, 1, 0.5, 0.5, 0.2, 0.1])
    y = np.where(X[:, 7] < 0.1, 10.0 + rng.normal(0, 3, 400), 80 + score + rng.normal(0, 0.3, 400))
    fast = {"n_estimators": 200} if name == "gbt" else {"epochs": 100, "hidden": [64, 64]}
    taus, preds = {}, {}
    for target in ("raw", "rank"):
        model = PREDICTORS.create(name, {**fast, "target": target}, rng=np.random.default_rng(0)).fit(X[:150], y[:150])
        preds[target] = model.predict(X[150:])
        taus[target] = kendalltau(preds[target], y[150:])[0]
    assert not np.allclose(preds["raw"], preds["rank"]), "target: rank made no difference"
    assert taus["rank"] > 0.6, taus
    assert taus["rank"] >= taus["raw"] - 0.02, taus


@pytest.mark.parametrize("name", ["gbt", "mlp", "gp", "linear", "ensemble"])
def test_too_few_rows_says_how_many_are_needed(name):
    X, y = _data(2)
    with pytest.raises(ValueError, match=r"2 architecture\(s\) to fit on; it needs at least \d+"):
        PREDICTORS.create(name, None, rng=np.random.default_rng(0)).fit(X, y)


@pytest.mark.parametrize("name", ["gbt", "mlp", "gp", "linear", "ensemble"])
def test_constant_targets_are_refused(name):
    X, _ = _data(40)
    with pytest.raises(ValueError, match=r"every target is 0\.5"):
        PREDICTORS.create(name, None, rng=np.random.default_rng(0)).fit(X, np.full(40, 0.5))


def test_nan_targets_and_width_mismatch_are_named():
    X, y = _data(40)
    y[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        GBTPredictor(rng=np.random.default_rng(0)).fit(X, y)
    model = GBTPredictor(rng=np.random.default_rng(0), n_estimators=10).fit(*_data(40))
    with pytest.raises(ValueError, match="expected 12 features"):
        model.predict(np.zeros((2, 30)))


def test_saved_files_of_another_kind_version_or_format_are_refused(tmp_path):
    model = GBTPredictor(rng=np.random.default_rng(0), n_estimators=10).fit(*_data(40))
    path = tmp_path / "gbt.json"
    model.save(path)
    with pytest.raises(ValueError, match="holds a 'gbt' predictor, not 'mlp'"):
        MLPPredictor.load(path)
    data = json.loads(path.read_text())
    data["version"] = 99
    (tmp_path / "v99.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="format version 99"):
        load_predictor(tmp_path / "v99.json")
    (tmp_path / "p.pkl").write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(ValueError, match="not JSON"):
        load_predictor(tmp_path / "p.pkl")
    data = json.loads(path.read_text())
    data["state"]["nodes"]["left"]["data"] = "!!!"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="malformed"):
        load_predictor(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_predictor(tmp_path / "missing.json")
    assert np.array_equal(load_predictor(path).predict(_data(40)[0]), model.predict(_data(40)[0]))


def test_packed_arrays_round_trip_and_refuse_objects():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(unpack_array(json.loads(json.dumps(pack_array(a)))), a)
    with pytest.raises(ValueError, match="not numeric"):
        unpack_array({"dtype": "|O", "shape": [1], "data": ""})


def test_ensemble_members_and_spread():
    X, y = _data(80)
    ens = PREDICTORS.create("ensemble", {"members": ["gbt", "mlp"], "n_members": 4,
                                         "member_params": {"mlp": {"epochs": 30, "hidden": [32]},
                                                           "gbt": {"n_estimators": 40}}},
                            rng=np.random.default_rng(0)).fit(X, y)
    assert [m.name for m in ens.members] == ["gbt", "mlp", "gbt", "mlp"]
    std = ens.predict_std(_data(30, seed=2)[0])
    assert np.all(std > 0)
    with pytest.raises(ValueError, match="not among members"):
        PREDICTORS.create("ensemble", {"members": ["gbt"], "member_params": {"mlp": {}}}, rng=np.random.default_rng(0))
    from hwnas.errors import ConfigError

    with pytest.raises((ValueError, ConfigError), match="cannot be ensembles"):
        PREDICTORS.create("ensemble", {"members": ["ensemble"]}, rng=np.random.default_rng(0))


@pytest.mark.parametrize("name", ["gp", "linear"])
def test_rank_target_spread_is_in_the_targets_units(name):
    """With ``target: rank`` the model is fitted on quantiles, which do not change when the targets are scaled; its
    spread must come back through the map's slope, so scaling the targets by 100 scales predict_std by 100."""
    X, y = _data(60)
    X_new = _data(40, seed=1)[0]
    spreads = [PREDICTORS.create(name, {"target": "rank"}, rng=np.random.default_rng(0)).fit(X, scale * y)
               .predict_std(X_new) for scale in (1.0, 100.0)]
    assert float(spreads[0].min()) > 0
    np.testing.assert_allclose(spreads[1], 100.0 * spreads[0], rtol=1e-6)
