/* The element-wise kernels of examples/cuda/lenet.cu, written once for two
 * compilers: nvcc builds each into a __global__ kernel (lenet.cu), and the
 * C compiler into the CPU stand-in's twin of that kernel
 * (examples/cuda/cpu_device/), so the no-GPU test runs the same
 * arithmetic the GPU does.
 *
 * Each kernel takes one struct by value (a parameter whose layout the
 * cubin's .nv.info gives, as for any by-value argument) whose `n` is the
 * number of elements; element `i` is computed by NAME_at(i, p).
 *
 * Layouts are column-major, as cuBLAS wants them: the batch's images are
 * X[b*784 + y*28 + x]; conv1's patches are the 25 x (B*576) matrix COL; a
 * feature map is C x (B*P), channel fastest, so one image's pooled
 * features are a contiguous column of 8*144 = 1152 floats. */
#ifndef LENET_KERNELS_H
#define LENET_KERNELS_H

#ifdef __CUDACC__
#define LENET_AT __device__ static inline
#else
#define LENET_AT static inline
#endif

#define LENET_IMG 28             /* input side */
#define LENET_K 5                /* conv1 kernel side */
#define LENET_CONV (LENET_IMG - LENET_K + 1) /* 24: conv1 output side */
#define LENET_POOL (LENET_CONV / 2)          /* 12: after 2x2 max-pooling */
#define LENET_C1 8               /* conv1 channels */
#define LENET_FEAT (LENET_C1 * LENET_POOL * LENET_POOL) /* 1152 */
#define LENET_HID 64             /* hidden units */
#define LENET_CLASSES 10

/* COL[k + 25*j] for patch element k of output position j = b*576 + y*24 + x. */
struct im2col_args { const float *x; float *col; long n; };
LENET_AT void im2col_at(long i, struct im2col_args p) {
    long k = i % (LENET_K * LENET_K), j = i / (LENET_K * LENET_K);
    long b = j / (LENET_CONV * LENET_CONV), q = j % (LENET_CONV * LENET_CONV);
    long y = q / LENET_CONV + k / LENET_K, x = q % LENET_CONV + k % LENET_K;
    p.col[i] = p.x[b * LENET_IMG * LENET_IMG + y * LENET_IMG + x];
}

/* A = max(0, Y + bias[row]) for a rows x cols matrix. */
struct bias_relu_args { const float *y; const float *bias; float *a; long n; int rows; };
LENET_AT void bias_relu_at(long i, struct bias_relu_args p) {
    float v = p.y[i] + p.bias[i % p.rows];
    p.a[i] = v > 0 ? v : 0;
}

/* Z = Y + bias[row] (the output layer: no activation). */
struct bias_add_args { const float *y; const float *bias; float *z; long n; int rows; };
LENET_AT void bias_add_at(long i, struct bias_add_args p) {
    p.z[i] = p.y[i] + p.bias[i % p.rows];
}

/* 2x2 max-pooling of the C1 x (B*576) map A into C1 x (B*144) P, keeping
 * where each maximum came from (ties: the first). */
struct maxpool_args { const float *a; float *p; int *arg; long n; };
LENET_AT void maxpool_at(long i, struct maxpool_args p) {
    long c = i % LENET_C1, j = i / LENET_C1;
    long b = j / (LENET_POOL * LENET_POOL), q = j % (LENET_POOL * LENET_POOL);
    long y = 2 * (q / LENET_POOL), x = 2 * (q % LENET_POOL);
    long best = -1;
    float m = 0;
    for (int dy = 0; dy < 2; dy++)
        for (int dx = 0; dx < 2; dx++) {
            long at = c + LENET_C1 * (b * LENET_CONV * LENET_CONV + (y + dy) * LENET_CONV + x + dx);
            if (best < 0 || p.a[at] > m) { m = p.a[at]; best = at; }
        }
    p.p[i] = m;
    p.arg[i] = (int)best;
}

/* The gradient of each pooled element goes back to where its maximum was
 * (dA is zeroed first; the windows do not overlap). */
struct unpool_args { const float *dp; const int *arg; float *da; long n; };
LENET_AT void unpool_at(long i, struct unpool_args p) {
    p.da[p.arg[i]] = p.dp[i];
}

/* dA = 0 where the ReLU's output A was 0. */
struct relu_back_args { const float *a; float *d; long n; };
LENET_AT void relu_back_at(long i, struct relu_back_args p) {
    if (p.a[i] <= 0) p.d[i] = 0;
}

/* One thread per image: softmax of its column of Z, its cross-entropy
 * loss, and the gradient (softmax - one-hot) / batch into dZ. */
struct softmax_xent_args { const float *z; const int *label; float *dz; float *loss; long n; };
LENET_AT void softmax_xent_at(long i, struct softmax_xent_args p) {
    const float *z = p.z + i * LENET_CLASSES;
    float *d = p.dz + i * LENET_CLASSES;
    float m = z[0], s = 0;
    for (int c = 1; c < LENET_CLASSES; c++) m = z[c] > m ? z[c] : m;
    for (int c = 0; c < LENET_CLASSES; c++) s += expf(z[c] - m);
    int t = p.label[i];
    for (int c = 0; c < LENET_CLASSES; c++)
        d[c] = (expf(z[c] - m) / s - (c == t ? 1.0f : 0.0f)) / (float)p.n;
    p.loss[i] = logf(s) - (z[t] - m);
}

struct fill_args { float *x; float v; long n; };
LENET_AT void fill_at(long i, struct fill_args p) { p.x[i] = p.v; }

/* Every kernel, for code that handles them all alike. */
#define LENET_KERNELS(K) K(im2col) K(bias_relu) K(bias_add) K(maxpool) K(unpool) \
    K(relu_back) K(softmax_xent) K(fill)

#endif
