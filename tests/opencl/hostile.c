/* A hostile tenant and its neighbour, for the confinement tests
 * (crates/wormhole/it/tests/confinement.rs). On a CPU device a kernel is
 * native code running in the tenant's process, so this kernel makes system
 * calls itself (x86-64 inline assembly) and reports each one's result.
 *
 *   hostile victim FILE      hold a 1 MiB secret in two buffers (one made
 *                            from a host pointer, one written into), print
 *                            "ready", wait (at most 120 s) for FILE to
 *                            exist, then check the secret and a kernel's
 *                            result ("intact ..." or "CHANGED ...")
 *   hostile attack PID LPID DIR TOKEN
 *                            from a kernel: open /proc/PID/mem and
 *                            /proc/PID/fd, signal PID, LPID and everyone
 *                            (signal 0: permission is checked, nothing is
 *                            delivered), create a file in DIR, ptrace
 *                            (PTRACE_SEIZE, which does not stop it) and
 *                            process_vm_readv PID, open TOKEN, and open
 *                            its own /proc/self/comm for writing (which a
 *                            tenant may: NVIDIA's driver needs its own
 *                            /proc entries writable); print
 *                            "NAME RESULT" per attempt (RESULT < 0: the
 *                            kernel's refusal, -errno)
 *
 * Nothing here harms the machine if confinement fails: signals are 0, the
 * file goes in the test's own directory, /proc/PID/mem is only opened, a
 * seized process is let go when the attacker exits. */
#include "common.h"

#include <unistd.h>

#define SECRET (1 << 20)

static const char *src =
    "static long sc6(long n, long a, long b, long c, long d, long e, long f) {\n"
    "  long r;\n"
    "  __asm__ volatile(\"mov %5, %%r10; mov %6, %%r8; mov %7, %%r9; syscall\"\n"
    "                   : \"=a\"(r)\n"
    "                   : \"a\"(n), \"D\"(a), \"S\"(b), \"d\"(c), \"r\"(d), \"r\"(e), \"r\"(f)\n"
    "                   : \"rcx\", \"r8\", \"r9\", \"r10\", \"r11\", \"memory\");\n"
    "  return r;\n"
    "}\n"
    "static long sc(long n, long a, long b, long c, long d) { return sc6(n, a, b, c, d, 0, 0); }\n"
    "static long opened(long fd) { if (fd >= 0) sc(3, fd, 0, 0, 0); return fd; }\n"
    "__kernel void attack(__global long *out, __global const char *s, long pid, long lpid) {\n"
    "  __global const char *mem = s, *fd = s + 256, *file = s + 512, *token = s + 768;\n"
    "  __global const char *own = s + 1024;\n"
    "  out[0] = opened(sc(2, (long)mem, 0, 0, 0));            /* open O_RDONLY */\n"
    "  out[1] = opened(sc(2, (long)fd, 0x10000, 0, 0));       /* O_DIRECTORY */\n"
    "  out[2] = sc(62, pid, 0, 0, 0);                          /* kill(pid, 0) */\n"
    "  out[3] = sc(62, lpid, 0, 0, 0);\n"
    "  out[4] = sc(62, -1, 0, 0, 0);\n"
    "  out[5] = opened(sc(2, (long)file, 0101, 0644, 0));      /* O_CREAT|O_WRONLY */\n"
    "  out[6] = sc(101, 0x4206, pid, 0, 0);                    /* PTRACE_SEIZE */\n"
    "  long lv[2]; long rv[2]; long buf = 0;\n"
    "  lv[0] = (long)&buf; lv[1] = 8; rv[0] = 4096; rv[1] = 8;\n"
    "  out[7] = sc6(310, pid, (long)lv, 1, (long)rv, 1, 0);   /* process_vm_readv */\n"
    "  out[8] = opened(sc(2, (long)token, 0, 0, 0));\n"
    "  out[9] = sc(102, 0, 0, 0, 0);                           /* getuid */\n"
    "  out[10] = opened(sc(2, (long)own, 1, 0, 0));            /* O_WRONLY */\n"
    "}\n"
    "__kernel void sum(__global const uint *a, __global uint *out) {\n"
    "  uint s = 0; for (int i = 0; i < 1024; i++) s += a[get_global_id(0) * 1024 + i];\n"
    "  out[get_global_id(0)] = s;\n"
    "}\n";

