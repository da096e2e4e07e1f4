/* Buffers: create/read/write/copy, host-pointer flags, fill, sub-buffers,
 * rectangular transfers, maps and migration. */
#include "common.h"

static const char *src =
    "__kernel void add(__global int *a, int v) {\n"
    "  a[get_global_id(0)] += v;\n"
    "}\n";

static void basic(env_t *t) {
    int in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = i * 3 + 1;
    cl_mem a = buffer(t, CL_MEM_READ_WRITE, sizeof in, NULL);
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, sizeof in, NULL);
    CHECK(clEnqueueWriteBuffer(t->q, a, CL_TRUE, 0, sizeof in, in, 0, NULL, NULL));
    CHECK(clEnqueueCopyBuffer(t->q, a, b, 8 * sizeof(int), 0, 16 * sizeof(int), 0, NULL, NULL));
    memset(out, 0, sizeof out);
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, 16 * sizeof(int), out, 0, NULL, NULL));
    for (int i = 0; i < 16; i++) ASSERT(out[i] == in[i + 8]);
    /* A read at an offset, non-blocking then clFinish. */
    memset(out, 0, sizeof out);
    CHECK(clEnqueueReadBuffer(t->q, a, CL_FALSE, 4 * sizeof(int), 8 * sizeof(int), out, 0, NULL, NULL));
    CHECK(clFinish(t->q));
    for (int i = 0; i < 8; i++) ASSERT(out[i] == in[i + 4]);
    /* Partial write at an offset. */
    int patch[3] = {-1, -2, -3};
    CHECK(clEnqueueWriteBuffer(t->q, a, CL_FALSE, 10 * sizeof(int), sizeof patch, patch, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, a, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    ASSERT(out[9] == in[9] && out[10] == -1 && out[12] == -3 && out[13] == in[13]);
    printf("basic: hash %08x\n", fnv(out, sizeof out));

    size_t sz = 0;
    cl_mem_flags fl = 0;
    cl_mem_object_type ty = 0;
    cl_context c = NULL;
    cl_uint rc = 0;
    CHECK(clGetMemObjectInfo(a, CL_MEM_SIZE, sizeof sz, &sz, NULL));
    CHECK(clGetMemObjectInfo(a, CL_MEM_FLAGS, sizeof fl, &fl, NULL));
    CHECK(clGetMemObjectInfo(a, CL_MEM_TYPE, sizeof ty, &ty, NULL));
    CHECK(clGetMemObjectInfo(a, CL_MEM_CONTEXT, sizeof c, &c, NULL));
    CHECK(clGetMemObjectInfo(a, CL_MEM_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    ASSERT(c == t->ctx);
    /* Reference counts are "immediately stale" (PoCL's commands hold some). */
    ASSERT(rc >= 1);
    printf("info: size %zu flags %lx type %x\n", sz, (unsigned long)fl, ty);
    printf("~info: refcount %u\n", rc);
    CHECK(clReleaseMemObject(a));
    CHECK(clReleaseMemObject(b));
}

static void host_ptrs(env_t *t, cl_kernel add) {
    int init[32];
    for (int i = 0; i < 32; i++) init[i] = 100 + i;
    /* COPY_HOST_PTR: later changes to the host array do not matter. */
    cl_mem c = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof init, init);
    init[0] = -5;
    int out[32];
    CHECK(clEnqueueReadBuffer(t->q, c, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    ASSERT(out[0] == 100 && out[31] == 131);
    void *hp = NULL;
    CHECK(clGetMemObjectInfo(c, CL_MEM_HOST_PTR, sizeof hp, &hp, NULL));
    printf("copy_host_ptr: ok, host_ptr null %d\n", hp == NULL);
    CHECK(clReleaseMemObject(c));

    /* USE_HOST_PTR: CL_MEM_HOST_PTR is the application's pointer, a map
     * returns a pointer into it and shows the kernel's results. */
    int *host = malloc(64 * sizeof(int));
    for (int i = 0; i < 64; i++) host[i] = i;
    cl_mem u = buffer(t, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, 64 * sizeof(int), host);
    CHECK(clGetMemObjectInfo(u, CL_MEM_HOST_PTR, sizeof hp, &hp, NULL));
    printf("use_host_ptr: host_ptr matches %d\n", hp == (void *)host);
    cl_mem_flags uf;
    CHECK(clGetMemObjectInfo(u, CL_MEM_FLAGS, sizeof uf, &uf, NULL));
    printf("use_host_ptr: flags %lx\n", (unsigned long)uf);
    int v = 1000;
    CHECK(clSetKernelArg(add, 0, sizeof u, &u));
    CHECK(clSetKernelArg(add, 1, sizeof v, &v));
    size_t g = 64;
    CHECK(clEnqueueNDRangeKernel(t->q, add, 1, NULL, &g, NULL, 0, NULL, NULL));
    cl_int e;
    int *m = clEnqueueMapBuffer(t->q, u, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 16 * sizeof(int),
                                32 * sizeof(int), 0, NULL, NULL, &e);
    CHECK_ERR(e, "map use_host_ptr");
    printf("use_host_ptr: map at host_ptr+offset %d\n", m == host + 16);
    ASSERT(m[0] == 1016 && m[31] == 1047);
    m[0] = 7; /* written through the mapping */
    CHECK(clEnqueueUnmapMemObject(t->q, u, m, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, u, CL_TRUE, 16 * sizeof(int), sizeof(int), &v, 0, NULL, NULL));
    printf("use_host_ptr: written through map %d\n", v);
    /* A sub-buffer of a USE_HOST_PTR buffer: its host pointer and maps
     * lie inside the parent's host memory. */
    cl_uint align_bits = 0;
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL));
    size_t align = align_bits / 8;
    int *big = aligned_alloc(align, 2 * align);
    for (size_t i = 0; i < 2 * align / sizeof(int); i++) big[i] = (int)i;
    cl_mem ub = buffer(t, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, 2 * align, big);
    cl_buffer_region reg = {align, align};
    cl_mem us = clCreateSubBuffer(ub, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &reg, &e);
    CHECK_ERR(e, "sub-buffer of use_host_ptr");
    CHECK(clGetMemObjectInfo(us, CL_MEM_HOST_PTR, sizeof hp, &hp, NULL));
    printf("use_host_ptr sub: host_ptr is parent's + origin %d\n", hp == (char *)big + align);
    CHECK(clGetMemObjectInfo(us, CL_MEM_FLAGS, sizeof uf, &uf, NULL));
    printf("use_host_ptr sub: flags %lx\n", (unsigned long)uf);
    int *sm = clEnqueueMapBuffer(t->q, us, CL_TRUE, CL_MAP_READ, 8, 8, 0, NULL, NULL, &e);
    CHECK_ERR(e, "map use_host_ptr sub");
    printf("use_host_ptr sub: map inside parent's memory %d, value ok %d\n", (char *)sm == (char *)big + align + 8,
           sm[0] == (int)((align + 8) / sizeof(int)));
    CHECK(clEnqueueUnmapMemObject(t->q, us, sm, 0, NULL, NULL));
    CHECK(clReleaseMemObject(us));
    CHECK(clReleaseMemObject(ub));
    free(big);
    CHECK(clReleaseMemObject(u));
    free(host);

    /* ALLOC_HOST_PTR (with COPY_HOST_PTR) */
    cl_mem ah = buffer(t, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR,
                       sizeof init, init);
    int *p = clEnqueueMapBuffer(t->q, ah, CL_TRUE, CL_MAP_READ, 0, sizeof init, 0, NULL, NULL, &e);
    CHECK_ERR(e, "map alloc_host_ptr");
    ASSERT(p[0] == -5 && p[5] == 105);
    CHECK(clEnqueueUnmapMemObject(t->q, ah, p, 0, NULL, NULL));
    cl_mem_flags fl;
    CHECK(clGetMemObjectInfo(ah, CL_MEM_FLAGS, sizeof fl, &fl, NULL));
    printf("alloc_host_ptr: flags %lx\n", (unsigned long)fl);
    CHECK(clReleaseMemObject(ah));
}

static void fill(env_t *t) {
    unsigned char out[64];
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, sizeof out, NULL);
    unsigned char z = 0xee;
    CHECK(clEnqueueFillBuffer(t->q, b, &z, 1, 0, sizeof out, 0, NULL, NULL));
    unsigned int pat = 0x11223344;
    CHECK(clEnqueueFillBuffer(t->q, b, &pat, 4, 8, 16, 0, NULL, NULL));
    cl_float4 f4 = {{1.5f, -2.0f, 3.25f, 0.0f}};
    CHECK(clEnqueueFillBuffer(t->q, b, &f4, sizeof f4, 32, 32, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    dump("fill", out, sizeof out);
    CHECK(clReleaseMemObject(b));
}

static void sub_buffers(env_t *t, cl_kernel add) {
    cl_uint align_bits = 0;
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL));
    size_t align = align_bits / 8;
    size_t n = align * 4 / sizeof(int);
    int *data = malloc(n * sizeof(int));
    for (size_t i = 0; i < n; i++) data[i] = (int)i;
    cl_mem parent = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(int), data);
    cl_buffer_region r = {align, align};
    cl_int e;
    cl_mem sub = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e);
    CHECK_ERR(e, "clCreateSubBuffer");
    cl_mem assoc = NULL;
    size_t off = 0, sz = 0;
    CHECK(clGetMemObjectInfo(sub, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof assoc, &assoc, NULL));
    CHECK(clGetMemObjectInfo(sub, CL_MEM_OFFSET, sizeof off, &off, NULL));
    CHECK(clGetMemObjectInfo(sub, CL_MEM_SIZE, sizeof sz, &sz, NULL));
    printf("sub: associated is parent %d, offset is align %d, size is align %d\n", assoc == parent,
           off == align, sz == align);
    CHECK(clGetMemObjectInfo(parent, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof assoc, &assoc, NULL));
    printf("parent: associated null %d\n", assoc == NULL);
    int v = 1 << 20;
    CHECK(clSetKernelArg(add, 0, sizeof sub, &sub));
    CHECK(clSetKernelArg(add, 1, sizeof v, &v));
    size_t g = align / sizeof(int);
    CHECK(clEnqueueNDRangeKernel(t->q, add, 1, NULL, &g, NULL, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, parent, CL_TRUE, 0, n * sizeof(int), data, 0, NULL, NULL));
    size_t first = align / sizeof(int);
    ASSERT(data[first - 1] == (int)first - 1);
    ASSERT(data[first] == (int)first + (1 << 20));
    ASSERT(data[2 * first - 1] == (int)(2 * first - 1) + (1 << 20));
    ASSERT(data[2 * first] == (int)(2 * first));
    printf("sub: kernel wrote only its region\n");
    /* Read through the sub-buffer. */
    int x = 0;
    CHECK(clEnqueueReadBuffer(t->q, sub, CL_TRUE, 0, sizeof x, &x, 0, NULL, NULL));
    ASSERT(x == (int)first + (1 << 20));
    /* A misaligned sub-buffer and one out of range. */
    cl_buffer_region bad = {1, 4};
    cl_mem s2 = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &bad, &e);
    printf("sub misaligned: %d null %d\n", e, s2 == NULL);
    cl_buffer_region oob = {0, n * sizeof(int) + align};
    s2 = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &oob, &e);
    printf("sub out of range: %d null %d\n", e, s2 == NULL);
    CHECK(clReleaseMemObject(sub));
    CHECK(clReleaseMemObject(parent));
    free(data);
}

