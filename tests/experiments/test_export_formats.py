"""``nas export``: every format written and checked, the models chosen by front, device, top-k or name, weights
trained again with the experiment's recipe, and every exported file re-measured beside the search's figure.
Real runs, real onnxruntime and torch.export; TensorRT is absent here, so its card carries the trtexec lines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from hwnas.architecture import Architecture
from hwnas.cli import main
from hwnas.errors import RunDirectoryError
from hwnas.experiments import load_run, run_experiment
from hwnas.experiments.export import device_of, export_summary, select_models
from hwnas.experiments.export.formats import parse_formats, trtexec_lines
from hwnas.objectives import Trial, pareto_front

from .conftest import TINY

LATENCY = TINY.replace("""  - name: train
    params: {epochs: 1, batch_size: 32}""", """  - name: ort_latency
    params: {warmup: 2, repeats: 5}
  - name: train
    params: {epochs: 1, batch_size: 32}""").replace(
    "  - {metric: flops_m, direction: min}", "  - {metric: latency_ms, direction: min}")


@pytest.fixture(scope="module")
def latency_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny run whose objectives are top-1 and latency measured on this CPU during the search."""
    root = tmp_path_factory.mktemp("export")
    path = root / "tiny.yaml"
    path.write_text(LATENCY + f"output:\n  root: {root / 'runs'}\n")
    return run_experiment(path, overrides=["budget.trials=6"]).run_dir


def _cards(folder: Path) -> list[dict]:
    index = json.loads((folder / "export.json").read_text())
    return [json.loads((folder / f"{arch_id}.json").read_text()) for arch_id in index["models"]]


