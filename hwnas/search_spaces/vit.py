"""An AutoFormer-style vision-transformer space: patch size, embedding dim, depth, per-layer heads and MLP ratio.

Genes:

- ``patch``: patch size in pixels (``resolution`` must be a multiple of every choice);
- ``embed``: embedding dimension, shared by every layer (as in AutoFormer);
- ``depth``: number of transformer blocks;
- ``heads{i}``, ``mlp{i}`` for block ``i < max(depths)``: number of attention heads, and MLP ratio in
  tenths (``35`` is a ratio of 3.5: genes are integers, AutoFormer's ratios are multiples of 0.5).
  Blocks at or beyond ``depth`` are inactive: their genes are ``0``.

Every embedding dimension is divisible by every head count (:class:`ViTParams` checks it), so every
combination of choices is a member: the per-head dimension is ``embed // heads``, as in timm's
``Attention`` (AutoFormer instead fixes 64 dims per head and lets the qkv width differ from ``embed``).

The network is built from timm's ``PatchEmbed`` and vision-transformer ``Block``: patch embedding,
a class token, learned position embeddings, the blocks, a final LayerNorm and a linear head on the
class token. ``ViTParams(**AUTOFORMER_TINY)`` gives AutoFormer-T's space.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

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

AUTOFORMER_TINY: dict[str, Any] = {
    "resolution": 224,
    "num_classes": 1000,
    "patch_sizes": (16,),
    "embed_dims": (192, 216, 240),
    "depths": (12, 13, 14),
    "num_heads": (3, 4),
    "mlp_ratios": (3.5, 4.0),
}
"""AutoFormer-T's search space (Chen et al., ICCV 2021, table 1) as :class:`ViTParams` keyword arguments."""


def _positive_unique(values: Sequence[float], what: str) -> None:
    if not values:
        raise ValueError(f"{what} must not be empty")
    if len(set(values)) != len(values):
        raise ValueError(f"{what} has duplicates: {list(values)}")
    if min(values) <= 0:
        raise ValueError(f"{what} must be positive: {list(values)}")


class ViTParams(SpaceParams):
    """Parameters of the ViT space (defaults: small enough to build and export on a CPU in a second)."""

    resolution: int = Field(32, ge=4, le=4096, description="input height and width in pixels")
    in_chans: int = Field(3, gt=0)
    num_classes: int = Field(10, gt=1)
    patch_sizes: tuple[int, ...] = (4, 8)
    embed_dims: tuple[int, ...] = (64, 96, 128)
    depths: tuple[int, ...] = (4, 5, 6, 7, 8)
    num_heads: tuple[int, ...] = (2, 4)
    mlp_ratios: tuple[float, ...] = (2.0, 3.0, 4.0)
    qkv_bias: bool = True

    @field_validator("patch_sizes", "embed_dims", "depths", "num_heads", "mlp_ratios")
    @classmethod
    def _sorted_positive_unique(cls, values: tuple[float, ...], info: ValidationInfo) -> tuple[float, ...]:
        _positive_unique(values, str(info.field_name))
        return tuple(sorted(values))

    @model_validator(mode="after")
    def _consistent(self) -> ViTParams:
        for r in self.mlp_ratios:
            if abs(r * 10 - round(r * 10)) > 1e-9:
                raise ValueError(f"mlp_ratios: {r} is not a multiple of 0.1 (genes hold the ratio in tenths)")
        bad = [(e, h) for e in self.embed_dims for h in self.num_heads if e % h]
        if bad:
            shown = ", ".join(f"{e}/{h}" for e, h in bad)
            raise ValueError(f"every embed_dim must be divisible by every num_heads choice; not: {shown}")
        bad_patch = [p for p in self.patch_sizes if self.resolution % p]
        if bad_patch:
            raise ValueError(f"resolution {self.resolution} is not a multiple of patch size(s) {bad_patch}")
        return self


