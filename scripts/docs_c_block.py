#!/usr/bin/env python3
"""The C fragment a page shows, as a program: the ```c block of PAGE
whose first line starts with FIRST, wrapped in `int main(void)` after the
headers it needs (the hidden prelude docs/docs-run.md describes), written
to stdout.

    python3 scripts/docs_c_block.py docs/c.md 'looptime_builder *b' > my_loop.c
"""

import sys
from pathlib import Path

PRELUDE = ("#include <looptime.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n\n"
           "int main(void) {\n    const char *dir = \"c_episode\";  /* what the fragment names */\n")


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
    start = starts[0]
    body = []
    for line in lines[start:]:
        if line.startswith("```"):
            break
        body.append("    " + line if line else "")
    sys.stdout.write(PRELUDE + "\n".join(body) + "\n    return 0;\n}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
