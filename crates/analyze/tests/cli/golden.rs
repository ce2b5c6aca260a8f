//! The `--json` report of every committed fixture, byte for byte. A change
//! here is a change of output: regenerate the file only on purpose (see
//! fixtures/golden/README.md) and say why in the commit.

use super::*;

fn golden(name: &str) {
    // Run from fixtures/v1 with a relative episode path, so the report's
    // `episode` field does not depend on where the repository is checked out.
    let _shared = SERVE.read().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_analyze_control_timing"))
        .current_dir(fixture("v1"))
        .args(["--episode", name, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = std::fs::read_to_string(fixture(&format!("golden/{name}.report.json"))).unwrap();
    let got = String::from_utf8(out.stdout).unwrap();
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .map_or(got.lines().count().min(want.lines().count()), |i| i);
        panic!(
            "{name}: --json differs from fixtures/golden/{name}.report.json at line {}:\n  got:  {}\n  want: {}",
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
