/* threads: OpenCL from several threads of one process, the case where
 * Wormhole's one channel per process can hold one thread's calls behind
 * another's wait. A plain OpenCL program, run natively and through
 * wormhole-run by threads.sh; prints one line "RESULT {json}".
 *
 *   threads loops T LAUNCHES EVERY ITERS   T threads, each with its own queue
 *       and kernel: LAUNCHES launches of 64 work-items looping ITERS times,
 *       clFinish every EVERY launches; the wall time of all of them
 *   threads latency KERNEL_MS CALLS        one thread runs kernels of about
 *       KERNEL_MS ms, each followed by clFinish, while another makes CALLS
 *       calls that need the server (an event's status), 1 ms apart; their
 *       mean and longest time
 *   threads builds FUNCS CALLS             the same, while one thread builds
 *       programs of FUNCS functions one after another (each different, so
 *       that no cache of compiled programs has it)
 */
#define BENCH_NAME "threads"
#include "../common/bench.h"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static cl_context ctx;
static cl_device_id dev;
static cl_program prog;
static int launches, every;
static cl_uint iters;

static const char *src =
    "__kernel void work(__global uint *o, uint n) {\n"
    "    uint a = get_global_id(0);\n"
    "    for (uint i = 0; i < n; i++) a = a * 1664525u + 1013904223u;\n"
    "    o[get_global_id(0)] = a;\n"
    "}\n";

static double now(void) { return now_ns() * 1e-9; }

static void setup(void) {
    open_device(&dev, &ctx, NULL);
    prog = build_program(ctx, dev, src, NULL);
}

typedef struct {
    cl_command_queue q;
    cl_kernel k;
    cl_mem b;
} lane_t;

static lane_t lane(void) {
    cl_int e;
    lane_t l;
    l.q = clCreateCommandQueue(ctx, dev, 0, &e);
    CHECK(e);
    l.k = new_kernel(prog, "work");
    l.b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(cl_uint), NULL, &e);
    CHECK(e);
    CHECK(clSetKernelArg(l.k, 0, sizeof l.b, &l.b));
    return l;
}

static void drop(lane_t *l) {
    CHECK(clReleaseMemObject(l->b));
    CHECK(clReleaseKernel(l->k));
    CHECK(clReleaseCommandQueue(l->q));
}

static void launch(lane_t *l, cl_uint n) {
    size_t g = 64;
    CHECK(clSetKernelArg(l->k, 1, sizeof n, &n));
    CHECK(clEnqueueNDRangeKernel(l->q, l->k, 1, NULL, &g, NULL, 0, NULL, NULL));
}

static void *loop(void *arg) {
    (void)arg;
    lane_t l = lane();
    for (int i = 0; i < launches; i++) {
        launch(&l, iters);
        if ((i + 1) % every == 0) CHECK(clFinish(l.q));
    }
    CHECK(clFinish(l.q));
    drop(&l);
    return NULL;
}

static int loops(int threads) {
    if (threads < 1 || threads > 64 || launches < 1 || every < 1) return 1;
    pthread_t th[64];
    double t0 = now();
    for (int i = 0; i < threads; i++)
        if (pthread_create(&th[i], NULL, loop, NULL) != 0) return 2;
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    printf("RESULT {\"wall_s\": %.6f}\n", now() - t0);
    return 0;
}

static atomic_int stop;

/* Kernels of the given length and a clFinish after each, until told. */
static void *long_waits(void *arg) {
    lane_t *l = arg;
    while (!atomic_load(&stop)) {
        launch(l, iters);
        CHECK(clFinish(l->q));
    }
    return NULL;
}

/* CALLS calls that need the server (a completed event's status), 1 ms
 * apart, while `other` runs in a thread of its own until told to stop;
 * prints their mean and longest time. */
