"""predictor_guided in a hardware-aware search: looked-up objectives, isomorph classes, hypervolume selection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hwnas.errors import ConfigError
from hwnas.objectives import Objective, Trial
from hwnas.search_spaces.nb201 import NB201Space
from hwnas.strategies import STRATEGIES
from hwnas.strategies.base import LookupAware

REPO = Path(__file__).resolve().parents[2]
OBJECTIVES = [Objective("top1", "max"), Objective("latency_ms@toy", "min")]
PARAMS = {"predictor_params": {"n_estimators": 20}, "pool": 200, "parents": 4, "mutants": 4, "generations": 1}


def _toy(space: NB201Space):
    """top1 from the cell's class (isomorphs agree, as training would), latency from the cell as written."""
    w = np.random.default_rng(5).random(5)

    def metrics(arch):
        rep = space.isomorph_representative(arch)
        top1 = 70 + 10 * float(np.mean([w[op] for op in space.ops_of(rep)]))
        latency = 1.0 + float(sum((i + 1) * op for i, op in enumerate(space.ops_of(arch))))
        return {"top1": top1, "latency_ms@toy": latency}

    return metrics


def _strategy(space, seed=0, **params):
    return STRATEGIES.create("predictor_guided", {**PARAMS, **params}, space=space, objectives=OBJECTIVES,
                             constraints=[], rng=np.random.default_rng(seed))


def _run(strategy, space, metrics, rounds):
    n = 0
    for _ in range(rounds):
        archs = strategy.ask(10)
        strategy.tell([Trial(n + i, a, metrics(a)) for i, a in enumerate(archs)])
        n += len(archs)


def test_a_looked_up_objective_is_read_exactly_and_never_fitted():
    space = NB201Space(merge_isomorphic=False)
    metrics = _toy(space)
    calls = []

    def look_up(archs):
        calls.append(len(archs))
        return [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs]

    s = _strategy(space)
    assert isinstance(s, LookupAware)
    s.use_lookup(look_up, ["latency_ms@toy"])
    _run(s, space, metrics, 4)
    assert calls and max(calls) > 10  # it priced whole candidate pools, not only what it asked
    models = s._fit()
    assert models[1] is None and models[0] is not None  # no latency predictor: the lookup answers
    archs = [space.sample(np.random.default_rng(i)) for i in range(30)]
    pred = s._predict(models, archs)
    assert pred[:, 1].tolist() == [metrics(a)["latency_ms@toy"] for a in archs]


def test_accuracy_is_learned_per_isomorphism_class_and_read_from_evaluated_isomorphs():
    space = NB201Space(merge_isomorphic=False)
    metrics = _toy(space)
    s = _strategy(space)
    s.use_lookup(lambda archs: [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs], ["latency_ms@toy"])
    _run(s, space, metrics, 3)
    told = [t for t in s.trials if len(space.isomorphs(t.arch)) > 1]
    assert told, "no evaluated cell with isomorphs (change the seed)"
    t = told[0]
    others = [m for m in space.isomorphs(t.arch) if m != t.arch]
    pred = s._predict(s._fit(), others)
    assert pred[:, 0] == pytest.approx([-t.metrics["top1"]] * len(others))  # minimise scale: -top1
    # a second member told with another value (training noise): the class mean answers
    s.tell([Trial(999, others[0], {"top1": t.metrics["top1"] - 2.0, "latency_ms@toy": 1.0})])
    pred = s._predict(s._fit(), [t.arch])
    assert pred[0, 0] == pytest.approx(-(t.metrics["top1"] - 1.0))


def test_merged_or_single_objective_spaces_keep_the_old_behaviour_and_bad_references_are_refused():
    merged = NB201Space()
    s = _strategy(merged)
    assert not any(s.by_class)  # a merged space has one cell per class already
    single = STRATEGIES.create("predictor_guided", PARAMS, space=merged, objectives=OBJECTIVES[:1],
                               constraints=[], rng=np.random.default_rng(0))
    assert single.selection == "rank" and s.selection == "hypervolume"
    with pytest.raises(ConfigError, match="reference has 1 values for 2 objectives"):
        _strategy(merged, reference=[70.0])
    with pytest.raises(ConfigError, match=r"reference \[70.0, inf\] is not finite"):
        _strategy(merged, reference=[70.0, float("inf")])
    with pytest.raises(ConfigError, match=r"params\.reference_from: Input should be 'worst', 'initial_median' or "
                                          r"'sampled_median'"):
        _strategy(merged, reference_from="table")


