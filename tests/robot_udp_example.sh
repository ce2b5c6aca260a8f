#!/usr/bin/env bash
# A loop paced by the robot, from Python (examples/python/robot_udp.py)
# from C++ (examples/cpp/robot_udp.cpp) and from C (examples/cpp/
# robot_udp.c), each against `looptime robot-peer` over loopback UDP: 1 s of states at 1 kHz,
# the peer's transmit path stalling the last 5 ms of every 250 (4 stalls),
# and the client answering every 50th state 2 ms late (20 late answers).
# The analyzer must find what the faults cause: the 20 late answers (at
# least: a loaded host may add more), bursts after on-time answers, no
# state lost, both causes in the verdict, the robot's success rate below 1,
# and every arrival the kernel's stamp with the queued states' socket wait.
# Needs the looptime wheel installed, cmake and g++.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
analyzer="$TARGET_DIR/debug/analyze_control_timing"
looptime="$TARGET_DIR/debug/looptime"
[[ -x "$analyzer" ]] || cargo build -q -p looptime-analyze --bin analyze_control_timing
[[ -x "$looptime" ]] || cargo build -q -p looptime-cli --bin looptime
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cpp_build="$TARGET_DIR/cpp-example"
cmake -S examples/cpp -B "$cpp_build" -DLOOPTIME_CARGO_PROFILE=dev >/dev/null
cmake --build "$cpp_build" --target robot_udp robot_udp_c >/dev/null

run_client() {  # run_client NAME CLIENT...: the peer, then the client with its port
    local name=$1
    shift
    "$looptime" robot-peer --rate 1000 --duration 1 --stall-every-ms 250 --stall-ms 5 >"$tmp/$name.peer" &
    local peer=$!
    for _ in $(seq 1 50); do
        grep -q "listening on" "$tmp/$name.peer" && break
        sleep 0.1
    done
    local port
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.peer")
    [[ -n "$port" ]] || { echo "the robot peer printed no port" >&2; cat "$tmp/$name.peer" >&2; exit 1; }
    "$@" --port "$port" --runs-dir "$tmp/$name" --late-every 50
    wait "$peer"
    cat "$tmp/$name.peer"
    # An episode with its manifest, under the runs directory's `latest`.
    test -f "$tmp/$name/latest/manifest.json" || { echo "$name wrote no manifest" >&2; exit 1; }
    "$analyzer" --episode "$tmp/$name/latest" --json >"$tmp/$name.json"
    python3 - "$tmp/$name.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert not any("manifest" in c for c in r["caveats"]), r["caveats"]
(p,) = r["input_paced"]["phases"]
assert p["cycles"] == 1000, p["cycles"]
assert p["late_answers"] >= 20, p
b = p["bursts"]
assert b["count"] - b["after_late_answer"] >= 2, b
assert p["lost"]["total"] == 0, p["lost"]
assert p["verdict"] == "the loop and the link", p["verdict"]
assert p["success_rate"]["value"] == "control_command_success_rate"
assert p["success_rate"]["min"] < 1.0, p["success_rate"]
# Every state carries the kernel's receive stamp, and the states that
# reached the host during a 2 ms late answer waited in the socket (about
# 1 ms for the next one): the queueing shows.
sw = p["socket_wait"]
assert sw["stamped"] == p["cycles"], sw
assert sw["wait"]["max_ns"] >= 500_000, sw
print(f"robot_udp ({sys.argv[2]}): {p['cycles']} cycles, {p['late_answers']} late answers, {b['count']} bursts "
      f"({b['after_late_answer']} after a late answer), verdict {p['verdict']!r}")
PY
}
run_client py python3 examples/python/robot_udp.py
run_client cpp "$cpp_build/robot_udp"
run_client c "$cpp_build/robot_udp_c"
echo "robot_udp example: ok"
