//! A job whose memory starts at over a gibibyte (a zeroed static, so the component
//! itself stays small): an executor whose task cap is smaller must refuse it as such.

use flint_guest::{Error, Partition, Task};

static mut BALLAST: [u8; 1 << 30] = [0; 1 << 30];

pub struct TooBig;

impl Task for TooBig {
    type Output = u8;

    fn run(_: Partition) -> Result<u8, Error> {
        // SAFETY: one task per instance; read only.
        Ok(unsafe { std::ptr::addr_of!(BALLAST).cast::<u8>().read_volatile() })
    }
}

flint_guest::export_task!(TooBig);
