/* process.h: child processes that report back through a pipe, for work that must not take
 * the caller down with it (a compiler that crashes or hangs) or that runs another program. */
#ifndef KG_PROCESS_H
#define KG_PROCESS_H

#include "common.h"

#include <sys/types.h>

#include "xalloc.h"

/* Forks with a pipe from the child to the parent, after flushing stdio so that no buffered
 * output is written twice. Returns the child's pid in the parent, with *fd the pipe's read
 * end; 0 in the child, with *fd its write end; or -1 with errno set. Both ends are
 * close-on-exec. A child that does not exec must leave with _exit. */
pid_t process_fork_piped(int *fd);

/* Waits for pid to end and returns its status as waitpid gives it; -1 with errno set on
 * error. */
int process_wait(pid_t pid);

/* Appends everything readable from fd until end of file; returns 0, or -1 with errno set. */
int process_read_all(int fd, struct strbuf *out);

#endif
