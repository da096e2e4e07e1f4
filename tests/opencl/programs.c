/* Programs: build options and logs, separate compile and link with an
 * embedded header, binaries, info queries, kernels in a program, kernel and
 * argument info, work-group info, and clCloneKernel. */
#include "common.h"

static const char *src =
    "#ifndef SCALE\n#error SCALE not defined\n#endif\n"
    "__kernel void scale(__global float *restrict out, __global const float *in,\n"
    "                    float k, __local int *scratch) {\n"
    "  size_t i = get_global_id(0); out[i] = in[i] * k * SCALE;\n"
    "}\n"
    "__kernel void __attribute__((reqd_work_group_size(4, 1, 1)))\n"
    "fixed(__global int *a, __constant int *c, const int n) {\n"
    "  a[get_global_id(0)] = c[get_local_id(0)] + n;\n"
    "}\n";

static void print_str_info(cl_program p, cl_program_info what, const char *label) {
    size_t n = 0;
    CHECK(clGetProgramInfo(p, what, 0, NULL, &n));
    char *s = malloc(n + 1);
    CHECK(clGetProgramInfo(p, what, n, s, NULL));
    s[n] = 0;
    printf("%s: %s (size %zu)\n", label, s, n);
    free(s);
}

static void run_scale(env_t *t, cl_program p, float want_factor, const char *label) {
    cl_kernel k = kernel(p, "scale");
    float in[16], out[16];
    for (int i = 0; i < 16; i++) in[i] = (float)i;
    cl_mem bi = buffer(t, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof in, in);
    cl_mem bo = buffer(t, CL_MEM_WRITE_ONLY, sizeof out, NULL);
    float f = 2.0f;
    CHECK(clSetKernelArg(k, 0, sizeof bo, &bo));
    CHECK(clSetKernelArg(k, 1, sizeof bi, &bi));
    CHECK(clSetKernelArg(k, 2, sizeof f, &f));
    CHECK(clSetKernelArg(k, 3, 64, NULL));
    size_t g = 16;
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, bo, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    for (int i = 0; i < 16; i++) ASSERT(out[i] == in[i] * 2.0f * want_factor);
    printf("%s: scale ok\n", label);
    CHECK(clReleaseMemObject(bi));
    CHECK(clReleaseMemObject(bo));
    CHECK(clReleaseKernel(k));
}

