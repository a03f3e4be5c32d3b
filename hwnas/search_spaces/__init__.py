"""Search spaces: genes, validate/canonicalize/mutate/crossover/encode/layers/build; one file per space."""

from hwnas.search_spaces.base import SPACES, CategoricalSpace, Gene, LayerKey, SearchSpace
from hwnas.search_spaces import mbv3 as _mbv3  # noqa: F401  (registers "mbv3")

__all__ = ["SPACES", "CategoricalSpace", "Gene", "LayerKey", "SearchSpace"]
