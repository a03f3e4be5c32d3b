"""The FBNet space as HW-NAS-Bench defines it: 22 searchable layers, each one of 9 candidate ops.

Stages have ``[1, 4, 4, 4, 4, 4, 1]`` layers with ``[16, 24, 32, 64, 112, 184, 352]`` output channels
after a 16-channel 3x3 stem; a 1x1 head conv (1504 or 1984 channels), global average pool and a linear
classifier follow. The two input settings of HW-NAS-Bench:

=========  ==========  ===========  ============================  ============
setting    resolution  stem stride  stage strides                 head
=========  ==========  ===========  ============================  ============
cifar100   32          1            1, 1, 2, 2, 1, 2, 1           1504, 100 cls
imagenet   224         2            1, 2, 2, 2, 1, 2, 1           1984, 1000 cls
=========  ==========  ===========  ============================  ============

The genes ``l00 .. l21`` hold an op index into :data:`OPS` (HW-NAS-Bench's order): ``k{3,5}_e{1,3,6}``
are inverted residual blocks (1x1 expansion by ``e`` of the *input* channels, ``k x k`` depthwise conv
carrying the stride, 1x1 projection; ReLU; a residual where shape allows), ``_g2`` makes both 1x1 convs
grouped (2 groups) with a channel shuffle after the expansion, and ``skip`` is the identity, or a 1x1
conv + BN + ReLU projection where the channels or the resolution change.

:meth:`FBNetSpace.layers` returns exactly HW-NAS-Bench's FBNet lookup-table keys (``ConvNorm_...``
stem, ``ConvBlock_...``/``Skip_...`` per layer, ``ConvNorm_...`` head, ``AvgP_...``, ``FC_...``), in the
order upstream's ``fbnet_get_metrics`` sums them, so summing a metric of ``fbnet_lut.json`` over them in
order reproduces the official API bit for bit. No two gene tuples are merged: :meth:`canonicalize` only
validates (moving a stride-1 ``skip`` within a stage would give the same network, but the published
FBNet tables key architectures by their raw op list).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field

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

#: The 9 candidate ops in HW-NAS-Bench's order (a gene value is an index into this tuple).
OPS: tuple[str, ...] = ("k3_e1", "k3_e1_g2", "k3_e3", "k3_e6", "k5_e1", "k5_e1_g2", "k5_e3", "k5_e6", "skip")

STAGE_LAYERS: tuple[int, ...] = (1, 4, 4, 4, 4, 4, 1)
STAGE_CHANNELS: tuple[int, ...] = (16, 24, 32, 64, 112, 184, 352)
STEM_CHANNELS = 16
NUM_LAYERS = sum(STAGE_LAYERS)  # 22
_GENE_NAMES: tuple[str, ...] = tuple(f"l{i:02d}" for i in range(NUM_LAYERS))
_VALID_OPS = frozenset(range(len(OPS)))


@dataclass(frozen=True)
class _Setting:
    resolution: int
    stem_stride: int
    stage_strides: tuple[int, ...]
    head_channels: int
    num_classes: int


SETTINGS: dict[str, _Setting] = {
    "cifar100": _Setting(32, 1, (1, 1, 2, 2, 1, 2, 1), 1504, 100),
    "imagenet": _Setting(224, 2, (1, 2, 2, 2, 1, 2, 1), 1984, 1000),
}


@dataclass(frozen=True)
class LayerSpec:
    """One searchable layer as built: op name, input/output channels, stride and input resolution."""

    op: str
    c_in: int
    c_out: int
    stride: int
    resolution: int

    @property
    def kernel(self) -> int:
        return int(self.op[1])

    @property
    def expand(self) -> int:
        return int(self.op.split("_")[1][1:])

    @property
    def groups(self) -> int:
        return 2 if self.op.endswith("_g2") else 1


class FBNetParams(SpaceParams):
    """Parameters of the FBNet space."""

    setting: Literal["cifar100", "imagenet"] = Field(
        "cifar100", description="HW-NAS-Bench input setting: resolution, stem/stage strides and head width"
    )
    in_chans: int = Field(3, gt=0)
    num_classes: int | None = Field(None, gt=1, description="default: 100 (cifar100) or 1000 (imagenet)")


class FBNetSpace(UnitCatalog, CategoricalSpace):
    """FBNet (HW-NAS-Bench): 22 layers x 9 ops (k3/k5, expand 1/3/6, grouped, skip); LUT keys as published."""

    name = "fbnet"
    Params = FBNetParams
    params: FBNetParams

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        self.setting = SETTINGS[self.params.setting]

    # -- genes -----------------------------------------------------------------------------------
    def genes(self) -> list[Gene]:
        return [Gene(name, tuple(range(len(OPS)))) for name in _GENE_NAMES]

    @property
    def num_classes(self) -> int:
        return self.params.num_classes if self.params.num_classes is not None else self.setting.num_classes

    @property
    def input_shape(self) -> tuple[int, int, int]:
        r = self.setting.resolution
        return (self.params.in_chans, r, r)

    def size(self) -> int:
        return len(OPS) ** NUM_LAYERS

    def op_indices(self, arch: Architecture) -> list[int]:
        """The 22 op indices in layer order (HW-NAS-Bench's ``op_idx_list``); validated."""
        genes = arch.genes._dict  # sorted by name, and l00..l21 sort in layer order
        if arch.space == self.name and tuple(genes) == _GENE_NAMES:
            ops = list(genes.values())
            if _VALID_OPS.issuperset(ops):  # ints 0..8 (booleans never become gene values)
                return ops  # type: ignore[return-value]
        self.validate(arch)  # raises, naming the offending gene
        return [int(arch.genes[name]) for name in _GENE_NAMES]  # type: ignore[arg-type]

    def from_op_indices(self, ops: list[int] | tuple[int, ...]) -> Architecture:
        """An architecture from HW-NAS-Bench's ``op_idx_list`` (22 ints in 0..8); validated."""
        if len(ops) != NUM_LAYERS:
            raise InvalidArchitecture(f"fbnet: expected {NUM_LAYERS} op indices, got {len(ops)}")
        arch = Architecture(self.name, {f"l{i:02d}": int(op) for i, op in enumerate(ops)})
        self.validate(arch)
        return arch

    def largest(self) -> Architecture:
        """Every layer ``k5_e6``: the largest kernel and expansion."""
        return self.from_op_indices([OPS.index("k5_e6")] * NUM_LAYERS)

    # -- string form ---------------------------------------------------------------------------
    def to_str(self, arch: Architecture) -> str:
        """Op names separated by spaces, e.g. ``k5_e6 skip k3_e1_g2 ...`` (HELP's ``arch_str`` column)."""
        return " ".join(OPS[i] for i in self.op_indices(arch))

    def from_str(self, text: str) -> Architecture:
        """Parse 22 op names (or op indices 0..8) separated by spaces or commas.

        Raises:
            InvalidArchitecture: Naming the layer whose op is unknown, or the wrong count.
        """
        if not isinstance(text, str):
            raise InvalidArchitecture(f"fbnet: expected an arch string, got {type(text).__name__}")
        tokens = text.replace(",", " ").split()
        if len(tokens) != NUM_LAYERS:
            raise InvalidArchitecture(f"fbnet string {text!r}: expected {NUM_LAYERS} ops, got {len(tokens)}")
        ops = []
        for i, token in enumerate(tokens):
            if token in OPS:
                ops.append(OPS.index(token))
            elif token.isdigit() and int(token) < len(OPS):
                ops.append(int(token))
            else:
                raise InvalidArchitecture(
                    f"fbnet string: layer {i} (gene l{i:02d}) {token!r} is not an op (ops: {', '.join(OPS)} or 0..8)"
                )
        return self.from_op_indices(ops)

    # -- layers ----------------------------------------------------------------------------------
    def layer_specs(self, arch: Architecture) -> list[LayerSpec]:
        """The 22 searchable layers with their shapes."""
        ops = self.op_indices(arch)
        st = self.setting
        res = st.resolution // st.stem_stride
        c_in = STEM_CHANNELS
        specs: list[LayerSpec] = []
        layer = 0
        for stage, (n, c_out) in enumerate(zip(STAGE_LAYERS, STAGE_CHANNELS)):
            for i in range(n):
                stride = st.stage_strides[stage] if i == 0 else 1
                specs.append(LayerSpec(OPS[ops[layer]], c_in, c_out, stride, res))
                res //= stride
                c_in = c_out
                layer += 1
        return specs

    @per_arch_cache
    def layers(self, arch: Architecture) -> list[LayerKey]:
        """HW-NAS-Bench's FBNet LUT keys: stem, 22 layers, head conv, average pool, classifier (summing order)."""
        stem, per_layer, tail = self._key_table()
        return [stem, *map(tuple.__getitem__, per_layer, self.op_indices(arch)), *tail]

    def _unit_specs(self) -> dict[LayerKey, UnitSpec]:
        """Every LUT key a member uses (stem, each layer's 9 ops, head conv, pool, classifier), with its module."""
        stem, per_layer, tail = self._key_table()
        st = self.setting
        r = st.resolution
        units: dict[LayerKey, UnitSpec] = {stem: ("stem", None, (self.params.in_chans, r, r))}
        specs = self.layer_specs(self.from_op_indices([0] * NUM_LAYERS))
        for sp, keys in zip(specs, per_layer):
            for op, key in zip(OPS, keys):
                units.setdefault(key, ("layer", LayerSpec(op, sp.c_in, sp.c_out, sp.stride, sp.resolution),
                                       (sp.c_in, sp.resolution, sp.resolution)))
        h = specs[-1].resolution // specs[-1].stride
        head = st.head_channels
        units[tail[0]] = ("head", None, (STAGE_CHANNELS[-1], h, h))
        units[tail[1]] = ("pool", None, (head, h, h))
        units[tail[2]] = ("fc", None, (head,))
        return units

    def _build_unit(self, kind: str, spec: object) -> nn.Module:
        """The stem, a searchable layer, the head conv, the pool (and flatten) or the classifier, as built."""
        import torch.nn as nn

        from hwnas.search_spaces.fbnet_modules import conv_norm, make_layer

        st = self.setting
        if kind == "stem":
            return conv_norm(self.params.in_chans, STEM_CHANNELS, 3, st.stem_stride)
        if kind == "layer":
            assert isinstance(spec, LayerSpec)  # the payload _unit_specs gives a "layer" unit
            return make_layer(spec)
        if kind == "head":
            return conv_norm(STAGE_CHANNELS[-1], st.head_channels, 1, 1)
        if kind == "pool":
            return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1))
        return nn.Linear(st.head_channels, self.num_classes)

    def _key_table(self) -> tuple[LayerKey, tuple[tuple[LayerKey, ...], ...], tuple[LayerKey, ...]]:
        """(stem key, per layer the key of each op, head keys): a layer's key depends only on its position
        and its op, so the 22 x 9 keys are formatted once per space."""
        cached = self.__dict__.get("_key_table_cache")
        if cached is not None:
            return cached
        st = self.setting
        r = st.resolution
        stem = f"ConvNorm_H{r}_W{r}_Cin{self.params.in_chans}_Cout{STEM_CHANNELS}_kernel3_stride{st.stem_stride}_group1"
        per_layer = []
        specs = self.layer_specs(self.from_op_indices([0] * NUM_LAYERS))  # shapes do not depend on the ops
        for sp in specs:
            h, keys = sp.resolution, []
            for op in OPS:
                if op == "skip":
                    keys.append(f"Skip_H{h}_W{h}_Cin{sp.c_in}_Cout{sp.c_out}_stride{sp.stride}")
                else:
                    spec = LayerSpec(op, sp.c_in, sp.c_out, sp.stride, sp.resolution)
                    keys.append(f"ConvBlock_H{h}_W{h}_Cin{sp.c_in}_Cout{sp.c_out}_exp{spec.expand}"
                                f"_kernel{spec.kernel}_stride{sp.stride}_group{spec.groups}")
            per_layer.append(tuple(keys))
        h = specs[-1].resolution // specs[-1].stride
        c_last, head = STAGE_CHANNELS[-1], st.head_channels
        tail = (f"ConvNorm_H{h}_W{h}_Cin{c_last}_Cout{head}_kernel1_stride1_group1",
                f"AvgP_H{h}_W{h}_Cin{head}_Cout{head}_kernel{h}_stride1",
                f"FC_Cin{head}_Cout{self.num_classes}")
        out = (stem, tuple(per_layer), tail)
        self.__dict__["_key_table_cache"] = out
        return out

    def build(self, arch: Architecture) -> nn.Module:
        """The network with random init: timm ``InvertedResidual`` blocks (a grouped variant for ``_g2``)."""
        from hwnas.search_spaces.fbnet_modules import FBNetNetwork

        st = self.setting
        return FBNetNetwork(layers=self.layer_specs(arch), in_chans=self.params.in_chans, stem_channels=STEM_CHANNELS,
                            stem_stride=st.stem_stride, head_channels=st.head_channels, num_classes=self.num_classes)
