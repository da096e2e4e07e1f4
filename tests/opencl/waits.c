/* A thread waits for a long kernel (clFinish, clWaitForEvents, a blocking
 * read, a non-blocking write and then clFinish, a non-blocking read or map
 * and then a wait for it), or builds or compiles a program (and links
 * it: with a callback, and one that fails), while another thread asks the server something: natively it is answered
 * while the kernel runs or the program compiles. Through Wormhole all
 * threads of a process share one channel, so a wait must leave it free
 * meanwhile, the server must not run the write blocking (its data, which
 * the server keeps, must still arrive), and it must build on a thread of
 * its own. */
#include "common.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static const char *src =
    "__kernel void spin(__global uint *out, uint iters) {\n"
    "    uint a = 1;\n"
    "    for (uint i = 0; i < iters; i++) a = a * 1664525u + 1013904223u;\n"
    "    out[0] = a | 1u;\n"
    "}\n";

enum how { FINISH, WAIT_EVENT, BLOCKING_READ, WRITE_THEN_FINISH, READ_THEN_WAIT, MAP_THEN_WAIT };
static const char *names[] = {"finish", "wait for the event", "blocking read",
                              "non-blocking write, then finish",
                              "non-blocking read, then wait for it",
                              "non-blocking map, then wait for it"};

#define WRITTEN 1024

typedef struct {
    env_t *t;
    cl_command_queue q;
    cl_kernel k;
    cl_mem out, side[2];
    enum how how;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    cl_event started; /* the kernel's event, once enqueued */
    cl_int enqueue_status, wait_status;
    cl_uint value;
} waiter_t;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Enqueues the kernel, says so, then waits for it the chosen way. */
static void *waiter(void *arg) {
    waiter_t *w = arg;
    size_t one = 1;
    cl_event ev = NULL;
    w->enqueue_status = clEnqueueNDRangeKernel(w->q, w->k, 1, NULL, &one, NULL, 0, NULL, &ev);
    pthread_mutex_lock(&w->lock);
    w->started = ev;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    if (w->enqueue_status != CL_SUCCESS) return NULL;
    switch (w->how) {
    case FINISH:
        w->wait_status = clFinish(w->q);
        break;
    case WAIT_EVENT:
        w->wait_status = clWaitForEvents(1, &ev);
        break;
    case BLOCKING_READ:
        w->wait_status = clEnqueueReadBuffer(w->q, w->out, CL_TRUE, 0, sizeof w->value, &w->value,
                                             0, NULL, NULL);
        break;
    case WRITE_THEN_FINISH: {
        /* Two writes, to two buffers: each must arrive whole. The host
         * data must stay until they completed: the finish below, in this
         * scope, sees to that. */
        cl_uint data[2][WRITTEN];
        for (int i = 0; i < WRITTEN; i++) {
            data[0][i] = 3u * (cl_uint)i + 7u;
            data[1][i] = 5u * (cl_uint)i + 1u;
        }
        w->wait_status = CL_SUCCESS;
        for (int b = 0; b < 2 && w->wait_status == CL_SUCCESS; b++)
            w->wait_status = clEnqueueWriteBuffer(w->q, w->side[b], CL_FALSE, 0, sizeof data[b],
                                                  data[b], 0, NULL, NULL);
        if (w->wait_status == CL_SUCCESS) w->wait_status = clFinish(w->q);
        break;
    }
    case MAP_THEN_WAIT: {
        cl_event mapped = NULL;
        cl_uint *p = clEnqueueMapBuffer(w->q, w->out, CL_FALSE, CL_MAP_READ, 0, sizeof w->value, 0,
                                        NULL, &mapped, &w->wait_status);
        if (w->wait_status == CL_SUCCESS) {
            w->wait_status = clWaitForEvents(1, &mapped);
            clReleaseEvent(mapped);
            if (w->wait_status == CL_SUCCESS) w->value = *p;
            cl_int u = clEnqueueUnmapMemObject(w->q, w->out, p, 0, NULL, NULL);
            if (w->wait_status == CL_SUCCESS) w->wait_status = u;
            if (w->wait_status == CL_SUCCESS) w->wait_status = clFinish(w->q);
        }
        break;
    }
    case READ_THEN_WAIT: {
        cl_event read = NULL;
        w->wait_status = clEnqueueReadBuffer(w->q, w->out, CL_FALSE, 0, sizeof w->value, &w->value,
                                             0, NULL, &read);
        if (w->wait_status == CL_SUCCESS) {
            w->wait_status = clWaitForEvents(1, &read);
            clReleaseEvent(read);
        }
        break;
    }
    }
    return NULL;
}

