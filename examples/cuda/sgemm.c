/* cuBLAS through cudart device memory: SGEMM (both transposes), strided
 * batched SGEMM, DGEMM, SGEMV, SGER and the level-1 calls a training loop
 * uses (axpy, scal, copy, dot, nrm2, amax), in host and device pointer
 * mode, on a stream of its own; then what PyTorch adds in double precision
 * (strided batched DGEMM, DGEMV, DDOT) and its handle settings (a
 * workspace, the math mode) and its mixed-precision GEMMs (half and
 * bfloat16 through GemmEx, SgemmEx, GemmStridedBatchedEx) and complex
 * ones (CGEMM, strided batched ZGEMM). Checks every
 * result against a CPU
 * reference and prints a digest of each result's bytes: run natively and
 * through Wormhole on the same GPU, the digests must be identical
 * (scripts/gpu-validate-cuda.sh compares them). Lines starting "time:"
 * are timings (not compared). Without a usable GPU it stops at the first
 * failing call with the library's message and exits 2.
 * Usage: sgemm [N [refused]]   (default 512; `refused` also prints the
 * status of a triangular solve, which Wormhole refuses:
 * CUBLAS_STATUS_NOT_SUPPORTED) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sample_util.h"

static int failures;

static void compare(const char *what, const float *got, const double *want, size_t n, double tol) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]) / (1.0 + fabs(want[i]));
        if (d > worst) worst = d;
    }
    printf("%-28s max rel error %.2e %s\n", what, worst, worst <= tol ? "ok" : "WRONG");
    if (worst > tol) failures++;
}

/* C = op(A) op(B), column-major, in double. */
static void ref_gemm(int ta, int tb, int m, int n, int k, const float *A, int lda, const float *B, int ldb, double *C) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) {
                double a = ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda];
                double b = tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb];
                s += a * b;
            }
            C[i + (size_t)j * m] = s;
        }
}

/* Mixed precision as PyTorch's half and bfloat16 matmuls call it: the
 * first 32 x 32 block of A and B rounded to half (GemmEx, float out;
 * SgemmEx), to bfloat16 (strided batched, two blocks, bfloat16 out),
 * and all-float GemmEx; each against the reference of the rounded
 * inputs. Half is _Float16, bfloat16 a float's top 16 bits. (N >= 64:
 * two blocks of A and B.) */
