//! Pieces every subcommand shares: configuration pairs, the application secret, the
//! progress bar, errors on stderr, `--output`.

use flint_net::Secret;
use flint_proto::config::parse_pair;
use flint_proto::{Conf, ConfError, JobProgress};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

/// `--conf KEY=VALUE` pairs, later ones winning.
pub fn parse_confs(pairs: &[String]) -> Result<Conf, ConfError> {
    pairs.iter().map(|p| parse_pair(p)).collect()
}

/// Where `--output` sends a map/reduce job's parts: an `s3://` prefix as given, or a
/// directory made absolute against the current one.
pub fn output_url(text: &str) -> Result<String, String> {
    if text.starts_with("s3://") {
        return Ok(text.to_owned());
    }
    if let Some((scheme, _)) = text.split_once("://") {
        return Err(format!(
            "--output {text}: {scheme}:// is not an output (a directory, or s3://bucket/prefix/)"
        ));
    }
    std::path::absolute(text)
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| format!("--output {text}: {e}"))
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
    file.map(read_secret_file).transpose()
}

/// Where a driver on this machine that made its own secret links it, by its
/// certificate's fingerprint: `~/.flint/by-fingerprint/<hex>.secret`.
fn secret_link(url: &flint_net::DriverUrl) -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let name = format!("{}.secret", hex::encode(url.fingerprint));
    Some(PathBuf::from(home).join(".flint/by-fingerprint").join(name))
}

/// Links a secret the driver made (`~/.flint/<app-id>.secret`) where clients of `url`
/// on this machine look for it.
pub fn link_secret(secret: &Path, url: &flint_net::DriverUrl) -> std::io::Result<()> {
    let Some(link) = secret_link(url) else { return Ok(()) };
    let dir = link.parent().expect("a link has a folder");
    std::fs::create_dir_all(dir)?;
    match std::fs::remove_file(&link) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::os::unix::fs::symlink(secret, &link)
}

/// The secret of the driver at `url` when that driver runs on this machine, made its
/// own and linked it (`link_secret`): the file is held to the same rules as any.
pub fn secret_of(url: &flint_net::DriverUrl) -> Result<Option<Secret>, String> {
    match secret_link(url) {
        Some(link) if link.exists() => read_secret_file(&link).map(Some),
        _ => Ok(None),
    }
}

/// A secret from its file, which nobody else may read.
pub fn read_secret_file(path: &Path) -> Result<Secret, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    secret_file_private(meta.mode(), (meta.uid(), meta.gid()), me, &own_groups()).map_err(|why| {
        format!("the secret file {} is {why}: make it private with chmod 600", path.display())
    })?;
    let text =
        std::fs::read(path).map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
    let trimmed = text.trim_ascii().to_vec();
    if trimmed.is_empty() {
        return Err(format!("the secret file {} is empty", path.display()));
    }
    Ok(Secret::new(trimmed))
}

/// Whether a secret file with `mode`, owned by `(uid, gid)`, is private enough for a
/// process running as `me` in `own_groups`: nobody else may read it. A file of our own
/// must be ours alone (0600, 0400); a file someone else (root, a kubelet) gave to one
/// of our groups may be group-readable: that is how a kubelet hands a pod its Secret
/// (owned by root, group `fsGroup`, 0440), and how Debian shares keys (`ssl-cert`).
fn secret_file_private(mode: u32, (uid, gid): (u32, u32), me: u32, own_groups: &[u32]) -> Result<(), String> {
    let mode = mode & 0o777;
    if mode & 0o007 != 0 {
        return Err(format!("open to others (mode {mode:o})"));
    }
    if mode & 0o070 != 0 && (uid == me || !own_groups.contains(&gid)) {
        return Err(format!("open to its group {gid} (mode {mode:o})"));
    }
    if mode & 0o020 != 0 {
        return Err(format!("writable by its group (mode {mode:o})"));
    }
    Ok(())
}

/// This process's group and supplementary groups.
fn own_groups() -> Vec<u32> {
    // SAFETY: getgid and getegid cannot fail; getgroups writes at most `len` ids into a
    // buffer of that many and returns how many it wrote (or -1).
    unsafe {
        let mut groups = vec![libc::getgid(), libc::getegid()];
        let n = libc::getgroups(0, std::ptr::null_mut());
        if n > 0 {
            let mut more = vec![0 as libc::gid_t; n as usize];
            let got = libc::getgroups(n, more.as_mut_ptr());
            more.truncate(got.max(0) as usize);
            groups.extend(more);
        }
        groups
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

/// SIGTERM or Ctrl-C.
pub async fn wait_for_shutdown() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// This machine's name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Where compiled components are kept: `$FLINT_CACHE_DIR`, else the user's cache folder.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("FLINT_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("flint").join("components"))
}

#[cfg(test)]
mod tests {
    use super::secret_file_private;

    #[test]
    fn a_secret_may_be_read_by_the_processs_own_group_and_nobody_else() {
        assert!(secret_file_private(0o100600, (1000, 1000), 1000, &[1000]).is_ok());
        assert!(secret_file_private(0o100400, (1000, 1000), 1000, &[1000]).is_ok());
        // As a kubelet mounts a Secret with fsGroup 65532 for a process in that group.
        assert!(secret_file_private(0o100440, (0, 65532), 65532, &[65532]).is_ok());
        assert!(secret_file_private(0o100440, (0, 100), 65532, &[65532]).unwrap_err().contains("group 100"));
        // A file of one's own is not shared with one's group, whoever else is in it.
        assert!(secret_file_private(0o100640, (1000, 1000), 1000, &[1000]).unwrap_err().contains("group"));
        assert!(secret_file_private(0o100640, (0, 0), 0, &[0]).unwrap_err().contains("group"));
        assert!(secret_file_private(0o100444, (0, 65532), 65532, &[65532]).unwrap_err().contains("others"));
        assert!(secret_file_private(0o100604, (0, 0), 0, &[0]).unwrap_err().contains("others"));
        assert!(secret_file_private(0o100460, (0, 65532), 65532, &[65532]).unwrap_err().contains("writable"));
    }
}
