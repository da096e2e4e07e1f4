/* Images: formats, creation of every dimensionality (and the deprecated
 * 2D/3D calls), transfers, copies to and from buffers, maps, info queries
 * and samplers. */
#include "common.h"

static const char *src =
    "__constant sampler_t nearest = CLK_NORMALIZED_COORDS_FALSE |\n"
    "    CLK_ADDRESS_CLAMP_TO_EDGE | CLK_FILTER_NEAREST;\n"
    "__kernel void sample(read_only image2d_t img, sampler_t s,\n"
    "                     __global float4 *out, int w) {\n"
    "  int x = get_global_id(0), y = get_global_id(1);\n"
    "  out[y * w + x] = read_imagef(img, s, (float2)(x + 0.5f, y + 0.5f));\n"
    "}\n"
    "__kernel void invert(read_only image2d_t in, write_only image2d_t out) {\n"
    "  int2 p = (int2)(get_global_id(0), get_global_id(1));\n"
    "  uint4 v = read_imageui(in, nearest, p);\n"
    "  write_imageui(out, p, (uint4)(255) - v);\n"
    "}\n";

static int has_format(const cl_image_format *f, cl_uint n, cl_channel_order o, cl_channel_type ty) {
    for (cl_uint i = 0; i < n; i++)
        if (f[i].image_channel_order == o && f[i].image_channel_data_type == ty) return 1;
    return 0;
}

static void formats(env_t *t) {
    cl_mem_object_type types[] = {CL_MEM_OBJECT_IMAGE1D, CL_MEM_OBJECT_IMAGE2D, CL_MEM_OBJECT_IMAGE3D,
                                  CL_MEM_OBJECT_IMAGE2D_ARRAY};
    for (int i = 0; i < 4; i++) {
        cl_uint n = 0;
        CHECK(clGetSupportedImageFormats(t->ctx, CL_MEM_READ_WRITE, types[i], 0, NULL, &n));
        cl_image_format *f = calloc(n ? n : 1, sizeof *f);
        cl_uint n2 = 0;
        CHECK(clGetSupportedImageFormats(t->ctx, CL_MEM_READ_WRITE, types[i], n, f, &n2));
        ASSERT(n == n2 && n > 0);
        ASSERT(has_format(f, n, CL_RGBA, CL_UNORM_INT8) && has_format(f, n, CL_RGBA, CL_FLOAT));
        printf("formats %x: %u, hash %08x\n", types[i], n, fnv(f, n * sizeof *f));
        free(f);
    }
    /* A short array: only that many are written. */
    cl_image_format two[3];
    memset(two, 0x5a, sizeof two);
    CHECK(clGetSupportedImageFormats(t->ctx, CL_MEM_READ_ONLY, CL_MEM_OBJECT_IMAGE2D, 2, two, NULL));
    printf("formats short: third untouched %d\n", two[2].image_channel_order == 0x5a5a5a5a);
}

static void image_info(cl_mem img, const char *label) {
    cl_image_format f;
    size_t elem, row, slice, w, h, d, arr;
    cl_mem_object_type ty;
    CHECK(clGetImageInfo(img, CL_IMAGE_FORMAT, sizeof f, &f, NULL));
    CHECK(clGetImageInfo(img, CL_IMAGE_ELEMENT_SIZE, sizeof elem, &elem, NULL));
    CHECK(clGetImageInfo(img, CL_IMAGE_ROW_PITCH, sizeof row, &row, NULL));
    CHECK(clGetImageInfo(img, CL_IMAGE_SLICE_PITCH, sizeof slice, &slice, NULL));
    CHECK(clGetImageInfo(img, CL_IMAGE_WIDTH, sizeof w, &w, NULL));
    CHECK(clGetImageInfo(img, CL_IMAGE_HEIGHT, sizeof h, &h, NULL));
    CHECK(clGetImageInfo(img, CL_IMAGE_DEPTH, sizeof d, &d, NULL));
    CHECK(clGetImageInfo(img, CL_IMAGE_ARRAY_SIZE, sizeof arr, &arr, NULL));
    CHECK(clGetMemObjectInfo(img, CL_MEM_TYPE, sizeof ty, &ty, NULL));
    cl_mem buf = (cl_mem)1;
    CHECK(clGetImageInfo(img, CL_IMAGE_BUFFER, sizeof buf, &buf, NULL));
    printf("%s: type %x format %x/%x elem %zu w %zu h %zu d %zu array %zu buffer null %d\n", label, ty,
           f.image_channel_order, f.image_channel_data_type, elem, w, h, d, arr, buf == NULL);
    printf("~%s: row pitch %zu slice pitch %zu\n", label, row, slice);
}

