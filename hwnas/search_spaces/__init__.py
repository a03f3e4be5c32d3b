"""Search spaces: genes, validate/canonicalize/mutate/crossover/encode/layers/build; one file per space."""

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
