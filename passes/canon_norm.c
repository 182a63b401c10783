/*
 * canon_norm.c — the canon rewrites that turn decomposed norms into
 * rms_norm and layer_norm, one small step at a time:
 *
 *	%p = pow %x, 2                       (core)
 *	%m = reduce_mean %p, axes=[-1]       %n = rms_norm %x, 1.0, eps=E
 *	%r = rsqrt (add %m, E)         =>
 *	%n = mul %x, %r                      (or div %x, sqrt(...); 1/sqrt; reciprocal)
 *
 *	%n = rms_norm (sub %x, (reduce_mean %x)), %s  =>  layer_norm %x, %s   (input)
 *	%n = rms_norm (cast %x0, to=f32), %s          =>  rms_norm %x0, %s, to=f32
 *	%y = mul $w, (rms_norm %x, 1.0)               =>  rms_norm %x, $w      (scale)
 *	%y = add (layer_norm %x, %s), $b              =>  layer_norm %x, %s, $b (bias)
 *	%y = cast (rms_norm %x, %s, to=f32), to=bf16  =>  rms_norm %x, %s, to=bf16 (cast)
 *
 * So HF's RMSNorm (to f32, pow, mean, add, rsqrt, mul, back to the input
 * type, times the weight), its TorchScript and dynamo spellings, and the
 * mean/subtract/variance form of LayerNorm all end as one op.  Only the
 * last axis is normalised; any other reduction is left alone.
 */
#include "match.h"

static int
is_norm(const Node *n)
{
	return n && (n->op == OP_RMS_NORM || n->op == OP_LAYER_NORM);
}

/* mean(x^2) over the last axis, as pow(x, 2) or x*x */
static int
mean_sq(Value *m, Value *x)
{
	Node *r = def_op(m, OP_REDUCE_MEAN), *sq;

	if (!reduces_last_axis(r, OP_REDUCE_MEAN))
		return 0;
	if ((sq = def_op(r->in[0], OP_POW)))
		return same_value(sq->in[0], x) && const_near(sq->in[1], 2);
	if ((sq = def_op(r->in[0], OP_MUL)))
		return same_value(sq->in[0], x) && same_value(sq->in[1], x);
	return 0;
}

/* v = mean(x^2) + eps, eps a constant scalar */
static int
mean_sq_eps(Value *v, Value *x, double *eps)
{
	Node *a = def_op(v, OP_ADD);
	DType dt;

	for (int i = 0; a && i < 2; i++)
		if (const_scalar(a->in[1 - i], eps, &dt) && type_like(a->in[i], v) &&
		    mean_sq(a->in[i], x))
			return 1;
	return 0;
}

/* v = sqrt(mean(x^2) + eps) */
static int
rms_of(Value *v, Value *x, double *eps)
{
	Node *s = def_op(v, OP_SQRT);

	return s && mean_sq_eps(s->in[0], x, eps);
}

/* v = 1 / sqrt(mean(x^2) + eps): rsqrt, reciprocal(sqrt), div(1, sqrt),
 * pow(., -0.5) */
static int
inv_rms_of(Value *v, Value *x, double *eps)
{
	Node *n;

	if ((n = def_op(v, OP_RSQRT)))
		return mean_sq_eps(n->in[0], x, eps);
	if ((n = def_op(v, OP_RECIPROCAL)))
		return rms_of(n->in[0], x, eps);
	if ((n = def_op(v, OP_DIV)))
		return const_near(n->in[0], 1) && rms_of(n->in[1], x, eps);
	if ((n = def_op(v, OP_POW)))
		return const_near(n->in[1], -0.5) && mean_sq_eps(n->in[0], x, eps);
	return 0;
}

static Value *
build_norm(Builder *b, const Node *tmpl, Op op, Value *x, Value *scale, Value *bias,
	   double eps, DType to)
{
	Value *in[3] = {x, scale, bias};
	Node *n;

	if (b->err || !x || !scale)
		return NULL;
	if (tmpl && ir_attr(tmpl, "axis"))
		ir_b_int(b, "axis", ir_attr_int(tmpl, "axis", -1));
	ir_b_float(b, "eps", eps);
	if (to != x->type.dt)
		ir_b_str(b, "to", dtype_name(to));
	n = ir_b_node(b, op, in, bias ? 3 : 2, 1);
	return n ? n->out[0] : NULL;
}

/* mul(x, 1/rms(x)) or div(x, rms(x)) -> rms_norm(x, 1.0) */
int
canon_norm_core(Canon *k, Node *n)
{
	DType dt = n->out[0]->type.dt;
	double eps;
	Builder b;

	if (!dtype_is_float(dt))
		return 0;
	for (int i = 0; i < 2; i++) {
		Value *x = n->in[i], *r = n->in[1 - i];
		int hit = n->op == OP_MUL ? inv_rms_of(r, x, &eps) : i == 0 && rms_of(r, x, &eps);
		if (!hit || !type_like(x, n->out[0]))
			continue;
		b = canon_builder(k, n);
		Value *one = ir_b_const_f(&b, dt, 1);
		if (one)
			ir_set_name(k->g, one, "one");
		return canon_adopt(k, n, build_norm(&b, NULL, OP_RMS_NORM, x, one, NULL, eps, dt));
	}
	return 0;
}

