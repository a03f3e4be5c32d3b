"""The NAS-Bench-201 cell space: 6 edges of a 4-node cell, each one of 5 operations (15,625 cells).

The cell has nodes 0 (input) .. 3 (output); node ``i`` is the sum of ``op(node j)`` over the edges
``j -> i``. The genes are the six edge operations, named ``e{to}_{from}``: ``e1_0, e2_0, e2_1, e3_0,
e3_1, e3_2``, each an index into :data:`OPS` (the official order: none, skip_connect, nor_conv_1x1,
nor_conv_3x3, avg_pool_3x3). The official string form is ``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|``
(group ``i`` lists the edges into node ``i``; ``~j`` names the input node): :meth:`NB201Space.to_str`
prints it and :meth:`NB201Space.from_str` parses it.

Isomorphic cells share one id. Two cells are the same when they have the same *unique string*
(:func:`unique_str`), which is NAS-Bench-201's own equivalence (NATS-Bench's ``get_unique_str``,
``to_unique_str(consider_zero=True)`` upstream): the output node is written as an expression in which
``skip_connect`` is the identity, ``none`` is zero, an operation applied to a node that is exactly zero
is zero, and the operands of each sum are sorted (addition commutes). Edges that cannot reach the
output therefore do not matter, nor does the order of a sum's operands. This gives the well-known
**6,466 classes among the 15,625 cells**, and the same partition as the ``UniqueString`` column that
NATS-Bench publishes. The convention is NAS-Bench-201's, quirks included: a sum whose operands are all
zero (node 2 or 3 with only ``none`` inputs) is *not* treated as zero when another operation reads it,
and ``x + 0`` is not simplified to ``x`` inside an operand (simplifying both would give 4,930 classes);
it is kept because a convolution of an all-zero node is not zero in a trained network (its BatchNorm
shift), and because the benchmark's own count is the one every NB201 paper reports.

:meth:`NB201Space.canonicalize` maps every cell to the *representative* of its class: the member whose
gene tuple ``(e1_0, e2_0, e2_1, e3_0, e3_1, e3_2)`` is smallest, so edges that do not matter become
``none``. The representative is itself one of the 15,625 cells, so a tabular benchmark looks up the
representative's row. Isomorphic cells were trained separately upstream and their table entries
differ a little (median spread of CIFAR-10 test accuracy within a class 0.32 points); a search over
canonical ids sees the representative's number only.
"""

from __future__ import annotations

import csv
import functools
import itertools
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field, field_validator

from hwnas.architecture import Architecture, require_generator
from hwnas.errors import InvalidArchitecture
from hwnas.search_spaces.base import (
    TABLE_KEY_COLUMNS,
    CategoricalSpace,
    CellGraph,
    Gene,
    LayerKey,
    SpaceParams,
    UnitCatalog,
    UnitSpec,
    per_arch_cache,
)

if TYPE_CHECKING:  # torch stays out of import time
    import torch.nn as nn

from hwnas.search_spaces.nb201_cell import EDGES, OPS, cell_plan

log = logging.getLogger(__name__)

NUM_CELLS = len(OPS) ** len(EDGES)  # 15,625
_EDGE_NAMES: tuple[str, ...] = tuple(name for name, _, _ in EDGES)
_GENES: tuple[Gene, ...] = tuple(Gene(name, tuple(range(len(OPS)))) for name in _EDGE_NAMES)

#: The six edges as (from, to), for :class:`~hwnas.search_spaces.base.CellGraph`.
_SLOTS: tuple[tuple[int, int], ...] = tuple((frm, to) for _, to, frm in EDGES)
#: Which of OPS[1:] have weights.
_PARAMETRIC: tuple[bool, ...] = tuple(op.startswith("nor_conv") for op in OPS[1:])



def _code(ops: tuple[int, ...]) -> int:
    """Base-5 number of an op tuple (``e1_0`` most significant): ascending codes are ascending tuples."""
    code = 0
    for op in ops:
        code = code * len(OPS) + op
    return code


@functools.lru_cache(maxsize=1)
def _all_ops() -> list[tuple[int, ...]]:
    """Every op tuple, indexed by its code (itertools.product counts in base 5, ``e1_0`` most significant)."""
    return list(itertools.product(range(len(OPS)), repeat=len(EDGES)))


