"""Reading board kits and their results, and turning a board's ``results.json`` into a latency table."""

from __future__ import annotations

import json
import logging
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.latency.context import DeviceContext
from hwnas.latency.kit.make import (
    KIT_FORMAT,
    KIT_VERSION,
    MANIFEST,
    PROVIDER_NAMES,
    RESULTS_FORMAT,
    KitError,
    compute_kit_id,
)
from hwnas.latency.run_kit import central_ms, timed_rounds
from hwnas.latency.tables.table import Entry, LatencyTable, new_table

log = logging.getLogger(__name__)


def read_manifest(kit: str | Path) -> dict[str, Any]:
    """The manifest of a kit: a ``kit.zip``, an extracted kit folder, or a ``manifest.json``.

    Raises:
        KitError: The file is missing, is not a kit manifest, or was edited (its ``kit_id`` does not match
            its content).
    """
    path = Path(kit)
    try:
        if path.is_dir():
            text = (path / MANIFEST).read_text(encoding="utf-8")
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                text = zf.read(MANIFEST).decode("utf-8")
        else:
            text = path.read_text(encoding="utf-8")
        manifest = json.loads(text)
    except KeyError:
        raise KitError(f"{path} has no {MANIFEST}: it is not an hwnas board kit") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise KitError(f"cannot read the board kit manifest from {path} ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != KIT_FORMAT:
        raise KitError(f"{path} is not an hwnas board kit (no \"format\": \"{KIT_FORMAT}\")")
    version = manifest.get("version")
    if not isinstance(version, int) or not 1 <= version <= KIT_VERSION:
        raise KitError(f"{path}: kit format version {version!r} is not supported (this hwnas reads {KIT_VERSION})")
    if manifest.get("kit_id") != compute_kit_id(manifest):
        raise KitError(f"{path}: the manifest was edited (its kit_id {manifest.get('kit_id')} does not match its "
                       "content)")
    return manifest


def read_results(results_json: str | Path) -> dict[str, Any]:
    """A board's ``results.json`` (as ``run_kit.py`` writes it).

    Raises:
        KitError: The file is missing, not JSON, or not a kit results file.
    """
    path = Path(results_json)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KitError(f"cannot read kit results {path} ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise KitError(f"kit results {path} are corrupt or truncated ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise KitError(f"{path} is not an hwnas kit results file (no \"format\": \"{RESULTS_FORMAT}\")")
    for required in ("kit_id", "settings", "units"):
        if required not in data:
            raise KitError(f"kit results {path}: missing field {required!r}")
    return data


def import_results(results_json: str | Path, kit: str | Path, out: str | Path, *,
                   allow_partial: bool = False, force: bool = False) -> LatencyTable:
    """Turn a board's ``results.json`` into a latency table and save it atomically at ``out``.

    The table's context is the kit's intended one (device, batch, power mode, input resolution) with what
    actually measured on the board (runtime, its version, provider, threads, precision). Its provenance
    keeps the board's facts, the kit id and dates, and the whole networks measured end to end under
    ``provenance["networks"]`` (arch, layer keys, median and spread in ms) for ``nas latency validate``.
    A unit timed in context (a kit made with ``in_context``) is entered less its carriers, round by round; with
    several rounds the entry is the median of the rounds, as ``nas latency profile`` keeps it.

    Args:
        results_json: The results file from the board.
        kit: The kit the results are for (``kit.zip``, its folder, or its ``manifest.json``).
        out: Where the table goes.
        allow_partial: Import an unfinished run (units not yet measured in every round are simply absent).
        force: Replace an existing file at ``out`` (without it, an existing file is refused before
            anything is read or written).

    Returns:
        The saved table.

    Raises:
        KitError: The results are from another kit (both ids named), incomplete, or malformed.
        OutputExists: ``out`` exists and not ``force`` (or is a folder).
    """
    from hwnas.fileio import refuse_overwrite

    refuse_overwrite([Path(out)], force=force)
    manifest = read_manifest(kit)
    results = read_results(results_json)
    if results["kit_id"] != manifest["kit_id"]:
        raise KitError(f"{results_json} holds results of kit {results['kit_id']}, but {kit} is kit "
                       f"{manifest['kit_id']}")
    unit_keys = [u["key"] for u in manifest["units"]]
    protocol = dict(results.get("protocol") or manifest["protocol"])
    rounds = max(1, int(protocol.get("rounds") or 1))
    # a unit is measured once it has every round (version-1 results hold one timing per unit, not a list)
    timed = {k: timed_rounds(v) for k, v in results["units"].items()}
    measured = {k: v for k, v in timed.items() if len(v) >= rounds}
    run_failed = dict(results.get("failed") or {})
    unknown = sorted((set(timed) | set(run_failed)) - set(unit_keys))
    if unknown:
        raise KitError(f"{results_json} has unit(s) kit {manifest['kit_id'][:16]} does not: "
                       f"{', '.join(unknown[:5])}")
    missing = [k for k in unit_keys if k not in measured and k not in run_failed]
    if missing and not allow_partial:
        raise KitError(f"{results_json} covers {len(unit_keys) - len(missing)} of {len(unit_keys)} units of kit "
                       f"{manifest['kit_id'][:16]}: rerun run_kit.py with the same --out to finish (it resumes)")
    statistic = str(protocol.get("statistic", "median"))
    mode = str(protocol.get("mode") or "isolated")
    baselines = {u["key"]: u.get("baseline") or [] for u in manifest["units"]}
    carrier_timings = {cid: timed_rounds(v) for cid, v in (results.get("carriers") or {}).items()}
    try:
        entries = {k: _entry(k, v[:rounds], baselines[k], carrier_timings, statistic) for k, v in measured.items()}
    except ValueError as exc:
        raise KitError(f"{results_json}: {exc}") from None

    settings = dict(results["settings"])
    board = dict(results.get("board") or {})
    intended = dict(manifest["context"])
    runtime = str(settings.get("runtime") or intended["runtime"])
    version = board.get("onnxruntime") if runtime == "onnxruntime" else board.get("trtexec_version")
    provider = settings.get("provider")
    context = DeviceContext(
        device=intended["device"], runtime=runtime, runtime_version=str(version or ""), provider=provider,
        precision=settings.get("precision") or intended.get("precision", "fp32"),
        batch_size=int(intended.get("batch_size", 1)),
        threads=settings.get("threads") if provider == PROVIDER_NAMES["cpu"] else None,
        input_resolution=intended.get("input_resolution"), power_mode=intended.get("power_mode"),
    )
    for name in ("runtime", "provider", "threads", "precision"):
        if intended.get(name) != getattr(context, name):
            log.warning("kit %s was meant for %s=%r but was measured with %r", manifest["kit_id"][:16], name,
                        intended.get(name), getattr(context, name))

    protocol.update({"mode": mode, "units": UNIT_PROTOCOL.get(mode, mode), "opset": manifest.get("opset")})
    protocol.update({k: v for k, v in settings.items() if k.startswith("trtexec_")})
    # a network counts once it has every round (results before version 3 hold one timing per network, a dict)
    net_rounds: dict[str, list[dict[str, Any]]] = {}
    for arch_id, value in (results.get("networks") or {}).items():
        timings = timed_rounds(value)
        if isinstance(value, dict) or len(timings) >= rounds:
            net_rounds[arch_id] = timings[:rounds]
    networks = [{"arch_id": n["arch_id"], "arch": n["arch"], "layers": n["layers"],
                 **_network_timing(net_rounds[n["arch_id"]], statistic)}
                for n in manifest.get("networks") or [] if n["arch_id"] in net_rounds]
    failed = {k: str(v) for k, v in (manifest.get("failed") or {}).items()}
    failed.update({k: f"measure: {v}" for k, v in run_failed.items() if k not in measured})
    provenance = {
        "kit_id": manifest["kit_id"],
        "kit_created": manifest.get("created"),
        "hwnas_version_kit": manifest.get("hwnas_version"),
        "board": board,
        "measured_started": results.get("started"),
        "measured_finished": results.get("finished"),
        "results_file": os.path.basename(str(results_json)),
        "networks": networks,
        "failed_networks": {**(manifest.get("failed_networks") or {}), **(results.get("failed_networks") or {})},
    }
    table = new_table(space=str(manifest["space"]), space_params=dict(manifest.get("space_params") or {}),
                      context=context, protocol=protocol,
                      tool=f"hwnas board kit (run_kit.py {results.get('runner_version', '?')})",
                      provenance=provenance, stamp="imported", entries=entries, failed=failed)
    table.save(out)
    log.info("imported %d unit(s) (%d failed) and %d network(s) of kit %s -> %s", len(entries), len(failed),
             len(networks), manifest["kit_id"][:16], out)
    return table


UNIT_PROTOCOL = {
    "isolated": "isolated, one ONNX graph per unit",
    "in_context": "one ONNX graph per unit, behind a cheap producer of its input whose own timing (of the same "
                  "round) is subtracted",
    "between": "one ONNX graph per unit, between a cheap producer of its input and a cheap consumer of its output, "
               "both subtracted (timed alone in the same round)",
}


def _entry(key: str, rounds: list[dict[str, Any]], baseline: list[Any], carriers: dict[str, list[dict[str, Any]]],
           statistic: str) -> Entry:
    """A unit's table entry from its timings, one per round, less its carriers' timings of the same round (each
    statistic floored at zero: noise can undercut a tiny unit). With several rounds, the entry is the median of
    the rounds' ``statistic``, its spread that of the last round, as ``nas latency profile`` keeps it."""
    fields = ("median_ms", "p10_ms", "p90_ms")
    values: list[dict[str, Any]] = []
    for r, stats in enumerate(rounds):
        stats = dict(_central(stats, statistic))
        for cid, coefficient in baseline:
            timings = carriers.get(cid) or []
            if len(timings) <= r:
                raise ValueError(f"unit {key!r} needs carrier {cid} of round {r + 1}, which the results do not hold")
            carrier = _central(timings[r], statistic)
            for field in fields:
                stats[field] = float(stats[field]) - float(coefficient) * float(carrier[field])
        values.append({**stats, **{f: max(float(stats[f]), 0.0) for f in fields}} if baseline else stats)
    entry = Entry.from_dict(key, values[-1])
    if len(values) == 1:
        return entry
    central = [float(v["median_ms"]) for v in values]
    return Entry(median_ms=float(np.median(central)), p10_ms=entry.p10_ms, p90_ms=entry.p90_ms, iqr_ms=entry.iqr_ms,
                 count=sum(int(v.get("count", 0)) for v in values), rounds_ms=tuple(central))


def _network_timing(rounds: list[dict[str, Any]], statistic: str) -> dict[str, Any]:
    """A whole network's timing from its rounds: the median of the rounds' ``statistic`` (as ``median_ms``), the
    rest (spread, count) of the last round's, and with several rounds each round's value (``rounds_ms``)."""
    values = [_central(r, statistic) for r in rounds]
    if len(values) == 1:
        return values[0]
    central = [float(v["median_ms"]) for v in values]
    out = {**values[-1], "median_ms": float(np.median(central)), "rounds_ms": central}
    if "run_median_ms" in out:
        out["run_median_ms"] = float(np.median([float(v["run_median_ms"]) for v in values]))
    return out


def _central(stats: dict[str, Any], statistic: str) -> dict[str, Any]:
    """A board's timing statistics with the kit protocol's ``statistic`` as the central value (``median_ms``;
    the run's own median is kept as ``run_median_ms``)."""
    if statistic == "median":
        return dict(stats)
    try:
        value = central_ms(stats, statistic)
    except (KeyError, TypeError) as exc:
        raise KitError(f"kit results: a timing has no {statistic} ({exc})") from None
    except ValueError as exc:
        raise KitError(f"kit protocol: {exc}") from None
    return {**stats, "median_ms": value, "run_median_ms": stats.get("median_ms")}


def measured_networks(table: LatencyTable) -> list[tuple[Architecture, list[str], float]]:
    """The whole networks a board measured end to end, from a kit-imported table's provenance.

    Returns:
        ``(architecture, layer keys, measured median ms)`` per network (empty for other tables).
    """
    out = []
    for net in table.provenance.get("networks") or []:
        out.append((Architecture.from_dict(net["arch"]), list(net["layers"]), float(net["median_ms"])))
    return out
