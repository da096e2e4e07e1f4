/* Markers on a queue that has run everything it was given: complete once
 * enqueued (the Wormhole client answers their waits itself; the test
 * counts round trips), and still real commands: a later launch can wait for
 * one, a callback on one runs, a retain counts. On a profiling queue a
 * waited-for marker has its times; behind a launch a marker waits for it. */
#include "common.h"

#define MARKERS 300

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

static void read_back(env_t *t, cl_mem b, const char *label) {
    int data[4] = {0};
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof data, data, 0, NULL, NULL));
    printf("%s: %d %d %d %d\n", label, data[0], data[1], data[2], data[3]);
}

int main(void) {
    watchdog(120);
    env_t t;
    env_init(&t, 0);
    cl_program p = build(&t, src, NULL);
    cl_kernel k = kernel(p, "inc");
    int zero[4] = {0};
    cl_mem b = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, zero);
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t g = 4;
    CHECK(clEnqueueNDRangeKernel(t.q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clFinish(t.q));

    /* Marker, wait, release, many times over on a drained queue. */
    int complete = 0;
    for (int i = 0; i < MARKERS; i++) {
        cl_event m;
        CHECK(clEnqueueMarkerWithWaitList(t.q, 0, NULL, &m));
        CHECK(clWaitForEvents(1, &m));
        complete += status(m) == CL_COMPLETE;
        CHECK(clReleaseEvent(m));
    }
    printf("markers complete after their wait: %d of %d\n", complete, MARKERS);

    /* The last one kept: a real command a launch can wait for. */
    cl_event kept;
    CHECK(clEnqueueMarker(t.q, &kept));
    CHECK(clWaitForEvents(1, &kept));
    cl_uint before = 0, after = 0;
    CHECK(clGetEventInfo(kept, CL_EVENT_REFERENCE_COUNT, sizeof before, &before, NULL));
    CHECK(clRetainEvent(kept));
    CHECK(clGetEventInfo(kept, CL_EVENT_REFERENCE_COUNT, sizeof after, &after, NULL));
    printf("a retain counts: %d\n", after == before + 1);
    CHECK(clReleaseEvent(kept));
    cl_command_type type = 0;
    CHECK(clGetEventInfo(kept, CL_EVENT_COMMAND_TYPE, sizeof type, &type, NULL));
    printf("kept marker: type %x, status %d\n", type, status(kept));
    CHECK(clSetEventCallback(kept, CL_COMPLETE, on_complete, NULL));
    for (int i = 0; i < 5000 && callback_status == 12345; i++) sleep_ms(1);
    printf("callback on a completed marker: %d\n", callback_status);
    CHECK(clEnqueueNDRangeKernel(t.q, k, 1, NULL, &g, NULL, 1, &kept, NULL));
    read_back(&t, b, "after a launch behind the marker");
    CHECK(clReleaseEvent(kept));

    /* Behind a launch, a marker is not answered early: its wait is the
     * launch's. */
    cl_event behind;
    CHECK(clEnqueueNDRangeKernel(t.q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clEnqueueMarkerWithWaitList(t.q, 0, NULL, &behind));
    CHECK(clWaitForEvents(1, &behind));
    printf("marker behind a launch: %d\n", status(behind));
    CHECK(clReleaseEvent(behind));
    int data[4] = {0};
    CHECK(clEnqueueReadBuffer(t.q, b, CL_FALSE, 0, sizeof data, data, 0, NULL, NULL));
    CHECK(clEnqueueMarkerWithWaitList(t.q, 0, NULL, &behind));
    CHECK(clWaitForEvents(1, &behind));
    printf("read waited for by a marker: %d %d %d %d\n", data[0], data[1], data[2], data[3]);
    CHECK(clReleaseEvent(behind));

    /* On a profiling queue a waited-for marker has its times. */
    cl_int e;
    cl_command_queue pq = clCreateCommandQueue(t.ctx, t.device, CL_QUEUE_PROFILING_ENABLE, &e);
    CHECK_ERR(e, "clCreateCommandQueue");
    CHECK(clFinish(pq));
    int timed = 0;
    for (int i = 0; i < 20; i++) {
        cl_event m;
        CHECK(clEnqueueMarkerWithWaitList(pq, 0, NULL, &m));
        CHECK(clWaitForEvents(1, &m));
        cl_ulong start = 0, end = 0;
        cl_int s1 = clGetEventProfilingInfo(m, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
        cl_int s2 = clGetEventProfilingInfo(m, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
        timed += s1 == CL_SUCCESS && s2 == CL_SUCCESS && end >= start;
        CHECK(clReleaseEvent(m));
    }
    printf("profiled markers with their times: %d of 20\n", timed);
    CHECK(clReleaseCommandQueue(pq));

    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    env_done(&t);
    printf("markers: done\n");
    return 0;
}
