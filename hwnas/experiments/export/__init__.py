"""Export of a run's chosen models: which trials (:mod:`.select`), each format's writer and its check against
torch (:mod:`.formats`), re-measurement of the written files (:mod:`.remeasure`), the card of each model
(:mod:`.card`), what an export is asked and its checks (:mod:`.plan`), and the export itself with its cards and
index (:mod:`.bundle`).

Its names are imported on first use (PEP 562): the CLI's parser reads :data:`.formats.FORMATS` without importing
the export itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwnas.lazy import lazy_exports

if TYPE_CHECKING:
    from hwnas.experiments.export.bundle import check_export, export_front, export_paths, export_summary
    from hwnas.experiments.export.card import INDEX, CardTop1, CardWeights, ModelCard, read_cards
    from hwnas.experiments.export.formats import FORMATS, SUFFIX, parse_formats
    from hwnas.experiments.export.plan import ExportPlan, plan_export
    from hwnas.experiments.export.select import LOCAL, device_of, select_models

#: name -> its module
_LAZY = {
    "check_export": "hwnas.experiments.export.bundle",
    "export_front": "hwnas.experiments.export.bundle",
    "export_paths": "hwnas.experiments.export.bundle",
    "export_summary": "hwnas.experiments.export.bundle",
    "INDEX": "hwnas.experiments.export.card",
    "CardTop1": "hwnas.experiments.export.card",
    "CardWeights": "hwnas.experiments.export.card",
    "ModelCard": "hwnas.experiments.export.card",
    "read_cards": "hwnas.experiments.export.card",
    "FORMATS": "hwnas.experiments.export.formats",
    "SUFFIX": "hwnas.experiments.export.formats",
    "parse_formats": "hwnas.experiments.export.formats",
    "ExportPlan": "hwnas.experiments.export.plan",
    "plan_export": "hwnas.experiments.export.plan",
    "LOCAL": "hwnas.experiments.export.select",
    "device_of": "hwnas.experiments.export.select",
    "select_models": "hwnas.experiments.export.select",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


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
