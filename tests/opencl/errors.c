/* Error paths: every call here fails, and prints its code; the harness
 * checks that the codes match natively and through Wormhole. Checks of
 * handles that PoCL does not validate (forged, wrong-kind and released
 * handles: undefined behaviour natively) run through Wormhole only, on
 * "~" lines, and assert Wormhole's CL_INVALID_* codes. */
#include "common.h"

static const char *src = "__kernel void k(__global int *a, int n) { a[get_global_id(0)] = n; }\n";

static void null_handles(env_t *t) {
    size_t sz;
    cl_int e;
    EXPECT_CODE("mem info NULL", clGetMemObjectInfo(NULL, CL_MEM_SIZE, sizeof sz, &sz, NULL), CL_INVALID_MEM_OBJECT);
    EXPECT_CODE("kernel info NULL", clGetKernelInfo(NULL, CL_KERNEL_NUM_ARGS, sizeof sz, &sz, NULL), CL_INVALID_KERNEL);
    EXPECT_CODE("event info NULL", clGetEventInfo(NULL, CL_EVENT_COMMAND_TYPE, sizeof sz, &sz, NULL), CL_INVALID_EVENT);
    EXPECT_CODE("program info NULL", clGetProgramInfo(NULL, CL_PROGRAM_NUM_DEVICES, sizeof sz, &sz, NULL),
                CL_INVALID_PROGRAM);
    EXPECT_CODE("queue info NULL", clGetCommandQueueInfo(NULL, CL_QUEUE_CONTEXT, sizeof sz, &sz, NULL),
                CL_INVALID_COMMAND_QUEUE);
    EXPECT_CODE("context info NULL", clGetContextInfo(NULL, CL_CONTEXT_NUM_DEVICES, sizeof sz, &sz, NULL),
                CL_INVALID_CONTEXT);
    EXPECT_CODE("sampler info NULL", clGetSamplerInfo(NULL, CL_SAMPLER_CONTEXT, sizeof sz, &sz, NULL),
                CL_INVALID_SAMPLER);
    EXPECT_CODE("device info NULL", clGetDeviceInfo(NULL, CL_DEVICE_NAME, sizeof sz, &sz, NULL), CL_INVALID_DEVICE);
    EXPECT_CODE("release mem NULL", clReleaseMemObject(NULL), CL_INVALID_MEM_OBJECT);
    EXPECT_CODE("retain event NULL", clRetainEvent(NULL), CL_INVALID_EVENT);
    EXPECT_CODE("finish NULL", clFinish(NULL), CL_INVALID_COMMAND_QUEUE);
    int x;
    EXPECT_CODE("read NULL buffer", clEnqueueReadBuffer(t->q, NULL, CL_TRUE, 0, 4, &x, 0, NULL, NULL),
                CL_INVALID_MEM_OBJECT);
    cl_mem m = clCreateBuffer(NULL, CL_MEM_READ_WRITE, 64, NULL, &e);
    EXPECT_CODE("buffer in NULL context", e, CL_INVALID_CONTEXT);
    ASSERT(m == NULL);
    cl_kernel k = clCreateKernel(NULL, "k", &e);
    EXPECT_CODE("kernel from NULL program", e, CL_INVALID_PROGRAM);
    ASSERT(k == NULL);
    cl_command_queue q = clCreateCommandQueue(t->ctx, NULL, 0, &e);
    EXPECT_CODE("queue for NULL device", e, CL_INVALID_DEVICE);
    ASSERT(q == NULL);
}

