"""The REINFORCE strategy: conformance, learning, MnasNet rewards, the TabNAS correction, end to end on NB201."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from hwnas.experiments import run_experiment
from hwnas.objectives import Constraint, Objective, Trial
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.base import CategoricalSpace, Gene
from hwnas.search_spaces.mbv3 import MobileNetV3Space
from hwnas.search_spaces.nb201 import NB201Space
from hwnas.strategies import STRATEGIES
from hwnas.strategies.lstm_controller import LSTMController
from hwnas.strategies.reinforce import (
    Reinforce,
    feasible_probability_gradient,
    log_prob_gradient,
    mnasnet_reward,
    rejection_correction,
    softmax,
)
from hwnas.testing import check_strategy
from hwnas.testing.experiments import PIXEL3, nb201_benchmark_yaml
from hwnas.testing.strategies import toy_metrics


def median_cost(space: Any) -> float:
    """The cost bound check_strategy puts on its toy problem (about half of random samples meet it)."""
    m = toy_metrics(space)
    costs = sorted(m(space.sample(np.random.default_rng(i)))["cost_ms"] for i in range(20))
    return costs[len(costs) // 2]


# -- conformance ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("space_name", SPACES.names())
def test_conformance_with_mnasnet_reward(space_name):
    """check_strategy's two objectives (score max, cost_ms min) need a reward block."""
    space = SPACES.get(space_name)()
    reward = {"accuracy": "score", "latency": "cost_ms", "target": median_cost(space)}
    check_strategy(STRATEGIES.get("reinforce"), space, params={"reward": reward})


@pytest.mark.parametrize("space", [NB201Space(), MobileNetV3Space(), SPACES.get("darts")()], ids=lambda s: s.name)
def test_conformance_with_hard_reward_and_rejection(space):
    reward = {"accuracy": "score", "latency": "cost_ms", "target": median_cost(space), "hard": True}
    check_strategy(STRATEGIES.get("reinforce"), space,
                   params={"reward": reward, "rejection": True, "failed_reward": "worst", "entropy_weight": 0.01})


@pytest.mark.parametrize("params", [{}, {"optimizer": "sgd", "failed_reward": -5.0, "infeasible_reward": "skip"}])
@pytest.mark.parametrize("space", [NB201Space(), MobileNetV3Space()], ids=lambda s: s.name)
def test_conformance_single_objective(space, params):
    """check_strategy with its first objective only (score): the reward is the objective itself."""

    def single_objective(**kw: Any) -> Reinforce:
        return Reinforce(**{**kw, "objectives": kw["objectives"][:1]})

    check_strategy(single_objective, space, params=params)


# -- configuration ----------------------------------------------------------------------------------------
def make(space: Any, objectives: list[Objective], constraints: list[Constraint] | None = None, seed: int = 0,
         **params: Any) -> Reinforce:
    return STRATEGIES.create("reinforce", params, space=space, objectives=objectives, constraints=constraints or [],
                             rng=np.random.default_rng(seed))


TWO = [Objective("top1", "max"), Objective("latency_ms", "min")]


def test_several_objectives_need_a_reward_block():
    with pytest.raises(ValueError, match="reward block") as info:
        make(NB201Space(), TWO)
    text = str(info.value)
    assert "\n" not in text
    assert all(key in text for key in ("accuracy", "latency", "target", "w"))


def test_reward_metrics_must_be_objectives_or_constraints():
    cons = [Constraint("params_m", max=5.0)]
    ok = make(NB201Space(), TWO, cons, reward={"accuracy": "top1", "latency": "params_m", "target": 5.0})
    assert ok.reward is not None and ok.reward.latency == "params_m"  # a constraint metric counts
    with pytest.raises(ValueError, match=r"reward\.latency 'latency_ms@pixel3' is not an objective") as info:
        make(NB201Space(), TWO, reward={"accuracy": "top1", "latency": "latency_ms@pixel3", "target": 5.0})
    assert "\n" not in str(info.value) and "known: top1, latency_ms" in str(info.value)
    with pytest.raises(ValueError, match=r"reward\.accuracy 'latency_ms' is an objective to minimise"):
        make(NB201Space(), TWO, reward={"accuracy": "latency_ms", "latency": "top1", "target": 5.0})


