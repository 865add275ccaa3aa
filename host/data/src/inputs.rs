//! Inputs as submitters name them: a plain path or `file://` (read by each executor
//! from its own disk), `flint:///path` (a file on the driver, read through its data
//! service), `s3://bucket/key` or `s3://bucket/prefix/`, and `https://`.

use std::fmt;

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
