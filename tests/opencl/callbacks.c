/* Many commands of different kinds gated on one user event, each with a
 * callback for every execution state (submitted, running, complete)
 * registered before the gate opens; then the gate opens. Natively every
 * callback fires exactly once, with the state it was registered for, and
 * every command's data arrive. The wait for the callbacks is bounded. */
#include "common.h"

enum {
    READ_BUF,
    WRITE_BUF,
    COPY_BUF,
    FILL_BUF,
    MAP_BUF,
    UNMAP_BUF,
    READ_RECT,
    WRITE_RECT,
    WRITE_IMG2,
    READ_IMG2,
    COPY_IMG2,
    MAP_IMG2,
    WRITE_IMG3,
    READ_IMG3,
    MAP_IMG3,
    IMG_TO_BUF,
    BUF_TO_IMG,
    KERNEL,
    MARKER,
    N_CMDS
};

static const char *names[N_CMDS] = {
    "read buffer",  "write buffer", "copy buffer",  "fill buffer",  "map buffer",
    "unmap buffer", "read rect",    "write rect",   "write 2D image", "read 2D image",
    "copy 2D image", "map 2D image", "write 3D image", "read 3D image", "map 3D image",
    "image to buffer", "buffer to image", "kernel", "marker",
};

/* hits[command][state]: CL_COMPLETE 0, CL_RUNNING 1, CL_SUBMITTED 2. */
static int hits[N_CMDS][3];
static int wrong_state;

static void CL_CALLBACK on_state(cl_event ev, cl_int st, void *user) {
    (void)ev;
    int cmd = (int)(intptr_t)user / 4, want = (int)(intptr_t)user % 4;
    if (st != want) __atomic_add_fetch(&wrong_state, 1, __ATOMIC_SEQ_CST);
    if (cmd >= 0 && cmd < N_CMDS && want >= 0 && want < 3) __atomic_add_fetch(&hits[cmd][want], 1, __ATOMIC_SEQ_CST);
}

static int fired(void) {
    int n = 0;
    for (int c = 0; c < N_CMDS; c++)
        for (int s = 0; s < 3; s++) n += __atomic_load_n(&hits[c][s], __ATOMIC_SEQ_CST) > 0;
    return n;
}

static const char *src = "__kernel void inc(__global int *a) { a[get_global_id(0)] += 1; }\n";

