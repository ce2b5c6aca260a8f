#!/usr/bin/env python3
"""Checks `analyze_control_timing export EPISODE --format mcap --into
RECORDING.mcap --out OUT.mcap` (docs/export.md) with the Python `mcap`
reader and the `rosbags` package:

1. A small recording made here with the `mcap` writer under the `ros2`
   profile (a JSON channel, a channel of opaque binary messages, an
   attachment, a metadata record), its messages at 100 Hz over the
   episode's wall-clock time: after --into, the header's profile, every
   schema, channel (ids kept), message (a checksum per channel over time,
   sequence and bytes), attachment and metadata record comes back
   unchanged; the looptime channels are there, as many cycles as the
   evidence has, inside the recording's time range; the output is
   zstd-compressed; merging the output again is refused, naming the
   first merge's episode.
2. A rosbag2 recording written with rosbags (MCAP storage, CDR
   sensor_msgs/msg/JointState at 100 Hz over the episode's time): after
   --into, every copied message deserializes with rosbags' CDR
   deserializer to the values written.
3. Bad input, each a clear error that leaves no output file: a truncated
   MCAP, a file that is not MCAP, a recording that does not overlap the
   episode (and with --force it merges), evidence without an anchor, and
   --out equal to the recording.

Usage: python3 tests/mcap_into_check.py ANALYZER LOOPTIME
"""
import hashlib
import json
import pathlib
import sys
import tempfile

from mcap.reader import make_reader
from mcap.writer import Writer

# The plain export's checker, beside this file: its command runner.
from mcap_check import ROOT, run, ts_check


def episode_range(ep):
    """The episode's wall-clock range, from its header anchor and cycles."""
    lines = (ep / "control_timing.jsonl").read_text().splitlines()
    h = json.loads(lines[0])
    a = h["wall_clock"]["start"]
    starts = [json.loads(x)["start_ns"] for x in lines[1:] if x.strip()]
    wall = lambda t: a["realtime_ns"] + t - a["monotonic_ns"]  # noqa: E731
    return wall(min(starts)), wall(max(starts)), len(starts)


def contents(path):
    """Everything a reader sees: schemas, channels, per-channel digests,
    attachments and metadata."""
    with open(path, "rb") as f:
        r = make_reader(f)
        schemas, channels, digests, counts, times = {}, {}, {}, {}, {}
        for schema, channel, m in r.iter_messages(log_time_order=False):
            if schema is not None:
                schemas[schema.id] = (schema.name, schema.encoding, bytes(schema.data))
            channels[channel.id] = (channel.topic, channel.message_encoding, channel.schema_id,
                                    dict(channel.metadata))
            d = digests.setdefault(channel.id, hashlib.sha256())
            d.update(m.log_time.to_bytes(8, "little") + m.publish_time.to_bytes(8, "little")
                     + m.sequence.to_bytes(4, "little") + bytes(m.data))
            counts[channel.id] = counts.get(channel.id, 0) + 1
            times.setdefault(channel.topic, []).append(m.log_time)
        attachments = sorted((a.name, a.media_type, a.log_time, a.create_time, bytes(a.data))
                             for a in r.iter_attachments())
        metadata = sorted((m.name, tuple(sorted(m.metadata.items()))) for m in r.iter_metadata())
    return {
        "schemas": schemas, "channels": channels, "counts": counts, "times": times,
        "digests": {k: v.hexdigest() for k, v in digests.items()},
        "attachments": attachments, "metadata": metadata,
    }


