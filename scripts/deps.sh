#!/bin/sh
# Installs the Debian packages heapscope needs that are missing on this machine.
# Usage: scripts/deps.sh [build|bench]   (build: compile + test; bench: also the peer tools)
# As root it runs apt-get; otherwise it prints the apt-get line to run.
set -eu
set_name=${1:-build}

# chromium: the HTML flame graph test renders the page in headless Chromium. nodejs: the
# profiler names JavaScript functions from V8's perf map (a test runs a Node.js script).
# golang-go: a test opens heapscope's pprof profiles with Go's own pprof (go tool pprof).
# groff-base, man-db: the man page tests render every page. dpkg-dev, file: `make package`
# (dpkg-shlibdeps computes Depends; CPack finds the ELF files with file). gdb: a hung
# e2e.malloc_debug_fork run prints every thread's stack before it is killed.
packages="gcc make cmake pkg-config gdb libunwind-dev libdw-dev libelf-dev zlib1g-dev python3 clang libclang-rt-14-dev chromium nodejs golang-go groff-base man-db dpkg-dev file"
if [ "$set_name" = bench ]; then
    packages="$packages valgrind heaptrack libjemalloc2 google-perftools libgoogle-perftools-dev electric-fence duma sqlite3 lua5.4"
fi

missing=""
for p in $packages; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "heapscope: missing Debian packages:$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
    echo "heapscope: run as root: apt-get install$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when they are absent or older than a day.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
    apt-get update -qq
fi
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
