/* Kernel arguments of every kind: global, constant and NULL buffers, local
 * memory, scalars of each size, vectors, a struct by value, an image and a
 * sampler; plus clEnqueueTask and work offsets. */
#include "common.h"

typedef struct {
    cl_int a;
    cl_float b;
    cl_long c;
    cl_char d[4];
} pod_t;

static const char *src =
    "typedef struct { int a; float b; long c; char d[4]; } pod_t;\n"
    "__kernel void everything(__global long *out, __constant int *cst, __local int *loc,\n"
    "    char c, uchar uc, short s, ushort us, int i, uint ui, long l, ulong ul,\n"
    "    float f, double d, float4 f4, int2 i2, pod_t pod, __global int *maybe,\n"
    "    read_only image2d_t img, sampler_t smp) {\n"
    "  size_t g = get_global_id(0), lid = get_local_id(0);\n"
    "  loc[lid] = cst[lid] * 2;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  int sum = 0; for (size_t j = 0; j < get_local_size(0); j++) sum += loc[j];\n"
    "  if (g == 0) {\n"
    "    out[0] = c; out[1] = uc; out[2] = s; out[3] = us; out[4] = i; out[5] = ui;\n"
    "    out[6] = l; out[7] = (long)ul; out[8] = (long)(f * 1000); out[9] = (long)(d * 1e6);\n"
    "    out[10] = (long)(f4.x + 10 * f4.y + 100 * f4.z + 1000 * f4.w);\n"
    "    out[11] = i2.x * 1000 + i2.y;\n"
    "    out[12] = pod.a; out[13] = (long)(pod.b * 100); out[14] = pod.c;\n"
    "    out[15] = pod.d[0] + pod.d[1] * 10 + pod.d[2] * 100 + pod.d[3] * 1000;\n"
    "    out[16] = maybe == 0 ? -1 : maybe[0];\n"
    "    uint4 px = read_imageui(img, smp, (int2)(1, 1));\n"
    "    out[17] = px.x + 256 * px.w;\n"
    "    out[18] = get_image_width(img) * 100 + get_image_height(img);\n"
    "  }\n"
    "  out[32 + g] = sum;\n"
    "}\n"
    "__kernel void task(__global int *a, int v) { a[0] = v; }\n"
    "__kernel void offs(__global int *a) { a[get_global_id(0)] = get_global_id(0) * 10 + get_global_offset(0); }\n";

