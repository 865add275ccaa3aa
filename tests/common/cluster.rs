//! A cluster of real processes on 127.0.0.1 for the tests: `flint driver` with short
//! timeouts, `flint executor`s, and clients run as a user would.

use super::{Proc, command, eventually, json, lossy, read_url};
use serde_json::Value;
use std::process::Output;
use std::time::Duration;

pub const SECRET: &str = "test-secret-0123456789";
pub const APP: &str = "test-app";

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub url: String,
    pub driver: Proc,
    pub executors: Vec<Proc>,
    /// Environment every executor and client of the test's own gets (a certificate).
    pub peer_env: Vec<(String, String)>,
}

impl Cluster {
    /// A driver with short timeouts, so that losses show within seconds.
    pub fn start(extra: &[&str]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let url_file = dir.path().join("url");
        let mut cmd = command(&["driver", "--app-id", APP, "--url-file", url_file.to_str().unwrap()]);
        cmd.args(["--conf", "flint.network.timeout=3s", "--conf", "flint.executor.heartbeatInterval=250ms"]);
        // Jobs may read inputs from the test's own folder only.
        let roots = format!("flint.input.roots={}", dir.path().join("inputs").display());
        std::fs::create_dir(dir.path().join("inputs")).unwrap();
        cmd.args(["--conf", &roots]);
        if !extra.contains(&"--ui-port") {
            cmd.args(["--ui-port", "0"]); // tests run many drivers at once
        }
        // The local backend's private folder and the driver's temporary files (jobs'
        // uploads, which a killed driver leaves behind) go in the test's own.
        cmd.args(extra)
            .env("FLINT_SECRET", SECRET)
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("TMPDIR", dir.path());
        let driver = Proc::spawn(cmd, dir.path().join("driver.log"));
        let url = eventually(Duration::from_secs(20), || read_url(&url_file))
            .unwrap_or_else(|| panic!("the driver prints its URL; its log:\n{}", driver.log_text()));
        Cluster { dir, url, driver, executors: Vec::new(), peer_env: Vec::new() }
    }

    pub fn executor_command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = command(&["executor", "--driver-url", &self.url]);
        if !args.contains(&"--app-id") {
            cmd.args(["--app-id", APP]);
        }
        cmd.args(args).env("FLINT_SECRET", SECRET).envs(self.peer_env.iter().cloned());
        cmd
    }

    /// Starts an executor and returns its index.
    pub fn executor(&mut self, args: &[&str]) -> usize {
        let n = self.executors.len();
        let log = self.dir.path().join(format!("executor-{n}.log"));
        self.executors.push(Proc::spawn(self.executor_command(args), log));
        n
    }

    pub fn client(&self, args: &[&str]) -> Output {
        let mut cmd = command(args);
        cmd.args(["--driver-url", &self.url]).env("FLINT_SECRET", SECRET).envs(self.peer_env.iter().cloned());
        cmd.output().unwrap()
    }

    pub fn submit(&self, args: &[&str]) -> Output {
        self.client(&[&["submit"][..], args].concat())
    }

    pub fn status(&self) -> Value {
        let out = self.client(&["status", "--json"]);
        assert!(out.status.success(), "status: {}", lossy(&out.stderr));
        json(&out)
    }

    pub fn live_executors(&self) -> Vec<Value> {
        let status = self.status();
        status["executors"].as_array().unwrap().iter().filter(|e| e["removed"].is_null()).cloned().collect()
    }

    pub fn wait_live(&self, n: usize) {
        let live = eventually(Duration::from_secs(20), || (self.live_executors().len() == n).then_some(()));
        assert!(
            live.is_some(),
            "expected {n} live executors: {}\ndriver log:\n{}",
            self.status(),
            self.driver.log_text()
        );
    }

    pub fn executor_status(&self, id: &str) -> Value {
        let status = self.status();
        status["executors"].as_array().unwrap().iter().find(|e| e["id"] == id).cloned().unwrap_or(Value::Null)
    }
}

pub fn ok_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}{}",
        out.status.code(),
        lossy(&out.stderr),
        lossy(&out.stdout).chars().take(2000).collect::<String>()
    );
    json(out)
}

/// What an executor's log says of where it serves its map outputs.
pub fn shuffle_endpoint(log: &str) -> (std::net::SocketAddr, [u8; 32]) {
    let line = log.lines().find(|l| l.contains("serving map outputs")).expect("the executor says where");
    let field =
        |name: &str| line.split(&format!("{name}=")).nth(1).unwrap().split_whitespace().next().unwrap();
    let hex = field("fingerprint");
    let mut fingerprint = [0u8; 32];
    for (i, b) in fingerprint.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    (field("address").parse().unwrap(), fingerprint)
}
