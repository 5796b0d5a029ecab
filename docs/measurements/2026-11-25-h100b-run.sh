#!/bin/bash
# Device run: nvbandwidth v0.8 built here, then dmalab probe beside it.
set -x
R=$PWD; P=$PWD/nvb/prefix; mkdir -p $P /tmp/nvbsrc
for d in nvb/*.deb; do dpkg -x $d $P; done
tar xzf nvb/nvbandwidth.tar.gz -C /tmp/nvbsrc
cd /tmp/nvbsrc && mkdir -p build && cd build
[ -x nvbandwidth ] || cmake .. -DBOOST_ROOT=$P/usr -DBoost_NO_SYSTEM_PATHS=ON -DCMAKE_CUDA_ARCHITECTURES=90 > $OUT/nvb-cmake.log 2>&1 && make -j16 > $OUT/nvb-make.log 2>&1
cd $R
export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu
NVB=/tmp/nvbsrc/build/nvbandwidth
nvidia-smi -q > $OUT/nvidia-smi-q.txt 2>&1
./dmalab topo --json > $OUT/topo.json 2>&1
T="host_to_device_memcpy_ce device_to_host_memcpy_ce host_to_device_bidirectional_memcpy_ce device_to_host_bidirectional_memcpy_ce host_to_device_memcpy_sm device_to_host_memcpy_sm host_device_latency_sm"
$NVB -j -t $T > $OUT/nvbandwidth-1.json 2> $OUT/nvbandwidth-1.err
./dmalab probe --json > $OUT/probe.json 2> $OUT/probe.err
$NVB -j -t $T > $OUT/nvbandwidth-2.json 2> $OUT/nvbandwidth-2.err
./dmalab probe --input $OUT/probe.json > $OUT/probe.txt 2>&1
./dmalab probe --input $OUT/probe.json --format nvbandwidth > $OUT/probe-nvbandwidth.json 2>&1
./dmalab probe --numa --json > $OUT/numa.json 2> $OUT/numa.err
./dmalab probe --numa --input $OUT/numa.json > $OUT/numa.txt 2>&1
./dmalab topo > $OUT/topo.txt 2>&1
cd $OUT && tar czf /tmp/all.tgz . && rm -f * && mv /tmp/all.tgz $OUT/all.tgz; ls -la $OUT
