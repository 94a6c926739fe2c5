// The journal driver, part 3 of 3: recovery, which finishes or removes the journal a sync
// (vh5j_sync.c, whose top comment says when a journal is rolled forward) left beside a file.
#include "vh5j_private.h"

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEGACY_SUFFIX ".vh5fs-undo"  // the undo journal of earlier versions
static const char journal_magic2[8] = {'V', 'H', '5', 'R', 'E', 'D', 'O', '2'};  // no guard word
static const char journal_magic1[8] = {'V', 'H', '5', 'R', 'E', 'D', 'O', '1'};  // no publish part
static const char legacy_magic[8] = {'V', 'H', '5', 'U', 'N', 'D', 'O', '1'};

// recover_piece is RECOVER_PIECE unless a test set it (vh5j_set_recover_piece); recovery
// and the setter run under the HDF5 lock.
static size_t recover_piece = RECOVER_PIECE < PIECE_MIN ? PIECE_MIN : RECOVER_PIECE;

// vh5j_set_recover_piece makes recovery read and write piece bytes at a time (at least
// PIECE_MIN; 0 restores the default): for tests, under the HDF5 lock.
void vh5j_set_recover_piece(size_t piece) {
	if (piece == 0) piece = RECOVER_PIECE;
	recover_piece = piece < PIECE_MIN ? PIECE_MIN : piece;
}

