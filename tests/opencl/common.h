/* Shared helpers for Wormhole's OpenCL integration tests.
 *
 * Each test program runs twice, natively (PoCL's ICD alone) and through
 * Wormhole, and the harness (crates/wormhole/it) asserts that both exit 0
 * and print the same stdout. So a program prints every result it observes,
 * error codes included, deterministically; anything that legitimately
 * differs between the two runs goes on a line starting with "~" (ignored by
 * the comparison). Failed assertions print to stderr and exit 1.
 *
 * The platform is the first whose name contains $WH_TEST_PLATFORM
 * (default "Portable", i.e. PoCL; through Wormhole its name gains a prefix
 * but still contains it).
 *
 * The isolation tests' C programs (crates/wormhole/isolation-tests/c/)
 * include it too, for its checks; every helper is marked unused so that a
 * program may take only what it needs under -Wall -Werror. */
#ifndef WH_TEST_COMMON_H
#define WH_TEST_COMMON_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

/* A call that must succeed. */
#define CHECK(x)                                                               \
    do {                                                                       \
        cl_int e_ = (x);                                                       \
        if (e_ != CL_SUCCESS) {                                                \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x,  \
                    (int)e_);                                                  \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* A creation call's errcode_ret that must be CL_SUCCESS. */
#define CHECK_ERR(e, what)                                                     \
    do {                                                                       \
        if ((e) != CL_SUCCESS) {                                               \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__,      \
                    what, (int)(e));                                           \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* An assertion about observed behaviour. */
#define ASSERT(c)                                                              \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__,         \
                    __LINE__, #c);                                             \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* An expected error code: printed (so both runs must agree) and checked. */
#define EXPECT_CODE(label, got, want)                                          \
    do {                                                                       \
        cl_int g_ = (got);                                                     \
        printf("%s: %d\n", label, (int)g_);                                    \
        if (g_ != (want)) {                                                    \
            fprintf(stderr, "%s:%d: %s: got %d, want %d\n", __FILE__,          \
                    __LINE__, label, (int)g_, (int)(want));                    \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* A code that the spec leaves to the implementation: printed only, so the
 * remoted run must match the native one. */
#define PRINT_CODE(label, got) printf("%s: %d\n", label, (int)(got))

/* An error code that the spec leaves open: printed, must be an error. */
#define EXPECT_FAIL(label, got)                                                \
    do {                                                                       \
        cl_int g_ = (got);                                                     \
        printf("%s: %d\n", label, (int)g_);                                    \
        if (g_ == CL_SUCCESS) {                                                \
            fprintf(stderr, "%s:%d: %s unexpectedly succeeded\n", __FILE__,    \
                    __LINE__, label);                                          \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue q;
    char device_version[512]; /* PoCL-remote's is 140 characters */
    int cl_major, cl_minor;
} env_t;

static __attribute__((unused)) void env_init(env_t *t, cl_command_queue_properties qprops) {
    const char *want = getenv("WH_TEST_PLATFORM");
    if (!want || !*want) want = "Portable";
    cl_platform_id plats[16];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(16, plats, &np));
    t->platform = NULL;
    for (cl_uint i = 0; i < np && i < 16 && !t->platform; i++) {
        char name[256] = "";
        CHECK(clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name, name,
                                NULL));
        if (strstr(name, want)) {
            t->platform = plats[i];
            printf("~platform: %s\n", name);
        }
    }
    if (!t->platform) {
        fprintf(stderr, "no platform whose name contains '%s'\n", want);
        exit(1);
    }
    CHECK(clGetDeviceIDs(t->platform, CL_DEVICE_TYPE_ALL, 1, &t->device, NULL));
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_VERSION,
                          sizeof t->device_version, t->device_version, NULL));
    t->cl_major = t->cl_minor = 0;
    sscanf(t->device_version, "OpenCL %d.%d", &t->cl_major, &t->cl_minor);
    cl_int e;
    t->ctx = clCreateContext(NULL, 1, &t->device, NULL, NULL, &e);
    CHECK_ERR(e, "clCreateContext");
    t->q = clCreateCommandQueue(t->ctx, t->device, qprops, &e);
    CHECK_ERR(e, "clCreateCommandQueue");
}

static __attribute__((unused)) void env_done(env_t *t) {
    CHECK(clFinish(t->q));
    CHECK(clReleaseCommandQueue(t->q));
    CHECK(clReleaseContext(t->ctx));
}

/* Builds a program from source; prints the log and exits on failure. */
static __attribute__((unused)) cl_program build(env_t *t, const char *src, const char *opts) {
    cl_int e;
    cl_program p = clCreateProgramWithSource(t->ctx, 1, &src, NULL, &e);
    CHECK_ERR(e, "clCreateProgramWithSource");
    e = clBuildProgram(p, 1, &t->device, opts, NULL, NULL);
    if (e != CL_SUCCESS) {
        char log[8192] = "";
        clGetProgramBuildInfo(p, t->device, CL_PROGRAM_BUILD_LOG, sizeof log,
                              log, NULL);
        fprintf(stderr, "build failed (%d):\n%s\n", (int)e, log);
        exit(1);
    }
    return p;
}

static __attribute__((unused)) cl_kernel kernel(cl_program p, const char *name) {
    cl_int e;
    cl_kernel k = clCreateKernel(p, name, &e);
    CHECK_ERR(e, name);
    return k;
}

static __attribute__((unused)) cl_mem buffer(env_t *t, cl_mem_flags f, size_t n, void *host) {
    cl_int e;
    cl_mem m = clCreateBuffer(t->ctx, f, n, host, &e);
    CHECK_ERR(e, "clCreateBuffer");
    return m;
}

/* RGBA with 8-bit unsigned channels: the format the image tests use. */
static const __attribute__((unused)) cl_image_format rgba8 = {CL_RGBA, CL_UNSIGNED_INT8};

/* An image description of `type`, `w` x `h` x `depth` pixels (0 for a
 * dimension the type lacks), every other field zero: no pitches, no array,
 * no buffer. */
static __attribute__((unused)) cl_image_desc image_desc(cl_mem_object_type type, size_t w,
                                                        size_t h, size_t depth) {
    cl_image_desc d;
    memset(&d, 0, sizeof d);
    d.image_type = type;
    d.image_width = w;
    d.image_height = h;
    d.image_depth = depth;
    return d;
}

/* Squares 0..63 on the device and returns their sum (85344): proof, in a
 * few calls, that the device computes. */
static __attribute__((unused)) long sum_of_squares(env_t *t) {
    static const char *src = "__kernel void sq(__global int *a) {\n"
                             "  size_t i = get_global_id(0); a[i] = a[i] * a[i];\n"
                             "}\n";
    int v[64];
    for (int i = 0; i < 64; i++) v[i] = i;
    cl_mem b = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof v, v);
    cl_program p = build(t, src, NULL);
    cl_kernel k = kernel(p, "sq");
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t g = 64;
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof v, v, 0, NULL, NULL));
    long sum = 0;
    for (int i = 0; i < 64; i++) sum += v[i];
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    CHECK(clReleaseMemObject(b));
    return sum;
}

/* Prints a byte range as hex, 32 bytes a line. */
static __attribute__((unused)) void dump(const char *label, const void *p, size_t n) {
    const unsigned char *b = p;
    printf("%s:", label);
    for (size_t i = 0; i < n; i++) {
        if (i && i % 32 == 0) printf("\n%s:", label);
        printf(" %02x", b[i]);
    }
    printf("\n");
}

/* A 32-bit FNV-1a hash, to print big results compactly. */
static __attribute__((unused)) uint32_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

static __attribute__((unused)) void watchdog_fired(int sig) {
    (void)sig;
    static const char msg[] = "watchdog: the program ran past its limit (a wait that never returned)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(4);
    _exit(3);
}

/* Ends the program with a failure once it has run `seconds`: a wait that
 * never returns fails the test at once instead of stalling the suite. */
static __attribute__((unused)) void watchdog(unsigned seconds) {
    signal(SIGALRM, watchdog_fired);
    alarm(seconds);
}

static __attribute__((unused)) void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif
