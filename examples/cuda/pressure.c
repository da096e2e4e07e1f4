/* Device memory under pressure, as a tenant sees it when others share the
 * device: MIB MiB in six allocations of different sizes (not multiples of
 * 2 MiB, one under 1 MiB), filled from the host; one ("weights") is
 * written once and only read after, as a model's weights are. Each round
 * sets part of one allocation (cudaMemset), runs cublasSaxpy between two
 * and a small cublasSgemm inside a third (its alpha and beta in device
 * memory, its result there too), copies device to device, sleeps 150 ms
 * (for other tenants to get the device, and a server to take this one's
 * memory away and give it back), then reads every allocation back and
 * checks it against a host model of what each must hold: exactly, but
 * for the float math, which is checked against the host's within a
 * tolerance and then taken as the device gave it. Only sizes, verdicts and
 * checksums are printed (no addresses, no timings), so the output is the
 * same natively and through Wormhole on the same device; the last line is
 * "correct" when every check held. Exits 1 at the first failing CUDA or
 * cuBLAS call, with its code, or when a check failed.
 * Usage: pressure [MIB [ROUNDS [SEED]]]   (defaults 24, 6, 1)
 * Build: cc -Iexamples/cuda -o pressure pressure.c -lcublas -lcudart -lm */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sample_util.h"

enum { cudaMemcpyDeviceToDevice = 3 };

/* cudaGetErrorString and status numbers only: the CPU stand-in, which runs
 * this directly, has neither cudaGetErrorName nor cublasGetStatusName. */
#define RT(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("%s: %s (%d)\n", #x, cudaGetErrorString(e_), e_); exit(1); } } while (0)
#define BLAS(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    printf("%s: cublasStatus %d\n", #x, s_); exit(1); } } while (0)

/* The small GEMM inside "gemm": C (GM x GN) = alpha A (GM x GK) B (GK x GN)
 * + beta C, column-major, then alpha and beta, from its first byte; the
 * rest of that allocation is bytes that must stay as they were. */
enum { GM = 40, GN = 24, GK = 32 };
enum { A_AT = 0, B_AT = A_AT + GM * GK, C_AT = B_AT + GK * GN, ALPHA_AT = C_AT + GM * GN, BETA_AT = ALPHA_AT + 1,
       GEMM_FLOATS = BETA_AT + 1 };

enum { WEIGHTS, X, Y, GEMM, SCRATCH, SMALL, NALLOC };
static const char *names[NALLOC] = {"weights", "x", "y", "gemm", "scratch", "small"};
static struct alloc {
    size_t size;
    unsigned char *dev, *model;
    /* Bytes [fl_from, fl_to) are float results, checked within a tolerance. */
    size_t fl_from, fl_to;
} al[NALLOC];

static uint32_t state;
static uint32_t next_u32(void) {
    state ^= state << 13; state ^= state >> 17; state ^= state << 5;
    return state;
}

/* Sizes summing to exactly MIB MiB: one under 1 MiB, the others shares of
 * the rest, 4-byte multiples (floats) and none a multiple of 2 MiB. */
static void size_them(size_t total) {
    size_t small = total >= (size_t)8 << 20 ? ((size_t)3 << 18) - 20 : (total / 16) & ~(size_t)3;
    size_t rest = total - small;
    al[SMALL].size = small;
    al[WEIGHTS].size = (rest / 10 * 3) & ~(size_t)3;
    al[X].size = al[Y].size = (rest / 6) & ~(size_t)3;
    al[GEMM].size = (rest / 10) & ~(size_t)3;
    al[SCRATCH].size = rest - al[WEIGHTS].size - al[X].size - al[Y].size - al[GEMM].size;
    for (int i = 0; i < NALLOC; i++)
        if (al[i].size % ((size_t)2 << 20) == 0) { al[i].size -= 4; al[SCRATCH].size += 4; }
}

/* Floats in [-1, 1] where the math reads them, bytes elsewhere. */
static void fill(struct alloc *a, int floats) {
    size_t n = floats ? a->size / 4 : a->size;
    for (size_t i = 0; i < n; i++) {
        if (floats) {
            float f = sample_next(&state);
            memcpy(a->model + 4 * i, &f, 4);
        } else
            a->model[i] = (unsigned char)(next_u32() >> 24);
    }
}

static float *fl(int i, size_t at) { return (float *)(void *)al[i].model + at; }

/* Every allocation read back and compared with its model; float results
 * within a tolerance, then taken as read. Returns how many differ. */
static int check(int round, unsigned char *buf) {
    int bad = 0;
    for (int i = 0; i < NALLOC; i++) {
        struct alloc *a = &al[i];
        RT(cudaMemcpy(buf, a->dev, a->size, cudaMemcpyDeviceToHost));
        for (size_t b = 0; b < a->size; b++) {
            if (b == a->fl_from && a->fl_to > a->fl_from) {
                for (; b < a->fl_to; b += 4) {
                    float got, want;
                    memcpy(&got, buf + b, 4);
                    memcpy(&want, a->model + b, 4);
                    if (!(fabsf(got - want) <= 1e-4f * (1 + fabsf(want)))) {
                        printf("round %d: %s differs at float %zu: %.6f, want %.6f\n", round, names[i], b / 4,
                               got, want);
                        bad++;
                        break;
                    }
                }
                if (b < a->fl_to) break;
                memcpy(a->model + a->fl_from, buf + a->fl_from, a->fl_to - a->fl_from);
                if (b >= a->size) break;
            }
            if (buf[b] != a->model[b]) {
                printf("round %d: %s differs at byte %zu: %02x, want %02x\n", round, names[i], b, buf[b],
                       a->model[b]);
                bad++;
                break;
            }
        }
    }
    return bad;
}