static void everything(env_t *t, cl_program p) {
    cl_kernel k = kernel(p, "everything");
    cl_int e;
    cl_mem out = buffer(t, CL_MEM_READ_WRITE, 64 * sizeof(cl_long), NULL);
    cl_long zero = 0;
    CHECK(clEnqueueFillBuffer(t->q, out, &zero, sizeof zero, 0, 64 * sizeof(cl_long), 0, NULL, NULL));
    int cst[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cl_mem cb = buffer(t, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof cst, cst);
    cl_char c = -7;
    cl_uchar uc = 250;
    cl_short s = -30000;
    cl_ushort us = 60000;
    cl_int i = -2000000000;
    cl_uint ui = 4000000000u;
    cl_long l = -9000000000000LL;
    cl_ulong ul = 9000000000000ULL;
    cl_float f = 3.25f;
    cl_double d = 2.718281;
    cl_float4 f4 = {{1, 2, 3, 4}};
    cl_int2 i2 = {{17, 42}};
    pod_t pod = {123, 4.5f, -77, {1, 2, 3, 4}};
    cl_image_format fmt = {CL_RGBA, CL_UNSIGNED_INT8};
    unsigned char px[4 * 3 * 4];
    for (int j = 0; j < 48; j++) px[j] = (unsigned char)(j + 1);
    cl_mem img = clCreateImage2D(t->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, &fmt, 4, 3, 0, px, &e);
    CHECK_ERR(e, "image");
    cl_sampler smp = clCreateSampler(t->ctx, CL_FALSE, CL_ADDRESS_NONE, CL_FILTER_NEAREST, &e);
    CHECK_ERR(e, "sampler");
    cl_uint n = 0;
    CHECK(clSetKernelArg(k, n++, sizeof out, &out));
    CHECK(clSetKernelArg(k, n++, sizeof cb, &cb));
    CHECK(clSetKernelArg(k, n++, 8 * sizeof(int), NULL));
    CHECK(clSetKernelArg(k, n++, sizeof c, &c));
    CHECK(clSetKernelArg(k, n++, sizeof uc, &uc));
    CHECK(clSetKernelArg(k, n++, sizeof s, &s));
    CHECK(clSetKernelArg(k, n++, sizeof us, &us));
    CHECK(clSetKernelArg(k, n++, sizeof i, &i));
    CHECK(clSetKernelArg(k, n++, sizeof ui, &ui));
    CHECK(clSetKernelArg(k, n++, sizeof l, &l));
    CHECK(clSetKernelArg(k, n++, sizeof ul, &ul));
    CHECK(clSetKernelArg(k, n++, sizeof f, &f));
    CHECK(clSetKernelArg(k, n++, sizeof d, &d));
    CHECK(clSetKernelArg(k, n++, sizeof f4, &f4));
    CHECK(clSetKernelArg(k, n++, sizeof i2, &i2));
    CHECK(clSetKernelArg(k, n++, sizeof pod, &pod));
    CHECK(clSetKernelArg(k, n++, sizeof(cl_mem), NULL)); /* a NULL buffer */
    CHECK(clSetKernelArg(k, n++, sizeof img, &img));
    CHECK(clSetKernelArg(k, n++, sizeof smp, &smp));
    size_t g = 16, lsz = 8;
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, &lsz, 0, NULL, NULL));
    cl_long r[64];
    CHECK(clEnqueueReadBuffer(t->q, out, CL_TRUE, 0, sizeof r, r, 0, NULL, NULL));
    for (int j = 0; j < 19; j++) printf("arg result %d: %lld\n", j, (long long)r[j]);
    ASSERT(r[0] == -7 && r[1] == 250 && r[2] == -30000 && r[3] == 60000 && r[4] == -2000000000LL);
    ASSERT(r[5] == 4000000000LL && r[6] == l && r[7] == (cl_long)ul && r[8] == 3250 && r[9] == 2718281);
    ASSERT(r[10] == 4321 && r[11] == 17042 && r[12] == 123 && r[13] == 450 && r[14] == -77 && r[15] == 4321);
    ASSERT(r[16] == -1 && r[17] == 21 + 256 * 24 && r[18] == 403);
    for (int j = 0; j < 16; j++) ASSERT(r[32 + j] == 72);
    printf("everything: ok\n");
    /* A global buffer in place of the NULL one. */
    int mv = 31337;
    cl_mem maybe = buffer(t, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof mv, &mv);
    CHECK(clSetKernelArg(k, 16, sizeof maybe, &maybe));
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, &lsz, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, out, CL_TRUE, 16 * sizeof(cl_long), sizeof(cl_long), r, 0, NULL, NULL));
    printf("non-null buffer arg: %lld\n", (long long)r[0]);
    /* Arguments rejected. */
    EXPECT_CODE("arg index past the last", clSetKernelArg(k, 19, sizeof i, &i), CL_INVALID_ARG_INDEX);
    EXPECT_CODE("int arg with size 2", clSetKernelArg(k, 7, 2, &i), CL_INVALID_ARG_SIZE);
    PRINT_CODE("struct arg with wrong size", clSetKernelArg(k, 15, sizeof pod - 8, &pod));
    EXPECT_CODE("local arg with a value", clSetKernelArg(k, 2, 16, &i), CL_INVALID_ARG_VALUE);
    EXPECT_CODE("local arg with size 0", clSetKernelArg(k, 2, 0, NULL), CL_INVALID_ARG_SIZE);
    EXPECT_CODE("scalar arg with NULL value", clSetKernelArg(k, 7, sizeof i, NULL), CL_INVALID_ARG_VALUE);
    /* Objects of the wrong kind: PoCL 3 accepts them (and would dereference a
     * sampler as a buffer); Wormhole's server checks kinds against the
     * kernel's declared argument types and refuses them, as the
     * specification says. Platform-specific lines: printed, not compared. */
    cl_mem notmem = (cl_mem)smp;
    PRINT_CODE("~sampler passed as buffer", clSetKernelArg(k, 0, sizeof notmem, &notmem));
    PRINT_CODE("~buffer passed as image", clSetKernelArg(k, 17, sizeof out, &out));
    cl_sampler notsmp = (cl_sampler)out;
    PRINT_CODE("~buffer passed as sampler", clSetKernelArg(k, 18, sizeof notsmp, &notsmp));
    CHECK(clReleaseMemObject(maybe));
    CHECK(clReleaseMemObject(out));
    CHECK(clReleaseMemObject(cb));
    CHECK(clReleaseMemObject(img));
    CHECK(clReleaseSampler(smp));
    CHECK(clReleaseKernel(k));
}

static void unset_args(env_t *t, cl_program p) {
    cl_kernel k = kernel(p, "task");
    size_t g = 1;
    EXPECT_CODE("enqueue with args not set", clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, NULL, 0, NULL, NULL),
                CL_INVALID_KERNEL_ARGS);
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 4, NULL);
    int v = 99;
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    CHECK(clSetKernelArg(k, 1, sizeof v, &v));
    CHECK(clEnqueueTask(t->q, k, 0, NULL, NULL));
    int r = 0;
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, 4, &r, 0, NULL, NULL));
    printf("task: %d\n", r);
    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseKernel(k));

    cl_kernel o = kernel(p, "offs");
    cl_mem a = buffer(t, CL_MEM_READ_WRITE, 16 * sizeof(int), NULL);
    int neg = -1;
    CHECK(clEnqueueFillBuffer(t->q, a, &neg, sizeof neg, 0, 16 * sizeof(int), 0, NULL, NULL));
    CHECK(clSetKernelArg(o, 0, sizeof a, &a));
    size_t off = 4, gs = 8;
    CHECK(clEnqueueNDRangeKernel(t->q, o, 1, &off, &gs, NULL, 0, NULL, NULL));
    int out[16];
    CHECK(clEnqueueReadBuffer(t->q, a, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    dump("offsets", out, sizeof out);
    ASSERT(out[3] == -1 && out[4] == 44 && out[11] == 114 && out[12] == -1);
    CHECK(clReleaseMemObject(a));
    CHECK(clReleaseKernel(o));
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    cl_program p = build(&t, src, NULL);
    everything(&t, p);
    unset_args(&t, p);
    CHECK(clReleaseProgram(p));
    env_done(&t);
    printf("kernels: done\n");
    return 0;
}
