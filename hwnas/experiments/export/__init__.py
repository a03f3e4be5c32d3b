"""Export of a run's chosen models: which trials (:mod:`.select`), each format's writer and its check against
torch (:mod:`.formats`), re-measurement of the written files (:mod:`.remeasure`), the card of each model
(:mod:`.card`), what an export is asked and its checks (:mod:`.plan`), and the export itself with its cards and
index (:mod:`.bundle`)."""

from hwnas.experiments.export.bundle import check_export, export_front, export_paths, export_summary
from hwnas.experiments.export.card import INDEX, CardTop1, CardWeights, ModelCard, read_cards
from hwnas.experiments.export.formats import FORMATS, SUFFIX, parse_formats
from hwnas.experiments.export.plan import ExportPlan, plan_export
from hwnas.experiments.export.select import LOCAL, device_of, select_models

__all__ = [
    "FORMATS",
    "INDEX",
    "LOCAL",
    "SUFFIX",
    "CardTop1",
    "CardWeights",
    "ExportPlan",
    "ModelCard",
    "check_export",
    "device_of",
    "export_front",
    "export_paths",
    "export_summary",
    "parse_formats",
    "plan_export",
    "read_cards",
    "select_models",
]
