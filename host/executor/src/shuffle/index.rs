//! A map output's index file: `FLSHIDX2`, the reduce partitions (u32 LE), their
//! offsets in the data file (one more than the partitions, u64 LE each), a CRC-32 of
//! each stored slice (u32 LE) and the digest of the records the map wrote (32 bytes).

use std::io;

/// What an index file starts with.
const MAGIC: &[u8; 8] = b"FLSHIDX2";

/// An index's bytes, checked to be one.
#[derive(Debug, Clone)]
pub(crate) struct Index {
    reduces: u32,
    bytes: Vec<u8>,
}

/// How long the index of a map output of `reduces` partitions is.
pub(crate) fn index_len(reduces: u32) -> usize {
    let r = reduces as usize;
    12 + (r + 1) * 8 + r * 4 + 32
}

impl Index {
    /// The index of a data file with these partition offsets and slice CRCs.
    pub fn encode(offsets: &[u64], crcs: &[u32], digest: &[u8; 32]) -> Vec<u8> {
        let mut index = Vec::with_capacity(index_len(crcs.len() as u32));
        index.extend_from_slice(MAGIC);
        index.extend_from_slice(&(crcs.len() as u32).to_le_bytes());
        offsets.iter().for_each(|o| index.extend_from_slice(&o.to_le_bytes()));
        crcs.iter().for_each(|c| index.extend_from_slice(&c.to_le_bytes()));
        index.extend_from_slice(digest);
        index
    }

    /// `bytes` as an index, refused unless it is one: its length, its offsets from 0 up
    /// in order.
    pub fn parse(bytes: Vec<u8>) -> io::Result<Index> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
        if bytes.len() < 12 || &bytes[..8] != MAGIC {
            return Err(invalid("its index is not a shuffle index"));
        }
        let reduces = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if bytes.len() != index_len(reduces) {
            return Err(invalid("its index does not match its partitions"));
        }
        let index = Index { reduces, bytes };
        let ordered =
            index.offset(0) == 0 && (0..reduces as usize).all(|p| index.offset(p) <= index.offset(p + 1));
        match ordered {
            true => Ok(index),
            false => Err(invalid("its index is out of order")),
        }
    }

    /// The index file at `path`, read only when its length is one an index can have
    /// (a corrupt file is never read whole into memory).
    pub fn read(path: &std::path::Path) -> io::Result<Index> {
        use std::io::Read;
        let mut file = std::fs::File::open(path)?;
        let mut head = [0u8; 12];
        file.read_exact(&mut head)?;
        let reduces = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        if file.metadata()?.len() != index_len(reduces) as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "its index does not match its partitions",
            ));
        }
        let mut bytes = head.to_vec();
        file.read_to_end(&mut bytes)?;
        Index::parse(bytes)
    }

    pub fn reduces(&self) -> u32 {
        self.reduces
    }

    fn offset(&self, i: usize) -> u64 {
        u64::from_le_bytes(self.bytes[12 + i * 8..20 + i * 8].try_into().expect("8 bytes"))
    }

    /// Where `partition`'s slice is in the data file, and its CRC.
    pub fn slice(&self, partition: u32) -> Option<(u64, u64, u32)> {
        if partition >= self.reduces {
            return None;
        }
        let p = partition as usize;
        let at = 12 + (self.reduces as usize + 1) * 8 + p * 4;
        let crc = u32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"));
        Some((self.offset(p), self.offset(p + 1), crc))
    }

    /// The data file's length.
    pub fn data_len(&self) -> u64 {
        self.offset(self.reduces as usize)
    }

    /// The digest of the records the map wrote.
    pub fn digest(&self) -> [u8; 32] {
        self.bytes[self.bytes.len() - 32..].try_into().expect("32 bytes")
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}
