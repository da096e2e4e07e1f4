// Tiled matrix multiply with shared memory, streams and events, for GPU
// validation (native vs Wormhole). Exits 0 when the result matches the
// host's.
#include <cstdio>
#include <cstdlib>
#include <cmath>

#define TILE 16
__global__ void matmul(const float *A, const float *B, float *C, int n) {
    __shared__ float As[TILE][TILE], Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0;
    for (int t = 0; t < n / TILE; t++) {
        As[threadIdx.y][threadIdx.x] = A[row * n + t * TILE + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * n + col] = acc;
}

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); return 1; } } while (0)

int main() {
    const int n = 512;
    size_t bytes = n * n * sizeof(float);
    float *A = (float *)malloc(bytes), *B = (float *)malloc(bytes), *C = (float *)malloc(bytes);
    for (int i = 0; i < n * n; i++) { A[i] = (i % 7) - 3; B[i] = (i % 5) - 2; }
    float *dA, *dB, *dC;
    cudaStream_t s; cudaEvent_t e0, e1;
    CHECK(cudaStreamCreate(&s)); CHECK(cudaEventCreate(&e0)); CHECK(cudaEventCreate(&e1));
    CHECK(cudaMalloc(&dA, bytes)); CHECK(cudaMalloc(&dB, bytes)); CHECK(cudaMalloc(&dC, bytes));
    CHECK(cudaMemcpyAsync(dA, A, bytes, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemcpyAsync(dB, B, bytes, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemsetAsync(dC, 0, bytes, s));
    CHECK(cudaEventRecord(e0, s));
    dim3 block(TILE, TILE), grid(n / TILE, n / TILE);
    for (int k = 0; k < 10; k++) matmul<<<grid, block, 0, s>>>(dA, dB, dC, n);
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    CHECK(cudaMemcpyAsync(C, dC, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    int bad = 0;
    for (int i = 0; i < n && bad < 10; i += 37)
        for (int j = 0; j < n; j += 41) {
            float ref = 0;
            for (int k = 0; k < n; k++) ref += A[i * n + k] * B[k * n + j];
            bad += fabsf(ref - C[i * n + j]) > 1e-3f;
        }
    printf("matmul: %dx%d x10 in %.3f ms (events), %s\n", n, n, ms, bad ? "WRONG" : "correct");
    cudaStreamDestroy(s); cudaEventDestroy(e0); cudaEventDestroy(e1);
    cudaFree(dA); cudaFree(dB); cudaFree(dC);
    return bad != 0;
}
