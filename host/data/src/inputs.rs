//! Inputs as submitters name them: a plain path or `file://` (read by each executor
//! from its own disk), `flint:///path` (a file on the driver, read through its data
//! service), `s3://bucket/key` or `s3://bucket/prefix/`, and `https://`.

use std::fmt;
use std::path::{Path, PathBuf};

/// The most files one input (a directory or a glob) may name: a job's plan holds each.
pub const MAX_FILES: usize = 100_000;

/// Whether an input names files by a pattern: `*`, `?` or `[…]` (and `**` across
/// folders), as Spark's and Hadoop's globs do.
pub fn is_glob(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// The folder a glob starts in: its components before the first with a wildcard.
pub fn glob_base(pattern: &str) -> PathBuf {
    let mut base = PathBuf::new();
    for part in Path::new(pattern).components() {
        if is_glob(&part.as_os_str().to_string_lossy()) {
            break;
        }
        base.push(part);
    }
    if base.as_os_str().is_empty() { PathBuf::from(".") } else { base }
}

/// Whether a file name is hidden from a directory's or a glob's listing: names
/// starting with `.` or `_`, as Hadoop hides `_SUCCESS`, `_temporary` and `.crc` files.
fn hidden(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().starts_with(['.', '_']))
}

/// The most entries a glob's walk looks at, matched or not: a `**` over a huge tree, or
/// over links that name the same folders again and again, is refused rather than walked
/// without end.
pub const MAX_WALKED: usize = 1_000_000;

/// The files a path on this machine names: the file itself; a directory's regular
/// files, by name (not its subfolders, nor hidden names); or a glob's regular files, by
/// path. At most [`MAX_FILES`]; none is an error that says what was looked at. Only
/// regular files are named (a link to a device, a FIFO or a socket is refused), and a
/// glob's walk follows links to folders but never around a loop, and stops at
/// [`MAX_WALKED`] entries.
pub fn local_files(path: &str) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    let mut add = |file: PathBuf| {
        if found.len() == MAX_FILES {
            return Err(format!("names more than {MAX_FILES} files"));
        }
        found.push(file);
        Ok(())
    };
    if is_glob(path) {
        // The regular files under the glob's base folder that it matches, hidden names
        // (and everything under a hidden folder) left out.
        let matcher = glob::Pattern::new(path).map_err(|e| format!("not a usable glob: {e}"))?;
        let options = glob::MatchOptions { require_literal_separator: true, ..Default::default() };
        let base = glob_base(path);
        // Without `**` a match lies exactly as deep as the pattern's last part.
        let depth = match path.contains("**") {
            true => usize::MAX,
            false => Path::new(path).components().count().saturating_sub(base.components().count()),
        };
        let walk = walkdir::WalkDir::new(&base)
            .min_depth(1)
            .max_depth(depth)
            .follow_links(true)
            .into_iter()
            .filter_entry(|entry| !hidden(entry.path()));
        for (walked, entry) in walk.enumerate() {
            if walked == MAX_WALKED {
                return Err(format!("a glob that walks more than {MAX_WALKED} entries; name a narrower one"));
            }
            let entry = match entry {
                Ok(entry) => entry,
                // A link back to a folder above it is walked once, not around.
                Err(e) if e.loop_ancestor().is_some() => continue,
                // A link to nothing names no file.
                Err(e) if e.io_error().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound) => {
                    continue;
                }
                Err(e) => return Err(e.to_string()),
            };
            if entry.file_type().is_file() && matcher.matches_path_with(entry.path(), options) {
                add(entry.into_path())?;
            }
        }
        if found.is_empty() {
            return Err("matches no file".into());
        }
    } else if Path::new(path).is_dir() {
        for entry in std::fs::read_dir(path).map_err(|e| e.to_string())? {
            let file = entry.map_err(|e| e.to_string())?.path();
            if !hidden(&file) && file.is_file() {
                add(file)?;
            }
        }
        if found.is_empty() {
            return Err("a folder with no file in it".into());
        }
    } else {
        let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
        if !meta.is_file() {
            return Err(
                "not a regular file, a folder or a glob (a device, a FIFO or a socket is never read)".into(),
            );
        }
        add(PathBuf::from(path))?;
    }
    found.sort();
    Ok(found)
}

/// An input URL, parsed; nothing is looked up yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputUrl {
    Local(String),
    Driver(String),
    /// A key, or a prefix when it is empty or ends in `/` (every object under it).
    S3 {
        bucket: String,
        key: String,
    },
    Http(String),
}

/// Why an input URL cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("unsupported scheme {0}:// (inputs are paths, file://, flint://, s3:// or https://)")]
    Scheme(String),
    #[error("{0}:// inputs name an absolute path on the driver's own disk: {0}:///path")]
    Host(&'static str),
    #[error("s3:// inputs name a bucket: s3://bucket/key or s3://bucket/prefix/")]
    Bucket,
    #[error("http:// inputs are off; use https:// or set flint.input.allowHttp=true")]
    PlainHttp,
}