@pytest.mark.parametrize("name", ["predictor_guided", "bayes_opt"])
def test_a_reference_from_its_own_first_trials_is_their_median_and_then_steers_and_skips(name):
    """reference_from: initial_median: the median of each objective over the first `initial`
    evaluated trials (the random ones), fixed once they are told; it then keeps looked-up candidates inside it."""
    space = NB201Space(merge_isomorphic=False)
    metrics = _toy(space)
    params = dict(PARAMS, initial=10, skip_beyond_reference=True, reference_from="initial_median")
    if name == "bayes_opt":
        params.update(predictor_params={"members": ["gbt"], "n_members": 2,
                                        "member_params": {"gbt": {"n_estimators": 10}}}, samples=8)
    s = STRATEGIES.create(name, params, space=space, objectives=OBJECTIVES, constraints=[],
                          rng=np.random.default_rng(3))
    s.use_lookup(lambda archs: [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs], ["latency_ms@toy"])
    first = s.ask(10)
    s.tell([Trial(i, a, metrics(a)) for i, a in enumerate(first[:9])])
    assert s.reference is None  # nine told: not yet
    s.tell([Trial(9, first[9], metrics(first[9]))])
    told = np.array([[-metrics(a)["top1"], metrics(a)["latency_ms@toy"]] for a in first])
    assert s.reference == pytest.approx(np.median(told, axis=0))
    later = [a for _ in range(2) for a in s.ask(10)]
    assert max(metrics(a)["latency_ms@toy"] for a in later) < s.reference[1]
    s.tell([Trial(10 + i, a, metrics(a)) for i, a in enumerate(later)])
    assert s.reference == pytest.approx(np.median(told, axis=0))  # fixed: later (better) trials do not move it
    # the default of predictor_guided derives none (the hypervolume from just beyond the worst evaluated point)
    if name == "predictor_guided":
        plain = _strategy(space)
        _run(plain, space, metrics, 2)
        assert plain.reference is None


@pytest.mark.parametrize("name", ["predictor_guided", "bayes_opt"])
def test_a_sampled_median_reference_looks_up_a_random_sample_and_learns_the_rest_from_the_first_trials(name):
    """reference_from: sampled_median: on the looked-up objective, the median over `pool` random architectures'
    looked-up values (drawn once, from a child of the strategy's generator); on a learned one, the first trials'
    median."""
    from hwnas.search_spaces.base import sample_batch

    space = NB201Space(merge_isomorphic=False)
    metrics = _toy(space)
    params = dict(PARAMS, initial=10, reference_from="sampled_median", skip_beyond_reference=True)
    if name == "bayes_opt":
        params.update(predictor_params={"members": ["gbt"], "n_members": 2,
                                        "member_params": {"gbt": {"n_estimators": 10}}}, samples=8)
    s = STRATEGIES.create(name, params, space=space, objectives=OBJECTIVES, constraints=[],
                          rng=np.random.default_rng(3))
    priced = []

    def look_up(archs):
        priced.append(len(archs))
        return [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs]

    s.use_lookup(look_up, ["latency_ms@toy"])
    first = s.ask(10)
    s.tell([Trial(i, a, metrics(a)) for i, a in enumerate(first[:9])])
    assert s.reference is None
    calls = len(priced)
    s.tell([Trial(9, first[9], metrics(first[9]))])
    assert priced[calls:] == [PARAMS["pool"]]  # one lookup of `pool` architectures, when the reference is set
    told = np.array([[-metrics(a)["top1"], metrics(a)["latency_ms@toy"]] for a in first])
    # the sample: the second child of a generator seeded as the strategy's (the first draws the CV folds)
    sample = sample_batch(space, np.random.default_rng(3).spawn(2)[1], PARAMS["pool"])
    expected = np.median([metrics(a)["latency_ms@toy"] for a in sample])
    assert s.reference == pytest.approx([np.median(told[:, 0]), expected])
    assert s.reference[1] != pytest.approx(np.median(told[:, 1]))  # not the first ten's median
    later = [a for _ in range(2) for a in s.ask(10)]
    assert max(metrics(a)["latency_ms@toy"] for a in later) < s.reference[1]  # it steers and skips as before
    # the search's own draws are those of initial_median until the references differ: the first ask is the same
    other = STRATEGIES.create(name, dict(params, reference_from="initial_median"), space=space, objectives=OBJECTIVES,
                              constraints=[], rng=np.random.default_rng(3))
    other.use_lookup(look_up, ["latency_ms@toy"])
    assert [a.arch_id for a in other.ask(10)] == [a.arch_id for a in first]


