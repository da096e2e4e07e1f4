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
