"""A ConvNeXt space: per-stage depth and width, per-block depthwise kernel, MLP ratio and token mixer.

Genes, per stage ``s`` and block ``b < max(depths of stage s)``:

- ``w{s}``: the stage's width (channels), from the stage's ``widths``;
- ``d{s}``: the stage's depth, from the stage's ``depths``;
- ``k{s}_{b}``: kernel size of the block's depthwise mixer (odd, 3..11);
- ``e{s}_{b}``: MLP expansion ratio of the block;
- ``m{s}_{b}``: the block's token mixer, an index into :data:`MIXERS`: ``0`` ConvNeXt's ``k x k``
  depthwise conv (timm's ``ConvNeXtBlock``), ``1`` InceptionNeXt's decomposed depthwise conv (timm's
  ``MetaNeXtBlock`` with ``InceptionDWConv2d``: a square ``sq x sq`` kernel, a ``1 x k`` and a ``k x 1``
  band on three slices of ``branch_ratio`` of the channels, identity on the rest; ``k`` is then the band
  length). ``ConvNeXtParams.mixers`` says which are allowed (default ConvNeXt's only, so the gene is
  constant ``0``; ``["dw", "inception"]`` makes it a per-block choice).

Blocks at or beyond the stage's depth are inactive: their genes are ``0``.

The network follows ConvNeXt: a patchify stem (``stem_stride x stem_stride`` conv, LayerNorm), stages
separated by a LayerNorm + 2x2 stride-2 conv downsampling, then global average pooling, LayerNorm and a
linear head. InceptionNeXt blocks keep their own BatchNorm and conv MLP inside the same skeleton.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from hwnas.architecture import Architecture
from hwnas.search_spaces.base import (
    CategoricalSpace,
    Gene,
    LayerKey,
    SpaceParams,
    UnitCatalog,
    UnitSpec,
    per_arch_cache,
)

if TYPE_CHECKING:
    import torch.nn as nn

log = logging.getLogger(__name__)

MIXERS: tuple[str, ...] = ("dw", "inception")
"""Token mixers; a mixer gene's value is an index into this tuple."""


def _check_choices(values: tuple[int, ...], what: str) -> tuple[int, ...]:
    if not values:
        raise ValueError(f"{what} must not be empty")
    if len(set(values)) != len(values):
        raise ValueError(f"{what} has duplicates: {list(values)}")
    if min(values) <= 0:
        raise ValueError(f"{what} must be positive: {list(values)}")
    return tuple(sorted(values))


class StagePlan(TypedDict):
    """One stage as built (:meth:`ConvNeXtSpace._plan`): input and output width and resolution, and
    (kernel, MLP ratio, mixer name) per block."""

    c_in: int
    c: int
    res_in: int
    res: int
    blocks: list[tuple[int, int, str]]


