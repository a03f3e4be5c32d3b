"""The differentiable strategies on the real NB201 mixed-op supernet: latency linearisation, budget landing, the
collapse guard, second-order DARTS, and bad input (a table that misses ops, a target below the fastest member)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import torch

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, MissingLatencyEntry
from hwnas.latency import TableLatencyModel
from hwnas.latency.context import DeviceContext
from hwnas.latency.tables import Entry, LatencyTable
from hwnas.search_spaces.nb201 import OPS, NB201Space
from hwnas.strategies import ONE_SHOT_STRATEGIES
from hwnas.strategies.differentiable import LinearLatency
from hwnas.supernet import SUPERNETS

NAMES = ("darts", "pc_darts", "gdas", "fbnet", "proxyless")


def small_space() -> NB201Space:
    return NB201Space(resolution=8, channels=8, cells_per_stage=1, num_classes=3, in_chans=1,
                      merge_isomorphic=False)


def supernet(space: NB201Space, **params: Any) -> Any:
    return SUPERNETS.create("nb201", params, space=space, generator=torch.Generator().manual_seed(0))


def batches(seed: int, n: int = 6, size: int = 16) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Images whose class is the sign pattern of two pixel sums: learnable by the cell's convolutions."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.standard_normal((size, 1, 8, 8)).astype(np.float32)
        y = (x[:, 0, :4].sum((1, 2)) > 0).astype(np.int64) + (x[:, 0, 4:].sum((1, 2)) > 0)
        out.append((torch.from_numpy(x), torch.from_numpy(y)))
    return out


TRAIN, VALID = batches(1), batches(2)

#: Per-op cost (ms) of the toy models: convolutions are slow.
OP_MS = {"none": 0.0, "skip_connect": 0.05, "nor_conv_1x1": 0.4, "nor_conv_3x3": 1.0, "avg_pool_3x3": 0.2}


class OpCostModel:
    """A whole-network model that is a sum of per-edge op costs plus a fixed part."""

    def __init__(self, space: NB201Space, costs: dict[str, float] | None = None, base: float = 0.5) -> None:
        self.space, self.costs, self.base = space, costs or OP_MS, base
        self.calls = 0

    def predict_ms(self, archs: list[Architecture]) -> np.ndarray:
        self.calls += 1
        return np.array([self.base + sum(self.costs[OPS[o]] for o in self.space.ops_of(a)) for a in archs])


def test_linearisation_is_exact_on_an_additive_model_and_one_call():
    space = small_space()
    model = OpCostModel(space)
    rng = np.random.default_rng(0)
    arch = space.sample(rng)
    lin = LinearLatency(space, model, arch)
    assert model.calls == 1  # every single-gene variant priced in one batch
    assert lin.base_ms == pytest.approx(model.predict_ms([arch])[0])
    for _ in range(20):
        other = space.sample(rng)
        idx = {g.name: g.choices.index(other.genes[g.name]) for g in space.genes()}
        assert lin.of(idx) == pytest.approx(float(model.predict_ms([other])[0]))
    weights = {g.name: torch.softmax(torch.randn(len(g.choices)), 0) for g in space.genes()}
    expected = float(lin.expected(weights))
    by_hand = 0.5 + sum(float(weights[g.name] @ torch.tensor([OP_MS[OPS[c]] for c in g.choices]))
                        for g in space.genes())
    assert expected == pytest.approx(by_hand, rel=1e-5)


def test_knapsack_finds_the_most_probable_member_in_the_band():
    space = small_space()
    model = OpCostModel(space)
    rng = np.random.default_rng(3)
    lin = LinearLatency(space, model, space.sample(rng))
    logp = {g.name: np.log(rng.dirichlet(np.ones(len(g.choices)))) for g in space.genes()}
    lo, hi = 2.0, 2.3
    found = lin.most_probable_within(logp, lo, hi)
    assert found
    genes = space.genes()
    best = max((c for c in itertools.product(*[range(len(g.choices)) for g in genes])
                if lo <= lin.of(dict(zip([g.name for g in genes], c))) <= hi),
               key=lambda c: sum(logp[g.name][k] for g, k in zip(genes, c)))
    assert found[0] == dict(zip([g.name for g in genes], best))


@pytest.mark.parametrize("name", NAMES)
def test_budget_mode_lands_within_the_tolerance(name):
    space = small_space()
    model = OpCostModel(space)
    target = 3.0  # fastest derivable 0.8 ms (six skips: never none), slowest 6.5 ms
    strategy = ONE_SHOT_STRATEGIES.create(name, {"target_ms": target, "collapse_fraction": None},
                                          space=space, rng=np.random.default_rng(0))
    net = supernet(space, **({"partial_channels": 2} if name == "pc_darts" else {}))
    found = strategy.search(net, TRAIN, VALID, steps=12, latency_model=model)
    ms = float(model.predict_ms([found[0]])[0])
    assert abs(ms / target - 1) <= 0.05 + 1e-9, (ms, strategy.record)
    assert strategy.record["landed"] is True and strategy.record["derived_ms"] == pytest.approx(ms)
    assert any("multiplier" in h for h in strategy.record["history"])


def test_a_landing_metric_lands_the_budget_by_measurement_where_the_model_misprices():
    space = small_space()
    model = OpCostModel(space)
    # the "device": convolutions cost more than the model says, a larger fixed part
    device = OpCostModel(space, {**OP_MS, "nor_conv_3x3": 1.5, "nor_conv_1x1": 0.55}, base=0.9)
    target = 3.5
    found = {}
    for landing in (None, device):
        strategy = ONE_SHOT_STRATEGIES.create("gdas", {"target_ms": target, "collapse_fraction": None},
                                              space=space, rng=np.random.default_rng(0))
        found[landing is None] = strategy.search(supernet(space), TRAIN, VALID, steps=12, latency_model=model,
                                                 landing_model=landing)[0]
    off = float(device.predict_ms([found[True]])[0])
    assert abs(off / target - 1) > 0.05  # landed by the model, missed on the device
    rec = strategy.record
    measured = float(device.predict_ms([found[False]])[0])
    assert abs(measured / target - 1) <= 0.05 + 1e-9, rec["landing"]
    assert rec["landed"] is True and rec["landed_by"] == "measurement"
    assert rec["measured_ms"] == pytest.approx(measured, abs=1e-5)
    assert rec["derived_ms"] == pytest.approx(float(model.predict_ms([found[False]])[0]), abs=1e-5)
    rows = rec["landing"]
    assert len({r["round"] for r in rows}) >= 2 and [r["round"] for r in rows].count(0) == 1
    assert rows[0]["model_target_ms"] == target
    # the second round aims the model at the target corrected by the first network's measured / modelled ratio,
    # bracketed by landing_spread (10 %) either side
    centre = target * rows[0]["model_ms"] / rows[0]["measured_ms"]
    second = [r["model_target_ms"] / centre for r in rows if r["round"] == 1]
    assert second and all(min(abs(f - g) for g in (0.9, 1.0, 1.1)) < 1e-4 for f in second), second


class DriftingDevice(OpCostModel):
    """A device whose speed drifts: every round of side-by-side timings is slowed by its own factor (0.7-1.4,
    seeded), the same for every network of the round, as a shared machine's neighbours slow it."""

    def __init__(self, space: NB201Space, seed: int = 0, **kw: Any) -> None:
        super().__init__(space, **kw)
        self.rng, self.factors, self.seen = np.random.default_rng(seed), [], {}

    def true_ms(self, arch: Architecture) -> float:
        return float(super().predict_ms([arch])[0])

    def measure_rounds(self, archs: list[Architecture], rounds: int) -> list[list[float]]:
        self.seen.update((a.arch_id, a) for a in archs)
        true = super().predict_ms(archs)
        out = []
        for _ in range(rounds):
            self.factors.append(float(self.rng.uniform(0.7, 1.4)))
            out.append(list(true * self.factors[-1]))
        return out


