/* How Wormhole reports the failure of a cuBLAS or cuRAND call it did not
 * wait for (for the no-GPU tests; it runs only through Wormhole: natively
 * the bad calls below would fault on the device). After one SGEMM (one
 * generation) of a shape has succeeded, the next of that shape goes
 * without waiting; one given freed memory fails on the server. Other
 * libraries must not see that failure (cudaDeviceSynchronize and
 * cudaGetLastError answer success, cuBLAS does not answer cuRAND's), and
 * the next synchronous call of the same library must answer it, in that
 * library's status (CUBLAS_STATUS_INVALID_VALUE, CURAND_STATUS_OUT_OF_RANGE),
 * once. With WORMHOLE_SYNC=1 the bad call answers it itself. Prints
 * "correct" and exits 0 when all holds.
 * Usage: lib_deferred [sync]   ("sync": the WORMHOLE_SYNC=1 expectations) */
#include <stdio.h>
#include <string.h>
#include "wormhole_cublas_min.h"

static int failures;
static void expect(const char *what, int got, int want) {
    printf("%-48s -> %d%s\n", what, got, got == want ? "" : " WRONG");
    if (got != want) failures++;
}

int main(int argc, char **argv) {
    int sync = argc > 1 && strcmp(argv[1], "sync") == 0;
    const int n = 16;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *a, *b, *c;
    if (cudaMalloc((void **)&a, bytes) || cudaMalloc((void **)&b, bytes) || cudaMalloc((void **)&c, bytes)) {
        printf("cudaMalloc failed\n");
        return 2;
    }
    cublasHandle_t h;
    if (cublasCreate_v2(&h) != CUBLAS_STATUS_SUCCESS) {
        printf("cublasCreate failed\n");
        return 2;
    }
    const float one = 1, zero = 0;
    float r = 0;
    expect("sgemm (first of its shape)",
           cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n), 0);
    expect("sgemm (same shape)",
           cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n), 0);
    expect("cudaFree(b)", cudaFree(b), 0);
    expect("sgemm on the freed matrix",
           cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n),
           sync ? CUBLAS_STATUS_INVALID_VALUE : 0);
    expect("cudaDeviceSynchronize", cudaDeviceSynchronize(), 0);
    expect("cudaGetLastError", cudaGetLastError(), 0);
    expect("snrm2 (answers the deferred failure)", cublasSnrm2_v2(h, n, c, 1, &r),
           sync ? 0 : CUBLAS_STATUS_INVALID_VALUE);
    expect("snrm2 again", cublasSnrm2_v2(h, n, c, 1, &r), 0);
    expect("cudaGetLastError", cudaGetLastError(), 0);

    curandGenerator_t g;
    float *u;
    if (curandCreateGenerator(&g, CURAND_RNG_PSEUDO_DEFAULT) != CURAND_STATUS_SUCCESS ||
        cudaMalloc((void **)&u, bytes)) {
        printf("curandCreateGenerator or cudaMalloc failed\n");
        return 2;
    }
    expect("curandGenerateUniform (first of its shape)", curandGenerateUniform(g, u, n), 0);
    expect("cudaFree(u)", cudaFree(u), 0);
    expect("curandGenerateUniform into freed memory", curandGenerateUniform(g, u, n),
           sync ? CURAND_STATUS_OUT_OF_RANGE : 0);
    expect("snrm2 (not cuRAND's failure)", cublasSnrm2_v2(h, n, c, 1, &r), 0);
    expect("curandSetPseudoRandomGeneratorSeed (answers it)", curandSetPseudoRandomGeneratorSeed(g, 1),
           sync ? 0 : CURAND_STATUS_OUT_OF_RANGE);
    expect("curandSetPseudoRandomGeneratorSeed again", curandSetPseudoRandomGeneratorSeed(g, 1), 0);
    curandDestroyGenerator(g);
    cublasDestroy_v2(h);
    cudaFree(a);
    cudaFree(c);
    printf("%s\n", failures ? "WRONG" : "correct");
    return failures != 0;
}
