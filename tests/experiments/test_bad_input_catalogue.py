"""A catalogue of bad inputs: each gets a non-zero exit, exactly one error line that names the problem and
where it is, no traceback, and leaves every file that existed before byte-identical.

Every case runs ``nas`` in this process (``hwnas.cli.main``) against a real experiment: NAS-Bench-201
priced by the published accuracy table (``../shared/data``), which runs in a second.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hwnas.cli import main

BASE = """\
name: cat
seed: 1
space: {{name: nb201}}
evaluators:
  - name: benchmark
    params: {{table: {table}, columns: {{top1: cifar10_test_200ep}}}}
objectives:
  - {{metric: top1, direction: max}}
strategy: {{name: random}}
budget: {{trials: 12, batch_size: 4}}
export: {{enabled: false}}
output: {{root: {root}}}
"""

FBNET = """\
name: fb
space: {name: fbnet}
evaluators:
  - {name: latency_table, params: {table: '{tmp}/fb.json'}}
objectives:
  - {metric: latency_ms@pixel3, direction: min}
strategy: {name: random}
budget: {trials: 5}
export: {enabled: false}
"""

#: Eight levels of ten aliases each: 10^8 values from 300 bytes (the "billion laughs", scaled down).
BOMB = ("a: &a [" + ",".join(["x"] * 10) + "]\n"
        + "".join(f"{c}: &{c} [" + ",".join([f"*{p}"] * 10) + "]\n" for p, c in zip("abcdefg", "bcdefgh"))).encode()

LOG_LINE = re.compile(r"^(DEBUG|INFO|WARNING) [\w.]+: ")


@dataclass
class Case:
    """One bad input: how to make it, the command, and what the one error line must contain."""

    id: str
    args: list[str]  # {exp} is the experiment file, {tmp} the folder, {run} a finished run of the base file
    expect: list[str]  # fragments of the error line (regular expressions)
    yaml: str | Callable[[str], str] | None = None  # the experiment text, or an edit of the base text
    raw: bytes | None = None  # the experiment file's bytes instead
    setup: Callable[[Path], None] | None = None  # more files to make (under tmp)
    needs_run: bool = False
    extra: dict[str, str] = field(default_factory=dict)


def _edit(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new)

    return edit


def _add(line: str) -> Callable[[str], str]:
    return lambda text: text + line + "\n"


VALIDATE = ["validate", "{exp}"]
RUN = ["run", "{exp}", "--quiet", "--run-dir", "{tmp}/newrun"]

CASES: list[Case] = [
    # -- the file itself --------------------------------------------------------------------------
    Case("missing-file", ["validate", "{tmp}/nope.yaml"], [r"nope\.yaml", "no such file"]),
    Case("directory", ["validate", "{tmp}"], ["is a directory"]),
    Case("empty", VALIDATE, ["is empty"], raw=b""),
    Case("only-comment", VALIDATE, ["is empty"], raw=b"# nothing here\n"),
    Case("binary-nul", VALIDATE, ["binary file", "NUL"], raw=b"name: x\x00\x01\x02"),
    Case("latin-1", VALIDATE, ["not UTF-8"], raw="name: caf\u00e9\n".encode("latin-1")),
    Case("top-level-list", VALIDATE, ["mapping of keys, not a list"], raw=b"- a\n- b\n"),
    Case("top-level-scalar", VALIDATE, ["mapping of keys, not a str"], raw=b"hello\n"),
    Case("unclosed-bracket", VALIDATE, [r"exp\.yaml:\d+", "invalid YAML"], yaml=_edit("{name: nb201}", "{name: nb201")),
    Case("tab-indent", VALIDATE, [r"exp\.yaml:\d+", "invalid YAML"], raw=b"name: x\nspace:\n\tname: nb201\n"),
    Case("duplicate-key", VALIDATE, [r"exp\.yaml:\d+", "duplicate key 'seed'"], yaml=_add("seed: 2")),
    Case("alias-bomb", VALIDATE, ["alias bomb"], raw=BOMB),
    Case("deep-nesting", VALIDATE, ["nested deeper than"], raw=("a: " + "[" * 300 + "]" * 300 + "\n").encode()),
    Case("too-large", VALIDATE, ["too large"], raw=b"# " + b"x" * (11 * 2**20) + b"\n"),
    Case("special-chars", VALIDATE, ["invalid YAML"], raw="name: x\u0007y\n".encode()),
    # -- keys and types ---------------------------------------------------------------------------
    Case("unknown-top-key", VALIDATE, [r"exp\.yaml:\d+", "colour"], yaml=_add("colour: blue")),
    Case("typo-name-key", VALIDATE, [r"exp\.yaml:\d+", "nmae"], yaml=_edit("name: cat", "nmae: cat")),
    Case("missing-space", VALIDATE, ["space"], yaml=_edit("space: {name: nb201}\n", "")),
    Case("missing-strategy", VALIDATE, ["strategy"], yaml=_edit("strategy: {name: random}\n", "")),
    Case("missing-budget", VALIDATE, ["budget"], yaml=_edit("budget: {trials: 12, batch_size: 4}\n", "")),
    Case("seed-string", VALIDATE, [r"exp\.yaml:2", "seed"], yaml=_edit("seed: 1", "seed: one")),
    Case("seed-negative", VALIDATE, [r"exp\.yaml:2", "seed", "greater than or equal to 0"],
         yaml=_edit("seed: 1", "seed: -1")),
    Case("seed-bool", VALIDATE, [r"exp\.yaml:2", "seed"], yaml=_edit("seed: 1", "seed: true")),
    Case("seed-float", VALIDATE, [r"exp\.yaml:2", "seed"], yaml=_edit("seed: 1", "seed: 1.5")),
    Case("seed-huge", VALIDATE, [r"exp\.yaml:2", "seed"], yaml=_edit("seed: 1", "seed: 100000000000000000000")),
    Case("trials-zero", VALIDATE, [r"exp\.yaml:\d+", "budget.trials"], yaml=_edit("trials: 12", "trials: 0")),
    Case("trials-negative", VALIDATE, ["budget.trials"], yaml=_edit("trials: 12", "trials: -5")),
    Case("trials-bool", VALIDATE, ["budget.trials", "integer"], yaml=_edit("trials: 12", "trials: true")),
    Case("trials-string", VALIDATE, ["budget.trials"], yaml=_edit("trials: 12", "trials: ten")),
    Case("trials-float", VALIDATE, ["budget.trials"], yaml=_edit("trials: 12", "trials: 2.5")),
    Case("trials-huge", VALIDATE, ["budget.trials"], yaml=_edit("trials: 12", "trials: 10000000000000")),
    Case("batch-zero", VALIDATE, ["budget.batch_size"], yaml=_edit("batch_size: 4", "batch_size: 0")),
    Case("budget-unknown-key", VALIDATE, ["budget", "epochs"], yaml=_edit("batch_size: 4", "batch_size: 4, epochs: 3")),
    Case("name-with-slash", VALIDATE, ["name", "letters, digits"], yaml=_edit("name: cat", "name: a/b")),
    Case("name-dotdot", VALIDATE, ["name"], yaml=_edit("name: cat", "name: ../up")),
    Case("name-too-long", VALIDATE, ["name", "at most 100"], yaml=_edit("name: cat", "name: " + "n" * 300)),
    Case("name-empty", VALIDATE, ["name"], yaml=_edit("name: cat", "name: ''")),
    Case("name-list", VALIDATE, ["name"], yaml=_edit("name: cat", "name: [a, b]")),
    # -- components ---------------------------------------------------------------------------------
    Case("unknown-space", VALIDATE, [r"exp\.yaml:3", "nb202"], yaml=_edit("name: nb201}", "name: nb202}")),
    Case("space-unknown-param", VALIDATE, ["space", "widht"],
         yaml=_edit("{name: nb201}", "{name: nb201, params: {widht: 3}}")),
    Case("space-param-type", VALIDATE, ["space", "channels"],
         yaml=_edit("{name: nb201}", "{name: nb201, params: {channels: many}}")),
    Case("space-resolution-huge", VALIDATE, ["resolution"],
         yaml=_edit("{name: nb201}", "{name: nb201, params: {resolution: 1000000000}}")),
    Case("mbv3-resolution-huge", VALIDATE, ["space", "resolution", "4096"],
         yaml=_edit("{name: nb201}", "{name: mbv3, params: {resolution: 1000000000}}")),
    Case("space-resolution-odd", VALIDATE, ["resolution", "multiple of 4"],
         yaml=_edit("{name: nb201}", "{name: nb201, params: {resolution: 30}}")),
    Case("space-params-list", VALIDATE, ["space"], yaml=_edit("{name: nb201}", "{name: nb201, params: [1, 2]}")),
    Case("unknown-strategy", VALIDATE, ["strategy", "randum"], yaml=_edit("{name: random}", "{name: randum}")),
    Case("strategy-unknown-param", VALIDATE, ["strategy", "temperature"],
         yaml=_edit("{name: random}", "{name: random, params: {temperature: 1}}")),
    Case("evolution-bad-param", VALIDATE, ["strategy", "population"],
         yaml=_edit("{name: random}", "{name: evolution, params: {population: -4}}")),
    Case("unknown-evaluator", VALIDATE, [r"evaluators\[0\]", "benchmarc"],
         yaml=_edit("- name: benchmark", "- name: benchmarc")),
    Case("evaluators-empty", VALIDATE, ["evaluators"],
         yaml=lambda t: t.split("evaluators:")[0] + "evaluators: []\nobjectives:" + t.split("objectives:")[1]),
    Case("evaluator-missing-table", VALIDATE, [r"evaluators\[0\]", "table"],
         yaml=lambda t: re.sub(r"table: [^,]+, ", "", t)),
    Case("table-missing-file", VALIDATE, ["benchmark", "does not exist"], extra={"table": "/nonexistent/t.csv"}),
    Case("table-is-directory", VALIDATE, ["benchmark", "is a directory"], extra={"table": "{tmp}"}),
    Case("table-empty", VALIDATE, ["benchmark", "empty"], extra={"table": "{tmp}/empty.csv"},
         setup=lambda tmp: (tmp / "empty.csv").write_text("")),
    Case("table-column-missing", VALIDATE, ["column 'cifar11_test'", "did you mean"],
         yaml=_edit("cifar10_test_200ep", "cifar11_test")),
    Case("table-no-key-column", VALIDATE, ["no architecture column"], extra={"table": "{tmp}/nokey.csv"},
         setup=lambda tmp: (tmp / "nokey.csv").write_text("a,cifar10_test_200ep\n1,2\n")),
    Case("table-column-never-a-number", VALIDATE, ["benchmark: no row of blank.csv gives a number"],
         extra={"table": "{tmp}/blank.csv"},
         setup=lambda tmp: (tmp / "blank.csv").write_text(
             "index,arch_str,cifar10_test_200ep\n0,|none~0|+|none~0|none~1|+|none~0|none~1|none~2|,\n")),
    Case("table-column-twice", VALIDATE, ["names column.s. 'cifar10_test_200ep' twice"],
         extra={"table": "{tmp}/dup.csv"},
         setup=lambda tmp: (tmp / "dup.csv").write_text("index,arch_str,cifar10_test_200ep,cifar10_test_200ep\n")),
    Case("table-key-column-wrong", VALIDATE, ["key column 'arch'"],
         yaml=_edit("columns: {top1", "key_column: arch, columns: {top1")),
    Case("evaluator-params-unknown", VALIDATE, [r"evaluators\[0\]", "colums"],
         yaml=_edit("columns: {top1", "colums: {a: b}, columns: {top1")),
    Case("evaluator-cost-negative", VALIDATE, [r"evaluators\[0\]", "cost_s_per_query"],
         yaml=_edit("columns: {top1", "cost_s_per_query: -1, columns: {top1")),
    Case("evaluator-is-string", VALIDATE, ["evaluators"],
         yaml=lambda t: t.split("evaluators:")[0] + "evaluators: benchmark\nobjectives:" + t.split("objectives:")[1]),
    Case("objectives-empty", VALIDATE, ["objectives"],
         yaml=_edit("objectives:\n  - {metric: top1, direction: max}", "objectives: []")),
    Case("objective-unknown-metric", VALIDATE, [r"objectives\[0\]", "top5"],
         yaml=_edit("metric: top1", "metric: top5")),
    Case("objective-bad-direction", VALIDATE, ["direction"], yaml=_edit("direction: max", "direction: up")),
    Case("objective-twice", VALIDATE, ["objectives", "twice"],
         yaml=_edit("- {metric: top1, direction: max}",
                    "- {metric: top1, direction: max}\n  - {metric: top1, direction: min}")),
    Case("constraint-unknown-metric", VALIDATE, [r"constraints\[0\]", "latency_ms"],
         yaml=_add("constraints:\n  - {metric: latency_ms, max: 3}")),
    Case("constraint-no-bound", VALIDATE, ["constraints", "needs 'max' or 'min'"],
         yaml=_add("constraints:\n  - {metric: top1}")),
    Case("constraint-min-above-max", VALIDATE, ["constraints", "min 90 is above max 80"],
         yaml=_add("constraints:\n  - {metric: top1, min: 90, max: 80}")),
    Case("constraint-nan", VALIDATE, ["constraints", "max"], yaml=_add("constraints:\n  - {metric: top1, max: .nan}")),
    Case("constraint-inf", VALIDATE, ["constraints", "min"], yaml=_add("constraints:\n  - {metric: top1, min: .inf}")),
    Case("constraint-string-bound", VALIDATE, ["constraints", "max"],
         yaml=_add("constraints:\n  - {metric: top1, max: lots}")),
    Case("unknown-executor", VALIDATE, ["executor", "cluster"], yaml=_add("executor: {name: cluster}")),
    Case("workers-zero", VALIDATE, [r"exp\.yaml:\d+", "executor.workers"],
         yaml=_add("executor: {name: process, workers: 0}")),
    Case("workers-string", VALIDATE, ["executor.workers"], yaml=_add("executor: {name: process, workers: two}")),
    Case("executor-unknown-param", VALIDATE, ["executor", "gpus"], yaml=_add("executor: {name: local, gpus: 2}")),
    Case("executor-params-without-name", VALIDATE, [r"exp\.yaml:\d+", "executor", r"parameters \(threads\) but no name",
                                                     "name: local"], yaml=_add("executor: {threads: 2}")),
    Case("export-opset-low", VALIDATE, ["opset"], yaml=_edit("export: {enabled: false}", "export: {opset: 7}")),
    Case("export-enabled-string", VALIDATE, ["export.enabled"],
         yaml=_edit("export: {enabled: false}", "export: {enabled: maybe}")),
    Case("dataset-missing-folder", VALIDATE, ["dataset"],
         yaml=_add("dataset: {name: folder, path: /nonexistent/images}")),
    Case("dataset-unknown-name", VALIDATE, ["dataset"], yaml=_add("dataset: {name: imagenet-full}")),
    Case("images-none-readable", VALIDATE, ["dataset.path", "has no image"],
         yaml=_add("dataset: {name: image_folder, path: '{tmp}/imgs'}"),
         setup=lambda tmp: _images(tmp, {"train/a": 2, "train/b": 0, "val/a": 1, "val/b": 1}, notes=["train/b"])),
    Case("images-corrupt", VALIDATE, ["dataset.path", "cannot read image", "bad.png"],
         yaml=_add("dataset: {name: image_folder, path: '{tmp}/imgs'}"),
         setup=lambda tmp: _images(tmp, {"a": 2, "b": 2}, corrupt="b/bad.png")),
    Case("no-training-image", VALIDATE, ["dataset.val_fraction: 0.25 of 1 image.s. leaves no training image"],
         yaml=_add("dataset: {name: digits, max_images: 1}")),
    Case("images-split-max-one", VALIDATE, ["dataset.max_images: 1 cannot hold one training and one held-out"],
         yaml=_add("dataset: {name: image_folder, path: '{tmp}/imgs', max_images: 1}"),
         setup=lambda tmp: _images(tmp, {"train/a": 2, "train/b": 2, "val/a": 1, "val/b": 1})),
    Case("zero-cost-proxy-repeated", VALIDATE, [r"evaluators\[1\]", "synflow listed more than once"],
         yaml=_edit("objectives:",
                    "  - {name: zero_cost, params: {proxies: [synflow, naswot, synflow]}}\nobjectives:")),
    Case("images-garbled-pixels", VALIDATE, ["dataset.path", "cannot read image", "bad.png"],
         yaml=_add("dataset: {name: image_folder, path: '{tmp}/imgs'}"),
         setup=lambda tmp: (_images(tmp, {"a": 2, "b": 2}), _garbled_png(tmp / "imgs" / "b" / "bad.png"))),
    Case("images-class-missing-from-val", VALIDATE, ["val", "lacks class folder", "b"],
         yaml=_add("dataset: {name: image_folder, path: '{tmp}/imgs'}"),
         setup=lambda tmp: _images(tmp, {"train/a": 2, "train/b": 2, "val/a": 1})),
    Case("images-empty-class-folder", VALIDATE, ["dataset.path", "has no image"],
         yaml=_add("dataset: {name: image_folder, path: '{tmp}/imgs'}"),
         setup=lambda tmp: _images(tmp, {"a": 2, "b": 0})),
    Case("images-one-class", VALIDATE, ["dataset.path", "at least two class folders"],
         yaml=_add("dataset: {name: image_folder, path: '{tmp}/imgs'}"),
         setup=lambda tmp: _images(tmp, {"a": 2})),
    Case("table-header-only", VALIDATE, ["benchmark", "no rows"], extra={"table": "{tmp}/header.csv"},
         setup=lambda tmp: (tmp / "header.csv").write_text("index,arch_str,cifar10_test_200ep\n")),
    Case("table-header-only-run", RUN, ["benchmark", "no rows"], extra={"table": "{tmp}/header.csv"},
         setup=lambda tmp: (tmp / "header.csv").write_text("index,arch_str,cifar10_test_200ep\n")),
    Case("table-not-utf8", VALIDATE, ["benchmark"], extra={"table": "{tmp}/latin.csv"},
         setup=lambda tmp: (tmp / "latin.csv").write_bytes("index,arch_str,cifar10_test_200ep\n0,caf\u00e9,1\n"
                                                           .encode("latin-1"))),
    Case("export-opset-too-new", VALIDATE, [r"exp\.yaml:\d+: export\.opset: opset 99 is newer than", "can write"],
         yaml=_edit("export: {enabled: false}", "export: {opset: 99}")),
    Case("evaluator-opset-too-new", VALIDATE, [r"evaluators\[1\]\.params\.opset: opset 99 is newer than"],
         yaml=_edit("objectives:", "  - {name: memory, params: {opset: 99}}\nobjectives:")),
    Case("every-trial-fails-the-same-way", RUN, ["last 10 trials all failed the same way", "has no row"],
         extra={"table": "{tmp}/onerow.csv"},
         setup=lambda tmp: (tmp / "onerow.csv").write_text(
             "index,arch_str,cifar10_test_200ep\n0,|none~0|+|none~0|none~1|+|none~0|none~1|none~2|,10.0\n")),
    Case("constraints-nobody-meets", RUN, ["0 feasible among 12 trials", "missed them by"],
         yaml=_add("constraints:\n  - {metric: top1, min: 99.5}")),
    Case("latency-table-other-setting", VALIDATE, ["latency_table", "other space parameters",
                                                          r'setting "imagenet" \(table\) vs "cifar100" \(experiment\)'],
         yaml=lambda t: FBNET, setup=lambda tmp: _fbnet_table(tmp, setting="imagenet")),
    Case("latency-table-missing-unit", VALIDATE, ["latency_table", "no entry for 1 unit"],
         yaml=lambda t: FBNET, setup=lambda tmp: _fbnet_table(tmp, drop=1)),
    Case("latency-table-nan-calibration", VALIDATE, ["fb.json", "calibration\" coefficients must be finite"],
         yaml=lambda t: FBNET, setup=lambda tmp: _fbnet_table(tmp, calibration=float("nan"))),
    Case("latency-table-other-space", VALIDATE, ["fb.json", "is for space 'fbnet', not 'nb201'"],
         yaml=lambda t: FBNET.replace("name: fbnet", "name: nb201"), setup=lambda tmp: _fbnet_table(tmp)),
    # -- --set ------------------------------------------------------------------------------------
    Case("set-no-equals", [*VALIDATE, "--set", "budget.trials"], ["--set", "KEY=VALUE"]),
    Case("set-bad-value", [*VALIDATE, "--set", "budget.trials=0"], ["--set budget.trials=0", "budget.trials"]),
    Case("set-bool", [*VALIDATE, "--set", "budget.trials=true"], ["--set budget.trials=true"]),
    Case("set-invalid-yaml", [*VALIDATE, "--set", "budget.trials=[1"], ["--set", "not valid YAML"]),
    Case("set-bad-index", [*VALIDATE, "--set", "evaluators.5.name=x"], ["--set", "out of range"]),
    Case("set-not-index", [*VALIDATE, "--set", "evaluators.first.name=x"], ["--set", "must be a list index"]),
    Case("set-through-scalar", [*VALIDATE, "--set", "seed.x=1"], ["--set", "not a mapping"]),
    Case("set-unknown-key", [*VALIDATE, "--set", "budget.epochs=3"], ["--set budget.epochs=3", "epochs"]),
    Case("set-seed-negative", [*VALIDATE, "--set", "seed=-1"], ["--set seed=-1", "seed"]),
    Case("set-deep-in-evaluator", [*VALIDATE, "--set", "evaluators.0.params.columns.top1=nope"],
         ["with --set evaluators.0.params.columns.top1=nope", "nope"]),
    Case("set-empty-key", [*VALIDATE, "--set", "=3"], ["--set", "empty key"]),
    # -- where a run goes -------------------------------------------------------------------------
    Case("run-dir-is-file", ["run", "{exp}", "--quiet", "--run-dir", "{tmp}/afile"], ["afile", "not empty|file"],
         setup=lambda tmp: (tmp / "afile").write_text("keep me\n")),
    Case("run-dir-not-empty", ["run", "{exp}", "--quiet", "--run-dir", "{tmp}/full"],
         ["full", "holds other files .not a run."],
         setup=lambda tmp: ((tmp / "full").mkdir(), (tmp / "full" / "x.txt").write_text("mine\n"))),
    Case("run-dir-under-file", ["run", "{exp}", "--quiet", "--run-dir", "{tmp}/afile/sub"],
         ["afile", "cannot be created"],
         setup=lambda tmp: (tmp / "afile").write_text("keep me\n")),
    Case("output-root-is-file", ["run", "{exp}", "--quiet"], ["root", "cannot be created"],
         extra={"root": "{tmp}/rootfile"}, setup=lambda tmp: (tmp / "rootfile").write_text("keep me\n")),
    Case("set-on-resume", ["run", "--resume", "{run}", "--set", "seed=2"], ["in Python. cannot change a run"],
         needs_run=True),
    Case("resume-nothing", ["run", "--resume", "{tmp}/nothing"], ["no such run directory"]),
    Case("resume-not-a-run", ["run", "--resume", "{tmp}/plain"], ["not a run directory"],
         setup=lambda tmp: (tmp / "plain").mkdir()),
    Case("resume-edited-config", ["run", "--resume", "{run}", "--quiet"], ["edited after the run started", "seed"],
         needs_run=True, setup=lambda tmp: _edit_run_config(tmp, "seed: 1", "seed: 5")),
    Case("resume-edited-budget", ["run", "--resume", "{run}", "--quiet"],
         ["edited after the run started", "budget.trials"],
         needs_run=True, setup=lambda tmp: _edit_run_config(tmp, "trials: 12", "trials: 30")),
    Case("resume-file-disagrees", ["run", "{tmp}/other.yaml", "--resume", "{run}", "--quiet"],
         ["differs from the config", "seed"], needs_run=True, setup=lambda tmp: (tmp / "other.yaml").write_text(
             (tmp / "exp.yaml").read_text().replace("seed: 1", "seed: 9"))),
    Case("resume-corrupt-record", ["run", "--resume", "{run}", "--quiet"], ["run.json", "unreadable run record"],
         needs_run=True, setup=lambda tmp: (tmp / "run" / "run.json").write_text("{not json")),
    Case("resume-corrupt-journal", ["run", "--resume", "{run}", "--quiet"],
         [r"trials\.jsonl:3", "corrupt journal line"],
         needs_run=True, setup=lambda tmp: _corrupt_journal_line(tmp, 3)),
    Case("resume-locked", ["run", "--resume", "{run}", "--quiet"], ["in use by process"], needs_run=True),
    Case("report-not-a-run", ["report", "{tmp}/plain"], ["plain"], setup=lambda tmp: (tmp / "plain").mkdir()),
    Case("report-missing", ["report", "{tmp}/nothing"], ["nothing"]),
    Case("supernet-file-as-experiment", VALIDATE, ["a supernet training file", "nas supernet train"],
         raw=b"supernet:\n  name: x\n  space: {name: mbv3}\n"),
    Case("sweep-file-as-experiment", VALIDATE, ["a sweep file", "nas sweep"],
         raw=b"name: s\nbase: quickstart.yaml\nparams: {seed: {grid: [0, 1]}}\n"),
    Case("report-no-journal", ["report", "{tmp}/nojournal"], ["has no trials.jsonl"],
         setup=lambda tmp: ((tmp / "nojournal").mkdir(), (tmp / "nojournal" / "config.yaml").write_text("name: x\n"))),
    Case("export-missing", ["export", "{tmp}/nothing"], ["nothing"]),
    # -- latency commands -------------------------------------------------------------------------
    Case("latency-validate-missing-table", ["latency", "validate", "{tmp}/none.json"], ["none.json"]),
    Case("latency-validate-corrupt-table", ["latency", "validate", "{tmp}/bad.json"], ["bad.json"],
         setup=lambda tmp: (tmp / "bad.json").write_text("{\"format\": ")),
    Case("latency-validate-not-a-table", ["latency", "validate", "{tmp}/list.json"], ["list.json"],
         setup=lambda tmp: (tmp / "list.json").write_text("[1, 2, 3]\n")),
    Case("import-published-missing", ["latency", "import-published", "ofa", "{tmp}/none.yaml", "--space", "ofa_mbv3",
                                      "--device", "x",
                                      "--out", "{tmp}/t.json"], ["none.yaml"]),
    Case("import-published-wrong-format", ["latency", "import-published", "hw-nas-bench-fbnet", "{tmp}/exp.yaml",
                                           "--space", "fbnet",
                                           "--out", "{tmp}/t.json"], ["exp.yaml"]),
    Case("import-published-binary", ["latency", "import-published", "ofa", "{tmp}/bin.yaml", "--space", "ofa_mbv3",
                                     "--device", "x",
                                      "--out", "{tmp}/t.json"], ["bin.yaml"],
         setup=lambda tmp: (tmp / "bin.yaml").write_bytes(b"\x00\x01\x02\xff")),
    Case("profile-unknown-space", ["latency", "profile", "--space", "nb202", "--device", "cpu", "--out",
                                   "{tmp}/t.json"], ["nb202"]),
    Case("profile-bad-space-param", ["latency", "profile", "--space", "nb201", "--space-param", "widht=3",
                                     "--device", "cpu", "--out", "{tmp}/t.json"], ["widht"]),
    Case("kit-negative-networks", ["latency", "kit", "--space", "mbv3", "--device", "pi", "--networks", "-1",
                                   "--out", "{tmp}/kit"], ["--networks must be at least 0"]),
    Case("kit-zero-rounds", ["latency", "kit", "--space", "mbv3", "--device", "pi", "--rounds", "0",
                             "--out", "{tmp}/kit"], ["--rounds must be at least 1"]),
    Case("validate-zero-networks", ["latency", "validate", "{tmp}/t.json", "-n", "0"], ["-n must be at least 1"]),
    Case("profile-zero-repeats", ["latency", "profile", "--space", "nb201", "--device", "cpu", "--repeats", "0",
                                  "--out", "{tmp}/t.json"], ["--repeats must be at least 1"]),
    Case("ofa-import-of-an-fbnet-table", ["latency", "import-published", "ofa", "{tmp}/lut.json", "--space",
                                          "ofa_mbv3", "--device", "x", "--out", "{tmp}/t.json"],
         ["not a once-for-all table", "looks like an HW-NAS-Bench FBNet table"],
         setup=lambda tmp: (tmp / "lut.json").write_text('{"pixel3_latency": {"ConvNorm_x": 1.0}}')),
    Case("fbnet-import-of-an-experiment", ["latency", "import-published", "hw-nas-bench-fbnet", "{exp}", "--space",
                                           "fbnet", "--out", "{tmp}/t.json"], ["looks like an hwnas experiment file"]),
    Case("ofa-import-alias-bomb", ["latency", "import-published", "ofa", "{tmp}/bomb.yaml", "--space", "ofa_mbv3",
                                   "--device", "x", "--out", "{tmp}/t.json"], ["bomb.yaml", "alias bomb"],
         setup=lambda tmp: (tmp / "bomb.yaml").write_bytes(BOMB)),
    Case("kit-unknown-space", ["latency", "kit", "--space", "nb202", "--device", "pi", "--out", "{tmp}/kit"],
         ["nb202"]),
]


def _images(tmp: Path, counts: dict[str, int], *, corrupt: str | None = None, notes: list[str] = ()) -> None:
    """Tiny PNGs under tmp/imgs: {class folder: how many}; a corrupt one; a text file in some folders."""
    from PIL import Image

    for folder, n in counts.items():
        (tmp / "imgs" / folder).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.new("RGB", (4, 4), (i * 40, 0, 0)).save(tmp / "imgs" / folder / f"{i}.png")
    for folder in notes:
        (tmp / "imgs" / folder / "notes.txt").write_text("not an image\n")
    if corrupt:
        (tmp / "imgs" / corrupt).write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)


def _garbled_png(path: Path) -> None:
    """A PNG whose chunks are all well formed (valid CRCs, so PIL's verify() passes) but whose image data is
    garbage: only decoding the pixels finds it."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)  # 4x4, 8-bit RGB
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"not zlib data at all")
                     + chunk(b"IEND", b""))


