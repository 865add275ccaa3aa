//! Programs end to end: top-words and TPC-H Q3 (written as datasets and actions) give
//! the answers plain loops over the same data give, through `flint run` and through a
//! cluster of three executors; programs that go wrong fail with what went wrong and
//! leave the driver serving.

mod common;

use common::cluster::{Cluster, ok_json};
use common::{corpus, flint, json, lossy};
use serde_json::{Value, json};
use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Words as top-words has them: maximal runs of bytes that are not white space.
fn top_words(files: &[&Path]) -> Value {
    let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
    for file in files {
        let bytes = std::fs::read(file).unwrap();
        for word in bytes.split(|b| b" \t\r\n\x0b\x0c".contains(b)).filter(|w| !w.is_empty()) {
            *counts.entry(word.to_vec()).or_default() += 1;
        }
    }
    let mut top: Vec<(&Vec<u8>, &u64)> = counts.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let top: Vec<Value> = top[..10].iter().map(|(w, n)| json!([String::from_utf8_lossy(w), n])).collect();
    json!({ "distinct_words": counts.len(), "top": top })
}

/// Three tables of TPC-H Q3's shape (the columns of `shared/bench-data`), drawn from a
/// fixed seed, and the query's answer found with loops.
fn tables(dir: &Path, customers: u64, orders: u64) -> Value {
    let mut state: u64 = 0x51AB;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let segments = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"];
    let date = |days: u64| {
        let (y, d) = (1992 + days / 365, days % 365);
        (y * 10_000 + (d / 31 + 1) * 100 + d % 28 + 1) as u32
    };
    let mut text = String::new();
    let mut building = HashSet::new();
    for c in 1..=customers {
        let segment = segments[next(5) as usize];
        if segment == "BUILDING" {
            building.insert(c);
        }
        text.push_str(&format!("{c}|{segment}|{}\n", next(25)));
    }
    std::fs::write(dir.join("customer.tbl"), &text).unwrap();
    let (mut orders_text, mut lines) = (String::new(), Vec::new());
    let mut open: HashMap<u64, (u32, u32)> = HashMap::new();
    for o in 1..=orders {
        let key = o * 4 - next(4);
        let (cust, days) = (1 + next(customers), next(2405));
        let (odate, priority) = (date(days), next(3) as u32);
        orders_text.push_str(&format!("{key}|{cust}|{odate}|{priority}\n"));
        if building.contains(&cust) && odate < 19950315 {
            open.insert(key, (odate, priority));
        }
        for _ in 0..1 + next(7) {
            let (price, discount) = (90_000 + next(10_410_000), next(11));
            lines.push((key, price, discount, date(days + 1 + next(121))));
        }
    }
    std::fs::write(dir.join("orders.tbl"), &orders_text).unwrap();
    // Line items not grouped by order.
    for i in (1..lines.len()).rev() {
        lines.swap(i, next(i as u64 + 1) as usize);
    }
    let mut revenue: HashMap<u64, u64> = HashMap::new();
    let mut items = String::new();
    for (order, price, discount, ship) in lines {
        items.push_str(&format!("{order}|{price}|{discount}|{ship}\n"));
        if ship > 19950315 && open.contains_key(&order) {
            *revenue.entry(order).or_default() += price * (100 - discount);
        }
    }
    std::fs::write(dir.join("lineitem.tbl"), &items).unwrap();
    let mut rows: Vec<(u64, u64, u32, u32)> =
        revenue.iter().map(|(o, r)| (*o, *r, open[o].0, open[o].1)).collect();
    rows.sort_by_key(|r| (Reverse(r.1), r.2, r.0));
    rows.truncate(10);
    json!({ "groups": revenue.len(), "rows": rows })
}

/// The shuffles (wide dependencies: stages that read shuffles) of the report's largest
/// action, its stages being those joined by what they read.
fn shuffles_of_an_action(report: &Value) -> usize {
    let stages = report["stages"].as_array().unwrap();
    let mut action: Vec<usize> = (0..stages.len()).collect();
    fn root(action: &mut [usize], mut i: usize) -> usize {
        while action[i] != i {
            i = action[i];
        }
        i
    }
    for (i, stage) in stages.iter().enumerate() {
        for parent in stage["parents"].as_array().unwrap() {
            let (a, b) = (root(&mut action, i), root(&mut action, parent.as_u64().unwrap() as usize));
            action[a] = b;
        }
    }
    let mut wide: HashMap<usize, usize> = HashMap::new();
    for (i, stage) in stages.iter().enumerate() {
        if !stage["parents"].as_array().unwrap().is_empty() {
            *wide.entry(root(&mut action, i)).or_default() += 1;
        }
    }
    wide.into_values().max().unwrap_or(0)
}

