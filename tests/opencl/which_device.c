/* Which device a server offers, and that it computes: prints the device's
 * name, then runs a small kernel on it and prints the result. Used to show
 * that servers side by side each serve their own driver configuration. */
#include "common.h"

int main(void) {
    env_t t;
    env_init(&t, 0);
    char name[256] = "";
    CHECK(clGetDeviceInfo(t.device, CL_DEVICE_NAME, sizeof name, name, NULL));
    printf("device: %s\n", name);
    printf("sum of squares: %ld\n", sum_of_squares(&t));
    env_done(&t);
    return 0;
}
