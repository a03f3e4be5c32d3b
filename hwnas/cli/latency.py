"""``nas latency ...``: profile, validate, show, kit, import, import-published."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.errors import pydantic_message

if TYPE_CHECKING:
    from rich.progress import Progress

    from hwnas.cli.parsing import Subparsers
    from hwnas.latency.backends import LatencyBackend
    from hwnas.latency.measure import MeasureProtocol
    from hwnas.latency.tables import LatencyTable
    from hwnas.search_spaces.base import SearchSpace


def add_parser(sub: Subparsers) -> None:
    """Register ``nas latency`` and its subcommands."""
    lat = sub.add_parser("latency", help="latency tables: profile, validate, kit for boards, import",
                         description="Build and judge per-device latency lookup tables.")
    lsub = lat.add_subparsers(dest="latency_command", metavar="SUBCOMMAND")

    def space_args(p: argparse.ArgumentParser, *, experiment: bool = False) -> None:
        if not experiment:
            p.add_argument("--space", required=True, help="registered space name (nas list spaces)")
        else:  # the space by name, or exactly as an experiment resolves it
            which = p.add_mutually_exclusive_group(required=True)
            which.add_argument("--space", help="registered space name (nas list spaces), with its defaults and "
                                               "--space-param")
            experiment_arg(which)
            set_arg(p)
        p.add_argument("--space-param", action="append", default=[], metavar="KEY=VALUE",
                       help="a space parameter, e.g. --space-param resolution=32 (repeatable; values are YAML)"
                            + ("; with --space only" if experiment else ""))

    def experiment_arg(p: argparse._ActionsContainer, check: bool = False) -> None:
        p.add_argument("--experiment", metavar="FILE",
                       help=("refuse a table (import: a kit) made for another space than this experiment file's "
                             "(the space as the experiment resolves it, its dataset's channels and classes "
                             "included), naming every difference, before anything is measured or written" if check else
                             "take the search space exactly as this experiment file resolves it (its dataset's "
                             "input channels and classes, its resolution, --set overrides), so that what is "
                             "measured prices that experiment's networks; the space is recorded"))

    def set_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="with --experiment: override a value of the file, as nas run --set does "
                            "(e.g. --set space.params.resolution=64; repeatable)")

    def backend_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--backend", default="onnxruntime", help="onnxruntime (default), torch, tensorrt, trtexec")
        p.add_argument("--provider", default=None, help="onnxruntime: cpu (default), cuda, tensorrt; torch: cpu, cuda")
        p.add_argument("--threads", type=int, default=1, help="pinned intra-op threads (CPU)")
        p.add_argument("--precision", default="fp32",
                       help="fp32 (default); fp16 (GPU backends); int8 (onnxruntime cpu: static QDQ quantisation)")
        p.add_argument("--cuda-graph", action="store_true",
                       help="torch on cuda: capture each unit and network once as a CUDA graph and time its replays "
                            "(the GPU's own work, without the host's kernel launches; the context's provider "
                            "becomes cuda-graph)")
        p.add_argument("--warmup", type=int, default=20, help="untimed runs before timing")
        p.add_argument("--repeats", type=int, default=100, help="at least this many timed runs")
        p.add_argument("--min-time", type=float, default=0.5, help="and at least this many seconds of timed runs")
        p.add_argument("--rounds", type=int, default=1,
                       help="time every unit (network) in this many rounds, each over all of them, and keep the "
                            "median of the rounds: steadier on a shared machine (default 1)")
        statistic_arg(p)

    def statistic_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--statistic", choices=("median", "p10"), default="median",
                       help="what a timing keeps of its runs: their median (default), or their 10th percentile, "
                            "which on a shared machine lies closer to a second timing of the same network "
                            "(validate uses the table's own)")

    pr = lsub.add_parser("profile", help="measure every unit of a space into a table (resumable)",
                         description="Enumerate every unit a space's layers() can produce, measure each with the "
                                     "chosen backend and write the table. Interrupted? Run the same command again: "
                                     "measured units are kept.")
    space_args(pr, experiment=True)
    backend_args(pr)
    pr.add_argument("--device", required=True, help="device name: the metric becomes latency_ms@<device>")
    pr.add_argument("--in-context", nargs="?", const="in_context", default="isolated", metavar="MODE",
                    choices=("isolated", "in_context", "between"),
                    help="time each unit inside a graph behind a cheap producer of its input and subtract the "
                         "producer: the unit's cost inside a running network, without the per-run overhead an "
                         "isolated timing adds. --in-context between also puts a cheap consumer behind the unit "
                         "(and subtracts it), so the unit runs in the layout the runtime picks inside a network "
                         "(onnxruntime runs int8 pools channels-last between quantised convolutions but "
                         "channels-first at a graph's output). Better for some tables, worse for others: compare "
                         "with nas latency validate")
    pr.add_argument("--out", required=True, help="table file (JSON); a table there of the same space, context and "
                    "protocol is resumed, any other file there is refused (see --force)")
    pr.add_argument("--force", action="store_true",
                    help="measure every unit afresh and replace the file at --out, whatever it holds (the old file "
                         "is kept until the new table is complete; an interrupted --force run starts afresh again)")
    pr.add_argument("--ray-resource", metavar="NAME",
                    help="measure on the node of a Ray cluster that advertises this custom resource (ray start "
                         "--resources '{\"NAME\": 1}'), with the backend that node has; the table is written here "
                         "with the remote host's facts (needs pip install -e \".[ray]\")")
    pr.add_argument("--ray-address", default="auto", help="with --ray-resource: the cluster (auto, HOST:PORT)")

    va = lsub.add_parser("validate", help="measure whole networks against a table; fit and store a calibration",
                         description="Measure N random architectures end to end on the table's context, compare "
                                     "with the table's sum (MAPE, within ±5 %/±10 %, Kendall τ), fit a robust "
                                     "calibration and report held-out figures. Everything is stored in the table. "
                                     "With --space-param resolutions=[...] (an elastic-resolution space such as "
                                     "ofa_mbv3 profiled at a few resolutions), judge instead the interpolation at "
                                     "the resolutions the table did not measure, and fit a factor per "
                                     "resolution on half of those networks; judged on the other half, it is "
                                     "used where it does better than the plain interpolation.")
    va.add_argument("table")
    va.add_argument("-n", type=int, default=100, help="networks to measure (default 100)")
    va.add_argument("--seed", type=int, default=0)
    va.add_argument("--force", action="store_true",
                    help="replace the validation (and calibration) the table already holds")
    va_space = va.add_mutually_exclusive_group()
    va_space.add_argument("--space-param", action="append", default=[], metavar="KEY=VALUE",
                          help="a parameter of the space to validate for, e.g. --space-param "
                               "'resolutions=[128,132,136]': networks at resolutions the table did not measure, "
                               "priced by interpolation")
    experiment_arg(va_space, check=True)
    set_arg(va)
    backend_args(va)

    ip = lsub.add_parser("import-published", help="turn a published table (once-for-all YAML, HW-NAS-Bench FBNet "
                         "JSON) into an hwnas table",
                         description="Import a published latency lookup table so experiments can use it with the "
                                     "latency_table evaluator.")
    ip.add_argument("format", choices=["ofa", "hw-nas-bench-fbnet"])
    ip.add_argument("path", help="the published file (e.g. ../shared/data/ofa-lut/note10/224_lookup_table.yaml)")
    space_args(ip)
    ip.add_argument("--device", help="device name (ofa: required; fbnet: default from --metric)")
    ip.add_argument("--metric", default="pixel3_latency",
                    help="hw-nas-bench-fbnet: a *_latency (ms) or *_energy (mJ: energy_mj@<device>) metric")
    ip.add_argument("--out", required=True, help="table file to write (refused if it exists, unless --force)")
    ip.add_argument("--force", action="store_true", help="replace an existing file at --out")

    kt = lsub.add_parser("kit", help="write a board kit: ONNX units + a runner that needs only numpy and onnxruntime",
                         description="For a board with no torch: write kit.zip (every unit of the space as ONNX, "
                                     "optional whole networks, a manifest) and run_kit.py. On the board: "
                                     "python3 run_kit.py kit.zip --out results.json. Back here: "
                                     "nas latency import results.json --kit kit.zip --out table.json. With "
                                     "--in-context the board times each unit inside a graph, as profile does "
                                     "here; with --precision int8 (onnxruntime, cpu) the graphs are quantised "
                                     "here. A quantised network is priced well only in context: use "
                                     "--precision int8 --in-context between.")
    space_args(kt, experiment=True)
    kt.add_argument("--device", required=True, help="the board's name (metric latency_ms@<device>)")
    kt.add_argument("--runtime", default="onnxruntime", choices=["onnxruntime", "trtexec"])
    kt.add_argument("--provider", default=None, help="onnxruntime provider on the board: cpu (default), cuda, tensorrt")
    kt.add_argument("--threads", type=int, default=None, help="pinned intra-op threads on the board (CPU)")
    kt.add_argument("--precision", default="fp32",
                    help="fp32 (default); int8 with onnxruntime's cpu provider (every graph statically quantised "
                         "here, QDQ, as profile --precision int8 measures); fp16 or int8 with trtexec (it builds "
                         "them from the fp32 graphs, or from typed ones with --typed); fp16 with the tensorrt "
                         "provider")
    kt.add_argument("--typed", action="store_true",
                    help="trtexec at fp16 or int8: put the precision in the graphs (fp16 weights and activations, or "
                         "symmetric int8 Q/DQ) so TensorRT builds them strongly typed; needed for TensorRT 11, whose "
                         "trtexec has no --fp16/--int8 (on TensorRT 10 the board passes --stronglyTyped instead)")
    kt.add_argument("--power-mode", default=None, help="the board's power mode, recorded in the context")
    kt.add_argument("--networks", type=int, default=30,
                    help="whole random networks to include for validation on the board (default 30)")
    kt.add_argument("--warmup", type=int, default=20)
    kt.add_argument("--repeats", type=int, default=100)
    kt.add_argument("--min-time", type=float, default=0.5)
    kt.add_argument("--rounds", type=int, default=1,
                    help="the board times every unit, then every whole network, in this many rounds, each over all "
                         "of them, and the import keeps the median of the rounds (default 1)")
    statistic_arg(kt)
    kt.add_argument("--in-context", nargs="?", const="in_context", default="isolated", metavar="MODE",
                    choices=("isolated", "in_context", "between"),
                    help="as for profile: each unit's graph holds it behind a cheap producer of its input (between: "
                         "also before a cheap consumer of its output); the board also times those producers and "
                         "consumers alone, afresh in every round, and the import subtracts them (default isolated)")
    kt.add_argument("--seed", type=int, default=0)
    kt.add_argument("--out", required=True, help="kit.zip path or a folder (kit.zip and run_kit.py go in it); an "
                    "existing zip is refused unless --force")
    kt.add_argument("--force", action="store_true",
                    help="replace an existing kit zip (and a run_kit.py other than this hwnas's runner) at --out")

    im = lsub.add_parser("import", help="turn a board's results.json into a table (and validate it with the "
                         "networks the board measured)")
    im.add_argument("results")
    im.add_argument("--kit", required=True, help="the kit.zip the results came from (its id must match)")
    im.add_argument("--out", required=True, help="table file to write (refused if it exists, unless --force)")
    im.add_argument("--force", action="store_true", help="replace an existing file at --out")
    im.add_argument("--allow-partial", action="store_true", help="import even if the board did not finish")
    im.add_argument("--seed", type=int, default=0, help="held-out split of the calibration")
    experiment_arg(im, check=True)
    set_arg(im)

    sh = lsub.add_parser("show", help="print a table's context, protocol and validation figures")
    sh.add_argument("table")

    fs = lsub.add_parser("fewshot", help="a latency model for a new device from a few measured networks",
                         description="Fit a whole-network latency model of a new device from k measured networks "
                                     "(a validated table, a kit-imported one, or JSON [{arch, latency_ms}]), "
                                     "transferring from the devices already known for the space (their latency "
                                     "tables, --source), blended with a model of the k networks alone where "
                                     "cross-validation favours it (a device unlike every known one). Writes one JSON "
                                     "file for the latency_model evaluator, with its leave-one-out figures on the k "
                                     "networks.")
    space_args(fs, experiment=True)
    fs.add_argument("--measured", required=True, help="the new device's measured networks")
    fs.add_argument("--source", action="append", default=[], metavar="TABLE", required=True,
                    help="a latency table of a known device for this space (repeatable)")
    fs.add_argument("--device", required=True, help="the new device's name (metric latency_ms@<device>)")
    fs.add_argument("--out", required=True, help="model file to write (refused if it exists, unless --force)")
    fs.add_argument("--force", action="store_true", help="replace an existing file at --out")
    fs.add_argument("--seed", type=int, default=0, help="the sample of the space the known devices price")


def _space(name: str, items: list[str]) -> Any:
    import yaml

    from hwnas.errors import ConfigError
    from hwnas.search_spaces import SPACES

    params = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--space-param {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        params[k.strip()] = yaml.safe_load(v)
    cls = SPACES.get(name)
    try:
        return cls(**params)
    except Exception as exc:
        raise ConfigError(f"--space-param: {_one_line(exc)}") from None


def _space_of(args: argparse.Namespace) -> SearchSpace:
    """The space of ``--space NAME [--space-param ...]``, or as ``--experiment FILE [--set ...]`` resolves it."""
    from hwnas.errors import ConfigError

    if args.experiment:
        if args.space_param:
            raise ConfigError("--space-param goes with --space; with --experiment, override the file's space with "
                              "--set space.params.KEY=VALUE")
        return _experiment_space(args)
    if args.overrides:
        raise ConfigError("--set KEY=VALUE overrides a value of an experiment file: it goes with --experiment")
    space: SearchSpace = _space(args.space, args.space_param)
    return space


def _experiment_space(args: argparse.Namespace) -> SearchSpace:
    from hwnas.experiments.config.build import experiment_space

    space = experiment_space(args.experiment, args.overrides)
    print(f"space {space.name} as {args.experiment} resolves it: {_scalars(space)}")
    return space


def _scalars(space: SearchSpace) -> str:
    """A space's resolved plain-valued parameters, ``in_chans=1, num_classes=10, resolution=32``."""
    from hwnas.search_spaces.base import resolved_params

    return ", ".join(f"{k}={v}" for k, v in resolved_params(space).items()
                     if isinstance(v, (bool, int, float, str)) and v is not None)


