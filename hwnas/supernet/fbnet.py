"""The FBNet supernet (Wu et al., CVPR 2019) over HW-NAS-Bench's FBNet space (``fbnet``).

Weight sharing as in FBNet's stochastic supernet: the stem, the 1x1 head conv and the classifier are one
module shared by every architecture; each of the 22 searchable layers holds one separate block per
candidate op (the 9 of :data:`~hwnas.search_spaces.fbnet.OPS`), built by the space's own constructor at
that layer's shape, so an op's weights on a layer are shared by every architecture that puts that op
there, and never by two ops. A stride-1 ``skip`` between equal widths is the identity (no weights).

- ``forward(x, arch)`` runs each layer's chosen block only (single path; SPOS training samples uniformly).
- ``forward_relaxed(x, weights)``: layer ``l`` outputs ``sum_k w_l[k] * block_{l,k}(h)`` (FBNet's
  Gumbel-softmax mixture, DARTS's softmax, GDAS's or ProxylessNAS's one-hot sample); a choice whose weight
  is exactly 0 is not computed, so one-hot weights run one path and reproduce ``forward``.
- ``extract(arch)`` is ``space.build(arch)`` holding copies of the chosen blocks' weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.search_spaces.fbnet import NUM_LAYERS, OPS, STAGE_CHANNELS, STEM_CHANNELS, LayerSpec
from hwnas.search_spaces.fbnet_modules import conv_norm, make_layer
from hwnas.supernet.base import SupernetParams, bind_space, init_mobile_weights, relaxation_weights

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.search_spaces.fbnet import FBNetSpace


class FBNetSupernet(nn.Module):
    """FBNet's supernet: per layer one block per candidate op; shared stem, head conv and classifier.

    Args:
        space: An :class:`~hwnas.search_spaces.fbnet.FBNetSpace` (either setting).
        generator: Seeds the weight initialisation.
    """

    space_name: ClassVar[str] = "fbnet"
    Params: ClassVar[type[SupernetParams]] = SupernetParams
    phases: tuple[str, ...] = ("uniform",)
    space: FBNetSpace  # the registered space named space_name (bind_space checks it)
    num_classes: int
    params: SupernetParams

    def __init__(self, *, space: SearchSpace, generator: torch.Generator, **params: object) -> None:
        super().__init__()
        bind_space(self, space, params)
        st = self.space.setting
        specs = self.space.layer_specs(self.space.from_op_indices([0] * NUM_LAYERS))  # shapes do not depend on ops
        with torch.random.fork_rng(devices=[]):  # modules are built, then initialised from ``generator``
            self.stem = conv_norm(self.space.params.in_chans, STEM_CHANNELS, 3, st.stem_stride)
            self.layers = nn.ModuleList(
                nn.ModuleDict({op: make_layer(LayerSpec(op, sp.c_in, sp.c_out, sp.stride, sp.resolution))
                               for op in OPS})
                for sp in specs)
            self.head = conv_norm(STAGE_CHANNELS[-1], st.head_channels, 1, 1)
            self.classifier = nn.Linear(st.head_channels, self.num_classes)
        # PyTorch's default conv init shrinks the signal ~10x per block through 22 layers (an eval-mode output then
        # ignores the architecture); He fan-out per group, as timm initialises these blocks, keeps it
        init_mobile_weights(self, generator)
        self._gene_names = [g.name for g in space.genes()]  # l00 .. l21, in layer order

    def block(self, layer: int, op: str) -> nn.Module:
        """The module of candidate ``op`` on searchable layer ``layer`` (0-based)."""
        return cast(nn.ModuleDict, self.layers[layer])[op]

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.head(h), 1), 1))

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        """Logits of ``arch``: each layer runs its chosen block only.

        Raises:
            InvalidArchitecture: ``arch`` is not a member (names the gene).
        """
        h = self.stem(x)
        for layer, op in enumerate(self.space.op_indices(arch)):
            h = self.block(layer, OPS[op])(h)
        return self._head(h)

    def forward_relaxed(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits of the mixture: layer ``l`` outputs ``sum_k weights[l][k] * block_{l,k}(h)``.

        Args:
            x: Input batch.
            weights: Gene name (``l00`` .. ``l21``) to a vector over the 9 ops in :data:`OPS` order; choices
                with weight exactly 0 are not computed.

        Raises:
            ValueError: A gene's weights are missing, of the wrong shape, or all 0.
        """
        ws, live = relaxation_weights(self.space_name, self.space, weights, x)
        h = self.stem(x)
        for layer, name in enumerate(self._gene_names):
            mix: torch.Tensor | None = None
            for k, op in enumerate(OPS):
                if live[name][k]:
                    y = ws[name][k] * self.block(layer, op)(h)
                    mix = y if mix is None else mix + y
            if mix is None:
                raise ValueError(f"{self.space_name} supernet: every weight of gene {name!r} is 0")
            h = mix
        return self._head(h)

    def extract(self, arch: Architecture) -> nn.Module:
        """``space.build(arch)`` holding copies of the stem, the chosen blocks, the head and the classifier.

        Returns:
            The standalone network in eval mode, owning its weights.

        Raises:
            InvalidArchitecture: ``arch`` is not a member.
        """
        ops = self.space.op_indices(arch)
        with torch.random.fork_rng(devices=[]):
            built = self.space.build(arch)
        ref = next(self.parameters())
        model: Any = built.to(device=ref.device, dtype=ref.dtype)  # its parts are read by name (stem, blocks, ...)
        with torch.no_grad():
            model.stem.load_state_dict(self.stem.state_dict())
            for layer, (dst, op) in enumerate(zip(model.blocks, ops)):
                dst.load_state_dict(self.block(layer, OPS[op]).state_dict())
            model.head.load_state_dict(self.head.state_dict())
            model.classifier.load_state_dict(self.classifier.state_dict())
        return model.eval()

    # -- TrainableSupernet -------------------------------------------------------------------------
    def _check_phase(self, phase: str) -> None:
        if phase not in self.phases:
            raise ConfigError(f"fbnet supernet: unknown phase {phase!r} (phases: {', '.join(self.phases)})")

    def largest(self) -> Architecture:
        """Every layer ``k5_e6``: the most parameters and FLOPs."""
        return self.space.largest()

    def smallest(self, phase: str) -> Architecture:
        """Every layer ``skip``: only the projections where the width or resolution changes."""
        self._check_phase(phase)
        return self.space.from_op_indices([OPS.index("skip")] * NUM_LAYERS)

    def sample_subnet(self, rng: np.random.Generator, phase: str) -> Architecture:
        """A uniform member (single-path one-shot's uniform sampling)."""
        self._check_phase(phase)
        return self.space.sample(rng)

    def begin_phase(self, phase: str) -> None:
        """Nothing to do: the single ``uniform`` phase samples every layer from the start."""
        self._check_phase(phase)


__all__ = ["FBNetSupernet"]
