/* Part of the CPU stand-in device (see cudart.c). */
#include "cpu_device.h"
#include "solver.h"

/* QR (LAPACK's geqrf, orgqr and ormqr, unblocked as geqr2, org2r and
 * orm2r) and the symmetric eigenproblem (syevd's contract, by cyclic
 * Jacobi). The reflector H(i) = I - tau(i) v v^T has v(i) = 1 (implied)
 * and v(i+1:) below the diagonal of column i, as geqrf leaves it. */
/* H(i) (v in column i of `v`, `len` long) applied to columns from..to-1
 * of c from the left (rows i..len-1), or to its rows from..to-1 from the
 * right (columns i..len-1). */
static void dn_reflect(struct dn_mat v, int64_t i, int64_t len, double tau, struct dn_mat c, int right, int64_t from,
                       int64_t to) {
    if (tau == 0) return;
    for (int64_t x = from; x < to; x++) {
        double w = right ? dn_get(c, x, i) : dn_get(c, i, x);
        for (int64_t r = i + 1; r < len; r++) w += dn_get(v, r, i) * (right ? dn_get(c, x, r) : dn_get(c, r, x));
        w *= tau;
        if (right) dn_set(c, x, i, dn_get(c, x, i) - w);
        else dn_set(c, i, x, dn_get(c, i, x) - w);
        for (int64_t r = i + 1; r < len; r++) {
            if (right) dn_set(c, x, r, dn_get(c, x, r) - w * dn_get(v, r, i));
            else dn_set(c, r, x, dn_get(c, r, x) - w * dn_get(v, r, i));
        }
    }
}
/* LAPACK's larfg for each column: beta = -sign(alpha) ||(alpha, x)||,
 * tau = (beta - alpha) / beta, v = x / (alpha - beta); tau 0 (H = I) when
 * x is zero. The reflectors are applied as stored (tau and v in the
 * element type), so that orgqr's Q is the one that made R. */
static void dn_qr(struct dn_mat a, int64_t m, int64_t n, struct dn_mat tau) {
    for (int64_t j = 0; j < m && j < n; j++) {
        double alpha = dn_get(a, j, j), xnorm = 0, t = 0;
        for (int64_t i = j + 1; i < m; i++) xnorm = hypot(xnorm, dn_get(a, i, j));
        if (xnorm != 0) {
            double beta = -copysign(hypot(alpha, xnorm), alpha), s = 1 / (alpha - beta);
            t = (beta - alpha) / beta;
            for (int64_t i = j + 1; i < m; i++) dn_set(a, i, j, dn_get(a, i, j) * s);
            dn_set(a, j, j, beta);
        }
        dn_set(tau, j, 0, t);
        dn_reflect(a, j, m, dn_get(tau, j, 0), a, 0, j + 1, n);
    }
}
/* Q's first n columns, H(0) ... H(k-1) applied to the unit matrix's. */
static void dn_form_q(struct dn_mat a, int64_t m, int64_t n, int64_t k, struct dn_mat tau) {
    for (int64_t c = k; c < n; c++)
        for (int64_t r = 0; r < m; r++) dn_set(a, r, c, r == c);
    for (int64_t i = k - 1; i >= 0; i--) {
        double t = dn_get(tau, i, 0);
        dn_reflect(a, i, m, t, a, 0, i + 1, n);
        for (int64_t r = i + 1; r < m; r++) dn_set(a, r, i, -t * dn_get(a, r, i));
        dn_set(a, i, i, 1 - t);
        for (int64_t r = 0; r < i; r++) dn_set(a, r, i, 0);
    }
}
/* C := op(Q) C (left) or C op(Q) (right), Q = H(0) ... H(k-1): Q^T C and
 * C Q take the reflectors first to last, Q C and C Q^T last to first. */
