//! Map outputs handed over by an executor that leaves: each copied whole from its
//! holder (its index and data file), checked (an index of the job's partitions, the
//! digest its map wrote, data as long as the index says, each slice's CRC right) and
//! put in place as if a map had written it here, within this executor's disk budget.
//! One already here with the same digest (a duplicate attempt's) is not copied again.

use super::files::ShuffleFiles;
use super::index::{Index, index_len};
use super::read::{ShuffleFetch, file_crc};
use super::tasks::Refusal;
use crate::core::ExecutorCore;
use flint_proto::{Adopted, Adoption, JobId};
use std::io::Write;

/// A map output as a holder sends it: its index, and its data file, open.
#[derive(Debug)]
pub struct Output {
    pub index: Vec<u8>,
    pub data: std::fs::File,
    pub size: u64,
}

impl ExecutorCore {
    /// Copies the outputs `adoption` names from their holder: the maps now held here,
    /// and why the others are not. The job's secret was registered (`know_shuffle`) when
    /// the adoption arrived, in command order, so that the job's end, which forgets it,
    /// also deletes what is copied here.
    pub fn adopt(&self, adoption: &Adoption) -> Adopted {
        let mut adopted = Adopted {
            job: adoption.job,
            from: adoption.from.incarnation,
            maps: Vec::new(),
            failed: Vec::new(),
        };
        let fetcher = self.fetcher.read().expect("fetcher lock").clone();
        let (Some(files), Some((fetcher, _))) = (&self.shuffle, fetcher) else {
            let why = "this executor cannot hold map outputs of its peers";
            adopted.failed = adoption.outputs.iter().map(|o| (o.0, why.to_owned())).collect();
            return adopted;
        };
        let ended = || !self.shuffle_tokens.lock().expect("tokens lock").contains_key(&adoption.job);
        for &(map, digest, bound) in &adoption.outputs {
            if ended() {
                break;
            }
            match copy(files, &*fetcher, adoption, (map, digest, bound)) {
                Ok(()) => adopted.maps.push(map),
                Err(why) => adopted.failed.push((map, why)),
            }
        }
        // The job ended before or while they were copied: they are no one's.
        if ended() {
            files.drop_job(adoption.job);
            let why = "the job ended".to_owned();
            let answered: std::collections::HashSet<u32> = adopted.failed.iter().map(|f| f.0).collect();
            let rest = adoption.outputs.iter().map(|o| o.0).filter(|m| !answered.contains(m));
            adopted.failed.extend(rest.map(|m| (m, why.clone())));
            adopted.maps.clear();
        }
        adopted
    }

    /// A map's whole output held here, for a peer adopting it that shows the job's
    /// shuffle secret.
    pub fn serve_output(&self, job: JobId, token: &[u8; 32], map: u32) -> Result<Output, Refusal> {
        self.check_token(job, token)?;
        let unreadable =
            |reason: String| Refusal::Unreadable(super::read::FetchError { maps: vec![map], reason });
        let files = self.shuffle.as_ref().ok_or_else(|| unreadable("no shuffle folder here".into()))?;
        let (data, index) = files.paths(job, map);
        let opened = Index::read(&index).and_then(|index| Ok((index, std::fs::File::open(&data)?)));
        let (index, data) = opened.map_err(|e| unreadable(format!("map {map}'s output: {e}")))?;
        Ok(Output { size: index.data_len(), index: index.bytes().to_vec(), data })
    }
}

/// Copies one output into place; why not, if it cannot.
pub(crate) fn copy(
    files: &ShuffleFiles,
    fetcher: &dyn ShuffleFetch,
    adoption: &Adoption,
    (map, digest, bound): (u32, [u8; 32], u64),
) -> Result<(), String> {
    let (data_path, index_path) = files.paths(adoption.job, map);
    let checked = |index: &Index, size: u64| -> Result<(), String> {
        match () {
            _ if index.reduces() != adoption.reduces => {
                Err("its index is not of the job's partitions".into())
            }
            _ if index.digest() != digest => Err("its digest is not the one its map wrote".into()),
            _ if index.data_len() != size => Err("its data is not as long as its index says".into()),
            _ => Ok(()),
        }
    };
    // A copy already here (a duplicate attempt ran here) serves as it is.
    if let Ok(index) = Index::read(&index_path)
        && let Ok(meta) = std::fs::metadata(&data_path)
        && checked(&index, meta.len()).is_ok()
    {
        return Ok(());
    }
    let mut held = files.reserve(adoption.job, map);
    held.grow(bound + index_len(adoption.reduces) as u64).map_err(|e| format!("no room: {e}"))?;
    let dir = data_path.parent().expect("a job folder").to_owned();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make the shuffle folder: {e}"))?;
    let tag = rand::random::<u64>();
    let tmp_data = dir.join(format!("map-{map}.data.{tag:x}"));
    let tmp_index = dir.join(format!("map-{map}.index.{tag:x}"));
    let placed = (|| {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp_data).map_err(|e| e.to_string())?);
        let mut size = 0u64;
        let index = fetcher.fetch_output(
            adoption,
            map,
            (bound, index_len(adoption.reduces)),
            &mut |piece: &[u8]| {
                size += piece.len() as u64;
                if size > bound {
                    return Err(std::io::Error::other("the holder sent more than its sizes say"));
                }
                out.write_all(piece)
            },
        )?;
        out.into_inner().map_err(|e| e.to_string())?.sync_data().map_err(|e| e.to_string())?;
        let index = Index::parse(index).map_err(|e| format!("the holder sent {e}"))?;
        checked(&index, size)?;
        for partition in 0..index.reduces() {
            let (start, end, crc) = index.slice(partition).expect("a partition of the index");
            if end > start && file_crc(&tmp_data, start, end - start).map_err(|e| e.to_string())? != crc {
                return Err(format!("partition {partition}'s slice does not match its checksum"));
            }
        }
        std::fs::write(&tmp_index, index.bytes()).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp_data, &data_path).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp_index, &index_path).map_err(|e| e.to_string())
    })();
    match placed {
        Ok(()) => {
            files.keep(adoption.job, held);
            Ok(())
        }
        Err(why) => {
            let _ = std::fs::remove_file(&tmp_data);
            let _ = std::fs::remove_file(&tmp_index);
            Err(why)
        }
    }
}
