/* A CPU stand-in for NVIDIA's libcudart, libcublas, libcublasLt,
 * libcurand and libcusolver (dense), for the server side of Wormhole's
 * no-GPU tests: built as one shared object and linked under their sonames,
 * it lets the cuBLAS, cuBLASLt, cuRAND and cuSOLVER samples
 * run to the end through a real server on a machine without a GPU, so
 * every request and reply of the path (scalars by value, pointer modes,
 * results in the reply, streams, handles, device pointers checked by the
 * server) is exercised with real data and the samples' own CPU references
 * decide whether the answers are right. "Device" memory is the server
 * process's memory (mmap), so copies are memcpy. Only what the samples
 * call is here; the numbers are not NVIDIA's (the generators in
 * particular are this file's own), so digests differ from a GPU's.
 * Kernels: examples/cuda/lenet.cu's, by their CPU twins (see below).
 * Build: cc -shared -fPIC -O2 -o libcpudevice.so cpu_device.c -lm */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "lenet_kernels.h"

/* ---- cudart ------------------------------------------------------------ */
int cudaRuntimeGetVersion(int *v) { *v = 13050; return 0; }
int cudaDriverGetVersion(int *v) { *v = 13050; return 0; }
/* CPU_DEVICE_COUNT devices (1 to 8; 1 by default), all alike; the
 * current one is per host thread, as CUDA's runtime keeps it. */
static int device_count(void) {
    const char *e = getenv("CPU_DEVICE_COUNT");
    int n = e ? atoi(e) : 1;
    return n < 1 ? 1 : n > 8 ? 8 : n;
}
static __thread int current_device;
int cudaGetDeviceCount(int *n) { *n = device_count(); return 0; }
int cudaGetDevice(int *d) { *d = current_device; return 0; }
int cudaSetDevice(int d) {
    if (d < 0 || d >= device_count()) return 101; /* cudaErrorInvalidDevice */
    current_device = d;
    return 0;
}
int cudaDeviceSynchronize(void) { return 0; }
int cudaGetLastError(void) { return 0; }
/* Each allocation is preceded by its mapping's size and its device. */
int cudaMalloc(void **p, size_t n) {
    void *m = mmap(NULL, n + 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 2;
    ((size_t *)m)[0] = n + 16;
    ((size_t *)m)[1] = (size_t)current_device;
    *p = (char *)m + 16;
    return 0;
}
int cudaFree(void *p) {
    if (p) { char *m = (char *)p - 16; munmap(m, *(size_t *)m); }
    return 0;
}
/* For this file's own allocations only: device memory of its device. */
struct pointer_attributes { int type, device; void *device_pointer, *host_pointer; };
int cudaPointerGetAttributes(struct pointer_attributes *a, const void *p) {
    a->type = 2; /* cudaMemoryTypeDevice */
    a->device = (int)((const size_t *)p)[-1];
    a->device_pointer = (void *)p;
    a->host_pointer = NULL;
    return 0;
}
/* A 16 GiB device, all of it free. */
#define CPU_DEVICE_MEMORY ((size_t)16 << 30)
int cudaMemGetInfo(size_t *free_b, size_t *total) {
    if (free_b) *free_b = CPU_DEVICE_MEMORY;
    if (total) *total = CPU_DEVICE_MEMORY;
    return 0;
}
/* cudaDeviceProp as CUDA 13 lays it out (offsets from its
 * driver_types.h): the name at 0, the sizes and limits of an sm_90 part
 * with two multiprocessors (frameworks size launches by them, and divide
 * by the count); the rest zero. */
static void put_int(void *prop, size_t at, int v) { memcpy((char *)prop + at, &v, sizeof v); }
static void put_size(void *prop, size_t at, size_t v) { memcpy((char *)prop + at, &v, sizeof v); }
int cudaGetDeviceProperties(void *prop, int device) {
    if (device < 0 || device >= device_count()) return 101;
    memset(prop, 0, 1008);
    strcpy((char *)prop, "CPU stand-in");
    put_size(prop, 288, CPU_DEVICE_MEMORY); /* totalGlobalMem */
    put_size(prop, 296, 48 << 10);          /* sharedMemPerBlock */
    put_int(prop, 304, 65536);              /* regsPerBlock */
    put_int(prop, 308, 32);                 /* warpSize */
    put_int(prop, 320, 1024);               /* maxThreadsPerBlock */
    put_int(prop, 324, 1024);               /* maxThreadsDim */
    put_int(prop, 328, 1024);
    put_int(prop, 332, 64);
    put_int(prop, 336, 0x7fffffff);         /* maxGridSize */
    put_int(prop, 340, 65535);
    put_int(prop, 344, 65535);
    put_int(prop, 360, 9);                  /* major */
    put_int(prop, 364, 0);                  /* minor */
    put_int(prop, 384, 2);                  /* multiProcessorCount */
    put_int(prop, 596, 1 << 20);            /* l2CacheSize */
    put_int(prop, 604, 2048);               /* maxThreadsPerMultiProcessor */
    put_size(prop, 624, 228 << 10);         /* sharedMemPerMultiprocessor */
    return 0;
}
int cudaMemcpy(void *d, const void *s, size_t n, int kind) { (void)kind; memmove(d, s, n); return 0; }
int cudaMemcpyAsync(void *d, const void *s, size_t n, int kind, void *st) { (void)st; return cudaMemcpy(d, s, n, kind); }
int cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return 0; }
/* A stream is its priority and flags; NULL, cudaStreamLegacy (1) and
 * cudaStreamPerThread (2) have neither. */
struct stream { int priority; unsigned flags; int device; unsigned long long id; };
static const struct stream *stream_of(const void *s) {
    static __thread struct stream none;
    /* The default streams are the calling thread's device's; ids 0 to 2. */
    none.device = current_device;
    none.id = (uintptr_t)s;
    return (uintptr_t)s <= 2 ? &none : s;
}
int cudaStreamCreateWithPriority(void **s, unsigned flags, int priority);
int cudaStreamCreate(void **s) { return cudaStreamCreateWithPriority(s, 0, 0); }
int cudaStreamCreateWithFlags(void **s, unsigned f) { return cudaStreamCreateWithPriority(s, f, 0); }
int cudaStreamDestroy(void *s) { free(s); return 0; }
int cudaStreamGetFlags(void *s, unsigned *flags) { *flags = stream_of(s)->flags; return 0; }
int cudaStreamGetDevice(void *s, int *device) { *device = stream_of(s)->device; return 0; }
int cudaStreamGetId(void *s, unsigned long long *id) { *id = stream_of(s)->id; return 0; }
int cudaStreamSynchronize(void *s) { (void)s; return 0; }
/* Streams remember their priority (the first int of their block). */
int cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return 0;
}
int cudaStreamCreateWithPriority(void **s, unsigned flags, int priority) {
    if (priority > 0) priority = 0;
    if (priority < -5) priority = -5;
    static unsigned long long next_id = 16;
    struct stream *p = malloc(sizeof *p);
    if (!p) return 2;
    p->priority = priority;
    p->flags = flags;
    p->device = current_device;
    p->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
    *s = p;
    return 0;
}
int cudaStreamGetPriority(void *s, int *priority) { *priority = stream_of(s)->priority; return 0; }
int cudaStreamIsCapturing(void *s, int *status) { (void)s; *status = 0; return 0; }
/* One device: peer copies are copies within it. */
int cudaMemcpyPeer(void *d, int dd, const void *s, int sd, size_t n) {
    if (dd != 0 || sd != 0) return 101; /* cudaErrorInvalidDevice */
    memmove(d, s, n);
    return 0;
}
int cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n, void *st) {
    (void)st;
    return cudaMemcpyPeer(d, dd, s, sd, n);
}
/* No driver here either. */
int cudaGetDriverEntryPoint(const char *sym, void **fn, unsigned long long flags, int *status) {
    (void)flags;
    if (!sym || !fn) return 1;
    *fn = NULL;
    if (status) *status = 1; /* cudaDriverEntryPointSymbolNotFound */
    return 0;
}
/* Work here is done when it is enqueued: host functions run at once. */
int cudaLaunchHostFunc(void *s, void (*fn)(void *), void *data) {
    (void)s;
    if (!fn) return 1;
    fn(data);
    return 0;
}
int cudaStreamAddCallback(void *s, void (*cb)(void *, int, void *), void *data, unsigned flags) {
    if (!cb || flags) return 1;
    cb(s, 0, data);
    return 0;
}
/* CUDA 13's form; nothing here ever captures. */
int cudaStreamGetCaptureInfo(void *s, int *status, unsigned long long *id, void **graph,
                             const void **deps, const void **edges, size_t *ndeps) {
    (void)s;
    if (!status) return 1;
    *status = 0;
    if (id) *id = 0;
    if (graph) *graph = NULL;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
    return 0;
}
int cudaDeviceCanAccessPeer(int *can, int device, int peer) {
    if (device != 0 || peer != 0) return 101; /* cudaErrorInvalidDevice */
    *can = 0;
    return 0;
}
int cudaDeviceEnablePeerAccess(int peer, unsigned flags) { (void)flags; return peer == 0 ? 704 : 101; }
/* Pitched memory as Wormhole's client gives it (rows 512 bytes apart or a
 * multiple), so both ways print the same pitch. */
int cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height) {
    *pitch = (width + 511) / 512 * 512;
    return cudaMalloc(p, *pitch * height);
}
int cudaMemcpy2D(void *d, size_t dpitch, const void *s, size_t spitch, size_t width, size_t height, int kind) {
    (void)kind;
    if (width > dpitch || width > spitch) return 12; /* cudaErrorInvalidPitchValue */
    for (size_t r = 0; r < height; r++) memmove((char *)d + r * dpitch, (const char *)s + r * spitch, width);
    return 0;
}
int cudaMemcpy2DAsync(void *d, size_t dpitch, const void *s, size_t spitch, size_t width, size_t height,
                      int kind, void *st) {
    (void)st;
    return cudaMemcpy2D(d, dpitch, s, spitch, width, height, kind);
}
int cudaMemset2D(void *p, size_t pitch, int v, size_t width, size_t height) {
    if (width > pitch) return 12; /* cudaErrorInvalidPitchValue */
    for (size_t r = 0; r < height; r++) memset((char *)p + r * pitch, v, width);
    return 0;
}
int cudaMemset2DAsync(void *p, size_t pitch, int v, size_t width, size_t height, void *st) {
    (void)st;
    return cudaMemset2D(p, pitch, v, width, height);
}
/* 3D: slices of 2D blocks (linear memory only). */
struct pitched { char *ptr; size_t pitch, xsize, ysize; };
struct extent { size_t width, height, depth; };
struct pos { size_t x, y, z; };
struct memcpy3d { void *src_array; struct pos src_pos; struct pitched src; void *dst_array; struct pos dst_pos;
                  struct pitched dst; struct extent extent; int kind; };
int cudaMalloc3D(struct pitched *p, struct extent e) {
    size_t pitch;
    void *m;
    int r = cudaMallocPitch(&m, &pitch, e.width, e.height * e.depth);
    if (r == 0) { p->ptr = m; p->pitch = pitch; p->xsize = e.width; p->ysize = e.height; }
    return r;
}
int cudaMemset3D(struct pitched p, int v, struct extent e) {
    for (size_t z = 0; z < e.depth; z++) {
        int r = cudaMemset2D(p.ptr + z * p.pitch * p.ysize, p.pitch, v, e.width, e.height);
        if (r) return r;
    }
    return 0;
}
int cudaMemset3DAsync(struct pitched p, int v, struct extent e, void *st) { (void)st; return cudaMemset3D(p, v, e); }
int cudaMemcpy3D(const struct memcpy3d *c) {
    if (c->src_array || c->dst_array) return 1;
    for (size_t z = 0; z < c->extent.depth; z++) {
        const struct pitched *s = &c->src, *d = &c->dst;
        int r = cudaMemcpy2D(d->ptr + ((c->dst_pos.z + z) * d->ysize + c->dst_pos.y) * d->pitch + c->dst_pos.x, d->pitch,
                             s->ptr + ((c->src_pos.z + z) * s->ysize + c->src_pos.y) * s->pitch + c->src_pos.x, s->pitch,
                             c->extent.width, c->extent.height, c->kind);
        if (r) return r;
    }
    return 0;
}
int cudaMemcpy3DAsync(const struct memcpy3d *c, void *st) { (void)st; return cudaMemcpy3D(c); }
/* For the programs run on this stand-in directly: the default pool caches
 * nothing, as Wormhole's client keeps it (crates/wormhole/cudart/src/
 * pools.rs), so both ways print the same figures. */
