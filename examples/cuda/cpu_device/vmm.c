/* Part of the CPU stand-in device (see cudart.c): the CUDA driver's
 * virtual memory management, for a server that serves cudaMalloc by
 * reserving addresses and mapping physical memory into them, so that a
 * tenant's allocation can lose its memory (unmapped, released) and get
 * new memory later at the same address. Linked as libcuda.so.1 where the
 * server dlopens the driver. NVIDIA's signatures and CUresult codes; the
 * types are declared here as cuda.h lays them out (x86-64).
 * Addresses are reserved with mmap(PROT_NONE); "physical memory" is a
 * memfd, mapped MAP_SHARED|MAP_FIXED into the reservation. As on a GPU,
 * every call is checked against what was reserved, created and mapped,
 * so a server that would fail on NVIDIA's driver fails here too. */
#define _GNU_SOURCE /* memfd_create */
#include "cpu_device.h"

#include <pthread.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct { int type, id; } CUmemLocation;
typedef struct {
    int type;
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;
typedef struct { CUmemLocation location; int flags; } CUmemAccessDesc;
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp as cuda.h lays it out");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc as cuda.h lays it out");

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_SUPPORTED = 801,
};
enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1, CU_MEM_LOCATION_TYPE_DEVICE = 1 };
enum { CU_MEM_HANDLE_TYPE_NONE = 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1 };
enum { CU_MEM_ACCESS_FLAGS_PROT_NONE = 0, CU_MEM_ACCESS_FLAGS_PROT_READ = 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 };

/* What NVIDIA's GPUs answer for both MINIMUM and RECOMMENDED. */
#define GRANULE ((size_t)2 << 20)
/* Each device's memory, as cudart.c's cudaMemGetInfo reports it: more
 * created and not yet freed is CUDA_ERROR_OUT_OF_MEMORY. */
#define DEVICE_BYTES ((size_t)16 << 30)

/* A handle: the memfd and what it was created for. The memory is freed
 * (and leaves the device's account) once the handle is released and no
 * mapping of it is left, as NVIDIA's driver frees it. */
struct phys { int fd; size_t size; int device; int released; int maps; };
/* A reservation, or a mapping (with its handle) inside one. */
struct range { uintptr_t base; size_t size; struct phys *phys; };
struct list { struct range *at; size_t n, cap; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct list reserved, mapped;
static struct phys **handles;
static size_t nhandles, handles_cap;
static size_t device_used[8];

static int list_add(struct list *l, struct range r) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        struct range *at = realloc(l->at, cap * sizeof *at);
        if (!at) return 0;
        l->at = at;
        l->cap = cap;
    }
    l->at[l->n++] = r;
    return 1;
}
static void list_drop(struct list *l, size_t i) { l->at[i] = l->at[--l->n]; }
/* The entry that is exactly [base, base + size), or -1. */
static long list_find(const struct list *l, uintptr_t base, size_t size) {
    for (size_t i = 0; i < l->n; i++)
        if (l->at[i].base == base && l->at[i].size == size) return (long)i;
    return -1;
}
/* The entry holding address a, or -1. */
static long list_holding(const struct list *l, uintptr_t a) {
    for (size_t i = 0; i < l->n; i++)
        if (a >= l->at[i].base && a - l->at[i].base < l->at[i].size) return (long)i;
    return -1;
}
static int list_overlaps(const struct list *l, uintptr_t base, size_t size) {
    for (size_t i = 0; i < l->n; i++)
        if (base < l->at[i].base + l->at[i].size && l->at[i].base < base + size) return 1;
    return 0;
}
/* A live (created, not released) handle of this file's, or NULL: anything
 * else would be dereferenced otherwise. */