def make_recording(path, t0, t1, shift=0, profile="ros2"):
    """A JSON channel and an opaque binary one at 100 Hz over [t0, t1]."""
    with open(path, "wb") as f:
        w = Writer(f)
        w.start(profile=profile, library="looptime test")
        js = w.register_schema(name="robot.Status", encoding="jsonschema",
                               data=json.dumps({"type": "object"}).encode())
        bs = w.register_schema(name="robot.Blob", encoding="", data=b"")
        cj = w.register_channel(topic="/robot/status", message_encoding="json", schema_id=js,
                                metadata={"rate": "100"})
        cb = w.register_channel(topic="/robot/blob", message_encoding="opaque", schema_id=bs)
        t, k = t0 - 100_000_000, 0
        while t <= t1 + 100_000_000:
            w.add_message(cj, log_time=t + shift, publish_time=t + shift - 7, sequence=k,
                          data=json.dumps({"k": k, "ok": k % 7 != 0}).encode())
            w.add_message(cb, log_time=t + shift, publish_time=t + shift, sequence=k,
                          data=bytes((k * 31 + i) % 256 for i in range(40)))
            t, k = t + 10_000_000, k + 1
        w.add_attachment(create_time=t0, log_time=t0, name="calibration.yaml",
                         media_type="application/yaml", data=b"camera: {fx: 600}\n")
        w.add_metadata(name="robot", data={"serial": "R-17", "site": "lab"})
        w.finish()


