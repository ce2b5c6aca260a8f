//! Embeds a hash of the workspace's source (every crate's `src/`, `Cargo.toml`
//! files and `Cargo.lock`) as `LOOPTIME_SOURCE_HASH`, so a manifest says
//! which code produced an episode. FNV-1a 64 over sorted (path, contents):
//! an identity check, not a cryptographic one.

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
    for krate in ["capture", "runtime", "analyze"] {
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
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f);
        eat(rel.to_string_lossy().as_bytes());
        eat(&fs::read(f).unwrap_or_default());
    }
    println!("cargo:rustc-env=LOOPTIME_SOURCE_HASH=fnv1a64:{h:016x}");
}
