/* Part of the CPU stand-in device (see cudart.c). */
#include "cpu_device.h"

/* ---- cuBLAS -------------------------------------------------------------- */
struct blas { void *stream; int mode; int math; void *workspace; size_t workspace_bytes; };
#define H ((struct blas *)h)
/* The versions NVIDIA's CUDA 13.0 libraries answered on an H200: through
 * Wormhole the client must report the server's library's, not its own. */
int cublasGetVersion_v2(void *h, int *v) { (void)h; if (!v) return 7; *v = 130100; return 0; }
int cublasCreate_v2(void **h) { if (!h) return 7; *h = calloc(1, sizeof(struct blas)); return *h ? 0 : 3; }
int cublasDestroy_v2(void *h) { if (!h) return 1; free(h); return 0; }
int cublasSetStream_v2(void *h, void *s) { if (!h) return 1; H->stream = s; return 0; }
int cublasSetPointerMode_v2(void *h, int m) { if (!h) return 1; if (m != 0 && m != 1) return 7; H->mode = m; return 0; }
int cublasSetMathMode(void *h, int m) { if (!h) return 1; H->math = m; return 0; }
int cublasGetMathMode(void *h, int *m) { if (!h) return 1; if (!m) return 7; *m = H->math; return 0; }
/* Kept, never used: this device's BLAS needs no scratch memory. */
int cublasSetWorkspace_v2(void *h, void *w, size_t bytes) {
    if (!h) return 1;
    H->workspace = w;
    H->workspace_bytes = bytes;
    return 0;
}

#define AT(M, ld, i, j) (M)[(size_t)(i) + (size_t)(j) * (size_t)(ld)]
#define GEMM(NAME, T)                                                                                  \
    static void NAME##_one(int ta, int tb, int m, int n, int k, T al, const T *A, int lda, const T *B, \
                           int ldb, T be, T *C, int ldc) {                                             \
        for (int j = 0; j < n; j++)                                                                    \
            for (int i = 0; i < m; i++) {                                                              \
                T s = 0;                                                                               \
                for (int l = 0; l < k; l++)                                                            \
                    s += (ta ? AT(A, lda, l, i) : AT(A, lda, i, l)) * (tb ? AT(B, ldb, j, l) : AT(B, ldb, l, j)); \
                AT(C, ldc, i, j) = al * s + (be == 0 ? 0 : be * AT(C, ldc, i, j));                     \
            }                                                                                          \
    }
GEMM(sgemm, float)
GEMM(dgemm, double)
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *al, const float *A, int lda,
                   const float *B, int ldb, const float *be, float *C, int ldc) {
    if (!h) return 1;
    sgemm_one(ta, tb, m, n, k, *al, A, lda, B, ldb, *be, C, ldc);
    return 0;
}
int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *al, const double *A, int lda,
                   const double *B, int ldb, const double *be, double *C, int ldc) {
    if (!h) return 1;
    dgemm_one(ta, tb, m, n, k, *al, A, lda, B, ldb, *be, C, ldc);
    return 0;
}
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *al, const float *A, int lda,
                              long long sa, const float *B, int ldb, long long sb, const float *be, float *C,
                              int ldc, long long sc, int batch) {
    if (!h) return 1;
    for (int b = 0; b < batch; b++) sgemm_one(ta, tb, m, n, k, *al, A + b * sa, lda, B + b * sb, ldb, *be, C + b * sc, ldc);
    return 0;
}
int cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const double *al, const double *A,
                              int lda, long long sa, const double *B, int ldb, long long sb, const double *be,
                              double *C, int ldc, long long sc, int batch) {
    if (!h) return 1;
    for (int b = 0; b < batch; b++) dgemm_one(ta, tb, m, n, k, *al, A + b * sa, lda, B + b * sb, ldb, *be, C + b * sc, ldc);
    return 0;
}
/* Mixed precision: elements of CUDA_R_32F (0), R_16F (2) or R_16BF (14),
 * accumulated in float; scalars float, or half for CUBLAS_COMPUTE_16F. */