static struct pool {
    int reuse[3];
    unsigned long long threshold, used, used_high, reserved_high;
} pool0 = {{1, 1, 1}, 0, 0, 0, 0};
int cudaMallocAsync(void **p, size_t n, void *s) {
    (void)s;
    int r = cudaMalloc(p, n);
    if (r == 0) {
        pool0.used += n;
        if (pool0.used > pool0.used_high) pool0.used_high = pool0.used;
        if (pool0.used > pool0.reserved_high) pool0.reserved_high = pool0.used;
    }
    return r;
}
int cudaFreeAsync(void *p, void *s) {
    (void)s;
    if (p) pool0.used -= *(size_t *)((char *)p - 16) - 16;
    return cudaFree(p);
}
int cudaDeviceGetDefaultMemPool(void **pool, int device) {
    if (!pool) return 1;
    if (device != 0) return 101;
    *pool = &pool0;
    return 0;
}
int cudaMemPoolGetAttribute(void *pool, int attr, void *v) {
    if (pool != &pool0 || !v) return 1;
    unsigned long long *u = v;
    switch (attr) {
    case 1: case 2: case 3: *(int *)v = pool0.reuse[attr - 1]; return 0;
    case 4: *u = pool0.threshold; return 0;
    case 5: case 7: *u = pool0.used; return 0;
    case 6: *u = pool0.reserved_high; return 0;
    case 8: *u = pool0.used_high; return 0;
    default: return 1;
    }
}
int cudaMemPoolSetAttribute(void *pool, int attr, void *v) {
    if (pool != &pool0 || !v) return 1;
    unsigned long long u = *(unsigned long long *)v;
    switch (attr) {
    case 1: case 2: case 3: pool0.reuse[attr - 1] = *(int *)v != 0; return 0;
    case 4: pool0.threshold = u; return 0;
    case 6: if (u) return 1; pool0.reserved_high = pool0.used; return 0;
    case 8: if (u) return 1; pool0.used_high = pool0.used; return 0;
    default: return 1;
    }
}
int cudaMemPoolTrimTo(void *pool, size_t keep) { (void)keep; return pool == &pool0 ? 0 : 1; }
int cudaDeviceGetPCIBusId(char *id, int len, int device) {
    char s[16];
    if (!id || len <= 0) return 1;
    if (device < 0 || device >= device_count()) return 101;
    snprintf(s, sizeof s, "0000:%02x:00.0", device);
    strncpy(id, s, (size_t)len);
    id[len - 1] = 0;
    return 0;
}
int cudaDeviceGetByPCIBusId(int *device, const char *id) {
    if (!device || !id) return 1;
    unsigned bus = 0;
    if (sscanf(id, "0000:%x:00.0", &bus) != 1 || (int)bus >= device_count()) return 101;
    *device = (int)bus;
    return 0;
}
/* Per device (cudaLimit 0 to 6; the stack starts at 1 KiB, the printf
 * FIFO and malloc heap at 8 MiB) and one cache preference, as set. */
static size_t limits[8][7];
static int cache_config[8];
int cudaDeviceSetLimit(int limit, size_t v) {
    if (limit < 0 || limit > 6) return 1;
    limits[current_device][limit] = v;
    return 0;
}
int cudaDeviceGetLimit(size_t *v, int limit) {
    static const size_t start[7] = {1024, 8 << 20, 8 << 20, 2, 2048, 0, 0};
    if (!v || limit < 0 || limit > 6) return 1;
    *v = limits[current_device][limit] ? limits[current_device][limit] : start[limit];
    return 0;
}
int cudaDeviceSetCacheConfig(int c) {
    if (c < 0 || c > 3) return 1;
    cache_config[current_device] = c;
    return 0;
}
int cudaDeviceGetCacheConfig(int *c) { if (!c) return 1; *c = cache_config[current_device]; return 0; }
static unsigned device_flags;
int cudaSetDeviceFlags(unsigned f) { device_flags = f; return 0; }
/* cudaDeviceScheduleAuto, and cudaDeviceMapHost as the runtime reports. */
int cudaGetDeviceFlags(unsigned *f) { if (!f) return 1; *f = device_flags | 8; return 0; }
/* No two of these devices reach each other's memory. */
int cudaDeviceGetP2PAttribute(int *v, int attr, int src, int dst) {
    if (!v || attr < 1 || attr > 4 || src == dst || src >= device_count() || dst >= device_count()) return 1;
    *v = 0;
    return 0;
}
int cudaProfilerStart(void) { return 0; }
int cudaProfilerStop(void) { return 0; }
static __thread int capture_mode;
int cudaThreadExchangeStreamCaptureMode(int *mode) { int old = capture_mode; capture_mode = *mode; *mode = old; return 0; }

/* Events: work here is done when it is enqueued, so an event is complete
 * once recorded; it keeps when that was, for cudaEventElapsedTime. */
struct event { unsigned flags; int recorded; struct timespec at; };
int cudaEventCreateWithFlags(void **e, unsigned flags) {
    struct event *v = calloc(1, sizeof *v);
    if (!v) return 2;
    v->flags = flags;
    *e = v;
    return 0;
}
int cudaEventCreate(void **e) { return cudaEventCreateWithFlags(e, 0); }
int cudaEventRecord(void *e, void *s) {
    struct event *v = e;
    (void)s;
    v->recorded = 1;
    clock_gettime(CLOCK_MONOTONIC, &v->at);
    return 0;
}
int cudaEventRecordWithFlags(void *e, void *s, unsigned f) { (void)f; return cudaEventRecord(e, s); }
int cudaEventSynchronize(void *e) { (void)e; return 0; }
int cudaEventQuery(void *e) { (void)e; return 0; }
int cudaEventElapsedTime(float *ms, void *a, void *b) {
    struct event *x = a, *y = b;
    if (!ms) return 1;
    /* cudaEventDisableTiming, or never recorded: cudaErrorInvalidResourceHandle. */
    if ((x->flags | y->flags) & 2 || !x->recorded || !y->recorded) return 400;
    *ms = (float)((y->at.tv_sec - x->at.tv_sec) * 1e3 + (y->at.tv_nsec - x->at.tv_nsec) / 1e6);
    return 0;
}
int cudaEventDestroy(void *e) { free(e); return 0; }
int cudaStreamWaitEvent(void *s, void *e, unsigned f) { (void)s; (void)e; (void)f; return 0; }
int cudaStreamQuery(void *s) { (void)s; return 0; }

/* ---- Kernels ------------------------------------------------------------- */
/* Registration keeps each kernel's name by the host address the server
 * registered it under; a launch runs the kernel's CPU twin, compiled from
 * the same element functions as the GPU kernels (examples/cuda/
 * lenet_kernels.h), over the launch's threads. Kernels of other programs
 * are unknown here: their launches fail with cudaErrorInvalidDeviceFunction. */
struct dim3 { unsigned x, y, z; };
static struct kernel { const void *host; char name[64]; } kernels[256];
static int nkernels;
void **__cudaRegisterFatBinary(void *fat) { static void *module; module = fat; return &module; }
void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
void __cudaUnregisterFatBinary(void **h) { (void)h; }
/* __device__ and __constant__ variables: each host shadow's own block of
 * "device" memory, of the registered size. */
static struct var { const void *host; char *mem; size_t size; } vars[256];
static int nvars;
void __cudaRegisterVar(void **h, char *host, char *dev, const char *name, int ext, size_t size, int constant,
                       int global) {
    (void)h; (void)dev; (void)name; (void)ext; (void)constant; (void)global;
    if (nvars == 256 || cudaMalloc((void **)&vars[nvars].mem, size ? size : 1) != 0) return;
    memset(vars[nvars].mem, 0, size);
    vars[nvars].host = host;
    vars[nvars++].size = size;
}
static struct var *var_of(const void *host) {
    for (int i = 0; i < nvars; i++)
        if (vars[i].host == host) return &vars[i];
    return NULL;
}
int cudaMemcpyToSymbol(const void *sym, const void *src, size_t n, size_t off, int kind) {
    struct var *v = var_of(sym);
    (void)kind;
    if (!v) return 13; /* cudaErrorInvalidSymbol */
    if (off > v->size || n > v->size - off) return 1;
    memmove(v->mem + off, src, n);
    return 0;
}
int cudaMemcpyFromSymbol(void *dst, const void *sym, size_t n, size_t off, int kind) {
    struct var *v = var_of(sym);
    (void)kind;
    if (!v) return 13;
    if (off > v->size || n > v->size - off) return 1;
    memmove(dst, v->mem + off, n);
    return 0;
}
int cudaMemcpyToSymbolAsync(const void *sym, const void *src, size_t n, size_t off, int kind, void *s) {
    (void)s;
    return cudaMemcpyToSymbol(sym, src, n, off, kind);
}
int cudaMemcpyFromSymbolAsync(void *dst, const void *sym, size_t n, size_t off, int kind, void *s) {
    (void)s;
    return cudaMemcpyFromSymbol(dst, sym, n, off, kind);
}
int cudaGetSymbolAddress(void **p, const void *sym) {
    struct var *v = var_of(sym);
    if (!v) return 13;
    *p = v->mem;
    return 0;
}
int cudaGetSymbolSize(size_t *n, const void *sym) {
    struct var *v = var_of(sym);
    if (!v) return 13;
    *n = v->size;
    return 0;
}
void __cudaRegisterFunction(void **h, const char *host, char *dev, const char *name, int limit, void *tid,
                            void *bid, void *bdim, void *gdim, int *wsize) {
    (void)h; (void)dev; (void)limit; (void)tid; (void)bid; (void)bdim; (void)gdim; (void)wsize;
    if (nkernels == 256 || strlen(name) >= sizeof kernels[0].name) return;
    kernels[nkernels].host = host;
    strcpy(kernels[nkernels++].name, name);
}
int cudaLaunchKernel(const void *func, struct dim3 grid, struct dim3 block, void **args, size_t shared, void *st) {
    (void)shared; (void)st;
    const char *name = NULL;
    for (int k = 0; k < nkernels; k++)
        if (kernels[k].host == func) name = kernels[k].name;
    if (!name || !args) return 98;
    long threads = (long)grid.x * grid.y * grid.z * block.x * block.y * block.z;
#define K(kname)                                                                  \
    if (!strcmp(name, #kname)) {                                                  \
        struct kname##_args p;                                                    \
        memcpy(&p, args[0], sizeof p);                                            \
        for (long i = 0; i < p.n && i < threads; i++) kname##_at(i, p);           \
        return 0;                                                                 \
    }
    LENET_KERNELS(K)
#undef K
    return 98; /* cudaErrorInvalidDeviceFunction */
}
/* Kernel queries: made-up answers that depend on the kernel (its name's
 * length as its registers), so a test can tell that a query reached the
 * right one. */
static const char *kernel_name(const void *func) {
    for (int k = 0; k < nkernels; k++)
        if (kernels[k].host == func) return kernels[k].name;
    return NULL;
}
int cudaFuncGetAttributes(void *attr, const void *func) {
    const char *name = kernel_name(func);
    if (!name) return 98;
    int a[36] = {0}; /* 144 bytes: three size_t, then ints from word 6 */
    a[6] = 1024;                 /* maxThreadsPerBlock */
    a[7] = (int)strlen(name);    /* numRegs */
    a[11] = 48 * 1024;           /* maxDynamicSharedSizeBytes */
    memcpy(attr, a, sizeof a);
    return 0;
}
int cudaFuncSetAttribute(const void *func, int attr, int value) { (void)attr; (void)value; return kernel_name(func) ? 0 : 98; }
int cudaFuncSetCacheConfig(const void *func, int config) { (void)config; return kernel_name(func) ? 0 : 98; }
int cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func, int block, size_t shared,
                                                            unsigned flags) {
    (void)shared; (void)flags;
    if (!kernel_name(func)) return 98;
    if (block <= 0) return 1;
    *n = 2048 / block;
    return 0;
}
int cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block, size_t shared) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, func, block, shared, 0);
}
struct launch_config { struct dim3 grid, block; size_t shared; void *stream; void *attrs; unsigned nattrs; };
int cudaLaunchKernelExC(const struct launch_config *c, const void *func, void **args) {
    return cudaLaunchKernel(func, c->grid, c->block, args, c->shared, c->stream);
}
/* What nvcc's <<<>>> calls, so that the program can also run on this
 * stand-in directly ("natively"), for results to compare with Wormhole's. */
