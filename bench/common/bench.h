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
 * `buf`) as its first argument and 1 as its second. */
static __attribute__((unused)) cl_kernel add_kernel(cl_context ctx, cl_device_id dev,
                                                    cl_program *prog, cl_mem *buf) {
    *prog = build_program(ctx, dev, add_src, "");
    cl_kernel k = new_kernel(*prog, "add");
    int zero[ADD_N] = {0};
    cl_int e;
    *buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, zero, &e);
    CHECK(e);
    CHECK(clSetKernelArg(k, 0, sizeof *buf, buf));
    int one = 1;
    CHECK(clSetKernelArg(k, 1, sizeof one, &one));
    return k;
}

/* Releases what add_kernel made. */
static __attribute__((unused)) void add_release(cl_program prog, cl_kernel k, cl_mem buf) {
    CHECK(clReleaseMemObject(buf));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(prog));
}

/* Room for `n` per-call times. */
static __attribute__((unused)) double *times(long n) {
    double *v = malloc(sizeof(double) * (size_t)n);
    if (!v) {
        fprintf(stderr, BENCH_NAME ": out of memory\n");
        exit(2);
    }
    return v;
}

/* One round trip to the device: a launch of `add` and a blocking read of
 * the buffer's first int, which it returns (the read waits for the
 * kernel). */
static __attribute__((unused)) int add_and_read(cl_command_queue q, cl_kernel k, cl_mem buf) {
    size_t global = ADD_N;
    int out;
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof out, &out, 0, NULL, NULL));
    return out;
}

/* One launch of `add` adding `b`, waited for. */
static __attribute__((unused)) void add_once(cl_command_queue q, cl_kernel k, int b) {
    size_t global = ADD_N;
    CHECK(clSetKernelArg(k, 1, sizeof b, &b));
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL));
    CHECK(clFinish(q));
}

/* The call-heavy loop (the part to time): `launches` launches of `add`,
 * the i-th adding i % 7, with a clFinish every `every` launches and at the
 * end. Returns what each int of the buffer has gained. */
static __attribute__((unused)) long add_launches(cl_command_queue q, cl_kernel k, long launches,
                                                 long every) {
    size_t global = ADD_N;
    long sum = 0;
    for (long i = 0; i < launches; i++) {
        int b = (int)(i % 7);
        sum += b;
        CHECK(clSetKernelArg(k, 1, sizeof b, &b));
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL));
        if ((i + 1) % every == 0)
            CHECK(clFinish(q));
    }
    CHECK(clFinish(q));
    return sum;
}

/* Exits 4 unless every int of `add`'s buffer is `want`. */
static __attribute__((unused)) void check_add(cl_command_queue q, cl_mem buf, long want) {
    int out[ADD_N];
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    for (int i = 0; i < ADD_N; i++) {
        if (out[i] != (int)want) {
            fprintf(stderr, BENCH_NAME ": wrong result %d, want %ld\n", out[i], want);
            exit(4);
        }
    }
}

/* Writes MIB MiB to a buffer and reads them back, REPS times, each
 * blocking and checked; prints
 * RESULT {"bench":"bulk","mib":..,"write_gbps":[..],"read_gbps":[..]}. */
static __attribute__((unused)) void bulk(cl_context ctx, cl_command_queue q, long mib, long reps) {
    size_t size = (size_t)mib << 20;
    unsigned char *src_h = malloc(size), *dst_h = malloc(size);
    double *w = malloc(sizeof(double) * (size_t)reps), *r = malloc(sizeof(double) * (size_t)reps);
    if (!src_h || !dst_h || !w || !r) {
        fprintf(stderr, BENCH_NAME ": out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < size; i++)
        src_h[i] = (unsigned char)(i * 131u + 7u);
    cl_int err;
    cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size, NULL, &err);
    CHECK(err);
    /* First touch of the device buffer, outside the timings. */
    CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, size, src_h, 0, NULL, NULL));
    CHECK(clFinish(q));
    for (long i = 0; i < reps; i++) {
        memset(dst_h, 0, size);
        double t = now_ns();
        CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, size, src_h, 0, NULL, NULL));
        CHECK(clFinish(q));
        w[i] = (double)size / (now_ns() - t);
        t = now_ns();
        CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, size, dst_h, 0, NULL, NULL));
        CHECK(clFinish(q));
        r[i] = (double)size / (now_ns() - t);
        if (memcmp(src_h, dst_h, size) != 0) {
            fprintf(stderr, BENCH_NAME ": data read back differs\n");
            exit(4);
        }
    }
    printf("RESULT {\"bench\":\"bulk\",\"mib\":%ld,\"write_gbps\":[", mib);
    for (long i = 0; i < reps; i++)
        printf("%s%.3f", i ? "," : "", w[i]);
    printf("],\"read_gbps\":[");
    for (long i = 0; i < reps; i++)
        printf("%s%.3f", i ? "," : "", r[i]);
    printf("]}\n");
    free(w);
    free(r);
    CHECK(clReleaseMemObject(buf));
    free(src_h);
    free(dst_h);
}

/* A benchmark mode: its name on the command line and what runs it, with
 * the line's one or two counts (the second is 1 when not given). */
typedef struct {
    const char *name;
    void (*run)(long a, long b);
} bench_mode;

/* The programs' main: "NAME MODE A [B]" with positive counts; opens the
 * device into `dev`, `ctx` and `q`, runs the mode, and releases them. */
static __attribute__((unused)) int run_mode(int argc, char **argv, const char *usage,
                                            const bench_mode *modes, size_t n,
                                            cl_device_id *dev, cl_context *ctx,
                                            cl_command_queue *q) {
    if (argc < 3) {
        fprintf(stderr, "usage: " BENCH_NAME " %s\n", usage);
        return 1;
    }
    long a = atol(argv[2]), b = argc > 3 ? atol(argv[3]) : 1;
    if (a <= 0 || b <= 0) {
        fprintf(stderr, BENCH_NAME ": counts must be positive\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], modes[i].name) == 0) {
            open_device(dev, ctx, q);
            modes[i].run(a, b);
            clReleaseCommandQueue(*q);
            clReleaseContext(*ctx);
            return 0;
        }
    }
    fprintf(stderr, BENCH_NAME ": unknown benchmark %s\n", argv[1]);
    return 1;
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
