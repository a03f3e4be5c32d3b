"""Feature sets a predictor reads: the space's own encoding, and graph encodings of cells.

- ``encode``: ``space.encode(arch)`` (one-hot per gene for the categorical spaces); every space.
- ``path``: the path encoding of BANANAS (White et al., 2021): per sequence of operations, how many
  live input-to-output paths of the cell carry it. Cell spaces (:class:`CellGraphSpace`) only.
- ``cell``: the cell's *live* edges (an edge on no input-to-output path computes nothing the output
  sees, so it is encoded as absent), one-hot per slot; live-op counts; per input-to-output slot path
  whether it is live and how many of each operation it carries; the deepest live path's count of
  parametric operations; the number of live paths. Cell spaces only.
- ``graph``: the cell as a DAG with operations on its *nodes*, as BRP-NAS and NASLib turn a
  NAS-Bench-201 cell into a graph for a graph network (read by the ``gin`` predictor). Nodes, in
  order: the cell's input node(s), one node per slot (carrying that slot's operation), the output
  node. Directed edges: input -> slot where the slot starts at that input, slot -> slot where the
  first ends where the second starts, slot -> output where the slot ends at the output; a slot with
  no edge (``none``) has no node edges and an all-zero one-hot. Node features: one-hot over
  ``[input, output, *op_names]`` (K = 2 + operations). One row per cell, of fixed width for a space:
  ``[N, A (N*N, row-major, A[i, j] = 1 for edge i -> j), F (N*K, row-major)]``, column 0 holding the
  node count N so that a reader can split the row. Cell spaces only.

Names join with ``+`` (``encode+cell``). ``metric:NAME`` adds one column of a measured metric, e.g. a zero-cost
proxy (``encode+metric:zc_synflow+metric:zc_naswot``): fitted from journals of runs that had the ``zero_cost``
evaluator, and computed by the ``predictor`` evaluator itself in a run. A saved predictor records its feature
names and width, so a file fitted on one feature set refuses rows of another.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.search_spaces.base import CellGraph, CellGraphSpace, SearchSpace

#: The longest path the ``path`` encoding counts (in edges); longer paths are left out.
MAX_PATH_EDGES = 4


@dataclass(frozen=True)
class _CellShape:
    """What the encodings of one space's cells share: slots, operations, the slot paths input -> output."""

    slots: tuple[tuple[int, int], ...]
    inputs: tuple[int, ...]
    output: int
    op_names: tuple[str, ...]
    parametric: np.ndarray  # (n_ops,) bool
    paths: tuple[tuple[int, ...], ...]  # slot indices along each input -> output path


@functools.lru_cache(maxsize=32)
def _cell_shape(
    slots: tuple[tuple[int, int], ...], inputs: tuple[int, ...], output: int, op_names: tuple[str, ...],
    parametric: tuple[bool, ...],
) -> _CellShape:
    by_source: dict[int, list[int]] = {}
    for s, (frm, _) in enumerate(slots):
        by_source.setdefault(frm, []).append(s)
    paths: list[tuple[int, ...]] = []

    def walk(node: int, trail: tuple[int, ...]) -> None:
        if node == output:
            paths.append(trail)
            return
        for s in by_source.get(node, []):
            walk(slots[s][1], (*trail, s))

    for i in inputs:
        walk(i, ())
    return _CellShape(slots, inputs, output, op_names, np.array(parametric, dtype=bool), tuple(paths))


def _shape_of(graph: CellGraph) -> _CellShape:
    return _cell_shape(graph.slots, graph.inputs, graph.output, graph.op_names, graph.parametric)


def live_slots(graph: CellGraph) -> np.ndarray:
    """Per slot, True where its edge exists and lies on some input-to-output path of existing edges."""
    exists = np.array(graph.slot_ops) >= 0
    shape = _shape_of(graph)
    live = np.zeros(len(graph.slots), dtype=bool)
    for path in shape.paths:
        p = list(path)
        if exists[p].all():
            live[p] = True
    return live


def _cell_graphs(space: SearchSpace, archs: Sequence[Architecture], feature: str) -> list[CellGraph]:
    if not isinstance(space, CellGraphSpace):
        raise ConfigError(f"features {feature!r}: space {space.name!r} has no cell graph "
                          f"(only cell spaces such as nb201 do); use features 'encode'")
    return [space.cell_graph(a) for a in archs]


