#!/usr/bin/env bash
# An A/B a user would run on the MuJoCo arm: the default integrator
# (implicitfast) against a knob (default `--integrator rk4`, which evaluates
# the dynamics four times a step), ROLLOUTS rollouts a side, interleaved
# (A B A B ...) so that a drift of the host lands on both sides alike, then
# `compare` of the two sides; and an A/A pair (the default against itself),
# which should say "no clear change".
#
#   bash examples/mujoco/ab.sh                 # Python, 3 rollouts a side of 2 s at 500 Hz
#   LANG_=cpp bash examples/mujoco/ab.sh       # the C++ loop (built with cmake first)
#   ROLLOUTS=5 DURATION=4 RATE=1000 KNOB="--substeps 8" bash examples/mujoco/ab.sh
#
# Writes under OUT (default runs/mujoco-ab): a/, b/, a2/ (each rollout a
# session of its own), ab.json, aa.json and the two text reports.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/target_dir.sh
ROLLOUTS=${ROLLOUTS:-3}
DURATION=${DURATION:-2}
RATE=${RATE:-500}
KNOB=${KNOB:---integrator rk4}
LANG_=${LANG_:-py}
OUT=${OUT:-runs/mujoco-ab}
# The analyzer: $ANALYZER, else the one on PATH (the commands wheel, an
# install), else this repository's release build (built here if missing:
# the debug analyzer's bootstrap is many times slower).
if [[ -n "${ANALYZER:-}" ]]; then
    analyzer=$ANALYZER
elif command -v analyze_control_timing >/dev/null; then
    analyzer=$(command -v analyze_control_timing)
else
    analyzer=$TARGET_DIR/release/analyze_control_timing
    [[ -x "$analyzer" ]] || cargo build --release -q -p looptime-analyze --bin analyze_control_timing
fi
echo "[ab] analyzer: $analyzer" >&2

case "$LANG_" in
    py) loop=(python3 examples/mujoco/arm_loop.py) ;;
    cpp) loop=("${ARM_LOOP:-$TARGET_DIR/mujoco-example/arm_loop}")
         [[ -x "${loop[0]}" ]] || { echo "build the C++ loop first: cmake -S examples/mujoco -B $TARGET_DIR/mujoco-example && cmake --build $TARGET_DIR/mujoco-example" >&2; exit 2; } ;;
    *) echo "LANG_ must be py or cpp, not $LANG_" >&2; exit 2 ;;
esac

rm -rf "$OUT"
mkdir -p "$OUT"
run() {  # run SIDE [extra flags...]: one rollout, a session of its own, under OUT/SIDE
    local side=$1
    shift
    "${loop[@]}" --control-timing --rate "$RATE" --duration "$DURATION" --warmup 0.2 \
        --runs-dir "$OUT/$side" --label "$side" "$@" >/dev/null
    readlink -f "$OUT/$side/latest-session"
}
a=() b=() a2=()
for i in $(seq 1 "$ROLLOUTS"); do
    echo "[ab] rollout $i of $ROLLOUTS a side: A, B ($KNOB), A again (for the A/A)" >&2
    a+=(--a "$(run a)")
    # shellcheck disable=SC2086  # KNOB is a list of flags
    b+=(--b "$(run b $KNOB)")
    a2+=(--b "$(run a2)")
done
"$analyzer" compare "${a[@]}" "${b[@]}" --output "$OUT/ab.json" | tee "$OUT/ab.txt"
echo
"$analyzer" compare "${a[@]}" "${a2[@]}" --output "$OUT/aa.json" | tee "$OUT/aa.txt"
