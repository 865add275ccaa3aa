//! The tracker stepped report by report, as the driver's loop would feed it.

use super::*;

const SHUFFLE: ShuffleId = ShuffleId { job: JobId(1), index: 0 };

fn output(executor: &str, incarnation: u64, sizes: &[u64], digest: u8) -> MapOutput {
    MapOutput {
        executor: executor.into(),
        incarnation: Incarnation(incarnation),
        sizes: sizes.to_vec(),
        digest: [digest; 32],
        inline: Vec::new(),
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
    let holders = t.slices_for(SHUFFLE, 2).unwrap().holders;
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
    let one = t.slices_for(SHUFFLE, 1).unwrap().holders;
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
    let holders = t.slices_for(SHUFFLE, 0).unwrap().holders;
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
    assert_eq!(t.slices_for(SHUFFLE, 0).unwrap().holders[0].executor.as_str(), "a");
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

fn slice(len: usize, fill: u8) -> InlineSlice {
    InlineSlice { crc: u32::from(fill), bytes: vec![fill; len] }
}

#[test]
fn inline_slices_go_in_the_launch_and_their_maps_are_not_asked_for() {
    let mut t = MapOutputTracker::new();
    t.register(SHUFFLE, 3, 2).unwrap();
    // Map 0 sends both its slices inline, map 1 only partition 1's, map 2 none.
    let mut zero = output("a", 1, &[10, 20], 0);
    zero.inline = vec![(0, slice(10, 1)), (1, slice(20, 2))];
    let mut one = output("a", 1, &[300, 30], 1);
    one.inline = vec![(1, slice(30, 3))];
    t.record(SHUFFLE, 0, zero).unwrap();
    t.record(SHUFFLE, 1, one).unwrap();
    t.record(SHUFFLE, 2, output("b", 2, &[40, 40], 2)).unwrap();
    assert_eq!(t.inline_held(), 60);

    let first = t.slices_for(SHUFFLE, 0).unwrap();
    assert_eq!(first.inline, vec![(0, slice(10, 1))]);
    let asked: Vec<_> = first.holders.iter().map(|h| (h.executor.as_str(), h.slices.clone())).collect();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].0, "a");
    assert_eq!(asked[0].1.iter().map(|(m, _)| *m).collect::<Vec<_>>(), vec![1], "map 0 is at hand");
    assert_eq!(asked[1].1.iter().map(|(m, _)| *m).collect::<Vec<_>>(), vec![2]);

    // Every slice of `a` for partition 1 is at hand: `a` is not asked at all.
    let second = t.slices_for(SHUFFLE, 1).unwrap();
    assert_eq!(second.inline, vec![(0, slice(20, 2)), (1, slice(30, 3))]);
    assert_eq!(second.holders.len(), 1);
    assert_eq!(second.holders[0].executor.as_str(), "b");

    // Lost with their executor, as the outputs they copy; the bytes are let go.
    let gone = t.executor_lost(&"a".into(), Incarnation(1));
    assert_eq!(gone.len(), 2);
    assert_eq!(t.inline_held(), 0);
    let mut again = output("c", 3, &[10, 20], 0);
    again.inline = vec![(1, slice(20, 2))];
    t.record(SHUFFLE, 0, again).unwrap();
    assert_eq!(t.inline_held(), 20);
    t.job_ended(SHUFFLE.job);
    assert_eq!(t.inline_held(), 0);
}

