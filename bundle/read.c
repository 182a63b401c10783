/*
 * read.c — check a bundle against every rule of docs/bundle.md §1, each
 * failure its own message naming the field or section, then parse the
 * manifest and cross-check it with the sections.
 *
 * Every byte of a valid bundle is covered by a CRC (header, table, section
 * data) or must be zero (reserved fields, padding), so flipping any single
 * byte makes the check fail.  Nothing is allocated before sizes are known.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bundle.h"

#define MAXFILE ((uint64_t)1 << 40)	/* larger files are refused unread */

static int
bad(Diag *d, const char *file, const char *field, const char *fmt, ...)
{
	Loc l = loc_file(file);
	va_list ap;

	l.name = field;
	va_start(ap, fmt);
	diag_verror(d, l, fmt, ap);
	va_end(ap);
	return BUNDLE_EFORMAT;
}

int
bundle_parse_sm(const char *s, int *sm, int *arch)
{
	int v = 0, n = 0;

	if (strncmp(s, "sm_", 3) != 0)
		return 0;
	for (s += 3; *s >= '0' && *s <= '9' && n < 4; s++, n++)
		v = 10 * v + (*s - '0');
	if (n < 2 || n > 3 || s[-n] == '0')
		return 0;
	*arch = *s == 'a';
	if (*arch)
		s++;
	*sm = v;
	return *s == 0;
}

int
bundle_name_valid(const char *name)
{
	int sm, a;

	if (strlen(name) >= BUNDLE_NAMELEN)
		return 0;
	if (!strcmp(name, "manifest") || !strcmp(name, "report") ||
	    !strcmp(name, "weights") || !strcmp(name, "programs"))
		return 1;
	if (!strncmp(name, "ptx:", 4))
		return bundle_parse_sm(name + 4, &sm, &a);
	if (!strncmp(name, "cubin:", 6))
		return bundle_parse_sm(name + 6, &sm, &a);
	return 0;
}

/*
 * The header's fixed fields, given `have` bytes of it from a file of
 * `flen` bytes.  The version comes right after the magic so that a bundle
 * of another version is named as such, not as a checksum failure.
 */
static int
check_head(const char *file, const unsigned char *b, size_t have,
	   uint64_t flen, Diag *d)
{
	uint32_t v;

	if (have < 8 || memcmp(b, "MOEBNDL", 8) != 0)
		return have < 8 && memcmp(b, "MOEBNDL", have) == 0
			       ? bad(d, file, "header", "truncated: %zu bytes, "
				     "the header alone is 64", have)
			       : bad(d, file, "header.magic", "bad magic: not a "
				     ".moeb bundle");
	if (have < 12)
		return bad(d, file, "header", "truncated: %zu bytes, the "
			   "header alone is 64", have);
	if ((v = bundle_get32(b + 8)) != BUNDLE_VERSION && v != BUNDLE_VERSION_PROGRAMS) {
		bad(d, file, "header.version", "format version %u, this reader "
		    "supports %d and %d", v, BUNDLE_VERSION, BUNDLE_VERSION_PROGRAMS);
		return BUNDLE_EVERSION;
	}
	if (have < BUNDLE_HDRSIZE)
		return bad(d, file, "header", "truncated: %zu bytes, the header "
			   "alone is 64", have);
	if (bundle_get32(b + 44) != crc32c(0, b, 44))
		return bad(d, file, "header.crc", "header CRC mismatch (stored "
			   "0x%08x, computed 0x%08x)", bundle_get32(b + 44),
			   crc32c(0, b, 44));
	for (int i = 48; i < 64; i++)
		if (b[i])
			return bad(d, file, "header.reserved", "reserved byte "
				   "%d is not zero", i);
	if (bundle_get64(b + 16) != flen)
		return bad(d, file, "header.size", "file size field says %llu "
			   "bytes, the file has %llu",
			   (unsigned long long)bundle_get64(b + 16),
			   (unsigned long long)flen);
	return 0;
}

