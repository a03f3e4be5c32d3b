"""The ``ray`` executor: expensive evaluations as Ray actors on a Ray cluster (``pip install -e ".[ray]"``).

``executor: {name: ray, address: local | auto | HOST:PORT | ray://HOST:PORT, max_concurrent: N,
resources_per_eval: {CPU: 1, GPU: 0.25, jetson_orin: 1}}``

Each of ``max_concurrent`` actors rebuilds the expensive evaluators once from the run's
:class:`~hwnas.experiments.executors.PipelineSpec` and evaluates one architecture at a time. The spec, the
dataset (loaded once on the driver at the space's input resolution) and the large read-only files the
evaluators list (a supernet checkpoint) go through Ray's object store once and are shared by every actor, not
sent per task; a space whose networks take several input resolutions leaves each actor to load the resolutions
it meets from the dataset's path. The driver alone writes the journal, as with every
executor. An actor that dies mid-evaluation (its worker process killed, its node lost) is replaced and the
evaluation retried up to ``max_retries`` times, then recorded as failed; the run goes on.

Checked before the first trial: Ray is installed (else one line naming the extra), the address answers within
``connect_timeout_s`` (no hang on an unreachable one), some live node offers every resource of
``resources_per_eval`` (when the cluster holds fewer such evaluations at once than ``max_concurrent``, that
many actors run, with a warning), and every actor rebuilt its evaluators with the driver's fingerprints within
``ready_timeout_s``.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.cluster import ClusterError, capacity, connect, import_ray, offered_resources
from hwnas.errors import ConfigError
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
    shared_files,
    stage_evaluators,
    with_local_files,
)

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from hwnas.architecture import ArchitectureDict
    from hwnas.data import ImageData

log = logging.getLogger(__name__)


class RayParams(ExecutorParams):
    address: str = Field("local", description="local (start a Ray instance in this process), auto (found as Ray "
                                              "finds it: RAY_ADDRESS, the last ray start, a raylet here), "
                                              "HOST:PORT (a head node's GCS) or ray://HOST:PORT (Ray Client)")
    max_concurrent: int = Field(2, ge=1, description="actors, i.e. evaluations running at once")
    resources_per_eval: dict[str, float] = Field(
        default_factory=lambda: {"CPU": 1.0},
        description="Ray resources each evaluation holds: CPU, GPU (fractions allowed) and custom ones a node "
                    "advertises (ray start --resources '{\"jetson_orin\": 1}')")
    max_retries: int = Field(1, ge=0, description="times an evaluation is retried after its actor died")
    threads: int = Field(1, ge=1, description="torch CPU threads in each actor")
    connect_timeout_s: float = Field(15.0, gt=0, description="how long to wait for the cluster's address")
    ready_timeout_s: float = Field(300.0, gt=0, description="how long actors may take to start and rebuild "
                                                            "the evaluators")


class _RayWorker:
    """The body of one actor: the evaluators rebuilt once, then one architecture per call."""

    def __init__(self, spec_json: str, threads: int, data: dict[int, ImageData] | None,
                 files: dict[str, tuple[str, bytes]]) -> None:
        import shutil
        import tempfile

        import torch

        torch.set_num_threads(threads)
        self.error: str | None = None
        folder = Path(tempfile.mkdtemp(prefix="hwnas-shared-")) if files else None
        try:
            spec = PipelineSpec.from_json(spec_json)
            if folder is not None:  # the shipped checkpoints, written once for this actor
                spec = with_local_files(spec, files, folder)
            self.evaluators = rebuild_evaluators(spec, data=data)
            self.stages = spec.stages
        except Exception as exc:  # reported by ready(), so the driver stops with the worker's own message
            self.evaluators = []
            self.stages = ()
            self.error = str(exc)
        finally:
            # rebuilt evaluators are prepared (a supernet's weights are in memory): the copy is not read again,
            # and an actor is killed rather than stopped, so it would be left behind in the node's temp folder
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    def ready(self) -> tuple[str | None, int]:
        return self.error, os.getpid()

    def evaluate(self, key: int, arch: ArchitectureDict,
                 stage: int = 0) -> tuple[int, dict[str, float], str | None, float]:
        metrics, error, cost = evaluate_chain(stage_evaluators(self.evaluators, self.stages, stage),
                                              Architecture.from_dict(arch))
        return key, metrics, error, cost


class RayExecutor:
    """Ray actors on a Ray cluster (a local one by default); evaluators rebuilt in each from their spec."""

    Params = RayParams

    def __init__(self, *, address: str = "local", max_concurrent: int = 2,
                 resources_per_eval: dict[str, float] | None = None, max_retries: int = 1, threads: int = 1,
                 connect_timeout_s: float = 15.0, ready_timeout_s: float = 300.0) -> None:
        self.address = address
        self.max_concurrent = max_concurrent
        self.resources = dict(resources_per_eval if resources_per_eval is not None else {"CPU": 1.0})
        self.max_retries = max_retries
        self.threads = threads
        self.connect_timeout_s = connect_timeout_s
        self.ready_timeout_s = ready_timeout_s
        self._ray: Any = None
        self._owns_ray = False
        self._actor_cls: Any = None
        self._spec_ref: Any = None
        self._data_ref: Any = None
        self._files_ref: Any = None
        self._idle: deque[Any] = deque()
        self._pids: dict[Any, int] = {}
        self._running: dict[Any, tuple[Task, Any]] = {}  # result ref -> (task, actor)
        self._queue: deque[Task] = deque()
        self._attempts: dict[int, int] = {}

    # -- setup --------------------------------------------------------------------------------------------

    def start(self, pipeline: Pipeline) -> None:
        ray = self._ray = import_ray()
        cpus = int(max(1.0, self.resources.get("CPU", 1.0)) * self.max_concurrent + 0.999)
        try:
            self._owns_ray = connect(self.address, num_cpus=cpus, timeout_s=self.connect_timeout_s)
        except ClusterError as exc:
            raise ExecutorError(str(exc)) from None
        wanted = {k: float(v) for k, v in self.resources.items()}
        room = capacity(ray.nodes(), wanted)
        if room == 0:
            offered = offered_resources(ray.nodes())
            self.close()
            raise ConfigError(f"executor.resources_per_eval {wanted} is offered by no live node of the Ray "
                              f"cluster (resources there: {', '.join(offered) or 'none'})")
        if room < self.max_concurrent:
            log.warning("the Ray cluster holds %d evaluation(s) with resources %s at once, not max_concurrent=%d: "
                        "running %d", room, wanted, self.max_concurrent, room)
        self._spec_ref = ray.put(pipeline.spec.to_json())  # once; every actor reads it from the object store
        self._data_ref = ray.put(self._dataset(pipeline.spec))  # the dataset too: read once, here
        self._files_ref = ray.put({k: (p.name, p.read_bytes()) for k, p in shared_files(pipeline.spec).items()})
        self._actor_cls = ray.remote(_RayWorker)
        actors = [self._new_actor() for _ in range(min(room, self.max_concurrent))]
        self._await_ready(actors)

    def _new_actor(self) -> ActorHandle:
        custom = {k: v for k, v in self.resources.items() if k not in ("CPU", "GPU")}
        return self._actor_cls.options(num_cpus=self.resources.get("CPU", 1.0),
                                       num_gpus=self.resources.get("GPU", 0.0), resources=custom or None,
                                       max_restarts=0, max_concurrency=1).remote(self._spec_ref, self.threads,
                                                                                 self._data_ref, self._files_ref)

    @staticmethod
    def _dataset(spec: PipelineSpec) -> dict[int, ImageData] | None:
        """The dataset at the space's input resolution, loaded on the driver for the object store; None without
        a dataset or for a space whose networks take several resolutions (each actor then loads what it needs)."""
        if not spec.dataset:
            return None
        from hwnas.data import DataConfig, DataSource
        from hwnas.search_spaces import SPACES

        space = SPACES.create(spec.space.name, spec.space.params)
        try:
            resolution = int(tuple(space.input_shape)[-1])
        except (AttributeError, NotImplementedError, TypeError, IndexError):
            return None
        return {resolution: DataSource(DataConfig(**spec.dataset))(resolution)}

    def _await_ready(self, actors: Sequence[ActorHandle]) -> None:
        ray = self._ray
        try:
            answers = ray.get([a.ready.remote() for a in actors], timeout=self.ready_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise ExecutorError(f"Ray actors did not start within {self.ready_timeout_s:g} s (the cluster has "
                                f"no room for them, or rebuilding the evaluators takes longer: raise "
                                "executor.ready_timeout_s)") from None
        except Exception as exc:
            self.close()
            raise ExecutorError(f"Ray actors could not start: {type(exc).__name__}: {str(exc)[:300]}") from None
        for actor, (error, pid) in zip(actors, answers):
            if error is not None:
                self.close()
                raise ExecutorError(error)
            self._pids[actor] = pid
            self._idle.append(actor)

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live actors (for tests and diagnostics)."""
        return list(self._pids.values())

    # -- running --------------------------------------------------------------------------------------------

    def submit(self, tasks: Sequence[Task]) -> None:
        self._queue.extend(tasks)
        self._dispatch()

    def _dispatch(self) -> None:
        while self._queue and self._idle:
            task, actor = self._queue.popleft(), self._idle.popleft()
            self._attempts[task.key] = self._attempts.get(task.key, 0) + 1
            ref = actor.evaluate.remote(task.key, task.arch.to_dict(), task.stage)
            self._running[ref] = (task, actor)

    def as_completed(self) -> Iterator[Outcome]:
        ray = self._ray
        while self._queue or self._running:
            self._dispatch()
            done, _ = ray.wait(list(self._running), num_returns=1)
            ref = done[0]
            task, actor = self._running.pop(ref)
            try:
                key, metrics, error, cost = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                outcome = self._died(task, actor, exc)
                if outcome is not None:
                    yield outcome
                continue
            except ray.exceptions.RayTaskError as exc:  # the evaluation itself raised past evaluate_chain
                self._idle.append(actor)
                yield Outcome(task.key, {}, f"ray task: {str(exc.cause if exc.cause else exc)[:300]}", 0.0,
                              self._attempts.pop(task.key, 1))
                continue
            self._idle.append(actor)
            assert key == task.key
            yield Outcome(key, metrics, error, cost, attempts=self._attempts.pop(key, 1))

    def _died(self, task: Task, actor: ActorHandle, exc: Exception) -> Outcome | None:
        """Replace a dead actor; retry its evaluation or record it failed after ``max_retries`` retries."""
        self._pids.pop(actor, None)
        self._await_ready([self._new_actor()])
        return retry_or_fail(task, self._attempts, self._queue, self.max_retries,
                             f"Ray actor died ({type(exc).__name__})")

    def close(self) -> None:
        ray = self._ray
        if ray is None:
            return
        for actor in [*self._idle, *(a for _, a in self._running.values())]:
            try:
                ray.kill(actor)
            except Exception:  # already dead
                pass
        self._idle.clear()
        self._running.clear()
        self._queue.clear()
        self._pids.clear()
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False
        self._ray = None