static void dn_apply_q(struct dn_mat a, int left, int tr, int64_t m, int64_t n, int64_t k, struct dn_mat tau,
                       struct dn_mat c) {
    int forward = left == tr;
    for (int64_t s = 0; s < k; s++) {
        int64_t i = forward ? s : k - 1 - s;
        dn_reflect(a, i, left ? m : n, dn_get(tau, i, 0), c, !left, 0, left ? n : m);
    }
}
/* Cyclic Jacobi on s (n x n, full, column-major), v := the rotations'
 * product: sweeps until every off-diagonal element is within
 * DBL_EPSILON ||S||_F (so its eigenvalues are as accurate as a
 * backward-stable method's). 0, or (after 100 sweeps, or for an input not
 * finite) how many pairs did not converge, at least 1. */
static int64_t dn_jacobi(double *s, double *v, int64_t n) {
    double norm = 0;
    for (int64_t i = 0; i < n * n; i++) norm = hypot(norm, s[i]);
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < n; i++) v[i + j * n] = i == j;
    if (!isfinite(norm)) return n;
    double tol = 2.220446049250313e-16 * norm;
    for (int sweep = 0; sweep < 100; sweep++) {
        int64_t rotated = 0;
        for (int64_t p = 0; p < n; p++)
            for (int64_t q = p + 1; q < n; q++) {
                double apq = s[p + q * n];
                if (fabs(apq) <= tol) continue;
                rotated++;
                /* Golub and Van Loan's sym.schur2: J^T S J zeroes (p, q). */
                double theta = (s[q + q * n] - s[p + p * n]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + hypot(1, theta));
                double c = 1 / hypot(1, t), sn = t * c;
                for (int64_t k = 0; k < n; k++) {
                    double kp = s[k + p * n], kq = s[k + q * n];
                    s[k + p * n] = c * kp - sn * kq;
                    s[k + q * n] = sn * kp + c * kq;
                }
                for (int64_t k = 0; k < n; k++) {
                    double pk = s[p + k * n], qk = s[q + k * n];
                    s[p + k * n] = c * pk - sn * qk;
                    s[q + k * n] = sn * pk + c * qk;
                }
                s[p + q * n] = s[q + p * n] = 0;
                for (int64_t k = 0; k < n; k++) {
                    double kp = v[k + p * n], kq = v[k + q * n];
                    v[k + p * n] = c * kp - sn * kq;
                    v[k + q * n] = sn * kp + c * kq;
                }
            }
        if (!rotated) return 0;
    }
    int64_t left = 0;
    for (int64_t p = 0; p < n; p++)
        for (int64_t q = p + 1; q < n; q++) left += !(fabs(s[p + q * n]) <= tol);
    return left ? left : 1;
}
/* syevd: the `uplo` triangle of A read, W := its eigenvalues ascending
 * (equal ones in Jacobi's order) and, for jobz 1, A := their
 * eigenvectors, each with its largest component (the first of equals)
 * positive, so the output is reproducible. A is left as it was for jobz 0
 * (LAPACK lets it be destroyed). Work is in double outside the caller's
 * memory. */
static int dn_eigen(struct dn_mat a, int up, int vectors, int64_t n, struct dn_mat w, int *info) {
    if (n == 0) { *info = 0; return DN_OK; }
    double *s = malloc(2 * (size_t)n * (size_t)n * sizeof(double)), *v = s + (size_t)n * (size_t)n;
    int64_t *order = malloc((size_t)n * sizeof(int64_t));
    if (!s || !order) { free(s); free(order); return DN_ALLOC_FAILED; }
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = j; i < n; i++) s[i + j * n] = s[j + i * n] = up ? dn_get(a, j, i) : dn_get(a, i, j);
    int64_t left = dn_jacobi(s, v, n);
    if (left) {
        for (int64_t i = 0; i < n; i++) dn_set(w, i, 0, NAN);
        free(s);
        free(order);
        *info = (int)(left < INT32_MAX ? left : INT32_MAX);
        return DN_OK;
    }
    for (int64_t p = 0; p < n; p++) { /* a stable insertion sort */
        int64_t i = p;
        for (; i > 0 && s[order[i - 1] * (n + 1)] > s[p * (n + 1)]; i--) order[i] = order[i - 1];
        order[i] = p;
    }
    for (int64_t j = 0; j < n; j++) {
        const double *col = v + order[j] * n;
        dn_set(w, j, 0, s[order[j] * (n + 1)]);
        if (!vectors) continue;
        int64_t big = 0;
        for (int64_t i = 1; i < n; i++)
            if (fabs(col[i]) > fabs(col[big])) big = i;
        double sign = col[big] < 0 ? -1 : 1;
        for (int64_t i = 0; i < n; i++) dn_set(a, i, j, sign * col[i]);
    }
    free(s);
    free(order);
    *info = 0;
    return DN_OK;
}

