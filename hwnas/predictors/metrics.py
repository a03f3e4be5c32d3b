"""Rank and error figures of predictions against measured values: the one copy that predictor fitting
(``nas predictor fit``/``evaluate``), the predictor benchmark and the predictor conformance suite read."""

from __future__ import annotations

import warnings

import numpy as np

from hwnas.errors import ConfigError

#: The share of the best architectures that top-k precision looks at.
TOP_SHARE = 0.05


def kendall_tau(pred: np.ndarray, truth: np.ndarray) -> float:
    """Kendall's tau-b (scipy's); nan for fewer than two values or a constant side."""
    from scipy.stats import kendalltau

    with warnings.catch_warnings():  # a constant side is nan, as documented: no warning on top
        warnings.simplefilter("ignore")
        return float(kendalltau(pred, truth).statistic)


def spearman_rho(pred: np.ndarray, truth: np.ndarray) -> float:
    """Spearman's rank correlation (scipy's, average ranks for ties); nan when either side is constant."""
    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(spearmanr(pred, truth).statistic)


def top_precision(pred: np.ndarray, truth: np.ndarray, share: float = TOP_SHARE) -> float:
    """Share of the ``share`` best by ``pred`` that are among the ``share`` best by ``truth`` (higher is better)."""
    k = max(1, int(round(share * truth.size)))
    top_pred = np.argpartition(-pred, k - 1)[:k]
    top_true = np.argpartition(-truth, k - 1)[:k]
    return float(np.intersect1d(top_pred, top_true).size / k)


def rank_scores(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Kendall tau (tau-b), Spearman rho and top-5 % precision of ``pred`` against ``truth``."""
    return {"kendall_tau": kendall_tau(pred, truth), "spearman_rho": spearman_rho(pred, truth),
            "top5_precision": top_precision(pred, truth)}


def check_predictions(pred: np.ndarray, *, source: str, cause: str) -> None:
    """Refuse predictions that are not numbers: "tau nan" is no figure. The one check of ``nas predictor fit``
    (each cross-validation fold, then the final fit) and ``nas predictor evaluate``.

    Args:
        pred: The predictions.
        source: Whose predictions (a file, a predictor and its fold), the start of the message.
        cause: What probably broke them, the end of the message.

    Raises:
        ConfigError: One line naming ``source``, how many predictions are NaN or infinite, and ``cause``.
    """
    bad = int(np.count_nonzero(~np.isfinite(np.asarray(pred, dtype=float))))
    if bad:
        raise ConfigError(f"{source}: the predictor's predictions are not numbers for {bad} of {np.size(pred)} "
                          f"architectures (NaN or infinite): {cause}")


def figures(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """:func:`rank_scores` with the mean absolute error, R² and the count."""
    out = rank_scores(pred, truth)
    err = pred - truth
    denom = float(np.sum((truth - truth.mean()) ** 2))
    out["mae"] = float(np.mean(np.abs(err)))
    out["r2"] = 1.0 - float(np.sum(err**2)) / denom if denom > 0 else float("nan")
    out["n"] = int(truth.size)
    return out
