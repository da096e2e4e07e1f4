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

/* What the round trips work on: the add kernel and its buffer, a
 * completed marker, the launches so far and the last answers to check. */
static cl_kernel trip_k;
static cl_mem trip_buf;
static cl_event marker;
static long launched;
static cl_int status;
static cl_command_type type;

static void readback(long i) {
    (void)i;
    int got = add_and_read(q, trip_k, trip_buf);
    if (got != (int)++launched) {
        fprintf(stderr, "peerbench: wrong result %d, want %ld\n", got, launched);
        exit(4);
    }
}

static void marker_wait(long i) {
    (void)i;
    cl_event ev;
    CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &ev));
    CHECK(clWaitForEvents(1, &ev));
    CHECK(clReleaseEvent(ev));
}

static void launch_finish(long i) {
    (void)i;
    size_t global = ADD_N;
    CHECK(clEnqueueNDRangeKernel(q, trip_k, 1, NULL, &global, NULL, 0, NULL, NULL));
    CHECK(clFinish(q));
    launched++;
}

static void finish_idle(long i) {
    (void)i;
    CHECK(clFinish(q));
}

static void write4(long i) {
    int w = (int)i;
    CHECK(clEnqueueWriteBuffer(q, trip_buf, CL_TRUE, 0, sizeof w, &w, 0, NULL, NULL));
}

static void event_status(long i) {
    (void)i;
    CHECK(clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL));
}

static void event_type(long i) {
    (void)i;
    CHECK(clGetEventInfo(marker, CL_EVENT_COMMAND_TYPE, sizeof type, &type, NULL));
}

static void event_refs(long i) {
    (void)i;
    cl_uint refs;
    CHECK(clGetEventInfo(marker, CL_EVENT_REFERENCE_COUNT, sizeof refs, &refs, NULL));
}

static void device_type(long i) {
    (void)i;
    cl_device_type dt;
    CHECK(clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof dt, &dt, NULL));
}

/* A round trip: its name in the results and what one call does, given the
 * call's index (negative while warming up). */
typedef struct {
    const char *name;
    void (*call)(long i);
} trip;

/* Those that send commands, in the order they run. */
static const trip command_trips[] = {
    {"readback", readback},       {"marker_wait", marker_wait}, {"launch_finish", launch_finish},
    {"finish_idle", finish_idle}, {"write4", write4},
};

/* Queries of a completed marker and of the device, once the commands are
 * done. */
static const trip query_trips[] = {
    {"event_status", event_status},
    {"event_type", event_type},
    {"event_refs", event_refs},
    {"device_type", device_type},
};

/* Warms up and times each of `n` trips in turn into `v`, printing their
 * summaries; `last` when they end the result. */
static void time_trips(const trip *trips, size_t n, long iters, double *v, int last) {
    for (size_t t = 0; t < n; t++) {
        const char *name = trips[t].name;
        for (long i = -warm(name), end = count(name, iters); i < end; i++) {
            double t0 = now_ns();
            trips[t].call(i);
            if (i >= 0)
                v[i] = now_ns() - t0;
        }
        summary(name, v, (size_t)count(name, iters), last && t == n - 1);
    }
}

static void trips(long iters, long unused) {
    (void)unused;
    cl_program prog;
    trip_k = add_kernel(ctx, dev, &prog, &trip_buf);
    double *v = times(iters);
    printf("RESULT {\"bench\":\"trips\",");
    time_trips(command_trips, sizeof command_trips / sizeof *command_trips, iters, v, 0);
    int out;
    CHECK(clEnqueueReadBuffer(q, trip_buf, CL_TRUE, 0, sizeof out, &out, 0, NULL, NULL));
    if (out != (int)(count("write4", iters) - 1)) {
        fprintf(stderr, "peerbench: wrong written value %d, want %ld\n", out,
                count("write4", iters) - 1);
        exit(4);
    }
    CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &marker));
    CHECK(clWaitForEvents(1, &marker));
    time_trips(query_trips, sizeof query_trips / sizeof *query_trips, iters, v, 1);
    printf("}\n");
    if (status != CL_COMPLETE || type != CL_COMMAND_MARKER) {
        fprintf(stderr, "peerbench: a waited-for marker has status %d, type %u\n", status, type);
        exit(4);
    }
    free(v);
    CHECK(clReleaseEvent(marker));
    add_release(prog, trip_k, trip_buf);
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
    add_release(prog, k, buf);
}

static void bulk_mode(long mib, long reps) { bulk(ctx, q, mib, reps); }

/* Builds N programs whose sources differ (a constant named after this
 * process, the time and the count), so no compiler cache answers. */
static void build(long n, long unused) {
    (void)unused;
    double *v = times(n);
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
    add_release(prog, k, buf);
}

int main(int argc, char **argv) {
    static const bench_mode modes[] = {
        {"trips", trips}, {"callheavy", callheavy}, {"bulk", bulk_mode}, {"build", build}, {"idle", idle},
    };
    return run_mode(argc, argv,
                    "trips ITERS | callheavy LAUNCHES EVERY | bulk MIB REPS | build N | idle SECONDS",
                    modes, sizeof modes / sizeof *modes, &dev, &ctx, &q);
}
