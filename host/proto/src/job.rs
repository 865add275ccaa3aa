//! Jobs: the manifest a bundle carries, and the plan that splits a job into partitions.

use crate::config::{Conf, ValueError, parse_duration, parse_size};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Which `flint:task` world a component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum World {
    /// Exports `job`: the job's output is the list of task outputs.
    Task,
    /// Exports `job` and `aggregator`: task outputs are folded into one result.
    Aggregate,
    /// Exports `aggregator` and `map-reduce`: map tasks emit keyed records, reduce
    /// tasks read them by key, and the reduce tasks' outputs fold into one result.
    MapReduce,
    /// Exports `program-entry` and `stage`: a program whose `main` runs on the driver,
    /// each of its actions a job of stages.
    Program,
}

impl std::fmt::Display for World {
    /// As a manifest spells it (`world = "map-reduce"`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            World::Task => "task",
            World::Aggregate => "aggregate",
            World::MapReduce => "map-reduce",
            World::Program => "program",
        })
    }
}

/// A job's manifest (`flint.toml` beside its crate, or inside a bundle).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    /// The world the component must implement; checked when the component is loaded.
    #[serde(default)]
    pub world: Option<World>,
    /// Partitions when the job reads no input files (default: the cluster's slots).
    #[serde(default)]
    pub partitions: Option<u32>,
    /// A map/reduce job's reduce partitions (`--reduce-partitions` overrides it).
    #[serde(default, rename = "reduce-partitions")]
    pub reduce_partitions: Option<u32>,
    /// Where a map/reduce job writes its reduce tasks' part files (`--output` sets it):
    /// an absolute directory, under the driver's and the executors' `flint.output.roots`.
    #[serde(default)]
    pub output: Option<String>,
    /// Whether a map/reduce job's reduce tasks' part output comes back as the job's
    /// result (`--collect`), instead of part files.
    #[serde(default)]
    pub collect: bool,
    /// The job's configuration; `--conf` overrides it key by key.
    #[serde(default)]
    pub config: Conf,
    /// Values to run one task each on (JSON), instead of indices or files.
    #[serde(default, with = "json_values")]
    pub inputs: Vec<serde_json::Value>,
    #[serde(default)]
    pub limits: Limits,
    /// Token services the job's tasks may read.
    #[serde(default)]
    pub tokens: Vec<String>,
    /// A prebuilt component, relative to the manifest's folder, for jobs not built from
    /// a crate beside the manifest.
    #[serde(default)]
    pub component: Option<String>,
    /// Whether a straggling task may get a copy when the driver speculates
    /// (`flint.speculation.enabled`): `false` for a job whose tasks act outside Flint
    /// and must never run twice at once.
    /// (Unset: it may.)
    #[serde(default)]
    pub speculation: Option<bool>,
}

/// JSON values as themselves in text formats (TOML, JSON) and as JSON text in binary
/// ones (postcard cannot decode a self-describing value).
mod json_values {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(values: &[Value], s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            values.serialize(s)
        } else {
            let text: Vec<String> = values.iter().map(Value::to_string).collect();
            text.serialize(s)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Value>, D::Error> {
        if d.is_human_readable() {
            Vec::<Value>::deserialize(d)
        } else {
            Vec::<String>::deserialize(d)?
                .iter()
                .map(|t| serde_json::from_str(t).map_err(serde::de::Error::custom))
                .collect()
        }
    }
}

/// Per-task limits a job asks for; they can lower the executor's, never raise them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// A memory cap such as `256m`.
    #[serde(default)]
    pub memory: Option<String>,
    /// A deadline such as `30s`.
    #[serde(default)]
    pub deadline: Option<String>,
}

impl Manifest {
    /// Reads a `flint.toml`.
    pub fn from_toml(text: &str) -> Result<Manifest, ManifestError> {
        toml::from_str(text).map_err(|e| ManifestError::explain(text, &e))
    }
}

/// Why a `flint.toml` cannot be read: where, what, and for a misspelt key the one
/// meant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ManifestError {
    pub message: String,
}

impl ManifestError {
    fn explain(text: &str, e: &toml::de::Error) -> ManifestError {
        let what = e.message().trim_end_matches('\n');
        let line = e.span().map(|span| {
            text.as_bytes()[..span.start.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
        });
        let at = line.map(|n| format!("line {n}: ")).unwrap_or_default();
        let message = match unknown_key(what) {
            Some((key, known)) => {
                let closest = crate::config::nearest(key, &known);
                let known = known.join(", ");
                match closest {
                    Some(meant) => {
                        format!("{at}unknown key `{key}`: did you mean `{meant}`? (keys here: {known})")
                    }
                    None => format!("{at}unknown key `{key}` (keys here: {known})"),
                }
            }
            None => format!("{at}{what}"),
        };
        ManifestError { message }
    }
}

/// serde's "unknown field `k`, expected one of `a`, `b`": the key and those known.
fn unknown_key(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, rest) = rest.split_once('`')?;
    let known = rest.split('`').skip(1).step_by(2).collect();
    Some((key, known))
}

