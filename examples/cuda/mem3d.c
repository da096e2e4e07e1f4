/* Pitched 3D memory, as volume code uses it: a 40 x 10 x 6 byte volume
 * from cudaMalloc3D is cleared with cudaMemset3D, a 10 x 4 x 3 box inside
 * it set with cudaMemset3D and another with cudaMemset3DAsync, a host
 * volume's box copied in with cudaMemcpy3D at an offset, one box copied
 * within the device with cudaMemcpy3DAsync, and the whole volume copied
 * back to the host; every byte is checked against a host model. Then a
 * copy naming a CUDA array is refused. Natively and through Wormhole the
 * lines must be the same. */
#include <stdio.h>
#include <string.h>
#include "wormhole_cuda_min.h"

struct pitched { void *ptr; size_t pitch, xsize, ysize; };
struct extent { size_t width, height, depth; };
struct pos { size_t x, y, z; };
struct memcpy3d { void *src_array; struct pos src_pos; struct pitched src; void *dst_array; struct pos dst_pos;
                  struct pitched dst; struct extent extent; int kind; };
cudaError_t cudaMalloc3D(struct pitched *p, struct extent e);
cudaError_t cudaMemset3D(struct pitched p, int value, struct extent e);
cudaError_t cudaMemset3DAsync(struct pitched p, int value, struct extent e, cudaStream_t s);
cudaError_t cudaMemcpy3D(const struct memcpy3d *c);
cudaError_t cudaMemcpy3DAsync(const struct memcpy3d *c, cudaStream_t s);

enum { X = 40, Y = 10, Z = 6 };
static unsigned char model[Z][Y][X], host[Z][Y][X], back[Z][Y][X];

static void set_box(struct pos at, struct extent e, unsigned char v) {
    for (size_t z = 0; z < e.depth; z++)
        for (size_t y = 0; y < e.height; y++) memset(&model[at.z + z][at.y + y][at.x], v, e.width);
}

/* The pitched pointer of the volume's byte (x, y, z). */
static struct pitched inside(struct pitched v, struct pos at) {
    v.ptr = (char *)v.ptr + (at.z * v.ysize + at.y) * v.pitch + at.x;
    return v;
}

int main(void) {
    struct pitched v;
    struct extent all = {X, Y, Z};
    int r = cudaMalloc3D(&v, all);
    printf("cudaMalloc3D: %d, pitch %zu, %zu x %zu\n", r, v.pitch, v.xsize, v.ysize);
    if (r) return 1;
    r = cudaMemset3D(v, 0, all);
    printf("cleared: %d\n", r);
    struct pos at = {5, 2, 1};
    struct extent box = {10, 4, 3};
    r = cudaMemset3D(inside(v, at), 0x11, box);
    set_box(at, box, 0x11);
    struct pos at2 = {30, 6, 4};
    struct extent box2 = {8, 3, 2};
    int r2 = cudaMemset3DAsync(inside(v, at2), 0x22, box2, 0);
    set_box(at2, box2, 0x22);
    printf("boxes set: %d, %d\n", r, r2);
    /* A host box (from a volume of its own layout) into the device volume. */
    for (int z = 0; z < Z; z++)
        for (int y = 0; y < Y; y++)
            for (int x = 0; x < X; x++) host[z][y][x] = (unsigned char)(x + 3 * y + 7 * z);
    struct memcpy3d c;
    memset(&c, 0, sizeof c);
    c.src = (struct pitched){host, X, X, Y};
    c.src_pos = (struct pos){1, 1, 1};
    c.dst = v;
    c.dst_pos = (struct pos){20, 0, 2};
    c.extent = (struct extent){6, 5, 4};
    c.kind = cudaMemcpyHostToDevice;
    r = cudaMemcpy3D(&c);
    for (size_t z = 0; z < 4; z++)
        for (size_t y = 0; y < 5; y++) memcpy(&model[2 + z][y][20], &host[1 + z][1 + y][1], 6);
    printf("host box in: %d\n", r);
    /* Within the device: the first box, two slices of it, to the corner. */
    memset(&c, 0, sizeof c);
    c.src = v;
    c.src_pos = at;
    c.dst = v;
    c.dst_pos = (struct pos){0, 0, 0};
    c.extent = (struct extent){10, 4, 2};
    c.kind = 3; /* cudaMemcpyDeviceToDevice */
    r = cudaMemcpy3DAsync(&c, 0);
    cudaDeviceSynchronize();
    for (size_t z = 0; z < 2; z++)
        for (size_t y = 0; y < 4; y++) memcpy(&model[z][y][0], &model[at.z + z][at.y + y][at.x], 10);
    printf("device box moved: %d\n", r);
    memset(&c, 0, sizeof c);
    c.src = v;
    c.dst = (struct pitched){back, X, X, Y};
    c.extent = all;
    c.kind = cudaMemcpyDeviceToHost;
    r = cudaMemcpy3D(&c);
    int wrong = 0;
    for (int z = 0; z < Z; z++)
        for (int y = 0; y < Y; y++)
            for (int x = 0; x < X; x++) wrong += back[z][y][x] != model[z][y][x];
    printf("volume back: %d, bytes wrong %d\n", r, wrong);
    c.src_array = &c;
    printf("an array named: %d\n", cudaMemcpy3D(&c));
    cudaGetLastError();
    cudaFree(v.ptr);
    printf("%s\n", wrong ? "WRONG" : "correct");
    return wrong != 0;
}
