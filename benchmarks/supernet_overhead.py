"""Supernet overhead: a training step of the largest subnet through the supernet against the same network alone.

For every shipped supernet (small CPU-sized spaces by default), times forward + backward + SGD step of the
largest architecture at one batch size two ways, interleaved in one process: through the supernet's
``forward(x, arch)`` (sliced shared weights, functional ops) and through ``extract(arch)``, the plain
standalone network the space builds. Reports the ratio (median of --repeats rounds), and on a GPU the peak
memory of each. Also times sandwich steps (largest, smallest, two fresh random subnets each step): the first, and the
steady state (median of the last half), and counts the convolution configurations (input and weight shapes,
stride, padding, groups, dtype) each step meets for the first time: on a GPU each new one costs cuDNN plans
(forward and both backward passes), so the median over the steps that met none is reported too.

    python benchmarks/supernet_overhead.py                   # CPU here
    python benchmarks/supernet_overhead.py --device cuda --amp   # on a GPU machine (bf16 autocast, channels-last)
    python benchmarks/supernet_overhead.py --device cuda --amp --batch 128 --spaces ofa_mbv3 \
        --space-param ofa_mbv3.resolutions=[224]                  # ImageNet-sized
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np
from latency_tables import space_param_overrides  # benchmarks/latency_tables.py, next to this script

SPACES: dict[str, dict[str, Any]] = {
    "mbv3": {"resolution": 32, "in_chans": 3},
    "ofa_mbv3": {"resolutions": [128, 160], "num_classes": 10},
    "vit": {"resolution": 32},
    "convnext": {"resolution": 32},
    "nb201": {"resolution": 32, "cells_per_stage": 2},
    "darts": {"resolution": 32, "cells": 5},
}


def conv_config_counter() -> Any:
    """A torch function mode that records every distinct convolution configuration it sees (``.new`` counts them)."""
    import torch
    from torch.overrides import TorchFunctionMode

    convs = {torch.conv1d, torch.conv2d, torch.conv3d, torch.nn.functional.conv1d, torch.nn.functional.conv2d,
             torch.nn.functional.conv3d}

    class ConvConfigs(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: set[tuple[Any, ...]] = set()
            self.new = 0

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func in convs:
                x, w = args[0], args[1]
                rest = tuple(str(a) for a in args[3:]) + tuple(sorted((k, str(v)) for k, v in kwargs.items()
                                                                      if k != "bias"))
                key = (tuple(x.shape), tuple(w.shape), str(x.dtype), x.is_contiguous(), rest)
                if key not in self.seen:
                    self.seen.add(key)
                    self.new += 1
            return func(*args, **kwargs)

    return ConvConfigs()


def measure(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Time one space's largest subnet through the supernet and alone (and a sandwich step); print a line."""
    import torch
    import torch.nn.functional as F

    from hwnas.search_spaces import SPACES as SPACE_REG
    from hwnas.supernet import SUPERNETS

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    space = SPACE_REG.create(name, {**SPACES.get(name, {}), **args.overrides.get(name, {})})
    sn = SUPERNETS.create(name, {}, space=space, generator=torch.Generator().manual_seed(0)).to(device)
    arch = sn.largest()
    plain = sn.extract(arch).to(device)
    shape = tuple(space.input_shape_of(arch))
    x = torch.randn(args.batch, *shape, device=device)
    y = torch.randint(sn.num_classes, (args.batch,), device=device)
    if cuda:
        x = x.contiguous(memory_format=torch.channels_last)
        sn.to(memory_format=torch.channels_last)
        plain.to(memory_format=torch.channels_last)

    def step(model: Any, fwd: Any, opt: Any) -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp and cuda):
            loss = F.cross_entropy(fwd(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    opt_sn = torch.optim.SGD(sn.parameters(), lr=1e-3, momentum=0.9)
    opt_pl = torch.optim.SGD(plain.parameters(), lr=1e-3, momentum=0.9)
    runs = {"supernet": (sn, lambda t: sn(t, arch), opt_sn), "standalone": (plain, plain, opt_pl)}
    for model, _, _ in runs.values():
        model.train()
    times: dict[str, list[float]] = {k: [] for k in runs}
    peak: dict[str, int] = {}
    for k, (model, fwd, opt) in runs.items():  # warm-up (and peak memory, on a GPU)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        step(model, fwd, opt)
        step(model, fwd, opt)
        if cuda:
            torch.cuda.synchronize()
            peak[k] = int(torch.cuda.max_memory_allocated())
    for _ in range(args.repeats):
        for k, (model, fwd, opt) in runs.items():
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(args.steps):
                step(model, fwd, opt)
            if cuda:
                torch.cuda.synchronize()
            times[k].append((time.perf_counter() - t) / args.steps)
    ratio = statistics.median(a / b for a, b in zip(times["supernet"], times["standalone"]))
    # sandwich steps as the trainer runs them: largest + smallest + 2 random subnets, fresh ones every step. Each
    # step is timed alone: on a GPU the first steps build kernels / cuDNN plans for every new layer shape, which the
    # steady state (median of the last half) no longer pays.
    rng = np.random.default_rng(0)
    last = sn.phases[-1]
    small = sn.smallest(last)

    counter = conv_config_counter()

    def sandwich_step() -> float:
        archs = [arch, small, sn.sample_subnet(rng, last), sn.sample_subnet(rng, last)]
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        opt_sn.zero_grad(set_to_none=True)
        counter.new = 0
        for a in archs:
            xa = x if tuple(space.input_shape_of(a)) == shape else torch.nn.functional.interpolate(
                x, size=tuple(space.input_shape_of(a)[1:]))
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp and cuda), counter:
                loss = F.cross_entropy(sn(xa, a).float(), y)
            loss.backward()
        opt_sn.step()
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - t

    step_s, new_configs = [], []
    for _ in range(args.sandwich_steps):
        step_s.append(sandwich_step())
        new_configs.append(counter.new)
    sandwich = statistics.median(step_s[len(step_s) // 2:])
    settled = [t for t, n in zip(step_s[1:], new_configs[1:]) if n == 0]
    # step time ~ base + cost * new configurations (steps after the first, which also pays one-off set-up)
    per_config = None
    if len(set(new_configs[1:])) > 1:
        per_config, _ = np.polyfit(np.array(new_configs[1:], float), np.array(step_s[1:]), 1)
    row = {"space": name, "space_params": {**SPACES.get(name, {}), **args.overrides.get(name, {})},
           "batch": args.batch, "input": list(shape), "device": str(device),
           "supernet_step_ms": 1e3 * statistics.median(times["supernet"]),
           "standalone_step_ms": 1e3 * statistics.median(times["standalone"]),
           "overhead_ratio": ratio, "sandwich_step_ms": 1e3 * sandwich,
           "sandwich_images_per_s": args.batch / sandwich,
           "sandwich_step_ms_each": [round(1e3 * t, 2) for t in step_s],
           "sandwich_new_conv_configs_each": new_configs, "conv_configs_seen": len(counter.seen),
           "sandwich_step_ms_no_new_configs": 1e3 * statistics.median(settled) if settled else None,
           "ms_per_new_conv_config_fit": None if per_config is None else 1e3 * float(per_config)}
    if cuda:
        row["peak_mib"] = {k: v / 2**20 for k, v in peak.items()}
    mem = (f"  peak {row['peak_mib']['supernet']:.0f} / {row['peak_mib']['standalone']:.0f} MiB" if cuda else "")
    print(f"{name:9s} batch {args.batch} {shape}: largest via supernet {row['supernet_step_ms']:.1f} ms, "
          f"standalone {row['standalone_step_ms']:.1f} ms, ratio {ratio:.2f}; sandwich step "
          f"{row['sandwich_step_ms']:.1f} ms ({row['sandwich_images_per_s']:.0f} img/s; first "
          f"{1e3 * step_s[0]:.0f} ms){mem}", flush=True)
    quiet = row["sandwich_step_ms_no_new_configs"]
    print(f"{'':9s} convolution configurations met: {len(counter.seen)}; new per step {new_configs}; steps meeting "
          f"none: {len(settled)}, median {'-' if quiet is None else f'{quiet:.1f} ms'}; fitted cost of a new one "
          f"{'-' if per_config is None else f'{1e3 * per_config:.0f} ms'}", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spaces", default=",".join(SPACES))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per round")
    ap.add_argument("--repeats", type=int, default=5, help="rounds (each: supernet, then standalone)")
    ap.add_argument("--sandwich-steps", type=int, default=20,
                    help="sandwich steps, fresh random subnets each; the median of the last half is reported")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--amp", action="store_true", help="bf16 autocast (GPU)")
    ap.add_argument("--space-param", action="append", default=[], metavar="SPACE.KEY=VALUE",
                    help="change one space parameter (VALUE is YAML), e.g. ofa_mbv3.resolutions=[224] (repeatable)")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args(argv)
    try:
        args.overrides = space_param_overrides(args.space_param, list(SPACES))
    except ValueError as exc:
        ap.error(str(exc))

    import torch

    torch.set_num_threads(args.threads)
    results = [measure(name, args) for name in args.spaces.split(",")]
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
