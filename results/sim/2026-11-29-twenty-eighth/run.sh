#!/bin/bash
# the sweeps of this session (libvmem.so of 0d49572), against the
# twenty-seventh session's rows: the same commands as its run.sh and
# run2.sh, with this session's library
cd /work/main
export L=${L:-/tmp/sw/libvmem-st.so} O=${O:-/tmp/s28c}
bash results/sim/2026-11-29-twenty-seventh/run.sh
bash results/sim/2026-11-29-twenty-seventh/run2.sh
