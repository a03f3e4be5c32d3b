"""Making a board kit: every latency-table unit of a space (and a few whole networks) as ONNX, with the runner.

:func:`make_kit` exports every latency-table unit of a search space (and, optionally, a few whole
networks) to ONNX and packs them into ``kit.zip`` with a ``manifest.json`` and ``run_kit.py``, a
single-file runner that needs only Python 3.8+, numpy and onnxruntime (or ``trtexec``). On the board,
``python3 run_kit.py kit.zip --out results.json`` measures them; :func:`~hwnas.latency.kit.results.import_results`
turns the results back into a :class:`~hwnas.latency.tables.LatencyTable`.

The kit is identified by its ``kit_id``: the SHA-256 of the manifest's canonical JSON without the id and
the creation time. The manifest holds every ONNX file's size and SHA-256, so the id covers the files too, and two
kits made from the same space, context, protocol and seed get the same id (the exported weights are
seeded; they do not change timings, but they make the files reproducible).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import stat
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.errors import HwnasError
from hwnas.latency.context import DeviceContext
from hwnas.latency.kit import run_kit as _runner
from hwnas.latency.measure import MeasureProtocol
from hwnas.latency.tables.table import input_resolution_of, now_iso, space_params_of, space_resolved_of
from hwnas.search_spaces import UnitProfiledSpace

if TYPE_CHECKING:
    from torch import nn

    from hwnas.search_spaces.base import SearchSpace

log = logging.getLogger(__name__)

# the formats are defined once, in the runner (which must stand alone on the board)
KIT_FORMAT = _runner.KIT_FORMAT
KIT_VERSION = _runner.KIT_VERSION
RESULTS_FORMAT = _runner.RESULTS_FORMAT
MANIFEST = _runner.MANIFEST
RUNNER = "run_kit.py"
RUNTIMES = ("onnxruntime", "trtexec")
PROVIDER_NAMES = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider",
                  "tensorrt": "TensorrtExecutionProvider"}
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed member times: the same content gives the same zip bytes


class KitError(HwnasError):
    """A board kit cannot be made, read, or matched with its results; the message names the problem."""


@dataclass(frozen=True)
class Kit:
    """What :func:`make_kit` wrote.

    Args:
        zip_path: The kit.
        runner_path: ``run_kit.py``, written next to the zip (also inside it).
        manifest: The manifest as written into the zip.
    """

    zip_path: Path
    runner_path: Path
    manifest: dict[str, Any] = field(repr=False)

    @property
    def kit_id(self) -> str:
        """The kit's content id."""
        return str(self.manifest["kit_id"])

    @property
    def failed(self) -> dict[str, str]:
        """Unit key -> export error, for units that are not in the kit."""
        return dict(self.manifest.get("failed") or {})


# -- helpers ---------------------------------------------------------------------------------------------
def _sha256(data: bytes) -> str:
    """Hex SHA-256 of some bytes."""
    return hashlib.sha256(data).hexdigest()


def compute_kit_id(manifest: Mapping[str, object]) -> str:
    """SHA-256 of the manifest's canonical JSON without ``kit_id`` and ``created`` (covers the file hashes).

    The board computes the same with ``run_kit.kit_id_of``; this is that function.
    """
    return _runner.kit_id_of(dict(manifest))


def runner_source() -> bytes:
    """The bytes of ``run_kit.py`` as shipped in this package."""
    return resources.files("hwnas.latency.kit").joinpath(RUNNER).read_bytes()


