"""Experiments: YAML -> validated config -> built Experiment -> run loop, journal, outputs, export.

The names below are imported on first use (PEP 562), so that importing one of the package's modules (the CLI's
parser reading the export formats, pareto.png's drawing process) does not import the whole run machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwnas.lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = ["Experiment", "ExperimentConfig", "build", "load_experiment", "load_run", "prepare", "run_experiment"]
