"""The OneShotStrategy protocol: differentiable search over a weight-sharing supernet.

A one-shot strategy holds architecture parameters (one vector of logits per gene, over that gene's
choices) and trains them together with a :class:`~hwnas.supernet.RelaxedSupernet`'s shared
weights: the weights on ``train_data``, the architecture parameters on ``valid_data`` (the bilevel
split of DARTS, FBNet, GDAS and ProxylessNAS), optionally with a latency term built from a latency
model's per-unit costs. It then *derives* architectures, which it hands back like any strategy's
proposals: the runner evaluates them as it evaluates every other architecture.

How the four published methods fit:

- DARTS: ``forward_relaxed`` with ``softmax(logits)``; derive by argmax.
- FBNet: ``softmax`` of Gumbel-perturbed logits with a temperature schedule; the latency term is
  the expected latency ``sum_gene softmax(logits_gene) @ cost_ms[gene]`` (per-choice costs from the model).
- GDAS: hard one-hot Gumbel samples with a straight-through gradient, same call.
- ProxylessNAS: binarised one-hot paths with a straight-through gradient, same expected-latency term.

Registered one-shot strategies are built as
``ONE_SHOT_STRATEGIES.create(name, params, space=space, rng=generator)``; every ``Params`` has
``latency_weight``. Nothing heavy is imported here: torch, :mod:`hwnas.supernet` and
:mod:`hwnas.latency` appear only in type hints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hwnas.architecture import Architecture
from hwnas.registry import Registry

if TYPE_CHECKING:
    import torch

    from hwnas.objectives import Trial
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.supernet.base import RelaxedSupernet

#: The built-in one-shot strategies, each imported when its name is first looked up (plug-ins come from entry points).
BUILTIN_ONE_SHOT_STRATEGIES: dict[str, str] = {
    "darts": "hwnas.strategies.differentiable:Darts",
    "fbnet": "hwnas.strategies.differentiable:FBNet",
    "gdas": "hwnas.strategies.differentiable:Gdas",
    "pc_darts": "hwnas.strategies.differentiable:PCDarts",
    "proxyless": "hwnas.strategies.differentiable:Proxyless",
}
ONE_SHOT_STRATEGIES: Registry[OneShotStrategy] = Registry(kind="one-shot strategy",
                                                          entry_point_group="hwnas.one_shot_strategies",
                                                          builtins=BUILTIN_ONE_SHOT_STRATEGIES)


@runtime_checkable
class ArchLatencyModel(Protocol):
    """What a one-shot strategy needs from a latency model: whole-network predictions.

    A :class:`~hwnas.latency.LatencyModel` (a table, a learned or few-shot model) provides it, and so does any
    cheap evaluator of a latency metric through the runner. The strategies linearise it around the current
    architecture (one prediction per gene and choice: the per-choice costs of FBNet's lookup table and
    ProxylessNAS's expected-latency term, :class:`~hwnas.strategies.differentiable.LinearLatency`). A model
    that cannot price a unit raises :class:`~hwnas.errors.MissingLatencyEntry` naming it, never 0.
    """

    def predict_ms(self, archs: Sequence[Architecture]) -> Sequence[float] | np.ndarray:
        """Predicted latency in ms of each architecture."""
        ...


@runtime_checkable
class RoundsLatencyModel(ArchLatencyModel, Protocol):
    """A measuring latency model that times networks side by side: a landing by measurement compares candidates
    with an anchor in the same rounds (:meth:`measure_rounds`), which on a machine whose speed drifts holds far
    better than timings taken one network at a time (``ort_latency``'s evaluator through the runner)."""

    def measure_rounds(self, archs: Sequence[Architecture], rounds: int) -> Sequence[Sequence[float]]:
        """``rounds`` rows of one timing (ms) per architecture, every architecture timed once per round."""
        ...


@runtime_checkable
class OneShotStrategy(Protocol):
    """Trains architecture parameters with a supernet's shared weights and derives architectures.

    Deterministic given its generator's seed, the supernet's initial weights and the data order. ``record`` holds
    what the last :meth:`search` did (its ``history`` of checks, why it ``stopped``), written to ``oneshot.json``.
    """

    record: dict[str, Any]

    def prepare_latency(self, model: ArchLatencyModel) -> None:
        """Price every choice with ``model`` and check the strategy's latency target against it, before any
        training (what :meth:`search` does first, callable on its own to fail early).

        Raises:
            MissingLatencyEntry: The model cannot price some choice (every missing key named).
            ConfigError: A target the space cannot reach (named, with the fastest member's latency).
        """
        ...

    def architecture_parameters(self) -> dict[str, np.ndarray]:
        """A copy of the architecture parameters: gene name to a vector of logits over its choices."""
        ...

    def warmup(
        self, supernet: RelaxedSupernet, train_data: Iterable[tuple[torch.Tensor, torch.Tensor]], *, steps: int
    ) -> None:
        """``steps`` weight-only steps before the architecture is trained (a sweep's searches share them)."""
        ...

    def search(
        self,
        supernet: RelaxedSupernet,
        train_data: Iterable[tuple[torch.Tensor, torch.Tensor]],
        valid_data: Iterable[tuple[torch.Tensor, torch.Tensor]],
        *,
        steps: int,
        latency_model: ArchLatencyModel | None = None,
        landing_model: ArchLatencyModel | None = None,
    ) -> list[Architecture]:
        """Train for ``steps`` steps, then derive.

        Args:
            supernet: Its shared weights are trained in place.
            train_data: Re-iterable (input, label) batches for the shared weights, cycled as needed.
            valid_data: Re-iterable (input, label) batches for the architecture parameters.
            steps: Optimisation steps (the budget).
            latency_model: Prices choices for the latency term (weighted by the strategy's
                ``latency_weight``, or a budget); None for no latency term.
            landing_model: Budget mode: what the derived network's latency is judged by (a measurement); None to
                judge by ``latency_model``.

        Returns:
            Distinct canonical members of the space, :meth:`derive`'s architecture first.
        """
        ...

    def derive(self) -> Architecture:
        """The architecture the current parameters select (e.g. the argmax choice of every gene), canonical."""
        ...


class OneShotParams(BaseModel):
    """Parameters every one-shot strategy has; subclasses add their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_weight: float = Field(
        0.0, ge=0.0, description="weight of the latency term (per ms) in the architecture loss"
    )


class OneShotBase:
    """Holds the space, generator and latency weight; derives an architecture from per-gene logits."""

    Params: ClassVar[type[OneShotParams]] = OneShotParams

    def __init__(self, *, space: SearchSpace, rng: np.random.Generator, latency_weight: float = 0.0) -> None:
        self.space = space
        self.rng = rng
        self.latency_weight = float(latency_weight)
        self.logits: dict[str, np.ndarray] = {g.name: np.zeros(len(g.choices)) for g in space.genes()}
        self.record: dict[str, Any] = {}

    def prepare_latency(self, model: ArchLatencyModel) -> None:
        """Check that ``model`` prices the current derived architecture (a strategy with a latency target
        overrides this to price every choice and check the target).

        Raises:
            MissingLatencyEntry: The model cannot price it (the keys named).
        """
        model.predict_ms([self.derive()])

    def architecture_parameters(self) -> dict[str, np.ndarray]:
        """A copy of the per-gene logits."""
        return {k: v.copy() for k, v in self.logits.items()}

    def derive(self) -> Architecture:
        """The argmax choice of every gene, canonicalized (genes switched off take their inactive value)."""
        genes = {g.name: g.choices[int(np.argmax(self.logits[g.name]))] for g in self.space.genes()}
        return self.space.canonicalize(Architecture(self.space.name, genes))


class DerivedArchitectures:
    """The ask/tell face of a finished one-shot search: its derived architectures, in order, then nothing.

    The runner evaluates them like any strategy's proposals (the configured evaluators, the journal, the
    front); ``exhausted()`` tells it that no more will come, so it stops instead of waiting for new ones.

    Args:
        archs: The derived architectures (one per search of a sweep), duplicates allowed.
    """

    def __init__(self, archs: Sequence[Architecture]) -> None:
        self.archs = list(archs)
        self._next = 0

    def ask(self, n: int) -> list[Architecture]:
        out = self.archs[self._next:self._next + n]
        self._next += len(out)
        return out

    def tell(self, trials: Sequence[Trial]) -> None:
        """Nothing to learn: the search is over."""

    def exhausted(self) -> bool:
        """True once every derived architecture was asked."""
        return self._next >= len(self.archs)
