/*
 * match.h — plain C helpers for matching patterns in the graph, shared by
 * the passes that recognise what exporters write (canon, fuse-moe, ...).
 *
 * Everything here is static and reads the graph only.  Helpers that look at
 * users (sole_user) need ir_fill_uses to be current.  Values are compared
 * with same_value: the same Value, or two nodes computing the same thing
 * from the same operands (what cse would merge), so a pattern still matches
 * before cse has run.  Constants match with a tolerance that follows the
 * dtype they were written in (exporters write f32 or narrower).
 */
#ifndef MOEC_MATCH_H
#define MOEC_MATCH_H

#include <math.h>
#include <string.h>

#include "passes.h"

/* The node defining v when it is op's (first) result; NULL otherwise. */
static inline Node *
def_op(const Value *v, Op op)
{
	if (!v || v->kind != V_RESULT || v->def->op != op || v->resno != 0)
		return NULL;
	return v->def;
}

/* The only user of v (a node, not a graph result), or NULL. */
static inline Node *
sole_user(const Value *v)
{
	return v->nuse == 1 ? v->use[0].node : NULL;
}

static inline int
unknown_dim(const Value *v, Dim d)
{
	return d < 0 && v->graph && ir_dim_has_unknown(v->graph->m, d);
}

/* Same dtype and dims, where a "?" dim (data-dependent, which the text form
 * cannot tie to another "?") is like any other. */
static inline int
type_like(const Value *a, const Value *b)
{
	if (a->type.dt != b->type.dt || a->type.rank != b->type.rank)
		return 0;
	for (int i = 0; i < a->type.rank; i++) {
		Dim x = a->type.dim[i], y = b->type.dim[i];
		if (x != y && !unknown_dim(a, x) && !unknown_dim(b, y))
			return 0;
	}
	return 1;
}

static inline int
attr_same(const Attr *a, const Attr *b)
{
	if (a->key != b->key || a->kind != b->kind || a->n != b->n)
		return 0;
	switch (a->kind) {
	case A_INT: return a->u.i == b->u.i;
	case A_FLOAT: return a->u.f == b->u.f;
	case A_STR: return a->u.s == b->u.s;	/* interned */
	default: return memcmp(a->u.ints, b->u.ints, sizeof(int64_t) * (size_t)a->n) == 0;
	}
}

/* Same value, or computed the same way from the same operands (a few
 * levels deep): two `sub %x, %m` the exporter wrote twice, say. */
static inline int
same_value_depth(const Value *a, const Value *b, int depth)
{
	const Node *x, *y;

	if (a == b)
		return 1;
	if (!a || !b || depth <= 0 || a->kind != V_RESULT || b->kind != V_RESULT)
		return 0;
	x = a->def, y = b->def;
	if (x->op != y->op || x->op == OP_CALL || a->resno != b->resno || x->nin != y->nin ||
	    x->nattr != y->nattr || !type_like(a, b))
		return 0;
	for (int i = 0; i < x->nattr; i++)
		if (!attr_same(&x->attr[i], &y->attr[i]))
			return 0;
	for (int i = 0; i < x->nin; i++)
		if (!same_value_depth(x->in[i], y->in[i], depth - 1))
			return 0;
	return 1;
}

static inline int
same_value(const Value *a, const Value *b)
{
	return same_value_depth(a, b, 4);
}

/*
 * v is a constant (a `const`, or a small weight with data) whose elements
 * are all equal: *out gets the value and *dt the dtype it was written in.
 */
static inline int
const_scalar(const Value *v, double *out, DType *dt)
{
	const Attr *a;
	int64_t n;

	if (!v)
		return 0;
	if (v->kind == V_WEIGHT) {
		n = ir_type_numel(&v->type);
		if (!v->weight->data || n < 1 || n > 4096)
			return 0;
		*out = dtype_load(v->type.dt, v->weight->data, 0);
		for (int64_t i = 1; i < n; i++)
			if (dtype_load(v->type.dt, v->weight->data, (size_t)i) != *out)
				return 0;
		*dt = v->type.dt;
		return 1;
	}
	if (!def_op(v, OP_CONST) || !(a = ir_attr(v->def, "value")) || a->n < 1)
		return 0;
	if (a->kind != A_INTS && a->kind != A_FLOATS)
		return 0;
	for (int i = 0; i < a->n; i++) {
		double x = a->kind == A_INTS ? (double)a->u.ints[i] : a->u.floats[i];
		if (i == 0)
			*out = x;
		else if (x != *out)
			return 0;
	}
	*dt = v->type.dt;
	return 1;
}

