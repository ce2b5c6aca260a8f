#!/usr/bin/env bash
# Cost of a span through the C ABI from C++ against the Rust span, in the
# same process (see bench/c_span.cpp). Builds the library in release mode
# through CMake, then the bench with -O2.
#
#   bash bench/c_span.sh [ROUNDS]     # default 4001
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
release_lib_profile
build="$TARGET_DIR/bench-c-span-$LIB_PROFILE"
cmake -S "$(readlink -f crates/capture-c)" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLOOPTIME_CARGO_PROFILE="$LIB_PROFILE" >/dev/null
cmake --build "$build" >/dev/null
g++ -std=c++17 -O2 -Icrates/capture-c/include bench/c_span.cpp "$LIB_DIR/liblooptime.a" \
    -lpthread -ldl -lm -lrt -lutil -lgcc_s -o "$build/c_span"
"$build/c_span" "${1:-4001}"
