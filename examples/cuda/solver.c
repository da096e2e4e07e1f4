/* Dense cuSOLVER through cudart device memory: Cholesky (potrf + potrs,
 * lower and upper) of a symmetric positive definite matrix and LU with
 * partial pivoting (getrf + getrs, op(A) = A and A^T) of a general one, in
 * float and double, through the legacy API and the 64-bit generic (X) one
 * with its params, on a stream of its own; each solution's scaled residual
 * max|op(A) x - b| / (max|A| max|x| n) is computed on the CPU from the
 * matrices as uploaded. Then what cuSOLVER answers for a matrix that is
 * not positive definite, a singular one, a leading dimension smaller than
 * n and a NULL handle. Then Householder QR of a 30 x 20 matrix (geqrf, or
 * the X API's, as PyTorch calls it, then orgqr to form Q and ormqr to
 * apply Q^T), judged by Q's orthonormality, ||Q R - A|| / ||A|| and Q^T C
 * against the formed Q; and the symmetric eigenproblem of a 16 x 16
 * matrix (syevd, legacy and X, either triangle, the other one junk),
 * judged by the eigenvalues' order, ||A V - V diag(W)|| / ||A|| and V's
 * orthonormality, and without vectors by the same eigenvalues. Then the
 * singular value decomposition by Jacobi (gesvdj) of a 20 x 12 and a
 * 12 x 20 matrix, economy-size and full, with its settings and with NULL
 * for them, judged by the singular values' order and sign, U's and V's
 * orthonormality and ||U diag(S) V^T - A|| / ||A||, and without vectors
 * by the same singular values; and its refusal of lda < m. Only
 * infos, statuses and verdicts are printed, so
 * the output is the same on any machine, GPU or not. Without a usable GPU
 * it stops at the first failing call and exits 2.
 * Build: cc -Iexamples/cuda solver.c -lcusolver -lcudart */
#include <math.h>
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
/* QR: an M x NQ matrix, Q^T applied to M x NC; the eigenproblem's E x E. */
enum { M = 30, NQ = 20, NC = 3, E = 16 };
/* SVD: an SM x SN matrix and an SN x SM one (SN = min(m, n)). */
enum { SM = 20, SN = 12 };
static int failures;
static cusolverDnHandle_t h;
static cusolverDnParams_t params;
static double spd[N * N], gen[N * N], rhs[N * NRHS];
static double tall[M * NQ], cmat[M * NC], sym[E * E];
static double svd_tall[SM * SN], svd_wide[SN * SM];
/* Each type's eigenvalues from the legacy API with vectors (lower). */
static double with_vectors[2][E];
/* Each type's and shape's (tall 0, wide 1) singular values with vectors. */
static double svd_with_vectors[2][2][SN];

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

/* Relative tolerances: float's and double's. */
static double tol(int ty) { return ty ? 1e-10 : 1e-4; }
/* max |X^T X - I| for the `cols` columns of a rows x cols X. */
static double orthonormality(const void *X, int ty, int rows, int cols) {
    double worst = 0;
    for (int i = 0; i < cols; i++)
        for (int j = 0; j < cols; j++) {
            double s = i == j ? -1 : 0;
            for (int r = 0; r < rows; r++) s += at(X, ty, r + (size_t)i * rows) * at(X, ty, r + (size_t)j * rows);
            if (mag(s) > worst) worst = mag(s);
        }
    return worst;
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

    /* No handle at all: only where asked (SOLVER_NULL_HANDLE=1, the CPU
     * stand-in's tests). NVIDIA's library does not promise to check, and
     * the native run on an H200 crashed somewhere in this sample. */
    if (getenv("SOLVER_NULL_HANDLE")) {
        s = cusolverDnDpotrf_bufferSize(NULL, CUBLAS_FILL_MODE_LOWER, N, dA, N, &lwork);
        printf("NULL handle: status %d\n", s);
        check(s == CUSOLVER_STATUS_NOT_INITIALIZED);
    }
    CHECK_RT(cudaFree(dwork));
    CHECK_RT(cudaFree(dA));
    CHECK_RT(cudaFree(dinfo));
    CHECK_RT(cudaFree(dpiv));
    CHECK_RT(cudaFree(dpiv64));
    return 0;
}

