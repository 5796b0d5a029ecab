#!/bin/bash
# scale-bench.sh BINDIR OUT: issue 17's benchmarks, before and after, on
# two dedicated cores. BINDIR holds test binaries built here with
#   CGO_ENABLED=0 go test -c -o BINDIR/PKG-VERSION.test ./PKG
# for PKG in nic scenario fabric and VERSION in before after (the before
# from a worktree of the older commit). Run from the repository root;
# each binary runs from its package's directory. ROUNDS (default 3) sets
# the alternating rounds; FABRIC_ONLY=1 runs only the fabric's benchmarks. Rounds alternate the
# two versions; every figure is the benchmark's own b.ReportMetric line.
set -u
bin=$(realpath "$1"); out=$2
mkdir -p "$out"
cores=${CORES:-2,3}
run() { # PKG VERSION ARGS...
  local pkg=$1 v=$2; shift 2
  (cd "$pkg" && GOMAXPROCS=2 taskset -c "$cores" "$bin/$pkg-$v.test" -test.run '^$' -test.benchmem "$@") 2>&1 |
    grep -E '^Benchmark' | sed "s/^/$v /"
}
{
  echo "# $(date -u +%FT%TZ) $(nproc) cores, taskset -c $cores; $(grep -m1 'model name' /proc/cpuinfo)"
  for round in $(seq "${ROUNDS:-3}"); do
    for v in before after; do
      [ -n "${FABRIC_ONLY:-}" ] && { run fabric $v -test.bench 'ClosedLoop/16ep-4sw/flows=1000$' -test.benchtime 3x; continue; }
      run nic $v -test.bench 'RxPacket$' -test.benchtime 300000x
      run nic $v -test.bench 'TxPacket$' -test.benchtime 300000x
      run scenario $v -test.bench 'UMOversubscribeH200$' -test.benchtime 1x
      run fabric $v -test.bench 'ClosedLoop/16ep-4sw/flows=1000$' -test.benchtime 3x
    done
  done
  for v in before after; do
    [ -z "${FABRIC_ONLY:-}" ] && run nic $v -test.bench 'RxPacketsLarge$' -test.benchtime 1x
    run fabric $v -test.bench 'ClosedLoop/16ep-4sw/flows=10000$' -test.benchtime 3x
    run fabric $v -test.bench 'ClosedLoop/256ep-16sw/flows=1000$' -test.benchtime 3x
  done
} | tee "$out/scale-bench.txt"