def _check_experiment(args: argparse.Namespace, what: str,
                      differences: Callable[[SearchSpace], list[tuple[str, object, object]]]) -> SearchSpace | None:
    """With ``--experiment``: the experiment's space, refused (every difference named, both values) where ``what``
    was made for another; None without it."""
    from hwnas.errors import ConfigError
    from hwnas.search_spaces.base import describe_differences

    if not args.experiment:
        if args.overrides:
            raise ConfigError("--set KEY=VALUE overrides a value of an experiment file: it goes with --experiment")
        return None
    space = _experiment_space(args)
    differ = differences(space)
    if differ:
        raise ConfigError(f"{what} was made for another space than {args.experiment}'s: "
                          f"{describe_differences(differ, 'kit' if what.startswith('kit') else 'table', 'experiment')}"
                          "; make it again with --experiment")
    return space


def _one_line(exc: Exception) -> str:
    """An exception's message on one line (a pydantic validation error as ``field: problem; ...``)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return f"{type(exc).__name__}: " + "; ".join(
                f"{'.'.join(map(str, e.get('loc', ()))) or '(parameters)'}: {pydantic_message(e)}" for e in errors())
        except Exception:  # not pydantic's errors(): fall back on the message
            pass
    return " ".join(str(exc).split())


def _backend_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The backend's constructor arguments from the command line (plain data: they travel to a remote node)."""
    kwargs: dict[str, Any] = {"precision": args.precision}
    if args.backend in ("onnxruntime", "torch"):
        kwargs["threads"] = args.threads
    if args.provider:
        kwargs["provider" if args.backend == "onnxruntime" else "device"] = args.provider
    if getattr(args, "cuda_graph", False):
        if args.backend != "torch":
            from hwnas.errors import ConfigError

            raise ConfigError(f"--cuda-graph: only the torch backend captures CUDA graphs, not {args.backend} "
                              "(trtexec on a board: its own --useCudaGraph)")
        kwargs["cuda_graph"] = True
    return kwargs


