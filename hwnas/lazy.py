"""A package's names imported on first use (PEP 562), so that importing the package stays cheap.

A package keeps its ``TYPE_CHECKING`` imports (for mypy and readers) and a table of name -> module, and asks this
module for its ``__getattr__`` and ``__dir__``::

    __getattr__, __dir__ = lazy_exports(__name__, {"run_experiment": "hwnas.experiments.api"}, globals())
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose ``names`` (name -> its module) load on first use.

    Args:
        package: the package's ``__name__``, for the error an unknown name raises.
        names: each lazily exported name and the module that defines it.
        namespace: the package's ``globals()``; a loaded name is stored there, so later reads skip ``__getattr__``.
    """
    table = dict(names)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
