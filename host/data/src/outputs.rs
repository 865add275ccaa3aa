//! `s3://` part output through `object_store`, for driver and executors alike: the
//! driver claims a prefix and commits the parts (copy, then delete) of the attempts it
//! accepted; an executor uploads its attempt's part under the prefix's `_temporary/`.
//! The same layout as a directory's (`flint_proto::Parts`), with the same rule: only
//! what the driver copies out of `_temporary/` is ever `part-NNNNN`.

use crate::InputError;
use crate::objects::{ObjectReader, describe};
use flint_proto::{Parts, Token};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStore, PutMode, PutPayload};
use std::sync::Arc;
use tokio::task::{JoinHandle, JoinSet};

/// Bytes an upload buffers before it sends a part of it (S3 takes parts of 5 MiB and
/// more, but for the last).
const CHUNK: usize = 8 << 20;
/// Chunks of one upload in flight at once: with the one being filled, an upload holds
/// at most three chunks.
const IN_FLIGHT: usize = 2;

/// Why a prefix cannot take a job's parts.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("holds {0} of an earlier job: name a new prefix or remove it")]
    Earlier(String),
    #[error(
        "holds {}/: another job is writing there, or one that did not end cleanly (name a new prefix, or remove it)",
        Parts::TEMPORARY
    )]
    Busy,
    #[error("{0}")]
    Store(#[from] InputError),
}

/// A job's output prefix in a bucket, reached with the `s3` token's credentials.
pub struct ObjectOutput {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
}

impl ObjectReader {
    /// The prefix `prefix` of `bucket` as a job's output.
    pub fn output(&self, bucket: &str, prefix: &str, tokens: &[Token]) -> Result<ObjectOutput, InputError> {
        let prefix = Path::parse(prefix).map_err(|e| InputError::Store(e.to_string()))?;
        Ok(ObjectOutput { store: self.s3(bucket, tokens)?, prefix })
    }
}

impl ObjectOutput {
    fn at(&self, name: &str) -> Path {
        name.split('/').fold(self.prefix.clone(), |path, part| path.child(part))
    }

    /// Takes the prefix for a job: refused when it holds another job's parts or
    /// `_SUCCESS`, or a `_temporary/` (a job writing there now). The claim itself is
    /// an object put only if none is there, so two drivers cannot both take it where
    /// the store keeps that condition (S3 does).
    pub async fn claim(&self) -> Result<(), OutputError> {
        let listing = self.store.list_with_delimiter(Some(&self.prefix)).await.map_err(|e| describe(&e))?;
        if listing.common_prefixes.iter().any(|p| p.filename() == Some(Parts::TEMPORARY)) {
            return Err(OutputError::Busy);
        }
        for object in &listing.objects {
            let name = object.location.filename().unwrap_or_default();
            if name.starts_with("part-") || name == Parts::SUCCESS {
                return Err(OutputError::Earlier(name.to_owned()));
            }
        }
        let claim = self.at(&format!("{}/{}", Parts::TEMPORARY, CLAIM));
        match self.store.put_opts(&claim, PutPayload::new(), PutMode::Create.into()).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => Err(OutputError::Busy),
            Err(e) => Err(describe(&e).into()),
        }
    }

    /// Where attempt `number` of reduce `partition` uploads its part: sent in chunks as
    /// it is written, and only put in place by [`PartUpload::finish`].
    pub fn upload(&self, partition: u32, number: u32) -> PartUpload {
        let path = self.at(&Parts::attempt_path(partition, number));
        PartUpload {
            store: self.store.clone(),
            path,
            buffer: Vec::new(),
            upload: None,
            starting: None,
            sending: JoinSet::new(),
        }
    }

    /// Commits the part attempt `number` of reduce `partition` uploaded.
    pub async fn commit(&self, partition: u32, number: u32) -> Result<(), InputError> {
        let (from, to) =
            (self.at(&Parts::attempt_path(partition, number)), self.at(&Parts::part_name(partition)));
        self.store.copy(&from, &to).await.map_err(|e| describe(&e))?;
        self.store.delete(&from).await.map_err(|e| describe(&e))
    }

    /// Ends the job's output: everything under `_temporary/` goes (parts of attempts
    /// not committed, the claim), then, when it `succeeded`, `_SUCCESS` is put.
    pub async fn end(&self, succeeded: bool) -> Result<(), InputError> {
        let temporary = self.at(Parts::TEMPORARY);
        let listed = self.store.list(Some(&temporary)).map_ok(|meta| meta.location).boxed();
        let mut deleted = self.store.delete_stream(listed);
        while let Some(result) = deleted.next().await {
            match result {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(describe(&e)),
            }
        }
        if succeeded {
            self.store.put(&self.at(Parts::SUCCESS), PutPayload::new()).await.map_err(|e| describe(&e))?;
        }
        Ok(())
    }
}

