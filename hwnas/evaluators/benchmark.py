"""The ``benchmark`` evaluator: metrics looked up in a published tabular benchmark (CSV) instead of measured.

One row per architecture, one column per metric. A row is found by the architecture's string form,
``space.to_str(arch)`` (NB201's ``|op~0|+|...|``, FBNet's ``k3_e1 skip ...``), in the table's key
column: ``arch_str`` or ``ArchitectureString`` unless ``key_column`` names another. Every other column
is available by name, so a file with more device columns of the same format works unchanged:

.. code-block:: yaml

    evaluators:
      - name: benchmark
        params:
          table: ../shared/data/nas-bench-201/nb201_accuracy.csv     # relative to the working directory
          columns: {top1: cifar10_test_200ep}                         # metric name: column name
          cost_s_per_query: 3600                                      # reported as sim_cost_s
          cheap: false
      - name: benchmark
        params:
          table: ../shared/data/help-latency/nb201_latency.csv
          columns: {"latency_ms@pixel3": pixel3}

Values keep the table's unit: NAS-Bench-201 accuracies are **percent** (94.37, not 0.9437) and the
latency tables are milliseconds; name the metric accordingly. The runner evaluates canonical
architectures, so for NB201 the row read is the one of the isomorphism class's representative (see
:mod:`hwnas.search_spaces.nb201`).
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import logging
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field, field_validator

from hwnas.architecture import Architecture
from hwnas.errors import ConfigError, EvaluationError
from hwnas.evaluation import (
    EvalContext,
    EvaluatorParams,
    Metrics,
    ResolvedPath,
    stable_fingerprint,
)
from hwnas.fileio import check_input_file, looks_binary
from hwnas.search_spaces.base import TABLE_KEY_COLUMNS, StringFormSpace

if TYPE_CHECKING:
    from hwnas.objectives import Bounds

log = logging.getLogger(__name__)


class BenchmarkParams(EvaluatorParams):
    """Parameters of the ``benchmark`` evaluator."""

    table: ResolvedPath = Field(
        description="CSV file with a header row; a relative path is taken from the working directory")
    columns: dict[str, str] = Field(
        min_length=1,
        description="metric name -> column name, e.g. {top1: cifar10_test_200ep, latency_ms@pixel3: pixel3}"
    )
    key_column: str | None = Field(
        None, description="column holding the architecture string (default: arch_str, else ArchitectureString)"
    )
    cost_s_per_query: float = Field(0.0, ge=0, description="simulated cost of one lookup, reported as cost_metric")
    cost_metric: str = Field("sim_cost_s", min_length=1,
                             description="metric name of the simulated cost (reported when the cost is > 0)")
    cheap: bool = Field(True, description="false makes it run after constraints, like the training it stands in for")
    lookup: list[str] = Field(
        default_factory=list,
        description="metrics (of columns) that stand for a table known before the search, e.g. a device's latency: "
                    "strategies that take a lookup price candidates with them before asking (never the accuracy)")

    @field_validator("columns")
    @classmethod
    def _non_empty_names(cls, v: dict[str, str]) -> dict[str, str]:
        for metric, column in v.items():
            if not metric or not column:
                raise ValueError("metric and column names must be non-empty")
        return v


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if looks_binary(data):  # called binary; none of its bytes printed
        raise ConfigError(f"benchmark: {path} is a binary file, not a CSV table")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"benchmark: {path} is not UTF-8 text (byte {exc.start}); save the table as UTF-8") from None


def _read_header(path: Path) -> list[str]:
    with open(path, "rb") as fb:
        if looks_binary(fb.read(8192)):  # called binary; none of its bytes printed
            raise ConfigError(f"benchmark: {path} is a binary file, not a CSV table")
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        header = next(csv.reader(f), None)
    if not header:
        raise ConfigError(f"benchmark: table {path} is empty (no header row)")
    header = [h.strip() for h in header]
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise ConfigError(f"benchmark: table {path} names column(s) {', '.join(map(repr, twice))} twice in its header: "
                          "which one is meant is not clear")
    return header


def _csv_rows(path: Path, width: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of every non-empty data row; a row of the wrong width is an error naming its line.

    A file without quote characters is split directly (what the csv module would give, at twice its speed);
    one with quotes goes through the csv module.
    """
    text = _read_text(path)
    if '"' in text:
        reader: Iterator[list[str]] = csv.reader(io.StringIO(text, newline=""))
    else:
        reader = (line.split(",") if line else [] for line in (raw.rstrip("\r") for raw in text.split("\n")))
    next(reader, None)  # the header
    for line, row in enumerate(reader, start=2):
        if not row:
            continue
        if len(row) != width:
            raise EvaluationError(f"benchmark: {path}:{line}: {len(row)} cells, the header has {width}")
        yield line, row