/* Householder QR of `tall` in float or double (ty), by geqrf or Xgeqrf
 * (x), then, on its reflectors, ormqr (C := Q^T C from the left) and
 * orgqr (Q's NQ columns, in place). */
static int qr(int x, int ty) {
    size_t es = ty ? sizeof(double) : sizeof(float), ab = (size_t)M * NQ * es, cb = (size_t)M * NC * es;
    cudaDataType dt = ty ? CUDA_R_64F : CUDA_R_32F;
    double hA[M * NQ], hF[M * NQ], hQ[M * NQ], hC[M * NC], hQC[M * NC]; /* as floats or doubles */
    for (size_t i = 0; i < (size_t)M * NQ; i++) put(hA, ty, i, tall[i]);
    for (size_t i = 0; i < (size_t)M * NC; i++) put(hC, ty, i, cmat[i]);
    void *dA, *dtau, *dC, *dwork, *hwork = NULL;
    int *dinfo, info[3] = {-1, -1, -1}, lwork = 0;
    CHECK_RT(cudaMalloc(&dA, ab));
    CHECK_RT(cudaMalloc(&dtau, NQ * es));
    CHECK_RT(cudaMalloc(&dC, cb));
    CHECK_RT(cudaMalloc((void **)&dinfo, sizeof info));
    CHECK_RT(cudaMemcpy(dA, hA, ab, cudaMemcpyHostToDevice));
    CHECK_RT(cudaMemcpy(dC, hC, cb, cudaMemcpyHostToDevice));
    if (!x) {
        CHECK_DN(ty ? cusolverDnDgeqrf_bufferSize(h, M, NQ, dA, M, &lwork)
                    : cusolverDnSgeqrf_bufferSize(h, M, NQ, dA, M, &lwork));
        CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * es));
        CHECK_DN(ty ? cusolverDnDgeqrf(h, M, NQ, dA, M, dtau, dwork, lwork, dinfo)
                    : cusolverDnSgeqrf(h, M, NQ, dA, M, dtau, dwork, lwork, dinfo));
    } else {
        size_t dbytes = 0, hbytes = 0;
        CHECK_DN(cusolverDnXgeqrf_bufferSize(h, params, M, NQ, dt, dA, M, dt, dtau, dt, &dbytes, &hbytes));
        CHECK_RT(cudaMalloc(&dwork, dbytes ? dbytes : 1));
        if (hbytes && !(hwork = malloc(hbytes))) return 1;
        CHECK_DN(cusolverDnXgeqrf(h, params, M, NQ, dt, dA, M, dt, dtau, dt, dwork, dbytes, hwork, hbytes, dinfo));
    }
    CHECK_RT(cudaFree(dwork));
    CHECK_RT(cudaDeviceSynchronize());
    CHECK_RT(cudaMemcpy(hF, dA, ab, cudaMemcpyDeviceToHost)); /* R and the reflectors */

    CHECK_DN(ty ? cusolverDnDormqr_bufferSize(h, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, M, NC, NQ, dA, M, dtau, dC, M, &lwork)
                : cusolverDnSormqr_bufferSize(h, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, M, NC, NQ, dA, M, dtau, dC, M,
                                              &lwork));
    CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * es));
    CHECK_DN(ty ? cusolverDnDormqr(h, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, M, NC, NQ, dA, M, dtau, dC, M, dwork, lwork,
                                   dinfo + 1)
                : cusolverDnSormqr(h, CUBLAS_SIDE_LEFT, CUBLAS_OP_T, M, NC, NQ, dA, M, dtau, dC, M, dwork, lwork,
                                   dinfo + 1));
    CHECK_RT(cudaFree(dwork));
    CHECK_DN(ty ? cusolverDnDorgqr_bufferSize(h, M, NQ, NQ, dA, M, dtau, &lwork)
                : cusolverDnSorgqr_bufferSize(h, M, NQ, NQ, dA, M, dtau, &lwork));
    CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * es));
    CHECK_DN(ty ? cusolverDnDorgqr(h, M, NQ, NQ, dA, M, dtau, dwork, lwork, dinfo + 2)
                : cusolverDnSorgqr(h, M, NQ, NQ, dA, M, dtau, dwork, lwork, dinfo + 2));
    CHECK_RT(cudaDeviceSynchronize());
    CHECK_RT(cudaMemcpy(info, dinfo, sizeof info, cudaMemcpyDeviceToHost));
    CHECK_RT(cudaMemcpy(hQ, dA, ab, cudaMemcpyDeviceToHost));
    CHECK_RT(cudaMemcpy(hQC, dC, cb, cudaMemcpyDeviceToHost));

    /* ||Q R - A||_F / ||A||_F, R the upper triangle of geqrf's output. */
    double err = 0, norm = 0;
    for (int j = 0; j < NQ; j++)
        for (int i = 0; i < M; i++) {
            double s = -at(hA, ty, i + (size_t)j * M);
            for (int k = 0; k <= j; k++) s += at(hQ, ty, i + (size_t)k * M) * at(hF, ty, k + (size_t)j * M);
            err += s * s;
            norm += at(hA, ty, i + (size_t)j * M) * at(hA, ty, i + (size_t)j * M);
        }
    int orth = orthonormality(hQ, ty, M, NQ) < tol(ty), product = sqrt(err / norm) < tol(ty);
    int ok = info[0] == 0 && info[2] == 0 && orth && product;
    printf("%sgeqrf+orgqr %dx%d%s: info %d, orthonormal %s, product %s\n", x ? "X" : ty ? "D" : "S", M, NQ,
           x ? (ty ? " R_64F" : " R_32F") : "", info[0] ? info[0] : info[2], orth ? "ok" : "WRONG",
           product ? "ok" : "WRONG");
    check(ok);
    /* Q^T C's first NQ rows are the formed Q's; every column keeps its norm. */
    err = norm = 0;
    int norms = 1;
    for (int c = 0; c < NC; c++) {
        double before = 0, after = 0;
        for (int i = 0; i < M; i++) {
            before += at(hC, ty, i + (size_t)c * M) * at(hC, ty, i + (size_t)c * M);
            after += at(hQC, ty, i + (size_t)c * M) * at(hQC, ty, i + (size_t)c * M);
        }
        if (mag(sqrt(after) - sqrt(before)) > tol(ty) * sqrt(before)) norms = 0;
        norm += before;
        for (int i = 0; i < NQ; i++) {
            double s = -at(hQC, ty, i + (size_t)c * M);
            for (int r = 0; r < M; r++) s += at(hQ, ty, r + (size_t)i * M) * at(hC, ty, r + (size_t)c * M);
            err += s * s;
        }
    }
    ok = info[1] == 0 && norms && sqrt(err / norm) < tol(ty);
    printf("%sormqr L T%s: info %d, %s\n", x ? "Xgeqrf, " : ty ? "D" : "S", x ? (ty ? " R_64F" : " R_32F") : "",
           info[1], ok ? "ok" : "WRONG");
    check(ok);
    free(hwork);
    CHECK_RT(cudaFree(dwork));
    CHECK_RT(cudaFree(dA));
    CHECK_RT(cudaFree(dtau));
    CHECK_RT(cudaFree(dC));
    CHECK_RT(cudaFree(dinfo));
    return 0;
}

