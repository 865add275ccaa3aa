//! Line splits over ranged reads: the lines whose first byte falls in `start..end`, as
//! Hadoop's line reader takes them, handed out a batch at a time. A line that starts
//! before `start` belongs to the split before; a line that starts before `end` is read
//! to its end, past `end` if need be. One reader serves every source: a file's
//! positioned reads, the driver's data service, an object store's ranged GETs.

use crate::InputError;
use flint_proto::recycle::Recycler;

/// Bytes read past a split's end with its last block, to find the end of its last line
/// without another round trip in the common case.
pub const LOOKAHEAD: u64 = 64 << 10;

/// The most one read asks for: what a reader holds, beside one batch, at most.
pub const BLOCK: u64 = 8 << 20;

/// A split's first read. The task computes on nothing until it is in, so it is small;
/// each read after it asks for twice the one before, up to [`BLOCK`], and comes in
/// behind the task's work on the one before ([`ReadAhead`]). A whole block first would
/// leave the slot's core idle while 8 MiB crossed the wire, once per task.
pub const FIRST_READ: u64 = 1 << 20;

/// The most one further read asks for while a long last line goes on.
const MAX_STEP: u64 = 16 << 20;

/// The longest line a split may hold, and how far past its split's end a last line may
/// run: an input without newlines must not make one task's host read (and hold) the
/// rest of it.
pub const MAX_LINE: u64 = 64 << 20;

/// The buffers blocks are read into, handed back by the [`SplitLines`] done with them
/// for the next read: a split's block then lands in memory already mapped. Take one
/// for a read whose bytes a `SplitLines` gets. Four kept at most (32 MiB idle, as many
/// as two slots reading ahead hold; 64 at the very most).
pub static BLOCKS: Recycler = Recycler::new(4, (BLOCK + LOOKAHEAD) as usize);

/// The lines of a split of an input `size` bytes long, read through `read_at(offset,
/// len)`, which must return exactly `len` bytes (it is never asked past `size`). A
/// split no larger than [`FIRST_READ`] whose last line ends within [`LOOKAHEAD`] of its
/// end costs one read: the split, the byte before it and the lookahead; a longer one is
/// read in reads that double up to [`BLOCK`]. Memory is one block (with, for a
/// moment, the line that crosses into it from the one before) and the batch being
/// handed out, whatever the split's size.
pub struct SplitLines<R> {
    read_at: R,
    start: u64,
    end: u64,
    size: u64,
    /// What was read and not yet handed out starts at `buf[head]`; `buf[0]` is the
    /// input's byte `at`.
    buf: Vec<u8>,
    head: usize,
    at: u64,
    /// The first line found (and what came before it skipped).
    begun: bool,
    /// One past the split's last byte, once its last line's end is seen.
    stop: Option<u64>,
    /// Where the search for the last line's end goes on.
    scanned: u64,
    /// The next read past `end` asks for this much.
    step: u64,
    /// The last read before `end` asked for this much (0: none yet).
    last_read: u64,
    /// A block read while a line was unfinished, kept whole while `buf` holds just that
    /// line (its start from the block before, its end from this one): its bytes from
    /// the offset given come after `buf`'s. A read's block is then not copied behind
    /// the few bytes a line carries over from the one before (unless no line ends in
    /// it).
    ahead: Option<(Vec<u8>, usize)>,
    done: bool,
}

impl<R: FnMut(u64, u64) -> Result<Vec<u8>, InputError>> SplitLines<R> {
    pub fn new(read_at: R, start: u64, end: u64, size: u64) -> SplitLines<R> {
        let end = end.min(size);
        let from = start.saturating_sub(1);
        SplitLines {
            read_at,
            start,
            end,
            size,
            buf: Vec::new(),
            head: 0,
            at: from,
            begun: false,
            stop: None,
            scanned: end.saturating_sub(1),
            step: LOOKAHEAD,
            last_read: 0,
            ahead: None,
            done: start >= end,
        }
    }