/* x equals want up to the rounding of a constant written in dtype dt. */
static inline int
near(double x, double want, DType dt)
{
	double rtol;

	switch (dt) {
	case DT_F16: rtol = 1e-3; break;
	case DT_BF16: rtol = 8e-3; break;
	case DT_F8E4M3: case DT_F8E5M2: rtol = 0.07; break;
	default: rtol = 1e-6; break;	/* f32 (exporters' usual), f64, ints */
	}
	return fabs(x - want) <= rtol * fabs(want);
}

/* v is a constant whose elements are all (about) want. */
static inline int
const_near(const Value *v, double want)
{
	double x;
	DType dt;

	return const_scalar(v, &x, &dt) && near(x, want, dt);
}

/* n reduces exactly the last axis of its operand, keeping it as 1. */
static inline int
reduces_last_axis(const Node *n, Op op)
{
	int64_t axes[MAXRANK];
	int rank, na;

	if (!n || n->op != op || ir_attr_int(n, "keepdims", 1) != 1)
		return 0;
	rank = n->in[0]->type.rank;
	na = ir_attr_ints(n, "axes", axes, MAXRANK);
	if (na < 0)
		return rank == 1;
	return na == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

/* v broadcasts against [..., N] as a per-channel vector: rank <= rank,
 * every dim 1 but the last, which is N or 1. */
static inline int
per_channel(const Value *v, Dim n, int rank)
{
	const Type *t = &v->type;

	if (t->rank > rank)
		return 0;
	for (int i = 0; i + 1 < t->rank; i++)
		if (t->dim[i] != 1)
			return 0;
	return t->rank == 0 || t->dim[t->rank - 1] == n || t->dim[t->rank - 1] == 1;
}

/* Significand bits of a float type, or magnitude bits of an integer type. */
static inline int
dtype_precision(DType t)
{
	switch (t) {
	case DT_F64: return 53;
	case DT_F32: return 24;
	case DT_F16: return 11;
	case DT_BF16: return 8;
	case DT_F8E4M3: return 4;
	case DT_F8E5M2: return 3;
	case DT_BOOL: return 1;
	default: return dtype_bits(t) - !!(dtype_flags(t) & DTF_SIGNED);
	}
}

/* Largest binary exponent a float type reaches (its finite range). */
static inline int
dtype_maxexp(DType t)
{
	switch (t) {
	case DT_F16: return 15;
	case DT_F8E4M3: return 8;
	case DT_F8E5M2: return 15;
	case DT_F64: return 1023;
	default: return 127;
	}
}

/* Smallest binary exponent of a subnormal of a float type. */
static inline int
dtype_minexp(DType t)
{
	switch (t) {
	case DT_F16: return -24;
	case DT_BF16: return -133;
	case DT_F8E4M3: return -9;
	case DT_F8E5M2: return -16;
	case DT_F64: return -1074;
	default: return -149;
	}
}

/* Every value of type from survives a cast to type to unchanged. */
static inline int
exact_cast(DType from, DType to)
{
	int ff = dtype_is_float(from), tf = dtype_is_float(to);

	if (from == to || from == DT_BOOL)
		return 1;
	if (to == DT_BOOL || (ff && !tf))
		return 0;
	if (ff)	/* float to float */
		return dtype_precision(to) >= dtype_precision(from) &&
		       dtype_maxexp(to) >= dtype_maxexp(from) &&
		       dtype_minexp(to) <= dtype_minexp(from);
	if (tf)	/* integer to float: every integer of from is exact in to */
		return dtype_precision(from) <= dtype_precision(to);
	if (!(dtype_flags(to) & DTF_SIGNED) && dtype_flags(from) & DTF_SIGNED)
		return 0;
	return dtype_precision(from) <= dtype_precision(to);
}

/*
 * A product seen as coef * f[0] * f[1] * ...: muls are opened, constant
 * factors (and divisions by constants) collect in coef.  Opens at most
 * MAXFACT factors; *p is left partial (and 0 returned) beyond that.
 */
enum { MAXFACT = 6 };

typedef struct {
	double coef;
	DType cdt;		/* dtype of the least precise constant seen */
	int n;
	Value *f[MAXFACT];
} Prod;

static inline int
prod_add(Value *v, Prod *p, int depth)
{
	Node *n;
	double c;
	DType dt;

	if (const_scalar(v, &c, &dt)) {
		p->coef *= c;
		if (dtype_precision(dt) < dtype_precision(p->cdt))
			p->cdt = dt;
		return 1;
	}
	if (depth > 0 && (n = def_op(v, OP_MUL)))
		return prod_add(n->in[0], p, depth - 1) && prod_add(n->in[1], p, depth - 1);
	if (depth > 0 && (n = def_op(v, OP_DIV)) && const_scalar(n->in[1], &c, &dt) && c != 0) {
		p->coef /= c;
		if (dtype_precision(dt) < dtype_precision(p->cdt))
			p->cdt = dt;
		return prod_add(n->in[0], p, depth - 1);
	}
	if (depth > 0 && (n = def_op(v, OP_NEG))) {
		p->coef = -p->coef;
		return prod_add(n->in[0], p, depth - 1);
	}
	if (p->n == MAXFACT)
		return 0;
	p->f[p->n++] = v;
	return 1;
}

static inline int
prod_of(Value *v, Prod *p)
{
	p->coef = 1;
	p->cdt = DT_F64;
	p->n = 0;
	return prod_add(v, p, 8);
}

/* v = coef * x^pw for one base x (x*x*x, pow(x, 3), 0.5*x, x/1.41...). */
static inline int
monomial(Value *v, Value **x, double *coef, double *pw, DType *cdt)
{
	Prod p;
	Node *n;
	double k;
	DType dt;

	if (!prod_of(v, &p) || p.n == 0)
		return 0;
	*x = NULL;
	*pw = 0;
	for (int i = 0; i < p.n; i++) {
		Value *b = p.f[i];
		double e = 1;
		if ((n = def_op(b, OP_POW)) && const_scalar(n->in[1], &k, &dt))
			b = n->in[0], e = k;
		if (*x && !same_value(*x, b))
			return 0;
		*x = b;
		*pw += e;
	}
	*coef = p.coef;
	*cdt = p.cdt;
	return 1;
}

/* canon*.c: the rewrite families of the canon pass, run by canon.c. */

typedef struct {
	Graph *g;
	PassCtx *c;
	Diag quiet;		/* builds that fail leave no diagnostic */
	VEC(Node *) predead;	/* nodes dead before canon ran: left to dce */
	VEC(Node *) reported;	/* roots whose skip is in the report already */
} Canon;

Builder canon_builder(Canon *k, Node *at);
/* Whether to report why root was left alone: once per root, with a report. */
int canon_report(Canon *k, Node *root);
/* Replace root's result with nv, a result built by the rewrite: nv's node
 * takes over root's Value (its name, its place among the graph results). */
int canon_adopt(Canon *k, Node *root, Value *nv);
/* Replace root's result with v, which exists already (a no-op removed). */
int canon_forward(Canon *k, Node *root, Value *v);
/* matmul a, w[, bias] with the attributes of tmpl (to=...) and these flags. */
Value *canon_matmul(Builder *b, const Node *tmpl, Value *a, Value *w, Value *bias, int ta,
		    int tb);
Value *canon_reshape(Builder *b, Value *v, int rank, const Dim *dims);

int canon_silu(Canon *k, Node *n);
int canon_gelu(Canon *k, Node *n);
int canon_glu(Canon *k, Node *n);
int canon_norm_core(Canon *k, Node *n);
int canon_norm_input(Canon *k, Node *n);
int canon_norm_scale(Canon *k, Node *n);
int canon_norm_bias(Canon *k, Node *n);
int canon_norm_cast(Canon *k, Node *n);
int canon_bias(Canon *k, Node *n);
int canon_matmul_trans(Canon *k, Node *n);
int canon_dequant_kn(Canon *k, Node *n);
int canon_matmul_flatten(Canon *k, Node *n);
int canon_noop(Canon *k, Node *n);
int canon_reshape2(Canon *k, Node *n);
int canon_transpose2(Canon *k, Node *n);
int canon_cast2(Canon *k, Node *n);
int canon_split_transpose(Canon *k, Node *n);
int canon_topk_prefix(Canon *k, Node *n);
int canon_topk_cast(Canon *k, Node *n);
int canon_dequant_up(Canon *k, Node *n);

#endif