impl InputUrl {
    pub fn parse(text: &str, allow_http: bool) -> Result<InputUrl, UrlError> {
        let Some((scheme, rest)) = text.split_once("://") else {
            return Ok(InputUrl::Local(text.to_owned()));
        };
        match scheme {
            "file" | "flint" => {
                let path = rest.strip_prefix('/').map(|p| format!("/{p}"));
                let path = path.ok_or(UrlError::Host(if scheme == "file" { "file" } else { "flint" }))?;
                Ok(if scheme == "file" { InputUrl::Local(path) } else { InputUrl::Driver(path) })
            }
            "s3" => {
                let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(UrlError::Bucket);
                }
                Ok(InputUrl::S3 { bucket: bucket.to_owned(), key: key.to_owned() })
            }
            "https" => Ok(InputUrl::Http(text.to_owned())),
            "http" if allow_http => Ok(InputUrl::Http(text.to_owned())),
            "http" => Err(UrlError::PlainHttp),
            other => Err(UrlError::Scheme(other.to_owned())),
        }
    }
}

impl fmt::Display for InputUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputUrl::Local(path) => f.write_str(path),
            InputUrl::Driver(path) => write!(f, "flint://{path}"),
            InputUrl::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
            InputUrl::Http(url) => f.write_str(url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_and_globs_name_their_visible_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let at = |p: &str| dir.path().join(p);
        std::fs::create_dir_all(at("logs/2026/nested")).unwrap();
        for f in [
            "logs/b.txt",
            "logs/a.txt",
            "logs/_SUCCESS",
            "logs/.a.crc",
            "logs/2026/c.txt",
            "logs/2026/nested/d.gz",
        ] {
            std::fs::write(at(f), "x").unwrap();
        }
        let names = |found: Vec<PathBuf>| -> Vec<String> {
            found.iter().map(|p| p.strip_prefix(dir.path()).unwrap().to_string_lossy().into_owned()).collect()
        };
        let logs = at("logs").to_string_lossy().into_owned();
        assert_eq!(names(local_files(&logs).unwrap()), ["logs/a.txt", "logs/b.txt"]);
        assert_eq!(names(local_files(&format!("{logs}/*.txt")).unwrap()), ["logs/a.txt", "logs/b.txt"]);
        assert_eq!(names(local_files(&format!("{logs}/**/*")).unwrap()).len(), 4, "** reaches into folders");
        assert_eq!(names(local_files(&format!("{logs}/2026/*/*.gz")).unwrap()), ["logs/2026/nested/d.gz"]);
        assert!(local_files(&format!("{logs}/*.csv")).unwrap_err().contains("no file"));
        std::fs::create_dir(at("empty")).unwrap();
        assert!(local_files(&at("empty").to_string_lossy()).unwrap_err().contains("no file"));
        assert_eq!(glob_base(&format!("{logs}/2026/*/x")), at("logs/2026"));
        assert_eq!(glob_base("*.txt"), PathBuf::from("."));
    }

    #[test]
    fn globs_walk_loops_once_and_only_regular_files_are_named() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let at = |p: &str| dir.path().join(p);
        std::fs::create_dir_all(at("data/a/b")).unwrap();
        std::fs::write(at("data/a/b/x.txt"), "x").unwrap();
        // Links back up the tree (a loop), to the folder's own parent, to nothing, and
        // to a device; a FIFO beside them.
        symlink(at("data"), at("data/a/b/up")).unwrap();
        symlink(at("data/a"), at("data/a/b/again")).unwrap();
        symlink(at("nowhere"), at("data/a/dangling.txt")).unwrap();
        symlink("/dev/zero", at("data/zero.txt")).unwrap();
        let fifo = at("data/pipe.txt");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let text = |p: PathBuf| p.to_string_lossy().into_owned();
        let found = local_files(&format!("{}/**/*.txt", text(at("data")))).unwrap();
        let found: Vec<_> =
            found.into_iter().map(|p| text(p.strip_prefix(dir.path()).unwrap().into())).collect();
        assert_eq!(found, ["data/a/b/x.txt"], "each real file once; no device, FIFO or dangling link");
        for named in [at("data/zero.txt"), fifo] {
            let refused = local_files(&text(named.clone())).unwrap_err();
            assert!(refused.contains("not a regular file"), "{named:?}: {refused}");
        }
        assert_eq!(local_files(&text(at("data"))).unwrap_err(), "a folder with no file in it");
    }

    #[test]
    fn each_scheme_parses_and_bad_ones_say_why() {
        let parse = |t| InputUrl::parse(t, false);
        assert_eq!(parse("data/a.txt"), Ok(InputUrl::Local("data/a.txt".into())));
        assert_eq!(parse("file:///data/a.txt"), Ok(InputUrl::Local("/data/a.txt".into())));
        assert_eq!(parse("flint:///data/a.txt"), Ok(InputUrl::Driver("/data/a.txt".into())));
        assert_eq!(parse("flint://host/data"), Err(UrlError::Host("flint")));
        assert_eq!(parse("s3://b/k/x.txt"), Ok(InputUrl::S3 { bucket: "b".into(), key: "k/x.txt".into() }));
        assert_eq!(parse("s3://b"), Ok(InputUrl::S3 { bucket: "b".into(), key: "".into() }));
        assert_eq!(parse("s3:///k"), Err(UrlError::Bucket));
        assert_eq!(parse("https://h/x"), Ok(InputUrl::Http("https://h/x".into())));
        assert_eq!(parse("http://h/x"), Err(UrlError::PlainHttp));
        assert_eq!(InputUrl::parse("http://h/x", true), Ok(InputUrl::Http("http://h/x".into())));
        assert_eq!(parse("hdfs://nn/x"), Err(UrlError::Scheme("hdfs".into())));
    }
}
