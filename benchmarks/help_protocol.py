"""HELP's few-shot latency protocol on the published HELP latency tables (NB201, FBNet, OFA).

The protocol (Lee et al., NeurIPS 2021, as their code ``loader.py`` applies it):

- the train pool is archs ``0 .. train_pool_size-1`` (900) and the query set the next
  ``query_size`` (1000) archs, in table-index order;
- for the target device, each of the two sets is trimmed *separately* to its 10 %-90 % latency
  quantile band: sorted by the target's latency, positions ``int(0.1 n) .. int(0.9 n)-1`` are kept;
- k samples are drawn without replacement from the trimmed train pool; the predictor sees only
  their target latencies (plus anything about the *other* devices);
- the metric is Spearman's rho between predicted and measured latency on the trimmed query set.

Devices are whatever columns a table has (read from the CSV header, never a fixed list). Two
ways to choose targets and sources are provided: :func:`leave_one_out_tasks` (each device in turn,
every other column a source) and :func:`help_split_tasks` (HELP's own meta-test devices where the
table has them, else its meta-validation devices; the sources are HELP's meta-training devices present in the
table). Meta-validation devices are *validation* devices (HELP chose its settings on them), never held-out: a
figure on them says so.

Note that HELP itself also measures 10 fixed reference architectures on the target (its
"hardware embedding") on top of the k samples; the methods here use the k samples only.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.latency.predictors import FewShotLatencyPredictor, LatencyRidgePredictor, nonnegative_combination

logger = logging.getLogger(__name__)

#: Columns of a HELP table that describe architectures; every other column is a device (ms).
DESCRIPTOR_COLUMNS: tuple[str, ...] = ("index", "arch_str", "op_idx_list")

#: HELP's device splits per space, from the commands in HELP's README (HayeonLee/HELP @ 11970ec).
#: Only the columns a table actually has are used.
HELP_DEVICE_SPLITS: dict[str, dict[str, tuple[str, ...]]] = {
    "nb201": {
        "meta_train": (
            "1080ti_1", "1080ti_32", "1080ti_256", "silver_4114", "silver_4210r",
            "samsung_a50", "pixel3", "essential_ph_1", "samsung_s7",
        ),
        "meta_valid": ("titanx_1", "titanx_32", "titanx_256", "gold_6240"),
        "meta_test": ("titan_rtx_256", "gold_6226", "fpga", "pixel2", "raspi4", "eyeriss"),
    },
    "fbnet": {
        "meta_train": (
            "1080ti_1", "1080ti_32", "1080ti_64", "silver_4114", "silver_4210r",
            "samsung_a50", "pixel3", "essential_ph_1", "samsung_s7",
        ),
        "meta_valid": ("titanx_1", "titanx_32", "titanx_64", "gold_6240"),
        "meta_test": ("fpga", "raspi4", "eyeriss"),
    },
    "ofa": {
        "meta_train": (
            "2080ti_1", "2080ti_32", "2080ti_64", "titan_xp_1", "titan_xp_32", "titan_xp_64",
            "v100_1", "v100_32", "v100_64",
        ),
        "meta_valid": ("titan_rtx_1", "titan_rtx_32"),
        "meta_test": ("titan_rtx_64",),
    },
}

#: Few-shot methods :func:`run_fewshot_protocol` knows, with a one-line description each.
METHODS: dict[str, str] = {
    "transfer": "non-negative mix of known devices' encoding models, fitted on all archs of their tables",
    "transfer+residual": "transfer, plus a ridge model of the target's residual on its own k samples, kept where its "
                         "leave-one-out error beats the residual's",
    "transfer+residual+own": "transfer+residual, blended with ridge on the target's k samples alone, weighted by "
                             "cross-validation (hwnas's default until 2026-11-28)",
    "transfer+evidence": "on latency in ms: transfer, plus a Gaussian-process residual over the known devices' "
                         "deviations and the features, its prior variances chosen by marginal likelihood, and ridge "
                         "on the k samples alone blended in where cross-validation says so (hwnas's default)",
    "transfer-pool": "as transfer, but the known devices' models see only the train-pool archs",
    "raw-nnls": "non-negative mix of known devices' measured log-latencies (baseline, no encoding)",
    "encoding-ridge": "ridge on the target's k samples over the encoding only (no transfer)",
}


# --------------------------------------------------------------------------------------------
# tables


@dataclass(frozen=True)
class LatencyTable:
    """One HELP latency table: architectures x device settings, in ms.

    Args:
        space: Name of the search space (the file name before ``_latency``).
        path: The CSV it was read from.
        devices: Device column names, in file order.
        latency_ms: Shape (n_archs, n_devices), rows in table-index order.
        arch_tokens: Per architecture, a tuple of categorical tokens describing it (one per
            position: an edge's op, a layer's kernel size, ...); empty when the table has none.
    """

    space: str
    path: Path
    devices: tuple[str, ...]
    latency_ms: np.ndarray
    arch_tokens: tuple[tuple[str, ...], ...] = field(default=(), repr=False)

    @property
    def n_archs(self) -> int:
        """Number of architectures (rows)."""
        return int(self.latency_ms.shape[0])

    def column(self, device: str) -> np.ndarray:
        """Latencies (ms) of one device for every architecture."""
        return self.latency_ms[:, self.device_index(device)]

    def device_index(self, device: str) -> int:
        """Position of a device column; ValueError naming the table's devices if absent."""
        try:
            return self.devices.index(device)
        except ValueError:
            known = ", ".join(self.devices)
            raise ValueError(f"{self.path.name}: no device column {device!r}; it has {known}") from None

    def encoding(self) -> np.ndarray:
        """One-hot encoding of :attr:`arch_tokens` (see :func:`one_hot_encode`)."""
        if not self.arch_tokens:
            raise ValueError(f"{self.path.name}: no architecture descriptions, so no encoding")
        return one_hot_encode(self.arch_tokens)