/// Why a manifest's `[limits]` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("limits.memory: must be positive")]
    ZeroMemory,
    #[error("limits.deadline: must be at least 10ms")]
    DeadlineTooShort,
    #[error("limits.{key}: {error}")]
    Unreadable { key: &'static str, error: ValueError },
}

impl Limits {
    pub fn memory_bytes(&self) -> Result<Option<u64>, LimitError> {
        match self.memory.as_deref().map(parse_size).transpose() {
            Ok(Some(0)) => Err(LimitError::ZeroMemory),
            other => other.map_err(|error| LimitError::Unreadable { key: "memory", error }),
        }
    }

    /// The deadline a job asks for; at least the 10 ms epoch tick that enforces it.
    pub fn deadline(&self) -> Result<Option<Duration>, LimitError> {
        match self.deadline.as_deref().map(parse_duration).transpose() {
            Ok(Some(d)) if d < Duration::from_millis(10) => Err(LimitError::DeadlineTooShort),
            other => other.map_err(|error| LimitError::Unreadable { key: "deadline", error }),
        }
    }
}

/// What one task works on, as the driver describes it to an executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionSpec {
    /// A generated partition: the task index is the whole input.
    Index(u32),
    /// One input value, encoded as JSON.
    Value(Vec<u8>),
    /// The lines of `source` whose first byte falls in `start..end`; `size` is the
    /// whole input's, as the driver found it when it planned the job.
    Split { source: Source, start: u64, end: u64, size: u64 },
    /// A reduce task's partition of the shuffle it reads and where its slices are: one
    /// source per executor holding map outputs with bytes for it, and the slices that
    /// came inline in their maps' reports, by map index (filled in at launch). No map
    /// is in both. `shuffle` is the stage of the job that wrote it.
    Reduce { partition: u32, shuffle: u32, sources: Vec<MapSource>, inline: Vec<(u32, crate::InlineSlice)> },
    /// A program's task of a stage reading shuffles: its partition of each, in the
    /// order of the stage's reads (filled in at launch).
    Shuffles { partition: u32, reads: Vec<ShuffleInput> },
}

/// One shuffle a program's task reads: where its partition's slices are. Maps are
/// numbered within the stage that wrote it, whose tasks start at `first` of the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleInput {
    /// The stage that wrote it.
    pub shuffle: u32,
    pub first: u32,
    /// That stage's tasks.
    pub maps: u32,
    pub sources: Vec<MapSource>,
    pub inline: Vec<(u32, crate::InlineSlice)>,
}

/// Where an executor serves its map outputs to its peers: an address and the SHA-256
/// of the certificate it made for itself, which peers pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuffleEndpoint {
    /// `host:port`.
    pub address: String,
    pub fingerprint: [u8; 32],
}

/// Map outputs one executor incarnation holds for a reduce partition: read in one
/// request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapSource {
    pub executor: crate::ExecutorId,
    pub incarnation: u64,
    /// Where the executor serves its shuffle files, when it is reached over the
    /// network; in-process executors have none.
    pub address: Option<ShuffleEndpoint>,
    /// The maps whose outputs hold bytes for the partition, with an upper bound on
    /// those bytes.
    pub maps: Vec<(u32, u64)>,
}

impl PartitionSpec {
    /// About how many bytes this partition takes in a frame: enough to keep a batch of
    /// launches under the frame limit without encoding each one twice.
    pub fn wire_size_hint(&self) -> usize {
        16 + match self {
            PartitionSpec::Index(_) => 0,
            PartitionSpec::Reduce { sources, inline, .. } => {
                let held: usize =
                    sources.iter().map(|s| 48 + s.executor.as_str().len() + 12 * s.maps.len()).sum();
                held + inline.iter().map(|(_, slice)| 16 + slice.bytes.len()).sum::<usize>()
            }
            PartitionSpec::Shuffles { reads, .. } => reads
                .iter()
                .map(|read| {
                    let held: usize =
                        read.sources.iter().map(|s| 48 + s.executor.as_str().len() + 12 * s.maps.len()).sum();
                    24 + held + read.inline.iter().map(|(_, slice)| 16 + slice.bytes.len()).sum::<usize>()
                })
                .sum(),
            PartitionSpec::Value(v) => v.len(),
            PartitionSpec::Split { source, .. } => match source {
                Source::File(s) | Source::Driver(s) | Source::Http(s) | Source::HttpWhole(s) => s.len(),
                Source::S3 { bucket, key } => bucket.len() + key.len(),
            },
        }
    }
}