def _backend(args: argparse.Namespace) -> LatencyBackend:
    from hwnas.errors import ConfigError
    from hwnas.latency.backends import BACKENDS

    cls = BACKENDS.get(args.backend)
    kwargs = _backend_kwargs(args)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"--backend {args.backend}: {exc}") from None


def _protocol(args: argparse.Namespace) -> MeasureProtocol:
    from hwnas.latency.measure import MeasureProtocol

    try:
        return MeasureProtocol(warmup=args.warmup, repeats=args.repeats, min_time_s=args.min_time,
                               rounds=getattr(args, "rounds", 1), statistic=getattr(args, "statistic", "median"))
    except ValueError as exc:
        from hwnas.errors import ConfigError

        raise ConfigError(str(exc)) from None


def _bar(total: int, what: str) -> Progress:
    from hwnas.experiments.progress import progress_bar

    return progress_bar(what)


def cmd_latency(args: argparse.Namespace) -> int:
    sub = args.latency_command
    if sub is None:
        print("usage: nas latency {profile,validate,show,kit,import,import-published,fewshot} ... "
              "(nas latency --help)",
              file=sys.stderr)
        return 2
    _check_counts(args)
    return {"profile": _profile, "validate": _validate, "show": _show, "import-published": _import_published,
            "kit": _kit, "import": _import, "fewshot": _fewshot}[sub](args)


