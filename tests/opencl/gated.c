/* Non-blocking transfers gated on a user event that this thread sets only
 * afterwards (pyopencl's get_async does this): a read, then a write gated
 * the same way, then a kernel and a blocking read that must come after
 * both. Natively the transfers wait for the event; through Wormhole over
 * shared memory they complete later too (shared buffers). Over TCP the
 * server refuses them rather than hang (tests/tcp.rs). */
#include "common.h"
#include <stdlib.h>
#include <string.h>

static const char *src = "__kernel void inc(__global int *a) { a[get_global_id(0)] += 1; }\n";

int main(void) {
    env_t t;
    env_init(&t, 0);
    cl_program p = build(&t, src, NULL);
    cl_kernel inc = kernel(p, "inc");
    int data[4] = {11, 21, 31, 41}, out[4];
    cl_mem b = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof data, data);
    CHECK(clSetKernelArg(inc, 0, sizeof b, &b));
    size_t g = 4;
    cl_int e;
    cl_event open_gate = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "open gate");
    int gated[4] = {0}, later[4] = {5, 6, 7, 8};
    cl_event grd = NULL, gwr = NULL;
    CHECK(clEnqueueReadBuffer(t.q, b, CL_FALSE, 0, sizeof gated, gated, 1, &open_gate, &grd));
    CHECK(clEnqueueWriteBuffer(t.q, b, CL_FALSE, 0, sizeof later, later, 1, &open_gate, &gwr));
    CHECK(clEnqueueNDRangeKernel(t.q, inc, 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clSetUserEventStatus(open_gate, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &grd));
    for (int i = 0; i < 4; i++) printf("gated non-blocking read [%d]: %d\n", i, gated[i]);
    CHECK(clWaitForEvents(1, &gwr));
    CHECK(clEnqueueReadBuffer(t.q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    for (int i = 0; i < 4; i++) printf("gated write then kernel [%d]: %d\n", i, out[i]);
    CHECK(clReleaseEvent(grd));
    CHECK(clReleaseEvent(gwr));
    CHECK(clReleaseEvent(open_gate));
    CHECK(clReleaseMemObject(b));
    /* A large read the same way (large transfers take another path), and a
     * gate set to an error: the read fails, its event says so. */
    enum { BIG = 1 << 20 };
    unsigned char *src_h = malloc(BIG), *dst_h = calloc(1, BIG);
    if (!src_h || !dst_h) return 3;
    for (int i = 0; i < BIG; i++) src_h[i] = (unsigned char)(i * 7 + 3);
    cl_mem big = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, BIG, src_h);
    cl_event gate2 = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "gate 2");
    cl_event brd = NULL;
    CHECK(clEnqueueReadBuffer(t.q, big, CL_FALSE, 0, BIG, dst_h, 1, &gate2, &brd));
    CHECK(clSetUserEventStatus(gate2, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &brd));
    printf("gated large read equal: %d\n", memcmp(src_h, dst_h, BIG) == 0);
    cl_event gate3 = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "gate 3");
    cl_event frd = NULL;
    CHECK(clEnqueueReadBuffer(t.q, big, CL_FALSE, 0, 64, dst_h, 1, &gate3, &frd));
    CHECK(clSetUserEventStatus(gate3, -77));
    cl_int st = 0;
    cl_int wr = clWaitForEvents(1, &frd);
    CHECK(clGetEventInfo(frd, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
    printf("read behind a failed gate: wait %d status negative %d\n", wr, st < 0);
    /* Argument errors are still reported by the call. */
    cl_event gate4 = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "gate 4");
    EXPECT_CODE("gated read past the end",
                clEnqueueReadBuffer(t.q, big, CL_FALSE, BIG - 8, 64, dst_h, 1, &gate4, NULL), CL_INVALID_VALUE);
    CHECK(clSetUserEventStatus(gate4, CL_COMPLETE));
    CHECK(clReleaseEvent(gate4));
    /* Buffer rectangles: a gated write of a 4x3x2 box, then a gated read of
     * a box overlapping it, into a padded host layout; one past the end is
     * refused by the call. */
    unsigned char box[4 * 3 * 2], host[8 * 4 * 2] = {0};
    for (size_t i = 0; i < sizeof box; i++) box[i] = (unsigned char)(200 + i);
    size_t b_org[3] = {5, 2, 1}, h_org[3] = {0, 0, 0}, reg[3] = {4, 3, 2};
    size_t r_org[3] = {4, 2, 1}, rh_org[3] = {1, 1, 0}, r_reg[3] = {5, 3, 2}, far[3] = {60, 15, 1023};
    cl_event gate7 = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "gate 7");
    cl_event rwr = NULL, rrd = NULL;
    CHECK(clEnqueueWriteBufferRect(t.q, big, CL_FALSE, b_org, h_org, reg, 64, 1024, 4, 12, box, 1, &gate7, &rwr));
    CHECK(clEnqueueReadBufferRect(t.q, big, CL_FALSE, r_org, rh_org, r_reg, 64, 1024, 8, 32, host, 1, &gate7, &rrd));
    EXPECT_CODE("gated rect read past the end",
                clEnqueueReadBufferRect(t.q, big, CL_FALSE, far, h_org, r_reg, 64, 1024, 8, 32, host, 1, &gate7, NULL),
                CL_INVALID_VALUE);
    CHECK(clSetUserEventStatus(gate7, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &rrd));
    unsigned sum = 0;
    for (size_t i = 0; i < sizeof host; i++) sum = sum * 31 + host[i];
    printf("gated rect read: sum %u, first row %d %d %d %d %d %d\n", sum, host[9], host[10], host[11], host[12],
           host[13], host[14]);
    CHECK(clReleaseEvent(gate7));
    CHECK(clReleaseEvent(rwr));
    CHECK(clReleaseEvent(rrd));
    /* A 2D image: a gated write, then a gated read of a window of it. */
    unsigned char pix[8 * 4 * 4], win[2 * 2 * 4] = {0};
    for (size_t i = 0; i < sizeof pix; i++) pix[i] = (unsigned char)(i * 5 + 1);
    cl_image_desc desc = image_desc(CL_MEM_OBJECT_IMAGE2D, 8, 4, 0);
    cl_mem img = clCreateImage(t.ctx, CL_MEM_READ_WRITE, &rgba8, &desc, NULL, &e);
    CHECK_ERR(e, "clCreateImage");
    cl_event gate5 = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "gate 5");
    size_t zero[3] = {0, 0, 0}, all[3] = {8, 4, 1}, at[3] = {3, 1, 0}, two[3] = {2, 2, 1};
    cl_event iwr = NULL, ird = NULL;
    CHECK(clEnqueueWriteImage(t.q, img, CL_FALSE, zero, all, 0, 0, pix, 1, &gate5, &iwr));
    CHECK(clEnqueueReadImage(t.q, img, CL_FALSE, at, two, 0, 0, win, 1, &gate5, &ird));
    CHECK(clSetUserEventStatus(gate5, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &ird));
    for (int y = 0; y < 2; y++)
        printf("gated image window row %d: %d %d %d %d %d %d %d %d\n", y, win[y * 8], win[y * 8 + 1],
               win[y * 8 + 2], win[y * 8 + 3], win[y * 8 + 4], win[y * 8 + 5], win[y * 8 + 6], win[y * 8 + 7]);
    cl_event gate6 = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "gate 6");
    EXPECT_CODE("gated image read on a buffer",
                clEnqueueReadImage(t.q, big, CL_FALSE, zero, two, 0, 0, win, 1, &gate6, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clSetUserEventStatus(gate6, CL_COMPLETE));
    CHECK(clReleaseEvent(gate5));
    CHECK(clReleaseEvent(gate6));
    CHECK(clReleaseEvent(iwr));
    CHECK(clReleaseEvent(ird));
    CHECK(clReleaseMemObject(img));
    CHECK(clReleaseEvent(brd));
    CHECK(clReleaseEvent(frd));
    CHECK(clReleaseEvent(gate2));
    CHECK(clReleaseEvent(gate3));
    CHECK(clReleaseMemObject(big));
    free(src_h);
    free(dst_h);
    CHECK(clReleaseKernel(inc));
    CHECK(clReleaseProgram(p));
    env_done(&t);
    printf("gated: done\n");
    return 0;
}
