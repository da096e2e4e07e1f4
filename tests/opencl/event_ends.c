/* An event's end, once reached, is what every later status query says: a
 * marker waited for, a kernel whose CL_COMPLETE callback ran, a user event
 * set complete or failed, and a command that failed behind it. Before its
 * end an event's status keeps changing (a command gated on a user event
 * is not complete, and becomes so). Its queue, context and type stay.
 * Markers on a queue that has run everything it was given are complete
 * once enqueued, and still real commands (a launch can wait for one, a
 * callback on one runs); on a profiling queue a waited-for marker has its
 * times. Ends with STATUS_QUERIES queries of one completed event. The
 * Wormhole client answers those queries and the markers' waits without the
 * server: the test counts round trips. */
#include "common.h"

#define STATUS_QUERIES 1000
#define MARKERS 300
#define PROFILED 5

static const char *src = "__kernel void inc(__global int *a) { a[get_global_id(0)] += 1; }\n";

static cl_int status(cl_event ev) {
    cl_int st = 12345;
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    return st;
}

static volatile int callback_status = 12345;

static void CL_CALLBACK on_complete(cl_event ev, cl_int st, void *data) {
    (void)ev;
    (void)data;
    callback_status = st;
}

/* Waits (bounded) for the callback to have run. */
static void await_callback(void) {
    for (int i = 0; i < 5000 && callback_status == 12345; i++) usleep(1000);
}

/* Marker, wait, release, many times over on a drained queue; then one kept
 * and used, one behind a launch, and markers on a profiling queue. */