static void build_and_info(env_t *t) {
    cl_int e;
    cl_program p = clCreateProgramWithSource(t->ctx, 1, &src, NULL, &e);
    CHECK_ERR(e, "create");
    cl_build_status bs;
    CHECK(clGetProgramBuildInfo(p, t->device, CL_PROGRAM_BUILD_STATUS, sizeof bs, &bs, NULL));
    printf("status before build: %d\n", bs);
    EXPECT_CODE("kernel names before build", clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, 0, NULL, NULL),
                CL_INVALID_PROGRAM_EXECUTABLE);
    CHECK(clBuildProgram(p, 1, &t->device, "-DSCALE=3 -cl-kernel-arg-info", NULL, NULL));
    CHECK(clGetProgramBuildInfo(p, t->device, CL_PROGRAM_BUILD_STATUS, sizeof bs, &bs, NULL));
    printf("status after build: %d\n", bs);
    char opts[256] = "";
    CHECK(clGetProgramBuildInfo(p, t->device, CL_PROGRAM_BUILD_OPTIONS, sizeof opts, opts, NULL));
    printf("build options: %s\n", opts);
    cl_program_binary_type bt;
    CHECK(clGetProgramBuildInfo(p, t->device, CL_PROGRAM_BINARY_TYPE, sizeof bt, &bt, NULL));
    printf("binary type: %x\n", bt);

    cl_uint nd = 0, rc = 0;
    cl_context c;
    cl_device_id dev = NULL;
    size_t nk = 0;
    CHECK(clGetProgramInfo(p, CL_PROGRAM_NUM_DEVICES, sizeof nd, &nd, NULL));
    CHECK(clGetProgramInfo(p, CL_PROGRAM_DEVICES, sizeof dev, &dev, NULL));
    CHECK(clGetProgramInfo(p, CL_PROGRAM_CONTEXT, sizeof c, &c, NULL));
    CHECK(clGetProgramInfo(p, CL_PROGRAM_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK(clGetProgramInfo(p, CL_PROGRAM_NUM_KERNELS, sizeof nk, &nk, NULL));
    ASSERT(rc >= 1);
    printf("~program: refs %u\n", rc);
    printf("program: devices %u same %d context same %d kernels %zu\n", nd, dev == t->device,
           c == t->ctx, nk);
    print_str_info(p, CL_PROGRAM_KERNEL_NAMES, "kernel names");
    size_t srclen = 0;
    CHECK(clGetProgramInfo(p, CL_PROGRAM_SOURCE, 0, NULL, &srclen));
    printf("source length matches %d\n", srclen == strlen(src) + 1);
    /* A value buffer that is too small. */
    char tiny[2];
    EXPECT_CODE("kernel names into 2 bytes", clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, sizeof tiny, tiny, NULL),
                CL_INVALID_VALUE);

    run_scale(t, p, 3.0f, "built");

    /* clCreateKernelsInProgram */
    cl_uint n = 0;
    CHECK(clCreateKernelsInProgram(p, 0, NULL, &n));
    printf("kernels in program: %u\n", n);
    cl_kernel ks[4] = {0};
    CHECK(clCreateKernelsInProgram(p, 4, ks, NULL));
    EXPECT_CODE("kernels into too small array", clCreateKernelsInProgram(p, 1, ks + 2, NULL), CL_INVALID_VALUE);
    char names[2][64];
    for (cl_uint i = 0; i < n; i++) {
        CHECK(clGetKernelInfo(ks[i], CL_KERNEL_FUNCTION_NAME, 64, names[i], NULL));
    }
    printf("kernel set: %s\n", strcmp(names[0], names[1]) < 0 ? "ordered-a" : "ordered-b");
    printf("~kernel set order: %s %s\n", names[0], names[1]);

    /* Kernel info, arg info, work-group info. */
    cl_kernel k = kernel(p, "fixed");
    char fname[64];
    cl_uint nargs, krc;
    cl_context kc;
    cl_program kp;
    char attrs[256] = "";
    CHECK(clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof fname, fname, NULL));
    CHECK(clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, NULL));
    CHECK(clGetKernelInfo(k, CL_KERNEL_REFERENCE_COUNT, sizeof krc, &krc, NULL));
    CHECK(clGetKernelInfo(k, CL_KERNEL_CONTEXT, sizeof kc, &kc, NULL));
    CHECK(clGetKernelInfo(k, CL_KERNEL_PROGRAM, sizeof kp, &kp, NULL));
    CHECK(clGetKernelInfo(k, CL_KERNEL_ATTRIBUTES, sizeof attrs, attrs, NULL));
    ASSERT(krc >= 1);
    printf("~kernel: refs %u\n", krc);
    printf("kernel: %s args %u context %d program %d attributes '%s'\n", fname, nargs, kc == t->ctx,
           kp == p, attrs);
    cl_kernel sk = kernel(p, "scale");
    for (cl_uint a = 0; a < 4; a++) {
        char tn[64] = "", an[64] = "";
        cl_kernel_arg_address_qualifier aq;
        cl_kernel_arg_access_qualifier acq;
        cl_kernel_arg_type_qualifier tq;
        CHECK(clGetKernelArgInfo(sk, a, CL_KERNEL_ARG_TYPE_NAME, sizeof tn, tn, NULL));
        CHECK(clGetKernelArgInfo(sk, a, CL_KERNEL_ARG_NAME, sizeof an, an, NULL));
        CHECK(clGetKernelArgInfo(sk, a, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof aq, &aq, NULL));
        CHECK(clGetKernelArgInfo(sk, a, CL_KERNEL_ARG_ACCESS_QUALIFIER, sizeof acq, &acq, NULL));
        CHECK(clGetKernelArgInfo(sk, a, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof tq, &tq, NULL));
        printf("arg %u: %s %s addr %x access %x type-qual %lx\n", a, tn, an, aq, acq, (unsigned long)tq);
    }
    EXPECT_CODE("arg info past the last", clGetKernelArgInfo(sk, 9, CL_KERNEL_ARG_NAME, 0, NULL, NULL),
                CL_INVALID_ARG_INDEX);
    size_t wgs, cwgs[3], pwm;
    cl_ulong lm, pm;
    CHECK(clGetKernelWorkGroupInfo(k, t->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wgs, &wgs, NULL));
    CHECK(clGetKernelWorkGroupInfo(k, t->device, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof cwgs, cwgs, NULL));
    CHECK(clGetKernelWorkGroupInfo(k, t->device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof pwm, &pwm,
                                   NULL));
    CHECK(clGetKernelWorkGroupInfo(k, t->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL));
    CHECK(clGetKernelWorkGroupInfo(k, t->device, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof pm, &pm, NULL));
    CHECK(clGetKernelWorkGroupInfo(k, NULL, CL_KERNEL_WORK_GROUP_SIZE, sizeof wgs, &wgs, NULL));
    printf("work-group: compile size %zu %zu %zu\n", cwgs[0], cwgs[1], cwgs[2]);
    printf("~work-group: size %zu multiple %zu local %lu private %lu\n", wgs, pwm, (unsigned long)lm,
           (unsigned long)pm);
    /* The required work-group size is enforced. */
    cl_mem a = buffer(t, CL_MEM_READ_WRITE, 8 * sizeof(int), NULL);
    int cv[4] = {10, 20, 30, 40};
    cl_mem cb = buffer(t, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof cv, cv);
    int nn = 5;
    CHECK(clSetKernelArg(k, 0, sizeof a, &a));
    CHECK(clSetKernelArg(k, 1, sizeof cb, &cb));
    CHECK(clSetKernelArg(k, 2, sizeof nn, &nn));
    size_t g = 8, l = 2, l4 = 4;
    EXPECT_CODE("wrong local size for reqd_work_group_size",
                clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, &l, 0, NULL, NULL), CL_INVALID_WORK_GROUP_SIZE);
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, &l4, 0, NULL, NULL));
    int out[8];
    CHECK(clEnqueueReadBuffer(t->q, a, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    ASSERT(out[0] == 15 && out[5] == 25 && out[7] == 45);
    printf("fixed: ok\n");

    /* clCloneKernel (OpenCL 2.1+): the clone keeps the arguments. */
    if (t->cl_major > 2 || (t->cl_major == 2 && t->cl_minor >= 1)) {
        cl_kernel k2 = clCloneKernel(k, &e);
        CHECK_ERR(e, "clCloneKernel");
        nn = 100;
        CHECK(clSetKernelArg(k, 2, sizeof nn, &nn));
        CHECK(clEnqueueNDRangeKernel(t->q, k2, 1, NULL, &g, &l4, 0, NULL, NULL));
        CHECK(clEnqueueReadBuffer(t->q, a, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
        ASSERT(out[0] == 15 && out[7] == 45);
        CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, &l4, 0, NULL, NULL));
        CHECK(clEnqueueReadBuffer(t->q, a, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
        ASSERT(out[0] == 110);
        CHECK(clGetKernelInfo(k2, CL_KERNEL_FUNCTION_NAME, sizeof fname, fname, NULL));
        printf("clone: ok (%s)\n", fname);
        CHECK(clReleaseKernel(k2));
    } else {
        printf("clone: ok (fixed)\n");
    }
    EXPECT_CODE("release program with kernels", clRetainProgram(p), CL_SUCCESS);
    CHECK(clReleaseProgram(p));
    CHECK(clReleaseMemObject(a));
    CHECK(clReleaseMemObject(cb));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseKernel(sk));
    for (cl_uint i = 0; i < n; i++) CHECK(clReleaseKernel(ks[i]));
    CHECK(clReleaseProgram(p));
}

static int notified;
static void CL_CALLBACK build_notify(cl_program p, void *ud) {
    (void)p;
    notified = *(int *)ud;
}

static void build_failure(env_t *t) {
    const char *bad = "__kernel void broken(__global int *a) { a[0] = undefined_thing; }\n";
    cl_int e;
    cl_program p = clCreateProgramWithSource(t->ctx, 1, &bad, NULL, &e);
    CHECK_ERR(e, "create bad");
    int token = 77;
    notified = 0;
    e = clBuildProgram(p, 1, &t->device, NULL, build_notify, &token);
    /* The notification may come on another thread; wait a bounded time. */
    for (int i = 0; i < 500 && notified != token; i++) sleep_ms(10);
    EXPECT_CODE("bad build", e, CL_BUILD_PROGRAM_FAILURE);
    printf("build notify called: %d\n", notified == token);
    size_t n = 0;
    CHECK(clGetProgramBuildInfo(p, t->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n));
    char *log = malloc(n + 1);
    CHECK(clGetProgramBuildInfo(p, t->device, CL_PROGRAM_BUILD_LOG, n, log, NULL));
    log[n] = 0;
    printf("build log mentions the identifier: %d\n", strstr(log, "undefined_thing") != NULL);
    cl_build_status bs;
    CHECK(clGetProgramBuildInfo(p, t->device, CL_PROGRAM_BUILD_STATUS, sizeof bs, &bs, NULL));
    printf("status after failed build: %d\n", bs);
    cl_kernel k = clCreateKernel(p, "broken", &e);
    EXPECT_CODE("kernel from failed build", e, CL_INVALID_PROGRAM_EXECUTABLE);
    ASSERT(k == NULL);
    free(log);
    /* Missing -D: the #error fires. */
    cl_program p2 = clCreateProgramWithSource(t->ctx, 1, &src, NULL, &e);
    CHECK_ERR(e, "create src");
    EXPECT_CODE("build without SCALE", clBuildProgram(p2, 0, NULL, "", NULL, NULL), CL_BUILD_PROGRAM_FAILURE);
    char blog[4096] = "";
    CHECK(clGetProgramBuildInfo(p2, t->device, CL_PROGRAM_BUILD_LOG, sizeof blog, blog, NULL));
    printf("build log has #error text: %d\n", strstr(blog, "SCALE not defined") != NULL);
    EXPECT_CODE("invalid build option", clBuildProgram(p2, 0, NULL, "-cl-no-such-option", NULL, NULL),
                CL_INVALID_BUILD_OPTIONS);
    CHECK(clReleaseProgram(p2));
    CHECK(clReleaseProgram(p));
}

static void compile_link(env_t *t) {
    const char *hdr = "#define OFFSET 1000\nint helper(int x);\n";
    const char *lib = "#include \"wh/helper.h\"\nint helper(int x) { return x * 2 + OFFSET; }\n";
    const char *main_src = "#include \"wh/helper.h\"\n"
                           "__kernel void use(__global int *a) { a[get_global_id(0)] = helper(get_global_id(0)); }\n";
    cl_int e;
    cl_program h = clCreateProgramWithSource(t->ctx, 1, &hdr, NULL, &e);
    CHECK_ERR(e, "header program");
    cl_program pl = clCreateProgramWithSource(t->ctx, 1, &lib, NULL, &e);
    CHECK_ERR(e, "lib program");
    cl_program pm = clCreateProgramWithSource(t->ctx, 1, &main_src, NULL, &e);
    CHECK_ERR(e, "main program");
    const char *names[1] = {"wh/helper.h"};
    int token = 5;
    notified = 0;
    CHECK(clCompileProgram(pl, 1, &t->device, NULL, 1, &h, names, build_notify, &token));
    for (int i = 0; i < 500 && notified != token; i++) sleep_ms(10);
    printf("compile notify called: %d\n", notified == token);
    CHECK(clCompileProgram(pm, 0, NULL, NULL, 1, &h, names, NULL, NULL));
    EXPECT_CODE("compile without the header", clCompileProgram(pm, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL),
                CL_COMPILE_PROGRAM_FAILURE);
    CHECK(clCompileProgram(pm, 0, NULL, NULL, 1, &h, names, NULL, NULL));
    cl_program_binary_type bt;
    CHECK(clGetProgramBuildInfo(pm, t->device, CL_PROGRAM_BINARY_TYPE, sizeof bt, &bt, NULL));
    printf("compiled binary type: %x\n", bt);
    cl_program objs[2] = {pm, pl};
    token = 9;
    notified = 0;
    cl_program linked = clLinkProgram(t->ctx, 1, &t->device, NULL, 2, objs, build_notify, &token, &e);
    CHECK_ERR(e, "clLinkProgram");
    for (int i = 0; i < 500 && notified != token; i++) sleep_ms(10);
    printf("link notify called: %d\n", notified == token);
    CHECK(clGetProgramBuildInfo(linked, t->device, CL_PROGRAM_BINARY_TYPE, sizeof bt, &bt, NULL));
    printf("linked binary type: %x\n", bt);
    cl_kernel k = kernel(linked, "use");
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 8 * sizeof(int), NULL);
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t g = 8;
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    int out[8];
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    ASSERT(out[0] == 1000 && out[7] == 1014);
    printf("linked: ok\n");
    /* A link that cannot resolve helper(). */
    cl_program only[1] = {pm};
    cl_program bad = clLinkProgram(t->ctx, 1, &t->device, NULL, 1, only, NULL, NULL, &e);
    printf("link unresolved: %d null %d\n", e, bad == NULL);
    if (bad) CHECK(clReleaseProgram(bad));
    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(linked));
    CHECK(clReleaseProgram(h));
    CHECK(clReleaseProgram(pl));
    CHECK(clReleaseProgram(pm));
}

