/* The current device is per host thread, as CUDA's runtime keeps it: a
 * thread that sets device 1 leaves every other thread on its own device
 * (0 for a new thread), and memory each allocates is on its own device.
 * Needs two devices (the CPU stand-in with CPU_DEVICE_COUNT=2). Two
 * threads then allocate on their own devices in turn, 200 times each,
 * checking every allocation's device. Prints one line per check; natively
 * and through Wormhole the lines must be the same. */
#include <pthread.h>
#include <stdio.h>
#include "wormhole_cuda_min.h"

struct ptr_attributes { int type, device; void *device_pointer, *host_pointer; };
cudaError_t cudaPointerGetAttributes(struct ptr_attributes *a, const void *p);

/* The device of a fresh 64-byte allocation (-1 if any call fails). */
static int allocation_device(void) {
    void *p = NULL;
    struct ptr_attributes a = {0, -1, NULL, NULL};
    if (cudaMalloc(&p, 64) != cudaSuccess) return -1;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) a.device = -1;
    cudaFree(p);
    return a.device;
}

static int current(void) {
    int d = -1;
    cudaGetDevice(&d);
    return d;
}

static void *fresh_thread(void *out) {
    int *r = out;
    r[0] = current();
    r[1] = allocation_device();
    return NULL;
}

/* Allocates on `device` 200 times, as another thread does on another. */
static void *worker(void *arg) {
    int device = *(int *)arg, wrong = 0;
    if (cudaSetDevice(device) != cudaSuccess) return (void *)1;
    for (int i = 0; i < 200; i++)
        if (allocation_device() != device || current() != device) wrong++;
    *(int *)arg = wrong;
    return NULL;
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2) {
        printf("needs two devices (%d)\n", n);
        return 1;
    }
    printf("devices: %d\n", n);
    printf("main at start: device %d, memory on %d\n", current(), allocation_device());
    printf("set device 1: %d\n", cudaSetDevice(1));
    printf("set device %d: %d\n", n, cudaSetDevice(n));
    printf("main: device %d, memory on %d\n", current(), allocation_device());
    int seen[2];
    pthread_t t;
    pthread_create(&t, NULL, fresh_thread, seen);
    pthread_join(t, NULL);
    printf("a new thread: device %d, memory on %d\n", seen[0], seen[1]);
    printf("main still: device %d, memory on %d\n", current(), allocation_device());
    int a = 0, b = 1;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, worker, &a);
    pthread_create(&tb, NULL, worker, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    printf("two threads on devices 0 and 1: %d and %d wrong\n", a, b);
    int ok = seen[0] == 0 && seen[1] == 0 && current() == 1 && a == 0 && b == 0;
    printf("%s\n", ok ? "correct" : "WRONG");
    return ok ? 0 : 1;
}
