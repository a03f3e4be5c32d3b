"""The Supernet protocol: one set of shared weights, every architecture of a space a path through it.

The architecture is always explicit: ``forward(x, arch)`` computes ``arch``'s output and leaves
nothing behind (no "active subnet" a later call could inherit), and ``extract(arch)`` returns a new
standalone module, with its own copies of the weights, whose output equals the supernet's for
that architecture. One-shot (differentiable) strategies need one more capability, a forward pass
over a continuous relaxation of the choices: :class:`RelaxedSupernet`.

Registered supernets are built as ``SUPERNETS.create(name, params, space=space, generator=g)``:
keyword-only constructors that receive their validated ``Params``, the space instance (an instance
of the registered space named by the class attribute ``space_name``) and a seeded
``torch.Generator`` for weight initialisation. torch is imported only for type hints here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from hwnas.registry import Registry

if TYPE_CHECKING:  # torch stays out of import time
    import torch
    from torch import nn
    from typing_extensions import Self

    from hwnas.architecture import Architecture
    from hwnas.search_spaces.base import SearchSpace

#: The built-in supernets, each imported when its name is first looked up (plug-ins come from entry points).
BUILTIN_SUPERNETS: dict[str, str] = {
    "convnext": "hwnas.supernet.convnext:ConvNeXtSupernet",
    "darts": "hwnas.supernet.cells:DartsSupernet",
    "fbnet": "hwnas.supernet.fbnet:FBNetSupernet",
    "mbv3": "hwnas.supernet.ofa_mbv3:MobileNetV3Supernet",
    "nb201": "hwnas.supernet.cells:NB201Supernet",
    "ofa_mbv3": "hwnas.supernet.ofa_mbv3:OFAMobileNetV3Supernet",
    "vit": "hwnas.supernet.vit:ViTSupernet",
}
SUPERNETS: Registry[Supernet] = Registry(kind="supernet", entry_point_group="hwnas.supernets",
                                         builtins=BUILTIN_SUPERNETS)


@runtime_checkable
class Supernet(Protocol):
    """Weight-sharing network over a search space (in practice an ``nn.Module``).

    Attributes:
        space: The search space whose members this supernet computes (read-only: a supernet may declare the
            space class it is for).
        num_classes: Width of the output (logits per example).

    ``params`` and ``space_name`` (what a registered supernet is built from and for, what a checkpoint records),
    ``to`` and ``__call__`` are members for type checkers only: ``isinstance`` does not look for them.
    """

    @property
    def space(self) -> SearchSpace:
        """The search space whose members this supernet computes."""
        ...

    num_classes: int
    if TYPE_CHECKING:
        @property
        def params(self) -> BaseModel:
            """The validated ``Params`` the supernet was built with."""
            ...

        @property
        def space_name(self) -> str:
            """The registered name of the search space it is for."""
            ...

        def to(self, device: str | torch.device) -> Self:
            """Move the shared weights (as ``nn.Module.to``)."""
            ...

        def __call__(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
            """:meth:`forward` through ``nn.Module.__call__`` (hooks included)."""
            ...

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        """Logits ``(batch, num_classes)`` of ``arch`` on ``x``; reads and writes no per-architecture state."""
        ...

    def extract(self, arch: Architecture) -> nn.Module:
        """A new standalone module, owning copies of ``arch``'s weights, whose output equals ``forward(x, arch)``."""
        ...

    def state_dict(self) -> Mapping[str, torch.Tensor]:
        """The shared weights (as ``nn.Module.state_dict``)."""
        ...

    def load_state_dict(self, state_dict: Mapping[str, torch.Tensor], strict: bool = True) -> object:
        """Replace the shared weights (as ``nn.Module.load_state_dict``)."""
        ...

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The trainable shared weights (as ``nn.Module.parameters``)."""
        ...

    def train(self, mode: bool = True) -> Self:
        """Training or evaluation behaviour of batch norm and dropout (as ``nn.Module.train``)."""
        ...

    def eval(self) -> Self:
        """Same as ``train(False)``."""
        ...


@runtime_checkable
class SplitIdentity(Protocol):
    """A supernet whose checkpoint identity records more than its ``Params`` (a few-shot supernet's split gene)."""

    @property
    def identity_params(self) -> dict[str, object]:
        """The supernet parameters a checkpoint records."""
        ...


@runtime_checkable
class RelaxedSupernet(Supernet, Protocol):
    """A supernet that also computes a continuous relaxation of its choices (what one-shot strategies train).

    DARTS and FBNet pass soft weights (a softmax of architecture logits), GDAS and ProxylessNAS pass
    hard one-hot weights with a straight-through gradient; all four fit this one call.
    """

    def forward_relaxed(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits of the mixture that weights each gene's choices by ``weights``.

        Args:
            x: Input batch.
            weights: Gene name to a 1-D tensor over that gene's choices (in ``Gene.choices`` order),
                non-negative and summing to one; a gene switched off by others has a zero vector.
                Every gene of ``space.genes()`` is present. The one-hot weights of an architecture
                (laid out as ``space.encode`` lays it out) reproduce ``forward(x, arch)``, and
                gradients flow to the weights.
        """
        ...


@runtime_checkable
class PhaseTrainable(Protocol):
    """Training by phases (:class:`TrainableSupernet` without the :class:`Supernet` members): what a few-shot
    supernet needs of the supernet it splits."""

    phases: tuple[str, ...]

    def largest(self) -> Architecture:
        """The largest member of the space (the distillation teacher)."""
        ...

    def smallest(self, phase: str) -> Architecture:
        """The smallest member reachable in ``phase``."""
        ...

    def sample_subnet(self, rng: np.random.Generator, phase: str) -> Architecture:
        """A random member reachable in ``phase``."""
        ...

    def begin_phase(self, phase: str) -> None:
        """Called once before ``phase`` starts."""
        ...


@runtime_checkable
class TrainableSupernet(Supernet, PhaseTrainable, Protocol):
    """What the shared trainer (:mod:`hwnas.supernet.train`) needs beyond :class:`Supernet`.

    Training follows once-for-all's progressive shrinking: the phases run in order, each unlocking
    more elastic dimensions, and every step trains the sandwich of the phase's largest, its smallest
    and random subnets, the others distilled in place from the largest. A supernet with a single
    uniform phase (SPOS over cells) lists one phase.

    Attributes:
        phases: Phase names in training order (``("largest", "kernel", "depth", "expand")`` for
            once-for-all's MobileNetV3; ``("uniform",)`` for single-path cell supernets).
    """

    phases: tuple[str, ...]

    def largest(self) -> Architecture:
        """The largest member of the space (the distillation teacher)."""
        ...

    def smallest(self, phase: str) -> Architecture:
        """The smallest member reachable in ``phase`` (dimensions not yet elastic held at their largest)."""
        ...

    def sample_subnet(self, rng: np.random.Generator, phase: str) -> Architecture:
        """A random member reachable in ``phase``: elastic dimensions unlocked so far drawn, the rest largest."""
        ...

    def begin_phase(self, phase: str) -> None:
        """Called once before ``phase`` starts (e.g. re-sort channels by importance before elastic width)."""
        ...


class SupernetParams(BaseModel):
    """Parameters common to every supernet; subclasses add their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def space_problems(cls: type, space: SearchSpace, params: BaseModel) -> dict[str, str]:
    """What of a supernet's validated ``params`` the ``space`` does not allow, by parameter name: the supernet
    class's optional classmethod ``space_problems(space, params)``, which builds nothing. The one check of the
    constructors (through :func:`bind_space`) and of ``nas validate`` (a one-shot strategy's ``supernet:`` block).
    """
    hook = getattr(cls, "space_problems", None)
    return dict(hook(space, params)) if callable(hook) else {}


def bind_space(supernet: Any, space: SearchSpace, params: Mapping[str, object]) -> None:
    """What every supernet constructor does first: validate ``params`` into ``supernet.params``, check that
    ``space`` is an instance of the space registered as ``supernet.space_name``, set ``space`` and
    ``num_classes``.

    Raises:
        ConfigError: ``space`` is another space (both named), or it does not allow a parameter
            (:func:`space_problems`).
    """
    from hwnas.errors import ConfigError
    from hwnas.search_spaces.base import SPACES, ResolvedClassCount

    supernet.params = supernet.Params(**params)
    expected = SPACES.get(supernet.space_name)
    if not isinstance(space, expected):
        raise ConfigError(f"supernet {supernet.space_name!r} needs the {supernet.space_name!r} search space "
                          f"({expected.__name__}), got {type(space).__name__} (space {getattr(space, 'name', '?')!r})")
    problems = space_problems(type(supernet), space, supernet.params)
    if problems:
        raise ConfigError(list(problems.values()))
    supernet.space = space
    resolved = space.num_classes if isinstance(space, ResolvedClassCount) else None  # its default may depend on
    # another parameter (fbnet)
    declared: Any = space.params  # a space with a supernet has num_classes among its parameters
    supernet.num_classes = int(resolved if isinstance(resolved, int) else declared.num_classes)


def relaxation_weights(name: str, space: SearchSpace, weights: Mapping[str, torch.Tensor], x: torch.Tensor
                       ) -> tuple[dict[str, torch.Tensor], dict[str, list[bool]]]:
    """What every ``forward_relaxed`` checks first: each gene's weights, on ``x``'s device and dtype, and per gene
    which choices are non-zero (read with one host sync).

    Raises:
        ValueError: A gene's weights are missing or not one per choice (named, with the supernet ``name``).
    """
    import torch

    genes = space.genes()
    ws: dict[str, torch.Tensor] = {}
    for g in genes:
        if g.name not in weights:
            raise ValueError(f"{name} supernet: forward_relaxed() weights lack gene {g.name!r}")
        w = weights[g.name]
        if w.dim() != 1 or w.shape[0] != len(g.choices):
            raise ValueError(f"{name} supernet: weights of gene {g.name!r} have shape {tuple(w.shape)}, expected "
                             f"({len(g.choices)},) (one per choice)")
        ws[g.name] = w.to(device=x.device, dtype=x.dtype)
    flat = torch.cat([ws[g.name].detach() for g in genes]).tolist()
    nonzero: dict[str, list[bool]] = {}
    pos = 0
    for g in genes:
        nonzero[g.name] = [v != 0.0 for v in flat[pos:pos + len(g.choices)]]
        pos += len(g.choices)
    return ws, nonzero


def one_hot_weights(space: SearchSpace, arch: Architecture) -> dict[str, torch.Tensor]:
    """The relaxation weights that select exactly ``arch``: one-hot per gene, zeros for an inactive gene.

    Args:
        space: The search space.
        arch: A member of it.
    """
    import torch

    arch = space.canonicalize(arch)
    out = {}
    for g in space.genes():
        w = torch.zeros(len(g.choices))
        value = arch.genes[g.name]
        if value in g.choices:
            w[g.choices.index(value)] = 1.0
        out[g.name] = w
    return out


def init_mobile_weights(module: nn.Module, generator: torch.Generator) -> None:
    """MobileNet-style initialisation (as timm's EfficientNet/MobileNetV3): He fan-out normal convs (fan-out per
    group, so depthwise convs keep the signal), unit/zero batch norms with fresh running statistics, a uniform
    classifier; all draws from ``generator``."""
    import torch
    from torch import nn

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
                nn.init.normal_(m.weight, 0.0, (2.0 / fan_out) ** 0.5, generator=generator)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
                m.reset_running_stats()
            elif isinstance(m, nn.Linear):
                bound = 1.0 / m.weight.shape[1] ** 0.5
                nn.init.uniform_(m.weight, -bound, bound, generator=generator)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
