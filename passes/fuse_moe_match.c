/*
 * fuse_moe_match.c — small matching helpers of fuse-moe: defining nodes,
 * peeling the reshapes and casts exporters put between the ops that
 * matter, and reading constants.  Plain C, no pattern language: each
 * helper answers one question about one value.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuse_moe.h"

Node *
mo_def(const Value *v, Op op)
{
	return v && v->kind == V_RESULT && v->def->op == op ? v->def : NULL;
}

static int
noop_cast(const Node *n)
{
	if (n->op == OP_IDENTITY)
		return 1;
	return n->op == OP_CAST && n->in[0]->type.dt == n->out[0]->type.dt;
}

/* Reshapes keep the row-major order of the elements, so any chain of them
 * can be looked through; callers check the shapes at both ends. */
Value *
mo_peel(Value *v)
{
	while (v && v->kind == V_RESULT &&
	       (v->def->op == OP_RESHAPE || noop_cast(v->def)))
		v = v->def->in[0];
	return v;
}

/* The width of t's rows: the product of the dims after the first; -1 if
 * symbolic. */
int64_t
mo_width(const Type *t)
{
	int64_t w = 1;

	if (t->rank < 1)
		return -1;
	for (int i = 1; i < t->rank; i++) {
		if (t->dim[i] < 0)
			return -1;
		w *= t->dim[i];
	}
	return w;
}

/* Do a and b hold the same rows: the same first dim (unknown dims may
 * stand for each other: the element count makes them agree) and the same
 * static width? */
int
mo_same_rows(const Module *m, const Type *a, const Type *b)
{
	int64_t wa = mo_width(a), wb = mo_width(b);

	if (wa < 0 || wa != wb)
		return 0;
	return a->dim[0] == b->dim[0] || ir_dim_has_unknown(m, a->dim[0]) ||
	       ir_dim_has_unknown(m, b->dim[0]);
}

/* Through reshapes to the op that made v's rows, if it made the same rows
 * ([R,N,1] and [R,1,N] views of [R,N], say); else v itself. */
Value *
mo_peel_rows(Value *v)
{
	Value *u = mo_peel(v);

	return u != v && mo_same_rows(v->graph->m, &u->type, &v->type) ? u : v;
}

Value *
mo_peel_cast(Value *v)
{
	while (v && v->kind == V_RESULT &&
	       (noop_cast(v->def) || (v->def->op == OP_CAST &&
				      dtype_is_float(v->type.dt) &&
				      dtype_is_float(v->def->in[0]->type.dt))))
		v = v->def->in[0];
	return v;
}

/* Index tensors: the same indices reshaped, broadcast or cast. */
Value *
mo_peel_index(Value *v)
{
	while (v && v->kind == V_RESULT &&
	       (v->def->op == OP_RESHAPE || v->def->op == OP_EXPAND || v->def->op == OP_CAST ||
		v->def->op == OP_IDENTITY))
		v = v->def->in[0];
	return v;
}

/* Look through ops that only move or repeat one constant's elements. */
static Node *
const_node(Value *v)
{
	while (v && v->kind == V_RESULT &&
	       (v->def->op == OP_RESHAPE || v->def->op == OP_EXPAND || noop_cast(v->def)))
		v = v->def->in[0];
	return mo_def(v, OP_CONST);
}

int
mo_const_f(const Value *v, double *out)
{
	Node *n = const_node((Value *)v);
	const Attr *a = n ? ir_attr(n, "value") : NULL;

	if (!a || a->n != 1)
		return 0;
	*out = a->kind == A_FLOATS ? a->u.floats[0] : (double)a->u.ints[0];
	return 1;
}

int
mo_const_ints(const Value *v, int64_t *out, int max)
{
	Node *n = mo_def(v, OP_CONST);
	const Attr *a = n ? ir_attr(n, "value") : NULL;

	if (!a || a->kind != A_INTS || a->n > max)
		return -1;
	for (int i = 0; i < a->n; i++)
		out[i] = a->u.ints[i];
	return a->n;
}

