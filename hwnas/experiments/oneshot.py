"""Runs a one-shot (differentiable) strategy inside ``nas run``: supernet, data, latency model, sweep, resume.

.. code-block:: yaml

    strategy:
      name: darts                      # or pc_darts, gdas, fbnet, proxyless
      params:
        steps: 300
        targets_ms: [0.6, 0.8, 1.0]    # budget mode, one search per target; or latency_weights: [0, 0.5, 2]

Before the trial loop the runner builds the space's supernet (``SUPERNETS``, the strategy's ``supernet``
parameters), splits the dataset's training images in two halves (the shared weights train on one, the
architecture on the other: DARTS's bilevel split; the held-out split stays for the evaluators), warms
the supernet up once, and runs one search per sweep entry from a copy of the warmed-up weights. The
latency term prices choices with the cheap evaluator that provides the latency metric (a table, a latency
model, a benchmark's published latencies). Each derived architecture then goes through the configured
evaluators as a trial.

``RUN_DIR/oneshot.json`` keeps every finished search (derived architecture, logits, trace, cost) under a
fingerprint of what it depends on; a resumed run reads it instead of searching again, and a sweep that was
interrupted runs only its missing searches. ``RUN_DIR/oneshot.png`` plots each search's latency trace.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, MissingLatencyEntry
from hwnas.fileio import atomic_write

if TYPE_CHECKING:
    import torch

    from hwnas.evaluation import Evaluator
    from hwnas.experiments.config import Experiment
    from hwnas.experiments.config.schema import ExperimentConfig
    from hwnas.objectives import Constraint, Objective
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.strategies.differentiable import DifferentiableParams
    from hwnas.strategies.oneshot import OneShotStrategy

log = logging.getLogger(__name__)

#: The searches of a one-shot run, in the run directory.
ONE_SHOT_FILE = "oneshot.json"


def is_one_shot(name: str) -> bool:
    """Whether ``name`` is a registered one-shot strategy (and no black-box strategy of that name exists)."""
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES

    return name in ONE_SHOT_STRATEGIES.names() and name not in STRATEGIES.names()


class EvaluatorLatency:
    """An :class:`~hwnas.strategies.oneshot.ArchLatencyModel` from a cheap evaluator's latency metric.

    Args:
        evaluator: A cheap evaluator that provides ``metric``.
        metric: The metric (``latency_ms@device``).
    """

    def __init__(self, evaluator: Evaluator, metric: str, name: str) -> None:
        self.evaluator, self.metric, self.name = evaluator, metric, name

    def predict_ms(self, archs: Sequence[Architecture]) -> np.ndarray:
        results = self.evaluator.evaluate(list(archs))
        out = np.empty(len(archs))
        missing: set[str] = set()
        for i, res in enumerate(results):
            if isinstance(res, MissingLatencyEntry):
                missing.update(res.keys)
            elif isinstance(res, BaseException):
                raise res
            else:
                out[i] = float(res[self.metric])
        if missing:
            raise MissingLatencyEntry(sorted(missing), table=f"the {self.name} evaluator ({self.metric})")
        return out


class EvaluatorRoundsLatency(EvaluatorLatency):
    """An :class:`EvaluatorLatency` whose evaluator times networks side by side in rounds (``ort_latency``'s
    ``measure_rounds``): a :class:`~hwnas.strategies.oneshot.RoundsLatencyModel` for landing by measurement."""

    def measure_rounds(self, archs: Sequence[Architecture], rounds: int) -> list[list[float]]:
        return self.evaluator.measure_rounds(list(archs), rounds)  # type: ignore[attr-defined]


def latency_metric(params: DifferentiableParams, objectives: Sequence[Objective], constraints: Sequence[Constraint],
                   names: Sequence[str], evaluators: Sequence[Evaluator]) -> str:
    """The metric that prices the latency term: ``params.latency_metric``, else the only ``latency_ms*`` metric
    among the objectives and constraints.

    Raises:
        ConfigError: None or several candidates, or no cheap evaluator provides it.
    """
    if params.latency_metric is not None:
        metric = params.latency_metric
    else:
        found = sorted({m for m in [o.metric for o in objectives] + [c.metric for c in constraints]
                        if m.startswith("latency_ms")})
        if len(found) != 1:
            raise ConfigError(f"strategy.params.latency_metric: the latency term needs one latency metric; the "
                              f"objectives and constraints have {len(found)} ({', '.join(found) or 'none'}): name one")
        metric = found[0]
    for name, ev in zip(names, evaluators):
        if metric in ev.provides:
            if not ev.cheap:
                raise ConfigError(f"strategy.params.latency_metric: {metric!r} comes from the {name!r} evaluator, "
                                  "which is expensive (it measures); the latency term needs a table or a model "
                                  "(latency_table, latency_model, benchmark)")
            return metric
    raise ConfigError(f"strategy.params.latency_metric: no evaluator provides {metric!r}")


def landing_evaluator(metric: str, names: Sequence[str], evaluators: Sequence[Evaluator]) -> int:
    """The index of the evaluator that provides ``landing_metric``: one that runs in this process (a measuring
    evaluator such as ``ort_latency``, ``cheap: true``), since the search measures its derived networks itself.

    Raises:
        ConfigError: No evaluator provides it, or the one that does runs on the executor's workers.
    """
    for i, (name, ev) in enumerate(zip(names, evaluators)):
        if metric in ev.provides:
            if not ev.cheap:
                raise ConfigError(f"strategy.params.landing_metric: {metric!r} comes from the {name!r} evaluator, "
                                  "which runs on the executor's workers; the search measures its derived networks "
                                  "in this process: use an evaluator that does (ort_latency with cheap: true)")
            return i
    raise ConfigError(f"strategy.params.landing_metric: no evaluator provides {metric!r} (add an ort_latency "
                      "evaluator, whose metric is latency_ms@<device>)")


def check_one_shot(exp_config: ExperimentConfig, space: SearchSpace) -> list[str]:
    """Problems that stop a one-shot strategy before anything runs (for ``build``): a space it cannot relax, no
    dataset."""
    from hwnas.supernet import SUPERNETS

    problems = []
    name = exp_config.strategy.name
    try:
        cls = SUPERNETS.get(space.name)
    except Exception:
        cls = None
    # the RelaxedSupernet protocol has data members, so a class cannot be checked with issubclass
    if cls is None or not callable(getattr(cls, "forward_relaxed", None)):
        has = [n for n in SUPERNETS.names() if callable(getattr(SUPERNETS.get(n), "forward_relaxed", None))]
        problems.append(f"strategy: {name!r} cannot relax space {space.name!r}: it has no supernet with a "
                        f"continuous relaxation (forward_relaxed); spaces that have one: {', '.join(sorted(has))}")
    if exp_config.dataset is None:
        problems.append(f"strategy: {name!r} trains a supernet and needs a dataset section")
    return problems


def one_shot_build_problems(exp_config: ExperimentConfig, space: SearchSpace, params: DifferentiableParams, *,
                            objectives: Sequence[Objective], constraints: Sequence[Constraint],
                            evaluator_names: Sequence[str], evaluators: Sequence[Evaluator],
                            others_failed: bool) -> list[str]:
    """What ``build`` finds wrong with a one-shot strategy: :func:`check_one_shot`'s problems; then, when neither
    they nor anything else (``others_failed``) is wrong, the strategy built with its parameters ``params`` (its
    validated Params model), and its latency and landing metrics each provided by an evaluator that fits."""
    from hwnas.strategies import ONE_SHOT_STRATEGIES

    problems = check_one_shot(exp_config, space)
    if problems or others_failed:
        return problems
    try:
        ONE_SHOT_STRATEGIES.create(exp_config.strategy.name, params.model_dump(mode="json"), space=space,
                                   rng=np.random.default_rng(exp_config.seed))
        if params.uses_latency:
            latency_metric(params, objectives, constraints, evaluator_names, evaluators)
        landing = getattr(params, "landing_metric", None)
        if landing is not None:
            landing_evaluator(landing, evaluator_names, evaluators)
    except (ValueError, ConfigError) as exc:
        return [str(exc)]
    return []


class Batches:
    """Re-iterable (input, label) tensor batches of some images, in a new seeded order every pass."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, rng: np.random.Generator) -> None:
        self.x, self.y, self.batch_size, self.rng = x, y, min(batch_size, len(x)), rng

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        import torch

        order = self.rng.permutation(len(self.x))
        for i in range(0, len(order) - self.batch_size + 1, self.batch_size):
            idx = order[i:i + self.batch_size]
            yield torch.from_numpy(self.x[idx]), torch.from_numpy(self.y[idx])


