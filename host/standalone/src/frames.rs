//! Frames read by a task of their own: a `read_frame` cut short by `select!` would lose
//! half a frame, so the worker's and the driver backend's loops select on this channel
//! instead of on the stream.

use flint_net::read_frame;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

/// Frames read ahead of their taker, at most: past them the reader waits and QUIC's
/// flow control slows the peer.
const AHEAD: usize = 64;

/// Each frame of `recv`, in order; the channel ends with the stream, after the error
/// that ended it if one did.
pub fn read_frames<T: DeserializeOwned + Send + 'static>(
    mut recv: quinn::RecvStream,
) -> mpsc::Receiver<Result<T, flint_net::FrameError>> {
    let (tx, rx) = mpsc::channel(AHEAD);
    tokio::spawn(async move {
        loop {
            let frame = match read_frame::<T>(&mut recv).await {
                Ok(Some(frame)) => Ok(frame),
                Ok(None) => return,
                Err(e) => Err(e),
            };
            let end = frame.is_err();
            if tx.send(frame).await.is_err() || end {
                return;
            }
        }
    });
    rx
}