def _fbnet_table(tmp: Path, *, setting: str | None = None, drop: int = 0, calibration: float | None = None) -> None:
    """HW-NAS-Bench's FBNet Pixel 3 table as an hwnas table at tmp/fb.json, optionally spoilt."""
    import json
    import os

    data = Path(os.environ.get("HWNAS_SHARED_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
    args = ["latency", "import-published", "hw-nas-bench-fbnet", str(data / "hw-nas-bench" / "fbnet_lut.json"),
            "--space", "fbnet", "--metric", "pixel3_latency", "--out", str(tmp / "fb.json")]
    if setting:
        args += ["--space-param", f"setting={setting}"]
    assert main(args) == 0
    doc = json.loads((tmp / "fb.json").read_text())
    for key in sorted(doc["entries"])[:drop]:
        del doc["entries"][key]
    if calibration is not None:
        doc["calibration"] = {"a_per_sum": calibration, "b_per_unit_ms": 0.0, "c_ms": 0.0}
    (tmp / "fb.json").write_text(json.dumps(doc))


def _edit_run_config(tmp: Path, old: str, new: str) -> None:
    path = tmp / "run" / "config.yaml"
    text = path.read_text()
    assert old in text, (old, text)
    path.write_text(text.replace(old, new))


def _corrupt_journal_line(tmp: Path, line: int) -> None:
    path = tmp / "run" / "trials.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[line - 1] = '{"number": 2, "arch": oops}\n'
    path.write_text("".join(lines))


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, shared_data) -> tuple[Path, str]:
    """One finished run of the base experiment, copied per case that needs it."""
    tmp = tmp_path_factory.mktemp("base")
    table = shared_data / "nas-bench-201" / "nb201_accuracy.csv"
    text = BASE.format(table=table, root=tmp / "runs")
    (tmp / "exp.yaml").write_text(text)
    assert main(["run", str(tmp / "exp.yaml"), "--quiet", "--run-dir", str(tmp / "run")]) == 0
    return tmp / "run", text


def test_catalogue_is_large_enough():
    assert len(CASES) >= 100 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_one_clear_line_and_changes_nothing(case: Case, tmp_path, shared_data, finished_run, capsys):
    import shutil

    from hwnas.experiments.rundir import RunLock

    table = str(shared_data / "nas-bench-201" / "nb201_accuracy.csv")
    values = {"table": table, "root": str(tmp_path / "runs")}
    values.update({k: v.format(tmp=tmp_path) for k, v in case.extra.items()})
    base = BASE.format(**values)
    exp = tmp_path / "exp.yaml"
    if case.raw is not None:
        exp.write_bytes(case.raw)
    elif callable(case.yaml):
        exp.write_text(case.yaml(base).replace("{table}", table).replace("{tmp}", str(tmp_path)))
    else:
        exp.write_text(base if case.yaml is None else case.yaml)
    if case.needs_run:
        shutil.copytree(finished_run[0], tmp_path / "run")
    if case.setup is not None:
        case.setup(tmp_path)
    before = _snapshot(tmp_path)
    args = [a.format(exp=exp, tmp=tmp_path, run=tmp_path / "run") for a in case.args]
    capsys.readouterr()
    if case.id == "resume-locked":
        with RunLock(tmp_path / "run"):  # another writer holds the run
            code = main(args)
    else:
        code = main(args)
    err = capsys.readouterr().err
    assert code != 0, f"exit 0 for {case.id}"
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip() and not LOG_LINE.match(line)]
    assert len(lines) == 1, f"expected one error line, got {lines}"
    assert lines[0].startswith("error: "), lines[0]
    for fragment in case.expect:
        assert re.search(fragment, lines[0]), f"{fragment!r} not in {lines[0]!r}"
    after = _snapshot(tmp_path)
    changed = [k for k, v in before.items() if after.get(k) != v]
    assert not changed, f"files changed or removed: {changed}"


