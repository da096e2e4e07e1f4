/* cuBLASLt's matmul as PyTorch's nn.Linear calls it (gemm_and_bias): a
 * matmul descriptor, three layouts and a preference made and destroyed
 * around every call, the heuristic's first algorithm, and cublasLtMatmul
 * with a bias epilogue, on the cuBLAS handle (which is a cuBLASLt one).
 * Then a ReLU epilogue, a strided batch with C apart from D, and a handle
 * of cublasLtCreate's. Every result is checked against a CPU reference
 * and its bytes' digest printed: natively and through Wormhole on the same
 * device the lines must be the same. Without a usable GPU it stops at the
 * first failing call (exit 2).
 * Usage: lt_matmul [refused]   (`refused`: the statuses of what Wormhole's
 * model of cuBLASLt refuses, one line each) */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "sample_util.h"

typedef void *ltHandle;
int cublasLtCreate(ltHandle *h);
int cublasLtDestroy(ltHandle h);
int cublasLtMatmulDescCreate(void **d, int compute, int scale);
int cublasLtMatmulDescDestroy(void *d);
int cublasLtMatmulDescSetAttribute(void *d, int attr, const void *v, size_t n);
int cublasLtMatrixLayoutCreate(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld);
int cublasLtMatrixLayoutDestroy(void *l);
int cublasLtMatrixLayoutSetAttribute(void *l, int attr, const void *v, size_t n);
int cublasLtMatmulPreferenceCreate(void **p);
int cublasLtMatmulPreferenceDestroy(void *p);
int cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *v, size_t n);
typedef struct { uint64_t data[8]; } ltAlgo;
typedef struct { ltAlgo algo; size_t workspaceSize; int state; float wavesCount; int reserved[4]; } ltResult;
int cublasLtMatmulAlgoGetHeuristic(ltHandle h, void *d, void *a, void *b, void *c, void *dd, void *p, int want,
                                   ltResult *r, int *count);
int cublasLtMatmul(ltHandle h, void *d, const void *alpha, const void *A, void *ad, const void *B, void *bd,
                   const void *beta, const void *C, void *cd, void *D, void *dd, const ltAlgo *algo, void *ws,
                   size_t wsn, cudaStream_t s);

/* cublasLt.h's numbers */
enum { COMPUTE_32F = 68, R_32F = 0, TRANSA = 3, TRANSB = 4, EPILOGUE = 7, BIAS_POINTER = 8, POINTER_MODE = 2,
       ORDER = 1, BATCH_COUNT = 5, BATCH_STRIDE = 6, MAX_WORKSPACE = 1, EP_DEFAULT = 1, EP_RELU_BIAS = 6,
       EP_BIAS = 4 };
#define WORKSPACE (1 << 20)

static int failures;
static float *dev_ws;

static void compare(const char *what, const float *got, const double *want, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]) / (1.0 + fabs(want[i]));
        if (d > worst) worst = d;
    }
    printf("%-30s %s, digest %016llx\n", what, worst <= 1e-4 ? "ok" : "WRONG",
           (unsigned long long)sample_digest(got, n * sizeof *got));
    if (worst > 1e-4) failures++;
}

/* D = epilogue(alpha op(A) op(B) + beta C) for each batch, column-major. */
struct mm {
    int ta, tb, m, n, k, batch, epilogue;
    float alpha, beta;
    long long sa, sb, sc;
};

static void reference(const struct mm *p, const float *A, const float *B, const float *C, const float *bias, double *D) {
    int lda = p->ta ? p->k : p->m, ldb = p->tb ? p->n : p->k;
    for (int b = 0; b < p->batch; b++)
        for (int j = 0; j < p->n; j++)
            for (int i = 0; i < p->m; i++) {
                double s = 0;
                for (int l = 0; l < p->k; l++) {
                    double a = p->ta ? A[b * p->sa + l + (size_t)i * lda] : A[b * p->sa + i + (size_t)l * lda];
                    double x = p->tb ? B[b * p->sb + j + (size_t)l * ldb] : B[b * p->sb + l + (size_t)j * ldb];
                    s += a * x;
                }
                double v = p->alpha * s + p->beta * C[b * p->sc + i + (size_t)j * p->m];
                if (p->epilogue & 4) v += bias[i];
                if (p->epilogue & 2) v = v > 0 ? v : 0;
                D[b * p->sc + i + (size_t)j * p->m] = v;
            }
}

