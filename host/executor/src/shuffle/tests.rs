//! Map outputs written, spilled, read back and checked, on a real folder.

use super::files::ShuffleFiles;
use super::merge::SortedRuns;
use super::write::MapWriter;
use flint_proto::JobId;
use flint_runtime::RecordSink;
use std::io::Cursor;

const JOB: JobId = JobId(7);

/// `n` records over `reduces` partitions, in the guest's layout, in batches of about
/// 64 KiB; keys repeat so that a key's values come from several batches.
fn batches(n: u32, reduces: u32) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    for i in 0..n {
        let key = format!("key-{:05}", (i.wrapping_mul(2_654_435_761)) % 5_000);
        let value = i.to_le_bytes();
        let partition = crc32fast::hash(key.as_bytes()) % reduces;
        let batch = out.last_mut().unwrap();
        batch.extend_from_slice(&partition.to_le_bytes());
        batch.extend_from_slice(&(key.len() as u32).to_le_bytes());
        batch.extend_from_slice(&(value.len() as u32).to_le_bytes());
        batch.extend_from_slice(key.as_bytes());
        batch.extend_from_slice(&value);
        if batch.len() > 64 << 10 {
            out.push(Vec::new());
        }
    }
    out
}

/// A partition's records, merged from the slices read back, in order.
fn records(files: &ShuffleFiles, partition: u32, maps: &[u32]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let slices: Vec<_> =
        files.locate_slices(JOB, partition, maps).unwrap().iter().map(|l| l.read().unwrap()).collect();
    let mut runs = SortedRuns::new(partition);
    for slice in slices {
        assert!(slice.intact(), "{slice:?}");
        runs.push(zstd::Decoder::new(Cursor::new(slice.bytes)).unwrap()).unwrap();
    }
    let mut out = Vec::new();
    while runs.pop(|_, k, v| out.push((k.to_vec(), v.to_vec()))).unwrap() {}
    out
}

/// A map's writer with `records` records of `batches` emitted into it.
fn filled(files: &ShuffleFiles, map: u32, reduces: u32, records: u32) -> MapWriter {
    let mut writer = MapWriter::new(files.clone(), JOB, map, reduces, 1 << 20);
    for batch in batches(records, reduces) {
        writer.emit(&batch).unwrap();
    }
    writer
}

/// Maps 0 and 1 given the same 200,000 records over four partitions: map 0 in 1 MiB
/// of memory for about 4 MiB of records (several sorted runs, merged at the end), map
/// 1 with room for all.
fn spilling_and_whole(files: &ShuffleFiles) -> (MapWriter, MapWriter) {
    let mut spilling = MapWriter::new(files.clone(), JOB, 0, 4, 1 << 20);
    let mut whole = MapWriter::new(files.clone(), JOB, 1, 4, 1 << 30);
    for batch in &batches(200_000, 4) {
        spilling.emit(batch).unwrap();
        whole.emit(batch).unwrap();
    }
    assert!(spilling.spills.len() >= 3, "{} runs", spilling.spills.len());
    (spilling, whole)
}

#[test]
fn a_map_that_spills_writes_what_one_that_does_not_would() {
    let dir = tempfile::tempdir().unwrap();
    let files = ShuffleFiles::new(&[dir.path().join("a"), dir.path().join("b")]).unwrap();
    let (spilling, whole) = spilling_and_whole(&files);
    let (a, b) = (spilling.finish(None).unwrap(), whole.finish(None).unwrap());
    assert_eq!(a.records, 200_000);
    assert_eq!(a.digest, b.digest, "the same records in the same order");
    assert_eq!(a.sizes.len(), 4);
    for partition in 0..4 {
        let got = records(&files, partition, &[0]);
        assert_eq!(got, records(&files, partition, &[1]));
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "partition {partition} in key order");
        // A key's values stay in the order they were emitted.
        for run in got.chunk_by(|x, y| x.0 == y.0) {
            let values: Vec<u32> =
                run.iter().map(|(_, v)| u32::from_le_bytes(v[..4].try_into().unwrap())).collect();
            assert!(values.is_sorted(), "{values:?}");
        }
    }
    let total: usize = (0..4).map(|p| records(&files, p, &[0]).len()).sum();
    assert_eq!(total, 200_000);
    // Both maps' slices merge, map 0's first among equal keys.
    let both = records(&files, 2, &[0, 1]);
    assert_eq!(both.len(), 2 * records(&files, 2, &[0]).len());
    assert!(both.windows(2).all(|w| w[0].0 <= w[1].0));
    // The spills are gone; the job's files go with the job.
    assert!(
        !files.spill_dir(JOB, 0).exists()
            || std::fs::read_dir(files.spill_dir(JOB, 0)).unwrap().next().is_none()
    );
    assert_eq!(files.count_files(), 4, "a data file and an index per map");
    files.drop_job(JOB);
    assert_eq!(files.count_files(), 0);
}

