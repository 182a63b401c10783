/*
 * onnx_fold.c — values known at import time and the arithmetic over them.
 *
 * Exporters compute shapes at run time: Shape -> Gather -> Unsqueeze ->
 * Concat -> Reshape.  The importer tracks, for every small integer tensor,
 * what each element is: a number, a symbolic dim (batch, 2*batch*seq) or
 * unknown, and evaluates the integer ops over that, so the consumer can take
 * the result as an attribute (reshape shape=[batch*seq,32]).  Float tensors
 * are tracked only when tiny and fully constant (Clip bounds, scalars).
 *
 * Symbolic arithmetic is exact or gives up: an element becomes unknown
 * rather than wrong.  Dims are assumed >= 0 (so Equal(dim, -1) is false).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

Known *
ox_known_new(Ctx *c, DType dt, int rank, const int64_t *dim)
{
	Known *k = arena_alloc(c->tmp, sizeof *k);

	k->dt = dt;
	k->rank = rank;
	k->n = 1;
	for (int i = 0; i < rank; i++) {
		k->dim[i] = dim[i];
		k->n *= dim[i];
	}
	if (dtype_is_float(dt))
		k->fv = arena_array(c->tmp, double, k->n + 1);
	else
		k->iv = arena_array(c->tmp, SInt, k->n + 1);
	return k;
}

int
ox_known_static(const Known *k)
{
	if (!k)
		return 0;
	for (int64_t i = 0; k->iv && i < k->n; i++)
		if (k->iv[i].kind != SI_NUM)
			return 0;
	return 1;
}

int
ox_known_ints(const Known *k, int64_t *out, int max)
{
	if (!k || !k->iv || k->n > max || !ox_known_static(k))
		return -1;
	for (int64_t i = 0; i < k->n; i++)
		out[i] = k->iv[i].v;
	return (int)k->n;
}

/* A shape vector as dims: every element a number >= 0 or a symbolic dim. */
int
ox_known_dims(Ctx *c, const Known *k, Dim *out, int max)
{
	(void)c;
	if (!k || !k->iv || k->rank > 1 || k->n > max)
		return -1;
	for (int64_t i = 0; i < k->n; i++) {
		const SInt *s = &k->iv[i];
		if (s->kind == SI_UNK || (s->kind == SI_NUM && s->v < 0))
			return -1;
		out[i] = s->v;
	}
	return (int)k->n;
}

/* An element from a dim: a number, a symbol product, or unknown ("?"). */
SInt
ox_si_dim(Module *m, Dim d)
{
	if (d >= 0)
		return (SInt){d, SI_NUM};
	if (ir_dim_has_unknown(m, d))
		return (SInt){0, SI_UNK};
	return (SInt){d, SI_DIM};
}

Known *
ox_known_shape_of(Ctx *c, const Type *t)
{
	int64_t r = t->rank;
	Known *k = ox_known_new(c, DT_I64, 1, &r);

	for (int i = 0; i < t->rank; i++)
		k->iv[i] = ox_si_dim(c->m, t->dim[i]);
	return k;
}

/* --- symbolic integer arithmetic ----------------------------------------- */

static const SInt UNK = {0, SI_UNK};

static SInt
num(int64_t v)
{
	return (SInt){v, SI_NUM};
}

static int
same_atoms(const Module *m, Dim a, Dim b)
{
	const DimExpr *x = ir_dim_expr(m, a), *y = ir_dim_expr(m, b);

	return x && y && x->natom == y->natom &&
	       memcmp(x->atom, y->atom, sizeof(int) * (size_t)x->natom) == 0;
}

/* a / b for symbolic dims when b's atoms are a sub-multiset of a's. */
static SInt
dim_div(Module *m, Dim a, Dim b)
{
	const DimExpr *x = ir_dim_expr(m, a), *y = ir_dim_expr(m, b);
	int used[DIM_MAXATOM] = {0};
	Dim r;

	if (!x || !y || y->coef == 0 || x->coef % y->coef)
		return UNK;
	for (int j = 0; j < y->natom; j++) {
		int found = 0;
		for (int i = 0; i < x->natom && !found; i++)
			if (!used[i] && x->atom[i] == y->atom[j])
				used[i] = found = 1;
		if (!found)
			return UNK;
	}
	r = x->coef / y->coef;
	for (int i = 0; i < x->natom; i++)
		if (!used[i])
			r = ir_dim_mul(m, r, ir_dim_sym(m, ir_atom_name(m, x->atom[i])));
	return ox_si_dim(m, r);
}