def test_an_unknown_controller_is_refused_by_name():
    from hwnas.errors import InvalidParams

    with pytest.raises(InvalidParams, match="controller"):
        make(NB201Space(), TWO[:1], controller="gru")
    with pytest.raises(ValueError, match="no per-gene probabilities"):
        make(NB201Space(), TWO[:1], controller="lstm").probabilities()


# -- rewards ----------------------------------------------------------------------------------------------
def test_mnasnet_reward_on_hand_computed_values():
    # soft (alpha = beta = w = -0.07): 0.75 * 0.8 ** -0.07 = 0.75 * exp(0.07 * ln 1.25)
    assert mnasnet_reward(0.75, 80.0, 100.0) == pytest.approx(0.75 * math.exp(0.07 * math.log(1.25)))
    assert mnasnet_reward(0.75, 80.0, 100.0) == pytest.approx(0.761807, abs=1e-6)
    assert mnasnet_reward(0.75, 125.0, 100.0) == pytest.approx(0.75 * 1.25 ** -0.07)
    assert mnasnet_reward(0.75, 125.0, 100.0) == pytest.approx(0.738376, abs=1e-6)
    assert mnasnet_reward(70.0, 100.0, 100.0) == pytest.approx(70.0)  # on target: the accuracy itself
    # hard (alpha = 0, beta = -1): the accuracy within the target, acc * target / lat beyond it
    assert mnasnet_reward(0.75, 80.0, 100.0, hard=True) == pytest.approx(0.75)
    assert mnasnet_reward(0.75, 125.0, 100.0, hard=True) == pytest.approx(0.6)
    # the strategy applies it to the named metrics
    s = make(NB201Space(), TWO, reward={"accuracy": "top1", "latency": "latency_ms", "target": 100.0, "w": -0.1})
    trial = Trial(0, NB201Space().sample(np.random.default_rng(0)), {"top1": 0.75, "latency_ms": 125.0})
    assert s.reward_of(trial) == pytest.approx(0.75 * 1.25 ** -0.1)
    assert s.reward_of(Trial(1, trial.arch, {"top1": 0.75})) is None  # a metric missing: no reward


def test_single_objective_reward_is_on_the_maximise_scale():
    arch = NB201Space().sample(np.random.default_rng(0))
    assert make(NB201Space(), [Objective("top1", "max")]).reward_of(Trial(0, arch, {"top1": 71.5})) == 71.5
    assert make(NB201Space(), [Objective("err", "min")]).reward_of(Trial(0, arch, {"err": 0.25})) == -0.25


# -- learning ---------------------------------------------------------------------------------------------
def drive(strategy: Any, space: Any, budget: int = 120, batch: int = 10) -> list[float]:
    metrics = toy_metrics(space)
    scores: list[float] = []
    n = 0
    while n < budget:
        archs = strategy.ask(batch)
        trials = [Trial(n + i, a, metrics(a)) for i, a in enumerate(archs)]
        n += len(archs)
        scores += [t.metrics["score"] for t in trials]
        strategy.tell(trials)
    return scores


def test_policy_concentrates_on_a_toy_problem():
    space = MobileNetV3Space()
    s = make(space, [Objective("score", "max")], seed=0)
    start = s.entropy()
    assert start == pytest.approx(sum(math.log(len(g.choices)) for g in space.genes()))  # uniform at start
    scores = drive(s, space, budget=200)
    assert np.mean(scores[-20:]) > np.mean(scores[:20]) + 3.0  # (about 10 against 3)
    assert s.entropy() < 0.9 * start