DEVICE_MS = {**OP_MS, "nor_conv_3x3": 1.5, "nor_conv_1x1": 0.55}


def _land(space: NB201Space, device: Any, **params: Any) -> tuple[Architecture, dict[str, Any]]:
    strategy = ONE_SHOT_STRATEGIES.create("gdas", {"target_ms": 3.5, "collapse_fraction": None, **params},
                                          space=space, rng=np.random.default_rng(0))
    found = strategy.search(supernet(space), TRAIN, VALID, steps=12, latency_model=OpCostModel(space),
                            landing_model=device)[0]
    return found, strategy.record


def test_landing_beside_the_anchor_compares_networks_at_the_same_moment_and_averages_the_level():
    space = small_space()
    device = DriftingDevice(space, costs=DEVICE_MS, base=0.9)
    found, rec = _land(space, device, landing_repeats=7)
    largest_ms = device.true_ms(space.largest())
    level = float(np.median([f * largest_ms for f in device.factors]))  # the anchor over every round of the landing
    rounds = len({r["round"] for r in rec["landing"]})
    assert len(rec["landing"]) > rounds > 1  # a round timed several networks, each beside the anchor
    assert rec["landing_anchor"] == space.largest().arch_id and rec["anchor_timings"] == 7 * rounds
    assert len(device.factors) == 7 * rounds and rec["anchor_ms"] == pytest.approx(level, abs=1e-5)
    for row in rec["landing"]:  # each network's ratio is exact although no two rounds ran at one speed
        ratio = device.true_ms(device.seen[row["arch_id"]]) / largest_ms
        assert row["ratio_to_anchor"] == pytest.approx(ratio, abs=1e-6) and row["relative_se"] < 1e-9
        assert row["measured_ms"] == pytest.approx(ratio * level, abs=1e-5)  # on the whole landing's level
    assert rec["measured_ms"] == pytest.approx(device.true_ms(found) / largest_ms * level, abs=1e-5)
    kept = min(rec["landing"], key=lambda r: abs(r["measured_ms"] / 3.5 - 1))
    assert found.arch_id == kept["arch_id"] and rec["landed"] == (abs(kept["measured_ms"] / 3.5 - 1) <= 0.05)


