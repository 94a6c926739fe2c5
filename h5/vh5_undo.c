// The undo-journal file driver: sec2's POSIX I/O, except that writes over bytes the file
// already held when it was last synced (below "base") are kept in memory until vh5u_sync.
// vh5u_sync then (1) writes the old contents of every range about to be overwritten to
// FILE.vh5fs-undo and fsyncs it and its directory, (2) applies the held writes and fsyncs
// the file, (3) removes the journal and fsyncs the directory. Writes at or beyond base
// (new chunks, new metadata blocks) go to the file at once: nothing that base covers points
// at them until the held writes land.
//
// So whenever the machine stops, the file on disk is either its state at the last sync plus
// unreferenced bytes past base, or a partly applied sync with a complete journal beside it;
// vh5u_recover puts such a file back to its state at the last sync (and a journal that is
// itself incomplete was never acted on, so it is simply removed).
//
// The driver writes no driver information into the superblock: the file stays an ordinary
// HDF5 file for every other program.
#include "vh5.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNDO_SUFFIX ".vh5fs-undo"
static const char undo_magic[8] = {'V', 'H', '5', 'U', 'N', 'D', 'O', '1'};

typedef struct {
	haddr_t addr;  // a write: where; a truncation: the new length
	size_t size;   // 0 for a truncation
	unsigned char *data;
} held_op;

typedef struct {
	H5FD_t pub;  // first: libhdf5 casts between the two
	int fd;      // get_handle returns &fd, as sec2 does (vh5_flush_sync finds the driver from it)
	char *path;
	dev_t dev;
	ino_t ino;
	haddr_t eoa, eof;
	haddr_t base;   // the file's size at the last sync: bytes below are the durable state
	haddr_t limit;  // writes below limit are held: base, or every write after a held truncation
	held_op *ops;
	size_t nops, capops;
} undo_file;

// undo_driver is the driver's libhdf5 identifier, registered on first use; like every libhdf5
// call, it is only touched under the HDF5 lock (h5/lock.go).
static hid_t undo_driver = -1;


static char *undo_path(const char *path) {
	size_t n = strlen(path);
	char *p = malloc(n + sizeof(UNDO_SUFFIX));
	if (p) {
		memcpy(p, path, n);
		memcpy(p + n, UNDO_SUFFIX, sizeof(UNDO_SUFFIX));
	}
	return p;
}

// fsync_dir makes a directory entry change durable.
static int fsync_dir(const char *path) {
	char *copy = strdup(path);
	if (!copy) return -1;
	int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
	free(copy);
	if (dfd < 0) return -1;
	int rc = fsync(dfd);
	close(dfd);
	return rc;
}

static int write_all(int fd, const void *buf, size_t n, off_t off) {
	const unsigned char *p = buf;
	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0) {
			if (errno == EINTR) continue;
			return -1;
		}
		p += w, n -= (size_t)w, off += w;
	}
	return 0;
}

