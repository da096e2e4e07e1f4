/* Events: info, wait lists, markers and barriers, clWaitForEvents,
 * profiling, user events gating work, event callbacks, memory object
 * destructor callbacks. */
#define _GNU_SOURCE
#include "common.h"
#include <sched.h>

static const char *src =
    "__kernel void inc(__global int *a) { a[get_global_id(0)] += 1; }\n"
    "__kernel void twice(__global int *a) { a[get_global_id(0)] *= 2; }\n"
    "__kernel void spin(__global uint *a, uint n) {\n"
    "  uint x = a[0];\n"
    "  for (uint i = 0; i < n; i++) x = x * 1103515245u + 12345u + (x >> 7);\n"
    "  a[1] = x;\n"
    "}\n";

static void event_info(env_t *t, cl_event ev, cl_command_queue q, const char *label) {
    cl_int st;
    cl_command_type ct;
    cl_command_queue eq;
    cl_context ec;
    cl_uint rc;
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof ct, &ct, NULL));
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof eq, &eq, NULL));
    CHECK(clGetEventInfo(ev, CL_EVENT_CONTEXT, sizeof ec, &ec, NULL));
    CHECK(clGetEventInfo(ev, CL_EVENT_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    printf("%s: status %d type %x queue %s context %d\n", label, st, ct,
           eq == q ? "same" : (eq == NULL ? "null" : "other"), ec == t->ctx);
    printf("~%s: refcount %u\n", label, rc);
}

static void basics(env_t *t, cl_kernel inc, cl_kernel twice) {
    int data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cl_mem b = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof data, data);
    size_t g = 8;
    cl_event e1, e2, e3, m, bar, rd;
    CHECK(clSetKernelArg(inc, 0, sizeof b, &b));
    CHECK(clSetKernelArg(twice, 0, sizeof b, &b));
    CHECK(clEnqueueNDRangeKernel(t->q, inc, 1, NULL, &g, NULL, 0, NULL, &e1));
    CHECK(clEnqueueNDRangeKernel(t->q, twice, 1, NULL, &g, NULL, 1, &e1, &e2));
    CHECK(clEnqueueMarkerWithWaitList(t->q, 1, &e2, &m));
    CHECK(clEnqueueBarrierWithWaitList(t->q, 1, &m, &bar));
    CHECK(clEnqueueNDRangeKernel(t->q, inc, 1, NULL, &g, NULL, 1, &bar, &e3));
    int out[8];
    CHECK(clEnqueueReadBuffer(t->q, b, CL_FALSE, 0, sizeof out, out, 1, &e3, &rd));
    cl_event all[2] = {e3, rd};
    CHECK(clWaitForEvents(2, all));
    for (int i = 0; i < 8; i++) ASSERT(out[i] == (data[i] + 1) * 2 + 1);
    printf("chain: ok\n");
    event_info(t, e1, t->q, "ndrange");
    event_info(t, m, t->q, "marker");
    event_info(t, bar, t->q, "barrier");
    event_info(t, rd, t->q, "read");
    /* The old-style marker and barrier (PoCL does not implement
     * clEnqueueWaitForEvents: it exits the process). */
    cl_event om;
    CHECK(clEnqueueMarker(t->q, &om));
    CHECK(clEnqueueBarrier(t->q));
    CHECK(clFinish(t->q));
    event_info(t, om, t->q, "old marker");
    /* Retain/release keep the handle valid. */
    CHECK(clRetainEvent(e1));
    CHECK(clReleaseEvent(e1));
    cl_event evs[] = {e1, e2, e3, m, bar, rd, om};
    for (int i = 0; i < 7; i++) CHECK(clReleaseEvent(evs[i]));
    CHECK(clReleaseMemObject(b));
}

