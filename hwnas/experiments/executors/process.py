"""``process``: a pool of spawned worker processes, each rebuilding the evaluators from their spec."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import HwnasError
from hwnas.experiments.executors.base import (
    ExecutorError,
    ExecutorParams,
    Outcome,
    Pipeline,
    PipelineSpec,
    Task,
    evaluate_chain,
    rebuild_evaluators,
    retry_or_fail,
    stage_evaluators,
)


class ProcessParams(ExecutorParams):
    workers: int = Field(2, ge=1, description="worker processes")
    threads: int = Field(1, ge=1, description="torch CPU threads in each worker")
    max_retries: int = Field(1, ge=0, description="times an evaluation is retried after its worker died")


def _worker_main(conn: Connection, spec_json: str, threads: int) -> None:  # pragma: no cover - runs in a child process
    """A worker: rebuild the evaluators, then evaluate tasks until told to stop."""
    import torch

    torch.set_num_threads(threads)
    try:
        spec = PipelineSpec.from_json(spec_json)
        evaluators = rebuild_evaluators(spec)
    except Exception as exc:
        conn.send(("error", f"{exc}" if isinstance(exc, HwnasError) else f"{type(exc).__name__}: {exc}"))
        return
    try:
        conn.send(("ready", os.getpid()))
        while True:
            msg = conn.recv()
            if msg is None:
                return
            key, arch_dict, stage = msg
            metrics, error, cost = evaluate_chain(stage_evaluators(evaluators, spec.stages, stage),
                                                  Architecture.from_dict(arch_dict))
            conn.send(("result", key, metrics, error, cost))
    except (BrokenPipeError, EOFError, ConnectionResetError):  # the driver is gone (killed): nobody to answer
        return


@dataclass
class _Worker:
    process: Any
    conn: Any
    ready: bool = False
    task: Task | None = None


class ProcessExecutor:
    """A pool of worker processes (spawn): evaluators rebuilt in each from their spec; dead workers replaced."""

    Params = ProcessParams

    def __init__(self, *, workers: int = 2, threads: int = 1, max_retries: int = 1) -> None:
        self.n_workers = workers
        self.threads = threads
        self.max_retries = max_retries
        self._workers: list[_Worker] = []
        self._queue: deque[Task] = deque()
        self._attempts: dict[int, int] = {}
        self._spec_json = ""
        self._deaths_without_result = 0

    def start(self, pipeline: Pipeline) -> None:
        self._spec_json = pipeline.spec.to_json()

    @property
    def worker_pids(self) -> list[int]:
        """PIDs of the live workers (for tests and diagnostics)."""
        return [w.process.pid for w in self._workers if w.process.is_alive()]

    def _spawn(self) -> _Worker:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(child, self._spec_json, self.threads), daemon=True,
                           name="hwnas-worker")
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def submit(self, tasks: Sequence[Task]) -> None:
        self._queue.extend(tasks)
        while len(self._workers) < min(self.n_workers, len(self._queue) + self._busy()):
            self._workers.append(self._spawn())
        self._dispatch()

    def _busy(self) -> int:
        return sum(w.task is not None for w in self._workers)

    def _dispatch(self) -> None:
        for w in self._workers:
            if w.ready and w.task is None and self._queue:
                task = self._queue.popleft()
                self._attempts[task.key] = self._attempts.get(task.key, 0) + 1
                try:
                    w.conn.send((task.key, task.arch.to_dict(), task.stage))
                except (BrokenPipeError, OSError):
                    self._queue.appendleft(task)
                    self._attempts[task.key] -= 1
                    continue
                w.task = task

    def as_completed(self) -> Iterator[Outcome]:
        from multiprocessing.connection import wait

        while self._queue or self._busy():
            self._dispatch()
            waitables: dict[Any, _Worker] = {}
            for w in self._workers:
                waitables[w.conn] = w
                waitables[w.process.sentinel] = w
            for ready in wait(list(waitables)):
                w = waitables[ready]
                if w not in self._workers:
                    continue  # replaced while handling another waitable of this round
                outcome = self._handle(w)
                if outcome is not None:
                    yield outcome

    def _handle(self, w: _Worker) -> Outcome | None:
        msg = None
        try:
            if w.conn.poll():
                msg = w.conn.recv()
        except (EOFError, OSError):
            msg = None
        if msg is None:
            return None if w.process.is_alive() else self._died(w)
        if msg[0] == "error":
            self.close()
            raise ExecutorError(msg[1])
        if msg[0] == "ready":
            w.ready = True
            self._deaths_without_result = 0
            return None
        _, key, metrics, error, cost = msg
        task, w.task = w.task, None
        assert task is not None and task.key == key
        return Outcome(key, metrics, error, cost, attempts=self._attempts.pop(key, 1))

    def _died(self, w: _Worker) -> Outcome | None:
        w.process.join(timeout=5)
        code = w.process.exitcode
        self._workers.remove(w)
        w.conn.close()
        task = w.task
        if not w.ready:
            self._deaths_without_result += 1
            if self._deaths_without_result >= 3:
                self.close()
                raise ExecutorError(f"worker processes keep dying before they are ready (exit code {code})")
        if self._queue or self._busy() or task is not None:
            self._workers.append(self._spawn())
        if task is None:
            return None
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return retry_or_fail(task, self._attempts, self._queue, self.max_retries, f"worker process died ({how})")

    def close(self) -> None:
        for w in self._workers:
            try:
                w.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for w in self._workers:
            w.process.join(timeout=10)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(timeout=5)
            w.conn.close()
        self._workers = []
        self._queue.clear()


