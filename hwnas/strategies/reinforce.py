"""REINFORCE over the genes: a factorised softmax controller (Zoph & Le 2017; MnasNet, Tan et al. 2019;
TabNAS, Yang et al. 2022).

The policy is one categorical distribution per gene (logits start at 0: uniform); an architecture is
``space.from_indices`` of one draw per gene. After each ``tell`` the logits take one gradient step on

    mean_i  A_i · ∇ log π(a_i)          (+ entropy_weight · ∇ H(π))

where ``A_i = (R_i - b) / s``: the reward minus an exponential moving-average baseline ``b``, divided by a
moving-average standard deviation ``s`` of the rewards, so that one learning rate works for accuracies in %
and in [0, 1] alike. For a factorised softmax ``∇_θg log π(a) = onehot(a_g) - softmax(θ_g)`` per gene ``g``;
only the genes active in the evaluated architecture count (an inactive gene's draw changes nothing, and
summing π over it gives 1, so the gradient of the log-probability of what was evaluated has no term for it).

Rewards:

* one objective and no ``reward`` block: the objective's value on the maximise scale;
* a ``reward`` block (required with several objectives): MnasNet's shaping
  ``R = acc · (lat / target) ** w`` with ``w = alpha`` if ``lat <= target`` else ``beta``; the soft variant
  has ``alpha = beta = w`` (default -0.07), the hard one (``hard: true``) ``alpha = 0, beta = -1``.

Trials without a reward of their own:

* ``failed`` trials: ``failed_reward`` — ``"skip"`` (default: a crash, an out-of-memory error or a broken
  evaluator says nothing about how good the architecture is, and punishing it would steer the policy away
  from whatever the evaluator broke on), ``"worst"`` (the lowest reward seen so far: for failures the
  architecture itself causes, e.g. diverging training) or a number (in reward units, before scaling);
* ``infeasible`` trials (a constraint failed on the cheap metrics; the expensive ones were never computed):
  without ``rejection``, ``infeasible_reward`` (default ``"worst"``: below every feasible architecture seen);
  with ``rejection: true``, none (TabNAS, below).

TabNAS rejection (``rejection: true``). The runner already rejects over-budget candidates before their
expensive evaluation (status ``infeasible``). Learning only from the accepted ones means the samples come
from ``π(a | F) = π(a) / P(F)`` for the feasible set ``F``, whose score function is
``∇ log π(a) - ∇ log P(F)``. ``P(F)`` and ``∇P(F) = E_π[1_F(a) ∇ log π(a)]`` are estimated by Monte Carlo
(:func:`feasible_probability_gradient`) from the last ``rejection_window`` told trials that are not
``failed`` (the batch just told included), their feasibility being their status, their score function
taken at the current logits; ``∇ log P ≈ ∇P̂ / P̂``. Infeasible trials then enter only through ``P̂``. The
estimator is biased: a ratio of two Monte Carlo means (consistent, biased for small windows: ``E[1/P̂] >
1/P``), samples from older policies in the window, proposals filtered for novelty (never an architecture
already evaluated) and uniform fall-backs are not draws of the current policy. With no constraints
``P(F) = 1`` exactly and the correction is left out (its estimate would only add noise).

Controllers: ``factorised`` (above; numpy only, microseconds per step) and ``lstm``, the controller of Zoph &
Le and ENAS (:mod:`hwnas.strategies.lstm_controller`: each decision conditioned on the earlier ones through an
LSTM), trained on the same objective with torch autograd: ``mean_i A_i log π(a_i)`` (+ the entropy bonus on
the sampled paths' summed per-step entropies), and with rejection ``- mean_i(A_i) · mean_{j∈F} log π(a_j)``
over the window's feasible samples, whose gradient is the factorised case's ``-mean(A) · ∇P̂/P̂``. Its
default learning rate is 0.01 (Adam); it costs about a millisecond per draw.

Proposals are never an architecture already told nor twice in one batch: a policy draw that is gets drawn
again (:meth:`~hwnas.strategies.base.BlackBoxStrategy.novel`, which falls back to uniform samples). A draw
that is not a member of the space (a DARTS node fed twice by one input) is drawn again up to
:data:`RESAMPLE_TRIES` times, then replaced by ``space.sample``. The update uses the indices the policy drew
for the architecture that was evaluated (its canonical form may order genes otherwise: an NB201 isomorphism
class representative, DARTS edges sorted by input); for a uniform fall-back, or a trial this instance did
not ask, ``space.to_indices(trial.arch)``. Rejecting invalid draws is itself a rejection step whose
``-∇ log P(valid)`` term is left out: it is multiplied by the mean advantage, which the baseline keeps near 0.

Everything derives from the generator and the sequence of asks and tells, so a resumed run (the runner asks
again and replays the journal's trials through ``tell``) rebuilds the same controller.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture
from hwnas.objectives import Trial
from hwnas.search_spaces.base import ActiveGenes
from hwnas.strategies.base import BlackBoxStrategy, StrategyContext, StrategyParams
from hwnas.strategies.lstm_controller import LSTMController

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from hwnas.search_spaces.base import IntegerVectorSpace

#: Policy draws that are not members of the space (e.g. DARTS) are drawn again this often before a uniform sample.
RESAMPLE_TRIES = 100

#: Normalised advantages are clipped to +- this (one outlying reward must not saturate the logits).
ADVANTAGE_CLIP = 5.0

_ADAM_BETAS = (0.9, 0.999)
_ADAM_EPS = 1e-8

Treatment = Literal["skip", "worst"] | float


class RewardParams(BaseModel):
    """MnasNet's reward shaping: ``R = acc · (lat / target) ** w`` (``w = alpha`` within target, else ``beta``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    accuracy: str = Field(description="metric to maximise (an objective or constraint metric)")
    latency: str = Field(description="cost metric, e.g. latency_ms@pixel3 (an objective or constraint metric)")
    target: float = Field(gt=0, description="the latency target, in the metric's units")
    w: float = Field(-0.07, le=0, description="soft constraint exponent: alpha = beta = w")
    hard: bool = Field(False, description="hard constraint: alpha = 0, beta = -1 (w is then not used)")