/* Workspace sizes, in elements: LAPACK's minimum LWORK for each (the
 * unblocked geqrf, orgqr and ormqr need one row or column of it, syevd
 * 2n + 1 without vectors and 1 + 6n + 2n^2 with them). */
static int64_t dn_geqrf_lwork(int64_t n) { return dn_max1(n); }
static int64_t dn_ormqr_lwork(int side, int64_t m, int64_t n) { return dn_max1(side ? m : n); }
static int64_t dn_syevd_lwork(int vectors, int64_t n) {
    return n <= 1 ? 1 : vectors ? 1 + 6 * n + 2 * n * n : 2 * n + 1;
}
static int dn_orgqr_args(void *h, int64_t m, int64_t n, int64_t k, int64_t lda) {
    if (!h) return DN_NOT_INITIALIZED;
    return n < 0 || m < n || k < 0 || k > n || lda < dn_max1(m) ? DN_INVALID_VALUE : DN_OK;
}
/* side: LEFT 0 (A m x k), RIGHT 1 (A n x k); trans as getrs's. */
static int dn_ormqr_args(void *h, int side, int trans, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldc) {
    if (!h) return DN_NOT_INITIALIZED;
    int64_t nq = side ? n : m;
    return side < 0 || side > 1 || trans < 0 || trans > 2 || m < 0 || n < 0 || k < 0 || k > nq ||
                   lda < dn_max1(nq) || ldc < dn_max1(m)
               ? DN_INVALID_VALUE
               : DN_OK;
}
static int dn_syevd_args(void *h, int jobz, int uplo, int64_t n, int64_t lda) {
    if (!h) return DN_NOT_INITIALIZED;
    return jobz < 0 || jobz > 1 || (uplo != 0 && uplo != 1) || n < 0 || lda < dn_max1(n) ? DN_INVALID_VALUE : DN_OK;
}
static int dn_geqrf(void *h, int ty, int64_t m, int64_t n, void *A, int64_t lda, void *tau, const void *work,
                    int64_t have, int *info) {
    int r = dn_getrf_args(h, m, n, lda);
    if (r) return r;
    if (have < dn_geqrf_lwork(n) || !info || (m && n && (!A || !tau || !work))) return DN_INVALID_VALUE;
    dn_qr((struct dn_mat){A, ty, lda}, m, n, (struct dn_mat){tau, ty, 1});
    *info = 0;
    return DN_OK;
}
static int dn_orgqr(void *h, int ty, int64_t m, int64_t n, int64_t k, void *A, int64_t lda, const void *tau,
                    const void *work, int64_t have, int *info) {
    int r = dn_orgqr_args(h, m, n, k, lda);
    if (r) return r;
    if (have < dn_geqrf_lwork(n) || !info || (n && (!A || !work)) || (k && !tau)) return DN_INVALID_VALUE;
    dn_form_q((struct dn_mat){A, ty, lda}, m, n, k, (struct dn_mat){(void *)tau, ty, 1});
    *info = 0;
    return DN_OK;
}
static int dn_ormqr(void *h, int ty, int side, int trans, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                    const void *tau, void *C, int64_t ldc, const void *work, int64_t have, int *info) {
    int r = dn_ormqr_args(h, side, trans, m, n, k, lda, ldc);
    if (r) return r;
    if (have < dn_ormqr_lwork(side, m, n) || !info || (m && n && (!C || !work || (k && (!A || !tau)))))
        return DN_INVALID_VALUE;
    if (m && n)
        dn_apply_q((struct dn_mat){(void *)A, ty, lda}, !side, trans != 0, m, n, k,
                   (struct dn_mat){(void *)tau, ty, 1}, (struct dn_mat){C, ty, ldc});
    *info = 0;
    return DN_OK;
}
static int dn_syevd(void *h, int ty, int jobz, int uplo, int64_t n, void *A, int64_t lda, void *W, const void *work,
                    int64_t have, int *info) {
    int r = dn_syevd_args(h, jobz, uplo, n, lda);
    if (r) return r;
    if (have < dn_syevd_lwork(jobz, n) || !info || (n && (!A || !W || !work))) return DN_INVALID_VALUE;
    return dn_eigen((struct dn_mat){A, ty, lda}, uplo, jobz, n, (struct dn_mat){W, ty, 1}, info);
}
/* A size past an int cannot be asked for through the legacy API. */
static int dn_lwork_int(int r, int64_t need, int *lwork) {
    return dn_lwork(r || need <= INT32_MAX ? r : DN_INVALID_VALUE, need, lwork);
}
#define DN_LEGACY_QR(P, T, TY)                                                                                 \
    int cusolverDn##P##geqrf_bufferSize(void *h, int m, int n, T *A, int lda, int *lwork) {                    \
        (void)A;                                                                                               \
        return dn_lwork_int(dn_getrf_args(h, m, n, lda), dn_geqrf_lwork(n), lwork);                            \
    }                                                                                                          \
    int cusolverDn##P##geqrf(void *h, int m, int n, T *A, int lda, T *tau, T *work, int lwork, int *info) {    \
        return dn_geqrf(h, TY, m, n, A, lda, tau, work, lwork, info);                                          \
    }                                                                                                          \
    int cusolverDn##P##orgqr_bufferSize(void *h, int m, int n, int k, const T *A, int lda, const T *tau,       \
                                        int *lwork) {                                                          \
        (void)A; (void)tau;                                                                                    \
        return dn_lwork_int(dn_orgqr_args(h, m, n, k, lda), dn_geqrf_lwork(n), lwork);                         \
    }                                                                                                          \
    int cusolverDn##P##orgqr(void *h, int m, int n, int k, T *A, int lda, const T *tau, T *work, int lwork,    \
                             int *info) {                                                                      \
        return dn_orgqr(h, TY, m, n, k, A, lda, tau, work, lwork, info);                                       \
    }                                                                                                          \
    int cusolverDn##P##ormqr_bufferSize(void *h, int side, int trans, int m, int n, int k, const T *A, int lda, \
                                        const T *tau, const T *C, int ldc, int *lwork) {                       \
        (void)A; (void)tau; (void)C;                                                                           \
        return dn_lwork_int(dn_ormqr_args(h, side, trans, m, n, k, lda, ldc), dn_ormqr_lwork(side, m, n),      \
                            lwork);                                                                            \
    }                                                                                                          \
    int cusolverDn##P##ormqr(void *h, int side, int trans, int m, int n, int k, const T *A, int lda,           \
                             const T *tau, T *C, int ldc, T *work, int lwork, int *info) {                     \
        return dn_ormqr(h, TY, side, trans, m, n, k, A, lda, tau, C, ldc, work, lwork, info);                  \
    }                                                                                                          \
    int cusolverDn##P##syevd_bufferSize(void *h, int jobz, int uplo, int n, const T *A, int lda, const T *W,   \
                                        int *lwork) {                                                          \
        (void)A; (void)W;                                                                                      \
        return dn_lwork_int(dn_syevd_args(h, jobz, uplo, n, lda), dn_syevd_lwork(jobz, n), lwork);             \
    }                                                                                                          \
    int cusolverDn##P##syevd(void *h, int jobz, int uplo, int n, T *A, int lda, T *W, T *work, int lwork,      \
                             int *info) {                                                                      \
        return dn_syevd(h, TY, jobz, uplo, n, A, lda, W, work, lwork, info);                                   \
    }
