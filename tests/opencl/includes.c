/* Include directories named in build options (-I DIR), which the compiler
 * reads where it runs: through Wormhole, in the tenant, which does not see
 * the application's files (a confined tenant has a root of its own; a
 * server on another host, another disk). A private directory (mkdtemp:
 * mode 0700, closed to any other uid) holds a header and one in a
 * subdirectory; a program built with -I on it uses both, the header is
 * changed and a new program sees the change (pyopencl's header
 * dependencies), a compilation takes -I too, and the build options the
 * application reads back are its own. */
#include "common.h"

#include <sys/stat.h>
#include <unistd.h>

static const char *src =
    "#include \"val.h\"\n"
    "#include \"sub/two.h\"\n"
    "__kernel void k(__global int *out) { out[0] = VAL * TWO; }\n";

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(text, f);
    fclose(f);
}

static int run(env_t *t, cl_program p) {
    cl_kernel k = kernel(p, "k");
    cl_mem out = buffer(t, CL_MEM_WRITE_ONLY, sizeof(int), NULL);
    CHECK(clSetKernelArg(k, 0, sizeof out, &out));
    size_t one = 1;
    CHECK(clEnqueueNDRangeKernel(t->q, k, 1, NULL, &one, NULL, 0, NULL, NULL));
    int v = 0;
    CHECK(clEnqueueReadBuffer(t->q, out, CL_TRUE, 0, sizeof v, &v, 0, NULL, NULL));
    CHECK(clReleaseMemObject(out));
    CHECK(clReleaseKernel(k));
    return v;
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    char dir[] = "/tmp/wh-includes-XXXXXX";
    ASSERT(mkdtemp(dir) != NULL);
    char path[256], sub[256], opts[512];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    ASSERT(mkdir(sub, 0700) == 0);
    snprintf(path, sizeof path, "%s/val.h", dir);
    write_file(path, "#define VAL 21\n");
    snprintf(path, sizeof path, "%s/sub/two.h", dir);
    write_file(path, "#define TWO 2\n");
    snprintf(opts, sizeof opts, "-I %s -DUNUSED=1", dir);

    cl_program p = build(&t, src, opts);
    printf("built with -I DIR: %d\n", run(&t, p));
    char shown[512] = "";
    CHECK(clGetProgramBuildInfo(p, t.device, CL_PROGRAM_BUILD_OPTIONS, sizeof shown, shown, NULL));
    printf("options read back are the application's: %d\n", strcmp(shown, opts) == 0);
    CHECK(clReleaseProgram(p));

    snprintf(path, sizeof path, "%s/val.h", dir);
    write_file(path, "#define VAL 50\n");
    snprintf(opts, sizeof opts, "-I%s", dir);
    p = build(&t, src, opts);
    printf("after the header changed: %d\n", run(&t, p));
    CHECK(clReleaseProgram(p));

    /* A compilation, then a link, with the same directory. */
    cl_int e;
    p = clCreateProgramWithSource(t.ctx, 1, &src, NULL, &e);
    CHECK_ERR(e, "clCreateProgramWithSource");
    CHECK(clCompileProgram(p, 1, &t.device, opts, 0, NULL, NULL, NULL, NULL));
    cl_program linked = clLinkProgram(t.ctx, 1, &t.device, "", 1, &p, NULL, NULL, &e);
    CHECK_ERR(e, "clLinkProgram");
    printf("compiled with -I DIR and linked: %d\n", run(&t, linked));
    CHECK(clReleaseProgram(linked));
    CHECK(clReleaseProgram(p));

    /* A directory that does not exist: the compiler's own refusal. */
    p = clCreateProgramWithSource(t.ctx, 1, &src, NULL, &e);
    CHECK_ERR(e, "clCreateProgramWithSource");
    PRINT_CODE("build with a missing include directory",
               clBuildProgram(p, 1, &t.device, "-I /nonexistent/wh-includes", NULL, NULL));
    CHECK(clReleaseProgram(p));

    snprintf(path, sizeof path, "%s/val.h", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/sub/two.h", dir);
    unlink(path);
    rmdir(sub);
    rmdir(dir);
    env_done(&t);
    printf("includes: done\n");
    return 0;
}
