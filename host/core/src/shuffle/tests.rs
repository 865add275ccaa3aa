//! The tracker stepped report by report, as the driver's loop would feed it.

use super::*;

const SHUFFLE: ShuffleId = ShuffleId { job: JobId(1), index: 0 };

fn output(executor: &str, incarnation: u64, sizes: &[u64], digest: u8) -> MapOutput {
    MapOutput {
        executor: executor.into(),
        incarnation: Incarnation(incarnation),
        sizes: sizes.to_vec(),
        digest: [digest; 32],
    }
}

/// Four maps into three partitions: maps 0 and 1 on `a` (incarnation 1), 2 and 3 on `b`
/// (incarnation 2); map 1 wrote nothing for partition 2.
fn four_maps() -> MapOutputTracker {
    let mut t = MapOutputTracker::new();
    t.register(SHUFFLE, 4, 3).unwrap();
    for (map, exec, inc, sizes) in [
        (0, "a", 1, [10, 20, 30]),
        (1, "a", 1, [100, 0, 0]),
        (2, "b", 2, [5, 6, 7]),
        (3, "b", 2, [1, 1, 70_000]),
    ] {
        assert_eq!(t.record(SHUFFLE, map, output(exec, inc, &sizes, map as u8)), Ok(Recorded::Added));
    }
    t
}

#[test]
fn a_reducer_reads_one_request_per_holder_and_never_an_empty_slice() {
    let t = four_maps();
    assert_eq!(t.missing(SHUFFLE).unwrap(), Vec::<u32>::new());
    let holders = t.slices_for(SHUFFLE, 2).unwrap();
    let plan: Vec<_> =
        holders.iter().map(|h| (h.executor.as_str(), h.incarnation.0, h.slices.clone())).collect();
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert_eq!((plan[0].0, plan[0].1), ("a", 1));
    assert_eq!(
        plan[0].2.iter().map(|s| s.0).collect::<Vec<_>>(),
        [0],
        "map 1's empty slice is not asked for"
    );
    assert_eq!(plan[1].2.iter().map(|s| s.0).collect::<Vec<_>>(), [2, 3]);
    // Sizes are kept a byte each, never below what was written, within 10% above.
    for (holder, written) in holders.iter().flat_map(|h| &h.slices).zip([30u64, 7, 70_000]) {
        assert!(
            holder.1 >= written && holder.1 as f64 <= written as f64 * 1.1 + 1.0,
            "{holder:?} for {written}"
        );
    }
    // Partition 1: map 1 wrote nothing, and 1-byte slices are kept exactly.
    let one = t.slices_for(SHUFFLE, 1).unwrap();
    assert_eq!(one[0].slices.iter().map(|s| s.0).collect::<Vec<_>>(), [0]);
    assert_eq!(one[1].slices[1], (3, 1));
    assert_eq!(t.slices_for(SHUFFLE, 3), Err(TrackerError::NoSuchPartition { reduce: 3, reduces: 3 }));
}

#[test]
fn a_lost_executor_takes_exactly_its_outputs_and_their_rerun_is_counted() {
    let mut t = four_maps();
    let gone = t.executor_lost(&"a".into(), Incarnation(1));
    assert_eq!(gone.iter().map(|g| g.map).collect::<Vec<_>>(), [0, 1]);
    assert!(gone.iter().all(|g| g.reason == GoneReason::ExecutorLost && g.shuffle == SHUFFLE));
    assert_eq!(t.missing(SHUFFLE).unwrap(), [0, 1]);
    assert_eq!(t.slices_for(SHUFFLE, 0), Err(TrackerError::Missing(vec![0, 1])), "no reducer starts short");
    // A second report of the same loss, or of an incarnation that held nothing: no-ops.
    assert!(t.executor_lost(&"a".into(), Incarnation(1)).is_empty());
    assert!(t.executor_lost(&"b".into(), Incarnation(9)).is_empty());

    // The maps run again on `b` and `c`, reproducing their bytes.
    assert_eq!(t.record(SHUFFLE, 0, output("b", 2, &[10, 20, 30], 0)), Ok(Recorded::Added));
    assert_eq!(t.record(SHUFFLE, 1, output("c", 3, &[100, 0, 0], 1)), Ok(Recorded::Added));
    assert_eq!(t.reruns(SHUFFLE), Ok(2));
    let holders = t.slices_for(SHUFFLE, 0).unwrap();
    assert_eq!(holders.iter().map(|h| h.executor.as_str()).collect::<Vec<_>>(), ["b", "c"]);
    assert_eq!(holders[0].slices.iter().map(|s| s.0).collect::<Vec<_>>(), [0, 2, 3]);

    // Losing `b` now takes map 0's new output with its own.
    let gone = t.executor_lost(&"b".into(), Incarnation(2));
    assert_eq!(gone.iter().map(|g| g.map).collect::<Vec<_>>(), [0, 2, 3]);
}