DN_LEGACY_QR(S, float, 0)
DN_LEGACY_QR(D, double, 1)
/* The X forms: A, the vector (TAU, W) and the compute type all one type. */
static int dn_types3(void *h, int ty, int vty, int compute) {
    int r = dn_types(h, ty, vty);
    return r ? r : dn_types(h, ty, compute);
}
int cusolverDnXgeqrf_bufferSize(void *h, void *params, int64_t m, int64_t n, int ty, const void *A, int64_t lda,
                                int tytau, const void *tau, int compute, size_t *device, size_t *host) {
    (void)params; (void)A; (void)tau;
    int r = dn_types3(h, ty, tytau, compute);
    return dn_bytes(r ? r : dn_getrf_args(h, m, n, lda), dn_geqrf_lwork(n), ty, device, host);
}
int cusolverDnXgeqrf(void *h, void *params, int64_t m, int64_t n, int ty, void *A, int64_t lda, int tytau, void *tau,
                     int compute, void *device, size_t device_bytes, void *host, size_t host_bytes, int *info) {
    (void)params; (void)host; (void)host_bytes;
    int r = dn_types3(h, ty, tytau, compute);
    return r ? r : dn_geqrf(h, ty, m, n, A, lda, tau, device, (int64_t)(device_bytes / dn_size(ty)), info);
}
int cusolverDnXsyevd_bufferSize(void *h, void *params, int jobz, int uplo, int64_t n, int ty, const void *A,
                                int64_t lda, int tyw, const void *W, int compute, size_t *device, size_t *host) {
    (void)params; (void)A; (void)W;
    int r = dn_types3(h, ty, tyw, compute);
    return dn_bytes(r ? r : dn_syevd_args(h, jobz, uplo, n, lda), dn_syevd_lwork(jobz, n), ty, device, host);
}
int cusolverDnXsyevd(void *h, void *params, int jobz, int uplo, int64_t n, int ty, void *A, int64_t lda, int tyw,
                     void *W, int compute, void *device, size_t device_bytes, void *host, size_t host_bytes, int *info) {
    (void)params; (void)host; (void)host_bytes;
    int r = dn_types3(h, ty, tyw, compute);
    return r ? r : dn_syevd(h, ty, jobz, uplo, n, A, lda, W, device, (int64_t)(device_bytes / dn_size(ty)), info);
}