/* Is every element of a real (not synthetic) weight equal to want?  A
 * static-shape export holds its zeros as an initializer. */
static int
weight_fill(Value *v, double want)
{
	Weight *w = v->weight;
	int64_t n = ir_type_numel(&v->type);

	if (!w || !w->data || n < 0 || n > ((int64_t)1 << 24))
		return 0;
	for (int64_t i = 0; i < n; i++)
		if (dtype_load(v->type.dt, w->data, (size_t)i) != want)
			return 0;
	return 1;
}

/* Is every element of v equal to want (a splat constant, constant_of_shape,
 * a weight holding it, or either broadcast or cast)? */
int
mo_is_fill(Value *v, double want)
{
	while (v && v->kind == V_RESULT &&
	       (v->def->op == OP_RESHAPE || v->def->op == OP_EXPAND || v->def->op == OP_CAST ||
		v->def->op == OP_IDENTITY))
		v = v->def->in[0];
	if (v && v->kind == V_WEIGHT)
		return weight_fill(v, want);
	if (!v || v->kind != V_RESULT)
		return 0;
	if (v->def->op == OP_CONSTANT_OF_SHAPE)
		return ir_attr_float(v->def, "value", 0.0) == want;
	if (v->def->op != OP_CONST)
		return 0;
	const Attr *a = ir_attr(v->def, "value");
	if (!a || a->n < 1)
		return 0;
	for (int i = 0; i < a->n; i++)
		if ((a->kind == A_FLOATS ? a->u.floats[i] : (double)a->u.ints[i]) != want)
			return 0;
	return 1;
}

/* Attribute key of n as an axis of a rank-`rank` tensor; def if absent. */
int
mo_axis(const Node *n, const char *key, int rank, int def)
{
	int64_t a[MAXRANK];
	int k = ir_attr_ints(n, key, a, MAXRANK);

	if (k < 0)
		return def;
	if (k != 1)
		return -1;
	return (int)(a[0] < 0 ? a[0] + rank : a[0]);
}

int
mo_last_axis(const Node *n, const char *key, int rank, int def)
{
	return mo_axis(n, key, rank, def) == rank - 1;
}

/* The shortest decimal that names the same f32: 1.702, not 1.7020000219. */
double
mo_nice_float(double v)
{
	char buf[64];

	for (int p = 1; p <= 17; p++) {
		snprintf(buf, sizeof buf, "%.*g", p, v);
		double r = strtod(buf, NULL);
		if ((float)r == (float)v)
			return r;
	}
	return v;
}

/* Does the slice n start every axis it cuts at 0, step 1?  (Its ends do
 * not matter: the scatter consumes as many update rows as it has index
 * rows, and cutting the updates to the index's shape keeps exactly those.) */
static int
from_zero(const Node *n)
{
	int64_t st[MAXRANK];
	int k = n->nin > 1 ? mo_const_ints(n->in[1], st, MAXRANK) : ir_attr_ints(n, "starts", st, MAXRANK);

	if (k < 1 || (n->nin > 4 && n->in[4]) || ir_attr(n, "steps"))
		return 0;
	for (int i = 0; i < k; i++)
		if (st[i] != 0)
			return 0;
	return 1;
}

/* The updates of an index_put or scatter_add: its rows flattened and cut
 * to the index count (TorchScript: a slice from 0), or broadcast to their
 * own rows (dynamo's [count,H], TorchScript's [1,H]), or the rows themselves. */
Value *
mo_uncut(Value *u)
{
	Node *n;

	for (;;) {
		u = mo_peel(u);
		if ((n = mo_def(u, OP_EXPAND)) && n->in[0]->type.rank == u->type.rank &&
		    n->in[0]->type.dim[u->type.rank - 1] == u->type.dim[u->type.rank - 1] &&
		    n->in[0]->type.dim[0] != 1)	/* not one row broadcast */
			u = n->in[0];
		else if ((n = mo_def(u, OP_SLICE)) && from_zero(n))
			u = n->in[0];
		else
			return u;
	}
}