/* A program that takes PoCL about a second to build, different in every
 * run (in its code: a cache of compiled programs may key on the source
 * without its comments) so that no such cache has it. */
#define FUNCS 600
static char *long_source(const char *prefix, const char *extra) {
    size_t cap = 256 * 1024, n = 0;
    char *s = malloc(cap);
    ASSERT(s);
    unsigned run = (unsigned)getpid() * 2654435761u ^ (unsigned)(now() * 1e6);
    n += (size_t)snprintf(s + n, cap - n, "%s#define RUN %uu\n", prefix, run);
    for (int f = 0; f < FUNCS && n < cap; f++)
        n += (size_t)snprintf(s + n, cap - n,
                              "static uint f%d(uint a) { for (uint i = 0; i < 7u; i++) "
                              "a = a * %du + (a >> %d) + i; return a ^ %du; }\n",
                              f, 2 * f + 3, f % 13 + 1, (unsigned)f * 7919u);
    if (n < cap) n += (size_t)snprintf(s + n, cap - n, "__kernel void big(__global uint *o) {\n"
                                                          "    uint a = o[get_global_id(0)];\n");
    for (int f = 0; f < FUNCS && n < cap; f++)
        n += (size_t)snprintf(s + n, cap - n, "    a = f%d(a);\n", f);
    if (n < cap) snprintf(s + n, cap - n, "    o[get_global_id(0)] = a ^ RUN ^ %s;\n}\n", extra);
    ASSERT(n < cap);
    return s;
}

enum job { BUILD, COMPILE, LINK };
static const char *jobs[] = {"build", "compile", "link"};

typedef struct {
    cl_context ctx;
    cl_program p;      /* link: the program linked */
    cl_program header; /* compile: the header it includes */
    cl_program linked; /* link: the program it made */
    cl_device_id device;
    enum job job;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int started;
    cl_int status;
    double ended;
    int notify; /* link: with a callback, which counts its calls here */
    int calls;
    int twice; /* link: the program with itself, which fails */
} builder_t;

static void CL_CALLBACK built(cl_program p, void *user_data) {
    (void)p;
    *(int *)user_data += 1;
}

static void *builder(void *arg) {
    builder_t *b = arg;
    pthread_mutex_lock(&b->lock);
    b->started = 1;
    pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->lock);
    const char *names[] = {"h.h"};
    switch (b->job) {
    case BUILD: b->status = clBuildProgram(b->p, 1, &b->device, "", NULL, NULL); break;
    case COMPILE:
        b->status = clCompileProgram(b->p, 1, &b->device, "", 1, &b->header, names, NULL, NULL);
        break;
    case LINK: {
        cl_program in[] = {b->p, b->p};
        b->linked = clLinkProgram(b->ctx, 1, &b->device, "", b->twice ? 2 : 1, in,
                                  b->notify ? built : NULL, b->notify ? &b->calls : NULL,
                                  &b->status);
        break;
    }
    }
    b->ended = now();
    return NULL;
}

/* A program that does not compile, built by a thread of its own as the
 * long one was: its failure, its log and its callback as natively. */
static void *broken_builder(void *arg) {
    builder_t *b = arg;
    b->started = 0;
    b->status = clBuildProgram(b->p, 1, &b->device, "", built, &b->started);
    return NULL;
}

/* Runs b's job on a thread of its own; meanwhile the main thread asks a
 * marker's status, which needs the server. */