def test_every_wrong_latency_table_is_named_with_its_line(tmp_path, capsys):
    """Two evaluators whose tables are wrong in two ways: one error, both problems, each at its line."""
    _fbnet_table(tmp_path, setting="imagenet")
    (tmp_path / "fb.json").rename(tmp_path / "fb1.json")
    _fbnet_table(tmp_path, drop=1)
    exp = tmp_path / "exp.yaml"
    exp.write_text(FBNET.replace("{table: '{tmp}/fb.json'}}", "{table: '{tmp}/fb1.json', device: a}}\n"
                                 "  - {name: latency_table, params: {table: '{tmp}/fb.json', device: b}}")
                   .replace("latency_ms@pixel3", "latency_ms@a").replace("{tmp}", str(tmp_path)))
    assert main(["validate", str(exp)]) == 2
    err = capsys.readouterr().err
    assert "error: 2 problems:" in err and "Traceback" not in err
    assert re.search(r"exp\.yaml:4: evaluators\[0\]: latency_table: .*fb1\.json was measured for other space "
                     r"parameters than this experiment's fbnet space: .*setting \"imagenet\" \(table\) vs \"cifar100\" "
                     r"\(experiment\)", err)
    assert re.search(r"exp\.yaml:5: evaluators\[1\]: latency_table: .*fb\.json has no entry for 1 unit", err)


