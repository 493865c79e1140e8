#!/bin/bash
# cost.sh: iteration 7 of 8 (titanx model, computing for real) with the
# handoff on and off, beside the unlimited run and vmem-bound's lower bound
cd /work/main
export LD_LIBRARY_PATH=/tmp/sw/sim
L=/tmp/sw/libvmem-ho.so; M=/tmp/sw/minitrain
for spec in 147831307:caching:48 1619885934:caching:22 185167115:caching:22 131440739:caching:10 1851711389:network:8 842402907:caching:14; do
  IFS=: read net st mb <<< "$spec"
  A="--net random:$net --batch 16 --image 64 --iters 8 --alloc $st --conv-api legacy"
  echo "== random:$net $st legacy, budget $mb MiB"
  LD_PRELOAD=$L VMEM_DEVICE_LIMIT=4G VMEM_TRACE=/tmp/s26/tr.$net.$st.jsonl $M $A 2>/dev/null | grep "^iter 7" | sed 's/^/unlimited: /'
  u=$(LD_PRELOAD=$L VMEM_DEVICE_LIMIT=4G $M $A 2>/dev/null | grep "^iter 7" | awk '{print $6}')
  for pol in all dyn; do
    for h in 1 0; do
      LD_PRELOAD=$L VMEM_HANDOFF=$h VMEM_POLICY=$pol VMEM_STATS=1 VMEM_DEVICE_LIMIT=$((mb*1048576)) $M $A > /tmp/s26/o 2>/tmp/s26/e
      echo "-- $pol handoff=$h: rc=$? $(grep '^iter 7' /tmp/s26/o | awk '{print $6, $7}') planned misses $(grep -h 'misses in planned' /tmp/s26/e | awk '{print $6}') handed $(grep -h 'handed to the next' /tmp/s26/e | awk '{print $6}') stalls $(grep -h '^  host stalls' /tmp/s26/e | awk '{print $3}')"
    done
  done
  rm -f /tmp/s26/tr.$net.$st.jsonl.bound
  scripts/vmem-bound /tmp/s26/tr.$net.$st.jsonl --budget ${mb}M --compute-ms $u 2>&1 | grep "lower bound"
  rm -f /tmp/s26/tr.$net.$st.jsonl
done
