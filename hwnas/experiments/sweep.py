"""``nas sweep SWEEP.yaml``: many experiments as Ray Tune trials, each a full hwnas run with its own run directory.

A sweep file names a base experiment and the parameters to vary over its dotted keys::

    name: budget_x_seed
    base: quickstart.yaml              # relative to the sweep file
    params:
      seed: {grid: [0, 1, 2]}
      budget.trials: {choice: [16, 32]}
      strategy.params.pop_size: {randint: [4, 12]}
      evaluators.1.params.lr: {loguniform: [0.01, 0.1]}
    search: {name: basic, num_samples: 1}          # or {name: optuna, num_samples: 8} (OptunaSearch)
    metric: hypervolume                            # what Tune compares; mode max
    scheduler: {name: fifo}                        # or {name: asha, grace_period: 16}: stops weak runs early
    max_concurrent: 2
    resources_per_trial: {CPU: 1}
    address: local                                 # or auto / HOST:PORT: an existing Ray cluster
    output: {root: runs/sweeps}

Each Tune trial runs the base experiment with its parameters as ``--set`` overrides in
``<root>/<name>/runs/<trial id>`` and reports, after every batch, the hypervolume of its front so far (against
the experiment's fixed reference point), the trials done and the front's size, which is what ASHA stops weak
runs on. The sweep ends with a table of the trials, ``results.csv``/``results.json`` and ``fronts.png`` (every
trial's front on one figure). ``nas sweep FILE --resume`` restores an interrupted sweep with Tune's restore:
finished trials are kept, unfinished ones continue, each resuming its own hwnas run from its journal.
"""

from __future__ import annotations

import csv
import difflib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hwnas.errors import ConfigError, RunDirectoryError
from hwnas.fileio import FolderLock, atomic_write
from hwnas.registry import Name, Seed

if TYPE_CHECKING:
    from types import ModuleType

    from ray.tune import ResultGrid, TuneConfig, Tuner
    from rich.table import Table

    from hwnas.objectives import Constraint, Objective, ReferencePoint, Trial

log = logging.getLogger(__name__)

DISTRIBUTIONS = ("grid", "choice", "uniform", "loguniform", "randint")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchConfig(_Strict):
    name: Literal["basic", "optuna"] = "basic"
    num_samples: int = Field(1, ge=1, description="samples of the space (each grid point this many times with basic)")
    seed: Seed | None = Field(None, description="seed of the search algorithm")


class SchedulerConfig(_Strict):
    name: Literal["fifo", "asha"] = "fifo"
    grace_period: int = Field(8, ge=1, description="ASHA: trials every run gets before it can be stopped")
    reduction_factor: int = Field(3, ge=2)


class OutputConfig(_Strict):
    root: str = "runs/sweeps"


class SweepConfig(_Strict):
    name: Name
    base: str = Field(description="the base experiment file, relative to the sweep file")
    params: dict[str, dict[str, Any]] = Field(min_length=1)
    search: SearchConfig = Field(default_factory=SearchConfig)
    metric: Literal["hypervolume", "front_size"] = "hypervolume"
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    max_concurrent: int = Field(2, ge=1)
    resources_per_trial: dict[str, float] = Field(default_factory=lambda: {"CPU": 1.0})
    address: str = "local"
    output: OutputConfig = Field(default_factory=OutputConfig)


def load_sweep(path: str | Path) -> tuple[SweepConfig, Path]:
    """The sweep config and its base experiment's path; every problem is one :class:`ConfigError`."""
    from hwnas.experiments.config.schema import pydantic_problems
    from hwnas.experiments.config.yaml_io import load_yaml

    path = Path(path)
    loaded = load_yaml(path)
    if isinstance(loaded.data, dict) and "base" not in loaded.data and ("space" in loaded.data
                                                                        or "supernet" in loaded.data):
        what = "a supernet training file: nas supernet train" if "supernet" in loaded.data else \
            "an experiment file: nas run (a sweep file names one as its base:)"
        raise ConfigError(f"{path}: not a sweep file (no base:); it looks like {what}")
    try:
        cfg = SweepConfig.model_validate(loaded.data)
    except ValidationError as exc:
        raise ConfigError(pydantic_problems(exc.errors(), SweepConfig, loaded)) from None
    base = (path.parent / cfg.base).resolve()
    if not base.is_file():
        raise ConfigError(f"{path}: base: no experiment file at {base}")
    return cfg, base


