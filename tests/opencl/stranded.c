/* A program whose server may vanish from the network while it waits: it
 * computes once (the connection works), prints "waiting", then blocks in a
 * wait the server must answer, and prints what the wait returned.
 *   stranded event    waits on a user event nobody sets (the client polls)
 *   stranded kernel [N]  waits in clFinish behind a kernel of N steps of a
 *                     dependent chain (default 4e9: seconds on a CPU; the
 *                     client sleeps, sending nothing)
 *   stranded write N    queues 64 MiB behind a kernel of N steps and waits for
 *                     it, then reads it back: over TCP the tenant stops reading
 *                     while the kernel runs, a live peer that must not be cut
 * Exits 0 once the wait returns, whatever it returned: the test reads it. */
#include "common.h"

static const char *src =
    "__kernel void spin(__global float *out, ulong n) {\n"
    "  float acc = out[0];\n"
    "  for (ulong i = 0; i < n; i++) acc = acc * 1.0000001f + 1.0f;\n"
    "  out[0] = acc;\n"
    "}\n";

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 ||
        (strcmp(argv[1], "event") != 0 && strcmp(argv[1], "kernel") != 0 &&
         strcmp(argv[1], "write") != 0)) {
        fprintf(stderr, "usage: stranded event | stranded kernel|write [STEPS]\n");
        return 2;
    }
    env_t t;
    env_init(&t, 0);
    printf("sum of squares: %ld\n", sum_of_squares(&t));
    cl_program p = build(&t, src, NULL);

    cl_int err;
    if (strcmp(argv[1], "event") == 0) {
        cl_event never = clCreateUserEvent(t.ctx, &err);
        CHECK(err);
        printf("waiting\n");
        fflush(stdout);
        err = clWaitForEvents(1, &never);
    } else {
        float zero = 0.0f;
        cl_mem o = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, &zero);
        cl_kernel s = kernel(p, "spin");
        cl_ulong n = argc == 3 ? strtoull(argv[2], NULL, 10) : 4000000000ull;
        CHECK(clSetKernelArg(s, 0, sizeof o, &o));
        CHECK(clSetKernelArg(s, 1, sizeof n, &n));
        size_t one = 1;
        CHECK(clEnqueueNDRangeKernel(t.q, s, 1, NULL, &one, NULL, 0, NULL, NULL));
        CHECK(clFlush(t.q));
        if (strcmp(argv[1], "write") == 0) {
            size_t big = 64u << 20;
            unsigned char *data = malloc(big), *back = malloc(big);
            if (!data || !back) return 1;
            for (size_t i = 0; i < big; i++) data[i] = (unsigned char)(i * 7 + 3);
            cl_mem w = buffer(&t, CL_MEM_READ_WRITE, big, NULL);
            printf("waiting\n");
            fflush(stdout);
            err = clEnqueueWriteBuffer(t.q, w, CL_FALSE, 0, big, data, 0, NULL, NULL);
            if (err == CL_SUCCESS) err = clFinish(t.q);
            if (err == CL_SUCCESS)
                err = clEnqueueReadBuffer(t.q, w, CL_TRUE, 0, big, back, 0, NULL, NULL);
            printf("data back: %s\n",
                   err == CL_SUCCESS && memcmp(data, back, big) == 0 ? "same" : "differs");
        } else {
            printf("waiting\n");
            fflush(stdout);
            err = clFinish(t.q);
        }
    }
    printf("wait returned %d\n", err);
    /* No env_done: after a lost server its releases would fail too. */
    (void)env_done;
    return 0;
}
