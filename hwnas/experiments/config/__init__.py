"""The experiment file: its schema (:mod:`.schema`), safe YAML with line numbers (:mod:`.yaml_io`), and
:func:`build` (:mod:`.build`), which turns a validated config into an :class:`Experiment` with every component
built and cross-checked."""

from hwnas.experiments.config.build import Experiment, build, load_experiment
from hwnas.experiments.config.schema import (
    BudgetConfig,
    ComponentConfig,
    ConstraintConfig,
    ExecutorConfig,
    ExperimentConfig,
    ExportConfig,
    ObjectiveConfig,
    OutputConfig,
    parse_config,
    pydantic_problems,
)
from hwnas.experiments.config.yaml_io import LoadedYaml, dump_yaml, format_path, load_yaml

__all__ = [
    "BudgetConfig",
    "ComponentConfig",
    "ConstraintConfig",
    "ExecutorConfig",
    "Experiment",
    "ExperimentConfig",
    "ExportConfig",
    "LoadedYaml",
    "ObjectiveConfig",
    "OutputConfig",
    "build",
    "dump_yaml",
    "format_path",
    "load_experiment",
    "load_yaml",
    "parse_config",
    "pydantic_problems",
]