static cl_mem make(env_t *t, cl_mem_object_type ty, size_t w, size_t h, size_t d, size_t arr, void *host) {
    cl_image_desc desc = image_desc(ty, w, h, d);
    desc.image_array_size = arr;
    cl_int e;
    cl_mem m = clCreateImage(t->ctx, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), &rgba8, &desc, host, &e);
    CHECK_ERR(e, "clCreateImage");
    return m;
}

static void dims(env_t *t) {
    unsigned char host[8 * 4 * 3 * 4];
    for (size_t i = 0; i < sizeof host; i++) host[i] = (unsigned char)(i * 5);
    cl_mem i1 = make(t, CL_MEM_OBJECT_IMAGE1D, 8, 0, 0, 0, host);
    cl_mem i2 = make(t, CL_MEM_OBJECT_IMAGE2D, 8, 4, 0, 0, host);
    cl_mem i3 = make(t, CL_MEM_OBJECT_IMAGE3D, 8, 4, 3, 0, host);
    cl_mem ia = make(t, CL_MEM_OBJECT_IMAGE2D_ARRAY, 8, 4, 0, 3, host);
    cl_mem i1a = make(t, CL_MEM_OBJECT_IMAGE1D_ARRAY, 8, 0, 0, 4, host);
    image_info(i1, "1d");
    image_info(i2, "2d");
    image_info(i3, "3d");
    image_info(ia, "2darray");
    image_info(i1a, "1darray");
    unsigned char out[sizeof host];
    size_t o[3] = {0, 0, 0};
    size_t r3[3] = {8, 4, 3};
    memset(out, 0, sizeof out);
    CHECK(clEnqueueReadImage(t->q, i3, CL_TRUE, o, r3, 0, 0, out, 0, NULL, NULL));
    ASSERT(memcmp(out, host, sizeof host) == 0);
    memset(out, 0, sizeof out);
    CHECK(clEnqueueReadImage(t->q, ia, CL_TRUE, o, r3, 0, 0, out, 0, NULL, NULL));
    ASSERT(memcmp(out, host, sizeof host) == 0);
    size_t r1a[3] = {8, 4, 1};
    memset(out, 0, sizeof out);
    CHECK(clEnqueueReadImage(t->q, i1a, CL_TRUE, o, r1a, 0, 0, out, 0, NULL, NULL));
    ASSERT(memcmp(out, host, 8 * 4 * 4) == 0);
    size_t r1[3] = {8, 1, 1};
    memset(out, 0, sizeof out);
    CHECK(clEnqueueReadImage(t->q, i1, CL_TRUE, o, r1, 0, 0, out, 0, NULL, NULL));
    ASSERT(memcmp(out, host, 32) == 0);
    printf("dims: read back ok\n");

    /* The deprecated calls. */
    cl_image_format f = {CL_RGBA, CL_UNSIGNED_INT8};
    cl_int e;
    cl_mem d2 = clCreateImage2D(t->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &f, 8, 4, 0, host, &e);
    CHECK_ERR(e, "clCreateImage2D");
    cl_mem d3 = clCreateImage3D(t->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &f, 8, 4, 3, 0, 0, host, &e);
    CHECK_ERR(e, "clCreateImage3D");
    image_info(d2, "create2d");
    image_info(d3, "create3d");
    /* A host pointer with a padded row pitch (40 bytes for 32 used). */
    unsigned char padded[40 * 4];
    for (size_t i = 0; i < sizeof padded; i++) padded[i] = (unsigned char)(i ^ 0x3c);
    cl_mem pd = clCreateImage2D(t->ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &f, 8, 4, 40, padded, &e);
    CHECK_ERR(e, "clCreateImage2D pitched");
    size_t r2[3] = {8, 4, 1};
    CHECK(clEnqueueReadImage(t->q, pd, CL_TRUE, o, r2, 0, 0, out, 0, NULL, NULL));
    for (int y = 0; y < 4; y++) ASSERT(memcmp(out + y * 32, padded + y * 40, 32) == 0);
    /* Read into a padded host layout: the padding is left alone. */
    unsigned char back[40 * 4];
    memset(back, 0xcc, sizeof back);
    CHECK(clEnqueueReadImage(t->q, pd, CL_TRUE, o, r2, 40, 0, back, 0, NULL, NULL));
    for (int y = 0; y < 4; y++) {
        ASSERT(memcmp(back + y * 40, padded + y * 40, 32) == 0);
        if (y < 3) ASSERT(back[y * 40 + 35] == 0xcc);
    }
    printf("pitched: ok\n");
    /* USE_HOST_PTR image: flags, host pointer, and a map inside it. */
    unsigned char *uh = malloc(8 * 4 * 4);
    memcpy(uh, host, 8 * 4 * 4);
    cl_mem ui = clCreateImage2D(t->ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, &f, 8, 4, 0, uh, &e);
    CHECK_ERR(e, "use_host_ptr image");
    cl_mem_flags uf;
    void *hp = NULL;
    CHECK(clGetMemObjectInfo(ui, CL_MEM_FLAGS, sizeof uf, &uf, NULL));
    CHECK(clGetMemObjectInfo(ui, CL_MEM_HOST_PTR, sizeof hp, &hp, NULL));
    printf("use_host_ptr image: flags %lx host_ptr matches %d\n", (unsigned long)uf, hp == (void *)uh);
    size_t mo[3] = {1, 1, 0}, mr[3] = {2, 2, 1}, rp = 0;
    unsigned char *mp = clEnqueueMapImage(t->q, ui, CL_TRUE, CL_MAP_READ, mo, mr, &rp, NULL, 0, NULL, NULL, &e);
    CHECK_ERR(e, "map use_host_ptr image");
    /* Inside the application's memory, at the origin's offset. */
    printf("use_host_ptr image: map inside host memory %d\n", mp == uh + 32 + 4);
    printf("use_host_ptr image: map value ok %d\n", mp[0] == uh[36]);
    printf("use_host_ptr image: map row pitch %zu\n", rp);
    CHECK(clEnqueueUnmapMemObject(t->q, ui, mp, 0, NULL, NULL));
    CHECK(clReleaseMemObject(ui));
    free(uh);
    /* Invalid format / size. */
    cl_image_format badf = {0x1234, CL_UNSIGNED_INT8};
    cl_mem bad = clCreateImage2D(t->ctx, CL_MEM_READ_WRITE, &badf, 8, 4, 0, NULL, &e);
    printf("bad format: %d null %d\n", e, bad == NULL);
    bad = clCreateImage2D(t->ctx, CL_MEM_READ_WRITE, &f, 0, 4, 0, NULL, &e);
    printf("zero width: %d null %d\n", e, bad == NULL);
    cl_mem all[] = {i1, i2, i3, ia, i1a, d2, d3, pd};
    for (int i = 0; i < 8; i++) CHECK(clReleaseMemObject(all[i]));
}

