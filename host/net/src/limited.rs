//! Warnings an outside peer can cause as often as it likes, logged at most ten a minute
//! each kind: a flood of bad requests costs the driver (or an executor) a counter, not
//! its log.

use std::sync::Mutex;
use std::time::{Duration, Instant};

const LOGGED: u32 = 10;
const WINDOW: Duration = Duration::from_secs(60);

/// One kind of warning: how many in all, and which of them are logged.
#[derive(Default)]
pub struct Limited {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    total: u64,
    window: Option<Instant>,
    logged: u32,
    quiet: u64,
}

impl Limited {
    /// Counts one; calls `log` with how many went unlogged since the last logged one,
    /// unless ten were logged this minute already.
    pub fn note(&self, log: impl FnOnce(u64)) {
        let now = Instant::now();
        let mut s = self.state.lock().expect("limited log lock");
        s.total += 1;
        if s.window.is_none_or(|start| now.duration_since(start) >= WINDOW) {
            s.window = Some(now);
            s.logged = 0;
        }
        if s.logged < LOGGED {
            s.logged += 1;
            let not_logged = std::mem::take(&mut s.quiet);
            drop(s);
            log(not_logged);
        } else {
            s.quiet += 1;
        }
    }

    /// How many were noted in all.
    pub fn total(&self) -> u64 {
        self.state.lock().expect("limited log lock").total
    }
}
