#!/bin/bash
# ab.sh LIB: virtual time and host bytes of the 4 caching nets at 1/2 (dyn)
export LD_LIBRARY_PATH=/work/main/build/tests/simgpu
for spec in 1641114366:12 185167115:22 1619885934:22 1997224889:34; do
  net=${spec%%:*}; mb=${spec##*:}
  LD_PRELOAD=$1 VMEM_POLICY=${POL:-dyn} VMEM_STATS=1 VMEM_DEVICE_LIMIT=$((mb*1048576)) SIMGPU_REPORT=/tmp/s24/rep.$net /work/main/build/tests/minitrain/minitrain --net random:$net --batch 16 --image 64 --iters 8 --alloc caching --conv-api legacy --json 2>/tmp/s24/err.$net >/tmp/s24/out.$net
  echo "$net rc=$? $(grep -h virtual_time_s /tmp/s24/rep.$net) $(grep -h kernel_host_bytes /tmp/s24/rep.$net) $(grep -h 'calls run from host' /tmp/s24/err.$net | tr -s ' ') $(grep -h 'misses (pages)' /tmp/s24/err.$net | tr -s ' ')"
done