/* x - mean(x) over the last axis: *x gets x */
static int
centered(Value *d, Value **x)
{
	Node *s = def_op(d, OP_SUB), *m;

	if (!s || !(m = def_op(s->in[1], OP_REDUCE_MEAN)) || !reduces_last_axis(m, OP_REDUCE_MEAN) ||
	    !same_value(m->in[0], s->in[0]) || !type_like(s->in[0], d))
		return 0;
	*x = s->in[0];
	return 1;
}

/* rms_norm(x - mean(x)) -> layer_norm(x); norm(cast(x0)) -> norm(x0, to=) */
int
canon_norm_input(Canon *k, Node *n)
{
	Value *x = n->in[0], *x0;
	Node *c;
	Op op = n->op;
	Builder b;

	if (n->nout != 1)
		return 0;
	if (op == OP_RMS_NORM && ir_attr_int(n, "axis", -1) == -1 && centered(x, &x0)) {
		op = OP_LAYER_NORM;
	} else if ((c = def_op(x, OP_CAST)) && dtype_is_float(c->in[0]->type.dt) &&
		   exact_cast(c->in[0]->type.dt, x->type.dt)) {
		x0 = c->in[0];
	} else {
		return 0;
	}
	b = canon_builder(k, n);
	return canon_adopt(k, n, build_norm(&b, n, op, x0, n->in[1], n->nin > 2 ? n->in[2] : NULL,
					    ir_attr_float(n, "eps", 1e-5), n->out[0]->type.dt));
}

/* A per-channel operand of a norm's result, reshaped to [N] (or []). */
static Value *
channel_vector(Builder *b, Value *v, const Node *norm)
{
	const Type *y = &norm->out[0]->type;
	Dim n = v->type.rank ? v->type.dim[v->type.rank - 1] : 1;

	if (ir_attr_int(norm, "axis", -1) != -1 && ir_attr_int(norm, "axis", -1) != y->rank - 1)
		return NULL;
	if (!per_channel(v, y->dim[y->rank - 1], y->rank))
		return NULL;
	return v->type.rank <= 1 ? v : canon_reshape(b, v, 1, &n);
}

/* mul(w, norm(x, s[, b])) -> norm(x, s*w[, b*w]); the scale 1.0 just goes */
int
canon_norm_scale(Canon *k, Node *n)
{
	for (int i = 0; i < 2; i++) {
		Value *y = n->in[i], *w = n->in[1 - i], *s, *bias = NULL;
		Node *norm = y->kind == V_RESULT ? y->def : NULL;
		Builder b;

		if (!is_norm(norm) || norm->nout != 1 || y->nuse != 1 ||
		    !type_like(y, n->out[0]) || w->type.dt != y->type.dt)
			continue;
		b = canon_builder(k, n);
		if (!(w = channel_vector(&b, w, norm)))
			continue;
		s = norm->in[1];
		if (!const_near(s, 1)) {
			if (s->type.dt != w->type.dt)
				continue;
			if (!(w = ir_b2(&b, OP_MUL, s, w)))
				continue;
		}
		if (norm->nin > 2 && norm->in[2]) {
			if (norm->in[2]->type.dt != w->type.dt)
				continue;
			bias = ir_b2(&b, OP_MUL, norm->in[2], w);
		}
		return canon_adopt(k, n, build_norm(&b, norm, norm->op, norm->in[0], w, bias,
						    ir_attr_float(norm, "eps", 1e-5), y->type.dt));
	}
	return 0;
}

/* add(layer_norm(x, s[, b0]), b) -> layer_norm(x, s, b0 + b) */
int
canon_norm_bias(Canon *k, Node *n)
{
	for (int i = 0; i < 2; i++) {
		Value *y = n->in[i], *bias = n->in[1 - i];
		Node *ln = def_op(y, OP_LAYER_NORM);
		Builder b;

		if (!ln || ln->nout != 1 || y->nuse != 1 || bias->type.dt != y->type.dt ||
		    !type_like(y, n->out[0]))
			continue;
		b = canon_builder(k, n);
		if (!(bias = channel_vector(&b, bias, ln)))
			continue;
		if (ln->nin > 2 && ln->in[2]) {
			if (ln->in[2]->type.dt != bias->type.dt)
				continue;
			bias = ir_b2(&b, OP_ADD, ln->in[2], bias);
		}
		return canon_adopt(k, n, build_norm(&b, ln, OP_LAYER_NORM, ln->in[0], ln->in[1], bias,
						    ir_attr_float(ln, "eps", 1e-5), y->type.dt));
	}
	return 0;
}

/* cast(norm(x, ..) : f32, to=D) -> norm(x, .., to=D): the interpreter and
 * the kernels round once from f32, so nothing changes. */
int
canon_norm_cast(Canon *k, Node *n)
{
	Value *y = n->in[0];
	Node *norm = y->kind == V_RESULT ? y->def : NULL;
	DType to = n->out[0]->type.dt;
	Builder b;

	if (!is_norm(norm) || norm->nout != 1 || y->nuse != 1 || y->type.dt != DT_F32 ||
	    !dtype_is_float(to))
		return 0;
	b = canon_builder(k, n);
	return canon_adopt(k, n, build_norm(&b, norm, norm->op, norm->in[0], norm->in[1],
					    norm->nin > 2 ? norm->in[2] : NULL,
					    ir_attr_float(norm, "eps", 1e-5), to));
}