static int mixed_precision(cublasHandle_t h, const float *A, const float *B, double *R, float *dC) {
    const float one = 1, zero = 0;
    enum { M = 32, MM = M * M };
    _Float16 ha[MM], hb[MM];
    uint16_t ba[2 * MM], bb[2 * MM], bc[2 * MM];
    float fa[2 * MM], fb[2 * MM], fc[2 * MM];
    for (int i = 0; i < MM; i++) {
        ha[i] = (_Float16)A[i]; hb[i] = (_Float16)B[i];
        fa[i] = (float)ha[i]; fb[i] = (float)hb[i];
    }
    void *dh, *dbf, *dout;
    CHECK_CUDA(cudaMalloc(&dh, 2 * MM * sizeof(_Float16)));
    CHECK_CUDA(cudaMalloc(&dbf, 4 * MM * sizeof(uint16_t)));
    CHECK_CUDA(cudaMalloc(&dout, 2 * MM * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dh, ha, sizeof ha, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy((_Float16 *)dh + MM, hb, sizeof hb, cudaMemcpyHostToDevice));
    ref_gemm(0, 1, M, M, M, fa, M, fb, M, R);
    CHECK_BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, M, M, M, &one, dh, 2, M, (_Float16 *)dh + MM, 2, M, &zero,
                            dout, 0, M, 68 /* CUBLAS_COMPUTE_32F */, -1 /* CUBLAS_GEMM_DEFAULT */));
    CHECK_CUDA(cudaMemcpy(fc, dout, MM * sizeof(float), cudaMemcpyDeviceToHost));
    compare("gemm ex half in, float out", fc, R, MM, 1e-5);
    CHECK_BLAS(cublasSgemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, M, M, M, &one, dh, 2, M, (_Float16 *)dh + MM, 2, M,
                             &zero, dout, 0, M));
    CHECK_CUDA(cudaMemcpy(fc, dout, MM * sizeof(float), cudaMemcpyDeviceToHost));
    compare("sgemm ex half in", fc, R, MM, 1e-5);
    for (int i = 0; i < 2 * MM; i++) {
        uint32_t x, y;
        memcpy(&x, &A[i], 4); memcpy(&y, &B[i], 4);
        ba[i] = (uint16_t)(x >> 16); bb[i] = (uint16_t)(y >> 16);
        x = (uint32_t)ba[i] << 16; y = (uint32_t)bb[i] << 16;
        memcpy(&fa[i], &x, 4); memcpy(&fb[i], &y, 4);
    }
    CHECK_CUDA(cudaMemcpy(dbf, ba, sizeof ba, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy((uint16_t *)dbf + 2 * MM, bb, sizeof bb, cudaMemcpyHostToDevice));
    CHECK_BLAS(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, M, M, M, &one, dbf, 14, M, MM,
                                          (uint16_t *)dbf + 2 * MM, 14, M, MM, &zero, dout, 14, M, MM, 2,
                                          0 /* CUDA_R_32F, as PyTorch passes it */, -1));
    CHECK_CUDA(cudaMemcpy(bc, dout, sizeof bc, cudaMemcpyDeviceToHost));
    for (int b = 0; b < 2; b++) ref_gemm(1, 0, M, M, M, fa + b * MM, M, fb + b * MM, M, R + b * MM);
    for (int i = 0; i < 2 * MM; i++) { uint32_t x = (uint32_t)bc[i] << 16; memcpy(&fc[i], &x, 4); }
    compare("gemm ex bfloat16 batched", fc, R, 2 * MM, 1e-2);
    CHECK_CUDA(cudaMemcpy(dout, A, MM * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy((float *)dout + MM, B, MM * sizeof(float), cudaMemcpyHostToDevice));
    ref_gemm(0, 0, M, M, M, A, M, B, M, R);
    CHECK_BLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, M, M, &one, dout, 0, M, (float *)dout + MM, 0, M,
                            &zero, dC, 0, M, 68, -1));
    CHECK_CUDA(cudaMemcpy(fc, dC, MM * sizeof(float), cudaMemcpyDeviceToHost));
    compare("gemm ex float", fc, R, MM, 1e-5);
    cudaFree(dh); cudaFree(dbf); cudaFree(dout);
    return 0;
}

/* Complex: CGEMM (A^T B) on the first 24 x 24 blocks, as interleaved
 * (re, im) pairs taken from A and B, then ZGEMM strided batched (two
 * A B products) in double, each against a double reference; alpha
 * 1 + 0.5i, beta 0. */