def test_a_landing_without_an_anchor_takes_the_median_of_the_networks_own_timings():
    space = small_space()
    device = DriftingDevice(space, costs=DEVICE_MS, base=0.9)
    found, rec = _land(space, device, landing_anchor="none", landing_repeats=5, landing_rounds=1)
    (row,) = rec["landing"]
    timings = device.true_ms(found) * np.array(device.factors)
    assert len(device.factors) == 5 and "landing_anchor" not in rec
    assert row["measured_ms"] == pytest.approx(float(np.median(timings)), abs=1e-5)
    mad = float(np.median(np.abs(timings - np.median(timings))))
    assert row["relative_se"] == pytest.approx(1.4826 * mad / np.sqrt(5) / np.median(timings), abs=1e-5)


class Jittery(OpCostModel):
    """Each timing of a network 8 % off one way or the other, alternately: their median is exact."""

    def measure_rounds(self, archs: list[Architecture], rounds: int) -> list[list[float]]:
        true = super().predict_ms(archs)
        return [[float(v) * (1.08 if (r + i) % 2 else 0.92) for i, v in enumerate(true)] for r in range(rounds)]


def test_a_landing_does_not_stop_on_a_network_inside_the_band_by_less_than_its_own_spread():
    space = small_space()
    exact = _land(space, OpCostModel(space, DEVICE_MS, base=0.9), landing_anchor="none", landing_repeats=4)[1]
    jittery = _land(space, Jittery(space, DEVICE_MS, base=0.9), landing_anchor="none", landing_repeats=4)[1]
    first, rows = exact["landing"], jittery["landing"]
    last = max(r["round"] for r in first)
    assert last < 3 and min(abs(r["measured_ms"] / 3.5 - 1) for r in first if r["round"] == last) <= 0.05
    # the same networks with the same medians, but none inside the band by more than its spread (1.4826 · 8 % / 2)
    assert [(r["arch_id"], r["measured_ms"]) for r in rows[:len(first)]] == [
        (r["arch_id"], r["measured_ms"]) for r in first]
    assert all(r["relative_se"] > 0.05 for r in rows) and max(r["round"] for r in rows) > last


def test_landing_beside_the_largest_member_on_a_space_without_one_is_refused_before_training():
    class NoLargest:
        """NB201 without its largest member (a plug-in space that names none)."""

        def __init__(self, space: NB201Space) -> None:
            self._space = space

        def __getattr__(self, name: str) -> Any:
            if name == "largest":
                raise AttributeError(name)
            return getattr(self._space, name)

    space = NoLargest(small_space())
    with pytest.raises(ConfigError, match="landing_anchor: largest: space 'nb201' names no largest member"):
        ONE_SHOT_STRATEGIES.create("gdas", {"target_ms": 3.5, "landing_metric": "latency_ms@cpu"}, space=space,
                                   rng=np.random.default_rng(0))
    strategy = ONE_SHOT_STRATEGIES.create("gdas", {"target_ms": 3.5, "landing_metric": "latency_ms@cpu",
                                                   "landing_anchor": "none"}, space=space,
                                          rng=np.random.default_rng(0))
    assert strategy.params.landing_anchor == "none"


