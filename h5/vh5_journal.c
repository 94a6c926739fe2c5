// The journal file driver: sec2's POSIX I/O, except that writes over bytes the file held at
// its last sync ("base") are held until a sync, which makes them durable through a redo
// journal, FILE.vh5fs-journal, in steps (vh5j_step, driven by h5/journal.go):
//
//   tail     write what lies past base (held writes there, growth) to the file
//   fsync    fsync the file: every new chunk and metadata block is durable, and nothing
//            durable refers to any of them yet
//   journal  write the journal: the file's identity (device, inode), its length now and the
//            length it will have, and per range below base about to change its old and its
//            new bytes, with a checksum
//   jsync    fsync the journal
//   dirsync  fsync its directory: the COMMIT POINT; from here the new state exists
//   guard    (a guarded sync) mark the file, over its HDF5 signature, and fsync it
//   apply    write the new bytes of the body over the file (without a publish part: and set
//            the new length)
//   bsync    fsync the file: the body is durable (only with a publish part)
//   publish  write the publish part's new bytes over the file, set the new length
//   async    fsync the file
//   unguard  (a guarded sync) write the HDF5 signature back, fsync the file
//   remove   unlink the journal (lazily: no directory fsync; a journal that reappears after a
//            power loss is found already applied and removed then)
//
// A sync has two parts when the writer marked a point between them (vh5j_mark_publish): the
// body, what was written before the mark (a new version's chunks, its group with
// committed=False, every index and heap that refers to them), and the publish, what was
// written after it (the committed flag, current_version). The apply writes the body and
// fsyncs it before the publish's bytes reach the file, so that no reader, of any program,
// meets a version shown as committed or current whose bytes are not all in place: a crash
// in the apply leaves the file as the last sync left it or with the new version uncommitted
// (at most torn within the body's ranges), and one in the publish with the body whole.
// Every write after the mark is held, even past base, since the body must not see it.
//
// A guarded sync (vh5j_guard) is for changes that no order of in-place writes keeps readable
// when half applied (a deletion's compaction moves chunks between the slots that virtual
// datasets name; a rename changes names in many places): from the guard step to the
// unguard step the file's HDF5 signature is replaced by guard_mark, so that every program
// that does not know the journal (h5py, h5dump, vh5fs's own h5meta reads from disk) finds
// no HDF5 file rather than a torn one, and a crash in between leaves it so until recovery.
// Only the signature changes: a program that had opened the file before keeps its own view
// (libhdf5 reads the superblock once, and takes no file a writer holds locked). Through the
// driver, reads of those bytes still see the signature.
//
// Recovery (vh5j_recover) rolls a complete journal forward, never back, and only if the file
// is the same inode and every byte of every range holds a value the sync gives it in turn
// (old, after the body, new): otherwise another program wrote to the file since, and it is
// left alone with its journal. A journal that is incomplete (no commit point) was never
// acted on and is removed.
//
// The driver is fail-stop: after any error writing the file or the journal it writes nothing
// more (every write, truncation and sync fails with the first error's errno), so the file on
// disk stays at its last commit point, or at the one the journal holds, until recovery.
//
// Memory is bounded whatever the bytes a sync changes. Held writes keep their bytes in
// memory up to a budget (HOLD_BUDGET, 32 MiB, of held bytes); beyond it they go to a spill
// file, an unlinked file in the file's directory (O_TMPFILE, else mkostemp and unlink),
// append-only, closed with the driver and emptied when a sync leaves nothing held. A sync's
// plan keeps the range lists (where each range's bytes go in the journal, its apply rank)
// and a copy of the held operations' descriptors: O(ranges + held writes), no bytes. Its
// steps stream the bytes through one buffer of PIECE (8 MiB): the tail and the journal are
// composed a piece at a time from the file, the held bytes and the spill file, the
// journal's CRC updated piece by piece, and the apply and the publish read each range's new
// bytes back from the journal, a piece at a time. Recovery holds the range list and four
// buffers of RECOVER_PIECE (1 MiB). So besides the budget and the pieces, the driver's
// memory is about 100 bytes per range and per held write.
//
// The driver writes no driver information into the superblock: the file stays an ordinary
// HDF5 file for every other program.
#define _GNU_SOURCE  // O_TMPFILE, mkostemp
#include "vh5.h"

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <libgen.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOURNAL_SUFFIX ".vh5fs-journal"
#define LEGACY_SUFFIX ".vh5fs-undo"  // the undo journal of earlier versions
static const char journal_magic[8] = {'V', 'H', '5', 'R', 'E', 'D', 'O', '3'};
static const char journal_magic2[8] = {'V', 'H', '5', 'R', 'E', 'D', 'O', '2'};  // no guard word
static const char journal_magic1[8] = {'V', 'H', '5', 'R', 'E', 'D', 'O', '1'};  // no publish part
static const char legacy_magic[8] = {'V', 'H', '5', 'U', 'N', 'D', 'O', '1'};

// Journal layout (native byte order: it never leaves the machine that wrote it):
//   magic[8] | u64 dev, ino, len_now, len_new, nbody, total, npublish, guard | nbody x (u64 off,
//   len; old[len]; new[len]) of the body | npublish x the same of the publish, whose old
//   bytes are the body's result | u32 crc32 of everything before, u32 0
// guard is 0, or 1 + the offset of the HDF5 signature a guarded sync marks. Within each
// part the ranges are sorted and disjoint. Earlier versions wrote VH5REDO2 journals, without
// guard, and VH5REDO1 journals, without npublish either, and its part; recovery reads them.
#define HDR_WORDS 8

// The HDF5 signature, and what a guarded sync writes over it while it applies (see the top).
static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
static const unsigned char guard_mark[8] = {0x89, 'V', 'H', '5', 'J', 'N', 'L', '\n'};
#define HDR_SIZE (8 + 8 * HDR_WORDS)

// Memory bounds (see the top). HOLD_BUDGET: held bytes kept in memory, the rest spilled;
// PIECE: the bytes a sync's step composes, reads or writes at a time (its buffer);
// RECOVER_PIECE: the same for recovery, which needs four such buffers. A test build may
// set them (CGO_CFLAGS=-DHOLD_BUDGET=0 ...) to run a whole program spilled and streamed.
#ifndef HOLD_BUDGET
#define HOLD_BUDGET ((size_t)32 << 20)
#endif
#define PIECE_MIN ((size_t)256)  // room for the header, a range's and the first bytes of its new
#ifndef PIECE
#define PIECE ((size_t)8 << 20)
#endif
#ifndef RECOVER_PIECE
#define RECOVER_PIECE ((size_t)1 << 20)
#endif

typedef struct {
	haddr_t addr;         // a write: where; a truncation: the new length
	size_t size;          // 0 for a truncation
	unsigned char *data;  // its bytes, or NULL: they are in the spill file at off
	off_t off;
} held_op;

// Where held operations' bytes are read from: the file, the operations, the spill file.
typedef struct {
	int fd;
	const held_op *ops;
	int spill;
} source;

typedef struct jfile {
	H5FD_t pub;  // first: libhdf5 casts between the two
	int fd;      // get_handle returns &fd, as sec2 does (jfile_of finds the driver from it)
	struct jfile *next_open;  // the next in open_files
	char *path;
	dev_t dev;
	ino_t ino;
	haddr_t eoa, eof;
	haddr_t base;   // the file's length at the last sync: bytes below are the durable state
	haddr_t limit;  // writes below limit are held: base, or every write after a held truncation
	held_op *ops;
	size_t nops, capops;
	size_t body;  // with marked: the held operations before the publish mark (vh5j_mark_publish)
	int marked;
	int guard;         // the next sync is guarded (vh5j_guard)
	haddr_t guarding;  // while a guarded sync runs: 1 + its signature's offset (view shows the signature)
	int failed;   // the errno that stopped the driver (fail-stop), 0 while it works
	int closing;  // a stopped file being closed: libhdf5's last writes are dropped (vh5j_abandon)
	// The held operations' bytes: up to budget of them in memory (held_mem now), the rest
	// appended to the spill file (an unlinked file in the file's directory, -1 until the
	// first spill) at spill_end; spilled counts the bytes ever spilled (tests).
	size_t budget, held_mem, piece;
	int spill;
	off_t spill_end;
	uint64_t spilled;
	// For crash tests (vh5j_kill_at): the process kills itself (SIGKILL) just before the
	// kill_at-th system call of its syncs that writes, syncs, creates or removes a file.
	unsigned long kill_at, ticks;
} jfile;