/* Jacobi SVD (gesvdj): A = U diag(S) V^T by one-sided (Hestenes) Jacobi
 * on A's columns (m >= n) or A^T's (m < n), in double. Its settings, a
 * gesvdjInfo_t (NULL: the defaults): the tolerance (0, the default: the
 * element type's machine epsilon; one under it counts as it), the most
 * sweeps (100), and sort_svd (1), kept but never consulted: NVIDIA
 * documents it for gesvdjBatched only, gesvdj always sorting descending. */
struct dn_gesvdj { double tol; int max_sweeps, sort; };
int cusolverDnCreateGesvdjInfo(void **info) {
    if (!info) return DN_INVALID_VALUE;
    struct dn_gesvdj *p = malloc(sizeof *p);
    if (!p) return DN_ALLOC_FAILED;
    *p = (struct dn_gesvdj){0, 100, 1};
    *info = p;
    return DN_OK;
}
int cusolverDnDestroyGesvdjInfo(void *info) { if (!info) return DN_INVALID_VALUE; free(info); return DN_OK; }
int cusolverDnXgesvdjSetTolerance(void *info, double tolerance) {
    if (!info) return DN_INVALID_VALUE;
    ((struct dn_gesvdj *)info)->tol = tolerance;
    return DN_OK;
}
int cusolverDnXgesvdjSetMaxSweeps(void *info, int max_sweeps) {
    if (!info) return DN_INVALID_VALUE;
    ((struct dn_gesvdj *)info)->max_sweeps = max_sweeps;
    return DN_OK;
}
int cusolverDnXgesvdjSetSortEig(void *info, int sort_svd) {
    if (!info) return DN_INVALID_VALUE;
    ((struct dn_gesvdj *)info)->sort = sort_svd;
    return DN_OK;
}
/* One-sided Jacobi on g (rows x k, column-major): each sweep takes the
 * column pairs (p, q), p < q, in order, and rotates those with
 * |g_p . g_q| > tol ||g_p|| ||g_q|| to orthogonality (the rotation that
 * diagonalizes their 2 x 2 Gram matrix, as dn_jacobi's), r (k x k, from
 * I) taking the same rotations, so g's start = g r^T. 0 once a sweep
 * rotates nothing; 1 when max_sweeps sweeps leave some pair outside it. */
