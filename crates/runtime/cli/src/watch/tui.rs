//! The live terminal view of `looptime watch` (ratatui over crossterm):
//! the snapshot redrawn every interval until `q`, with the loop's state
//! in words when it ends.

use super::*;
use crossterm::event::{self, Event, KeyCode, KeyModifiers};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::{Frame, Terminal};

/// Restores the terminal however the view ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = terminal::disable_raw_mode();
        let _ = crossterm::execute!(std::io::stdout(), LeaveAlternateScreen);
    }
}

pub(super) fn run(
    reader: &RingReader,
    threads: &[RingReader],
    window: u64,
    every: Duration,
) -> Result<()> {
    terminal::enable_raw_mode()?;
    let _restore = Restore;
    crossterm::execute!(std::io::stdout(), EnterAlternateScreen)?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    loop {
        let t0 = Instant::now();
        let snap = snapshot_with_threads(reader, threads, window)?;
        term.draw(|f| draw(f, &snap))?;
        while let Some(left) = every.checked_sub(t0.elapsed()) {
            if !event::poll(left)? {
                break;
            }
            if let Event::Key(k) = event::read()? {
                let ctrl_c =
                    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                if matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c {
                    return Ok(());
                }
            }
        }
    }
}

fn table<'a>(
    title: &'a str,
    header: &'a [&'a str],
    rows: Vec<Vec<String>>,
    first: u16,
) -> Table<'a> {
    let widths: Vec<Constraint> = std::iter::once(Constraint::Length(first))
        .chain(
            header[1..]
                .iter()
                .map(|h| Constraint::Length((h.len() as u16).max(8))),
        )
        .collect();
    Table::new(rows.into_iter().map(Row::new), widths)
        .header(Row::new(header.iter().copied()).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::new().borders(Borders::ALL).title(title))
}

fn draw(f: &mut Frame, s: &Snapshot) {
    let stages = s.stages.len() as u16;
    // The threads' panels side by side, as tall as the longest.
    let thread_rows = s
        .threads
        .iter()
        .map(|t| t.stages.len() as u16 + 3)
        .max()
        .unwrap_or(0);
    let [top, phases, stage_area, thread_area, spark, help] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(s.phases.len() as u16 + 3),
        Constraint::Length(stages + 3),
        Constraint::Length(thread_rows),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(f.area());
    if !s.threads.is_empty() {
        let cols = Layout::horizontal(
            s.threads
                .iter()
                .map(|_| Constraint::Ratio(1, s.threads.len() as u32)),
        )
        .split(thread_area);
        let titles: Vec<String> = s
            .threads
            .iter()
            .map(|t| format!("thread {} (wall ms)", t.thread))
            .collect();
        for ((t, area), title) in s.threads.iter().zip(cols.iter()).zip(&titles) {
            f.render_widget(
                table(title, &STAGE_HEADER[..4], short_rows(&t.stages), 16),
                *area,
            );
        }
    }
    f.render_widget(Paragraph::new(title(s)), top);
    let phases_title = match window_notes(s) {
        Some(d) => format!("phases (ms, over the window; {d})"),
        None => "phases (ms, over the window)".to_string(),
    };
    f.render_widget(
        table(&phases_title, &PHASE_HEADER, phase_rows(s), 10),
        phases,
    );
    f.render_widget(
        table("stages (wall ms)", &STAGE_HEADER, stage_rows(s), 20),
        stage_area,
    );
    let lines = period_chart(
        &s.recent_periods_us,
        s.nominal_period_us,
        spark.width.saturating_sub(2) as usize,
        spark.height.saturating_sub(2) as usize,
    );
    f.render_widget(
        Paragraph::new(lines.join("\n"))
            .block(Block::new().borders(Borders::ALL).title(chart_title(s))),
        spark,
    );
    let state = match (s.writer_alive, s.state) {
        (true, _) => "q quits",
        (false, "finished") => "the loop finished; q quits",
        (false, _) => "the writer died: `looptime recover` writes its evidence; q quits",
    };
    f.render_widget(Paragraph::new(state), help);
}
