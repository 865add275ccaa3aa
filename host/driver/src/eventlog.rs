//! The event log on disk: an application's events as JSON lines, compressed with zstd,
//! in files rolled by size under `<flint.eventLog.dir>/<app-id>/`.
//!
//! A task that succeeded at its first attempt with nothing to say is not a line of its
//! own: its job's tasks of the same frame are one `tasks_succeeded` line
//! (`coalesce.rs`). Each write is a whole zstd frame (a batch of lines, at most a second old), so a log
//! being written is always readable up to its last batch, and a driver that dies loses
//! at most that batch. A log whose last event is not `application_end` belongs to an
//! application that is still running (or died without saying so).

use crate::journal::{Envelope, Store};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Batches of events waiting for the writer before new ones are dropped (and counted):
/// the event loop never waits on a disk.
const QUEUE: usize = 4096;

/// The writer compresses what it holds once it is this large, or a second old.
const FRAME: usize = 1 << 20;
const FRAME_AGE: Duration = Duration::from_secs(1);

/// zstd's level: its default, fast to write, several times smaller than the text.
const LEVEL: i32 = 3;

const PREFIX: &str = "events-";
const SUFFIX: &str = ".jsonl.zst";

/// Writes one application's events on a thread of its own.
pub struct EventLogWriter {
    sender: Option<std::sync::mpsc::SyncSender<Vec<Envelope>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    dropped: Arc<AtomicU64>,
    pub folder: PathBuf,
}

impl EventLogWriter {
    /// Starts the log of `app_id` in a new folder under `dir` (created if missing),
    /// rolling to a new file past `roll_size` bytes.
    pub fn create(dir: &Path, app_id: &str, roll_size: u64) -> std::io::Result<EventLogWriter> {
        std::fs::create_dir_all(dir)?;
        let name: String = app_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
            .collect();
        let name = if name.starts_with('.') || name.is_empty() { format!("app{name}") } else { name };
        // A second run of the same application id gets a folder of its own.
        let mut folder = dir.join(&name);
        let mut n = 1;
        loop {
            // What an application did is its operator's to read: the folder is private.
            let made = {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new().mode(0o700).create(&folder)
            };
            match made {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    folder = dir.join(format!("{name}-{n}"));
                    n += 1;
                }
                Err(e) => return Err(e),
            }
        }
        let (sender, rx) = std::sync::mpsc::sync_channel::<Vec<Envelope>>(QUEUE);
        let mut files = Files { folder: folder.clone(), number: 0, file: None, written: 0, roll_size };
        files.roll()?;
        let thread = std::thread::Builder::new().name("flint-event-log".into()).spawn(move || {
            let mut text = Vec::new();
            let mut oldest: Option<Instant> = None;
            let mut coalescer = coalesce::Coalescer::default();
            let mut ready = Vec::new();
            loop {
                let wait = oldest.map_or(FRAME_AGE, |t| FRAME_AGE.saturating_sub(t.elapsed()));
                let closed = match rx.recv_timeout(wait) {
                    Ok(batch) => {
                        for envelope in batch {
                            coalescer.take(envelope, &mut ready);
                        }
                        lines(&mut text, &mut ready);
                        oldest.get_or_insert_with(Instant::now);
                        false
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => false,
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => true,
                };
                let due = oldest.is_some_and(|t| t.elapsed() >= FRAME_AGE) || text.len() >= FRAME || closed;
                if due {
                    coalescer.flush(&mut ready);
                    lines(&mut text, &mut ready);
                }
                if due && !text.is_empty() {
                    if let Err(e) = files.write_frame(&text) {
                        tracing::warn!(error = %e, folder = %files.folder.display(), "the event log cannot be written");
                    }
                    text.clear();
                    oldest = None;
                }
                if closed {
                    if let Some(file) = &files.file {
                        let _ = file.sync_all();
                    }
                    return;
                }
            }
        })?;
        Ok(EventLogWriter { sender: Some(sender), thread: Some(thread), dropped: Default::default(), folder })
    }

