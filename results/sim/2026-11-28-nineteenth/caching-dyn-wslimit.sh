#!/bin/bash
cd /work/main
export LD_LIBRARY_PATH=/tmp/snap/sim
for cfg in "vgg19 64 7149732864" "vgg19 128 11601722592" "resnet50 128 11328245984"; do
 set -- $cfg; net=$1; b=$2; peak=$3
 for f in 2 4; do
  lim=$((peak / f))
  for lib in /tmp/snap128 /tmp/snapws; do
    out=$(LD_PRELOAD=$lib/libvmem.so SIMGPU_DRYRUN=1 SIMGPU_MEM=$lim SIMGPU_MODEL=h100 SIMGPU_VMM_COST=h100 VMEM_DEVICE_RESERVE=0 VMEM_STATS=1 VMEM_VA_SIZE=4T VMEM_POLICY=dyn timeout 900 /tmp/snap/minitrain --net $net --batch $b --image 224 --iters 16 --alloc caching --classes 1000 --json 2>&1)
    t=$(echo "$out" | grep -o '"iter_ms":\[[^]]*\]' | python3 -c "import sys,json; v=json.loads(sys.stdin.read().split(':',1)[1]); print('%.1f'%sorted(v[-3:])[1])" 2>/dev/null)
    kept=$(echo "$out" | grep -o "kept [a-z()]*" | head -1)
    oom=$(echo "$out" | grep -o "out of memory: [a-zA-Z]*" | head -1)
    echo "$net $b caching 1/$f $(basename $lib) ms=$t $kept $oom"
  done
 done
done
