"""``ensemble``: several predictors, their mean the prediction, their spread the uncertainty (``predict_std``).

Members are of the kinds listed in ``members``, taken in turn (the default, gradient-boosted trees and an
MLP, ranks NAS-Bench-201 better than either alone: ``nas bench predictors``), each with its own seed and,
with ``bootstrap``, its own resample of the rows. Saved as one JSON file holding every member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field, field_validator

from hwnas.predictors.base import (
    PREDICTORS,
    JSONPredictor,
    PredictorParams,
    as_feature_matrix,
    check_fit_data,
)

if TYPE_CHECKING:
    from hwnas.predictors.base import Predictor

MIN_SAMPLES = 8


class EnsembleParams(PredictorParams):
    """Parameters of the ``ensemble`` predictor."""

    members: list[str] = Field(["gbt", "mlp"], min_length=1,
                               description="registered predictor kinds of the members, taken in turn")
    member_params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="parameters per member kind, e.g. {gbt: {n_estimators: 400}}")
    n_members: int = Field(2, ge=2, le=100, description="members in all")
    bootstrap: bool = Field(False, description="fit each member on a resample with replacement (else all rows)")

    @field_validator("members")
    @classmethod
    def _known_members(cls, v: list[str]) -> list[str]:
        for name in v:
            if name == "ensemble":
                raise ValueError("an ensemble's members cannot be ensembles")
            if name not in PREDICTORS:
                raise ValueError(f"unknown predictor {name!r}; known: {', '.join(PREDICTORS.names())}")
        return v


class EnsemblePredictor(JSONPredictor):
    """Members of one or several kinds (default gbt + mlp): mean prediction, spread as predict_std."""

    name = "ensemble"
    Params = EnsembleParams
    params: EnsembleParams

    def __init__(self, *, rng: np.random.Generator | None = None, **params: object) -> None:
        super().__init__(rng=rng, **params)
        for kind, kind_params in self.params.member_params.items():
            if kind not in self.params.members:
                raise ValueError(f"member_params names {kind!r}, which is not among members {self.params.members}")
            PREDICTORS.validate_params(kind, kind_params)  # fail at build, not at fit
        self.members: list[Predictor] = []

    def fit(self, X: np.ndarray, y: np.ndarray) -> EnsemblePredictor:
        X, y = check_fit_data(X, y, owner=self.name, min_samples=MIN_SAMPLES)
        rng = np.random.default_rng(self.seed)
        self.members = []
        for _ in range(self.params.n_members):
            child = np.random.default_rng(rng.integers(2**63 - 1))
            rows = rng.integers(X.shape[0], size=X.shape[0]) if self.params.bootstrap else np.arange(X.shape[0])
            if np.ptp(y[rows]) == 0:  # a resample of near-constant targets: fit that member on every row
                rows = np.arange(X.shape[0])
            kind = self._kind(len(self.members))
            member = PREDICTORS.create(kind, self.params.member_params.get(kind), rng=child)
            self.members.append(member.fit(X[rows], y[rows]))
        self.n_features = X.shape[1]
        return self

    def _kind(self, i: int) -> str:
        return self.params.members[i % len(self.params.members)]

    def _all(self, X: np.ndarray) -> np.ndarray:
        width = self._require_fitted()
        X = as_feature_matrix(X, n_features=width, owner=self.name)
        return np.stack([np.asarray(m.predict(X), dtype=float) for m in self.members])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self._all(X).mean(axis=0)

    def predict_std(self, X: np.ndarray) -> np.ndarray:
        return self._all(X).std(axis=0)

    def _state(self) -> dict[str, object]:
        return {"members": [m.to_dict() for m in self.members]}

    def _from_state(self, state: dict[str, Any]) -> None:
        members = state["members"]
        if not isinstance(members, list) or len(members) != self.params.n_members:
            raise ValueError(f"ensemble expects {self.params.n_members} members")
        self.members = [PREDICTORS.get(self._kind(i)).from_dict(m, source=f"ensemble member {i}")
                        for i, m in enumerate(members)]
        for i, m in enumerate(self.members):
            if m.n_features != self.n_features:
                raise ValueError(f"ensemble member {i} has {m.n_features} features, the ensemble {self.n_features}")