    /// The writer `flint.eventLog.*` asks for, if any; an error names the folder.
    pub fn from_settings(
        settings: &flint_proto::Settings,
        app_id: &str,
    ) -> Result<Option<EventLogWriter>, (String, std::io::Error)> {
        let Some(dir) = &settings.event_log_dir else { return Ok(None) };
        let writer = EventLogWriter::create(Path::new(dir), app_id, settings.event_log_roll_size);
        writer.map(Some).map_err(|e| (dir.clone(), e))
    }

    /// Queues a batch; a batch the writer has no room for is dropped and counted.
    pub fn send(&self, batch: Vec<Envelope>) {
        let Some(sender) = &self.sender else { return };
        if let Err(std::sync::mpsc::TrySendError::Full(lost)) = sender.try_send(batch) {
            let before = self.dropped.fetch_add(lost.len() as u64, Ordering::Relaxed);
            if before == 0 {
                tracing::warn!("the event log falls behind: events are being dropped");
            }
        }
    }

    /// Events dropped because the writer fell behind, counted as it goes.
    pub fn dropped(&self) -> Arc<AtomicU64> {
        self.dropped.clone()
    }

    /// Writes what is queued and closes the log.
    pub fn close(&mut self) {
        self.sender = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for EventLogWriter {
    fn drop(&mut self) {
        self.close();
    }
}

/// Appends `events` to `text` as JSON lines, leaving `events` empty.
fn lines(text: &mut Vec<u8>, events: &mut Vec<Envelope>) {
    for envelope in events.drain(..) {
        if serde_json::to_writer(&mut *text, &envelope).is_ok() {
            text.push(b'\n');
        }
    }
}

mod coalesce;

struct Files {
    folder: PathBuf,
    number: u32,
    file: Option<std::fs::File>,
    written: u64,
    roll_size: u64,
}

impl Files {
    fn roll(&mut self) -> std::io::Result<()> {
        self.number += 1;
        let path = self.folder.join(format!("{PREFIX}{:05}{SUFFIX}", self.number));
        use std::os::unix::fs::OpenOptionsExt;
        self.file = Some(std::fs::OpenOptions::new().create_new(true).append(true).mode(0o600).open(path)?);
        self.written = 0;
        Ok(())
    }

    fn write_frame(&mut self, text: &[u8]) -> std::io::Result<()> {
        if self.written >= self.roll_size {
            self.roll()?;
        }
        let frame = zstd::bulk::compress(text, LEVEL)?;
        let file = self.file.as_mut().ok_or_else(|| std::io::Error::other("no file"))?;
        file.write_all(&frame)?;
        self.written += frame.len() as u64;
        Ok(())
    }
}

/// An application found in an event log directory.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct LoggedApp {
    /// The folder's name, which `flint history` addresses it by.
    pub id: String,
    pub app_id: String,
    pub started_ms: u64,
    pub ended_ms: Option<u64>,
    /// No `application_end` in its log: still running, or died without saying.
    pub running: bool,
}

/// The log files of the application in `folder`, in order, with their sizes (which
/// change while it is written).
pub fn log_files(folder: &Path) -> std::io::Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(PREFIX) && name.ends_with(SUFFIX) {
            files.push((entry.path(), entry.metadata()?.len()));
        }
    }
    files.sort();
    Ok(files)
}

/// Rebuilds an application's store from its log. A torn last frame (a driver that
/// died mid-write) ends the reading there; a line this flint cannot read is skipped and
/// counted in the second value.
pub fn read_app(folder: &Path, retained_jobs: usize) -> std::io::Result<(Store, u64)> {
    let mut store = Store::new(retained_jobs);
    let mut skipped = 0;
    for (path, _) in log_files(folder)? {
        let decoder = zstd::stream::read::Decoder::new(std::fs::File::open(&path)?)?;
        let mut lines = std::io::BufReader::new(decoder);
        loop {
            match next_line(&mut lines) {
                Ok(Line::End) | Err(_) => break,
                Ok(Line::TooLong) => skipped += 1,
                Ok(Line::Text(line)) => {
                    match std::str::from_utf8(&line).ok().and_then(|l| Envelope::parse(l).ok()) {
                        Some(envelope) => store.apply(&envelope),
                        None => skipped += 1,
                    }
                }
            }
        }
    }
    Ok((store, skipped))
}

