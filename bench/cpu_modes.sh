#!/usr/bin/env bash
# The recorder's cost per cycle of 10 spans in each CPU-time mode (spans,
# cycle, off), against a clock-read baseline, one run per language: Rust
# (crates/capture/examples/cpu_modes.rs), C through the ABI from C++
# (bench/c_cpu_modes.cpp) and Python (bench/python_cpu_modes.py, with the
# looptime wheel installed). Tables for docs/performance.md, CPU-time modes.
#
#   bash bench/cpu_modes.sh [ROUNDS]     # default 301; 31 for a quick look
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
rounds=${1:-301}
echo "== Rust"
"$(release_bin examples/cpu_modes -p looptime-capture --example cpu_modes)" --rounds "$rounds"
echo
echo "== C (the C ABI from C++)"
release_lib_profile
build="$TARGET_DIR/bench-c-span-$LIB_PROFILE"
cmake -S "$(readlink -f crates/capture-c)" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOOPTIME_CARGO_PROFILE="$LIB_PROFILE" >/dev/null
cmake --build "$build" >/dev/null
g++ -std=c++17 -O2 -Icrates/capture-c/include bench/c_cpu_modes.cpp "$LIB_DIR/liblooptime.a" \
    -lpthread -ldl -lm -lrt -lutil -lgcc_s -o "$build/c_cpu_modes"
"$build/c_cpu_modes" "$rounds"
echo
echo "== Python"
if python3 -c "import looptime" 2>/dev/null; then
    python3 bench/python_cpu_modes.py --rounds "$rounds"
else
    echo "looptime is not installed for python3: pip install ./crates/python, then rerun" >&2
    exit 1
fi
