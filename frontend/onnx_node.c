/*
 * onnx_node.c — the node view the per-op importers use: attributes (an
 * attribute of the wrong kind fails the node), inputs materialised on
 * demand, outputs bound to IR values, folded values or aliases, and
 * constants built at the node's location.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* --- attributes ---------------------------------------------------------- */

const Onnx__AttributeProto *
ox_attr(const ONode *n, const char *name)
{
	for (size_t i = 0; i < n->np->n_attribute; i++)
		if (n->np->attribute[i]->name && strcmp(n->np->attribute[i]->name, name) == 0)
			return n->np->attribute[i];
	return NULL;
}

/* An attribute of the wrong kind fails the node (b->err), with a diagnostic. */
static int
attr_kind(const ONode *n, const Onnx__AttributeProto *a, int type, int present,
	  const char *what)
{
	if (present && (!a->has_type || a->type == (Onnx__AttributeProto__AttributeType)type ||
			a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED))
		return 1;
	ox_err((ONode *)n, "attribute '%s' must be %s", a->name, what);
	n->b->err = 1;
	return 0;
}

int64_t
ox_attr_i(const ONode *n, const char *name, int64_t def)
{
	const Onnx__AttributeProto *a = ox_attr(n, name);

	if (!a || !attr_kind(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, a->has_i,
			     "an integer"))
		return def;
	return a->i;
}

double
ox_attr_f(const ONode *n, const char *name, double def)
{
	const Onnx__AttributeProto *a = ox_attr(n, name);

	if (a && a->has_i && !a->has_f)	/* an integer where a float is due: take it */
		return (double)a->i;
	if (!a || !attr_kind(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, a->has_f,
			     "a float"))
		return def;
	return a->f;
}

const char *
ox_attr_s(const ONode *n, const char *name, const char *def)
{
	const Onnx__AttributeProto *a = ox_attr(n, name);

	if (!a || !attr_kind(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, a->has_s,
			     "a string"))
		return def;
	if (!a->s.len)
		return "";
	return arena_strndup(n->c->tmp, (const char *)a->s.data, a->s.len);
}

/* Number of ints, -1 if absent; up to max are stored. */
int
ox_attr_ints(const ONode *n, const char *name, int64_t *out, int max)
{
	const Onnx__AttributeProto *a = ox_attr(n, name);

	if (!a || !attr_kind(n, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS,
			     a->n_ints || !a->has_i, "a list of integers"))
		return -1;
	for (size_t i = 0; i < a->n_ints && (int)i < max; i++)
		out[i] = a->ints[i];
	return a->n_ints > (size_t)INT32_MAX ? INT32_MAX : (int)a->n_ints;
}

/* --- inputs and outputs -------------------------------------------------- */

int
ox_has(const ONode *n, int i)
{
	return i < n->nin && n->in[i];
}

Value *
ox_in(ONode *n, int i)
{
	return ox_has(n, i) ? ox_value(n->c, n->in[i]) : NULL;
}

const Known *
ox_kin(const ONode *n, int i)
{
	return ox_has(n, i) ? n->in[i]->k : NULL;
}

const Type *
ox_tin(const ONode *n, int i)
{
	return ox_type(n->in[i]);
}

void
ox_alias(ONode *n, int i, OVal *src)
{
	OVal *o = i < n->nout ? n->out[i] : NULL;

	if (!o)
		return;
	o->v = src->v;
	o->k = src->k;
	o->seq = src->seq;
	o->nseq = src->nseq;
	o->type = *ox_type(src);
	o->state = 1;
}

int
ox_set(ONode *n, int i, Value *v)
{
	OVal *o = i < n->nout ? n->out[i] : NULL;

	if (!v)
		return -1;
	if (!ir_type_ok(n->c->m, &v->type))	/* dims an importer set from data */
		return ox_err(n, "the result would have more than 2^48 elements");
	if (!o)
		return 0;
	for (int j = 0; j < n->nin; j++)
		if (n->in[j] && n->in[j]->v == v) {
			ox_alias(n, i, n->in[j]);
			return 0;
		}
	if (v->kind == V_RESULT)
		ir_set_name(n->c->g, v, o->name);
	o->v = v;
	o->state = 1;
	return 0;
}

void
ox_set_known(ONode *n, int i, Known *k)
{
	OVal *o = i < n->nout ? n->out[i] : NULL;

	if (!o)
		return;
	o->k = k;
	o->v = NULL;
	o->type = ir_type(k->dt, k->rank, k->dim);
	o->state = 1;
}

/* Bind a result that folding may have computed: fully known values stay
 * lazy; otherwise the IR value carries what is known. */
int
ox_done(ONode *n, int i, Known *k, Value *v)
{
	if (k && ox_known_static(k)) {
		ox_set_known(n, i, k);
		return 0;
	}
	if (ox_set(n, i, v))
		return -1;
	if (k && i < n->nout && n->out[i] && n->out[i]->v == v)
		n->out[i]->k = k;
	return 0;
}

int
ox_axis(ONode *n, int64_t axis, int rank, int64_t *out)
{
	if (axis < -rank || axis >= rank)
		return ox_err(n, "axis %lld is out of range for rank %d", (long long)axis, rank);
	*out = axis < 0 ? axis + rank : axis;
	return 0;
}

/* --- constants ----------------------------------------------------------- */

Value *
ox_const(Builder *b, const Known *k)
{
	Module *m = b->g->m;
	Node *n = ir_new_node(b->g, OP_CONST, NULL, 0, 1);
	int64_t *iv;

	n->loc = b->loc;
	n->out[0]->type = ir_type(k->dt, k->rank, k->dim);
	if (k->fv) {
		ir_set_floats(m, n, "value", k->fv, (int)k->n);
	} else {
		iv = arena_array(m->arena, int64_t, k->n + 1);
		for (int64_t i = 0; i < k->n; i++)
			iv[i] = k->iv[i].v;
		ir_set_ints(m, n, "value", iv, (int)k->n);
	}
	if (ir_infer(b->g, n, b->d) != 0) {
		b->err = 1;
		return NULL;
	}
	ir_insert(b->g, b->before, n);
	return n->out[0];
}

/* A scalar of any type. */
Value *
ox_scalar(Builder *b, DType dt, double v)
{
	Known k = {.dt = dt, .n = 1};
	SInt s = {0, SI_NUM};

	if (dtype_is_float(dt)) {
		k.fv = &v;
	} else {	/* out of range saturates, as dtype_store does */
		s.v = v != v ? 0 : v >= 0x1p63 ? INT64_MAX : v <= -0x1p63 ? INT64_MIN : (int64_t)v;
		k.iv = &s;
	}
	return ox_const(b, &k);
}

Value *
ox_consti(Builder *b, const int64_t *v, int n)
{
	return ir_b_const_i(b, DT_I64, v, n, 1);
}
