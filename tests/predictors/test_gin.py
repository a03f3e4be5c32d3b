"""The ``graph`` feature set (cells as operation-on-node DAGs) and the ``gin`` graph-network predictor."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hwnas.errors import ConfigError
from hwnas.predictors import PREDICTORS, featurize, load_predictor
from hwnas.predictors.gin import GINPredictor
from hwnas.search_spaces import SPACES

# NB201 op indices: 0 none, 1 skip_connect, 2 nor_conv_1x1, 3 nor_conv_3x3, 4 avg_pool_3x3
# slots in order: 0->1, 0->2, 1->2, 0->3, 1->3, 2->3
FAST = {"epochs": 40, "hidden": 16, "layers": 2}


def _space():
    return SPACES.create("nb201", {"merge_isomorphic": False})


def _rows(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``graph`` rows of random NB201 cells and a target the graph decides (3x3 convolutions, minus pools)."""
    space = _space()
    rng = np.random.default_rng(seed)
    X = featurize(space, [space.sample(rng) for _ in range(n)], "graph")
    ops = X[:, 1 + 64 :].reshape(n, 8, 6)
    y = ops[:, :, 4].sum(axis=1) - 0.5 * ops[:, :, 5].sum(axis=1) + 0.1 * rng.standard_normal(n)
    return X, y


def test_graph_features_of_a_known_cell():
    space = _space()
    # 0->1 none, 0->2 conv3, 1->2 conv3, 0->3 skip, 1->3 conv3, 2->3 conv1
    X = featurize(space, [space.from_ops([0, 3, 3, 1, 3, 2])], "graph")
    n, k = 8, 6  # nodes: input, six slots, output; features: input, output, 4 ops
    assert X.shape == (1, 1 + n * n + n * k)
    assert X[0, 0] == n
    expected_edges = [
        (0, 2), (0, 4),  # the input feeds the slots that start at node 0 and exist (0->2, 0->3)
        (2, 6), (3, 6),  # slots ending at node 2 (0->2, 1->2) feed the slot starting there (2->3)
        (4, 7), (5, 7), (6, 7),  # slots ending at node 3 feed the output
    ]  # slot 0->1 is none: its node (1) has no edges, and nothing of it reaches 1->2 or 1->3
    A = np.zeros((n, n))
    for i, j in expected_edges:
        A[i, j] = 1
    F = np.zeros((n, k))
    F[0, 0] = 1  # input
    F[7, 1] = 1  # output
    for node, op in [(2, 3), (3, 3), (4, 1), (5, 3), (6, 2)]:  # slot node -> NB201 op (1..4) at column 1 + op
        F[node, 1 + op] = 1
    np.testing.assert_array_equal(X[0, 1 : 1 + n * n].reshape(n, n), A)
    np.testing.assert_array_equal(X[0, 1 + n * n :].reshape(n, k), F)


def test_graph_features_of_every_cell_are_fast_and_consistent():
    from hwnas.bench.predictors import nb201_cells

    space, archs = nb201_cells()
    X = featurize(space, archs, "graph")
    assert X.shape == (15_625, 113) and np.all(X[:, 0] == 8)
    ops = np.array([space.ops_of(a) for a in archs])
    feats = X[:, 65:].reshape(-1, 8, 6)
    np.testing.assert_array_equal(feats[:, 1:7, 2:].sum(axis=2), ops > 0)  # one op per existing slot
    adj = X[:, 1:65].reshape(-1, 8, 8)
    assert adj[:, :, 0].sum() == 0 and adj[:, 7].sum() == 0  # nothing into the input, nothing out of the output
    none_nodes = np.nonzero(ops == 0)
    assert adj[none_nodes[0], 1 + none_nodes[1]].sum() == 0 and adj[none_nodes[0], :, 1 + none_nodes[1]].sum() == 0


def test_graph_features_need_a_cell_space():
    mbv3 = SPACES.create("mbv3")
    with pytest.raises(ConfigError, match="space 'mbv3' has no cell graph"):
        featurize(mbv3, [mbv3.sample(np.random.default_rng(0))], "graph")


