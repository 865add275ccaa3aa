//! A distributed sort checked as TeraSort's `valsort` checks one. Map task `i` generates
//! `records_per_map` records from seed `i` (no input files); keys are range-partitioned
//! (the first eight key bytes, scaled to the partition count), so partition `p` holds
//! only keys below partition `p + 1`'s; each reduce task reads its keys in order and
//! checks that they are; the fold checks that each partition's last key is at most the
//! next one's first. The result: the records, whether all were in order, and the
//! order-free checksum of every record, which must equal the checksum of what the maps
//! generated.

pub mod records;

use flint_guest::{Emitter, Error, MapReduce, Partition, Values, config_or};
use records::{KEY, VALUE};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

/// What a range of sorted records shows: its first and last keys, how many records,
/// whether every key came at or after the one before, and the records' checksum.
#[derive(Serialize, Deserialize, Default, Debug)]
pub struct Checked {
    pub first: Option<[u8; KEY]>,
    pub last: Option<[u8; KEY]>,
    pub records: u64,
    pub ordered: bool,
    pub checksum: u64,
}

#[derive(Serialize)]
pub struct Summary {
    pub records: u64,
    pub ordered: bool,
    /// The checksum in hex (it is a full 64-bit value, which JSON numbers do not keep).
    pub checksum: String,
}

pub struct Sort;

impl MapReduce for Sort {
    type Key = [u8; KEY];
    type Value = ByteBuf;
    type Output = Checked;
    type Result = Summary;

    fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
        let Partition::Index(index) = input else {
            return Err(Error::fatal("sort generates its records: run it without --input"));
        };
        let count: u64 = config_or("records_per_map", 100_000)?;
        let mut failed = None;
        records::generate(index, count, |key, value| {
            if failed.is_none()
                && let Err(e) = out.emit(key, ByteBuf::from(value.to_vec()))
            {
                failed = Some(e);
            }
        });
        failed.map_or(Ok(()), Err)
    }

    /// By the key's first eight bytes, scaled: partition `p` gets the `p`th of `n` equal
    /// ranges, so the partitions in order hold the keys in order.
    fn partition(encoded: &[u8], partitions: u32) -> u32 {
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&encoded[..8]);
        ((u128::from(u64::from_be_bytes(prefix)) * u128::from(partitions)) >> 64) as u32
    }

    fn empty() -> Checked {
        Checked { ordered: true, ..Checked::default() }
    }

    fn reduce(key: [u8; KEY], values: &mut Values<'_, ByteBuf>, out: &mut Checked) -> Result<(), Error> {
        if out.last.is_some_and(|last| key < last) {
            out.ordered = false;
        }
        out.first.get_or_insert(key);
        out.last = Some(key);
        for value in values {
            if value.len() != VALUE {
                return Err(Error::fatal(format!("a value of {} bytes", value.len())));
            }
            out.records += 1;
            out.checksum = out.checksum.wrapping_add(records::share(&key, &value));
        }
        Ok(())
    }

    fn merge(a: Checked, b: Checked) -> Result<Checked, Error> {
        let joined = match (a.last, b.first) {
            (Some(last), Some(first)) => last <= first,
            _ => true,
        };
        Ok(Checked {
            first: a.first.or(b.first),
            last: b.last.or(a.last),
            records: a.records + b.records,
            ordered: a.ordered && b.ordered && joined,
            checksum: a.checksum.wrapping_add(b.checksum),
        })
    }

    fn finish(c: Checked) -> Result<Summary, Error> {
        Ok(Summary { records: c.records, ordered: c.ordered, checksum: format!("{:016x}", c.checksum) })
    }
}

flint_guest::export_map_reduce!(Sort);