static void profiling(env_t *t, cl_kernel inc) {
    cl_int e;
    cl_command_queue pq = clCreateCommandQueue(t->ctx, t->device, CL_QUEUE_PROFILING_ENABLE, &e);
    CHECK_ERR(e, "profiling queue");
    cl_command_queue_properties props;
    CHECK(clGetCommandQueueInfo(pq, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL));
    printf("queue properties: %lx\n", (unsigned long)props);
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 1024 * sizeof(int), NULL);
    int zero = 0;
    CHECK(clEnqueueFillBuffer(pq, b, &zero, sizeof zero, 0, 1024 * sizeof(int), 0, NULL, NULL));
    CHECK(clSetKernelArg(inc, 0, sizeof b, &b));
    size_t g = 1024;
    cl_event ev, wev;
    CHECK(clEnqueueNDRangeKernel(pq, inc, 1, NULL, &g, NULL, 0, NULL, &ev));
    int host[1024];
    CHECK(clEnqueueReadBuffer(pq, b, CL_FALSE, 0, sizeof host, host, 1, &ev, &wev));
    CHECK(clWaitForEvents(1, &wev));
    cl_ulong q, s, st, en;
    cl_event both[2] = {ev, wev};
    for (int i = 0; i < 2; i++) {
        CHECK(clGetEventProfilingInfo(both[i], CL_PROFILING_COMMAND_QUEUED, sizeof q, &q, NULL));
        CHECK(clGetEventProfilingInfo(both[i], CL_PROFILING_COMMAND_SUBMIT, sizeof s, &s, NULL));
        CHECK(clGetEventProfilingInfo(both[i], CL_PROFILING_COMMAND_START, sizeof st, &st, NULL));
        CHECK(clGetEventProfilingInfo(both[i], CL_PROFILING_COMMAND_END, sizeof en, &en, NULL));
        printf("profiling %d: queued<=submit %d submit<=start %d start<=end %d nonzero %d\n", i, q <= s, s <= st,
               st <= en, q != 0);
        ASSERT(st <= en && q != 0);
    }
    ASSERT(host[0] == 1 && host[1023] == 1);
    cl_ulong small;
    EXPECT_CODE("profiling value too small", clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, 4, &small, NULL),
                CL_INVALID_VALUE);
    /* Without profiling enabled. */
    cl_event np;
    CHECK(clEnqueueMarkerWithWaitList(t->q, 0, NULL, &np));
    CHECK(clWaitForEvents(1, &np));
    EXPECT_CODE("profiling on a non-profiling queue",
                clGetEventProfilingInfo(np, CL_PROFILING_COMMAND_END, sizeof en, &en, NULL),
                CL_PROFILING_INFO_NOT_AVAILABLE);
    /* User events have no profiling information either. */
    cl_event ue = clCreateUserEvent(t->ctx, &e);
    CHECK_ERR(e, "user event");
    EXPECT_CODE("profiling on a user event",
                clGetEventProfilingInfo(ue, CL_PROFILING_COMMAND_END, sizeof en, &en, NULL),
                CL_PROFILING_INFO_NOT_AVAILABLE);
    CHECK(clSetUserEventStatus(ue, CL_COMPLETE));
    CHECK(clReleaseEvent(ue));
    CHECK(clReleaseEvent(np));
    CHECK(clReleaseEvent(ev));
    CHECK(clReleaseEvent(wev));
    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseCommandQueue(pq));
}

static volatile int cb_count;
static volatile cl_int cb_status[8];
static volatile void *cb_data[8];
static void CL_CALLBACK on_event(cl_event ev, cl_int status, void *ud) {
    (void)ev;
    int i = __sync_fetch_and_add(&cb_count, 1);
    if (i < 8) {
        cb_status[i] = status;
        cb_data[i] = ud;
    }
}

static void wait_count(int n, int max_ms) {
    for (int i = 0; i < max_ms / 5 && cb_count < n; i++) sleep_ms(5);
}

static volatile int by_type[3];
static void CL_CALLBACK on_type(cl_event ev, cl_int status, void *ud) {
    (void)ev;
    int i = (int)(intptr_t)ud;
    cl_int want = i == 0 ? CL_SUBMITTED : i == 1 ? CL_RUNNING : CL_COMPLETE;
    __sync_fetch_and_add(&by_type[i], status == want ? 1 : 100);
}

