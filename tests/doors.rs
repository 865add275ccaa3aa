//! The doors other processes and careless inputs knock on: the shuffle's peer door
//! under streams that say nothing, an executor's own roots against the driver's, and
//! output and input paths that lead out of where they are allowed or never end.

mod common;

use common::cluster::{APP, Cluster, SECRET, ok_json, shuffle_endpoint};
use common::{alive, command, corpus_of, flint, lossy};
use std::process::Stdio;
use std::time::Duration;

/// `flint submit ARGS` to the cluster, waited for at most `limit` (killed past it).
fn submit_within(cluster: &Cluster, args: &[&str], limit: Duration) -> std::process::Output {
    let mut cmd = command(&[&["submit"][..], args].concat());
    cmd.args(["--driver-url", &cluster.url]).env("FLINT_SECRET", SECRET);
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let waited = std::thread::spawn(move || child.wait_with_output().unwrap());
    let ended = common::eventually(limit, || waited.is_finished().then_some(()));
    if ended.is_none() {
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        panic!("the job did not end within {limit:?}: {}", cluster.status());
    }
    waited.join().unwrap()
}

#[test]
fn streams_that_open_and_say_nothing_hold_no_place_a_reducer_needs() {
    use flint_proto::wire::{PeerHello, PeerHelloReply};
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "1"]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(2);
    let (addr, fingerprint) = shuffle_endpoint(&cluster.executors[0].log_text());
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A proven peer (it holds the secret) opens 64 streams on the first executor's door
    // and sends one byte on each, never a whole request; they stay open while the job runs.
    let (_conn, _streams) = rt.block_on(async {
        let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let config = flint_net::pinned_client_config(fingerprint, Duration::from_secs(60)).unwrap();
        let conn = endpoint.connect_with(config, addr, "flint-executor").unwrap().await.unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let hello = PeerHello {
            protocol_version: flint_proto::wire::PROTOCOL_VERSION,
            app_id: APP.into(),
            proof: flint_net::proof(&flint_net::Secret::new(SECRET.as_bytes()).executor_key(), &conn),
        };
        flint_net::write_frame(&mut send, &hello).await.unwrap();
        let reply = flint_net::read_frame::<PeerHelloReply>(&mut recv).await.unwrap();
        assert_eq!(reply, Some(PeerHelloReply::Welcome));
        let mut streams = Vec::new();
        for _ in 0..64 {
            let (mut send, recv) = conn.open_bi().await.unwrap();
            send.write_all(&[1]).await.unwrap();
            streams.push((send, recv));
        }
        (conn, streams)
    });
    // A map/reduce job across both executors: reducers read the first one's files
    // through the same door (a wide vocabulary: slices too big to ride in reports).
    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus_of(&input, 3 << 20, 1_000_000);
    let input = input.to_str().unwrap();
    let args = ["examples/word-count-mr", "--input", input, "--partitions", "6", "--reduce-partitions", "4"];
    let out = submit_within(&cluster, &[&args[..], &["--json"]].concat(), Duration::from_secs(60));
    let report = ok_json(&out);
    let expected = ok_json(&flint(&["run", "examples/word-count", "--input", input, "--json"]));
    assert_eq!(report["result"], expected["result"]);
    assert_eq!(report["maps_rerun"], 0, "no map was lost to the stalled door: {report}");
    assert!(alive(cluster.executors[0].pid()));
}

#[test]
fn an_executor_keeps_its_own_roots_whatever_the_driver_allows() {
    // The driver allows the whole test folder; the first executor only its `narrow`
    // folder, the second has none of its own (it takes the driver's).
    let wide = tempfile::tempdir().unwrap();
    let narrow = wide.path().join("narrow");
    std::fs::create_dir(&narrow).unwrap();
    let (inputs, outputs) = (
        format!("flint.input.roots={}", wide.path().display()),
        format!("flint.output.roots={}", wide.path().display()),
    );
    let mut cluster = Cluster::start(&["--conf", &inputs, "--conf", &outputs]);
    let own_in = format!("flint.input.roots={}", narrow.display());
    let own_out = format!("flint.output.roots={}", narrow.display());
    cluster.executor(&["--cores", "1", "--conf", &own_in, "--conf", &own_out]);
    cluster.wait_live(1);
    let outside = wide.path().join("corpus.txt");
    corpus_of(&outside, 64 << 10, 500);
    let inside = narrow.join("corpus.txt");
    std::fs::copy(&outside, &inside).unwrap();
    let file_url = |p: &std::path::Path| format!("file://{}", p.display());
    // Inside its own roots: read.
    let report = ok_json(&cluster.submit(&["examples/word-count", "--input", &file_url(&inside), "--json"]));
    let expected =
        ok_json(&flint(&["run", "examples/word-count", "--input", inside.to_str().unwrap(), "--json"]));
    assert_eq!(report["result"], expected["result"]);
    // Under the driver's roots but outside the executor's: the executor refuses it.
    let out = cluster.submit(&["examples/word-count", "--input", &file_url(&outside), "--json"]);
    assert!(!out.status.success(), "{}", lossy(&out.stdout));
    let said = format!("{}{}", lossy(&out.stderr), lossy(&out.stdout));
    let shown = narrow.canonicalize().unwrap();
    assert!(said.contains("flint.input.roots") && said.contains(shown.to_str().unwrap()), "{said}");
    // Parts outside its own output roots are not written, and the job says why.
    let parts = wide.path().join("counts");
    let out = cluster.submit(&[
        "examples/word-count-mr",
        "--input",
        &file_url(&inside),
        "--output",
        parts.to_str().unwrap(),
        "--json",
    ]);
    assert!(!out.status.success(), "{}", lossy(&out.stdout));
    let said = format!("{}{}", lossy(&out.stderr), lossy(&out.stdout));
    assert!(said.contains("outside this executor's flint.output.roots"), "{said}");
    assert!(
        !std::fs::read_dir(&parts)
            .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("part-")))
            .unwrap_or(false)
    );
    // An executor without roots of its own takes the driver's and reads there.
    cluster.executors[0].signal("TERM");
    cluster.executors[0].wait(Duration::from_secs(10));
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    let report = ok_json(&cluster.submit(&["examples/word-count", "--input", &file_url(&outside), "--json"]));
    assert_eq!(report["result"], expected["result"]);
}

