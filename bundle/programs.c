/*
 * programs.c — several programs in one bundle (docs/bundle.md §5): the
 * "programs" section names each program and gives its bytes of the
 * "manifest" and "weights" sections; code sections are shared.
 *
 *	programs 1
 *	program layer.0 manifest=0,4848 weights=0,0
 *	program layer.1 manifest=4848,4850 weights=0,0
 *
 * A program is then read exactly as a format-1 bundle's one manifest is.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

#define PROGRAMS_VERSION 1

static int
perr(Diag *d, const char *file, int line, const char *fmt, ...)
{
	Loc l = loc_file(file);
	va_list ap;

	l.name = "programs";
	l.line = line;
	va_start(ap, fmt);
	diag_verror(d, l, fmt, ap);
	va_end(ap);
	return BUNDLE_EFORMAT;
}

/* "KEY=OFF,LEN" into off and len, both inside a section of `size` bytes. */
static const char *
range(const char *w, size_t n, const char *key, uint64_t size, uint64_t *off, uint64_t *len)
{
	size_t k = strlen(key);
	const char *comma, *why;

	if (n <= k + 1 || strncmp(w, key, k) || w[k] != '=')
		return "expected KEY=OFFSET,BYTES";
	w += k + 1, n -= k + 1;
	if (!(comma = memchr(w, ',', n)))
		return "expected OFFSET,BYTES";
	if ((why = bundle_parse_uint(w, (size_t)(comma - w), UINT64_MAX, off)) ||
	    (why = bundle_parse_uint(comma + 1, n - (size_t)(comma - w) - 1, UINT64_MAX, len)))
		return why;
	if (*off > size || *len > size - *off)
		return "the range runs past the end of its section";
	return NULL;
}

/* One "program NAME manifest=O,N weights=O,N" line (text[0..n)). */
static int
line_of(Arena *a, const char *file, const Bundle *b, int ln, const char *t, size_t n,
	BundleProgram *p, Diag *d)
{
	const BundleSection *ms = bundle_find(b, "manifest"), *ws = bundle_find(b, "weights");
	const char *word[4], *why;
	size_t len[4];
	int nw = 0;

	for (size_t i = 0; i < n && nw < 4;) {
		size_t j = i;
		while (j < n && t[j] != ' ')
			j++;
		word[nw] = t + i, len[nw++] = j - i;
		i = j + 1;
	}
	if (nw != 4 || len[0] != 7 || memcmp(word[0], "program", 7) ||
	    word[3] + len[3] != t + n)
		return perr(d, file, ln, "expected 'program NAME manifest=OFFSET,BYTES "
			    "weights=OFFSET,BYTES'");
	if (!bundle_name_plain(word[1], len[1]))
		return perr(d, file, ln, "bad program name '%.*s'", (int)MIN(len[1], 64), word[1]);
	p->name = arena_strndup(a, word[1], len[1]);
	if ((why = range(word[2], len[2], "manifest", ms->size, &p->moff, &p->mlen)) ||
	    (why = range(word[3], len[3], "weights", ws ? ws->size : 0, &p->woff, &p->wlen)))
		return perr(d, file, ln, "program '%s': %s", p->name, why);
	if (p->woff % BUNDLE_ALIGN)
		return perr(d, file, ln, "program '%s': weights offset is not a multiple "
			    "of 256", p->name);
	return 0;
}

int
bundle_programs_parse(Arena *a, const char *file, Bundle *b, Diag *d)
{
	const BundleSection *s = bundle_find(b, "programs");
	const char *t, *end, *nl;
	int ln = 1, rc;

	if (!s)
		return perr(d, file, 0, "a format %d bundle needs a 'programs' section",
			    BUNDLE_VERSION_PROGRAMS);
	t = (const char *)s->data, end = t + s->size;
	if (s->size < 11 || memcmp(t, "programs 1\n", 11))
		return perr(d, file, 1, "the section must start with 'programs 1'");
	b->nprog = 0;
	for (const char *q = t; q < end; q++)
		b->nprog += *q == '\n';
	b->nprog--;
	if (b->nprog < 1 || b->nprog > BUNDLE_MAXPROG || end[-1] != '\n')
		return perr(d, file, 0, "between 1 and %d programs, one a line, each line "
			    "ending in a newline", BUNDLE_MAXPROG);
	b->prog = arena_array(a, BundleProgram, b->nprog);
	t += 11;
	for (int i = 0; i < b->nprog; i++, t = nl + 1) {
		nl = memchr(t, '\n', (size_t)(end - t));
		if ((rc = line_of(a, file, b, ++ln, t, (size_t)(nl - t), &b->prog[i], d)))
			return rc;
		for (int k = 0; k < i; k++)
			if (!strcmp(b->prog[k].name, b->prog[i].name))
				return perr(d, file, ln, "program '%s' named twice",
					    b->prog[i].name);
	}
	return 0;
}

char *
bundle_programs_print(const BundleProgram *p, int n, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		die("out of memory");
	fprintf(f, "programs %d\n", PROGRAMS_VERSION);
	for (int i = 0; i < n; i++)
		fprintf(f, "program %s manifest=%llu,%llu weights=%llu,%llu\n", p[i].name,
			(unsigned long long)p[i].moff, (unsigned long long)p[i].mlen,
			(unsigned long long)p[i].woff, (unsigned long long)p[i].wlen);
	fclose(f);
	return buf;
}

void
bundle_program_view(const Bundle *b, int i, Bundle *v)
{
	const BundleProgram *p = &b->prog[i];

	*v = *b;
	for (int k = 0; k < v->nsec; k++) {
		BundleSection *s = &v->sec[k];
		if (!strcmp(s->name, "manifest"))
			s->data += p->moff, s->off += p->moff, s->size = p->mlen;
		else if (!strcmp(s->name, "weights"))
			s->data += p->woff, s->off += p->woff, s->size = p->wlen;
	}
	v->manifest = p->manifest;
	v->prog = (BundleProgram *)p;
	v->nprog = 1;
}

int
bundle_find_program(const Bundle *b, const char *name)
{
	for (int i = 0; i < b->nprog; i++)
		if (!strcmp(b->prog[i].name, name))
			return i;
	return -1;
}