static int beside(void *(*other)(void *), void *arg, lane_t *l, int calls) {
    cl_event done;
    cl_int e;
    size_t g = 1;
    CHECK(clSetKernelArg(l->k, 1, sizeof(cl_uint), &(cl_uint){1}));
    CHECK(clEnqueueNDRangeKernel(l->q, l->k, 1, NULL, &g, NULL, 0, NULL, &done));
    CHECK(clWaitForEvents(1, &done));
    pthread_t th;
    if (pthread_create(&th, NULL, other, arg) != 0) return 2;
    double sum = 0, worst = 0;
    for (int i = 0; i < calls; i++) {
        usleep(1000);
        cl_int st;
        double t0 = now();
        e = clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
        double d = now() - t0;
        CHECK(e);
        sum += d;
        if (d > worst) worst = d;
    }
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    CHECK(clReleaseEvent(done));
    printf("RESULT {\"mean_us\": %.1f, \"max_us\": %.1f}\n", sum / calls * 1e6, worst * 1e6);
    return 0;
}

/* Programs of `*arg` functions, built one after another until told. */
static void *build_loop(void *arg) {
    int funcs = *(int *)arg;
    size_t cap = (size_t)funcs * 200 + 4096;
    char *s = malloc(cap);
    if (!s) exit(2);
    for (unsigned run = (unsigned)getpid() * 2654435761u; !atomic_load(&stop); run++) {
        size_t n = (size_t)snprintf(s, cap, "#define RUN %uu\n", run);
        for (int f = 0; f < funcs && n < cap; f++)
            n += (size_t)snprintf(s + n, cap - n,
                                  "static uint f%d(uint a) { for (uint i = 0; i < 7u; i++) "
                                  "a = a * %du + (a >> %d) + i; return a ^ %du; }\n",
                                  f, 2 * f + 3, f % 13 + 1, (unsigned)f * 7919u);
        if (n < cap)
            n += (size_t)snprintf(s + n, cap - n, "__kernel void big(__global uint *o) {\n"
                                                  "    uint a = o[0];\n");
        for (int f = 0; f < funcs && n < cap; f++)
            n += (size_t)snprintf(s + n, cap - n, "    a = f%d(a);\n", f);
        if (n < cap) n += (size_t)snprintf(s + n, cap - n, "    o[0] = a ^ RUN;\n}\n");
        if (n >= cap) exit(2);
        CHECK(clReleaseProgram(build_program(ctx, dev, s, NULL)));
    }
    free(s);
    return NULL;
}

static int builds(int funcs, int calls) {
    if (funcs < 1 || funcs > 100000 || calls < 1) return 1;
    lane_t l = lane();
    int r = beside(build_loop, &funcs, &l, calls);
    drop(&l);
    return r;
}

static int latency(double kernel_ms, int calls) {
    if (kernel_ms <= 0 || calls < 1) return 1;
    lane_t l = lane();
    /* Size the kernel: the quickest of three short runs. */
    iters = 1u << 18;
    double best = 1e9;
    for (int i = 0; i < 3; i++) {
        double t0 = now();
        launch(&l, iters);
        CHECK(clFinish(l.q));
        if (now() - t0 < best) best = now() - t0;
    }
    double want = (double)iters * kernel_ms * 1e-3 / (best > 1e-7 ? best : 1e-7);
    iters = want > 4e9 ? 4000000000u : want < 1 ? 1 : (cl_uint)want;
    int r = beside(long_waits, &l, &l, calls);
    drop(&l);
    return r;
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "loops") == 0) {
        launches = atoi(argv[3]);
        every = atoi(argv[4]);
        iters = (cl_uint)strtoul(argv[5], NULL, 10);
        setup();
        return loops(atoi(argv[2]));
    }
    if (argc == 4 && strcmp(argv[1], "latency") == 0) {
        setup();
        return latency(atof(argv[2]), atoi(argv[3]));
    }
    if (argc == 4 && strcmp(argv[1], "builds") == 0) {
        setup();
        return builds(atoi(argv[2]), atoi(argv[3]));
    }
    fprintf(stderr, "usage: threads loops T LAUNCHES EVERY ITERS | threads latency KERNEL_MS "
                    "CALLS | threads builds FUNCS CALLS\n");
    return 1;
}