// read_all reads n bytes at off; bytes past the end of the file read as zeros (as sec2).
static int read_all(int fd, void *buf, size_t n, off_t off) {
	unsigned char *p = buf;
	while (n > 0) {
		ssize_t r = pread(fd, p, n, off);
		if (r < 0) {
			if (errno == EINTR) continue;
			return -1;
		}
		if (r == 0) {
			memset(p, 0, n);
			return 0;
		}
		p += r, n -= (size_t)r, off += r;
	}
	return 0;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static int push_op(undo_file *f, haddr_t addr, size_t size, const void *data) {
	if (f->nops == f->capops) {
		size_t cap = f->capops ? 2 * f->capops : 16;
		held_op *ops = realloc(f->ops, cap * sizeof *ops);
		if (!ops) return -1;
		f->ops = ops, f->capops = cap;
	}
	held_op op = {addr, size, NULL};
	if (size) {
		if (!(op.data = malloc(size))) return -1;
		memcpy(op.data, data, size);
	}
	f->ops[f->nops++] = op;
	return 0;
}

static void drop_ops(undo_file *f) {
	for (size_t i = 0; i < f->nops; i++) free(f->ops[i].data);
	f->nops = 0;
}

typedef struct {
	haddr_t lo, hi;
} range;

static int cmp_range(const void *a, const void *b) {
	const range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

// write_journal records the current (durable) contents of every range below base that the
// held operations change, and the base size, in FILE.vh5fs-undo, durably.
static int write_journal(undo_file *f, const char *jpath) {
	range *rs = malloc((f->nops ? f->nops : 1) * sizeof *rs);
	if (!rs) return -1;
	size_t n = 0;
	for (size_t i = 0; i < f->nops; i++) {
		held_op *op = &f->ops[i];
		range r = op->size ? (range){op->addr, op->addr + op->size} : (range){op->addr, f->base};
		if (r.hi > f->base) r.hi = f->base;
		if (r.lo < r.hi) rs[n++] = r;
	}
	qsort(rs, n, sizeof *rs, cmp_range);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m > 0 && rs[i].lo <= rs[m - 1].hi) {
			if (rs[i].hi > rs[m - 1].hi) rs[m - 1].hi = rs[i].hi;
		} else {
			rs[m++] = rs[i];
		}
	}
	int jfd = open(jpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (jfd < 0) {
		free(rs);
		return -1;
	}
	int rc = -1;
	uint64_t h = 14695981039346656037ULL, hdr[2] = {f->base, m};
	off_t off = 0;
	unsigned char *buf = NULL;
	if (write_all(jfd, undo_magic, 8, off) < 0 || write_all(jfd, hdr, sizeof hdr, off + 8) < 0) goto done;
	h = fnv1a(fnv1a(h, undo_magic, 8), hdr, sizeof hdr);
	off += 8 + sizeof hdr;
	for (size_t i = 0; i < m; i++) {
		uint64_t rh[2] = {rs[i].lo, rs[i].hi - rs[i].lo};
		buf = realloc(buf, rh[1]);
		if (!buf || read_all(f->fd, buf, rh[1], (off_t)rs[i].lo) < 0) goto done;
		if (write_all(jfd, rh, sizeof rh, off) < 0 || write_all(jfd, buf, rh[1], off + sizeof rh) < 0) goto done;
		h = fnv1a(fnv1a(h, rh, sizeof rh), buf, rh[1]);
		off += sizeof rh + rh[1];
	}
	if (write_all(jfd, &h, sizeof h, off) < 0 || fsync(jfd) < 0) goto done;
	rc = fsync_dir(jpath);
done:
	free(buf);
	free(rs);
	close(jfd);
	return rc;
}

// sync makes everything written so far durable, through the journal (see the top).
static int undo_sync(undo_file *f) {
	if (f->nops == 0) {
		if (fsync(f->fd) < 0) return -1;
		struct stat st;
		if (fstat(f->fd, &st) == 0) f->base = f->limit = (haddr_t)st.st_size;
		return 0;
	}
	char *jpath = undo_path(f->path);
	if (!jpath) return -1;
	int rc = -1;
	if (write_journal(f, jpath) < 0) goto done;
	for (size_t i = 0; i < f->nops; i++) {
		held_op *op = &f->ops[i];
		if (op->size ? write_all(f->fd, op->data, op->size, (off_t)op->addr) < 0 : ftruncate(f->fd, (off_t)op->addr) < 0) goto done;
	}
	if (fsync(f->fd) < 0 || unlink(jpath) < 0 || fsync_dir(jpath) < 0) goto done;
	drop_ops(f);
	struct stat st;
	if (fstat(f->fd, &st) < 0) goto done;
	f->base = f->limit = (haddr_t)st.st_size;
	rc = 0;
done:
	free(jpath);
	return rc;
}

// The driver's callbacks.

static H5FD_t *undo_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr) {
	(void)fapl, (void)maxaddr;
	int o = O_CLOEXEC | ((flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY);
	if (flags & H5F_ACC_CREAT) o |= O_CREAT;
	if (flags & H5F_ACC_TRUNC) o |= O_TRUNC;
	if (flags & H5F_ACC_EXCL) o |= O_EXCL;
	int fd = open(name, o, 0666);
	if (fd < 0) return NULL;
	struct stat st;
	undo_file *f = calloc(1, sizeof *f);
	if (!f || fstat(fd, &st) < 0 || !(f->path = strdup(name))) {
		free(f);
		close(fd);
		return NULL;
	}
	f->fd = fd, f->dev = st.st_dev, f->ino = st.st_ino;
	f->eof = f->base = f->limit = (haddr_t)st.st_size;
	return &f->pub;
}

static herr_t undo_close(H5FD_t *file) {
	undo_file *f = (undo_file *)file;
	herr_t rc = undo_sync(f) < 0 ? -1 : 0;  // libhdf5's last writes (superblock, truncation)
	drop_ops(f);
	free(f->ops);
	close(f->fd);
	free(f->path);
	free(f);
	return rc;
}

static int undo_cmp(const H5FD_t *a, const H5FD_t *b) {
	const undo_file *x = (const undo_file *)a, *y = (const undo_file *)b;
	if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
	return 0;
}

static herr_t undo_query(const H5FD_t *f, unsigned long *flags) {
	(void)f;
	// No metadata accumulator: it keeps copies of metadata bytes it wrote and may write them
	// again later, over what vh5u_write changed meanwhile.
	*flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_DATA_SIEVE |
	         H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_POSIX_COMPAT_HANDLE | H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
	return 0;
}

static haddr_t undo_get_eoa(const H5FD_t *file, H5FD_mem_t type) {
	(void)type;
	return ((const undo_file *)file)->eoa;
}

static herr_t undo_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr) {
	(void)type;
	((undo_file *)file)->eoa = addr;
	return 0;
}

