#!/usr/bin/env bash
# The C++ example end to end, as a user runs it: configure and build
# examples/cpp with CMake (which builds the library from this tree), run
# the 100 Hz loop with --control-timing, and analyze what it wrote; then
# stop a second run with SIGINT and check it is finished as aborted; then
# a bad argument. Needs cmake, g++ and a built analyzer
# (target/debug/analyze_control_timing, left by `cargo test --workspace`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
build="$TARGET_DIR/cpp-example"
analyzer="$TARGET_DIR/debug/analyze_control_timing"
[[ -x "$analyzer" ]] || cargo build -q -p looptime-analyze --bin analyze_control_timing
cmake -S examples/cpp -B "$build" -DLOOPTIME_CARGO_PROFILE=dev >/dev/null
cmake --build "$build" >/dev/null
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT

echo "cpp example: 2 s at 100 Hz with 0.5 s warmup"
"$build/control_loop" --control-timing --duration 2 --warmup 0.5 --runs-dir "$runs/a"
"$analyzer" --episode "$runs/a/latest" >/dev/null
"$analyzer" --episode "$runs/a/latest" --json --output "$runs/a.json" >/dev/null
python3 - "$runs/a.json" "$runs/a/latest" <<'PY'
import json, pathlib, sys
r = json.load(open(sys.argv[1]))
ep = pathlib.Path(sys.argv[2]).resolve()
assert r["state"] == "complete", r["state"]
# 0.5 s of warmup and 2 s of running at 100 Hz: 50 and 200 cycles.
cycles = {p["phase"]: p["cycles"] for p in r["phases"]}
assert cycles == {"warmup": 50, "running": 200}, cycles
stages = {s["stage"] for s in r["stages"]}
want = {"camera_read", "viewer_control", "policy", "adapter_decode", "executor", "robot_send_command"}
assert stages == want, stages
values = {v["name"] for v in r["values"]}
assert {"camera_frame", "dt_measured_us"} <= values, values
# The camera reader thread, recorded on its own recorder: its report and
# the overlap of the loop's stages with its work.
(th,) = r["threads"]
assert th["thread"] == "camera_reader" and th["file"] == "control_timing.camera_reader.jsonl", th
assert {st["path"] for st in th["stages"]} == {"grab", "decode"}, th["stages"]
assert all(st["count"] > 0 for st in th["stages"]), th["stages"]
assert any(o["thread"] == "camera_reader" and o["spans"] > 0 for o in r["overlap"]), r["overlap"]
# Data age: the loop used the reader's frames, which the reader published.
(cam,) = r["data_age"]["sources"]
assert cam["source"] == "camera" and cam["not_comparable"] is None, cam
assert sum(p["uses"] for p in cam["phases"]) > 200, cam["phases"]  # all but the first few cycles
assert cam["production"]["threads"] == ["camera_reader"] and cam["production"]["produced"] > 30, cam["production"]
m = json.load(open(ep / "manifest.json"))
assert m["status"] == "complete" and m["producer"].startswith("looptime-c ")
assert m["config"]["run"]["control_timing"] is True
assert m["counts"]["cycles"] == 250 and m["counts"]["planned_cycles"] == 250, m["counts"]
assert m["realtime"]["timer_slack_ns"] is not None
s = json.load(open(ep.parent / "session.json"))
assert s["rollouts"][0]["state"] == "complete", s
print("cpp example: complete episode analyzed: 50 warmup + 200 running cycles, 6 stages")
PY

echo "cpp example: SIGINT ends the loop as aborted"
"$build/control_loop" --control-timing --duration 60 --warmup 0 --runs-dir "$runs/b" &
pid=$!
sleep 1.5
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[[ "$rc" -eq 130 ]] || { echo "expected exit 130 after SIGINT, got $rc" >&2; exit 1; }
"$analyzer" --episode "$runs/b/latest" --json --output "$runs/b.json" >/dev/null
python3 - "$runs/b.json" "$runs/b/latest" <<'PY'
import json, pathlib, sys
r = json.load(open(sys.argv[1]))
m = json.load(open(pathlib.Path(sys.argv[2]) / "manifest.json"))
assert r["state"] == "aborted", r["state"]
assert m["status"] == "aborted", m["status"]
n = sum(p["cycles"] for p in r["phases"])
assert 50 <= n < 6000, n  # about 150 cycles in 1.5 s
print(f"cpp example: aborted episode analyzed: {n} cycles before SIGINT")
PY

