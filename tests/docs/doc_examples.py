"""The documentation's examples, collected from its Markdown and executed (tests/docs/test_examples.py runs them).

Every fenced block of a page is an example, in page order, in one working folder per page (a copy of the repository's
``experiments/``, with ``../shared`` pointing at the published data when the checkout has it):

- ``bash`` / ``sh``: run with ``bash -e -o pipefail``; a non-zero exit fails, naming the page and line;
- ``python``: saved as a script and run with ``python``, as a reader would (a traceback's lines read as page lines);
- ``yaml``: parsed (a block that is not valid YAML fails);
- other blocks (``text``, ``console`` ...) are shown, not run, unless marked as expected output.

An HTML comment on the line(s) right above a fence, invisible on the site, says more:

- ``<!-- test: skip REASON -->``: not run; the test reports the reason (the page says it too, visibly);
- ``<!-- test: replace `OLD` with `NEW` -->``: run with OLD replaced by NEW (smaller settings; the page says so);
- ``<!-- test: file PATH -->``: the block is written to PATH in the working folder (a YAML or module used later);
- ``<!-- test: same-as PATH -->``: a YAML block that must hold the same data as the repository's file PATH;
- ``<!-- test: output -->``: the block is the expected output of the example before it: each of its lines,
  ``...`` aside, must appear in that output, in order.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^\n]*$")
MARK = re.compile(r"^\s*<!-- test: (?P<what>skip|replace|file|output|same-as)\b(?P<rest>.*?)-->\s*$")
REPLACE = re.compile(r"`(?P<old>[^`]+)` with `(?P<new>[^`]*)`")
RUN = {"bash", "sh", "shell", "python", "yaml"}


@dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    skip: str | None = None
    file: str | None = None
    output: bool = False
    same_as: str | None = None
    replace: list[tuple[str, str]] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def code(self) -> str:
        text = self.text
        for old, new in self.replace:
            if old not in text:
                raise AssertionError(f"{self.where}: the test's replacement `{old}` is not in the block")
            text = text.replace(old, new)
        return text


def blocks(markdown: str, page: str) -> list[Block]:
    """The fenced blocks of a page, with the markers above each."""
    lines = markdown.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m["indent"]), m["fence"], (m["lang"] or "").lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        block = Block(page, i + 1, lang, "\n".join(body) + "\n")
        k = i - 1
        while k >= 0 and MARK.match(lines[k]):
            mark = MARK.match(lines[k])
            assert mark is not None
            what, rest = mark["what"], mark["rest"].strip()
            if what == "skip":
                block.skip = rest or "no reason given"
            elif what == "file":
                block.file = rest
            elif what == "output":
                block.output = True
            elif what == "same-as":
                block.same_as = rest
            else:
                r = REPLACE.search(rest)
                if r is None:
                    raise AssertionError(f"{page}:{k + 1}: a replace marker needs `OLD` with `NEW`")
                block.replace.insert(0, (r["old"], r["new"]))
            k -= 1
        found.append(block)
        i = j + 1
    return found


def workdir(tmp: Path) -> Path:
    """A working folder like the repository's root: experiments/ copied, ../shared linked when it exists."""
    work = tmp / "work"
    shutil.copytree(REPO / "experiments", work / "experiments")
    shared = REPO.parent / "shared"
    if shared.is_dir():
        (tmp / "shared").symlink_to(shared)
    return work


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env["MPLBACKEND"] = "Agg"
    # one torch/OpenMP thread per example: the suite runs one xdist worker per core, and torch's default pool (a
    # thread per core) spins against the other worker's processes. Measured on this 2-core VM, 2026-11-28, beside
    # other jobs (load 3-4): the predictors page took 144 s of wall and CPU time with torch's default, 28 s with one
    # thread. The examples' commands and outputs are the same either way.
    env["OMP_NUM_THREADS"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("COLUMNS", None)
    return env


def _check_output(expected: Block, produced: str, after: Block) -> None:
    at = 0
    for n, want in enumerate(expected.text.splitlines()):
        want = want.strip()
        if not want or want == "...":
            continue
        found = produced.find(want, at)
        if found < 0:
            raise AssertionError(f"{expected.page}:{expected.line + 1 + n}: the output of the example at {after.where} "
                                 f"no longer holds {want!r}\n--- its output ---\n{produced[-3000:]}")
        at = found + len(want)


def run_page(page: Path, tmp: Path, *, timeout: float = 600) -> list[str]:
    """Runs a page's examples in order; returns the reasons of the skipped ones. Fails with page:line."""
    rel = page.relative_to(REPO).as_posix() if page.is_relative_to(REPO) else page.name
    work = workdir(tmp)
    env = environment()
    skipped: list[str] = []
    last: tuple[Block, str] | None = None
    for block in blocks(page.read_text(), rel):
        if block.output:
            if last is None:
                raise AssertionError(f"{block.where}: expected output with no example before it")
            if last[0].skip is None:
                _check_output(block, last[1], last[0])
            continue
        if block.skip is not None:
            skipped.append(f"{block.where}: {block.skip}")
            last = (block, "")
            continue
        if block.file:
            target = work / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code())
            if block.lang == "yaml":
                _parse_yaml(block)
            last = (block, "")
            continue
        if block.lang not in RUN:
            continue
        if block.lang == "yaml":
            data = _parse_yaml(block)
            if block.same_as:
                import yaml

                if data != yaml.safe_load((REPO / block.same_as).read_text()):
                    raise AssertionError(f"{block.where}: the YAML shown is no longer what {block.same_as} holds")
            last = (block, "")
            continue
        last = (block, _execute(block, work, env, timeout))
    return skipped


def _parse_yaml(block: Block) -> object:
    import yaml

    try:
        return yaml.safe_load(block.code())
    except yaml.YAMLError as exc:
        raise AssertionError(f"{block.where}: not valid YAML: {exc}") from None


def own_process_group() -> dict[str, Any]:
    """Popen keywords for a child in its own process group, so that a timeout stops the whole of it (a `nas run` under
    bash included) with one ``killpg``, but in this session. A new session (``start_new_session``) is a new scheduler
    autogroup on Linux: it then gets one group's share of the CPU against the whole test run, and torch's two training
    threads, time-sliced on two cores, wait on each other. Measured on this 2-core VM, 2026-11-29, beside two niced
    jobs: the quickstart at two trials of one epoch took 156 s in a new session, 21 s in this one."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # Python 3.10: the same, set in the child before it executes


def _execute(block: Block, work: Path, env: dict[str, str], timeout: float) -> str:
    code = block.code()
    if block.lang == "python":
        script = work / f"_example_line{block.line}.py"
        script.write_text(code)
        cmd = [sys.executable, script.name]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code]
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **own_process_group())
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"{block.where}: the example ran past {timeout:.0f} s\n{code}") from None
    if proc.returncode != 0:
        if block.lang == "python":  # a traceback's script lines, as the page's lines
            output = re.sub(rf'File "[^"]*_example_line{block.line}\.py", line (\d+)',
                            lambda m: f"{block.page}:{block.line + int(m[1])}", output)
        raise AssertionError(f"{block.where}: the {block.lang} example failed (exit {proc.returncode})\n{code}\n"
                             f"--- output ---\n{output[-4000:]}")
    return output
