"""hwnas: hardware-aware neural architecture search.

Importing this package is cheap (numpy only): torch, onnxruntime and the like load inside the
functions that need them.
"""

from hwnas.architecture import Architecture
from hwnas.errors import (
    ConfigError,
    HwnasError,
    InvalidArchitecture,
    JournalError,
    MissingLatencyEntry,
    RunDirectoryError,
)
from hwnas.objectives import Constraint, Objective, ReferencePoint, Trial, hypervolume, pareto_front, reference_point

__version__ = "0.1.0"

__all__ = [
    "Architecture",
    "ConfigError",
    "Constraint",
    "HwnasError",
    "InvalidArchitecture",
    "JournalError",
    "MissingLatencyEntry",
    "Objective",
    "ReferencePoint",
    "RunDirectoryError",
    "Trial",
    "__version__",
    "hypervolume",
    "pareto_front",
    "reference_point",
]