static int ex_sized(int ty) { return ty == 0 || ty == 2 || ty == 14; }
static float ex_load(const void *p, int ty, size_t i) {
    if (ty == 2) return (float)((const _Float16 *)p)[i];
    if (ty == 14) {
        uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    return ((const float *)p)[i];
}
static void ex_store(void *p, int ty, size_t i, float v) {
    if (ty == 2) { ((_Float16 *)p)[i] = (_Float16)v; return; }
    if (ty == 14) { /* round to nearest even */
        uint32_t b;
        memcpy(&b, &v, 4);
        b += 0x7fff + ((b >> 16) & 1);
        ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
        return;
    }
    ((float *)p)[i] = v;
}
static float ex_scalar(const void *p, int compute) {
    return compute == 64 || compute == 65 ? (float)*(const _Float16 *)p : *(const float *)p;
}
static void gemm_ex_one(int ta, int tb, int m, int n, int k, float al, const void *A, int at, int lda, const void *B,
                        int bt, int ldb, float be, void *C, int ct, int ldc) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0;
            for (int l = 0; l < k; l++)
                s += ex_load(A, at, ta ? l + (size_t)i * lda : i + (size_t)l * lda) *
                     ex_load(B, bt, tb ? j + (size_t)l * ldb : l + (size_t)j * ldb);
            size_t c = i + (size_t)j * ldc;
            ex_store(C, ct, c, al * s + (be == 0 ? 0 : be * ex_load(C, ct, c)));
        }
}
static size_t ex_bytes(int ty) { return ty == 0 ? 4 : 2; }
int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *al, const void *A, int at,
                               int lda, long long sa, const void *B, int bt, int ldb, long long sb, const void *be,
                               void *C, int ct, int ldc, long long sc, int batch, int compute, int algo) {
    (void)algo;
    if (!h) return 1;
    if (!ex_sized(at) || !ex_sized(bt) || !ex_sized(ct) || compute == 70 || compute == 71) return 15;
    for (int b = 0; b < batch; b++)
        gemm_ex_one(ta, tb, m, n, k, ex_scalar(al, compute), (const char *)A + b * sa * ex_bytes(at), at, lda,
                    (const char *)B + b * sb * ex_bytes(bt), bt, ldb, ex_scalar(be, compute),
                    (char *)C + b * sc * ex_bytes(ct), ct, ldc);
    return 0;
}
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *al, const void *A, int at, int lda,
                 const void *B, int bt, int ldb, const void *be, void *C, int ct, int ldc, int compute, int algo) {
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, al, A, at, lda, 0, B, bt, ldb, 0, be, C, ct, ldc, 0, 1,
                                      compute, algo);
}
int cublasSgemmEx(void *h, int ta, int tb, int m, int n, int k, const float *al, const void *A, int at, int lda,
                  const void *B, int bt, int ldb, const float *be, void *C, int ct, int ldc) {
    return cublasGemmEx(h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc, 68, -1);
}
/* Complex GEMMs (N and T; the conjugate transpose is not this device's),
 * strided batched and single, for cuComplex (C) and cuDoubleComplex (Z). */
#define COMPLEX_GEMM(P, p, T)                                                                                  \
    GEMM(p##gemm, T)                                                                                           \
    int cublas##P##gemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const T *al, const T *A,    \
                                      int lda, long long sa, const T *B, int ldb, long long sb, const T *be,   \
                                      T *C, int ldc, long long sc, int batch) {                                \
        if (!h) return 1;                                                                                      \
        if (ta == 2 || tb == 2) return 15;                                                                     \
        for (int b = 0; b < batch; b++)                                                                        \
            p##gemm_one(ta, tb, m, n, k, *al, A + b * sa, lda, B + b * sb, ldb, *be, C + b * sc, ldc);         \
        return 0;                                                                                              \
    }                                                                                                          \
    int cublas##P##gemm_v2(void *h, int ta, int tb, int m, int n, int k, const T *al, const T *A, int lda,      \
                           const T *B, int ldb, const T *be, T *C, int ldc) {                                  \
        return cublas##P##gemmStridedBatched(h, ta, tb, m, n, k, al, A, lda, 0, B, ldb, 0, be, C, ldc, 0, 1);  \
    }
