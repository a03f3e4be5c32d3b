"""The Predictor protocol and its shipped suite, exercised on small reference predictors written here.

The registry may be empty; the suite runs for real on the references, and each deliberately broken
variant shows the rule that catches it.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hwnas.predictors import (
    PREDICTORS,
    Predictor,
    PredictorParams,
    UncertainPredictor,
    as_feature_matrix,
    as_target_vector,
)
from hwnas.predictors.metrics import spearman_rho as spearman
from hwnas.search_spaces import SPACES
from hwnas.testing import check_predictor


class RidgeReference:
    """Ridge regression on the encoding (closed form), saved as JSON."""

    Params = PredictorParams

    def __init__(self, *, rng: np.random.Generator | None = None, alpha: float = 1.0) -> None:
        self.alpha = alpha
        self.coef: np.ndarray | None = None
        self.intercept = 0.0

    def _solve(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        mu_x, mu_y = X.mean(axis=0), y.mean()
        Xc = X - mu_x
        coef = np.linalg.solve(Xc.T @ Xc + self.alpha * np.eye(X.shape[1]), Xc.T @ (y - mu_y))
        return coef, float(mu_y - mu_x @ coef)

    def fit(self, X: np.ndarray, y: np.ndarray) -> RidgeReference:
        X = as_feature_matrix(X, owner="ridge")
        y = as_target_vector(y, n_rows=X.shape[0], owner="ridge")
        self.coef, self.intercept = self._solve(X, y)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        if self.coef is None:
            raise RuntimeError("ridge: predict() before fit()")
        return as_feature_matrix(X, n_features=self.coef.shape[0], owner="ridge") @ self.coef + self.intercept

    def save(self, path: str | Path) -> None:
        assert self.coef is not None
        payload = {"alpha": self.alpha, "coef": self.coef.tolist(), "intercept": self.intercept}
        Path(path).write_text(json.dumps(payload))

    @classmethod
    def load(cls, path: str | Path) -> RidgeReference:
        data = json.loads(Path(path).read_text())
        out = cls(alpha=data["alpha"])
        out.coef, out.intercept = np.asarray(data["coef"], dtype=float), float(data["intercept"])
        return out


class BootstrapEnsembleReference(RidgeReference):
    """Ridge models on bootstrap resamples drawn from the seeded generator; std across members; safetensors."""

    def __init__(self, *, rng: np.random.Generator, alpha: float = 1.0, members: int = 5) -> None:
        super().__init__(alpha=alpha)
        self.rng = rng
        self.members = members
        self.coefs: np.ndarray | None = None
        self.intercepts: np.ndarray | None = None

    def fit(self, X: np.ndarray, y: np.ndarray) -> BootstrapEnsembleReference:
        X = as_feature_matrix(X, owner="ensemble")
        y = as_target_vector(y, n_rows=X.shape[0], owner="ensemble")
        fits = [self._solve(X[i], y[i]) for i in (self._draw(len(y)) for _ in range(self.members))]
        self.coefs = np.stack([c for c, _ in fits])
        self.intercepts = np.array([b for _, b in fits])
        return self

    def _draw(self, n: int) -> np.ndarray:
        return self.rng.integers(n, size=n)

    def _members(self, X: np.ndarray) -> np.ndarray:
        if self.coefs is None or self.intercepts is None:
            raise RuntimeError("ensemble: predict() before fit()")
        X = as_feature_matrix(X, n_features=self.coefs.shape[1], owner="ensemble")
        return X @ self.coefs.T + self.intercepts

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self._members(X).mean(axis=1)

    def predict_std(self, X: np.ndarray) -> np.ndarray:
        return self._members(X).std(axis=1)

    def save(self, path: str | Path) -> None:
        from safetensors.numpy import save_file

        assert self.coefs is not None and self.intercepts is not None
        save_file({"coefs": self.coefs, "intercepts": self.intercepts}, str(path), metadata={"alpha": repr(self.alpha)})

    @classmethod
    def load(cls, path: str | Path) -> BootstrapEnsembleReference:
        from safetensors.numpy import load_file

        data = load_file(str(path))
        out = cls(rng=np.random.default_rng(0), members=data["coefs"].shape[0])
        out.coefs, out.intercepts = data["coefs"], data["intercepts"]
        return out


# -- deliberately broken variants, each caught by one rule of the suite ----------------------------


class PicklingRidge(RidgeReference):
    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(pickle.dumps({"coef": self.coef, "intercept": self.intercept}))

    @classmethod
    def load(cls, path: str | Path) -> PicklingRidge:
        data = pickle.loads(Path(path).read_bytes())
        out = cls()
        out.coef, out.intercept = data["coef"], data["intercept"]
        return out


class ConstantPredictor(RidgeReference):
    def fit(self, X: np.ndarray, y: np.ndarray) -> ConstantPredictor:
        super().fit(X, y)
        self.coef = np.zeros_like(self.coef)
        self.intercept = float(np.mean(y))
        return self


class UnseededEnsemble(BootstrapEnsembleReference):
    def _draw(self, n: int) -> np.ndarray:
        return np.random.default_rng().integers(n, size=n)


class LossySave(RidgeReference):
    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"alpha": self.alpha, "coef": np.round(self.coef, 2).tolist(),
                                          "intercept": round(self.intercept, 2)}))


class SilentlyTruncating(RidgeReference):
    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        n = self.coef.shape[0]
        X = np.pad(X, ((0, 0), (0, max(0, n - X.shape[1]))))[:, :n]
        return X @ self.coef + self.intercept


class ColumnOutput(RidgeReference):
    def predict(self, X: np.ndarray) -> np.ndarray:
        return super().predict(X)[:, None]


class NoLengthCheck(RidgeReference):
    def fit(self, X: np.ndarray, y: np.ndarray) -> NoLengthCheck:
        n = min(len(X), len(y))
        return super().fit(np.asarray(X)[:n], np.asarray(y)[:n])


class ReturnsNone(RidgeReference):
    def fit(self, X: np.ndarray, y: np.ndarray) -> None:  # type: ignore[override]
        super().fit(X, y)


# -- tests -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def space() -> Any:
    return SPACES.get("nb201")()


@pytest.mark.parametrize("space_name", ["nb201", "mbv3"])
@pytest.mark.parametrize("cls", [RidgeReference, BootstrapEnsembleReference])
def test_reference_predictors_pass_the_suite(cls, space_name, tmp_path):
    filename = "p.safetensors" if cls is BootstrapEnsembleReference else "p.json"
    check_predictor(lambda g: cls(rng=g), SPACES.get(space_name)(), np.random.default_rng(1),
                    filename=filename, directory=tmp_path)
    assert (tmp_path / filename).is_file()


def test_references_satisfy_the_protocols():
    ridge = RidgeReference()
    ensemble = BootstrapEnsembleReference(rng=np.random.default_rng(0))
    assert isinstance(ridge, Predictor) and not isinstance(ridge, UncertainPredictor)
    assert isinstance(ensemble, UncertainPredictor)


@pytest.mark.parametrize(
    ("cls", "match"),
    [
        (PicklingRidge, "pickle"),
        (ConstantPredictor, "Spearman"),
        (UnseededEnsemble, "not deterministic"),
        (LossySave, "loaded predictor predicts differently"),
        (SilentlyTruncating, "accepted X of width"),
        (ColumnOutput, "shape"),
        (NoLengthCheck, "length differs"),
        (ReturnsNone, "return the predictor itself"),
    ],
)
def test_suite_catches_broken_predictors(cls, match, space):
    with pytest.raises(AssertionError, match=match):
        check_predictor(lambda g: cls(rng=g), space, np.random.default_rng(1))


def test_suite_requires_the_error_to_name_the_expected_width(space):
    class VagueError(RidgeReference):
        def predict(self, X: np.ndarray) -> np.ndarray:
            if np.asarray(X).shape[1] != self.coef.shape[0]:
                raise ValueError("bad input")
            return super().predict(X)

    with pytest.raises(AssertionError, match="does not name the expected width"):
        check_predictor(lambda g: VagueError(rng=g), space, np.random.default_rng(1))


def test_feature_helpers_give_clear_errors():
    with pytest.raises(ValueError, match="expected 3 features"):
        as_feature_matrix(np.zeros((2, 4)), n_features=3)
    with pytest.raises(ValueError, match="2-D"):
        as_feature_matrix(np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        as_feature_matrix(np.array([[np.nan]]))
    with pytest.raises(ValueError, match="one value per row"):
        as_target_vector(np.zeros(3), n_rows=4)
    assert as_feature_matrix([[1, 2]], n_features=2).dtype == float


def test_spearman_helper():
    a = np.arange(10.0)
    assert spearman(a, a**3) == pytest.approx(1.0)
    assert spearman(a, -a) == pytest.approx(-1.0)
    assert np.isnan(spearman(a, np.ones(10)))  # a constant side has no ranking: the conformance check fails it


def test_registry_kind_and_group():
    assert PREDICTORS.kind == "predictor"
    assert PREDICTORS.entry_point_group == "hwnas.predictors"


#: Registered predictors that read one feature set, not any encoding: the suite gives them rows of that set.
FEATURES_READ = {"gin": "graph"}


class _Featurized:
    """A space whose ``encode`` is one of :mod:`hwnas.predictors.features`' sets (what check_predictor reads)."""

    def __init__(self, space: Any, features: str) -> None:
        self.space, self.features = space, features

    def sample(self, rng: np.random.Generator) -> Any:
        return self.space.sample(rng)

    def encode(self, arch: Any) -> np.ndarray:
        from hwnas.predictors import featurize

        return featurize(self.space, [arch], self.features)[0]


@pytest.mark.parametrize("name", PREDICTORS.names())
def test_registered_predictor_conformance(name):
    space = SPACES.get("nb201")()
    if name in FEATURES_READ:
        space = _Featurized(space, FEATURES_READ[name])
    check_predictor(lambda g: PREDICTORS.create(name, None, rng=g), space, np.random.default_rng(1))


def test_import_is_numpy_only():
    code = "import sys, hwnas.predictors; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
