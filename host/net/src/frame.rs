//! Frames: a 4-byte little-endian length, then a postcard body of at most
//! [`MAX_FRAME`] bytes. Bad bytes are an error, never a panic; a length over the limit
//! is refused before anything is allocated.

use flint_proto::recycle::Recycler;
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

/// Sends a large payload as `Chunk` frames and an empty closing chunk. A QUIC
/// stream copies what it is given; bytes the caller can hand over go without a copy
/// through [`write_payload_bytes`].
pub async fn write_payload(out: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> Result<(), FrameError> {
    for piece in bytes.chunks(CHUNK) {
        write_chunk(out, piece).await?;
    }
    write_chunk(out, &[]).await
}

/// [`write_payload`] of bytes the stream may keep as they are (a block an executor
/// holds, a result the driver made): each piece is a slice of them that a QUIC stream
/// holds until the peer has it, never a copy. A buffer shared elsewhere goes as
/// [`shared_bytes`].
pub async fn write_payload_bytes(
    out: &mut impl PieceSink,
    bytes: impl Into<bytes::Bytes>,
) -> Result<(), FrameError> {
    let bytes = bytes.into();
    for at in (0..bytes.len()).step_by(CHUNK) {
        let piece = bytes.slice(at..bytes.len().min(at + CHUNK));
        out.send_piece(&chunk_header(piece.len())?, piece).await?;
    }
    write_chunk(out, &[]).await
}

/// A buffer shared elsewhere (a block, a component) as bytes a stream may keep: the
/// buffer lives until the last piece of it is sent.
pub fn shared_bytes(bytes: std::sync::Arc<Vec<u8>>) -> bytes::Bytes {
    struct Shared(std::sync::Arc<Vec<u8>>);
    impl AsRef<[u8]> for Shared {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }
    bytes::Bytes::from_owner(Shared(bytes))
}

/// Sends `len` bytes of `file` from `start` as a payload, in bounded memory: pieces are
/// read on a blocking thread straight out of the page cache (`pread`, one copy) while the
/// last one goes out. A QUIC stream takes each piece as it is, and its buffer comes back
/// to `PIECES` once the peer has acknowledged it. A file shorter than `start + len`
/// sends what it holds: the count returned says how much.
pub async fn write_payload_from_file(
    out: &mut impl PieceSink,
    file: std::fs::File,
    start: u64,
    len: u64,
) -> Result<u64, FrameError> {
    use std::os::unix::fs::FileExt;
    // Two pieces ahead of the wire.
    let (filled, mut to_send) = tokio::sync::mpsc::channel::<std::io::Result<Piece>>(2);
    tokio::task::spawn_blocking(move || {
        let end = start.saturating_add(len);
        let mut at = start;
        while at < end {
            // Resized over what it held: nothing zeroed that the read writes.
            let mut piece = PIECES.take();
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
            if got == 0 || filled.blocking_send(Ok(Piece(piece))).is_err() || got < want {
                return;
            }
        }
    });
    let mut sent = 0;
    while let Some(piece) = to_send.recv().await {
        let piece = piece?;
        let size = piece.0.len();
        out.send_piece(&chunk_header(size)?, bytes::Bytes::from_owner(piece)).await?;
        sent += size as u64;
    }
    write_chunk(out, &[]).await?;
    Ok(sent)
}

/// The buffers of payloads read from files, kept between pieces and between transfers:
/// 16 MiB idle at most.
pub static PIECES: Recycler = Recycler::new(16, CHUNK);

/// A piece of a payload on its way out; its buffer goes back to `PIECES` when the
/// stream lets go of it.
struct Piece(Vec<u8>);

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Piece {
    fn drop(&mut self) {
        PIECES.give(std::mem::take(&mut self.0));
    }
}

/// Where a payload's pieces go. A QUIC stream keeps each piece as it is until the peer
/// has it, without a copy; a byte buffer (tests, a file) copies it.
pub trait PieceSink: AsyncWrite + Unpin + Send {
    fn send_piece(
        &mut self,
        header: &[u8],
        piece: bytes::Bytes,
    ) -> impl Future<Output = std::io::Result<()>> + Send;
}

impl PieceSink for quinn::SendStream {
    async fn send_piece(&mut self, header: &[u8], piece: bytes::Bytes) -> std::io::Result<()> {
        self.write_all(header).await?;
        Ok(self.write_chunk(piece).await?)
    }
}

impl PieceSink for Vec<u8> {
    async fn send_piece(&mut self, header: &[u8], piece: bytes::Bytes) -> std::io::Result<()> {
        self.extend_from_slice(header);
        self.extend_from_slice(&piece);
        Ok(())
    }
}

/// One `Chunk` frame, written as postcard would encode it (the frame's length, the
/// piece's length as a varint, the bytes) without copying the piece into a message
/// first: payloads are most of what crosses the wire.
async fn write_chunk(out: &mut (impl AsyncWrite + Unpin), piece: &[u8]) -> Result<(), FrameError> {
    out.write_all(&chunk_header(piece.len())?).await?;
    out.write_all(piece).await?;
    Ok(())
}

/// What goes before a piece of `len` bytes in its `Chunk` frame: the frame's length
/// and the piece's, as a varint.
fn chunk_header(len: usize) -> Result<Vec<u8>, FrameError> {
    let mut header = [0u8; 4 + 10];
    let varint = encode_varint(len as u64, &mut header[4..]);
    let body = varint + len;
    if body > MAX_FRAME {
        return Err(FrameError::TooLarge(body));
    }
    header[..4].copy_from_slice(&(body as u32).to_le_bytes());
    Ok(header[..4 + varint].to_vec())
}

/// Reads a payload sent by [`write_payload`], refusing more than `limit` bytes.
pub async fn read_payload(input: &mut impl ChunkSource, limit: usize) -> Result<Vec<u8>, FrameError> {
    let mut bytes = Vec::new();
    read_chunks(input, limit, &mut bytes).await?;
    Ok(bytes)
}

/// Reads a payload announced as `size` bytes: room for it is made once (up to 64 MiB;
/// a larger one grows as it arrives), and any other length is an error.
pub async fn read_payload_exact(input: &mut impl ChunkSource, size: u64) -> Result<Vec<u8>, FrameError> {
    let mut bytes = Vec::new();
    read_payload_into(input, size, &mut bytes).await?;
    Ok(bytes)
}

/// Appends a payload announced as `size` bytes to `bytes` (a buffer kept for reuse,
/// say); any other length is an error.
pub async fn read_payload_into(
    input: &mut impl ChunkSource,
    size: u64,
    bytes: &mut Vec<u8>,
) -> Result<(), FrameError> {
    let size = usize::try_from(size).map_err(|_| FrameError::Oversized)?;
    let had = bytes.len();
    bytes.reserve(size.min(64 << 20));
    read_chunks(input, had + size, bytes).await?;
    if bytes.len() == had + size { Ok(()) } else { Err(FrameError::Truncated) }
}

/// A payload's chunks appended to `bytes`, until it holds at most `limit` bytes.
async fn read_chunks(
    input: &mut impl ChunkSource,
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
        read_chunk_body(input, len, bytes).await?;
    }
}

