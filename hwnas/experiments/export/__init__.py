"""Export of a run's chosen models: which trials (:mod:`.select`), each format's writer and its check against
torch (:mod:`.formats`), re-measurement of the written files (:mod:`.remeasure`), and the export itself with
its cards and index (:mod:`.bundle`)."""

from hwnas.experiments.export.bundle import INDEX, check_export, export_front, export_paths, export_summary
from hwnas.experiments.export.formats import FORMATS, SUFFIX, parse_formats
from hwnas.experiments.export.select import LOCAL, device_of, select_models

__all__ = [
    "FORMATS",
    "INDEX",
    "LOCAL",
    "SUFFIX",
    "check_export",
    "device_of",
    "export_front",
    "export_paths",
    "export_summary",
    "parse_formats",
    "select_models",
]