def nb201_arch_tokens(arch_str: str) -> tuple[str, ...]:
    """Operation names of a NAS-Bench-201 cell string, one per edge in string order.

    Args:
        arch_str: E.g. ``|nor_conv_3x3~0|+|skip_connect~0|none~1|+|...|``.

    Returns:
        One op name per edge (6 for NB201 cells).
    """
    tokens: list[str] = []
    for node in arch_str.strip().split("+"):
        for edge in node.strip("|").split("|"):
            op, sep, source = edge.partition("~")
            if not sep or not op or not source.isdigit():
                raise ValueError(f"not a NAS-Bench-201 cell string: {arch_str!r}")
            tokens.append(op)
    return tuple(tokens)


def arch_description_tokens(arch: Mapping[str, Any]) -> tuple[str, ...]:
    """Categorical tokens of a JSON architecture description.

    An OFA-style description (``ks``, ``e`` per layer slot, ``d`` per stage, ``r``) gives
    ``ks``/``e`` tokens per slot, ``none`` for slots beyond the stage's depth, and the resolution.
    Any other mapping is flattened key by key (sorted), one token per scalar.

    Args:
        arch: One entry of an ``*_archs.json`` ``"arch"`` list.

    Returns:
        The tokens.
    """
    if {"ks", "e", "d"} <= set(arch):
        ks, ex, depth = list(arch["ks"]), list(arch["e"]), list(arch["d"])
        if len(ks) != len(ex) or not depth or len(ks) % len(depth):
            raise ValueError(f"inconsistent ks/e/d lengths in architecture {arch!r}")
        per_stage = len(ks) // len(depth)
        tokens: list[str] = []
        for stage, d in enumerate(depth):
            for slot in range(per_stage):
                i = stage * per_stage + slot
                active = slot < int(d)
                tokens.append(f"ks{ks[i]}" if active else "none")
                tokens.append(f"e{ex[i]}" if active else "none")
        tokens.extend(f"{key}{v}" for key in sorted(set(arch) - {"ks", "e", "d"}) for v in _flat(arch[key]))
        return tuple(tokens)
    return tuple(f"{key}{v}" for key in sorted(arch) for v in _flat(arch[key]))


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]