COMPLEX_GEMM(C, c, float _Complex)
COMPLEX_GEMM(Z, z, double _Complex)
int cublasDgemv_v2(void *h, int t, int m, int n, const double *al, const double *A, int lda, const double *x,
                   int incx, const double *be, double *y, int incy) {
    if (!h) return 1;
    int rows = t ? n : m, cols = t ? m : n;
    for (int i = 0; i < rows; i++) {
        double s = 0;
        for (int j = 0; j < cols; j++) s += (t ? AT(A, lda, j, i) : AT(A, lda, i, j)) * x[j * incx];
        y[i * incy] = *al * s + (*be == 0 ? 0 : *be * y[i * incy]);
    }
    return 0;
}
int cublasDdot_v2(void *h, int n, const double *x, int incx, const double *y, int incy, double *r) {
    if (!h) return 1;
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i * incx] * y[i * incy];
    *r = s;
    return 0;
}
int cublasSgemv_v2(void *h, int t, int m, int n, const float *al, const float *A, int lda, const float *x, int incx,
                   const float *be, float *y, int incy) {
    if (!h) return 1;
    int rows = t ? n : m, cols = t ? m : n;
    for (int i = 0; i < rows; i++) {
        float s = 0;
        for (int j = 0; j < cols; j++) s += (t ? AT(A, lda, j, i) : AT(A, lda, i, j)) * x[j * incx];
        y[i * incy] = *al * s + (*be == 0 ? 0 : *be * y[i * incy]);
    }
    return 0;
}
int cublasSger_v2(void *h, int m, int n, const float *al, const float *x, int incx, const float *y, int incy, float *A, int lda) {
    if (!h) return 1;
    for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) AT(A, lda, i, j) += *al * x[i * incx] * y[j * incy];
    return 0;
}
int cublasSaxpy_v2(void *h, int n, const float *al, const float *x, int incx, float *y, int incy) {
    if (!h) return 1;
    for (int i = 0; i < n; i++) y[i * incy] += *al * x[i * incx];
    return 0;
}
int cublasSscal_v2(void *h, int n, const float *al, float *x, int incx) {
    if (!h) return 1;
    for (int i = 0; i < n; i++) x[i * incx] *= *al;
    return 0;
}
int cublasScopy_v2(void *h, int n, const float *x, int incx, float *y, int incy) {
    if (!h) return 1;
    for (int i = 0; i < n; i++) y[i * incy] = x[i * incx];
    return 0;
}
int cublasSdot_v2(void *h, int n, const float *x, int incx, const float *y, int incy, float *r) {
    if (!h) return 1;
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)x[i * incx] * y[i * incy];
    *r = (float)s;
    return 0;
}
int cublasSnrm2_v2(void *h, int n, const float *x, int incx, float *r) {
    if (!h) return 1;
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)x[i * incx] * x[i * incx];
    *r = (float)sqrt(s);
    return 0;
}
int cublasIsamax_v2(void *h, int n, const float *x, int incx, int *r) {
    if (!h) return 1;
    int best = 0;
    for (int i = 1; i < n; i++) if (fabsf(x[i * incx]) > fabsf(x[best * incx])) best = i;
    *r = n > 0 ? best + 1 : 0;
    return 0;
}

/* ---- cuBLASLt: single precision, column-major, the epilogues PyTorch uses */
struct lt_desc { int compute, scale, ta, tb; unsigned epilogue; const float *bias; long long bias_stride; };
struct lt_layout { int type; uint64_t rows, cols; long long ld, stride; int batch; };
struct lt_pref { uint64_t max_workspace; };
/* A new descriptor `x` handed out through `out`; none: CUBLAS_STATUS_ALLOC_FAILED. */
static int handed_out(void **out, void *x) {
    if (!x) return 3;
    *out = x;
    return 0;
}
/* An attribute's value into `field`, refused (CUBLAS_STATUS_INVALID_VALUE)
 * unless it is the field's size. */
