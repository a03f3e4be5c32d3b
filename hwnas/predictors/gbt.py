"""``gbt``: gradient-boosted regression trees (scikit-learn's), saved as plain node arrays in JSON.

The trees are fitted by :class:`sklearn.ensemble.GradientBoostingRegressor`; the fitted ensemble is then
held as flat arrays (feature, threshold, children, leaf value per node, all trees concatenated) and
predicted by walking all trees at once in numpy. The same arrays are what the JSON file holds, so a
loaded predictor predicts exactly as the fitted one did, and no pickle is involved. Tested equal to
scikit-learn's own ``predict``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from hwnas.predictors.base import (
    JSONPredictor,
    RankTargetParams,
    as_feature_matrix,
    check_fit_data,
    pack_array,
    unpack_array,
)

if TYPE_CHECKING:
    from sklearn.ensemble import GradientBoostingRegressor

#: Fewer rows than this and a boosted ensemble only memorises.
MIN_SAMPLES = 8
#: Rows walked at once in predict (memory: rows x trees node indices).
_CHUNK_ROWS = 4096


class GBTParams(RankTargetParams):
    """Parameters of the ``gbt`` predictor (scikit-learn's GradientBoostingRegressor)."""


    n_estimators: int = Field(800, ge=1, le=20_000, description="boosting rounds (trees)")
    max_depth: int = Field(4, ge=1, le=16, description="depth of each tree")
    learning_rate: float = Field(0.02, gt=0, le=1, description="shrinkage of each tree's contribution")
    subsample: float = Field(0.7, gt=0, le=1, description="share of the rows each tree is fitted on")
    min_samples_leaf: int = Field(1, ge=1)
    max_features: float = Field(0.5, gt=0, le=1, description="share of the features each split considers")


class GBTPredictor(JSONPredictor):
    """Gradient-boosted trees over the features (scikit-learn), predicted from exported node arrays."""

    name = "gbt"
    Params = GBTParams
    params: GBTParams

    def __init__(self, *, rng: np.random.Generator | None = None, **params: object) -> None:
        super().__init__(rng=rng, **params)
        self._nodes: dict[str, np.ndarray] = {}
        self._init = 0.0
        self._depth = 0

    def fit(self, X: np.ndarray, y: np.ndarray) -> GBTPredictor:
        from sklearn.ensemble import GradientBoostingRegressor

        X, y = check_fit_data(X, y, owner=self.name, min_samples=MIN_SAMPLES)
        p = self.params
        y = self._fit_targets(y)
        model = GradientBoostingRegressor(
            n_estimators=p.n_estimators, max_depth=p.max_depth, learning_rate=p.learning_rate,
            subsample=p.subsample, min_samples_leaf=p.min_samples_leaf, max_features=p.max_features,
            random_state=self.seed,
        ).fit(X, y)
        self._export(model)
        self.n_features = X.shape[1]
        return self

    def _export(self, model: GradientBoostingRegressor) -> None:
        """Flatten the fitted trees: children are global node indices (-1 at leaves); values are pre-scaled."""
        feats, thr, left, right, value, roots = [], [], [], [], [], []
        offset, depth = 0, 0
        lr = float(model.learning_rate)
        for est in model.estimators_[:, 0]:
            t = est.tree_
            n = t.node_count
            roots.append(offset)
            leaf = t.children_left < 0
            here = np.arange(n) + offset  # a leaf points to itself: walking on stays put
            feats.append(np.where(leaf, 0, t.feature).astype(np.int32))
            thr.append(np.where(leaf, np.inf, t.threshold))
            left.append(np.where(leaf, here, t.children_left + offset).astype(np.int32))
            right.append(np.where(leaf, here, t.children_right + offset).astype(np.int32))
            depth = max(depth, int(t.max_depth))
            value.append(lr * t.value[:, 0, 0])
            offset += n
        self._nodes = {
            "feature": np.concatenate(feats), "threshold": np.concatenate(thr),
            "left": np.concatenate(left), "right": np.concatenate(right),
            "value": np.concatenate(value), "root": np.array(roots, dtype=np.int32),
        }
        self._init = float(model.init_.constant_[0, 0])
        self._depth = depth

    def predict(self, X: np.ndarray) -> np.ndarray:
        width = self._require_fitted()
        X = as_feature_matrix(X, n_features=width, owner=self.name)
        # scikit-learn's trees compare float32 features with float64 thresholds: so does this walk
        flat = X.astype(np.float32).ravel()
        n = self._nodes
        out = np.empty(X.shape[0])
        for start in range(0, X.shape[0], _CHUNK_ROWS):  # bounded memory: chunk x trees node indices
            stop = min(start + _CHUNK_ROWS, X.shape[0])
            node = np.broadcast_to(n["root"], (stop - start, n["root"].size)).copy()
            row_at = (np.arange(start, stop, dtype=np.int64) * width)[:, None]
            for _ in range(self._depth):  # leaves point to themselves (threshold inf)
                go_left = flat[row_at + n["feature"][node]] <= n["threshold"][node]
                node = np.where(go_left, n["left"][node], n["right"][node])
            out[start:stop] = self._init + n["value"][node].sum(axis=1)
        return self._to_target_units(out)

    def _state(self) -> dict[str, object]:
        return {"init": self._init, "depth": self._depth, "nodes": {k: pack_array(v) for k, v in self._nodes.items()}}

    def _from_state(self, state: dict[str, Any]) -> None:
        self._init = float(state["init"])
        self._depth = int(state["depth"])
        if not 0 <= self._depth <= 64:
            raise ValueError(f"gbt tree depth {self._depth} is out of range")
        self._nodes = {k: unpack_array(state["nodes"][k], what=f"gbt node array {k!r}")
                       for k in ("feature", "threshold", "left", "right", "value", "root")}
        total = self._nodes["value"].size
        for k in ("feature", "threshold", "left", "right"):
            if self._nodes[k].shape != (total,):
                raise ValueError(f"gbt node array {k!r} has shape {self._nodes[k].shape}, expected ({total},)")
        for k in ("left", "right", "root"):
            a = self._nodes[k]
            if a.size and (a.min() < 0 or a.max() >= total):
                raise ValueError(f"gbt node array {k!r} points outside the {total} nodes")
        assert self.n_features is not None
        feats = self._nodes["feature"]
        if feats.size and not 0 <= feats.min() <= feats.max() < self.n_features:
            raise ValueError(f"gbt node features point outside the {self.n_features} features")