def test_beats_random_search_on_a_toy_problem():
    """As test_conformance's guided strategies do: same budget (120), 3 seeds, best score found."""
    space = MobileNetV3Space()
    objs = [Objective("score", "max")]
    rl = np.mean([max(drive(make(space, objs, seed=seed), space)) for seed in range(3)])
    rnd = np.mean([max(drive(STRATEGIES.create("random", {}, space=space, objectives=objs, constraints=[],
                                               rng=np.random.default_rng(seed)), space)) for seed in range(3)])
    assert rl > rnd  # (about 16.4 against 13.4)


def test_failed_trials_are_skipped_unless_told_otherwise():
    space = NB201Space()
    archs = [space.from_ops(ops) for ops in [(3, 3, 3, 3, 3, 3), (1, 1, 1, 1, 1, 1), (2, 2, 2, 2, 2, 2)]]
    ok = [Trial(0, archs[0], {"top1": 90.0}), Trial(1, archs[1], {"top1": 60.0})]
    failed = Trial(2, archs[2], {}, "failed", error="RuntimeError: CUDA out of memory")
    skip = make(space, [Objective("top1", "max")])
    skip.tell([failed])
    assert not skip.logits.any() and skip.rewards == []  # nothing learnt from a crash
    worst = make(space, [Objective("top1", "max")], failed_reward="worst")
    worst.tell([*ok, failed])
    assert worst.rewards == [90.0, 60.0, 60.0]  # the lowest reward seen so far
    fixed = make(space, [Objective("top1", "max")], failed_reward=10.0)
    fixed.tell([*ok, failed])
    assert fixed.rewards == [90.0, 60.0, 10.0]


# -- the TabNAS correction ----------------------------------------------------------------------------------
class OneGeneSpace(CategoricalSpace):
    """A space of one gene with five choices (enough to enumerate everything)."""

    name = "one_gene"

    def genes(self) -> list[Gene]:
        return [Gene("op", (0, 1, 2, 3, 4))]

    def size(self) -> int:
        return 5


def test_rejection_estimator_matches_the_exact_gradient():
    """∇ log(π(a) / P(F)) for a 1-gene softmax, F = {0, 2, 3}: exact by enumeration, the estimator with every
    member weighted by π (exact) and with Monte Carlo samples of π (close), and a finite-difference check."""
    theta = np.array([[0.3, -0.2, 0.5, 0.0, 1.0]])
    valid = np.ones_like(theta, dtype=bool)
    feasible_set = [True, False, True, True, False]
    a = 2
    active = np.array([True])

    def log_ratio(t: np.ndarray) -> float:
        p = softmax(t, valid)[0]
        return float(np.log(p[a]) - np.log(sum(p[k] for k in range(5) if feasible_set[k])))

    p = softmax(theta, valid)
    big_p = sum(p[0, k] for k in range(5) if feasible_set[k])
    grad_p = sum(p[0, k] * log_prob_gradient(p, np.array([k]), active) for k in range(5) if feasible_set[k])
    exact = log_prob_gradient(p, np.array([a]), active) - grad_p / big_p
    h = 1e-6
    numeric = np.array([[(log_ratio(theta + h * np.eye(5)[j]) - log_ratio(theta - h * np.eye(5)[j])) / (2 * h)
                         for j in range(5)]])
    np.testing.assert_allclose(exact, numeric, atol=1e-7)  # the enumeration formula is the gradient

    members = [(np.array([k]), active) for k in range(5)]
    p_hat, grad_hat = feasible_probability_gradient(p, members, feasible_set, weights=p[0])
    assert p_hat == pytest.approx(big_p)
    np.testing.assert_allclose(grad_hat, grad_p, atol=1e-12)

    draws = np.random.default_rng(0).choice(5, size=40_000, p=p[0])
    samples = [(np.array([k]), active) for k in draws.tolist()]
    feasible = [feasible_set[k] for k in draws.tolist()]
    estimate = log_prob_gradient(p, np.array([a]), active) - rejection_correction(p, samples, feasible)
    np.testing.assert_allclose(estimate, exact, atol=0.01)
    # without the correction the score function is off by ∇ log P(F), far more than the Monte Carlo error
    assert np.abs(log_prob_gradient(p, np.array([a]), active) - exact).max() > 0.1


