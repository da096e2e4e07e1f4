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
 * One file per library: cudart.c (this one), blas.c (cuBLAS, cuBLASLt),
 * rand.c (cuRAND), solver.c and solver_factor.c (cuSOLVER).
 * Build: cc -shared -fPIC -O2 -o libcpudevice.so the .c files of cpu_device/ -lm */
#include "cpu_device.h"

#include "../lenet_kernels.h"

/* ---- cudart ------------------------------------------------------------ */
int cudaRuntimeGetVersion(int *v) { *v = 13050; return 0; }
int cudaDriverGetVersion(int *v) { *v = 13050; return 0; }
/* CPU_DEVICE_COUNT devices (1 to 8; 1 by default), all alike; the
 * current one is per host thread, as CUDA's runtime keeps it. */
CPU_DEVICE_INTERNAL int device_count(void) {
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

