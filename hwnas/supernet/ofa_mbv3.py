"""Once-for-all supernets (Cai et al., ICLR 2020) for the MobileNetV3 spaces ``ofa_mbv3`` and ``mbv3``.

One elastic inverted-residual block is stored per block *position* (stage ``s``, position ``b`` up to
the stage's largest depth); every architecture is a path through these blocks. What an architecture
uses of the shared weights:

- **Depth** (``d{s}``): the first ``d`` blocks of each stage; deeper blocks are skipped, so block
  ``b`` of a stage serves every architecture of depth greater than ``b``.
- **Expand ratio** (``e...``): each block holds the expansion 1x1 conv, its batch norm, the depthwise
  conv, its batch norm, the squeeze-excite convs and the projection 1x1 conv at the *largest*
  expanded width. An expand ratio ``e`` uses the leading ``mid = make_divisible(cin * e)`` channels of
  all of them (output rows of the expansion conv, batch-norm affine parameters *and* running
  statistics, depthwise filters, input columns of the projection conv). Squeeze-excite uses the leading
  ``mid`` input / output channels and the leading ``rd(mid)`` reduced channels, ``rd`` being the
  space's own rounding (``ofa_mbv3``: ``make_divisible(mid / 4, 8)``; ``mbv3``: ``round(mid / 4)``,
  timm's default). :meth:`begin_phase` ``("expand")`` first sorts each block's expanded channels by
  importance (L1 norm of the projection conv's input columns, descending) and its reduced
  squeeze-excite channels likewise (L1 norm of the excite conv's input columns), permuting every tensor
  that touches them so that the largest network computes the same function, and the narrow subnets
  keep the most important channels.
- **Kernel size** (``ks...`` / ``k...``): each depthwise conv stores only the largest kernel (7x7 by
  default). A smaller kernel is the centre crop of the next larger *effective* kernel multiplied by a
  learned kernel-transformation matrix, in chain through the sorted kernel choices (7 -> 5 -> 3): the
  5x5 kernel is ``crop5(W7) @ T_{7to5}^T`` (25x25), the 3x3 kernel ``crop3(K5) @ T_{5to3}^T`` (9x9).
  The matrices are separate per block and per transition, shared across channels, and start as the
  identity (a plain centre crop).
- **Resolution** (``ofa_mbv3``'s ``r``): nothing is per resolution; the network ends in global pooling
  and takes whatever input it is given (the trainer feeds ``space.input_shape_of(arch)``).

Shared by every architecture, at a fixed width: ``ofa_mbv3``'s first conv, fixed first block
(depthwise-separable), final 1x1 expand, feature mix and classifier; ``mbv3``'s stem and head.

Training follows progressive shrinking: phases ``("largest", "kernel", "depth", "expand")``; in a phase
the dimensions unlocked up to it are drawn at random (resolution in every phase), the others held at
their largest. :meth:`extract` builds the space's own standalone network (timm blocks) and copies the
sliced weights, the *transformed* depthwise kernel and the batch-norm statistics into it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from timm.layers import make_divisible as timm_make_divisible
from timm.models._efficientnet_blocks import DepthwiseSeparableConv
from torch import nn

import hwnas.search_spaces.ofa as ofa_space
from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.supernet.base import SupernetParams, bind_space, init_mobile_weights, relaxation_weights

if TYPE_CHECKING:
    from hwnas.search_spaces.base import Gene, SearchSpace
    from hwnas.search_spaces.mbv3 import MobileNetV3Space
    from hwnas.search_spaces.ofa import OFAMobileNetV3Space

PHASES: tuple[str, ...] = ("largest", "kernel", "depth", "expand")
"""Progressive-shrinking phases in training order."""

_UNLOCKED: dict[str, frozenset[str]] = {
    "largest": frozenset({"resolution"}),
    "kernel": frozenset({"resolution", "kernel"}),
    "depth": frozenset({"resolution", "kernel", "depth"}),
    "expand": frozenset({"resolution", "kernel", "depth", "expand"}),
}
"""Gene kinds drawn at random in each phase (the others are held at their largest value)."""

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "hard_swish": F.hardswish,
}


def _dw_padding(kernel: int, stride: int) -> int:
    """The symmetric padding timm's ``create_conv2d(..., padding='')`` gives a depthwise conv."""
    return ((stride - 1) + (kernel - 1)) // 2


