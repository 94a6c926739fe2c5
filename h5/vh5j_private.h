// The journal driver's private header, for its three parts and their helpers only:
// vh5j_driver.c (libhdf5's driver, the held operations, the spill file), vh5j_sync.c (the
// sync and the journal it writes), vh5j_recover.c (recovery) and vh5j_util.c (what they
// all use). "The top" in their comments is the top of vh5j_sync.c: the crash contract.
// vh5j__ names are shared by the parts and by nothing else; what one part alone uses stays
// static there. Include this first: it sets _GNU_SOURCE for every part alike.
#ifndef VH5J_PRIVATE_H
#define VH5J_PRIVATE_H

#define _GNU_SOURCE  // O_TMPFILE, mkostemp
#include "vh5.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define JOURNAL_SUFFIX ".vh5fs-journal"

// Journal layout (native byte order: it never leaves the machine that wrote it):
//   magic[8] | u64 dev, ino, len_now, len_new, nbody, total, npublish, guard | nbody x (u64 off,
//   len; old[len]; new[len]) of the body | npublish x the same of the publish, whose old
//   bytes are the body's result | u32 crc32 of everything before, u32 0
// guard is 0, or 1 + the offset of the HDF5 signature a guarded sync marks. Within each
// part the ranges are sorted and disjoint. Earlier versions wrote VH5REDO2 journals, without
// guard, and VH5REDO1 journals, without npublish either, and its part; recovery reads them.
#define HDR_WORDS 8
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
	int fd;      // get_handle returns &fd, as sec2 does (vh5j__jfile_of finds the driver from it)
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

// A journal's range as the apply and recovery know it: where its bytes are in the journal
// (its old bytes at at, its new ones at at + len) and its place in vh5j__write_part's order.
typedef struct {
	uint64_t addr, len, at;
	unsigned rank;  // vh5j__apply_rank's
	int nonzero;    // while a sync writes the journal: its old bytes seen so far are not all zeros
} jrange;

// A journal: its header and its ranges, the body's then the publish's, each part sorted by
// address.
typedef struct {
	uint64_t dev, ino, len_now, len_new, nbody, npublish, total;
	jrange *r;       // nbody + npublish
	uint64_t guard;  // 0, or 1 + the offset of the signature a guarded sync marks
} jview;

// vh5j_util.c: what every part uses: system calls, the held operations' bytes, the
// driver's fail-stop, the HDF5 signature, the open files.
extern const unsigned char vh5j__hdf5_signature[8];
char *vh5j__suffixed(const char *path, const char *suffix);
int vh5j__fsync_dir(const char *path);
int vh5j__write_all(int fd, const void *buf, size_t n, off_t off);
int vh5j__read_got(int fd, void *buf, size_t n, off_t off, size_t *got);
int vh5j__read_all(int fd, void *buf, size_t n, off_t off);
int vh5j__read_whole(int fd, void *buf, size_t n, off_t off);
size_t vh5j__min_size(uint64_t a, uint64_t b);
void vh5j__drop_ops(jfile *f, size_t n);
int vh5j__stop(jfile *f);
int vh5j__op_bytes(const source *src, const held_op *op, size_t at, size_t n, unsigned char *out);
void vh5j__overlay(unsigned char *buf, uint64_t addr, size_t size, uint64_t at, const unsigned char *sig);
void vh5j__opened(jfile *f);
void vh5j__closed(jfile *f);
jfile *vh5j__jfile_of(hid_t file, int **fd);

// vh5j_sync.c: the journal's magic, the guard's mark, the apply; the sync itself (which
// the driver's close calls: the one call from the driver into the sync).
extern const char vh5j__journal_magic[8];
extern const unsigned char vh5j__guard_mark[8];
unsigned vh5j__apply_rank(uint64_t addr, uint64_t len, int zero, const unsigned char *new);
int vh5j__all_zero(const unsigned char *p, size_t n);
int vh5j__write_part(jfile *f, int fd, int jfd, const jrange *rs, uint64_t n, size_t piece, uint64_t guard);
int vh5j__sync_now(jfile *f);

#endif
