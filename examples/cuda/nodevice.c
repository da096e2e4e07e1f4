/* A host-only CUDA program: what a machine without a usable GPU answers.
 * Built with the system compiler and linked against libcudart.so.N (ours
 * or NVIDIA's: the output must be the same). Prints each call's result and
 * exits 0 when every answer is the one the native runtime gives on a
 * machine without the NVIDIA driver (cudaErrorInsufficientDriver) or
 * without a device (cudaErrorNoDevice), 1 otherwise. */
#include <stdio.h>
#include <string.h>
#include "wormhole_cuda_min.h"

static int failures;

static void expect_no_gpu(const char *what, cudaError_t e) {
    printf("%-28s -> %d %s (%s)\n", what, e, cudaGetErrorName(e), cudaGetErrorString(e));
    if (e != cudaErrorInsufficientDriver && e != cudaErrorNoDevice) failures++;
}

int main(void) {
    int n = -1, v = -1;
    expect_no_gpu("cudaGetDeviceCount", cudaGetDeviceCount(&n));
    if (n != -1) { printf("count written on failure: %d\n", n); failures++; }
    cudaError_t first = cudaGetLastError();
    expect_no_gpu("cudaGetLastError", first);
    void *p = (void *)1;
    expect_no_gpu("cudaMalloc", cudaMalloc(&p, 1 << 20));
    if (p != (void *)1) { printf("pointer written on failure\n"); failures++; }
    cudaStream_t s = 0;
    expect_no_gpu("cudaStreamCreate", cudaStreamCreate(&s));
    expect_no_gpu("cudaDeviceSynchronize", cudaDeviceSynchronize());
    cudaError_t d = cudaDriverGetVersion(&v);
    printf("%-28s -> %d, version %d\n", "cudaDriverGetVersion", d, v);
    /* No driver: version 0. A driver without devices reports its version. */
    if (d != cudaSuccess || (first == cudaErrorInsufficientDriver && v != 0)) failures++;
    cudaError_t r = cudaRuntimeGetVersion(&v);
    printf("%-28s -> %d, version %d\n", "cudaRuntimeGetVersion", r, v);
    if (r != cudaSuccess || v < 12000) failures++;
    /* Pinned host memory needs the driver too. */
    void *h = NULL;
    expect_no_gpu("cudaMallocHost", cudaMallocHost(&h, 4096));
    if (h != NULL) { printf("host pointer written on failure\n"); failures++; }
    if (strcmp(cudaGetErrorName(cudaErrorNoDevice), "cudaErrorNoDevice") != 0) failures++;
    printf("%s\n", failures ? "FAIL" : "OK: answers as native CUDA without a GPU");
    return failures ? 1 : 0;
}
