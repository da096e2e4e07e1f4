/* whbench: the OpenCL side of Wormhole's benchmarks. A plain OpenCL program,
 * linked to the system's libOpenCL, run natively and (unmodified) through
 * wormhole-run. It prints one line "RESULT {json}".
 *
 *   whbench nullcall ITERS          per-call time of clGetEventInfo on a
 *                                   completed event and of
 *                                   clGetDeviceInfo(CL_DEVICE_TYPE)
 *   whbench callheavy LAUNCHES EVERY  small kernel launches (clSetKernelArg +
 *                                   clEnqueueNDRangeKernel), clFinish every
 *                                   EVERY launches; wall and own CPU time
 *   whbench bulk MIB REPS           write MIB MiB to a buffer and read it
 *                                   back, REPS times; GB/s of each
 *   whbench readback ROUNDS         a small kernel launch and a blocking
 *                                   4-byte read of its result, per round
 *
 * With WH_HANDSHAKE=1, callheavy prints "READY" before its timed loop and
 * "HOLD" after it, and each time waits for a line on stdin: the runner reads
 * the server process's CPU time at those points (and while it holds, the
 * idle server's).
 */
#define BENCH_NAME "whbench"
#include "../common/bench.h"
#include <stdint.h>
#include <sys/resource.h>

static cl_device_id dev;
static cl_context ctx;
static cl_command_queue q;

static double cpu_s(int user) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    struct timeval tv = user ? r.ru_utime : r.ru_stime;
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static void handshake(const char *what) {
    const char *h = getenv("WH_HANDSHAKE");
    if (!h || strcmp(h, "1") != 0)
        return;
    printf("%s\n", what);
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) {
        fprintf(stderr, "whbench: runner went away\n");
        exit(3);
    }
}

static void nullcall(long iters, long unused) {
    (void)unused;
    cl_event ev;
    CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &ev));
    CHECK(clFinish(q));
    double *v = times(iters);
    cl_int st = -1;
    for (int i = 0; i < 2000; i++) /* warm-up */
        CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    if (st != CL_COMPLETE) {
        fprintf(stderr, "whbench: marker not complete (%d)\n", st);
        exit(2);
    }
    printf("RESULT {\"bench\":\"nullcall\",");
    /* The timer itself, so native figures can be read net of it. */
    for (long i = 0; i < iters; i++) {
        double t = now_ns();
        v[i] = now_ns() - t;
    }
    summary("timer", v, (size_t)iters, 0);
    for (long i = 0; i < iters; i++) {
        double t = now_ns();
        clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
        v[i] = now_ns() - t;
    }
    summary("event_info", v, (size_t)iters, 0);
    cl_device_type ty;
    for (long i = 0; i < iters; i++) {
        double t = now_ns();
        clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof ty, &ty, NULL);
        v[i] = now_ns() - t;
    }
    summary("device_info", v, (size_t)iters, 1);
    printf("}\n");
    free(v);
    clReleaseEvent(ev);
}

static void callheavy(long launches, long every) {
    cl_program prog;
    cl_mem buf;
    cl_kernel k = add_kernel(ctx, dev, &prog, &buf);
    add_once(q, k, 0);
    handshake("READY");
    double u0 = cpu_s(1), s0 = cpu_s(0), t0 = now_ns();
    long expect = add_launches(q, k, launches, every);
    double wall = (now_ns() - t0) * 1e-9, user = cpu_s(1) - u0, sys = cpu_s(0) - s0;
    check_add(q, buf, expect);
    printf("RESULT {\"bench\":\"callheavy\",\"launches\":%ld,\"finish_every\":%ld,"
           "\"wall_s\":%.6f,\"user_s\":%.6f,\"sys_s\":%.6f}\n",
           launches, every, wall, user, sys);
    fflush(stdout);
    handshake("HOLD");
    add_release(prog, k, buf);
}

static void bulk_mode(long mib, long reps) { bulk(ctx, q, mib, reps); }

/* A launch and a blocking read of its result, ROUNDS times: the read waits
 * for the kernel, so every round is one wait on the device (per-round
 * time, median and mean). */
static void readback(long rounds, long unused) {
    (void)unused;
    cl_program prog;
    cl_mem buf;
    cl_kernel k = add_kernel(ctx, dev, &prog, &buf);
    double *v = times(rounds);
    for (long i = 0; i < rounds; i++) {
        double t0 = now_ns();
        int got = add_and_read(q, k, buf);
        v[i] = now_ns() - t0;
        if (got != (int)(i + 1)) {
            fprintf(stderr, "whbench: wrong result %d, want %ld\n", got, i + 1);
            exit(4);
        }
    }
    printf("RESULT {\"bench\":\"readback\",");
    summary("round", v, (size_t)rounds, 1);
    printf("}\n");
    free(v);
    add_release(prog, k, buf);
}

int main(int argc, char **argv) {
    static const bench_mode modes[] = {
        {"nullcall", nullcall},
        {"callheavy", callheavy},
        {"bulk", bulk_mode},
        {"readback", readback},
    };
    return run_mode(argc, argv, "nullcall ITERS | callheavy LAUNCHES EVERY | bulk MIB REPS | readback ROUNDS",
                    modes, sizeof modes / sizeof *modes, &dev, &ctx, &q);
}
