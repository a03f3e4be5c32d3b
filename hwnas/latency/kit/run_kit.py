#!/usr/bin/env python3
"""Measure an hwnas board kit on the board itself: one file, Python 3.8+, numpy + onnxruntime or trtexec.

An hwnas board kit (``kit.zip``, made by ``nas latency kit``) holds one ONNX file per latency-table unit
of a search space, optionally a few whole networks, and a ``manifest.json`` that lists them with their
size and SHA-256. This script needs neither hwnas nor torch. On the board::

    python3 run_kit.py kit.zip --out results.json [--runtime onnxruntime|trtexec]
                       [--provider CPUExecutionProvider] [--threads N]

It extracts into a temporary folder only the files the kit's manifest lists, each streamed with a limit of
the size the manifest declares and checked against its hash (a kit with absolute paths, ``..`` components
or links is refused: nothing is written outside that folder; members the manifest does not list are never
read), times every unit and then every whole network (warm-up, then repeated timed runs; median, p10/p90, IQR
and count; in as many rounds as the kit's protocol says), shows progress with an ETA on stderr, and rewrites
``results.json`` after every timing. A kit made with ``nas latency kit --in-context`` holds each unit behind a
cheap producer of its input (and, ``between``, before a cheap consumer of its output); the runner also times
those carriers alone, afresh in every round, and ``nas latency import`` subtracts them. Run the same command again
after an interruption and the units already in ``results.json`` are kept, not measured again; a
``results.json`` of another kit is refused.
Bring ``results.json`` back and turn it into a latency table with ``nas latency import``.

Exit status: 0 all measured, 1 some units failed (they are listed in the results), 2 the kit or the
arguments are wrong, 130 interrupted (rerun to resume).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from datetime import datetime, timezone
from typing import (
    IO,
    Any,
    BinaryIO,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    TypedDict,
    Union,
)

RUNNER_VERSION = "3"
KIT_FORMAT = "hwnas.latency-kit"
# 2: the manifest declares every file's size (extraction reads no more than that); 3: carriers (units timed in
# context, with their producer and consumer subtracted on import) and measuring rounds
KIT_VERSION = 3
MIN_KIT_VERSION = 2  # what this runner extracts (version 1 kits declare no sizes: use their own run_kit.py)
RESULTS_FORMAT = "hwnas.latency-kit-results"
# 2: a unit's and a carrier's timings are lists, one per round (1: a unit's one timing); 3: a whole network's too
RESULTS_VERSION = 3
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 << 20  # a manifest is read whole; more than this is not a kit's
CHUNK = 1 << 20  # extraction reads members in blocks of this many bytes
TRTEXEC_METRICS = ("computeMs", "latencyMs")
#: What a kit's ONNX graphs hold (its manifest's ``graphs``): fp32 (a runtime's flags pick the precision), fp16
#: weights and activations, or int8 Q/DQ, onnxruntime's (uint8 activations) or TensorRT's (symmetric int8).
GRAPHS = ("fp32", "float16", "int8-qdq", "int8-qdq-symmetric")
#: The graphs that carry a precision themselves, by precision (``nas latency kit --typed`` for trtexec).
TYPED_GRAPHS = {"fp16": "float16", "int8": "int8-qdq-symmetric"}


class KitProtocol(TypedDict, total=False):
    """A measurement protocol as a mapping: a kit manifest's ``protocol``, hwnas's ``MeasureProtocol.to_dict()``."""

    warmup: int
    repeats: int
    min_time_s: float
    max_repeats: int
    statistic: str
    rounds: int
    mode: str  # a kit's: "isolated", or how its units are held in context


class TimingStats(TypedDict):
    """What :func:`stats_from_ms` gives for one timing (milliseconds, and the count of timed runs)."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    iqr_ms: float
    min_ms: float
    count: int


class _Digest(Protocol):
    """What :func:`copy_limited` feeds: a ``hashlib`` object."""

    def update(self, __data: bytes) -> None: ...


class KitRunError(Exception):
    """The kit, the results file or the arguments cannot be used; the message says why."""


