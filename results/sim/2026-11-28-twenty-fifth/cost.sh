#!/bin/bash
# cost.sh: per-iteration simulated time of nets that ran out of memory
# before (allocations and calls larger than the budget), under dyn and
# all at the budget, against the unlimited run and vmem-bound.
cd /work/main
export LD_LIBRARY_PATH=/tmp/sw/sim
L=/tmp/sw/libvmem.so; M=/tmp/sw/minitrain
for spec in 1641114366:caching:12:64 842402907:per-tensor:8:64 842402907:caching:14:64 7:per-tensor:4:32; do
  IFS=: read net st mb img <<< "$spec"
  A="--net random:$net --batch 16 --image $img --iters 8 --alloc $st --conv-api legacy"
  echo "== random:$net $st legacy, budget $mb MiB"
  LD_PRELOAD=$L VMEM_DEVICE_LIMIT=4G VMEM_TRACE=/tmp/sw/tr.$net.$st.jsonl $M $A 2>/dev/null | grep "^iter 7" | sed 's/^/unlimited: /'
  u=$(LD_PRELOAD=$L VMEM_DEVICE_LIMIT=4G $M $A 2>/dev/null | grep "^iter 7" | awk '{print $6}')
  for pol in dyn all; do
    LD_PRELOAD=$L VMEM_POLICY=$pol VMEM_STATS=1 VMEM_DEVICE_LIMIT=$((mb*1048576)) $M $A > /tmp/sw/o 2>/tmp/sw/e
    echo "-- $pol: rc=$? $(grep '^iter 7' /tmp/sw/o) $(grep -h 'calls run from host' /tmp/sw/e | tr -s ' ') $(grep -h 'mapped from host' /tmp/sw/e | tr -s ' ')"
  done
  scripts/vmem-bound /tmp/sw/tr.$net.$st.jsonl --budget ${mb}M --compute-ms $u 2>&1 | grep "lower bound"
done
