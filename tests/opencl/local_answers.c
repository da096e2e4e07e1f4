/* Calls the Wormhole client may answer without asking the server must give
 * the answer the device would: entry points it does not forward (pipes),
 * creations it answers once alike ones succeeded (a kernel of a program
 * built again with other options), and transfers it completes later (their
 * argument errors come from the call, their events say what they are). */
#include "common.h"

static const char *src = "#ifdef WITH_K\n"
                         "__kernel void k(__global int *a) { a[0] = 1; }\n"
                         "#endif\n"
                         "#ifdef WIDE\n"
                         "typedef long T;\n"
                         "#else\n"
                         "typedef int T;\n"
                         "#endif\n"
                         "__kernel void s(T v, __global T *o) { o[get_global_id(0)] = v; }\n"
                         "#ifdef BROKEN\n"
                         "#error broken on purpose\n"
                         "#endif\n";

static void pipes_and_il(env_t *t) {
    cl_bool pipes = CL_TRUE;
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_PIPE_SUPPORT, sizeof pipes, &pipes, NULL));
    printf("device pipe support: %d\n", pipes);
    cl_int e = 12345;
    cl_mem p = clCreatePipe(t->ctx, 0, 4, 16, NULL, &e);
    printf("clCreatePipe: %d, NULL %d\n", e, p == NULL);
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 64, NULL);
    cl_uint v = 0;
    PRINT_CODE("clGetPipeInfo of a buffer", clGetPipeInfo(b, CL_PIPE_PACKET_SIZE, sizeof v, &v, NULL));
    CHECK(clReleaseMemObject(b));
    char il[256] = "";
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_IL_VERSION, sizeof il, il, NULL));
    printf("device IL versions: '%s'\n", il);
    unsigned junk[16] = {0x07230203, 0x00010000};
    e = 12345;
    cl_program ilp = clCreateProgramWithIL(t->ctx, junk, sizeof junk, &e);
    printf("clCreateProgramWithIL of junk: %d, NULL %d\n", e, ilp == NULL);
    if (ilp) CHECK(clReleaseProgram(ilp));
    cl_program sp = build(t, src, NULL);
    int one = 1;
    PRINT_CODE("specialization constant of a program from source",
               clSetProgramSpecializationConstant(sp, 0, sizeof one, &one));
    CHECK(clReleaseProgram(sp));
}

static void rebuilt(env_t *t) {
    cl_int e;
    cl_program p = build(t, src, "-DWITH_K -DWIDE");
    /* Twice: the second is answered without the server's word. */
    for (int i = 0; i < 2; i++) {
        cl_kernel k = clCreateKernel(p, "k", &e);
        printf("kernel k, built with it (%d): %d\n", i, e);
        if (k) CHECK(clReleaseKernel(k));
    }
    cl_long wide = 7;
    for (int i = 0; i < 2; i++) {
        cl_kernel s = kernel(p, "s");
        PRINT_CODE("8-byte argument of the wide kernel", clSetKernelArg(s, 0, sizeof wide, &wide));
        CHECK(clReleaseKernel(s));
    }
    /* Built again without k and with T an int: the same calls must fail. */
    CHECK(clBuildProgram(p, 1, &t->device, NULL, NULL, NULL));
    cl_kernel k = clCreateKernel(p, "k", &e);
    printf("kernel k, built without it: %d, NULL %d\n", e, k == NULL);
    cl_kernel s = kernel(p, "s");
    PRINT_CODE("8-byte argument of the narrow kernel", clSetKernelArg(s, 0, sizeof wide, &wide));
    cl_int narrow = 5;
    PRINT_CODE("4-byte argument of the narrow kernel", clSetKernelArg(s, 0, sizeof narrow, &narrow));
    CHECK(clReleaseKernel(s));
    /* A build that fails leaves no kernels to create. */
    e = clBuildProgram(p, 1, &t->device, "-DBROKEN", NULL, NULL);
    printf("broken build: %d\n", e);
    k = clCreateKernel(p, "s", &e);
    printf("kernel s after a failed build: %d, NULL %d\n", e, k == NULL);
    if (k) CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
}

static void describe(const char *label, cl_event ev, cl_command_queue q) {
    cl_command_type ty = 0;
    cl_command_queue eq = NULL;
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof ty, &ty, NULL));
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof eq, &eq, NULL));
    cl_command_type small;
    cl_int tiny = clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, 2, &small, NULL);
    size_t n = 0;
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, 0, NULL, &n));
    printf("%s: command type %#x (size %zu, into 2 bytes: %d), its queue %d\n", label, (unsigned)ty, n, tiny,
           eq == q);
}

