/* cuBLAS and cuRAND on a machine without a usable GPU: every answer must
 * be the one NVIDIA's libraries give there. Established by linking this
 * program against NVIDIA's libcublas.so.12 (12.9.3.13) / .13 (13.10.0.20),
 * libcurand.so.10 (10.3.10.19 / 10.4.5.25) and libcudart (PyPI wheels) on
 * a machine without the driver: the answers below are theirs, and the
 * program exits 0 against them and against Wormhole's stand-ins alike.
 * Usage: blas_nodevice MAJOR (12 or 13: the versions to expect). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wormhole_cublas_min.h"

static int failures;

static void expect(const char *what, int got, int want) {
    printf("%-40s -> %d%s\n", what, got, got == want ? "" : "   (UNEXPECTED)");
    if (got != want) failures++;
}

int main(int argc, char **argv) {
    int major = argc > 1 ? atoi(argv[1]) : 13;
    int v = -1;
    expect("cublasGetVersion_v2(NULL)", cublasGetVersion_v2(NULL, &v), CUBLAS_STATUS_SUCCESS);
    expect("  version", v, major == 12 ? 120903 : 131000);
    cublasHandle_t h = (cublasHandle_t)0x1;
    expect("cublasCreate_v2", cublasCreate_v2(&h), CUBLAS_STATUS_NOT_INITIALIZED);
    expect("  handle untouched", h == (cublasHandle_t)0x1, 1);
    expect("cublasCreate_v2(NULL)", cublasCreate_v2(NULL), CUBLAS_STATUS_INVALID_VALUE);
    h = NULL;
    int mode = -7;
    expect("cublasGetPointerMode_v2(NULL)", cublasGetPointerMode_v2(h, &mode), 1);
    expect("  mode untouched", mode, -7);
    expect("cublasSetPointerMode_v2(NULL)", cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_DEVICE), 1);
    expect("cublasSetMathMode(NULL)", cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), 1);
    cudaStream_t s = (cudaStream_t)0x5;
    expect("cublasGetStream_v2(NULL)", cublasGetStream_v2(h, &s), 1);
    expect("  stream untouched", s == (cudaStream_t)0x5, 1);
    expect("cublasSetStream_v2(NULL)", cublasSetStream_v2(h, NULL), 1);
    float a = 1, b = 0, r = -1;
    int ir = -1;
    expect("cublasSgemm_v2(NULL)", cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &a, NULL, 2, NULL, 2, &b, NULL, 2), 1);
    expect("cublasSdot_v2(NULL)", cublasSdot_v2(h, 2, NULL, 1, NULL, 1, &r), 1);
    expect("  result untouched", r == -1.0f, 1);
    expect("cublasIsamax_v2(NULL)", cublasIsamax_v2(h, 2, NULL, 1, &ir), 1);
    expect("  result untouched", ir, -1);
    expect("cublasDestroy_v2(NULL)", cublasDestroy_v2(h), 1);
    const char *names[][2] = {
        {"CUBLAS_STATUS_SUCCESS", "success"},
        {"CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
        {"unrecognized status", "unrecognized status"},
        {"CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    };
    for (int i = 0; i < 4; i++) {
        int ok = !strcmp(cublasGetStatusName(i), names[i][0]) && !strcmp(cublasGetStatusString(i), names[i][1]);
        printf("cublasGetStatusName/String(%d)          -> %s | %s\n", i, cublasGetStatusName(i), cublasGetStatusString(i));
        if (!ok) failures++;
    }
    expect("cublasGetStatusName(7) is INVALID_VALUE",
           !strcmp(cublasGetStatusName(7), "CUBLAS_STATUS_INVALID_VALUE"), 1);

    v = -1;
    expect("curandGetVersion", curandGetVersion(&v), CURAND_STATUS_SUCCESS);
    expect("  version", v, major == 12 ? 10310 : 10405);
    curandGenerator_t g = (curandGenerator_t)0x1;
    expect("curandCreateGenerator", curandCreateGenerator(&g, CURAND_RNG_PSEUDO_DEFAULT), CURAND_STATUS_INITIALIZATION_FAILED);
    expect("  generator untouched", g == (curandGenerator_t)0x1, 1);
    expect("curandCreateGenerator(bad type)", curandCreateGenerator(&g, 12345), CURAND_STATUS_INITIALIZATION_FAILED);
    expect("curandSetPseudoRandomGeneratorSeed(NULL)", curandSetPseudoRandomGeneratorSeed(NULL, 1), CURAND_STATUS_NOT_INITIALIZED);
    expect("curandSetStream(NULL)", curandSetStream(NULL, NULL), CURAND_STATUS_NOT_INITIALIZED);
    expect("curandGenerateUniform(NULL)", curandGenerateUniform(NULL, NULL, 4), CURAND_STATUS_NOT_INITIALIZED);
    expect("curandDestroyGenerator(NULL)", curandDestroyGenerator(NULL), CURAND_STATUS_NOT_INITIALIZED);
    printf("%s\n", failures ? "FAIL" : "OK: answers as NVIDIA's cuBLAS and cuRAND without a GPU");
    return failures ? 1 : 0;
}