def _check_counts(args: argparse.Namespace) -> None:
    """Counts and durations given on the command line are checked here, under the option's own name."""
    from hwnas.errors import ConfigError

    device = getattr(args, "device", None)
    if device is not None and (not device.strip() or any(c.isspace() or c == "@" for c in device)):
        raise ConfigError(f"--device {device!r}: a device name is one word without '@' (it becomes the metric's "
                          "suffix, latency_ms@<device>)")
    least = {"networks": 0, "n": 1, "warmup": 0, "repeats": 1, "threads": 1, "min_time": 0, "seed": 0, "rounds": 1}
    for name, low in least.items():
        value = getattr(args, name, None)
        if value is not None and value < low:
            option = "-n" if name == "n" else "--" + name.replace("_", "-")
            raise ConfigError(f"{option} must be at least {low}, got {value}")


def _kit(args: argparse.Namespace) -> int:
    import numpy as np

    from hwnas.latency.kit.make import make_kit
    from hwnas.latency.tables.profile import unit_profiled

    space = unit_profiled(_space_of(args))
    kit = make_kit(space, device=args.device, out=args.out, runtime=args.runtime, provider=args.provider,
                   precision=args.precision, threads=args.threads, power_mode=args.power_mode,
                   protocol=_protocol(args), in_context=args.in_context, typed=args.typed,
                   validate_archs=args.networks, rng=np.random.default_rng(args.seed), force=args.force)
    carriers = len(kit.manifest.get("carriers") or [])
    print(f"{kit.zip_path}: kit {kit.kit_id[:12]} with {len(kit.manifest['units'])} units "
          f"({kit.manifest['protocol']['mode']}{f', {carriers} carriers' if carriers else ''}) and "
          f"{len(kit.manifest.get('networks', []))} networks; runner {kit.runner_path}")
    for key, err in kit.failed.items():
        print(f"failed to export: {key}: {err}", file=sys.stderr)
    print(f"on the board: python3 run_kit.py {kit.zip_path.name} --out results.json")
    from hwnas.latency.tables import MIN_NETWORKS

    if args.networks < MIN_NETWORKS:
        print(f"note: with fewer than {MIN_NETWORKS} whole networks (--networks {args.networks}) the import can judge "
              "and calibrate nothing", file=sys.stderr)
    return 1 if kit.failed else 0


