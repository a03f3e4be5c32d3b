"""Torch modules of the FBNet network (imported only by ``FBNetSpace.build``: this module imports torch and timm)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn
from timm.models._efficientnet_blocks import InvertedResidual

if TYPE_CHECKING:
    from hwnas.search_spaces.fbnet import LayerSpec


class ChannelShuffle(nn.Module):
    """Interleave the channels of ``groups`` groups (ShuffleNet), so grouped 1x1 convs mix information."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(1, (self.groups, -1)).transpose(1, 2).flatten(1, 2)


class GroupedInvertedResidual(InvertedResidual):
    """timm's ``InvertedResidual`` with grouped 1x1 expansion and projection and a channel shuffle between.

    timm's ``group_size`` groups the depthwise conv only, so the two point-wise convs are replaced here.
    """

    def __init__(self, in_chs: int, out_chs: int, *, groups: int, **kwargs: Any) -> None:
        super().__init__(in_chs, out_chs, **kwargs)
        mid = self.conv_dw.in_channels
        if in_chs % groups or mid % groups or out_chs % groups:
            raise ValueError(f"fbnet: channels {in_chs}->{mid}->{out_chs} are not divisible by {groups} groups")
        self.conv_pw = nn.Conv2d(in_chs, mid, 1, groups=groups, bias=False)
        self.shuffle = ChannelShuffle(groups)
        self.conv_pwl = nn.Conv2d(mid, out_chs, 1, groups=groups, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.shuffle(self.bn1(self.conv_pw(x)))
        # timm annotates create_aa (self.aa) Optional; without an anti-aliasing layer it is nn.Identity, never None
        x = self.se(self.aa(self.bn2(self.conv_dw(x))))  # type: ignore[misc]
        x = self.bn3(self.conv_pwl(x))
        if self.has_skip:
            x = self.drop_path(x) + shortcut
        return x


def conv_norm(c_in: int, c_out: int, kernel_size: int, stride: int) -> nn.Sequential:
    """Conv (no bias), BatchNorm, ReLU: the units HW-NAS-Bench prices as ``ConvNorm`` (stem, head) and ``Skip``.

    Whether upstream's ``ConvNorm`` ends with a ReLU was not checked against its code; the LUT is unaffected.
    """
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size, stride=stride, padding=kernel_size // 2, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


def make_layer(spec: LayerSpec) -> nn.Module:
    """One searchable layer from a :class:`hwnas.search_spaces.fbnet.LayerSpec`."""
    if spec.op == "skip":
        if spec.c_in == spec.c_out and spec.stride == 1:
            return nn.Identity()
        return conv_norm(spec.c_in, spec.c_out, 1, spec.stride)
    if spec.groups > 1:
        return GroupedInvertedResidual(spec.c_in, spec.c_out, groups=spec.groups, dw_kernel_size=spec.kernel,
                                       stride=spec.stride, exp_ratio=float(spec.expand), act_layer=nn.ReLU)
    return InvertedResidual(spec.c_in, spec.c_out, dw_kernel_size=spec.kernel, stride=spec.stride,
                            exp_ratio=float(spec.expand), act_layer=nn.ReLU)


class FBNetNetwork(nn.Module):
    """Stem, the 22 searchable layers, 1x1 head conv, global average pool, linear classifier."""

    def __init__(self, *, layers: Sequence[LayerSpec], in_chans: int, stem_channels: int, stem_stride: int,
                 head_channels: int, num_classes: int) -> None:
        super().__init__()
        self.stem = conv_norm(in_chans, stem_channels, 3, stem_stride)
        self.blocks = nn.Sequential(*(make_layer(spec) for spec in layers))
        self.head = conv_norm(layers[-1].c_out, head_channels, 1, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(head_channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        return self.classifier(torch.flatten(self.pool(x), 1))