echo "cpp example: a bad argument is refused with a message"
rc=0
out=$("$build/control_loop" --duration soon 2>&1) || rc=$?
[[ "$rc" -eq 2 && "$out" == *"--duration needs a non-negative number"* ]] || { echo "got rc $rc: $out" >&2; exit 1; }

echo "cpp example: installed package, found by find_package and by pkg-config"
prefix="$runs/prefix"
cmake -S crates/capture-c -B "$TARGET_DIR/capture-c-install" -DLOOPTIME_CARGO_PROFILE=dev >/dev/null
cmake --build "$TARGET_DIR/capture-c-install" >/dev/null
cmake --install "$TARGET_DIR/capture-c-install" --prefix "$prefix" >/dev/null
conf=$(cmake -S examples/cpp -B "$runs/fp" -DCMAKE_PREFIX_PATH="$prefix" 2>&1)
if [[ "$conf" == *"looptime is not installed"* ]]; then
    echo "find_package(looptime) did not find the installed package in $prefix" >&2
    exit 1
fi
cmake --build "$runs/fp" >/dev/null
"$runs/fp/control_loop" --control-timing --duration 0.2 --warmup 0 --runs-dir "$runs/c" >/dev/null
[[ -f "$runs/c/latest/control_timing.jsonl" ]] || { echo "the find_package build wrote no evidence" >&2; exit 1; }
pcdir=$(dirname "$(find "$prefix" -name looptime.pc | head -n 1)")
export PKG_CONFIG_PATH="$pcdir"
# Static, through looptime-static.pc: the archive by its path and the
# system libraries; the program needs no liblooptime.so at run time.
g++ -std=c++17 examples/cpp/control_loop.cpp -o "$runs/pc-static" $(pkg-config --cflags --libs looptime-static)
if ldd "$runs/pc-static" | grep -q liblooptime; then
    echo "the looptime-static build links liblooptime.so" >&2
    exit 1
fi
env -u LD_LIBRARY_PATH "$runs/pc-static" --control-timing --duration 0.2 --warmup 0 --runs-dir "$runs/d" >/dev/null
# Shared, through looptime.pc: -llooptime resolves to liblooptime.so, found
# at run time through the rpath, with no LD_LIBRARY_PATH.
g++ -std=c++17 examples/cpp/control_loop.cpp -o "$runs/pc-shared" $(pkg-config --cflags --libs looptime)
ldd "$runs/pc-shared" | grep -q "liblooptime.so => $(pkg-config --variable=libdir looptime)" || {
    echo "the looptime.pc build does not find liblooptime.so through its rpath:" >&2
    ldd "$runs/pc-shared" >&2
    exit 1
}
env -u LD_LIBRARY_PATH "$runs/pc-shared" --control-timing --duration 0.2 --warmup 0 --runs-dir "$runs/e" >/dev/null
# Plain C99 too, as c.md shows it.
cat > "$runs/min.c" <<'C'
#include <stdio.h>
#include "looptime.h"
int main(void) { printf("%s\n", looptime_version()); return 0; }
C
cc -std=c99 "$runs/min.c" -o "$runs/min-shared" $(pkg-config --cflags --libs looptime)
cc -std=c99 "$runs/min.c" -o "$runs/min-static" $(pkg-config --cflags --libs looptime-static)
[[ "$(env -u LD_LIBRARY_PATH "$runs/min-shared")" == 0.1.0 && "$(env -u LD_LIBRARY_PATH "$runs/min-static")" == 0.1.0 ]] || {
    echo "the C programs linked through pkg-config did not run" >&2
    exit 1
}
for d in d e; do
    [[ -f "$runs/$d/latest/control_timing.jsonl" ]] || { echo "the pkg-config build ($d) wrote no evidence" >&2; exit 1; }
done
echo "cpp example: 4 passed, 0 failed"
