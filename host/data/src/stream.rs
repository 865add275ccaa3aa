//! Lines of a compressed input: its bytes read a block at a time through the same
//! ranged reads as any split, decompressed as a stream (gzip, Zstandard) and handed out
//! in batches of whole lines. Such an input is one split, from its first byte to its
//! last. Memory is a block, the decoder's window and a batch, whatever the sizes.

use crate::InputError;
use crate::lines::{BLOCK, MAX_LINE};
use flint_proto::Compression;
use std::io::Read;

/// A ranged read (`read_at(offset, len)`, exactly `len` bytes) seen as a stream of an
/// input's `size` bytes, a block at a time.
struct Ranged<R> {
    read_at: R,
    at: u64,
    size: u64,
    block: Vec<u8>,
    head: usize,
    /// Why the last read failed: told as itself, not as the decoder's I/O error.
    failed: Failed,
}

type Failed = std::sync::Arc<std::sync::Mutex<Option<InputError>>>;

impl<R: FnMut(u64, u64) -> Result<Vec<u8>, InputError>> Read for Ranged<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.head == self.block.len() {
            if self.at >= self.size {
                return Ok(0);
            }
            let len = BLOCK.min(self.size - self.at);
            match (self.read_at)(self.at, len) {
                Ok(block) => {
                    self.at += len;
                    // The block read before goes back for the next read.
                    crate::lines::BLOCKS.give(std::mem::replace(&mut self.block, block));
                    self.head = 0;
                }
                Err(e) => {
                    let said = e.to_string();
                    *self.failed.lock().expect("failure lock") = Some(e);
                    return Err(std::io::Error::other(said));
                }
            }
        }
        let n = out.len().min(self.block.len() - self.head);
        out[..n].copy_from_slice(&self.block[self.head..self.head + n]);
        self.head += n;
        Ok(n)
    }
}

/// The lines of a whole compressed input, in batches.
pub struct StreamLines {
    decoded: Box<dyn Read + Send>,
    /// Decoded and not yet handed out.
    held: Vec<u8>,
    done: bool,
    /// Where a read of the input failed, kept by the ranged reader.
    failed: Failed,
}

impl StreamLines {
    pub fn new<R>(compression: Compression, read_at: R, size: u64) -> Result<StreamLines, InputError>
    where
        R: FnMut(u64, u64) -> Result<Vec<u8>, InputError> + Send + 'static,
    {
        let failed = Failed::default();
        let source = Ranged { read_at, at: 0, size, block: Vec::new(), head: 0, failed: failed.clone() };
        let decoded: Box<dyn Read + Send> = match compression {
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(source)),
            Compression::Zstd => Box::new(
                zstd::stream::read::Decoder::new(source)
                    .map_err(|e| InputError::Corrupt(format!("not Zstandard: {e}")))?,
            ),
        };
        Ok(StreamLines { decoded, held: Vec::new(), done: false, failed })
    }

    /// The next whole lines, about `max` bytes of them (or the one line that does not
    /// fit, up to [`MAX_LINE`]); empty at the input's end. A last line without a
    /// newline is a line.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<u8>, InputError> {
        let max = max.max(1);
        loop {
            // Whole lines within `max`, or the first line when it alone is longer.
            let cut = match self.held[..self.held.len().min(max)].iter().rposition(|b| *b == b'\n') {
                Some(at) => Some(at + 1),
                None if self.held.len() > max => self.held.iter().position(|b| *b == b'\n').map(|at| at + 1),
                None => None,
            };
            if let Some(cut) = cut.filter(|_| self.held.len() >= max || self.done) {
                return Ok(self.held.drain(..cut).collect());
            }
            if self.done {
                return Ok(std::mem::take(&mut self.held));
            }
            if self.held.len() as u64 > MAX_LINE {
                return Err(InputError::LineTooLong { end: 0, max: MAX_LINE });
            }
            let had = self.held.len();
            let want = (max.max(64 << 10)).min(BLOCK as usize);
            self.held.resize(had + want, 0);
            let n = match self.decoded.read(&mut self.held[had..]) {
                Ok(n) => n,
                Err(e) => {
                    self.held.truncate(had);
                    return Err(match self.failed.lock().expect("failure lock").take() {
                        Some(failed) => failed,
                        None => InputError::Corrupt(e.to_string()),
                    });
                }
            };
            self.held.truncate(had + n);
            self.done = n == 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines_of(
        compression: Compression,
        compressed: Vec<u8>,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, InputError> {
        let size = compressed.len() as u64;
        let read_at = move |o: u64, l: u64| Ok(compressed[o as usize..(o + l) as usize].to_vec());
        let mut lines = StreamLines::new(compression, read_at, size)?;
        let mut batches = Vec::new();
        loop {
            let batch = lines.next_batch(max)?;
            if batch.is_empty() {
                return Ok(batches);
            }
            batches.push(batch);
        }
    }

    fn gzip(text: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(text).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn gzip_and_zstd_come_back_as_the_same_whole_lines() {
        let text: Vec<u8> = (0..200_000)
            .flat_map(|i| format!("line {i} w{}\n", i % 97).into_bytes())
            .chain(*b"last")
            .collect();
        // Two gzip members, as `cat a.gz b.gz` makes: one stream.
        let (a, b) = text.split_at(text.len() / 2 + 3);
        let gz = [gzip(a), gzip(b)].concat();
        let zst = zstd::encode_all(&text[..], 3).unwrap();
        for (compression, bytes) in [(Compression::Gzip, gz), (Compression::Zstd, zst)] {
            let batches = lines_of(compression, bytes, 100_000).unwrap();
            assert_eq!(batches.concat(), text, "{compression:?}");
            let last = batches.len() - 1;
            for batch in &batches[..last] {
                assert!(
                    batch.len() <= 100_000 && batch.ends_with(b"\n"),
                    "{compression:?}: whole lines within max"
                );
            }
        }
    }

    #[test]
    fn bytes_that_are_not_what_they_claim_fail_as_corrupt_and_a_failed_read_as_itself() {
        let err = lines_of(Compression::Gzip, b"plain text, not gzip\n".to_vec(), 1000).unwrap_err();
        assert!(matches!(err, InputError::Corrupt(_)), "{err}");
        let mut truncated = gzip(&[b'x'; 100_000]);
        truncated.truncate(truncated.len() / 2);
        assert!(matches!(lines_of(Compression::Gzip, truncated, 1000), Err(InputError::Corrupt(_))));
        let failing = |_: u64, _: u64| Err(InputError::Deadline);
        let mut lines = StreamLines::new(Compression::Gzip, failing, 100).unwrap();
        assert!(matches!(lines.next_batch(10), Err(InputError::Deadline)));
    }
}
