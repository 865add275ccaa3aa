//! `flint new`: a job crate that builds with plain cargo, on a machine that has this
//! binary, a Rust toolchain and the registry, and nothing of Flint's repository: the
//! guest SDK and the WIT contract it implements come with the binary, vendored into the
//! new crate (`vendor/flint-guest`, `vendor/wit`), versioned as this flint is.

use crate::common::fail;
use crate::exit;
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct NewArgs {
    /// The job's name: a folder of that name is made, holding a crate of that name.
    name: PathBuf,
    /// What the job starts as: `task` (each split's lines, listed), `aggregate` (a line
    /// count), `combine` (a word count counted where it runs) or `map-reduce` (a word
    /// count through a shuffle).
    #[arg(long, short, default_value = "combine", value_parser = ["task", "aggregate", "combine", "map-reduce"])]
    template: String,
    /// A template value, `key=value` (repeatable): `description`, and `top` (the words
    /// kept in the result) for `combine` and `map-reduce`.
    #[arg(long = "value", short = 'v', value_name = "KEY=VALUE")]
    values: Vec<String>,
    /// The job's language: `rust` (a crate) or `python` (a module built with
    /// componentize-py; every template: `task`, `aggregate`, `combine` and `map-reduce`).
    #[arg(long, default_value = "rust", value_parser = ["rust", "python"])]
    lang: String,
}

/// A Python job's template: its module, and its tests.
struct PythonTemplate {
    name: &'static str,
    app: &'static str,
    test: &'static str,
}

const PYTHON_TEMPLATES: &[PythonTemplate] = &[
    PythonTemplate {
        name: "task",
        app: include_str!("../templates/python/task.py"),
        test: include_str!("../templates/python/test_task.py"),
    },
    PythonTemplate {
        name: "aggregate",
        app: include_str!("../templates/python/aggregate.py"),
        test: include_str!("../templates/python/test_aggregate.py"),
    },
    PythonTemplate {
        name: "combine",
        app: include_str!("../templates/python/combine.py"),
        test: include_str!("../templates/python/test_combine.py"),
    },
    PythonTemplate {
        name: "map-reduce",
        app: include_str!("../templates/python/map_reduce.py"),
        test: include_str!("../templates/python/test_map_reduce.py"),
    },
];

/// The WIT contract's package version, which the vendored SDK implements.
const CONTRACT: &str = flint_runtime::CONTRACT;

/// The guest SDK's files, as this binary was built with them: `(path in the new crate,
/// contents)`. The SDK's own manifest is written from [`sdk_manifest`].
const SDK: &[(&str, &str)] = &[
    ("vendor/flint-guest/src/lib.rs", include_str!("../../../guest-sdk/src/lib.rs")),
    ("vendor/flint-guest/src/shuffle.rs", include_str!("../../../guest-sdk/src/shuffle.rs")),
    ("vendor/flint-guest/src/testing.rs", include_str!("../../../guest-sdk/src/testing.rs")),
    ("vendor/flint-guest/src/testing/program.rs", include_str!("../../../guest-sdk/src/testing/program.rs")),
    ("vendor/flint-guest/src/program.rs", include_str!("../../../guest-sdk/src/program.rs")),
    (
        "vendor/flint-guest/src/program/functions.rs",
        include_str!("../../../guest-sdk/src/program/functions.rs"),
    ),
    ("vendor/flint-guest/src/program/records.rs", include_str!("../../../guest-sdk/src/program/records.rs")),
    ("vendor/flint-guest/src/program/stage.rs", include_str!("../../../guest-sdk/src/program/stage.rs")),
    ("vendor/flint-guest/src/sandbox.md", include_str!("../../../guest-sdk/src/sandbox.md")),
    ("vendor/wit/task.wit", include_str!("../../../wit/task.wit")),
];

const SDK_MANIFEST: &str = include_str!("../../../guest-sdk/Cargo.toml");

/// The SDK's manifest, standalone: the workspace's shared keys written out.
fn sdk_manifest() -> String {
    SDK_MANIFEST
        .replace("version.workspace = true", &format!("version = \"{}\"", env!("CARGO_PKG_VERSION")))
        .replace("edition.workspace = true", "edition = \"2024\"")
        .replace("license.workspace = true", "license = \"Apache-2.0\"")
}