def now_iso() -> str:
    """The current UTC time, ISO 8601, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------------------------------
# safe extraction and verification


def check_member_name(name: str) -> List[str]:
    """Split a path stored in the kit into its components, refusing anything that could leave the folder.

    Args:
        name: A zip member name or a path from the manifest (``/``-separated).

    Returns:
        The path's components (none empty, none ``.`` or ``..``).

    Raises:
        KitRunError: The path is absolute, has a drive letter, a backslash or a ``..`` component.
    """
    if not name or name.startswith("/") or "\\" in name or re.match(r"^[A-Za-z]:", name) or "\x00" in name:
        raise KitRunError("unsafe path %r in the kit (absolute, drive or backslash); refusing to extract" % name)
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise KitRunError("unsafe path %r in the kit (a '..' component); refusing to extract" % name)
    if not parts:
        raise KitRunError("empty path %r in the kit; refusing to extract" % name)
    return parts


def _member_size_error(name: str, label: str, size: int, declared: int) -> KitRunError:
    return KitRunError("kit member %r (%s) is %s bytes, the manifest says %d; refusing to extract"
                       % (name, label, "more than %d" % declared if size < 0 else str(size), declared))


def copy_limited(src: IO[bytes], out: Optional[IO[bytes]], declared: int, name: str, label: str,
                 digest: Optional[_Digest] = None) -> int:
    """Copy ``src`` to ``out`` in blocks, never more than ``declared`` bytes, and require exactly that many.

    The byte count comes from the data read, not from the zip's headers (which the archive's maker wrote).

    Args:
        src: A readable binary stream (a zip member).
        out: A writable binary stream, or None to only count (and hash).
        declared: The size the manifest declares.
        name: The member's name, for the message.
        label: What the member is (a unit key, a network id), for the message.
        digest: A ``hashlib`` object fed with every block, or None.

    Returns:
        The number of bytes copied (``declared``).

    Raises:
        KitRunError: The member holds more or fewer bytes than declared (reading stops at one byte over).
    """
    copied = 0
    while True:
        block = src.read(min(CHUNK, declared + 1 - copied))
        if not block:
            break
        copied += len(block)
        if copied > declared:
            raise _member_size_error(name, label, -1, declared)
        if digest is not None:
            digest.update(block)
        if out is not None:
            out.write(block)
    if copied != declared:
        raise _member_size_error(name, label, copied, declared)
    return copied


def _declared_files(manifest: Dict[str, Any]) -> Dict[Tuple[str, ...], Dict[str, Any]]:
    """The files the manifest lists (units, carriers, networks), by path components, each with its size and hash.

    Raises:
        KitRunError: An entry has an unsafe path, no size, or two entries give one path different contents.
    """
    files: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    items = manifest.get("units")
    networks = manifest.get("networks") or []
    carriers = manifest.get("carriers") or []
    if not isinstance(items, list) or not isinstance(networks, list) or not isinstance(carriers, list):
        raise KitRunError("the kit's %s: \"units\", \"carriers\" and \"networks\" must be lists" % MANIFEST)
    for item in list(items) + list(carriers) + list(networks):
        if not isinstance(item, dict) or not isinstance(item.get("file"), str):
            raise KitRunError("the kit's %s lists an entry without a \"file\": %r" % (MANIFEST, item))
        name = item["file"]
        label = str(item.get("key") or item.get("arch_id") or item.get("id") or "?")
        size = item.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise KitRunError("the kit's %s declares no size in bytes for %s (%s); make the kit again with "
                              "'nas latency kit'" % (MANIFEST, name, label))
        sha = item.get("sha256")
        if sha is not None and not (isinstance(sha, str) and re.match(r"^[0-9a-f]{64}$", sha)):
            raise KitRunError("the kit's %s declares a malformed sha256 for %s (%s)" % (MANIFEST, name, label))
        parts = tuple(check_member_name(name))
        entry = {"file": name, "label": label, "size": size, "sha256": sha}
        if parts in files and (files[parts]["size"], files[parts]["sha256"]) != (size, sha):
            raise KitRunError("the kit's %s lists %s twice with different contents" % (MANIFEST, name))
        files.setdefault(parts, entry)
    return files


def safe_extract(zip_path: str, dest: str) -> List[str]:
    """Extract the kit's manifest and the files it lists into the folder ``dest``, and nothing else.

    First, every member's name and type is checked (from the zip's directory, reading no data): absolute
    paths, ``..`` components, backslashes, symbolic links, anything that is neither a plain file nor a
    folder, and names that appear twice make the whole kit refused. Then ``manifest.json`` is read (at
    most :data:`MAX_MANIFEST_BYTES`) and checked (format, version, kit id). Then only the unit and network
    files it lists are extracted, each streamed with a byte limit: a member larger or smaller than the
    size the manifest declares, or whose SHA-256 differs from the manifest's, is refused (naming it) and
    what was extracted is removed. Members the manifest does not list are never read; they are named in
    one warning line. Nothing is written outside ``dest``.

    Args:
        zip_path: The kit.
        dest: An existing, empty folder.

    Returns:
        The names of the extracted files (the manifest first).

    Raises:
        KitRunError: The file is not a zip, a member is unsafe, missing, of another size or hash than
            declared (its name is in the message), or the manifest is not a kit manifest.
    """
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise KitRunError("%s is not a readable zip file (%s)" % (zip_path, exc)) from exc
    root = os.path.realpath(dest)
    written: List[str] = []
    created: List[str] = []
    with archive:
        by_parts: Dict[Tuple[str, ...], zipfile.ZipInfo] = {}
        for info in archive.infolist():
            parts = tuple(check_member_name(info.filename))
            file_type = stat.S_IFMT((info.external_attr >> 16) & 0xFFFF)  # 0 where the zip kept no Unix mode
            if file_type == stat.S_IFLNK:
                raise KitRunError("kit member %r is a symbolic link; refusing to extract" % info.filename)
            if file_type not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise KitRunError("kit member %r is not a plain file; refusing to extract" % info.filename)
            if info.is_dir() or file_type == stat.S_IFDIR:
                continue
            if parts in by_parts:
                raise KitRunError("kit member %r appears twice; refusing to extract" % info.filename)
            by_parts[parts] = info

        manifest_info = by_parts.get((MANIFEST,))
        if manifest_info is None:
            raise KitRunError("the kit has no %s: it is not an hwnas board kit" % MANIFEST)
        if manifest_info.file_size > MAX_MANIFEST_BYTES:
            raise KitRunError("the kit's %s is %d bytes (at most %d are read); refusing to extract"
                              % (MANIFEST, manifest_info.file_size, MAX_MANIFEST_BYTES))
        try:
            with archive.open(manifest_info) as src:
                manifest_bytes = src.read(MAX_MANIFEST_BYTES + 1)
        except (OSError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile, zlib.error) as exc:
            raise KitRunError("cannot read the kit's %s (%s)" % (MANIFEST, exc)) from exc
        if len(manifest_bytes) > MAX_MANIFEST_BYTES:
            raise KitRunError("the kit's %s is larger than %d bytes; refusing to extract"
                              % (MANIFEST, MAX_MANIFEST_BYTES))
        manifest = parse_manifest(manifest_bytes)
        declared = _declared_files(manifest)

        listed = manifest.get("runner")
        runner = listed if isinstance(listed, dict) else {}
        known = set(declared) | {(MANIFEST,)}
        if isinstance(runner.get("file"), str):
            known.add(tuple(p for p in runner["file"].split("/") if p not in ("", ".")))
        extra = sorted("/".join(parts) for parts in by_parts if parts not in known)
        if extra:
            say("ignoring %d kit member(s) the manifest does not list (not extracted): %s%s"
                % (len(extra), ", ".join(extra[:5]), ", ..." if len(extra) > 5 else ""))

        plan = []
        for parts, item in declared.items():
            found = by_parts.get(parts)
            if found is None:
                raise KitRunError("kit %s is incomplete: %s (%s) is missing" % (manifest["kit_id"], item["file"],
                                                                              item["label"]))
            if found.file_size != item["size"]:  # the header may lie; the copy below counts the bytes itself
                raise _member_size_error(item["file"], item["label"], found.file_size, item["size"])
            target = os.path.realpath(os.path.join(root, *parts))
            if os.path.commonpath([root, target]) != root:
                raise KitRunError("kit member %r would be written outside %s; refusing to extract"
                                  % (found.filename, dest))
            plan.append((found, parts, target, item))

        def create(target: str, name: str) -> BinaryIO:
            """A new file at ``target`` (never an existing one, never through a link), open for writing."""
            parent = os.path.dirname(target)
            os.makedirs(parent, exist_ok=True)
            # the folders are ours and no member is a link, but check again before writing
            if os.path.commonpath([root, os.path.realpath(parent)]) != root:
                raise KitRunError("kit member %r would be written outside %s; refusing to extract" % (name, dest))
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(target, flags, 0o644)
            created.append(target)
            return os.fdopen(fd, "wb")

        try:
            with create(os.path.join(root, MANIFEST), MANIFEST) as out:
                out.write(manifest_bytes)
            written.append(MANIFEST)
            for info, parts, target, item in plan:
                digest = hashlib.sha256()
                try:
                    with archive.open(info) as src, create(target, info.filename) as out:
                        copy_limited(src, out, item["size"], item["file"], item["label"], digest)
                except (OSError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile, zlib.error) as exc:
                    raise KitRunError("cannot extract kit member %r (%s)" % (info.filename, exc)) from exc
                if item["sha256"] is not None and digest.hexdigest() != item["sha256"]:
                    raise KitRunError("kit %s was modified or damaged: %s (%s) has sha256 %s, the manifest says %s"
                                      % (manifest["kit_id"], item["file"], item["label"], digest.hexdigest(),
                                         item["sha256"]))
                written.append("/".join(parts))
        except BaseException:
            for path in created:  # a refused kit leaves nothing behind
                try:
                    os.remove(path)
                except OSError:
                    pass
            raise
    return written


def sha256_file(path: str) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_manifest(data: bytes) -> Dict[str, Any]:
    """Check the bytes of a kit's ``manifest.json`` (format, version, kit id, units) and return it."""
    try:
        manifest = json.loads(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError is a ValueError
        raise KitRunError("the kit's %s is not valid JSON (%s)" % (MANIFEST, exc)) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != KIT_FORMAT:
        raise KitRunError("the kit's %s is not an hwnas board kit manifest (no \"format\": \"%s\")"
                          % (MANIFEST, KIT_FORMAT))
    version = manifest.get("version")
    if not isinstance(version, int) or not MIN_KIT_VERSION <= version <= KIT_VERSION:
        raise KitRunError("kit format version %r is not supported by this run_kit.py (reads version %d); use the "
                          "run_kit.py that came with the kit" % (version, KIT_VERSION))
    for field in ("kit_id", "units", "context", "protocol"):
        if field not in manifest:
            raise KitRunError("the kit's %s has no %r field" % (MANIFEST, field))
    if manifest["kit_id"] != kit_id_of(manifest):
        raise KitRunError("the kit's %s was edited: its kit_id %s does not match its content"
                          % (MANIFEST, manifest["kit_id"]))
    return manifest


def load_manifest(folder: str) -> Dict[str, Any]:
    """Read and check the ``manifest.json`` of an extracted kit (format, version, kit id, units)."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.isfile(path):
        raise KitRunError("the kit has no %s: it is not an hwnas board kit" % MANIFEST)
    with open(path, "rb") as fh:
        data = fh.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise KitRunError("the kit's %s is larger than %d bytes" % (MANIFEST, MAX_MANIFEST_BYTES))
    return parse_manifest(data)


def kit_id_of(manifest: Mapping[str, object]) -> str:
    """SHA-256 of the manifest's canonical JSON without ``kit_id`` and ``created`` (it lists every file's hash)."""
    content = {k: v for k, v in manifest.items() if k not in ("kit_id", "created")}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def verify_files(manifest: Dict[str, Any], folder: str) -> None:
    """Check every unit and network file against the manifest's SHA-256.

    Raises:
        KitRunError: A file is missing or differs (names the file and the unit key).
    """
    for item in list(manifest["units"]) + list(manifest.get("networks") or []):
        parts = check_member_name(item["file"])
        path = os.path.join(folder, *parts)
        label = item.get("key") or item.get("arch_id")
        if not os.path.isfile(path):
            raise KitRunError("kit %s is incomplete: %s (%s) is missing" % (manifest["kit_id"], item["file"], label))
        digest = sha256_file(path)
        if digest != item["sha256"]:
            raise KitRunError("kit %s was modified or damaged: %s (%s) has sha256 %s, the manifest says %s"
                              % (manifest["kit_id"], item["file"], label, digest, item["sha256"]))


# ---------------------------------------------------------------------------------------------------
# statistics (plain Python, so the trtexec path needs no numpy)


def percentile(sorted_ms: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of sorted values, interpolated linearly (numpy's default)."""
    if not sorted_ms:
        raise ValueError("no timings")
    pos = (len(sorted_ms) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (pos - lo)


def stats_from_ms(samples_ms: Sequence[float]) -> TimingStats:
    """Median, p10/p90, IQR, min and count of timings in milliseconds."""
    ms = sorted(float(s) for s in samples_ms)
    if not ms:
        raise ValueError("no timings")
    q25, q75 = percentile(ms, 25), percentile(ms, 75)
    return {"median_ms": percentile(ms, 50), "p10_ms": percentile(ms, 10), "p90_ms": percentile(ms, 90),
            "iqr_ms": q75 - q25, "min_ms": ms[0], "count": len(ms)}


#: The statistics a table can answer with, by the protocol's ``statistic``, and the field of the timing
#: statistics each one reads: the median of the timed runs (the default), or their 10th percentile, which on
#: a shared machine lies closer to a second timing of the same artifact (neighbours' load only ever slows a
#: run down, so the fast runs carry less of it).
STATISTICS: Dict[str, str] = {"median": "median_ms", "p10": "p10_ms"}


def central_ms(stats: Mapping[str, float], statistic: str = "median") -> float:
    """The value of ``stats`` (as :func:`stats_from_ms` gives them) that a table keeps for ``statistic``."""
    if statistic not in STATISTICS:
        raise ValueError("unknown statistic %r (choose from %s)" % (statistic, ", ".join(STATISTICS)))
    return float(stats[STATISTICS[statistic]])


def stop_rule(protocol: KitProtocol) -> Callable[[int, float], bool]:
    """The stop rule of every timing in hwnas and on the board (the one definition; hwnas imports it).

    Timing stops once there are at least ``repeats`` timed runs *and* they took at least ``min_time_s``
    seconds in all, or once there are ``max_repeats`` of them, whichever comes first (``repeats`` is at
    least 1 and ``max_repeats`` at least ``repeats``).

    Args:
        protocol: The measurement protocol as a mapping (``repeats``, ``min_time_s``, ``max_repeats``).

    Returns:
        ``done(count, elapsed_s)``: True when ``count`` timed runs lasting ``elapsed_s`` seconds are enough.
    """
    repeats = max(1, int(protocol.get("repeats", 50)))
    min_time_s = float(protocol.get("min_time_s", 0.0))
    max_repeats = max(repeats, int(protocol.get("max_repeats", 100000)))

    def done(count: int, elapsed_s: float) -> bool:
        return count >= max_repeats or (count >= repeats and elapsed_s >= min_time_s)

    return done


def time_runs(run: Callable[[], object], protocol: KitProtocol) -> Tuple[List[float], float]:
    """Time ``run`` with ``perf_counter`` per the protocol: ``warmup`` untimed runs, then timed runs until
    :func:`stop_rule` says enough.

    Returns:
        The timings in ms and the seconds spent in timed runs.
    """
    done = stop_rule(protocol)
    for _ in range(int(protocol.get("warmup", 10))):
        run()
    samples = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        run()
        samples.append((time.perf_counter() - t0) * 1e3)
        if done(len(samples), time.perf_counter() - start):
            break
    return samples, time.perf_counter() - start


# ---------------------------------------------------------------------------------------------------
# measurers


class OrtMeasurer:
    """onnxruntime on one execution provider, with pinned intra-op threads (CPU) and sequential execution.

    Args:
        provider: Execution provider name, e.g. ``CPUExecutionProvider``.
        threads: Intra-op threads (``None``: onnxruntime's default).
        precision: ``fp32``; ``fp16`` only with ``TensorrtExecutionProvider`` (``trt_fp16_enable``); ``int8`` only
            with ``CPUExecutionProvider`` (the kit's graphs are then statically quantised, QDQ).
        protocol: The kit's measurement protocol.
    """

    runtime = "onnxruntime"

    def __init__(self, provider: str, threads: Optional[int], precision: str, protocol: KitProtocol) -> None:
        try:
            import numpy
            import onnxruntime
        except ImportError as exc:
            raise KitRunError("the onnxruntime runtime needs numpy and onnxruntime (pip install numpy onnxruntime): %s"
                              % exc) from exc
        self.np = numpy
        self.ort = onnxruntime
        available = onnxruntime.get_available_providers()
        if provider not in available:
            raise KitRunError("onnxruntime %s has no %s; available: %s" % (onnxruntime.__version__, provider,
                                                                            ", ".join(available)))
        allowed = {"CPUExecutionProvider": ("fp32", "int8"),  # int8: the kit's graphs are quantised (QDQ)
                   "TensorrtExecutionProvider": ("fp32", "fp16")}.get(provider, ("fp32",))
        if precision not in allowed:
            raise KitRunError("onnxruntime measures the kit's fp32 graphs, or its int8 (QDQ) graphs on "
                              "CPUExecutionProvider; precision %r needs the trtexec runtime (or fp16 with "
                              "TensorrtExecutionProvider)" % precision)
        self.provider = provider
        self.threads = threads
        self.precision = precision
        self.protocol = protocol

    def facts(self) -> Dict[str, object]:
        """Versions and providers of the runtime."""
        return {"onnxruntime": self.ort.__version__, "onnxruntime_providers": list(self.ort.get_available_providers()),
                "onnxruntime_device": self.ort.get_device(), "numpy": self.np.__version__}

    def settings(self) -> Dict[str, object]:
        """What a result depends on besides the board: resuming with other settings is refused."""
        return {"runtime": self.runtime, "provider": self.provider, "threads": self.threads,
                "precision": self.precision}

    def measure(self, path: str, input_shape: Sequence[int]) -> TimingStats:
        """Time one ONNX file on a random normal input of ``input_shape``."""
        so = self.ort.SessionOptions()
        if self.threads:
            so.intra_op_num_threads = int(self.threads)
        so.inter_op_num_threads = 1
        so.execution_mode = self.ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        providers: List[Any] = [self.provider]
        if self.provider == "TensorrtExecutionProvider":
            providers = [(self.provider, {"trt_fp16_enable": self.precision == "fp16"}), "CUDAExecutionProvider"]
        session = self.ort.InferenceSession(path, so, providers=providers)
        dtype = self.np.float16 if session.get_inputs()[0].type == "tensor(float16)" else self.np.float32
        x = self.np.random.default_rng(0).standard_normal(tuple(input_shape)).astype(dtype)
        feed = {session.get_inputs()[0].name: x}
        if self.provider == "CPUExecutionProvider":
            samples, _ = time_runs(lambda: session.run(None, feed), self.protocol)
        else:  # a device provider: keep input and output on the device, synchronise inside the timed span
            binding = session.io_binding()
            binding.bind_ortvalue_input(session.get_inputs()[0].name,
                                        self.ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0))
            binding.bind_output(session.get_outputs()[0].name, "cuda")

            def run() -> None:
                session.run_with_iobinding(binding)
                binding.synchronize_outputs()

            samples, _ = time_runs(run, self.protocol)
        return stats_from_ms(samples)


