"""Experiments: YAML -> validated config -> built Experiment -> run loop, journal, outputs, export."""

from hwnas.experiments.api import load_run, prepare, run_experiment
from hwnas.experiments.config import Experiment, ExperimentConfig, build, load_experiment

__all__ = ["Experiment", "ExperimentConfig", "build", "load_experiment", "load_run", "prepare", "run_experiment"]
