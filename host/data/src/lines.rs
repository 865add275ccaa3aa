//! Line splits over ranged reads: the lines whose first byte falls in `start..end`, as
//! Hadoop's line reader takes them. A line that starts before `start` belongs to the
//! split before; a line that starts before `end` is read to its end, past `end` if need
//! be. One function serves every source: a file's positioned reads, the driver's data
//! service, an object store's ranged GETs.

use crate::InputError;

/// Bytes read past a split's end in the first request, to find the end of its last line
/// without a second round trip in the common case.
pub const LOOKAHEAD: u64 = 64 << 10;

/// The most one further read asks for while a long line goes on.
const MAX_STEP: u64 = 16 << 20;

/// How far past its split's end a last line may run: an input without newlines must
/// not make one task's host read (and hold) the rest of it.
pub const MAX_OVERRUN: u64 = 64 << 20;

/// Reads the split of an input `size` bytes long through `read_at(offset, len)`, which
/// must return exactly `len` bytes (it is never asked past `size`). Usually one read:
/// the split, the byte before it and [`LOOKAHEAD`] after. A last line running more
/// than [`MAX_OVERRUN`] past `end` is an error.
pub fn read_lines(
    mut read_at: impl FnMut(u64, u64) -> Result<Vec<u8>, InputError>,
    start: u64,
    end: u64,
    size: u64,
) -> Result<Vec<u8>, InputError> {
    let end = end.min(size);
    if start >= end {
        return Ok(Vec::new());
    }
    // The byte before `start` tells whether a line begins exactly at `start`.
    let from = start.saturating_sub(1);
    let mut buf = read_at(from, (end - from + LOOKAHEAD).min(size - from))?;
    let begin = if start == 0 {
        0
    } else {
        match buf.iter().position(|b| *b == b'\n') {
            Some(i) if from + (i as u64) + 1 < end => i + 1,
            // No line starts in this split.
            _ => return Ok(Vec::new()),
        }
    };
    // The last line ends at the first newline at or after `end - 1`.
    let mut scan = (end - 1 - from) as usize;
    let mut step = LOOKAHEAD;
    let until = loop {
        if let Some(i) = buf[scan..].iter().position(|b| *b == b'\n') {
            break scan + i + 1;
        }
        let have = from + buf.len() as u64;
        if have >= size {
            break buf.len();
        }
        if have.saturating_sub(end) > MAX_OVERRUN {
            return Err(InputError::LineTooLong { end, max: MAX_OVERRUN });
        }
        scan = buf.len();
        step = (step * 2).min(MAX_STEP);
        buf.extend(read_at(have, step.min(size - have))?);
    };
    buf.truncate(until);
    buf.drain(..begin);
    Ok(buf)
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

    #[test]
    fn every_line_lands_in_exactly_one_split_wherever_the_cuts_fall() {
        let text = b"alpha beta\ngamma\n\ndelta epsilon zeta\neta\nno newline at end";
        let len = text.len() as u64;
        for parts in 1..=len {
            let size = len.div_ceil(parts);
            let mut joined = Vec::new();
            let mut start = 0;
            while start < len {
                let end = (start + size).min(len);
                joined.extend(read_lines(reader(text), start, end, len).unwrap());
                start = end;
            }
            assert_eq!(joined, text, "{parts} parts");
        }
    }

    #[test]
    fn a_line_longer_than_the_lookahead_is_read_whole_by_the_split_it_starts_in() {
        let mut text = b"short\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 3 * LOOKAHEAD as usize));
        text.extend(b"\ntail\n");
        let len = text.len() as u64;
        let first = read_lines(reader(&text), 0, 10, len).unwrap();
        assert_eq!(first.len(), 6 + 3 * LOOKAHEAD as usize + 1);
        assert_eq!(read_lines(reader(&text), 10, 20, len).unwrap(), b"");
        assert_eq!(read_lines(reader(&text), 20, len, len).unwrap(), b"tail\n");
    }

    #[test]
    fn a_line_without_end_stops_being_read_past_the_overrun() {
        let text = vec![b'x'; (2 * MAX_OVERRUN) as usize];
        match read_lines(reader(&text), 0, 1 << 20, text.len() as u64) {
            Ok(data) => panic!("read {} bytes of one line", data.len()),
            Err(error) => assert!(matches!(error, InputError::LineTooLong { .. }), "{error}"),
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
        read_lines(counting, 100, 900, text.len() as u64).unwrap();
        assert_eq!(reads, 1);
    }
}
