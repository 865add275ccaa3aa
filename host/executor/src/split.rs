//! Reading a file split: the lines whose first byte falls in `start..end`, as Hadoop's
//! line reader does. A line that starts before `start` belongs to the split before; a
//! line that starts before `end` is read to its end, past `end` if need be.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Reads the split with one positioned read, after finding its two line boundaries.
pub fn read_split(path: &Path, start: u64, end: u64) -> io::Result<Vec<u8>> {
    let file = File::open(path)?;
    // The byte before `start` tells whether a line begins exactly at `start`.
    let from = if start == 0 { 0 } else { line_after(&file, start - 1)? };
    if from >= end {
        return Ok(Vec::new()); // no line starts in this split
    }
    let until = line_after(&file, end - 1)?;
    let mut data = vec![0; (until - from) as usize];
    file.read_exact_at(&mut data, from)?;
    Ok(data)
}

/// The offset just past the first newline at or after `at`, or the file's end.
fn line_after(file: &File, mut at: u64) -> io::Result<u64> {
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = file.read_at(&mut chunk, at)?;
        if n == 0 {
            return Ok(at);
        }
        if let Some(i) = chunk[..n].iter().position(|b| *b == b'\n') {
            return Ok(at + i as u64 + 1);
        }
        at += n as u64;
    }
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