static struct { struct dim3 grid, block; size_t shared; void *stream; } config;
unsigned __cudaPushCallConfiguration(struct dim3 grid, struct dim3 block, size_t shared, void *stream) {
    config.grid = grid; config.block = block; config.shared = shared; config.stream = stream;
    return 0;
}
int __cudaPopCallConfiguration(struct dim3 *grid, struct dim3 *block, size_t *shared, void **stream) {
    *grid = config.grid; *block = config.block; *shared = config.shared; *stream = config.stream;
    return 0;
}
int __cudaGetKernel(const void **kernel, const void *host) { *kernel = host; return 0; }
int __cudaLaunchKernel(const void *k, struct dim3 g, struct dim3 b, void **args, size_t shared, void *st) {
    return cudaLaunchKernel(k, g, b, args, shared, st);
}
const char *cudaGetErrorString(int e) { return e ? "error on the CPU stand-in" : "no error"; }

/* The names code built with `--default-stream per-thread` calls: this
 * device has one stream of work, so each is the function itself. */
#define PER_THREAD(f, v) extern __typeof__(f) f##v __attribute__((alias(#f)));
PER_THREAD(cudaGetDriverEntryPoint, _ptsz)
PER_THREAD(cudaMemcpy, _ptds)
PER_THREAD(cudaMemcpyAsync, _ptsz)
PER_THREAD(cudaMemset, _ptds)
PER_THREAD(cudaMallocAsync, _ptsz)
PER_THREAD(cudaFreeAsync, _ptsz)
PER_THREAD(cudaMemcpy2D, _ptds)
PER_THREAD(cudaMemcpy2DAsync, _ptsz)
PER_THREAD(cudaMemset2D, _ptds)
PER_THREAD(cudaMemset2DAsync, _ptsz)
PER_THREAD(cudaMemset3D, _ptds)
PER_THREAD(cudaMemset3DAsync, _ptsz)
PER_THREAD(cudaMemcpy3D, _ptds)
PER_THREAD(cudaMemcpy3DAsync, _ptsz)
PER_THREAD(cudaStreamSynchronize, _ptsz)
PER_THREAD(cudaStreamQuery, _ptsz)
PER_THREAD(cudaStreamWaitEvent, _ptsz)
PER_THREAD(cudaStreamGetPriority, _ptsz)
PER_THREAD(cudaStreamGetFlags, _ptsz)
PER_THREAD(cudaStreamGetDevice, _ptsz)
PER_THREAD(cudaStreamGetId, _ptsz)
PER_THREAD(cudaMemcpyToSymbol, _ptds)
PER_THREAD(cudaMemcpyFromSymbol, _ptds)
PER_THREAD(cudaMemcpyToSymbolAsync, _ptsz)
PER_THREAD(cudaMemcpyFromSymbolAsync, _ptsz)
PER_THREAD(cudaStreamIsCapturing, _ptsz)
PER_THREAD(cudaStreamGetCaptureInfo, _ptsz)
PER_THREAD(cudaLaunchHostFunc, _ptsz)
PER_THREAD(cudaStreamAddCallback, _ptsz)
PER_THREAD(cudaEventRecord, _ptsz)
PER_THREAD(cudaEventRecordWithFlags, _ptsz)
PER_THREAD(cudaLaunchKernel, _ptsz)
PER_THREAD(cudaLaunchKernelExC, _ptsz)
PER_THREAD(__cudaLaunchKernel, _ptsz)

/* ---- cuBLAS -------------------------------------------------------------- */
struct blas { void *stream; int mode; int math; void *workspace; size_t workspace_bytes; };
#define H ((struct blas *)h)
int cublasCreate_v2(void **h) { if (!h) return 7; *h = calloc(1, sizeof(struct blas)); return *h ? 0 : 3; }
int cublasDestroy_v2(void *h) { if (!h) return 1; free(h); return 0; }
int cublasSetStream_v2(void *h, void *s) { if (!h) return 1; H->stream = s; return 0; }
int cublasSetPointerMode_v2(void *h, int m) { if (!h) return 1; if (m != 0 && m != 1) return 7; H->mode = m; return 0; }
int cublasSetMathMode(void *h, int m) { if (!h) return 1; H->math = m; return 0; }
int cublasGetMathMode(void *h, int *m) { if (!h) return 1; if (!m) return 7; *m = H->math; return 0; }
/* Kept, never used: this device's BLAS needs no scratch memory. */
int cublasSetWorkspace_v2(void *h, void *w, size_t bytes) {
    if (!h) return 1;
    H->workspace = w;
    H->workspace_bytes = bytes;
    return 0;
}

#define AT(M, ld, i, j) (M)[(size_t)(i) + (size_t)(j) * (size_t)(ld)]
#define GEMM(NAME, T)                                                                                  \
    static void NAME##_one(int ta, int tb, int m, int n, int k, T al, const T *A, int lda, const T *B, \
                           int ldb, T be, T *C, int ldc) {                                             \
        for (int j = 0; j < n; j++)                                                                    \
            for (int i = 0; i < m; i++) {                                                              \
                T s = 0;                                                                               \
                for (int l = 0; l < k; l++)                                                            \
                    s += (ta ? AT(A, lda, l, i) : AT(A, lda, i, l)) * (tb ? AT(B, ldb, j, l) : AT(B, ldb, l, j)); \
                AT(C, ldc, i, j) = al * s + (be == 0 ? 0 : be * AT(C, ldc, i, j));                     \
            }                                                                                          \
    }
GEMM(sgemm, float)
GEMM(dgemm, double)
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *al, const float *A, int lda,
                   const float *B, int ldb, const float *be, float *C, int ldc) {
    if (!h) return 1;
    sgemm_one(ta, tb, m, n, k, *al, A, lda, B, ldb, *be, C, ldc);
    return 0;
}
int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *al, const double *A, int lda,
                   const double *B, int ldb, const double *be, double *C, int ldc) {
    if (!h) return 1;
    dgemm_one(ta, tb, m, n, k, *al, A, lda, B, ldb, *be, C, ldc);
    return 0;
}
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *al, const float *A, int lda,
                              long long sa, const float *B, int ldb, long long sb, const float *be, float *C,
                              int ldc, long long sc, int batch) {
    if (!h) return 1;
    for (int b = 0; b < batch; b++) sgemm_one(ta, tb, m, n, k, *al, A + b * sa, lda, B + b * sb, ldb, *be, C + b * sc, ldc);
    return 0;
}
int cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const double *al, const double *A,
                              int lda, long long sa, const double *B, int ldb, long long sb, const double *be,
                              double *C, int ldc, long long sc, int batch) {
    if (!h) return 1;
    for (int b = 0; b < batch; b++) dgemm_one(ta, tb, m, n, k, *al, A + b * sa, lda, B + b * sb, ldb, *be, C + b * sc, ldc);
    return 0;
}
/* Mixed precision: elements of CUDA_R_32F (0), R_16F (2) or R_16BF (14),
 * accumulated in float; scalars float, or half for CUBLAS_COMPUTE_16F. */
static int ex_sized(int ty) { return ty == 0 || ty == 2 || ty == 14; }
static float ex_load(const void *p, int ty, size_t i) {
    if (ty == 2) return (float)((const _Float16 *)p)[i];
    if (ty == 14) {
        uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    return ((const float *)p)[i];
}
static void ex_store(void *p, int ty, size_t i, float v) {
    if (ty == 2) { ((_Float16 *)p)[i] = (_Float16)v; return; }
    if (ty == 14) { /* round to nearest even */
        uint32_t b;
        memcpy(&b, &v, 4);
        b += 0x7fff + ((b >> 16) & 1);
        ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
        return;
    }
    ((float *)p)[i] = v;
}
static float ex_scalar(const void *p, int compute) {
    return compute == 64 || compute == 65 ? (float)*(const _Float16 *)p : *(const float *)p;
}
static void gemm_ex_one(int ta, int tb, int m, int n, int k, float al, const void *A, int at, int lda, const void *B,
                        int bt, int ldb, float be, void *C, int ct, int ldc) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0;
            for (int l = 0; l < k; l++)
                s += ex_load(A, at, ta ? l + (size_t)i * lda : i + (size_t)l * lda) *
                     ex_load(B, bt, tb ? j + (size_t)l * ldb : l + (size_t)j * ldb);
            size_t c = i + (size_t)j * ldc;
            ex_store(C, ct, c, al * s + (be == 0 ? 0 : be * ex_load(C, ct, c)));
        }
}
static size_t ex_bytes(int ty) { return ty == 0 ? 4 : 2; }
int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *al, const void *A, int at,
                               int lda, long long sa, const void *B, int bt, int ldb, long long sb, const void *be,
                               void *C, int ct, int ldc, long long sc, int batch, int compute, int algo) {
    (void)algo;
    if (!h) return 1;
    if (!ex_sized(at) || !ex_sized(bt) || !ex_sized(ct) || compute == 70 || compute == 71) return 15;
    for (int b = 0; b < batch; b++)
        gemm_ex_one(ta, tb, m, n, k, ex_scalar(al, compute), (const char *)A + b * sa * ex_bytes(at), at, lda,
                    (const char *)B + b * sb * ex_bytes(bt), bt, ldb, ex_scalar(be, compute),
                    (char *)C + b * sc * ex_bytes(ct), ct, ldc);
    return 0;
}
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *al, const void *A, int at, int lda,
                 const void *B, int bt, int ldb, const void *be, void *C, int ct, int ldc, int compute, int algo) {
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, al, A, at, lda, 0, B, bt, ldb, 0, be, C, ct, ldc, 0, 1,
                                      compute, algo);
}
int cublasSgemmEx(void *h, int ta, int tb, int m, int n, int k, const float *al, const void *A, int at, int lda,
                  const void *B, int bt, int ldb, const float *be, void *C, int ct, int ldc) {
    return cublasGemmEx(h, ta, tb, m, n, k, al, A, at, lda, B, bt, ldb, be, C, ct, ldc, 68, -1);
}
/* Complex GEMMs (N and T; the conjugate transpose is not this device's),
 * strided batched and single, for cuComplex (C) and cuDoubleComplex (Z). */
#define COMPLEX_GEMM(P, p, T)                                                                                  \
    GEMM(p##gemm, T)                                                                                           \
    int cublas##P##gemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const T *al, const T *A,    \
                                      int lda, long long sa, const T *B, int ldb, long long sb, const T *be,   \
                                      T *C, int ldc, long long sc, int batch) {                                \
        if (!h) return 1;                                                                                      \
        if (ta == 2 || tb == 2) return 15;                                                                     \
        for (int b = 0; b < batch; b++)                                                                        \
            p##gemm_one(ta, tb, m, n, k, *al, A + b * sa, lda, B + b * sb, ldb, *be, C + b * sc, ldc);         \
        return 0;                                                                                              \
    }                                                                                                          \
    int cublas##P##gemm_v2(void *h, int ta, int tb, int m, int n, int k, const T *al, const T *A, int lda,      \
                           const T *B, int ldb, const T *be, T *C, int ldc) {                                  \
        return cublas##P##gemmStridedBatched(h, ta, tb, m, n, k, al, A, lda, 0, B, ldb, 0, be, C, ldc, 0, 1);  \
    }
