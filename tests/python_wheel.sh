#!/usr/bin/env bash
# The Python wheel as a user installs it: into a clean virtual environment,
# with no Rust toolchain on PATH; then examples/python with
# --control-timing, and the analyzer on the episode it wrote.
#
#   bash tests/python_wheel.sh WHEEL_DIR
#
# Needs the wheel (maturin build, as scripts/test.sh does) and a built
# analyzer (target/debug/analyze_control_timing).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
wheels=${1:?usage: tests/python_wheel.sh WHEEL_DIR}
whl=$(ls "$wheels"/looptime-*.whl)
analyzer="$TARGET_DIR/debug/analyze_control_timing"
[[ -x "$analyzer" ]] || cargo build -q -p looptime-analyze --bin analyze_control_timing
case "$(basename "$whl")" in
    *-abi3-*) ;;
    *) echo "the wheel is not tagged abi3: $(basename "$whl")" >&2; exit 1 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
# A PATH with the venv and the system only: no cargo, no rustc.
clean_path="$work/venv/bin:/usr/local/bin:/usr/bin:/bin"
if env PATH="$clean_path" bash -c 'command -v cargo || command -v rustc' >/dev/null; then
    clean_path="$work/venv/bin:/usr/bin:/bin"
fi
env PATH="$clean_path" bash -c '! command -v cargo && ! command -v rustc' >/dev/null || {
    echo "cannot make a PATH without a Rust toolchain for the check" >&2
    exit 1
}
env -u CARGO_HOME -u RUSTUP_HOME PATH="$clean_path" \
    "$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$whl"
env -u CARGO_HOME -u RUSTUP_HOME PATH="$clean_path" \
    "$work/venv/bin/python" examples/python/robot_loop.py --control-timing --duration 1 --warmup 0.2 \
    --runs-dir "$work/runs" >"$work/run.log"
"$analyzer" --episode "$work/runs/latest" --json --output "$work/report.json" >/dev/null
python3 - "$work/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["state"] == "complete", r["state"]
cycles = {p["phase"]: p["cycles"] for p in r["phases"]}
assert cycles == {"warmup": 20, "running": 100}, cycles
(th,) = r["threads"]
assert th["thread"] == "camera_reader", th["thread"]
print(f"python wheel: installed with no Rust toolchain, example recorded {sum(cycles.values())} cycles "
      f"and a camera reader with {sum(s['count'] for s in th['stages'])} spans")
PY
