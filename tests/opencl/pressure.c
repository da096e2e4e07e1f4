/* Memory under pressure (delay storing): a tenant holding buffers, a
 * read-only input, a sub-buffer, an image and a buffer of many small
 * transfers, which works in rounds with idle gaps between them, so that a
 * server whose device is shared by more than it holds evicts its objects
 * while it waits and restores them when it goes on. Kernel arguments are
 * set once, before the first round; between rounds a buffer is mapped and
 * written through the mapping, and small buffers are written and read (in
 * place, where the client can). Every result is checked against the same
 * computation on the host, and printed as hashes (the same natively).
 *
 * WH_PRESSURE_MB (default 8): how many MiB of buffers the tenant holds;
 * WH_PRESSURE_ROUNDS (default 6); WH_PRESSURE_GAP_MS (default 30): the
 * idle gap. WH_PRESSURE_HOLD=1: after the first round print "holding" and
 * sleep, for a test that kills the process there. */
#include <unistd.h>

#include "common.h"

static const char *src =
    "__kernel void advance(__global uint *acc, __global const uint *in, uint k) {\n"
    "  size_t i = get_global_id(0); acc[i] = acc[i] * 3u + in[i] + k;\n"
    "}\n"
    "__kernel void bump(__global uint *part) { part[get_global_id(0)] += 7u; }\n"
    "__kernel void look(read_only image2d_t im, sampler_t s, __global uint *out, int w) {\n"
    "  int i = (int)get_global_id(0);\n"
    "  out[i] += read_imageui(im, s, (int2)(i % w, (i / w) % w)).x;\n"
    "}\n";

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return v && *v ? atol(v) : dflt;
}

#define NACC 4
#define W 16