/* Divide a (a dim or number) by b; exact or unknown. */
SInt
ox_si_div(Module *m, SInt a, SInt b)
{
	if (a.kind == SI_UNK || b.kind == SI_UNK)
		return UNK;
	if (b.kind == SI_NUM) {
		if (b.v == 0)
			return UNK;
		if (a.kind == SI_NUM)
			return b.v == -1 && a.v == INT64_MIN ? UNK : num(a.v / b.v);
		if (b.v < 0)
			return UNK;
		return ox_si_dim(m, ir_dim_div(m, a.v, b.v));
	}
	if (a.kind == SI_NUM)
		return a.v == 0 ? num(0) : UNK;
	return dim_div(m, a.v, b.v);
}

static SInt
si_add(Module *m, SInt a, SInt b, int sign)
{
	int64_t r;

	if (a.kind == SI_UNK || b.kind == SI_UNK)
		return UNK;
	if (a.kind == SI_NUM && b.kind == SI_NUM) {
		if (sign > 0 ? __builtin_add_overflow(a.v, b.v, &r)
			     : __builtin_sub_overflow(a.v, b.v, &r))
			return UNK;
		return num(r);
	}
	if (b.kind == SI_NUM && b.v == 0)
		return a;
	if (sign > 0 && a.kind == SI_NUM && a.v == 0)
		return b;
	if (a.kind == SI_DIM && b.kind == SI_DIM && same_atoms(m, a.v, b.v)) {
		int64_t ca = ir_dim_expr(m, a.v)->coef, cb = ir_dim_expr(m, b.v)->coef;
		int64_t cr;
		if ((sign > 0 ? __builtin_add_overflow(ca, cb, &cr) : __builtin_sub_overflow(ca, cb, &cr)) ||
		    cr < 0)
			return UNK;
		return ox_si_dim(m, ir_dim_mul(m, ir_dim_div(m, a.v, ca), cr));
	}
	if (sign > 0 && a.kind == SI_DIM && b.kind == SI_DIM)
		return ox_si_dim(m, ir_dim_add(m, a.v, b.v));
	return UNK;
}

static SInt
si_mul(Module *m, SInt a, SInt b)
{
	int64_t r;

	if (a.kind == SI_NUM && b.kind == SI_NUM)
		return __builtin_mul_overflow(a.v, b.v, &r) ? UNK : num(r);
	if ((a.kind == SI_NUM && a.v == 0) || (b.kind == SI_NUM && b.v == 0))
		return num(0);
	if (a.kind == SI_UNK || b.kind == SI_UNK)
		return UNK;
	if ((a.kind == SI_NUM && a.v < 0) || (b.kind == SI_NUM && b.v < 0))
		return UNK;
	return ox_si_dim(m, ir_dim_mul(m, a.v, b.v));
}

/* Comparisons: -1 unknown, else 0 or 1.  Dims are >= 0. */
static int
si_cmp(SInt a, SInt b, int *lt, int *eq)
{
	if (a.kind == SI_NUM && b.kind == SI_NUM) {
		*lt = a.v < b.v;
		*eq = a.v == b.v;
		return 0;
	}
	if (a.kind == SI_DIM && b.kind == SI_DIM && a.v == b.v) {
		*lt = 0;
		*eq = 1;
		return 0;
	}
	if (a.kind == SI_DIM && b.kind == SI_NUM && b.v < 0) {
		*lt = 0;
		*eq = 0;
		return 0;
	}
	if (a.kind == SI_NUM && b.kind == SI_DIM && a.v < 0) {
		*lt = 1;
		*eq = 0;
		return 0;
	}
	return -1;
}

