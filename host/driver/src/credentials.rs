//! Where the driver gets delegation tokens: providers behind one trait. The control
//! core decides when each service's token is renewed; a provider only fetches. The
//! driver fetches, executors never do: new tokens are pushed to every live executor.
//!
//! A token's secret never reaches a log or an error: a provider's failure says what
//! went wrong with the provider (its exit status, the first line of its stderr), and
//! what it printed on stdout is never repeated.

use flint_proto::Token;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub type Fetch = Pin<Box<dyn Future<Output = Result<Token, TokenError>> + Send>>;

/// Why a provider gave no token. None quotes what the provider printed.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot run the token command: {0}")]
    Spawn(std::io::Error),
    #[error("the token command printed over {MAX_OUTPUT} bytes")]
    TooMuchOutput,
    #[error("the token command ran over {} s", COMMAND_TIMEOUT.as_secs())]
    Timeout,
    #[error("the token command exited, but a process it started outside its group holds its output open")]
    Escaped,
    /// Its exit status and the first line of its stderr.
    #[error("the token command failed ({status}): {stderr}")]
    Failed { status: std::process::ExitStatus, stderr: String },
    #[error("cannot read {}: {error}", path.display())]
    Read { path: std::path::PathBuf, error: std::io::Error },
    #[error("{} is over {MAX_OUTPUT} bytes", path.display())]
    FileTooLarge { path: std::path::PathBuf },
    #[error("{}: {error}", path.display())]
    InFile { path: std::path::PathBuf, error: TokenFormatError },
    #[error(transparent)]
    Format(#[from] TokenFormatError),
}

/// Why a provider's JSON is not a token. It never quotes the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenFormatError {
    #[error(
        "the token is not JSON with \"secret\" and \"expires_at_ms\" or \"expires_in_s\" (line {line}, column {column})"
    )]
    NotJson { line: usize, column: usize },
    #[error("the token's secret is neither a string nor an object")]
    SecretType,
    #[error("the token's secret is empty")]
    EmptySecret,
    #[error("the token has no expiry (expires_at_ms or expires_in_s)")]
    NoExpiry,
    #[error("the token has expired already")]
    Expired,
}

pub trait TokenProvider: Send + Sync {
    /// The provider's kind, for logs (`command`).
    fn kind(&self) -> &'static str;
    /// Fetches a new token for its service.
    fn fetch(&self) -> Fetch;
}

/// How long a provider's command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a command's output may stay open after the command exits (a child it
/// left behind holding the pipe) before its process group is killed.
const LINGER: Duration = Duration::from_millis(500);

/// The most a command may print: a token, not a file.
const MAX_OUTPUT: usize = 64 << 10;

/// A command the driver runs (`sh -c`) that prints the service's token as JSON:
/// `{"secret": "…", "expires_at_ms": N}` or `{"secret": "…", "expires_in_s": N}`.
pub struct CommandProvider {
    pub service: String,
    pub command: String,
}

impl TokenProvider for CommandProvider {
    fn kind(&self) -> &'static str {
        "command"
    }

    fn fetch(&self) -> Fetch {
        let (service, command) = (self.service.clone(), self.command.clone());
        Box::pin(async move {
            let printed = run_bounded(&command).await?;
            Ok(parse_token(&service, &printed, now_ms())?)
        })
    }
}

