"""The pages scripts/docs_run.py runs, as it reads them: the blocks of a
Markdown page with the `docs-run` markers before each (docs/docs-run.md
defines them). Shared by the runner and its figures check
(scripts/docs_figures.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!--\s*docs-run:\s*(\w[\w-]*)\s*(.*?)\s*-->\s*$")
SHELL = {"sh", "bash", "shell"}
ACTIONS = "github-actions"


class Block:
    def __init__(self, page: Path, line: int, lang: str, text: str, markers: list) -> None:
        self.page, self.line, self.lang, self.text = page, line, lang, text
        self.skip = next((v for k, v in markers if k == "skip"), None)
        self.workflow = any(k == ACTIONS for k, _ in markers)
        self.gitlab = any(k == "gitlab-ci" for k, _ in markers)
        self.synopsis = any(k == "synopsis" for k, _ in markers)
        self.python = any(k == "python" for k, _ in markers)
        self.c = lang == "c" and any(k == "c" for k, _ in markers)
        self.prelude = [v for k, v in markers if k == "prelude"]
        self.postlude = [v for k, v in markers if k == "postlude"]
        self.expect = [v for k, v in markers if k == "expect"]
        self.before = [v for k, v in markers if k == "before"]
        self.small = [tuple(x.strip() for x in v.split("=>", 1)) for k, v in markers if k == "small"]
        exits = next((v for k, v in markers if k == "exit"), "0")
        self.exits = {int(x) for x in exits.split()}

    def where(self) -> str:
        return f"{rel(self.page)}:{self.line}"

    def sized(self) -> str:
        """The block's text at the sizes its `small` markers give; raises
        ValueError for a marker whose FROM the block does not contain."""
        text = self.text
        for pair in self.small:
            if len(pair) != 2 or not pair[0] or pair[0] not in text:
                raise ValueError(f"{self.where()}: its `small {' => '.join(pair)}` marker matches nothing in the block "
                                 "(it takes `FROM => TO`, FROM a text of the block)")
            text = text.replace(*pair)
        return text


def rel(page: Path) -> str:
    return os.path.relpath(page, ROOT)


def blocks(page: Path) -> tuple:
    """The page's shell blocks, and whether it explains its skips."""
    out, markers, explained = [], [], False
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            if m.group(1) == "skips-explained":
                explained = True
            else:
                markers.append((m.group(1), m.group(2)))
            i += 1
            continue
        f = FENCE.match(lines[i])
        if f:
            lang, start = f.group(1), i + 1
            j = start
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if lang in SHELL or (lang in ("yaml", "python", "c") and markers):
                out.append(Block(page, start, lang, "\n".join(lines[start:j]) + "\n", markers))
            markers = []
            i = j + 1
            continue
        if lines[i].strip():
            markers = []
        i += 1
    return out, explained
