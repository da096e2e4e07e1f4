/* What cuSOLVER's two files share: statuses, handles, matrices and the
 * helpers both use (defined in solver.c). */
#ifndef CPU_DEVICE_SOLVER_H
#define CPU_DEVICE_SOLVER_H
#include "cpu_device.h"

enum { DN_OK = 0, DN_NOT_INITIALIZED = 1, DN_ALLOC_FAILED = 2, DN_INVALID_VALUE = 3, DN_NOT_SUPPORTED = 9 };
struct dn { void *stream; };
struct dn_params { int alg[2]; }; /* by cusolverDnFunction_t: GETRF, POTRF */
struct dn_mat { char *p; int ty; int64_t ld; };

CPU_DEVICE_INTERNAL double dn_get(struct dn_mat a, int64_t i, int64_t j);
CPU_DEVICE_INTERNAL void dn_set(struct dn_mat a, int64_t i, int64_t j, double v);
CPU_DEVICE_INTERNAL int64_t dn_max1(int64_t v);
CPU_DEVICE_INTERNAL size_t dn_size(int ty);
CPU_DEVICE_INTERNAL int dn_types(void *h, int ty, int other);
CPU_DEVICE_INTERNAL int dn_getrf_args(void *h, int64_t m, int64_t n, int64_t lda);
CPU_DEVICE_INTERNAL int dn_getrf(void *h, int ty, int64_t m, int64_t n, void *A, int64_t lda, const void *work, int64_t have, void *ipiv, int wide, int *info);
CPU_DEVICE_INTERNAL int dn_lwork(int r, int64_t need, int *lwork);
CPU_DEVICE_INTERNAL int dn_bytes(int r, int64_t need, int ty, size_t *device, size_t *host);
#endif