class ConvNeXtStageSpec(BaseModel):
    """One stage: its width choices and depth choices."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    widths: tuple[int, ...]
    depths: tuple[int, ...] = (1, 2, 3)

    @field_validator("widths", "depths")
    @classmethod
    def _positive(cls, values: tuple[int, ...], info: ValidationInfo) -> tuple[int, ...]:
        return _check_choices(values, str(info.field_name))


class ConvNeXtParams(SpaceParams):
    """Parameters of the ConvNeXt space (defaults: 32x32 inputs, 4 small stages, CPU-friendly)."""

    resolution: int = Field(32, ge=8, le=4096, description="input height and width in pixels")
    in_chans: int = Field(3, gt=0)
    num_classes: int = Field(10, gt=1)
    stem_stride: int = Field(2, ge=1, description="patchify stem: kernel = stride (ConvNeXt uses 4 at 224 px)")
    stages: tuple[ConvNeXtStageSpec, ...] = (
        ConvNeXtStageSpec(widths=(16, 24, 32)),
        ConvNeXtStageSpec(widths=(32, 48, 64)),
        ConvNeXtStageSpec(widths=(64, 96, 128)),
        ConvNeXtStageSpec(widths=(128, 160, 192)),
    )
    kernels: tuple[int, ...] = (3, 5, 7, 9, 11)
    mlp_ratios: tuple[int, ...] = (2, 3, 4)
    mixers: tuple[Literal["dw", "inception"], ...] = ("dw",)
    inception_square_kernel: int = Field(3, ge=1, description="InceptionNeXt's square kernel (odd)")
    inception_branch_ratio: float = Field(0.125, gt=0, le=1 / 3, description="share of channels per conv branch")
    layer_scale_init: float | None = Field(1e-6, description="layer-scale init (ConvNeXt: 1e-6); null for none")

    @field_validator("kernels")
    @classmethod
    def _odd_kernels(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        values = _check_choices(values, "kernels")
        bad = [k for k in values if k % 2 == 0 or not 3 <= k <= 11]
        if bad:
            raise ValueError(f"kernels must be odd and within 3..11; not: {bad}")
        return values

    @field_validator("mlp_ratios")
    @classmethod
    def _ratios(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        return _check_choices(values, "mlp_ratios")

    @field_validator("mixers")
    @classmethod
    def _mixers(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        if not values or len(set(values)) != len(values):
            raise ValueError(f"mixers must be a non-empty list without duplicates, got {list(values)}")
        return tuple(sorted(values, key=MIXERS.index))

    @model_validator(mode="after")
    def _consistent(self) -> ConvNeXtParams:
        if not self.stages:
            raise ValueError("stages must not be empty")
        if self.inception_square_kernel % 2 == 0:
            raise ValueError(f"inception_square_kernel {self.inception_square_kernel} must be odd")
        if self.resolution // self.stem_stride // 2 ** (len(self.stages) - 1) < 1:
            raise ValueError(f"resolution {self.resolution} is too small for a stem stride of {self.stem_stride} "
                             f"and {len(self.stages) - 1} downsamplings")
        if "inception" in self.mixers:
            for s, st in enumerate(self.stages):
                narrow = [w for w in st.widths if int(w * self.inception_branch_ratio) < 1]
                if narrow:
                    raise ValueError(f"stages[{s}]: width(s) {narrow} leave no channel to InceptionNeXt's branches "
                                     f"(branch ratio {self.inception_branch_ratio})")
        return self


class ConvNeXtSpace(UnitCatalog, CategoricalSpace):
    """ConvNeXt: per-stage depth/width, per-block kernel 3-11 and MLP ratio, optional InceptionNeXt mixer; timm."""

    name = "convnext"
    Params = ConvNeXtParams
    params: ConvNeXtParams

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self._mixer_choices = tuple(MIXERS.index(m) for m in self.params.mixers)
        self._genes = self._make_genes()

    def genes(self) -> list[Gene]:
        return list(self._genes)

    def _make_genes(self) -> list[Gene]:
        p = self.params
        out: list[Gene] = []
        for s, st in enumerate(p.stages):
            out.append(Gene(f"w{s}", st.widths))
            out.append(Gene(f"d{s}", st.depths))
            for b in range(max(st.depths)):
                out.append(Gene(f"k{s}_{b}", p.kernels, inactive=0))
                out.append(Gene(f"e{s}_{b}", p.mlp_ratios, inactive=0))
                out.append(Gene(f"m{s}_{b}", self._mixer_choices, inactive=0))
        return out

    def active_genes(self, genes: Mapping[str, Any]) -> set[str]:
        active: set[str] = set()
        for s, _ in enumerate(self.params.stages):
            active.update((f"w{s}", f"d{s}"))
            for b in range(int(genes.get(f"d{s}", 0))):
                active.update((f"k{s}_{b}", f"e{s}_{b}", f"m{s}_{b}"))
        return active

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.params.in_chans, self.params.resolution, self.params.resolution)

    def size(self) -> int:
        """``prod_s widths_s * sum_d (kernels * ratios * mixers) ** d``."""
        p = self.params
        per_block = len(p.kernels) * len(p.mlp_ratios) * len(self._mixer_choices)
        return math.prod(len(st.widths) * sum(per_block**d for d in st.depths) for st in p.stages)

    def largest(self) -> Architecture:
        """Every stage at its largest width and depth, every block its largest kernel and MLP ratio, ConvNeXt's
        ``k x k`` depthwise mixer where allowed (more work than InceptionNeXt's bands)."""
        genes = {g.name: (min(g.choices) if g.name.startswith("m") else max(g.choices)) for g in self._genes}
        return self.canonicalize(Architecture(self.name, genes))

    def _plan(self, arch: Architecture) -> list[StagePlan]:
        """Per stage: input and output width, input and output resolution, and (kernel, ratio, mixer name) per block."""
        arch = self.canonicalize(arch)
        g = arch.genes
        p = self.params
        res = p.resolution // p.stem_stride
        c_in = p.in_chans
        plan = []
        for s, _st in enumerate(p.stages):
            width = int(g[f"w{s}"])  # type: ignore[arg-type]
            res_in = res
            if s > 0:
                res //= 2
            blocks = [(int(g[f"k{s}_{b}"]), int(g[f"e{s}_{b}"]), MIXERS[int(g[f"m{s}_{b}"])])  # type: ignore[arg-type]
                      for b in range(int(g[f"d{s}"]))]  # type: ignore[arg-type]
            plan.append(StagePlan(c_in=c_in, c=width, res_in=res_in, res=res, blocks=blocks))
            c_in = width
        return plan

    def _block_key(self, c: int, res: int, kernel: int, ratio: int, mixer: str) -> LayerKey:
        p = self.params
        ls = "none" if p.layer_scale_init is None else "ls"
        if mixer == "dw":
            return f"convnext_block:c{c}:k{kernel}:e{ratio}:r{res}:{ls}"
        return (f"inceptionnext_block:c{c}:sq{p.inception_square_kernel}:band{kernel}"
                f":br{p.inception_branch_ratio:g}:e{ratio}:r{res}:{ls}")

    @per_arch_cache
    def layers(self, arch: Architecture) -> list[LayerKey]:
        """Stem, per stage its downsampling (after the first) and one key per block, head."""
        p = self.params
        plan = self._plan(arch)
        keys = [f"convnext_stem:i{p.in_chans}:o{plan[0]['c']}:s{p.stem_stride}:r{p.resolution}"]
        for s, stage in enumerate(plan):
            if s > 0:
                keys.append(f"convnext_down:i{stage['c_in']}:o{stage['c']}:r{stage['res_in']}")
            for kernel, ratio, mixer in stage["blocks"]:
                keys.append(self._block_key(stage["c"], stage["res"], kernel, ratio, mixer))
        keys.append(f"convnext_head:i{plan[-1]['c']}:cls{p.num_classes}:r{plan[-1]['res']}")
        return keys

    def _unit_specs(self) -> dict[LayerKey, UnitSpec]:
        """Stem per first width; per stage its downsampling per (input, output) width and every block variant
        per width; head per last width."""
        p = self.params
        res = p.resolution // p.stem_stride
        units: dict[LayerKey, UnitSpec] = {}
        for c in p.stages[0].widths:
            units[f"convnext_stem:i{p.in_chans}:o{c}:s{p.stem_stride}:r{p.resolution}"] = (
                "stem", c, (p.in_chans, p.resolution, p.resolution))
        for s, st in enumerate(p.stages):
            if s > 0:
                for c_in in p.stages[s - 1].widths:
                    for c in st.widths:
                        units[f"convnext_down:i{c_in}:o{c}:r{res}"] = ("down", (c_in, c), (c_in, res, res))
                res //= 2
            for c in st.widths:
                for kernel in p.kernels:
                    for ratio in p.mlp_ratios:
                        for mixer in p.mixers:
                            units[self._block_key(c, res, kernel, ratio, mixer)] = (
                                "block", (c, kernel, ratio, mixer), (c, res, res))
        for c in p.stages[-1].widths:
            units[f"convnext_head:i{c}:cls{p.num_classes}:r{res}"] = ("head", c, (c, res, res))
        return units

    def _build_unit(self, kind: str, spec: object) -> nn.Module:
        builders: dict[str, Callable[[Any], nn.Module]] = {"stem": self._stem, "down": self._down, "block": self._block,
                                                         "head": self._head}
        return builders[kind](spec)

    # -- modules (the network and the latency units are built by the same helpers) --------------------
    def _stem(self, c: int) -> nn.Module:
        import torch.nn as nn
        from timm.layers import LayerNorm2d

        p = self.params
        return nn.Sequential(nn.Conv2d(p.in_chans, c, kernel_size=p.stem_stride, stride=p.stem_stride), LayerNorm2d(c))

    def _down(self, spec: tuple[int, int]) -> nn.Module:
        import torch.nn as nn
        from timm.layers import LayerNorm2d

        c_in, c = spec
        return nn.Sequential(LayerNorm2d(c_in), nn.Conv2d(c_in, c, kernel_size=2, stride=2))

    def _block(self, spec: tuple[int, int, int, str]) -> nn.Module:
        from functools import partial

        from timm.models.convnext import ConvNeXtBlock
        from timm.models.inception_next import InceptionDWConv2d, MetaNeXtBlock

        p = self.params
        c, kernel, ratio, mixer = spec
        if mixer == "dw":
            return ConvNeXtBlock(c, kernel_size=kernel, mlp_ratio=ratio, ls_init_value=p.layer_scale_init)
        mixer_layer = partial(InceptionDWConv2d, square_kernel_size=p.inception_square_kernel,
                              band_kernel_size=kernel, branch_ratio=p.inception_branch_ratio)
        # timm hints token_mixer as a class; it calls it, and its own InceptionNeXt passes a partial
        return MetaNeXtBlock(c, token_mixer=mixer_layer, mlp_ratio=ratio,  # type: ignore[arg-type]
                             ls_init_value=p.layer_scale_init or 0.0)

    def _head(self, c: int) -> nn.Module:
        import torch.nn as nn
        from timm.layers import LayerNorm2d

        return nn.Sequential(nn.AdaptiveAvgPool2d(1), LayerNorm2d(c), nn.Flatten(1),
                             nn.Linear(c, self.params.num_classes))

    def build(self, arch: Architecture) -> nn.Module:
        """A standalone network with random init from timm's ``ConvNeXtBlock`` / ``MetaNeXtBlock``."""
        import torch.nn as nn

        plan = self._plan(arch)
        stem = self._stem(plan[0]["c"])  # built first: the same seed gives the same weights as before
        stages = []
        for s, stage in enumerate(plan):
            parts: list[nn.Module] = []
            if s > 0:
                parts.append(self._down((stage["c_in"], stage["c"])))
            parts.extend(self._block((stage["c"], kernel, ratio, mixer)) for kernel, ratio, mixer in stage["blocks"])
            stages.append(nn.Sequential(*parts))
        model = nn.Sequential()
        model.add_module("stem", stem)
        model.add_module("stages", nn.Sequential(*stages))
        model.add_module("head", self._head(plan[-1]["c"]))
        log.debug("built convnext with %d blocks for %s", sum(len(st["blocks"]) for st in plan), arch.arch_id)
        return model


__all__ = ["MIXERS", "ConvNeXtParams", "ConvNeXtSpace", "ConvNeXtStageSpec"]
