"""Feature sets of the predictors: the space's encoding and the cell encodings (live edges, paths)."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.errors import ConfigError
from hwnas.predictors import featurize, parse_features
from hwnas.predictors.features import live_slots
from hwnas.search_spaces import SPACES, CellGraphSpace

# NB201 op indices: 0 none, 1 skip_connect, 2 nor_conv_1x1, 3 nor_conv_3x3, 4 avg_pool_3x3
# edges in order: 1<-0, 2<-0, 2<-1, 3<-0, 3<-1, 3<-2


def _space():
    return SPACES.create("nb201", {"merge_isomorphic": False})


def test_nb201_is_a_cell_space_and_dead_edges_are_not_live():
    space = _space()
    assert isinstance(space, CellGraphSpace)
    # node 1 gets nothing from the input (edge 1<-0 is none): its conv into node 3 and node 2 are dead
    arch = space.from_ops([0, 3, 3, 1, 3, 2])
    graph = space.cell_graph(arch)
    assert graph.slot_ops == (-1, 2, 2, 0, 2, 1)
    assert live_slots(graph).tolist() == [False, True, False, True, False, True]


def test_cell_features_encode_only_live_ops_and_path_counts():
    space = _space()
    a = space.from_ops([0, 3, 3, 1, 3, 2])  # live: 2<-0 conv3, 3<-0 skip, 3<-2 conv1
    b = space.from_ops([0, 3, 4, 1, 2, 2])  # differs only on dead edges
    X = featurize(space, [a, b], "cell")
    assert X.shape == (2, 6 * 4 + 4 + 4 * 5 + 2)
    np.testing.assert_array_equal(X[0], X[1])
    counts = X[0, 24:28]  # live ops: skip, conv1x1, conv3x3, pool
    assert counts.tolist() == [1, 1, 1, 0]
    depth, live_paths = X[0, -2:]
    assert (depth, live_paths) == (2, 2)  # input->2->3 has two convolutions; two live paths


def test_path_encoding_counts_each_op_sequence():
    space = _space()
    every_skip = space.from_ops([1] * 6)
    X = featurize(space, [every_skip], "path")
    assert X.shape == (1, 4 + 16 + 64)
    # one path of each length 1 and 3, two of length 2, all skip-only (op index 0 in every position)
    assert X[0, 0] == 1 and X[0, 4] == 2 and X[0, 4 + 16] == 1 and X.sum() == 4


def test_encode_joins_and_refusals():
    space = _space()
    archs = [space.sample(np.random.default_rng(s)) for s in range(3)]
    both = featurize(space, archs, "encode+cell")
    assert both.shape == (3, 30 + 50)
    with pytest.raises(ConfigError, match="unknown feature set 'graphs'"):
        parse_features("encode+graphs")
    mbv3 = SPACES.create("mbv3")
    with pytest.raises(ConfigError, match="space 'mbv3' has no cell graph"):
        featurize(mbv3, [mbv3.sample(np.random.default_rng(0))], "cell")
