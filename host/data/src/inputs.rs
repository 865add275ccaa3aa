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

/// The files a path on this machine names: the file itself; a directory's regular
/// files, by name (not its subfolders, nor hidden names); or a glob's regular files, by
/// path. At most [`MAX_FILES`]; none is an error that says what was looked at.
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
        let matches = glob::glob(path).map_err(|e| format!("not a usable glob: {e}"))?;
        for entry in matches {
            let file = entry.map_err(|e| e.to_string())?;
            if !hidden(&file) && file.is_file() {
                add(file)?;
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
