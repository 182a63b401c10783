/*
 * report.c — the fusion report: what each kernel fused, and for every
 * candidate left alone, why and what it costs (report_size, report_trip:
 * the extra kernels and bytes through memory of the unfused path).
 * Entries keep the order passes made them.
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

static void
scaled(char *buf, size_t n, double b, const char *per)
{
	static const char *const unit[] = {"B", "KB", "MB", "GB"};
	int u = 0;

	while (b >= 1024 && u < 3)
		b /= 1024, u++;
	snprintf(buf, n, "%.*f %s%s", u && b < 10 ? 1 : 0, b, unit[u], per);
}

/* Symbolic dims (the tokens) are left out of the product: per token. */
const char *
report_size(char *buf, size_t n, const Type *t)
{
	double b = dtype_bits(t->dt) / 8.0;
	int sym = 0;

	for (int i = 0; i < t->rank; i++) {
		if (ir_dim_is_static(t->dim[i]))
			b *= (double)t->dim[i];
		else
			sym = 1;
	}
	scaled(buf, n, b, sym ? " a token" : "");
	return buf;
}

const char *
report_trip(char *buf, size_t n, const Value *v, int launches, int readers)
{
	char sz[48];

	report_size(sz, sizeof sz, &v->type);
	snprintf(buf, n, "cost: %d more kernel%s, %%%s (%s) written and read back%s", launches,
		 launches == 1 ? "" : "s", v->name, sz,
		 readers > 1 ? (readers == 2 ? " twice" : " by each reader") : "");
	return buf;
}
