/* One tenant of the delay-storing benchmark (bench/delay-storing/run.py),
 * driven line by line on stdin:
 *
 *   tenant MIB NBUF     holds MIB MiB: NBUF data buffers and a small result
 *                       buffer, written by kernels at start ("ready"), or
 *                       prints "refused CODE" and exits 3 when the device
 *                       has no room for it
 *   cell R W            reads the data buffers in bit mask R (a kernel sums
 *                       each into the result buffer) and updates those in W
 *                       (x = 3x + 1, a kernel over the whole buffer), then
 *                       waits: "ok NS"
 *   poke I              a one-item kernel on data buffer I: "ok NS"
 *   verify              reads every buffer back and checks it against the
 *                       updates made: "verified HASH"
 *   quit
 *
 * The benchmark measures the server, so the program does the same work
 * natively and through Wormhole; it checks what it reads.
 */
#define BENCH_NAME "tenant"
#include "../common/bench.h"
#include "tenant_loop.h"
#include <stdint.h>

#define MAXBUF 64
#define OUT_BYTES (64 * 1024)

static const char *src =
    "__kernel void init(__global uint *x, uint seed) {\n"
    "  size_t i = get_global_id(0); x[i] = (uint)i * 2654435761u + seed;\n"
    "}\n"
    "__kernel void update(__global uint *x) {\n"
    "  size_t i = get_global_id(0); x[i] = x[i] * 3u + 1u;\n"
    "}\n"
    "__kernel void sum(__global const uint *x, __global uint *out, uint per) {\n"
    "  size_t g = get_global_id(0); uint s = 0;\n"
    "  for (uint j = 0; j < per; j++) s += x[g * per + j];\n"
    "  out[g % (64 * 1024 / 4)] += s;\n"
    "}\n";

/* What the stdin lines work on (tenant_loop.h). */
static cl_command_queue q;
static cl_kernel kup, ksum;
static cl_mem buf[MAXBUF];
static int nbuf;
static size_t bytes, n, sums, one = 1;

static void cell(unsigned long r, unsigned long w) {
    for (int b = 0; b < nbuf; b++) {
        if (r & (1ul << b)) {
            CHECK(clSetKernelArg(ksum, 0, sizeof(cl_mem), &buf[b]));
            CHECK(clEnqueueNDRangeKernel(q, ksum, 1, NULL, &sums, NULL, 0, NULL, NULL));
        }
        if (w & (1ul << b)) {
            CHECK(clSetKernelArg(kup, 0, sizeof(cl_mem), &buf[b]));
            CHECK(clEnqueueNDRangeKernel(q, kup, 1, NULL, &n, NULL, 0, NULL, NULL));
        }
    }
    CHECK(clFinish(q));
}

static void poke(int i) {
    CHECK(clSetKernelArg(ksum, 0, sizeof(cl_mem), &buf[i]));
    CHECK(clEnqueueNDRangeKernel(q, ksum, 1, NULL, &one, NULL, 0, NULL, NULL));
    CHECK(clFinish(q));
}

static int verify(const int *updates) {
    cl_uint *h = malloc(bytes);
    if (!h) return 1;
    for (int b = 0; b < nbuf; b++) {
        CHECK(clEnqueueReadBuffer(q, buf[b], CL_TRUE, 0, bytes, h, 0, NULL, NULL));
        for (size_t j = 0; j < n; j++) {
            cl_uint v = (cl_uint)j * 2654435761u + (cl_uint)b;
            for (int k = 0; k < updates[b]; k++) v = v * 3u + 1u;
            if (h[j] != v) {
                fprintf(stderr, "tenant: buffer %d element %zu is %u, want %u\n", b, j, h[j], v);
                free(h);
                return 1;
            }
        }
    }
    free(h);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tenant MIB NBUF\n");
        return 1;
    }
    size_t mib = (size_t)atol(argv[1]);
    nbuf = atoi(argv[2]);
    if (nbuf < 1 || nbuf > MAXBUF) {
        fprintf(stderr, "tenant: 1..%d buffers\n", MAXBUF);
        return 1;
    }
    bytes = ((mib << 20) - OUT_BYTES) / (size_t)nbuf / 4096 * 4096;
    n = bytes / 4;
    cl_device_id dev;
    cl_context ctx;
    open_device(&dev, &ctx, &q);
    cl_program prog = build_program(ctx, dev, src, NULL);
    cl_kernel kinit = new_kernel(prog, "init");
    kup = new_kernel(prog, "update");
    ksum = new_kernel(prog, "sum");
    cl_int e;
    int updates[MAXBUF] = {0};
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, OUT_BYTES, NULL, &e);
    if (e != CL_SUCCESS) {
        printf("refused %d\n", e);
        return 3;
    }
    for (int b = 0; b < nbuf; b++) {
        buf[b] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
        if (e == CL_SUCCESS) {
            cl_uint seed = (cl_uint)b;
            CHECK(clSetKernelArg(kinit, 0, sizeof(cl_mem), &buf[b]));
            CHECK(clSetKernelArg(kinit, 1, sizeof seed, &seed));
            e = clEnqueueNDRangeKernel(q, kinit, 1, NULL, &n, NULL, 0, NULL, NULL);
            if (e == CL_SUCCESS)
                e = clFinish(q);
        }
        if (e != CL_SUCCESS) {
            printf("refused %d\n", e);
            fflush(stdout);
            return 3;
        }
    }
    cl_uint per = 256;
    sums = n / per;
    CHECK(clSetKernelArg(ksum, 1, sizeof(cl_mem), &out));
    CHECK(clSetKernelArg(ksum, 2, sizeof per, &per));
    /* Every kernel once at every size used later, so that no timed command
     * pays for the library's compilation of a work-group size. */
    CHECK(clSetKernelArg(ksum, 0, sizeof(cl_mem), &buf[0]));
    CHECK(clEnqueueNDRangeKernel(q, ksum, 1, NULL, &sums, NULL, 0, NULL, NULL));
    CHECK(clEnqueueNDRangeKernel(q, ksum, 1, NULL, &one, NULL, 0, NULL, NULL));
    CHECK(clSetKernelArg(kup, 0, sizeof(cl_mem), &buf[0]));
    CHECK(clEnqueueNDRangeKernel(q, kup, 1, NULL, &n, NULL, 0, NULL, NULL));
    updates[0]++;
    CHECK(clFinish(q));
    printf("ready %zu\n", bytes);
    fflush(stdout);
    static const struct tenant_ops ops = {cell, poke, verify};
    int status = tenant_loop(nbuf, updates, &ops);
    if (status != 0)
        return status;
    for (int b = 0; b < nbuf; b++)
        clReleaseMemObject(buf[b]);
    clReleaseMemObject(out);
    clReleaseKernel(kinit);
    clReleaseKernel(kup);
    clReleaseKernel(ksum);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return 0;
}
