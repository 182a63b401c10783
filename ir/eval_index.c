/*
 * eval_index.c — gathers, scatters, onehot and nonzero (ONNX semantics).
 *
 * Negative indices count from the end of their dim; an index still out of
 * range is a diagnostic naming the index and the dim.  Scatters apply their
 * updates in row-major order, so with duplicate indices the last one wins.
 * Elements move exactly (ev_copy); reductions combine in double or int64.
 */
#include <string.h>

#include "eval_impl.h"

/* An index read from t, wrapped once into [0, dim); -1 if out of range. */
static int64_t
index_at(const Tensor *t, int64_t i, int64_t dim, int64_t *raw)
{
	int64_t v = dtype_load_int(t->dt, t->data, (size_t)i);

	*raw = v;
	if (v < 0)
		v += dim;
	return v >= 0 && v < dim ? v : -1;
}

static int
range_err(Ev *e, const Node *n, int64_t raw, int64_t dim)
{
	return ev_err(e, n, "%s: index %lld out of range for dim %lld", ir_opname(n->op),
		      (long long)raw, (long long)dim);
}

static int64_t
prod(const int64_t *d, int from, int to)
{
	int64_t p = 1;

	for (int i = from; i < to; i++)
		p *= d[i];
	return p;
}

int
ev_gather(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0], *ix = in[1];
	int ax = ir_axis(ir_attr_int(n, "axis", 0), x->rank);
	int64_t outer = prod(x->dim, 0, ax), dim = x->dim[ax];
	int64_t inner = prod(x->dim, ax + 1, x->rank), ni = tensor_numel(ix), raw;

	for (int64_t j = 0; j < ni; j++)
		if (index_at(ix, j, dim, &raw) < 0)
			return range_err(e, n, raw, dim);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < ni; j++)
			ev_copy(x->dt, out[0].data, (o * ni + j) * inner, x->data,
				(o * dim + index_at(ix, j, dim, &raw)) * inner, inner);
	return 0;
}

/* Indices may be smaller than the data in the dims other than axis. */
static int
fits(Ev *e, const Node *n, const Tensor *ix, const Tensor *x, int ax)
{
	for (int i = 0; i < x->rank; i++)
		if (i != ax && ix->dim[i] > x->dim[i])
			return ev_err(e, n, "%s: indices dim %d is %lld, the data has only %lld",
				      ir_opname(n->op), i, (long long)ix->dim[i],
				      (long long)x->dim[i]);
	return 0;
}

int
ev_gather_elements(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0], *ix = in[1];
	int ax = ir_axis(ir_attr_int(n, "axis", 0), x->rank);
	int64_t xs[MAXRANK], c[MAXRANK] = {0}, len = tensor_numel(ix), raw;

	if (fits(e, n, ix, x, ax))
		return -1;
	ev_strides(x, xs);
	for (int64_t i = 0; i < len; i++, ev_next(c, ix->dim, ix->rank)) {
		int64_t v = index_at(ix, i, x->dim[ax], &raw);
		if (v < 0)
			return range_err(e, n, raw, x->dim[ax]);
		ev_copy(x->dt, out[0].data, i, x->data,
			ev_off(c, xs, x->rank) + (v - c[ax]) * xs[ax], 1);
	}
	return 0;
}

/*
 * Offset in x of the slice addressed by index tuple p of ix: the first b
 * coordinates of p are batch coordinates, then the tuple's q indices.
 */
static int
nd_offset(Ev *e, const Node *n, const Tensor *x, const Tensor *ix, int b, int64_t p,
	  int64_t *off)
{
	int64_t xs[MAXRANK], q = ix->dim[ix->rank - 1], rest = p, raw, v;

	ev_strides(x, xs);
	*off = 0;
	for (int i = ix->rank - 2; i >= 0; i--) {	/* batch coords of p */
		int64_t c = rest % ix->dim[i];
		rest /= ix->dim[i];
		if (i < b)
			*off += c * xs[i];
	}
	for (int64_t j = 0; j < q; j++) {
		if ((v = index_at(ix, p * q + j, x->dim[b + j], &raw)) < 0)
			return range_err(e, n, raw, x->dim[b + j]);
		*off += v * xs[b + j];
	}
	return 0;
}

static int
same_batch(Ev *e, const Node *n, const Tensor *x, const Tensor *ix, int b)
{
	for (int i = 0; i < b; i++)
		if (x->dim[i] != ix->dim[i])
			return ev_err(e, n, "%s: batch dim %d differs: %lld vs %lld",
				      ir_opname(n->op), i, (long long)x->dim[i],
				      (long long)ix->dim[i]);
	return 0;
}