def test_rejection_update_uses_the_told_trials_as_monte_carlo_samples():
    """Infeasible trials get no reward term; they enter through P̂ = feasible share of the window.

    Plain SGD with rate 1. Batch 1: choices 0 (reward 1), 1 (reward 0), 4 (infeasible): the baseline is the
    batch mean, advantages +-1, so the correction cancels and the step is (e0 - e1) / 2. Batch 2: choice 2
    (reward 1, advantage A against the moving baseline): the window {0, 1, 4, 2} gives P̂ = 3/4 and
    ∇P̂ / P̂ = (e0 + e1 + e2) / 3 - p, so the step is A (e2 - p - ∇P̂ / P̂) = A (e2 - (e0 + e1 + e2) / 3).
    """
    space = OneGeneSpace()
    cons = [Constraint("cost", max=3.0)]
    s = make(space, [Objective("acc", "max")], cons, optimizer="sgd", learning_rate=1.0, rejection=True)
    arch = [space.from_indices([k]) for k in range(5)]
    s.tell([Trial(0, arch[0], {"acc": 1.0, "cost": 1.0}), Trial(1, arch[1], {"acc": 0.0, "cost": 1.0}),
            Trial(2, arch[4], {"cost": 9.0}, "infeasible")])
    np.testing.assert_allclose(s.logits[0], [0.5, -0.5, 0, 0, 0], atol=1e-12)
    baseline, variance = 0.5, 0.25  # moved toward 1 then 0 with decay 0.9
    for r in (1.0, 0.0):
        delta = r - baseline
        baseline += 0.1 * delta
        variance = 0.9 * variance + 0.1 * delta * delta
    adv = (1.0 - baseline) / math.sqrt(variance)
    s.tell([Trial(3, arch[2], {"acc": 1.0, "cost": 1.0})])
    np.testing.assert_allclose(s.logits[0], [0.5 - adv / 3, -0.5 - adv / 3, 2 * adv / 3, 0, 0], atol=1e-12)

    plain = make(space, [Objective("acc", "max")], cons, optimizer="sgd", learning_rate=1.0,
                 infeasible_reward="skip")
    plain.tell([Trial(0, arch[0], {"acc": 1.0, "cost": 1.0}), Trial(1, arch[1], {"acc": 0.0, "cost": 1.0}),
                Trial(2, arch[4], {"cost": 9.0}, "infeasible")])
    p = softmax(plain.logits, plain._valid)[0]
    plain.tell([Trial(3, arch[2], {"acc": 1.0, "cost": 1.0})])
    np.testing.assert_allclose(plain.logits[0], [0.5, -0.5, 0, 0, 0] + adv * (np.eye(5)[2] - p), atol=1e-12)


def test_invalid_draws_are_drawn_again_and_the_update_uses_what_was_drawn():
    """DARTS: most factorised draws feed a node twice (invalid); proposals are still members, and the
    update's indices are the policy's draws for them (the canonical form sorts edges, the draw need not)."""
    space = SPACES.get("darts")()
    s = make(space, [Objective("score", "max")], seed=3)
    archs = s.ask(8)
    assert len({a.arch_id for a in archs}) == 8
    for a in archs:
        space.validate(a)
        drawn = s._pending[a.arch_id]
        assert drawn is not None and space.from_indices(drawn) == a


# -- end to end -------------------------------------------------------------------------------------------
TOP1 = [{"metric": "top1", "direction": "max"}]
TWO_OBJECTIVES = [*TOP1, {"metric": PIXEL3, "direction": "min"}]
REWARD = {"accuracy": "top1", "latency": PIXEL3, "target": 10.0}


