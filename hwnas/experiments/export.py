"""Export of the Pareto-front models: ONNX files checked against torch, each with a card of measured metrics."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.experiments.config import Experiment
from hwnas.fileio import atomic_write
from hwnas.objectives import Trial

log = logging.getLogger(__name__)


def export_front(run_dir: Path, experiment: Experiment, front: Sequence[Trial], *, out_dir: Path | None = None,
                 opset: int = 17) -> list[dict[str, Any]]:
    """Write ``<arch_id>.onnx`` and ``<arch_id>.json`` per front member; returns the cards.

    The model carries the weights the training evaluator kept (``weights/<arch_id>.pt``, loaded with
    ``weights_only=True``); without them it is exported with its seeded initialisation and the card says so.
    Each file is run in onnxruntime and compared with torch on held-out images (or random input when
    the experiment has no dataset): the card records the largest absolute difference and, with a dataset,
    the exported file's own top-1 on the held-out split.
    """
    import torch

    from hwnas.latency.backends import BACKENDS
    from hwnas.latency.onnx_export import export_onnx
    from hwnas.training import build_seeded

    out_dir = out_dir or run_dir / "models"
    out_dir.mkdir(parents=True, exist_ok=True)
    space = experiment.space
    loader = experiment.data_source()
    cards = []
    for trial in front:
        arch = trial.arch
        shape = tuple(space.input_shape_of(arch))
        data = loader(shape[-1]) if loader else None
        model = build_seeded(space, arch, experiment.config.seed)
        weights = run_dir / "weights" / f"{arch.arch_id}.pt"
        trained = weights.exists()
        if trained:
            model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
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
        atomic_write(out_dir / f"{arch.arch_id}.json", json.dumps(card, indent=2) + "\n")
        log.info("exported %s (max |onnx - torch| = %.2e)", onnx_path, max_diff)
        cards.append(card)
    return cards