def _fingerprint(exp: Experiment, latency_fp: str | None) -> str:
    resolved = exp.resolved()
    parts = {"seed": exp.config.seed, "space": resolved["space"], "strategy": [exp.config.strategy.name,
             resolved["strategy"]], "dataset": resolved.get("dataset"), "latency": latency_fp}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _read(path: Path, fingerprint: str) -> dict[str, Any]:
    if not path.exists():
        return {"fingerprint": fingerprint, "searches": {}}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot be read back ({exc}); move it away to search again") from None
    if data.get("fingerprint") != fingerprint:
        raise ConfigError(f"{path}: its searches were made under another config, seed or latency model "
                          f"(fingerprint {data.get('fingerprint')}, now {fingerprint}); start a new run")
    return data


#: Evaluators that time a network to price it (the others read a table, a model or a published column).
MEASURING_EVALUATORS = frozenset({"ort_latency"})


def search_params(name: str, raw: Mapping[str, object]) -> DifferentiableParams:
    """One-shot strategy ``name``'s parameters validated from ``raw``: what the runner reads of a search (its sweep
    of runs, steps, batch size, warm-up, supernet and latency metrics).

    Raises:
        InvalidParams: The parameters do not validate.
        ConfigError: The strategy's ``Params`` do not describe a search (they must extend ``DifferentiableParams``).
    """
    from hwnas.strategies import ONE_SHOT_STRATEGIES
    from hwnas.strategies.differentiable import DifferentiableParams

    params = ONE_SHOT_STRATEGIES.validate_params(name, raw)
    if not isinstance(params, DifferentiableParams):
        raise ConfigError(f"strategy: the parameters of one-shot strategy {name!r} ({type(params).__name__}) do not "
                          "extend hwnas.strategies.differentiable.DifferentiableParams, so the run cannot read its "
                          "steps, batch size and sweep")
    return params


