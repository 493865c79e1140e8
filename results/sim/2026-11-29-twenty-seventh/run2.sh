#!/bin/bash
# named nets at 1/2, the eval/batch-change sweep and two training threads, after run.sh
cd /work/main
O=${O:-/tmp/s27}   # where the logs go
while ! grep -q "^vmem-fuzz: total" $O/usual.log 2>/dev/null; do sleep 10; done
L=${L:-/tmp/sw/libvmem-f5.so}   # libvmem.so of 84f7e73
F="scripts/vmem-fuzz --lib $L --minitrain /tmp/sw/minitrain --simgpu /tmp/sw/sim --jobs 2"
$F --nets vgg16,resnet,inception,densenet --batch 8 --image 32 --iters 6 --styles per-tensor,caching,network --apis legacy,graph --policies all,conv,dyn --fractions 2 --json $O/named.json > $O/named.log 2>&1
$F --max-peak 120 --styles caching --apis legacy,graph --iters 12 --eval-every 4 --batch-change 7:8 --policies all,dyn --fractions 2 --json $O/eval16.json 1755190187 2137021517 1227082507 438243004 693704037 1851711389 909302323 1078685332 1769829945 131440739 345141509 1772879626 1561022472 1275009569 960941178 842402907 > $O/eval16.log 2>&1
$F --max-peak 120 --threads 2 --styles per-tensor,caching --apis legacy --policies all,dyn --fractions 2,4 --iters 8 --json $O/threads.json 238089557 302080105 1369497513 154546718 147831307 > $O/threads.log 2>&1
