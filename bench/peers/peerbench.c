/* peerbench: the OpenCL side of bench/peers/, a plain OpenCL program run
 * unmodified natively, through Wormhole and through PoCL-remote. Each mode
 * prints one line "RESULT {json}".
 *
 *   peerbench trips ITERS      the synchronous round trips, each ITERS times
 *                              (median, mean and p99 per call, in ns):
 *     readback      a kernel launch and a blocking 4-byte read of its result
 *     marker_wait   clEnqueueMarkerWithWaitList + clWaitForEvents + release
 *     launch_finish a kernel launch and clFinish
 *     finish_idle   clFinish on a queue with nothing left to run
 *     write4        a blocking 4-byte write
 *     event_status  clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS) on a
 *                   completed event
 *     event_type    clGetEventInfo(CL_EVENT_COMMAND_TYPE) on it
 *     event_refs    clGetEventInfo(CL_EVENT_REFERENCE_COUNT) on it (a value
 *                   that changes: a plain forwarded query)
 *     device_type   clGetDeviceInfo(CL_DEVICE_TYPE)
 *   peerbench callheavy LAUNCHES EVERY   launches, clFinish every EVERY
 *   peerbench bulk MIB REPS              blocking write, then read, GB/s
 *   peerbench build N                    N builds of a source never built
 *                                        before (no compiler cache hit)
 *   peerbench idle SECONDS               a context, a queue and a built
 *                                        kernel, then "READY" and a sleep
 */
#define BENCH_NAME "peerbench"
#include "../common/bench.h"
#include <stdint.h>
#include <unistd.h>

static cl_device_id dev;
static cl_context ctx;
static cl_command_queue q;

/* The round trips. Each is warmed up (WARM calls), then timed call by call. */
enum { WARM = 200 };

/* PEERBENCH_ONLY=NAME times that round trip alone (for tracing one). */
static int want(const char *name) {
    const char *only = getenv("PEERBENCH_ONLY");
    return !only || !*only || strcmp(only, name) == 0;
}

/* Warm-up calls and timed calls of one round trip: one of each unless it
 * is the one PEERBENCH_ONLY names. */
static long warm(const char *name) { return want(name) ? WARM : 0; }
static long count(const char *name, long iters) { return want(name) ? iters : 1; }

static void trips(long iters, long unused) {
    (void)unused;
    cl_program prog;
    cl_mem buf;
    cl_kernel k = add_kernel(ctx, dev, &prog, &buf);
    int one = 1;
    CHECK(clSetKernelArg(k, 1, sizeof one, &one));
    size_t global = ADD_N;
    double *v = malloc(sizeof(double) * (size_t)iters);
    if (!v)
        exit(2);
    int out[1];
    long launched = 0;
    printf("RESULT {\"bench\":\"trips\",");

    for (long i = -warm("readback"), n = count("readback", iters); i < n; i++) {
        double t0 = now_ns();
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL));
        CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
        if (i >= 0)
            v[i] = now_ns() - t0;
        launched++;
        if (out[0] != (int)launched) {
            fprintf(stderr, "peerbench: wrong result %d, want %ld\n", out[0], launched);
            exit(4);
        }
    }
    summary("readback", v, (size_t)count("readback", iters), 0);

    for (long i = -warm("marker_wait"), n = count("marker_wait", iters); i < n; i++) {
        cl_event ev;
        double t0 = now_ns();
        CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &ev));
        CHECK(clWaitForEvents(1, &ev));
        CHECK(clReleaseEvent(ev));
        if (i >= 0)
            v[i] = now_ns() - t0;
    }
    summary("marker_wait", v, (size_t)count("marker_wait", iters), 0);

    for (long i = -warm("launch_finish"), n = count("launch_finish", iters); i < n; i++) {
        double t0 = now_ns();
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL));
        CHECK(clFinish(q));
        if (i >= 0)
            v[i] = now_ns() - t0;
        launched++;
    }
    summary("launch_finish", v, (size_t)count("launch_finish", iters), 0);

    for (long i = -warm("finish_idle"), n = count("finish_idle", iters); i < n; i++) {
        double t0 = now_ns();
        CHECK(clFinish(q));
        if (i >= 0)
            v[i] = now_ns() - t0;
    }
    summary("finish_idle", v, (size_t)count("finish_idle", iters), 0);

    for (long i = -warm("write4"), n = count("write4", iters); i < n; i++) {
        int w = (int)i;
        double t0 = now_ns();
        CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, sizeof w, &w, 0, NULL, NULL));
        if (i >= 0)
            v[i] = now_ns() - t0;
    }
    summary("write4", v, (size_t)count("write4", iters), 0);
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    if (out[0] != (int)(count("write4", iters) - 1)) {
        fprintf(stderr, "peerbench: wrong written value %d, want %ld\n", out[0],
                count("write4", iters) - 1);
        exit(4);
    }

    cl_event ev;
    CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &ev));
    CHECK(clWaitForEvents(1, &ev));
    cl_int st = -1;
    for (long i = -warm("event_status"), n = count("event_status", iters); i < n; i++) {
        double t0 = now_ns();
        CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        if (i >= 0)
            v[i] = now_ns() - t0;
    }
    if (st != CL_COMPLETE) {
        fprintf(stderr, "peerbench: a waited-for marker is not complete (%d)\n", st);
        exit(4);
    }
    summary("event_status", v, (size_t)count("event_status", iters), 0);

    cl_command_type ty = 0;
    for (long i = -warm("event_type"), n = count("event_type", iters); i < n; i++) {
        double t0 = now_ns();
        CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof ty, &ty, NULL));
        if (i >= 0)
            v[i] = now_ns() - t0;
    }
    if (ty != CL_COMMAND_MARKER) {
        fprintf(stderr, "peerbench: a marker's command type is %u\n", ty);
        exit(4);
    }
    summary("event_type", v, (size_t)count("event_type", iters), 0);

    cl_uint refs = 0;
    for (long i = -warm("event_refs"), n = count("event_refs", iters); i < n; i++) {
        double t0 = now_ns();
        CHECK(clGetEventInfo(ev, CL_EVENT_REFERENCE_COUNT, sizeof refs, &refs, NULL));
        if (i >= 0)
            v[i] = now_ns() - t0;
    }
    summary("event_refs", v, (size_t)count("event_refs", iters), 0);
    CHECK(clReleaseEvent(ev));

    cl_device_type dt = 0;
    for (long i = -warm("device_type"), n = count("device_type", iters); i < n; i++) {
        double t0 = now_ns();
        CHECK(clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof dt, &dt, NULL));
        if (i >= 0)
            v[i] = now_ns() - t0;
    }
    summary("device_type", v, (size_t)count("device_type", iters), 1);
    printf("}\n");
    free(v);
    clReleaseMemObject(buf);
    clReleaseKernel(k);
    clReleaseProgram(prog);
}