def run(tmp_path, shared_data, *, seed: int, strategy: str, params: dict | None = None, trials: int = 150,
        objectives: list = TOP1, constraints: list | None = None) -> Any:
    run_dir = tmp_path / f"{strategy}-{seed}-{len(list(tmp_path.iterdir()))}"
    run_dir.mkdir()
    path = run_dir / "exp.yaml"
    path.write_text(nb201_benchmark_yaml(shared_data, name="reinforce", seed=seed, strategy=strategy, params=params,
                                         trials=trials, accuracy="cifar10_valid_12ep", objectives=objectives,
                                         constraints=constraints or []))
    return run_experiment(path, run_dir=run_dir / "run")


def test_beats_random_search_on_nb201(shared_data, tmp_path):
    """Best 12-epoch CIFAR-10 validation top1 of 150 trials, mean over seeds 0-2: reinforce (default params)
    84.39, random 83.67. Over seeds 0-59: 84.27 +- 0.36 against 83.88 +- 0.40 per seed; over the 20 seed
    triples the gap of the means is 0.39 on average, above 0 in 19 and above the 0.1 asserted here in 14.
    The table's best is 84.89 (150 random trials reach its top 1 %, hence the small gap)."""
    best: dict[str, list[float]] = {"reinforce": [], "random": []}
    for strategy, found in best.items():
        for seed in range(3):
            result = run(tmp_path, shared_data, seed=seed, strategy=strategy)
            assert result.stopped_early is None
            assert len(result.trials) == 150 == len({t.arch.arch_id for t in result.trials})
            found.append(max(t.metrics["top1"] for t in result.trials if t.status == "ok"))
    assert np.mean(best["reinforce"]) > np.mean(best["random"]) + 0.1


def test_constrained_search_on_nb201_with_reward_shaping_and_rejection(shared_data, tmp_path):
    """600 trials under latency <= 10 ms on a Pixel 3 (46 % of NB201's cells): both spend the budget; the
    MnasNet reward learns to stay under the target (the last 100 trials mostly feasible), and TabNAS's
    rejection, learning from feasible trials only, finds the best feasible cell of the table (83.466)."""
    limit = [{"metric": PIXEL3, "max": 10.0}]
    shaped = run(tmp_path, shared_data, seed=0, strategy="reinforce", params={"reward": REWARD}, trials=600,
                 objectives=TWO_OBJECTIVES, constraints=limit)
    rejecting = run(tmp_path, shared_data, seed=0, strategy="reinforce", trials=600, objectives=TWO_OBJECTIVES,
                    params={"reward": REWARD, "rejection": True}, constraints=limit)
    for result in (shaped, rejecting):
        assert result.stopped_early is None
        assert len(result.trials) == 600 == len({t.arch.arch_id for t in result.trials})
    feasible = [t.status == "ok" for t in shaped.trials]
    assert np.mean(feasible[-100:]) > 0.85 > 0.6 > np.mean(feasible[:100])
    best = max(t.metrics["top1"] for t in rejecting.trials if t.status == "ok")
    assert best == pytest.approx(83.466, abs=1e-3)



def test_a_resumed_run_asks_the_same_architectures(shared_data, tmp_path, caplog):
    """Cut the journal, resume: the controller is rebuilt by asking again and replaying the journal's trials
    (the indices it drew, its baseline, its Monte Carlo window), so it goes on exactly as the uncut run did."""
    limit = [{"metric": PIXEL3, "max": 10.0}]
    full = run(tmp_path, shared_data, seed=4, strategy="reinforce", trials=200, objectives=TWO_OBJECTIVES,
               params={"reward": REWARD, "rejection": True}, constraints=limit)
    journal = full.run_dir / "trials.jsonl"
    journal.write_text("".join(journal.read_text().splitlines(keepends=True)[:101]))
    with caplog.at_level("WARNING"):
        resumed = run_experiment(resume=full.run_dir)
    assert resumed.reused == 101 and resumed.evaluated == 99
    assert [t.arch.arch_id for t in resumed.trials] == [t.arch.arch_id for t in full.trials]
    assert "replayed as number" not in caplog.text and "not asked again" not in caplog.text


