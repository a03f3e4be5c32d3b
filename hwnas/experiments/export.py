"""Export of the Pareto-front models: ONNX files checked against torch, each with a card of measured metrics."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import OutputExists, RunDirectoryError
from hwnas.experiments.config import Experiment
from hwnas.fileio import atomic_write, refuse_overwrite
from hwnas.objectives import Trial

log = logging.getLogger(__name__)


def export_paths(out_dir: Path, front: Sequence[Trial]) -> list[Path]:
    """Every file :func:`export_front` writes for ``front`` into ``out_dir``: ``<arch_id>.onnx`` and ``.json``."""
    return [out_dir / f"{t.arch.arch_id}{ext}" for t in front for ext in (".onnx", ".json")]


def check_export(run_dir: Path, front: Sequence[Trial], out_dir: Path, *, force: bool = False,
                 random_init: bool = False) -> None:
    """Refuse an export before anything is written: the checks :func:`export_front` makes first.

    Raises:
        OutputExists: ``out_dir`` (or a folder above it) is a file, or an output exists and not ``force``.
        RunDirectoryError: trained weights are missing for some front member and not ``random_init``.
    """
    for folder in (out_dir, *out_dir.parents):
        if folder.exists():
            if not folder.is_dir():
                raise OutputExists(f"{folder} is a file, not a folder; the exported models need a folder there "
                                   "(choose another --out)")
            break
    missing = [run_dir / "weights" / f"{t.arch.arch_id}.pt" for t in front]
    missing = [w for w in missing if not w.is_file()]
    if missing and not random_init:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise RunDirectoryError(f"no trained weights for {len(missing)} of {len(front)} front model(s): "
                                f"{missing[0]}{more} is missing; pass --random-init to export those with their "
                                "seeded (untrained) initialisation")
    refuse_overwrite(export_paths(out_dir, front), force=force)


def export_front(run_dir: Path, experiment: Experiment, front: Sequence[Trial], *, out_dir: Path | None = None,
                 opset: int = 17, force: bool = False, random_init: bool = False) -> list[dict[str, Any]]:
    """Write ``<arch_id>.onnx`` and ``<arch_id>.json`` per front member; returns the cards.

    The model carries the weights the training evaluator kept (``weights/<arch_id>.pt``, loaded with
    ``weights_only=True``). Each file is run in onnxruntime and compared with torch on held-out images (or
    random input when the experiment has no dataset): the card records the largest absolute difference and,
    with a dataset, the exported file's own top-1 on the held-out split.

    Nothing is written unless every check passes (:func:`check_export`, made for all outputs first):

    * an existing output file is not replaced unless ``force``;
    * a front member whose trained weights are missing is refused unless ``random_init``; with it, that
      member is exported with its seeded initialisation and its card says ``"trained_weights": false``
      (members whose weights exist still get them).

    ``nas export`` passes both from its ``--force`` and ``--random-init`` flags, defaulting to refusal. The
    run's own export at the end of ``nas run`` (:func:`hwnas.experiments.api.finish`) passes both as true:
    the run owns its ``models/`` folder (a resumed run re-exports what it wrote itself, from the same
    journal), and a search whose evaluators keep no weights exports untrained models, saying so on the card.
    """
    import torch

    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.onnx_export import export_onnx
    from hwnas.training import build_seeded

    out_dir = out_dir or run_dir / "models"
    check_export(run_dir, front, out_dir, force=force, random_init=random_init)
    states = {}
    for trial in front:  # every weights file is read before anything is written: a corrupt one stops here
        weights = run_dir / "weights" / f"{trial.arch.arch_id}.pt"
        if weights.is_file():
            try:
                states[trial.arch.arch_id] = torch.load(weights, map_location="cpu", weights_only=True)
            except Exception as exc:  # truncated, not a torch file, or holding objects weights_only refuses
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise RunDirectoryError(f"{weights}: cannot read the weights ({first[:200]}); delete it and "
                                        "export with --random-init, or retrain") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    space = experiment.space
    weights_source = _weights_source(experiment)
    loader = experiment.data_source()
    cards = []
    for trial in front:
        arch = trial.arch
        shape = tuple(space.input_shape_of(arch))
        data = loader(shape[-1]) if loader else None
        model = build_seeded(space, arch, experiment.config.seed)
        weights = run_dir / "weights" / f"{arch.arch_id}.pt"
        trained = weights.is_file()
        if trained:
            try:
                model.load_state_dict(states[arch.arch_id])
            except (RuntimeError, KeyError, TypeError) as exc:
                first = str(exc).strip().splitlines()[0]
                raise RunDirectoryError(f"{weights}: the weights do not fit architecture {arch.arch_id} "
                                        f"({first[:200]})") from None
        model.eval()
        onnx_path = export_onnx(model, shape, out_dir / f"{arch.arch_id}.onnx", opset=opset)
        session = BACKENDS.get("onnxruntime")(threads=1).session(onnx_path)
        name = session.get_inputs()[0].name
        if data is not None:
            xs, ys = data.x_val, data.y_val
        else:
            xs = np.random.default_rng(0).standard_normal((8, *shape)).astype(np.float32)
            ys = None
        max_diff, correct = 0.0, 0
        with torch.no_grad():
            for i in range(len(xs)):
                x = xs[i : i + 1]
                got = session.run(None, {name: x})[0]
                if i < 32:
                    ref = model(torch.from_numpy(x)).numpy()
                    max_diff = max(max_diff, float(np.max(np.abs(got - ref))))
                if ys is not None:
                    correct += int(got.argmax(1)[0] == ys[i])
        card: dict[str, Any] = {
            "arch_id": arch.arch_id,
            "arch": arch.to_dict(),
            "trial": trial.number,
            "input_shape": [1, *shape],
            "trained_weights": trained,
            "measured_metrics": dict(trial.metrics),
            "onnx": {
                "file": onnx_path.name,
                "opset": opset,
                "sha256": hashlib.sha256(onnx_path.read_bytes()).hexdigest(),
                "max_abs_diff_vs_torch": max_diff,
                "checked_inputs": min(len(xs), 32),
            },
        }
        if ys is not None:
            card["onnx"]["top1_heldout"] = correct / len(xs)
            card["classes"] = data.classes
        if not trained:
            card["note"] = "exported with its seeded initialisation: no trained weights were kept for it"
        else:
            card["weights_source"] = weights_source
        atomic_write(out_dir / f"{arch.arch_id}.json", json.dumps(card, indent=2) + "\n")
        log.info("exported %s (max |onnx - torch| = %.2e)", onnx_path, max_diff)
        cards.append(card)
    return cards


def _weights_source(experiment: Experiment) -> str:
    """Where the kept weights came from: the ``train`` evaluator's recipe or a supernet (inherited)."""
    for comp in experiment.config.evaluators:
        params = dict(comp.params)
        if comp.name == "supernet":
            tuned = params.get("finetune_epochs") or 0
            return (f"inherited from the supernet {params.get('checkpoint')}, BatchNorm recalibrated"
                    + (f", fine-tuned {tuned} epoch(s)" if tuned else ""))
        if comp.name == "train":
            return "trained from scratch by the train evaluator's recipe"
    return "kept by an evaluator"
