"""``local``: expensive evaluations in this process, one after another (the default)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import Field

from hwnas.evaluation import InstantEvaluator
from hwnas.experiments.executors.base import (
    ExecutorParams,
    Outcome,
    Pipeline,
    Task,
    evaluate_batch,
    evaluate_chain,
)


class LocalParams(ExecutorParams):
    threads: int | None = Field(None, ge=1, description="torch CPU threads while evaluating (default: torch's own)")


class LocalExecutor:
    """In this process, one evaluation after another (the default); a chain of
    :class:`~hwnas.evaluation.InstantEvaluator` instances evaluates every queued task in one call each."""

    Params = LocalParams

    def __init__(self, *, threads: int | None = None) -> None:
        self.threads = threads
        self._queue: deque[Task] = deque()
        self._pipeline: Pipeline | None = None
        self._prev_threads: int | None = None
        self._instant = False

    def start(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self._instant = bool(pipeline.evaluators) and all(
            isinstance(ev, InstantEvaluator) and ev.instant for _, ev in pipeline.evaluators)
        if self.threads is not None and pipeline.evaluators:
            import torch

            self._prev_threads = torch.get_num_threads()
            torch.set_num_threads(self.threads)

    def submit(self, tasks: Sequence[Task]) -> None:
        self._queue.extend(tasks)

    def as_completed(self) -> Iterator[Outcome]:
        if self._instant and len(self._queue) > 1:
            tasks = list(self._queue)
            self._queue.clear()
            for stage in sorted({t.stage for t in tasks}):  # one call per evaluator and stage
                of_stage = [t for t in tasks if t.stage == stage]
                results = evaluate_batch(self._stage(stage), [t.arch for t in of_stage])
                for task, (metrics, error, cost) in zip(of_stage, results):
                    yield Outcome(task.key, metrics, error, cost)
            return
        while self._queue:
            task = self._queue.popleft()
            metrics, error, cost = evaluate_chain(self._stage(task.stage), task.arch)
            yield Outcome(task.key, metrics, error, cost)

    def _stage(self, stage: int) -> list[tuple[str, Any]]:
        return self._pipeline.stage(stage) if self._pipeline is not None else []

    def close(self) -> None:
        self._queue.clear()
        if self._prev_threads is not None:
            import torch

            torch.set_num_threads(self._prev_threads)
            self._prev_threads = None