/// The next piece of a payload into `piece`, as the bytes that arrived (what it held
/// is replaced); false at the payload's end. For a caller that keeps each piece
/// elsewhere as it comes (a file, say) and counts them against its own limit; a piece is
/// at most a frame. Large parts are kept as QUIC received them, never copied; small
/// ones are gathered into one buffer (see `KEPT_PART`).
pub async fn read_piece(
    input: &mut impl ChunkSource,
    piece: &mut Vec<bytes::Bytes>,
) -> Result<bool, FrameError> {
    let len = read_chunk_header(input).await?;
    piece.clear();
    let (mut left, mut small) = (len, bytes::BytesMut::new());
    while left > 0 {
        match input.next_chunk(left).await? {
            Some(bytes) if !bytes.is_empty() => {
                left -= bytes.len();
                if bytes.len() < KEPT_PART {
                    small.extend_from_slice(&bytes);
                } else {
                    if !small.is_empty() {
                        piece.push(small.split().freeze());
                    }
                    piece.push(bytes);
                }
            }
            _ => return Err(FrameError::Truncated),
        }
    }
    if !small.is_empty() {
        piece.push(small.freeze());
    }
    Ok(len > 0)
}

/// The smallest part of a piece [`read_piece`] keeps as it arrived. A part holds on to
/// the whole datagram it came in (up to 64 KiB), so a peer sending a byte per datagram
/// would otherwise pin 64 KiB a byte; smaller parts are copied instead, which also keeps
/// a piece off an Ethernet-sized path to a part or two.
pub const KEPT_PART: usize = 16 << 10;