static int complex_gemms(cublasHandle_t h, const float *A, const float *B) {
    enum { M = 24, MM = M * M };
    float ca[2 * MM], cb[2 * MM], cc[2 * MM];
    double zr[2 * 2 * MM], zz[2 * 2 * MM], za[2 * 2 * MM], zb[2 * 2 * MM];
    memcpy(ca, A, sizeof ca);
    memcpy(cb, B, sizeof cb);
    float calpha[2] = {1, 0.5f}, cbeta[2] = {0, 0};
    void *dca, *dcb, *dcc;
    CHECK_CUDA(cudaMalloc(&dca, sizeof ca));
    CHECK_CUDA(cudaMalloc(&dcb, sizeof cb));
    CHECK_CUDA(cudaMalloc(&dcc, sizeof zz));
    CHECK_CUDA(cudaMemcpy(dca, ca, sizeof ca, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dcb, cb, sizeof cb, cudaMemcpyHostToDevice));
    CHECK_BLAS(cublasCgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, M, M, M, calpha, dca, M, dcb, M, cbeta, dcc, M));
    CHECK_CUDA(cudaMemcpy(cc, dcc, sizeof cc, cudaMemcpyDeviceToHost));
    /* C[i,j] = alpha sum_l A[l,i] B[l,j], complex. */
    for (int j = 0; j < M; j++)
        for (int i = 0; i < M; i++) {
            double re = 0, im = 0;
            for (int l = 0; l < M; l++) {
                const float *a = &ca[2 * (l + i * M)], *b = &cb[2 * (l + j * M)];
                re += (double)a[0] * b[0] - (double)a[1] * b[1];
                im += (double)a[0] * b[1] + (double)a[1] * b[0];
            }
            zr[2 * (i + j * M)] = re * calpha[0] - im * calpha[1];
            zr[2 * (i + j * M) + 1] = re * calpha[1] + im * calpha[0];
        }
    compare("cgemm T N (re, im)", cc, zr, 2 * MM, 1e-5);
    for (int i = 0; i < 2 * 2 * MM; i++) { za[i] = A[i]; zb[i] = B[i]; }
    double zalpha[2] = {1, 0.5}, zbeta[2] = {0, 0};
    void *dza, *dzb;
    CHECK_CUDA(cudaMalloc(&dza, sizeof za));
    CHECK_CUDA(cudaMalloc(&dzb, sizeof zb));
    CHECK_CUDA(cudaMemcpy(dza, za, sizeof za, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dzb, zb, sizeof zb, cudaMemcpyHostToDevice));
    CHECK_BLAS(cublasZgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, M, M, M, zalpha, dza, M, MM, dzb, M, MM,
                                         zbeta, dcc, M, MM, 2));
    CHECK_CUDA(cudaMemcpy(zz, dcc, sizeof zz, cudaMemcpyDeviceToHost));
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < M; j++)
            for (int i = 0; i < M; i++) {
                double re = 0, im = 0;
                for (int l = 0; l < M; l++) {
                    const double *a = &za[2 * (b * MM + i + l * M)], *x = &zb[2 * (b * MM + l + j * M)];
                    re += a[0] * x[0] - a[1] * x[1];
                    im += a[0] * x[1] + a[1] * x[0];
                }
                zr[2 * (b * MM + i + j * M)] = re * zalpha[0] - im * zalpha[1];
                zr[2 * (b * MM + i + j * M) + 1] = re * zalpha[1] + im * zalpha[0];
            }
    float zf[2 * 2 * MM];
    for (int i = 0; i < 2 * 2 * MM; i++) zf[i] = (float)zz[i];
    compare("zgemm strided batched", zf, zr, 2 * 2 * MM, 1e-6);
    printf("digest complex: %016llx %016llx\n", (unsigned long long)sample_digest(cc, sizeof cc),
           (unsigned long long)sample_digest(zz, sizeof zz));
    cudaFree(dca); cudaFree(dcb); cudaFree(dcc); cudaFree(dza); cudaFree(dzb);
    return 0;
}

/* Level 1: y = 2 x + y; x *= -1.5; copy; dot, nrm2, amax. */
static int level1(cublasHandle_t h, int n, const float *x, const float *y, float *dx, float *dy, float *dC, float *dres,
                  double *R) {
    const float two = 2, m15 = -1.5f;
    CHECK_BLAS(cublasSaxpy_v2(h, n, &two, dx, 1, dy, 1));
    CHECK_BLAS(cublasSscal_v2(h, n, &m15, dx, 1));
    float *hy = malloc(n * sizeof(float)), *hx = malloc(n * sizeof(float));
    if (!hy || !hx) return 1;
    CHECK_CUDA(cudaMemcpy(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(hx, dx, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) R[i] = 2.0 * x[i] + y[i];
    compare("saxpy", hy, R, n, 1e-6);
    for (int i = 0; i < n; i++) R[i] = -1.5 * x[i];
    compare("sscal", hx, R, n, 1e-6);
    CHECK_BLAS(cublasScopy_v2(h, n, dx, 1, dC, 1));
    float dot = 0, nrm = 0, dot_dev = 0;
    int amax = 0;
    CHECK_BLAS(cublasSdot_v2(h, n, dx, 1, dy, 1, &dot));
    CHECK_BLAS(cublasSnrm2_v2(h, n, dC, 1, &nrm));
    CHECK_BLAS(cublasIsamax_v2(h, n, dx, 1, &amax));
    double rdot = 0, rnrm = 0; int ramax = 1;
    for (int i = 0; i < n; i++) {
        rdot += (double)hx[i] * hy[i]; rnrm += (double)hx[i] * hx[i];
        if (fabsf(hx[i]) > fabsf(hx[ramax - 1])) ramax = i + 1;
    }
    rnrm = sqrt(rnrm);
    float fd = dot, fn = nrm;
    compare("sdot (host result)", &fd, &rdot, 1, 1e-4);
    compare("snrm2", &fn, &rnrm, 1, 1e-5);
    printf("%-28s %d (reference %d) %s\n", "isamax", amax, ramax, amax == ramax ? "ok" : "WRONG");
    if (amax != ramax) failures++;
    /* Device pointer mode: the result stays in device memory. */
    CHECK_BLAS(cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_DEVICE));
    int mode = -1;
    CHECK_BLAS(cublasGetPointerMode_v2(h, &mode));
    CHECK_BLAS(cublasSdot_v2(h, n, dx, 1, dy, 1, dres));
    CHECK_CUDA(cudaMemcpy(&dot_dev, dres, sizeof(float), cudaMemcpyDeviceToHost));
    printf("%-28s mode %d, %s\n", "sdot (device result)", mode, mode == 1 && dot_dev == dot ? "ok" : "WRONG");
    if (mode != 1 || dot_dev != dot) failures++;
    CHECK_BLAS(cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_HOST));
    printf("digest level1: %016llx %016llx %016llx %d\n", (unsigned long long)(sample_digest(hy, n * 4) ^ sample_digest(hx, n * 4)),
           (unsigned long long)sample_digest(&dot, sizeof dot), (unsigned long long)sample_digest(&nrm, sizeof nrm), amax);
    return 0;
}

