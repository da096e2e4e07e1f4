/* The few dense cuSOLVER declarations the host-only samples need, written
 * from NVIDIA's cusolverDn.h and cusolver_common.h (CUDA 13) so the
 * samples build with the system compiler where the toolkit is absent.
 * Names, values and prototypes are NVIDIA's; enums are int-sized, handles
 * pointers. CUBLAS_OP_N and CUBLAS_OP_T come from wormhole_cublas_min.h. */
#ifndef WORMHOLE_CUSOLVER_MIN_H
#define WORMHOLE_CUSOLVER_MIN_H
#include <stddef.h>
#include <stdint.h>
#include "wormhole_cublas_min.h"

typedef struct cusolverDnContext *cusolverDnHandle_t;
typedef struct cusolverDnParams *cusolverDnParams_t;

typedef enum {
    CUSOLVER_STATUS_SUCCESS = 0,
    CUSOLVER_STATUS_NOT_INITIALIZED = 1,
    CUSOLVER_STATUS_ALLOC_FAILED = 2,
    CUSOLVER_STATUS_INVALID_VALUE = 3,
    CUSOLVER_STATUS_ARCH_MISMATCH = 4,
    CUSOLVER_STATUS_EXECUTION_FAILED = 6,
    CUSOLVER_STATUS_INTERNAL_ERROR = 7,
    CUSOLVER_STATUS_NOT_SUPPORTED = 9,
} cusolverStatus_t;
typedef enum { CUSOLVERDN_GETRF = 0, CUSOLVERDN_POTRF = 1 } cusolverDnFunction_t;
typedef enum { CUSOLVER_ALG_0 = 0, CUSOLVER_ALG_1 = 1 } cusolverAlgMode_t;
typedef enum { CUBLAS_FILL_MODE_LOWER = 0, CUBLAS_FILL_MODE_UPPER = 1 } cublasFillMode_t;
typedef enum { CUBLAS_SIDE_LEFT = 0, CUBLAS_SIDE_RIGHT = 1 } cublasSideMode_t;
typedef enum { CUSOLVER_EIG_MODE_NOVECTOR = 0, CUSOLVER_EIG_MODE_VECTOR = 1 } cusolverEigMode_t;
/* N and T are wormhole_cublas_min.h's (an unnamed enum there). */
typedef int cublasOperation_t;
enum { CUBLAS_OP_C = 2 };
typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1 } cudaDataType_t;
typedef cudaDataType_t cudaDataType;

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t *handle);
cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t handle);
cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t stream);
cusolverStatus_t cusolverDnGetStream(cusolverDnHandle_t handle, cudaStream_t *stream);
cusolverStatus_t cusolverDnCreateParams(cusolverDnParams_t *params);
cusolverStatus_t cusolverDnDestroyParams(cusolverDnParams_t params);
cusolverStatus_t cusolverDnSetAdvOptions(cusolverDnParams_t params, cusolverDnFunction_t function,
                                         cusolverAlgMode_t algo);

/* Legacy API: 32-bit sizes, one element type per name. */
cusolverStatus_t cusolverDnSpotrf_bufferSize(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, float *A,
                                             int lda, int *Lwork);
cusolverStatus_t cusolverDnDpotrf_bufferSize(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, double *A,
                                             int lda, int *Lwork);
cusolverStatus_t cusolverDnSpotrf(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, float *A, int lda,
                                  float *Workspace, int Lwork, int *devInfo);
cusolverStatus_t cusolverDnDpotrf(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, double *A, int lda,
                                  double *Workspace, int Lwork, int *devInfo);
cusolverStatus_t cusolverDnSpotrs(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, int nrhs, const float *A,
                                  int lda, float *B, int ldb, int *devInfo);
cusolverStatus_t cusolverDnDpotrs(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, int nrhs, const double *A,
                                  int lda, double *B, int ldb, int *devInfo);
cusolverStatus_t cusolverDnSgetrf_bufferSize(cusolverDnHandle_t handle, int m, int n, float *A, int lda, int *Lwork);
cusolverStatus_t cusolverDnDgetrf_bufferSize(cusolverDnHandle_t handle, int m, int n, double *A, int lda, int *Lwork);
cusolverStatus_t cusolverDnSgetrf(cusolverDnHandle_t handle, int m, int n, float *A, int lda, float *Workspace,
                                  int *devIpiv, int *devInfo);
cusolverStatus_t cusolverDnDgetrf(cusolverDnHandle_t handle, int m, int n, double *A, int lda, double *Workspace,
                                  int *devIpiv, int *devInfo);
cusolverStatus_t cusolverDnSgetrs(cusolverDnHandle_t handle, cublasOperation_t trans, int n, int nrhs, const float *A,
                                  int lda, const int *devIpiv, float *B, int ldb, int *devInfo);
cusolverStatus_t cusolverDnDgetrs(cusolverDnHandle_t handle, cublasOperation_t trans, int n, int nrhs,
                                  const double *A, int lda, const int *devIpiv, double *B, int ldb, int *devInfo);

/* 64-bit generic (X) API: the element type as an argument, workspace in
 * bytes on the device and on the host. */