def one_hot_encode(tokens: Sequence[Sequence[str]]) -> np.ndarray:
    """One-hot encoding per position, the vocabulary of each position read from the data.

    Positions with a single value are dropped (they carry nothing).

    Args:
        tokens: Per architecture, its tokens; all of the same length.

    Returns:
        Float array (n_archs, n_features) of 0/1.
    """
    if not tokens:
        raise ValueError("no architectures to encode")
    width = len(tokens[0])
    if any(len(t) != width for t in tokens):
        raise ValueError("architectures have different numbers of tokens; cannot encode by position")
    columns: list[np.ndarray] = []
    arr = np.asarray([list(t) for t in tokens], dtype=object)
    for pos in range(width):
        vocab = sorted(set(arr[:, pos]))
        if len(vocab) < 2:
            continue
        columns.extend((arr[:, pos] == v).astype(float) for v in vocab)
    if not columns:
        raise ValueError("every position has a single value; nothing to encode")
    return np.column_stack(columns)


def load_help_table(path: str | Path, *, archs_path: str | Path | None = None) -> LatencyTable:
    """Read a HELP latency CSV (any device columns) and its architecture descriptions.

    Architectures are described by the ``op_idx_list`` column, else a NB201 ``arch_str`` column,
    else by ``archs_path`` (default: ``<space>_archs.json`` beside the CSV, if it exists).

    Args:
        path: ``<space>_latency.csv``: an optional ``index`` column, descriptor columns, then one
            column per device setting in ms.
        archs_path: JSON with an ``"arch"`` list, one entry per row in index order.

    Returns:
        The table, rows sorted by ``index`` when the file has one.
    """
    path = Path(path)
    space = path.stem.removesuffix("_latency")
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path}: empty file") from None
        rows = [r for r in reader if r]
    if len(set(header)) != len(header):
        raise ValueError(f"{path}: duplicate column names in the header")
    devices = tuple(c for c in header if c not in DESCRIPTOR_COLUMNS)
    if not devices:
        raise ValueError(f"{path}: no device columns (only {', '.join(header)})")
    if not rows:
        raise ValueError(f"{path}: no rows")
    col = {name: i for i, name in enumerate(header)}
    latency = np.empty((len(rows), len(devices)))
    for r, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"{path}: line {r + 2} has {len(row)} fields, the header {len(header)}")
        for j, dev in enumerate(devices):
            try:
                latency[r, j] = float(row[col[dev]])
            except ValueError:
                raise ValueError(f"{path}: line {r + 2}, column {dev!r}: {row[col[dev]]!r} is not a number") from None
    bad = ~np.isfinite(latency) | (latency <= 0)
    if bad.any():
        r, j = (int(v[0]) for v in np.nonzero(bad))
        raise ValueError(f"{path}: line {r + 2}, column {devices[j]!r}: latency must be positive, got {latency[r, j]}")

    order = np.arange(len(rows))
    if "index" in col:
        index = np.array([int(row[col["index"]]) for row in rows])
        if len(set(index.tolist())) != len(index):
            raise ValueError(f"{path}: the index column has duplicates")
        order = np.argsort(index, kind="stable")
    rows = [rows[i] for i in order]
    latency = latency[order]

    tokens: list[tuple[str, ...]] = []
    if "op_idx_list" in col:
        tokens = [tuple(f"op{v}" for v in row[col["op_idx_list"]].split()) for row in rows]
    elif "arch_str" in col:
        tokens = [nb201_arch_tokens(row[col["arch_str"]]) for row in rows]
    else:
        jpath = Path(archs_path) if archs_path is not None else path.with_name(f"{space}_archs.json")
        if jpath.is_file():
            data = json.loads(jpath.read_text(encoding="utf-8"))
            archs = data.get("arch") if isinstance(data, dict) else None
            if not isinstance(archs, list) or len(archs) != len(rows):
                found = len(archs) if isinstance(archs, list) else "no"
                raise ValueError(f"{jpath}: expected an 'arch' list of {len(rows)} entries, found {found}")
            tokens = [arch_description_tokens(archs[i]) for i in order]
        elif archs_path is not None:
            raise ValueError(f"{jpath}: architecture description file not found")
        else:
            logger.warning("%s: no architecture descriptions; methods that need an encoding will fail", path.name)
    logger.info("%s: %d archs x %d devices", path.name, len(rows), len(devices))
    return LatencyTable(space=space, path=path, devices=devices, latency_ms=latency, arch_tokens=tuple(tokens))


