#!/usr/bin/env python3
"""A stand-in robot recording for the documented `export --into` command
(README.md's quick start, run by scripts/docs_run.py): an MCAP file with a
JSON status channel at 10 Hz over the 20 minutes around now on the wall
clock, so that any episode recorded in that window lies inside it.

    python3 tests/make_robot_mcap.py OUT.mcap
"""

from __future__ import annotations

import json
import sys
import time

from mcap.writer import Writer


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    now = time.time_ns()
    with open(sys.argv[1], "wb") as f:
        w = Writer(f)
        w.start(profile="", library="looptime docs-run")
        schema = w.register_schema(name="robot.Status", encoding="jsonschema",
                                   data=json.dumps({"type": "object"}).encode())
        channel = w.register_channel(topic="/robot/status", message_encoding="json", schema_id=schema)
        for k in range(12_000):
            t = now - 600_000_000_000 + k * 100_000_000
            w.add_message(channel, log_time=t, publish_time=t, sequence=k, data=json.dumps({"k": k}).encode())
        w.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
