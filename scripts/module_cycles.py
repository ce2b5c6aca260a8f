#!/usr/bin/env python3
"""Fails when the modules of a crate import each other in a circle.

    python3 scripts/module_cycles.py [CRATE_DIR...]   (default: every package under crates/)

Each `.rs` file under a crate's `src/` is a module (`a/mod.rs` and `a.rs`
are `a`). A file depends on another module when it names it by path:
`crate::x::…` or `super::x` / `super::super::…` (in `use` lines and in
code alike), resolved to the deepest module of the crate that the path
reaches. Test code (`#[cfg(test)] mod …` and everything after it in a
file) and a module's own submodules don't count: a parent that declares
`mod child;` and uses it is the ladder going down, not a circle. Each
strongly connected set of two or more modules is printed with the edges
that close it, and the exit code is 1 when there is any (0 otherwise).
"""
import pathlib
import re
import sys

PATH = re.compile(r"\b(crate|super)((?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+)")
GROUP = re.compile(r"\b(crate|super)((?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))*)::\{([^}]*)\}")


def module_of(src, path):
    rel = path.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def code_of(text):
    """The file without comments, strings and test code."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    cut = re.search(r"#\[cfg\(test\)\]\s*(pub(\(crate\))?\s+)?mod\s", text)
    return text[: cut.start()] if cut else text


PUB_USE = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);")


def reexports(modules, code_by_module):
    """For each module, the names its `pub use` lines re-export, mapped to
    the module they come from (so `crate::Name` re-exported by lib.rs
    resolves to the module that defines `Name`)."""
    out = {m: {} for m in modules}
    for m, code in code_by_module.items():
        for u in PUB_USE.finditer(code):
            body = " ".join(u.group(1).split())
            g = re.match(r"(.*?)::\{(.*)\}$", body)
            if g:
                prefix, items = g.group(1), g.group(2).split(",")
            else:
                prefix, items = body.rsplit("::", 1) if "::" in body else ("", body), None
                if items is None:
                    prefix, items = prefix
                    items = [items]
            segs = [x for x in prefix.split("::") if x]
            if segs and segs[0] in ("crate", "super", "self"):
                head = segs[0]
                segs = segs[1:]
            else:
                head = "self"
            for item in items:
                item = item.strip()
                if not item or item == "*":
                    continue
                name = item.split(" as ")[-1].strip().split("::")[-1]
                path = segs + item.split(" as ")[0].strip().split("::")[:-1]
                if head == "crate":
                    base = ()
                elif head == "super":
                    base = m[:-1]
                else:
                    base = m
                target = None
                for k in range(len(path) + 1):
                    cand = base + tuple(path[:k])
                    if cand in modules:
                        target = cand
                if target is not None and target != m:
                    out[m][name] = target
    return out


def resolve(modules, here, head, segs, reexp=None):
    if head == "crate":
        base = ()
    else:
        base = here[:-1]
    rest = list(segs)
    while rest and rest[0] == "super":
        base = base[:-1]
        rest = rest[1:]
    best, used = None, 0
    for k in range(len(rest) + 1):
        cand = base + tuple(rest[:k])
        if cand in modules:
            best, used = cand, k
    # `crate::m::Name` where `m` re-exports `Name` from another module.
    if best is not None and reexp is not None and used < len(rest):
        best = reexp.get(best, {}).get(rest[used], best)
    return best


def scan(crate):
    src = crate / "src"
    files = sorted(src.rglob("*.rs"))
    modules = {module_of(src, f): f for f in files}
    edges = {m: set() for m in modules}
    codes = {m: code_of(f.read_text()) for m, f in modules.items()}
    reexp = reexports(modules, codes)
    for m, f in modules.items():
        code = codes[m]
        refs = []
        for g in GROUP.finditer(code):
            prefix = [s for s in g.group(2).split("::") if s]
            for item in g.group(3).split(","):
                item = item.strip().split(" as ")[0].strip()
                if item and item != "self":
                    refs.append((g.group(1), prefix + item.split("::")))
                elif item == "self":
                    refs.append((g.group(1), prefix))
        for p in PATH.finditer(code):
            refs.append((p.group(1), [s for s in p.group(2).split("::") if s]))
        for head, segs in refs:
            target = resolve(modules, m, head, segs, reexp)
            if target is None or target == m:
                continue
            # A module's own descendants are below it; an ancestor is only
            # a dependency through its items, which the deepest-match rule
            # already resolved to the ancestor itself.
            if target[: len(m)] == m:
                continue
            edges[m].add(target)
    return modules, edges


def cycles(edges):
    """Tarjan's strongly connected components of size > 1."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def name(m):
    return "::".join(m) or "(root)"


def self_test():
    """The check finds a planted circle (through a `use` group and through
    `super::`) and accepts a ladder and test code that imports upward."""
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        bad = pathlib.Path(t) / "bad" / "src"
        (bad / "outer").mkdir(parents=True)
        (bad / "lib.rs").write_text("mod a;\nmod b;\nmod outer;\n")
        (bad / "a.rs").write_text("use crate::{b::Thing, outer};\n")
        (bad / "b.rs").write_text("pub struct Thing;\nfn f() { crate::outer::inner::g(); }\n")
        (bad / "outer" / "mod.rs").write_text("pub mod inner;\n")
        (bad / "outer" / "inner.rs").write_text("pub fn g() { super::super::a::h(); }\n")
        _, edges = scan(bad.parent)
        found = cycles(edges)
        assert found == [[("a",), ("b",), ("outer", "inner")]], found
        good = pathlib.Path(t) / "good" / "src"
        good.mkdir(parents=True)
        (good / "lib.rs").write_text("mod low;\nmod high;\n")
        (good / "low.rs").write_text("pub struct T;\n#[cfg(test)]\nmod tests { use crate::high::f; }\n")
        (good / "high.rs").write_text("use crate::low::T;\npub fn f() -> T { T }\n")
        _, edges = scan(good.parent)
        assert cycles(edges) == [], edges
    print("module_cycles self-test: a planted circle is found, a ladder passes")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(__file__).resolve().parent.parent
    # Every package: crates/* and the packages nested one level below one
    # (crates/runtime/cli, the `looptime` command).
    crates = [pathlib.Path(a) for a in sys.argv[1:]] or sorted(
        p.parent for p in (root / "crates").glob("*/**/Cargo.toml") if "target" not in p.parts
    )
    bad = 0
    for crate in crates:
        if not (crate / "src").is_dir():
            continue
        modules, edges = scan(crate)
        found = cycles(edges)
        for comp in found:
            bad += 1
            inside = set(comp)
            links = sorted(f"{name(a)} -> {name(b)}" for a in comp for b in edges[a] if b in inside)
            print(f"{crate.name}: circle among {', '.join(name(m) for m in comp)}")
            for l in links:
                print(f"    {l}")
        if not found:
            print(f"{crate.name}: {len(modules)} modules, no circle")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
