"""AutoFormer-style weight-entangled supernet for the ``vit`` space (Chen et al., ICCV 2021).

One largest vision transformer holds every weight; a subnet computes with the leading slices of it
("weight entanglement": a narrower or shallower subnet is a corner of a wider or deeper one, never a
separate set of weights). With ``M`` the largest embedding dimension and, for an architecture,
``e`` its embedding dimension, ``p`` its patch size and per block ``h`` heads and hidden width
``d = int(e * mlp / 10)`` (exactly what timm's ``Block`` computes from the space's ratio):

Sliced from the largest (leading slices):

- embedding dimension ``e``: output channels ``[:e]`` of the patch-embedding convolution (weight
  and bias), channels ``[:e]`` of the class token and of the position embedding, ``[:e]`` of every
  LayerNorm's weight and bias (the norm is computed over the ``e`` active dims only, exactly as a
  standalone ``LayerNorm(e)``), input columns ``[:e]`` of ``qkv`` and of ``fc1``, input columns and
  output rows ``[:e]`` of the attention ``proj``, output rows ``[:e]`` of ``fc2``, ``[:e]`` of the
  final norm and input columns ``[:e]`` of the head (whose output width is always ``num_classes``);
- attention: the largest ``qkv`` is a ``Linear(M, 3 * M)`` whose rows are three blocks of ``M``
  (query, key, value, as timm lays them out); width ``e`` takes rows ``[0:e]``, ``[M:M+e]`` and
  ``[2M:2M+e]`` (the leading ``e`` rows of each block) and columns ``[0:e]``, and the same rows of
  the bias. The number of heads only changes how those ``e`` query/key/value features are split
  (``head_dim = e // h``, scale ``head_dim ** -0.5``, as timm's ``Attention``): two subnets that
  differ only in heads use the very same tensors and compute different functions;
- MLP hidden width ``d``: rows ``[:d]`` of ``fc1`` (weight and bias) and columns ``[:d]`` of ``fc2``;
- depth: the first ``depth`` blocks (block ``i`` of every subnet is block ``i`` of the largest).

Separate per choice:

- patch size: one patch-embedding convolution (``patch_embed[str(p)]``, ``M`` output channels) and
  one position embedding (``pos_embed[str(p)]``, ``(R / p) ** 2 + 1`` tokens of ``M`` channels) per
  patch size, since the kernel shape and the token count differ; the embedding dimension is still
  sliced from each. The class token is shared by all patch sizes.

Initialisation follows timm's ViT, every tensor drawn from the constructor's generator (the global
RNG is left alone): ``trunc_normal(std=0.02)`` for every Linear weight, zero biases, LayerNorms
ones and zeros, position embeddings ``trunc_normal(std=0.02)``, class token ``normal(std=1e-6)``;
the patch-embedding convolutions keep PyTorch's default scale (timm leaves them at it),
``uniform(+-1 / sqrt(in_chans * p * p))`` for weight and bias.

Training phases: ``("largest", "uniform")`` -- a warm-up that trains only the largest subnet, then
AutoFormer's uniform sampling of every gene (patch, embed, depth, heads and MLP ratio of each block);
the sandwich (largest, smallest, random) is the trainer's business. ``Params(warmup=False)`` gives
AutoFormer's single ``("uniform",)`` phase. The *largest* subnet is the most expensive one: the
largest embedding dimension, depth, head count and MLP ratio, and the **smallest** patch size (the
most tokens); the smallest subnet is the reverse (largest patch size, fewest tokens).

``extract(arch)`` builds the space's own standalone timm network and copies these slices into it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.search_spaces.base import int_gene
from hwnas.supernet.base import SupernetParams, bind_space

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.search_spaces.vit import ViTSpace

LN_EPS = 1e-6
"""LayerNorm epsilon of timm's ``Block`` (timm's ``LayerNorm`` default) and of the space's final norm."""


class ViTSupernetParams(SupernetParams):
    """Parameters of :class:`ViTSupernet`.

    Attributes:
        warmup: Train the largest subnet alone first (phases ``("largest", "uniform")``); ``False``
            gives AutoFormer's single ``("uniform",)`` phase.
    """

    warmup: bool = True