def hwnas_architectures(table: LatencyTable) -> tuple[Any, list[Any]]:
    """The hwnas space and architecture of every row of a HELP table.

    Each row's tokens become the hwnas architecture they describe: NAS-Bench-201's cell (every cell its
    own architecture, as HELP measured them), FBNet's 22 op indices (the CIFAR-100 setting, as HELP's FBNet
    data) and OFA MobileNetV3's kernel sizes, expand ratios, depths and resolution (width 1.0, ImageNet).
    """
    from hwnas.architecture import Architecture
    from hwnas.search_spaces import SPACES

    if not table.arch_tokens:
        raise ValueError(f"{table.path.name}: no architecture descriptions")
    family = table.space.split("_")[0]  # nb201_cifar10_latency.csv (HW-NAS-Bench's naming) is an nb201 table too
    if family == "nb201":
        space = SPACES.get("nb201")(merge_isomorphic=False)
        archs = [space.from_str("|{}~0|+|{}~0|{}~1|+|{}~0|{}~1|{}~2|".format(*t)) for t in table.arch_tokens]
    elif family == "fbnet":
        space = SPACES.get("fbnet")(setting="cifar100")
        archs = [space.from_op_indices([int(tok.removeprefix("op")) for tok in t]) for t in table.arch_tokens]
    elif family == "ofa":
        space = SPACES.get("ofa_mbv3")()
        archs = []
        for t in table.arch_tokens:  # (ks, e) per slot, "none" beyond a stage's depth, then r<resolution>
            slots, genes = list(zip(t[0:40:2], t[1:40:2])), {"r": int(t[40].removeprefix("r"))}
            for stage in range(5):
                genes[f"d{stage}"] = sum(ks != "none" for ks, _ in slots[4 * stage:4 * stage + 4])
                for slot in range(4 * stage, 4 * stage + 4):
                    ks, ex = slots[slot]
                    genes[f"ks{slot}"] = 0 if ks == "none" else int(ks.removeprefix("ks"))
                    genes[f"e{slot}"] = 0 if ex == "none" else int(ex.removeprefix("e"))
            archs.append(Architecture.from_dict({"space": "ofa_mbv3", "genes": genes}))
    else:
        raise ValueError(f"{table.path.name}: no hwnas space for HELP's {table.space!r} table")
    for arch in archs:
        space.validate(arch)
    return space, archs


def hwnas_unit_features(table: LatencyTable) -> np.ndarray:
    """hwnas's few-shot features (:class:`hwnas.latency.features.UnitFeatures`) of every row of a HELP table."""
    from hwnas.latency.features import UnitFeatures

    space, archs = hwnas_architectures(table)
    features = UnitFeatures.of_space(space)
    assert features is not None
    return features.transform(space, archs)