int main(void) {
    env_t t;
    env_init(&t, 0);
    watchdog(60);
    cl_int e;
    cl_program p = build(&t, src, NULL);
    cl_kernel k = kernel(p, "inc");
    int a_init[64], b_init[64];
    for (int i = 0; i < 64; i++) {
        a_init[i] = i * 5;
        b_init[i] = 1000 + i;
    }
    cl_mem a = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof a_init, a_init);
    cl_mem b = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof b_init, b_init);
    cl_mem c = buffer(&t, CL_MEM_READ_WRITE, sizeof a_init, NULL);
    cl_mem r = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof b_init, b_init);
    cl_mem ib = buffer(&t, CL_MEM_READ_WRITE, 8 * 4 * 4, NULL);
    cl_mem um = buffer(&t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof a_init, a_init);
    /* Mapped now, written, and unmapped behind the gate. */
    int *um_map = clEnqueueMapBuffer(t.q, um, CL_TRUE, CL_MAP_WRITE, 0, 64, 0, NULL, NULL, &e);
    CHECK_ERR(e, "map for the gated unmap");
    for (int i = 0; i < 16; i++) um_map[i] = 4000 + i;
    CHECK(clSetKernelArg(k, 0, sizeof c, &c));
    cl_image_desc d = image_desc(CL_MEM_OBJECT_IMAGE2D, 8, 4, 0);
    cl_mem i2 = clCreateImage(t.ctx, CL_MEM_READ_WRITE, &rgba8, &d, NULL, &e);
    CHECK_ERR(e, "2D image");
    cl_mem i2b = clCreateImage(t.ctx, CL_MEM_READ_WRITE, &rgba8, &d, NULL, &e);
    CHECK_ERR(e, "second 2D image");
    d = image_desc(CL_MEM_OBJECT_IMAGE3D, 4, 4, 2);
    cl_mem i3 = clCreateImage(t.ctx, CL_MEM_READ_WRITE, &rgba8, &d, NULL, &e);
    CHECK_ERR(e, "3D image");

    cl_event gate = clCreateUserEvent(t.ctx, &e);
    CHECK_ERR(e, "gate");
    cl_event ev[N_CMDS];
    memset(ev, 0, sizeof ev);
    int rd[64] = {0}, wr[64], rect_out[16] = {0}, rect_in[8];
    for (int i = 0; i < 64; i++) wr[i] = -i;
    for (int i = 0; i < 8; i++) rect_in[i] = 700 + i;
    unsigned char pix2[8 * 4 * 4], back2[8 * 4 * 4] = {0}, pix3[4 * 4 * 2 * 4], back3[4 * 4 * 2 * 4] = {0};
    for (size_t i = 0; i < sizeof pix2; i++) pix2[i] = (unsigned char)(i * 7 + 1);
    for (size_t i = 0; i < sizeof pix3; i++) pix3[i] = (unsigned char)(i * 11 + 5);
    size_t z[3] = {0, 0, 0}, all2[3] = {8, 4, 1}, all3[3] = {4, 4, 2};
    size_t bo[3] = {8, 1, 0}, ho[3] = {0, 0, 0}, rg[3] = {8, 2, 1};
    int pattern = 0x01020304;
    size_t g = 64, rp = 0, sp = 0;

    CHECK(clEnqueueReadBuffer(t.q, a, CL_FALSE, 0, sizeof rd, rd, 1, &gate, &ev[READ_BUF]));
    CHECK(clEnqueueWriteBuffer(t.q, b, CL_FALSE, 0, sizeof wr, wr, 1, &gate, &ev[WRITE_BUF]));
    CHECK(clEnqueueCopyBuffer(t.q, b, c, 0, 0, sizeof wr, 1, &gate, &ev[COPY_BUF]));
    CHECK(clEnqueueFillBuffer(t.q, a, &pattern, sizeof pattern, 128, 64, 1, &gate, &ev[FILL_BUF]));
    int *mapped = clEnqueueMapBuffer(t.q, a, CL_FALSE, CL_MAP_READ, 0, sizeof a_init, 1, &gate, &ev[MAP_BUF], &e);
    CHECK_ERR(e, "map buffer");
    CHECK(clEnqueueUnmapMemObject(t.q, um, um_map, 1, &gate, &ev[UNMAP_BUF]));
    CHECK(clEnqueueReadBufferRect(t.q, r, CL_FALSE, bo, ho, rg, 64, 0, 32, 0, rect_out, 1, &gate, &ev[READ_RECT]));
    CHECK(clEnqueueWriteBufferRect(t.q, r, CL_FALSE, bo, ho, rg, 64, 0, 16, 0, rect_in, 1, &gate, &ev[WRITE_RECT]));
    CHECK(clEnqueueWriteImage(t.q, i2, CL_FALSE, z, all2, 0, 0, pix2, 1, &gate, &ev[WRITE_IMG2]));
    CHECK(clEnqueueReadImage(t.q, i2, CL_FALSE, z, all2, 0, 0, back2, 1, &gate, &ev[READ_IMG2]));
    CHECK(clEnqueueCopyImage(t.q, i2, i2b, z, z, all2, 1, &gate, &ev[COPY_IMG2]));
    unsigned char *m2 =
        clEnqueueMapImage(t.q, i2b, CL_FALSE, CL_MAP_READ, z, all2, &rp, NULL, 1, &gate, &ev[MAP_IMG2], &e);
    CHECK_ERR(e, "map 2D image");
    size_t rp_2d = rp;
    CHECK(clEnqueueWriteImage(t.q, i3, CL_FALSE, z, all3, 0, 0, pix3, 1, &gate, &ev[WRITE_IMG3]));
    CHECK(clEnqueueReadImage(t.q, i3, CL_FALSE, z, all3, 0, 0, back3, 1, &gate, &ev[READ_IMG3]));
    unsigned char *m3 =
        clEnqueueMapImage(t.q, i3, CL_FALSE, CL_MAP_READ, z, all3, &rp, &sp, 1, &gate, &ev[MAP_IMG3], &e);
    CHECK_ERR(e, "map 3D image");
    size_t rp3 = rp, sp3 = sp;
    CHECK(clEnqueueCopyImageToBuffer(t.q, i2, ib, z, all2, 0, 1, &gate, &ev[IMG_TO_BUF]));
    CHECK(clEnqueueCopyBufferToImage(t.q, ib, i2b, 0, z, all2, 1, &gate, &ev[BUF_TO_IMG]));
    CHECK(clEnqueueNDRangeKernel(t.q, k, 1, NULL, &g, NULL, 1, &gate, &ev[KERNEL]));
    CHECK(clEnqueueMarkerWithWaitList(t.q, 1, &gate, &ev[MARKER]));

    int registered = 0;
    const cl_int states[3] = {CL_COMPLETE, CL_RUNNING, CL_SUBMITTED};
    for (int i = 0; i < N_CMDS; i++)
        for (int s = 0; s < 3; s++)
            registered += clSetEventCallback(ev[i], states[s], on_state, (void *)(intptr_t)(i * 4 + states[s])) ==
                          CL_SUCCESS;
    printf("callbacks registered: %d of %d\n", registered, N_CMDS * 3);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clWaitForEvents(N_CMDS, ev));
    CHECK(clFinish(t.q));
    /* Callbacks may run a little after the wait returns: bounded. */
    for (int i = 0; i < 2000 && fired() < N_CMDS * 3; i++) sleep_ms(10);
    for (int i = 0; i < N_CMDS; i++) {
        cl_int st = 1;
        CHECK(clGetEventInfo(ev[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL));
        printf("%s: status %d, callbacks submitted %d running %d complete %d\n", names[i], st,
               __atomic_load_n(&hits[i][CL_SUBMITTED], __ATOMIC_SEQ_CST),
               __atomic_load_n(&hits[i][CL_RUNNING], __ATOMIC_SEQ_CST),
               __atomic_load_n(&hits[i][CL_COMPLETE], __ATOMIC_SEQ_CST));
    }
    printf("callbacks with the wrong state: %d\n", __atomic_load_n(&wrong_state, __ATOMIC_SEQ_CST));
    printf("read buffer: %d %d %d\n", rd[0], rd[1], rd[63]);
    printf("mapped buffer: %d %d %d %d\n", mapped[0], mapped[32], mapped[40], mapped[63]);
    printf("read rect: %d %d %d %d\n", rect_out[0], rect_out[7], rect_out[8], rect_out[15]);
    size_t rp2 = rp_2d;
    int same2 = 1;
    for (int y = 0; y < 4; y++) same2 &= memcmp(m2 + y * rp2, pix2 + y * 32, 32) == 0;
    printf("2D image read equal %d, mapped equal %d\n", memcmp(back2, pix2, sizeof pix2) == 0, same2);
    int same3 = 1;
    for (int zz = 0; zz < 2; zz++)
        for (int y = 0; y < 4; y++) same3 &= memcmp(m3 + zz * sp3 + y * rp3, pix3 + zz * 64 + y * 16, 16) == 0;
    printf("3D image read equal %d, mapped equal %d\n", memcmp(back3, pix3, sizeof pix3) == 0, same3);
    int cout[64], rout[32], uout[20];
    CHECK(clEnqueueUnmapMemObject(t.q, a, mapped, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t.q, um, CL_TRUE, 0, sizeof uout, uout, 0, NULL, NULL));
    printf("written through the map, unmapped behind the gate: %d %d %d\n", uout[0], uout[15], uout[16]);
    CHECK(clEnqueueReadBuffer(t.q, c, CL_TRUE, 0, sizeof cout, cout, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t.q, r, CL_TRUE, 0, sizeof rout, rout, 0, NULL, NULL));
    printf("copied then incremented: %d %d %d\n", cout[0], cout[1], cout[63]);
    printf("written rect: %d %d %d %d\n", rout[16], rout[17], rout[23], rout[24]);
    CHECK(clEnqueueUnmapMemObject(t.q, i2b, m2, 0, NULL, NULL));
    CHECK(clEnqueueUnmapMemObject(t.q, i3, m3, 0, NULL, NULL));
    CHECK(clFinish(t.q));
    for (int i = 0; i < N_CMDS; i++) CHECK(clReleaseEvent(ev[i]));
    CHECK(clReleaseEvent(gate));
    cl_mem mems[] = {a, b, c, r, ib, um, i2, i2b, i3};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++) CHECK(clReleaseMemObject(mems[i]));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    env_done(&t);
    printf("callbacks: done\n");
    return 0;
}
