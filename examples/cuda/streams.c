/* Streams with priorities, capture status and capture mode, peer access
 * and the stream-ordered allocator: calls a framework makes when it starts
 * (PyTorch's stream pools and caching allocator), each answer printed. Run
 * natively and through Wormhole on the same device, the output must be the
 * same (scripts/test-wormhole-cuda.sh, on the CPU stand-in). */
#include <stdio.h>
#include "wormhole_cuda_min.h"

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority);
cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, int *status);
cudaError_t cudaThreadExchangeStreamCaptureMode(int *mode);
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, int *status, unsigned long long *id,
                                     void **graph, const void **deps, const void **edges,
                                     size_t *ndeps);
cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st);
cudaError_t cudaGetDriverEntryPoint(const char *sym, void **fn, unsigned long long flags, int *status);
cudaError_t cudaLaunchHostFunc(cudaStream_t s, void (*fn)(void *), void *data);
cudaError_t cudaStreamAddCallback(cudaStream_t s, void (*cb)(cudaStream_t, cudaError_t, void *),
                                  void *data, unsigned flags);

static int host_calls;
static void host_fn(void *data) { host_calls += *(int *)data; }
static void stream_cb(cudaStream_t s, cudaError_t status, void *data) {
    (void)s;
    host_calls += status == cudaSuccess ? *(int *)data : 1000;
}
cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer);
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags);
cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaStreamDestroy(cudaStream_t s);

int main(void) {
    int least = 7, greatest = 7, prio = 7, status = 7, can = 7, mode = 1, r;
    cudaStream_t s = NULL;
    void *p = NULL;
    /* Each call before its print: C leaves the order of arguments open. */
    r = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    printf("priority range: %d, least %d, greatest %d\n", r, least, greatest);
    r = cudaStreamCreateWithPriority(&s, 1, greatest);
    printf("create with priority %d: %d\n", greatest, r);
    r = cudaStreamGetPriority(s, &prio);
    printf("its priority: %d, %d\n", r, prio);
    r = cudaStreamIsCapturing(s, &status);
    printf("capturing: %d, status %d\n", r, status);
    {
        /* PyTorch's caching allocator asks this on every allocation. */
        unsigned long long id = 99;
        void *graph = &id;
        const void *deps = &id, *edges = &id;
        size_t ndeps = 5;
        status = 7;
        r = cudaStreamGetCaptureInfo(s, &status, &id, &graph, &deps, &edges, &ndeps);
        printf("capture info: %d, status %d, id %llu, graph %s, deps %s %s %zu\n", r, status,
               id, graph ? "set" : "none", deps ? "set" : "none", edges ? "set" : "none",
               ndeps);
        printf("capture info without a status: %d\n",
               cudaStreamGetCaptureInfo(s, NULL, NULL, NULL, NULL, NULL, NULL) != 0);
    }
    r = cudaThreadExchangeStreamCaptureMode(&mode);
    printf("exchange capture mode: %d, was %d\n", r, mode);
    r = cudaThreadExchangeStreamCaptureMode(&mode);
    printf("and back: %d, was %d\n", r, mode);
    r = cudaDeviceCanAccessPeer(&can, 0, 0);
    printf("peer access 0 -> 0: %d, %d\n", r, can);
    printf("peer access to device 3: %d\n", cudaDeviceCanAccessPeer(&can, 0, 3));
    printf("enable peer 0: %d\n", cudaDeviceEnablePeerAccess(0, 0));
    printf("malloc async: %d\n", cudaMallocAsync(&p, 1 << 20, s));
    printf("memset it: %d\n", cudaMemset(p, 0, 1 << 20));
    {
        /* Host functions in stream order: each has run when its call returns
         * here (Wormhole runs them in the calling thread). */
        int ten = 10, one = 1;
        r = cudaLaunchHostFunc(s, host_fn, &ten);
        printf("host function: %d, calls %d\n", r, host_calls);
        r = cudaStreamAddCallback(s, stream_cb, &one, 0);
        printf("stream callback: %d, calls %d\n", r, host_calls);
        printf("callback with flags refused: %d\n", cudaStreamAddCallback(s, stream_cb, &one, 1) != 0);
        printf("NULL host function refused: %d\n", cudaLaunchHostFunc(s, NULL, NULL) != 0);
    }
    {
        /* A peer copy within the one device, read back. */
        void *q = NULL;
        unsigned char back[4] = {0};
        printf("malloc for a peer copy: %d\n", cudaMalloc(&q, 4096));
        printf("memset it: %d\n", cudaMemset(q, 0x5a, 4096));
        printf("peer copy: %d\n", cudaMemcpyPeerAsync(p, 0, q, 0, 4096, s));
        printf("its end read back: %d\n", cudaMemcpy(back, (char *)p + 4092, 4, cudaMemcpyDeviceToHost));
        printf("bytes %02x %02x %02x %02x\n", back[0], back[1], back[2], back[3]);
        printf("free: %d\n", cudaFree(q));
    }
    {
        void *fn = &host_calls;
        int st = 7;
        r = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, 0, &st);
        printf("driver entry point: %d, %s, status %d\n", r, fn ? "found" : "none", st);
    }
    printf("free async: %d\n", cudaFreeAsync(p, s));
    printf("destroy: %d\n", cudaStreamDestroy(s));
    return 0;
}