def find_help_tables(data_dir: str | Path) -> dict[str, Path]:
    """The ``<space>_latency.csv`` files of a directory, by space name (sorted)."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise ValueError(f"{data_dir}: not a directory")
    found = {p.stem.removesuffix("_latency"): p for p in sorted(data_dir.glob("*_latency.csv"))}
    if not found:
        raise ValueError(f"{data_dir}: no *_latency.csv files")
    return found


# --------------------------------------------------------------------------------------------
# the protocol


@dataclass(frozen=True)
class HelpProtocol:
    """Where samples come from and what is scored.

    Args:
        train_pool_size: Archs ``0 .. train_pool_size-1`` form the pool the k samples come from.
        query_size: The next ``query_size`` archs are the query set.
        trim_low: Lower latency quantile kept (HELP: 0.1).
        trim_high: Upper latency quantile kept (HELP: 0.9).
    """

    train_pool_size: int = 900
    query_size: int = 1000
    trim_low: float = 0.1
    trim_high: float = 0.9

    def __post_init__(self) -> None:
        if self.train_pool_size < 1 or self.query_size < 2:
            raise ValueError("train_pool_size must be >= 1 and query_size >= 2")
        if not 0.0 <= self.trim_low < self.trim_high <= 1.0:
            raise ValueError(f"need 0 <= trim_low < trim_high <= 1, got {self.trim_low}, {self.trim_high}")

    def split(self, latency_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Trimmed train pool and trimmed query set (arch indices) for one target device.

        Args:
            latency_ms: The target device's latency of every arch of the table.

        Returns:
            ``(pool, query)`` index arrays.
        """
        n_needed = self.train_pool_size + self.query_size
        if latency_ms.shape[0] < n_needed:
            raise ValueError(f"the protocol needs {n_needed} archs, the table has {latency_ms.shape[0]}")
        pool = np.arange(self.train_pool_size)
        query = np.arange(self.train_pool_size, n_needed)
        return self.trim(pool, latency_ms), self.trim(query, latency_ms)

    def trim(self, indices: np.ndarray, latency_ms: np.ndarray) -> np.ndarray:
        """HELP's quantile trimming of one index set by the target's latency (stable sort on ties)."""
        order = np.argsort(latency_ms[indices], kind="stable")
        n = indices.shape[0]
        return indices[order[int(n * self.trim_low) : int(n * self.trim_high)]]


@dataclass(frozen=True)
class FewShotTask:
    """One target device and the known devices it may borrow from."""

    target: str
    sources: tuple[str, ...]


def leave_one_out_tasks(table: LatencyTable) -> list[FewShotTask]:
    """Every device column in turn as the target; all other columns are sources."""
    if len(table.devices) < 2:
        raise ValueError(f"{table.path.name}: leave-one-out needs at least 2 device columns")
    return [FewShotTask(d, tuple(s for s in table.devices if s != d)) for d in table.devices]


def help_split_tasks(table: LatencyTable) -> list[FewShotTask]:
    """HELP's meta-test devices as targets (its held-out ones), HELP's meta-training devices as sources.

    Targets are HELP's meta-test devices present in the table, or, when it has none of them, its
    meta-validation devices: then the targets are validation devices, not held-out ones (logged). Only columns
    the table has are used.
    """
    split = HELP_DEVICE_SPLITS.get(table.space)
    if split is None:
        raise ValueError(f"no HELP device split for space {table.space!r}; known: {', '.join(HELP_DEVICE_SPLITS)}")
    present = set(table.devices)
    sources = tuple(d for d in split["meta_train"] if d in present)
    targets = tuple(d for d in split["meta_test"] if d in present)
    if not targets:
        targets = tuple(d for d in split["meta_valid"] if d in present)
        logger.info("%s: none of HELP's meta-test devices is in the table; using its meta-validation devices "
                    "(validation devices, not held-out)", table.space)
    if not targets or not sources:
        raise ValueError(f"{table.path.name}: has none of HELP's meta-test or meta-validation devices, or none of "
                         "its meta-train devices")
    return [FewShotTask(t, sources) for t in targets]


