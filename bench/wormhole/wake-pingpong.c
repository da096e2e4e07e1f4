/* Round trips between two processes, woken through a futex on shared
 * memory or through a pipe pair, whose wake-ups carry the kernel's "the
 * waker is about to sleep" hint (a futex's do not). Used to ask whether
 * that hint keeps a ping-pong on one vCPU (docs/benchmarks-wormhole.md).
 * Build: cc -O2 -o wake-pingpong wake-pingpong.c
 * Run:   ./wake-pingpong futex|pipe ROUND_TRIPS */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static long fw(atomic_int *a, int v) { return syscall(SYS_futex, a, FUTEX_WAIT, v, NULL, NULL, 0); }
static long fk(atomic_int *a) { return syscall(SYS_futex, a, FUTEX_WAKE, 1, NULL, NULL, 0); }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    int n = atoi(argv[2]); const char *mode = argv[1];
    double *lat = malloc(sizeof(double) * n);
    if (!strcmp(mode, "futex")) {
        atomic_int *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        atomic_int *req = &w[0], *rep = &w[16];
        if (fork() == 0) {
            for (int i = 1; i <= n; i++) {
                while (atomic_load(req) != i) fw(req, i - 1);
                atomic_store(rep, i); fk(rep);
            }
            _exit(0);
        }
        for (int i = 1; i <= n; i++) {
            double t = now();
            atomic_store(req, i); fk(req);
            while (atomic_load(rep) != i) fw(rep, i - 1);
            lat[i - 1] = now() - t;
        }
    } else {
        int a[2], b[2]; pipe(a); pipe(b); char c = 0;
        if (fork() == 0) {
            for (int i = 0; i < n; i++) { read(a[0], &c, 1); write(b[1], &c, 1); }
            _exit(0);
        }
        for (int i = 0; i < n; i++) { double t = now(); write(a[1], &c, 1); read(b[0], &c, 1); lat[i] = now() - t; }
    }
    wait(NULL);
    double sum = 0; for (int i = 0; i < n; i++) sum += lat[i];
    qsort(lat, n, sizeof(double), cmp);
    printf("%-6s median %7.2f us  mean %7.2f us  p90 %7.2f\n", mode, lat[n / 2], sum / n, lat[n * 9 / 10]);
    return 0;
}
