/* A child made by fork() after the parent connected shares the parent's
 * rings; it must not use them (its calls would interleave with the
 * parent's). Through Wormhole the child's calls fail with
 * CL_OUT_OF_RESOURCES and the parent's connection keeps working. Natively
 * the child's calls succeed, so this program is run through Wormhole only
 * (crates/wormhole/it/tests/fork.rs), not compared with a native run. */
#include "common.h"

#include <sys/wait.h>
#include <unistd.h>

/* A call that must reach the server: the client keeps no answer to it
 * (a device's type, once asked, it would answer from its cache, which is
 * harmless in a child: that touches no ring). */
static cl_int device_type(env_t *t) {
    cl_bool available = CL_FALSE;
    return clGetDeviceInfo(t->device, CL_DEVICE_AVAILABLE, sizeof available, &available, NULL);
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    printf("parent before: %d\n", (int)device_type(&t));
    fflush(stdout);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        printf("child: %d\n", (int)device_type(&t));
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    ASSERT(waitpid(pid, &status, 0) == pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The parent's channel is intact: calls, a kernel run and a read. */
    printf("parent after: %d\n", (int)device_type(&t));
    cl_program p = build(&t, "__kernel void k(__global int *o) { o[get_global_id(0)] = 7; }", "");
    cl_kernel k = kernel(p, "k");
    cl_mem b = buffer(&t, CL_MEM_WRITE_ONLY, 4 * sizeof(int), NULL);
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t n = 4;
    CHECK(clEnqueueNDRangeKernel(t.q, k, 1, NULL, &n, NULL, 0, NULL, NULL));
    int out[4] = {0};
    CHECK(clEnqueueReadBuffer(t.q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    printf("parent kernel: %d %d %d %d\n", out[0], out[1], out[2], out[3]);
    clReleaseMemObject(b);
    clReleaseKernel(k);
    clReleaseProgram(p);
    env_done(&t);
    return 0;
}
