//! Helpers for the end-to-end tests: the built binary and components, and processes
//! that are always cleaned up.
#![allow(dead_code)]

pub mod cluster;
pub mod relay;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The flint binary: `target/release/flint`, or `FLINT_BIN` (to bench another build).
pub fn bin() -> PathBuf {
    let bin =
        std::env::var_os("FLINT_BIN").map_or_else(|| root().join("target/release/flint"), PathBuf::from);
    assert!(bin.exists(), "{} is missing: run `make build` first", bin.display());
    bin
}

pub fn wasm(name: &str) -> String {
    root().join(format!("target/wasm32-wasip2/release/{name}.wasm")).to_string_lossy().into_owned()
}

/// `flint ARGS` in the repository root, with a test-only component cache.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(args).current_dir(root()).env("FLINT_CACHE_DIR", root().join("target/test-cache"));
    cmd
}

pub fn flint(args: &[&str]) -> Output {
    command(args).output().expect("flint runs")
}

/// `flint ARGS` run to its end, with the peak resident memory of its process (from
/// `wait4`, so no other child of the test process is counted), in bytes.
#[expect(clippy::zombie_processes, reason = "reaped by wait4, which also reports its peak memory")]
pub fn flint_peak_memory(args: &[&str]) -> (Output, u64) {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let child = command(args)
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("flint runs");
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, which nothing else waits for, into locals.
    let waited = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(waited, child.id() as i32, "wait4: {}", std::io::Error::last_os_error());
    let out = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: std::fs::read(stdout).unwrap(),
        stderr: std::fs::read(stderr).unwrap(),
    };
    (out, usage.ru_maxrss as u64 * 1024)
}

/// What a flooding task may put on the process's own output: 200 echoed log lines of
/// at most a KiB, a warning, the failure (messages cut to 16 KiB), as documented in
/// ARCHITECTURE.md.
pub const FLOOD_BOUND: usize = 512 << 10;

pub fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("stdout is not one JSON object ({e}): {}\nstderr: {}", lossy(&out.stdout), lossy(&out.stderr))
    })
}

/// A child process killed (if still running) when dropped; its stderr goes to a file.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(mut cmd: Command, log: PathBuf) -> Proc {
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd.stdout(Stdio::null()).stderr(file).spawn().expect("flint starts");
        Proc { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        let status =
            Command::new("kill").args([&format!("-{sig}"), &self.pid().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, up to `limit`.
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether process `pid` has a handler of its own for SIGINT: `flint submit` sets one
/// once it awaits its job, and a Ctrl-C before that ends it as the default does.
pub fn catches_ctrl_c(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    let caught = status.lines().find_map(|l| l.strip_prefix("SigCgt:")).unwrap_or("0").trim();
    u64::from_str_radix(caught, 16).is_ok_and(|mask| mask & 1 << (libc::SIGINT - 1) != 0)
}

/// Polls `check` until it returns `Some`, for up to `limit`.
pub fn eventually<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let started = Instant::now();
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if started.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The names in `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub fn read_url(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().filter(|u| u.starts_with("flint://"))
}

/// Text with a skewed vocabulary, blank lines, tabs, CRLF and runs of spaces, and some
/// non-ASCII words, from a fixed seed.
pub fn corpus(path: &Path, bytes: usize) {
    corpus_of(path, bytes, 3000)
}

/// A corpus as [`corpus`] makes, of words drawn from `vocabulary` (skewed toward the
/// first): a wide one makes map outputs too big to ride in their reports.
pub fn corpus_of(path: &Path, bytes: usize, vocabulary: usize) {
    let mut state: u64 = 0x5EED;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut text = String::with_capacity(bytes + 100);
    while text.len() < bytes {
        for i in 0..next() % 14 {
            let rank = next() % vocabulary * (next() % vocabulary) / vocabulary;
            let sep = match next() % 23 {
                0 => "\t",
                1 => "   ",
                _ => " ",
            };
            if i > 0 {
                text.push_str(sep);
            }
            match rank % 97 {
                0 => text.push_str(&format!("café{rank}")),
                _ => text.push_str(&format!("w{rank}")),
            }
        }
        text.push_str(if next() % 11 == 0 { "\r\n" } else { "\n" });
    }
    std::fs::write(path, text).unwrap();
}

/// A free loopback port (for a server told to bind it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `GET path` over plain HTTP/1.1: the status code and the body.
pub fn http_get(port: u16, path: &str, bearer: Option<&str>) -> (u16, String) {
    let auth = bearer.map(|b| format!("Authorization: Bearer {b}\r\n")).unwrap_or_default();
    let (code, _, body) = http_get_with(port, path, &auth);
    (code, body)
}

/// `GET path` with `headers` (whole lines): the status code, the head and the body.
pub fn http_get_with(port: u16, path: &str, headers: &str) -> (u16, String, String) {
    http_request(port, "GET", path, headers, "")
}

/// `method path` with `headers` (whole lines) and `body`: the status code, the head
/// and the body.
pub fn http_request(port: u16, method: &str, path: &str, headers: &str, body: &str) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut stream =
        eventually(Duration::from_secs(10), || std::net::TcpStream::connect(("127.0.0.1", port)).ok())
            .expect("the status server listens");
    let length = if body.is_empty() { String::new() } else { format!("Content-Length: {}\r\n", body.len()) };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{headers}{length}Connection: close\r\n\r\n{body}"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.split(' ').nth(1).unwrap().parse().unwrap(), head.to_owned(), body.to_owned())
}

/// The live processes whose parent is `pid` (zombies count as gone).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else { continue };
        let fields: Vec<&str> =
            stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
        if fields.first() != Some(&"Z") && fields.get(1) == Some(&pid.to_string().as_str()) {
            found.push(child);
        }
    }
    found
}

pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
}
