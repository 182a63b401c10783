/*
 * eval_shape.c — ops that move elements without arithmetic: transpose,
 * reshape, expand, concat, split, slice, tile; and ops that make shapes and
 * constants: shape, size, range, constant_of_shape, const.
 *
 * reshape, expand, slice, tile, range and constant_of_shape compute their
 * own result shapes (from attributes evaluated under the dim bindings, or
 * from shape operands by ONNX's rules); the driver checks them against the
 * declared types, so a disagreement with infer.c is caught at run time.
 */
#include <math.h>
#include <string.h>

#include "eval_impl.h"

static int64_t
prod(const int64_t *d, int from, int to)
{
	int64_t p = 1;

	for (int i = from; i < to; i++)
		p *= d[i];
	return p;
}

/* A dims attribute evaluated under the bindings: rank, 0 if absent, -1 on error. */
static int
attr_shape(Ev *e, const Node *n, const char *key, int64_t *dim, int *present)
{
	Dim d[MAXRANK + 1];
	int r = ir_attr_dims(n, key, d, MAXRANK + 1);
	char buf[128];

	*present = r >= 0;
	if (r < 0)
		return 0;
	if (r > MAXRANK)
		return ev_err(e, n, "%s: %s= has more than %d dims", ir_opname(n->op), key, MAXRANK);
	for (int i = 0; i < r; i++)
		if (ir_dim_eval(e->m, d[i], &e->env, &dim[i]) != 0) {
			ir_dim_print(buf, sizeof buf, e->m, d[i]);
			return ev_err(e, n, "%s: cannot evaluate dim %s of %s=", ir_opname(n->op),
				      buf, key);
		}
	return r;
}

/* A 1-D integer operand of at most max entries. */
static int
int_list(Ev *e, const Node *n, const Tensor *t, int64_t *v, int max, const char *what)
{
	if (t->rank != 1 || !ev_isint(t->dt) || t->dim[0] > max)
		return ev_err(e, n, "%s: %s must be a 1-D integer tensor of at most %d entries",
			      ir_opname(n->op), what, max);
	for (int64_t i = 0; i < t->dim[0]; i++)
		v[i] = dtype_load_int(t->dt, t->data, (size_t)i);
	return (int)t->dim[0];
}

int
ev_transpose(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	Tensor *y = &out[0];
	int64_t perm[MAXRANK], xs[MAXRANK], ps[MAXRANK], c[MAXRANK] = {0};
	int64_t len = tensor_numel(x);

	if (ir_attr_ints(n, "perm", perm, MAXRANK) < 0)
		for (int i = 0; i < x->rank; i++)
			perm[i] = x->rank - 1 - i;
	int r = x->rank;
	/* a kept last axis moves whole rows (the gate|up interleave of a
	 * full-size expert stack is billions of elements) */
	int64_t inner = r && perm[r - 1] == r - 1 ? y->dim[r - 1] : 1;
	int outer = inner > 1 ? r - 1 : r;

	ev_strides(x, xs);
	for (int i = 0; i < r; i++)
		ps[i] = xs[perm[i]];
	for (int64_t i = 0; i < len && inner > 0; i += inner, ev_next(c, y->dim, outer))
		ev_copy(x->dt, y->data, i, x->data, ev_off(c, ps, r), inner);
	return 0;
}

/* ONNX Reshape: 0 copies the input dim (unless allowzero), one -1 is inferred. */
static int
onnx_shape(Ev *e, const Node *n, const Tensor *x, int64_t *dim, int r)
{
	int allowzero = (int)ir_attr_int(n, "allowzero", 0), neg = -1;
	int64_t known = 1;

	for (int i = 0; i < r; i++) {
		if (dim[i] == 0 && !allowzero) {
			if (i >= x->rank)
				return ev_err(e, n, "reshape: 0 in position %d copies no input dim", i);
			dim[i] = x->dim[i];
		}
		if (dim[i] == -1 && neg < 0)
			neg = i;
		else if (dim[i] < 0)
			return ev_err(e, n, "reshape: bad dim %lld in the shape", (long long)dim[i]);
		else if (__builtin_mul_overflow(known, dim[i], &known))
			return ev_err(e, n, "reshape: the shape's product overflows 64 bits");
	}
	if (neg >= 0) {
		if (known == 0 || tensor_numel(x) % known)
			return ev_err(e, n, "reshape: cannot infer the -1 dim of %lld elements",
				      (long long)tensor_numel(x));
		dim[neg] = tensor_numel(x) / known;
	}
	return 0;
}

