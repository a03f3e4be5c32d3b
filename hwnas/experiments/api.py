"""``run_experiment``: file -> run directory -> search -> front, plot and exported models."""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from hwnas.errors import ConfigError, RunDirectoryError
from hwnas.experiments.callbacks import Callbacks
from hwnas.experiments.config import Experiment, ExperimentConfig, build, parse_config
from hwnas.experiments.config.yaml_io import LoadedYaml, apply_override, load_yaml
from hwnas.experiments.journal import Journal, read_trials
from hwnas.experiments.report import drawer as drawers
from hwnas.experiments.report.front import front_plot, write_plot
from hwnas.experiments.report.summary import (
    SUMMARY_JSON,
    RunSummary,
    SearchFacts,
    read_summary,
    summarize,
    write_pareto,
    write_summary,
)
from hwnas.experiments.rundir import (
    CONFIG,
    COST_BUDGET,
    EXTENDABLE,
    JOURNAL,
    LOCK,
    RunLock,
    check_unchanged,
    diff_configs,
    extendable,
    extension_of,
    fresh_run_dir,
    note_imports,
    write_config,
    write_env,
    write_extension,
)
from hwnas.experiments.runner import Runner, RunResult
from hwnas.experiments.runs import load_run as load_run  # re-exported: the Python API reads runs too

if TYPE_CHECKING:
    from hwnas.experiments.progress import RunProgress
    from hwnas.objectives import Trial

log = logging.getLogger(__name__)

#: An experiment as the Python API takes it: a YAML file, a dict of the same keys, or the typed model.
ConfigSource = str | Path | Mapping[str, Any] | ExperimentConfig

#: Where a problem in a config given as a dict (or a model) is said to be: the key path follows it.
DICT_SOURCE = "config"


def load_source(source: ConfigSource, overrides: Sequence[str] = ()) -> LoadedYaml:
    """An experiment given as a file path, a dict or an :class:`ExperimentConfig`, as the loaded document that
    :func:`~hwnas.experiments.config.parse_config` validates: the same validation and the same located errors
    for all three (a dict's or a model's problems are located by their key path, ``config: budget.trials: ...``,
    where a file's give ``file:line``). ``overrides`` (``key.sub=value``) apply to each.

    Raises:
        ConfigError: What the file's loading refuses, or a source that is none of the three.
    """
    if isinstance(source, (str, Path)):
        return load_yaml(source, overrides)
    if isinstance(source, ExperimentConfig):
        data: Any = source.model_dump(mode="python")
        label = f"{DICT_SOURCE} ({type(source).__name__})"
    elif isinstance(source, BaseModel):
        raise ConfigError(f"a {type(source).__name__} is not an experiment: give an ExperimentConfig, a dict or a "
                          "file path")
    elif isinstance(source, Mapping):
        data = copy.deepcopy(dict(source))
        label = DICT_SOURCE
    else:
        raise ConfigError(f"an experiment is a file path, a dict or an ExperimentConfig, not a "
                          f"{type(source).__name__}")
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError(f"{label}: keys are strings, not {bad[0]!r}")
    set_by = {apply_override(data, item): item for item in overrides}
    return LoadedYaml(data, label, {}, set_by)


def _set_keys(overrides: Sequence[str]) -> set[str]:
    """The keys the overrides set (``key.sub=value`` -> ``key.sub``)."""
    return {item.split("=", 1)[0].strip() for item in overrides}


def _for_resume(stored: dict[str, Any], loaded: LoadedYaml, overrides: Sequence[str]) -> None:
    """A resume's overrides on the run's own config: a multi-fidelity run is extended by its cost budget (``--set
    multi_fidelity.budget=X``), and its ``budget.trials`` then follows (taken out here, so that it is derived again
    from the new cost budget); ``--set budget.trials=N`` alone is refused there, naming the key to raise instead.

    Raises:
        ConfigError: ``budget.trials`` set on a multi-fidelity run without its cost budget.
    """
    if extendable(stored) != COST_BUDGET:
        return
    keys = _set_keys(overrides)
    if EXTENDABLE in keys and COST_BUDGET not in keys:
        mf, trials = stored["multi_fidelity"], stored["budget"]["trials"]
        raise ConfigError(f"--set {EXTENDABLE}: a multi-fidelity run's trials follow from its {COST_BUDGET} "
                          f"({mf['budget']:g} {mf.get('unit', 'epochs')}: {trials} trials); extend it with --set "
                          f"{COST_BUDGET}=X (Python: optimize(cost_budget=X))")
    if COST_BUDGET in keys and EXTENDABLE not in keys and isinstance(loaded.data.get("budget"), dict):
        loaded.data["budget"].pop("trials", None)  # derived again from the new cost budget


