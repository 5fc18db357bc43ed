#!/bin/sh
# Builds the Debian package heapscope_VERSION_ARCH.deb into OUTDIR (what `make package` runs).
# Usage: scripts/package.sh OUTDIR [JOBS]
#
# The package is built in its own tree, OUTDIR/deb, configured as Debian installs (prefix
# /usr, libraries under the multiarch directory) with only the installed parts: the paths
# compiled into the command and written into the man pages and systemd unit must be the
# installed ones, which the everyday build (prefix /usr/local) does not have. CPack then
# installs that tree and builds the .deb (cmake/packaging.cmake); the .deb is copied to OUTDIR.
set -eu
out=${1:?usage: scripts/package.sh OUTDIR [JOBS]}
jobs=${2:-$(nproc)}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
tree=$out/deb

cmake -S "$src" -B "$tree" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHEAPSCOPE_PACKAGE_BUILD=ON >/dev/null
cmake --build "$tree" -j "$jobs"
rm -f "$tree"/heapscope_*.deb
(cd "$tree" && cpack -G DEB)

set -- "$tree"/heapscope_*.deb
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
    echo "scripts/package.sh: CPack made no single heapscope_*.deb in $tree" >&2
    exit 1
fi
rm -f "$out"/heapscope_*.deb
cp "$1" "$out"/
echo "scripts/package.sh: $out/$(basename "$1")"
