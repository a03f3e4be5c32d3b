"""Experiments: YAML -> validated config -> built Experiment -> run loop, journal, outputs, export.

The names below are imported on first use (PEP 562), so that importing one of the package's modules (the CLI's
parser reading the export formats, pareto.png's drawing process) does not import the whole run machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hwnas.experiments.api import load_run, prepare, run_experiment
    from hwnas.experiments.config import Experiment, ExperimentConfig, build, load_experiment

#: name -> its module
_LAZY = {
    "load_run": "hwnas.experiments.api",
    "prepare": "hwnas.experiments.api",
    "run_experiment": "hwnas.experiments.api",
    "Experiment": "hwnas.experiments.config",
    "ExperimentConfig": "hwnas.experiments.config",
    "build": "hwnas.experiments.config",
    "load_experiment": "hwnas.experiments.config",
}


def __getattr__(name: str) -> Any:
    """The package's names, imported when first used."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hwnas.experiments' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Experiment", "ExperimentConfig", "build", "load_experiment", "load_run", "prepare", "run_experiment"]
