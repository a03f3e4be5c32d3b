"""The Supernet protocol and its shipped suite, exercised on a tiny elastic-width MLP supernet written here.

The registry may be empty; the suite runs for real on the reference, and each deliberately broken
variant shows the rule that catches it. ``tests/strategies/test_oneshot_protocol.py`` loads this
module for the same tiny space and supernet.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.architecture import Architecture
from hwnas.search_spaces import SPACES
from hwnas.search_spaces.base import CategoricalSpace, Gene
from hwnas.supernet import SUPERNETS, RelaxedSupernet, Supernet, one_hot_weights
from hwnas.testing import check_supernet

IN_FEATURES = 16
MAX_WIDTH = 16
NUM_CLASSES = 3
ACTIVATIONS = {0: torch.relu, 1: torch.tanh, 2: nn.functional.hardtanh}


class TinySpace(CategoricalSpace):
    """Two hidden layers of elastic width and a choice of first activation; inputs are 1x4x4 images."""

    name = "tiny-mlp"

    def genes(self) -> list[Gene]:
        return [Gene("width1", (4, 8, 16)), Gene("act1", (0, 1, 2)), Gene("width2", (4, 8, 16))]

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (1, 4, 4)

    def size(self) -> int:
        return 27

    def layers(self, arch: Architecture) -> list[str]:
        g = self.canonicalize(arch).genes
        return [f"fc:in{IN_FEATURES}:out{g['width1']}", f"act:{g['act1']}:w{g['width1']}",
                f"fc:in{g['width1']}:out{g['width2']}", f"head:in{g['width2']}"]

    def build(self, arch: Architecture) -> nn.Module:
        g = self.canonicalize(arch).genes
        return TinyNet(g["width1"], g["act1"], g["width2"])


class TinyNet(nn.Module):
    """One member of the tiny space as a standalone module."""

    def __init__(self, width1: int, act1: int, width2: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(IN_FEATURES, width1)
        self.act1 = act1
        self.fc2 = nn.Linear(width1, width2)
        self.head = nn.Linear(width2, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = ACTIVATIONS[self.act1](self.fc1(x.flatten(1)))
        return self.head(torch.relu(self.fc2(h)))


class TinySupernet(nn.Module):
    """Elastic-width MLP: an architecture uses the first ``width`` units of each shared layer."""

    def __init__(self, *, space: TinySpace, generator: torch.Generator) -> None:
        super().__init__()
        self.space = space
        self.num_classes = NUM_CLASSES
        self.fc1 = nn.Linear(IN_FEATURES, MAX_WIDTH)
        self.fc2 = nn.Linear(MAX_WIDTH, MAX_WIDTH)
        self.head = nn.Linear(MAX_WIDTH, NUM_CLASSES)
        with torch.no_grad():
            for p in self.parameters():
                nn.init.normal_(p, std=0.5, generator=generator)

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        g = self.space.canonicalize(arch).genes
        w1, w2 = g["width1"], g["width2"]
        h = ACTIVATIONS[g["act1"]](F.linear(x.flatten(1), self.fc1.weight[:w1], self.fc1.bias[:w1]))
        h = torch.relu(F.linear(h, self.fc2.weight[:w2, :w1], self.fc2.bias[:w2]))
        return F.linear(h, self.head.weight[:, :w2], self.head.bias)

    def forward_relaxed(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        genes = {g.name: g for g in self.space.genes()}
        h = self.fc1(x.flatten(1)) * self._width_mask(genes["width1"], weights["width1"])
        h = sum(p * ACTIVATIONS[c](h) for c, p in zip(genes["act1"].choices, weights["act1"]))
        h = torch.relu(self.fc2(h)) * self._width_mask(genes["width2"], weights["width2"])
        return self.head(h)

    @staticmethod
    def _width_mask(gene: Gene, w: torch.Tensor) -> torch.Tensor:
        masks = torch.stack([(torch.arange(MAX_WIDTH) < c).float() for c in gene.choices])
        return w @ masks

    def extract(self, arch: Architecture) -> nn.Module:
        g = self.space.canonicalize(arch).genes
        w1, w2 = g["width1"], g["width2"]
        net = TinyNet(w1, g["act1"], w2)
        with torch.no_grad():
            net.fc1.weight.copy_(self.fc1.weight[:w1])
            net.fc1.bias.copy_(self.fc1.bias[:w1])
            net.fc2.weight.copy_(self.fc2.weight[:w2, :w1])
            net.fc2.bias.copy_(self.fc2.bias[:w2])
            net.head.weight.copy_(self.head.weight[:, :w2])
            net.head.bias.copy_(self.head.bias)
        return net


def make_supernet(cls: type[TinySupernet] = TinySupernet, seed: int = 0) -> TinySupernet:
    return cls(space=TinySpace(), generator=torch.Generator().manual_seed(seed))


# -- deliberately broken variants, each caught by one rule of the suite ----------------------------


class StaleActiveSubnet(TinySupernet):
    """Keeps an "active subnet": the second layer uses the width of the previous call."""

    _previous: int | None = None

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        g = self.space.canonicalize(arch).genes
        stale = self._previous if self._previous is not None else g["width2"]
        self._previous = g["width2"]
        return super().forward(x, arch.replace(width2=stale))


class SharingExtract(TinySupernet):
    """extract() hands out the supernet's own tensors (views), not copies."""

    def extract(self, arch: Architecture) -> nn.Module:
        outer = self

        class View(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.bias = outer.head.bias  # the same Parameter object

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return outer.forward(x, arch) - outer.head.bias + self.bias

        return View()


class FreshInitExtract(TinySupernet):
    """extract() builds the architecture with random weights (space.build) instead of the supernet's."""

    def extract(self, arch: Architecture) -> nn.Module:
        return self.space.build(arch)


class WrongWidthHead(TinySupernet):
    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        out = super().forward(x, arch)
        return torch.cat([out, out[:, :1]], dim=1)


class DetachedOutput(TinySupernet):
    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        out = super().forward(x, arch).detach()
        return out + 0.0 * self.head.bias  # connected to the graph, but no real gradient


class IgnoresArchitecture(TinySupernet):
    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        return super().forward(x, Architecture("tiny-mlp", {"width1": 16, "act1": 0, "width2": 16}))

    def extract(self, arch: Architecture) -> nn.Module:
        return super().extract(Architecture("tiny-mlp", {"width1": 16, "act1": 0, "width2": 16}))

    def forward_relaxed(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        raise AssertionError("not reached")


class IgnoresLoadedWeights(TinySupernet):
    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        return None


class RelaxedMismatch(TinySupernet):
    """The relaxation re-normalises weights with a softmax, so one-hot weights do not select the architecture."""

    def forward_relaxed(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return super().forward_relaxed(x, {k: torch.softmax(v, 0) for k, v in weights.items()})


class DisjointPaths(nn.Module):
    """One separate network per architecture: passes everything except weight sharing."""

    def __init__(self, *, space: TinySpace, generator: torch.Generator) -> None:
        super().__init__()
        self.space = space
        self.num_classes = NUM_CLASSES
        self.nets = nn.ModuleDict({
            self._key(a): TinyNet(w1, act, w2)
            for w1 in (4, 8, 16) for act in (0, 1, 2) for w2 in (4, 8, 16)
            for a in [Architecture("tiny-mlp", {"width1": w1, "act1": act, "width2": w2})]
        })
        with torch.no_grad():
            for p in self.parameters():
                nn.init.normal_(p, std=0.5, generator=generator)

    @staticmethod
    def _key(arch: Architecture) -> str:
        return "-".join(str(arch.genes[k]) for k in ("width1", "act1", "width2"))

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        return self.nets[self._key(arch)](x)

    def extract(self, arch: Architecture) -> nn.Module:
        import copy

        return copy.deepcopy(self.nets[self._key(arch)])


# -- tests -------------------------------------------------------------------------------------------


def test_tiny_space_is_a_conforming_space():
    from hwnas.testing import check_space

    check_space(TinySpace())


def test_reference_supernet_passes_the_suite():
    supernet = make_supernet()
    assert isinstance(supernet, Supernet) and isinstance(supernet, RelaxedSupernet)
    before = {k: v.clone() for k, v in supernet.state_dict().items()}
    supernet.train(False)
    check_supernet(supernet, np.random.default_rng(0))
    assert not supernet.training, "the suite must restore the supernet's mode"
    assert all(torch.equal(v, before[k]) for k, v in supernet.state_dict().items()), "the suite must restore weights"
    assert all(p.grad is None for p in supernet.parameters())


def test_reference_supernet_passes_the_suite_for_several_seeds():
    for seed in range(3):
        check_supernet(make_supernet(seed=seed), np.random.default_rng(seed), n_archs=6, batch=2)


def test_one_hot_weights_select_the_architecture():
    space = TinySpace()
    arch = Architecture("tiny-mlp", {"width1": 8, "act1": 2, "width2": 4})
    w = one_hot_weights(space, arch)
    assert {k: v.tolist() for k, v in w.items()} == {
        "width1": [0.0, 1.0, 0.0], "act1": [0.0, 0.0, 1.0], "width2": [1.0, 0.0, 0.0]}


@pytest.mark.parametrize(
    ("cls", "match"),
    [
        (StaleActiveSubnet, "hidden state"),
        (SharingExtract, "share weights"),
        (FreshInitExtract, r"extract\(arch\)\(x\) differs"),
        (WrongWidthHead, "shape"),
        (DetachedOutput, "no gradient reaches"),
        (IgnoresArchitecture, "ignores the architecture"),
        (IgnoresLoadedWeights, "load_state_dict"),
        (RelaxedMismatch, "forward_relaxed"),
        (DisjointPaths, "share no trained weight"),
    ],
)
def test_suite_catches_broken_supernets(cls, match):
    with pytest.raises(AssertionError, match=match):
        check_supernet(make_supernet(cls), np.random.default_rng(0))


def test_suite_refuses_a_non_supernet():
    with pytest.raises(AssertionError, match="Supernet protocol"):
        check_supernet(TinyNet(4, 0, 4), np.random.default_rng(0))


def test_registry_kind_and_group():
    assert SUPERNETS.kind == "supernet"
    assert SUPERNETS.entry_point_group == "hwnas.supernets"


def _shipped_and_registered() -> list[str]:
    return SUPERNETS.names()


@pytest.mark.parametrize("name", _shipped_and_registered())
def test_registered_supernet_conformance(name):
    cls = SUPERNETS.get(name)
    space = SPACES.get(cls.space_name)()
    supernet = SUPERNETS.create(name, None, space=space, generator=torch.Generator().manual_seed(0))
    check_supernet(supernet, np.random.default_rng(0))


def test_import_does_not_import_torch():
    code = "import sys, hwnas.supernet, hwnas.testing; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
