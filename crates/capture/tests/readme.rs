//! The README's Rust example is `examples/readme.rs` (compiled by cargo test).

#[test]
fn readme_example_matches_the_compiled_example() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block: Vec<&str> = readme
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README has a ```rust block")
        .lines()
        .map(str::trim)
        .collect();
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/readme.rs"),
    )
    .unwrap();
    let region: Vec<&str> = example
        .split("// README-BEGIN\n")
        .nth(1)
        .and_then(|rest| rest.split("// README-END").next())
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        block, region,
        "README example and examples/readme.rs differ"
    );
}

/// Every shell line of the README and runtime.md that redirects into a
/// file under a home directory makes that directory first: on a fresh
/// account (`~/.local/share/bash-completion/completions` missing) the
/// redirect alone fails.
#[test]
fn every_redirect_into_a_home_directory_makes_it_first() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for doc in ["README.md", "docs/runtime.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some((_, target)) = line.split_once(" > ~/") else {
                continue;
            };
            let dir = target
                .split_whitespace()
                .next()
                .and_then(|t| t.rsplit_once('/'))
                .map_or("", |(d, _)| d);
            let made = lines[..=i]
                .iter()
                .rev()
                .take(6)
                .any(|l| l.contains("mkdir -p") && l.contains(&format!("~/{dir}")));
            assert!(
                made,
                "{doc}:{}: `> ~/{target}` without `mkdir -p ~/{dir}` first",
                i + 1
            );
        }
    }
}