int main(void) {
    env_t t;
    env_init(&t, 0);
    long mb = env_long("WH_PRESSURE_MB", 8);
    int rounds = (int)env_long("WH_PRESSURE_ROUNDS", 6);
    long gap = env_long("WH_PRESSURE_GAP_MS", 30);
    /* Half in the accumulators, a quarter in the input, a quarter in the
     * image's target; whole pages of uints. */
    size_t n = (size_t)mb * 1024 * 1024 / 4 / (NACC * 2 + 2) / 1024 * 1024;
    if (n < 1024) n = 1024;
    size_t bytes = n * 4;
    printf("pressure: %d accumulators of %zu uints, %d rounds\n", NACC, n, rounds);

    cl_uint *in = malloc(bytes), *host[NACC], *look = malloc(bytes);
    for (size_t i = 0; i < n; i++) in[i] = (cl_uint)(i * 2654435761u);
    cl_mem input = buffer(&t, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, in);
    cl_mem acc[NACC];
    for (int a = 0; a < NACC; a++) {
        host[a] = malloc(bytes);
        for (size_t i = 0; i < n; i++) host[a][i] = (cl_uint)(a * 1000 + i);
        /* One made with its contents, the others written after. */
        if (a == 0) {
            acc[a] = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host[a]);
        } else {
            acc[a] = buffer(&t, CL_MEM_READ_WRITE, bytes, NULL);
            CHECK(clEnqueueWriteBuffer(t.q, acc[a], CL_TRUE, 0, bytes, host[a], 0, NULL, NULL));
        }
    }
    /* The second half of accumulator 1, as a sub-buffer. */
    cl_buffer_region half = {bytes / 2, bytes / 2};
    cl_int e;
    cl_mem sub = clCreateSubBuffer(acc[1], CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &half, &e);
    CHECK_ERR(e, "clCreateSubBuffer");
    /* A small image the kernel reads, and the buffer it adds into (left
     * untouched by the host: it starts as zeros). */
    cl_image_format fmt = {CL_R, CL_UNSIGNED_INT32};
    cl_image_desc desc = image_desc(CL_MEM_OBJECT_IMAGE2D, W, W, 0);
    cl_uint px[W * W];
    for (int i = 0; i < W * W; i++) px[i] = (cl_uint)(i * 31 + 5);
    cl_mem img = clCreateImage(t.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, &fmt, &desc, px, &e);
    CHECK_ERR(e, "clCreateImage");
    cl_sampler smp = clCreateSampler(t.ctx, CL_FALSE, CL_ADDRESS_CLAMP_TO_EDGE, CL_FILTER_NEAREST, &e);
    CHECK_ERR(e, "clCreateSampler");
    cl_uint zero = 0;
    cl_mem out = buffer(&t, CL_MEM_READ_WRITE, bytes, NULL);
    CHECK(clEnqueueFillBuffer(t.q, out, &zero, sizeof zero, 0, bytes, 0, NULL, NULL));
    memset(look, 0, bytes);
    /* Small buffers, moved in place by the client when its queue is idle. */
    cl_mem small = buffer(&t, CL_MEM_READ_WRITE, 256, NULL);
    cl_uint small_host[64] = {0};

    cl_program p = build(&t, src, NULL);
    cl_kernel step[NACC], bump = kernel(p, "bump"), lk = kernel(p, "look");
    for (int a = 0; a < NACC; a++) {
        step[a] = kernel(p, "advance");
        CHECK(clSetKernelArg(step[a], 0, sizeof(cl_mem), &acc[a]));
        CHECK(clSetKernelArg(step[a], 1, sizeof(cl_mem), &input));
    }
    CHECK(clSetKernelArg(bump, 0, sizeof(cl_mem), &sub));
    cl_int w = W;
    CHECK(clSetKernelArg(lk, 0, sizeof(cl_mem), &img));
    CHECK(clSetKernelArg(lk, 1, sizeof(cl_sampler), &smp));
    CHECK(clSetKernelArg(lk, 2, sizeof(cl_mem), &out));
    CHECK(clSetKernelArg(lk, 3, sizeof w, &w));
    CHECK(clFinish(t.q));

    for (int r = 0; r < rounds; r++) {
        for (int a = 0; a < NACC; a++) {
            cl_uint k = (cl_uint)(r * 10 + a);
            CHECK(clSetKernelArg(step[a], 2, sizeof k, &k));
            CHECK(clEnqueueNDRangeKernel(t.q, step[a], 1, NULL, &n, NULL, 0, NULL, NULL));
            for (size_t i = 0; i < n; i++) host[a][i] = host[a][i] * 3u + in[i] + k;
        }
        size_t h = n / 2;
        CHECK(clEnqueueNDRangeKernel(t.q, bump, 1, NULL, &h, NULL, 0, NULL, NULL));
        for (size_t i = n / 2; i < n; i++) host[1][i] += 7u;
        CHECK(clEnqueueNDRangeKernel(t.q, lk, 1, NULL, &n, NULL, 0, NULL, NULL));
        for (size_t i = 0; i < n; i++) look[i] += px[(i % W) + ((i / W) % W) * W];
        /* Through a mapping: the last accumulator's first 1024 values. */
        cl_uint *m = clEnqueueMapBuffer(t.q, acc[NACC - 1], CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, 4096, 0,
                                        NULL, NULL, &e);
        CHECK_ERR(e, "clEnqueueMapBuffer");
        for (int i = 0; i < 1024; i++) {
            ASSERT(m[i] == host[NACC - 1][i]);
            m[i] ^= 0x5a5a5a5au;
            host[NACC - 1][i] ^= 0x5a5a5a5au;
        }
        CHECK(clEnqueueUnmapMemObject(t.q, acc[NACC - 1], m, 0, NULL, NULL));
        CHECK(clFinish(t.q));
        /* Small transfers on an idle queue. */
        for (int i = 0; i < 64; i++) small_host[i] = (cl_uint)(r * 64 + i);
        CHECK(clEnqueueWriteBuffer(t.q, small, CL_FALSE, 0, sizeof small_host, small_host, 0, NULL, NULL));
        CHECK(clFinish(t.q));
        cl_uint back[64];
        CHECK(clEnqueueReadBuffer(t.q, small, CL_TRUE, 0, sizeof back, back, 0, NULL, NULL));
        ASSERT(memcmp(back, small_host, sizeof back) == 0);
        printf("round %d done\n", r);
        fflush(stdout);
        if (r == 0 && env_long("WH_PRESSURE_HOLD", 0)) {
            printf("~holding\n");
            fflush(stdout);
            for (;;) sleep(1);
        }
        usleep((useconds_t)gap * 1000);
    }
    cl_uint *got = malloc(bytes);
    for (int a = 0; a < NACC; a++) {
        CHECK(clEnqueueReadBuffer(t.q, acc[a], CL_TRUE, 0, bytes, got, 0, NULL, NULL));
        ASSERT(memcmp(got, host[a], bytes) == 0);
        printf("accumulator %d: %08x\n", a, fnv(got, bytes));
    }
    CHECK(clEnqueueReadBuffer(t.q, out, CL_TRUE, 0, bytes, got, 0, NULL, NULL));
    ASSERT(memcmp(got, look, bytes) == 0);
    printf("image sums: %08x\n", fnv(got, bytes));
    CHECK(clEnqueueReadBuffer(t.q, input, CL_TRUE, 0, bytes, got, 0, NULL, NULL));
    ASSERT(memcmp(got, in, bytes) == 0);
    printf("input unchanged: %08x\n", fnv(got, bytes));

    for (int a = 0; a < NACC; a++) {
        CHECK(clReleaseKernel(step[a]));
        CHECK(clReleaseMemObject(acc[a]));
        free(host[a]);
    }
    CHECK(clReleaseKernel(bump));
    CHECK(clReleaseKernel(lk));
    CHECK(clReleaseProgram(p));
    CHECK(clReleaseMemObject(sub));
    CHECK(clReleaseMemObject(img));
    CHECK(clReleaseMemObject(out));
    CHECK(clReleaseMemObject(small));
    CHECK(clReleaseMemObject(input));
    CHECK(clReleaseSampler(smp));
    free(in);
    free(look);
    free(got);
    env_done(&t);
    printf("pressure: all results as computed on the host\n");
    printf("pressure: done\n");
    return 0;
}
