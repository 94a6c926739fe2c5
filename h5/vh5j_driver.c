// The journal driver, part 1 of 3: libhdf5's side of it. The file driver's callbacks and
// registration, the held operations that overlay the file for libhdf5 (in memory, or
// spilled to the spill file beyond the budget), and the driver's small accessors. The
// sync, which makes held writes durable, is vh5j_sync.c (its top comment is the driver's
// crash contract); recovery is vh5j_recover.c. What the parts share (system calls, held
// operations' bytes, the open files) is vh5j_util.c, so that the sync, which the driver's
// close calls, never calls back into the driver.
#include "vh5j_private.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

// journal_driver is the driver's libhdf5 identifier, registered on first use; like every libhdf5
// call, it is only touched under the HDF5 lock (h5/lock.go).
static hid_t journal_driver = -1;

// open_spill creates f's spill file: an unlinked file in the file's directory (on its file
// system, not in memory as /tmp may be), by O_TMPFILE where the file system has it.
static int open_spill(jfile *f) {
	char *copy = strdup(f->path);
	if (!copy) return -1;
	const char *dir = dirname(copy);
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		static const char name[] = "/.vh5fs-spill-XXXXXX";
		size_t n = strlen(dir);
		char *tmpl = malloc(n + sizeof name);
		if (tmpl) {
			memcpy(tmpl, dir, n);
			memcpy(tmpl + n, name, sizeof name);
			fd = mkostemp(tmpl, O_CLOEXEC);
			if (fd >= 0 && unlink(tmpl) < 0) {
				int e = errno;
				close(fd);
				errno = e;
				fd = -1;
			}
			free(tmpl);
		}
	}
	int e = errno;
	free(copy);
	errno = e;
	if (fd >= 0) f->spill = fd;
	return fd;
}

// push_op holds a write (size bytes of data at addr) or a truncation (size 0, to addr): its
// bytes in memory while the held bytes there stay within the budget, else in the spill file.
static int push_op(jfile *f, haddr_t addr, size_t size, const void *data) {
	if (f->nops == f->capops) {
		size_t cap = f->capops ? 2 * f->capops : 16;
		held_op *ops = realloc(f->ops, cap * sizeof *ops);
		if (!ops) return -1;
		f->ops = ops, f->capops = cap;
	}
	held_op op = {addr, size, NULL, 0};
	if (size && f->held_mem + size <= f->budget) {
		if (!(op.data = malloc(size))) return -1;
		memcpy(op.data, data, size);
		f->held_mem += size;
	} else if (size) {
		if (f->spill < 0 && open_spill(f) < 0) return -1;
		if (vh5j__write_all(f->spill, data, size, f->spill_end) < 0) return -1;
		op.off = f->spill_end;
		f->spill_end += (off_t)size, f->spilled += size;
	}
	f->ops[f->nops++] = op;
	return 0;
}

// view reads what the file holds as libhdf5 sees it: its bytes with the first nops held
// operations applied in order.
static int view(const jfile *f, size_t nops, haddr_t addr, size_t size, unsigned char *buf) {
	if (vh5j__read_all(f->fd, buf, size, (off_t)addr) < 0) return -1;
	source src = {f->fd, f->ops, f->spill};
	haddr_t end = addr + size;
	for (size_t i = 0; i < nops; i++) {
		const held_op *op = &f->ops[i];
		if (op->size == 0) {  // a truncation: what lies past it reads as zeros
			if (op->addr < end) {
				haddr_t lo = op->addr > addr ? op->addr : addr;
				memset(buf + (lo - addr), 0, end - lo);
			}
			continue;
		}
		haddr_t lo = op->addr > addr ? op->addr : addr, hi = op->addr + op->size < end ? op->addr + op->size : end;
		if (lo < hi && vh5j__op_bytes(&src, op, lo - op->addr, hi - lo, buf + (lo - addr)) < 0) return -1;
	}
	if (f->guarding) vh5j__overlay(buf, addr, size, f->guarding - 1, vh5j__hdf5_signature);
	return 0;
}

// The driver's callbacks.

