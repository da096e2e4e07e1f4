// lenet: a small LeNet-style network trained with SGD on MNIST-shaped data
// (28x28 images, 10 classes), written against the CUDA runtime and cuBLAS
// as a framework would use them: a convolution as im2col + SGEMM, ReLU,
// 2x2 max-pooling, two fully connected layers (SGEMM), softmax
// cross-entropy, gradients by SGEMM/SGEMV and updates by SAXPY, all on
// the device; one copy back per epoch. It also queries a kernel's
// attributes and occupancy and launches one through cudaLaunchKernelEx, as
// libraries such as Thrust and CUB do.
//
// The images are synthetic but learnable: each class is a pattern of
// strokes, drawn shifted by up to 2 pixels and with noise, all from a fixed
// seed, so two runs on the same GPU (natively, and through Wormhole) must
// print the same losses, accuracy and digest of the weights. The last
// lines are the time and, if it learned (the loss fell below 0.5 and the
// test accuracy reached 0.9), "correct".
//
// Build: nvcc -O2 -cudart shared -o lenet lenet.cu -lcublas
// Usage: lenet [TRAINING_IMAGES [EPOCHS]]   (default 4096 2)
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lenet_kernels.h"

// The cuBLAS entry points used, as in NVIDIA's cublas_api.h (the toolkit's
// header is not needed to build this sample).
typedef struct cublasContext *cublasHandle_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
extern "C" {
int cublasCreate_v2(cublasHandle_t *h);
int cublasDestroy_v2(cublasHandle_t h);
int cublasSgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k, const float *alpha, const float *A,
                   int lda, const float *B, int ldb, const float *beta, float *C, int ldc);
int cublasSgemv_v2(cublasHandle_t h, int t, int m, int n, const float *alpha, const float *A, int lda,
                   const float *x, int incx, const float *beta, float *y, int incy);
int cublasSaxpy_v2(cublasHandle_t h, int n, const float *alpha, const float *x, int incx, float *y, int incy);
}

#define K(name)                                                      \
    extern "C" __global__ void name(struct name##_args p) {          \
        long i = (long)blockIdx.x * blockDim.x + threadIdx.x;        \
        if (i < p.n) name##_at(i, p);                                \
    }
