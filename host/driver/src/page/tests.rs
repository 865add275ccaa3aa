//! The pages' pieces on their own: links that stay one path segment, and the timeline's
//! executor marks.

#[test]
fn a_folder_name_stays_one_path_segment() {
    assert_eq!(super::url_segment("app-1.x_y"), "app-1.x_y");
    assert_eq!(super::url_segment("a?b#c/d'e f"), "a%3Fb%23c%2Fd%27e%20f");
    assert_eq!(super::url_segment("é"), "%C3%A9");
}

#[test]
fn the_timeline_marks_executors_added_and_removed_while_the_job_ran() {
    use crate::journal::tests::executor;
    use crate::journal::{AppEvent, EVENT_LOG_VERSION, Envelope, Store};
    use flint_proto::JobId;
    let start = |index, executor: &str| AppEvent::TaskStart {
        job: JobId(1),
        index,
        attempt: 0,
        executor: executor.into(),
        timeline: Some(true),
    };
    let mut store = Store::new(10);
    for (at_ms, event) in [
        (1, AppEvent::ExecutorAdded { executor: executor("before", None) }),
        (2, AppEvent::JobStart { job: JobId(1), name: "j".into(), tasks: 2 }),
        (3, start(0, "before")),
        (5, AppEvent::ExecutorAdded { executor: executor("joined", None) }),
        (6, start(1, "joined")),
        (8, AppEvent::ExecutorRemoved { executor: executor("joined", Some("lost: no heartbeat")) }),
    ] {
        store.apply(&Envelope { v: EVENT_LOG_VERSION, at_ms, event });
    }
    let entry = store.job(JobId(1)).unwrap();
    let mut out = String::new();
    super::timeline(&mut out, entry, &store.executors_of(entry), 10);
    let marks: Vec<&str> = out.match_indices("<line class=executor-").map(|(i, _)| &out[i..i + 60]).collect();
    assert_eq!(marks.len(), 2, "one added, one removed, none for the executor there before:\n{out}");
    assert!(
        out.contains("executor joined added at +3 ms")
            && out.contains("executor joined removed: lost: no heartbeat at +6 ms"),
        "{out}"
    );
    assert!(!out.contains("data-executor='before'"), "{out}");
}
