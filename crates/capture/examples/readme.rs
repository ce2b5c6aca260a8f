//! The README's recorder example, compiled by `cargo test`; a test keeps the
//! README's code block equal to the region between the markers.

use std::path::Path;

fn main() -> Result<(), looptime_capture::CaptureError> {
    let tmp = std::env::temp_dir().join(format!("looptime-readme-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|source| looptime_capture::CaptureError::Write {
        path: tmp.clone(),
        source,
    })?;
    let dir: &Path = &tmp;
    record(dir)?;
    println!("wrote {}", dir.display());
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(())
}

// Kept as written in the README (rustfmt would re-align the comments).
#[rustfmt::skip]
fn record(dir: &Path) -> Result<(), looptime_capture::CaptureError> {
    // README-BEGIN
    let mut b = looptime_capture::RecorderBuilder::new();
    let running = b.phase("running")?;
    let sense = b.stage("sense")?;
    let mut rec = b.build()?;                  // all memory taken here
    rec.begin_cycle(running, looptime_capture::Release::NONE);
    { let _s = rec.span(sense); /* work */ }   // closes on drop
    rec.end_cycle();
    rec.finish(dir, looptime_capture::CaptureStatus::Complete)?;
    // README-END
    Ok(())
}