def flat_keys(data: object, prefix: str = "") -> list[str]:
    """Every dotted key of a nested config (list items by index), leaves and inner nodes alike."""
    out: list[str] = []
    if isinstance(data, Mapping):
        items = [(str(k), v) for k, v in data.items()]
    elif isinstance(data, list):
        items = [(str(i), v) for i, v in enumerate(data)]
    else:
        return out
    for k, v in items:
        key = f"{prefix}.{k}" if prefix else k
        out.append(key)
        out += flat_keys(v, key)
    return out


def check_params(cfg: SweepConfig, base: Path, sweep_path: Path) -> None:
    """Every swept key must be a key of the base experiment (as resolved: every default filled in), and every
    distribution one Tune knows with values it accepts.

    Raises:
        ConfigError: Naming the key and the closest keys of the experiment, or the bad distribution.
    """
    from hwnas.experiments.config import build, parse_config
    from hwnas.experiments.config.yaml_io import load_yaml

    try:
        loaded = load_yaml(base)
        resolved = build(parse_config(loaded), loaded=loaded).resolved()
    except ConfigError as exc:  # a problem inside the base file: where the sweep names it, and where it is
        at = load_yaml(sweep_path).where(("base",))
        raise ConfigError([f"{at}: base: {problem}" for problem in exc.problems]) from None
    keys = flat_keys(resolved)
    for key, spec in cfg.params.items():
        if key not in keys:
            close = difflib.get_close_matches(key, keys, n=3, cutoff=0.5)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise ConfigError(f"{sweep_path}: params.{key}: not a key of the experiment {base.name}{hint}")
        if len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
            raise ConfigError(f"{sweep_path}: params.{key}: give one of {', '.join(DISTRIBUTIONS)}, e.g. "
                              "{grid: [1, 2]}")
        kind, values = next(iter(spec.items()))
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{sweep_path}: params.{key}.{kind}: a non-empty list is needed")
        if kind in ("uniform", "loguniform", "randint") and len(values) != 2:
            raise ConfigError(f"{sweep_path}: params.{key}.{kind}: give [low, high]")
        if kind == "grid" and cfg.search.name == "optuna":
            raise ConfigError(f"{sweep_path}: params.{key}: Optuna samples, it does not grid; use choice")
        if kind in ("uniform", "loguniform", "randint"):
            low, high = values
            numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            if not numbers or (kind == "randint" and not all(isinstance(v, int) for v in values)):
                raise ConfigError(f"{sweep_path}: params.{key}.{kind}: [low, high] must be "
                                  f"{'integers' if kind == 'randint' else 'numbers'}, got {values}")
            if not (low <= high if kind == "randint" else low < high) or (kind == "loguniform" and low <= 0):
                raise ConfigError(f"{sweep_path}: params.{key}.{kind}: low {low} must be below high {high}"
                                  + (" and above 0" if kind == "loguniform" else ""))
        # every value a trial can get (a range: both ends) must make a valid experiment, checked now rather than
        # as a failed trial once the sweep runs
        if kind in ("grid", "choice"):
            tried = [(f"{kind}[{i}]", v) for i, v in enumerate(values)]
        else:  # a continuous range also draws values between its ends: an integer parameter refuses those
            tried = [("low", values[0]), ("high", values[1])]
            if kind != "randint":
                tried.append(("a value between", float(values[0]) + 0.37 * (float(values[1]) - float(values[0]))))
        for label, value in tried:
            override = f"{key}={json.dumps(value)}"
            try:
                build(parse_config(load_yaml(base, [override])))
            except ConfigError as exc:
                hint = " (sweep an integer parameter with randint or choice)" if label == "a value between" else ""
                where = label if kind in ("grid", "choice") else f"{kind} ({label})"
                raise ConfigError(f"{sweep_path}: params.{key}.{where} = {json.dumps(value)}: "
                                  f"{'; '.join(exc.problems)}{hint}") from None


