//! Writes `$OUT_DIR/fragments.rs`: a `#[test]` for every ```` ```rust ````
//! block of README.md and docs/*.md marked `<!-- docs-run: rust -->`, its
//! body the block's `<!-- docs-run: prelude CODE -->` lines, the block,
//! and its `<!-- docs-run: postlude CODE -->` lines, in a function
//! returning `Result` so that `?` works as in a program. A page without such blocks gives no test; a marked block that
//! is not Rust is an error naming its page and line.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    println!("cargo:rerun-if-changed={}", root.join("docs").display());
    let mut out = String::new();
    for page in &pages {
        println!("cargo:rerun-if-changed={}", page.display());
        let text = fs::read_to_string(page).expect("a page is readable");
        let name = page
            .strip_prefix(&root)
            .unwrap_or(page)
            .display()
            .to_string();
        for Fragment {
            line,
            prelude,
            body,
            postlude,
        } in fragments(&name, &text)
        {
            let ident: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            writeln!(
                out,
                "/// {name}:{line}\n#[test]\n#[allow(unused_imports, unused_variables, unused_mut)]\n\
                 fn {ident}_line_{line}() -> Result<(), Box<dyn std::error::Error>> {{\n{prelude}\n{body}\n{postlude}    Ok(())\n}}\n"
            )
            .expect("write to a String");
        }
    }
    let dest = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("fragments.rs");
    fs::write(dest, out).expect("OUT_DIR is writable");
}

/// A marked Rust block: its first line, its hidden lines before and after,
/// and its text, each line indented.
struct Fragment {
    line: usize,
    prelude: String,
    body: String,
    postlude: String,
}

/// The marked Rust blocks of a page.
fn fragments(page: &str, text: &str) -> Vec<Fragment> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut marked = false;
    let mut prelude = String::new();
    let mut postlude = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if let Some(marker) = line
            .strip_prefix("<!-- docs-run:")
            .and_then(|m| m.strip_suffix("-->"))
        {
            let marker = marker.trim();
            if marker == "rust" {
                marked = true;
            } else if let Some(code) = marker.strip_prefix("prelude ") {
                prelude.push_str(&format!("    {}\n", code.trim()));
            } else if let Some(code) = marker.strip_prefix("postlude ") {
                postlude.push_str(&format!("    {}\n", code.trim()));
            }
        } else if let Some(lang) = line.strip_prefix("```") {
            let start = i + 2;
            let mut body = String::new();
            i += 1;
            while i < lines.len() && !lines[i].starts_with("```") {
                body.push_str("    ");
                body.push_str(lines[i]);
                body.push('\n');
                i += 1;
            }
            if marked {
                assert!(
                    lang == "rust",
                    "{page}:{start}: a `docs-run: rust` marker before a ```{lang} block"
                );
                found.push(Fragment {
                    line: start,
                    prelude: std::mem::take(&mut prelude),
                    body,
                    postlude: std::mem::take(&mut postlude),
                });
            }
            marked = false;
            prelude.clear();
            postlude.clear();
        } else if !line.is_empty() {
            marked = false;
            prelude.clear();
            postlude.clear();
        }
        i += 1;
    }
    found
}