#[test]
fn a_batch_that_lies_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let files = ShuffleFiles::new(&[dir.path().to_path_buf()]).unwrap();
    let mut writer = MapWriter::new(files, JOB, 0, 2, 1 << 20);
    let good = batches(10, 2).remove(0);
    let mut bad_partition = good.clone();
    bad_partition.extend_from_slice(&2u32.to_le_bytes());
    bad_partition.extend_from_slice(&[0; 8]);
    let mut too_long = good.clone();
    too_long.extend_from_slice(&0u32.to_le_bytes());
    too_long.extend_from_slice(&u32::MAX.to_le_bytes());
    too_long.extend_from_slice(&u32::MAX.to_le_bytes());
    let cut = good[..good.len() - 1].to_vec();
    let header_cut = [good.as_slice(), &[0, 0, 0]].concat();
    for (what, batch) in
        [("partition", bad_partition), ("length", too_long), ("cut", cut), ("header", header_cut)]
    {
        let e = writer.emit(&batch).unwrap_err();
        assert!(!e.retryable, "{what}: {e}");
    }
    assert_eq!(writer.records, 0, "nothing of a refused batch is kept");
    writer.emit(&good).unwrap();
    assert_eq!(writer.finish(None).unwrap().records, 10);
}

#[test]
fn a_slice_corrupted_on_disk_fails_its_checksum_and_a_missing_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let files = ShuffleFiles::new(&[dir.path().to_path_buf()]).unwrap();
    filled(&files, 3, 1, 1_000).finish(None).unwrap();
    let (data, _) = files.paths(JOB, 3);
    let mut bytes = std::fs::read(&data).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&data, bytes).unwrap();
    let slice = files.locate_slices(JOB, 0, &[3]).unwrap()[0].read().unwrap();
    assert!(!slice.intact());
    let e = files.locate_slices(JOB, 0, &[3, 4]).unwrap_err();
    assert_eq!(e.maps, [4]);
}

#[test]
fn an_index_that_lies_about_sizes_fails_its_map_before_anything_is_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let files = ShuffleFiles::new(&[dir.path().to_path_buf()]).unwrap();
    filled(&files, 3, 2, 1_000).finish(None).unwrap();
    let (_, index) = files.paths(JOB, 3);
    let good = std::fs::read(&index).unwrap();
    // The last offset (the data file's end) says 32 TiB: in order, but past the file.
    let mut huge = good.clone();
    huge[12 + 2 * 8..12 + 3 * 8].copy_from_slice(&(1u64 << 45).to_le_bytes());
    std::fs::write(&index, &huge).unwrap();
    let e = files.locate_slices(JOB, 1, &[3]).unwrap_err();
    assert_eq!(e.maps, [3]);
    assert!(e.reason.contains("of a") && e.reason.contains("-byte data file"), "{}", e.reason);
    // An index that says it has 2^32-1 partitions is refused by its length, unread.
    let mut partitions = good.clone();
    partitions[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&index, &partitions).unwrap();
    let e = files.locate_slices(JOB, 0, &[3]).unwrap_err();
    assert!(e.reason.contains("does not match its partitions"), "{}", e.reason);
    // Put back, the map serves again.
    std::fs::write(&index, &good).unwrap();
    assert_eq!(files.locate_slices(JOB, 0, &[3]).unwrap().len(), 1);
}

