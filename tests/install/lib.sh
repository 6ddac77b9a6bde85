# Sourced by tests/install/*.sh: a temporary folder removed on exit, and `install_prefix BUILD`,
# which runs `cmake --install BUILD` into $tmp/prefix and sets p (the prefix) and libdir (its
# library folder relative to p, CMAKE_INSTALL_LIBDIR: lib, or lib/x86_64-linux-gnu under /usr).
set -u
src=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

install_prefix() {
    p=$tmp/prefix
    if ! cmake --install "$1" --prefix "$p" > "$tmp/install.log" 2>&1; then
        cat "$tmp/install.log"; echo "FAIL: cmake --install $1"; exit 1
    fi
    libdir=$(sed -n 's/^libdir=\${prefix}\///p' "$(find "$p" -name backplane.pc)")
}
