/* Kernel arguments and launches that the OpenCL library does not check,
 * for the isolation tests (crates/wormhole/isolation-tests/tests/
 * kernel_args.rs). One line per case on stdout:
 *
 *   kernel_args args src|bin [CASE...]   argument and launch cases (all, or
 *                                        those named), each followed by a
 *                                        launch with what the kernel holds
 *   kernel_args quota N MIB              N programs from sources of MIB MiB
 *
 * Natively most cases crash PoCL 3.1 (SIGSEGV or an assertion at the
 * launch); through Wormhole each must be refused with the tenant alive,
 * which every case's launch and read-back shows. The test runs natively
 * only the cases native survives, and compares their lines. */
/* CHECK and the rest of the OpenCL tests' helpers. */
#include "../../../../tests/opencl/common.h"

static const char *src =
    "__kernel void k(__global int *a, long s, __local int *l, sampler_t sm,\n"
    "                __read_only image2d_t im, __constant int *c) {\n"
    "  if (get_global_id(0) == 0) a[0] = (int)s + c[0];\n"
    "}\n";

static cl_context ctx;
static cl_device_id dev;
static cl_command_queue q;
static cl_kernel k;
static cl_mem buf, cbuf, img;
static cl_sampler smp;

static cl_program built(const char *options) {
    cl_int e;
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
    CHECK(e);
    CHECK(clBuildProgram(p, 1, &dev, options, NULL, NULL));
    return p;
}

/* The program: from source built with no options (""), or loaded from the
 * binary of one and built with none. */
static cl_program program(int from_binary) {
    cl_program p = built("");
    if (!from_binary)
        return p;
    size_t size;
    CHECK(clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL));
    unsigned char *bin = malloc(size);
    CHECK(clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL));
    cl_int e, status;
    cl_program pb = clCreateProgramWithBinary(ctx, 1, &dev, &size,
                                              (const unsigned char **)&bin,
                                              &status, &e);
    CHECK(e);
    CHECK(clBuildProgram(pb, 1, &dev, "", NULL, NULL));
    free(bin);
    CHECK(clReleaseProgram(p));
    return pb;
}

/* Every argument valid, with `s` chosen so that a launch's result names
 * the case that ran it. */
static void valid_args(long s) {
    CHECK(clSetKernelArg(k, 0, sizeof buf, &buf));
    CHECK(clSetKernelArg(k, 1, sizeof s, &s));
    CHECK(clSetKernelArg(k, 2, 16, NULL));
    CHECK(clSetKernelArg(k, 3, sizeof smp, &smp));
    CHECK(clSetKernelArg(k, 4, sizeof img, &img));
    CHECK(clSetKernelArg(k, 5, sizeof cbuf, &cbuf));
}

/* Launches one work-item and reads what it wrote (-1 if it failed). A
 * launch's failure may come from the clFinish after it: through Wormhole a
 * launch like one that succeeded is sent without waiting for its answer,
 * and its failure comes with the next call that waits. */
static void launch_and_read(cl_int *launch, int *value) {
    size_t g = 1;
    int zero = -1;
    CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, sizeof zero, &zero, 0, NULL, NULL));
    cl_int l = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    cl_int f = clFinish(q);
    *launch = l != CL_SUCCESS ? l : f;
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof *value, value, 0, NULL, NULL));
}

static int wanted(int argc, char **argv, const char *name) {
    if (argc <= 3)
        return 1;
    for (int i = 3; i < argc; i++)
        if (!strcmp(argv[i], name))
            return 1;
    return 0;
}

/* A case: one clSetKernelArg, then the launch with whatever it left. */
static void set_case(const char *name, int n, cl_uint index, size_t size,
                     const void *value) {
    valid_args(100 + n);
    cl_int set = clSetKernelArg(k, index, size, value), launch;
    int got;
    launch_and_read(&launch, &got);
    printf("%s: set %d launch %d value %d\n", name, set, launch, got);
    fflush(stdout);
}

static void launch_case(const char *name, cl_uint dim, const size_t *offset,
                        const size_t *global) {
    valid_args(0);
    cl_int r = clEnqueueNDRangeKernel(q, k, dim, offset, global, NULL, 0, NULL, NULL);
    cl_int f = clFinish(q);
    printf("%s: launch %d\n", name, r != CL_SUCCESS ? r : f);
    fflush(stdout);
}