#[test]
fn top_words_and_q3_give_the_answers_loops_give_through_run_and_a_cluster_of_three() {
    let mut cluster = Cluster::start(&[]);
    for _ in 0..3 {
        cluster.executor(&["--cores", "1"]);
    }
    let inputs = cluster.dir.path().join("inputs");
    let (a, b) = (inputs.join("a.txt"), inputs.join("b.txt"));
    corpus(&a, 3 << 20);
    corpus(&b, 1 << 20);
    let expected = top_words(&[&a, &b]);
    let q3 = tables(&inputs, 3000, 30_000);
    assert!(q3["groups"].as_u64().unwrap() > 100, "the data makes many groups: {q3}");
    cluster.wait_live(3);

    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let words = ["examples/top-words", "--input", a, "--input", b, "--partitions", "4", "--json"];
    let table = |name: &str| inputs.join(name).to_string_lossy().into_owned();
    let (customer, orders, lineitem) = (table("customer.tbl"), table("orders.tbl"), table("lineitem.tbl"));
    let query = [
        &["examples/tpch-q3", "--input", &customer, "--input", &orders, "--input", &lineitem][..],
        &["--partitions", "3", "--json"],
    ]
    .concat();
    for (args, expected, shuffles) in [(&words[..], &expected, 2), (&query[..], &q3, 3)] {
        let local = ok_json(&flint(&[&["run"][..], args, &["--executors", "2", "--cores", "1"]].concat()));
        assert_eq!(&local["result"], expected, "{local}");
        assert!(
            shuffles_of_an_action(&local) >= shuffles,
            "{shuffles} shuffles in one action: {}",
            local["stages"]
        );
        // Sent with the job, the files are picked by the names they were given.
        let submitted = ok_json(&cluster.submit(args));
        assert_eq!(&submitted["result"], expected, "{submitted}");
        let shape = |report: &Value| -> Vec<Value> {
            let stages = report["stages"].as_array().unwrap().iter();
            stages.map(|s| json!([s["id"], s["kind"], s["tasks"], s["parents"]])).collect()
        };
        assert_eq!(shape(&submitted), shape(&local), "the same stages of the same tasks");
        assert_eq!(submitted["warnings"], json!([]));
    }
    // All three executors ran the programs' tasks.
    for executor in cluster.live_executors() {
        assert!(executor["tasks_done"].as_u64().unwrap() > 0, "{executor}");
    }
}

#[test]
fn a_program_that_goes_wrong_fails_saying_how_and_the_driver_serves_on() {
    let mut cluster =
        Cluster::start(&["--conf", "flint.driver.memory=1g", "--conf", "flint.driver.maxResultSize=256m"]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let chaos = |mode: &str, extra: &[&str]| {
        let mode = format!("mode={mode}");
        let out =
            cluster.submit(&[&["examples/program-chaos", "--conf", &mode, "--json"][..], extra].concat());
        assert_eq!(out.status.code(), Some(1), "{mode} fails: {}", lossy(&out.stdout));
        json(&out)
    };
    let undeclared = chaos("undeclared", &[]);
    let error = undeclared["error"].as_str().unwrap();
    assert!(error.contains("program_chaos::hidden") && error.contains("does not declare"), "{undeclared}");
    assert_eq!(undeclared["tasks"], 0, "refused before any task ran: {undeclared}");

    let input = chaos("input", &[]);
    assert!(
        input["error"].as_str().unwrap().contains("\"not-given.txt\", which the submission does not give"),
        "{input}"
    );

    let looping = chaos("loop", &["--conf", "flint.task.deadline=2s"]);
    assert_eq!(looping["failure"]["reason"]["kind"], "deadline", "{looping}");

    let growing = chaos("alloc", &[]);
    assert_eq!(growing["failure"]["reason"]["kind"], "memory-limit", "{growing}");

    let big = chaos("collect", &["--conf", "flint.driver.maxResultSize=16m"]);
    assert_eq!(big["failure"]["reason"]["kind"], "result-too-large", "{big}");

    let panicked = chaos("panic", &[]);
    assert!(panicked["error"].as_str().unwrap().contains("the program gave up"), "{panicked}");

    // The driver goes on: a program that behaves gets its answer.
    let fine = ok_json(&cluster.submit(&["examples/program-chaos", "--conf", "n=100", "--json"]));
    let sums: Vec<(u32, u64)> =
        (0..7).map(|k| (k, (0..100u64).filter(|n| n % 7 == u64::from(k)).sum())).collect();
    assert_eq!(fine["result"], json!({ "sums": sums, "generated": 3000 }), "{fine}");
}

/// `flint submit` of `args` to the cluster, left running.
fn submitting(cluster: &Cluster, args: &[&str]) -> std::process::Child {
    let mut submit = common::command(&[&["submit", "--driver-url", &cluster.url][..], args].concat());
    submit
        .env("FLINT_SECRET", common::cluster::SECRET)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn an_executor_killed_as_a_third_stage_runs_costs_only_the_outputs_it_held() {
    let ui = common::free_port();
    let mut cluster = Cluster::start(&["--ui-port", &ui.to_string()]);
    for _ in 0..3 {
        cluster.executor(&["--cores", "1"]);
    }
    cluster.wait_live(3);
    let submit = submitting(
        &cluster,
        &["examples/program-chaos", "--conf", "mode=deep", "--conf", "pause_ms=400", "--json"],
    );
    // Its first two stages done, its third (4 s a task) under way.
    let third = common::eventually(std::time::Duration::from_secs(60), || {
        let status = cluster.status();
        let job = status["jobs"].as_array()?.iter().find(|j| j["state"] == "running")?.clone();
        let stages = job["stages"].as_array()?;
        let done = |s: usize| stages.get(s).and_then(|s| s["done"].as_u64());
        (done(0)? == 6 && done(1)? == 6 && done(2)? == 0).then(|| job["job"].as_u64().unwrap())
    })
    .expect("the third stage runs");
    let (_, attempts) = common::http_get(ui, &format!("/api/v1/jobs/{third}/attempts"), None);
    let attempts: Value = serde_json::from_str(&attempts).unwrap();
    cluster.executors[0].signal("KILL");
    let lost = common::eventually(std::time::Duration::from_secs(20), || {
        let status = cluster.status();
        let gone = status["executors"].as_array()?.iter().find(|e| !e["removed"].is_null())?.clone();
        gone["id"].as_str().map(str::to_owned)
    })
    .expect("the killed executor is removed");
    // The outputs it held: the first two stages' tasks it ran.
    let held = |stage: u64| {
        let attempts = attempts.as_array().unwrap().iter();
        attempts
            .filter(|a| a["executor"] == lost.as_str() && a["state"] == "succeeded")
            .filter(|a| a["index"].as_u64().unwrap() / 6 == stage)
            .count() as u64
    };
    let out = submit.wait_with_output().unwrap();
    let report = ok_json(&out);
    let sums: Vec<(u32, u64)> =
        (0..60).map(|k| (k, (0..60_000u64).filter(|n| n % 60 == u64::from(k)).sum())).collect();
    assert_eq!(report["result"], json!(sums), "exact after the loss");
    let rerun: Vec<u64> =
        report["stages"].as_array().unwrap().iter().map(|s| s["rerun_tasks"].as_u64().unwrap()).collect();
    // Its second stage's outputs are made again, and for them its first stage's (every
    // partition of which each second-stage task reads); nothing else runs twice.
    assert!(held(1) > 0, "the killed executor held some of the second stage's outputs: {attempts}");
    assert_eq!(rerun, vec![held(0), held(1), 0], "{}", report["stages"]);
}

#[test]
fn ctrl_c_on_a_submitted_program_cancels_it_and_the_job_of_its_action() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "2"]);
    cluster.wait_live(1);
    let submit =
        submitting(&cluster, &["examples/program-chaos", "--conf", "mode=deep", "--conf", "pause_ms=2000"]);
    let running = common::eventually(std::time::Duration::from_secs(60), || {
        let status = cluster.status();
        let job = status["jobs"].as_array()?.iter().find(|j| j["state"] == "running")?.clone();
        (job["progress"]["running"].as_u64()? > 0).then(|| job["job"].clone())
    })
    .expect("the program's action runs");
    let pid = submit.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let out = submit.wait_with_output().unwrap();
    assert!(!out.status.success(), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("cancelled"), "{}", lossy(&out.stderr));
    let status = cluster.status();
    let action = status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == running).unwrap();
    assert_eq!(action["state"], "cancelled", "{status}");
}
