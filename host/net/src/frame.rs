//! Frames: a 4-byte little-endian length, then a postcard body of at most
//! [`MAX_FRAME`] bytes. Bad bytes are an error, never a panic; a length over the limit
//! is refused before anything is allocated.

use flint_proto::wire::{CHUNK, Chunk, MAX_FRAME};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("undecodable frame: {0}")]
    Decode(#[from] postcard::Error),
    #[error("undecodable frame: {0} bytes after the message")]
    TrailingBytes(usize),
    #[error("stream ended inside a frame")]
    Truncated,
    #[error("payload is larger than announced")]
    Oversized,
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

pub async fn write_frame<T: Serialize>(
    out: &mut (impl AsyncWrite + Unpin),
    message: &T,
) -> Result<(), FrameError> {
    let body = postcard::to_stdvec(message)?;
    if body.len() > MAX_FRAME {
        return Err(FrameError::TooLarge(body.len()));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    out.write_all(&frame).await?;
    Ok(())
}

/// The next frame, or `None` at a clean end of stream.
pub async fn read_frame<T: DeserializeOwned>(
    input: &mut (impl AsyncRead + Unpin),
) -> Result<Option<T>, FrameError> {
    read_frame_within(input, MAX_FRAME).await
}

/// The next frame of at most `limit` bytes (a hello, read before the peer has proved
/// anything, gets far less than [`MAX_FRAME`]).
pub async fn read_frame_within<T: DeserializeOwned>(
    input: &mut (impl AsyncRead + Unpin),
    limit: usize,
) -> Result<Option<T>, FrameError> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > limit.min(MAX_FRAME) {
        return Err(FrameError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    input.read_exact(&mut body).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(e),
    })?;
    decode(&body).map(Some)
}

/// A frame's body as a message: the whole of it, nothing before or after.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    match postcard::take_from_bytes(body)? {
        (message, []) => Ok(message),
        (_, rest) => Err(FrameError::TrailingBytes(rest.len())),
    }
}

/// Sends a large payload as [`Chunk`] frames and an empty closing chunk.
pub async fn write_payload(out: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> Result<(), FrameError> {
    for piece in bytes.chunks(CHUNK) {
        write_frame(out, &Chunk(piece.to_vec())).await?;
    }
    write_frame(out, &Chunk(Vec::new())).await
}

/// Sends everything `reader` holds as a payload, a chunk at a time (a file of any size
/// in bounded memory).
pub async fn write_payload_from(
    out: &mut (impl AsyncWrite + Unpin),
    reader: &mut (impl AsyncRead + Unpin),
) -> Result<u64, FrameError> {
    use tokio::io::AsyncReadExt;
    let mut sent = 0;
    loop {
        let mut piece = Vec::with_capacity(CHUNK);
        while piece.len() < CHUNK {
            if (&mut *reader).take((CHUNK - piece.len()) as u64).read_to_end(&mut piece).await? == 0 {
                break;
            }
        }
        if piece.is_empty() {
            write_frame(out, &Chunk(Vec::new())).await?;
            return Ok(sent);
        }
        sent += piece.len() as u64;
        write_frame(out, &Chunk(piece)).await?;
    }
}

/// Reads a payload sent by [`write_payload`], refusing more than `limit` bytes.
pub async fn read_payload(input: &mut (impl AsyncRead + Unpin), limit: usize) -> Result<Vec<u8>, FrameError> {
    let mut bytes = Vec::new();
    read_payload_into(input, limit as u64, &mut bytes).await?;
    Ok(bytes)
}

/// Reads a payload into `sink` (a file, say), refusing more than `limit` bytes; the
/// number of bytes read.
pub async fn read_payload_into(
    input: &mut (impl AsyncRead + Unpin),
    limit: u64,
    sink: &mut (impl AsyncWrite + Unpin),
) -> Result<u64, FrameError> {
    use tokio::io::AsyncWriteExt;
    let mut read = 0;
    loop {
        let Chunk(piece) = read_frame(input).await?.ok_or(FrameError::Truncated)?;
        if piece.is_empty() {
            sink.flush().await?;
            return Ok(read);
        }
        if read + piece.len() as u64 > limit {
            return Err(FrameError::Oversized);
        }
        read += piece.len() as u64;
        sink.write_all(&piece).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flint_proto::wire::{ExecutorMessage, Heartbeat};

    #[tokio::test]
    async fn frames_round_trip_and_bad_bytes_are_errors() {
        let mut buf = Vec::new();
        let beat = Heartbeat {
            running: 2,
            tasks_done: 9,
            rss_bytes: 1 << 20,
            instance_memory_high_water: 1 << 16,
            component_cache_hits: 3,
            component_cache_misses: 1,
            instances_started: 2,
        };
        write_frame(&mut buf, &beat).await.unwrap();
        write_frame(&mut buf, &ExecutorMessage::Decommissioning).await.unwrap();
        let mut input = &buf[..];
        assert_eq!(read_frame::<Heartbeat>(&mut input).await.unwrap(), Some(beat));
        assert_eq!(
            read_frame::<ExecutorMessage>(&mut input).await.unwrap(),
            Some(ExecutorMessage::Decommissioning)
        );
        assert!(read_frame::<Heartbeat>(&mut input).await.unwrap().is_none(), "clean end");

        let truncated = &buf[..buf.len() - 1];
        let mut input = &truncated[4 + (buf.len() - 4) / 2..];
        assert!(read_frame::<Heartbeat>(&mut input).await.is_err());

        let mut huge = &u32::MAX.to_le_bytes()[..];
        assert!(matches!(read_frame::<Heartbeat>(&mut huge).await, Err(FrameError::TooLarge(_))));

        // Garbage that starts like a message but does not end with it.
        let mut garbage = vec![200u8, 0, 0, 0];
        garbage.extend((0..200u32).map(|i| (i * 37) as u8));
        assert!(matches!(
            read_frame::<ExecutorMessage>(&mut &garbage[..]).await,
            Err(FrameError::TrailingBytes(_))
        ));
        // A variant that does not exist.
        let unknown = [1u8, 0, 0, 0, 99];
        assert!(matches!(read_frame::<ExecutorMessage>(&mut &unknown[..]).await, Err(FrameError::Decode(_))));
    }

    #[tokio::test]
    async fn payloads_travel_in_chunks_with_a_limit() {
        let data: Vec<u8> = (0..(3 * CHUNK + 5)).map(|i| i as u8).collect();
        let mut buf = Vec::new();
        write_payload(&mut buf, &data).await.unwrap();
        assert_eq!(read_payload(&mut &buf[..], data.len()).await.unwrap(), data);
        assert!(matches!(read_payload(&mut &buf[..], CHUNK).await, Err(FrameError::Oversized)));
    }
}
