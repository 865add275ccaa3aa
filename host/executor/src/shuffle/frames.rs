//! A map's data file as it is written: one zstd frame per reduce partition, streamed
//! to the file a piece at a time, with each slice's offset and CRC-32 kept as it goes.

use super::disk::Reservation;
use sha2::{Digest as _, Sha256};
use std::io::{self, Write};

/// zstd's fastest level: the shuffle is bound by CPU on these machines, not by disk.
const LEVEL: i32 = -1;

/// A data file as it is written: one zstd frame per partition, its start offset and
/// its CRC-32 (of the stored bytes) kept as it goes.
pub(super) struct Slices<W: Write> {
    out: W,
    written: u64,
    crc: crc32fast::Hasher,
    offsets: Vec<u64>,
    crcs: Vec<u32>,
    /// What the file holds of the disk budget, grown before each write.
    charge: Reservation,
}

/// One partition's frame, begun at its first record (an empty partition stores
/// nothing).
pub(super) struct Frame<'a, W: Write> {
    slices: &'a mut Slices<W>,
    encoder: Option<zstd::stream::write::Encoder<'static, Vec<u8>>>,
}

/// Compressed bytes are handed to the file in pieces of about this size.
const PIECE: usize = 1 << 20;

impl<W: Write> Slices<W> {
    pub(super) fn new(out: W, charge: Reservation) -> Slices<W> {
        Slices {
            out,
            written: 0,
            crc: crc32fast::Hasher::new(),
            offsets: Vec::new(),
            crcs: Vec::new(),
            charge,
        }
    }

    pub(super) fn begin(&mut self) -> Frame<'_, W> {
        self.offsets.push(self.written);
        self.crc = crc32fast::Hasher::new();
        Frame { slices: self, encoder: None }
    }

    fn store(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.charge.grow(bytes.len() as u64)?;
        self.out.write_all(bytes)?;
        self.crc.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Each partition's offset (and the end) and CRC, and what the file holds of the
    /// disk budget.
    pub(super) fn finish(mut self) -> io::Result<(Vec<u64>, Vec<u32>, Reservation)> {
        self.offsets.push(self.written);
        self.out.flush()?;
        Ok((self.offsets, self.crcs, self.charge))
    }
}

impl<W: Write> Frame<'_, W> {
    pub(super) fn record(
        &mut self,
        partition: u32,
        key: &[u8],
        value: &[u8],
        digest: Option<&mut Sha256>,
    ) -> io::Result<()> {
        let lens = [(key.len() as u32).to_le_bytes(), (value.len() as u32).to_le_bytes()];
        if let Some(digest) = digest {
            digest.update(partition.to_le_bytes());
            digest.update(lens.as_flattened());
            digest.update(key);
            digest.update(value);
        }
        let encoder = match &mut self.encoder {
            Some(e) => e,
            None => self.encoder.insert(zstd::stream::write::Encoder::new(Vec::with_capacity(PIECE), LEVEL)?),
        };
        encoder.write_all(lens.as_flattened())?;
        encoder.write_all(key)?;
        encoder.write_all(value)?;
        // What the encoder has made so far goes to the file, so a partition never
        // waits whole in memory.
        if encoder.get_ref().len() >= PIECE {
            let piece = std::mem::take(encoder.get_mut());
            self.slices.store(&piece)?;
            *encoder.get_mut() = piece;
            encoder.get_mut().clear();
        }
        Ok(())
    }

    pub(super) fn end(self) -> io::Result<()> {
        let Frame { slices, encoder } = self;
        if let Some(encoder) = encoder {
            let rest = encoder.finish()?;
            slices.store(&rest)?;
        }
        let crc = std::mem::replace(&mut slices.crc, crc32fast::Hasher::new()).finalize();
        slices.crcs.push(crc);
        Ok(())
    }
}