def main():
    analyzer, looptime = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        run(looptime, "serve", "--control-timing", "--warmup", "0.2", "--duration", "0.8",
            "--runs-dir", tmp / "runs")
        ep = (tmp / "runs" / "latest").resolve()
        t0, t1, n_cycles = episode_range(ep)

        # 1. Every record of the recording, unchanged; the timing added.
        rec = tmp / "robot.mcap"
        make_recording(rec, t0, t1)
        before = rec.read_bytes()
        out = tmp / "merged.mcap"
        r = run(analyzer, "export", ep, "--format", "mcap", "--into", rec, "--out", out)
        assert rec.read_bytes() == before, "the recording was modified"
        with open(out, "rb") as f:
            reader = make_reader(f)
            assert reader.get_header().profile == "ros2", reader.get_header()
            compressions = {c.compression for c in reader.get_summary().chunk_indexes}
            assert compressions == {"zstd"}, compressions
        again = run(analyzer, "export", ep, "--format", "mcap", "--into", out, "--out", tmp / "again.mcap",
                    ok=False)
        assert again.returncode == 2 and "already holds looptime channels" in again.stderr \
            and str(ep) in again.stderr, again.stderr
        assert not (tmp / "again.mcap").exists()
        a, b = contents(rec), contents(out)
        for cid, ch in a["channels"].items():
            assert b["channels"][cid] == ch, (cid, ch, b["channels"].get(cid))
            assert b["digests"][cid] == a["digests"][cid], f"channel {ch[0]} differs"
            assert b["schemas"][ch[2]] == a["schemas"][ch[2]], ch
        assert a["attachments"] == b["attachments"] and a["attachments"], b["attachments"]
        assert set(a["metadata"]) <= set(b["metadata"]), b["metadata"]
        assert any(m[0] == "looptime" for m in b["metadata"])
        cycles = b["times"]["/looptime/cycle"]
        assert len(cycles) == n_cycles, (len(cycles), n_cycles)
        lo, hi = min(a["times"]["/robot/status"]), max(a["times"]["/robot/status"])
        assert lo <= min(cycles) and max(cycles) <= hi, "the timing lies outside the recording"
        ts_files = [{"file": out, "profile": "ros2", "topics": {t: len(v) for t, v in b["times"].items()}}]
        assert ts_files[0]["topics"]["/looptime/cycle"] == n_cycles
        print(f"mcap --into: {sum(a['counts'].values())} messages, the attachment and the metadata "
              f"copied unchanged; {len(cycles)} cycles on its timeline ({r.stderr.strip()[:60]}...)")

        # 2. A rosbag2 recording (MCAP storage, CDR JointState at 100 Hz).
        from rosbags.rosbag2 import StoragePlugin
        from rosbags.rosbag2 import Writer as BagWriter
        from rosbags.typesys import Stores, get_typestore
        ts = get_typestore(Stores.ROS2_HUMBLE)
        JointState = ts.types["sensor_msgs/msg/JointState"]
        Header = ts.types["std_msgs/msg/Header"]
        Time = ts.types["builtin_interfaces/msg/Time"]
        import numpy as np
        bag = tmp / "bag"
        written = []
        with BagWriter(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
            conn = w.add_connection("/joint_states", JointState.__msgtype__, typestore=ts)
            t, k = t0 - 50_000_000, 0
            while t <= t1 + 50_000_000:
                pos = np.array([0.001 * k, -0.5 + 0.002 * k, 1.25], dtype=np.float64)
                msg = JointState(header=Header(stamp=Time(sec=t // 1_000_000_000, nanosec=t % 1_000_000_000),
                                               frame_id="base"),
                                 name=["shoulder", "elbow", "wrist"], position=pos,
                                 velocity=np.zeros(3), effort=np.array([], dtype=np.float64))
                w.write(conn, t, ts.serialize_cdr(msg, JointState.__msgtype__))
                written.append((t, pos.tolist()))
                t, k = t + 10_000_000, k + 1
        bag_mcap = next(bag.glob("*.mcap"))
        out2 = tmp / "bag_merged.mcap"
        run(analyzer, "export", ep, "--format", "mcap", "--into", bag_mcap, "--out", out2)
        got = []
        with open(out2, "rb") as f:
            for _, channel, m in make_reader(f).iter_messages(topics=["/joint_states"]):
                assert channel.message_encoding == "cdr"
                js = ts.deserialize_cdr(bytes(m.data), JointState.__msgtype__)
                stamp = js.header.stamp.sec * 1_000_000_000 + js.header.stamp.nanosec
                got.append((m.log_time, stamp, js.position.tolist(), list(js.name)))
        assert len(got) == len(written), (len(got), len(written))
        for (t, pos), (lt, stamp, p, names) in zip(written, got):
            assert lt == t and stamp == t and p == pos and names == ["shoulder", "elbow", "wrist"]
        print(f"mcap --into: a rosbag2 recording's {len(got)} JointState messages decode to the values written")
        ts_files.append({"file": out2, "profile": "ros2",
                   "topics": {t: len(v) for t, v in contents(out2)["times"].items()}})

        # 3. Bad input: a clear error each, and no output file.
        truncated = tmp / "truncated.mcap"
        truncated.write_bytes(before[: len(before) // 2])
        text = tmp / "notes.mcap"
        text.write_text("this is not an MCAP file\n")
        far = tmp / "far.mcap"
        make_recording(far, t0, t1, shift=-3_600_000_000_000)
        cases = [
            (ep, truncated, [], "not a readable MCAP file"),
            (ep, text, [], "not a readable MCAP file"),
            (ep, far, [], "do not overlap"),
            (ROOT / "fixtures/v2/serve-episode", rec, [], "no wall-clock anchor"),
            (ep, tmp / "missing.mcap", [], "cannot be read"),
        ]
        for src, into, extra, needle in cases:
            o = tmp / "bad_out.mcap"
            r = run(analyzer, "export", src, "--format", "mcap", "--into", into, "--out", o, *extra, ok=False)
            assert r.returncode == 2 and needle in r.stderr, (into.name, r.returncode, r.stderr)
            assert not o.exists() and not list(tmp.glob(".bad_out.mcap*")), f"{o} left behind"
        r = run(analyzer, "export", ep, "--format", "mcap", "--into", rec, "--out", rec, ok=False)
        assert r.returncode == 2 and "is the recording itself" in r.stderr, r.stderr
        assert rec.read_bytes() == before
        forced = tmp / "forced.mcap"
        run(analyzer, "export", ep, "--format", "mcap", "--into", far, "--out", forced, "--force")
        assert contents(forced)["times"]["/looptime/cycle"]
        ts_files.append({"file": forced, "profile": "ros2",
                   "topics": {t: len(v) for t, v in contents(forced)["times"].items()}})
        ts_check(ts_files, tmp)
        print("mcap --into: truncated, not MCAP, no overlap, no anchor and a missing file are refused "
              "without output; --force merges; --out onto the recording is refused")


if __name__ == "__main__":
    main()
