"""Conformance checks for evaluators, and a fake evaluator for testing runners and executors.

``fake`` is registered when this module is imported (``import hwnas.testing``), never by ``import hwnas``:
it is a test double with real behaviour — deterministic metrics from the architecture's encoding, an
optional sleep (so results finish out of order), deterministic failures, and a worker that really kills
itself with SIGKILL the first time (or every time) it meets chosen architectures.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.errors import EvaluationError
from hwnas.evaluation import (
    EVALUATORS,
    EvalContext,
    Evaluator,
    EvaluatorParams,
    InstantEvaluator,
    Metrics,
    evaluate_each,
    stable_fingerprint,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from hwnas.search_spaces.base import SearchSpace


def _unit(arch: Architecture, salt: str) -> float:
    """A number in [0, 1) fixed by the architecture (stable across processes)."""
    return int(hashlib.sha256(f"{salt}:{arch.arch_id}".encode()).hexdigest()[:8], 16) / 2**32


class FakeParams(EvaluatorParams):
    cheap: bool = False
    sleep_s: float = Field(0.0, ge=0, description="longest sleep per evaluation (each arch sleeps a fixed share)")
    fail_fraction: float = Field(0.0, ge=0, le=1, description="share of architectures that raise EvaluationError")
    nan_fraction: float = Field(0.0, ge=0, le=1, description="share of architectures that return NaN")
    kill_fraction: float = Field(0.0, ge=0, le=1, description="share of architectures whose worker SIGKILLs itself")
    kill_once_dir: str | None = Field(None, description="kill only on the first attempt: a marker file per arch here")
    prefix: str = Field("fake", min_length=1, description="metric names: <prefix>_score, <prefix>_cost_ms")


@EVALUATORS.register("fake")
class FakeEvaluator:
    """A test double: deterministic metrics from the encoding; optional sleep, failures, NaNs and SIGKILL."""

    Params = FakeParams

    def __init__(self, *, context: EvalContext, cheap: bool = False, sleep_s: float = 0.0, fail_fraction: float = 0.0,
                 nan_fraction: float = 0.0, kill_fraction: float = 0.0, kill_once_dir: str | None = None,
                 prefix: str = "fake") -> None:
        self.space = context.space
        self.params = FakeParams(cheap=cheap, sleep_s=sleep_s, fail_fraction=fail_fraction, nan_fraction=nan_fraction,
                                 kill_fraction=kill_fraction, kill_once_dir=kill_once_dir, prefix=prefix)
        self.cheap = cheap
        self.provides: tuple[str, ...] = (f"{prefix}_score", f"{prefix}_cost_ms")
        width = self.space.encode(self.space.sample(np.random.default_rng(0))).shape[0]
        self._w = np.random.default_rng(123).standard_normal((2, width))

    def fingerprint(self) -> str:
        return stable_fingerprint("fake", self.params.model_dump())

    def _one(self, arch: Architecture) -> Metrics:
        p = self.params
        if _unit(arch, "kill") < p.kill_fraction:
            marker = Path(p.kill_once_dir) / arch.arch_id if p.kill_once_dir else None
            if marker is None or not marker.exists():
                if marker is not None:
                    marker.parent.mkdir(parents=True, exist_ok=True)
                    marker.write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
        if p.sleep_s:
            time.sleep(p.sleep_s * _unit(arch, "sleep"))
        if _unit(arch, "fail") < p.fail_fraction:
            raise EvaluationError(f"fake failure for {arch.arch_id}")
        e = self.space.encode(arch)
        score = math.nan if _unit(arch, "nan") < p.nan_fraction else float(self._w[0] @ e)
        return {self.provides[0]: score, self.provides[1]: float(np.abs(self._w[1]) @ e) + 1.0}

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        return evaluate_each(self._one, archs)


def check_evaluator(factory: Callable[[], Evaluator], space: SearchSpace, *, n: int = 4, deterministic: bool = True,
                    params: Mapping[str, object] | None = None, params_model: type[BaseModel] | None = None) -> None:
    """The Evaluator contract.

    Args:
        factory: Builds a fresh evaluator (as the experiment would, from its name, params and context).
        space: The space the architectures are drawn from.
        n: Architectures evaluated.
        deterministic: Whether equal inputs must give equal numbers (False for wall-clock measurements).
        params: The evaluator's resolved params; with ``params_model``, checked to survive a JSON round trip
            (what a worker process rebuilds it from).
        params_model: The evaluator's ``Params`` class.
    """
    ev = factory()
    assert isinstance(ev, Evaluator), "not an Evaluator (provides, cheap, fingerprint(), evaluate())"
    assert isinstance(ev.provides, tuple) and ev.provides, "provides must be a non-empty tuple of metric names"
    assert all(isinstance(m, str) and m for m in ev.provides), "metric names must be non-empty strings"
    assert len(set(ev.provides)) == len(ev.provides), "a metric is provided twice"
    assert isinstance(ev.cheap, bool), "cheap must be a bool"
    if isinstance(ev, InstantEvaluator):
        assert isinstance(ev.instant, bool), "instant must be a bool"
        assert not ev.instant or deterministic, \
            "an instant evaluator is evaluated in batches by the local executor: it must be deterministic"
    fp = ev.fingerprint()
    assert isinstance(fp, str) and fp, "fingerprint() must be a non-empty string"
    assert factory().fingerprint() == fp, "two evaluators built from the same spec have different fingerprints"
    if params is not None and params_model is not None:
        again = params_model.model_validate(json.loads(json.dumps(params))).model_dump()
        assert again == params_model.model_validate(params).model_dump(), "params do not survive a JSON round trip"
    rng = np.random.default_rng(0)
    archs = [space.canonicalize(space.sample(rng)) for _ in range(n)]
    batch = ev.evaluate(archs)
    assert isinstance(batch, list) and len(batch) == len(archs), "evaluate() must return one result per architecture"
    for arch, res in zip(archs, batch):
        if isinstance(res, BaseException):
            continue
        assert isinstance(res, dict), f"result for {arch.arch_id} is {type(res).__name__}, not a dict"
        assert set(res) <= set(ev.provides), f"returns metrics it does not provide: {set(res) - set(ev.provides)}"
        assert all(isinstance(v, (int, float)) for v in res.values()), "metric values must be numbers"
    if deterministic:
        single = [ev.evaluate([a])[0] for a in archs]
        for b, s in zip(batch, single):
            if isinstance(b, BaseException):
                assert isinstance(s, BaseException), "a batched failure succeeds alone"
            else:
                assert not isinstance(s, BaseException) and b.keys() == s.keys(), "batched and single results differ"
                assert all(b[k] == s[k] or (math.isnan(b[k]) and math.isnan(s[k])) for k in b), \
                    "batched and single evaluation give different numbers"
        assert ev.fingerprint() == fp, "the fingerprint changed after evaluating"