#[test]
fn a_new_executor_deletes_what_a_dead_one_left_and_not_what_a_live_one_holds() {
    let dir = tempfile::tempdir().unwrap();
    let live = ShuffleFiles::new(&[dir.path().to_path_buf()]).unwrap();
    let dead = dir.path().join("flint-shuffle-00000000000000aa");
    std::fs::create_dir_all(dead.join("job-1")).unwrap();
    std::fs::write(dead.join("lock"), b"").unwrap();
    let other = ShuffleFiles::new(&[dir.path().to_path_buf()]).unwrap();
    assert!(!dead.exists());
    assert!(live.dirs()[0].exists(), "a live executor's folder stays");
    drop(other);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn executors_starting_together_in_one_folder_never_sweep_each_other() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..20 {
        let started: Vec<ShuffleFiles> = std::thread::scope(|scope| {
            let starting: Vec<_> =
                (0..6).map(|_| scope.spawn(|| ShuffleFiles::new(&[dir.path().to_path_buf()]))).collect();
            starting.into_iter().map(|s| s.join().unwrap().expect("every executor starts")).collect()
        });
        for files in &started {
            for folder in files.dirs() {
                assert!(
                    folder.join("lock").exists(),
                    "{} was swept while its executor lived",
                    folder.display()
                );
            }
        }
    }
}

/// A job's `combine-sorted` as the SDK makes it, for values that are little-endian
/// integers: each run of one key becomes one record of its values' sum (a u64).
fn summing(batch: &[u8]) -> Result<Option<Vec<u8>>, flint_proto::TaskFailure> {
    let mut runs: Vec<(u32, Vec<u8>, u64)> = Vec::new();
    let mut at = 0;
    while at < batch.len() {
        let field = |i: usize| u32::from_le_bytes(batch[at + i..at + i + 4].try_into().unwrap()) as usize;
        let (partition, klen, vlen) = (field(0) as u32, field(4), field(8));
        let key = &batch[at + 12..at + 12 + klen];
        let value = &batch[at + 12 + klen..at + 12 + klen + vlen];
        let mut wide = [0u8; 8];
        wide[..vlen].copy_from_slice(value);
        match runs.last_mut() {
            Some((_, k, sum)) if k.as_slice() == key => *sum += u64::from_le_bytes(wide),
            _ => runs.push((partition, key.to_vec(), u64::from_le_bytes(wide))),
        }
        at += 12 + klen + vlen;
    }
    let mut out = Vec::new();
    for (partition, key, sum) in runs {
        out.extend_from_slice(&partition.to_le_bytes());
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(&8u32.to_le_bytes());
        out.extend_from_slice(&key);
        out.extend_from_slice(&sum.to_le_bytes());
    }
    Ok(Some(out))
}

#[test]
fn a_combining_map_writes_each_key_once_whether_it_spilled_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let files = ShuffleFiles::new(&[dir.path().to_path_buf()]).unwrap();
    // 200,000 records of 5,000 keys, each key's values spread over many batches.
    let (spilling, whole) = spilling_and_whole(&files);
    let mut calls = 0;
    let mut counting = |batch: &[u8]| {
        calls += 1;
        summing(batch)
    };
    let a = spilling.finish(Some(&mut counting)).unwrap();
    let b = whole.finish(Some(&mut summing)).unwrap();
    assert!(calls > 1, "asked once whether it combines, then given the repeats");
    assert_eq!(a.records, 200_000, "records the map emitted");
    assert_eq!(a.digest, b.digest, "the same records whether the map spilled or not");
    let mut keys = 0;
    let mut total = 0u64;
    for partition in 0..4 {
        let got = records(&files, partition, &[0]);
        assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "each key once, in order");
        keys += got.len();
        total += got.iter().map(|(_, v)| u64::from_le_bytes(v[..8].try_into().unwrap())).sum::<u64>();
    }
    assert_eq!(keys, 5_000);
    assert_eq!(total, (0..200_000u64).sum::<u64>(), "every value folded in once");
}