def _ops(code: int) -> tuple[int, ...]:
    """Inverse of :func:`_code`."""
    if not 0 <= code < NUM_CELLS:
        raise ValueError(f"nb201: cell code {code} is out of range 0..{NUM_CELLS - 1}")
    return _all_ops()[code]


def unique_str(ops: tuple[int, ...]) -> str:
    """NAS-Bench-201's unique string of a cell: equal strings are isomorphic (equivalent) cells.

    Args:
        ops: Six op indices in :data:`EDGES` order.

    Returns:
        The output node as an expression over node ``0``: ``#`` is zero, ``(X)@op`` is ``op`` applied to
        ``X``, and ``+`` joins a node's sorted operands.
    """
    nodes = ["0"]
    edge = 0
    for to in (1, 2, 3):
        terms = []
        for frm in range(to):
            op, src = OPS[ops[edge]], nodes[frm]
            edge += 1
            if op == "none" or src == "#":
                terms.append("#")
            elif op == "skip_connect":
                terms.append(src)
            else:
                terms.append(f"({src})@{op}")
        nodes.append("+".join(sorted(terms)))
    return nodes[3]


#: ``op~from`` per edge and op, the pieces of the official string.
_TOKENS: tuple[tuple[str, ...], ...] = tuple(tuple(f"{op}~{frm}" for op in OPS) for _, _, frm in EDGES)


def _cell_str(ops: tuple[int, ...]) -> str:
    """The official string of a cell (uncached: a representative keeps its own, see :meth:`NB201Space.to_str`)."""
    a, b, c, d, e, f = ops
    t0, t1, t2, t3, t4, t5 = _TOKENS
    return f"|{t0[a]}|+|{t1[b]}|{t2[c]}|+|{t3[d]}|{t4[e]}|{t5[f]}|"


#: Per space name, the shared Architecture object of each cell code made so far (see _representative_arch).
_SHARED: dict[str, list[Architecture | None]] = {}


def _representative_arch(space: str, code: int) -> Architecture:
    """One shared Architecture object per cell (its arch_id is computed once), made on first use.

    The object remembers its cell code (a private cache entry, like ``arch_id``'s), so that canonicalizing
    or reading the ops of a sampled cell costs one attribute lookup. A list per space rather than an LRU
    cache: in a search of a cheap benchmark, making each new cell's object was a fifth of the loop's time.
    """
    made = _SHARED.get(space)
    if made is None:
        made = _SHARED[space] = [None] * NUM_CELLS
    arch = made[code]
    if arch is None:
        arch = Architecture.from_row(space, _EDGE_NAMES, _ops(code))  # edge names sort in EDGES order
        arch.__dict__[_CODE_ATTR] = code
        made[code] = arch
    return arch


_CODE_ATTR = "_nb201_representative_code"
_STR_ATTR = "_nb201_cell_str"


@functools.lru_cache(maxsize=1)
def _identity() -> np.ndarray:
    """Every cell its own canonical form (isomorphic cells not merged)."""
    out = np.arange(NUM_CELLS, dtype=np.int32)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=1)
def _single_edge_changes() -> np.ndarray:
    """Per cell code, the codes of its 24 single-edge changes: edge by edge (:data:`EDGES` order), each edge's
    other ops in ascending order."""
    ops = np.array(_all_ops(), dtype=np.int32)  # by code
    codes = np.arange(NUM_CELLS, dtype=np.int32)
    columns = []
    for k in range(len(EDGES)):
        weight = len(OPS) ** (len(EDGES) - 1 - k)  # e1_0 most significant, as in _code
        current = ops[:, k]
        for j in range(len(OPS) - 1):
            columns.append(codes + (j + (j >= current) - current) * weight)  # the j-th op other than the current
    out = np.stack(columns, axis=1)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=1)
def _is_representative() -> list[bool]:
    return (_representatives() == np.arange(NUM_CELLS)).tolist()


@functools.lru_cache(maxsize=1)
def _num_classes() -> int:
    """The number of isomorphism classes: the codes that are their class's representative (its smallest)."""
    return int(np.count_nonzero(_representatives() == np.arange(NUM_CELLS)))


