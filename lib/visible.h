/* visible.h: which GPUs the CUDA driver is shown. cuInit readies every GPU a process is
 * shown, so a process that needs one GPU shows the driver that one alone. */
#ifndef KG_VISIBLE_H
#define KG_VISIBLE_H

#include "common.h"

#include <stddef.h>

/* Before cuInit: sets CUDA_VISIBLE_DEVICES to GPU number device alone, the device-th entry
 * of CUDA_VISIBLE_DEVICES when that is set (as the driver numbers the GPUs), and writes
 * what it set into shown (size bytes). cuInit then costs 0.33 s on a host of four H200s,
 * against 1.16 s with all four shown (BENCHMARKS.md, issue 37). Returns the ordinal to open
 * the GPU by: 0, or device itself, the variable left as it was, when the list has no such
 * entry (or device is negative), so that the driver's count says what is wrong. */
int visible_only(int device, char *shown, size_t size);

#endif