static void rects(env_t *t) {
    /* A 16x8x2 byte buffer with row pitch 16, slice pitch 128. */
    enum { W = 16, H = 8, D = 2 };
    unsigned char host[W * H * D], out[W * H * D];
    for (int i = 0; i < W * H * D; i++) host[i] = (unsigned char)i;
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, sizeof host, NULL);
    unsigned char zero[W * H * D];
    memset(zero, 0, sizeof zero);
    CHECK(clEnqueueWriteBuffer(t->q, b, CL_TRUE, 0, sizeof zero, zero, 0, NULL, NULL));
    /* Write a 4x3x2 box from host origin (2,1,0) (host pitches 20/200) to
     * buffer origin (5,2,0). */
    unsigned char hsrc[400];
    for (int i = 0; i < 400; i++) hsrc[i] = (unsigned char)(i * 7 + 1);
    size_t bo[3] = {5, 2, 0}, ho[3] = {2, 1, 0}, reg[3] = {4, 3, 2};
    CHECK(clEnqueueWriteBufferRect(t->q, b, CL_TRUE, bo, ho, reg, W, W * H, 20, 200, hsrc, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    printf("write_rect: hash %08x\n", fnv(out, sizeof out));
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 4; x++)
                ASSERT(out[(z)*W * H + (y + 2) * W + x + 5] == hsrc[z * 200 + (y + 1) * 20 + x + 2]);
    /* Read a box back into a host layout with a different pitch and origin. */
    unsigned char hdst[300];
    memset(hdst, 0xaa, sizeof hdst);
    size_t bo2[3] = {4, 2, 0}, ho2[3] = {1, 2, 1}, reg2[3] = {6, 3, 1};
    CHECK(clEnqueueReadBufferRect(t->q, b, CL_TRUE, bo2, ho2, reg2, W, W * H, 10, 100, hdst, 0, NULL, NULL));
    printf("read_rect: hash %08x\n", fnv(hdst, sizeof hdst));
    ASSERT(hdst[100 + 20 + 1] == out[2 * W + 4] && hdst[0] == 0xaa);
    /* Copy a box within the device, to a second buffer with other pitches. */
    cl_mem c = buffer(t, CL_MEM_READ_WRITE, 512, NULL);
    unsigned char fill0 = 0;
    CHECK(clEnqueueFillBuffer(t->q, c, &fill0, 1, 0, 512, 0, NULL, NULL));
    size_t so[3] = {4, 1, 0}, dso[3] = {3, 3, 1}, reg3[3] = {8, 4, 2};
    CHECK(clEnqueueCopyBufferRect(t->q, b, c, so, dso, reg3, W, W * H, 12, 96, 0, NULL, NULL));
    unsigned char cout[512];
    CHECK(clEnqueueReadBuffer(t->q, c, CL_TRUE, 0, sizeof cout, cout, 0, NULL, NULL));
    printf("copy_rect: hash %08x\n", fnv(cout, sizeof cout));
    ASSERT(cout[96 + 3 * 12 + 3] == out[1 * W + 4]);
    /* Zero pitches take the defaults. */
    size_t z0[3] = {0, 0, 0}, reg4[3] = {16, 2, 1};
    unsigned char small[32];
    CHECK(clEnqueueReadBufferRect(t->q, b, CL_TRUE, z0, z0, reg4, 0, 0, 0, 0, small, 0, NULL, NULL));
    ASSERT(memcmp(small, out, 32) == 0);
    /* Out of range box. */
    size_t bigo2[3] = {0, 0, 2};
    cl_int e = clEnqueueReadBufferRect(t->q, b, CL_TRUE, bigo2, z0, reg4, W, W * H, 0, 0, small, 0, NULL, NULL);
    EXPECT_CODE("read_rect past last slice", e, CL_INVALID_VALUE);
    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseMemObject(c));
}