// crc_of is the CRC-32 of the first n bytes of the file at fd, read a piece at a time.
static int crc_of(int fd, uint64_t n, size_t piece, uint32_t *crc) {
	unsigned char *buf = malloc(vh5j__min_size(n, piece) + 1);
	if (!buf) return -1;
	uint32_t c = 0;
	int rc = 0;
	for (uint64_t off = 0; off < n && rc == 0; off += piece) {
		size_t k = vh5j__min_size(n - off, piece);
		rc = vh5j__read_whole(fd, buf, k, (off_t)off);
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

// read_journal reads the journal open at jfd (n bytes) into v if it is a whole journal
// (magic, sizes, checksum), of this version or an earlier one (VH5REDO2, VH5REDO1): 1, 0 if it
// is not whole, -1 (errno). It keeps the ranges' places, not their bytes: its memory is the
// range list and one piece.
static int read_journal(int jfd, uint64_t n, size_t piece, jview *v) {
	char magic[8];
	size_t words = 0;
	if (n >= 8 && vh5j__read_whole(jfd, magic, 8, 0) < 0) return -1;
	if (n >= 8 && memcmp(magic, vh5j__journal_magic, 8) == 0) words = HDR_WORDS;
	if (n >= 8 && memcmp(magic, journal_magic2, 8) == 0) words = HDR_WORDS - 1;
	if (n >= 8 && memcmp(magic, journal_magic1, 8) == 0) words = HDR_WORDS - 2;
	uint64_t off = 8 + 8 * words;
	if (words == 0 || n < off + 8) return 0;
	uint64_t hdr[HDR_WORDS] = {0};
	if (vh5j__read_whole(jfd, hdr, 8 * words, 8) < 0) return -1;
	if (hdr[5] != n || hdr[4] > n / 16 || hdr[6] > n / 16) return 0;
	*v = (jview){hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[6], n, NULL, hdr[7]};
	if (v->guard && !signature_place(v->guard - 1)) return 0;
	uint64_t nr = hdr[4] + hdr[6];
	if (!(v->r = malloc((nr ? nr : 1) * sizeof *v->r))) return -1;
	for (uint64_t i = 0; i < nr; i++) {
		uint64_t rh[2];
		if (n - 8 - off < 16) goto torn;
		if (vh5j__read_whole(jfd, rh, 16, (off_t)off) < 0) goto fail;
		if (rh[1] > (n - 8 - off - 16) / 2) goto torn;
		v->r[i] = (jrange){rh[0], rh[1], off + 16, 0, 0};
		off += 16 + 2 * rh[1];
	}
	if (off + 8 != n) goto torn;
	uint32_t crc[2], want;
	if (vh5j__read_whole(jfd, crc, 8, (off_t)off) < 0 || crc_of(jfd, off, piece, &want) < 0) goto fail;
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
		if (vh5j__read_got(fd, sig, 8, (off_t)(v->guard - 1), &got) < 0) goto done;
		marked = got == 8 && memcmp(sig, vh5j__guard_mark, 8) == 0;
		if (!marked && (got < 8 || memcmp(sig, vh5j__hdf5_signature, 8) != 0)) {
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
			size_t k = vh5j__min_size(r->len - done, P), got;
			uint64_t a = r->addr + done, end = a + k;
			if (vh5j__read_got(fd, cur, k, (off_t)a, &got) < 0) goto done;
			if (got < k) {
				old_or_new = all_new = 0;
				break;
			}
			if (marked) vh5j__overlay(cur, a, k, v->guard - 1, vh5j__hdf5_signature);
			if (vh5j__read_whole(jfd, nw, k, (off_t)(r->at + r->len + done)) < 0 ||
			    vh5j__read_whole(jfd, od, k, (off_t)(r->at + done)) < 0)
				goto done;
			if (done == 0) memcpy(head, nw, vh5j__min_size(k, 8));
			if (zero) zero = vh5j__all_zero(od, k);
			// Segments of the piece: each covered by one range of the other part, or by none.
			uint64_t j = first_past(other, nother, a);
			for (uint64_t pos = a; pos < end && old_or_new;) {
				const jrange *o = j < nother && other[j].addr <= pos ? &other[j] : NULL;
				uint64_t seg = end;
				if (o && o->addr + o->len < seg) seg = o->addr + o->len;
				if (!o && j < nother && other[j].addr < seg) seg = other[j].addr;
				size_t s0 = (size_t)(pos - a), s1 = (size_t)(seg - a);
				// A body byte may hold the publish's new value; a publish byte the body's old.
				if (o && vh5j__read_whole(jfd, ob + s0, s1 - s0, (off_t)(o->at + (in_body ? o->len : 0) + (pos - o->addr))) < 0)
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
		r->rank = vh5j__apply_rank(r->addr, r->len, zero, head);  // used only once every range is checked whole
	}
	if (all_new) {
		// Applied already (the crash came after the apply): at most the truncation and the
		// unguard are left.
		if (len == v->len_now && v->len_new < v->len_now && (ftruncate(fd, (off_t)v->len_new) < 0 || fsync(fd) < 0))
			goto done;
		if (marked && (vh5j__write_all(fd, vh5j__hdf5_signature, 8, (off_t)(v->guard - 1)) < 0 || fsync(fd) < 0)) goto done;
		rc = VH5J_APPLIED;
		goto done;
	}
	if (!old_or_new || (len != v->len_now && len != v->len_new)) {
		rc = VH5J_CHANGED;
		goto done;
	}
	// As the sync does: guarded throughout, if it was, and the body durable before the publish.
	if (v->guard && !marked && (vh5j__write_all(fd, vh5j__guard_mark, 8, (off_t)(v->guard - 1)) < 0 || fsync(fd) < 0)) goto done;
	if (vh5j__write_part(NULL, fd, jfd, body, v->nbody, P, v->guard) < 0 ||
	    (v->npublish && (fsync(fd) < 0 || vh5j__write_part(NULL, fd, jfd, pub, v->npublish, P, v->guard) < 0)))
		goto done;
	if ((len != v->len_new && ftruncate(fd, (off_t)v->len_new) < 0) || fsync(fd) < 0) goto done;
	if (v->guard && (vh5j__write_all(fd, vh5j__hdf5_signature, 8, (off_t)(v->guard - 1)) < 0 || fsync(fd) < 0)) goto done;
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
	if (vh5j__read_whole(jfd, magic, 8, 0) < 0 || vh5j__read_whole(jfd, hdr, 16, 8) < 0) return -1;
	if (memcmp(magic, legacy_magic, 8) != 0) return VH5J_INCOMPLETE;
	for (uint64_t i = 0; i < hdr[1]; i++) {
		uint64_t rh[2];
		if (n - 8 < off + 16) return VH5J_INCOMPLETE;
		if (vh5j__read_whole(jfd, rh, 16, (off_t)off) < 0) return -1;
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
		size_t k = vh5j__min_size(off - at, P);
		if (vh5j__read_whole(jfd, buf, k, (off_t)at) < 0) goto done;
		for (size_t i = 0; i < k; i++) h = (h ^ buf[i]) * 1099511628211ULL;
	}
	if (vh5j__read_whole(jfd, &want, 8, (off_t)off) < 0) goto done;
	if (h != want) {
		rc = VH5J_INCOMPLETE;
		goto done;
	}
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) < 0) goto done;
	off = 8 + 16;
	for (uint64_t i = 0; i < hdr[1]; i++) {
		uint64_t rh[2];
		if (vh5j__read_whole(jfd, rh, 16, (off_t)off) < 0) goto done;
		for (uint64_t done = 0; done < rh[1]; done += P) {
			size_t k = vh5j__min_size(rh[1] - done, P);
			if (vh5j__read_whole(jfd, buf, k, (off_t)(off + 16 + done)) < 0 || vh5j__write_all(fd, buf, k, (off_t)(rh[0] + done)) < 0)
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
	char *jpath = vh5j__suffixed(path, JOURNAL_SUFFIX), *upath = vh5j__suffixed(path, LEGACY_SUFFIX);
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
		if (unlink(which) < 0 || vh5j__fsync_dir(which) < 0) rc = -1;
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
		char *p = vh5j__suffixed(path, suffixes[i]);
		if (!p) return -1;
		int rc = unlink(p);
		if (rc == 0) {
			found = 1;
			rc = vh5j__fsync_dir(p);
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
		char *p = vh5j__suffixed(path, suffixes[i]);
		if (!p) return -1;
		struct stat st;
		int rc = stat(p, &st) == 0 ? 1 : (errno == ENOENT ? 0 : -1);
		free(p);
		if (rc != 0) return rc;
	}
	return 0;
}