#[test]
fn a_combine_that_breaks_key_order_fails_the_map_and_places_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let files = ShuffleFiles::new(&[dir.path().to_path_buf()]).unwrap();
    let writer = filled(&files, 0, 2, 20_000);
    // Folds, then hands the records back last key first.
    let mut reversing = |batch: &[u8]| {
        let Some(folded) = summing(batch)? else { return Ok(None) };
        let mut records: Vec<&[u8]> = folded.chunks(12 + 9 + 8).collect();
        records.reverse();
        Ok(Some(records.concat()))
    };
    let failure = writer.finish(Some(&mut reversing)).unwrap_err();
    assert!(
        matches!(&failure, flint_proto::TaskFailure::Guest { message, retryable: false } if message.contains("order")),
        "{failure:?}"
    );
    assert_eq!(files.count_files(), 0, "no output placed, no temporary left");

    // A job that does not combine: its records go as they came.
    let status = filled(&files, 1, 2, 20_000).finish(Some(&mut |_: &[u8]| Ok(None))).unwrap();
    let written: usize = (0..2).map(|p| records(&files, p, &[1]).len()).sum();
    assert_eq!((status.records, written), (20_000, 20_000));
}

#[test]
fn shuffle_files_stay_within_the_disk_budget_and_give_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let settings = flint_proto::Settings {
        shuffle_max_disk_size: Some(256 << 10),
        local_dir_min_free: 0,
        ..flint_proto::Settings::default()
    };
    let files = ShuffleFiles::with_settings(&[dir.path().to_path_buf()], &settings).unwrap();
    // About 10 MB of records in 1 MiB of memory: the spills pass 256 KiB of disk.
    let mut big = MapWriter::new(files.clone(), JOB, 0, 4, 1 << 20);
    let refused = batches(400_000, 4).iter().find_map(|batch| big.emit(batch).err());
    assert!(refused.is_some(), "a spill past the budget is refused");
    let failure = big.refused().cloned().expect("the refusal is kept");
    assert!(
        matches!(&failure, flint_proto::TaskFailure::DiskFull { key, .. } if key == "flint.shuffle.maxDiskSize")
    );
    assert_eq!(big.finish(None).unwrap_err(), failure, "the map fails as disk-full");
    assert_eq!(files.budget().used(), 0, "its spills are gone and given back");
    assert_eq!(files.count_files(), 0);

    // Within it: the output is held until its job goes.
    filled(&files, 1, 4, 2_000).finish(None).unwrap();
    let held = files.budget().used();
    assert!(held > 0 && held <= 256 << 10, "{held}");
    files.drop_job(JOB);
    assert_eq!(files.budget().used(), 0);
}

#[test]
fn a_part_is_left_for_the_driver_to_commit_and_an_attempt_that_outlives_its_job_has_nowhere_to_write() {
    use flint_runtime::PartSink;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("_temporary")).unwrap();
    let mut part = super::parts::PartFile::create(dir.path(), 3, 0, 0).unwrap();
    part.write(b"w\t1\n").unwrap();
    part.keep().unwrap();
    let kept = dir.path().join("_temporary/part-00003.0");
    assert_eq!(std::fs::read(kept).unwrap(), b"w\t1\n");
    assert!(!dir.path().join("part-00003").exists(), "only the driver commits");
    // A failed attempt leaves nothing.
    let mut failed = super::parts::PartFile::create(dir.path(), 3, 1, 0).unwrap();
    failed.write(b"half").unwrap();
    drop(failed);
    assert!(!dir.path().join("_temporary/part-00003.1").exists());
    // The job ended: the driver removed `_temporary`.
    std::fs::remove_dir_all(dir.path().join("_temporary")).unwrap();
    let late = super::parts::PartFile::create(dir.path(), 3, 2, 0).err().unwrap();
    assert!(late.to_string().contains("the job has ended"), "{late}");
    assert!(!dir.path().join("_temporary").exists(), "not made again");
}

#[test]
fn a_part_leaves_what_flint_local_dir_min_free_keeps_on_its_disk() {
    use flint_runtime::PartSink;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("_temporary")).unwrap();
    // More kept free than any disk here has: the first write is refused, retryably,
    // naming the key, and nothing is written.
    let mut part = super::parts::PartFile::create(dir.path(), 0, 0, u64::MAX / 2).unwrap();
    let refused = part.write(b"w\t1\n").unwrap_err();
    assert!(refused.retryable && refused.message.contains("flint.local.dir.minFree"), "{}", refused.message);
    drop(part);
    assert!(!dir.path().join("_temporary/part-00000.0").exists());
    // What the disk has room for is written.
    let mut part = super::parts::PartFile::create(dir.path(), 0, 1, 1).unwrap();
    part.write(b"w\t1\n").unwrap();
    part.keep().unwrap();
}