COMPLEX_GEMM(C, c, float _Complex)
COMPLEX_GEMM(Z, z, double _Complex)
int cublasDgemv_v2(void *h, int t, int m, int n, const double *al, const double *A, int lda, const double *x,
                   int incx, const double *be, double *y, int incy) {
    if (!h) return 1;
    int rows = t ? n : m, cols = t ? m : n;
    for (int i = 0; i < rows; i++) {
        double s = 0;
        for (int j = 0; j < cols; j++) s += (t ? AT(A, lda, j, i) : AT(A, lda, i, j)) * x[j * incx];
        y[i * incy] = *al * s + (*be == 0 ? 0 : *be * y[i * incy]);
    }
    return 0;
}
int cublasDdot_v2(void *h, int n, const double *x, int incx, const double *y, int incy, double *r) {
    if (!h) return 1;
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i * incx] * y[i * incy];
    *r = s;
    return 0;
}
int cublasSgemv_v2(void *h, int t, int m, int n, const float *al, const float *A, int lda, const float *x, int incx,
                   const float *be, float *y, int incy) {
    if (!h) return 1;
    int rows = t ? n : m, cols = t ? m : n;
    for (int i = 0; i < rows; i++) {
        float s = 0;
        for (int j = 0; j < cols; j++) s += (t ? AT(A, lda, j, i) : AT(A, lda, i, j)) * x[j * incx];
        y[i * incy] = *al * s + (*be == 0 ? 0 : *be * y[i * incy]);
    }
    return 0;
}
int cublasSger_v2(void *h, int m, int n, const float *al, const float *x, int incx, const float *y, int incy, float *A, int lda) {
    if (!h) return 1;
    for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) AT(A, lda, i, j) += *al * x[i * incx] * y[j * incy];
    return 0;
}
int cublasSaxpy_v2(void *h, int n, const float *al, const float *x, int incx, float *y, int incy) {
    if (!h) return 1;
    for (int i = 0; i < n; i++) y[i * incy] += *al * x[i * incx];
    return 0;
}
int cublasSscal_v2(void *h, int n, const float *al, float *x, int incx) {
    if (!h) return 1;
    for (int i = 0; i < n; i++) x[i * incx] *= *al;
    return 0;
}
int cublasScopy_v2(void *h, int n, const float *x, int incx, float *y, int incy) {
    if (!h) return 1;
    for (int i = 0; i < n; i++) y[i * incy] = x[i * incx];
    return 0;
}
int cublasSdot_v2(void *h, int n, const float *x, int incx, const float *y, int incy, float *r) {
    if (!h) return 1;
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)x[i * incx] * y[i * incy];
    *r = (float)s;
    return 0;
}
int cublasSnrm2_v2(void *h, int n, const float *x, int incx, float *r) {
    if (!h) return 1;
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)x[i * incx] * x[i * incx];
    *r = (float)sqrt(s);
    return 0;
}
int cublasIsamax_v2(void *h, int n, const float *x, int incx, int *r) {
    if (!h) return 1;
    int best = 0;
    for (int i = 1; i < n; i++) if (fabsf(x[i * incx]) > fabsf(x[best * incx])) best = i;
    *r = n > 0 ? best + 1 : 0;
    return 0;
}

/* ---- cuBLASLt: single precision, column-major, the epilogues PyTorch uses */
struct lt_desc { int compute, scale, ta, tb; unsigned epilogue; const float *bias; long long bias_stride; };
struct lt_layout { int type; uint64_t rows, cols; long long ld, stride; int batch; };
struct lt_pref { uint64_t max_workspace; };
int cublasLtCreate(void **h) { return cublasCreate_v2(h); }
int cublasLtDestroy(void *h) { return cublasDestroy_v2(h); }
int cublasLtMatmulDescCreate(void **d, int compute, int scale) {
    struct lt_desc *x = calloc(1, sizeof *x);
    if (!x) return 3;
    x->compute = compute; x->scale = scale; x->epilogue = 1;
    *d = x;
    return 0;
}
int cublasLtMatmulDescDestroy(void *d) { free(d); return 0; }
/* The attributes Wormhole's server sets (cublasLt.h's numbers). */
int cublasLtMatmulDescSetAttribute(void *d, int attr, const void *v, size_t n) {
    struct lt_desc *x = d;
    switch (attr) {
    case 3: if (n != 4) return 7; memcpy(&x->ta, v, 4); return 0;
    case 4: if (n != 4) return 7; memcpy(&x->tb, v, 4); return 0;
    case 7: if (n != 4) return 7; memcpy(&x->epilogue, v, 4); return 0;
    case 8: if (n != 8) return 7; memcpy(&x->bias, v, 8); return 0;
    case 10: if (n != 8) return 7; memcpy(&x->bias_stride, v, 8); return 0;
    default: return 15;
    }
}
int cublasLtMatrixLayoutCreate(void **l, int type, uint64_t rows, uint64_t cols, long long ld) {
    struct lt_layout *x = calloc(1, sizeof *x);
    if (!x) return 3;
    x->type = type; x->rows = rows; x->cols = cols; x->ld = ld; x->batch = 1;
    *l = x;
    return 0;
}
int cublasLtMatrixLayoutDestroy(void *l) { free(l); return 0; }
int cublasLtMatrixLayoutSetAttribute(void *l, int attr, const void *v, size_t n) {
    struct lt_layout *x = l;
    switch (attr) {
    case 5: if (n != 4) return 7; memcpy(&x->batch, v, 4); return 0;
    case 6: if (n != 8) return 7; memcpy(&x->stride, v, 8); return 0;
    default: return 15;
    }
}
int cublasLtMatmulPreferenceCreate(void **p) { *p = calloc(1, sizeof(struct lt_pref)); return *p ? 0 : 3; }
int cublasLtMatmulPreferenceDestroy(void *p) { free(p); return 0; }
int cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *v, size_t n) {
    if (attr == 1) { if (n != 8) return 7; memcpy(&((struct lt_pref *)p)->max_workspace, v, 8); }
    return 0;
}
/* One algorithm (no workspace) for what this device computes: all R_32F,
 * compute 32F or 32F_FAST_TF32; none for anything else. */
int cublasLtMatmulAlgoGetHeuristic(void *h, void *d, void *a, void *b, void *c, void *dd, void *p, int want,
                                   void *results, int *count) {
    struct lt_desc *x = d;
    struct lt_layout *ls[4] = {a, b, c, dd};
    (void)h; (void)p;
    if (want < 1 || !results || !count) return 7;
    *count = 0;
    if (x->scale != 0 || (x->compute != 68 && x->compute != 77)) return 0;
    for (int i = 0; i < 4; i++) if (ls[i]->type != 0) return 0;
    memset(results, 0, 96);
    *count = 1;
    return 0;
}
static float gelu(float v) { return 0.5f * v * (1 + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))); }
int cublasLtMatmul(void *h, void *d, const void *al, const void *A, void *ad, const void *B, void *bd, const void *be,
                   const void *C, void *cd, void *D, void *dd, const void *algo, void *ws, size_t wsn, void *st) {
    struct lt_desc *x = d;
    struct lt_layout *la = ad, *lb = bd, *lc = cd, *ld = dd;
    float alpha = *(const float *)al, beta = *(const float *)be;
    int m = (int)ld->rows, n = (int)ld->cols, k = (int)(x->ta ? la->rows : la->cols);
    (void)h; (void)algo; (void)ws; (void)wsn; (void)st;
    for (int b = 0; b < ld->batch; b++) {
        const float *a = (const float *)A + b * la->stride, *bb = (const float *)B + b * lb->stride;
        const float *c = (const float *)C + b * lc->stride;
        float *o = (float *)D + b * ld->stride;
        if (c != o)
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++) AT(o, ld->ld, i, j) = beta == 0 ? 0 : AT(c, lc->ld, i, j);
        sgemm_one(x->ta, x->tb, m, n, k, alpha, a, (int)la->ld, bb, (int)lb->ld, beta, o, (int)ld->ld);
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float v = AT(o, ld->ld, i, j);
                if (x->epilogue & 4) v += x->bias[i + b * x->bias_stride];
                if (x->epilogue & 2) v = v > 0 ? v : 0;
                if (x->epilogue & 32) v = gelu(v);
                AT(o, ld->ld, i, j) = v;
            }
    }
    return 0;
}

