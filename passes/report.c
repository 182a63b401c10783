/*
 * report.c — the fusion report: what each kernel fused, and for every
 * candidate left alone, why.  Entries keep the order passes made them.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef enum { E_KERNEL, E_NOTE, E_SKIP } Kind;

typedef struct {
	Kind kind;
	char *kernel;		/* E_KERNEL */
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
	e.kind = E_KERNEL;
	e.kernel = xstrdup(kernel);
	e.text = vfmt(fmt, ap);
	va_end(ap);
	vec_push(&r->e, e);
}

static void
add_text(Report *r, Kind kind, const char *fmt, va_list ap)
{
	Entry e = {kind, NULL, vfmt(fmt, ap)};

	vec_push(&r->e, e);
}

void
report_skip(Report *r, const char *fmt, ...)
{
	va_list ap;

	if (!r)
		return;
	va_start(ap, fmt);
	add_text(r, E_SKIP, fmt, ap);
	va_end(ap);
}

void
report_note(Report *r, const char *fmt, ...)
{
	va_list ap;

	if (!r)
		return;
	va_start(ap, fmt);
	add_text(r, E_NOTE, fmt, ap);
	va_end(ap);
}

int
report_count(const Report *r)
{
	return r ? (int)r->e.n : 0;
}

static void
print_kind(FILE *f, const Report *r, Kind kind, const char *title)
{
	int first = 1;

	for (size_t i = 0; i < r->e.n; i++) {
		const Entry *e = &r->e.v[i];
		if (e->kind != kind)
			continue;
		if (first && title)
			fprintf(f, "%s\n", title);
		first = 0;
		if (kind == E_KERNEL)
			fprintf(f, "kernel @%s: %s\n", e->kernel, e->text);
		else
			fprintf(f, "  %s\n", e->text);
	}
}

/* What was recognised and rewritten, the kernels in the order they were
 * made, then every candidate left alone with the reason. */
void
report_print(FILE *f, const Report *r)
{
	fprintf(f, "# fusion report\n");
	print_kind(f, r, E_NOTE, "# rewrites");
	print_kind(f, r, E_KERNEL, "# kernels");
	print_kind(f, r, E_SKIP, "# not fused");
}