#[test]
fn an_output_path_that_climbs_out_of_the_roots_makes_nothing_outside_them() {
    let shared = tempfile::tempdir().unwrap();
    let root = shared.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let roots = format!("flint.output.roots={}", root.display());
    let mut cluster = Cluster::start(&["--conf", &roots]);
    cluster.executor(&["--cores", "1", "--conf", &roots]);
    cluster.wait_live(1);
    let input = cluster.dir.path().join("inputs/corpus.txt");
    corpus_of(&input, 64 << 10, 500);
    let input = input.to_str().unwrap();
    for climb in ["nonexistent/../../escape", "a/b/../../../escape", "new/../../root/../escape"] {
        let output = format!("{}/{climb}", root.display());
        let out = cluster.submit(&["examples/word-count-mr", "--input", input, "--output", &output]);
        assert_eq!(out.status.code(), Some(3), "{climb}: {}", lossy(&out.stderr));
        assert!(lossy(&out.stderr).contains("does not exist"), "{climb}: {}", lossy(&out.stderr));
        assert!(!shared.path().join("escape").exists(), "{climb} made a directory outside the roots");
    }
    let names: Vec<_> = std::fs::read_dir(shared.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(names, ["root"], "nothing made beside the root");
    // `..` through folders that exist resolves, and is checked where it leads.
    std::fs::create_dir(root.join("a")).unwrap();
    let output = format!("{}/a/../counts", root.display());
    let report = ok_json(&cluster.submit(&[
        "examples/word-count-mr",
        "--input",
        input,
        "--output",
        &output,
        "--json",
    ]));
    assert_eq!(report["status"], "succeeded");
    assert!(root.join("counts/_SUCCESS").exists());
}

#[test]
fn inputs_that_never_end_or_loop_are_refused_at_once_and_the_driver_stays_idle() {
    let mut cluster = Cluster::start(&[]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    let inputs = cluster.dir.path().join("inputs");
    let data = inputs.join("data");
    std::fs::create_dir_all(data.join("a")).unwrap();
    std::fs::write(data.join("a/words.txt"), "a b c\n").unwrap();
    std::os::unix::fs::symlink(&data, data.join("a/loop")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", inputs.join("zero.txt")).unwrap();
    let fifo = inputs.join("pipe.txt");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let glob = format!("{}/**/*.txt", data.display());
    // A `**` over a loop: each real file once, from the client, the driver and `flint run`.
    let driver_glob = format!("flint://{glob}");
    for input in [glob.as_str(), driver_glob.as_str()] {
        let report = ok_json(&submit_within(
            &cluster,
            &["examples/word-count", "--input", input, "--json"],
            Duration::from_secs(30),
        ));
        assert_eq!(report["result"]["total_words"], 3, "{input}: {report}");
    }
    let run = ok_json(&flint(&["run", "examples/word-count", "--input", &glob, "--json"]));
    assert_eq!(run["result"]["total_words"], 3);
    // A device or a FIFO, sent by the client, named on the driver or read by `flint run`:
    // refused as what it is.
    for named in [inputs.join("zero.txt"), fifo.clone()] {
        let path = named.to_str().unwrap().to_owned();
        for input in [path.clone(), format!("flint://{path}"), format!("file://{path}")] {
            let out =
                submit_within(&cluster, &["examples/word-count", "--input", &input], Duration::from_secs(30));
            let said = lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(3), "{input}: {said}");
            // Named on the driver, a link to a device resolves outside its roots first.
            let outside = input.contains("zero")
                && !input.starts_with('/')
                && said.contains("outside flint.input.roots");
            assert!(said.contains("not a regular file") || outside, "{input}: {said}");
        }
        let out = flint(&["run", "examples/word-count", "--input", &path]);
        assert_eq!(out.status.code(), Some(3), "{}", lossy(&out.stderr));
        assert!(lossy(&out.stderr).contains("not a regular file"), "{}", lossy(&out.stderr));
    }
    // Nothing left spinning on the driver: its CPU time stays put over a second.
    let cpu = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", cluster.driver.pid())).unwrap();
        let fields: Vec<u64> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|f| f.parse().unwrap())
            .collect();
        fields[0] + fields[1]
    };
    let before = cpu();
    std::thread::sleep(Duration::from_secs(1));
    assert!(cpu() - before < 30, "the driver spins after the refusals");
}