int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 24, rounds = argc > 2 ? atol(argv[2]) : 6;
    unsigned long seed = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
    if (mib < 1 || mib > 16384 || rounds < 0 || rounds > 100000) {
        printf("usage: pressure [MIB (1 to 16384) [ROUNDS [SEED]]]\n");
        return 1;
    }
    state = 0x9e3779b9u ^ (uint32_t)seed * 2654435761u;
    if (!state) state = 1;
    size_them((size_t)mib << 20);
    size_t largest = 0;
    printf("%ld MiB, %ld rounds, seed %lu:", mib, rounds, seed);
    for (int i = 0; i < NALLOC; i++) {
        printf(" %s %zu", names[i], al[i].size);
        if (al[i].size > largest) largest = al[i].size;
    }
    printf("\n");
    unsigned char *buf = malloc(largest);
    if (!buf) return 1;
    for (int i = 0; i < NALLOC; i++) {
        if (!(al[i].model = malloc(al[i].size))) return 1;
        RT(cudaMalloc((void **)&al[i].dev, al[i].size));
    }
    fill(&al[WEIGHTS], 0);
    fill(&al[X], 1);
    fill(&al[Y], 1);
    fill(&al[GEMM], 0);
    for (int j = A_AT; j < C_AT + GM * GN; j++) { float f = sample_next(&state); memcpy(fl(GEMM, j), &f, 4); }
    fill(&al[SCRATCH], 0);
    fill(&al[SMALL], 0);
    al[Y].fl_to = al[Y].size;
    al[GEMM].fl_from = 4 * C_AT;
    al[GEMM].fl_to = 4 * (C_AT + GM * GN);
    for (int i = 0; i < NALLOC; i++) RT(cudaMemcpy(al[i].dev, al[i].model, al[i].size, cudaMemcpyHostToDevice));

    cublasHandle_t h;
    BLAS(cublasCreate_v2(&h));
    int failures = check(0, buf);
    printf("filled: %s\n", failures ? "WRONG" : "ok");
    int n = (int)(al[X].size / 4);
    size_t sc = al[SCRATCH].size, w = al[WEIGHTS].size, sm = al[SMALL].size;
    for (long r = 1; r <= rounds; r++) {
        /* (a) A quarter of "scratch" set to a byte of the round's. */
        size_t len = sc / 4, at = (size_t)(r * 7919 * 4096 + seed * 13) % (sc - len + 1);
        int v = (int)((seed * 31 + (unsigned long)r * 97) & 0xff);
        RT(cudaMemset(al[SCRATCH].dev + at, v, len));
        memset(al[SCRATCH].model + at, v, len);
        /* (b) y += a x (host scalar); C = alpha A B + beta C (device scalars). */
        float a = r % 2 ? 0.75f : -0.5f;
        BLAS(cublasSaxpy_v2(h, n, &a, (float *)(void *)al[X].dev, 1, (float *)(void *)al[Y].dev, 1));
        for (int i = 0; i < n; i++) *fl(Y, i) += a * *fl(X, i);
        float ab[2] = {(float)(r % 3 + 1) / GK, 0.5f};
        float *g = (float *)(void *)al[GEMM].dev;
        RT(cudaMemcpy(g + ALPHA_AT, ab, sizeof ab, cudaMemcpyHostToDevice));
        memcpy(fl(GEMM, ALPHA_AT), ab, sizeof ab);
        BLAS(cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_DEVICE));
        BLAS(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, g + ALPHA_AT, g + A_AT, GM, g + B_AT, GK,
                            g + BETA_AT, g + C_AT, GM));
        BLAS(cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_HOST));
        for (int j = 0; j < GN; j++)
            for (int i = 0; i < GM; i++) {
                double s = 0;
                for (int l = 0; l < GK; l++) s += (double)*fl(GEMM, A_AT + i + l * GM) * *fl(GEMM, B_AT + l + j * GK);
                float *c = fl(GEMM, C_AT + i + j * GM);
                *c = (float)(ab[0] * s + ab[1] * (double)*c);
            }
        /* (c) A third of the weights into "scratch"; half of "scratch" into "small". */
        size_t wl = (w < sc ? w : sc) / 3, from = (size_t)(r * 104729 * 16 + seed) % (w - wl + 1),
               to = (size_t)(r * 65537 * 8) % (sc - wl + 1);
        RT(cudaMemcpy(al[SCRATCH].dev + to, al[WEIGHTS].dev + from, wl, cudaMemcpyDeviceToDevice));
        memcpy(al[SCRATCH].model + to, al[WEIGHTS].model + from, wl);
        size_t sl = sm / 2, from2 = (size_t)(r * 31337) % (sc - sl + 1), to2 = (size_t)(r * 4099) % (sm - sl + 1);
        RT(cudaMemcpy(al[SMALL].dev + to2, al[SCRATCH].dev + from2, sl, cudaMemcpyDeviceToDevice));
        memcpy(al[SMALL].model + to2, al[SCRATCH].model + from2, sl);
        /* (d) The device to the others for a while; (e) everything back. */
        usleep(150 * 1000);
        int bad = check((int)r, buf);
        double sum = 0;
        for (int i = 0; i < n; i++) sum += *fl(Y, i);
        for (int i = 0; i < GM * GN; i++) sum += *fl(GEMM, C_AT + i);
        if (!bad) printf("round %ld: ok, checksum %.3f\n", r, sum);
        failures += bad;
    }
    RT(cudaDeviceSynchronize());
    BLAS(cublasDestroy_v2(h));
    for (int i = 0; i < NALLOC; i++) {
        RT(cudaFree(al[i].dev));
        free(al[i].model);
    }
    free(buf);
    printf("%s\n", failures ? "WRONG" : "correct");
    return failures ? 1 : 0;
}
