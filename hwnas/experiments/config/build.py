"""``build()``: an :class:`Experiment` from a validated config, every component built and cross-checked."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hwnas.architecture import Architecture
from hwnas.data import DataSource
from hwnas.errors import ConfigError, InvalidParams
from hwnas.evaluation import EVALUATORS, EvalContext, protocol_problems
from hwnas.experiments.config.schema import ComponentConfig, ExperimentConfig, parse_config, pydantic_problems
from hwnas.experiments.config.yaml_io import LoadedYaml, format_path, load_yaml
from hwnas.objectives import Constraint, Objective, is_hardware_metric
from hwnas.search_spaces.base import EnumerableSpace, SizedSpace

if TYPE_CHECKING:
    from pydantic import BaseModel

    from hwnas.evaluation import Evaluator
    from hwnas.experiments.executors import Executor, Pipeline
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.strategies.base import Lookup, Strategy


class ParamsRegistry(Protocol):
    """What :meth:`_Build.lookup` asks of a registry (every :class:`hwnas.registry.Registry` is one)."""

    def validate_params(self, name: str, params: Mapping[str, object] | None = None) -> BaseModel:
        """The component's validated Params model."""
        ...


@dataclass
class Experiment:
    """Everything ``run()`` needs, built and cross-checked; nothing has run yet."""

    config: ExperimentConfig
    space: Any
    evaluators: list[Any]
    evaluator_names: list[str]
    objectives: list[Objective]
    constraints: list[Constraint]
    params: dict[str, Any] = field(default_factory=dict)
    source: str = "<config>"
    artifacts_dir: Path | None = None
    loaded: Any = field(default=None, repr=False)  # the LoadedYaml, for the line of a problem
    #: A multi-fidelity run: the index in ``evaluators`` of the evaluator whose fidelity the rungs set, and that
    #: evaluator built at each rung's fidelity (with its resolved parameters); None and empty otherwise.
    fidelity_index: int | None = None
    rung_evaluators: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)

    def stage_of(self, rung: int) -> list[tuple[str, Any]]:
        """The cheap evaluators a candidate runs at ``rung`` in the driver: every cheap one at the first rung (the
        schedule's at that rung's fidelity), then only the schedule's, when it is cheap."""
        out = []
        for i, (n, ev) in enumerate(zip(self.evaluator_names, self.evaluators)):
            if i == self.fidelity_index:
                ev = self.rung_evaluators[rung][0]
            elif rung > 0:
                continue
            if ev.cheap:
                out.append((n, ev))
        return out

    def resolved(self) -> dict[str, Any]:
        """The config with every component's parameters filled in: what config.yaml records."""
        # the evaluators' params as given may hold Python objects (a function evaluator's callable): their resolved
        # (JSON) form replaces them below
        data = self.config.model_dump(mode="json", exclude={"evaluators": {"__all__": {"params"}}})
        data["space"]["params"] = self.params["space"]
        data["strategy"]["params"] = self.params["strategy"]
        for i, p in enumerate(self.params["evaluators"]):
            data["evaluators"][i]["params"] = p
        data["executor"] = {"name": self.config.executor.name, "params": self.params["executor"]}
        return data

    def make_strategy(self, run_dir: Path | None = None) -> Strategy:
        """A fresh strategy seeded from the experiment seed (resume replays the journal into it); ``run_dir``
        is where a strategy that keeps files of its own (an Optuna study) writes them."""
        from hwnas.experiments.oneshot import derive_architectures, is_one_shot
        from hwnas.strategies import STRATEGIES

        if is_one_shot(self.config.strategy.name):
            from hwnas.strategies.oneshot import DerivedArchitectures

            return DerivedArchitectures(derive_architectures(self, run_dir))
        from hwnas.strategies.base import LookupAware

        strategy = STRATEGIES.create(self.config.strategy.name, self.config.strategy.params, space=self.space,
                                     objectives=self.objectives, constraints=self.constraints,
                                     rng=np.random.default_rng(self.config.seed), run_dir=run_dir)
        lookup = self.lookup()
        if lookup is not None and isinstance(strategy, LookupAware):
            strategy.use_lookup(*lookup)
        return strategy

    def lookup(self) -> tuple[Lookup, tuple[str, ...]] | None:
        """(a function pricing architectures by the evaluators' lookup metrics, those metrics), restricted to the
        objectives' and constraints' metrics; None when no evaluator has one. See
        :class:`~hwnas.evaluation.LookupEvaluator`."""
        from hwnas.evaluation import LookupEvaluator

        wanted = {o.metric for o in self.objectives} | {c.metric for c in self.constraints}
        sources = [(ev, tuple(m for m in ev.lookup_metrics if m in wanted)) for ev in self.evaluators
                   if isinstance(ev, LookupEvaluator)]
        sources = [(ev, ms) for ev, ms in sources if ms]
        if not sources:
            return None

        def look_up(archs: Sequence[Architecture]) -> list[dict[str, float]]:
            out: list[dict[str, float]] = [{} for _ in archs]
            for ev, metrics in sources:
                for row, got in zip(out, ev.evaluate(archs)):
                    if not isinstance(got, BaseException):
                        row.update({m: float(got[m]) for m in metrics if m in got})
            return out

        return look_up, tuple(m for _, ms in sources for m in ms)

    def make_executor(self) -> Executor:
        """A fresh executor from the ``executor`` section."""
        from hwnas.experiments.executors import EXECUTORS

        return EXECUTORS.create(self.config.executor.name, self.config.executor.params)

    def pipeline(self) -> Pipeline:
        """The expensive evaluators: these instances, and the spec a worker rebuilds them from."""
        from hwnas.evaluation import EVALUATORS
        from hwnas.experiments.executors import Pipeline, PipelineSpec, component_spec
        from hwnas.search_spaces import SPACES

        chosen = [(self.params["evaluators"][i], n, ev)
                  for i, (n, ev) in enumerate(zip(self.evaluator_names, self.evaluators))
                  if not ev.cheap and i != self.fidelity_index]
        stages: tuple[tuple[int, ...], ...] = ()
        fi = self.fidelity_index
        if fi is not None and not self.evaluators[fi].cheap:  # stage r: rung r's evaluator (stage 0: the others too)
            before = sum(1 for i, ev in enumerate(self.evaluators) if not ev.cheap and i < fi)
            others = list(range(len(chosen)))
            name = self.evaluator_names[fi]
            chosen += [(params, name, ev) for ev, params in self.rung_evaluators]
            first = len(others)
            stages = (tuple([*others[:before], first, *others[before:]]),
                      *((first + r,) for r in range(1, len(self.rung_evaluators))))
        elif fi is not None:
            stages = (tuple(range(len(chosen))),)
        spec = PipelineSpec(
            space=component_spec(SPACES, self.config.space.name, self.params["space"]),
            dataset=self.config.dataset.model_dump(mode="json") if self.config.dataset else None,
            artifacts_dir=str(self.artifacts_dir) if self.artifacts_dir else None,
            seed=self.config.seed,
            evaluators=tuple(component_spec(EVALUATORS, n, params) for params, n, _ in chosen),
            names=tuple(n for _, n, _ in chosen),
            fingerprints=tuple(ev.fingerprint() for _, _, ev in chosen),
            stages=stages,
        )
        return Pipeline(spec=spec, evaluators=[(n, ev) for _, n, ev in chosen])

    def distinct_architectures(self) -> int | None:
        """How many distinct (canonical) architectures the space has, where it can say (None where it cannot
        cheaply, or where there are more than any budget): a budget above it cannot be spent."""
        if isinstance(self.space, EnumerableSpace):
            return int(self.space.unique_size())
        try:
            return int(self.space.size())
        except (NotImplementedError, OverflowError):
            return None

    def budget_note(self) -> str | None:
        """A one-line note when the budget exceeds the space's distinct architectures (None otherwise)."""
        n, budget = self.distinct_architectures(), self.config.budget.trials
        if n is None or budget <= n:
            return None
        return (f"the {self.config.space.name} space has only {n:,} distinct architectures, fewer than the "
                f"budget's {budget:,} trials: the run will stop when the space is exhausted")

    def metric_providers(self) -> dict[str, str]:
        """Metric name -> the evaluator that provides it."""
        return {m: n for n, ev in zip(self.evaluator_names, self.evaluators) for m in ev.provides}

    def check_inputs(self) -> None:
        """The "inputs are checked before any work" pass, shared by ``nas validate`` and the runner's setup.

        Prepares the space and every evaluator (tables read, checked and hashed), checks every image of the
        dataset, and that the installed torch and onnx can write every ONNX opset asked for (the export's, an
        evaluator's). Raises one :class:`ConfigError` listing every problem found, each with its line and key
        (or a component's own error).
        """
        from hwnas.evaluation import Preparable

        def where(path: tuple[str | int, ...]) -> str:
            return f"{self.loaded.where(path)}: " if self.loaded is not None else f"{self.source}: "

        problems: list[str] = []
        for path, label, component in [(("space",), "space", self.space), (("dataset",), "dataset", self.data_source()),
                                       *((("evaluators", i), f"evaluators[{i}]", ev)
                                         for i, ev in enumerate(self.evaluators))]:
            if isinstance(component, Preparable):
                try:
                    component.prepare()
                except ConfigError as exc:
                    problems.extend(f"{where(path)}{label}: {p}" for p in exc.problems)
        from hwnas.experiments.oneshot import is_one_shot, one_shot_problems

        if is_one_shot(self.config.strategy.name) and not problems:  # the searches' checks need what came before
            try:
                problems.extend(f"{where(path)}{label}: {p}" for path, label, p in one_shot_problems(self))
            except ConfigError as exc:
                problems.extend(f"{where(('strategy',))}strategy: {p}" for p in exc.problems)
        asked: list[tuple[tuple[str | int, ...], str, int]] = (
            [(("export", "opset"), "export.opset", self.config.export.opset)] if self.config.export.enabled else [])
        asked += [(("evaluators", i, "params", "opset"), f"evaluators[{i}].params.opset", p["opset"])
                  for i, p in enumerate(self.params.get("evaluators") or []) if isinstance(p.get("opset"), int)]
        if asked:  # the limit is torch's and onnx's: a run that exports nothing imports neither for it
            from hwnas.latency.onnx_export import max_export_opset

            newest, why = max_export_opset()
            problems.extend(f"{where(path)}{label}: opset {opset} is newer than {why} can write (at most {newest})"
                            for path, label, opset in asked if opset > newest)
        from hwnas.objectives import joint_conflicts

        # a warning: the run is legal, only pointless; what the evaluators know of their values before any search
        # (a latency table's extremes, a benchmark's rows) is read for this message only, never by the strategy
        for conflict in joint_conflicts(self.constraints, [] if problems else self.evaluators):
            logging.getLogger(__name__).warning("%s%s", where(("constraints",)), conflict)
        executor = self.params.get("executor") or {}
        if not problems and isinstance(executor.get("address"), str):  # a cluster: answering, and as Ray does,
            from hwnas.cluster import ClusterError, check_reachable  # before a new run's folder is made

            try:
                check_reachable(executor["address"], float(executor.get("connect_timeout_s") or 15.0))
            except ClusterError as exc:
                problems.append(f"{where(('executor', 'address'))}executor.address: {exc}")
        if problems:
            raise ConfigError(problems)

    def data_source(self) -> DataSource | None:
        """The experiment's dataset (loaded lazily), or None."""
        return DataSource(self.config.dataset) if self.config.dataset else None