/* Callbacks for each execution status, on a command and on a user event. */
static void callback_types(env_t *t, cl_kernel inc) {
    cl_int e;
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 4 * sizeof(int), NULL);
    CHECK(clSetKernelArg(inc, 0, sizeof b, &b));
    cl_event u = clCreateUserEvent(t->ctx, &e), k;
    CHECK_ERR(e, "user event");
    size_t g = 4;
    CHECK(clEnqueueNDRangeKernel(t->q, inc, 1, NULL, &g, NULL, 1, &u, &k));
    CHECK(clSetEventCallback(k, CL_SUBMITTED, on_type, (void *)0));
    CHECK(clSetEventCallback(k, CL_RUNNING, on_type, (void *)1));
    CHECK(clSetEventCallback(k, CL_COMPLETE, on_type, (void *)2));
    CHECK(clSetEventCallback(u, CL_COMPLETE, on_type, (void *)2));
    CHECK(clFlush(t->q));
    CHECK(clSetUserEventStatus(u, CL_COMPLETE));
    CHECK(clFinish(t->q));
    for (int i = 0; i < 1000 && (by_type[0] < 1 || by_type[1] < 1 || by_type[2] < 2); i++) sleep_ms(5);
    printf("callbacks by type: submitted %d running %d complete %d\n", by_type[0], by_type[1], by_type[2]);
    CHECK(clReleaseEvent(k));
    CHECK(clReleaseEvent(u));
    CHECK(clReleaseMemObject(b));
}