/// The object under `_temporary/` that marks the prefix taken.
const CLAIM: &str = ".flint-claim";

/// An attempt's part on its way up: held in memory up to `CHUNK`, then sent as a
/// multipart upload a chunk at a time, at most `IN_FLIGHT` chunks on their way; so it
/// holds at most three chunks whatever its size. Nothing is in place until
/// [`PartUpload::finish`] succeeds; an upload not finished is discarded by
/// [`PartUpload::abort`].
pub struct PartUpload {
    store: Arc<dyn ObjectStore>,
    path: Path,
    buffer: Vec<u8>,
    upload: Option<Box<dyn MultipartUpload>>,
    /// The request that starts the upload, on a task of its own: a wait for it that is
    /// given up (a kill, a deadline) leaves it running, so that [`PartUpload::abort`]
    /// can still learn the upload the store opened and discard it.
    starting: Option<JoinHandle<object_store::Result<Box<dyn MultipartUpload>>>>,
    sending: JoinSet<object_store::Result<()>>,
}

impl PartUpload {
    /// Adds `bytes`; waits while `IN_FLIGHT` chunks are on their way.
    pub async fn write(&mut self, mut bytes: &[u8]) -> Result<(), InputError> {
        while !bytes.is_empty() {
            let take = bytes.len().min(CHUNK - self.buffer.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buffer.len() == CHUNK {
                self.send().await?;
            }
        }
        Ok(())
    }

    /// Sends the buffer as the upload's next chunk, starting the upload if it is the first.
    async fn send(&mut self) -> Result<(), InputError> {
        let upload = match &mut self.upload {
            Some(upload) => upload,
            None => {
                let (store, path) = (self.store.clone(), self.path.clone());
                let starting = self
                    .starting
                    .get_or_insert_with(|| tokio::spawn(async move { store.put_multipart(&path).await }));
                let started = starting.await;
                self.starting = None;
                let started =
                    started.map_err(|e| InputError::Store(format!("starting the upload stopped: {e}")))?;
                self.upload.insert(started.map_err(|e| describe(&e))?)
            }
        };
        while self.sending.len() >= IN_FLIGHT {
            joined(self.sending.join_next().await)?;
        }
        let chunk = PutPayload::from(std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK)));
        self.sending.spawn(upload.put_part(chunk));
        Ok(())
    }

    /// Sends what is left and puts the object in place (under `_temporary/`, for the
    /// driver to commit). One that fails may still be aborted.
    pub async fn finish(&mut self) -> Result<(), InputError> {
        if self.upload.is_none() {
            let bytes = PutPayload::from(std::mem::take(&mut self.buffer));
            return self.store.put(&self.path, bytes).await.map(|_| ()).map_err(|e| describe(&e));
        }
        if !self.buffer.is_empty() {
            self.send().await?;
        }
        while !self.sending.is_empty() {
            joined(self.sending.join_next().await)?;
        }
        let upload = self.upload.as_mut().expect("started");
        upload.complete().await.map_err(|e| describe(&e))?;
        self.upload = None;
        Ok(())
    }

    /// Gives up: chunks already sent are discarded and nothing is put in place.
    pub async fn abort(&mut self) -> Result<(), InputError> {
        self.sending.shutdown().await;
        if let Some(starting) = self.starting.take()
            && let Ok(Ok(upload)) = starting.await
        {
            self.upload = Some(upload);
        }
        match self.upload.take() {
            Some(mut upload) => upload.abort().await.map_err(|e| describe(&e)),
            None => Ok(()),
        }
    }
}

