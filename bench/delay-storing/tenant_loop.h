/* The lines both delay-storing tenants answer on stdin (tenant.c for
 * OpenCL, tenant_cuda.c for CUDA; see either for what each line does):
 * the loop, the timing and the replies, around what each API does. */
#ifndef TENANT_LOOP_H
#define TENANT_LOOP_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct tenant_ops {
    /* Reads the buffers in bit mask `r`, updates those in `w`, waits. */
    void (*cell)(unsigned long r, unsigned long w);
    /* A one-item read of buffer `i`, waited for. */
    void (*poke)(int i);
    /* Checks every buffer against the updates made (`updates[b]` each):
     * 0 when all are right (it reports what is not). */
    int (*verify)(const int *updates);
};

static double tenant_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Serves stdin until "quit" or its end; `updates` counts each buffer's
 * updates (the caller's count of those made before, at start). Returns
 * the exit status: 0, or 4 when a verification failed. */
static int tenant_loop(int nbuf, int *updates, const struct tenant_ops *ops) {
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        unsigned long r = 0, w = 0;
        int i = 0;
        if (sscanf(line, "cell %lu %lu", &r, &w) == 2) {
            double t0 = tenant_now_ns();
            ops->cell(r, w);
            for (int b = 0; b < nbuf; b++)
                if (w & (1ul << b)) updates[b]++;
            printf("ok %.0f\n", tenant_now_ns() - t0);
        } else if (sscanf(line, "poke %d", &i) == 1 && i >= 0 && i < nbuf) {
            double t0 = tenant_now_ns();
            ops->poke(i);
            printf("ok %.0f\n", tenant_now_ns() - t0);
        } else if (strncmp(line, "verify", 6) == 0) {
            if (ops->verify(updates) != 0) return 4;
            uint32_t hash = 2166136261u;
            for (int b = 0; b < nbuf; b++) hash = (hash ^ (uint32_t)updates[b]) * 16777619u;
            printf("verified %08x\n", hash);
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        } else {
            printf("what? %s", line);
        }
        fflush(stdout);
    }
    return 0;
}
#endif
