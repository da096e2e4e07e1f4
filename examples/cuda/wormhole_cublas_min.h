/* The few cuBLAS and cuRAND declarations the host-only samples need,
 * written from NVIDIA's cublas_api.h and curand.h (12.9 / 13.x: the same
 * prototypes) so the samples build with the system compiler where the
 * toolkit is absent. Enums are int-sized; handles are pointers. */
#ifndef WORMHOLE_CUBLAS_MIN_H
#define WORMHOLE_CUBLAS_MIN_H
#include <stddef.h>
#include "wormhole_cuda_min.h"

cudaError_t cudaStreamDestroy(cudaStream_t s);

typedef int cublasStatus_t;
typedef struct cublasContext *cublasHandle_t;
enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 };
enum { CUBLAS_DEFAULT_MATH = 0 };

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle);
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version);
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t s);
cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *s);
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, int mode);
cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, int *mode);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, int mode);
const char *cublasGetStatusName(cublasStatus_t s);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc);
cublasStatus_t cublasDgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const double *alpha,
                              const double *A, int lda, const double *B, int ldb, const double *beta, double *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha,
                                         const float *A, int lda, long long sA, const float *B, int ldb, long long sB,
                                         const float *beta, float *C, int ldc, long long sC, int batch);
/* Mixed precision: A, B and C of their own cudaDataType (CUDA_R_32F 0,
 * CUDA_R_16F 2, CUDA_R_16BF 14), alpha and beta of the compute type's. */
cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                            int Atype, int lda, const void *B, int Btype, int ldb, const void *beta, void *C, int Ctype,
                            int ldc, int computeType, int algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
                                          const void *A, int Atype, int lda, long long sA, const void *B, int Btype,
                                          int ldb, long long sB, const void *beta, void *C, int Ctype, int ldc,
                                          long long sC, int batch, int computeType, int algo);
cublasStatus_t cublasSgemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha, const void *A,
                             int Atype, int lda, const void *B, int Btype, int ldb, const float *beta, void *C,
                             int Ctype, int ldc);
cublasStatus_t cublasSgemv_v2(cublasHandle_t h, int t, int m, int n, const float *alpha, const float *A, int lda,
                              const float *x, int incx, const float *beta, float *y, int incy);
cublasStatus_t cublasSger_v2(cublasHandle_t h, int m, int n, const float *alpha, const float *x, int incx,
                             const float *y, int incy, float *A, int lda);
cublasStatus_t cublasSaxpy_v2(cublasHandle_t h, int n, const float *alpha, const float *x, int incx, float *y, int incy);
cublasStatus_t cublasSscal_v2(cublasHandle_t h, int n, const float *alpha, float *x, int incx);
cublasStatus_t cublasScopy_v2(cublasHandle_t h, int n, const float *x, int incx, float *y, int incy);
cublasStatus_t cublasSdot_v2(cublasHandle_t h, int n, const float *x, int incx, const float *y, int incy, float *r);
cublasStatus_t cublasSnrm2_v2(cublasHandle_t h, int n, const float *x, int incx, float *r);
cublasStatus_t cublasIsamax_v2(cublasHandle_t h, int n, const float *x, int incx, int *r);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, int *mode);
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes);
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, int ta, int tb, int m, int n, int k, const double *alpha,
                                         const double *A, int lda, long long sA, const double *B, int ldb, long long sB,
                                         const double *beta, double *C, int ldc, long long sC, int batch);
cublasStatus_t cublasDgemv_v2(cublasHandle_t h, int t, int m, int n, const double *alpha, const double *A, int lda,
                              const double *x, int incx, const double *beta, double *y, int incy);
/* Complex GEMMs: alpha, beta and the matrices are cuComplex (two floats)
 * or cuDoubleComplex (two doubles). */
cublasStatus_t cublasCgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
                              const void *A, int lda, const void *B, int ldb, const void *beta, void *C, int ldc);
cublasStatus_t cublasZgemmStridedBatched(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
                                         const void *A, int lda, long long sA, const void *B, int ldb, long long sB,
                                         const void *beta, void *C, int ldc, long long sC, int batch);
/* Refused by Wormhole (CUBLAS_STATUS_NOT_SUPPORTED); only its status is read. */
cublasStatus_t cublasStrsm_v2(cublasHandle_t h, int side, int uplo, int trans, int diag, int m, int n,
                              const float *alpha, const float *A, int lda, float *B, int ldb);
cublasStatus_t cublasDdot_v2(cublasHandle_t h, int n, const double *x, int incx, const double *y, int incy, double *r);

typedef int curandStatus_t;
typedef struct curandGenerator_st *curandGenerator_t;
enum { CURAND_STATUS_SUCCESS = 0, CURAND_STATUS_NOT_INITIALIZED = 101, CURAND_STATUS_OUT_OF_RANGE = 104,
       CURAND_STATUS_INITIALIZATION_FAILED = 203 };
enum { CURAND_RNG_PSEUDO_DEFAULT = 100, CURAND_RNG_PSEUDO_PHILOX4_32_10 = 141 };

curandStatus_t curandCreateGenerator(curandGenerator_t *g, int type);
curandStatus_t curandDestroyGenerator(curandGenerator_t g);
curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t g, unsigned long long seed);
curandStatus_t curandSetGeneratorOffset(curandGenerator_t g, unsigned long long offset);
curandStatus_t curandSetStream(curandGenerator_t g, cudaStream_t s);
curandStatus_t curandGenerate(curandGenerator_t g, unsigned int *out, size_t n);
curandStatus_t curandGenerateUniform(curandGenerator_t g, float *out, size_t n);
curandStatus_t curandGenerateNormal(curandGenerator_t g, float *out, size_t n, float mean, float stddev);
curandStatus_t curandGenerateUniformDouble(curandGenerator_t g, double *out, size_t n);
curandStatus_t curandGenerateNormalDouble(curandGenerator_t g, double *out, size_t n, double mean, double stddev);
curandStatus_t curandGetVersion(int *version);
#endif
