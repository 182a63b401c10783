/*
 * verify.c — checks the invariants every pass must keep: arities from
 * ops.def, operands defined before use in the same graph (or weights),
 * results owned by their node, calls matching their kernel's signature, and
 * result types equal to what shape inference derives.  All problems are
 * reported, not just the first.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct {
	Module *m;
	Diag *d;
	unsigned char *defined;	/* by value id */
	int nerr;
} V;

static void
bad(V *v, Loc l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_verror(v->d, l, fmt, ap);
	va_end(ap);
	v->nerr++;
}

/* Positions that may hold `_` below an op's minimum operand count. */
static int
optional_slot(const Node *n, int i)
{
	if (i >= ir_opinfo[n->op].inmin)
		return 1;
	return n->op == OP_MOE && i == 2;
}

static int
types_agree(const Module *m, const Type *declared, const Type *inferred)
{
	if (declared->dt != inferred->dt || declared->rank != inferred->rank)
		return 0;
	for (int i = 0; i < declared->rank; i++)
		if (!ir_dim_compatible(m, declared->dim[i], inferred->dim[i]))
			return 0;
	return 1;
}

static void
check_call(V *v, Node *n)
{
	Graph *k = n->callee;

	if (!k) {
		bad(v, n->loc, "call without a kernel");
		return;
	}
	if (k->nparam != n->nin || k->nret != n->nout) {
		bad(v, n->loc, "call of @%s with %d operands and %d results; it takes %d and returns %d",
		    k->name, n->nin, n->nout, k->nparam, k->nret);
		return;
	}
	for (int i = 0; i < n->nin; i++)
		if (n->in[i] && !types_agree(v->m, &k->param[i]->type, &n->in[i]->type))
			bad(v, n->loc, "operand %d of call @%s does not match parameter %%%s",
			    i, k->name, k->param[i]->name);
	for (int i = 0; i < n->nout; i++)
		if (!types_agree(v->m, &k->ret[i]->type, &n->out[i]->type))
			bad(v, n->loc, "result %d of call @%s does not match the kernel's result",
			    i, k->name);
}

static void
check_types(V *v, Graph *g, Node *n)
{
	Type declared[64];
	char a[256], b[256];

	if (n->nout > (int)NELEM(declared) || n->op == OP_CALL)
		return;
	for (int i = 0; i < n->nout; i++) {
		declared[i] = n->out[i]->type;
		if (!ir_type_ok(v->m, &declared[i]))
			bad(v, n->loc, "%%%s has more than 2^48 elements", n->out[i]->name);
	}
	if (ir_infer(g, n, v->d) != 0) {
		v->nerr++;
	} else {
		for (int i = 0; i < n->nout; i++) {
			if (types_agree(v->m, &declared[i], &n->out[i]->type))
				continue;
			ir_type_print(a, sizeof a, v->m, &declared[i]);
			ir_type_print(b, sizeof b, v->m, &n->out[i]->type);
			bad(v, n->loc, "%%%s is declared %s but %s gives %s",
			    n->out[i]->name, a, ir_opname(n->op), b);
		}
	}
	for (int i = 0; i < n->nout; i++)
		n->out[i]->type = declared[i];
}

static void
check_node(V *v, Graph *g, Node *n)
{
	const OpInfo *oi = &ir_opinfo[n->op];
	int ok = 1;

	if (n->nin < oi->inmin || (oi->inmax >= 0 && n->nin > oi->inmax)) {
		bad(v, n->loc, "%s takes %d to %d operands, not %d", oi->name, oi->inmin,
		    oi->inmax, n->nin);
		ok = 0;
	}
	if (n->nout < oi->outmin || (oi->outmax >= 0 && n->nout > oi->outmax)) {
		bad(v, n->loc, "%s has %d to %d results, not %d", oi->name, oi->outmin,
		    oi->outmax, n->nout);
		ok = 0;
	}
	for (int i = 0; i < n->nin; i++) {
		Value *x = n->in[i];
		if (!x) {
			if (!optional_slot(n, i)) {
				bad(v, n->loc, "%s: operand %d is required", oi->name, i);
				ok = 0;
			}
		} else if (x->kind != V_WEIGHT && (x->graph != g || !v->defined[x->id])) {
			bad(v, n->loc, "%s: operand %%%s is not defined before use", oi->name, x->name);
			ok = 0;
		}
	}
	for (int i = 0; i < n->nout; i++)
		if (n->out[i]->def != n || n->out[i]->resno != i || n->out[i]->graph != g) {
			bad(v, n->loc, "result %d of %s is not owned by it", i, oi->name);
			ok = 0;
		}
	if (n->op == OP_CALL)
		check_call(v, n);
	else if (n->callee)
		bad(v, n->loc, "%s names a kernel", oi->name);
	if (ok)
		check_types(v, g, n);
	for (int i = 0; i < n->nout; i++)
		v->defined[n->out[i]->id] = 1;
}

static void
check_graph(V *v, Graph *g)
{
	int count = 0;

	memset(v->defined, 0, v->m->nvalue);
	for (int i = 0; i < g->nparam; i++) {
		v->defined[g->param[i]->id] = 1;
		if (!ir_type_ok(v->m, &g->param[i]->type))
			bad(v, g->loc, "@%s: parameter %%%s has more than 2^48 elements", g->name,
			    g->param[i]->name);
	}
	for (Node *n = g->first; n; n = n->next, count++) {
		if (n->next && n->next->prev != n)
			bad(v, n->loc, "broken node list");
		check_node(v, g, n);
	}
	if (ir_kernel_template(g) == IR_TMPL_UNKNOWN) {
		char known[128];
		size_t k = 0;
		for (int t = IR_TMPL_NONE + 1; t < IR_NTMPL; t++)
			k += (size_t)snprintf(known + k, sizeof known - k, "%s%s",
					      t > IR_TMPL_NONE + 1 ? ", " : "", ir_template_names[t]);
		bad(v, g->loc, "@%s: template=%s is not a template (%s)", g->name,
		    ir_graph_str(g, "template", ""), known);
	}
	if (count != g->nnode)
		bad(v, g->loc, "@%s counts %d nodes but holds %d", g->name, g->nnode, count);
	for (int i = 0; i < g->nret; i++) {
		Value *x = g->ret[i];
		if (!x || (x->kind != V_WEIGHT && (x->graph != g || !v->defined[x->id])))
			bad(v, g->loc, "@%s returns a value it does not define", g->name);
		for (int j = 0; j < i; j++)
			if (g->retname[i] == g->retname[j])
				bad(v, g->loc, "@%s has two results named '%s'", g->name, g->retname[i]);
	}
}

int
ir_verify(Module *m, Diag *d)
{
	V v = {m, d, xcalloc(m->nvalue + 1, 1), 0};

	for (int i = 0; i < m->nweight; i++)
		if (!ir_type_ok(m, &m->weight[i]->value->type))
			bad(&v, loc_file(m->file), "weight $%s has more than 2^48 elements",
			    m->weight[i]->value->name);
	for (int i = 0; i < m->ngraph; i++)
		check_graph(&v, m->graph[i]);
	free(v.defined);
	return v.nerr ? -1 : 0;
}