static float *upload(const float *h, size_t n) {
    float *d = NULL;
    if (cudaMalloc((void **)&d, n * sizeof *d) != cudaSuccess) return NULL;
    cudaMemcpy(d, h, n * sizeof *d, cudaMemcpyHostToDevice);
    return d;
}

static void *layout(int rows, int cols, int batch, long long stride) {
    void *l = NULL;
    if (cublasLtMatrixLayoutCreate(&l, R_32F, rows, cols, rows)) return NULL;
    if (batch > 1) {
        cublasLtMatrixLayoutSetAttribute(l, BATCH_COUNT, &batch, sizeof batch);
        cublasLtMatrixLayoutSetAttribute(l, BATCH_STRIDE, &stride, sizeof stride);
    }
    return l;
}

/* One matmul the way PyTorch makes it; returns the status of the first
 * failing call. C and D are apart when `apart`. */
static int run(ltHandle h, const char *what, const struct mm *p, int apart) {
    size_t na = (size_t)p->m * p->k, nb = (size_t)p->k * p->n, nc = (size_t)p->m * p->n;
    size_t ta = na + (p->batch - 1) * p->sa, tb = nb + (p->batch - 1) * p->sb, tc = nc + (p->batch - 1) * p->sc;
    float *A = malloc(ta * 4), *B = malloc(tb * 4), *C = malloc(tc * 4), *bias = malloc(p->m * 4), *got = malloc(tc * 4);
    double *want = malloc(tc * 8);
    uint32_t seed = 12345 + p->m;
    for (size_t i = 0; i < ta; i++) A[i] = sample_next(&seed);
    for (size_t i = 0; i < tb; i++) B[i] = sample_next(&seed);
    for (size_t i = 0; i < tc; i++) C[i] = sample_next(&seed);
    for (int i = 0; i < p->m; i++) bias[i] = sample_next(&seed);
    /* Between batches D keeps what it held: C's values. */
    for (size_t i = 0; i < tc; i++) want[i] = C[i];
    reference(p, A, B, C, bias, want);
    float *dA = upload(A, ta), *dB = upload(B, tb), *dC = upload(C, tc), *dbias = upload(bias, p->m);
    float *dD = apart ? upload(C, tc) : dC;
    void *desc = NULL, *pref = NULL;
    int s = cublasLtMatmulDescCreate(&desc, COMPUTE_32F, R_32F);
    cublasLtMatmulDescSetAttribute(desc, TRANSA, &p->ta, 4);
    cublasLtMatmulDescSetAttribute(desc, TRANSB, &p->tb, 4);
    if (p->epilogue != EP_DEFAULT) {
        cublasLtMatmulDescSetAttribute(desc, EPILOGUE, &p->epilogue, 4);
        cublasLtMatmulDescSetAttribute(desc, BIAS_POINTER, &dbias, sizeof dbias);
    }
    void *la = layout(p->ta ? p->k : p->m, p->ta ? p->m : p->k, p->batch, p->sa);
    void *lb = layout(p->tb ? p->n : p->k, p->tb ? p->k : p->n, p->batch, p->sb);
    void *lc = layout(p->m, p->n, p->batch, p->sc);
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = WORKSPACE;
    cublasLtMatmulPreferenceSetAttribute(pref, MAX_WORKSPACE, &ws, sizeof ws);
    ltResult r;
    int count = 0;
    memset(&r, 0, sizeof r);
    if (!s) s = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 1, &r, &count);
    if (!s && count < 1) s = 15;
    if (!s)
        s = cublasLtMatmul(h, desc, &p->alpha, dA, la, dB, lb, &p->beta, dC, lc, dD, lc, &r.algo, dev_ws, WORKSPACE, 0);
    if (!s) s = cudaMemcpy(got, dD, tc * 4, cudaMemcpyDeviceToHost) ? 14 : 0;
    if (!s) compare(what, got, want, tc);
    else printf("%-30s status %d\n", what, s);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dbias);
    if (apart) cudaFree(dD);
    free(A); free(B); free(C); free(bias); free(got); free(want);
    return s;
}

