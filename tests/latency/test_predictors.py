"""Learned latency predictors (hwnas.latency.predictors); HELP's protocol is tested in tests/benchmarks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from hwnas.latency.predictors import FewShotLatencyPredictor, LatencyRidgePredictor
from hwnas.testing.latency import synthetic_devices


@pytest.fixture(autouse=True)
def _one_blas_thread() -> Iterator[None]:
    """Tiny matrices: BLAS threads only contend (on a busy 2-core machine, 20x slower)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


# ---------------------------------------------------------------------------------------------
# predictors


def test_ridge_predictor_shapes_and_recovers_a_log_linear_latency() -> None:
    rng = np.random.default_rng(0)
    X, sources, _ = synthetic_devices(rng)
    pred = LatencyRidgePredictor().fit(X[:300], sources[:300, 0]).predict(X[300:])
    assert pred.shape == (100,)
    assert np.all(pred > 0)
    np.testing.assert_allclose(pred, sources[300:, 0], rtol=0.08)


def test_fewshot_predictor_learns_a_new_device_from_ten_samples() -> None:
    rng = np.random.default_rng(1)
    X, sources, target = synthetic_devices(rng)
    model = FewShotLatencyPredictor().fit_sources(X, sources, [f"dev{j}" for j in range(5)])
    sample = rng.choice(300, size=10, replace=False)
    pred = model.fit(X[sample], target[sample]).predict(X[300:])
    assert pred.shape == (100,)
    assert spearmanr(pred, target[300:])[0] > 0.97
    assert set(model.source_weights) >= {"dev1", "dev3"}


@pytest.mark.parametrize("kind", ["ridge", "fewshot"])
def test_json_round_trip_gives_identical_predictions(tmp_path: Path, kind: str) -> None:
    rng = np.random.default_rng(2)
    X, sources, target = synthetic_devices(rng)
    if kind == "ridge":
        model = LatencyRidgePredictor().fit(X[:50], target[:50])
        cls = LatencyRidgePredictor
    else:
        model = FewShotLatencyPredictor().fit_sources(X, sources).fit(X[:10], target[:10])
        cls = FewShotLatencyPredictor
    path = tmp_path / "predictor.json"
    model.save(path)
    assert json.loads(path.read_text())["kind"] == cls.kind  # plain JSON, not a pickle
    loaded = cls.load(path)
    assert np.array_equal(loaded.predict(X), model.predict(X))


def test_fewshot_sources_without_target_fit_round_trip(tmp_path: Path) -> None:
    X, sources, target = synthetic_devices(np.random.default_rng(3))
    model = FewShotLatencyPredictor().fit_sources(X, sources)
    model.save(tmp_path / "sources.json")
    loaded = FewShotLatencyPredictor.load(tmp_path / "sources.json")
    with pytest.raises(ValueError, match="not fitted to a target device"):
        loaded.predict(X)
    assert np.array_equal(loaded.fit(X[:12], target[:12]).predict(X), model.fit(X[:12], target[:12]).predict(X))


def test_load_rejects_the_wrong_file_kind(tmp_path: Path) -> None:
    X, _sources, target = synthetic_devices(np.random.default_rng(4))
    LatencyRidgePredictor().fit(X[:40], target[:40]).save(tmp_path / "ridge.json")
    with pytest.raises(ValueError, match="expected a FewShotLatencyPredictor file"):
        FewShotLatencyPredictor.load(tmp_path / "ridge.json")


def test_fits_are_deterministic() -> None:
    X, sources, target = synthetic_devices(np.random.default_rng(5))
    a = FewShotLatencyPredictor().fit_sources(X, sources).fit(X[:20], target[:20]).predict(X)
    b = FewShotLatencyPredictor().fit_sources(X, sources).fit(X[:20], target[:20]).predict(X)
    assert np.array_equal(a, b)
    r1 = LatencyRidgePredictor().fit(X[:60], target[:60]).predict(X)
    r2 = LatencyRidgePredictor().fit(X[:60], target[:60]).predict(X)
    assert np.array_equal(r1, r2)


@pytest.mark.parametrize(
    ("X_rows", "y", "message"),
    [
        (10, np.ones(9), "X has 10 rows but y has 9 values"),
        (2, np.ones(2), "need at least 3 measured architectures"),
        (10, np.r_[np.ones(4), np.nan, np.ones(5)], "y contains NaN at 1 position.*first index 4"),
        (10, np.r_[np.ones(9), -1.0], "positive latencies"),
        (10, np.ones((10, 1)), "y must be 1-D"),
    ],
)
@pytest.mark.parametrize("cls", [LatencyRidgePredictor, FewShotLatencyPredictor])
def test_bad_fit_input_raises_one_clear_value_error(
    cls: type[LatencyRidgePredictor] | type[FewShotLatencyPredictor], X_rows: int, y: np.ndarray, message: str
) -> None:
    X, sources, _ = synthetic_devices(np.random.default_rng(6))
    model = cls() if cls is LatencyRidgePredictor else FewShotLatencyPredictor().fit_sources(X, sources)
    with pytest.raises(ValueError, match=message):
        model.fit(X[:X_rows], y)