def _ofa_se_width(mid: int) -> int:
    """Reduced squeeze-excite width of ``ofa_mbv3``'s build(): ``make_divisible(mid / 4, 8)`` (OFA's rounding)."""
    return int(ofa_space.make_divisible(mid * 0.25))


def _timm_se_width(mid: int) -> int:
    """Reduced squeeze-excite width of ``mbv3``'s build(): timm's default ``round(mid * rd_ratio)``, rd_ratio 0.25."""
    return int(round(mid * 0.25))


def _batch_norm(x: torch.Tensor, bn: nn.BatchNorm2d, channels: int) -> torch.Tensor:
    """Batch norm over the leading ``channels`` of ``bn``: sliced affine parameters and running statistics.

    In training mode the running statistics of the slice are updated in place (the slices are views).
    """
    mean, var, tracked = bn.running_mean, bn.running_var, bn.num_batches_tracked
    assert mean is not None and var is not None and bn.weight is not None and bn.bias is not None
    if bn.training and isinstance(tracked, torch.Tensor):
        tracked.add_(1)
    return F.batch_norm(x, mean[:channels], var[:channels], bn.weight[:channels], bn.bias[:channels],
                        bn.training, 0.0 if bn.momentum is None else bn.momentum, bn.eps)


def _copy(dst: torch.Tensor, src: torch.Tensor, what: str) -> None:
    """``dst.copy_(src)`` of tensors of the same shape (copy_ alone would broadcast a mismatch)."""
    if tuple(dst.shape) != tuple(src.shape):
        raise RuntimeError(f"extract: {what} has shape {tuple(dst.shape)} in the built network, "
                           f"{tuple(src.shape)} in the supernet")
    dst.copy_(src)


def _copy_bn(dst: nn.Module, src: nn.BatchNorm2d, channels: int, what: str) -> None:
    """Copy the leading ``channels`` of ``src``'s affine parameters and running statistics into ``dst``."""
    for name in ("weight", "bias", "running_mean", "running_var"):
        _copy(getattr(dst, name), getattr(src, name)[:channels], f"{what}.{name}")
    if isinstance(dst.num_batches_tracked, torch.Tensor) and isinstance(src.num_batches_tracked, torch.Tensor):
        dst.num_batches_tracked.copy_(src.num_batches_tracked)