/* What PyTorch sets on every handle: a workspace (`*workspace`, to be
 * freed) and the math mode, set again and changed. */
static int handle_settings(cublasHandle_t h, void **out) {
    void *workspace;
    CHECK_CUDA(cudaMalloc(&workspace, 1 << 20));
    *out = workspace;
    CHECK_BLAS(cublasSetWorkspace_v2(h, workspace, 1 << 20));
    int math = -1;
    CHECK_BLAS(cublasGetMathMode(h, &math));
    printf("%-28s %d %s\n", "math mode", math, math == CUBLAS_DEFAULT_MATH ? "ok" : "WRONG");
    if (math != CUBLAS_DEFAULT_MATH) failures++;
    /* Set again and changed (Wormhole's client skips what is already set,
     * and must still pass on a change): the handle reports each. */
    int seen[3];
    CHECK_BLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    CHECK_BLAS(cublasGetMathMode(h, &seen[0]));
    CHECK_BLAS(cublasSetMathMode(h, 1 /* CUBLAS_TENSOR_OP_MATH */));
    CHECK_BLAS(cublasGetMathMode(h, &seen[1]));
    CHECK_BLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    CHECK_BLAS(cublasGetMathMode(h, &seen[2]));
    CHECK_BLAS(cublasSetWorkspace_v2(h, workspace, 1 << 20));
    printf("%-28s %d %d %d %s\n", "math mode set, changed, back", seen[0], seen[1], seen[2],
           seen[0] == 0 && seen[1] == 1 && seen[2] == 0 ? "ok" : "WRONG");
    if (seen[0] != 0 || seen[1] != 1 || seen[2] != 0) failures++;
    return 0;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 512;
    if (n < 8 || n > 8192) { printf("N must be in [8, 8192]\n"); return 1; }
    size_t nn = (size_t)n * n, bytes = nn * sizeof(float);
    float *A = malloc(bytes), *B = malloc(bytes), *C = malloc(bytes);
    double *R = malloc(nn * sizeof(double));
    if (!A || !B || !C || !R) return 1;
    uint32_t seed = 12345;
    for (size_t i = 0; i < nn; i++) { A[i] = sample_next(&seed); B[i] = sample_next(&seed); }

    float *dA, *dB, *dC, *dx, *dy, *dres;
    CHECK_CUDA(cudaMalloc((void **)&dA, bytes));
    CHECK_CUDA(cudaMalloc((void **)&dB, bytes));
    CHECK_CUDA(cudaMalloc((void **)&dC, bytes));
    CHECK_CUDA(cudaMalloc((void **)&dx, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc((void **)&dy, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc((void **)&dres, sizeof(float)));
    CHECK_CUDA(cudaMemcpy(dA, A, bytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dB, B, bytes, cudaMemcpyHostToDevice));
    cudaStream_t stream, got;
    CHECK_CUDA(cudaStreamCreate(&stream));
    cublasHandle_t h;
    CHECK_BLAS(cublasCreate_v2(&h));
    int version = 0;
    CHECK_BLAS(cublasGetVersion_v2(h, &version));
    printf("cuBLAS %d\n", version);
    CHECK_BLAS(cublasSetStream_v2(h, stream));
    CHECK_BLAS(cublasGetStream_v2(h, &got));
    if (got != stream) { printf("cublasGetStream_v2: another stream\n"); failures++; }
    CHECK_BLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    const float one = 1, zero = 0;

    /* SGEMM, N N and T N. */
    for (int ta = 0; ta <= 1; ta++) {
        CHECK_BLAS(cublasSgemm_v2(h, ta, CUBLAS_OP_N, n, n, n, &one, dA, n, dB, n, &zero, dC, n));
        CHECK_CUDA(cudaMemcpy(C, dC, bytes, cudaMemcpyDeviceToHost));
        ref_gemm(ta, 0, n, n, n, A, n, B, n, R);
        compare(ta ? "sgemm T N" : "sgemm N N", C, R, nn, 1e-4);
        printf("digest sgemm %s: %016llx\n", ta ? "TN" : "NN", (unsigned long long)sample_digest(C, bytes));
    }

    /* Strided batched: 4 products of 32 x 32 blocks taken along A and B. */
    int bm = 32, batch = 4;
    long long stride = (long long)bm * bm;
    CHECK_BLAS(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, bm, bm, bm, &one, dA, bm, stride, dB, bm, stride,
                                         &zero, dC, bm, stride, batch));
    CHECK_CUDA(cudaMemcpy(C, dC, (size_t)batch * stride * sizeof(float), cudaMemcpyDeviceToHost));
    for (int b = 0; b < batch; b++) {
        ref_gemm(0, 0, bm, bm, bm, A + b * stride, bm, B + b * stride, bm, R + b * stride);
    }
    compare("sgemm strided batched", C, R, (size_t)batch * stride, 1e-4);
    printf("digest sgemm batched: %016llx\n", (unsigned long long)sample_digest(C, batch * stride * sizeof(float)));

    /* DGEMM on a 64 x 64 block. */
    int dm = 64;
    double *hd = malloc((size_t)dm * dm * sizeof(double)), *hd2 = malloc((size_t)dm * dm * sizeof(double));
    if (!hd || !hd2) return 1;
    for (int i = 0; i < dm * dm; i++) hd[i] = A[i];
    double *dD, *dE;
    CHECK_CUDA(cudaMalloc((void **)&dD, dm * dm * sizeof(double)));
    CHECK_CUDA(cudaMalloc((void **)&dE, dm * dm * sizeof(double)));
    CHECK_CUDA(cudaMemcpy(dD, hd, dm * dm * sizeof(double), cudaMemcpyHostToDevice));
    const double done = 1, dzero = 0;
    CHECK_BLAS(cublasDgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_T, dm, dm, dm, &done, dD, dm, dD, dm, &dzero, dE, dm));
    CHECK_CUDA(cudaMemcpy(hd2, dE, dm * dm * sizeof(double), cudaMemcpyDeviceToHost));
    ref_gemm(0, 1, dm, dm, dm, A, dm, A, dm, R);
    for (int i = 0; i < dm * dm; i++) C[i] = (float)hd2[i];
    compare("dgemm N T", C, R, (size_t)dm * dm, 1e-6);
    printf("digest dgemm: %016llx\n", (unsigned long long)sample_digest(hd2, dm * dm * sizeof(double)));

    /* SGEMV y = A^T x, then SGER A += x y^T on a copy. */
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    if (!x || !y) return 1;
    for (int i = 0; i < n; i++) x[i] = sample_next(&seed);
    CHECK_CUDA(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_BLAS(cublasSgemv_v2(h, CUBLAS_OP_T, n, n, &one, dA, n, dx, 1, &zero, dy, 1));
    CHECK_CUDA(cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int j = 0; j < n; j++) { double s = 0; for (int i = 0; i < n; i++) s += (double)A[i + (size_t)j * n] * x[i]; R[j] = s; }
    compare("sgemv T", y, R, n, 1e-4);
    CHECK_CUDA(cudaMemcpy(dC, A, bytes, cudaMemcpyHostToDevice));
    const float half = 0.5f;
    CHECK_BLAS(cublasSger_v2(h, n, n, &half, dx, 1, dy, 1, dC, n));
    CHECK_CUDA(cudaMemcpy(C, dC, bytes, cudaMemcpyDeviceToHost));
    for (size_t j = 0; j < (size_t)n; j++) for (size_t i = 0; i < (size_t)n; i++) R[i + j * n] = A[i + j * n] + 0.5 * x[i] * y[j];
    compare("sger", C, R, nn, 1e-5);
    printf("digest sger: %016llx\n", (unsigned long long)sample_digest(C, bytes));

    int rc = level1(h, n, x, y, dx, dy, dC, dres, R);
    if (rc) return rc;

    /* What PyTorch sets on every handle, then double precision. */
    void *workspace = NULL;
    if ((rc = handle_settings(h, &workspace))) return rc;
    /* Two 32 x 32 products along hd (A's first 2048 elements, in double). */
    CHECK_BLAS(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, bm, bm, bm, &done, dD, bm, stride, dD, bm, stride,
                                         &dzero, dE, bm, stride, 2));
    CHECK_CUDA(cudaMemcpy(hd2, dE, 2 * stride * sizeof(double), cudaMemcpyDeviceToHost));
    for (int b = 0; b < 2; b++) ref_gemm(0, 0, bm, bm, bm, A + b * stride, bm, A + b * stride, bm, R + b * stride);
    for (int i = 0; i < 2 * stride; i++) C[i] = (float)hd2[i];
    compare("dgemm strided batched", C, R, 2 * (size_t)stride, 1e-6);
    /* y = A x and x . y on the first 64 x 64 block, in double. */
    double *dvx, *dvy, hv[64], ddot = 0;
    CHECK_CUDA(cudaMalloc((void **)&dvx, dm * sizeof(double)));
    CHECK_CUDA(cudaMalloc((void **)&dvy, dm * sizeof(double)));
    for (int i = 0; i < dm; i++) hv[i] = x[i];
    CHECK_CUDA(cudaMemcpy(dvx, hv, dm * sizeof(double), cudaMemcpyHostToDevice));
    CHECK_BLAS(cublasDgemv_v2(h, CUBLAS_OP_N, dm, dm, &done, dD, dm, dvx, 1, &dzero, dvy, 1));
    CHECK_CUDA(cudaMemcpy(hv, dvy, dm * sizeof(double), cudaMemcpyDeviceToHost));
    for (int i = 0; i < dm; i++) { double s = 0; for (int j = 0; j < dm; j++) s += (double)A[i + (size_t)j * dm] * x[j]; R[i] = s; }
    for (int i = 0; i < dm; i++) C[i] = (float)hv[i];
    compare("dgemv N", C, R, dm, 1e-6);
    CHECK_BLAS(cublasDdot_v2(h, dm, dvx, 1, dvy, 1, &ddot));
    double rddot = 0;
    for (int i = 0; i < dm; i++) rddot += (double)x[i] * R[i];
    float fdd = (float)ddot;
    compare("ddot", &fdd, &rddot, 1, 1e-6);
    printf("digest double: %016llx %016llx\n", (unsigned long long)sample_digest(hd2, 2 * stride * sizeof(double)),
           (unsigned long long)sample_digest(&ddot, sizeof ddot));

    /* (N >= 64: two 32 x 32 blocks of A and B.) */
    if (n >= 64) {
        if ((rc = mixed_precision(h, A, B, R, dC)) || (rc = complex_gemms(h, A, B))) return rc;
    }

    if (argc > 2 && strcmp(argv[2], "refused") == 0)
        printf("strsm: status %d\n", cublasStrsm_v2(h, 0, 0, 0, 0, 1, 1, NULL, NULL, 1, NULL, 1));

    /* Throughput: back-to-back SGEMMs on the stream. */
    int reps = 20;
    CHECK_CUDA(cudaDeviceSynchronize());
    double t0 = sample_now();
    for (int r = 0; r < reps; r++)
        CHECK_BLAS(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, dA, n, dB, n, &zero, dC, n));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    double dt = sample_now() - t0;
    printf("time: %d sgemm of %d: %.3f ms each, %.1f GFLOP/s\n", reps, n, dt / reps * 1e3, 2.0 * n * n * n * reps / dt / 1e9);

    CHECK_BLAS(cublasDestroy_v2(h));
    CHECK_CUDA(cudaStreamDestroy(stream));
    cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dx); cudaFree(dy); cudaFree(dres); cudaFree(dD); cudaFree(dE); cudaFree(dvx); cudaFree(dvy); cudaFree(workspace);
    printf("%s\n", failures ? "WRONG" : "correct");
    return failures ? 1 : 0;
}