int
ev_reshape(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int64_t dim[MAXRANK], numel = 1;
	int present, r = attr_shape(e, n, "shape", dim, &present);

	if (r < 0)
		return -1;
	if (!present) {
		if (n->nin < 2 || !in[1])
			return ev_err(e, n, "reshape: needs shape= or a shape operand");
		if ((r = int_list(e, n, in[1], dim, MAXRANK, "the shape")) < 0 ||
		    onnx_shape(e, n, x, dim, r))
			return -1;
	}
	for (int i = 0; i < r; i++)
		if (dim[i] < 0 || __builtin_mul_overflow(numel, dim[i], &numel))
			return ev_err(e, n, "reshape: the shape's product overflows 64 bits");
	if (numel != tensor_numel(x))
		return ev_err(e, n, "reshape: %lld elements cannot become %lld",
			      (long long)tensor_numel(x), (long long)numel);
	if (ev_alloc(e, n, &out[0], x->dt, r, dim))
		return -1;
	memcpy(out[0].data, x->data, tensor_nbytes(x));
	return 0;
}

/* The shape for expand and constant_of_shape: attribute or operand opnd. */
static int
shape_of(Ev *e, const Node *n, const Tensor *const *in, int opnd, int64_t *dim)
{
	int present, r = attr_shape(e, n, "shape", dim, &present);

	if (r < 0 || present)
		return r;
	if (n->nin <= opnd || !in[opnd])
		return ev_err(e, n, "%s: needs shape= or a shape operand", ir_opname(n->op));
	if ((r = int_list(e, n, in[opnd], dim, MAXRANK, "the shape")) < 0)
		return -1;
	for (int i = 0; i < r; i++)
		if (dim[i] < 0)
			return ev_err(e, n, "%s: negative dim %lld in the shape", ir_opname(n->op),
				      (long long)dim[i]);
	return r;
}

int
ev_expand(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int64_t s[MAXRANK], dim[MAXRANK], str[MAXRANK], c[MAXRANK] = {0}, len;
	int r = shape_of(e, n, in, 1, s), rank;

	if (r < 0)
		return -1;
	rank = MAX(r, x->rank);
	for (int i = 0; i < rank; i++) {
		int ia = i - (rank - x->rank), ib = i - (rank - r);
		int64_t a = ia >= 0 ? x->dim[ia] : 1, b = ib >= 0 ? s[ib] : 1;
		if (a != b && a != 1 && b != 1)
			return ev_err(e, n, "expand: dim %d of size %lld cannot become %lld", ia,
				      (long long)a, (long long)b);
		dim[i] = a == 1 ? b : a;
	}
	if (ev_alloc(e, n, &out[0], x->dt, rank, dim))
		return -1;
	ev_bstrides(x, rank, str);
	len = tensor_numel(&out[0]);
	for (int64_t i = 0; i < len; i++, ev_next(c, dim, rank))
		ev_copy(x->dt, out[0].data, i, x->data, ev_off(c, str, rank), 1);
	return 0;
}

int
ev_concat(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	Tensor *y = &out[0];
	int ax = ir_axis(ir_attr_int(n, "axis", 0), y->rank);
	int64_t outer = prod(y->dim, 0, ax), inner = prod(y->dim, ax + 1, y->rank), at = 0;

	for (int k = 0; k < n->nin; k++) {
		int64_t block = in[k]->dim[ax] * inner;
		for (int64_t o = 0; o < outer; o++)
			ev_copy(y->dt, y->data, o * y->dim[ax] * inner + at, in[k]->data, o * block,
				block);
		at += block;
	}
	return 0;
}

int
ev_split(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int ax = ir_axis(ir_attr_int(n, "axis", 0), x->rank);
	int64_t outer = prod(x->dim, 0, ax), inner = prod(x->dim, ax + 1, x->rank), at = 0;

	for (int k = 0; k < n->nout; k++) {
		int64_t block = out[k].dim[ax] * inner;
		for (int64_t o = 0; o < outer; o++)
			ev_copy(x->dt, out[k].data, o * block, x->data,
				o * x->dim[ax] * inner + at, block);
		at += block;
	}
	return 0;
}

/* --- slice --------------------------------------------------------------- */

typedef struct {
	int n;
	int64_t start[MAXRANK], end[MAXRANK], axis[MAXRANK], step[MAXRANK];
} SliceArgs;