def test_the_lookup_finds_a_better_front_at_the_same_budget():
    """The same search with and without the latency lookup (60 accuracy evaluations, 3 seeds): the lookup lets it
    spend them on cells it knows are fast."""
    from hwnas.objectives import hypervolume

    space = NB201Space(merge_isomorphic=False)
    metrics = _toy(space)
    ref = [-75.0, 40.0]

    def hv(with_lookup: bool, seed: int) -> float:
        s = _strategy(space, seed=seed)
        if with_lookup:
            s.use_lookup(lambda archs: [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs],
                         ["latency_ms@toy"])
        _run(s, space, metrics, 6)
        pts = np.array([[-t.metrics["top1"], t.metrics["latency_ms@toy"]] for t in s.trials])
        return hypervolume(pts, ref)

    assert np.mean([hv(True, seed) for seed in range(3)]) > np.mean([hv(False, seed) for seed in range(3)])


def test_the_example_experiment_gives_the_strategy_its_latency_lookup(tmp_path, monkeypatch, shared_data):
    from hwnas.experiments import load_experiment, run_experiment

    if (REPO.parent / "shared" / "data").resolve() != shared_data.resolve():
        pytest.skip("the example's paths assume the data at ../shared/data")
    monkeypatch.chdir(REPO)
    exp = load_experiment(REPO / "experiments" / "nb201_hardware.yaml")
    strategy = exp.make_strategy()
    assert strategy.lookup_metrics == ("latency_ms@pixel3",)
    arch = NB201Space(merge_isomorphic=False).from_str(
        "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_1x1~2|")
    (row,) = strategy.lookup([arch])
    assert row == exp.evaluators[0].evaluate([arch])[0]  # the table's own value
    result = run_experiment(REPO / "experiments" / "nb201_hardware.yaml", run_dir=tmp_path / "run",
                            overrides=["budget.trials=40", "strategy.params.samples=8"])
    assert len(result.trials) == 40 and result.front


def test_a_benchmark_lookup_must_name_one_of_its_columns(tmp_path, shared_data):
    from hwnas.evaluation import EVALUATORS, EvalContext

    cls = EVALUATORS.get("benchmark")
    params = {"table": str(shared_data / "help-latency" / "nb201_latency.csv"),
              "columns": {"latency_ms@pixel3": "pixel3"}, "lookup": ["latency_ms@pixel4"]}
    with pytest.raises(ConfigError, match="lookup metric 'latency_ms@pixel4' is not one of its columns' metrics"):
        cls(context=EvalContext(space=NB201Space()), **cls.Params.model_validate(params).model_dump())


@pytest.mark.parametrize("name", ["predictor_guided", "bayes_opt"])
def test_skip_beyond_reference_proposes_only_what_the_lookup_puts_inside_it(name):
    space = NB201Space(merge_isomorphic=False)
    metrics = _toy(space)
    params = dict(PARAMS, reference=[70.0, 12.0])
    if name == "predictor_guided":  # bayes_opt's default
        params["skip_beyond_reference"] = True
    else:
        params.update(predictor_params={"members": ["gbt"], "n_members": 2,
                                        "member_params": {"gbt": {"n_estimators": 10}}}, samples=8)
    s = STRATEGIES.create(name, params, space=space, objectives=OBJECTIVES, constraints=[],
                          rng=np.random.default_rng(0))
    s.use_lookup(lambda archs: [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs], ["latency_ms@toy"])
    _run(s, space, metrics, 1)  # the initial trials
    # what the search proposes from its surrogates (where it finds fewer than asked, ask fills up with uniform
    # samples: 105 of the toy's 15,625 cells are inside 12 ms)
    proposed = [a for _ in range(3) for a in s._propose(s._fit(), 10)]
    assert len(proposed) >= 20
    assert max(metrics(a)["latency_ms@toy"] for a in proposed) < 12.0  # at 12 ms or more: no hypervolume inside
    if name == "predictor_guided":  # off by default there: the same run then proposes beyond the reference too
        s = _strategy(space, reference=[70.0, 12.0])
        s.use_lookup(lambda archs: [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs],
                     ["latency_ms@toy"])
        _run(s, space, metrics, 1)
        assert max(metrics(a)["latency_ms@toy"] for _ in range(3) for a in s._propose(s._fit(), 10)) >= 12.0


