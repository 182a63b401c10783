/*
 * print.c — the text form.  Deterministic: nodes in list order, attributes
 * sorted by key, floats in the shortest form that reads back bit-exactly.
 * Whatever this prints, parse.c reads back to a module that prints the same.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int
ir_format_float(char *buf, size_t n, double v)
{
	int k;

	if (isnan(v))
		return snprintf(buf, n, "nan");
	if (isinf(v))
		return snprintf(buf, n, v < 0 ? "-inf" : "inf");
	for (int prec = 1; prec <= 17; prec++) {
		k = snprintf(buf, n, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	if (!strpbrk(buf, ".e"))
		k += snprintf(buf + k, n - (size_t)k, ".0");
	return k;
}

static int
is_ident(const char *s)
{
	if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
		return 0;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '.'))
			return 0;
	return 1;
}

static void
print_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\x%02x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* Identifiers print bare, anything else quoted. */
static void
print_string(FILE *f, const char *s)
{
	if (is_ident(s) && strcmp(s, "inf") != 0 && strcmp(s, "nan") != 0)
		fputs(s, f);
	else
		print_quoted(f, s);
}

static void
print_float(FILE *f, double v)
{
	char buf[64];

	ir_format_float(buf, sizeof buf, v);
	fputs(buf, f);
}

static void
print_dim(FILE *f, const Module *m, Dim d)
{
	char buf[128], *p = buf;
	int n = ir_dim_print(buf, sizeof buf, m, d);

	if (n >= (int)sizeof buf) {	/* long symbol names: never truncated */
		p = xmalloc((size_t)n + 1);
		ir_dim_print(p, (size_t)n + 1, m, d);
	}
	fputs(p, f);
	if (p != buf)
		free(p);
}

static void
print_type(FILE *f, const Module *m, const Type *t)
{
	fprintf(f, "%s[", dtype_name(t->dt));
	for (int i = 0; i < t->rank; i++) {
		if (i)
			fputc(',', f);
		print_dim(f, m, t->dim[i]);
	}
	fputc(']', f);
}

static void
print_attr(FILE *f, const Module *m, const Attr *a)
{
	fprintf(f, "%s=", a->key);
	switch (a->kind) {
	case A_INT: fprintf(f, "%lld", (long long)a->u.i); return;
	case A_FLOAT: print_float(f, a->u.f); return;
	case A_STR: print_string(f, a->u.s); return;
	default: break;
	}
	fputc('[', f);
	for (int i = 0; i < a->n; i++) {
		if (i)
			fputs(", ", f);
		if (a->kind == A_INTS)
			fprintf(f, "%lld", (long long)a->u.ints[i]);
		else if (a->kind == A_FLOATS)
			print_float(f, a->u.floats[i]);
		else
			print_dim(f, m, a->u.dims[i]);
	}
	fputc(']', f);
}

static void
print_operand(FILE *f, const Value *v)
{
	if (!v)
		fputc('_', f);
	else
		fprintf(f, "%c%s", v->kind == V_WEIGHT ? '$' : '%', v->name);
}

static void
print_loc(FILE *f, Loc l)
{
	fputs(" loc(", f);
	print_quoted(f, l.file ? l.file : "");
	if (l.line > 0)
		fprintf(f, ":%d:%d", l.line, l.col);
	else if (l.node >= 0) {
		fprintf(f, " %d ", l.node);
		print_quoted(f, l.name ? l.name : "");
		fputc(' ', f);
		print_quoted(f, l.optype ? l.optype : "");
	}
	fputc(')', f);
}

void
ir_print_node(FILE *f, const Module *m, const Node *n, int flags)
{
	int first = 1;

	fputc('\t', f);
	for (int i = 0; i < n->nout; i++)
		fprintf(f, "%s%%%s", i ? ", " : "", n->out[i]->name);
	if (n->nout)
		fputs(" = ", f);
	fputs(ir_opname(n->op), f);
	if (n->op == OP_CALL) {
		fprintf(f, " @%s(", n->callee ? n->callee->name : "?");
		for (int i = 0; i < n->nin; i++) {
			if (i)
				fputs(", ", f);
			print_operand(f, n->in[i]);
		}
		fputc(')', f);
		first = 0;
	} else {
		for (int i = 0; i < n->nin; i++, first = 0) {
			fputs(first ? " " : ", ", f);
			print_operand(f, n->in[i]);
		}
	}
	for (int i = 0; i < n->nattr; i++, first = 0) {
		fputs(first ? " " : ", ", f);
		print_attr(f, m, &n->attr[i]);
	}
	for (int i = 0; i < n->nout; i++) {
		fputs(i ? ", " : " : ", f);
		print_type(f, m, &n->out[i]->type);
	}
	if ((flags & IR_PRINT_LOC) && (n->loc.file || n->loc.node >= 0))
		print_loc(f, n->loc);
	fputc('\n', f);
}

void
ir_print_graph(FILE *f, const Graph *g, int flags)
{
	const Module *m = g->m;

	fprintf(f, "%s @%s(", g->kind == G_KERNEL ? "kernel" : "graph", g->name);
	for (int i = 0; i < g->nparam; i++) {
		fprintf(f, "%s%%%s: ", i ? ", " : "", g->param[i]->name);
		print_type(f, m, &g->param[i]->type);
	}
	fputs(") -> (", f);
	for (int i = 0; i < g->nret; i++) {
		if (i)
			fputs(", ", f);
		print_string(f, g->retname[i]);
		fputs(": ", f);
		print_type(f, m, &g->ret[i]->type);
	}
	fputc(')', f);
	for (int i = 0; i < g->nattr; i++) {
		fputc(' ', f);
		print_attr(f, m, &g->attr[i]);
	}
	fputs(" {\n", f);
	for (const Node *n = g->first; n; n = n->next)
		ir_print_node(f, m, n, flags);
	fputs("\tret", f);
	for (int i = 0; i < g->nret; i++) {
		fputs(i ? ", " : " ", f);
		print_operand(f, g->ret[i]);
	}
	fputs("\n}\n", f);
}

static void
print_weight(FILE *f, const Module *m, const Weight *w)
{
	fprintf(f, "weight $%s : ", w->value->name);
	print_type(f, m, &w->value->type);
	if (w->mean != 0) {
		fputs(" mean=", f);
		print_float(f, w->mean);
	}
	if (w->scale >= 0) {
		fputs(" scale=", f);
		print_float(f, w->scale);
	}
	if (w->seed)
		fprintf(f, " seed=%llu", (unsigned long long)w->seed);
	if (w->row_block > 1)
		fprintf(f, " row_block=%lld", (long long)w->row_block);
	if (w->col_repeat > 1)
		fprintf(f, " col_repeat=%lld", (long long)w->col_repeat);
	fputc('\n', f);
}

void
ir_print(FILE *f, const Module *m, int flags)
{
	for (int i = 0; i < m->nweight; i++)
		print_weight(f, m, m->weight[i]);
	for (int i = 0; i < m->ngraph; i++) {
		if (i || m->nweight)
			fputc('\n', f);
		ir_print_graph(f, m->graph[i], flags);
	}
}

char *
ir_print_string(const Module *m, int flags)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		die("open_memstream failed");
	ir_print(f, m, flags);
	fclose(f);
	return buf;
}
