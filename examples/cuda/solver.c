/* Dense cuSOLVER through cudart device memory: Cholesky (potrf + potrs,
 * lower and upper) of a symmetric positive definite matrix and LU with
 * partial pivoting (getrf + getrs, op(A) = A and A^T) of a general one, in
 * float and double, through the legacy API and the 64-bit generic (X) one
 * with its params, on a stream of its own; each solution's scaled residual
 * max|op(A) x - b| / (max|A| max|x| n) is computed on the CPU from the
 * matrices as uploaded. Then what cuSOLVER answers for a matrix that is
 * not positive definite, a singular one, a leading dimension smaller than
 * n and a NULL handle. Only infos, statuses and verdicts are printed, so
 * the output is the same on any machine, GPU or not. Without a usable GPU
 * it stops at the first failing call and exits 2.
 * Build: cc -Iexamples/cuda solver.c -lcusolver -lcudart */
#include <stdlib.h>
#include <string.h>
#include "sample_util.h"
#include "wormhole_cusolver_min.h"

/* cudaGetErrorString only: the CPU stand-in, which runs this directly,
 * has no cudaGetErrorName. */
#define CHECK_RT(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("%s: %s (%d)\n", #x, cudaGetErrorString(e_), e_); return 2; } } while (0)
#define CHECK_DN(x) do { cusolverStatus_t s_ = (x); if (s_ != CUSOLVER_STATUS_SUCCESS) { \
    printf("%s: cusolverStatus %d\n", #x, s_); return 2; } } while (0)

enum { N = 24, NRHS = 3 };
static int failures;
static cusolverDnHandle_t h;
static cusolverDnParams_t params;
static double spd[N * N], gen[N * N], rhs[N * NRHS];

static void check(int ok) { if (!ok) failures++; }
static double mag(double v) { return v < 0 ? -v : v; }
/* Element i of a float (ty 0, CUDA_R_32F) or double (ty 1) array. */
static double at(const void *p, int ty, size_t i) { return ty ? ((const double *)p)[i] : ((const float *)p)[i]; }
static void put(void *p, int ty, size_t i, double v) {
    if (ty) ((double *)p)[i] = v;
    else ((float *)p)[i] = (float)v;
}

static double residual(const void *A, int tr, const void *X, const void *B, int ty) {
    double worst = 0, amax = 0, xmax = 0;
    for (size_t i = 0; i < (size_t)N * N; i++) if (mag(at(A, ty, i)) > amax) amax = mag(at(A, ty, i));
    for (size_t i = 0; i < (size_t)N * NRHS; i++) if (mag(at(X, ty, i)) > xmax) xmax = mag(at(X, ty, i));
    for (int c = 0; c < NRHS; c++)
        for (int i = 0; i < N; i++) {
            double s = -at(B, ty, i + (size_t)c * N);
            for (int k = 0; k < N; k++)
                s += at(A, ty, tr ? k + (size_t)i * N : i + (size_t)k * N) * at(X, ty, k + (size_t)c * N);
            if (mag(s) > worst) worst = mag(s);
        }
    return worst / (amax * xmax * N);
}

/* One factor-and-solve: Cholesky (lu 0; op the fill mode) or LU (lu 1; op
 * the transpose), in float or double (ty), legacy API or X (x). */
static int solve(int x, int ty, int lu, int op) {
    size_t es = ty ? sizeof(double) : sizeof(float), ab = (size_t)N * N * es, bb = (size_t)N * NRHS * es;
    cudaDataType dt = ty ? CUDA_R_64F : CUDA_R_32F;
    double hA[N * N], hB[N * NRHS], hX[N * NRHS]; /* as floats or doubles */
    for (size_t i = 0; i < (size_t)N * N; i++) put(hA, ty, i, (lu ? gen : spd)[i]);
    for (size_t i = 0; i < (size_t)N * NRHS; i++) put(hB, ty, i, rhs[i]);
    void *dA, *dB, *dwork, *dpiv = NULL, *hwork = NULL;
    int *dinfo, info[2] = {-1, -1};
    CHECK_RT(cudaMalloc(&dA, ab));
    CHECK_RT(cudaMalloc(&dB, bb));
    CHECK_RT(cudaMalloc((void **)&dinfo, sizeof info));
    CHECK_RT(cudaMemcpy(dA, hA, ab, cudaMemcpyHostToDevice));
    CHECK_RT(cudaMemcpy(dB, hB, bb, cudaMemcpyHostToDevice));
    if (!x) {
        int lwork = 0;
        if (lu) CHECK_DN(ty ? cusolverDnDgetrf_bufferSize(h, N, N, dA, N, &lwork)
                            : cusolverDnSgetrf_bufferSize(h, N, N, dA, N, &lwork));
        else CHECK_DN(ty ? cusolverDnDpotrf_bufferSize(h, op, N, dA, N, &lwork)
                         : cusolverDnSpotrf_bufferSize(h, op, N, dA, N, &lwork));
        CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * es));
        if (lu) {
            CHECK_RT(cudaMalloc(&dpiv, N * sizeof(int)));
            CHECK_DN(ty ? cusolverDnDgetrf(h, N, N, dA, N, dwork, dpiv, dinfo)
                        : cusolverDnSgetrf(h, N, N, dA, N, dwork, dpiv, dinfo));
            CHECK_DN(ty ? cusolverDnDgetrs(h, op, N, NRHS, dA, N, dpiv, dB, N, dinfo + 1)
                        : cusolverDnSgetrs(h, op, N, NRHS, dA, N, dpiv, dB, N, dinfo + 1));
        } else {
            CHECK_DN(ty ? cusolverDnDpotrf(h, op, N, dA, N, dwork, lwork, dinfo)
                        : cusolverDnSpotrf(h, op, N, dA, N, dwork, lwork, dinfo));
            CHECK_DN(ty ? cusolverDnDpotrs(h, op, N, NRHS, dA, N, dB, N, dinfo + 1)
                        : cusolverDnSpotrs(h, op, N, NRHS, dA, N, dB, N, dinfo + 1));
        }
    } else {
        size_t dbytes = 0, hbytes = 0;
        if (lu) CHECK_DN(cusolverDnXgetrf_bufferSize(h, params, N, N, dt, dA, N, dt, &dbytes, &hbytes));
        else CHECK_DN(cusolverDnXpotrf_bufferSize(h, params, op, N, dt, dA, N, dt, &dbytes, &hbytes));
        CHECK_RT(cudaMalloc(&dwork, dbytes ? dbytes : 1));
        if (hbytes && !(hwork = malloc(hbytes))) return 1;
        if (lu) {
            CHECK_RT(cudaMalloc(&dpiv, N * sizeof(int64_t)));
            CHECK_DN(cusolverDnXgetrf(h, params, N, N, dt, dA, N, dpiv, dt, dwork, dbytes, hwork, hbytes, dinfo));
            CHECK_DN(cusolverDnXgetrs(h, params, op, N, NRHS, dt, dA, N, dpiv, dt, dB, N, dinfo + 1));
        } else {
            CHECK_DN(cusolverDnXpotrf(h, params, op, N, dt, dA, N, dt, dwork, dbytes, hwork, hbytes, dinfo));
            CHECK_DN(cusolverDnXpotrs(h, params, op, N, NRHS, dt, dA, N, dt, dB, N, dinfo + 1));
        }
    }
    CHECK_RT(cudaDeviceSynchronize());
    CHECK_RT(cudaMemcpy(info, dinfo, sizeof info, cudaMemcpyDeviceToHost));
    CHECK_RT(cudaMemcpy(hX, dB, bb, cudaMemcpyDeviceToHost));
    int ok = info[0] == 0 && info[1] == 0 && residual(hA, lu && op, hX, hB, ty) < (ty ? 1e-10 : 1e-4);
    printf("%c%s+%s %s%s: info %d, residual %s\n", x ? 'X' : ty ? 'D' : 'S', lu ? "getrf" : "potrf",
           lu ? "getrs" : "potrs", lu ? (op ? "T" : "N") : (op ? "upper" : "lower"),
           x ? (ty ? " R_64F" : " R_32F") : "", info[0] ? info[0] : info[1], ok ? "ok" : "WRONG");
    check(ok);
    free(hwork);
    CHECK_RT(cudaFree(dA));
    CHECK_RT(cudaFree(dB));
    CHECK_RT(cudaFree(dwork));
    CHECK_RT(cudaFree(dpiv));
    CHECK_RT(cudaFree(dinfo));
    return 0;
}