static void markers(env_t *t, cl_kernel k, cl_mem b) {
    size_t g = 4;
    CHECK(clFinish(t->q));
    int complete = 0;
    for (int i = 0; i < MARKERS; i++) {
        cl_event m;
        CHECK(clEnqueueMarkerWithWaitList(t->q, 0, NULL, &m));
        CHECK(clWaitForEvents(1, &m));
        complete += status(m) == CL_COMPLETE;
        CHECK(clReleaseEvent(m));
    }
    printf("markers complete after their wait: %d of %d\n", complete, MARKERS);

    cl_event kept;
    CHECK(clEnqueueMarker(t->q, &kept));
    CHECK(clWaitForEvents(1, &kept));
    callback_status = 12345;
    CHECK(clSetEventCallback(kept, CL_COMPLETE, on_complete, NULL));
    await_callback();
    printf("callback on a completed marker: %d\n", callback_status);
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, NULL, 1, &kept, NULL));
    CHECK(clReleaseEvent(kept));
    cl_event behind;
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clEnqueueMarkerWithWaitList(t->q, 0, NULL, &behind));
    CHECK(clWaitForEvents(1, &behind));
    printf("marker behind two launches: %d\n", status(behind));
    CHECK(clReleaseEvent(behind));
    int data[4] = {0};
    CHECK(clEnqueueReadBuffer(t->q, b, CL_FALSE, 0, sizeof data, data, 0, NULL, NULL));
    CHECK(clEnqueueMarkerWithWaitList(t->q, 0, NULL, &behind));
    CHECK(clWaitForEvents(1, &behind));
    printf("read waited for by a marker: %d %d %d %d\n", data[0], data[1], data[2], data[3]);
    CHECK(clReleaseEvent(behind));

    cl_int e;
    cl_command_queue pq = clCreateCommandQueue(t->ctx, t->device, CL_QUEUE_PROFILING_ENABLE, &e);
    CHECK_ERR(e, "clCreateCommandQueue");
    CHECK(clFinish(pq));
    int timed = 0;
    for (int i = 0; i < PROFILED; i++) {
        cl_event m;
        CHECK(clEnqueueMarkerWithWaitList(pq, 0, NULL, &m));
        CHECK(clWaitForEvents(1, &m));
        cl_ulong start = 0, end = 0;
        cl_int s1 = clGetEventProfilingInfo(m, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
        cl_int s2 = clGetEventProfilingInfo(m, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
        timed += s1 == CL_SUCCESS && s2 == CL_SUCCESS && end >= start;
        CHECK(clReleaseEvent(m));
    }
    printf("profiled markers with their times: %d of %d\n", timed, PROFILED);
    CHECK(clReleaseCommandQueue(pq));
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    cl_program p = build(&t, src, NULL);
    cl_kernel k = kernel(p, "inc");
    int data[4] = {0};
    cl_mem b = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof data, data);
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t g = 4;

    /* A marker waited for: complete, and stays so. */
    cl_event m;
    CHECK(clEnqueueMarkerWithWaitList(t.q, 0, NULL, &m));
    CHECK(clWaitForEvents(1, &m));
    printf("marker after its wait: %d\n", status(m));
    cl_command_type ty = 0;
    cl_command_queue eq = NULL;
    cl_context ec = NULL;
    for (int i = 0; i < 3; i++) {
        CHECK(clGetEventInfo(m, CL_EVENT_COMMAND_TYPE, sizeof ty, &ty, NULL));
        CHECK(clGetEventInfo(m, CL_EVENT_COMMAND_QUEUE, sizeof eq, &eq, NULL));
        CHECK(clGetEventInfo(m, CL_EVENT_CONTEXT, sizeof ec, &ec, NULL));
    }
    printf("marker: type %x, its queue %d, its context %d\n", ty, eq == t.q, ec == t.ctx);
    size_t need = 0;
    CHECK(clGetEventInfo(m, CL_EVENT_COMMAND_EXECUTION_STATUS, 0, NULL, &need));
    printf("status size: %zu\n", need);
    cl_int small = 0;
    EXPECT_CODE("status into too small a buffer",
                clGetEventInfo(m, CL_EVENT_COMMAND_EXECUTION_STATUS, 2, &small, NULL),
                CL_INVALID_VALUE);
    cl_uint before = 0, after = 0;
    CHECK(clGetEventInfo(m, CL_EVENT_REFERENCE_COUNT, sizeof before, &before, NULL));
    CHECK(clRetainEvent(m));
    CHECK(clGetEventInfo(m, CL_EVENT_REFERENCE_COUNT, sizeof after, &after, NULL));
    printf("a retain counts: %d\n", after == before + 1);
    CHECK(clReleaseEvent(m));

    /* A command gated on a user event: not ended until the gate opens. */
    cl_int e;
    cl_event gate = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "clCreateUserEvent");
    printf("user event before it is set: %d\n", status(gate));
    cl_event run;
    CHECK(clEnqueueNDRangeKernel(t.q, k, 1, NULL, &g, NULL, 1, &gate, &run));
    CHECK(clFlush(t.q));
    printf("gated launch not ended: %d\n", status(run) > CL_COMPLETE);
    CHECK(clSetEventCallback(run, CL_COMPLETE, on_complete, NULL));
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    printf("user event once set: %d\n", status(gate));
    await_callback();
    printf("callback status: %d\n", callback_status);
    printf("launch after its callback: %d\n", status(run));
    CHECK(clEnqueueReadBuffer(t.q, b, CL_TRUE, 0, sizeof data, data, 0, NULL, NULL));
    printf("data: %d %d %d %d\n", data[0], data[1], data[2], data[3]);
    CHECK(clReleaseEvent(run));
    CHECK(clReleaseEvent(gate));

    /* A user event set to fail, and a command behind it. */
    cl_event bad = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "clCreateUserEvent");
    cl_event behind;
    CHECK(clEnqueueMarkerWithWaitList(t.q, 1, &bad, &behind));
    CHECK(clSetUserEventStatus(bad, -42));
    printf("failed user event: %d, again %d\n", status(bad), status(bad));
    PRINT_CODE("waiting for it", clWaitForEvents(1, &bad));
    printf("still failed: %d\n", status(bad));
    CHECK(clReleaseEvent(bad));
    CHECK(clFinish(t.q));
    printf("behind a failed event: %d\n", status(behind) < CL_COMPLETE);
    CHECK(clReleaseEvent(behind));

    markers(&t, k, b);

    /* Many queries of one completed event. */
    cl_event last;
    CHECK(clEnqueueMarkerWithWaitList(t.q, 0, NULL, &last));
    CHECK(clWaitForEvents(1, &last));
    int complete = 0;
    for (int i = 0; i < STATUS_QUERIES; i++) complete += status(last) == CL_COMPLETE;
    printf("complete in %d of %d queries\n", complete, STATUS_QUERIES);
    CHECK(clReleaseEvent(last));

    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    env_done(&t);
    printf("event_ends: done\n");
    return 0;
}
