#!/bin/bash
cd /tmp/bench13
export LD_LIBRARY_PATH=/tmp/bench13
for ws in off wr wd; do
  /usr/bin/time -f "wall %e s" env SIMGPU_DRYRUN=1 SIMGPU_MODEL=titanx LD_PRELOAD=/tmp/bench13/libvmem.so VMEM_POLICY=dyn VMEM_WORKSPACE=$ws VMEM_STATS=1 VMEM_TRACE=/tmp/bench13/t-$ws.jsonl ./minitrain --net vgg19 --batch 256 --image 224 --iters 14 --classes 1000 --alloc network > out-$ws.txt 2>&1
  echo "$ws done" >> progress
done
