#!/bin/sh
# `make demo`: runs a program with a one-byte heap overflow, first alone (nothing is noticed),
# then under `heapscope debug`, which reports the corrupted rear guard Android-style.
set -eu
build=${1:-build}
demo_bin="$build/demo/overflow"
heapscope="$build/bin/heapscope"

echo "== 1. The program alone: the overflow goes unnoticed"
echo "\$ $demo_bin"
"$demo_bin"
echo
echo "== 2. Under heapscope's malloc debug (guards around every allocation, and each"
echo "   allocation's stack: the report names where the block was allocated too small)"
echo "\$ heapscope debug -o 'guard backtrace' -- $demo_bin"
"$heapscope" debug -o "guard backtrace" -- "$demo_bin"
echo
echo "== 3. The same with abort_on_error: the program stops at the first error"
echo "\$ heapscope debug -o 'guard abort_on_error' -- $demo_bin"
status=0
"$heapscope" debug -o "guard abort_on_error" -- "$demo_bin" || status=$?
echo "(exit status $status: killed by SIGABRT)"
echo
echo
echo "== 4. A leak: a list whose head is dropped. heapscope leaks reports what is unreachable"
echo "\$ heapscope leaks --contents -- $build/demo/leak"
"$heapscope" leaks --contents -- "$build/demo/leak"
echo
echo "== 5. A heap dump at exit, turned into a report and a flame graph"
dir=$(mktemp -d)
echo "\$ heapscope debug -o 'backtrace backtrace_dump_on_exit backtrace_dump_prefix=$dir/heap' -- $build/demo/leak"
"$heapscope" debug -o "backtrace backtrace_dump_on_exit backtrace_dump_prefix=$dir/heap" -- "$build/demo/leak"
echo "\$ heapscope report --top 3 $dir/heap.*.exit.txt"
"$heapscope" report -q --top 3 "$dir"/heap.*.exit.txt
"$heapscope" report -q -o "$dir/heap.html" "$dir"/heap.*.exit.txt
echo "(flame graph written to $dir/heap.html: open it in a browser)"
echo
echo "Next: 'heapscope COMMAND --help', docs/malloc_debug.md, docs/memunreachable.md and"
echo "docs/report.md."
