//! The WASI calls that wait: `wasi:io/poll.poll` and `pollable.block`, which a guest's
//! `sleep` and every blocking wait come down to. Epoch interruption only fires while wasm
//! runs, so these are given the store's deadline and kill switch themselves: the wait is
//! cut at the deadline (a `deadline` failure, as the epoch callback reports it) and
//! looks at the kill switch every tick. They shadow wasmtime-wasi's own, which they call.
//!
//! Waits run on a runtime of their own, never on the caller's: a process ending its main
//! runtime while a guest still waits would otherwise break the guest's timer.

use crate::host::HostState;
use crate::limits::{KillSwitch, Killed};
use std::future::Future;
use std::time::{Duration, Instant};
use wasmtime::Trap;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll::{Host as _, HostPollable as _};

/// The `wasi:io/poll` instance wasmtime-wasi 48 defines.
const POLL: &str = "wasi:io/poll@0.2.12";

/// How often a waiting call looks at the kill switch.
const KILL_CHECK: Duration = Duration::from_millis(10);

/// The runtime that drives guests' waits (timers only), for the life of the process.
static WAITS: std::sync::LazyLock<tokio::runtime::Runtime> = std::sync::LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("flint-waits")
        .enable_time()
        .build()
        .expect("the waits runtime starts")
});

/// Replaces the waiting calls in `linker` (which already holds wasmtime-wasi's).
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut poll = linker.instance(POLL)?;
    poll.func_wrap("poll", |mut store, (pollables,): (Vec<Resource<DynPollable>>,)| {
        let state: &mut HostState = store.data_mut();
        let (deadline, kill) = (state.deadline, state.kill.clone());
        bounded(deadline, &kill, state.table.poll(pollables))?.map(|ready| (ready,))
    })?;
    poll.func_wrap("[method]pollable.block", |mut store, (pollable,): (Resource<DynPollable>,)| {
        let state: &mut HostState = store.data_mut();
        let (deadline, kill) = (state.deadline, state.kill.clone());
        bounded(deadline, &kill, state.table.block(pollable))?
    })?;
    // Not a wait, but it may start the pollable's timer: on the same runtime as waits.
    poll.func_wrap("[method]pollable.ready", |mut store, (pollable,): (Resource<DynPollable>,)| {
        let state: &mut HostState = store.data_mut();
        WAITS.block_on(state.table.ready(pollable)).map(|ready| (ready,))
    })?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Runs `wait` until it ends, the deadline passes or the kill switch is thrown.
fn bounded<F: Future>(deadline: Instant, kill: &KillSwitch, wait: F) -> wasmtime::Result<F::Output> {
    WAITS.block_on(async {
        let mut wait = std::pin::pin!(wait);
        loop {
            if kill.is_killed() {
                return Err(wasmtime::Error::new(Killed));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(wasmtime::Error::new(Trap::Interrupt));
            }
            if let Ok(done) = tokio::time::timeout((deadline - now).min(KILL_CHECK), &mut wait).await {
                return Ok(done);
            }
        }
    })
}