def _supernet_block_problems(space: SearchSpace, block: Any) -> list[tuple[tuple[str | int, ...], str, str]]:
    """The strategy's ``supernet:`` block, validated by the space's supernet (what the run builds it from), and
    checked against the space as the supernet's constructor checks it (nothing built)."""
    from hwnas.errors import InvalidParams, pydantic_message
    from hwnas.supernet import SUPERNETS
    from hwnas.supernet.base import space_problems

    try:
        validated = SUPERNETS.validate_params(space.name, block)
        return [(("strategy", "params", "supernet", key), f"strategy.params.supernet.{key}", problem)
                for key, problem in space_problems(SUPERNETS.get(space.name), space, validated).items()]
    except InvalidParams as exc:
        out: list[tuple[tuple[str | int, ...], str, str]] = []
        for e in exc.errors:
            loc = tuple(e.get("loc", ()))
            label = "strategy.params.supernet" + "".join(f".{p}" for p in loc)
            out.append((("strategy", "params", "supernet", *loc), label,
                        f"{space.name} supernet: {pydantic_message(e)}"))
        return out
    except ConfigError:  # no supernet for the space: check_one_shot says so
        return []


def one_shot_problems(exp: Experiment) -> list[tuple[tuple[str | int, ...], str, str]]:
    """What a one-shot experiment's checks before any training find wrong, as (file path, key, problem): a budget
    with fewer trials than searches (the later searches' architectures would never be evaluated), and a latency
    target below the fastest member, where the latency is read (a table, a model, a benchmark column; a measured
    latency is checked when the run starts, before the searches train)."""
    from hwnas.strategies import ONE_SHOT_STRATEGIES

    cfg = exp.config
    params = search_params(cfg.strategy.name, exp.params["strategy"])
    runs = params.runs()
    out: list[tuple[tuple[str | int, ...], str, str]] = []
    out += _supernet_block_problems(exp.space, params.supernet)
    if cfg.budget.trials < len(runs):
        out.append((("budget", "trials"), "budget.trials",
                    f"{cfg.budget.trials} is fewer than the {len(runs)} one-shot searches: the architectures of "
                    f"the last {len(runs) - cfg.budget.trials} would never be evaluated"))
    if not params.uses_latency:
        return out
    metric = latency_metric(params, exp.objectives, exp.constraints, exp.evaluator_names, exp.evaluators)
    i = next(i for i, ev in enumerate(exp.evaluators) if metric in ev.provides)
    if exp.evaluator_names[i] in MEASURING_EVALUATORS:  # timing every choice twice is left to the run
        return out
    model = EvaluatorLatency(exp.evaluators[i], metric, exp.evaluator_names[i])
    for k, run in enumerate(runs):
        strategy = ONE_SHOT_STRATEGIES.create(cfg.strategy.name, {**exp.params["strategy"], **run}, space=exp.space,
                                              rng=np.random.default_rng([cfg.seed, k]))
        try:
            strategy.prepare_latency(model)
        except ConfigError as exc:
            key = ("strategy", "params", "targets_ms", k) if params.targets_ms is not None else \
                ("strategy", "params")
            label = f"strategy.params.targets_ms[{k}]" if params.targets_ms is not None else "strategy.params"
            out.extend((key, label, p) for p in exc.problems)
    return out


