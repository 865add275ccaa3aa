//! Builds that run a job's code, confined: the process (and everything it starts) may
//! write nowhere but the folders it is given. On Linux this is Landlock, which any
//! process may ask of the kernel for itself, with no privilege; where the kernel cannot
//! enforce it the build is refused, unless `FLINT_PYTHON_UNCONFINED=1` says to build
//! without it.

use anyhow::Result;
use std::path::Path;
use std::process::Command;

/// The variable that lets a build run unconfined where the kernel cannot confine it.
pub const UNCONFINED: &str = "FLINT_PYTHON_UNCONFINED";

/// Makes `cmd`, once spawned, unable to create, write, truncate, rename or remove any
/// file outside `writable` (reading stays as it was). Errors, before anything runs,
/// when the kernel cannot enforce that.
pub fn writes_only_under(cmd: &mut Command, writable: &[&Path]) -> Result<()> {
    if std::env::var_os(UNCONFINED).is_some_and(|v| v == "1") {
        return Ok(());
    }
    imp::writes_only_under(cmd, writable)
}

#[cfg(target_os = "linux")]
mod imp {
    use anyhow::{Context, Result};
    use landlock::{
        ABI, AccessFs, CompatLevel, Compatible, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
        path_beneath_rules,
    };
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::Command;

    pub fn writes_only_under(cmd: &mut Command, writable: &[&Path]) -> Result<()> {
        // Writing files is confined on every kernel with Landlock (5.13 on); renames
        // across folders, truncation and device ioctls where the kernel knows them.
        let ruleset = landlock::Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_write(ABI::V1))
            .and_then(|r| r.set_compatibility(CompatLevel::BestEffort).handle_access(AccessFs::from_write(ABI::V5)))
            .and_then(|r| r.create())
            .and_then(|r| r.add_rules(path_beneath_rules(writable, AccessFs::from_write(ABI::V5))))
            .with_context(|| {
                format!(
                    "this kernel cannot confine the build to its own folder (Landlock, Linux 5.13 on, enabled in its lsm= list); set {}=1 to build with the job's import-time code able to write wherever you can",
                    super::UNCONFINED
                )
            })?;
        let mut ruleset = Some(ruleset);
        // SAFETY: between fork and exec this makes two system calls (prctl and
        // landlock_restrict_self) on a ruleset made before the fork; nothing allocates.
        unsafe {
            cmd.pre_exec(move || {
                let Some(ruleset) = ruleset.take() else { return Ok(()) };
                match ruleset.restrict_self() {
                    Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
                    Ok(_) => Err(std::io::Error::from_raw_os_error(libc::EOPNOTSUPP)),
                    Err(_) => Err(std::io::Error::last_os_error()),
                }
            });
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use anyhow::{Result, bail};
    use std::path::Path;
    use std::process::Command;

    pub fn writes_only_under(_: &mut Command, _: &[&Path]) -> Result<()> {
        bail!(
            "builds that run a job's code are confined with Linux's Landlock, which this system lacks; set {}=1 to build unconfined",
            super::UNCONFINED
        )
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_confined_command_writes_in_its_folder_and_nowhere_else() {
        let (inside, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let script = format!(
            "echo in > {in}/a; echo out > {out}/b; mkdir {out}/c; rm -f {out}/keep; echo ok > {in}/done",
            in = inside.path().display(),
            out = outside.path().display()
        );
        std::fs::write(outside.path().join("keep"), "kept").unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]);
        writes_only_under(&mut cmd, &[inside.path()]).unwrap();
        let out = cmd.output().unwrap();
        assert_eq!(std::fs::read_to_string(inside.path().join("done")).unwrap(), "ok\n");
        assert!(inside.path().join("a").exists());
        assert!(!outside.path().join("b").exists() && !outside.path().join("c").exists(), "{out:?}");
        assert_eq!(std::fs::read_to_string(outside.path().join("keep")).unwrap(), "kept");
    }
}
