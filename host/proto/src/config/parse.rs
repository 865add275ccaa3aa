//! Reading values: `KEY=VALUE` pairs, sizes (`512m`, `4g`), durations (`250ms`, `30s`,
//! `5m`), whole numbers and Kubernetes names.

use std::time::Duration;

/// A `--conf` pair or a setting that cannot be taken, with the key it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfError {
    #[error("malformed --conf {0:?}: expected KEY=VALUE")]
    Malformed(String),
    #[error("unknown configuration key {key}{hint}", hint = match nearest {
        Some(meant) => format!(": did you mean {meant}?"),
        None => String::new(),
    })]
    UnknownKey { key: String, nearest: Option<&'static str> },
    #[error("configuration {key}={value:?}: {reason}")]
    Invalid { key: String, value: String, reason: String },
}

/// The one of `known` that `key` most likely misspells: within two edits, or a third
/// of its length, of it.
pub fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(key, k), *k))
        .filter(|(distance, k)| *distance <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| k)
}

/// Parses `KEY=VALUE`.
pub fn parse_pair(text: &str) -> Result<(String, String), ConfError> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(ConfError::Malformed(text.to_owned())),
    }
}

/// Why a setting's value does not read as what its key takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("{0:?} is not a size such as 512m or 4g")]
    NotASize(String),
    #[error("{0:?} is not a duration such as 30s or 5m")]
    NotADuration(String),
    #[error("{0:?} is too large")]
    TooLarge(String),
    #[error("must be lowercase letters, digits and '-', at most 63")]
    NotADnsLabel,
    #[error("must not be empty")]
    Empty,
    #[error("{0:?} is not a whole number")]
    NotAWholeNumber(String),
}

/// Parses a size in bytes: a number with an optional `b`, `k`, `m`, `g` or `t` suffix
/// (binary multiples, as Spark reads them).
pub fn parse_size(text: &str) -> Result<u64, ValueError> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix("ib").or_else(|| t.strip_suffix('b')).unwrap_or(&t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 10),
        Some((i, 'm')) => (&t[..i], 20),
        Some((i, 'g')) => (&t[..i], 30),
        Some((i, 't')) => (&t[..i], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().map_err(|_| ValueError::NotASize(text.to_owned()))?;
    n.checked_mul(1 << shift).ok_or_else(|| ValueError::TooLarge(text.to_owned()))
}

/// Parses a duration: a number with a `ms`, `s`, `m`, `h` or `d` suffix; a bare number
/// is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, ValueError> {
    let t = text.trim().to_ascii_lowercase();
    let (digits, unit_ms) = if let Some(d) = t.strip_suffix("ms") {
        (d, 1)
    } else if let Some(d) = t.strip_suffix('s') {
        (d, 1_000)
    } else if let Some(d) = t.strip_suffix("min").or_else(|| t.strip_suffix('m')) {
        (d, 60_000)
    } else if let Some(d) = t.strip_suffix('h') {
        (d, 3_600_000)
    } else if let Some(d) = t.strip_suffix('d') {
        (d, 86_400_000)
    } else {
        (t.as_str(), 1_000)
    };
    let n: u64 = digits.trim().parse().map_err(|_| ValueError::NotADuration(text.to_owned()))?;
    n.checked_mul(unit_ms).map(Duration::from_millis).ok_or_else(|| ValueError::TooLarge(text.to_owned()))
}

/// A Kubernetes object name that is a DNS label: lowercase letters, digits and '-',
/// at most 63, starting and ending with a letter or digit.
pub fn dns_label(text: &str) -> Result<String, ValueError> {
    let t = text.trim();
    let ok = !t.is_empty()
        && t.len() <= 63
        && t.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !t.starts_with('-')
        && !t.ends_with('-');
    if ok { Ok(t.to_owned()) } else { Err(ValueError::NotADnsLabel) }
}

pub(super) fn non_empty(text: &str) -> Result<String, ValueError> {
    match text.trim() {
        "" => Err(ValueError::Empty),
        t => Ok(t.to_owned()),
    }
}

pub(super) fn parse_u32(text: &str) -> Result<u32, ValueError> {
    text.trim().parse().map_err(|_| ValueError::NotAWholeNumber(text.to_owned()))
}
