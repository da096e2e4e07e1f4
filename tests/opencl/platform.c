/* Platforms, devices, contexts and queues: info queries whose values hold
 * handles or property lists, context creation from a type, queues with
 * properties, sub-devices and timers. */
#include "common.h"

static void device_info(env_t *t) {
    cl_platform_id p = NULL;
    cl_device_type ty;
    cl_uint cu, dims;
    size_t wis[3], mwg;
    cl_ulong gmem;
    cl_bool avail;
    char name[256];
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_PLATFORM, sizeof p, &p, NULL));
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_TYPE, sizeof ty, &ty, NULL));
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL));
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof dims, &dims, NULL));
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof wis, wis, NULL));
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof mwg, &mwg, NULL));
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL));
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL));
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_NAME, sizeof name, name, NULL));
    printf("device: platform same %d type %lx dims %u sizes %zu %zu %zu wg %zu available %u\n", p == t->platform,
           (unsigned long)ty, dims, wis[0], wis[1], wis[2], mwg, avail);
    printf("device: name %s compute units %u\n", name, cu);
    /* Not compared line for line: PoCL reports no more than the memory the
     * process may use, and a tenant's cgroup may allow less than the
     * host's (crates/wormhole/it/tests/opencl.rs checks it is no more). */
    printf("~global mem %lu\n", (unsigned long)gmem);
    printf("device: version %s\n", t->device_version);
    size_t n = 0;
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_EXTENSIONS, 0, NULL, &n));
    char *ext = malloc(n);
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_EXTENSIONS, n, ext, NULL));
    printf("~device: extensions %s\n", ext);
    /* Wormhole leaves out extensions it does not forward (command buffers);
     * the others must all be there. */
    printf("device: forwardable extensions");
    for (char *tok = strtok(ext, " "); tok; tok = strtok(NULL, " "))
        if (strncmp(tok, "cl_khr_command_buffer", 21) != 0) printf(" %s", tok);
    printf("\n");
    free(ext);
    char pv[256], pn[256];
    CHECK(clGetPlatformInfo(t->platform, CL_PLATFORM_VERSION, sizeof pv, pv, NULL));
    CHECK(clGetPlatformInfo(t->platform, CL_PLATFORM_NAME, sizeof pn, pn, NULL));
    printf("platform: version %s\n", pv);
    printf("~platform: name %s\n", pn);
    cl_uint nd = 0;
    CHECK(clGetDeviceIDs(t->platform, CL_DEVICE_TYPE_ALL, 0, NULL, &nd));
    cl_device_id def;
    CHECK(clGetDeviceIDs(t->platform, CL_DEVICE_TYPE_DEFAULT, 1, &def, NULL));
    printf("devices: %u, default is first %d\n", nd, def == t->device);
}

static void contexts(env_t *t) {
    cl_uint nd, rc;
    cl_device_id d;
    CHECK(clGetContextInfo(t->ctx, CL_CONTEXT_NUM_DEVICES, sizeof nd, &nd, NULL));
    CHECK(clGetContextInfo(t->ctx, CL_CONTEXT_DEVICES, sizeof d, &d, NULL));
    CHECK(clGetContextInfo(t->ctx, CL_CONTEXT_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    size_t psz = 0;
    CHECK(clGetContextInfo(t->ctx, CL_CONTEXT_PROPERTIES, 0, NULL, &psz));
    ASSERT(rc >= 1);
    printf("context: devices %u same %d properties size %zu\n", nd, d == t->device, psz);
    printf("~context: refs %u\n", rc);
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)t->platform, 0};
    cl_int e;
    cl_context c2 = clCreateContextFromType(props, CL_DEVICE_TYPE_ALL, NULL, NULL, &e);
    CHECK_ERR(e, "clCreateContextFromType");
    cl_context_properties got[8] = {0};
    size_t gsz = 0;
    CHECK(clGetContextInfo(c2, CL_CONTEXT_PROPERTIES, sizeof got, got, &gsz));
    printf("context from type: properties size %zu key %lx platform same %d\n", gsz, (unsigned long)got[0],
           (cl_platform_id)got[1] == t->platform);
    cl_context bad = clCreateContextFromType(props, CL_DEVICE_TYPE_ACCELERATOR, NULL, NULL, &e);
    /* (PoCL 3.1 returns a non-NULL context along with the error.) */
    printf("context of accelerators: %d\n", e);
    cl_context_properties badp[] = {0x9999, 1, 0};
    bad = clCreateContext(badp, 1, &t->device, NULL, NULL, &e);
    printf("context with an unknown property: %d null %d\n", e, bad == NULL);
    CHECK(clRetainContext(c2));
    CHECK(clGetContextInfo(c2, CL_CONTEXT_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    ASSERT(rc >= 2);
    printf("~context refs after retain %u\n", rc);
    CHECK(clReleaseContext(c2));
    CHECK(clReleaseContext(c2));
}

static void queues(env_t *t) {
    cl_context c;
    cl_device_id d;
    cl_uint rc;
    cl_command_queue_properties qp;
    CHECK(clGetCommandQueueInfo(t->q, CL_QUEUE_CONTEXT, sizeof c, &c, NULL));
    CHECK(clGetCommandQueueInfo(t->q, CL_QUEUE_DEVICE, sizeof d, &d, NULL));
    CHECK(clGetCommandQueueInfo(t->q, CL_QUEUE_REFERENCE_COUNT, sizeof rc, &rc, NULL));
    CHECK(clGetCommandQueueInfo(t->q, CL_QUEUE_PROPERTIES, sizeof qp, &qp, NULL));
    ASSERT(rc >= 1);
    printf("~queue: refs %u\n", rc);
    printf("queue: context same %d device same %d props %lx\n", c == t->ctx, d == t->device,
           (unsigned long)qp);
    if (t->cl_major >= 2) {
        cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
        cl_int e;
        cl_command_queue q2 = clCreateCommandQueueWithProperties(t->ctx, t->device, props, &e);
        CHECK_ERR(e, "clCreateCommandQueueWithProperties");
        CHECK(clGetCommandQueueInfo(q2, CL_QUEUE_PROPERTIES, sizeof qp, &qp, NULL));
        size_t n = 0;
        cl_int pe = clGetCommandQueueInfo(q2, CL_QUEUE_PROPERTIES_ARRAY, 0, NULL, &n);
        printf("queue with properties: props %lx properties array %d size %zu\n", (unsigned long)qp, pe, n);
        cl_queue_properties badp[] = {0x9999, 1, 0};
        cl_command_queue q3 = clCreateCommandQueueWithProperties(t->ctx, t->device, badp, &e);
        printf("queue with an unknown property: %d null %d\n", e, q3 == NULL);
        CHECK(clReleaseCommandQueue(q2));
        cl_ulong dev_ts = 0, host_ts = 0, host2 = 0;
        cl_int te = clGetDeviceAndHostTimer(t->device, &dev_ts, &host_ts);
        cl_int te2 = clGetHostTimer(t->device, &host2);
        printf("timers: %d %d nonzero %d\n", te, te2, te == CL_SUCCESS ? host_ts != 0 && host2 >= host_ts : 1);
    }
}

/* Retaining and releasing a root device changes nothing: it stays usable
 * after more releases than retains (OpenCV retains and releases every
 * device it uses; through Wormhole the handle went invalid). */
static void root_device_refs(env_t *t) {
    CHECK(clRetainDevice(t->device));
    CHECK(clReleaseDevice(t->device));
    CHECK(clReleaseDevice(t->device));
    CHECK(clReleaseDevice(t->device));
    cl_bool avail = CL_FALSE;
    size_t sz = 0;
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_AVAILABLE, sizeof avail, &avail, &sz));
    printf("root device after retain and three releases: available %u (%zu bytes)\n", avail, sz);
}

