"""Reading board kits and their results, and turning a board's ``results.json`` into a latency table."""

from __future__ import annotations

import json
import logging
import math
import os
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.latency.context import DeviceContext
from hwnas.latency.kit.make import (
    KIT_FORMAT,
    KIT_VERSION,
    MANIFEST,
    PROVIDER_NAMES,
    RESULTS_FORMAT,
    RUNTIMES,
    KitError,
    compute_kit_id,
)
from hwnas.latency.kit.run_kit import RESULTS_VERSION, STATISTICS, central_ms, timed_rounds
from hwnas.latency.tables.table import Entry, LatencyTable, is_integer, is_number, json_kind, new_table, shown_json
from hwnas.search_spaces.base import describe_differences, space_differences

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace

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


def kit_space_differences(manifest: Mapping[str, Any], space: SearchSpace, *,
                          ignore: Sequence[str] = ()) -> list[tuple[str, object, object]]:
    """Where the space a kit was made for differs from ``space``
    (:func:`~hwnas.search_spaces.base.space_differences`): by the resolved parameters the kit records, or, in a kit
    made before it recorded them, by its parameters resolved as ``space`` resolves them."""
    name = str(manifest.get("space"))
    resolved = manifest.get("space_resolved")
    if isinstance(resolved, dict):
        return space_differences(name, resolved, space, resolved=True, ignore=ignore)
    params = manifest.get("space_params")
    return space_differences(name, params if isinstance(params, dict) else None, space, ignore=ignore)


def _results_space_differences(results: Mapping[str, Any],
                               manifest: Mapping[str, Any]) -> list[tuple[str, object, object]]:
    """Where the space the results record differs from the kit's (results before run_kit.py recorded the resolved
    space compare by name only)."""
    name, kit_name = results.get("space"), manifest.get("space")
    if name is not None and name != kit_name:
        return [("space", name, kit_name)]
    theirs, mine = results.get("space_resolved"), manifest.get("space_resolved")
    if not isinstance(theirs, dict) or not isinstance(mine, dict):
        return []
    return [(k, theirs.get(k), mine.get(k)) for k in sorted(set(theirs) | set(mine)) if theirs.get(k) != mine.get(k)]


#: The results-file versions this hwnas reads (1: one timing per unit; 2: a list per unit, one per round; 3: a
#: list per network too).
RESULTS_VERSIONS = tuple(range(1, RESULTS_VERSION + 1))


