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
