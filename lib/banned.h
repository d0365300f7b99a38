/* banned.h: poisons C library functions that have no bounds or no error reporting,
 * so that a call to one fails the build (after git's banned.h). */
#ifndef KG_BANNED_H
#define KG_BANNED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC poison strcpy strcat sprintf vsprintf strtok gets atoi atol atoll atof

#endif
