//! The reader's progress bar (stderr, large inputs, terminals only).

use std::io::Write;

use looptime_capture::CYCLES_FILE;

/// A one-line progress bar, redrawn with `\r` each time the whole percentage
/// changes. `out` is `None` when no bar is wanted.
pub(super) struct Progress<W: Write> {
    out: Option<W>,
    total: u64,
    last_pct: u64,
}

impl<W: Write> Progress<W> {
    pub(super) fn new(out: Option<W>, total: u64) -> Self {
        Progress {
            out: out.filter(|_| total > 0),
            total,
            last_pct: u64::MAX,
        }
    }

    pub(super) fn tick(&mut self, done: u64) {
        let Some(out) = self.out.as_mut() else {
            return;
        };
        let pct = done.min(self.total) * 100 / self.total;
        if pct != self.last_pct {
            self.last_pct = pct;
            let width = 30;
            let filled = (pct as usize * width) / 100;
            let _ = write!(
                out,
                "\rreading {CYCLES_FILE} [{}{}] {pct:>3}% ({} of {} MB)",
                "#".repeat(filled),
                " ".repeat(width - filled),
                done.min(self.total) >> 20,
                self.total >> 20
            );
            let _ = out.flush();
        }
    }

    pub(super) fn done(&mut self) {
        if let Some(out) = self.out.as_mut() {
            let _ = writeln!(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Progress;

    fn frames(out: &[u8]) -> Vec<String> {
        String::from_utf8(out.to_vec())
            .unwrap()
            .split('\r')
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn progress_redraws_once_per_percent_and_ends_the_line() {
        // 200 MiB in all; ticks at 0, 1 MiB, 1.5 MiB, 100 MiB and 200 MiB.
        // 1 MiB and 1.5 MiB are both 0% (integer percent of 200 MiB), so they
        // draw nothing new; 100 MiB is 50% (15 of 30 cells), 200 MiB is 100%.
        let total = 200u64 << 20;
        let mut p = Progress::new(Some(Vec::new()), total);
        for done in [0, 1 << 20, 3 << 19, 100 << 20, total] {
            p.tick(done);
        }
        p.done();
        let out = p.out.take().unwrap();
        let f = frames(&out);
        assert_eq!(f.len(), 3, "{f:?}");
        assert!(f[0].contains(&format!("[{}]   0% (0 of 200 MB)", " ".repeat(30))));
        assert!(f[1].contains(&format!(
            "[{}{}]  50% (100 of 200 MB)",
            "#".repeat(15),
            " ".repeat(15)
        )));
        assert!(f[2].ends_with(&format!("[{}] 100% (200 of 200 MB)\n", "#".repeat(30))));
    }

    #[test]
    fn empty_input_writes_nothing() {
        // A zero-byte file: no division by zero and no bar, though a writer
        // was given.
        let mut empty = Progress::new(Some(Vec::new()), 0);
        empty.tick(0);
        empty.done();
        assert!(empty.out.is_none());
    }
}