    /// The next whole lines, about `max` bytes of them: as many as fit, or the one line
    /// that does not (up to [`MAX_LINE`]); empty at the split's end.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<u8>, InputError> {
        let max = max.max(1);
        if !self.begun && !self.done {
            self.begin()?;
        }
        while !self.done {
            self.find_stop();
            let avail = &self.buf[self.head..];
            // The split's bytes among those held, and whether they are all of its rest.
            let (limit, complete) = match self.stop {
                Some(stop) => ((stop - self.at) as usize - self.head, true),
                None => (avail.len(), false),
            };
            let cut = if complete && limit <= max {
                self.done = true;
                Some(limit)
            } else if let Some(i) = avail[..limit.min(max)].iter().rposition(|b| *b == b'\n') {
                Some(i + 1)
            } else if limit > max {
                // One line longer than a batch: handed out whole, once it is all here.
                match avail[..limit].iter().position(|b| *b == b'\n') {
                    Some(i) => Some(i + 1),
                    None if complete => {
                        self.done = true;
                        Some(limit)
                    }
                    None => None,
                }
            } else {
                None
            };
            if let Some(cut) = cut {
                if cut as u64 > MAX_LINE {
                    return Err(InputError::LineTooLong { end: self.end, max: MAX_LINE });
                }
                let batch = avail[..cut].to_vec();
                self.head += cut;
                return Ok(batch);
            }
            if avail.len() as u64 > MAX_LINE {
                return Err(InputError::LineTooLong { end: self.end, max: MAX_LINE });
            }
            self.read_more()?;
        }
        Ok(Vec::new())
    }

    /// Skips what comes before the split's first line: nothing at the input's start,
    /// else up to the first newline at or after `start - 1`.
    fn begin(&mut self) -> Result<(), InputError> {
        if self.start == 0 {
            self.begun = true;
            return Ok(());
        }
        loop {
            if let Some(i) = self.buf[self.head..].iter().position(|b| *b == b'\n') {
                let first = self.at + (self.head + i) as u64 + 1;
                if first >= self.end {
                    // No line starts in this split.
                    self.done = true;
                } else {
                    self.head += i + 1;
                    self.begun = true;
                }
                return Ok(());
            }
            self.head = self.buf.len();
            if self.at + self.buf.len() as u64 >= self.end {
                self.done = true;
                return Ok(());
            }
            self.read_more()?;
        }
    }

    /// Looks for the last line's end in what was read since the last look.
    fn find_stop(&mut self) {
        let read_to = self.at + self.buf.len() as u64;
        if self.stop.is_some() || self.scanned >= read_to {
            return;
        }
        let from = (self.scanned.max(self.at + self.head as u64) - self.at) as usize;
        self.stop = match self.buf[from..].iter().position(|b| *b == b'\n') {
            Some(i) => Some(self.at + (from + i) as u64 + 1),
            None if read_to >= self.size => Some(self.size),
            None => None,
        };
        self.scanned = read_to;
    }

    /// One more read after what is held, what was handed out dropped first.
    fn read_more(&mut self) -> Result<(), InputError> {
        if let Some((block, from)) = self.ahead.take() {
            if self.head == self.buf.len() {
                // The line that crossed into it is handed out: on with the block itself.
                self.at += (self.buf.len() - from) as u64;
                self.head = from;
                BLOCKS.give(std::mem::replace(&mut self.buf, block));
            } else {
                self.buf.drain(..self.head);
                self.at += self.head as u64;
                self.head = 0;
                self.buf.extend_from_slice(&block[from..]);
                BLOCKS.give(block);
            }
            return Ok(());
        }
        let pos = self.at + self.buf.len() as u64;
        if pos >= self.size {
            // Everything is read: the rest is the split's.
            self.stop = Some(self.size);
            return Ok(());
        }
        if pos > self.end + MAX_LINE {
            return Err(InputError::LineTooLong { end: self.end, max: MAX_LINE });
        }
        let len = if pos < self.end {
            self.last_read = within_split(pos, self.end, self.size, self.last_read);
            self.last_read
        } else {
            self.step = (self.step * 2).min(MAX_STEP);
            self.step
        }
        .min(self.size - pos);
        self.buf.drain(..self.head);
        self.at += self.head as u64;
        self.head = 0;
        let more = (self.read_at)(pos, len)?;
        if more.len() as u64 != len {
            return Err(InputError::Changed { offset: pos, len, got: more.len() as u64 });
        }
        if self.buf.is_empty() {
            // Nothing carried over (the common case at a split's start): the block read
            // is the buffer from now on, no copy; the one it replaces goes back for a
            // next read.
            BLOCKS.give(std::mem::replace(&mut self.buf, more));
        } else if let Some(i) = more.iter().position(|b| *b == b'\n') {
            // A line carried over ends in the block: that line alone is joined up (a
            // copy of its bytes, not of the block's), and the block follows it. The
            // buffer the line came from goes back for a next read.
            let mut line = Vec::with_capacity(self.buf.len() + i + 1);
            line.extend_from_slice(&self.buf);
            line.extend_from_slice(&more[..=i]);
            BLOCKS.give(std::mem::replace(&mut self.buf, line));
            self.ahead = Some((more, i + 1));
        } else {
            self.buf.extend_from_slice(&more);
            BLOCKS.give(more);
        }
        Ok(())
    }
}

