/* Part of the CPU stand-in device (see cudart.c): cuSOLVER's handles,
 * Cholesky and LU, in the legacy and 64-bit generic forms. */
#include "solver.h"

/* ---- cuSOLVER (dense) ---------------------------------------------------- */
/* LAPACK's potrf, potrs, getrf and getrs (and, further down, geqrf,
 * orgqr, ormqr, syevd and cuSOLVER's Jacobi SVD, gesvdj), column-major,
 * in the legacy (S, D) and 64-bit generic (X) forms, for elements of
 * CUDA_R_32F (0) or CUDA_R_64F (1). Both are worked on in double, as the
 * BLAS above accumulates its dots, and stored back in their own type.
 * Statuses are cusolver_common.h's. */
int cusolverDnCreate(void **h) {
    if (!h) return DN_INVALID_VALUE;
    *h = calloc(1, sizeof(struct dn));
    return *h ? DN_OK : DN_ALLOC_FAILED;
}
int cusolverDnDestroy(void *h) { if (!h) return DN_NOT_INITIALIZED; free(h); return DN_OK; }
int cusolverDnSetStream(void *h, void *s) {
    if (!h) return DN_NOT_INITIALIZED;
    ((struct dn *)h)->stream = s;
    return DN_OK;
}
int cusolverDnGetStream(void *h, void **s) {
    if (!h) return DN_NOT_INITIALIZED;
    if (!s) return DN_INVALID_VALUE;
    *s = ((struct dn *)h)->stream;
    return DN_OK;
}
int cusolverDnCreateParams(void **p) {
    if (!p) return DN_INVALID_VALUE;
    *p = calloc(1, sizeof(struct dn_params));
    return *p ? DN_OK : DN_ALLOC_FAILED;
}
int cusolverDnDestroyParams(void *p) { if (!p) return DN_INVALID_VALUE; free(p); return DN_OK; }
/* Kept, never used: there is one algorithm of each here. */
int cusolverDnSetAdvOptions(void *p, int function, int algo) {
    if (!p || function < 0 || function > 1 || algo < 0 || algo > 1) return DN_INVALID_VALUE;
    ((struct dn_params *)p)->alg[function] = algo;
    return DN_OK;
}

CPU_DEVICE_INTERNAL double dn_get(struct dn_mat a, int64_t i, int64_t j) {
    size_t k = (size_t)i + (size_t)j * (size_t)a.ld;
    return a.ty ? ((const double *)a.p)[k] : ((const float *)a.p)[k];
}
CPU_DEVICE_INTERNAL void dn_set(struct dn_mat a, int64_t i, int64_t j, double v) {
    size_t k = (size_t)i + (size_t)j * (size_t)a.ld;
    if (a.ty) ((double *)a.p)[k] = v;
    else ((float *)a.p)[k] = (float)v;
}
/* The Cholesky factor's (i, j), i >= j: L's in the lower triangle, or
 * U = L^T's in the upper one; the other triangle is never touched. */
static double dn_fac(struct dn_mat a, int up, int64_t i, int64_t j) { return up ? dn_get(a, j, i) : dn_get(a, i, j); }
static void dn_set_fac(struct dn_mat a, int up, int64_t i, int64_t j, double v) {
    if (up) dn_set(a, j, i, v);
    else dn_set(a, i, j, v);
}
/* LAPACK's info: 0, or k when the leading minor of order k is not
 * positive definite (its pivot, NaN included, is left in A(k, k)). */
static int64_t dn_cholesky(struct dn_mat a, int up, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double d = dn_fac(a, up, j, j);
        for (int64_t k = 0; k < j; k++) d -= dn_fac(a, up, j, k) * dn_fac(a, up, j, k);
        if (!(d > 0)) { dn_set_fac(a, up, j, j, d); return j + 1; }
        d = sqrt(d);
        dn_set_fac(a, up, j, j, d);
        for (int64_t i = j + 1; i < n; i++) {
            double s = dn_fac(a, up, i, j);
            for (int64_t k = 0; k < j; k++) s -= dn_fac(a, up, i, k) * dn_fac(a, up, j, k);
            dn_set_fac(a, up, i, j, s / d);
        }
    }
    return 0;
}
static void dn_cholesky_solve(struct dn_mat a, int up, int64_t n, struct dn_mat b, int64_t nrhs) {
    for (int64_t c = 0; c < nrhs; c++) {
        for (int64_t i = 0; i < n; i++) { /* L y = b */
            double s = dn_get(b, i, c);
            for (int64_t k = 0; k < i; k++) s -= dn_fac(a, up, i, k) * dn_get(b, k, c);
            dn_set(b, i, c, s / dn_fac(a, up, i, i));
        }
        for (int64_t i = n - 1; i >= 0; i--) { /* L^T x = y */
            double s = dn_get(b, i, c);
            for (int64_t k = i + 1; k < n; k++) s -= dn_fac(a, up, k, i) * dn_get(b, k, c);
            dn_set(b, i, c, s / dn_fac(a, up, i, i));
        }
    }
}
/* Pivots are int (legacy) or int64_t (X), 1-based. */
static int64_t dn_piv(const void *ipiv, int wide, int64_t i) {
    return wide ? ((const int64_t *)ipiv)[i] : ((const int *)ipiv)[i];
}
static void dn_swap(struct dn_mat a, int64_t r, int64_t s, int64_t c) {
    double t = dn_get(a, r, c);
    dn_set(a, r, c, dn_get(a, s, c));
    dn_set(a, s, c, t);
}
/* P A = L U with partial pivoting, or A = L U without it when ipiv is NULL
 * (cuSOLVER's documented meaning of a NULL ipiv). LAPACK's info: 0, or
 * the first exactly zero pivot's index, the factorization going on past it. */