def derive_architectures(exp: Experiment, run_dir: Path | None) -> list[Architecture]:
    """Run (or read back) the one-shot searches of ``exp``; their derived architectures, one per sweep entry.

    Raises:
        ConfigError: A target below the fastest member, a space the strategy cannot relax, a corrupt or foreign
            ``oneshot.json``.
        MissingLatencyEntry: The latency model cannot price an operation of the supernet (keys named).
    """
    import torch

    from hwnas.strategies import ONE_SHOT_STRATEGIES
    from hwnas.supernet import SUPERNETS, RelaxedSupernet

    cfg = exp.config
    name = cfg.strategy.name
    params = search_params(name, exp.params["strategy"])
    runs = params.runs()
    model = None
    latency_fp = None
    if params.uses_latency:
        metric = latency_metric(params, exp.objectives, exp.constraints, exp.evaluator_names, exp.evaluators)
        i = next(i for i, ev in enumerate(exp.evaluators) if metric in ev.provides)
        model = EvaluatorLatency(exp.evaluators[i], metric, exp.evaluator_names[i])
        latency_fp = exp.evaluators[i].fingerprint()
    landing = None
    if params.landing_metric is not None:
        i = landing_evaluator(params.landing_metric, exp.evaluator_names, exp.evaluators)
        ev = exp.evaluators[i]  # one that times networks side by side does so for its latency metric
        side_by_side = callable(getattr(ev, "measure_rounds", None)) and params.landing_metric == ev.provides[0]
        landing = (EvaluatorRoundsLatency if side_by_side else EvaluatorLatency)(
            ev, params.landing_metric, exp.evaluator_names[i])
        latency_fp = f"{latency_fp}+{exp.evaluators[i].fingerprint()}"
    fingerprint = _fingerprint(exp, latency_fp)
    path = run_dir / ONE_SHOT_FILE if run_dir is not None else None
    state: dict[str, Any] = (_read(path, fingerprint) if path is not None
                             else {"fingerprint": fingerprint, "searches": {}})

    def strategy_for(k: int) -> OneShotStrategy:
        overrides = {**exp.params["strategy"], **runs[k]}
        seed = np.random.default_rng([cfg.seed, k])
        return ONE_SHOT_STRATEGIES.create(name, overrides, space=exp.space, rng=seed)

    todo = [k for k in range(len(runs)) if str(k) not in state["searches"]]
    if todo:
        strategies = {k: strategy_for(k) for k in todo}
        if model is not None:  # every choice priced and every target reachable, before any training
            for k in todo:
                strategies[k].prepare_latency(model)
        assert cfg.dataset is not None
        from hwnas.data import DataSource

        data = DataSource(cfg.dataset)(int(exp.space.input_shape[-1]))
        split = np.random.default_rng([cfg.seed, 1]).permutation(len(data.x_train))
        half = len(split) // 2
        w_idx, a_idx = split[:half], split[half:]
        t0 = time.perf_counter()
        supernet = SUPERNETS.create(exp.space.name, params.supernet, space=exp.space,
                                    generator=torch.Generator().manual_seed(cfg.seed))
        if not isinstance(supernet, RelaxedSupernet):
            raise ConfigError(f"strategy: {name!r} cannot relax space {exp.space.name!r}: its supernet has no "
                              "continuous relaxation")
        train = Batches(data.x_train[w_idx], data.y_train[w_idx], params.batch_size,
                        np.random.default_rng([cfg.seed, 2]))
        log.info("one-shot %s: warming up the %s supernet for %d steps (%d + %d search images)", name,
                 exp.space.name, params.warmup_steps, len(w_idx), len(a_idx))
        strategies[todo[0]].warmup(supernet, train, steps=params.warmup_steps)
        warm = copy.deepcopy(supernet.state_dict())
        state["warmup_s"] = round(time.perf_counter() - t0, 3)
        for k in todo:
            t1 = time.perf_counter()
            supernet.load_state_dict(warm)
            strategy = strategies[k]
            what = ", ".join(f"{key} {value:g}" for key, value in runs[k].items()) or "one search"
            log.info("one-shot %s [%d/%d: %s]: %d steps", name, k + 1, len(runs), what, params.steps)
            train_k = Batches(data.x_train[w_idx], data.y_train[w_idx], params.batch_size,
                              np.random.default_rng([cfg.seed, 3, k]))
            valid_k = Batches(data.x_train[a_idx], data.y_train[a_idx], params.batch_size,
                              np.random.default_rng([cfg.seed, 4, k]))
            found = strategy.search(supernet, train_k, valid_k, steps=params.steps, latency_model=model,
                                    landing_model=landing)
            record = dict(strategy.record)
            last = record["history"][-1] if record["history"] else {}
            log.info("one-shot %s [%d/%d]: derived %s (%s)%s", name, k + 1, len(runs), found[0].arch_id,
                     ", ".join(f"{key} {value}" for key, value in last.items() if key != "step"),
                     f"; {record['stopped']}" if record.get("stopped") else "")
            state["searches"][str(k)] = {
                "overrides": runs[k],
                "archs": [a.to_dict() for a in found],
                "logits": {g: v.tolist() for g, v in strategy.architecture_parameters().items()},
                "record": record,
                "search_s": round(time.perf_counter() - t1, 3),
            }
            if path is not None:  # kept at once: an interrupted sweep loses only the search it was in
                atomic_write(path, json.dumps(state, indent=1) + "\n")
        if path is not None:
            _plot(state, path.with_suffix(".png"), name)
    else:
        log.info("one-shot %s: %d search(es) read back from %s", name, len(runs), path)
    archs: list[Architecture] = []
    for k in range(len(runs)):
        archs.extend(Architecture.from_dict(a) for a in state["searches"][str(k)]["archs"])
    return archs


