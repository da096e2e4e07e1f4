// __constant__ and __device__ variables from the host, as programs use
// them for coefficients and counters: copies to and from them (from host
// and device memory, at an offset, on a stream), their addresses and
// sizes. No kernel runs (the CPU stand-in device runs none of these), so
// the values are what the copies put there. Prints one line per check;
// natively and through Wormhole the lines must be the same.
#include <cstdio>
#include <cstring>

__constant__ float coeffs[16];
__device__ int counter;

static int failures;

static void expect(const char *what, cudaError_t r, bool ok) {
    printf("%-36s %d %s\n", what, (int)r, r == cudaSuccess && ok ? "ok" : "WRONG");
    if (r != cudaSuccess || !ok) failures++;
}

int main() {
    float host[16], back[16];
    for (int i = 0; i < 16; i++) host[i] = 0.5f * i;
    cudaError_t r = cudaMemcpyToSymbol(coeffs, host, sizeof host);
    memset(back, 0, sizeof back);
    cudaError_t r2 = cudaMemcpyFromSymbol(back, coeffs, sizeof back);
    expect("constant array there and back", r == cudaSuccess ? r2 : r, memcmp(host, back, sizeof host) == 0);

    size_t size = 0;
    r = cudaGetSymbolSize(&size, coeffs);
    expect("its size", r, size == sizeof host);

    // A counter set through its address, read through the symbol.
    int *p = nullptr, v = 42, got = 0;
    r = cudaGetSymbolAddress((void **)&p, counter);
    if (r == cudaSuccess) r = cudaMemcpy(p, &v, sizeof v, cudaMemcpyHostToDevice);
    if (r == cudaSuccess) r = cudaMemcpyFromSymbol(&got, counter, sizeof got);
    expect("counter through its address", r, got == 42);

    // Four floats from device memory into the array at an offset.
    float four[4] = {100, 200, 300, 400}, *d = nullptr;
    r = cudaMalloc((void **)&d, sizeof four);
    if (r == cudaSuccess) r = cudaMemcpy(d, four, sizeof four, cudaMemcpyHostToDevice);
    if (r == cudaSuccess) r = cudaMemcpyToSymbol(coeffs, d, sizeof four, 8 * sizeof(float), cudaMemcpyDeviceToDevice);
    if (r == cudaSuccess) r = cudaMemcpyFromSymbol(back, coeffs, sizeof back);
    expect("device to symbol at an offset", r, back[7] == 3.5f && back[8] == 100 && back[11] == 400 && back[12] == 6);

    // On a stream, then waited for.
    cudaStream_t s;
    cudaStreamCreate(&s);
    float two[2] = {-1, -2}, last[2] = {0, 0};
    r = cudaMemcpyToSymbolAsync(coeffs, two, sizeof two, 14 * sizeof(float), cudaMemcpyHostToDevice, s);
    if (r == cudaSuccess) r = cudaMemcpyFromSymbolAsync(last, coeffs, sizeof last, 14 * sizeof(float), cudaMemcpyDeviceToHost, s);
    if (r == cudaSuccess) r = cudaStreamSynchronize(s);
    expect("on a stream", r, last[0] == -1 && last[1] == -2);
    cudaStreamDestroy(s);

    // Past the end of the variable: refused, nothing copied.
    r = cudaMemcpyToSymbol(coeffs, host, sizeof host, 4);
    printf("%-36s %d\n", "past the end", (int)r);
    cudaGetLastError();
    cudaFree(d);
    printf("%s\n", failures ? "WRONG" : "correct");
    return failures ? 1 : 0;
}
