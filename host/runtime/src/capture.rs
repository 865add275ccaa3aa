//! A bounded sink for a task's stdout, stderr and log lines. Past its capacity it drops
//! bytes and counts them instead of failing the guest's write: a chatty task must not
//! die of its own logging.

use bytes::Bytes;
use std::sync::{Arc, Mutex};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

#[derive(Clone)]
pub(crate) struct TaskLogSink {
    inner: Arc<Mutex<Buffer>>,
}

struct Buffer {
    capacity: usize,
    bytes: Vec<u8>,
    dropped: u64,
}

impl TaskLogSink {
    pub(crate) fn new(capacity: usize) -> Self {
        TaskLogSink { inner: Arc::new(Mutex::new(Buffer { capacity, bytes: Vec::new(), dropped: 0 })) }
    }

    pub(crate) fn append(&self, data: &[u8]) {
        let mut b = self.inner.lock().expect("log buffer lock");
        let room = b.capacity.saturating_sub(b.bytes.len());
        let kept = data.len().min(room);
        b.bytes.extend_from_slice(&data[..kept]);
        b.dropped += (data.len() - kept) as u64;
    }

    /// Empties the buffer (a live instance starts the next call's log).
    pub(crate) fn clear(&self) {
        let mut b = self.inner.lock().expect("log buffer lock");
        b.bytes.clear();
        b.dropped = 0;
    }

    /// The captured text, with a note of what was dropped.
    pub(crate) fn contents(&self) -> String {
        let b = self.inner.lock().expect("log buffer lock");
        let mut text = String::from_utf8_lossy(&b.bytes).into_owned();
        if b.dropped > 0 {
            text.push_str(&format!("\n[flint: {} more bytes of task output dropped]\n", b.dropped));
        }
        text
    }
}

impl IsTerminal for TaskLogSink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for TaskLogSink {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for TaskLogSink {
    async fn ready(&mut self) {}
}

impl OutputStream for TaskLogSink {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for TaskLogSink {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_up_to_capacity_and_counts_the_rest() {
        let sink = TaskLogSink::new(8);
        sink.append(b"hello ");
        sink.append(b"world");
        let text = sink.contents();
        assert!(text.starts_with("hello wo"), "{text}");
        assert!(text.contains("3 more bytes"), "{text}");
    }
}
