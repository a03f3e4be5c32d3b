"""hwnas: hardware-aware neural architecture search.

Importing this package is cheap (numpy only): torch, onnxruntime and the like load inside the
functions that need them, and the Python API below is imported on first use.

The names a user needs:

- :func:`create_run` (a new run from a YAML file, a dict or an :class:`ExperimentConfig`) and :func:`load_run`
  (an existing run directory) give a :class:`Study`: ``optimize()`` (again, with ``n_trials=``, to extend the
  budget), ``trials``, ``best_trials``, ``trials_dataframe()``, ``summary``, ``export()``, ``report()``;
- :func:`run_experiment`: a run end to end in one call (what ``nas run`` does);
- :class:`ExperimentConfig`: the typed config (the same pydantic models the YAML is validated against);
- :class:`Architecture`, :class:`Trial`, :class:`Objective`, :class:`Constraint`: the values a run is made of;
- :class:`CallbackError`, :class:`ConfigError`, :class:`HwnasError` ...: the errors hwnas raises on purpose;
- :mod:`hwnas.visualization` (Plotly figures) and :mod:`hwnas.experiments.tracking` (the MLflow callback),
  imported by name.
"""

from typing import TYPE_CHECKING

from hwnas.architecture import Architecture
from hwnas.errors import (
    ConfigError,
    HwnasError,
    InvalidArchitecture,
    JournalError,
    MissingLatencyEntry,
    RunDirectoryError,
)
from hwnas.lazy import lazy_exports
from hwnas.objectives import Constraint, Objective, ReferencePoint, Trial, hypervolume, pareto_front, reference_point

__version__ = "0.1.0"

if TYPE_CHECKING:
    from hwnas.experiments.api import run_experiment
    from hwnas.experiments.callbacks import CallbackError
    from hwnas.experiments.config import ExperimentConfig
    from hwnas.experiments.study import Study, create_run, load_run
    from hwnas.extras import MissingExtra

#: The Python API, imported on first use (``import hwnas`` stays cheap): name -> its module.
_LAZY = {
    "create_run": "hwnas.experiments.study",
    "load_run": "hwnas.experiments.study",
    "Study": "hwnas.experiments.study",
    "run_experiment": "hwnas.experiments.api",
    "ExperimentConfig": "hwnas.experiments.config",
    "CallbackError": "hwnas.experiments.callbacks",
    "MissingExtra": "hwnas.extras",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "Architecture",
    "CallbackError",
    "ConfigError",
    "Constraint",
    "ExperimentConfig",
    "HwnasError",
    "InvalidArchitecture",
    "JournalError",
    "MissingExtra",
    "MissingLatencyEntry",
    "Objective",
    "ReferencePoint",
    "RunDirectoryError",
    "Study",
    "Trial",
    "__version__",
    "create_run",
    "hypervolume",
    "load_run",
    "pareto_front",
    "reference_point",
    "run_experiment",
]
