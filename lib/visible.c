/* visible.c: a process that needs one GPU shows the CUDA driver that one alone
 * (visible.h). */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "visible.h"

int visible_only(int device, char *shown, size_t size)
{
	const char *p = getenv("CUDA_VISIBLE_DEVICES");
	if (device < 0)
		return device;
	if (!p) {
		snprintf(shown, size, "%d", device);
	} else {
		for (int k = 0; k < device && p; k++)
			if ((p = strchr(p, ',')))
				p++;
		size_t len = p ? strcspn(p, ",") : 0;
		if (len == 0 || len >= size)
			return device;
		memcpy(shown, p, len);
		shown[len] = '\0';
	}
	return setenv("CUDA_VISIBLE_DEVICES", shown, 1) == 0 ? 0 : device;
}
