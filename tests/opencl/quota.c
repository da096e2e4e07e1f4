/* A tenant's memory quota (`wormhole-server --tenant-memory`), run through
 * Wormhole only, by crates/wormhole/it/tests/limits.rs: prints the device's
 * sizes as the tenant sees them, then fills buffers until one is refused
 * (at most MAX_BUFS): first of sizes all different, so that each creation
 * waits for its answer, then of one size, whose creations after the first
 * would be batched but for the room left: once the buffers held pass half
 * the device's memory, each creation waits for its answer, so the refusal
 * comes from the creation, as natively. Everything is released in between:
 * the quota comes back. With the argument "hold", it then fills again and holds what it
 * got for two minutes, or until it is killed. */
#include "common.h"

#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define MAX_BUFS 64

static char data[5 * MIB];

/* Creates and writes buffers until a call fails; returns how many are held,
 * and the failing call's code in *why (0 if none failed). */
static int fill(env_t *t, cl_mem *bufs, int same_size, cl_int *why) {
    *why = CL_SUCCESS;
    for (int i = 0; i < MAX_BUFS; i++) {
        size_t size = 4 * MIB + (same_size ? 0 : (size_t)i * 4096);
        cl_int e = CL_SUCCESS;
        bufs[i] = clCreateBuffer(t->ctx, CL_MEM_READ_WRITE, size, NULL, &e);
        if (e != CL_SUCCESS || !bufs[i]) {
            *why = e;
            return i;
        }
        e = clEnqueueWriteBuffer(t->q, bufs[i], CL_TRUE, 0, size, data, 0,
                                 NULL, NULL);
        if (e != CL_SUCCESS) {
            *why = e;
            /* The handle is the application's, whatever became of the
             * object: released as it would be natively. */
            clReleaseMemObject(bufs[i]);
            return i;
        }
    }
    return MAX_BUFS;
}

static void release(cl_mem *bufs, int n) {
    for (int i = 0; i < n; i++) CHECK(clReleaseMemObject(bufs[i]));
}

int main(int argc, char **argv) {
    env_t t;
    env_init(&t, 0);
    cl_ulong global = 0, max_alloc = 0;
    CHECK(clGetDeviceInfo(t.device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global,
                          &global, NULL));
    CHECK(clGetDeviceInfo(t.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                          sizeof max_alloc, &max_alloc, NULL));
    printf("global memory: %llu\n", (unsigned long long)global);
    printf("largest allocation: %llu\n", (unsigned long long)max_alloc);

    cl_mem bufs[MAX_BUFS];
    cl_int why;
    int n = fill(&t, bufs, 0, &why);
    printf("different sizes: %d buffers, then %d\n", n, (int)why);
    release(bufs, n);
    n = fill(&t, bufs, 1, &why);
    printf("one size: %d buffers, then %d\n", n, (int)why);
    release(bufs, n);
    /* The refused creation reported itself: nothing is left for the next
     * sync point. */
    printf("then finish: %d\n", (int)clFinish(t.q));
    CHECK(clFinish(t.q));

    /* A buffer larger than the device says it allows fails at once. */
    cl_int e = CL_SUCCESS;
    cl_mem big = clCreateBuffer(t.ctx, CL_MEM_READ_WRITE, max_alloc + 1, NULL,
                                &e);
    printf("past the largest allocation: %d\n", (int)e);
    if (big) CHECK(clReleaseMemObject(big));

    /* An image is charged as the library sizes it (8 MiB here): refused
     * beside a held 4 MiB buffer, made once that is released. */
    cl_image_desc desc = image_desc(CL_MEM_OBJECT_IMAGE2D, 2048, 1024, 0);
    n = fill(&t, bufs, 0, &why);
    release(bufs + 1, n - 1);
    cl_mem img = clCreateImage(t.ctx, CL_MEM_READ_WRITE, &rgba8, &desc, NULL, &e);
    printf("image beside a buffer: %d\n", (int)e);
    if (img) CHECK(clReleaseMemObject(img));
    release(bufs, 1);
    img = clCreateImage(t.ctx, CL_MEM_READ_WRITE, &rgba8, &desc, NULL, &e);
    printf("image alone: %d\n", (int)e);
    if (img) CHECK(clReleaseMemObject(img));
    CHECK(clFinish(t.q));

    if (argc > 1 && strcmp(argv[1], "hold") == 0) {
        n = fill(&t, bufs, 0, &why);
        printf("holding: %d buffers, then %d\n", n, (int)why);
        fflush(stdout);
        sleep(120); /* the test ends it sooner */
        release(bufs, n);
    }
    env_done(&t);
    return 0;
}