impl<R> Drop for SplitLines<R> {
    fn drop(&mut self) {
        BLOCKS.give(std::mem::take(&mut self.buf));
        if let Some((block, _)) = self.ahead.take() {
            BLOCKS.give(block);
        }
    }
}

/// What [`SplitLines`] asks for in one read at `pos`, before its split's `end`, after a
/// read of `previous` bytes (0: the split's first): [`FIRST_READ`], then twice the read
/// before up to [`BLOCK`], and the [`LOOKAHEAD`] past the end with the last block.
fn within_split(pos: u64, end: u64, size: u64, previous: u64) -> u64 {
    let step = if previous == 0 { FIRST_READ } else { previous.saturating_mul(2).min(BLOCK) };
    (end + LOOKAHEAD - pos).min(step).min(size - pos)
}

/// A split's reads from a source across the network (the driver's data service, an
/// object store), fetching the read after each one on a blocking thread while the
/// task works on this one: the read [`SplitLines`] asks for next (twice this one, up to
/// [`BLOCK`]), as long as its split goes on. The next read's wait is hidden behind the
/// task's compute, for one more block held at most. A read that was not foreseen (a
/// long last line) is made as it is asked.
pub struct ReadAhead {
    read: std::sync::Arc<dyn Fn(u64, u64) -> Result<Vec<u8>, InputError> + Send + Sync>,
    handle: tokio::runtime::Handle,
    end: u64,
    size: u64,
    /// The read begun ahead: its offset, its length, and the bytes when they come.
    next: Option<(u64, u64, Fetch)>,
    /// It was begun before the task ran ([`ReadAhead::begin`]), within a bound that
    /// ran from then, not from the task's start.
    early: bool,
}

/// A read running on a blocking thread.
type Fetch = tokio::task::JoinHandle<Result<Vec<u8>, InputError>>;

/// A split's first read, begun before its task runs. Dropped unused (the task killed
/// while it waited), the read ends on its own: reads are bounded by a deadline.
pub struct Begun {
    at: u64,
    len: u64,
    fetch: Fetch,
}

impl ReadAhead {
    /// Reads of the split `..end` of an input `size` bytes long through `read`, on
    /// `handle`'s blocking threads.
    pub fn new(
        read: impl Fn(u64, u64) -> Result<Vec<u8>, InputError> + Send + Sync + 'static,
        handle: tokio::runtime::Handle,
        end: u64,
        size: u64,
    ) -> ReadAhead {
        ReadAhead {
            read: std::sync::Arc::new(read),
            handle,
            end: end.min(size),
            size,
            next: None,
            early: false,
        }
    }

    /// Begins, on `handle`'s blocking threads, the first read a [`SplitLines`] of
    /// `start..end` asks for, before its task runs (while it waits for a slot): the
    /// task that opens the split with it ([`ReadAhead::with_begun`]) then starts on
    /// bytes already here. `None` for a split with nothing to read.
    pub fn begin(
        read: impl FnOnce(u64, u64) -> Result<Vec<u8>, InputError> + Send + 'static,
        handle: &tokio::runtime::Handle,
        start: u64,
        end: u64,
        size: u64,
    ) -> Option<Begun> {
        let end = end.min(size);
        if start >= end {
            return None;
        }
        // Where `SplitLines` reads first: the byte before the split says whether a
        // line starts at `start`.
        let at = start.saturating_sub(1);
        let len = within_split(at, end, size, 0);
        Some(Begun { at, len, fetch: handle.spawn_blocking(move || read(at, len)) })
    }

    /// This reader with its split's first read already begun ([`ReadAhead::begin`]).
    pub fn with_begun(mut self, begun: Option<Begun>) -> ReadAhead {
        if let Some(Begun { at, len, fetch }) = begun {
            self.next = Some((at, len, fetch));
            self.early = true;
        }
        self
    }