/// Hands a map output over as a holder would, from its files: its data through
/// `spoil` (which may change a byte) on the way.
struct Holder {
    files: ShuffleFiles,
    spoil: fn(&mut Vec<u8>),
}

impl super::read::ShuffleFetch for Holder {
    fn fetch(
        &self,
        _: JobId,
        _: &[u8; 32],
        _: u32,
        _: &flint_proto::MapSource,
        _: std::time::Instant,
        _: &mut dyn FnMut(super::read::Slice) -> Result<(), super::read::FetchError>,
    ) -> Result<(), super::read::FetchError> {
        unreachable!("only whole outputs here")
    }

    fn fetch_output(
        &self,
        adoption: &flint_proto::Adoption,
        map: u32,
        (most, index_most): (u64, usize),
        data: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<Vec<u8>, String> {
        let (data_path, index_path) = self.files.paths(adoption.job, map);
        let index = std::fs::read(index_path).unwrap();
        let mut bytes = std::fs::read(data_path).unwrap();
        (self.spoil)(&mut bytes);
        let _ = (most, index_most); // the adopter's own checks are what is tested
        bytes.chunks(1000).try_for_each(data).map_err(|e| e.to_string())?;
        Ok(index)
    }
}

#[test]
fn an_adopted_output_is_checked_whole_before_it_takes_the_place_of_one_written_here() {
    let dir = tempfile::tempdir().unwrap();
    let holder = ShuffleFiles::new(&[dir.path().join("leaving")]).unwrap();
    let status = filled(&holder, 3, 4, 20_000).finish(None).unwrap();
    let stored: u64 = status.sizes.iter().sum();
    let from = flint_proto::MapSource {
        executor: "leaving".into(),
        incarnation: 1,
        address: None,
        maps: Vec::new(),
    };
    let adoption = |reduces: u32| flint_proto::Adoption {
        job: JOB,
        token: [1; 32],
        reduces,
        from: from.clone(),
        outputs: Vec::new(),
    };
    let adopt = |spoil: fn(&mut Vec<u8>), reduces: u32, digest: [u8; 32], bound: u64| {
        let files =
            ShuffleFiles::new(&[dir.path().join(format!("adopter-{}", rand::random::<u32>()))]).unwrap();
        let fetcher = Holder { files: holder.clone(), spoil };
        let result = super::adopt::copy(&files, &fetcher, &adoption(reduces), (3, digest, bound));
        (result, files)
    };
    let intact: fn(&mut Vec<u8>) = |_| {};
    // Whole and right: read back as the holder's own, and held against the budget.
    let (result, files) = adopt(intact, 4, status.digest, stored);
    assert_eq!(result, Ok(()));
    for partition in 0..4 {
        assert_eq!(records(&files, partition, &[3]), records(&holder, partition, &[3]));
    }
    assert!(files.holds_outputs() && files.budget().used() >= stored);
    // A byte changed on the way, another map's digest, another job's partitions, more
    // than its sizes allow: refused, nothing left behind, nothing held.
    let flipped: fn(&mut Vec<u8>) = |bytes| {
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
    };
    let cases = [
        (adopt(flipped, 4, status.digest, stored), "does not match its checksum"),
        (adopt(intact, 4, [9; 32], stored), "digest"),
        (adopt(intact, 5, status.digest, stored), "partitions"),
        (adopt(intact, 4, status.digest, stored - 1), "more than its sizes say"),
    ];
    for ((result, files), why) in cases {
        let said = result.unwrap_err();
        assert!(said.contains(why), "{said}");
        assert_eq!(files.count_files(), 0, "{why}: nothing left");
        assert!(!files.holds_outputs() && files.budget().used() == 0, "{why}: nothing held");
    }
    // One already here with the same digest is taken as it is, without a copy.
    let (result, files) = adopt(intact, 4, status.digest, stored);
    assert_eq!(result, Ok(()));
    let fetcher = Holder { files: holder.clone(), spoil: |_| panic!("copied again") };
    assert_eq!(super::adopt::copy(&files, &fetcher, &adoption(4), (3, status.digest, stored)), Ok(()));
}
