//! Python jobs: a module written against `flint_guest` for Python (which ships inside
//! this binary, with the WIT contract), built into a component with componentize-py
//! and kept by the digest of everything that went in, so the next run starts at once.

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The SDK's files, as they are laid out on the build's Python path.
const SDK: &[(&str, &str)] = &[
    ("flint_guest/__init__.py", include_str!("../../../guest-sdk/python/flint_guest/__init__.py")),
    ("flint_guest/_api.py", include_str!("../../../guest-sdk/python/flint_guest/_api.py")),
    ("flint_guest/_glue.py", include_str!("../../../guest-sdk/python/flint_guest/_glue.py")),
    ("flint_guest/_shuffle.py", include_str!("../../../guest-sdk/python/flint_guest/_shuffle.py")),
    ("flint_guest/testing.py", include_str!("../../../guest-sdk/python/flint_guest/testing.py")),
    ("aggregator.py", include_str!("../../../guest-sdk/python/build/aggregator.py")),
    ("wit/task.wit", include_str!("../../../wit/task.wit")),
];
const ENTRY: &str = include_str!("../../../guest-sdk/python/build/flint_entry.py");
const WORLD: &str = include_str!("../../../guest-sdk/python/build/world.py");

/// The SDK's files a job's own tests import, natively (`flint new --lang python`
/// writes them beside the job; the build uses this binary's copy, whatever they say).
pub fn sdk_for_tests() -> impl Iterator<Item = (&'static str, &'static str)> {
    SDK.iter()
        .copied()
        .filter(|(path, _)| path.starts_with("flint_guest/") && *path != "flint_guest/_glue.py")
}

/// The componentize-py release Flint's Python SDK is built and tested with.
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// The module a Python job folder holds its job in.
pub const MODULE: &str = "app";

/// Whether `path` is a Python job: a `.py` file, or a folder with `app.py` and no crate.
pub fn is_python_job(path: &Path) -> bool {
    if path.is_dir() {
        path.join(format!("{MODULE}.py")).is_file() && !path.join("Cargo.toml").exists()
    } else {
        path.extension().is_some_and(|e| e == "py")
    }
}

/// The component of the job in `module`.py in `dir`, built unless one built from the
/// same sources is in the cache.
pub fn component(dir: &Path, module: &str) -> Result<Vec<u8>> {
    if module.is_empty() || !module.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("{module:?} is not a Python module name: name the job's file like app.py or word_count.py");
    }
    let source = dir.join(format!("{module}.py"));
    let world = world_of(&source)?;
    let digest = digest(dir, module, &world)?;
    let cached = crate::common::cache_dir().map(|d| d.join("python").join(format!("{digest}.wasm")));
    if let Some(bytes) = cached.as_ref().and_then(|p| std::fs::read(p).ok()) {
        return Ok(bytes);
    }
    let bytes = build(dir, module, &world)?;
    if let Some(path) = cached {
        // A cache that cannot be written costs the next run a build, nothing more; a
        // file of its own, renamed into place, so that builds at once never mix.
        let folder = path.parent().expect("a file in a folder");
        let _ = std::fs::create_dir_all(folder)
            .and_then(|()| tempfile::NamedTempFile::new_in(folder))
            .and_then(|mut file| std::io::Write::write_all(&mut file, &bytes).map(|()| file))
            .and_then(|file| file.persist(&path).map(|_| ()).map_err(|e| e.error));
    }
    Ok(bytes)
}