def param_space(cfg: SweepConfig) -> dict[str, object]:
    """The Tune search space of a sweep (keys kept dotted; every value a Tune domain)."""
    from ray import tune

    space: dict[str, object] = {}
    for key, spec in cfg.params.items():
        kind, values = next(iter(spec.items()))
        if kind == "grid":
            space[key] = tune.grid_search(values)
        elif kind == "choice":
            space[key] = tune.choice(values)
        elif kind == "uniform":
            space[key] = tune.uniform(float(values[0]), float(values[1]))
        elif kind == "loguniform":
            space[key] = tune.loguniform(float(values[0]), float(values[1]))
        else:
            space[key] = tune.randint(int(values[0]), int(values[1]) + 1)
    return space


def overrides_of(config: Mapping[str, object]) -> list[str]:
    """A trial's parameters as ``--set`` overrides (values as YAML flow: JSON)."""
    return [f"{k}={json.dumps(v.item() if hasattr(v, 'item') else v)}" for k, v in sorted(config.items())]


class TuneReport:
    """A progress object for the runner that reports to Tune after every batch: the hypervolume of the front so
    far against the experiment's fixed reference point, the trials done and the front's size."""

    def __init__(self) -> None:
        self.trials: list[Trial] = []
        self.reference: ReferencePoint | None = None
        self.objectives: Any = None

    def start(self, *, total: int, objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> None:
        from hwnas.objectives import reference_point

        self.objectives = objectives
        self.reference = reference_point(objectives, constraints)

    def update(self, batch: Sequence[Trial], *, replayed: bool = False) -> None:
        """Report after every batch, a resumed run's replayed ones included (Tune's scheduler counts reports)."""
        from ray import tune

        self.trials.extend(batch)
        tune.report(self.metrics())

    def metrics(self) -> dict[str, float]:
        from hwnas.experiments.report.front import front_hypervolume
        from hwnas.objectives import pareto_front

        front = pareto_front(self.trials, self.objectives)
        hv = front_hypervolume(front, self.reference) if self.reference is not None else None
        return {"hypervolume": float(hv) if hv is not None else 0.0, "front_size": float(len(front)),
                "trials": float(len(self.trials))}

    def stop(self) -> None:
        return None


def run_trial(config: dict[str, object], *, base: str, runs: str, cwd: str) -> None:
    """One Tune trial: the base experiment with this trial's overrides, in its own run directory (resumed when
    a restored sweep finds it started)."""
    from ray import tune

    from hwnas.experiments.api import run_experiment

    os.chdir(cwd)  # the base experiment's relative paths (data, tables) mean what they meant to the user
    run_dir = Path(runs) / tune.get_context().get_trial_id()
    reporter = TuneReport()
    if (run_dir / "config.yaml").is_file():
        result = run_experiment(resume=run_dir, progress=reporter)
    else:
        result = run_experiment(base, overrides=overrides_of(config), run_dir=run_dir, progress=reporter)
    reporter.trials = list(result.trials)
    tune.report({**reporter.metrics(), "run_finished": 1.0})  # Tune keeps "done" for itself


def run_sweep(path: str | Path, *, resume: bool = False) -> Path:
    """Run (or, with ``resume``, restore) a sweep; returns its folder (``<output.root>/<name>``)."""
    path = Path(path)
    cfg, base = load_sweep(path)
    check_params(cfg, base, path)
    from hwnas.cluster import connect, import_ray

    ray = import_ray()
    from ray import tune

    sweep_dir = (Path(cfg.output.root) / cfg.name).resolve()
    state = sweep_dir / "tune"
    # Tune writes tuner.pkl before its experiment state: a sweep killed in between has nothing to restore (a
    # restore of it runs one trial with no parameters), and is started afresh (its own tune/ state replaced)
    restorable = state.exists() and tune.Tuner.can_restore(str(state)) and any(state.glob("experiment_state-*.json"))
    begun = (sweep_dir / "sweep.yaml").is_file() and state.exists()  # stopped before its first trial
    if resume and not restorable and not begun:
        raise ConfigError(f"--resume: {sweep_dir} holds no sweep to restore")
    if not resume and restorable:
        raise ConfigError(f"{sweep_dir} already holds a sweep: resume it with --resume, or change name:")
    if resume:
        _check_unchanged(sweep_dir / "sweep.yaml", path)
        if not restorable:
            log.info("%s stopped before its first trial: starting it afresh", sweep_dir)
    record = not resume  # sweep.yaml: written by a new sweep, kept by a resumed one (checked unchanged above)
    resume = restorable
    cpus = max(1, int(cfg.max_concurrent * cfg.resources_per_trial.get("CPU", 1.0) + 0.999))
    owns = connect(cfg.address, num_cpus=cpus)
    lock = FolderLock(sweep_dir, why="two sweeps would run its trials twice")
    try:
        _check_resources(ray, cfg)
        lock.__enter__()  # one driver per sweep folder (released by the kernel if this one is killed)
    except (ConfigError, RunDirectoryError):
        if owns:
            ray.shutdown()
        raise
    try:
        return _sweep(ray, tune, cfg, base, path, sweep_dir, state, resume=resume, record=record, owns=owns)
    finally:
        lock.__exit__()


def _sweep(ray: ModuleType, tune: ModuleType, cfg: SweepConfig, base: Path, path: Path, sweep_dir: Path, state: Path, *,
           resume: bool, record: bool, owns: bool) -> Path:
    """The sweep itself, connected and holding its folder's lock."""
    (sweep_dir / "runs").mkdir(parents=True, exist_ok=True)
    if record:  # the record of what was swept: written once, never replaced by a resume
        atomic_write(sweep_dir / "sweep.yaml", path.read_text(encoding="utf-8"))
    try:
        resources = {k.lower() if k in ("CPU", "GPU") else k: v for k, v in cfg.resources_per_trial.items()}
        trainable = tune.with_resources(
            tune.with_parameters(run_trial, base=str(base), runs=str(sweep_dir / "runs"), cwd=os.getcwd()),
            resources)
        if resume:
            tuner = tune.Tuner.restore(str(state), trainable=trainable, resume_unfinished=True, resume_errored=True)
        else:
            tuner = tune.Tuner(trainable, param_space=param_space(cfg), tune_config=_tune_config(cfg),
                               run_config=tune.RunConfig(name="tune", storage_path=str(sweep_dir), verbose=1))
        grid, interrupted = _fit(tuner)
        rows = _rows(grid, cfg, interrupted=interrupted)
    finally:
        if owns:
            ray.shutdown()
    _write_results(sweep_dir, rows, cfg)
    if interrupted:
        raise SweepInterrupted(path, sweep_dir)
    return sweep_dir


def _fit(tuner: Tuner) -> tuple[ResultGrid, bool]:
    """``tuner.fit()`` and whether Ctrl-C (or SIGUSR1) ended it. Tune catches the first Ctrl-C itself, stops and
    returns quietly; its handler puts back the one it replaced when it fires, so finding ours back in place says
    it fired (and unfinished trials say so too). Our handler is back in place either way afterwards."""
    import signal
    import threading

    ours = signal.getsignal(signal.SIGINT)
    catches = threading.current_thread() is threading.main_thread() and not int(
        os.getenv("TUNE_DISABLE_SIGINT_HANDLER", "0") or 0)
    grid = tuner.fit()
    fired = catches and signal.getsignal(signal.SIGINT) is ours
    if catches:
        signal.signal(signal.SIGINT, ours)
    return grid, fired or grid.num_terminated + grid.num_errors < len(grid)


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: its results so far are written; carries what the resume command needs."""

    def __init__(self, path: Path, sweep_dir: Path) -> None:
        super().__init__(str(sweep_dir))
        self.path, self.sweep_dir = path, sweep_dir


def _check_unchanged(stored: Path, path: Path) -> None:
    """A restored sweep must be the sweep that was started: refuse an edited file, naming the keys."""
    import yaml

    from hwnas.experiments.rundir import diff_configs

    try:
        before = yaml.safe_load(stored.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{stored}: cannot read the sweep as it was started ({exc})") from None
    now = yaml.safe_load(path.read_text(encoding="utf-8"))
    diffs = diff_configs(before, now)
    if diffs:
        raise ConfigError(f"{path} differs from the sweep it resumes ({stored}) at {', '.join(diffs[:8])}; resume "
                          "with the file as it was, or start a new sweep under another name:")


def _check_resources(ray: ModuleType, cfg: SweepConfig) -> None:
    """Refuse a sweep whose trials ask for resources no live node offers (Tune would wait for them forever)."""
    from hwnas.cluster import capacity, offered_resources

    nodes = ray.nodes()
    if capacity(nodes, dict(cfg.resources_per_trial)) == 0:
        have = ray.cluster_resources()
        shown = ", ".join(f"{k} {have[k]:g}" for k in offered_resources(nodes) if k in have)
        raise ConfigError(f"resources_per_trial {dict(cfg.resources_per_trial)}: no node of the cluster offers "
                          f"them (it has {shown or 'nothing'}); a trial would wait forever")


def _tune_config(cfg: SweepConfig) -> TuneConfig:
    from ray import tune

    search_alg = None
    if cfg.search.name == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        search_alg = OptunaSearch(seed=cfg.search.seed)
    scheduler = None
    if cfg.scheduler.name == "asha":
        from ray.tune.schedulers import ASHAScheduler

        scheduler = ASHAScheduler(time_attr="trials", grace_period=cfg.scheduler.grace_period,
                                  reduction_factor=cfg.scheduler.reduction_factor, max_t=10**9)
    return tune.TuneConfig(metric=cfg.metric, mode="max", num_samples=cfg.search.num_samples,
                           max_concurrent_trials=cfg.max_concurrent, search_alg=search_alg, scheduler=scheduler)


def _rows(grid: ResultGrid, cfg: SweepConfig, *, interrupted: bool = False) -> list[dict[str, object]]:
    rows: list[tuple[float, dict[str, object]]] = []  # (sort key: the hypervolume, highest first; the row)
    for i in range(len(grid)):  # ResultGrid is indexed, not iterable, to mypy (iterating it indexes it too)
        result = grid[i]
        metrics = dict(result.metrics or {})
        trial_id = metrics.get("trial_id") or Path(result.path).name
        hypervolume = metrics.get("hypervolume")
        rows.append((-(hypervolume or 0.0),
                     {"trial": trial_id, **{k: (result.config or {}).get(k) for k in cfg.params},
                      "hypervolume": hypervolume, "front_size": metrics.get("front_size"),
                      "trials": metrics.get("trials"),
                      "status": "error" if result.error else
                      ("done" if metrics.get("run_finished") else "interrupted" if interrupted else "stopped early")}))
    return [row for _, row in sorted(rows, key=lambda r: r[0])]


def _write_results(sweep_dir: Path, rows: list[dict[str, object]], cfg: SweepConfig) -> None:
    """results.csv / results.json, and fronts.png: every trial's front (its first two objectives) on one figure."""
    atomic_write(sweep_dir / "results.json", json.dumps(rows, indent=2, default=str) + "\n")
    if rows:
        tmp = sweep_dir / "results.csv.part"
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        tmp.replace(sweep_dir / "results.csv")
    _plot_fronts(sweep_dir, rows, cfg)


def _plot_fronts(sweep_dir: Path, rows: list[dict[str, object]], cfg: SweepConfig) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    names: list[str] = []
    for row in rows:
        pareto = sweep_dir / "runs" / str(row["trial"]) / "pareto.json"
        if not pareto.is_file():
            continue
        data = json.loads(pareto.read_text())
        objectives = data.get("objectives") or []
        front = data.get("front") or []
        if len(objectives) < 2 or not front:
            continue
        (a, b) = (o["metric"] for o in objectives[:2])
        names = [a, b]
        pts = sorted((m["metrics"].get(b), m["metrics"].get(a)) for m in front)
        label = ", ".join(f"{k.split('.')[-1]}={row[k]}" for k in cfg.params)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=4, label=f"{label} (hv {row['hypervolume']:.3g})")
    if names:
        ax.set_xlabel(names[1])
        ax.set_ylabel(names[0])
        ax.legend(fontsize=7)
    ax.set_title(f"sweep {cfg.name}: the front of every trial")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(sweep_dir / "fronts.png", dpi=120)
    plt.close(fig)


def results_table(sweep_dir: Path) -> Table:
    """A rich table of a finished sweep's results.json."""
    from rich.table import Table

    rows = json.loads((sweep_dir / "results.json").read_text())
    table = Table(title=f"sweep {sweep_dir.name}: {len(rows)} trials (best first)")
    for col in (rows[0] if rows else {}):
        table.add_column(col)
    for row in rows:
        table.add_row(*[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()])
    return table
