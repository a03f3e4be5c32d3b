"""Export of the Pareto-front models (or any chosen trials): ONNX checked against torch, fp16/int8 ONNX, a
torch.export program, a TensorRT engine or its trtexec line, and a card per model with its measured figures."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.errors import OutputExists, RunDirectoryError
from hwnas.experiments.config import Experiment
from hwnas.experiments.export.card import EXPORTS_KEY, INDEX, CardTop1, CardWeights, ModelCard, cards_of
from hwnas.experiments.export.deploy import BUNDLE_SUFFIX, RAW_SUFFIX, calibration_stats, write_bundle
from hwnas.experiments.export.formats import (
    FORMATS,
    SUFFIX,
    onnx_batch_sizes,
    ort_outputs,
    simplify_onnx,
    top1_of,
    torch_outputs,
    write_fp16,
    write_int8,
    write_raw_onnx,
    write_tensorrt,
    write_torch_export,
)
from hwnas.experiments.export.remeasure import (
    RAW_FILE,
    LatencyRow,
    MeasureTarget,
    measure_targets,
    raw_targets,
    remeasure,
)
from hwnas.fileio import atomic_write, refuse_overwrite
from hwnas.latency.measure import MeasureProtocol
from hwnas.objectives import Trial

if TYPE_CHECKING:
    from torch import Tensor, nn

    from hwnas.data.datasets import ImageData
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.training import TrainRecipe

log = logging.getLogger(__name__)


def export_paths(out_dir: Path, front: Sequence[Trial], formats: Sequence[str] = ("onnx",), *,
                 train: bool = False, with_preprocessing: bool = False, bundle: bool = False) -> list[Path]:
    """Every file :func:`export_front` may write for ``front`` into ``out_dir``: per model its card
    ``<arch_id>.json`` and a file per format (``<arch_id>.pt`` with ``train``, ``<arch_id>.raw.onnx`` with
    ``with_preprocessing`` or ``bundle``, ``<arch_id>.bundle.zip`` with ``bundle``), and the index ``export.json``."""
    suffixes = ([SUFFIX[f] for f in formats] + [".json"] + ([".pt"] if train else [])
                + ([RAW_SUFFIX] if with_preprocessing or bundle else []) + ([BUNDLE_SUFFIX] if bundle else []))
    return [out_dir / f"{t.arch.arch_id}{ext}" for t in front for ext in suffixes] + [out_dir / INDEX]


def check_export(run_dir: Path, front: Sequence[Trial], out_dir: Path, *, force: bool = False,
                 random_init: bool = False, formats: Sequence[str] = ("onnx",), train: bool = False,
                 with_preprocessing: bool = False, bundle: bool = False, has_dataset: bool = True) -> None:
    """Refuse an export before anything is written: the checks :func:`export_front` makes first.

    Raises:
        OutputExists: ``out_dir`` (or a folder above it) is a file; an output would be one of a run's own files
            (``--force`` or not); or, unless ``force``, an output exists or ``out_dir`` already holds files this
            export would not write.
        RunDirectoryError: trained weights are missing for some front member and neither ``random_init`` nor
            ``train``; ``with_preprocessing`` or ``bundle`` without a dataset (``has_dataset`` false): the
            preprocessing is the dataset's.
    """
    if (with_preprocessing or bundle) and not has_dataset:
        flag = "--bundle" if bundle else "--with-preprocessing"
        raise RunDirectoryError(f"{flag} needs the experiment's dataset: the preprocessing is the dataset's, and "
                                f"the run's config ({run_dir / 'config.yaml'}) has no dataset section")
    for folder in (out_dir, *out_dir.parents):
        if folder.exists():
            if not folder.is_dir():
                raise OutputExists(f"{folder} is a file, not a folder; the exported models need a folder there "
                                   "(choose another --out)")
            break
    missing = [run_dir / "weights" / f"{t.arch.arch_id}.pt" for t in front]
    missing = [w for w in missing if not w.is_file()]
    if missing and not (random_init or train):
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise RunDirectoryError(f"no trained weights for {len(missing)} of {len(front)} front model(s): "
                                f"{missing[0]}{more} is missing; pass --random-init to export those with their "
                                "seeded (untrained) initialisation, or --train to train them with the "
                                "experiment's recipe")
    ours = export_paths(out_dir, front, formats, train=train, with_preprocessing=with_preprocessing, bundle=bundle)
    if out_dir.is_dir() and not force:
        mine = {p.name for p in ours}
        others = sorted(p.name for p in out_dir.iterdir() if p.name not in mine)
        if others:
            more = f" and {len(others) - 3} more" if len(others) > 3 else ""
            raise OutputExists(f"{out_dir} already holds other files ({', '.join(others[:3])}{more}); choose an "
                               "empty --out, or pass --force (those files are left as they are)")
    # its own run's models/ folder; never another file of a run
    refuse_overwrite(ours, force=force, own=("models",), own_run=run_dir)


def export_front(run_dir: Path, experiment: Experiment, front: Sequence[Trial], *, out_dir: Path | None = None,
                 opset: int = 17, force: bool = False, random_init: bool = False,
                 formats: Sequence[str] = ("onnx",), dynamic_batch: bool = False, simplify: bool = True,
                 train: bool = False, measure: bool = False, protocol: MeasureProtocol | None = None,
                 selection: str | None = None, with_preprocessing: bool = False, bundle: bool = False,
                 on_model: Callable[[int, int, str], None] | None = None,
                 on_note: Callable[[str], None] | None = None) -> list[ModelCard]:
    """Write every requested format and a card ``<arch_id>.json`` per model, plus the index ``export.json``;
    returns the cards.

    Weights: the ones the run kept (``weights/<arch_id>.pt``: trained by the ``train`` evaluator, or inherited
    from a supernet and BatchNorm-recalibrated; loaded with ``weights_only=True``); with ``train`` every model is
    trained from scratch with the experiment's recipe (kept as ``<arch_id>.pt`` beside it); with
    ``random_init`` a model whose weights are missing gets its seeded initialisation. The card's ``weights``
    says which.

    Checks: the fp32 ONNX file (simplified with onnxslim unless ``simplify`` is false) is run in onnxruntime
    and compared with torch on held-out images (or random input without a dataset); its own top-1 on the
    held-out split is the card's ``top1``. ``formats`` adds ``onnx_fp16``, ``onnx_int8`` (calibrated on the
    training images, its top-1 lost against fp32 measured), ``torch_export`` and ``tensorrt``
    (:mod:`hwnas.experiments.export.formats`). With ``measure`` every file is timed end to end in every context
    this host can measure (the card's ``latency`` list, beside the search's figure and the error).

    Nothing is written unless every check passes (:func:`check_export`, made for all outputs first): an existing
    output, or a foreign file in ``out_dir``, is refused unless ``force``; missing weights are refused unless
    ``random_init`` or ``train``.

    With ``with_preprocessing`` (or ``bundle``) ``<arch_id>.raw.onnx`` takes raw ``uint8`` images and does the
    dataset's preprocessing inside the graph, checked against the Python pipeline on the held-out split (the
    card's ``raw_onnx``); every card records the input contract (``input``) and the batch sizes each file accepts
    (``batch_sizes``). With ``bundle`` each model is also packed into ``<arch_id>.bundle.zip``
    (:func:`hwnas.experiments.export.deploy.write_bundle`: its files, card, calibration statistics and a
    standalone ``predict.py``). A format, or the graph that takes raw images, that fails for one model is recorded
    on its card (``{"error": ...}``) and the export goes on (a model whose raw graph failed gets no bundle:
    ``export.json``'s ``not_bundled`` says why). ``nas export`` passes its flags, defaulting to refusal; the run's
    own export at the end of ``nas run`` (:func:`hwnas.experiments.api.finish`) passes ``force`` and
    ``random_init``: the run owns its ``models/`` folder.

    An export elsewhere than the run's ``models/`` is recorded in the run's ``models/export.json``
    (:func:`record_export`, the only file of the run it changes; the journal, config, weights and ``run.json`` are
    only read); where that cannot be done (a read-only run) ``on_note`` is told why in one line (default: a logged
    warning). An export into ``models/`` keeps that record.
    """
    import torch

    from hwnas.training import build_seeded

    out_dir = out_dir or run_dir / "models"
    formats = tuple(f for f in FORMATS if f in {"onnx", *formats})
    with_preprocessing = with_preprocessing or bundle
    loader = experiment.data_source()
    check_export(run_dir, front, out_dir, force=force, random_init=random_init, formats=formats, train=train,
                 with_preprocessing=with_preprocessing, bundle=bundle, has_dataset=loader is not None)
    space = experiment.space
    recipe = _train_recipe(experiment) if train else None
    if train and loader is None:
        raise RunDirectoryError("--train needs the experiment's dataset: the run's config has no dataset section")
    states = {}
    if not train:
        for trial in front:  # every weights file is read before anything is written: a corrupt one stops here
            kept = run_dir / "weights" / f"{trial.arch.arch_id}.pt"
            if kept.is_file():
                try:
                    states[trial.arch.arch_id] = torch.load(kept, map_location="cpu", weights_only=True)
                except Exception as exc:  # truncated, not a torch file, or holding objects weights_only refuses
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    raise RunDirectoryError(f"{kept}: cannot read the weights ({first[:200]}); delete it and "
                                            "export with --random-init, or retrain") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    source = _weights_source(experiment)
    targets = measure_targets(experiment, formats) if measure else []
    if with_preprocessing:  # <id>.raw.onnx timed beside <id>.onnx, in the same contexts of this host's CPU
        targets += raw_targets(targets)
    protocol = protocol or MeasureProtocol(warmup=20, repeats=50, min_time_s=0.2, rounds=3)
    cards = []
    calibration: dict[str, dict[str, object]] = {}
    for k, trial in enumerate(front):
        arch = trial.arch
        if on_model is not None:
            on_model(k, len(front), arch.arch_id)
        shape = tuple(space.input_shape_of(arch))
        data = loader(shape[-1]) if loader else None
        model = build_seeded(space, arch, experiment.config.seed)
        weights = _weights(model, trial, run_dir, out_dir, states, source, data, recipe, experiment)
        model.eval()
        card = _export_one(model, trial, shape, data, out_dir, formats, opset=opset, dynamic_batch=dynamic_batch,
                           simplify=simplify, with_preprocessing=with_preprocessing)
        if bundle and data is not None:
            calibration[arch.arch_id] = calibration_stats(data, INT8_CALIBRATION_IMAGES, int8="onnx_int8" in formats)
        untrained = weights.kind == "random-init"
        card = replace(card, weights=weights, trained_weights=not untrained,
                       note="exported with its seeded initialisation: no trained weights were kept for it"
                       if untrained else None, weights_source=None if untrained else weights.detail)
        card = replace(card, top1=_top1(card, trial, experiment))
        card.write(out_dir)
        log.info("exported %s (max |onnx - torch| = %.2e)", arch.arch_id, card.max_abs_diff)
        cards.append(card)
    if measure:
        cards = _measure_all(cards, front, out_dir, formats, targets, protocol, space, on_model)
        for card in cards:
            card.write(out_dir)
    bundles: list[str] = []
    not_bundled: dict[str, str] = {}
    for card in cards if bundle else []:
        try:
            bundles.append(write_bundle(card, out_dir, calibration[card.arch_id]).name)
        except ValueError as exc:  # its graph that takes raw images was not written (the card's raw_onnx says why)
            not_bundled[card.arch_id] = f"{exc}: {(card.raw_onnx or {}).get('error', 'not written')}"
    if selection is None:
        selection = f"Pareto front ({', '.join(o.metric for o in experiment.objectives)})"
    created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    index = {"run": str(run_dir), "selection": selection, "formats": list(formats), "dynamic_batch": dynamic_batch,
             "with_preprocessing": with_preprocessing, **({"bundles": bundles} if bundle else {}),
             **({"not_bundled": not_bundled} if not_bundled else {}),
             "models": [c.arch_id for c in cards], "created": created, "summary": export_summary(cards)}
    own = _is_runs_models(out_dir, run_dir)
    if own:  # the run's own index keeps the record of its exports elsewhere
        listed = _read_index(out_dir / INDEX).get(EXPORTS_KEY)
        if listed is not None:
            index[EXPORTS_KEY] = listed
    atomic_write(out_dir / INDEX, json.dumps(index, indent=2) + "\n")
    if not own:
        note = record_export(run_dir, out_dir, [c.arch_id for c in cards], created)
        if note is not None:
            (on_note or log.warning)(note)
    return cards


def _is_runs_models(folder: Path, run_dir: Path) -> bool:
    """Whether ``folder`` is the run's own ``models/`` folder."""
    try:
        return folder.resolve() == (run_dir / "models").resolve()
    except OSError:
        return False


def _read_index(path: Path) -> dict[str, Any]:
    """An ``export.json`` as a JSON object; empty when it is missing or is not one."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def record_export(run_dir: Path, out_dir: Path, models: Sequence[str], created: str) -> str | None:
    """Record an export written outside the run's ``models/`` in the run's ``models/export.json`` under
    :data:`~hwnas.experiments.export.card.EXPORTS_KEY` (``{"path": <out_dir, absolute>, "created": ..., "models":
    [...]}``; one entry per folder, replaced by a later export to the same folder), so that ``nas report RUN
    --html`` finds it. That index is the only file of the run this changes, written atomically (created, without a
    ``models`` list, when the run has none); every other key of it is kept.

    Returns:
        None when recorded; else one line saying why it was not (a read-only run, an index that is not a JSON
        object): the export itself stands.
    """
    index_path = run_dir / "models" / INDEX
    path = str(out_dir.resolve())
    later = f"nas report {run_dir} --html --exports {out_dir} shows it"
    index: dict[str, Any] = {"run": str(run_dir)}
    if index_path.exists():
        try:
            loaded = json.loads(index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return f"the export in {out_dir} is not recorded in {index_path}, which cannot be read ({exc}); {later}"
        if not isinstance(loaded, dict) or not isinstance(loaded.get(EXPORTS_KEY, []), list):
            return (f"the export in {out_dir} is not recorded in {index_path}: it is not an export index this "
                    f"version can add to (left as it is); {later}")
        index = loaded
    entry = {"path": path, "created": created, "models": list(models)}
    entries = list(index.get(EXPORTS_KEY, []))
    same = [i for i, e in enumerate(entries) if (e.get("path") if isinstance(e, Mapping) else e) == path]
    if same:
        entries[same[0]] = entry
        entries = [e for i, e in enumerate(entries) if i not in same[1:]]
    else:
        entries.append(entry)
    index[EXPORTS_KEY] = entries
    try:
        atomic_write(index_path, json.dumps(index, indent=2) + "\n")
    except OSError as exc:
        try:  # atomic_write's temporary file, if it got that far
            index_path.with_name(f".{INDEX}.{os.getpid()}.tmp").unlink(missing_ok=True)
        except OSError:
            pass
        return (f"the export in {out_dir} is not recorded in the run: {index_path} cannot be written "
                f"({exc.strerror or exc}); {later}")
    return None


def _measure_all(cards: list[ModelCard], front: Sequence[Trial], out_dir: Path, formats: Sequence[str],
                 targets: Sequence[MeasureTarget], protocol: MeasureProtocol, space: SearchSpace,
                 on_model: Callable[[int, int, str], None] | None) -> list[ModelCard]:
    """The cards with their ``latency`` list: each file timed in each target context, in ``protocol.rounds`` rounds that
    each go once over all models (the median of the rounds' medians and p90s is kept), so a slow drift of a
    shared machine's load falls on different models in each round rather than on one. A context the search
    itself timed (its onnxruntime evaluator, a table profiled on this host) is timed with the search's protocol
    (warm-up, repeats, minimum time): short bursts and sustained runs time differently on a shared CPU."""
    rows: dict[tuple[int, int], list[LatencyRow]] = {}
    one_round = MeasureProtocol(warmup=protocol.warmup, repeats=protocol.repeats, min_time_s=protocol.min_time_s,
                                max_repeats=protocol.max_repeats)
    total = protocol.rounds * len(cards)
    for r in range(protocol.rounds):
        for k, (card, trial) in enumerate(zip(cards, front)):
            if on_model is not None:
                on_model(r * len(cards) + k, total, f"timing {card.arch_id} (round {r + 1}/{protocol.rounds})")
            files = {f: out_dir / f"{trial.arch.arch_id}{SUFFIX[f]}" for f in formats}
            files[RAW_FILE] = out_dir / f"{trial.arch.arch_id}{RAW_SUFFIX}"
            files = {f: p for f, p in files.items() if p.is_file()}
            shape = tuple(space.input_shape_of(trial.arch))
            raw_shape = _raw_shape(card) or shape
            for j, t in enumerate(targets):
                predicted = _finite(trial.metrics.get(t.metric)) if t.metric else None
                rows.setdefault((k, j), []).append(remeasure(t, files, raw_shape if t.file == RAW_FILE else shape,
                                                             t.protocol or one_round, predicted))
    out = []
    for k, card in enumerate(cards):
        latency = [_combine(rows[(k, j)]) for j in range(len(targets))]
        for j, t in enumerate(targets):  # a context the search timed is timed again its way
            latency[j]["protocol"] = (t.protocol or one_round).to_dict()
            if t.file == RAW_FILE:
                latency[j]["includes"] = _raw_includes(card)
        out.append(replace(card, latency=tuple(latency), latency_rounds=protocol.rounds))
    return out


def _raw_shape(card: ModelCard) -> tuple[int, ...] | None:
    """The ``H x W x C`` input of the card's graph that takes raw images (None: none was written)."""
    shape = ((card.raw_onnx or {}).get("input") or {}).get("shape")
    if not card.raw_onnx or not card.raw_onnx.get("file") or not isinstance(shape, list) or len(shape) != 4:
        return None
    return tuple(int(d) for d in shape[1:])


def _raw_includes(card: ModelCard) -> str:
    """What a latency row of the graph that takes raw images includes beyond the network, in words."""
    shape = _raw_shape(card)
    if shape is None:
        return "the in-graph preprocessing (no graph that takes raw images was written for this model)"
    steps = (card.raw_onnx or {}).get("in_graph")
    named = "; ".join(s.split(" (")[0] for s in steps if isinstance(s, str)) if isinstance(steps, list) else ""
    return (f"the in-graph preprocessing ({named}) on raw uint8 input of {' x '.join(map(str, shape))} "
            "(H x W x C) at the source size, as well as the network")


def _combine(rounds: list[LatencyRow]) -> LatencyRow:
    """One row from the rounds of one (model, context): medians of the rounds' median and p90."""
    row = rounds[-1].copy()
    timed = [m for r in rounds if (m := r.get("measured"))]
    if not timed:
        return row
    median = float(np.median([m["median_ms"] for m in timed]))
    row["measured"] = {"median_ms": median, "p90_ms": float(np.median([m["p90_ms"] for m in timed])),
                       "count": int(sum(m["count"] for m in timed)), "rounds": len(timed)}
    row["not_measured"] = None
    predicted = row.get("predicted_ms")
    if predicted is not None and median > 0:
        row["error_pct"] = 100.0 * (predicted - median) / median
    return row


def _export_one(model: nn.Module, trial: Trial, shape: tuple[int, ...], data: ImageData | None, out_dir: Path,
                formats: Sequence[str], *, opset: int, dynamic_batch: bool, simplify: bool,
                with_preprocessing: bool = False) -> ModelCard:
    """Every file of one model and the card's description of them (all but weights, top-1 and latency)."""
    from hwnas.evaluators.complexity import params_flops
    from hwnas.latency.onnx_export import export_onnx

    arch = trial.arch
    xs_val: np.ndarray | None
    ys_val: np.ndarray | None
    if data is not None:
        xs_val, ys_val = data.x_val, data.y_val
        check = xs_val[:32]
    else:
        xs_val = ys_val = None
        check = np.random.default_rng(0).standard_normal((8, *shape)).astype(np.float32)
    onnx_path = export_onnx(model, shape, out_dir / f"{arch.arch_id}.onnx", opset=opset, dynamic_batch=dynamic_batch)
    not_simplified = simplify_onnx(onnx_path) if simplify else "not asked (--no-simplify)"
    reference = torch_outputs(model, check)
    got = ort_outputs(onnx_path, check, dynamic_batch=dynamic_batch)
    params_m, flops_m = params_flops(model, shape)
    onnx: dict[str, Any] = {
        "file": onnx_path.name,
        "opset": opset,
        "batch": "dynamic" if dynamic_batch else "fixed",
        "simplified": not_simplified is None,
        **({"not_simplified": not_simplified} if not_simplified else {}),
        "sha256": hashlib.sha256(onnx_path.read_bytes()).hexdigest(),
        "max_abs_diff_vs_torch": float(np.max(np.abs(got - reference))),
        "checked_inputs": len(check),
    }
    fp32_top1 = None
    fp32_val = None
    if xs_val is not None and ys_val is not None:  # both, or neither: the dataset's held-out split
        fp32_val = ort_outputs(onnx_path, xs_val, dynamic_batch=dynamic_batch)
        fp32_top1 = top1_of(fp32_val, ys_val)
        onnx["top1_heldout"] = fp32_top1
    extra: dict[str, Any] = {}
    fp16 = out_dir / f"{arch.arch_id}{SUFFIX['onnx_fp16']}"
    for fmt in formats:
        path = out_dir / f"{arch.arch_id}{SUFFIX[fmt]}"
        try:
            if fmt == "onnx_fp16":
                extra[fmt] = write_fp16(model, shape, path, opset=opset, check=check, reference=reference,
                                        xs_val=xs_val, ys_val=ys_val)
            elif fmt == "onnx_int8":
                calibration = data.x_train[:INT8_CALIBRATION_IMAGES] if data is not None else None
                extra[fmt] = write_int8(onnx_path, path, shape, calibration=calibration, xs_val=xs_val,
                                        ys_val=ys_val, fp32_top1=fp32_top1)
            elif fmt == "torch_export":
                extra[fmt] = write_torch_export(model, shape, path, check=check[:8], reference=reference[:8],
                                                dynamic_batch=dynamic_batch)
            elif fmt == "tensorrt":
                extra[fmt] = write_tensorrt(onnx_path, fp16 if "onnx_fp16" in formats else None, path)
        except Exception as exc:  # one format failing for one model is on its card; the others are still made
            path.unlink(missing_ok=True)
            extra[fmt] = {"error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
            log.warning("%s: %s not written: %s", arch.arch_id, fmt, extra[fmt]["error"])
    raw_onnx: dict[str, Any] | None = None
    if (with_preprocessing and data is not None and data.contract is not None and data.raw_val is not None
            and fp32_val is not None):
        raw_path = out_dir / f"{arch.arch_id}{RAW_SUFFIX}"
        part = raw_path.with_name(raw_path.name + ".part")  # export_onnx's temporary file
        had_part = part.exists()
        try:
            raw_onnx = write_raw_onnx(model, data.contract, raw_path, opset=opset, dynamic_batch=dynamic_batch,
                                      simplify=simplify, raw_val=data.raw_val, python=fp32_val, y_val=data.y_val)
        except Exception as exc:  # as for any format: on the card, and the other files are still made
            raw_path.unlink(missing_ok=True)
            if not had_part and part.is_file():
                part.unlink()
            raw_onnx = {"not_written": raw_path.name, "error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
            log.warning("%s: %s not written: %s", arch.arch_id, raw_path.name, raw_onnx["error"])
    return ModelCard(arch_id=arch.arch_id, arch=arch.to_dict(), trial=trial.number, input_shape=(1, *shape),
                     input=_input_record(onnx_path, shape, data), params_m=params_m, flops_m=flops_m,
                     measured_metrics=dict(trial.metrics), onnx=onnx,
                     classes=tuple(data.classes) if data is not None else None, formats=extra or None,
                     batch_sizes=_batch_sizes(out_dir, arch.arch_id, extra, raw_onnx), raw_onnx=raw_onnx)


def _input_record(onnx_path: Path, shape: Sequence[int], data: ImageData | None) -> dict[str, object]:
    """The card's ``input``: the fp32 ONNX file's input (name, shape, dtype, layout) and the input contract of
    the dataset (how a raw image becomes it), or why none is known."""
    import onnx

    name = onnx.load(str(onnx_path), load_external_data=False).graph.input[0].name
    batch = onnx_batch_sizes(onnx_path)["max"] or "batch"  # "batch": the axis is free
    head: dict[str, object] = {"input_name": name, "shape": [batch, *shape]}
    if data is None or data.contract is None:
        return {**head, "input_size": list(shape), "dtype": "float32", "layout": "NCHW",
                "preprocessing": None, "why": "the experiment has no dataset: the network was fed no images, so "
                                              "no preprocessing is known"}
    return {**head, **data.contract.to_dict()}


def _batch_sizes(out_dir: Path, arch_id: str, formats: Mapping[str, Mapping[str, object]],
                 raw_onnx: Mapping[str, object] | None) -> dict[str, dict[str, int | None]]:
    """Per file written, the batch sizes it accepts (read from each ONNX graph's input; the ``.pt2``'s as
    exported)."""
    out: dict[str, dict[str, int | None]] = {}
    names = [f"{arch_id}.onnx", *(r.get("file") for r in formats.values()), (raw_onnx or {}).get("file")]
    for name in names:
        if isinstance(name, str) and name.endswith(".onnx") and (out_dir / name).is_file():
            out[name] = onnx_batch_sizes(out_dir / name)
    pt2 = formats.get("torch_export", {})
    sizes = pt2.get("batch_sizes")
    if isinstance(sizes, Mapping) and isinstance(pt2.get("file"), str):
        out[str(pt2["file"])] = {"min": 1, "max": sizes.get("max") if isinstance(sizes.get("max"), int) else None}
    return out


#: Training images int8 activation ranges are calibrated on.
INT8_CALIBRATION_IMAGES = 128


def _finite(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _train_recipe(experiment: Experiment) -> TrainRecipe:
    """The experiment's ``train`` evaluator recipe, or the default recipe when it has none."""
    from hwnas.training import TrainRecipe

    for name, params in zip(experiment.evaluator_names, experiment.params.get("evaluators", [])):
        if name == "train":
            return TrainRecipe(**{k: v for k, v in dict(params).items() if k in TrainRecipe.model_fields})
    return TrainRecipe()


def _weights(model: nn.Module, trial: Trial, run_dir: Path, out_dir: Path, states: Mapping[str, Mapping[str, Tensor]],
             source: str, data: ImageData | None, recipe: TrainRecipe | None, experiment: Experiment) -> CardWeights:
    """Put the model's weights in place (kept, trained now, or none) and say which on the card."""
    import torch

    from hwnas.training import seed_for, train_model

    arch = trial.arch
    if recipe is not None:
        assert data is not None  # export_front refuses --train without the experiment's dataset
        gen = torch.Generator().manual_seed(seed_for(experiment.config.seed + 1, arch))
        train_model(model, data.x_train, data.y_train, recipe, generator=gen, name=arch.arch_id)
        tmp = out_dir / f"{arch.arch_id}.pt.part"
        torch.save(model.state_dict(), tmp)
        tmp.replace(out_dir / f"{arch.arch_id}.pt")
        return CardWeights("retrained", f"trained from scratch by nas export --train with the experiment's recipe "
                                        f"({recipe.epochs} epoch(s)); weights in {arch.arch_id}.pt")
    if arch.arch_id not in states:
        return CardWeights("random-init", f"seeded initialisation (seed {experiment.config.seed}), untrained")
    weights = run_dir / "weights" / f"{arch.arch_id}.pt"
    try:
        model.load_state_dict(states[arch.arch_id])
    except (RuntimeError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise RunDirectoryError(f"{weights}: the weights do not fit architecture {arch.arch_id} "
                                f"({first[:200]})") from None
    return CardWeights("supernet" if source.startswith("inherited") else "trained", source)


def _top1(card: ModelCard, trial: Trial, experiment: Experiment) -> CardTop1:
    """The card's top-1 and how it was obtained: the exported file's own, or else the search's figure."""
    dataset = experiment.config.dataset
    onnx = card.onnx or {}
    if "top1_heldout" in onnx and dataset is not None:
        kind = card.weights.kind if card.weights is not None else "?"
        return CardTop1(onnx["top1_heldout"], f"the exported ONNX file in onnxruntime on the held-out split of "
                                              f"{dataset.name} ({kind} weights)")
    value = _finite(trial.metrics.get("top1"))
    if value is not None:
        by = experiment.metric_providers().get("top1", "an evaluator")
        return CardTop1(value, f"as the search's {by} evaluator reported it (no dataset to re-measure)")
    return CardTop1(None, "not measured: the experiment has no dataset and no top-1 metric")


def export_summary(cards: Sequence[ModelCard | Mapping[str, object]]) -> dict[str, object]:
    """The figures an export is judged by: the largest ONNX difference, and per context the predicted-vs-
    measured errors and, where both were timed, the int8/fp32 latency ratio and top-1 lost (cards as
    :class:`ModelCard` or as their JSON objects)."""
    read = cards_of(cards)
    out: dict[str, object] = {"models": len(read),
                           "max_abs_diff_vs_torch": max((c.max_abs_diff for c in read if c.max_abs_diff is not None),
                                                        default=None)}
    errors: dict[str, list[float]] = {}
    for c in read:
        for row in c.latency or ():
            if row.get("error_pct") is not None:
                errors.setdefault(row["context"], []).append(abs(row["error_pct"]))
    out["prediction_error"] = {ctx: {"n": len(v), "mape_pct": float(np.mean(v)), "max_ape_pct": float(np.max(v))}
                               for ctx, v in errors.items()}
    int8 = []
    for c in read:
        rows = {row["file"]: row for row in c.measured_latency()}
        f32 = rows.get(c.onnx_file)
        i8 = rows.get(c.format_record("onnx_int8").get("file"))
        lost = c.format_record("onnx_int8").get("top1_lost_vs_fp32")
        if f32 and i8:
            int8.append({"arch_id": c.arch_id, "latency_ratio_int8_over_fp32":
                         i8["measured"]["median_ms"] / f32["measured"]["median_ms"], "top1_lost": lost})
    if int8:
        out["int8_vs_fp32"] = int8
    return out


def _weights_source(experiment: Experiment) -> str:

    """Where the kept weights came from: the ``train`` evaluator's recipe or a supernet (inherited)."""
    for comp in experiment.config.evaluators:
        params = dict(comp.params)
        if comp.name == "supernet":
            tuned = params.get("finetune_epochs") or 0
            ensemble = list(params.get("ensemble") or [])
            members = ", ".join(map(str, [params.get("checkpoint"), *ensemble]))
            source = (f"the supernet {params.get('checkpoint')}" if not ensemble else
                      f"the ensemble member that scored it best of {members}")
            return (f"inherited from {source}, BatchNorm recalibrated"
                    + (f", fine-tuned {tuned} epoch(s)" if tuned else ""))
        if comp.name == "train":
            return "trained from scratch by the train evaluator's recipe"
    return "kept by an evaluator"