static void bad_args(env_t *t) {
    cl_int e;
    cl_mem m;
    m = clCreateBuffer(t->ctx, CL_MEM_READ_WRITE, 0, NULL, &e);
    EXPECT_CODE("buffer of size 0", e, CL_INVALID_BUFFER_SIZE);
    cl_ulong max = 0;
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max, &max, NULL));
    m = clCreateBuffer(t->ctx, CL_MEM_READ_WRITE, (size_t)max + 4096, NULL, &e);
    EXPECT_CODE("buffer above max alloc", e, CL_INVALID_BUFFER_SIZE);
    m = clCreateBuffer(t->ctx, CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, 64, NULL, &e);
    EXPECT_CODE("buffer read-only and write-only", e, CL_INVALID_VALUE);
    m = clCreateBuffer(t->ctx, CL_MEM_COPY_HOST_PTR, 64, NULL, &e);
    EXPECT_CODE("copy_host_ptr without pointer", e, CL_INVALID_HOST_PTR);
    int host[16];
    m = clCreateBuffer(t->ctx, CL_MEM_READ_WRITE, 64, host, &e);
    EXPECT_CODE("pointer without host flag", e, CL_INVALID_HOST_PTR);
    m = clCreateBuffer(t->ctx, CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR, 64, host, &e);
    EXPECT_CODE("use_host_ptr with alloc_host_ptr", e, CL_INVALID_VALUE);
    ASSERT(m == NULL);

    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 64, NULL);
    int big[32];
    EXPECT_CODE("read past the end", clEnqueueReadBuffer(t->q, b, CL_TRUE, 32, 64, big, 0, NULL, NULL),
                CL_INVALID_VALUE);
    EXPECT_CODE("write past the end", clEnqueueWriteBuffer(t->q, b, CL_TRUE, 60, 8, big, 0, NULL, NULL),
                CL_INVALID_VALUE);
    EXPECT_CODE("read of a big size", clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, (size_t)1 << 20, big, 0, NULL, NULL),
                CL_INVALID_VALUE);
    /* Beyond the server's allocation limit Wormhole answers
     * CL_OUT_OF_HOST_MEMORY itself (see docs/wormhole-opencl.md). */
    EXPECT_FAIL("~read of a huge size",
                clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, (size_t)1 << 40, big, 0, NULL, NULL));
    EXPECT_CODE("read at a huge offset",
                clEnqueueReadBuffer(t->q, b, CL_TRUE, (size_t)1 << 40, 4, big, 0, NULL, NULL), CL_INVALID_VALUE);
    size_t hz[3] = {0, 0, 0}, rr[3] = {64, 2, 1}, hr[3] = {(size_t)1 << 20, (size_t)1 << 20, 64};
    EXPECT_CODE("read rect past the end",
                clEnqueueReadBufferRect(t->q, b, CL_TRUE, hz, hz, rr, 0, 0, 0, 0, big, 0, NULL, NULL),
                CL_INVALID_VALUE);
    EXPECT_FAIL("~read rect of a huge region",
                clEnqueueReadBufferRect(t->q, b, CL_TRUE, hz, hz, hr, 0, 0, 0, 0, big, 0, NULL, NULL));
    EXPECT_CODE("read into NULL", clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, 4, NULL, 0, NULL, NULL), CL_INVALID_VALUE);
    EXPECT_CODE("write from NULL", clEnqueueWriteBuffer(t->q, b, CL_TRUE, 0, 4, NULL, 0, NULL, NULL),
                CL_INVALID_VALUE);
    PRINT_CODE("read of size 0", clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, 0, big, 0, NULL, NULL));
    EXPECT_CODE("copy overlapping", clEnqueueCopyBuffer(t->q, b, b, 0, 8, 16, 0, NULL, NULL), CL_MEM_COPY_OVERLAP);
    EXPECT_CODE("copy past the end", clEnqueueCopyBuffer(t->q, b, b, 0, 56, 16, 0, NULL, NULL), CL_INVALID_VALUE);
    int pat = 0;
    EXPECT_CODE("fill pattern size 3", clEnqueueFillBuffer(t->q, b, &pat, 3, 0, 12, 0, NULL, NULL), CL_INVALID_VALUE);
    EXPECT_CODE("fill misaligned offset", clEnqueueFillBuffer(t->q, b, &pat, 4, 2, 8, 0, NULL, NULL),
                CL_INVALID_VALUE);
    EXPECT_CODE("fill NULL pattern", clEnqueueFillBuffer(t->q, b, NULL, 4, 0, 8, 0, NULL, NULL), CL_INVALID_VALUE);
    void *p = clEnqueueMapBuffer(t->q, b, CL_TRUE, CL_MAP_READ, 0, 0, 0, NULL, NULL, &e);
    EXPECT_CODE("map of size 0", e, CL_INVALID_VALUE);
    ASSERT(p == NULL);
    p = clEnqueueMapBuffer(t->q, b, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE_INVALIDATE_REGION, 0, 8, 0, NULL, NULL, &e);
    PRINT_CODE("map read with invalidate", e);
    if (p) CHECK(clEnqueueUnmapMemObject(t->q, b, p, 0, NULL, NULL));
    EXPECT_CODE("wait list count without list", clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, 4, big, 1, NULL, NULL),
                CL_INVALID_EVENT_WAIT_LIST);
    cl_event none = NULL;
    EXPECT_CODE("wait list holding NULL", clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, 4, big, 1, &none, NULL),
                CL_INVALID_EVENT_WAIT_LIST);
    EXPECT_CODE("wait for no events", clWaitForEvents(0, NULL), CL_INVALID_VALUE);
    cl_buffer_region r = {0, 32};
    cl_mem sub = clCreateSubBuffer(b, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
    CHECK_ERR(e, "sub");
    cl_mem sub2 = clCreateSubBuffer(sub, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
    EXPECT_CODE("sub-buffer of a sub-buffer", e, CL_INVALID_MEM_OBJECT);
    ASSERT(sub2 == NULL);
    sub2 = clCreateSubBuffer(b, CL_MEM_READ_WRITE, 0x9999, &r, &e);
    EXPECT_CODE("sub-buffer bad create type", e, CL_INVALID_VALUE);
    sub2 = clCreateSubBuffer(b, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, NULL, &e);
    EXPECT_CODE("sub-buffer without region", e, CL_INVALID_VALUE);
    CHECK(clReleaseMemObject(sub));

    /* Info queries. */
    size_t sz;
    char small[2];
    EXPECT_CODE("unknown mem info", clGetMemObjectInfo(b, 0x7777, sizeof sz, &sz, NULL), CL_INVALID_VALUE);
    EXPECT_CODE("mem info too small", clGetMemObjectInfo(b, CL_MEM_SIZE, 4, &sz, NULL), CL_INVALID_VALUE);
    EXPECT_CODE("device name too small", clGetDeviceInfo(t->device, CL_DEVICE_NAME, sizeof small, small, NULL),
                CL_INVALID_VALUE);
    EXPECT_CODE("unknown device info", clGetDeviceInfo(t->device, 0x7777, sizeof sz, &sz, NULL), CL_INVALID_VALUE);
    EXPECT_CODE("unknown platform info", clGetPlatformInfo(t->platform, 0x7777, sizeof sz, &sz, NULL),
                CL_INVALID_VALUE);
    EXPECT_CODE("platform name too small", clGetPlatformInfo(t->platform, CL_PLATFORM_VERSION, 2, small, NULL),
                CL_INVALID_VALUE);
    cl_device_id d;
    PRINT_CODE("bad device type", clGetDeviceIDs(t->platform, 0x4000, 1, &d, NULL));
    cl_uint nd = 0;
    PRINT_CODE("accelerators", clGetDeviceIDs(t->platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &d, &nd));
    EXPECT_CODE("device ids with nowhere to put them", clGetDeviceIDs(t->platform, CL_DEVICE_TYPE_ALL, 0, NULL, NULL),
                CL_INVALID_VALUE);
    cl_command_queue q = clCreateCommandQueue(t->ctx, t->device, 0x1000, &e);
    EXPECT_CODE("queue with unknown property", e, CL_INVALID_VALUE);
    ASSERT(q == NULL);
    cl_context c = clCreateContext(NULL, 0, NULL, NULL, NULL, &e);
    EXPECT_CODE("context without devices", e, CL_INVALID_VALUE);
    ASSERT(c == NULL);
    CHECK(clReleaseMemObject(b));
}

static void programs_and_kernels(env_t *t) {
    cl_int e;
    cl_program p = clCreateProgramWithSource(t->ctx, 0, &src, NULL, &e);
    EXPECT_CODE("program from 0 strings", e, CL_INVALID_VALUE);
    p = build(t, src, NULL);
    cl_kernel k = clCreateKernel(p, "no_such_kernel", &e);
    EXPECT_CODE("unknown kernel name", e, CL_INVALID_KERNEL_NAME);
    ASSERT(k == NULL);
    k = clCreateKernel(p, NULL, &e);
    EXPECT_CODE("NULL kernel name", e, CL_INVALID_VALUE);
    k = kernel(p, "k");
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 4096, NULL);
    int n = 1;
    EXPECT_CODE("arg index 2 of 2", clSetKernelArg(k, 2, sizeof n, &n), CL_INVALID_ARG_INDEX);
    EXPECT_CODE("buffer arg of size 4", clSetKernelArg(k, 0, 4, &b), CL_INVALID_ARG_SIZE);
    EXPECT_CODE("int arg of size 8", clSetKernelArg(k, 1, 8, &n), CL_INVALID_ARG_SIZE);
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    CHECK(clSetKernelArg(k, 1, sizeof n, &n));
    size_t g[3] = {64, 1, 1}, l[3] = {3, 1, 1}, huge[3] = {1 << 20, 1, 1}, zero[3] = {0, 0, 0};
    EXPECT_CODE("work dim 0", clEnqueueNDRangeKernel(t->q, k, 0, NULL, g, NULL, 0, NULL, NULL),
                CL_INVALID_WORK_DIMENSION);
    EXPECT_CODE("work dim 4", clEnqueueNDRangeKernel(t->q, k, 4, NULL, g, NULL, 0, NULL, NULL),
                CL_INVALID_WORK_DIMENSION);
    PRINT_CODE("global size NULL", clEnqueueNDRangeKernel(t->q, k, 1, NULL, NULL, NULL, 0, NULL, NULL));
    PRINT_CODE("global size 0", clEnqueueNDRangeKernel(t->q, k, 1, NULL, zero, NULL, 0, NULL, NULL));
    PRINT_CODE("local size not dividing global",
               clEnqueueNDRangeKernel(t->q, k, 1, NULL, g, l, 0, NULL, NULL));
    EXPECT_FAIL("local size above the maximum",
                clEnqueueNDRangeKernel(t->q, k, 1, NULL, huge, huge, 0, NULL, NULL));
    CHECK(clFinish(t->q));
    /* A kernel whose program is released stays usable. */
    CHECK(clReleaseProgram(p));
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, g, NULL, 0, NULL, NULL));
    CHECK(clFinish(t->q));
    printf("kernel outlives its program: ok\n");
    /* A buffer from another context. */
    cl_context other = clCreateContext(NULL, 1, &t->device, NULL, NULL, &e);
    CHECK_ERR(e, "other context");
    cl_mem ob = buffer(&(env_t){.ctx = other}, CL_MEM_READ_WRITE, 64, NULL);
    int x;
    EXPECT_CODE("read a buffer of another context", clEnqueueReadBuffer(t->q, ob, CL_TRUE, 0, 4, &x, 0, NULL, NULL),
                CL_INVALID_CONTEXT);
    CHECK(clReleaseMemObject(ob));
    CHECK(clReleaseContext(other));
    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseKernel(k));
}