static void callheavy(long launches, long every) {
    cl_program prog;
    cl_mem buf;
    cl_kernel k = add_kernel(ctx, dev, &prog, &buf);
    add_once(q, k, 0);
    double t0 = now_ns();
    long expect = add_launches(q, k, launches, every);
    double wall = (now_ns() - t0) * 1e-9;
    check_add(q, buf, expect);
    printf("RESULT {\"bench\":\"callheavy\",\"launches\":%ld,\"finish_every\":%ld,\"wall_s\":%.6f}\n",
           launches, every, wall);
    clReleaseMemObject(buf);
    clReleaseKernel(k);
    clReleaseProgram(prog);
}

static void bulk_mode(long mib, long reps) { bulk(ctx, q, mib, reps); }

/* Builds N programs whose sources differ (a constant named after this
 * process, the time and the count), so no compiler cache answers. */
static void build(long n, long unused) {
    (void)unused;
    double *v = malloc(sizeof(double) * (size_t)n);
    if (!v)
        exit(2);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    for (long i = 0; i < n; i++) {
        char src[1024];
        snprintf(src, sizeof src,
                 "#define SALT %ldu /* %ld.%09ld */\n"
                 "__kernel void scale(__global float *a, float s) {\n"
                 "  size_t i = get_global_id(0);\n"
                 "  a[i] = a[i] * s + (float)(SALT %% 3u);\n"
                 "}\n"
                 "__kernel void sum(__global const float *a, __global float *o, int n) {\n"
                 "  float acc = 0.0f;\n"
                 "  for (int j = 0; j < n; j++) acc += a[j];\n"
                 "  o[get_global_id(0)] = acc;\n"
                 "}\n",
                 (long)getpid() * 1000 + i, (long)ts.tv_sec, (long)ts.tv_nsec);
        double t0 = now_ns();
        cl_program p = build_program(ctx, dev, src, "");
        cl_kernel k = new_kernel(p, "scale");
        v[i] = now_ns() - t0;
        clReleaseKernel(k);
        clReleaseProgram(p);
    }
    printf("RESULT {\"bench\":\"build\",");
    summary("build", v, (size_t)n, 1);
    printf("}\n");
    free(v);
}

static void idle(long seconds, long unused) {
    (void)unused;
    cl_program prog;
    cl_mem buf;
    cl_kernel k = add_kernel(ctx, dev, &prog, &buf);
    add_once(q, k, 1);
    printf("READY\n");
    fflush(stdout);
    sleep((unsigned)seconds);
    printf("RESULT {\"bench\":\"idle\",\"seconds\":%ld}\n", seconds);
    clReleaseMemObject(buf);
    clReleaseKernel(k);
    clReleaseProgram(prog);
}

int main(int argc, char **argv) {
    static const bench_mode modes[] = {
        {"trips", trips}, {"callheavy", callheavy}, {"bulk", bulk_mode}, {"build", build}, {"idle", idle},
    };
    return run_mode(argc, argv,
                    "trips ITERS | callheavy LAUNCHES EVERY | bulk MIB REPS | build N | idle SECONDS",
                    modes, sizeof modes / sizeof *modes, &dev, &ctx, &q);
}
