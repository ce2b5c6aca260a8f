//! Embeds a hash of the workspace's source (the capture, runtime, runtime/cli
//! and analyze crates' `src/` and `Cargo.toml`, the root `Cargo.toml` and
//! `Cargo.lock`) as `LOOPTIME_SOURCE_HASH`, so a manifest says
//! which code produced an episode: SHA-256 over the sorted files, each as
//! its repository-relative path, a NUL byte, then its contents (written
//! `sha256:<hex>`; docs/runtime.md shows how to recompute it).

use std::fs;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs" || x == "toml") {
            out.push(p);
        }
    }
}

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest_dir.join("../..");
    let mut files = Vec::new();
    for krate in ["capture", "runtime", "runtime/cli", "analyze"] {
        let base = root.join("crates").join(krate);
        collect(&base.join("src"), &mut files);
        files.push(base.join("Cargo.toml"));
        println!("cargo:rerun-if-changed={}", base.join("src").display());
        println!(
            "cargo:rerun-if-changed={}",
            base.join("Cargo.toml").display()
        );
    }
    files.push(root.join("Cargo.toml"));
    files.push(root.join("Cargo.lock"));
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    files.sort();
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f);
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0u8]);
        h.update(fs::read(f).unwrap_or_default());
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=LOOPTIME_SOURCE_HASH=sha256:{hex}");
}