/* The eigenvalues (ascending) and, with `vectors`, eigenvectors of `sym`
 * by syevd or Xsyevd (x), in float or double (ty), from its lower or
 * upper triangle (up); the other triangle holds junk, never to be read. */
static int eig(int x, int ty, int up, int vectors) {
    size_t es = ty ? sizeof(double) : sizeof(float), ab = (size_t)E * E * es;
    cudaDataType dt = ty ? CUDA_R_64F : CUDA_R_32F;
    cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    cublasFillMode_t uplo = up ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    double hS[E * E], hA[E * E], hV[E * E], hW[E]; /* as floats or doubles */
    for (int j = 0; j < E; j++)
        for (int i = 0; i < E; i++) {
            put(hS, ty, i + (size_t)j * E, sym[i + j * E]);
            put(hA, ty, i + (size_t)j * E, (up ? i <= j : i >= j) ? sym[i + j * E] : 99);
        }
    void *dA, *dW, *dwork, *hwork = NULL;
    int *dinfo, info = -1, lwork = 0;
    CHECK_RT(cudaMalloc(&dA, ab));
    CHECK_RT(cudaMalloc(&dW, E * es));
    CHECK_RT(cudaMalloc((void **)&dinfo, sizeof info));
    CHECK_RT(cudaMemcpy(dA, hA, ab, cudaMemcpyHostToDevice));
    if (!x) {
        CHECK_DN(ty ? cusolverDnDsyevd_bufferSize(h, jobz, uplo, E, dA, E, dW, &lwork)
                    : cusolverDnSsyevd_bufferSize(h, jobz, uplo, E, dA, E, dW, &lwork));
        CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * es));
        CHECK_DN(ty ? cusolverDnDsyevd(h, jobz, uplo, E, dA, E, dW, dwork, lwork, dinfo)
                    : cusolverDnSsyevd(h, jobz, uplo, E, dA, E, dW, dwork, lwork, dinfo));
    } else {
        size_t dbytes = 0, hbytes = 0;
        CHECK_DN(cusolverDnXsyevd_bufferSize(h, params, jobz, uplo, E, dt, dA, E, dt, dW, dt, &dbytes, &hbytes));
        CHECK_RT(cudaMalloc(&dwork, dbytes ? dbytes : 1));
        if (hbytes && !(hwork = malloc(hbytes))) return 1;
        CHECK_DN(cusolverDnXsyevd(h, params, jobz, uplo, E, dt, dA, E, dt, dW, dt, dwork, dbytes, hwork, hbytes,
                                  dinfo));
    }
    CHECK_RT(cudaDeviceSynchronize());
    CHECK_RT(cudaMemcpy(&info, dinfo, sizeof info, cudaMemcpyDeviceToHost));
    CHECK_RT(cudaMemcpy(hW, dW, E * es, cudaMemcpyDeviceToHost));
    if (vectors) CHECK_RT(cudaMemcpy(hV, dA, ab, cudaMemcpyDeviceToHost));

    int ascending = 1;
    for (int i = 0; i + 1 < E; i++)
        if (!(at(hW, ty, i) <= at(hW, ty, i + 1))) ascending = 0;
    const char *how = x ? (ty ? " R_64F" : " R_32F") : "", *side = up ? "upper" : "lower";
    char name = x ? 'X' : ty ? 'D' : 'S';
    int ok;
    if (vectors) {
        /* ||S V - V diag(W)||_F / ||S||_F, S the whole symmetric matrix. */
        double err = 0, norm = 0;
        for (int j = 0; j < E; j++)
            for (int i = 0; i < E; i++) {
                double s = -at(hV, ty, i + (size_t)j * E) * at(hW, ty, j);
                for (int k = 0; k < E; k++) s += at(hS, ty, i + (size_t)k * E) * at(hV, ty, k + (size_t)j * E);
                err += s * s;
                norm += at(hS, ty, i + (size_t)j * E) * at(hS, ty, i + (size_t)j * E);
            }
        int residual = sqrt(err / norm) < tol(ty), orth = orthonormality(hV, ty, E, E) < tol(ty);
        ok = info == 0 && ascending && residual && orth;
        printf("%csyevd vectors %s%s: info %d, %s, residual %s, orthonormal %s\n", name, side, how, info,
               ascending ? "ascending" : "NOT ascending", residual ? "ok" : "WRONG", orth ? "ok" : "WRONG");
        if (!x && !up)
            for (int i = 0; i < E; i++) with_vectors[ty][i] = at(hW, ty, i);
    } else {
        /* The same eigenvalues as with vectors, to the type's tolerance of
         * the largest. */
        double big = 0;
        int same = 1;
        for (int i = 0; i < E; i++)
            if (mag(with_vectors[ty][i]) > big) big = mag(with_vectors[ty][i]);
        for (int i = 0; i < E; i++)
            if (!(mag(at(hW, ty, i) - with_vectors[ty][i]) <= tol(ty) * big)) same = 0;
        ok = info == 0 && ascending && same;
        printf("%csyevd values only %s%s: info %d, %s, %s\n", name, side, how, info,
               ascending ? "ascending" : "NOT ascending", same ? "as with vectors" : "NOT as with vectors");
    }
    check(ok);
    free(hwork);
    CHECK_RT(cudaFree(dwork));
    CHECK_RT(cudaFree(dA));
    CHECK_RT(cudaFree(dW));
    CHECK_RT(cudaFree(dinfo));
    return 0;
}