def test_a_landing_metric_needs_a_budget():
    with pytest.raises(ValueError, match="landing_metric lands a budget"):
        ONE_SHOT_STRATEGIES.get("darts").Params(landing_metric="latency_ms@cpu")


def test_penalty_mode_trades_latency_for_weight():
    space = small_space()
    model = OpCostModel(space)
    found = {}
    for w in (0.0, 5.0):
        strategy = ONE_SHOT_STRATEGIES.create("darts", {"latency_weight": w, "arch_lr": 0.05,
                                                        "collapse_fraction": None},
                                              space=space, rng=np.random.default_rng(0))
        found[w] = strategy.search(supernet(space), TRAIN, VALID, steps=15, latency_model=model)[0]
    assert float(model.predict_ms([found[5.0]])[0]) < float(model.predict_ms([found[0.0]])[0])


def test_target_below_the_fastest_member_is_refused_naming_it():
    space = small_space()
    strategy = ONE_SHOT_STRATEGIES.create("fbnet", {"target_ms": 0.1}, space=space, rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"target_ms 0.1 is below the fastest member .*\(0.8 ms"):
        strategy.prepare_latency(OpCostModel(space))


def _table(space: NB201Space, drop: str | None = None) -> LatencyTable:
    ctx = DeviceContext(device="synthetic", runtime="onnxruntime", runtime_version="1",
                        provider="CPUExecutionProvider", threads=1, input_resolution=8)
    entries = {k: Entry(median_ms=0.01 * (i + 1), p10_ms=0.01, p90_ms=0.01, count=5)
               for i, k in enumerate(space.all_layers()) if drop is None or drop not in k}
    return LatencyTable(space=space.name, context=ctx, entries=entries)


def test_a_table_missing_an_op_is_named_before_training():
    space = small_space()
    complete = TableLatencyModel(table=_table(space), space=space)
    strategy = ONE_SHOT_STRATEGIES.create("darts", {"latency_weight": 1.0}, space=space, rng=np.random.default_rng(0))
    strategy.prepare_latency(complete)  # every op priced
    lacking = TableLatencyModel(table=_table(space, drop="nor_conv_3x3"), space=space)
    missing = {k for k in space.all_layers() if "nor_conv_3x3" in k}
    assert missing
    with pytest.raises(MissingLatencyEntry) as err:
        strategy.prepare_latency(lacking)
    assert set(err.value.keys) == missing  # all of them at once, nothing else


def test_collapse_guard_stops_and_keeps_the_architecture_before_collapse():
    space = small_space()
    # a latency model under which parameter-free ops are free and everything else is dear: a strong latency
    # term drives the cell to skip connections and pooling
    costs = {"none": 3.0, "skip_connect": 0.0, "nor_conv_1x1": 3.0, "nor_conv_3x3": 3.0, "avg_pool_3x3": 0.0}
    strategy = ONE_SHOT_STRATEGIES.create("darts", {"latency_weight": 20.0, "arch_lr": 0.2, "collapse_fraction": 0.5,
                                                    "collapse_after": 0.0, "relinearize_every": 2},
                                          space=space, rng=np.random.default_rng(0))
    initial = strategy.derive()
    strategy.search(supernet(space), TRAIN, VALID, steps=30, latency_model=OpCostModel(space, costs))
    rec = strategy.record
    assert rec.get("collapsed_at") is not None, rec["history"]
    assert rec["steps_run"] == rec["collapsed_at"] < 30
    assert "collapse guard" in rec["stopped"] and "(3 checks)" in rec["stopped"]
    # the last three checks were collapsed; the kept architecture is the one derived before that streak
    assert all(int(h["param_free"].split("/")[0]) >= 3 for h in rec["history"][-3:])
    free, _ = space.parameter_free_ops(strategy.derive())
    assert free < 3 or strategy.derive() == initial


def test_parameter_free_ops_count_the_normal_cell():
    space = small_space()
    arch = space.from_ops([OPS.index(o) for o in ("skip_connect", "none", "avg_pool_3x3", "nor_conv_3x3",
                                                  "skip_connect", "nor_conv_1x1")])
    assert space.parameter_free_ops(arch) == (3, 6)


