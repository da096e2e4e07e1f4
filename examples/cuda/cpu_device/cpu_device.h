/* What every part of the CPU stand-in device includes (see cudart.c for
 * what the stand-in is and how it is built). */
#ifndef CPU_DEVICE_H
#define CPU_DEVICE_H
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* Shared between this library's files, never exported under NVIDIA's names. */
#define CPU_DEVICE_INTERNAL __attribute__((visibility("hidden")))

/* How many devices the stand-in has (CPU_DEVICE_COUNT, 1 to 8). */
CPU_DEVICE_INTERNAL int device_count(void);
#endif
