#!/bin/bash
# the h100 t1h table with this session's library, after run2.sh
cd /work/main
O=${O:-/tmp/s27}
while ! grep -q "^vmem-fuzz: total" $O/threads.log 2>/dev/null; do sleep 10; done
scripts/bench-policies --build build --lib /tmp/sw/libvmem-f5.so -j 2 --tables t1h --nets vgg19,resnet50 -q $O/t1h > $O/t1h.log 2>&1
