/* Non-blocking maps gated on a user event that this thread sets only
 * afterwards. Natively the map returns its pointer at once and the mapping
 * holds the data once the map's event completes; the application writes
 * through it and unmaps. Through Wormhole the same must hold: buffers
 * (device memory, USE_HOST_PTR, behind a gated kernel with no wait list of
 * their own), 2D and 3D images, an unmap enqueued before the gate opens, a
 * gate set to a failure, and a map refused at once for its range. */
#include "common.h"

static cl_int status_of(cl_event ev) {
    cl_int st = 1;
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    return st;
}

static void describe(const char *label, cl_event ev, cl_command_queue q) {
    cl_command_type ty = 0;
    cl_command_queue eq = NULL;
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof ty, &ty, NULL));
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof eq, &eq, NULL));
    printf("%s: command type %#x, its queue %d, status %d\n", label, (unsigned)ty, eq == q, status_of(ev));
}

static cl_event gate_of(env_t *t) {
    cl_int e;
    cl_event g = clCreateUserEvent(t->ctx, &e);
    CHECK_ERR(e, "clCreateUserEvent");
    return g;
}

static const char *src = "__kernel void twice(__global int *a) { a[get_global_id(0)] *= 2; }\n";

static void buffers(env_t *t) {
    cl_int e;
    int init[64], out[64];
    for (int i = 0; i < 64; i++) init[i] = 3 * i + 1;
    /* Device memory: read and write through the gated mapping. */
    cl_mem b = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof init, init);
    cl_event gate = gate_of(t), mev = NULL, uev = NULL;
    int *m = clEnqueueMapBuffer(t->q, b, CL_FALSE, CL_MAP_READ | CL_MAP_WRITE, 16, 128, 1, &gate, &mev, &e);
    EXPECT_CODE("gated map of a buffer", e, CL_SUCCESS);
    ASSERT(m != NULL && mev != NULL);
    printf("gated map: pending before the gate %d\n", status_of(mev) > CL_COMPLETE);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &mev));
    describe("gated map", mev, t->q);
    printf("gated map: values %d %d %d\n", m[0], m[1], m[31]);
    m[0] = -5;
    m[31] = -6;
    CHECK(clEnqueueUnmapMemObject(t->q, b, m, 0, NULL, &uev));
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    describe("unmap after the gated map", uev, t->q);
    printf("written through the gated map: %d %d %d %d\n", out[3], out[4], out[35], out[36]);
    CHECK(clReleaseEvent(mev));
    CHECK(clReleaseEvent(uev));
    CHECK(clReleaseEvent(gate));

    /* USE_HOST_PTR: the mapping is the application's memory, at the offset. */
    int *host = malloc(sizeof init);
    ASSERT(host != NULL);
    memcpy(host, init, sizeof init);
    cl_mem hb = buffer(t, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, sizeof init, host);
    gate = gate_of(t);
    m = clEnqueueMapBuffer(t->q, hb, CL_FALSE, CL_MAP_READ, 40, 64, 1, &gate, &mev, &e);
    EXPECT_CODE("gated map of a USE_HOST_PTR buffer", e, CL_SUCCESS);
    printf("gated USE_HOST_PTR map: inside host_ptr at byte %ld\n", (long)((char *)m - (char *)host));
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &mev));
    printf("gated USE_HOST_PTR map: values %d %d\n", m[0], m[15]);
    CHECK(clEnqueueUnmapMemObject(t->q, hb, m, 0, NULL, NULL));
    CHECK(clFinish(t->q));
    CHECK(clReleaseEvent(mev));
    CHECK(clReleaseEvent(gate));
    CHECK(clReleaseMemObject(hb));
    free(host);

    /* Behind a gated kernel on an in-order queue, with no wait list: the
     * map waits for the kernel, which waits for the gate. */
    cl_program p = build(t, src, NULL);
    cl_kernel k = kernel(p, "twice");
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t g = 64;
    gate = gate_of(t);
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, NULL, 1, &gate, NULL));
    m = clEnqueueMapBuffer(t->q, b, CL_FALSE, CL_MAP_READ, 0, sizeof init, 0, NULL, &mev, &e);
    EXPECT_CODE("map behind a gated kernel", e, CL_SUCCESS);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &mev));
    printf("map behind a gated kernel: values %d %d %d\n", m[0], m[4], m[63]);
    CHECK(clEnqueueUnmapMemObject(t->q, b, m, 0, NULL, NULL));
    CHECK(clReleaseEvent(mev));
    CHECK(clReleaseEvent(gate));

    /* The unmap enqueued before the gate opens: it follows the map. */
    gate = gate_of(t);
    m = clEnqueueMapBuffer(t->q, b, CL_FALSE, CL_MAP_WRITE, 0, 32, 1, &gate, &mev, &e);
    EXPECT_CODE("gated map, unmapped before the gate opens", e, CL_SUCCESS);
    CHECK(clEnqueueUnmapMemObject(t->q, b, m, 0, NULL, &uev));
    printf("unmap before the gate: pending %d\n", status_of(uev) > CL_COMPLETE);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &uev));
    cl_uint maps = 99;
    CHECK(clGetMemObjectInfo(b, CL_MEM_MAP_COUNT, sizeof maps, &maps, NULL));
    printf("unmap before the gate: map status %d, unmap status %d, map count %u\n", status_of(mev), status_of(uev),
           maps);
    CHECK(clReleaseEvent(mev));
    CHECK(clReleaseEvent(uev));
    CHECK(clReleaseEvent(gate));

    /* A gate set to a failure fails the map. */
    gate = gate_of(t);
    m = clEnqueueMapBuffer(t->q, b, CL_FALSE, CL_MAP_READ, 0, 16, 1, &gate, &mev, &e);
    EXPECT_CODE("map behind a gate that fails", e, CL_SUCCESS);
    CHECK(clSetUserEventStatus(gate, -33));
    cl_int w = clWaitForEvents(1, &mev);
    printf("map behind a failed gate: wait %d, status negative %d\n", w, status_of(mev) < 0);
    CHECK(clReleaseEvent(mev));
    CHECK(clReleaseEvent(gate));

    /* What the library refuses when the map is enqueued, it refuses at once. */
    gate = gate_of(t);
    m = clEnqueueMapBuffer(t->q, b, CL_FALSE, CL_MAP_READ, 200, 64, 1, &gate, NULL, &e);
    EXPECT_CODE("gated map past the end", e, CL_INVALID_VALUE);
    printf("gated map past the end: NULL %d\n", m == NULL);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clReleaseEvent(gate));
    CHECK(clFinish(t->q));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    CHECK(clReleaseMemObject(b));
}

