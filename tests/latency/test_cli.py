"""``nas latency`` as a user runs it."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

SMALL = ["--space", "mbv3", "--space-param", "resolution=8", "--space-param",
         'stages=[{channels: 8, depths: [1, 2]}, {channels: 16, stride: 2, depths: [1, 2]}]',
         "--space-param", "kernels=[3, 5]", "--space-param", "expand_ratios=[3]"]
FAST = ["--warmup", "2", "--repeats", "5", "--min-time", "0"]


def nas(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "hwnas.cli", *args], capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"nas {' '.join(args)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_profile_validate_show(tmp_path):
    table = tmp_path / "t.json"
    out = nas("latency", "profile", *SMALL, *FAST, "--device", "here", "--out", str(table))
    assert "8 of 8 units (8 measured now" in out.stdout and "overhead" in out.stdout
    again = nas("latency", "profile", *SMALL, *FAST, "--device", "here", "--out", str(table))
    assert "0 measured now, 8 kept from before" in again.stdout
    val = nas("latency", "validate", str(table), "-n", "8", *FAST)
    assert "calibrated (held-out)" in val.stdout
    data = json.loads(table.read_text())
    # the fitted coefficients themselves are noise at these sizes (30 us networks, 5 repeats): only stored, finite
    assert data["validation"]["networks"] == 8 and set(data["calibration"]) == {"a_per_sum", "b_per_unit_ms", "c_ms"}
    assert all(math.isfinite(v) for v in data["calibration"].values())
    assert data["validation"]["mean_heldout"]["calibrated"]["splits"] == 10
    assert data["validation"]["mean_heldout"]["learned"] is None  # 4 training networks: too few for a model
    shown = nas("latency", "show", str(table)).stdout
    assert "Kendall" in shown and "calibrated, 10 halvings" in shown
    assert "priced by: calibration (the lower mean held-out MAPE over 10 random halvings)" in shown
    assert "incomplete" not in shown
    again = nas("latency", "validate", str(table), "-n", "8", *FAST, check=False)
    assert again.returncode == 2 and "already holds a validation" in again.stderr and "--force" in again.stderr
    other = nas("latency", "validate", str(table), "--space-param", "resolution=16", check=False)
    assert other.returncode == 2 and "validate takes only resolutions=[...]" in other.stderr
    assert json.loads(table.read_text()) == data  # the refused run changed nothing
    data["entries"].pop(sorted(data["entries"])[0])
    table.write_text(json.dumps(data))
    assert "incomplete: 1 of the 8 units of the space have no entry" in nas("latency", "show", str(table)).stdout


@pytest.mark.parametrize("context", [[], ["--in-context", "between", "--rounds", "2"]], ids=["isolated", "between"])
def test_kit_and_import_round_trip(tmp_path, context):
    kit = tmp_path / "kit.zip"
    made = nas("latency", "kit", *SMALL, "--device", "board", "--networks", "8", "--repeats", "5", "--min-time", "0",
               *context, "--out", str(kit))
    assert "with 8 units (between, 7 carriers)" in made.stdout if context else "with 8 units (isolated)" in made.stdout
    subprocess.run([sys.executable, str(tmp_path / "run_kit.py"), str(kit), "--out", str(tmp_path / "r.json")],
                   check=True, capture_output=True, timeout=600)
    out = nas("latency", "import", str(tmp_path / "r.json"), "--kit", str(kit), "--out", str(tmp_path / "t.json"))
    assert "8 units (0 failed)" in out.stdout and "calibrated (held-out)" in out.stdout
    table = json.loads((tmp_path / "t.json").read_text())
    assert table["protocol"]["mode"] == ("between" if context else "isolated")
    assert all(len(e.get("rounds_ms", [0])) == (2 if context else 1) for e in table["entries"].values())


def test_bad_table_and_missing_backend_are_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "hwnas.latency-table", "version": 1')
    proc = nas("latency", "show", str(bad), check=False)
    assert proc.returncode == 2 and "corrupt or truncated" in proc.stderr and "Traceback" not in proc.stderr
    proc = nas("latency", "profile", *SMALL, "--provider", "cuda", "--device", "gpu", "--out", str(tmp_path / "g.json"),
               check=False)
    assert proc.returncode == 2 and "CUDAExecutionProvider" in proc.stderr and "onnxruntime-gpu" in proc.stderr
    assert not (tmp_path / "g.json").exists()
    for backend, message in (("onnxruntime", "--cuda-graph: only the torch backend captures CUDA graphs"),
                             ("torch", "cuda_graph needs a CUDA device")):
        proc = nas("latency", "profile", *SMALL, "--backend", backend, "--cuda-graph", "--device", "gpu",
                   "--out", str(tmp_path / "g.json"), check=False)
        assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1
        assert not (tmp_path / "g.json").exists()


def test_an_output_path_that_cannot_be_written_is_one_line_and_a_closed_pipe_is_quiet(tmp_path):
    note = tmp_path / "notes.txt"
    note.write_text("keep me")
    for args in (["profile", *SMALL, "--device", "d", "--out", str(note / "t.json")],
                 ["kit", *SMALL, "--device", "d", "--out", str(note / "kit.zip")]):
        proc = nas("latency", *args, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert f"{note} is not a folder; cannot write {note}/" in proc.stderr
    assert note.read_text() == "keep me"
    # the reader of the output goes away after one line (nas list | head -1): no BrokenPipeError traceback
    proc = subprocess.run(f"{sys.executable} -m hwnas.cli list -v | head -1", shell=True, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.count("\n") == 1 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_a_mistyped_provider_lists_the_providers(tmp_path):
    proc = nas("latency", "profile", *SMALL, "--provider", "cdua", "--device", "d", "--out", str(tmp_path / "t.json"),
               check=False)
    assert proc.returncode == 2 and "unknown provider 'cdua'; one of cpu, cuda, tensorrt" in proc.stderr
    assert "onnxruntime-gpu" not in proc.stderr and not (tmp_path / "t.json").exists()


# -- the space as an experiment resolves it ---------------------------------------------------------------------
DIGITS_EXPERIMENT = """\
name: gray
space:
  name: mbv3
  params:
    resolution: 8
    stages: [{channels: 8, depths: [1, 2]}, {channels: 16, stride: 2, depths: [1, 2]}]
    kernels: [3, 5]
    expand_ratios: [3]