def build(cfg: ExperimentConfig, *, loaded: LoadedYaml | None = None, artifacts_dir: Path | None = None) -> Experiment:
    """Look components up, validate each one's parameters, and cross-check them. Runs nothing.

    Raises:
        ConfigError: Every problem found, each with its line and key.
    """
    from hwnas.experiments.executors import EXECUTORS

    b = _Build(cfg, loaded)
    space = b.space(b.space_params())  # dataset first: it fixes the input channels and classes of the space
    one_shot, strategy_model = b.strategy_model()
    executor_model = b.lookup(EXECUTORS, cfg.executor, ("executor",), flat=cfg.executor.flat)
    remote = executor_model is not None and cfg.executor.name != "local"
    evaluators, names = b.evaluators(space, artifacts_dir, remote=remote) if space is not None else ([], [])
    objectives = [Objective(o.metric, o.direction, o.reference) for o in cfg.objectives]
    constraints = [Constraint(c.metric, max=c.max, min=c.min, relative_to=c.relative_to) for c in cfg.constraints]
    if space is not None and not isinstance(space, SizedSpace):
        b.relative_constraint_problems()
    if space is not None and len(evaluators) == len(cfg.evaluators):
        b.metric_problems(names, evaluators, objectives, constraints)
    twice = sorted({o.metric for o in objectives if sum(p.metric == o.metric for p in objectives) > 1})
    if twice:
        b.problems.append(f"{b.where(('objectives',))}objectives: metric {', '.join(map(repr, twice))} appears twice")
    if executor_model is not None:
        b.resolved["executor"] = executor_model.model_dump(mode="json")
    if strategy_model is not None and space is not None:
        b.strategy_problems(space, strategy_model, one_shot=one_shot, objectives=objectives, constraints=constraints,
                            names=names, evaluators=evaluators)
    fidelity_index: int | None = None
    rung_evaluators: list[tuple[Any, dict[str, Any]]] = []
    if cfg.multi_fidelity is not None and space is not None and len(evaluators) == len(cfg.evaluators):
        fidelity_index, rung_evaluators = b.multi_fidelity(names, evaluators, objectives, one_shot=one_shot,
                                                           remote=remote)
    if b.problems:
        raise ConfigError(b.problems)
    return Experiment(config=cfg, space=space, evaluators=evaluators, evaluator_names=names,
                      objectives=objectives, constraints=constraints, params=b.resolved,
                      source=loaded.source if loaded else "<config>", artifacts_dir=artifacts_dir, loaded=loaded,
                      fidelity_index=fidelity_index, rung_evaluators=rung_evaluators)