/// Where a payload's pieces are read from as the bytes that arrived, never copies: a
/// QUIC stream hands over what it received; a byte slice (tests) hands over its own.
pub trait ChunkSource: AsyncRead + Unpin + Send {
    /// At most `most` bytes, those that came next; `None` at the stream's end.
    fn next_chunk(
        &mut self,
        most: usize,
    ) -> impl Future<Output = std::io::Result<Option<bytes::Bytes>>> + Send;
}

impl ChunkSource for quinn::RecvStream {
    async fn next_chunk(&mut self, most: usize) -> std::io::Result<Option<bytes::Bytes>> {
        Ok(self.read_chunk(most, true).await?.map(|chunk| chunk.bytes))
    }
}

impl ChunkSource for &[u8] {
    async fn next_chunk(&mut self, most: usize) -> std::io::Result<Option<bytes::Bytes>> {
        if self.is_empty() {
            return Ok(None);
        }
        let (now, rest) = self.split_at(most.min(self.len()));
        *self = rest;
        Ok(Some(bytes::Bytes::copy_from_slice(now)))
    }
}

/// A `Chunk` frame's header: the length of the piece that follows it. The frame must
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

/// A chunk's `len` bytes appended to `into`. They are taken from the stream as the bytes
/// that arrived and copied after: quinn copies a plain read while it holds the
/// connection's lock, so filling fresh memory that way (a page fault every 4 KiB) would
/// stall the packets arriving behind it. Where the room's pages are already mapped (a
/// reused buffer) or huge, the two ways measured the same.
async fn read_chunk_body(
    input: &mut impl ChunkSource,
    len: usize,
    into: &mut Vec<u8>,
) -> Result<(), FrameError> {
    into.reserve(len);
    let mut left = len;
    while left > 0 {
        match input.next_chunk(left).await? {
            Some(bytes) if !bytes.is_empty() => {
                left = left.checked_sub(bytes.len()).ok_or(FrameError::Oversized)?;
                into.extend_from_slice(&bytes);
            }
            _ => return Err(FrameError::Truncated),
        }
    }
    Ok(())
}

/// Payload buffers from this size on are asked to be backed by huge pages: glibc maps
/// an allocation this large on its own, so the advice ends with the buffer; a smaller
/// one may be carved from the heap, where the advice would outlive it.
const HUGE_PAGES_FROM: usize = 32 << 20;

/// Room for a payload of `size` bytes the caller has already accepted (charged to a
/// budget, say), made at once: [`read_payload_into`] then fills it without growing it.
/// From `HUGE_PAGES_FROM` on, the room is offered to transparent huge pages (taken
/// where the kernel grants them on request, its `madvise` mode), so filling it faults
/// once per 2 MiB instead of once per 4 KiB page: copying 200 MB into fresh memory took
/// 120 ms in 4 KiB pages and 48 ms in huge ones on this machine, and a 200 MB block
/// fetch went from 790–960 to 1,000–1,290 MiB/s. Only a buffer made
/// whole gets them: one grown as it fills is moved by `mremap`, which splits huge pages
/// that do not land on a 2 MiB boundary, and that cost more than it saved. Room the
/// system will not give is an error, not an abort: a size is only as sane as its budget.
pub fn payload_buffer(size: usize) -> Result<Vec<u8>, std::collections::TryReserveError> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(size)?;
    if size >= HUGE_PAGES_FROM {
        advise_huge_pages(bytes.spare_capacity_mut());
    }
    Ok(bytes)
}

/// Asks for huge pages over the whole 2 MiB pages inside `room` (Linux only).
#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_: &mut [std::mem::MaybeUninit<u8>]) {}

