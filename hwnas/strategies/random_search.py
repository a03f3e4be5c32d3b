"""Random search: uniform samples of the space."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hwnas.architecture import Architecture
from hwnas.objectives import Trial
from hwnas.search_spaces.base import EnumerableSpace, sample_batch
from hwnas.strategies.base import BlackBoxStrategy


class RandomSearch(BlackBoxStrategy):
    """Random search: uniform samples of the space without repeats (the baseline every strategy must beat).

    A sample already evaluated is drawn again. In a space that can list its members
    (:class:`~hwnas.search_spaces.base.EnumerableSpace`, e.g. NAS-Bench-201) once half of them are evaluated,
    the batch is drawn among the members not yet evaluated, weighted by their chance under ``sample``: the
    same distribution as drawing again until something new comes, without the ever longer wait for it
    (and without a weighted draw over every remaining member per batch: see :meth:`_ask_unseen`).
    """

    _unseen: np.ndarray | None = None  # per member of an enumerable space: not evaluated yet (once in use)
    _member_index: dict[str, int] | None = None  # arch_id -> position in the space's member list
    _enumerable: EnumerableSpace | None = None  # the space, where it can list its members (checked once)
    _enumerable_checked = False
    _order: list[int] | None = None  # members not evaluated when drawn, in a weighted random order
    _pos = 0  # the next position in _order
    _handed: Sequence[int] = ()  # the members of the last batch asked from _order

    def ask(self, n: int) -> list[Architecture]:
        """Uniform samples; one already evaluated (or twice in the batch) is drawn again (see ``novel``)."""
        if self._unseen_mask() is not None:
            return self._ask_unseen(max(1, n))
        out = sample_batch(self.space, self.rng, max(1, n))
        taken: set[str] = set()
        for i, arch in enumerate(out):
            if arch.arch_id in self.seen or arch.arch_id in taken:
                out[i] = self.novel(lambda _attempt: self.space.sample(self.rng), taken)
            else:
                taken.add(arch.arch_id)
        return out

    def tell(self, trials: Sequence[Trial]) -> None:
        self.remember(trials)
        if self._unseen is not None and self._member_index is not None:
            for t in trials:
                k = self._member_index.get(t.arch.arch_id)
                if k is not None:
                    self._unseen[k] = False

    def _unseen_mask(self) -> np.ndarray | None:
        """Per member of an enumerable space, whether it is not yet evaluated; None until half of them are
        (then kept up to date by :meth:`tell`)."""
        if self._unseen is not None:
            return self._unseen
        if not self._enumerable_checked:  # a protocol check costs microseconds: once
            self._enumerable_checked = True
            if isinstance(self.space, EnumerableSpace):
                self._enumerable = self.space
        space = self._enumerable
        if space is None:
            return None
        if 2 * len(self.seen) < space.unique_size():
            return None
        members, _ = space.distribution()
        index = {a.arch_id: k for k, a in enumerate(members)}
        mask = np.ones(len(members), dtype=bool)
        for aid in self.seen:
            k = index.get(aid)
            if k is not None:
                mask[k] = False
        self._member_index, self._unseen = index, mask
        return mask

    def _ask_unseen(self, n: int) -> list[Architecture]:
        """The next ``n`` members of a weighted random order of the unevaluated ones (an exponential race:
        member k's key is Exp(1)/p_k, smallest first), which is successive weighted draws without
        replacement. By the race's memorylessness, once a batch is told, what follows it in the order is a
        fresh race among the rest, so one order drawn once serves every later batch. A batch that was not
        told before the next ask (independent asks) gets a fresh race among what is still unevaluated.
        """
        space = self._enumerable
        unseen = self._unseen
        assert space is not None and unseen is not None
        members, probs = space.distribution()
        if self._order is None or any(unseen[k] for k in self._handed):
            left = np.flatnonzero(unseen)
            if len(left) == 0:  # exhausted: a known member, so that the runner finds nothing new and says so
                return [self.space.sample(self.rng)]
            keys = self.rng.exponential(size=len(left)) / probs[left]
            self._order, self._pos = left[np.argsort(keys, kind="stable")].tolist(), 0
        order, pos = self._order, self._pos
        picks: list[int] = []
        while len(picks) < n and pos < len(order):
            k = order[pos]
            pos += 1
            if unseen[k]:  # told by other means since the order was drawn: skipped
                picks.append(k)
        self._pos, self._handed = pos, picks
        if not picks:
            return [self.space.sample(self.rng)]
        return [members[k] for k in picks]
