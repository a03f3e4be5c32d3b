"""The DARTS cell space (Liu et al., ICLR 2019): a normal and a reduction cell stacked into a CIFAR network.

Each cell has ``nodes`` (4) intermediate nodes; intermediate node ``i`` sums two edges, each an
operation applied to one earlier state. States are numbered as in DARTS's genotypes: ``0`` is the
output of the cell before last (c_{k-2}), ``1`` the output of the last cell (c_{k-1}), ``2 + j`` the
intermediate node ``j``. The cell's output concatenates every intermediate node (``range(2, 6)``).

Genes, per cell ``c`` in ``normal``/``reduce``, node ``i`` and edge ``j`` in ``0``/``1``:

- ``{c}_n{i}_in{j}``: the input state, ``0 .. i + 1``;
- ``{c}_n{i}_op{j}``: the operation, as its index in :data:`PRIMITIVES` (DARTS's order, so gene values
  mean the same operation whatever subset of operations a space allows).

Membership rules, as in DARTS's derived genotypes and in NAS-Bench-301:

- ``'none'`` (the zero operation) is not a member: DARTS keeps it only during the relaxed search and
  never selects it when deriving a genotype, so a genotype naming it is rejected.
- The two inputs of a node come from two distinct states (DARTS keeps the two strongest edges from
  distinct predecessors); a node taking one state twice is rejected.
- The two edges of a node form an unordered pair (their sum does not depend on the order), so
  :meth:`DartsSpace.canonicalize` sorts them by (input, operation): genotypes that list a node's
  edges in either order canonicalize to one architecture and share one ``arch_id``.

A further isomorphism is left alone: relabelling two intermediate nodes that do not depend on each
other permutes the channels of the cell's output; the following 1x1 convolutions absorb that, so
such architectures compute the same family of functions but keep distinct ids.

The network is DARTS's CIFAR network without the auxiliary head: a 3x3 conv stem with
``stem_multiplier * init_channels`` channels, ``cells`` cells with reduction cells (stride 2, channels
doubled) at 1/3 and 2/3 of the depth, global average pooling and a linear classifier. Operations are
DARTS's: ReLU-Conv-BN separable convolutions (applied twice), dilated separable convolutions, 3x3
max/avg pooling, identity or a factorized reduction for ``skip_connect``. timm has no DARTS ops, so
they are written in plain torch here (inside :meth:`DartsSpace.build` only).
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import numpy as np
from pydantic import Field, field_validator, model_validator

from hwnas.architecture import Architecture, require_generator
from hwnas.errors import InvalidArchitecture
from hwnas.search_spaces.base import (
    CategoricalSpace,
    Gene,
    LayerKey,
    SpaceParams,
    UnitCatalog,
    UnitSpec,
    per_arch_cache,
)

if TYPE_CHECKING:
    import torch.nn as nn

log = logging.getLogger(__name__)

PRIMITIVES: tuple[str, ...] = (
    "none",
    "max_pool_3x3",
    "avg_pool_3x3",
    "skip_connect",
    "sep_conv_3x3",
    "sep_conv_5x5",
    "dil_conv_3x3",
    "dil_conv_5x5",
)
"""DARTS's operations in DARTS's order; an op gene's value is an index into this tuple."""

CELLS: tuple[str, str] = ("normal", "reduce")

DARTS_V2 = (
    "Genotype(normal=[('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0), ('sep_conv_3x3', 1), "
    "('sep_conv_3x3', 1), ('skip_connect', 0), ('skip_connect', 0), ('dil_conv_3x3', 2)], normal_concat=[2, 3, 4, 5], "
    "reduce=[('max_pool_3x3', 0), ('max_pool_3x3', 1), ('skip_connect', 2), ('max_pool_3x3', 1), ('max_pool_3x3', 0), "
    "('skip_connect', 2), ('skip_connect', 2), ('max_pool_3x3', 1)], reduce_concat=[2, 3, 4, 5])"
)
"""DARTS (second order), the cell of the DARTS paper, as ``genotypes.py`` of the DARTS code writes it."""


class CellPlan(TypedDict):
    """One cell as built (:meth:`DartsSpace._plan`): the channels of its two inputs and its own, whether it and
    the previous cell reduce, the inputs' resolutions, and its (op name, input state, stride) edges."""

    c_pp: int
    c_p: int
    c: int
    reduction: bool
    reduction_prev: bool
    res_pp: int
    res: int
    edges: list[tuple[str, int, int]]


