/*
 * diag.c — the one place that formats a diagnostic.
 *
 *	file:line:col: error: message            (text IR, JSON)
 *	model.onnx: node 37 'name' (MatMul): error: message
 *	model.onnx: initializer 'w1': error: message   (loc.name is a field path)
 */
#include <stdlib.h>
#include <string.h>

#include "util.h"

_Noreturn void
die_(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: internal error: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

Loc
loc_file(const char *file)
{
	Loc l = LOC_NONE;

	l.file = file;
	return l;
}

Loc
loc_line(const char *file, int line, int col)
{
	Loc l = LOC_NONE;

	l.file = file;
	l.line = line;
	l.col = col;
	return l;
}

void
diag_init(Diag *d, FILE *out)
{
	memset(d, 0, sizeof *d);
	d->out = out;
}

void
diag_loc_string(char *buf, size_t n, Loc l)
{
	size_t k = 0;

	buf[0] = 0;
	if (l.file)
		k += snprintf(buf + k, n - k, "%s", l.file);
	if (k >= n)
		return;
	if (l.line > 0) {
		k += snprintf(buf + k, n - k, ":%d", l.line);
		if (l.col > 0 && k < n)
			k += snprintf(buf + k, n - k, ":%d", l.col);
	} else if (l.node >= 0) {
		k += snprintf(buf + k, n - k, "%snode %d '%s'", l.file ? ": " : "",
			      l.node, l.name ? l.name : "");
		if (l.optype && k < n)
			k += snprintf(buf + k, n - k, " (%s)", l.optype);
	} else if (l.name) {
		k += snprintf(buf + k, n - k, "%s%s", l.file ? ": " : "", l.name);
	}
}

/*
 * Control characters escaped in place (\n, \t, \r, \xHH), so that a name
 * read from a file (a node named "x\nmodel.onnx: error: forged") cannot
 * start a line of its own or drive the terminal.  Truncates to fit n.
 */
static void
escape(char *s, size_t n)
{
	char tmp[2048];
	size_t k = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p && k + 5 < sizeof tmp; p++) {
		if (*p >= 0x20 && *p != 0x7f) {
			tmp[k++] = (char)*p;
			continue;
		}
		tmp[k++] = '\\';
		if (*p == '\n' || *p == '\t' || *p == '\r')
			tmp[k++] = *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r';
		else
			k += (size_t)snprintf(tmp + k, sizeof tmp - k, "x%02x", *p);
	}
	tmp[k] = 0;
	snprintf(s, n, "%s", tmp);
}

static void
emit(Diag *d, Loc l, const char *kind, const char *fmt, va_list ap)
{
	char where[512], msg[2048];	/* the families an unknown model_type lists */

	diag_loc_string(where, sizeof where, l);
	vsnprintf(msg, sizeof msg, fmt, ap);
	escape(where, sizeof where);
	escape(msg, sizeof msg);
	if (strcmp(kind, "error") == 0)
		snprintf(d->last, sizeof d->last, "%.200s%s%.300s", where,
			 where[0] ? ": " : "", msg);
	if (d->out)
		fprintf(d->out, "%s%s%s: %s\n", where, where[0] ? ": " : "", kind, msg);
}

int
diag_verror(Diag *d, Loc l, const char *fmt, va_list ap)
{
	d->nerror++;
	emit(d, l, "error", fmt, ap);
	return -1;
}

int
diag_error(Diag *d, Loc l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_verror(d, l, fmt, ap);
	va_end(ap);
	return -1;
}

void
diag_warn(Diag *d, Loc l, const char *fmt, ...)
{
	va_list ap;

	d->nwarn++;
	va_start(ap, fmt);
	emit(d, l, "warning", fmt, ap);
	va_end(ap);
}

void
diag_note(Diag *d, Loc l, const char *fmt, ...)
{
	va_list ap;

	if (d->level < 0)	/* -q */
		return;
	va_start(ap, fmt);
	emit(d, l, "note", fmt, ap);
	va_end(ap);
}

void
diag_remark(Diag *d, Loc l, const char *fmt, ...)
{
	va_list ap;

	if (d->level < 1)	/* only with -v */
		return;
	va_start(ap, fmt);
	emit(d, l, "note", fmt, ap);
	va_end(ap);
}