/* NUL-padded ASCII in n bytes, with at least one NUL. */
static int
padded(const unsigned char *s, size_t n)
{
	size_t i = 0;

	for (; i < n && s[i]; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	if (i == n || i == 0)
		return 0;
	for (; i < n; i++)
		if (s[i])
			return 0;
	return 1;
}

static int
entry(const char *file, const unsigned char *e, int i, Bundle *b, size_t len,
      Diag *d)
{
	BundleSection *s = &b->sec[i];
	uint64_t tend = BUNDLE_HDRSIZE + (uint64_t)BUNDLE_ENTSIZE * b->nsec;
	char field[48];

	snprintf(field, sizeof field, "section %d", i);
	if (!padded(e, BUNDLE_NAMELEN))
		return bad(d, file, field, "name is not NUL-padded ASCII");
	memcpy(s->name, e, BUNDLE_NAMELEN);
	snprintf(field, sizeof field, "section %d '%s'", i, s->name);
	if (!bundle_name_valid(s->name))
		return bad(d, file, field, "unknown section name");
	for (int k = 0; k < i; k++)
		if (strcmp(b->sec[k].name, s->name) == 0)
			return bad(d, file, field, "duplicate name (also "
				   "section %d)", k);
	s->off = bundle_get64(e + 32);
	s->size = bundle_get64(e + 40);
	s->crc = bundle_get32(e + 48);
	if (bundle_get32(e + 52))
		return bad(d, file, field, "flags are %u, not 0",
			   bundle_get32(e + 52));
	if (bundle_get64(e + 56))
		return bad(d, file, field, "reserved bytes are not zero");
	if (s->off % BUNDLE_ALIGN)
		return bad(d, file, field, "offset %llu is not a multiple of "
			   "%d", (unsigned long long)s->off, BUNDLE_ALIGN);
	if (s->off < tend)
		return bad(d, file, field, "offset %llu lies inside the "
			   "header or section table (they end at %llu)",
			   (unsigned long long)s->off, (unsigned long long)tend);
	if (s->off > len || s->size > len - s->off)
		return bad(d, file, field, "offset %llu + size %llu runs past "
			   "the end of the file (%zu bytes)",
			   (unsigned long long)s->off,
			   (unsigned long long)s->size, len);
	return 0;
}

/* Sections in file order; then overlaps, and padding that is not zero. */
static int
layout(const char *file, const unsigned char *buf, size_t len, Bundle *b,
       Diag *d)
{
	int ord[BUNDLE_MAXSEC], n = b->nsec;
	uint64_t pos = BUNDLE_HDRSIZE + (uint64_t)BUNDLE_ENTSIZE * n;

	for (int i = 0; i < n; i++) {
		int j = i;
		for (; j > 0 && b->sec[ord[j - 1]].off > b->sec[i].off; j--)
			ord[j] = ord[j - 1];
		ord[j] = i;
	}
	for (int k = 0; k <= n; k++) {
		uint64_t end = k < n ? b->sec[ord[k]].off : len;
		if (end < pos)
			return bad(d, file, "sections", "sections '%s' and '%s' "
				   "overlap", b->sec[ord[k - 1]].name,
				   b->sec[ord[k]].name);
		for (; pos < end; pos++)
			if (buf[pos])
				return bad(d, file, "padding", "byte %llu lies "
					   "outside every section and is not "
					   "zero", (unsigned long long)pos);
		if (k < n)
			pos = end + b->sec[ord[k]].size;
	}
	return 0;
}

int
bundle_check(const char *file, const void *buf, size_t len, Bundle *b,
	     Diag *d)
{
	const unsigned char *p = buf;
	uint64_t tn;
	int rc;

	memset(b, 0, sizeof *b);
	if ((rc = check_head(file, p, len, len, d)))
		return rc;
	b->version = bundle_get32(p + 8);
	b->size = len;
	b->nsec = (int)bundle_get32(p + 12);
	if (bundle_get32(p + 12) < 1 || bundle_get32(p + 12) > BUNDLE_MAXSEC)
		return bad(d, file, "header.count", "section count %u outside "
			   "1..%d", bundle_get32(p + 12), BUNDLE_MAXSEC);
	if (!padded(p + 24, 16))
		return bad(d, file, "header.moec", "moec version is not "
			   "NUL-padded ASCII");
	memcpy(b->moec, p + 24, 16);
	tn = (uint64_t)BUNDLE_ENTSIZE * b->nsec;
	if (BUNDLE_HDRSIZE + tn > len)
		return bad(d, file, "header.count", "section table of %d "
			   "entries runs past the end of the file", b->nsec);
	if (bundle_get32(p + 40) != crc32c(0, p + 64, tn))
		return bad(d, file, "header.table_crc", "section table CRC "
			   "mismatch (stored 0x%08x, computed 0x%08x)",
			   bundle_get32(p + 40), crc32c(0, p + 64, tn));
	for (int i = 0; i < b->nsec; i++)
		if ((rc = entry(file, p + 64 + BUNDLE_ENTSIZE * i, i, b, len, d)))
			return rc;
	if ((rc = layout(file, p, len, b, d)))
		return rc;
	for (int i = 0; i < b->nsec; i++) {
		BundleSection *s = &b->sec[i];
		uint32_t crc = crc32c(0, p + s->off, s->size);
		char field[48];
		s->data = p + s->off;
		snprintf(field, sizeof field, "section '%s'", s->name);
		if (crc != s->crc)
			return bad(d, file, field, "CRC mismatch (stored 0x%08x, "
				   "computed 0x%08x)", s->crc, crc);
	}
	return 0;
}

const BundleSection *
bundle_find(const Bundle *b, const char *name)
{
	for (int i = 0; i < b->nsec; i++)
		if (strcmp(b->sec[i].name, name) == 0)
			return &b->sec[i];
	return NULL;
}

/* --- the manifest against the sections ---------------------------------- */

static int
code(const char *file, const Bundle *b, const Manifest *m, Diag *d)
{
	char ptx[48], cubin[48];
	const BundleSection *s;

	for (int i = 0; i < b->nsec; i++) {
		const void *z;
		s = &b->sec[i];
		if (strncmp(s->name, "ptx:", 4) == 0 &&
		    (z = memchr(s->data, 0, s->size)))
			return bad(d, file, s->name, "NUL byte at offset %zu of "
				   "the PTX", (size_t)((const unsigned char *)z -
						       s->data));
	}
	for (int i = 0; i < m->nk; i++)
		for (int t = 0; t < m->k[i].ntarget; t++) {
			snprintf(ptx, sizeof ptx, "ptx:%s", m->k[i].target[t]);
			snprintf(cubin, sizeof cubin, "cubin:%s", m->k[i].target[t]);
			if (!bundle_find(b, ptx) && !bundle_find(b, cubin))
				return bad(d, file, "manifest", "kernel '%s' "
					   "names target %s, but there is no "
					   "'%s' or '%s' section", m->k[i].name,
					   m->k[i].target[t], ptx, cubin);
		}
	return 0;
}

/* Program p's weights inside its part of the "weights" section. */
static int
weights(const char *file, const Bundle *b, const BundleProgram *p, Diag *d)
{
	const Manifest *m = p->manifest;
	const BundleSection *sec = bundle_find(b, "weights");
	BundleSection part, *s = NULL;

	if (sec) {
		part = *sec;
		part.size = p->wlen;
		s = &part;
	}
	for (int i = 0; i < m->nw; i++) {
		const MWeight *w = &m->w[i];
		if (w->synth)
			continue;
		if (!s)
			return bad(d, file, "manifest", "weight '%s' is at=%llu "
				   "but there is no 'weights' section", w->name,
				   (unsigned long long)w->at);
		if (w->at > s->size || w->bytes > s->size - w->at)
			return bad(d, file, "manifest", "weight '%s' (at=%llu, "
				   "bytes=%llu) lies outside the 'weights' "
				   "section (%llu bytes)", w->name,
				   (unsigned long long)w->at,
				   (unsigned long long)w->bytes,
				   (unsigned long long)s->size);
	}
	return 0;
}

/* Parse program p's manifest (its bytes of the "manifest" section) and
 * check it against the sections. */
static int
program(Arena *a, const char *file, const Bundle *b, BundleProgram *p, Diag *d)
{
	const BundleSection *s = bundle_find(b, "manifest");
	char mfile[300];
	int rc;

	if (b->version == BUNDLE_VERSION)
		snprintf(mfile, sizeof mfile, "%s[manifest]", file ? file : "");
	else
		snprintf(mfile, sizeof mfile, "%s[manifest:%s]", file ? file : "", p->name);
	if (!file)	/* "manifest", "manifest:layer.3" */
		memmove(mfile, mfile + 1, strlen(mfile + 1) - 1), mfile[strlen(mfile) - 2] = 0;
	if ((rc = bundle_manifest_parse(a, mfile, (const char *)s->data + p->moff,
					(size_t)p->mlen, &p->manifest, d)))
		return rc;
	if (strcmp(p->manifest->moec, b->moec) != 0)
		return bad(d, file, "manifest", "manifest says moec %s, the "
			   "header says %s", p->manifest->moec, b->moec);
	if ((rc = code(file, b, p->manifest, d)) || (rc = weights(file, b, p, d)))
		return rc;
	return 0;
}

int
bundle_read(Arena *a, const char *file, const void *buf, size_t len,
	    Bundle *b, Diag *d)
{
	const BundleSection *s, *w;
	int rc;

	if ((rc = bundle_check(file, buf, len, b, d)))
		return rc;
	if (!(s = bundle_find(b, "manifest")))
		return bad(d, file, "sections", "no 'manifest' section");
	w = bundle_find(b, "weights");
	if (b->version == BUNDLE_VERSION) {
		if (bundle_find(b, "programs"))
			return bad(d, file, "sections", "a 'programs' section in a "
				   "format %d bundle (it belongs to format %d)",
				   BUNDLE_VERSION, BUNDLE_VERSION_PROGRAMS);
		b->nprog = 1;
		b->prog = arena_array(a, BundleProgram, 1);
		b->prog[0] = (BundleProgram){"main", NULL, 0, s->size, 0, w ? w->size : 0};
	} else if ((rc = bundle_programs_parse(a, file, b, d))) {
		return rc;
	}
	for (int i = 0; i < b->nprog; i++)
		if ((rc = program(a, file, b, &b->prog[i], d)))
			return rc;
	b->manifest = b->prog[0].manifest;
	return 0;
}

/* --- files -------------------------------------------------------------- */

static unsigned char *
fail(int fd, int *status, int rc)
{
	if (fd >= 0)
		close(fd);
	*status = rc;
	return NULL;
}

/* Opened with file_open: a FIFO or a link to one is refused, never waited on. */
unsigned char *
bundle_read_file(const char *path, size_t *len, int *status, Diag *d)
{
	unsigned char head[BUNDLE_HDRSIZE], *buf;
	uint64_t size;
	int fd = file_open(path, NULL, 0, &size, d);
	size_t have;
	int rc;

	if (fd < 0)
		return fail(-1, status, 1);
	if (size > MAXFILE)
		return diag_error(d, loc_file(path), "file too large (%llu "
				  "bytes)", (unsigned long long)size),
		       fail(fd, status, BUNDLE_EFORMAT);
	have = size < sizeof head ? (size_t)size : sizeof head;
	if (file_pread(fd, head, have, 0))
		return diag_error(d, loc_file(path), "read error"),
		       fail(fd, status, 1);
	if (size >= BUNDLE_HDRSIZE && (rc = check_head(path, head, have, size, d)))
		return fail(fd, status, rc);
	if (!(buf = malloc((size_t)size + 1)))
		return diag_error(d, loc_file(path), "cannot allocate %llu "
				  "bytes", (unsigned long long)size),
		       fail(fd, status, 1);
	memcpy(buf, head, have);
	if (file_pread(fd, buf + have, (size_t)size - have, have)) {
		free(buf);
		return diag_error(d, loc_file(path), "read error"),
		       fail(fd, status, 1);
	}
	close(fd);
	*len = (size_t)size;
	*status = 0;
	return buf;
}
