/*
 * How fast glibc's memcpy copies out-of-cache data as a function of where the
 * destination lies relative to the source modulo a page, for the copy sizes
 * Wormhole's bulk transfers make. This is why wormhole_transport::copy and
 * the arena's buffer placement exist (docs/benchmarks-wormhole.md).
 *
 *   gcc -O2 bench/wormhole/memcpy-distance.c -o bench/out/memcpy-distance
 *   bench/out/memcpy-distance            # GB/s per distance, two sizes
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
    const size_t total = 256u << 20, slack = 8192;
    char *src = mmap(NULL, total + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *dst = mmap(NULL, total + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED || dst == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(src, 1, total + slack);
    memset(dst, 2, total + slack);
    /* 256 KiB pieces walk through 256 MiB (the source is never in cache);
     * one 256 MiB copy takes glibc's non-temporal path (above its threshold). */
    const size_t pieces[] = {256u << 10, total};
    const int dist[] = {0, 8, 16, 32, 64, 112, 128, 256, 512, 2048, 4032, 4080};
    printf("%-8s", "distance");
    for (size_t p = 0; p < 2; p++)
        printf("  %10zu KiB", pieces[p] >> 10);
    printf("   (GB/s, best of 2)\n");
    for (size_t i = 0; i < sizeof dist / sizeof dist[0]; i++) {
        printf("%-8d", dist[i]);
        for (size_t p = 0; p < 2; p++) {
            double best = 0;
            for (int r = 0; r < 2; r++) {
                double t = now();
                for (size_t o = 0; o + pieces[p] <= total; o += pieces[p])
                    memcpy(dst + dist[i] + o, src + o, pieces[p]);
                double gbps = (double)total / (now() - t) / 1e9;
                if (gbps > best)
                    best = gbps;
            }
            printf("  %14.2f", best);
        }
        printf("\n");
    }
    return 0;
}