static void transfers(env_t *t) {
    cl_image_format f = {CL_RGBA, CL_FLOAT};
    cl_int e;
    cl_mem a = clCreateImage2D(t->ctx, CL_MEM_READ_WRITE, &f, 16, 8, 0, NULL, &e);
    CHECK_ERR(e, "image a");
    cl_mem b = clCreateImage2D(t->ctx, CL_MEM_READ_WRITE, &f, 16, 8, 0, NULL, &e);
    CHECK_ERR(e, "image b");
    float px[16 * 8 * 4];
    for (int i = 0; i < 16 * 8 * 4; i++) px[i] = (float)i * 0.25f;
    size_t o[3] = {0, 0, 0}, r[3] = {16, 8, 1};
    CHECK(clEnqueueWriteImage(t->q, a, CL_TRUE, o, r, 0, 0, px, 0, NULL, NULL));
    /* Write a 3x2 patch at (5,4) from a source with row pitch 64 floats. */
    float patch[2 * 64];
    for (int i = 0; i < 2 * 64; i++) patch[i] = -1.0f - i;
    size_t po[3] = {5, 4, 0}, pr[3] = {3, 2, 1};
    CHECK(clEnqueueWriteImage(t->q, a, CL_FALSE, po, pr, 64 * sizeof(float), 0, patch, 0, NULL, NULL));
    float fc[4] = {9.0f, 8.0f, 7.0f, 6.0f};
    size_t fo[3] = {0, 6, 0}, fr[3] = {16, 1, 1};
    CHECK(clEnqueueFillImage(t->q, a, fc, fo, fr, 0, NULL, NULL));
    size_t co[3] = {2, 2, 0}, cd[3] = {0, 0, 0}, cr[3] = {10, 6, 1};
    CHECK(clEnqueueFillImage(t->q, b, (float[4]){0, 0, 0, 0}, o, r, 0, NULL, NULL));
    CHECK(clEnqueueCopyImage(t->q, a, b, co, cd, cr, 0, NULL, NULL));
    float out[16 * 8 * 4];
    CHECK(clEnqueueReadImage(t->q, a, CL_TRUE, o, r, 0, 0, out, 0, NULL, NULL));
    ASSERT(out[(4 * 16 + 5) * 4] == -1.0f && out[(5 * 16 + 5) * 4] == -65.0f);
    ASSERT(out[(6 * 16 + 3) * 4 + 1] == 8.0f);
    printf("image a: hash %08x\n", fnv(out, sizeof out));
    CHECK(clEnqueueReadImage(t->q, b, CL_TRUE, o, r, 0, 0, out, 0, NULL, NULL));
    printf("image b: hash %08x\n", fnv(out, sizeof out));
    /* Image <-> buffer. */
    cl_mem buf = buffer(t, CL_MEM_READ_WRITE, 4096, NULL);
    size_t ir[3] = {4, 3, 1}, io[3] = {1, 1, 0};
    CHECK(clEnqueueCopyImageToBuffer(t->q, a, buf, io, ir, 64, 0, NULL, NULL));
    float bf[12 * 4];
    CHECK(clEnqueueReadBuffer(t->q, buf, CL_TRUE, 64, sizeof bf, bf, 0, NULL, NULL));
    printf("image->buffer: hash %08x\n", fnv(bf, sizeof bf));
    ASSERT(bf[0] == px[(1 * 16 + 1) * 4]);
    size_t bo[3] = {10, 0, 0};
    CHECK(clEnqueueCopyBufferToImage(t->q, buf, b, 64, bo, ir, 0, NULL, NULL));
    CHECK(clEnqueueReadImage(t->q, b, CL_TRUE, o, r, 0, 0, out, 0, NULL, NULL));
    printf("buffer->image: hash %08x\n", fnv(out, sizeof out));
    ASSERT(out[10 * 4] == bf[0]);
    /* Map an image region, read and write through it. */
    size_t mo[3] = {2, 1, 0}, mr[3] = {4, 3, 1}, rp = 0;
    float *m = clEnqueueMapImage(t->q, a, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, mo, mr, &rp, NULL, 0, NULL, NULL, &e);
    CHECK_ERR(e, "clEnqueueMapImage");
    ASSERT(rp >= 4 * 16);
    ASSERT(m[0] == px[(1 * 16 + 2) * 4]);
    float *row1 = (float *)((char *)m + rp);
    ASSERT(row1[0] == px[(2 * 16 + 2) * 4]);
    row1[1] = 12345.0f;
    CHECK(clEnqueueUnmapMemObject(t->q, a, m, 0, NULL, NULL));
    CHECK(clEnqueueReadImage(t->q, a, CL_TRUE, o, r, 0, 0, out, 0, NULL, NULL));
    ASSERT(out[(2 * 16 + 2) * 4 + 1] == 12345.0f);
    ASSERT(out[(2 * 16 + 2) * 4] == px[(2 * 16 + 2) * 4]);
    printf("~map image: row pitch %zu\n", rp);
    printf("map image: hash %08x\n", fnv(out, sizeof out));
    /* Out of range read. */
    size_t big[3] = {17, 8, 1};
    EXPECT_CODE("read image out of range", clEnqueueReadImage(t->q, a, CL_TRUE, o, big, 0, 0, out, 0, NULL, NULL),
                CL_INVALID_VALUE);
    CHECK(clReleaseMemObject(a));
    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseMemObject(buf));
}