static SInt
si_binary(Module *m, const char *op, SInt a, SInt b)
{
	int lt, eq;

	if (!strcmp(op, "Add"))
		return si_add(m, a, b, 1);
	if (!strcmp(op, "Sub"))
		return si_add(m, a, b, -1);
	if (!strcmp(op, "Mul"))
		return si_mul(m, a, b);
	if (!strcmp(op, "Div"))
		return ox_si_div(m, a, b);
	if (!strcmp(op, "Mod") || !strcmp(op, "FMod")) {	/* onnx_ops.c imp_mod */
		if (a.kind != SI_NUM || b.kind != SI_NUM || b.v == 0)
			return UNK;
		int64_t r = b.v == -1 ? 0 : a.v % b.v;
		return num(!strcmp(op, "Mod") && r != 0 && (r < 0) != (b.v < 0) ? r + b.v : r);
	}
	if (!strcmp(op, "And") || !strcmp(op, "Or")) {
		if (a.kind != SI_NUM || b.kind != SI_NUM)
			return UNK;
		return num(!strcmp(op, "And") ? (a.v && b.v) : (a.v || b.v));
	}
	if (si_cmp(a, b, &lt, &eq) != 0)
		return UNK;
	if (!strcmp(op, "Equal")) return num(eq);
	if (!strcmp(op, "Less")) return num(lt);
	if (!strcmp(op, "LessOrEqual")) return num(lt || eq);
	if (!strcmp(op, "Greater")) return num(!lt && !eq);
	if (!strcmp(op, "GreaterOrEqual")) return num(!lt);
	if (!strcmp(op, "Min")) return lt || eq ? a : b;
	if (!strcmp(op, "Max")) return lt ? b : a;
	return UNK;
}

/* Round v to a float type, as an op computing in that type would. */
static double
fround(DType dt, double v)
{
	unsigned char buf[8];

	dtype_store(dt, buf, 0, v);
	return dtype_load(dt, buf, 0);
}

static int
f_binary(const char *op, double a, double b, double *r)
{
	if (!strcmp(op, "Add")) *r = a + b;
	else if (!strcmp(op, "Sub")) *r = a - b;
	else if (!strcmp(op, "Mul")) *r = a * b;
	else if (!strcmp(op, "Div")) *r = a / b;
	else if (!strcmp(op, "FMod")) *r = fmod(a, b);
	else if (!strcmp(op, "Min")) *r = isnan(a) || isnan(b) ? NAN : fmin(a, b);
	else if (!strcmp(op, "Max")) *r = isnan(a) || isnan(b) ? NAN : fmax(a, b);
	else if (!strcmp(op, "Equal")) *r = a == b;
	else if (!strcmp(op, "Less")) *r = a < b;
	else if (!strcmp(op, "LessOrEqual")) *r = a <= b;
	else if (!strcmp(op, "Greater")) *r = a > b;
	else if (!strcmp(op, "GreaterOrEqual")) *r = a >= b;
	else return -1;
	return 0;
}

static int
is_compare(const char *op)
{
	return !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "LessOrEqual") ||
	       !strcmp(op, "Greater") || !strcmp(op, "GreaterOrEqual");
}

/* --- broadcasting -------------------------------------------------------- */

/* Static numpy broadcast of known shapes; -1 if incompatible. */
static int
bshape(const Known *a, const Known *b, int *rank, int64_t *dim)
{
	int r = MAX(a->rank, b->rank);

	for (int i = 0; i < r; i++) {
		int ia = i - (r - a->rank), ib = i - (r - b->rank);
		int64_t x = ia >= 0 ? a->dim[ia] : 1, y = ib >= 0 ? b->dim[ib] : 1;
		if (x != y && x != 1 && y != 1)
			return -1;
		dim[i] = x == 1 ? y : x;
	}
	*rank = r;
	return 0;
}

/* Flat index into k of output element oi (output shape odim, rank orank). */
static int64_t
bindex(const Known *k, const int64_t *odim, int orank, int64_t oi)
{
	int64_t idx = 0, stride = 1;

	for (int i = orank - 1; i >= 0; i--) {
		int64_t c = oi % odim[i];
		int ki = i - (orank - k->rank);
		oi /= odim[i];
		if (ki < 0)
			continue;
		if (k->dim[ki] != 1)
			idx += c * stride;
		stride *= k->dim[ki];
	}
	return idx;
}

