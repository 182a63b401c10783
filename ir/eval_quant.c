/*
 * eval_quant.c — quantize and dequantize (ONNX QuantizeLinear and
 * DequantizeLinear: per-tensor, per-axis and blocked scales) and
 * quantize_dynamic (scales from the data: per tensor, row or group).
 *
 * x / scale is rounded to f32 first, as ONNX's float computation does, so
 * ties to even land where the reference implementation puts them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_impl.h"

typedef struct {
	IrQuantAttrs a;		/* ir_quant_attrs: the layout */
	int64_t sstr[MAXRANK];	/* strides of the scale, for blocked */
} QLayout;

/* Which of the three layouts scale (and zero, the same shape) has. */
static int
qlayout(Ev *e, const Node *n, const Tensor *const *in, QLayout *q)
{
	const Tensor *x = in[0], *s = in[1], *z = n->nin > 2 ? in[2] : NULL;
	char why[128];

	memset(q, 0, sizeof *q);
	if (z && (z->rank != s->rank || tensor_numel(z) != tensor_numel(s)))
		return ev_err(e, n, "%s: the zero point must have the scale's shape",
			      ir_opname(n->op));
	if (ir_quant_attrs(n, x->rank, x->dim, s->rank, s->dim, &q->a, why, sizeof why))
		return ev_err(e, n, "%s: %s", ir_opname(n->op), why);
	if (q->a.layout == IR_QUANT_BLOCK)
		ev_strides(s, q->sstr);
	return 0;
}

static int64_t
qindex(const QLayout *q, const int64_t *c, int rank)
{
	int64_t o = 0;

	if (q->a.layout == IR_QUANT_TENSOR)
		return 0;
	if (q->a.layout == IR_QUANT_AXIS)
		return c[q->a.axis];
	for (int i = 0; i < rank; i++)
		o += (i == q->a.axis ? c[i] / q->a.block_size : c[i]) * q->sstr[i];
	return o;
}

static double
load(const Tensor *t, int64_t i)
{
	return t ? dtype_load(t->dt, t->data, (size_t)i) : 0;
}

/* Round (ints: half to even) and store; f8 overflow saturates unless
 * saturate=0, where it becomes NaN (e4m3fn) or inf (e5m2) as in ONNX. */
static void
qstore(Tensor *y, int64_t i, double v, int saturate)
{
	double max = y->dt == DT_F8E4M3 ? 448 : 57344;

	if (ev_isint(y->dt))
		v = nearbyint(v);
	else if (!saturate && (y->dt == DT_F8E4M3 || y->dt == DT_F8E5M2) && fabs(v) > max)
		v = y->dt == DT_F8E4M3 ? NAN : v * INFINITY;
	dtype_store(y->dt, y->data, (size_t)i, v);
}

int
ev_quantize(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0], *z = n->nin > 2 ? in[2] : NULL;
	int sat = (int)ir_attr_int(n, "saturate", 1);
	int64_t c[MAXRANK] = {0}, len = tensor_numel(x);
	QLayout q;

	if (qlayout(e, n, in, &q))
		return -1;
	for (int64_t i = 0; i < len; i++, ev_next(c, x->dim, x->rank)) {
		int64_t si = qindex(&q, c, x->rank);
		double v = (float)(load(x, i) / load(in[1], si));
		if (ev_isint(out[0].dt))
			v = nearbyint(v);
		qstore(&out[0], i, v + load(z, si), sat);
	}
	return 0;
}

int
ev_dequantize(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0], *z = n->nin > 2 ? in[2] : NULL;
	int64_t c[MAXRANK] = {0}, len = tensor_numel(x);
	QLayout q;

	if (qlayout(e, n, in, &q))
		return -1;
	for (int64_t i = 0; i < len; i++, ev_next(c, x->dim, x->rank)) {
		int64_t si = qindex(&q, c, x->rank);
		dtype_store(out[0].dt, out[0].data, (size_t)i,
			    (load(x, i) - load(z, si)) * load(in[1], si));
	}
	return 0;
}

/* Elements of weight w at the indices ix[0..n): one read of the span they
 * cover when it is short (a row's scales), else one read each. */
static void
gather_elems(Weight *w, const int64_t *ix, int64_t n, double *out)
{
	int64_t lo = ix[0], hi = ix[0];

	for (int64_t i = 1; i < n; i++)
		lo = MIN(lo, ix[i]), hi = MAX(hi, ix[i]);
	if (hi - lo + 1 > 4 * n + 64) {
		for (int64_t i = 0; i < n; i++)
			ir_weight_elems(w, ix[i], 1, &out[i]);
		return;
	}
	double *span = xmalloc(sizeof *span * (size_t)(hi - lo + 1));
	ir_weight_elems(w, lo, hi - lo + 1, span);
	for (int64_t i = 0; i < n; i++)
		out[i] = span[ix[i] - lo];
	free(span);
}

/* ev_dequantize's elements [first, first+n) without its result: the
 * quantised elements, scales and zero points read from the weights (generated
 * on the fly when synthetic), the same formula and rounding. */
