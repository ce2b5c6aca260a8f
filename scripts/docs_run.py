#!/usr/bin/env python3
"""Run the shell blocks of README.md and docs/*.md as a user would, so that
no documented recipe can rot (docs/docs-run.md says why this runner and
not trycmd, and defines the markers).

    python3 scripts/docs_run.py [--bin DIR] [--wheel DIR] [--figures] [PAGE ...]
    python3 scripts/docs_run.py --self-test

Each page is a script: its ```sh / ```bash blocks run in order, in one
scratch directory of its own (the repository's top-level entries linked
into it, so `configs/`, `examples/` and `bench/` resolve and what a block
writes stays in the scratch), each block with `bash -euo pipefail`, PATH
starting with the binaries just built. The markers, HTML comments on the
lines right before a block (invisible where the Markdown is rendered):

    <!-- docs-run: skip REASON -->     not run; listed with its reason
    <!-- docs-run: before COMMAND -->  a hidden command run before the block
    <!-- docs-run: exit 0 5 -->        the exit codes the block may end with
    <!-- docs-run: github-actions -->  a ```yaml workflow: its run: steps, in a
                                       local repository (run_workflow)
    <!-- docs-run: gitlab-ci -->       a ```yaml GitLab job: its script, there
                                       too (run_gitlab)
    <!-- docs-run: synopsis -->        a usage synopsis with placeholders: each
                                       line's flags must be in its --help
    <!-- docs-run: python -->          run the ```python block after it with
                                       python3 (the installed wheel), after
    <!-- docs-run: prelude CODE -->    hidden Python lines that complete a
                                       fragment; `[...]` in it is `["work"]`
    <!-- docs-run: postlude CODE -->   hidden Python lines run after it
    <!-- docs-run: expect TEXT -->     the block's output must contain TEXT: a
                                       figure's kind (not its value)
    <!-- docs-run: rust -->            (not this runner's) a ```rust block that
                                       crates/docs-fragments makes a cargo test
    <!-- docs-run: c -->               compile and link the ```c block after
                                       it as main's body, `prelude` lines its
                                       declarations (not run)
    <!-- docs-run: small FROM => TO --> run the block with the text FROM
                                       replaced by TO: a smaller size (it
                                       must occur; the log shows it)
    <!-- docs-run: not-run PATH REASON --> (anywhere in a section) a script
                                       its figures name that no test runs

One substitution, everywhere: `cargo build --release` (and `cargo build`)
does nothing, and `./target/release/` or `../base/target/release/` before a
binary's name is the directory of the binaries the test script built
(`--bin`); `pip install ./crates/python` installs the wheel it built
(`--wheel`) instead of building another; the scripts a block runs find
those binaries through $LOOPTIME_BIN_DIR (scripts/lib/target_dir's
release_bin) instead of building release ones. A page with more skipped than run
blocks fails unless it says why in a `docs-run: skips-explained` marker.
Exit 1 when a block fails (its page, line, output tail); the skipped blocks
are listed at the end either way.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from target_dir import target_dir  # noqa: E402  (the scripts' one rule)

sys.path.insert(0, str(ROOT / "scripts"))
from docs_figures import Ran, check_figures, run_by_tests  # noqa: E402
from docs_pages import Block, blocks, rel  # noqa: E402

# Entries of the repository a page's commands may name; the scratch holds
# links to them and nothing else of the checkout.
LINKED = ["configs", "examples", "bench", "scripts", "crates", "fixtures", "docs", "tests", "Cargo.toml",
          "Cargo.lock", "README.md"]


def substitute(text: str, bin_dir: Path, wheel: str) -> str:
    """The one documented substitution (module docs)."""
    text = re.sub(r"\bcargo build --release( -p [\w-]+)*", "true", text)
    text = re.sub(r"(?<![\w/.-])cargo build( -p [\w-]+)*(?= *(&&|;|\)|$))", "true", text, flags=re.M)
    # The docs' spelling of a release binary, matched in their text (not
    # a path this script reads: those come from target_dir()).
    text = re.sub(r"(\.\./base/|\./)?target[/]release/(?=[\w-])", f"{bin_dir}/", text)
    if wheel:
        text = re.sub(r"pip install \./crates/python", f"pip install -q --no-deps {wheel}", text)
    return text


def scratch_for(page: Path) -> Path:
    d = Path(tempfile.mkdtemp(prefix=f"docs-run-{page.stem}-"))
    for name in LINKED:
        if (ROOT / name).exists():
            os.symlink(ROOT / name, d / name)
    return d


def say_now(msg: str) -> None:
    print(msg, flush=True)


def run_page(page: Path, bin_dir: Path, wheel: str, env: dict, skipped: list, say=say_now) -> list:
    """Run `page`'s blocks in order, telling `say` what ran; returns its
    failures."""
    bs, explained = blocks(page)
    run = [b for b in bs if b.skip is None]
    for b in bs:
        if b.skip is not None:
            skipped.append((b.where(), b.skip or "(no reason given)"))
    failures = []
    if len(bs) - len(run) > len(run) and not explained:
        failures.append(f"{rel(page)}: {len(bs) - len(run)} blocks skipped and {len(run)} run, "
                        "with no docs-run: skips-explained marker saying why")
    if not run:
        return failures
    scratch = scratch_for(page)
    # A home of its own: what a block writes under ~ stays in the scratch.
    (scratch / "home").mkdir()
    home = Path.home()
    env = dict(env, HOME=str(scratch / "home"), CARGO_HOME=env.get("CARGO_HOME", str(home / ".cargo")),
               RUSTUP_HOME=env.get("RUSTUP_HOME", str(home / ".rustup")),
               PIP_CACHE_DIR=env.get("PIP_CACHE_DIR", str(home / ".cache" / "pip")))
    t0 = time.monotonic()
    try:
        for b in run:
            for pre in b.before:
                pre_out = subprocess.run(["bash", "-euo", "pipefail", "-c", substitute(pre, bin_dir, wheel)],
                                         cwd=scratch, env=env, capture_output=True, text=True)
                if pre_out.returncode != 0:
                    failures.append(f"{b.where()}: its hidden `before` command failed ({pre_out.returncode}): "
                                    f"{pre}\n{tail(pre_out)}")
                    return failures
            if b.synopsis:
                bad = check_synopsis(b, bin_dir, env)
                if bad:
                    failures += bad
                    return failures
                say(f"docs-run: {b.where()}: synopsis flags found in --help")
                continue
            if b.workflow or b.gitlab:
                tb = time.monotonic()
                failures += (run_workflow if b.workflow else run_gitlab)(b, scratch, bin_dir, wheel, env)
                if failures:
                    return failures
                say(f"docs-run: {b.where()}: the workflow ran in {time.monotonic() - tb:.1f} s")
                continue
            tb = time.monotonic()
            try:
                text = b.sized()
            except ValueError as e:
                failures.append(str(e))
                return failures
            for old, new in b.small:
                say(f"docs-run: {b.where()}: small: {old} => {new}")
            if b.c:
                problem = compile_c(b, scratch, bin_dir, env)
                if problem:
                    failures.append(problem)
                    return failures
                say(f"docs-run: {b.where()}: compiled and linked with -Wall -Werror in {time.monotonic() - tb:.1f} s")
                continue
            if b.python:
                # A fragment's elided list (`stages=[...]`) stands for the
                # program's own: one stage, `work`.
                # An exception in a thread the block starts fails it too.
                hook = ("import os as _os, threading as _t, traceback as _tb\n"
                        "_t.excepthook = lambda a: (_tb.print_exception(a.exc_type, a.exc_value, a.exc_traceback),"
                        " _os._exit(1))\n")
                script = hook + "\n".join(b.prelude) + "\n" + text.replace("[...]", '["work"]') + \
                    "\n".join(b.postlude) + "\n"
                out = subprocess.run([sys.executable, "-c", script], cwd=scratch, env=env,
                                     capture_output=True, text=True)
            else:
                script = substitute(text, bin_dir, wheel)
                out = subprocess.run(["bash", "-uo", "pipefail", "-c", allowing(script, b.exits)], cwd=scratch,
                                     env=env, capture_output=True, text=True)
            missing = [x for x in b.expect if x not in out.stdout + out.stderr]
            if out.returncode not in b.exits or missing:
                why = f"exit {out.returncode} (expected {sorted(b.exits)})" if out.returncode not in b.exits else \
                    f"its output lacks {missing}"
                failures.append(f"{b.where()}: {why}\n"
                                f"--- the block as run:\n{script}--- its output's end:\n{tail(out)}")
                return failures  # later blocks may need what this one made
            say(f"docs-run: {b.where()}: ran in {time.monotonic() - tb:.1f} s")
        say(f"docs-run: {rel(page)}: {len(run)} blocks ran in {time.monotonic() - t0:.0f} s"
            f"{f', {len(bs) - len(run)} skipped' if len(bs) > len(run) else ''}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return failures


def run_pages(pages: list, jobs: int, bin_dir: Path, wheel: str, env: dict, skipped: list) -> list:
    """Run the pages, `jobs` at once. Each page is its own script in its own
    scratch; with more than one job a page's lines are printed together
    when it ends. Failures and skips come back in page order."""
    if jobs <= 1:
        return [f for page in pages for f in run_page(page, bin_dir, wheel, env, skipped)]
    lock = threading.Lock()

    def one(page: Path) -> tuple:
        lines: list = []
        skips: list = []
        fails = run_page(page, bin_dir, wheel, env, skips, lines.append)
        with lock:
            print("\n".join(lines), flush=True)
        return fails, skips

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, pages))
    for fails, skips in results:
        skipped += skips
    return [f for fails, _ in results for f in fails]


def compile_c(b: Block, scratch: Path, bin_dir: Path, env: dict) -> str:
    """A ```c fragment as `main`'s body after the headers and its
    `prelude` declarations (scripts/docs_c_block.py), compiled with
    `-Wall -Werror` against the library's header and linked with the
    library the test command built. Not run: its context is stand-ins.
    Returns the problem, or ""."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from docs_c_block import program

    if not (bin_dir / "liblooptime.a").exists():
        return f"{b.where()}: {bin_dir / 'liblooptime.a'} is missing: build the C library (cargo build -p looptime-capture-c)"
    src = scratch / f"docs-c-{b.line}.c"
    src.write_text(program(b.text, b.prelude))
    out = subprocess.run(["cc", "-Wall", "-Werror", "-o", str(scratch / f"docs-c-{b.line}"), str(src),
                          f"-I{ROOT / 'crates' / 'capture-c' / 'include'}", str(bin_dir / "liblooptime.a"),
                          "-lpthread", "-ldl", "-lm", "-lrt", "-lutil", "-lgcc_s"],
                         cwd=scratch, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return f"{b.where()}: the C fragment does not compile with -Wall -Werror\n--- as compiled:\n" \
            f"{src.read_text()}--- the compiler:\n{tail(out)}"
    return ""


def allowing(script: str, exits: set) -> str:
    """`script` as `bash -e` would run it, except that a command ending
    with one of `exits` (a gate's 5) does not stop it: the next command
    runs, as in a user's shell, and the block ends with that code unless a
    later command fails otherwise. (Under plain `-e`, a first gate's 5
    would hide whether the commands after it run at all.)"""
    codes = " ".join(str(x) for x in sorted(exits))
    return (f"set -E\n__worst=0\ntrap '__rc=$?; case \" {codes} \" in *\" $__rc \"*) __worst=$__rc ;; *) exit $__rc ;; esac' ERR\n"
            f"{script}\nexit $__worst\n")


PROGRAMS = ("looptime", "analyze_control_timing")


def check_synopsis(b: Block, bin_dir: Path, env: dict) -> list:
    """Each line of a synopsis names a program of ours, maybe a subcommand,
    and flags: every flag must be one its `--help` lists."""
    problems = []
    helps: dict = {}
    for k, line in enumerate(b.text.splitlines()):
        code = line.split("#", 1)[0].strip()
        if not code or code.startswith(("[", "|")) or not code.split()[0].split("/")[-1] in PROGRAMS:
            if code and not code.startswith(("[", "|")):
                problems.append(f"{b.where()}+{k + 1}: a synopsis line names no program of ours: {code}")
            continue
        toks = code.split()
        prog = bin_dir / toks[0].split("/")[-1]
        cmd = [str(prog)]
        if len(toks) > 1 and re.fullmatch(r"[a-z][a-z-]*", toks[1]):
            cmd.append(toks[1])
        key = tuple(cmd)
        if key not in helps:
            out = subprocess.run([*cmd, "--help"], env=env, capture_output=True, text=True)
            helps[key] = out.stdout if out.returncode == 0 else None
        if helps[key] is None:
            problems.append(f"{b.where()}+{k + 1}: `{' '.join(toks[:len(cmd)])} --help` failed: {code}")
            continue
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", code):
            if not re.search(re.escape(flag) + r"(?![\w-])", helps[key]):
                problems.append(f"{b.where()}+{k + 1}: {flag} is not an option of `{' '.join(toks[:len(cmd)])}`")
    return problems


def ci_repo(parent: Path, env: dict) -> tuple:
    """A local git repository `parent/repo` as a CI job checks it out: a
    base commit (the repository's configs/) and a change commit after it
    that edits configs/ci.toml (rate_hz 100 -> 86: a recipe that records
    the base with the base's config shows it on B, `run.rate_hz` among the
    settings differing); returns it and the base's SHA. A job's `../base` worktree lands in
    `parent`, so two jobs of one page do not meet."""
    repo = parent / "repo"
    repo.mkdir(parents=True)
    shutil.copytree(ROOT / "configs", repo / "configs")
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True,  # noqa: E731
                                    text=True, env=dict(env, GIT_AUTHOR_NAME="docs-run", GIT_AUTHOR_EMAIL="docs@run",
                                                        GIT_COMMITTER_NAME="docs-run",
                                                        GIT_COMMITTER_EMAIL="docs@run")).stdout.strip()
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    base = git("rev-parse", "HEAD")
    (repo / "CHANGE").write_text("the change under test\n")
    ci = repo / "configs" / "ci.toml"
    text = ci.read_text()
    assert "rate_hz = 100.0" in text, "configs/ci.toml no longer says rate_hz = 100.0; docs_run.ci_repo edits it"
    ci.write_text(text.replace("rate_hz = 100.0", "rate_hz = 86.0"))
    git("add", "-A")
    git("commit", "-q", "-m", "change")
    return repo, base


def run_gitlab(b: Block, scratch: Path, bin_dir: Path, wheel: str, env: dict) -> list:
    """A GitLab CI job as its shell runner takes it, in a local repository
    as `ci_repo` makes it: its `script:` lines in one shell, in order
    (a failing line ends the job; the gate's, with `--fail-on`, may end
    0 or 5), `$CI_MERGE_REQUEST_DIFF_BASE_SHA` the base commit; then its
    artifacts (`paths`, `reports`) must exist."""
    import yaml

    jobs = [v for v in yaml.safe_load(b.text).values() if isinstance(v, dict) and "script" in v]
    if len(jobs) != 1:
        return [f"{b.where()}: a GitLab CI block must hold one job with a `script:`, not {len(jobs)}"]
    job = jobs[0]
    repo, base = ci_repo(scratch / "gitlab", env)
    script = substitute("\n".join(job["script"]) + "\n", bin_dir, wheel)
    allowed = {0, 5} if "--fail-on" in script else {0}
    out = subprocess.run(["bash", "-uo", "pipefail", "-c", allowing(script, allowed)], cwd=repo,
                         env=dict(env, CI_MERGE_REQUEST_DIFF_BASE_SHA=base), capture_output=True, text=True)
    if out.returncode not in allowed:
        return [f"{b.where()}: the job's script ended {out.returncode}\n--- as run:\n{script}--- its output's end:\n"
                f"{tail(out)}"]
    art = job.get("artifacts", {})
    paths = [*art.get("paths", []), *art.get("reports", {}).values()]
    missing = [x for x in paths if not (repo / x).exists()]
    if missing:
        return [f"{b.where()}: the job's artifacts {missing} were not written"]
    return change_seen(b, repo / "summary.md")


def change_seen(b: Block, summary: Path) -> list:
    """The change commit's config edit shows on B: the summary names
    `run.rate_hz` among the settings differing (a recipe that records both
    sides with the change's config compares 86 Hz with 86 Hz)."""
    if summary.exists() and "`run.rate_hz`" in summary.read_text():
        return []
    return [f"{b.where()}: the summary does not name `run.rate_hz` among the settings differing: the change "
            "commit's configs/ci.toml (rate_hz 100 -> 86) did not reach B, or the base side was recorded with it"]


def run_workflow(b: Block, scratch: Path, bin_dir: Path, wheel: str, env: dict) -> list:
    """A GitHub Actions workflow's steps as its runner would take them, in
    a local repository whose last commit is the change and whose previous
    one the base (the repository's configs/ in both): `uses:` steps are
    the checkout (done) and the artifact upload (its paths must exist),
    `run:` steps run in order with bash, the base SHA substituted, with
    `$GITHUB_STEP_SUMMARY` a file. A step may end 0, or 5 when it runs a
    gate (`--fail-on`); one with `if: always()` runs after a failure too."""
    import yaml

    wf = yaml.safe_load(b.text)
    (job,) = wf["jobs"].values()
    repo, base = ci_repo(scratch / "github", env)
    summary = scratch / "step_summary.md"
    wenv = dict(env, GITHUB_STEP_SUMMARY=str(summary))
    failed = None
    for step in job["steps"]:
        name = step.get("name", step.get("uses", "?"))
        if failed and step.get("if") != "always()":
            continue
        if "uses" in step:
            if step["uses"].startswith("actions/upload-artifact"):
                paths = step.get("with", {}).get("path", "").split("\n")
                missing = [p for p in paths if p and not (repo / p).exists()]
                if missing:
                    return [f"{b.where()}: step `{name}`: the artifact's {missing} were not written"]
            continue
        script = substitute(step["run"].replace("${{ github.event.pull_request.base.sha }}", base), bin_dir, wheel)
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=repo, env=wenv, capture_output=True,
                             text=True)
        allowed = {0, 5} if "--fail-on" in script else {0}
        if out.returncode not in allowed:
            failed = f"{b.where()}: step `{name}`: exit {out.returncode}\n--- as run:\n{script}--- its output's end:\n{tail(out)}"
    if failed:
        return [failed]
    if not summary.exists() or not summary.read_text().strip():
        return [f"{b.where()}: the workflow wrote no step summary"]
    return change_seen(b, summary)


def tail(out: subprocess.CompletedProcess, n: int = 25) -> str:
    text = (out.stdout + out.stderr).splitlines()
    return "\n".join(text[-n:]) + "\n"


def self_test() -> int:
    """The markers' parsing, the small sizes and the figures' check, on a
    page written here."""
    page = Path(tempfile.mkdtemp()) / "page.md"
    page.write_text("# Bench (2026-12-07, idle)\n\nOn this machine: 3 ns (`bash bench/fleet.sh`, `bench/nope.sh`).\n\n"
                    "<!-- docs-run: small RUNS=9 => RUNS=1 -->\n<!-- docs-run: small N=5 => N=2 -->\n```sh\n"
                    "RUNS=9 N=5 bash bench/fleet.sh\n```\n\n<!-- docs-run: small ABSENT => X -->\n```sh\ntrue\n```\n")
    try:
        (good, stale), _ = blocks(page)
        assert good.sized() == "RUNS=1 N=2 bash bench/fleet.sh\n", good.sized()
        try:
            stale.sized()
            raise AssertionError("a small marker that matches nothing was taken")
        except ValueError as e:
            assert "matches nothing" in str(e)
        not_run: list = []
        problems = check_figures(page, Ran({"bench/fleet.sh"}, set()), not_run)
        assert any("`bench/nope.sh`, which does not exist" in x for x in problems), problems
        assert not any("run by no test" in x for x in problems), problems
        problems = check_figures(page, Ran(set(), set()), not_run)
        assert sum("`bench/fleet.sh` is run by no test" in x for x in problems) == 1, problems
        page.write_text(page.read_text().replace("# Bench (2026-12-07, idle)\n", "# Bench (2026-12-07, idle)\n\n"
                                                 "<!-- docs-run: not-run bench/fleet.sh minutes -->\n"))
        problems = check_figures(page, Ran(set(), set()), not_run)
        assert not any("run by no test" in x for x in problems) and not_run[-1][1] == "bench/fleet.sh: minutes", \
            (problems, not_run)
        # An `expect` the output lacks fails the block; one it has passes.
        page.write_text("<!-- docs-run: expect hello -->\n```sh\necho hello\n```\n\n"
                        "<!-- docs-run: expect bye -->\n```sh\necho hello\n```\n")
        fails = run_page(page, ROOT, "", dict(os.environ), [], lambda _: None)
        assert len(fails) == 1 and "page.md:7: its output lacks ['bye']" in fails[0], fails
        ran = run_by_tests()
        assert "bench/fleet_measure.py" in ran.scripts  # test.sh runs bench/fleet.sh, which runs it
        assert {"looptime watch", "analyze_control_timing fleet"} <= ran.commands, ran.commands
        bad = "frob" + "nicate"  # spelled so that this file (which the closure reads) does not run it
        page.write_text(f"# Probe (2026-12-07, idle)\n\nOn this machine: 3 µs (`looptime probe`, `looptime {bad}`).\n")
        problems = check_figures(page, ran, not_run)
        assert [x for x in problems if "run by no test" in x] == [
            f"{rel(page)}:3: its figure's command `looptime {bad}` is run by no test (run it at a small size in a "
            "block, or mark `not-run PATH REASON` in the section)"], problems
        # A gate's 5 lets the next command run; any other failure stops the block.
        sh = lambda s, ex: subprocess.run(["bash", "-uo", "pipefail", "-c", allowing(s, ex)],  # noqa: E731
                                          capture_output=True, text=True)
        five = sh("(exit 5)\necho after\n", {0, 5})
        assert (five.returncode, five.stdout) == (5, "after\n"), five
        two = sh("f() { (exit 2); echo in; }\nf\necho after\n", {0, 5})
        assert (two.returncode, two.stdout) == (2, ""), two
    finally:
        shutil.rmtree(page.parent)
    print("docs-run self-test: ok")
    return 0


