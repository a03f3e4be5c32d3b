"""``run_experiment``: file -> run directory -> search -> front, plot and exported models."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hwnas.errors import ConfigError, RunDirectoryError
from hwnas.experiments.config import Experiment, build, parse_config
from hwnas.experiments.config.yaml_io import load_yaml
from hwnas.experiments.journal import Journal, read_trials
from hwnas.experiments.report.front import FrontDrawer, plot_front
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
    JOURNAL,
    LOCK,
    RunLock,
    check_unchanged,
    diff_configs,
    fresh_run_dir,
    note_imports,
    write_config,
    write_env,
)
from hwnas.experiments.runner import Runner, RunResult
from hwnas.experiments.runs import load_run as load_run  # re-exported: the Python API reads runs too

log = logging.getLogger(__name__)


def _latest_run_dir(root: Path, name: str) -> Path | None:
    found = [p for p in [root / name, *root.glob(f"{name}-*")] if (p / CONFIG).is_file()]
    suffix = lambda p: int(p.name.rsplit("-", 1)[1]) if p.name != name and p.name.rsplit("-", 1)[1].isdigit() else 1  # noqa: E731
    found = [p for p in found if p.name == name or p.name.rsplit("-", 1)[1].isdigit()]
    return max(found, key=suffix) if found else None


def prepare(path: str | Path | None = None, *, overrides: Sequence[str] = (), resume: str | Path | None = None,
            run_dir: str | Path | None = None) -> tuple[Experiment, Path, bool]:
    """Decide the run directory and build the experiment; writes nothing.

    Args:
        path: The experiment file (not needed when ``resume`` names a run directory).
        overrides: ``key.sub=value`` strings.
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
            if overrides:
                raise ConfigError("--set cannot change a run that is resumed; start a new run instead")
            check_unchanged(target)
            loaded = load_yaml(target / CONFIG)
            directory = target
            if path is not None:  # nas run FILE --resume RUN: FILE must be what RUN was started with
                given = build(parse_config(load_yaml(path)), artifacts_dir=directory).resolved()
                diffs = diff_configs(loaded.data, given)
                if diffs:
                    raise RunDirectoryError(f"{path} differs from the config of {directory} at {', '.join(diffs[:8])}; "
                                            f"resume with --resume {directory} alone, or start a new run with {path}")
        elif target.is_file():
            loaded = load_yaml(target, overrides)
            cfg0 = parse_config(loaded)
            found = _latest_run_dir(Path(cfg0.output.root), cfg0.name)
            if found is None:
                raise RunDirectoryError(f"nothing to resume: no run of {cfg0.name!r} under {cfg0.output.root}/")
            directory = found
            check_unchanged(directory)
        else:
            raise RunDirectoryError(f"--resume {target}: no such run directory or experiment file")
        cfg = parse_config(loaded)
        experiment = build(cfg, loaded=loaded, artifacts_dir=directory)
        old = load_yaml(directory / CONFIG).data
        diffs = diff_configs(old, experiment.resolved())
        if diffs:
            raise RunDirectoryError(f"{directory / CONFIG} differs from this config at {', '.join(diffs[:8])}; "
                                    "resume with the same config, or start a new run")
        return experiment, directory, True
    if path is None:
        raise ConfigError("an experiment file is needed (or --resume RUN_DIR)")
    loaded = load_yaml(path, overrides)
    cfg = parse_config(loaded)
    if run_dir is not None:
        directory = Path(run_dir)
        if directory.exists() and not directory.is_dir():
            raise RunDirectoryError(f"--run-dir {directory}: is a file; a run directory is a folder")
        # a start killed before it wrote its config leaves only its lock (and perhaps a temporary file): empty
        leftovers = [p for p in directory.iterdir() if not (p.name == LOCK or (p.name.startswith(".")
                                                                              and p.name.endswith(".tmp")))] \
            if directory.is_dir() else []
        if leftovers:
            if (directory / CONFIG).is_file():
                raise RunDirectoryError(f"{directory} holds a run already; use --resume {directory} to continue it")
            raise RunDirectoryError(f"{directory} exists and holds other files (not a run); choose an empty or new "
                                    "--run-dir")
    else:
        directory = fresh_run_dir(Path(cfg.output.root), cfg.name)
    experiment = build(cfg, loaded=loaded, artifacts_dir=directory)
    return experiment, directory, False