# -- the LSTM controller --------------------------------------------------------------------------------------
def test_lstm_log_probabilities_sum_to_one_and_match_its_draws():
    """Teacher-forced log π over every sequence of a 3 x 4 x 2 space sums to 1, and 6,000 draws land on each
    sequence as often as π says (chi-square), with parameters scaled up so that decisions depend on each
    other and are far from uniform."""
    import torch

    ctrl = LSTMController([3, 4, 2], hidden=8, seed=3, tanh_constant=None)
    with torch.no_grad():
        for p in ctrl.parameters():
            p.mul_(25.0)
    every = [np.array(t) for t in np.ndindex(3, 4, 2)]
    with torch.no_grad():
        logp, entropy = ctrl.log_probs(every, [np.ones(3, dtype=bool)] * len(every))
    pi = logp.double().exp().numpy()
    assert pi.sum() == pytest.approx(1.0, abs=1e-5)
    assert pi.max() > 3 / len(every)  # far from uniform
    h = -(pi * np.log(pi)).sum()  # the path entropies average to the policy's entropy
    assert float((pi * entropy.double().numpy()).sum()) == pytest.approx(h, rel=1e-4)
    rng = np.random.default_rng(0)
    counts = np.zeros(len(every))
    for _ in range(6000):
        a, b, c = ctrl.draw(rng)
        counts[(a * 4 + b) * 2 + c] += 1
    expected = 6000 * pi
    keep = expected > 5
    chi2 = float((((counts - expected) ** 2)[keep] / expected[keep]).sum())
    assert chi2 < 60  # 24 cells: the 99.9 % point of chi-square with 23 degrees of freedom is 49.7
    assert counts[~keep].sum() < 40


def test_lstm_log_probability_counts_only_active_genes():
    import torch

    ctrl = LSTMController([3, 4], hidden=8, seed=1)
    with torch.no_grad():
        full, _ = ctrl.log_probs([np.array([1, 2])], [np.array([True, True])])
        first, _ = ctrl.log_probs([np.array([1, 2])], [np.array([True, False])])
        other, _ = ctrl.log_probs([np.array([1, 3])], [np.array([True, False])])
    assert float(first) == pytest.approx(float(other)) and float(full) < float(first) < 0


def test_lstm_policy_concentrates_on_a_toy_problem():
    space = MobileNetV3Space()
    s = make(space, [Objective("score", "max")], seed=0, controller="lstm")
    start = s.entropy()
    assert start == pytest.approx(sum(math.log(len(g.choices)) for g in space.genes()), rel=0.01)  # ~uniform
    scores = drive(s, space, budget=200)
    assert np.mean(scores[-20:]) > np.mean(scores[:20]) + 5.0  # (about 16 against 3)
    assert s.entropy() < 0.8 * start


def test_lstm_controller_is_deterministic_under_a_seed():
    space = NB201Space()
    runs = []
    for _ in range(2):
        s = make(space, [Objective("score", "max")], seed=7, controller="lstm")
        drive(s, space, budget=60)
        runs.append([a.arch_id for a in s.ask(10)])
    assert runs[0] == runs[1]
    other = make(space, [Objective("score", "max")], seed=8, controller="lstm")
    drive(other, space, budget=60)
    assert [a.arch_id for a in other.ask(10)] != runs[0]


@pytest.mark.parametrize("space", [NB201Space(), SPACES.get("darts")()], ids=lambda s: s.name)
def test_lstm_conformance_with_rejection(space):
    reward = {"accuracy": "score", "latency": "cost_ms", "target": median_cost(space), "hard": True}
    check_strategy(STRATEGIES.get("reinforce"), space,
                   params={"controller": "lstm", "reward": reward, "rejection": True, "entropy_weight": 0.01})
