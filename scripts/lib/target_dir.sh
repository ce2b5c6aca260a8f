# shellcheck shell=bash
# The one rule every script under bench/, scripts/ and tests/ uses to find
# what cargo built: $CARGO_TARGET_DIR when it is set (made absolute against
# the directory the script stands in, as cargo does), else target/ at the
# repository's root. Source it after `cd` to the repository:
#
#   source scripts/lib/target_dir.sh    # sets TARGET_DIR
#
# Python scripts use the same rule (scripts/lib/target_dir.py).
if [[ -n "${CARGO_TARGET_DIR:-}" ]]; then
    case "$CARGO_TARGET_DIR" in
        /*) TARGET_DIR="$CARGO_TARGET_DIR" ;;
        *) TARGET_DIR="$PWD/$CARGO_TARGET_DIR" ;;
    esac
else
    TARGET_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target"
fi
export TARGET_DIR

# release_bin NAME [CARGO-BUILD-ARGS...]: the path of the release build of
# NAME (a binary, or examples/NAME), built here with `cargo build --release
# -q CARGO-BUILD-ARGS`. With $LOOPTIME_BIN_DIR set, NAME as already built
# there, and nothing is built: the docs runner sets it to the binaries the
# test command built, the one substitution of docs/docs-run.md carried into
# the scripts a page runs.
release_bin() {
    local name=$1
    shift
    if [[ -n "${LOOPTIME_BIN_DIR:-}" ]]; then
        echo "$LOOPTIME_BIN_DIR/$name"
        return
    fi
    cargo build --release -q "$@" >&2 || return
    echo "$TARGET_DIR/release/$name"
}

# release_lib_profile: the cargo profile a script builds the C library with
# through CMake (LOOPTIME_CARGO_PROFILE) and sets LIB_DIR to where its
# archive lands: release, or with $LOOPTIME_BIN_DIR set (above) the dev
# build the test command already made.
release_lib_profile() {
    if [[ -n "${LOOPTIME_BIN_DIR:-}" ]]; then
        LIB_PROFILE=dev
        LIB_DIR="$TARGET_DIR/debug"
    else
        LIB_PROFILE=release
        LIB_DIR="$TARGET_DIR/release"
    fi
}
