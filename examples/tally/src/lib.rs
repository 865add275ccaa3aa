//! A test job for combining where tasks run (`Combine`): task i counts i + 1 and the
//! job adds the counts up, so `n` tasks answer n(n+1)/2 exactly when every output is
//! folded once. `trap_task=N` traps while task N is added to its slot's combining
//! instance on its first attempt: the instance goes with everything it held, and those
//! tasks must run again. `pad=BYTES` makes every value carry that many bytes, so that
//! partial results travel as blocks.

use flint_guest::{Aggregate, Combine, Error, Partition, Task, config_or, task_info};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Default)]
pub struct Tally {
    pub sum: u64,
    pub tasks: u64,
    /// Padding, kept once however many values merge.
    pub pad: Vec<u8>,
}

#[derive(Serialize)]
pub struct Total {
    pub sum: u64,
    pub tasks: u64,
}

pub struct Job;

fn own() -> Result<Tally, Error> {
    let me = task_info();
    let pad: usize = config_or("pad", 0)?;
    Ok(Tally { sum: u64::from(me.task_index) + 1, tasks: 1, pad: vec![7; pad] })
}

impl Task for Job {
    type Output = Tally;

    fn run(_: Partition) -> Result<Tally, Error> {
        own()
    }
}

impl Aggregate for Job {
    type Result = Total;

    fn merge(a: Tally, b: Tally) -> Result<Tally, Error> {
        let pad = if a.pad.len() >= b.pad.len() { a.pad } else { b.pad };
        Ok(Tally { sum: a.sum + b.sum, tasks: a.tasks + b.tasks, pad })
    }

    fn finish(t: Tally) -> Result<Total, Error> {
        Ok(Total { sum: t.sum, tasks: t.tasks })
    }
}

impl Combine for Job {
    fn empty() -> Tally {
        Tally::default()
    }

    fn add(acc: &mut Tally, _: Partition) -> Result<(), Error> {
        let me = task_info();
        let trap: i64 = config_or("trap_task", -1)?;
        if i64::from(me.task_index) == trap && me.attempt == 0 {
            core::arch::wasm32::unreachable();
        }
        let mine = own()?;
        let current = std::mem::take(acc);
        *acc = Self::merge(current, mine)?;
        Ok(())
    }
}

flint_guest::export_combine!(Job);