def _import(args: argparse.Namespace) -> int:
    import numpy as np

    from hwnas.latency.kit.results import import_results, kit_space_differences, measured_networks, read_manifest
    from hwnas.latency.tables import MIN_NETWORKS, calibrate_table
    from hwnas.search_spaces import SPACES

    manifest = read_manifest(args.kit) if args.experiment else {}
    _check_experiment(args, f"kit {args.kit}",
                      lambda space: kit_space_differences(manifest, space, ignore=_neutral(space)))
    table = import_results(args.results, args.kit, args.out, allow_partial=args.allow_partial, force=args.force,
                           save=False)
    nets = measured_networks(table)
    figures = None
    if len(nets) >= MIN_NETWORKS:
        space = SPACES.get(table.space)(**table.space_params)
        figures = calibrate_table(table, space, [a for a, _, _ in nets], [m for _, _, m in nets],
                                  rng=np.random.default_rng(args.seed),
                                  how=f"{len(nets)} networks measured end to end on the board by run_kit.py")
    table.save(args.out)  # the one write: the complete table (calibrated where it can be), or nothing at --out
    print(f"{args.out}: {len(table.entries)} units ({len(table.failed)} failed) for {table.context.describe()}")
    if figures is not None:
        _print_figures(figures)
    else:
        print(f"the board measured fewer than {MIN_NETWORKS} whole networks: no calibration "
              "(make the kit with --networks N)")
    return 0


def _fewshot(args: argparse.Namespace) -> int:
    import numpy as np

    from hwnas.errors import ConfigError
    from hwnas.fileio import refuse_overwrite
    from hwnas.latency.fewshot import LatencyModelError, fit_fewshot, read_measured, save_model
    from hwnas.latency.tables import LatencyTable, LatencyTableError

    out = Path(args.out)
    refuse_overwrite([out], force=args.force)
    space = _space_of(args)
    try:
        measured = read_measured(args.measured, space)
        sources = [LatencyTable.load(p, space=space.name) for p in args.source]
        data = fit_fewshot(space, measured, sources, device=args.device, rng=np.random.default_rng(args.seed))
    except (LatencyModelError, LatencyTableError) as exc:
        raise ConfigError(str(exc)) from None
    save_model(data, out)
    f = data["validation"]["loo"]
    weights = ", ".join(f"{k} {v:.2f}" for k, v in sorted(data["weights"].items(), key=lambda kv: -kv[1]))
    print(f"{out}: latency_ms@{args.device} for space {space.name} from {data['measured']} measured networks and "
          f"{len(sources)} known device(s)")
    print(f"leave-one-out: MAPE {f['mape_pct']:.1f}%, {100 * f['within_10pct']:.0f}% within ±10%, Kendall τ "
          f"{f['kendall_tau']:.3f}")
    print(f"the new device as a mix of known ones: {weights or 'none (an offset only)'}")
    evidence = (data.get("correction") or {}).get("evidence")
    if evidence is not None:
        parts = [what for what, key in (("the known devices' deviations from their mix", "devices"),
                                        ("the networks' features", "features")) if evidence[key] > 0]
        print(f"corrected from its own {data['measured']} measurements where their marginal likelihood says so: "
              f"{' and '.join(parts) or 'not at all (the mix alone)'}")
    own = data["blend"]["own"]
    if own > 0:
        print(f"blended with a model of its own {data['measured']} measurements, which explains held-out ones "
              f"better: weight {own:.2f} (the transfer {1 - own:.2f})")
    return 0