def test_bad_predict_and_source_input() -> None:
    X, sources, target = synthetic_devices(np.random.default_rng(7))
    with pytest.raises(ValueError, match="not fitted"):
        LatencyRidgePredictor().predict(X)
    model = LatencyRidgePredictor().fit(X[:40], target[:40])
    with pytest.raises(ValueError, match="fitted on 16 features but X has 15"):
        model.predict(X[:, :15])
    with pytest.raises(ValueError, match="X contains NaN or inf in 1 row"):
        model.predict(np.where(np.arange(16) == 3, np.nan, X[:1]))
    with pytest.raises(ValueError, match="has no source devices"):
        FewShotLatencyPredictor().fit(X[:10], target[:10])
    with pytest.raises(ValueError, match="3 source names for 5 device columns"):
        FewShotLatencyPredictor().fit_sources(X, sources, ["a", "b", "c"])
    with pytest.raises(ValueError, match="X has 400 rows but source_latency_ms has 399"):
        FewShotLatencyPredictor().fit_sources(X, sources[:-1])
    with pytest.raises(ValueError, match="alphas must be"):
        LatencyRidgePredictor(alphas=[0.0])


def test_no_rising_source_falls_back_to_a_ranked_mean() -> None:
    X, sources, _ = synthetic_devices(np.random.default_rng(8))
    model = FewShotLatencyPredictor(own=False).fit_sources(X, sources)
    y = 1.0 / sources[:10, :].mean(axis=1)  # falls wherever every known device rises
    pred = model.fit(X[:10], y).predict(X)
    assert np.all(model.weights_ > 0)
    np.testing.assert_allclose(pred, np.exp(np.log(y).mean()), rtol=0.01)
    assert spearmanr(pred, np.log(sources).mean(axis=1))[0] > 0.9


@pytest.mark.parametrize("seed", [0, 5])
def test_own_model_takes_over_where_no_known_device_explains_the_new_one(seed: int) -> None:
    X, sources, target = synthetic_devices(np.random.default_rng(seed))
    falls = 1.0 / sources.mean(axis=1)  # ranks networks against every known device
    alone = FewShotLatencyPredictor(residual=False, own=False).fit_sources(X, sources).fit(X[:20], falls[:20])
    blended = FewShotLatencyPredictor(residual=False).fit_sources(X, sources).fit(X[:20], falls[:20])
    assert spearmanr(alone.predict(X[300:]), falls[300:])[0] < 0  # the transfer alone ranks it backwards
    assert blended.blend_ < 0.3
    assert spearmanr(blended.predict(X[300:]), falls[300:])[0] > 0.95
    # a device that is a mix of known ones keeps the transfer's ranking
    like = FewShotLatencyPredictor().fit_sources(X, sources).fit(X[:20], target[:20])
    assert spearmanr(like.predict(X[300:]), target[300:])[0] > 0.99


def test_files_without_the_own_model_load_as_transfer_alone() -> None:
    X, sources, target = synthetic_devices(np.random.default_rng(9))
    model = FewShotLatencyPredictor(own=False).fit_sources(X, sources).fit(X[:20], target[:20])
    data = model.to_dict()
    for key in ("own", "own_coef", "own_intercept", "blend"):  # as written before the own model existed
        del data[key]
    assert np.array_equal(FewShotLatencyPredictor.from_dict(data).predict(X), model.predict(X))


@pytest.mark.parametrize(("n", "d"), [(30, 200), (200, 30)])
def test_ridge_loo_matches_a_direct_solve_and_brute_force_leave_one_out(n: int, d: int) -> None:
    from hwnas.latency.predictors import ridge_loo

    rng = np.random.default_rng(11)
    X = rng.integers(0, 3, size=(n, d)).astype(float)
    y = X @ rng.normal(size=d) * 0.05 + rng.normal(size=n)
    alpha, coef, intercept, loo = ridge_loo(X, y, [0.1, 1.0, 10.0])

    def solve(Xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, float]:
        xm, ym = Xs.mean(axis=0), ys.mean()
        c = np.linalg.solve((Xs - xm).T @ (Xs - xm) + alpha * np.eye(d), (Xs - xm).T @ (ys - ym))
        return c, ym - xm @ c

    c, b = solve(X, y)
    np.testing.assert_allclose(coef, c, atol=1e-8)
    assert intercept == pytest.approx(b, abs=1e-8)
    errors = []
    for i in range(n):
        keep = np.arange(n) != i
        ci, bi = solve(X[keep], y[keep])
        errors.append((y[i] - (X[i] @ ci + bi)) ** 2)
    assert loo == pytest.approx(np.mean(errors), rel=1e-6)
