from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from hwnas.errors import InvalidArchitecture
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.fbnet import NUM_LAYERS, OPS, FBNetSpace
from hwnas.testing import check_space, check_space_build


@pytest.fixture(scope="module")
def lut(shared_data):
    with open(shared_data / "hw-nas-bench" / "fbnet_lut.json") as f:
        return json.load(f)


def _lut_sum(table: dict[str, float], keys: list[str]) -> float:
    total = 0.0
    for k in keys:  # in layers() order, as upstream sums them
        total += table[k]
    return total


def test_registered_and_conformant():
    space = SPACES.get("fbnet")()
    assert isinstance(space, FBNetSpace) and space.input_shape == (3, 32, 32)
    check_space(space)
    assert check_space_build(space) < 1e-3


def test_settings():
    cifar, imagenet = FBNetSpace(), FBNetSpace(setting="imagenet")
    assert imagenet.input_shape == (3, 224, 224) and imagenet.num_classes == 1000 and cifar.num_classes == 100
    arch = cifar.from_op_indices([0] * NUM_LAYERS)
    first_of_stage = [0, 1, 5, 9, 13, 17, 21]
    assert [cifar.layer_specs(arch)[i].stride for i in first_of_stage] == [1, 1, 2, 2, 1, 2, 1]
    assert [imagenet.layer_specs(arch)[i].stride for i in first_of_stage] == [1, 2, 2, 2, 1, 2, 1]
    assert [s.resolution for s in imagenet.layer_specs(arch)][::4] == [112, 56, 28, 14, 14, 7]
    assert cifar.size() == 9**22
    with pytest.raises(ValueError):
        FBNetSpace(setting="imagenet16")


def test_layer_keys_are_exactly_the_lut_keys(lut):
    """Every op at every position, both settings (and the 10-class head): the keys are the LUT's 225, no more."""
    seen: set[str] = set()
    for setting, classes in (("cifar100", None), ("cifar100", 10), ("imagenet", None)):
        space = FBNetSpace(setting=setting, num_classes=classes)
        for op in range(len(OPS)):
            keys = space.layers(space.from_op_indices([op] * NUM_LAYERS))
            assert len(keys) == 1 + NUM_LAYERS + 3
            seen.update(keys)
    for metric, table in lut.items():
        assert seen == set(table), metric


def test_lut_sum_reproduces_the_official_api_exactly(shared_data, lut):
    with open(shared_data / "hw-nas-bench" / "reference_values_from_example_notebook.json") as f:
        records = [r for r in json.load(f)["records"] if r["search_space"] == "fbnet"]
    assert len(records) == 6
    checked = 0
    for rec in records:
        space = FBNetSpace(setting="cifar100" if rec["dataset"] == "cifar100" else "imagenet")
        keys = space.layers(space.from_op_indices(rec["arch"]))
        for metric, value in rec["metrics"].items():
            if metric in lut:  # average_hw_metric is a product, not a LUT metric
                assert _lut_sum(lut[metric], keys) == value, (rec["arch"], rec["dataset"], metric)
                checked += 1
    assert checked == 6 * 8


def test_lut_sum_matches_help_pixel3_for_all_5000_archs(shared_data, lut):
    space = FBNetSpace()
    with open(shared_data / "help-latency" / "fbnet_latency.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5000
    for row in rows:
        arch = space.from_str(row["arch_str"])
        assert arch == space.from_str(row["op_idx_list"])
        assert space.to_str(arch) == row["arch_str"]
        assert _lut_sum(lut["pixel3_latency"], space.layers(arch)) == float(row["pixel3"])


@pytest.mark.parametrize(
    "text, message",
    [
        ("k3_e1 " * 21, r"expected 22 ops, got 21"),
        ("k3_e1 " * 5 + "k7_e1 " + "skip " * 16, r"layer 5 \(gene l05\) 'k7_e1' is not an op"),
        ("0 " * 21 + "9", r"layer 21 \(gene l21\) '9' is not an op"),
    ],
)
def test_bad_strings_name_the_layer(text, message):
    with pytest.raises(InvalidArchitecture, match=message):
        FBNetSpace().from_str(text)


def test_build_uses_timm_blocks_grouped_convs_and_skip_projections():
    import torch
    from timm.models._efficientnet_blocks import InvertedResidual

    from hwnas.search_spaces.fbnet_modules import GroupedInvertedResidual

    space = FBNetSpace(num_classes=10)
    ops = ["k3_e1_g2", "skip", "skip", "k5_e6", "k3_e3"] + ["skip"] * 16 + ["k5_e1_g2"]
    model = space.build(space.from_str(" ".join(ops)))
    blocks = list(model.blocks)
    assert len(blocks) == NUM_LAYERS
    assert isinstance(blocks[0], GroupedInvertedResidual) and blocks[0].conv_pw.groups == 2
    assert blocks[0].conv_pwl.groups == 2 and blocks[0].has_skip  # 16 -> 16, stride 1
    assert isinstance(blocks[1], torch.nn.Sequential)  # skip 16 -> 24: 1x1 projection
    assert isinstance(blocks[2], torch.nn.Identity)  # skip 24 -> 24
    assert type(blocks[3]) is InvertedResidual and blocks[3].conv_dw.kernel_size == (5, 5)
    assert blocks[3].conv_pw.out_channels == 24 * 6  # expansion of the input channels
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    params = sum(p.numel() for p in model.parameters())
    smaller = space.build(space.from_str(" ".join(ops).replace("k5_e6", "k5_e1", 1)))
    assert sum(p.numel() for p in smaller.parameters()) < params


def test_largest_member_exports_to_onnx(tmp_path):
    import torch

    from hwnas.latency.onnx_export import export_onnx, onnx_max_abs_diff

    space = FBNetSpace()
    model = space.build(space.from_op_indices([OPS.index("k5_e6")] * NUM_LAYERS))
    gen = torch.Generator().manual_seed(0)
    for m in model.modules():  # set BN statistics from data so the output depends on the input
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.randn(4, 3, 32, 32, generator=gen))
    model.eval()
    x = torch.randn(2, 3, 32, 32, generator=gen)
    with torch.no_grad():
        y = model(x)
    assert float((y[0] - y[1]).abs().max()) > 1e-3
    path = export_onnx(model, space.input_shape, tmp_path / "fbnet.onnx")
    assert onnx_max_abs_diff(model, path, x[:1].numpy()) < 1e-4


def test_sampling_is_uniform_per_layer():
    space = FBNetSpace()
    rng = np.random.default_rng(0)
    counts = np.zeros(len(OPS))
    for _ in range(300):
        for op in space.op_indices(space.sample(rng)):
            counts[op] += 1
    assert counts.min() > 0.7 * counts.mean()
