"""Differentiable one-shot strategies with a latency term: DARTS, PC-DARTS, GDAS, FBNet and ProxylessNAS.

Each trains per-gene architecture logits together with a :class:`~hwnas.supernet.RelaxedSupernet`'s shared
weights (bilevel: the weights on training batches, the logits on held-out search batches) and derives an
architecture. They differ in the relaxation weights they hand to ``forward_relaxed``:

- ``darts`` (Liu et al. ICLR 2019): ``softmax(logits)``; ``order: 2`` uses the unrolled (second-order)
  architecture gradient with DARTS's finite-difference Hessian-vector product.
- ``pc_darts`` (Xu et al. ICLR 2020): DARTS on a partial-channel supernet (``partial_channels: 4`` by
  default: each edge computes on a quarter of the channels).
- ``fbnet`` (Wu et al. CVPR 2019): the Gumbel-softmax of the logits, temperature annealed geometrically.
- ``gdas`` (Dong & Yang CVPR 2019): a hard one-hot Gumbel sample with a straight-through gradient: one
  operation per edge is computed per step.
- ``proxyless`` (Cai et al. ICLR 2019): binarised paths, one operation per gene sampled from
  ``softmax(logits)``, straight-through gradient (the one-path estimator; ProxylessNAS samples two
  paths and rescales), so a step holds the memory of one path.

The latency term comes from any latency model with ``predict_ms`` (a table, a learned or few-shot model, a
benchmark's published latencies): :class:`LinearLatency` linearises it around the current derived
architecture, one whole-network prediction per (gene, choice), so the expected latency of the relaxed
network is ``base + sum_gene w_gene @ delta_gene`` (exactly the table's sum where the model is a sum of
units, FBNet's lookup-table loss). It is re-linearised every ``relinearize_every`` steps. Two forms:

- penalty (``latency_weight: λ``, 1/ms): ``λ · E[lat]`` is added to the search loss (FBNet, LA-DNAS);
- budget (``target_ms: T``): ``μ · (E[lat] / T - 1)`` with a multiplier ``μ >= 0`` adapted by dual ascent on
  the derived architecture's latency (it grows while that is above ``T`` and decays to 0 below it, so
  the term only acts above the target); the derived architecture is the most probable one (sum of the
  genes' log-softmax) whose latency lies within ``±budget_tolerance`` of ``T``, found exactly on the
  linearisation by a multiple-choice knapsack and checked with the model. With a ``landing_model`` (a
  measurement) the derived network is then measured and re-derived against ``T · modelled / measured`` until
  it lands by measurement (:meth:`DifferentiableStrategy._land_measured`).

The collapse guard (DARTS+, Liang et al. 2019): every ``relinearize_every`` steps from ``collapse_after`` of the
search on, the derived cell's parameter-free operations are counted
(:class:`~hwnas.search_spaces.CollapseCountingSpace`); at ``collapse_fraction`` of its slots or more for
``collapse_patience`` checks in a row the search stops early and keeps the architecture derived at the last
check before that streak. ``collapse_criterion: eigenvalue`` watches RobustDARTS's signal instead (Zela et al.
ICLR 2020): the dominant eigenvalue of the validation loss's Hessian in the logits, stopping when its recent
mean outgrows the one before. ``record`` holds the trace, the stop and whether the budget was met.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

import numpy as np
from pydantic import Field, model_validator

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, InvalidArchitecture
from hwnas.strategies.oneshot import ArchLatencyModel, OneShotBase, OneShotParams, RoundsLatencyModel

if TYPE_CHECKING:
    import torch

    Batch = tuple[torch.Tensor, torch.Tensor]  # (inputs, labels)

    from hwnas.search_spaces.base import SearchSpace
    from hwnas.supernet.base import RelaxedSupernet


# -- the latency term ---------------------------------------------------------------------------------------


def _predict(model: ArchLatencyModel, archs: Sequence[Architecture]) -> np.ndarray:
    out = np.asarray(model.predict_ms(list(archs)), dtype=float)
    if out.shape != (len(archs),) or not np.all(np.isfinite(out)):
        raise ValueError(f"the latency model returned {out.shape} values (not {len(archs)} finite ones)")
    return out


def timing_rounds(measure: ArchLatencyModel, archs: Sequence[Architecture], rounds: int) -> list[list[float]]:
    """``rounds`` timings of every architecture, one row per round: the model's own interleaved rounds where it
    has them (:class:`~hwnas.strategies.oneshot.RoundsLatencyModel`: each network converted once, all timed one
    after another in every round), else one prediction of them all per round."""
    if isinstance(measure, RoundsLatencyModel):
        out = [[float(v) for v in row] for row in measure.measure_rounds(list(archs), rounds)]
    else:
        out = [[float(v) for v in _predict(measure, archs)] for _ in range(rounds)]
    if len(out) != rounds or any(len(row) != len(archs) or not all(map(math.isfinite, row)) or min(row) <= 0
                                 for row in out):
        raise ValueError(f"the landing measurement returned no {rounds} rounds of {len(archs)} positive timings")
    return out


def _landing_anchor(params: DifferentiableParams, space: SearchSpace) -> Architecture | None:
    """The member a landing times its networks beside (``landing_anchor``), or None.

    Raises:
        ConfigError: ``landing_anchor: largest`` on a space that names no largest member.
    """
    from hwnas.search_spaces.base import SizedSpace

    if params.landing_anchor == "none":
        return None
    if not isinstance(space, SizedSpace):
        raise ConfigError(f"strategy.params.landing_anchor: largest: space {space.name!r} names no largest member "
                          "to time beside; use landing_anchor: none")
    return space.largest()


class LinearLatency:
    """A latency model linearised around one member: ``base`` plus, per gene, the change of each choice.

    ``delta[g][k] = predict(arch with gene g set to its k-th choice) - predict(arch)``; every variant is one
    gene away from ``arch``. For a sum of per-unit costs where each gene controls its own units (cells) it is
    exact; elsewhere it is the first-order expansion around ``arch`` that FBNet's and ProxylessNAS's loss use.
    A choice that conflicts with another gene of ``arch`` (DARTS: a node's two inputs must differ) is priced as
    the same change made on a member one gene away where it does not conflict; one that no two members differ
    in alone (DARTS's first node, whose two inputs can only swap: both are the cell's inputs, of one shape)
    has delta 0 and is listed in ``unpriced``.

    Raises:
        MissingLatencyEntry: The model lacks units some choice needs (all of them named at once).
        ConfigError: A single-gene variant of ``arch`` is not a member (the space cannot be relaxed gene by gene).
    """

    def __init__(self, space: SearchSpace, model: ArchLatencyModel, arch: Architecture) -> None:
        self.space, self.model, self.arch = space, model, arch
        self.genes = list(space.genes())
        #: Per gene and choice: whether ``arch`` with that one gene changed is a member.
        self.valid = {g.name: np.ones(len(g.choices), dtype=bool) for g in self.genes}
        #: Choices no pair of members prices apart from another gene's (their delta is 0: see the class doc).
        self.unpriced: list[str] = []
        pairs: list[tuple[Architecture, Architecture]] = []  # (reference, variant) per priced choice
        where: list[tuple[str, int]] = []
        for g in self.genes:
            for k, c in enumerate(g.choices):
                if c == arch.genes[g.name]:
                    continue
                v = Architecture(space.name, {**arch.genes, g.name: c})
                if self.is_member(v):
                    pairs.append((arch, v))
                else:
                    # a choice that conflicts with another gene (DARTS: a node's two inputs must differ) is priced
                    # against a neighbour of arch where it does not: the same change, another reference
                    self.valid[g.name][k] = False
                    pair = self._elsewhere(g.name, c)
                    if pair is None:
                        # no two members differ in this gene alone (DARTS's first node: its two inputs can only swap);
                        # the change is not separable from the other gene's, so it adds nothing on its own
                        self.unpriced.append(f"{g.name}={c}")
                        continue
                    pairs.append(pair)
                where.append((g.name, k))
        refs = list(dict.fromkeys([arch] + [r for r, _ in pairs]))
        ms = _predict(model, refs + [v for _, v in pairs])
        ref_ms = dict(zip(refs, ms[:len(refs)]))
        self.base_ms = float(ref_ms[arch])
        self.delta = {g.name: np.zeros(len(g.choices)) for g in self.genes}
        for (name, k), (ref, _), value in zip(where, pairs, ms[len(refs):]):
            self.delta[name][k] = value - ref_ms[ref]
        self._torch: dict[str, Any] = {}

    def is_member(self, arch: Architecture) -> bool:
        try:
            self.space.validate(arch)
        except InvalidArchitecture:
            return False
        return True

    def _elsewhere(self, gene: str, value: int) -> tuple[Architecture, Architecture] | None:
        """(reference, reference with ``gene=value``), both members, the reference one gene away from ``arch``."""
        for h in self.genes:
            if h.name == gene:
                continue
            for c in h.choices:
                if c == self.arch.genes[h.name]:
                    continue
                ref = Architecture(self.space.name, {**self.arch.genes, h.name: c})
                var = Architecture(self.space.name, {**ref.genes, gene: value})
                if self.is_member(ref) and self.is_member(var):
                    return ref, var
        return None

    def expected(self, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """``base + sum_g weights[g] @ delta[g]`` (ms), differentiable in the weights."""
        import torch

        total: Any = 0.0
        for g in self.genes:
            w = weights[g.name]
            d = self._torch.get(g.name)
            if d is None or d.dtype != w.dtype or d.device != w.device:
                d = self._torch[g.name] = torch.as_tensor(self.delta[g.name], dtype=w.dtype, device=w.device)
            total = total + w @ d
        return total + self.base_ms

    def of(self, choice_index: Mapping[str, int]) -> float:
        """The linearised latency (ms) of the member with each gene at its ``choice_index``-th choice."""
        return self.base_ms + sum(float(self.delta[g.name][choice_index[g.name]]) for g in self.genes)

    def fastest(self) -> dict[str, int]:
        """Per gene the index of its cheapest choice (the fastest member on the linearisation)."""
        return {g.name: int(np.argmin(self.delta[g.name])) for g in self.genes}

    def most_probable_within(self, log_probs: Mapping[str, np.ndarray], lo: float, hi: float,
                             *, bins: int = 400) -> list[dict[str, int]]:
        """Choice indices maximising the summed log-probability with linearised latency in ``[lo, hi]``, best first.

        A multiple-choice knapsack by dynamic programming over latency bins (``bins`` across the linearised
        range): every reachable bin keeps its most probable assignment; candidates are the bins whose
        latency falls in ``[lo, hi]``, ordered by probability (the caller checks them with the model).
        """
        fast = self.fastest()
        low = self.of(fast)
        high = self.base_ms + sum(float(self.delta[g.name].max()) for g in self.genes)
        width = max((high - low) / bins, 1e-9)
        best: dict[int, tuple[float, tuple[int, ...]]] = {0: (0.0, ())}
        for g in self.genes:
            offs = self.delta[g.name] - self.delta[g.name][fast[g.name]]
            nxt: dict[int, tuple[float, tuple[int, ...]]] = {}
            for b, (lp, picks) in best.items():
                for k, off in enumerate(offs):
                    nb = b + int(round(off / width))
                    cand = lp + float(log_probs[g.name][k])
                    if nb not in nxt or cand > nxt[nb][0]:
                        nxt[nb] = (cand, (*picks, k))
            best = nxt
        chosen = []
        for lp, picks in best.values():
            assign = {g.name: k for g, k in zip(self.genes, picks)}
            if lo <= self.of(assign) <= hi:
                chosen.append((lp, assign))
        chosen.sort(key=lambda t: -t[0])
        return [a for _, a in chosen]


def most_probable_member(space: SearchSpace, log_probs: Mapping[str, np.ndarray], *,
                         limit: int = 100_000) -> Architecture:
    """The member of ``space`` with the largest summed log-probability over its genes' choices, canonical.

    A :class:`~hwnas.search_spaces.MostProbableSpace` answers itself (DARTS: a node's two inputs must differ).
    Otherwise the per-gene argmax where it is a member, else assignments enumerated best first (a heap over
    per-gene choice ranks, each assignment reached once) until one is: enough where few assignments are invalid.

    Raises:
        ConfigError: None of the ``limit`` most probable assignments is a member.
    """
    import heapq

    from hwnas.search_spaces.base import MostProbableSpace

    if isinstance(space, MostProbableSpace):
        return space.most_probable(log_probs)
    genes = list(space.genes())
    order = [np.argsort(-np.asarray(log_probs[g.name]), kind="stable") for g in genes]
    loss = [np.asarray(log_probs[g.name])[o[0]] - np.asarray(log_probs[g.name])[o] for g, o in zip(genes, order)]
    heap: list[tuple[float, int, tuple[int, ...]]] = [(0.0, 0, (0,) * len(genes))]
    for _ in range(limit):
        if not heap:
            break
        cost, last, ranks = heapq.heappop(heap)
        arch = Architecture(space.name, {g.name: g.choices[int(order[i][r])]
                                         for i, (g, r) in enumerate(zip(genes, ranks))})
        try:
            space.validate(arch)
        except InvalidArchitecture:
            for k in range(last, len(genes)):
                if ranks[k] + 1 < len(order[k]):
                    nxt = (*ranks[:k], ranks[k] + 1, *ranks[k + 1:])
                    heapq.heappush(heap, (cost + float(loss[k][ranks[k] + 1] - loss[k][ranks[k]]), k, nxt))
            continue
        return space.canonicalize(arch)
    raise ConfigError(f"space {space.name!r}: none of the {limit} most probable assignments of the architecture "
                      "parameters is a member")


T = TypeVar("T")

# -- data -------------------------------------------------------------------------------------------------


def _forever(data: Iterable[T]) -> Iterator[T]:
    while True:
        empty = True
        for item in data:
            empty = False
            yield item
        if empty:
            raise ValueError("a one-shot search was given an empty batch iterable")


# -- parameters ---------------------------------------------------------------------------------------------


class DifferentiableParams(OneShotParams):
    """Parameters of every differentiable strategy (the runner reads the search-level ones)."""

    steps: int = Field(300, ge=1, description="search steps (one weight step and one architecture step each)")
    warmup_steps: int = Field(50, ge=0, description="weight-only steps before the architecture is trained (the "
                              "uniform mixture, or uniformly sampled paths for a sampled relaxation); a sweep of "
                              "weights or targets shares them")
    batch_size: int = Field(64, ge=2, description="images per step, for the weights and for the architecture")
    weight_lr: float = Field(0.05, gt=0, description="SGD learning rate of the shared weights (cosine to 0)")
    weight_momentum: float = Field(0.9, ge=0, lt=1)
    weight_decay: float = Field(3e-4, ge=0)
    grad_clip: float = Field(5.0, gt=0, description="gradient-norm clip of the shared weights")
    arch_lr: float = Field(0.01, gt=0, description="Adam learning rate of the architecture logits")
    arch_weight_decay: float = Field(1e-3, ge=0)
    target_ms: float | None = Field(None, gt=0, description="budget mode: the latency the derived network should "
                                    "land on (within budget_tolerance)")
    budget_tolerance: float = Field(0.05, gt=0, lt=1, description="budget mode: the relative band around target_ms")
    multiplier_lr: float = Field(2.0, gt=0, description="budget mode: dual-ascent step of the multiplier per "
                                 "relative excess of the derived latency")
    relinearize_every: int = Field(10, ge=1, description="steps between linearisations of the latency model "
                                   "(and collapse checks)")
    collapse_fraction: float | None = Field(
        0.6, gt=0, le=1, description="stop early when this share of the derived normal cell's ops is "
        "parameter-free (DARTS+'s collapse guard); null: never")
    derive_zero: bool = Field(False, description="let derivation pick the zero op (NB201's none): DARTS's rule "
                              "excludes it, so a derived cell never drops all paths to its output")
    collapse_patience: int = Field(3, ge=1, description="checks in a row the derived cell must stay collapsed "
                                   "before the guard stops (a transient spike early in the search is not a collapse)")
    collapse_after: float = Field(0.2, ge=0, le=1, description="the collapse guard watches from this share of the "
                                  "steps on (the first steps' argmax is the initialisation's)")
    collapse_criterion: Literal["param_free", "eigenvalue"] = Field(
        "param_free", description="param_free: DARTS+'s count of parameter-free ops in the derived cell; eigenvalue: "
        "RobustDARTS's dominant eigenvalue of the validation loss's Hessian in the architecture logits (softmax "
        "relaxation, power iteration on Hessian-vector products), computed at every check")
    eigen_ratio: float = Field(4 / 3, gt=1, description="eigenvalue criterion: stop when the mean eigenvalue of the "
                               "last collapse_patience checks exceeds this times the mean of the collapse_patience "
                               "checks before them (RobustDARTS: 1 / 0.75)")
    eigen_iterations: int = Field(10, ge=1, description="eigenvalue criterion: power iterations per check")
    latency_weights: list[float] | None = Field(None, min_length=1, description="a sweep: one search per latency "
                                                "weight (sharing the warm-up); one derived architecture each")
    targets_ms: list[float] | None = Field(None, min_length=1, description="a sweep in budget mode: one search per "
                                           "target (ms); one derived architecture each")
    latency_metric: str | None = Field(None, description="the cheap evaluator metric that prices choices (default: "
                                       "the only latency_ms* metric of the objectives and constraints)")
    landing_metric: str | None = Field(
        None, description="budget mode: a metric that measures the derived network (an ort_latency evaluator's): it "
        "is measured, and re-derived from the final logits against the latency model's target corrected by the "
        "measured / modelled ratio, until it lands within budget_tolerance of target_ms by measurement")
    landing_rounds: int = Field(4, ge=1, description="budget mode with landing_metric: rounds of measurement at most "
                                "(the first measures the derived network, each later one up to three: landing_spread)")
    landing_repeats: int = Field(5, ge=1, description="budget mode with landing_metric: timings of each measured "
                                 "network (each beside the anchor, with landing_anchor: largest)")
    landing_spread: float = Field(0.1, ge=0, lt=1, description="budget mode with landing_metric: from the second "
                                  "landing round on, three networks are derived and timed side by side, aimed at the "
                                  "corrected target times 1 - spread, 1 and 1 + spread; 0: one network a round")
    landing_anchor: Literal["largest", "none"] = Field(
        "largest", description="budget mode with landing_metric: largest: each measured network is timed "
        "landing_repeats times beside the space's largest member, in turn; its latency is its median ratio to that "
        "anchor times the anchor's median over every timing of the landing, so that on a machine whose speed "
        "drifts the networks are compared at the same moments and the absolute level is averaged over the whole "
        "landing; none: the median of the network's own landing_repeats timings")
    supernet: dict[str, Any] = Field(default_factory=dict, description="parameters of the space's supernet")

    @model_validator(mode="after")
    def _one_sweep(self) -> DifferentiableParams:
        if self.latency_weights is not None and self.targets_ms is not None:
            raise ValueError("give latency_weights or targets_ms, not both")
        if self.landing_metric is not None and self.target_ms is None and self.targets_ms is None:
            raise ValueError("landing_metric lands a budget: give target_ms or targets_ms")
        if self.targets_ms is not None and any(not math.isfinite(t) or t <= 0 for t in self.targets_ms):
            raise ValueError(f"targets_ms must be positive numbers (got {list(self.targets_ms)})")
        if self.latency_weights is not None and any(not math.isfinite(w) or w < 0 for w in self.latency_weights):
            raise ValueError(f"latency_weights must be non-negative numbers (got {list(self.latency_weights)})")
        return self

    def runs(self) -> list[dict[str, float]]:
        """The per-search overrides of a sweep (one empty dict without a sweep)."""
        if self.targets_ms is not None:
            return [{"target_ms": t} for t in self.targets_ms]
        if self.latency_weights is not None:
            return [{"latency_weight": w} for w in self.latency_weights]
        return [{}]

    @property
    def uses_latency(self) -> bool:
        return bool(self.latency_weight > 0 or self.target_ms is not None or self.targets_ms
                    or any(w > 0 for w in self.latency_weights or ()))


class GumbelParams(DifferentiableParams):
    """Temperature of the Gumbel-softmax, annealed geometrically from ``tau_max`` to ``tau_min`` over the search."""

    tau_max: float = Field(5.0, gt=0)
    tau_min: float = Field(0.1, gt=0)

    @model_validator(mode="after")
    def _cooling(self) -> GumbelParams:
        if self.tau_min > self.tau_max:
            raise ValueError(f"tau_min ({self.tau_min}) is above tau_max ({self.tau_max}): the temperature is "
                             "annealed from tau_max down to tau_min")
        return self


class DartsParams(DifferentiableParams):
    order: Literal[1, 2] = Field(1, description="1: first-order DARTS; 2: the unrolled second-order gradient")


class PCDartsParams(DifferentiableParams):
    supernet: dict[str, Any] = Field(default_factory=lambda: {"partial_channels": 4},
                                     description="parameters of the space's supernet (PC-DARTS's K = 4)")


# -- the strategies -----------------------------------------------------------------------------------------


class DifferentiableStrategy(OneShotBase):
    """The bilevel loop every differentiable strategy shares; subclasses choose the relaxation weights."""

    Params: ClassVar[type[DifferentiableParams]] = DifferentiableParams
    #: Sampled relaxations pass a fresh sample to every forward; DARTS's softmax is deterministic.
    stochastic: ClassVar[bool] = False

    def __init__(self, *, space: SearchSpace, rng: np.random.Generator, **params: object) -> None:
        self.params = self.Params(**params)
        if self.params.landing_metric is not None:
            _landing_anchor(self.params, space)  # refused before any training
        super().__init__(space=space, rng=rng, latency_weight=self.params.latency_weight)
        self.logits = {k: 1e-3 * rng.standard_normal(v.shape) for k, v in self.logits.items()}
        self._torch_gen: Any = None
        self._seed = int(rng.integers(2**62))
        self.multiplier = self.latency_weight if self.latency_weight > 0 else 1.0
        self.linear: LinearLatency | None = None
        self.record: dict[str, Any] = {"history": [], "stopped": None, "steps_run": 0}
        self._landed: Architecture | None = None

    # -- relaxation weights ---------------------------------------------------------------------------
    def _generator(self) -> torch.Generator:
        import torch

        if self._torch_gen is None:
            self._torch_gen = torch.Generator().manual_seed(self._seed)
        return self._torch_gen

    def relax(self, alphas: Mapping[str, torch.Tensor], progress: float) -> dict[str, torch.Tensor]:
        """The weights passed to ``forward_relaxed`` at ``progress`` (0 to 1) of the search, differentiable."""
        import torch

        return {k: torch.softmax(a, 0) for k, a in alphas.items()}

    def temperature(self, progress: float) -> float | None:
        """The relaxation's temperature at ``progress`` of the search (None: it has none)."""
        return None

    def _gumbel(self, shape: torch.Size) -> torch.Tensor:
        import torch

        u = torch.rand(shape, generator=self._generator()).clamp_(1e-10, 1 - 1e-10)
        return -torch.log(-torch.log(u))

    # -- the loop ------------------------------------------------------------------------------------------
    def warmup(self, supernet: RelaxedSupernet, train_data: Iterable[Batch], *, steps: int) -> None:
        """``steps`` weight-only steps with the architecture uniform: DARTS's relaxation trains the uniform mixture
        (every choice equally weighted), a sampled one a uniformly drawn path per step (SPOS), its own cost."""
        import torch

        if steps <= 0:
            return
        flat = {g.name: torch.zeros(len(g.choices)) for g in self.space.genes()}
        opt = self._weight_optimizer(supernet)
        train = _forever(train_data)
        supernet.train()
        for step in range(steps):
            self._set_lr(opt, step, steps)
            with torch.no_grad():
                weights = self.relax(flat, 0.0) if self.stochastic else {
                    k: torch.full_like(v, 1.0 / len(v)) for k, v in flat.items()}
            self._weight_step(supernet, opt, next(train), weights)

    def _weight_optimizer(self, supernet: RelaxedSupernet) -> torch.optim.Optimizer:
        import torch

        p = self.params
        return torch.optim.SGD([q for q in supernet.parameters() if q.requires_grad], lr=p.weight_lr,
                               momentum=p.weight_momentum, weight_decay=p.weight_decay)

    def _set_lr(self, opt: torch.optim.Optimizer, step: int, total: int) -> None:
        lr = 0.5 * self.params.weight_lr * (1 + math.cos(math.pi * step / max(total, 1)))
        for group in opt.param_groups:
            group["lr"] = lr

    def _weight_step(self, supernet: RelaxedSupernet, opt: torch.optim.Optimizer, batch: Batch,
                     weights: Mapping[str, torch.Tensor]) -> float:
        import torch
        import torch.nn.functional as F

        x, y = batch
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(supernet.forward_relaxed(x, {k: w.detach() for k, w in weights.items()}), y)
        value = float(loss.detach())
        if not math.isfinite(value):
            from hwnas.errors import TrainingDiverged

            raise TrainingDiverged(f"one-shot search: the weights' training loss is {value} (lower weight_lr)")
        loss.backward()
        torch.nn.utils.clip_grad_norm_([q for g in opt.param_groups for q in g["params"]], self.params.grad_clip)
        opt.step()
        return value

    def _latency_loss(self, weights: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor | float, float | None]:
        if self.linear is None:
            return 0.0, None
        expected = self.linear.expected(weights)
        if self.params.target_ms is not None:
            return self.multiplier * (expected / self.params.target_ms - 1.0), float(expected.detach())
        return self.latency_weight * expected, float(expected.detach())

    def _arch_loss(self, supernet: RelaxedSupernet, alphas: Mapping[str, torch.Tensor], batch: Batch,
                   progress: float) -> tuple[torch.Tensor, float, float | None]:
        import torch.nn.functional as F

        x, y = batch
        weights = self.relax(alphas, progress)
        ce = F.cross_entropy(supernet.forward_relaxed(x, weights), y)
        lat, expected = self._latency_loss(weights)
        return ce + lat, float(ce.detach()), expected

    def _arch_gradient(self, supernet: RelaxedSupernet, alphas: dict[str, torch.Tensor], train_batch: Batch,
                       valid_batch: Batch, progress: float, lr: float) -> tuple[float, float | None]:
        """Fills ``alphas[*].grad``; returns (search cross-entropy, expected latency). First order here."""
        import torch

        loss, ce, expected = self._arch_loss(supernet, alphas, valid_batch, progress)
        if not math.isfinite(float(loss.detach())):
            from hwnas.errors import TrainingDiverged

            raise TrainingDiverged(f"one-shot search: the architecture loss is {float(loss.detach())} (lower arch_lr)")
        grads = torch.autograd.grad(loss, list(alphas.values()), allow_unused=True)
        for a, g in zip(alphas.values(), grads):
            a.grad = torch.zeros_like(a) if g is None else g
        return ce, expected

    def search(self, supernet: RelaxedSupernet, train_data: Iterable[Batch], valid_data: Iterable[Batch], *,
               steps: int, latency_model: ArchLatencyModel | None = None,
               landing_model: ArchLatencyModel | None = None) -> list[Architecture]:
        """Train the logits with the shared weights for ``steps`` steps and derive (see the module doc).

        ``landing_model`` (budget mode): what the derived network's latency is judged by, a measurement; the
        derivation is corrected until that lands within the band (:meth:`_land_measured`).

        Raises:
            MissingLatencyEntry: The latency model cannot price some choice (its keys named).
            ConfigError: ``target_ms`` is below the fastest member's latency (which is named).
        """
        import torch

        p = self.params
        if p.target_ms is not None and latency_model is None:
            raise ConfigError("budget mode (target_ms) needs a latency model")
        self._landed = None  # a second search() starts from the logits, not from the previous landing or record
        self.record = {"history": [], "stopped": None, "steps_run": 0}
        use_latency = latency_model is not None and (self.latency_weight > 0 or p.target_ms is not None)
        model = latency_model if use_latency else None
        if model is not None:
            self.prepare_latency(model)
        alphas = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in self.logits.items()}
        a_opt = torch.optim.Adam(list(alphas.values()), lr=p.arch_lr, betas=(0.5, 0.999),
                                 weight_decay=p.arch_weight_decay)
        w_opt = self._weight_optimizer(supernet)
        train, valid = _forever(train_data), _forever(valid_data)
        supernet.train()
        previous, kept_step, streak = self.derive(), 0, 0
        checks: list[tuple[int, float, Architecture]] = []  # (step, eigenvalue, derived) of the eigenvalue criterion
        for step in range(steps):
            progress = step / max(steps - 1, 1)
            self._set_lr(w_opt, step, steps)
            lr = w_opt.param_groups[0]["lr"]
            train_batch, valid_batch = next(train), next(valid)
            a_opt.zero_grad(set_to_none=True)
            ce, expected = self._arch_gradient(supernet, alphas, train_batch, valid_batch, progress, lr)
            a_opt.step()
            self.logits = {k: a.detach().double().numpy().copy() for k, a in alphas.items()}
            with torch.no_grad():
                weights = self.relax(alphas, progress)
            loss = self._weight_step(supernet, w_opt, train_batch, weights)
            self.record["steps_run"] = step + 1
            derived = self._argmax()
            if model is not None and self.linear is not None and p.target_ms is not None:
                lat = self.linear.of(self._indices(derived))
                self.multiplier = max(0.0, self.multiplier + p.multiplier_lr * (lat / p.target_ms - 1.0))
            if (step + 1) % p.relinearize_every == 0 or step + 1 == steps:
                entry: dict[str, Any] = {"step": step + 1, "weight_loss": round(loss, 5), "search_ce": round(ce, 5)}
                if expected is not None:
                    entry["expected_ms"] = round(expected, 5)
                if model is not None:
                    self._linearise(model, derived)
                    assert self.linear is not None
                    entry["derived_ms"] = round(self.linear.base_ms, 5)
                    if p.target_ms is not None:
                        entry["multiplier"] = round(self.multiplier, 5)
                tau = self.temperature(progress)
                if tau is not None:
                    entry["tau"] = round(tau, 5)
                self.record["history"].append(entry)
                stop: str | None = None
                if p.collapse_criterion == "eigenvalue":
                    entry["eigenvalue"] = round(self._hessian_eigenvalue(supernet, alphas, valid_batch, step), 6)
                    checks.append((step + 1, entry["eigenvalue"], derived))
                    k = p.collapse_patience
                    if len(checks) >= 2 * k and step + 1 >= p.collapse_after * steps:
                        now = float(np.mean([c[1] for c in checks[-k:]]))
                        before = float(np.mean([c[1] for c in checks[-2 * k:-k]]))
                        if before > 0 and now > p.eigen_ratio * before:
                            kept_step, _, previous = checks[-k - 1]
                            stop = (f"collapse guard (eigenvalue): the Hessian's dominant eigenvalue grew from a mean "
                                    f"of {before:.4g} to {now:.4g} over the last {2 * k} checks (more than "
                                    f"{p.eigen_ratio:.3g}x)")
                elif self._collapsed(derived, entry) and step + 1 >= p.collapse_after * steps:
                    streak += 1
                    if streak >= p.collapse_patience:
                        stop = (f"collapse guard: from step {self.record['history'][-streak]['step']} to {step + 1} "
                                f"({streak} checks) {p.collapse_fraction:g} or more of the derived normal cell's ops "
                                f"were parameter-free ({entry['param_free']})")
                else:
                    streak, previous, kept_step = 0, derived, step + 1
                if stop is not None:
                    self.record["stopped"] = f"{stop}; kept the architecture derived at step {kept_step}"
                    self.record["collapsed_at"] = step + 1
                    self._freeze(previous)
                    break
        self._landed = self._land(model) if model is not None and p.target_ms is not None else None
        if landing_model is not None and model is not None and p.target_ms is not None:
            self._landed = self._land_measured(model, landing_model)
        return [self.derive()]

    def _hessian_eigenvalue(self, supernet: RelaxedSupernet, alphas: Mapping[str, torch.Tensor], batch: Batch,
                            step: int) -> float:
        """The dominant eigenvalue of the Hessian of the validation loss in the architecture logits (RobustDARTS):
        power iteration on Hessian-vector products (double backward through the supernet), the softmax relaxation
        (the expected loss, also for a sampled strategy), a start vector seeded by the strategy and the step."""
        import torch
        import torch.nn.functional as F

        x, y = batch
        a = [t.detach().clone().requires_grad_(True) for t in alphas.values()]
        weights = {k: torch.softmax(t, 0) for k, t in zip(alphas, a)}
        loss = F.cross_entropy(supernet.forward_relaxed(x, weights), y)
        grads = torch.autograd.grad(loss, a, create_graph=True)
        g = torch.Generator().manual_seed(self._seed + step)
        v = [torch.randn(t.shape, generator=g) for t in a]
        norm = torch.sqrt(torch.stack([(u * u).sum() for u in v]).sum())
        v = [u / norm for u in v]
        value = 0.0
        for _ in range(self.params.eigen_iterations):
            hv = torch.autograd.grad(grads, a, grad_outputs=v, retain_graph=True, allow_unused=True)
            hv = tuple(torch.zeros_like(t) if h is None else h for h, t in zip(hv, a))
            value = float(sum((h * u).sum() for h, u in zip(hv, v)))
            norm = torch.sqrt(torch.stack([(h * h).sum() for h in hv]).sum())
            if float(norm) == 0.0:
                break
            v = [h / norm for h in hv]
        return value

    # -- derivation -----------------------------------------------------------------------------------------
    def _indices(self, arch: Architecture) -> dict[str, int]:
        """Choice index per gene; a gene switched off (its inactive value, not a choice) takes its logits' argmax."""
        return {g.name: (g.choices.index(arch.genes[g.name]) if arch.genes[g.name] in g.choices
                         else int(np.argmax(self.logits[g.name]))) for g in self.space.genes()}

    def _excluded(self) -> dict[str, np.ndarray]:
        """Per gene a mask of the choices derivation never takes (the zero op, unless ``derive_zero``)."""
        from hwnas.search_spaces.base import ZeroOpSpace

        masks = {g.name: np.zeros(len(g.choices), dtype=bool) for g in self.space.genes()}
        if not self.params.derive_zero and isinstance(self.space, ZeroOpSpace):
            for name, values in self.space.zero_choices().items():
                choices = next(g.choices for g in self.space.genes() if g.name == name)
                masks[name] = np.array([c in values for c in choices])
        return masks

    def _log_probs(self) -> dict[str, np.ndarray]:
        out = {k: v - np.logaddexp.reduce(v) for k, v in self.logits.items()}
        for k, mask in self._excluded().items():
            out[k] = np.where(mask, -np.inf, out[k])
        return out

    def _argmax(self) -> Architecture:
        """The most probable member (the per-gene argmax where that is one)."""
        return most_probable_member(self.space, self._log_probs())

    def _freeze(self, arch: Architecture) -> None:
        """Set the logits so that ``arch`` is their argmax (after a collapse stop), keeping their ranking otherwise."""
        for g in self.space.genes():
            v = self.logits[g.name]
            if arch.genes[g.name] not in g.choices:  # switched off in arch: any choice derives it
                continue
            k = g.choices.index(arch.genes[g.name])
            if int(np.argmax(v)) != k:
                v[k] = float(v.max()) + 1e-3

    def derive(self) -> Architecture:
        """The most probable member (every gene's argmax where that is one); in budget mode the most probable member
        landing within the target band."""
        if self._landed is not None:
            return self._landed
        return self._argmax()

    def prepare_latency(self, model: ArchLatencyModel) -> None:
        """Linearise ``model`` around the current derived architecture and check the target against the fastest
        member: what :meth:`search` does first, callable before any training to fail early.

        Raises:
            MissingLatencyEntry: The model cannot price some choice (every missing key named).
            ConfigError: ``target_ms`` is below the fastest member (named, with its latency).
        """
        self._linearise(model)
        self._check_target(model)

    def _linearise(self, model: ArchLatencyModel, arch: Architecture | None = None) -> None:
        self.linear = LinearLatency(self.space, model, arch if arch is not None else self._argmax())

    def _check_target(self, model: ArchLatencyModel) -> None:
        target = self.params.target_ms
        if target is None or self.linear is None:
            return
        excluded = self._excluded()
        arch = most_probable_member(self.space, {k: np.where(excluded[k], -np.inf, -v)
                                                 for k, v in self.linear.delta.items()})
        ms = float(_predict(model, [arch])[0])
        self.record["fastest_ms"] = ms
        if target < ms * (1 - self.params.budget_tolerance):
            raise ConfigError(f"target_ms {target:g} is below the fastest member of space {self.space.name!r} "
                              f"({ms:.4g} ms by the latency model: {arch.arch_id}, every gene at its cheapest "
                              "derivable choice)")

    def _land_measured(self, model: ArchLatencyModel, measure: ArchLatencyModel) -> Architecture:
        """Land by measurement: measure the derived network; while it misses ``target ± tolerance``, aim the
        latency model at ``target · modelled / measured`` of the round's closest network (the model's error on it,
        taken as locally constant) and derive again from the same logits: from the second round on three networks,
        aimed at that corrected target times ``1 - landing_spread``, 1 and ``1 + landing_spread`` (a model whose
        error differs from network to network is bracketed, not chased). The network whose measurement came
        closest is kept; the record's ``landed`` says whether it is in the band by measurement, and ``landing``
        holds every network measured, with its round.

        A measurement is ``landing_repeats`` timings of each of the round's networks, with ``landing_anchor:
        largest`` side by side with the space's largest member (:meth:`_timed_beside`): a network's latency is
        its median ratio to the anchor times the anchor's median over all of the landing's timings, re-scaled at
        the end so that every network is judged on the same level. A round stops the landing only once its
        closest network is inside the band by more than the standard error of its own measurement (the spread of
        its ratios): a network that lands at the band's edge by a noisy timing does not end it."""
        p = self.params
        assert p.target_ms is not None
        target, tol = p.target_ms, p.budget_tolerance
        anchor = _landing_anchor(p, self.space)
        anchor_ms: list[float] = []
        rows: list[dict[str, Any]] = []
        measured: dict[str, Architecture] = {}

        def err(row: Mapping[str, Any]) -> float:
            return abs(float(row["measured_ms"]) / target - 1)

        batch = [(self.derive(), target)]  # (network, the model target it was derived for)
        for r in range(p.landing_rounds):
            fresh: list[tuple[Architecture, float]] = []
            for a, aim in batch:  # each network once, at the first aim that derived it
                if a.arch_id not in measured and all(a.arch_id != b.arch_id for b, _ in fresh):
                    fresh.append((a, aim))
            if not fresh:  # the correction derives only networks already measured
                break
            measured.update((a.arch_id, a) for a, _ in fresh)
            timed = self._timed_beside(measure, [a for a, _ in fresh], anchor, anchor_ms)
            level = float(np.median(anchor_ms)) if anchor is not None else 1.0
            modelled = _predict(model, [a for a, _ in fresh])
            new = []
            for (arch, aim), (value, rel_se), ms in zip(fresh, timed, modelled):
                row: dict[str, Any] = {"round": r, "model_target_ms": round(aim, 6), "model_ms": round(float(ms), 6),
                                       "measured_ms": round(value * level, 6), "relative_se": round(rel_se, 6),
                                       "arch_id": arch.arch_id}
                if anchor is not None:
                    row["ratio_to_anchor"] = round(value, 6)
                new.append(row)
            rows.extend(new)
            closest = min(new, key=err)
            if err(closest) + closest["relative_se"] <= tol or r + 1 == p.landing_rounds:
                break
            centre = target * closest["model_ms"] / closest["measured_ms"]
            factors = (1 - p.landing_spread, 1.0, 1 + p.landing_spread) if p.landing_spread > 0 else (1.0,)
            batch = []
            for f in factors:
                self._landed = None
                self._linearise(model, measured[closest["arch_id"]])
                landed = self._land(model, centre * f)
                batch.append((landed if landed is not None else self._argmax(), centre * f))
        if anchor is not None:  # every network on the level of all the landing's timings of the anchor
            level = float(np.median(anchor_ms))
            for row in rows:
                row["measured_ms"] = round(row["ratio_to_anchor"] * level, 6)
        best = min(rows, key=err)
        self.record.update(target_ms=target, derived_ms=best["model_ms"], measured_ms=best["measured_ms"],
                           landed=err(best) <= tol, landed_by="measurement",
                           derived_by=f"landing round {best['round']}", landing=rows)
        if anchor is not None:
            self.record.update(landing_anchor=anchor.arch_id, anchor_ms=round(level, 6),
                               anchor_timings=len(anchor_ms))
        return measured[best["arch_id"]]

    def _timed_beside(self, measure: ArchLatencyModel, archs: Sequence[Architecture], anchor: Architecture | None,
                      anchor_ms: list[float]) -> list[tuple[float, float]]:
        """``landing_repeats`` timings of each of ``archs``, all in each round (beside ``anchor``, whose timings
        are appended to ``anchor_ms``, where there is one): per network the median of its ratios to the anchor
        in the same round (or of its ms) and that median's relative standard error (1.4826 · the median absolute
        deviation, / √repeats, / the median)."""
        first = 1 if anchor is not None else 0
        rounds = np.array(timing_rounds(measure, ([anchor] if anchor is not None else []) + list(archs),
                                        self.params.landing_repeats))
        if anchor is not None:
            anchor_ms.extend(float(v) for v in rounds[:, 0])
        out = []
        for j in range(first, rounds.shape[1]):
            values = rounds[:, j] / rounds[:, 0] if anchor is not None else rounds[:, j]
            centre = float(np.median(values))
            mad = float(np.median(np.abs(values - centre)))
            out.append((centre, 1.4826 * mad / math.sqrt(len(values)) / centre))
        return out

    def _land(self, model: ArchLatencyModel, target: float | None = None) -> Architecture | None:
        """The most probable member within ``target ± tolerance`` (checked with the model), recorded.

        Args:
            model: The latency model.
            target: The latency to land on (default: ``target_ms``).
        """
        p = self.params
        target = p.target_ms if target is None else target
        assert target is not None and self.linear is not None
        lo, hi = target * (1 - p.budget_tolerance), target * (1 + p.budget_tolerance)
        log_probs = self._log_probs()
        argmax = self._argmax()
        argmax_ms = float(_predict(model, [argmax])[0])
        self.record.update(target_ms=target, argmax_ms=argmax_ms)
        if lo <= argmax_ms <= hi:
            self.record.update(landed=True, derived_ms=argmax_ms, derived_by="argmax")
            return None
        def member(index: Mapping[str, int]) -> Architecture:
            return Architecture(self.space.name, {g.name: g.choices[index[g.name]] for g in self.space.genes()})

        def score(index: Mapping[str, int]) -> float:
            return sum(float(log_probs[g][k]) for g, k in index.items())

        # 1. the knapsack on the linearisation, its candidates checked with the model; re-linearised around the best
        for _ in range(3):
            archs = [a for a in (member(c) for c in self.linear.most_probable_within(log_probs, lo, hi)
                                 if np.isfinite(score(c))) if self.linear.is_member(a)][:20]
            if not archs:
                break
            ms = _predict(model, [self.space.canonicalize(a) for a in archs])
            for arch, value in zip(archs, ms):
                if lo <= value <= hi:
                    self.record.update(landed=True, derived_ms=float(value), derived_by="most probable in band")
                    return self.space.canonicalize(arch)
            self._linearise(model, archs[0])
        # 2. where the model is far from additive (a zero edge that disconnects others): single-gene moves, each
        # priced exactly (a linearisation's deltas are the model's own predictions of one-gene changes)
        current = self._indices(self.linear.arch)
        for _ in range(len(self.space.genes()) * 2):
            self._linearise(model, member(current))
            base = self.linear.base_ms
            moves = [({**current, g.name: k}, base + float(self.linear.delta[g.name][k]))
                     for g in self.space.genes() for k in range(len(g.choices))
                     if k != current[g.name] and self.linear.valid[g.name][k]]
            moves = [(m, m_ms) for m, m_ms in moves if np.isfinite(score(m))]
            inside = [(score(m), m, m_ms) for m, m_ms in moves if lo <= m_ms <= hi]
            if inside:
                _, best, best_ms = max(inside, key=lambda t: t[0])
                self.record.update(landed=True, derived_ms=best_ms, derived_by="single-gene repair into the band")
                return self.space.canonicalize(member(best))
            gap = lambda v: max(lo - v, v - hi, 0.0)  # noqa: E731
            closer = [m for m in moves if gap(m[1]) < gap(base)]
            if not closer:
                break
            current = min(closer, key=lambda m: (gap(m[1]), -score(m[0])))[0]
        self.record.update(landed=False, derived_ms=argmax_ms, derived_by="argmax (no member found in the band)")
        return None

    def _collapsed(self, derived: Architecture, entry: dict[str, object]) -> bool:
        from hwnas.search_spaces.base import CollapseCountingSpace

        if not isinstance(self.space, CollapseCountingSpace):
            return False
        free, slots = self.space.parameter_free_ops(self.space.canonicalize(derived))
        entry["param_free"] = f"{free}/{slots}"
        fraction = self.params.collapse_fraction
        return fraction is not None and free >= fraction * slots


class Darts(DifferentiableStrategy):
    """DARTS: softmax relaxation; first order, or the unrolled second-order architecture gradient."""

    Params: ClassVar[type[DifferentiableParams]] = DartsParams

    def _arch_gradient(self, supernet: RelaxedSupernet, alphas: dict[str, torch.Tensor], train_batch: Batch,
                       valid_batch: Batch, progress: float, lr: float) -> tuple[float, float | None]:
        if getattr(self.params, "order", 1) == 1:
            return super()._arch_gradient(supernet, alphas, train_batch, valid_batch, progress, lr)
        import torch
        import torch.nn.functional as F

        params = [q for q in supernet.parameters() if q.requires_grad]
        backup = [q.detach().clone() for q in params]

        def train_loss() -> torch.Tensor:
            x, y = train_batch
            return F.cross_entropy(supernet.forward_relaxed(x, self.relax(alphas, progress)), y)

        # w' = w - lr * grad_w L_train(w, alpha)
        gw = torch.autograd.grad(train_loss(), params, allow_unused=True)
        with torch.no_grad():
            for q, g in zip(params, gw):
                if g is not None:
                    q.sub_(lr * g)
        loss, ce, expected = self._arch_loss(supernet, alphas, valid_batch, progress)
        grads = torch.autograd.grad(loss, [*alphas.values(), *params], allow_unused=True)
        ga = [torch.zeros_like(a) if g is None else g for a, g in zip(alphas.values(), grads)]
        dw = [torch.zeros_like(q) if g is None else g for q, g in zip(params, grads[len(alphas):])]
        norm = math.sqrt(sum(float((d * d).sum()) for d in dw))
        eps = 0.01 / norm if norm > 0 else 0.0
        hessian: list[torch.Tensor] = [torch.zeros_like(a) for a in alphas.values()]
        if eps > 0:
            for sign in (1.0, -1.0):
                with torch.no_grad():
                    for q, b, d in zip(params, backup, dw):
                        q.copy_(b + sign * eps * d)
                g_alpha = torch.autograd.grad(train_loss(), list(alphas.values()), allow_unused=True)
                hessian = [h + sign * (torch.zeros_like(a) if gi is None else gi)
                           for h, a, gi in zip(hessian, alphas.values(), g_alpha)]
        with torch.no_grad():
            for q, b in zip(params, backup):
                q.copy_(b)
        for a, g, h in zip(alphas.values(), ga, hessian):
            a.grad = g - lr * h / (2 * eps) if eps > 0 else g
        return ce, expected


class PCDarts(Darts):
    """PC-DARTS: first-order DARTS on a partial-channel supernet (``supernet: {partial_channels: 4}``)."""

    Params: ClassVar[type[DifferentiableParams]] = PCDartsParams


class _Gumbel(DifferentiableStrategy):
    Params: ClassVar[type[DifferentiableParams]] = GumbelParams
    stochastic = True

    def temperature(self, progress: float) -> float:
        p = self.params
        assert isinstance(p, GumbelParams)
        return float(p.tau_max * (p.tau_min / p.tau_max) ** progress)


class FBNet(_Gumbel):
    """FBNet: the Gumbel-softmax of the logits (soft), temperature annealed."""

    def relax(self, alphas: Mapping[str, torch.Tensor], progress: float) -> dict[str, torch.Tensor]:
        import torch

        t = self.temperature(progress)
        return {k: torch.softmax((a + self._gumbel(a.shape)) / t, 0) for k, a in alphas.items()}


class Gdas(_Gumbel):
    """GDAS: a hard one-hot Gumbel sample per gene with a straight-through gradient (one op per edge computed)."""

    def relax(self, alphas: Mapping[str, torch.Tensor], progress: float) -> dict[str, torch.Tensor]:
        import torch

        t = self.temperature(progress)
        out = {}
        for k, a in alphas.items():
            soft = torch.softmax((a + self._gumbel(a.shape)) / t, 0)
            hard = torch.zeros_like(soft)
            hard[int(torch.argmax(soft))] = 1.0
            out[k] = hard - soft.detach() + soft
        return out


class Proxyless(DifferentiableStrategy):
    """ProxylessNAS: one path per gene sampled from softmax(logits), binarised, straight-through gradient."""

    stochastic = True

    def relax(self, alphas: Mapping[str, torch.Tensor], progress: float) -> dict[str, torch.Tensor]:
        import torch

        out = {}
        for k, a in alphas.items():
            probs = torch.softmax(a, 0)
            pick = int(torch.multinomial(probs.detach(), 1, generator=self._generator()))
            hard = torch.zeros_like(probs)
            hard[pick] = 1.0
            out[k] = hard - probs.detach() + probs
        return out


__all__ = ["Darts", "DifferentiableParams", "DifferentiableStrategy", "FBNet", "Gdas", "LinearLatency", "PCDarts",
           "Proxyless", "most_probable_member"]