static void binaries(env_t *t) {
    cl_program p = build(t, src, "-DSCALE=5");
    size_t sizes[1] = {0};
    CHECK(clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof sizes, sizes, NULL));
    ASSERT(sizes[0] > 0);
    size_t ret = 0;
    CHECK(clGetProgramInfo(p, CL_PROGRAM_BINARIES, 0, NULL, &ret));
    printf("binaries: value size %zu\n", ret);
    unsigned char *bin = malloc(sizes[0]);
    unsigned char *ptrs[1] = {bin};
    CHECK(clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof ptrs, ptrs, NULL));
    printf("~binary: %zu bytes hash %08x\n", sizes[0], fnv(bin, sizes[0]));
    EXPECT_CODE("binaries into a short array", clGetProgramInfo(p, CL_PROGRAM_BINARIES, 1, ptrs, NULL),
                CL_INVALID_VALUE);
    const unsigned char *cb[1] = {bin};
    cl_int st = -1, e;
    cl_program p2 = clCreateProgramWithBinary(t->ctx, 1, &t->device, sizes, cb, &st, &e);
    CHECK_ERR(e, "clCreateProgramWithBinary");
    printf("binary status: %d\n", st);
    CHECK(clBuildProgram(p2, 1, &t->device, NULL, NULL, NULL));
    run_scale(t, p2, 5.0f, "from binary");
    /* Garbage binary. */
    unsigned char junk[64];
    memset(junk, 0x42, sizeof junk);
    const unsigned char *jb[1] = {junk};
    size_t js[1] = {sizeof junk};
    st = 1;
    cl_program p3 = clCreateProgramWithBinary(t->ctx, 1, &t->device, js, jb, &st, &e);
    printf("junk binary: %d status %d null %d\n", e, st, p3 == NULL);
    if (p3) CHECK(clReleaseProgram(p3));
    size_t zs[1] = {0};
    p3 = clCreateProgramWithBinary(t->ctx, 1, &t->device, zs, jb, &st, &e);
    printf("zero-length binary: %d null %d\n", e, p3 == NULL);
    /* Two bytes of a binary's magic, and zeros after them (natively the
     * library reads its fixed header whatever the length; through Wormhole
     * it must read zeros there too, not the request behind the copy). */
    static unsigned char shortbin[4096] = {'B', 'C'};
    const unsigned char *sb[1] = {shortbin};
    size_t ss[1] = {2};
    st = 1;
    p3 = clCreateProgramWithBinary(t->ctx, 1, &t->device, ss, sb, &st, &e);
    printf("two-byte binary: %d status %d null %d\n", e, st, p3 == NULL);
    if (p3) CHECK(clReleaseProgram(p3));
    free(bin);
    CHECK(clReleaseProgram(p2));
    CHECK(clReleaseProgram(p));
}

/* An empty source builds, and reads back as the empty string. Through
 * Wormhole its length of 0 once sent the library reading past it. */
static void empty_source(env_t *t) {
    const char *empty = "";
    size_t zero = 0;
    for (int with_len = 0; with_len < 2; with_len++) {
        cl_int e;
        cl_program p = clCreateProgramWithSource(t->ctx, 1, &empty, with_len ? &zero : NULL, &e);
        CHECK_ERR(e, "empty program");
        CHECK(clBuildProgram(p, 1, &t->device, "", NULL, NULL));
        char got[64];
        size_t n = 0;
        memset(got, 'x', sizeof got);
        CHECK(clGetProgramInfo(p, CL_PROGRAM_SOURCE, sizeof got, got, &n));
        printf("empty source (lengths %s): builds, source of %zu byte(s), first %d\n", with_len ? "given" : "NULL", n,
               got[0]);
        CHECK(clReleaseProgram(p));
    }
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    build_and_info(&t);
    build_failure(&t);
    compile_link(&t);
    binaries(&t);
    empty_source(&t);
    env_done(&t);
    printf("programs: done\n");
    return 0;
}
