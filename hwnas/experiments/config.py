"""Experiment configuration: validated pydantic models, and ``build()`` that wires the components."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator, model_validator

from hwnas.architecture import Architecture
from hwnas.data import DataConfig, DataSource
from hwnas.errors import ConfigError, InvalidParams, UnknownComponent, pydantic_message
from hwnas.evaluation import EVALUATORS, EvalContext, protocol_problems
from hwnas.experiments.yaml_io import LoadedYaml, format_path, load_yaml
from hwnas.objectives import Constraint, Objective, is_hardware_metric
from hwnas.registry import ComponentSpec
from hwnas.search_spaces.base import EnumerableSpace, SizedSpace


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


ComponentConfig = ComponentSpec
"""A registered component by name, with its parameters (:class:`hwnas.registry.ComponentSpec`)."""


class ExecutorConfig(ComponentConfig):
    """Where expensive evaluations run; parameters may sit beside the name: ``{name: process, workers: 2}``."""

    flat: bool = Field(False, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _fold_flat(cls, value: Any) -> Any:
        if isinstance(value, dict) and "params" not in value and set(value) - {"name", "flat"}:
            return {"name": value.get("name"), "params": {k: v for k, v in value.items() if k != "name"},
                    "flat": True}
        if isinstance(value, dict) and "params" in value and set(value) - {"name", "params", "flat"}:
            beside = ", ".join(sorted(set(value) - {"name", "params", "flat"}))
            raise ValueError(f"parameters both beside the name ({beside}) and under params: give them one way "
                             "({name: process, workers: 2} or {name: process, params: {workers: 2}})")
        return value


class ObjectiveConfig(_Strict):
    metric: str
    direction: Literal["min", "max"]
    reference: float | None = Field(
        None, allow_inf_nan=False,
        description="the worst value that counts toward the hypervolume, in the metric's units (default: a "
                    "constraint bound on the metric, or 0 for an accuracy; see objectives.reference_point)")


class ConstraintConfig(_Strict):
    metric: str
    max: float | None = Field(None, allow_inf_nan=False)
    min: float | None = Field(None, allow_inf_nan=False)
    relative_to: Literal["largest"] | None = Field(
        None, description="give max/min as fractions of this member's value, measured by the same evaluator "
                          "before the first trial (largest: every dimension at its largest)")

    @model_validator(mode="after")
    def _bounded(self) -> ConstraintConfig:
        Constraint(self.metric, max=self.max, min=self.min, relative_to=self.relative_to)  # its bounds' rules
        if self.relative_to is not None and any(b is not None and b <= 0 for b in (self.max, self.min)):
            raise ValueError(f"a bound relative to the {self.relative_to} member is a positive fraction of its "
                             "value (max: 0.6 is 60 %)")
        return self


class BudgetConfig(_Strict):
    trials: StrictInt = Field(ge=1, le=10**9, description="distinct architectures to evaluate (infeasible included)")
    batch_size: StrictInt = Field(8, ge=1, le=10**6, description="architectures asked from the strategy at a time")
    max_failures_in_a_row: StrictInt = Field(
        10, ge=0, description="stop the run when this many fresh trials fail the same way in a row (0: never)")


class ExportConfig(_Strict):
    """What ``nas run`` exports at its end (``nas export RUN_DIR`` can export again, with every format)."""

    enabled: bool = True
    opset: int = Field(17, ge=13)
    formats: list[Literal["onnx", "onnx_fp16", "onnx_int8", "torch_export", "tensorrt"]] = Field(
        default_factory=lambda: ["onnx"], description="formats beside the fp32 ONNX file (see nas export --help)")
    dynamic_batch: bool = Field(False, description="leave the ONNX batch axis free (default: fixed batch 1)")
    simplify: bool = Field(True, description="simplify the ONNX file with onnxslim")
    measure: bool = Field(True, description="re-measure each exported file's latency in every context this host "
                                            "can measure, beside the search's figure")


class OutputConfig(_Strict):
    root: str = "runs"


class ExperimentConfig(_Strict):
    """The whole experiment file."""

    name: str = Field(max_length=100, description="run name: the run directory is <output.root>/<name>")
    seed: StrictInt = Field(0, ge=0, lt=2**63, description="the seed of every generator of the run")
    space: ComponentConfig
    dataset: DataConfig | None = None
    evaluators: list[ComponentConfig] = Field(min_length=1)
    objectives: list[ObjectiveConfig] = Field(min_length=1)
    constraints: list[ConstraintConfig] = Field(default_factory=list)
    strategy: ComponentConfig
    budget: BudgetConfig
    executor: ExecutorConfig = Field(default_factory=lambda: ExecutorConfig(name="local"),
                                      description="where expensive evaluations run: local, process, ...")
    export: ExportConfig = Field(default_factory=ExportConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", v):
            raise ValueError("use letters, digits, '.', '_' and '-' only (it names a folder)")
        return v


def _pydantic_problems(errors: Sequence[Any], model: type[BaseModel], loaded: LoadedYaml | None,
                       prefix: Sequence[str | int] = ()) -> list[str]:
    """pydantic's errors as one line each: file:line, the dotted path, the message (close keys suggested)."""
    out: list[tuple[tuple[Any, ...], str, str]] = []
    for err in errors:
        loc = tuple(prefix) + tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = pydantic_message(err)
        if err["type"] == "extra_forbidden":
            parent_fields = _allowed_keys(err, model)
            close = difflib.get_close_matches(str(loc[-1]), parent_fields, n=1) if parent_fields else []
            msg = "unknown key" + (f"; did you mean {close[0]!r}?" if close else "")
        where = f"{loaded.where(loc)}: " if loaded else ""
        out.append((loc, err["type"], f"{where}{format_path(loc)}: {msg}"))
    # a misspelt required key gives two errors ("nmae: unknown key; did you mean 'name'?" and "name: Field
    # required"): the suggestion says it all
    suggested = {(loc[:-1], m.group(1)) for loc, kind, text in out if kind == "extra_forbidden"
                 for m in [re.search(r"did you mean '([^']+)'\?$", text)] if m}
    return [text for loc, kind, text in out
            if not (kind == "missing" and (loc[:-1], str(loc[-1])) in suggested)]