cusolverStatus_t cusolverDnXpotrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params,
                                             cublasFillMode_t uplo, int64_t n, cudaDataType dataTypeA, const void *A,
                                             int64_t lda, cudaDataType computeType, size_t *workspaceInBytesOnDevice,
                                             size_t *workspaceInBytesOnHost);
cusolverStatus_t cusolverDnXpotrf(cusolverDnHandle_t handle, cusolverDnParams_t params, cublasFillMode_t uplo,
                                  int64_t n, cudaDataType dataTypeA, void *A, int64_t lda, cudaDataType computeType,
                                  void *bufferOnDevice, size_t workspaceInBytesOnDevice, void *bufferOnHost,
                                  size_t workspaceInBytesOnHost, int *info);
cusolverStatus_t cusolverDnXpotrs(cusolverDnHandle_t handle, cusolverDnParams_t params, cublasFillMode_t uplo,
                                  int64_t n, int64_t nrhs, cudaDataType dataTypeA, const void *A, int64_t lda,
                                  cudaDataType dataTypeB, void *B, int64_t ldb, int *info);
cusolverStatus_t cusolverDnXgetrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m,
                                             int64_t n, cudaDataType dataTypeA, const void *A, int64_t lda,
                                             cudaDataType computeType, size_t *workspaceInBytesOnDevice,
                                             size_t *workspaceInBytesOnHost);
cusolverStatus_t cusolverDnXgetrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                  cudaDataType dataTypeA, void *A, int64_t lda, int64_t *ipiv,
                                  cudaDataType computeType, void *bufferOnDevice, size_t workspaceInBytesOnDevice,
                                  void *bufferOnHost, size_t workspaceInBytesOnHost, int *info);
cusolverStatus_t cusolverDnXgetrs(cusolverDnHandle_t handle, cusolverDnParams_t params, cublasOperation_t trans,
                                  int64_t n, int64_t nrhs, cudaDataType dataTypeA, const void *A, int64_t lda,
                                  const int64_t *ipiv, cudaDataType dataTypeB, void *B, int64_t ldb, int *info);
/* QR (geqrf: R and the Householder reflectors; orgqr: Q from them; ormqr:
 * op(Q) applied to C) and the symmetric eigenproblem (syevd). */
cusolverStatus_t cusolverDnSgeqrf_bufferSize(cusolverDnHandle_t handle, int m, int n, float *A, int lda, int *lwork);
cusolverStatus_t cusolverDnDgeqrf_bufferSize(cusolverDnHandle_t handle, int m, int n, double *A, int lda, int *lwork);
cusolverStatus_t cusolverDnSgeqrf(cusolverDnHandle_t handle, int m, int n, float *A, int lda, float *TAU,
                                  float *Workspace, int Lwork, int *devInfo);
cusolverStatus_t cusolverDnDgeqrf(cusolverDnHandle_t handle, int m, int n, double *A, int lda, double *TAU,
                                  double *Workspace, int Lwork, int *devInfo);
cusolverStatus_t cusolverDnSorgqr_bufferSize(cusolverDnHandle_t handle, int m, int n, int k, const float *A, int lda,
                                             const float *tau, int *lwork);
cusolverStatus_t cusolverDnDorgqr_bufferSize(cusolverDnHandle_t handle, int m, int n, int k, const double *A, int lda,
                                             const double *tau, int *lwork);
cusolverStatus_t cusolverDnSorgqr(cusolverDnHandle_t handle, int m, int n, int k, float *A, int lda, const float *tau,
                                  float *work, int lwork, int *info);
cusolverStatus_t cusolverDnDorgqr(cusolverDnHandle_t handle, int m, int n, int k, double *A, int lda,
                                  const double *tau, double *work, int lwork, int *info);
cusolverStatus_t cusolverDnSormqr_bufferSize(cusolverDnHandle_t handle, cublasSideMode_t side, cublasOperation_t trans,
                                             int m, int n, int k, const float *A, int lda, const float *tau,
                                             const float *C, int ldc, int *lwork);
cusolverStatus_t cusolverDnDormqr_bufferSize(cusolverDnHandle_t handle, cublasSideMode_t side, cublasOperation_t trans,
                                             int m, int n, int k, const double *A, int lda, const double *tau,
                                             const double *C, int ldc, int *lwork);
cusolverStatus_t cusolverDnSormqr(cusolverDnHandle_t handle, cublasSideMode_t side, cublasOperation_t trans, int m,
                                  int n, int k, const float *A, int lda, const float *tau, float *C, int ldc,
                                  float *work, int lwork, int *devInfo);
cusolverStatus_t cusolverDnDormqr(cusolverDnHandle_t handle, cublasSideMode_t side, cublasOperation_t trans, int m,
                                  int n, int k, const double *A, int lda, const double *tau, double *C, int ldc,
                                  double *work, int lwork, int *devInfo);
cusolverStatus_t cusolverDnSsyevd_bufferSize(cusolverDnHandle_t handle, cusolverEigMode_t jobz, cublasFillMode_t uplo,
                                             int n, const float *A, int lda, const float *W, int *lwork);