def _latest_run_dir(root: Path, name: str) -> Path | None:
    found = [p for p in [root / name, *root.glob(f"{name}-*")] if (p / CONFIG).is_file()]
    suffix = lambda p: int(p.name.rsplit("-", 1)[1]) if p.name != name and p.name.rsplit("-", 1)[1].isdigit() else 1  # noqa: E731
    found = [p for p in found if p.name == name or p.name.rsplit("-", 1)[1].isdigit()]
    return max(found, key=suffix) if found else None


def prepare(path: ConfigSource | None = None, *, overrides: Sequence[str] = (), resume: str | Path | None = None,
            run_dir: str | Path | None = None) -> tuple[Experiment, Path, bool]:
    """Decide the run directory and build the experiment; writes nothing.

    Args:
        path: The experiment: a file, a dict or an :class:`ExperimentConfig` (not needed when ``resume`` names a
            run directory).
        overrides: ``key.sub=value`` strings. On a resume only ``budget.trials`` may change, and only grow: the
            run is extended (see :func:`run_experiment`); a multi-fidelity run's ``multi_fidelity.budget`` instead,
            its ``budget.trials`` following.
        resume: A run directory, or an experiment file whose latest run directory is resumed.
        run_dir: Where a new run goes (default ``<output.root>/<name>``, numbered if it exists).

    Returns:
        (experiment, run directory, whether it resumes).
    """
    if resume is not None:
        target = Path(resume)
        if target.is_dir():
            if not (target / CONFIG).is_file():
                raise RunDirectoryError(f"{target} is not a run directory (no {CONFIG})")
            check_unchanged(target)
            stored = load_yaml(target / CONFIG).data
            key = extendable(stored)
            loaded = load_yaml(target / CONFIG, overrides)  # --set budget.trials=N applies to the run's own config
            _for_resume(stored, loaded, overrides)
            changed = [d for d in diff_configs(stored, loaded.data) if d not in (key, EXTENDABLE)]
            if changed:
                raise ConfigError(f"an override (--set, or overrides= in Python) cannot change a run that is resumed, "
                                  f"except to raise {key} (it changes {', '.join(changed[:8])}); start a new "
                                  "run instead")
            directory = target
            if path is not None:  # nas run FILE --resume RUN: FILE must be what RUN was started with
                given = build(parse_config(load_source(path, overrides)), artifacts_dir=directory).resolved()
                diffs = diff_configs(loaded.data, given)
                if diffs:
                    raise RunDirectoryError(f"{path} differs from the config of {directory} at {', '.join(diffs[:8])}; "
                                            f"resume {directory} alone (nas run --resume {directory}; Python: "
                                            f"hwnas.load_run({str(directory)!r})), or start a new run with {path}")
        elif target.is_file():
            loaded = load_source(target, overrides)
            cfg0 = parse_config(loaded)
            found = _latest_run_dir(Path(cfg0.output.root), cfg0.name)
            if found is None:
                raise RunDirectoryError(f"nothing to resume: no run of {cfg0.name!r} under {cfg0.output.root}/")
            directory = found
            check_unchanged(directory)
        else:
            raise RunDirectoryError(f"resume {target} (--resume, or resume= in Python): no such run directory or "
                                    "experiment file")
        cfg = parse_config(loaded)
        experiment = build(cfg, loaded=loaded, artifacts_dir=directory)
        old = load_yaml(directory / CONFIG).data
        key = extendable(old)
        diffs = diff_configs(old, experiment.resolved())
        v = "X" if key == COST_BUDGET else "N"
        if diffs and not (key in _set_keys(overrides) and set(diffs) <= {key, EXTENDABLE}):
            raise RunDirectoryError(f"{directory / CONFIG} differs from this config at {', '.join(diffs[:8])}; "
                                    "resume with the same config, or start a new run (a resume may only raise "
                                    f"the budget: --set {key}={v}, or overrides=[\"{key}={v}\"] in Python)")
        extension_of(old, experiment.resolved(), directory)  # refuses a budget that shrinks
        return experiment, directory, True
    if path is None:
        raise ConfigError("an experiment file is needed (or --resume RUN_DIR)")
    loaded = load_source(path, overrides)
    cfg = parse_config(loaded)
    if run_dir is not None:
        directory = Path(run_dir)
        if directory.exists() and not directory.is_dir():
            raise RunDirectoryError(f"run directory {directory} (--run-dir, or run_dir= in Python): is a file; a run "
                                    "directory is a folder")
        # a start killed before it wrote its config leaves only its lock (and perhaps a temporary file): empty
        leftovers = [p for p in directory.iterdir() if not (p.name == LOCK or (p.name.startswith(".")
                                                                              and p.name.endswith(".tmp")))] \
            if directory.is_dir() else []
        if leftovers:
            if (directory / CONFIG).is_file():
                raise RunDirectoryError(f"{directory} holds a run already; use --resume {directory} to continue it "
                                    f"(Python: hwnas.load_run({str(directory)!r}).optimize())")
            raise RunDirectoryError(f"{directory} exists and holds other files (not a run); choose an empty or new "
                                    "run directory (--run-dir, or run_dir= in Python)")
    else:
        directory = fresh_run_dir(Path(cfg.output.root), cfg.name)
    experiment = build(cfg, loaded=loaded, artifacts_dir=directory)
    return experiment, directory, False


