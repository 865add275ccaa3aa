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
        // Whatever `app.py` is (a link to a device is refused as the sources are read).
        let module = path.join(format!("{MODULE}.py"));
        std::fs::symlink_metadata(module).is_ok() && !path.join("Cargo.toml").exists()
    } else {
        path.extension().is_some_and(|e| e == "py")
    }
}

/// The most one of a job's `.py` files may hold, all of them together, and how many
/// there may be: a job's source is read before it is built, and a link to `/dev/zero`
/// or an absurd file must fail the build, not fill the host's memory.
const MAX_SOURCE: u64 = 16 << 20;
const MAX_SOURCES: u64 = 64 << 20;
const MAX_FILES: usize = 10_000;

/// A job's `.py` files, relative to its folder, each read once (sorted by path).
type Sources = Vec<(PathBuf, Vec<u8>)>;

/// The component of the job in `module`.py in `dir`, built unless one built from the
/// same sources is in the cache.
pub fn component(dir: &Path, module: &str) -> Result<Vec<u8>> {
    if module.is_empty() || !module.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("{module:?} is not a Python module name: name the job's file like app.py or word_count.py");
    }
    let sources = read_sources(dir)?;
    let main = PathBuf::from(format!("{module}.py"));
    let Some((_, source)) = sources.iter().find(|(path, _)| *path == main) else {
        bail!("{} is not a regular file of the job's folder", dir.join(&main).display());
    };
    let world = world_of(&dir.join(&main), source)?;
    let digest = digest(&sources, module, &world);
    let cached = crate::common::cache_dir().map(|d| d.join("python").join(format!("{digest}.wasm")));
    if let Some(bytes) = cached.as_ref().and_then(|p| std::fs::read(p).ok()) {
        return Ok(bytes);
    }
    let bytes = build(dir, &sources, module, &world)?;
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
/// aggregate world's glue). The host's Python parses the source it is given on its
/// input, isolated (no job folder, working folder or site on its path, no `PYTHON*`
/// variable) and confined, so nothing of the job's runs.
fn world_of(path: &Path, source: &[u8]) -> Result<String> {
    use std::io::Write;
    use std::process::Stdio;
    let python = std::env::var_os("FLINT_PYTHON").unwrap_or_else(|| "python3".into());
    let empty = tempfile::tempdir().context("cannot make a folder to read the Python job in")?;
    let mut cmd = Command::new(&python);
    cmd.args(["-I", "-S", "-c", WORLD])
        .arg(path)
        .current_dir(empty.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::confine::writes_only_under(&mut cmd, &[empty.path(), Path::new("/dev/null")])?;
    let cannot_run = || format!("cannot run {} to read {}", python.to_string_lossy(), path.display());
    let mut child = cmd.spawn().with_context(cannot_run)?;
    let mut stdin = child.stdin.take().expect("piped");
    let output = std::thread::scope(|scope| {
        // Written beside the wait, so that a Python that stops reading cannot block it.
        scope.spawn(move || stdin.write_all(source));
        child.wait_with_output()
    })
    .with_context(cannot_run)?;
    if !output.status.success() {
        // Python's own words, file, line and caret, as the author knows them from
        // `python app.py`; the error's one line names the last of them.
        let said = String::from_utf8_lossy(&output.stderr);
        let said = said.trim_end();
        eprintln!("{said}");
        let last = said.lines().last().unwrap_or("").trim();
        bail!("{} does not parse: {last} (Python's message above)", path.display());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// What the component is made of: the job's Python files, the SDK, the contract, the
/// world, the module, and this build of Flint.
fn digest(sources: &Sources, module: &str, world: &str) -> String {
    let mut hash = Sha256::new();
    for part in [env!("CARGO_PKG_VERSION"), COMPONENTIZE_PY, module, world, ENTRY] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    for (name, text) in SDK {
        hash.update(name);
        hash.update(text);
    }
    for (file, bytes) in sources {
        hash.update(file.to_string_lossy().as_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The `.py` files of the job's folder `dir`, read: regular files (or links to regular
/// files inside the folder), hidden folders, caches and virtual environments left out,
/// within [`MAX_SOURCE`], [`MAX_SOURCES`] and [`MAX_FILES`]. A `.py` that is a device,
/// a FIFO or a link out of the folder is refused: it would read without end, or put a
/// file of the host's into a component shipped to a cluster.
fn read_sources(dir: &Path) -> Result<Sources> {
    let root = dir.canonicalize().with_context(|| format!("cannot open {}", dir.display()))?;
    let mut found = Vec::new();
    let mut total = 0;
    visit(&root, &root, &mut found, &mut total)?;
    found.sort();
    Ok(found)
}

fn visit(root: &Path, dir: &Path, found: &mut Sources, total: &mut u64) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            let skipped = name.starts_with('.') || name == "__pycache__" || path.join("pyvenv.cfg").exists();
            if !skipped {
                visit(root, &path, found, total)?;
            }
            continue;
        }
        if !name.ends_with(".py") {
            continue;
        }
        let relative = path.strip_prefix(root).expect("under the root").to_path_buf();
        let real = path.canonicalize().with_context(|| format!("cannot read {}", path.display()))?;
        let meta = std::fs::metadata(&real)?;
        if !meta.is_file() {
            bail!(
                "{} is not a regular file (a device, a FIFO or a socket): a build reads files",
                path.display()
            );
        }
        if !real.starts_with(root) {
            bail!(
                "{} links to {}, outside the job's folder: a build reads only the folder's own files",
                path.display(),
                real.display()
            );
        }
        if found.len() == MAX_FILES {
            bail!("{} holds more than {MAX_FILES} .py files", root.display());
        }
        let bytes = read_at_most(&real, MAX_SOURCE)
            .with_context(|| format!("cannot read {}", path.display()))?
            .with_context(|| {
                format!("{} is over {} MiB: a job's source is not data", path.display(), MAX_SOURCE >> 20)
            })?;
        *total += bytes.len() as u64;
        if *total > MAX_SOURCES {
            bail!("the .py files of {} hold over {} MiB", root.display(), MAX_SOURCES >> 20);
        }
        found.push((relative, bytes));
    }
    Ok(())
}

/// The file at `path` when it holds at most `max` bytes, however its size was given.
fn read_at_most(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(max + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

/// Runs componentize-py over copies of the job's sources and the SDK in a folder of
/// their own, confined to writing in it: componentize-py imports the job's module to
/// build it (its top-level code runs in componentize-py's sandbox, with the folders on
/// its path mounted), and whatever that code tries, nothing outside the folder changes.
fn build(dir: &Path, sources: &Sources, module: &str, world: &str) -> Result<Vec<u8>> {
    let tool = std::env::var_os("FLINT_COMPONENTIZE_PY").unwrap_or_else(|| "componentize-py".into());
    let work = tempfile::tempdir().context("cannot make a folder to build the Python job in")?;
    let write = |path: &Path, bytes: &[u8]| -> Result<()> {
        std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
        Ok(std::fs::write(path, bytes)?)
    };
    for (name, text) in SDK {
        write(&work.path().join(name), text.as_bytes())?;
    }
    let job = work.path().join("job");
    for (name, bytes) in sources {
        write(&job.join(name), bytes)?;
    }
    write(
        &work.path().join("flint_entry.py"),
        ENTRY.replace("MODULE", module).replace("\"WORLD\"", &format!("\"{world}\"")).as_bytes(),
    )?;
    let scratch = work.path().join("tmp");
    std::fs::create_dir(&scratch)?;
    let out = work.path().join("job.wasm");
    eprintln!("building the Python job {} with componentize-py…", dir.join(format!("{module}.py")).display());
    let mut cmd = Command::new(&tool);
    cmd.arg("-d")
        .arg(work.path().join("wit"))
        .args(["-w", world, "componentize", "flint_entry", "-p"])
        .arg(work.path())
        .arg("-p")
        .arg(&job)
        .arg("-o")
        .arg(&out)
        .current_dir(work.path())
        .env("TMPDIR", &scratch);
    crate::confine::writes_only_under(&mut cmd, &[work.path(), Path::new("/dev/null")])?;
    let output = match cmd.output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "componentize-py is not installed, and Python jobs are built with it: pip install {COMPONENTIZE_PY} (or name it in FLINT_COMPONENTIZE_PY)"
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot run {}", tool.to_string_lossy())),
    };
    if !output.status.success() {
        // The traceback as it is, lines and all; the error stays one line.
        let (said, summary) = explain(&String::from_utf8_lossy(&output.stderr), dir);
        eprintln!("{said}");
        let last = said.lines().rfind(|l| !l.starts_with('(')).unwrap_or("").trim();
        bail!(
            "componentize-py could not build the Python job in {}: {} (the traceback above)",
            dir.display(),
            summary.as_deref().unwrap_or(last)
        );
    }
    std::fs::read(&out).context("componentize-py made no component")
}

/// What componentize-py said, for the job's author: the Python traceback of the build
/// (the job's module is imported then), its paths as the author knows them, without
/// componentize-py's own backtrace; and, for a module it could not import, which
/// package it was and why, as the error's one line.
fn explain(said: &str, dir: &Path) -> (String, Option<String>) {
    let traceback = said
        .split_once("AssertionError: ")
        .map(|(_, rest)| rest.split_once("\n\nCaused by:").map_or(rest, |(t, _)| t))
        .unwrap_or(said)
        .trim_end();
    // componentize-py mounts its paths as /0 (Flint's SDK and glue), /1 (the job's
    // folder) and /2 on (the site-packages of the Python it runs with).
    let mut text = traceback
        .replace("File \"/1/", &format!("File \"{}/", dir.display()))
        .replace("File \"/0/", "File \"<flint>/");
    for n in 2..10 {
        text = text.replace(&format!("File \"/{n}/"), "File \"<site-packages>/");
    }
    let missing =
        text.rsplit_once("No module named '").and_then(|(_, rest)| rest.split_once('\'')).map(|m| m.0);
    let Some(missing) = missing.map(str::to_owned) else { return (text, None) };
    let package = missing.split('.').next().unwrap_or(&missing).to_owned();
    let found = text.contains(&format!("File \"<site-packages>/{package}/"));
    // Every `.py` of a package found is bundled: a part of it that is missing is a
    // compiled one (numpy's `_multiarray_umath`), which a WebAssembly guest cannot load.
    let summary = if found && (missing.contains('.') || text.contains(".so")) {
        text.push_str(&format!(
            "\n(the package {package} has native code: {missing} is compiled for this machine, and a Python job runs as WebAssembly; a job can use pure-Python packages, or a build of {package} for WASI)"
        ));
        format!(
            "the package {package} has native code, which a Python job cannot load ({missing} is compiled for this machine)"
        )
    } else {
        text.push_str(&format!(
            "\n(componentize-py bundles pure-Python packages from the job's folder and from the site-packages of the Python it runs with: pip install {package} there; a package with native code must be one built for WASI)"
        ));
        format!(
            "no module named {missing} where the build looks (the job's folder and componentize-py's site-packages)"
        )
    };
    (text, Some(summary))
}

#[cfg(test)]
mod tests {
    use super::explain;
    use std::path::Path;

    /// What componentize-py 0.25.1 said building `import numpy` with numpy 2.4.6 in its
    /// site-packages (the advice numpy prints cut down to its file names).
    const NUMPY: &str = r#"Error: AssertionError: Traceback (most recent call last):
  File "/2/numpy/_core/__init__.py", line 24, in <module>
    from . import multiarray
  File "/2/numpy/_core/overrides.py", line 6, in <module>
    from numpy._core._multiarray_umath import (
ModuleNotFoundError: No module named 'numpy._core._multiarray_umath'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/0/flint_entry.py", line 5, in <module>
    import app as _job_module
  File "/1/app.py", line 1, in <module>
    import numpy
  File "/2/numpy/__init__.py", line 112, in <module>
    from numpy.__config__ import show_config
ImportError: Importing the numpy C-extensions failed.
  * _multiarray_umath.cpython-311-x86_64-linux-gnu.so
Original error was: No module named 'numpy._core._multiarray_umath'


Caused by:
    0: the rest
"#;

    #[test]
    fn a_package_with_native_code_is_named_with_the_reason() {
        let (text, summary) = explain(NUMPY, Path::new("/jobs/stats"));
        assert!(
            text.contains("File \"/jobs/stats/app.py\", line 1") && !text.contains("Caused by"),
            "{text}"
        );
        assert!(text.contains("File \"<site-packages>/numpy/__init__.py\""), "{text}");
        assert!(text.ends_with("or a build of numpy for WASI)"), "{text}");
        let summary = summary.unwrap();
        assert!(summary.starts_with("the package numpy has native code"), "{summary}");
    }

    #[test]
    fn a_module_not_found_says_where_the_build_looks() {
        let said = "Error: AssertionError: Traceback (most recent call last):\n  File \"/1/app.py\", line 1, in <module>\n    import requests\nModuleNotFoundError: No module named 'requests'\n";
        let (text, summary) = explain(said, Path::new("/jobs/web"));
        assert!(text.contains("pip install requests there"), "{text}");
        assert!(summary.unwrap().starts_with("no module named requests where the build looks"));
        let (_, none) = explain("Error: something else\n", Path::new("/jobs/web"));
        assert_eq!(none, None);
    }
}
