#!/bin/bash
# the sweeps of this session (libvmem.so of 0d49572), against the
# twenty-seventh session's rows: the same commands as its run.sh and
# run2.sh, with this session's library, and the slice and usual seeds
# under conv at 1/2
cd /work/main
export L=${L:-/tmp/sw/libvmem-st.so} O=${O:-/tmp/s28c}
bash results/sim/2026-11-29-twenty-seventh/run.sh
bash results/sim/2026-11-29-twenty-seventh/run2.sh
scripts/vmem-fuzz --max-peak 120 --styles per-tensor,caching,network --apis legacy,graph --iters 8 --jobs 1 --lib $L --minitrain /tmp/sw/minitrain --simgpu /tmp/sw/sim --policies conv --fractions 2 --json $O/conv.json 1851711389 131440739 842402907 2051145321 1823070520 1619885934 185167115 1641114366 238089557 302080105 147831307 1369497513 154546718 512422875 535056691 327752128 > $O/conv.log 2>&1