// journal_driver is the driver's libhdf5 identifier, registered on first use; like every libhdf5
// call, it is only touched under the HDF5 lock (h5/lock.go).
static hid_t journal_driver = -1;

// open_files lists the files open through the driver (j_open, j_close), for jfile_of;
// under the HDF5 lock, as libhdf5 calls those.
static jfile *open_files;

// recover_piece is RECOVER_PIECE unless a test set it (vh5j_set_recover_piece); recovery
// and the setter run under the HDF5 lock.
static size_t recover_piece = RECOVER_PIECE < PIECE_MIN ? PIECE_MIN : RECOVER_PIECE;

static char *suffixed(const char *path, const char *suffix) {
	size_t n = strlen(path), s = strlen(suffix);
	char *p = malloc(n + s + 1);
	if (p) {
		memcpy(p, path, n);
		memcpy(p + n, suffix, s + 1);
	}
	return p;
}

// fsync_dir makes a directory entry change durable.
static int fsync_dir(const char *path) {
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
// *got, if not NULL, is how many bytes the file had.
static int read_got(int fd, void *buf, size_t n, off_t off, size_t *got) {
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

static int read_all(int fd, void *buf, size_t n, off_t off) { return read_got(fd, buf, n, off, NULL); }

// read_whole is read_all of bytes that must all be there (a journal's, a spill file's): EIO
// if the file is shorter.
static int read_whole(int fd, void *buf, size_t n, off_t off) {
	size_t got;
	if (read_got(fd, buf, n, off, &got) < 0) return -1;
	if (got < n) {
		errno = EIO;
		return -1;
	}
	return 0;
}

static size_t min_size(uint64_t a, uint64_t b) { return (size_t)(a < b ? a : b); }

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
		if (write_all(f->spill, data, size, f->spill_end) < 0) return -1;
		op.off = f->spill_end;
		f->spill_end += (off_t)size, f->spilled += size;
	}
	f->ops[f->nops++] = op;
	return 0;
}

// drop_ops frees the first n held operations, keeping the rest in order; once none is left,
// the spill file's space is given back.
static void drop_ops(jfile *f, size_t n) {
	for (size_t i = 0; i < n; i++) {
		if (f->ops[i].data) f->held_mem -= f->ops[i].size;
		free(f->ops[i].data);
	}
	memmove(f->ops, f->ops + n, (f->nops - n) * sizeof *f->ops);
	f->nops -= n;
	if (f->nops == 0 && f->spill_end > 0 && ftruncate(f->spill, 0) == 0) f->spill_end = 0;
}

// stop makes the driver fail-stop with errno (kept if already stopped) and returns -1.
static int stop(jfile *f) {
	if (!f->failed) f->failed = errno ? errno : EIO;
	errno = f->failed;
	return -1;
}

// op_bytes copies n bytes of op's, from its byte at, to out.
static int op_bytes(const source *src, const held_op *op, size_t at, size_t n, unsigned char *out) {
	if (op->data) {
		memcpy(out, op->data + at, n);
		return 0;
	}
	return read_whole(src->spill, out, n, op->off + (off_t)at);
}

// overlay copies the bytes of sig[8], at offset at of the file, that fall in [addr,
// addr+size) into buf, which holds those bytes of the file.
static void overlay(unsigned char *buf, uint64_t addr, size_t size, uint64_t at, const unsigned char *sig) {
	uint64_t lo = at > addr ? at : addr, hi = at + 8 < addr + size ? at + 8 : addr + size;
	if (lo < hi) memcpy(buf + (lo - addr), sig + (lo - at), hi - lo);
}

// view reads what the file holds as libhdf5 sees it: its bytes with the first nops held
// operations applied in order.
static int view(const jfile *f, size_t nops, haddr_t addr, size_t size, unsigned char *buf) {
	if (read_all(f->fd, buf, size, (off_t)addr) < 0) return -1;
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
		if (lo < hi && op_bytes(&src, op, lo - op->addr, hi - lo, buf + (lo - addr)) < 0) return -1;
	}
	if (f->guarding) overlay(buf, addr, size, f->guarding - 1, hdf5_signature);
	return 0;
}

typedef struct {
	haddr_t lo, hi;
} range;