static H5FD_t *j_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr) {
	(void)fapl, (void)maxaddr;
	int o = O_CLOEXEC | ((flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY);
	if (flags & H5F_ACC_CREAT) o |= O_CREAT;
	if (flags & H5F_ACC_TRUNC) o |= O_TRUNC;
	if (flags & H5F_ACC_EXCL) o |= O_EXCL;
	int fd = open(name, o, 0666);
	if (fd < 0) return NULL;
	struct stat st;
	jfile *f = calloc(1, sizeof *f);
	if (!f || fstat(fd, &st) < 0 || !(f->path = strdup(name))) {
		free(f);
		close(fd);
		return NULL;
	}
	f->fd = fd, f->dev = st.st_dev, f->ino = st.st_ino;
	f->eof = f->base = f->limit = (haddr_t)st.st_size;
	f->budget = HOLD_BUDGET, f->piece = PIECE < PIECE_MIN ? PIECE_MIN : PIECE, f->spill = -1;
	vh5j__opened(f);
	return &f->pub;
}

static herr_t j_close(H5FD_t *file) {
	jfile *f = (jfile *)file;
	vh5j__closed(f);
	herr_t rc = 0;
	if (!f->failed && (f->nops > 0 || f->eof != f->base)) rc = vh5j__sync_now(f) < 0 ? -1 : 0;  // libhdf5's last writes
	vh5j__drop_ops(f, f->nops);
	free(f->ops);
	if (f->spill >= 0) close(f->spill);
	close(f->fd);
	free(f->path);
	free(f);
	return rc;
}

static int j_cmp(const H5FD_t *a, const H5FD_t *b) {
	const jfile *x = (const jfile *)a, *y = (const jfile *)b;
	if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
	return 0;
}

static herr_t j_query(const H5FD_t *f, unsigned long *flags) {
	(void)f;
	// No metadata accumulator: it keeps copies of metadata bytes it wrote and may write them
	// again later, over what vh5j_write changed meanwhile.
	*flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_DATA_SIEVE |
	         H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_POSIX_COMPAT_HANDLE | H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
	return 0;
}

static haddr_t j_get_eoa(const H5FD_t *file, H5FD_mem_t type) {
	(void)type;
	return ((const jfile *)file)->eoa;
}

static herr_t j_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr) {
	(void)type;
	((jfile *)file)->eoa = addr;
	return 0;
}

static haddr_t j_get_eof(const H5FD_t *file, H5FD_mem_t type) {
	(void)type;
	return ((const jfile *)file)->eof;
}

static herr_t j_get_handle(H5FD_t *file, hid_t fapl, void **handle) {
	(void)fapl;
	*handle = &((jfile *)file)->fd;
	return 0;
}

static herr_t j_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf) {
	(void)type, (void)dxpl;
	jfile *f = (jfile *)file;
	return view(f, f->nops, addr, size, buf) < 0 ? -1 : 0;
}

static herr_t j_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf) {
	(void)type, (void)dxpl;
	jfile *f = (jfile *)file;
	if (f->failed) {
		if (f->closing) return 0;
		errno = f->failed;
		return -1;
	}
	const unsigned char *p = buf;
	haddr_t end = addr + size;
	if (addr < f->limit) {  // over the durable state: held until the next sync
		size_t n = (size_t)((end < f->limit ? end : f->limit) - addr);
		if (push_op(f, addr, n, p) < 0) return vh5j__stop(f);
		addr += n, p += n, size -= n;
	}
	if (size > 0 && vh5j__write_all(f->fd, p, size, (off_t)addr) < 0) return vh5j__stop(f);
	if (end > f->eof) f->eof = end;
	return 0;
}

static herr_t j_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing) {
	(void)dxpl, (void)closing;
	jfile *f = (jfile *)file;
	if (f->failed) {
		if (f->closing) return 0;
		errno = f->failed;
		return -1;
	}
	if (f->eoa == f->eof) return 0;
	if (f->eoa < f->base || f->limit != f->base) {
		// It cuts into the durable state (or follows a truncation that did): held, and so is
		// every later write, which must land after it.
		if (push_op(f, f->eoa, 0, NULL) < 0) return vh5j__stop(f);
		f->limit = HADDR_MAX;
	} else if (ftruncate(f->fd, (off_t)f->eoa) < 0) {
		return vh5j__stop(f);
	}
	f->eof = f->eoa;
	return 0;
}