static void maps(env_t *t) {
    float init[256];
    for (int i = 0; i < 256; i++) init[i] = i * 0.5f;
    cl_mem b = buffer(t, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof init, init);
    cl_int e;
    cl_event ev = NULL;
    float *r = clEnqueueMapBuffer(t->q, b, CL_FALSE, CL_MAP_READ, 64, 128, 0, NULL, &ev, &e);
    CHECK_ERR(e, "map read");
    CHECK(clWaitForEvents(1, &ev));
    cl_command_type ct;
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof ct, &ct, NULL));
    printf("map: event type %x\n", ct);
    CHECK(clReleaseEvent(ev));
    ASSERT(r[0] == 8.0f && r[31] == 23.5f);
    /* Two mappings of the same buffer at once. */
    float *w = clEnqueueMapBuffer(t->q, b, CL_TRUE, CL_MAP_WRITE, 0, 16, 0, NULL, NULL, &e);
    CHECK_ERR(e, "map write");
    for (int i = 0; i < 4; i++) w[i] = -1.0f - i;
    CHECK(clEnqueueUnmapMemObject(t->q, b, w, 0, NULL, NULL));
    CHECK(clEnqueueUnmapMemObject(t->q, b, r, 0, NULL, NULL));
    float out[256];
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    ASSERT(out[0] == -1.0f && out[3] == -4.0f && out[4] == 2.0f);
    /* WRITE_INVALIDATE_REGION: whatever we write lands. */
    float *wi = clEnqueueMapBuffer(t->q, b, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 512, 512, 0, NULL, NULL, &e);
    CHECK_ERR(e, "map invalidate");
    for (int i = 0; i < 128; i++) wi[i] = 42.0f + i;
    cl_event uev;
    CHECK(clEnqueueUnmapMemObject(t->q, b, wi, 0, NULL, &uev));
    CHECK(clWaitForEvents(1, &uev));
    CHECK(clGetEventInfo(uev, CL_EVENT_COMMAND_TYPE, sizeof ct, &ct, NULL));
    printf("unmap: event type %x\n", ct);
    CHECK(clReleaseEvent(uev));
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    ASSERT(out[127] == 63.5f && out[128] == 42.0f && out[255] == 169.0f);
    printf("maps: hash %08x\n", fnv(out, sizeof out));
    cl_uint mc = 99;
    CHECK(clGetMemObjectInfo(b, CL_MEM_MAP_COUNT, sizeof mc, &mc, NULL));
    printf("maps: map count after unmaps %u\n", mc);
    /* Unmapping a pointer that is not mapped. */
    EXPECT_CODE("unmap unknown pointer", clEnqueueUnmapMemObject(t->q, b, out, 0, NULL, NULL), CL_INVALID_VALUE);
    /* A map out of range. */
    void *bad = clEnqueueMapBuffer(t->q, b, CL_TRUE, CL_MAP_READ, 1000, 100, 0, NULL, NULL, &e);
    printf("map out of range: %d null %d\n", e, bad == NULL);
    CHECK(clReleaseMemObject(b));
}

