/* Maps of images created with CL_MEM_USE_HOST_PTR return host_ptr plus the
 * origin's offset (with the host's row and slice pitches), as the
 * specification says and programs rely on: read through such a mapping,
 * written through it and read back, with CL_MEM_HOST_READ_ONLY and
 * CL_MEM_HOST_WRITE_ONLY, padded rows, a 3D image, and a map gated on a
 * user event. */
#include "common.h"

static size_t image_param(cl_mem img, cl_image_info p) {
    size_t v = 0;
    CHECK(clGetImageInfo(img, p, sizeof v, &v, NULL));
    return v;
}

static cl_mem image2d(env_t *t, cl_mem_flags flags, size_t w, size_t h, size_t pitch, void *host) {
    cl_image_desc d = image_desc(CL_MEM_OBJECT_IMAGE2D, w, h, 0);
    d.image_row_pitch = pitch;
    cl_int e;
    cl_mem m = clCreateImage(t->ctx, flags, &rgba8, &d, host, &e);
    CHECK_ERR(e, "clCreateImage (USE_HOST_PTR)");
    return m;
}

/* Reads an image back through a buffer (a host-write-only image cannot be
 * read by the host directly). */
static void read_back(env_t *t, cl_mem img, size_t w, size_t h, size_t depth, unsigned char *out) {
    size_t n = w * h * depth * 4, z[3] = {0, 0, 0}, all[3] = {w, h, depth};
    cl_mem b = buffer(t, CL_MEM_READ_WRITE, n, NULL);
    CHECK(clEnqueueCopyImageToBuffer(t->q, img, b, z, all, 0, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(t->q, b, CL_TRUE, 0, n, out, 0, NULL, NULL));
    CHECK(clReleaseMemObject(b));
}

static void read_only_padded(env_t *t) {
    /* 10x8 pixels in rows of 64 bytes (24 bytes of padding each). */
    enum { W = 10, H = 8, PITCH = 64 };
    unsigned char *host = malloc(PITCH * H);
    ASSERT(host != NULL);
    for (int i = 0; i < PITCH * H; i++) host[i] = (unsigned char)(i * 13 + 1);
    cl_mem img = image2d(t, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR | CL_MEM_HOST_READ_ONLY, W, H, PITCH, host);
    printf("host-read-only image: row pitch %zu\n", image_param(img, CL_IMAGE_ROW_PITCH));
    size_t org[3] = {2, 3, 0}, reg[3] = {4, 2, 1}, rp = 0, sp = 99;
    cl_int e;
    unsigned char *m = clEnqueueMapImage(t->q, img, CL_TRUE, CL_MAP_READ, org, reg, &rp, &sp, 0, NULL, NULL, &e);
    EXPECT_CODE("map of a host-read-only image", e, CL_SUCCESS);
    printf("host-read-only image map: at host_ptr + %ld, row pitch %zu, slice pitch %zu\n", (long)(m - host), rp, sp);
    int same = 1;
    for (int y = 0; y < 2; y++) same &= memcmp(m + y * rp, host + (3 + y) * PITCH + 2 * 4, 16) == 0;
    printf("host-read-only image map: values %d %d %d, as the host's %d\n", m[0], m[15], m[rp + 15], same);
    void *w = clEnqueueMapImage(t->q, img, CL_TRUE, CL_MAP_WRITE, org, reg, &rp, &sp, 0, NULL, NULL, &e);
    EXPECT_CODE("write map of a host-read-only image", e, CL_INVALID_OPERATION);
    printf("write map of a host-read-only image: NULL %d\n", w == NULL);
    CHECK(clEnqueueUnmapMemObject(t->q, img, m, 0, NULL, NULL));
    CHECK(clFinish(t->q));
    CHECK(clReleaseMemObject(img));
    free(host);
}

static void write_only(env_t *t) {
    enum { W = 8, H = 4 };
    unsigned char *host = calloc(W * H, 4);
    unsigned char back[W * H * 4];
    ASSERT(host != NULL);
    cl_mem img = image2d(t, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR | CL_MEM_HOST_WRITE_ONLY, W, H, 0, host);
    size_t org[3] = {3, 1, 0}, reg[3] = {2, 2, 1}, rp = 0;
    cl_int e;
    unsigned char *m = clEnqueueMapImage(t->q, img, CL_TRUE, CL_MAP_WRITE, org, reg, &rp, NULL, 0, NULL, NULL, &e);
    EXPECT_CODE("map of a host-write-only image", e, CL_SUCCESS);
    printf("host-write-only image map: at host_ptr + %ld, row pitch %zu\n", (long)(m - host), rp);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 8; x++) m[y * rp + x] = (unsigned char)(50 + y * 8 + x);
    CHECK(clEnqueueUnmapMemObject(t->q, img, m, 0, NULL, NULL));
    read_back(t, img, W, H, 1, back);
    printf("host-write-only image: pixel (3,1) %d %d %d %d, (4,2) %d, (2,1) %d, sum %u\n", back[(1 * W + 3) * 4],
           back[(1 * W + 3) * 4 + 1], back[(1 * W + 3) * 4 + 2], back[(1 * W + 3) * 4 + 3], back[(2 * W + 4) * 4 + 3],
           back[(1 * W + 2) * 4], fnv(back, sizeof back));
    printf("host-write-only image: host memory has the writes %d\n", host[(1 * W + 3) * 4] == 50);
    void *r = clEnqueueMapImage(t->q, img, CL_TRUE, CL_MAP_READ, org, reg, &rp, NULL, 0, NULL, NULL, &e);
    EXPECT_CODE("read map of a host-write-only image", e, CL_INVALID_OPERATION);
    printf("read map of a host-write-only image: NULL %d\n", r == NULL);
    CHECK(clReleaseMemObject(img));
    free(host);
}

