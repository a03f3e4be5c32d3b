"""Once-for-all's MobileNetV3 space (Cai et al., ICLR 2020), registered as ``ofa_mbv3``.

The macro structure is fixed: a 3x3 stride-2 first conv (16 channels, hard-swish), a fixed first block
(3x3 depthwise-separable, 16 channels), five elastic stages of 24/40/80/112/160 channels (strides
2/2/2/1/2; squeeze-excite in the 40, 112 and 160 stages; hard-swish in the last three), a final 1x1
expand to 960 channels, global pooling, a 1x1 feature mix to 1280 and a linear classifier. Channels
are scaled by ``width_mult`` and made divisible by 8 (w1.2: 24 | 24, 32/48/96/136/192, 1152, 1536).

Genes (all categorical; the integers of OFA's ``{ks, e, d, r}`` dicts):

- ``r``: input resolution, 128..224 step 4 (25 values; the ``resolutions`` parameter can change it);
- ``d0`` .. ``d4``: depth of each stage, {2, 3, 4};
- ``ks0`` .. ``ks19`` and ``e0`` .. ``e19``: depthwise kernel {3, 5, 7} and expand ratio {3, 4, 6} of
  block ``i = 4 * stage + position`` (OFA's own indexing of its 20 elastic blocks).

A block at ``position >= d{stage}`` is inactive: its ``ks``/``e`` genes are 0 in the canonical form,
which is also what once-for-all's own arch encoder writes for skipped blocks
(``MobileNetArchEncoder.feature2arch``).

The width multiplier is a space *parameter*, not a gene: once-for-all trained one supernet per width
(``ofa_mbv3_d234_e346_k357_w1.0`` and ``..._w1.2``), HELP's ``ofa_archs.json`` holds w1.0 networks only
and the published Note10 tables cover only w1.2, so an experiment searches one width at a time.

Readers and writers: :meth:`OFAMobileNetV3Space.from_ofa_dict` / :meth:`~OFAMobileNetV3Space.to_ofa_dict`
for the ``{ks, e, d, r}`` dicts (HELP's ``ofa_archs.json``, once-for-all's search code), and
:meth:`~OFAMobileNetV3Space.from_net_config` / :meth:`~OFAMobileNetV3Space.to_net_config` for
once-for-all's full ``net.config`` network descriptions.

:meth:`~OFAMobileNetV3Space.layers` returns once-for-all's latency-table keys, so summing a published
table (:func:`hwnas.latency.published.sum_ofa_lut`) prices an architecture exactly as once-for-all's
``MBv3LatencyTable.predict_network_latency_given_config`` does.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from hwnas.architecture import Architecture
from hwnas.errors import InvalidArchitecture
from hwnas.search_spaces.base import (
    CategoricalSpace,
    Gene,
    LayerKey,
    SpaceParams,
    UnitCatalog,
    UnitSpec,
    per_arch_cache,
)

if TYPE_CHECKING:  # torch stays out of import time
    import torch.nn as nn

log = logging.getLogger(__name__)

N_STAGES = 5
MAX_DEPTH = 4
N_BLOCKS = N_STAGES * MAX_DEPTH
KERNEL_CHOICES: tuple[int, ...] = (3, 5, 7)
EXPAND_CHOICES: tuple[int, ...] = (3, 4, 6)
DEPTH_CHOICES: tuple[int, ...] = (2, 3, 4)
OFA_RESOLUTIONS: tuple[int, ...] = tuple(range(128, 225, 4))
"""The resolutions once-for-all's elastic-resolution training samples: 128, 132, ..., 224."""
WIDTH_MULTS: tuple[float, ...] = (1.0, 1.2)