static void migrate(env_t *t) {
    cl_mem a = buffer(t, CL_MEM_READ_WRITE, 256, NULL);
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, 256, NULL);
    cl_mem both[2] = {a, b};
    cl_event ev;
    CHECK(clEnqueueMigrateMemObjects(t->q, 2, both, 0, 0, NULL, &ev));
    CHECK(clEnqueueMigrateMemObjects(t->q, 1, &a, CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 1, &ev, NULL));
    CHECK(clWaitForEvents(1, &ev));
    cl_command_type ct;
    CHECK(clGetEventInfo(ev, CL_EVENT_COMMAND_TYPE, sizeof ct, &ct, NULL));
    printf("migrate: event type %x\n", ct);
    EXPECT_CODE("migrate no objects", clEnqueueMigrateMemObjects(t->q, 0, NULL, 0, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clReleaseEvent(ev));
    CHECK(clReleaseMemObject(a));
    CHECK(clReleaseMemObject(b));
}

/* Transfers on a queue that has finished everything, as libraries make
 * them (write and finish, launch, read and finish): data moves both ways
 * around kernels, and what the library refuses is still refused. */
static void after_finish(env_t *t, cl_kernel add) {
    enum { N = 64 };
    int h[N], got[N];
    cl_mem b[3];
    for (int i = 0; i < 3; i++) b[i] = buffer(t, CL_MEM_READ_WRITE, sizeof h + i * 4, NULL);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < N; j++) h[j] = 1000 * round + 100 * i + j;
            CHECK(clEnqueueWriteBuffer(t->q, b[i], CL_FALSE, 0, sizeof h, h, 0, NULL, NULL));
            CHECK(clFinish(t->q));
        }
        /* A partial write at an offset, then a kernel that reads it. */
        int patch[4] = {-1, -2, -3, -4};
        CHECK(clEnqueueWriteBuffer(t->q, b[1], CL_TRUE, 8 * sizeof(int), sizeof patch, patch, 0, NULL, NULL));
        int v = 7;
        size_t g = N;
        CHECK(clSetKernelArg(add, 0, sizeof b[1], &b[1]));
        CHECK(clSetKernelArg(add, 1, sizeof v, &v));
        CHECK(clEnqueueNDRangeKernel(t->q, add, 1, NULL, &g, NULL, 0, NULL, NULL));
        CHECK(clFinish(t->q));
        for (int i = 0; i < 3; i++) {
            memset(got, 0, sizeof got);
            CHECK(clEnqueueReadBuffer(t->q, b[i], CL_FALSE, 0, sizeof got, got, 0, NULL, NULL));
            CHECK(clFinish(t->q));
            printf("after finish, round %d, buffer %d: %d %d %d %d\n", round, i, got[0], got[8], got[11], got[N - 1]);
        }
    }
    /* Refused as natively, after a finish: a range past the end, a buffer
     * the host may not write or read, a buffer of another context. */
    CHECK(clFinish(t->q));
    EXPECT_CODE("write past the end after a finish",
                clEnqueueWriteBuffer(t->q, b[0], CL_FALSE, 8, sizeof h, h, 0, NULL, NULL), CL_INVALID_VALUE);
    CHECK(clFinish(t->q));
    EXPECT_CODE("read past the end after a finish",
                clEnqueueReadBuffer(t->q, b[0], CL_TRUE, 8, sizeof h, got, 0, NULL, NULL), CL_INVALID_VALUE);
    cl_mem ro = buffer(t, CL_MEM_READ_WRITE | CL_MEM_HOST_READ_ONLY, sizeof h, NULL);
    cl_mem wo = buffer(t, CL_MEM_READ_WRITE | CL_MEM_HOST_WRITE_ONLY, sizeof h, NULL);
    CHECK(clFinish(t->q));
    EXPECT_CODE("write to a host-read-only buffer after a finish",
                clEnqueueWriteBuffer(t->q, ro, CL_FALSE, 0, sizeof h, h, 0, NULL, NULL), CL_INVALID_OPERATION);
    CHECK(clFinish(t->q));
    EXPECT_CODE("read from a host-write-only buffer after a finish",
                clEnqueueReadBuffer(t->q, wo, CL_TRUE, 0, sizeof h, got, 0, NULL, NULL), CL_INVALID_OPERATION);
    cl_int e;
    cl_context other = clCreateContext(NULL, 1, &t->device, NULL, NULL, &e);
    CHECK_ERR(e, "other context");
    cl_mem ob = buffer(&(env_t){.ctx = other}, CL_MEM_READ_WRITE, sizeof h, NULL);
    CHECK(clFinish(t->q));
    EXPECT_CODE("write to a buffer of another context after a finish",
                clEnqueueWriteBuffer(t->q, ob, CL_FALSE, 0, sizeof h, h, 0, NULL, NULL), CL_INVALID_CONTEXT);
    CHECK(clReleaseMemObject(ob));
    CHECK(clReleaseContext(other));
    CHECK(clReleaseMemObject(ro));
    CHECK(clReleaseMemObject(wo));
    for (int i = 0; i < 3; i++) CHECK(clReleaseMemObject(b[i]));
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    cl_program p = build(&t, src, NULL);
    cl_kernel add = kernel(p, "add");
    basic(&t);
    host_ptrs(&t, add);
    fill(&t);
    sub_buffers(&t, add);
    rects(&t);
    maps(&t);
    migrate(&t);
    after_finish(&t, add);
    CHECK(clReleaseKernel(add));
    CHECK(clReleaseProgram(p));
    env_done(&t);
    printf("buffers: done\n");
    return 0;
}
