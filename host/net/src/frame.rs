//! Frames: a 4-byte little-endian length, then a postcard body of at most
//! [`MAX_FRAME`] bytes. Bad bytes are an error, never a panic; a length over the limit
//! is refused before anything is allocated.

use flint_proto::wire::{CHUNK, MAX_FRAME};
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
    input.read_exact(&mut body).await.map_err(truncated)?;
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
        write_chunk(out, piece).await?;
    }
    write_chunk(out, &[]).await
}

/// Sends `len` bytes of `file` from `start` as a payload, in bounded memory: pieces are
/// read on a blocking thread straight out of the page cache (`pread`, one copy) while the
/// last one goes out, and their buffers come back to be filled again. A file shorter
/// than `start + len` sends what it holds: the count returned says how much.
pub async fn write_payload_from_file(
    out: &mut (impl AsyncWrite + Unpin),
    file: std::fs::File,
    start: u64,
    len: u64,
) -> Result<u64, FrameError> {
    use std::os::unix::fs::FileExt;
    // Two pieces ahead of the wire, and their buffers back for the next reads.
    let (filled, mut to_send) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(2);
    let (spent, mut empty) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    tokio::task::spawn_blocking(move || {
        let end = start.saturating_add(len);
        let mut at = start;
        while at < end {
            let mut piece = empty.try_recv().unwrap_or_default();
            let want = (end - at).min(CHUNK as u64) as usize;
            piece.resize(want, 0);
            let mut got = 0;
            while got < want {
                match file.read_at(&mut piece[got..], at + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = filled.blocking_send(Err(e));
                        return;
                    }
                }
            }
            piece.truncate(got);
            at += got as u64;
            // A closed channel: the sender stopped (its peer went, say).
            if got == 0 || filled.blocking_send(Ok(piece)).is_err() || got < want {
                return;
            }
        }
    });
    let mut sent = 0;
    while let Some(piece) = to_send.recv().await {
        let piece = piece?;
        write_chunk(out, &piece).await?;
        sent += piece.len() as u64;
        let _ = spent.try_send(piece);
    }
    write_chunk(out, &[]).await?;
    Ok(sent)
}

/// One [`Chunk`] frame, written as postcard would encode it (the frame's length, the
/// piece's length as a varint, the bytes) without copying the piece into a message
/// first: payloads are most of what crosses the wire.
async fn write_chunk(out: &mut (impl AsyncWrite + Unpin), piece: &[u8]) -> Result<(), FrameError> {
    let mut header = [0u8; 4 + 10];
    let varint = encode_varint(piece.len() as u64, &mut header[4..]);
    let body = varint + piece.len();
    if body > MAX_FRAME {
        return Err(FrameError::TooLarge(body));
    }
    header[..4].copy_from_slice(&(body as u32).to_le_bytes());
    out.write_all(&header[..4 + varint]).await?;
    out.write_all(piece).await?;
    Ok(())
}

/// Reads a payload sent by [`write_payload`], refusing more than `limit` bytes.
pub async fn read_payload(input: &mut (impl AsyncRead + Unpin), limit: usize) -> Result<Vec<u8>, FrameError> {
    let mut bytes = Vec::new();
    read_chunks(input, limit, &mut bytes).await?;
    Ok(bytes)
}

/// Reads a payload announced as `size` bytes: room for it is made once (up to 64 MiB;
/// a larger one grows as it arrives), and any other length is an error.
pub async fn read_payload_exact(
    input: &mut (impl AsyncRead + Unpin),
    size: u64,
) -> Result<Vec<u8>, FrameError> {
    let size = usize::try_from(size).map_err(|_| FrameError::Oversized)?;
    let mut bytes = Vec::with_capacity(size.min(64 << 20));
    read_chunks(input, size, &mut bytes).await?;
    if bytes.len() == size { Ok(bytes) } else { Err(FrameError::Truncated) }
}

/// A payload's chunks appended to `bytes`, refusing more than `limit` bytes in all.
async fn read_chunks(
    input: &mut (impl AsyncRead + Unpin),
    limit: usize,
    bytes: &mut Vec<u8>,
) -> Result<(), FrameError> {
    loop {
        let len = read_chunk_header(input).await?;
        if len == 0 {
            return Ok(());
        }
        if bytes.len() + len > limit {
            return Err(FrameError::Oversized);
        }
        let at = bytes.len();
        bytes.resize(at + len, 0);
        read_chunk_body(input, &mut bytes[at..]).await?;
    }
}

/// The next piece of a payload into `piece` (what it held is replaced); false at the
/// payload's end. For a caller that keeps each piece elsewhere as it comes (a file, say)
/// and counts them against its own limit; a piece is at most a frame.
pub async fn read_piece(
    input: &mut (impl AsyncRead + Unpin),
    piece: &mut Vec<u8>,
) -> Result<bool, FrameError> {
    let len = read_chunk_header(input).await?;
    piece.clear();
    if len == 0 {
        return Ok(false);
    }
    piece.resize(len, 0);
    read_chunk_body(input, piece).await?;
    Ok(true)
}

