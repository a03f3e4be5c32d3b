"""Optional dependencies: a missing one is one line naming the extra that installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from hwnas.errors import HwnasError

__all__ = ["MissingExtra", "require"]


class MissingExtra(HwnasError, ImportError):
    """An optional dependency is not installed (``pip install "hwnas[EXTRA]"`` installs it)."""


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtra` naming the extra to install.

    Args:
        module: The module to import (``pandas``, ``plotly.graph_objects``, ``mlflow``).
        extra: The hwnas extra that installs it (``pandas``, ``plotly``, ``mlflow``).
        what: What needs it, for the message (``Study.trials_dataframe()``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] != top:
            raise  # the package is there but broken (one of its own imports failed): its error says more
        raise MissingExtra(f"{what} needs {top}, which is not installed: pip install \"hwnas[{extra}]\"") from None