static const char *names[] = {"open-mem", "open-fd",   "kill-neighbour",
                              "kill-listener", "kill-all", "write-dir",
                              "ptrace", "vm-read", "open-token", "uid",
                              "own-proc"};

static env_t env;
static cl_context ctx;
static cl_command_queue q;
static cl_program prog;

static void setup(void) {
    env_init(&env, 0);
    ctx = env.ctx;
    q = env.q;
    prog = build(&env, src, "");
}

static int victim(const char *file) {
    static uint32_t secret[SECRET / 4], back[SECRET / 4];
    for (int i = 0; i < SECRET / 4; i++)
        secret[i] = 0x5ec12e70u ^ (uint32_t)i * 2654435761u;
    setup();
    cl_int e;
    cl_mem copied = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, SECRET, secret, &e);
    CHECK_ERR(e, "clCreateBuffer (copy)");
    cl_mem written = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SECRET, NULL, &e);
    CHECK_ERR(e, "clCreateBuffer");
    CHECK(clEnqueueWriteBuffer(q, written, CL_TRUE, 0, SECRET, secret, 0, NULL, NULL));
    CHECK(clFinish(q));
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < 1200 && access(file, F_OK) != 0; i++)
        usleep(100000);
    int intact = 1;
    cl_mem bufs[2] = {copied, written};
    for (int b = 0; b < 2; b++) {
        CHECK(clEnqueueReadBuffer(q, bufs[b], CL_TRUE, 0, SECRET, back, 0, NULL, NULL));
        intact &= memcmp(back, secret, SECRET) == 0;
    }
    cl_kernel k = clCreateKernel(prog, "sum", &e);
    CHECK_ERR(e, "clCreateKernel");
    size_t groups = SECRET / 4 / 1024;
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, groups * 4, NULL, &e);
    CHECK_ERR(e, "clCreateBuffer (out)");
    CHECK(clSetKernelArg(k, 0, sizeof copied, &copied));
    CHECK(clSetKernelArg(k, 1, sizeof out, &out));
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &groups, NULL, 0, NULL, NULL));
    uint32_t sums[SECRET / 4 / 1024];
    CHECK(clEnqueueReadBuffer(q, out, CL_TRUE, 0, sizeof sums, sums, 0, NULL, NULL));
    for (size_t g = 0; g < groups; g++) {
        uint32_t s = 0;
        for (int i = 0; i < 1024; i++)
            s += secret[g * 1024 + i];
        intact &= s == sums[g];
    }
    printf("%s\n", intact ? "intact" : "CHANGED");
    env_done(&env);
    return 0;
}

static int attack(char **argv) {
    setup();
    static char strings[1280];
    snprintf(strings, 256, "/proc/%s/mem", argv[0]);
    snprintf(strings + 256, 256, "/proc/%s/fd", argv[0]);
    snprintf(strings + 512, 256, "%s/planted", argv[2]);
    snprintf(strings + 768, 256, "%s", argv[3]);
    snprintf(strings + 1024, 256, "/proc/self/comm");
    cl_int e;
    cl_mem s = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof strings, strings, &e);
    CHECK_ERR(e, "clCreateBuffer (strings)");
    cl_long out[11];
    cl_mem o = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof out, NULL, &e);
    CHECK_ERR(e, "clCreateBuffer (out)");
    cl_kernel k = clCreateKernel(prog, "attack", &e);
    CHECK_ERR(e, "clCreateKernel");
    cl_long pid = atol(argv[0]), lpid = atol(argv[1]);
    CHECK(clSetKernelArg(k, 0, sizeof o, &o));
    CHECK(clSetKernelArg(k, 1, sizeof s, &s));
    CHECK(clSetKernelArg(k, 2, sizeof pid, &pid));
    CHECK(clSetKernelArg(k, 3, sizeof lpid, &lpid));
    size_t one = 1;
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &one, NULL, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(q, o, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    for (int i = 0; i < 11; i++)
        printf("%s %ld\n", names[i], (long)out[i]);
    env_done(&env);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "victim") == 0)
        return victim(argv[2]);
    if (argc == 6 && strcmp(argv[1], "attack") == 0)
        return attack(argv + 2);
    fprintf(stderr, "usage: hostile victim FILE | hostile attack PID LPID DIR TOKEN\n");
    return 2;
}