/// `map-reduce` when the job class derives from `MapReduce`, `combine` when from
/// `Combine`, else `aggregate` (a `Task` job's list of outputs is folded by the
/// aggregate world's glue).
fn world_of(source: &Path) -> Result<String> {
    let python = std::env::var_os("FLINT_PYTHON").unwrap_or_else(|| "python3".into());
    let output =
        Command::new(&python).args(["-c", WORLD]).arg(source).output().with_context(|| {
            format!("cannot run {} to read {}", python.to_string_lossy(), source.display())
        })?;
    if !output.status.success() {
        bail!("{} does not parse:\n{}", source.display(), String::from_utf8_lossy(&output.stderr).trim_end());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// What the component is made of: the job's Python files, the SDK, the contract, the
/// world, the module, and this build of Flint.
fn digest(dir: &Path, module: &str, world: &str) -> Result<String> {
    let mut hash = Sha256::new();
    for part in [env!("CARGO_PKG_VERSION"), COMPONENTIZE_PY, module, world, ENTRY] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    for (name, text) in SDK {
        hash.update(name);
        hash.update(text);
    }
    let mut files = Vec::new();
    python_files(dir, dir, &mut files)?;
    files.sort();
    for file in files {
        let bytes =
            std::fs::read(dir.join(&file)).with_context(|| format!("cannot read {}", file.display()))?;
        hash.update(file.to_string_lossy().as_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The `.py` files under `dir` (relative to `root`), leaving out hidden folders,
/// caches and virtual environments.
fn python_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if entry.file_type()?.is_dir() {
            let skipped = name.starts_with('.') || name == "__pycache__" || path.join("pyvenv.cfg").exists();
            if !skipped {
                python_files(root, &path, out)?;
            }
        } else if name.ends_with(".py") {
            out.push(path.strip_prefix(root).expect("under the root").to_path_buf());
        }
    }
    Ok(())
}

/// Runs componentize-py over the job and the SDK in a folder of their own.
fn build(dir: &Path, module: &str, world: &str) -> Result<Vec<u8>> {
    let tool = std::env::var_os("FLINT_COMPONENTIZE_PY").unwrap_or_else(|| "componentize-py".into());
    let work = tempfile::tempdir().context("cannot make a folder to build the Python job in")?;
    for (name, text) in SDK {
        let path = work.path().join(name);
        std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
        std::fs::write(&path, text)?;
    }
    std::fs::write(
        work.path().join("flint_entry.py"),
        ENTRY.replace("MODULE", module).replace("\"WORLD\"", &format!("\"{world}\"")),
    )?;
    let out = work.path().join("job.wasm");
    eprintln!("building the Python job {} with componentize-py…", dir.join(format!("{module}.py")).display());
    let output = Command::new(&tool)
        .arg("-d")
        .arg(work.path().join("wit"))
        .args(["-w", world, "componentize", "flint_entry", "-p"])
        .arg(work.path())
        .arg("-p")
        .arg(dir)
        .arg("-o")
        .arg(&out)
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "componentize-py is not installed, and Python jobs are built with it: pip install {COMPONENTIZE_PY} (or name it in FLINT_COMPONENTIZE_PY)"
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot run {}", tool.to_string_lossy())),
    };
    if !output.status.success() {
        // The traceback as it is, lines and all; the error stays one line.
        let said = explain(&String::from_utf8_lossy(&output.stderr), dir);
        eprintln!("{said}");
        let last = said.lines().rfind(|l| !l.starts_with('(')).unwrap_or("").trim();
        bail!(
            "componentize-py could not build the Python job in {}: {last} (the traceback above)",
            dir.display()
        );
    }
    std::fs::read(&out).context("componentize-py made no component")
}

/// What componentize-py said, for the job's author: the Python traceback of the build
/// (the job's module is imported then), its paths as the author knows them, without
/// componentize-py's own backtrace; and what to do about a module it could not find.
fn explain(said: &str, dir: &Path) -> String {
    let traceback = said
        .split_once("AssertionError: ")
        .map(|(_, rest)| rest.split_once("\n\nCaused by:").map_or(rest, |(t, _)| t))
        .unwrap_or(said)
        .trim_end();
    let mut text = traceback
        .replace("File \"/1/", &format!("File \"{}/", dir.display()))
        .replace("File \"/0/", "File \"<flint>/");
    if text.contains("ModuleNotFoundError") {
        text.push_str(
            "\n(componentize-py bundles the modules it finds in the job's folder and on the Python path it runs with; a package with native code must be one built for WASI)",
        );
    }
    text
}
