/* One CUDA tenant of the delay-storing benchmark (run.py --api cuda): the
 * same lines on stdin as tenant.c, the OpenCL one, with cuBLAS for its
 * kernels so that it needs no nvcc (it runs on the CPU stand-in device and
 * on a GPU alike):
 *
 *   tenant MIB NBUF     holds MIB MiB: NBUF data buffers of whole 2 MiB
 *                       (the driver's granularity, so that a slab is a
 *                       buffer) and a small result buffer, written at
 *                       start ("ready BYTES"), or prints "refused CODE" and
 *                       exits 3 when the device has no room for it
 *   cell R W            reads the data buffers in bit mask R (cublasSnrm2
 *                       of each into the result buffer) and updates those
 *                       in W (x = x / 2, cublasSscal), then waits: "ok NS"
 *   poke I              an nrm2 of one element of buffer I: "ok NS"
 *   verify              reads every buffer back and checks it against the
 *                       updates made: "verified HASH"
 *   quit
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tenant_loop.h"
#include "wormhole_cublas_min.h"

#define MAXBUF 64
#define GRANULE ((size_t)2 << 20)
#define OUT_FLOATS 1024

#define CHECK(x) do { int e_ = (int)(x); if (e_ != 0) { \
    fprintf(stderr, "tenant_cuda: %s: %d\n", #x, e_); exit(2); } } while (0)

/* Element j of buffer b before any update. */
static float initial(size_t j, int b) {
    return (float)((uint32_t)j * 2654435761u + (uint32_t)b) / 4096.0f;
}

/* What the stdin lines work on (tenant_loop.h). */
static cublasHandle_t h;
static float *buf[MAXBUF], *out, *half, *host;
static int nbuf, n;
static size_t bytes;

static void cell(unsigned long r, unsigned long w) {
    for (int b = 0; b < nbuf; b++) {
        if (r & (1ul << b)) CHECK(cublasSnrm2_v2(h, n, buf[b], 1, out + b));
        if (w & (1ul << b)) CHECK(cublasSscal_v2(h, n, half, buf[b], 1));
    }
    CHECK(cudaDeviceSynchronize());
}

static void poke(int i) {
    CHECK(cublasSnrm2_v2(h, 1, buf[i], 1, out + i));
    CHECK(cudaDeviceSynchronize());
}

static int verify(const int *updates) {
    for (int b = 0; b < nbuf; b++) {
        CHECK(cudaMemcpy(host, buf[b], bytes, cudaMemcpyDeviceToHost));
        for (int j = 0; j < n; j++) {
            float v = initial((size_t)j, b);
            for (int k = 0; k < updates[b]; k++) v *= 0.5f;
            if (host[j] != v) {
                fprintf(stderr, "tenant_cuda: buffer %d element %d is %g, want %g\n", b, j,
                        (double)host[j], (double)v);
                return 1;
            }
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tenant_cuda MIB NBUF\n");
        return 1;
    }
    size_t mib = (size_t)atol(argv[1]);
    nbuf = atoi(argv[2]);
    if (nbuf < 1 || nbuf > MAXBUF || mib < 4) {
        fprintf(stderr, "tenant_cuda: 1..%d buffers, 4 MiB or more\n", MAXBUF);
        return 1;
    }
    /* The result buffer takes a slab of its own (carved, small). */
    bytes = ((mib << 20) - GRANULE) / (size_t)nbuf / GRANULE * GRANULE;
    if (bytes == 0) bytes = GRANULE;
    n = (int)(bytes / sizeof(float));
    int updates[MAXBUF] = {0};
    cudaError_t e = cudaMalloc((void **)&out, OUT_FLOATS * sizeof(float));
    host = malloc(bytes);
    if (!host) return 1;
    for (int b = 0; b < nbuf && e == cudaSuccess; b++) {
        e = cudaMalloc((void **)&buf[b], bytes);
        if (e != cudaSuccess) break;
        for (int j = 0; j < n; j++) host[j] = initial((size_t)j, b);
        e = cudaMemcpy(buf[b], host, bytes, cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess) {
        printf("refused %d\n", (int)e);
        fflush(stdout);
        return 3;
    }
    CHECK(cublasCreate_v2(&h));
    CHECK(cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_DEVICE));
    CHECK(cudaMalloc((void **)&half, sizeof(float)));
    const float half_h = 0.5f;
    CHECK(cudaMemcpy(half, &half_h, sizeof half_h, cudaMemcpyHostToDevice));
    CHECK(cudaDeviceSynchronize());
    printf("ready %zu\n", bytes);
    fflush(stdout);
    static const struct tenant_ops ops = {cell, poke, verify};
    int status = tenant_loop(nbuf, updates, &ops);
    if (status != 0) return status;
    for (int b = 0; b < nbuf; b++) cudaFree(buf[b]);
    cudaFree(out);
    cudaFree(half);
    cublasDestroy_v2(h);
    free(host);
    return 0;
}
