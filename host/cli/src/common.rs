//! Pieces every subcommand shares: configuration pairs, the application secret, the
//! progress bar, errors on stderr.

use flint_net::Secret;
use flint_proto::config::parse_pair;
use flint_proto::{Conf, ConfError, JobProgress};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::Path;

/// `--conf KEY=VALUE` pairs, later ones winning.
pub fn parse_confs(pairs: &[String]) -> Result<Conf, ConfError> {
    pairs.iter().map(|p| parse_pair(p)).collect()
}

/// Prints `error: …` on one line and returns `code`.
pub fn fail(code: u8, e: impl std::fmt::Display) -> u8 {
    eprintln!("error: {}", e.to_string().replace('\n', " "));
    code
}

/// A peer's own certificate, for a driver that asks for one (mutual TLS).
#[derive(clap::Args, Debug)]
pub struct PeerTls {
    /// This peer's certificate (PEM or DER), signed by a CA the driver trusts
    /// (`flint driver --client-ca-file`).
    #[arg(long, env = "FLINT_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The certificate's PKCS#8 private key (PEM or DER).
    #[arg(long, env = "FLINT_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
}

impl PeerTls {
    pub fn identity(&self) -> Result<Option<flint_net::Identity>, String> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => flint_net::Identity::load(cert, key)
                .map(Some)
                .map_err(|e| format!("cannot read the TLS certificate: {e}")),
            _ => Ok(None),
        }
    }
}

/// The application secret: `FLINT_SECRET`, else the file given. Never from argv.
pub fn load_secret(file: Option<&Path>) -> Result<Option<Secret>, String> {
    if let Some(value) = std::env::var_os("FLINT_SECRET").filter(|v| !v.is_empty()) {
        return Ok(Some(Secret::new(value.into_encoded_bytes())));
    }
    match file {
        Some(path) => {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path)
                .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(format!(
                    "the secret file {} is open to others (mode {:o}): make it private with chmod 600",
                    path.display(),
                    mode & 0o777
                ));
            }
            let text = std::fs::read(path)
                .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
            let trimmed = text.trim_ascii().to_vec();
            if trimmed.is_empty() {
                return Err(format!("the secret file {} is empty", path.display()));
            }
            Ok(Some(Secret::new(trimmed)))
        }
        None => Ok(None),
    }
}

/// Writes `text` to `path` so that only this user can read it, replacing it whole.
pub fn write_private(path: &Path, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    file.write_all(text)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

pub fn progress_bar(total: u32) -> ProgressBar {
    let bar = ProgressBar::new(u64::from(total));
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} tasks  {msg}  {elapsed}")
            .expect("a valid template"),
    );
    bar
}

pub fn show_progress(bar: &ProgressBar, p: &JobProgress) {
    bar.set_length(u64::from(p.total));
    bar.set_position(u64::from(p.done));
    bar.set_message(format!(
        "{} running, {} failed, {} executors",
        p.running, p.failed_attempts, p.executors
    ));
}