class _Block(nn.Module):
    """The largest transformer block's weights (names as in timm's ``Block``); computed functionally."""

    def __init__(self, dim: int, hidden: int, qkv_bias: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        self.attn = nn.Module()
        self.attn.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.attn.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = nn.Module()
        self.mlp.fc1 = nn.Linear(dim, hidden)
        self.mlp.fc2 = nn.Linear(hidden, dim)


class ViTSupernet(nn.Module):
    """Weight-entangled ViT supernet (AutoFormer) over the ``vit`` space; see the module docstring.

    Args:
        space: A ``ViTSpace`` instance.
        generator: Seeded generator every initial weight is drawn from.
        **params: :class:`ViTSupernetParams` fields.
    """

    space_name = "vit"
    space: ViTSpace  # the registered space named space_name (bind_space checks it)
    num_classes: int
    params: ViTSupernetParams
    Params = ViTSupernetParams

    def __init__(self, *, space: SearchSpace, generator: torch.Generator, **params: object) -> None:
        super().__init__()
        bind_space(self, space, params)
        p = self.space.params
        self.phases: tuple[str, ...] = ("largest", "uniform") if self.params.warmup else ("uniform",)
        self.max_embed = max(p.embed_dims)
        self.max_depth = max(p.depths)
        self._mlp_tenths = tuple(int(round(r * 10)) for r in p.mlp_ratios)  # the mlp genes' choices
        self.max_hidden = max(_hidden(e, t) for e in p.embed_dims for t in self._mlp_tenths)
        m = self.max_embed
        with torch.random.fork_rng(devices=[]):  # module constructors draw default inits from the global RNG
            self.patch_embed = nn.ModuleDict({
                str(ps): nn.Conv2d(p.in_chans, m, kernel_size=ps, stride=ps) for ps in p.patch_sizes
            })
            self.pos_embed = nn.ParameterDict({
                str(ps): nn.Parameter(torch.zeros(1, (p.resolution // ps) ** 2 + 1, m)) for ps in p.patch_sizes
            })
            self.cls_token = nn.Parameter(torch.zeros(1, 1, m))
            self.blocks = nn.ModuleList(_Block(m, self.max_hidden, p.qkv_bias) for _ in range(self.max_depth))
            self.norm = nn.LayerNorm(m, eps=LN_EPS)
            self.head = nn.Linear(m, self.num_classes)
        self._init_weights(generator)

    @torch.no_grad()
    def _init_weights(self, g: torch.Generator) -> None:
        """timm's ViT initialisation, every draw from ``g`` in a fixed order."""
        for ps, conv in self.patch_embed.items():
            assert isinstance(conv, nn.Conv2d)
            bound = (conv.in_channels * int(ps) ** 2) ** -0.5
            nn.init.uniform_(conv.weight, -bound, bound, generator=g)
            assert conv.bias is not None
            nn.init.uniform_(conv.bias, -bound, bound, generator=g)
        for pos in self.pos_embed.values():
            nn.init.trunc_normal_(pos, std=0.02, generator=g)
        nn.init.normal_(self.cls_token, std=1e-6, generator=g)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02, generator=g)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    # -- the subnet's slices ------------------------------------------------------------------------
    def _genes(self, arch: Architecture) -> tuple[int, int, list[tuple[int, int]]]:
        """(patch, embed, [(heads, MLP hidden width) per active block]) of a canonicalized ``arch``."""
        g = self.space.canonicalize(arch).genes
        embed = int_gene(g, "embed")
        blocks = [(int_gene(g, f"heads{i}"), _hidden(embed, int_gene(g, f"mlp{i}")))
                  for i in range(int_gene(g, "depth"))]
        return int_gene(g, "patch"), embed, blocks

    def _qkv(self, block: _Block, e: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Rows ``[0:e]``, ``[M:M+e]``, ``[2M:2M+e]`` and columns ``[0:e]`` of the largest qkv (and its bias)."""
        m = self.max_embed
        qkv = block.attn.qkv
        assert isinstance(qkv, nn.Linear)
        weight = qkv.weight.view(3, m, m)[:, :e, :e].reshape(3 * e, e)
        bias = None if qkv.bias is None else qkv.bias.view(3, m)[:, :e].reshape(3 * e)
        return weight, bias

    @staticmethod
    def _linear(layer: Any, rows: int | None, cols: int | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Leading ``rows`` output rows and ``cols`` input columns of a Linear (``None``: all)."""
        weight = layer.weight[:rows, :cols]
        bias = None if layer.bias is None else layer.bias[:rows]
        return weight, bias

    # -- forward -------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        """Logits of ``arch`` on ``x`` (``(batch, in_chans, R, R)``), computed with its slices of the shared weights.

        Raises:
            InvalidArchitecture: ``arch`` is not a member of the space (names the gene).
        """
        patch, e, blocks = self._genes(arch)
        conv = self.patch_embed[str(patch)]
        assert isinstance(conv, nn.Conv2d) and conv.bias is not None
        tokens = F.conv2d(x, conv.weight[:e], conv.bias[:e], stride=patch).flatten(2).transpose(1, 2)
        batch = tokens.shape[0]
        cls = self.cls_token[:, :, :e].expand(batch, -1, -1)
        h = torch.cat([cls, tokens], dim=1) + self.pos_embed[str(patch)][:, :, :e]
        n = h.shape[1]
        for block, (heads, hidden) in zip(self.blocks, blocks):
            assert isinstance(block, _Block)
            y = F.layer_norm(h, (e,), block.norm1.weight[:e], block.norm1.bias[:e], LN_EPS)
            qkv = F.linear(y, *self._qkv(block, e))
            q, k, v = qkv.reshape(batch, n, 3, heads, e // heads).permute(2, 0, 3, 1, 4).unbind(0)
            a = F.scaled_dot_product_attention(q, k, v, scale=(e // heads) ** -0.5)
            a = a.transpose(1, 2).reshape(batch, n, e)
            h = h + F.linear(a, *self._linear(block.attn.proj, e, e))
            y = F.layer_norm(h, (e,), block.norm2.weight[:e], block.norm2.bias[:e], LN_EPS)
            y = F.gelu(F.linear(y, *self._linear(block.mlp.fc1, hidden, e)))
            h = h + F.linear(y, *self._linear(block.mlp.fc2, e, hidden))
        h = F.layer_norm(h, (e,), self.norm.weight[:e], self.norm.bias[:e], LN_EPS)
        return F.linear(h[:, 0], *self._linear(self.head, None, e))

    # -- extraction ----------------------------------------------------------------------------------
    def extract(self, arch: Architecture) -> nn.Module:
        """The space's standalone network for ``arch`` (``space.build``) holding copies of its slices, in eval mode.

        Raises:
            InvalidArchitecture: ``arch`` is not a member of the space (names the gene).
        """
        patch, e, blocks = self._genes(arch)
        with torch.random.fork_rng(devices=[]):  # build() initialises with the global RNG; leave it untouched
            model: Any = self.space.build(self.space.canonicalize(arch))  # its parts are read by name
        device = self.cls_token.device
        model.to(device=device)
        conv = self.patch_embed[str(patch)]
        assert isinstance(conv, nn.Conv2d) and conv.bias is not None
        with torch.no_grad():
            model.patch_embed.proj.weight.copy_(conv.weight[:e])
            model.patch_embed.proj.bias.copy_(conv.bias[:e])
            model.cls_token.copy_(self.cls_token[:, :, :e])
            model.pos_embed.copy_(self.pos_embed[str(patch)][:, :, :e])
            for src, dst, (_heads, hidden) in zip(self.blocks, model.blocks, blocks):
                assert isinstance(src, _Block)
                _copy_norm(dst.norm1, src.norm1, e)
                weight, bias = self._qkv(src, e)
                dst.attn.qkv.weight.copy_(weight)
                if bias is not None:
                    dst.attn.qkv.bias.copy_(bias)
                _copy_linear(dst.attn.proj, *self._linear(src.attn.proj, e, e))
                _copy_norm(dst.norm2, src.norm2, e)
                _copy_linear(dst.mlp.fc1, *self._linear(src.mlp.fc1, hidden, e))
                _copy_linear(dst.mlp.fc2, *self._linear(src.mlp.fc2, e, hidden))
            _copy_norm(model.norm, self.norm, e)
            _copy_linear(model.head, *self._linear(self.head, None, e))
        return model.eval()

    # -- training protocol ---------------------------------------------------------------------------
    def largest(self) -> Architecture:
        """The most expensive member: largest embed, depth, heads and MLP ratio, SMALLEST patch (most tokens)."""
        p = self.space.params
        return self._uniform_arch(min(p.patch_sizes), max(p.embed_dims), max(p.depths), max(p.num_heads),
                                  max(self._mlp_tenths))

    def smallest(self, phase: str) -> Architecture:
        """The cheapest member reachable in ``phase``: in ``"uniform"`` the smallest embed, depth, heads and MLP
        ratio and the LARGEST patch (fewest tokens); in ``"largest"`` the largest member."""
        self._check_phase(phase)
        if phase == "largest":
            return self.largest()
        p = self.space.params
        return self._uniform_arch(max(p.patch_sizes), min(p.embed_dims), min(p.depths), min(p.num_heads),
                                  min(self._mlp_tenths))

    def sample_subnet(self, rng: np.random.Generator, phase: str) -> Architecture:
        """``"largest"``: the largest member; ``"uniform"``: every gene drawn uniformly from ``rng`` (AutoFormer)."""
        self._check_phase(phase)
        if phase == "largest":
            return self.largest()
        arch: Architecture = self.space.sample(rng)
        return arch

    def begin_phase(self, phase: str) -> None:
        """Nothing to prepare (checks the phase name)."""
        self._check_phase(phase)

    def _check_phase(self, phase: str) -> None:
        if phase not in self.phases:
            raise ConfigError(
                f"supernet {self.space_name!r}: unknown phase {phase!r} (phases: {', '.join(self.phases)})"
            )

    def _uniform_arch(self, patch: int, embed: int, depth: int, heads: int, mlp: int) -> Architecture:
        genes: dict[str, int] = {"patch": patch, "embed": embed, "depth": depth}
        for i in range(self.max_depth):
            genes[f"heads{i}"] = heads if i < depth else 0
            genes[f"mlp{i}"] = mlp if i < depth else 0
        arch: Architecture = self.space.canonicalize(Architecture(self.space_name, genes))
        return arch


def _hidden(embed: int, mlp_tenths: int) -> int:
    """MLP hidden width exactly as the space's build gets it: timm's ``int(dim * mlp_ratio)``, ratio ``tenths / 10``."""
    return int(embed * (mlp_tenths / 10))


def _copy_linear(dst: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    dst.weight.copy_(weight)
    if bias is not None:
        dst.bias.copy_(bias)


def _copy_norm(dst: nn.LayerNorm, src: nn.LayerNorm, e: int) -> None:
    dst.weight.copy_(src.weight[:e])
    dst.bias.copy_(src.bias[:e])


__all__ = ["ViTSupernet", "ViTSupernetParams"]