def _allowed_keys(err: Any, model: type[BaseModel]) -> list[str]:
    node: Any = model
    for part in err["loc"][:-1]:
        if isinstance(part, int) or node is None:
            continue
        f = getattr(node, "model_fields", {}).get(part)
        node = _inner_model(f.annotation) if f else None
    return list(getattr(node, "model_fields", {}) or [])


def _inner_model(tp: Any) -> Any:
    import typing

    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in typing.get_args(tp):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def parse_config(loaded: LoadedYaml) -> ExperimentConfig:
    """Validate a loaded file; every problem is reported at once with its path and line."""
    data = loaded.data
    if isinstance(data, dict) and "space" not in data:  # another kind of hwnas file, given where an experiment goes
        if "supernet" in data:
            raise ConfigError(f"{loaded.source}: a supernet training file (supernet:), not an experiment: train it "
                              f"with nas supernet train {loaded.source}")
        if "base" in data and "params" in data:
            raise ConfigError(f"{loaded.source}: a sweep file (base:, params:), not an experiment: run it with nas "
                              f"sweep {loaded.source}")
    try:
        return ExperimentConfig.model_validate(loaded.data)
    except ValidationError as exc:
        problems = _pydantic_problems(exc.errors(), ExperimentConfig, loaded)
        raise ConfigError([*problems, *_component_name_problems(loaded)]) from None