static void user_events(env_t *t, cl_kernel inc) {
    cl_int e;
    cl_event gate = clCreateUserEvent(t->ctx, &e);
    CHECK_ERR(e, "clCreateUserEvent");
    event_info(t, gate, NULL, "user event");
    int data[4] = {10, 20, 30, 40};
    cl_mem b = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof data, data);
    CHECK(clSetKernelArg(inc, 0, sizeof b, &b));
    size_t g = 4;
    cl_event k;
    CHECK(clEnqueueNDRangeKernel(t->q, inc, 1, NULL, &g, NULL, 1, &gate, &k));
    cb_count = 0;
    int tag = 0;
    CHECK(clSetEventCallback(k, CL_COMPLETE, on_event, &tag));
    CHECK(clFlush(t->q));
    sleep_ms(50);
    cl_int st;
    CHECK(clGetEventInfo(k, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    printf("gated kernel not complete before the gate: %d\n", st > CL_COMPLETE);
    printf("callback before the gate: %d\n", cb_count);
    EXPECT_CODE("user event status out of range", clSetUserEventStatus(gate, 5), CL_INVALID_VALUE);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    EXPECT_CODE("user event status set twice", clSetUserEventStatus(gate, CL_COMPLETE), CL_INVALID_OPERATION);
    CHECK(clWaitForEvents(1, &k));
    int out[4];
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    ASSERT(out[0] == 11 && out[3] == 41);
    wait_count(1, 5000);
    printf("event callback: count %d status %d user data ok %d\n", cb_count, cb_status[0], cb_data[0] == &tag);
    event_info(t, gate, NULL, "user event after");
    /* A callback registered after completion fires too. */
    CHECK(clSetEventCallback(k, CL_COMPLETE, on_event, &tag));
    wait_count(2, 5000);
    printf("late callback: count %d status %d\n", cb_count, cb_status[1]);
    EXPECT_CODE("callback type invalid", clSetEventCallback(k, 12345, on_event, NULL), CL_INVALID_VALUE);
    EXPECT_CODE("callback NULL", clSetEventCallback(k, CL_COMPLETE, NULL, NULL), CL_INVALID_VALUE);
    /* A user event set to an error fails the commands waiting on it. */
    cl_event bad = clCreateUserEvent(t->ctx, &e);
    CHECK_ERR(e, "bad user event");
    cl_event k2;
    CHECK(clEnqueueNDRangeKernel(t->q, inc, 1, NULL, &g, NULL, 1, &bad, &k2));
    CHECK(clSetEventCallback(k2, CL_COMPLETE, on_event, NULL));
    CHECK(clSetUserEventStatus(bad, -1234));
    cl_int wr = clWaitForEvents(1, &k2);
    printf("wait on failed dependency: %d\n", wr);
    CHECK(clGetEventInfo(k2, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    printf("dependent status negative: %d\n", st < 0);
    /* PoCL does not call CL_COMPLETE callbacks of failed commands: wait
     * briefly only. */
    wait_count(3, 300);
    printf("callback on failure: count %d negative %d\n", cb_count, cb_status[2] < 0);
    clFinish(t->q);
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    printf("failed dependency did not run: %d\n", out[0] == 11);
    CHECK(clReleaseEvent(bad));
    CHECK(clReleaseEvent(k2));
    CHECK(clReleaseEvent(k));
    CHECK(clReleaseEvent(gate));
    CHECK(clReleaseMemObject(b));
}

static volatile int dtor_order[4];
static volatile int dtor_n;
static void CL_CALLBACK on_destroy(cl_mem m, void *ud) {
    (void)m;
    int i = __sync_fetch_and_add(&dtor_n, 1);
    if (i < 4) dtor_order[i] = *(int *)ud;
}

static void destructors(env_t *t) {
    static int one = 1, two = 2, three = 3;
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 64, NULL);
    dtor_n = 0;
    CHECK(clSetMemObjectDestructorCallback(b, on_destroy, &one));
    CHECK(clSetMemObjectDestructorCallback(b, on_destroy, &two));
    EXPECT_CODE("destructor NULL", clSetMemObjectDestructorCallback(b, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clRetainMemObject(b));
    CHECK(clReleaseMemObject(b));
    sleep_ms(20);
    printf("destructor before last release: %d\n", dtor_n);
    CHECK(clReleaseMemObject(b));
    for (int i = 0; i < 1000 && dtor_n < 2; i++) sleep_ms(5);
    printf("destructors: %d, order %d %d\n", dtor_n, dtor_order[0], dtor_order[1]);
    /* A sub-buffer's destructor runs at its own release. */
    cl_mem p = buffer(t, CL_MEM_READ_WRITE, 4096, NULL);
    cl_buffer_region r = {0, 64};
    cl_int e;
    cl_mem s = clCreateSubBuffer(p, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
    CHECK_ERR(e, "sub");
    CHECK(clSetMemObjectDestructorCallback(s, on_destroy, &three));
    CHECK(clReleaseMemObject(s));
    for (int i = 0; i < 1000 && dtor_n < 3; i++) sleep_ms(5);
    printf("sub-buffer destructor: %d\n", dtor_order[2]);
    CHECK(clReleaseMemObject(p));
}

/* How many CPUs this thread may run on: the client library must not move
 * the application's threads (same-core handoff moves only the server's). */
/* A finish right after a read: on an in-order queue the read waited for
 * the kernel before it, so the kernel is complete after both; on an
 * out-of-order queue the read need not wait, and the finish must. */
static void finish_after_read(env_t *t, cl_kernel spin) {
    cl_int e;
    cl_queue_properties ooo[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
    cl_command_queue oq = clCreateCommandQueueWithProperties(t->ctx, t->device, ooo, &e);
    CHECK_ERR(e, "out-of-order queue");
    cl_command_queue qs[2] = {t->q, oq};
    const char *names[2] = {"in order", "out of order"};
    cl_uint seed[2] = {1, 0}, n = 20000000;
    for (int i = 0; i < 2; i++) {
        cl_mem a = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof seed, seed);
        cl_mem b = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof seed, seed);
        CHECK(clSetKernelArg(spin, 0, sizeof a, &a));
        CHECK(clSetKernelArg(spin, 1, sizeof n, &n));
        size_t g = 1;
        cl_event k;
        cl_uint got[2] = {9, 9};
        CHECK(clEnqueueNDRangeKernel(qs[i], spin, 1, NULL, &g, NULL, 0, NULL, &k));
        CHECK(clEnqueueReadBuffer(qs[i], b, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
        cl_int st;
        CHECK(clGetEventInfo(k, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        printf("~%s: kernel status right after the read: %d\n", names[i], st);
        CHECK(clFinish(qs[i]));
        CHECK(clGetEventInfo(k, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        printf("%s: read %u %u, kernel status after finish: %d\n", names[i], got[0], got[1], st);
        CHECK(clFinish(qs[i]));
        printf("%s: finish again: ok\n", names[i]);
        CHECK(clReleaseEvent(k));
        CHECK(clReleaseMemObject(a));
        CHECK(clReleaseMemObject(b));
    }
    CHECK(clReleaseCommandQueue(oq));

    /* A wait for a command's event: a read after it must still see what a
     * later command, not waited for, writes. */
    cl_program p = NULL;
    CHECK(clGetKernelInfo(spin, CL_KERNEL_PROGRAM, sizeof p, &p, NULL));
    cl_kernel inc = kernel(p, "inc");
    for (int last = 0; last < 2; last++) {
        cl_mem a = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof seed, seed);
        cl_mem b = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof seed, seed);
        CHECK(clFinish(t->q));
        size_t g = 1;
        cl_event e;
        CHECK(clSetKernelArg(inc, 0, sizeof a, &a));
        CHECK(clSetKernelArg(spin, 0, sizeof b, &b));
        CHECK(clSetKernelArg(spin, 1, sizeof n, &n));
        if (last) { /* the spin is the last command, and waited for */
            CHECK(clEnqueueNDRangeKernel(t->q, inc, 1, NULL, &g, NULL, 0, NULL, NULL));
            CHECK(clEnqueueNDRangeKernel(t->q, spin, 1, NULL, &g, NULL, 0, NULL, &e));
        } else { /* the spin comes after the command waited for */
            CHECK(clEnqueueNDRangeKernel(t->q, inc, 1, NULL, &g, NULL, 0, NULL, &e));
            CHECK(clEnqueueNDRangeKernel(t->q, spin, 1, NULL, &g, NULL, 0, NULL, NULL));
        }
        CHECK(clWaitForEvents(1, &e));
        cl_uint ga[2] = {9, 9}, gb[2] = {9, 9};
        CHECK(clEnqueueReadBuffer(t->q, b, CL_FALSE, 0, sizeof gb, gb, 0, NULL, NULL));
        CHECK(clFinish(t->q));
        CHECK(clEnqueueReadBuffer(t->q, a, CL_TRUE, 0, sizeof ga, ga, 0, NULL, NULL));
        printf("wait for the %s command: a %u %u, b %u %u\n", last ? "last" : "first", ga[0], ga[1], gb[0], gb[1]);
        CHECK(clReleaseEvent(e));
        CHECK(clReleaseMemObject(a));
        CHECK(clReleaseMemObject(b));
    }
    CHECK(clReleaseKernel(inc));
}

static int cpus_allowed(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}

int main(void) {
    int cpus = cpus_allowed();
    env_t t;
    env_init(&t, 0);
    cl_program p = build(&t, src, NULL);
    cl_kernel inc = kernel(p, "inc"), twice = kernel(p, "twice"), spin = kernel(p, "spin");
    basics(&t, inc, twice);
    finish_after_read(&t, spin);
    CHECK(clReleaseKernel(spin));
    profiling(&t, inc);
    user_events(&t, inc);
    callback_types(&t, inc);
    destructors(&t);
    CHECK(clReleaseKernel(inc));
    CHECK(clReleaseKernel(twice));
    CHECK(clReleaseProgram(p));
    printf("same CPUs allowed after the calls: %d\n", cpus_allowed() == cpus);
    env_done(&t);
    printf("events: done\n");
    return 0;
}
