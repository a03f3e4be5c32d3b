"""Readers for published latency lookup tables (once-for-all / ProxylessNAS YAML files).

Once-for-all's tables (``{device}/{image_size}_lookup_table.yaml``) are YAML mappings of a layer
key such as ``expanded_conv-input:28x28x40-output:28x28x40-expand:240-kernel:5-stride:1-idskip:1-se:1-hs:1``
to ``{count, mean, std}`` (ProxylessNAS's ``mobile_trim.yaml``: ``{count, mean, var}``), the mean in
milliseconds. A network is priced by summing the means over its layer keys, as once-for-all's own
latency estimator does; :meth:`hwnas.search_spaces.ofa.OFAMobileNetV3Space.layers` gives those keys.

:func:`load_ofa_lut` and :func:`sum_ofa_lut` read and price the files as they are published;
:func:`ofa_table` and :func:`hw_nas_bench_fbnet_table` wrap them into the project's versioned table format
(with a ``DeviceContext`` and provenance).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hwnas.errors import ConfigError, MissingLatencyEntry
from hwnas.latency.context import DeviceContext
from hwnas.latency.tables.table import Entry, LatencyTable, new_table
from hwnas.search_spaces.base import resolved_params
from hwnas.yaml_safe import safe_load_bounded

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from hwnas.search_spaces import SearchSpace


def looks_like(path: str | Path) -> str:
    """What a file appears to be, for error messages when it is given as the wrong format."""
    import json

    try:
        raw = Path(path).read_bytes()[: 1 << 20]
    except OSError:
        return "unreadable"
    if b"\0" in raw[:4096]:
        return "a binary file"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "a non-UTF-8 file"
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
        except ValueError:
            return "JSON (truncated or invalid)"
        if isinstance(data, dict) and data.get("format") == "hwnas.latency-table":
            return "an hwnas latency table already (use it directly, no import needed)"
        if isinstance(data, dict) and any(str(k).endswith("_latency") for k in data):
            return "an HW-NAS-Bench FBNet table (format hw-nas-bench-fbnet)"
        return "JSON of another kind"
    if "mean:" in text[:20000]:
        return "a once-for-all YAML table (format ofa)"
    if "evaluators:" in text and "space:" in text:
        return "an hwnas experiment file"
    return "text of another kind"


def load_ofa_lut(path: str | Path) -> dict[str, float]:
    """Read a once-for-all / ProxylessNAS latency lookup table.

    Args:
        path: A ``*_lookup_table.yaml`` (or ``mobile_trim.yaml``) file, read with the bounded safe loader
            (:func:`hwnas.yaml_safe.safe_load_bounded`).

    Returns:
        Layer key -> mean latency in milliseconds (the entry's ``mean`` field).

    Raises:
        ConfigError: The file is missing, is not a mapping, or an entry has no finite ``mean``
            (the message names the file and the key).
    """
    path = Path(path)
    return _ofa_means(path, _read_ofa_yaml(path))


#: A published table is data, larger than a config, but an alias bomb still stops here.
MAX_TABLE_NODES = 5_000_000


def _read_ofa_yaml(path: Path) -> Any:
    """The YAML document, read with the bounded safe loader; one ConfigError line for every way it can fail."""
    try:
        data = safe_load_bounded(path.read_bytes().decode("utf-8"), str(path), max_nodes=MAX_TABLE_NODES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read latency table ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: is not UTF-8 text (byte {exc.start}), not a once-for-all YAML table") from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise ConfigError(f"{path}: not valid YAML ({problem})") from None
    return data


def _ofa_means(path: Path, data: object) -> dict[str, float]:
    if not isinstance(data, Mapping) or not data:
        raise ConfigError(f"{path}: a once-for-all table is a non-empty mapping of layer key -> {{mean, ...}}; this "
                          f"looks like {looks_like(path)}")
    lut: dict[str, float] = {}
    for key, entry in data.items():
        if not isinstance(entry, Mapping) or "mean" not in entry:
            raise ConfigError(f"{path}: entry {key!r} has no 'mean' field: not a once-for-all table; this looks like "
                              f"{looks_like(path)}")
        mean = entry["mean"]
        if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean) or mean < 0:
            raise ConfigError(f"{path}: entry {key!r} has mean {mean!r}; expected a finite number of ms >= 0")
        lut[str(key)] = float(mean)
    return lut


def sum_ofa_lut(lut: Mapping[str, float], keys: Iterable[str], *, table: str = "") -> float:
    """Price a network by summing a table over its layer keys (a key that repeats counts each time).

    Args:
        lut: Layer key -> mean latency in ms, as :func:`load_ofa_lut` returns.
        keys: The network's layer keys, e.g. ``space.layers(arch)``.
        table: The table's name or path, for the error message.

    Returns:
        The predicted network latency in milliseconds.

    Raises:
        MissingLatencyEntry: Some keys are not in the table (all missing keys are named, each once;
            nothing is priced as 0).
    """
    total = 0.0
    missing: dict[str, None] = {}
    for key in keys:
        value = lut.get(key)
        if value is None:
            missing[key] = None
        else:
            total += value
    if missing:
        raise MissingLatencyEntry(list(missing), table=table)
    return total


def _published_context(device: str, source: str, resolution: int | None) -> DeviceContext:
    return DeviceContext(device=device, runtime="published", runtime_version=source, input_resolution=resolution)


def ofa_table(path: str | Path, *, space: SearchSpace, device: str) -> LatencyTable:
    """A once-for-all / ProxylessNAS YAML table as an hwnas :class:`~hwnas.latency.tables.LatencyTable`.

    The YAML's ``mean`` becomes each entry's central value (the protocol records ``statistic: mean``)
    and its ``std`` and ``count`` are kept. The table is for ``space`` (whose ``layers()`` must produce
    the YAML's keys, as ``ofa_mbv3`` does).
    """
    path = Path(path)
    raw = _read_ofa_yaml(path)
    lut = _ofa_means(path, raw)
    entries = {}
    for key, mean in lut.items():
        std = raw[key].get("std")
        count = raw[key].get("count", 1)
        entries[key] = Entry(median_ms=mean, p10_ms=mean, p90_ms=mean, count=int(count),
                             iqr_ms=float(std) if isinstance(std, (int, float)) else 0.0)
    resolution = _resolution_from_name(path.name)
    space = _at_resolution(space, resolution, path)
    return _covering(space, path, new_table(
        space=space.name, space_params=resolved_params(space), space_resolved=resolved_params(space),
        context=_published_context(device, f"once-for-all LUT {path.name}", resolution),
        protocol={"statistic": "mean", "spread": "iqr_ms holds the published std", "mode": "published"},
        tool="nas latency import-published ofa", stamp="imported", entries=entries,
        provenance={"source": str(path), "citation": "Cai et al., Once-for-All, ICLR 2020 (mit-han-lab/once-for-all)"},
    ))


def hw_nas_bench_fbnet_table(path: str | Path, *, space: SearchSpace, metric: str,
                             device: str | None = None) -> LatencyTable:
    """One ``*_latency`` (ms) or ``*_energy`` (mJ) metric of HW-NAS-Bench's FBNet table (``fbnet_lut.json``) as
    an hwnas table; an energy table's evaluator reports ``energy_mj@device``.

    Args:
        path: The JSON file: metric name -> layer key -> value.
        space: The ``fbnet`` space (its ``layers()`` produce the JSON's keys).
        metric: A metric of the file, e.g. ``pixel3_latency`` or ``edgegpu_energy``.
        device: Device name (default: the metric without ``_latency`` / ``_energy``).
    """
    import json

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the HW-NAS-Bench FBNet table ({exc}); this looks like "
                          f"{looks_like(path)}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: not an HW-NAS-Bench FBNet table; this looks like {looks_like(path)}")
    suffixes = {"_latency": ("ms", "a latency in ms"), "_energy": ("mJ", "an energy in mJ")}
    usable = sorted(k for k in data if isinstance(data[k], Mapping) and k.endswith(tuple(suffixes)))
    if metric not in data:
        raise ConfigError(f"{path}: no metric {metric!r}; it has {', '.join(usable) or 'no latency or energy metric'}")
    suffix = next((s for s in suffixes if metric.endswith(s)), None)
    if suffix is None or not isinstance(data[metric], Mapping):
        raise ConfigError(f"{path}: {metric!r} is not a latency or energy metric (those are: {', '.join(usable)})")
    unit, what = suffixes[suffix]
    entries = {}
    for key, value in data[metric].items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"{path}: {metric}[{key!r}] = {value!r} is not {what}")
        entries[str(key)] = Entry(median_ms=float(value), p10_ms=float(value), p90_ms=float(value), count=1)
    device = device or metric[: -len(suffix)]
    return _covering(space, path, new_table(
        space=space.name, space_params=resolved_params(space), space_resolved=resolved_params(space),
        context=_published_context(device, f"HW-NAS-Bench {metric}", None),
        protocol={"statistic": "as published", "mode": "published"},
        tool="nas latency import-published hw-nas-bench-fbnet", stamp="imported", entries=entries,
        provenance={"source": str(path), "metric": metric,
                    "citation": "Li et al., HW-NAS-Bench, ICLR 2021 (RICE-EIC/HW-NAS-Bench)"},
        unit=unit,
    ))


def _at_resolution(space: SearchSpace, resolution: int | None, path: Path) -> SearchSpace:
    """An elastic-resolution space restricted to the one resolution a published file was measured at (a
    once-for-all table holds one input size): the imported table then says which resolution it prices."""
    from hwnas.search_spaces.base import ElasticResolutionSpace

    if resolution is None or not isinstance(space, ElasticResolutionSpace):
        return space
    params = resolved_params(space)
    if "resolutions" not in params or list(params["resolutions"]) == [resolution]:
        return space
    if resolution not in params["resolutions"]:
        raise ConfigError(f"{path}: a table for input size {resolution}, which the space's resolutions "
                          f"{list(params['resolutions'])} do not include")
    log.info("%s holds input size %d only: the table is for resolutions [%d]", path, resolution, resolution)
    return type(space)(**{**params, "resolutions": [resolution]})


def _covering(space: SearchSpace, path: Path, table: LatencyTable) -> LatencyTable:
    """``table`` if it prices every unit of ``space`` (where the space lists them), else one error naming how many
    are missing: the file is for another space, or other space parameters than those given."""
    from hwnas.search_spaces.base import UnitListedSpace

    if not isinstance(space, UnitListedSpace):
        return table
    units = list(dict.fromkeys(space.all_layers()))
    missing = table.missing(units)
    if missing:
        shown = ", ".join(f"{k}={v}" for k, v in resolved_params(space).items() if not isinstance(v, (list, dict)))
        raise ConfigError(f"{path}: prices only {len(units) - len(missing)} of the {len(units)} units of space "
                          f"{space.name!r} ({shown}); missing e.g. {', '.join(missing[:2])}: a table for another "
                          f"space or other parameters (--space, --space-param)")
    return table


def _resolution_from_name(name: str) -> int | None:
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else None
