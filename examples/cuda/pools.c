/* The stream-ordered allocator's default pool, the device's bus id and the
 * profiler: what PyTorch's cudaMallocAsync backend and device queries ask.
 * Every line is what a real GPU answers too (figures are compared, not
 * printed, where a GPU's pool would reserve more than it uses), so the
 * output must be the same natively and through Wormhole
 * (scripts/test-wormhole-cuda.sh, on the CPU stand-in).
 *
 * `pools refused` adds what Wormhole refuses (interprocess handles, graph
 * capture, pool access from other devices), which differs from a GPU's
 * answers; the test checks those lines through Wormhole alone. `pools
 * pinned` adds page-locked host memory as cudaPointerGetAttributes reports
 * it (what PyTorch's Tensor.is_pinned asks), which a GPU answers the same
 * way but the CPU stand-in does not implement: checked through Wormhole. */
#include <stdio.h>
#include <string.h>
#include "wormhole_cuda_min.h"

typedef struct CUmemPoolHandle_st *cudaMemPool_t;
typedef struct { char reserved[64]; } cudaIpcMemHandle_t;
struct access_desc { int type, id, flags; }; /* cudaMemAccessDesc */

cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, int attr, void *value);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, int attr, void *value);
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct access_desc *d, size_t n);
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep);
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device);
cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p);
cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned flags);
cudaError_t cudaIpcCloseMemHandle(void *p);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, int mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, void **graph);
cudaError_t cudaGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(void *exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(void *graph);
cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags);
cudaError_t cudaHostRegister(void *p, size_t size, unsigned flags);
cudaError_t cudaHostUnregister(void *p);
struct ptr_attributes { int type, device; void *device_pointer, *host_pointer; };
cudaError_t cudaPointerGetAttributes(struct ptr_attributes *a, const void *p);

enum { REUSE_FOLLOW = 1, RELEASE_THRESHOLD = 4, RESERVED_CURRENT = 5, USED_CURRENT = 7, USED_HIGH = 8 };

static unsigned long long attr(cudaMemPool_t pool, int a) {
    unsigned long long v = 12345;
    if (cudaMemPoolGetAttribute(pool, a, &v) != 0) return 12345;
    return v;
}

cudaError_t cudaMallocManaged(void **p, size_t size, unsigned flags);
cudaError_t cudaHostGetDevicePointer(void **device, void *host, unsigned flags);

static void refused(cudaMemPool_t pool, cudaStream_t s) {
    cudaIpcMemHandle_t h;
    void *p = NULL, *graph = NULL, *exec = NULL;
    int get, open, close, begin, end, inst, launch, destroy;
    memset(&h, 0, sizeof h);
    /* Each call before its print: C leaves the order of arguments open. */
    get = cudaIpcGetMemHandle(&h, p);
    open = cudaIpcOpenMemHandle(&p, h, 1);
    close = cudaIpcCloseMemHandle(p);
    printf("ipc: get %d, open %d, close %d\n", get, open, close);
    begin = cudaStreamBeginCapture(s, 0);
    end = cudaStreamEndCapture(s, &graph);
    printf("capture: begin %d, end %d, last error %d\n", begin, end, cudaGetLastError());
    inst = cudaGraphInstantiateWithFlags(&exec, graph, 0);
    launch = cudaGraphLaunch(exec, s);
    destroy = cudaGraphDestroy(graph);
    printf("graphs: instantiate %d, launch %d, destroy %d\n", inst, launch, destroy);
    struct access_desc own = {1, 0, 3}, own_read = {1, 0, 1}, absent = {1, 9, 3};
    int a = cudaMemPoolSetAccess(pool, &own, 1), b = cudaMemPoolSetAccess(pool, &own_read, 1);
    printf("pool access: own %d, own read-only %d, device 9 %d\n", a, b,
           cudaMemPoolSetAccess(pool, &absent, 1));
    void *m = &h;
    int managed = cudaMallocManaged(&m, 1024, 1 /* cudaMemAttachGlobal */);
    printf("managed: %d, %s, last error %d\n", managed, m == (void *)&h ? "untouched" : "written",
           cudaGetLastError());
    char page[64];
    int mapped = cudaHostGetDevicePointer(&m, page, 0);
    printf("mapped: %d, %s\n", mapped, m == (void *)&h ? "untouched" : "written");
}

/* The memory type cudaPointerGetAttributes reports (1: page-locked host
 * memory, 0: unregistered), or -1 if it failed. */
static int type_of(const void *p) {
    struct ptr_attributes a = {7, 7, NULL, NULL};
    return cudaPointerGetAttributes(&a, p) == 0 ? a.type : -1;
}

