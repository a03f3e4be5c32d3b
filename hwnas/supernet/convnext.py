"""Weight-sharing supernet of the ``convnext`` space, on timm's ``ConvNeXtBlock`` / ``MetaNeXtBlock``.

The supernet stores the largest network of the space once, as timm modules, and computes any member with
functional ops (``F.conv2d``, ``F.layer_norm``, ``F.linear``, ``F.batch_norm``) on slices of those weights.
Let ``W_s`` be the largest width of stage ``s``, ``K`` the largest kernel, ``R`` the largest MLP ratio; an
architecture gives stage ``s`` the width ``w_s`` and its block ``b`` the kernel ``k``, ratio ``r``, mixer ``m``.

What is sliced (one tensor shared by every architecture):

- **Stem** (``stem.0`` conv ``W_0 x C_in x S x S``, ``stem.1`` LayerNorm2d): the leading ``w_0`` output
  channels of the conv and the leading ``w_0`` entries of the norm's weight and bias (the norm is computed
  over the ``w_0`` active channels only).
- **Downsampling** of stage ``s > 0`` (``stages.s.downsample.0`` LayerNorm2d over ``W_{s-1}``,
  ``stages.s.downsample.1`` 2x2 stride-2 conv): the norm's leading ``w_{s-1}`` entries; the conv's leading
  ``w_s`` output rows and leading ``w_{s-1}`` input columns.
- **Blocks**, elastic depth: a stage of depth ``d`` runs its first ``d`` blocks; the rest are skipped.
- **A "dw" block** (timm ``ConvNeXtBlock``, channels-last ``Mlp``): ``conv_dw`` stores ``W_s`` depthwise
  ``K x K`` filters; a ``k``-kernel subnet uses the leading ``w_s`` filters, each cropped to its centre
  ``k x k`` window (no transformation matrix); ``norm`` (LayerNorm over the last axis) uses its leading
  ``w_s`` entries; ``mlp.fc1`` (``R*W_s x W_s``) its leading ``r*w_s`` rows and ``w_s`` columns;
  ``mlp.fc2`` its leading ``w_s`` rows and ``r*w_s`` columns; layer scale ``gamma`` its leading ``w_s``.
- **An "inception" block** (timm ``MetaNeXtBlock`` with ``InceptionDWConv2d``, BatchNorm and a 1x1-conv
  ``ConvMlp``): the token mixer stores three depthwise filter banks of ``GC = int(W_s * branch_ratio)``
  filters each (``dwconv_hw``: ``sq x sq``; ``dwconv_w``: ``1 x K``; ``dwconv_h``: ``K x 1``). At width
  ``w`` timm splits the ``w`` channels into ``(w - 3*gc, gc, gc, gc)`` with ``gc = int(w * branch_ratio)``:
  an identity part, then the square, the horizontal-band and the vertical-band branch. **Mapping:** the
  branch channels of a width-``w`` subnet use the *leading* ``gc`` filters of their branch's bank, i.e.
  channel ``w - 3*gc + j`` uses ``dwconv_hw`` filter ``j``, channel ``w - 2*gc + j`` uses ``dwconv_w``
  filter ``j`` and channel ``w - gc + j`` uses ``dwconv_h`` filter ``j`` (``j < gc``). Because the split
  moves with ``w``, one channel index may belong to different branches (or to the identity part) at
  different widths; the filters themselves are always the leading ones of each bank. A band of length
  ``k`` is the centre crop of the stored length-``K`` band along its long axis; the square kernel is
  fixed (``inception_square_kernel``). ``norm`` (BatchNorm2d) uses the leading ``w`` entries of weight,
  bias, ``running_mean`` and ``running_var`` (in training mode the running statistics of exactly that slice
  are updated in place; ``num_batches_tracked`` is shared); ``mlp.fc1`` / ``mlp.fc2`` and ``gamma`` are
  sliced like the "dw" block's.
- **Head** (``head.1`` LayerNorm2d, ``head.3`` Linear): the leading ``w_last`` entries of the norm and
  the leading ``w_last`` input columns of the classifier.

Optionally separate per width (``norm_per_width``): the LayerNorms' weight and bias. A LayerNorm normalises
over the active channels, so the same channel is scaled differently at each width; with the option every
LayerNorm whose size is a stage width keeps one (weight, bias) per narrower width (``width_norms``), copied
from the leading slice of the largest when the width phase begins and trained apart from then on, as
slimmable networks keep a BatchNorm per width. The largest network always uses the stored modules.

What is separate per choice: the token mixer. Each block position stores one full set of weights per
mixer the space allows (``stages.s.blocks.b.dw`` and ``stages.s.blocks.b.inception``), each elastic in
width, kernel (band length) and MLP ratio as above; a block of mixer ``m`` uses only ``m``'s set.

Training phases (once-for-all's progressive shrinking; each unlocks more, the rest held at the largest):
``"largest"`` (nothing elastic), ``"kernel"`` (kernel / band length), ``"depth"`` (+ stage depths),
``"width"`` (+ stage widths *and* MLP ratios: both shrink the channels of the same weight matrices, so
they are unlocked together). The mixer is not a shrinking dimension but a choice between separate weight
sets, so it is drawn at random in every phase (as a resolution gene would be); :meth:`largest` uses
"dw" (a full ``k x k`` depthwise conv on every channel) wherever allowed and :meth:`smallest` uses
"inception" wherever allowed. Before ``"width"`` the channels are sorted by importance
(:meth:`ConvNeXtSupernet.sort_channels`), so that a narrow stage or MLP keeps the channels its largest
network relies on most.

``extract(arch)`` builds ``space.build(arch)`` (its random init drawn inside a forked global RNG, which is
left untouched) and copies the same slices into it, so in eval mode its output equals ``forward(x, arch)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field
from timm.layers import LayerNorm2d
from timm.models.convnext import ConvNeXtBlock
from timm.models.inception_next import InceptionDWConv2d, MetaNeXtBlock
from torch import nn

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.search_spaces.convnext import MIXERS
from hwnas.supernet.base import SupernetParams, bind_space

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.search_spaces.convnext import ConvNeXtSpace

log = logging.getLogger(__name__)

#: Elastic dimensions each phase has unlocked ("width" covers stage widths and MLP ratios).
_UNLOCKED: dict[str, frozenset[str]] = {
    "largest": frozenset(),
    "kernel": frozenset({"kernel"}),
    "depth": frozenset({"kernel", "depth"}),
    "width": frozenset({"kernel", "depth", "width"}),
}

_DW = MIXERS.index("dw")
_INCEPTION = MIXERS.index("inception")


class ConvNeXtSupernetParams(SupernetParams):
    """Parameters of the ConvNeXt supernet (the rest comes from the space)."""

    norm_per_width: bool = Field(
        False, description="a LayerNorm weight and bias of its own for every width a stage can take (switchable "
                           "norms, as slimmable networks switch BatchNorm per width): a LayerNorm normalises over "
                           "the active channels, so a channel's normalised value depends on the width; the "
                           "narrower sets start as the leading slices of the largest when the width phase begins")


def _centre(full: int, k: int) -> slice:
    """The centre ``k`` of ``full`` positions (both odd)."""
    start = (full - k) // 2
    return slice(start, start + k)


class ConvNeXtSupernet(nn.Module):
    """ConvNeXt / InceptionNeXt supernet: elastic width, depth, kernel and MLP ratio; one weight set per mixer.

    Args:
        space: A ``ConvNeXtSpace`` (the registered ``convnext`` space).
        generator: Seeded generator every weight is initialised from.
        **params: :class:`ConvNeXtSupernetParams` (none).
    """

    space_name = "convnext"
    space: ConvNeXtSpace  # the registered space named space_name (bind_space checks it)
    num_classes: int
    params: ConvNeXtSupernetParams
    Params = ConvNeXtSupernetParams
    phases: tuple[str, ...] = ("largest", "kernel", "depth", "width")

    def __init__(self, *, space: SearchSpace, generator: torch.Generator, **params: object) -> None:
        super().__init__()
        bind_space(self, space, params)
        p = self.space.params
        self._mixers: tuple[int, ...] = tuple(MIXERS.index(m) for m in p.mixers)
        self._max_widths = [max(st.widths) for st in p.stages]
        self._max_kernel = max(p.kernels)
        self._max_ratio = max(p.mlp_ratios)

        with torch.random.fork_rng(devices=[]):  # timm's constructors draw their (replaced) init globally
            self.stem = nn.Sequential(
                nn.Conv2d(p.in_chans, self._max_widths[0], kernel_size=p.stem_stride, stride=p.stem_stride),
                LayerNorm2d(self._max_widths[0]),
            )
            self.stages = nn.ModuleList()
            for s, st in enumerate(p.stages):
                width = self._max_widths[s]
                stage: Any = nn.Module()
                if s > 0:
                    prev = self._max_widths[s - 1]
                    stage.downsample = nn.Sequential(LayerNorm2d(prev), nn.Conv2d(prev, width, kernel_size=2, stride=2))
                stage.blocks = nn.ModuleList(self._block_choices(width) for _ in range(max(st.depths)))
                self.stages.append(stage)
            c_last = self._max_widths[-1]
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), LayerNorm2d(c_last), nn.Flatten(1),
                                      nn.Linear(c_last, self.num_classes))
        # switchable norms (see _slot for the keys): a weight and a bias per stored LayerNorm and narrower width
        self.width_norms = nn.ParameterDict()
        if self.params.norm_per_width:
            for name, width, _ in self._width_norm_slots():
                self.width_norms[self._slot(name, width, "weight")] = nn.Parameter(torch.ones(width))
                self.width_norms[self._slot(name, width, "bias")] = nn.Parameter(torch.zeros(width))
        self._init_weights(generator)

    def _stored_norms(self) -> list[tuple[str, int, nn.LayerNorm]]:
        """Every LayerNorm whose size is a stage's width: (its name in the supernet, the stage, the module)."""
        stem: Any = self.stem
        head: Any = self.head
        stages: Any = self.stages
        out: list[tuple[str, int, nn.LayerNorm]] = [("stem.1", 0, stem[1])]
        for s, stage in enumerate(stages):
            if s > 0:
                out.append((f"stages.{s}.downsample.0", s - 1, stage.downsample[0]))
            for b, choices in enumerate(stage.blocks):
                if "dw" in choices:
                    out.append((f"stages.{s}.blocks.{b}.dw.norm", s, choices["dw"].norm))
        out.append(("head.1", len(stages) - 1, head[1]))
        return out

    def _width_norm_slots(self) -> Iterator[tuple[str, int, nn.LayerNorm]]:
        """(stored norm's name, a narrower width of its stage, the stored module) for every switchable set."""
        widths = [st.widths for st in self.space.params.stages]
        for name, s, module in self._stored_norms():
            for width in sorted(set(widths[s]) - {self._max_widths[s]}):
                yield name, width, module

    @staticmethod
    def _slot(name: str, width: int, which: str) -> str:
        return f"{name.replace('.', '_')}__w{width}__{which}"

    def _norm_slice(self, name: str, module: nn.LayerNorm, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The (weight, bias) a width-``width`` subnet uses for the stored norm ``name``: its own set where the
        supernet keeps one per width, else the leading ``width`` entries of the largest."""
        key = self._slot(name, width, "weight")
        if key in self.width_norms:
            return self.width_norms[key], self.width_norms[self._slot(name, width, "bias")]
        return module.weight[:width], module.bias[:width]

    @torch.no_grad()
    def _seed_width_norms(self) -> None:
        """Each narrower norm set := the leading slice of the largest (the width phase starts from sharing)."""
        if not self.width_norms:
            return
        for name, width, module in self._width_norm_slots():
            self.width_norms[self._slot(name, width, "weight")].copy_(module.weight[:width])
            self.width_norms[self._slot(name, width, "bias")].copy_(module.bias[:width])

    def _block_choices(self, width: int) -> nn.ModuleDict:
        """One largest block per allowed mixer (width ``width``, kernel/band ``K``, MLP ratio ``R``)."""
        p = self.space.params
        choices: dict[str, nn.Module] = {}
        if _DW in self._mixers:
            choices["dw"] = ConvNeXtBlock(width, kernel_size=self._max_kernel, mlp_ratio=self._max_ratio,
                                          ls_init_value=p.layer_scale_init)
        if _INCEPTION in self._mixers:
            mixer: Any = partial(InceptionDWConv2d, square_kernel_size=p.inception_square_kernel,
                                 band_kernel_size=self._max_kernel, branch_ratio=p.inception_branch_ratio)
            choices["inception"] = MetaNeXtBlock(width, token_mixer=mixer, mlp_ratio=self._max_ratio,
                                                 ls_init_value=p.layer_scale_init or 0.0)
        return nn.ModuleDict(choices)

    def _init_weights(self, generator: torch.Generator) -> None:
        """timm ConvNeXt's init from ``generator``: trunc-normal(0.02) conv/linear weights, zero biases,
        unit/zero norms, layer scale at the space's ``layer_scale_init``."""
        ls = self.space.params.layer_scale_init
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, (nn.Conv2d, nn.Linear)):
                    nn.init.trunc_normal_(module.weight, std=0.02, a=-2.0, b=2.0, generator=generator)
                    if module.bias is not None:
                        module.bias.zero_()
                elif isinstance(module, (nn.LayerNorm, nn.BatchNorm2d)):
                    module.reset_parameters()
                if isinstance(module, (ConvNeXtBlock, MetaNeXtBlock)) and module.gamma is not None:
                    module.gamma.fill_(float(ls or 0.0))

    # -- architecture ----------------------------------------------------------------------------------

    def _unlocked(self, phase: str) -> frozenset[str]:
        if phase not in _UNLOCKED:
            raise ConfigError(f"supernet {self.space_name!r}: unknown phase {phase!r} (phases: {list(self.phases)})")
        return _UNLOCKED[phase]

    def _make(self, pick: Callable[[tuple[int, ...]], int], unlocked: frozenset[str],
              mixer: Callable[[tuple[int, ...]], int]) -> Architecture:
        """An architecture: ``pick(choices)`` for unlocked dimensions, the largest for the others."""
        p = self.space.params
        genes: dict[str, int] = {}
        for s, st in enumerate(p.stages):
            genes[f"w{s}"] = pick(st.widths) if "width" in unlocked else max(st.widths)
            depth = pick(st.depths) if "depth" in unlocked else max(st.depths)
            genes[f"d{s}"] = depth
            for b in range(max(st.depths)):
                on = b < depth
                genes[f"k{s}_{b}"] = (pick(p.kernels) if "kernel" in unlocked else max(p.kernels)) if on else 0
                genes[f"e{s}_{b}"] = (pick(p.mlp_ratios) if "width" in unlocked else max(p.mlp_ratios)) if on else 0
                genes[f"m{s}_{b}"] = mixer(self._mixers) if on else 0
        return self.space.canonicalize(Architecture(self.space_name, genes))

    def largest(self) -> Architecture:
        """Every dimension at its largest; mixer "dw" wherever the space allows it (the distillation teacher)."""
        return self._make(max, frozenset(), lambda ms: _DW if _DW in ms else ms[0])

    def smallest(self, phase: str) -> Architecture:
        """Dimensions unlocked in ``phase`` at their smallest, the rest largest; mixer "inception" where allowed."""
        return self._make(min, self._unlocked(phase), lambda ms: _INCEPTION if _INCEPTION in ms else ms[0])

    def sample_subnet(self, rng: np.random.Generator, phase: str) -> Architecture:
        """Unlocked dimensions (and every block's mixer) drawn uniformly from ``rng``; the rest largest."""
        unlocked = self._unlocked(phase)

        def pick(choices: tuple[int, ...]) -> int:
            return int(choices[int(rng.integers(len(choices)))])

        return self._make(pick, unlocked, pick)

    def begin_phase(self, phase: str) -> None:
        """Before ``"width"``: sort channels by importance (:meth:`sort_channels`); other phases: nothing.

        Parameters are permuted in place (same tensor objects): optimizer state such as momentum is
        not permuted, so create (or clear) the optimizer after this call.
        """
        self._unlocked(phase)  # refuses an unknown phase
        if phase == "width":
            self.sort_channels()
            self._seed_width_norms()

    @torch.no_grad()
    def sort_channels(self) -> None:
        """Reorder channels so that a narrower subnet keeps the most important ones (once-for-all's sorting).

        - **MLP hidden channels** of every block (either mixer): by the L1 norm of the ``fc2`` column that
          reads them; ``fc1``'s rows and bias and ``fc2``'s columns are permuted alike.
        - **A stage's channels** (the residual stream: stem or downsampling conv output, every block's
          depthwise filters, norm, ``fc1`` input columns, ``fc2`` output rows and layer scale): by how
          strongly the next layer reads them, ``|norm weight| x`` the L1 norm of the next downsampling
          conv's (or the classifier's) input column; the next norm and conv (classifier) are permuted
          alike. Only where the space allows no InceptionNeXt mixer: its split of the channels into an
          identity part and three branches is by position, so permuting them would change the network.

        The largest network computes the same function before and after.
        """
        if _INCEPTION not in self._mixers:
            for s in range(len(self.stages)):
                self._sort_stage(s)
        stages: Any = self.stages
        for stage in stages:
            for choices in stage.blocks:
                for block in choices.values():
                    fc1, fc2 = block.mlp.fc1, block.mlp.fc2
                    w2 = fc2.weight.reshape(fc2.weight.shape[0], fc2.weight.shape[1], -1)
                    perm = torch.sort(w2.abs().sum((0, 2)), descending=True, stable=True).indices
                    fc1.weight.copy_(fc1.weight[perm])
                    fc1.bias.copy_(fc1.bias[perm])
                    fc2.weight.copy_(fc2.weight[:, perm])

    def _sort_stage(self, s: int) -> None:
        """Permute stage ``s``'s channels by the next layer's reading strength (dw mixers only)."""
        stem: Any = self.stem
        head: Any = self.head
        stages: Any = self.stages
        if s + 1 < len(stages):
            norm, reader = stages[s + 1].downsample
            strength = reader.weight.abs().sum((0, 2, 3))
        else:
            norm, reader = head[1], head[3]
            strength = reader.weight.abs().sum(0)
        perm = torch.sort(norm.weight.abs() * strength, descending=True, stable=True).indices
        rows: list[torch.Tensor] = [norm.weight, norm.bias]
        if s == 0:
            rows += [stem[0].weight, stem[0].bias, stem[1].weight, stem[1].bias]
        else:
            conv = stages[s].downsample[1]
            rows += [conv.weight, conv.bias]
        for choices in stages[s].blocks:
            block = choices["dw"]
            rows += [block.conv_dw.weight, block.conv_dw.bias, block.norm.weight, block.norm.bias,
                     block.mlp.fc2.weight, block.mlp.fc2.bias]
            if block.gamma is not None:
                rows.append(block.gamma)
            block.mlp.fc1.weight.copy_(block.mlp.fc1.weight[:, perm])
        for t in rows:
            t.copy_(t[perm])
        reader.weight.copy_(reader.weight[:, perm])

    # -- weight slices ---------------------------------------------------------------------------------

    def _block_tensors(self, block: Any, mixer: int, width: int, kernel: int, ratio: int, prefix: str
                       ) -> dict[str, torch.Tensor]:
        """The slices of one stored block (``prefix``: ``stages.S.blocks.B``) that a ``width``/``kernel``/``ratio``
        block uses, keyed by timm's names.

        Every tensor is a view of the stored one (so BatchNorm's running statistics update in place).
        """
        hidden = int(ratio * width)
        crop = _centre(self._max_kernel, kernel)
        t: dict[str, torch.Tensor] = {}
        if mixer == _DW:
            t["conv_dw.weight"] = block.conv_dw.weight[:width, :, crop, crop]
            t["conv_dw.bias"] = block.conv_dw.bias[:width]
            t["norm.weight"], t["norm.bias"] = self._norm_slice(f"{prefix}.dw.norm", block.norm, width)
        else:
            gc = int(width * self.space.params.inception_branch_ratio)
            tm = block.token_mixer
            t["token_mixer.dwconv_hw.weight"] = tm.dwconv_hw.weight[:gc]
            t["token_mixer.dwconv_hw.bias"] = tm.dwconv_hw.bias[:gc]
            t["token_mixer.dwconv_w.weight"] = tm.dwconv_w.weight[:gc, :, :, crop]
            t["token_mixer.dwconv_w.bias"] = tm.dwconv_w.bias[:gc]
            t["token_mixer.dwconv_h.weight"] = tm.dwconv_h.weight[:gc, :, crop, :]
            t["token_mixer.dwconv_h.bias"] = tm.dwconv_h.bias[:gc]
            for name in ("weight", "bias", "running_mean", "running_var"):
                t[f"norm.{name}"] = getattr(block.norm, name)[:width]
            t["norm.num_batches_tracked"] = block.norm.num_batches_tracked
        t["mlp.fc1.weight"] = block.mlp.fc1.weight[:hidden, :width]
        t["mlp.fc1.bias"] = block.mlp.fc1.bias[:hidden]
        t["mlp.fc2.weight"] = block.mlp.fc2.weight[:width, :hidden]
        t["mlp.fc2.bias"] = block.mlp.fc2.bias[:width]
        if block.gamma is not None:
            t["gamma"] = block.gamma[:width]
        return t

    def _plan(self, arch: Architecture) -> Iterator[tuple[int, int, list[tuple[int, int, int]]]]:
        """Per stage: (stage index, width, [(kernel, ratio, mixer) per active block])."""
        g = arch.genes
        for s in range(len(self.stages)):
            blocks = [(int(g[f"k{s}_{b}"]), int(g[f"e{s}_{b}"]), int(g[f"m{s}_{b}"]))  # type: ignore[arg-type]
                      for b in range(int(g[f"d{s}"]))]  # type: ignore[arg-type]
            yield s, int(g[f"w{s}"]), blocks  # type: ignore[arg-type]

    def _arch_tensors(self, arch: Architecture) -> dict[str, torch.Tensor]:
        """Every weight and buffer of ``space.build(arch)``, keyed by its name there, as views of the stored ones."""
        out: dict[str, torch.Tensor] = {}
        stem: Any = self.stem
        head: Any = self.head
        prev = 0
        for s, width, blocks in self._plan(arch):
            stage: Any = self.stages[s]
            if s == 0:
                out["stem.0.weight"] = stem[0].weight[:width]
                out["stem.0.bias"] = stem[0].bias[:width]
                out["stem.1.weight"], out["stem.1.bias"] = self._norm_slice("stem.1", stem[1], width)
                first = 0
            else:
                norm, conv = stage.downsample
                out[f"stages.{s}.0.0.weight"], out[f"stages.{s}.0.0.bias"] = self._norm_slice(
                    f"stages.{s}.downsample.0", norm, prev)
                out[f"stages.{s}.0.1.weight"] = conv.weight[:width, :prev]
                out[f"stages.{s}.0.1.bias"] = conv.bias[:width]
                first = 1
            for b, (kernel, ratio, mixer) in enumerate(blocks):
                block = stage.blocks[b][MIXERS[mixer]]
                tensors = self._block_tensors(block, mixer, width, kernel, ratio, prefix=f"stages.{s}.blocks.{b}")
                for name, tensor in tensors.items():
                    out[f"stages.{s}.{first + b}.{name}"] = tensor
            prev = width
        out["head.1.weight"], out["head.1.bias"] = self._norm_slice("head.1", head[1], prev)
        out["head.3.weight"] = head[3].weight[:, :prev]
        out["head.3.bias"] = head[3].bias
        return out

    # -- forward / extract -----------------------------------------------------------------------------

    @staticmethod
    def _layer_norm_2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        """timm's LayerNorm2d (over the channels of an NCHW tensor) with the given slices."""
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
        return x.permute(0, 3, 1, 2)

    def _dw_block(self, x: torch.Tensor, t: dict[str, torch.Tensor], block: Any, width: int, kernel: int
                  ) -> torch.Tensor:
        y = F.conv2d(x, t["conv_dw.weight"], t["conv_dw.bias"], padding=kernel // 2, groups=width)
        y = y.permute(0, 2, 3, 1)
        y = F.layer_norm(y, (width,), t["norm.weight"], t["norm.bias"], block.norm.eps)
        y = F.linear(y, t["mlp.fc1.weight"], t["mlp.fc1.bias"])
        y = F.gelu(y)
        y = F.linear(y, t["mlp.fc2.weight"], t["mlp.fc2.bias"])
        y = y.permute(0, 3, 1, 2)
        if "gamma" in t:
            y = y.mul(t["gamma"].reshape(1, -1, 1, 1))
        return y + x

    def _inception_block(self, x: torch.Tensor, t: dict[str, torch.Tensor], block: Any, width: int,
                         kernel: int) -> torch.Tensor:
        gc = int(width * self.space.params.inception_branch_ratio)
        x_id, x_hw, x_w, x_h = torch.split(x, [width - 3 * gc, gc, gc, gc], dim=1)
        sq = self.space.params.inception_square_kernel
        y = torch.cat((
            x_id,
            F.conv2d(x_hw, t["token_mixer.dwconv_hw.weight"], t["token_mixer.dwconv_hw.bias"],
                     padding=sq // 2, groups=gc),
            F.conv2d(x_w, t["token_mixer.dwconv_w.weight"], t["token_mixer.dwconv_w.bias"],
                     padding=(0, kernel // 2), groups=gc),
            F.conv2d(x_h, t["token_mixer.dwconv_h.weight"], t["token_mixer.dwconv_h.bias"],
                     padding=(kernel // 2, 0), groups=gc),
        ), dim=1)
        bn = block.norm
        momentum = bn.momentum
        if self.training and bn.track_running_stats:
            bn.num_batches_tracked.add_(1)
            if momentum is None:
                momentum = 1.0 / float(bn.num_batches_tracked)
        y = F.batch_norm(y, t["norm.running_mean"], t["norm.running_var"], t["norm.weight"], t["norm.bias"],
                         self.training, 0.0 if momentum is None else momentum, bn.eps)
        y = F.conv2d(y, t["mlp.fc1.weight"], t["mlp.fc1.bias"])
        y = F.gelu(y)
        y = F.conv2d(y, t["mlp.fc2.weight"], t["mlp.fc2.bias"])
        if "gamma" in t:
            y = y.mul(t["gamma"].reshape(1, -1, 1, 1))
        return y + x

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        """Logits of ``arch`` (validated by the space) on ``x``, from slices of the shared weights."""
        arch = self.space.canonicalize(arch)
        p = self.space.params
        t = self._arch_tensors(arch)  # the slices, named as in space.build(arch): sliced in one place only
        stem: Any = self.stem
        for s, width, blocks in self._plan(arch):
            stage: Any = self.stages[s]
            if s == 0:
                x = F.conv2d(x, t["stem.0.weight"], t["stem.0.bias"], stride=p.stem_stride)
                x = self._layer_norm_2d(x, t["stem.1.weight"], t["stem.1.bias"], stem[1].eps)
                first = 0
            else:
                pre = f"stages.{s}.0."
                x = self._layer_norm_2d(x, t[pre + "0.weight"], t[pre + "0.bias"], stage.downsample[0].eps)
                x = F.conv2d(x, t[pre + "1.weight"], t[pre + "1.bias"], stride=2)
                first = 1
            for b, (kernel, _ratio, mixer) in enumerate(blocks):
                block = stage.blocks[b][MIXERS[mixer]]
                pre = f"stages.{s}.{first + b}."
                bt = {k[len(pre):]: v for k, v in t.items() if k.startswith(pre)}
                if mixer == _DW:
                    x = self._dw_block(x, bt, block, width, kernel)
                else:
                    x = self._inception_block(x, bt, block, width, kernel)
        head: Any = self.head
        x = F.adaptive_avg_pool2d(x, 1)
        x = self._layer_norm_2d(x, t["head.1.weight"], t["head.1.bias"], head[1].eps).flatten(1)
        return F.linear(x, t["head.3.weight"], t["head.3.bias"])

    def extract(self, arch: Architecture) -> nn.Module:
        """``space.build(arch)`` with ``arch``'s slices of the shared weights copied in, in eval mode.

        The global torch RNG is left as it was (build's random init is drawn in a fork and then replaced).
        """
        arch = self.space.canonicalize(arch)
        with torch.random.fork_rng(devices=[]):
            model = self.space.build(arch)
        ref = next(self.parameters())
        model.to(device=ref.device, dtype=ref.dtype)
        sources = self._arch_tensors(arch)
        targets: dict[str, torch.Tensor] = dict(model.named_parameters())
        targets.update(model.named_buffers())
        if set(sources) != set(targets):
            raise RuntimeError(f"convnext supernet: extracted module's tensors do not match the supernet's slices "
                               f"(only in module: {sorted(set(targets) - set(sources))}; "
                               f"only in supernet: {sorted(set(sources) - set(targets))})")
        with torch.no_grad():
            for name, target in targets.items():
                source = sources[name]
                if target.shape != source.shape:
                    raise RuntimeError(f"convnext supernet: {name} has shape {tuple(target.shape)} in the built "
                                       f"module but {tuple(source.shape)} in the supernet's slice")
                target.copy_(source)
        log.debug("extracted %s", arch.arch_id)
        return model.eval()


__all__ = ["ConvNeXtSupernet", "ConvNeXtSupernetParams"]