/* A matrix cuSOLVER must refuse to factor: potrf's info for an SPD matrix
 * with a negative diagonal element at (5, 5), getrf's for one whose
 * column 7 is zero (the first zero pivot is then U(8, 8), 1-based). */
static int failing(void) {
    double hA[N * N];
    int info = -1, lwork = 0;
    void *dA, *dwork;
    int *dinfo, *dpiv;
    int64_t *dpiv64;
    CHECK_RT(cudaMalloc(&dA, sizeof hA));
    CHECK_RT(cudaMalloc((void **)&dinfo, sizeof(int)));
    CHECK_RT(cudaMalloc((void **)&dpiv, N * sizeof(int)));
    CHECK_RT(cudaMalloc((void **)&dpiv64, N * sizeof(int64_t)));

    memcpy(hA, spd, sizeof hA);
    hA[5 + 5 * N] = -1;
    CHECK_RT(cudaMemcpy(dA, hA, sizeof hA, cudaMemcpyHostToDevice));
    CHECK_DN(cusolverDnDpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, N, dA, N, &lwork));
    CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * sizeof(double)));
    CHECK_DN(cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, N, dA, N, dwork, lwork, dinfo));
    CHECK_RT(cudaMemcpy(&info, dinfo, sizeof info, cudaMemcpyDeviceToHost));
    printf("Dpotrf not positive definite: info %d\n", info);
    check(info == 6);
    /* A leading dimension under n: refused before any work. */
    cusolverStatus_t s = cusolverDnDpotrf(h, CUBLAS_FILL_MODE_LOWER, N, dA, N - 1, dwork, lwork, dinfo);
    printf("Dpotrf lda < n: status %d\n", s);
    check(s == CUSOLVER_STATUS_INVALID_VALUE);
    CHECK_RT(cudaFree(dwork));

    memcpy(hA, gen, sizeof hA);
    for (int i = 0; i < N; i++) hA[i + 7 * N] = 0;
    CHECK_RT(cudaMemcpy(dA, hA, sizeof hA, cudaMemcpyHostToDevice));
    CHECK_DN(cusolverDnDgetrf_bufferSize(h, N, N, dA, N, &lwork));
    CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * sizeof(double)));
    CHECK_DN(cusolverDnDgetrf(h, N, N, dA, N, dwork, dpiv, dinfo));
    CHECK_RT(cudaMemcpy(&info, dinfo, sizeof info, cudaMemcpyDeviceToHost));
    printf("Dgetrf singular: info %d\n", info);
    check(info == 8);
    CHECK_RT(cudaFree(dwork));

    float hS[N * N];
    for (int i = 0; i < N * N; i++) hS[i] = (float)hA[i];
    size_t dbytes = 0, hbytes = 0;
    void *hwork = NULL;
    CHECK_RT(cudaMemcpy(dA, hS, sizeof hS, cudaMemcpyHostToDevice));
    CHECK_DN(cusolverDnXgetrf_bufferSize(h, params, N, N, CUDA_R_32F, dA, N, CUDA_R_32F, &dbytes, &hbytes));
    CHECK_RT(cudaMalloc(&dwork, dbytes ? dbytes : 1));
    if (hbytes && !(hwork = malloc(hbytes))) return 1;
    CHECK_DN(cusolverDnXgetrf(h, params, N, N, CUDA_R_32F, dA, N, dpiv64, CUDA_R_32F, dwork, dbytes, hwork, hbytes,
                              dinfo));
    CHECK_RT(cudaMemcpy(&info, dinfo, sizeof info, cudaMemcpyDeviceToHost));
    printf("Xgetrf singular R_32F: info %d\n", info);
    check(info == 8);
    free(hwork);

    /* No handle at all. */
    s = cusolverDnDpotrf_bufferSize(NULL, CUBLAS_FILL_MODE_LOWER, N, dA, N, &lwork);
    printf("NULL handle: status %d\n", s);
    check(s == CUSOLVER_STATUS_NOT_INITIALIZED);
    CHECK_RT(cudaFree(dwork));
    CHECK_RT(cudaFree(dA));
    CHECK_RT(cudaFree(dinfo));
    CHECK_RT(cudaFree(dpiv));
    CHECK_RT(cudaFree(dpiv64));
    return 0;
}