static int cmp_range(const void *a, const void *b) {
	const range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

// tick counts a system call of a sync that writes, syncs, creates or removes a file, and
// kills the process just before the one vh5j_kill_at names (crash tests; off by default).
static void tick(jfile *f) {
	if (f->kill_at && ++f->ticks == f->kill_at) kill(getpid(), SIGKILL);
}

// A journal's range as the apply and recovery know it: where its bytes are in the journal
// (its old bytes at at, its new ones at at + len) and its place in write_part's order.
typedef struct {
	uint64_t addr, len, at;
	unsigned rank;  // apply_rank's
	int nonzero;    // while a sync writes the journal: its old bytes seen so far are not all zeros
} jrange;

// A journal: its header and its ranges, the body's then the publish's, each part sorted by
// address.
typedef struct {
	uint64_t dev, ino, len_now, len_new, nbody, npublish, total;
	jrange *r;       // nbody + npublish
	uint64_t guard;  // 0, or 1 + the offset of the signature a guarded sync marks
} jview;

// crc_of is the CRC-32 of the first n bytes of the file at fd, read a piece at a time.
static int crc_of(int fd, uint64_t n, size_t piece, uint32_t *crc) {
	unsigned char *buf = malloc(min_size(n, piece) + 1);
	if (!buf) return -1;
	uint32_t c = 0;
	int rc = 0;
	for (uint64_t off = 0; off < n && rc == 0; off += piece) {
		size_t k = min_size(n - off, piece);
		rc = read_whole(fd, buf, k, (off_t)off);
		if (rc == 0) c = libdeflate_crc32(c, buf, k);
	}
	int e = errno;
	free(buf);
	errno = e;
	*crc = c;
	return rc;
}

// signature_place reports whether an HDF5 signature may be at offset at: 0, 512, 1024, ...
static int signature_place(uint64_t at) { return at == 0 || (at >= 512 && (at & (at - 1)) == 0); }

// find_signature sets *at to the offset of the HDF5 signature in the file at fd (len bytes),
// where libhdf5 looks for it. 0, or -1 (errno EINVAL if there is none).
static int find_signature(int fd, uint64_t len, uint64_t *at) {
	for (uint64_t off = 0; off + 8 <= len; off = off ? off * 2 : 512) {
		unsigned char b[8];
		if (read_whole(fd, b, 8, (off_t)off) < 0) return -1;
		if (memcmp(b, hdf5_signature, 8) == 0) {
			*at = off;
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}

// read_journal reads the journal open at jfd (n bytes) into v if it is a whole journal
// (magic, sizes, checksum), of this version or an earlier one (VH5REDO2, VH5REDO1): 1, 0 if it
// is not whole, -1 (errno). It keeps the ranges' places, not their bytes: its memory is the
// range list and one piece.
static int read_journal(int jfd, uint64_t n, size_t piece, jview *v) {
	char magic[8];
	size_t words = 0;
	if (n >= 8 && read_whole(jfd, magic, 8, 0) < 0) return -1;
	if (n >= 8 && memcmp(magic, journal_magic, 8) == 0) words = HDR_WORDS;
	if (n >= 8 && memcmp(magic, journal_magic2, 8) == 0) words = HDR_WORDS - 1;
	if (n >= 8 && memcmp(magic, journal_magic1, 8) == 0) words = HDR_WORDS - 2;
	uint64_t off = 8 + 8 * words;
	if (words == 0 || n < off + 8) return 0;
	uint64_t hdr[HDR_WORDS] = {0};
	if (read_whole(jfd, hdr, 8 * words, 8) < 0) return -1;
	if (hdr[5] != n || hdr[4] > n / 16 || hdr[6] > n / 16) return 0;
	*v = (jview){hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[6], n, NULL, hdr[7]};
	if (v->guard && !signature_place(v->guard - 1)) return 0;
	uint64_t nr = hdr[4] + hdr[6];
	if (!(v->r = malloc((nr ? nr : 1) * sizeof *v->r))) return -1;
	for (uint64_t i = 0; i < nr; i++) {
		uint64_t rh[2];
		if (n - 8 - off < 16) goto torn;
		if (read_whole(jfd, rh, 16, (off_t)off) < 0) goto fail;
		if (rh[1] > (n - 8 - off - 16) / 2) goto torn;
		v->r[i] = (jrange){rh[0], rh[1], off + 16, 0, 0};
		off += 16 + 2 * rh[1];
	}
	if (off + 8 != n) goto torn;
	uint32_t crc[2], want;
	if (read_whole(jfd, crc, 8, (off_t)off) < 0 || crc_of(jfd, off, piece, &want) < 0) goto fail;
	if (crc[0] == want && crc[1] == 0) return 1;
torn:
	free(v->r);
	v->r = NULL;
	return 0;
fail:;
	int e = errno;
	free(v->r);
	v->r = NULL;
	errno = e;
	return -1;
}

// first_past is the first range of rs (n of them, sorted, disjoint) that ends past addr.
static uint64_t first_past(const jrange *rs, uint64_t n, uint64_t addr) {
	uint64_t a = 0, b = n;
	while (a < b) {
		uint64_t mid = a + (b - a) / 2;
		if (rs[mid].addr + rs[mid].len <= addr) a = mid + 1; else b = mid;
	}
	return a;
}

// apply_rank places a range in the order write_part writes a part in. libhdf5 changes its
// structures in place, so a reader that meets the ranges of a part half written (a process
// killed between two of them) sees whatever the ranges so far make; the order makes that
// as often as it can a state whose references all lead to bytes already in place: space
// that held nothing before (all zeros), then the superblock (its end-of-file grows), heaps,
// object headers (new ones among them) and anything else, B-tree nodes from the root down
// (a split's parent points to the new node before the old one drops its half), and last
// symbol table nodes, which link names to objects. Power loss can still keep any mixture:
// the fsync between the body and the publish, not this order, keeps the publish out of it.
// zero: the range's old bytes are all zeros; new: its first min(len, 6) new bytes.
static unsigned apply_rank(uint64_t addr, uint64_t len, int zero, const unsigned char *new) {
	static const char *heaps[] = {"HEAP", "GCOL", "FRHP", "FHDB", "FHIB", "FSHD", "FSSE"};
	if (zero) return 0;
	if (addr == 0) return 1;
	if (len >= 4) {
		for (size_t i = 0; i < sizeof heaps / sizeof *heaps; i++)
			if (memcmp(new, heaps[i], 4) == 0) return 2;
		if (memcmp(new, "SNOD", 4) == 0) return 6 << 8;
		if (memcmp(new, "BTHD", 4) == 0) return 4 << 8;
		if (memcmp(new, "BTIN", 4) == 0) return (4 << 8) + 1;
		if (memcmp(new, "BTLF", 4) == 0) return (5 << 8) + 255;
		if (len >= 6 && memcmp(new, "TREE", 4) == 0) return (5 << 8) + 255 - new[5];  // by level, root first
	}
	return 3;
}

static int all_zero(const unsigned char *p, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (p[i]) return 0;
	return 1;
}

static int cmp_ranked(const void *a, const void *b) {
	const jrange *x = *(const jrange *const *)a, *y = *(const jrange *const *)b;
	if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

// write_part writes the new bytes of n ranges over fd, in their ranks' order, reading them
// from the journal at jfd a piece at a time (f, if not NULL, counts the writes for crash
// tests: one per range); with guard (1 + the signature's offset), the guard's mark stays
// where a range rewrites the signature. 0 or -1.
static int write_part(jfile *f, int fd, int jfd, const jrange *rs, uint64_t n, size_t piece, uint64_t guard) {
	uint64_t longest = 0;
	for (uint64_t i = 0; i < n; i++)
		if (rs[i].len > longest) longest = rs[i].len;
	const jrange **o = malloc((n ? n : 1) * sizeof *o);
	unsigned char *buf = malloc(min_size(longest, piece) + 1);
	int rc = o && buf ? 0 : -1;
	if (rc == 0) {
		for (uint64_t i = 0; i < n; i++) o[i] = &rs[i];
		qsort(o, n, sizeof *o, cmp_ranked);
	}
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		if (f) tick(f);
		const jrange *r = o[i];
		for (uint64_t done = 0; done < r->len && rc == 0;) {
			size_t k = min_size(r->len - done, piece);
			rc = read_whole(jfd, buf, k, (off_t)(r->at + r->len + done));
			if (rc == 0 && guard) overlay(buf, r->addr + done, k, guard - 1, guard_mark);
			if (rc == 0) rc = write_all(fd, buf, k, (off_t)(r->addr + done));
			done += k;
		}
	}
	int e = errno;
	free(o);
	free(buf);
	errno = e;
	return rc;
}

// A sync in progress: everything its steps need, so that they run without the HDF5 lock
// (they make no libhdf5 call and touch none of the driver's state that libhdf5 may change:
// they read the held operations it covers through ops, a copy of their descriptors, since
// writes held meanwhile may move the driver's array; those operations' bytes do not change
// until vh5j_sync_end drops them, and the spill file only grows meanwhile). Its memory is
// the range lists; the steps stream the bytes through buffers of one piece.
struct vh5j_sync {
	jfile *f;
	int fd;   // a duplicate of the file's descriptor
	int jfd;  // the journal, from the journal step on
	char *jpath;
	size_t nops;      // the held operations it makes durable
	size_t nb;        // the body's among them (the rest are the publish's)
	held_op *ops;     // their descriptors
	source src;       // the file (fd), ops and the spill file
	size_t piece;     // the steps' buffer
	haddr_t len_new;  // the file's length after the sync
	range *tail;      // ranges at or past base the body changes: the tail step writes them
	size_t ntail;
	jview v;                      // the journal's header and ranges (their ranks from the journal step on)
	int fault_step, fault_crash;  // test fault injection (vh5j_set_fault)
	int step;                     // the next step to run
	int committed;                // the commit point has passed
	int journaled;                // anything below base changes: else tail and fsync suffice
	int err;                      // the errno of the step that failed
};

// ranges_of is the ranges that f's held operations [from, to) change, below len, sorted
// and merged (*m of them), or NULL. A truncation changes everything from its length to now.
static range *ranges_of(const jfile *f, size_t from, size_t to, haddr_t now, haddr_t len, size_t *m) {
	range *rs = malloc((to > from ? to - from : 1) * sizeof *rs);
	if (!rs) return NULL;
	size_t n = 0;
	for (size_t i = from; i < to; i++) {
		const held_op *op = &f->ops[i];
		range r = op->size ? (range){op->addr, op->addr + op->size} : (range){op->addr, now};
		if (r.hi > len) r.hi = len;
		if (r.lo < r.hi) rs[n++] = r;
	}
	qsort(rs, n, sizeof *rs, cmp_range);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k > 0 && rs[i].lo <= rs[k - 1].hi) {
			if (rs[i].hi > rs[k - 1].hi) rs[k - 1].hi = rs[i].hi;
		} else {
			rs[k++] = rs[i];
		}
	}
	*m = k;
	return rs;
}

// A piece of a range: bytes [lo, hi) of the file, composed into a buffer at at; ri is the
// range it belongs to.
typedef struct {
	haddr_t lo, hi;
	size_t at, ri;
} piece;

// compose fills out (piece i at ps[i].at) with what the m pieces (sorted, disjoint) hold
// once the first nops held operations of src are applied in order to the file's bytes: each
// operation finds its pieces by binary search (a read of the view per piece would cost
// pieces x operations). 0 or -1.
static int compose(const source *src, size_t nops, haddr_t len, const piece *ps, size_t m, unsigned char *out) {
	for (size_t i = 0; i < m; i++)
		if (read_all(src->fd, out + ps[i].at, ps[i].hi - ps[i].lo, (off_t)ps[i].lo) < 0) return -1;
	if (m == 0) return 0;
	for (size_t i = 0; i < nops; i++) {
		const held_op *op = &src->ops[i];
		haddr_t lo = op->addr, hi = op->size ? op->addr + op->size : len;
		if (hi > len) hi = len;
		if (lo >= hi || hi <= ps[0].lo || lo >= ps[m - 1].hi) continue;
		size_t a = 0, b = m;  // the first piece that ends past lo
		while (a < b) {
			size_t mid = a + (b - a) / 2;
			if (ps[mid].hi <= lo) a = mid + 1; else b = mid;
		}
		for (size_t k = a; k < m && ps[k].lo < hi; k++) {  // one range for a write; all after a truncation
			haddr_t x = lo > ps[k].lo ? lo : ps[k].lo, y = hi < ps[k].hi ? hi : ps[k].hi;
			if (!op->size) memset(out + ps[k].at + (x - ps[k].lo), 0, y - x);
			else if (op_bytes(src, op, x - op->addr, y - x, out + ps[k].at + (x - ps[k].lo)) < 0) return -1;
		}
	}
	return 0;
}

void vh5j_sync_free(vh5j_sync *s);

// plan builds the sync of f's held operations (see the top): the body's ranges split at
// base into the journal's and the tail's, and the publish's, all journaled, with where each
// journal range's bytes will be. It composes no bytes: the steps do, a piece at a time.
static vh5j_sync *plan(jfile *f) {
	vh5j_sync *s = calloc(1, sizeof *s);
	range *rb = NULL, *rp = NULL;
	size_t mb = 0, mp = 0;
	struct stat st;
	int ok = 0;
	if (!s) return NULL;
	s->fd = s->jfd = -1;
	if (fstat(f->fd, &st) < 0) goto done;
	s->f = f, s->nops = f->nops, s->len_new = f->eof, s->piece = f->piece;
	s->nb = f->marked ? f->body : f->nops;  // the body's held operations; the rest publish
	haddr_t now = (haddr_t)st.st_size;
	if (!(rb = ranges_of(f, 0, s->nb, now, s->len_new, &mb)) || !(rp = ranges_of(f, s->nb, f->nops, now, s->len_new, &mp)) ||
	    !(s->ops = malloc((f->nops ? f->nops : 1) * sizeof *s->ops)))
		goto done;
	if (f->nops) memcpy(s->ops, f->ops, f->nops * sizeof *s->ops);

	// Split the body at base: below goes to the journal (old and new bytes), at or past it
	// to the tail. The publish goes to the journal whole, its old bytes the body's result.
	size_t nj = 0;
	for (size_t i = 0; i < mb; i++)
		if (rb[i].lo < f->base) nj++;
	if (!(s->tail = malloc((mb ? mb : 1) * sizeof *s->tail)) || !(s->v.r = malloc((nj + mp ? nj + mp : 1) * sizeof *s->v.r)))
		goto done;
	uint64_t off = HDR_SIZE, k = 0;
	for (size_t i = 0; i < mb; i++) {
		haddr_t split = rb[i].lo < f->base ? (rb[i].hi < f->base ? rb[i].hi : f->base) : rb[i].lo;
		if (split > rb[i].lo) {
			s->v.r[k++] = (jrange){rb[i].lo, split - rb[i].lo, off + 16, 0, 0};
			off += 16 + 2 * (split - rb[i].lo);
		}
		if (rb[i].hi > split) s->tail[s->ntail++] = (range){split, rb[i].hi};
	}
	for (size_t i = 0; i < mp; i++) {
		s->v.r[k++] = (jrange){rp[i].lo, rp[i].hi - rp[i].lo, off + 16, 0, 0};
		off += 16 + 2 * (rp[i].hi - rp[i].lo);
	}
	haddr_t len_now = now > s->len_new ? now : s->len_new;  // the tail step grows the file
	s->v = (jview){(uint64_t)f->dev, (uint64_t)f->ino, len_now, s->len_new, nj, mp, off + 8, s->v.r, 0};
	s->journaled = nj > 0 || mp > 0 || s->len_new < len_now;
	if (f->guard && s->journaled) {  // the apply changes the durable bytes: hide them meanwhile
		uint64_t at;
		if (find_signature(f->fd, now, &at) < 0) goto done;
		s->v.guard = at + 1;
	}
	s->step = VH5J_TAIL, s->fault_step = -1;
	ok = (s->fd = dup(f->fd)) >= 0 && (s->jpath = suffixed(f->path, JOURNAL_SUFFIX));
	s->src = (source){s->fd, s->ops, f->spill};
done:;
	int e = errno;
	free(rb), free(rp);
	if (!ok) {
		vh5j_sync_free(s);
		s = NULL;
	}
	errno = e;
	return s;
}

void vh5j_sync_free(vh5j_sync *s) {
	if (!s) return;
	if (s->fd >= 0) close(s->fd);
	if (s->jfd >= 0) close(s->jfd);
	free(s->v.r);
	free(s->jpath);
	free(s->tail);
	free(s->ops);
	free(s);
}

// set_length gives the file the journal's new length, if it differs from its length now.
static int set_length(jfile *f, int fd, const jview *v) {
	if (v->len_now == v->len_new) return 0;
	tick(f);
	return ftruncate(fd, (off_t)v->len_new);
}

// write_tail is the tail step's writes: the body's ranges at or past base, composed a piece
// at a time, each range written in order (one counted system call a range).
static int write_tail(vh5j_sync *s) {
	uint64_t total = 0;
	for (size_t i = 0; i < s->ntail; i++) total += s->tail[i].hi - s->tail[i].lo;
	size_t cap = min_size(s->ntail, s->piece) + 1;
	unsigned char *buf = malloc(min_size(total, s->piece) + 1);
	piece *ps = malloc(cap * sizeof *ps);
	int rc = buf && ps ? 0 : -1;
	size_t i = 0;
	haddr_t lo = s->ntail ? s->tail[0].lo : 0;
	while (i < s->ntail && rc == 0) {
		size_t m = 0, pos = 0;
		while (i < s->ntail && pos < s->piece) {
			size_t k = min_size(s->tail[i].hi - lo, s->piece - pos);
			ps[m++] = (piece){lo, lo + k, pos, i};
			pos += k, lo += k;
			if (lo == s->tail[i].hi && ++i < s->ntail) lo = s->tail[i].lo;
		}
		rc = compose(&s->src, s->nb, s->len_new, ps, m, buf);
		for (size_t j = 0; j < m && rc == 0; j++) {
			if (ps[j].lo == s->tail[ps[j].ri].lo) tick(s->f);
			rc = write_all(s->fd, buf + ps[j].at, ps[j].hi - ps[j].lo, (off_t)ps[j].lo);
		}
	}
	int e = errno;
	free(buf);
	free(ps);
	errno = e;
	return rc;
}

// The lists of pieces write_journal composes a buffer of: each range's old bytes and new
// ones, of the body and of the publish.
enum { OLD_BODY, NEW_BODY, OLD_PUB, NEW_PUB };

// flush_journal composes buf's pieces (pos bytes of the journal from *at on), notes what
// apply_rank needs of them, and writes buf to the journal, its CRC into *crc.
static int flush_journal(vh5j_sync *s, unsigned char *buf, size_t pos, piece *ls[4], size_t ln[4], uint64_t *at,
                         uint32_t *crc) {
	size_t nops[4] = {0, s->nb, s->nb, s->nops};  // old body: the file's bytes; old publish: the body's result
	for (int k = 0; k < 4; k++)
		if (compose(&s->src, nops[k], s->len_new, ls[k], ln[k], buf) < 0) return -1;
	for (int k = OLD_BODY; k <= OLD_PUB; k += 2)
		for (size_t i = 0; i < ln[k]; i++)
			if (!all_zero(buf + ls[k][i].at, ls[k][i].hi - ls[k][i].lo)) s->v.r[ls[k][i].ri].nonzero = 1;
	for (int k = NEW_BODY; k <= NEW_PUB; k += 2)
		for (size_t i = 0; i < ln[k]; i++) {  // a range's old bytes all come before its new ones
			jrange *r = &s->v.r[ls[k][i].ri];
			if (ls[k][i].lo == r->addr) r->rank = apply_rank(r->addr, r->len, !r->nonzero, buf + ls[k][i].at);
		}
	*crc = libdeflate_crc32(*crc, buf, pos);
	if (write_all(s->jfd, buf, pos, (off_t)*at) < 0) return -1;
	*at += pos;
	for (int k = 0; k < 4; k++) ln[k] = 0;
	return 0;
}

// write_journal writes the journal (see its layout) to s->jfd in order, a buffer of one
// piece at a time, and ranks its ranges for write_part.
static int write_journal(vh5j_sync *s) {
	uint64_t nr = s->v.nbody + s->v.npublish;
	size_t cap = min_size(nr, s->piece / 16 + 1) + 1, P = s->piece;
	unsigned char *buf = malloc(P);
	piece *ls[4] = {NULL};
	size_t ln[4] = {0};
	int rc = buf ? 0 : -1;
	for (int k = 0; k < 4 && rc == 0; k++)
		if (!(ls[k] = malloc(cap * sizeof *ls[k]))) rc = -1;
	uint64_t at = 0;
	uint32_t crc = 0;
	size_t pos = HDR_SIZE;
	if (rc == 0) {
		uint64_t hdr[HDR_WORDS] = {s->v.dev,   s->v.ino,   s->v.len_now,  s->v.len_new,
		                           s->v.nbody, s->v.total, s->v.npublish, s->v.guard};
		memcpy(buf, journal_magic, 8);
		memcpy(buf + 8, hdr, sizeof hdr);
	}
	for (uint64_t i = 0; i < nr && rc == 0; i++) {
		jrange *r = &s->v.r[i];
		int pub = i >= s->v.nbody;
		if (P - pos < 16) {
			if ((rc = flush_journal(s, buf, pos, ls, ln, &at, &crc)) < 0) break;
			pos = 0;
		}
		uint64_t rh[2] = {r->addr, r->len};
		memcpy(buf + pos, rh, 16);
		pos += 16;
		for (int new = 0; new < 2 && rc == 0; new++) {
			int k = 2 * pub + new;
			// The first bytes of each in one piece: apply_rank reads the new ones'.
			if (P - pos < min_size(r->len, 8)) {
				if ((rc = flush_journal(s, buf, pos, ls, ln, &at, &crc)) < 0) break;
				pos = 0;
			}
			for (uint64_t done = 0; done < r->len;) {
				if (pos == P) {
					if ((rc = flush_journal(s, buf, pos, ls, ln, &at, &crc)) < 0) break;
					pos = 0;
				}
				size_t n = min_size(r->len - done, P - pos);
				ls[k][ln[k]++] = (piece){r->addr + done, r->addr + done + n, pos, (size_t)i};
				pos += n, done += n;
			}
		}
	}
	if (rc == 0) rc = flush_journal(s, buf, pos, ls, ln, &at, &crc);
	if (rc == 0) {
		uint32_t tail[2] = {crc, 0};
		rc = write_all(s->jfd, tail, 8, (off_t)at);
	}
	int e = errno;
	free(buf);
	for (int k = 0; k < 4; k++) free(ls[k]);
	errno = e;
	return rc;
}

// run_step performs one step of s (see the top). 0, or -1 with errno set.
static int run_step(vh5j_sync *s, int step) {
	jfile *f = s->f;
	switch (step) {
	case VH5J_TAIL: {
		if (write_tail(s) < 0) return -1;
		struct stat st;
		if (fstat(s->fd, &st) < 0) return -1;
		if ((haddr_t)st.st_size < s->len_new) {
			tick(f);
			if (ftruncate(s->fd, (off_t)s->len_new) < 0) return -1;
		}
		return 0;
	}
	case VH5J_FSYNC:
	case VH5J_BSYNC:
	case VH5J_ASYNC:
		tick(f);
		return fsync(s->fd);
	case VH5J_JOURNAL:
		// Written whole here, after the tail's fsync: a journal whose checksum holds is
		// rolled forward by recovery, so none may be on disk before the tail is durable.
		tick(f);
		if ((s->jfd = open(s->jpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) return -1;
		tick(f);  // one count for the journal's writes: no kill falls between two of them
		return write_journal(s);
	case VH5J_JSYNC:
		tick(f);
		return fsync(s->jfd);
	case VH5J_DIRSYNC:
		tick(f);
		return fsync_dir(s->jpath);
	case VH5J_GUARD:
	case VH5J_UNGUARD:
		tick(f);
		if (write_all(s->fd, step == VH5J_GUARD ? guard_mark : hdf5_signature, 8, (off_t)(s->v.guard - 1)) < 0) return -1;
		tick(f);
		return fsync(s->fd);
	case VH5J_APPLY:
		if (write_part(f, s->fd, s->jfd, s->v.r, s->v.nbody, s->piece, s->v.guard) < 0) return -1;
		return s->v.npublish ? 0 : set_length(f, s->fd, &s->v);
	case VH5J_PUBLISH:
		if (write_part(f, s->fd, s->jfd, s->v.r + s->v.nbody, s->v.npublish, s->piece, s->v.guard) < 0) return -1;
		return set_length(f, s->fd, &s->v);
	case VH5J_REMOVE:
		tick(f);
		return unlink(s->jpath) < 0 && errno != ENOENT ? -1 : 0;
	}
	errno = EINVAL;
	return -1;
}

// next_step is the step that follows step in s: a sync that changes nothing below its old
// end is done once fsynced; one without a publish part goes from the apply to the fsync;
// only a guarded one has the guard and unguard steps.
static int next_step(const vh5j_sync *s, int step) {
	if (step == VH5J_FSYNC && !s->journaled) return VH5J_DONE;
	if (step == VH5J_DIRSYNC && !s->v.guard) return VH5J_APPLY;
	if (step == VH5J_APPLY && !s->v.npublish) return VH5J_ASYNC;
	if (step == VH5J_ASYNC && !s->v.guard) return VH5J_REMOVE;
	return step + 1;
}

// vh5j_step runs the next step of s, without touching the driver's state (it runs without
// the HDF5 lock): 0, VH5J_DONE once all are done, -2 if only the journal's removal failed
// (the state is durable all the same; the journal stays, applied), or -1 with errno set:
// then vh5j_sync_end stops the driver (fail-stop). A step that fails before the commit point
// removes the journal it may have begun.
int vh5j_step(vh5j_sync *s) {
	int step = s->step;
	if (s->err) {
		errno = s->err;
		return -1;
	}
	if (step >= VH5J_DONE) return VH5J_DONE;
	if (s->fault_step == step && s->fault_crash) {  // a test's crash: stop before the step
		s->err = errno = ECANCELED;
		return -1;
	}
	int rc = s->fault_step == step ? (errno = EIO, -1) : run_step(s, step);  // or its failure
	if (rc < 0) {
		int e = errno ? errno : EIO;
		if (step == VH5J_REMOVE) {
			s->step = VH5J_DONE;
			errno = e;
			return -2;
		}
		if (!s->committed && step >= VH5J_JOURNAL) unlink(s->jpath);
		s->err = errno = e;
		return -1;
	}
	if (step == VH5J_DIRSYNC || (step == VH5J_FSYNC && !s->journaled)) s->committed = 1;
	s->step = next_step(s, step);
	return s->step >= VH5J_DONE ? VH5J_DONE : 0;
}

int vh5j_committed(const vh5j_sync *s) { return s->committed; }

// vh5j_step_next is the step vh5j_step will run next.
int vh5j_step_next(const vh5j_sync *s) { return s->step; }

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
	f->next_open = open_files, open_files = f;
	return &f->pub;
}

static vh5j_sync *sync_begin(jfile *f);

// sync_now makes everything held durable in one go (for close, under the HDF5 lock).
static int sync_now(jfile *f) {
	vh5j_sync *s = sync_begin(f);
	if (!s) return -1;
	int rc;
	while ((rc = vh5j_step(s)) == 0) {
	}
	int e = errno;
	vh5j_sync_end(s);
	errno = e;
	return rc == -1 ? -1 : 0;
}

static herr_t j_close(H5FD_t *file) {
	jfile *f = (jfile *)file;
	for (jfile **p = &open_files; *p; p = &(*p)->next_open) {
		if (*p == f) {
			*p = f->next_open;
			break;
		}
	}
	herr_t rc = 0;
	if (!f->failed && (f->nops > 0 || f->eof != f->base)) rc = sync_now(f) < 0 ? -1 : 0;  // libhdf5's last writes
	drop_ops(f, f->nops);
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
		if (push_op(f, addr, n, p) < 0) return stop(f);
		addr += n, p += n, size -= n;
	}
	if (size > 0 && write_all(f->fd, p, size, (off_t)addr) < 0) return stop(f);
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
		if (push_op(f, f->eoa, 0, NULL) < 0) return stop(f);
		f->limit = HADDR_MAX;
	} else if (ftruncate(f->fd, (off_t)f->eoa) < 0) {
		return stop(f);
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

static const H5FD_class_t journal_class = {
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

// jfile_of returns the driver's state for file, or NULL if file is not open through this
// driver; then *fd, if fd is not NULL, is the file's descriptor (NULL if unknown).
static jfile *jfile_of(hid_t file, int **fd) {
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

// sync_begin plans the sync of everything f holds (f must be flushed, H5Fflush, first),
// under the HDF5 lock; NULL with errno set on failure (then the driver is stopped). Until
// vh5j_sync_end, later writes are all held, so that the steps, which run without the lock,
// share nothing with libhdf5 but the file's descriptor.
static vh5j_sync *sync_begin(jfile *f) {
	if (f->failed) {
		errno = f->failed;
		return NULL;
	}
	vh5j_sync *s = plan(f);
	f->guard = 0;
	if (!s) {
		stop(f);
		return NULL;
	}
	f->limit = HADDR_MAX;
	f->guarding = s->v.guard;
	return s;
}

// vh5j_sync_begin_file is sync_begin for an open file: NULL with errno EBADF if it is
// not open through this driver.
vh5j_sync *vh5j_sync_begin_file(hid_t file) {
	jfile *f = jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return NULL;
	}
	return sync_begin(f);
}

// vh5j_sync_end finishes s under the HDF5 lock and frees it. If every step was done (the
// journal's removal aside), the held operations s covered are dropped and the durable state
// moves on; if a step failed, the driver stops.
void vh5j_sync_end(vh5j_sync *s) {
	jfile *f = s->f;
	f->guarding = 0;
	if (s->err) {
		errno = s->err;
		stop(f);
	} else if (s->step >= VH5J_DONE && !f->failed) {
		drop_ops(f, s->nops);
		if (f->marked && f->body > s->nops) f->body -= s->nops; else f->marked = 0;
		struct stat st;
		if (fstat(f->fd, &st) < 0) {
			stop(f);
		} else if (f->nops == 0) {
			f->base = f->limit = (haddr_t)st.st_size;
		} else {
			// Writes held while the steps ran come after them in order: keep holding all,
			// over a base that is the state just made durable.
			f->base = s->len_new;
		}
	}
	vh5j_sync_free(s);
}

// vh5j_set_fault makes step `step` of s fail (EIO) or, with crash, stop there as a killed
// process would (the steps before it done, nothing after); for tests.
void vh5j_set_fault(vh5j_sync *s, int step, int crash) {
	s->fault_step = step, s->fault_crash = crash;
}

// vh5j_fsync fsyncs a file that is not open through this driver.
int vh5j_fsync(hid_t file) {
	int *fd;
	if (jfile_of(file, &fd)) {
		errno = EINVAL;
		return -1;
	}
	if (fd == NULL) {
		errno = EBADF;
		return -1;
	}
	return fsync(*fd);
}

// vh5j_dup_fd is a duplicate of file's descriptor (close it), or -1 with errno set: for a
// call that must not hold the HDF5 lock while it runs.
int vh5j_dup_fd(hid_t file) {
	int *fd;
	(void)jfile_of(file, &fd);
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
	(void)jfile_of(file, &fd);
	if (fd == NULL) {
		errno = EBADF;
		return -1;
	}
	return *fd;
}

// vh5j_failed is the errno that stopped file's driver, 0 if it works or the file is not
// open through it.
int vh5j_failed(hid_t file) {
	jfile *f = jfile_of(file, NULL);
	return f ? f->failed : 0;
}

// vh5j_cancel stops file's driver as a failed write would (ECANCELED): nothing written
// since the last sync reaches the file, the close included. 0, or -1 (errno EBADF) if the
// file is not open through the driver.
int vh5j_cancel(hid_t file) {
	jfile *f = jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	if (!f->failed) f->failed = ECANCELED;
	return 0;
}

// vh5j_abandon readies a stopped file for its close: the writes libhdf5 makes while
// closing are dropped, as a stopped driver makes none, but answered as done, so that the
// close completes. (libhdf5 1.10 keeps the identifier of a file whose close failed, with
// its state freed, and closes it again when the library ends.) It returns the errno that
// stopped the driver, 0 (and changes nothing) if the driver works.
int vh5j_abandon(hid_t file) {
	jfile *f = jfile_of(file, NULL);
	if (!f || !f->failed) return 0;
	f->closing = 1;
	return f->failed;
}

// working is file's driver state if file is open through the driver and it has not
// stopped, else NULL with errno EBADF or the stop's.
static jfile *working(hid_t file) {
	jfile *f = jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
	} else if (f->failed) {
		errno = f->failed;
		f = NULL;
	}
	return f;
}

// vh5j_mark_publish marks the end of a sync's body (see the top): what file's next sync
// writes of what was written so far reaches the file, durably, before anything written
// from now on. Call it after H5Fflush, so that libhdf5's cache holds nothing of the body;
// every later write is held (even past base) until the sync. 0, or -1 (errno EBADF if
// the file is not open through this driver, else the stop's).
int vh5j_mark_publish(hid_t file) {
	jfile *f = working(file);
	if (!f) return -1;
	f->body = f->nops, f->marked = 1;
	f->limit = HADDR_MAX;
	return 0;
}

// vh5j_guard makes file's next sync a guarded one (see the top), if it changes the file's
// durable bytes. 0, or -1 (errno EBADF if the file is not open through this driver, else the
// stop's).
int vh5j_guard(hid_t file) {
	jfile *f = working(file);
	if (!f) return -1;
	f->guard = 1;
	return 0;
}

// vh5j_kill_at makes the process kill itself (SIGKILL) just before the n-th system call of
// file's syncs that writes, syncs, creates or removes a file, counted from now: crash
// tests place a kill at every moment of a sync with it. 0 turns it off. 0, or -1 (EBADF).
int vh5j_kill_at(hid_t file, unsigned long n) {
	jfile *f = jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	f->kill_at = n, f->ticks = 0;
	return 0;
}

// vh5j_set_hold_budget makes file's driver keep at most budget bytes of held writes in
// memory (the rest go to its spill file) and, with piece > 0, its syncs compose, read and
// write piece bytes at a time (at least PIECE_MIN): for tests. 0, or -1 (EBADF).
int vh5j_set_hold_budget(hid_t file, size_t budget, size_t piece) {
	jfile *f = jfile_of(file, NULL);
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
	jfile *f = jfile_of(file, NULL);
	*held = f ? f->held_mem : 0;
	return f ? f->spilled : 0;
}

// vh5j_set_recover_piece makes recovery read and write piece bytes at a time (at least
// PIECE_MIN; 0 restores the default): for tests, under the HDF5 lock.
void vh5j_set_recover_piece(size_t piece) {
	if (piece == 0) piece = RECOVER_PIECE;
	recover_piece = piece < PIECE_MIN ? PIECE_MIN : piece;
}

// Recovery. It keeps in memory the journal's range list and a few buffers of one piece
// (recover_piece): it reads the journal, the file's bytes and the other part's from the
// files, a piece at a time, rather than mapping the journal (whose pages a process's
// resident size counts as it reads them).

// replay rolls the complete journal v, open at jfd, forward over the file at path (see the
// top): VH5J_REPLAYED, VH5J_APPLIED (nothing to do), VH5J_CHANGED (left alone), or -1. It
// ranks v's ranges as it checks them.
static int replay(const char *path, jview *v, int jfd) {
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) return -1;
	int rc = -1;
	size_t P = recover_piece;
	// The file's bytes, the range's new and old ones, the other part's over them.
	unsigned char *cur = malloc(4 * P), *nw = cur + P, *od = cur + 2 * P, *ob = cur + 3 * P;
	struct stat st;
	if (!cur || fstat(fd, &st) < 0) goto done;
	if ((uint64_t)st.st_dev != v->dev || (uint64_t)st.st_ino != v->ino) {
		rc = VH5J_CHANGED;  // another file now has the name
		goto done;
	}
	uint64_t len = (uint64_t)st.st_size, nr = v->nbody + v->npublish;
	jrange *body = v->r, *pub = v->r + v->nbody;
	// A guarded sync's signature holds the guard's mark (a crash between its guard and
	// unguard steps) or the signature; the check below takes the mark for the signature.
	int marked = 0;
	if (v->guard) {
		unsigned char sig[8];
		size_t got;
		if (read_got(fd, sig, 8, (off_t)(v->guard - 1), &got) < 0) goto done;
		marked = got == 8 && memcmp(sig, guard_mark, 8) == 0;
		if (!marked && (got < 8 || memcmp(sig, hdf5_signature, 8) != 0)) {
			rc = VH5J_CHANGED;
			goto done;
		}
	}
	// Each byte must hold a value the sync gives it in turn: the old one, the body's, or
	// the new one (a body byte the publish changes again may already hold the publish's).
	int all_new = 1, old_or_new = 1;
	for (uint64_t i = 0; i < nr && old_or_new; i++) {
		jrange *r = &v->r[i];
		int in_body = i < v->nbody, zero = 1;
		const jrange *other = in_body ? pub : body;  // the other part, sorted
		uint64_t nother = in_body ? v->npublish : v->nbody;
		unsigned char head[8] = {0};
		for (uint64_t done = 0; done < r->len && old_or_new;) {
			size_t k = min_size(r->len - done, P), got;
			uint64_t a = r->addr + done, end = a + k;
			if (read_got(fd, cur, k, (off_t)a, &got) < 0) goto done;
			if (got < k) {
				old_or_new = all_new = 0;
				break;
			}
			if (marked) overlay(cur, a, k, v->guard - 1, hdf5_signature);
			if (read_whole(jfd, nw, k, (off_t)(r->at + r->len + done)) < 0 ||
			    read_whole(jfd, od, k, (off_t)(r->at + done)) < 0)
				goto done;
			if (done == 0) memcpy(head, nw, min_size(k, 8));
			if (zero) zero = all_zero(od, k);
			// Segments of the piece: each covered by one range of the other part, or by none.
			uint64_t j = first_past(other, nother, a);
			for (uint64_t pos = a; pos < end && old_or_new;) {
				const jrange *o = j < nother && other[j].addr <= pos ? &other[j] : NULL;
				uint64_t seg = end;
				if (o && o->addr + o->len < seg) seg = o->addr + o->len;
				if (!o && j < nother && other[j].addr < seg) seg = other[j].addr;
				size_t s0 = (size_t)(pos - a), s1 = (size_t)(seg - a);
				// A body byte may hold the publish's new value; a publish byte the body's old.
				if (o && read_whole(jfd, ob + s0, s1 - s0, (off_t)(o->at + (in_body ? o->len : 0) + (pos - o->addr))) < 0)
					goto done;
				for (size_t b = s0; b < s1; b++) {
					if (cur[b] == nw[b]) continue;
					if (in_body && o && cur[b] == ob[b]) continue;  // published already
					all_new = 0;
					if (cur[b] != od[b] && !(!in_body && o && cur[b] == ob[b])) {
						old_or_new = 0;
						break;
					}
				}
				pos = seg;
				if (o && seg == o->addr + o->len) j++;
			}
			done += k;
		}
		r->rank = apply_rank(r->addr, r->len, zero, head);  // used only once every range is checked whole
	}
	if (all_new) {
		// Applied already (the crash came after the apply): at most the truncation and the
		// unguard are left.
		if (len == v->len_now && v->len_new < v->len_now && (ftruncate(fd, (off_t)v->len_new) < 0 || fsync(fd) < 0))
			goto done;
		if (marked && (write_all(fd, hdf5_signature, 8, (off_t)(v->guard - 1)) < 0 || fsync(fd) < 0)) goto done;
		rc = VH5J_APPLIED;
		goto done;
	}
	if (!old_or_new || (len != v->len_now && len != v->len_new)) {
		rc = VH5J_CHANGED;
		goto done;
	}
	// As the sync does: guarded throughout, if it was, and the body durable before the publish.
	if (v->guard && !marked && (write_all(fd, guard_mark, 8, (off_t)(v->guard - 1)) < 0 || fsync(fd) < 0)) goto done;
	if (write_part(NULL, fd, jfd, body, v->nbody, P, v->guard) < 0 ||
	    (v->npublish && (fsync(fd) < 0 || write_part(NULL, fd, jfd, pub, v->npublish, P, v->guard) < 0)))
		goto done;
	if ((len != v->len_new && ftruncate(fd, (off_t)v->len_new) < 0) || fsync(fd) < 0) goto done;
	if (v->guard && (write_all(fd, hdf5_signature, 8, (off_t)(v->guard - 1)) < 0 || fsync(fd) < 0)) goto done;
	rc = VH5J_REPLAYED;
done:;
	int e = errno;
	free(cur);
	close(fd);
	errno = e;
	return rc;
}

// legacy_rollback undoes a sync that an earlier version's undo journal, open at jfd (n
// bytes), records, as those versions did: VH5J_ROLLED_BACK, or VH5J_INCOMPLETE if it is not
// complete, or -1. It reads the journal a piece at a time.
static int legacy_rollback(const char *path, int jfd, uint64_t n) {
	uint64_t off = 8 + 16, hdr[2];
	char magic[8];
	if (n < off + 8) return VH5J_INCOMPLETE;
	if (read_whole(jfd, magic, 8, 0) < 0 || read_whole(jfd, hdr, 16, 8) < 0) return -1;
	if (memcmp(magic, legacy_magic, 8) != 0) return VH5J_INCOMPLETE;
	for (uint64_t i = 0; i < hdr[1]; i++) {
		uint64_t rh[2];
		if (n - 8 < off + 16) return VH5J_INCOMPLETE;
		if (read_whole(jfd, rh, 16, (off_t)off) < 0) return -1;
		if (rh[1] > n - 8 - off - 16) return VH5J_INCOMPLETE;
		off += 16 + rh[1];
	}
	if (off + 8 != n) return VH5J_INCOMPLETE;
	size_t P = recover_piece;
	unsigned char *buf = malloc(P);
	if (!buf) return -1;
	int fd = -1, rc = -1;
	uint64_t h = 14695981039346656037ULL, want;
	for (uint64_t at = 0; at < off; at += P) {
		size_t k = min_size(off - at, P);
		if (read_whole(jfd, buf, k, (off_t)at) < 0) goto done;
		for (size_t i = 0; i < k; i++) h = (h ^ buf[i]) * 1099511628211ULL;
	}
	if (read_whole(jfd, &want, 8, (off_t)off) < 0) goto done;
	if (h != want) {
		rc = VH5J_INCOMPLETE;
		goto done;
	}
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) < 0) goto done;
	off = 8 + 16;
	for (uint64_t i = 0; i < hdr[1]; i++) {
		uint64_t rh[2];
		if (read_whole(jfd, rh, 16, (off_t)off) < 0) goto done;
		for (uint64_t done = 0; done < rh[1]; done += P) {
			size_t k = min_size(rh[1] - done, P);
			if (read_whole(jfd, buf, k, (off_t)(off + 16 + done)) < 0 || write_all(fd, buf, k, (off_t)(rh[0] + done)) < 0)
				goto done;
		}
		off += 16 + rh[1];
	}
	if (ftruncate(fd, (off_t)hdr[0]) == 0 && fsync(fd) == 0) rc = VH5J_ROLLED_BACK;