class ReinforceParams(StrategyParams):
    controller: Literal["factorised", "lstm"] = Field(
        "factorised", description="'factorised' (one softmax per gene) or 'lstm' (each decision conditioned on "
                                  "the earlier ones, Zoph & Le / ENAS)")
    lstm_hidden: int = Field(64, ge=1, description="LSTM controller width")
    learning_rate: float | None = Field(
        None, gt=0, description="step size (default 0.1 on the factorised logits, 0.01 for the LSTM)")
    optimizer: Literal["adam", "sgd"] = Field("adam", description="Adam or plain gradient ascent on the logits")
    baseline_decay: float = Field(0.9, ge=0, lt=1, description="decay of the moving-average reward baseline and scale")
    entropy_weight: float = Field(0.0, ge=0, description="weight of the policy entropy bonus (0: none)")
    reward: RewardParams | None = Field(None, description="MnasNet reward shaping (required with several objectives)")
    failed_reward: Treatment = Field(
        "skip", description="failed trials: 'skip' (no update), 'worst' (lowest reward so far) or a reward value")
    infeasible_reward: Treatment = Field(
        "worst", description="infeasible trials without rejection: 'skip', 'worst' or a reward value")
    rejection: bool = Field(False, description="TabNAS: learn from feasible trials only, with the 1/P(feasible) "
                                               "correction estimated from recent trials")
    rejection_window: int = Field(64, ge=1, description="recent non-failed trials that estimate P(feasible)")