def test_bayes_opt_takes_the_lookup_too_and_a_looked_up_objective_has_no_spread():
    space = NB201Space(merge_isomorphic=False)
    metrics = _toy(space)
    s = STRATEGIES.create("bayes_opt", {"predictor_params": {"members": ["gbt"], "n_members": 2, "bootstrap": True,
                                                             "member_params": {"gbt": {"n_estimators": 10}}},
                                        "pool": 100, "parents": 3, "mutants": 4, "generations": 1, "samples": 8},
                          space=space, objectives=OBJECTIVES, constraints=[], rng=np.random.default_rng(0))
    s.use_lookup(lambda archs: [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs], ["latency_ms@toy"])
    _run(s, space, metrics, 3)  # past `initial`: the last asks went through the surrogate and EHVI
    models = s._fit()
    archs = [space.sample(np.random.default_rng(i)) for i in range(5)]
    std = s._predict_std(models, archs)
    assert models[1] is None and np.all(std[:, 1] == 0) and np.all(std[:, 0] >= 0)
    assert len({a.arch_id for a in s.ask(10)}) == 10


def test_a_full_feature_cache_is_refilled_with_every_row_asked_for(monkeypatch):
    """A space too large to cache every feature row (FBNet's) fills the cache; the rows of candidates that were
    cached before it was cleared are computed again, not lost (a KeyError stopped FBNet runs after ~400 queries)."""
    from hwnas.search_spaces.fbnet import FBNetSpace
    from hwnas.strategies import predictor_guided as pg

    monkeypatch.setattr(pg, "FEATURE_CACHE", 300)
    space = FBNetSpace()
    objectives = [Objective("flops", "max"), Objective("latency_ms@toy", "min")]
    rng = np.random.default_rng(3)
    w_flops, w_lat = rng.random((22, 9)), rng.random((22, 9))

    def metrics(arch):
        ops = space.op_indices(arch)
        rows = np.arange(22)
        return {"flops": float(w_flops[rows, ops].sum()), "latency_ms@toy": float(w_lat[rows, ops].sum())}

    strategy = STRATEGIES.create("predictor_guided", {**PARAMS, "initial": 8}, space=space, objectives=objectives,
                                 constraints=[], rng=np.random.default_rng(0))
    n = 0
    for _ in range(4):
        archs = strategy.ask(10)
        assert len({a.arch_id for a in archs}) == 10
        strategy.tell([Trial(n + i, a, metrics(a)) for i, a in enumerate(archs)])
        n += len(archs)
    assert len(strategy._rows) <= 300 + PARAMS["pool"] + 10 * PARAMS["parents"] * PARAMS["mutants"]


def _additive_fbnet(seed=3):
    """FBNet with a per-layer FLOPs-like sum (what a linear model fits exactly) and a looked-up latency."""
    from hwnas.search_spaces.fbnet import FBNetSpace

    space = FBNetSpace()
    objectives = [Objective("flops", "max"), Objective("latency_ms@toy", "min")]
    rng = np.random.default_rng(seed)
    w_flops, w_lat = rng.random((22, 9)), rng.random((22, 9))
    rows = np.arange(22)

    def metrics(arch):
        ops = space.op_indices(arch)
        return {"flops": float(w_flops[rows, ops].sum()), "latency_ms@toy": float(w_lat[rows, ops].sum())}

    return space, objectives, metrics


@pytest.mark.parametrize("name", ["predictor_guided", "bayes_opt"])
def test_a_challenger_that_ranks_the_told_trials_better_out_of_fold_is_fitted_instead(name):
    """On an additive objective the linear challenger ranks held-out trials better than a few trees and is chosen;
    the choice is made again once the told trials have grown by half, not at every ask."""
    space, objectives, metrics = _additive_fbnet()
    params = {"predictor_params": {"n_estimators": 20}, "pool": 100, "parents": 3, "mutants": 4, "generations": 1,
              "challenger": "linear"}
    if name == "bayes_opt":
        params = {**params, "predictor": "ensemble", "samples": 8,
                  "predictor_params": {"members": ["gbt"], "n_members": 2,
                                       "member_params": {"gbt": {"n_estimators": 20}}}}
    s = STRATEGIES.create(name, params, space=space, objectives=objectives, constraints=[],
                          rng=np.random.default_rng(0))
    s.use_lookup(lambda archs: [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs], ["latency_ms@toy"])
    _run(s, space, metrics, 6)  # 60 told; chosen at 20 (12 needed, asks come in tens), 30 and 50
    assert s.chosen == {0: (50, "challenger")}
    models = s._fit()
    assert type(models[0]).__name__ == "LinearPredictor" and models[1] is None


