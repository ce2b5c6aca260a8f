//! `export --format mcap --into RECORDING` (docs/export.md): a robot
//! recording copied record for record, with the loop's timing added on its
//! timeline, in memory that does not grow with the recording.
//!
//! The recording is read through its summary and chunk index, never whole:
//!
//! 1. the header (its `profile` is kept) and one pass over the top-level
//!    records, skipping chunks by their length: attachments and metadata
//!    are noted, and a record of a kind the MCAP crate does not model, or a
//!    message outside any chunk (which no index covers), is refused by name,
//!    never dropped;
//! 2. the summary section: schemas, channels, the chunk index and the
//!    Statistics record, which gives the time range for the overlap check;
//! 3. the messages in log-time order, a chunk at a time (the crate's
//!    indexed reader), each written as it is read, with the looptime
//!    messages merged in between; then the attachments, streamed in pieces,
//!    and the metadata records.
//!
//! Peak memory is a few decompressed chunks, the largest attachment piece
//! (1 MiB) and the episode's own messages, whatever the recording's size
//! (docs/performance.md). A recording that already holds looptime channels
//! is refused: merging a second episode would land on the first's
//! channels.

use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use mcap::records::{op, Record};
use mcap::sans_io::indexed_reader::{IndexedReadEvent, IndexedReader};
use mcap::sans_io::summary_reader::{SummaryReadEvent, SummaryReader};

mod layout;
use layout::fields_fit;

use super::mcap::{add_channels, mcap_err, plan, writer, Compression, Emitter, McapSummary};
use crate::analysis::Analysis;
use crate::error::{AnalyzeError, Result};

/// The topics looptime writes start with this.
pub const LOOPTIME_PREFIX: &str = "/looptime/";

/// How an attachment is copied: in pieces of this many bytes.
const PIECE: usize = 1 << 20;

/// What `--into` copied and added.
#[derive(Debug, Clone, PartialEq)]
pub struct IntoSummary {
    /// The recording's messages, copied.
    pub copied_messages: u64,
    /// Its schemas, channels, attachments and metadata records, copied.
    pub copied_records: u64,
    /// The recording's header profile, kept in the output.
    pub profile: String,
    /// The looptime channels' messages.
    pub added: McapSummary,
}