int
ev_dequant_elems(Ev *e, const Node *dq, int64_t first, int64_t n, double *out)
{
	Tensor tv[3];
	const Tensor *in[3] = {ev_shape_of(dq->in[0], &tv[0]), ev_shape_of(dq->in[1], &tv[1]),
			       dq->nin > 2 && dq->in[2] ? ev_shape_of(dq->in[2], &tv[2]) : NULL};
	const Tensor *x = in[0];
	int64_t c[MAXRANK], rest = first, *si;
	double *s, *z = NULL;
	QLayout q;

	if (n <= 0)
		return 0;
	if (qlayout(e, dq, in, &q))
		return -1;
	for (int i = x->rank - 1; i >= 0; i--) {
		c[i] = x->dim[i] ? rest % x->dim[i] : 0;
		rest = x->dim[i] ? rest / x->dim[i] : 0;
	}
	si = xmalloc(sizeof *si * (size_t)n);
	s = xmalloc(sizeof *s * (size_t)n);
	for (int64_t i = 0; i < n; i++, ev_next(c, x->dim, x->rank))
		si[i] = qindex(&q, c, x->rank);
	ir_weight_elems(dq->in[0]->weight, first, n, out);
	gather_elems(dq->in[1]->weight, si, n, s);
	if (in[2]) {
		z = xmalloc(sizeof *z * (size_t)n);
		gather_elems(dq->in[2]->weight, si, n, z);
	}
	for (int64_t i = 0; i < n; i++)
		out[i] = ev_round(dq->out[0]->type.dt, (out[i] - (z ? z[i] : 0)) * s[i]);
	free(si);
	free(s);
	free(z);
	return 0;
}

/* Elements per group: the whole tensor, a row, or N columns of a row. */
static int
dyn_group(Ev *e, const Node *n, const Tensor *x, int64_t *glen, int64_t *sdim, int *srank)
{
	const Attr *g = ir_attr(n, "group");
	int r = x->rank;
	int64_t last = r ? x->dim[r - 1] : 1;

	memcpy(sdim, x->dim, sizeof(int64_t) * (size_t)r);
	*srank = r;
	if (!g || (g->kind == A_STR && strcmp(g->u.s, "tensor") == 0)) {
		*glen = tensor_numel(x);
		*srank = 0;
		return 0;
	}
	if (r == 0)
		return ev_err(e, n, "quantize_dynamic: group=row or N needs rank >= 1");
	if (g->kind == A_STR && strcmp(g->u.s, "row") == 0) {
		*glen = last;
		sdim[r - 1] = 1;
		return 0;
	}
	if (g->kind != A_INT || g->u.i <= 0 || last % g->u.i)
		return ev_err(e, n, "quantize_dynamic: group must be tensor, row or a size "
			      "dividing the last dim %lld", (long long)last);
	*glen = g->u.i;
	sdim[r - 1] = last / g->u.i;
	return 0;
}

/* quantize_dynamic's scale of a group whose largest magnitude is amax. */
static double
dyn_scale(double amax, DType dt)
{
	return amax == 0 ? 1 : (float)(amax / (dt == DT_I8 ? 127 : 448));
}

void
ev_quant_dequant(double *v, int64_t n, double ub, DType dt)
{
	double amax = 0, s;
	unsigned char q[8];

	for (int64_t i = 0; ub > 0 && i < n; i++)	/* clip's rounding to dt, as ir_b_act_quant */
		v[i] = ev_round(dt, fmin(fmax(v[i], -ub), ub));
	for (int64_t i = 0; i < n; i++)
		amax = fmax(amax, fabs(v[i]));
	s = dyn_scale(amax, DT_F8E4M3);
	for (int64_t i = 0; i < n; i++) {
		dtype_store(DT_F8E4M3, q, 0, (float)(v[i] / s));	/* qstore's rounding, saturated */
		v[i] = ev_round(dt, dtype_load(DT_F8E4M3, q, 0) * s);
	}
}

int
ev_quantize_dynamic(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int64_t glen = 0, sdim[MAXRANK], len = tensor_numel(x);
	DType dt = DT_F8E4M3;
	int srank;

	if (ir_attr(n, "to") && ir_attr_dtype(n, "to", &dt) != 0)
		dt = DT_F32;	/* caught below */
	if (dt != DT_F8E4M3 && dt != DT_I8)
		return ev_err(e, n, "quantize_dynamic: to must be f8e4m3 or i8");
	if (dyn_group(e, n, x, &glen, sdim, &srank) || ev_alloc(e, n, &out[0], dt, x->rank, x->dim) ||
	    ev_alloc(e, n, &out[1], DT_F32, srank, sdim))
		return -1;
	for (int64_t i = 0; i < tensor_numel(&out[1]); i++)
		dtype_store(DT_F32, out[1].data, (size_t)i, 1);	/* empty groups */
	for (int64_t g = 0; glen && g < len / glen; g++) {
		double amax = 0, s;
		for (int64_t i = g * glen; i < (g + 1) * glen; i++)
			amax = fmax(amax, fabs(load(x, i)));
		s = dyn_scale(amax, dt);
		dtype_store(DT_F32, out[1].data, (size_t)g, s);
		for (int64_t i = g * glen; i < (g + 1) * glen; i++)
			qstore(&out[0], i, (float)(load(x, i) / s), 1);
	}
	return 0;
}
