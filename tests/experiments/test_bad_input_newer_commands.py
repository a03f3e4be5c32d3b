"""The bad-input catalogue of the newer commands (supernet training and scoring, predictor fitting and evaluation,
sweeps, the HTML report, export, latency tables), each case run as a real ``nas`` process with a timeout: a hang
fails the case, which an in-process catalogue cannot show. Every case must exit non-zero with exactly one error
line that names the problem and where it is, print no traceback, and leave every file that existed before
byte-identical (the finished run and supernet training it is given included).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

NAS = [sys.executable, "-c", "import sys; from hwnas.cli import main; sys.exit(main(sys.argv[1:]))"]
TIMEOUT_S = 90  # per case; a case that blocks (a pipe read, a silent server) fails here

EXPERIMENT = """\
name: cat
seed: 1
space: {{name: nb201}}
evaluators:
  - name: benchmark
    params: {{table: {table}, columns: {{top1: cifar10_test_200ep}}}}
objectives:
  - {{metric: top1, direction: max}}
strategy: {{name: random}}
budget: {{trials: {trials}, batch_size: 4}}
export: {{enabled: false}}
"""

SUPERNET = """\
supernet:
  name: tiny
  space:
    name: mbv3
    params:
      resolution: 8
      stem_channels: 8
      head_channels: 16
      stages:
        - {channels: 8, stride: 1, depths: [1, 2]}
        - {channels: 16, stride: 2, depths: [1, 2], se: true}
  dataset: {name: digits, max_images: 160}
  phases:
    - {phase: largest, epochs: 1}
    - {phase: kernel, epochs: 1}
  batch_size: 32
  random_subnets: 1
  calib_images: 32
  seed: 5
  device: cpu
  threads: 1
"""

SWEEP = "name: sw\nbase: exp.yaml\nparams: {seed: {grid: [0, 1]}}\n"

LOG_LINE = re.compile(r"^(DEBUG|INFO|WARNING) [\w.]+: ")


@dataclass
class Case:
    """One bad input: the command ({tmp} the case's folder, {run} a finished run, {sn} a finished supernet
    training, {pred} a fitted predictor, all copies in {tmp}), files to make first, and what the line must say."""

    id: str
    args: list[str]
    expect: list[str]
    setup: Callable[[Path], object] | None = None
    lock: str | None = None  # a folder (under tmp) whose lock another process holds while the case runs
    env: dict[str, str] | None = None  # environment variables of the command ({tmp} the case's folder)
    skip_if: Callable[[], str | None] | None = None  # a reason the case cannot be run on this machine now


def _write(name: str, text: str | bytes) -> Callable[[Path], object]:
    def make(tmp: Path) -> None:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text.replace("{tmp}", str(tmp)))

    return make


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "pipe")


def _socket(tmp: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(tmp / "sock"))
    return s  # kept open by the caller until the case is over


def _sn_edit(old: str, new: str) -> Callable[[Path], object]:
    def make(tmp: Path) -> None:
        text = (tmp / "sn.yaml").read_text()
        assert old in text, old
        (tmp / "sn.yaml").write_text(text.replace(old, new))

    return make


def _truncate(rel: str, size: int) -> Callable[[Path], object]:
    def make(tmp: Path) -> None:
        with open(tmp / rel, "r+b") as fh:
            fh.truncate(size)

    return make


def _nan_predictor(tmp: Path) -> None:
    data = json.loads((tmp / "pred.json").read_text())
    data["state"]["init"] = float("nan")
    (tmp / "nan.json").write_text(json.dumps(data))


def _latency_table(tmp: Path, shared: Path, *, twice: bool = False, binary: bool = False) -> None:
    """HW-NAS-Bench's FBNet Pixel 3 table as an hwnas table at tmp/fb.json, with a unit listed twice, or binary."""
    subprocess.run([*NAS, "latency", "import-published", "hw-nas-bench-fbnet",
                    str(shared / "hw-nas-bench" / "fbnet_lut.json"), "--space", "fbnet", "--metric", "pixel3_latency",
                    "--out", str(tmp / "fb.json")], check=True, capture_output=True, timeout=TIMEOUT_S)
    text = (tmp / "fb.json").read_text()
    if twice:
        unit = json.dumps(sorted(json.loads(text)["entries"])[0])
        at = text.index(unit)
        text = text[:at] + unit + ': {"median_ms": 5.0, "p10_ms": 5.0, "p90_ms": 5.0, "iqr_ms": 0.0, "count": 1}, ' \
            + text[at:]
    (tmp / "fb.json").write_bytes(b"\x00\x01\xfe" + os.urandom(64) if binary else text.encode())
    (tmp / "fb.yaml").write_text(
        "name: fb\nspace: {name: fbnet}\nevaluators:\n"
        f"  - {{name: latency_table, params: {{table: '{tmp / 'fb.json'}'}}}}\n"
        "objectives:\n  - {metric: latency_ms@pixel3, direction: min}\nstrategy: {name: random}\n"
        "budget: {trials: 5}\nexport: {enabled: false}\n")


def _ray_experiment(tmp: Path, address: str) -> None:
    text = (tmp / "exp.yaml").read_text().rstrip("\n")
    (tmp / "ray.yaml").write_text(text + f"\nexecutor: {{name: ray, address: '{address}', connect_timeout_s: 2}}\n")


