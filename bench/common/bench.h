/* Shared by the OpenCL benchmark programs under bench/ (whbench, threads,
 * peerbench, the delay-storing tenant): checked calls, the clock, the
 * first device's context and queue, program builds, and the per-call
 * summary that "RESULT {json}" lines carry.
 *
 * A program defines BENCH_NAME (the prefix of its error messages) before
 * including this header. A failed OpenCL call exits 2. */
#ifndef WH_BENCH_H
#define WH_BENCH_H

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench/common/bench.h"
#endif

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                            \
    do {                                                                       \
        cl_int e_ = (call);                                                    \
        if (e_ != CL_SUCCESS) {                                                \
            fprintf(stderr, BENCH_NAME ": %s failed: %d (line %d)\n", #call,   \
                    e_, __LINE__);                                             \
            exit(2);                                                           \
        }                                                                      \
    } while (0)

static __attribute__((unused)) double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The first platform's first device and a context on it; and, where `q`
 * is not NULL, an in-order queue. The benchmarks run unmodified natively
 * and through Wormhole, so they take whatever the ICD loader lists first. */
static __attribute__((unused)) void open_device(cl_device_id *dev, cl_context *ctx,
                                                cl_command_queue *q) {
    cl_platform_id p;
    cl_uint n = 0;
    CHECK(clGetPlatformIDs(1, &p, &n));
    if (n == 0) {
        fprintf(stderr, BENCH_NAME ": no OpenCL platform\n");
        exit(2);
    }
    CHECK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, dev, NULL));
    cl_int e;
    *ctx = clCreateContext(NULL, 1, dev, NULL, NULL, &e);
    CHECK(e);
    if (q) {
        *q = clCreateCommandQueue(*ctx, *dev, 0, &e);
        CHECK(e);
    }
}

/* A program built from `src` for `dev` with `options`. */
static __attribute__((unused)) cl_program build_program(cl_context ctx, cl_device_id dev,
                                                        const char *src,
                                                        const char *options) {
    cl_int e;
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
    CHECK(e);
    CHECK(clBuildProgram(p, 1, &dev, options, NULL, NULL));
    return p;
}

static __attribute__((unused)) cl_kernel new_kernel(cl_program p, const char *name) {
    cl_int e;
    cl_kernel k = clCreateKernel(p, name, &e);
    CHECK(e);
    return k;
}

/* whbench's and peerbench's workload: `add` adds its second argument to
 * each of ADD_N ints. */
enum { ADD_N = 256 };
static const char *const add_src = "__kernel void add(__global int *a, int b) {\n"
                                   "  size_t i = get_global_id(0);\n"
                                   "  a[i] += b;\n"
                                   "}\n";

/* The `add` kernel, built, with a zeroed buffer of ADD_N ints (returned in
 * `buf`) as its first argument; the caller sets the second. */
static __attribute__((unused)) cl_kernel add_kernel(cl_context ctx, cl_device_id dev,
                                                    cl_program *prog, cl_mem *buf) {
    *prog = build_program(ctx, dev, add_src, "");
    cl_kernel k = new_kernel(*prog, "add");
    int zero[ADD_N] = {0};
    cl_int e;
    *buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, zero, &e);
    CHECK(e);
    CHECK(clSetKernelArg(k, 0, sizeof *buf, buf));
    return k;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts `v` (n per-call times in ns) and prints
 * "name":{"n":..,"median_ns":..,"p99_ns":..,"mean_ns":..,"min_ns":..},
 * with a comma after it unless it is the last of its object. */
static __attribute__((unused)) void summary(const char *name, double *v, size_t n, int last) {
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    size_t r99 = (size_t)(0.99 * (double)n + 0.999999);
    if (r99 < 1)
        r99 = 1;
    double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    printf("\"%s\":{\"n\":%zu,\"median_ns\":%.1f,\"p99_ns\":%.1f,\"mean_ns\":%.1f,"
           "\"min_ns\":%.1f}%s",
           name, n, med, v[r99 - 1], sum / (double)n, v[0], last ? "" : ",");
}

#endif
