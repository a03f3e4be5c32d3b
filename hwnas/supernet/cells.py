"""Mixed-operation cell supernets for the NAS-Bench-201 (``nb201``) and DARTS (``darts``) cell spaces.

Weight sharing. Everything outside the searched edges is one module shared by every architecture:
the stem, NB201's residual reduction blocks and final BN + ReLU, DARTS's per-cell preprocessing
(``preprocess0``/``preprocess1``, fixed by the cell's position), and the classifier. Each searchable
*edge* holds a *mixed op*: one separate module per candidate operation, built by the space's own
constructors (NB201's ``make_op``, DARTS's ``make_op`` at the edge's stride), so the weights of an
operation on an edge are shared by every architecture that puts that operation on that edge, and
never by two different operations. Operations without parameters (skip, pooling) hold none; the
zero operation (NB201's ``none``) has no module at all.

- ``nb201``: every cell position of the network (``3 * cells_per_stage`` of them) has its own mixed op
  on each of its 6 edges ``e{to}_{from}``, with modules for ``skip_connect``, ``nor_conv_1x1``,
  ``nor_conv_3x3`` and ``avg_pool_3x3``.
- ``darts``: every cell position has a mixed op on each *potential* edge ``(node i, input state s)``,
  ``s in 0 .. i + 1`` (DARTS's search network), holding one module per allowed operation; the edge is
  strided when the cell reduces and ``s < 2``. A genotype slot ``(i, j)`` that reads state ``s`` with
  operation ``o`` uses the module ``o`` of edge ``(i, s)``, whichever slot ``j`` names it.

Single path (``forward(x, arch)``, SPOS, Guo et al. 2020): the architecture is canonicalized exactly as
the space's :meth:`build` canonicalizes it, then each edge runs only its chosen operation. An NB201
``none`` edge contributes nothing, and a node whose inputs are all ``none`` is zero, as in the
space's cell.

Relaxation (``forward_relaxed(x, weights)``, DARTS/GDAS/FBNet/ProxylessNAS): a weighted sum over the
genes' choices, in ``Gene.choices`` order; choices whose weight is exactly 0 are not computed.

- ``nb201``: edge ``e`` outputs ``sum_k w_e[k] * op_k(x)``; the ``none`` choice contributes 0 (its
  weight gets a gradient only through the strategy's normalisation).
- ``darts``: node ``i`` has two slots ``j``, each with an input gene ``w_in_j`` (over states
  ``0 .. i + 1``) and an op gene ``w_op_j`` (over the allowed operations). Slot ``j`` outputs
  ``sum_s w_in_j[s] * sum_o w_op_j[o] * op_{i,s,o}(state_s)``: a mixture over inputs of a mixture over
  operations, through the shared edge modules. The node sums its two slots, so it is
  ``sum_s sum_o c[s, o] * op_{i,s,o}(state_s)`` with ``c[s, o] = sum_j w_in_j[s] * w_op_j[o]``, and each
  ``op_{i,s,o}`` runs at most once per node. One-hot weights give ``c = 1`` exactly on the two chosen
  (input, op) pairs and 0 elsewhere: the single-path node.

The relaxation computes what the weights say and canonicalizes nothing. :func:`~hwnas.supernet.one_hot_weights`
canonicalizes first, so its weights reproduce ``forward``. The one-hot weights of a non-canonical DARTS
genotype (a node's slots swapped) give the same output, since the node sums its slots; those of a
non-canonical NB201 cell (with ``merge_isomorphic``) compute the cell as written, which can differ from
its representative by the BatchNorm shift of a convolution applied to an all-zero node.

Partial channels (``partial_channels = K > 1``, PC-DARTS, Xu et al. ICLR 2020): edge modules are built
at ``C / K`` channels; on every edge the first ``C / K`` channels of the input go through the (mixed or
chosen) operation, the remaining channels bypass it (2x2 max-pooled on a strided DARTS edge), the two
parts are concatenated and channel-shuffled with ``K`` groups. The bypass is unweighted in NB201 (as
in PC-DARTS; so a ``none`` edge still passes the bypassed channels) and weighted by the input weight
``sum_j w_in_j[s]`` in DARTS (so that the slot mixture stays linear in the input weights; one-hot
weights give 1 on the chosen inputs). Single-path forward takes the same partial path, so one-hot
relaxation still reproduces it. Such a network is not any member's standalone network: ``extract``
raises :class:`~hwnas.errors.ConfigError` (derive the architecture, then train it from scratch or
evaluate it with a ``K = 1`` supernet).

Training is single-path uniform sampling: one phase ``"uniform"``; ``sample_subnet`` is the space's
own uniform sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import BaseModel, Field
from torch import nn

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError
from hwnas.search_spaces.darts import PRIMITIVES, _input_gene, _op_gene, _torch_modules
from hwnas.search_spaces.nb201 import EDGES as NB201_EDGES
from hwnas.search_spaces.nb201 import OPS as NB201_OPS
from hwnas.search_spaces.nb201_modules import DepthwiseBatchNorm2d, NB201Cell, ResidualReduction
from hwnas.search_spaces.nb201_modules import make_op as nb201_make_op
from hwnas.supernet.base import SupernetParams, bind_space, relaxation_weights

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.search_spaces.darts import DartsSpace
    from hwnas.search_spaces.nb201 import NB201Space

#: A function from an edge's (partial) input to its operation output, None for "contributes nothing".
_EdgeFn = Callable[[torch.Tensor], "torch.Tensor | None"]


class CellSupernetParams(SupernetParams):
    """Parameters of the mixed-operation cell supernets."""

    partial_channels: int = Field(
        1, ge=1, description="PC-DARTS's K: edges operate on the first C/K channels, the rest bypass them and are "
                             "channel-shuffled back in (K = 1: the full network, whose subnets extract() can export)")


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """ShuffleNet's channel shuffle: of ``groups`` groups of ``n`` channels, ``g * n + i`` moves to ``i * groups + g``.

    Args:
        x: A ``(batch, channels, height, width)`` tensor, channels a multiple of ``groups``.
        groups: Number of groups.
    """
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


def partial_channel_edge(x: torch.Tensor, k: int, stride: int, op: _EdgeFn,
                         bypass_weight: torch.Tensor | None = None) -> torch.Tensor:
    """PC-DARTS's edge: ``op`` on the first ``C / k`` channels, the rest bypass, concatenated and shuffled.

    Args:
        x: The edge input, ``C`` channels.
        k: Partial-channel ratio; ``C`` is a multiple of it.
        stride: The edge's stride; the bypassed channels are 2x2 max-pooled when it is 2.
        op: Maps the ``C / k`` channel part to its output, or None for a zero output.
        bypass_weight: Scales the bypassed channels (None: unscaled).
    """
    c = x.shape[1] // k
    head, tail = x[:, :c], x[:, c:]
    if stride == 2:
        tail = F.max_pool2d(tail, 2, 2)
    y = op(head)
    if y is None:
        y = head.new_zeros((head.shape[0], c, tail.shape[2], tail.shape[3]))
    if bypass_weight is not None:
        tail = tail * bypass_weight
    return channel_shuffle(torch.cat([y, tail], dim=1), k)


def _copy_module(dst: nn.Module, src: nn.Module) -> None:
    """Copy every parameter and buffer of ``src`` into the identically built ``dst`` (strict keys; dst owns them)."""
    dst.load_state_dict(src.state_dict(), strict=True)


def _add(total: torch.Tensor | None, y: torch.Tensor) -> torch.Tensor:
    return y if total is None else total + y


class _CellSupernet(nn.Module):
    """What the two cell supernets share: construction, seeded init, relaxation weights, phases, extraction."""

    space_name: ClassVar[str] = ""
    space: NB201Space | DartsSpace  # the registered space named space_name (bind_space checks it)
    num_classes: int
    params: CellSupernetParams
    Params: ClassVar[type[CellSupernetParams]] = CellSupernetParams
    phases: tuple[str, ...] = ("uniform",)

    def __init__(self, *, space: SearchSpace, generator: torch.Generator, **params: object) -> None:
        super().__init__()
        bind_space(self, space, params)  # space_problems included
        self.k = int(self.params.partial_channels)
        seed = int(torch.randint(2**62, (1,), generator=generator))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self._build_modules()

    #: The space parameter that ``partial_channels`` must divide (the first cell's channels).
    channels_param: ClassVar[str] = "channels"

    @classmethod
    def space_problems(cls, space: SearchSpace, params: BaseModel) -> dict[str, str]:
        """What of ``params`` this ``space`` does not allow (read by :func:`~hwnas.supernet.base.bind_space` and
        by ``nas validate``, before anything is built): ``partial_channels`` must divide the channels."""
        k = int(getattr(params, "partial_channels", 1))
        c = int(getattr(space.params, cls.channels_param))
        if c % k:
            return {"partial_channels": f"{cls.space_name} supernet: partial_channels={k} must divide the space's "
                                        f"{cls.channels_param}={c}"}
        return {}

    # -- subclass hooks ------------------------------------------------------------------------------
    def _build_modules(self) -> None:
        raise NotImplementedError

    # -- shared helpers ------------------------------------------------------------------------------
    def _relaxation(self, weights: Mapping[str, torch.Tensor], x: torch.Tensor
                    ) -> tuple[dict[str, torch.Tensor], dict[str, list[bool]]]:
        return relaxation_weights(self.space_name, self.space, weights, x)

    def _check_phase(self, phase: str) -> None:
        if phase not in self.phases:
            raise ConfigError(f"{self.space_name} supernet: unknown phase {phase!r} (phases: {', '.join(self.phases)})")

    def _check_extractable(self) -> None:
        if self.k > 1:
            raise ConfigError(
                f"{self.space_name} supernet: extract() is not available with partial_channels={self.k}: a "
                "partial-channel supernet computes PC-DARTS's search network, not the space's standalone network; "
                "train the derived architecture from scratch, or evaluate it with a partial_channels=1 supernet")

    def _build_member(self, arch: Architecture) -> Any:
        """``space.build(arch)`` without touching the global RNG, on the supernet's device and float dtype."""
        with torch.random.fork_rng(devices=[]):
            model = self.space.build(arch)
        ref = next(self.parameters())
        return model.to(device=ref.device, dtype=ref.dtype)

    # -- TrainableSupernet ---------------------------------------------------------------------------
    def sample_subnet(self, rng: np.random.Generator, phase: str) -> Architecture:
        """A uniform member (the space's own sample): single-path one-shot's uniform sampling."""
        self._check_phase(phase)
        return self.space.sample(rng)

    def begin_phase(self, phase: str) -> None:
        """Nothing to do: the single ``uniform`` phase samples every gene from the start."""
        self._check_phase(phase)


