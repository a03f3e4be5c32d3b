"""The once-for-all MobileNetV3 space: conformance, structure, OFA's file formats, Note10 table sums."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture, MissingLatencyEntry
from hwnas.latency.published import load_ofa_lut, sum_ofa_lut
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.ofa import OFA_RESOLUTIONS, OFAMobileNetV3Space, make_divisible
from hwnas.testing import check_space, check_space_build

WIDE = tuple(range(128, 261, 4))  # reaches the published nets fine-tuned above 224 px


def _genes(depths=(2, 2, 2, 2, 2), r=128, ks=3, e=3) -> dict[str, int]:
    genes = {"r": r}
    for s, d in enumerate(depths):
        genes[f"d{s}"] = d
        for b in range(4):
            genes[f"ks{4 * s + b}"] = ks if b < d else 0
            genes[f"e{4 * s + b}"] = e if b < d else 0
    return genes


def _specialized(shared: Path) -> list[Path]:
    return sorted((shared / "ofa-lut" / "ofa_specialized").iterdir())


def _space_for(folder: Path) -> OFAMobileNetV3Space:
    """The space (width) a published MobileNetV3 net.config belongs to, read from its first conv."""
    cfg = json.loads((folder / "net.config").read_text())
    return OFAMobileNetV3Space(width_mult=1.2 if cfg["first_conv"]["out_channels"] == 24 else 1.0, resolutions=WIDE)


# -- the space itself -----------------------------------------------------------------------------------
def test_registered_and_passes_conformance():
    assert SPACES.get("ofa_mbv3") is OFAMobileNetV3Space
    check_space(OFAMobileNetV3Space(), samples=40)
    check_space(OFAMobileNetV3Space(width_mult=1.2), samples=10, seed=3)


def test_genes_are_ofas_ks_e_d_r():
    space = OFAMobileNetV3Space()
    names = [g.name for g in space.genes()]
    assert len(names) == 1 + 5 + 2 * 20
    expected = {"r"} | {f"d{s}" for s in range(5)} | {f"ks{i}" for i in range(20)} | {f"e{i}" for i in range(20)}
    assert set(names) == expected
    gm = {g.name: g for g in space.genes()}
    assert gm["r"].choices == OFA_RESOLUTIONS and OFA_RESOLUTIONS[0] == 128 and OFA_RESOLUTIONS[-1] == 224
    assert len(OFA_RESOLUTIONS) == 25
    assert gm["ks7"].choices == (3, 5, 7) and gm["e7"].choices == (3, 4, 6) and gm["d1"].choices == (2, 3, 4)
    assert space.encode(space.sample(np.random.default_rng(0))).shape == (25 + 5 * 3 + 40 * 3,)


def test_size_is_exact():
    per_stage = 9**2 + 9**3 + 9**4  # 7371 settings of one stage
    assert OFAMobileNetV3Space().size() == 25 * per_stage**5
    assert 2.1e19 < per_stage**5 < 2.2e19  # OFA's "about 2 x 10^19" sub-networks at one resolution
    assert OFAMobileNetV3Space(resolutions=(224,)).size() == per_stage**5


def test_inactive_blocks_are_zeroed_and_share_an_id():
    space = OFAMobileNetV3Space()
    genes = _genes(depths=(2, 4, 3, 2, 2))
    leftovers = dict(genes, ks2=7, e2=6, ks3=5, e15=4)  # blocks beyond d0=2 and d3=2 hold leftovers
    a, b = space.canonicalize(Architecture("ofa_mbv3", genes)), space.canonicalize(Architecture("ofa_mbv3", leftovers))
    assert a == b and a.arch_id == b.arch_id
    assert a.genes["ks2"] == 0 and a.genes["e15"] == 0 and a.genes["ks5"] == 3
    with pytest.raises(InvalidArchitecture, match=r"ks0=0 is out of range"):  # an active block cannot be 0
        space.validate(Architecture("ofa_mbv3", dict(genes, ks0=0)))


def test_input_shape_follows_the_resolution_gene():
    space = OFAMobileNetV3Space()
    arch = space.canonicalize(Architecture("ofa_mbv3", _genes(r=160)))
    assert space.input_shape_of(arch) == (3, 160, 160)
    assert space.input_shape == (3, 224, 224)  # the largest: the one shape every member accepts


def test_macro_structure_and_width_multiplier():
    w10, w12 = OFAMobileNetV3Space(), OFAMobileNetV3Space(width_mult=1.2)
    assert (w10.first_conv_width, w10.stage_widths, w10.final_expand_width, w10.feature_mix_width) == (
        16, (24, 40, 80, 112, 160), 960, 1280)
    assert (w12.first_conv_width, w12.stage_widths, w12.final_expand_width, w12.feature_mix_width) == (
        24, (32, 48, 96, 136, 192), 1152, 1536)
    arch = w10.canonicalize(Architecture("ofa_mbv3", _genes(depths=(2, 3, 2, 4, 2), r=224, e=4)))
    blocks = w10.blocks(arch)
    assert len(blocks) == 1 + 13
    assert [b.stride for b in blocks if b.index in (0, 4, 8, 12, 16)] == [2, 2, 2, 1, 2]
    assert {b.stage for b in blocks if b.se} == {1, 3, 4} and {b.stage for b in blocks if b.hswish} == {2, 3, 4}
    assert [b.skip for b in blocks[:4]] == [True, False, True, False]
    assert blocks[-1].out_size == 7 and blocks[-1].out_channels == 160
    assert blocks[5].mid_channels == 40 * 4


def test_layers_are_ofa_table_keys():
    space = OFAMobileNetV3Space()
    arch = space.canonicalize(Architecture("ofa_mbv3", _genes(depths=(2, 2, 2, 2, 3), r=176, ks=5, e=6)))
    keys = space.layers(arch)
    assert len(keys) == 1 + 1 + 11 + 4
    assert keys[0] == "Conv-input:176x176x3-output:88x88x16"
    assert keys[1] == "expanded_conv-input:88x88x16-output:88x88x16-expand:16-kernel:3-stride:1-idskip:1-se:0-hs:0"
    assert keys[2] == "expanded_conv-input:88x88x16-output:44x44x24-expand:96-kernel:5-stride:2-idskip:0-se:0-hs:0"
    assert keys[-4:] == [
        "Conv_1-input:6x6x160-output:6x6x960",
        "AvgPool2D-input:6x6x960-output:1x1x960",
        "Conv_2-input:1x1x960-output:1x1x1280",
        "Logits-input:1x1x1280-output:1000",
    ]


def test_build_exports_to_onnx_at_its_resolution():
    import torch

    space = OFAMobileNetV3Space(num_classes=10)
    genes = _genes(depths=(2, 2, 2, 2, 2), r=128)
    genes.update(ks0=7, e0=6, ks4=5, e4=4, ks12=7, e12=6, ks17=5, e17=6)
    arch = space.canonicalize(Architecture("ofa_mbv3", genes))
    assert check_space_build(space, arch) < 1e-3
    model = space.build(arch).eval()
    with torch.no_grad():
        assert model(torch.zeros(1, *space.input_shape_of(arch))).shape == (1, 10)
    # SE in every block of the 40/112/160-channel stages, reduced as OFA does: make_divisible(mid / 4)
    se = [m for m in model.modules() if type(m).__name__ == "SqueezeExcite"]
    assert len(se) == 6
    assert se[0].conv_reduce.out_channels == make_divisible(24 * 4 / 4)
    depthwise = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d) and m.groups > 1]
    plan = space.blocks(arch)
    assert [c.kernel_size[0] for c in depthwise] == [b.kernel for b in plan]
    assert [c.kernel_size[0] for c in depthwise[:6]] == [3, 7, 3, 5, 3, 3]
    assert [(c.in_channels, c.stride[0]) for c in depthwise] == [(b.mid_channels, b.stride) for b in plan]
    skips = [m.has_skip for m in model.blocks]
    assert skips == [b.skip for b in plan]


# -- published data -------------------------------------------------------------------------------------
def test_note10_table_prices_the_published_30ms_net_at_29_97_ms(shared_data):
    folder = shared_data / "ofa-lut" / "ofa_specialized" / "note10_lat-30ms_top1-78.4_finetune-75"
    space = OFAMobileNetV3Space(width_mult=1.2)
    arch = space.from_net_config(folder)
    assert arch.genes["r"] == 224
    lut = load_ofa_lut(shared_data / "ofa-lut" / "note10" / "224_lookup_table.yaml")
    assert round(sum_ofa_lut(lut, space.layers(arch)), 2) == 29.97


def test_note10_table_other_published_nets(shared_data):
    """Looser: the 220-px w1.2 nets priced at 224 px land within 5 % of their published latency;
    the w1.0 nets are not covered by this (w1.2) table, and that is an error naming the keys."""
    lut224 = load_ofa_lut(shared_data / "ofa-lut" / "note10" / "224_lookup_table.yaml")
    for folder in _specialized(shared_data):
        name = folder.name
        if not name.startswith("note10_") or name.startswith("note10_lat-30ms"):
            continue
        published = float(re.search(r"lat-(\d+)ms", name).group(1))
        space = _space_for(folder)
        arch = space.from_net_config(folder)
        if space.params.width_mult == 1.0:
            lut = load_ofa_lut(shared_data / "ofa-lut" / "note10" / f"{arch.genes['r']}_lookup_table.yaml") \
                if arch.genes["r"] in (160, 176, 192, 208, 224) else lut224
            with pytest.raises(MissingLatencyEntry, match=r"Conv-input:\d+x\d+x3-output:\d+x\d+x16"):
                sum_ofa_lut(lut, space.layers(arch), table=name)
        elif arch.genes["r"] == 220:
            priced = sum_ofa_lut(lut224, space.layers(arch.replace(r=224)))
            assert abs(priced - published) / published < 0.05, (name, priced)


def test_every_published_net_config_parses_or_is_refused(shared_data):
    folders = _specialized(shared_data)
    assert len(folders) == 50
    parsed, refused, default_ok = 0, 0, 0
    for folder in folders:
        cfg = json.loads((folder / "net.config").read_text())
        if cfg["name"] != "MobileNetV3":
            with pytest.raises(InvalidArchitecture, match="'ProxylessNASNets' network, not an OFA MobileNetV3"):
                OFAMobileNetV3Space().from_net_config(folder)
            refused += 1
            continue
        space = _space_for(folder)
        arch = space.from_net_config(folder)
        image_size = json.loads((folder / "run.config").read_text())["image_size"]
        assert arch.genes["r"] == image_size
        assert space.to_net_config(arch) == cfg, folder.name  # writes OFA's own file back exactly
        assert space.layers(arch)[0].startswith(f"Conv-input:{image_size}x{image_size}x3-")
        parsed += 1
        if image_size <= 224 and space.params.width_mult == 1.0:
            assert OFAMobileNetV3Space().from_net_config(folder) == arch
            default_ok += 1
    assert (parsed, refused, default_ok) == (34, 16, 24)


def test_ofa_archs_json_round_trips(shared_data):
    """Every HELP arch parses, validates and writes back identically once its inactive entries are zeroed.

    HELP's file keeps the leftover ks/e values a sampler drew for blocks beyond each stage's depth;
    the canonical form (and once-for-all's own encoder) writes those as 0.
    """
    data = json.loads((shared_data / "help-latency" / "ofa_archs.json").read_text())
    archs = data["arch"]
    assert len(archs) == 5000
    space = OFAMobileNetV3Space()
    ids = set()
    for k, entry in enumerate(archs):
        arch = space.from_ofa_dict(entry, where=f"ofa_archs.json arch[{k}]")
        space.validate(arch)
        expected = copy.deepcopy(entry)
        for s, depth in enumerate(entry["d"]):
            for b in range(depth, 4):
                expected["ks"][4 * s + b] = 0
                expected["e"][4 * s + b] = 0
        assert space.to_ofa_dict(arch) == expected
        assert space.from_ofa_dict(space.to_ofa_dict(arch)) == arch
        ids.add(arch.arch_id)
    assert len(ids) == 5000


# -- bad input ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["ks"].__setitem__(7, 9), r"ks7=9 is out of range \(choices: 3, 5, 7\)"),
        (lambda d: d["e"].__setitem__(0, 5), r"e0=5 is out of range \(choices: 3, 4, 6\)"),
        (lambda d: d["d"].__setitem__(2, 5), r"d2=5 is out of range \(choices: 2, 3, 4\)"),
        (lambda d: d.__setitem__("r", 226), r"r=226 is out of range"),
        (lambda d: d.__setitem__("r", [224, 192]), r"r: has 2 values, expected 1"),
        (lambda d: d["ks"].pop(), r"ks: has 19 values, expected 20"),
        (lambda d: d["e"].__setitem__(3, 4.5), r"e\[3\]: expected an integer, got 4.5"),
        (lambda d: d.pop("d"), r"missing key\(s\) d"),
        (lambda d: d.__setitem__("w", 1), r"unknown key\(s\) w"),
        (lambda d: d.__setitem__("wid", [1]), r"wid=\[1\]"),
    ],
)
def test_bad_ofa_dicts_name_the_problem(change, message):
    good = {"ks": [3] * 20, "e": [4] * 20, "d": [4] * 5, "r": 192}
    OFAMobileNetV3Space().from_ofa_dict(good)
    bad = copy.deepcopy(good)
    change(bad)
    with pytest.raises(InvalidArchitecture, match=message):
        OFAMobileNetV3Space().from_ofa_dict(bad, where="arch[3]")


def test_ofa_dict_accepts_once_for_all_forms():
    space = OFAMobileNetV3Space()
    plain = space.from_ofa_dict({"ks": [5] * 20, "e": [6] * 20, "d": [3] * 5, "r": 200})
    assert space.from_ofa_dict({"wid": None, "ks": [5] * 20, "e": [6] * 20, "d": [3] * 5, "r": [200]}) == plain
    assert space.from_ofa_dict({"ks": [5] * 20, "e": [6] * 20, "d": [3] * 5, "image_size": 200}) == plain
    assert space.to_ofa_dict(plain, resolution_key="image_size")["image_size"] == 200


def _config_30ms(shared_data: Path) -> dict:
    folder = shared_data / "ofa-lut" / "ofa_specialized" / "note10_lat-30ms_top1-78.4_finetune-75"
    return json.loads((folder / "net.config").read_text())


def test_bad_net_configs_name_the_problem(shared_data, tmp_path):
    w12 = OFAMobileNetV3Space(width_mult=1.2)
    cfg = _config_30ms(shared_data)

    bad = copy.deepcopy(cfg)
    bad["blocks"][4]["mobile_inverted_conv"]["kernel_size"] = 9  # d0=2, so stage 1 block 1: OFA's block 5
    with pytest.raises(InvalidArchitecture, match=r"ks5=9 is out of range \(choices: 3, 5, 7\)"):
        w12.from_net_config(bad, image_size=224)
    with pytest.raises(InvalidArchitecture, match=r"r=260 is out of range"):
        w12.from_net_config(cfg, image_size=260)
    with pytest.raises(InvalidArchitecture, match=r"first_conv.out_channels is 24, expected 16 \(a w1.2 network"):
        OFAMobileNetV3Space().from_net_config(cfg, image_size=224)

    five = copy.deepcopy(cfg)  # a fifth block in the last stage
    five["blocks"].insert(-1, copy.deepcopy(five["blocks"][-1]))
    assert sum(b["mobile_inverted_conv"]["out_channels"] == 192 for b in five["blocks"]) == 5
    with pytest.raises(InvalidArchitecture, match=r"stage 4 \(192 channels\) has 5 block\(s\): d4=5 is out of range"):
        w12.from_net_config(five, image_size=224)

    wrong_act = copy.deepcopy(cfg)
    wrong_act["blocks"][2]["mobile_inverted_conv"]["act_func"] = "h_swish"
    with pytest.raises(InvalidArchitecture, match=r"blocks\[2\] \(stage 0, block 1\) act_func is 'h_swish'"):
        w12.from_net_config(wrong_act, image_size=224)

    (tmp_path / "net.config").write_text(json.dumps(cfg))
    with pytest.raises(InvalidArchitecture, match=r"no resolution: pass image_size or keep run.config"):
        w12.from_net_config(tmp_path)
    assert w12.from_net_config(tmp_path, image_size=192).genes["r"] == 192
    (tmp_path / "run.config").write_text("{not json")
    with pytest.raises(InvalidArchitecture, match=r"run.config: not valid JSON"):
        w12.from_net_config(tmp_path / "net.config")


def test_params_are_checked():
    with pytest.raises(ValueError, match=r"width_mult must be one of 1\.0, 1\.2"):
        OFAMobileNetV3Space(width_mult=1.1)
    with pytest.raises(ValueError, match="strictly increasing"):
        OFAMobileNetV3Space(resolutions=(224, 128))
    assert OFAMobileNetV3Space(width_mult=1).params.width_mult == 1.0
    assert OFAMobileNetV3Space(width_mult=1.2).drop_rate == 0.2 and OFAMobileNetV3Space().drop_rate == 0.1
