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

/* The dims of t other than static 1s. */
static int
nonunit(const Type *t, Dim *out)
{
	int n = 0;

	for (int i = 0; i < t->rank; i++)
		if (t->dim[i] != 1)
			out[n++] = t->dim[i];
	return n;
}

/* Do a and b differ only by dims of size 1?  Dims that are unknown ("?")
 * on either side may stand for each other, once: the element count then
 * forces the rest to agree. */
static int
unit_reshape(const Module *m, const Type *a, const Type *b)
{
	Dim da[MAXRANK], db[MAXRANK];
	int na = nonunit(a, da), nb = nonunit(b, db), loose = 0;

	if (na != nb)
		return 0;
	for (int i = 0; i < na; i++) {
		if (da[i] == db[i])
			continue;
		if (!ir_dim_has_unknown(m, da[i]) && !ir_dim_has_unknown(m, db[i]))
			return 0;
		if (loose++)
			return 0;
	}
	return 1;
}

Value *
mo_peel_unit(Value *v)
{
	while (v && v->kind == V_RESULT) {
		Node *n = v->def;
		if (n->op == OP_RESHAPE && unit_reshape(v->graph->m, &n->in[0]->type, &v->type))
			v = n->in[0];
		else if (noop_cast(n))
			v = n->in[0];
		else
			break;
	}
	return v;
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

/* Is every element of v equal to want (a splat constant, constant_of_shape,
 * or either broadcast or cast)? */
int
mo_is_fill(Value *v, double want)
{
	while (v && v->kind == V_RESULT &&
	       (v->def->op == OP_RESHAPE || v->def->op == OP_EXPAND || v->def->op == OP_CAST ||
		v->def->op == OP_IDENTITY))
		v = v->def->in[0];
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