/* What QR and the eigensolver refuse before any work: a leading
 * dimension under m, a jobz that is neither mode. */
static int qr_eig_refused(void) {
    void *dA, *dW, *dwork;
    int *dinfo, lwork = 0;
    CHECK_RT(cudaMalloc(&dA, (size_t)M * NQ * sizeof(double)));
    CHECK_RT(cudaMalloc(&dW, (size_t)NQ * sizeof(double)));
    CHECK_RT(cudaMalloc((void **)&dinfo, sizeof(int)));
    CHECK_DN(cusolverDnDgeqrf_bufferSize(h, M, NQ, dA, M, &lwork));
    CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * sizeof(double)));
    cusolverStatus_t s = cusolverDnDgeqrf(h, M, NQ, dA, M - 1, dW, dwork, lwork, dinfo);
    printf("Dgeqrf lda < m: status %d\n", s);
    check(s == CUSOLVER_STATUS_INVALID_VALUE);
    s = cusolverDnDsyevd_bufferSize(h, (cusolverEigMode_t)2, CUBLAS_FILL_MODE_LOWER, E, dA, E, dW, &lwork);
    /* Printed, not judged: NVIDIA's library (CUDA 13) answers 0 here, the
     * CPU stand-in 3; the answer is compared, natively against remoted. */
    printf("Dsyevd_bufferSize jobz 2: status %d\n", s);
    CHECK_RT(cudaFree(dwork));
    CHECK_RT(cudaFree(dA));
    CHECK_RT(cudaFree(dW));
    CHECK_RT(cudaFree(dinfo));
    return 0;
}

