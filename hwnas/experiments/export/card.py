"""The card of an exported model (``<arch_id>.json`` beside its files): :class:`ModelCard`, and reading a
``models/`` folder's cards back (:func:`read_cards`).

The JSON a card is written as is :meth:`ModelCard.to_dict`; :meth:`ModelCard.from_dict` reads that and every
earlier form (cards from before ``weights``, ``top1``, ``formats`` or ``latency`` existed): a missing key is
None, a key this version does not know, or one whose value is not of the type this version writes (null
included), is kept as read in :attr:`ModelCard.extra` (written back by ``to_dict``, shown as it is by the HTML
report); nothing a card holds is an error, and ``from_dict`` then ``to_dict`` gives the card's JSON back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeGuard

from hwnas.fileio import atomic_write

#: The index of an export: the selection, the formats, the models (in order) and the summary figures.
INDEX = "export.json"
#: The key of a run's own ``models/export.json`` listing its exports written elsewhere (``nas export RUN --out DIR``
#: adds ``{"path": DIR absolute, "created": ..., "models": [...]}``; a plain path string, absolute or relative to
#: the run folder, is read too): ``nas report`` reads them as if given with ``--exports``.
EXPORTS_KEY = "exports"

@dataclass(frozen=True)
class CardWeights:
    """Where a model's exported weights came from.

    Args:
        kind: ``trained`` (the ``train`` evaluator), ``supernet`` (inherited, BatchNorm recalibrated),
            ``retrained`` (``nas export --train``) or ``random-init`` (its seeded initialisation).
        detail: One line saying how.
    """

    kind: str
    detail: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CardWeights:
        detail = data.get("detail")
        return cls(kind=str(data.get("kind", "?")), detail=detail if isinstance(detail, str) else None)


@dataclass(frozen=True)
class CardTop1:
    """A model's top-1 accuracy and how it was obtained (``value`` None: not measured, ``how`` says why)."""

    value: float | None
    how: str | None = None

    def to_dict(self) -> dict[str, float | str | None]:
        return {"value": self.value, "how": self.how}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CardTop1:
        value, how = data.get("value"), data.get("how")
        return cls(value=value if _is_number(value) else None, how=how if isinstance(how, str) else None)