static haddr_t undo_get_eof(const H5FD_t *file, H5FD_mem_t type) {
	(void)type;
	return ((const undo_file *)file)->eof;
}

static herr_t undo_get_handle(H5FD_t *file, hid_t fapl, void **handle) {
	(void)fapl;
	*handle = &((undo_file *)file)->fd;
	return 0;
}

static herr_t undo_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf) {
	(void)type, (void)dxpl;
	undo_file *f = (undo_file *)file;
	if (read_all(f->fd, buf, size, (off_t)addr) < 0) return -1;
	haddr_t end = addr + size;
	for (size_t i = 0; i < f->nops; i++) {  // the held operations, in order, over the file's bytes
		held_op *op = &f->ops[i];
		if (op->size == 0) {  // a truncation: what lies past it reads as zeros
			if (op->addr < end) {
				haddr_t lo = op->addr > addr ? op->addr : addr;
				memset((unsigned char *)buf + (lo - addr), 0, end - lo);
			}
			continue;
		}
		haddr_t lo = op->addr > addr ? op->addr : addr, hi = op->addr + op->size < end ? op->addr + op->size : end;
		if (lo < hi) memcpy((unsigned char *)buf + (lo - addr), op->data + (lo - op->addr), hi - lo);
	}
	return 0;
}

static herr_t undo_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf) {
	(void)type, (void)dxpl;
	undo_file *f = (undo_file *)file;
	const unsigned char *p = buf;
	haddr_t end = addr + size;
	if (addr < f->limit) {  // over the durable state: held until the next sync
		size_t n = (size_t)((end < f->limit ? end : f->limit) - addr);
		if (push_op(f, addr, n, p) < 0) return -1;
		addr += n, p += n, size -= n;
	}
	if (size > 0 && write_all(f->fd, p, size, (off_t)addr) < 0) return -1;
	if (end > f->eof) f->eof = end;
	return 0;
}

