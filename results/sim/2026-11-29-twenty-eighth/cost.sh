#!/bin/bash
# cost.sh: iteration 7 of 8 (titanx model, computing for real), the
# twenty-seventh session's library (HEAD 6cc5c30) against this session's (0d49572),
# beside the unlimited run and vmem-bound's lower bound
cd /work/main
export LD_LIBRARY_PATH=/tmp/sw/sim
OLD=${OLD:-/tmp/sw/libvmem-base.so}; NEW=${NEW:-/tmp/sw/libvmem-st.so}; M=/tmp/sw/minitrain; T=/tmp/s28c/cost; mkdir -p $T
for spec in 185167115:caching:22 1619885934:caching:22 842402907:caching:28 842402907:per-tensor:8 1619885934:caching:10 842402907:caching:14; do
  IFS=: read net st mb <<< "$spec"
  A="--net random:$net --batch 16 --image 64 --iters 8 --alloc $st --conv-api legacy --json"
  echo "== random:$net $st legacy, budget $mb MiB"
  LD_PRELOAD=$OLD VMEM_DEVICE_LIMIT=4G VMEM_TRACE=$T/tr.jsonl $M $A 2>/dev/null | grep "^iter 7" | sed 's/^/unlimited: /'
  u=$(LD_PRELOAD=$OLD VMEM_DEVICE_LIMIT=4G $M $A 2>/dev/null | grep "^iter 7" | awk '{print $6}')
  for pol in all dyn; do
    for lib in $OLD $NEW; do
      LD_PRELOAD=$lib VMEM_POLICY=$pol VMEM_STATS=1 VMEM_DEVICE_LIMIT=$((mb*1048576)) $M $A > $T/o 2>$T/e
      echo "-- $pol $(basename $lib): rc=$? $(grep '^iter 7' $T/o | awk '{print $6, $7}') checksum $(grep -o '"checksum":"[^"]*' $T/o | tail -1 | cut -d'"' -f4) planned misses $(grep -h 'misses in planned' $T/e | awk '{print $6}') handed $(grep -h 'handed to the next' $T/e | awk '{print $6}') stalls $(grep -h '^  host stalls' $T/e | awk '{print $3}')"
    done
  done
  rm -f $T/tr.jsonl.bound
  scripts/vmem-bound $T/tr.jsonl --budget ${mb}M --compute-ms $u 2>&1 | grep "lower bound"
  rm -f $T/tr.jsonl
done
