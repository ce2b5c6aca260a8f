//! Each subcommand's work, from a validated request: `report`, `plots`,
//! `compare`, `export` (and `--into`), the Parquet dataset, `fleet`, the
//! man pages.

use std::io::Write;
use std::path::PathBuf;

use crate::analysis::analyze;
use crate::error::{AnalyzeError, Result};
use crate::evidence::load_episode;
use crate::metrics::{Report, Thresholds};

use super::args::*;

fn make_dir(dir: &std::path::Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| AnalyzeError::Write {
        path: dir.to_path_buf(),
        source,
    })
}

fn write_text(path: PathBuf, text: &str) -> Result<()> {
    crate::atomic::write_bytes(&path, text.as_bytes()).map(|_| ())
}

/// Analyze one episode.
///
/// # Errors
/// [`AnalyzeError`] for unusable input or a failed write.
pub fn run_report(req: &ReportRequest, out: &mut dyn Write) -> Result<Report> {
    let mut a = analyze(load_episode(&req.episode, req.load.clone())?)?;
    if req.thresholds != Thresholds::default() {
        a.judge(&req.thresholds);
    }
    if let Some(dir) = &req.plots_only {
        make_dir(dir)?;
        let plots = crate::render::plots::episode_plots(&a, Some(dir))?;
        for p in &plots {
            let _ = writeln!(out, "{}", dir.join(format!("{}.png", p.name)).display());
            let _ = writeln!(out, "{}", dir.join(format!("{}.svg", p.name)).display());
        }
        return Ok(a.report);
    }
    let report = &a.report;
    if let Some(dir) = &req.output.html {
        make_dir(dir)?;
        let plots = crate::render::plots::episode_plots(&a, Some(dir))?;
        write_text(
            dir.join("report.html"),
            &crate::render::html::report_page(report, &plots),
        )?;
        eprintln!("wrote {}", dir.join("report.html").display());
    }
    let s = crate::profile::step("render: text or JSON, and write");
    emit(
        out,
        &crate::render::json(report),
        || crate::render::text::render(report),
        req.output.json,
        req.output.output.as_deref(),
    )?;
    drop(s);
    let g = crate::gate::report_gate(
        report,
        req.gate.fail_on.as_deref(),
        req.gate.allow_empty_gate,
    );
    write_gate_files(
        &req.gate,
        &g,
        || crate::render::gate::report_markdown(report, &g),
        "looptime.report",
    )?;
    gate_verdict(&g, None)?;
    Ok(a.report)
}

