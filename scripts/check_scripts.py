"""Every script under bench/, scripts/ and tests/ finds what cargo built
through one rule (scripts/lib/target_dir.sh or .py: $CARGO_TARGET_DIR, else
target/). A script that names target/debug or target/release in code (not
in a comment), or joins a path onto "target", would fail wherever the
target directory is moved.

    python3 scripts/check_scripts.py [--self-test]

Exit 0 when every script follows the rule, 1 with each offending line.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RULE = re.compile(r"(?<![\w$/{.-])(\./)?target/(debug|release)\b|[\"']target[\"']\s*/")


def offences(path: Path, text: str):
    """(line number, line) of each use of a literal target/ build path."""
    in_doc = False
    for no, line in enumerate(text.splitlines(), 1):
        # Python docstrings are prose, as comments are.
        if path.suffix == ".py" and line.count('"""') % 2 == 1:
            in_doc = not in_doc
            continue
        if in_doc:
            continue
        code = line.split("#", 1)[0]
        if RULE.search(code):
            yield no, line.strip()


def scripts():
    for d in ("bench", "scripts", "tests"):
        for p in sorted((ROOT / d).rglob("*")):
            if p.suffix in (".sh", ".py") and p.is_file() and p.name != "check_scripts.py":
                yield p


def self_test():
    bad = 'LOOPTIME=target/release/looptime\n./target/debug/x --y\n'
    good = ('# target/release is where cargo builds\nsource scripts/lib/target_dir.sh\n'
            'LOOPTIME="$TARGET_DIR/release/looptime"\nOUT=${CARGO_TARGET_DIR}/release\n')
    assert [n for n, _ in offences(Path("x.sh"), bad)] == [1, 2]
    assert list(offences(Path("x.sh"), good)) == []
    doc = '"""usage: x [--bin target/release/x]\n"""\nBIN = "target/debug/x"\nbase = root / "target" / "criterion"\n'
    assert [n for n, _ in offences(Path("x.py"), doc)] == [3, 4]
    print("check_scripts self-test: ok")


def main():
    if "--self-test" in sys.argv:
        return self_test()
    found = [(p, n, l) for p in scripts() for n, l in offences(p, p.read_text())]
    for p, n, l in found:
        print(f"{p.relative_to(ROOT)}:{n}: names a literal target/ build path; "
              f"source scripts/lib/target_dir.sh and use $TARGET_DIR (or target_dir() in Python): {l}")
    if found:
        sys.exit(1)
    print(f"every script finds cargo's output through scripts/lib/target_dir ({len(list(scripts()))} scripts)")


if __name__ == "__main__":
    main()