def _encode(space: SearchSpace, archs: Sequence[Architecture]) -> np.ndarray:
    if not archs:
        return np.zeros((0, len(space.encode(space.sample(np.random.default_rng(0))))))
    return np.stack([np.asarray(space.encode(a), dtype=float) for a in archs])


def _path(space: SearchSpace, archs: Sequence[Architecture]) -> np.ndarray:
    graphs = _cell_graphs(space, archs, "path")
    if not graphs:
        return np.zeros((0, 0))
    shape = _shape_of(graphs[0])
    n_ops = len(shape.op_names)
    lengths = sorted({len(p) for p in shape.paths if 0 < len(p) <= MAX_PATH_EDGES})
    offset, width = {}, 0
    for k in lengths:
        offset[k], width = width, width + n_ops**k
    out = np.zeros((len(graphs), width))
    for row, g in enumerate(graphs):
        ops = g.slot_ops
        for path in shape.paths:
            k = len(path)
            if k not in offset or any(ops[s] < 0 for s in path):
                continue
            code = 0
            for s in path:
                code = code * n_ops + ops[s]
            out[row, offset[k] + code] += 1.0
    return out


def _cell(space: SearchSpace, archs: Sequence[Architecture]) -> np.ndarray:
    graphs = _cell_graphs(space, archs, "cell")
    if not graphs:
        return np.zeros((0, 0))
    shape = _shape_of(graphs[0])
    n_ops, n_slots, n_paths = len(shape.op_names), len(shape.slots), len(shape.paths)
    width = n_slots * n_ops + n_ops + n_paths * (1 + n_ops) + 2
    out = np.zeros((len(graphs), width))
    path_idx = [list(p) for p in shape.paths]
    for row, g in enumerate(graphs):
        ops = np.array(g.slot_ops)
        live = live_slots(g)
        eff = np.where(live, ops, -1)
        on = np.nonzero(eff >= 0)[0]
        out[row, on * n_ops + eff[on]] = 1.0
        at = n_slots * n_ops
        out[row, at : at + n_ops] = np.bincount(eff[on], minlength=n_ops)
        at += n_ops
        depth, alive_paths = 0.0, 0.0
        for p in path_idx:
            if (eff[p] >= 0).all():
                counts = np.bincount(eff[p], minlength=n_ops)
                out[row, at] = 1.0
                out[row, at + 1 : at + 1 + n_ops] = counts
                depth = max(depth, float(counts[shape.parametric].sum()))
                alive_paths += 1.0
            at += 1 + n_ops
        out[row, at], out[row, at + 1] = depth, alive_paths
    return out


