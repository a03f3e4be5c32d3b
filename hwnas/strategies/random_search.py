"""Random search: uniform samples of the space."""

from __future__ import annotations

from collections.abc import Sequence

from hwnas.architecture import Architecture
from hwnas.objectives import Trial
from hwnas.search_spaces.base import sample_batch
from hwnas.strategies.base import STRATEGIES, BlackBoxStrategy


@STRATEGIES.register("random")
class RandomSearch(BlackBoxStrategy):
    """Random search: independent uniform samples of the space (the baseline every strategy must beat)."""

    def ask(self, n: int) -> list[Architecture]:
        return sample_batch(self.space, self.rng, max(1, n))

    def tell(self, trials: Sequence[Trial]) -> None:
        return None