class SilentServer:
    """A TCP port that accepts every connection and never says a word (a wrong port, a stuck proxy)."""

    def __init__(self) -> None:
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def _huge_targets(tmp: Path) -> None:
    """A table of 30 NAS-Bench-201 cells whose targets alternate between -1.7e308 and 1.7e308: finite numbers whose
    spread overflows, so that a predictor fitted on them predicts NaN."""
    import itertools

    ops = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
    lines = ["arch_str,acc"]
    for k, (a, b, c, d, e, f) in enumerate(itertools.islice(itertools.product(ops, repeat=6), 30)):
        lines.append(f"|{a}~0|+|{b}~0|{c}~1|+|{d}~0|{e}~1|{f}~2|,{'1.7e308' if k % 2 else '-1.7e308'}")
    (tmp / "huge.csv").write_text("\n".join(lines) + "\n")


def _raylets_running() -> str | None:
    from hwnas.cluster import _raylet_gcs_addresses

    running = _raylet_gcs_addresses()
    return f"a Ray cluster runs on this machine ({', '.join(running)}): auto would rightly join it" if running else None


def _recorded_cluster(tmp: Path) -> None:
    """What ``ray start`` leaves in Ray's temporary folder (here {tmp}/rt/ray): the address of its cluster, here a
    port that never speaks."""
    _ray_experiment(tmp, "auto")
    (tmp / "rt" / "ray").mkdir(parents=True)
    (tmp / "rt" / "ray" / "ray_current_cluster").write_text("{silent}\n")


#: An experiment scoring subnets with the catalogue's supernet training ({tmp}/sn): its space, its data.
SUPERNET_EXPERIMENT = """\
name: sx
seed: 1
space:
  name: mbv3
  params:
    resolution: 8
    stem_channels: 8
    head_channels: 16
    stages:
      - {channels: 8, stride: 1, depths: [1, 2]}
      - {channels: 16, stride: 2, depths: [1, 2], se: true}
dataset: {name: digits, max_images: 160}
evaluators:
  - name: supernet
    params: {checkpoint: '{tmp}/sn', calib_images: 32}
objectives:
  - {metric: top1, direction: max}
strategy: {name: random}
budget: {trials: 2, batch_size: 2}
export: {enabled: false}
"""