/// Asks for huge pages over the whole 2 MiB pages inside `room`.
#[cfg(target_os = "linux")]
fn advise_huge_pages(room: &mut [std::mem::MaybeUninit<u8>]) {
    const HUGE: usize = 2 << 20;
    let start = room.as_mut_ptr() as usize;
    let (first, end) = (start.next_multiple_of(HUGE), (start + room.len()) / HUGE * HUGE);
    if end > first {
        // SAFETY: advice over whole pages of memory `room` borrows from its buffer; it
        // changes how they are backed, never what they hold. Where the kernel has no
        // huge pages the call fails and nothing changes.
        unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
    }
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

    /// A stream whose bytes come a hundred at a time, as from tiny datagrams.
    struct Trickle<'a>(&'a [u8]);

    impl AsyncRead for Trickle<'_> {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl ChunkSource for Trickle<'_> {
        async fn next_chunk(&mut self, most: usize) -> std::io::Result<Option<bytes::Bytes>> {
            self.0.next_chunk(most.min(100)).await
        }
    }

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
        let mut handed = Vec::new();
        write_payload_bytes(&mut handed, shared_bytes(std::sync::Arc::new(data.clone()))).await.unwrap();
        assert_eq!(handed, buf, "bytes handed over are framed as bytes copied");
        assert_eq!(read_payload(&mut &buf[..], data.len()).await.unwrap(), data);
        assert!(matches!(read_payload(&mut &buf[..], CHUNK).await, Err(FrameError::Oversized)));
        assert_eq!(read_payload_exact(&mut &buf[..], data.len() as u64).await.unwrap(), data);
        let (short, long) = (data.len() as u64 + 1, data.len() as u64 - 1);
        assert!(matches!(read_payload_exact(&mut &buf[..], short).await, Err(FrameError::Truncated)));
        assert!(matches!(read_payload_exact(&mut &buf[..], long).await, Err(FrameError::Oversized)));
        let (mut file, mut piece, mut input) = (Vec::new(), Vec::new(), &buf[..]);
        while read_piece(&mut input, &mut piece).await.unwrap() {
            assert!(piece.iter().map(|b| b.len()).sum::<usize>() <= CHUNK);
            piece.iter().for_each(|b| file.extend_from_slice(b));
        }
        assert_eq!(file, data);
        assert!(input.is_empty(), "the closing chunk is read");
        // Arriving a hundred bytes at a time, a piece is gathered, not kept in crumbs.
        let mut trickle = Trickle(&buf[..]);
        let (mut again, mut parts) = (Vec::new(), 0);
        while read_piece(&mut trickle, &mut piece).await.unwrap() {
            parts += piece.len();
            piece.iter().for_each(|b| again.extend_from_slice(b));
        }
        assert_eq!(again, data);
        assert_eq!(parts, 4, "one part a piece");
        assert_eq!(read_payload(&mut Trickle(&buf[..]), data.len()).await.unwrap(), data);
        let mut stored = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut stored, &data).unwrap();
        let mut resent = Vec::new();
        let whole = write_payload_from_file(&mut resent, stored.try_clone().unwrap(), 0, data.len() as u64);
        assert_eq!(whole.await.unwrap(), data.len() as u64);
        assert_eq!(resent, buf, "a payload from a file is framed as one from memory");
        assert!(PIECES.kept() > 0, "a piece's buffer comes back once sent");
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
    /// `Chunk`: any reader of frames (a fuzzer, an older peer) reads them as such.
    #[tokio::test]
    async fn an_accepted_payload_fills_room_made_once_and_offered_to_huge_pages() {
        let data: Vec<u8> = (0..HUGE_PAGES_FROM as u32 + 1).map(|i| (i % 251) as u8).collect();
        let mut buf = Vec::new();
        write_payload(&mut buf, &data).await.unwrap();
        let mut bytes = payload_buffer(data.len()).unwrap();
        let at = bytes.as_ptr() as usize;
        read_payload_into(&mut &buf[..], data.len() as u64, &mut bytes).await.unwrap();
        assert_eq!(bytes, data);
        assert_eq!(bytes.as_ptr() as usize, at, "filled where it was made, never moved");
        // The kernel marks memory advised for huge pages `hg` (whether it has any free).
        #[cfg(target_os = "linux")]
        assert!(
            vm_flags(at + (2 << 20)).split_whitespace().any(|f| f == "hg"),
            "{}",
            vm_flags(at + (2 << 20))
        );
        assert!(payload_buffer(usize::MAX / 2).is_err(), "room that cannot be had is an error");
    }

    /// The `VmFlags` of this process's mapping that holds `address`.
    #[cfg(target_os = "linux")]
    fn vm_flags(address: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_once(' ').and_then(|(r, _)| r.split_once('-'));
            if let Some((Ok(start), Ok(end))) =
                range.map(|(s, e)| (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16)))
            {
                inside = (start..end).contains(&address);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.trim().to_owned();
            }
        }
        panic!("no mapping holds {address:#x}")
    }

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