# -- genotype text ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Genotype:
    """A DARTS genotype: per cell, ``2 * nodes`` (operation, input) pairs and the concatenated states.

    Args:
        normal: (operation name, input state) per edge of the normal cell, two per node in node order.
        normal_concat: States the normal cell concatenates.
        reduce: The same for the reduction cell.
        reduce_concat: States the reduction cell concatenates.
        concat_style: How :meth:`format` writes the concat lists: ``"range"`` as the DARTS search code
            prints them (``range(2, 6)``), ``"list"`` as DARTS's ``genotypes.py`` writes them
            (``[2, 3, 4, 5]``). Not part of equality. :meth:`parse` sets it from the text (a text
            mixing both styles parses as ``"list"``).
    """

    normal: tuple[tuple[str, int], ...]
    normal_concat: tuple[int, ...]
    reduce: tuple[tuple[str, int], ...]
    reduce_concat: tuple[int, ...]
    concat_style: Literal["range", "list"] = field(default="range", compare=False)

    @classmethod
    def parse(cls, text: str) -> Genotype:
        """Read the text DARTS prints (``Genotype(normal=[('sep_conv_3x3', 0), ...], normal_concat=range(2, 6), ...)``).

        A small recursive-descent parser (no ``eval``): keyword fields in any order, ``'`` or ``"``
        quotes, concat lists as ``range(a, b)`` or ``[a, b, ...]``, any whitespace.

        Raises:
            InvalidArchitecture: The text is not a genotype; names the character position.
        """
        return _GenotypeParser(text).parse()

    def format(self, concat_style: Literal["range", "list"] | None = None) -> str:
        """The text DARTS prints: ``Genotype(normal=[...], normal_concat=range(2, 6), reduce=[...], ...)``.

        Args:
            concat_style: Overrides :attr:`concat_style`. A concat that is not a contiguous range is
                always written as a list.
        """
        style = concat_style or self.concat_style

        def edges(pairs: Sequence[tuple[str, int]]) -> str:
            return "[" + ", ".join(f"('{op}', {i})" for op, i in pairs) + "]"

        def concat(states: Sequence[int]) -> str:
            contiguous = bool(states) and list(states) == list(range(states[0], states[-1] + 1))
            if style == "range" and contiguous:
                return f"range({states[0]}, {states[-1] + 1})"
            return "[" + ", ".join(str(s) for s in states) + "]"

        return (f"Genotype(normal={edges(self.normal)}, normal_concat={concat(self.normal_concat)}, "
                f"reduce={edges(self.reduce)}, reduce_concat={concat(self.reduce_concat)})")

    def __str__(self) -> str:
        return self.format()


_TOKEN = re.compile(
    r"\s*(?:(?P<int>-?\d+)|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|'(?P<sq>[^'\\]*)'|\"(?P<dq>[^\"\\]*)\"|(?P<punct>[()\[\],=]))"
)


_KIND_TEXT = {"int": "an integer", "str": "a quoted operation name", "name": "a field name", "punct": "punctuation"}