def _weights_missing_a_tensor(tmp: Path) -> None:
    """The supernet's weights, still a readable safetensors file with its identity, without one tensor."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    path = tmp / "sn" / "checkpoint" / "supernet.safetensors"
    with safe_open(str(path), "pt") as fh:
        meta = fh.metadata()
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    del tensors["head.1.running_mean"]
    save_file(tensors, str(path), metadata=meta)
    _write("sx.yaml", SUPERNET_EXPERIMENT)(tmp)


def _split_folders(tmp: Path) -> None:
    """train/ and val/ folders of three classes, one with a single image in each: max_images 6 shrinks it away."""
    from PIL import Image

    for split, n in (("train", 6), ("val", 2)):
        for c, k in (("a", n), ("b", n), ("c", 1)):
            (tmp / "imgs" / split / c).mkdir(parents=True)
            for i in range(k):
                Image.new("RGB", (4, 4), (30 * i, 0, 0)).save(tmp / "imgs" / split / c / f"{i}.png")
    (tmp / "img.yaml").write_text((tmp / "exp.yaml").read_text() + f"dataset: {{name: image_folder, path: "
                                  f"'{tmp / 'imgs'}', max_images: 6}}\n")


def _images(tmp: Path) -> None:
    """An image folder of three classes, one of them a single image, and an experiment reading it."""
    from PIL import Image

    for c, n in (("a", 8), ("b", 8), ("c", 1)):
        (tmp / "imgs" / c).mkdir(parents=True)
        for i in range(n):
            Image.new("RGB", (4, 4), (30 * i, 0, 0)).save(tmp / "imgs" / c / f"{i}.png")
    (tmp / "img.yaml").write_text((tmp / "exp.yaml").read_text() + f"dataset: {{name: image_folder, path: "
                                  f"'{tmp / 'imgs'}'}}\n")


def _oneshot(tmp: Path, strategy: str, params: str) -> None:
    """A one-shot experiment (NAS-Bench-201 cells on digits, priced by HELP's latency column) with the strategy's
    parameters ``params``."""
    shared = Path(os.environ.get("HWNAS_SHARED_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
    (tmp / "os.yaml").write_text(
        "name: os\nspace: {name: nb201, params: {resolution: 16, channels: 8, cells_per_stage: 1}}\n"
        "dataset: {name: digits}\nevaluators:\n"
        f"  - {{name: benchmark, params: {{table: '{shared / 'help-latency' / 'nb201_latency.csv'}', "
        "columns: {'latency_ms@pixel3': pixel3}}}\n"
        "objectives:\n  - {metric: 'latency_ms@pixel3', direction: min}\n"
        f"strategy: {{{strategy}, params: {{steps: 4, warmup_steps: 1, {params}}}}}\n"
        "budget: {trials: 3, batch_size: 3}\nexport: {enabled: false}\n")


TRAIN = ["supernet", "train"]
FIT = ["predictor", "fit", "--run", "{run}", "--target", "top1", "--predictor", "gbt", "--folds", "0"]

CASES: list[Case] = [
    # -- supernet train: the file -------------------------------------------------------------------------------
    Case("sn-pipe", [*TRAIN, "{tmp}/pipe", "--out", "{tmp}/o"], ["pipe", "named pipe"], setup=_fifo),
    Case("sn-device", [*TRAIN, "/dev/zero", "--out", "{tmp}/o"], ["/dev/zero", "is a device"]),
    Case("sn-socket", [*TRAIN, "{tmp}/sock", "--out", "{tmp}/o"], ["sock", "is a socket"]),
    Case("sn-directory", [*TRAIN, "{tmp}", "--out", "{tmp}/o"], ["is a directory"]),
    Case("sn-binary", [*TRAIN, "{tmp}/bin.yaml", "--out", "{tmp}/o"], ["bin.yaml", "binary"],
         setup=_write("bin.yaml", b"supernet:\x00\x01\x02")),
    Case("sn-experiment-file", [*TRAIN, "{tmp}/exp.yaml", "--out", "{tmp}/o"], ["exp.yaml", "supernet"]),
    # -- supernet train: names and seeds, located ---------------------------------------------------------------
    Case("sn-seed-negative", [*TRAIN, "{tmp}/sn.yaml", "--out", "{tmp}/o"],
         [r"sn\.yaml:19", "supernet.seed", "0 to"], setup=_sn_edit("seed: 5", "seed: -3")),
    Case("sn-seed-set-negative", [*TRAIN, "{tmp}/sn.yaml", "--set", "supernet.seed=-1", "--out", "{tmp}/o"],
         ["--set supernet.seed=-1", "supernet.seed"]),
    Case("sn-seed-float", [*TRAIN, "{tmp}/sn.yaml", "--out", "{tmp}/o"], [r"sn\.yaml:19", "supernet.seed"],
         setup=_sn_edit("seed: 5", "seed: 1.5")),
    Case("sn-seed-bool", [*TRAIN, "{tmp}/sn.yaml", "--out", "{tmp}/o"], [r"sn\.yaml:19", "supernet.seed"],
         setup=_sn_edit("seed: 5", "seed: true")),
    Case("sn-split-seed-negative", [*TRAIN, "{tmp}/sn.yaml", "--out", "{tmp}/o"],
         [r"sn\.yaml:12", "supernet.dataset.split_seed", "0 to"],
         setup=_sn_edit("max_images: 160}", "max_images: 160, split_seed: -7}")),
    Case("validate-split-seed-negative", ["validate", "{tmp}/exp.yaml", "--set", "dataset.split_seed=-1"],
         ["dataset.split_seed", "0 to"]),
    Case("sn-name-dotdot", [*TRAIN, "{tmp}/sn.yaml"], [r"sn\.yaml:2", "supernet.name", "names a folder"],
         setup=_sn_edit("name: tiny", "name: '..'")),
    Case("sn-name-path", [*TRAIN, "{tmp}/sn.yaml"], [r"sn\.yaml:2", "supernet.name"],
         setup=_sn_edit("name: tiny", "name: ../../escape")),
    Case("sn-phase-unknown", [*TRAIN, "{tmp}/sn.yaml", "--out", "{tmp}/o"],
         [r"sn\.yaml:14", "supernet.phases.0..phase", "'fast' is not a phase"],
         setup=_sn_edit("phase: largest", "phase: fast")),
    # -- supernet train: where it goes and what it resumes ------------------------------------------------------
    Case("sn-out-is-file", [*TRAIN, "{tmp}/sn.yaml", "--out", "{tmp}/afile"], ["afile", "is a file, not a folder"],
         setup=_write("afile", "keep me\n")),
    Case("sn-out-is-a-run", [*TRAIN, "{tmp}/sn.yaml", "--out", "{run}"], ["already holds other files"]),
    Case("sn-again-without-resume", [*TRAIN, "{tmp}/sn.yaml", "--out", "{sn}"], ["already holds", "--resume"]),
    Case("sn-resume-nothing", [*TRAIN, "{tmp}/sn.yaml", "--out", "{tmp}/empty", "--resume"],
         ["no checkpoint to resume"], setup=lambda tmp: (tmp / "empty").mkdir()),
    Case("sn-resume-changed", [*TRAIN, "{tmp}/sn.yaml", "--set", "supernet.batch_size=16", "--out", "{sn}",
                               "--resume"], ["config changed", "batch_size"]),
    Case("sn-resume-torn-weights", [*TRAIN, "{tmp}/sn.yaml", "--out", "{sn}", "--resume"],
         [r"checkpoint/supernet\.safetensors", "cannot"], setup=_truncate("sn/checkpoint/supernet.safetensors", 100)),
    Case("sn-resume-foreign-state", [*TRAIN, "{tmp}/sn.yaml", "--out", "{sn}", "--resume"],
         ["checkpoint", "not a checkpoint this training can resume"],
         setup=_write("sn/checkpoint/state.json", '{"phase": "x"}')),
    Case("sn-resume-torn-state", [*TRAIN, "{tmp}/sn.yaml", "--out", "{sn}", "--resume"],
         ["checkpoint", "cannot read the checkpoint"], setup=_truncate("sn/checkpoint/state.json", 10)),
    Case("sn-resume-locked", [*TRAIN, "{tmp}/sn.yaml", "--out", "{sn}", "--resume"], ["in use by process"],
         lock="sn"),
    # -- supernet score -----------------------------------------------------------------------------------------
    Case("score-seed-negative", ["supernet", "score", "{sn}", "--seed", "-1"], ["--seed -1", "0 to"]),
    Case("score-samples-negative", ["supernet", "score", "{sn}", "--samples", "-2"], ["--samples must be at least 0"]),
    Case("score-pipe", ["supernet", "score", "{tmp}/pipe"], ["pipe", "no supernet checkpoint"], setup=_fifo),
    Case("score-torn", ["supernet", "score", "{sn}"], [r"supernet\.safetensors", "cannot read"],
         setup=_truncate("sn/checkpoint/supernet.safetensors", 100)),
    Case("score-not-a-checkpoint", ["supernet", "score", "{run}"], ["no supernet checkpoint"]),
    # -- predictor fit ------------------------------------------------------------------------------------------
    Case("fit-out-journal", [*FIT, "-o", "{run}/trials.jsonl", "--force"],
         [r"trials\.jsonl of the run", "not even with --force"]),
    Case("fit-out-record", [*FIT, "-o", "{run}/run.json", "--force"], [r"run\.json of the run"]),
    Case("fit-out-config", [*FIT, "-o", "{run}/config.yaml", "--force"], [r"config\.yaml of the run"]),
    Case("fit-out-weights", [*FIT, "-o", "{run}/weights/a.pt", "--force"], [r"weights/a\.pt of the run"]),
    Case("fit-out-supernet-checkpoint", [*FIT, "-o", "{sn}/checkpoint/supernet.safetensors", "--force"],
         ["of the supernet training"]),
    Case("fit-out-through-link", [*FIT, "-o", "{tmp}/link.json", "--force"], [r"trials\.jsonl of the run"],
         setup=lambda tmp: (tmp / "link.json").symlink_to(tmp / "run" / "trials.jsonl")),
    Case("fit-seed-negative", [*FIT, "-o", "{tmp}/p.json", "--seed", "-2"], ["--seed -2"]),
    Case("fit-table-pipe", ["predictor", "fit", "--table", "{tmp}/pipe", "--space", "nb201", "--target", "acc",
                            "-o", "{tmp}/p.json"], ["pipe", "named pipe"], setup=_fifo),
    Case("fit-table-binary", ["predictor", "fit", "--table", "{tmp}/t.csv", "--space", "nb201", "--target", "acc",
                              "-o", "{tmp}/p.json"], [r"t\.csv", "binary file"],
         setup=_write("t.csv", b"arch_str,acc\n\x00\xff\xfe" + bytes(range(256)))),
    Case("fit-target-not-numeric", ["predictor", "fit", "--table", "{tmp}/t.csv", "--space", "nb201", "--target",
                                    "acc", "-o", "{tmp}/p.json"], [r"t\.csv:2", "target column 'acc'", "not a number"],
         setup=_write("t.csv", "arch_str,acc\n|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|,high\n")),
    Case("fit-predictions-nan", ["predictor", "fit", "--table", "{tmp}/huge.csv", "--space", "nb201", "--target",
                                 "acc", "--predictor", "gbt", "--params", '{{"n_estimators": 20}}', "-o",
                                 "{tmp}/p.json"],  # {{ }}: the arguments are formatted with the case's folders
         ["gbt predictor, cross-validation fold 1 of 5", "not numbers for 6 of 6",
          "targets span -1.7e.308 to 1.7e.308"],
         setup=_huge_targets),
    Case("fit-predictions-nan-final", ["predictor", "fit", "--table", "{tmp}/huge.csv", "--space", "nb201",
                                       "--target", "acc", "--predictor", "gp", "--folds", "0", "-o", "{tmp}/p.json"],
         ["gp predictor fitted on every row", "not numbers for 30 of 30"], setup=_huge_targets),
    Case("fit-table-missing", ["predictor", "fit", "--table", "{tmp}/none.csv", "--space", "nb201", "--target",
                               "acc", "-o", "{tmp}/p.json"], [r"none\.csv", "no such file"]),
    # -- predictor evaluate -------------------------------------------------------------------------------------
    Case("eval-pipe", ["predictor", "evaluate", "{tmp}/pipe", "--run", "{run}"], ["pipe", "named pipe"], setup=_fifo),
    Case("eval-directory", ["predictor", "evaluate", "{run}", "--run", "{run}"], ["is a directory"]),
    Case("eval-device", ["predictor", "evaluate", "/dev/zero", "--run", "{run}"], ["is a device"]),
    Case("eval-nan-predictions", ["predictor", "evaluate", "{tmp}/nan.json", "--run", "{run}"],
         [r"nan\.json", "not numbers for 12 of 12"], setup=_nan_predictor),
    Case("eval-binary", ["predictor", "evaluate", "{tmp}/b.json", "--run", "{run}"], [r"b\.json", "not JSON"],
         setup=_write("b.json", b"\x00\x01\xff\xfe")),
    # -- report --html and export onto a run's own files --------------------------------------------------------
    Case("html-onto-journal", ["report", "{run}", "--html", "--out", "{run}/trials.jsonl", "--force"],
         [r"trials\.jsonl of the run", "not even with --force"]),
    Case("html-onto-config", ["report", "{run}", "--html", "--out", "{run}/config.yaml", "--force"],
         [r"config\.yaml of the run"]),
    Case("html-onto-other-run", ["report", "{run}", "--html", "--out", "{sn}/supernet.json", "--force"],
         [r"supernet\.json of the supernet training"]),
    Case("export-into-run-root", ["export", "{run}", "--out", "{run}", "--force", "--random-init", "--no-measure",
                                  "--formats", "onnx"], [r"export\.json of the run"]),
    Case("export-into-weights", ["export", "{run}", "--out", "{run}/weights", "--force", "--random-init",
                                 "--no-measure", "--formats", "onnx"], ["of the run", "not even with --force"]),
    Case("export-into-another-runs-models", ["export", "{tmp}/run2", "--out", "{run}/models", "--force",
                                             "--random-init", "--no-measure", "--formats", "onnx"],
         [r"models/\w+\.(onnx|json) of the run", "not even with --force"],
         setup=lambda tmp: shutil.copytree(tmp / "run", tmp / "run2")),
    Case("html-into-another-run", ["report", "{tmp}/run2", "--html", "--out", "{run}/report.html", "--force"],
         [r"report\.html of the run"], setup=lambda tmp: shutil.copytree(tmp / "run", tmp / "run2")),
    # -- latency tables -----------------------------------------------------------------------------------------
    Case("latency-table-pipe", ["latency", "validate", "{tmp}/pipe"], ["pipe"], setup=_fifo),
    Case("latency-unit-twice", ["validate", "{tmp}/fb.yaml"], [r"fb\.yaml:4", "listed twice"]),
    Case("latency-table-binary", ["validate", "{tmp}/fb.yaml"], [r"fb\.yaml:4", "binary file"]),
    # -- sweeps -------------------------------------------------------------------------------------------------
    Case("sweep-pipe", ["sweep", "{tmp}/pipe"], ["pipe", "named pipe"], setup=_fifo),
    Case("sweep-name-dotdot", ["sweep", "{tmp}/sw.yaml"], [r"sw\.yaml:1", "name", "names a folder"],
         setup=_write("sw.yaml", SWEEP.replace("name: sw", "name: '..'"))),
    Case("sweep-seed-negative", ["sweep", "{tmp}/sw.yaml"], [r"sw\.yaml:4", "search.seed", "0 to"],
         setup=_write("sw.yaml", SWEEP + "search: {seed: -4}\n")),
    Case("sweep-base-missing", ["sweep", "{tmp}/sw.yaml"], [r"sw\.yaml", "base", "no experiment file"],
         setup=_write("sw.yaml", SWEEP.replace("exp.yaml", "none.yaml"))),
    Case("sweep-base-bad-value", ["sweep", "{tmp}/sw.yaml"],
         [r"sw\.yaml:2: base: .*bad\.yaml:10: budget\.trials"],
         setup=lambda tmp: (_write("sw.yaml", SWEEP.replace("exp.yaml", "bad.yaml"))(tmp), _write(
             "bad.yaml", (tmp / "exp.yaml").read_text().replace("trials: 12", "trials: 0"))(tmp))),
    Case("sweep-key-unknown", ["sweep", "{tmp}/sw.yaml"], [r"sw\.yaml", "params.sede", "not a key"],
         setup=_write("sw.yaml", SWEEP.replace("seed:", "sede:"))),
    # -- connections: a port that accepts TCP and never speaks Ray ----------------------------------------------
    Case("validate-silent-ray", ["validate", "{tmp}/ray.yaml"], [r"ray\.yaml:12", "executor.address",
                                                                "does not answer as Ray does"],
         setup=lambda tmp: _ray_experiment(tmp, "{silent}")),
    Case("run-silent-ray", ["run", "{tmp}/ray.yaml", "--quiet"], [r"ray\.yaml:12", "does not answer as Ray does"],
         setup=lambda tmp: _ray_experiment(tmp, "{silent}")),
    Case("sweep-silent-ray", ["sweep", "{tmp}/sw.yaml"], ["does not answer as Ray does"],
         setup=_write("sw.yaml", SWEEP + "address: '{silent}'\n")),
    Case("validate-ray-auto-from-env", ["validate", "{tmp}/ray.yaml"],
         [r"ray\.yaml:12", "executor.address", r"no Ray cluster answers at auto \(127\.0\.0\.1:1, RAY_ADDRESS="],
         setup=lambda tmp: _ray_experiment(tmp, "auto"), env={"RAY_ADDRESS": "127.0.0.1:1"}),
    Case("run-ray-auto-recorded-silent", ["run", "{tmp}/ray.yaml", "--quiet"],
         [r"ray\.yaml:12", r"auto \(127\.0\.0\.1:\d+, recorded by ray start in .*ray_current_cluster\)",
          "does not answer as Ray does"],
         setup=_recorded_cluster, env={"RAY_ADDRESS": "", "RAY_TMPDIR": "{tmp}/rt"}),
    Case("validate-ray-auto-no-cluster", ["validate", "{tmp}/ray.yaml"],
         [r"ray\.yaml:12", "executor.address", "Ray address auto finds no running cluster", "ray start --head"],
         setup=lambda tmp: _ray_experiment(tmp, "auto"), env={"RAY_ADDRESS": "", "RAY_TMPDIR": "{tmp}/rt"},
         skip_if=_raylets_running),
    Case("run-ray-auto-no-cluster", ["run", "{tmp}/ray.yaml", "--quiet"],
         [r"ray\.yaml:12", "Ray address auto finds no running cluster"],
         setup=lambda tmp: _ray_experiment(tmp, "auto"), env={"RAY_ADDRESS": "", "RAY_TMPDIR": "{tmp}/rt"},
         skip_if=_raylets_running),
    Case("sweep-ray-auto-from-env", ["sweep", "{tmp}/sw.yaml"], [r"no Ray cluster answers at auto \(127\.0\.0\.1:1"],
         setup=_write("sw.yaml", SWEEP + "address: auto\n"), env={"RAY_ADDRESS": "127.0.0.1:1"}),
    # -- one-shot strategies and newer evaluators: every check the run makes, validate makes -------------------
    Case("oneshot-tau-inverted", ["validate", "{tmp}/os.yaml"], [r"os\.yaml:\d+", "tau_min .9.0. is above tau_max"],
         setup=lambda tmp: _oneshot(tmp, "name: gdas", "tau_min: 9, tau_max: 1")),
    Case("oneshot-target-nan", ["validate", "{tmp}/os.yaml"], [r"os\.yaml:\d+", "targets_ms must be positive",
                                                              "nan"],
         setup=lambda tmp: _oneshot(tmp, "name: darts", "targets_ms: [8, .nan]")),
    Case("oneshot-supernet-block-unknown-key", ["validate", "{tmp}/os.yaml"],
         [r"os\.yaml:\d+", r"strategy\.params\.supernet\.partial_chanels", "nb201 supernet"],
         setup=lambda tmp: _oneshot(tmp, "name: pc_darts", "supernet: {partial_chanels: 2}")),
    Case("oneshot-supernet-block-bad-value", ["validate", "{tmp}/os.yaml"],
         [r"os\.yaml:\d+", r"strategy\.params\.supernet\.partial_channels", "greater than or equal to 1"],
         setup=lambda tmp: _oneshot(tmp, "name: pc_darts", "supernet: {partial_channels: 0}")),
    Case("oneshot-partial-channels-not-dividing", ["validate", "{tmp}/os.yaml"],
         [r"os\.yaml:8", r"strategy\.params\.supernet\.partial_channels",
          "partial_channels=3 must divide the space's channels=8"],
         setup=lambda tmp: _oneshot(tmp, "name: pc_darts", "supernet: {partial_channels: 3}")),
    Case("oneshot-partial-channels-not-dividing-run", ["run", "{tmp}/os.yaml", "--quiet"],
         [r"os\.yaml:8", "partial_channels=3 must divide the space's channels=8"],
         setup=lambda tmp: _oneshot(tmp, "name: pc_darts", "supernet: {partial_channels: 3}")),
    # -- the supernet evaluator: an error inside the checkpoint names the experiment's line and the file ---------
    Case("supernet-eval-torn-weights", ["validate", "{tmp}/sx.yaml"],
         [r"sx\.yaml:14", r"evaluators\[0\]", r"sn/checkpoint/supernet\.safetensors",
          "cannot read the supernet weights"],
         setup=lambda tmp: (_truncate("sn/checkpoint/supernet.safetensors", 100)(tmp),
                            _write("sx.yaml", SUPERNET_EXPERIMENT)(tmp))),
    Case("supernet-eval-weights-missing-a-tensor", ["run", "{tmp}/sx.yaml", "--quiet"],
         [r"sx\.yaml:14", r"sn/checkpoint/supernet\.safetensors", "the weights do not fit the supernet",
          r"head\.1\.running_mean"], setup=_weights_missing_a_tensor),
    Case("supernet-eval-checkpoint-of-other-data", ["validate", "{tmp}/sx.yaml"],
         [r"sx\.yaml:14", r"supernet: checkpoint \S+/sn: ", r"trained on digits \(.*max_images 160\), the "
          r"scoring data is digits \(.*max_images 120\)", "differ in max_images"],
         setup=_write("sx.yaml", SUPERNET_EXPERIMENT.replace("max_images: 160", "max_images: 120"))),
    Case("zero-cost-sub-batch-above-batch", ["validate", "{tmp}/exp.yaml"],
         [r"exp\.yaml:7", r"evaluators\[1\]\.params", "ntk_batch .16. is larger than batch_size .8."],
         setup=lambda tmp: (tmp / "exp.yaml").write_text((tmp / "exp.yaml").read_text().replace(
             "objectives:", "  - {name: zero_cost, params: {proxies: [ntk_cond], batch_size: 8, ntk_batch: 16}}\n"
             "objectives:"))),
    # -- data too small to mean anything -------------------------------------------------------------------------
    Case("images-class-too-small", ["validate", "{tmp}/img.yaml"],
         [r"img\.yaml:\d+", "class 'c' has 1 image", "too few for the split"], setup=lambda tmp: _images(tmp)),
    Case("images-class-too-small-run", ["run", "{tmp}/img.yaml", "--quiet"], ["class 'c' has 1 image"],
         setup=lambda tmp: _images(tmp)),
    Case("images-split-folders-shrunk-starve-a-class", ["validate", "{tmp}/img.yaml"],
         [r"img\.yaml:\d+", r"dataset\.max_images: class '\w' of the train/ and val/ folders",
          r"kept of max_images 6 \(\d to train on, 0 held out\)|kept of max_images 6 \(0 to train on"],
         setup=_split_folders),
    Case("images-split-folders-shrunk-starve-a-class-run", ["run", "{tmp}/img.yaml", "--quiet"],
         [r"dataset\.max_images: class '\w' of the train/ and val/ folders"], setup=_split_folders),
    Case("digits-max-images-starves-a-class", ["validate", "{tmp}/dg.yaml"],
         [r"dg\.yaml:\d+", r"dataset\.max_images: class '1' of digits has 5 image\(s\) kept of max_images 40 \(5 to "
          r"train on, 0 held out\)", "too few for the split"],
         setup=lambda tmp: _write("dg.yaml", (tmp / "exp.yaml").read_text() + "dataset: {name: digits, max_images: "
                                  "40}\n")(tmp)),
    Case("mnist5k-max-images-starves-a-class-run", ["run", "{tmp}/dg.yaml", "--quiet"],
         [r"dg\.yaml:\d+", r"dataset\.max_images: class '\d' of mnist5k has \d image\(s\) kept of max_images 30",
          "too few"],
         setup=lambda tmp: _write("dg.yaml", (tmp / "exp.yaml").read_text() + "dataset: {name: mnist5k, max_images: "
                                  "30}\n")(tmp)),
    # -- validate: special files --------------------------------------------------------------------------------
    Case("validate-pipe", ["validate", "{tmp}/pipe"], ["pipe", "named pipe"], setup=_fifo),
    Case("validate-socket", ["validate", "{tmp}/sock"], ["sock", "is a socket"]),
    Case("run-pipe", ["run", "{tmp}/pipe", "--quiet"], ["pipe", "named pipe"], setup=_fifo),
]

#: The catalogue's cases per command (the figures of the issue's note).
PER_COMMAND = {c: sum(1 for case in CASES if " ".join(case.args).startswith(c)) for c in
               ("supernet train", "supernet score", "predictor fit", "predictor evaluate", "report", "export",
                "latency", "sweep", "validate", "run")}


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink() and p.name != ".lock":
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _nas(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NAS, *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, **env} if env else None)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """A finished run (12 trials priced by the published table), a predictor fitted on 20 more trials, and a
    finished tiny supernet training: copied into each case's folder."""
    base = tmp_path_factory.mktemp("made")
    table = shared_data / "nas-bench-201" / "nb201_accuracy.csv"
    (base / "exp.yaml").write_text(EXPERIMENT.format(table=table, trials=12))
    (base / "exp20.yaml").write_text(EXPERIMENT.format(table=table, trials=20))
    (base / "sn.yaml").write_text(SUPERNET)
    for args in (["run", "exp.yaml", "--quiet", "--run-dir", "run"],
                 ["run", "exp20.yaml", "--quiet", "--run-dir", "r20"],
                 ["predictor", "fit", "--run", "r20", "--target", "top1", "--predictor", "gbt", "--folds", "0",
                  "-o", "pred.json"],
                 ["supernet", "train", "sn.yaml", "--out", "sn", "--quiet"]):
        done = _nas(args, base)
        assert done.returncode == 0, done.stderr[-2000:]
    shutil.rmtree(base / "r20")
    (base / "exp20.yaml").unlink()
    return base


def test_the_catalogue_covers_every_newer_command() -> None:
    import yaml

    assert len({c.id for c in CASES}) == len(CASES)
    # the supernet evaluator's cases score with the catalogue's own training: the same space, or they test nothing
    assert yaml.safe_load(SUPERNET_EXPERIMENT)["space"] == yaml.safe_load(SUPERNET)["supernet"]["space"]
    assert all(n >= 1 for n in PER_COMMAND.values()), PER_COMMAND
    print(f"cases per command: {PER_COMMAND} (total {len(CASES)})")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_one_located_line_in_time_and_changes_nothing(case: Case, tmp_path: Path, made: Path,
                                                                     shared_data: Path) -> None:
    from hwnas.fileio import FolderLock

    for name in ("run", "sn"):
        shutil.copytree(made / name, tmp_path / name, symlinks=True)
    for name in ("exp.yaml", "sn.yaml", "pred.json"):
        shutil.copy(made / name, tmp_path / name)
    if case.id.startswith("latency-unit-twice") or case.id.startswith("latency-table-binary"):
        _latency_table(tmp_path, shared_data, twice="twice" in case.id, binary="binary" in case.id)
    reason = case.skip_if() if case.skip_if is not None else None
    if reason:
        pytest.skip(reason)
    kept = _socket(tmp_path) if "{tmp}/sock" in case.args else None
    silent = SilentServer() if "silent" in case.id else None
    if case.setup is not None:
        case.setup(tmp_path)
    if silent is not None:
        for f in ("ray.yaml", "sw.yaml", "rt/ray/ray_current_cluster"):
            if (tmp_path / f).exists():
                (tmp_path / f).write_text((tmp_path / f).read_text().replace("{silent}", silent.address))
    before = _snapshot(tmp_path)
    args = [a.format(tmp=tmp_path, run=tmp_path / "run", sn=tmp_path / "sn", pred=tmp_path / "pred.json")
            for a in case.args]
    env = {k: v.format(tmp=tmp_path) for k, v in (case.env or {}).items()}
    try:
        if case.lock:
            with FolderLock(tmp_path / case.lock):
                done = _nas(args, tmp_path, env)
        else:
            done = _nas(args, tmp_path, env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.id}: no answer within {TIMEOUT_S} s (a hang)")
    finally:
        if kept is not None:
            kept.close()
        if silent is not None:
            silent.close()
    err = done.stderr
    assert done.returncode != 0, f"exit 0 for {case.id}: {done.stdout[-500:]}"
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip() and not LOG_LINE.match(line)]
    assert len(lines) == 1, f"expected one error line, got {lines}"
    assert lines[0].startswith("error: "), lines[0]
    for fragment in case.expect:
        assert re.search(fragment, lines[0]), f"{fragment!r} not in {lines[0]!r}"
    after = _snapshot(tmp_path)
    changed = sorted(k for k, v in before.items() if after.get(k) != v)
    assert not changed, f"files changed or removed: {changed}"
    made_now = sorted(set(after) - set(before))
    assert not made_now, f"files made by a refused command: {made_now}"