Known *
ox_fold_binary(Ctx *c, const char *op, const Known *a, const Known *b)
{
	int64_t dim[MAXRANK], n = 1;
	int rank, cmp = is_compare(op);
	Known *k;

	if (!a || !b || a->dt != b->dt || bshape(a, b, &rank, dim))
		return NULL;
	for (int i = 0; i < rank; i++)
		n *= dim[i];
	if (n > (a->fv ? OX_KNOWN_FMAX : OX_KNOWN_MAX))
		return NULL;
	k = ox_known_new(c, cmp ? DT_BOOL : a->dt, rank, dim);
	for (int64_t i = 0; i < n; i++) {
		int64_t ia = bindex(a, dim, rank, i), ib = bindex(b, dim, rank, i);
		if (a->fv) {
			double r;
			if (f_binary(op, a->fv[ia], b->fv[ib], &r))
				return NULL;
			if (cmp)
				k->iv[i] = num((int64_t)r);
			else
				k->fv[i] = fround(a->dt, r);
		} else {
			SInt r = si_binary(c->m, op, a->iv[ia], b->iv[ib]);
			if (r.kind == SI_NUM && !cmp && a->dt != DT_I64) {
				unsigned char buf[8];
				dtype_store_int(a->dt, buf, 0, r.v);
				r.v = dtype_load_int(a->dt, buf, 0);
			}
			k->iv[i] = r;
		}
	}
	return k;
}

/* Where(cond, x, y) over known tensors. */
Known *
ox_fold_where(Ctx *c, const Known *cond, const Known *x, const Known *y)
{
	int64_t d1[MAXRANK], dim[MAXRANK], n = 1;
	int r1, rank;
	Known t, *k;

	if (!cond || !x || !y || x->dt != y->dt || !cond->iv || bshape(x, y, &r1, d1))
		return NULL;
	memset(&t, 0, sizeof t);
	t.rank = r1;
	memcpy(t.dim, d1, sizeof d1);
	if (bshape(&t, cond, &rank, dim))
		return NULL;
	for (int i = 0; i < rank; i++)
		n *= dim[i];
	if (n > (x->fv ? OX_KNOWN_FMAX : OX_KNOWN_MAX))
		return NULL;
	k = ox_known_new(c, x->dt, rank, dim);
	for (int64_t i = 0; i < n; i++) {
		SInt s = cond->iv[bindex(cond, dim, rank, i)];
		if (s.kind != SI_NUM)
			return NULL;
		const Known *src = s.v ? x : y;
		int64_t j = bindex(src, dim, rank, i);
		if (k->fv)
			k->fv[i] = src->fv[j];
		else
			k->iv[i] = src->iv[j];
	}
	return k;
}

/* Neg, Abs, Not, Cast (to), Identity. */
Known *
ox_fold_unary(Ctx *c, const char *op, const Known *a, DType to)
{
	int cast = !strcmp(op, "Cast");
	DType dt = cast ? to : a ? a->dt : DT_F32;
	Known *k;

	if (!a)
		return NULL;
	if (dtype_is_float(dt) && (a->n > OX_KNOWN_FMAX || !ox_known_static(a)))
		return NULL;
	k = ox_known_new(c, dt, a->rank, a->dim);
	for (int64_t i = 0; i < a->n; i++) {
		if (a->fv || k->fv) {
			double v = a->fv ? a->fv[i] : (double)a->iv[i].v;
			if (!strcmp(op, "Neg")) v = -v;
			else if (!strcmp(op, "Abs")) v = fabs(v);
			else if (!cast && strcmp(op, "Identity")) return NULL;
			if (k->fv)
				k->fv[i] = fround(dt, v);
			else if (dt == DT_BOOL)
				k->iv[i] = num(v != 0);
			else if (v != trunc(v) || fabs(v) > 9e18)
				return NULL;	/* rounding mode of the cast: leave it to the op */
			else
				k->iv[i] = num((int64_t)v);
			continue;
		}
		SInt s = a->iv[i];
		if (!strcmp(op, "Not"))
			s = s.kind == SI_NUM ? num(!s.v) : UNK;
		else if (!strcmp(op, "Neg"))
			s = s.kind == SI_NUM && s.v != INT64_MIN ? num(-s.v) : UNK;
		else if (!strcmp(op, "Abs"))
			s = s.kind == SI_NUM ? (s.v == INT64_MIN ? UNK : num(s.v < 0 ? -s.v : s.v)) : s;
		else if (cast && dt == DT_BOOL)
			s = s.kind == SI_NUM ? num(s.v != 0) : UNK;
		else if (cast && s.kind == SI_NUM) {
			unsigned char buf[8];
			dtype_store_int(dt, buf, 0, s.v);
			s.v = dtype_load_int(dt, buf, 0);
		} else if (cast && s.kind == SI_DIM && dt != DT_I64 && dt != DT_I32)
			s = UNK;
		k->iv[i] = s;
	}
	return k;
}

