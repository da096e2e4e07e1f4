// thrust_sort: Thrust on the device (a sequence, a descending sort and a
// reduction over a million integers), as a library user writes it. Thrust
// and CUB call kernel queries and the extensible launch beside <<<>>>
// (cudaFuncGetAttributes, cudaOccupancyMaxActiveBlocksPerMultiprocessor-
// WithFlags, cudaLaunchKernelExC), so the program links against the
// stand-ins only if they export those. Prints "correct" when the results
// are right.
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <cstdio>

int main() {
    const int n = 1 << 20;
    thrust::device_vector<int> v(n);
    thrust::sequence(v.begin(), v.end(), 0);
    thrust::sort(v.begin(), v.end(), thrust::greater<int>());
    long long sum = thrust::reduce(v.begin(), v.end(), 0LL);
    int first = v[0], last = v[n - 1];
    bool ok = sum == (long long)n * (n - 1) / 2 && first == n - 1 && last == 0;
    printf("sum %lld, first %d, last %d\n%s\n", sum, first, last, ok ? "correct" : "WRONG");
    return ok ? 0 : 1;
}