/// A [`Chunk`] frame's header: the length of the piece that follows it. The frame must
/// hold exactly the varint and the piece, as postcard would have it.
async fn read_chunk_header(input: &mut (impl AsyncRead + Unpin)) -> Result<usize, FrameError> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len).await.map_err(truncated)?;
    let body = u32::from_le_bytes(len) as usize;
    if body > MAX_FRAME {
        return Err(FrameError::TooLarge(body));
    }
    let (mut piece, mut shift, mut used) = (0u64, 0, 0);
    loop {
        let byte = input.read_u8().await.map_err(truncated)?;
        used += 1;
        piece |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if used == 10 {
            return Err(FrameError::Decode(postcard::Error::DeserializeBadVarint));
        }
    }
    match (piece as usize).checked_add(used) {
        Some(total) if total == body => Ok(piece as usize),
        Some(total) if total < body => Err(FrameError::TrailingBytes(body - total)),
        _ => Err(FrameError::Decode(postcard::Error::DeserializeUnexpectedEnd)),
    }
}

async fn read_chunk_body(input: &mut (impl AsyncRead + Unpin), into: &mut [u8]) -> Result<(), FrameError> {
    input.read_exact(into).await.map_err(truncated)?;
    Ok(())
}

fn truncated(e: std::io::Error) -> FrameError {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(e),
    }
}

/// `value` as postcard's varint (LEB128) into `out`; the bytes used.
fn encode_varint(mut value: u64, out: &mut [u8]) -> usize {
    let mut used = 0;
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        out[used] = byte | if value > 0 { 0x80 } else { 0 };
        used += 1;
        if value == 0 {
            return used;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flint_proto::wire::{Chunk, ExecutorMessage, Heartbeat};

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
            progress: vec![flint_proto::wire::Progress {
                attempt: flint_proto::Attempt { job: flint_proto::JobId(1), index: 4, number: 0 },
                read: 10,
                of: 40,
            }],
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
        assert_eq!(read_payload_exact(&mut &buf[..], data.len() as u64).await.unwrap(), data);
        let (short, long) = (data.len() as u64 + 1, data.len() as u64 - 1);
        assert!(matches!(read_payload_exact(&mut &buf[..], short).await, Err(FrameError::Truncated)));
        assert!(matches!(read_payload_exact(&mut &buf[..], long).await, Err(FrameError::Oversized)));
        let (mut file, mut piece, mut input) = (Vec::new(), Vec::new(), &buf[..]);
        while read_piece(&mut input, &mut piece).await.unwrap() {
            assert!(piece.len() <= CHUNK);
            file.extend_from_slice(&piece);
        }
        assert_eq!(file, data);
        assert!(input.is_empty(), "the closing chunk is read");
        let mut stored = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut stored, &data).unwrap();
        let mut resent = Vec::new();
        let whole = write_payload_from_file(&mut resent, stored.try_clone().unwrap(), 0, data.len() as u64);
        assert_eq!(whole.await.unwrap(), data.len() as u64);
        assert_eq!(resent, buf, "a payload from a file is framed as one from memory");
        // A range, then one past the file's end: what it holds, and the count says so.
        let (start, len) = (CHUNK as u64 - 3, CHUNK as u64 + 10);
        let (mut range, mut past) = (Vec::new(), Vec::new());
        let sent =
            write_payload_from_file(&mut range, stored.try_clone().unwrap(), start, len).await.unwrap();
        assert_eq!(sent, len);
        let range = read_payload(&mut &range[..], usize::MAX).await.unwrap();
        assert_eq!(range, data[start as usize..(start + len) as usize]);
        let beyond = data.len() as u64 - 7;
        assert_eq!(write_payload_from_file(&mut past, stored, beyond, 100).await.unwrap(), 7);
        assert_eq!(read_payload(&mut &past[..], usize::MAX).await.unwrap(), data[beyond as usize..]);
    }

    /// Chunks are written without postcard but must stay what postcard makes of
    /// [`Chunk`]: any reader of frames (a fuzzer, an older peer) reads them as such.
    #[tokio::test]
    async fn a_chunk_is_the_frame_postcard_makes_and_a_lying_one_is_refused() {
        for len in [0usize, 1, 127, 128, 300, 16_384, CHUNK] {
            let piece: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            write_chunk(&mut ours, &piece).await.unwrap();
            write_frame(&mut theirs, &Chunk(piece.clone())).await.unwrap();
            assert_eq!(ours, theirs, "a chunk of {len} bytes");
            assert_eq!(read_frame::<Chunk>(&mut &ours[..]).await.unwrap(), Some(Chunk(piece)));
        }
        // A frame of 10 bytes whose varint claims a piece of 300.
        let mut lying = 10u32.to_le_bytes().to_vec();
        lying.extend([0xac, 0x02]);
        lying.extend([0u8; 8]);
        assert!(matches!(read_payload(&mut &lying[..], 1 << 20).await, Err(FrameError::Decode(_))));
        // A frame longer than its piece.
        let mut padded = 5u32.to_le_bytes().to_vec();
        padded.extend([2, 1, 1, 0, 0]);
        assert!(matches!(read_payload(&mut &padded[..], 1 << 20).await, Err(FrameError::TrailingBytes(2))));
        // A varint that never ends.
        let mut endless = 20u32.to_le_bytes().to_vec();
        endless.extend([0xff; 20]);
        assert!(matches!(read_payload(&mut &endless[..], 1 << 20).await, Err(FrameError::Decode(_))));
    }
}