def _import_published(args: argparse.Namespace) -> int:
    from hwnas.errors import ConfigError
    from hwnas.fileio import refuse_overwrite
    from hwnas.latency.published import hw_nas_bench_fbnet_table, ofa_table

    out = Path(args.out)
    refuse_overwrite([out], force=args.force)
    space = _space(args.space, args.space_param)
    if args.format == "ofa":
        if not args.device:
            raise ConfigError("import-published ofa needs --device (e.g. note10)")
        table = ofa_table(args.path, space=space, device=args.device)
    else:
        table = hw_nas_bench_fbnet_table(args.path, space=space, metric=args.metric, device=args.device)
    table.save(out)
    print(f"{out}: {len(table.entries)} entries for space {table.space} ({table.context.describe()})")
    return 0


def _profile(args: argparse.Namespace) -> int:
    from hwnas.latency.tables import ProfileOutput, units_of
    from hwnas.latency.tables.profile import unit_profiled

    out = ProfileOutput.check(args.out, force=args.force)  # before the space and the backend are built
    space = unit_profiled(_space_of(args))
    if args.ray_resource:
        return _profile_remote(args, space, out.path)
    backend = _backend(args)
    print(backend.check())
    total = len(units_of(space))
    bar = _bar(total, "profile")
    with bar:
        task = bar.add_task("units", total=None)

        def on_unit(i: int, n: int, key: str) -> None:
            bar.update(task, total=n, completed=i)

        rep = out.profile(space, backend, device=args.device, protocol=_protocol(args), in_context=args.in_context,
                          on_unit=on_unit)
    print(f"{args.out}: {len(rep.table.entries)} of {total} units "
          f"({rep.measured} measured now, {rep.reused} kept from before, {rep.failed} failed)")
    if rep.measured:
        print(f"wall {rep.wall_s:.1f} s for {rep.measure_s:.1f} s of timed runs: overhead {rep.overhead:.2f}x")
    for key, err in rep.table.failed.items():
        print(f"failed: {key}: {err}", file=sys.stderr)
    return 1 if rep.table.failed else 0


def _profile_remote(args: argparse.Namespace, space: Any, out: Path) -> int:
    """``profile --ray-resource``: the measurement on the Ray node with that resource, the table written here."""
    from hwnas.errors import OutputExists
    from hwnas.latency.remote import profile_remote
    from hwnas.latency.tables import LatencyTable, LatencyTableError, units_of

    _backend(args)  # the arguments make a backend (its hardware is checked on the node)
    if out.exists() and args.force:
        raise OutputExists(f"{out}: --force is not supported with --ray-resource; choose another --out")
    total = len(units_of(space))
    try:
        rep = profile_remote(space, args.backend, _backend_kwargs(args), resource=args.ray_resource,
                             address=args.ray_address, device=args.device, out=out, protocol=_protocol(args),
                             in_context=args.in_context)
    except LatencyTableError as exc:
        raise OutputExists(f"{exc}; or pass another --out") from None
    table = LatencyTable.load(out)
    node = rep["node"]
    print(f"{out}: {len(table.entries)} of {total} units measured on Ray node {node['address']} "
          f"({table.provenance.get('host')}, {table.provenance.get('cpu')}; {table.context.describe()}): "
          f"{rep['measured']} measured now, {rep['reused']} kept from before, {rep['failed']} failed")
    for key, err in table.failed.items():
        print(f"failed: {key}: {err}", file=sys.stderr)
    return 1 if table.failed else 0