/// A recording (or evidence) that cannot be merged, with why.
fn refuse(path: &Path, why: impl Into<String>) -> AnalyzeError {
    AnalyzeError::Recording {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// A wall-clock time as UTC text (seconds), for messages.
fn utc(ns: u64) -> String {
    let secs = (ns / 1_000_000_000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // The civil date of a day count since 1970-01-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// What the top-level pass found besides chunks.
#[derive(Default)]
struct TopLevel {
    profile: String,
    library: String,
    /// (offset of the record, its length) of each attachment.
    attachments: Vec<(u64, u64)>,
    metadata: Vec<mcap::records::Metadata>,
}

/// The largest chunk a recording may announce, uncompressed: each chunk is
/// decompressed whole, into what its index announces, so a damaged size
/// would otherwise ask for that much memory (found by the `mcap_into` fuzz
/// target: 60 TB).
const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// The recording, read from `r` (errors name `path`).
struct Recording<'p, R> {
    r: BufReader<R>,
    path: &'p Path,
    /// Its length in bytes.
    len: u64,
}

impl<R: Read + Seek> Recording<'_, R> {
    fn bad(&self, what: impl std::fmt::Display) -> AnalyzeError {
        refuse(
            self.path,
            format!("not a readable MCAP file ({what}); --into takes a .mcap file (for a rosbag2 directory, the .mcap inside it)"),
        )
    }

    fn u64_at(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        self.r.read_exact(&mut b).map_err(|e| self.bad(e))?;
        Ok(u64::from_le_bytes(b))
    }

    fn bytes(&mut self, n: u64) -> Result<Vec<u8>> {
        // A length beyond the file is damage, not a reason to allocate it.
        let mut v = Vec::new();
        (&mut self.r)
            .take(n)
            .read_to_end(&mut v)
            .map_err(|e| self.bad(e))?;
        if v.len() as u64 != n {
            return Err(self.bad("a record runs past the end of the file"));
        }
        Ok(v)
    }

    /// The magic, then every top-level record up to the footer.
    fn top_level(&mut self) -> Result<TopLevel> {
        let mut magic = [0u8; 8];
        self.r.read_exact(&mut magic).map_err(|e| self.bad(e))?;
        if magic[..] != *mcap::MAGIC {
            return Err(self.bad("it does not start with the MCAP magic"));
        }
        let mut out = TopLevel::default();
        let mut pos = 8u64;
        loop {
            let mut opcode = [0u8; 1];
            self.r
                .read_exact(&mut opcode)
                .map_err(|_| self.bad("it ends before its footer: truncated"))?;
            let len = self.u64_at()?;
            let body_at = pos + 9;
            match opcode[0] {
                op::FOOTER => return Ok(out),
                op::HEADER | op::METADATA => {
                    let body = self.bytes(len)?;
                    if !fields_fit(opcode[0], &body) {
                        return Err(self.bad(format!(
                            "the record at byte {pos} holds a field longer than the record itself: damaged"
                        )));
                    }
                    match mcap::parse_record(opcode[0], &body).map_err(|e| self.bad(e))? {
                        Record::Header(h) => {
                            out.profile = h.profile;
                            out.library = h.library;
                        }
                        Record::Metadata(m) => out.metadata.push(m),
                        _ => {}
                    }
                }
                op::ATTACHMENT => {
                    out.attachments.push((pos, len));
                    self.skip(len)?;
                }
                op::MESSAGE => {
                    return Err(refuse(
                        self.path,
                        format!("it holds a message outside any chunk (byte {pos}), which its chunk index does not cover, so it could not be copied in time order; rewrite it with chunks (`mcap convert`) and merge that"),
                    ))
                }
                // Chunks are read later through the index; message indexes,
                // the summary's records and the data end are written anew.
                op::SCHEMA
                | op::CHANNEL
                | op::CHUNK
                | op::MESSAGE_INDEX
                | op::CHUNK_INDEX
                | op::ATTACHMENT_INDEX
                | op::STATISTICS
                | op::METADATA_INDEX
                | op::SUMMARY_OFFSET
                | op::DATA_END => self.skip(len)?,
                other => {
                    return Err(refuse(
                        self.path,
                        format!("it holds a record of opcode {other:#04x} at byte {pos}, a kind the MCAP library looptime uses does not model; it could not be copied unchanged, so nothing is merged (remove it, or export the timing alone with --format mcap)"),
                    ))
                }
            }
            pos = body_at + len;
        }
    }

    /// Every record of the summary section (from the footer's
    /// `summary_start` to the footer) runs inside the section, and its
    /// fields inside the record. What else is wrong, the crate says.
    fn check_summary_section(&mut self) -> Result<()> {
        // The footer: opcode, length, summary_start, summary_offset_start,
        // CRC (29 bytes), then the magic (8).
        let footer = match self.len.checked_sub(37) {
            Some(f) if f >= 8 => f,
            _ => return Ok(()),
        };
        self.r
            .seek(SeekFrom::Start(footer + 9))
            .map_err(|e| self.bad(e))?;
        let start = self.u64_at()?;
        if start < 8 || start >= footer {
            return Ok(()); // no summary, or not one to walk
        }
        self.r
            .seek(SeekFrom::Start(start))
            .map_err(|e| self.bad(e))?;
        let mut pos = start;
        while pos + 9 <= footer {
            let mut opcode = [0u8; 1];
            self.r.read_exact(&mut opcode).map_err(|e| self.bad(e))?;
            let len = self.u64_at()?;
            if len > footer - pos - 9 {
                return Err(self.bad(format!(
                    "the summary record at byte {pos} runs past the footer: damaged"
                )));
            }
            let body = self.bytes(len)?;
            if !fields_fit(opcode[0], &body) {
                return Err(self.bad(format!(
                    "the summary record at byte {pos} holds a field longer than the record itself: damaged"
                )));
            }
            pos += 9 + len;
        }
        Ok(())
    }

    fn skip(&mut self, n: u64) -> Result<()> {
        let n = i64::try_from(n).map_err(|_| self.bad("a record length beyond any file"))?;
        self.r.seek_relative(n).map_err(|e| self.bad(e))
    }

    /// The summary section, through the crate's sans-io summary reader,
    /// after its records were checked to fit (`fields_fit`).
    fn summary(&mut self) -> Result<Option<mcap::Summary>> {
        self.check_summary_section()?;
        let mut s = SummaryReader::new();
        while let Some(event) = s.next_event() {
            match event.map_err(|e| self.bad(e))? {
                SummaryReadEvent::ReadRequest(need) => {
                    let n = self.r.read(s.insert(need)).map_err(|e| self.bad(e))?;
                    s.notify_read(n);
                }
                SummaryReadEvent::SeekRequest(to) => {
                    let at = self.r.seek(to).map_err(|e| self.bad(e))?;
                    s.notify_seeked(at);
                }
            }
        }
        Ok(s.finish())
    }

    /// The record at `offset` (an attachment's), positioned after its
    /// opcode and length.
    fn at(&mut self, offset: u64) -> Result<()> {
        self.r
            .seek(SeekFrom::Start(offset + 9))
            .map(|_| ())
            .map_err(|e| self.bad(e))
    }

    fn string(&mut self) -> Result<String> {
        let mut b = [0u8; 4];
        self.r.read_exact(&mut b).map_err(|e| self.bad(e))?;
        let bytes = self.bytes(u32::from_le_bytes(b) as u64)?;
        String::from_utf8(bytes).map_err(|e| self.bad(e))
    }
}

/// The looptime channels a recording already holds, and the episode its
/// `looptime` metadata record names.
fn earlier_merge(summary: &mcap::Summary, top: &TopLevel) -> Option<String> {
    let mut topics: Vec<&str> = summary
        .channels
        .values()
        .map(|c| c.topic.as_str())
        .filter(|t| t.starts_with(LOOPTIME_PREFIX))
        .collect();
    if topics.is_empty() {
        return None;
    }
    topics.sort_unstable();
    let episode = top
        .metadata
        .iter()
        .find(|m| m.name == "looptime")
        .and_then(|m| m.metadata.get("episode"))
        .map_or(
            "an unnamed episode (no looptime metadata record)".to_string(),
            |e| format!("episode {e}"),
        );
    Some(format!(
        "it already holds looptime channels ({}) from {episode}: a second merge would land on the first one's channels; merge each episode into the original recording instead",
        topics.join(", ")
    ))
}

/// Refuse a recording whose messages (its Statistics record's range, else
/// its chunks') and the episode's (`ours`) do not overlap in time.
fn check_overlap(
    summary: &mcap::Summary,
    ours: Option<(u64, u64)>,
    recording_path: &Path,
) -> Result<()> {
    let theirs = match summary.stats.as_ref() {
        Some(s) if s.message_count > 0 => Some((s.message_start_time, s.message_end_time)),
        Some(_) => None,
        None => summary.chunk_indexes.iter().fold(None, |r, c| {
            Some(r.map_or(
                (c.message_start_time, c.message_end_time),
                |(lo, hi): (u64, u64)| (lo.min(c.message_start_time), hi.max(c.message_end_time)),
            ))
        }),
    };
    if let (Some((rl, rh)), Some((el, eh))) = (theirs, ours) {
        if rh < el || eh < rl {
            return Err(refuse(
                recording_path,
                format!(
                    "its messages span {} to {} and the episode {} to {}: the two do not overlap, so this is probably another run's recording; pass --force to merge them anyway",
                    utc(rl),
                    utc(rh),
                    utc(el),
                    utc(eh)
                ),
            ));
        }
    }
    Ok(())
}

/// Every attachment the top-level pass found, streamed from the recording
/// into `m` in pieces of [`PIECE`] bytes.
fn copy_attachments<R: Read + Seek, W: Write + Seek>(
    rec: &mut Recording<'_, R>,
    top: &TopLevel,
    m: &mut mcap::Writer<W>,
    path: &Path,
) -> Result<()> {
    let werr = |e| mcap_err(path, e);
    let mut piece = vec![0u8; PIECE];
    for &(offset, _) in &top.attachments {
        rec.at(offset)?;
        let log_time = rec.u64_at()?;
        let create_time = rec.u64_at()?;
        let name = rec.string()?;
        let media_type = rec.string()?;
        let mut left = rec.u64_at()?;
        m.start_attachment(
            left,
            mcap::records::AttachmentHeader {
                log_time,
                create_time,
                name,
                media_type,
            },
        )
        .map_err(werr)?;
        while left > 0 {
            let n = (left as usize).min(PIECE);
            rec.r.read_exact(&mut piece[..n]).map_err(|e| rec.bad(e))?;
            m.put_attachment_bytes(&piece[..n]).map_err(werr)?;
            left -= n as u64;
        }
        m.finish_attachment().map_err(werr)?;
    }
    Ok(())
}

/// The recording's messages, chunk by chunk in log-time order, written to
/// `m` with the plan's looptime messages merged in between (the
/// recording's first at equal times); how many of the recording's.
fn merge_messages<R: Read + Seek, W: Write + Seek>(
    rec: &mut Recording<'_, R>,
    summary: &mcap::Summary,
    p: &super::mcap::Plan,
    e: &mut Emitter<'_>,
    m: &mut mcap::Writer<W>,
    path: &Path,
) -> Result<u64> {
    let (mut ours, mut copied) = (0usize, 0u64);
    let mut reader = IndexedReader::new(summary).map_err(|e| rec.bad(e))?;
    let mut chunk = Vec::new();
    while let Some(event) = reader.next_event() {
        match event.map_err(|e| rec.bad(e))? {
            IndexedReadEvent::ReadChunkRequest { offset, length } => {
                // A chunk the index places beyond the file is damage, not
                // a reason to allocate it.
                if offset.saturating_add(length as u64) > rec.len {
                    return Err(rec.bad(format!(
                        "its chunk index places a chunk of {length} bytes at byte {offset}, past the end of the file"
                    )));
                }
                rec.r
                    .seek(SeekFrom::Start(offset))
                    .map_err(|e| rec.bad(e))?;
                chunk.resize(length, 0);
                rec.r.read_exact(&mut chunk).map_err(|e| rec.bad(e))?;
                reader
                    .insert_chunk_record_data(offset, &chunk)
                    .map_err(|e| rec.bad(e))?;
            }
            IndexedReadEvent::Message { header, data } => {
                while ours < p.msgs.len() && p.msgs[ours].time < header.log_time {
                    e.emit(m, ours, path)?;
                    ours += 1;
                }
                if !summary.channels.contains_key(&header.channel_id) {
                    return Err(refuse(
                        rec.path,
                        format!("a message is on channel {}, which its summary does not list; rewrite it with `mcap recover` and merge that", header.channel_id),
                    ));
                }
                m.write_to_known_channel(&header, data)
                    .map_err(|e| mcap_err(path, e))?;
                copied += 1;
            }
        }
    }
    while ours < p.msgs.len() {
        e.emit(m, ours, path)?;
        ours += 1;
    }
    Ok(copied)
}

/// The checks a recording's summary must pass before anything is merged:
/// no looptime channels of an earlier merge, no chunk larger than
/// [`MAX_CHUNK_BYTES`] uncompressed, a chunk index when it has messages.
/// Gives the message count its Statistics record states, when it has one.
fn check_recording(
    summary: &mcap::Summary,
    top: &TopLevel,
    recording_path: &Path,
) -> Result<Option<u64>> {
    if let Some(why) = earlier_merge(summary, top) {
        return Err(refuse(recording_path, why));
    }
    if let Some(c) = summary
        .chunk_indexes
        .iter()
        .find(|c| c.uncompressed_size > MAX_CHUNK_BYTES)
    {
        return Err(refuse(
            recording_path,
            format!("its chunk at byte {} says it holds {} bytes uncompressed; chunks are decompressed whole, and looptime takes chunks of up to {} MiB (the MCAP writers and rosbag2 write 1 to 4 MiB): if the recording is not damaged, rewrite it with smaller chunks (`mcap convert`) and merge that", c.chunk_start_offset, c.uncompressed_size, MAX_CHUNK_BYTES >> 20),
        ));
    }
    let expected_messages = summary.stats.as_ref().map(|s| s.message_count);
    if summary.chunk_indexes.is_empty() && expected_messages.unwrap_or(0) > 0 {
        return Err(refuse(
            recording_path,
            "its summary has no chunk index, so its messages cannot be read in time order without holding them all; rewrite it with `mcap recover` and merge that",
        ));
    }
    Ok(expected_messages)
}

/// Copy the recording's schemas and channels into `m` under their own
/// ids, in id order; gives how many records that was.
fn copy_schemas_and_channels<W: Write + Seek>(
    summary: &mcap::Summary,
    m: &mut mcap::Writer<W>,
    path: &Path,
) -> Result<usize> {
    let werr = |e| mcap_err(path, e);
    let mut schemas: Vec<_> = summary.schemas.values().collect();
    schemas.sort_by_key(|s| s.id);
    for s in &schemas {
        m.add_schema_with_id(s.id, &s.name, &s.encoding, &s.data)
            .map_err(werr)?;
    }
    let mut channels: Vec<_> = summary.channels.values().collect();
    channels.sort_by_key(|c| c.id);
    for c in &channels {
        let schema_id = c.schema.as_ref().map_or(0, |s| s.id);
        m.add_channel_with_id(c.id, schema_id, &c.topic, &c.message_encoding, &c.metadata)
            .map_err(werr)?;
    }
    Ok(schemas.len() + channels.len())
}

/// Write the recording read from `recording` (the MCAP file at
/// `recording_path`) with `a`'s looptime channels added on the same
/// timeline into `w`, chunks compressed as `compression` says: every
/// schema, channel, message, attachment and metadata record of the
/// recording, unchanged (ids kept; messages never decoded), its header's
/// profile kept, the looptime schemas and channels under ids the recording
/// does not use, and all messages in one time order.
///
/// # Errors
/// [`AnalyzeError::Recording`] when the evidence has no wall-clock anchor;
/// when the recording is not a readable MCAP file, has no summary or chunk
/// index, holds a record the crate does not model or a message outside any
/// chunk, already holds looptime channels, or does not overlap the episode
/// in time (unless `force`); [`AnalyzeError::Write`] when writing fails.
pub fn write_into<R: Read + Seek, W: Write + Seek>(
    a: &Analysis,
    recording: R,
    recording_path: &Path,
    force: bool,
    compression: Compression,
    w: W,
    path: &Path,
) -> Result<IntoSummary> {
    if a.evidence.header.wall_clock.is_none() {
        return Err(refuse(
            &a.evidence.dir,
            "the evidence has no wall-clock anchor (it was recorded before looptime wrote one), so its times cannot be placed on a recording's wall-clock timeline; export it alone (--format mcap without --into), or record the run again",
        ));
    }
    let mut r = BufReader::with_capacity(1 << 16, recording);
    let len = r
        .seek(SeekFrom::End(0))
        .and_then(|n| r.rewind().map(|()| n))
        .map_err(|e| refuse(recording_path, format!("it cannot be read ({e})")))?;
    let mut rec = Recording {
        r,
        path: recording_path,
        len,
    };
    let top = rec.top_level()?;
    let summary = rec.summary()?.ok_or_else(|| {
        refuse(
            recording_path,
            "it has no summary section, so its messages cannot be read in time order without holding them all; rosbag2 and the MCAP writers always write one: rewrite it with `mcap recover` and merge that",
        )
    })?;
    let expected_messages = check_recording(&summary, &top, recording_path)?;
    let mut p = plan(a)?;
    if !force {
        check_overlap(&summary, p.range(), recording_path)?;
    }
    p.meta
        .insert("recording_library".into(), top.library.clone());
    let mut m = writer(w, path, compression, &top.profile)?;
    let schemas_and_channels = copy_schemas_and_channels(&summary, &mut m, path)?;
    let ids = add_channels(&mut m, &p, path)?;
    let mut e = Emitter::new(&p, ids);
    let copied = merge_messages(&mut rec, &summary, &p, &mut e, &mut m, path)?;
    if let Some(n) = expected_messages.filter(|n| *n != copied) {
        return Err(refuse(
            recording_path,
            format!("its Statistics record counts {n} messages, but its chunk index gave {copied}; nothing is merged with messages missing: rewrite it with `mcap recover` and merge that"),
        ));
    }
    copy_attachments(&mut rec, &top, &mut m, path)?;
    for md in &top.metadata {
        m.write_metadata(md).map_err(|e| mcap_err(path, e))?;
    }
    let copied_records = (schemas_and_channels + top.attachments.len() + top.metadata.len()) as u64;
    let added = e.finish(&mut m, path)?;
    Ok(IntoSummary {
        copied_messages: copied,
        copied_records,
        profile: top.profile,
        added,
    })
}