struct Template {
    name: &'static str,
    world: &'static str,
    lib: &'static str,
    description: &'static str,
    /// Values the template takes beyond `description`, with their defaults; each is
    /// written into the manifest's `[config]`.
    config: &'static [(&'static str, &'static str)],
}

const TEMPLATES: &[Template] = &[
    Template {
        name: "task",
        // The SDK's `export_task!` exports the aggregator too, folding the outputs
        // into their list on the driver: an `aggregate` component.
        world: "aggregate",
        lib: include_str!("../templates/task/lib.rs"),
        description: "Counts the lines of each input split.",
        config: &[],
    },
    Template {
        name: "aggregate",
        world: "aggregate",
        lib: include_str!("../templates/aggregate/lib.rs"),
        description: "Counts the lines of the input files.",
        config: &[],
    },
    Template {
        name: "combine",
        world: "aggregate",
        lib: include_str!("../templates/combine/lib.rs"),
        description: "Counts the words of the input files.",
        config: &[("top", "10")],
    },
    Template {
        name: "map-reduce",
        world: "map-reduce",
        lib: include_str!("../templates/map-reduce/lib.rs"),
        description: "Counts the words of the input files through a shuffle.",
        config: &[("top", "10")],
    },
];

pub fn new(args: NewArgs) -> u8 {
    match make(&args) {
        Ok(dir) => {
            let name = dir.display();
            let test = if args.lang == "python" { "python3 -m unittest" } else { "cargo test" };
            println!(
                "Made the {} job {name}. Next:\n  cd {name}\n  {test}\n  flint run . --input SOME_TEXT_FILE",
                args.template
            );
            if args.lang != "python" && crate::bundle::has_target(&dir) == Some(false) {
                println!(
                    "Before the first run, add the target its component is built for:\n  (cd {name} && rustup target add {})",
                    crate::bundle::TARGET
                );
            }
            0
        }
        Err(e) => fail(exit::USAGE, format!("{e:#}")),
    }
}

/// Writes the crate; returns its folder.
fn make(args: &NewArgs) -> Result<PathBuf> {
    let template = TEMPLATES.iter().find(|t| t.name == args.template).expect("clap checked the template");
    let dir = args.name.clone();
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{}: give the job a name", dir.display()))?
        .to_owned();
    check_name(&name)?;
    let mut values: BTreeMap<&str, String> = BTreeMap::new();
    values.insert("description", template.description.into());
    for (key, default) in template.config {
        values.insert(key, (*default).into());
    }
    for pair in &args.values {
        let (key, value) =
            pair.split_once('=').with_context(|| format!("--value {pair}: write it KEY=VALUE"))?;
        let Some(slot) = values.get_mut(key) else {
            let known: Vec<&str> = values.keys().copied().collect();
            bail!("--value {key}: the {} template takes {}", template.name, known.join(", "));
        };
        if value.contains(['"', '\\', '\n']) {
            bail!("--value {key}: no quotes, backslashes or line breaks");
        }
        *slot = value.to_owned();
    }
    if dir.exists() && std::fs::read_dir(&dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{} exists and is not empty: choose another name", dir.display());
    }
    let config: String = if template.config.is_empty() {
        String::new()
    } else {
        let lines: Vec<String> =
            template.config.iter().map(|(key, _)| format!("{key} = \"{}\"", values[key])).collect();
        format!("\n[config]\n{}\n", lines.join("\n"))
    };
    let placeholders = [
        ("name", name.as_str()),
        ("description", values["description"].as_str()),
        ("flint_version", env!("CARGO_PKG_VERSION")),
        ("contract", CONTRACT),
        ("world", template.world),
        ("template", template.name),
        ("config", config.trim_end()),
    ];
    let fill = |text: &str| fill(text, &placeholders);
    if args.lang == "python" {
        let python =
            PYTHON_TEMPLATES.iter().find(|t| t.name == template.name).expect("every template in Python too");
        let mut files: Vec<(String, String)> = vec![
            ("app.py".into(), fill(python.app)),
            ("test_app.py".into(), python.test.into()),
            ("flint.toml".into(), fill(include_str!("../templates/flint.toml.in"))),
            ("README.md".into(), fill(include_str!("../templates/python/README.md.in"))),
            (".gitignore".into(), "__pycache__/\n".into()),
        ];
        files.extend(crate::python::sdk_for_tests().map(|(path, text)| (path.to_owned(), text.to_owned())));
        for (path, text) in files {
            write(&dir.join(path), &text)?;
        }
        return Ok(dir);
    }
    let mut files: Vec<(String, String)> = vec![
        ("Cargo.toml".into(), fill(include_str!("../templates/Cargo.toml.in"))),
        ("flint.toml".into(), fill(include_str!("../templates/flint.toml.in"))),
        ("README.md".into(), fill(include_str!("../templates/README.md.in"))),
        (".gitignore".into(), include_str!("../templates/gitignore.in").into()),
        ("src/lib.rs".into(), fill(template.lib)),
        ("vendor/flint-guest/Cargo.toml".into(), sdk_manifest()),
    ];
    files.extend(SDK.iter().map(|(path, text)| ((*path).to_owned(), (*text).to_owned())));
    for (path, text) in files {
        write(&dir.join(path), &text)?;
    }
    Ok(dir)
}

