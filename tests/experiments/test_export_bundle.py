"""From front to device: the input contract on every card (one definition with the data pipeline), the ONNX graph
that takes raw images (``--with-preprocessing``) checked against the Python pipeline on real held-out digits, the
deployable bundle (``--bundle``) whose ``predict.py`` runs where only numpy and onnxruntime exist, the ``.pt2``'s
dynamic batch, and the refusals, each one line, before anything is written."""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import zipfile
from pathlib import Path, PurePosixPath

import numpy as np
import onnx
import pytest
import torch

from hwnas.architecture import Architecture
from hwnas.cli import main
from hwnas.data.datasets import DataConfig, load
from hwnas.data.preprocess import InputContract, contract_for
from hwnas.errors import RunDirectoryError
from hwnas.experiments import load_run, run_experiment
from hwnas.experiments.export import ModelCard, check_export, plan_export
from hwnas.experiments.export.deploy import PREDICT, member_name
from hwnas.experiments.export.formats import ort_outputs, ort_session, torch_outputs
from hwnas.training import build_seeded

from ..latency.test_kit import Board
from .conftest import TINY

#: The tiny experiment at 12 x 12: the 8 x 8 digits are resized, so the graph's Resize is exercised.
RESOLUTION = 12


@pytest.fixture(scope="module")
def run12(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bundle")
    path = root / "tiny.yaml"
    path.write_text(TINY + f"output:\n  root: {root / 'runs'}\n")
    return run_experiment(path, overrides=["budget.trials=4", f"space.params.resolution={RESOLUTION}"]).run_dir


@pytest.fixture(scope="module")
def bundled(run12: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exported") / "out"
    assert main(["export", str(run12), "--out", str(out), "--bundle", "--dynamic-batch", "--formats",
                 "onnx,onnx_int8,torch_export", "--no-measure", "--top-k", "1", "--by", "top1"]) == 0
    return out


def _card(folder: Path) -> dict:
    (arch_id,) = json.loads((folder / "export.json").read_text())["models"]
    return json.loads((folder / f"{arch_id}.json").read_text())


# -------------------------------------------------------------------------------------------- the contract
@pytest.mark.parametrize("name, resolution", [("digits", 8), ("digits", 12), ("mnist5k", 32)])
def test_the_contract_is_the_pipeline_that_made_the_data(name, resolution):
    data = load(DataConfig(name=name, max_images=300), resolution)
    contract = data.contract
    assert contract is not None and data.raw_val is not None and data.raw_val.dtype == np.uint8
    # the raw held-out images through the contract are, bit for bit, what training and evaluation use
    assert np.array_equal(contract(data.raw_val), data.x_val)
    source = {"digits": ((8, 8), 16), "mnist5k": ((28, 28), 255)}[name]
    assert data.raw_val.shape[1:] == (*source[0], 1) and data.raw_val.max() <= source[1]
    card = contract.to_dict()
    # timm pretrained_cfg keys, and the raw image it starts from
    assert card["input_size"] == [1, resolution, resolution] and card["interpolation"] == "bilinear"
    assert card["mean"] == list(contract.mean) and card["std"] == list(contract.std) and card["crop_pct"] == 1.0
    assert card["source"] == {"dataset": name, "dtype": "uint8", "layout": "HWC", "size": list(source[0]),
                              "channels": 1, "value_range": [0, source[1]]}
    assert card["scale"]["divide_by"] == source[1] and card["layout"] == "NCHW" and card["channel_order"] == "L"
    resized = source[0] != (resolution, resolution)
    assert (card["resize"] is not None) == resized
    if resized:
        assert card["resize"]["align_corners"] is False and card["resize"]["size"] == [resolution, resolution]
    # the stats are the training split's, as the data's normalisation used them
    unit = contract.to_unit(data.raw_val)
    assert np.allclose((unit - np.asarray(contract.mean).reshape(1, -1, 1, 1))
                       / np.asarray(contract.std).reshape(1, -1, 1, 1), data.x_val, atol=1e-6)


def test_the_wrapped_module_does_the_pipeline_in_torch():
    data = load(DataConfig(name="digits", max_images=200), 12)
    contract = data.contract
    assert contract is not None and data.raw_val is not None
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.Flatten(), torch.nn.LazyLinear(10))
    model(torch.zeros(1, 1, 12, 12))
    with torch.no_grad():
        got = contract.wrap(model)(torch.from_numpy(data.raw_val)).numpy()
    assert np.max(np.abs(got - torch_outputs(model, data.x_val))) < 1e-5
    with pytest.raises(ValueError, match=r"N x H x W x 1"):
        contract.to_unit(data.raw_val[:, :, :, 0])
    with pytest.raises(ValueError, match="no input contract"):
        contract_for("imagenet", 224)


def test_an_image_folder_contract_says_pillow_resizes_while_reading():
    contract = InputContract("image_folder", 16, mean=(0.5, 0.4, 0.3), std=(0.2, 0.2, 0.2))
    card = contract.to_dict()
    assert card["source"]["size"] is None and card["channel_order"] == "RGB" and card["in_chans"] == 3
    assert "PIL" in card["resize"]["implementation"] and not contract.resizes and contract.raw_size == (16, 16)
    raw = np.random.default_rng(0).integers(0, 256, (2, 16, 16, 3)).astype(np.uint8)
    expected = (raw.transpose(0, 3, 1, 2) / 255.0 - np.array([0.5, 0.4, 0.3]).reshape(1, 3, 1, 1)) / 0.2
    assert np.allclose(contract(raw), expected, atol=1e-5)


def test_cards_from_before_the_contract_still_read_and_new_ones_round_trip():
    old = {"arch_id": "a1", "input_shape": [1, 1, 8, 8], "onnx": {"file": "a1.onnx"}, "someday": 3}
    card = ModelCard.from_dict(old)
    assert card.input is None and card.batch_sizes is None and card.raw_onnx is None
    assert card.extra == {"someday": 3} and card.to_dict() == old
    new = {**old, "input": {"input_name": "input", "mean": [0.3]}, "batch_sizes": {"a1.onnx": {"min": 1, "max": 1}},
           "raw_onnx": {"file": "a1.raw.onnx"}}
    again = ModelCard.from_dict(json.loads(json.dumps(ModelCard.from_dict(new).to_dict())))
    assert again.input == new["input"] and again.batch_sizes == new["batch_sizes"] and again.to_dict() == new
    odd = ModelCard.from_dict({"arch_id": "a2", "input": "NCHW", "batch_sizes": [1]})  # kept as read, not an error
    assert odd.input is None and odd.extra == {"input": "NCHW", "batch_sizes": [1]}


# ------------------------------------------------------------------------------ the export and its bundle
def test_every_card_records_the_contract_and_the_raw_graph_matches_the_python_pipeline(run12, bundled):
    experiment, _ = load_run(run12)
    data = experiment.data_source()(RESOLUTION)
    assert data.contract is not None and data.raw_val is not None
    card = _card(bundled)
    arch_id = card["arch_id"]
    contract = card["input"]
    assert contract["input_name"] == "input" and contract["shape"] == ["batch", 1, RESOLUTION, RESOLUTION]
    assert contract["mean"] == list(data.contract.mean) and contract["std"] == list(data.contract.std)
    assert contract["source"]["size"] == [8, 8] and contract["resize"]["interpolation"] == "bilinear"
    # the graph that takes raw images: uint8 N x 8 x 8 x 1 in, the resize inside
    raw_path = bundled / f"{arch_id}.raw.onnx"
    graph = onnx.load(str(raw_path))
    (inp,) = graph.graph.input
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.UINT8
    assert [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim] == ["batch", 8, 8, 1]
    assert {"Resize", "Cast"} <= {n.op_type for n in graph.graph.node}
    record = card["raw_onnx"]
    assert record["max_abs_diff_vs_python_pipeline"] < 1e-4 and record["top1_agreement_vs_python_pipeline"] == 1.0
    assert {k: record["input"]["accepts"][k] for k in ("height", "width")} == {"height": 8, "width": 8}
    assert "source size of digits" in record["input"]["accepts"]["why"]
    assert str(len(data.raw_val)) in record["checked_images"]
    # checked again here, without the card: the raw graph on raw images against the fp32 file on the pipeline's
    session = ort_session(raw_path)
    got = session.run(None, {"image": data.raw_val})[0]
    fp32 = ort_outputs(bundled / f"{arch_id}.onnx", data.x_val, dynamic_batch=True)
    assert np.max(np.abs(got - fp32)) < 1e-4 and (got.argmax(1) == fp32.argmax(1)).all()
    # and against the torch network with the run's weights on the pipeline's inputs
    model = build_seeded(experiment.space, Architecture.from_dict(card["arch"]), experiment.config.seed)
    model.load_state_dict(torch.load(run12 / "weights" / f"{arch_id}.pt", weights_only=True))
    assert np.max(np.abs(got[:64] - torch_outputs(model, data.x_val[:64]))) < 1e-4
    assert record["top1_heldout"] == card["onnx"]["top1_heldout"]


def test_dynamic_batch_reaches_the_pt2_and_every_file_says_its_batch_sizes(bundled):
    card = _card(bundled)
    arch_id = card["arch_id"]
    assert card["batch_sizes"] == {f"{arch_id}{s}": {"min": 1, "max": None}
                                   for s in (".onnx", ".int8.onnx", ".raw.onnx", ".pt2")}
    program = torch.export.load(str(bundled / f"{arch_id}.pt2")).module()
    assert program(torch.zeros(3, 1, RESOLUTION, RESOLUTION)).shape == (3, 10)
    assert card["formats"]["torch_export"]["batch"] == "dynamic"


def test_a_fixed_batch_export_says_batch_one_and_the_pt2_keeps_it(run12, tmp_path):
    out = tmp_path / "fixed"
    assert main(["export", str(run12), "--out", str(out), "--with-preprocessing", "--formats", "onnx,torch_export",
                 "--no-measure", "--top-k", "1", "--by", "top1"]) == 0
    card = _card(out)
    arch_id = card["arch_id"]
    assert all(v == {"min": 1, "max": 1} for v in card["batch_sizes"].values())
    assert sorted(card["batch_sizes"]) == sorted(f"{arch_id}{s}" for s in (".onnx", ".raw.onnx", ".pt2"))
    assert card["raw_onnx"]["input"]["shape"] == [1, 8, 8, 1] and not (out / f"{arch_id}.bundle.zip").exists()
    program = torch.export.load(str(out / f"{arch_id}.pt2")).module()
    with pytest.raises((AssertionError, RuntimeError), match=r"(?i)shape|size|guard|expected"):
        program(torch.zeros(2, 1, RESOLUTION, RESOLUTION))


def test_the_bundle_holds_the_model_card_statistics_and_predictor_inside_one_folder(bundled):
    card = _card(bundled)
    arch_id = card["arch_id"]
    with zipfile.ZipFile(bundled / f"{arch_id}.bundle.zip") as zf:
        names = zf.namelist()
        for name in names:  # never out of the folder
            path = PurePosixPath(name)
            assert not path.is_absolute() and ".." not in path.parts and path.parts[0] == arch_id
        files = {PurePosixPath(n).name: zf.read(n) for n in names}
    assert set(files) == {"predict.py", "bundle.json", "calibration.json", f"{arch_id}.json", f"{arch_id}.onnx",
                          f"{arch_id}.int8.onnx", f"{arch_id}.pt2", f"{arch_id}.raw.onnx"}
    assert json.loads(files[f"{arch_id}.json"]) == card and files["predict.py"] == PREDICT.read_bytes()
    manifest = json.loads(files["bundle.json"])
    assert manifest["model"] == f"{arch_id}.raw.onnx" and manifest["classes"] == [str(i) for i in range(10)]
    for name, digest in manifest["files"].items():
        assert hashlib.sha256(files[name]).hexdigest() == digest
    calibration = json.loads(files["calibration.json"])
    assert calibration["images"] == 128 and calibration["used_for"] == "the int8 file's MinMax calibration"
    (channel,) = calibration["channels"]
    assert channel["min"] <= channel["p01"] <= channel["mean"] <= channel["p99"] <= channel["max"]
    assert sum(channel["histogram"]["counts"]) == 128 * RESOLUTION * RESOLUTION
    assert 0 <= channel["raw"]["min"] < channel["raw"]["max"] <= 16
    ast.parse(files["predict.py"].decode(), feature_version=(3, 8))  # any Python from 3.8


def test_member_names_never_leave_the_folder():
    assert member_name("abc", "predict.py") == "abc/predict.py"
    for bad in ("../x", "/etc/passwd", "a/../../b", "sub/x", "C:x", "a\\b", "", "."):
        with pytest.raises(ValueError, match="would leave the folder"):
            member_name("abc", bad)


def test_predict_py_classifies_and_times_images_with_only_numpy_and_onnxruntime(run12, bundled, tmp_path):
    from PIL import Image

    experiment, _ = load_run(run12)
    data = experiment.data_source()(RESOLUTION)
    assert data.raw_val is not None
    card = _card(bundled)
    arch_id = card["arch_id"]
    with zipfile.ZipFile(bundled / f"{arch_id}.bundle.zip") as zf:
        zf.extractall(tmp_path / "unpacked")
    predict = tmp_path / "unpacked" / arch_id / "predict.py"
    images = tmp_path / "images"
    images.mkdir()
    args = []
    for i in range(3):  # real held-out digits: raw .npy (0..16), 8-bit PNG, RGB PNG and PGM (0..255)
        raw = data.raw_val[i, :, :, 0]
        np.save(images / f"{i}.npy", raw)
        eight_bit = np.rint(raw * 255.0 / 16).astype(np.uint8)
        Image.fromarray(eight_bit).save(images / f"{i}.png")
        Image.fromarray(eight_bit).convert("RGB").save(images / f"{i}.rgb.png")
        Image.fromarray(eight_bit).save(images / f"{i}.pgm")
        args += [str(images / f"{i}{ext}") for ext in (".npy", ".png", ".rgb.png", ".pgm")]
    expected = ort_outputs(bundled / f"{arch_id}.onnx", data.x_val[:3]).argmax(1)
    board = Board(tmp_path / "board")
    proc, report = board.run(predict, *args, "--json", "--runs", "5", "--warmup", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert report["flags"] == {"isolated": 1, "no_site": 1}
    assert report["torch"].startswith("ImportError") and report["hwnas"].startswith("ImportError")
    assert report["foreign_modules"] == [] and report["loaded_torch"] is False
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["image"] for r in rows] == args
    assert [r["index"] for r in rows] == [int(e) for e in expected for _ in range(4)]
    assert all(r["median_ms"] > 0 and r["runs"] == 5 and r["load_ms"] > 0 for r in rows)
    # a plain line per image without --json; a bad image is one line and status 2
    proc, _ = board.run(predict, args[1], "--runs", "3", cwd=tmp_path)
    assert proc.returncode == 0 and f"class {expected[0]}" in proc.stdout and "ms median" in proc.stdout
    Image.fromarray(np.zeros((9, 9), np.uint8)).save(images / "big.png")
    proc, _ = board.run(predict, str(images / "big.png"), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "the image is 9 x 9; the model takes 8 x 8" in proc.stderr
    # a changed model file is refused
    model = tmp_path / "unpacked" / arch_id / f"{arch_id}.raw.onnx"
    model.write_bytes(model.read_bytes() + b"\0")
    proc, _ = board.run(predict, args[0], cwd=tmp_path)
    assert proc.returncode == 2 and "does not match bundle.json's sha256" in proc.stderr


# ------------------------------------------------------------------------------------------------ bad input
def test_the_raw_graph_is_re_measured_beside_the_onnx_file(run12, tmp_path, capsys):
    """--with-preprocessing with re-measurement: <id>.raw.onnx is timed in the same context and protocol as
    <id>.onnx (uint8 input at the source size, fed in the graph's own type), its row saying what it includes."""
    out = tmp_path / "timed"
    assert main(["export", str(run12), "--out", str(out), "--with-preprocessing", "--formats", "onnx", "--top-k", "1",
                 "--by", "top1", "--repeats", "5", "--rounds", "2"]) == 0
    card = _card(out)
    arch_id = card["arch_id"]
    rows = {r["name"]: r for r in card["latency"]}
    fp32, raw = rows["cpu-fp32"], rows["cpu-fp32+preprocessing"]
    assert fp32["file"] == f"{arch_id}.onnx" and raw["file"] == f"{arch_id}.raw.onnx"
    for row in (fp32, raw):
        assert row["measured"]["rounds"] == 2 and row["measured"]["p90_ms"] >= row["measured"]["median_ms"] > 0
    assert raw["protocol"] == fp32["protocol"] and raw["context"].startswith(fp32["context"])
    assert "includes the in-graph preprocessing, uint8 input at the source size" in raw["context"]
    assert "8 x 8 x 1 (H x W x C) at the source size" in raw["includes"]
    assert "resize 8 x 8 -> 12 x 12" in raw["includes"] and "includes" not in fp32
    # the search never timed the graph with its preprocessing: nothing predicted, no error
    assert raw["metric"] is None and raw["predicted_ms"] is None and raw["error_pct"] is None
    # the printed table's context column, wrapped but never cut, and its caption saying what +prep is
    printed = capsys.readouterr().out
    cells = [line.split("│")[4].strip() for line in printed.splitlines() if line.count("│") == 8]
    # (one line on a wide console, "cpu-fp32" / "+prep" on a narrow one: the console's width decides)
    assert "".join(cells).replace(" ", "") == "cpu-fp32cpu-fp32+prep"
    assert "+prep: <arch_id>.raw.onnx, raw uint8 images at the source size" in " ".join(printed.split())


def test_a_raw_graph_that_cannot_be_written_is_on_its_card_and_the_rest_is_exported(run12, tmp_path, capsys):
    """A real failure while writing one model's raw graph (a folder where the exporter writes its temporary file):
    that model's card records it with the reason, it gets no bundle, and everything else is written; the command
    names it and exits 0, as for any format that fails."""
    from hwnas.experiments.export import select_models

    experiment, trials = load_run(run12)
    chosen, _ = select_models(experiment, trials, top_k=2, by="top1")
    blocked, fine = (t.arch.arch_id for t in chosen)
    out = tmp_path / "out"
    in_the_way = out / f"{blocked}.raw.onnx.part"
    in_the_way.mkdir(parents=True)
    (in_the_way / "keep").write_text("mine\n")
    capsys.readouterr()
    assert main(["export", str(run12), "--out", str(out), "--force", "--bundle", "--formats", "onnx", "--top-k", "2",
                 "--by", "top1", "--repeats", "5", "--rounds", "1"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error:" not in err
    card = json.loads((out / f"{blocked}.json").read_text())
    assert card["raw_onnx"]["not_written"] == f"{blocked}.raw.onnx"
    assert card["raw_onnx"]["error"].startswith("IsADirectoryError") and str(in_the_way) in card["raw_onnx"]["error"]
    assert not (out / f"{blocked}.raw.onnx").exists() and not (out / f"{blocked}.bundle.zip").exists()
    assert (in_the_way / "keep").read_text() == "mine\n"  # not the export's: left as it was
    # the rest of that model is there and checked
    assert (out / f"{blocked}.onnx").is_file() and card["onnx"]["max_abs_diff_vs_torch"] < 1e-4
    assert sorted(card["batch_sizes"]) == [f"{blocked}.onnx"]
    rows = {r["name"]: r for r in card["latency"]}
    assert rows["cpu-fp32"]["measured"]["median_ms"] > 0 and rows["cpu-fp32+preprocessing"]["measured"] is None
    assert "no graph that takes raw images was written" in rows["cpu-fp32+preprocessing"]["not_measured"]
    # the other model: every file, its raw graph checked and timed, its bundle
    other = json.loads((out / f"{fine}.json").read_text())
    assert other["raw_onnx"]["max_abs_diff_vs_python_pipeline"] < 1e-4 and (out / f"{fine}.bundle.zip").is_file()
    assert {r["name"]: r for r in other["latency"]}["cpu-fp32+preprocessing"]["measured"]["median_ms"] > 0
    index = json.loads((out / "export.json").read_text())
    assert index["models"] == [blocked, fine] and index["bundles"] == [f"{fine}.bundle.zip"]
    assert "raw images" in index["not_bundled"][blocked] and "IsADirectoryError" in index["not_bundled"][blocked]
    # the command's summary names it
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2, err
    assert warnings[0].startswith(f"warning: {blocked}.raw.onnx not written: IsADirectoryError")
    assert f"so no {blocked}.bundle.zip" in warnings[0] and f"{blocked}.json" in warnings[0]
    assert warnings[1] == ("warning: 1 file(s) of 1 model(s) not written; every other file of the export was")


def test_a_bundle_without_trained_weights_is_refused_unless_random_init(run12, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run12, copy)
    shutil.rmtree(copy / "weights")
    capsys.readouterr()
    assert main(["export", str(copy), "--out", str(tmp_path / "b"), "--bundle", "--no-measure"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no trained weights" in err and "--random-init" in err
    assert not (tmp_path / "b").exists()
    plan = plan_export(copy, out=tmp_path / "b", bundle=True, random_init=True, measure=False)
    assert plan.bundle and plan.with_preprocessing and plan.random_init and not (tmp_path / "b").exists()


def test_out_onto_a_runs_own_files_is_refused_even_with_force(run12, capsys):
    before = {p: p.read_bytes() for p in run12.rglob("*") if p.is_file()}
    for out in (run12, run12 / "weights", run12 / "config.yaml", run12 / "weights" / "sub"):
        capsys.readouterr()
        code = main(["export", str(run12), "--out", str(out), "--bundle", "--force", "--no-measure"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, (out, err)
        assert str(run12.resolve()) in err or str(run12) in err
    assert {p: p.read_bytes() for p in run12.rglob("*") if p.is_file()} == before


def test_preprocessing_needs_the_dataset_and_an_existing_bundle_is_kept(run12, bundled, capsys):
    _, trials = load_run(run12)
    with pytest.raises(RunDirectoryError, match=r"^--bundle needs the experiment's dataset.*config\.yaml"):
        check_export(run12, trials[:1], run12.parent / "nowhere", bundle=True, has_dataset=False)
    card = _card(bundled)
    zipped = bundled / f"{card['arch_id']}.bundle.zip"
    before = zipped.read_bytes()
    capsys.readouterr()
    assert main(["export", str(run12), "--out", str(bundled), "--bundle", "--arch", card["arch_id"],
                 "--formats", "onnx,onnx_int8,torch_export", "--no-measure"]) == 2
    err = capsys.readouterr().err
    assert "exists; not replacing it (pass --force to replace)" in err and err.count("\n") == 1
    assert zipped.read_bytes() == before


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA", "LA", "P", "1", "I;16"])
def test_predict_py_decodes_png_as_pillow_does(mode, tmp_path):
    """The bundle's PNG reader (the standard library's zlib, no Pillow) against Pillow on images large and varied
    enough that every scanline filter appears (Pillow picks them per row)."""
    from PIL import Image

    from hwnas.experiments.export import predict

    rng = np.random.default_rng(1)
    h, w = 37, 53
    ramp = np.add.outer(np.arange(h) * 3, np.arange(w) * 2) % 256
    rgba = np.stack([ramp, np.flipud(ramp), rng.integers(0, 256, (h, w)),
                     np.full((h, w), 200)], axis=2).astype(np.uint8)
    image = Image.fromarray(rgba, "RGBA")
    if mode == "I;16":
        image = Image.fromarray((ramp * 257).astype(np.uint16))
    elif mode == "P":
        image = image.convert("RGB").quantize(colors=64)
    else:
        image = image.convert(mode)
    image.save(tmp_path / "x.png")
    got = predict.read_png((tmp_path / "x.png").read_bytes())
    want = {"L": lambda: np.asarray(image)[:, :, None], "RGB": lambda: np.asarray(image),
            "RGBA": lambda: np.asarray(image)[:, :, :3], "LA": lambda: np.asarray(image.convert("L"))[:, :, None],
            "P": lambda: np.asarray(image.convert("RGB")), "1": lambda: np.asarray(image.convert("L"))[:, :, None],
            "I;16": lambda: (np.asarray(image).astype(np.uint16) >> 8).astype(np.uint8)[:, :, None]}[mode]()
    assert got.dtype == np.uint8 and np.array_equal(got, want)
    grey = predict.to_channels(np.asarray(Image.fromarray(rgba).convert("RGB")), 1)
    assert np.array_equal(grey[:, :, 0], np.asarray(Image.fromarray(rgba).convert("RGB").convert("L")))
    with pytest.raises(predict.BadInput, match="not a PNG"):
        predict.read_png(b"GIF89a")


def _png_with_every_filter(img: np.ndarray) -> bytes:
    """An 8-bit RGB PNG whose row y uses filter type y % 5 (Pillow never writes type 3, Average)."""
    import struct
    import zlib

    h, w, c = img.shape
    rows = img.reshape(h, w * c).astype(np.int32)
    out = bytearray()
    for y in range(h):
        cur, prev = rows[y], rows[y - 1] if y else np.zeros_like(rows[0])
        left = np.concatenate([np.zeros(c, np.int32), cur[:-c]])
        upleft = np.concatenate([np.zeros(c, np.int32), prev[:-c]])
        kind = y % 5
        if kind == 4:
            p = left + prev - upleft
            pa, pb, pc = abs(p - left), abs(p - prev), abs(p - upleft)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, upleft))
        else:
            pred = [np.zeros_like(cur), left, prev, (left + prev) // 2][kind]
        out += bytes([kind]) + ((cur - pred) % 256).astype(np.uint8).tobytes()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(out))) + chunk(b"IEND", b""))


def test_predict_py_undoes_every_png_filter():
    from hwnas.experiments.export import predict

    img = np.random.default_rng(2).integers(0, 256, (11, 7, 3)).astype(np.uint8)
    assert np.array_equal(predict.read_png(_png_with_every_filter(img)), img)


def test_an_image_folder_raw_graph_takes_rgb_at_the_resolution(tmp_path):
    """Image folders are resized by Pillow while read: the raw graph takes 8-bit RGB at the network's resolution
    and does the rest (cast, scale, normalise, transpose), matching the pipeline on real pixels."""
    from PIL import Image

    from hwnas.experiments.export.formats import write_raw_onnx

    root = tmp_path / "images"
    rng = np.random.default_rng(3)
    for c in ("cat", "dog"):
        (root / c).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(rng.integers(0, 256, (20 + i, 30, 3)).astype(np.uint8)).save(root / c / f"{i}.png")
    data = load(DataConfig(name="image_folder", path=str(root)), 16)
    assert data.contract is not None and data.raw_val is not None and data.raw_val.shape[1:] == (16, 16, 3)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 14 * 14, 2)).eval()
    reference = torch_outputs(model, data.x_val)
    record = write_raw_onnx(model, data.contract, tmp_path / "m.raw.onnx", opset=17, dynamic_batch=True,
                            simplify=True, raw_val=data.raw_val, python=reference, y_val=data.y_val)
    assert record["input"]["shape"] == ["batch", 16, 16, 3] and record["input"]["channel_order"] == "RGB"
    assert "Pillow" in record["before_the_graph"] and record["max_abs_diff_vs_python_pipeline"] < 1e-4
    assert "Resize" not in {n.op_type for n in onnx.load(str(tmp_path / "m.raw.onnx")).graph.node}
    # the card says the one size it accepts, and why; another size is refused by onnxruntime, not resized
    accepts = record["input"]["accepts"]
    assert (accepts["height"], accepts["width"]) == (16, 16) and "fixed" in accepts["other_sizes"]
    assert "already be 16 x 16" in accepts["why"] and "Pillow" in accepts["why"]
    with pytest.raises(Exception, match=r"(?i)dimension"):
        ort_session(tmp_path / "m.raw.onnx").run(None, {"image": np.zeros((1, 20, 30, 3), np.uint8)})