    /// The `len` bytes at `offset` (the read begun ahead, when it is that one), and the
    /// next read begun.
    pub fn read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, InputError> {
        let early = std::mem::take(&mut self.early);
        let data = match self.next.take() {
            Some((at, ahead, fetch)) if (at, ahead) == (offset, len) => {
                let fetched = self
                    .handle
                    .block_on(fetch)
                    .unwrap_or_else(|e| Err(InputError::Driver(format!("the read ahead was lost: {e}"))));
                match fetched {
                    // Begun before the task ran, it failed under a bound of its own:
                    // the task makes it again under its own, and any failure is that one.
                    Err(_) if early => (self.read)(offset, len)?,
                    fetched => fetched?,
                }
            }
            // Not the one foreseen: it ends on its own (reads are bounded by the task's
            // deadline), and nobody waits for it.
            _ => (self.read)(offset, len)?,
        };
        let next = offset + len;
        if next < self.end {
            let ahead = within_split(next, self.end, self.size, len);
            let read = self.read.clone();
            self.next = Some((next, ahead, self.handle.spawn_blocking(move || read(next, ahead))));
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(text: &[u8]) -> impl FnMut(u64, u64) -> Result<Vec<u8>, InputError> + '_ {
        move |offset, len| {
            let (offset, len) = (offset as usize, len as usize);
            assert!(offset + len <= text.len(), "read past the end: {offset}+{len}");
            Ok(text[offset..offset + len].to_vec())
        }
    }

    /// The whole split, batch by batch, each checked: whole lines, within `max` unless
    /// it is one line.
    fn read_split(text: &[u8], start: u64, end: u64, max: usize) -> Result<Vec<u8>, InputError> {
        let mut lines = SplitLines::new(reader(text), start, end, text.len() as u64);
        let mut all = Vec::new();
        loop {
            let batch = lines.next_batch(max)?;
            if batch.is_empty() {
                assert!(lines.next_batch(max)?.is_empty(), "the end stays the end");
                return Ok(all);
            }
            let body = batch.strip_suffix(b"\n").unwrap_or(&batch);
            assert!(batch.len() <= max || !body.contains(&b'\n'), "{} bytes over {max}", batch.len());
            all.extend(batch);
        }
    }

    #[test]
    fn every_line_lands_in_exactly_one_split_wherever_the_cuts_fall_and_whatever_the_batch() {
        let text = b"alpha beta\ngamma\n\ndelta epsilon zeta\neta\nno newline at end";
        let len = text.len() as u64;
        for max in [1, 3, 7, 12, 1000] {
            for parts in 1..=len {
                let size = len.div_ceil(parts);
                let mut joined = Vec::new();
                let mut start = 0;
                while start < len {
                    let end = (start + size).min(len);
                    joined.extend(read_split(text, start, end, max).unwrap());
                    start = end;
                }
                assert_eq!(joined, text, "{parts} parts, batches of {max}");
            }
        }
    }

    #[test]
    fn a_line_longer_than_the_lookahead_is_read_whole_by_the_split_it_starts_in() {
        let mut text = b"short\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 3 * LOOKAHEAD as usize));
        text.extend(b"\ntail\n");
        let len = text.len() as u64;
        let first = read_split(&text, 0, 10, 1 << 20).unwrap();
        assert_eq!(first.len(), 6 + 3 * LOOKAHEAD as usize + 1);
        assert_eq!(read_split(&text, 10, 20, 1 << 20).unwrap(), b"");
        assert_eq!(read_split(&text, 20, len, 1 << 20).unwrap(), b"tail\n");
    }

    #[test]
    fn a_line_without_end_stops_being_read_past_the_limit() {
        // Running past the split's end, and within a split as large as the input, with
        // or without a newline after it.
        for len in [2 * MAX_LINE, MAX_LINE + 1] {
            for newline in [false, true] {
                let mut text = vec![b'x'; len as usize];
                if newline {
                    text.extend(b"\nshort\n");
                }
                for end in [1 << 20, text.len() as u64] {
                    match read_split(&text, 0, end, 1 << 20) {
                        Ok(data) => panic!("read {} bytes of one line", data.len()),
                        Err(error) => assert!(matches!(error, InputError::LineTooLong { .. }), "{error}"),
                    }
                }
            }
        }
    }

    #[test]
    fn one_read_serves_a_split_whose_last_line_ends_within_the_lookahead() {
        let text = b"one\ntwo\nthree\nfour\n".repeat(100);
        let mut reads = 0;
        let counting = |offset: u64, len: u64| {
            reads += 1;
            Ok::<_, InputError>(text[offset as usize..(offset + len) as usize].to_vec())
        };
        let mut lines = SplitLines::new(counting, 100, 900, text.len() as u64);
        while !lines.next_batch(64).unwrap().is_empty() {}
        drop(lines);
        assert_eq!(reads, 1);
    }

    #[test]
    fn a_split_many_blocks_long_is_read_in_reads_that_double_up_to_a_block() {
        let text = b"a line of some words\n".repeat((5 * BLOCK as usize) / 21);
        let mut asked = Vec::new();
        let counting = |offset: u64, len: u64| {
            asked.push(len);
            Ok::<_, InputError>(text[offset as usize..(offset + len) as usize].to_vec())
        };
        let mut lines = SplitLines::new(counting, 0, text.len() as u64, text.len() as u64);
        let mut total = 0;
        loop {
            let batch = lines.next_batch(1 << 20).unwrap();
            if batch.is_empty() {
                break;
            }
            assert!(lines.buf.capacity() as u64 <= 2 * BLOCK, "held {}", lines.buf.capacity());
            total += batch.len();
        }
        drop(lines);
        assert_eq!(total, text.len());
        // The first read, twice it, four times it, then whole blocks to the end.
        assert_eq!(asked[..5], [FIRST_READ, 2 * FIRST_READ, 4 * FIRST_READ, BLOCK, BLOCK], "{asked:?}");
        assert_eq!(asked.iter().sum::<u64>(), text.len() as u64, "each byte read once");
        assert!(asked.len() <= 9 && asked.iter().all(|len| *len <= BLOCK), "{asked:?}");
    }

    #[test]
    fn a_block_read_into_an_empty_buffer_becomes_it_without_a_copy() {
        let text = b"one\ntwo\nthree\n".repeat(1000);
        let mut given = Vec::new();
        let reading = |offset: u64, len: u64| {
            let block = text[offset as usize..(offset + len) as usize].to_vec();
            given.push(block.as_ptr() as usize);
            Ok::<_, InputError>(block)
        };
        let mut lines = SplitLines::new(reading, 0, text.len() as u64, text.len() as u64);
        assert_eq!(lines.next_batch(100).unwrap(), b"one\ntwo\nthree\n".repeat(7));
        let held = lines.buf.as_ptr() as usize;
        drop(lines);
        assert_eq!(given, [held], "the one block read is the buffer itself");
    }

    #[test]
    fn every_block_read_becomes_the_buffer_though_lines_cross_from_one_block_into_the_next() {
        // 21-byte lines: no read of 1, 2, 4 or 8 MiB ends on a line's end.
        let text = b"a line of some words\n".repeat((3 * BLOCK as usize) / 21 + 5);
        let given = std::cell::RefCell::new(Vec::new());
        let reading = |offset: u64, len: u64| {
            let block = text[offset as usize..(offset + len) as usize].to_vec();
            given.borrow_mut().push(block.as_ptr() as usize);
            Ok::<_, InputError>(block)
        };
        let size = text.len() as u64;
        let mut lines = SplitLines::new(reading, 0, size, size);
        let (mut held, mut all) = (Vec::new(), Vec::new());
        loop {
            let batch = lines.next_batch(1 << 20).unwrap();
            if batch.is_empty() {
                break;
            }
            held.push(lines.buf.as_ptr() as usize);
            all.extend(batch);
        }
        drop(lines);
        assert_eq!(all, text, "each line once, in order, the crossing ones whole");
        let given = given.into_inner();
        assert!(given.len() >= 4, "{given:?}");
        for block in &given {
            assert!(held.contains(block), "a block read was copied, not kept: {given:x?} held {held:x?}");
        }
    }

    #[test]
    fn the_next_block_is_fetched_while_the_task_works_on_this_one_and_every_split_reads_the_same() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let text: std::sync::Arc<Vec<u8>> =
            std::sync::Arc::new(b"a line of some words\n".repeat((3 * BLOCK as usize) / 21 + 7));
        let size = text.len() as u64;
        let started = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (from, seen) = (text.clone(), started.clone());
        let read = move |offset: u64, len: u64| {
            seen.lock().unwrap().push(offset);
            Ok::<_, InputError>(from[offset as usize..(offset + len) as usize].to_vec())
        };
        let mut ahead = ReadAhead::new(read, rt.handle().clone(), size, size);
        let mut lines = SplitLines::new(move |o, l| ahead.read(o, l), 0, size, size);
        let mut all = lines.next_batch(1 << 20).unwrap();
        // The task holds its first batch, and the block after it is already coming.
        let waited = std::time::Instant::now();
        while started.lock().unwrap().len() < 2 {
            assert!(waited.elapsed() < std::time::Duration::from_secs(10), "no read ahead");
            std::thread::yield_now();
        }
        assert_eq!(started.lock().unwrap()[1], FIRST_READ, "the next block's read begun before it was asked");
        loop {
            let batch = lines.next_batch(1 << 20).unwrap();
            if batch.is_empty() {
                break;
            }
            all.extend(batch);
        }
        assert_eq!(all, *text, "the split's lines, each once, in order");
        // Reads of 1, 2, 4 MiB, then blocks of 8: each begun once, ahead of its ask.
        let mut offsets = vec![0];
        let mut len = FIRST_READ;
        while offsets.last().unwrap() + len < size {
            offsets.push(offsets.last().unwrap() + len);
            len = (len * 2).min(BLOCK);
        }
        assert_eq!(*started.lock().unwrap(), offsets, "one read each, none twice");

        // Cut anywhere, read ahead or not, splits hold the same lines.
        for cut in [1, 1000, BLOCK - 3, BLOCK + LOOKAHEAD + 5, size - 2] {
            let mut whole = Vec::new();
            for (start, end) in [(0, cut), (cut, size)] {
                let from = text.clone();
                let read =
                    move |o: u64, l: u64| Ok::<_, InputError>(from[o as usize..(o + l) as usize].to_vec());
                let mut ahead = ReadAhead::new(read, rt.handle().clone(), end, size);
                let mut lines = SplitLines::new(move |o, l| ahead.read(o, l), start, end, size);
                loop {
                    let batch = lines.next_batch(300_000).unwrap();
                    if batch.is_empty() {
                        break;
                    }
                    whole.extend(batch);
                }
            }
            assert_eq!(whole, *text, "cut at {cut}");
        }
    }