@functools.lru_cache(maxsize=32)
def _graph_template(
    slots: tuple[tuple[int, int], ...], inputs: tuple[int, ...], output: int, n_ops: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(node -> node edges if every slot had an edge, (N, N) bool; the fixed one-hot rows, (N, K)); read-only."""
    n_in, n_slots = len(inputs), len(slots)
    n = n_in + n_slots + 1
    out_node = n - 1
    edges = np.zeros((n, n), dtype=bool)
    for s, (frm, to) in enumerate(slots):
        if frm in inputs:
            edges[inputs.index(frm), n_in + s] = True
        for t, (frm2, _) in enumerate(slots):
            if frm2 == to:
                edges[n_in + s, n_in + t] = True
        if to == output:
            edges[n_in + s, out_node] = True
    fixed = np.zeros((n, 2 + n_ops))
    fixed[:n_in, 0] = 1.0
    fixed[out_node, 1] = 1.0
    edges.flags.writeable = fixed.flags.writeable = False
    return edges, fixed


def graph_layout(row_width: int, n_nodes: int) -> int:
    """K, the node features per node, of a ``graph`` row of ``row_width`` columns and ``n_nodes`` nodes (or -1)."""
    rest = row_width - 1 - n_nodes * n_nodes
    return rest // n_nodes if n_nodes > 0 and rest > 0 and rest % n_nodes == 0 else -1


def _graph(space: SearchSpace, archs: Sequence[Architecture]) -> np.ndarray:
    graphs = _cell_graphs(space, archs, "graph")
    if not graphs:
        return np.zeros((0, 0))
    first = graphs[0]
    edges, fixed = _graph_template(first.slots, first.inputs, first.output, len(first.op_names))
    n_in, n_slots, n = len(first.inputs), len(first.slots), edges.shape[0]
    k = fixed.shape[1]
    ops = np.array([g.slot_ops for g in graphs], dtype=np.int64).reshape(len(graphs), n_slots)
    present = np.ones((len(graphs), n), dtype=bool)  # input and output nodes always take part
    present[:, n_in : n_in + n_slots] = ops >= 0
    adjacency = edges[None] & present[:, :, None] & present[:, None, :]
    feats = np.broadcast_to(fixed, (len(graphs), n, k)).copy()
    rows, slots = np.nonzero(ops >= 0)
    feats[rows, n_in + slots, 2 + ops[rows, slots]] = 1.0
    out = np.empty((len(graphs), 1 + n * n + n * k))
    out[:, 0] = n
    out[:, 1 : 1 + n * n] = adjacency.reshape(len(graphs), n * n)
    out[:, 1 + n * n :] = feats.reshape(len(graphs), n * k)
    return out


FEATURES: dict[str, Callable[[SearchSpace, Sequence[Architecture]], np.ndarray]] = {
    "encode": _encode,
    "path": _path,
    "cell": _cell,
    "graph": _graph,
}


#: Prefix of a feature part that reads a measured metric (``metric:zc_synflow``) instead of the architecture.
METRIC_PREFIX = "metric:"


def parse_features(spec: str) -> tuple[str, ...]:
    """``"encode+cell"`` -> ("encode", "cell"), or a ConfigError naming the unknown part.

    A part ``metric:NAME`` is one column holding each architecture's measured ``NAME`` (a zero-cost proxy of
    the ``zero_cost`` evaluator, ``zc_synflow``; or a column of a benchmark table).
    """
    names = tuple(part.strip() for part in spec.split("+"))
    for name in names:
        if name.startswith(METRIC_PREFIX):
            if not name[len(METRIC_PREFIX):].strip():
                raise ConfigError(f"feature part {name!r} in {spec!r} names no metric (e.g. metric:zc_synflow)")
        elif name not in FEATURES:
            raise ConfigError(f"unknown feature set {name!r} in {spec!r}; known: {', '.join(FEATURES)}, or "
                              f"metric:NAME for a measured metric (join several with '+')")
    if len(set(names)) != len(names):
        raise ConfigError(f"feature set {spec!r} names a part twice")
    return names


def metric_features(spec: str) -> list[str]:
    """The metric names read by the ``metric:NAME`` parts of ``spec``, in order."""
    return [n[len(METRIC_PREFIX):].strip() for n in parse_features(spec) if n.startswith(METRIC_PREFIX)]


def _metric_column(name: str, archs: Sequence[Architecture],
                   metrics: Sequence[Mapping[str, float]] | None) -> np.ndarray:
    if metrics is None:
        raise ConfigError(f"feature metric:{name} reads a measured metric, and none are given here (fit from run "
                          f"journals or a table that has it; in a run, the predictor evaluator computes only zc_* "
                          f"proxies)")
    if len(metrics) != len(archs):
        raise ValueError(f"{len(metrics)} metric rows for {len(archs)} architectures")
    out = np.empty(len(archs))
    for i, (arch, m) in enumerate(zip(archs, metrics)):
        v = m.get(name)
        if v is None or not np.isfinite(v):
            raise ConfigError(f"feature metric:{name}: architecture {arch.arch_id} has "
                              f"{'no ' + name if v is None else name + ' = ' + str(v)}")
        out[i] = float(v)
    return out[:, None]


def featurize(space: SearchSpace, archs: Sequence[Architecture], features: str = "encode",
              metrics: Sequence[Mapping[str, float]] | None = None) -> np.ndarray:
    """The feature matrix of ``archs`` (one row each) under ``features`` (e.g. ``"encode+cell"``).

    Args:
        space: The architectures' space.
        archs: The architectures.
        features: Feature parts joined with ``+``.
        metrics: Measured metrics per architecture, for ``metric:NAME`` parts (None: such parts are refused).

    Raises:
        ConfigError: An unknown feature name, a cell encoding asked of a space without cells, or a metric part
            without the metric.
    """
    parts = [_metric_column(name[len(METRIC_PREFIX):].strip(), archs, metrics) if name.startswith(METRIC_PREFIX)
             else FEATURES[name](space, archs) for name in parse_features(features)]
    return np.hstack(parts) if len(parts) > 1 else parts[0]