done:;
	int e = errno;
	if (fd >= 0) close(fd);
	free(buf);
	errno = e;
	return rc;
}

// open_size opens path read-only and gives its size: the descriptor, or -1 (errno).
static int open_size(const char *path, uint64_t *n) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0) return -1;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	*n = (uint64_t)st.st_size;
	return fd;
}

// vh5j_recover finishes what a journal beside path records (see the top): VH5J_NONE (no
// journal), VH5J_INCOMPLETE (removed), VH5J_REPLAYED, VH5J_APPLIED (removed), VH5J_CHANGED
// (nothing done; the journal stays), VH5J_ROLLED_BACK (an earlier version's undo journal,
// only with legacy), or -1 (errno set). legacy=0 leaves an undo journal alone and reports
// VH5J_LEGACY.
int vh5j_recover(const char *path, int legacy) {
	char *jpath = suffixed(path, JOURNAL_SUFFIX), *upath = suffixed(path, LEGACY_SUFFIX);
	int jfd = -1, rc = -1;
	uint64_t n = 0;
	if (!jpath || !upath) goto done;
	const char *which = jpath;
	if ((jfd = open_size(jpath, &n)) < 0) {
		if (errno != ENOENT) goto done;
		which = upath;
		if ((jfd = open_size(upath, &n)) < 0) {
			rc = errno == ENOENT ? VH5J_NONE : -1;
			goto done;
		}
		if (!legacy) {
			rc = VH5J_LEGACY;
			goto done;
		}
		rc = legacy_rollback(path, jfd, n);
	} else {
		jview v;
		rc = read_journal(jfd, n, recover_piece, &v);
		if (rc == 1) {
			rc = replay(path, &v, jfd);
			int e = errno;
			free(v.r);
			errno = e;
		} else if (rc == 0) {
			rc = VH5J_INCOMPLETE;
		}
	}
	if (rc == VH5J_INCOMPLETE || rc == VH5J_REPLAYED || rc == VH5J_APPLIED || rc == VH5J_ROLLED_BACK) {
		if (unlink(which) < 0 || fsync_dir(which) < 0) rc = -1;
	}
done:;
	int e = errno;
	if (jfd >= 0) close(jfd);
	free(jpath);
	free(upath);
	errno = e;
	return rc;
}