def _kit_context(*, device: str, runtime: str, provider: str | None, precision: str, batch_size: int,
                 threads: int | None, power_mode: str | None, input_resolution: int | None) -> dict[str, object]:
    """The intended measurement context, checked for the runtimes the runner knows."""
    if not device:
        raise KitError("a board kit needs a device name (it names the metric latency_ms@<device>)")
    if runtime not in RUNTIMES:
        raise KitError(f"board kit runtime {runtime!r} is not one of {', '.join(RUNTIMES)}")
    if batch_size < 1:
        raise KitError(f"board kit batch size must be at least 1, got {batch_size}")
    if threads is not None and threads < 1:
        raise KitError(f"board kit threads must be at least 1, got {threads}")
    if runtime == "onnxruntime":
        provider = PROVIDER_NAMES.get(provider or "cpu", provider)
        allowed = {"fp32"} | ({"int8"} if provider == PROVIDER_NAMES["cpu"] else set()) | (
            {"fp16"} if provider == PROVIDER_NAMES["tensorrt"] else set())
        if precision not in allowed:
            raise KitError(f"onnxruntime measures the kit's fp32 graphs, or int8 ones (quantised here) on the cpu "
                           f"provider: precision {precision!r} needs runtime 'trtexec' (or fp16 with the tensorrt "
                           "provider)")
        if provider == PROVIDER_NAMES["cpu"]:
            threads = 1 if threads is None else threads
        else:
            threads = None  # only the CPU provider takes an intra-op thread count
    else:
        if precision not in ("fp32", "fp16", "int8"):
            raise KitError(f"trtexec precision {precision!r} is not one of fp32, fp16, int8")
        if provider is not None:
            raise KitError("trtexec takes no execution provider (pass extra trtexec arguments on the board)")
        threads = None
    ctx = DeviceContext(device=device, runtime=runtime, provider=provider, precision=precision,  # type: ignore[arg-type]
                        batch_size=batch_size, threads=threads, input_resolution=input_resolution,
                        power_mode=power_mode)
    data: dict[str, object] = dict(ctx.to_dict())
    data.pop("runtime_version")  # known only on the board
    return data


def _require_units(space: SearchSpace) -> list[str]:
    """The space's unit keys; a space that is not a :class:`UnitProfiledSpace` is one clear error."""
    name = getattr(space, "name", type(space).__name__)
    if not isinstance(space, UnitProfiledSpace):
        raise KitError(f"search space {name!r} cannot make a board kit: it is not a UnitProfiledSpace (a search space "
                       "with all_layers() and build_layer(key): every latency-table unit, and the module and input "
                       "shape that build one)")
    keys = list(space.all_layers())
    if not keys:
        raise KitError(f"search space {name!r} lists no latency-table units (all_layers() is empty)")
    if len(set(keys)) != len(keys):
        raise KitError(f"search space {name!r}: all_layers() lists some units twice")
    return keys


def _sample_archs(space: SearchSpace, n: int, rng: np.random.Generator) -> list[Architecture]:
    """``n`` distinct architectures (fewer only if the space is smaller)."""
    archs: dict[str, Architecture] = {}
    for _ in range(50 * n):
        if len(archs) == n:
            break
        arch = space.sample(rng)
        archs.setdefault(arch.arch_id, arch)
    return list(archs.values())


def _export(model: nn.Module, input_shape: tuple[int, ...], path: Path, *, opset: int, batch_size: int,
            graphs: str = "fp32") -> bytes:
    """Export ``model`` to ONNX at ``path`` as ``graphs`` says (one of the runner's ``GRAPHS``); returns the file's
    bytes. The int8 graphs are statically quantised (QDQ) on seeded random inputs, so the bytes are reproducible."""
    from hwnas.latency.backends.trt_common import export_typed_onnx
    from hwnas.latency.onnx_export import export_onnx, quantize_int8

    path.parent.mkdir(parents=True, exist_ok=True)
    if graphs == "float16":
        export_typed_onnx(model, input_shape, path, dtype="float16", opset=opset, batch_size=batch_size)
        return path.read_bytes()
    if graphs == "fp32":
        export_onnx(model, input_shape, path, opset=opset, batch_size=batch_size)
        return path.read_bytes()
    fp32 = path.with_name(path.stem + ".fp32.onnx")
    export_onnx(model, input_shape, fp32, opset=opset, batch_size=batch_size)
    try:
        quantize_int8(fp32, path, input_shape, batch_size=batch_size, symmetric=graphs == "int8-qdq-symmetric")
    finally:
        fp32.unlink(missing_ok=True)
    return path.read_bytes()