int
ev_gather_nd(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0], *ix = in[1];
	int b = (int)ir_attr_int(n, "batch_dims", 0);
	int64_t q = ix->dim[ix->rank - 1];
	int64_t np = prod(ix->dim, 0, ix->rank - 1), slice = prod(x->dim, b + (int)q, x->rank);
	int64_t off;

	if (same_batch(e, n, x, ix, b))
		return -1;
	for (int64_t p = 0; p < np; p++) {
		if (nd_offset(e, n, x, ix, b, p, &off))
			return -1;
		ev_copy(x->dt, out[0].data, p * slice, x->data, off, slice);
	}
	return 0;
}

/* --- scatters ------------------------------------------------------------ */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int
reduction(Ev *e, const Node *n, int *r)
{
	static const char *const names[] = {"none", "add", "mul", "max", "min"};
	const char *s = ir_attr_str(n, "reduction", "none");

	for (*r = 0; *r < (int)NELEM(names); (*r)++)
		if (strcmp(s, names[*r]) == 0)
			return 0;
	return ev_err(e, n, "%s: unknown reduction '%s'", ir_opname(n->op), s);
}

/* y[yi] = y[yi] (op) u[ui] */
static void
combine(int red, Tensor *y, int64_t yi, const Tensor *u, int64_t ui)
{
	if (red == RED_NONE) {
		ev_copy(u->dt, y->data, yi, u->data, ui, 1);
	} else if (ev_isint(y->dt)) {
		int64_t a = dtype_load_int(y->dt, y->data, (size_t)yi);
		int64_t b = dtype_load_int(u->dt, u->data, (size_t)ui), r = 0;
		if (red == RED_ADD ? __builtin_add_overflow(a, b, &r) :
		    red == RED_MUL ? __builtin_mul_overflow(a, b, &r) : 0)
			r = red == RED_ADD ? (b < 0 ? INT64_MIN : INT64_MAX)
					   : ((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX);
		else if (red == RED_MAX || red == RED_MIN)
			r = (red == RED_MAX) == (b > a) ? b : a;
		dtype_store_int(y->dt, y->data, (size_t)yi, r);
	} else {
		double a = dtype_load(y->dt, y->data, (size_t)yi);
		double b = dtype_load(u->dt, u->data, (size_t)ui);
		double r = red == RED_ADD ? a + b : red == RED_MUL ? a * b
			 : red == RED_MAX ? (b > a ? b : a) : (b < a ? b : a);
		dtype_store(y->dt, y->data, (size_t)yi, r);
	}
}

static int
same_shape(Ev *e, const Node *n, const Tensor *a, const Tensor *b, const char *what)
{
	int ok = a->rank == b->rank;

	for (int i = 0; ok && i < a->rank; i++)
		ok = a->dim[i] == b->dim[i];
	return ok ? 0 : ev_err(e, n, "%s: %s", ir_opname(n->op), what);
}

/* The optional count operand of a scatter: update entries whose first
 * index coordinate is at or past it are padding (docs/ir.md). */
static int64_t
scatter_count(const Tensor *const *in, const Node *n)
{
	if (n->nin < 4 || !in[3])
		return INT64_MAX;
	return dtype_load_int(in[3]->dt, in[3]->data, 0);
}

int
ev_scatter_elements(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0], *ix = in[1], *u = in[2];
	int ax = ir_axis(ir_attr_int(n, "axis", 0), x->rank), red;
	int64_t xs[MAXRANK], c[MAXRANK] = {0}, len = tensor_numel(ix), raw;

	if (reduction(e, n, &red) || fits(e, n, ix, x, ax) ||
	    same_shape(e, n, ix, u, "indices and updates differ in shape"))
		return -1;
	memcpy(out[0].data, x->data, tensor_nbytes(x));
	ev_strides(x, xs);
	for (int64_t i = 0; i < len; i++, ev_next(c, ix->dim, ix->rank)) {
		if (ix->rank && c[0] >= scatter_count(in, n))
			continue;	/* past the count: padding */
		int64_t v = index_at(ix, i, x->dim[ax], &raw);
		if (v < 0)
			return range_err(e, n, raw, x->dim[ax]);
		combine(red, &out[0], ev_off(c, xs, x->rank) + (v - c[ax]) * xs[ax], u, i);
	}
	return 0;
}

