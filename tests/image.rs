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

/// A driver on the host (with `env`) and an executor chrooted into the image's `rootfs`,
/// registered: the driver, its URL and the executor.
fn driver_and_chrooted_executor(
    dir: &std::path::Path,
    rootfs: &std::path::Path,
    env: &[(&str, &std::path::Path)],
) -> (Proc, String, Proc) {
    let url_file = dir.join("url");
    let mut driver_cmd = command(&["driver", "--url-file", url_file.to_str().unwrap(), "--ui-port", "0"]);
    driver_cmd.env("FLINT_SECRET", SECRET).envs(env.iter().copied());
    let driver = Proc::spawn(driver_cmd, dir.join("driver.log"));
    let url = eventually(Duration::from_secs(20), || read_url(&url_file)).expect("the driver prints its URL");
    let mut executor_cmd = Command::new("chroot");
    executor_cmd
        .arg(rootfs)
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
    let executor = Proc::spawn(executor_cmd, dir.join("executor.log"));
    let registered =
        eventually(Duration::from_secs(20), || executor.log_text().contains("registered").then_some(()));
    assert!(registered.is_some(), "{}\n{}", executor.log_text(), driver.log_text());
    (driver, url, executor)
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
    let (_driver, url, executor) = driver_and_chrooted_executor(dir.path(), &rootfs, &[]);
    let mut submit =
        command(&["submit", "--driver-url", &url, &wasm("noop"), "--partitions", "16", "--json"]);
    let out = submit.env("FLINT_SECRET", SECRET).output().unwrap();
    assert!(out.status.success(), "{}\n{}", lossy(&out.stderr), executor.log_text());
    assert_eq!(json(&out)["result"], 16);
}

/// An HTTPS server on loopback answering HEAD and ranged GETs of `body`, with a
/// certificate `ca` signed: its port, and the process.
const HTTPS_RANGES: &str = r#"
import http.server, ssl, sys
body = open(sys.argv[1], "rb").read()
class Ranges(http.server.BaseHTTPRequestHandler):
    def head(self, status, length, extra=()):
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
    def do_HEAD(self):
        self.head(200, len(body))
    def do_GET(self):
        asked = self.headers.get("Range")
        if not asked:
            self.head(200, len(body)); self.wfile.write(body); return
        a, b = asked[len("bytes="):].split("-")
        a, b = int(a), min(int(b) if b else len(body) - 1, len(body) - 1)
        self.head(206, b - a + 1, [("Content-Range", f"bytes {a}-{b}/{len(body)}")])
        self.wfile.write(body[a:b + 1])
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ranges)
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(sys.argv[2], sys.argv[3])
server.socket = tls.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The image verifies TLS against the CA bundle it carries: an executor chrooted into
/// it reads an `https://` input from a server whose CA was added to that bundle, as an
/// operator adds a company's CA.
#[test]
fn the_image_verifies_https_inputs_against_its_own_ca_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("context");
    run(Command::new("bash").arg(root().join("host/cli/image/stage.sh")).arg(bin()).arg(&context));
    let rootfs = context.join("rootfs");
    let bundle = rootfs.join("etc/ssl/certs/ca-certificates.crt");
    let shipped = std::fs::read_to_string(&bundle).expect("the image carries a CA bundle");
    assert!(shipped.matches("BEGIN CERTIFICATE").count() > 50, "the public CAs are in it");

    // A CA of the test's own, added to the image's bundle, and a server it signed.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages =
        vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
    let ca = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("server.pem"), dir.path().join("server.key"));
    std::fs::write(&cert_file, params.signed_by(&key, &ca).unwrap().pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    std::fs::write(&bundle, format!("{shipped}\n{ca_pem}")).unwrap();
    // The driver runs on the host, which trusts the test's CA through SSL_CERT_FILE.
    let host_bundle = dir.path().join("host-bundle.pem");
    std::fs::write(&host_bundle, format!("{shipped}\n{ca_pem}")).unwrap();

    let corpus = dir.path().join("corpus.txt");
    common::corpus(&corpus, 1 << 20);
    let server = Command::new("python3")
        .args(["-c", HTTPS_RANGES])
        .args([&corpus, &cert_file, &key_file])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed when the test ends, however it ends.
    let mut server = Proc { child: server, log: dir.path().join("server.log") };
    let mut port = String::new();
    let said = server.child.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(said), &mut port).unwrap();
    // By address: the image holds no /etc/hosts to name loopback by.
    let input = format!("https://127.0.0.1:{}/corpus.txt", port.trim());

    let host_trust = [("SSL_CERT_FILE", host_bundle.as_path())];
    let (_driver, url, executor) = driver_and_chrooted_executor(dir.path(), &rootfs, &host_trust);

    let mut submit = command(&["submit", "--driver-url", &url, "examples/word-count", "--input", &input]);
    let out = submit.args(["--partitions", "3", "--json"]).env("FLINT_SECRET", SECRET).output().unwrap();
    drop(server);
    assert!(out.status.success(), "{}\n{}", lossy(&out.stderr), executor.log_text());
    let mut local = command(&["run", "examples/word-count", "--input", corpus.to_str().unwrap(), "--json"]);
    let expected = json(&local.output().unwrap())["result"].clone();
    assert_eq!(json(&out)["result"], expected, "read over TLS from inside the image");
}
