/* A read gated on a user event waits in the queue while the server looks
 * for room for another client (delay storing: it asks whether this tenant
 * has work in flight, with a marker behind the gated read); then the gate
 * is set to an error. The read fails, its event says so, as natively, and
 * the tenant lives on (PoCL 3.1 aborts a process when a command whose event
 * was released fails behind a failed one: the server must hold its
 * markers' events).
 *
 * WH_GATE_MB (default 8): the buffer's size; WH_GATE_SLEEP_MS (default 0):
 * how long the gate stays closed after "~gated" is printed. */
#include <unistd.h>

#include "common.h"

int main(void) {
    env_t t;
    env_init(&t, 0);
    const char *mb_s = getenv("WH_GATE_MB"), *ms_s = getenv("WH_GATE_SLEEP_MS");
    size_t bytes = (size_t)(mb_s && *mb_s ? atol(mb_s) : 8) << 20;
    long ms = ms_s && *ms_s ? atol(ms_s) : 0;
    unsigned char *h = malloc(bytes), *back = calloc(1, 64);
    for (size_t i = 0; i < bytes; i++) h[i] = (unsigned char)(i * 13 + 1);
    cl_mem b = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, h);
    cl_int e;
    cl_event gate = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "user event");
    cl_event rd = NULL;
    CHECK(clEnqueueReadBuffer(t.q, b, CL_FALSE, 0, 64, back, 1, &gate, &rd));
    printf("~gated\n");
    fflush(stdout);
    usleep((useconds_t)ms * 1000);
    CHECK(clSetUserEventStatus(gate, -77));
    cl_int wr = clWaitForEvents(1, &rd);
    cl_int st = 0;
    CHECK(clGetEventInfo(rd, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    printf("read behind a failed gate: wait %d status negative %d\n", wr, st < 0);
    /* The queue goes on, and the buffer is whole. */
    unsigned char *all = malloc(bytes);
    CHECK(clEnqueueReadBuffer(t.q, b, CL_TRUE, 0, bytes, all, 0, NULL, NULL));
    printf("buffer whole: %d\n", memcmp(all, h, bytes) == 0);
    CHECK(clReleaseEvent(rd));
    CHECK(clReleaseEvent(gate));
    CHECK(clReleaseMemObject(b));
    free(h);
    free(back);
    free(all);
    env_done(&t);
    printf("gate_fail: done\n");
    return 0;
}
