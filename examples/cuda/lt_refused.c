/* cuBLASLt as Wormhole's stand-in answers it (crates/wormhole-cublaslt-13):
 * looked up with dlsym, as for any library a framework loads; every entry
 * point PyTorch imports refuses (CUBLAS_STATUS_NOT_SUPPORTED, 15) but the
 * version. Prints one line per call. */
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
    void *h = dlopen("libcublasLt.so.13", RTLD_LAZY);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    size_t (*version)(void) = (size_t (*)(void))dlsym(h, "cublasLtGetVersion");
    int (*desc)(void **, int, int) = (int (*)(void **, int, int))dlsym(h, "cublasLtMatmulDescCreate");
    int (*pref)(void **) = (int (*)(void **))dlsym(h, "cublasLtMatmulPreferenceCreate");
    if (!version || !desc || !pref) { printf("missing an entry point\n"); return 1; }
    void *d = &h, *p = &h;
    printf("version: %zu\n", version());
    int r = desc(&d, 68 /* CUBLAS_COMPUTE_32F */, 0 /* CUDA_R_32F */);
    printf("matmul descriptor: %d, %s\n", r, d == &h ? "untouched" : "written");
    r = pref(&p);
    printf("preference: %d, %s\n", r, p == &h ? "untouched" : "written");
    return 0;
}
