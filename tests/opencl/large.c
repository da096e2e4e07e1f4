/* Large transfers (which Wormhole streams outside its frames) and many
 * batched calls, from two threads at once. */
#include "common.h"
#include <pthread.h>

static const char *src = "__kernel void xform(__global uint *a, uint k) {\n"
                         "  size_t i = get_global_id(0); a[i] = a[i] * 3u + k;\n"
                         "}\n";

enum { N = 24 << 20 }; /* bytes */

static void large(env_t *t, cl_kernel k) {
    unsigned *h = malloc(N), *o = malloc(N);
    for (size_t i = 0; i < N / 4; i++) h[i] = (unsigned)(i * 2654435761u);
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, N, NULL);
    CHECK(clEnqueueWriteBuffer(t->q, b, CL_TRUE, 0, N, h, 0, NULL, NULL));
    /* A non-blocking write at an odd offset, then a read spanning it. */
    CHECK(clEnqueueWriteBuffer(t->q, b, CL_FALSE, 4096 + 12, N / 2, h, 0, NULL, NULL));
    memset(o, 0, N);
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, N, o, 0, NULL, NULL));
    ASSERT(o[0] == h[0] && o[(4096 + 12) / 4] == h[0] && o[(4096 + 12) / 4 + 1000] == h[1000]);
    ASSERT(o[N / 4 - 1] == h[N / 4 - 1]);
    printf("large write/read: hash %08x\n", fnv(o, N));
    /* A kernel over all of it, many times (batched), then one read. */
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t g = N / 4;
    for (unsigned r = 0; r < 50; r++) {
        CHECK(clSetKernelArg(k, 1, sizeof r, &r));
        CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    }
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, N, o, 0, NULL, NULL));
    printf("large kernels: hash %08x\n", fnv(o, N));
    /* A large map, written through, read back after unmap. */
    cl_int e;
    unsigned *m = clEnqueueMapBuffer(t->q, b, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 64, N - 128, 0, NULL, NULL, &e);
    CHECK_ERR(e, "large map");
    ASSERT(m[0] == o[16] && m[(N - 128) / 4 - 1] == o[(N - 64) / 4 - 1]);
    for (size_t i = 0; i < (N - 128) / 4; i += 1024) m[i] = (unsigned)i;
    CHECK(clEnqueueUnmapMemObject(t->q, b, m, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, N, o, 0, NULL, NULL));
    ASSERT(o[16] == 0 && o[16 + 1024] == 1024);
    printf("large map: hash %08x\n", fnv(o, N));
    /* A large rect: every other 1 KiB row of a 2048-byte-pitch layout. */
    size_t bo[3] = {0, 0, 0}, ho[3] = {0, 0, 0}, reg[3] = {1024, N / 2048, 1};
    memset(o, 0xab, N);
    CHECK(clEnqueueReadBufferRect(t->q, b, CL_TRUE, bo, ho, reg, 2048, 0, 2048, 0, o, 0, NULL, NULL));
    unsigned char *ob = (unsigned char *)o;
    ASSERT(ob[1024] == 0xab && ob[2047] == 0xab && ob[N - 1] == 0xab);
    printf("large rect: hash %08x\n", fnv(o, N));
    CHECK(clReleaseMemObject(b));
    free(h);
    free(o);
}

/* Large transfers through sub-buffers, with wait lists and events, and
 * buffers made and released in turn (Wormhole may keep CPU devices' buffers
 * in memory shared with the client, and reuse it). */
