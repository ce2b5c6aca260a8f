//! The `--json` and text reports of every committed fixture, and their
//! comparison, byte for byte. A change
//! here is a change of output: regenerate the file only on purpose (see
//! fixtures/golden/README.md) and say why in the commit.

use super::*;

fn golden(name: &str) {
    check(
        &["--episode", name, "--json"],
        &format!("{name}.report.json"),
    );
    check(&["--episode", name], &format!("{name}.report.txt"));
}

fn check(args: &[&str], file: &str) {
    // Run from fixtures/v1 with a relative episode path, so the report's
    // `episode` field does not depend on where the repository is checked out.
    let r = analyze_in(&fixture("v1"), args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let want = std::fs::read_to_string(fixture(&format!("golden/{file}"))).unwrap();
    let name = file;
    let got = r.stdout;
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .map_or(got.lines().count().min(want.lines().count()), |i| i);
        panic!(
            "{args:?} differs from fixtures/golden/{name} at line {}:\n  got:  {}\n  want: {}",
            line + 1,
            got.lines().nth(line).unwrap_or("<end>"),
            want.lines().nth(line).unwrap_or("<end>")
        );
    }
}

#[test]
fn serve_episode_report_is_unchanged() {
    golden("serve-episode");
}

#[test]
fn synthetic_basic_report_is_unchanged() {
    golden("synthetic-basic");
}

#[test]
fn comparison_of_the_two_fixtures_is_unchanged() {
    let ab = ["compare", "serve-episode", "synthetic-basic"];
    check(&[&ab[..], &["--json"]].concat(), "compare.json");
    check(&ab, "compare.txt");
}

/// The Markdown summaries (`--markdown`), byte for byte: the report's
/// band and the comparison's headline, warnings and what moved.
#[test]
fn the_markdown_summaries_are_unchanged() {
    for (args, file) in [
        (
            &["--episode", "serve-episode", "--fail-on", "fail"][..],
            "serve-episode.report.md",
        ),
        (
            &[
                "compare",
                "serve-episode",
                "synthetic-basic",
                "--fail-on",
                "worse",
            ][..],
            "compare.md",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let md = tmp.path().join("summary.md");
        let mut a = args.to_vec();
        a.extend(["--markdown", md.to_str().unwrap()]);
        let r = analyze_in(&fixture("v1"), &a);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let got = std::fs::read_to_string(&md).unwrap();
        let want = std::fs::read_to_string(fixture(&format!("golden/{file}"))).unwrap();
        assert_eq!(got, want, "{args:?} differs from fixtures/golden/{file}");
    }
}