def _component_name_problems(loaded: LoadedYaml) -> list[str]:
    """Unknown component names (space, strategy, evaluators, executor), found in the raw file: reported beside a
    file's schema problems, which stop the check before the components are looked up."""
    import hwnas.experiments.evaluators  # noqa: F401  (registers the built-in evaluators)
    from hwnas.evaluation import EVALUATORS
    from hwnas.experiments.executors import EXECUTORS
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES

    data = loaded.data if isinstance(loaded.data, dict) else {}
    found: list[tuple[tuple[str | int, ...], Any, Any]] = []
    for key, registries in (("space", (SPACES,)), ("strategy", (STRATEGIES, ONE_SHOT_STRATEGIES)),
                            ("executor", (EXECUTORS,))):
        if isinstance(data.get(key), dict):
            found.append(((key, "name"), data[key].get("name"), registries))
    evaluators = data.get("evaluators")
    if isinstance(evaluators, list):
        found += [(("evaluators", i, "name"), e.get("name"), (EVALUATORS,))
                  for i, e in enumerate(evaluators) if isinstance(e, dict)]
    problems = []
    for path, name, registries in found:
        if not isinstance(name, str) or any(name in r for r in registries):
            continue  # a missing or mistyped name is among the schema problems already
        try:
            registries[0].get(name)
        except UnknownComponent as exc:
            problems.append(f"{loaded.where(path)}: {format_path(path)}: {exc}")
    return problems


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

    def resolved(self) -> dict[str, Any]:
        """The config with every component's parameters filled in: what config.yaml records."""
        data = self.config.model_dump(mode="json")
        data["space"]["params"] = self.params["space"]
        data["strategy"]["params"] = self.params["strategy"]
        for i, p in enumerate(self.params["evaluators"]):
            data["evaluators"][i]["params"] = p
        data["executor"] = {"name": self.config.executor.name, "params": self.params["executor"]}
        return data

    def make_strategy(self, run_dir: Path | None = None) -> Any:
        """A fresh strategy seeded from the experiment seed (resume replays the journal into it); ``run_dir``
        is where a strategy that keeps files of its own (an Optuna study) writes them."""
        from hwnas.experiments.oneshot_search import derive_architectures, is_one_shot
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

    def lookup(self) -> tuple[Any, tuple[str, ...]] | None:
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

    def make_executor(self) -> Any:
        """A fresh executor from the ``executor`` section."""
        from hwnas.experiments.executors import EXECUTORS

        return EXECUTORS.create(self.config.executor.name, self.config.executor.params)

    def pipeline(self) -> Any:
        """The expensive evaluators: these instances, and the spec a worker rebuilds them from."""
        from hwnas.evaluation import EVALUATORS
        from hwnas.experiments.executors import Pipeline, PipelineSpec, component_spec
        from hwnas.search_spaces import SPACES

        chosen = [(i, n, ev) for i, (n, ev) in enumerate(zip(self.evaluator_names, self.evaluators)) if not ev.cheap]
        spec = PipelineSpec(
            space=component_spec(SPACES, self.config.space.name, self.params["space"]),
            dataset=self.config.dataset.model_dump(mode="json") if self.config.dataset else None,
            artifacts_dir=str(self.artifacts_dir) if self.artifacts_dir else None,
            seed=self.config.seed,
            evaluators=tuple(component_spec(EVALUATORS, n, self.params["evaluators"][i]) for i, n, _ in chosen),
            names=tuple(n for _, n, _ in chosen),
            fingerprints=tuple(ev.fingerprint() for _, _, ev in chosen),
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
        from hwnas.latency.onnx_export import max_export_opset

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
        from hwnas.experiments.oneshot_search import is_one_shot, one_shot_problems

        if is_one_shot(self.config.strategy.name) and not problems:  # the searches' checks need what came before
            try:
                problems.extend(f"{where(path)}{label}: {p}" for path, label, p in one_shot_problems(self))
            except ConfigError as exc:
                problems.extend(f"{where(('strategy',))}strategy: {p}" for p in exc.problems)
        newest, why = max_export_opset()
        asked = [(("export", "opset"), "export.opset", self.config.export.opset)] if self.config.export.enabled else []
        asked += [(("evaluators", i, "params", "opset"), f"evaluators[{i}].params.opset", p["opset"])
                  for i, p in enumerate(self.params.get("evaluators") or []) if isinstance(p.get("opset"), int)]
        problems.extend(f"{where(path)}{label}: opset {opset} is newer than {why} can write (at most {newest})"
                        for path, label, opset in asked if opset > newest)
        if problems:
            raise ConfigError(problems)

    def data_source(self) -> DataSource | None:
        """The experiment's dataset (loaded lazily), or None."""
        return DataSource(self.config.dataset) if self.config.dataset else None


def build(cfg: ExperimentConfig, *, loaded: LoadedYaml | None = None, artifacts_dir: Path | None = None) -> Experiment:
    """Look components up, validate each one's parameters, and cross-check them. Runs nothing."""
    import hwnas.experiments.evaluators  # noqa: F401  (registers the built-in evaluators)
    from hwnas import data as data_mod
    from hwnas.experiments.executors import EXECUTORS, check_rebuildable, component_spec
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import STRATEGIES

    problems: list[str] = []

    def where(path: Sequence[str | int]) -> str:
        return f"{loaded.where(path)}: " if loaded else ""

    def lookup(registry: Any, comp: ComponentConfig, path: tuple[str | int, ...], flat: bool = False) -> Any:
        """The validated Params model of a component, or None with its problems recorded."""
        try:
            return registry.validate_params(comp.name, comp.params)
        except InvalidParams as exc:
            problems.extend(_pydantic_problems(exc.errors, exc.model, loaded, path if flat else (*path, "params")))
        except ConfigError as exc:  # unknown, a plug-in that failed to load, or one without a Params model
            problems.append(f"{where((*path, 'name'))}{format_path((*path, 'name'))}: {exc}")
        return None

    # dataset first: it fixes the input channels and classes of the space
    space_params = dict(cfg.space.params)
    if cfg.dataset is not None:
        try:
            in_chans, num_classes = data_mod.describe(cfg.dataset)
        except ConfigError as exc:
            problems.extend(f"{where(('dataset', 'path'))}{p}" for p in exc.problems)
        else:
            for key, value in (("in_chans", in_chans), ("num_classes", num_classes)):
                if key in space_params and space_params[key] != value:
                    problems.append(f"{where(('space', 'params', key))}space.params.{key}: {space_params[key]} "
                                    f"does not match the dataset ({value})")
                space_params.setdefault(key, value)

    space = None
    resolved: dict[str, Any] = {"evaluators": []}
    space_model = lookup(SPACES, ComponentConfig(name=cfg.space.name, params=space_params), ("space",))
    if space_model is not None:
        resolved["space"] = space_model.model_dump(mode="json")
        if resolved["space"].get("merge_isomorphic", False) is None:
            # a space that can merge equivalent architectures (NB201's isomorphic cells) must not when the
            # hardware is judged: equivalent cells compute the same function with different operations
            hardware = [m for m in [o.metric for o in cfg.objectives] + [c.metric for c in cfg.constraints]
                        if is_hardware_metric(m)]
            resolved["space"]["merge_isomorphic"] = not hardware
        space = SPACES.create(cfg.space.name, resolved["space"])

    from hwnas.experiments.oneshot_search import is_one_shot
    from hwnas.strategies import ONE_SHOT_STRATEGIES

    one_shot = is_one_shot(cfg.strategy.name)
    if not one_shot and cfg.strategy.name not in STRATEGIES.names():
        known = sorted(set(STRATEGIES.names()) | set(ONE_SHOT_STRATEGIES.names()))
        close = difflib.get_close_matches(cfg.strategy.name, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        problems.append(f"{where(('strategy', 'name'))}strategy.name: unknown strategy {cfg.strategy.name!r}{hint} "
                        f"(black-box: {', '.join(sorted(STRATEGIES.names()))}; one-shot: "
                        f"{', '.join(sorted(ONE_SHOT_STRATEGIES.names()))})")
        strategy_model = None
    else:
        strategy_model = lookup(ONE_SHOT_STRATEGIES if one_shot else STRATEGIES, cfg.strategy, ("strategy",))
    executor_model = lookup(EXECUTORS, cfg.executor, ("executor",), flat=cfg.executor.flat)
    remote = executor_model is not None and cfg.executor.name != "local"
    evaluators, names = [], []
    if space is not None:
        ctx = EvalContext(space=space, data=DataSource(cfg.dataset) if cfg.dataset else None,
                          artifacts_dir=artifacts_dir, seed=cfg.seed)
        for i, comp in enumerate(cfg.evaluators):
            model = lookup(EVALUATORS, comp, ("evaluators", i))
            if model is None:
                continue
            params = model.model_dump(mode="json")
            try:
                ev = EVALUATORS.create(comp.name, params, context=ctx)
                broken = protocol_problems(ev)
                if broken:
                    problems.append(f"{where(('evaluators', i))}evaluators[{i}]: evaluator {comp.name!r} "
                                    f"({type(ev).__module__}.{type(ev).__qualname__}) breaks the Evaluator protocol: "
                                    + "; ".join(broken))
                    continue
                if remote and not ev.cheap:
                    check_rebuildable(component_spec(EVALUATORS, comp.name, params), EVALUATORS.get(comp.name).Params,
                                      f"evaluators[{i}] ({comp.name})")
            except (ConfigError, ValueError) as exc:  # every problem of a ConfigError on a line of its own
                problems.extend(f"{where(('evaluators', i))}evaluators[{i}]: {p}"
                                for p in (exc.problems if isinstance(exc, ConfigError) else [str(exc)]))
                continue
            evaluators.append(ev)
            names.append(comp.name)
            resolved["evaluators"].append(params)

    objectives = [Objective(o.metric, o.direction, o.reference) for o in cfg.objectives]
    constraints = [Constraint(c.metric, max=c.max, min=c.min, relative_to=c.relative_to) for c in cfg.constraints]
    if space is not None and not isinstance(space, SizedSpace):
        for i, c in enumerate(cfg.constraints):
            if c.relative_to is not None:
                problems.append(f"{where(('constraints', i, 'relative_to'))}constraints[{i}].relative_to: space "
                                f"{cfg.space.name!r} names no {c.relative_to} member")

    if space is not None and len(evaluators) == len(cfg.evaluators):
        providers: dict[str, list[str]] = {}
        for n, ev in zip(names, evaluators):
            for m in ev.provides:
                providers.setdefault(m, []).append(n)
        provided = sorted(providers)
        for m, who in providers.items():
            if len(who) > 1:
                problems.append(f"{where(('evaluators',))}evaluators: metric {m!r} is provided by {len(who)} "
                                f"evaluators ({', '.join(who)}); each metric needs exactly one")
        for kind, items in (("objectives", objectives), ("constraints", constraints)):
            for i, item in enumerate(items):
                if item.metric not in providers:
                    close = difflib.get_close_matches(item.metric, provided, n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    problems.append(f"{where((kind, i, 'metric'))}{kind}[{i}].metric: no evaluator provides "
                                    f"{item.metric!r}{hint} (provided: {', '.join(provided)})")
        for i, ev in enumerate(evaluators):  # a predictor refitted on a metric nobody measures would never refit
            refit_on = getattr(ev, "refit_on", None) if getattr(ev, "refit_every", None) else None
            if isinstance(refit_on, str) and refit_on not in providers:
                problems.append(f"{where(('evaluators', i, 'params', 'refit_on'))}evaluators[{i}].params.refit_on: "
                                f"no evaluator provides {refit_on!r} (provided: {', '.join(provided)}): the "
                                "predictor would never be refitted")
    twice = sorted({o.metric for o in objectives if sum(p.metric == o.metric for p in objectives) > 1})
    if twice:
        problems.append(f"{where(('objectives',))}objectives: metric {', '.join(map(repr, twice))} appears twice")
    if executor_model is not None:
        resolved["executor"] = executor_model.model_dump(mode="json")
    if one_shot and strategy_model is not None and space is not None:
        from hwnas.experiments.oneshot_search import check_one_shot, landing_evaluator, latency_metric

        problems.extend(f"{where(('strategy',))}{p}" for p in check_one_shot(cfg, space))
    if strategy_model is not None and space is not None and not problems:
        resolved["strategy"] = strategy_model.model_dump(mode="json")
        try:
            if one_shot:
                ONE_SHOT_STRATEGIES.create(cfg.strategy.name, resolved["strategy"], space=space,
                                           rng=np.random.default_rng(cfg.seed))
                if strategy_model.uses_latency:
                    latency_metric(strategy_model, objectives, constraints, names, evaluators)
                if getattr(strategy_model, "landing_metric", None) is not None:
                    landing_evaluator(strategy_model.landing_metric, names, evaluators)
            else:
                STRATEGIES.create(cfg.strategy.name, resolved["strategy"], space=space, objectives=objectives,
                                  constraints=constraints, rng=np.random.default_rng(cfg.seed))
        except (ValueError, ConfigError) as exc:
            problems.append(f"{where(('strategy',))}{exc if one_shot else f'strategy: {exc}'}")
    if problems:
        raise ConfigError(problems)
    return Experiment(config=cfg, space=space, evaluators=evaluators, evaluator_names=names,
                      objectives=objectives, constraints=constraints, params=resolved,
                      source=loaded.source if loaded else "<config>", artifacts_dir=artifacts_dir, loaded=loaded)


def load_experiment(path: str | Path, overrides: Sequence[str] = (), *,
                    artifacts_dir: Path | None = None) -> Experiment:
    """File -> validated config -> built experiment (``nas validate`` stops here)."""
    loaded = load_yaml(path, overrides)
    cfg = parse_config(loaded)
    return build(cfg, loaded=loaded, artifacts_dir=artifacts_dir)
