/*
 * type.c — dims and types.  A symbolic dim is an interned product
 * coef * atom * atom ...; atoms are named symbols (T, batch) or unknowns ("?")
 * that data-dependent ops produce.  Interning makes equal dims compare ==.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int
ir_dim_is_static(Dim d)
{
	return d >= 0;
}

static int
add_atom(Module *m, const char *name)
{
	m->atom = ir_grow(m, m->atom, m->natom, sizeof *m->atom);
	m->atom[m->natom] = ir_intern(m, name);
	return m->natom++;
}

static Dim
intern_expr(Module *m, const DimExpr *e)
{
	for (int i = 0; i < m->ndimexpr; i++)
		if (memcmp(&m->dimexpr[i], e, sizeof *e) == 0)
			return -1 - (Dim)i;
	m->dimexpr = ir_grow(m, m->dimexpr, m->ndimexpr, sizeof *e);
	m->dimexpr[m->ndimexpr] = *e;
	return -1 - (Dim)m->ndimexpr++;
}

static DimExpr
expr_of(const Module *m, Dim d)
{
	DimExpr e;

	memset(&e, 0, sizeof e);
	if (d >= 0)
		e.coef = d;
	else
		e = m->dimexpr[-1 - d];
	return e;
}

Dim
ir_dim_sym(Module *m, const char *name)
{
	DimExpr e;
	int a = -1;

	for (int i = 0; i < m->natom; i++)
		if (strcmp(m->atom[i], name) == 0 && strcmp(name, "?") != 0)
			a = i;
	if (a < 0)
		a = add_atom(m, name);
	memset(&e, 0, sizeof e);
	e.coef = 1;
	e.natom = 1;
	e.atom[0] = a;
	return intern_expr(m, &e);
}

Dim
ir_dim_unknown(Module *m)
{
	return ir_dim_sym(m, "?");
}

int
ir_atom_is_unknown(const Module *m, int atom)
{
	return strcmp(m->atom[atom], "?") == 0;
}

int
ir_dim_has_unknown(const Module *m, Dim d)
{
	DimExpr e = expr_of(m, d);

	for (int i = 0; i < e.natom; i++)
		if (ir_atom_is_unknown(m, e.atom[i]))
			return 1;
	return 0;
}

const DimExpr *
ir_dim_expr(const Module *m, Dim d)
{
	return d < 0 ? &m->dimexpr[-1 - d] : NULL;
}

int ir_natom(const Module *m) { return m->natom; }
const char *ir_atom_name(const Module *m, int a) { return m->atom[a]; }

Dim
ir_dim_mul(Module *m, Dim a, Dim b)
{
	DimExpr x = expr_of(m, a), y = expr_of(m, b), r;
	int i = 0, j = 0;

	if (a >= 0 && b >= 0)	/* saturated: ir_type_ok refuses it */
		return __builtin_mul_overflow(a, b, &r.coef) ? INT64_MAX : r.coef;
	if (ir_dim_has_unknown(m, a) || ir_dim_has_unknown(m, b) ||
	    x.natom + y.natom > DIM_MAXATOM)
		return ir_dim_unknown(m);
	if (x.coef == 0 || y.coef == 0)
		return 0;
	memset(&r, 0, sizeof r);
	if (__builtin_mul_overflow(x.coef, y.coef, &r.coef))
		r.coef = INT64_MAX;
	while (i < x.natom || j < y.natom) {	/* merge sorted atoms */
		if (j == y.natom || (i < x.natom && x.atom[i] <= y.atom[j]))
			r.atom[r.natom++] = x.atom[i++];
		else
			r.atom[r.natom++] = y.atom[j++];
	}
	return intern_expr(m, &r);
}

/*
 * Clamping as numpy and ONNX's reference implementation do it: start into
 * [0, dim] (step > 0) or [-1, dim-1] (step < 0), end likewise.  The
 * distance is below dim, and |step| is taken in unsigned arithmetic, so
 * INT64_MIN as a step or a bound overflows nothing.
 */
void
ir_slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
	       int64_t *len)
{
	uint64_t mag = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;

	if (start < 0)
		start = start < -dim ? -1 : start + dim;
	if (end < 0)
		end = end < -dim ? -1 : end + dim;
	if (step > 0) {
		start = MAX(0, MIN(start, dim));
		end = MAX(0, MIN(end, dim));
		*len = end > start ? (int64_t)((uint64_t)(end - start - 1) / mag) + 1 : 0;
	} else {
		start = MAX(-1, MIN(start, dim - 1));
		end = MAX(-1, MIN(end, dim - 1));
		*len = start > end ? (int64_t)((uint64_t)(start - end - 1) / mag) + 1 : 0;
	}
	*first = start;
}

int64_t
ir_range_len(int64_t start, int64_t limit, int64_t delta)
{
	__int128 span = (__int128)limit - start, n;

	if ((span > 0) != (delta > 0) || span == 0)
		return 0;
	n = (span + delta + (delta > 0 ? -1 : 1)) / delta;	/* ceil, both signs positive */
	return n > INT64_MAX ? INT64_MAX : (int64_t)n;
}