static int64_t dn_lu(struct dn_mat a, int64_t m, int64_t n, void *ipiv, int wide) {
    int64_t info = 0;
    for (int64_t j = 0; j < m && j < n; j++) {
        if (ipiv) {
            int64_t p = j;
            for (int64_t i = j + 1; i < m; i++)
                if (fabs(dn_get(a, i, j)) > fabs(dn_get(a, p, j))) p = i;
            if (wide) ((int64_t *)ipiv)[j] = p + 1;
            else ((int *)ipiv)[j] = (int)(p + 1);
            for (int64_t c = 0; p != j && c < n; c++) dn_swap(a, p, j, c);
        }
        double d = dn_get(a, j, j);
        if (d == 0) { if (!info) info = j + 1; continue; }
        for (int64_t i = j + 1; i < m; i++) dn_set(a, i, j, dn_get(a, i, j) / d);
        for (int64_t c = j + 1; c < n; c++) {
            double u = dn_get(a, j, c);
            for (int64_t i = j + 1; i < m; i++) dn_set(a, i, c, dn_get(a, i, c) - dn_get(a, i, j) * u);
        }
    }
    return info;
}
/* op(A) X = B from dn_lu's factors: A = P L U, so A^T = U^T L^T P^T. */
static void dn_lu_solve(struct dn_mat a, int tr, int64_t n, const void *ipiv, int wide, struct dn_mat b, int64_t nrhs) {
    for (int64_t c = 0; c < nrhs; c++) {
        if (!tr) {
            for (int64_t i = 0; ipiv && i < n; i++) dn_swap(b, i, dn_piv(ipiv, wide, i) - 1, c);
            for (int64_t i = 0; i < n; i++) {
                double s = dn_get(b, i, c);
                for (int64_t k = 0; k < i; k++) s -= dn_get(a, i, k) * dn_get(b, k, c);
                dn_set(b, i, c, s);
            }
            for (int64_t i = n - 1; i >= 0; i--) {
                double s = dn_get(b, i, c);
                for (int64_t k = i + 1; k < n; k++) s -= dn_get(a, i, k) * dn_get(b, k, c);
                dn_set(b, i, c, s / dn_get(a, i, i));
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                double s = dn_get(b, i, c);
                for (int64_t k = 0; k < i; k++) s -= dn_get(a, k, i) * dn_get(b, k, c);
                dn_set(b, i, c, s / dn_get(a, i, i));
            }
            for (int64_t i = n - 1; i >= 0; i--) {
                double s = dn_get(b, i, c);
                for (int64_t k = i + 1; k < n; k++) s -= dn_get(a, k, i) * dn_get(b, k, c);
                dn_set(b, i, c, s);
            }
            for (int64_t i = n - 1; ipiv && i >= 0; i--) dn_swap(b, i, dn_piv(ipiv, wide, i) - 1, c);
        }
    }
}

/* Nothing here needs scratch memory, but callers must still provide what
 * bufferSize asks (potrf's and the X calls' sizes are checked), so that a
 * program that skimps fails here as it would on a GPU: one column for
 * potrf, the longer side for getrf; nothing on the host. */