/* The singular values (descending) and, with `vectors`, U and V of the
 * tall or wide matrix by gesvdj, in float or double (ty), economy-size
 * (U m x SN, V n x SN) or full (m x m, n x n, with a leading dimension
 * over m for A, its extra rows junk); with_params: its settings through a
 * gesvdjInfo_t (tolerance, sweeps, sorting), else the info's defaults. */
static int svd(int ty, int wide, int vectors, int econ, int with_params) {
    int m = wide ? SN : SM, n = wide ? SM : SN, k = SN, lda = econ ? m : m + 2;
    int ucols = econ ? k : m, vcols = econ ? k : n;
    size_t es = ty ? sizeof(double) : sizeof(float);
    cusolverEigMode_t jobz = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    const double *src = wide ? svd_wide : svd_tall;
    double hA[(SM + 2) * SM], hS[SN], hU[SM * SM], hV[SM * SM]; /* as floats or doubles */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < lda; i++) put(hA, ty, i + (size_t)j * lda, i < m ? src[i + j * m] : 99);
    /* Always a gesvdjInfo_t: NVIDIA's library (CUDA 13, H200) crashes
     * given NULL. Without with_params it keeps its defaults. */
    gesvdjInfo_t params_j = NULL;
    CHECK_DN(cusolverDnCreateGesvdjInfo(&params_j));
    if (with_params) {
        CHECK_DN(cusolverDnXgesvdjSetTolerance(params_j, ty ? 1e-13 : 1e-6));
        CHECK_DN(cusolverDnXgesvdjSetMaxSweeps(params_j, 50));
        CHECK_DN(cusolverDnXgesvdjSetSortEig(params_j, 1));
    }
    void *dA, *dS, *dU = NULL, *dV = NULL, *dwork;
    int *dinfo, info = -1, lwork = 0;
    CHECK_RT(cudaMalloc(&dA, (size_t)lda * n * es));
    CHECK_RT(cudaMalloc(&dS, k * es));
    /* U and V even for values only: NVIDIA's library (CUDA 13, H200)
     * fails a full-size one without them (status 6), then crashes. */
    CHECK_RT(cudaMalloc(&dU, (size_t)m * ucols * es));
    CHECK_RT(cudaMalloc(&dV, (size_t)n * vcols * es));
    CHECK_RT(cudaMalloc((void **)&dinfo, sizeof info));
    CHECK_RT(cudaMemcpy(dA, hA, (size_t)lda * n * es, cudaMemcpyHostToDevice));
    CHECK_DN(ty ? cusolverDnDgesvdj_bufferSize(h, jobz, econ, m, n, dA, lda, dS, dU, m, dV, n, &lwork, params_j)
                : cusolverDnSgesvdj_bufferSize(h, jobz, econ, m, n, dA, lda, dS, dU, m, dV, n, &lwork, params_j));
    CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * es));
    CHECK_DN(ty ? cusolverDnDgesvdj(h, jobz, econ, m, n, dA, lda, dS, dU, m, dV, n, dwork, lwork, dinfo, params_j)
                : cusolverDnSgesvdj(h, jobz, econ, m, n, dA, lda, dS, dU, m, dV, n, dwork, lwork, dinfo, params_j));
    CHECK_RT(cudaDeviceSynchronize());
    CHECK_RT(cudaMemcpy(&info, dinfo, sizeof info, cudaMemcpyDeviceToHost));
    CHECK_RT(cudaMemcpy(hS, dS, k * es, cudaMemcpyDeviceToHost));
    if (vectors) {
        CHECK_RT(cudaMemcpy(hU, dU, (size_t)m * ucols * es, cudaMemcpyDeviceToHost));
        CHECK_RT(cudaMemcpy(hV, dV, (size_t)n * vcols * es, cudaMemcpyDeviceToHost));
    }

    /* Descending, and none negative. */
    int descending = at(hS, ty, k - 1) >= 0;
    for (int i = 0; i + 1 < k; i++)
        if (!(at(hS, ty, i) >= at(hS, ty, i + 1))) descending = 0;
    char name = ty ? 'D' : 'S';
    int ok;
    if (vectors) {
        /* ||U diag(S) V^T - A||_F / ||A||_F over U's and V's first k columns. */
        double err = 0, norm = 0;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = -src[i + j * m];
                for (int l = 0; l < k; l++)
                    s += at(hU, ty, i + (size_t)l * m) * at(hS, ty, l) * at(hV, ty, j + (size_t)l * n);
                err += s * s;
                norm += src[i + j * m] * src[i + j * m];
            }
        int orth = orthonormality(hU, ty, m, ucols) < tol(ty) && orthonormality(hV, ty, n, vcols) < tol(ty);
        int product = sqrt(err / norm) < tol(ty);
        ok = info == 0 && descending && orth && product;
        printf("%cgesvdj %dx%d %s: info %d, %s, orthonormal %s, product %s\n", name, m, n, econ ? "econ" : "full",
               info, descending ? "descending" : "NOT descending and non-negative", orth ? "ok" : "WRONG",
               product ? "ok" : "WRONG");
        for (int i = 0; i < k; i++) svd_with_vectors[ty][wide][i] = at(hS, ty, i);
    } else {
        /* The same singular values as with vectors, to the type's
         * tolerance of the largest. */
        const double *want = svd_with_vectors[ty][wide];
        int same = 1;
        for (int i = 0; i < k; i++)
            if (!(mag(at(hS, ty, i) - want[i]) <= tol(ty) * want[0])) same = 0;
        ok = info == 0 && descending && same;
        printf("%cgesvdj %dx%d values only: info %d, %s, %s\n", name, m, n, info,
               descending ? "descending" : "NOT descending and non-negative",
               same ? "as with vectors" : "NOT as with vectors");
    }
    check(ok);
    CHECK_DN(cusolverDnDestroyGesvdjInfo(params_j));
    CHECK_RT(cudaFree(dwork));
    CHECK_RT(cudaFree(dA));
    CHECK_RT(cudaFree(dS));
    CHECK_RT(cudaFree(dU));
    CHECK_RT(cudaFree(dV));
    CHECK_RT(cudaFree(dinfo));
    return 0;
}