/// Where an input lives, as the driver planned it. Executors read it straight from
/// there, byte range by byte range; only `Driver` inputs flow through the driver.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Source {
    /// A file the executor reads itself (a plain path or `file://`), by the path the
    /// driver resolved; it must lie under the executor's own `flint.input.roots` too.
    File(String),
    /// A file under the driver's input roots, read through the driver's data service
    /// (`flint:///path`) with a token for the job.
    Driver(String),
    /// An S3 object (`s3://bucket/key`), read with the `s3` service's token.
    S3 { bucket: String, key: String },
    /// An `https://` (or, where allowed, `http://`) URL.
    Http(String),
    /// An `http(s)://` URL whose server answers only whole GETs, not byte ranges (as
    /// `python3 -m http.server`): planning found it so, and it is one split, read from
    /// start to end in one request.
    HttpWhole(String),
}

impl Source {
    /// Read whole by one task, never split: a compressed stream cannot be entered in
    /// its middle, and a server without byte ranges gives only all of it.
    pub fn whole_only(&self) -> bool {
        matches!(self, Source::HttpWhole(_)) || Compression::of(self).is_some()
    }

    /// A split of it is read across the network in ranged reads (the driver's data
    /// service, an object store), each begun before the task asks for it: the first
    /// one too, when the task waits for a slot.
    pub fn reads_ahead(&self) -> bool {
        matches!(self, Source::Driver(_) | Source::S3 { .. } | Source::Http(_)) && !self.whole_only()
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(path) => f.write_str(path),
            Source::Driver(path) => write!(f, "flint://{path}"),
            Source::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
            Source::Http(url) | Source::HttpWhole(url) => f.write_str(url),
        }
    }
}

/// How an input's bytes are compressed, told by its name's extension, as Hadoop's
/// codecs are: such an input is one split (a compressed stream cannot be entered in its
/// middle), its host decompresses it as the task reads its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `.gz`: gzip (members one after another read as one stream, as `gzip -c a b` makes).
    Gzip,
    /// `.zst`, `.zstd`: Zstandard.
    Zstd,
}

impl Compression {
    pub fn of(source: &Source) -> Option<Compression> {
        let name = match source {
            Source::File(p) | Source::Driver(p) => p.as_str(),
            Source::S3 { key, .. } => key.as_str(),
            Source::Http(url) | Source::HttpWhole(url) => url.split(['?', '#']).next().unwrap_or(url),
        };
        let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        match extension.as_deref() {
            Some("gz") => Some(Compression::Gzip),
            Some("zst" | "zstd") => Some(Compression::Zstd),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_key_is_named_with_the_one_meant_and_its_line() {
        let e = Manifest::from_toml("name = \"x\"\nwrold = \"aggregate\"\n").unwrap_err();
        assert!(e.message.starts_with("line 2: unknown key `wrold`: did you mean `world`?"), "{e}");
        assert!(e.message.contains("reduce-partitions"), "the keys it takes: {e}");
        let e = Manifest::from_toml("name = \"x\"\n[limits]\nmemroy = \"1g\"\n").unwrap_err();
        assert!(e.message.starts_with("line 3: unknown key `memroy`: did you mean `memory`?"), "{e}");
        let e = Manifest::from_toml("name = \"x\"\nzzzzzzzz = 1\n").unwrap_err();
        assert!(e.message.starts_with("line 2: unknown key `zzzzzzzz` (keys here:"), "{e}");
        let e = Manifest::from_toml("name = \"x\"\nworld = \"aggregat\"\n").unwrap_err();
        assert!(e.message.starts_with("line 2: unknown variant"), "{e}");
    }

    #[test]
    fn manifest_reads_and_rejects_unknown_fields() {
        let m: Manifest =
            serde_json::from_str(r#"{"name":"pi","world":"aggregate","partitions":4}"#).unwrap();
        assert_eq!(m.world, Some(World::Aggregate));
        assert!(serde_json::from_str::<Manifest>(r#"{"name":"pi","partitons":4}"#).is_err());
        let limits = Limits { memory: Some("64m".into()), deadline: Some("bad".into()) };
        assert_eq!(limits.memory_bytes(), Ok(Some(64 << 20)));
        assert!(limits.deadline().unwrap_err().to_string().contains("limits.deadline"));
        let zero = Limits { memory: Some("0".into()), deadline: Some("0s".into()) };
        assert!(zero.memory_bytes().unwrap_err().to_string().contains("limits.memory"));
        assert!(zero.deadline().unwrap_err().to_string().contains("limits.deadline"));
    }

    #[test]
    fn manifest_with_values_round_trips_through_the_wire_codec() {
        let m = Manifest {
            name: "sq".into(),
            inputs: vec![serde_json::json!(3), serde_json::json!({"n": [1, 2]})],
            tokens: vec!["storage".into()],
            ..Manifest::default()
        };
        let bytes = postcard::to_stdvec(&m).unwrap();
        assert_eq!(postcard::from_bytes::<Manifest>(&bytes).unwrap(), m);
    }
}