static void three_d(env_t *t) {
    /* 4x3x2 pixels, rows of 20 bytes, slices of 80. */
    enum { W = 4, H = 3, D = 2, ROW = 20, SLICE = 80 };
    unsigned char *host = malloc(SLICE * D);
    unsigned char back[W * H * D * 4];
    ASSERT(host != NULL);
    for (int i = 0; i < SLICE * D; i++) host[i] = (unsigned char)(i * 3 + 2);
    cl_image_desc d = image_desc(CL_MEM_OBJECT_IMAGE3D, W, H, D);
    d.image_row_pitch = ROW;
    d.image_slice_pitch = SLICE;
    cl_int e;
    cl_mem img = clCreateImage(t->ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, &rgba8, &d, host, &e);
    CHECK_ERR(e, "3D USE_HOST_PTR image");
    printf("3D image: row pitch %zu, slice pitch %zu\n", image_param(img, CL_IMAGE_ROW_PITCH),
           image_param(img, CL_IMAGE_SLICE_PITCH));
    size_t org[3] = {1, 1, 1}, reg[3] = {2, 2, 1}, rp = 0, sp = 0;
    unsigned char *m =
        clEnqueueMapImage(t->q, img, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, org, reg, &rp, &sp, 0, NULL, NULL, &e);
    EXPECT_CODE("map of a 3D USE_HOST_PTR image", e, CL_SUCCESS);
    printf("3D image map: at host_ptr + %ld, row pitch %zu, slice pitch %zu, values %d %d\n", (long)(m - host), rp, sp,
           m[0], m[rp + 7]);
    m[0] = 251;
    m[rp + 7] = 252;
    CHECK(clEnqueueUnmapMemObject(t->q, img, m, 0, NULL, NULL));
    read_back(t, img, W, H, D, back);
    printf("3D image after the map: (1,1,1) %d, (2,2,1) alpha %d, sum %u\n", back[(1 * H * W + 1 * W + 1) * 4],
           back[(1 * H * W + 2 * W + 2) * 4 + 3], fnv(back, sizeof back));
    CHECK(clReleaseMemObject(img));
    free(host);
}

