"""Latency on a new device from a few measured networks: ``nas latency fewshot`` and its model file.

The devices already known for a space are its latency tables (profiled here, imported from a board kit,
or published: HW-NAS-Bench's FBNet devices, once-for-all's Note10). Each prices a fixed random sample of
the space; :class:`~hwnas.latency.predictors.FewShotLatencyPredictor` learns every known device's
encoding -> log-latency model from it and explains the new device's k measured networks as a
non-negative mix of them, blended with a model of the k measurements alone (see the predictor).
Where the space lists its latency units, the features are :class:`~hwnas.latency.features.UnitFeatures`:
the space's encoding plus how often each unit occurs in the network and how often each of the units'
attributes does (their kind, kernel, width, resolution...), so a device can be learnt unit by unit as a
table would price it.
The result is one JSON file (never a pickle) that records the space, the device, the known devices it
came from, its features' vocabularies and its leave-one-out figures on the k measurements; the
``latency_model`` evaluator reads it (``latency_ms@<device>``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, HwnasError, InvalidArchitecture
from hwnas.fileio import read_input_text
from hwnas.latency.features import UnitFeatures
from hwnas.latency.predictors import FewShotLatencyPredictor
from hwnas.latency.tables.table import LatencyTable, accuracy_figures, now_iso
from hwnas.search_spaces.base import resolved_params

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace

FORMAT = "hwnas.latency-model"
#: 2: the model's features are recorded (``features``); version 1 files used the space's encoding and still load.
#: 3: the predictor's evidence correction (its per-device deviations and feature statistics); 1 and 2 still load.
VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
#: Fewest measured networks: the fit has an offset and at least one weight, and leave-one-out needs a spare.
MIN_MEASURED = 5
#: Architectures every known device prices to learn its encoding model.
SOURCE_SAMPLES = 500


class LatencyModelError(HwnasError):
    """A few-shot input or a latency model file is unusable: too few or foreign measurements, a corrupt file."""


def fewshot_features(space: SearchSpace, archs: Sequence[Architecture], features: UnitFeatures | None) -> np.ndarray:
    """The few-shot model's input rows: ``features`` where the space has them, else the space's encoding."""
    if features is not None:
        return features.transform(space, archs)
    return np.stack([space.encode(a) for a in archs])


def read_measured(path: str | Path, space: SearchSpace) -> list[tuple[Architecture, float]]:
    """The (architecture, measured ms) pairs of a measurements file, checked against ``space``.

    Accepted: an hwnas latency table (the whole networks ``nas latency validate`` or a board kit measured),
    or JSON ``[{"arch": {...}, "latency_ms": 3.2}, ...]`` (also ``measured_ms`` / ``median_ms``), bare or as
    ``{"measurements": [...]}``.

    Raises:
        LatencyModelError: Unreadable, no measurements, a measurement of another space or an invalid
            architecture (named by its position), or a latency that is not a finite positive number.
    """
    path = Path(path)
    try:
        data = json.loads(read_input_text(path, "a JSON file of measurements"))
    except ConfigError as exc:
        raise LatencyModelError(f"measurements {exc}") from None
    except (OSError, ValueError) as exc:
        raise LatencyModelError(f"measurements {path}: unreadable ({exc})") from None
    if isinstance(data, dict) and data.get("format") == "hwnas.latency-table":
        table = LatencyTable.from_dict(data, source=str(path))
        rows: Any = [{"arch": m["arch"], "latency_ms": m["measured_ms"]}
                     for m in (table.validation or {}).get("measured") or []]
        rows += [{"arch": n["arch"], "latency_ms": n["median_ms"]} for n in table.provenance.get("networks") or []]
    elif isinstance(data, dict) and data.get("format") == "hwnas.latency-kit-results":
        raise LatencyModelError(f"measurements {path}: the results of a board kit (run_kit.py); import them first "
                                "(nas latency import RESULTS --kit KIT --out TABLE) and give the table")
    else:
        rows = data.get("measurements") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not rows:
        raise LatencyModelError(f"measurements {path}: no measured networks (expected a list of {{arch, latency_ms}}, "
                                "a validated latency table or a kit-imported one)")
    out: list[tuple[Architecture, float]] = []
    for i, row in enumerate(rows):
        where = f"measurements {path}, entry {i}"
        if not isinstance(row, dict) or "arch" not in row:
            raise LatencyModelError(f"{where}: expected an object with 'arch' and 'latency_ms'")
        ms = next((row[k] for k in ("latency_ms", "measured_ms", "median_ms") if k in row), None)
        try:
            arch = Architecture.from_dict(row["arch"])
        except (InvalidArchitecture, TypeError, ValueError, KeyError) as exc:
            raise LatencyModelError(f"{where}: {exc}") from None
        if arch.space != space.name:
            raise LatencyModelError(f"{where}: an architecture of space {arch.space!r}, not {space.name!r}")
        try:
            space.validate(arch)
        except InvalidArchitecture as exc:
            raise LatencyModelError(f"{where}: {exc}") from None
        if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not (math.isfinite(ms) and ms > 0):
            raise LatencyModelError(f"{where}: latency {ms!r} is not a finite positive number of milliseconds")
        out.append((arch, float(ms)))
    return out


def fit_fewshot(space: SearchSpace, measured: Sequence[tuple[Architecture, float]], sources: Sequence[LatencyTable], *,
                device: str, rng: np.random.Generator, source_samples: int = SOURCE_SAMPLES) -> dict[str, Any]:
    """Fit a new device's latency model; returns the model file's content (see :func:`save_model`).

    Raises:
        LatencyModelError: Fewer than :data:`MIN_MEASURED` distinct networks, or no usable known device.
    """
    from hwnas.latency.tables.model import TableLatencyModel

    distinct = {a.arch_id: (a, ms) for a, ms in measured}
    if len(distinct) < MIN_MEASURED:
        raise LatencyModelError(f"a few-shot latency model needs at least {MIN_MEASURED} distinct measured networks, "
                                f"got {len(distinct)}: measure {MIN_MEASURED - len(distinct)} more")
    if not sources:
        raise LatencyModelError("a few-shot latency model transfers from known devices: give at least one latency "
                                f"table of space {space.name!r} (--source)")
    for table in sources:
        if table.unit != "ms":
            raise LatencyModelError(f"known device {table.source or table.context.device}: the table holds "
                                    f"{table.metric_prefix} ({table.unit}), not latency; give latency tables "
                                    "(--source)")
    archs = [space.sample(rng) for _ in range(source_samples)]
    features = UnitFeatures.of_space(space)
    X = fewshot_features(space, archs, features)
    columns, names = [], []
    for table in sources:
        try:
            columns.append(TableLatencyModel(table=table, space=space).predict_ms(archs))
        except HwnasError as exc:
            raise LatencyModelError(f"known device {table.source or table.context.device}: {exc}") from None
        names.append(table.context.device)
    if len(set(names)) != len(names):
        names = [f"{n}#{i}" for i, n in enumerate(names)]
    pairs = list(distinct.values())
    Xk = fewshot_features(space, [a for a, _ in pairs], features)
    yk = np.array([ms for _, ms in pairs])
    predictor = FewShotLatencyPredictor().fit_sources(X, np.column_stack(columns), names)
    loo = np.empty(len(yk))
    for i in range(len(yk)):  # leave-one-out: each measured network predicted by a fit on the others
        keep = np.arange(len(yk)) != i
        loo[i] = FewShotLatencyPredictor.from_dict(predictor.to_dict()).fit(Xk[keep], yk[keep]).predict(Xk[i:i + 1])[0]
    predictor.fit(Xk, yk)
    return {
        "format": FORMAT, "version": VERSION, "kind": "fewshot", "created": now_iso(),
        "space": space.name, "space_params": resolved_params(space), "device": device,
        "measured": len(yk), "sources": [{"device": n, "table": t.source} for n, t in zip(names, sources)],
        "validation": {"how": f"leave-one-out over the {len(yk)} measured networks",
                       "loo": accuracy_figures(yk, loo)},
        "weights": predictor.source_weights, "blend": {"transfer": predictor.blend_, "own": 1.0 - predictor.blend_},
        "correction": {"how": predictor.correction,
                       "evidence": None if predictor.evidence_ is None else
                       {"devices": predictor.evidence_[0], "features": predictor.evidence_[1]}},
        "features": None if features is None else features.to_dict(), "predictor": predictor.to_dict(),
    }


class FewShotLatencyModel:
    """A saved few-shot model: whole-network latency (ms) of architectures of its space on its device."""

    def __init__(self, data: dict[str, Any], *, source: str = "latency model") -> None:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise LatencyModelError(f"{source} is not an hwnas latency model (no \"format\": \"{FORMAT}\")")
        if data.get("version") not in READABLE_VERSIONS or data.get("kind") != "fewshot":
            raise LatencyModelError(f"{source}: version {data.get('version')!r} / kind {data.get('kind')!r} is not "
                                    f"supported (this hwnas reads versions {', '.join(map(str, READABLE_VERSIONS))}, "
                                    "kind fewshot)")
        try:
            self.predictor = FewShotLatencyPredictor.from_dict(data["predictor"])
            self.space = str(data["space"])
            self.space_params = dict(data.get("space_params") or {})
            self.device = str(data["device"])
            self.features = None if data.get("features") is None else UnitFeatures.from_dict(data["features"])
        except (KeyError, TypeError, ValueError) as exc:
            raise LatencyModelError(f"{source}: malformed latency model ({exc})") from None
        if self.predictor.weights_ is None:
            raise LatencyModelError(f"{source}: the model was never fitted to its device")
        self.data = data
        self.source = source

    @classmethod
    def load(cls, path: str | Path) -> FewShotLatencyModel:
        path = Path(path)
        try:
            data = json.loads(read_input_text(path, "a latency model file (JSON)"))
        except ConfigError as exc:
            raise LatencyModelError(f"latency model {exc}") from None
        except (OSError, ValueError) as exc:
            raise LatencyModelError(f"latency model {path}: unreadable or corrupt ({exc})") from None
        return cls(data, source=str(path))

    def predict_ms(self, space: SearchSpace, archs: Sequence[Architecture]) -> np.ndarray:
        if not archs:
            return np.empty(0)
        return np.asarray(self.predictor.predict(fewshot_features(space, archs, self.features)), dtype=float)


def save_model(data: Mapping[str, object], path: str | Path) -> Path:
    """Write a model file atomically."""
    from hwnas.fileio import atomic_write

    path = Path(path)
    atomic_write(path, json.dumps(data, indent=1, allow_nan=False) + "\n")
    return path
