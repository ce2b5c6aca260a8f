#!/usr/bin/env bash
# AddressSanitizer over capture's unsafe code: the ring (a file another
# process maps, read with volatile copies), the slot layouts and the
# recorder's slabs, through capture's ring, recorder, samples and thread
# tests, built with -Zsanitizer=address (docs/reliability.md).
#
#   bash scripts/asan.sh
#
# The stable toolchain takes the flag with RUSTC_BOOTSTRAP=1, set here.
# The standard library is not rebuilt with the sanitizer (that needs a
# nightly toolchain's rust-src): accesses inside std go unchecked, every
# access of looptime's own code is checked. Its own target directory, so
# that the instrumented build never mixes with the normal one.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/target_dir.sh
host=$(rustc -vV | sed -n 's/^host: //p')
export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Zsanitizer=address"
export RUSTDOCFLAGS="-Zsanitizer=address"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
cargo test -p looptime-capture --target "$host" --target-dir "$TARGET_DIR/asan" \
    --test ring --test recorder --test samples --test threads --test reader_edges --lib -- \
    --skip an_absurd_ring_is_an_out_of_memory_error_not_an_abort
# Skipped: that test caps its child's address space (RLIMIT_AS) to provoke
# an out-of-memory error; the sanitizer's shadow memory cannot be mapped
# under such a cap, so the child dies in ASan, not in looptime.
echo "asan: capture's ring, recorder, samples, threads and reader tests ran clean under AddressSanitizer"
