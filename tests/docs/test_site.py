"""The README's promises, the documentation site built in strict mode, and the site in headless Chromium."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MKDOCS = importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("material") is not None \
    and importlib.util.find_spec("mkdocstrings") is not None


def _hooks():
    spec = importlib.util.spec_from_file_location("hwnas_docs_hooks", REPO / "docs" / "hooks" / "hwnas_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_pages(nav: list) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in nav:
        if isinstance(item, str):
            out.append(("", item))
        else:
            for title, value in item.items():
                out += _nav_pages(value) if isinstance(value, list) else [(title, value)]
    return out


def _mkdocs_yml() -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # mkdocs's !ENV and the like
    return yaml.load((REPO / "mkdocs.yml").read_text(), Loader=Loader)


# ----------------------------------------------------------------------------------------------------- the README


def test_readme_is_short_undated_and_keeps_the_three_commands_ci_runs():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "the README holds no dated figure (they go to docs/results/)"
    first = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first is not None
    assert first.group(1).splitlines() == ['pip install -e ".[dev]"', "nas run experiments/quickstart.yaml", "pytest"]
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert 'pip install -e ".[dev]"' in ci and "pytest" in ci  # CI installs and tests exactly as the README says
    assert any(line.startswith("mkdocs build --strict") for line in ci)


def test_readme_and_nav_links_resolve():
    for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", README.read_text()):
        if not re.match(r"^[a-z]+:", target):
            assert (REPO / target).exists(), f"README.md links to {target}, which does not exist"
    for _, page in _nav_pages(_mkdocs_yml()["nav"]):
        assert (REPO / "docs" / page).is_file(), f"mkdocs.yml's nav names docs/{page}, which does not exist"
    listed = {page for _, page in _nav_pages(_mkdocs_yml()["nav"])}
    on_disk = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert on_disk <= listed, f"pages missing from the navigation: {sorted(on_disk - listed)}"


def test_a_broken_link_is_named_with_its_page_and_line():
    hooks = _hooks()
    page = ("# t\n\n[fine](../index.md) and `[code](nope.md)`\n\n```\n[in a block](nope.md)\n```\n"
            "see [x](missing.md#a)\n")
    problems = hooks.broken_links(page, "guides/x.md", lambda p: p == "index.md")
    assert problems == [
        "docs/guides/x.md:8: link to 'missing.md#a', but no page or file 'guides/missing.md' is in docs/"]


def test_generated_references_hold_every_component_and_command():
    hooks = _hooks()
    from hwnas.cli import COMMANDS
    from hwnas.evaluation import EVALUATORS
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import STRATEGIES

    components = hooks.components_markdown()
    for registry in (SPACES, STRATEGIES, EVALUATORS):
        for name in registry.names():
            if name != "fake":
                assert f"### `{name}`" in components
    assert "PydanticUndefined" not in components and "| `table` | `(required)` |" in components
    cli = hooks.cli_markdown()
    for command in COMMANDS:
        assert f"`nas {command}`" in cli
    assert "`nas latency kit`" in cli and "--in-context" in cli


# ------------------------------------------------------------------------------------------- the site, in Chromium


@pytest.mark.skipif(not MKDOCS, reason="mkdocs, mkdocs-material or mkdocstrings missing (pip install -e '.[docs]')")
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (apt-get install chromium); site not opened")
def test_the_site_builds_strict_and_renders_in_headless_chromium(tmp_path):
    site = tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)], cwd=REPO,
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]

    guides = [(title, page) for title, page in _nav_pages(_mkdocs_yml()["nav"]) if page.startswith("guides/")]
    assert len(guides) >= 10
    assert (REPO / "mkdocs.yml").read_text().count("use_directory_urls: false") == 1  # pages open from file://
    profile = tmp_path / "chromium-profile"

    def chromium(*args: str) -> subprocess.CompletedProcess:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    import matplotlib.image

    for page in ["index.html", "guides/devices.html"]:
        url = (site / page).resolve().as_uri()
        dom = chromium("--dump-dom", url)
        assert dom.returncode == 0 and "<body" in dom.stdout, dom.stderr[-2000:]
        # the rendered navigation links every guide, under its title
        nav = dom.stdout[dom.stdout.index('class="md-nav'):]
        for title, guide in guides:
            href = os.path.relpath(guide.removesuffix(".md") + ".html", os.path.dirname(page) or ".")
            assert f'href="{href}"' in nav, f"{page}: the navigation lacks {guide} ({href})"
            assert title in nav, f"{page}: the navigation lacks the title {title!r}"
        shot = tmp_path / (page.replace("/", "_") + ".png")
        proc = chromium(f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars", url)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = matplotlib.image.imread(shot)
        assert pixels.shape[:2] == (1600, 1280) and float(pixels[..., :3].std()) > 0.05  # not a blank page
    assert "Profiling a device and the board kit" in (site / "guides" / "devices.html").read_text()