/* ---- cuRAND -------------------------------------------------------------- */
struct gen { uint64_t seed, offset, pos; };
#define G ((struct gen *)g)
int curandCreateGenerator(void **g, int type) {
    if (type != 100 && type != 101 && type != 141) return 103;
    *g = calloc(1, sizeof(struct gen));
    return *g ? 0 : 102;
}
int curandDestroyGenerator(void *g) { if (!g) return 101; free(g); return 0; }
int curandSetPseudoRandomGeneratorSeed(void *g, unsigned long long s) { if (!g) return 101; G->seed = s; G->pos = 0; return 0; }
int curandSetGeneratorOffset(void *g, unsigned long long o) { if (!g) return 101; G->offset = o; G->pos = 0; return 0; }
int curandSetStream(void *g, void *s) { (void)s; return g ? 0 : 101; }
static uint64_t next(struct gen *g) { /* splitmix64 of (seed, offset + position) */
    uint64_t z = g->seed * 0x9e3779b97f4a7c15ull + (g->offset + g->pos++) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unit(struct gen *g) { return ((next(g) >> 11) + 1) * (1.0 / 9007199254740992.0); } /* (0, 1] */
static double normal(struct gen *g) { return sqrt(-2 * log(unit(g))) * cos(6.283185307179586 * unit(g)); }
int curandGenerate(void *g, unsigned *o, size_t n) { if (!g) return 101; for (size_t i = 0; i < n; i++) o[i] = (unsigned)next(G); return 0; }
int curandGenerateUniform(void *g, float *o, size_t n) { if (!g) return 101; for (size_t i = 0; i < n; i++) o[i] = (float)unit(G); return 0; }
int curandGenerateUniformDouble(void *g, double *o, size_t n) { if (!g) return 101; for (size_t i = 0; i < n; i++) o[i] = unit(G); return 0; }
int curandGenerateNormal(void *g, float *o, size_t n, float m, float s) {
    if (!g) return 101;
    if (n % 2) return 105;
    for (size_t i = 0; i < n; i++) o[i] = m + s * (float)normal(G);
    return 0;
}
int curandGenerateNormalDouble(void *g, double *o, size_t n, double m, double s) {
    if (!g) return 101;
    if (n % 2) return 105;
    for (size_t i = 0; i < n; i++) o[i] = m + s * normal(G);
    return 0;
}

/* ---- cuSOLVER (dense) ---------------------------------------------------- */
/* LAPACK's potrf, potrs, getrf and getrs (and, further down, geqrf,
 * orgqr, ormqr, syevd and cuSOLVER's Jacobi SVD, gesvdj), column-major,
 * in the legacy (S, D) and 64-bit generic (X) forms, for elements of
 * CUDA_R_32F (0) or CUDA_R_64F (1). Both are worked on in double, as the
 * BLAS above accumulates its dots, and stored back in their own type.
 * Statuses are cusolver_common.h's. */
enum { DN_OK = 0, DN_NOT_INITIALIZED = 1, DN_ALLOC_FAILED = 2, DN_INVALID_VALUE = 3, DN_NOT_SUPPORTED = 9 };
struct dn { void *stream; };
struct dn_params { int alg[2]; }; /* by cusolverDnFunction_t: GETRF, POTRF */
int cusolverDnCreate(void **h) {
    if (!h) return DN_INVALID_VALUE;
    *h = calloc(1, sizeof(struct dn));
    return *h ? DN_OK : DN_ALLOC_FAILED;
}
int cusolverDnDestroy(void *h) { if (!h) return DN_NOT_INITIALIZED; free(h); return DN_OK; }
int cusolverDnSetStream(void *h, void *s) {
    if (!h) return DN_NOT_INITIALIZED;
    ((struct dn *)h)->stream = s;
    return DN_OK;
}
int cusolverDnGetStream(void *h, void **s) {
    if (!h) return DN_NOT_INITIALIZED;
    if (!s) return DN_INVALID_VALUE;
    *s = ((struct dn *)h)->stream;
    return DN_OK;
}
int cusolverDnCreateParams(void **p) {
    if (!p) return DN_INVALID_VALUE;
    *p = calloc(1, sizeof(struct dn_params));
    return *p ? DN_OK : DN_ALLOC_FAILED;
}
int cusolverDnDestroyParams(void *p) { if (!p) return DN_INVALID_VALUE; free(p); return DN_OK; }
/* Kept, never used: there is one algorithm of each here. */
int cusolverDnSetAdvOptions(void *p, int function, int algo) {
    if (!p || function < 0 || function > 1 || algo < 0 || algo > 1) return DN_INVALID_VALUE;
    ((struct dn_params *)p)->alg[function] = algo;
    return DN_OK;
}

struct dn_mat { char *p; int ty; int64_t ld; };
static double dn_get(struct dn_mat a, int64_t i, int64_t j) {
    size_t k = (size_t)i + (size_t)j * (size_t)a.ld;
    return a.ty ? ((const double *)a.p)[k] : ((const float *)a.p)[k];
}
static void dn_set(struct dn_mat a, int64_t i, int64_t j, double v) {
    size_t k = (size_t)i + (size_t)j * (size_t)a.ld;
    if (a.ty) ((double *)a.p)[k] = v;
    else ((float *)a.p)[k] = (float)v;
}
/* The Cholesky factor's (i, j), i >= j: L's in the lower triangle, or
 * U = L^T's in the upper one; the other triangle is never touched. */
static double dn_fac(struct dn_mat a, int up, int64_t i, int64_t j) { return up ? dn_get(a, j, i) : dn_get(a, i, j); }
static void dn_set_fac(struct dn_mat a, int up, int64_t i, int64_t j, double v) {
    if (up) dn_set(a, j, i, v);
    else dn_set(a, i, j, v);
}
/* LAPACK's info: 0, or k when the leading minor of order k is not
 * positive definite (its pivot, NaN included, is left in A(k, k)). */
static int64_t dn_cholesky(struct dn_mat a, int up, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double d = dn_fac(a, up, j, j);
        for (int64_t k = 0; k < j; k++) d -= dn_fac(a, up, j, k) * dn_fac(a, up, j, k);
        if (!(d > 0)) { dn_set_fac(a, up, j, j, d); return j + 1; }
        d = sqrt(d);
        dn_set_fac(a, up, j, j, d);
        for (int64_t i = j + 1; i < n; i++) {
            double s = dn_fac(a, up, i, j);
            for (int64_t k = 0; k < j; k++) s -= dn_fac(a, up, i, k) * dn_fac(a, up, j, k);
            dn_set_fac(a, up, i, j, s / d);
        }
    }
    return 0;
}
static void dn_cholesky_solve(struct dn_mat a, int up, int64_t n, struct dn_mat b, int64_t nrhs) {
    for (int64_t c = 0; c < nrhs; c++) {
        for (int64_t i = 0; i < n; i++) { /* L y = b */
            double s = dn_get(b, i, c);
            for (int64_t k = 0; k < i; k++) s -= dn_fac(a, up, i, k) * dn_get(b, k, c);
            dn_set(b, i, c, s / dn_fac(a, up, i, i));
        }
        for (int64_t i = n - 1; i >= 0; i--) { /* L^T x = y */
            double s = dn_get(b, i, c);
            for (int64_t k = i + 1; k < n; k++) s -= dn_fac(a, up, k, i) * dn_get(b, k, c);
            dn_set(b, i, c, s / dn_fac(a, up, i, i));
        }
    }
}
/* Pivots are int (legacy) or int64_t (X), 1-based. */
static int64_t dn_piv(const void *ipiv, int wide, int64_t i) {
    return wide ? ((const int64_t *)ipiv)[i] : ((const int *)ipiv)[i];
}
static void dn_swap(struct dn_mat a, int64_t r, int64_t s, int64_t c) {
    double t = dn_get(a, r, c);
    dn_set(a, r, c, dn_get(a, s, c));
    dn_set(a, s, c, t);
}
/* P A = L U with partial pivoting, or A = L U without it when ipiv is NULL
 * (cuSOLVER's documented meaning of a NULL ipiv). LAPACK's info: 0, or
 * the first exactly zero pivot's index, the factorization going on past it. */
static int64_t dn_lu(struct dn_mat a, int64_t m, int64_t n, void *ipiv, int wide) {
    int64_t info = 0;
    for (int64_t j = 0; j < m && j < n; j++) {
        if (ipiv) {
            int64_t p = j;
            for (int64_t i = j + 1; i < m; i++)
                if (fabs(dn_get(a, i, j)) > fabs(dn_get(a, p, j))) p = i;
            if (wide) ((int64_t *)ipiv)[j] = p + 1;
            else ((int *)ipiv)[j] = (int)(p + 1);
            for (int64_t c = 0; p != j && c < n; c++) dn_swap(a, p, j, c);
        }
        double d = dn_get(a, j, j);
        if (d == 0) { if (!info) info = j + 1; continue; }
        for (int64_t i = j + 1; i < m; i++) dn_set(a, i, j, dn_get(a, i, j) / d);
        for (int64_t c = j + 1; c < n; c++) {
            double u = dn_get(a, j, c);
            for (int64_t i = j + 1; i < m; i++) dn_set(a, i, c, dn_get(a, i, c) - dn_get(a, i, j) * u);
        }
    }
    return info;
}
/* op(A) X = B from dn_lu's factors: A = P L U, so A^T = U^T L^T P^T. */
static void dn_lu_solve(struct dn_mat a, int tr, int64_t n, const void *ipiv, int wide, struct dn_mat b, int64_t nrhs) {
    for (int64_t c = 0; c < nrhs; c++) {
        if (!tr) {
            for (int64_t i = 0; ipiv && i < n; i++) dn_swap(b, i, dn_piv(ipiv, wide, i) - 1, c);
            for (int64_t i = 0; i < n; i++) {
                double s = dn_get(b, i, c);
                for (int64_t k = 0; k < i; k++) s -= dn_get(a, i, k) * dn_get(b, k, c);
                dn_set(b, i, c, s);
            }
            for (int64_t i = n - 1; i >= 0; i--) {
                double s = dn_get(b, i, c);
                for (int64_t k = i + 1; k < n; k++) s -= dn_get(a, i, k) * dn_get(b, k, c);
                dn_set(b, i, c, s / dn_get(a, i, i));
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                double s = dn_get(b, i, c);
                for (int64_t k = 0; k < i; k++) s -= dn_get(a, k, i) * dn_get(b, k, c);
                dn_set(b, i, c, s / dn_get(a, i, i));
            }
            for (int64_t i = n - 1; i >= 0; i--) {
                double s = dn_get(b, i, c);
                for (int64_t k = i + 1; k < n; k++) s -= dn_get(a, k, i) * dn_get(b, k, c);
                dn_set(b, i, c, s);
            }
            for (int64_t i = n - 1; ipiv && i >= 0; i--) dn_swap(b, i, dn_piv(ipiv, wide, i) - 1, c);
        }
    }
}

/* Nothing here needs scratch memory, but callers must still provide what
 * bufferSize asks (potrf's and the X calls' sizes are checked), so that a
 * program that skimps fails here as it would on a GPU: one column for
 * potrf, the longer side for getrf; nothing on the host. */
static int64_t dn_max1(int64_t v) { return v > 1 ? v : 1; }
static int64_t dn_potrf_lwork(int64_t n) { return dn_max1(n); }
static int64_t dn_getrf_lwork(int64_t m, int64_t n) { return dn_max1(m > n ? m : n); }
static size_t dn_size(int ty) { return ty ? sizeof(double) : sizeof(float); }
/* X calls: the types must agree, and be ones this device computes in. */
static int dn_types(void *h, int ty, int other) {
    if (!h) return DN_NOT_INITIALIZED;
    if (ty != other) return DN_INVALID_VALUE;
    return ty == 0 || ty == 1 ? DN_OK : DN_NOT_SUPPORTED;
}
static int dn_potrf_args(void *h, int uplo, int64_t n, int64_t lda) {
    if (!h) return DN_NOT_INITIALIZED;
    return (uplo != 0 && uplo != 1) || n < 0 || lda < dn_max1(n) ? DN_INVALID_VALUE : DN_OK;
}
static int dn_getrf_args(void *h, int64_t m, int64_t n, int64_t lda) {
    if (!h) return DN_NOT_INITIALIZED;
    return m < 0 || n < 0 || lda < dn_max1(m) ? DN_INVALID_VALUE : DN_OK;
}
/* potrs and getrs: op is uplo (at most 1) or trans (at most 2: for real
 * elements CUBLAS_OP_C is T). */
static int dn_solve_args(void *h, int op, int op_max, int64_t n, int64_t nrhs, const void *A, int64_t lda,
                         const void *B, int64_t ldb, const int *info) {
    if (!h) return DN_NOT_INITIALIZED;
    if (op < 0 || op > op_max || n < 0 || nrhs < 0 || lda < dn_max1(n) || ldb < dn_max1(n) || !info ||
        (n && !A) || (n && nrhs && !B))
        return DN_INVALID_VALUE;
    return DN_OK;
}
/* `have`: the workspace's size in elements (legacy getrf is not told). */
static int dn_potrf(void *h, int ty, int uplo, int64_t n, void *A, int64_t lda, const void *work, int64_t have,
                    int *info) {
    int r = dn_potrf_args(h, uplo, n, lda);
    if (r) return r;
    if (have < dn_potrf_lwork(n) || !info || (n && (!A || !work))) return DN_INVALID_VALUE;
    *info = (int)dn_cholesky((struct dn_mat){A, ty, lda}, uplo, n);
    return DN_OK;
}
static int dn_potrs(void *h, int ty, int uplo, int64_t n, int64_t nrhs, const void *A, int64_t lda, void *B,
                    int64_t ldb, int *info) {
    int r = dn_solve_args(h, uplo, 1, n, nrhs, A, lda, B, ldb, info);
    if (r) return r;
    dn_cholesky_solve((struct dn_mat){(void *)A, ty, lda}, uplo, n, (struct dn_mat){B, ty, ldb}, nrhs);
    *info = 0;
    return DN_OK;
}
static int dn_getrf(void *h, int ty, int64_t m, int64_t n, void *A, int64_t lda, const void *work, int64_t have,
                    void *ipiv, int wide, int *info) {
    int r = dn_getrf_args(h, m, n, lda);
    if (r) return r;
    if (have < dn_getrf_lwork(m, n) || !info || (m && n && (!A || !work))) return DN_INVALID_VALUE;
    *info = (int)dn_lu((struct dn_mat){A, ty, lda}, m, n, ipiv, wide);
    return DN_OK;
}
static int dn_getrs(void *h, int ty, int trans, int64_t n, int64_t nrhs, const void *A, int64_t lda,
                    const void *ipiv, int wide, void *B, int64_t ldb, int *info) {
    int r = dn_solve_args(h, trans, 2, n, nrhs, A, lda, B, ldb, info);
    if (r) return r;
    /* A pivot out of range would have this process write outside B. */
    for (int64_t i = 0; ipiv && i < n; i++)
        if (dn_piv(ipiv, wide, i) < 1 || dn_piv(ipiv, wide, i) > n) return DN_INVALID_VALUE;
    dn_lu_solve((struct dn_mat){(void *)A, ty, lda}, trans != 0, n, ipiv, wide, (struct dn_mat){B, ty, ldb}, nrhs);
    *info = 0;
    return DN_OK;
}
static int dn_lwork(int r, int64_t need, int *lwork) {
    if (!r && !lwork) r = DN_INVALID_VALUE;
    if (!r) *lwork = (int)need;
    return r;
}
#define DN_LEGACY(P, T, TY)                                                                                    \
    int cusolverDn##P##potrf_bufferSize(void *h, int uplo, int n, T *A, int lda, int *lwork) {                 \
        (void)A;                                                                                               \
        return dn_lwork(dn_potrf_args(h, uplo, n, lda), dn_potrf_lwork(n), lwork);                             \
    }                                                                                                          \
    int cusolverDn##P##potrf(void *h, int uplo, int n, T *A, int lda, T *work, int lwork, int *info) {         \
        return dn_potrf(h, TY, uplo, n, A, lda, work, lwork, info);                                            \
    }                                                                                                          \
    int cusolverDn##P##potrs(void *h, int uplo, int n, int nrhs, const T *A, int lda, T *B, int ldb,           \
                             int *info) {                                                                      \
        return dn_potrs(h, TY, uplo, n, nrhs, A, lda, B, ldb, info);                                           \
    }                                                                                                          \
    int cusolverDn##P##getrf_bufferSize(void *h, int m, int n, T *A, int lda, int *lwork) {                    \
        (void)A;                                                                                               \
        return dn_lwork(dn_getrf_args(h, m, n, lda), dn_getrf_lwork(m, n), lwork);                             \
    }                                                                                                          \
    int cusolverDn##P##getrf(void *h, int m, int n, T *A, int lda, T *work, int *ipiv, int *info) {           \
        return dn_getrf(h, TY, m, n, A, lda, work, INT64_MAX, ipiv, 0, info);                                  \
    }                                                                                                          \
    int cusolverDn##P##getrs(void *h, int trans, int n, int nrhs, const T *A, int lda, const int *ipiv, T *B,  \
                             int ldb, int *info) {                                                             \
        return dn_getrs(h, TY, trans, n, nrhs, A, lda, ipiv, 0, B, ldb, info);                                 \
    }
