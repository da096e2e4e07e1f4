// vectorAdd: the CUDA samples' first program, for GPU validation. Built
// with `nvcc -cudart shared`, it runs natively and, unmodified, through
// Wormhole (libcudart.so.N stand-in first on LD_LIBRARY_PATH). Exits 0
// when the result is correct; prints the time of the kernel loop.
#include <cstdio>
#include <cstdlib>
#include <chrono>

__global__ void vecAdd(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); return 1; } } while (0)

int main() {
    const int n = 1 << 20, iters = 1000;
    size_t bytes = n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) { a[i] = i; b[i] = 2 * i; }
    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, bytes)); CHECK(cudaMalloc(&db, bytes)); CHECK(cudaMalloc(&dc, bytes));
    CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyDefault));
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < iters; k++) vecAdd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += c[i] != 3.0f * i;
    printf("vectorAdd: %d launches of %d items in %.4f s (%.1f us/launch), %s\n", iters, n, s,
           s / iters * 1e6, bad ? "WRONG" : "correct");
    cudaFree(da); cudaFree(db); cudaFree(dc);
    return bad != 0;
}