static herr_t j_lock(H5FD_t *file, hbool_t rw) {
	if (flock(((jfile *)file)->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0 && errno != ENOSYS) return -1;
	return 0;
}

static herr_t j_unlock(H5FD_t *file) {
	if (flock(((jfile *)file)->fd, LOCK_UN) < 0 && errno != ENOSYS) return -1;
	return 0;
}

// VH5J_DRIVER_VALUE identifies the driver to libhdf5 from 1.14 on, which refuses a class
// without a version and value. 256-511 are the values HDF5 leaves to unregistered drivers.
#define VH5J_DRIVER_VALUE 0x1f6

static const H5FD_class_t journal_class = {
#ifdef H5FD_CLASS_VERSION
    .version = H5FD_CLASS_VERSION,
    .value = (H5FD_class_value_t)VH5J_DRIVER_VALUE,
#endif
    .name = "vh5fs_journal",
    .maxaddr = (haddr_t)INT64_MAX,
    .fc_degree = H5F_CLOSE_WEAK,
    .open = j_open,
    .close = j_close,
    .cmp = j_cmp,
    .query = j_query,
    .get_eoa = j_get_eoa,
    .set_eoa = j_set_eoa,
    .get_eof = j_get_eof,
    .get_handle = j_get_handle,
    .read = j_read,
    .write = j_write,
    .truncate = j_truncate,
    .lock = j_lock,
    .unlock = j_unlock,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

// vh5j_dup_fd is a duplicate of file's descriptor (close it), or -1 with errno set: for a
// call that must not hold the HDF5 lock while it runs.
int vh5j_dup_fd(hid_t file) {
	int *fd;
	(void)vh5j__jfile_of(file, &fd);
	if (fd == NULL) {
		errno = EBADF;
		return -1;
	}
	return fcntl(*fd, F_DUPFD_CLOEXEC, 0);
}

// vh5j_fd is file's descriptor itself (not a duplicate: the caller must neither close
// it nor keep it past the HDF5 lock), or -1 with errno EBADF.
int vh5j_fd(hid_t file) {
	int *fd;
	(void)vh5j__jfile_of(file, &fd);
	if (fd == NULL) {
		errno = EBADF;
		return -1;
	}
	return *fd;
}

// vh5j_failed is the errno that stopped file's driver, 0 if it works or the file is not
// open through it.
int vh5j_failed(hid_t file) {
	jfile *f = vh5j__jfile_of(file, NULL);
	return f ? f->failed : 0;
}

// vh5j_set_hold_budget makes file's driver keep at most budget bytes of held writes in
// memory (the rest go to its spill file) and, with piece > 0, its syncs compose, read and
// write piece bytes at a time (at least PIECE_MIN): for tests. 0, or -1 (EBADF).
int vh5j_set_hold_budget(hid_t file, size_t budget, size_t piece) {
	jfile *f = vh5j__jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	f->budget = budget;
	if (piece) f->piece = piece < PIECE_MIN ? PIECE_MIN : piece;
	return 0;
}

// vh5j_spilled is how many bytes of held writes file's driver has written to its spill
// file since it opened the file, and in *held how many it holds in memory now (tests).
uint64_t vh5j_spilled(hid_t file, size_t *held) {
	jfile *f = vh5j__jfile_of(file, NULL);
	*held = f ? f->held_mem : 0;
	return f ? f->spilled : 0;
}

// vh5j_set_fapl makes fapl open files through the journal driver, with evict on close:
// libhdf5 otherwise keeps the object header of each virtual dataset a commit creates in its
// metadata cache (with the mapping list decoded, about 6 KiB a mapping its size accounting
// does not see) until the file is closed; and CreateVirtual changes a new dataset's header
// in the file once libhdf5 has closed it (mappings.go). 0 or -1.
int vh5j_set_fapl(hid_t fapl) {
	if (journal_driver < 0 || H5Iis_valid(journal_driver) <= 0) {
		journal_driver = H5FDregister(&journal_class);
		if (journal_driver < 0) return -1;
	}
	return H5Pset_driver(fapl, journal_driver, NULL) >= 0 && H5Pset_evict_on_close(fapl, 1) >= 0 ? 0 : -1;
}

// vh5j_open opens path through the journal driver: read-write (recover first), or
// read-only where held writes (vh5j_hold) are all it takes.
hid_t vh5j_open(const char *path, int rw) {
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
	if (fapl < 0) return -1;
	hid_t id = -1;
	if (vh5j_set_fapl(fapl) == 0) id = H5Fopen(path, rw ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl);
	H5Pclose(fapl);
	return id;
}

// vh5j_eoa is the end of the space allocated in file (libhdf5's EOA), or 0 if file is not
// open through this driver.
haddr_t vh5j_eoa(hid_t file) {
	jfile *f = vh5j__jfile_of(file, NULL);
	return f ? f->eoa : 0;
}

// vh5j_read and vh5j_write read and write file's bytes as libhdf5 does through this
// driver (held writes included): 0, or -1 (errno set).
int vh5j_read(hid_t file, haddr_t addr, size_t n, void *buf) {
	jfile *f = vh5j__jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	return j_read(&f->pub, H5FD_MEM_DEFAULT, H5P_DEFAULT, addr, n, buf) < 0 ? -1 : 0;
}

// vh5j_unheld is 1 if the n bytes at addr read through this driver are the file's bytes
// as its descriptor reads them (no held operation and no guard's signature covers them,
// and the file holds them), else 0; -1 with errno EBADF if file is not open through it.
// h5meta maps a long mapping list from the file when its bytes are the file's.
int vh5j_unheld(hid_t file, haddr_t addr, size_t n) {
	jfile *f = vh5j__jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	haddr_t end = addr + n;
	if (end < addr || end > f->eof || f->failed) return 0;
	for (size_t i = 0; i < f->nops; i++) {
		const held_op *op = &f->ops[i];
		if (op->size == 0 ? op->addr < end : op->addr < end && addr < op->addr + op->size) return 0;
	}
	if (f->guarding && f->guarding - 1 < end && addr < f->guarding - 1 + sizeof vh5j__hdf5_signature) return 0;
	return 1;
}

int vh5j_write(hid_t file, haddr_t addr, size_t n, const void *buf) {
	jfile *f = vh5j__jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	return j_write(&f->pub, H5FD_MEM_DEFAULT, H5P_DEFAULT, addr, n, buf) < 0 ? -1 : 0;
}

// vh5j_hold holds a write of n bytes at addr, wherever addr is, for libhdf5's reads only:
// vh5j_retract removes it before any sync, so that it never reaches the file. Its place
// among the held operations goes in *at. 0, or -1 (errno set).
int vh5j_hold(hid_t file, haddr_t addr, size_t n, const void *buf, size_t *at) {
	jfile *f = vh5j__jfile_of(file, NULL);
	if (!f || f->failed || n == 0) {
		errno = !f ? EBADF : f->failed ? f->failed : EINVAL;
		return -1;
	}
	if (push_op(f, addr, n, buf) < 0) return vh5j__stop(f);
	*at = f->nops - 1;
	return 0;
}

// vh5j_retract removes the held operation at place at, which vh5j_hold made (at addr, of n
// bytes): what libhdf5 reads there is again what the other operations and the file hold.
// Retract in the reverse order of the holds. 0, or -1 (errno EINVAL if the operation at at
// is not that one).
int vh5j_retract(hid_t file, size_t at, haddr_t addr, size_t n) {
	jfile *f = vh5j__jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	if (at >= f->nops || f->ops[at].addr != addr || f->ops[at].size != n) {
		errno = EINVAL;
		return -1;
	}
	held_op *op = &f->ops[at];
	if (op->data) f->held_mem -= op->size;
	free(op->data);  // a spilled one's bytes stay in the spill file until it is emptied
	memmove(op, op + 1, (f->nops - at - 1) * sizeof *op);
	f->nops--;
	if (f->marked && at < f->body) f->body--;
	return 0;
}

// vh5j_reserve allocates n bytes at the end of file's allocated space, outside libhdf5's
// knowledge: libhdf5 asks the driver for the EOA whenever it extends the file, so it never
// allocates them again. The caller must make the superblock record the new EOA. 0 and
// *addr, or -1.
int vh5j_reserve(hid_t file, hsize_t n, haddr_t *addr) {
	jfile *f = vh5j__jfile_of(file, NULL);
	if (!f || f->eoa + n < f->eoa || f->eoa + n > journal_class.maxaddr) {
		errno = f ? EFBIG : EBADF;
		return -1;
	}
	*addr = f->eoa;
	f->eoa += n;
	return 0;
}