class ViTSpace(UnitCatalog, CategoricalSpace):
    """AutoFormer-style ViT: patch size, embed dim, depth, per-layer heads and MLP ratio; timm Blocks."""

    name = "vit"
    Params = ViTParams
    params: ViTParams

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self._mlp_choices = tuple(int(round(r * 10)) for r in self.params.mlp_ratios)
        self._genes = self._make_genes()

    def genes(self) -> list[Gene]:
        return list(self._genes)

    def _make_genes(self) -> list[Gene]:
        p = self.params
        out = [Gene("patch", p.patch_sizes), Gene("embed", p.embed_dims), Gene("depth", p.depths)]
        for i in range(max(p.depths)):
            out.append(Gene(f"heads{i}", p.num_heads, inactive=0))
            out.append(Gene(f"mlp{i}", self._mlp_choices, inactive=0))
        return out

    def active_genes(self, genes: Mapping[str, Any]) -> set[str]:
        active = {"patch", "embed", "depth"}
        for i in range(int(genes.get("depth", 0))):
            active.update((f"heads{i}", f"mlp{i}"))
        return active

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.params.in_chans, self.params.resolution, self.params.resolution)

    def size(self) -> int:
        """``patches * embeds * sum_d (heads * mlp_ratios) ** d``."""
        p = self.params
        per_block = len(p.num_heads) * len(p.mlp_ratios)
        return len(p.patch_sizes) * len(p.embed_dims) * sum(per_block**d for d in p.depths)

    def largest(self) -> Architecture:
        """The most expensive member: largest embedding, depth, heads and MLP ratio, and the SMALLEST patch
        (the most tokens)."""
        genes = {g.name: max(g.choices) for g in self._genes}
        genes["patch"] = min(self.params.patch_sizes)
        return self.canonicalize(Architecture(self.name, genes))

    def _blocks(self, arch: Architecture) -> tuple[int, int, int, list[tuple[int, float]]]:
        """(patch, embed, tokens incl. the class token, [(heads, mlp ratio) per block])."""
        arch = self.canonicalize(arch)
        g = arch.genes
        patch, embed = int(g["patch"]), int(g["embed"])  # type: ignore[arg-type]
        tokens = (self.params.resolution // patch) ** 2 + 1
        blocks = [(int(g[f"heads{i}"]), int(g[f"mlp{i}"]) / 10) for i in range(int(g["depth"]))]  # type: ignore[arg-type]
        return patch, embed, tokens, blocks

    @per_arch_cache
    def layers(self, arch: Architecture) -> list[LayerKey]:
        """Patch embedding (with class token and position embedding), one key per block, head."""
        p = self.params
        patch, embed, tokens, blocks = self._blocks(arch)
        keys = [f"vit_embed:in{p.in_chans}:p{patch}:e{embed}:r{p.resolution}"]
        for heads, ratio in blocks:
            keys.append(f"vit_block:e{embed}:h{heads}:mlp{ratio:g}:t{tokens}:qkvb{int(p.qkv_bias)}")
        keys.append(f"vit_head:e{embed}:cls{p.num_classes}:t{tokens}")
        return keys

    def _unit_specs(self) -> dict[LayerKey, UnitSpec]:
        """Per (patch, embed) the patch embedding and head; per (embed, heads, MLP ratio, tokens) a block.

        A block's input is ``(tokens, embed)`` (batch first once batched); the head takes the blocks' output.
        """
        p = self.params
        units: dict[LayerKey, UnitSpec] = {}
        for patch in p.patch_sizes:
            tokens = (p.resolution // patch) ** 2 + 1
            for embed in p.embed_dims:
                units[f"vit_embed:in{p.in_chans}:p{patch}:e{embed}:r{p.resolution}"] = (
                    "embed", (patch, embed), (p.in_chans, p.resolution, p.resolution))
                for heads in p.num_heads:
                    for ratio in p.mlp_ratios:
                        units[f"vit_block:e{embed}:h{heads}:mlp{ratio:g}:t{tokens}:qkvb{int(p.qkv_bias)}"] = (
                            "block", (embed, heads, ratio), (tokens, embed))
                units[f"vit_head:e{embed}:cls{p.num_classes}:t{tokens}"] = ("head", embed, (tokens, embed))
        return units

    def _build_unit(self, kind: str, spec: Any) -> nn.Module:
        """The patch embedding (with class token and position embedding), one timm ``Block``, or the head."""
        from timm.models.vision_transformer import Block

        p = self.params
        m = _torch_modules()
        if kind == "embed":
            return m.Embed(img_size=p.resolution, patch_size=spec[0], in_chans=p.in_chans, embed_dim=spec[1])
        if kind == "block":
            embed, heads, ratio = spec
            return Block(embed, heads, mlp_ratio=ratio, qkv_bias=p.qkv_bias)
        return m.Head(spec, p.num_classes)

    def build(self, arch: Architecture) -> nn.Module:
        """A standalone ViT with random init from timm's ``PatchEmbed`` and ``Block``."""
        import torch.nn as nn
        from timm.models.vision_transformer import Block

        p = self.params
        patch, embed, _tokens, blocks = self._blocks(arch)
        model = _torch_modules().ViT(
            img_size=p.resolution, patch_size=patch, in_chans=p.in_chans, embed_dim=embed,
            blocks=nn.Sequential(*(Block(embed, h, mlp_ratio=ratio, qkv_bias=p.qkv_bias) for h, ratio in blocks)),
            num_classes=p.num_classes,
        )
        log.debug("built vit (patch %d, embed %d, depth %d) for %s", patch, embed, len(blocks), arch.arch_id)
        return model


@functools.cache
def _torch_modules() -> SimpleNamespace:
    """The network wrapper around timm's blocks (defined on first use: torch stays out of import)."""
    import torch
    import torch.nn as nn
    from timm.layers import PatchEmbed, trunc_normal_

    def add_embedding(mod: nn.Module, *, img_size: int, patch_size: int, in_chans: int, embed_dim: int) -> None:
        mod.patch_embed = PatchEmbed(img_size=img_size, patch_size=patch_size, in_chans=in_chans, embed_dim=embed_dim)
        num_tokens = mod.patch_embed.num_patches + 1
        mod.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        mod.pos_embed = nn.Parameter(torch.zeros(1, num_tokens, embed_dim))
        trunc_normal_(mod.pos_embed, std=0.02)
        nn.init.normal_(mod.cls_token, std=1e-6)

    def embed(mod: Any, x: torch.Tensor) -> torch.Tensor:
        x = mod.patch_embed(x)
        return torch.cat([mod.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + mod.pos_embed

    def add_head(mod: nn.Module, embed_dim: int, num_classes: int) -> None:
        mod.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        mod.head = nn.Linear(embed_dim, num_classes)

    def classify(mod: Any, x: torch.Tensor) -> torch.Tensor:
        return mod.head(mod.norm(x)[:, 0])

    class Embed(nn.Module):
        """timm's ``PatchEmbed``, then the class token prepended and the position embedding added (a unit)."""

        def __init__(self, **kwargs: int) -> None:
            super().__init__()
            add_embedding(self, **kwargs)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return embed(self, x)

    class Head(nn.Module):
        """The final LayerNorm and a linear classifier on the class token (a unit)."""

        def __init__(self, embed_dim: int, num_classes: int) -> None:
            super().__init__()
            add_head(self, embed_dim, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return classify(self, x)

    class ViT(nn.Module):
        """Patch embedding, class token, position embedding, blocks, LayerNorm, linear head on the class token.

        The embedding and the head run the same code as the :class:`Embed` and :class:`Head` units that the
        latency table times.
        """

        def __init__(self, *, img_size: int, patch_size: int, in_chans: int, embed_dim: int, blocks: nn.Module,
                     num_classes: int) -> None:
            super().__init__()
            add_embedding(self, img_size=img_size, patch_size=patch_size, in_chans=in_chans, embed_dim=embed_dim)
            self.blocks = blocks
            add_head(self, embed_dim, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return classify(self, self.blocks(embed(self, x)))

    return SimpleNamespace(ViT=ViT, Embed=Embed, Head=Head)


__all__ = ["AUTOFORMER_TINY", "ViTParams", "ViTSpace"]
