"""Fit accuracy predictors on what runs measured (journals) or on a benchmark table, with their error measured.

``nas predictor fit`` and ``nas predictor evaluate`` call these. A fit is judged before it is saved: k-fold
cross-validation on the training rows gives Kendall tau, Spearman rho, top-5 % precision, mean absolute error
and R² (each fold's predictor fitted on the other folds only); then the predictor is refitted on every row and
saved with those figures, the space (name and parameters), the feature set and width, and the target metric
in its ``meta``. A saved predictor is therefore data that says how far it can be trusted.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, InvalidArchitecture
from hwnas.predictors.metrics import check_predictions, figures
from hwnas.search_spaces.base import TABLE_KEY_COLUMNS, StringFormSpace

if TYPE_CHECKING:
    from hwnas.predictors.base import Predictor
    from hwnas.search_spaces.base import SearchSpace


@dataclass
class TrainingData:
    """Architectures of one space with one measured value each, and where they came from."""

    space: SearchSpace
    space_params: dict[str, Any]
    archs: list[Architecture]
    y: np.ndarray
    target: str
    sources: list[str]
    #: Measured metrics per architecture (trial metrics, or a table row's numeric columns), for ``metric:`` features.
    metrics: list[dict[str, float]] | None = None


def space_params(space: SearchSpace) -> dict[str, object]:
    params = getattr(space, "params", None)
    return params.model_dump(mode="json") if params is not None and hasattr(params, "model_dump") else {}


def from_table(space: SearchSpace, table: str | Path, target: str, *, key_column: str | None = None) -> TrainingData:
    """Rows of a benchmark CSV (architecture string -> ``target`` column), e.g. NAS-Bench-201's.

    Raises:
        ConfigError: The space has no string form, the file or a column is missing, or a cell is not a number.
    """
    import csv
    import io

    if not isinstance(space, StringFormSpace):
        raise ConfigError(f"space {space.name!r} has no string form to read table rows by; fit from run journals")
    from hwnas.fileio import read_input_text

    path = Path(table)
    text = read_input_text(path, "a CSV table")  # a pipe or a device refused; a binary file called binary
    reader = csv.reader(io.StringIO(text, newline=""))
    header = [h.strip() for h in next(reader, [])]
    key = key_column or next((c for c in TABLE_KEY_COLUMNS if c in header), None)
    if key is None or key not in header:
        raise ConfigError(f"{path}: no architecture column {key_column or ' or '.join(TABLE_KEY_COLUMNS)} "
                          f"(columns: {', '.join(header)})")
    if target not in header:
        raise ConfigError(f"{path}: no column {target!r} (columns: {', '.join(header)})")
    k, t = header.index(key), header.index(target)
    archs, ys, rows = [], [], []
    for line, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise ConfigError(f"{path}:{line}: {len(row)} cells, the header has {len(header)}")
        try:
            value = float(row[t])
        except ValueError:
            raise ConfigError(f"{path}:{line}: target column {target!r} holds {row[t][:40]!r}, not a number "
                              f"(the target must be a numeric column)") from None
        try:
            arch = space.from_str(row[k].strip())
        except (ValueError, InvalidArchitecture) as exc:
            raise ConfigError(f"{path}:{line}: {exc}") from None
        if not np.isfinite(value):
            raise ConfigError(f"{path}:{line}: {target} is {row[t]!r}")
        archs.append(arch)
        ys.append(value)
        rows.append(_numeric_cells(header, row, skip=k))
    if not archs:
        raise ConfigError(f"{path}: no data rows")
    return TrainingData(space, space_params(space), archs, np.array(ys), target, [str(path.resolve())], rows)


def _numeric_cells(header: Sequence[str], row: Sequence[str], *, skip: int) -> dict[str, float]:
    """A table row's cells that read as numbers, by column name (features ``metric:COLUMN`` read them)."""
    out: dict[str, float] = {}
    for j, (name, cell) in enumerate(zip(header, row)):
        if j == skip:
            continue
        try:
            out[name] = float(cell)
        except ValueError:
            continue
    return out


def _broken_targets(y: np.ndarray) -> str:
    """Why a predictor fitted on ``y`` may predict NaN (for the message)."""
    with np.errstate(all="ignore"):
        spread = float(np.ptp(y)) if y.size else 0.0
    if not np.isfinite(spread):
        return (f"the targets span {float(y.min()):.3g} to {float(y.max()):.3g}, too wide to compute with; "
                "rescale them")
    return "its parameters or the targets make the fit diverge"


