"""Every command and code block of the getting-started page, the guides and the concepts runs (doc_examples.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from doc_examples import DOCS, REPO, blocks, run_page

PAGES = sorted([DOCS / "getting-started.md", *(DOCS / "guides").glob("*.md"), *(DOCS / "concepts").glob("*.md")])


def _param(page: Path) -> object:
    marks = [pytest.mark.xdist_group("ray")] if page.name == "ray.md" else []  # one Ray instance at a time
    return pytest.param(page, id=page.relative_to(DOCS).as_posix(), marks=marks)


@pytest.mark.parametrize("page", [_param(p) for p in PAGES])
def test_every_example_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    examples = [b for b in blocks(page.read_text(), page.name) if b.lang in {"bash", "sh", "python", "yaml"}]
    if page.parent.name != "concepts":  # getting started and every guide are worked examples
        assert examples, f"{page.relative_to(REPO)} has no example to run"
    skipped = run_page(page, tmp_path)
    # every skip carries its reason; a page that skips all it shows is no worked example
    assert not examples or len(skipped) < len(examples), f"{page.relative_to(REPO)} runs no example: {skipped}"
    for reason in skipped:
        print("not run:", reason)


def test_a_failing_example_names_its_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```bash\necho hello\n```\n\n<!-- test: output -->\n```text\ngoodbye\n```\n")
    with pytest.raises(AssertionError, match=r"page\.md:9: the output of the example at page\.md:3 no longer holds"):
        run_page(page, tmp_path)
    page.write_text("# t\n\ntext\n\n```python\nimport json\nraise SystemExit(json.loads('{}')['x'])\n```\n")
    with pytest.raises(AssertionError, match=r"(?s)page\.md:5: the python example failed.*page\.md:7"):
        run_page(page, tmp_path / "b")


def test_markers_skip_replace_and_write_files(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- test: file cfg.yaml -->\n```yaml\na: 1\n```\n\n"
        "<!-- test: replace `slow` with `fast` -->\n```bash\necho slow; cat cfg.yaml\n```\n\n"
        "<!-- test: output -->\n```text\nfast\na: 1\n```\n\n"
        "<!-- test: skip needs a board -->\n```bash\nexit 1\n```\n")
    assert run_page(page, tmp_path) == ["page.md:18: needs a board"]
