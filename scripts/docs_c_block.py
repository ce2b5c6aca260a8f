#!/usr/bin/env python3
"""The C fragment a page shows, as a program: the ```c block of PAGE
whose first line starts with FIRST, wrapped in `int main(void)` after the
headers it needs and the declarations of what it names and does not
declare (the hidden prelude docs/docs-run.md describes), written to
stdout.

    python3 scripts/docs_c_block.py docs/c.md 'looptime_builder *b' > my_loop.c

scripts/docs_run.py uses `program` for the ```c blocks it compiles (its
`c` marker, with `prelude` lines as the declarations).
"""

import sys
from pathlib import Path

HEADERS = ("#include <looptime.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
           "#include <string.h>\n#include <time.h>\n#include <sys/socket.h>\n")
# What docs/c.md's recorder loop names and does not declare.
DIR = 'const char *dir = "c_episode";  /* what the fragment names */'


def program(fragment: str, declarations: list) -> str:
    """`fragment` (a block's lines) as the body of `main`, after the
    headers and `declarations` (one C statement each)."""
    body = ["    " + line if line else "" for line in [*declarations, *fragment.splitlines()]]
    return HEADERS + "\nint main(void) {\n" + "\n".join(body) + "\n    return 0;\n}\n"


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    lines = Path(sys.argv[1]).read_text().splitlines()
    starts = [i + 1 for i, line in enumerate(lines[:-1])
              if line.strip() == "```c" and lines[i + 1].startswith(sys.argv[2])]
    if len(starts) != 1:
        print(f"{sys.argv[1]}: {len(starts)} ```c blocks start with {sys.argv[2]!r}, not one", file=sys.stderr)
        return 2
    body = []
    for line in lines[starts[0]:]:
        if line.startswith("```"):
            break
        body.append(line)
    sys.stdout.write(program("\n".join(body), [DIR]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