static void beside(builder_t *b, cl_event marker) {
    const char *what = jobs[b->job];
    b->started = 0;
    b->status = 1;
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, builder, b) == 0);
    pthread_mutex_lock(&b->lock);
    while (!b->started) pthread_cond_wait(&b->cond, &b->lock);
    pthread_mutex_unlock(&b->lock);
    /* Let the builder reach the compiler. */
    usleep(50 * 1000);
    cl_int st = 1;
    CHECK(clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    double answered = now();
    ASSERT(pthread_join(th, NULL) == 0);
    /* PoCL links in about 20 ms, within the pause above: what the test
     * shows of a link is that it works when another thread calls. */
    if (b->job != LINK)
        printf("%s: another thread answered while the program compiled: %d\n", what,
               answered < b->ended);
    printf("%s: status %d, marker status %d\n", what, b->status, st);
}

/* One thread builds a long program, or compiles it (with a header, when
 * `compile`) and then links it. */
static void build_beside(env_t *t, cl_command_queue q, int compile) {
    cl_int e;
    const char *what = compile ? "link" : "build";
    const char *hdr[] = {"#define HDR_VALUE 5u\n"};
    cl_program header = NULL;
    if (compile) {
        header = clCreateProgramWithSource(t->ctx, 1, hdr, NULL, &e);
        CHECK_ERR(e, "header");
    }
    char *src = compile ? long_source("#include \"h.h\"\n", "HDR_VALUE") : long_source("", "0u");
    const char *srcs[] = {src};
    builder_t b = {t->ctx, clCreateProgramWithSource(t->ctx, 1, srcs, NULL, &e), header, NULL,
                   t->device, compile ? COMPILE : BUILD, PTHREAD_MUTEX_INITIALIZER,
                   PTHREAD_COND_INITIALIZER, 0, 1, 0};
    CHECK_ERR(e, "program");
    cl_event marker;
    CHECK(clEnqueueMarkerWithWaitList(q, 0, NULL, &marker));
    CHECK(clFinish(q));
    beside(&b, marker);
    cl_program built_p = b.p;
    if (compile) {
        b.job = LINK;
        beside(&b, marker);
        built_p = b.linked;
        ASSERT(built_p);
    }
    /* The program built is whole: its kernel runs. */
    cl_kernel k = kernel(built_p, "big");
    cl_mem o = buffer(t, CL_MEM_READ_WRITE, sizeof(cl_uint), NULL);
    cl_uint v = 1;
    size_t one = 1;
    CHECK(clEnqueueWriteBuffer(q, o, CL_TRUE, 0, sizeof v, &v, 0, NULL, NULL));
    CHECK(clSetKernelArg(k, 0, sizeof o, &o));
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &one, NULL, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(q, o, CL_TRUE, 0, sizeof v, &v, 0, NULL, NULL));
    printf("%s: its kernel ran: %d\n", what, v != 1);
    CHECK(clReleaseMemObject(o));
    CHECK(clReleaseKernel(k));
    if (compile) {
        /* Linked again with a callback, by a thread of its own: the
         * callback runs once, with the program made. */
        b.notify = 1;
        beside(&b, marker);
        printf("link: with a callback: a program: %d, callbacks run: %d\n", b.linked != NULL,
               b.calls);
        if (b.linked) CHECK(clReleaseProgram(b.linked));
        /* A link that fails (each kernel defined twice): its status, and no
         * program. */
        b.notify = 0;
        b.twice = 1;
        beside(&b, marker);
        printf("link: twice: a program: %d\n", b.linked != NULL);
        CHECK(clReleaseProgram(built_p));
        CHECK(clReleaseProgram(header));
    }
    CHECK(clReleaseEvent(marker));
    CHECK(clReleaseProgram(b.p));
    free(src);
    if (compile) return;

    const char *broken[] = {"__kernel void k(__global uint *o) { o[0] = undeclared; }\n"};
    pthread_t th;
    b.p = clCreateProgramWithSource(t->ctx, 1, broken, NULL, &e);
    CHECK_ERR(e, "broken program");
    ASSERT(pthread_create(&th, NULL, broken_builder, &b) == 0);
    ASSERT(pthread_join(th, NULL) == 0);
    char log[4096] = "";
    CHECK(clGetProgramBuildInfo(b.p, t->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL));
    printf("build: a broken program: %d, its log names the error: %d, callbacks run: %d\n",
           b.status, strstr(log, "undeclared") != NULL, b.started);
    CHECK(clReleaseProgram(b.p));
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    cl_int e;
    cl_program p = build(&t, src, "");
    cl_kernel k = kernel(p, "spin");
    cl_mem out = buffer(&t, CL_MEM_READ_WRITE, sizeof(cl_uint), NULL);
    cl_mem side[2] = {buffer(&t, CL_MEM_READ_WRITE, WRITTEN * sizeof(cl_uint), NULL),
                      buffer(&t, CL_MEM_READ_WRITE, WRITTEN * sizeof(cl_uint), NULL)};
    cl_command_queue q = clCreateCommandQueue(t.ctx, t.device, 0, &e);
    CHECK_ERR(e, "queue");
    CHECK(clSetKernelArg(k, 0, sizeof out, &out));

    /* Size the kernel to about 1.5 s on this machine (the quickest of three
     * short runs, so that a busy moment does not make it too short). */
    cl_uint iters = 1u << 22;
    size_t one = 1;
    double best = 1e9;
    CHECK(clSetKernelArg(k, 1, sizeof iters, &iters));
    for (int i = 0; i < 3; i++) {
        double t0 = now();
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &one, NULL, 0, NULL, NULL));
        CHECK(clFinish(q));
        double d = now() - t0;
        if (d < best) best = d;
    }
    double want = (double)iters * 1.5 / (best > 1e-6 ? best : 1e-6);
    iters = want > 4e9 ? 4000000000u : want < (double)(1u << 22) ? 1u << 22 : (cl_uint)want;
    CHECK(clSetKernelArg(k, 1, sizeof iters, &iters));

    for (int how = FINISH; how <= MAP_THEN_WAIT; how++) {
        cl_uint zero = 0;
        CHECK(clEnqueueWriteBuffer(q, out, CL_TRUE, 0, sizeof zero, &zero, 0, NULL, NULL));
        waiter_t w = {&t, q, k, out, {side[0], side[1]}, how, PTHREAD_MUTEX_INITIALIZER,
                      PTHREAD_COND_INITIALIZER, NULL, 1, 1, 0};
        pthread_t th;
        ASSERT(pthread_create(&th, NULL, waiter, &w) == 0);
        pthread_mutex_lock(&w.lock);
        while (!w.started && w.enqueue_status == 1) pthread_cond_wait(&w.cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
        ASSERT(w.started);
        /* Let the waiter reach its wait. If it has not, the answer below
         * comes before the wait either way. */
        usleep(100 * 1000);
        cl_int st = CL_COMPLETE;
        CHECK(clGetEventInfo(w.started, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        printf("%s: another thread answered while the kernel ran: %d\n", names[how],
               st > CL_COMPLETE);
        ASSERT(pthread_join(th, NULL) == 0);
        CHECK(clGetEventInfo(w.started, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        printf("%s: wait %d, kernel complete after it: %d\n", names[how], w.wait_status,
               st == CL_COMPLETE);
        if (how == BLOCKING_READ || how == READ_THEN_WAIT || how == MAP_THEN_WAIT)
            printf("%s: the kernel's result read: %d\n", names[how], w.value != 0);
        if (how == WRITE_THEN_FINISH) {
            cl_uint got[2][WRITTEN];
            int same = 1;
            for (int b = 0; b < 2; b++)
                CHECK(clEnqueueReadBuffer(q, side[b], CL_TRUE, 0, sizeof got[b], got[b], 0, NULL,
                                          NULL));
            for (int i = 0; i < WRITTEN; i++)
                same &= got[0][i] == 3u * (cl_uint)i + 7u && got[1][i] == 5u * (cl_uint)i + 1u;
            printf("%s: the data written arrived: %d\n", names[how], same);
        }
        CHECK(clReleaseEvent(w.started));
    }
    build_beside(&t, q, 0);
    build_beside(&t, q, 1);
    CHECK(clReleaseCommandQueue(q));
    CHECK(clReleaseMemObject(out));
    CHECK(clReleaseMemObject(side[0]));
    CHECK(clReleaseMemObject(side[1]));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    env_done(&t);
    printf("waits: done\n");
    return 0;
}