/// `GET path` from the local address `from` (another loopback address stands for
/// another host) with a bearer: the status code.
fn get_from(from: &str, port: u16, path: &str, bearer: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        let mut stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {bearer}\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer.split(' ').nth(1).unwrap().parse().unwrap()
    })
}

#[test]
fn a_page_reachable_from_other_hosts_takes_only_a_strong_secret_and_slows_guessing() {
    // A weak secret with the page beyond loopback: the driver does not start.
    let weak_port = common::free_port().to_string();
    let out = command(&["driver", "--app-id", "weak", "--ui-bind", "0.0.0.0", "--ui-port", &weak_port])
        .env("FLINT_SECRET", "hunter2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", lossy(&out.stderr));
    assert!(lossy(&out.stderr).contains("at least 16"), "{}", lossy(&out.stderr));
    // The same secret on a loopback-only page is the operator's own business.
    let port = common::free_port();
    let (cluster, secret) =
        (Cluster::start(&["--ui-port", &port.to_string(), "--ui-bind", "0.0.0.0"]), SECRET);
    assert_eq!(get_from("127.0.0.1", port, "/api/v1/status", secret), 200);
    // The UI token, as a bearer, opens nothing: it is a browser's cookie.
    let token = flint_driver::ui::ui_token(&flint_net::Secret::new(SECRET.as_bytes()));
    let token = String::from_utf8(token.expose().to_vec()).unwrap();
    assert_eq!(get_from("127.0.0.1", port, "/api/v1/status", &token), 401);
    // One peer guessing: after its tenth wrong credential it is answered 429 unchecked,
    // the right secret included, while another peer is served.
    for _ in 0..10 {
        assert_eq!(get_from("127.0.0.2", port, "/api/v1/status", "guess"), 401);
    }
    assert_eq!(get_from("127.0.0.2", port, "/api/v1/status", "guess"), 429);
    assert_eq!(get_from("127.0.0.2", port, "/api/v1/status", secret), 429, "not checked while throttled");
    assert_eq!(get_from("127.0.0.3", port, "/api/v1/status", secret), 200, "another peer is served");
    drop(cluster);
}

#[test]
fn history_pages_write_a_folder_named_with_markup_as_text() {
    let logs = tempfile::tempdir().unwrap();
    let conf = format!("flint.eventLog.dir={}", logs.path().display());
    let mut cluster = Cluster::start(&["--conf", &conf]);
    cluster.executor(&["--cores", "1"]);
    cluster.wait_live(1);
    let report = ok_json(&cluster.submit(&["examples/pi", "--conf", "points=10000", "--json"]));
    let job = report["job_id"].as_u64().or_else(|| report["job"].as_u64()).unwrap_or(1);
    cluster.driver.signal("TERM");
    assert_eq!(cluster.driver.wait(Duration::from_secs(20)), Some(0));
    // Whoever may write the log folder names an application's folder.
    let evil = "<img src=x onerror=alert(1)>'\"";
    std::fs::rename(logs.path().join(APP), logs.path().join(evil)).unwrap();
    let port = common::free_port();
    let mut history = command(&["history", logs.path().to_str().unwrap(), "--ui-port", &port.to_string()]);
    history.stdout(Stdio::null());
    let _history = common::Proc::spawn(history, cluster.dir.path().join("history.log"));
    let base = format!("/history/{}", "%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%27%22");
    let listed = common::eventually(Duration::from_secs(10), || {
        let (code, page) = common::http_get(port, "/", None);
        (code == 200 && page.contains("/history/")).then_some(page)
    })
    .expect("history lists the application");
    let mut pages = vec![listed];
    for path in [format!("{base}/"), format!("{base}/jobs/{job}"), format!("{base}/config")] {
        let (code, page) = common::http_get(port, &path, None);
        assert_eq!(code, 200, "{path}: {page}");
        pages.push(page);
    }
    for page in &pages {
        assert!(!page.contains("<img") && !page.contains("onerror=alert(1)>"), "raw markup:\n{page}");
        assert!(page.contains(&base) || page.contains("%3Cimg"), "the links lead to the folder:\n{page}");
    }
    // The address without its slash is sent on to the encoded one.
    let (code, head, _) = common::http_get_with(port, &base, "");
    assert_eq!(code, 303, "{head}");
    assert!(head.contains(&format!("{base}/")), "{head}");
}
