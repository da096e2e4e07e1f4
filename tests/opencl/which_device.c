/* Which device a server offers, and that it computes: prints the device's
 * name, then runs a small kernel on it and prints the result. Used to show
 * that servers side by side each serve their own driver configuration. */
#include "common.h"

static const char *src = "__kernel void sq(__global int *a) {\n"
                         "  size_t i = get_global_id(0); a[i] = a[i] * a[i];\n"
                         "}\n";

int main(void) {
    env_t t;
    env_init(&t, 0);
    char name[256] = "";
    CHECK(clGetDeviceInfo(t.device, CL_DEVICE_NAME, sizeof name, name, NULL));
    printf("device: %s\n", name);
    int v[64];
    for (int i = 0; i < 64; i++) v[i] = i;
    cl_mem b = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof v, v);
    cl_program p = build(&t, src, NULL);
    cl_kernel k = kernel(p, "sq");
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t g = 64;
    CHECK(clEnqueueNDRangeKernel(t.q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t.q, b, CL_TRUE, 0, sizeof v, v, 0, NULL, NULL));
    long sum = 0;
    for (int i = 0; i < 64; i++) sum += v[i];
    printf("sum of squares: %ld\n", sum);
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    CHECK(clReleaseMemObject(b));
    env_done(&t);
    return 0;
}