@dataclass(frozen=True)
class ModelCard:
    """The card of one exported model, as ``<arch_id>.json`` holds it.

    The fields are the card's keys, in the order they are written; None means the key is absent (older cards lack
    the newer ones). The per-format and per-context records are the exporter's own small dicts.

    Args:
        arch_id: The architecture's id (also the files' stem).
        arch: The architecture (``Architecture.to_dict``).
        trial: Its trial number in the run.
        input_shape: ``[1, C, H, W]``.
        input: The input contract: the ONNX input's name, dtype and layout, and how a raw image becomes it
            (:meth:`hwnas.data.preprocess.InputContract.to_dict`: timm ``pretrained_cfg`` keys ``input_size``,
            ``interpolation``, ``mean``, ``std``, ``crop_pct`` ..., the raw ``source`` image, its ``scale`` and
            ``resize``, the ``steps`` in words); without a dataset only the tensor and why no more is known.
        params_m: Parameters, millions.
        flops_m: FLOPs, millions.
        measured_metrics: What the search measured of it.
        onnx: The fp32 ONNX file: ``file``, ``opset``, ``batch``, ``simplified``, ``sha256``,
            ``max_abs_diff_vs_torch``, ``checked_inputs``, ``top1_heldout`` ...
        classes: The dataset's class names.
        formats: Every other format written (or not, and why): format name to its record.
        batch_sizes: Per file written, the batch sizes it accepts: ``{"min": 1, "max": 1}``, ``max`` None for any.
        raw_onnx: The ONNX graph that takes raw images and does the preprocessing inside
            (``--with-preprocessing``): its file, input, and its check against the Python pipeline.
        weights: Where the weights came from.
        trained_weights: Whether they are trained (the only word on weights of the oldest cards).
        note: A remark (an untrained export says so).
        weights_source: Where trained weights came from (beside ``weights``, for older readers).
        top1: Its top-1 and how it was obtained.
        latency: Per context a record of the re-measured latency beside the search's prediction.
        latency_rounds: Timing rounds behind ``latency``.
        extra: Keys this version does not write, or values of another type than it writes: kept as read.
    """

    arch_id: str
    arch: Mapping[str, Any] | None = None
    trial: int | None = None
    input_shape: tuple[int, ...] | None = None
    input: Mapping[str, Any] | None = None
    params_m: float | None = None
    flops_m: float | None = None
    measured_metrics: Mapping[str, float | None] | None = None
    onnx: Mapping[str, Any] | None = None
    classes: tuple[str, ...] | None = None
    formats: Mapping[str, Mapping[str, Any]] | None = None
    batch_sizes: Mapping[str, Mapping[str, Any]] | None = None
    raw_onnx: Mapping[str, Any] | None = None
    weights: CardWeights | None = None
    trained_weights: bool | None = None
    note: str | None = None
    weights_source: str | None = None
    top1: CardTop1 | None = None
    latency: tuple[Mapping[str, Any], ...] | None = None
    latency_rounds: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    # ----------------------------------------------------------------------------------------------- figures

    @property
    def onnx_file(self) -> str | None:
        """The fp32 ONNX file's name, when the card records one."""
        name = (self.onnx or {}).get("file")
        return name if isinstance(name, str) else None

    @property
    def max_abs_diff(self) -> float | None:
        """The largest difference of the ONNX file's outputs from torch's, when the card records it."""
        value = _number((self.onnx or {}).get("max_abs_diff_vs_torch"))
        return float(value) if value is not None else None

    def format_record(self, name: str) -> Mapping[str, object]:
        """The record of format ``name`` (empty when it was not asked for)."""
        record = (self.formats or {}).get(name)
        return record if isinstance(record, Mapping) else {}

    def not_written(self) -> list[tuple[str, str]]:
        """The files of this model an export tried and failed to write, with why: every format whose record is
        ``{"error": ...}``, and the graph that takes raw images (``raw_onnx``)."""
        out = []
        for name, record in (self.formats or {}).items():
            if isinstance(record, Mapping) and isinstance(record.get("error"), str):
                out.append((str(record.get("file") or f"{self.arch_id} {name}"), record["error"]))
        raw = self.raw_onnx or {}
        if isinstance(raw.get("error"), str):
            out.append((str(raw.get("not_written") or f"{self.arch_id}.raw.onnx"), raw["error"]))
        return out

    def measured_latency(self) -> list[Mapping[str, Any]]:
        """The latency records with a measurement, in the card's order."""
        return [row for row in self.latency or () if row.get("measured")]

    # ---------------------------------------------------------------------------------------------- the JSON

    def to_dict(self) -> dict[str, object]:
        """The card's JSON object: every field that is set, in field order, then :attr:`extra`."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or value is None or (f.name == "arch_id" and not value):
                continue
            if isinstance(value, (CardWeights, CardTop1)):
                value = value.to_dict()
            elif f.name in ("input_shape", "classes"):
                value = list(value)
            elif f.name == "latency":
                value = [dict(row) for row in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ModelCard:
        """A card from its JSON object, of this version or an earlier one (see the module's docstring)."""
        values = {k: _READERS[k](v) for k, v in data.items() if k in _READERS and v is not None}
        # an unknown key, or a known one whose value this version does not read (null included), is kept as read
        extra = {k: v for k, v in data.items() if k not in _READERS or values.get(k) is None}
        return cls(**{"arch_id": "", **{k: v for k, v in values.items() if v is not None}}, extra=extra)

    def write(self, folder: Path) -> Path:
        """Write ``<folder>/<arch_id>.json`` atomically; returns its path."""
        path = folder / f"{self.arch_id}.json"
        atomic_write(path, json.dumps(self.to_dict(), indent=2) + "\n")
        return path


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    return value if _is_number(value) else None


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _mapping_of_mappings(value: object) -> Mapping[str, Mapping[str, Any]] | None:
    if isinstance(value, Mapping) and all(isinstance(v, Mapping) for v in value.values()):
        return value
    return None


def _ints(value: object) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(_int(v) is not None for v in value):
        return tuple(value)
    return None


def _strs(value: object) -> tuple[str, ...] | None:
    return tuple(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def _mappings(value: object) -> tuple[Mapping[str, Any], ...] | None:
    return tuple(value) if isinstance(value, list) and all(isinstance(v, Mapping) for v in value) else None


def _weights(value: object) -> CardWeights | None:
    return CardWeights.from_dict(value) if isinstance(value, Mapping) else None


def _top1(value: object) -> CardTop1 | None:
    return CardTop1.from_dict(value) if isinstance(value, Mapping) else None


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


#: Per field of a card, how its JSON value is read (None: not of the type this version writes).
_READERS: dict[str, Callable[[Any], Any]] = {
    "arch_id": _str, "arch": _mapping, "trial": _int, "input_shape": _ints, "input": _mapping, "params_m": _number,
    "flops_m": _number, "measured_metrics": _mapping, "onnx": _mapping, "classes": _strs,
    "formats": _mapping_of_mappings, "batch_sizes": _mapping_of_mappings, "raw_onnx": _mapping,
    "weights": _weights, "trained_weights": _bool, "note": _str, "weights_source": _str, "top1": _top1,
    "latency": _mappings, "latency_rounds": _int,
}


def _read_json(path: Path) -> Any:
    """The parsed content of a JSON file, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_cards(models_dir: Path) -> tuple[list[ModelCard], list[str], dict[str, Any] | None]:
    """The model cards of a ``models/`` folder: those ``export.json`` lists, in its order, or else every ``*.json``
    with an ``arch_id`` key, sorted by name.

    Returns:
        (cards, one line per card that could not be read, ``export.json`` without its ``models`` list or None).
    """
    if not models_dir.is_dir():
        return [], [], None
    cards: list[ModelCard] = []
    problems: list[str] = []
    index_path = models_dir / INDEX
    index = _read_json(index_path) if index_path.is_file() else None
    if index_path.is_file() and not isinstance(index, dict):
        problems.append(f"{index_path.name} is not a JSON object; every card in the folder is shown instead")
        index = None
    listed = index.get("models") if isinstance(index, dict) else None
    if isinstance(listed, list):
        for arch_id in listed:
            path = models_dir / f"{arch_id}.json"
            card = _read_json(path)
            if isinstance(card, dict):
                cards.append(ModelCard.from_dict(card))
            else:
                state = "unreadable" if path.exists() else "missing"
                problems.append(f"{path.name}: listed in {INDEX} but {state}")
    else:
        for path in sorted(models_dir.glob("*.json")):
            if path.name == INDEX:
                continue
            card = _read_json(path)
            if isinstance(card, dict) and "arch_id" in card:
                cards.append(ModelCard.from_dict(card))
            elif card is None:
                problems.append(f"{path.name}: not readable as JSON")
    info = {k: v for k, v in index.items() if k != "models"} if isinstance(index, dict) else None
    return cards, problems, info


def cards_of(cards: Sequence[ModelCard | Mapping[str, object]]) -> list[ModelCard]:
    """Cards given as :class:`ModelCard` or as their JSON objects, as :class:`ModelCard`."""
    return [c if isinstance(c, ModelCard) else ModelCard.from_dict(c) for c in cards]
