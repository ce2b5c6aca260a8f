//! One analysed episode: the evidence, its per-cycle columns, and the
//! report, cross-checked against the saved summary. This is the layer above
//! the metrics and the cross-check; metrics never call the cross-check.
//!
//! Every view of an episode takes an [`Analysis`]: the text, JSON and HTML
//! reports, the plots, the Chrome trace, the HdrHistogram log, the Parquet
//! dataset, `compare` and `fleet`. The cycle columns are computed here,
//! once per episode and once per background thread, and nowhere else
//! (`metrics::columns::cycle_columns` is reachable only from this module;
//! a test counts its calls across every view).

use crate::error::Result;
use crate::evidence::Evidence;
use crate::metrics::{self, CycleColumns, Report};

/// An episode, loaded and analysed.
#[derive(Debug)]
pub struct Analysis {
    /// The evidence as loaded.
    pub evidence: Evidence,
    /// The report, cross-checked.
    pub report: Report,
    /// The control thread's cycle columns.
    columns: CycleColumns,
    /// Each background thread's, in `evidence.threads` order.
    thread_columns: Vec<CycleColumns>,
}

impl Analysis {
    /// Analyse `evidence`: its cycle columns, its background threads'
    /// columns, every metric, then the cross-check of the saved summary.
    ///
    /// # Errors
    /// Only on an internal aggregation failure.
    pub fn new(evidence: Evidence) -> Result<Analysis> {
        let s = crate::profile::step("analysis: cycle columns (once)");
        let columns = metrics::columns::cycle_columns(&evidence);
        let thread_columns: Vec<CycleColumns> = evidence
            .threads
            .iter()
            .map(metrics::columns::cycle_columns)
            .collect();
        drop(s);
        let (mut report, tables) = metrics::compute(&evidence, &columns, &thread_columns)?;
        let _s = crate::profile::step("analysis: cross-check of the summary");
        let view = crate::crosscheck::summary_view(&evidence, &columns, &tables);
        report.crosscheck = crate::crosscheck::check(
            evidence.summary.as_ref(),
            &report.capture,
            &report.segments,
            &view,
        );
        Ok(Analysis {
            evidence,
            report,
            columns,
            thread_columns,
        })
    }

    /// The control thread's per-cycle columns (period, work, overshoot,
    /// lag, segment, phase), row for row with `evidence.cycles`.
    pub fn columns(&self) -> &CycleColumns {
        &self.columns
    }

    /// Judge the summary cards again by `t` (the defaults are applied when
    /// the analysis is made): the states change, no figure does.
    pub fn judge(&mut self, t: &metrics::Thresholds) {
        let r = &mut self.report;
        r.summary = metrics::summary::cards(
            &r.phases,
            r.pace,
            r.late_cycles.as_ref(),
            r.data_age.as_ref(),
            r.input_paced.as_ref(),
            r.budget.as_ref(),
            t,
        );
        r.thresholds = *t;
    }

    /// Each background thread's evidence with its cycle columns.
    pub fn threads(&self) -> impl Iterator<Item = (&Evidence, &CycleColumns)> {
        self.evidence.threads.iter().zip(&self.thread_columns)
    }
}