class ElasticMBConv(nn.Module):
    """An inverted-residual block with elastic kernel size and expand ratio (one block position).

    Args:
        in_channels: Input channels.
        out_channels: Output channels.
        stride: Stride of the depthwise conv.
        kernels: Depthwise kernel choices (the largest is stored; the others are transformed crops).
        expands: Expand-ratio choices; ``e`` uses ``timm.layers.make_divisible(in_channels * e)`` channels.
        act: Activation of the block (``"relu"`` or ``"hard_swish"``).
        se_reduce: Reduced squeeze-excite width for a given expanded width, or None for no squeeze-excite.
        se_act: Activation between the squeeze-excite convs.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        *,
        stride: int,
        kernels: Sequence[int],
        expands: Sequence[int],
        act: str,
        se_reduce: Callable[[int], int] | None,
        se_act: str = "relu",
    ) -> None:
        super().__init__()
        self.in_channels, self.out_channels, self.stride = in_channels, out_channels, stride
        self.kernels: tuple[int, ...] = tuple(sorted(set(kernels)))
        self.mids: dict[int, int] = {int(e): int(timm_make_divisible(in_channels * float(e))) for e in expands}
        self.max_mid = max(self.mids.values())
        self.has_skip = stride == 1 and in_channels == out_channels
        self.act = _ACTIVATIONS[act]
        self.se_act = _ACTIVATIONS[se_act]
        self.se_reduce_width = se_reduce
        k_max = self.kernels[-1]
        mid = self.max_mid
        self.conv_pw = nn.Conv2d(in_channels, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv_dw = nn.Conv2d(mid, mid, k_max, stride=stride, padding=_dw_padding(k_max, stride), groups=mid,
                                 bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        # one matrix per transition of the sorted kernel chain, e.g. "7to5" (25x25) and "5to3" (9x9)
        self.kernel_transforms = nn.ParameterDict({
            f"{big}to{small}": nn.Parameter(torch.eye(small * small))
            for small, big in zip(self.kernels[:-1], self.kernels[1:])
        })
        self.se_conv_reduce: nn.Conv2d | None = None
        self.se_conv_expand: nn.Conv2d | None = None
        if se_reduce is not None:
            rd = se_reduce(mid)
            self.se_conv_reduce = nn.Conv2d(mid, rd, 1, bias=True)
            self.se_conv_expand = nn.Conv2d(rd, mid, 1, bias=True)
        self.conv_pwl = nn.Conv2d(mid, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)

    def effective_kernel(self, kernel: int, mid: int) -> torch.Tensor:
        """The depthwise filters ``(mid, 1, kernel, kernel)`` of ``kernel``: transformed crops, in chain."""
        if kernel not in self.kernels:
            raise ValueError(f"kernel {kernel} is not one of {self.kernels}")
        chain = self.kernels[self.kernels.index(kernel):]  # e.g. (3, 5, 7) for 3: transform 7 -> 5, then 5 -> 3
        weight = self.conv_dw.weight[:mid]
        current = chain[-1]
        for small in reversed(chain[:-1]):
            start = (current - small) // 2
            crop = weight[:, :, start:start + small, start:start + small].reshape(mid, small * small)
            matrix = self.kernel_transforms[f"{current}to{small}"]
            weight = F.linear(crop, matrix).reshape(mid, 1, small, small)
            current = small
        return weight

    def forward(self, x: torch.Tensor, kernel: int, expand: int) -> torch.Tensor:
        """The block with depthwise kernel ``kernel`` and expand ratio ``expand``."""
        mid = self.mids[expand]
        h = F.conv2d(x, self.conv_pw.weight[:mid])
        h = self.act(_batch_norm(h, self.bn1, mid))
        h = F.conv2d(h, self.effective_kernel(kernel, mid), None, self.stride, _dw_padding(kernel, self.stride), 1,
                     mid)
        h = self.act(_batch_norm(h, self.bn2, mid))
        if self.se_conv_reduce is not None and self.se_conv_expand is not None and self.se_reduce_width is not None:
            rd = self.se_reduce_width(mid)
            reduce, excite = self.se_conv_reduce, self.se_conv_expand
            assert reduce.bias is not None and excite.bias is not None
            s = h.mean((2, 3), keepdim=True)
            s = self.se_act(F.conv2d(s, reduce.weight[:rd, :mid], reduce.bias[:rd]))
            s = F.conv2d(s, excite.weight[:mid, :rd], excite.bias[:mid])
            h = h * F.hardsigmoid(s)
        h = F.conv2d(h, self.conv_pwl.weight[:, :mid])
        h = _batch_norm(h, self.bn3, self.out_channels)
        return h + x if self.has_skip else h

    @torch.no_grad()
    def sort_channels(self) -> None:
        """Reorder the expanded (and reduced squeeze-excite) channels by importance, most important first.

        Every tensor that touches a channel is permuted alike, so the largest block computes the same
        function; a narrower expand ratio then keeps the most important channels.
        """
        importance = self.conv_pwl.weight.abs().sum(dim=(0, 2, 3))
        perm = torch.sort(importance, descending=True, stable=True).indices
        self.conv_pw.weight.copy_(self.conv_pw.weight[perm])
        for bn in (self.bn1, self.bn2):
            for t in (bn.weight, bn.bias, bn.running_mean, bn.running_var):
                assert t is not None
                t.copy_(t[perm])
        self.conv_dw.weight.copy_(self.conv_dw.weight[perm])
        self.conv_pwl.weight.copy_(self.conv_pwl.weight[:, perm])
        if self.se_conv_reduce is not None and self.se_conv_expand is not None:
            reduce, excite = self.se_conv_reduce, self.se_conv_expand
            assert reduce.bias is not None and excite.bias is not None
            reduce.weight.copy_(reduce.weight[:, perm])
            excite.weight.copy_(excite.weight[perm])
            excite.bias.copy_(excite.bias[perm])
            rd_importance = excite.weight.abs().sum(dim=(0, 2, 3))
            rd_perm = torch.sort(rd_importance, descending=True, stable=True).indices
            reduce.weight.copy_(reduce.weight[rd_perm])
            reduce.bias.copy_(reduce.bias[rd_perm])
            excite.weight.copy_(excite.weight[:, rd_perm])

    @torch.no_grad()
    def export_to(self, block: Any, kernel: int, expand: int, what: str) -> None:
        """Copy this block's weights for ``kernel``/``expand`` into timm's ``InvertedResidual`` ``block``."""
        mid = self.mids[expand]
        dw: Any = block.conv_dw
        pad = _dw_padding(kernel, self.stride)
        if tuple(dw.padding) != (pad, pad) or tuple(dw.stride) != (self.stride, self.stride):
            raise RuntimeError(f"extract: {what}.conv_dw has padding {dw.padding} and stride {dw.stride}, "
                               f"the supernet computes padding {pad}, stride {self.stride}")
        if bool(block.has_skip) != self.has_skip:
            raise RuntimeError(f"extract: {what} has_skip={block.has_skip}, the supernet's is {self.has_skip}")
        _copy(block.conv_pw.weight, self.conv_pw.weight[:mid], f"{what}.conv_pw.weight")
        _copy_bn(block.bn1, self.bn1, mid, f"{what}.bn1")
        _copy(dw.weight, self.effective_kernel(kernel, mid), f"{what}.conv_dw.weight")
        _copy_bn(block.bn2, self.bn2, mid, f"{what}.bn2")
        se: Any = block.se
        if self.se_conv_reduce is not None and self.se_conv_expand is not None and self.se_reduce_width is not None:
            if not hasattr(se, "conv_reduce"):
                raise RuntimeError(f"extract: {what} has no squeeze-excite, the supernet's block has one")
            rd = self.se_reduce_width(mid)
            reduce, excite = self.se_conv_reduce, self.se_conv_expand
            assert reduce.bias is not None and excite.bias is not None
            _copy(se.conv_reduce.weight, reduce.weight[:rd, :mid], f"{what}.se.conv_reduce.weight")
            _copy(se.conv_reduce.bias, reduce.bias[:rd], f"{what}.se.conv_reduce.bias")
            _copy(se.conv_expand.weight, excite.weight[:mid, :rd], f"{what}.se.conv_expand.weight")
            _copy(se.conv_expand.bias, excite.bias[:mid], f"{what}.se.conv_expand.bias")
        elif hasattr(se, "conv_reduce"):
            raise RuntimeError(f"extract: {what} has squeeze-excite, the supernet's block has none")
        _copy(block.conv_pwl.weight, self.conv_pwl.weight[:, :mid], f"{what}.conv_pwl.weight")
        _copy_bn(block.bn3, self.bn3, self.out_channels, f"{what}.bn3")


class _ElasticMobileNetV3(nn.Module):
    """What both supernets share: stages of elastic blocks, gene kinds, phases, sampling, extraction."""

    space_name: ClassVar[str] = ""
    space: OFAMobileNetV3Space | MobileNetV3Space  # the registered space named space_name (bind_space checks it)
    num_classes: int
    params: SupernetParams
    Params: ClassVar[type[SupernetParams]] = SupernetParams
    phases: tuple[str, ...] = PHASES

    def __init__(self, *, space: SearchSpace, generator: torch.Generator, **params: object) -> None:
        super().__init__()
        bind_space(self, space, params)
        self._kinds: dict[str, str] = self._gene_kinds()
        seed = int(torch.randint(2**62, (1,), generator=generator))
        with torch.random.fork_rng(devices=[]):  # module constructors draw default inits from the global RNG
            torch.manual_seed(seed)
            self._build_modules()
        self._init_weights(generator)

    # -- to define ------------------------------------------------------------------------------
    def _build_modules(self) -> None:
        """Create the fixed modules and ``self.stages`` (an ``nn.ModuleList`` per stage of ElasticMBConv)."""
        raise NotImplementedError

    def _gene_kinds(self) -> dict[str, str]:
        """Gene name to its kind: ``resolution``, ``depth``, ``kernel`` or ``expand``."""
        raise NotImplementedError

    def _block_genes(self, stage: int, position: int) -> tuple[str, str]:
        """Names of the (kernel, expand) genes of block ``position`` of ``stage``."""
        raise NotImplementedError

    def _stem(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _export_fixed(self, model: nn.Module) -> None:
        """Copy the fixed-width parts into the built network."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------
    def _init_weights(self, generator: torch.Generator) -> None:
        """He fan-out normal convs, unit/zero batch norms, uniform classifier; all draws from ``generator``."""
        init_mobile_weights(self, generator)

    def _stage_blocks(self) -> list[list[ElasticMBConv]]:
        stages: Any = self.stages
        return [list(stage) for stage in stages]

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        """Logits of ``arch`` on ``x`` (any spatial size; ``ofa_mbv3``'s ``r`` gene is the trainer's to apply).

        Raises:
            InvalidArchitecture: ``arch`` is not a member of the space (names the gene).
        """
        g: Mapping[str, Any] = self.space.canonicalize(arch).genes
        h = self._stem(x)
        for s, blocks in enumerate(self._stage_blocks()):
            for b in range(int(g[f"d{s}"])):
                kernel_gene, expand_gene = self._block_genes(s, b)
                h = blocks[b](h, int(g[kernel_gene]), int(g[expand_gene]))
        return self._head(h)

    def forward_relaxed(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits of the mixture that weights every elastic choice (ProxylessNAS's relaxation of this supernet).

        - A block outputs ``sum_{k, e} w_kernel[k] * w_expand[e] * block(h, k, e)``.
        - A stage outputs ``sum_d w_depth[d] * h_d``, ``h_d`` its input after its first ``d`` blocks; blocks past
          the largest depth with a non-zero weight are not run.
        - ``ofa_mbv3``'s resolution: ``sum_r w_r * net(x resized to r)`` (bilinear; not resized at its own size).

        Choices (and resolutions, depths, kernel/expand pairs) whose weight is exactly 0 are not computed, so
        one-hot (binarised) weights run one path; the one-hot weights of an architecture reproduce
        ``forward(x, arch)`` on an input at that architecture's resolution.

        Raises:
            ValueError: A gene's weights are missing or of the wrong shape, or a block that runs has only zero
                kernel or expand weights.
        """
        kinds = self._gene_kinds()
        ws, live = relaxation_weights(self.space_name, self.space, weights, x)
        choices = {g.name: g.choices for g in self.space.genes()}
        resolution = [n for n, kind in kinds.items() if kind == "resolution"]
        if not resolution:
            return self._relaxed_net(x, ws, live, choices)
        r = resolution[0]
        total: torch.Tensor | None = None
        for i, size in enumerate(choices[r]):
            if not live[r][i]:
                continue
            xr = x if tuple(x.shape[-2:]) == (size, size) else F.interpolate(
                x, size=(size, size), mode="bilinear", align_corners=False)
            y = ws[r][i] * self._relaxed_net(xr, ws, live, choices)
            total = y if total is None else total + y
        if total is None:
            raise ValueError(f"{self.space_name} supernet: every weight of gene {r!r} is 0")
        return total

    def _relaxed_net(self, x: torch.Tensor, ws: Mapping[str, torch.Tensor], live: Mapping[str, list[bool]],
                     choices: Mapping[str, tuple[int, ...]]) -> torch.Tensor:
        h = self._stem(x)
        for s, blocks in enumerate(self._stage_blocks()):
            d = f"d{s}"
            depths = [int(v) for v, on in zip(choices[d], live[d]) if on]
            if not depths:
                raise ValueError(f"{self.space_name} supernet: every weight of gene {d!r} is 0")
            out: torch.Tensor | None = None
            for b in range(max(depths)):
                kg, eg = self._block_genes(s, b)
                mix: torch.Tensor | None = None
                for ki, k in enumerate(choices[kg]):
                    for ei, e in enumerate(choices[eg]):
                        if live[kg][ki] and live[eg][ei]:
                            y = (ws[kg][ki] * ws[eg][ei]) * blocks[b](h, int(k), int(e))
                            mix = y if mix is None else mix + y
                if mix is None:
                    raise ValueError(f"{self.space_name} supernet: block {b} of stage {s} runs (depth weights "
                                     f"{[float(v) for v in ws[d]]}) but its kernel or expand weights are all 0")
                h = mix
                if b + 1 in depths:
                    i = list(choices[d]).index(b + 1)
                    out = ws[d][i] * h if out is None else out + ws[d][i] * h
            assert out is not None
            h = out
        return self._head(h)

    def extract(self, arch: Architecture) -> nn.Module:
        """``space.build(arch)`` holding copies of ``arch``'s weights (transformed kernels), in eval mode.

        Raises:
            InvalidArchitecture: ``arch`` is not a member of the space (names the gene).
        """
        g: Mapping[str, Any] = self.space.canonicalize(arch).genes
        ref = next(self.parameters())
        with torch.random.fork_rng(devices=[]):  # build() initialises from the global RNG: leave it untouched
            model = self.space.build(arch)
        model = model.to(device=ref.device, dtype=ref.dtype)
        built: Any = model.blocks
        offset = len(built) - sum(int(g[f"d{s}"]) for s in range(len(self._stage_blocks())))
        k = offset
        with torch.no_grad():
            self._export_fixed(model)
            for s, blocks in enumerate(self._stage_blocks()):
                for b in range(int(g[f"d{s}"])):
                    kernel_gene, expand_gene = self._block_genes(s, b)
                    blocks[b].export_to(built[k], int(g[kernel_gene]), int(g[expand_gene]), f"blocks.{k}")
                    k += 1
        return model.eval()

    def _phase_kinds(self, phase: str) -> frozenset[str]:
        if phase not in _UNLOCKED:
            raise ConfigError(f"supernet {self.space_name!r}: unknown phase {phase!r} (phases: {', '.join(PHASES)})")
        return _UNLOCKED[phase]

    def _arch(self, pick: Callable[[Gene, bool], int], unlocked: frozenset[str]) -> Architecture:
        genes = {gene.name: pick(gene, self._kinds[gene.name] in unlocked) for gene in self.space.genes()}
        return self.space.canonicalize(Architecture(self.space.name, genes))

    def largest(self) -> Architecture:
        """Every gene at its largest value (deepest, widest, largest kernels, highest resolution)."""
        return self._arch(lambda gene, _: max(gene.choices), frozenset())

    def smallest(self, phase: str) -> Architecture:
        """The smallest member of ``phase``: unlocked dimensions (and resolution) smallest, the rest largest."""
        return self._arch(lambda gene, free: min(gene.choices) if free else max(gene.choices),
                          self._phase_kinds(phase))

    def sample_subnet(self, rng: np.random.Generator, phase: str) -> Architecture:
        """A random member of ``phase``: unlocked genes uniform (from ``rng``), the others largest."""
        def pick(gene: Gene, free: bool) -> int:
            return int(gene.choices[int(rng.integers(len(gene.choices)))]) if free else max(gene.choices)

        return self._arch(pick, self._phase_kinds(phase))

    def begin_phase(self, phase: str) -> None:
        """Before ``"expand"``: sort every block's expanded channels by importance (no-op for other phases).

        Parameters are permuted in place (same tensor objects): optimizer state such as momentum is
        not permuted, so create the optimizer after this call.
        """
        self._phase_kinds(phase)  # refuses an unknown phase
        if phase == "expand":
            for blocks in self._stage_blocks():
                for block in blocks:
                    block.sort_channels()


class OFAMobileNetV3Supernet(_ElasticMobileNetV3):
    """Once-for-all's MobileNetV3 supernet over the ``ofa_mbv3`` space (elastic kernel, expand, depth, resolution).

    Args:
        space: An ``ofa_mbv3`` space (any width multiplier, resolutions, channels, classes).
        generator: Seeds the weights.
        **params: None.
    """

    space_name = "ofa_mbv3"
    space: OFAMobileNetV3Space

    class Params(SupernetParams):
        """No parameters: the space fixes everything."""

    def _gene_kinds(self) -> dict[str, str]:
        kinds = {"r": "resolution"}
        for s in range(ofa_space.N_STAGES):
            kinds[f"d{s}"] = "depth"
            for b in range(ofa_space.MAX_DEPTH):
                i = ofa_space.block_index(s, b)
                kinds[f"ks{i}"], kinds[f"e{i}"] = "kernel", "expand"
        return kinds

    def _block_genes(self, stage: int, position: int) -> tuple[str, str]:
        i = ofa_space.block_index(stage, position)
        return f"ks{i}", f"e{i}"

    def _build_modules(self) -> None:
        sp = self.space
        genes = {g.name: g for g in sp.genes()}
        c0, c1 = sp.first_conv_width, sp.first_block_width
        self.drop_rate = float(sp.drop_rate)
        self.first_conv = nn.Sequential(
            nn.Conv2d(sp.params.in_chans, c0, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c0), nn.Hardswish(),
        )
        self.first_block = DepthwiseSeparableConv(c0, c1, dw_kernel_size=3, stride=1, act_layer=nn.ReLU, pw_act=False,
                                                  noskip=c0 != c1)

        stages = []
        cin = c1
        for s, cout in enumerate(sp.stage_widths):
            blocks = []
            for b in range(ofa_space.MAX_DEPTH):
                i = ofa_space.block_index(s, b)
                blocks.append(ElasticMBConv(
                    cin, cout, stride=ofa_space.STAGE_STRIDES[s] if b == 0 else 1, kernels=genes[f"ks{i}"].choices,
                    expands=genes[f"e{i}"].choices, act="hard_swish" if ofa_space.STAGE_HSWISH[s] else "relu",
                    se_reduce=_ofa_se_width if ofa_space.STAGE_SE[s] else None, se_act="relu",
                ))
                cin = cout
            stages.append(nn.ModuleList(blocks))
        self.stages = nn.ModuleList(stages)
        fe, fm = sp.final_expand_width, sp.feature_mix_width
        self.final_expand_layer = nn.Sequential(nn.Conv2d(cin, fe, 1, bias=False), nn.BatchNorm2d(fe), nn.Hardswish())
        self.feature_mix_layer = nn.Sequential(nn.Conv2d(fe, fm, 1, bias=False), nn.Hardswish())
        self.classifier = nn.Linear(fm, sp.params.num_classes)

    def _stem(self, x: torch.Tensor) -> torch.Tensor:
        return self.first_block(self.first_conv(x))

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        h = self.feature_mix_layer(F.adaptive_avg_pool2d(self.final_expand_layer(x), 1)).flatten(1)
        h = F.dropout(h, self.drop_rate, training=self.training)
        return self.classifier(h)

    def _export_fixed(self, model: nn.Module) -> None:
        m: Any = model
        for name in ("first_conv", "final_expand_layer", "feature_mix_layer", "classifier"):
            getattr(m, name).load_state_dict(getattr(self, name).state_dict())
        m.blocks[0].load_state_dict(self.first_block.state_dict())


class MobileNetV3Supernet(_ElasticMobileNetV3):
    """Once-for-all supernet over the ``mbv3`` space (timm blocks; elastic kernel, expand ratio and depth).

    Args:
        space: An ``mbv3`` space (any stages, kernels, expand ratios, stem/head widths).
        generator: Seeds the weights.
        **params: None.
    """

    space_name = "mbv3"
    space: MobileNetV3Space

    class Params(SupernetParams):
        """No parameters: the space fixes everything."""

    def _gene_kinds(self) -> dict[str, str]:
        kinds = {}
        for s, st in enumerate(self.space.params.stages):
            kinds[f"d{s}"] = "depth"
            for b in range(max(st.depths)):
                kinds[f"k{s}_{b}"], kinds[f"e{s}_{b}"] = "kernel", "expand"
        return kinds

    def _block_genes(self, stage: int, position: int) -> tuple[str, str]:
        return f"k{stage}_{position}", f"e{stage}_{position}"

    def _build_modules(self) -> None:
        p = self.space.params
        self.stem = nn.Sequential(nn.Conv2d(p.in_chans, p.stem_channels, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(p.stem_channels), nn.Hardswish())

        stages = []
        cin = p.stem_channels
        for st in p.stages:
            blocks = []
            for b in range(max(st.depths)):
                blocks.append(ElasticMBConv(
                    cin, st.channels, stride=st.stride if b == 0 else 1, kernels=p.kernels, expands=p.expand_ratios,
                    act=st.act, se_reduce=_timm_se_width if st.se else None, se_act=st.act,
                ))
                cin = st.channels
            stages.append(nn.ModuleList(blocks))
        self.stages = nn.ModuleList(stages)
        self.head = nn.Sequential(nn.Conv2d(cin, p.head_channels, 1, bias=False), nn.BatchNorm2d(p.head_channels),
                                  nn.Hardswish(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(p.head_channels, p.num_classes))

    def _stem(self, x: torch.Tensor) -> torch.Tensor:
        return self.stem(x)

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)

    def _export_fixed(self, model: nn.Module) -> None:
        m: Any = model
        m.stem.load_state_dict(self.stem.state_dict())
        m.head.load_state_dict(self.head.state_dict())

