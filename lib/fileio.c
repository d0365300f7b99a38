/* fileio.c: read-all, maps, write-temp-fsync-rename, tails, flock-based locks and the GPU locks' folder.
 * Plain POSIX calls with EINTR handled; none of these functions prints anything. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"
#include "log.h"
#include "xalloc.h"

/* Refuses what fd opened unless it is a regular file: a FIFO, a device or a directory planted
 * where a run file should be. Closes fd and sets EINVAL when refused. */
static int keep_regular(int fd)
{
	struct stat st;
	int rc = fstat(fd, &st);
	if (rc == 0 && S_ISREG(st.st_mode))
		return fd;
	int saved_errno = rc == 0 ? EINVAL : errno;
	close(fd);
	errno = saved_errno;
	return -1;
}

int file_open_nofollow(const char *path, int flags, mode_t mode)
{
	/* O_NONBLOCK: opening a planted FIFO must not wait for a reader; it is refused below. */
	int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
	if (fd < 0)
		return -1;
	if (keep_regular(fd) < 0)
		return -1;
	int fl = fcntl(fd, F_GETFL);
	if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1) {
		int saved_errno = errno;
		close(fd);
		errno = saved_errno;
		return -1;
	}
	return fd;
}

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
	struct stat st;
	/* A rename would replace a link, never write through it; it is still refused, as every
	 * other writer refuses one, so a planted link is reported rather than quietly removed. */
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
		errno = ELOOP;
	else if (fchmod(fd, 0644 & ~mask) == 0 && write_all(fd, data, len) == 0 && fsync(fd) == 0) {
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
	int fd = file_open_nofollow(path, O_WRONLY | O_CREAT | flags, 0644);
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
	int fd = file_open_nofollow(path, O_WRONLY | (offset ? 0 : O_CREAT), 0644);
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
	int fd = file_open_nofollow(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
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

int dir_create_nofollow(const char *path, int levels)
{
	char *copy = xstrdup(path);
	size_t len = strlen(copy);
	for (int k = 0; k < levels && len > 0; k++) {
		while (len > 1 && copy[len - 1] == '/')
			copy[--len] = '\0';
		struct stat st;
		if (lstat(copy, &st) == 0 && S_ISLNK(st.st_mode)) {
			free(copy);
			errno = ELOOP;
			return -1;
		}
		char *slash = strrchr(copy, '/');
		if (!slash)
			break;
		len = (size_t)(slash - copy);
		copy[len] = '\0';
	}
	free(copy);
	return dir_create(path);
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

const char *file_confined(const char *dir, const char *path, int must_exist)
{
	if (!*path)
		return "an empty file name";
	if (path[0] == '/')
		return "an absolute path";
	for (const char *p = path; *p;) {
		size_t len = strcspn(p, "/");
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return "a path through \"..\"";
		p += len + (p[len] == '/');
	}
	if (!must_exist)
		return NULL;
	/* Links are resolved: one inside the folder that leads out of it is outside. */
	char *full = xasprintf("%s/%s", dir, path);
	char *real = realpath(full, NULL), *real_dir = realpath(dir, NULL);
	size_t n = real_dir ? strlen(real_dir) : 0;
	struct stat st;
	const char *refused = NULL;
	if (!real || !real_dir || strncmp(real, real_dir, n) != 0 || real[n] != '/' || stat(real, &st) != 0 ||
	    !S_ISREG(st.st_mode))
		refused = FILE_NOT_INSIDE;
	free(full);
	free(real);
	free(real_dir);
	return refused;
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

/* Opens the lock file at path read-only (flock needs no more, and so any user may lock a
 * file another created), creating it when missing. An existing file is opened without
 * O_CREAT: where fs.protected_regular is on, O_CREAT on another user's file in a sticky
 * folder is refused even when it exists. Never follows a link; only a regular file will do. */
static int lock_open(const char *path)
{
	for (;;) {
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0)
			return keep_regular(fd);
		if (errno != ENOENT)
			return -1;
		/* O_EXCL: a link planted meanwhile is EEXIST, then ELOOP above, never followed. */
		fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0) {
			/* Readable by every user of the folder whatever the umask, or theirs fails. */
			if (fchmod(fd, 0644) != 0)
				log_debug("cannot make '%s' readable by all: %s", path, strerror(errno));
			return fd;
		}
		if (errno != EEXIST)
			return -1;
	}
}

int filelock_acquire(struct dirlock *lock, const char *path, int wait)
{
	lock->fd = lock_open(path);
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

int filelock_acquire_timed(struct dirlock *lock, const char *path, double wait_ms, void (*tick)(void))
{
	lock->fd = lock_open(path);
	if (lock->fd < 0)
		return -1;
	double t0 = monotonic_ms();
	useconds_t pause = 200;
	for (;;) {
		if (flock(lock->fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			break;
		if (errno == EWOULDBLOCK && monotonic_ms() - t0 >= wait_ms) {
			errno = ETIMEDOUT;
			break;
		}
		if (tick)
			tick();
		usleep(pause);
		/* Polled, not blocked in flock, so the caller can tick; quickly at first, since
		 * the lock usually changes hands between two records. */
		if (pause < 20000)
			pause *= 2;
	}
	int saved_errno = errno;
	close(lock->fd);
	lock->fd = -1;
	errno = saved_errno;
	return -1;
}

char *filelock_holder(const char *path)
{
	struct stat st;
	FILE *fp = stat(path, &st) == 0 ? fopen("/proc/locks", "r") : NULL;
	if (!fp)
		return NULL;
	/* "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"; a waiter's line has "->" after the
	 * number. The pid is the one that took the lock, as the kernel knows it. */
	char line[256], *who = NULL;
	while (!who && fgets(line, sizeof(line), fp)) {
		char kind[16], mode[16], access[16];
		int pid;
		unsigned maj, min;
		unsigned long ino;
		if (strstr(line, "->") ||
		    sscanf(line, "%*d: %15s %15s %15s %d %x:%x:%lu", kind, mode, access, &pid, &maj, &min, &ino) != 7 ||
		    strcmp(kind, "FLOCK") != 0 || ino != (unsigned long)st.st_ino || maj != major(st.st_dev) ||
		    min != minor(st.st_dev) || pid <= 0)
			continue;
		char *proc = xasprintf("/proc/%d", pid), *comm_path = xasprintf("/proc/%d/comm", pid);
		struct stat ps;
		const struct passwd *pw = stat(proc, &ps) == 0 ? getpwuid(ps.st_uid) : NULL;
		size_t n;
		char *comm = file_read_all(comm_path, &n);
		if (comm)
			comm[strcspn(comm, "\n")] = '\0';
		if (pw)
			who = xasprintf("pid %d (%s, user %s)", pid, comm ? comm : "?", pw->pw_name);
		else
			who = xasprintf("pid %d", pid);
		free(comm);
		free(proc);
		free(comm_path);
	}
	fclose(fp);
	return who;
}

/* The folder is safe to make lock files in when no other user can swap them: a folder (not
 * a link to one) of root's or this user's, writable by others only with the sticky bit. */
static int lock_dir_safe(const char *dir, struct strbuf *why)
{
	struct stat st;
	if (lstat(dir, &st) != 0) {
		strbuf_addf(why, "cannot use '%s' for the GPU locks: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
		strbuf_addf(why, "'%s' is not a safe folder for the GPU locks (it must be a folder of root's or "
			    "yours, writable by others only with the sticky bit: mode %04o, owner %ld)",
			    dir, (unsigned)(st.st_mode & 07777), (long)st.st_uid);
		return -1;
	}
	return 0;
}

char *gpu_lock_dir(const char *system_dir, struct strbuf *why)
{
	struct stat st;
	if (system_dir && lstat(system_dir, &st) == 0)
		return lock_dir_safe(system_dir, why) == 0 ? xstrdup(system_dir) : NULL;
	const char *runtime = getenv("XDG_RUNTIME_DIR");
	char *dir = NULL;
	if (runtime && runtime[0] == '/') {
		dir = xasprintf("%s/kernelgraph", runtime);
	} else {
		char *cache = kg_cache_dir();
		if (cache)
			dir = xasprintf("%s/locks", cache);
		free(cache);
	}
	if (!dir) {
		strbuf_addf(why, "no folder for the GPU locks: '%s' is missing and neither XDG_RUNTIME_DIR, "
			    "XDG_CACHE_HOME nor HOME is set", system_dir ? system_dir : "");
		return NULL;
	}
	if (dir_create(dir) != 0) {
		strbuf_addf(why, "cannot create '%s' for the GPU locks: %s", dir, strerror(errno));
		free(dir);
		return NULL;
	}
	if (lock_dir_safe(dir, why) != 0) {
		free(dir);
		return NULL;
	}
	return dir;
}

char *gpu_lock_path(const char *system_dir, const char *pci_bus_id, struct strbuf *why)
{
	char *dir = gpu_lock_dir(system_dir, why);
	if (!dir)
		return NULL;
	char *path = xasprintf("%s/gpu-%s.lock", dir, pci_bus_id);
	free(dir);
	return path;
}

void dirlock_release(struct dirlock *lock)
{
	if (lock->fd >= 0) {
		close(lock->fd);
		lock->fd = -1;
	}
}