def _fewshot_model(
    method: str, table: LatencyTable, encoding: np.ndarray | None, sources: Sequence[str], protocol: HelpProtocol
) -> tuple[Callable[[np.ndarray, np.ndarray], None], Callable[[np.ndarray], np.ndarray]]:
    """``(fit(sample_idx, y_ms), predict(query_idx))`` for one target under one method."""
    src_cols = [table.device_index(s) for s in sources]
    transfers = ("transfer", "transfer+residual", "transfer+residual+own", "transfer+evidence", "transfer-pool")
    if method in (*transfers, "encoding-ridge") and encoding is None:
        raise ValueError(f"method {method!r} needs architecture descriptions; {table.path.name} has none")
    if method in transfers:
        assert encoding is not None
        rows = np.arange(table.n_archs) if method != "transfer-pool" else np.arange(protocol.train_pool_size)
        if method == "transfer+evidence":  # hwnas's default
            model = FewShotLatencyPredictor()
        else:  # the earlier methods: log-latency, the cross-validated correction
            model = FewShotLatencyPredictor(residual=method.startswith("transfer+residual"),
                                            own=method == "transfer+residual+own", correction="cv", scale="log")
        model.fit_sources(
            encoding[rows], table.latency_ms[np.ix_(rows, src_cols)], sources
        )
        enc = encoding

        def fit_transfer(idx: np.ndarray, y: np.ndarray) -> None:
            model.fit(enc[idx], y)

        return fit_transfer, (lambda idx: model.predict(enc[idx]))
    if method == "raw-nnls":
        log_src = np.log(table.latency_ms[:, src_cols])
        feats = (log_src - log_src.mean(axis=0)) / log_src.std(axis=0)
        state: dict[str, Any] = {}

        def fit(idx: np.ndarray, y: np.ndarray) -> None:
            state["w"], state["b"] = nonnegative_combination(feats[idx], np.log(y))

        return fit, (lambda idx: np.exp(feats[idx] @ state["w"] + state["b"]))
    if method == "encoding-ridge":
        assert encoding is not None
        ridge = LatencyRidgePredictor()
        enc = encoding

        def fit_ridge(idx: np.ndarray, y: np.ndarray) -> None:
            ridge.fit(enc[idx], y)

        return fit_ridge, (lambda idx: ridge.predict(enc[idx]))
    raise ValueError(f"unknown few-shot method {method!r}; known: {', '.join(METHODS)}")


@dataclass(frozen=True)
class ProtocolResult:
    """Spearman rho of one method on one table for every repetition, target and k.

    Args:
        space: The table's space.
        protocol: ``"help"`` or ``"loo"`` (or any label the caller chose).
        method: The method name.
        targets: Target devices, in evaluation order.
        ks: Sample counts.
        rho: Shape (n_repeats, n_targets, n_ks).
        mape: Mean absolute percentage error on the query set, same shape.
        within10: Share of the query set predicted within ±10 %, same shape.
    """

    space: str
    protocol: str
    method: str
    targets: tuple[str, ...]
    ks: tuple[int, ...]
    rho: np.ndarray
    mape: np.ndarray | None = None
    within10: np.ndarray | None = None

    def mean_of(self, name: str) -> dict[int, float]:
        """k -> mean over repeats and targets of ``mape`` or ``within10``."""
        a = getattr(self, name)
        return {k: float(a[:, :, i].mean()) for i, k in enumerate(self.ks)}

    def device_mean(self) -> np.ndarray:
        """Mean rho over target devices, shape (n_repeats, n_ks)."""
        return self.rho.mean(axis=1)

    def summary(self) -> dict[int, tuple[float, float]]:
        """k -> (mean, std over repeats) of the mean rho over devices."""
        per_rep = self.device_mean()
        return {k: (float(per_rep[:, i].mean()), float(per_rep[:, i].std())) for i, k in enumerate(self.ks)}

    def per_device(self) -> dict[str, dict[int, float]]:
        """target -> k -> mean rho over repeats."""
        m = self.rho.mean(axis=0)
        return {t: {k: float(m[j, i]) for i, k in enumerate(self.ks)} for j, t in enumerate(self.targets)}