def test_a_new_run_refused_for_its_inputs_leaves_no_run_folder(tmp_path, capsys):
    _fbnet_table(tmp_path, drop=1)
    exp = tmp_path / "exp.yaml"
    exp.write_text(FBNET.replace("{tmp}", str(tmp_path)) + f"output: {{root: {tmp_path / 'runs'}}}\n")
    for _ in range(2):  # and the second attempt is not pushed to a new name by the first one's leftovers
        assert main(["run", str(exp), "--quiet"]) == 2
        assert "no entry for 1 unit" in capsys.readouterr().err
        assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_schema_problem_does_not_hide_an_unknown_component(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("index,arch_str,cifar10_test_200ep\n")
    text = BASE.format(table=table, root=tmp_path / "runs")
    exp = tmp_path / "exp.yaml"
    exp.write_text(text.replace("budget:", "budjet:").replace("{name: nb201}", "{name: nb202}")
                   .replace("{name: random}", "{name: randum}"))
    assert main(["validate", str(exp)]) == 2
    err = capsys.readouterr().err
    assert "error: 3 problems:" in err and "Traceback" not in err
    assert re.search(r"exp\.yaml:\d+: budjet: unknown key; did you mean 'budget'", err)
    assert re.search(r"exp\.yaml:3: space\.name: unknown search space 'nb202'", err)
    assert re.search(r"exp\.yaml:9: strategy\.name: unknown strategy 'randum'", err)
