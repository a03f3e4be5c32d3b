"""The SearchSpace protocol and a base class for spaces made of categorical genes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, cast, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from hwnas.architecture import Architecture, FrozenGenes, GeneValue, require_generator
from hwnas.errors import InvalidArchitecture
from hwnas.registry import Registry

if TYPE_CHECKING:  # torch stays out of import time
    import torch.nn as nn

LayerKey = str
"""The unit a latency table is keyed by: a canonical text such as ``mbconv:in16:out24:k5:e4:s2:r8:se0``."""


@dataclass(frozen=True)
class Gene:
    """One categorical gene.

    Args:
        name: Gene name, unique in its space.
        choices: The allowed values when the gene is active.
        inactive: The value the gene takes when another gene switches it off (canonical form).
    """

    name: str
    choices: tuple[int, ...]
    inactive: int | None = None


@runtime_checkable
class SearchSpace(Protocol):
    """A space of architectures. Every stochastic call takes an ``np.random.Generator``.

    ``params`` (the validated ``Params`` model a registered space is built from), ``input_shape`` and ``size`` are
    members for type checkers only: ``isinstance`` does not look for them (it would evaluate the property, and a
    space that builds no networks may raise there), so spaces and plug-ins that lack them keep the capabilities the
    run-time checks give them.
    """

    name: str
    if TYPE_CHECKING:
        @property
        def params(self) -> BaseModel:
            """The validated parameters the space was built from (its class's ``Params`` model)."""
            ...

        @property
        def input_shape(self) -> tuple[int, int, int]:
            """(channels, height, width) of one input image (at the largest resolution where it is a gene)."""
            ...

        def size(self) -> int:
            """The number of members; NotImplementedError where the space does not count them."""
            ...

    def genes(self) -> list[Gene]: ...
    def sample(self, rng: np.random.Generator) -> Architecture: ...
    def validate(self, arch: Architecture) -> None: ...
    def canonicalize(self, arch: Architecture) -> Architecture: ...
    def mutate(self, arch: Architecture, rng: np.random.Generator) -> Architecture: ...
    def crossover(self, a: Architecture, b: Architecture, rng: np.random.Generator) -> Architecture: ...
    def encode(self, arch: Architecture) -> np.ndarray: ...
    def layers(self, arch: Architecture) -> list[LayerKey]: ...
    def build(self, arch: Architecture) -> nn.Module: ...
    def input_shape_of(self, arch: Architecture) -> tuple[int, int, int]: ...


@runtime_checkable
class ActiveGenes(Protocol):
    """Genes that switch others off (:meth:`CategoricalSpace.active_genes`): which genes matter for some values.

    Not a :class:`SearchSpace` sub-protocol: a space has it or not, whatever else it has."""

    def active_genes(self, genes: Mapping[str, Any]) -> set[str]:
        """Names of the genes that matter for these values."""
        ...


@runtime_checkable
class LatencyNeutralParams(Protocol):
    """A space with parameters that change no network (NB201's ``merge_isomorphic``): a latency table or a predictor
    fitted with other values of them still fits."""

    latency_neutral_params: tuple[str, ...]


def neutral_params(space: object) -> tuple[str, ...]:
    """The parameters of ``space`` (a space or its class) that change no network: none unless it declares
    :class:`LatencyNeutralParams`. Tables, predictors and supernet checkpoints made with other values still fit."""
    found = getattr(space, "latency_neutral_params", ())
    return tuple(found) if isinstance(found, (tuple, list)) else ()


@runtime_checkable
class ResolvedClassCount(Protocol):
    """A space whose class count may default from another parameter (FBNet's ``setting``): the count it resolved."""

    num_classes: int


@runtime_checkable
class UnitListedSpace(SearchSpace, Protocol):
    """A space that can list every latency unit its members use (a table can be checked for coverage)."""

    def all_layers(self) -> list[LayerKey]:
        """Every latency unit any member of the space uses."""
        ...


@runtime_checkable
class UnitProfiledSpace(UnitListedSpace, Protocol):
    """A space whose latency units can be built and timed one by one (``nas latency profile``, the board kit)."""

    def build_layer(self, key: LayerKey) -> tuple[nn.Module, tuple[int, ...]]:
        """The module that computes unit ``key`` and the (C, H, W) shape of its input."""
        ...


UnitSpec = tuple[str, Any, tuple[int, ...]]
"""How a space builds one latency unit: (kind, spec, input shape without the batch dimension)."""


class UnitCatalog:
    """Mixin that makes a space a :class:`UnitProfiledSpace` from one listing of its units.

    The space lists every unit once, in :meth:`_unit_specs`, as ``{key: (kind, spec, input shape)}``
    (computed once per instance and kept), and builds a unit's module from its ``(kind, spec)`` in
    :meth:`_build_unit`, from the same helpers its :meth:`build` uses, so that a unit is the very module
    the whole network contains (the conformance suite checks the parameter counts add up).
    """

    name: str

    def _unit_specs(self) -> dict[LayerKey, UnitSpec]:
        raise NotImplementedError

    def _build_unit(self, kind: str, spec: object) -> nn.Module:
        raise NotImplementedError

    def _unit_table(self) -> dict[LayerKey, UnitSpec]:
        table = self.__dict__.get("_unit_table_cache")
        if table is None:
            table = self.__dict__["_unit_table_cache"] = self._unit_specs()
        return table

    def all_layers(self) -> list[LayerKey]:
        """Every latency-table unit any member of the space uses (what ``nas latency profile`` measures)."""
        return list(self._unit_table())

    def build_layer(self, key: LayerKey) -> tuple[nn.Module, tuple[int, ...]]:
        """The module that computes unit ``key`` (random init) and the shape of its input without the batch."""
        found = self._unit_table().get(key)
        if found is None:
            raise InvalidArchitecture(f"{self.name}: {key!r} is not a latency unit of this space")
        kind, spec, shape = found
        return self._build_unit(kind, spec), tuple(shape)


@runtime_checkable
class IntegerVectorSpace(SearchSpace, Protocol):
    """A space with an integer-vector form (choice index per gene): what pymoo's operators work on."""

    def to_indices(self, arch: Architecture) -> np.ndarray: ...
    def from_indices(self, indices: Sequence[int] | np.ndarray) -> Architecture: ...


@runtime_checkable
class StringFormSpace(SearchSpace, Protocol):
    """A space whose members have a published string form (NB201's ``|op~0|+...``): how benchmark rows are keyed."""

    def to_str(self, arch: Architecture) -> str: ...
    def from_str(self, text: str) -> Architecture: ...


@runtime_checkable
class BatchSampledSpace(SearchSpace, Protocol):
    """A space that draws many samples at once (one generator call instead of one per gene and sample)."""

    def sample_many(self, rng: np.random.Generator, n: int) -> list[Architecture]:
        """``n`` independent draws from the distribution of :meth:`sample` (not the same stream of numbers)."""
        ...


@runtime_checkable
class EnumerableSpace(SearchSpace, Protocol):
    """A space small enough to list: every canonical member with the probability that ``sample`` draws it.

    Strategies use it where the space is nearly exhausted, to draw among the members not yet evaluated
    instead of rejecting samples that were (the same distribution, at the cost of one draw).
    """

    def unique_size(self) -> int:
        """The number of canonical members (cheap: the members need not be built)."""
        ...

    def distribution(self) -> tuple[list[Architecture], np.ndarray]:
        """(every canonical member once, in a fixed order; the probability of each under :meth:`sample`,
        summing to 1). Computed once per space; callers must not modify either."""
        ...


@runtime_checkable
class SizedSpace(SearchSpace, Protocol):
    """A space with a named largest member: the reference of relative constraints (``relative_to: largest``)."""

    def largest(self) -> Architecture:
        """The most expensive member by construction (every dimension at its largest), canonical."""
        ...


@runtime_checkable
class ElasticResolutionSpace(SearchSpace, Protocol):
    """A space whose input resolution is a gene (once-for-all's ``r``): a latency table measured at some
    resolutions prices the others by interpolation."""

    def resolution_choices(self) -> tuple[int, ...]:
        """The resolutions the gene allows, ascending."""
        ...

    def resolution_of(self, arch: Architecture) -> int:
        """The input resolution of ``arch``."""
        ...

    def at_resolution(self, arch: Architecture, resolution: int) -> Architecture:
        """``arch`` with its resolution set to ``resolution`` (every other gene kept; not validated)."""
        ...


@runtime_checkable
class CollapseCountingSpace(SearchSpace, Protocol):
    """A cell space that counts the parameter-free operations of a cell: what DARTS+'s collapse guard watches
    (a differentiable search that drifts to skip connections and pooling derives more of them)."""

    def parameter_free_ops(self, arch: Architecture) -> tuple[int, int]:
        """(parameter-free operations, operation slots) of ``arch``'s searched normal cell (NB201's only cell)."""
        ...


@runtime_checkable
class MostProbableSpace(SearchSpace, Protocol):
    """A space whose genes constrain each other (DARTS: a node's two inputs differ) and that finds its most probable
    member under independent per-gene choice probabilities exactly (what a one-shot strategy derives)."""

    def most_probable(self, log_probs: Mapping[str, np.ndarray]) -> Architecture:
        """The canonical member maximising the sum over genes of ``log_probs[gene][choice index]``."""
        ...


@runtime_checkable
class ZeroOpSpace(SearchSpace, Protocol):
    """A cell space with a zero operation (NB201's ``none``): an edge that contributes nothing. One-shot derivation
    excludes it, as DARTS's does, so that no derived cell cuts every path to its output."""

    def zero_choices(self) -> Mapping[str, tuple[int, ...]]:
        """Gene name to the choice values that are the zero op."""
        ...


@runtime_checkable
class NeighbourhoodSpace(SearchSpace, Protocol):
    """A space that lists the neighbours of an architecture: what one mutation can reach (local search)."""

    def neighbours(self, arch: Architecture, rng: np.random.Generator) -> list[Architecture]:
        """Every canonical architecture one gene change away from ``arch``, once each, never ``arch`` itself, in
        a fixed order; ``rng`` draws the values of genes that a change switches on."""
        ...


@runtime_checkable
class IsomorphicSpace(SearchSpace, Protocol):
    """A cell space whose architectures may be kept apart although they compute the same function (NB201 with
    ``merge_isomorphic: false``: isomorphic cells run different operations, so their latencies differ, but they
    train to the same accuracy). A strategy learns and reuses accuracy per class and prices hardware per cell."""

    @property
    def keeps_isomorphs_apart(self) -> bool:
        """True when isomorphic cells are distinct architectures here (canonicalize does not merge them)."""
        ...

    def isomorph_representative(self, arch: Architecture) -> Architecture:
        """The representative of ``arch``'s isomorphism class, whether or not the space merges classes."""
        ...

    def isomorphs(self, arch: Architecture) -> list[Architecture]:
        """The members of ``arch``'s isomorphism class (``arch`` included); merged, the representative alone."""
        ...


@dataclass(frozen=True)
class CellGraph:
    """A cell as a DAG with operations on its edges (NAS-Bench-201, DARTS): what graph predictors read.

    Nodes are numbered in topological order. ``slots`` lists every edge the space allows, as (from, to);
    ``slot_ops`` gives each slot's operation as an index into ``op_names``, or -1 where the slot carries
    no edge (NB201's ``none``). ``parametric`` marks the operations with weights (convolutions).

    Args:
        num_nodes: Nodes of the cell.
        inputs: The input nodes.
        output: The output node.
        slots: Every allowed edge, (from, to), from < to.
        slot_ops: Per slot, an index into ``op_names``, or -1 for no edge.
        op_names: The operations an edge can carry (no "none").
        parametric: Per operation, whether it has weights.
    """

    num_nodes: int
    inputs: tuple[int, ...]
    output: int
    slots: tuple[tuple[int, int], ...]
    slot_ops: tuple[int, ...]
    op_names: tuple[str, ...]
    parametric: tuple[bool, ...]


@runtime_checkable
class CellGraphSpace(SearchSpace, Protocol):
    """A space whose members are cells with operations on edges: graph encodings (paths, GIN) apply."""

    def cell_graph(self, arch: Architecture) -> CellGraph:
        """The cell of ``arch`` as written (not canonicalized) as a DAG with operations on its edges."""
        ...


def int_gene(genes: Mapping[str, GeneValue], name: str) -> int:
    """Gene ``name`` as an int: a categorical space's genes are ints (a validated architecture has no other values)."""
    value = genes[name]
    if isinstance(value, int):
        return value
    raise TypeError(f"gene {name!r} is {value!r}, not an int")


def sample_batch(space: SearchSpace, rng: np.random.Generator, n: int) -> list[Architecture]:
    """``n`` samples of ``space``: its :meth:`BatchSampledSpace.sample_many` where it has one."""
    kind = type(space)
    batched = _BATCH_SAMPLED.get(kind)
    if batched is None:  # a protocol check costs microseconds: once per class
        batched = _BATCH_SAMPLED[kind] = isinstance(space, BatchSampledSpace)
    if batched:
        return cast(BatchSampledSpace, space).sample_many(rng, n)  # checked above (once per class)
    return [space.sample(rng) for _ in range(n)]


_BATCH_SAMPLED: dict[type, bool] = {}


@runtime_checkable
class BalancedSampledSpace(SearchSpace, Protocol):
    """A space that draws an initial design spread over its genes' values (:meth:`CategoricalSpace.sample_balanced`)."""

    def sample_balanced(self, rng: np.random.Generator, n: int) -> list[Architecture]:
        """``n`` draws in which every value of every gene appears as evenly as ``n`` allows."""
        ...


def balanced_batch(space: SearchSpace, rng: np.random.Generator, n: int) -> list[Architecture]:
    """``n`` samples of ``space`` spread over every gene's values (its :meth:`BalancedSampledSpace.sample_balanced`),
    or :func:`sample_batch`'s uniform ones where it has none."""
    if isinstance(space, BalancedSampledSpace):
        return space.sample_balanced(rng, n)
    return sample_batch(space, rng, n)


#: Column names that hold an architecture's string form (:class:`StringFormSpace`) in published benchmark tables
#: (NAS-Bench-201's ``arch_str``, HW-NAS-Bench's ``ArchitectureString``).
TABLE_KEY_COLUMNS: tuple[str, ...] = ("arch_str", "ArchitectureString")

#: The built-in search spaces, each imported when its name is first looked up (plug-ins come from entry points).
BUILTIN_SPACES: dict[str, str] = {
    "convnext": "hwnas.search_spaces.convnext:ConvNeXtSpace",
    "darts": "hwnas.search_spaces.darts:DartsSpace",
    "fbnet": "hwnas.search_spaces.fbnet:FBNetSpace",
    "mbv3": "hwnas.search_spaces.mbv3:MobileNetV3Space",
    "nb201": "hwnas.search_spaces.nb201:NB201Space",
    "ofa_mbv3": "hwnas.search_spaces.ofa:OFAMobileNetV3Space",
    "vit": "hwnas.search_spaces.vit:ViTSpace",
}
SPACES: Registry[SearchSpace] = Registry(kind="search space", entry_point_group="hwnas.spaces",
                                         builtins=BUILTIN_SPACES)

#: Entries kept by the per-space memo of pure per-architecture functions (cleared when full).
CACHE_SIZE = 65_536

F = TypeVar("F", bound=Callable[..., Any])


def per_arch_cache(method: F) -> F:
    """Memoise a pure method ``(self, arch) -> value`` per space instance (bounded; callers get a copy of lists)."""
    key = f"_cache_{method.__name__}"

    @functools.wraps(method)
    def wrapper(self: object, arch: Architecture) -> object:
        memo = self.__dict__.setdefault(key, {})
        found = memo.get(arch)
        if found is None:
            if len(memo) >= CACHE_SIZE:
                memo.clear()
            found = memo[arch] = method(self, arch)
        return list(found) if isinstance(found, list) else found

    return wrapper  # type: ignore[return-value]


def resolved_params(space: SearchSpace, params: Mapping[str, object] | None = None) -> dict[str, Any]:
    """A space's parameters as JSON data, with every parameter left at ``None`` ("the default for the rest of the
    parameters", e.g. FBNet's ``num_classes``) replaced by the value the space resolves it to, where the space
    exposes it as an attribute of the same name. Two spaces build the same networks when these agree, whether a
    parameter was spelled out or left to its default.

    Args:
        space: A registered space (pydantic ``params``).
        params: Parameters of the same space class to resolve instead of ``space``'s own (e.g. a table's); left
            as they are where the space cannot be built from them.
    """
    if params is not None:
        try:
            space = type(space)(**params)
        except Exception:  # parameters of another version of the space: compare them as written
            return dict(params)
    out = dict(space.params.model_dump(mode="json"))
    for key, value in out.items():
        if value is None:
            resolved = getattr(space, key, None)
            if isinstance(resolved, (bool, int, float, str)):
                out[key] = resolved
    return out


def space_differences(name: str, params: Mapping[str, object] | None, space: SearchSpace, *,
                      resolved: bool = False, ignore: Sequence[str] = ()) -> list[tuple[str, object, object]]:
    """Where a file recorded for space ``name`` with ``params`` (a table, a kit, a model) would build other networks
    than ``space``: ``(key, the record's value, the space's value)`` per differing parameter, every one of them,
    or ``("space", name, space.name)`` alone where the names differ.

    Args:
        name: The space's registry name as recorded.
        params: Its parameters as recorded; nothing to compare where None or empty (records older than them).
        space: The space to compare with, resolved (:func:`resolved_params`).
        resolved: ``params`` are already resolved (as a table or a kit records them); else they are resolved as
            ``space``'s class resolves them.
        ignore: Keys not compared (parameters that change no network, a resolution the record interpolates).
    """
    if name != space.name:
        return [("space", name, space.name)]
    if not params:
        return []
    mine = resolved_params(space)
    theirs = dict(params) if resolved else resolved_params(space, params)
    return [(k, theirs.get(k), mine.get(k)) for k in sorted(set(mine) | set(theirs))
            if theirs.get(k) != mine.get(k) and k not in ignore]


def describe_differences(differences: Sequence[tuple[str, object, object]], theirs: str, mine: str) -> str:
    """The differences of :func:`space_differences` on one line, both values of each named:
    ``in_chans 3 (kit) vs 1 (experiment); num_classes 1000 (kit) vs 10 (experiment)``."""
    import json

    def shown(value: object) -> str:
        if value is None:
            return "unset"
        try:
            return json.dumps(value, separators=(", ", ": "))
        except (TypeError, ValueError):
            return repr(value)

    return "; ".join(f"{k} {shown(a)} ({theirs}) vs {shown(b)} ({mine})" for k, a, b in differences)


class SpaceParams(BaseModel):
    """Parameters common to every space; subclasses add their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)


#: The members a space overrides to switch genes off or to refuse combinations of values; a space that overrides none
#: has every gene active and every combination valid, and :meth:`CategoricalSpace.mutate` takes its fast path.
_VALIDITY_RULES = ("active_genes", "validate", "canonicalize", "_canonicalize")


class CategoricalSpace:
    """Base for spaces whose genes are categorical and whose only structure is "some genes are inactive".

    Subclasses define :meth:`genes`, :meth:`layers`, :meth:`build` and the ``input_shape`` property (C, H, W; the
    evaluators that build networks need it); :meth:`active_genes` (default: every gene) where some genes switch
    others off, and :meth:`size` where the count of members is not the product of the genes' choices.
    Sampling draws every gene uniformly then canonicalizes; mutation changes one active gene;
    crossover takes each gene from either parent; encoding is one-hot per gene (fixed width).
    """

    name: str = ""
    Params: ClassVar[type[SpaceParams]] = SpaceParams
    #: A subclass that overrides :meth:`sample` with a faster draw of the same distribution (every gene uniform, then
    #: canonicalized) says so here; :meth:`sample_balanced` then spreads its design as for the base class.
    samples_uniform_per_gene: ClassVar[bool] = False
    params: SpaceParams

    def __init__(self, **params: object) -> None:
        """Validate ``params`` with the space's ``Params`` model (keyword-only; unknown keys are refused)."""
        self.params = self.Params(**params)

    # -- to define -----------------------------------------------------------------------------
    def genes(self) -> list[Gene]:
        raise NotImplementedError

    def active_genes(self, genes: Mapping[str, Any]) -> set[str]:
        """Names of the genes that matter for these values (default: all)."""
        return {g.name for g in self._gene_list()}

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """(channels, height, width) of one input image."""
        raise NotImplementedError(f"{type(self).__name__} defines no input_shape (channels, height, width): a "
                                  "space whose networks are built must say what they take")

    def input_shape_of(self, arch: Architecture) -> tuple[int, int, int]:
        """(channels, height, width) of ``arch``'s input: :attr:`input_shape` unless resolution is a gene."""
        return self.input_shape

    def largest(self) -> Architecture:
        """Every gene at its largest choice, canonical: the most expensive member where a larger value of every
        gene costs more (depth, width, kernel, expand, resolution); spaces where it does not override this."""
        return self.canonicalize(Architecture(self.name, {g.name: max(g.choices) for g in self._gene_list()}))

    # -- derived -------------------------------------------------------------------------------
    def _gene_list(self) -> tuple[Gene, ...]:
        """:meth:`genes`, computed once (genes are fixed by the space's parameters)."""
        cached = self.__dict__.get("_gene_list_cache")
        if cached is None:
            cached = tuple(self.genes())
            self.__dict__["_gene_list_cache"] = cached
        return cached

    def _gene_map(self) -> dict[str, Gene]:
        cached = getattr(self, "_gene_map_cache", None)
        if cached is None:
            cached = {g.name: g for g in self._gene_list()}
            self._gene_map_cache = cached
        return cached

    def size(self) -> int:
        """Number of architectures: distinct gene settings once inactive genes are zeroed (exact).

        Spaces with isomorphisms (NAS-Bench-201, DARTS) may say how many are distinct networks elsewhere.
        """
        raise NotImplementedError(f"{type(self).__name__} does not count its members (no size())")

    def validate(self, arch: Architecture) -> None:
        """Raise :class:`InvalidArchitecture` naming the first gene that is missing, unknown or out of range."""
        if arch.space != self.name:
            raise InvalidArchitecture(f"architecture is from space {arch.space!r}, not {self.name!r}")
        gm = self._gene_map()
        genes = arch.genes
        if len(genes) != len(gm) or not all(name in gm for name in genes):
            unknown = sorted(set(genes) - set(gm))
            if unknown:
                raise InvalidArchitecture(f"{self.name}: unknown gene(s) {', '.join(unknown)}")
            missing = sorted(set(gm) - set(genes))
            raise InvalidArchitecture(f"{self.name}: missing gene(s) {', '.join(missing)}")
        active: set[str] | None = None
        for name, gene in gm.items():
            value = genes[name]
            if value in gene.choices:
                continue
            if active is None:
                active = self.active_genes(genes)
            if name not in active and value == gene.inactive:
                continue
            shown = ", ".join(str(c) for c in gene.choices)
            raise InvalidArchitecture(f"{self.name}: gene {name}={value!r} is out of range (choices: {shown})")

    def canonicalize(self, arch: Architecture) -> Architecture:
        """Validate, then set every inactive gene to its ``inactive`` value (memoised per architecture)."""
        memo: dict[Architecture, Architecture] = self.__dict__.setdefault("_canonical_cache", {})
        found = memo.get(arch)
        if found is not None:
            return found
        if len(memo) >= CACHE_SIZE:
            memo.clear()
        out = memo[arch] = self._canonicalize(arch)
        memo.setdefault(out, out)
        return out

    def _canonicalize(self, arch: Architecture) -> Architecture:
        self.validate(arch)
        active = self.active_genes(arch.genes)
        gm = self._gene_map()
        changed = {name: gm[name].inactive for name, value in arch.genes.items()
                   if name not in active and gm[name].inactive is not None and value != gm[name].inactive}
        if not changed:
            return arch  # canonical already (the common case: nothing switched off, or already zeroed)
        return Architecture(self.name, {**arch.genes, **changed})

    def sample(self, rng: np.random.Generator) -> Architecture:
        """A uniform draw per gene, canonicalized."""
        require_generator(rng, self, "sample")
        genes = {g.name: g.choices[int(rng.integers(len(g.choices)))] for g in self._gene_list()}
        return self.canonicalize(Architecture(self.name, genes))

    def sample_many(self, rng: np.random.Generator, n: int) -> list[Architecture]:
        """``n`` draws of :meth:`sample`'s distribution from one generator call (all genes of all samples).

        A subclass that overrides :meth:`sample` (a different distribution) is sampled one by one through it.
        """
        require_generator(rng, self, "sample_many")
        if type(self).sample is not CategoricalSpace.sample:
            return [self.sample(rng) for _ in range(n)]
        names, counts, lookup, identity, bound = self._sampling_tables()
        if bound:  # one bound for every gene: numpy's fast path (array bounds cost 10x per call)
            draws = rng.integers(0, bound, size=(n, len(names)))
        else:  # floor(U * k) is uniform on 0..k-1
            draws = (rng.random((n, len(names))) * counts).astype(np.int64)
        rows = (draws if identity else lookup[np.arange(len(names)), draws]).tolist()
        archs = Architecture.from_rows(self.name, names, rows)
        if type(self).active_genes is not CategoricalSpace.active_genes:
            return [self.canonicalize(a) for a in archs]
        # every gene active: a draw from the choices is valid and canonical by construction
        memo = self.__dict__.setdefault("_canonical_cache", {})
        if len(memo) + len(archs) > CACHE_SIZE:
            memo.clear()
        for a in archs:
            memo.setdefault(a, a)
        return archs

    def sample_balanced(self, rng: np.random.Generator, n: int) -> list[Architecture]:
        """``n`` draws in which every value of every gene appears as evenly as ``n`` allows: a Latin-hypercube design
        over categorical genes (each gene's column is random permutations of its choices, one after another, cut to
        ``n``; the columns are drawn independently). A row that is not a valid member is replaced by a :meth:`sample`.

        Each value's share is its share under :meth:`sample` (uniform per gene), so the design is the same
        distribution per gene, only spread: ``n`` uniform draws leave each of a gene's ``k`` values out with
        probability ``(1 - 1/k)^n`` (FBNet, 9 ops, 10 draws: 31 %); here none is left out once ``n >= k``. A subclass
        that overrides :meth:`sample` with another distribution is sampled through it instead (one that draws the
        same distribution faster sets :attr:`samples_uniform_per_gene`)."""
        require_generator(rng, self, "sample_balanced")
        if type(self).sample is not CategoricalSpace.sample and not self.samples_uniform_per_gene:
            return [self.sample(rng) for _ in range(n)]
        columns: dict[str, list[Any]] = {}
        for gene in self._gene_list():
            k = len(gene.choices)
            order = np.concatenate([rng.permutation(k) for _ in range(-(-n // k))])[:n] if n > 0 else np.zeros(0)
            columns[gene.name] = [gene.choices[int(i)] for i in order]
        out = []
        for i in range(n):
            try:
                out.append(self.canonicalize(Architecture(self.name, {g: v[i] for g, v in columns.items()})))
            except InvalidArchitecture:  # a row that breaks a validity rule of the space
                out.append(self.sample(rng))
        return out

    def _sampling_tables(self) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, bool, int]:
        """(gene names in name order, choice counts, choice values padded into a table, whether every gene's
        choices are 0..k-1, the common choice count if every gene has the same, else 0), once per space."""
        cached = self.__dict__.get("_sampling_cache")
        if cached is None:
            genes = sorted(self._gene_list(), key=lambda g: g.name)  # Architecture keeps genes by name
            counts = np.array([len(g.choices) for g in genes])
            lookup = np.zeros((len(genes), int(counts.max())), dtype=np.int64)
            for k, g in enumerate(genes):
                lookup[k, : len(g.choices)] = g.choices
            identity = all(g.choices == tuple(range(len(g.choices))) for g in genes)
            bound = int(counts[0]) if (counts == counts[0]).all() else 0
            cached = self.__dict__["_sampling_cache"] = (tuple(g.name for g in genes), counts, lookup, identity,
                                                         bound)
        return cached

    def mutate(self, arch: Architecture, rng: np.random.Generator) -> Architecture:
        """Change one active gene to a different value (the result differs from ``arch``, except in a space where
        no active gene has a second choice: there ``arch`` is the only member it can reach, and is returned)."""
        require_generator(rng, self, "mutate")
        arch = self.canonicalize(arch)
        plain = self.__dict__.get("_plain_cache")
        if plain is None:  # once per space: the rules are the class's
            plain = self.__dict__["_plain_cache"] = all(
                getattr(type(self), rule) is getattr(CategoricalSpace, rule) for rule in _VALIDITY_RULES)
        if plain:
            return self._mutate_all_active(arch, rng)
        names = self.active_genes(arch.genes)  # once, not per gene
        active = [g for g in self._gene_list() if g.name in names and len(g.choices) > 1]
        if not active:
            return arch
        gene = active[int(rng.integers(len(active)))]
        current = arch.genes[gene.name]
        others = [c for c in gene.choices if c != current]
        new = dict(arch.genes)
        new[gene.name] = others[int(rng.integers(len(others)))]
        # a gene that switches others on needs values for them: draw fresh ones where they were inactive
        new_active = self.active_genes(new)
        for g in self._gene_list():
            if g.name in new_active and new[g.name] not in g.choices:
                new[g.name] = g.choices[int(rng.integers(len(g.choices)))]
        return self.canonicalize(Architecture(self.name, new))

    def _mutate_all_active(self, arch: Architecture, rng: np.random.Generator) -> Architecture:
        """:meth:`mutate` of a canonical ``arch`` where every gene is always active: the same draws from ``rng``
        and the same child, without the general path's active-gene sets, copies and checks (a child whose one
        changed value comes from its gene's choices is valid and canonical by construction)."""
        movable = self.__dict__.get("_movable_cache")
        if movable is None:
            movable = self.__dict__["_movable_cache"] = tuple(g for g in self._gene_list() if len(g.choices) > 1)
        if not movable:
            return arch
        gene = movable[int(rng.integers(len(movable)))]
        current = arch.genes[gene.name]
        others = [c for c in gene.choices if c != current]
        value = others[int(rng.integers(len(others)))]
        name = gene.name
        child = Architecture(self.name, FrozenGenes.from_sorted(
            tuple((k, value if k == name else v) for k, v in arch.genes.items())))
        memo: dict[Architecture, Architecture] = self.__dict__.setdefault("_canonical_cache", {})
        if len(memo) >= CACHE_SIZE:
            memo.clear()
        return memo.setdefault(child, child)

    def neighbours(self, arch: Architecture, rng: np.random.Generator) -> list[Architecture]:
        """Every valid canonical architecture one active gene change away, once each (genes in order, then
        values); a gene a change switches on gets a value drawn from ``rng``, as in :meth:`mutate`."""
        require_generator(rng, self, "neighbours")
        arch = self.canonicalize(arch)
        active = self.active_genes(arch.genes)
        out: dict[Architecture, None] = {}
        for gene in self._gene_list():
            if gene.name not in active:
                continue
            for value in gene.choices:
                if value == arch.genes[gene.name]:
                    continue
                new = dict(arch.genes)
                new[gene.name] = value
                new_active = self.active_genes(new)
                for g in self._gene_list():
                    if g.name in new_active and new[g.name] not in g.choices:
                        new[g.name] = g.choices[int(rng.integers(len(g.choices)))]
                try:
                    child = self.canonicalize(Architecture(self.name, new))
                except InvalidArchitecture:  # e.g. a DARTS node fed twice by one input
                    continue
                if child != arch:
                    out.setdefault(child, None)
        return list(out)

    def crossover(self, a: Architecture, b: Architecture, rng: np.random.Generator) -> Architecture:
        """Uniform crossover: each gene from either parent; inactive values are redrawn."""
        require_generator(rng, self, "crossover")
        a, b = self.canonicalize(a), self.canonicalize(b)
        pick = rng.random(len(self._gene_list())) < 0.5
        genes = {g.name: (a.genes[g.name] if p else b.genes[g.name]) for g, p in zip(self._gene_list(), pick)}
        active = self.active_genes(genes)
        for g in self._gene_list():
            if g.name in active and genes[g.name] not in g.choices:
                other = b.genes[g.name] if genes[g.name] == a.genes[g.name] else a.genes[g.name]
                genes[g.name] = other if other in g.choices else g.choices[int(rng.integers(len(g.choices)))]
        return self.canonicalize(Architecture(self.name, genes))

    def encode(self, arch: Architecture) -> np.ndarray:
        """One-hot per gene, all zeros for an inactive gene: width ``sum(len(choices))``."""
        arch = self.canonicalize(arch)
        positions = self.__dict__.get("_encode_cache")
        if positions is None:  # per gene, in gene order: value -> its column
            positions, start = [], 0
            for g in self._gene_list():
                positions.append((g.name, {c: start + i for i, c in enumerate(g.choices)}))
                start += len(g.choices)
            self.__dict__["_encode_cache"] = positions = (tuple(positions), start)
        columns, width = positions
        row = np.zeros(width, dtype=np.float32)
        genes = arch.genes
        for name, column in columns:
            at = column.get(genes[name])
            if at is not None:
                row[at] = 1.0
        return row

    def to_indices(self, arch: Architecture) -> np.ndarray:
        """Choice index per gene (0 for an inactive gene): the integer vector evolutionary libraries use."""
        arch = self.canonicalize(arch)
        return np.array(
            [g.choices.index(arch.genes[g.name]) if arch.genes[g.name] in g.choices else 0 for g in self._gene_list()],
            dtype=np.int64,
        )

    def from_indices(self, indices: Sequence[int] | np.ndarray) -> Architecture:
        """Inverse of :meth:`to_indices` (canonicalized)."""
        gs = self._gene_list()
        if len(indices) != len(gs):
            raise InvalidArchitecture(f"{self.name}: expected {len(gs)} gene indices, got {len(indices)}")
        genes = {}
        for g, i in zip(gs, indices):
            i = int(round(float(i)))
            if not 0 <= i < len(g.choices):
                raise InvalidArchitecture(
                    f"{self.name}: gene {g.name} index {i} is out of range 0..{len(g.choices) - 1}"
                )
            genes[g.name] = g.choices[i]
        return self.canonicalize(Architecture(self.name, genes))

    def describe(self) -> str:
        """One line per gene: name and choices."""
        return "\n".join(f"{g.name}: {list(g.choices)}" for g in self._gene_list())