def _graphs(context: Mapping[str, object], typed: bool) -> str:
    """What the kit's graphs hold for its context: int8 Q/DQ for onnxruntime's int8 (the CPU provider has no flag
    for it); with ``typed``, the precision in the graph for trtexec (TensorRT 11 has no precision flags)."""
    runtime, precision = context["runtime"], context["precision"]
    if runtime == "onnxruntime":
        if typed:
            raise KitError("typed graphs are for the trtexec runtime (TensorRT 11 takes the precision from the "
                           "graph); an onnxruntime int8 kit is always quantised in the graph")
        return "int8-qdq" if precision == "int8" else "fp32"
    if not typed:
        return "fp32"
    if precision not in _runner.TYPED_GRAPHS:
        raise KitError(f"typed graphs need a reduced precision (fp16 or int8), not {precision!r}")
    return _runner.TYPED_GRAPHS[precision]


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line, at most 500 characters."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]


def _zip_write(zf: zipfile.ZipFile, name: str, data: bytes, *, executable: bool = False) -> None:
    """Add a regular file with a fixed time and Unix mode (reproducible bytes; never read as a link)."""
    info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (stat.S_IFREG | (0o755 if executable else 0o644)) << 16
    info.create_system = 3  # Unix, so the mode bits above are read as such
    zf.writestr(info, data)


def _refuse_overwrite(zip_path: Path, runner_path: Path, *, force: bool) -> None:
    """Refuse (before writing either) to replace the zip, or a ``run_kit.py`` other than this hwnas's runner."""
    from hwnas.fileio import refuse_overwrite

    outputs = [zip_path]
    if runner_path.exists():
        try:
            same = runner_path.is_file() and runner_path.read_bytes() == runner_source()
        except OSError:
            same = False
        if not same:
            outputs.append(runner_path)
    refuse_overwrite(outputs, force=force)