/// `text` with each `{{key}}` of `values` replaced, in one pass: what a value holds
/// (`{{config}}` in a description, say) is written as it is, never expanded.
fn fill(text: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let known = after.find("}}").and_then(|end| {
            values.iter().find(|(key, _)| *key == &after[..end]).map(|(_, value)| (end, *value))
        });
        match known {
            Some((end, value)) => {
                out.push_str(value);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot make {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Rust's keywords, strict and reserved (2024 edition): cargo takes none as a package
/// name, as the crate's name would be one.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref",
    "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "try", "typeof",
    "unsized", "virtual", "yield",
];
/// Names cargo refuses beside the keywords: the standard library's crates and the
/// folders of its own build output.
const CARGO_REFUSES: &[&str] =
    &["std", "core", "alloc", "proc_macro", "test", "build", "deps", "examples", "incremental"];

/// A name cargo takes for a package, and that is not the SDK's own.
fn check_name(name: &str) -> Result<()> {
    let first = name.chars().next().unwrap_or('0');
    if !first.is_ascii_alphabetic()
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("{name:?}: a job's name starts with a letter and holds only letters, digits, - and _");
    }
    let crate_name = name.replace('-', "_");
    if KEYWORDS.contains(&crate_name.as_str()) {
        bail!("{name:?} is a Rust keyword, which cargo takes for no crate: choose another");
    }
    if CARGO_REFUSES.contains(&crate_name.as_str()) {
        bail!("{name:?} is a name cargo keeps for itself or the standard library: choose another");
    }
    if crate_name == "flint_guest" {
        bail!("{name:?} is the SDK's own name: choose another");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_sdk_manifest_stands_alone() {
        let manifest = sdk_manifest();
        assert!(!manifest.contains("workspace"), "{manifest}");
        assert!(manifest.contains(&format!("version = \"{}\"", env!("CARGO_PKG_VERSION"))));
    }

    #[test]
    fn the_contract_version_is_the_wit_s() {
        let wit = include_str!("../../../wit/task.wit");
        assert!(wit.contains(&format!("package flint:task@{CONTRACT};")), "update CONTRACT with the WIT");
    }

    #[test]
    fn a_value_is_written_as_it_is_never_expanded() {
        let values =
            [("name", "wc"), ("description", "counts {{name}} and {{config}}"), ("config", "[config]")];
        let text =
            fill("name = \"{{name}}\"\ndescription = \"{{description}}\"\n{{config}}\n{{unknown}}", &values);
        assert_eq!(
            text,
            "name = \"wc\"\ndescription = \"counts {{name}} and {{config}}\"\n[config]\n{{unknown}}"
        );
    }

    #[test]
    fn names_cargo_would_refuse_are_refused() {
        for bad in [
            "9lives",
            "with space",
            "dots.in",
            "",
            "flint-guest",
            "fn",
            "test",
            "self",
            "std",
            "proc-macro",
            "build",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        for good in ["wc", "word-count", "job_2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
    }
}