def _fast_ops(arch: Architecture, space: str) -> tuple[int, ...] | None:
    """The op tuple of a well-formed NB201 architecture, or None (then full validation names the problem)."""
    genes = arch.genes
    if arch.space != space or len(genes) != len(EDGES):
        return None
    try:
        ops = tuple(genes[name] for name in _EDGE_NAMES)
    except KeyError:
        return None
    if all(type(op) is int and 0 <= op < len(OPS) for op in ops):
        return ops  # type: ignore[return-value]
    return None


def _term(op: int, src: str) -> str:
    """One operand of a node's sum in :func:`unique_str`'s notation."""
    name = OPS[op]
    if name == "none" or src == "#":
        return "#"
    return src if name == "skip_connect" else f"({src})@{name}"


@functools.lru_cache(maxsize=1)
def _representatives() -> np.ndarray:
    """Per cell code, the code of its class representative (the smallest code with the same unique string).

    The same strings as :func:`unique_str` (a test checks every cell), built edge by edge so that node 1's and
    node 2's expressions are formed once per prefix instead of once per cell.
    """
    first: dict[str, int] = {}
    rep = np.empty(NUM_CELLS, dtype=np.int32)
    n = len(OPS)
    code = 0  # ascending, so the first code seen per class is its smallest
    out0 = [_term(op, "0") for op in range(n)]
    for e10 in range(n):
        node1 = out0[e10]
        out1 = [_term(op, node1) for op in range(n)]
        for e20 in range(n):
            for e21 in range(n):
                node2 = "+".join(sorted((out0[e20], out1[e21])))
                out2 = [_term(op, node2) for op in range(n)]
                for e30 in range(n):
                    t30 = out0[e30]
                    for e31 in range(n):
                        t31 = out1[e31]
                        for e32 in range(n):
                            rep[code] = first.setdefault("+".join(sorted((t30, t31, out2[e32]))), code)
                            code += 1
    rep.flags.writeable = False
    log.debug("nb201: %d isomorphism classes among %d cells", len(first), NUM_CELLS)
    return rep


@functools.lru_cache(maxsize=1)
def _members() -> tuple[np.ndarray, np.ndarray]:
    """(cell codes sorted by class representative, then code; per cell code its class's first index there)."""
    reps = _representatives()
    order = np.lexsort((np.arange(NUM_CELLS), reps))
    start = np.searchsorted(reps[order], reps)
    order.flags.writeable = start.flags.writeable = False
    return order, start


@functools.lru_cache(maxsize=8)
def _read_index_table(path: str, mtime_ns: int, size: int) -> dict[str, int]:
    """Official arch string -> NB201 index, from a CSV with an arch-string column (cached per file version)."""
    del mtime_ns, size  # part of the cache key only
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise ValueError(f"nb201 index table {path} is empty")
        key = next((c for c in TABLE_KEY_COLUMNS if c in header), None)
        if key is None:
            raise ValueError(
                f"nb201 index table {path} has no arch string column ({' or '.join(TABLE_KEY_COLUMNS)}); "
                f"its columns are: {', '.join(header)}"
            )
        key_at = header.index(key)
        index_at = header.index("index") if "index" in header else None
        out: dict[str, int] = {}
        for line, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise ValueError(f"nb201 index table {path}:{line}: {len(row)} cells, the header has {len(header)}")
            out[row[key_at]] = int(row[index_at]) if index_at is not None else line - 2
    return out


class NB201Params(SpaceParams):
    """Parameters of the NAS-Bench-201 network (the defaults are the benchmark's CIFAR network)."""

    resolution: int = Field(32, ge=4, le=4096, description="input height and width in pixels (a multiple of 4)")
    in_chans: int = Field(3, gt=0)
    num_classes: int = Field(10, gt=1)
    channels: int = Field(16, gt=0, description="channels of the first stage; doubled at each reduction")
    cells_per_stage: int = Field(5, ge=1, description="cells in each of the 3 stages")
    merge_isomorphic: bool | None = Field(
        None, description="one architecture per isomorphism class (6,466) or every cell as written (15,625). "
                          "Unset: an experiment merges unless a hardware metric (time, energy, memory) is an "
                          "objective or constraint, since isomorphic cells run differently on hardware; a "
                          "space built directly merges")

    @field_validator("resolution")
    @classmethod
    def _multiple_of_4(cls, v: int) -> int:
        if v % 4:
            raise ValueError("must be a multiple of 4 (two stride-2 reductions with a residual average pool)")
        return v