/* Through Wormhole, what it exports only to refuse (QR, SVD, Jacobi
 * eigensolvers...): a clear status, not a missing symbol. */
static int refused(void) {
    int lwork = -1;
    syevjInfo_t info = NULL;
    CHECK_DN(cusolverDnCreate(&h));
    printf("geqrf size: %d, lwork %d\n", cusolverDnDgeqrf_bufferSize(h, N, N, NULL, N, &lwork), lwork);
    printf("gesvd size: %d\n", cusolverDnDgesvd_bufferSize(h, N, N, &lwork));
    printf("syevj info: %d, %s\n", cusolverDnCreateSyevjInfo(&info), info ? "set" : "untouched");
    CHECK_DN(cusolverDnDestroy(h));
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "refused") == 0) return refused();
    /* SPD: M M^T + n I; general: uniform in [-1, 1], left to pivoting. */
    uint32_t seed = 2024;
    double m[N * N];
    for (int i = 0; i < N * N; i++) m[i] = sample_next(&seed);
    for (int j = 0; j < N; j++)
        for (int i = 0; i < N; i++) {
            double s = i == j ? N : 0;
            for (int k = 0; k < N; k++) s += m[i + k * N] * m[j + k * N];
            spd[i + j * N] = s;
        }
    for (int i = 0; i < N * N; i++) gen[i] = sample_next(&seed);
    for (int i = 0; i < N * NRHS; i++) rhs[i] = sample_next(&seed);

    cudaStream_t stream, got = NULL;
    CHECK_RT(cudaStreamCreate(&stream));
    CHECK_DN(cusolverDnCreate(&h));
    CHECK_DN(cusolverDnSetStream(h, stream));
    CHECK_DN(cusolverDnGetStream(h, &got));
    printf("stream set and read back: %s\n", got == stream ? "ok" : "WRONG");
    check(got == stream);
    CHECK_DN(cusolverDnCreateParams(&params));
    CHECK_DN(cusolverDnSetAdvOptions(params, CUSOLVERDN_GETRF, CUSOLVER_ALG_0));
    printf("n %d, nrhs %d\n", N, NRHS);

    for (int x = 0; x <= 1; x++)
        for (int ty = 0; ty <= 1; ty++)
            for (int lu = 0; lu <= 1; lu++)
                for (int op = 0; op <= 1; op++) /* lower/upper; N/T */
                    if (solve(x, ty, lu, op)) return 2;
    if (failing()) return 2;

    CHECK_DN(cusolverDnDestroyParams(params));
    CHECK_DN(cusolverDnDestroy(h));
    CHECK_RT(cudaStreamDestroy(stream));
    printf("%s\n", failures ? "WRONG" : "correct");
    return failures ? 1 : 0;
}