# -- the factorised policy, as functions (tested on their own) -----------------------------------------------
def softmax(logits: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per row (gene), the softmax over its valid entries (padding entries get probability 0)."""
    z = np.where(valid, logits, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    e = np.where(valid, np.exp(z), 0.0)
    return e / e.sum(axis=1, keepdims=True)


def log_prob_gradient(probs: np.ndarray, indices: np.ndarray, active: np.ndarray) -> np.ndarray:
    """``∇_θ log π(a)`` for a factorised softmax: ``onehot(a_g) - softmax(θ_g)`` on active genes, 0 elsewhere."""
    grad = -probs.copy()
    rows = np.arange(len(indices))
    grad[rows, indices] += 1.0
    grad[~active] = 0.0
    return grad


def feasible_probability_gradient(probs: np.ndarray, samples: Sequence[tuple[np.ndarray, np.ndarray]],
                                  feasible: Sequence[bool],
                                  weights: Sequence[float] | None = None) -> tuple[float, np.ndarray]:
    """Monte Carlo estimates of ``P(F)`` and ``∇_θ P(F)`` under the policy ``probs``, from samples of it.

    ``P̂ = Σ_j w_j 1_F(a_j)`` and ``∇P̂ = Σ_j w_j 1_F(a_j) ∇ log π(a_j)`` (the score-function identity
    ``∇P = E_π[1_F ∇ log π]``), with weights ``w_j = 1/M`` by default. Passing every member of a small space
    once with ``w_j = π(a_j)`` gives the exact values.

    Args:
        probs: (genes, max choices) probabilities of the current policy.
        samples: (choice index per gene, active-gene mask) of each sample.
        feasible: Whether each sample satisfies the constraints.
        weights: Per-sample weights (default: uniform, summing to 1).
    """
    m = len(samples)
    if m == 0:
        return 0.0, np.zeros_like(probs)
    w = np.full(m, 1.0 / m) if weights is None else np.asarray(weights, dtype=float)
    p_hat = 0.0
    grad = np.zeros_like(probs)
    for (indices, active), ok, wj in zip(samples, feasible, w):
        if ok:
            p_hat += float(wj)
            grad += wj * log_prob_gradient(probs, indices, active)
    return p_hat, grad


def rejection_correction(probs: np.ndarray, samples: Sequence[tuple[np.ndarray, np.ndarray]],
                         feasible: Sequence[bool]) -> np.ndarray:
    """TabNAS's estimate of ``∇ log P(F) = ∇P̂ / P̂``, to subtract from ``∇ log π(a)`` of each feasible sample
    (zero when no sample is feasible: then no sample has a reward term to correct)."""
    p_hat, grad = feasible_probability_gradient(probs, samples, feasible)
    return grad / p_hat if p_hat > 0 else grad


def entropy_gradient(probs: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``∇_θ H`` of the summed per-gene entropies: ``-p_k (log p_k + H_g)``."""
    logp = np.where(valid & (probs > 0), np.log(np.where(probs > 0, probs, 1.0)), 0.0)
    h = -(probs * logp).sum(axis=1, keepdims=True)
    return np.where(valid, -probs * (logp + h), 0.0)


def mnasnet_reward(accuracy: float, latency: float, target: float, w: float = -0.07, hard: bool = False) -> float:
    """MnasNet's ``acc · (lat / target) ** w`` (soft: ``w`` either side of the target; hard: 0 within it, -1
    beyond)."""
    alpha, beta = (0.0, -1.0) if hard else (w, w)
    exponent = alpha if latency <= target else beta
    return float(accuracy * (latency / target) ** exponent)


# -- the strategy --------------------------------------------------------------------------------------------
class Reinforce(BlackBoxStrategy):
    """REINFORCE with a factorised softmax controller over the genes; MnasNet rewards, TabNAS rejection."""

    Params = ReinforceParams
    space: IntegerVectorSpace  # the controller draws a choice index per gene (checked in __init__)

    def __init__(self, *, controller: str = "factorised", lstm_hidden: int = 64, learning_rate: float | None = None,
                 optimizer: str = "adam",
                 baseline_decay: float = 0.9, entropy_weight: float = 0.0,
                 reward: RewardParams | Mapping[str, object] | None = None, failed_reward: Treatment = "skip",
                 infeasible_reward: Treatment = "worst", rejection: bool = False, rejection_window: int = 64,
                 **kwargs: Unpack[StrategyContext]) -> None:
        super().__init__(**kwargs)
        if controller not in ("factorised", "lstm"):
            raise ValueError(f"reinforce: controller must be 'factorised' or 'lstm', not {controller!r}")
        if optimizer not in ("adam", "sgd"):
            raise ValueError(f"reinforce: optimizer must be 'adam' or 'sgd', not {optimizer!r}")
        for name in ("to_indices", "from_indices", "genes"):
            if not callable(getattr(self.space, name, None)):
                raise ValueError(f"reinforce: the {getattr(self.space, 'name', '?')} space has no {name}(); "
                                 "the controller needs a choice index per gene")
        self.controller = controller
        self.learning_rate = float(learning_rate if learning_rate is not None
                                   else (0.1 if controller == "factorised" else 0.01))
        self.optimizer = optimizer
        self.baseline_decay = float(baseline_decay)
        self.entropy_weight = float(entropy_weight)
        self.failed_reward = failed_reward
        self.infeasible_reward = infeasible_reward
        self.rejection = bool(rejection)
        self.reward = RewardParams.model_validate(dict(reward)) if isinstance(reward, Mapping) else reward
        self._check_reward()

        self.genes = list(self.space.genes())
        counts = np.array([len(g.choices) for g in self.genes], dtype=np.int64)
        self._counts = counts
        self._valid = np.arange(int(counts.max())) < counts[:, None]
        self.logits = np.zeros(self._valid.shape)
        self._adam_m = np.zeros_like(self.logits)
        self._adam_v = np.zeros_like(self.logits)
        self._steps = 0
        self.baseline: float | None = None
        self._variance = 0.0
        self._worst: float | None = None
        self._pending: dict[str, np.ndarray | None] = {}  # arch_id -> indices the policy drew for it (asked, not told)
        self._window: deque[tuple[np.ndarray, np.ndarray, bool]] = deque(maxlen=rejection_window)
        self.rewards: list[float] = []  # every reward used in an update, in order (for reports and tests)
        self.lstm: LSTMController | None = None
        if controller == "lstm":
            import torch

            self.lstm = LSTMController(counts.tolist(), hidden=lstm_hidden, seed=int(self.rng.integers(2**62)))
            params = self.lstm.parameters()
            self._torch_opt = (torch.optim.Adam(params, lr=self.learning_rate, betas=_ADAM_BETAS, eps=_ADAM_EPS)
                               if optimizer == "adam" else torch.optim.SGD(params, lr=self.learning_rate))

    # -- configuration ---------------------------------------------------------------------------------------
    def _check_reward(self) -> None:
        objective_metrics = [o.metric for o in self.objectives]
        known = list(dict.fromkeys(objective_metrics + [c.metric for c in self.constraints]))
        if self.reward is None:
            if len(self.objectives) != 1:
                raise ValueError(
                    f"reinforce: {len(self.objectives)} objectives need a reward block: give params.reward "
                    "{accuracy: METRIC, latency: METRIC, target: FLOAT, w: -0.07, hard: false} (MnasNet's "
                    "acc * (lat/target)**w)")
            return
        directions = {o.metric: o.direction for o in self.objectives}
        for key, want in (("accuracy", "max"), ("latency", "min")):
            metric = getattr(self.reward, key)
            if metric not in known:
                raise ValueError(f"reinforce: reward.{key} {metric!r} is not an objective or constraint metric "
                                 f"(known: {', '.join(known)})")
            if directions.get(metric, want) != want:
                raise ValueError(f"reinforce: reward.{key} {metric!r} is an objective to "
                                 f"{'maximise' if want == 'min' else 'minimise'}; MnasNet's reward needs "
                                 f"{'a cost' if want == 'min' else 'an accuracy'} here")

    # -- the policy ------------------------------------------------------------------------------------------
    def probabilities(self) -> list[np.ndarray]:
        """Per gene, the probability of each of its choices (the factorised controller; the LSTM's decisions
        depend on one another and have no such table)."""
        if self.lstm is not None:
            raise ValueError("reinforce: the LSTM controller has no per-gene probabilities; use entropy()")
        probs = softmax(self.logits, self._valid)
        return [probs[g, : int(k)].copy() for g, k in enumerate(self._counts)]

    def entropy(self) -> float:
        """The policy's entropy (nats): the sum of the per-gene entropies (``log`` of the space size at start).

        For the LSTM, a Monte Carlo estimate: the mean over 256 paths (drawn with a generator of its own, not the
        strategy's) of the summed per-step entropies along each path.
        """
        if self.lstm is not None:
            rng = np.random.default_rng(0)
            paths = [self.lstm.draw(rng) for _ in range(256)]
            every = [np.ones(len(self.genes), dtype=bool)] * len(paths)
            with self.lstm.torch.no_grad():
                return float(self.lstm.log_probs(paths, every)[1].mean())
        probs = softmax(self.logits, self._valid)
        logp = np.log(np.where(probs > 0, probs, 1.0))
        return float(-(probs * logp).sum())

    def _draw(self) -> np.ndarray:
        """One choice index per gene from the policy (one generator call: inverse CDF per gene)."""
        if self.lstm is not None:
            return self.lstm.draw(self.rng)
        cdf = np.cumsum(softmax(self.logits, self._valid), axis=1)
        u = self.rng.random(len(self._counts))
        idx = (cdf < u[:, None]).sum(axis=1)
        return np.minimum(idx, self._counts - 1)

    def _propose(self, drawn: dict[str, np.ndarray | None], _attempt: int = 0) -> Architecture:
        """A policy draw decoded into an architecture (invalid draws are drawn again, then a uniform sample)."""
        for _ in range(RESAMPLE_TRIES):
            indices = self._draw()
            try:
                arch = self.space.from_indices(indices)
            except InvalidArchitecture:
                continue
            drawn[arch.arch_id] = indices
            return arch
        arch = self.space.sample(self.rng)
        drawn.setdefault(arch.arch_id, None)
        return arch

    def ask(self, n: int) -> list[Architecture]:
        """Draws of the policy, never one already evaluated or twice in the batch (``novel``)."""
        out: list[Architecture] = []
        taken: set[str] = set()
        for _ in range(max(1, n)):
            drawn: dict[str, np.ndarray | None] = {}
            arch = self.novel(partial(self._propose, drawn), taken)
            self._pending[arch.arch_id] = drawn.get(arch.arch_id)
            out.append(arch)
        return out

    # -- learning --------------------------------------------------------------------------------------------
    def _sample_of(self, trial: Trial) -> tuple[np.ndarray, np.ndarray]:
        """(the choice indices that produced the trial's architecture, the mask of its active genes)."""
        indices = self._pending.pop(trial.arch.arch_id, None)
        if indices is None:
            indices = np.asarray(self.space.to_indices(trial.arch), dtype=np.int64)
        if not isinstance(self.space, ActiveGenes):
            return indices, np.ones(len(self.genes), dtype=bool)
        active = self.space.active_genes(trial.arch.genes)
        return indices, np.array([g.name in active for g in self.genes], dtype=bool)

    def reward_of(self, trial: Trial) -> float | None:
        """The reward of an ``ok`` trial (None when a metric it needs is missing or not finite)."""
        if self.reward is None:
            o = self.objectives[0]
            v = trial.metrics.get(o.metric)
            return -o.to_minimise(float(v)) if v is not None and math.isfinite(v) else None
        acc, lat = trial.metrics.get(self.reward.accuracy), trial.metrics.get(self.reward.latency)
        if acc is None or lat is None or not (math.isfinite(acc) and math.isfinite(lat)) or lat <= 0:
            return None
        return mnasnet_reward(float(acc), float(lat), self.reward.target, self.reward.w, self.reward.hard)

    def _treated(self, treatment: Treatment, lowest: float | None) -> float | None:
        if treatment == "skip":
            return None
        if treatment == "worst":
            return lowest
        return float(treatment)

    def tell(self, trials: Sequence[Trial]) -> None:
        """One policy-gradient step on the trials not told before (see the module documentation)."""
        fresh: list[Trial] = []
        ids: set[str] = set()
        for t in trials:
            if t.arch.arch_id not in self.seen and t.arch.arch_id not in ids:
                ids.add(t.arch.arch_id)
                fresh.append(t)
        self.remember(trials)
        if not fresh:
            return
        samples = [self._sample_of(t) for t in fresh]
        own = [self.reward_of(t) if t.status == "ok" else None for t in fresh]
        lowest = min([r for r in own if r is not None] + ([self._worst] if self._worst is not None else []),
                     default=None)
        rewarded: list[tuple[tuple[np.ndarray, np.ndarray], float]] = []
        for t, sample, r in zip(fresh, samples, own):
            if t.status == "ok" and r is None:  # an ok trial without its metric: as a failure
                r = self._treated(self.failed_reward, lowest)
            elif t.status == "failed":
                r = self._treated(self.failed_reward, lowest)
            elif t.status == "infeasible":
                r = None if self.rejection else self._treated(self.infeasible_reward, lowest)
            if r is not None:
                rewarded.append((sample, r))
        if self.rejection and self.constraints:
            self._window.extend((s[0], s[1], t.status == "ok") for t, s in zip(fresh, samples) if t.status != "failed")
        if lowest is not None:
            self._worst = lowest
        if not rewarded:
            return
        rewards = np.array([r for _, r in rewarded])
        advantages = self._advantages(rewards)
        self.rewards.extend(rewards.tolist())
        if self.lstm is not None:
            self._lstm_step(rewarded, advantages)
            return

        probs = softmax(self.logits, self._valid)
        correction = None
        if self.rejection and self.constraints and self._window:
            window = list(self._window)
            correction = rejection_correction(probs, [(i, a) for i, a, _ in window], [ok for _, _, ok in window])
        grad = np.zeros_like(self.logits)
        for ((indices, active), _), adv in zip(rewarded, advantages):
            g = log_prob_gradient(probs, indices, active)
            if correction is not None:
                g = g - correction
            grad += adv * g
        grad /= len(rewarded)
        if self.entropy_weight:
            grad += self.entropy_weight * entropy_gradient(probs, self._valid)
        self._ascend(grad)

    def _lstm_step(self, rewarded: Sequence[tuple[tuple[np.ndarray, np.ndarray], float]],
                   advantages: np.ndarray) -> None:
        """One optimiser step of the LSTM on ``mean_i A_i log π(a_i)`` (+ entropy bonus, - the TabNAS term)."""
        assert self.lstm is not None
        torch = self.lstm.torch
        logp, entropy = self.lstm.log_probs([s[0] for s, _ in rewarded], [s[1] for s, _ in rewarded])
        adv = torch.as_tensor(advantages, dtype=logp.dtype)
        objective = (adv * logp).mean()
        if self.rejection and self.constraints and self._window:
            feasible = [(i, a) for i, a, ok in self._window if ok]
            if feasible:
                logp_f, _ = self.lstm.log_probs([i for i, _ in feasible], [a for _, a in feasible])
                objective = objective - adv.mean() * logp_f.mean()
        if self.entropy_weight:
            objective = objective + self.entropy_weight * entropy.mean()
        self._torch_opt.zero_grad()
        (-objective).backward()
        self._torch_opt.step()

    def _advantages(self, rewards: np.ndarray) -> np.ndarray:
        """``(R - b) / s`` against the baseline before this batch, then ``b`` and ``s²`` move toward the batch
        (the first batch sets them to its own mean and variance)."""
        d = self.baseline_decay
        if self.baseline is None:
            self.baseline = float(rewards.mean())
            self._variance = float(rewards.var())
        raw = rewards - self.baseline
        scale = math.sqrt(self._variance)
        tiny = 1e-12 * max(1.0, abs(self.baseline))
        adv = np.clip(raw / scale, -ADVANTAGE_CLIP, ADVANTAGE_CLIP) if scale > tiny else np.zeros_like(raw)
        for r in rewards.tolist():
            delta = r - self.baseline
            self.baseline += (1 - d) * delta
            self._variance = d * self._variance + (1 - d) * delta * delta
        return adv

    def _ascend(self, grad: np.ndarray) -> None:
        """One ascent step on the logits (Adam, or plain gradient ascent)."""
        if self.optimizer == "sgd":
            self.logits += self.learning_rate * grad
            return
        b1, b2 = _ADAM_BETAS
        self._steps += 1
        self._adam_m = b1 * self._adam_m + (1 - b1) * grad
        self._adam_v = b2 * self._adam_v + (1 - b2) * grad * grad
        m_hat = self._adam_m / (1 - b1**self._steps)
        v_hat = self._adam_v / (1 - b2**self._steps)
        self.logits += self.learning_rate * m_hat / (np.sqrt(v_hat) + _ADAM_EPS)