def test_gin_ranks_nas_bench_201_better_than_chance(shared_data: Path):
    from scipy.stats import kendalltau

    from hwnas.bench.predictors import nb201_cells
    from hwnas.bench.strategies import DATASETS, load_nb201

    space, archs = nb201_cells()
    y = np.asarray(load_nb201(shared_data).accuracy[DATASETS["cifar10"][2]], dtype=float)
    X = featurize(space, archs, "graph")
    perm = np.random.default_rng(0).permutation(len(archs))
    train, test = perm[:100], perm[100:3100]
    model = PREDICTORS.create("gin", {"epochs": 60, "hidden": 32}, rng=np.random.default_rng(0)).fit(
        X[train], y[train])
    tau = kendalltau(model.predict(X[test]), y[test])[0]
    assert tau > 0.5, tau  # chance is 0; the FLOPs proxy about 0.58, this fit about 0.68


def test_same_seed_same_predictions_and_save_load_round_trip(tmp_path: Path):
    X, y = _rows()
    X_new, _ = _rows(200, seed=1)
    a = PREDICTORS.create("gin", FAST, rng=np.random.default_rng(7)).fit(X, y)
    b = PREDICTORS.create("gin", FAST, rng=np.random.default_rng(7)).fit(X, y)
    c = PREDICTORS.create("gin", FAST, rng=np.random.default_rng(8)).fit(X, y)
    pred = a.predict(X_new)
    assert pred.shape == (200,) and np.all(np.isfinite(pred))
    np.testing.assert_array_equal(b.predict(X_new), pred)
    assert not np.array_equal(c.predict(X_new), pred)
    path = tmp_path / "gin.json"
    a.meta = {"features": "graph"}
    a.save(path)
    loaded = load_predictor(path)
    assert isinstance(loaded, GINPredictor) and loaded.meta == {"features": "graph"}
    np.testing.assert_array_equal(loaded.predict(X_new), pred)
    np.testing.assert_array_equal(GINPredictor.load(path).predict(X_new), pred)


def test_mean_readout_and_directed_neighbours_fit():
    X, y = _rows()
    for params in ({"readout": "mean"}, {"neighbours": "forward"}, {"neighbours": "backward", "target": "raw"}):
        pred = PREDICTORS.create("gin", {**FAST, **params}, rng=np.random.default_rng(0)).fit(X, y).predict(X)
        assert np.corrcoef(pred, y)[0, 1] > 0.5, params


def test_rows_of_another_layout_are_refused():
    X, y = _rows(20)
    space = _space()
    cell = featurize(space, [space.sample(np.random.default_rng(s)) for s in range(20)], "cell")
    gin = GINPredictor(rng=np.random.default_rng(0), **FAST)
    with pytest.raises(ValueError, match=r"gin reads the 'graph' feature set.*got 50 columns"):
        gin.fit(cell, y)
    varying = X.copy()
    varying[3, 0] = 7
    with pytest.raises(ValueError, match=r"gin reads the 'graph' feature set.*varying"):
        gin.fit(varying, y)
    wrong_width = np.hstack([X, np.zeros((20, 1))])
    with pytest.raises(ValueError, match="gin reads the 'graph' feature set"):
        gin.fit(wrong_width, y)
    not_binary = X.copy()
    not_binary[0, 5] = 0.5
    with pytest.raises(ValueError, match="must be 0 or 1"):
        gin.fit(not_binary, y)
    fitted = gin.fit(X, y)
    with pytest.raises(ValueError, match="expected 113 features"):
        fitted.predict(cell)
    with pytest.raises(ValueError, match="gin reads the 'graph' feature set"):
        fitted.predict(varying)


def test_too_few_rows_and_predict_before_fit():
    X, y = _rows(7)
    with pytest.raises(ValueError, match=r"7 architecture\(s\) to fit on; it needs at least 8"):
        GINPredictor(rng=np.random.default_rng(0)).fit(X, y)
    with pytest.raises(RuntimeError, match="before fit"):
        GINPredictor(rng=np.random.default_rng(0)).predict(X)


def test_malformed_saved_weights_are_refused(tmp_path: Path):
    X, y = _rows()
    path = tmp_path / "gin.json"
    PREDICTORS.create("gin", FAST, rng=np.random.default_rng(0)).fit(X, y).save(path)
    data = json.loads(path.read_text())
    data["params"]["hidden"] = 32  # the weights are 16 wide
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="malformed gin predictor: gin weight shape"):
        load_predictor(bad)
    data = json.loads(path.read_text())
    data["state"]["n_nodes"] = 9
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="does not make rows of 113 columns"):
        load_predictor(bad)