static void sub_and_reuse(env_t *t) {
    enum { S = 4 << 20 };
    unsigned char *h = malloc(S), *o = malloc(S);
    for (size_t i = 0; i < S; i++) h[i] = (unsigned char)(i * 7 + 1);
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 2 * S, NULL);
    cl_buffer_region r = {S, S};
    cl_int e;
    cl_mem sub = clCreateSubBuffer(b, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
    CHECK_ERR(e, "large sub-buffer");
    cl_mem_flags fb = 0, fs = 0;
    CHECK(clGetMemObjectInfo(b, CL_MEM_FLAGS, sizeof fb, &fb, NULL));
    CHECK(clGetMemObjectInfo(sub, CL_MEM_FLAGS, sizeof fs, &fs, NULL));
    printf("sub flags: buffer %lx sub %lx\n", (unsigned long)fb, (unsigned long)fs);
    cl_event user = clCreateUserEvent(t->ctx, &e);
    CHECK_ERR(e, "user event");
    CHECK(clSetUserEventStatus(user, CL_COMPLETE));
    cl_event wev = NULL;
    CHECK(clEnqueueWriteBuffer(t->q, b, CL_FALSE, S, S, h, 1, &user, &wev));
    CHECK(clWaitForEvents(1, &wev));
    cl_int st = 0;
    CHECK(clGetEventInfo(wev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    printf("write event complete %d\n", st == CL_COMPLETE);
    memset(o, 0, S);
    CHECK(clEnqueueReadBuffer(t->q, sub, CL_TRUE, 0, S, o, 1, &wev, NULL));
    printf("sub read back %d\n", memcmp(h, o, S) == 0);
    CHECK(clReleaseEvent(wev));
    CHECK(clReleaseEvent(user));
    CHECK(clReleaseMemObject(sub));
    CHECK(clReleaseMemObject(b));
    /* Made and released in turn: each new buffer starts as its own. */
    int fresh = 1;
    for (int i = 0; i < 8; i++) {
        cl_mem c = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, S, h);
        memset(o, 0, S);
        CHECK(clEnqueueReadBuffer(t->q, c, CL_TRUE, 0, S, o, 0, NULL, NULL));
        fresh &= memcmp(h, o, S) == 0;
        h[i] ^= 0xff;
        CHECK(clEnqueueWriteBuffer(t->q, c, CL_TRUE, 0, S, h, 0, NULL, NULL));
        CHECK(clReleaseMemObject(c));
    }
    printf("reuse: each buffer its own %d\n", fresh);
    free(h);
    free(o);
}

typedef struct {
    env_t *t;
    cl_program p;
    int id;
    unsigned result;
    int ok;
} worker_t;

static void *worker(void *arg) {
    worker_t *w = arg;
    cl_int e;
    cl_command_queue q = clCreateCommandQueue(w->t->ctx, w->t->device, 0, &e);
    if (e != CL_SUCCESS) return NULL;
    cl_kernel k = clCreateKernel(w->p, "xform", &e);
    if (e != CL_SUCCESS) return NULL;
    enum { M = 1 << 20 };
    unsigned *h = malloc(M * 4);
    for (unsigned i = 0; i < M; i++) h[i] = i + (unsigned)w->id;
    cl_mem b = clCreateBuffer(w->t->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, M * 4, h, &e);
    if (e != CL_SUCCESS) return NULL;
    int ok = 1;
    for (unsigned r = 0; r < 20 && ok; r++) {
        ok &= clSetKernelArg(k, 0, sizeof b, &b) == CL_SUCCESS;
        ok &= clSetKernelArg(k, 1, sizeof r, &r) == CL_SUCCESS;
        size_t g = M;
        ok &= clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL) == CL_SUCCESS;
        if (r % 5 == 4) ok &= clEnqueueReadBuffer(q, b, CL_TRUE, 0, M * 4, h, 0, NULL, NULL) == CL_SUCCESS;
    }
    ok &= clFinish(q) == CL_SUCCESS;
    w->result = fnv(h, M * 4);
    w->ok = ok;
    clReleaseMemObject(b);
    clReleaseKernel(k);
    clReleaseCommandQueue(q);
    free(h);
    return NULL;
}

static void threads(env_t *t, cl_program p) {
    worker_t w[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (worker_t){t, p, i, 0, 0};
        ASSERT(pthread_create(&th[i], NULL, worker, &w[i]) == 0);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) {
        ASSERT(w[i].ok);
        printf("thread %d: hash %08x\n", i, w[i].result);
    }
}

/* One thread waits on a user event that another thread sets: natively the
 * wait returns once the status is set. Wormhole's calls from all threads of
 * a process share one channel, so the wait must not hold it meanwhile. */
typedef struct {
    env_t *t;
    cl_event gate;
    cl_kernel k;
    cl_mem b;
    cl_int wait_status, finish_status, read_status;
    unsigned first;
} gated_t;

static void *gated_waiter(void *arg) {
    gated_t *g = arg;
    size_t n = 1024;
    cl_event done = NULL;
    g->finish_status = clEnqueueNDRangeKernel(g->t->q, g->k, 1, NULL, &n, NULL, 1, &g->gate, &done);
    g->wait_status = clWaitForEvents(1, &g->gate);
    if (g->finish_status == CL_SUCCESS) g->finish_status = clFinish(g->t->q);
    g->read_status = clEnqueueReadBuffer(g->t->q, g->b, CL_TRUE, 0, sizeof g->first, &g->first, 1, &done, NULL);
    if (done) clReleaseEvent(done);
    return NULL;
}

static void cross_thread_user_event(env_t *t, cl_kernel k) {
    cl_int e;
    unsigned zero[1024] = {0};
    cl_mem b = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, zero);
    unsigned add = 5;
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    CHECK(clSetKernelArg(k, 1, sizeof add, &add));
    gated_t g = {t, clCreateUserEvent(t->ctx, &e), k, b, 1, 1, 1, 0};
    CHECK_ERR(e, "cross-thread user event");
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, gated_waiter, &g) == 0);
    /* Let the waiter reach its wait; the result is the same if it has not. */
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    cl_int st = 0;
    CHECK(clGetEventInfo(g.gate, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    printf("cross-thread gate still submitted before set: %d\n", st == CL_SUBMITTED);
    CHECK(clSetUserEventStatus(g.gate, CL_COMPLETE));
    ASSERT(pthread_join(th, NULL) == 0);
    printf("cross-thread wait %d, kernel+finish %d, gated read %d, value %u\n", g.wait_status,
           g.finish_status, g.read_status, g.first);
    CHECK(clReleaseEvent(g.gate));
    CHECK(clReleaseMemObject(b));
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    cl_program p = build(&t, src, NULL);
    cl_kernel k = kernel(p, "xform");
    large(&t, k);
    sub_and_reuse(&t);
    threads(&t, p);
    cross_thread_user_event(&t, k);
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    env_done(&t);
    printf("large: done\n");
    return 0;
}