/* What gesvdj refuses before any work: a leading dimension under m. */
static int svd_refused(void) {
    void *dA, *dS, *dwork;
    int *dinfo, lwork = 0;
    CHECK_RT(cudaMalloc(&dA, (size_t)SM * SN * sizeof(double)));
    CHECK_RT(cudaMalloc(&dS, (size_t)SN * sizeof(double)));
    CHECK_RT(cudaMalloc((void **)&dinfo, sizeof(int)));
    gesvdjInfo_t params_j;
    CHECK_DN(cusolverDnCreateGesvdjInfo(&params_j));
    CHECK_DN(cusolverDnDgesvdj_bufferSize(h, CUSOLVER_EIG_MODE_NOVECTOR, 0, SM, SN, dA, SM, dS, NULL, SM, NULL, SN,
                                          &lwork, params_j));
    CHECK_RT(cudaMalloc(&dwork, (lwork > 0 ? lwork : 1) * sizeof(double)));
    cusolverStatus_t s = cusolverDnDgesvdj(h, CUSOLVER_EIG_MODE_NOVECTOR, 0, SM, SN, dA, SM - 1, dS, NULL, SM, NULL,
                                           SN, dwork, lwork, dinfo, params_j);
    printf("Dgesvdj lda < m: status %d\n", s);
    check(s == CUSOLVER_STATUS_INVALID_VALUE);
    CHECK_DN(cusolverDnDestroyGesvdjInfo(params_j));
    CHECK_RT(cudaFree(dwork));
    CHECK_RT(cudaFree(dA));
    CHECK_RT(cudaFree(dS));
    CHECK_RT(cudaFree(dinfo));
    return 0;
}

