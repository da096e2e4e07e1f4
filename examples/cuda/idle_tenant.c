/* An idle CUDA tenant: starts CUDA (an allocation and a synchronisation,
 * which reach the server), holds ALLOC_MIB of device memory (default 1),
 * says "ready" and then does
 * nothing until its standard input closes. N of these connected to one
 * Wormhole server show what each tenant's context costs the device
 * (nvidia-smi's memory.used), which sizes the delay-storing work.
 * Usage: idle_tenant [ALLOC_MIB] < fifo */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "wormhole_cuda_min.h"

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, mib << 20);
    if (e == 0) e = cudaDeviceSynchronize();
    if (e != 0) {
        fprintf(stderr, "idle_tenant: %s\n", cudaGetErrorString(e));
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    return 0;
}