# -- making a kit ---------------------------------------------------------------------------------------
def make_kit(space: UnitProfiledSpace, *, device: str, out: str | Path, runtime: str = "onnxruntime",
             provider: str | None = None, precision: str = "fp32", batch_size: int = 1, threads: int | None = None,
             power_mode: str | None = None,
             protocol: MeasureProtocol | None = None, opset: int = 17, validate_archs: int = 0,
             rng: np.random.Generator | None = None, force: bool = False, in_context: bool | str = False,
             typed: bool = False) -> Kit:
    """Write a board kit: ``kit.zip`` (units, networks, manifest, runner) and ``run_kit.py`` beside it.

    Args:
        space: A :class:`~hwnas.search_spaces.UnitProfiledSpace` (``all_layers()``, ``build_layer(key)``).
        device: The board's name as the metric will show it (``latency_ms@<device>``).
        out: A folder (``kit.zip`` and ``run_kit.py`` go in it) or the path of the zip itself (``*.zip``).
        runtime: ``onnxruntime`` or ``trtexec``: what the board is meant to measure with (the runner can
            override it; the imported table records what actually measured).
        provider: onnxruntime execution provider (``cpu``, ``cuda``, ``tensorrt`` or a full name;
            default CPU); none for trtexec.
        precision: ``fp32``; ``fp16``/``int8`` with trtexec; ``fp16`` with onnxruntime's tensorrt provider;
            ``int8`` with onnxruntime's cpu provider: every graph (units, carriers, networks) is statically
            quantised here (QDQ, as ``nas latency profile --precision int8`` measures), so the board needs nothing
            more than onnxruntime.
        batch_size: Batch size the units and networks are exported at.
        threads: Intra-op threads for onnxruntime's CPU provider (default 1, pinned).
        power_mode: The board's power mode (Jetson nvpmodel, governor), recorded in the context.
        protocol: Warm-up, repeats, minimum time per unit, rounds, statistic (default :class:`MeasureProtocol`).
        opset: ONNX opset of the export.
        validate_archs: Number of whole networks (distinct sampled architectures) to include, so the board
            also measures end to end for ``nas latency validate``.
        rng: Draws the networks' architectures (default ``np.random.default_rng(0)``).
        force: Replace an existing zip (and a different ``run_kit.py``) at ``out``. Without it, an existing
            file is refused before anything is exported or written (a ``run_kit.py`` identical to this
            hwnas's runner is not a conflict: kits made by one hwnas share it).
        in_context: How the board times a unit, as ``nas latency profile`` does here (``False``/``"isolated"``,
            ``True``/``"in_context"``, ``"between"``): each unit's ONNX graph then holds the unit behind a cheap
            producer of its input (and before a cheap consumer of its output), the kit also holds those
            producers and consumers alone (``carriers``, one graph per shape and count), each unit lists the
            carriers to subtract (``baseline``: ``[carrier id, +1 or -1]``), the board times the carriers afresh
            in every round, and the import subtracts them round by round.
        typed: For trtexec at fp16 or int8: the graphs carry the precision (fp16 weights and activations, or
            symmetric int8 Q/DQ), so that TensorRT builds them strongly typed. TensorRT 11's trtexec has no
            precision flags and needs this; on TensorRT 10 the runner passes ``--stronglyTyped`` instead of
            ``--fp16``/``--int8``.

    Returns:
        The kit's paths and manifest; units that failed to export are in ``manifest["failed"]``.

    Raises:
        KitError: The space is not a UnitProfiledSpace, the context is not measurable by the runner, or no
            unit could be exported.
        OutputExists: The zip or a different ``run_kit.py`` exists and not ``force`` (or a folder is there).
    """
    from hwnas.latency.tables.profile import context_mode

    protocol = protocol or MeasureProtocol()
    try:
        mode = context_mode(in_context)
    except ValueError as exc:
        raise KitError(str(exc)) from None
    rng = rng if rng is not None else np.random.default_rng(0)
    keys = _require_units(space)
    if validate_archs < 0:
        raise KitError(f"validate_archs must be >= 0, got {validate_archs}")
    context = _kit_context(device=device, runtime=runtime, provider=provider, precision=precision,
                           batch_size=batch_size, threads=threads, power_mode=power_mode,
                           input_resolution=input_resolution_of(space))
    graphs = _graphs(context, typed)  # quantised or cast here, timed there
    out = Path(out)
    zip_path = out if out.suffix == ".zip" else out / "kit.zip"
    runner_path = zip_path.with_name(RUNNER)
    _refuse_overwrite(zip_path, runner_path, force=force)  # before the (slow) export: nothing is written
    archs = _sample_archs(space, validate_archs, rng) if validate_archs else []
    all_keys = set(keys)
    for arch in archs:
        uncovered = sorted(set(space.layers(arch)) - all_keys)
        if uncovered:
            raise KitError(f"search space {space.name!r}: layers() of {arch.arch_id} has unit(s) all_layers() does "
                           f"not list: {', '.join(uncovered[:5])}")

    import torch

    from hwnas.latency.tables.profile import Carrier


    files: dict[str, bytes] = {}
    units: list[dict[str, Any]] = []
    carriers: dict[tuple[tuple[int, ...], int], dict[str, Any]] = {}  # (shape, producers in a row) -> entry
    failed: dict[str, str] = {}
    networks: list[dict[str, Any]] = []
    failed_networks: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="hwnas-kit-") as tmp, torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # reproducible weights (hence file hashes and kit id); global RNG state restored
        width = max(4, len(str(len(keys))))

        def carrier(shape: tuple[int, ...], count: int) -> str:
            """The id of the carrier graph of ``count`` producers of ``shape`` in a row (exported on first use)."""
            if (shape, count) not in carriers:
                name = f"carriers/{len(carriers):04d}.onnx"
                module = torch.nn.Sequential(*(Carrier.module(shape) for _ in range(count)))
                data = _export(module, shape, Path(tmp) / name, opset=opset, batch_size=batch_size, graphs=graphs)
                files[name] = data
                carriers[(shape, count)] = {"id": f"c{len(carriers)}", "file": name, "count": count,
                                            "input_shape": [batch_size, *shape], "size": len(data),
                                            "sha256": _sha256(data)}
            return str(carriers[(shape, count)]["id"])

        for i, key in enumerate(keys):
            name = f"units/{i:0{width}d}.onnx"
            try:
                module, shape = space.build_layer(key)
                shape = tuple(int(s) for s in shape)
                baseline: list[list[Any]] = []
                if mode == "in_context":
                    baseline = [[carrier(shape, 1), 1]]
                    module = Carrier.chain(module, shape)
                elif mode == "between":  # as profile_space: (producer twice) - (producer once) + consumer alone
                    out_shape = tuple(int(s) for s in Carrier.output_shape(module, shape))
                    baseline = [[carrier(shape, 2), 1], [carrier(shape, 1), -1], [carrier(out_shape, 1), 1]]
                    module = Carrier.chain(module, shape, out_shape)
                data = _export(module, shape, Path(tmp) / name, opset=opset, batch_size=batch_size, graphs=graphs)
            except Exception as exc:  # a unit that cannot be exported is reported, the others still written
                failed[key] = f"export: {_one_line(exc)}"
                log.warning("board kit: unit %s failed to export (%s)", key, _one_line(exc))
                continue
            files[name] = data
            unit: dict[str, Any] = {"key": key, "file": name, "input_shape": [batch_size, *shape],
                                    "size": len(data), "sha256": _sha256(data)}
            if baseline:
                unit["baseline"] = baseline
            units.append(unit)
            log.debug("board kit: exported %d/%d %s", i + 1, len(keys), key)
        for arch in archs:
            name = f"networks/{arch.arch_id}.onnx"
            shape = tuple(int(s) for s in space.input_shape_of(arch))
            try:
                data = _export(space.build(arch), shape, Path(tmp) / name, opset=opset, batch_size=batch_size,
                               graphs=graphs)
            except Exception as exc:
                failed_networks[arch.arch_id] = f"export: {_one_line(exc)}"
                log.warning("board kit: network %s failed to export (%s)", arch.arch_id, _one_line(exc))
                continue
            files[name] = data
            networks.append({"arch_id": arch.arch_id, "arch": arch.to_dict(), "layers": list(space.layers(arch)),
                             "file": name, "input_shape": [batch_size, *shape], "size": len(data),
                             "sha256": _sha256(data)})
    if not units:
        raise KitError(f"no unit of space {space.name!r} could be exported; first error: "
                       f"{next(iter(failed.values()))}")

    import hwnas

    runner = runner_source()
    manifest: dict[str, Any] = {
        "format": KIT_FORMAT,
        "version": KIT_VERSION,
        "kit_id": "",
        "created": now_iso(),
        "hwnas_version": hwnas.__version__,
        "space": space.name,
        "space_params": space_params_of(space),
        "space_resolved": space_resolved_of(space),  # what an experiment's space is checked against
        "context": context,
        "protocol": {**protocol.to_dict(), "mode": mode},
        "graphs": graphs,  # what the ONNX files hold (the runner's GRAPHS)
        "opset": opset,
        "runner": {"file": RUNNER, "version": _runner.RUNNER_VERSION, "size": len(runner), "sha256": _sha256(runner)},
        "units": units,
        "carriers": list(carriers.values()),
        "failed": dict(sorted(failed.items())),
        "networks": networks,
        "failed_networks": dict(sorted(failed_networks.items())),
    }
    manifest["kit_id"] = compute_kit_id(manifest)

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        _zip_write(zf, MANIFEST, (json.dumps(manifest, indent=1, allow_nan=False) + "\n").encode("utf-8"))
        _zip_write(zf, RUNNER, runner, executable=True)
        for name in sorted(files):
            _zip_write(zf, name, files[name])
    from hwnas.fileio import atomic_write

    _refuse_overwrite(zip_path, runner_path, force=force)  # again: a file may have appeared while exporting
    atomic_write(zip_path, buf.getvalue())
    atomic_write(runner_path, runner)
    runner_path.chmod(0o755)
    log.info("board kit %s: %d unit(s), %d failed, %d network(s) -> %s", manifest["kit_id"][:16], len(units),
             len(failed), len(networks), zip_path)
    return Kit(zip_path=zip_path, runner_path=runner_path, manifest=manifest)
