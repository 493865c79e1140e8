#!/bin/bash
# the sweeps of this session, against the twenty-sixth session's rows
cd /work/main
L=${L:-/tmp/sw/libvmem-f5.so}   # libvmem.so of 84f7e73
O=${O:-/tmp/s27}
F="scripts/vmem-fuzz --max-peak 120 --styles per-tensor,caching,network --apis legacy,graph --iters 8 --jobs 2 --lib $L --minitrain /tmp/sw/minitrain --simgpu /tmp/sw/sim"
$F --policies all,dyn --fractions 2,4 --json $O/slices.json 1851711389 131440739 842402907 2051145321 1823070520 1619885934 185167115 1641114366 > $O/slices.log 2>&1
$F --policies all,conv,dyn --fractions 2 --json $O/seven.json 799373320 1720388722 92986571 1122651465 842305346 1997224889 1365012950 > $O/seven.log 2>&1
$F --policies all,dyn --fractions 2,4 --json $O/usual.json 238089557 302080105 147831307 1369497513 154546718 512422875 535056691 327752128 > $O/usual.log 2>&1