/* Through Wormhole, what it exports only to refuse (LDL^T, SVD, Jacobi
 * eigensolvers...): a clear status, not a missing symbol. */
static int refused(void) {
    int lwork = -1;
    syevjInfo_t info = NULL;
    /* Weak symbols (wormhole_cusolver_min.h): NULL where nothing exports them. */
    if (!cusolverDnDsytrf_bufferSize || !cusolverDnDgesvd_bufferSize || !cusolverDnCreateSyevjInfo) {
        printf("not exported here\n");
        return 2;
    }
    CHECK_DN(cusolverDnCreate(&h));
    cusolverStatus_t s = cusolverDnDsytrf_bufferSize(h, N, NULL, N, &lwork);
    printf("sytrf size: %d, lwork %d\n", s, lwork);
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
    /* QR's matrix and C, uniform; the eigenproblem's, uniform, symmetric. */
    for (int i = 0; i < M * NQ; i++) tall[i] = sample_next(&seed);
    for (int i = 0; i < M * NC; i++) cmat[i] = sample_next(&seed);
    for (int j = 0; j < E; j++)
        for (int i = 0; i <= j; i++) sym[i + j * E] = sym[j + i * E] = sample_next(&seed);
    /* The SVD's two matrices, uniform. */
    for (int i = 0; i < SM * SN; i++) svd_tall[i] = sample_next(&seed);
    for (int i = 0; i < SN * SM; i++) svd_wide[i] = sample_next(&seed);

    /* A line at a time: a crash in a vendor library keeps what came before. */
    setvbuf(stdout, NULL, _IOLBF, 0);
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
    for (int x = 0; x <= 1; x++)
        for (int ty = 0; ty <= 1; ty++)
            if (qr(x, ty)) return 2;
    for (int x = 0; x <= 1; x++)
        for (int ty = 0; ty <= 1; ty++)
            for (int up = 0; up <= 1; up++)
                if (eig(x, ty, up, 1)) return 2;
    if (eig(0, 1, 0, 0) || eig(1, 0, 1, 0) || qr_eig_refused()) return 2;
    /* Each type and shape with vectors (econ and full, settings and NULL),
     * then two without, against those. */
    if (svd(0, 0, 1, 1, 1) || svd(0, 1, 1, 0, 0) || svd(1, 0, 1, 0, 1) || svd(1, 1, 1, 1, 0)) return 2;
    if (svd(1, 0, 0, 0, 0) || svd(0, 1, 0, 1, 1) || svd_refused()) return 2;

    CHECK_DN(cusolverDnDestroyParams(params));
    CHECK_DN(cusolverDnDestroy(h));
    CHECK_RT(cudaStreamDestroy(stream));
    printf("%s\n", failures ? "WRONG" : "correct");
    return failures ? 1 : 0;
}