static int dn_hestenes(double *g, double *r, int64_t rows, int64_t k, double tol, int max_sweeps) {
    for (int64_t j = 0; j < k; j++)
        for (int64_t i = 0; i < k; i++) r[i + j * k] = i == j;
    for (int sweep = 0;; sweep++) {
        int64_t rotated = 0;
        for (int64_t p = 0; p < k; p++)
            for (int64_t q = p + 1; q < k; q++) {
                double *gp = g + p * rows, *gq = g + q * rows, a = 0, b = 0, c = 0;
                for (int64_t i = 0; i < rows; i++) {
                    a += gp[i] * gp[i];
                    b += gq[i] * gq[i];
                    c += gp[i] * gq[i];
                }
                if (!(fabs(c) > tol * sqrt(a) * sqrt(b))) continue;
                if (sweep >= max_sweeps) return 1; /* only checking, after the last sweep */
                rotated++;
                double zeta = (b - a) / (2 * c);
                double t = (zeta >= 0 ? 1 : -1) / (fabs(zeta) + hypot(1, zeta));
                double cs = 1 / hypot(1, t), sn = t * cs;
                for (int64_t i = 0; i < rows; i++) {
                    double x = gp[i], y = gq[i];
                    gp[i] = cs * x - sn * y;
                    gq[i] = sn * x + cs * y;
                }
                double *rp = r + p * k, *rq = r + q * k;
                for (int64_t i = 0; i < k; i++) {
                    double x = rp[i], y = rq[i];
                    rp[i] = cs * x - sn * y;
                    rq[i] = sn * x + cs * y;
                }
            }
        if (!rotated) return 0;
    }
}
/* The columns of x (rows x cols) not marked in `have` become, in order,
 * orthonormal to the marked ones and to each other: each is the unit
 * vector with the most of it outside their span (the first of equals; at
 * least 1 / rows of its square), the span projected out twice (classical
 * Gram-Schmidt) and normalized. wsum: rows doubles of scratch. */
static void dn_complete(double *x, int64_t rows, int64_t cols, unsigned char *have, double *wsum) {
    for (int64_t i = 0; i < rows; i++) wsum[i] = 0;
    for (int64_t c = 0; c < cols; c++)
        for (int64_t i = 0; have[c] && i < rows; i++) wsum[i] += x[i + c * rows] * x[i + c * rows];
    for (int64_t c = 0; c < cols; c++) {
        if (have[c]) continue;
        double *y = x + c * rows, norm = 0;
        int64_t best = 0;
        for (int64_t i = 1; i < rows; i++)
            if (wsum[i] < wsum[best]) best = i;
        for (int64_t i = 0; i < rows; i++) y[i] = i == best;
        for (int pass = 0; pass < 2; pass++)
            for (int64_t p = 0; p < cols; p++) {
                if (!have[p]) continue;
                const double *xp = x + p * rows;
                double d = 0;
                for (int64_t i = 0; i < rows; i++) d += xp[i] * y[i];
                for (int64_t i = 0; i < rows; i++) y[i] -= d * xp[i];
            }
        for (int64_t i = 0; i < rows; i++) norm = hypot(norm, y[i]);
        for (int64_t i = 0; i < rows; i++) y[i] /= norm;
        for (int64_t i = 0; i < rows; i++) wsum[i] += y[i] * y[i];
        have[c] = 1;
    }
}
/* gesvdj's work, for k = min(m, n): S := A's k singular values,
 * descending (equal ones in Jacobi's order), and for `vectors` U (m x m,
 * or m x k for econ) and V (n x n, or n x k). Jacobi runs on a copy of A
 * (m >= n) or A^T (m < n) scaled by a power of two to a largest element
 * in [0.5, 1), so no square overflows; its columns' norms are the singular
 * values, the columns normalized the left (m >= n) or right (m < n)
 * singular vectors, its rotations the others: U = A V / s, or
 * V = A^T U / s. Each right singular vector's largest component (the
 * first of equals) is made positive, its left one following. Columns with
 * no singular value (econ 0's past k) or a zero one are completed by
 * dn_complete. A itself is left as it was (cuSOLVER may destroy it).
 * info: 0, or k + 1 when the sweeps ran out (the results as they stand
 * are stored) or A is not finite (S := NaN, U and V untouched). */
