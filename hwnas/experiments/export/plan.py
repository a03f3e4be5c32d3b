"""What an export of a run directory is asked, checked before anything is written: :func:`plan_export` (what
``nas export`` and the Python API call), then :meth:`ExportPlan.run`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hwnas.errors import HwnasError
from hwnas.experiments.config import Experiment
from hwnas.experiments.export.bundle import check_export, export_front
from hwnas.experiments.export.card import ModelCard
from hwnas.experiments.export.formats import FORMATS, parse_formats
from hwnas.experiments.export.select import select_models
from hwnas.latency.measure import MeasureProtocol
from hwnas.objectives import Trial

#: The lowest ONNX opset an export writes.
MIN_OPSET = 13


@dataclass(frozen=True)
class ExportPlan:
    """An export every check has passed: the models chosen from a run, where and how they are written.

    Args:
        run_dir: The run directory (only read, but for the record of an export elsewhere in its
            ``models/export.json``: :func:`~hwnas.experiments.export.bundle.record_export`).
        experiment: Its experiment.
        models: The trials to export.
        selection: One line saying how they were chosen.
        out_dir: Where the files go.
        formats: The formats asked for (``onnx`` is always written).
        opset: The ONNX opset.
        protocol: How the exported files are timed.
        force, random_init, train, dynamic_batch, simplify, measure, with_preprocessing, bundle: As
            :func:`export_front` takes them.
    """

    run_dir: Path
    experiment: Experiment
    models: tuple[Trial, ...]
    selection: str
    out_dir: Path
    formats: tuple[str, ...]
    opset: int
    protocol: MeasureProtocol
    force: bool = False
    random_init: bool = False
    train: bool = False
    dynamic_batch: bool = False
    simplify: bool = True
    measure: bool = True
    with_preprocessing: bool = False
    bundle: bool = False

    def run(self, on_model: Callable[[int, int, str], None] | None = None,
            on_note: Callable[[str], None] | None = None) -> list[ModelCard]:
        """Write the export (:func:`export_front`); returns the cards. ``on_model(k, n, what)`` is told what is
        done; ``on_note(line)`` why an export elsewhere could not be recorded in the run (default: a logged
        warning)."""
        return export_front(self.run_dir, self.experiment, self.models, out_dir=self.out_dir, opset=self.opset,
                            force=self.force, random_init=self.random_init, train=self.train, formats=self.formats,
                            dynamic_batch=self.dynamic_batch, simplify=self.simplify, measure=self.measure,
                            protocol=self.protocol, selection=self.selection,
                            with_preprocessing=self.with_preprocessing, bundle=self.bundle, on_model=on_model,
                            on_note=on_note)


def plan_export(run_dir: str | Path, *, out: str | Path | None = None, formats: str | Sequence[str] = "all",
                device: str | None = None, top_k: int | None = None, by: str | None = None,
                archs: Sequence[str] = (), opset: int | None = None, force: bool = False, random_init: bool = False,
                train: bool = False, dynamic_batch: bool = False, simplify: bool = True, measure: bool = True,
                repeats: int = 50, rounds: int = 3, with_preprocessing: bool = False,
                bundle: bool = False) -> ExportPlan:
    """Check an export of ``run_dir`` before anything is written, and say what it will write.

    Args:
        run_dir: A run directory (only read here).
        out: The output folder (default ``RUN_DIR/models``).
        formats: Comma-separated formats, ``all``, or a list (see :data:`FORMATS`).
        device, top_k, by, archs: Which models (see :func:`select_models`; default: the Pareto front).
        opset: The ONNX opset (default: the experiment's ``export.opset``).
        force, random_init, train: See :func:`check_export`.
        dynamic_batch, simplify, measure, with_preprocessing, bundle: See :func:`export_front`.
        repeats, rounds: Timed runs per file, context and round; timing rounds.

    Raises:
        HwnasError: Options that do not fit together, an unknown format or an opset this host cannot write.
        RunDirectoryError, OutputExists: What :func:`select_models` and :func:`check_export` refuse (an
            incomplete run directory, a model not in the run, a file in the way, missing weights ...).
    """
    from hwnas.experiments.rundir import check_run_dir
    from hwnas.experiments.runs import load_run

    try:
        chosen_formats = parse_formats(formats)
    except ValueError as exc:
        raise HwnasError(f"--formats {formats}: {exc}") from None
    try:
        protocol = MeasureProtocol(warmup=20, repeats=repeats, min_time_s=0.2, rounds=rounds)
    except ValueError as exc:
        raise HwnasError(f"--repeats {repeats} / --rounds {rounds}: {exc}") from None
    if top_k is not None and not by:
        raise HwnasError("--top-k needs --by METRIC (an objective of the run)")
    if by and top_k is None:
        raise HwnasError("--by ranks the models for --top-k K: give both (without them the whole front is exported)")
    if opset is not None:
        from hwnas.latency.onnx_export import max_export_opset

        newest, why = max_export_opset()
        if not MIN_OPSET <= opset <= newest:
            raise HwnasError(f"--opset {opset}: an ONNX opset from {MIN_OPSET} to {newest} ({why} writes at most "
                             f"{newest})")
    run_dir = Path(run_dir)
    check_run_dir(run_dir)
    experiment, trials = load_run(run_dir)
    chosen, selection = select_models(experiment, trials, device=device, top_k=top_k, by=by, archs=archs)
    out_dir = Path(out) if out else run_dir / "models"
    check_export(run_dir, chosen, out_dir, force=force, random_init=random_init,
                 formats=tuple(f for f in FORMATS if f in {"onnx", *chosen_formats}), train=train,
                 with_preprocessing=with_preprocessing or bundle, bundle=bundle,
                 has_dataset=experiment.config.dataset is not None)
    return ExportPlan(run_dir=run_dir, experiment=experiment, models=tuple(chosen), selection=selection,
                      out_dir=out_dir, formats=chosen_formats, opset=opset or experiment.config.export.opset,
                      protocol=protocol, force=force, random_init=random_init, train=train,
                      dynamic_batch=dynamic_batch, simplify=simplify, measure=measure,
                      with_preprocessing=with_preprocessing or bundle, bundle=bundle)
