/* What NVIDIA's driver library (libcuda.so.1) would give the client on a
 * machine that has one, for scripts/try-pytorch.sh on a machine without
 * a GPU: PyTorch resolves cuDevicePrimaryCtxGetState from it when CUDA
 * starts, and asks it whether a device's primary context is active. The
 * client process makes none (its runtime calls run in the server's
 * tenant), so none is. Wormhole does not forward the driver API; a client
 * without NVIDIA's driver needs this library for PyTorch to start.
 * Build: cc -shared -fPIC -o libcuda.so.1 -Wl,-soname,libcuda.so.1 cpu_driver.c */
int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
    (void)dev;
    if (!flags || !active) return 1; /* CUDA_ERROR_INVALID_VALUE */
    *flags = 0;
    *active = 0;
    return 0;
}
/* Before it creates a cuBLAS handle, PyTorch makes sure the thread has a
 * context: none is current in the client (its runtime calls run in the
 * tenant), so it retains the device's primary context and makes it
 * current. Both are bookkeeping here: the context is the tenant's. */
static int primary;
int cuCtxGetCurrent(void **ctx) {
    if (!ctx) return 1;
    *ctx = 0;
    return 0;
}
int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    if (!ctx) return 1;
    if (dev != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *ctx = &primary;
    return 0;
}
int cuCtxSetCurrent(void *ctx) { return ctx == 0 || ctx == &primary ? 0 : 201; /* CUDA_ERROR_INVALID_CONTEXT */ }