cusolverStatus_t cusolverDnDsyevd_bufferSize(cusolverDnHandle_t handle, cusolverEigMode_t jobz, cublasFillMode_t uplo,
                                             int n, const double *A, int lda, const double *W, int *lwork);
cusolverStatus_t cusolverDnSsyevd(cusolverDnHandle_t handle, cusolverEigMode_t jobz, cublasFillMode_t uplo, int n,
                                  float *A, int lda, float *W, float *work, int lwork, int *info);
cusolverStatus_t cusolverDnDsyevd(cusolverDnHandle_t handle, cusolverEigMode_t jobz, cublasFillMode_t uplo, int n,
                                  double *A, int lda, double *W, double *work, int lwork, int *info);
cusolverStatus_t cusolverDnXgeqrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m,
                                             int64_t n, cudaDataType dataTypeA, const void *A, int64_t lda,
                                             cudaDataType dataTypeTau, const void *tau, cudaDataType computeType,
                                             size_t *workspaceInBytesOnDevice, size_t *workspaceInBytesOnHost);
cusolverStatus_t cusolverDnXgeqrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                  cudaDataType dataTypeA, void *A, int64_t lda, cudaDataType dataTypeTau, void *tau,
                                  cudaDataType computeType, void *bufferOnDevice, size_t workspaceInBytesOnDevice,
                                  void *bufferOnHost, size_t workspaceInBytesOnHost, int *info);
cusolverStatus_t cusolverDnXsyevd_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params,
                                             cusolverEigMode_t jobz, cublasFillMode_t uplo, int64_t n,
                                             cudaDataType dataTypeA, const void *A, int64_t lda,
                                             cudaDataType dataTypeW, const void *W, cudaDataType computeType,
                                             size_t *workspaceInBytesOnDevice, size_t *workspaceInBytesOnHost);
cusolverStatus_t cusolverDnXsyevd(cusolverDnHandle_t handle, cusolverDnParams_t params, cusolverEigMode_t jobz,
                                  cublasFillMode_t uplo, int64_t n, cudaDataType dataTypeA, void *A, int64_t lda,
                                  cudaDataType dataTypeW, void *W, cudaDataType computeType, void *bufferOnDevice,
                                  size_t workspaceInBytesOnDevice, void *bufferOnHost, size_t workspaceInBytesOnHost,
                                  int *info);
/* Jacobi SVD: A = U diag(S) V^T (V, not V^T), its settings in a
 * gesvdjInfo_t (NULL: the defaults). */
typedef struct gesvdjInfo *gesvdjInfo_t;
cusolverStatus_t cusolverDnCreateGesvdjInfo(gesvdjInfo_t *info);
cusolverStatus_t cusolverDnDestroyGesvdjInfo(gesvdjInfo_t info);
cusolverStatus_t cusolverDnXgesvdjSetTolerance(gesvdjInfo_t info, double tolerance);
cusolverStatus_t cusolverDnXgesvdjSetMaxSweeps(gesvdjInfo_t info, int max_sweeps);
cusolverStatus_t cusolverDnXgesvdjSetSortEig(gesvdjInfo_t info, int sort_svd);
cusolverStatus_t cusolverDnSgesvdj_bufferSize(cusolverDnHandle_t handle, cusolverEigMode_t jobz, int econ, int m,
                                              int n, const float *A, int lda, const float *S, const float *U,
                                              int ldu, const float *V, int ldv, int *lwork, gesvdjInfo_t params);
cusolverStatus_t cusolverDnDgesvdj_bufferSize(cusolverDnHandle_t handle, cusolverEigMode_t jobz, int econ, int m,
                                              int n, const double *A, int lda, const double *S, const double *U,
                                              int ldu, const double *V, int ldv, int *lwork, gesvdjInfo_t params);
cusolverStatus_t cusolverDnSgesvdj(cusolverDnHandle_t handle, cusolverEigMode_t jobz, int econ, int m, int n,
                                   float *A, int lda, float *S, float *U, int ldu, float *V, int ldv, float *work,
                                   int lwork, int *info, gesvdjInfo_t params);
cusolverStatus_t cusolverDnDgesvdj(cusolverDnHandle_t handle, cusolverEigMode_t jobz, int econ, int m, int n,
                                   double *A, int lda, double *S, double *U, int ldu, double *V, int ldv,
                                   double *work, int lwork, int *info, gesvdjInfo_t params);

/* Exported by Wormhole's client only to refuse (solver.c's `refused`).
 * Weak: the CPU stand-in does not export them, so the sample still links
 * against it (where each is then NULL, and `refused` says so). */
typedef struct syevjInfo *syevjInfo_t;
__attribute__((weak)) cusolverStatus_t cusolverDnDsytrf_bufferSize(cusolverDnHandle_t handle, int n, double *A,
                                                                   int lda, int *lwork);
__attribute__((weak)) cusolverStatus_t cusolverDnDgesvd_bufferSize(cusolverDnHandle_t handle, int m, int n,
                                                                   int *lwork);
__attribute__((weak)) cusolverStatus_t cusolverDnCreateSyevjInfo(syevjInfo_t *info);
#endif
