/* A tenant's memory quota as CUDA sees it (`wormhole-server
 * --tenant-memory`): prints what the device says of its memory, then
 * allocates 4 MiB at a time until an allocation is refused (at most 64),
 * frees everything and does it again. scripts/test-wormhole-cuda.sh runs
 * it through a server on the CPU stand-in (examples/cuda/cpu_device/).
 * Build: cc -Iexamples/cuda -o quota examples/cuda/quota.c -lcudart */
#include <stdio.h>
#include <string.h>

#include "wormhole_cuda_min.h"

#define MAX_ALLOCS 64

static void say_memory(const char *when) {
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total);
    printf("%s: cudaMemGetInfo %d, free %zu, total %zu\n", when, (int)e, free_b, total);
}

/* Allocates until refused; returns how many, the refusal's code in *why. */
static int fill(void **p, cudaError_t *why) {
    *why = cudaSuccess;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        cudaError_t e = cudaMalloc(&p[i], (size_t)4 << 20);
        if (e != cudaSuccess) {
            *why = e;
            return i;
        }
    }
    return MAX_ALLOCS;
}

int main(void) {
    unsigned char prop[1100];
    cudaError_t e = cudaGetDeviceProperties(prop, 0);
    size_t total_global = 0;
    memcpy(&total_global, prop + 288, sizeof total_global);
    printf("cudaGetDeviceProperties %d, totalGlobalMem %zu\n", (int)e,
           e == cudaSuccess ? total_global : 0);
    say_memory("at start");
    void *p[MAX_ALLOCS];
    cudaError_t why;
    int n = fill(p, &why);
    printf("allocations: %d, then %d\n", n, (int)why);
    say_memory("holding them");
    for (int i = 0; i < n; i++) cudaFree(p[i]);
    n = fill(p, &why);
    printf("after freeing: %d, then %d\n", n, (int)why);
    for (int i = 0; i < n; i++) cudaFree(p[i]);
    say_memory("at the end");
    return 0;
}