static void rect_case(const char *name, int which) {
    size_t o[3] = {0, 0, 0}, region[3] = {64, (size_t)1 << 40, 1};
    char host[64] = {0};
    cl_int r;
    if (which == 0)
        r = clEnqueueReadBufferRect(q, buf, CL_TRUE, o, o, region, 64, 0, 64, 0,
                                    host, 0, NULL, NULL);
    else if (which == 1)
        r = clEnqueueWriteBufferRect(q, buf, CL_TRUE, o, o, region, 64, 0, 64, 0,
                                     host, 0, NULL, NULL);
    else
        r = clEnqueueCopyBufferRect(q, buf, cbuf, o, o, region, 64, 0, 64, 0, 0,
                                    NULL, NULL);
    printf("%s: %d\n", name, r);
    fflush(stdout);
}

static int args(int argc, char **argv) {
    int from_binary = argc > 2 && !strcmp(argv[2], "bin");
    cl_int e;
    buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &e);
    CHECK(e);
    int five[16] = {5};
    cbuf = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof five, five, &e);
    CHECK(e);
    cl_image_format f = {CL_RGBA, CL_UNSIGNED_INT8};
    img = clCreateImage2D(ctx, CL_MEM_READ_ONLY, &f, 4, 4, 0, NULL, &e);
    CHECK(e);
    smp = clCreateSampler(ctx, CL_FALSE, CL_ADDRESS_NONE, CL_FILTER_NEAREST, &e);
    CHECK(e);
    cl_program p = program(from_binary);
    k = clCreateKernel(p, "k", &e);
    CHECK(e);

    /* Handles the application let go of, and one it made up: a copy of a
     * live buffer's first bytes, dispatch table included. */
    cl_mem gone = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &e);
    CHECK(e);
    CHECK(clReleaseMemObject(gone));
    cl_sampler gone_smp = clCreateSampler(ctx, CL_FALSE, CL_ADDRESS_NONE, CL_FILTER_NEAREST, &e);
    CHECK(e);
    CHECK(clReleaseSampler(gone_smp));
    static unsigned char fake[256] __attribute__((aligned(64)));
    memcpy(fake, buf, 64);
    void *forged = fake;
    void *raw = (void *)(uintptr_t)0xdeadbeef000ULL;
    cl_ulong local_mem;
    CHECK(clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem, &local_mem, NULL));

    struct {
        const char *name;
        cl_uint index;
        size_t size;
        const void *value;
    } cases[] = {
        {"global_raw", 0, 8, &raw},
        {"global_released", 0, 8, &gone},
        {"global_forged", 0, 8, &forged},
        {"global_sampler", 0, 8, &smp},
        {"constant_raw", 5, 8, &raw},
        {"constant_released", 5, 8, &gone},
        {"constant_forged", 5, 8, &forged},
        {"local_raw", 2, 8, &raw},
        {"local_huge", 2, (size_t)1 << 62, NULL},
        {"local_past_device", 2, (size_t)local_mem * 2, NULL},
        {"local_device", 2, (size_t)local_mem, NULL},
        {"sampler_raw", 3, 8, &raw},
        {"sampler_released", 3, 8, &gone_smp},
        {"sampler_buffer", 3, 8, &buf},
        {"image_raw", 4, 8, &raw},
        {"image_released", 4, 8, &gone},
        {"image_buffer", 4, 8, &buf},
        {"image_sampler", 4, 8, &smp},
    };
    /* The tenant builds with argument information whatever the options;
     * the application is answered as natively all the same. */
    if (wanted(argc, argv, "arginfo")) {
        cl_uint aq;
        printf("arginfo: %d\n", clGetKernelArgInfo(k, 0, CL_KERNEL_ARG_ADDRESS_QUALIFIER,
                                                    sizeof aq, &aq, NULL));
    }
    if (wanted(argc, argv, "options")) {
        char opts[256] = "?";
        size_t len = 0;
        cl_int r = clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_OPTIONS, sizeof opts, opts,
                                         &len);
        printf("options: %d '%s' %zu\n", r, opts, len);
    }
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++)
        if (wanted(argc, argv, cases[i].name))
            set_case(cases[i].name, i, cases[i].index, cases[i].size, cases[i].value);

    /* Objects released after they were set: natively a use after free at
     * the launch (PoCL aborts on the buffer, crashes on the image). */
    if (wanted(argc, argv, "released_after_set")) {
        valid_args(0);
        cl_mem tmp = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64, NULL, &e);
        CHECK(e);
        cl_image_format f2 = {CL_RGBA, CL_UNSIGNED_INT8};
        cl_mem tmp_img = clCreateImage2D(ctx, CL_MEM_READ_ONLY, &f2, 4, 4, 0, NULL, &e);
        CHECK(e);
        CHECK(clSetKernelArg(k, 0, sizeof tmp, &tmp));
        CHECK(clSetKernelArg(k, 4, sizeof tmp_img, &tmp_img));
        CHECK(clReleaseMemObject(tmp));
        CHECK(clReleaseMemObject(tmp_img));
        size_t g = 1;
        cl_int l = clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        cl_int f = clFinish(q);
        printf("released_after_set: launch %d finish %d\n", l, f);
    }

    size_t max3[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX}, one = 1, two = 2, top = SIZE_MAX;
    size_t big[2] = {(size_t)1 << 33, (size_t)1 << 31};
    if (wanted(argc, argv, "dim0"))
        launch_case("dim0", 0, NULL, &one);
    if (wanted(argc, argv, "dim4"))
        launch_case("dim4", 4, NULL, max3);
    if (wanted(argc, argv, "size_max_cubed"))
        launch_case("size_max_cubed", 3, NULL, max3);
    if (wanted(argc, argv, "items_past_size_t"))
        launch_case("items_past_size_t", 2, NULL, big);
    if (wanted(argc, argv, "offset_past_size_t"))
        launch_case("offset_past_size_t", 1, &top, &two);
    if (wanted(argc, argv, "rect_read"))
        rect_case("rect_read", 0);
    if (wanted(argc, argv, "rect_write"))
        rect_case("rect_write", 1);
    if (wanted(argc, argv, "rect_copy"))
        rect_case("rect_copy", 2);

    /* Still served, with the right result. */
    valid_args(7);
    cl_int launch;
    int got;
    launch_and_read(&launch, &got);
    printf("after: launch %d value %d\n", launch, got);
    return 0;
}

