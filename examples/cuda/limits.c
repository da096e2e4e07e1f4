/* A device's settings, as a program reads and changes them: resource
 * limits (per device), the cache preference, device flags, a stream's
 * flags, device and id, devices found by PCI bus id, what two devices can do to each
 * other's memory. Needs two devices (the CPU stand-in with
 * CPU_DEVICE_COUNT=2). Prints one line per call with its status; natively
 * and through Wormhole the lines must be the same. */
#include <stdio.h>
#include "wormhole_cuda_min.h"

cudaError_t cudaDeviceSetLimit(int limit, size_t value);
cudaError_t cudaDeviceGetLimit(size_t *value, int limit);
cudaError_t cudaDeviceSetCacheConfig(int config);
cudaError_t cudaDeviceGetCacheConfig(int *config);
cudaError_t cudaSetDeviceFlags(unsigned flags);
cudaError_t cudaGetDeviceFlags(unsigned *flags);
cudaError_t cudaDeviceGetP2PAttribute(int *value, int attr, int src, int dst);
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device);
cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *id);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned *flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamGetDevice(cudaStream_t s, int *device);
cudaError_t cudaStreamGetId(cudaStream_t s, unsigned long long *id);

enum { LIMIT_STACK = 0, LIMIT_MALLOC_HEAP = 2, PREFER_SHARED = 1, SCHEDULE_BLOCKING_SYNC = 4,
       P2P_ACCESS_SUPPORTED = 2, STREAM_NON_BLOCKING = 1 };

int main(void) {
    size_t v = 0;
    int r;
    r = cudaDeviceGetLimit(&v, LIMIT_STACK);
    printf("stack at start: %d, %zu\n", r, v);
    r = cudaDeviceSetLimit(LIMIT_STACK, 4096);
    printf("stack set: %d\n", r);
    r = cudaDeviceGetLimit(&v, LIMIT_STACK);
    printf("stack: %d, %zu\n", r, v);
    r = cudaDeviceSetLimit(LIMIT_MALLOC_HEAP, 64 << 20);
    cudaDeviceGetLimit(&v, LIMIT_MALLOC_HEAP);
    printf("malloc heap: %d, %zu\n", r, v);
    /* Limits are the device's: device 1 still has its own. */
    cudaSetDevice(1);
    r = cudaDeviceGetLimit(&v, LIMIT_STACK);
    printf("device 1's stack: %d, %zu\n", r, v);
    cudaSetDevice(0);
    cudaDeviceGetLimit(&v, LIMIT_STACK);
    printf("device 0's again: %zu\n", v);
    int c = -1;
    r = cudaDeviceSetCacheConfig(PREFER_SHARED);
    cudaDeviceGetCacheConfig(&c);
    printf("cache preference: %d, %d\n", r, c);
    unsigned f = 0;
    r = cudaSetDeviceFlags(SCHEDULE_BLOCKING_SYNC);
    cudaGetDeviceFlags(&f);
    printf("device flags: %d, blocking sync %s\n", r, f & SCHEDULE_BLOCKING_SYNC ? "set" : "unset");
    cudaStream_t s = NULL;
    r = cudaStreamCreateWithFlags(&s, STREAM_NON_BLOCKING);
    unsigned sf = 7, nf = 7;
    cudaStreamGetFlags(s, &sf);
    cudaStreamGetFlags(NULL, &nf);
    printf("stream flags: %d, %u; default stream %u\n", r, sf, nf);
    /* A stream is its device's; ids tell streams apart. */
    cudaStream_t s1 = NULL;
    cudaSetDevice(1);
    r = cudaStreamCreate(&s1);
    cudaSetDevice(0);
    int sd = -1, nd = -1;
    unsigned long long id0 = 0, id1 = 0, again = 1;
    int r2 = cudaStreamGetDevice(s1, &sd);
    cudaStreamGetDevice(NULL, &nd);
    cudaStreamGetId(s, &id0);
    cudaStreamGetId(s1, &id1);
    cudaStreamGetId(s, &again);
    printf("stream devices: %d, %d, created on %d, default stream on %d; ids %s, stable %s\n", r, r2, sd, nd,
           id0 != id1 ? "differ" : "SAME", id0 == again ? "yes" : "NO");
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s);
    char id[32] = "";
    int d = -1;
    r = cudaDeviceGetPCIBusId(id, sizeof id, 1);
    int back = cudaDeviceGetByPCIBusId(&d, id);
    printf("device 1 at %s (%d): found %d, device %d\n", id, r, back, d);
    d = -1;
    r = cudaDeviceGetByPCIBusId(&d, "0000:7f:00.0");
    printf("no such bus id: %d, %d\n", r, d);
    int p = -1;
    r = cudaDeviceGetP2PAttribute(&p, P2P_ACCESS_SUPPORTED, 0, 1);
    printf("peer access 0 -> 1: %d, %d\n", r, p);
    printf("done\n");
    return 0;
}