def read_results(results_json: str | Path) -> dict[str, Any]:
    """A board's ``results.json`` (as ``run_kit.py`` writes it), every field checked for its type and shape.

    Every timing must hold a finite ``median_ms`` (and finite spread, where it has one): at least 0 for a unit or
    a carrier, above 0 for a whole network (a calibration divides by it).

    Raises:
        KitError: The file is missing, not JSON, not a kit results file, of a results version this hwnas does
            not read, or a field is missing or of the wrong type or value: one message naming the file and the
            field (and the unit or network).
    """
    path = Path(results_json)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KitError(f"cannot read kit results {path} ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise KitError(f"kit results {path} are corrupt or truncated ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise KitError(f"{path} is not an hwnas kit results file (no \"format\": \"{RESULTS_FORMAT}\")")
    version = data.get("version")
    if not is_integer(version) or version not in RESULTS_VERSIONS:
        raise KitError(f"kit results {path}: results version {shown_json(version)} is not one this hwnas reads "
                       f"(it reads versions {', '.join(map(str, RESULTS_VERSIONS))})")
    for required in ("kit_id", "settings", "units"):
        if required not in data:
            raise KitError(f"kit results {path}: missing field {required!r}")
    _ResultsFields(path).check(data)
    return data


class _ResultsFields:
    """Checks the fields of one results file: each wrong one is a :class:`KitError` naming the file and the
    field (with the unit, carrier or network and the round where it lies in one)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, name: str, problem: str) -> KitError:
        """``kit results PATH: field "NAME" PROBLEM`` (a problem starting with ``:`` follows the name at once)."""
        return KitError(f'kit results {self.path}: field "{name}"{"" if problem.startswith(":") else " "}{problem}')

    def mapping(self, data: Mapping[str, object], name: str, *, optional: bool = True) -> dict[str, object]:
        value = data.get(name)
        if value is None and optional:
            return {}
        if not isinstance(value, dict):
            raise self.error(name, f"must be an object{' or null' if optional else ''}, got {json_kind(value)}")
        return value

    def check(self, data: Mapping[str, object]) -> None:
        if not isinstance(data["kit_id"], str):
            raise self.error("kit_id", f"must be a string, got {json_kind(data['kit_id'])}")
        self.settings(self.mapping(data, "settings", optional=False))
        self.protocol(self.mapping(data, "protocol"))
        if data.get("space") is not None and not isinstance(data["space"], str):
            raise self.error("space", f"must be a string, got {json_kind(data['space'])}")
        self.mapping(data, "board")
        for name, what, positive in (("units", "unit", False), ("carriers", "carrier", False),
                                     ("networks", "network", True)):
            for key, value in self.mapping(data, name, optional=name != "units").items():
                self.timings(name, what, key, value, positive=positive)
        for name in ("failed", "failed_networks"):
            for key, why in self.mapping(data, name).items():
                if not isinstance(why, str):
                    raise self.error(name, f"must map each {'unit' if name == 'failed' else 'network'} to its "
                                           f"error (a string), got {json_kind(why)} for {key!r}")
        self.finite(data, "")

    def settings(self, settings: Mapping[str, object]) -> None:
        runtime = settings.get("runtime")
        if runtime is not None and runtime not in RUNTIMES:
            raise self.error("settings.runtime", f"must be one of {', '.join(RUNTIMES)} (what run_kit.py measures "
                                                 f"with), got {shown_json(runtime)}")
        for name in ("provider", "precision"):
            if settings.get(name) is not None and not isinstance(settings[name], str):
                raise self.error(f"settings.{name}", f"must be a string or null, got {shown_json(settings[name])}")
        threads = settings.get("threads")
        if threads is not None and (not is_integer(threads) or threads < 0):
            raise self.error("settings.threads", f"must be an integer >= 0 or null, got {shown_json(threads)}")

    def protocol(self, protocol: Mapping[str, object]) -> None:
        rounds = protocol.get("rounds")
        if rounds is not None and (not is_integer(rounds) or rounds < 1):
            raise self.error("protocol.rounds", f"must be an integer >= 1, got {shown_json(rounds)}")
        statistic = protocol.get("statistic")
        # the message the import has always given (and run_kit.py gives on the board)
        if statistic is not None and (not isinstance(statistic, str) or statistic not in STATISTICS):
            raise KitError(f"kit results {self.path}: kit protocol: unknown statistic {shown_json(statistic)} (choose "
                           f"from {', '.join(STATISTICS)})")
        mode = protocol.get("mode")
        if mode is not None and (not isinstance(mode, str) or mode not in UNIT_PROTOCOL):
            raise self.error("protocol.mode", f"must be one of {', '.join(UNIT_PROTOCOL)}, got {shown_json(mode)}")

    def timings(self, name: str, what: str, key: str, value: object, *, positive: bool) -> None:
        """One unit's, carrier's or network's timings: one per round (a list), or a single one (results version
        1 for units, before 3 for networks)."""
        if isinstance(value, dict):
            self.timing(name, f"{what} {key!r}", value, positive=positive)
        elif isinstance(value, list):
            for r, stats in enumerate(value):
                self.timing(name, f"{what} {key!r}, round {r + 1}", stats, positive=positive)
        else:
            raise self.error(name, f": {what} {key!r} must be a list of timings (one per round), got "
                                   f"{json_kind(value)}")

    def timing(self, name: str, where: str, stats: object, *, positive: bool) -> None:
        if not isinstance(stats, dict):
            raise self.error(name, f": {where} must be a timing (an object with median_ms), got {json_kind(stats)}")
        if "median_ms" not in stats:
            raise self.error(name, f": {where} has no median_ms")
        for field in ("median_ms", "p10_ms", "p90_ms", "min_ms", "iqr_ms"):
            if field not in stats:
                continue
            value = stats[field]
            low = positive and field != "iqr_ms"
            if not is_number(value) or not math.isfinite(value) or value < 0 or (low and value == 0):
                what = "a finite positive number" if low else "a finite non-negative number"
                raise self.error(name, f": {where}: {field} must be {what} (ms), got {shown_json(value)}")
        count = stats.get("count")
        if count is not None and (not is_integer(count) or count < 0):
            raise self.error(name, f": {where}: count must be an integer >= 0, got {shown_json(count)}")

    def finite(self, value: object, name: str) -> None:
        """No NaN or infinity anywhere (Python's JSON reads them; no table may hold them)."""
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(name, f"holds {value}, which is not a number a table can keep")
        if isinstance(value, dict):
            for k, v in value.items():
                self.finite(v, f"{name}.{k}" if name else str(k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.finite(v, f"{name}[{i}]")


def import_results(results_json: str | Path, kit: str | Path, out: str | Path, *,
                   allow_partial: bool = False, force: bool = False, save: bool = True) -> LatencyTable:
    """Turn a board's ``results.json`` into a latency table and save it atomically at ``out``.

    The table's context is the kit's intended one (device, batch, power mode, input resolution) with what
    actually measured on the board (runtime, its version, provider, threads, precision). Its provenance
    keeps the board's facts, the kit id and dates, and the whole networks measured end to end under
    ``provenance["networks"]`` (arch, layer keys, median and spread in ms) for ``nas latency validate``.
    A unit timed in context (a kit made with ``in_context``) is entered less its carriers, round by round; with
    several rounds the entry is the median of the rounds, as ``nas latency profile`` keeps it. A network the
    table cannot price (a unit it needs failed or is not measured yet) is left out of ``provenance["networks"]``
    and named under ``provenance["failed_networks"]``, so that whatever calibrates on those networks can.

    Everything is read and checked before anything is written: a refused import leaves no file at ``out`` (and
    an existing one as it was).

    Args:
        results_json: The results file from the board.
        kit: The kit the results are for (``kit.zip``, its folder, or its ``manifest.json``).
        out: Where the table goes.
        allow_partial: Import an unfinished run (units not yet measured in every round are simply absent).
        force: Replace an existing file at ``out`` (without it, an existing file is refused before
            anything is read or written).
        save: Write the table at ``out``. With False nothing is written (``out`` is still checked first), for a
            caller that calibrates the table and then writes it once, complete.

    Returns:
        The table (saved, unless not ``save``).

    Raises:
        KitError: The results are from another kit (both ids named), incomplete, malformed (the field named),
            of an unknown results version, or contradict the kit (a setting the board cannot change, named with
            both values).
        OutputExists: ``out`` exists and not ``force`` (or is a folder).
    """
    from hwnas.fileio import refuse_overwrite

    refuse_overwrite([Path(out)], force=force)
    manifest = read_manifest(kit)
    results = read_results(results_json)
    if results["kit_id"] != manifest["kit_id"]:
        differ = _results_space_differences(results, manifest)
        other = (f": the results are of another space than the kit's: "
                 f"{describe_differences(differ, 'results', 'kit')}") if differ else ""
        raise KitError(f"{results_json} holds results of kit {results['kit_id']}, but {kit} is kit "
                       f"{manifest['kit_id']}{other}")
    _check_against_kit(results, manifest, results_json, kit)
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
    _require_statistic(results, statistic, results_json)
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
    # a network whose units the table lacks cannot be priced, so it cannot calibrate or validate the table either
    unpriced: dict[str, str] = {}
    for net in networks:
        lacking = sorted({k for k in net["layers"] if k not in entries})
        if lacking:
            unpriced[net["arch_id"]] = (f"import: the table has no entry for {len(lacking)} of its units "
                                        f"({', '.join(lacking[:3])}{', ...' if len(lacking) > 3 else ''})")
    if unpriced:
        log.warning("%d measured network(s) need units the table lacks (failed or not measured yet); left out of "
                    "its calibration: %s", len(unpriced), ", ".join(sorted(unpriced)))
        networks = [n for n in networks if n["arch_id"] not in unpriced]
    provenance = {
        "kit_id": manifest["kit_id"],
        "kit_created": manifest.get("created"),
        "hwnas_version_kit": manifest.get("hwnas_version"),
        "board": board,
        "measured_started": results.get("started"),
        "measured_finished": results.get("finished"),
        "results_file": os.path.basename(str(results_json)),
        "networks": networks,
        "failed_networks": {**(manifest.get("failed_networks") or {}), **(results.get("failed_networks") or {}),
                            **unpriced},
    }
    resolved = manifest.get("space_resolved")
    table = new_table(space=str(manifest["space"]), space_params=dict(manifest.get("space_params") or {}),
                      space_resolved=resolved if isinstance(resolved, dict) else None,
                      context=context, protocol=protocol,
                      tool=f"hwnas board kit (run_kit.py {results.get('runner_version', '?')})",
                      provenance=provenance, stamp="imported", entries=entries, failed=failed)
    if save:
        table.save(out)
    log.info("imported %d unit(s) (%d failed) and %d network(s) of kit %s%s", len(entries), len(failed),
             len(networks), manifest["kit_id"][:16], f" -> {out}" if save else "")
    return table


def _check_against_kit(results: dict[str, Any], manifest: dict[str, Any], results_json: str | Path,
                       kit: str | Path) -> None:
    """Refuse results that contradict their kit: another space, a precision the board cannot choose (run_kit.py
    always measures the kit's), or networks the kit does not hold.

    The runtime, provider and threads may differ from the kit's intended ones (the board can override them;
    the table records what measured)."""
    kit_id = str(manifest["kit_id"])[:16]
    intended = dict(manifest.get("context") or {})
    settings = results["settings"]
    space = results.get("space")
    if space is not None and space != manifest.get("space"):
        raise KitError(f"kit results {results_json}: field \"space\" is {space!r}, but kit {kit_id} ({kit}) is for "
                       f"space {manifest.get('space')!r}")
    kit_precision = intended.get("precision") or "fp32"
    precision = settings.get("precision")
    if precision is not None and precision != kit_precision:
        raise KitError(f"kit results {results_json}: field \"settings.precision\" is {precision!r}, but kit {kit_id} "
                       f"({kit}) is for precision {kit_precision!r} (run_kit.py always measures the kit's precision)")
    known = {n["arch_id"] for n in manifest.get("networks") or []} | set(manifest.get("failed_networks") or {})
    unknown = sorted((set(results.get("networks") or {}) | set(results.get("failed_networks") or {})) - known)
    if unknown:
        raise KitError(f"kit results {results_json}: field \"networks\" has network(s) kit {kit_id} does not: "
                       f"{', '.join(unknown[:5])}")


def _require_statistic(results: dict[str, Any], statistic: str, results_json: str | Path) -> None:
    """Every timing must hold the field the kit protocol's ``statistic`` reads (``p10_ms`` for ``p10``)."""
    field = STATISTICS.get(statistic)
    if field is None:
        raise KitError(f"kit protocol: unknown statistic {statistic!r} (choose from {', '.join(STATISTICS)})")
    for name, what in (("units", "unit"), ("carriers", "carrier"), ("networks", "network")):
        for key, value in (results.get(name) or {}).items():
            for r, stats in enumerate(timed_rounds(value)):
                if field not in stats:
                    raise KitError(f"kit results {results_json}: field \"{name}\": {what} {key!r}, round {r + 1}: "
                                   f"no {field}, which the kit protocol's statistic {statistic!r} reads")


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