// vh5j_discard removes path's journal (either kind) without acting on it: 1 if there was
// one, 0 if not, -1 (errno set).
int vh5j_discard(const char *path) {
	int found = 0;
	const char *suffixes[2] = {JOURNAL_SUFFIX, LEGACY_SUFFIX};
	for (int i = 0; i < 2; i++) {
		char *p = suffixed(path, suffixes[i]);
		if (!p) return -1;
		int rc = unlink(p);
		if (rc == 0) {
			found = 1;
			rc = fsync_dir(p);
		} else if (errno == ENOENT) {
			rc = 0;
		}
		int e = errno;
		free(p);
		errno = e;
		if (rc < 0) return -1;
	}
	return found;
}

// vh5j_pending reports whether path has a journal beside it, of either kind (1), not (0),
// or -1.
int vh5j_pending(const char *path) {
	const char *suffixes[2] = {JOURNAL_SUFFIX, LEGACY_SUFFIX};
	for (int i = 0; i < 2; i++) {
		char *p = suffixed(path, suffixes[i]);
		if (!p) return -1;
		struct stat st;
		int rc = stat(p, &st) == 0 ? 1 : (errno == ENOENT ? 0 : -1);
		free(p);
		if (rc != 0) return rc;
	}
	return 0;
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
	jfile *f = jfile_of(file, NULL);
	return f ? f->eoa : 0;
}

