#!/bin/sh
# run-mechanisms.sh OUTDIR: system facts, then mechanisms.cu in both
# scheduling modes, then system-call counts of pageable copies. Run on the
# device machine from the repository root.
set -u
out=${1:?usage: run-mechanisms.sh OUTDIR}
mkdir -p "$out"
dir=$(dirname "$0")
{
	echo "# $(date -u +%FT%TZ) $(uname -r)"
	nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv
	lscpu
	for f in /sys/module/nvidia_uvm/parameters/*; do echo "$f=$(cat "$f")"; done
	for d in $(lspci -D -d 10de: | awk '{print $1}'); do
		echo "## lspci $d"; lspci -vvv -s "$d" | grep -E 'DevCap:|DevCtl:|MaxPayload|MaxReadReq|LnkSta:|LnkCap:'
	done
	for d in $(lspci -D | awk '/Root Port|PCI bridge/ {print $1}'); do
		echo "## bridge $d"; lspci -vvv -s "$d" | grep -E 'MaxPayload|MaxReadReq' | head -3
	done
	which perf strace ltrace || true
} > "$out/system.txt" 2>&1
nvcc -O2 -std=c++17 -Xcompiler -mavx2 -o "$out/mechanisms" "$dir/mechanisms.cu" > "$out/build.txt" 2>&1 || { cat "$out/build.txt"; exit 1; }
"$out/mechanisms" spin > "$out/spin.txt" 2>&1
"$out/mechanisms" blocking > "$out/blocking.txt" 2>&1
if command -v strace > /dev/null; then
	for w in none d2h256 h2d256; do
		strace -f -c -o "$out/strace-$w.txt" "$out/mechanisms" blocking $w > /dev/null 2>&1
	done
fi
if command -v perf > /dev/null; then
	perf record -g -o "$out/perf-d2h.data" "$out/mechanisms" spin d2h256 > /dev/null 2>&1 &&
		perf report -i "$out/perf-d2h.data" --stdio --no-children 2>/dev/null | head -80 > "$out/perf-d2h.txt"
	perf record -g -o "$out/perf-h2d.data" "$out/mechanisms" spin h2d256 > /dev/null 2>&1 &&
		perf report -i "$out/perf-h2d.data" --stdio --no-children 2>/dev/null | head -80 > "$out/perf-h2d.txt"
	rm -f "$out"/perf-*.data
fi
rm -f "$out/mechanisms"
tail -3 "$out/spin.txt" "$out/blocking.txt"
