//! The container image as `make image` builds it (podman, `FROM scratch`: the stripped
//! binary and the libraries it links), and an executor taken out of it: the image's
//! filesystem exported and run under `chroot` (containers cannot run on these machines),
//! registering with a driver on loopback and running a job.

mod common;

use common::{Proc, bin, command, eventually, json, lossy, read_url, root, wasm};
use std::process::{Command, Stdio};
use std::time::Duration;

const SECRET: &str = "image-test-secret";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", lossy(&out.stderr));
    lossy(&out.stdout).trim().to_owned()
}

/// Removes the test's image and container whatever happens.
struct Cleanup(String, Option<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(container) = &self.1 {
            let _ = Command::new("podman").args(["rm", "-f", container]).output();
        }
        let _ = Command::new("podman").args(["rmi", "-f", &self.0]).output();
    }
}

#[test]
fn the_image_holds_an_executor_that_registers_and_runs_a_job() {
    // .ci/run installs podman; without it this fails, it does not skip.
    let podman = Command::new("podman").arg("--version").output();
    assert!(
        podman.is_ok_and(|o| o.status.success()),
        "podman builds the image: install it (Debian: apt-get install podman)"
    );
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("context");
    run(Command::new("bash").arg(root().join("host/cli/image/stage.sh")).arg(bin()).arg(&context));
    let tag = format!("localhost/flint-image-test:{}", std::process::id());
    let mut cleanup = Cleanup(tag.clone(), None);
    run(Command::new("podman")
        .args(["build", "-q", "-t", &tag, "-f"])
        .arg(context.join("Containerfile"))
        .arg(&context));
    let container = run(Command::new("podman").args(["create", &tag]));
    cleanup.1 = Some(container.clone());
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    let mut export =
        Command::new("podman").args(["export", &container]).stdout(Stdio::piped()).spawn().unwrap();
    run(Command::new("tar").arg("-x").arg("-C").arg(&rootfs).stdin(export.stdout.take().unwrap()));
    assert!(export.wait().unwrap().success(), "podman export failed");

    // Nothing in it but the binary, what it links and a non-root user.
    assert!(rootfs.join("usr/local/bin/flint").is_file());
    assert!(!rootfs.join("bin/sh").exists(), "no shell in the image");
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(passwd.contains("flint:x:65532:65532"), "{passwd}");
    use std::os::unix::fs::MetadataExt;
    let home = std::fs::metadata(rootfs.join("home/flint/work")).unwrap();
    assert_eq!((home.uid(), home.gid()), (65532, 65532), "the user's home is its own");
    let config = run(Command::new("podman").args(["image", "inspect", "--format", "{{.Config.User}}", &tag]));
    assert_eq!(config, "65532:65532");

    // A driver on the host; an executor from the image, chrooted into it.
    let url_file = dir.path().join("url");
    let mut driver_cmd = command(&["driver", "--url-file", url_file.to_str().unwrap()]);
    driver_cmd.env("FLINT_SECRET", SECRET);
    let driver = Proc::spawn(driver_cmd, dir.path().join("driver.log"));
    let url = eventually(Duration::from_secs(20), || read_url(&url_file)).expect("the driver prints its URL");
    let mut executor_cmd = Command::new("chroot");
    executor_cmd
        .arg(&rootfs)
        .args([
            "/usr/local/bin/flint",
            "executor",
            "--driver-url",
            &url,
            "--work-dir",
            "/tmp",
            "--cores",
            "2",
        ])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("FLINT_SECRET", SECRET);
    let executor = Proc::spawn(executor_cmd, dir.path().join("executor.log"));
    let registered =
        eventually(Duration::from_secs(20), || executor.log_text().contains("registered").then_some(()));
    assert!(registered.is_some(), "{}\n{}", executor.log_text(), driver.log_text());
    let mut submit =
        command(&["submit", "--driver-url", &url, &wasm("noop"), "--partitions", "16", "--json"]);
    let out = submit.env("FLINT_SECRET", SECRET).output().unwrap();
    assert!(out.status.success(), "{}\n{}", lossy(&out.stderr), executor.log_text());
    assert_eq!(json(&out)["result"], 16);
}