class _Build:
    """One :func:`build`: the problems found so far (each with its line and key) and the parameters resolved."""

    def __init__(self, cfg: ExperimentConfig, loaded: LoadedYaml | None) -> None:
        self.cfg, self.loaded = cfg, loaded
        self.problems: list[str] = []
        self.resolved: dict[str, Any] = {"evaluators": []}

    def where(self, path: Sequence[str | int]) -> str:
        return f"{self.loaded.where(path)}: " if self.loaded else ""

    def lookup(self, registry: ParamsRegistry, comp: ComponentConfig, path: tuple[str | int, ...],
               flat: bool = False) -> BaseModel | None:
        """The validated Params model of a component, or None with its problems recorded."""
        try:
            return registry.validate_params(comp.name, comp.params)
        except InvalidParams as exc:
            self.problems.extend(pydantic_problems(exc.errors, exc.model, self.loaded,
                                                   path if flat else (*path, "params")))
        except ConfigError as exc:  # unknown, a plug-in that failed to load, or one without a Params model
            self.problems.append(f"{self.where((*path, 'name'))}{format_path((*path, 'name'))}: {exc}")
        return None

    def space_params(self) -> dict[str, object]:
        """The space's parameters, with the dataset's input channels and classes filled in (a mismatch recorded)."""
        from hwnas import data as data_mod

        cfg = self.cfg
        space_params = dict(cfg.space.params)
        if cfg.dataset is None:
            return space_params
        try:
            in_chans, num_classes = data_mod.describe(cfg.dataset)
        except ConfigError as exc:
            self.problems.extend(f"{self.where(('dataset', 'path'))}{p}" for p in exc.problems)
            return space_params
        for key, value in (("in_chans", in_chans), ("num_classes", num_classes)):
            if key in space_params and space_params[key] != value:
                self.problems.append(f"{self.where(('space', 'params', key))}space.params.{key}: "
                                     f"{space_params[key]} does not match the dataset ({value})")
            space_params.setdefault(key, value)
        return space_params

    def space(self, space_params: dict[str, object]) -> SearchSpace | None:
        """The search space, or None when its parameters are wrong."""
        from hwnas.search_spaces import SPACES

        cfg = self.cfg
        space_model = self.lookup(SPACES, ComponentConfig(name=cfg.space.name, params=space_params), ("space",))
        if space_model is None:
            return None
        self.resolved["space"] = space_model.model_dump(mode="json")
        if self.resolved["space"].get("merge_isomorphic", False) is None:
            # a space that can merge equivalent architectures (NB201's isomorphic cells) must not when the
            # hardware is judged: equivalent cells compute the same function with different operations
            hardware = [m for m in [o.metric for o in cfg.objectives] + [c.metric for c in cfg.constraints]
                        if is_hardware_metric(m)]
            self.resolved["space"]["merge_isomorphic"] = not hardware
        return SPACES.create(cfg.space.name, self.resolved["space"])

    def strategy_model(self) -> tuple[bool, BaseModel | None]:
        """(whether the strategy is a one-shot one, its validated Params model or None with the problem recorded)."""
        from hwnas.experiments.oneshot import is_one_shot
        from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES

        name = self.cfg.strategy.name
        one_shot = is_one_shot(name)
        if one_shot or name in STRATEGIES.names():
            return one_shot, self.lookup(ONE_SHOT_STRATEGIES if one_shot else STRATEGIES, self.cfg.strategy,
                                         ("strategy",))
        known = sorted(set(STRATEGIES.names()) | set(ONE_SHOT_STRATEGIES.names()))
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        self.problems.append(f"{self.where(('strategy', 'name'))}strategy.name: unknown strategy {name!r}{hint} "
                             f"(black-box: {', '.join(sorted(STRATEGIES.names()))}; one-shot: "
                             f"{', '.join(sorted(ONE_SHOT_STRATEGIES.names()))})")
        return one_shot, None

    def evaluators(self, space: SearchSpace, artifacts_dir: Path | None, *,
                   remote: bool) -> tuple[list[Evaluator], list[str]]:
        """(the evaluators that could be built, their names); the others' problems recorded."""
        cfg = self.cfg
        ctx = EvalContext(space=space, data=DataSource(cfg.dataset) if cfg.dataset else None,
                          artifacts_dir=artifacts_dir, seed=cfg.seed)
        self.context = ctx
        evaluators: list[Evaluator] = []
        names: list[str] = []
        for i, comp in enumerate(cfg.evaluators):
            model = self.lookup(EVALUATORS, comp, ("evaluators", i))
            if model is None:
                continue
            params = model.model_dump(mode="json")
            ev = self._evaluator(i, comp.name, params, ctx, remote=remote)
            if ev is None:
                continue
            evaluators.append(ev)
            names.append(comp.name)
            self.resolved["evaluators"].append(params)
        return evaluators, names

    def _evaluator(self, i: int, name: str, params: dict[str, object], ctx: EvalContext, *,
                   remote: bool) -> Evaluator | None:
        """``evaluators[i]`` built and checked against the Evaluator protocol (and, for an expensive one on a remote
        executor, that a worker can rebuild it); None with its problems recorded."""
        from hwnas.experiments.executors import check_rebuildable, component_spec

        where = self.where(("evaluators", i))
        try:
            ev = EVALUATORS.create(name, params, context=ctx)
            broken = protocol_problems(ev)
            if broken:
                self.problems.append(f"{where}evaluators[{i}]: evaluator {name!r} ({type(ev).__module__}."
                                     f"{type(ev).__qualname__}) breaks the Evaluator protocol: " + "; ".join(broken))
                return None
            if remote and not ev.cheap:
                check_rebuildable(component_spec(EVALUATORS, name, params), EVALUATORS.params_model(name),
                                  f"evaluators[{i}] ({name})")
        except (ConfigError, ValueError) as exc:  # every problem of a ConfigError on a line of its own
            self.problems.extend(f"{where}evaluators[{i}]: {p}"
                                 for p in (exc.problems if isinstance(exc, ConfigError) else [str(exc)]))
            return None
        return ev

    def multi_fidelity(self, names: Sequence[str], evaluators: Sequence[Evaluator], objectives: Sequence[Objective],
                       *, one_shot: bool, remote: bool) -> tuple[int | None, list[tuple[Any, dict[str, Any]]]]:
        """The ``multi_fidelity`` schedule checked against the evaluators and the budget: (the index of the evaluator
        whose fidelity it sets, that evaluator built at each rung), or (None, []) with the problems recorded."""
        from hwnas.evaluation import MultiFidelityEvaluator
        from hwnas.experiments.executors import check_rebuildable, component_spec

        mf, where = self.cfg.multi_fidelity, self.where
        assert mf is not None
        before = len(self.problems)
        offering = [i for i, ev in enumerate(evaluators) if isinstance(ev, MultiFidelityEvaluator)]
        index: int | None = None
        if one_shot:
            self.problems.append(f"{where(('multi_fidelity',))}multi_fidelity: a one-shot strategy derives its "
                                 "architectures from a supernet; rungs apply to black-box strategies")
        if mf.evaluator is None:
            if len(offering) == 1:
                index = offering[0]
            else:
                which = ", ".join(f"evaluators[{i}] ({names[i]})" for i in offering) or "none does"
                self.problems.append(f"{where(('multi_fidelity',))}multi_fidelity.evaluator: say which evaluator's "
                                     f"fidelity the rungs set (offering fidelities: {which})")
        elif isinstance(mf.evaluator, int):
            if 0 <= mf.evaluator < len(evaluators):
                index = mf.evaluator
            else:
                self.problems.append(f"{where(('multi_fidelity', 'evaluator'))}multi_fidelity.evaluator: no "
                                     f"evaluators[{mf.evaluator}] (there are {len(evaluators)})")
        else:
            hits = [i for i, n in enumerate(names) if n == mf.evaluator]
            if len(hits) == 1:
                index = hits[0]
            else:
                self.problems.append(f"{where(('multi_fidelity', 'evaluator'))}multi_fidelity.evaluator: "
                                     f"{len(hits)} evaluators are named {mf.evaluator!r}; give its index")
        if index is not None and index not in offering:
            self.problems.append(f"{where(('multi_fidelity', 'evaluator'))}multi_fidelity.evaluator: "
                                 f"evaluators[{index}] ({names[index]}) offers no fidelities (those that do: train "
                                 "(epochs), benchmark (columns))")
            index = None
        rung_evaluators: list[tuple[Any, dict[str, Any]]] = []
        if index is not None:
            ev = evaluators[index]
            assert isinstance(ev, MultiFidelityEvaluator)
            if not any(m in ev.provides for m in (o.metric for o in objectives)):
                self.problems.append(f"{where(('multi_fidelity', 'evaluator'))}multi_fidelity.evaluator: "
                                     f"evaluators[{index}] ({names[index]}) provides no objective's metric: its "
                                     "rungs would rank nothing")
            base = self.resolved["evaluators"][index]
            for r, rung in enumerate(mf.rungs):
                path = ("multi_fidelity", "rungs", r, "fidelity")
                problems = ev.fidelity_problems(rung.fidelity)
                if problems:
                    self.problems.extend(f"{where(path)}multi_fidelity.rungs[{r}].fidelity: {p}" for p in problems)
                    continue
                params = {**base, **ev.fidelity_params(rung.fidelity)}
                try:
                    model = EVALUATORS.validate_params(names[index], params)
                    params = model.model_dump(mode="json")
                    built = EVALUATORS.create(names[index], params, context=self.context)
                    if remote and not built.cheap:
                        check_rebuildable(component_spec(EVALUATORS, names[index], params),
                                          EVALUATORS.params_model(names[index]), f"multi_fidelity.rungs[{r}]")
                except (ConfigError, ValueError) as exc:
                    self.problems.extend(f"{where(path)}multi_fidelity.rungs[{r}].fidelity: {p}"
                                         for p in (exc.problems if isinstance(exc, ConfigError) else [str(exc)]))
                    continue
                rung_evaluators.append((built, params))
        bracket = self.cfg.budget.batch_size
        counts, cost = mf.bracket_counts(bracket), mf.bracket_cost(bracket)
        if cost > mf.budget:
            plan = " + ".join(f"{n} x {r.cost:g}" for n, r in zip(counts, mf.rungs))
            self.problems.append(f"{where(('multi_fidelity', 'budget'))}multi_fidelity.budget: {mf.budget:g} {mf.unit} "
                                 f"does not pay for one bracket of the rungs ({bracket} candidates, "
                                 f"budget.batch_size): {plan} = {cost:g} {mf.unit}; raise the budget or lower "
                                 "budget.batch_size")
        else:  # a file, a dict, a typed config or a config built without its source: each checked alike (a
            # budget.trials left out was filled in with this number, see ExperimentConfig._trials_from_cost)
            expected = mf.brackets(bracket) * bracket
            if self.cfg.budget.trials != expected:
                self.problems.append(f"{where(('budget', 'trials'))}budget.trials: with multi_fidelity the candidates "
                                     f"follow from multi_fidelity.budget ({mf.brackets(bracket)} brackets of "
                                     f"{bracket}: {expected}), not {self.cfg.budget.trials}; leave budget.trials out "
                                     "(a typed BudgetConfig: give that number)")
        if len(self.problems) > before:
            return None, []
        return index, rung_evaluators

    def relative_constraint_problems(self) -> None:
        """A constraint relative to a member of a space that names none."""
        for i, c in enumerate(self.cfg.constraints):
            if c.relative_to is not None:
                self.problems.append(f"{self.where(('constraints', i, 'relative_to'))}constraints[{i}].relative_to: "
                                     f"space {self.cfg.space.name!r} names no {c.relative_to} member")

    def metric_problems(self, names: Sequence[str], evaluators: Sequence[Evaluator], objectives: Sequence[Objective],
                        constraints: Sequence[Constraint]) -> None:
        """Each metric provided by exactly one evaluator; every objective's, constraint's and predictor refit's
        metric provided by one."""
        where = self.where
        providers: dict[str, list[str]] = {}
        for n, ev in zip(names, evaluators):
            for m in ev.provides:
                providers.setdefault(m, []).append(n)
        provided = sorted(providers)
        for m, who in providers.items():
            if len(who) > 1:
                self.problems.append(f"{where(('evaluators',))}evaluators: metric {m!r} is provided by {len(who)} "
                                     f"evaluators ({', '.join(who)}); each metric needs exactly one")
        groups: tuple[tuple[str, Sequence[Objective | Constraint]], ...] = (("objectives", objectives),
                                                                           ("constraints", constraints))
        for kind, items in groups:
            for i, item in enumerate(items):
                if item.metric not in providers:
                    close = difflib.get_close_matches(item.metric, provided, n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    self.problems.append(f"{where((kind, i, 'metric'))}{kind}[{i}].metric: no evaluator provides "
                                         f"{item.metric!r}{hint} (provided: {', '.join(provided)})")
        for i, ev in enumerate(evaluators):  # a predictor refitted on a metric nobody measures would never refit
            refit_on = getattr(ev, "refit_on", None) if getattr(ev, "refit_every", None) else None
            if isinstance(refit_on, str) and refit_on not in providers:
                self.problems.append(f"{where(('evaluators', i, 'params', 'refit_on'))}evaluators[{i}].params."
                                     f"refit_on: no evaluator provides {refit_on!r} (provided: {', '.join(provided)}): "
                                     "the predictor would never be refitted")

    def strategy_problems(self, space: SearchSpace, model: Any, *, one_shot: bool,
                          objectives: Sequence[Objective], constraints: Sequence[Constraint], names: Sequence[str],
                          evaluators: Sequence[Evaluator]) -> None:
        """The strategy built with its parameters for this space and these objectives, once nothing else is wrong
        (a one-shot strategy: :func:`~hwnas.experiments.oneshot.one_shot_build_problems`)."""
        from hwnas.experiments.oneshot import one_shot_build_problems
        from hwnas.strategies import STRATEGIES

        cfg, where = self.cfg, self.where(("strategy",))
        self.resolved["strategy"] = model.model_dump(mode="json")
        if one_shot:
            self.problems.extend(f"{where}{p}" for p in one_shot_build_problems(
                cfg, space, model, objectives=objectives, constraints=constraints, evaluator_names=names,
                evaluators=evaluators, others_failed=bool(self.problems)))
            return
        if self.problems:
            return
        try:
            STRATEGIES.create(cfg.strategy.name, self.resolved["strategy"], space=space, objectives=objectives,
                              constraints=constraints, rng=np.random.default_rng(cfg.seed))
        except (ValueError, ConfigError) as exc:
            self.problems.append(f"{where}strategy: {exc}")


def experiment_space(path: str | Path, overrides: Sequence[str] = ()) -> SearchSpace:
    """The search space exactly as an experiment resolves it (its dataset's input channels and classes filled in,
    ``--set`` overrides applied), building nothing else: for what makes the experiment's inputs before they exist
    (a latency table, a board kit), so that they are measured for this space.

    Raises:
        ConfigError: The file, its space or its dataset is wrong (each problem with its file and line).
    """
    loaded = load_yaml(path, overrides)
    b = _Build(parse_config(loaded), loaded)
    space = b.space(b.space_params())
    if b.problems or space is None:
        raise ConfigError(b.problems or [f"{loaded.source}: the space cannot be built"])
    return space


def load_experiment(path: str | Path, overrides: Sequence[str] = (), *,
                    artifacts_dir: Path | None = None) -> Experiment:
    """File -> validated config -> built experiment (``nas validate`` stops here)."""
    loaded = load_yaml(path, overrides)
    cfg = parse_config(loaded)
    return build(cfg, loaded=loaded, artifacts_dir=artifacts_dir)