Dim
ir_dim_add(Module *m, Dim a, Dim b)
{
	DimExpr x = expr_of(m, a), y = expr_of(m, b);

	if (a >= 0 && b >= 0)
		return a > INT64_MAX - b ? INT64_MAX : a + b;
	if (a == 0)
		return b;
	if (b == 0)
		return a;
	if (a < 0 && b < 0 && !ir_dim_has_unknown(m, a) && x.natom == y.natom &&
	    memcmp(x.atom, y.atom, sizeof x.atom) == 0) {
		if (__builtin_add_overflow(x.coef, y.coef, &x.coef))
			x.coef = INT64_MAX;
		return intern_expr(m, &x);
	}
	return ir_dim_unknown(m);
}

Dim
ir_dim_div(Module *m, Dim a, int64_t c)
{
	DimExpr x = expr_of(m, a);

	if (c <= 0)
		return ir_dim_unknown(m);
	if (a >= 0)
		return a % c == 0 ? a / c : ir_dim_unknown(m);
	if (ir_dim_has_unknown(m, a) || x.coef % c != 0)
		return ir_dim_unknown(m);
	x.coef /= c;
	return intern_expr(m, &x);
}

int
ir_dim_compatible(const Module *m, Dim a, Dim b)
{
	if (a == b)
		return 1;
	if (a >= 0 && b >= 0)
		return 0;
	return 1;	/* symbolic dims may bind to anything at run time */
}

int
ir_dim_eval(const Module *m, Dim d, const DimEnv *env, int64_t *out)
{
	DimExpr e;
	int64_t v;

	if (d >= 0) {
		*out = d;
		return 0;
	}
	e = expr_of(m, d);
	v = e.coef;
	for (int i = 0; i < e.natom; i++) {
		int a = e.atom[i];
		if (!env || a >= env->n || env->val[a] < 0)
			return -1;
		if (env->val[a] && v > INT64_MAX / env->val[a])
			return -1;
		v *= env->val[a];
	}
	*out = v;
	return 0;
}

int
ir_dim_print(char *buf, size_t n, const Module *m, Dim d)
{
	DimExpr e;
	size_t k = 0;

	if (d >= 0)
		return snprintf(buf, n, "%lld", (long long)d);
	if (ir_dim_has_unknown(m, d))
		return snprintf(buf, n, "?");
	e = expr_of(m, d);
	if (e.coef != 1)
		k = (size_t)snprintf(buf, n, "%lld", (long long)e.coef);
	for (int i = 0; i < e.natom; i++)
		k += (size_t)snprintf(buf + MIN(k, n), n - MIN(k, n), "%s%s",
				      k ? "*" : "", m->atom[e.atom[i]]);
	return (int)k;
}

int
ir_type_print(char *buf, size_t n, const Module *m, const Type *t)
{
	size_t k = (size_t)snprintf(buf, n, "%s[", dtype_name(t->dt));

	for (int i = 0; i < t->rank; i++) {
		if (i)
			k += (size_t)snprintf(buf + MIN(k, n), n - MIN(k, n), ",");
		k += (size_t)ir_dim_print(buf + MIN(k, n), n - MIN(k, n), m, t->dim[i]);
	}
	k += (size_t)snprintf(buf + MIN(k, n), n - MIN(k, n), "]");
	return (int)k;
}

int
ir_type_eq(const Type *a, const Type *b)
{
	return a->dt == b->dt && a->rank == b->rank &&
	       memcmp(a->dim, b->dim, sizeof(Dim) * (size_t)a->rank) == 0;
}

int
ir_type_static(const Type *t)
{
	for (int i = 0; i < t->rank; i++)
		if (t->dim[i] < 0)
			return 0;
	return 1;
}

int64_t
ir_type_numel(const Type *t)
{
	int64_t n = 1;

	if (!ir_type_static(t))
		return -1;
	for (int i = 0; i < t->rank; i++)
		if (__builtin_mul_overflow(n, t->dim[i], &n))
			return -1;
	return n;
}

int
ir_type_ok(const Module *m, const Type *t)
{
	int64_t n = 1;

	if (t->rank < 0 || t->rank > MAXRANK)
		return 0;
	for (int i = 0; i < t->rank; i++) {
		int64_t c = t->dim[i] >= 0 ? t->dim[i] : m->dimexpr[-1 - t->dim[i]].coef;
		if (c < 0 || c > IR_MAX_NUMEL || __builtin_mul_overflow(n, c, &n))
			return 0;
	}
	return n <= IR_MAX_NUMEL;
}

Type
ir_type(DType dt, int rank, const Dim *dim)
{
	Type t;

	memset(&t, 0, sizeof t);
	t.dt = dt;
	t.rank = rank;
	for (int i = 0; i < rank; i++)
		t.dim[i] = dim[i];
	return t;
}

Type
ir_scalar(DType dt)
{
	return ir_type(dt, 0, NULL);
}