LENET_KERNELS(K)
#undef K

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define BLAS(x) do { int s_ = (x); if (s_ != 0) { \
    printf("%s:%d %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)

static const int B = 64;                          // images per batch
static const long NCOL = (long)B * LENET_CONV * LENET_CONV;  // conv1 output positions per batch
static const long NPOOL = (long)B * LENET_POOL * LENET_POOL;
static const int KK = LENET_K * LENET_K;

static unsigned blocks(long n) { return (unsigned)((n + 255) / 256); }
#define LAUNCH(name, ...) do { struct name##_args a_ = {__VA_ARGS__}; \
    name<<<blocks(a_.n), 256>>>(a_); } while (0)

// xorshift64*: the data and the initial weights, the same on every run.
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng() {
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static float uniform() { return (rng() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)

// Ten stroke patterns, then images of them shifted and noisy.
static void make_data(int n, std::vector<float> &img, std::vector<int> &label,
                      const std::vector<float> &patterns) {
    img.assign((size_t)n * 784, 0.0f);
    label.resize(n);
    for (int i = 0; i < n; i++) {
        int c = (int)(rng() % LENET_CLASSES);
        int sx = (int)(rng() % 5) - 2, sy = (int)(rng() % 5) - 2;
        label[i] = c;
        for (int y = 0; y < 28; y++)
            for (int x = 0; x < 28; x++) {
                int py = y - sy, px = x - sx;
                float v = (py >= 0 && py < 28 && px >= 0 && px < 28) ? patterns[c * 784 + py * 28 + px] : 0;
                img[(size_t)i * 784 + y * 28 + x] = v + 0.3f * (uniform() - 0.5f);
            }
    }
}

static std::vector<float> make_patterns() {
    std::vector<float> p(LENET_CLASSES * 784, 0.0f);
    for (int c = 0; c < LENET_CLASSES; c++)
        for (int s = 0; s < 4; s++) {  // four strokes of a random direction
            float x = 6 + 16 * uniform(), y = 6 + 16 * uniform();
            float dx = uniform() - 0.5f, dy = uniform() - 0.5f;
            for (int t = 0; t < 14; t++, x += dx, y += dy)
                if (x >= 0 && x < 28 && y >= 0 && y < 28) p[c * 784 + (int)y * 28 + (int)x] = 1.0f;
        }
    return p;
}

struct Param { float *w, *g; long n; };

static Param param(long n, float scale) {
    std::vector<float> h(n);
    for (auto &v : h) v = scale * (2 * uniform() - 1);
    Param p{nullptr, nullptr, n};
    CHECK(cudaMalloc(&p.w, n * sizeof(float)));
    CHECK(cudaMalloc(&p.g, n * sizeof(float)));
    CHECK(cudaMemcpy(p.w, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return p;
}

static float *dev(long n) {
    float *p;
    CHECK(cudaMalloc(&p, n * sizeof(float)));
    return p;
}

int main(int argc, char **argv) {
    int ntrain = argc > 1 ? atoi(argv[1]) : 4096, epochs = argc > 2 ? atoi(argv[2]) : 2;
    const int ntest = 1024;
    if (ntrain < B || epochs < 1) { fprintf(stderr, "usage: %s [TRAINING_IMAGES>=%d [EPOCHS>=1]]\n", argv[0], B); return 2; }
    ntrain -= ntrain % B;
    std::vector<float> patterns = make_patterns(), train, test;
    std::vector<int> train_y, test_y;
    make_data(ntrain, train, train_y, patterns);
    make_data(ntest, test, test_y, patterns);
    printf("lenet: %d training images, %d test images, batch %d, %d epochs\n", ntrain, ntest, B, epochs);

    cublasHandle_t h;
    BLAS(cublasCreate_v2(&h));
    // Weights, column-major: conv1 8x25, fc1 64x1152, fc2 10x64.
    Param w1 = param(LENET_C1 * KK, sqrtf(6.0f / (KK + LENET_C1))), b1 = param(LENET_C1, 0);
    Param w2 = param((long)LENET_HID * LENET_FEAT, sqrtf(6.0f / (LENET_FEAT + LENET_HID))), b2 = param(LENET_HID, 0);
    Param w3 = param(LENET_CLASSES * LENET_HID, sqrtf(6.0f / (LENET_HID + LENET_CLASSES))), b3 = param(LENET_CLASSES, 0);
    Param *params[] = {&w1, &b1, &w2, &b2, &w3, &b3};

    float *x, *all_x, *col = dev(KK * NCOL), *y1 = dev(LENET_C1 * NCOL), *a1 = dev(LENET_C1 * NCOL);
    float *p1 = dev(LENET_C1 * NPOOL), *h2 = dev(LENET_HID * B), *a2 = dev(LENET_HID * B);
    float *z = dev(LENET_CLASSES * B), *dz = dev(LENET_CLASSES * B), *da2 = dev(LENET_HID * B);
    float *dp1 = dev(LENET_C1 * NPOOL), *da1 = dev(LENET_C1 * NCOL), *ones = dev(NCOL);
    float *loss = dev(ntrain);
    int *arg, *all_y;
    CHECK(cudaMalloc(&arg, LENET_C1 * NPOOL * sizeof(int)));
    long nmax = ntrain > ntest ? ntrain : ntest;
    all_x = dev(nmax * 784);
    CHECK(cudaMalloc(&all_y, nmax * sizeof(int)));
    // Kernel queries, a setting and the extensible launch, as libraries
    // (Thrust, CUB) use them.
    cudaFuncAttributes attr;
    int per_sm = 0;
    CHECK(cudaFuncGetAttributes(&attr, im2col));
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, im2col, 256, 0));
    CHECK(cudaFuncSetCacheConfig(fill, cudaFuncCachePreferL1));
    printf("im2col: %d registers, up to %d threads a block, %d blocks of 256 per multiprocessor\n",
           attr.numRegs, attr.maxThreadsPerBlock, per_sm);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute priority[1];
    priority[0].id = cudaLaunchAttributePriority;
    priority[0].val.priority = 0;
    cfg.gridDim = dim3(blocks(NCOL));
    cfg.blockDim = dim3(256);
    cfg.attrs = priority;
    cfg.numAttrs = 1;
    struct fill_args ones_args = {ones, 1.0f, NCOL};
    CHECK(cudaLaunchKernelEx(&cfg, fill, ones_args));
    const float one = 1, zero = 0, lr = -0.1f;

    // Forward pass of one batch of images at x (labels unused): logits in z.
    auto forward = [&](const float *xb) {
        LAUNCH(im2col, xb, col, KK * NCOL);
        BLAS(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, LENET_C1, NCOL, KK, &one, w1.w, LENET_C1, col, KK, &zero, y1, LENET_C1));
        LAUNCH(bias_relu, y1, b1.w, a1, LENET_C1 * NCOL, LENET_C1);
        LAUNCH(maxpool, a1, p1, arg, LENET_C1 * NPOOL);
        BLAS(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, LENET_HID, B, LENET_FEAT, &one, w2.w, LENET_HID, p1, LENET_FEAT, &zero, h2, LENET_HID));
        LAUNCH(bias_relu, h2, b2.w, a2, LENET_HID * B, LENET_HID);
        BLAS(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, LENET_CLASSES, B, LENET_HID, &one, w3.w, LENET_CLASSES, a2, LENET_HID, &zero, z, LENET_CLASSES));
        LAUNCH(bias_add, z, b3.w, z, LENET_CLASSES * B, LENET_CLASSES);
    };

    CHECK(cudaMemcpy(all_x, train.data(), (size_t)ntrain * 784 * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(all_y, train_y.data(), ntrain * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    std::vector<float> losses(ntrain);
    double first = 0, last = 0;  // mean loss of the first and last epochs
    for (int e = 0; e < epochs; e++) {
        for (int s = 0; s < ntrain / B; s++) {
            x = all_x + (long)s * B * 784;
            forward(x);
            LAUNCH(softmax_xent, z, all_y + s * B, dz, loss + s * B, B);
            // Backward: fc2, fc1, pooling, conv1 (no gradient to the input).
            BLAS(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_T, LENET_CLASSES, LENET_HID, B, &one, dz, LENET_CLASSES, a2, LENET_HID, &zero, w3.g, LENET_CLASSES));
            BLAS(cublasSgemv_v2(h, CUBLAS_OP_N, LENET_CLASSES, B, &one, dz, LENET_CLASSES, ones, 1, &zero, b3.g, 1));
            BLAS(cublasSgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, LENET_HID, B, LENET_CLASSES, &one, w3.w, LENET_CLASSES, dz, LENET_CLASSES, &zero, da2, LENET_HID));
            LAUNCH(relu_back, a2, da2, LENET_HID * B);
            BLAS(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_T, LENET_HID, LENET_FEAT, B, &one, da2, LENET_HID, p1, LENET_FEAT, &zero, w2.g, LENET_HID));
            BLAS(cublasSgemv_v2(h, CUBLAS_OP_N, LENET_HID, B, &one, da2, LENET_HID, ones, 1, &zero, b2.g, 1));
            BLAS(cublasSgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, LENET_FEAT, B, LENET_HID, &one, w2.w, LENET_HID, da2, LENET_HID, &zero, dp1, LENET_FEAT));
            CHECK(cudaMemset(da1, 0, LENET_C1 * NCOL * sizeof(float)));
            LAUNCH(unpool, dp1, arg, da1, LENET_C1 * NPOOL);
            LAUNCH(relu_back, a1, da1, LENET_C1 * NCOL);
            BLAS(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_T, LENET_C1, KK, NCOL, &one, da1, LENET_C1, col, KK, &zero, w1.g, LENET_C1));
            BLAS(cublasSgemv_v2(h, CUBLAS_OP_N, LENET_C1, NCOL, &one, da1, LENET_C1, ones, 1, &zero, b1.g, 1));
            for (Param *p : params) BLAS(cublasSaxpy_v2(h, p->n, &lr, p->g, 1, p->w, 1));
        }
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(losses.data(), loss, ntrain * sizeof(float), cudaMemcpyDeviceToHost));
        double sum = 0;
        for (float l : losses) sum += l;
        last = sum / ntrain;
        if (e == 0) first = last;
        printf("epoch %d: loss %.6f\n", e + 1, last);
    }
    CHECK(cudaDeviceSynchronize());
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Test accuracy, and a digest of every weight's bits.
    CHECK(cudaMemcpy(all_x, test.data(), (size_t)ntest * 784 * sizeof(float), cudaMemcpyHostToDevice));
    int right = 0;
    std::vector<float> logits(LENET_CLASSES * B);
    for (int s = 0; s < ntest / B; s++) {
        forward(all_x + (long)s * B * 784);
        CHECK(cudaMemcpy(logits.data(), z, logits.size() * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < B; i++) {
            int best = 0;
            for (int c = 1; c < LENET_CLASSES; c++)
                if (logits[i * LENET_CLASSES + c] > logits[i * LENET_CLASSES + best]) best = c;
            right += best == test_y[s * B + i];
        }
    }
    double accuracy = (double)right / ntest;
    uint64_t digest = 0xcbf29ce484222325ull;  // FNV-1a
    for (Param *p : params) {
        std::vector<float> hw(p->n);
        CHECK(cudaMemcpy(hw.data(), p->w, p->n * sizeof(float), cudaMemcpyDeviceToHost));
        const unsigned char *bytes = (const unsigned char *)hw.data();
        for (size_t i = 0; i < hw.size() * sizeof(float); i++) digest = (digest ^ bytes[i]) * 0x100000001b3ull;
    }
    printf("test accuracy: %.4f\n", accuracy);
    printf("digest: %016llx\n", (unsigned long long)digest);
    printf("time: %.3f s training, %.0f images/s\n", secs, (double)ntrain * epochs / secs);
    BLAS(cublasDestroy_v2(h));
    // Chance is a loss of ln 10 = 2.30 and an accuracy of 0.1.
    bool learned = last < first && last < 0.5 && accuracy >= 0.9;
    printf("%s\n", learned ? "correct" : "DID NOT LEARN");
    return learned ? 0 : 1;
}
