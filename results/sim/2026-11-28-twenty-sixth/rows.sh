#!/bin/bash
# rows.sh LIB: iteration 7 (ms), planned misses and pages handed off of the
# rows the handoff moved most (minitrain random nets, legacy API, under all);
# run with libvmem.so builds of the variants tried (docs/benchmarks.md,
# twenty-sixth session) and with VMEM_HANDOFF=0
export LD_LIBRARY_PATH=/tmp/sw/sim
L=$1
for spec in 147831307:caching:25165824 327752128:caching:23068672 327752128:caching:10485760 147831307:per-tensor:18874368 147831307:caching:50331648 1851711389:network:8388608 1619885934:caching:23068672 185167115:caching:23068672 1997224889:caching:35651584; do
  IFS=: read net st lim <<< "$spec"
  LD_PRELOAD=$L VMEM_POLICY=all VMEM_STATS=1 VMEM_DEVICE_LIMIT=$lim /tmp/sw/minitrain --net random:$net --batch 16 --image 64 --iters 8 --alloc $st --conv-api legacy > /tmp/sw/ro 2>/tmp/sw/re
  echo "$net $st $((lim/1048576))M rc=$? $(grep '^iter 7' /tmp/sw/ro | awk '{print $6}') ms misses $(grep -h 'misses in planned' /tmp/sw/re | awk '{print $6}') handed $(grep -h 'handed to' /tmp/sw/re | awk '{print $6}')"
done