def main() -> int:
    if "--self-test" in sys.argv:
        return self_test()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", type=Path, default=target_dir() / "debug", help="the binaries (default: debug build)")
    p.add_argument("--wheel", default="", help="the looptime wheel pip installs for `pip install ./crates/python`")
    p.add_argument("--figures", action="store_true",
                   help="also check every page's figures measured here name their command and host state")
    p.add_argument("--jobs", type=int, default=1, help="pages run at once (each in its own scratch; default 1)")
    p.add_argument("pages", nargs="*", type=Path, help="pages (default: README.md and docs/*.md)")
    a = p.parse_args()
    bin_dir = a.bin.resolve()
    wheel = str(Path(a.wheel).resolve()) if a.wheel else ""
    for name in ("looptime", "analyze_control_timing"):
        if not (bin_dir / name).exists():
            print(f"docs-run: {bin_dir / name} is missing: build the workspace first (cargo build)", file=sys.stderr)
            return 2
    pages = [x.resolve() for x in a.pages] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    # cargo (a CMake build of the C library runs it) builds into the one
    # target directory, not a fresh one under the scratch's links.
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", LOOPTIME_DOCS_RUN="1",
               LOOPTIME_DOCS_WHEEL=wheel, LOOPTIME_BIN_DIR=str(bin_dir), CARGO_TARGET_DIR=str(target_dir()))
    skipped: list = []
    failures: list = []
    not_run: list = []
    if a.figures:
        try:
            ran = run_by_tests()
        except ValueError as e:
            ran, failures = Ran(set(), set()), [str(e)]
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
            failures += check_figures(page, ran, not_run)
    if wheel:
        # Once, before the pages: their `pip install ./crates/python` then
        # finds it installed, so two pages at once never reinstall it
        # under each other.
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                        "--force-reinstall", wheel], check=True)
    failures += run_pages(pages, a.jobs, bin_dir, wheel, env, skipped)
    print(f"\ndocs-run: {len(skipped)} blocks skipped:")
    for where, why in skipped:
        print(f"  {where}: {why}")
    if a.figures:
        print(f"docs-run: {len(not_run)} figures whose command no test runs (not-run):")
        for where, why in not_run:
            print(f"  {where}: {why}")
    if failures:
        print(f"\ndocs-run: {len(failures)} failures:", file=sys.stderr)
        for f in failures:
            print(f"\n{f}", file=sys.stderr)
        return 1
    print("docs-run: every block that runs ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