static void samplers(env_t *t) {
    cl_int e;
    cl_sampler s = clCreateSampler(t->ctx, CL_FALSE, CL_ADDRESS_CLAMP_TO_EDGE, CL_FILTER_NEAREST, &e);
    CHECK_ERR(e, "clCreateSampler");
    cl_bool norm;
    cl_addressing_mode am;
    cl_filter_mode fm;
    cl_context c;
    cl_uint rc;
    CHECK(clGetSamplerInfo(s, CL_SAMPLER_NORMALIZED_COORDS, sizeof norm, &norm, NULL));
    CHECK(clGetSamplerInfo(s, CL_SAMPLER_ADDRESSING_MODE, sizeof am, &am, NULL));
    CHECK(clGetSamplerInfo(s, CL_SAMPLER_FILTER_MODE, sizeof fm, &fm, NULL));
    CHECK(clGetSamplerInfo(s, CL_SAMPLER_CONTEXT, sizeof c, &c, NULL));
    CHECK(clGetSamplerInfo(s, CL_SAMPLER_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    ASSERT(c == t->ctx);
    ASSERT(rc >= 1);
    printf("sampler: norm %u addr %x filter %x\n", norm, am, fm);
    printf("~sampler: refs %u\n", rc);
    cl_sampler_properties props[] = {CL_SAMPLER_NORMALIZED_COORDS, CL_TRUE, CL_SAMPLER_ADDRESSING_MODE,
                                     CL_ADDRESS_REPEAT, CL_SAMPLER_FILTER_MODE, CL_FILTER_LINEAR, 0};
    cl_sampler s2 = clCreateSamplerWithProperties(t->ctx, props, &e);
    CHECK_ERR(e, "clCreateSamplerWithProperties");
    CHECK(clGetSamplerInfo(s2, CL_SAMPLER_NORMALIZED_COORDS, sizeof norm, &norm, NULL));
    CHECK(clGetSamplerInfo(s2, CL_SAMPLER_ADDRESSING_MODE, sizeof am, &am, NULL));
    CHECK(clGetSamplerInfo(s2, CL_SAMPLER_FILTER_MODE, sizeof fm, &fm, NULL));
    printf("sampler2: norm %u addr %x filter %x\n", norm, am, fm);
    CHECK(clReleaseSampler(s2));

    cl_program p = build(t, src, NULL);
    cl_kernel k = kernel(p, "sample");
    cl_image_format f = {CL_RGBA, CL_UNORM_INT8};
    unsigned char px[4 * 4 * 4];
    for (int i = 0; i < 64; i++) px[i] = (unsigned char)(i * 4);
    cl_mem img = clCreateImage2D(t->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, &f, 4, 4, 0, px, &e);
    CHECK_ERR(e, "sampled image");
    cl_mem out = buffer(t, CL_MEM_WRITE_ONLY, 16 * sizeof(cl_float4), NULL);
    int w = 4;
    CHECK(clSetKernelArg(k, 0, sizeof img, &img));
    CHECK(clSetKernelArg(k, 1, sizeof s, &s));
    CHECK(clSetKernelArg(k, 2, sizeof out, &out));
    CHECK(clSetKernelArg(k, 3, sizeof w, &w));
    size_t g[2] = {4, 4};
    CHECK(clEnqueueNDRangeKernel(t->q, k, 2, NULL, g, NULL, 0, NULL, NULL));
    float res[16 * 4];
    CHECK(clEnqueueReadBuffer(t->q, out, CL_TRUE, 0, sizeof res, res, 0, NULL, NULL));
    for (int i = 0; i < 64; i++) {
        float want = px[i] / 255.0f;
        ASSERT(res[i] > want - 1e-4f && res[i] < want + 1e-4f);
    }
    printf("read_imagef: ok, hash %08x\n", fnv(res, sizeof res));

    /* Image to image in a kernel with a constant sampler. */
    cl_kernel inv = kernel(p, "invert");
    cl_image_format fu = {CL_RGBA, CL_UNSIGNED_INT8};
    cl_mem iu = clCreateImage2D(t->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, &fu, 4, 4, 0, px, &e);
    CHECK_ERR(e, "iu");
    cl_mem ou = clCreateImage2D(t->ctx, CL_MEM_WRITE_ONLY, &fu, 4, 4, 0, NULL, &e);
    CHECK_ERR(e, "ou");
    CHECK(clSetKernelArg(inv, 0, sizeof iu, &iu));
    CHECK(clSetKernelArg(inv, 1, sizeof ou, &ou));
    CHECK(clEnqueueNDRangeKernel(t->q, inv, 2, NULL, g, NULL, 0, NULL, NULL));
    unsigned char ip[64];
    size_t o[3] = {0, 0, 0}, r[3] = {4, 4, 1};
    CHECK(clEnqueueReadImage(t->q, ou, CL_TRUE, o, r, 0, 0, ip, 0, NULL, NULL));
    for (int i = 0; i < 64; i++) ASSERT(ip[i] == 255 - px[i]);
    printf("invert: ok\n");
    CHECK(clReleaseMemObject(iu));
    CHECK(clReleaseMemObject(ou));
    CHECK(clReleaseKernel(inv));
    CHECK(clReleaseMemObject(img));
    CHECK(clReleaseMemObject(out));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    CHECK(clReleaseSampler(s));
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    cl_bool img = CL_FALSE;
    CHECK(clGetDeviceInfo(t.device, CL_DEVICE_IMAGE_SUPPORT, sizeof img, &img, NULL));
    printf("image support: %u\n", img);
    if (!img) {
        fprintf(stderr, "device has no image support\n");
        return 1;
    }
    formats(&t);
    dims(&t);
    transfers(&t);
    samplers(&t);
    env_done(&t);
    printf("images: done\n");
    return 0;
}
