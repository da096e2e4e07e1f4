/* Part of the CPU stand-in device (see cudart.c). */
#include "cpu_device.h"

/* ---- cuRAND -------------------------------------------------------------- */
struct gen { uint64_t seed, offset, pos; };
#define G ((struct gen *)g)
int curandGetVersion(int *v) { if (!v) return 104; *v = 10400; return 0; }
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