def _plot(state: dict[str, Any], path: Path, name: str) -> None:
    """Each search's derived (and expected) latency against steps, the target dashed, collapse stops marked."""
    searches = [s for _, s in sorted(state["searches"].items(), key=lambda kv: int(kv[0]))]
    if not any("derived_ms" in h for s in searches for h in s["record"]["history"]):
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for s in searches:
        hist = [h for h in s["record"]["history"] if "derived_ms" in h]
        label = ", ".join(f"{k} {v:g}" for k, v in s["overrides"].items()) or name
        line, = ax.plot([h["step"] for h in hist], [h["derived_ms"] for h in hist], marker=".", label=label)
        target = s["record"].get("target_ms")
        if target is not None:
            ax.axhline(target, color=line.get_color(), ls="--", lw=0.8)
        if s["record"].get("collapsed_at"):
            ax.axvline(s["record"]["collapsed_at"], color=line.get_color(), ls=":", lw=0.8)
    ax.set_xlabel("search step")
    ax.set_ylabel("derived architecture's latency (ms, latency model)")
    ax.set_title(f"{name}: latency of the derived architecture during search (dashed: target)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["ONE_SHOT_FILE", "Batches", "EvaluatorLatency", "check_one_shot", "derive_architectures", "is_one_shot",
           "landing_evaluator", "latency_metric", "one_shot_build_problems"]
