/* The driver calls a framework makes itself, as PyTorch makes them: it
 * opens libcuda.so.1 with dlopen and looks each function up by name. Run
 * through Wormhole with its libcuda stand-in (wormhole-cuda-driver-1)
 * on the library path, on a machine without NVIDIA's driver. Prints one
 * line per call; scripts/test-wormhole-cuda.sh compares them with what
 * the stand-in must answer (the CPU stand-in device: one device). */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*init_t)(unsigned);
typedef int (*int_out_t)(int *);
typedef int (*device_get_t)(int *, int);
typedef int (*state_t)(int, unsigned *, int *);
typedef int (*retain_t)(void **, int);
typedef int (*release_t)(int);
typedef int (*ctx_get_t)(void **);
typedef int (*ctx_set_t)(void *);
typedef int (*describe_t)(int, const char **);

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
#define SYM(T, n) T n = (T)dlsym(h, #n); if (!n) { printf("missing %s\n", #n); return 1; }
    SYM(init_t, cuInit)
    SYM(int_out_t, cuDriverGetVersion)
    SYM(int_out_t, cuDeviceGetCount)
    SYM(device_get_t, cuDeviceGet)
    SYM(state_t, cuDevicePrimaryCtxGetState)
    SYM(retain_t, cuDevicePrimaryCtxRetain)
    SYM(release_t, cuDevicePrimaryCtxRelease_v2)
    SYM(ctx_get_t, cuCtxGetCurrent)
    SYM(ctx_set_t, cuCtxSetCurrent)
    SYM(describe_t, cuGetErrorName)
    SYM(describe_t, cuGetErrorString)
    printf("cuMemCreate %s\n", dlsym(h, "cuMemCreate") ? "found" : "missing");
    int v = -1, n = -1, d = -1, active = -1, r;
    unsigned flags = 7;
    void *ctx = &v, *primary = NULL;
    printf("init: %d, flags 1: %d\n", cuInit(0), cuInit(1));
    r = cuDriverGetVersion(&v);
    printf("driver version: %d, %s\n", r, v > 0 ? "positive" : "none");
    r = cuDeviceGetCount(&n);
    printf("devices: %d, %d\n", r, n);
    r = cuDeviceGet(&d, 0);
    printf("device 0: %d, %d; device %d: %d\n", r, d, n, cuDeviceGet(&d, n));
    r = cuDevicePrimaryCtxGetState(0, &flags, &active);
    printf("primary state: %d, flags %u, active %d\n", r, flags, active);
    /* What PyTorch does before it creates a cuBLAS handle. */
    r = cuCtxGetCurrent(&ctx);
    printf("current: %d, %s\n", r, ctx ? "set" : "none");
    r = cuDevicePrimaryCtxRetain(&primary, 0);
    printf("retain: %d, %s\n", r, primary ? "set" : "none");
    r = cuCtxSetCurrent(primary);
    printf("set current: %d; a forged one: %d\n", r, cuCtxSetCurrent((char *)primary + 1));
    r = cuCtxGetCurrent(&ctx);
    printf("current: %d, %s\n", r, ctx == primary ? "the primary" : "another");
    r = cuDevicePrimaryCtxGetState(0, &flags, &active);
    printf("primary state: %d, active %d\n", r, active);
    r = cuDevicePrimaryCtxRelease_v2(0);
    printf("release: %d, again: %d\n", r, cuDevicePrimaryCtxRelease_v2(0));
    const char *s = NULL;
    r = cuGetErrorName(101, &s);
    printf("name of 101: %d, %s\n", r, s ? s : "(null)");
    r = cuGetErrorString(12345, &s);
    printf("string of 12345: %d, %s\n", r, s ? s : "(null)");
    return 0;
}
