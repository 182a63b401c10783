/*
 * report.c — the fusion report: what each kernel fused, and for every
 * candidate left alone, why.  Entries keep the order passes made them.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct {
	char *kernel;		/* NULL: a skipped candidate */
	char *text;
} Entry;

struct Report {
	VEC(Entry) e;
};

Report *
report_new(void)
{
	return xcalloc(1, sizeof(Report));
}

void
report_free(Report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->e.n; i++) {
		free(r->e.v[i].kernel);
		free(r->e.v[i].text);
	}
	vec_free(&r->e);
	free(r);
}

static char *
vfmt(const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0)
		die("out of memory");
	return s;
}

void
report_fused(Report *r, const char *kernel, const char *fmt, ...)
{
	va_list ap;
	Entry e;

	if (!r)
		return;
	va_start(ap, fmt);
	e.kernel = xstrdup(kernel);
	e.text = vfmt(fmt, ap);
	va_end(ap);
	vec_push(&r->e, e);
}

void
report_skip(Report *r, const char *fmt, ...)
{
	va_list ap;
	Entry e;

	if (!r)
		return;
	va_start(ap, fmt);
	e.kernel = NULL;
	e.text = vfmt(fmt, ap);
	va_end(ap);
	vec_push(&r->e, e);
}

int
report_count(const Report *r)
{
	return r ? (int)r->e.n : 0;
}

/* Kernels first, in the order they were made; then what was not fused. */
void
report_print(FILE *f, const Report *r)
{
	size_t nskip = 0;

	fprintf(f, "# fusion report\n");
	for (size_t i = 0; i < r->e.n; i++) {
		if (!r->e.v[i].kernel) {
			nskip++;
			continue;
		}
		fprintf(f, "kernel @%s: %s\n", r->e.v[i].kernel, r->e.v[i].text);
	}
	if (nskip)
		fprintf(f, "# not fused\n");
	for (size_t i = 0; i < r->e.n; i++)
		if (!r->e.v[i].kernel)
			fprintf(f, "  %s\n", r->e.v[i].text);
}