class NB201Space(UnitCatalog, CategoricalSpace):
    """NAS-Bench-201: a 4-node cell, 6 edges x 5 ops (15,625 cells, 6,466 up to isomorphism).

    With ``merge_isomorphic`` (the default outside an experiment) an architecture is its isomorphism
    class's representative; without it, every cell is its own architecture (canonicalize is the identity),
    for searches whose objectives include hardware metrics: isomorphic cells compute the same function but
    not the same operations (a dead convolution still runs), and their measured latencies differ.
    """

    name = "nb201"
    Params = NB201Params
    params: NB201Params
    #: Parameters that change no network (only which cells count as one): a latency table measured with any
    #: value of them prices this space.
    latency_neutral_params = ("merge_isomorphic",)

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self.merge = self.params.merge_isomorphic is not False

    def prepare(self) -> None:
        """Compute the isomorphism classes and op tuples now (else on first use; about 20 ms)."""
        _representatives()
        _all_ops()

    # -- genes -----------------------------------------------------------------------------------
    def genes(self) -> list[Gene]:
        return list(_GENES)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.params.in_chans, self.params.resolution, self.params.resolution)

    def size(self) -> int:
        """15,625: the cells of the benchmark (see :meth:`unique_size` for the count up to isomorphism)."""
        return NUM_CELLS

    def unique_size(self) -> int:
        """The number of distinct canonical architectures: 6,466 isomorphism classes (15,625 cells unmerged)."""
        return _num_classes() if self.merge else NUM_CELLS

    def _reps(self) -> np.ndarray:
        """Per cell code, the code of its canonical form (its class representative, or itself unmerged)."""
        return _representatives() if self.merge else _identity()

    def ops_of(self, arch: Architecture) -> tuple[int, ...]:
        """The six op indices in :data:`EDGES` order (validated, not canonicalized)."""
        code = arch.__dict__.get(_CODE_ATTR)
        if code is not None and arch.space == self.name:
            return _ops(code)
        memo = self.__dict__.setdefault("_ops_cache", {})
        ops = memo.get(arch)
        if ops is None:
            ops = _fast_ops(arch, self.name)
            if ops is None:
                self.validate(arch)  # raises, naming the offending gene
                ops = tuple(int(arch.genes[name]) for name, _, _ in EDGES)  # type: ignore[arg-type]
            if len(memo) >= NUM_CELLS:
                memo.clear()
            memo[arch] = ops
        return ops

    def zero_choices(self) -> dict[str, tuple[int, ...]]:
        """Every edge gene's ``none`` (index 0 of :data:`OPS`)."""
        return {name: (OPS.index("none"),) for name, _, _ in EDGES}

    def parameter_free_ops(self, arch: Architecture) -> tuple[int, int]:
        """(edges with ``skip_connect`` or ``avg_pool_3x3``, 6): the collapse guard's count.

        ``none`` removes an edge rather than collapsing it to an identity, so it is not counted (DARTS's collapse on
        NAS-Bench-201 is the all-``skip_connect`` cell).
        """
        free = {OPS.index(op) for op in ("skip_connect", "avg_pool_3x3")}
        ops = self.ops_of(arch)
        return sum(op in free for op in ops), len(ops)

    def from_ops(self, ops: tuple[int, ...] | list[int]) -> Architecture:
        """An architecture from six op indices in :data:`EDGES` order (validated, not canonicalized)."""
        if len(ops) != len(EDGES):
            raise InvalidArchitecture(f"nb201: expected {len(EDGES)} edge ops, got {len(ops)}")
        arch = Architecture(self.name, {name: int(op) for (name, _, _), op in zip(EDGES, ops)})
        self.validate(arch)
        return arch

    # -- canonical form ----------------------------------------------------------------------------
    def unique_str(self, arch: Architecture) -> str:
        """NAS-Bench-201's unique string of ``arch`` (equal for isomorphic cells; see the module doc)."""
        return unique_str(self.ops_of(arch))

    def canonicalize(self, arch: Architecture) -> Architecture:
        """The representative of ``arch``'s isomorphism class (its member with the smallest gene tuple); the
        cell itself when isomorphic cells are not merged."""
        code = arch.__dict__.get(_CODE_ATTR)
        if code is not None and arch.space == self.name:  # made by _representative_arch
            if not self.merge or _is_representative()[code]:
                return arch  # canonical already
        memo = self.__dict__.setdefault("_canonical_cache", {})
        found = memo.get(arch)
        if found is not None:
            return found
        code = _code(self.ops_of(arch))
        rep = _representative_arch(self.name, int(self._reps()[code]))
        if len(memo) >= NUM_CELLS:  # bounded: the cells, plus at most as many equal copies
            memo.clear()
        memo[arch] = rep
        return rep

    @property
    def keeps_isomorphs_apart(self) -> bool:
        """True with ``merge_isomorphic: false``."""
        return not self.merge

    def isomorph_representative(self, arch: Architecture) -> Architecture:
        """The representative of ``arch``'s isomorphism class (what :meth:`canonicalize` returns when merging)."""
        if self.merge:
            return self.canonicalize(arch)
        return _representative_arch(self.name, int(_representatives()[_code(self.ops_of(arch))]))

    def isomorphs(self, arch: Architecture) -> list[Architecture]:
        """Every cell of ``arch``'s isomorphism class (``arch`` included), by cell code; merged, its representative."""
        if self.merge:
            return [self.canonicalize(arch)]
        order, start = _members()
        reps = _representatives()
        code = _code(self.ops_of(arch))
        first = int(start[code])
        end = first
        while end < NUM_CELLS and reps[order[end]] == reps[code]:
            end += 1
        return [_representative_arch(self.name, int(c)) for c in order[first:end]]

    samples_uniform_per_gene = True  # sample draws a cell number: every edge's op uniform, as the base class draws

    def sample(self, rng: np.random.Generator) -> Architecture:
        """A uniform cell (every edge op uniform), canonicalized (the same draw as ``sample_many(rng, 1)``)."""
        require_generator(rng, self, "sample")
        return _representative_arch(self.name, int(self._reps()[int(rng.integers(NUM_CELLS))]))

    def sample_many(self, rng: np.random.Generator, n: int) -> list[Architecture]:
        """``n`` uniform cells, canonicalized: one draw of a cell number each (5^6 cells, uniform per edge)."""
        require_generator(rng, self, "sample_many")
        reps = self._reps()[rng.integers(NUM_CELLS, size=n)].tolist()
        return [_representative_arch(self.name, code) for code in reps]

    def distribution(self) -> tuple[list[Architecture], np.ndarray]:
        """The 6,466 class representatives (by cell code) and each class's share of the 5^6 cells (the
        chance that :meth:`sample` draws it); unmerged, the 15,625 cells, each 1/15,625."""
        cached = self.__dict__.get("_distribution")
        if cached is None:
            sizes = np.bincount(self._reps(), minlength=NUM_CELLS)
            codes = np.flatnonzero(sizes)
            probs = sizes[codes] / NUM_CELLS
            probs.flags.writeable = False
            cached = self.__dict__["_distribution"] = (
                [_representative_arch(self.name, int(c)) for c in codes.tolist()], probs)
        return cached

    def mutate(self, arch: Architecture, rng: np.random.Generator) -> Architecture:
        """Change one edge's op so that the isomorphism class changes (uniform over such single-edge changes)."""
        require_generator(rng, self, "mutate")
        options = self._mutations(_code(self.ops_of(self.canonicalize(arch))))
        # every edge into the output node is always live, so options is never empty
        return _representative_arch(self.name, options[int(rng.integers(len(options)))])

    def _mutations(self, code: int) -> tuple[int, ...]:
        """What :meth:`mutate` draws from for cell ``code``: per edge, per other op, the canonical code of that
        change where its class differs (repeats kept: each is one change). Computed once per cell."""
        memo: dict[int, tuple[int, ...]] = self.__dict__.setdefault("_mutation_cache", {})
        found = memo.get(code)
        if found is None:
            reps = self._reps()
            children = reps[_single_edge_changes()[code]]
            found = memo[code] = tuple(children[children != reps[code]].tolist())
        return found

    # -- string form and benchmark index --------------------------------------------------------
    def largest(self) -> Architecture:
        """Every edge ``nor_conv_3x3``: the most parameters and FLOPs."""
        return self.canonicalize(self.from_ops((OPS.index("nor_conv_3x3"),) * len(EDGES)))

    def to_str(self, arch: Architecture) -> str:
        """The official string, e.g. ``|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|...|``."""
        shared = arch.__dict__.get(_CODE_ATTR) is not None and arch.space == self.name
        if shared:  # one of _representative_arch's objects: its string is computed once and kept with it
            text = arch.__dict__.get(_STR_ATTR)
            if text is not None:
                return text
        text = _cell_str(self.ops_of(arch))
        if shared:
            arch.__dict__[_STR_ATTR] = text
        return text

    def from_str(self, text: str) -> Architecture:
        """Parse the official string (the inverse of :meth:`to_str`); the cell is not canonicalized.

        Raises:
            InvalidArchitecture: Naming the node or edge that is malformed.
        """
        if not isinstance(text, str):
            raise InvalidArchitecture(f"nb201: expected an arch string, got {type(text).__name__}")
        parts = text.strip().split("+")
        if len(parts) != 3:
            raise InvalidArchitecture(
                f"nb201 string {text!r}: expected 3 nodes separated by '+', got {len(parts)}"
            )
        genes: dict[str, int] = {}
        for to, part in enumerate(parts, start=1):
            if len(part) < 2 or not (part.startswith("|") and part.endswith("|")):
                raise InvalidArchitecture(f"nb201 string {text!r}: node {to} {part!r} must look like |op~0|...|")
            tokens = part[1:-1].split("|")
            if len(tokens) != to:
                raise InvalidArchitecture(
                    f"nb201 string {text!r}: node {to} has {len(tokens)} edge(s), expected {to}"
                )
            for frm, token in enumerate(tokens):
                where = f"nb201 string {text!r}: edge e{to}_{frm} ({frm}->{to}) {token!r}"
                op, sep, src = token.partition("~")
                if not sep or not src.isdigit():
                    raise InvalidArchitecture(f"{where}: expected op~{frm}")
                if int(src) != frm:
                    raise InvalidArchitecture(f"{where}: input ~{src} should be ~{frm}")
                if op not in OPS:
                    raise InvalidArchitecture(f"{where}: unknown op {op!r} (ops: {', '.join(OPS)})")
                genes[f"e{to}_{frm}"] = OPS.index(op)
        return Architecture(self.name, genes)

    def index(self, arch: Architecture, table: str | os.PathLike[str]) -> int:
        """The official NAS-Bench-201 index (0..15624) of ``arch`` as given (not canonicalized).

        The official order is not computable from the genes (upstream shuffled the cells once), so it is
        read from a published table: any CSV with an ``arch_str`` (or ``ArchitectureString``) column and an
        ``index`` column (or rows in index order), e.g. ``nas-bench-201/nb201_accuracy.csv``. A relative
        path is taken from the current working directory. The table is read once per file version.

        Raises:
            InvalidArchitecture: When the table has no row for the cell.
            FileNotFoundError: When the table does not exist.
            ValueError: When the table has no arch string column or a malformed row.
        """
        mapping = self._index_table(table)
        text = self.to_str(arch)
        try:
            return mapping[text]
        except KeyError:
            raise InvalidArchitecture(f"nb201: {text} is not in the index table {table}") from None

    def from_index(self, index: int, table: str | os.PathLike[str]) -> Architecture:
        """The cell with official index ``index`` (inverse of :meth:`index`; not canonicalized)."""
        mapping = self._index_table(table)
        for text, i in mapping.items():
            if i == index:
                return self.from_str(text)
        raise InvalidArchitecture(f"nb201: index {index} is not in the index table {table}")

    @staticmethod
    def _index_table(table: str | os.PathLike[str]) -> dict[str, int]:
        path = Path(table).expanduser().resolve()
        if not path.is_file():
            raise FileNotFoundError(f"nb201 index table {path} does not exist")
        st = path.stat()
        return _read_index_table(str(path), st.st_mtime_ns, st.st_size)

    # -- network ---------------------------------------------------------------------------------
    def _stages(self) -> list[tuple[int, int]]:
        """(channels, resolution) of the three stages."""
        p = self.params
        return [(p.channels * 2**s, p.resolution // 2**s) for s in range(3)]

    def cell_ops(self, arch: Architecture) -> tuple[str, ...]:
        """Op names per edge of the canonical cell (the cell that :meth:`build` and :meth:`layers` use)."""
        return tuple(OPS[op] for op in self.ops_of(self.canonicalize(arch)))

    def cell_graph(self, arch: Architecture) -> CellGraph:
        """The cell as written: nodes 0 (input) to 3 (output), six slots, ``none`` as no edge."""
        ops = self.ops_of(arch)
        return CellGraph(
            num_nodes=4, inputs=(0,), output=3, slots=_SLOTS,
            slot_ops=tuple(op - 1 for op in ops),  # OPS[0] is none -> -1
            op_names=OPS[1:], parametric=_PARAMETRIC,
        )

    @per_arch_cache
    def layers(self, arch: Architecture) -> list[LayerKey]:
        """Stem, what every cell computes, residual reductions, head.

        Keys: ``nb201:stem:in{c}:out{c}:r{res}``, ``nb201:{op}:c{channels}:r{res}`` per op every cell runs
        (:func:`cell_plan`: live ops only, a pool on a value already pooled once, no skip or pool of a zero node,
        a zero once where a convolution or the output reads it, ``add`` per extra term of a node),
        ``nb201:resblock:in{c}:out{c}:r{res}:s2`` and ``nb201:head:in{c}:cls{n}:r{res}``; ``res`` is the input
        height and width of the unit.
        """
        p = self.params
        ops = cell_plan(self.cell_ops(arch)).work
        stages = self._stages()
        keys = [f"nb201:stem:in{p.in_chans}:out{p.channels}:r{p.resolution}"]
        for s, (c, r) in enumerate(stages):
            if s:
                c_prev, r_prev = stages[s - 1]
                keys.append(f"nb201:resblock:in{c_prev}:out{c}:r{r_prev}:s2")
            for _ in range(p.cells_per_stage):
                keys.extend(f"nb201:{op}:c{c}:r{r}" for op in ops)
        c_last, r_last = stages[-1]
        keys.append(f"nb201:head:in{c_last}:cls{p.num_classes}:r{r_last}")
        return keys

    def _unit_specs(self) -> dict[LayerKey, UnitSpec]:
        """Stem; per stage every live op at the stage's shape and the residual reduction into it; head."""
        p = self.params
        stages = self._stages()
        units: dict[LayerKey, UnitSpec] = {
            f"nb201:stem:in{p.in_chans}:out{p.channels}:r{p.resolution}": ("stem", None, (p.in_chans, p.resolution,
                                                                                          p.resolution))}
        for s, (c, r) in enumerate(stages):
            if s:
                c_prev, r_prev = stages[s - 1]
                units[f"nb201:resblock:in{c_prev}:out{c}:r{r_prev}:s2"] = ("resblock", c_prev, (c_prev, r_prev, r_prev))
            for op in (*OPS[1:], "zero", "add"):
                units[f"nb201:{op}:c{c}:r{r}"] = ("op", (op, c), (c, r, r))
        c_last, r_last = stages[-1]
        units[f"nb201:head:in{c_last}:cls{p.num_classes}:r{r_last}"] = ("head", c_last, (c_last, r_last, r_last))
        return units

    def _build_unit(self, kind: str, spec: Any) -> nn.Module:
        """The stem, one cell op, a residual reduction or the head (BN, ReLU, pool, classifier), as built."""
        import torch.nn as nn

        from hwnas.search_spaces.nb201_modules import ResidualReduction, head, make_op

        p = self.params
        if kind == "stem":
            return nn.Sequential(nn.Conv2d(p.in_chans, p.channels, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(p.channels))
        if kind == "op":
            return make_op(*spec)
        if kind == "resblock":
            return ResidualReduction(spec, spec * 2)
        return head(spec, p.num_classes)

    def build(self, arch: Architecture) -> nn.Module:
        """The NAS-Bench-201 network of the canonical cell, random init (plain torch: timm has no NB201 cell).

        Stem (3x3 conv + BN), three stages of ``cells_per_stage`` cells at ``channels``, 2x, 4x, joined by
        residual stride-2 reduction blocks, then BN + ReLU, global average pool and a linear classifier.
        """
        from hwnas.search_spaces.nb201_modules import NB201Network

        p = self.params
        return NB201Network(cell_ops=self.cell_ops(arch), edges=EDGES, in_chans=p.in_chans, channels=p.channels,
                            cells_per_stage=p.cells_per_stage, num_classes=p.num_classes)
