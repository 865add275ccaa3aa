//! The state behind every store and the host side of `flint:task/host`.

use crate::bindings::flint::task::host::{self, Level, TaskInfo};
use crate::capture::TaskLogSink;
use flint_proto::{Conf, Token};
use std::sync::Arc;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Result};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub(crate) struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limits: MemoryCap,
    pub(crate) info: TaskInfo,
    pub(crate) config: Arc<Conf>,
    pub(crate) tokens: Arc<Vec<Token>>,
    pub(crate) log: TaskLogSink,
    /// When the running call must end; the epoch callback and the waiting WASI calls
    /// check it.
    pub(crate) deadline: std::time::Instant,
    /// Thrown to stop the call; the same checks look at it.
    pub(crate) kill: crate::sandbox::KillSwitch,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl host::Host for HostState {
    fn current_task(&mut self) -> TaskInfo {
        self.info.clone()
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.config.get(&key).cloned()
    }

    fn get_token(&mut self, service: String) -> Option<host::Token> {
        self.tokens.iter().find(|t| t.service == service).map(|t| host::Token {
            service: t.service.clone(),
            secret: t.secret.clone(),
            expires_at_ms: t.expires_at_ms,
        })
    }

    fn log(&mut self, level: Level, message: String) {
        let TaskInfo { job_id, task_index, attempt, .. } = &self.info;
        match level {
            Level::Trace => tracing::trace!(job_id, task = task_index, attempt, "{message}"),
            Level::Debug => tracing::debug!(job_id, task = task_index, attempt, "{message}"),
            Level::Info => tracing::info!(job_id, task = task_index, attempt, "{message}"),
            Level::Warn => tracing::warn!(job_id, task = task_index, attempt, "{message}"),
            Level::Error => tracing::error!(job_id, task = task_index, attempt, "{message}"),
        }
        let tag = match level {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        };
        self.log.append(format!("[{tag}] {message}\n").as_bytes());
    }
}

/// The memory cap of one instance. It remembers a refused growth, so that the trap a
/// guest raises when its allocator gives up is reported as a memory limit.
pub(crate) struct MemoryCap {
    pub(crate) limit: u64,
    pub(crate) refused: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> Result<bool> {
        let ok = desired as u64 <= self.limit;
        self.refused |= !ok;
        Ok(ok)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> Result<bool> {
        // Tables hold function references; a million entries is far past any real job.
        Ok(desired <= 1 << 20)
    }
}
