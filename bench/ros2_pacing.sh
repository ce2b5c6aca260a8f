#!/usr/bin/env bash
# The A/B that shows why a robot runtime keeps its control loop off the ROS
# timer (docs/ros2.md, A robot runtime): examples/ros2/robot_runtime.py
# paced by a looptime.Scheduler thread against the same control called
# from a ROS timer, then the scheduler-paced runtime with Python's switch
# interval at 1 ms against its default 5 ms. Every rollout has the
# simulated robot's joint states at JOINT_RATE Hz (1 kHz by default)
# keeping the executor busy.
#
#   ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST PYTHON=target/ros-venv-kilted/bin/python bash bench/ros2_pacing.sh
#   SECONDS_EACH=5 PAIRS=3 RATE=50 JOINT_RATE=1000 bash bench/ros2_pacing.sh
#
# PYTHON: a Python with rclpy, sensor_msgs and the looptime wheel (the
# venvs tests/ros2.sh makes under the target directory). PAIRS rollouts a
# side, interleaved (A B A B ...: a slow spell of the machine falls on both
# sides), each SECONDS_EACH long and its own episode; each side is then
# compared as `--a E1 --a E2 ...`. Output: the two comparisons' text in
# $OUT (default: a temporary directory) and on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
PYTHON=${PYTHON:-$TARGET_DIR/ros-venv-kilted/bin/python}
ANALYZER=${LOOPTIME_ANALYZER:-$TARGET_DIR/debug/analyze_control_timing}
SECONDS_EACH=${SECONDS_EACH:-10}
PAIRS=${PAIRS:-3}
RATE=${RATE:-50}
JOINT_RATE=${JOINT_RATE:-1000}
OUT=${OUT:-$(mktemp -d)}
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-$((RANDOM % 100 + 100))}
[[ -x "$PYTHON" ]] || { echo "ros2_pacing: no Python at $PYTHON (run tests/ros2.sh once, or set PYTHON)" >&2; exit 2; }
[[ -x "$ANALYZER" ]] || cargo build -q -p looptime-analyze --bin analyze_control_timing
mkdir -p "$OUT"
echo "ros2_pacing: $PAIRS rollouts a side of $SECONDS_EACH s at $RATE Hz, joint states at $JOINT_RATE Hz; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); into $OUT"

# run NAME ARGS...: one rollout as its own episode; prints its directory.
run() {
    local name=$1
    shift
    "$PYTHON" examples/ros2/robot_runtime.py --control-timing --seconds "$SECONDS_EACH" --rate "$RATE" \
        --joint-rate "$JOINT_RATE" --runs-dir "$OUT/$name" "$@" >"$OUT/$name.log" 2>&1 ||
        { echo "ros2_pacing: $name failed:" >&2; tail -20 "$OUT/$name.log" >&2; exit 1; }
    readlink -f "$OUT/$name/latest"
}

# compare TITLE A_NAME B_NAME: A's and B's rollouts, PAIRS each.
compare() {
    local title=$1 a=$2 b=$3 args=()
    for i in $(seq 2 "$PAIRS"); do
        args+=(--a "$(cat "$OUT/$a-$i.path")" --b "$(cat "$OUT/$b-$i.path")")
    done
    echo
    echo "== $title"
    "$ANALYZER" compare "$(cat "$OUT/$a-1.path")" "$(cat "$OUT/$b-1.path")" "${args[@]}" \
        --json --output "$OUT/$title.json" >/dev/null
    "$ANALYZER" compare "$(cat "$OUT/$a-1.path")" "$(cat "$OUT/$b-1.path")" "${args[@]}" | tee "$OUT/$title.txt"
}

for i in $(seq 1 "$PAIRS"); do
    run "scheduler-$i" --pace scheduler --label scheduler >"$OUT/scheduler-$i.path"
    run "ros-timer-$i" --pace ros-timer --label ros-timer >"$OUT/ros-timer-$i.path"
    run "switch-1ms-$i" --pace scheduler --switch-interval 0.001 --label switch-1ms >"$OUT/switch-1ms-$i.path"
    echo "ros2_pacing: round $i of $PAIRS done"
done
compare pacing scheduler ros-timer
# The scheduler-paced side (Python's default switch interval, 5 ms) is the
# baseline of both comparisons.
compare switch-interval scheduler switch-1ms