    #[test]
    fn a_first_read_begun_while_the_task_waits_is_the_one_its_split_asks_for_and_is_not_made_again() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let text: std::sync::Arc<Vec<u8>> =
            std::sync::Arc::new(b"a line of some words\n".repeat((3 * FIRST_READ as usize) / 21 + 7));
        let size = text.len() as u64;
        for (start, end) in [(0, size), (0, 100), (5, size / 2), (size / 2, size), (size - 3, size + 10)] {
            let made = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let (from, log) = (text.clone(), made.clone());
            let read = move |offset: u64, len: u64| {
                log.lock().unwrap().push((offset, len));
                Ok::<_, InputError>(from[offset as usize..(offset + len) as usize].to_vec())
            };
            let begun =
                ReadAhead::begin(read.clone(), rt.handle(), start, end, size).expect("a split to read");
            let waited = std::time::Instant::now();
            while made.lock().unwrap().is_empty() {
                assert!(waited.elapsed() < std::time::Duration::from_secs(10), "the first read not begun");
                std::thread::yield_now();
            }
            let mut ahead = ReadAhead::new(read, rt.handle().clone(), end, size).with_begun(Some(begun));
            let mut lines = SplitLines::new(move |o, l| ahead.read(o, l), start, end, size);
            let mut got = Vec::new();
            loop {
                let batch = lines.next_batch(300_000).unwrap();
                if batch.is_empty() {
                    break;
                }
                got.extend(batch);
            }
            assert_eq!(got, read_split(&text, start, end, 300_000).unwrap(), "{start}..{end}");
            let made = made.lock().unwrap();
            let mut once = made.clone();
            once.dedup();
            assert_eq!(*made, once, "{start}..{end}: the begun read served the split's first ask");
        }
        // A begun read that failed (its own bound ran out while the task waited) is made
        // again when the task asks: what the task meets is its own read's outcome.
        let tries = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let (from, count) = (text.clone(), tries.clone());
        let flaky = move |offset: u64, len: u64| match count.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        {
            0 => Err(InputError::Deadline),
            _ => Ok(from[offset as usize..(offset + len) as usize].to_vec()),
        };
        let begun = ReadAhead::begin(flaky.clone(), rt.handle(), 0, size, size);
        let mut ahead = ReadAhead::new(flaky, rt.handle().clone(), size, size).with_begun(begun);
        assert_eq!(ahead.read(0, FIRST_READ).unwrap(), text[..FIRST_READ as usize]);
        assert!(tries.load(std::sync::atomic::Ordering::SeqCst) >= 2, "the failed read made again");
        let nothing =
            |_: u64, _: u64| -> Result<Vec<u8>, InputError> { unreachable!("an empty split reads nothing") };
        assert!(ReadAhead::begin(nothing, rt.handle(), size, size, size).is_none());
    }
}