static void sub_devices(env_t *t) {
    cl_uint cu;
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL));
    cl_uint maxsub = 0;
    CHECK(clGetDeviceInfo(t->device, CL_DEVICE_PARTITION_MAX_SUB_DEVICES, sizeof maxsub, &maxsub, NULL));
    printf("~sub-devices: max %u\n", maxsub);
    if (cu < 2 || maxsub < 2) {
        printf("sub-devices: skipped\n");
        return;
    }
    cl_device_partition_property props[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
    cl_uint n = 0;
    cl_int e = clCreateSubDevices(t->device, props, 0, NULL, &n);
    printf("~sub-devices: %d count %u\n", e, n);
    if (e != CL_SUCCESS || n == 0) {
        printf("sub-devices: unsupported\n");
        return;
    }
    cl_device_id *subs = calloc(n, sizeof *subs);
    CHECK(clCreateSubDevices(t->device, props, n, subs, NULL));
    cl_device_id parent = NULL;
    cl_uint scu = 0;
    CHECK(clGetDeviceInfo(subs[0], CL_DEVICE_PARENT_DEVICE, sizeof parent, &parent, NULL));
    CHECK(clGetDeviceInfo(subs[0], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof scu, &scu, NULL));
    printf("sub-devices: parent same %d compute units %u distinct %d\n", parent == t->device, scu,
           n < 2 || subs[0] != subs[1]);
    cl_context sc = clCreateContext(NULL, 1, &subs[0], NULL, NULL, &e);
    CHECK_ERR(e, "context on a sub-device");
    cl_command_queue sq = clCreateCommandQueue(sc, subs[0], 0, &e);
    CHECK_ERR(e, "queue on a sub-device");
    env_t st = *t;
    st.ctx = sc;
    st.device = subs[0];
    st.q = sq;
    cl_program p = build(&st, "__kernel void k(__global int *a) { a[get_global_id(0)] = 7; }", NULL);
    cl_kernel k = kernel(p, "k");
    cl_mem b = buffer(&st, CL_MEM_READ_WRITE, 16, NULL);
    CHECK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t g = 4;
    CHECK(clEnqueueNDRangeKernel(sq, k, 1, NULL, &g, NULL, 0, NULL, NULL));
    int out[4];
    CHECK(clEnqueueReadBuffer(sq, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    printf("sub-device kernel: %d %d\n", out[0], out[3]);
    CHECK(clReleaseMemObject(b));
    CHECK(clReleaseKernel(k));
    CHECK(clReleaseProgram(p));
    CHECK(clReleaseCommandQueue(sq));
    CHECK(clReleaseContext(sc));
    for (cl_uint i = 0; i < n; i++) CHECK(clReleaseDevice(subs[i]));
    free(subs);
}

int main(void) {
    env_t t;
    env_init(&t, 0);
    device_info(&t);
    contexts(&t);
    queues(&t);
    root_device_refs(&t);
    sub_devices(&t);
    env_done(&t);
    printf("platform: done\n");
    return 0;
}