/* User data without a callback is an error the library reports (it did not
 * reach the library through Wormhole before: found with piglit); so is a
 * NULL in a list of buffers, also once alike calls succeeded and are
 * batched. */
static void user_data_and_lists(env_t *t) {
    cl_int e;
    int ud = 0;
    cl_context c = clCreateContext(NULL, 1, &t->device, NULL, &ud, &e);
    EXPECT_CODE("context: user data without a callback", e, CL_INVALID_VALUE);
    ASSERT(c == NULL);
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)t->platform, 0};
    c = clCreateContextFromType(props, CL_DEVICE_TYPE_ALL, NULL, &ud, &e);
    EXPECT_CODE("context from type: user data without a callback", e, CL_INVALID_VALUE);
    ASSERT(c == NULL);
    cl_program p = clCreateProgramWithSource(t->ctx, 1, &src, NULL, &e);
    CHECK_ERR(e, "program");
    EXPECT_CODE("build: user data without a callback", clBuildProgram(p, 1, &t->device, "", NULL, &ud),
                CL_INVALID_VALUE);
    EXPECT_CODE("compile: user data without a callback",
                clCompileProgram(p, 1, &t->device, "", 0, NULL, NULL, NULL, &ud), CL_INVALID_VALUE);
    CHECK(clCompileProgram(p, 1, &t->device, "", 0, NULL, NULL, NULL, NULL));
    cl_program l = clLinkProgram(t->ctx, 1, &t->device, "", 1, &p, NULL, &ud, &e);
    EXPECT_CODE("link: user data without a callback", e, CL_INVALID_VALUE);
    ASSERT(l == NULL);
    CHECK(clReleaseProgram(p));
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 64, NULL);
    for (int i = 0; i < 3; i++) CHECK(clEnqueueMigrateMemObjects(t->q, 1, &b, 0, 0, NULL, NULL));
    cl_mem none = NULL;
    EXPECT_CODE("migrate a NULL buffer after alike migrations",
                clEnqueueMigrateMemObjects(t->q, 1, &none, 0, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    cl_mem two[2] = {b, NULL};
    CHECK(clEnqueueMigrateMemObjects(t->q, 1, two, 0, 0, NULL, NULL));
    EXPECT_CODE("migrate a list with a NULL second",
                clEnqueueMigrateMemObjects(t->q, 2, two, 0, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    CHECK(clFinish(t->q));
    CHECK(clReleaseMemObject(b));
}

/* Handles PoCL does not validate, through Wormhole only. */
static void wormhole_only(env_t *t, int remoted) {
    if (!remoted) return;
    size_t sz;
    cl_int e;
    /* PoCL aborts on a device-side queue (so not natively): the tenant
     * answers with the API's codes instead, and lives on. */
    cl_command_queue dq = clCreateCommandQueue(t->ctx, t->device, CL_QUEUE_ON_DEVICE | CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &e);
    EXPECT_CODE("~on-device queue", e, CL_INVALID_QUEUE_PROPERTIES);
    ASSERT(dq == NULL);
    cl_queue_properties qp[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_ON_DEVICE | CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
    dq = clCreateCommandQueueWithProperties(t->ctx, t->device, qp, &e);
    EXPECT_CODE("~on-device queue with properties", e, CL_INVALID_QUEUE_PROPERTIES);
    dq = clCreateCommandQueue(t->ctx, t->device, 0xFFFFFFFF, &e);
    EXPECT_CODE("~on-device queue with unknown bits", e, CL_INVALID_VALUE);
    CHECK(clFinish(t->q));
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 64, NULL);
    static struct {
        void *dispatch;
        char junk[256];
    } fake;
    fake.dispatch = *(void **)b; /* passes the ICD loader */
    EXPECT_CODE("~forged mem", clGetMemObjectInfo((cl_mem)&fake, CL_MEM_SIZE, sizeof sz, &sz, NULL),
                CL_INVALID_MEM_OBJECT);
    EXPECT_CODE("~forged kernel release", clReleaseKernel((cl_kernel)&fake), CL_INVALID_KERNEL);
    EXPECT_CODE("~queue as mem", clGetMemObjectInfo((cl_mem)t->q, CL_MEM_SIZE, sizeof sz, &sz, NULL),
                CL_INVALID_MEM_OBJECT);
    EXPECT_CODE("~mem as queue", clFinish((cl_command_queue)b), CL_INVALID_COMMAND_QUEUE);
    EXPECT_CODE("~context as mem in a read",
                clEnqueueReadBuffer(t->q, (cl_mem)t->ctx, CL_TRUE, 0, 4, &sz, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    cl_event fe = (cl_event)&fake;
    EXPECT_CODE("~forged event in a wait list", clEnqueueMarkerWithWaitList(t->q, 1, &fe, NULL), CL_INVALID_EVENT);
    /* PoCL dereferences these (a crash natively). */
    cl_program np = clCreateProgramWithSource(t->ctx, 1, NULL, NULL, &e);
    EXPECT_CODE("~program from NULL strings", e, CL_INVALID_VALUE);
    ASSERT(np == NULL);
    const char *null_entry[2] = {src, NULL};
    np = clCreateProgramWithSource(t->ctx, 2, null_entry, NULL, &e);
    EXPECT_CODE("~program from a NULL string", e, CL_INVALID_VALUE);
    ASSERT(np == NULL);
    cl_mem sub_fake = (cl_mem)&fake;
    cl_program p = build(t, src, NULL);
    cl_kernel k = kernel(p, "k");
    /* A forged handle as a buffer argument is passed as bytes natively;
     * Wormhole cannot translate it. */
    e = clSetKernelArg(k, 0, sizeof sub_fake, &sub_fake);
    printf("~forged buffer kernel arg: %d\n", e);
    ASSERT(e != CL_SUCCESS);
    /* Released handles. */
    CHECK(clReleaseMemObject(b));
    EXPECT_CODE("~released mem", clGetMemObjectInfo(b, CL_MEM_SIZE, sizeof sz, &sz, NULL), CL_INVALID_MEM_OBJECT);
    EXPECT_CODE("~released mem release", clReleaseMemObject(b), CL_INVALID_MEM_OBJECT);
    EXPECT_CODE("~released mem as kernel arg", clSetKernelArg(k, 0, sizeof b, &b), CL_INVALID_MEM_OBJECT);
    CHECK(clReleaseKernel(k));
    EXPECT_CODE("~released kernel", clSetKernelArg(k, 1, sizeof e, &e), CL_INVALID_KERNEL);
    CHECK(clReleaseProgram(p));
    EXPECT_CODE("~released program", clCreateKernel(p, "k", &e) == NULL ? e : 0, CL_INVALID_PROGRAM);
    cl_event ev;
    CHECK(clEnqueueMarkerWithWaitList(t->q, 0, NULL, &ev));
    CHECK(clReleaseEvent(ev));
    EXPECT_CODE("~released event wait", clWaitForEvents(1, &ev), CL_INVALID_EVENT);
}

/* Through Wormhole, calls on buffers created alike (context, flags, size)
 * are batched alike once one has succeeded; whatever makes a call on another
 * buffer fail must still fail at once: a copy onto itself, a range past the
 * end of a smaller buffer, a buffer the host may only read. */
static void alike_buffers(env_t *t) {
    cl_mem a = buffer(t, CL_MEM_READ_WRITE, 64, NULL), c = buffer(t, CL_MEM_READ_WRITE, 64, NULL);
    cl_mem d = buffer(t, CL_MEM_READ_WRITE, 64, NULL), small = buffer(t, CL_MEM_READ_WRITE, 48, NULL);
    cl_mem ro = buffer(t, CL_MEM_READ_WRITE | CL_MEM_HOST_READ_ONLY, 64, NULL);
    int v[8] = {0};
    for (int i = 0; i < 2; i++) {
        CHECK(clEnqueueCopyBuffer(t->q, a, c, 0, 8, 16, 0, NULL, NULL));
        EXPECT_CODE("copy onto itself after copies onto a twin",
                    clEnqueueCopyBuffer(t->q, d, d, 0, 8, 16, 0, NULL, NULL), CL_MEM_COPY_OVERLAP);
        CHECK(clEnqueueWriteBuffer(t->q, a, CL_FALSE, 32, 32, v, 0, NULL, NULL));
        EXPECT_CODE("write past the end of a smaller buffer",
                    clEnqueueWriteBuffer(t->q, small, CL_FALSE, 32, 32, v, 0, NULL, NULL), CL_INVALID_VALUE);
        EXPECT_CODE("write to a buffer the host may only read",
                    clEnqueueWriteBuffer(t->q, ro, CL_FALSE, 32, 32, v, 0, NULL, NULL), CL_INVALID_OPERATION);
    }
    /* A buffer with a sub-buffer overlaps it; its twin does not. */
    cl_buffer_region r = {0, 32};
    cl_int e;
    cl_mem sub = clCreateSubBuffer(d, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
    CHECK_ERR(e, "sub-buffer");
    for (int i = 0; i < 2; i++) {
        CHECK(clEnqueueCopyBuffer(t->q, c, sub, 0, 0, 16, 0, NULL, NULL));
        PRINT_CODE("copy from a buffer into its own sub-buffer, overlapping",
                   clEnqueueCopyBuffer(t->q, d, sub, 0, 0, 16, 0, NULL, NULL));
    }
    CHECK(clFinish(t->q));
    cl_mem all[] = {a, c, d, small, ro, sub};
    for (int i = 0; i < 6; i++) CHECK(clReleaseMemObject(all[i]));

    /* Creations alike to ones that succeeded may be batched; these differ
     * in what can fail, so each still fails at once. */
    cl_ulong max = 0;
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max, &max, NULL));
    int host[16] = {0};
    for (int i = 0; i < 2; i++) {
        cl_mem ok = buffer(t, CL_MEM_READ_WRITE, 64 + i, NULL);
        cl_mem m = clCreateBuffer(t->ctx, CL_MEM_READ_WRITE, 0, NULL, &e);
        EXPECT_CODE("buffer of size 0 after alike ones", e, CL_INVALID_BUFFER_SIZE);
        ASSERT(m == NULL);
        m = clCreateBuffer(t->ctx, CL_MEM_READ_WRITE, (size_t)max + 1, NULL, &e);
        EXPECT_CODE("buffer above max alloc after alike ones", e, CL_INVALID_BUFFER_SIZE);
        ASSERT(m == NULL);
        m = clCreateBuffer(t->ctx, CL_MEM_READ_WRITE, 64, host, &e);
        EXPECT_CODE("pointer without host flag after alike buffers", e, CL_INVALID_HOST_PTR);
        ASSERT(m == NULL);
        CHECK(clReleaseMemObject(ok));
    }
    /* A batched creation gives a buffer that works at once, with its size. */
    int w[16], got[16] = {0};
    for (int i = 0; i < 16; i++) w[i] = 7 * i + 1;
    for (int i = 0; i < 3; i++) {
        cl_mem m = buffer(t, CL_MEM_READ_WRITE, sizeof w - i, NULL);
        size_t sz = 0;
        CHECK(clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof sz, &sz, NULL));
        ASSERT(sz == sizeof w - i);
        CHECK(clEnqueueWriteBuffer(t->q, m, CL_FALSE, 0, 32, w, 0, NULL, NULL));
        CHECK(clEnqueueReadBuffer(t->q, m, CL_TRUE, 0, 32, got, 0, NULL, NULL));
        ASSERT(memcmp(w, got, 32) == 0);
        CHECK(clReleaseMemObject(m));
    }
    printf("alike creations: checked\n");
}

/* Kernels of one program and name are batched alike; a fresh one whose
 * arguments are not all set, or a kernel of another name, still fails at
 * once. */
static void alike_kernels(env_t *t) {
    const char *two = "__kernel void k(__global int *a, int n) { a[get_global_id(0)] = n; }\n"
                      "__kernel void s(int n, __global int *a) { a[0] = n; }\n";
    cl_program p = build(t, two, NULL);
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 256, NULL);
    int n = 5, got[4] = {0};
    size_t g = 4;
    for (int i = 0; i < 2; i++) {
        cl_kernel k = kernel(p, "k");
        CHECK(clSetKernelArg(k, 0, sizeof b, &b));
        CHECK(clSetKernelArg(k, 1, sizeof n, &n));
        CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &g, NULL, 0, NULL, NULL));
        CHECK(clReleaseKernel(k));
        cl_kernel fresh = kernel(p, "k");
        EXPECT_CODE("launch of an alike kernel with no arguments set",
                    clEnqueueNDRangeKernel(t->q, fresh, 1, NULL, &g, NULL, 0, NULL, NULL),
                    CL_INVALID_KERNEL_ARGS);
        CHECK(clSetKernelArg(fresh, 0, sizeof b, &b));
        EXPECT_CODE("launch of an alike kernel with one argument of two set",
                    clEnqueueNDRangeKernel(t->q, fresh, 1, NULL, &g, NULL, 0, NULL, NULL),
                    CL_INVALID_KERNEL_ARGS);
        CHECK(clReleaseKernel(fresh));
        cl_kernel other = kernel(p, "s");
        EXPECT_CODE("buffer as the int argument of a kernel of another name",
                    clSetKernelArg(other, 0, sizeof b, &b), CL_INVALID_ARG_SIZE);
        CHECK(clReleaseKernel(other));
        cl_int e;
        cl_kernel none = clCreateKernel(p, "not_in_the_program", &e);
        EXPECT_CODE("a kernel name not in the program, after alike creations", e, CL_INVALID_KERNEL_NAME);
        ASSERT(none == NULL);
        n++;
    }
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL));
    CHECK(clFinish(t->q));
    printf("alike kernels: wrote %d %d %d %d\n", got[0], got[1], got[2], got[3]);
    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseProgram(p));
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    char name[256];
    CHECK(clGetPlatformInfo(t.platform, CL_PLATFORM_NAME, sizeof name, name, NULL));
    int remoted = strncmp(name, "Wormhole", 8) == 0;
    EXPECT_CODE("platform ids nowhere", clGetPlatformIDs(0, NULL, NULL), CL_INVALID_VALUE);
    null_handles(&t);
    bad_args(&t);
    programs_and_kernels(&t);
    user_data_and_lists(&t);
    wormhole_only(&t, remoted);
    alike_buffers(&t);
    alike_kernels(&t);
    env_done(&t);
    printf("errors: done\n");
    return 0;
}
