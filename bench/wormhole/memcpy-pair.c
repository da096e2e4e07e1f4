/* Copy bandwidth of one memcpy thread alone and of two at once, each on
 * its own 256 MiB buffers: whether two copies in a pipeline (the streamed
 * transfer path: application -> ring, ring -> buffer) can both run at a
 * single copy's speed on this machine (docs/benchmarks-wormhole.md).
 * Build: cc -O2 -pthread -o memcpy-pair memcpy-pair.c
 * Run:   ./memcpy-pair 1; ./memcpy-pair 2 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES ((size_t)256 << 20)
#define PASSES 8

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *copier(void *gbps) {
    char *a = malloc(BYTES), *b = malloc(BYTES);
    if (!a || !b) {
        *(double *)gbps = 0;
        return NULL;
    }
    memset(a, 1, BYTES);
    memset(b, 2, BYTES);
    double t = now();
    for (int i = 0; i < PASSES; i++) {
        /* Back and forth, so that no pass can be left out. */
        if (i & 1)
            memcpy(a, b, BYTES);
        else
            memcpy(b, a, BYTES);
        __asm__ volatile("" ::: "memory");
    }
    *(double *)gbps = (double)PASSES * BYTES / (now() - t) / 1e9;
    free(a);
    free(b);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    if (n < 1 || n > 4) {
        fprintf(stderr, "usage: memcpy-pair [1-4 threads]\n");
        return 2;
    }
    pthread_t th[4];
    double gbps[4], total = 0;
    for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, copier, &gbps[i]);
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        printf("thread %d: %.2f GB/s\n", i, gbps[i]);
        total += gbps[i];
    }
    printf("%d thread(s): %.2f GB/s together\n", n, total);
    return 0;
}
