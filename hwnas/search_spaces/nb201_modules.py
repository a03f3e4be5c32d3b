"""Torch modules of the NAS-Bench-201 network (imported only by ``NB201Space.build``: this module imports torch)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from hwnas.search_spaces.nb201_cell import cell_plan


class ReLUConvBN(nn.Sequential):
    """ReLU, convolution (no bias), BatchNorm: NAS-Bench-201's ``nor_conv`` operation."""

    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int = 1) -> None:
        super().__init__(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel_size, stride=stride, padding=kernel_size // 2, bias=False),
            nn.BatchNorm2d(c_out),
        )


class Zero(nn.Module):
    """A node without live inputs: zeros of its input's shape (as the cell computes it, one multiply)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul(0.0)


class NodeSum(nn.Module):
    """One addition of two node inputs (a latency unit: the cell adds a node's live inputs pairwise)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + x


def make_op(name: str, channels: int) -> nn.Module:
    """One cell operation at stride 1 with ``channels`` in and out (``none`` is never built); ``zero`` and
    ``add`` are the cell's own work on a node, built as latency units."""
    if name == "zero":
        return Zero()
    if name == "add":
        return NodeSum()
    if name == "skip_connect":
        return nn.Identity()
    if name == "nor_conv_1x1":
        return ReLUConvBN(channels, channels, 1)
    if name == "nor_conv_3x3":
        return ReLUConvBN(channels, channels, 3)
    if name == "avg_pool_3x3":
        return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
    raise ValueError(f"nb201: no module for op {name!r}")


class NB201Cell(nn.Module):
    """A 4-node cell: node ``i`` is the sum of ``op(node j)`` over its live incoming edges.

    Run as :func:`~hwnas.search_spaces.nb201.cell_plan` says, so that a latency table's units match every
    backend: nodes that do not reach the output are skipped and a parameter-free op on a value it was already
    applied to reuses that tensor (what an ONNX runtime makes of the exported graph), and a skip or pool of a
    zero node adds nothing and is not run (no runtime removes ``x + 0 * y``: at int8 onnxruntime kept the
    multiply, the addition and a requantisation of the cell's input, which made such tiny networks 13-16 %
    slower than their table).

    Args:
        cell_ops: Op name per edge, in ``edges`` order.
        edges: (gene name, to node, from node) per edge.
        channels: Channels of every node.
    """

    def __init__(self, cell_ops: Sequence[str], edges: Sequence[tuple[str, int, int]], channels: int) -> None:
        super().__init__()
        self.edges = nn.ModuleDict({name: make_op(op, channels) for (name, _, _), op in zip(edges, cell_ops)
                                    if op != "none"})
        plan = cell_plan(tuple(cell_ops), tuple(edges))
        values = plan.values
        self.live = plan.live  # the nodes that reach the output, in order
        self.incoming: list[list[tuple[str, int]]] = [[] for _ in range(4)]  # live edges into each node
        for name, to, frm in edges:
            if name in values:
                self.incoming[to].append((name, frm))
        # one slot per distinct value: equal keys (a pool of a value pooled already) share a tensor
        slots: dict[tuple[object, ...], int] = {}
        self.slot = {name: slots.setdefault(key, len(slots)) for name, key in values.items()}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes: dict[int, torch.Tensor | None] = {0: x}  # None: a node that is zero
        done: dict[int, torch.Tensor] = {}
        zero: torch.Tensor | None = None
        for to in self.live:
            total: torch.Tensor | None = None
            for name, frm in self.incoming[to]:  # the edges whose output is not zero
                slot = self.slot[name]
                y = done.get(slot)
                if y is None:
                    src = nodes[frm]
                    if src is None:  # a convolution of a zero node
                        src = zero = x.mul(0.0) if zero is None else zero
                    y = done[slot] = self.edges[name](src)
                total = y if total is None else total + y
            nodes[to] = total
        out = nodes[3]
        if out is None:  # a zero cell
            out = x.mul(0.0) if zero is None else zero
        return out


class DepthwiseBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm that, in eval mode, runs as the 1x1 depthwise convolution it equals (its parameters unchanged).

    NAS-Bench-201's final BatchNorm follows a sum or a pool wherever the last cell's output is not a single
    convolution, so no graph optimiser can fold it. At int8 onnxruntime then keeps it as a float op,
    channels-first, and moves the layout transpose up past every pool and sum of the last stage: those pools
    ran channels-first at 2.2x the time of the channels-last ones (248 against 112 us at 64 channels, 16x16;
    a cell of one pool, 64 px input). As a convolution it is quantised like the others and the graph stays
    channels-last to the global pool. Training mode is plain BatchNorm (batch statistics, running updates).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training or self.running_mean is None or self.running_var is None:
            return super().forward(x)
        scale = torch.rsqrt(self.running_var + self.eps)
        if self.weight is not None:
            scale = scale * self.weight
        shift = -self.running_mean * scale
        if self.bias is not None:
            shift = shift + self.bias
        return F.conv2d(x, scale.reshape(-1, 1, 1, 1), shift, groups=self.num_features)


def head(channels: int, num_classes: int) -> nn.Sequential:
    """BatchNorm (as :class:`DepthwiseBatchNorm2d`), ReLU, global average pool, flatten, linear classifier."""
    return nn.Sequential(DepthwiseBatchNorm2d(channels), nn.ReLU(inplace=False), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(1), nn.Linear(channels, num_classes))


class ResidualReduction(nn.Module):
    """NAS-Bench-201's reduction block: two ReLU-conv-BN (the first at stride 2) plus an avg-pool + 1x1 shortcut."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv_a = ReLUConvBN(c_in, c_out, 3, stride=2)
        self.conv_b = ReLUConvBN(c_out, c_out, 3)
        self.downsample = nn.Sequential(nn.AvgPool2d(2, stride=2), nn.Conv2d(c_in, c_out, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(x) + self.conv_b(self.conv_a(x))


class NB201Network(nn.Module):
    """Stem, 3 stages of cells joined by residual reductions, BN + ReLU, global pool, linear classifier."""

    def __init__(self, *, cell_ops: Sequence[str], edges: Sequence[tuple[str, int, int]], in_chans: int,
                 channels: int, cells_per_stage: int, num_classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_chans, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels))
        layers: list[nn.Module] = []
        c = channels
        for stage in range(3):
            if stage:
                layers.append(ResidualReduction(c, c * 2))
                c *= 2
            layers.extend(NB201Cell(cell_ops, edges, c) for _ in range(cells_per_stage))
        self.cells = nn.Sequential(*layers)
        self.lastact = nn.Sequential(DepthwiseBatchNorm2d(c), nn.ReLU(inplace=False))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.lastact(self.cells(self.stem(x)))
        return self.classifier(torch.flatten(self.pool(x), 1))
