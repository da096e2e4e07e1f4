/* The kernel path without nvcc: registers the checked-in fat binary of
 * our own test kernels (crates/wormhole/cuda-api/fixtures/testkernels.fatbin:
 * vecAdd(const float*, const float*, float*, int) and scale(float*, float,
 * int)) exactly as nvcc's host code does, then launches through
 * cudaLaunchKernel and through the <<<>>> sequence
 * (__cudaPushCallConfiguration, __cudaPopCallConfiguration,
 * cudaLaunchKernel), and copies to and from a device variable. Without a GPU every launch must fail as natively
 * (cudaErrorInsufficientDriver / cudaErrorNoDevice), never crash or hang;
 * launching a function never registered gives
 * cudaErrorInvalidDeviceFunction. Usage: launch_fixture FATBIN */
#include <stdio.h>
#include <stdlib.h>
#include "wormhole_cuda_min.h"

typedef struct { unsigned x, y, z; } dim3;
typedef struct { int magic; int version; const void *data; void *filename_or_fatbins; } fatbin_wrapper;

void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **h);
void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, void *tid, void *bid, void *bDim, void *gDim, int *wSize);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream);
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem, cudaStream_t s);
void __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global);
cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset, int kind);
cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset, int kind);
cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol);

/* The host shadow of a device variable, as nvcc emits one. */
static float coeffs_shadow[4];

/* Host stubs: their addresses name the kernels, as in nvcc's output. */
static void vecAdd_stub(void) {}
static void scale_stub(void) {}
static void never_registered(void) {}

static int failures;
static void expect(const char *what, cudaError_t got, int ok_a, int ok_b) {
    printf("%-34s -> %d %s\n", what, got, cudaGetErrorName(got));
    if (got != ok_a && got != ok_b) failures++;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s FATBIN\n", argv[0]); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    static unsigned char image[1 << 16] __attribute__((aligned(8)));
    size_t n = fread(image, 1, sizeof image, f);
    fclose(f);
    if (n == 0) { fprintf(stderr, "empty fat binary\n"); return 2; }
    static fatbin_wrapper w;
    w.magic = 0x466243b1; w.version = 1; w.data = image; w.filename_or_fatbins = NULL;
    void **h = __cudaRegisterFatBinary(&w);
    __cudaRegisterFunction(h, (const char *)vecAdd_stub, "vecAdd", "vecAdd", -1, 0, 0, 0, 0, 0);
    __cudaRegisterFunction(h, (const char *)scale_stub, "scale", "scale", -1, 0, 0, 0, 0, 0);
    __cudaRegisterVar(h, (char *)coeffs_shadow, "coeffs", "coeffs", 0, sizeof coeffs_shadow, 1, 0);
    __cudaRegisterFatBinaryEnd(h);

    void *a = (void *)0x1000, *b = (void *)0x2000, *c = (void *)0x3000;
    int len = 1024;
    void *args[] = {&a, &b, &c, &len};
    dim3 grid = {4, 1, 1}, block = {256, 1, 1};
    expect("cudaLaunchKernel(vecAdd)", cudaLaunchKernel((void *)vecAdd_stub, grid, block, args, 0, 0),
           cudaErrorInsufficientDriver, cudaErrorNoDevice);

    /* scale<<<grid, block>>>(c, 2.5f, len), as nvcc lowers it. */
    float k = 2.5f;
    void *sargs[] = {&c, &k, &len};
    __cudaPushCallConfiguration(grid, block, 0, 0);
    dim3 g2, b2; size_t sh; void *st;
    cudaError_t pop = __cudaPopCallConfiguration(&g2, &b2, &sh, &st);
    if (pop != cudaSuccess || g2.x != 4 || b2.x != 256) { printf("bad call configuration\n"); failures++; }
    expect("scale<<<4, 256>>>", cudaLaunchKernel((void *)scale_stub, g2, b2, sargs, sh, st),
           cudaErrorInsufficientDriver, cudaErrorNoDevice);
    expect("cudaLaunchKernel(unregistered)", cudaLaunchKernel((void *)never_registered, grid, block, args, 0, 0),
           98 /* cudaErrorInvalidDeviceFunction */, cudaErrorInsufficientDriver);
    float host[4] = {1, 2, 3, 4};
    expect("cudaMemcpyToSymbol", cudaMemcpyToSymbol(coeffs_shadow, host, sizeof host, 0, cudaMemcpyHostToDevice),
           cudaErrorInsufficientDriver, cudaErrorNoDevice);
    expect("cudaMemcpyFromSymbol", cudaMemcpyFromSymbol(host, coeffs_shadow, 8, 8, cudaMemcpyDeviceToHost),
           cudaErrorInsufficientDriver, cudaErrorNoDevice);
    void *sym = (void *)1;
    expect("cudaGetSymbolAddress", cudaGetSymbolAddress(&sym, coeffs_shadow), cudaErrorInsufficientDriver,
           cudaErrorNoDevice);
    if (sym != (void *)1) { printf("symbol address written on failure\n"); failures++; }
    expect("cudaDeviceSynchronize", cudaDeviceSynchronize(), cudaErrorInsufficientDriver, cudaErrorNoDevice);
    printf("%s\n", failures ? "FAIL" : "OK: kernels registered; launches fail as native CUDA without a GPU");
    return failures ? 1 : 0;
}
