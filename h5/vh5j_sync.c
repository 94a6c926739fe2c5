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
// unguard step the file's HDF5 signature is replaced by vh5j__guard_mark, so that every program
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
//
// This file, part 2 of 3, is the sync: its plan and steps, and the journal they write. Part 1,
// vh5j_driver.c, is libhdf5's side of the driver (its callbacks, the held operations, the
// spill file); part 3, vh5j_recover.c, is recovery. They share vh5j_private.h.
#include "vh5j_private.h"

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char vh5j__journal_magic[8] = {'V', 'H', '5', 'R', 'E', 'D', 'O', '3'};

// What a guarded sync writes over the HDF5 signature (vh5j__hdf5_signature) while it
// applies (see the top).
const unsigned char vh5j__guard_mark[8] = {0x89, 'V', 'H', '5', 'J', 'N', 'L', '\n'};

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

// find_signature sets *at to the offset of the HDF5 signature in the file at fd (len bytes),
// where libhdf5 looks for it. 0, or -1 (errno EINVAL if there is none).
static int find_signature(int fd, uint64_t len, uint64_t *at) {
	for (uint64_t off = 0; off + 8 <= len; off = off ? off * 2 : 512) {
		unsigned char b[8];
		if (vh5j__read_whole(fd, b, 8, (off_t)off) < 0) return -1;
		if (memcmp(b, vh5j__hdf5_signature, 8) == 0) {
			*at = off;
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}

// vh5j__apply_rank places a range in the order vh5j__write_part writes a part in. libhdf5
// changes its structures in place, so a reader that meets the ranges of a part half written (a
// process killed between two of them) sees whatever the ranges so far make; the order makes
// that as often as it can a state whose references all lead to bytes already in place: space
// that held nothing before (all zeros), then the superblock (its end-of-file grows), heaps,
// object headers (new ones among them) and anything else, B-tree nodes from the root down (a
// split's parent points to the new node before the old one drops its half), and last symbol
// table nodes, which link names to objects. Power loss can still keep any mixture: the fsync
// between the body and the publish, not this order, keeps the publish out of it.
// zero: the range's old bytes are all zeros; new: its first min(len, 6) new bytes.
unsigned vh5j__apply_rank(uint64_t addr, uint64_t len, int zero, const unsigned char *new) {
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

int vh5j__all_zero(const unsigned char *p, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (p[i]) return 0;
	return 1;
}

static int cmp_ranked(const void *a, const void *b) {
	const jrange *x = *(const jrange *const *)a, *y = *(const jrange *const *)b;
	if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

// vh5j__write_part writes the new bytes of n ranges over fd, in their ranks' order, reading them
// from the journal at jfd a piece at a time (f, if not NULL, counts the writes for crash
// tests: one per range); with guard (1 + the signature's offset), the guard's mark stays
// where a range rewrites the signature. 0 or -1.
int vh5j__write_part(jfile *f, int fd, int jfd, const jrange *rs, uint64_t n, size_t piece, uint64_t guard) {
	uint64_t longest = 0;
	for (uint64_t i = 0; i < n; i++)
		if (rs[i].len > longest) longest = rs[i].len;
	const jrange **o = malloc((n ? n : 1) * sizeof *o);
	unsigned char *buf = malloc(vh5j__min_size(longest, piece) + 1);
	int rc = o && buf ? 0 : -1;
	if (rc == 0) {
		for (uint64_t i = 0; i < n; i++) o[i] = &rs[i];
		qsort(o, n, sizeof *o, cmp_ranked);
	}
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		if (f) tick(f);
		const jrange *r = o[i];
		for (uint64_t done = 0; done < r->len && rc == 0;) {
			size_t k = vh5j__min_size(r->len - done, piece);
			rc = vh5j__read_whole(jfd, buf, k, (off_t)(r->at + r->len + done));
			if (rc == 0 && guard) vh5j__overlay(buf, r->addr + done, k, guard - 1, vh5j__guard_mark);
			if (rc == 0) rc = vh5j__write_all(fd, buf, k, (off_t)(r->addr + done));
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
		if (vh5j__read_all(src->fd, out + ps[i].at, ps[i].hi - ps[i].lo, (off_t)ps[i].lo) < 0) return -1;
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
			else if (vh5j__op_bytes(src, op, x - op->addr, y - x, out + ps[k].at + (x - ps[k].lo)) < 0) return -1;
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
	ok = (s->fd = dup(f->fd)) >= 0 && (s->jpath = vh5j__suffixed(f->path, JOURNAL_SUFFIX));
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
	size_t cap = vh5j__min_size(s->ntail, s->piece) + 1;
	unsigned char *buf = malloc(vh5j__min_size(total, s->piece) + 1);
	piece *ps = malloc(cap * sizeof *ps);
	int rc = buf && ps ? 0 : -1;
	size_t i = 0;
	haddr_t lo = s->ntail ? s->tail[0].lo : 0;
	while (i < s->ntail && rc == 0) {
		size_t m = 0, pos = 0;
		while (i < s->ntail && pos < s->piece) {
			size_t k = vh5j__min_size(s->tail[i].hi - lo, s->piece - pos);
			ps[m++] = (piece){lo, lo + k, pos, i};
			pos += k, lo += k;
			if (lo == s->tail[i].hi && ++i < s->ntail) lo = s->tail[i].lo;
		}
		rc = compose(&s->src, s->nb, s->len_new, ps, m, buf);
		for (size_t j = 0; j < m && rc == 0; j++) {
			if (ps[j].lo == s->tail[ps[j].ri].lo) tick(s->f);
			rc = vh5j__write_all(s->fd, buf + ps[j].at, ps[j].hi - ps[j].lo, (off_t)ps[j].lo);
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
// vh5j__apply_rank needs of them, and writes buf to the journal, its CRC into *crc.
static int flush_journal(vh5j_sync *s, unsigned char *buf, size_t pos, piece *ls[4], size_t ln[4], uint64_t *at,
                         uint32_t *crc) {
	size_t nops[4] = {0, s->nb, s->nb, s->nops};  // old body: the file's bytes; old publish: the body's result
	for (int k = 0; k < 4; k++)
		if (compose(&s->src, nops[k], s->len_new, ls[k], ln[k], buf) < 0) return -1;
	for (int k = OLD_BODY; k <= OLD_PUB; k += 2)
		for (size_t i = 0; i < ln[k]; i++)
			if (!vh5j__all_zero(buf + ls[k][i].at, ls[k][i].hi - ls[k][i].lo)) s->v.r[ls[k][i].ri].nonzero = 1;
	for (int k = NEW_BODY; k <= NEW_PUB; k += 2)
		for (size_t i = 0; i < ln[k]; i++) {  // a range's old bytes all come before its new ones
			jrange *r = &s->v.r[ls[k][i].ri];
			if (ls[k][i].lo == r->addr) r->rank = vh5j__apply_rank(r->addr, r->len, !r->nonzero, buf + ls[k][i].at);
		}
	*crc = libdeflate_crc32(*crc, buf, pos);
	if (vh5j__write_all(s->jfd, buf, pos, (off_t)*at) < 0) return -1;
	*at += pos;
	for (int k = 0; k < 4; k++) ln[k] = 0;
	return 0;
}

// write_journal writes the journal (see its layout) to s->jfd in order, a buffer of one
// piece at a time, and ranks its ranges for vh5j__write_part.
static int write_journal(vh5j_sync *s) {
	uint64_t nr = s->v.nbody + s->v.npublish;
	size_t cap = vh5j__min_size(nr, s->piece / 16 + 1) + 1, P = s->piece;
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
		memcpy(buf, vh5j__journal_magic, 8);
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
			// The first bytes of each in one piece: vh5j__apply_rank reads the new ones'.
			if (P - pos < vh5j__min_size(r->len, 8)) {
				if ((rc = flush_journal(s, buf, pos, ls, ln, &at, &crc)) < 0) break;
				pos = 0;
			}
			for (uint64_t done = 0; done < r->len;) {
				if (pos == P) {
					if ((rc = flush_journal(s, buf, pos, ls, ln, &at, &crc)) < 0) break;
					pos = 0;
				}
				size_t n = vh5j__min_size(r->len - done, P - pos);
				ls[k][ln[k]++] = (piece){r->addr + done, r->addr + done + n, pos, (size_t)i};
				pos += n, done += n;
			}
		}
	}
	if (rc == 0) rc = flush_journal(s, buf, pos, ls, ln, &at, &crc);
	if (rc == 0) {
		uint32_t tail[2] = {crc, 0};
		rc = vh5j__write_all(s->jfd, tail, 8, (off_t)at);
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
		return vh5j__fsync_dir(s->jpath);
	case VH5J_GUARD:
	case VH5J_UNGUARD:
		tick(f);
		if (vh5j__write_all(s->fd, step == VH5J_GUARD ? vh5j__guard_mark : vh5j__hdf5_signature, 8, (off_t)(s->v.guard - 1)) < 0) return -1;
		tick(f);
		return fsync(s->fd);
	case VH5J_APPLY:
		if (vh5j__write_part(f, s->fd, s->jfd, s->v.r, s->v.nbody, s->piece, s->v.guard) < 0) return -1;
		return s->v.npublish ? 0 : set_length(f, s->fd, &s->v);
	case VH5J_PUBLISH:
		if (vh5j__write_part(f, s->fd, s->jfd, s->v.r + s->v.nbody, s->v.npublish, s->piece, s->v.guard) < 0) return -1;
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

static vh5j_sync *sync_begin(jfile *f);

// vh5j__sync_now makes everything held durable in one go (for close, under the HDF5 lock).
int vh5j__sync_now(jfile *f) {
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
		vh5j__stop(f);
		return NULL;
	}
	f->limit = HADDR_MAX;
	f->guarding = s->v.guard;
	return s;
}

// vh5j_sync_begin_file is sync_begin for an open file: NULL with errno EBADF if it is
// not open through this driver.
vh5j_sync *vh5j_sync_begin_file(hid_t file) {
	jfile *f = vh5j__jfile_of(file, NULL);
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
		vh5j__stop(f);
	} else if (s->step >= VH5J_DONE && !f->failed) {
		vh5j__drop_ops(f, s->nops);
		if (f->marked && f->body > s->nops) f->body -= s->nops; else f->marked = 0;
		struct stat st;
		if (fstat(f->fd, &st) < 0) {
			vh5j__stop(f);
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
	if (vh5j__jfile_of(file, &fd)) {
		errno = EINVAL;
		return -1;
	}
	if (fd == NULL) {
		errno = EBADF;
		return -1;
	}
	return fsync(*fd);
}

// vh5j_cancel stops file's driver as a failed write would (ECANCELED): nothing written
// since the last sync reaches the file, the close included. 0, or -1 (errno EBADF) if the
// file is not open through the driver.
int vh5j_cancel(hid_t file) {
	jfile *f = vh5j__jfile_of(file, NULL);
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
	jfile *f = vh5j__jfile_of(file, NULL);
	if (!f || !f->failed) return 0;
	f->closing = 1;
	return f->failed;
}

// working is file's driver state if file is open through the driver and it has not
// stopped, else NULL with errno EBADF or the stop's.
static jfile *working(hid_t file) {
	jfile *f = vh5j__jfile_of(file, NULL);
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
	jfile *f = vh5j__jfile_of(file, NULL);
	if (!f) {
		errno = EBADF;
		return -1;
	}
	f->kill_at = n, f->ticks = 0;
	return 0;
}
