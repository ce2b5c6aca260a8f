#!/usr/bin/env bash
# Sizes of what a user installs or links: liblooptime.a and liblooptime.so
# as the CMake build installs them (for each cargo profile given), the C++
# example linked statically against that archive (system libraries
# dynamic, stripped), and the Python extension module in the wheel that
# maturin builds.
#
#   bash bench/lib_sizes.sh [PROFILE...]     (default: release release-lib)
#   PYTHON_WHEEL=0 bash bench/lib_sizes.sh   (skip the wheel's build)
set -euo pipefail
cd "$(dirname "$0")/.."
profiles=("$@")
[[ ${#profiles[@]} -gt 0 ]] || profiles=(release release-lib)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.2f MB", b / 1048576 }'; }
echo "| profile | liblooptime.a (installed) | liblooptime.so | C++ example, static, stripped |"
echo "|---|---|---|---|"
for p in "${profiles[@]}"; do
    cmake -S crates/capture-c -B "$work/build-$p" -DLOOPTIME_CARGO_PROFILE="$p" >/dev/null
    cmake --build "$work/build-$p" >/dev/null
    cmake --install "$work/build-$p" --prefix "$work/prefix-$p" >/dev/null
    lib="$work/prefix-$p/lib"
    [[ -d "$lib" ]] || lib=$(dirname "$(find "$work/prefix-$p" -name liblooptime.a | head -n 1)")
    g++ -std=c++17 -O2 -s -I"$work/prefix-$p/include" examples/cpp/control_loop.cpp "$lib/liblooptime.a" \
        -lpthread -ldl -lm -lrt -lutil -lgcc_s -o "$work/example-$p"
    echo "| $p | $(mb "$lib/liblooptime.a") | $(mb "$lib/liblooptime.so") | $(mb "$work/example-$p") |"
done
if [[ "${PYTHON_WHEEL:-1}" == 1 ]]; then
    (cd crates/python && python3 -m maturin build -q -o "$work/wheel" >/dev/null 2>&1)
    whl=$(ls "$work"/wheel/*.whl)
    size=$(python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(sum(i.file_size for i in z.infolist() if i.filename.endswith('.so')))" "$whl")
    awk -v b="$size" -v w="$(basename "$whl")" 'BEGIN { printf "\nPython extension module in %s: %.2f MB\n", w, b / 1048576 }'
fi