DN_LEGACY(S, float, 0)
DN_LEGACY(D, double, 1)
/* The 64-bit generic API; params (NULL: the defaults) choose nothing here. */
static int dn_bytes(int r, int64_t need, int ty, size_t *device, size_t *host) {
    if (!r && (!device || !host)) r = DN_INVALID_VALUE;
    if (r) return r;
    *device = (size_t)need * dn_size(ty);
    *host = 0;
    return DN_OK;
}
int cusolverDnXpotrf_bufferSize(void *h, void *params, int uplo, int64_t n, int ty, const void *A, int64_t lda,
                                int compute, size_t *device, size_t *host) {
    (void)params; (void)A;
    int r = dn_types(h, ty, compute);
    return dn_bytes(r ? r : dn_potrf_args(h, uplo, n, lda), dn_potrf_lwork(n), ty, device, host);
}
int cusolverDnXpotrf(void *h, void *params, int uplo, int64_t n, int ty, void *A, int64_t lda, int compute,
                     void *device, size_t device_bytes, void *host, size_t host_bytes, int *info) {
    (void)params; (void)host; (void)host_bytes;
    int r = dn_types(h, ty, compute);
    return r ? r : dn_potrf(h, ty, uplo, n, A, lda, device, (int64_t)(device_bytes / dn_size(ty)), info);
}
int cusolverDnXpotrs(void *h, void *params, int uplo, int64_t n, int64_t nrhs, int ty, const void *A, int64_t lda,
                     int tyb, void *B, int64_t ldb, int *info) {
    (void)params;
    int r = dn_types(h, ty, tyb);
    return r ? r : dn_potrs(h, ty, uplo, n, nrhs, A, lda, B, ldb, info);
}
int cusolverDnXgetrf_bufferSize(void *h, void *params, int64_t m, int64_t n, int ty, const void *A, int64_t lda,
                                int compute, size_t *device, size_t *host) {
    (void)params; (void)A;
    int r = dn_types(h, ty, compute);
    return dn_bytes(r ? r : dn_getrf_args(h, m, n, lda), dn_getrf_lwork(m, n), ty, device, host);
}
int cusolverDnXgetrf(void *h, void *params, int64_t m, int64_t n, int ty, void *A, int64_t lda, int64_t *ipiv,
                     int compute, void *device, size_t device_bytes, void *host, size_t host_bytes, int *info) {
    (void)params; (void)host; (void)host_bytes;
    int r = dn_types(h, ty, compute);
    return r ? r : dn_getrf(h, ty, m, n, A, lda, device, (int64_t)(device_bytes / dn_size(ty)), ipiv, 1, info);
}
int cusolverDnXgetrs(void *h, void *params, int trans, int64_t n, int64_t nrhs, int ty, const void *A, int64_t lda,
                     const int64_t *ipiv, int tyb, void *B, int64_t ldb, int *info) {
    (void)params;
    int r = dn_types(h, ty, tyb);
    return r ? r : dn_getrs(h, ty, trans, n, nrhs, A, lda, ipiv, 1, B, ldb, info);
}

/* QR (LAPACK's geqrf, orgqr and ormqr, unblocked as geqr2, org2r and
 * orm2r) and the symmetric eigenproblem (syevd's contract, by cyclic
 * Jacobi). The reflector H(i) = I - tau(i) v v^T has v(i) = 1 (implied)
 * and v(i+1:) below the diagonal of column i, as geqrf leaves it. */
/* H(i) (v in column i of `v`, `len` long) applied to columns from..to-1
 * of c from the left (rows i..len-1), or to its rows from..to-1 from the
 * right (columns i..len-1). */
static void dn_reflect(struct dn_mat v, int64_t i, int64_t len, double tau, struct dn_mat c, int right, int64_t from,
                       int64_t to) {
    if (tau == 0) return;
    for (int64_t x = from; x < to; x++) {
        double w = right ? dn_get(c, x, i) : dn_get(c, i, x);
        for (int64_t r = i + 1; r < len; r++) w += dn_get(v, r, i) * (right ? dn_get(c, x, r) : dn_get(c, r, x));
        w *= tau;
        if (right) dn_set(c, x, i, dn_get(c, x, i) - w);
        else dn_set(c, i, x, dn_get(c, i, x) - w);
        for (int64_t r = i + 1; r < len; r++) {
            if (right) dn_set(c, x, r, dn_get(c, x, r) - w * dn_get(v, r, i));
            else dn_set(c, r, x, dn_get(c, r, x) - w * dn_get(v, r, i));
        }
    }
}
/* LAPACK's larfg for each column: beta = -sign(alpha) ||(alpha, x)||,
 * tau = (beta - alpha) / beta, v = x / (alpha - beta); tau 0 (H = I) when
 * x is zero. The reflectors are applied as stored (tau and v in the
 * element type), so that orgqr's Q is the one that made R. */
static void dn_qr(struct dn_mat a, int64_t m, int64_t n, struct dn_mat tau) {
    for (int64_t j = 0; j < m && j < n; j++) {
        double alpha = dn_get(a, j, j), xnorm = 0, t = 0;
        for (int64_t i = j + 1; i < m; i++) xnorm = hypot(xnorm, dn_get(a, i, j));
        if (xnorm != 0) {
            double beta = -copysign(hypot(alpha, xnorm), alpha), s = 1 / (alpha - beta);
            t = (beta - alpha) / beta;
            for (int64_t i = j + 1; i < m; i++) dn_set(a, i, j, dn_get(a, i, j) * s);
            dn_set(a, j, j, beta);
        }
        dn_set(tau, j, 0, t);
        dn_reflect(a, j, m, dn_get(tau, j, 0), a, 0, j + 1, n);
    }
}
/* Q's first n columns, H(0) ... H(k-1) applied to the unit matrix's. */
static void dn_form_q(struct dn_mat a, int64_t m, int64_t n, int64_t k, struct dn_mat tau) {
    for (int64_t c = k; c < n; c++)
        for (int64_t r = 0; r < m; r++) dn_set(a, r, c, r == c);
    for (int64_t i = k - 1; i >= 0; i--) {
        double t = dn_get(tau, i, 0);
        dn_reflect(a, i, m, t, a, 0, i + 1, n);
        for (int64_t r = i + 1; r < m; r++) dn_set(a, r, i, -t * dn_get(a, r, i));
        dn_set(a, i, i, 1 - t);
        for (int64_t r = 0; r < i; r++) dn_set(a, r, i, 0);
    }
}
/* C := op(Q) C (left) or C op(Q) (right), Q = H(0) ... H(k-1): Q^T C and
 * C Q take the reflectors first to last, Q C and C Q^T last to first. */
static void dn_apply_q(struct dn_mat a, int left, int tr, int64_t m, int64_t n, int64_t k, struct dn_mat tau,
                       struct dn_mat c) {
    int forward = left == tr;
    for (int64_t s = 0; s < k; s++) {
        int64_t i = forward ? s : k - 1 - s;
        dn_reflect(a, i, left ? m : n, dn_get(tau, i, 0), c, !left, 0, left ? n : m);
    }
}
/* Cyclic Jacobi on s (n x n, full, column-major), v := the rotations'
 * product: sweeps until every off-diagonal element is within
 * DBL_EPSILON ||S||_F (so its eigenvalues are as accurate as a
 * backward-stable method's). 0, or (after 100 sweeps, or for an input not
 * finite) how many pairs did not converge, at least 1. */
static int64_t dn_jacobi(double *s, double *v, int64_t n) {
    double norm = 0;
    for (int64_t i = 0; i < n * n; i++) norm = hypot(norm, s[i]);
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < n; i++) v[i + j * n] = i == j;
    if (!isfinite(norm)) return n;
    double tol = 2.220446049250313e-16 * norm;
    for (int sweep = 0; sweep < 100; sweep++) {
        int64_t rotated = 0;
        for (int64_t p = 0; p < n; p++)
            for (int64_t q = p + 1; q < n; q++) {
                double apq = s[p + q * n];
                if (fabs(apq) <= tol) continue;
                rotated++;
                /* Golub and Van Loan's sym.schur2: J^T S J zeroes (p, q). */
                double theta = (s[q + q * n] - s[p + p * n]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + hypot(1, theta));
                double c = 1 / hypot(1, t), sn = t * c;
                for (int64_t k = 0; k < n; k++) {
                    double kp = s[k + p * n], kq = s[k + q * n];
                    s[k + p * n] = c * kp - sn * kq;
                    s[k + q * n] = sn * kp + c * kq;
                }
                for (int64_t k = 0; k < n; k++) {
                    double pk = s[p + k * n], qk = s[q + k * n];
                    s[p + k * n] = c * pk - sn * qk;
                    s[q + k * n] = sn * pk + c * qk;
                }
                s[p + q * n] = s[q + p * n] = 0;
                for (int64_t k = 0; k < n; k++) {
                    double kp = v[k + p * n], kq = v[k + q * n];
                    v[k + p * n] = c * kp - sn * kq;
                    v[k + q * n] = sn * kp + c * kq;
                }
            }
        if (!rotated) return 0;
    }
    int64_t left = 0;
    for (int64_t p = 0; p < n; p++)
        for (int64_t q = p + 1; q < n; q++) left += !(fabs(s[p + q * n]) <= tol);
    return left ? left : 1;
}
/* syevd: the `uplo` triangle of A read, W := its eigenvalues ascending
 * (equal ones in Jacobi's order) and, for jobz 1, A := their
 * eigenvectors, each with its largest component (the first of equals)
 * positive, so the output is reproducible. A is left as it was for jobz 0
 * (LAPACK lets it be destroyed). Work is in double outside the caller's
 * memory. */
static int dn_eigen(struct dn_mat a, int up, int vectors, int64_t n, struct dn_mat w, int *info) {
    if (n == 0) { *info = 0; return DN_OK; }
    double *s = malloc(2 * (size_t)n * (size_t)n * sizeof(double)), *v = s + (size_t)n * (size_t)n;
    int64_t *order = malloc((size_t)n * sizeof(int64_t));
    if (!s || !order) { free(s); free(order); return DN_ALLOC_FAILED; }
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = j; i < n; i++) s[i + j * n] = s[j + i * n] = up ? dn_get(a, j, i) : dn_get(a, i, j);
    int64_t left = dn_jacobi(s, v, n);
    if (left) {
        for (int64_t i = 0; i < n; i++) dn_set(w, i, 0, NAN);
        free(s);
        free(order);
        *info = (int)(left < INT32_MAX ? left : INT32_MAX);
        return DN_OK;
    }
    for (int64_t p = 0; p < n; p++) { /* a stable insertion sort */
        int64_t i = p;
        for (; i > 0 && s[order[i - 1] * (n + 1)] > s[p * (n + 1)]; i--) order[i] = order[i - 1];
        order[i] = p;
    }
    for (int64_t j = 0; j < n; j++) {
        const double *col = v + order[j] * n;
        dn_set(w, j, 0, s[order[j] * (n + 1)]);
        if (!vectors) continue;
        int64_t big = 0;
        for (int64_t i = 1; i < n; i++)
            if (fabs(col[i]) > fabs(col[big])) big = i;
        double sign = col[big] < 0 ? -1 : 1;
        for (int64_t i = 0; i < n; i++) dn_set(a, i, j, sign * col[i]);
    }
    free(s);
    free(order);
    *info = 0;
    return DN_OK;
}

