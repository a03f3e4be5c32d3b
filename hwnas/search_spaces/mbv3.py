"""A MobileNetV3-style layer-wise space: per block kernel and expand ratio, per stage depth.

Built from timm's ``InvertedResidual`` and ``SqueezeExcite`` blocks, as MobileNetV3 is in timm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hwnas.architecture import Architecture
from hwnas.search_spaces.base import (
    CategoricalSpace,
    Gene,
    LayerKey,
    SpaceParams,
    UnitCatalog,
    UnitSpec,
    int_gene,
    per_arch_cache,
)

if TYPE_CHECKING:
    import torch.nn as nn


class MBBlock(TypedDict):
    """One inverted-residual block as built: channels in and out, kernel, expand ratio, stride, input resolution,
    squeeze-excite and activation."""

    cin: int
    cout: int
    k: int
    e: int
    stride: int
    res: int
    se: bool
    act: str


class StageSpec(BaseModel):
    """One stage of the network."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    channels: int = Field(gt=0)
    stride: Literal[1, 2] = 1
    depths: tuple[int, ...] = (1, 2, 3)
    se: bool = False
    act: Literal["relu", "hard_swish"] = "hard_swish"

    @model_validator(mode="after")
    def _depths_positive(self) -> StageSpec:
        if not self.depths or min(self.depths) < 1:
            raise ValueError("depths must be a non-empty list of positive integers")
        return self


class MBV3Params(SpaceParams):
    """Parameters of the MobileNetV3-style space."""

    resolution: int = Field(16, ge=8, le=4096, description="input height and width in pixels")
    in_chans: int = Field(3, gt=0)
    num_classes: int = Field(10, gt=1)
    stem_channels: int = Field(8, gt=0)
    head_channels: int = Field(64, gt=0)
    kernels: tuple[int, ...] = (3, 5, 7)
    expand_ratios: tuple[int, ...] = (3, 4, 6)
    stages: tuple[StageSpec, ...] = (
        StageSpec(channels=8, stride=1, act="relu"),
        StageSpec(channels=16, stride=2, act="relu"),
        StageSpec(channels=24, stride=2, se=True),
        StageSpec(channels=32, stride=2, se=True),
    )


