//! A serde error on one JSONL line, restated for a person: the field path
//! (`spans[2].wall_ns`), what was wrong, and the column, instead of serde's
//! "at line 1 column 53" of a single line. One definition for the header
//! (capture's reader) and the cycle lines (the analyzer's parser).
//!
//! The path costs a second parse, so it is made on the error path only.

use serde::de::DeserializeOwned;

/// `e`, an error of parsing `line` as a `T`, as "field `PATH`: WHAT (column
/// N)", or "not valid JSON at column N: WHAT" for a syntax error.
///
/// ```
/// use looptime_capture::json_error::describe;
/// #[derive(serde::Deserialize, Debug)]
/// struct Point { x: i32 }
/// let line = br#"{"x": "two"}"#;
/// let e = serde_json::from_slice::<Point>(line).unwrap_err();
/// assert_eq!(
///     describe::<Point>(line, &e),
///     "field `x`: invalid type: string \"two\", expected i32 (column 11)"
/// );
/// ```
pub fn describe<T: DeserializeOwned>(line: &[u8], e: &serde_json::Error) -> String {
    let mut de = serde_json::Deserializer::from_slice(line);
    let inner = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Err(pe) => {
            let path = pe.path().to_string();
            let msg = pe.into_inner().to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
            if path.is_empty() || path == "." {
                msg
            } else {
                format!("field `{path}`: {msg}")
            }
        }
        Ok(_) => e.to_string(),
    };
    match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            format!("not valid JSON at column {}: {inner}", e.column())
        }
        _ => format!("{inner} (column {})", e.column()),
    }
}
