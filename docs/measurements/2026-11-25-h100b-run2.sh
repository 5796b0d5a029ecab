#!/bin/bash
R=$PWD; P=$PWD/nvb/prefix; export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu
NVB=/tmp/nvbsrc/build/nvbandwidth
for i in 1 2 3; do
  $NVB -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce > $OUT/nvb-r$i.json 2>&1
  ./dmalab probe --families ce_copy --sizes 256MiB,1GiB > $OUT/probe-r$i.txt 2>&1
done
cd $OUT && tar czf /tmp/all.tgz . && rm -f * && mv /tmp/all.tgz $OUT/all.tgz