static int dn_svd(struct dn_mat a, int64_t m, int64_t n, int vectors, int econ, struct dn_mat s, struct dn_mat u,
                  struct dn_mat v, double tol, int max_sweeps, int *info) {
    int64_t k = m < n ? m : n, rows = m < n ? n : m, cols = econ ? k : rows;
    int wide = m < n;
    size_t ng = (size_t)rows * (size_t)k, nr = (size_t)k * (size_t)k, nw = vectors ? (size_t)rows * (size_t)cols : 0;
    double *g = malloc((ng + nr + nw + (size_t)k + (size_t)rows + 1) * sizeof(double));
    double *r = g + ng, *w = r + nr, *sv = w + nw, *wsum = sv + k;
    int64_t *order = malloc(((size_t)k + 1) * sizeof(int64_t));
    unsigned char *have = malloc((size_t)cols + 1);
    if (!g || !order || !have) { free(g); free(order); free(have); return DN_ALLOC_FAILED; }
    double big = 0;
    int finite = 1;
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            double x = fabs(dn_get(a, i, j));
            if (!isfinite(x)) finite = 0;
            else if (x > big) big = x;
        }
    if (!finite) {
        for (int64_t i = 0; i < k; i++) dn_set(s, i, 0, NAN);
        free(g); free(order); free(have);
        *info = (int)(k + 1);
        return DN_OK;
    }
    int e = 0;
    if (big > 0) frexp(big, &e);
    for (int64_t j = 0; j < k; j++)
        for (int64_t i = 0; i < rows; i++) g[i + j * rows] = ldexp(wide ? dn_get(a, j, i) : dn_get(a, i, j), -e);
    /* What rounding lets a dot of `rows` terms resolve bounds the tolerance. */
    double least = (double)rows * 2.220446049250313e-16;
    int left = dn_hestenes(g, r, rows, k, tol > least ? tol : least, max_sweeps);
    for (int64_t j = 0; j < k; j++) {
        double norm = 0;
        for (int64_t i = 0; i < rows; i++) norm = hypot(norm, g[i + j * rows]);
        sv[j] = norm;
    }
    for (int64_t p = 0; p < k; p++) { /* a stable insertion sort, descending */
        int64_t i = p;
        for (; i > 0 && sv[order[i - 1]] < sv[p]; i--) order[i] = order[i - 1];
        order[i] = p;
    }
    for (int64_t j = 0; j < k; j++) dn_set(s, j, 0, ldexp(sv[order[j]], e));
    if (vectors) {
        for (int64_t c = 0; c < cols; c++) have[c] = c < k && sv[order[c]] > 0;
        for (int64_t c = 0; c < cols; c++)
            for (int64_t i = 0; have[c] && i < rows; i++) w[i + c * rows] = g[i + order[c] * rows] / sv[order[c]];
        dn_complete(w, rows, cols, have, wsum);
        for (int64_t j = 0; j < k; j++) {
            double *wc = w + j * rows, *rc = r + order[j] * k, *right = wide ? wc : rc;
            int64_t len = wide ? rows : k, at = 0;
            for (int64_t i = 1; i < len; i++)
                if (fabs(right[i]) > fabs(right[at])) at = i;
            if (right[at] >= 0) continue;
            for (int64_t i = 0; i < rows; i++) wc[i] = -wc[i];
            for (int64_t i = 0; i < k; i++) rc[i] = -rc[i];
        }
        /* w is U (m >= n) or V (m < n), all its columns; r, in S's order, the other. */
        struct dn_mat wm = wide ? v : u, rm = wide ? u : v;
        for (int64_t j = 0; j < cols; j++)
            for (int64_t i = 0; i < rows; i++) dn_set(wm, i, j, w[i + j * rows]);
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < k; i++) dn_set(rm, i, j, r[i + order[j] * k]);
    }
    free(g);
    free(order);
    free(have);
    *info = left ? (int)(k + 1) : 0;
    return DN_OK;
}
/* Workspace, in elements: a copy of A (or A^T) and the k x k rotations,
 * max(1, m n + min(m, n)^2), whatever jobz and econ; nothing of it is
 * used (the work is in double, outside the caller's memory), but a
 * smaller one is refused. */