CPU_DEVICE_INTERNAL int64_t dn_max1(int64_t v) { return v > 1 ? v : 1; }
static int64_t dn_potrf_lwork(int64_t n) { return dn_max1(n); }
static int64_t dn_getrf_lwork(int64_t m, int64_t n) { return dn_max1(m > n ? m : n); }
CPU_DEVICE_INTERNAL size_t dn_size(int ty) { return ty ? sizeof(double) : sizeof(float); }
/* X calls: the types must agree, and be ones this device computes in. */
CPU_DEVICE_INTERNAL int dn_types(void *h, int ty, int other) {
    if (!h) return DN_NOT_INITIALIZED;
    if (ty != other) return DN_INVALID_VALUE;
    return ty == 0 || ty == 1 ? DN_OK : DN_NOT_SUPPORTED;
}
static int dn_potrf_args(void *h, int uplo, int64_t n, int64_t lda) {
    if (!h) return DN_NOT_INITIALIZED;
    return (uplo != 0 && uplo != 1) || n < 0 || lda < dn_max1(n) ? DN_INVALID_VALUE : DN_OK;
}
CPU_DEVICE_INTERNAL int dn_getrf_args(void *h, int64_t m, int64_t n, int64_t lda) {
    if (!h) return DN_NOT_INITIALIZED;
    return m < 0 || n < 0 || lda < dn_max1(m) ? DN_INVALID_VALUE : DN_OK;
}
/* potrs and getrs: op is uplo (at most 1) or trans (at most 2: for real
 * elements CUBLAS_OP_C is T). */
static int dn_solve_args(void *h, int op, int op_max, int64_t n, int64_t nrhs, const void *A, int64_t lda,
                         const void *B, int64_t ldb, const int *info) {
    if (!h) return DN_NOT_INITIALIZED;
    if (op < 0 || op > op_max || n < 0 || nrhs < 0 || lda < dn_max1(n) || ldb < dn_max1(n) || !info ||
        (n && !A) || (n && nrhs && !B))
        return DN_INVALID_VALUE;
    return DN_OK;
}
/* `have`: the workspace's size in elements (legacy getrf is not told). */
static int dn_potrf(void *h, int ty, int uplo, int64_t n, void *A, int64_t lda, const void *work, int64_t have,
                    int *info) {
    int r = dn_potrf_args(h, uplo, n, lda);
    if (r) return r;
    if (have < dn_potrf_lwork(n) || !info || (n && (!A || !work))) return DN_INVALID_VALUE;
    *info = (int)dn_cholesky((struct dn_mat){A, ty, lda}, uplo, n);
    return DN_OK;
}
static int dn_potrs(void *h, int ty, int uplo, int64_t n, int64_t nrhs, const void *A, int64_t lda, void *B,
                    int64_t ldb, int *info) {
    int r = dn_solve_args(h, uplo, 1, n, nrhs, A, lda, B, ldb, info);
    if (r) return r;
    dn_cholesky_solve((struct dn_mat){(void *)A, ty, lda}, uplo, n, (struct dn_mat){B, ty, ldb}, nrhs);
    *info = 0;
    return DN_OK;
}
CPU_DEVICE_INTERNAL int dn_getrf(void *h, int ty, int64_t m, int64_t n, void *A, int64_t lda, const void *work, int64_t have,
                    void *ipiv, int wide, int *info) {
    int r = dn_getrf_args(h, m, n, lda);
    if (r) return r;
    if (have < dn_getrf_lwork(m, n) || !info || (m && n && (!A || !work))) return DN_INVALID_VALUE;
    *info = (int)dn_lu((struct dn_mat){A, ty, lda}, m, n, ipiv, wide);
    return DN_OK;
}
static int dn_getrs(void *h, int ty, int trans, int64_t n, int64_t nrhs, const void *A, int64_t lda,
                    const void *ipiv, int wide, void *B, int64_t ldb, int *info) {
    int r = dn_solve_args(h, trans, 2, n, nrhs, A, lda, B, ldb, info);
    if (r) return r;
    /* A pivot out of range would have this process write outside B. */
    for (int64_t i = 0; ipiv && i < n; i++)
        if (dn_piv(ipiv, wide, i) < 1 || dn_piv(ipiv, wide, i) > n) return DN_INVALID_VALUE;
    dn_lu_solve((struct dn_mat){(void *)A, ty, lda}, trans != 0, n, ipiv, wide, (struct dn_mat){B, ty, ldb}, nrhs);
    *info = 0;
    return DN_OK;
}
CPU_DEVICE_INTERNAL int dn_lwork(int r, int64_t need, int *lwork) {
    if (!r && !lwork) r = DN_INVALID_VALUE;
    if (!r) *lwork = (int)need;
    return r;
}
#define DN_LEGACY(P, T, TY)                                                                                    \
    int cusolverDn##P##potrf_bufferSize(void *h, int uplo, int n, T *A, int lda, int *lwork) {                 \
        (void)A;                                                                                               \
        return dn_lwork(dn_potrf_args(h, uplo, n, lda), dn_potrf_lwork(n), lwork);                             \
    }                                                                                                          \
    int cusolverDn##P##potrf(void *h, int uplo, int n, T *A, int lda, T *work, int lwork, int *info) {         \
        return dn_potrf(h, TY, uplo, n, A, lda, work, lwork, info);                                            \
    }                                                                                                          \
    int cusolverDn##P##potrs(void *h, int uplo, int n, int nrhs, const T *A, int lda, T *B, int ldb,           \
                             int *info) {                                                                      \
        return dn_potrs(h, TY, uplo, n, nrhs, A, lda, B, ldb, info);                                           \
    }                                                                                                          \
    int cusolverDn##P##getrf_bufferSize(void *h, int m, int n, T *A, int lda, int *lwork) {                    \
        (void)A;                                                                                               \
        return dn_lwork(dn_getrf_args(h, m, n, lda), dn_getrf_lwork(m, n), lwork);                             \
    }                                                                                                          \
    int cusolverDn##P##getrf(void *h, int m, int n, T *A, int lda, T *work, int *ipiv, int *info) {           \
        return dn_getrf(h, TY, m, n, A, lda, work, INT64_MAX, ipiv, 0, info);                                  \
    }                                                                                                          \
    int cusolverDn##P##getrs(void *h, int trans, int n, int nrhs, const T *A, int lda, const int *ipiv, T *B,  \
                             int ldb, int *info) {                                                             \
        return dn_getrs(h, TY, trans, n, nrhs, A, lda, ipiv, 0, B, ldb, info);                                 \
    }
