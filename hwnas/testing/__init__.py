"""Conformance suites every registered component must pass (shipped, like optuna.testing)."""
