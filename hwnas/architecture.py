"""The Architecture value: a frozen, hashable, JSON-serialisable point of a search space."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

GeneValue = int | tuple[int, ...]


class ArchitectureDict(TypedDict):
    """The JSON form of an :class:`Architecture` (:meth:`Architecture.to_dict`): tuples of ints as lists."""

    space: str
    genes: dict[str, int | list[int]]

#: The canonical JSON encoder (no spaces); key order is the dicts' own (see ``Architecture._json``).
_CANONICAL = json.JSONEncoder(separators=(",", ":"))


def _freeze_value(name: str, value: object) -> GeneValue:
    if isinstance(value, bool):
        raise TypeError(f"gene {name!r}: booleans are not gene values (use 0/1)")
    if isinstance(value, (int,)) or (hasattr(value, "__index__") and not isinstance(value, float)):
        return int(value)
    if isinstance(value, (list, tuple)):
        return tuple(int(_freeze_value(name, v)) for v in value)  # type: ignore[arg-type]
    raise TypeError(f"gene {name!r}: expected an int or a sequence of ints, got {type(value).__name__}")


def require_generator(rng: object, owner: object, method: str) -> None:
    """Raise a one-line TypeError naming ``owner.method`` unless ``rng`` is a ``numpy.random.Generator`` (a seed or a
    legacy ``RandomState`` would otherwise fail deep inside with an AttributeError). The message is formatted only
    on failure: the check sits in sampling paths."""
    if not isinstance(rng, np.random.Generator):
        who = getattr(owner, "name", None) or type(owner).__name__
        raise TypeError(f"{who}.{method}: rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
                        f"got {type(rng).__name__}")


@functools.lru_cache(maxsize=64)
def _row_template(space: str, names: tuple[str, ...]) -> str:
    """``%``-template of the canonical JSON of an architecture with int genes ``names`` (see ``from_rows``)."""
    def text(s: str) -> str:  # a JSON string, with any % doubled for the % operator
        return _CANONICAL.encode(s).replace("%", "%%")

    genes = ",".join(f"{text(name)}:%d" for name in names)
    return f'{{"genes":{{{genes}}},"space":{text(space)}}}'


class FrozenGenes(Mapping[str, GeneValue]):
    """A read-only, hashable mapping of gene name to value, ordered by name."""

    __slots__ = ("_dict", "_hash", "_items")

    def __init__(self, genes: Mapping[str, object]) -> None:
        items = tuple(sorted((str(k), _freeze_value(str(k), v)) for k, v in genes.items()))
        self._items = items
        self._dict = dict(items)
        self._hash: int | None = None

    @classmethod
    def from_sorted(cls, items: tuple[tuple[str, GeneValue], ...]) -> FrozenGenes:
        """From ``(name, value)`` pairs already sorted by name with frozen values (ints, tuples of ints).

        The fast path for a space that builds genes from its own choices; nothing is checked.
        """
        out = cls.__new__(cls)
        out._items = items
        out._dict = dict(items)
        out._hash = None
        return out

    def __getitem__(self, key: str) -> GeneValue:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._items)
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenGenes):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._dict == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(self._dict)


@dataclass(frozen=True, init=False)
class Architecture:
    """One architecture of a named search space.

    Args:
        space: Registry name of the search space.
        genes: Gene name to value (an int, or a tuple of ints).
    """

    space: str
    genes: FrozenGenes = field()

    def __init__(self, space: str, genes: Mapping[str, object]) -> None:
        object.__setattr__(self, "space", str(space))
        object.__setattr__(self, "genes", genes if isinstance(genes, FrozenGenes) else FrozenGenes(genes))

    @classmethod
    def from_sorted(cls, space: str, items: tuple[tuple[str, GeneValue], ...]) -> Architecture:
        """The fast constructor for spaces: ``items`` are ``(name, value)`` pairs sorted by name whose values
        are already ints (or tuples of ints), e.g. taken from the space's own gene choices. Unchecked."""
        return cls(space, FrozenGenes.from_sorted(items))

    @classmethod
    def from_rows(cls, space: str, names: tuple[str, ...], rows: Iterable[Sequence[int]]) -> list[Architecture]:
        """Many architectures of one space whose genes are ``names`` (sorted) with the int values of each row:
        the batch constructor for a space that samples many at once. Unchecked, like :meth:`from_sorted`.

        The canonical JSON (:attr:`arch_id`'s input) of every row is formatted from one template per
        ``(space, names)``: a quarter of the cost of encoding each architecture's genes.
        """
        template = _row_template(space, names)
        out = []
        for row in rows:
            values = tuple(row)
            arch = cls(space, FrozenGenes.from_sorted(tuple(zip(names, values))))
            arch.__dict__["_json"] = template % values  # the cached_property's slot: computed once, here
            out.append(arch)
        return out

    @classmethod
    def from_row(cls, space: str, names: tuple[str, ...], values: tuple[int, ...]) -> Architecture:
        """One architecture of :meth:`from_rows` (the same object, the same canonical JSON) without the batch's
        per-call overhead: for a space that makes its members one at a time on first use. Unchecked."""
        arch = cls(space, FrozenGenes.from_sorted(tuple(zip(names, values))))
        arch.__dict__["_json"] = _row_template(space, names) % values
        return arch

    def to_dict(self) -> ArchitectureDict:
        """The JSON form: ``{"space": ..., "genes": {...}}`` with tuples as lists."""
        return {
            "space": self.space,
            "genes": {k: list(v) if isinstance(v, tuple) else v for k, v in self.genes._items},
        }

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys, no spaces): the input of :attr:`arch_id` (computed once)."""
        return self._json

    @functools.cached_property
    def _json(self) -> str:
        # json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")) without the sort (a test checks they
        # agree): "genes" comes before "space", the genes are kept sorted by name, and tuples encode as lists.
        return _CANONICAL.encode({"genes": self.genes._dict, "space": self.space})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Architecture:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(data, Mapping) or "space" not in data or "genes" not in data:
            raise ValueError("an architecture is a mapping with keys 'space' and 'genes'")
        return cls(data["space"], data["genes"])

    @classmethod
    def from_json(cls, text: str) -> Architecture:
        """Inverse of :meth:`to_json`."""
        return cls.from_dict(json.loads(text))

    @functools.cached_property
    def arch_id(self) -> str:
        """16 hex digits of the SHA-256 of the canonical JSON: stable across processes and machines.

        Computed once per instance (the value is frozen).
        """
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def replace(self, **genes: object) -> Architecture:
        """A copy with some genes changed."""
        merged: dict[str, object] = dict(self.genes)
        merged.update(genes)
        return Architecture(self.space, merged)