def decode_trt_version(text: str) -> Optional[str]:
    """``8601`` -> ``8.6.1``, ``100300`` -> ``10.3.0``; a dotted version is returned as it is."""
    if not text:
        return None
    if "." in text:
        return text
    n = int(text)
    if n >= 100000:
        return "%d.%d.%d" % (n // 10000, (n // 100) % 100, n % 100)
    return "%d.%d.%d" % (n // 1000, (n // 100) % 10, n % 100)


TRT_BANNER = re.compile(r"\[TensorRT v([0-9][0-9.]*)\]")


class TrtexecMeasurer:
    """NVIDIA's ``trtexec``: builds an engine per ONNX file and times it, reading ``--exportTimes`` JSON.

    trtexec's exported trace is a JSON list with one record per inference, in ms: ``startEnqMs``,
    ``endEnqMs``, ``startH2dMs`` ... ``endD2hMs``, ``h2dMs``, ``computeMs``, ``d2hMs``, ``latencyMs``
    (h2d + compute + d2h) and, in older versions, ``endToEndMs``. Older versions also export the warm-up
    inferences; records that start computing before the warm-up time are dropped, as trtexec's own summary
    does. The statistic is ``computeMs`` (GPU compute time; a unit's copies to and from the host are not
    part of a network's latency) unless ``metric`` says ``latencyMs``.

    Args:
        trtexec: The executable (a name on the PATH or a path).
        precision: ``fp32``, ``fp16`` (``--fp16``) or ``int8`` (``--int8``); with typed ``graphs`` no precision
            flag: TensorRT 10 gets ``--stronglyTyped``, TensorRT 11 builds every network strongly typed.
        protocol: The kit's protocol: ``repeats`` -> ``--iterations``, ``min_time_s`` -> ``--duration``.
        warmup_ms: trtexec's warm-up is a time (``--warmUp``, ms), not a count.
        metric: ``computeMs`` or ``latencyMs``.
        extra_args: More trtexec arguments (``--useSpinWait``, ``--noDataTransfers``, ``--useDLACore=0``).
        workdir: Where the timing files go.
        graphs: What the kit's ONNX files hold (its manifest's ``graphs``): ``fp32``, ``float16`` or
            ``int8-qdq-symmetric``.
    """

    runtime = "trtexec"

    def __init__(self, trtexec: str, precision: str, protocol: KitProtocol, *, warmup_ms: int, metric: str,
                 extra_args: Sequence[str], workdir: str, graphs: str = "fp32") -> None:
        found = shutil.which(trtexec)
        if found is None:
            raise KitRunError("trtexec not found (%r is not an executable on the PATH); install TensorRT or pass "
                              "--trtexec /path/to/trtexec" % trtexec)
        if precision not in ("fp32", "fp16", "int8"):
            raise KitRunError("trtexec runtime: precision %r is not supported (fp32, fp16, int8)" % precision)
        if graphs == "int8-qdq":
            raise KitRunError("this kit's int8 graphs are onnxruntime's (uint8 activations with zero points), which "
                              "TensorRT does not build; make a kit with nas latency kit --runtime trtexec --precision "
                              "int8 --typed (symmetric int8 Q/DQ)")
        if graphs != "fp32" and TYPED_GRAPHS.get(precision) != graphs:
            raise KitRunError("this kit's graphs hold %s, not precision %s" % (graphs, precision))
        if metric not in TRTEXEC_METRICS:
            raise KitRunError("trtexec metric %r is not one of %s" % (metric, ", ".join(TRTEXEC_METRICS)))
        self.path = found
        self.precision = precision
        self.graphs = graphs
        self.protocol = protocol
        self.warmup_ms = int(warmup_ms)
        self.metric = metric
        self.extra_args = list(extra_args)
        self.workdir = workdir
        self.version: Optional[str] = None
        self.version_raw: Optional[str] = None
        self._learn_version(self._call([self.path, "--help"], timeout=60)[1])
        major = int(self.version.split(".")[0]) if self.version and self.version.split(".")[0].isdigit() else None
        self.major = major
        if major is not None and major >= 11 and precision != "fp32" and graphs == "fp32":
            raise KitRunError("TensorRT %s's trtexec has no --%s: from TensorRT 11 the precision lives in the ONNX "
                              "graph, and this kit's graphs are fp32; make the kit with nas latency kit --runtime "
                              "trtexec --precision %s --typed (or measure fp32)" % (self.version, precision, precision))

    def _call(self, cmd: List[str], timeout: float) -> Tuple[int, str]:
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError("trtexec did not finish within %d s" % timeout) from None
        return proc.returncode, proc.stdout.decode("utf-8", "replace")

    def _learn_version(self, output: str) -> None:
        match = TRT_BANNER.search(output)
        if match and self.version is None:
            self.version_raw = match.group(1)
            self.version = decode_trt_version(match.group(1))

    def facts(self) -> Dict[str, object]:
        """Path and version of trtexec."""
        return {"trtexec": self.path, "trtexec_version": self.version, "trtexec_version_raw": self.version_raw}

    def settings(self) -> Dict[str, object]:
        """What a result depends on besides the board: resuming with other settings is refused."""
        return {"runtime": self.runtime, "provider": None, "threads": None, "precision": self.precision,
                "trtexec_metric": self.metric, "trtexec_warmup_ms": self.warmup_ms,
                "trtexec_args": list(self.extra_args)}

    def command(self, path: str, times_file: str) -> List[str]:
        """The trtexec command line that measures one ONNX file."""
        cmd = [self.path, "--onnx=%s" % path, "--warmUp=%d" % self.warmup_ms,
               "--iterations=%d" % max(1, int(self.protocol.get("repeats", 50))),
               "--duration=%d" % int(math.ceil(float(self.protocol.get("min_time_s", 0.0)))),
               "--exportTimes=%s" % times_file]
        if self.graphs != "fp32":  # the precision is in the graph: build it strongly typed (always so on 11)
            if self.major is None or self.major < 11:
                cmd.append("--stronglyTyped")
        elif self.precision == "fp16":
            cmd.append("--fp16")
        elif self.precision == "int8":
            cmd.append("--int8")
        return cmd + self.extra_args

    def measure(self, path: str, input_shape: Sequence[int]) -> TimingStats:
        """Build and time one ONNX file with trtexec (the graph's input shape is static)."""
        times_file = os.path.join(self.workdir, "trtexec-times.json")
        if os.path.exists(times_file):
            os.remove(times_file)
        code, output = self._call(self.command(path, times_file), timeout=1800)
        self._learn_version(output)
        if code != 0:
            tail = " | ".join(line.strip() for line in output.strip().splitlines()[-3:])
            raise RuntimeError("trtexec exited with status %d: %s" % (code, tail))
        return self.parse_times(times_file)

    def parse_times(self, times_file: str) -> TimingStats:
        """Stats of the chosen metric over the non-warm-up records of a ``--exportTimes`` file."""
        try:
            with open(times_file, encoding="utf-8") as fh:
                records = json.load(fh)
        except (OSError, ValueError) as exc:
            raise RuntimeError("trtexec wrote no readable --exportTimes file (%s)" % exc) from exc
        if not isinstance(records, list):
            raise RuntimeError("trtexec --exportTimes file is not a JSON list of per-inference records")
        samples = []
        for rec in records:
            if not isinstance(rec, dict) or self.metric not in rec:
                raise RuntimeError("trtexec --exportTimes record has no %r: %r" % (self.metric, rec))
            if float(rec.get("startComputeMs", self.warmup_ms)) < self.warmup_ms:
                continue  # a warm-up inference (older trtexec versions export them too)
            samples.append(float(rec[self.metric]))
        if not samples:
            raise RuntimeError("trtexec --exportTimes file has no timed inferences after the warm-up")
        return stats_from_ms(samples)


#: The runtimes a kit is measured with.
Measurer = Union[OrtMeasurer, TrtexecMeasurer]


# ---------------------------------------------------------------------------------------------------
# the board's facts


def _first_line(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as fh:
            text = fh.read(4096).decode("utf-8", "replace").replace("\x00", "").strip()
    except OSError:
        return None
    return text.splitlines()[0].strip() if text else None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, ``sysctl`` on macOS, else ``platform``)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            fields: Dict[str, str] = {}
            for line in fh:
                if ":" in line:
                    k, v = line.split(":", 1)
                    fields.setdefault(k.strip().lower(), v.strip())
        for name in ("model name", "hardware", "model", "cpu model", "processor"):
            if fields.get(name) and not fields[name].isdigit():
                return fields[name]
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, timeout=5)
            if out.stdout.strip():
                return out.stdout.decode().strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def board_facts() -> Dict[str, object]:
    """Platform, CPU, cores, Python, and a Jetson's model, L4T release and power mode where they exist."""
    facts: Dict[str, object] = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    if hasattr(os, "sched_getaffinity"):
        facts["cpus_usable"] = len(os.sched_getaffinity(0))
    model = _first_line("/proc/device-tree/model")
    if model:
        facts["board_model"] = model
    l4t = _first_line("/etc/nv_tegra_release")
    if l4t:
        facts["l4t_release"] = l4t
    if shutil.which("nvpmodel"):
        try:
            out = subprocess.run(["nvpmodel", "-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
            facts["nvpmodel"] = " ".join(out.stdout.decode("utf-8", "replace").split())
        except (OSError, subprocess.SubprocessError):
            pass
    return facts


# ---------------------------------------------------------------------------------------------------
# results file (rewritten atomically after every unit)


def write_json_atomic(path: str, data: Mapping[str, object]) -> None:
    """Write JSON through a temporary file and a rename: an interruption leaves the old or the new file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=False, allow_nan=False)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_previous(path: str, kit_id: str, settings: Mapping[str, object]) -> Optional[Dict[str, Any]]:
    """The results of an interrupted run of the same kit with the same settings, or None if there is none.

    Raises:
        KitRunError: The file is not a results file, is from another kit, or was measured otherwise.
    """
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise KitRunError("%s exists but is not readable JSON (%s); move it away or pick another --out"
                          % (path, exc)) from exc
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise KitRunError("%s exists and is not an hwnas kit results file; pick another --out" % path)
    if data.get("kit_id") != kit_id:
        raise KitRunError("%s holds results of kit %s, not of this kit %s; pick another --out"
                          % (path, data.get("kit_id"), kit_id))
    if data.get("settings") != settings:
        raise KitRunError("%s was measured with other settings (%s, now %s); pick another --out"
                          % (path, json.dumps(data.get("settings"), sort_keys=True),
                             json.dumps(settings, sort_keys=True)))
    return data


# ---------------------------------------------------------------------------------------------------
# progress


def _clock(seconds: float) -> str:
    seconds = int(round(max(0.0, seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "%d:%02d:%02d" % (h, m, s) if h else "%d:%02d" % (m, s)


class Progress:
    """A one-line text progress on stderr: count, percent, elapsed time and ETA (no extra packages)."""

    def __init__(self, total: int, quiet: bool = False) -> None:
        self.total = total
        self.done = 0
        self.quiet = quiet
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()

    def step(self, label: str, outcome: str) -> None:
        """Report one more item done."""
        self.done += 1
        if self.quiet:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        width = len(str(self.total))
        line = "[%*d/%d] %3d%%  elapsed %s  ETA %s  %s  %s" % (
            width, self.done, self.total, 100 * self.done // max(1, self.total), _clock(elapsed), _clock(eta),
            outcome, label)
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line[:200])
            if self.done == self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def say(message: str) -> None:
    """One line on stderr."""
    sys.stderr.write("run_kit: %s\n" % message)
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------------------
# the run


def _failure(exc: BaseException) -> str:
    return "%s: %s" % (type(exc).__name__, " ".join(str(exc).split())[:500])


def timed_rounds(value: object) -> List[Dict[str, Any]]:
    """A unit's or network's timings in a results file, one per round (a version-1 results file holds one timing
    per unit, a version-2 one per network: a dict, not a list)."""
    if isinstance(value, dict):
        return [value]
    return list(value) if isinstance(value, list) else []


def timings_to_make(manifest: Dict[str, Any], results: Dict[str, Any], rounds: int) -> Tuple[int, int]:
    """How many unit timings and carrier timings a run still has to make (every unit, every round it lacks; each
    carrier in every round in which a unit that needs it is timed, unless that round's timing is there)."""
    units = carriers = 0
    for rnd in range(rounds):
        needed: Set[str] = set()
        for u in manifest["units"]:
            if len(results["units"].get(u["key"], [])) <= rnd:
                units += 1
                needed.update(cid for cid, _ in u.get("baseline") or [])
        carriers += sum(len(results["carriers"].get(cid, [])) <= rnd for cid in needed)
    return units, carriers


def measure_units(manifest: Dict[str, Any], rounds: int, measurer: Measurer, kit_dir: str, results: Dict[str, Any],
                  out: str, progress: Progress) -> None:
    """Time every unit in ``rounds`` rounds (each round over every unit that lacks it), rewriting the results file
    after each timing.

    A unit timed in context (its manifest entry names a ``baseline`` of carriers: the producer of its input, and in
    ``between`` kits also a consumer of its output) needs those carriers' timings of the same round; a carrier is
    timed when a unit first needs it in a round, so each round has baselines of its own (one noisy baseline shifts
    one round of the units of its shape, not all of them; the import subtracts them). A failure is recorded under
    ``results["failed"]`` by the unit's key and its later rounds are skipped in this run (a rerun tries again).
    """
    carriers = {c["id"]: c for c in manifest.get("carriers") or []}
    skip = set()  # units that failed in this run
    for rnd in range(rounds):
        for unit in manifest["units"]:
            key = unit["key"]
            done = results["units"].get(key, [])
            if key in skip or len(done) > rnd:
                continue
            label = key if rounds == 1 else "%s (round %d of %d)" % (key, rnd + 1, rounds)
            try:
                for cid, _coefficient in unit.get("baseline") or []:
                    timed = results["carriers"].setdefault(cid, [])
                    while len(timed) <= rnd:  # this round's baseline, timed just before the unit that first needs it
                        carrier = carriers[cid]
                        try:
                            timed.append(measurer.measure(os.path.join(kit_dir, *check_member_name(carrier["file"])),
                                                          carrier["input_shape"]))
                        except KeyboardInterrupt:
                            raise
                        except Exception as exc:
                            progress.step("carrier %s" % cid, "FAILED")
                            raise KitRunError("carrier %s (%s): %s" % (cid, carrier["file"], _failure(exc))) from exc
                        progress.step("carrier %s (round %d of %d)" % (cid, len(timed), rounds),
                                      "%9.4f ms" % timed[-1]["median_ms"])
                stats = measurer.measure(os.path.join(kit_dir, *check_member_name(unit["file"])), unit["input_shape"])
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # one failing unit is recorded; the others are still measured
                results["failed"][key] = str(exc) if isinstance(exc, KitRunError) else _failure(exc)
                skip.add(key)
                progress.step(label, "FAILED")
            else:
                results["units"][key] = [*done, stats]
                results["failed"].pop(key, None)
                progress.step(label, "%9.4f ms" % stats["median_ms"])
            results["updated"] = now_iso()
            write_json_atomic(out, results)


def networks_to_time(items: Sequence[Dict[str, Any]], results: Dict[str, Any], rounds: int) -> int:
    """How many whole-network timings a run still has to make (every network, every round it lacks)."""
    return sum(max(0, rounds - len(results["networks"].get(item["arch_id"], []))) for item in items)


def measure_networks(items: Sequence[Dict[str, Any]], measurer: Measurer, kit_dir: str, results: Dict[str, Any],
                     out: str, progress: Progress, rounds: int = 1) -> None:
    """Time whole networks in ``rounds`` rounds (each round over every network that lacks it), as the units are,
    rewriting the results file after each timing; a network's timings are a list, one per round.

    A failure is recorded under ``results["failed_networks"]`` by the network's id, its later rounds are skipped
    in this run and the others are still measured; Ctrl-C stops at once and leaves the results of everything
    finished before it.
    """
    skip = set()
    for rnd in range(rounds):
        for item in items:
            arch_id = item["arch_id"]
            done = results["networks"].get(arch_id, [])
            if len(done) > rnd or arch_id in skip:
                continue
            path = os.path.join(kit_dir, *check_member_name(item["file"]))
            label = "network %s%s" % (arch_id, " (round %d/%d)" % (rnd + 1, rounds) if rounds > 1 else "")
            try:
                stats = measurer.measure(path, item["input_shape"])
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # one failing network is recorded; the others are still measured
                results["failed_networks"][arch_id] = _failure(exc)
                skip.add(arch_id)
                progress.step(label, "FAILED")
            else:
                results["networks"][arch_id] = [*done, stats]
                results["failed_networks"].pop(arch_id, None)
                progress.step(label, "%9.4f ms" % stats["median_ms"])
            results["updated"] = now_iso()
            write_json_atomic(out, results)


def run(args: argparse.Namespace) -> int:
    """Measure the kit; returns the exit status."""
    workdir = tempfile.mkdtemp(prefix="hwnas-kit-")
    try:
        kit_dir = os.path.join(workdir, "kit")
        os.mkdir(kit_dir)
        safe_extract(args.kit, kit_dir)  # only the files the manifest lists, each checked for size and hash
        manifest = load_manifest(kit_dir)
        kit_id = manifest["kit_id"]
        context = manifest["context"]
        protocol = KitProtocol(**manifest["protocol"])
        runtime = args.runtime or context.get("runtime") or "onnxruntime"
        precision = context.get("precision") or "fp32"
        graphs = str(manifest.get("graphs") or "fp32")  # kits before version 3 hold fp32 graphs
        if graphs not in GRAPHS:
            raise KitRunError("the kit's graphs hold %r, which this run_kit.py does not know (%s); use the run_kit.py "
                              "that came with the kit" % (graphs, ", ".join(GRAPHS)))
        if runtime == "onnxruntime":
            provider = args.provider or context.get("provider") or "CPUExecutionProvider"
            threads = args.threads if args.threads is not None else context.get("threads")
            if precision == "int8" and not graphs.startswith("int8-qdq"):
                raise KitRunError("this kit's graphs are fp32 (made for trtexec, which quantises them itself); "
                                  "onnxruntime measures int8 from a kit made with --runtime onnxruntime --precision "
                                  "int8")
            measurer: Any = OrtMeasurer(provider, threads, precision, protocol)
        elif runtime == "trtexec":
            measurer = TrtexecMeasurer(args.trtexec, precision, protocol, warmup_ms=args.trtexec_warmup_ms,
                                       metric=args.trtexec_metric, extra_args=args.trtexec_arg or [], workdir=workdir,
                                       graphs=graphs)
        else:
            raise KitRunError("runtime %r is not onnxruntime or trtexec" % runtime)
        settings = measurer.settings()
        results = load_previous(args.out, kit_id, settings)
        if results is None:
            results = {"format": RESULTS_FORMAT, "version": RESULTS_VERSION, "kit_id": kit_id,
                       "runner_version": RUNNER_VERSION, "space": manifest.get("space"),
                       "space_resolved": manifest.get("space_resolved"), "settings": settings,
                       "protocol": protocol, "started": now_iso(), "finished": None,
                       "units": {}, "carriers": {}, "failed": {}, "networks": {}, "failed_networks": {}}
        else:
            say("resuming %s: %d unit(s) already measured" % (args.out, len(results.get("units", {}))))
        results["version"] = RESULTS_VERSION
        results["units"] = {k: timed_rounds(v) for k, v in (results.get("units") or {}).items()}
        results["networks"] = {k: timed_rounds(v) for k, v in (results.get("networks") or {}).items()}
        results.setdefault("carriers", {})
        results.setdefault("failed", {})
        results.setdefault("networks", {})
        results.setdefault("failed_networks", {})
        board = board_facts()
        board.update(measurer.facts())
        previous = results.get("board") or {}
        for fact in ("hostname", "machine", "cpu"):
            if fact in previous and previous[fact] != board[fact]:
                raise KitRunError("%s was measured on another board (%s %r, here %r); pick another --out"
                                  % (args.out, fact, previous[fact], board[fact]))
        results["board"] = board
        results["finished"] = None

        rounds = max(1, int(protocol.get("rounds") or 1))
        todo, carrier_todo = timings_to_make(manifest, results, rounds)
        nets = [] if args.skip_networks else list(manifest.get("networks") or [])
        net_todo = networks_to_time(nets, results, rounds)
        total_units = len(manifest["units"])
        mode = protocol.get("mode") or "isolated"
        say("kit %s: %d unit(s) (%s%s), %d unit timing(s)%s to make; %d network timing(s) to make; %s" % (
            kit_id[:16], total_units, mode, ", %d rounds" % rounds if rounds > 1 else "", todo,
            " and %d of their carriers" % carrier_todo if carrier_todo else "", net_todo,
            ", ".join("%s=%s" % (k, v) for k, v in sorted(settings.items()) if v not in (None, []))))
        progress = Progress(todo + carrier_todo + net_todo, quiet=args.quiet)
        measure_units(manifest, rounds, measurer, kit_dir, results, args.out, progress)
        measure_networks(nets, measurer, kit_dir, results, args.out, progress, rounds)
        results["finished"] = now_iso()
        results["updated"] = results["finished"]
        write_json_atomic(args.out, results)
        failed = len(results["failed"]) + len(results["failed_networks"])
        say("done: %d of %d unit(s) measured, %d failure(s); results in %s" % (
            sum(len(v) >= rounds for v in results["units"].values()), total_units, failed, args.out))
        for key, error in sorted(results["failed"].items()):
            say("  failed %s: %s" % (key, error))
        return 1 if failed else 0
    finally:
        if args.keep_temp:
            say("kept the extracted kit in %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="run_kit.py",
        description="Measure an hwnas board kit on this board (needs Python 3.8+, numpy and onnxruntime, or "
                    "trtexec on the PATH; no hwnas, no torch). Rerun the same command to resume.")
    p.add_argument("kit", help="the kit.zip made by 'nas latency kit'")
    p.add_argument("--out", default="results.json",
                   help="results file, rewritten after every unit (default: %(default)s)")
    p.add_argument("--runtime", choices=("onnxruntime", "trtexec"), help="default: the kit's intended runtime")
    p.add_argument("--provider", help="onnxruntime execution provider (default: the kit's, else CPUExecutionProvider)")
    p.add_argument("--threads", type=int, help="onnxruntime intra-op threads, pinned (default: the kit's)")
    p.add_argument("--trtexec", default="trtexec", help="the trtexec executable (default: trtexec on the PATH)")
    p.add_argument("--trtexec-metric", choices=TRTEXEC_METRICS, default="computeMs",
                   help="per-inference figure of trtexec's --exportTimes records (default: %(default)s)")
    p.add_argument("--trtexec-warmup-ms", type=int, default=200, help="trtexec --warmUp in ms (default: %(default)s)")
    p.add_argument("--trtexec-arg", action="append", metavar="ARG",
                   help="one more trtexec argument, e.g. --trtexec-arg=--useSpinWait (repeatable)")
    p.add_argument("--skip-networks", action="store_true", help="measure the units only, not the whole networks")
    p.add_argument("--keep-temp", action="store_true", help="keep the extracted kit (for debugging)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        p.error("--threads must be at least 1")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point: parse, run, and turn known problems into one line and a status."""
    args = parse_args(argv)
    try:
        return run(args)
    except KitRunError as exc:
        sys.stderr.write("run_kit: error: %s\n" % exc)
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("\nrun_kit: interrupted; %s keeps what was measured: rerun the same command to resume\n"
                         % args.out)
        return 130


if __name__ == "__main__":
    sys.exit(main())
