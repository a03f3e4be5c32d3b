"""Training: the fixed short recipe, top-1 evaluation, BatchNorm recalibration, seeded initialisation.

Below ``supernet/``, ``predictors/`` and ``experiments/``: everything that trains a network uses this.
torch is imported inside the functions.
"""

from hwnas.training.recipe import (
    TrainRecipe,
    build_seeded,
    evaluate_top1,
    recalibrate_bn,
    seed_for,
    train_model,
)

__all__ = ["TrainRecipe", "build_seeded", "evaluate_top1", "recalibrate_bn", "seed_for", "train_model"]
