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
