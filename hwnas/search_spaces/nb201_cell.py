"""NAS-Bench-201's cell as plain data: its operations, edges, and :func:`cell_plan` (what a cell computes, as an
optimising runtime runs it). No torch: the space (:mod:`hwnas.search_spaces.nb201`) and the torch modules
(:mod:`hwnas.search_spaces.nb201_modules`) both read it."""

from __future__ import annotations

from typing import Any, NamedTuple

#: The five operations, in NAS-Bench-201's order (a gene value is an index into this tuple).
OPS: tuple[str, ...] = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")

#: The six edges as (gene name, to node, from node), in the order of the official string.
EDGES: tuple[tuple[str, int, int], ...] = (
    ("e1_0", 1, 0),
    ("e2_0", 2, 0),
    ("e2_1", 2, 1),
    ("e3_0", 3, 0),
    ("e3_1", 3, 1),
    ("e3_2", 3, 2),
)


#: Ops without weights: two of them on the same value compute the same tensor.
_PARAMETER_FREE: frozenset[str] = frozenset({"skip_connect", "avg_pool_3x3"})


class CellPlan(NamedTuple):
    """What a cell computes (:func:`cell_plan`)."""

    values: dict[str, tuple[Any, ...]]
    """The value key of every live edge: edges with equal keys produce one tensor."""
    work: list[str]
    """The ops the cell runs, in order, as unit names (``nor_conv_3x3``, ``avg_pool_3x3``, ``skip_connect``,
    ``zero``, ``add``)."""
    live: tuple[int, ...]
    """The nodes after the input that reach the output, ascending."""


#: The value of a node without live inputs: all zeros.
ZERO: tuple[str] = ("zero",)


def cell_plan(cell_ops: tuple[str, ...] | list[str], edges: tuple[tuple[str, int, int], ...] = EDGES) -> CellPlan:
    """What a cell computes, as an optimising runtime runs it.

    A node is live when it reaches the output node; ops into dead nodes are never run (graph optimisers drop
    them). A parameter-free op on a value that already went through the same op (through a ``skip_connect``, or
    on the same node) is the same tensor and runs once: onnxruntime's common-subexpression elimination merges
    such pools, and the cell's ``forward`` reuses them. A node without live inputs is zero, and so is a skip or
    a pool of it: such a term adds nothing to its sum, so it is not computed (no pool, no addition). A zero is
    made (one multiply, shared within the cell) only where something must read it: a convolution (its
    BatchNorm shift makes its output a nonzero constant) or the cell's output. A node with ``k`` terms pays
    ``k - 1`` additions.
    """
    incoming: dict[int, list[tuple[str, int, str]]] = {1: [], 2: [], 3: []}
    for (name, to, frm), op in zip(edges, cell_ops):
        if op != "none":
            incoming[to].append((name, frm, op))
    live = {3}
    for node in (2, 1, 0):
        if any(frm == node for to in live for _, frm, _ in incoming[to]):
            live.add(node)
    node_value: dict[int, tuple[Any, ...]] = {0: ("input",)}
    values: dict[str, tuple[Any, ...]] = {}
    work: list[str] = []
    seen: set[tuple[Any, ...]] = set()

    def make_zero() -> None:
        if ZERO not in seen:
            work.append("zero")
            seen.add(ZERO)

    for to in (1, 2, 3):
        if to not in live:
            continue
        terms = []
        for name, frm, op in incoming[to]:
            src = node_value[frm]
            if op == "skip_connect":
                key = src  # the same tensor
            elif op in _PARAMETER_FREE:
                key = ZERO if src == ZERO else (op, src)  # a pool of zeros is zeros
            else:
                key = (name, src)  # its own weights
                if src == ZERO:
                    make_zero()
            if key == ZERO:
                continue  # adds nothing
            values[name] = key
            if op == "skip_connect" or key not in seen:
                work.append(op)
                seen.add(key)
            terms.append(key)
        if not terms:
            node_value[to] = ZERO
        else:
            work.extend(["add"] * (len(terms) - 1))
            node_value[to] = terms[0] if len(terms) == 1 else ("sum", *terms)
    if node_value[3] == ZERO:
        make_zero()
    return CellPlan(values, work, tuple(sorted(live - {0})))
