"""A robot recording for bench/mcap_into.sh: an MCAP file of at least SIZE_MB
megabytes on disk, written with Python's `mcap` writer under the `ros2`
profile, zstd chunks of 1 MiB, starting at START_NS (wall-clock ns):

    python3 bench/make_recording.py SIZE_MB START_NS OUT.mcap

Four topics with CDR-like payloads (a 4-byte encapsulation header, a stamp,
a frame id, then the fields), as a rosbag2 recording of an arm with a
camera has them:

| topic | rate | payload |
|---|---|---|
| /camera/image_raw | 30 Hz | sensor_msgs/Image, 640 × 480 rgb8 (921,600 bytes): a gradient that moves, with noise, so zstd finds some but not much to take out |
| /joint_states | 1 kHz | 7 names, positions, velocities, efforts |
| /imu | 200 Hz | orientation, angular velocity, linear acceleration and their covariances |
| /tf | 100 Hz | three transforms |

It writes until the file reaches SIZE_MB (checked every second of recording
time) and prints one JSON line: the bytes, messages per topic, the time
range.
"""
import json
import struct
import sys

import numpy as np
from mcap.writer import CompressionType, Writer

W, H = 640, 480


def cdr(stamp_ns, frame, body):
    """Encapsulation (CDR little endian), stamp, frame id, body."""
    sec, nsec = divmod(stamp_ns, 1_000_000_000)
    f = frame.encode() + b"\0"
    pad = (-len(f)) % 4
    return b"\x00\x01\x00\x00" + struct.pack("<iIi", sec, nsec, len(f)) + f + b"\0" * pad + body


def main():
    size_mb, start, out = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    target = int(size_mb * 1e6)
    rng = np.random.default_rng(7)
    base = (np.add.outer(np.arange(H), np.arange(W)) % 256).astype(np.uint8)
    counts = {}
    with open(out, "wb") as f:
        w = Writer(f, chunk_size=1 << 20, compression=CompressionType.ZSTD)
        w.start(profile="ros2", library="looptime bench/make_recording.py")
        chans = {}
        for topic, typ in [("/camera/image_raw", "sensor_msgs/msg/Image"),
                           ("/joint_states", "sensor_msgs/msg/JointState"),
                           ("/imu", "sensor_msgs/msg/Imu"),
                           ("/tf", "tf2_msgs/msg/TFMessage")]:
            s = w.register_schema(name=typ, encoding="ros2msg", data=f"# {typ}\n".encode())
            chans[topic] = w.register_channel(topic=topic, message_encoding="cdr", schema_id=s)
            counts[topic] = 0
        joints = b"".join(struct.pack("<I", 9) + f"joint_{i}\0".encode() + b"\0" * 3 for i in range(7))
        second = 0
        while True:
            t0 = start + second * 1_000_000_000
            events = []
            for k in range(30):
                events.append((t0 + k * 33_333_333, "/camera/image_raw", k))
            for k in range(1000):
                events.append((t0 + k * 1_000_000, "/joint_states", k))
            for k in range(200):
                events.append((t0 + k * 5_000_000, "/imu", k))
            for k in range(100):
                events.append((t0 + k * 10_000_000, "/tf", k))
            events.sort()
            for t, topic, k in events:
                if topic == "/camera/image_raw":
                    img = np.roll(base, second * 30 + k, axis=1)
                    noise = rng.integers(0, 24, size=(H, W), dtype=np.uint8)
                    rgb = np.repeat((img + noise)[:, :, None], 3, axis=2)
                    body = struct.pack("<II", H, W) + struct.pack("<I", 5) + b"rgb8\0\0\0\0" \
                        + struct.pack("<BxxxI", 0, W * 3) + struct.pack("<I", rgb.size) + rgb.tobytes()
                    data = cdr(t, "camera", body)
                elif topic == "/joint_states":
                    q = np.sin(np.arange(7) + t * 1e-9).astype("<f8").tobytes()
                    data = cdr(t, "base", struct.pack("<I", 7) + joints + (struct.pack("<I", 7) + q) * 3)
                elif topic == "/imu":
                    data = cdr(t, "imu", rng.normal(size=40).astype("<f8").tobytes())
                else:
                    data = cdr(t, "world", struct.pack("<I", 3) + rng.normal(size=3 * 10).astype("<f8").tobytes())
                w.add_message(chans[topic], log_time=t, publish_time=t, sequence=counts[topic], data=data)
                counts[topic] += 1
            second += 1
            if f.tell() >= target:
                break
        w.finish()
        size = f.tell()
    print(json.dumps({"bytes": size, "messages": counts, "start_ns": start,
                      "end_ns": start + second * 1_000_000_000}))


if __name__ == "__main__":
    main()
