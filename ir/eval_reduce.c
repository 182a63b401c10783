/*
 * eval_reduce.c — reductions, argmax, softmax, the norms and topk.
 *
 * Sums, means and variances accumulate in double; softmax subtracts the row
 * maximum first.  max and min propagate NaN (numpy); argmax and topk take
 * the lower index on ties and count NaN as the largest value.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_impl.h"

/* A tensor seen as [outer, len, inner] around axis ax. */
static void
split3(const Tensor *t, int ax, int64_t *outer, int64_t *len, int64_t *inner)
{
	*outer = *inner = 1;
	for (int i = 0; i < ax; i++)
		*outer *= t->dim[i];
	*len = t->dim[ax];
	for (int i = ax + 1; i < t->rank; i++)
		*inner *= t->dim[i];
}

/* For each axis of x: the stride of its coordinate in the result (0 when
 * reduced), following infer.c's rule for axes and keepdims. */
static void
reduce_strides(const Node *n, const Tensor *x, const Tensor *y, int64_t *ostr)
{
	int64_t axes[MAXRANK], ystr[MAXRANK];
	int na = ir_attr_ints(n, "axes", axes, MAXRANK), keep = (int)ir_attr_int(n, "keepdims", 1);
	int red[MAXRANK] = {0};

	for (int i = 0; i < x->rank; i++)
		red[i] = na < 0;
	for (int i = 0; i < na && i < MAXRANK; i++)
		red[ir_axis(axes[i], x->rank)] = 1;	/* infer checked the range */
	ev_strides(y, ystr);
	for (int i = 0, j = 0; i < x->rank; i++) {
		ostr[i] = red[i] ? 0 : ystr[j];
		j += !red[i] || keep;
	}
}

static void
reduce_float(Op op, const Tensor *x, Tensor *y, const int64_t *ostr)
{
	int64_t len = tensor_numel(x), ny = tensor_numel(y), c[MAXRANK] = {0};
	double *acc = xmalloc(sizeof *acc * (size_t)(ny + 1));
	double init = op == OP_REDUCE_MAX ? -INFINITY : op == OP_REDUCE_MIN ? INFINITY : 0;

	for (int64_t i = 0; i < ny; i++)
		acc[i] = init;
	for (int64_t i = 0; i < len; i++, ev_next(c, x->dim, x->rank)) {
		double v = dtype_load(x->dt, x->data, (size_t)i), *a = &acc[ev_off(c, ostr, x->rank)];
		if (op == OP_REDUCE_MAX)
			*a = isnan(v) || v > *a ? v : *a;
		else if (op == OP_REDUCE_MIN)
			*a = isnan(v) || v < *a ? v : *a;
		else
			*a += v;
	}
	for (int64_t i = 0; i < ny; i++)
		dtype_store(y->dt, y->data, (size_t)i,
			    op == OP_REDUCE_MEAN ? acc[i] / (double)(len / (ny ? ny : 1)) : acc[i]);
	free(acc);
}

static void
reduce_int(Op op, const Tensor *x, Tensor *y, const int64_t *ostr)
{
	int64_t len = tensor_numel(x), ny = tensor_numel(y), c[MAXRANK] = {0};
	int64_t *acc = xmalloc(sizeof *acc * (size_t)(ny + 1)), cnt = ny ? len / ny : 0;
	int64_t init = op == OP_REDUCE_MAX ? INT64_MIN : op == OP_REDUCE_MIN ? INT64_MAX : 0;

	for (int64_t i = 0; i < ny; i++)
		acc[i] = init;
	for (int64_t i = 0; i < len; i++, ev_next(c, x->dim, x->rank)) {
		int64_t v = dtype_load_int(x->dt, x->data, (size_t)i), *a = &acc[ev_off(c, ostr, x->rank)];
		if (op == OP_REDUCE_MAX)
			*a = v > *a ? v : *a;
		else if (op == OP_REDUCE_MIN)
			*a = v < *a ? v : *a;
		else if (__builtin_add_overflow(*a, v, a))
			*a = v < 0 ? INT64_MIN : INT64_MAX;
	}
	for (int64_t i = 0; i < ny; i++)
		dtype_store_int(y->dt, y->data, (size_t)i,
				op == OP_REDUCE_MEAN ? (cnt ? acc[i] / cnt : 0) : acc[i]);
	free(acc);
}

int
ev_reduce(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	int64_t ostr[MAXRANK];

	reduce_strides(n, in[0], &out[0], ostr);
	if (ev_isint(in[0]->dt))
		reduce_int(n->op, in[0], &out[0], ostr);
	else
		reduce_float(n->op, in[0], &out[0], ostr);
	return 0;
}

static int
greater(double a, double b)	/* NaN is the largest */
{
	return (isnan(a) && !isnan(b)) || a > b;
}

