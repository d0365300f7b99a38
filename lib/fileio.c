/* fileio.c: read-all, maps, write-temp-fsync-rename, tails, and flock-based directory locks.
 * Plain POSIX calls with EINTR handled; none of these functions prints anything. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "xalloc.h"

char *file_read_all(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	struct strbuf sb;
	strbuf_init(&sb);
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
		strbuf_add(&sb, chunk, n);
	int failed = ferror(fp);
	int saved_errno = errno;
	fclose(fp);
	if (failed) {
		strbuf_release(&sb);
		errno = saved_errno ? saved_errno : EIO;
		return NULL;
	}
	*len = sb.len;
	return strbuf_detach(&sb);
}

static int write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Makes the rename itself durable: a rename is only on disk once its directory is. */
static int fsync_parent(const char *path)
{
	char *copy = xstrdup(path);
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	int saved_errno = errno;
	close(fd);
	errno = saved_errno;
	return rc;
}

int file_write_atomic(const char *path, const void *data, size_t len)
{
	char *tmp = xasprintf("%s.tmp.XXXXXX", path);
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		free(tmp);
		return -1;
	}
	mode_t mask = umask(0);
	umask(mask);
	int rc = -1;
	if (fchmod(fd, 0644 & ~mask) == 0 && write_all(fd, data, len) == 0 && fsync(fd) == 0) {
		rc = close(fd);
		fd = -1;
		if (rc == 0)
			rc = rename(tmp, path);
		if (rc == 0)
			rc = fsync_parent(path);
	}
	int saved_errno = errno;
	if (fd >= 0)
		close(fd);
	if (rc != 0)
		unlink(tmp);
	free(tmp);
	errno = saved_errno;
	return rc;
}

/* Opens path with flags, writes data and closes it; the first error's errno survives close. */
static int open_write_close(const char *path, int flags, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
	if (fd < 0)
		return -1;
	int rc = write_all(fd, data, len);
	int saved_errno = errno;
	if (close(fd) != 0 && rc == 0)
		return -1;
	errno = saved_errno;
	return rc;
}

int file_write(const char *path, const void *data, size_t len)
{
	return open_write_close(path, O_TRUNC, data, len);
}

int file_write_tail(const char *path, size_t offset, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | (offset ? 0 : O_CREAT) | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	int rc = -1;
	if (ftruncate(fd, (off_t)offset) == 0 && lseek(fd, (off_t)offset, SEEK_SET) == (off_t)offset &&
	    write_all(fd, data, len) == 0 && fdatasync(fd) == 0)
		rc = 0;
	int saved_errno = errno;
	if (close(fd) != 0 && rc == 0)
		return -1;
	errno = saved_errno;
	return rc;
}

int file_append(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	/* A file system without locks (ENOLCK) still gets the append: one host's are whole. */
	while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
		;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int saved_errno = errno;
		close(fd);
		errno = saved_errno;
		return -1;
	}
	int rc = write_all(fd, data, len);
	int saved_errno = errno;
	/* A full disk or a file size limit leaves part of a line: cut, it would glue the next
	 * line onto itself once space is back. */
	if (rc != 0 && ftruncate(fd, st.st_size) != 0)
		log_warn("cannot cut the partial line written to '%s':", path);
	if (close(fd) != 0 && rc == 0)
		return -1;
	errno = saved_errno;
	return rc;
}

static char *map_file(const char *path, size_t *len, int writable)
{
	static char empty[1];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *map = NULL;
	if (fstat(fd, &st) == 0) {
		*len = (size_t)st.st_size;
		if (*len == 0) {
			map = empty;
		} else {
			void *p = mmap(NULL, *len, PROT_READ | (writable ? PROT_WRITE : 0), MAP_PRIVATE, fd, 0);
			map = p == MAP_FAILED ? NULL : p;
		}
	}
	int saved_errno = errno;
	close(fd);
	errno = saved_errno;
	return map;
}

const char *file_map(const char *path, size_t *len)
{
	return map_file(path, len, 0);
}

char *file_map_copy(const char *path, size_t *len)
{
	return map_file(path, len, 1);
}

void file_unmap(const void *map, size_t len)
{
	if (map && len > 0)
		munmap((void *)map, len);
}

int file_copy(const char *src, const char *dst)
{
	size_t len;
	char *data = file_read_all(src, &len);
	if (!data)
		return -1;
	int rc = file_write(dst, data, len);
	int saved_errno = errno;
	free(data);
	errno = saved_errno;
	return rc;
}

int dir_create(const char *path)
{
	char *copy = xstrdup(path);
	for (char *p = copy + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(copy, 0755) != 0 && errno != EEXIST) {
			free(copy);
			return -1;
		}
		*p = '/';
	}
	free(copy);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		return -1;
	struct stat st;
	if (stat(path, &st) != 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (type == FTW_DP ? rmdir(path) : unlink(path)) != 0 && errno != ENOENT ? -1 : 0;
}

int dir_remove_tree(const char *path)
{
	return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char *kg_cache_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (xdg && xdg[0] == '/')
		return xasprintf("%s/kernelgraph", xdg);
	if (home && home[0])
		return xasprintf("%s/.cache/kernelgraph", home);
	return NULL;
}

int dirlock_acquire(struct dirlock *lock, const char *dir, int wait)
{
	char *path = xasprintf("%s/.lock", dir);
	int rc = filelock_acquire(lock, path, wait);
	free(path);
	return rc;
}

int filelock_acquire(struct dirlock *lock, const char *path, int wait)
{
	/* Read-only: flock needs no more, and so any user may lock a file another created. */
	lock->fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	if (lock->fd < 0)
		return -1;
	int rc;
	do
		rc = flock(lock->fd, LOCK_EX | (wait ? 0 : LOCK_NB));
	while (rc != 0 && errno == EINTR);
	if (rc != 0) {
		int saved_errno = errno;
		close(lock->fd);
		lock->fd = -1;
		errno = saved_errno;
		return -1;
	}
	return 0;
}

void dirlock_release(struct dirlock *lock)
{
	if (lock->fd >= 0) {
		close(lock->fd);
		lock->fd = -1;
	}
}