static struct phys *handle_of(CUmemGenericAllocationHandle h) {
    for (size_t i = 0; i < nhandles; i++)
        if ((uintptr_t)handles[i] == h && !handles[i]->released) return handles[i];
    return NULL;
}
/* Room for one more handle in the list. */
static int handles_room(void) {
    if (nhandles == handles_cap) {
        size_t cap = handles_cap ? 2 * handles_cap : 16;
        struct phys **h = realloc(handles, cap * sizeof *h);
        if (!h) return 0;
        handles = h;
        handles_cap = cap;
    }
    return 1;
}
/* Released and unmapped: the memory goes back to its device. */
static void phys_done(struct phys *p) {
    if (!p->released || p->maps) return;
    for (size_t i = 0; i < nhandles; i++)
        if (handles[i] == p) { handles[i] = handles[--nhandles]; break; }
    device_used[p->device] -= p->size;
    free(p);
}
static CUresult check_prop(const CUmemAllocationProp *prop) {
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.id < 0 || prop->location.id >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop, int option) {
    if (!granularity || (option != 0 && option != 1)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_prop(prop);
    if (r == CUDA_SUCCESS) *granularity = GRANULE;
    return r;
}

/* Addresses only: nothing is readable there until a handle is mapped and
 * access is set. The base is granule-aligned at least (cuMemMap wants
 * granule multiples); a larger alignment by over-reserving and trimming.
 * `addr` is a hint, as NVIDIA takes it. */
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
    if (!ptr || !size || size % GRANULE || flags || (alignment & (alignment - 1))) return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > GRANULE ? alignment : GRANULE;
    if (size > SIZE_MAX - align) return CUDA_ERROR_OUT_OF_MEMORY;
    char *m = mmap((void *)(uintptr_t)addr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = ((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1);
    if (base > (uintptr_t)m) munmap(m, base - (uintptr_t)m);
    munmap((char *)base + size, (uintptr_t)m + align - base);
    pthread_mutex_lock(&lock);
    int ok = list_add(&reserved, (struct range){base, size, NULL});
    pthread_mutex_unlock(&lock);
    if (!ok) { munmap((void *)base, size); return CUDA_ERROR_OUT_OF_MEMORY; }
    *ptr = base;
    return CUDA_SUCCESS;
}

/* A whole reservation, as cuMemAddressReserve gave it, with nothing mapped
 * in it any more (unmapping first is what NVIDIA's samples do; refusing
 * otherwise catches a server that forgets to). */
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    pthread_mutex_lock(&lock);
    long i = list_find(&reserved, ptr, size);
    CUresult r = i < 0 || list_overlaps(&mapped, ptr, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) {
        munmap((void *)(uintptr_t)ptr, size);
        list_drop(&reserved, (size_t)i);
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Physical memory of a device: a memfd of that size. Its pages are taken
 * when first touched, and read as zeros then; NVIDIA promises no such
 * thing (a GPU's fresh memory holds whatever was there), so a server must
 * never rely on it. */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags) {
    if (!handle || !size || size % GRANULE || flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_prop(prop);
    if (r != CUDA_SUCCESS) return r;
    /* No handle can be exported from here (no cuMemExportToShareableHandle);
     * a POSIX descriptor may be asked for, as PyTorch does, Windows' or
     * fabric handles not. */
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
        prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct phys *p = malloc(sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (struct phys){-1, size, prop->location.id, 0, 0};
    pthread_mutex_lock(&lock);
    r = CUDA_ERROR_OUT_OF_MEMORY;
    if (size <= DEVICE_BYTES - device_used[p->device] && handles_room()) {
        p->fd = memfd_create("cpu-device-memory", MFD_CLOEXEC);
        if (p->fd >= 0 && ftruncate(p->fd, (off_t)size) == 0) {
            handles[nhandles++] = p;
            device_used[p->device] += size;
            r = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    if (r != CUDA_SUCCESS) {
        if (p->fd >= 0) close(p->fd);
        free(p);
        return r;
    }
    *handle = (uintptr_t)p;
    return CUDA_SUCCESS;
}

/* The handle goes; its memory stays where it is mapped (a mapping of a
 * closed memfd keeps its pages) until the last of it is unmapped. */
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    pthread_mutex_lock(&lock);
    struct phys *p = handle_of(handle);
    if (p) {
        close(p->fd);
        p->fd = -1;
        p->released = 1;
        phys_done(p);
    }
    pthread_mutex_unlock(&lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* [offset, offset + size) of the handle's memory at ptr, inside one
 * reservation and over nothing already mapped; granule multiples all. No
 * access until cuMemSetAccess, as on NVIDIA's driver. */
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
    if (!ptr || !size || flags || ptr % GRANULE || size % GRANULE || offset % GRANULE) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct phys *p = handle_of(handle);
    long in = list_holding(&reserved, ptr);
    CUresult r = CUDA_SUCCESS;
    if (!p)
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (offset > p->size || size > p->size - offset || in < 0 ||
             size > reserved.at[in].base + reserved.at[in].size - ptr || list_overlaps(&mapped, ptr, size))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!list_add(&mapped, (struct range){ptr, size, p}))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset) == MAP_FAILED) {
        mapped.n--;
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else
        p->maps++;
    pthread_mutex_unlock(&lock);
    return r;
}

/* A whole mapping, as cuMemMap made it (NVIDIA's driver unmaps no part of
 * one); its addresses are a reservation again, inaccessible. */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    pthread_mutex_lock(&lock);
    long i = list_find(&mapped, ptr, size);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (i >= 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
                 0) != MAP_FAILED) {
            struct phys *p = mapped.at[i].phys;
            list_drop(&mapped, (size_t)i);
            p->maps--;
            phys_done(p);
            r = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Access for the devices named; every device here is this process, so the
 * range gets the most any of them is given. It must be mapped throughout. */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    if (!ptr || !size || !desc || !count || ptr % GRANULE || size % GRANULE) return CUDA_ERROR_INVALID_VALUE;
    int prot = PROT_NONE;
    for (size_t d = 0; d < count; d++) {
        if (desc[d].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        if (desc[d].location.id < 0 || desc[d].location.id >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
        if (desc[d].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
        else if (desc[d].flags == CU_MEM_ACCESS_FLAGS_PROT_READ) prot |= PROT_READ;
        else if (desc[d].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE) return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_SUCCESS;
    for (uintptr_t a = ptr; r == CUDA_SUCCESS && a - ptr < size;) {
        long i = list_holding(&mapped, a);
        if (i < 0) r = CUDA_ERROR_INVALID_VALUE;
        else a = mapped.at[i].base + mapped.at[i].size;
    }
    if (r == CUDA_SUCCESS && mprotect((void *)(uintptr_t)ptr, size, prot) != 0) r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return r;
}