int
ev_argmax(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int ax = ir_axis(ir_attr_int(n, "axis", 0), x->rank);
	int last = (int)ir_attr_int(n, "select_last_index", 0);
	int64_t outer, len, inner;

	split3(x, ax, &outer, &len, &inner);
	if (len == 0 && outer * inner > 0)
		return ev_err(e, n, "argmax: the axis is empty");
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < inner; j++) {
			int64_t best = 0, base = o * len * inner + j;
			double bv = dtype_load(x->dt, x->data, (size_t)base);
			for (int64_t k = 1; k < len; k++) {
				double v = dtype_load(x->dt, x->data, (size_t)(base + k * inner));
				if (greater(v, bv) || (last && (v == bv || (isnan(v) && isnan(bv)))))
					best = k, bv = v;
			}
			dtype_store_int(out[0].dt, out[0].data, (size_t)(o * inner + j), best);
		}
	return 0;
}

/* Running sums along the axis, in order (reverse: from the end); exclusive
 * leaves the element itself out.  Integers sum exactly, floats in double,
 * each result rounded once to the dtype. */
int
ev_cumsum(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int ax = ir_axis(ir_attr_int(n, "axis", 0), x->rank), isint = ev_isint(x->dt);
	int ex = ir_attr_int(n, "exclusive", 0) != 0, rev = ir_attr_int(n, "reverse", 0) != 0;
	int64_t outer, len, inner;

	(void)e;
	split3(x, ax, &outer, &len, &inner);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < inner; j++) {
			double f = 0;
			int64_t s = 0;
			for (int64_t k = 0; k < len; k++) {
				size_t at = (size_t)(o * len * inner + (rev ? len - 1 - k : k) * inner + j);
				double fv = isint ? 0 : dtype_load(x->dt, x->data, at);
				int64_t iv = isint ? dtype_load_int(x->dt, x->data, at) : 0;
				if (!ex)
					f += fv, s += iv;
				if (isint)
					dtype_store_int(out[0].dt, out[0].data, at, s);
				else
					dtype_store(out[0].dt, out[0].data, at, f);
				if (ex)
					f += fv, s += iv;
			}
		}
	return 0;
}

int
ev_softmax(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	Tensor *y = &out[0];
	int ax = ir_axis(ir_attr_int(n, "axis", -1), x->rank);
	int64_t outer, len, inner;

	split3(x, ax, &outer, &len, &inner);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < inner; j++) {
			int64_t base = o * len * inner + j;
			double m = -INFINITY, sum = 0;
			for (int64_t k = 0; k < len; k++) {
				double v = dtype_load(x->dt, x->data, (size_t)(base + k * inner));
				m = isnan(v) || v > m ? v : m;
			}
			for (int64_t k = 0; k < len; k++)
				sum += exp(dtype_load(x->dt, x->data, (size_t)(base + k * inner)) - m);
			for (int64_t k = 0; k < len; k++) {
				size_t i = (size_t)(base + k * inner);
				double d = dtype_load(x->dt, x->data, i) - m;
				dtype_store(y->dt, y->data, i,
					    n->op == OP_SOFTMAX ? exp(d) / sum : d - log(sum));
			}
		}
	return 0;
}

/* --- norms --------------------------------------------------------------- */

/*
 * Index of the scale (or bias) element for each of the len normalised
 * elements of a row: p broadcasts over x's dims ax.., without growing them.
 */
static int64_t *
param_index(Ev *e, const Node *n, const Tensor *p, const Tensor *x, int ax, int64_t len)
{
	int r = x->rank - ax;
	int64_t str[MAXRANK], c[MAXRANK] = {0}, *idx;

	if (p->rank > r)
		return ev_err(e, n, "%s: the scale has a higher rank than the normalised dims",
			      ir_opname(n->op)), NULL;
	for (int i = 0; i < p->rank; i++)
		if (p->dim[i] != 1 && p->dim[i] != x->dim[x->rank - p->rank + i])
			return ev_err(e, n, "%s: scale or bias dim %d is %lld, x has %lld",
				      ir_opname(n->op), i, (long long)p->dim[i],
				      (long long)x->dim[x->rank - p->rank + i]), NULL;
	ev_bstrides(p, r, str);
	idx = xmalloc(sizeof *idx * (size_t)(len + 1));
	for (int64_t i = 0; i < len; i++, ev_next(c, &x->dim[ax], r))
		idx[i] = ev_off(c, str, r);
	return idx;
}