static void gated(env_t *t) {
    cl_int e;
    cl_event gate = clCreateUserEvent(t->ctx, &e);
    CHECK_ERR(e, "gate");
    char host[256] = {0};
    cl_mem wo = buffer(t, CL_MEM_READ_WRITE | CL_MEM_HOST_WRITE_ONLY, 256, NULL);
    cl_mem ro = buffer(t, CL_MEM_READ_WRITE | CL_MEM_HOST_READ_ONLY, 256, NULL);
    cl_mem rw = buffer(t, CL_MEM_READ_WRITE, 256, NULL);
    PRINT_CODE("gated read of a host-write-only buffer",
               clEnqueueReadBuffer(t->q, wo, CL_FALSE, 0, 16, host, 1, &gate, NULL));
    PRINT_CODE("gated write of a host-read-only buffer",
               clEnqueueWriteBuffer(t->q, ro, CL_FALSE, 0, 16, host, 1, &gate, NULL));
    size_t bo[3] = {0, 0, 0}, reg[3] = {4, 2, 1};
    PRINT_CODE("gated rect read of a host-write-only buffer",
               clEnqueueReadBufferRect(t->q, wo, CL_FALSE, bo, bo, reg, 16, 0, 16, 0, host, 1, &gate, NULL));
    /* Another context's buffer. */
    cl_context other = clCreateContext(NULL, 1, &t->device, NULL, NULL, &e);
    CHECK_ERR(e, "second context");
    cl_mem elsewhere = clCreateBuffer(other, CL_MEM_READ_WRITE, 256, NULL, &e);
    CHECK_ERR(e, "buffer of the second context");
    PRINT_CODE("gated read of another context's buffer",
               clEnqueueReadBuffer(t->q, elsewhere, CL_FALSE, 0, 16, host, 1, &gate, NULL));
    /* Images: out of bounds, and a host-write-only one. */
    cl_image_desc d = image_desc(CL_MEM_OBJECT_IMAGE2D, 8, 4, 0);
    cl_mem img = clCreateImage(t->ctx, CL_MEM_READ_WRITE, &rgba8, &d, NULL, &e);
    CHECK_ERR(e, "image");
    cl_mem wimg = clCreateImage(t->ctx, CL_MEM_READ_WRITE | CL_MEM_HOST_WRITE_ONLY, &rgba8, &d, NULL, &e);
    CHECK_ERR(e, "host-write-only image");
    size_t past[3] = {6, 0, 0}, far[3] = {0, 3, 0}, r41[3] = {4, 1, 1}, r12[3] = {1, 2, 1}, z[3] = {0, 0, 0};
    PRINT_CODE("gated image read past the right edge",
               clEnqueueReadImage(t->q, img, CL_FALSE, past, r41, 0, 0, host, 1, &gate, NULL));
    PRINT_CODE("gated image write past the bottom edge",
               clEnqueueWriteImage(t->q, img, CL_FALSE, far, r12, 0, 0, host, 1, &gate, NULL));
    PRINT_CODE("gated image read of a host-write-only image",
               clEnqueueReadImage(t->q, wimg, CL_FALSE, z, r41, 0, 0, host, 1, &gate, NULL));
    /* What the events of gated transfers are. */
    cl_event rd, wr, rr, ir, iw;
    char in[64] = {1, 2, 3}, out[64], pix[64] = {0};
    CHECK(clEnqueueReadBuffer(t->q, rw, CL_FALSE, 0, 16, out, 1, &gate, &rd));
    CHECK(clEnqueueWriteBuffer(t->q, rw, CL_FALSE, 32, 16, in, 1, &gate, &wr));
    CHECK(clEnqueueReadBufferRect(t->q, rw, CL_FALSE, bo, bo, reg, 16, 0, 16, 0, out, 1, &gate, &rr));
    CHECK(clEnqueueWriteImage(t->q, img, CL_FALSE, z, r41, 0, 0, pix, 1, &gate, &iw));
    CHECK(clEnqueueReadImage(t->q, img, CL_FALSE, z, r41, 0, 0, pix, 1, &gate, &ir));
    describe("gated read", rd, t->q);
    describe("gated write", wr, t->q);
    describe("gated rect read", rr, t->q);
    describe("gated image write", iw, t->q);
    describe("gated image read", ir, t->q);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    cl_event all[] = {rd, wr, rr, iw, ir};
    CHECK(clWaitForEvents(5, all));
    for (int i = 0; i < 5; i++) CHECK(clReleaseEvent(all[i]));
    CHECK(clFinish(t->q));
    CHECK(clReleaseEvent(gate));
    cl_mem mems[] = {wo, ro, rw, elsewhere, img, wimg};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++) CHECK(clReleaseMemObject(mems[i]));
    CHECK(clReleaseContext(other));
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    watchdog(60);
    pipes_and_il(&t);
    rebuilt(&t);
    gated(&t);
    env_done(&t);
    printf("local_answers: done\n");
    return 0;
}