def make_run_dir(directory: Path) -> None:
    """Create a run directory (and its parents), one line naming what is in the way when it cannot be."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise RunDirectoryError(f"{directory}: cannot be created as a run directory (a file is in the way)") from None
    except OSError as exc:
        raise RunDirectoryError(f"{directory}: cannot be created as a run directory ({exc.strerror})") from None


def run_experiment(path: ConfigSource | None = None, *, overrides: Sequence[str] = (),
                   resume: str | Path | None = None, run_dir: str | Path | None = None,
                   progress: RunProgress | None = None,
                   callbacks: Sequence[object] | Callbacks = ()) -> RunResult:
    """Run (or resume) an experiment end to end; returns the trials, the front and the output paths.

    Args:
        path: The experiment: a YAML file, a dict of the same keys, or an :class:`ExperimentConfig` (validated
            alike; a problem is located by ``file:line`` or, for a dict, by its key path).
        overrides: ``key.sub=value`` strings, as ``nas run --set``.
        resume: A run directory (or an experiment file, for its latest run) to continue from its journal. With
            ``overrides=["budget.trials=N"]`` (N at least the run's budget) the run is extended: its config.yaml
            takes the new budget (run.json keeps the history), nothing journaled is evaluated again, and the
            trials are those a run started with N trials would have had (:mod:`hwnas.experiments.study` says
            exactly when). A multi-fidelity run is extended by its cost budget instead,
            ``overrides=["multi_fidelity.budget=X"]`` (``budget.trials`` follows). Any other change is refused,
            naming the keys.
        run_dir: Where a new run goes (default ``<output.root>/<name>``, numbered if it exists).
        progress: A progress display (:class:`hwnas.experiments.progress.SearchProgress`), or None.
        callbacks: Per-trial callables and callback objects (:mod:`hwnas.experiments.callbacks`), or a
            :class:`Callbacks`. One that raises stops the run with a :class:`CallbackError` naming it.
    """
    experiment, directory, resuming = prepare(path, overrides=overrides, resume=resume, run_dir=run_dir)
    # pareto.png's drawing process, started now to import matplotlib on another core while the run searches
    drawer = drawers.for_run(plots=len(experiment.objectives) >= 2)
    try:
        return _run(experiment, directory, resuming, progress=progress, callbacks=callbacks, drawer=drawer)
    finally:
        if drawer is not None:
            drawer.close()


def _run(experiment: Experiment, directory: Path, resuming: bool, *, progress: RunProgress | None,
         callbacks: Sequence[object] | Callbacks, drawer: drawers.PlotDrawer | None) -> RunResult:
    """:func:`run_experiment` once its config is read: check, search, write the outputs."""
    checked_s = None
    if not resuming:  # a new run's inputs are checked before its folder exists: a bad table leaves no folder behind
        t0 = time.perf_counter()
        experiment.check_inputs()
        checked_s = time.perf_counter() - t0
    hooks = callbacks if isinstance(callbacks, Callbacks) else Callbacks(callbacks)
    make_run_dir(directory)
    with RunLock(directory):
        if resuming:
            Journal(directory / JOURNAL).read()  # a corrupt journal is refused before anything is written
            resolved = experiment.resolved()
            extension = extension_of(load_yaml(directory / CONFIG).data, resolved, directory)
            if extension is not None:  # under the lock: the budget grows, recorded in run.json
                write_extension(directory, resolved, extension)
                log.info("%s: %s", directory, extension.describe())
        else:
            write_config(directory, experiment.resolved())
        write_env(directory)
        log.info("%s run directory %s", "resuming" if resuming else "new", directory)
        try:
            result = Runner(experiment=experiment, run_dir=directory, progress=progress, checked_s=checked_s,
                            callbacks=hooks).run()
        except KeyboardInterrupt as exc:
            hooks.error(exc)
            raise RunInterrupted(directory) from None
        except Exception as exc:
            hooks.error(exc)
            raise
        finally:
            note_imports(directory)  # env.json: what the search imported (torch at a model's first build)
        result.objectives = experiment.objectives
        result.constraints = experiment.constraints
        if resuming and result.evaluated == 0 and _readable(directory / SUMMARY_JSON):
            # a finished run resumed: nothing new to write, and what it wrote (front, plot, models) stays as it is
            result.summary = read_summary(directory, experiment, result.trials)
            log.info("%s was finished already: nothing evaluated, its outputs are left as they are", directory)
            hooks.end(result)
            return result
        # a new run, one that evaluated more, or a finished one whose summary.json is torn: the outputs are written
        result.summary = finish(directory, experiment, result.trials, search=SearchFacts(
            setup_s=result.setup_s, wall_s=result.wall_s, journal_evaluation_s=sum(t.cost_s for t in result.trials),
            evaluated=result.evaluated, reused=result.reused, stopped_early=result.stopped_early), drawer=drawer)
        note_imports(directory)  # and what the outputs imported (matplotlib if the plot was drawn here, torch: export)
    hooks.end(result)
    return result


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: carries the run directory, for the message that says how to resume it."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(str(run_dir))
        self.run_dir = run_dir


def _readable(path: Path) -> bool:
    """Whether ``path`` holds a JSON object."""
    try:
        return isinstance(json.loads(path.read_text()), dict)
    except (OSError, ValueError):
        return False


def finish(directory: Path, experiment: Experiment, trials: Sequence[Trial] | None = None, *,
           search: SearchFacts | None = None, drawer: drawers.PlotDrawer | None = None) -> RunSummary:
    """Summarise the run (:func:`hwnas.experiments.report.summary.summarize`) and write it: pareto.csv/json and
    pareto.png (drawn by ``drawer``'s process where one was started), the front exported when the config asks for
    it, then summary.json. Returns the summary."""
    from hwnas.experiments.export import export_front

    trials = list(trials) if trials is not None else read_trials(directory)
    summary = summarize(experiment, trials, search=search)
    if summary.hypervolume is None:
        missing = summary.reference.missing()
        log.warning("no hypervolume: %s %s no reference point (set objectives[i].reference in the experiment, "
                    "or bound the metric with a constraint)", ", ".join(missing),
                    "has" if len(missing) == 1 else "have")
    front = list(summary.front)
    shown = summary.trials.total if summary.multi_fidelity is not None else len(trials)  # candidates
    plot = front_plot(trials, front, experiment.objectives, experiment.constraints,
                      title=f"{experiment.config.name}: {len(front)} on the front, {shown} evaluated")
    write_pareto(directory, summary)
    if plot is not None:
        write_plot(directory / "pareto.png", plot, drawer)
    if experiment.config.export.enabled and front:
        # the run owns its models/ folder (a resume re-exports what it wrote itself), and a search whose
        # evaluators keep no weights exports untrained models, as their cards say: see export_front
        ex = experiment.config.export
        cards = export_front(directory, experiment, front, opset=ex.opset, force=True, random_init=True,
                             formats=ex.formats, dynamic_batch=ex.dynamic_batch, simplify=ex.simplify,
                             measure=ex.measure)
        summary = summary.with_export(cards)
    write_summary(directory, summary)
    return summary