def _missing_column(column: str, header: Sequence[str], path: Path, what: str) -> str:
    close = difflib.get_close_matches(column, list(header), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"benchmark: {what} column {column!r} is not in {path}{hint} (its columns: {', '.join(header)})"


class BenchmarkEvaluator:
    """Metrics from a published tabular benchmark (NAS-Bench-201, HW-NAS-Bench, HELP CSVs): any column by name."""

    Params = BenchmarkParams

    def __init__(self, *, context: EvalContext, table: str, columns: dict[str, str], key_column: str | None = None,
                 cost_s_per_query: float = 0.0, cost_metric: str = "sim_cost_s", cheap: bool = True,
                 lookup: Sequence[str] = ()) -> None:
        space = context.space
        if not isinstance(space, StringFormSpace):
            raise ConfigError(
                f"benchmark: space {getattr(space, 'name', space)!r} has no string form (to_str) to find "
                "table rows by"
            )
        self.space = space
        self.path = Path(table).expanduser().resolve()
        if self.path.exists():
            try:
                check_input_file(self.path, "a CSV table")  # a pipe, a device, a folder: refused, never read
            except ConfigError as exc:
                raise ConfigError(f"benchmark: table {exc}") from None
        if not self.path.is_file():
            raise ConfigError(f"benchmark: table {self.path} does not exist (a relative path is taken from the "
                              f"working directory, {Path.cwd()})")
        header = _read_header(self.path)  # the only file access before the first evaluate()
        if key_column is None:
            key_column = next((c for c in TABLE_KEY_COLUMNS if c in header), None)
            if key_column is None:
                raise ConfigError(f"benchmark: {self.path} has no architecture column "
                                  f"({' or '.join(TABLE_KEY_COLUMNS)}); set key_column (its columns: "
                                  f"{', '.join(header)})")
        problems = []
        if key_column not in header:
            problems.append(_missing_column(key_column, header, self.path, "key"))
        for metric, column in columns.items():
            if column not in header:
                problems.append(_missing_column(column, header, self.path, f"metric {metric!r}:"))
        if cost_s_per_query > 0 and cost_metric in columns:
            problems.append(f"benchmark: cost_metric {cost_metric!r} is also a column metric")
        for metric in lookup:
            if metric not in columns:
                problems.append(f"benchmark: lookup metric {metric!r} is not one of its columns' metrics "
                                f"({', '.join(columns)})")
        if problems:
            raise ConfigError(problems)
        self.header = header
        self.key_column = key_column
        self.columns = dict(columns)
        self.cost_s_per_query = float(cost_s_per_query)
        self.cost_metric = cost_metric
        self.cheap = bool(cheap)
        self.instant = True  # a dict lookup per architecture, even when it prices a training (InstantEvaluator)
        self.lookup_metrics = tuple(lookup)
        self.provides: tuple[str, ...] = tuple(self.columns) + ((cost_metric,) if self.cost_s_per_query > 0 else ())
        self._rows: dict[str, tuple[float, ...] | str] | None = None
        self._content_sha: str | None = None

    fidelity_kind = ("a column of its table for a metric it provides: {metric: column}, or the column alone when "
                     "it provides one metric that is not a lookup")

    def fidelity_problems(self, fidelity: object) -> list[str]:
        """A multi-fidelity rung of ``benchmark`` reads some of its metrics from other columns of the same table
        (a cheap proxy column for ``top1`` at the first rung, the 12-epoch validation column at the top)."""
        mapping = self._fidelity_columns(fidelity)
        if isinstance(mapping, str):
            return [mapping]
        problems = []
        for metric, column in mapping.items():
            if metric not in self.columns:
                problems.append(f"benchmark: a fidelity sets metric {metric!r}, which it does not provide "
                                f"(its metrics: {', '.join(self.columns)})")
            elif metric in self.lookup_metrics:
                problems.append(f"benchmark: metric {metric!r} is a lookup (known before the search): it has one "
                                "fidelity")
            if column not in self.header:
                problems.append(_missing_column(column, self.header, self.path, f"fidelity of metric {metric!r}:"))
        return problems

    def fidelity_params(self, fidelity: object) -> dict[str, object]:
        mapping = self._fidelity_columns(fidelity)
        assert not isinstance(mapping, str), mapping
        return {"columns": {**self.columns, **mapping}}

    def _fidelity_columns(self, fidelity: object) -> dict[str, str] | str:
        """metric -> column of a fidelity, or why it is not one."""
        if isinstance(fidelity, str):
            varying = [m for m in self.columns if m not in self.lookup_metrics]
            if len(varying) != 1:
                return (f"benchmark: a fidelity given as a column alone ({fidelity!r}) needs one metric that is not a "
                        f"lookup, it has {len(varying)} ({', '.join(varying)}): give {{metric: column}}")
            return {varying[0]: fidelity}
        if (isinstance(fidelity, dict) and fidelity
                and all(isinstance(k, str) and isinstance(v, str) for k, v in fidelity.items())):
            return dict(fidelity)
        return f"benchmark offers {self.fidelity_kind} as its fidelity, not {fidelity!r}"

    def fingerprint(self) -> str:
        """Changes with the table's content (not its location), the columns read and the simulated cost."""
        if self._content_sha is None:
            digest = hashlib.sha256()
            with open(self.path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            self._content_sha = digest.hexdigest()[:16]
        return stable_fingerprint("benchmark", {
            "table_sha256": self._content_sha, "key_column": self.key_column, "columns": self.columns,
            "cost_s_per_query": self.cost_s_per_query, "cost_metric": self.cost_metric,
        })

    def prepare(self) -> None:
        """Read the table now (else on the first :meth:`evaluate`)."""
        self._table()

    def _table(self) -> dict[str, tuple[float, ...] | str]:
        """Key -> the row's values for the requested columns, or the error for its first bad cell (read once)."""
        if self._rows is None:
            wanted = [self.header.index(c) for c in self.columns.values()]
            names = list(self.columns.values())
            key_at = self.header.index(self.key_column)
            rows: dict[str, tuple[float, ...] | str] = {}
            for line, row in _csv_rows(self.path, len(self.header)):
                key = row[key_at].strip()
                if key in rows:
                    raise EvaluationError(f"benchmark: {self.path}:{line}: a second row for {key!r}")
                values: list[float] = []
                for column, i in zip(names, wanted):
                    try:
                        value = float(row[i])
                    except ValueError:
                        value = math.nan
                    if not math.isfinite(value):
                        rows[key] = (f"benchmark: {self.path.name}, row {key!r}, column {column!r}: "
                                     f"{row[i]!r} is not a finite number")
                        break
                    values.append(value)
                else:
                    rows[key] = tuple(values)
            if not rows:
                raise ConfigError(f"benchmark: {self.path} has a header but no rows")
            if not any(isinstance(v, tuple) for v in rows.values()):  # every row has a cell that is not a number
                first = next(iter(rows.values()))
                raise ConfigError(f"benchmark: no row of {self.path.name} gives a number in every column asked for; "
                                  f"the first: {first}")
            log.info("benchmark: read %d rows of %s", len(rows), self.path)
            self._rows = rows
        return self._rows

    def unmeetable(self, bounds: Bounds) -> str | None:
        """The range of each bounded column over the table's rows, where no row meets every bound on the metrics
        it provides at once (:class:`KnownValues`: the user's warning at ``nas validate`` and run start, never a
        strategy's input); None where some row does."""
        names = [m for m in self.columns if m in bounds]
        if not names:
            return None
        at = [tuple(self.columns).index(m) for m in names]
        rows = np.array([v for v in self._table().values() if isinstance(v, tuple)], dtype=float)[:, at]
        ok = np.ones(len(rows), dtype=bool)
        for j, m in enumerate(names):
            lo, hi = bounds[m]
            if lo is not None:
                ok &= rows[:, j] >= lo
            if hi is not None:
                ok &= rows[:, j] <= hi
        if ok.any():
            return None
        ranges = ", ".join(f"{m} from {rows[:, j].min():.4g} to {rows[:, j].max():.4g}" for j, m in enumerate(names))
        together = " (and no row meets them together)" if len(names) > 1 else ""
        return f"the {len(rows):,} rows of {self.path.name} have {ranges}{together}"

    def lookup(self, arch: Architecture) -> Metrics:
        """The metrics of one architecture (its row as given: the caller canonicalizes).

        Raises:
            EvaluationError: When the table has no row for ``arch`` or a cell is not a number.
        """
        result = self.evaluate([arch])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        """Each architecture's row (one dict lookup each); a missing row or a bad cell is that
        architecture's :class:`EvaluationError`, and the batch goes on."""
        table = self._table()
        to_str, names = self.space.to_str, tuple(self.columns)
        cost = (self.cost_metric, self.cost_s_per_query) if self.cost_s_per_query > 0 else None
        out: list[Metrics | BaseException] = []
        for arch in archs:
            try:
                key = to_str(arch)
            except Exception as exc:  # not an architecture of this space: reported per architecture
                out.append(exc)
                continue
            values = table.get(key)
            if values is None:
                out.append(EvaluationError(f"benchmark: {self.path.name} has no row for architecture "
                                           f"{arch.arch_id} ({self.key_column} {key!r})"))
            elif isinstance(values, str):
                out.append(EvaluationError(values))
            else:
                metrics: Metrics = dict(zip(names, values))
                if cost is not None:
                    metrics[cost[0]] = cost[1]
                out.append(metrics)
        return out
