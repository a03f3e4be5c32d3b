"""A deployable bundle per exported model (``nas export --bundle``): one zip archive holding, under a folder
named after the model, its exported files, its card, the statistics of the images its int8 file was calibrated
on, a manifest (``bundle.json``) and ``predict.py``, a standalone predictor that needs only numpy and
onnxruntime (Python 3.8+; :mod:`hwnas.experiments.export.predict`).

Every member's name is relative and stays inside the model's folder (no absolute path, no ``..``); the archive
is written whole or not at all, with fixed member dates, so the same export gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from hwnas.experiments.export.card import ModelCard

if TYPE_CHECKING:
    from hwnas.data.datasets import ImageData

#: The suffix of the ONNX graph that takes raw images (``--with-preprocessing``).
RAW_SUFFIX = ".raw.onnx"
#: The suffix of a model's bundle.
BUNDLE_SUFFIX = ".bundle.zip"
#: The predictor shipped in every bundle (runs alone: numpy and onnxruntime).
PREDICT = Path(__file__).with_name("predict.py")
#: The bundle manifest's version (``predict.py`` refuses a newer one).
BUNDLE_VERSION = 1


def calibration_stats(data: ImageData, n: int, *, int8: bool) -> dict[str, object]:
    """Statistics of the first ``n`` training images as the network sees them (normalised, per channel: mean,
    std, min, max, 1st and 99th percentile, a 16-bin histogram), and of the raw pixel values they came from: what
    the int8 file's activation ranges were calibrated on, for comparing a deployment's inputs against."""
    xs = data.x_train[:n]
    contract = data.contract
    per_channel = []
    for c in range(xs.shape[1]):
        v = xs[:, c].ravel().astype(np.float64)
        counts, edges = np.histogram(v, bins=16)
        row: dict[str, object] = {
            "channel": c, "mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()),
            "max": float(v.max()), "p01": float(np.percentile(v, 1)), "p99": float(np.percentile(v, 99)),
            "histogram": {"edges": [float(e) for e in edges], "counts": [int(k) for k in counts]},
        }
        if contract is not None and contract.mean:  # back to the raw 0..source_max scale
            raw = (v * contract.std[c] + contract.mean[c]) * contract.source_max
            row["raw"] = {"mean": float(raw.mean()), "min": float(np.rint(raw.min())), "max": float(np.rint(raw.max()))}
        per_channel.append(row)
    return {
        "images": int(len(xs)),
        "from": "the first training images of the experiment's split, after the input contract (the network's "
                "normalised inputs)",
        "used_for": "the int8 file's MinMax calibration" if int8 else
                    "nas export's int8 calibration set (no int8 file was asked for this export)",
        "shape": [int(d) for d in xs.shape[1:]],
        "channels": per_channel,
    }


def bundle_files(card: ModelCard, folder: Path) -> list[str]:
    """The model files of ``card`` present in ``folder``: the fp32 ONNX file, every other format's file, and
    the graph that takes raw images."""
    names: list[str] = [n for n in [card.onnx_file] if n]
    for record in (card.formats or {}).values():
        for key in ("file", "engine"):
            name = record.get(key)
            if isinstance(name, str) and name not in names:
                names.append(name)
    raw = (card.raw_onnx or {}).get("file")
    if isinstance(raw, str):
        names.append(raw)
    return [n for n in names if (folder / n).is_file()]


def member_name(folder: str, name: str) -> str:
    """``folder/name`` as an archive member, refused when it would leave ``folder`` (an absolute path, ``..``, a
    backslash or a drive).

    Raises:
        ValueError: The name escapes the folder.
    """
    path = PurePosixPath(folder, name)
    if (PurePosixPath(name).is_absolute() or "\\" in name or ":" in name or not name
            or any(part in ("", ".", "..") for part in PurePosixPath(name).parts)
            or path.parts[0] != folder or len(path.parts) != 2):
        raise ValueError(f"bundle member {name!r} would leave the folder {folder}/")
    return str(path)


def write_bundle(card: ModelCard, out_dir: Path, calibration: Mapping[str, object]) -> Path:
    """``<out_dir>/<arch_id>.bundle.zip``: the folder ``<arch_id>/`` with the model's files, its card
    ``<arch_id>.json``, ``calibration.json``, ``bundle.json`` and ``predict.py``; returns its path.

    Raises:
        ValueError: The card has no graph that takes raw images (``raw_onnx``): the predictor needs it.
    """
    raw = card.raw_onnx or {}
    model = raw.get("file")
    if not isinstance(model, str) or not (out_dir / model).is_file():
        raise ValueError(f"{card.arch_id}: a bundle needs the graph that takes raw images ({card.arch_id}{RAW_SUFFIX})")
    files = bundle_files(card, out_dir)
    manifest = {
        "bundle_version": BUNDLE_VERSION,
        "arch_id": card.arch_id,
        "model": model,
        "input": raw.get("input"),
        "contract": dict(card.input or {}),
        "classes": list(card.classes or ()),
        "checked": {k: raw.get(k) for k in ("max_abs_diff_vs_python_pipeline", "top1_heldout", "checked_images")},
        "files": {name: hashlib.sha256((out_dir / name).read_bytes()).hexdigest() for name in files},
        "card": f"{card.arch_id}.json",
        "predict": "python predict.py IMAGE [IMAGE ...]   (.png 8-bit, .pgm/.ppm, or .npy; --help)",
    }
    folder = card.arch_id
    members: list[tuple[str, bytes]] = [
        ("predict.py", PREDICT.read_bytes()),
        ("bundle.json", (json.dumps(manifest, indent=2) + "\n").encode()),
        (f"{card.arch_id}.json", (json.dumps(card.to_dict(), indent=2) + "\n").encode()),
        ("calibration.json", (json.dumps(dict(calibration), indent=2) + "\n").encode()),
        *[(name, (out_dir / name).read_bytes()) for name in files],
    ]
    path = out_dir / f"{card.arch_id}{BUNDLE_SUFFIX}"
    tmp = path.with_name(path.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(member_name(folder, name), date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    tmp.replace(path)
    return path
