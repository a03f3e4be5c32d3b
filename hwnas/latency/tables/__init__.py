"""Latency lookup tables: the versioned file, profiling a space into one, validating and calibrating it."""

from hwnas.latency.tables.profile import ProfileOutput, ProfileReport, profile_space, units_of
from hwnas.latency.tables.table import (
    Calibration,
    Entry,
    LatencyTable,
    LatencyTableError,
    accuracy_figures,
    input_resolution_of,
    new_table,
    now_iso,
    space_params_of,
    space_resolved_of,
)
from hwnas.latency.tables.validate import (
    MIN_NETWORKS,
    calibrate_table,
    fit_calibration,
    measure_networks,
    sample_distinct,
    validate_interpolation,
    validate_table,
)

__all__ = [
    "MIN_NETWORKS",
    "Calibration",
    "Entry",
    "LatencyTable",
    "LatencyTableError",
    "ProfileOutput",
    "ProfileReport",
    "accuracy_figures",
    "calibrate_table",
    "fit_calibration",
    "input_resolution_of",
    "measure_networks",
    "new_table",
    "now_iso",
    "profile_space",
    "sample_distinct",
    "space_params_of",
    "space_resolved_of",
    "units_of",
    "validate_interpolation",
    "validate_table",
]