def run_fewshot_protocol(
    table: LatencyTable,
    tasks: Sequence[FewShotTask],
    *,
    ks: Sequence[int],
    rngs: Sequence[np.random.Generator],
    method: str = "transfer",
    protocol: HelpProtocol | None = None,
    label: str = "",
    references: Sequence[int] | None = None,
    features: np.ndarray | None = None,
) -> ProtocolResult:
    """Score a few-shot method with HELP's protocol.

    For each repetition (one generator each) and task, shuffles the target's trimmed train pool
    once (as HELP does) and, for each k, fits on the target latencies of the first k archs of that
    order (so the samples of a smaller k are part of those of a larger one, and a k's result does
    not depend on which other ks are asked), then scores Spearman's rho on the trimmed query set.
    Each generator is used once per task, in task order: results are reproducible from the seeds.

    Args:
        table: The latency table.
        tasks: Targets and their sources (:func:`leave_one_out_tasks`, :func:`help_split_tasks`).
        ks: Numbers of target samples.
        rngs: One seeded generator per repetition.
        method: A name from :data:`METHODS`.
        protocol: Pool, query and trimming (HELP's by default).
        label: The protocol's name in the result.
        references: Arch indices measured on every device (HELP's 10 hardware-embedding archs): the first
            ``min(k, len)`` samples of every k, the rest drawn as usual; they are taken out of the query set.
        features: Rows that replace the table's one-hot encoding for the methods that use one (e.g.
            :func:`hwnas_unit_features`).

    Returns:
        The rho of every repetition, target and k.
    """
    from scipy.stats import spearmanr

    protocol = protocol or HelpProtocol()
    if method not in METHODS:
        raise ValueError(f"unknown few-shot method {method!r}; known: {', '.join(METHODS)}")
    if not tasks or not rngs or not ks:
        raise ValueError("need at least one task, one generator and one k")
    ks = tuple(int(k) for k in ks)
    encoding = features if features is not None else table.encoding() if table.arch_tokens else None
    rho = np.empty((len(rngs), len(tasks), len(ks)))
    mape = np.empty_like(rho)
    within10 = np.empty_like(rho)
    for j, task in enumerate(tasks):
        if task.target in task.sources:
            raise ValueError(f"target {task.target!r} is also a source")
        y_all = table.column(task.target)
        pool, query = protocol.split(y_all)
        refs = np.asarray(references if references is not None else [], dtype=int)
        query = query[~np.isin(query, refs)]
        pool = pool[~np.isin(pool, refs)]
        if max(ks) > pool.shape[0]:
            raise ValueError(f"k={max(ks)} exceeds the {pool.shape[0]} archs of {task.target!r}'s trimmed train pool")
        fit, predict = _fewshot_model(method, table, encoding, task.sources, protocol)
        for r, rng in enumerate(rngs):
            order = rng.permutation(pool)
            for i, k in enumerate(ks):
                sample = np.concatenate([refs[:k], order[: max(0, k - len(refs))]])
                fit(sample, y_all[sample])
                pred = predict(query)
                rel = np.abs(pred - y_all[query]) / y_all[query]
                mape[r, j, i], within10[r, j, i] = 100 * float(rel.mean()), float((rel <= 0.1).mean())
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a constant prediction is reported below
                    value = float(spearmanr(pred, y_all[query])[0])
                if not math.isfinite(value):
                    logger.warning("%s/%s k=%d: constant prediction, rho counted as 0", table.space, task.target, k)
                    value = 0.0
                rho[r, j, i] = value
        logger.info("%s %s %s: %s", table.space, method, task.target, np.round(rho[:, j, :].mean(axis=0), 3).tolist())
    return ProtocolResult(
        space=table.space,
        protocol=label,
        method=method,
        targets=tuple(t.target for t in tasks),
        ks=ks,
        rho=rho,
        mape=mape,
        within10=within10,
    )
