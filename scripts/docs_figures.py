"""The figures check of scripts/docs_run.py (`--figures`, docs/docs-run.md):
each figure a page quotes from this machine names the command that
reproduces it and the host's state, and its scripts and program
subcommands are ones the test command runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from docs_pages import ROOT, SHELL, blocks, rel

MEASURED = re.compile(r"this machine|this 2-core|measured here|this VM|this vm", re.I)
COMMAND = re.compile(r"`[^`]*(bench/|scripts/|examples/|tests/|cargo (bench|test|build)|looptime |analyze_control_timing|"
                     r"\.sh|\.py)[^`]*`")
HOST_STATE = re.compile(r"20\d\d-\d\d-\d\d|load (average )?\d|quiet|nothing else running|loaded host|a CI run beside|"
                        r"busy host|shared the (two )?cores|shared the machine|the other core|idle|stress|contention",
                        re.I)


def sections(page: Path) -> list:
    """The page's sections (heading to heading) as (heading, paragraphs,
    has a shell block), paragraphs as (line, text) outside code blocks."""
    out, paras, shell, head, buf, buf_line, in_code = [], [], False, "", [], 0, False
    for no, line in enumerate(page.read_text().splitlines() + ["# end"], 1):
        if line.startswith("```"):
            in_code = not in_code
            if in_code and line[3:].strip() in SHELL:
                shell = True
            continue
        if in_code:
            continue
        if line.startswith("#") or not line.strip():
            if buf:
                paras.append((buf_line, " ".join(buf)))
                buf = []
            if line.startswith("#"):
                out.append((head, paras, shell))
                paras, shell, head = [], False, line
            continue
        if not buf:
            buf_line = no
        buf.append(line)
    return out


SCRIPT = re.compile(r"(?<![\w.-])((?:bench|scripts|examples|tests)/[\w./-]+\.(?:sh|py))(?![\w-])")
PAGE = re.compile(r"(?<![\w.-])((?:docs/[\w-]+|README)\.md)")
NOT_RUN = re.compile(r"<!--\s*docs-run:\s*not-run\s+(\S+)\s+(.*?)\s*-->")


PROGRAM_CMD = re.compile(r"\b(looptime|analyze_control_timing)\s+([a-z][a-z-]+)\b")
# Where each program's own tests live: a subcommand they pass as the first
# argument (`.args(["watch", ...])`, `&["compare", ...]`) runs.
PROGRAM_TESTS = {"looptime": "crates/runtime/cli/tests", "analyze_control_timing": "crates/analyze/tests"}
ARGV0 = re.compile(r'(?:\.args?\(\s*&?\[?|&\[|vec!\[)\s*"([a-z][a-z-]+)"')


class Ran(NamedTuple):
    """What the test command runs (run_by_tests)."""
    scripts: set
    commands: set  # "looptime watch", "analyze_control_timing fleet", ...


def run_by_tests() -> Ran:
    """The scripts the test command runs: those scripts/test.sh names, and
    those the blocks that run of a page it (or a script it names) hands to
    this runner name, and what each of those names in turn outside its
    comments (a mention in code or a docstring counts as a run: an
    over-approximation this check accepts); and the programs' subcommands
    all those run, or the programs' own tests pass as an argument."""
    texts, seen, pages = [(ROOT / "scripts" / "test.sh").read_text()], set(), set()
    commands = set()
    for prog, tests in PROGRAM_TESTS.items():
        for f in (ROOT / tests).rglob("*.rs"):
            commands |= {f"{prog} {s}" for s in ARGV0.findall(f.read_text(errors="replace"))}
    while texts:
        text = texts.pop()
        commands |= {f"{m.group(1)} {m.group(2)}" for m in PROGRAM_CMD.finditer(text)}
        for m in PAGE.finditer(text):
            if m.group(1) not in pages and (ROOT / m.group(1)).is_file():
                pages.add(m.group(1))
                texts += [b.sized() + "\n".join(b.before) for b in blocks(ROOT / m.group(1))[0] if b.skip is None]
        for m in SCRIPT.finditer(text):
            if m.group(1) not in seen and (ROOT / m.group(1)).is_file():
                seen.add(m.group(1))
                # A script's comments name what it does not run.
                code = [ln for ln in (ROOT / m.group(1)).read_text(errors="replace").splitlines()
                        if not ln.lstrip().startswith(("#", "//"))]
                texts.append("\n".join(code))
    return Ran(seen, commands)


def check_figures(page: Path, ran: Ran, not_run: list) -> list:
    """Each paragraph that quotes a figure measured on this machine names,
    in itself or its section, the command that reproduces it (a backticked
    bench, script, example or program, or a shell block), and the host's
    state when it was measured (a date, the load, quiet or loaded), in
    itself or its section; every script and program subcommand it names
    (in itself, else in its section) is one the test command runs (`ran`,
    run_by_tests) or one its section marks `not-run PATH REASON`
    (appended to `not_run`); and every
    bench/, scripts/ or examples/ path a page names in backticks exists."""
    problems = []
    for head, paras, shell in sections(page):
        text = " ".join([head, *(t for _, t in paras)])
        marked = {m.group(1): m.group(2) for m in NOT_RUN.finditer(text)}
        for line, para in paras:
            if not MEASURED.search(para):
                continue
            if not (COMMAND.search(para) or COMMAND.search(text) or shell):
                problems.append(f"{rel(page)}:{line}: a figure measured on this machine names no command that reproduces it")
            if not (HOST_STATE.search(para) or HOST_STATE.search(text)):
                problems.append(f"{rel(page)}:{line}: a figure measured on this machine says nothing of the host's state (a date, the load)")
            def named_in(t: str) -> set:
                cmds = [c.group(0) for c in COMMAND.finditer(t)]
                return {s for c in cmds for s in SCRIPT.findall(c)} | \
                    {f"{m.group(1)} {m.group(2)}" for c in cmds for m in PROGRAM_CMD.finditer(c)}
            named = named_in(para) or named_in(text)
            unrun = {s for s in named - ran.scripts if (ROOT / s).is_file()} | \
                {c for c in named if PROGRAM_CMD.fullmatch(c) and c not in ran.commands}
            for script in sorted(unrun):
                if script in marked:
                    not_run.append((f"{rel(page)}:{line}", f"{script}: {marked[script]}"))
                else:
                    problems.append(f"{rel(page)}:{line}: its figure's command `{script}` is run by no test (run it "
                                    "at a small size in a block, or mark `not-run PATH REASON` in the section)")
    for m in re.finditer(r"`((?:bench|scripts|examples)/[\w./-]+)", page.read_text()):
        if not (ROOT / m.group(1)).exists():
            problems.append(f"{rel(page)}: names `{m.group(1)}`, which does not exist")
    return problems