static int
slice_args(Ev *e, const Node *n, const Tensor *const *in, SliceArgs *s)
{
	int ns, ne, na = -1, nsp = -1;

	if (n->nin > 1) {	/* x, starts, ends[, axes][, steps] */
		if (!in[1] || n->nin < 3 || !in[2])
			return ev_err(e, n, "slice: needs starts and ends");
		if ((ns = int_list(e, n, in[1], s->start, MAXRANK, "starts")) < 0 ||
		    (ne = int_list(e, n, in[2], s->end, MAXRANK, "ends")) < 0 ||
		    (n->nin > 3 && in[3] && (na = int_list(e, n, in[3], s->axis, MAXRANK, "axes")) < 0) ||
		    (n->nin > 4 && in[4] && (nsp = int_list(e, n, in[4], s->step, MAXRANK, "steps")) < 0))
			return -1;
	} else {
		ns = ir_attr_ints(n, "starts", s->start, MAXRANK);
		ne = ir_attr_ints(n, "ends", s->end, MAXRANK);
		na = ir_attr_ints(n, "axes", s->axis, MAXRANK);
		nsp = ir_attr_ints(n, "steps", s->step, MAXRANK);
	}
	if (ns < 0 || ns > MAXRANK || ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
		return ev_err(e, n, "slice: starts, ends (and axes, steps) must have equal lengths");
	s->n = ns;
	for (int i = 0; i < ns; i++) {
		if (na < 0)
			s->axis[i] = i;
		if (nsp < 0)
			s->step[i] = 1;
	}
	return 0;
}

int
ev_slice(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int64_t first[MAXRANK] = {0}, step[MAXRANK], dim[MAXRANK], xs[MAXRANK], ps[MAXRANK];
	int64_t c[MAXRANK] = {0}, base = 0, len;
	int seen[MAXRANK] = {0}, pad = -1;
	SliceArgs s;

	if (slice_args(e, n, in, &s))
		return -1;
	for (int i = 0; i < x->rank; i++)
		dim[i] = x->dim[i], step[i] = 1;
	for (int i = 0; i < s.n; i++) {
		int a = ir_axis(s.axis[i], x->rank);
		if (a < 0 || seen[a]++ || s.step[i] == 0)
			return ev_err(e, n, "slice: axis %lld out of range, repeated, or a zero step",
				      (long long)s.axis[i]);
		ir_slice_range(x->dim[a], s.start[i], s.end[i], s.step[i], &first[a], &dim[a]);
		step[a] = dim[a] > 1 ? s.step[i] : 1;	/* |step| < dim: no overflow below */
		if (ir_attr_int(n, "padded", 0)) {
			if (s.n != 1 || s.step[i] != 1)
				return ev_err(e, n, "slice: padded=1 takes one axis with step 1");
			pad = a, step[a] = 1;
		}
	}
	if (pad >= 0)	/* padded to the whole axis: the rows past the slice repeat x's last */
		dim[pad] = x->dim[pad];
	if (ev_alloc(e, n, &out[0], x->dt, x->rank, dim))
		return -1;
	ev_strides(x, xs);
	for (int i = 0; i < x->rank; i++) {
		base += first[i] * xs[i];
		ps[i] = step[i] * xs[i];
	}
	len = tensor_numel(&out[0]);
	for (int64_t i = 0; i < len; i++, ev_next(c, dim, x->rank)) {
		int64_t over = pad >= 0 ? first[pad] + c[pad] - (x->dim[pad] - 1) : 0;
		ev_copy(x->dt, out[0].data, i, x->data, base + ev_off(c, ps, x->rank) - (over > 0 ? over * xs[pad] : 0), 1);
	}
	return 0;
}

int
ev_tile(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int64_t rep[MAXRANK], dim[MAXRANK], xs[MAXRANK], c[MAXRANK] = {0}, len;
	int nr = ir_attr_ints(n, "repeats", rep, MAXRANK);

	if (nr < 0 && n->nin > 1 && in[1] &&
	    (nr = int_list(e, n, in[1], rep, MAXRANK, "repeats")) < 0)
		return -1;
	if (nr != x->rank)
		return ev_err(e, n, "tile: repeats must have one entry per dim");
	for (int i = 0; i < x->rank; i++) {
		if (rep[i] < 0)
			return ev_err(e, n, "tile: negative repeat %lld", (long long)rep[i]);
		if (__builtin_mul_overflow(x->dim[i], rep[i], &dim[i]))
			return ev_err(e, n, "tile: dim %d times %lld overflows 64 bits", i,
				      (long long)rep[i]);
	}
	if (ev_alloc(e, n, &out[0], x->dt, x->rank, dim))
		return -1;
	ev_strides(x, xs);
	len = tensor_numel(&out[0]);
	for (int64_t i = 0; i < len; i++, ev_next(c, dim, x->rank)) {
		int64_t o = 0;
		for (int k = 0; k < x->rank; k++)
			o += c[k] % x->dim[k] * xs[k];
		ev_copy(x->dt, out[0].data, i, x->data, o, 1);
	}
	return 0;
}

int
ev_shape(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	int r = in[0]->rank;
	int64_t s = ir_attr_int(n, "start", 0);

	s = s < 0 ? MAX(0, s + r) : MIN(s, r);
	for (int64_t i = 0; i < out[0].dim[0]; i++)
		dtype_store_int(DT_I64, out[0].data, (size_t)i, in[0]->dim[s + i]);
	return 0;
}

int
ev_size(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	dtype_store_int(DT_I64, out[0].data, 0, tensor_numel(in[0]));
	return 0;
}

/* ceil((limit - start) / delta) elements start + i*delta. */
int
ev_range(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	DType dt = in[0]->dt;
	double v[3], cnt;
	int64_t iv[3], len;

	for (int i = 0; i < 3; i++) {
		v[i] = dtype_load(dt, in[i]->data, 0);
		iv[i] = dtype_load_int(dt, in[i]->data, 0);
	}
	if (v[2] == 0 || isnan(v[2]))
		return ev_err(e, n, "range: delta is zero");
	cnt = ceil((v[1] - v[0]) / v[2]);
	len = ev_isint(dt) ? ir_range_len(iv[0], iv[1], iv[2])
			   : isnan(cnt) || cnt < 0 ? 0 : cnt > 9e18 ? INT64_MAX : (int64_t)cnt;
	if (ev_alloc(e, n, &out[0], dt, 1, &len))
		return -1;
	for (int64_t i = 0; i < len; i++) {
		if (ev_isint(dt))	/* lies between start and limit: the wrap is exact */
			dtype_store_int(dt, out[0].data, (size_t)i,
					(int64_t)((uint64_t)iv[0] + (uint64_t)i * (uint64_t)iv[2]));
		else
			dtype_store(dt, out[0].data, (size_t)i, v[0] + (double)i * v[2]);
	}
	return 0;
}

/* Fill t with a value attribute: ints stay exact for integer types. */
static void
fill(Tensor *t, const Attr *a, int64_t i, int64_t k)
{
	if (a->kind == A_INT)
		dtype_store_int(t->dt, t->data, (size_t)i, a->u.i);
	else if (a->kind == A_FLOAT)
		dtype_store(t->dt, t->data, (size_t)i, a->u.f);
	else if (a->kind == A_INTS && ev_isint(t->dt))
		dtype_store_int(t->dt, t->data, (size_t)i, a->u.ints[k]);
	else if (a->kind == A_INTS)
		dtype_store(t->dt, t->data, (size_t)i, (double)a->u.ints[k]);
	else
		dtype_store(t->dt, t->data, (size_t)i, a->u.floats[k]);
}

int
ev_constant_of_shape(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Attr *a = ir_attr(n, "value");
	int64_t dim[MAXRANK], len;
	DType dt = DT_F32;
	int r = shape_of(e, n, in, 0, dim);

	if (r < 0)
		return -1;
	if (ir_attr(n, "to") && ir_attr_dtype(n, "to", &dt) != 0)
		return ev_err(e, n, "constant_of_shape: unknown type in to=");
	if (a && !(a->kind == A_INT || a->kind == A_FLOAT ||
		   ((a->kind == A_INTS || a->kind == A_FLOATS) && a->n == 1)))
		return ev_err(e, n, "constant_of_shape: value must be one number");
	if (ev_alloc(e, n, &out[0], dt, r, dim))
		return -1;
	len = tensor_numel(&out[0]);
	for (int64_t i = 0; a && i < len; i++)
		fill(&out[0], a, i, 0);
	return 0;
}

int
ev_const(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Attr *a = ir_attr(n, "value");
	int64_t len = tensor_numel(&out[0]);

	for (int64_t i = 0; i < len; i++)
		fill(&out[0], a, i, i);
	return 0;
}
