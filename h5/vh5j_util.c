// The journal driver's shared helpers: what the driver (vh5j_driver.c), the sync
// (vh5j_sync.c) and recovery (vh5j_recover.c) all use — the system calls, the held
// operations' bytes and the driver's fail-stop, the HDF5 signature, and the list of files
// open through the driver. It calls neither part, so each part depends on it one way, and
// the driver on the sync (its close syncs libhdf5's last writes), never the reverse.
#include "vh5j_private.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const unsigned char vh5j__hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

// open_files lists the files open through the driver (vh5j__opened, vh5j__closed, from its
// open and close callbacks), for vh5j__jfile_of; under the HDF5 lock, as libhdf5 calls those.
static jfile *open_files;

void vh5j__opened(jfile *f) { f->next_open = open_files, open_files = f; }

void vh5j__closed(jfile *f) {
	for (jfile **p = &open_files; *p; p = &(*p)->next_open) {
		if (*p == f) {
			*p = f->next_open;
			return;
		}
	}
}

// vh5j__jfile_of returns the driver's state for file, or NULL if file is not open through this
// driver; then *fd, if fd is not NULL, is the file's descriptor (NULL if unknown).
jfile *vh5j__jfile_of(hid_t file, int **fd) {
	int *h = NULL;
	if (H5Fget_vfd_handle(file, H5P_DEFAULT, (void **)&h) < 0) h = NULL;
	if (fd) *fd = h;
	// Found by its handle among the open ones, not by the file's driver: that costs a copy
	// of the file's access properties, and h5meta's reads through vh5j_read ask this often.
	for (jfile *f = open_files; h && f; f = f->next_open) {
		if (&f->fd == h) return f;
	}
	return NULL;
}

char *vh5j__suffixed(const char *path, const char *suffix) {
	size_t n = strlen(path), s = strlen(suffix);
	char *p = malloc(n + s + 1);
	if (p) {
		memcpy(p, path, n);
		memcpy(p + n, suffix, s + 1);
	}
	return p;
}

// vh5j__fsync_dir makes a directory entry change durable.
int vh5j__fsync_dir(const char *path) {
	char *copy = strdup(path);
	if (!copy) return -1;
	int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (dfd < 0) return -1;
	int rc = fsync(dfd);
	int e = errno;
	close(dfd);
	errno = e;
	return rc;
}

int vh5j__write_all(int fd, const void *buf, size_t n, off_t off) {
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

// vh5j__read_all reads n bytes at off; bytes past the end of the file read as zeros (as sec2).
// *got, if not NULL, is how many bytes the file had.
int vh5j__read_got(int fd, void *buf, size_t n, off_t off, size_t *got) {
	unsigned char *p = buf;
	size_t total = 0;
	while (n > 0) {
		ssize_t r = pread(fd, p, n, off);
		if (r < 0) {
			if (errno == EINTR) continue;
			return -1;
		}
		if (r == 0) {
			memset(p, 0, n);
			break;
		}
		p += r, n -= (size_t)r, off += r, total += (size_t)r;
	}
	if (got) *got = total;
	return 0;
}

int vh5j__read_all(int fd, void *buf, size_t n, off_t off) { return vh5j__read_got(fd, buf, n, off, NULL); }

// vh5j__read_whole is vh5j__read_all of bytes that must all be there (a journal's, a spill
// file's): EIO if the file is shorter.
int vh5j__read_whole(int fd, void *buf, size_t n, off_t off) {
	size_t got;
	if (vh5j__read_got(fd, buf, n, off, &got) < 0) return -1;
	if (got < n) {
		errno = EIO;
		return -1;
	}
	return 0;
}

size_t vh5j__min_size(uint64_t a, uint64_t b) { return (size_t)(a < b ? a : b); }

// vh5j__drop_ops frees the first n held operations, keeping the rest in order; once none is
// left, the spill file's space is given back.
void vh5j__drop_ops(jfile *f, size_t n) {
	for (size_t i = 0; i < n; i++) {
		if (f->ops[i].data) f->held_mem -= f->ops[i].size;
		free(f->ops[i].data);
	}
	memmove(f->ops, f->ops + n, (f->nops - n) * sizeof *f->ops);
	f->nops -= n;
	if (f->nops == 0 && f->spill_end > 0 && ftruncate(f->spill, 0) == 0) f->spill_end = 0;
}

// vh5j__stop makes the driver fail-stop with errno (kept if already stopped) and returns -1.
int vh5j__stop(jfile *f) {
	if (!f->failed) f->failed = errno ? errno : EIO;
	errno = f->failed;
	return -1;
}

// vh5j__op_bytes copies n bytes of op's, from its byte at, to out.
int vh5j__op_bytes(const source *src, const held_op *op, size_t at, size_t n, unsigned char *out) {
	if (op->data) {
		memcpy(out, op->data + at, n);
		return 0;
	}
	return vh5j__read_whole(src->spill, out, n, op->off + (off_t)at);
}

// vh5j__overlay copies the bytes of sig[8], at offset at of the file, that fall in [addr,
// addr+size) into buf, which holds those bytes of the file.
void vh5j__overlay(unsigned char *buf, uint64_t addr, size_t size, uint64_t at, const unsigned char *sig) {
	uint64_t lo = at > addr ? at : addr, hi = at + 8 < addr + size ? at + 8 : addr + size;
	if (lo < hi) memcpy(buf + (lo - addr), sig + (lo - at), hi - lo);
}