/* Programs from sources of `mib` MiB each (a comment, then a kernel): each
 * creation's code; then the first is released and one more made. */
static int quota(int n, size_t mib) {
    size_t len = mib << 20;
    char *big = malloc(len + 1);
    if (!big)
        return 1;
    memset(big, ' ', len);
    memcpy(big, "/*", 2);
    const char *tail = "*/ __kernel void k(__global int *a) { a[0] = 1; }\n";
    memcpy(big + len - strlen(tail), tail, strlen(tail));
    big[len] = 0;
    cl_program *p = calloc((size_t)n, sizeof *p);
    const char *s = big;
    for (int i = 0; i < n; i++) {
        cl_int e;
        p[i] = clCreateProgramWithSource(ctx, 1, &s, &len, &e);
        printf("program %d: %d\n", i, e);
        fflush(stdout);
    }
    if (p[0])
        CHECK(clReleaseProgram(p[0]));
    cl_int e;
    cl_program again = clCreateProgramWithSource(ctx, 1, &s, &len, &e);
    printf("after a release: %d\n", e);
    if (again)
        CHECK(clReleaseProgram(again));
    for (int i = 1; i < n; i++)
        if (p[i])
            CHECK(clReleaseProgram(p[i]));
    free(p);
    free(big);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: kernel_args args src|bin [CASE...] | quota N MIB\n");
        return 2;
    }
    cl_platform_id pl;
    cl_int e;
    CHECK(clGetPlatformIDs(1, &pl, NULL));
    CHECK(clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    CHECK(e);
    q = clCreateCommandQueue(ctx, dev, 0, &e);
    CHECK(e);
    if (!strcmp(argv[1], "args"))
        return args(argc, argv);
    if (!strcmp(argv[1], "quota") && argc == 4)
        return quota(atoi(argv[2]), (size_t)atoi(argv[3]));
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