/// Runs `command` with `sh -c` in a process group of its own and returns what it
/// printed. What it prints is read only up to [`MAX_OUTPUT`] (a command printing more
/// is stopped there, not buffered), and at the timeout or the bound the whole group is
/// killed, so no child of the command outlives its turn.
async fn run_bounded(command: &str) -> Result<Vec<u8>, TokenError> {
    use tokio::io::AsyncReadExt;
    let mut child = tokio::process::Command::new("/bin/sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(TokenError::Spawn)?;
    let group = child.id().map(|pid| pid as libc::pid_t);
    let kill_group = || {
        if let Some(pid) = group {
            // SAFETY: signals the process group this command leads; nothing else.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    };
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    let ran = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(s) = stdout.as_mut() {
                let _ = s.take(MAX_OUTPUT as u64 + 1).read_to_end(&mut out).await;
            }
            out
        };
        // The first lines say why it failed; the rest is drained, not kept, so a
        // command writing errors without end cannot block on a full pipe.
        let read_err = async {
            if let Some(s) = stderr.as_mut() {
                let _ = s.take(4 << 10).read_to_end(&mut err).await;
                let _ = tokio::io::copy(s, &mut tokio::io::sink()).await;
            }
            err
        };
        let reading = async {
            tokio::pin!(read_out, read_err);
            // Printing past the bound ends it at once, whatever its stderr does.
            let (out, err) = tokio::select! {
                out = &mut read_out => match out.len() > MAX_OUTPUT {
                    true => return Err(TokenError::TooMuchOutput),
                    false => (out, read_err.await),
                },
                err = &mut read_err => (read_out.await, err),
            };
            match out.len() > MAX_OUTPUT {
                true => Err(TokenError::TooMuchOutput),
                false => Ok((out, err)),
            }
        };
        tokio::pin!(reading);
        let exited = tokio::select! {
            read = &mut reading => {
                let (out, err) = read?;
                let status = child.wait().await.map_err(TokenError::Spawn)?;
                return Ok::<_, TokenError>((status, out, err));
            }
            exited = child.wait() => exited.map_err(TokenError::Spawn)?,
        };
        // The command exited while something it started still holds its output open:
        // that gets a moment to finish, then the group goes, which closes the pipes.
        let (out, err) = match tokio::time::timeout(LINGER, &mut reading).await {
            Ok(read) => read?,
            Err(_) => {
                kill_group();
                tokio::time::timeout(LINGER, &mut reading).await.map_err(|_| TokenError::Escaped)??
            }
        };
        Ok((exited, out, err))
    };
    let result = tokio::time::timeout(COMMAND_TIMEOUT, ran).await;
    // Whatever happened, nothing the command started stays behind.
    kill_group();
    let (status, out, err) = match result {
        Err(_) => return Err(TokenError::Timeout),
        Ok(ran) => ran?,
    };
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        let stderr: String = said.lines().next().unwrap_or("").chars().take(200).collect();
        return Err(TokenError::Failed { status, stderr });
    }
    Ok(out)
}

/// A file the driver re-reads at each renewal, holding the service's token as the
/// command provider's JSON (a rotated projected service-account token, say, beside its
/// expiry).
pub struct FileProvider {
    pub service: String,
    pub path: std::path::PathBuf,
}

impl TokenProvider for FileProvider {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn fetch(&self) -> Fetch {
        let (service, path) = (self.service.clone(), self.path.clone());
        Box::pin(async move {
            use tokio::io::AsyncReadExt;
            let unreadable = |error| TokenError::Read { path: path.clone(), error };
            let file = tokio::fs::File::open(&path).await.map_err(unreadable)?;
            // Read no more than the bound and one byte, whatever the file holds.
            let mut text = Vec::new();
            file.take(MAX_OUTPUT as u64 + 1).read_to_end(&mut text).await.map_err(unreadable)?;
            if text.len() > MAX_OUTPUT {
                return Err(TokenError::FileTooLarge { path });
            }
            parse_token(&service, &text, now_ms()).map_err(|error| TokenError::InFile { path, error })
        })
    }
}

#[derive(serde::Deserialize)]
struct Printed {
    /// A string, or an object (S3 credentials) kept as its JSON text.
    secret: serde_json::Value,
    expires_at_ms: Option<u64>,
    expires_in_s: Option<u64>,
}

/// A provider's JSON as a token of `service`. The error never quotes the input.
pub fn parse_token(service: &str, text: &[u8], now_ms: u64) -> Result<Token, TokenFormatError> {
    let printed: Printed = serde_json::from_slice(text)
        .map_err(|e| TokenFormatError::NotJson { line: e.line(), column: e.column() })?;
    let secret = match printed.secret {
        serde_json::Value::String(s) => s,
        object @ serde_json::Value::Object(_) => object.to_string(),
        _ => return Err(TokenFormatError::SecretType),
    };
    if secret.is_empty() {
        return Err(TokenFormatError::EmptySecret);
    }
    let expires_at_ms = match (printed.expires_at_ms, printed.expires_in_s) {
        (Some(at), _) => at,
        (None, Some(secs)) => now_ms.saturating_add(secs.saturating_mul(1000)),
        (None, None) => return Err(TokenFormatError::NoExpiry),
    };
    if expires_at_ms <= now_ms {
        return Err(TokenFormatError::Expired);
    }
    Ok(Token::new(service, secret, expires_at_ms))
}

/// The wall clock, in milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_token_reads_with_either_expiry_and_errors_never_quote_it() {
        let t = parse_token("s3", br#"{"secret":"abc","expires_in_s":60}"#, 1_000).unwrap();
        assert_eq!((t.service.as_str(), t.secret.as_str(), t.expires_at_ms), ("s3", "abc", 61_000));
        let t = parse_token("s3", br#"{"secret":"abc","expires_at_ms":5000}"#, 1_000).unwrap();
        assert_eq!(t.expires_at_ms, 5_000);
        let t = parse_token("s3", br#"{"secret":{"access_key_id":"a"},"expires_in_s":1}"#, 0).unwrap();
        assert_eq!(t.secret, r#"{"access_key_id":"a"}"#);
        for bad in [
            &br#"{"secret":"hunter2"}"#[..],
            br#"{"secret":"hunter2","expires_at_ms":10}"#,
            b"hunter2",
            br#"{"secret":["hunter2"],"expires_in_s":1}"#,
        ] {
            let e = parse_token("s3", bad, 1_000).unwrap_err().to_string();
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[tokio::test]
    async fn a_file_provider_reads_its_file_at_each_fetch() {
        let dir = std::env::temp_dir().join(format!("flint-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token.json");
        let provider = FileProvider { service: "s3".into(), path: path.clone() };
        assert!(matches!(provider.fetch().await, Err(TokenError::Read { .. })));
        std::fs::write(&path, r#"{"secret":"one","expires_in_s":60}"#).unwrap();
        assert_eq!(provider.fetch().await.unwrap().secret, "one");
        std::fs::write(&path, r#"{"secret":"two","expires_in_s":60}"#).unwrap();
        assert_eq!(provider.fetch().await.unwrap().secret, "two");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_command_provider_runs_its_command_and_reports_its_failure() {
        let ok = CommandProvider {
            service: "s3".into(),
            command: r#"echo '{"secret":"x","expires_in_s":5}'"#.into(),
        };
        assert_eq!(ok.fetch().await.unwrap().secret, "x");
        let failing =
            CommandProvider { service: "s3".into(), command: "echo vault sealed >&2; exit 3".into() };
        let e = failing.fetch().await.unwrap_err().to_string();
        assert!(e.contains("vault sealed") && e.contains('3'), "{e}");
    }

    #[tokio::test]
    async fn a_command_that_prints_without_end_is_stopped_at_the_bound_and_leaves_no_child() {
        let started = std::time::Instant::now();
        let endless = CommandProvider { service: "s3".into(), command: "yes".into() };
        let e = endless.fetch().await.unwrap_err().to_string();
        assert!(e.contains("printed over"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        // A child the command left running is killed with it.
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let command = format!(
            r#"sleep 1000 >/dev/null 2>&1 & echo $! > {}; echo '{{"secret":"x","expires_in_s":5}}'"#,
            pid_file.display()
        );
        let leaves = CommandProvider { service: "s3".into(), command };
        assert_eq!(leaves.fetch().await.unwrap().secret, "x");
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie waiting for its reaper.
            state.is_empty() || state.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'))
        });
        assert!(gone, "the command's child {pid} outlived it");
    }

    #[tokio::test]
    async fn a_child_left_holding_the_commands_output_does_not_hold_up_the_token() {
        let started = std::time::Instant::now();
        let command = r#"echo '{"secret":"x","expires_in_s":5}'; sleep 1000 &"#;
        let lingering = CommandProvider { service: "s3".into(), command: command.into() };
        assert_eq!(lingering.fetch().await.unwrap().secret, "x");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        // One that left its group too is given up on at once, not at the timeout.
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let command = format!(
            r#"echo '{{"secret":"x","expires_in_s":5}}'; setsid sh -c 'echo $$ > {}; exec sleep 1000' &"#,
            pid_file.display()
        );
        let escaped = CommandProvider { service: "s3".into(), command };
        let e = escaped.fetch().await.unwrap_err().to_string();
        assert!(e.contains("holds its output open"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        // SAFETY: the test's own stray process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}