class _GenotypeParser:
    """Tokenizer and recursive-descent parser of the genotype text; every error names its position."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str | int, int]] = list(self._tokenize(text))
        self.i = 0

    @staticmethod
    def _tokenize(text: str) -> Iterator[tuple[str, str | int, int]]:
        pos = 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                return
            m = _TOKEN.match(text, pos)
            if m is None:
                raise InvalidArchitecture(f"genotype text: unexpected character {text[pos]!r} at position {pos}")
            start = m.start(m.lastgroup) if m.lastgroup else pos
            kind = m.lastgroup or ""
            if kind == "int":
                yield "int", int(m.group("int")), start
            elif kind in ("sq", "dq"):
                yield "str", m.group(kind), start - 1
            elif kind == "name":
                yield "name", m.group("name"), start
            else:
                yield "punct", m.group("punct"), start
            pos = m.end()

    def _where(self) -> str:
        if self.i < len(self.tokens):
            return f"position {self.tokens[self.i][2]}"
        return "the end of the text"

    def _expect(self, kind: str, value: str | None = None) -> str | int:
        if self.i >= len(self.tokens):
            want = repr(value) if value is not None else _KIND_TEXT[kind]
            raise InvalidArchitecture(f"genotype text: expected {want} at the end of the text")
        k, v, pos = self.tokens[self.i]
        if k != kind or (value is not None and v != value):
            want = repr(value) if value is not None else _KIND_TEXT[kind]
            raise InvalidArchitecture(f"genotype text: expected {want} at position {pos}, found {v!r}")
        self.i += 1
        return v

    def _peek(self, value: str) -> bool:
        return self.i < len(self.tokens) and self.tokens[self.i][0] == "punct" and self.tokens[self.i][1] == value

    def parse(self) -> Genotype:
        self._expect("name", "Genotype")
        self._expect("punct", "(")
        fields: dict[str, Any] = {}
        styles: set[str] = set()
        while True:
            if self.i >= len(self.tokens):
                raise InvalidArchitecture("genotype text: expected ')' at the end of the text")
            at = self.tokens[self.i][2]
            key = str(self._expect("name"))
            if key not in ("normal", "normal_concat", "reduce", "reduce_concat"):
                raise InvalidArchitecture(f"genotype text: unknown field {key!r} at position {at} "
                                          "(fields: normal, normal_concat, reduce, reduce_concat)")
            if key in fields:
                raise InvalidArchitecture(f"genotype text: field {key!r} given twice (position {at})")
            self._expect("punct", "=")
            if key.endswith("concat"):
                states, style = self._concat()
                fields[key] = states
                styles.add(style)
            else:
                fields[key] = self._edges()
            if self._peek(","):
                self.i += 1
                if self._peek(")"):
                    break
                continue
            break
        self._expect("punct", ")")
        if self.i != len(self.tokens):
            raise InvalidArchitecture(f"genotype text: unexpected text after the genotype at {self._where()}")
        missing = [k for k in ("normal", "normal_concat", "reduce", "reduce_concat") if k not in fields]
        if missing:
            raise InvalidArchitecture(f"genotype text: missing field(s) {', '.join(missing)}")
        return Genotype(normal=fields["normal"], normal_concat=fields["normal_concat"], reduce=fields["reduce"],
                        reduce_concat=fields["reduce_concat"], concat_style="list" if "list" in styles else "range")

    def _edges(self) -> tuple[tuple[str, int], ...]:
        self._expect("punct", "[")
        out: list[tuple[str, int]] = []
        while not self._peek("]"):
            self._expect("punct", "(")
            op = str(self._expect("str"))
            self._expect("punct", ",")
            state = int(self._expect("int"))
            self._expect("punct", ")")
            out.append((op, state))
            if self._peek(","):
                self.i += 1
            elif not self._peek("]"):
                raise InvalidArchitecture(f"genotype text: expected ',' or ']' at {self._where()}")
        self._expect("punct", "]")
        return tuple(out)

    def _concat(self) -> tuple[tuple[int, ...], str]:
        if self._peek("["):
            self.i += 1
            out: list[int] = []
            while not self._peek("]"):
                out.append(int(self._expect("int")))
                if self._peek(","):
                    self.i += 1
                elif not self._peek("]"):
                    raise InvalidArchitecture(f"genotype text: expected ',' or ']' at {self._where()}")
            self._expect("punct", "]")
            return tuple(out), "list"
        self._expect("name", "range")
        self._expect("punct", "(")
        start = int(self._expect("int"))
        self._expect("punct", ",")
        stop = int(self._expect("int"))
        self._expect("punct", ")")
        return tuple(range(start, stop)), "range"


# -- the space -------------------------------------------------------------------------------------


class DartsParams(SpaceParams):
    """Parameters of the DARTS cell space (defaults: DARTS's search network, 8 cells of 16 channels)."""

    resolution: int = Field(32, ge=8, le=4096, description="input height and width in pixels (a multiple of 4)")
    in_chans: int = Field(3, gt=0)
    num_classes: int = Field(10, gt=1)
    cells: int = Field(8, ge=3, description="number of stacked cells (DARTS's `layers`); reductions at 1/3 and 2/3")
    init_channels: int = Field(16, gt=0, description="channels of the first cells (DARTS's `C`)")
    stem_multiplier: int = Field(3, gt=0, description="stem channels = stem_multiplier * init_channels")
    nodes: int = Field(4, ge=1, description="intermediate nodes per cell (DARTS's `steps`)")
    ops: tuple[str, ...] = Field(PRIMITIVES[1:], description="allowed operations (DARTS names; 'none' excluded)")

    @field_validator("ops")
    @classmethod
    def _known_ops(cls, ops: tuple[str, ...]) -> tuple[str, ...]:
        if not ops:
            raise ValueError("ops must name at least one operation")
        for op in ops:
            if op == "none":
                raise ValueError("'none' is not a member: DARTS's derived genotypes never select the zero op")
            if op not in PRIMITIVES:
                raise ValueError(f"unknown operation {op!r} (known: {', '.join(PRIMITIVES[1:])})")
        if len(set(ops)) != len(ops):
            raise ValueError("ops has duplicates")
        return tuple(sorted(ops, key=PRIMITIVES.index))

    @model_validator(mode="after")
    def _resolution_divisible(self) -> DartsParams:
        if self.resolution % 4:
            raise ValueError(f"resolution {self.resolution} must be a multiple of 4 (two factorized reductions)")
        return self


def _input_gene(cell: str, node: int, edge: int) -> str:
    return f"{cell}_n{node}_in{edge}"


def _op_gene(cell: str, node: int, edge: int) -> str:
    return f"{cell}_n{node}_op{edge}"


class DartsSpace(UnitCatalog, CategoricalSpace):
    """DARTS cells: normal + reduction cell, 4 nodes x 2 (input, op) edges, 7 ops; stacked CIFAR network."""

    name = "darts"
    Params = DartsParams
    params: DartsParams

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self._op_choices = tuple(PRIMITIVES.index(op) for op in self.params.ops)
        self._genes = self._make_genes()
        self._names = [g.name for g in self._genes]

    # -- genes -------------------------------------------------------------------------------------
    def _make_genes(self) -> list[Gene]:
        out: list[Gene] = []
        for cell in CELLS:
            for i in range(self.params.nodes):
                for j in range(2):
                    out.append(Gene(_input_gene(cell, i, j), tuple(range(i + 2))))
                    out.append(Gene(_op_gene(cell, i, j), self._op_choices))
        return out

    def genes(self) -> list[Gene]:
        return list(self._genes)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.params.in_chans, self.params.resolution, self.params.resolution)

    def size(self) -> int:
        """``(prod_i C(i + 2, 2) * n_ops**2) ** 2``: per node, an unordered pair of distinct inputs, an op each."""
        n_ops = len(self._op_choices)
        per_cell = math.prod(math.comb(i + 2, 2) * n_ops**2 for i in range(self.params.nodes))
        return per_cell**2

    # -- membership ----------------------------------------------------------------------------------
    def validate(self, arch: Architecture) -> None:
        """Gene ranges (see :class:`CategoricalSpace`), then distinct inputs per node, naming the node."""
        super().validate(arch)
        g = arch.genes
        for cell in CELLS:
            for i in range(self.params.nodes):
                a, b = g[_input_gene(cell, i, 0)], g[_input_gene(cell, i, 1)]
                if a == b:
                    raise InvalidArchitecture(
                        f"darts: {cell} node {i} (state {i + 2}) takes input {a} twice; its two inputs must differ")

    def canonicalize(self, arch: Architecture) -> Architecture:
        """Validate, then sort each node's two (input, op) edges by input: swapped edges share one id."""
        self.validate(arch)
        genes = dict(arch.genes)
        for cell in CELLS:
            for i in range(self.params.nodes):
                e0 = (genes[_input_gene(cell, i, 0)], genes[_op_gene(cell, i, 0)])
                e1 = (genes[_input_gene(cell, i, 1)], genes[_op_gene(cell, i, 1)])
                if e1 < e0:
                    genes[_input_gene(cell, i, 0)], genes[_op_gene(cell, i, 0)] = e1
                    genes[_input_gene(cell, i, 1)], genes[_op_gene(cell, i, 1)] = e0
        return Architecture(self.name, genes)

    # -- stochastic operators ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Architecture:
        """Uniform over canonical architectures: per node a uniform pair of distinct inputs and uniform ops."""
        require_generator(rng, self, "sample")
        genes: dict[str, int] = {}
        ops = self._op_choices
        for cell in CELLS:
            for i in range(self.params.nodes):
                first = int(rng.integers(i + 2))
                second = int(rng.integers(i + 1))  # uniform over the other i + 1 states
                inputs = (first, second + (second >= first))
                for j in range(2):
                    genes[_input_gene(cell, i, j)] = inputs[j]
                    genes[_op_gene(cell, i, j)] = ops[int(rng.integers(len(ops)))]
        return self.canonicalize(Architecture(self.name, genes))

    def mutate(self, arch: Architecture, rng: np.random.Generator) -> Architecture:
        """Change one op, or move one input to a state the node does not already use; always a different arch.

        Changing one component of one edge changes the node's unordered pair of edges, so the result
        never canonicalizes back to ``arch``.

        Raises:
            InvalidArchitecture: The space has a single member (nothing to mutate).
        """
        require_generator(rng, self, "mutate")
        arch = self.canonicalize(arch)
        g = arch.genes
        moves: list[tuple[str, list[int]]] = []
        for cell in CELLS:
            for i in range(self.params.nodes):
                for j in range(2):
                    current, partner = g[_input_gene(cell, i, j)], g[_input_gene(cell, i, 1 - j)]
                    others = [s for s in range(i + 2) if s not in (current, partner)]
                    if others:
                        moves.append((_input_gene(cell, i, j), others))
                    op_others = [o for o in self._op_choices if o != g[_op_gene(cell, i, j)]]
                    if op_others:
                        moves.append((_op_gene(cell, i, j), op_others))
        if not moves:
            raise InvalidArchitecture("darts: this space has a single architecture; there is nothing to mutate")
        gene, values = moves[int(rng.integers(len(moves)))]
        child = self.canonicalize(arch.replace(**{gene: values[int(rng.integers(len(values)))]}))
        if child == arch:  # pragma: no cover - excluded by construction (see the docstring)
            raise AssertionError("darts: mutate() produced its parent")
        return child

    def crossover(self, a: Architecture, b: Architecture, rng: np.random.Generator) -> Architecture:
        """Uniform crossover over nodes: each node's two edges come together from either parent."""
        require_generator(rng, self, "crossover")
        a, b = self.canonicalize(a), self.canonicalize(b)
        genes: dict[str, int] = {}
        pick = rng.random(len(CELLS) * self.params.nodes) < 0.5
        k = 0
        for cell in CELLS:
            for i in range(self.params.nodes):
                src = a if pick[k] else b
                k += 1
                for j in range(2):
                    for name in (_input_gene(cell, i, j), _op_gene(cell, i, j)):
                        genes[name] = int(src.genes[name])  # type: ignore[arg-type]
        return self.canonicalize(Architecture(self.name, genes))

    def most_probable(self, log_probs: Mapping[str, np.ndarray]) -> Architecture:
        """Per node the best pair of distinct inputs (the two slots' input log-probabilities summed), every op its
        argmax; canonical."""
        genes: dict[str, int] = {}
        by = {g.name: g for g in self.genes()}
        for cell in CELLS:
            for i in range(self.params.nodes):
                names = [_input_gene(cell, i, j) for j in range(2)]
                choices = by[names[0]].choices
                lp0, lp1 = np.asarray(log_probs[names[0]]), np.asarray(log_probs[names[1]])
                _, a, b = max((lp0[x] + lp1[y], x, y) for x in range(len(choices)) for y in range(len(choices))
                              if x != y)
                genes[names[0]], genes[names[1]] = int(choices[a]), int(choices[b])
                for j in range(2):
                    op = _op_gene(cell, i, j)
                    genes[op] = int(by[op].choices[int(np.argmax(log_probs[op]))])
        return self.canonicalize(Architecture(self.name, genes))

    def parameter_free_ops(self, arch: Architecture) -> tuple[int, int]:
        """(normal-cell slots with ``skip_connect``, ``max_pool_3x3`` or ``avg_pool_3x3``, normal-cell slots).

        DARTS+'s early stop watches the skip connections of the normal cell; pooling collapses the same way.
        """
        self.validate(arch)
        free = {PRIMITIVES.index(op) for op in ("skip_connect", "max_pool_3x3", "avg_pool_3x3")}
        ops = [int(arch.genes[_op_gene("normal", i, j)]) for i in range(self.params.nodes)  # type: ignore[arg-type]
               for j in range(2)]
        return sum(op in free for op in ops), len(ops)

    # -- genotype text -------------------------------------------------------------------------------
    def to_genotype(self, arch: Architecture, concat_style: Literal["range", "list"] = "range") -> Genotype:
        """The DARTS genotype of ``arch``, edges in the order of its genes (canonical order for a canonical arch)."""
        self.validate(arch)
        g = arch.genes
        cells = {
            cell: tuple((PRIMITIVES[int(g[_op_gene(cell, i, j)])], int(g[_input_gene(cell, i, j)]))  # type: ignore[arg-type]
                        for i in range(self.params.nodes) for j in range(2))
            for cell in CELLS
        }
        concat = tuple(range(2, 2 + self.params.nodes))
        return Genotype(normal=cells["normal"], normal_concat=concat, reduce=cells["reduce"], reduce_concat=concat,
                        concat_style=concat_style)

    def from_genotype(self, genotype: Genotype | str) -> Architecture:
        """The architecture of a genotype (or its text), edges kept in the genotype's order (not canonicalized).

        Raises:
            InvalidArchitecture: Names the cell, node and entry whose operation or input is out of range,
                a wrong number of entries, or a concat other than every intermediate node.
        """
        if isinstance(genotype, str):
            genotype = Genotype.parse(genotype)
        n = self.params.nodes
        concat = tuple(range(2, 2 + n))
        genes: dict[str, int] = {}
        for cell, edges, cat in ((c, getattr(genotype, c), getattr(genotype, f"{c}_concat")) for c in CELLS):
            if len(edges) != 2 * n:
                raise InvalidArchitecture(
                    f"darts: genotype {cell} has {len(edges)} entries; this space has {n} nodes x 2 = {2 * n}")
            if tuple(cat) != concat:
                raise InvalidArchitecture(
                    f"darts: genotype {cell}_concat={list(cat)}; this space concatenates every intermediate node "
                    f"{list(concat)}")
            for k, (op, state) in enumerate(edges):
                i, j = divmod(k, 2)
                where = f"genotype {cell}[{k}] (node {i}, state {i + 2})"
                if op == "none":
                    raise InvalidArchitecture(
                        f"darts: {where}: op 'none' is not a member (DARTS's derived genotypes never select it)")
                if op not in PRIMITIVES or PRIMITIVES.index(op) not in self._op_choices:
                    raise InvalidArchitecture(
                        f"darts: {where}: unknown op {op!r} (allowed: {', '.join(self.params.ops)})")
                if not 0 <= state <= i + 1:
                    raise InvalidArchitecture(f"darts: {where}: input {state} is out of range (0..{i + 1})")
                genes[_input_gene(cell, i, j)] = state
                genes[_op_gene(cell, i, j)] = PRIMITIVES.index(op)
        arch = Architecture(self.name, genes)
        self.validate(arch)
        return arch

    # -- network -------------------------------------------------------------------------------------
    def chain_arch(self, op: str, *, shallow: bool = False) -> Architecture:
        """Every slot ``op``; node ``i`` reads states ``(i, i + 1)`` (the deepest cell) or, ``shallow``, ``(0, 1)``
        (every reduction-cell edge strided). Canonical."""
        genes: dict[str, int] = {}
        for cell in CELLS:
            for i in range(self.params.nodes):
                inputs = (0, 1) if shallow else (i, i + 1)
                for j in range(2):
                    genes[_input_gene(cell, i, j)] = inputs[j]
                    genes[_op_gene(cell, i, j)] = PRIMITIVES.index(op)
        return self.canonicalize(Architecture(self.name, genes))

    def op_by_params(self, *, heaviest: bool) -> str:
        """The allowed op with the most (fewest) parameters in the first normal cell (stride 1) plus the first
        reduction cell (stride 2), at their channels; ties: first in PRIMITIVES. Builds the ops without
        touching torch's global generator."""
        import torch

        m = _torch_modules()
        plan = self._plan(self.chain_arch(self.params.ops[0]))  # channels do not depend on the ops
        c_normal = next((c["c"] for c in plan if not c["reduction"]), self.params.init_channels)
        c_reduce = next((c["c"] for c in plan if c["reduction"]), 2 * c_normal)
        ops = list(self.params.ops)  # PRIMITIVES order
        with torch.random.fork_rng(devices=[]):
            counts = [sum(p.numel() for c, stride in ((c_normal, 1), (c_reduce, 2))
                          for p in m.make_op(op, c, stride).parameters()) for op in ops]
        return ops[counts.index(max(counts) if heaviest else min(counts))]

    def largest(self) -> Architecture:
        """Every slot the op with the most parameters (``sep_conv_5x5`` when allowed); node ``i`` reads states
        ``(i, i + 1)``: the deepest cell, no reduction-cell node on a strided (cheaper) edge beyond node 0."""
        return self.chain_arch(self.op_by_params(heaviest=True))

    def _plan(self, arch: Architecture) -> list[CellPlan]:
        """Per cell: channels, reduction flags, input resolution and its (op name, input, stride) edges."""
        arch = self.canonicalize(arch)
        p = self.params
        c_curr = p.stem_multiplier * p.init_channels
        c_pp, c_p, c = c_curr, c_curr, p.init_channels
        res_pp = res_p = p.resolution
        reduction_prev = False
        plan = []
        for k in range(p.cells):
            reduction = k in (p.cells // 3, 2 * p.cells // 3)
            if reduction:
                c *= 2
            cell = "reduce" if reduction else "normal"
            edges = []
            for i in range(p.nodes):
                for j in range(2):
                    state = int(arch.genes[_input_gene(cell, i, j)])  # type: ignore[arg-type]
                    op = PRIMITIVES[int(arch.genes[_op_gene(cell, i, j)])]  # type: ignore[arg-type]
                    edges.append((op, state, 2 if reduction and state < 2 else 1))
            plan.append(CellPlan(c_pp=c_pp, c_p=c_p, c=c, reduction=reduction, reduction_prev=reduction_prev,
                                 res_pp=res_pp, res=res_p, edges=edges))
            res_out = res_p // 2 if reduction else res_p
            c_pp, c_p = c_p, p.nodes * c
            res_pp, res_p = res_p, res_out
            reduction_prev = reduction
        return plan

    @per_arch_cache
    def layers(self, arch: Architecture) -> list[LayerKey]:
        """Stem; per cell its two preprocessing convs and one key per edge op (op, channels, stride, input
        resolution); head.

        A pool (or a stride-1 skip) that another edge of the cell already applies to the same state is the same
        tensor and is keyed once (:func:`shared_edges`): onnxruntime merges such ops, and the cell reuses them.

        The sums and the concatenation of a cell are not keyed (memory moves, priced by calibration).
        """
        p = self.params
        stem_c = p.stem_multiplier * p.init_channels
        keys = [f"darts_stem:i{p.in_chans}:o{stem_c}:k3:r{p.resolution}"]
        plan = self._plan(arch)
        for cell in plan:
            if cell["reduction_prev"]:
                keys.append(f"darts_fr:i{cell['c_pp']}:o{cell['c']}:r{cell['res_pp']}")
            else:
                keys.append(f"darts_rcb:i{cell['c_pp']}:o{cell['c']}:k1:r{cell['res_pp']}")
            keys.append(f"darts_rcb:i{cell['c_p']}:o{cell['c']}:k1:r{cell['res']}")
            for (op, state, stride), first in zip(cell["edges"], shared_edges(cell["edges"])):
                if first is not None:
                    continue  # the same parameter-free op on the same state: one tensor, computed once
                # a reduction cell's edges from its own nodes run at the halved resolution
                res = cell["res"] // 2 if cell["reduction"] and state >= 2 else cell["res"]
                keys.append(f"darts_op:{op}:c{cell['c']}:s{stride}:r{res}")
        last = plan[-1]
        res_out = last["res"] // 2 if last["reduction"] else last["res"]
        keys.append(f"darts_head:i{p.nodes * last['c']}:cls{p.num_classes}:r{res_out}")
        return keys

    def _unit_specs(self) -> dict[LayerKey, UnitSpec]:
        """Stem; per cell position its preprocessing and every allowed op at each stride and resolution; head.

        The cells' shapes do not depend on the genes (only their ops and inputs do), so one member's plan
        gives every position's channels and resolutions.
        """
        p = self.params
        stem_c = p.stem_multiplier * p.init_channels
        units: dict[LayerKey, UnitSpec] = {
            f"darts_stem:i{p.in_chans}:o{stem_c}:k3:r{p.resolution}": ("stem", None, (p.in_chans, p.resolution,
                                                                                     p.resolution))}
        plan = self._plan(self.sample(np.random.default_rng(0)))
        for cell in plan:
            c, r, c_pp, r_pp = cell["c"], cell["res"], cell["c_pp"], cell["res_pp"]
            if cell["reduction_prev"]:
                units[f"darts_fr:i{c_pp}:o{c}:r{r_pp}"] = ("fr", (c_pp, c), (c_pp, r_pp, r_pp))
            else:
                units[f"darts_rcb:i{c_pp}:o{c}:k1:r{r_pp}"] = ("rcb", (c_pp, c), (c_pp, r_pp, r_pp))
            units[f"darts_rcb:i{cell['c_p']}:o{c}:k1:r{r}"] = ("rcb", (cell["c_p"], c), (cell["c_p"], r, r))
            placements = [(2, r), (1, r // 2)] if cell["reduction"] else [(1, r)]
            for stride, res in placements:
                for op in self.params.ops:
                    units[f"darts_op:{op}:c{c}:s{stride}:r{res}"] = ("op", (op, c, stride), (c, res, res))
        last = plan[-1]
        res_out = last["res"] // 2 if last["reduction"] else last["res"]
        c_out = p.nodes * last["c"]
        units[f"darts_head:i{c_out}:cls{p.num_classes}:r{res_out}"] = ("head", c_out, (c_out, res_out, res_out))
        return units

    def _build_unit(self, kind: str, spec: Any) -> nn.Module:
        """The stem, a preprocessing conv, a factorized reduce, one edge op or the head (pool, classifier)."""
        import torch.nn as nn

        m = _torch_modules()
        p = self.params
        if kind == "stem":
            stem_c = p.stem_multiplier * p.init_channels
            return nn.Sequential(nn.Conv2d(p.in_chans, stem_c, 3, padding=1, bias=False), nn.BatchNorm2d(stem_c))
        if kind == "rcb":
            return m.ReLUConvBN(spec[0], spec[1], 1, 1, 0)
        if kind == "fr":
            return m.FactorizedReduce(*spec)
        if kind == "op":
            return m.make_op(*spec)
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(spec, p.num_classes))

    def build(self, arch: Architecture) -> nn.Module:
        """DARTS's CIFAR network for ``arch`` (no auxiliary head, no drop path), random init.

        BatchNorm statistics are calibrated on random inputs (see :func:`_calibrate_batchnorm`).
        """
        import torch.nn as nn

        m = _torch_modules()
        p = self.params
        stem_c = p.stem_multiplier * p.init_channels
        cells = [
            m.Cell(c_pp=c["c_pp"], c_p=c["c_p"], c=c["c"], reduction_prev=c["reduction_prev"],
                   edges=[(op, state, stride) for op, state, stride in c["edges"]])
            for c in self._plan(arch)
        ]
        stem = nn.Sequential(nn.Conv2d(p.in_chans, stem_c, 3, padding=1, bias=False), nn.BatchNorm2d(stem_c))
        model = m.Network(stem=stem, cells=cells, c_out=p.nodes * cells[-1].c, num_classes=p.num_classes)
        _calibrate_batchnorm(model, self.input_shape)
        log.debug("built darts network with %d cells for %s", len(cells), arch.arch_id)
        return model


def _calibrate_batchnorm(model: nn.Module, input_shape: tuple[int, int, int], batch: int = 4) -> None:
    """Set BatchNorm running statistics from one training-mode pass over standard-normal inputs.

    With the default statistics (mean 0, variance 1) a freshly initialised DARTS network in eval mode
    shrinks its activations about tenfold per cell, so after 8 cells its output no longer depends on
    its input (which makes ONNX comparisons and zero-cost proxies meaningless). One pass with batch
    statistics fixes that; training re-estimates the statistics anyway. The inputs come from torch's
    global generator, like the weights, so seeding torch before :meth:`DartsSpace.build` fixes both.
    The module is returned in training mode, as a new module is.
    """
    import torch
    import torch.nn as nn

    norms = [mod for mod in model.modules() if isinstance(mod, nn.modules.batchnorm._BatchNorm)]
    momenta = [mod.momentum for mod in norms]
    for mod in norms:
        mod.reset_running_stats()
        mod.momentum = None  # cumulative average: after one batch, exactly that batch's statistics
    model.train()
    with torch.no_grad():
        model(torch.randn(batch, *input_shape))
    for mod, momentum in zip(norms, momenta):
        mod.momentum = momentum


@functools.cache
def _torch_modules() -> SimpleNamespace:
    """DARTS's operations, cell and network as torch modules (defined on first use: torch stays out of import)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class ReLUConvBN(nn.Sequential):
        """ReLU, conv, BatchNorm."""

        def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, padding: int) -> None:
            super().__init__(nn.ReLU(inplace=False), nn.Conv2d(c_in, c_out, kernel, stride, padding, bias=False),
                             nn.BatchNorm2d(c_out))

    class DilConv(nn.Sequential):
        """ReLU, dilated depthwise conv, pointwise conv, BatchNorm."""

        def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, padding: int, dilation: int) -> None:
            super().__init__(
                nn.ReLU(inplace=False),
                nn.Conv2d(c_in, c_in, kernel, stride, padding, dilation=dilation, groups=c_in, bias=False),
                nn.Conv2d(c_in, c_out, 1, bias=False),
                nn.BatchNorm2d(c_out),
            )

    class SepConv(nn.Sequential):
        """Two dilation-1 DilConvs, the first strided (DARTS's separable convolution)."""

        def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, padding: int) -> None:
            super().__init__(DilConv(c_in, c_in, kernel, stride, padding, 1),
                             DilConv(c_in, c_out, kernel, 1, padding, 1))

    class FactorizedReduce(nn.Module):
        """Halve the resolution with two offset strided 1x1 convs, concatenated, then BatchNorm.

        The BatchNorm is applied to each half before the concatenation, with that half of its parameters and
        statistics: the same function, in training as in eval (BatchNorm is per channel), the same parameters,
        but each half's BatchNorm folds into its convolution. onnxruntime cannot fold a BatchNorm that follows
        a Concat: at int8 it stays a float op between dequantise and quantise, channels-first, and the
        quantised pools and sums behind it run channels-first too (measured on 15 random 64 px networks: 239
        layout transposes and 5 channels-first max pools against 61 and 1 with the BatchNorm split).
        """

        def __init__(self, c_in: int, c_out: int) -> None:
            super().__init__()
            if c_out % 2:
                raise ValueError(f"FactorizedReduce needs an even number of output channels, got {c_out}")
            self.relu = nn.ReLU(inplace=False)
            self.conv_1 = nn.Conv2d(c_in, c_out // 2, 1, stride=2, bias=False)
            self.conv_2 = nn.Conv2d(c_in, c_out // 2, 1, stride=2, bias=False)
            self.bn = nn.BatchNorm2d(c_out)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.relu(x)
            bn, h = self.bn, self.conv_1.out_channels
            momentum = 0.0 if bn.momentum is None else bn.momentum
            if self.training and bn.track_running_stats and bn.num_batches_tracked is not None:
                bn.num_batches_tracked.add_(1)  # once per forward, as nn.BatchNorm2d counts
                if bn.momentum is None:  # cumulative moving average
                    momentum = 1.0 / float(bn.num_batches_tracked)
            batch_stats = self.training or bn.running_mean is None

            def norm(t: torch.Tensor, part: slice) -> torch.Tensor:
                mean, var = bn.running_mean, bn.running_var
                return F.batch_norm(t, None if mean is None else mean[part], None if var is None else var[part],
                                    None if bn.weight is None else bn.weight[part],
                                    None if bn.bias is None else bn.bias[part], batch_stats, momentum, bn.eps)

            return torch.cat([norm(self.conv_1(x), slice(0, h)), norm(self.conv_2(x[:, :, 1:, 1:]), slice(h, 2 * h))],
                             dim=1)

    def make_op(op: str, c: int, stride: int) -> nn.Module:
        if op == "max_pool_3x3":
            return nn.MaxPool2d(3, stride=stride, padding=1)
        if op == "avg_pool_3x3":
            return nn.AvgPool2d(3, stride=stride, padding=1, count_include_pad=False)
        if op == "skip_connect":
            return nn.Identity() if stride == 1 else FactorizedReduce(c, c)
        if op.startswith("sep_conv_"):
            k = int(op[-1])
            return SepConv(c, c, k, stride, k // 2)
        if op.startswith("dil_conv_"):
            k = int(op[-1])
            return DilConv(c, c, k, stride, k - 1, 2)
        raise ValueError(f"darts: no module for op {op!r}")

    class Cell(nn.Module):
        """One DARTS cell: preprocess both inputs, sum two edge ops per node, concatenate the nodes."""

        def __init__(self, *, c_pp: int, c_p: int, c: int, reduction_prev: bool,
                     edges: Sequence[tuple[str, int, int]]) -> None:
            super().__init__()
            self.c = c
            self.preprocess0 = FactorizedReduce(c_pp, c) if reduction_prev else ReLUConvBN(c_pp, c, 1, 1, 0)
            self.preprocess1 = ReLUConvBN(c_p, c, 1, 1, 0)
            self.ops = nn.ModuleList(make_op(op, c, stride) for op, _state, stride in edges)
            self.inputs = [state for _op, state, _stride in edges]
            self.shared = shared_edges(edges)  # an edge that repeats an earlier one reuses its tensor

        def forward(self, s0: torch.Tensor, s1: torch.Tensor) -> torch.Tensor:
            states = [self.preprocess0(s0), self.preprocess1(s1)]
            out: list[torch.Tensor] = []
            for k, (op, first) in enumerate(zip(self.ops, self.shared)):
                out.append(out[first] if first is not None else op(states[self.inputs[k]]))
                if k % 2:
                    states.append(out[k - 1] + out[k])
            return torch.cat(states[2:], dim=1)

    class Network(nn.Module):
        """Stem, stacked cells, global average pooling, linear classifier."""

        def __init__(self, *, stem: nn.Module, cells: Sequence[nn.Module], c_out: int, num_classes: int) -> None:
            super().__init__()
            self.stem = stem
            self.cells = nn.ModuleList(cells)
            self.global_pooling = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(c_out, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s0 = s1 = self.stem(x)
            for cell in self.cells:
                s0, s1 = s1, cell(s0, s1)
            return self.classifier(torch.flatten(self.global_pooling(s1), 1))

    return SimpleNamespace(Cell=Cell, Network=Network, FactorizedReduce=FactorizedReduce, ReLUConvBN=ReLUConvBN,
                           make_op=make_op)


def shared_edges(edges: Sequence[tuple[str, int, int]]) -> list[int | None]:
    """Per edge ``(op, state, stride)`` of a cell: the index of an earlier edge that computes the same tensor
    (the same parameter-free op, a pool or a stride-1 skip, on the same state at the same stride), else None."""
    first: dict[tuple[str, int, int], int] = {}
    out: list[int | None] = []
    for k, (op, state, stride) in enumerate(edges):
        free = op.endswith("pool_3x3") or (op == "skip_connect" and stride == 1)
        key = (op, state, stride)
        out.append(first.get(key) if free else None)
        if free:
            first.setdefault(key, k)
    return out


__all__ = ["DARTS_V2", "PRIMITIVES", "DartsParams", "DartsSpace", "Genotype"]
