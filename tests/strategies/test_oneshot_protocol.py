"""The OneShotStrategy protocol and its shipped suite, exercised on a tiny DARTS-like strategy written here.

The strategy trains the tiny elastic-width supernet of ``tests/supernet/test_protocol.py`` (loaded
from that file, so both tests share one reference) with a toy per-choice latency table. The
registry may be empty; the suite runs for real on the reference, and each deliberately broken
variant shows the rule that catches it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pydantic import Field

from hwnas.architecture import Architecture
from hwnas.strategies import ONE_SHOT_STRATEGIES, OneShotStrategy
from hwnas.strategies.differentiable import LinearLatency
from hwnas.strategies.oneshot import ArchLatencyModel, OneShotBase, OneShotParams
from hwnas.testing import check_one_shot_strategy


def _load_tiny_supernet_module() -> Any:
    path = Path(__file__).resolve().parents[1] / "supernet" / "test_protocol.py"
    spec = importlib.util.spec_from_file_location("_hwnas_tiny_supernet_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tiny = _load_tiny_supernet_module()


class ToyLatency:
    """Additive per-choice costs over the tiny space's genes: wider layers and tanh are slower."""

    COSTS_MS: ClassVar[dict[str, dict[int, float]]] = {
        "width1": {4: 0.2, 8: 0.4, 16: 0.8},
        "act1": {0: 0.1, 1: 0.3, 2: 0.2},
        "width2": {4: 0.2, 8: 0.4, 16: 0.8},
    }
    OVERHEAD_MS = 0.5

    def predict_ms(self, archs: Sequence[Architecture]) -> np.ndarray:
        return np.array([self.OVERHEAD_MS + sum(c[a.genes[g]] for g, c in self.COSTS_MS.items()) for a in archs])


def _forever(data: Iterable[Any]) -> Iterator[Any]:
    while True:
        yield from data


class TinyDartsParams(OneShotParams):
    weight_lr: float = Field(0.05, gt=0)
    arch_lr: float = Field(0.05, gt=0)


class TinyDarts(OneShotBase):
    """First-order DARTS: softmax over each gene's choices; weights on train batches, logits on valid batches."""

    Params = TinyDartsParams

    def __init__(self, *, space: Any, rng: np.random.Generator, latency_weight: float = 0.0,
                 weight_lr: float = 0.05, arch_lr: float = 0.05) -> None:
        super().__init__(space=space, rng=rng, latency_weight=latency_weight)
        self.weight_lr, self.arch_lr = weight_lr, arch_lr
        self.logits = {k: self.initial_logits(v.shape) for k, v in self.logits.items()}

    def initial_logits(self, shape: tuple[int, ...]) -> np.ndarray:
        return 1e-3 * self.rng.standard_normal(shape)

    def latency_term(self, weights: Mapping[str, torch.Tensor], latency_model: Any) -> torch.Tensor:
        return LinearLatency(self.space, latency_model, self.derive()).expected(weights)

    def warmup(self, supernet: Any, train_data: Iterable[Any], *, steps: int) -> None:
        """Weight-only steps on the uniform mixture."""
        w_opt = torch.optim.SGD(supernet.parameters(), lr=self.weight_lr, momentum=0.9)
        train = _forever(train_data)
        supernet.train()
        uniform = {k: torch.full((len(v),), 1.0 / len(v)) for k, v in self.logits.items()}
        for _ in range(steps):
            x, y = next(train)
            w_opt.zero_grad()
            F.cross_entropy(supernet.forward_relaxed(x, uniform), y).backward()
            w_opt.step()

    def search(self, supernet: Any, train_data: Iterable[Any], valid_data: Iterable[Any], *, steps: int,
               latency_model: ArchLatencyModel | None = None,
               landing_model: ArchLatencyModel | None = None) -> list[Architecture]:
        alphas = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in self.logits.items()}
        w_opt = torch.optim.SGD(supernet.parameters(), lr=self.weight_lr, momentum=0.9)
        a_opt = torch.optim.Adam(list(alphas.values()), lr=self.arch_lr)
        train, valid = _forever(train_data), _forever(valid_data)
        supernet.train()
        for _ in range(steps):
            x, y = next(train)
            w_opt.zero_grad()
            soft = {k: torch.softmax(a.detach(), 0) for k, a in alphas.items()}
            F.cross_entropy(supernet.forward_relaxed(x, soft), y).backward()
            w_opt.step()
            x, y = next(valid)
            a_opt.zero_grad()
            soft = {k: torch.softmax(a, 0) for k, a in alphas.items()}
            loss = F.cross_entropy(supernet.forward_relaxed(x, soft), y)
            if latency_model is not None and self.latency_weight > 0:
                loss = loss + self.latency_weight * self.latency_term(soft, latency_model)
            loss.backward()
            a_opt.step()
            self.logits = {k: a.detach().double().numpy().copy() for k, a in alphas.items()}
        return [self.derive()]


# -- deliberately broken variants, each caught by one rule of the suite ----------------------------


class OutOfSpace(TinyDarts):
    def search(self, *args: Any, **kwargs: Any) -> list[Architecture]:
        super().search(*args, **kwargs)
        return [Architecture("tiny-mlp", {"width1": 5, "act1": 0, "width2": 4})]