def test_every_format_is_written_checked_and_re_measured(latency_run, tmp_path, capsys):
    out = tmp_path / "all"
    assert main(["export", str(latency_run), "--out", str(out), "--repeats", "5", "--rounds", "2"]) == 0
    experiment, trials = load_run(latency_run)
    front = pareto_front(trials, experiment.objectives)
    cards = _cards(out)
    assert [c["arch_id"] for c in cards] == [t.arch.arch_id for t in front]
    index = json.loads((out / "export.json").read_text())
    assert index["formats"] == ["onnx", "onnx_fp16", "onnx_int8", "torch_export", "tensorrt"]
    assert index["selection"].startswith("Pareto front")
    data = experiment.data_source()(8)
    for card, trial in zip(cards, front):
        arch_id = card["arch_id"]
        assert card["weights"]["kind"] == "trained" and card["trained_weights"] is True
        assert card["onnx"]["max_abs_diff_vs_torch"] <= 1e-4 and card["onnx"]["simplified"] is True
        assert card["params_m"] > 0 and card["flops_m"] > 0
        # top-1 is the exported file's own on the held-out split; the journal's came from torch on the same split
        assert card["top1"]["value"] == card["onnx"]["top1_heldout"]
        assert abs(card["top1"]["value"] - trial.metrics["top1"]) <= 1 / len(data.y_val) + 1e-12
        assert "held-out split of digits" in card["top1"]["how"]
        f = card["formats"]
        # fp16: float16 inputs and weights, close to the fp32 torch outputs
        fp16 = onnx.load(str(out / f["onnx_fp16"]["file"]))
        assert fp16.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
        assert f["onnx_fp16"]["max_abs_diff_vs_torch_fp32"] < 0.05
        # int8: a quantised graph calibrated on training images, its top-1 measured and compared
        int8 = onnx.load(str(out / f["onnx_int8"]["file"]))
        assert any(n.op_type == "QuantizeLinear" for n in int8.graph.node)
        assert f["onnx_int8"]["calibration"].endswith("training images (MinMax)")
        assert f["onnx_int8"]["top1_lost_vs_fp32"] == pytest.approx(
            card["onnx"]["top1_heldout"] - f["onnx_int8"]["top1_heldout"])
        # torch.export: loads and runs
        program = torch.export.load(str(out / f"{arch_id}.pt2")).module()
        x = torch.from_numpy(data.x_val[:1])
        assert program(x).shape == (1, len(data.classes))
        # TensorRT is not here: the card says so and gives the trtexec line of each major version
        assert "engine" not in f["tensorrt"] and "not installed" in f["tensorrt"]["not_built"]
        assert "--fp16" in f["tensorrt"]["trtexec"]["tensorrt10"]
        assert "--fp16" not in f["tensorrt"]["trtexec"]["tensorrt11"]
        assert f"--onnx={arch_id}.fp16.onnx" in f["tensorrt"]["trtexec"]["tensorrt11"]
        # latency: the search's own context re-measured with the search's figure beside it; int8 measured; the
        # contexts this host lacks say why
        rows = {r["name"]: r for r in card["latency"]}
        fp32 = rows["cpu-fp32"]
        assert fp32["metric"] == "latency_ms" and fp32["file"] == f"{arch_id}.onnx"
        assert fp32["measured"]["rounds"] == 2 and fp32["measured"]["p90_ms"] >= fp32["measured"]["median_ms"] > 0
        assert fp32["predicted_ms"] == trial.metrics["latency_ms"]
        assert fp32["error_pct"] == pytest.approx(
            100 * (fp32["predicted_ms"] - fp32["measured"]["median_ms"]) / fp32["measured"]["median_ms"])
        assert rows["cpu-int8"]["measured"]["median_ms"] > 0 and rows["cpu-int8"]["file"] == f"{arch_id}.int8.onnx"
        if not torch.cuda.is_available():
            assert rows["cuda"]["measured"] is None and rows["cuda"]["not_measured"] == "no CUDA GPU on this host"
        assert rows["tensorrt"]["measured"] is None and "tensorrt" in rows["tensorrt"]["not_measured"].lower()
    summary = index["summary"]
    assert summary["models"] == len(cards) and summary["max_abs_diff_vs_torch"] <= 1e-4
    assert len(summary["int8_vs_fp32"]) == len(cards)
    (context, errors), = summary["prediction_error"].items()
    assert "fp32" in context and errors["n"] == len(cards)
    printed = capsys.readouterr().out
    assert "cpu-int8" in printed and cards[0]["arch_id"][:8] in printed and "max |onnx - torch|" in printed