/* Mean and mean of squares (about the mean when center) of one row. */
static void
row_stats(const Tensor *x, int64_t base, int64_t len, int center, double *mean, double *ms)
{
	double s = 0, q = 0;

	for (int64_t k = 0; k < len; k++)
		s += dtype_load(x->dt, x->data, (size_t)(base + k));
	*mean = s / (double)len;
	for (int64_t k = 0; k < len; k++) {
		double v = dtype_load(x->dt, x->data, (size_t)(base + k)) - (center ? *mean : 0);
		q += v * v;
	}
	*ms = q / (double)len;
}

static void
norm_rows(const Tensor *x, int ax, int64_t *rows, int64_t *len)
{
	int64_t one;

	split3(x, ax, rows, len, &one);
	*len *= one;
}

int
ev_rms_norm(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int ax = ir_axis(ir_attr_int(n, "axis", -1), x->rank);
	double eps = ir_attr_float(n, "eps", 1e-5), *sv, mean, ms;
	int64_t rows, len, *si;

	norm_rows(x, ax, &rows, &len);
	if (!(si = param_index(e, n, in[1], x, ax, len)))
		return -1;
	sv = ev_doubles(in[1]);
	for (int64_t r = 0; r < rows; r++) {
		row_stats(x, r * len, len, 0, &mean, &ms);
		double inv = 1 / sqrt(ms + eps);
		for (int64_t k = 0; k < len; k++) {
			size_t i = (size_t)(r * len + k);
			dtype_store(out[0].dt, out[0].data, i,
				    dtype_load(x->dt, x->data, i) * inv * sv[si[k]]);
		}
	}
	free(si);
	free(sv);
	return 0;
}

int
ev_layer_norm(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0], *b = n->nin > 2 ? in[2] : NULL;
	int ax = ir_axis(ir_attr_int(n, "axis", -1), x->rank);
	double eps = ir_attr_float(n, "eps", 1e-5), *sv, *bv = NULL, mean, var;
	int64_t rows, len, *si, *bi = NULL;

	norm_rows(x, ax, &rows, &len);
	if (!(si = param_index(e, n, in[1], x, ax, len)))
		return -1;
	if (b && !(bi = param_index(e, n, b, x, ax, len))) {
		free(si);
		return -1;
	}
	sv = ev_doubles(in[1]);
	bv = b ? ev_doubles(b) : NULL;
	for (int64_t r = 0; r < rows; r++) {
		row_stats(x, r * len, len, 1, &mean, &var);
		double inv = 1 / sqrt(var + eps);
		for (int64_t k = 0; k < len; k++) {
			size_t i = (size_t)(r * len + k);
			double v = (dtype_load(x->dt, x->data, i) - mean) * inv * sv[si[k]];
			dtype_store(out[0].dt, out[0].data, i, v + (bv ? bv[bi[k]] : 0));
		}
		if (n->nout > 1)
			dtype_store(out[1].dt, out[1].data, (size_t)r, mean);
		if (n->nout > 2)
			dtype_store(out[2].dt, out[2].data, (size_t)r, inv);
	}
	free(si);
	free(bi);
	free(sv);
	free(bv);
	return 0;
}

int
ev_rstd(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int ax = ir_axis(ir_attr_int(n, "axis", -1), x->rank);
	int center = (int)ir_attr_int(n, "center", 0);
	double eps = ir_attr_float(n, "eps", 1e-5), mean, ms;
	int64_t rows, len;

	norm_rows(x, ax, &rows, &len);
	for (int64_t r = 0; r < rows; r++) {
		row_stats(x, r * len, len, center, &mean, &ms);
		dtype_store(out[0].dt, out[0].data, (size_t)r, 1 / sqrt(ms + eps));
	}
	return 0;
}

/* Values and (i64) indices of the k largest (or smallest) along the axis,
 * always sorted: sorted=0 leaves the order to us. */
int
ev_topk(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	IrTopkAttrs ta;
	ir_topk_attrs(n, &ta);
	int ax = ir_axis(ta.axis, x->rank);
	int largest = ta.largest;
	int64_t k = out[0].dim[ax], outer, len, inner;
	double *v;
	int64_t *idx;

	split3(x, ax, &outer, &len, &inner);
	v = xmalloc(sizeof *v * (size_t)(len + 1));
	idx = xmalloc(sizeof *idx * (size_t)(len + 1));
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < inner; j++) {
			int64_t base = o * len * inner + j, obase = o * k * inner + j;
			for (int64_t i = 0; i < len; i++)
				v[i] = dtype_load(x->dt, x->data, (size_t)(base + i * inner));
			ev_order(v, len, largest, idx);
			for (int64_t i = 0; i < k; i++) {
				ev_copy(x->dt, out[0].data, obase + i * inner, x->data,
					base + idx[i] * inner, 1);
				dtype_store_int(out[1].dt, out[1].data, (size_t)(obase + i * inner),
						idx[i]);
			}
		}
	free(v);
	free(idx);
	return 0;
}