def _validate(args: argparse.Namespace) -> int:
    from hwnas.errors import ConfigError
    from hwnas.latency.tables import MIN_NETWORKS, LatencyTable
    from hwnas.search_spaces import SPACES

    if args.n < MIN_NETWORKS:
        raise ConfigError(f"-n {args.n}: validation needs at least {MIN_NETWORKS} networks")
    table = LatencyTable.load(args.table)
    # with --experiment: the table against the experiment's space, before anything is built or measured
    experiment = _check_experiment(args, f"table {args.table}", lambda space: table.space_differences(
        space, ignore=[*_neutral(space), *(["resolutions"] if _interpolates(table, space) else [])]))
    space = experiment or SPACES.get(table.space)(**table.space_params)
    backend = _backend(args)
    own = table.protocol.get("statistic") if isinstance(table.protocol, dict) else None
    if own in ("median", "p10") and args.statistic != own and args.statistic != "median":
        print(f"note: networks are timed with the table's own statistic ({own}), not --statistic {args.statistic}",
              file=sys.stderr)
    if experiment is not None and table.space_differences(space, ignore=_neutral(space)):
        return _validate_interpolation(args, table, space, backend)  # only the resolutions differ
    if args.space_param:
        keys = sorted({item.split("=", 1)[0].strip() for item in args.space_param})
        if keys != ["resolutions"]:
            raise ConfigError(f"--space-param {', '.join(k for k in keys if k != 'resolutions')}: validate takes only "
                              "resolutions=[...] (an elastic-resolution space judged at resolutions the table did not "
                              "measure); the table's other space parameters are its own")
        return _validate_interpolation(args, table, _space(table.space, [
            *(f"{k}={json.dumps(v)}" for k, v in table.space_params.items()), *args.space_param]), backend)
    return _validate_space(args, table, space, backend)


def _neutral(space: SearchSpace) -> list[str]:
    """The parameters of ``space`` that change no network (:func:`~hwnas.search_spaces.base.neutral_params`)."""
    from hwnas.search_spaces.base import neutral_params

    return list(neutral_params(space))


def _interpolates(table: LatencyTable, space: SearchSpace) -> bool:
    """Whether ``table`` measured some resolutions of ``space``, an elastic-resolution space, and prices the others
    by interpolation (``validate --space-param resolutions=[...]`` judges those)."""
    from hwnas.search_spaces.base import ElasticResolutionSpace

    recorded = table.space_resolved if table.space_resolved is not None else table.space_params
    return isinstance(space, ElasticResolutionSpace) and isinstance(recorded.get("resolutions"), list)


def _validate_space(args: argparse.Namespace, table: LatencyTable, space: SearchSpace,
                    backend: LatencyBackend) -> int:
    import numpy as np

    from hwnas.latency.tables import validate_table

    bar = _bar(args.n, "validate")
    t0 = time.perf_counter()
    with bar:
        task = bar.add_task("networks", total=args.n)
        figures = validate_table(table, space, backend, n=args.n, rng=np.random.default_rng(args.seed),
                                 protocol=_protocol(args), on_arch=lambda i, n: bar.update(task, total=n, completed=i),
                                 replace=args.force)
    _print_figures(figures)
    print(f"calibration stored in {args.table}: {table.calibration.to_dict() if table.calibration else None} "
          f"({time.perf_counter() - t0:.0f} s)")
    return 0


def _validate_interpolation(args: argparse.Namespace, table: Any, space: Any, backend: Any) -> int:
    import numpy as np

    from hwnas.errors import ConfigError
    from hwnas.latency.tables import validate_interpolation

    bar = _bar(args.n, "validate")
    t0 = time.perf_counter()
    try:
        with bar:
            task = bar.add_task("networks", total=args.n)
            f = validate_interpolation(table, space, backend, n=args.n, rng=np.random.default_rng(args.seed),
                                       protocol=_protocol(args),
                                       on_arch=lambda i, n: bar.update(task, total=n, completed=i))
    except ValueError as exc:
        raise ConfigError(f"{args.table}: {exc}") from None
    _print_interpolated(f)
    print(f"stored in {args.table} ({time.perf_counter() - t0:.0f} s)")
    return 0


def _print_interpolated(f: dict[str, Any]) -> None:
    print(f"interpolated between measured resolutions {f['measured_resolutions']}, judged at {f['resolutions']}:")
    rows = [("interpolated (all)", f)]
    held = f.get("heldout")  # tables validated before the per-resolution correction have none
    if held:
        rows += [("interpolated (held-out)", held["interpolated"]),
                 ("per-resolution (held-out)", held["corrected"])]
    for label, g in rows:
        print(f"{label:26s} {g['mape_pct']:6.2f}% MAPE, {100 * g['within_5pct']:.0f}% within ±5 %, "
              f"{100 * g['within_10pct']:.0f}% within ±10 %, Kendall τ {g['kendall_tau']:.3f}, n {g['n']}")
    if held:
        used = f["correction"]["used"]
        factors = ", ".join(f"{r}: {v:.3f}" for r, v in f["correction"]["factors"].items())
        print(f"per-resolution factors (fitted on all {f['n']}): {factors}; "
              + ("used: the interpolation is corrected by them" if used else
                 "not used: they did not judge better than the plain interpolation"))


