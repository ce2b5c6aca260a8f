#!/usr/bin/env python3
"""Checks `analyze_control_timing export --format mcap` (docs/export.md) with
the Python `mcap` reader and `jsonschema`, independently of the Rust code:

1. A serve episode with background threads: the file reads back; each
   channel holds as many messages as the evidence has cycles, control spans
   and each thread's spans; times are non-decreasing per channel; every
   schema is a valid JSON Schema and every message validates against its
   channel's; each cycle's time is the wall-clock time the header's start
   anchor gives its start (recomputed here); the `looptime` metadata record
   names the timebase and the manifest's config and source hashes.
2. Recovered evidence (serve killed with SIGKILL, then `looptime recover`)
   exports, on the wall clock through its start anchor, with no end anchor.
3. Evidence without an anchor (the v1 fixture) exports on host-monotonic
   time, and says so; bad input (a missing directory, a broken header)
   fails with a clear error and leaves no output file.

Usage: python3 tests/mcap_check.py ANALYZER LOOPTIME
"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import jsonschema
from mcap.reader import make_reader

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(*cmd, ok=True):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if ok and r.returncode != 0:
        sys.exit(f"{cmd} failed ({r.returncode}):\n{r.stderr}")
    return r


TS_DIR = ROOT / "tests" / "mcap-ts"


def ts_check(entries, tmp):
    """Read each file again with the MCAP project's TypeScript reader
    (tests/mcap-ts/check.mjs: @mcap/core's indexed reader, CRCs validated),
    expecting exactly `topics` messages per topic (and `profile`)."""
    if not (TS_DIR / "node_modules").is_dir():
        sys.exit(f"{TS_DIR}/node_modules is missing: run `npm ci --prefix {TS_DIR}` (scripts/test.sh does)")
    spec = pathlib.Path(tmp) / "ts_expected.json"
    spec.write_text(json.dumps([{**e, "file": str(e["file"])} for e in entries]))
    r = subprocess.run(["node", str(TS_DIR / "check.mjs"), str(spec)], capture_output=True, text=True)
    print(r.stdout, end="")
    if r.returncode != 0:
        sys.exit(f"the TypeScript reader disagrees:\n{r.stdout}{r.stderr}")


def jsonl(path):
    lines = pathlib.Path(path).read_text().splitlines()
    return json.loads(lines[0]), [json.loads(x) for x in lines[1:] if x.strip()]


def read_mcap(path):
    """(metadata by name, {topic: [(log_time, message dict)]}, {topic: schema dict})."""
    with open(path, "rb") as f:
        reader = make_reader(f)
        meta = {m.name: dict(m.metadata) for m in reader.iter_metadata()}
        by_topic, schemas = {}, {}
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            assert channel.message_encoding == "json", channel.message_encoding
            assert schema.encoding == "jsonschema", schema.encoding
            schemas[channel.topic] = json.loads(schema.data)
            by_topic.setdefault(channel.topic, []).append((message.log_time, json.loads(message.data)))
    return meta, by_topic, schemas


def check_episode(analyzer, ep, out, recovered=False):
    r = run(analyzer, "export", ep, "--format", "mcap", "--out", out)
    header, cycles = jsonl(ep / "control_timing.jsonl")
    meta, topics, schemas = read_mcap(out)
    want = {"/looptime/cycle": len(cycles), "/looptime/span": sum(len(c["spans"]) for c in cycles)}
    n_samples = sum(len(c.get("samples", [])) for c in cycles)
    for name in header.get("threads", []):
        _, tc = jsonl(ep / f"control_timing.{name}.jsonl")
        want[f"/looptime/thread/{name}/span"] = sum(len(c["spans"]) for c in tc)
        n_samples += sum(len(c.get("samples", [])) for c in tc)
    if header.get("sources"):
        # Data age: every sample of every thread, on one channel.
        want["/looptime/sample"] = n_samples
        assert n_samples > 0, "a serve episode records samples"
    for topic, n in want.items():
        got = len(topics.get(topic, []))
        assert got == n, (topic, got, n)
    assert topics.get("/looptime/event"), "no events"
    # Times non-decreasing per channel, as each channel was written.
    for topic, msgs in topics.items():
        times = [t for t, _ in msgs]
        assert times == sorted(times), f"{topic}: times go back"
    # Every schema is a JSON Schema, every message valid against its own.
    for topic, schema in schemas.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        v = jsonschema.Draft202012Validator(schema)
        for _, m in topics[topic]:
            v.validate(m)
    # The wall-clock mapping, recomputed from the header's start anchor.
    anchor = header["wall_clock"]["start"]
    assert (header["wall_clock"]["end"] is None) == recovered, header["wall_clock"]
    for (t, m), c in zip(topics["/looptime/cycle"], cycles):
        assert m["cycle"] == c["cycle"] and m["start_ns"] == c["start_ns"]
        assert t == anchor["realtime_ns"] + c["start_ns"] - anchor["monotonic_ns"], (t, c["cycle"])
    # Each control-thread use's age and staleness, recomputed from the
    # evidence: age = at − stamp, stale = age over the source's limit.
    limits = {s["name"]: s.get("max_age_ns") for s in header.get("sources", [])}
    uses = [(c["cycle"], x) for c in cycles for x in c.get("samples", []) if not x.get("produced")]
    got = [m for _, m in topics.get("/looptime/sample", []) if m["thread"] == "control" and not m["produced"]]
    got.sort(key=lambda m: (m["at_ns"], m["source"]))
    uses.sort(key=lambda u: (u[1]["at_ns"], u[1]["source"]))
    assert len(got) == len(uses), (len(got), len(uses))
    for m, (cycle, x) in zip(got, uses):
        # A stamp up to 1 µs after its use is the clocks' disagreement: age 0
        # (docs/metrics.md, Data age).
        age = x["at_ns"] - x["stamp_ns"]
        age = 0 if -1000 <= age < 0 else (None if age < 0 else age)
        assert (m["cycle"], m["source"], m["seq"], m["age_ns"]) == (cycle, x["source"], x["seq"], age), (m, x)
        limit = limits[x["source"]]
        assert m["stale"] == (None if limit is None or age is None else age > limit), m
    lm = meta["looptime"]
    assert lm["timebase"] == "wall_clock", lm
    assert "wall-clock ns through the evidence's start anchor" in r.stderr, r.stderr
    manifest = json.loads((ep / "manifest.json").read_text())
    assert lm["config_hash"] == manifest["config_hash"] and lm["source_hash"] == manifest["source_hash"], lm
    if recovered:
        assert lm["anchor_end"].startswith("absent"), lm
    # The TypeScript reader must see the evidence's counts, and the events
    # Python's reader saw.
    TS.append({"file": out, "profile": "",
               "topics": {**want, "/looptime/event": len(topics["/looptime/event"])}})
    return sum(len(v) for v in topics.values())


TS = []


def main():
    analyzer, looptime = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        # 1. A serve episode with its background threads (uncapped: seconds).
        run(looptime, "serve", "--control-timing", "--rtf", "0", "--warmup", "0.2", "--duration", "1",
            "--runs-dir", tmp / "runs")
        ep = (tmp / "runs" / "latest").resolve()
        n = check_episode(analyzer, ep, tmp / "serve.mcap")
        print(f"mcap: serve episode, {n} messages; counts, order, schemas, wall-clock times and metadata check out")

        # 2. Recovered evidence: SIGKILL mid-run, then recover, then export.
        rings = tmp / "rings"
        rings.mkdir()
        cfg = tmp / "kill.toml"
        cfg.write_text(f'[run]\nduration_s = 30.0\nwarmup_s = 0.5\ntiming_ring_dir = "{rings}"\n'
                       '[stats]\ninterval_s = 0.0\n')
        p = subprocess.Popen([looptime, "serve", "--control-timing", "--config", str(cfg),
                              "--runs-dir", str(tmp / "killed")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        while time.time() - t0 < 30 and not any(rings.glob("*.ring")):
            time.sleep(0.05)
        time.sleep(1.5)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        run(looptime, "recover", "--ring-dir", rings)
        killed = (tmp / "killed" / "latest").resolve()
        n = check_episode(analyzer, killed, tmp / "recovered.mcap", recovered=True)
        print(f"mcap: recovered episode, {n} messages, on the wall clock through its start anchor")

        # 3. No anchor: host-monotonic time, said in the metadata and output.
        out = tmp / "v1.mcap"
        r = run(analyzer, "export", ROOT / "fixtures/v1/serve-episode", "--format", "mcap", "--out", out)
        meta, _, _ = read_mcap(out)
        assert meta["looptime"]["timebase"] == "host_monotonic", meta
        assert "host-monotonic ns: the evidence has no wall-clock anchor" in r.stderr, r.stderr

        # Bad input: a clear error, no output file.
        bad = tmp / "broken"
        bad.mkdir()
        (bad / "control_timing.jsonl").write_text('{"type": "header", "schema_version": 2\n')
        for src, needle in [(tmp / "missing", "missing"), (bad, "control_timing.jsonl")]:
            out = tmp / "bad.mcap"
            r = run(analyzer, "export", src, "--format", "mcap", "--out", out, ok=False)
            assert r.returncode != 0 and needle in r.stderr, (src, r.returncode, r.stderr)
            assert not out.exists(), f"{out} left behind after a failed export"
            assert not list(tmp.glob(".bad.mcap*")), "a temporary file left behind"
        print("mcap: no anchor says host-monotonic; bad input fails clearly and leaves no file")
        ts_check(TS, tmp)


if __name__ == "__main__":
    main()