def run_experiment(path: str | Path | None = None, *, overrides: Sequence[str] = (), resume: str | Path | None = None,
                   run_dir: str | Path | None = None, progress: Any = None) -> RunResult:
    """Run (or resume) an experiment end to end; returns the trials, the front and the output paths."""
    experiment, directory, resuming = prepare(path, overrides=overrides, resume=resume, run_dir=run_dir)
    # pareto.png's matplotlib is imported by another process while this one checks, searches and summarises
    with FrontDrawer() if len(experiment.objectives) >= 2 else contextlib.nullcontext() as drawer:
        return _run(experiment, directory, resuming, progress, drawer)


def _run(experiment: Experiment, directory: Path, resuming: bool, progress: Any,
         drawer: FrontDrawer | None) -> RunResult:
    checked_s = None
    if not resuming:  # a new run's inputs are checked before its folder exists: a bad table leaves no folder behind
        t0 = time.perf_counter()
        experiment.check_inputs()
        checked_s = time.perf_counter() - t0
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise RunDirectoryError(f"{directory}: cannot be created as a run directory (a file is in the way)") from None
    except OSError as exc:
        raise RunDirectoryError(f"{directory}: cannot be created as a run directory ({exc.strerror})") from None
    with RunLock(directory):
        if resuming:
            Journal(directory / JOURNAL).read()  # a corrupt journal is refused before anything is written
        else:
            write_config(directory, experiment.resolved())
        write_env(directory)
        log.info("%s run directory %s", "resuming" if resuming else "new", directory)
        try:
            result = Runner(experiment=experiment, run_dir=directory, progress=progress, checked_s=checked_s).run()
        except KeyboardInterrupt:
            raise RunInterrupted(directory) from None
        finally:
            note_imports(directory)  # env.json: what the search imported (torch at a model's first build)
        result.objectives = experiment.objectives
        result.constraints = experiment.constraints
        if resuming and result.evaluated == 0 and _readable(directory / SUMMARY_JSON):
            # a finished run resumed: nothing new to write, and what it wrote (front, plot, models) stays as it is
            result.summary = read_summary(directory, experiment, result.trials)
            log.info("%s was finished already: nothing evaluated, its outputs are left as they are", directory)
            return result
        # a new run, one that evaluated more, or a finished one whose summary.json is torn: the outputs are written
        result.summary = finish(directory, experiment, result.trials, search=SearchFacts(
            setup_s=result.setup_s, wall_s=result.wall_s, journal_evaluation_s=sum(t.cost_s for t in result.trials),
            evaluated=result.evaluated, reused=result.reused, stopped_early=result.stopped_early), drawer=drawer)
        note_imports(directory)  # and what the outputs imported (matplotlib for the plot, torch for an export)
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


def finish(directory: Path, experiment: Experiment, trials: Sequence[Any] | None = None, *,
           search: SearchFacts | None = None, drawer: FrontDrawer | None = None) -> RunSummary:
    """Summarise the run (:func:`hwnas.experiments.report.summary.summarize`) and write it: pareto.csv/json and
    pareto.png (drawn by ``drawer``'s process when given), the front exported when the config asks for it, then
    summary.json. Returns the summary."""
    from hwnas.experiments.export import export_front

    trials = list(trials) if trials is not None else read_trials(directory)
    summary = summarize(experiment, trials, search=search)
    if summary.hypervolume is None:
        missing = summary.reference.missing()
        log.warning("no hypervolume: %s %s no reference point (set objectives[i].reference in the experiment, "
                    "or bound the metric with a constraint)", ", ".join(missing),
                    "has" if len(missing) == 1 else "have")
    front = list(summary.front)
    write_pareto(directory, summary)
    plot_front(directory / "pareto.png", trials, front, experiment.objectives, experiment.constraints,
               title=f"{experiment.config.name}: {len(front)} on the front, {len(trials)} evaluated", drawer=drawer)
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