int
ev_scatter_nd(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0], *ix = in[1], *u = in[2];
	int64_t q = ix->rank ? ix->dim[ix->rank - 1] : -1, np, slice, off;
	Tensor want;
	int red;

	if (reduction(e, n, &red))
		return -1;
	if (ix->rank < 1 || q > x->rank || ix->rank - 1 + x->rank - q > MAXRANK)
		return ev_err(e, n, "scatter_nd: indices must be [..., q] with q <= rank of data");
	memset(&want, 0, sizeof want);
	want.rank = ix->rank - 1 + x->rank - (int)q;
	memcpy(want.dim, ix->dim, sizeof(int64_t) * (size_t)(ix->rank - 1));
	memcpy(&want.dim[ix->rank - 1], &x->dim[q], sizeof(int64_t) * (size_t)(x->rank - q));
	if (same_shape(e, n, u, &want, "updates must be indices.shape[:-1] + data.shape[q:]"))
		return -1;
	memcpy(out[0].data, x->data, tensor_nbytes(x));
	np = prod(ix->dim, 0, ix->rank - 1);
	slice = prod(x->dim, (int)q, x->rank);
	for (int64_t p = 0; p < np; p++) {
		if (ix->rank > 1 && p / MAX(prod(ix->dim, 1, ix->rank - 1), 1) >= scatter_count(in, n))
			continue;	/* past the count: padding */
		if (nd_offset(e, n, x, ix, 0, p, &off))
			return -1;
		for (int64_t k = 0; k < slice; k++)
			combine(red, &out[0], off + k, u, p * slice + k);
	}
	return 0;
}

/* out = zeros[N, ...]; out[idx[r]] = src[r]; idx < 0 skips the row. */
int
ev_scatter_rows(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *src = in[0], *ix = in[1];
	int64_t rows = out[0].dim[0], row = prod(src->dim, 1, src->rank);

	if (ix->dim[0] != src->dim[0])
		return ev_err(e, n, "scatter_rows: %lld indices for %lld rows",
			      (long long)ix->dim[0], (long long)src->dim[0]);
	for (int64_t r = 0; r < src->dim[0]; r++) {
		int64_t i = dtype_load_int(ix->dt, ix->data, (size_t)r);
		if (i >= rows)
			return range_err(e, n, i, rows);
		if (i >= 0)
			ev_copy(src->dt, out[0].data, i * row, src->data, r * row, row);
	}
	return 0;
}

int
ev_onehot(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *ix = in[0];
	Tensor *y = &out[0];
	int64_t depth = ir_attr_int(n, "depth", -1), ax = ir_attr_int(n, "axis", -1);
	double off = ir_attr_float(n, "off", 0), on = ir_attr_float(n, "on", 1);
	int64_t outer, inner;

	if (ax < 0)
		ax += ix->rank + 1;
	outer = prod(ix->dim, 0, (int)ax);
	inner = prod(ix->dim, (int)ax, ix->rank);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t v = dtype_load_int(ix->dt, ix->data, (size_t)(o * inner + i));
			if (v < 0)
				v += depth;
			for (int64_t d = 0; d < depth; d++)
				dtype_store(y->dt, y->data, (size_t)((o * depth + d) * inner + i),
					    v == d ? on : off);
		}
	return 0;
}

static int
nonzero_at(const Tensor *x, int64_t i)
{
	if (ev_isint(x->dt))
		return dtype_load_int(x->dt, x->data, (size_t)i) != 0;
	return dtype_load(x->dt, x->data, (size_t)i) != 0;	/* NaN counts */
}

int
ev_nonzero(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int64_t len = tensor_numel(x), count = 0, c[MAXRANK] = {0}, dims[2], j = 0;

	for (int64_t i = 0; i < len; i++)
		count += nonzero_at(x, i);
	dims[0] = x->rank;
	dims[1] = count;
	if (ir_attr(n, "bound")) {	/* allocated at [rank, bound]: padded with dim - 1 */
		if (count > out[0].dim[1])
			return ev_err(e, n, "nonzero: %lld elements, more than its bound %lld",
				      (long long)count, (long long)out[0].dim[1]);
		for (int d = 0; d < x->rank; d++)
			for (int64_t k = count; k < out[0].dim[1]; k++)
				dtype_store_int(DT_I64, out[0].data, (size_t)(d * out[0].dim[1] + k),
						x->dim[d] - 1);
	} else if (ev_alloc(e, n, &out[0], DT_I64, 2, dims)) {
		return -1;
	}
	int64_t stride = out[0].dim[1];
	for (int64_t i = 0; i < len; i++, ev_next(c, x->dim, x->rank)) {
		if (!nonzero_at(x, i))
			continue;
		for (int d = 0; d < x->rank; d++)
			dtype_store_int(DT_I64, out[0].data, (size_t)(d * stride + j), c[d]);
		j++;
	}
	return 0;
}
