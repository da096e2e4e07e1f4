/* cuRAND into cudart device memory: the default (XORWOW) and Philox
 * generators, seeded, with an offset, on a stream; uniform and normal
 * floats and doubles and raw 32-bit words. Checks the distributions'
 * moments and that re-seeding reproduces a sequence, and prints a digest
 * of every output: natively and through Wormhole on the same GPU the
 * digests must be identical (scripts/gpu-validate-cuda.sh compares them).
 * Without a usable GPU it stops at the first failing call and exits 2. */
#include <math.h>
#include <stdlib.h>
#include "sample_util.h"

static int failures;

static void moments(const char *what, const double *v, size_t n, double mean, double sd) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) { s += v[i]; s2 += v[i] * v[i]; }
    double m = s / n, d = sqrt(s2 / n - m * m);
    int ok = fabs(m - mean) < 0.01 && fabs(d - sd) < 0.01;
    printf("%-34s mean %.4f sd %.4f %s\n", what, m, d, ok ? "ok" : "WRONG");
    if (!ok) failures++;
}

/* An offset of 7; NVIDIA's cuRAND 10.4 refuses one for Philox
 * (CURAND_STATUS_TYPE_ERROR, seen on an H200), so a refusal is printed, the
 * same natively and remoted, and the generator goes on from offset 0. */
static void set_offset(curandGenerator_t g, int t) {
    curandStatus_t s = curandSetGeneratorOffset(g, 7);
    if (s != CURAND_STATUS_SUCCESS) printf("offset on generator %d refused: curandStatus %d\n", t, s);
}

int main(void) {
    const size_t n = 1 << 20;
    float *df; double *dd; unsigned *du;
    CHECK_CUDA(cudaMalloc((void **)&df, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc((void **)&dd, n * sizeof(double)));
    CHECK_CUDA(cudaMalloc((void **)&du, n * sizeof(unsigned)));
    float *hf = malloc(n * sizeof(float)); double *hd = malloc(n * sizeof(double)), *tmp = malloc(n * sizeof(double));
    unsigned *hu = malloc(n * sizeof(unsigned));
    if (!hf || !hd || !tmp || !hu) return 1;
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    int version = 0;
    CHECK_RAND(curandGetVersion(&version));
    printf("cuRAND %d\n", version);
    int types[2] = {CURAND_RNG_PSEUDO_DEFAULT, CURAND_RNG_PSEUDO_PHILOX4_32_10};
    for (int t = 0; t < 2; t++) {
        curandGenerator_t g;
        CHECK_RAND(curandCreateGenerator(&g, types[t]));
        CHECK_RAND(curandSetStream(g, stream));
        CHECK_RAND(curandSetPseudoRandomGeneratorSeed(g, 1234));
        set_offset(g, t);
        CHECK_RAND(curandGenerateUniform(g, df, n));
        CHECK_CUDA(cudaMemcpy(hf, df, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) tmp[i] = hf[i];
        moments(t ? "philox uniform" : "xorwow uniform", tmp, n, 0.5, sqrt(1.0 / 12));
        printf("digest %d uniform: %016llx\n", t, (unsigned long long)sample_digest(hf, n * sizeof(float)));
        CHECK_RAND(curandGenerateNormal(g, df, n, 1.0f, 2.0f));
        CHECK_CUDA(cudaMemcpy(hf, df, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) tmp[i] = hf[i];
        moments(t ? "philox normal(1, 2)" : "xorwow normal(1, 2)", tmp, n, 1.0, 2.0);
        printf("digest %d normal: %016llx\n", t, (unsigned long long)sample_digest(hf, n * sizeof(float)));
        CHECK_RAND(curandGenerateUniformDouble(g, dd, n));
        CHECK_CUDA(cudaMemcpy(hd, dd, n * sizeof(double), cudaMemcpyDeviceToHost));
        moments(t ? "philox uniform double" : "xorwow uniform double", hd, n, 0.5, sqrt(1.0 / 12));
        printf("digest %d uniform double: %016llx\n", t, (unsigned long long)sample_digest(hd, n * sizeof(double)));
        CHECK_RAND(curandGenerateNormalDouble(g, dd, n, 0.0, 1.0));
        CHECK_CUDA(cudaMemcpy(hd, dd, n * sizeof(double), cudaMemcpyDeviceToHost));
        moments(t ? "philox normal double" : "xorwow normal double", hd, n, 0.0, 1.0);
        printf("digest %d normal double: %016llx\n", t, (unsigned long long)sample_digest(hd, n * sizeof(double)));
        CHECK_RAND(curandGenerate(g, du, n));
        CHECK_CUDA(cudaMemcpy(hu, du, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
        uint64_t first = sample_digest(hu, n * sizeof(unsigned));
        printf("digest %d words: %016llx\n", t, (unsigned long long)first);
        /* The same seed and offset give the same words again. */
        CHECK_RAND(curandSetPseudoRandomGeneratorSeed(g, 99));
        CHECK_RAND(curandSetPseudoRandomGeneratorSeed(g, 1234));
        set_offset(g, t);
        CHECK_RAND(curandGenerate(g, du, n));
        CHECK_CUDA(cudaMemcpy(hu, du, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
        printf("digest %d words after reseed: %016llx\n", t, (unsigned long long)sample_digest(hu, n * sizeof(unsigned)));
        CHECK_RAND(curandDestroyGenerator(g));
    }
    double t0 = sample_now();
    curandGenerator_t g;
    CHECK_RAND(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    for (int r = 0; r < 100; r++) CHECK_RAND(curandGenerateUniform(g, df, n));
    CHECK_CUDA(cudaDeviceSynchronize());
    printf("time: 100 x %zu uniform floats: %.3f ms each\n", n, (sample_now() - t0) * 10);
    CHECK_RAND(curandDestroyGenerator(g));
    CHECK_CUDA(cudaStreamDestroy(stream));
    cudaFree(df); cudaFree(dd); cudaFree(du);
    printf("%s\n", failures ? "WRONG" : "correct");
    return failures ? 1 : 0;
}