def _print_figures(v: dict[str, Any]) -> None:
    print(f"{'':22s} {'MAPE':>7s} {'±5%':>6s} {'±10%':>6s} {'Kendall τ':>10s} {'n':>4s}")
    rows = [(label, v[key]) for label, key in (("raw sum", "raw"), ("calibrated (held-out)", "calibrated_heldout"))
            if isinstance(v.get(key), dict)]  # a validation without them (too few networks) shows what it has
    if v.get("learned_heldout"):
        rows.append(("learned (held-out)", v["learned_heldout"]))
    mean = v.get("mean_heldout") or {}
    splits = (mean.get("calibrated") or {}).get("splits", 1)
    if splits > 1:  # tables validated before the repeated halvings have none
        rows.append((f"calibrated, {splits} halvings", mean["calibrated"]))
        if mean.get("learned"):
            rows.append((f"learned, {splits} halvings", mean["learned"]))
    keys = ("mape_pct", "within_5pct", "within_10pct", "kendall_tau", "n")
    for label, f in rows:
        if not isinstance(f, dict) or not all(isinstance(f.get(k), (int, float)) for k in keys):
            print(f"{label:22s} (incomplete figures)")
            continue
        print(f"{label:22s} {f['mape_pct']:6.2f}% {100 * f['within_5pct']:5.0f}% {100 * f['within_10pct']:5.0f}% "
              f"{f['kendall_tau']:10.3f} {f['n']:4d}")
    if v.get("answers"):
        why = f" (the lower mean held-out MAPE over {splits} random halvings)" if splits > 1 else ""
        print(f"whole networks are priced by: {v['answers']}{why}")


def _show(args: argparse.Namespace) -> int:
    from hwnas.latency.tables import LatencyTable

    t = LatencyTable.load(args.table)
    print(f"{args.table}: space {t.space}, {len(t.entries)} units, {len(t.failed)} failed")
    resolved = t.space_resolved is not None
    print(f"space: {t.space}" + ("" if resolved else " (parameters as given: a table made before hwnas recorded "
                                                     "the resolved space)"))
    print("\n".join(field_lines(t.space_resolved if t.space_resolved is not None else t.space_params)))
    print(f"context: {t.context.describe()}")
    print("\n".join(field_lines(t.context.to_dict())))
    print("protocol:")
    print("\n".join(field_lines(t.protocol)))
    print("provenance:")
    networks = t.provenance.get("networks")
    print("\n".join(field_lines({k: v for k, v in t.provenance.items() if k != "networks"})))
    if isinstance(networks, list):
        print(f"  networks: {len(networks)} measured end to end")
    _print_coverage(t)
    if t.validation:
        print(f"validation ({t.validation.get('how', '')}):")
        _print_figures(t.validation)
        if t.validation.get("interpolated"):
            try:
                _print_interpolated(t.validation["interpolated"])
            except (KeyError, TypeError, ValueError):  # a hand-edited or partial block: say so, print the rest
                print("interpolated: (incomplete figures)")
    elif t.protocol.get("mode") == "published":
        print("a published table: not validated here (its figures are its authors'; it prices as they do)")
    elif t.unit != "ms":
        print(f"not validated: a table of {t.metric_prefix} ({t.unit}); validate times latency tables only")
    else:
        print("not validated: run nas latency validate to know how far this table can be trusted")
    return 0


def field_lines(data: Mapping[str, object], indent: int = 2) -> list[str]:
    """``data`` as aligned ``label: value`` lines: a nested mapping's keys indented under its label (a list holding
    mappings, each item under ``label[i]``), a list of plain values joined by commas; ``(none)`` for an empty
    mapping."""
    if not data:
        return [" " * indent + "(none)"]
    pad = " " * indent
    width = max(len(str(k)) for k in data) + 1
    lines = []
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key}:")
            lines.extend(field_lines(value, indent + 2))
        elif isinstance(value, (list, tuple)) and any(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                lines.extend(field_lines({f"{key}[{i}]": item}, indent))
        else:
            lines.append(f"{pad}{str(key) + ':':<{width}} {_field_value(value)}")
    return lines


def _field_value(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return "(none)"
    if isinstance(value, (list, tuple)):
        if not value:
            return "(none)"
        return ", ".join(f"[{_field_value(v)}]" if isinstance(v, (list, tuple)) else _field_value(v) for v in value)
    return str(value)


def _print_coverage(t: Any) -> None:
    """Say so when a table lacks units of its own space (an interrupted profile)."""
    from hwnas.search_spaces import SPACES
    from hwnas.search_spaces.base import UnitListedSpace

    try:
        space = SPACES.get(t.space)(**t.space_params)
    except Exception:  # a space this version cannot build
        return
    if not isinstance(space, UnitListedSpace):  # one that lists no units
        return
    units = list(dict.fromkeys(space.all_layers()))
    missing = t.missing(units)
    if missing:
        print(f"incomplete: {len(missing)} of the {len(units)} units of the space have no entry (e.g. {missing[0]}); "
              "the same nas latency profile command resumes it")
