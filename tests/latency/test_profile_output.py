"""Where ``nas latency profile`` writes its table (:class:`hwnas.latency.tables.ProfileOutput`): refused before
anything is built or measured when no table file can go there, even with ``--force``."""

from __future__ import annotations

import re

import pytest

from hwnas.errors import OutputExists
from hwnas.latency.tables import ProfileOutput


def test_a_path_where_no_table_file_can_go_is_refused_before_anything_is_measured(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(OutputExists, match=re.escape("dir.json is a directory; a file path is expected")):
        ProfileOutput.check(tmp_path / "dir.json", force=True)
    note = tmp_path / "notes.txt"
    note.write_text("keep me")
    with pytest.raises(OutputExists, match=re.escape(f"{note} is not a folder; cannot write {note}/t.json")):
        ProfileOutput.check(note / "t.json")
    assert ProfileOutput.check(tmp_path / "t.json") == ProfileOutput(tmp_path / "t.json", force=False, existed=False)
    # a file there is resumed, or replaced with force once the new table is complete: only noted here
    assert ProfileOutput.check(note, force=True) == ProfileOutput(note, force=True, existed=True)
    assert note.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["dir.json", "notes.txt"]
