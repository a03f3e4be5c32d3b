"""Random search: uniform samples of the space."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hwnas.architecture import Architecture
from hwnas.objectives import Trial
from hwnas.search_spaces.base import EnumerableSpace, sample_batch
from hwnas.strategies.base import STRATEGIES, BlackBoxStrategy


@STRATEGIES.register("random")
class RandomSearch(BlackBoxStrategy):
    """Random search: uniform samples of the space without repeats (the baseline every strategy must beat).

    A sample already evaluated is drawn again. In a space that can list its members
    (:class:`~hwnas.search_spaces.base.EnumerableSpace`, e.g. NAS-Bench-201) once half of them are evaluated,
    the batch is drawn among the members not yet evaluated, weighted by their chance under ``sample``: the
    same distribution as drawing again until something new comes, without the ever longer wait for it.
    """

    _unseen: np.ndarray | None = None  # per member of an enumerable space: not evaluated yet (once in use)
    _member_index: dict[str, int] | None = None  # arch_id -> position in the space's member list
    _enumerable: bool | None = None

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
        if self._enumerable is None:  # a protocol check costs microseconds: once
            self._enumerable = isinstance(self.space, EnumerableSpace)
        if not self._enumerable:
            return None
        if 2 * len(self.seen) < self.space.unique_size():
            return None
        members, _ = self.space.distribution()
        index = {a.arch_id: k for k, a in enumerate(members)}
        mask = np.ones(len(members), dtype=bool)
        for aid in self.seen:
            k = index.get(aid)
            if k is not None:
                mask[k] = False
        self._member_index, self._unseen = index, mask
        return mask

    def _ask_unseen(self, n: int) -> list[Architecture]:
        members, probs = self.space.distribution()
        assert self._unseen is not None
        left = np.flatnonzero(self._unseen)
        if len(left) == 0:  # exhausted: a known member, so that the runner finds nothing new and says so
            return [self.space.sample(self.rng)]
        weights = probs[left]
        picks = self.rng.choice(left, size=min(n, len(left)), replace=False, p=weights / weights.sum())
        return [members[k] for k in picks.tolist()]