#[test]
fn a_launch_carries_a_bounded_inline_load_and_the_tracker_a_bounded_store() {
    let maps = 40;
    let mut t = MapOutputTracker::new();
    t.register(SHUFFLE, maps, 1).unwrap();
    for map in 0..maps {
        let mut o = output("a", 1, &[INLINE_SLICE as u64], map as u8);
        o.inline = vec![(0, slice(INLINE_SLICE, map as u8))];
        t.record(SHUFFLE, map, o).unwrap();
    }
    let input = t.slices_for(SHUFFLE, 0).unwrap();
    let carried: usize = input.inline.iter().map(|(_, s)| s.bytes.len()).sum();
    assert_eq!(carried, INLINE_PER_LAUNCH, "as many whole slices as fit");
    let asked = input.holders[0].slices.iter().map(|(m, _)| *m);
    let mut every: Vec<u32> = input.inline.iter().map(|(m, _)| *m).chain(asked).collect();
    every.sort();
    assert_eq!(every, (0..maps).collect::<Vec<_>>(), "each map once, inline or asked");

    // The store: once full, a report's slices are not kept and their reducers ask.
    let mut big = MapOutputTracker::new();
    let shuffle = ShuffleId { job: JobId(2), index: 0 };
    let count = (MAX_INLINE_HELD / INLINE_SLICE as u64) as u32 + 1;
    big.register(shuffle, count, 1).unwrap();
    for map in 0..count {
        let mut o = output("a", 1, &[INLINE_SLICE as u64], 0);
        o.inline = vec![(0, slice(INLINE_SLICE, 0))];
        big.record(shuffle, map, o).unwrap();
    }
    assert_eq!(big.inline_held(), MAX_INLINE_HELD);
}

#[test]
fn inline_slices_no_map_can_have_written_are_refused() {
    let mut t = MapOutputTracker::new();
    t.register(SHUFFLE, 1, 3).unwrap();
    type Case = (Vec<(u32, InlineSlice)>, &'static [u64]);
    let cases: [Case; 5] = [
        (vec![(1, slice(5, 0)), (0, slice(5, 0))], &[5, 5, 0]),
        (vec![(0, slice(5, 0)), (0, slice(5, 0))], &[5, 5, 0]),
        (vec![(3, slice(5, 0))], &[5, 5, 5]),
        (vec![(0, slice(4, 0))], &[5, 5, 5]),
        (vec![(0, slice(INLINE_SLICE + 1, 0))], &[INLINE_SLICE as u64 + 1, 0, 0]),
    ];
    for (inline, sizes) in cases {
        let mut o = output("a", 1, sizes, 0);
        o.inline = inline;
        assert!(matches!(t.record(SHUFFLE, 0, o), Err(TrackerError::Inline { map: 0, .. })));
    }
    let mut over = output("a", 1, &[INLINE_SLICE as u64, 1, 0], 0);
    over.inline = vec![(0, slice(INLINE_SLICE, 0)), (1, slice(1, 0))];
    assert!(
        matches!(t.record(SHUFFLE, 0, over), Err(TrackerError::Inline { .. })),
        "over the report's bound"
    );
    assert_eq!(t.inline_held(), 0);
    assert_eq!(t.missing(SHUFFLE).unwrap(), vec![0], "nothing recorded");
}

#[test]
fn a_shuffles_sizes_follow_its_live_outputs() {
    let mut t = four_maps();
    let sizes = t.sizes(SHUFFLE).unwrap();
    let exact = [10 + 100 + 5 + 1, 20 + 6 + 1, 30 + 7 + 70_000];
    assert_eq!(sizes.partitions, 3);
    let total: u64 = exact.iter().sum();
    assert!(sizes.bytes >= total && sizes.bytes <= total + total / 10, "{sizes:?}");
    assert_eq!(sizes.largest_partition, 2);
    // `b` goes: its outputs' bytes go with it, and the sizes wait for the maps again.
    t.executor_lost(&"b".into(), Incarnation(2));
    assert_eq!(t.sizes(SHUFFLE), None, "known once every map's output is in");
    t.record(SHUFFLE, 2, output("c", 3, &[5, 6, 7], 2)).unwrap();
    assert_eq!(t.sizes(SHUFFLE), None);
    // The maps run again elsewhere: the sizes are as before.
    t.record(SHUFFLE, 3, output("c", 3, &[1, 1, 70_000], 3)).unwrap();
    assert_eq!(t.sizes(SHUFFLE).unwrap(), sizes);
    assert_eq!(t.sizes(ShuffleId { job: JobId(9), index: 0 }), None);
}
