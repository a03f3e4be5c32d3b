"""Few-shot supernets: one copy of a trained supernet per value of one gene (few-shot NAS, Zhao et al., 2021).

One set of shared weights makes subnets that differ in a gene compete for the same weights, so their
inherited accuracy can be biased by that gene as a whole (on the ConvNeXt supernet, the last stage's width:
subnets with a narrow last stage score several points below what they reach trained alone). Splitting the
supernet on that gene gives each of its values a sub-supernet of its own: the one-shot phases train one
shared supernet as usual; the ``split`` phase then copies it into every sub-supernet and trains each one in
turn only on the architectures with its value (the sandwich rule inside the group: the group's largest as
the teacher, its smallest, random members). ``forward`` and ``extract`` send an architecture to the
sub-supernet of its value, so everything that uses a supernet (the ``supernet`` evaluator, export with
inherited weights) works unchanged.

Asked for as a supernet parameter, ``params: {split: GENE}``, with a ``split`` phase after the others
(``{phase: split, epochs: E}``: E epochs for each value, each value a phase of its own in the progress bar
and the curves, ``split:GENE=VALUE``). The checkpoint records the split in its identity, so a scorer reads it back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

import numpy as np
import torch
from torch import nn

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.search_spaces.base import ActiveGenes
from hwnas.supernet.base import SUPERNETS, PhaseTrainable

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.supernet.base import Supernet, TrainableSupernet

SPLIT_PHASE = "split"
_PREFIX = "split:"


def split_phases(gene: str, values: tuple[int, ...]) -> tuple[str, ...]:
    """The phase names the ``split`` phase expands into, one per value of ``gene``."""
    return tuple(f"{_PREFIX}{gene}={v}" for v in values)


def is_split_phase(phase: str) -> bool:
    """True for the expanded per-value phases (``split:GENE=VALUE``)."""
    return phase.startswith(_PREFIX)


def _always_active(space: SearchSpace, gene: str) -> bool:
    """Whether ``gene`` is active even in the architecture with every gene at its smallest choice (the
    shallowest: a stage's first blocks, which no depth switches off), hence in every architecture of a space whose
    genes are switched on by depth."""
    if not isinstance(space, ActiveGenes):
        return True
    return gene in space.active_genes({g.name: min(g.choices) for g in space.genes()})


class FewShotSupernet(nn.Module):
    """Sub-supernets of one base supernet, one per value of ``gene``; an architecture uses its value's one.

    Args:
        make_base: Builds the base supernet (called once; the other values get deep copies).
        gene: The gene to split on: a gene every architecture of the space has (none that another gene can
            switch off).

    Raises:
        ConfigError: A gene the space does not have, or one another gene can switch off (both named).
    """

    split_done: torch.Tensor

    def __init__(self, make_base: Callable[[], Supernet], gene: str) -> None:
        super().__init__()
        base = make_base()
        space = base.space
        genes = {g.name: g for g in space.genes()}
        if gene not in genes:
            raise ConfigError(f"supernet.params.split: the {space.name} space has no gene {gene!r} (its genes: "
                              f"{', '.join(list(genes)[:12])}{' ...' if len(genes) > 12 else ''})")
        if genes[gene].inactive is not None and not _always_active(space, gene):
            raise ConfigError(f"supernet.params.split: gene {gene!r} is switched off in some {space.name} "
                              f"architectures; split on a gene every architecture has")
        if not isinstance(base, PhaseTrainable):
            raise ConfigError(f"supernet.params.split: the {space.name} supernet is not trainable by phases")
        self.gene = gene
        self.values: tuple[int, ...] = tuple(int(v) for v in genes[gene].choices)
        self.space = space
        self.num_classes = base.num_classes
        self.params = base.params
        self.registry_name = getattr(type(base), "registry_name")  # noqa: B009 (set by the registry, undeclared)
        self.space_name = base.space_name
        self.base_phases: tuple[str, ...] = tuple(base.phases)
        self.phases: tuple[str, ...] = (*self.base_phases, SPLIT_PHASE)
        module = cast(nn.Module, base)  # a supernet is an nn.Module (ModuleDict refuses anything else)
        self.subs = nn.ModuleDict({str(self.values[0]): module})
        for v in self.values[1:]:
            self.subs[str(v)] = copy.deepcopy(module)
        # 0 while the one-shot phases train the first sub-supernet for every architecture; 1 once split
        self.register_buffer("split_done", torch.zeros((), dtype=torch.int64))

    @property
    def identity_params(self) -> dict[str, object]:
        """The supernet parameters a checkpoint records: the base's and the split."""
        return {**self.params.model_dump(), "split": self.gene}

    @property
    def shared(self) -> TrainableSupernet:
        """The sub-supernet the one-shot phases train (it is copied into the others when the split begins)."""
        return cast("TrainableSupernet", self.subs[str(self.values[0])])  # the base, checked in __init__

    def _value_of_phase(self, phase: str) -> int | None:
        if not is_split_phase(phase):
            return None
        name, _, value = phase[len(_PREFIX):].partition("=")
        if name != self.gene or not value.lstrip("-").isdigit() or int(value) not in self.values:
            raise ConfigError(f"few-shot supernet: unknown phase {phase!r} (split on {self.gene!r}: "
                              f"{', '.join(split_phases(self.gene, self.values))})")
        return int(value)

    def _fix(self, arch: Architecture, value: int | None, fill: Callable[[tuple[int, ...]], int]) -> Architecture:
        """``arch`` with the split gene set to ``value``; genes that this switches on (a deeper stage's blocks) get
        ``fill(choices)``, those it switches off their inactive value."""
        if value is None:
            return arch
        genes = dict(arch.genes)
        genes[self.gene] = value
        on = self.space.active_genes(genes) if isinstance(self.space, ActiveGenes) else set(genes)
        for g in self.space.genes():
            if g.name in on and genes[g.name] not in g.choices:
                genes[g.name] = fill(tuple(g.choices))
        return self.space.canonicalize(Architecture(arch.space, genes))

    def _sub(self, arch: Architecture) -> TrainableSupernet:
        if not int(self.split_done):
            return self.shared
        value = arch.genes.get(self.gene)
        if value not in self.values:
            raise ConfigError(f"few-shot supernet: architecture {arch.arch_id} has {self.gene}={value!r}; the "
                              f"supernet is split on {self.gene} into {list(self.values)}")
        return cast("TrainableSupernet", self.subs[str(value)])  # a copy of the base

    # -- the trainable-supernet protocol -------------------------------------------------------------------
    def largest(self) -> Architecture:
        """The largest architecture of the space (the one-shot phases' teacher)."""
        return self.shared.largest()

    def largest_in(self, phase: str) -> Architecture:
        """The teacher of ``phase``: the largest architecture, with the phase's value of the split gene."""
        return self._fix(self.shared.largest(), self._value_of_phase(phase), max)

    def smallest(self, phase: str) -> Architecture:
        """The smallest of ``phase``; in a split phase, the smallest with the phase's value of the gene; of
        ``split`` itself (the phase after all others), the smallest of the space."""
        value = self._value_of_phase(phase)
        if value is None and phase != SPLIT_PHASE:
            return self.shared.smallest(phase)
        return self._fix(self.shared.smallest(self.base_phases[-1]), value, min)

    def sample_subnet(self, rng: np.random.Generator, phase: str) -> Architecture:
        """A random subnet of ``phase``; in a split phase, one of the last one-shot phase with the phase's value; of
        ``split`` itself, any subnet of the last one-shot phase (every value)."""
        value = self._value_of_phase(phase)
        if value is None and phase != SPLIT_PHASE:
            return self.shared.sample_subnet(rng, phase)
        return self._fix(self.shared.sample_subnet(rng, self.base_phases[-1]), value,
                         lambda choices: int(choices[int(rng.integers(len(choices)))]))

    def begin_phase(self, phase: str) -> None:
        """One-shot phases: the base supernet's own; the first split phase copies the shared weights into every
        sub-supernet (in place: the optimiser keeps its parameters)."""
        if self._value_of_phase(phase) is None:
            if phase == SPLIT_PHASE:
                raise ConfigError("few-shot supernet: the split phase runs as one phase per value")
            self.shared.begin_phase(phase)
            return
        if not int(self.split_done):
            with torch.no_grad():
                state = self.shared.state_dict()
                for v in self.values[1:]:
                    for name, tensor in self.subs[str(v)].state_dict().items():
                        tensor.copy_(state[name])
                self.split_done.fill_(1)

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        """``arch``'s logits, computed by the sub-supernet of its value (before the split: the shared one)."""
        return self._sub(arch)(x, arch)

    def extract(self, arch: Architecture) -> nn.Module:
        """``arch``'s standalone network with the weights of its value's sub-supernet."""
        return self._sub(arch).extract(arch)


def expand_split(phase: str, supernet: Supernet) -> list[str]:
    """The phases a configured phase runs as: ``split`` becomes one per value of a few-shot supernet's gene."""
    if phase == SPLIT_PHASE and isinstance(supernet, FewShotSupernet):
        return list(split_phases(supernet.gene, supernet.values))
    return [phase]


def make_supernet(name: str, params: Mapping[str, object], *, space: SearchSpace, generator: torch.Generator
                  ) -> Supernet:
    """``SUPERNETS.create(name, params, ...)``, except that ``params["split"]`` (a gene name) makes a few-shot
    supernet over it: one copy of the supernet per value of that gene (:mod:`hwnas.supernet.fewshot`)."""

    params = dict(params)
    split = params.pop("split", None)
    if split is None:
        return SUPERNETS.create(name, params, space=space, generator=generator)
    if not isinstance(split, str):
        raise ConfigError(f"supernet.params.split: a gene name, got {split!r}")
    return FewShotSupernet(lambda: SUPERNETS.create(name, params, space=space, generator=generator), split)
