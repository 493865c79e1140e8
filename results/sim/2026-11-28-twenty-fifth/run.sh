#!/bin/bash
cd /work/main
F="scripts/vmem-fuzz --max-peak 120 --styles per-tensor,caching,network --apis legacy,graph --jobs 2 --lib /tmp/sw/libvmem.so --minitrain /tmp/sw/minitrain --simgpu /tmp/sw/sim"
$F --iters 8 --policies all,dyn --fractions 2,4 --json /tmp/sw/usual.json 238089557 302080105 147831307 1369497513 154546718 512422875 535056691 327752128 > /tmp/sw/usual.log 2>&1
$F --iters 8 --policies all,conv,dyn --fractions 2 --json /tmp/sw/seven.json 799373320 1720388722 92986571 1122651465 842305346 1997224889 1365012950 > /tmp/sw/seven.log 2>&1
$F --iters 8 --policies all,dyn --fractions 2,4 --json /tmp/sw/slices.json 1851711389 131440739 842402907 2051145321 1823070520 1619885934 185167115 1641114366 > /tmp/sw/slices.log 2>&1
echo done > /tmp/sw/DONE
