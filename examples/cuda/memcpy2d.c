/* Pitched device memory and 2D copies, as image code uses them: a 100 x 37
 * byte image is copied into a pitched allocation, from there to a second one
 * (device to device, a window of it), and back to the host, with
 * cudaMemcpy2D and cudaMemcpy2DAsync; every byte is checked, and a width
 * larger than a pitch must be refused. A window of it is set with
 * cudaMemset2D and cudaMemset2DAsync. Then a 2000 x 1000 image there and
 * back, more rows than one request of Wormhole's carries. Run natively and through Wormhole on
 * the same device, the output must be the same (scripts/test-wormhole-cuda.sh,
 * on the CPU stand-in). Prints "correct" when all holds. */
#include <stdio.h>
#include <string.h>
#include "wormhole_cuda_min.h"

cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height);
cudaError_t cudaMemcpy2D(void *d, size_t dpitch, const void *s, size_t spitch, size_t width, size_t height,
                         int kind);
cudaError_t cudaMemcpy2DAsync(void *d, size_t dpitch, const void *s, size_t spitch, size_t width,
                              size_t height, int kind, cudaStream_t stream);
cudaError_t cudaMemset2D(void *p, size_t pitch, int value, size_t width, size_t height);
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream);

enum { W = 100, H = 37, HOST_PITCH = 128 };

int main(void) {
    static unsigned char img[H][HOST_PITCH], back[H][W];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < HOST_PITCH; x++) img[y][x] = (unsigned char)(y * 7 + x * 3);
    void *a, *b;
    size_t pa = 0, pb = 0;
    int failures = 0, r;
    r = cudaMallocPitch(&a, &pa, W, H);
    printf("cudaMallocPitch: %d, pitch %zu\n", r, pa);
    r = cudaMallocPitch(&b, &pb, W, H);
    failures += r != 0;
    r = cudaMemcpy2D(a, pa, img, HOST_PITCH, W, H, cudaMemcpyHostToDevice);
    printf("to the device: %d\n", r);
    failures += r != 0;
    /* The window from column 10, rows 5 on, to b's corner. */
    r = cudaMemcpy2D(b, pb, (char *)a + 5 * pa + 10, pa, W - 10, H - 5, 3 /* device to device */);
    printf("device to device: %d\n", r);
    failures += r != 0;
    memset(back, 0, sizeof back);
    r = cudaMemcpy2DAsync(back, W, b, pb, W - 10, H - 5, cudaMemcpyDeviceToHost, 0);
    printf("back to the host: %d\n", r);
    failures += r != 0;
    cudaDeviceSynchronize();
    int wrong = 0;
    for (int y = 0; y < H - 5; y++)
        for (int x = 0; x < W - 10; x++) wrong += back[y][x] != img[y + 5][x + 10];
    printf("bytes wrong: %d\n", wrong);
    r = cudaMemcpy2D(a, pa, img, 64, W, H, cudaMemcpyHostToDevice);
    printf("width over the pitch: %d\n", r);
    failures += wrong != 0 || r != 12;

    /* A window of b set by cudaMemset2D (rows 3 to 9, columns 20 to 59),
     * then its first row again by cudaMemset2DAsync; the rest of b as it was. */
    r = cudaMemset2D((char *)b + 3 * pb + 20, pb, 0xab, 40, 7);
    int r2 = cudaMemset2DAsync((char *)b + 3 * pb + 20, pb, 0xcd, 40, 1, 0);
    cudaDeviceSynchronize();
    memset(back, 0, sizeof back);
    cudaMemcpy2D(back, W, b, pb, W, H - 5, cudaMemcpyDeviceToHost);
    wrong = 0;
    for (int y = 0; y < H - 5; y++)
        for (int x = 0; x < W - 10; x++) {
            int in = y >= 3 && y < 10 && x >= 20 && x < 60;
            unsigned char want = !in ? img[y + 5][x + 10] : y == 3 ? 0xcd : 0xab;
            wrong += back[y][x] != want;
        }
    printf("2D memsets: %d, %d, bytes wrong: %d\n", r, r2, wrong);
    r = cudaMemset2D(b, 16, 0, 32, 2);
    printf("memset width over the pitch: %d\n", r);
    failures += wrong != 0;

    /* A 2000 x 1000 byte image: more rows than one reply holds. */
    enum { BW = 2000, BH = 1000 };
    static unsigned char big[BH][BW], big_back[BH][BW + 48];
    for (int y = 0; y < BH; y++)
        for (int x = 0; x < BW; x++) big[y][x] = (unsigned char)(y * 13 + x);
    void *c;
    size_t pc = 0;
    r = cudaMallocPitch(&c, &pc, BW, BH);
    failures += r != 0;
    r = cudaMemcpy2D(c, pc, big, BW, BW, BH, cudaMemcpyHostToDevice);
    failures += r != 0;
    r = cudaMemcpy2D(big_back, BW + 48, c, pc, BW, BH, 4 /* cudaMemcpyDefault */);
    wrong = 0;
    for (int y = 0; y < BH; y++) wrong += memcmp(big[y], big_back[y], BW) != 0;
    printf("2000 x 1000 there and back: %d, pitch %zu, rows wrong: %d\n", r, pc, wrong);
    failures += r != 0 || wrong != 0;
    cudaFree(c);
    cudaFree(a);
    cudaFree(b);
    printf("%s\n", failures ? "WRONG" : "correct");
    return failures != 0;
}
