"""Random search: uniform samples of the space."""

from __future__ import annotations

from collections.abc import Sequence

from hwnas.architecture import Architecture
from hwnas.objectives import Trial
from hwnas.search_spaces.base import sample_batch
from hwnas.strategies.base import STRATEGIES, BlackBoxStrategy


@STRATEGIES.register("random")
class RandomSearch(BlackBoxStrategy):
    """Random search: uniform samples of the space without repeats (the baseline every strategy must beat)."""

    def ask(self, n: int) -> list[Architecture]:
        """Uniform samples; one already evaluated (or twice in the batch) is drawn again (see ``novel``)."""
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