static void pinned(void) {
    void *h = NULL, *ha = NULL;
    static char plain[8192];
    int r = cudaMallocHost(&h, 4096);
    printf("malloc host: %d, type %d, inside %d\n", r, type_of(h), type_of((char *)h + 4095));
    r = cudaHostAlloc(&ha, 100, 0);
    printf("host alloc: %d, type %d\n", r, type_of(ha));
    printf("pageable: type %d\n", type_of(plain));
    r = cudaHostRegister(plain, 4096, 0);
    printf("register: %d, type %d, past it %d\n", r, type_of(plain + 100), type_of(plain + 4096));
    printf("register again: %d\n", cudaHostRegister(plain + 100, 10, 0));
    r = cudaHostUnregister(plain);
    printf("unregister: %d, type %d, again %d\n", r, type_of(plain), cudaHostUnregister(plain));
    printf("free pageable refused: %d\n", cudaFreeHost(plain) != 0);
    r = cudaFreeHost(h);
    printf("free host: %d, type %d\n", r, type_of(h));
    printf("free host alloc: %d\n", cudaFreeHost(ha));
}

int main(int argc, char **argv) {
    cudaMemPool_t pool = NULL, again = NULL;
    cudaStream_t s = NULL;
    void *a = NULL, *b = NULL;
    char bus[32];
    int r, reuse = 7, n = 0;
    r = cudaGetDeviceCount(&n);
    printf("devices: %d, %d\n", r, n);
    r = cudaStreamCreate(&s);
    printf("stream: %d\n", r);
    r = cudaDeviceGetDefaultMemPool(&pool, 0);
    printf("default pool: %d, %s\n", r, pool ? "set" : "none");
    r = cudaDeviceGetDefaultMemPool(&again, 0);
    printf("the same pool again: %d, %d\n", r, again == pool);
    printf("pool of device %d: %d\n", n, cudaDeviceGetDefaultMemPool(&again, n) != 0);
    printf("pool to NULL: %d\n", cudaDeviceGetDefaultMemPool(NULL, 0) != 0);
    r = cudaMemPoolGetAttribute(pool, REUSE_FOLLOW, &reuse);
    printf("reuse follows events: %d, %d\n", r, reuse);
    {
        unsigned long long max = ~0ULL, got = 0;
        r = cudaMemPoolSetAttribute(pool, RELEASE_THRESHOLD, &max);
        printf("release threshold set: %d\n", r);
        r = cudaMemPoolGetAttribute(pool, RELEASE_THRESHOLD, &got);
        printf("and read: %d, %d\n", r, got == max);
        printf("used memory is read-only: %d\n", cudaMemPoolSetAttribute(pool, USED_CURRENT, &got) != 0);
    }
    r = cudaMallocAsync(&a, 1 << 20, s);
    printf("malloc async 1 MiB: %d\n", r);
    r = cudaMallocAsync(&b, 3 << 20, s);
    printf("malloc async 3 MiB: %d\n", r);
    printf("memset: %d\n", cudaMemset(b, 1, 3 << 20));
    printf("synchronize: %d\n", cudaStreamSynchronize(s));
    unsigned long long used = attr(pool, USED_CURRENT), reserved = attr(pool, RESERVED_CURRENT);
    printf("used covers both: %d, reserved covers used: %d\n", used >= (4 << 20) && used != 12345,
           reserved >= used && reserved != 12345);
    printf("free async 3 MiB: %d\n", cudaFreeAsync(b, s));
    printf("synchronize: %d\n", cudaStreamSynchronize(s));
    printf("used went down by it: %d\n", attr(pool, USED_CURRENT) == used - (3 << 20));
    printf("high mark kept: %d\n", attr(pool, USED_HIGH) >= (4 << 20));
    {
        unsigned long long zero = 0, one = 1;
        printf("high mark reset to 1 refused: %d\n", cudaMemPoolSetAttribute(pool, USED_HIGH, &one) != 0);
        r = cudaMemPoolSetAttribute(pool, USED_HIGH, &zero);
        printf("high mark reset: %d, now the use: %d\n", r, attr(pool, USED_HIGH) == attr(pool, USED_CURRENT));
    }
    printf("free async 1 MiB: %d\n", cudaFreeAsync(a, s));
    printf("synchronize: %d\n", cudaStreamSynchronize(s));
    printf("nothing used: %d\n", attr(pool, USED_CURRENT) == 0);
    printf("trim: %d\n", cudaMemPoolTrimTo(pool, 0));
    printf("nothing reserved after the trim: %d\n", attr(pool, RESERVED_CURRENT) == 0);
    memset(bus, 'x', sizeof bus);
    r = cudaDeviceGetPCIBusId(bus, sizeof bus, 0);
    printf("bus id: %d, %.*s\n", r, (int)sizeof bus, r == 0 ? bus : "-");
    printf("bus id of device %d: %d\n", n, cudaDeviceGetPCIBusId(bus, sizeof bus, n) != 0);
    printf("bus id to NULL: %d\n", cudaDeviceGetPCIBusId(NULL, 16, 0) != 0);
    printf("profiler: start %d, stop %d\n", cudaProfilerStart(), cudaProfilerStop());
    if (argc > 1 && strcmp(argv[1], "refused") == 0) refused(pool, s);
    if (argc > 1 && strcmp(argv[1], "pinned") == 0) pinned();
    return 0;
}