# -- NAS-Bench-201 ---------------------------------------------------------------------------------------------


class _NB201MixedCell(nn.Module):
    """One NB201 cell position: per edge, one module per operation other than ``none``."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.edges = nn.ModuleDict({
            name: nn.ModuleDict({op: nb201_make_op(op, channels) for op in NB201_OPS if op != "none"})
            for name, _, _ in NB201_EDGES
        })

    def op(self, edge: str, name: str) -> nn.Module:
        """The module of operation ``name`` on edge ``edge``."""
        return cast(nn.ModuleDict, self.edges[edge])[name]


class NB201Supernet(_CellSupernet):
    """NAS-Bench-201 supernet: a mixed op on each of the 6 edges of every cell, shared stem/reductions/head.

    Args:
        space: An :class:`~hwnas.search_spaces.nb201.NB201Space`.
        generator: Seeds the weight initialisation.
        partial_channels: PC-DARTS's ``K`` (default 1: no partial channels); ``channels`` must be a multiple.
    """

    space_name = "nb201"
    space: NB201Space

    def _build_modules(self) -> None:
        p = self.space.params
        self.stem = nn.Sequential(nn.Conv2d(p.in_chans, p.channels, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(p.channels))
        layers: list[nn.Module] = []
        c = p.channels
        for stage in range(3):
            if stage:
                layers.append(ResidualReduction(c, c * 2))
                c *= 2
            layers.extend(_NB201MixedCell(c // self.k) for _ in range(p.cells_per_stage))
        self.cells = nn.ModuleList(layers)  # the same order as NB201Network.cells
        self.lastact = nn.Sequential(DepthwiseBatchNorm2d(c), nn.ReLU(inplace=False))
        self.classifier = nn.Linear(c, p.num_classes)

    def _run(self, x: torch.Tensor, edge: Callable[[_NB201MixedCell, str, torch.Tensor], torch.Tensor | None]
             ) -> torch.Tensor:
        """The network with ``edge(cell, edge name, input)`` as each edge's output (None: contributes nothing)."""
        h = self.stem(x)
        for layer in self.cells:
            if isinstance(layer, _NB201MixedCell):
                nodes = [h]
                for to in (1, 2, 3):
                    total: torch.Tensor | None = None
                    for name, t, frm in NB201_EDGES:
                        if t == to:
                            y = edge(layer, name, nodes[frm])
                            if y is not None:
                                total = _add(total, y)
                    nodes.append(total if total is not None else h.mul(0.0))  # as NB201Cell: all-none node is zero
                h = nodes[3]
            else:
                h = layer(h)
        h = self.lastact(h)
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        """Logits of ``arch`` (canonicalized as :meth:`NB201Space.build` does): each edge runs its chosen op only.

        Raises:
            InvalidArchitecture: ``arch`` is not a member (names the gene).
        """
        chosen = dict(zip((name for name, _, _ in NB201_EDGES), self.space.cell_ops(arch)))
        k = self.k

        def edge(cell: _NB201MixedCell, name: str, h: torch.Tensor) -> torch.Tensor | None:
            op = chosen[name]

            def run(part: torch.Tensor) -> torch.Tensor | None:
                return None if op == "none" else cell.op(name, op)(part)

            return run(h) if k == 1 else partial_channel_edge(h, k, 1, run)

        return self._run(x, edge)

    def forward_relaxed(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits of the mixture: every edge outputs ``sum_k weights[edge][k] * op_k(input)`` (``none`` is 0).

        Args:
            x: Input batch.
            weights: Edge gene name to a vector over :data:`~hwnas.search_spaces.nb201.OPS` (the gene's choices);
                choices with weight exactly 0 are skipped.
        """
        ws, nonzero = self._relaxation(weights, x)
        choices = {g.name: g.choices for g in self.space.genes()}
        k = self.k

        def edge(cell: _NB201MixedCell, name: str, h: torch.Tensor) -> torch.Tensor | None:
            w, live = ws[name], nonzero[name]

            def mixed(part: torch.Tensor) -> torch.Tensor | None:
                total: torch.Tensor | None = None
                for pos, value in enumerate(choices[name]):
                    op = NB201_OPS[value]
                    if live[pos] and op != "none":
                        total = _add(total, w[pos] * cell.op(name, op)(part))
                return total

            return mixed(h) if k == 1 else partial_channel_edge(h, k, 1, mixed)

        return self._run(x, edge)

    def extract(self, arch: Architecture) -> nn.Module:
        """``space.build(arch)`` (the canonical cell) with the stem, reductions, head and chosen edge ops copied in.

        Returns:
            The standalone network in eval mode, owning its weights.

        Raises:
            ConfigError: With ``partial_channels > 1``.
            InvalidArchitecture: ``arch`` is not a member.
        """
        self._check_extractable()
        ops = self.space.cell_ops(arch)
        model = self._build_member(arch)
        with torch.no_grad():
            _copy_module(model.stem, self.stem)
            if len(model.cells) != len(self.cells):  # pragma: no cover - guards a change of NB201Network
                raise AssertionError("nb201 supernet: the space's network has a different layer count")
            for dst, src in zip(model.cells, self.cells):
                if isinstance(src, _NB201MixedCell):
                    assert isinstance(dst, NB201Cell)
                    for (name, _, _), op in zip(NB201_EDGES, ops):
                        if op != "none":
                            _copy_module(dst.edges[name], src.op(name, op))
                else:
                    _copy_module(dst, src)
            _copy_module(model.lastact, self.lastact)
            _copy_module(model.classifier, self.classifier)
        return model.eval()

    def largest(self) -> Architecture:
        """The space's largest member: every edge ``nor_conv_3x3``, the most parameters and FLOPs."""
        return self.space.largest()

    def smallest(self, phase: str) -> Architecture:
        """Every edge ``skip_connect``: no cell parameters (tied with all-``none``, which zeroes every cell and makes
        the output independent of the input, so it is not used)."""
        self._check_phase(phase)
        return self.space.canonicalize(self.space.from_ops((NB201_OPS.index("skip_connect"),) * len(NB201_EDGES)))


# -- DARTS -----------------------------------------------------------------------------------------------------


def _edge_key(node: int, state: int) -> str:
    return f"n{node}_s{state}"


class _DartsMixedCell(nn.Module):
    """One DARTS cell position: its preprocessing and a mixed op on every potential edge (node i, state s)."""

    def __init__(self, *, c_pp: int, c_p: int, c: int, reduction: bool, reduction_prev: bool, nodes: int,
                 ops: Sequence[str], k: int) -> None:
        super().__init__()
        m = _torch_modules()
        proto = m.Cell(c_pp=c_pp, c_p=c_p, c=c, reduction_prev=reduction_prev, edges=[])  # the space's preprocessing
        self.preprocess0 = proto.preprocess0
        self.preprocess1 = proto.preprocess1
        self.c = c
        self.reduction = reduction
        self.edges = nn.ModuleDict({
            _edge_key(i, s): nn.ModuleDict({op: m.make_op(op, c // k, self.stride(s)) for op in ops})
            for i in range(nodes) for s in range(i + 2)
        })

    def op(self, edge: str, name: str) -> nn.Module:
        """The module of operation ``name`` on edge ``edge`` (see :func:`_edge_key`)."""
        return cast(nn.ModuleDict, self.edges[edge])[name]

    def stride(self, state: int) -> int:
        """2 for an edge from a cell input of a reduction cell, else 1 (as the space's plan)."""
        return 2 if self.reduction and state < 2 else 1


class DartsSupernet(_CellSupernet):
    """DARTS supernet: a mixed op on every potential edge (node, input state) of every cell position.

    Args:
        space: A :class:`~hwnas.search_spaces.darts.DartsSpace` (its ``ops`` are the candidate operations).
        generator: Seeds the weight initialisation.
        partial_channels: PC-DARTS's ``K`` (default 1); ``init_channels`` must be a multiple (then a reduction
            cell's ``2 * init_channels / K`` or ``4 * init_channels / K`` channels are even, as the factorized
            reduction of a strided ``skip_connect`` needs).
    """

    space_name = "darts"
    space: DartsSpace

    channels_param = "init_channels"  # the first cell's; later cells have 2x and 4x

    def _build_modules(self) -> None:
        p = self.space.params
        stem_c = p.stem_multiplier * p.init_channels
        self.stem = nn.Sequential(nn.Conv2d(p.in_chans, stem_c, 3, padding=1, bias=False), nn.BatchNorm2d(stem_c))
        plan = self.space._plan(self.space.chain_arch(p.ops[0]))  # channels and strides do not depend on the arch
        self.cells = nn.ModuleList(
            _DartsMixedCell(c_pp=c["c_pp"], c_p=c["c_p"], c=c["c"], reduction=c["reduction"],
                            reduction_prev=c["reduction_prev"], nodes=p.nodes, ops=p.ops, k=self.k)
            for c in plan
        )
        self.classifier = nn.Linear(p.nodes * plan[-1]["c"], p.num_classes)

    def _mixed_cells(self) -> list[_DartsMixedCell]:
        return cast(list[_DartsMixedCell], list(self.cells))

    def _run(self, x: torch.Tensor, node: Callable[[int, _DartsMixedCell, int, list[torch.Tensor]], torch.Tensor]
             ) -> torch.Tensor:
        """The network with ``node(cell index, cell, node index, states)`` computing each intermediate node."""
        s0 = s1 = self.stem(x)
        for index, cell in enumerate(self._mixed_cells()):
            states = [cell.preprocess0(s0), cell.preprocess1(s1)]
            for i in range(self.space.params.nodes):
                states.append(node(index, cell, i, states))
            s0, s1 = s1, torch.cat(states[2:], dim=1)
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(s1, 1), 1))

    def forward(self, x: torch.Tensor, arch: Architecture) -> torch.Tensor:
        """Logits of ``arch`` (canonicalized as :meth:`DartsSpace.build` does): each slot runs its chosen op only.

        Raises:
            InvalidArchitecture: ``arch`` is not a member (names the gene or node).
        """
        plan = self.space._plan(arch)
        k = self.k

        def node(index: int, cell: _DartsMixedCell, i: int, states: list[torch.Tensor]) -> torch.Tensor:
            ys = []
            for op, state, stride in plan[index]["edges"][2 * i: 2 * i + 2]:
                module = cell.op(_edge_key(i, state), op)
                ys.append(module(states[state]) if k == 1 else partial_channel_edge(states[state], k, stride, module))
            return ys[0] + ys[1]

        return self._run(x, node)

    def forward_relaxed(self, x: torch.Tensor, weights: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits of the mixture: node ``i`` is ``sum_s sum_o c[s, o] * op_{i,s,o}(state_s)``, ``c[s, o] =
        sum_j w_in_j[s] * w_op_j[o]`` over its two slots ``j`` (see the module docstring).

        Args:
            x: Input batch.
            weights: Every gene: ``{cell}_n{i}_in{j}`` over states ``0 .. i + 1``, ``{cell}_n{i}_op{j}`` over the
                space's operations (PRIMITIVES indices, in ``Gene.choices`` order); (input, op) pairs whose
                coefficient has no non-zero term are not computed.
        """
        ws, nonzero = self._relaxation(weights, x)
        op_gene = next(g for g in self.space.genes() if g.name == _op_gene("normal", 0, 0))
        op_names = [PRIMITIVES[v] for v in op_gene.choices]  # every op gene has the same choices
        k = self.k

        def node(index: int, cell: _DartsMixedCell, i: int, states: list[torch.Tensor]) -> torch.Tensor:
            kind = "reduce" if cell.reduction else "normal"
            w_in = [ws[_input_gene(kind, i, j)] for j in range(2)]
            w_op = [ws[_op_gene(kind, i, j)] for j in range(2)]
            live_in = [nonzero[_input_gene(kind, i, j)] for j in range(2)]
            live_op = [nonzero[_op_gene(kind, i, j)] for j in range(2)]
            total: torch.Tensor | None = None
            for s in range(i + 2):
                slots = [j for j in range(2) if live_in[j][s]]
                if not slots:
                    continue
                key = _edge_key(i, s)

                def mixed(h: torch.Tensor, s: int = s, slots: list[int] = slots, key: str = key) -> torch.Tensor | None:
                    out: torch.Tensor | None = None
                    for pos, op in enumerate(op_names):
                        coef: torch.Tensor | None = None
                        for j in slots:
                            if live_op[j][pos]:
                                coef = _add(coef, w_in[j][s] * w_op[j][pos])
                        if coef is not None:
                            out = _add(out, coef * cell.op(key, op)(h))
                    return out

                if k == 1:
                    y = mixed(states[s])
                    if y is None:
                        continue
                else:
                    bypass: torch.Tensor | None = None
                    for j in slots:
                        bypass = _add(bypass, w_in[j][s])
                    y = partial_channel_edge(states[s], k, cell.stride(s), mixed, bypass)
                total = _add(total, y)
            if total is None:  # every slot switched off: a zero node
                ref = states[1]
                div = 2 if cell.reduction else 1
                total = ref.new_zeros((ref.shape[0], cell.c, ref.shape[2] // div, ref.shape[3] // div))
            return total

        return self._run(x, node)

    def extract(self, arch: Architecture) -> nn.Module:
        """``space.build(arch)`` with the stem, preprocessing, classifier and each slot's (input, op) module copied in.

        Returns:
            The standalone network in eval mode, owning its weights (BatchNorm statistics copied too).

        Raises:
            ConfigError: With ``partial_channels > 1``.
            InvalidArchitecture: ``arch`` is not a member.
        """
        self._check_extractable()
        plan = self.space._plan(arch)
        model = self._build_member(arch)
        with torch.no_grad():
            _copy_module(model.stem, self.stem)
            for dst, src, cell_plan in zip(model.cells, self._mixed_cells(), plan):
                _copy_module(dst.preprocess0, src.preprocess0)
                _copy_module(dst.preprocess1, src.preprocess1)
                for e, (op, state, _stride) in enumerate(cell_plan["edges"]):
                    _copy_module(dst.ops[e], src.op(_edge_key(e // 2, state), op))
            _copy_module(model.classifier, self.classifier)
        return model.eval()

    def largest(self) -> Architecture:
        """The space's largest member: every slot the op with the most parameters (``sep_conv_5x5`` when
        allowed), node ``i`` reading states ``(i, i + 1)`` (:meth:`DartsSpace.largest`)."""
        return self.space.largest()

    def smallest(self, phase: str) -> Architecture:
        """Every slot the op with the fewest parameters (``max_pool_3x3`` when allowed); every node reads the cell
        inputs ``(0, 1)``, so reduction-cell edges are all strided."""
        self._check_phase(phase)
        return self.space.chain_arch(self.space.op_by_params(heaviest=False), shallow=True)


__all__ = ["CellSupernetParams", "DartsSupernet", "NB201Supernet", "channel_shuffle", "partial_channel_edge"]