/// The longest line of an event log read back: the events the driver writes are a few
/// KiB at most (messages and log tails are bounded), so a longer one was not written
/// by it and is skipped without being held.
const MAX_LINE: usize = 4 << 20;

enum Line {
    Text(Vec<u8>),
    TooLong,
    End,
}

/// The next line of `input` up to [`MAX_LINE`] bytes; a longer one is read through
/// to its end in pieces and only said to be too long.
fn next_line(input: &mut impl BufRead) -> std::io::Result<Line> {
    use std::io::Read;
    let mut line = Vec::new();
    if input.by_ref().take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line)? == 0 {
        return Ok(Line::End);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        return Ok(Line::Text(line));
    }
    if line.len() <= MAX_LINE {
        return Ok(Line::Text(line)); // the last line, without a newline
    }
    drop(line);
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            return Ok(Line::TooLong);
        }
        match chunk.iter().position(|b| *b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(Line::TooLong);
            }
            None => {
                let n = chunk.len();
                input.consume(n);
            }
        }
    }
}

/// What the first events of an application's log say of it.
pub fn describe(folder: &Path, store: &Store) -> LoggedApp {
    LoggedApp {
        id: folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        app_id: store.app_id.clone(),
        started_ms: store.started_ms,
        ended_ms: store.ended_ms,
        running: store.ended_ms.is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::AppEvent;

    #[test]
    fn a_line_past_the_bound_is_skipped_without_being_held() {
        let mut text = b"first\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', MAX_LINE * 2));
        text.extend(b"\nlast");
        let mut input = std::io::BufReader::with_capacity(64 << 10, &text[..]);
        let mut seen = Vec::new();
        loop {
            match next_line(&mut input).unwrap() {
                Line::End => break,
                Line::TooLong => seen.push("too long".to_owned()),
                Line::Text(t) => seen.push(String::from_utf8(t).unwrap()),
            }
        }
        assert_eq!(seen, ["first", "too long", "last"]);
    }

    #[test]
    fn a_log_reads_back_across_rolled_files_and_a_torn_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = EventLogWriter::create(dir.path(), "app/../x", 1).unwrap();
        assert_eq!(writer.folder.parent().unwrap(), dir.path(), "the id cannot leave the directory");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&writer.folder).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "what the application did is its operator's to read");
        let start = AppEvent::ApplicationStart {
            app_id: "app/../x".into(),
            flint_version: "0".into(),
            config: Default::default(),
        };
        writer.send(vec![Envelope::now(start)]);
        for job in 1..=3 {
            writer.send(vec![Envelope::now(AppEvent::JobStart {
                job: flint_proto::JobId(job),
                name: "j".into(),
                tasks: 1,
            })]);
            // Each batch a frame of its own, so that the tiny roll size rolls files.
            std::thread::sleep(FRAME_AGE + Duration::from_millis(100));
        }
        writer.close();
        let files = log_files(&writer.folder).unwrap();
        assert!(files.len() >= 2, "rolled: {files:?}");
        // A driver killed mid-write leaves half a frame at the end.
        let last = &files.last().unwrap().0;
        std::fs::OpenOptions::new()
            .append(true)
            .open(last)
            .unwrap()
            .write_all(&[0x28, 0xb5, 0x2f, 0xfd, 1])
            .unwrap();
        let (store, skipped) = read_app(&writer.folder, 10).unwrap();
        assert_eq!((store.app_id.as_str(), skipped), ("app/../x", 0));
        assert_eq!(store.status().jobs.len(), 3);
        assert!(describe(&writer.folder, &store).running, "no application_end yet");
    }

    #[test]
    fn uneventful_tasks_are_a_line_a_frame_and_read_back_as_the_live_store_has_them() {
        use flint_proto::{JobId, TaskFailure, TaskMetrics};
        let dir = tempfile::tempdir().unwrap();
        let mut writer = EventLogWriter::create(dir.path(), "app", 1 << 30).unwrap();
        let mut live = Store::new(10);
        let tasks = 100_000u32;
        let mut events = vec![
            AppEvent::ApplicationStart {
                app_id: "app".into(),
                flint_version: "0".into(),
                config: Default::default(),
            },
            AppEvent::JobStart { job: JobId(1), name: "j".into(), tasks },
        ];
        let end = |index, attempt, failure: Option<TaskFailure>, log_tail: Option<&str>| AppEvent::TaskEnd {
            job: JobId(1),
            index,
            attempt,
            executor: "a".into(),
            duration_ms: u64::from(index % 100) + 1,
            failure,
            log_tail: log_tail.map(Into::into),
            metrics: TaskMetrics {
                input_bytes: u64::from(index),
                input_records: 1,
                read_us: 0,
                compile_us: 0,
                shuffle_write_bytes: 0,
            },
        };
        let start = |index, attempt| AppEvent::TaskStart {
            job: JobId(1),
            index,
            attempt,
            executor: "a".into(),
            timeline: None,
        };
        for index in 0..tasks {
            events.push(start(index, 0));
            match index {
                // One fails once and is retried; one says something.
                5 => {
                    let trap = TaskFailure::Trap { message: "once".into(), backtrace: None };
                    events.extend([end(5, 0, Some(trap), None), start(5, 1), end(5, 1, None, None)]);
                }
                9 => events.push(end(9, 0, None, Some("hello"))),
                _ => events.push(end(index, 0, None, None)),
            }
        }
        events.push(AppEvent::JobEnd {
            job: JobId(1),
            succeeded: true,
            cancelled: false,
            error: None,
            attempts: tasks + 1,
            progress: None,
            stages: Vec::new(),
        });
        for chunk in events.chunks(1000) {
            let batch: Vec<Envelope> = chunk.iter().cloned().map(Envelope::now).collect();
            for envelope in &batch {
                live.apply(envelope);
            }
            writer.send(batch);
        }
        writer.close();
        let mut lines = 0;
        for (path, _) in log_files(&writer.folder).unwrap() {
            let text = zstd::stream::decode_all(std::fs::File::open(path).unwrap()).unwrap();
            lines += text.iter().filter(|b| **b == b'\n').count();
        }
        // The application and the job, task 5's four lines and task 9's two, and a batch
        // line or a few: not two lines a task.
        assert!(lines < 40, "{lines} lines");
        let (read, skipped) = read_app(&writer.folder, 10).unwrap();
        assert_eq!(skipped, 0);
        let (live, read) = (live.job(JobId(1)).unwrap(), read.job(JobId(1)).unwrap());
        assert_eq!(read.status.progress, live.status.progress);
        assert_eq!(read.status.progress.done, tasks);
        assert_eq!(read.tasks.len() + read.tasks_not_kept.len() as usize, tasks as usize);
        // The same records as the live store kept (its slowest), the same failure.
        assert_eq!(read.tasks.keys().collect::<Vec<_>>(), live.tasks.keys().collect::<Vec<_>>());
        assert_eq!(read.tasks.len(), crate::journal::SUCCEEDED_KEPT);
        assert_eq!(read.failures.len(), 1);
        assert_eq!((read.failures[0].task, read.failures[0].attempt), (5, 0));
        // The same timeline: the first attempts to start, task 5's retry among them,
        // each its own bar, and as many left out.
        assert_eq!(live.attempts.len(), crate::journal::TIMELINE_KEPT);
        assert!(read.attempts == live.attempts, "the timeline read back is the live one");
        assert_eq!(read.attempts_not_kept, live.attempts_not_kept);
        assert_eq!(live.attempts_not_kept, u64::from(tasks) + 1 - crate::journal::TIMELINE_KEPT as u64);
        for (r, l) in read.succeeded.sketches.iter().zip(&live.succeeded.sketches) {
            assert_eq!(r.count(), l.count());
            for q in [0.0, 0.5, 1.0] {
                assert!(r.quantile(q).abs_diff(l.quantile(q)) <= l.quantile(q) / 32 + 1, "{q}");
            }
        }
        assert!(read.tasks.values().all(|t| t.duration_ms == Some(100)), "the slowest");
    }
}