static herr_t undo_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing) {
	(void)dxpl, (void)closing;
	undo_file *f = (undo_file *)file;
	if (f->eoa == f->eof) return 0;
	if (f->eoa < f->base || f->limit != f->base) {
		// It cuts into the durable state (or follows a truncation that did): held, and so is
		// every later write, which must land after it.
		if (push_op(f, f->eoa, 0, NULL) < 0) return -1;
		f->limit = HADDR_MAX;
	} else if (ftruncate(f->fd, (off_t)f->eoa) < 0) {
		return -1;
	}
	f->eof = f->eoa;
	return 0;
}

static herr_t undo_lock(H5FD_t *file, hbool_t rw) {
	if (flock(((undo_file *)file)->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0 && errno != ENOSYS) return -1;
	return 0;
}

static herr_t undo_unlock(H5FD_t *file) {
	if (flock(((undo_file *)file)->fd, LOCK_UN) < 0 && errno != ENOSYS) return -1;
	return 0;
}

static const H5FD_class_t undo_class = {
    .name = "vh5fs_undo",
    .maxaddr = (haddr_t)INT64_MAX,
    .fc_degree = H5F_CLOSE_WEAK,
    .open = undo_open,
    .close = undo_close,
    .cmp = undo_cmp,
    .query = undo_query,
    .get_eoa = undo_get_eoa,
    .set_eoa = undo_set_eoa,
    .get_eof = undo_get_eof,
    .get_handle = undo_get_handle,
    .read = undo_read,
    .write = undo_write,
    .truncate = undo_truncate,
    .lock = undo_lock,
    .unlock = undo_unlock,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

// vh5u_recover puts path back to its state at its last sync if FILE.vh5fs-undo says a sync
// was interrupted: 1 if it rolled back, 0 if there was nothing to do (an incomplete journal,
// never acted on, is removed), -1 on error (errno set).
int vh5u_recover(const char *path) {
	char *jpath = undo_path(path);
	if (!jpath) return -1;
	int rc = -1, fd = -1;
	unsigned char *j = NULL;
	int jfd = open(jpath, O_RDONLY | O_CLOEXEC);
	if (jfd < 0) {
		rc = errno == ENOENT ? 0 : -1;
		goto done;
	}
	struct stat st;
	if (fstat(jfd, &st) < 0 || !(j = malloc(st.st_size ? (size_t)st.st_size : 1)) || read_all(jfd, j, (size_t)st.st_size, 0) < 0) goto done;
	size_t n = (size_t)st.st_size, off = 8 + 16;
	int complete = n >= off + 8 && memcmp(j, undo_magic, 8) == 0;
	uint64_t hdr[2] = {0, 0};
	if (complete) {
		memcpy(hdr, j + 8, 16);
		for (uint64_t i = 0; i < hdr[1] && complete; i++) {
			uint64_t rh[2];
			if (n - 8 < off + 16) {
				complete = 0;
				break;
			}
			memcpy(rh, j + off, 16);
			complete = rh[1] <= n - 8 - off - 16;
			off += 16 + (complete ? rh[1] : 0);
		}
		uint64_t h;
		complete = complete && off + 8 == n && (memcpy(&h, j + off, 8), h == fnv1a(14695981039346656037ULL, j, off));
	}
	if (complete) {
		if ((fd = open(path, O_RDWR | O_CLOEXEC)) < 0) goto done;
		off = 8 + 16;
		for (uint64_t i = 0; i < hdr[1]; i++) {
			uint64_t rh[2];
			memcpy(rh, j + off, 16);
			if (write_all(fd, j + off + 16, rh[1], (off_t)rh[0]) < 0) goto done;
			off += 16 + rh[1];
		}
		if (ftruncate(fd, (off_t)hdr[0]) < 0 || fsync(fd) < 0) goto done;
	}
	if (unlink(jpath) < 0 || fsync_dir(jpath) < 0) goto done;
	rc = complete ? 1 : 0;
done:
	if (fd >= 0) close(fd);
	if (jfd >= 0) close(jfd);
	free(j);
	free(jpath);
	return rc;
}

// vh5u_pending reports whether path has an undo journal beside it (1), not (0), or -1.
int vh5u_pending(const char *path) {
	char *jpath = undo_path(path);
	if (!jpath) return -1;
	struct stat st;
	int rc = stat(jpath, &st) == 0 ? 1 : (errno == ENOENT ? 0 : -1);
	free(jpath);
	return rc;
}

// vh5u_open opens path read-write through the undo-journal driver (recover first).
hid_t vh5u_open(const char *path) {
	if (undo_driver < 0 || H5Iis_valid(undo_driver) <= 0) {
		undo_driver = H5FDregister(&undo_class);
		if (undo_driver < 0) return -1;
	}
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
	if (fapl < 0) return -1;
	hid_t id = -1;
	// Evict on close: libhdf5 otherwise keeps the object header of each virtual dataset a
	// commit creates in its metadata cache (with the mapping list decoded, about 6 KiB a
	// mapping its size accounting does not see) until the file is closed; and CreateVirtual
	// changes a new dataset's header in the file once libhdf5 has closed it (mappings.go).
	if (H5Pset_driver(fapl, undo_driver, NULL) >= 0 && H5Pset_evict_on_close(fapl, 1) >= 0)
		id = H5Fopen(path, H5F_ACC_RDWR, fapl);
	H5Pclose(fapl);
	return id;
}

// undo_of returns the driver's state for file, or NULL if file is not open through this
// driver; then *fd, if fd is not NULL, is the file's descriptor (NULL if unknown).
static undo_file *undo_of(hid_t file, int **fd) {
	int *h = NULL;
	if (H5Fget_vfd_handle(file, H5P_DEFAULT, (void **)&h) < 0) h = NULL;
	if (fd) *fd = h;
	if (h == NULL) return NULL;
	hid_t fapl = H5Fget_access_plist(file);
	hid_t drv = fapl >= 0 ? H5Pget_driver(fapl) : -1;
	if (fapl >= 0) H5Pclose(fapl);
	return undo_driver >= 0 && drv == undo_driver ? (undo_file *)((char *)h - offsetof(undo_file, fd)) : NULL;
}

// vh5u_sync makes what libhdf5 wrote to file durable; file must be flushed (H5Fflush)
// first. Files opened otherwise are fsynced. 0, or -1 with errno set.
int vh5u_sync(hid_t file) {
	int *fd;
	undo_file *f = undo_of(file, &fd);
	if (f) return undo_sync(f);
	if (fd == NULL) {
		errno = EBADF;
		return -1;
	}
	return fsync(*fd);
}

// vh5u_eoa is the end of the space allocated in file (libhdf5's EOA), or 0 if file is not
// open through this driver.
haddr_t vh5u_eoa(hid_t file) {
	undo_file *f = undo_of(file, NULL);
	return f ? f->eoa : 0;
}

// vh5u_read and vh5u_write read and write file's bytes as libhdf5 does through this
// driver (held writes included): 0, or -1 (errno set).
int vh5u_read(hid_t file, haddr_t addr, size_t n, void *buf) {
	undo_file *f = undo_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	return undo_read(&f->pub, H5FD_MEM_DEFAULT, H5P_DEFAULT, addr, n, buf) < 0 ? -1 : 0;
}

int vh5u_write(hid_t file, haddr_t addr, size_t n, const void *buf) {
	undo_file *f = undo_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	return undo_write(&f->pub, H5FD_MEM_DEFAULT, H5P_DEFAULT, addr, n, buf) < 0 ? -1 : 0;
}

// vh5u_reserve allocates n bytes at the end of file's allocated space, outside libhdf5's
// knowledge: libhdf5 asks the driver for the EOA whenever it extends the file, so it never
// allocates them again. The caller must make the superblock record the new EOA. 0 and
// *addr, or -1.
int vh5u_reserve(hid_t file, hsize_t n, haddr_t *addr) {
	undo_file *f = undo_of(file, NULL);
	if (!f || f->eoa + n < f->eoa || f->eoa + n > undo_class.maxaddr) {
		errno = f ? EFBIG : EBADF;
		return -1;
	}
	*addr = f->eoa;
	f->eoa += n;
	return 0;
}