/// Write `--markdown` and `--junit`, when asked (before the gate's exit,
/// so a tripped gate still leaves its files).
fn write_gate_files(
    args: &GateArgs,
    g: &crate::gate::GateResult,
    markdown: impl FnOnce() -> String,
    classname: &str,
) -> Result<()> {
    if let Some(p) = &args.markdown {
        write_text(p.clone(), &markdown())?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.junit {
        write_text(p.clone(), &crate::render::gate::junit(g, classname))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

/// The gate's exit: [`AnalyzeError::GateTripped`] (exit 5) when it tripped,
/// naming what failed and, when some input was left out too, that.
fn gate_verdict(g: &crate::gate::GateResult, partial: Option<&str>) -> Result<()> {
    if !g.tripped() {
        if g.checked_nothing() {
            // Allowed to pass empty: say so where the user looks, not only
            // in --markdown.
            eprintln!(
                "gate passed with nothing checked (--allow-empty-gate): {}",
                crate::render::gate::nothing_checked(g)
            );
        }
        return Ok(());
    }
    let failed: Vec<String> = g
        .failed()
        .map(|c| format!("{} ({})", c.name, c.detail))
        .collect();
    if g.only_undecided() {
        let mut what = format!(
            "{} undecided: {}; record more rollouts a side and compare again (docs/ci.md, Undecided)",
            failed.len(),
            failed.join("; ")
        );
        if let Some(p) = partial {
            what.push_str(&format!("; also {p}"));
        }
        return Err(AnalyzeError::GateUndecided {
            subject: g.subject.clone(),
            what,
        });
    }
    let mut what = if !failed.is_empty() {
        format!("{} failed: {}", failed.len(), failed.join("; "))
    } else if g.checked_nothing() {
        format!(
            "it checked nothing: {} (pass --allow-empty-gate to let an empty gate pass)",
            crate::render::gate::nothing_checked(g)
        )
    } else {
        format!(
            "a warning about the pair, with --strict: {}",
            g.warnings.join("; ")
        )
    };
    if let Some(p) = partial {
        what.push_str(&format!("; also {p}"));
    }
    Err(AnalyzeError::GateTripped {
        subject: g.subject.clone(),
        level: g.fail_on.clone().unwrap_or_default(),
        what,
    })
}

/// The gate's own family, when a gate was asked for (`--fail-on` or
/// `--gate`).
fn gate_family(
    c: &crate::compare::Comparison,
    args: &GateArgs,
) -> Result<Option<crate::compare::GateFamily>> {
    if args.fail_on.is_none() && args.gate.is_empty() {
        return Ok(None);
    }
    let ask = crate::gate::GateAsk {
        tests: &args.gate,
        alpha: args.alpha,
        min_effect: &args.min_effect,
    };
    crate::gate::gate_family(c, &ask)
        .map(Some)
        .map_err(AnalyzeError::Usage)
}

/// Save `json` to `output` (if given), then print JSON or the text form.
fn emit(
    out: &mut dyn Write,
    json: &str,
    text: impl FnOnce() -> String,
    as_json: bool,
    output: Option<&std::path::Path>,
) -> Result<()> {
    if let Some(path) = output {
        write_text(path.to_path_buf(), json)?;
    }
    let shown = if as_json {
        json.to_string()
    } else {
        crate::render::text::terminal_safe(&text()).into_owned()
    };
    out.write_all(shown.as_bytes())
        .map_err(|source| AnalyzeError::Write {
            path: PathBuf::from("<stdout>"),
            source,
        })
}

/// Export one episode to a file (written to a temporary beside it, then
/// renamed, so a failed export leaves no partial file).
///
/// # Errors
/// [`AnalyzeError`] for unusable input or a failed write.
pub fn run_export(req: &ExportRequest) -> Result<()> {
    if let Some(recording) = &req.into {
        return run_into(req, recording);
    }
    type Writer = fn(
        &crate::analysis::Analysis,
        &mut std::io::BufWriter<std::fs::File>,
        &std::path::Path,
        &ExportRequest,
    ) -> Result<String>;
    let write: Writer = match req.format {
        ExportFormat::Parquet => return run_dataset_export(req),
        ExportFormat::Chrome => write_chrome,
        ExportFormat::Hdr => write_hdr,
        ExportFormat::Mcap => write_mcap,
    };
    let a = analyze(load_episode(&req.episodes[0], req.load.clone())?)?;
    let out = &req.out;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        make_dir(dir)?;
    }
    let mut what = String::new();
    crate::atomic::write_atomic(out, |w| {
        what = write(&a, w, out, req)?;
        Ok(())
    })?;
    eprintln!("wrote {} ({what})", out.display());
    Ok(())
}

/// `export --format mcap --into RECORDING`: the recording copied whole with
/// the episode's channels added, written atomically to `--out`.
fn run_into(req: &ExportRequest, recording: &std::path::Path) -> Result<()> {
    let file = std::fs::File::open(recording).map_err(|e| AnalyzeError::Recording {
        path: recording.to_path_buf(),
        why: format!("cannot be read ({e}); give the .mcap file of the recording"),
    })?;
    let a = analyze(load_episode(&req.episodes[0], req.load.clone())?)?;
    let out = &req.out;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        make_dir(dir)?;
    }
    let mut done = None;
    crate::atomic::write_atomic(out, |w| {
        done = Some(crate::export::mcap_into::write_into(
            &a,
            &file,
            recording,
            req.force,
            req.compression,
            w,
            out,
        )?);
        Ok(())
    })?;
    if let Some(s) = done {
        let added: u64 = s.added.messages.values().sum();
        eprintln!(
            "wrote {} ({} messages and {} schema, channel, attachment and metadata records of {}, unchanged; {added} looptime messages on {} channels, on its wall-clock timeline)",
            out.display(),
            s.copied_messages,
            s.copied_records,
            recording.display(),
            s.added.messages.len()
        );
    }
    Ok(())
}

/// The MCAP file of `a` into `w` (errors name `out`).
fn write_mcap(
    a: &crate::analysis::Analysis,
    w: &mut std::io::BufWriter<std::fs::File>,
    out: &std::path::Path,
    req: &ExportRequest,
) -> Result<String> {
    let s = crate::export::mcap::write(a, w, out, req.compression)?;
    let total: u64 = s.messages.values().sum();
    let timebase = match s.anchor_uncertainty_ns {
        Some(u) => format!("times are wall-clock ns through the evidence's start anchor (±{u} ns)"),
        None => "times are host-monotonic ns: the evidence has no wall-clock anchor (recorded before looptime wrote one), so they will not line up with a robot recording's wall-clock times".to_string(),
    };
    Ok(format!(
        "{total} messages on {} channels; {timebase}",
        s.messages.len()
    ))
}

/// The trace of `ev` into `w` (errors name `out`).
fn write_chrome(
    a: &crate::analysis::Analysis,
    w: &mut std::io::BufWriter<std::fs::File>,
    out: &std::path::Path,
    _req: &ExportRequest,
) -> Result<String> {
    let n = crate::export::chrome::write(a, w, out)?;
    Ok(format!("{n} trace events"))
}

/// The HdrHistogram log of `ev` into `w` (errors name `out`).
fn write_hdr(
    a: &crate::analysis::Analysis,
    w: &mut std::io::BufWriter<std::fs::File>,
    out: &std::path::Path,
    _req: &ExportRequest,
) -> Result<String> {
    let log = crate::export::hdr_log(a)?;
    let n = log.lines().filter(|l| l.starts_with("Tag=")).count();
    w.write_all(log.as_bytes())
        .map_err(|source| AnalyzeError::Write {
            path: out.to_path_buf(),
            source,
        })?;
    Ok(format!("{n} histograms"))
}

/// Export episodes (and sessions' rollouts) into a Parquet dataset. A bad
/// episode is reported and skipped; the others are written.
///
/// # Errors
/// The only episode's error when none could be written;
/// [`AnalyzeError::Partial`] (after writing the others) when some were
/// left out, bad or without evidence.
pub fn run_dataset_export(req: &ExportRequest) -> Result<()> {
    let found = crate::evidence::find_episodes(&req.episodes, crate::evidence::Search::Sessions)?;
    make_dir(&req.out)?;
    let mut load = req.load.clone();
    load.progress = false;
    for d in &found.without_evidence {
        eprintln!(
            "note: {} has no {}; left out of the dataset (`looptime recover` may rebuild it)",
            d.display(),
            looptime_capture::format::CYCLES_FILE
        );
    }
    let (mut bytes, mut rows, mut written, mut first_error) = (0u64, [0u64; 6], 0usize, None);
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let total = found.episodes.len();
    for (i, dir) in found.episodes.iter().enumerate() {
        let done = (|| -> Result<crate::export::parquet::Written> {
            let a = analyze(load_episode(dir, load.clone())?)?;
            let phases = crate::fleet::table::table(&crate::fleet::rows(&a))?;
            crate::export::parquet::write_episode(&req.out, &a, phases)
        })();
        match done {
            Ok(w) => {
                written += 1;
                bytes += w.bytes;
                for (r, x) in rows.iter_mut().zip(w.rows) {
                    *r += x;
                }
            }
            Err(e) => {
                export_failed(&req.out, dir, &e, progress)?;
                first_error.get_or_insert(e);
            }
        }
        // Progress only on a terminal: a CI log would get one long line.
        if progress {
            eprint!("\rexported {}/{total} episodes", i + 1);
        }
    }
    if progress {
        eprintln!();
    }
    eprintln!(
        "wrote {} ({} cycles, {} spans, {} values, {} samples, {} phase rows, {written} episodes; {:.1} MB)",
        req.out.display(),
        rows[0],
        rows[1],
        rows[2],
        rows[4],
        rows[5],
        bytes as f64 / 1e6
    );
    let left_out = total - written + found.without_evidence.len();
    match first_error {
        // Nothing usable: the first episode's error, exit 2 (docs/dataset.md).
        Some(e) if written == 0 => Err(e),
        _ if left_out > 0 => Err(AnalyzeError::Partial {
            used: written,
            found: total + found.without_evidence.len(),
            left_out,
            where_listed: "named above".into(),
            hint: if found.without_evidence.is_empty() {
                String::new()
            } else {
                RECOVER_HINT.into()
            },
        }),
        _ => Ok(()),
    }
}

/// Say why `dir` could not be exported and remove its earlier export from
/// the dataset under `out`, which would otherwise stay as if this one had
/// succeeded.
fn export_failed(
    out: &std::path::Path,
    dir: &std::path::Path,
    e: &AnalyzeError,
    progress: bool,
) -> Result<()> {
    eprintln!(
        "{}error: {}: {}",
        if progress { "\n" } else { "" },
        dir.display(),
        crate::render::text::terminal_safe(&looptime_capture::error_chain(e))
    );
    for part in crate::export::parquet::remove_episode(out, dir)? {
        eprintln!(
            "removed {}'s earlier export from the dataset: {} (in every table)",
            dir.display(),
            part.display()
        );
    }
    Ok(())
}

/// Analyze every episode under the roots into the fleet table, print the
/// summary, and return the fleet.
///
/// # Errors
/// A root that is not a directory or no episode found
/// ([`AnalyzeError::NoEpisodes`]); a failed write;
/// [`AnalyzeError::FleetFailed`] when no episode could be analyzed;
/// [`AnalyzeError::Partial`] (after writing everything) when some failed.
pub fn run_fleet(req: &FleetRequest, out: &mut dyn Write) -> Result<crate::fleet::Fleet> {
    use crate::fleet::table;
    let dirs = crate::fleet::discover(&req.roots)?;
    if dirs.is_empty() {
        return Err(AnalyzeError::NoEpisodes {
            roots: req.roots.clone(),
        });
    }
    let bar = episodes_bar(dirs.len());
    let failed = std::sync::atomic::AtomicUsize::new(0);
    let started = std::time::Instant::now();
    let fleet = crate::fleet::analyze_all(&dirs, req.jobs, &req.load, &|_, bad| {
        if bad {
            let n = failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            bar.set_message(format!("({n} failed)"));
        }
        bar.inc(1);
    });
    bar.finish_and_clear();
    // Found = analyzed + failed, or the table would silently miss episodes
    // (docs/fleet.md); `analyze_all` keeps it by construction, and this is
    // the last line of defence before anything is written.
    if !fleet.is_whole() {
        return Err(AnalyzeError::Partial {
            used: fleet.analyzed,
            found: fleet.found,
            left_out: fleet.found - fleet.analyzed.min(fleet.found),
            where_listed: format!(
                "{} of them unaccounted for, an internal error; please report it",
                fleet.found - (fleet.analyzed + fleet.failures.len()).min(fleet.found)
            ),
            hint: String::new(),
        });
    }
    let elapsed = started.elapsed().as_secs_f64();
    let summary = fleet.summary(req.worst);
    let text = crate::render::fleet_text::render(&summary, elapsed, req.jobs);
    table::write(&req.out, &fleet, &text)?;
    let shown = if req.json {
        crate::render::json(&summary)
    } else {
        crate::render::text::terminal_safe(&text).into_owned()
    };
    out.write_all(shown.as_bytes())
        .map_err(|source| AnalyzeError::Write {
            path: PathBuf::from("<stdout>"),
            source,
        })?;
    eprintln!(
        "wrote {} ({} rows; {}, {}, {}, {})",
        req.out.display(),
        fleet.rows.len(),
        table::TABLE_PARQUET,
        table::TABLE_CSV,
        table::ERRORS_CSV,
        table::SUMMARY_TXT
    );
    fleet_outcome(fleet, &req.out.join(table::ERRORS_CSV))
}

/// A progress bar over `n` episodes.
fn episodes_bar(n: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(n as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} episodes, {per_sec}, eta {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// The fleet, or why its run did not fully succeed: none analyzed, or
/// some failed (listed in `errors`).
fn fleet_outcome(
    fleet: crate::fleet::Fleet,
    errors: &std::path::Path,
) -> Result<crate::fleet::Fleet> {
    if fleet.analyzed == 0 {
        return Err(AnalyzeError::FleetFailed {
            found: fleet.found,
            errors: errors.to_path_buf(),
        });
    }
    if !fleet.failures.is_empty() {
        let no_evidence = fleet.failures.iter().any(|f| f.kind == "no_evidence");
        return Err(AnalyzeError::Partial {
            used: fleet.analyzed,
            found: fleet.found,
            left_out: fleet.failures.len(),
            where_listed: format!("listed with their errors in {}", errors.display()),
            hint: if no_evidence {
                RECOVER_HINT.into()
            } else {
                String::new()
            },
        });
    }
    Ok(fleet)
}

/// The advice for rollouts without evidence.
const RECOVER_HINT: &str =
    "; a rollout without control_timing.jsonl may need `looptime recover` (docs/durability.md)";

/// Write `cmd`'s man page and one per subcommand (named `NAME-SUB`) into
/// `dir`, each through the one atomic write.
///
/// # Errors
/// [`AnalyzeError::Write`] for a page or a directory that cannot be written.
pub fn man_pages(cmd: clap::Command, dir: &std::path::Path) -> Result<()> {
    make_dir(dir)?;
    let name = cmd.get_name().to_string();
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .map(|s| s.clone().name(format!("{name}-{}", s.get_name())))
        .collect();
    for page in std::iter::once(cmd).chain(subs) {
        let path = dir.join(format!("{}.1", page.get_name()));
        crate::atomic::write_atomic(&path, |w| {
            clap_mangen::Man::new(page)
                .render(w)
                .map_err(|source| AnalyzeError::Write {
                    path: path.clone(),
                    source,
                })
        })?;
    }
    eprintln!("wrote the man pages into {}", dir.display());
    Ok(())
}

/// Compare two episodes.
///
/// # Errors
/// [`AnalyzeError`] for unusable input on either side or a failed write.
pub fn run_compare(
    req: &CompareRequest,
    out: &mut dyn Write,
) -> Result<crate::compare::Comparison> {
    let mut left_out = Vec::new();
    let mut load_side = |label: &str,
                         paths: &[PathBuf]|
     -> Result<Vec<crate::analysis::Analysis>> {
        let found = crate::evidence::find_episodes(paths, crate::evidence::Search::Sessions)?;
        for d in &found.without_evidence {
            eprintln!(
                "note: {} has no {}; left out of the comparison (`looptime recover` may rebuild it)",
                d.display(),
                looptime_capture::format::CYCLES_FILE
            );
            left_out.push(format!("{label}: {}", d.display()));
        }
        let mut out = Vec::new();
        for dir in found.episodes {
            out.push(analyze(load_episode(&dir, req.load.clone())?)?);
        }
        Ok(out)
    };
    let (la, lb) = (load_side("A", &req.a)?, load_side("B", &req.b)?);
    let (sa, sb): (Vec<_>, Vec<_>) = (la.iter().collect(), lb.iter().collect());
    let mut c = crate::compare::compare(&sa, &sb, req.bootstrap);
    c.left_out = left_out;
    c.gate = gate_family(&c, &req.gate)?;
    if let Some(dir) = &req.output.html {
        make_dir(dir)?;
        let plots = crate::render::plots::compare_plots(&sa, &sb, &c, Some(dir))?;
        write_text(
            dir.join("compare.html"),
            &crate::render::html::compare_page(&c, &plots),
        )?;
        eprintln!("wrote {}", dir.join("compare.html").display());
    }
    emit(
        out,
        &crate::render::json(&c),
        || crate::render::compare_text::render(&c),
        req.output.json,
        req.output.output.as_deref(),
    )?;
    let g = crate::gate::compare_gate(
        &c,
        req.gate.fail_on.as_deref(),
        &req.gate.gate,
        req.gate.strict,
        req.gate.allow_empty_gate,
    )
    .map_err(AnalyzeError::Usage)?;
    write_gate_files(
        &req.gate,
        &g,
        || crate::render::gate::compare_markdown(&c, &g),
        "looptime.compare",
    )?;
    // A tripped gate (5) wins over partial input (4); a failed write (3)
    // has already returned.
    let partial =
        (!c.left_out.is_empty()).then(|| format!("{} episode(s) were left out", c.left_out.len()));
    gate_verdict(&g, partial.as_deref())?;
    if !c.left_out.is_empty() {
        let used = c.a_episodes.len() + c.b_episodes.len();
        return Err(AnalyzeError::Partial {
            used,
            found: used + c.left_out.len(),
            left_out: c.left_out.len(),
            where_listed: "listed under `left out` in the comparison".into(),
            hint: RECOVER_HINT.into(),
        });
    }
    Ok(c)
}
