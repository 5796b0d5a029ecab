#!/bin/sh
# run-final.sh OUTDIR: the measurements the h200-pcie calibration and
# predictions of issue 5 rest on: PCIe config space (MPS, MRRS), the
# copy-out of a staging ring by one thread three ways, and the whole
# dmalab probe. Run on the device machine from the repository root with
# ./dmalab built there or carried (CGO_ENABLED=0 go build -o dmalab ./cmd/dmalab).
set -u
out=${1:?usage: run-final.sh OUTDIR}
mkdir -p "$out"
dir=$(dirname "$0")
python3 "$dir/pcie-config.py" > "$out/pcie-config.txt" 2>&1
nvcc -O2 -std=c++17 -Xcompiler -mavx2 -o "$out/mechanisms" "$dir/mechanisms.cu" > "$out/build.txt" 2>&1 || { cat "$out/build.txt"; exit 1; }
"$out/mechanisms" spin streamout > "$out/streamout.txt" 2>&1
rm -f "$out/mechanisms"
./dmalab probe --json --sizes 4KiB,64KiB,1MiB,16MiB,256MiB,1GiB > "$out/probe.json" 2> "$out/probe.err"
./dmalab probe --input "$out/probe.json" > "$out/probe.txt" 2>&1
cat "$out/pcie-config.txt" "$out/streamout.txt"; grep -E "host_memcpy|pageable" "$out/probe.txt" | head -40