#define SET_ATTR(field) return n != sizeof(field) ? 7 : (memcpy(&(field), v, n), 0)
int cublasLtCreate(void **h) { return cublasCreate_v2(h); }
int cublasLtDestroy(void *h) { return cublasDestroy_v2(h); }
int cublasLtMatmulDescCreate(void **d, int compute, int scale) {
    struct lt_desc *x = calloc(1, sizeof *x);
    if (x) { x->compute = compute; x->scale = scale; x->epilogue = 1; }
    return handed_out(d, x);
}
int cublasLtMatmulDescDestroy(void *d) { free(d); return 0; }
/* The attributes Wormhole's server sets (cublasLt.h's numbers). */
int cublasLtMatmulDescSetAttribute(void *d, int attr, const void *v, size_t n) {
    struct lt_desc *x = d;
    switch (attr) {
    case 3: SET_ATTR(x->ta);
    case 4: SET_ATTR(x->tb);
    case 7: SET_ATTR(x->epilogue);
    case 8: SET_ATTR(x->bias);
    case 10: SET_ATTR(x->bias_stride);
    default: return 15;
    }
}
int cublasLtMatrixLayoutCreate(void **l, int type, uint64_t rows, uint64_t cols, long long ld) {
    struct lt_layout *x = calloc(1, sizeof *x);
    if (x) { x->type = type; x->rows = rows; x->cols = cols; x->ld = ld; x->batch = 1; }
    return handed_out(l, x);
}
int cublasLtMatrixLayoutDestroy(void *l) { free(l); return 0; }
int cublasLtMatrixLayoutSetAttribute(void *l, int attr, const void *v, size_t n) {
    struct lt_layout *x = l;
    switch (attr) {
    case 5: SET_ATTR(x->batch);
    case 6: SET_ATTR(x->stride);
    default: return 15;
    }
}
int cublasLtMatmulPreferenceCreate(void **p) { return handed_out(p, calloc(1, sizeof(struct lt_pref))); }
int cublasLtMatmulPreferenceDestroy(void *p) { free(p); return 0; }
int cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *v, size_t n) {
    if (attr == 1) SET_ATTR(((struct lt_pref *)p)->max_workspace);
    return 0;
}
/* One algorithm (no workspace) for what this device computes: all R_32F,
 * compute 32F or 32F_FAST_TF32; none for anything else. */
int cublasLtMatmulAlgoGetHeuristic(void *h, void *d, void *a, void *b, void *c, void *dd, void *p, int want,
                                   void *results, int *count) {
    struct lt_desc *x = d;
    struct lt_layout *ls[4] = {a, b, c, dd};
    (void)h; (void)p;
    if (want < 1 || !results || !count) return 7;
    *count = 0;
    if (x->scale != 0 || (x->compute != 68 && x->compute != 77)) return 0;
    for (int i = 0; i < 4; i++) if (ls[i]->type != 0) return 0;
    memset(results, 0, 96);
    *count = 1;
    return 0;
}
static float gelu(float v) { return 0.5f * v * (1 + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))); }
int cublasLtMatmul(void *h, void *d, const void *al, const void *A, void *ad, const void *B, void *bd, const void *be,
                   const void *C, void *cd, void *D, void *dd, const void *algo, void *ws, size_t wsn, void *st) {
    struct lt_desc *x = d;
    struct lt_layout *la = ad, *lb = bd, *lc = cd, *ld = dd;
    float alpha = *(const float *)al, beta = *(const float *)be;
    int m = (int)ld->rows, n = (int)ld->cols, k = (int)(x->ta ? la->rows : la->cols);
    (void)h; (void)algo; (void)ws; (void)wsn; (void)st;
    for (int b = 0; b < ld->batch; b++) {
        const float *a = (const float *)A + b * la->stride, *bb = (const float *)B + b * lb->stride;
        const float *c = (const float *)C + b * lc->stride;
        float *o = (float *)D + b * ld->stride;
        if (c != o)
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++) AT(o, ld->ld, i, j) = beta == 0 ? 0 : AT(c, lc->ld, i, j);
        sgemm_one(x->ta, x->tb, m, n, k, alpha, a, (int)la->ld, bb, (int)lb->ld, beta, o, (int)ld->ld);
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float v = AT(o, ld->ld, i, j);
                if (x->epilogue & 4) v += x->bias[i + b * x->bias_stride];
                if (x->epilogue & 2) v = v > 0 ? v : 0;
                if (x->epilogue & 32) v = gelu(v);
                AT(o, ld->ld, i, j) = v;
            }
    }
    return 0;
}
