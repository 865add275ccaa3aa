//! Reading a file split: the lines whose first byte falls in `start..end`, as Hadoop's
//! line reader does. A line that starts before `start` belongs to the split before; a
//! line that starts before `end` is read to its end, past `end` if need be.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

pub fn read_split(path: &Path, start: u64, end: u64) -> io::Result<Vec<u8>> {
    let mut reader = BufReader::with_capacity(256 << 10, File::open(path)?);
    let mut pos = start;
    let mut scratch = Vec::new();
    if start > 0 {
        // The byte before `start` tells whether a line begins exactly at `start`.
        reader.seek(SeekFrom::Start(start - 1))?;
        pos = start - 1 + reader.read_until(b'\n', &mut scratch)? as u64;
    }
    let mut data = Vec::with_capacity((end.saturating_sub(start) + 256) as usize);
    while pos < end {
        let n = reader.read_until(b'\n', &mut data)?;
        if n == 0 {
            break;
        }
        pos += n as u64;
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_lands_in_exactly_one_split_wherever_the_cuts_fall() {
        let text = b"alpha beta\ngamma\n\ndelta epsilon zeta\neta\nno newline at end";
        let path = std::env::temp_dir().join(format!("flint-split-{}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let len = text.len() as u64;
        for parts in 1..=len {
            let size = len.div_ceil(parts);
            let mut joined = Vec::new();
            let mut start = 0;
            while start < len {
                let end = (start + size).min(len);
                joined.extend(read_split(&path, start, end).unwrap());
                start = end;
            }
            assert_eq!(joined, text, "{parts} parts");
        }
        std::fs::remove_file(path).unwrap();
    }
}
