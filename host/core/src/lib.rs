//! Flint's control core: everything the driver decides, with no IO, no threads and no
//! clock. The scheduler places attempts on executor slots; the registry knows which
//! executor lives under which incarnation; [`ControlCore`] joins them behind one
//! `handle(now, event) -> actions` and `poll_timeout()`, so that heartbeat expiry and
//! every other timer are stepped with fake time in tests. The driver's event loop is
//! plumbing around it. Allocation policy, token renewal and map-output tracking belong
//! here too, each a state machine beside the scheduler; so does the standalone
//! master's placement (`master`), which `flint master` is plumbing around.

pub mod allocation;
pub mod control;
pub mod credentials;
pub mod master;
pub mod registry;
pub mod scheduler;
pub mod shuffle;

pub use allocation::AllocationConfig;
pub use control::{Action, ControlCore, CoreConfig, Event, JobCounts, Launch, ShuffleRead};
pub use credentials::{Credentials, Renewal, RenewalConfig};
pub use registry::{ExecutorInfo, Incarnation, MAX_SLOTS};
pub use scheduler::{Decided, Policy, Speculation, Straggling};
pub use shuffle::MapOutputTracker;