static int64_t dn_gesvdj_lwork(int64_t m, int64_t n) {
    int64_t k = m < n ? m : n;
    return dn_max1(m * n + k * k);
}
static int dn_gesvdj_args(void *h, int jobz, int econ, int64_t m, int64_t n, int64_t lda, int64_t ldu, int64_t ldv) {
    if (!h) return DN_NOT_INITIALIZED;
    return jobz < 0 || jobz > 1 || econ < 0 || econ > 1 || m < 0 || n < 0 || lda < dn_max1(m) ||
                   (jobz && (ldu < dn_max1(m) || ldv < dn_max1(n)))
               ? DN_INVALID_VALUE
               : DN_OK;
}
/* U and V are not referenced without vectors (NULL is fine then), nor
 * when they have no columns. */
static int dn_gesvdj(void *h, int ty, int jobz, int econ, int64_t m, int64_t n, void *A, int64_t lda, void *S, void *U,
                     int64_t ldu, void *V, int64_t ldv, const void *work, int64_t have, int *info, const void *params) {
    int r = dn_gesvdj_args(h, jobz, econ, m, n, lda, ldu, ldv);
    if (r) return r;
    int64_t k = m < n ? m : n, ucols = econ ? k : m, vcols = econ ? k : n;
    if (have < dn_gesvdj_lwork(m, n) || !info || (k && (!A || !S || !work)) ||
        (jobz && ((m && ucols && !U) || (n && vcols && !V))))
        return DN_INVALID_VALUE;
    const struct dn_gesvdj *p = params;
    double eps = ty ? 2.220446049250313e-16 : 1.1920928955078125e-07; /* DBL_EPSILON, FLT_EPSILON */
    double tol = p && p->tol > eps ? p->tol : eps;
    return dn_svd((struct dn_mat){A, ty, lda}, m, n, jobz, econ, (struct dn_mat){S, ty, 1},
                  (struct dn_mat){U, ty, ldu}, (struct dn_mat){V, ty, ldv}, tol, p ? p->max_sweeps : 100, info);
}
#define DN_LEGACY_SVD(P, T, TY)                                                                                \
    int cusolverDn##P##gesvdj_bufferSize(void *h, int jobz, int econ, int m, int n, const T *A, int lda,        \
                                         const T *S, const T *U, int ldu, const T *V, int ldv, int *lwork,      \
                                         void *params) {                                                       \
        (void)A; (void)S; (void)U; (void)V; (void)params;                                                      \
        return dn_lwork_int(dn_gesvdj_args(h, jobz, econ, m, n, lda, ldu, ldv), dn_gesvdj_lwork(m, n), lwork); \
    }                                                                                                          \
    int cusolverDn##P##gesvdj(void *h, int jobz, int econ, int m, int n, T *A, int lda, T *S, T *U, int ldu,   \
                              T *V, int ldv, T *work, int lwork, int *info, void *params) {                    \
        return dn_gesvdj(h, TY, jobz, econ, m, n, A, lda, S, U, ldu, V, ldv, work, lwork, info, params);       \
    }
DN_LEGACY_SVD(S, float, 0)
DN_LEGACY_SVD(D, double, 1)
