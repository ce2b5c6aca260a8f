//! The Rust fragments the project's pages show (README.md and docs/*.md),
//! compiled and run by `cargo test`: `build.rs` turns every ```` ```rust ````
//! block marked `<!-- docs-run: rust -->` into a test whose body is the
//! block after its hidden `<!-- docs-run: prelude ... -->` lines (what the
//! fragment names and does not define), as rustdoc's `#` lines do for API
//! docs. docs/docs-run.md defines the markers. Nothing here is published.
