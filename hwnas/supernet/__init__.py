"""Weight-sharing supernets: forward(x, arch), extract(arch), training."""

from hwnas.supernet.base import (
    SUPERNETS,
    RelaxedSupernet,
    Supernet,
    SupernetParams,
    TrainableSupernet,
    one_hot_weights,
)

__all__ = ["SUPERNETS", "RelaxedSupernet", "Supernet", "SupernetParams", "TrainableSupernet", "one_hot_weights"]