# OFA MobileNetV3 macro structure at width 1.0
FIRST_CONV_BASE = 16
FIRST_BLOCK_BASE = 16
STAGE_BASE_WIDTHS: tuple[int, ...] = (24, 40, 80, 112, 160)
STAGE_STRIDES: tuple[int, ...] = (2, 2, 2, 1, 2)
STAGE_SE: tuple[bool, ...] = (False, True, False, True, True)
STAGE_HSWISH: tuple[bool, ...] = (False, False, True, True, True)
FINAL_EXPAND_BASE = 960
FEATURE_MIX_BASE = 1280
OFA_DROPOUT: dict[float, float] = {1.0: 0.1, 1.2: 0.2}
"""Classifier dropout of once-for-all's published w1.0 and w1.2 networks."""


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round ``value`` to the nearest multiple of ``divisor``, never going below 90 % of it (OFA's rule)."""
    new = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if new < 0.9 * value:
        new += divisor
    return new


def block_index(stage: int, position: int) -> int:
    """OFA's index (0..19) of the block at ``position`` (0..3) of ``stage`` (0..4)."""
    return stage * MAX_DEPTH + position


@dataclass(frozen=True)
class OFABlock:
    """One inverted-residual block of a concrete network, with the shapes the latency table keys on.

    Attributes:
        index: OFA's elastic-block index 0..19, or -1 for the fixed first block.
        stage: Stage 0..4, or -1 for the first block.
        in_channels: Input channels.
        out_channels: Output channels.
        kernel: Depthwise kernel size.
        expand: Expand ratio (1 for the first block).
        mid_channels: Channels of the depthwise conv.
        stride: Stride of the depthwise conv.
        in_size: Input height (= width).
        out_size: Output height (= width).
        se: Whether the block has squeeze-excite.
        hswish: Whether the block uses hard-swish (else ReLU).
        skip: Whether the block has an identity shortcut.
    """

    index: int
    stage: int
    in_channels: int
    out_channels: int
    kernel: int
    expand: int
    mid_channels: int
    stride: int
    in_size: int
    out_size: int
    se: bool
    hswish: bool
    skip: bool

    def lut_key(self) -> LayerKey:
        """Once-for-all's latency-table key of this block."""
        return (
            f"expanded_conv-input:{self.in_size}x{self.in_size}x{self.in_channels}"
            f"-output:{self.out_size}x{self.out_size}x{self.out_channels}"
            f"-expand:{self.mid_channels}-kernel:{self.kernel}-stride:{self.stride}"
            f"-idskip:{int(self.skip)}-se:{int(self.se)}-hs:{int(self.hswish)}"
        )


class OFAMobileNetV3Params(SpaceParams):
    """Parameters of the once-for-all MobileNetV3 space."""

    width_mult: float = Field(1.0, description="channel multiplier of the supernet: 1.0 or 1.2 (OFA's two)")
    resolutions: tuple[int, ...] = Field(OFA_RESOLUTIONS, description="choices of the resolution gene r")
    in_chans: int = Field(3, gt=0)
    num_classes: int = Field(1000, gt=1)
    drop_rate: float | None = Field(
        None, ge=0.0, lt=1.0, description="classifier dropout; None: OFA's (0.1 at w1.0, 0.2 at w1.2)"
    )

    @field_validator("width_mult")
    @classmethod
    def _known_width(cls, value: float) -> float:
        for w in WIDTH_MULTS:
            if math.isclose(value, w):
                return w
        raise ValueError(f"width_mult must be one of {', '.join(str(w) for w in WIDTH_MULTS)} (OFA's supernets)")

    @field_validator("resolutions")
    @classmethod
    def _sorted_positive(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or min(value) < 32 or max(value) > 4096:
            raise ValueError("resolutions must be a non-empty list of integers from 32 to 4096")
        if list(value) != sorted(set(value)):
            raise ValueError("resolutions must be strictly increasing")
        return value


class OFAMobileNetV3Space(UnitCatalog, CategoricalSpace):
    """Once-for-all's MobileNetV3 space: per stage depth, per block kernel and expand, resolution.

    Args:
        **params: Fields of :class:`OFAMobileNetV3Params` (``width_mult``, ``resolutions``,
            ``in_chans``, ``num_classes``, ``drop_rate``).
    """

    name = "ofa_mbv3"
    Params = OFAMobileNetV3Params
    params: OFAMobileNetV3Params

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        w = self.params.width_mult
        self.first_conv_width = make_divisible(FIRST_CONV_BASE * w)
        self.first_block_width = make_divisible(FIRST_BLOCK_BASE * w)
        self.stage_widths: tuple[int, ...] = tuple(make_divisible(c * w) for c in STAGE_BASE_WIDTHS)
        self.final_expand_width = make_divisible(FINAL_EXPAND_BASE * w)
        self.feature_mix_width = make_divisible(FEATURE_MIX_BASE * w)
        self.drop_rate = self.params.drop_rate if self.params.drop_rate is not None else OFA_DROPOUT[w]
        genes: list[Gene] = [Gene("r", tuple(self.params.resolutions))]
        for s in range(N_STAGES):
            genes.append(Gene(f"d{s}", DEPTH_CHOICES))
            for b in range(MAX_DEPTH):
                i = block_index(s, b)
                genes.append(Gene(f"ks{i}", KERNEL_CHOICES, inactive=0))
                genes.append(Gene(f"e{i}", EXPAND_CHOICES, inactive=0))
        self._genes: tuple[Gene, ...] = tuple(genes)

    # -- genes -----------------------------------------------------------------------------------
    def genes(self) -> list[Gene]:
        """``r``, then per stage ``d{s}`` followed by ``ks{i}``, ``e{i}`` of its four blocks."""
        return list(self._genes)

    def active_genes(self, genes: Mapping[str, Any]) -> set[str]:
        """``r``, every ``d{s}``, and ``ks{i}``/``e{i}`` of the blocks within their stage's depth."""
        active = {"r"}
        for s in range(N_STAGES):
            active.add(f"d{s}")
            depth = genes.get(f"d{s}", 0)
            depth = depth if isinstance(depth, int) else 0
            for b in range(min(max(depth, 0), MAX_DEPTH)):
                i = block_index(s, b)
                active.update((f"ks{i}", f"e{i}"))
        return active

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """(channels, height, width) at the *largest* resolution of the space.

        The resolution is a gene here, so one space has no single input shape: use
        :meth:`input_shape_of` for an architecture's own. This property is the shape every member
        accepts (the network ends in global pooling), for callers that need one shape per space.
        """
        r = max(self.params.resolutions)
        return (self.params.in_chans, r, r)

    def input_shape_of(self, arch: Architecture) -> tuple[int, int, int]:
        """(channels, r, r) of this architecture's input."""
        r = _gene(self.canonicalize(arch).genes, "r")
        return (self.params.in_chans, r, r)

    def resolution_choices(self) -> tuple[int, ...]:
        """The choices of the resolution gene ``r``."""
        return tuple(self.params.resolutions)

    def resolution_of(self, arch: Architecture) -> int:
        """The input resolution (gene ``r``) of ``arch``."""
        return _gene(arch.genes, "r")

    def at_resolution(self, arch: Architecture, resolution: int) -> Architecture:
        """``arch`` at another input resolution (every other gene kept)."""
        return arch.replace(r=int(resolution))

    def size(self) -> int:
        """Exact number of canonical architectures: ``len(r) * (sum_d 9**d) ** 5`` (25 * 7371**5 by default)."""
        per_block = len(KERNEL_CHOICES) * len(EXPAND_CHOICES)
        per_stage = sum(per_block**d for d in DEPTH_CHOICES)
        return len(self.params.resolutions) * per_stage**N_STAGES

    # -- the concrete network ----------------------------------------------------------------------
    def blocks(self, arch: Architecture) -> list[OFABlock]:
        """Every block of the network, the fixed first block included, with its shapes at resolution ``r``."""
        arch = self.canonicalize(arch)
        g = arch.genes
        size = (_gene(g, "r") + 1) // 2
        c0, c1 = self.first_conv_width, self.first_block_width
        out: list[OFABlock] = [
            OFABlock(index=-1, stage=-1, in_channels=c0, out_channels=c1, kernel=3, expand=1, mid_channels=c0,
                     stride=1, in_size=size, out_size=size, se=False, hswish=False, skip=c0 == c1)
        ]
        cin = c1
        for s in range(N_STAGES):
            cout = self.stage_widths[s]
            for b in range(_gene(g, f"d{s}")):
                i = block_index(s, b)
                stride = STAGE_STRIDES[s] if b == 0 else 1
                expand = _gene(g, f"e{i}")
                out_size = (size - 1) // stride + 1
                out.append(OFABlock(
                    index=i, stage=s, in_channels=cin, out_channels=cout, kernel=_gene(g, f"ks{i}"),
                    expand=expand, mid_channels=make_divisible(round(cin * expand)), stride=stride,
                    in_size=size, out_size=out_size, se=STAGE_SE[s], hswish=STAGE_HSWISH[s],
                    skip=stride == 1 and cin == cout,
                ))
                size, cin = out_size, cout
        return out

    @per_arch_cache
    def layers(self, arch: Architecture) -> list[LayerKey]:
        """Once-for-all's latency-table keys of the network at its resolution, in network order.

        First conv (``Conv-...``), every block including the fixed first one (``expanded_conv-...``,
        ``expand`` being the depthwise channel count as in OFA's tables), final expand (``Conv_1-...``),
        global pooling (``AvgPool2D-...``), feature mix (``Conv_2-...``) and classifier (``Logits-...``):
        the terms once-for-all's ``MBv3LatencyTable`` sums.
        """
        arch = self.canonicalize(arch)
        r = _gene(arch.genes, "r")
        h = (r + 1) // 2
        blocks = self.blocks(arch)
        f, c_last = blocks[-1].out_size, blocks[-1].out_channels
        fe, fm = self.final_expand_width, self.feature_mix_width
        keys = [f"Conv-input:{r}x{r}x{self.params.in_chans}-output:{h}x{h}x{self.first_conv_width}"]
        keys.extend(b.lut_key() for b in blocks)
        keys.append(f"Conv_1-input:{f}x{f}x{c_last}-output:{f}x{f}x{fe}")
        keys.append(f"AvgPool2D-input:{f}x{f}x{fe}-output:1x1x{fe}")
        keys.append(f"Conv_2-input:1x1x{fe}-output:1x1x{fm}")
        keys.append(f"Logits-input:1x1x{fm}-output:{self.params.num_classes}")
        return keys

    def _plan_at(self, r: int, depths: Sequence[int], kernel: int = 3, expand: int = 3) -> list[OFABlock]:
        """The blocks of the network at resolution ``r`` with the given stage depths and one kernel/expand."""
        genes: dict[str, int] = {"r": r}
        for s, d in enumerate(depths):
            genes[f"d{s}"] = d
            for b in range(MAX_DEPTH):
                genes[f"ks{block_index(s, b)}"] = kernel if b < d else 0
                genes[f"e{block_index(s, b)}"] = expand if b < d else 0
        return self.blocks(Architecture(self.name, genes))

    def _unit_specs(self) -> dict[LayerKey, UnitSpec]:
        """Per resolution of the space: first conv, first block, every (kernel, expand) of each stage's first
        and later blocks, final expand, pooling; then the feature mix and classifier (resolution-free)."""
        p = self.params
        c0, fe, fm = self.first_conv_width, self.final_expand_width, self.feature_mix_width
        units: dict[LayerKey, UnitSpec] = {}
        for r in p.resolutions:
            h = (r + 1) // 2
            units[f"Conv-input:{r}x{r}x{p.in_chans}-output:{h}x{h}x{c0}"] = ("first_conv", None, (p.in_chans, r, r))
            for k in KERNEL_CHOICES:
                for e in EXPAND_CHOICES:
                    for bl in self._plan_at(r, (2,) * N_STAGES, k, e):  # each stage's first and second block
                        units.setdefault(bl.lut_key(), ("block", bl, (bl.in_channels, bl.in_size, bl.in_size)))
            last = self._plan_at(r, (2,) * N_STAGES)[-1]
            f, c_last = last.out_size, last.out_channels
            units[f"Conv_1-input:{f}x{f}x{c_last}-output:{f}x{f}x{fe}"] = ("final_expand", c_last, (c_last, f, f))
            units[f"AvgPool2D-input:{f}x{f}x{fe}-output:1x1x{fe}"] = ("pool", None, (fe, f, f))
        units[f"Conv_2-input:1x1x{fe}-output:1x1x{fm}"] = ("feature_mix", None, (fe, 1, 1))
        units[f"Logits-input:1x1x{fm}-output:{p.num_classes}"] = ("classifier", None, (fm, 1, 1))
        return units

    def _build_unit(self, kind: str, spec: Any) -> nn.Module:
        """One unit, from the helpers :meth:`build` uses; He fan-out init as the network's."""
        import torch.nn as nn

        if kind == "block":
            module = self._block(spec)
        elif kind == "first_conv":
            module = self._first_conv()
        elif kind == "final_expand":
            module = self._final_expand(spec)
        elif kind == "pool":
            module = nn.AdaptiveAvgPool2d(1)
        elif kind == "feature_mix":
            module = self._feature_mix()
        else:
            module = nn.Sequential(nn.Flatten(), nn.Dropout(self.drop_rate), self._classifier())
        _init_he_fout(module)
        return module

    # -- modules (the network and the latency units are built by the same helpers) --------------------
    def _block(self, bl: OFABlock) -> nn.Module:
        """The fixed first block (timm's ``DepthwiseSeparableConv``) or an elastic ``InvertedResidual`` with
        OFA's squeeze-excite."""
        from functools import partial

        import torch.nn as nn
        from timm.models._efficientnet_blocks import DepthwiseSeparableConv, InvertedResidual, SqueezeExcite

        if bl.index < 0:
            return DepthwiseSeparableConv(bl.in_channels, bl.out_channels, dw_kernel_size=bl.kernel, stride=bl.stride,
                                          act_layer=nn.ReLU, pw_act=False, noskip=not bl.skip)
        se_layer = partial(SqueezeExcite, rd_ratio=0.25, rd_round_fn=make_divisible, force_act_layer=nn.ReLU,
                           gate_layer="hard_sigmoid")
        return InvertedResidual(bl.in_channels, bl.out_channels, dw_kernel_size=bl.kernel, stride=bl.stride,
                                exp_ratio=float(bl.expand), act_layer=nn.Hardswish if bl.hswish else nn.ReLU,
                                # timm hints se_layer as a class; it calls it, and a partial is how timm passes one
                                se_layer=se_layer if bl.se else None,  # type: ignore[arg-type]
                                noskip=not bl.skip)

    def _first_conv(self) -> nn.Module:
        import torch.nn as nn

        return nn.Sequential(nn.Conv2d(self.params.in_chans, self.first_conv_width, 3, stride=2, padding=1, bias=False),
                             nn.BatchNorm2d(self.first_conv_width), nn.Hardswish())

    def _final_expand(self, c_last: int) -> nn.Module:
        import torch.nn as nn

        return nn.Sequential(nn.Conv2d(c_last, self.final_expand_width, 1, bias=False),
                             nn.BatchNorm2d(self.final_expand_width), nn.Hardswish())

    def _feature_mix(self) -> nn.Module:
        import torch.nn as nn

        return nn.Sequential(nn.Conv2d(self.final_expand_width, self.feature_mix_width, 1, bias=False), nn.Hardswish())

    def _classifier(self) -> nn.Module:
        import torch.nn as nn

        return nn.Linear(self.feature_mix_width, self.params.num_classes)

    def build(self, arch: Architecture) -> nn.Module:
        """A standalone network for ``arch`` with random init (He fan-out; timm's efficientnet blocks).

        The first block is timm's ``DepthwiseSeparableConv``; the elastic blocks are ``InvertedResidual``
        with OFA's squeeze-excite (``SqueezeExcite`` with ReLU, hard-sigmoid gate and a reduced width of
        ``make_divisible(mid / 4, 8)``). Feed it ``input_shape_of(arch)``; any size works (global pooling).
        """
        import torch.nn as nn

        plan = self.blocks(arch)
        blocks = [self._block(bl) for bl in plan]
        model = nn.Sequential()
        model.add_module("first_conv", self._first_conv())
        model.add_module("blocks", nn.Sequential(*blocks))
        model.add_module("final_expand_layer", self._final_expand(plan[-1].out_channels))
        model.add_module("global_pool", nn.AdaptiveAvgPool2d(1))
        model.add_module("feature_mix_layer", self._feature_mix())
        model.add_module("flatten", nn.Flatten())
        model.add_module("dropout", nn.Dropout(self.drop_rate))
        model.add_module("classifier", self._classifier())
        _init_he_fout(model)
        return model

    # -- OFA's {ks, e, d, r} dicts ---------------------------------------------------------------------
    def from_ofa_dict(self, data: Mapping[str, Any], *, where: str = "ofa arch") -> Architecture:
        """Parse once-for-all's ``{ks: [20], e: [20], d: [5], r}`` dict into a canonical architecture.

        Accepts the forms once-for-all and HELP write: the resolution as ``r`` or ``image_size``, an int
        or a one-element list, and an optional ``wid: None``. Entries of inactive blocks (beyond their
        stage's depth) may hold any allowed value or 0: samplers draw all 20 and HELP's file keeps those
        leftovers; they are dropped (zeroed) here.

        Args:
            data: The dict.
            where: Where it came from, for error messages (e.g. ``"ofa_archs.json arch[17]"``).

        Raises:
            InvalidArchitecture: A key is missing or unknown, a list has the wrong length or a
                non-integer, or a value is out of range (the message names the gene, e.g.
                ``ks7=9 is out of range (choices: 3, 5, 7)``).
        """
        if not isinstance(data, Mapping):
            raise InvalidArchitecture(f"{where}: expected a mapping with keys ks, e, d, r; got {type(data).__name__}")
        res_keys = [k for k in ("r", "image_size") if k in data]
        unknown = sorted(set(data) - {"ks", "e", "d", "r", "image_size", "wid"})
        if unknown:
            raise InvalidArchitecture(f"{where}: unknown key(s) {', '.join(map(str, unknown))} (expected ks, e, d, r)")
        missing = [k for k in ("ks", "e", "d") if k not in data] + ([] if res_keys else ["r"])
        if missing:
            raise InvalidArchitecture(f"{where}: missing key(s) {', '.join(missing)}")
        if len(res_keys) > 1:
            raise InvalidArchitecture(f"{where}: give the resolution once, as r or image_size, not both")
        if data.get("wid") is not None:
            raise InvalidArchitecture(f"{where}: wid={data['wid']!r}; ofa_mbv3 has no per-block width choice")
        ks = _int_list(data["ks"], N_BLOCKS, f"{where}: ks")
        e = _int_list(data["e"], N_BLOCKS, f"{where}: e")
        d = _int_list(data["d"], N_STAGES, f"{where}: d")
        r_raw = data[res_keys[0]]
        if isinstance(r_raw, (list, tuple)):
            r = _int_list(r_raw, 1, f"{where}: {res_keys[0]}")[0]
        else:
            r = _to_int(r_raw, f"{where}: {res_keys[0]}")
        genes: dict[str, int] = {"r": r}
        for s in range(N_STAGES):
            genes[f"d{s}"] = d[s]
        for i in range(N_BLOCKS):
            genes[f"ks{i}"] = ks[i]
            genes[f"e{i}"] = e[i]
        return self._canonical(genes, where)

    def to_ofa_dict(self, arch: Architecture, *,
                    resolution_key: Literal["r", "image_size"] = "r") -> dict[str, list[int] | int]:
        """The ``{ks: [20], e: [20], d: [5], r}`` dict of ``arch``; inactive blocks are written as 0.

        Zeros are once-for-all's own encoding of skipped blocks; a source whose inactive entries hold
        leftover values (HELP's ``ofa_archs.json``) round-trips to itself with those entries zeroed.

        Args:
            arch: An architecture of this space.
            resolution_key: ``"r"`` (HELP, OFA's ``ArchManager``) or ``"image_size"`` (OFA's arch encoder).
        """
        arch = self.canonicalize(arch)
        g = arch.genes
        return {
            "ks": [_gene(g, f"ks{i}") for i in range(N_BLOCKS)],
            "e": [_gene(g, f"e{i}") for i in range(N_BLOCKS)],
            "d": [_gene(g, f"d{s}") for s in range(N_STAGES)],
            resolution_key: _gene(g, "r"),
        }

    # -- OFA's net.config files ---------------------------------------------------------------------------
    def from_net_config(self, config: Mapping[str, object] | str | Path, *,
                        image_size: int | None = None) -> Architecture:
        """Parse once-for-all's ``net.config`` (a full MobileNetV3 description) into an architecture.

        Reads each block's kernel, expand ratio and the number of blocks per stage, and checks the rest
        of the network (channels for this space's ``width_mult``, strides, activations, squeeze-excite,
        shortcuts, head) against OFA's macro structure.

        Args:
            config: The parsed JSON, or the path of a ``net.config`` file or of the folder holding it.
            image_size: The resolution. Default: ``image_size`` of the ``run.config`` beside the file.

        Raises:
            InvalidArchitecture: The network is not an OFA MobileNetV3 of this width, or a gene is out of
                range (e.g. ``r=260 is out of range``); the message names the file and the block.
        """
        where = "net.config"
        if isinstance(config, (str, Path)):
            path = Path(config)
            if path.is_dir():
                path = path / "net.config"
            where = str(path)
            config = _read_json(path)
            if image_size is None:
                run_config = path.with_name("run.config")
                if run_config.is_file():
                    run = _read_json(run_config)
                    if not isinstance(run, Mapping) or "image_size" not in run:
                        raise InvalidArchitecture(f"{run_config}: no image_size")
                    image_size = _to_int(run["image_size"], f"{run_config}: image_size")
        if image_size is None:
            raise InvalidArchitecture(f"{where}: no resolution: pass image_size or keep run.config beside net.config")
        return self._parse_net_config(config, image_size=int(image_size), where=where)

    def to_net_config(self, arch: Architecture) -> dict[str, object]:
        """Once-for-all's ``net.config`` dict of ``arch`` (the resolution goes to ``run.config``: ``arch.genes['r']``).

        For once-for-all's published MobileNetV3 networks this reproduces their ``net.config`` exactly.
        """
        p = self.params
        plan = self.blocks(arch)
        blocks = []
        for bl in plan:
            conv = {
                "name": "MBInvertedConvLayer", "in_channels": bl.in_channels, "out_channels": bl.out_channels,
                "kernel_size": bl.kernel, "stride": bl.stride, "expand_ratio": bl.expand,
                "mid_channels": None if bl.index < 0 else bl.mid_channels,
                "act_func": "h_swish" if bl.hswish else "relu", "use_se": bl.se,
            }
            shortcut = None
            if bl.skip:
                shortcut = {"name": "IdentityLayer", "in_channels": [bl.in_channels], "out_channels": [bl.out_channels],
                            "use_bn": False, "act_func": None, "dropout_rate": 0, "ops_order": "weight_bn_act"}
            blocks.append({"name": "MobileInvertedResidualBlock", "mobile_inverted_conv": conv, "shortcut": shortcut})

        def conv_layer(cin: int, cout: int, kernel: int, stride: int, use_bn: bool) -> dict[str, object]:
            return {"name": "ConvLayer", "kernel_size": kernel, "stride": stride, "dilation": 1, "groups": 1,
                    "bias": False, "has_shuffle": False, "in_channels": cin, "out_channels": cout, "use_bn": use_bn,
                    "act_func": "h_swish", "dropout_rate": 0, "ops_order": "weight_bn_act"}

        return {
            "name": "MobileNetV3",
            "bn": {"momentum": 0.1, "eps": 1e-05},
            "first_conv": conv_layer(p.in_chans, self.first_conv_width, 3, 2, True),
            "blocks": blocks,
            "final_expand_layer": conv_layer(plan[-1].out_channels, self.final_expand_width, 1, 1, True),
            "feature_mix_layer": conv_layer(self.final_expand_width, self.feature_mix_width, 1, 1, False),
            "classifier": {"name": "LinearLayer", "in_features": self.feature_mix_width, "out_features": p.num_classes,
                           "bias": True, "use_bn": False, "act_func": None, "dropout_rate": self.drop_rate,
                           "ops_order": "weight_bn_act"},
        }

    # -- helpers ------------------------------------------------------------------------------------------
    def _canonical(self, genes: Mapping[str, int], where: str) -> Architecture:
        try:
            return self.canonicalize(Architecture(self.name, genes))
        except InvalidArchitecture as exc:
            raise InvalidArchitecture(f"{where}: {exc}") from None

    def _width_hint(self, channels: object, base: int) -> str:
        for w in WIDTH_MULTS:
            if w != self.params.width_mult and make_divisible(base * w) == channels:
                return f" (a w{w} network: use width_mult={w})"
        return ""

    def _parse_net_config(self, config: object, *, image_size: int, where: str) -> Architecture:
        if not isinstance(config, Mapping):
            raise InvalidArchitecture(f"{where}: a net.config is a JSON object, got {type(config).__name__}")
        kind = config.get("name")
        if kind != "MobileNetV3":
            raise InvalidArchitecture(
                f"{where}: a {kind!r} network, not an OFA MobileNetV3 ({self.name} reads only MobileNetV3 net.configs)"
            )
        for key in ("first_conv", "final_expand_layer", "feature_mix_layer", "classifier"):
            if not isinstance(config.get(key), Mapping):
                raise InvalidArchitecture(f"{where}: missing or malformed {key!r} (expected an object)")

        def check(actual: object, expected: object, what: str, hint: str = "") -> None:
            if actual != expected:
                raise InvalidArchitecture(f"{where}: {what} is {actual!r}, expected {expected!r}{hint}")

        first_conv = config["first_conv"]
        c0 = first_conv.get("out_channels")
        check(c0, self.first_conv_width, "first_conv.out_channels",
              self._width_hint(c0, FIRST_CONV_BASE) or f" for width_mult={self.params.width_mult}")
        check(first_conv.get("in_channels"), self.params.in_chans, "first_conv.in_channels")
        check(first_conv.get("stride"), 2, "first_conv.stride")
        check(first_conv.get("kernel_size"), 3, "first_conv.kernel_size")

        blocks = config["blocks"]
        if not isinstance(blocks, list) or not blocks:
            raise InvalidArchitecture(f"{where}: missing or empty 'blocks' (expected a list of blocks)")
        convs = []
        for j, block in enumerate(blocks):
            conv = block.get("mobile_inverted_conv", block.get("conv")) if isinstance(block, Mapping) else None
            if not isinstance(conv, Mapping):
                raise InvalidArchitecture(f"{where}: blocks[{j}] has no mobile_inverted_conv")
            convs.append(conv)

        first = convs[0]
        for field_name, expected in (("in_channels", self.first_conv_width), ("out_channels", self.first_block_width),
                                     ("kernel_size", 3), ("stride", 1), ("expand_ratio", 1), ("act_func", "relu"),
                                     ("use_se", False)):
            check(first.get(field_name), expected, f"blocks[0] (OFA's fixed first block) {field_name}")
        check(blocks[0].get("shortcut") is not None, self.first_conv_width == self.first_block_width,
              "blocks[0] has-shortcut")

        genes: dict[str, int] = {"r": image_size}
        j, cin = 1, self.first_block_width
        for s in range(N_STAGES):
            cout = self.stage_widths[s]
            start = j
            while j < len(convs) and convs[j].get("out_channels") == cout:
                j += 1
            depth = j - start
            if depth == 0 and start < len(convs):
                got = convs[start].get("out_channels")
                raise InvalidArchitecture(
                    f"{where}: blocks[{start}] out_channels is {got!r}, expected {cout} (stage {s})"
                    + self._width_hint(got, STAGE_BASE_WIDTHS[s])
                )
            if depth not in DEPTH_CHOICES:
                shown = ", ".join(map(str, DEPTH_CHOICES))
                raise InvalidArchitecture(f"{where}: stage {s} ({cout} channels) has {depth} block(s): "
                                          f"d{s}={depth} is out of range (choices: {shown})")
            genes[f"d{s}"] = depth
            for b in range(depth):
                jj = start + b
                conv = convs[jj]
                i = block_index(s, b)
                loc = f"blocks[{jj}] (stage {s}, block {i})"
                stride = STAGE_STRIDES[s] if b == 0 else 1
                check(conv.get("in_channels"), cin, f"{loc} in_channels")
                check(conv.get("stride"), stride, f"{loc} stride")
                check(conv.get("act_func"), "h_swish" if STAGE_HSWISH[s] else "relu", f"{loc} act_func")
                check(bool(conv.get("use_se")), STAGE_SE[s], f"{loc} use_se")
                check(blocks[jj].get("shortcut") is not None, stride == 1 and cin == cout, f"{loc} has-shortcut")
                kernel = _to_int(conv.get("kernel_size"), f"{where}: {loc} kernel_size")
                expand = _to_int(conv.get("expand_ratio"), f"{where}: {loc} expand_ratio")
                mid = conv.get("mid_channels")
                if mid is not None and mid != make_divisible(round(cin * expand)):
                    raise InvalidArchitecture(f"{where}: {loc} mid_channels is {mid!r}, expected "
                                              f"{make_divisible(round(cin * expand))} for expand_ratio {expand}")
                genes[f"ks{i}"] = kernel
                genes[f"e{i}"] = expand
                cin = cout
            for b in range(depth, MAX_DEPTH):
                i = block_index(s, b)
                genes[f"ks{i}"] = 0
                genes[f"e{i}"] = 0
        if j != len(convs):
            raise InvalidArchitecture(f"{where}: blocks[{j}] (out_channels {convs[j].get('out_channels')!r}) is "
                                      f"beyond the last stage; OFA MobileNetV3 has {N_STAGES} stages of 2-4 blocks")

        fe, fm, cl = config["final_expand_layer"], config["feature_mix_layer"], config["classifier"]
        check(fe.get("in_channels"), self.stage_widths[-1], "final_expand_layer.in_channels")
        check(fe.get("out_channels"), self.final_expand_width, "final_expand_layer.out_channels")
        check(fm.get("in_channels"), self.final_expand_width, "feature_mix_layer.in_channels")
        check(fm.get("out_channels"), self.feature_mix_width, "feature_mix_layer.out_channels")
        check(cl.get("in_features"), self.feature_mix_width, "classifier.in_features")
        if cl.get("out_features") != self.params.num_classes:
            log.info("%s: classifier has %s classes; this space builds %d", where, cl.get("out_features"),
                     self.params.num_classes)
        return self._canonical(genes, where)


def _gene(genes: Mapping[str, object], name: str) -> int:
    """An integer gene of a canonical architecture (validation guarantees ints)."""
    value = genes[name]
    if not isinstance(value, int):
        raise InvalidArchitecture(f"gene {name}={value!r} is not an integer")
    return value


def _to_int(value: object, where: str) -> int:
    """``value`` as an int (integral floats accepted), else :class:`InvalidArchitecture` naming ``where``."""
    if isinstance(value, bool):
        raise InvalidArchitecture(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return int(value)
    if hasattr(value, "__index__"):  # numpy integers
        return int(value.__index__())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise InvalidArchitecture(f"{where}: expected an integer, got {value!r}")


def _int_list(value: object, length: int, where: str) -> list[int]:
    """A list of ``length`` integers, else :class:`InvalidArchitecture` naming ``where``."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise InvalidArchitecture(f"{where}: expected a list of {length} integers, got {type(value).__name__}")
    if len(value) != length:
        raise InvalidArchitecture(f"{where}: has {len(value)} values, expected {length}")
    return [_to_int(v, f"{where}[{k}]") for k, v in enumerate(value)]


def _read_json(path: Path) -> Any:
    try:
        with path.open("r", encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise InvalidArchitecture(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise InvalidArchitecture(f"{path}: not valid JSON ({exc})") from exc


def _init_he_fout(model: nn.Module) -> None:
    """He "fan-out" initialisation with the group-corrected fan-out timm uses for EfficientNets, in place.

    Convolutions draw from N(0, 2 / fan_out) with fan_out = k * k * out_channels / groups, batch norms
    start at weight 1 and bias 0, and the classifier draws from U(-1/sqrt(in), 1/sqrt(in)) with a zero
    bias. PyTorch's default init (and a fan-out that ignores groups, as once-for-all's ``he_fout`` does)
    shrinks activations by orders of magnitude through the depthwise convolutions of 20 blocks, which
    would leave the output, and any torch-vs-ONNX comparison, dominated by the classifier's bias.
    """
    import torch.nn as nn

    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
            nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            bound = 1.0 / math.sqrt(m.weight.shape[1])
            nn.init.uniform_(m.weight, -bound, bound)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