def test_choosing_models_by_name_top_k_and_device(latency_run, tmp_path, capsys):
    experiment, trials = load_run(latency_run)
    ok = [t for t in trials if t.status == "ok"]
    best = sorted(ok, key=lambda t: -t.metrics["top1"])
    chosen, label = select_models(experiment, trials, top_k=2, by="top1")
    assert [t.arch.arch_id for t in chosen] == [t.arch.arch_id for t in best[:2]] and "top 2 by top1" in label
    chosen, _ = select_models(experiment, trials, archs=[best[-1].arch.arch_id[:6]])  # a unique prefix
    assert chosen == [best[-1]]
    chosen, label = select_models(experiment, trials, device="local")
    assert chosen == pareto_front(trials, experiment.objectives) and "device local" in label
    with pytest.raises(RunDirectoryError, match="not an objective"):
        select_models(experiment, trials, top_k=1, by="flops_m")
    with pytest.raises(RunDirectoryError, match="local"):
        select_models(experiment, trials, device="pixel3")

    out = tmp_path / "named"
    arch_id = best[-1].arch.arch_id
    assert main(["export", str(latency_run), "--out", str(out), "--arch", arch_id, "--formats", "onnx",
                 "--no-measure"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{arch_id}.onnx", f"{arch_id}.json", "export.json"])
    assert "latency" not in json.loads((out / f"{arch_id}.json").read_text())

    capsys.readouterr()
    assert main(["export", str(latency_run), "--out", str(tmp_path / "x"), "--arch", "ffffffffffff"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'ffffffffffff' is not in the run" in err
    assert not (tmp_path / "x").exists()
    assert main(["export", str(latency_run), "--out", str(tmp_path / "x"), "--top-k", "2"]) == 2
    assert "--by" in capsys.readouterr().err
    assert main(["export", str(latency_run), "--out", str(tmp_path / "x"), "--formats", "onnx,tflite"]) == 2
    assert "--formats onnx,tflite" in capsys.readouterr().err
    assert main(["export", str(latency_run), "--out", str(tmp_path / "x"), "--by", "top1"]) == 2
    assert "--by ranks the models for --top-k K" in capsys.readouterr().err
    for opset in ("3", "99"):  # refused before anything is made, in one line
        assert main(["export", str(latency_run), "--out", str(tmp_path / "x"), "--opset", opset]) == 2
        err = capsys.readouterr().err
        assert f"--opset {opset}: an ONNX opset from 13 to" in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_an_incomplete_run_directory_says_what_it_lacks(latency_run, tmp_path, capsys):
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.yaml").write_bytes((latency_run / "config.yaml").read_bytes())
    assert main(["export", str(partial), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "has no trials.jsonl" in err and err.count("\n") == 1
    assert main(["export", str(tmp_path / "nothing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_folder_holding_other_files_is_refused_without_force_and_they_survive_it(latency_run, tmp_path, capsys):
    out = tmp_path / "shared"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    capsys.readouterr()
    args = ["export", str(latency_run), "--out", str(out), "--formats", "onnx", "--no-measure", "--top-k", "1",
            "--by", "top1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "already holds other files (notes.txt)" in err and "--force" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert main([*args, "--force"]) == 0
    assert (out / "notes.txt").read_text() == "mine\n" and (out / "export.json").is_file()


def test_train_retrains_with_the_experiment_recipe_and_dynamic_batch(latency_run, tmp_path):
    _, trials = load_run(latency_run)
    best = max((t for t in trials if t.status == "ok"), key=lambda t: t.metrics["top1"])
    out = tmp_path / "retrained"
    assert main(["export", str(latency_run), "--out", str(out), "--arch", best.arch.arch_id, "--train",
                 "--dynamic-batch", "--formats", "onnx", "--no-measure"]) == 0
    (card,) = _cards(out)
    assert card["weights"]["kind"] == "retrained" and "1 epoch" in card["weights"]["detail"]
    # the experiment's recipe and seeds: the same weights the train evaluator kept during the search
    kept = torch.load(latency_run / "weights" / f"{best.arch.arch_id}.pt", weights_only=True)
    again = torch.load(out / f"{best.arch.arch_id}.pt", weights_only=True)
    assert all(torch.equal(kept[k], again[k]) for k in kept)
    model = onnx.load(str(out / f"{best.arch.arch_id}.onnx"))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert card["onnx"]["batch"] == "dynamic" and card["onnx"]["max_abs_diff_vs_torch"] <= 1e-4


def test_parse_formats_and_trtexec_lines():
    assert parse_formats("all") == ("onnx", "onnx_fp16", "onnx_int8", "torch_export", "tensorrt")
    assert parse_formats("onnx_int8") == ("onnx", "onnx_int8")  # the fp32 file is always there
    assert parse_formats(["tensorrt", "onnx_fp16"]) == ("onnx", "onnx_fp16", "tensorrt")
    with pytest.raises(ValueError, match="'tflite'"):
        parse_formats("onnx,tflite")
    lines = trtexec_lines("m.onnx", None, "m.engine")
    assert lines == {"tensorrt10": "trtexec --onnx=m.onnx --saveEngine=m.engine --skipInference",
                     "tensorrt11": "trtexec --onnx=m.onnx --saveEngine=m.engine --skipInference"}


def test_device_of_and_summary_figures():
    assert device_of("latency_ms@pixel3") == "pixel3" and device_of("latency_ms") == "local"
    cards = [{"arch_id": "a", "onnx": {"file": "a.onnx", "max_abs_diff_vs_torch": 2e-6},
              "formats": {"onnx_int8": {"file": "a.int8.onnx", "top1_lost_vs_fp32": 0.01}},
              "latency": [{"context": "cpu", "file": "a.onnx", "measured": {"median_ms": 2.0}, "error_pct": -10.0},
                          {"context": "cpu8", "file": "a.int8.onnx", "measured": {"median_ms": 1.0},
                           "error_pct": None}]},
             {"arch_id": "b", "onnx": {"file": "b.onnx", "max_abs_diff_vs_torch": 5e-6},
              "latency": [{"context": "cpu", "file": "b.onnx", "measured": {"median_ms": 4.0}, "error_pct": 30.0}]}]
    s = export_summary(cards)
    assert s["max_abs_diff_vs_torch"] == 5e-6
    assert s["prediction_error"] == {"cpu": {"n": 2, "mape_pct": 20.0, "max_ape_pct": 30.0}}
    assert s["int8_vs_fp32"] == [{"arch_id": "a", "latency_ratio_int8_over_fp32": 0.5, "top1_lost": 0.01}]


def test_select_models_refuses_a_failed_architecture_and_a_run_with_nothing_ok(latency_run):
    experiment, trials = load_run(latency_run)
    failed = Trial(number=99, arch=Architecture("mbv3", {"x": 1}), status="failed", error="boom")
    with pytest.raises(RunDirectoryError, match="failed in the run"):
        select_models(experiment, [*trials, failed], archs=[failed.arch.arch_id])
    with pytest.raises(RunDirectoryError, match="no successfully evaluated"):
        select_models(experiment, [failed])
    assert np.isfinite([t.metrics["latency_ms"] for t in trials if t.status == "ok"]).all()


SMALLER = {"darts": {"cells": 5}, "nb201": {"cells_per_stage": 2}}  # every op and cell kind, fewer repeats


@pytest.mark.parametrize("name", ["mbv3", "ofa_mbv3", "fbnet", "nb201", "darts", "vit", "convnext"])
def test_exported_onnx_matches_torch_for_every_space(name, tmp_path):
    """The export's own writers (ONNX, onnxslim, the onnxruntime check) on a sampled member of each space
    (default parameters; DARTS and NAS-Bench-201 with fewer repeated cells); BatchNorm recalibrated so activations
    have a trained network's scale. ``benchmarks/export_parity.py`` runs the full default spaces."""
    from hwnas.experiments.export.formats import ort_outputs, simplify_onnx, torch_outputs
    from hwnas.latency.onnx_export import export_onnx
    from hwnas.search_spaces import SPACES
    from hwnas.training import build_seeded, recalibrate_bn

    rng = np.random.default_rng(7)
    space = SPACES.create(name, SMALLER.get(name, {}))
    arch = space.sample(rng)
    shape = tuple(space.input_shape_of(arch))
    model = build_seeded(space, arch, 0)
    recalibrate_bn(model, rng.standard_normal((8, *shape)).astype(np.float32), batch_size=4)
    path = export_onnx(model, shape, tmp_path / f"{name}.onnx")
    assert simplify_onnx(path) is None
    x = rng.standard_normal((2, *shape)).astype(np.float32)
    assert np.max(np.abs(ort_outputs(path, x) - torch_outputs(model, x))) <= 1e-4


def test_resuming_a_finished_run_rewrites_none_of_its_outputs(latency_run, tmp_path):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(latency_run, run)
    outputs = sorted(p for p in run.rglob("*") if p.is_file() and p.name not in ("env.json", ".lock"))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in outputs}
    result = run_experiment(resume=run)
    assert result.evaluated == 0 and result.outputs == json.loads((run / "summary.json").read_text())
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in outputs} == before
    assert "models" in {p.parent.name for p in outputs}  # the exported models were among the files left alone