/// Analyse a loaded episode: [`Analysis::new`], under the name the library
/// has always exported.
///
/// # Errors
/// Only on an internal aggregation failure.
pub fn analyze(evidence: Evidence) -> Result<Analysis> {
    Analysis::new(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{load_episode, LoadOptions};

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(name)
    }

    /// How many times the columns of `a`'s evidence and of each of its
    /// threads' were computed (counted per evidence, on any thread).
    fn computed(a: &Analysis) -> Vec<usize> {
        let n = |e: &Evidence| {
            e.columns_computed
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        std::iter::once(n(&a.evidence))
            .chain(a.evidence.threads.iter().map(n))
            .collect()
    }

    /// The fixture merged by `--into` into a recording of one message (the
    /// fixture has no wall-clock anchor: one is added to a copy of its
    /// header); the analysis it used.
    /// A copy of fixture `name` in a temporary directory, to damage.
    fn copy_of(name: &str) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(fixture(name)).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, tmp.path().join(p.file_name().unwrap())).unwrap();
        }
        tmp
    }

    fn merged_into_a_recording() -> Analysis {
        let zstd = crate::export::mcap::Compression::Zstd;
        // --into's view, over a recording of one message (the fixture has
        // no wall-clock anchor: one is added to a copy of its header).
        let mut recording = std::io::Cursor::new(Vec::new());
        {
            let mut w = mcap::Writer::new(&mut recording).unwrap();
            let s = w.add_schema("x", "jsonschema", b"{}").unwrap();
            let c = w
                .add_channel(s, "/robot/x", "json", &Default::default())
                .unwrap();
            let h = mcap::records::MessageHeader {
                channel_id: c,
                sequence: 0,
                log_time: 1,
                publish_time: 1,
            };
            w.write_to_known_channel(&h, b"{}").unwrap();
            w.finish().unwrap();
        }
        recording.set_position(0);
        let mut anchored = Analysis::new(
            load_episode(&fixture("v2/serve-episode"), LoadOptions::default()).unwrap(),
        )
        .unwrap();
        anchored.evidence.header.wall_clock = Some(looptime_capture::WallClock {
            start: looptime_capture::WallClockAnchor {
                realtime_ns: 1,
                monotonic_ns: 1,
                uncertainty_ns: 0,
            },
            end: None,
        });
        let merged = crate::export::mcap_into::write_into(
            &anchored,
            recording,
            "r.mcap".as_ref(),
            true,
            zstd,
            std::io::Cursor::new(Vec::new()),
            "m.mcap".as_ref(),
        );
        assert!(merged.is_ok(), "{merged:?}");
        anchored
    }

    #[test]
    fn every_view_reads_the_columns_computed_once_per_thread() {
        // An episode with background threads (schema 2), so that threads'
        // columns count too.
        let ev = load_episode(&fixture("v2/serve-episode"), LoadOptions::default()).unwrap();
        let threads = ev.threads.len();
        assert!(threads > 0, "the fixture has background threads");
        let a = Analysis::new(ev).unwrap();
        let once = vec![1; 1 + threads];
        assert_eq!(computed(&a), once);
        // A second analysis of the same files counts on its own evidence:
        // the count is per analysis, not per process or thread.
        let b = Analysis::new(
            load_episode(&fixture("v2/serve-episode"), LoadOptions::default()).unwrap(),
        )
        .unwrap();
        assert_eq!(computed(&b), once);

        // Every view of the episode, none of which may compute them again.
        let _ = crate::render::text::render(&a.report);
        let _ = crate::render::json(&a.report);
        let plots = crate::render::plots::episode_plots(&a, None);
        let _ = crate::render::html::report_page(&a.report, &plots.unwrap_or_default());
        let mut trace = Vec::new();
        crate::export::chrome::write(&a, &mut trace, "t.json".as_ref()).unwrap();
        crate::export::hdr_log(&a).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let phases = crate::fleet::table::table(&crate::fleet::rows(&a)).unwrap();
        crate::export::parquet::write_episode(tmp.path(), &a, phases).unwrap();
        let mut mcap = std::io::Cursor::new(Vec::new());
        let zstd = crate::export::mcap::Compression::Zstd;
        crate::export::mcap::write(&a, &mut mcap, "t.mcap".as_ref(), zstd).unwrap();
        // --into's view: its own analysis, whose columns also count once.
        let anchored = merged_into_a_recording();
        assert_eq!(computed(&anchored), once);
        let side = [&a];
        let c = crate::compare::compare(&side, &side, crate::compare::BootstrapConfig::default());
        let _ = crate::render::plots::compare_plots(&side, &side, &c, None);
        // fleet's rows are made on worker threads: make them on one here,
        // where a thread-local count would miss a recomputation.
        std::thread::scope(|s| {
            s.spawn(|| crate::fleet::rows(&a)).join().unwrap();
        });
        assert_eq!(
            computed(&a),
            once,
            "a view computed the cycle columns again"
        );
    }

    #[test]
    fn blocks_of_any_size_give_the_same_analysis() {
        // The loader parses a block on all cores while the previous block
        // is appended and the next one read. With 1 KiB and 3 KiB blocks
        // (most lines cross a block boundary; the header and some cycle
        // lines are longer than a block), the evidence and every report
        // figure must be what one 16 MB block gives.
        let whole = |dir: &str| {
            let a = Analysis::new(load_episode(&fixture(dir), LoadOptions::default()).unwrap())
                .unwrap();
            (a.evidence.cycles.clone(), crate::render::json(&a.report))
        };
        for dir in ["v1/serve-episode", "v2/serve-episode"] {
            let (cycles, report) = whole(dir);
            for block in [1 << 10, 3 << 10] {
                crate::evidence::TEST_BLOCK_BYTES.with(|b| b.set(block));
                let (c, r) = whole(dir);
                crate::evidence::TEST_BLOCK_BYTES.with(|b| b.set(0));
                assert_eq!(c.len(), cycles.len(), "{dir}, {block}-byte blocks");
                assert!(
                    c.iter().zip(&cycles).all(|(x, y)| x.line == y.line
                        && x.cycle == y.cycle
                        && x.span_row == y.span_row),
                    "{dir}, {block}-byte blocks"
                );
                assert_eq!(r, report, "{dir}, {block}-byte blocks");
            }
        }
    }

    #[test]
    fn a_bad_line_is_named_by_the_same_number_in_blocks_of_any_size() {
        let tmp = copy_of("v1/serve-episode");
        let jsonl = tmp.path().join("control_timing.jsonl");
        let text = std::fs::read_to_string(&jsonl).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        let n = lines.len();
        lines[n - 7] = "{\"type\":\"cycle\",\"cycle\":\"seven\"}";
        std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
        let err = || {
            load_episode(tmp.path(), LoadOptions::default())
                .unwrap_err()
                .to_string()
        };
        let whole = err();
        // The damaged line is line n - 6 (1-based: the header is line 1).
        assert!(
            whole.contains(&format!("control_timing.jsonl:{}:", n - 6)),
            "{whole}"
        );
        for block in [1 << 10, 3 << 10] {
            crate::evidence::TEST_BLOCK_BYTES.with(|b| b.set(block));
            let e = err();
            crate::evidence::TEST_BLOCK_BYTES.with(|b| b.set(0));
            assert_eq!(e, whole, "{block}-byte blocks");
        }
    }

    #[test]
    fn each_cycles_span_rows_hold_its_own_spans() {
        // A duplicated line (refused under --lenient, its spans dropped)
        // in the middle of a piece: every kept cycle's rows
        // span_row .. span_row + n_spans must follow the previous cycle's
        // and hold spans that start within its work.
        let tmp = copy_of("v2/serve-episode");
        let jsonl = tmp.path().join("control_timing.jsonl");
        let text = std::fs::read_to_string(&jsonl).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.insert(12, lines[11]);
        std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
        let opts = LoadOptions {
            lenient: true,
            ..LoadOptions::default()
        };
        for block in [0, 1 << 10] {
            crate::evidence::TEST_BLOCK_BYTES.with(|b| b.set(block));
            let ev = load_episode(tmp.path(), opts.clone()).unwrap();
            crate::evidence::TEST_BLOCK_BYTES.with(|b| b.set(0));
            assert_eq!(ev.skipped_lines, 1);
            let starts = ev.spans.column("start_ns").unwrap().i64().unwrap().clone();
            let mut next = 0u64;
            for c in &ev.cycles {
                assert_eq!(c.span_row, next, "cycle {} (block {block})", c.cycle);
                next += c.n_spans as u64;
                for r in c.span_row..next {
                    let s = starts.get(r as usize).unwrap();
                    let end = c.end_ns.unwrap_or(i64::MAX);
                    assert!(
                        s >= c.start_ns && s <= end,
                        "cycle {}: span at {s}",
                        c.cycle
                    );
                }
            }
            assert_eq!(next as usize, ev.spans.height());
        }
    }

    #[test]
    fn an_episode_from_bytes_is_the_episode_from_its_directory() {
        use crate::evidence::load_episode_bytes;
        let dir = fixture("v1/serve-episode");
        let jsonl = std::fs::read(dir.join("control_timing.jsonl")).unwrap();
        let summary = std::fs::read(dir.join("control_timing_summary.json")).unwrap();
        let report = |ev| crate::render::json(&Analysis::new(ev).unwrap().report);
        let from_dir = report(load_episode(&dir, LoadOptions::default()).unwrap());
        let from_bytes =
            load_episode_bytes(&dir, &jsonl, Some(&summary), LoadOptions::default()).unwrap();
        assert!(from_bytes.summary.is_some());
        // The manifest is not among the bytes (a caveat says so): every
        // figure is the same, and the cross-check of the summary too.
        let parse = |t: String| serde_json::from_str::<serde_json::Value>(&t).unwrap();
        let (mut b, mut d) = (parse(report(from_bytes)), parse(from_dir));
        let caveats = b["caveats"].take();
        assert!(
            caveats[0].as_str().unwrap().starts_with("no manifest.json"),
            "{caveats}"
        );
        assert_eq!(caveats.as_array().map(Vec::len), Some(1));
        for v in [&mut b, &mut d] {
            v["run"] = serde_json::Value::Null;
            v["caveats"] = serde_json::Value::Null;
        }
        assert!(b == d, "the report from bytes differs from the directory's");
        // A bad line is named as in the directory: file and line.
        let text = String::from_utf8(jsonl).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[4] = "{\"type\":\"cycle\",\"cycle\":\"four\"}";
        let bad = lines.join("\n");
        let err = load_episode_bytes(&dir, bad.as_bytes(), None, LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("control_timing.jsonl:5:"), "{err}");
        let err = load_episode_bytes(&dir, b"", None, LoadOptions::default()).unwrap_err();
        assert!(err.to_string().contains("control_timing.jsonl"), "{err}");
        // A background thread the header declares is missing, not read.
        let v2 = fixture("v2/serve-episode");
        let jsonl = std::fs::read(v2.join("control_timing.jsonl")).unwrap();
        let ev = load_episode_bytes(&v2, &jsonl, None, LoadOptions::default()).unwrap();
        assert_eq!(ev.missing_threads, ev.header.threads);
        assert!(!ev.missing_threads.is_empty());
    }
}