/* Workspace sizes, in elements: LAPACK's minimum LWORK for each (the
 * unblocked geqrf, orgqr and ormqr need one row or column of it, syevd
 * 2n + 1 without vectors and 1 + 6n + 2n^2 with them). */
static int64_t dn_geqrf_lwork(int64_t n) { return dn_max1(n); }
static int64_t dn_ormqr_lwork(int side, int64_t m, int64_t n) { return dn_max1(side ? m : n); }
static int64_t dn_syevd_lwork(int vectors, int64_t n) {
    return n <= 1 ? 1 : vectors ? 1 + 6 * n + 2 * n * n : 2 * n + 1;
}
static int dn_orgqr_args(void *h, int64_t m, int64_t n, int64_t k, int64_t lda) {
    if (!h) return DN_NOT_INITIALIZED;
    return n < 0 || m < n || k < 0 || k > n || lda < dn_max1(m) ? DN_INVALID_VALUE : DN_OK;
}
/* side: LEFT 0 (A m x k), RIGHT 1 (A n x k); trans as getrs's. */
static int dn_ormqr_args(void *h, int side, int trans, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldc) {
    if (!h) return DN_NOT_INITIALIZED;
    int64_t nq = side ? n : m;
    return side < 0 || side > 1 || trans < 0 || trans > 2 || m < 0 || n < 0 || k < 0 || k > nq ||
                   lda < dn_max1(nq) || ldc < dn_max1(m)
               ? DN_INVALID_VALUE
               : DN_OK;
}
static int dn_syevd_args(void *h, int jobz, int uplo, int64_t n, int64_t lda) {
    if (!h) return DN_NOT_INITIALIZED;
    return jobz < 0 || jobz > 1 || (uplo != 0 && uplo != 1) || n < 0 || lda < dn_max1(n) ? DN_INVALID_VALUE : DN_OK;
}
static int dn_geqrf(void *h, int ty, int64_t m, int64_t n, void *A, int64_t lda, void *tau, const void *work,
                    int64_t have, int *info) {
    int r = dn_getrf_args(h, m, n, lda);
    if (r) return r;
    if (have < dn_geqrf_lwork(n) || !info || (m && n && (!A || !tau || !work))) return DN_INVALID_VALUE;
    dn_qr((struct dn_mat){A, ty, lda}, m, n, (struct dn_mat){tau, ty, 1});
    *info = 0;
    return DN_OK;
}
static int dn_orgqr(void *h, int ty, int64_t m, int64_t n, int64_t k, void *A, int64_t lda, const void *tau,
                    const void *work, int64_t have, int *info) {
    int r = dn_orgqr_args(h, m, n, k, lda);
    if (r) return r;
    if (have < dn_geqrf_lwork(n) || !info || (n && (!A || !work)) || (k && !tau)) return DN_INVALID_VALUE;
    dn_form_q((struct dn_mat){A, ty, lda}, m, n, k, (struct dn_mat){(void *)tau, ty, 1});
    *info = 0;
    return DN_OK;
}
static int dn_ormqr(void *h, int ty, int side, int trans, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                    const void *tau, void *C, int64_t ldc, const void *work, int64_t have, int *info) {
    int r = dn_ormqr_args(h, side, trans, m, n, k, lda, ldc);
    if (r) return r;
    if (have < dn_ormqr_lwork(side, m, n) || !info || (m && n && (!C || !work || (k && (!A || !tau)))))
        return DN_INVALID_VALUE;
    if (m && n)
        dn_apply_q((struct dn_mat){(void *)A, ty, lda}, !side, trans != 0, m, n, k,
                   (struct dn_mat){(void *)tau, ty, 1}, (struct dn_mat){C, ty, ldc});
    *info = 0;
    return DN_OK;
}
static int dn_syevd(void *h, int ty, int jobz, int uplo, int64_t n, void *A, int64_t lda, void *W, const void *work,
                    int64_t have, int *info) {
    int r = dn_syevd_args(h, jobz, uplo, n, lda);
    if (r) return r;
    if (have < dn_syevd_lwork(jobz, n) || !info || (n && (!A || !W || !work))) return DN_INVALID_VALUE;
    return dn_eigen((struct dn_mat){A, ty, lda}, uplo, jobz, n, (struct dn_mat){W, ty, 1}, info);
}
/* A size past an int cannot be asked for through the legacy API. */
static int dn_lwork_int(int r, int64_t need, int *lwork) {
    return dn_lwork(r || need <= INT32_MAX ? r : DN_INVALID_VALUE, need, lwork);
}
#define DN_LEGACY_QR(P, T, TY)                                                                                 \
    int cusolverDn##P##geqrf_bufferSize(void *h, int m, int n, T *A, int lda, int *lwork) {                    \
        (void)A;                                                                                               \
        return dn_lwork_int(dn_getrf_args(h, m, n, lda), dn_geqrf_lwork(n), lwork);                            \
    }                                                                                                          \
    int cusolverDn##P##geqrf(void *h, int m, int n, T *A, int lda, T *tau, T *work, int lwork, int *info) {    \
        return dn_geqrf(h, TY, m, n, A, lda, tau, work, lwork, info);                                          \
    }                                                                                                          \
    int cusolverDn##P##orgqr_bufferSize(void *h, int m, int n, int k, const T *A, int lda, const T *tau,       \
                                        int *lwork) {                                                          \
        (void)A; (void)tau;                                                                                    \
        return dn_lwork_int(dn_orgqr_args(h, m, n, k, lda), dn_geqrf_lwork(n), lwork);                         \
    }                                                                                                          \
    int cusolverDn##P##orgqr(void *h, int m, int n, int k, T *A, int lda, const T *tau, T *work, int lwork,    \
                             int *info) {                                                                      \
        return dn_orgqr(h, TY, m, n, k, A, lda, tau, work, lwork, info);                                       \
    }                                                                                                          \
    int cusolverDn##P##ormqr_bufferSize(void *h, int side, int trans, int m, int n, int k, const T *A, int lda, \
                                        const T *tau, const T *C, int ldc, int *lwork) {                       \
        (void)A; (void)tau; (void)C;                                                                           \
        return dn_lwork_int(dn_ormqr_args(h, side, trans, m, n, k, lda, ldc), dn_ormqr_lwork(side, m, n),      \
                            lwork);                                                                            \
    }                                                                                                          \
    int cusolverDn##P##ormqr(void *h, int side, int trans, int m, int n, int k, const T *A, int lda,           \
                             const T *tau, T *C, int ldc, T *work, int lwork, int *info) {                     \
        return dn_ormqr(h, TY, side, trans, m, n, k, A, lda, tau, C, ldc, work, lwork, info);                  \
    }                                                                                                          \
    int cusolverDn##P##syevd_bufferSize(void *h, int jobz, int uplo, int n, const T *A, int lda, const T *W,   \
                                        int *lwork) {                                                          \
        (void)A; (void)W;                                                                                      \
        return dn_lwork_int(dn_syevd_args(h, jobz, uplo, n, lda), dn_syevd_lwork(jobz, n), lwork);             \
    }                                                                                                          \
    int cusolverDn##P##syevd(void *h, int jobz, int uplo, int n, T *A, int lda, T *W, T *work, int lwork,      \
                             int *info) {                                                                      \
        return dn_syevd(h, TY, jobz, uplo, n, A, lda, W, work, lwork, info);                                   \
    }
DN_LEGACY_QR(S, float, 0)
DN_LEGACY_QR(D, double, 1)
/* The X forms: A, the vector (TAU, W) and the compute type all one type. */
static int dn_types3(void *h, int ty, int vty, int compute) {
    int r = dn_types(h, ty, vty);
    return r ? r : dn_types(h, ty, compute);
}
int cusolverDnXgeqrf_bufferSize(void *h, void *params, int64_t m, int64_t n, int ty, const void *A, int64_t lda,
                                int tytau, const void *tau, int compute, size_t *device, size_t *host) {
    (void)params; (void)A; (void)tau;
    int r = dn_types3(h, ty, tytau, compute);
    return dn_bytes(r ? r : dn_getrf_args(h, m, n, lda), dn_geqrf_lwork(n), ty, device, host);
}
int cusolverDnXgeqrf(void *h, void *params, int64_t m, int64_t n, int ty, void *A, int64_t lda, int tytau, void *tau,
                     int compute, void *device, size_t device_bytes, void *host, size_t host_bytes, int *info) {
    (void)params; (void)host; (void)host_bytes;
    int r = dn_types3(h, ty, tytau, compute);
    return r ? r : dn_geqrf(h, ty, m, n, A, lda, tau, device, (int64_t)(device_bytes / dn_size(ty)), info);
}
int cusolverDnXsyevd_bufferSize(void *h, void *params, int jobz, int uplo, int64_t n, int ty, const void *A,
                                int64_t lda, int tyw, const void *W, int compute, size_t *device, size_t *host) {
    (void)params; (void)A; (void)W;
    int r = dn_types3(h, ty, tyw, compute);
    return dn_bytes(r ? r : dn_syevd_args(h, jobz, uplo, n, lda), dn_syevd_lwork(jobz, n), ty, device, host);
}
int cusolverDnXsyevd(void *h, void *params, int jobz, int uplo, int64_t n, int ty, void *A, int64_t lda, int tyw,
                     void *W, int compute, void *device, size_t device_bytes, void *host, size_t host_bytes, int *info) {
    (void)params; (void)host; (void)host_bytes;
    int r = dn_types3(h, ty, tyw, compute);
    return r ? r : dn_syevd(h, ty, jobz, uplo, n, A, lda, W, device, (int64_t)(device_bytes / dn_size(ty)), info);
}

/* Jacobi SVD (gesvdj): A = U diag(S) V^T by one-sided (Hestenes) Jacobi
 * on A's columns (m >= n) or A^T's (m < n), in double. Its settings, a
 * gesvdjInfo_t (NULL: the defaults): the tolerance (0, the default: the
 * element type's machine epsilon; one under it counts as it), the most
 * sweeps (100), and sort_svd (1), kept but never consulted: NVIDIA
 * documents it for gesvdjBatched only, gesvdj always sorting descending. */
struct dn_gesvdj { double tol; int max_sweeps, sort; };
int cusolverDnCreateGesvdjInfo(void **info) {
    if (!info) return DN_INVALID_VALUE;
    struct dn_gesvdj *p = malloc(sizeof *p);
    if (!p) return DN_ALLOC_FAILED;
    *p = (struct dn_gesvdj){0, 100, 1};
    *info = p;
    return DN_OK;
}
int cusolverDnDestroyGesvdjInfo(void *info) { if (!info) return DN_INVALID_VALUE; free(info); return DN_OK; }
int cusolverDnXgesvdjSetTolerance(void *info, double tolerance) {
    if (!info) return DN_INVALID_VALUE;
    ((struct dn_gesvdj *)info)->tol = tolerance;
    return DN_OK;
}
int cusolverDnXgesvdjSetMaxSweeps(void *info, int max_sweeps) {
    if (!info) return DN_INVALID_VALUE;
    ((struct dn_gesvdj *)info)->max_sweeps = max_sweeps;
    return DN_OK;
}
int cusolverDnXgesvdjSetSortEig(void *info, int sort_svd) {
    if (!info) return DN_INVALID_VALUE;
    ((struct dn_gesvdj *)info)->sort = sort_svd;
    return DN_OK;
}
/* One-sided Jacobi on g (rows x k, column-major): each sweep takes the
 * column pairs (p, q), p < q, in order, and rotates those with
 * |g_p . g_q| > tol ||g_p|| ||g_q|| to orthogonality (the rotation that
 * diagonalizes their 2 x 2 Gram matrix, as dn_jacobi's), r (k x k, from
 * I) taking the same rotations, so g's start = g r^T. 0 once a sweep
 * rotates nothing; 1 when max_sweeps sweeps leave some pair outside it. */
