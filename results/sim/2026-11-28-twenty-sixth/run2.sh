#!/bin/bash
# named nets at 1/2 and the eval/batch-change sweep, after run.sh
cd /work/main
while ! grep -q "^vmem-fuzz: total" /tmp/s26/seven.log 2>/dev/null; do sleep 10; done
F="scripts/vmem-fuzz --lib /tmp/sw/libvmem-ho.so --minitrain /tmp/sw/minitrain --simgpu /tmp/sw/sim --jobs 2"
$F --nets vgg16,resnet,inception,densenet --batch 8 --image 32 --iters 6 --styles per-tensor,caching,network --apis legacy,graph --policies all,conv,dyn --fractions 2 --json /tmp/s26/named.json > /tmp/s26/named.log 2>&1
$F --max-peak 120 --styles caching --apis legacy,graph --iters 12 --eval-every 4 --batch-change 7:8 --policies all,dyn --fractions 2 --json /tmp/s26/eval16.json 1755190187 2137021517 1227082507 438243004 693704037 1851711389 909302323 1078685332 1769829945 131440739 345141509 1772879626 1561022472 1275009569 960941178 842402907 > /tmp/s26/eval16.log 2>&1
# two training threads (run after, beside nothing):
# scripts/vmem-fuzz --max-peak 120 --threads 2 --styles per-tensor,caching --apis legacy --policies all,dyn --fractions 2,4 --iters 8 --jobs 2 --lib L --minitrain M --simgpu S --json threads.json 238089557 302080105 1369497513 154546718 147831307