dataset: {name: digits, max_images: 100}
evaluators:
  - {name: latency_table, params: {table: TABLE}}
objectives:
  - {metric: latency_ms@board, direction: min}
strategy: random
budget: {trials: 2}
"""


def _experiment(tmp_path, table="t.json"):
    path = tmp_path / "exp.yaml"
    path.write_text(DIGITS_EXPERIMENT.replace("TABLE", str(tmp_path / table)))
    return path


def _table(path, **params):
    """A table header (no entries) for the small mbv3 space with ``params``, made without measuring anything."""
    from hwnas.latency.context import DeviceContext
    from hwnas.latency.tables import new_table, space_params_of, space_resolved_of
    from hwnas.search_spaces.mbv3 import MobileNetV3Space

    space = MobileNetV3Space(resolution=8, stages=[{"channels": 8, "depths": [1, 2]},
                                                   {"channels": 16, "stride": 2, "depths": [1, 2]}],
                             kernels=[3, 5], expand_ratios=[3], **params)
    context = DeviceContext(device="board", runtime="onnxruntime", runtime_version="1", provider="cpu")
    table = new_table(space=space.name, space_params=space_params_of(space), space_resolved=space_resolved_of(space),
                      context=context, protocol={"warmup": 2, "repeats": 5, "mode": "isolated"}, tool="a test",
                      provenance={"host": "vm", "board": {"machine": "aarch64", "cores": 4}})
    return table.save(path)


def test_a_kit_from_an_experiment_has_the_experiments_channels_and_classes(tmp_path, capsys):
    from hwnas.cli import main
    from hwnas.latency.kit.results import read_manifest

    exp = _experiment(tmp_path)
    assert main(["latency", "kit", "--experiment", str(exp), "--device", "board", "--networks", "0", *FAST,
                 "--out", str(tmp_path / "kit")]) == 0
    out = capsys.readouterr().out
    assert f"space mbv3 as {exp} resolves it: resolution=8, in_chans=1, num_classes=10" in out
    manifest = read_manifest(tmp_path / "kit" / "kit.zip")
    assert manifest["space_params"]["in_chans"] == 1 and manifest["space_params"]["num_classes"] == 10
    assert manifest["space_resolved"]["in_chans"] == 1 and manifest["space_resolved"]["resolution"] == 8
    assert all(u["input_shape"][1] == 1 for u in manifest["units"] if u["key"].startswith("stem"))
    # importing the board's results for an experiment that now differs is refused before the results are read
    assert main(["latency", "import", str(tmp_path / "nothing-yet.json"), "--kit", str(tmp_path / "kit" / "kit.zip"),
                 "--experiment", str(exp), "--set", "space.params.resolution=16",
                 "--out", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert "kit.zip was made for another space than" in err and "resolution 8 (kit) vs 16 (experiment)" in err
    assert not (tmp_path / "t.json").exists()


def test_a_table_of_another_space_than_the_experiments_is_named_before_anything_is_measured(tmp_path, capsys):
    from hwnas.cli import main

    exp = _experiment(tmp_path)
    before = _table(tmp_path / "t.json").read_bytes()  # 3 channels: the space's default, not the digits' 1
    assert main(["latency", "validate", str(tmp_path / "t.json"), "--experiment", str(exp), "-n", "8", *FAST]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: table {tmp_path / 't.json'} was made for another space than {exp}'s: ")
    assert "in_chans 3 (table) vs 1 (experiment)" in err and len(err.strip().splitlines()) == 1
    assert (tmp_path / "t.json").read_bytes() == before  # nothing measured, nothing written
    # nas validate (and nas run) name it the same way: every difference, both values
    assert main(["validate", str(exp)]) == 2
    err = capsys.readouterr().err
    assert "was measured for other space parameters than this experiment's mbv3 space: in_chans 3 (table) vs 1 " \
           "(experiment)" in err
    # a table made for the experiment's space passes that check (and then wants its units measured)
    _table(tmp_path / "t.json", in_chans=1)
    assert main(["validate", str(exp)]) == 2
    err = capsys.readouterr().err
    assert "other space parameters" not in err and "has no entry for" in err


def test_experiment_option_bad_input(tmp_path, capsys):
    from hwnas.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["latency", "kit", "--experiment", "exp.yaml", "--space", "mbv3", "--device", "b", "--out", "k"])
    assert exit_.value.code == 2 and "argument --space: not allowed with argument --experiment" in \
        capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nspace: {name: mbv3\n")
    for command in (["kit", "--device", "b", "--out", str(tmp_path / "k")], ["profile", "--device", "b", "--out",
                                                                            str(tmp_path / "p.json")]):
        assert main(["latency", *command, "--experiment", str(broken)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {broken}:") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "k").exists() and not (tmp_path / "p.json").exists()
    exp = _experiment(tmp_path)
    assert main(["latency", "kit", "--experiment", str(exp), "--space-param", "resolution=16", "--device", "b",
                 "--out", str(tmp_path / "k")]) == 2
    assert "--space-param goes with --space" in capsys.readouterr().err
    assert main(["latency", "kit", "--space", "mbv3", "--set", "seed=1", "--device", "b", "--out",
                 str(tmp_path / "k")]) == 2
    assert "--set KEY=VALUE overrides a value of an experiment file" in capsys.readouterr().err


def test_show_prints_aligned_fields_not_dict_reprs(tmp_path, capsys):
    from hwnas.cli import main

    _table(tmp_path / "t.json", in_chans=1)
    assert main(["latency", "show", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "'" not in out
    lines = out.splitlines()
    for block, fields in (("space: mbv3", ["in_chans:", "num_classes:", "resolution:"]),
                          ("protocol:", ["warmup:", "repeats:", "mode:"]),
                          ("provenance:", ["tool:", "created:", "host:", "board:"])):
        start = lines.index(block)
        got = {line.split()[0]: line for line in lines[start + 1:start + 1 + 20] if line.startswith("  ")}
        assert all(f in got for f in fields), (block, got)
    space = lines[lines.index("space: mbv3") + 1:lines.index("space: mbv3") + 8]
    assert "  in_chans:      1" in space and "  kernels:       3, 5" in space  # one column for the values
    columns = {len(line) - len(line.split(":", 1)[1].lstrip()) for line in space if not line.endswith(":")}
    assert columns == {len("  stem_channels: ")}
    assert "  stages[1]:" in lines and "    depths:   1, 2" in lines  # a list of mappings, item by item
    assert "    machine: aarch64" in lines and "    cores:   4" in lines  # a nested mapping indented