static int dn_hestenes(double *g, double *r, int64_t rows, int64_t k, double tol, int max_sweeps) {
    for (int64_t j = 0; j < k; j++)
        for (int64_t i = 0; i < k; i++) r[i + j * k] = i == j;
    for (int sweep = 0;; sweep++) {
        int64_t rotated = 0;
        for (int64_t p = 0; p < k; p++)
            for (int64_t q = p + 1; q < k; q++) {
                double *gp = g + p * rows, *gq = g + q * rows, a = 0, b = 0, c = 0;
                for (int64_t i = 0; i < rows; i++) {
                    a += gp[i] * gp[i];
                    b += gq[i] * gq[i];
                    c += gp[i] * gq[i];
                }
                if (!(fabs(c) > tol * sqrt(a) * sqrt(b))) continue;
                if (sweep >= max_sweeps) return 1; /* only checking, after the last sweep */
                rotated++;
                double zeta = (b - a) / (2 * c);
                double t = (zeta >= 0 ? 1 : -1) / (fabs(zeta) + hypot(1, zeta));
                double cs = 1 / hypot(1, t), sn = t * cs;
                for (int64_t i = 0; i < rows; i++) {
                    double x = gp[i], y = gq[i];
                    gp[i] = cs * x - sn * y;
                    gq[i] = sn * x + cs * y;
                }
                double *rp = r + p * k, *rq = r + q * k;
                for (int64_t i = 0; i < k; i++) {
                    double x = rp[i], y = rq[i];
                    rp[i] = cs * x - sn * y;
                    rq[i] = sn * x + cs * y;
                }
            }
        if (!rotated) return 0;
    }
}
/* The columns of x (rows x cols) not marked in `have` become, in order,
 * orthonormal to the marked ones and to each other: each is the unit
 * vector with the most of it outside their span (the first of equals; at
 * least 1 / rows of its square), the span projected out twice (classical
 * Gram-Schmidt) and normalized. wsum: rows doubles of scratch. */
static void dn_complete(double *x, int64_t rows, int64_t cols, unsigned char *have, double *wsum) {
    for (int64_t i = 0; i < rows; i++) wsum[i] = 0;
    for (int64_t c = 0; c < cols; c++)
        for (int64_t i = 0; have[c] && i < rows; i++) wsum[i] += x[i + c * rows] * x[i + c * rows];
    for (int64_t c = 0; c < cols; c++) {
        if (have[c]) continue;
        double *y = x + c * rows, norm = 0;
        int64_t best = 0;
        for (int64_t i = 1; i < rows; i++)
            if (wsum[i] < wsum[best]) best = i;
        for (int64_t i = 0; i < rows; i++) y[i] = i == best;
        for (int pass = 0; pass < 2; pass++)
            for (int64_t p = 0; p < cols; p++) {
                if (!have[p]) continue;
                const double *xp = x + p * rows;
                double d = 0;
                for (int64_t i = 0; i < rows; i++) d += xp[i] * y[i];
                for (int64_t i = 0; i < rows; i++) y[i] -= d * xp[i];
            }
        for (int64_t i = 0; i < rows; i++) norm = hypot(norm, y[i]);
        for (int64_t i = 0; i < rows; i++) y[i] /= norm;
        for (int64_t i = 0; i < rows; i++) wsum[i] += y[i] * y[i];
        have[c] = 1;
    }
}
/* gesvdj's work, for k = min(m, n): S := A's k singular values,
 * descending (equal ones in Jacobi's order), and for `vectors` U (m x m,
 * or m x k for econ) and V (n x n, or n x k). Jacobi runs on a copy of A
 * (m >= n) or A^T (m < n) scaled by a power of two to a largest element
 * in [0.5, 1), so no square overflows; its columns' norms are the singular
 * values, the columns normalized the left (m >= n) or right (m < n)
 * singular vectors, its rotations the others: U = A V / s, or
 * V = A^T U / s. Each right singular vector's largest component (the
 * first of equals) is made positive, its left one following. Columns with
 * no singular value (econ 0's past k) or a zero one are completed by
 * dn_complete. A itself is left as it was (cuSOLVER may destroy it).
 * info: 0, or k + 1 when the sweeps ran out (the results as they stand
 * are stored) or A is not finite (S := NaN, U and V untouched). */
static int dn_svd(struct dn_mat a, int64_t m, int64_t n, int vectors, int econ, struct dn_mat s, struct dn_mat u,
                  struct dn_mat v, double tol, int max_sweeps, int *info) {
    int64_t k = m < n ? m : n, rows = m < n ? n : m, cols = econ ? k : rows;
    int wide = m < n;
    size_t ng = (size_t)rows * (size_t)k, nr = (size_t)k * (size_t)k, nw = vectors ? (size_t)rows * (size_t)cols : 0;
    double *g = malloc((ng + nr + nw + (size_t)k + (size_t)rows + 1) * sizeof(double));
    double *r = g + ng, *w = r + nr, *sv = w + nw, *wsum = sv + k;
    int64_t *order = malloc(((size_t)k + 1) * sizeof(int64_t));
    unsigned char *have = malloc((size_t)cols + 1);
    if (!g || !order || !have) { free(g); free(order); free(have); return DN_ALLOC_FAILED; }
    double big = 0;
    int finite = 1;
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            double x = fabs(dn_get(a, i, j));
            if (!isfinite(x)) finite = 0;
            else if (x > big) big = x;
        }
    if (!finite) {
        for (int64_t i = 0; i < k; i++) dn_set(s, i, 0, NAN);
        free(g); free(order); free(have);
        *info = (int)(k + 1);
        return DN_OK;
    }
    int e = 0;
    if (big > 0) frexp(big, &e);
    for (int64_t j = 0; j < k; j++)
        for (int64_t i = 0; i < rows; i++) g[i + j * rows] = ldexp(wide ? dn_get(a, j, i) : dn_get(a, i, j), -e);
    /* What rounding lets a dot of `rows` terms resolve bounds the tolerance. */
    double least = (double)rows * 2.220446049250313e-16;
    int left = dn_hestenes(g, r, rows, k, tol > least ? tol : least, max_sweeps);
    for (int64_t j = 0; j < k; j++) {
        double norm = 0;
        for (int64_t i = 0; i < rows; i++) norm = hypot(norm, g[i + j * rows]);
        sv[j] = norm;
    }
    for (int64_t p = 0; p < k; p++) { /* a stable insertion sort, descending */
        int64_t i = p;
        for (; i > 0 && sv[order[i - 1]] < sv[p]; i--) order[i] = order[i - 1];
        order[i] = p;
    }
    for (int64_t j = 0; j < k; j++) dn_set(s, j, 0, ldexp(sv[order[j]], e));
    if (vectors) {
        for (int64_t c = 0; c < cols; c++) have[c] = c < k && sv[order[c]] > 0;
        for (int64_t c = 0; c < cols; c++)
            for (int64_t i = 0; have[c] && i < rows; i++) w[i + c * rows] = g[i + order[c] * rows] / sv[order[c]];
        dn_complete(w, rows, cols, have, wsum);
        for (int64_t j = 0; j < k; j++) {
            double *wc = w + j * rows, *rc = r + order[j] * k, *right = wide ? wc : rc;
            int64_t len = wide ? rows : k, at = 0;
            for (int64_t i = 1; i < len; i++)
                if (fabs(right[i]) > fabs(right[at])) at = i;
            if (right[at] >= 0) continue;
            for (int64_t i = 0; i < rows; i++) wc[i] = -wc[i];
            for (int64_t i = 0; i < k; i++) rc[i] = -rc[i];
        }
        /* w is U (m >= n) or V (m < n), all its columns; r, in S's order, the other. */
        struct dn_mat wm = wide ? v : u, rm = wide ? u : v;
        for (int64_t j = 0; j < cols; j++)
            for (int64_t i = 0; i < rows; i++) dn_set(wm, i, j, w[i + j * rows]);
        for (int64_t j = 0; j < k; j++)
            for (int64_t i = 0; i < k; i++) dn_set(rm, i, j, r[i + order[j] * k]);
    }
    free(g);
    free(order);
    free(have);
    *info = left ? (int)(k + 1) : 0;
    return DN_OK;
}
/* Workspace, in elements: a copy of A (or A^T) and the k x k rotations,
 * max(1, m n + min(m, n)^2), whatever jobz and econ; nothing of it is
 * used (the work is in double, outside the caller's memory), but a
 * smaller one is refused. */
static int64_t dn_gesvdj_lwork(int64_t m, int64_t n) {
    int64_t k = m < n ? m : n;
    return dn_max1(m * n + k * k);
}
static int dn_gesvdj_args(void *h, int jobz, int econ, int64_t m, int64_t n, int64_t lda, int64_t ldu, int64_t ldv) {
    if (!h) return DN_NOT_INITIALIZED;
    return jobz < 0 || jobz > 1 || econ < 0 || econ > 1 || m < 0 || n < 0 || lda < dn_max1(m) ||
                   (jobz && (ldu < dn_max1(m) || ldv < dn_max1(n)))
               ? DN_INVALID_VALUE
               : DN_OK;
}
/* U and V are not referenced without vectors (NULL is fine then), nor
 * when they have no columns. */
static int dn_gesvdj(void *h, int ty, int jobz, int econ, int64_t m, int64_t n, void *A, int64_t lda, void *S, void *U,
                     int64_t ldu, void *V, int64_t ldv, const void *work, int64_t have, int *info, const void *params) {
    int r = dn_gesvdj_args(h, jobz, econ, m, n, lda, ldu, ldv);
    if (r) return r;
    int64_t k = m < n ? m : n, ucols = econ ? k : m, vcols = econ ? k : n;
    if (have < dn_gesvdj_lwork(m, n) || !info || (k && (!A || !S || !work)) ||
        (jobz && ((m && ucols && !U) || (n && vcols && !V))))
        return DN_INVALID_VALUE;
    const struct dn_gesvdj *p = params;
    double eps = ty ? 2.220446049250313e-16 : 1.1920928955078125e-07; /* DBL_EPSILON, FLT_EPSILON */
    double tol = p && p->tol > eps ? p->tol : eps;
    return dn_svd((struct dn_mat){A, ty, lda}, m, n, jobz, econ, (struct dn_mat){S, ty, 1},
                  (struct dn_mat){U, ty, ldu}, (struct dn_mat){V, ty, ldv}, tol, p ? p->max_sweeps : 100, info);
}
#define DN_LEGACY_SVD(P, T, TY)                                                                                \
    int cusolverDn##P##gesvdj_bufferSize(void *h, int jobz, int econ, int m, int n, const T *A, int lda,        \
                                         const T *S, const T *U, int ldu, const T *V, int ldv, int *lwork,      \
                                         void *params) {                                                       \
        (void)A; (void)S; (void)U; (void)V; (void)params;                                                      \
        return dn_lwork_int(dn_gesvdj_args(h, jobz, econ, m, n, lda, ldu, ldv), dn_gesvdj_lwork(m, n), lwork); \
    }                                                                                                          \
    int cusolverDn##P##gesvdj(void *h, int jobz, int econ, int m, int n, T *A, int lda, T *S, T *U, int ldu,   \
                              T *V, int ldv, T *work, int lwork, int *info, void *params) {                    \
        return dn_gesvdj(h, TY, jobz, econ, m, n, A, lda, S, U, ldu, V, ldv, work, lwork, info, params);       \
    }
DN_LEGACY_SVD(S, float, 0)
DN_LEGACY_SVD(D, double, 1)