// vh5j_read and vh5j_write read and write file's bytes as libhdf5 does through this
// driver (held writes included): 0, or -1 (errno set).
int vh5j_read(hid_t file, haddr_t addr, size_t n, void *buf) {
	jfile *f = jfile_of(file, NULL);
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
	jfile *f = jfile_of(file, NULL);
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
	if (f->guarding && f->guarding - 1 < end && addr < f->guarding - 1 + sizeof hdf5_signature) return 0;
	return 1;
}

int vh5j_write(hid_t file, haddr_t addr, size_t n, const void *buf) {
	jfile *f = jfile_of(file, NULL);
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
	jfile *f = jfile_of(file, NULL);
	if (!f || f->failed || n == 0) {
		errno = !f ? EBADF : f->failed ? f->failed : EINVAL;
		return -1;
	}
	if (push_op(f, addr, n, buf) < 0) return stop(f);
	*at = f->nops - 1;
	return 0;
}

// vh5j_retract removes the held operation at place at, which vh5j_hold made (at addr, of n
// bytes): what libhdf5 reads there is again what the other operations and the file hold.
// Retract in the reverse order of the holds. 0, or -1 (errno EINVAL if the operation at at
// is not that one).
int vh5j_retract(hid_t file, size_t at, haddr_t addr, size_t n) {
	jfile *f = jfile_of(file, NULL);
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
	jfile *f = jfile_of(file, NULL);
	if (!f || f->eoa + n < f->eoa || f->eoa + n > journal_class.maxaddr) {
		errno = f ? EFBIG : EBADF;
		return -1;
	}
	*addr = f->eoa;
	f->eoa += n;
	return 0;
}
