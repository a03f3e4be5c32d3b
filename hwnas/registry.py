"""The one registry implementation: named components, duplicate-safe, extensible through entry points."""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from hwnas.errors import ConfigError, InvalidParams, UnknownComponent
from hwnas.fileio import check_name, check_seed

#: A name that becomes a folder (an experiment's, a supernet training's, a sweep's): one rule everywhere.
Name = Annotated[str, AfterValidator(check_name)]
#: A seed: a whole number from 0 to 2**63 - 1 (no bool, no float, no string), in every file and option.
Seed = Annotated[int, BeforeValidator(check_seed)]

if TYPE_CHECKING:
    from importlib.metadata import EntryPoints, SelectableGroups

T = TypeVar("T")
log = logging.getLogger(__name__)


class ComponentSpec(BaseModel):
    """A registered component by name, with its parameters (checked by the component's own model).

    In a file, ``{name: nsga2, params: {pop_size: 12}}`` or just the name: ``nsga2``.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: object) -> object:
        return {"name": value} if isinstance(value, str) else value


class Registry(Generic[T]):
    """Name -> component class; ``T`` is what the components are, the type :meth:`create` returns (a protocol such as
    :class:`~hwnas.search_spaces.SearchSpace`), so that ``SPACES: Registry[SearchSpace]`` holds ``type[SearchSpace]``.

    Nothing is checked against ``T`` at run time: a plug-in class that merely has the protocol's members works (and
    a static type checker checks a class registered with :meth:`register` against ``T``).

    The built-in components are one explicit list per registry, ``name -> "module:attribute"``, imported only
    when their name is first looked up (so a run imports the modules of the components it uses, and no others).
    Third-party components come from entry points (loaded on first lookup) or :meth:`register`.

    Args:
        kind: What the registry holds, used in messages (``"space"``, ``"strategy"``).
        entry_point_group: Entry-point group third-party packages register into
            (e.g. ``hwnas.spaces``); loaded on first lookup.
        builtins: The built-in components, ``{name: "module:attribute"}``, or ``"module:attribute"`` naming such
            a mapping (for a registry whose components live in a room above it: read on first lookup).
    """

    def __init__(self, *, kind: str, entry_point_group: str, builtins: Mapping[str, str] | str | None = None) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self._items: dict[str, type[T]] = {}
        self._builtin_source = builtins
        self._lazy: dict[str, str] | None = None  # built-ins not imported yet: name -> "module:attribute"
        self._broken: dict[str, str] = {}  # plug-in name -> why its entry point did not load
        self._entry_points_loaded = False

    def _builtins(self) -> dict[str, str]:
        """The built-ins not imported yet (the list itself is read on first use)."""
        if self._lazy is None:
            source = self._builtin_source
            if isinstance(source, str):
                source = _resolve(source)
            self._lazy = {name: target for name, target in dict(source or {}).items() if name not in self._items}
        return self._lazy

    def _load_builtin(self, name: str) -> bool:
        """Import built-in ``name`` and register it; False when ``name`` is not a built-in waiting to load."""
        target = self._builtins().pop(name, None)
        if target is None:
            return False
        obj: type[T] = _resolve(target)
        self.register(name)(obj)
        return True

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Decorator that registers a component under ``name`` (a second, different one is an error)."""

        def deco(obj: type[T]) -> type[T]:
            if name in self._builtins():  # a built-in of that name: the one to compare with
                self._load_builtin(name)
            existing = self._items.get(name)
            if existing is not None and existing is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered ({existing!r})")
            self._items[name] = obj
            try:
                setattr(obj, "registry_name", name)  # noqa: B010 (an attribute the protocols do not declare)
            except (AttributeError, TypeError):
                pass
            return obj

        return deco

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for ep in _installed_entry_points(tuple(sys.path)).select(group=self.entry_point_group):
            if ep.name in self._items or ep.name in self._builtins():
                continue
            try:
                self.register(ep.name)(ep.load())
            except Exception as exc:  # a broken plug-in must not break the platform
                log.warning("could not load %s %r from entry point %s: %s", self.kind, ep.name, ep.value, exc)
                self._broken[ep.name] = f"{ep.value}: {type(exc).__name__}: {' '.join(str(exc).split())}"

    def get(self, name: str) -> type[T]:
        """The component registered as ``name``; an :class:`UnknownComponent` suggests close names."""
        self._load_entry_points()
        if name not in self._items:
            self._load_builtin(name)
        try:
            return self._items[name]
        except KeyError:
            if name in self._broken:
                raise UnknownComponent(f"{self.kind} {name!r} is a plug-in that failed to load "
                                       f"({self._broken[name]})") from None
            close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            known = ", ".join(self.names())
            raise UnknownComponent(f"unknown {self.kind} {name!r}{hint} (known: {known})") from None

    def params_model(self, name: str) -> type[BaseModel]:
        """The component's ``Params`` model (the protocols do not declare it: every registered component has one).

        Raises:
            UnknownComponent: No component of that name (close names suggested).
            ConfigError: The component has no ``Params`` pydantic model.
        """
        cls = self.get(name)  # duck-typed: any component class (or factory) with a ``Params`` model
        params_model = getattr(cls, "Params", None)
        if not (isinstance(params_model, type) and issubclass(params_model, BaseModel)):
            raise ConfigError(f"{self.kind} {name!r} ({getattr(cls, '__module__', '?')}."
                              f"{getattr(cls, '__qualname__', cls)!s}) has no Params model: a component declares "
                              "its parameters as a pydantic model in a class attribute Params "
                              "(docs/guides/evaluator-and-strategy.md)")
        return params_model

    def validate_params(self, name: str, params: Mapping[str, object] | None = None) -> BaseModel:
        """The component's ``Params`` model validated from ``params``.

        Raises:
            UnknownComponent: No component of that name (close names suggested).
            ConfigError: The component has no ``Params`` pydantic model.
            InvalidParams: The parameters do not validate; carries pydantic's error list for callers that
                point at file lines.
        """
        from pydantic import ValidationError

        model = self.params_model(name)
        try:
            return model.model_validate(dict(params or {}))
        except ValidationError as exc:
            raise InvalidParams(self.kind, name, exc.errors(), model=model) from None

    def create(self, name: str, params: Mapping[str, object] | None = None, /, **context: Any) -> T:
        """The one factory: build component ``name`` from its validated ``params`` and what the caller provides.

        ``context`` holds the keyword arguments that are not parameters (a space for a strategy, an
        ``EvalContext`` for an evaluator); the component's constructor receives both.

        Args:
            name: Registered name.
            params: Parameters, validated with the component's ``Params`` model (defaults filled in).
            **context: Extra keyword arguments for the constructor.
        """
        model = self.validate_params(name, params)
        factory: Callable[..., T] = self.get(name)  # its keyword arguments: the context and ``Params``' fields
        return factory(**context, **model.model_dump())

    def __contains__(self, name: object) -> bool:
        self._load_entry_points()
        return name in self._items or name in self._builtins()

    def names(self) -> list[str]:
        """Registered names, sorted (built-ins included, without importing them)."""
        self._load_entry_points()
        return sorted({*self._items, *self._builtins()})

    def items(self) -> Iterator[tuple[str, type[T]]]:
        """(name, component) pairs, sorted by name (every built-in imported)."""
        for name in self.names():
            yield name, self.get(name)


@functools.lru_cache(maxsize=4)
def _installed_entry_points(path: tuple[str, ...]) -> EntryPoints | SelectableGroups:
    """Every installed entry point: one scan of the installed distributions (a few milliseconds each) for all
    registries, not one per registry; scanned again when ``sys.path`` changes (the key)."""
    del path  # the cache key only
    return entry_points()


def _resolve(target: str) -> Any:
    """The object named ``"package.module:attribute"``."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def first_doc_line(obj: object) -> str:
    """The first line of an object's docstring (for ``nas list``)."""
    doc = (getattr(obj, "__doc__", None) or "").strip()
    if not doc:
        return ""
    # the first sentence of the first paragraph, however the docstring wraps it
    paragraph = " ".join(line.strip() for line in doc.split("\n\n", 1)[0].splitlines())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]
