"""``nas supernet train``: train a weight-sharing supernet from a YAML file, resumable; ``nas supernet score``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hwnas.cli.parsing import Subparsers

TRAIN_DESCRIPTION = """\
Train a weight-sharing supernet as the file's `supernet:` section says (space, dataset, phases, batch, optimiser):
once-for-all's progressive shrinking, phase by phase, each step training the largest, the smallest and random
subnets with in-place distillation from the largest. After every epoch the largest and smallest subnets are
extracted, BatchNorm-recalibrated and measured on the held-out split (curves.csv, curves.png), and a checkpoint is
written (safetensors + JSON, no pickle). A killed run continues with --resume; a changed config is refused, its
keys named; a NaN loss stops the run and names the step, keeping the last good checkpoint. Use the result with the
`supernet` evaluator of an experiment (evaluators: [{name: supernet, params: {checkpoint: DIR}}]).

Few-shot: `params: {split: GENE}` and a last phase `{phase: split, epochs: N}` copy the one-shot supernet, once
the other phases are done, into one sub-supernet per value of GENE (e.g. w2, a ConvNeXt's last-stage width) and
train each N epochs on its own subnets only; each subnet is then scored with its value's weights."""

TRAIN_EPILOG = """examples:
  nas supernet train experiments/supernet_mbv3.yaml                  -> runs/supernets/quickstart_mbv3
  nas supernet train experiments/supernet_mbv3.yaml --resume         continue after a kill
  nas supernet train experiments/supernet_mbv3.yaml --set supernet.random_subnets=4 --out /tmp/sn
  nas supernet score runs/supernets/quickstart_mbv3 --samples 20     top-1 of random subnets, inherited weights

the file:
  supernet:
    name: mbv3_digits
    space: {name: mbv3, params: {resolution: 16}}
    dataset: {name: digits}                 # or mnist5k, or image_folder with a path
    phases:                                 # default: every phase of the supernet, epochs_per_phase each
      - {phase: largest, epochs: 4}
      - {phase: kernel, epochs: 2, lr: 0.02}
    # params: {split: d1}                   # few-shot: one sub-supernet per value of gene d1, then
    #   - {phase: split, epochs: 2}         # the last phase, N epochs per value
    batch_size: 64
    optimizer: {name: sgd, lr: 0.05}
"""


def add_parser(sub: Subparsers) -> None:
    sp = sub.add_parser("supernet", help="weight-sharing supernets: train one, score its subnets",
                        description="Weight-sharing supernets (once-for-all MobileNetV3, ViT, ConvNeXt, "
                                    "NAS-Bench-201 and DARTS cells).")
    ssub = sp.add_subparsers(dest="supernet_command", metavar="SUBCOMMAND")
    tr = ssub.add_parser("train", help="train (or resume) a supernet from a YAML file",
                         description=TRAIN_DESCRIPTION, epilog=TRAIN_EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    tr.add_argument("file", help="YAML file with a supernet: section")
    tr.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a value, e.g. --set supernet.batch_size=32 (repeatable)")
    tr.add_argument("--out", help="output folder (default runs/supernets/<name>)")
    tr.add_argument("--resume", action="store_true", help="continue the run in the output folder from its last "
                    "checkpoint (the config must be unchanged, except device, threads and checkpoint_every)")
    tr.add_argument("--quiet", action="store_true", help="no progress bars")
    sc = ssub.add_parser("score", help="held-out top-1 of subnets with inherited weights",
                         description="Extract subnets from a trained supernet, recalibrate their BatchNorm on "
                                     "training images and measure held-out top-1 (the `supernet` evaluator's "
                                     "numbers). Subnets: the largest, the smallest, and --samples random ones.")
    sc.add_argument("checkpoint", help="a training folder, its checkpoint/ or its supernet.safetensors")
    sc.add_argument("--samples", type=int, default=10, help="random subnets to score (default 10; 0: the largest "
                    "and the smallest only)")
    sc.add_argument("--seed", type=int, default=0)


def _load_config(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from hwnas.errors import ConfigError
    from hwnas.experiments.config.schema import pydantic_problems
    from hwnas.experiments.config.yaml_io import load_yaml
    from hwnas.supernet.train import SupernetTrainConfig

    loaded = load_yaml(args.file, args.overrides)
    args.loaded = loaded  # for the line of a problem found later (see _located)
    data = loaded.data
    if not isinstance(data, dict) or "supernet" not in data:
        raise ConfigError(f"{args.file}: expected a top-level `supernet:` section")
    extra = sorted(set(data) - {"supernet"})
    if extra:
        raise ConfigError(f"{loaded.where((extra[0],))}: {extra[0]}: unknown top-level key (only `supernet:`)")
    try:
        return SupernetTrainConfig.model_validate(data["supernet"])
    except ValidationError as exc:
        problems = pydantic_problems(exc.errors(), SupernetTrainConfig, loaded, prefix=("supernet",))
        raise ConfigError("\n".join(problems)) from None


def cmd_supernet(args: argparse.Namespace) -> int:
    if args.supernet_command == "train":
        return _train(args)
    if args.supernet_command == "score":
        return _score(args)
    print("usage: nas supernet {train,score} ... (nas supernet --help)")
    return 2


def _train(args: argparse.Namespace) -> int:
    from hwnas.errors import ConfigError
    from hwnas.experiments.progress import progress_bar
    from hwnas.supernet.train import train_supernet

    cfg = _load_config(args)
    out = Path(args.out) if args.out else Path("runs") / "supernets" / cfg.name
    bars: dict[int, Any] = {}
    progress = None if args.quiet else progress_bar("", status=True)

    def on_step(ev: Any) -> None:
        if progress is None:
            return
        if ev.phase_index not in bars:
            bars[ev.phase_index] = progress.add_task(f"phase {ev.phase}", total=ev.epochs * ev.steps, status="")
        progress.update(bars[ev.phase_index], completed=ev.epoch * ev.steps + ev.step,
                        status=f"epoch {ev.epoch + 1}/{ev.epochs} loss {ev.loss:.3f}")

    def on_epoch(row: dict[str, Any]) -> None:
        msg = (f"{row['phase']} epoch {row['epoch']}: held-out top-1 largest {100 * row['largest_top1']:.2f} %, "
               f"smallest {100 * row['smallest_top1']:.2f} %")
        if progress is not None:
            progress.console.print(msg)
        else:
            print(msg)

    if progress is not None:
        progress.start()
    try:
        result = train_supernet(cfg, out, resume=args.resume, on_step=on_step, on_epoch=on_epoch)
    except ConfigError as exc:
        raise _located(exc, getattr(args, "loaded", None)) from None
    except KeyboardInterrupt:
        if progress is not None:
            progress.stop()
        import shlex

        again = " ".join(shlex.quote(a) for o in args.overrides for a in ("--set", o))
        print(f"interrupted: continue from the last checkpoint with nas supernet train {shlex.quote(args.file)} "
              f"{again + ' ' if again else ''}--resume" + (f" --out {shlex.quote(str(out))}" if args.out else ""))
        return 130
    finally:
        if progress is not None:
            progress.stop()
    last = result.curves[-1] if result.curves else None
    if result.already_finished:
        print(f"{out}: this training had already finished ({result.steps} steps); nothing to train. Its weights: "
              f"{result.checkpoint}")
        return 0
    print(f"trained {result.steps} steps in {result.seconds:.0f} s -> {result.checkpoint}")
    if last:
        print(f"held-out top-1 ({cfg.dataset.name} val split): largest {100 * last['largest_top1']:.2f} %, "
              f"smallest {100 * last['smallest_top1']:.2f} %; curves: {out / 'curves.png'}")
    return 0


def _located(exc: Any, loaded: Any) -> Any:
    """``exc`` with each problem that starts with a key of the file (``supernet.phases[1].phase: ...``) prefixed by
    the file and line of that key."""
    import re

    from hwnas.errors import ConfigError

    if loaded is None:
        return exc
    out = []
    for problem in exc.problems:
        m = re.match(r"(supernet(?:\.\w+|\[\d+\])+): ", problem)
        if m:
            path = tuple(int(p) if p.isdigit() else p for p in re.findall(r"\w+", m.group(1)))
            problem = f"{loaded.where(path)}: {problem}"
        out.append(problem)
    return ConfigError(out)


def _score(args: argparse.Namespace) -> int:
    from hwnas.supernet.score import subnet_scoring

    scoring = subnet_scoring(args.checkpoint, samples=args.samples, seed=args.seed)
    print(f"{'subnet':10s} {'arch_id':18s} {'top1 %':>7s}  (held-out split of {scoring.dataset})")
    for s in scoring.scores():
        print(f"{s.label:10s} {s.arch.arch_id:18s} {100 * s.top1:7.2f}")
    return 0
