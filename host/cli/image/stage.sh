#!/usr/bin/env bash
# Stages the image's build context: target/image/rootfs holds the stripped `flint`
# binary, the shared libraries `ldd` says it links (at their paths, so the loader finds
# them), the CA certificates, a non-root user (65532) and /tmp; target/image/home its home, which the
# Containerfile copies in owned by that user (so staging needs no root).
# Usage: stage.sh BINARY OUTDIR
set -euo pipefail
binary=$1
out=$2
rm -rf "$out"
root="$out/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp" "$out/home/flint/work"
objcopy --strip-all "$binary" "$root/usr/local/bin/flint"
# Every library the dynamic loader will map, the loader itself included.
ldd "$binary" | awk '/=>/ { print $3 } !/=>/ && $1 ~ /^\// { print $1 }' | while read -r lib; do
    [ -f "$lib" ] || continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
# The CA certificates TLS is verified against (https:// inputs, S3): the build host's
# bundle, where rustls' native roots look for it. A corporate CA goes in that file too.
bundle=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$bundle" ]; then
    echo "stage.sh: no CA bundle at $bundle (Debian: apt-get install ca-certificates)" >&2
    exit 1
fi
mkdir -p "$root/etc/ssl/certs"
cp -L "$bundle" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nflint:x:65532:65532:flint:/home/flint:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nflint:x:65532:\n' > "$root/etc/group"
chmod 1777 "$root/tmp"
cp "$(dirname "$0")/Containerfile" "$out/Containerfile"
