/* tests/unit/scripts/stub.c - an empty shared library that the vmem-run
 * tests preload in place of libvmem.so, so they can check the environment
 * a command sees without loading the real hooks. */
int vmem_run_test_stub;
