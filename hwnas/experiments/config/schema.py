"""The experiment file's schema: pydantic models, and :func:`parse_config` that reports every problem at once."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator, model_validator

from hwnas.data import DataConfig
from hwnas.errors import ConfigError, UnknownComponent, pydantic_message
from hwnas.evaluation import EVALUATORS
from hwnas.experiments.config.yaml_io import LoadedYaml, format_path
from hwnas.fileio import check_name
from hwnas.objectives import Constraint
from hwnas.registry import ComponentSpec


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
        if isinstance(value, dict) and value.get("name") is None and set(value) - {"name", "flat"}:
            given = ", ".join(sorted(set(value) - {"name", "flat"}))
            raise ValueError(f"parameters ({given}) but no name: say which executor they are for, e.g. "
                             "{name: local, threads: 2} (--set executor.name=local beside --set executor.threads=2)")
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
    trials: StrictInt = Field(ge=1, le=10**9, description="distinct architectures to evaluate (infeasible included); "
                                                         "with multi_fidelity it follows from multi_fidelity.budget")
    batch_size: StrictInt = Field(8, ge=1, le=10**6, description="architectures asked from the strategy at a time")
    max_failures_in_a_row: StrictInt = Field(
        10, ge=0, description="stop the run when this many fresh trials fail the same way in a row (0: never)")


class RungConfig(_Strict):
    """One rung of a multi-fidelity schedule: the fidelity its evaluator scores at, and what one evaluation costs."""

    fidelity: Any = Field(description="what the schedule's evaluator offers: train: epochs; benchmark: "
                                      "{metric: column} (or the column alone)")
    cost: float = Field(gt=0, allow_inf_nan=False,
                        description="cost of one evaluation at this rung, in multi_fidelity.unit (epochs, seconds)")


class MultiFidelityConfig(_Strict):
    """Successive halving inside the run: every candidate the strategy asks is scored at the first rung, and within
    each bracket (a batch of ``budget.batch_size`` candidates) the best fraction ``promote`` of a rung -- feasible
    first, then by non-dominated rank, then by hypervolume contribution -- goes on to the next rung."""

    evaluator: StrictInt | str | None = Field(
        None, description="the evaluator whose fidelity the rungs set: its index in evaluators or its name (default: "
                          "the only one that offers fidelities)")
    rungs: list[RungConfig] = Field(min_length=2, description="cheapest first; fidelities and costs increasing")
    promote: float = Field(allow_inf_nan=False,
                           description="fraction of a bracket's candidates at a rung promoted to the next "
                                       "(rounded up), in (0, 1)")
    budget: float = Field(gt=0, allow_inf_nan=False,
                          description="the run's budget in unit: the rungs' costs of every evaluation together")
    unit: Literal["epochs", "seconds"] = Field("epochs", description="what the rungs' costs and the budget count")

    @field_validator("promote")
    @classmethod
    def _fraction(cls, v: float) -> float:
        if not 0 < v < 1:
            raise ValueError(f"{v:g} is not a fraction in (0, 1): the share of a rung's candidates promoted to the "
                             "next (0.25: the best quarter)")
        return v

    @field_validator("rungs")
    @classmethod
    def _increasing(cls, rungs: list[RungConfig]) -> list[RungConfig]:
        for i in range(1, len(rungs)):
            if rungs[i].cost <= rungs[i - 1].cost:
                raise ValueError(f"rungs[{i}].cost ({rungs[i].cost:g}) is not above rungs[{i - 1}].cost "
                                 f"({rungs[i - 1].cost:g}): rungs go from the cheapest fidelity up")
            a, b = rungs[i - 1].fidelity, rungs[i].fidelity
            if (isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
                    and not isinstance(b, bool) and b <= a):
                raise ValueError(f"rungs[{i}].fidelity ({b}) is not above rungs[{i - 1}].fidelity ({a}): rungs go "
                                 "from the lowest fidelity up")
            if a == b:
                raise ValueError(f"rungs[{i}].fidelity is rungs[{i - 1}].fidelity again ({a!r})")
        return rungs

    def bracket_counts(self, bracket: int) -> list[int]:
        """Candidates evaluated at each rung of one full bracket of ``bracket`` candidates."""
        counts = [bracket]
        for _ in self.rungs[1:]:
            counts.append(max(1, math.ceil(counts[-1] * self.promote - 1e-9)))
        return counts

    def bracket_cost(self, bracket: int) -> float:
        """What one full bracket costs, in :attr:`unit`."""
        return sum(n * r.cost for n, r in zip(self.bracket_counts(bracket), self.rungs))

    def brackets(self, bracket: int) -> int:
        """How many full brackets the budget pays for."""
        return int(self.budget // self.bracket_cost(bracket) + 1e-9)


#: The formats ``nas export`` writes beside the fp32 ONNX file.
ExportFormat = Literal["onnx", "onnx_fp16", "onnx_int8", "torch_export", "tensorrt"]


class ExportConfig(_Strict):
    """What ``nas run`` exports at its end (``nas export RUN_DIR`` can export again, with every format)."""

    enabled: bool = True
    opset: int = Field(17, ge=13)
    formats: list[ExportFormat] = Field(
        default_factory=lambda: list[ExportFormat](["onnx"]),
        description="formats beside the fp32 ONNX file (see nas export --help)")
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
    multi_fidelity: MultiFidelityConfig | None = Field(
        None, description="successive-halving rungs inside the run, the budget counted in cost")
    executor: ExecutorConfig = Field(default_factory=lambda: ExecutorConfig(name="local"),
                                      description="where expensive evaluations run: local, process, ...")
    export: ExportConfig = Field(default_factory=ExportConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)

    @model_validator(mode="before")
    @classmethod
    def _trials_from_cost(cls, data: Any) -> Any:
        """With multi_fidelity, budget.trials (the candidates scored at the first rung) follows from its budget:
        brackets the cost budget pays for, times the bracket (budget.batch_size). Filled in here when left out
        (a schedule that cannot be read leaves it to its own errors)."""
        if not isinstance(data, dict) or not isinstance(data.get("multi_fidelity"), dict):
            return data
        budget = data.get("budget") if isinstance(data.get("budget"), dict) else None
        if budget is None or "trials" in budget:
            return data
        try:
            mf = MultiFidelityConfig.model_validate(data["multi_fidelity"])
            bracket = BudgetConfig.model_fields["batch_size"].default if "batch_size" not in budget else \
                int(budget["batch_size"])
            trials = max(1, mf.brackets(bracket)) * bracket
        except (ValidationError, TypeError, ValueError, ZeroDivisionError):
            trials = 1
        return {**data, "budget": {**budget, "trials": trials}}

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        return check_name(v)  # the one rule of names (hwnas.fileio)


def pydantic_problems(errors: Sequence[Any], model: type[BaseModel] | None, loaded: LoadedYaml | None,
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


def _allowed_keys(err: Any, model: type[BaseModel] | None) -> list[str]:
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
        problems = pydantic_problems(exc.errors(), ExperimentConfig, loaded)
        raise ConfigError([*problems, *_component_name_problems(loaded)]) from None


def _component_name_problems(loaded: LoadedYaml) -> list[str]:
    """Unknown component names (space, strategy, evaluators, executor), found in the raw file: reported beside a
    file's schema problems, which stop the check before the components are looked up."""
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