def test_a_challenger_that_does_not_win_leaves_the_run_as_it_was():
    """The comparison draws its folds from a child generator: where the predictor keeps winning (its challenger is
    itself, a tie), the run proposes exactly what it proposes without a challenger."""
    space = NB201Space(merge_isomorphic=False)
    metrics = _toy(space)
    runs = []
    for extra in ({}, {"challenger": "gbt", "challenger_params": {"n_estimators": 20}}):
        s = _strategy(space, **extra)
        s.use_lookup(lambda archs: [{"latency_ms@toy": metrics(a)["latency_ms@toy"]} for a in archs],
                     ["latency_ms@toy"])
        _run(s, space, metrics, 4)
        runs.append([t.arch.arch_id for t in s.trials])
    assert s.chosen == {0: (30, "predictor")}
    assert runs[0] == runs[1]


def test_bayes_opt_refuses_a_challenger_without_a_spread():
    space = NB201Space(merge_isomorphic=False)
    with pytest.raises(ConfigError, match="bayes_opt: challenger 'gbt' gives no uncertainty"):
        STRATEGIES.create("bayes_opt", {"challenger": "gbt"}, space=space, objectives=OBJECTIVES, constraints=[],
                          rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"^PredictorGuided: challenger: unknown predictor 'no_such_predictor'"):
        _strategy(space, challenger="no_such_predictor")


def test_auto_generations_grow_with_the_spaces_genes_within_bounds():
    """bayes_opt's default inner depth is one round per four genes, 3 to 8; predictor_guided keeps 3 unless told."""
    from hwnas.search_spaces import SPACES

    depth = {}
    for name in ("nb201", "fbnet", "vit", "ofa_mbv3"):
        space = SPACES.create(name, {})
        s = STRATEGIES.create("bayes_opt", {}, space=space, objectives=OBJECTIVES, constraints=[],
                              rng=np.random.default_rng(0))
        depth[name] = (len(space.genes()), s.generations)
        plain = STRATEGIES.create("predictor_guided", {}, space=space, objectives=OBJECTIVES, constraints=[],
                                  rng=np.random.default_rng(0))
        assert plain.generations == 3
        assert _strategy(space, generations="auto").generations == s.generations
    assert depth == {"nb201": (6, 3), "fbnet": (22, 6), "vit": (19, 5), "ofa_mbv3": (46, 8)}
    with pytest.raises(ConfigError, match="generations"):
        _strategy(NB201Space(), generations="deep")


def test_bayes_opt_draws_its_first_trials_as_a_balanced_design_and_predictor_guided_as_uniform_samples():
    """initial_design: balanced (bayes_opt's default) serves the design across asks until the first fit; random
    (predictor_guided's) is the space's uniform samples, as before."""
    from hwnas.search_spaces.base import balanced_batch
    from hwnas.search_spaces.fbnet import FBNetSpace

    space = FBNetSpace()
    objectives = [Objective("flops_m", "max"), Objective("latency_ms@toy", "min")]

    def make(name, **params):
        return STRATEGIES.create(name, params, space=space, objectives=objectives, constraints=[],
                                 rng=np.random.default_rng(3))

    whole = [a.arch_id for a in make("bayes_opt").ask(10)]
    s = make("bayes_opt")
    assert [a.arch_id for a in s.ask(4) + s.ask(4) + s.ask(2)] == whole  # one design, served in parts
    design = balanced_batch(space, np.random.default_rng(3), 10)
    assert [a.arch_id for a in design] == whole
    assert all(len({a.genes[g.name] for a in design}) == len(g.choices) for g in space.genes())
    g = np.random.default_rng(3)
    uniform = [space.sample(g).arch_id for _ in range(10)]
    assert [a.arch_id for a in make("bayes_opt", initial_design="random").ask(10)] == uniform
    assert [a.arch_id for a in make("predictor_guided").ask(10)] == uniform
    with pytest.raises(ConfigError, match="initial_design"):
        make("bayes_opt", initial_design="latin")