def test_second_order_darts_is_deterministic_and_differs_from_first_order():
    space = small_space()

    def run(order: int) -> dict[str, np.ndarray]:
        strategy = ONE_SHOT_STRATEGIES.create("darts", {"order": order}, space=space, rng=np.random.default_rng(0))
        strategy.search(supernet(space), TRAIN, VALID, steps=4)
        return strategy.architecture_parameters()

    a, b, first = run(2), run(2), run(1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert any(not np.allclose(a[k], first[k]) for k in a)
    assert all(np.all(np.isfinite(v)) for v in a.values())


def test_second_order_step_leaves_the_shared_weights_as_a_first_order_step_would():
    """The unrolled gradient perturbs the weights and must restore them before the weight step."""
    space = small_space()
    nets = []
    for order in (1, 2):
        strategy = ONE_SHOT_STRATEGIES.create("darts", {"order": order, "arch_lr": 1e-12},
                                              space=space, rng=np.random.default_rng(0))
        net = supernet(space)
        strategy.search(net, TRAIN, VALID, steps=1)
        nets.append(net)
    for (k, p1), (_, p2) in zip(nets[0].state_dict().items(), nets[1].state_dict().items()):
        if "running" in k or "num_batches" in k:
            continue  # the unrolled step's extra forwards move BatchNorm statistics, as in DARTS
        assert torch.allclose(p1, p2, atol=1e-6), k


def test_gdas_and_proxyless_compute_one_path_per_gene():
    space = small_space()
    for name in ("gdas", "proxyless"):
        strategy = ONE_SHOT_STRATEGIES.create(name, {}, space=space, rng=np.random.default_rng(0))
        alphas = {k: torch.tensor(v, requires_grad=True) for k, v in strategy.logits.items()}
        weights = strategy.relax(alphas, 0.5)
        for w in weights.values():
            assert int((w.detach() != 0).sum()) == 1  # exact zeros elsewhere: those ops are never computed
            assert float(w.detach().max()) == pytest.approx(1.0)
        sum(w @ torch.arange(len(w), dtype=w.dtype) for w in weights.values()).backward()
        assert all(a.grad is not None and bool((a.grad != 0).any()) for a in alphas.values())


def test_sweep_params_are_validated():
    cls = ONE_SHOT_STRATEGIES.get("fbnet")
    with pytest.raises(ValueError, match="not both"):
        cls.Params(latency_weights=[0.1], targets_ms=[1.0])
    with pytest.raises(ValueError):
        cls.Params(targets_ms=[-1.0])
    assert cls.Params(targets_ms=[1.0, 2.0]).runs() == [{"target_ms": 1.0}, {"target_ms": 2.0}]
    assert cls.Params().runs() == [{}]


def test_proxyless_on_the_once_for_all_mobilenetv3_supernet_lands_a_budget():
    """ProxylessNAS's binarised paths on the elastic MobileNetV3 supernet (kernel, expand, depth), a table's latency."""
    from hwnas.search_spaces.mbv3 import MobileNetV3Space

    space = MobileNetV3Space(resolution=8, in_chans=1, num_classes=3,
                             stages=[{"channels": 8, "depths": [1, 2]},
                                     {"channels": 16, "stride": 2, "depths": [1, 2], "se": True}],
                             kernels=[3, 5], expand_ratios=[3, 6])
    ctx = DeviceContext(device="synthetic", runtime="onnxruntime", runtime_version="1",
                        provider="CPUExecutionProvider", threads=1, input_resolution=8)
    entries = {k: Entry(median_ms=0.05 * (1 + (i % 7)), p10_ms=0.01, p90_ms=0.01, count=5)
               for i, k in enumerate(space.all_layers())}
    model = TableLatencyModel(table=LatencyTable(space=space.name, context=ctx, entries=entries), space=space)
    rng = np.random.default_rng(5)
    target = float(np.median(model.predict_ms([space.sample(rng) for _ in range(20)])))
    strategy = ONE_SHOT_STRATEGIES.create("proxyless", {"target_ms": target}, space=space,
                                          rng=np.random.default_rng(0))
    net = SUPERNETS.create("mbv3", {}, space=space, generator=torch.Generator().manual_seed(0))
    found = strategy.search(net, TRAIN, VALID, steps=10, latency_model=model)
    space.validate(found[0])
    ms = float(model.predict_ms([found[0]])[0])
    assert strategy.record["landed"] and abs(ms / target - 1) <= 0.05 + 1e-9, (ms, target, strategy.record)


def test_derivation_never_takes_the_zero_op_unless_asked():
    space = small_space()
    none = OPS.index("none")
    for derive_zero in (False, True):
        strategy = ONE_SHOT_STRATEGIES.create("darts", {"derive_zero": derive_zero}, space=space,
                                              rng=np.random.default_rng(0))
        strategy.logits = {k: np.where(np.arange(len(v)) == none, 5.0, 0.0) for k, v in strategy.logits.items()}
        ops = space.ops_of(strategy.derive())
        assert (none in ops) == derive_zero


def test_darts_derivation_takes_the_best_pair_of_distinct_inputs():
    from hwnas.search_spaces.darts import DartsSpace

    space = DartsSpace(resolution=8, in_chans=1, num_classes=3, cells=3, init_channels=4)
    strategy = ONE_SHOT_STRATEGIES.create("darts", {}, space=space, rng=np.random.default_rng(0))
    rng = np.random.default_rng(1)
    # both slots of every node prefer the same input: the per-gene argmax is not a member
    strategy.logits = {k: (np.where(np.arange(len(v)) == 0, 3.0, 0.0) + 0.1 * rng.standard_normal(len(v))
                           if "_in" in k else rng.standard_normal(len(v))) for k, v in strategy.logits.items()}
    arch = strategy.derive()
    space.validate(arch)
    lp = strategy._log_probs()
    genes = {g.name: g for g in space.genes()}
    for cell in ("normal", "reduce"):
        for i in range(space.params.nodes):
            a, b = f"{cell}_n{i}_in0", f"{cell}_n{i}_in1"
            n = len(genes[a].choices)
            best = max(lp[a][x] + lp[b][y] for x in range(n) for y in range(n) if x != y)
            got = {arch.genes[a], arch.genes[b]}
            # canonical order may swap the slots: either assignment of the chosen pair scores the best
            x, y = sorted(got)
            assert max(lp[a][x] + lp[b][y], lp[a][y] + lp[b][x]) == pytest.approx(best)


def test_the_hessian_eigenvalue_is_the_dominant_eigenvalue_of_the_exact_hessian():
    space = small_space()
    net = supernet(space).eval()
    strategy = ONE_SHOT_STRATEGIES.create("darts", {"eigen_iterations": 60}, space=space,
                                          rng=np.random.default_rng(0))
    genes = [g.name for g in space.genes()]
    alphas = {k: torch.tensor(0.5 * np.random.default_rng(i).standard_normal(len(OPS)), dtype=torch.float32)
              for i, k in enumerate(genes)}
    x, y = VALID[0]
    got = strategy._hessian_eigenvalue(net, alphas, (x, y), step=0)

    def loss(flat):
        parts = flat.split([len(OPS)] * len(genes))
        weights = {k: torch.softmax(p, 0) for k, p in zip(genes, parts)}
        return torch.nn.functional.cross_entropy(net.forward_relaxed(x, weights), y)

    hessian = torch.autograd.functional.hessian(loss, torch.cat([alphas[k] for k in genes]))
    eig = torch.linalg.eigvalsh(0.5 * (hessian + hessian.T))
    dominant = float(eig[eig.abs().argmax()])
    assert got == pytest.approx(dominant, rel=2e-2, abs=1e-5)


def test_the_eigenvalue_guard_stops_when_the_eigenvalue_grows_and_keeps_the_earlier_cell(monkeypatch):
    space = small_space()
    strategy = ONE_SHOT_STRATEGIES.create("darts", {"collapse_criterion": "eigenvalue", "collapse_patience": 2,
                                                    "relinearize_every": 1, "collapse_after": 0.0},
                                          space=space, rng=np.random.default_rng(0))
    values = iter([1.0, 1.0, 1.0, 1.0, 1.2, 2.0, 3.0, 3.0, 3.0, 3.0])
    monkeypatch.setattr(strategy, "_hessian_eigenvalue", lambda *a, **k: next(values))
    strategy.search(supernet(space), TRAIN, VALID, steps=10)
    rec = strategy.record
    # check 5: (1.0, 1.2) against (1.0, 1.0) is 1.1x; check 6: (1.2, 2.0) against (1.0, 1.0) is 1.6x > 4/3: stop
    assert rec["collapsed_at"] == 6 and rec["steps_run"] == 6
    assert "the Hessian's dominant eigenvalue grew from a mean of 1 to 1.6" in rec["stopped"]
    assert "derived at step 4" in rec["stopped"]
    assert [h["eigenvalue"] for h in rec["history"]] == [1.0, 1.0, 1.0, 1.0, 1.2, 2.0]