/* A map that overwrites a window (WRITE_INVALIDATE_REGION) of a plain
 * image and of a USE_HOST_PTR one: the pixels around the window keep their
 * values (the mapping's rows lie between them). */
static void invalidated_window(env_t *t, int use_host) {
    enum { W = 8, H = 4 };
    unsigned char *host = malloc(W * H * 4), back[W * H * 4];
    ASSERT(host != NULL);
    for (int i = 0; i < W * H * 4; i++) host[i] = (unsigned char)(i * 5 + 3);
    cl_mem img = image2d(t, CL_MEM_READ_WRITE | (use_host ? CL_MEM_USE_HOST_PTR : CL_MEM_COPY_HOST_PTR), W, H, 0,
                         host);
    size_t org[3] = {3, 1, 0}, reg[3] = {2, 2, 1}, rp = 0;
    cl_int e;
    unsigned char *m = clEnqueueMapImage(t->q, img, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, org, reg, &rp, NULL, 0,
                                         NULL, NULL, &e);
    EXPECT_CODE("write-invalidate map of a window", e, CL_SUCCESS);
    for (int y = 0; y < 2; y++) memset(m + y * rp, 0xee, 8);
    CHECK(clEnqueueUnmapMemObject(t->q, img, m, 0, NULL, NULL));
    read_back(t, img, W, H, 1, back);
    int changed = 0, window = 0;
    for (int i = 0; i < W * H * 4; i++) {
        int x = (i / 4) % W, y = (i / 4) / W, inside = x >= 3 && x < 5 && y >= 1 && y < 3;
        unsigned char was = (unsigned char)(i * 5 + 3);
        if (inside) window += back[i] == 0xee;
        else changed += back[i] != was;
    }
    printf("write-invalidate window (%s): window written %d of 16, other bytes changed %d\n",
           use_host ? "USE_HOST_PTR" : "plain", window, changed);
    CHECK(clReleaseMemObject(img));
    free(host);
}

static void gated(env_t *t) {
    enum { W = 8, H = 4 };
    unsigned char *host = malloc(W * H * 4);
    ASSERT(host != NULL);
    for (int i = 0; i < W * H * 4; i++) host[i] = (unsigned char)(i + 9);
    cl_mem img = image2d(t, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, W, H, 0, host);
    cl_int e;
    cl_event gate = clCreateUserEvent(t->ctx, &e), mev = NULL;
    CHECK_ERR(e, "gate");
    size_t org[3] = {1, 2, 0}, reg[3] = {3, 2, 1}, rp = 0;
    unsigned char *m = clEnqueueMapImage(t->q, img, CL_FALSE, CL_MAP_READ, org, reg, &rp, NULL, 1, &gate, &mev, &e);
    EXPECT_CODE("gated map of a USE_HOST_PTR image", e, CL_SUCCESS);
    printf("gated USE_HOST_PTR image map: at host_ptr + %ld, row pitch %zu\n", (long)(m - host), rp);
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clWaitForEvents(1, &mev));
    printf("gated USE_HOST_PTR image map: values %d %d\n", m[0], m[rp + 11]);
    CHECK(clEnqueueUnmapMemObject(t->q, img, m, 0, NULL, NULL));
    CHECK(clFinish(t->q));
    CHECK(clReleaseEvent(mev));
    CHECK(clReleaseEvent(gate));
    CHECK(clReleaseMemObject(img));
    free(host);
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    watchdog(60);
    read_only_padded(&t);
    write_only(&t);
    three_d(&t);
    invalidated_window(&t, 0);
    invalidated_window(&t, 1);
    gated(&t);
    env_done(&t);
    printf("image_host_ptr: done\n");
    return 0;
}
