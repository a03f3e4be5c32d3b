"""Feature sets a predictor reads: the space's own encoding, and graph encodings of cells.

- ``encode``: ``space.encode(arch)`` (one-hot per gene for the categorical spaces); every space.
- ``path``: the path encoding of BANANAS (White et al., 2021): per sequence of operations, how many
  live input-to-output paths of the cell carry it. Cell spaces (:class:`CellGraphSpace`) only.
- ``cell``: the cell's *live* edges (an edge on no input-to-output path computes nothing the output
  sees, so it is encoded as absent), one-hot per slot; live-op counts; per input-to-output slot path
  whether it is live and how many of each operation it carries; the deepest live path's count of
  parametric operations; the number of live paths. Cell spaces only.

Names join with ``+`` (``encode+cell``). A saved predictor records its feature names and width, so a
file fitted on one feature set refuses rows of another.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
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


FEATURES: dict[str, Callable[[SearchSpace, Sequence[Architecture]], np.ndarray]] = {
    "encode": _encode,
    "path": _path,
    "cell": _cell,
}


def parse_features(spec: str) -> tuple[str, ...]:
    """``"encode+cell"`` -> ("encode", "cell"), or a ConfigError naming the unknown part."""
    names = tuple(part.strip() for part in spec.split("+"))
    for name in names:
        if name not in FEATURES:
            raise ConfigError(f"unknown feature set {name!r} in {spec!r}; known: {', '.join(FEATURES)} "
                              f"(join several with '+')")
    if len(set(names)) != len(names):
        raise ConfigError(f"feature set {spec!r} names a part twice")
    return names


def featurize(space: SearchSpace, archs: Sequence[Architecture], features: str = "encode") -> np.ndarray:
    """The feature matrix of ``archs`` (one row each) under ``features`` (e.g. ``"encode+cell"``).

    Raises:
        ConfigError: An unknown feature name, or a cell encoding asked of a space without cells.
    """
    parts = [FEATURES[name](space, archs) for name in parse_features(features)]
    return np.hstack(parts) if len(parts) > 1 else parts[0]