#[test]
fn a_fetch_failure_marks_only_what_that_incarnation_still_holds() {
    let mut t = four_maps();
    let gone = t.fetch_failed(SHUFFLE, Incarnation(2), &[2, 3], "checksum mismatch in partition 1").unwrap();
    assert_eq!(gone.iter().map(|g| g.map).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(gone[0].reason, GoneReason::FetchFailed("checksum mismatch in partition 1".into()));
    // A second reducer's report of the same failure comes late: nothing more is gone.
    assert!(t.fetch_failed(SHUFFLE, Incarnation(2), &[2, 3], "refused").unwrap().is_empty());
    // Map 2 reruns on `a`; a stale failure naming `b`'s incarnation leaves it be.
    t.record(SHUFFLE, 2, output("a", 1, &[5, 6, 7], 2)).unwrap();
    assert!(t.fetch_failed(SHUFFLE, Incarnation(2), &[2], "gone").unwrap().is_empty());
    assert_eq!(t.missing(SHUFFLE).unwrap(), [3]);
    // `b`'s loss later finds nothing of it left to take.
    assert!(t.executor_lost(&"b".into(), Incarnation(2)).is_empty());
    assert_eq!(
        t.fetch_failed(SHUFFLE, Incarnation(1), &[4], "x"),
        Err(TrackerError::NoSuchMap { map: 4, maps: 4 }),
        "a map index from the wire is checked"
    );
}

#[test]
fn a_rerun_that_writes_other_bytes_is_refused_and_a_duplicate_is_not_used() {
    let mut t = four_maps();
    // A second attempt of a live map (speculation, a late duplicate): the first stays.
    assert_eq!(t.record(SHUFFLE, 0, output("b", 2, &[1, 2, 3], 0)), Ok(Recorded::Duplicate));
    assert_eq!(t.slices_for(SHUFFLE, 0).unwrap()[0].executor.as_str(), "a");
    t.executor_lost(&"a".into(), Incarnation(1));
    assert_eq!(
        t.record(SHUFFLE, 0, output("b", 2, &[10, 20, 30], 99)),
        Err(TrackerError::Nondeterministic { map: 0 })
    );
    assert_eq!(t.missing(SHUFFLE).unwrap(), [0, 1], "a refused output is not recorded");
    assert_eq!(t.reruns(SHUFFLE), Ok(0));
}

#[test]
fn what_comes_from_the_wire_is_checked_before_it_is_kept() {
    let mut t = MapOutputTracker::new();
    for (maps, reduces) in [(0, 1), (1, 0), (MAX_PARTITIONS + 1, 1), (MAX_PARTITIONS, MAX_PARTITIONS)] {
        assert_eq!(t.register(SHUFFLE, maps, reduces), Err(TrackerError::Size { maps, reduces }));
    }
    t.register(SHUFFLE, 2, 2).unwrap();
    assert_eq!(t.register(SHUFFLE, 2, 2), Err(TrackerError::AlreadyRegistered(SHUFFLE)));
    assert_eq!(
        t.record(SHUFFLE, 2, output("a", 1, &[1, 1], 0)),
        Err(TrackerError::NoSuchMap { map: 2, maps: 2 })
    );
    assert_eq!(
        t.record(SHUFFLE, 0, output("a", 1, &[1, 1, 1], 0)),
        Err(TrackerError::Partitions { map: 0, got: 3, want: 2 })
    );
    let other = ShuffleId { job: JobId(2), index: 0 };
    assert_eq!(t.record(other, 0, output("a", 1, &[1], 0)), Err(TrackerError::UnknownShuffle(other)));
    assert_eq!(t.missing(SHUFFLE).unwrap(), [0, 1]);
}

#[test]
fn a_job_that_ends_takes_its_shuffles_and_their_holders_with_it() {
    let mut t = four_maps();
    let other = ShuffleId { job: JobId(2), index: 0 };
    t.register(other, 1, 1).unwrap();
    t.record(other, 0, output("a", 1, &[5], 7)).unwrap();
    assert_eq!(t.job_ended(JobId(1)), [SHUFFLE]);
    assert_eq!(t.missing(SHUFFLE), Err(TrackerError::UnknownShuffle(SHUFFLE)));
    // `a`'s loss now concerns only job 2's output.
    let gone = t.executor_lost(&"a".into(), Incarnation(1));
    assert_eq!(gone, [Gone { shuffle: other, map: 0, reason: GoneReason::ExecutorLost }]);
    assert!(t.held.is_empty());
}

#[test]
fn sizes_kept_in_a_byte_are_never_below_and_within_a_tenth_above() {
    let large = (0..64).map(|shift| (1u64 << 34) >> shift ^ 0x5555);
    for bytes in (0..200_000).chain(large) {
        let kept = decompress_size(compress_size(bytes));
        assert!(kept >= bytes, "{bytes} kept as {kept}");
        assert!(kept as f64 <= bytes as f64 * 1.1 + 1.0, "{bytes} kept as {kept}");
    }
    assert_eq!(compress_size(u64::MAX), 255);
}
