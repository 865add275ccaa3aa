//! Resolving `<JOB>`: an example's folder (built with cargo), a Python job (a `.py`
//! file, or a folder with `app.py`; built with componentize-py), a component file, or
//! a bundle file made by `flint bundle`.

use anyhow::{Context, Result, bail};
pub use flint_proto::Bundle;
use flint_proto::Manifest;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Reads `<JOB>`: a folder with `flint.toml` (and a crate to build), a `.wasm`
/// component, or a bundle file.
pub fn open(path: &Path) -> Result<Bundle> {
    if crate::python::is_python_job(path) {
        return from_python(path);
    }
    if path.is_dir() {
        return from_folder(path);
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if Bundle::looks_like(&bytes) {
        return Bundle::decode(&bytes)
            .with_context(|| format!("{}: not a valid Flint bundle", path.display()));
    }
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "job".into());
    Ok(Bundle { manifest: Manifest { name, ..Manifest::default() }, component: bytes })
}

fn from_folder(dir: &Path) -> Result<Bundle> {
    let manifest_path = dir.join("flint.toml");
    let text = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("{} has no flint.toml: it is not a job folder", dir.display()))?;
    let manifest = Manifest::from_toml(&text)
        .with_context(|| format!("{}: invalid manifest", manifest_path.display()))?;
    let component_path = match &manifest.component {
        Some(path) => dir.join(path),
        None => build_component(dir)?,
    };
    let component = std::fs::read(&component_path)
        .with_context(|| format!("cannot read the built component {}", component_path.display()))?;
    Ok(Bundle { manifest, component })
}

/// A Python job: `app.py` in a folder, or the file named; the folder's `flint.toml`
/// when it has one.
fn from_python(path: &Path) -> Result<Bundle> {
    let (dir, module) = if path.is_dir() {
        (path.to_path_buf(), crate::python::MODULE.to_owned())
    } else {
        let module = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        (dir.to_path_buf(), module)
    };
    // Absolute, so that a traceback names the job's files as its author finds them.
    let dir = dir.canonicalize().with_context(|| format!("cannot open {}", dir.display()))?;
    let manifest_path = dir.join("flint.toml");
    let manifest = match std::fs::read_to_string(&manifest_path) {
        Ok(text) => Manifest::from_toml(&text)
            .with_context(|| format!("{}: invalid manifest", manifest_path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let folder = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = if module == crate::python::MODULE {
                folder.unwrap_or(module.clone())
            } else {
                module.clone()
            };
            Manifest { name, ..Manifest::default() }
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", manifest_path.display())),
    };
    if manifest.component.is_some() {
        bail!("{}: a Python job is built from its source; remove `component`", manifest_path.display());
    }
    let component = crate::python::component(&dir, &module)?;
    Ok(Bundle { manifest, component })
}

/// The target jobs are built for.
pub const TARGET: &str = "wasm32-wasip2";

/// Whether the toolchain that builds the crate in `dir` (its `rust-toolchain.toml`'s,
/// as rustup picks it there, or `RUSTC`) has the standard library for [`TARGET`]: a
/// build without it fails only after compiling every dependency. `None` when rustc
/// cannot say (cargo will).
pub fn has_target(dir: &Path) -> Option<bool> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc).args(["--print", "sysroot"]).current_dir(dir).output().ok()?;
    let sysroot = String::from_utf8(out.stdout).ok().filter(|_| out.status.success())?;
    Some(Path::new(sysroot.trim()).join("lib/rustlib").join(TARGET).is_dir())
}

/// Builds the crate in `dir` for `wasm32-wasip2` and returns the component cargo made.
/// On a terminal it says so and cargo shows its progress; elsewhere cargo is quiet.
fn build_component(dir: &Path) -> Result<PathBuf> {
    if has_target(dir) == Some(false) {
        bail!(
            "the Rust toolchain for {} cannot build for {TARGET}: add it with `rustup target add {TARGET}` (run in that folder, so that rustup adds it to the toolchain the folder uses)",
            dir.display()
        );
    }
    let terminal = std::io::stderr().is_terminal();
    if terminal {
        eprintln!("flint: building {} for {TARGET} with cargo (release)", dir.display());
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cargo = Command::new(cargo);
    cargo.args(["build", "--release", "--target", TARGET, "--message-format=json-render-diagnostics"]);
    if !terminal {
        cargo.arg("--quiet");
    }
    let output = cargo
        .current_dir(dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run cargo to build {}", dir.display()))?;
    if !output.status.success() {
        bail!("cargo could not build the job in {}", dir.display());
    }
    let mut found = None;
    for line in output.stdout.split(|b| *b == b'\n') {
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact"
            || message["manifest_path"] != dir.canonicalize()?.join("Cargo.toml").to_string_lossy().as_ref()
        {
            continue;
        }
        let files = message["filenames"].as_array().into_iter().flatten();
        found = files.filter_map(|f| f.as_str()).find(|f| f.ends_with(".wasm")).map(PathBuf::from).or(found);
    }
    found.with_context(|| {
        format!(
            "building {} made no .wasm component: the crate must be a cdylib; add `[lib] crate-type = [\"cdylib\", \"rlib\"]` to its Cargo.toml",
            dir.display()
        )
    })
}
