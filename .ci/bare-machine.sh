#!/usr/bin/env bash
# CI step: the README's two commands, as written, on a bare Debian 12.
#
# A fresh `debootstrap --variant=minbase bookworm` root (no make, no compiler, no CMake, no
# Python), a clean clone of this repository's HEAD inside it, and then exactly
#     ./make.sh run && ./make.sh check
# as root in a chroot with an empty environment. Anything the build or the suite needs that
# scripts/install-deps.sh does not install fails here, however warm the CI machine is; and since
# `make check` ends with the skip summary (tests/skip_summary.py), so does a test that must run
# here and skipped (a failed pip install once made test_gguf_write skip in such a chroot).
#
# Caches (outside the repository, BP_CI_CACHE, default ~/.cache/backplane-ci), none of which
# installs anything inside the chroot:
#   - the pristine minbase root as a tarball, straight from debootstrap, rebuilt after 7 days;
#   - apt's downloaded .deb files and pip's download cache, bind-mounted into the chroot: apt-get
#     and pip still install every package, they only skip the download.
# Needs root (debootstrap, mount, chroot) and network to the Debian mirror and PyPI.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${BP_CI_CACHE:-$HOME/.cache/backplane-ci}
suite=bookworm
[ "$(id -u)" = 0 ] || { echo "bare-machine: FAIL: needs root (debootstrap, mount, chroot)" >&2; exit 1; }
# debootstrap is CI tooling, not something the project needs: installed here when missing.
if ! command -v debootstrap >/dev/null; then
    echo "bare-machine: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap > /dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap; }
fi
for tool in debootstrap chroot mount git python3; do
    command -v $tool >/dev/null || { echo "bare-machine: FAIL: $tool not found" >&2; exit 1; }
done
# The mirror the host's apt uses (deb822 .sources or a one-line sources.list).
mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*debian\)[[:space:]]*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb[[:space:]]\+\(http[^[:space:]]*debian\)[[:space:]].*/\1/p' /etc/apt/sources.list 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}

mkdir -p "$cache/apt-archives/partial" "$cache/pip"
start=$(date +%s)
tarball=$cache/$suite-minbase.tar.gz
if [ ! -s "$tarball" ] || [ -n "$(find "$tarball" -mtime +7)" ]; then
    echo "bare-machine: debootstrap --variant=minbase $suite from $mirror (cached as $tarball)"
    fresh=$(mktemp -d /tmp/bp-debootstrap.XXXXXX)
    debootstrap --variant=minbase $suite "$fresh" "$mirror" > "$cache/debootstrap.log" 2>&1 ||
        { tail -20 "$cache/debootstrap.log"; rm -rf "$fresh"; echo "bare-machine: FAIL: debootstrap" >&2; exit 1; }
    tar -C "$fresh" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$fresh"
fi

root=$(mktemp -d /tmp/bp-bare.XXXXXX)
mounts=()
cleanup() {
    for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
        umount -R "${mounts[i]}" 2>/dev/null || umount -R -l "${mounts[i]}" 2>/dev/null || true
    done
    rm -rf --one-file-system "$root"
}
trap cleanup EXIT
tar -C "$root" -xzf "$tarball"
# /dev and /sys recursively (so /dev/pts and /dev/shm come along) and as slaves: nothing mounted
# or unmounted under the chroot propagates back to the host's own /dev.
rbind() { mkdir -p "$root$2"; mount --rbind "$1" "$root$2"; mount --make-rslave "$root$2"; mounts+=("$root$2"); }
bind() { mkdir -p "$root$2"; mount --bind "$1" "$root$2"; mounts+=("$root$2"); }
mount -t proc proc "$root/proc"; mounts+=("$root/proc")
rbind /sys /sys
rbind /dev /dev
bind "$cache/apt-archives" /var/cache/apt/archives
bind "$cache/pip" /root/.cache/pip
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The host's apt sources (same mirror, plus updates and security), instead of debootstrap's one line.
if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
    rm -f "$root/etc/apt/sources.list"
    cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/"
fi

# dpkg without an fsync per file: the chroot is thrown away, and unpacking LLVM/clang for lavapipe
# and PoCL otherwise dominates this step. Which packages get installed is unchanged.
echo force-unsafe-io > "$root/etc/dpkg/dpkg.cfg.d/bp-ci-unsafe-io"

# The site's network trust, which a machine gets from whoever provisions it, not from our install
# script: behind a TLS-inspecting egress proxy (as here) pip fails certificate checks without the
# proxy's CA. The CA files the host added (/usr/local/share/ca-certificates, folded into the
# system bundle when the chroot's apt installs ca-certificates) and its /etc/pip.conf are copied.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"

# A clean clone of HEAD, as CI has it (nothing from this worktree's build or caches).
git clone -q --no-hardlinks "$repo" "$root/root/backplane"
set +o pipefail # the chroot's status, not tee's, decides (PIPESTATUS)
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c 'cd /root/backplane && t0=$(date +%s) && ./make.sh run && t1=$(date +%s) && ./make.sh check &&
        echo "bare-machine: ./make.sh run (installs, builds, runs) $(($t1 - $t0)) s; ./make.sh check $(($(date +%s) - $t1)) s"' \
    2>&1 | tee "$cache/last-run.log"
rc=${PIPESTATUS[0]}
set -o pipefail
took=$(( $(date +%s) - start ))
echo "bare-machine: ./make.sh run && ./make.sh check in a fresh minbase $suite chroot: exit $rc, $((took / 60)) min $((took % 60)) s"
exit "$rc"