DN_LEGACY(S, float, 0)
DN_LEGACY(D, double, 1)
/* The 64-bit generic API; params (NULL: the defaults) choose nothing here. */
CPU_DEVICE_INTERNAL int dn_bytes(int r, int64_t need, int ty, size_t *device, size_t *host) {
    if (!r && (!device || !host)) r = DN_INVALID_VALUE;
    if (r) return r;
    *device = (size_t)need * dn_size(ty);
    *host = 0;
    return DN_OK;
}
int cusolverDnXpotrf_bufferSize(void *h, void *params, int uplo, int64_t n, int ty, const void *A, int64_t lda,
                                int compute, size_t *device, size_t *host) {
    (void)params; (void)A;
    int r = dn_types(h, ty, compute);
    return dn_bytes(r ? r : dn_potrf_args(h, uplo, n, lda), dn_potrf_lwork(n), ty, device, host);
}
int cusolverDnXpotrf(void *h, void *params, int uplo, int64_t n, int ty, void *A, int64_t lda, int compute,
                     void *device, size_t device_bytes, void *host, size_t host_bytes, int *info) {
    (void)params; (void)host; (void)host_bytes;
    int r = dn_types(h, ty, compute);
    return r ? r : dn_potrf(h, ty, uplo, n, A, lda, device, (int64_t)(device_bytes / dn_size(ty)), info);
}
int cusolverDnXpotrs(void *h, void *params, int uplo, int64_t n, int64_t nrhs, int ty, const void *A, int64_t lda,
                     int tyb, void *B, int64_t ldb, int *info) {
    (void)params;
    int r = dn_types(h, ty, tyb);
    return r ? r : dn_potrs(h, ty, uplo, n, nrhs, A, lda, B, ldb, info);
}
int cusolverDnXgetrf_bufferSize(void *h, void *params, int64_t m, int64_t n, int ty, const void *A, int64_t lda,
                                int compute, size_t *device, size_t *host) {
    (void)params; (void)A;
    int r = dn_types(h, ty, compute);
    return dn_bytes(r ? r : dn_getrf_args(h, m, n, lda), dn_getrf_lwork(m, n), ty, device, host);
}
int cusolverDnXgetrf(void *h, void *params, int64_t m, int64_t n, int ty, void *A, int64_t lda, int64_t *ipiv,
                     int compute, void *device, size_t device_bytes, void *host, size_t host_bytes, int *info) {
    (void)params; (void)host; (void)host_bytes;
    int r = dn_types(h, ty, compute);
    return r ? r : dn_getrf(h, ty, m, n, A, lda, device, (int64_t)(device_bytes / dn_size(ty)), ipiv, 1, info);
}
int cusolverDnXgetrs(void *h, void *params, int trans, int64_t n, int64_t nrhs, int ty, const void *A, int64_t lda,
                     const int64_t *ipiv, int tyb, void *B, int64_t ldb, int *info) {
    (void)params;
    int r = dn_types(h, ty, tyb);
    return r ? r : dn_getrs(h, ty, trans, n, nrhs, A, lda, ipiv, 1, B, ldb, info);
}