/* What the model refuses where it is set, and what the server refuses. */
static int refused(ltHandle h) {
    void *desc = NULL, *l = NULL, *pref = NULL;
    int one = 1, three = 3;
    cublasLtMatmulDescCreate(&desc, COMPUTE_32F, R_32F);
    printf("device pointer mode: %d\n", cublasLtMatmulDescSetAttribute(desc, POINTER_MODE, &one, 4));
    printf("an attribute of the wrong size: %d\n", cublasLtMatmulDescSetAttribute(desc, TRANSA, &one, 2));
    cublasLtMatrixLayoutCreate(&l, R_32F, 4, 4, 4);
    printf("row order: %d\n", cublasLtMatrixLayoutSetAttribute(l, ORDER, &one, 4));
    cublasLtMatmulPreferenceCreate(&pref);
    int count = -1;
    ltResult r;
    /* op(A) 4x4 times op(B) 4x4 into a 3-row D: shapes disagree. */
    void *l3 = NULL;
    cublasLtMatrixLayoutCreate(&l3, R_32F, 3, 4, 4);
    printf("shapes that disagree: %d\n", cublasLtMatmulAlgoGetHeuristic(h, desc, l, l, l, l3, pref, 1, &r, &count));
    int s = cublasLtMatmulAlgoGetHeuristic(h, desc, l, l, l, l, pref, 1, &r, &count);
    printf("heuristic: %d, count %d\n", s, count);
    float *d = NULL, alpha = 1, beta = 0;
    cudaMalloc((void **)&d, 16 * 4);
    ltAlgo forged;
    memset(&forged, 0, sizeof forged);
    printf("an algorithm of its own: %d\n",
           cublasLtMatmul(h, desc, &alpha, d, l, d, l, &beta, d, l, d, l, &forged, NULL, 0, 0));
    /* D 3 batches 16 elements apart: two past the 16-element allocation. */
    cublasLtMatrixLayoutSetAttribute(l, BATCH_COUNT, &three, 4);
    long long sixteen = 16;
    cublasLtMatrixLayoutSetAttribute(l, BATCH_STRIDE, &sixteen, 8);
    printf("operands past their allocation: %d\n",
           cublasLtMatmul(h, desc, &alpha, d, l, d, l, &beta, d, l, d, l, &r.algo, NULL, 0, 0));
    s = cublasLtMatmulDescDestroy(desc);
    printf("destroyed: %d, again %d\n", s, cublasLtMatmulDescDestroy(desc));
    cublasLtMatrixLayoutDestroy(l);
    cublasLtMatrixLayoutDestroy(l3);
    cublasLtMatmulPreferenceDestroy(pref);
    cudaFree(d);
    return 0;
}

int main(int argc, char **argv) {
    cublasHandle_t blas;
    CHECK_BLAS(cublasCreate_v2(&blas));
    CHECK_CUDA(cudaMalloc((void **)&dev_ws, WORKSPACE));
    if (argc > 1 && strcmp(argv[1], "refused") == 0) return refused((ltHandle)blas);
    /* nn.Linear(k=48 -> m=40) on n=24 inputs: weights stored k x m, so op(A) = A^T. */
    struct mm linear = {1, 0, 40, 24, 48, 1, EP_BIAS, 1, 0, 0, 0, 0};
    struct mm relu = {1, 0, 33, 17, 20, 1, EP_RELU_BIAS, 1, 0, 0, 0, 0};
    struct mm batched = {0, 1, 12, 10, 8, 3, EP_DEFAULT, 0.5f, 0.25f, 12 * 8 + 5, 10 * 8 + 3, 12 * 10 + 7};
    if (run((ltHandle)blas, "linear with a bias", &linear, 0)) return 2;
    if (run((ltHandle)blas, "relu with a bias", &relu, 0)) return 2;
    if (run((ltHandle)blas, "strided batch, C apart from D", &batched, 1)) return 2;
    /* The same shape again goes without waiting through Wormhole. */
    if (run((ltHandle)blas, "linear with a bias, again", &linear, 0)) return 2;
    ltHandle own;
    CHECK_BLAS(cublasLtCreate(&own));
    if (run(own, "on cublasLtCreate's handle", &relu, 0)) return 2;
    CHECK_BLAS(cublasLtDestroy(own));
    cudaFree(dev_ws);
    CHECK_BLAS(cublasDestroy_v2(blas));
    printf("%s\n", failures ? "WRONG" : "correct");
    return failures ? 1 : 0;
}
