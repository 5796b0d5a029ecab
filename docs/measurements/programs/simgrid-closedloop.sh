#!/bin/sh
# Builds simgrid-closedloop.cpp against an installed SimGrid (Debian's
# libsimgrid-dev 3.32) and runs it in both of SimGrid's update modes on the
# workloads of fabric's BenchmarkClosedLoop. Each line it prints holds the
# simulated end (to compare with the benchmark's sim-s) and the CPU
# seconds of the simulation.
#
# Usage: simgrid-closedloop.sh [SWITCHES PER_SWITCH FLOWS]...
# (default: 4 4 1000  4 4 10000  16 16 1000)
set -eu
here=$(dirname "$0")
bin=${TMPDIR:-/tmp}/simgrid-closedloop
g++ -O2 -std=c++17 -o "$bin" "$here/simgrid-closedloop.cpp" -lsimgrid
[ $# -gt 0 ] || set -- 4 4 1000 4 4 10000 16 16 1000
while [ $# -ge 3 ]; do
	for optim in Full Lazy; do
		printf 'optim=%s ' "$optim"
		"$bin" "$1" "$2" "$3" 20000 --cfg=network/model:CM02 --cfg=network/crosstraffic:0 \
			--cfg=network/optim:$optim --log=root.thres:warning
	done
	shift 3
done