def cross_validate(name: str, params: Mapping[str, object] | None, X: np.ndarray, y: np.ndarray, *, folds: int,
                   seed: int) -> dict[str, float]:
    """Out-of-fold predictions of ``folds``-fold cross-validation, judged as one set (every row predicted once).

    Raises:
        ConfigError: Too few rows for the folds, or a fold's predictions are not numbers (named with the fold).
    """
    from hwnas.predictors import PREDICTORS

    if folds < 2:
        raise ConfigError(f"--folds must be at least 2, got {folds}")
    if y.size < 2 * folds:
        raise ConfigError(f"{y.size} rows are too few for {folds}-fold cross-validation (need {2 * folds}); "
                          "lower --folds or measure more architectures")
    rng = np.random.default_rng(seed)
    order = rng.permutation(y.size)
    pred = np.empty(y.size)
    for k, test in enumerate(np.array_split(order, folds)):
        train = np.setdiff1d(order, test, assume_unique=True)
        model = PREDICTORS.create(name, params, rng=np.random.default_rng([seed, k]))
        with np.errstate(all="ignore"):  # the check below names what overflowed; numpy's warnings say less
            pred[test] = model.fit(X[train], y[train]).predict(X[test])
        check_predictions(pred[test], source=f"{name} predictor, cross-validation fold {k + 1} of {folds}",
                          cause=_broken_targets(y))
    return {"folds": folds, **figures(pred, y)}


def fit_predictor(data: TrainingData, name: str, params: Mapping[str, object] | None, *, features: str, folds: int,
                  seed: int) -> Predictor:
    """Cross-validate, then fit on every row; the returned predictor's ``meta`` records how it was judged."""
    from hwnas import __version__
    from hwnas.predictors import PREDICTORS, featurize

    X = featurize(data.space, data.archs, features, data.metrics)
    try:
        cv = cross_validate(name, params, X, data.y, folds=folds, seed=seed) if folds else None
        with np.errstate(all="ignore"):
            model = PREDICTORS.create(name, params, rng=np.random.default_rng(seed)).fit(X, data.y)
            fitted = model.predict(X)
    except ValueError as exc:  # the predictors' own checks: too few rows, constant targets, ...
        raise ConfigError(f"cannot fit on {', '.join(data.sources)} ({data.target}): {exc}") from None
    check_predictions(fitted, source=f"{name} predictor fitted on every row", cause=_broken_targets(data.y))
    model.meta = {
        "space": data.space.name, "space_params": data.space_params, "features": features,
        "n_features": int(X.shape[1]), "target": data.target, "n_train": int(data.y.size), "sources": data.sources,
        "validation": cv, "seed": seed, "hwnas": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return model


def check_compatible(predictor: Predictor, space: SearchSpace, *, source: str) -> tuple[str, int]:
    """(feature set, width) of a saved predictor, after checking it was fitted on this space.

    Raises:
        ConfigError: Another space, or features of another width (e.g. other space parameters).
    """
    from hwnas.predictors import featurize, metric_features

    meta = getattr(predictor, "meta", {}) or {}
    fitted_space, features = meta.get("space"), meta.get("features")
    if not isinstance(features, str) or not isinstance(fitted_space, str):
        raise ConfigError(f"{source}: the predictor file does not record its space and features "
                          "(fit it with `nas predictor fit`)")
    if fitted_space != space.name:
        raise ConfigError(f"{source}: the predictor was fitted on space {fitted_space!r}, not {space.name!r}")
    placeholder = [dict.fromkeys(metric_features(features), 0.0)]  # one column each, whatever the value
    width = featurize(space, [space.sample(np.random.default_rng(0))], features, placeholder).shape[1]
    if width != predictor.n_features:
        raise ConfigError(f"{source}: features {features!r} of this {space.name} space have {width} columns; the "
                          f"predictor was fitted on {predictor.n_features} (space parameters "
                          f"{meta.get('space_params')}); refit it for this space")
    fitted_params = meta.get("space_params")
    if isinstance(fitted_params, dict):  # the same width, but other networks (a stem's width, a class count)?
        from hwnas.search_spaces.base import neutral_params, resolved_params

        mine, theirs = resolved_params(space), resolved_params(space, fitted_params)
        neutral = set(neutral_params(space))  # no network changes with them
        differ = sorted(k for k in set(mine) | set(theirs) if k not in neutral and mine.get(k) != theirs.get(k))
        if differ:
            shown = ", ".join(f"{k} {theirs.get(k)!r} (this space has {mine.get(k)!r})" for k in differ[:4])
            raise ConfigError(f"{source}: the predictor was fitted on {space.name} networks with other parameters: "
                              f"{shown}; refit it for this space")
    return features, width
