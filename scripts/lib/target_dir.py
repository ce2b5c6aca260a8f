"""The one rule every script uses to find what cargo built (the same as
scripts/lib/target_dir.sh): $CARGO_TARGET_DIR when it is set, else target/
at the repository's root."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def target_dir() -> Path:
    """cargo's target directory for this repository."""
    env = os.environ.get("CARGO_TARGET_DIR")
    return Path(env).resolve() if env else ROOT / "target"


def release_bin(name: str) -> Path:
    """Where a script finds the release build of `name` (a binary, or
    examples/NAME): $LOOPTIME_BIN_DIR when it is set (the docs runner's
    substitution, docs/docs-run.md: the binaries the test command built),
    else the release directory of target_dir()."""
    env = os.environ.get("LOOPTIME_BIN_DIR")
    return (Path(env) if env else target_dir() / "release") / name