def test_constraints_no_architecture_can_meet_together_are_warned_at_validate(tmp_path: Path, made: Path) -> None:
    """Two constraints on one metric whose bounds cross: legal, so not an error, but every trial would be
    infeasible: validate says so, naming both."""
    shutil.copy(made / "exp.yaml", tmp_path / "exp.yaml")
    (tmp_path / "exp.yaml").write_text((tmp_path / "exp.yaml").read_text() + "constraints:\n"
                                       "  - {metric: top1, min: 90}\n  - {metric: top1, max: 80}\n")
    done = _nas(["validate", str(tmp_path / "exp.yaml")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"WARNING .*exp\.yaml:\d+: constraints\[0\] and constraints\[1\]: top1 at least 90 and at "
                     r"most 80: no architecture can meet both", done.stderr), done.stderr


WARNED = {
    # one column's bound outside every row of the table
    "benchmark-row-range": ("exp.yaml", "  - {metric: top1, min: 99}\n",
                            r"exp\.yaml:\d+: constraints\[0\]: top1 at least 99: the 15,625 rows of "
                            r"nb201_accuracy\.csv have top1 from 10 to 94\.37: no architecture can meet it"),
    # two columns' bounds each met by some row, but by no row together
    "benchmark-rows-together": ("exp.yaml", "  - {metric: top1, max: 90}\n  - {metric: top1_100, min: 70}\n",
                                r"constraints\[0\] and constraints\[1\]: top1 at most 90, top1_100 at least 70: .*"
                                r"\(and no row meets them together\): no architecture can meet them together"),
    # a latency bound below the cheapest member the table prices
    "latency-table-range": ("fb.yaml", "  - {metric: latency_ms@pixel3, max: 2}\n",
                            r"fb\.yaml:\d+: constraints\[0\]: latency_ms@pixel3 at most 2: the table fb\.json prices "
                            r"latency_ms@pixel3 from 2\.839 to 47\.09 .*: no architecture can meet it"),
}


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("kind", list(WARNED))
def test_constraints_beyond_what_the_evaluators_can_reach_are_warned_at_validate_and_run_start(
        kind: str, command: str, tmp_path: Path, made: Path, shared_data: Path) -> None:
    """What a table knows before any search (its rows, a latency table's cheapest and dearest members) against the
    constraints: legal, so not an error, but every trial would be infeasible; validate and the run's start say so,
    naming the constraint, its bound and what the table reaches."""
    file, constraints, expected = WARNED[kind]
    shutil.copy(made / "exp.yaml", tmp_path / "exp.yaml")
    if file == "fb.yaml":
        _latency_table(tmp_path, shared_data)
    text = (tmp_path / file).read_text().replace("{top1: cifar10_test_200ep}",
                                                  "{top1: cifar10_test_200ep, top1_100: cifar100_test_200ep}")
    (tmp_path / file).write_text(text + "constraints:\n" + constraints)
    done = _nas([command, str(tmp_path / file), *(["--quiet"] if command == "run" else [])], tmp_path)
    lines = done.stderr.splitlines()
    warned = [i for i, line in enumerate(lines) if line.startswith("WARNING") and re.search(expected, line)]
    assert len(warned) == 1, done.stderr[-3000:]
    if command == "validate":
        assert done.returncode == 0, done.stderr[-2000:]
    else:  # said at the start, before the run's folder; the run then ends as one without a feasible trial does
        assert warned[0] < next(i for i, line in enumerate(lines) if "new run directory" in line)
        assert done.returncode != 0 and lines[-1].startswith("error: 0 feasible"), done.stderr[-2000:]
