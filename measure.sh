#!/bin/sh
lib=$1
med() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
t() { # label opts cmd...
  label=$1; o=$2; shift 2
  for i in 1 2 3; do s=$(date +%s%N); if [ -n "$o" ]; then LD_PRELOAD=$lib LIBC_DEBUG_MALLOC_OPTIONS="$o" "$@" >/dev/null 2>/tmp/lk/m.err; else "$@" >/dev/null 2>&1; fi; e=$(date +%s%N); echo $(((e-s)/1000000)); done | med | sed "s/^/$label [$o]: /"
}
for prog in perl node gcc; do
  case $prog in
    perl) set -- perl /tmp/lk/big2.pl;;
    node) set -- node -e "let a=[]; for(let i=0;i<20000;i++) a.push(Buffer.alloc(100)); console.log(a.length)";;
    gcc) set -- gcc -O2 -c -o /tmp/lk/x.o /tmp/lk/x.c;;
  esac
  t $prog "" "$@"
  for o in "leak_track" "backtrace" "leak_track backtrace" "leak_track=100000000" "leak_track=100000000 backtrace"; do t $prog "$o" "$@"; done
done
