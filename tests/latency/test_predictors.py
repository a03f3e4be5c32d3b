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
    model = FewShotLatencyPredictor(own=False, correction="cv", scale="log").fit_sources(X, sources)
    y = 1.0 / sources[:10, :].mean(axis=1)  # falls wherever every known device rises
    pred = model.fit(X[:10], y).predict(X)
    assert np.all(model.weights_ > 0)
    np.testing.assert_allclose(pred, np.exp(np.log(y).mean()), rtol=0.01)
    assert spearmanr(pred, np.log(sources).mean(axis=1))[0] > 0.9


@pytest.mark.parametrize("seed", [0, 5])
def test_own_model_takes_over_where_no_known_device_explains_the_new_one(seed: int) -> None:
    X, sources, target = synthetic_devices(np.random.default_rng(seed))
    falls = 1.0 / sources.mean(axis=1)  # ranks networks against every known device
    cv = {"correction": "cv", "scale": "log"}  # the cross-validated correction (the default before the evidence one)
    alone = FewShotLatencyPredictor(residual=False, own=False, **cv).fit_sources(X, sources).fit(X[:20], falls[:20])
    blended = FewShotLatencyPredictor(residual=False, **cv).fit_sources(X, sources).fit(X[:20], falls[:20])
    assert spearmanr(alone.predict(X[300:]), falls[300:])[0] < 0  # the transfer alone ranks it backwards
    assert blended.blend_ < 0.3
    assert spearmanr(blended.predict(X[300:]), falls[300:])[0] > 0.95
    # a device that is a mix of known ones keeps the transfer's ranking
    like = FewShotLatencyPredictor(**cv).fit_sources(X, sources).fit(X[:20], target[:20])
    assert spearmanr(like.predict(X[300:]), target[300:])[0] > 0.99


@pytest.mark.parametrize("seed", [0, 5])
def test_evidence_correction_learns_a_device_unlike_every_known_one(seed: int) -> None:
    """The default correction: the mix's residual as a Gaussian process whose kernels the marginal likelihood
    switches on (here on the log scale: the synthetic devices are log-linear)."""
    X, sources, target = synthetic_devices(np.random.default_rng(seed))
    falls = 1.0 / sources.mean(axis=1)  # ranks networks against every known device
    mix_alone = FewShotLatencyPredictor(correction="cv", residual=False, own=False, scale="log").fit_sources(X, sources)
    assert spearmanr(mix_alone.fit(X[:20], falls[:20]).predict(X[300:]), falls[300:])[0] < 0.5
    model = FewShotLatencyPredictor(own=False, scale="log").fit_sources(X, sources).fit(X[:20], falls[:20])
    assert model.evidence_ is not None and model.evidence_[1] > 0  # the feature kernel is on
    assert spearmanr(model.predict(X[300:]), falls[300:])[0] > 0.95
    # a device that is a mix of known ones keeps the mix's ranking
    like = FewShotLatencyPredictor(scale="log").fit_sources(X, sources).fit(X[:20], target[:20])
    assert spearmanr(like.predict(X[300:]), target[300:])[0] > 0.99
    assert set(like.source_weights) >= {"source1", "source3"}


def test_evidence_residual_switches_on_only_the_kernel_the_data_support() -> None:
    from hwnas.latency.predictors import evidence_residual

    rng = np.random.default_rng(12)
    A, B = rng.normal(size=(30, 4)), rng.normal(size=(30, 5))
    noise = 0.01 * rng.normal(size=30)
    l1, l2, mean, alpha, _ = evidence_residual(A, B, 3.0 + noise)  # a constant and noise: nothing to model
    assert (l1, l2) == (0.0, 0.0) and mean == pytest.approx(3.0 + noise.mean())
    np.testing.assert_allclose(alpha, noise - noise.mean(), atol=1e-12)
    r = A @ np.array([1.0, -2.0, 0.5, 1.5]) + noise  # the first kernel explains it
    l1, l2, mean, alpha, _ = evidence_residual(A, B, r)
    assert l1 > 0 and l2 == 0.0
    assert np.max(np.abs(mean + l1 * A @ A.T @ alpha - r)) < 0.05
    l1, l2, _, _, _ = evidence_residual(A, B, B @ np.array([1.0, -2.0, 0.5, 1.5, 1.0]) + noise)  # the second
    assert l1 == 0.0 and l2 > 0


def test_a_latency_that_sums_unit_costs_is_exact_on_the_ms_scale() -> None:
    """Devices that sum unit costs (LUTs) are linear in ms, not in log-ms: a new one that is a known one at half
    the speed plus a fixed overhead is exact on the default ms scale from 12 samples, not on the log scale."""
    rng = np.random.default_rng(14)
    X = rng.integers(0, 4, size=(400, 30)).astype(float)
    sources = X @ rng.uniform(0.0, 1.0, size=(30, 5)) ** 3 + 0.05
    target = 2 * sources[:, 1] + 1.0

    def mape(scale: str) -> float:
        model = FewShotLatencyPredictor(scale=scale).fit_sources(X, sources).fit(X[:12], target[:12])
        return float(np.mean(np.abs(model.predict(X[300:]) - target[300:]) / target[300:]))

    assert FewShotLatencyPredictor().scale == "ms"
    assert mape("ms") < 0.001 < 0.01 < mape("log")


def test_bad_correction_or_scale_is_named() -> None:
    with pytest.raises(ValueError, match="correction must be one of evidence, cv, got 'bayes'"):
        FewShotLatencyPredictor(correction="bayes")
    with pytest.raises(ValueError, match="scale must be one of log, ms, got 'lin'"):
        FewShotLatencyPredictor(scale="lin")


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
