#!/bin/bash
# the sweeps of this session, against the twenty-fifth session's rows
cd /work/main
F="scripts/vmem-fuzz --max-peak 120 --styles per-tensor,caching,network --apis legacy,graph --iters 8 --jobs 2 --lib /tmp/sw/libvmem-ho.so --minitrain /tmp/sw/minitrain --simgpu /tmp/sw/sim"
$F --policies all,dyn --fractions 2,4 --json /tmp/s26/usual.json 238089557 302080105 147831307 1369497513 154546718 512422875 535056691 327752128 > /tmp/s26/usual.log 2>&1
$F --policies all,conv,dyn --fractions 2 --json /tmp/s26/seven.json 799373320 1720388722 92986571 1122651465 842305346 1997224889 1365012950 > /tmp/s26/seven.log 2>&1
# slices: the 8 miss/slice nets (all,dyn at 1/2 and 1/4), run as:
# $F --policies all,dyn --fractions 2,4 --json slices.json 1851711389 131440739 842402907 2051145321 1823070520 1619885934 185167115 1641114366
# t1h on/off:
# scripts/bench-policies --build build --lib L -j 2 --tables t1h --nets vgg19,resnet50 -q t1h-on
# scripts/bench-policies --build build --lib L -j 2 --tables t1h --nets vgg19,resnet50 --vmem-env VMEM_HANDOFF=0 -q t1h-off
