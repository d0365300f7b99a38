/* fileio.h: whole-file reads, atomic file writes, the run-directory lock and the GPU locks.
 * A reader of a file written by file_write_atomic sees the old or the new contents, never a mix;
 * no writer here follows a symbolic link at the file's own name. */
#ifndef KG_FILEIO_H
#define KG_FILEIO_H

#include "common.h"

#include <stddef.h>
#include <sys/types.h>

struct strbuf;

/* The one way kernelgraph opens a file it writes: open(2) with flags and mode, never
 * following a symbolic link at path's last component (ELOOP) and refusing what is not a
 * regular file (EINVAL: a FIFO, a device), so that whoever can write into a shared run folder
 * cannot turn a writer onto another file. Returns the descriptor (close-on-exec, blocking), or
 * -1 with errno set. */
int file_open_nofollow(const char *path, int flags, mode_t mode);

/* Reads all of path into a NUL-terminated buffer the caller frees; *len gets its size
 * (without the NUL). Returns NULL with errno set on error; reports nothing. */
char *file_read_all(const char *path, size_t *len);

/* Replaces path with data: writes a temporary file in the same directory, fsyncs it,
 * renames it over path and fsyncs the directory, so a crash leaves the old file or the
 * new one. The file gets mode 0644 (less the umask). A symbolic link at path is refused
 * (ELOOP), as file_open_nofollow refuses one. Returns 0, or -1 with errno set (the temporary
 * file is removed); reports nothing. */
int file_write_atomic(const char *path, const void *data, size_t len);

/* Creates or truncates path and writes data, without fsync: for files inside a directory
 * that is itself published by an atomic rename. Returns 0, or -1 with errno set. */
int file_write(const char *path, const void *data, size_t len);

/* Replaces what path holds from offset on with data (creating path when offset is 0), then
 * fdatasyncs it: for files that only grow and whose readers know where the valid part ends,
 * so a tail a killed writer left is cut off. Returns 0, or -1 with errno set. */
int file_write_tail(const char *path, size_t offset, const void *data, size_t len);

/* Appends data to path (created when missing) in one write(2) on an O_APPEND descriptor, so
 * that lines from processes appending at once never interleave, under an flock of the file:
 * on NFS, where O_APPEND is not atomic between hosts (the Slurm tasks of one night append to
 * OUTDIR's regraph_dataset.jsonl from several nodes), the lock makes the client learn the
 * file's size first and keeps the other hosts' appends out. When the write fails (a full
 * disk), the file is cut back to its size before, so no partial line stays. Returns 0, or -1
 * with errno. */
int file_append(const char *path, const void *data, size_t len);
/* Maps all of path read-only, each page as it is first read; *len gets its size. An empty
 * file gives a valid pointer to nothing. Returns NULL with errno set on error. Release with
 * file_unmap. */
const char *file_map(const char *path, size_t *len);
/* The same, writable: a private copy made page by page as pages are written (the file never
 * changes), so a process can use a file's arrays in place and pay only for what it changes. */
char *file_map_copy(const char *path, size_t *len);
void file_unmap(const void *map, size_t len);

/* Copies the regular file src to dst (created or truncated) with file_write's guarantees.
 * Returns 0, or -1 with errno set. */
int file_copy(const char *src, const char *dst);

/* mkdir -p: creates path and any missing parents (mode 0755 less the umask). Returns 0 when
 * the directory exists afterwards, or -1 with errno set. */
int dir_create(const char *path);

/* dir_create for a folder of a run (variants/, reference/, llm/, llm/cache/): a symbolic link
 * at path or at the levels - 1 folders above it (those inside the run) is refused (ELOOP), as
 * file_open_nofollow refuses one at a file, since the files written into a linked folder
 * would land wherever another user pointed it. */
int dir_create_nofollow(const char *path, int levels);

/* rm -rf: removes path and everything below it, never following symbolic links. Returns
 * 0, or -1 with errno set after removing what it could. */
int dir_remove_tree(const char *path);

/* Why path may not name a file of the folder dir, or NULL when it may: the one rule for the
 * files a spec names (KernelFile, a BinaryRaw DataSource, a PatchFile) and for a kernel's
 * #include "...", so that a spec or a kernel cannot reach a host file (/etc/passwd,
 * /proc/self/environ) and have it copied into a run, compiled, logged or sent to a model.
 * path must be relative, without a ".." component; with must_exist, also a regular file whose
 * real path (links resolved) is inside dir's: else FILE_NOT_INSIDE. The reason is static. */
#define FILE_NOT_INSIDE "no such file in the folder"
const char *file_confined(const char *dir, const char *path, int must_exist);

/* The root of kernelgraph's caches shared by all runs: $XDG_CACHE_HOME/kernelgraph, else
 * ~/.cache/kernelgraph; NULL when neither variable is set. The caller frees it. */
char *kg_cache_dir(void);

/* An exclusive lock on a directory, held through flock(2) on "<dir>/.lock". Other
 * processes that ask for it wait (or fail at once with wait = 0); the kernel drops it
 * when the holder exits, so a crashed holder never leaves the directory locked. */
struct dirlock {
	int fd; /* the open lock file, or -1 when not held */
};

/* Returns 0 once the lock is held; -1 with errno set otherwise (EWOULDBLOCK: held by
 * another process and wait was 0). Reports nothing. */
int dirlock_acquire(struct dirlock *lock, const char *dir, int wait);
/* The same lock held on the file at path (created when missing, mode 0644), for a lock of its
 * own beside a shared file; released with dirlock_release. A link or anything but a regular
 * file at path is refused (ELOOP, EINVAL), never followed or created through. */
int filelock_acquire(struct dirlock *lock, const char *path, int wait);
/* The same, waiting at most wait_ms and calling tick (when not NULL) between tries, so that a
 * waiter can say it is alive without the wait going unbounded: -1 with ETIMEDOUT then. */
int filelock_acquire_timed(struct dirlock *lock, const char *path, double wait_ms, void (*tick)(void));
/* Who holds the flock on the file at path, as /proc/locks tells it: "pid 4242 (kg-bench, user
 * ana)", or "pid 4242" where the process cannot be read; NULL when nobody (or unknown). The
 * caller frees it. */
char *filelock_holder(const char *path);

/* The folder for the per-GPU locks, which every kg-bench that shares a GPU must see:
 * system_dir (KG_LOCK_DIR, "/run/kernelgraph": made by make install, root's, group
 * kernelgraph, mode 3770) when it exists, so that all users of the machine share it; else
 * $XDG_RUNTIME_DIR/kernelgraph, else the cache folder's locks/ (created, one user's searches
 * only). The folder must be root's or this user's and writable by others only with the sticky
 * bit, so nobody else can plant a link or a file there. Returns it (the caller frees it), or
 * NULL with the reason added to why. */
char *gpu_lock_dir(const char *system_dir, struct strbuf *why);
/* The lock file of the GPU with that PCI bus id in the folder gpu_lock_dir picks: what
 * kg-bench locks before it measures, and what a test must lock to stand in its way. Returns
 * it (the caller frees it), or NULL with the reason added to why. */
char *gpu_lock_path(const char *system_dir, const char *pci_bus_id, struct strbuf *why);
void dirlock_release(struct dirlock *lock);

#endif
