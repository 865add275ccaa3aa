//! A map/reduce job whose map tasks draw their records' values, for the tests of what a
//! map run again must write. Each generated partition emits `records` (default 10,000)
//! values under keys 0..1000: with `mode=random` (the default) drawn from `wasi:random`,
//! as any random crate draws them; with `mode=clock`, the wall clock's nanoseconds, which
//! no rerun repeats. `pad_bytes` (default 0) adds that many random bytes to each value,
//! drawn the same way: shuffle data that does not compress, for the tests of disk
//! budgets. `map_pause_ms` holds each map task back before it emits. Reduce tasks
//! count and sum what they get (the padding aside); `reduce_pause_ms` holds each back
//! once it has its input. The result: `{"count": …, "sum": …}`.

use flint_guest::{Emitter, Error, MapReduce, Partition, Values, config_or};
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

#[derive(Serialize, Deserialize, Default)]
pub struct Total {
    pub count: u64,
    pub sum: u64,
}

pub struct Draws;

impl MapReduce for Draws {
    type Key = u32;
    /// The number drawn, and its padding.
    type Value = (u64, ByteBuf);
    type Output = Total;
    type Result = Total;

    fn map(input: Partition, out: &mut Emitter<Self>) -> Result<(), Error> {
        let Partition::Index(_) = input else {
            return Err(Error::fatal("draws runs on generated partitions"));
        };
        let records: u32 = config_or("records", 10_000)?;
        let clock = config_or("mode", "random".to_string())? == "clock";
        let pad: u64 = config_or("pad_bytes", 0)?;
        std::thread::sleep(std::time::Duration::from_millis(config_or("map_pause_ms", 0)?));
        for i in 0..records {
            let value = match clock {
                true => std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64),
                false => wasi::random::random::get_random_u64(),
            };
            let padding = match pad {
                0 => Vec::new(),
                n => wasi::random::random::get_random_bytes(n.min(1 << 20)),
            };
            out.emit(&(i % 1000), (value, ByteBuf::from(padding)))?;
        }
        Ok(())
    }

    fn empty() -> Total {
        let pause: u64 = config_or("reduce_pause_ms", 0).unwrap_or(0);
        std::thread::sleep(std::time::Duration::from_millis(pause));
        Total::default()
    }

    fn reduce(_key: u32, values: &mut Values<'_, (u64, ByteBuf)>, out: &mut Total) -> Result<(), Error> {
        for (value, _padding) in values {
            out.count += 1;
            out.sum = out.sum.wrapping_add(value);
        }
        Ok(())
    }

    fn merge(a: Total, b: Total) -> Result<Total, Error> {
        Ok(Total { count: a.count + b.count, sum: a.sum.wrapping_add(b.sum) })
    }

    fn finish(total: Total) -> Result<Total, Error> {
        Ok(total)
    }
}

flint_guest::export_map_reduce!(Draws);
