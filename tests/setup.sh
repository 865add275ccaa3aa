#!/usr/bin/env bash
# What `make demo` and `make test` need beyond a Rust toolchain, set up where it is
# missing, so that both commands work on a fresh machine with nothing run by hand.
#
#   tests/setup.sh build   the wasm32-wasip2 target the examples compile to
#   tests/setup.sh test    that, and the tools the test suite drives
#   tests/setup.sh bench   that, and the peers `make bench` measures against (PySpark)
#
# Python tools go into the repository's own folder (target/pyvenv). System packages
# (podman, chromium, ...) are installed with apt-get when running as root on Debian or
# Ubuntu; anywhere else the script stops and names what to install and how.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-test}

# rustup installs a toolchain file's `targets` only when it installs the toolchain
# itself: on a machine that already has the pinned compiler, the target must be added.
if command -v rustup >/dev/null 2>&1 && ! rustc --version >/dev/null 2>&1; then
    echo "setup: installing the toolchain rust-toolchain.toml pins"
    rustup toolchain install
fi
if ! rustc --print sysroot >/dev/null 2>&1; then
    echo "setup: rustc is not installed; install rustup from https://rustup.rs" >&2
    exit 1
fi
if [ ! -d "$(rustc --print sysroot)/lib/rustlib/wasm32-wasip2" ]; then
    if ! command -v rustup >/dev/null 2>&1; then
        echo "setup: the wasm32-wasip2 target is missing and rustup is not here to add it;" >&2
        echo "       install the target for $(rustc --version) by hand" >&2
        exit 1
    fi
    echo "setup: adding the wasm32-wasip2 target (rust-toolchain.toml names it)"
    rustup target add wasm32-wasip2
fi
[ "$what" = build ] && exit 0

# System tools: podman builds the image (tests/image.rs) and objcopy strips the binary
# in it; Chromium and chromedriver drive the status page (tests/ui.rs, tests/cluster.rs);
# python3-venv holds the PyPI tools below.
packages=()
command -v podman >/dev/null 2>&1 || packages+=(podman)
command -v objcopy >/dev/null 2>&1 || packages+=(binutils)
[ -s /etc/ssl/certs/ca-certificates.crt ] || packages+=(ca-certificates)
command -v chromium >/dev/null 2>&1 || packages+=(chromium)
command -v chromedriver >/dev/null 2>&1 || packages+=(chromium-driver)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || packages+=(python3-venv)
if [ ${#packages[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing ${packages[*]} (apt-get)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
    else
        echo "setup: the tests need these packages, which are not installed: ${packages[*]}" >&2
        echo "       on Debian or Ubuntu: sudo apt-get install ${packages[*]}" >&2
        echo "       (then run make test again)" >&2
        exit 1
    fi
fi

# From PyPI, into the repository's own folder: kubernetes-validate checks `flint k8s
# manifests` offline (tests/k8s.rs); moto's server is the S3 that `s3://` inputs are
# read from (tests/cluster.rs), with boto3 to fill it; componentize-py builds Python
# jobs (tests/python.rs), the release host/cli/src/python.rs names.
venv=target/pyvenv
componentize=$(sed -n 's/^pub const COMPONENTIZE_PY: &str = "\(.*\)";/\1/p' host/cli/src/python.rs)
if [ ! -x $venv/bin/kubernetes-validate ] || [ ! -x $venv/bin/moto_server ] \
    || ! $venv/bin/pip show componentize-py 2>/dev/null | grep -x "Version: ${componentize#*==}" >/dev/null; then
    echo "setup: installing kubernetes-validate, moto and $componentize into $venv (PyPI)"
    python3 -m venv $venv
    $venv/bin/pip install -q kubernetes-validate 'moto[server]' "$componentize"
fi
[ "$what" = bench ] || exit 0

# PySpark for `make bench`'s Python figures, in a folder of its own (it is large), and
# the Java it runs on.
if ! command -v java >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing default-jre-headless (apt-get) for PySpark"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless
    else
        echo "setup: make bench needs Java for PySpark: sudo apt-get install default-jre-headless" >&2
        exit 1
    fi
fi
spark=target/benchvenv
if [ ! -x $spark/bin/pyspark ]; then
    echo "setup: installing pyspark into $spark (PyPI)"
    python3 -m venv $spark
    $spark/bin/pip install -q pyspark==3.5.3
fi
