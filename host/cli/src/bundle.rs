//! Resolving `<JOB>`: an example's folder (built with cargo), a Python job (a `.py`
//! file, or a folder with `app.py`; built with componentize-py), a component file, or
//! a bundle file made by `flint bundle`.

use anyhow::{Context, Result, bail};
pub use flint_proto::Bundle;
use flint_proto::Manifest;
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

/// Builds the crate in `dir` for `wasm32-wasip2` and returns the component cargo made.
fn build_component(dir: &Path) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--message-format=json-render-diagnostics",
        ])
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
