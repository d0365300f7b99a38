/* process.c: fork with a pipe, waitpid and read loops with EINTR handled in one place. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process.h"
#include "xalloc.h"

pid_t process_fork_piped(int *fd)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		int saved_errno = errno;
		close(fds[0]);
		close(fds[1]);
		errno = saved_errno;
		return -1;
	}
	close(pid == 0 ? fds[0] : fds[1]);
	*fd = pid == 0 ? fds[1] : fds[0];
	return pid;
}

int process_wait(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}

int process_read_all(int fd, struct strbuf *out)
{
	char chunk[4096];
	for (;;) {
		ssize_t got = read(fd, chunk, sizeof(chunk));
		if (got == 0)
			return 0;
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		strbuf_add(out, chunk, (size_t)got);
	}
}