static void images(env_t *t) {
    cl_int e;
    cl_image_desc d = image_desc(CL_MEM_OBJECT_IMAGE2D, 8, 4, 0);
    unsigned char pix[8 * 4 * 4];
    for (size_t i = 0; i < sizeof pix; i++) pix[i] = (unsigned char)(i * 3 + 7);
    cl_mem img = clCreateImage(t->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &rgba8, &d, pix, &e);
    CHECK_ERR(e, "2D image");
    cl_event gate = gate_of(t), mev = NULL;
    size_t org[3] = {2, 1, 0}, reg[3] = {3, 2, 1}, rp = 0, sp = 0;
    unsigned char *m =
        clEnqueueMapImage(t->q, img, CL_FALSE, CL_MAP_READ, org, reg, &rp, &sp, 1, &gate, &mev, &e);
    EXPECT_CODE("gated map of a 2D image", e, CL_SUCCESS);
    ASSERT(m != NULL);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &mev));
    describe("gated 2D image map", mev, t->q);
    printf("gated 2D image map: row pitch %zu, slice pitch %zu\n", rp, sp);
    for (int y = 0; y < 2; y++)
        printf("gated 2D image map row %d: %d %d %d %d %d\n", y, m[y * rp], m[y * rp + 1], m[y * rp + 4],
               m[y * rp + 8], m[y * rp + 11]);
    CHECK(clEnqueueUnmapMemObject(t->q, img, m, 0, NULL, NULL));
    CHECK(clReleaseEvent(mev));
    CHECK(clReleaseEvent(gate));
    CHECK(clReleaseMemObject(img));

    /* 3D: written through a gated mapping, read back. */
    d = image_desc(CL_MEM_OBJECT_IMAGE3D, 4, 3, 2);
    img = clCreateImage(t->ctx, CL_MEM_READ_WRITE, &rgba8, &d, NULL, &e);
    CHECK_ERR(e, "3D image");
    size_t zero[3] = {0, 0, 0}, all[3] = {4, 3, 2};
    unsigned char clear[4 * 3 * 2 * 4] = {0}, back[4 * 3 * 2 * 4];
    CHECK(clEnqueueWriteImage(t->q, img, CL_TRUE, zero, all, 0, 0, clear, 0, NULL, NULL));
    gate = gate_of(t);
    size_t o3[3] = {1, 1, 1}, r3[3] = {2, 2, 1};
    m = clEnqueueMapImage(t->q, img, CL_FALSE, CL_MAP_WRITE, o3, r3, &rp, &sp, 1, &gate, &mev, &e);
    EXPECT_CODE("gated map of a 3D image", e, CL_SUCCESS);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &mev));
    describe("gated 3D image map", mev, t->q);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 8; x++) m[y * rp + x] = (unsigned char)(100 + y * 8 + x);
    CHECK(clEnqueueUnmapMemObject(t->q, img, m, 0, NULL, NULL));
    CHECK(clEnqueueReadImage(t->q, img, CL_TRUE, zero, all, 0, 0, back, 0, NULL, NULL));
    printf("gated 3D image map wrote: sum %u, pixel (1,1,1) %d %d %d %d, (2,2,1) %d, (0,0,0) %d\n",
           fnv(back, sizeof back), back[48 + 16 + 4], back[48 + 16 + 5], back[48 + 16 + 6], back[48 + 16 + 7],
           back[48 + 32 + 8], back[0]);
    CHECK(clReleaseEvent(mev));
    CHECK(clReleaseEvent(gate));
    CHECK(clReleaseMemObject(img));
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    watchdog(60);
    buffers(&t);
    images(&t);
    env_done(&t);
    printf("gated_maps: done\n");
    return 0;
}
