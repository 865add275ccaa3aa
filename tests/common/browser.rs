//! A real browser for tests: headless Chromium driven through chromedriver's W3C
//! WebDriver API (plain HTTP on loopback). Debian's `chromium` and `chromium-driver`
//! packages, which `.ci/run` installs.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub fn start() -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver is installed (.ci/run installs chromium-driver)");
        let profile = tempfile::tempdir().unwrap();
        let mut browser = Browser { driver, port, session: String::new(), _profile: profile };
        let started = Instant::now();
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1280,1000".into(),
            format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
        }}});
        let session = loop {
            match browser.request("POST", "/session", Some(&capabilities)) {
                Ok(value) => break value,
                Err(e) if started.elapsed() < Duration::from_secs(20) => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("no browser session: {e}"),
            }
        };
        browser.session = session["sessionId"].as_str().expect("a session id").to_owned();
        browser
    }

    /// One WebDriver call: its `value`, or the error it gave.
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        let body = body.map(Value::to_string).unwrap_or_default();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .map_err(|e| e.to_string())?;
        // chromedriver keeps the connection open: read the head, then its Content-Length.
        let mut response = Vec::new();
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            if let Some(at) = response.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let n = stream.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("the connection closed before a response".into());
            }
            response.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&response[..head_end]).into_owned();
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no Content-Length: {head}"))?;
        while response.len() < head_end + length {
            let n = stream.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            response.extend_from_slice(&chunk[..n]);
        }
        let body = String::from_utf8_lossy(&response[head_end..]).into_owned();
        let value: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if !head.split(' ').nth(1).is_some_and(|code| code.starts_with('2')) {
            return Err(value["value"].to_string());
        }
        Ok(value["value"].clone())
    }

    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        let body = (!body.is_null()).then_some(&body);
        self.request(method, &path, body).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub fn goto(&self, url: &str) {
        self.call("POST", "/url", json!({ "url": url }));
    }

    /// Runs `script` (a function body) in the page and returns what it returns.
    pub fn eval(&self, script: &str) -> Value {
        self.call("POST", "/execute/sync", json!({ "script": script, "args": [] }))
    }

    /// The page's visible text.
    pub fn text(&self) -> String {
        self.eval("return document.body.innerText;").as_str().unwrap_or_default().to_owned()
    }

    /// Polls `script` until it returns `true`, for up to `limit`.
    pub fn wait_for(&self, limit: Duration, script: &str) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.eval(script) == Value::Bool(true) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Writes a PNG of the window to `path`.
    pub fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let png = self.call("GET", "/screenshot", Value::Null);
        let bytes = base64::engine::general_purpose::STANDARD.decode(png.as_str().unwrap()).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.request("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
