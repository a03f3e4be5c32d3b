"""Readers for published latency lookup tables (once-for-all / ProxylessNAS YAML files).

Once-for-all's tables (``{device}/{image_size}_lookup_table.yaml``) are YAML mappings of a layer
key such as ``expanded_conv-input:28x28x40-output:28x28x40-expand:240-kernel:5-stride:1-idskip:1-se:1-hs:1``
to ``{count, mean, std}`` (ProxylessNAS's ``mobile_trim.yaml``: ``{count, mean, var}``), the mean in
milliseconds. A network is priced by summing the means over its layer keys, as once-for-all's own
latency estimator does; :meth:`hwnas.search_spaces.ofa.OFAMobileNetV3Space.layers` gives those keys.

These functions read the files as they are published; wrapping them into the project's versioned
table format (with a ``DeviceContext`` and provenance) is left to the table module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from hwnas.errors import ConfigError, MissingLatencyEntry


def load_ofa_lut(path: str | Path) -> dict[str, float]:
    """Read a once-for-all / ProxylessNAS latency lookup table.

    Args:
        path: A ``*_lookup_table.yaml`` (or ``mobile_trim.yaml``) file, read with ``yaml.safe_load``.

    Returns:
        Layer key -> mean latency in milliseconds (the entry's ``mean`` field).

    Raises:
        ConfigError: The file is missing, is not a mapping, or an entry has no finite ``mean``
            (the message names the file and the key).
    """
    path = Path(path)
    try:
        with path.open("r", encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read latency table ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, Mapping) or not data:
        raise ConfigError(f"{path}: a latency table is a non-empty mapping of layer key -> {{mean, ...}}")
    lut: dict[str, float] = {}
    for key, entry in data.items():
        if not isinstance(entry, Mapping) or "mean" not in entry:
            raise ConfigError(f"{path}: entry {key!r} has no 'mean' field")
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
