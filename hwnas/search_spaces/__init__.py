"""Search spaces: genes, validate/canonicalize/mutate/crossover/encode/layers/build; one file per space."""

from hwnas.search_spaces import convnext as _convnext  # noqa: F401  (registers "convnext")
from hwnas.search_spaces import darts as _darts  # noqa: F401  (registers "darts")
from hwnas.search_spaces import fbnet as _fbnet  # noqa: F401  (registers "fbnet")
from hwnas.search_spaces import mbv3 as _mbv3  # noqa: F401  (registers "mbv3")
from hwnas.search_spaces import nb201 as _nb201  # noqa: F401  (registers "nb201")
from hwnas.search_spaces import ofa as _ofa  # noqa: F401  (registers "ofa_mbv3")
from hwnas.search_spaces import vit as _vit  # noqa: F401  (registers "vit")
from hwnas.search_spaces.base import (
    SPACES,
    CategoricalSpace,
    CellGraph,
    CellGraphSpace,
    CollapseCountingSpace,
    ElasticResolutionSpace,
    Gene,
    IntegerVectorSpace,
    LayerKey,
    MostProbableSpace,
    SearchSpace,
    SizedSpace,
    StringFormSpace,
    UnitListedSpace,
    UnitProfiledSpace,
    ZeroOpSpace,
)

__all__ = [
    "SPACES", "CategoricalSpace", "CellGraph", "CellGraphSpace", "CollapseCountingSpace", "ElasticResolutionSpace",
    "Gene", "IntegerVectorSpace", "LayerKey", "MostProbableSpace",
    "SearchSpace", "SizedSpace", "StringFormSpace",
    "UnitListedSpace", "UnitProfiledSpace", "ZeroOpSpace",
]