/// A chunk's send as it ended.
fn joined(
    result: Option<Result<object_store::Result<()>, tokio::task::JoinError>>,
) -> Result<(), InputError> {
    match result {
        None | Some(Ok(Ok(()))) => Ok(()),
        Some(Ok(Err(e))) => Err(describe(&e)),
        Some(Err(e)) => Err(InputError::Store(format!("a chunk's send stopped: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::time::Duration;

    fn output() -> (ObjectOutput, Arc<dyn ObjectStore>) {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        (ObjectOutput { store: store.clone(), prefix: Path::from("out/counts") }, store)
    }

    async fn names(store: &Arc<dyn ObjectStore>) -> Vec<String> {
        let mut names: Vec<String> =
            store.list(None).map_ok(|m| m.location.to_string()).try_collect().await.unwrap();
        names.sort();
        names
    }

    #[tokio::test]
    async fn a_part_larger_than_its_chunks_is_in_place_only_once_finished_and_committed() {
        let (output, store) = output();
        output.claim().await.unwrap();
        let mut upload = output.upload(3, 1);
        let bytes: Vec<u8> = (0..(2 * CHUNK + 12_345)).map(|i| (i % 251) as u8).collect();
        for piece in bytes.chunks(1 << 20 | 7) {
            upload.write(piece).await.unwrap();
        }
        assert_eq!(names(&store).await, ["out/counts/_temporary/.flint-claim"], "nothing before it finishes");
        upload.finish().await.unwrap();
        output.commit(3, 1).await.unwrap();
        let part = store.get(&Path::from("out/counts/part-00003")).await.unwrap().bytes().await.unwrap();
        assert_eq!(part.as_ref(), bytes.as_slice());
        output.end(true).await.unwrap();
        assert_eq!(names(&store).await, ["out/counts/_SUCCESS", "out/counts/part-00003"]);
    }

    #[tokio::test]
    async fn an_aborted_upload_and_a_failed_job_leave_nothing() {
        let (output, store) = output();
        output.claim().await.unwrap();
        let mut big = output.upload(0, 0);
        big.write(&vec![7; CHUNK + 1]).await.unwrap();
        big.abort().await.unwrap();
        let mut small = output.upload(1, 0);
        small.write(b"finished, never committed").await.unwrap();
        small.finish().await.unwrap();
        output.end(false).await.unwrap();
        assert!(names(&store).await.is_empty(), "{:?}", names(&store).await);
    }

    /// A store that opens a multipart upload as soon as it is asked but answers 100 ms
    /// later, as one across a network does, and counts the uploads left open.
    #[derive(Debug)]
    struct Slow {
        inner: InMemory,
        open: Arc<AtomicI64>,
    }

    impl std::fmt::Display for Slow {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Slow")
        }
    }

    #[derive(Debug)]
    struct Counted {
        upload: Box<dyn MultipartUpload>,
        open: Arc<AtomicI64>,
    }

    #[async_trait::async_trait]
    impl MultipartUpload for Counted {
        fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
            self.upload.put_part(data)
        }
        async fn complete(&mut self) -> object_store::Result<object_store::PutResult> {
            self.open.fetch_sub(1, Ordering::SeqCst);
            self.upload.complete().await
        }
        async fn abort(&mut self) -> object_store::Result<()> {
            self.open.fetch_sub(1, Ordering::SeqCst);
            self.upload.abort().await
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for Slow {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            let upload = self.inner.put_multipart_opts(location, opts).await?;
            self.open.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok(Box::new(Counted { upload, open: self.open.clone() }))
        }
        async fn get_opts(
            &self,
            location: &Path,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.inner.get_opts(location, options).await
        }
        async fn delete(&self, location: &Path) -> object_store::Result<()> {
            self.inner.delete(location).await
        }
        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
            self.inner.copy(from, to).await
        }
        async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
            self.inner.copy_if_not_exists(from, to).await
        }
    }

    #[tokio::test]
    async fn an_upload_whose_start_was_given_up_on_is_still_discarded() {
        let open = Arc::new(AtomicI64::new(0));
        let store: Arc<dyn ObjectStore> = Arc::new(Slow { inner: InMemory::new(), open: open.clone() });
        let output = ObjectOutput { store, prefix: Path::from("out/counts") };
        let mut upload = output.upload(0, 0);
        // A kill or a deadline gives up the wait while the store is still answering.
        let given_up = tokio::time::timeout(Duration::from_millis(10), upload.write(&vec![7; CHUNK])).await;
        assert!(given_up.is_err(), "the store answers in 100 ms");
        assert_eq!(open.load(Ordering::SeqCst), 1, "the store has opened the upload");
        upload.abort().await.unwrap();
        assert_eq!(open.load(Ordering::SeqCst), 0, "the upload the store opened is discarded");
    }

    #[tokio::test]
    async fn a_prefix_holding_parts_or_a_claim_is_refused() {
        let (output, store) = output();
        output.claim().await.unwrap();
        assert!(matches!(output.claim().await, Err(OutputError::Busy)), "a second job while the first runs");
        output.end(true).await.unwrap();
        let refused = output.claim().await.unwrap_err();
        assert!(refused.to_string().contains("_SUCCESS of an earlier job"), "{refused}");
        store.delete(&Path::from("out/counts/_SUCCESS")).await.unwrap();
        store.put(&Path::from("out/counts/part-00000"), PutPayload::new()).await.unwrap();
        assert!(matches!(output.claim().await, Err(OutputError::Earlier(name)) if name == "part-00000"));
    }
}