class Unseeded(TinyDarts):
    def initial_logits(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.random.default_rng().standard_normal(shape)


class NotLearning(TinyDarts):
    def search(self, supernet: Any, train_data: Iterable[Any], valid_data: Iterable[Any], *, steps: int,
               latency_model: Any = None) -> list[Architecture]:
        return [self.derive()]


class LatencyLoving(TinyDarts):
    def latency_term(self, weights: Mapping[str, torch.Tensor], latency_model: Any) -> torch.Tensor:
        return -super().latency_term(weights, latency_model)


class IgnoresLatency(TinyDarts):
    def latency_term(self, weights: Mapping[str, torch.Tensor], latency_model: Any) -> torch.Tensor:
        return torch.zeros(())


class LazyWarmup(TinyDarts):
    def warmup(self, supernet: Any, train_data: Iterable[Any], *, steps: int) -> None:
        pass


class WarmupMovesLogits(TinyDarts):
    def warmup(self, supernet: Any, train_data: Iterable[Any], *, steps: int) -> None:
        super().warmup(supernet, train_data, steps=steps)
        self.logits = {k: v + 1.0 for k, v in self.logits.items()}


class Repeats(TinyDarts):
    def search(self, *args: Any, **kwargs: Any) -> list[Architecture]:
        first = super().search(*args, **kwargs)
        return first + first


# -- fixtures ----------------------------------------------------------------------------------------


def toy_batches(seed: int, n_batches: int, batch: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Inputs and the labels of a fixed random teacher network (wide and nonlinear: wider students fit it better)."""
    teacher = np.random.default_rng(99)
    w1, w2 = teacher.standard_normal((16, 32)), teacher.standard_normal((32, 3))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        x = rng.standard_normal((batch, 1, 4, 4))
        y = np.argmax(np.tanh(x.reshape(batch, -1) @ w1) @ w2, axis=1)
        out.append((torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)))
    return out


TRAIN = toy_batches(1, 8)
VALID = toy_batches(2, 4)


def run_suite(cls: type[TinyDarts], **kwargs: Any) -> None:
    space = tiny.TinySpace()
    check_one_shot_strategy(
        lambda g, w: cls(space=space, rng=g, latency_weight=w),
        lambda: tiny.make_supernet(),
        TRAIN,
        VALID,
        ToyLatency(),
        **kwargs,
    )


# -- tests -------------------------------------------------------------------------------------------


def test_reference_strategy_passes_the_suite():
    run_suite(TinyDarts)


def test_reference_satisfies_the_protocols():
    space = tiny.TinySpace()
    strategy = TinyDarts(space=space, rng=np.random.default_rng(0))
    assert isinstance(strategy, OneShotStrategy)
    assert isinstance(ToyLatency(), ArchLatencyModel)
    assert set(strategy.architecture_parameters()) == {g.name for g in space.genes()}


def test_reference_derives_the_fastest_architecture_under_a_heavy_latency_term():
    space = tiny.TinySpace()
    strategy = TinyDarts(space=space, rng=np.random.default_rng(0), latency_weight=10.0)
    found = strategy.search(tiny.make_supernet(), TRAIN, VALID, steps=30, latency_model=ToyLatency())
    assert found[0] == Architecture("tiny-mlp", {"width1": 4, "act1": 0, "width2": 4})


def test_architecture_parameters_are_a_copy():
    strategy = TinyDarts(space=tiny.TinySpace(), rng=np.random.default_rng(0))
    params = strategy.architecture_parameters()
    params["width1"][:] = 99.0
    assert not np.array_equal(strategy.architecture_parameters()["width1"], params["width1"])


def test_base_derive_takes_the_argmax_of_every_gene():
    strategy = OneShotBase(space=tiny.TinySpace(), rng=np.random.default_rng(0))
    strategy.logits = {"width1": np.array([0.0, 0.0, 1.0]), "act1": np.array([0.0, 2.0, 1.0]),
                       "width2": np.array([3.0, 0.0, 1.0])}
    assert strategy.derive() == Architecture("tiny-mlp", {"width1": 16, "act1": 1, "width2": 4})


def test_params_validate_latency_weight():
    assert OneShotParams().latency_weight == 0.0
    with pytest.raises(ValueError):
        OneShotParams(latency_weight=-1.0)


@pytest.mark.parametrize(
    ("cls", "match"),
    [
        (OutOfSpace, "not a member of the space"),
        (Unseeded, "not deterministic"),
        (NotLearning, "did not change"),
        (LatencyLoving, "slower architecture"),
        (IgnoresLatency, "no effect"),
        (Repeats, "twice"),
        (LazyWarmup, "did not train the shared weights"),
        (WarmupMovesLogits, "changed the architecture parameters"),
    ],
)
def test_suite_catches_broken_strategies(cls, match):
    with pytest.raises(AssertionError, match=match):
        run_suite(cls)


def test_registry_kind_and_group():
    assert ONE_SHOT_STRATEGIES.kind == "one-shot strategy"
    assert ONE_SHOT_STRATEGIES.entry_point_group == "hwnas.one_shot_strategies"


@pytest.mark.parametrize("name", ONE_SHOT_STRATEGIES.names())
def test_registered_one_shot_strategy_conformance(name):
    space = tiny.TinySpace()
    # A sampled relaxation (Gumbel, binarised paths) follows another sample path as soon as a weight changes the
    # logits, so a small weight's effect is within its sampling noise: those are judged on clearly separated weights.
    stochastic = ONE_SHOT_STRATEGIES.get(name).stochastic
    check_one_shot_strategy(
        lambda g, w: ONE_SHOT_STRATEGIES.create(name, {"latency_weight": w}, space=space, rng=g),
        lambda: tiny.make_supernet(),
        TRAIN,
        VALID,
        ToyLatency(),
        latency_weights=(0.0, 1.0, 10.0) if stochastic else (0.0, 0.1, 1.0, 10.0),
    )


def test_strategies_import_does_not_import_supernet_latency_or_torch():
    code = ("import sys, hwnas.strategies, hwnas.strategies.oneshot; "
            "print(sorted(m for m in ('torch', 'hwnas.supernet', 'hwnas.latency') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