/* The same elements under another (static) shape. */
Known *
ox_known_reshape(Ctx *c, const Known *a, int rank, const int64_t *dim)
{
	Known *k;
	int64_t n = 1;

	if (!a)
		return NULL;
	for (int i = 0; i < rank; i++)	/* the count first: dims can be huge */
		if (dim[i] < 0 || __builtin_mul_overflow(n, dim[i], &n))
			return NULL;
	if (n != a->n)
		return NULL;
	k = ox_known_new(c, a->dt, rank, dim);
	if (a->fv)
		memcpy(k->fv, a->fv, sizeof(double) * (size_t)a->n);
	else
		memcpy(k->iv, a->iv, sizeof(SInt) * (size_t)a->n);
	return k;
}

/* Broadcast a known tensor to a static shape (Expand). */
Known *
ox_known_expand(Ctx *c, const Known *a, int rank, const int64_t *dim)
{
	Known t, *k;
	int64_t od[MAXRANK], n = 1;
	int orank;

	memset(&t, 0, sizeof t);
	t.rank = rank;
	memcpy(t.dim, dim, sizeof(int64_t) * (size_t)rank);
	if (!a || bshape(a, &t, &orank, od))
		return NULL;
	for (int i = 0; i < orank; i++)	/* the target shape may be huge */
		if (od[i] < 0 || __builtin_mul_overflow(n, od[i], &n))
			return NULL;
	if (n > (a->fv ? OX_KNOWN_FMAX : OX_KNOWN_MAX))
		return NULL;
	k = ox_known_new(c, a->dt, orank, od);
	for (int64_t i = 0; i < n; i++) {
		int64_t j = bindex(a, od, orank, i);
		if (k->fv)
			k->fv[i] = a->fv[j];
		else
			k->iv[i] = a->iv[j];
	}
	return k;
}

/* An all-unknown record for a small static integer value that has none. */
Known *
ox_known_or_unk(Ctx *c, const OVal *o)
{
	const Type *t;
	int64_t n;
	Known *k;

	if (!o)
		return NULL;
	if (o->k)
		return o->k;
	t = ox_type(o);
	n = ir_type_numel(t);
	if (n < 0 || n > OX_KNOWN_MAX || dtype_is_float(t->dt))
		return NULL;
	k = ox_known_new(c, t->dt, t->rank, t->dim);
	for (int64_t i = 0; i < n; i++)
		k->iv[i] = UNK;
	return k;
}

/* Fill unknown dims of v's type from want (same dtype and rank). */
int
ox_refine(Ctx *c, Value *v, const Type *want)
{
	Type t;

	if (!v || v->type.rank != want->rank || v->type.dt != want->dt)
		return 0;
	t = v->type;
	for (int i = 0; i < want->rank; i++)
		if (ir_dim_has_unknown(c->m, t.dim[i]) && !ir_dim_has_unknown(c->m, want->dim[i]))
			t.dim[i] = want->dim[i];
	if (ir_type_ok(c->m, &t))	/* else the declaration is not believed */
		v->type = t;
	return 0;
}

/* What is known of input i, all-unknown if only its small type is. */
Known *
ox_kor(ONode *n, int i)
{
	return ox_has(n, i) ? ox_known_or_unk(n->c, n->in[i]) : NULL;
}

/* Product of dims [from, to) as an element. */
SInt
ox_dim_prod(Module *m, const Type *t, int from, int to)
{
	SInt r = {1, SI_NUM};

	for (int i = from; i < to; i++) {
		SInt s = ox_si_dim(m, t->dim[i]);
		if (s.kind == SI_UNK || r.kind == SI_UNK)
			return (SInt){0, SI_UNK};
		if (s.kind == SI_NUM && r.kind == SI_NUM) {
			if (__builtin_mul_overflow(r.v, s.v, &r.v))
				return (SInt){0, SI_UNK};
			continue;
		}
		r = ox_si_dim(m, ir_dim_mul(m, r.v, s.v));
	}
	return r;
}

/* A shape's static part must stay below 2^48 elements. */
int
ox_dims_ok(ONode *n, int rank, const Dim *dims)
{
	int64_t p = 1;

	for (int i = 0; i < rank; i++)
		if (dims[i] > 0 && (__builtin_mul_overflow(p, dims[i], &p) || p >> 48))
			return ox_err(n, "the result would have more than 2^48 elements");
	return 0;
}
