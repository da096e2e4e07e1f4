/* Helpers shared by the cuBLAS and cuRAND samples: error checks that stop
 * at the first failure with the library's own message (exit 2: the
 * answer of a machine without a usable GPU), a deterministic input
 * generator, a digest of result bytes (native and remoted runs must print
 * the same digests), and a wall clock. */
#ifndef WORMHOLE_SAMPLE_UTIL_H
#define WORMHOLE_SAMPLE_UTIL_H
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include "wormhole_cublas_min.h"

#define CHECK_CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("%s: %s (%s, %d)\n", #x, cudaGetErrorString(e_), cudaGetErrorName(e_), e_); return 2; } } while (0)
#define CHECK_BLAS(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    printf("%s: %s (%s)\n", #x, cublasGetStatusString(s_), cublasGetStatusName(s_)); return 2; } } while (0)
#define CHECK_RAND(x) do { curandStatus_t s_ = (x); if (s_ != CURAND_STATUS_SUCCESS) { \
    printf("%s: curandStatus %d\n", #x, s_); return 2; } } while (0)

/* xorshift: the same inputs natively and remoted. */
static inline float sample_next(uint32_t *s) {
    *s ^= *s << 13; *s ^= *s >> 17; *s ^= *s << 5;
    return (float)(*s % 2001) / 1000.0f - 1.0f;
}

/* FNV-1a over bytes. */
static inline uint64_t sample_digest(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}

static inline double sample_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
#endif
