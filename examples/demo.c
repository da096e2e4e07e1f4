/* A small OpenCL program that Wormhole's demo runs twice, natively and
 * through a Wormhole server, without recompiling: vector addition and a
 * matrix multiply, checked against the CPU, with timings. It selects the
 * first platform whose name contains $DEMO_PLATFORM (default: any). */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                              \
    do {                                                                      \
        cl_int e_ = (x);                                                      \
        if (e_ != CL_SUCCESS) {                                               \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x, \
                    e_);                                                      \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static const char *src =
    "__kernel void vadd(__global const float *a, __global const float *b,\n"
    "                   __global float *c) {\n"
    "  size_t i = get_global_id(0); c[i] = a[i] + b[i];\n"
    "}\n"
    "__kernel void matmul(__global const float *a, __global const float *b,\n"
    "                     __global float *c, int n) {\n"
    "  int r = get_global_id(1), k = get_global_id(0); float s = 0;\n"
    "  for (int j = 0; j < n; j++) s += a[r * n + j] * b[j * n + k];\n"
    "  c[r * n + k] = s;\n"
    "}\n";

int main(void) {
    const char *want = getenv("DEMO_PLATFORM");
    cl_platform_id plats[16];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(16, plats, &np));
    cl_platform_id plat = NULL;
    char name[256] = "";
    for (cl_uint i = 0; i < np && !plat; i++) {
        CHECK(clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name, name, NULL));
        if (!want || strstr(name, want)) plat = plats[i];
    }
    if (!plat) {
        fprintf(stderr, "no platform matching '%s'\n", want ? want : "");
        return 1;
    }
    cl_device_id dev;
    CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
    char dname[256];
    CHECK(clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof dname, dname, NULL));
    printf("platform: %s\ndevice:   %s\n", name, dname);

    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CHECK(err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    CHECK(err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    CHECK(err);
    CHECK(clBuildProgram(prog, 1, &dev, "", NULL, NULL));

    /* Vector addition, many small launches (call-heavy). */
    const size_t n = 1 << 16;
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    for (size_t i = 0; i < n; i++) { a[i] = (float)i; b[i] = 2.0f * i; }
    cl_mem da = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, a, &err); CHECK(err);
    cl_mem db = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, b, &err); CHECK(err);
    cl_mem dc = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, n * 4, NULL, &err); CHECK(err);
    cl_kernel vadd = clCreateKernel(prog, "vadd", &err); CHECK(err);
    CHECK(clSetKernelArg(vadd, 0, sizeof da, &da));
    CHECK(clSetKernelArg(vadd, 1, sizeof db, &db));
    CHECK(clSetKernelArg(vadd, 2, sizeof dc, &dc));
    const int launches = 500;
    double t0 = now();
    for (int i = 0; i < launches; i++)
        CHECK(clEnqueueNDRangeKernel(q, vadd, 1, NULL, &n, NULL, 0, NULL, NULL));
    CHECK(clFinish(q));
    double t_vadd = now() - t0;
    CHECK(clEnqueueReadBuffer(q, dc, CL_TRUE, 0, n * 4, c, 0, NULL, NULL));
    double sum = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) { sum += c[i]; if (c[i] != 3.0f * i) bad++; }
    printf("vadd:   %d launches of %zu items in %.3f s, checksum %.6e, %s\n", launches, n,
           t_vadd, sum, bad ? "WRONG" : "correct");

    /* Matrix multiply (compute-bound). */
    const int m = 256;
    float *ma = malloc(m * m * 4), *mb = malloc(m * m * 4), *mc = malloc(m * m * 4);
    for (int i = 0; i < m * m; i++) { ma[i] = (float)(i % 7) - 3; mb[i] = (float)(i % 5) - 2; }
    cl_mem dma = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, m * m * 4, ma, &err); CHECK(err);
    cl_mem dmb = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, m * m * 4, mb, &err); CHECK(err);
    cl_mem dmc = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, m * m * 4, NULL, &err); CHECK(err);
    cl_kernel mm = clCreateKernel(prog, "matmul", &err); CHECK(err);
    CHECK(clSetKernelArg(mm, 0, sizeof dma, &dma));
    CHECK(clSetKernelArg(mm, 1, sizeof dmb, &dmb));
    CHECK(clSetKernelArg(mm, 2, sizeof dmc, &dmc));
    CHECK(clSetKernelArg(mm, 3, sizeof m, &m));
    size_t g2[2] = {m, m};
    t0 = now();
    CHECK(clEnqueueNDRangeKernel(q, mm, 2, NULL, g2, NULL, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(q, dmc, CL_TRUE, 0, m * m * 4, mc, 0, NULL, NULL));
    double t_mm = now() - t0;
    bad = 0;
    double msum = 0;
    for (int r = 0; r < m; r += 17)
        for (int k = 0; k < m; k += 13) {
            float s = 0;
            for (int j = 0; j < m; j++) s += ma[r * m + j] * mb[j * m + k];
            if (fabsf(s - mc[r * m + k]) > 1e-3f) bad++;
        }
    for (int i = 0; i < m * m; i++) msum += mc[i];
    printf("matmul: %dx%d in %.3f s, checksum %.6e, %s\n", m, m, t_mm, msum, bad ? "WRONG" : "correct");

    clReleaseKernel(vadd); clReleaseKernel(mm);
    clReleaseMemObject(da); clReleaseMemObject(db); clReleaseMemObject(dc);
    clReleaseMemObject(dma); clReleaseMemObject(dmb); clReleaseMemObject(dmc);
    clReleaseProgram(prog); clReleaseCommandQueue(q); clReleaseContext(ctx);
    free(a); free(b); free(c); free(ma); free(mb); free(mc);
    return bad ? 1 : 0;
}
