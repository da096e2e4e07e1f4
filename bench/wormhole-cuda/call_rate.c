/* The cost of forwarding one cuBLAS or cuRAND call: a loop of calls that
 * do almost nothing (SSCAL of one element, generating two floats), timed,
 * with the result checked. Run once against a library directly and once
 * through Wormhole (stand-ins + server on the same library); the ratio of
 * the rates is the forwarding's share. run.sh does both with the CPU
 * stand-in device (examples/cuda/cpu_device/), so the library's own cost
 * is near zero and the figure is Wormhole's round trip per call; on a GPU
 * run it against NVIDIA's libraries the same way.
 * Usage: call_rate [CALLS]   (default 20000) */
#include <stdlib.h>
#include "sample_util.h"

int main(int argc, char **argv) {
    int calls = argc > 1 ? atoi(argv[1]) : 20000;
    float *d, h = 1.0f;
    CHECK_CUDA(cudaMalloc((void **)&d, 64));
    CHECK_CUDA(cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice));
    cublasHandle_t b;
    CHECK_BLAS(cublasCreate_v2(&b));
    const float one = 1.0f;
    double t0 = sample_now();
    for (int i = 0; i < calls; i++) CHECK_BLAS(cublasSscal_v2(b, 1, &one, d, 1));
    CHECK_CUDA(cudaDeviceSynchronize());
    double blas = sample_now() - t0;
    float dot = 0;
    t0 = sample_now();
    for (int i = 0; i < calls; i++) CHECK_BLAS(cublasSdot_v2(b, 1, d, 1, d, 1, &dot));
    double dots = sample_now() - t0;
    curandGenerator_t g;
    CHECK_RAND(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    t0 = sample_now();
    for (int i = 0; i < calls; i++) CHECK_RAND(curandGenerateUniform(g, d + 2, 2));
    CHECK_CUDA(cudaDeviceSynchronize());
    double rand = sample_now() - t0;
    CHECK_CUDA(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    printf("sscal %.2f us/call, sdot (host result) %.2f us/call, curandGenerateUniform %.2f us/call (%d calls; x = %g, dot = %g)\n",
           blas / calls * 1e6, dots / calls * 1e6, rand / calls * 1e6, calls, h, dot);
    CHECK_RAND(curandDestroyGenerator(g));
    CHECK_BLAS(cublasDestroy_v2(b));
    return h == 1.0f && dot == 1.0f ? 0 : 1;
}
