"""Executors: where the expensive evaluations of a batch run (``local``, ``process``, ``ray``).

:mod:`~hwnas.experiments.executors.base` holds what every executor shares (the :class:`Executor` protocol, tasks,
outcomes, pipeline specs a worker rebuilds evaluators from, the ``EXECUTORS`` registry and its list of
built-ins); each built-in executor is a module of its own, imported when its name is first looked up.
"""

from hwnas.experiments.executors.base import (
    EXECUTORS,
    ComponentSpec,
    Executor,
    ExecutorError,
    ExecutorParams,
    Outcome,
    Pipeline,
    PipelineSpec,
    Task,
    check_rebuildable,
    component_spec,
    evaluate_batch,
    evaluate_chain,
    merge_result,
    rebuild_evaluators,
    retry_or_fail,
    shared_files,
    with_local_files,
)

__all__ = [
    "EXECUTORS",
    "ComponentSpec",
    "Executor",
    "ExecutorError",
    "ExecutorParams",
    "Outcome",
    "Pipeline",
    "PipelineSpec",
    "Task",
    "check_rebuildable",
    "component_spec",
    "evaluate_batch",
    "evaluate_chain",
    "merge_result",
    "rebuild_evaluators",
    "retry_or_fail",
    "shared_files",
    "with_local_files",
]