class MobileNetV3Space(UnitCatalog, CategoricalSpace):
    """MobileNetV3-style: per block kernel {3,5,7} and expand {3,4,6}, per stage depth; timm blocks."""

    name = "mbv3"
    Params = MBV3Params
    params: MBV3Params

    def genes(self) -> list[Gene]:
        p = self.params
        out: list[Gene] = []
        for s, st in enumerate(p.stages):
            out.append(Gene(f"d{s}", tuple(st.depths)))
            for b in range(max(st.depths)):
                out.append(Gene(f"k{s}_{b}", p.kernels, inactive=0))
                out.append(Gene(f"e{s}_{b}", p.expand_ratios, inactive=0))
        return out

    def active_genes(self, genes: Mapping[str, Any]) -> set[str]:
        active = set()
        for s, _ in enumerate(self.params.stages):
            active.add(f"d{s}")
            depth = genes.get(f"d{s}", 0)
            for b in range(int(depth)):
                active.update((f"k{s}_{b}", f"e{s}_{b}"))
        return active

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.params.in_chans, self.params.resolution, self.params.resolution)

    def size(self) -> int:
        per_block = len(self.params.kernels) * len(self.params.expand_ratios)
        return math.prod(sum(per_block**d for d in st.depths) for st in self.params.stages)

    def _blocks(self, arch: Architecture) -> list[MBBlock]:
        """Per block: in/out channels, kernel, expand, stride, input resolution, se, act."""
        arch = self.canonicalize(arch)
        p = self.params
        res = p.resolution
        cin = p.stem_channels
        blocks = []
        for s, st in enumerate(p.stages):
            for b in range(int_gene(arch.genes, f"d{s}")):
                stride = st.stride if b == 0 else 1
                blocks.append(
                    MBBlock(cin=cin, cout=st.channels, k=int_gene(arch.genes, f"k{s}_{b}"),
                            e=int_gene(arch.genes, f"e{s}_{b}"), stride=stride, res=res, se=st.se, act=st.act)
                )
                res = (res + stride - 1) // stride
                cin = st.channels
        return blocks

    @per_arch_cache
    def layers(self, arch: Architecture) -> list[LayerKey]:
        """Stem, one key per active block (shape and choices), head."""
        p = self.params
        keys = [f"stem:in{p.in_chans}:out{p.stem_channels}:r{p.resolution}"]
        blocks = self._blocks(arch)
        for bl in blocks:
            keys.append(
                "mbconv:i{cin}:o{cout}:k{k}:e{e}:s{stride}:r{res}:se{se:d}:{act}".format(**bl)
            )
        last = blocks[-1]
        res_out = (last["res"] + last["stride"] - 1) // last["stride"]
        keys.append(f"head:in{last['cout']}:mid{p.head_channels}:cls{p.num_classes}:r{res_out}")
        return keys

    # -- the units of the latency table -----------------------------------------------------------
    def _unit_specs(self) -> dict[LayerKey, UnitSpec]:
        """Every unit ``layers()`` can produce, with what builds it: stem, every block variant per position, heads."""
        p = self.params
        units: dict[LayerKey, UnitSpec] = {}
        units[f"stem:in{p.in_chans}:out{p.stem_channels}:r{p.resolution}"] = (
            "stem", None, (p.in_chans, p.resolution, p.resolution))
        res, cin = p.resolution, p.stem_channels
        for st in p.stages:
            for first in (True, False):
                if not first and max(st.depths) < 2:
                    continue
                stride = st.stride if first else 1
                c_in = cin if first else st.channels
                r_in = res if first else (res + st.stride - 1) // st.stride
                for k in p.kernels:
                    for e in p.expand_ratios:
                        bl = MBBlock(cin=c_in, cout=st.channels, k=k, e=e, stride=stride, res=r_in, se=st.se,
                                     act=st.act)
                        key = "mbconv:i{cin}:o{cout}:k{k}:e{e}:s{stride}:r{res}:se{se:d}:{act}".format(**bl)
                        units[key] = ("block", bl, (c_in, r_in, r_in))
            res, cin = (res + st.stride - 1) // st.stride, st.channels
        # the head follows the last block, whose channels are the last stage's
        units[f"head:in{cin}:mid{p.head_channels}:cls{p.num_classes}:r{res}"] = ("head", cin, (cin, res, res))
        return units

    def _build_unit(self, kind: str, spec: Any) -> nn.Module:
        module = self._stem() if kind == "stem" else self._head(spec) if kind == "head" else self._block(spec)
        _init_weights(module)
        return module

    # -- modules ---------------------------------------------------------------------------------------
    def _stem(self) -> nn.Module:
        import torch.nn as nn
        from timm.layers import get_act_layer

        p = self.params
        return nn.Sequential(nn.Conv2d(p.in_chans, p.stem_channels, 3, 1, 1, bias=False),
                             nn.BatchNorm2d(p.stem_channels), get_act_layer("hard_swish")())

    def _block(self, bl: MBBlock) -> nn.Module:
        from functools import partial

        from timm.layers import get_act_layer
        from timm.models._efficientnet_blocks import InvertedResidual, SqueezeExcite

        se = partial(SqueezeExcite, rd_ratio=0.25, gate_layer="hard_sigmoid") if bl["se"] else None
        # timm hints se_layer as a class; it calls it, and a partial is how timm's own builders pass one
        return InvertedResidual(bl["cin"], bl["cout"], dw_kernel_size=bl["k"], stride=bl["stride"],
                                exp_ratio=float(bl["e"]), act_layer=get_act_layer(bl["act"]),
                                se_layer=se)  # type: ignore[arg-type]

    def _head(self, cin: int) -> nn.Module:
        import torch.nn as nn
        from timm.layers import get_act_layer

        p = self.params
        return nn.Sequential(nn.Conv2d(cin, p.head_channels, 1, bias=False), nn.BatchNorm2d(p.head_channels),
                             get_act_layer("hard_swish")(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(p.head_channels, p.num_classes))

    def build(self, arch: Architecture) -> nn.Module:
        """A standalone network with random init (timm's InvertedResidual and SqueezeExcite)."""
        import torch.nn as nn

        blocks = self._blocks(arch)
        model = nn.Sequential()
        model.add_module("stem", self._stem())
        model.add_module("blocks", nn.Sequential(*(self._block(bl) for bl in blocks)))
        model.add_module("head", self._head(blocks[-1]["cout"]))
        _init_weights(model)
        return model


def _init_weights(model: nn.Module) -> None:
    """timm's EfficientNet/MobileNetV3 initialisation (fan-out normal for convs): activations keep their scale."""
    from timm.models._efficientnet_builder import efficientnet_init_weights

    efficientnet_init_weights(model)
