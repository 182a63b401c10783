/*
 * write.c — lay a bundle out per docs/bundle.md §1: header, section table,
 * then each section on a 256-byte boundary with zero padding between.
 *
 * The layout depends only on the sections' names, sizes and order and the
 * moec version, so the same inputs give a byte-identical bundle.  Nothing
 * is taken from the time, the host or the path written to.
 */
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

void
bundle_writer_init(BundleWriter *w, const char *moec)
{
	memset(w, 0, sizeof *w);
	w->version = BUNDLE_VERSION;
	strncpy(w->moec, moec ? moec : MOEC_VERSION, sizeof w->moec - 1);
}

int
bundle_add(BundleWriter *w, const char *name, const void *data, size_t size,
	   Diag *d)
{
	Loc l = LOC_NONE;

	l.name = "bundle";
	if (!bundle_name_valid(name))
		return diag_error(d, l, "bad section name '%s'", name);
	for (int i = 0; i < w->nsec; i++)
		if (strcmp(w->sec[i].name, name) == 0)
			return diag_error(d, l, "duplicate section '%s'", name);
	if (w->nsec == BUNDLE_MAXSEC)
		return diag_error(d, l, "more than %d sections", BUNDLE_MAXSEC);
	strcpy(w->sec[w->nsec].name, name);
	w->sec[w->nsec].data = data;
	w->sec[w->nsec].size = size;
	w->nsec++;
	return 0;
}

/* Offset of section i; the file ends where the last section ends. */
static uint64_t
offset_of(const BundleWriter *w, int i)
{
	uint64_t off = BUNDLE_HDRSIZE + (uint64_t)BUNDLE_ENTSIZE * w->nsec;

	for (int k = 0; k < i; k++)
		off = BUNDLE_ALIGN_UP(off) + w->sec[k].size;
	return BUNDLE_ALIGN_UP(off);
}

uint64_t
bundle_size(const BundleWriter *w)
{
	if (w->nsec == 0)
		return BUNDLE_HDRSIZE;
	return offset_of(w, w->nsec - 1) + w->sec[w->nsec - 1].size;
}

/* Header and table: the first 64 + 64*N bytes. */
static void
head(const BundleWriter *w, unsigned char *h)
{
	unsigned char *t = h + BUNDLE_HDRSIZE;
	size_t tn = (size_t)BUNDLE_ENTSIZE * w->nsec;

	memset(h, 0, BUNDLE_HDRSIZE + tn);
	for (int i = 0; i < w->nsec; i++) {
		unsigned char *e = t + (size_t)BUNDLE_ENTSIZE * i;
		memcpy(e, w->sec[i].name, strlen(w->sec[i].name));
		bundle_put64(e + 32, offset_of(w, i));
		bundle_put64(e + 40, w->sec[i].size);
		bundle_put32(e + 48, crc32c(0, w->sec[i].data, w->sec[i].size));
	}
	memcpy(h, "MOEBNDL", 8);
	bundle_put32(h + 8, w->version);
	bundle_put32(h + 12, (uint32_t)w->nsec);
	bundle_put64(h + 16, bundle_size(w));
	memcpy(h + 24, w->moec, strlen(w->moec));
	bundle_put32(h + 40, crc32c(0, t, tn));
	bundle_put32(h + 44, crc32c(0, h, 44));
}

static int
writable(const BundleWriter *w, Diag *d)
{
	Loc l = LOC_NONE;

	l.name = "bundle";
	if (w->nsec == 0)
		return diag_error(d, l, "a bundle needs at least one section");
	return 0;
}

int
bundle_write(const BundleWriter *w, unsigned char **out, size_t *len,
	     Diag *d)
{
	uint64_t size = bundle_size(w);
	unsigned char *b;

	if (writable(w, d))
		return -1;
	if (size > SIZE_MAX - 1 || !(b = calloc(1, (size_t)size)))
		return diag_error(d, loc_file("bundle"), "cannot allocate %llu "
				  "bytes", (unsigned long long)size);
	head(w, b);
	for (int i = 0; i < w->nsec; i++)
		if (w->sec[i].size)
			memcpy(b + offset_of(w, i), w->sec[i].data, w->sec[i].size);
	*out = b;
	*len = (size_t)size;
	return 0;
}

static int
pad(FILE *f, uint64_t n)
{
	static const unsigned char zero[BUNDLE_ALIGN];

	while (n > 0) {
		size_t k = n < sizeof zero ? (size_t)n : sizeof zero;
		if (fwrite(zero, 1, k, f) != k)
			return -1;
		n -= k;
	}
	return 0;
}

int
bundle_write_file(const BundleWriter *w, const char *path, Diag *d)
{
	unsigned char h[BUNDLE_HDRSIZE + BUNDLE_ENTSIZE * BUNDLE_MAXSEC];
	uint64_t pos = BUNDLE_HDRSIZE + (uint64_t)BUNDLE_ENTSIZE * w->nsec;
	FileOut o;
	FILE *f;
	int bad;

	if (writable(w, d))
		return -1;
	if (!(f = file_create(&o, path, d)))
		return -1;
	head(w, h);
	bad = fwrite(h, 1, (size_t)pos, f) != pos;
	for (int i = 0; i < w->nsec && !bad; i++) {
		uint64_t off = offset_of(w, i);
		bad = pad(f, off - pos) ||
		      fwrite(w->sec[i].data, 1, w->sec[i].size, f) != w->sec[i].size;
		pos = off + w->sec[i].size;
	}
	/* a write error stays set on f: file_commit reports it with its reason */
	return file_commit(&o, d);
}
