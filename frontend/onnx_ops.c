/*
 * onnx_ops.c — the op table (domain, op type, first opset, importer) and
 * the importers of elementwise, activation, reduction, normalisation,
 * matmul and indexing ops.  Shape ops live in onnx_shape.c and
 * onnx_reshape.c, quantisation and com.microsoft ops in onnx_quant.c,
 * Einsum in onnx_einsum.c; the node view they share in onnx_node.c.
 *
 * An importer reads its node through the ONode view, builds IR with the
 * module's Builder (which runs shape inference and reports at the node's
 * location) and binds each ONNX output with ox_set, ox_set_known or
 * ox_alias.  It returns 0, or -1 after a diagnostic.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* --- elementwise --------------------------------------------------------- */

static const struct {
	const char *onnx;
	Op op;
} ewops[] = {
	{"Abs", OP_ABS}, {"Neg", OP_NEG}, {"Exp", OP_EXP}, {"Log", OP_LOG},
	{"Sqrt", OP_SQRT}, {"Reciprocal", OP_RECIPROCAL}, {"Erf", OP_ERF},
	{"Floor", OP_FLOOR}, {"Sign", OP_SIGN},
	{"Tanh", OP_TANH}, {"Sigmoid", OP_SIGMOID}, {"Relu", OP_RELU},
	{"Softplus", OP_SOFTPLUS}, {"HardSwish", OP_HARD_SWISH}, {"Not", OP_NOT},
	{"Add", OP_ADD}, {"Sub", OP_SUB}, {"Mul", OP_MUL}, {"Div", OP_DIV},
	{"Pow", OP_POW}, {"Equal", OP_EQUAL}, {"Greater", OP_GREATER},
	{"Less", OP_LESS}, {"GreaterOrEqual", OP_GREATER_EQUAL},
	{"LessOrEqual", OP_LESS_EQUAL}, {"And", OP_AND}, {"Or", OP_OR},
	{"Min", OP_MIN}, {"Max", OP_MAX}, {"Sum", OP_ADD},
};

static Op
ew_op(const char *onnx)
{
	for (size_t i = 0; i < NELEM(ewops); i++)
		if (strcmp(ewops[i].onnx, onnx) == 0)
			return ewops[i].op;
	die("no IR op for %s", onnx);
}

static int
imp_unary(ONode *n)
{
	const char *op = n->np->op_type;
	Known *k = ox_fold_unary(n->c, op, ox_kin(n, 0), DT_F32);

	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	return ox_done(n, 0, k, ir_b1(n->b, ew_op(op), ox_in(n, 0)));
}

static int
imp_binary(ONode *n)
{
	const char *op = n->np->op_type;
	Known *k = ox_fold_binary(n->c, op, ox_kin(n, 0), ox_kin(n, 1));

	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	return ox_done(n, 0, k, ir_b2(n->b, ew_op(op), ox_in(n, 0), ox_in(n, 1)));
}

/* Mod: fmod=1 the remainder of C's fmod (the dividend's sign), fmod=0 the
 * floor remainder of Python's % (the divisor's sign), one definition over
 * the IR's ops.  Integers (integer div truncates: exact):
 *	r = a - (a / b) * b;   fmod=0: r + where(r < 0 && b > 0 || r > 0 && b < 0, b, 0)
 * Floats (fmod=0 on floats is Mod-28's, which moec takes at any opset):
 *	r = a - t(a / b) * b,  t = trunc (sign * floor |q|) or floor
 * with Mod-28's infinite divisor (a finite a is kept, or for fmod=0 becomes b
 * when the signs differ); the quotient is rounded once in the inputs' type,
 * so a remainder near 0 or b may come out near b or 0 (C's fmod is exact).
 * Known integers fold. */
static Value *
mod_float(ONode *n, Value *a, Value *b, int fm)
{
	Builder *B = n->b;
	DType dt = a->type.dt;
	Value *q = ir_b2(B, OP_DIV, a, b), *t, *r, *z = ox_scalar(B, dt, 0), *inf = ox_scalar(B, dt, INFINITY);
	Value *in[3];
	Node *w;

	t = fm ? ir_b2(B, OP_MUL, ir_b1(B, OP_SIGN, q), ir_b1(B, OP_FLOOR, ir_b1(B, OP_ABS, q))) : ir_b1(B, OP_FLOOR, q);
	r = ir_b2(B, OP_SUB, a, ir_b2(B, OP_MUL, t, b));
	in[1] = a;
	if (!fm) {	/* b infinite: a when the signs agree or a is 0, else b */
		Value *same = ir_b2(B, OP_OR, ir_b2(B, OP_AND, ir_b2(B, OP_LESS, a, z), ir_b2(B, OP_LESS, b, z)),
				    ir_b2(B, OP_AND, ir_b2(B, OP_GREATER, a, z), ir_b2(B, OP_GREATER, b, z)));
		Value *e[3] = {ir_b2(B, OP_OR, same, ir_b2(B, OP_EQUAL, a, z)), a, b};
		w = e[0] ? ir_b_node(B, OP_WHERE, e, 3, 1) : NULL;
		in[1] = w ? w->out[0] : NULL;
	}
	in[0] = ir_b2(B, OP_AND, ir_b2(B, OP_EQUAL, ir_b1(B, OP_ABS, b), inf), ir_b2(B, OP_LESS, ir_b1(B, OP_ABS, a), inf));
	in[2] = r;
	w = in[0] && in[1] && r ? ir_b_node(B, OP_WHERE, in, 3, 1) : NULL;
	return w ? w->out[0] : NULL;
}

static int
imp_mod(ONode *n)
{
	int fm = ox_attr_i(n, "fmod", 0) != 0;
	Known *k = ox_fold_binary(n->c, fm ? "FMod" : "Mod", ox_kin(n, 0), ox_kin(n, 1));
	Value *a = ox_in(n, 0), *b = ox_in(n, 1), *q, *r, *z, *in[3];
	Node *w;

	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	if (!a || !b)
		return -1;
	if (a->type.dt != b->type.dt)
		return ox_err(n, "A and B must have one type");
	if (dtype_is_float(a->type.dt))
		return ox_done(n, 0, k, mod_float(n, a, b, fm));
	q = ir_b2(n->b, OP_DIV, a, b);
	r = q ? ir_b2(n->b, OP_SUB, a, ir_b2(n->b, OP_MUL, q, b)) : NULL;
	if (fm || !r)
		return ox_done(n, 0, k, r);
	z = ox_scalar(n->b, a->type.dt, 0);	/* signs differ (r * b could overflow) */
	in[0] = ir_b2(n->b, OP_OR, ir_b2(n->b, OP_AND, ir_b2(n->b, OP_LESS, r, z), ir_b2(n->b, OP_GREATER, b, z)),
		      ir_b2(n->b, OP_AND, ir_b2(n->b, OP_GREATER, r, z), ir_b2(n->b, OP_LESS, b, z)));
	in[1] = b;
	in[2] = z;
	w = in[0] ? ir_b_node(n->b, OP_WHERE, in, 3, 1) : NULL;
	return ox_done(n, 0, k, w ? ir_b2(n->b, OP_ADD, r, w->out[0]) : NULL);
}

/* Min, Max, Sum over any number of inputs: a chain of binary ops. */
static int
imp_variadic(ONode *n)
{
	const char *op = strcmp(n->np->op_type, "Sum") == 0 ? "Add" : n->np->op_type;
	OVal *acc = n->in[0];
	Known *k = acc ? acc->k : NULL;
	Value *v;

	if (n->nin < 1 || !acc)
		return ox_err(n, "needs at least one input");
	if (n->nin == 1) {
		ox_alias(n, 0, acc);
		return 0;
	}
	for (int i = 1; i < n->nin && k; i++)
		k = ox_fold_binary(n->c, op, k, ox_kin(n, i));
	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	v = ox_in(n, 0);
	for (int i = 1; i < n->nin && v; i++)
		v = ir_b2(n->b, ew_op(n->np->op_type), v, ox_in(n, i));
	return ox_set(n, 0, v);
}

static int
imp_leaky_relu(ONode *n)
{
	ir_b_float(n->b, "alpha", ox_attr_f(n, "alpha", 0.01));
	return ox_set(n, 0, ir_b1(n->b, OP_LEAKY_RELU, ox_in(n, 0)));
}

static int
imp_hard_sigmoid(ONode *n)
{
	ir_b_float(n->b, "alpha", ox_attr_f(n, "alpha", 0.2));
	ir_b_float(n->b, "beta", ox_attr_f(n, "beta", 0.5));
	return ox_set(n, 0, ir_b1(n->b, OP_HARD_SIGMOID, ox_in(n, 0)));
}

static int
imp_gelu(ONode *n)
{
	const char *ap = ox_attr_s(n, "approximate", "none");

	if (strcmp(ap, "none") != 0 && strcmp(ap, "tanh") != 0)
		return ox_err(n, "unknown approximate='%s'", ap);
	ir_b_str(n->b, "approx", ap);
	return ox_set(n, 0, ir_b1(n->b, OP_GELU, ox_in(n, 0)));
}

static int
static_scalar(const Known *k)
{
	return k && k->n == 1 && ox_known_static(k);
}

static void
bound_attr(ONode *n, const char *key, const Known *k)
{
	if (k->fv)
		ir_b_float(n->b, key, k->fv[0]);
	else
		ir_b_int(n->b, key, k->iv[0].v);
}

/* One bound: a constant becomes clip's attribute, else a max/min op. */
static Value *
clip_bound(ONode *n, Value *x, int i, const char *key, Op op)
{
	if (!x || !ox_has(n, i))
		return x;
	if (static_scalar(ox_kin(n, i))) {
		bound_attr(n, key, ox_kin(n, i));
		return ir_b1(n->b, OP_CLIP, x);
	}
	if (ox_tin(n, i)->rank != 0 && ir_type_numel(ox_tin(n, i)) != 1) {
		ox_err(n, "%s must be a scalar", key);
		return NULL;
	}
	return ir_b2(n->b, op, x, ox_in(n, i));
}

/* Clip(x, lo, hi) = min(max(x, lo), hi), in that order. */
static int
imp_clip(ONode *n)
{
	Value *x = ox_in(n, 0);

	if (static_scalar(ox_kin(n, 1)) && static_scalar(ox_kin(n, 2))) {
		bound_attr(n, "min", ox_kin(n, 1));
		bound_attr(n, "max", ox_kin(n, 2));
		return ox_set(n, 0, ir_b1(n->b, OP_CLIP, x));
	}
	if (!ox_has(n, 1) && !ox_has(n, 2)) {
		ox_alias(n, 0, n->in[0]);
		return 0;
	}
	x = clip_bound(n, x, 1, "min", OP_MAX);
	return ox_set(n, 0, clip_bound(n, x, 2, "max", OP_MIN));
}

/* --- casts --------------------------------------------------------------- */

static int
cast_to(ONode *n, DType to)
{
	const Type *t = ox_tin(n, 0);
	Known *k = ox_fold_unary(n->c, "Cast", ox_kin(n, 0), to);

	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	if (t->dt == to) {
		ox_alias(n, 0, n->in[0]);
		return 0;
	}
	ir_b_str(n->b, "to", dtype_name(to));
	return ox_done(n, 0, k, ir_b1(n->b, OP_CAST, ox_in(n, 0)));
}

static int
imp_cast(ONode *n)
{
	int64_t code = ox_attr_i(n, "to", -1);
	DType to;

	if (dtype_from_onnx((int)code, &to) != 0)
		return ox_err(n, "cast to unsupported type %lld%s", (long long)code,
			      code == 8 ? " (string)" : "");
	if (ox_attr_i(n, "saturate", 1) == 0 && (to == DT_F8E4M3 || to == DT_F8E5M2))
		return ox_err(n, "saturate=0 casts to float8 are not supported");
	return cast_to(n, to);
}

static int
imp_castlike(ONode *n)
{
	DType to;

	if (!ox_has(n, 1))
		return ox_err(n, "needs target_type");
	to = ox_tin(n, 1)->dt;
	if (ox_attr_i(n, "saturate", 1) == 0 && (to == DT_F8E4M3 || to == DT_F8E5M2))
		return ox_err(n, "saturate=0 casts to float8 are not supported");
	return cast_to(n, to);
}

/* --- reductions and normalisation ---------------------------------------- */

/* Softmax before opset 13 normalises x coerced to 2-D at axis (default 1):
 * every dim from axis on together.  The last axis is the same op; else a
 * reshape to [.., prod(dims[axis:])] around it. */
static int
imp_softmax(ONode *n)
{
	Op op = strcmp(n->np->op_type, "Softmax") == 0 ? OP_SOFTMAX : OP_LOG_SOFTMAX;
	Value *x = ox_in(n, 0), *y;
	int64_t axis;
	Dim d[MAXRANK], flat;
	int r;

	if (n->opset >= 13 || !x) {
		ir_b_int(n->b, "axis", ox_attr_i(n, "axis", -1));
		return ox_set(n, 0, ir_b1(n->b, op, x));
	}
	r = x->type.rank;
	if (ox_axis(n, ox_attr_i(n, "axis", 1), r, &axis))
		return -1;
	if (axis == r - 1) {
		ir_b_int(n->b, "axis", -1);
		return ox_set(n, 0, ir_b1(n->b, op, x));
	}
	flat = 1;
	for (int i = (int)axis; i < r; i++)
		flat = ir_dim_mul(n->c->m, flat, x->type.dim[i]);
	memcpy(d, x->type.dim, sizeof(Dim) * (size_t)axis);
	d[axis] = flat;
	ir_b_dims(n->b, "shape", d, (int)axis + 1);
	y = ir_b1(n->b, OP_RESHAPE, x);
	ir_b_int(n->b, "axis", -1);
	y = y ? ir_b1(n->b, op, y) : NULL;
	if (!y)
		return -1;
	ir_b_dims(n->b, "shape", x->type.dim, r);
	return ox_set(n, 0, ir_b1(n->b, OP_RESHAPE, y));
}

static Op
reduce_op(const char *s)
{
	if (!strcmp(s, "ReduceSum")) return OP_REDUCE_SUM;
	if (!strcmp(s, "ReduceMean")) return OP_REDUCE_MEAN;
	if (!strcmp(s, "ReduceMax")) return OP_REDUCE_MAX;
	if (!strcmp(s, "ReduceMin")) return OP_REDUCE_MIN;
	return OP_REDUCE_SUM;	/* ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum(Exp): sums */
}

/* The norms as sums: ReduceL1 = sum |x| (DBRX's moe_normalize_expert_weights
 * = 1 divides the top-k weights by it), ReduceSumSquare = sum x^2, ReduceL2 =
 * sqrt(sum x^2).  Before the sum: */
static Value *
reduce_pre(ONode *n, Value *x)
{
	const char *s = n->np->op_type;

	if (!strcmp(s, "ReduceL1"))
		return ir_b1(n->b, OP_ABS, x);
	if (!strcmp(s, "ReduceL2") || !strcmp(s, "ReduceSumSquare"))
		return ir_b2(n->b, OP_MUL, x, x);
	return x;
}

static int
imp_reduce(ONode *n)
{
	int from_input = n->opset >= 18 || (n->opset >= 13 && strcmp(n->np->op_type, "ReduceSum") == 0);
	int64_t axes[MAXRANK];
	int na = -1, rank = ox_tin(n, 0)->rank;

	if (from_input && ox_has(n, 1)) {
		na = ox_known_ints(ox_kin(n, 1), axes, MAXRANK);
		if (na < 0)
			return ox_err(n, "axes must be a constant of at most %d values", MAXRANK);
	} else if (!from_input) {
		na = ox_attr_ints(n, "axes", axes, MAXRANK);
		if (na > MAXRANK)
			return ox_err(n, "too many axes");
	}
	if (na <= 0 && ox_attr_i(n, "noop_with_empty_axes", 0)) {
		Value *x = reduce_pre(n, ox_in(n, 0));
		if (x == ox_in(n, 0)) {
			ox_alias(n, 0, n->in[0]);
			return 0;
		}
		return ox_set(n, 0, strcmp(n->np->op_type, "ReduceL2") ? x : ir_b1(n->b, OP_ABS, ox_in(n, 0)));
	}
	for (int i = 0; i < na; i++)
		if (ox_axis(n, axes[i], rank, &axes[i]))
			return -1;
	Value *x = reduce_pre(n, ox_in(n, 0)), *r, *m[2] = {NULL, NULL};
	int keep = ox_attr_i(n, "keepdims", 1) != 0, lse = !strcmp(n->np->op_type, "ReduceLogSumExp");
	for (int i = 0; lse && i < 2; i++) {	/* log(sum(exp(x - m))) + m, m the max: no overflow */
		if (na > 0)
			ir_b_ints(n->b, "axes", axes, na);
		ir_b_int(n->b, "keepdims", i ? keep : 1);
		m[i] = ir_b1(n->b, OP_REDUCE_MAX, x);
	}
	if (lse)
		x = ir_b1(n->b, OP_EXP, ir_b2(n->b, OP_SUB, x, m[0]));
	if (na > 0)
		ir_b_ints(n->b, "axes", axes, na);
	ir_b_int(n->b, "keepdims", keep);
	r = ir_b1(n->b, reduce_op(n->np->op_type), x);
	if (r && !strcmp(n->np->op_type, "ReduceL2"))
		r = ir_b1(n->b, OP_SQRT, r);
	if (r && (lse || !strcmp(n->np->op_type, "ReduceLogSum")))
		r = ir_b1(n->b, OP_LOG, r);
	if (r && lse)
		r = ir_b2(n->b, OP_ADD, r, m[1]);
	return ox_set(n, 0, r);
}

static int
imp_argmax(ONode *n)
{
	ir_b_int(n->b, "axis", ox_attr_i(n, "axis", 0));
	ir_b_int(n->b, "keepdims", ox_attr_i(n, "keepdims", 1) != 0);
	if (ox_attr_i(n, "select_last_index", 0))
		ir_b_int(n->b, "select_last_index", 1);
	return ox_set(n, 0, ir_b1(n->b, OP_ARGMAX, ox_in(n, 0)));
}

static int
imp_cumsum(ONode *n)
{
	int64_t axis;

	if (ox_known_ints(ox_kin(n, 1), &axis, 1) != 1)
		return ox_err(n, "axis must be a constant");
	ir_b_int(n->b, "axis", axis);
	if (ox_attr_i(n, "exclusive", 0))
		ir_b_int(n->b, "exclusive", 1);
	if (ox_attr_i(n, "reverse", 0))
		ir_b_int(n->b, "reverse", 1);
	return ox_set(n, 0, ir_b1(n->b, OP_CUMSUM, ox_in(n, 0)));
}

static int
nout_used(const ONode *n)
{
	int k = 1;

	for (int i = 0; i < n->nout; i++)
		if (n->out[i])
			k = i + 1;
	return k;
}

static int
imp_layer_norm(ONode *n)
{
	Value *in[3] = {ox_in(n, 0), ox_in(n, 1), ox_in(n, 2)};
	int nout = MIN(nout_used(n), 3);
	Node *r;

	ir_b_int(n->b, "axis", ox_attr_i(n, "axis", -1));
	ir_b_float(n->b, "eps", ox_attr_f(n, "epsilon", 1e-5));
	r = ir_b_node(n->b, OP_LAYER_NORM, in, in[2] ? 3 : 2, nout);
	if (!r)
		return -1;
	for (int i = 0; i < nout; i++)
		ox_set(n, i, r->out[i]);
	return 0;
}

static Value *
cast_to_dt(Builder *b, Value *v, DType dt)
{
	if (!v || v->type.dt == dt)
		return v;
	ir_b_str(b, "to", dtype_name(dt));
	return ir_b1(b, OP_CAST, v);
}

/* RMSNormalization-23: Y has the scale's type (V), not X's (T).  dynamo
 * writes a bf16 x with an f32 scale and an f32 Y where the model normalises
 * x.float() (Gemma, Qwen3.5, OLMo 3, ...): then the norm runs in f32 on the
 * widened x (its stash type) and Y is cast to V.
 * With one 16-bit type (DeepSeek, GLM, Mixtral: the weight times the
 * normalised x cast back, as PyTorch's LlamaRMSNorm), the definition rounds
 * twice: Normalized (computed in the f32 stash type) is cast to T, then
 * multiplied by the scale in V: rms_norm with a scale of 1, then mul.
 * Canon makes it one rms_norm again for the kernels (canon_norm_scale). */
static int
imp_rms_norm(ONode *n)
{
	Value *x = ox_in(n, 0), *s = ox_in(n, 1);
	DType v = s ? s->type.dt : DT_F32;
	int mixed = x && s && x->type.dt != v;
	int twice = x && s && !mixed && (v == DT_F16 || v == DT_BF16);

	if (mixed)
		x = cast_to_dt(n->b, x, DT_F32), s = cast_to_dt(n->b, s, DT_F32);
	ir_b_int(n->b, "axis", ox_attr_i(n, "axis", -1));
	ir_b_float(n->b, "eps", ox_attr_f(n, "epsilon", 1e-5));
	Value *y = ir_b2(n->b, OP_RMS_NORM, x, twice ? ox_scalar(n->b, v, 1) : s);
	if (twice)
		return ox_set(n, 0, ir_b2(n->b, OP_MUL, y, s));
	return ox_set(n, 0, mixed ? cast_to_dt(n->b, y, v) : y);
}

static int
imp_topk(ONode *n)
{
	int64_t k;
	Node *r;
	Value *x = ox_in(n, 0);
	int ax = x ? ir_axis(ox_attr_i(n, "axis", -1), x->type.rank) : -1;
	Dim kd;

	/* argsort (DeepSeek-V2 in transformers 4.57): K is the axis's own
	 * length, Shape(x)[axis], symbolic in a dynamic export: k = -1 */
	if (ox_known_ints(ox_kin(n, 1), &k, 1) != 1) {
		if (ax < 0 || ox_known_dims(n->c, ox_kin(n, 1), &kd, 1) != 1 || kd != x->type.dim[ax])
			return ox_err(n, "K must be a constant or the length of the axis");
		k = -1;
	}
	ir_b_int(n->b, "k", k);
	ir_b_int(n->b, "axis", ox_attr_i(n, "axis", -1));
	ir_b_int(n->b, "largest", ox_attr_i(n, "largest", 1) != 0);
	ir_b_int(n->b, "sorted", ox_attr_i(n, "sorted", 1) != 0);
	if (!(r = ir_b_node(n->b, OP_TOPK, &x, 1, 2)))
		return -1;
	ox_set(n, 0, r->out[0]);
	return ox_set(n, 1, r->out[1]);
}

/* --- matmul -------------------------------------------------------------- */

static int
imp_matmul(ONode *n)
{
	return ox_set(n, 0, ir_b2(n->b, OP_MATMUL, ox_in(n, 0), ox_in(n, 1)));
}

/* Gemm: alpha*op(A)@op(B) + beta*C.  The bias operand carries C when
 * alpha = beta = 1; otherwise scalar muls and an add. */
static Value *
gemm(ONode *n)
{
	double alpha = ox_attr_f(n, "alpha", 1), beta = ox_attr_f(n, "beta", 1);
	Value *in[3] = {ox_in(n, 0), ox_in(n, 1), NULL}, *y, *cv;
	int bias = ox_has(n, 2) && alpha == 1 && beta == 1;
	DType dt = ox_tin(n, 0)->dt;
	Node *r;

	if (ox_tin(n, 0)->rank != 2 || ox_tin(n, 1)->rank != 2) {
		ox_err(n, "A and B must be matrices");
		return NULL;
	}
	if (ox_attr_i(n, "transA", 0))
		ir_b_int(n->b, "trans_a", 1);
	if (ox_attr_i(n, "transB", 0))
		ir_b_int(n->b, "trans_b", 1);
	if (bias)
		in[2] = ox_in(n, 2);
	if (!(r = ir_b_node(n->b, OP_MATMUL, in, bias ? 3 : 2, 1)))
		return NULL;
	y = r->out[0];
	if (alpha != 1)
		y = ir_b2(n->b, OP_MUL, y, ox_scalar(n->b, dt, alpha));
	if (y && ox_has(n, 2) && !bias && beta != 0) {
		cv = ox_in(n, 2);
		if (beta != 1)
			cv = ir_b2(n->b, OP_MUL, cv, ox_scalar(n->b, dt, beta));
		y = ir_b2(n->b, OP_ADD, y, cv);
	}
	return y;
}

static int
imp_gemm(ONode *n)
{
	return ox_set(n, 0, gemm(n));
}

/* com.microsoft.FusedGemm: Gemm, then the activation onnxruntime fused
 * into it (its attribute names the ONNX op; alpha/beta as that op's). */
static int
imp_ms_fused_gemm(ONode *n)
{
	const char *act = ox_attr_s(n, "activation", "");
	Value *y = gemm(n);
	Op op;

	if (!y)
		return -1;
	if (!*act)
		return ox_set(n, 0, y);
	if (!strcmp(act, "Relu"))
		op = OP_RELU;
	else if (!strcmp(act, "Sigmoid"))
		op = OP_SIGMOID;
	else if (!strcmp(act, "Tanh"))
		op = OP_TANH;
	else if (!strcmp(act, "LeakyRelu")) {
		op = OP_LEAKY_RELU;
		ir_b_float(n->b, "alpha", ox_attr_f(n, "activation_alpha", 0.01));
	} else if (!strcmp(act, "HardSigmoid")) {
		op = OP_HARD_SIGMOID;
		ir_b_float(n->b, "alpha", ox_attr_f(n, "activation_alpha", 0.2));
		ir_b_float(n->b, "beta", ox_attr_f(n, "activation_beta", 0.5));
	} else
		return ox_err(n, "activation '%s' is not supported", act);
	return ox_set(n, 0, ir_b1(n->b, op, y));
}

/* --- aliases, constants -------------------------------------------------- */

static int
imp_identity(ONode *n)
{
	ox_alias(n, 0, n->in[0]);
	return 0;
}

static int
imp_dropout(ONode *n)
{
	const Known *tm = ox_kin(n, 2);
	const Type *t = ox_tin(n, 0);
	Dim dims[MAXRANK];
	int dyn = 0;

	if (ox_has(n, 2) && (!tm || !ox_known_static(tm) || tm->n != 1))
		return ox_err(n, "training_mode must be a constant");
	if (tm && tm->iv[0].v)
		return ox_err(n, "training mode Dropout is not supported");
	ox_alias(n, 0, n->in[0]);
	if (n->nout < 2 || !n->out[1])
		return 0;
	for (int i = 0; i < t->rank; i++) {
		dims[i] = t->dim[i];
		dyn |= ir_dim_has_unknown(n->c->m, dims[i]);
	}
	ir_b_int(n->b, "value", 1);
	ir_b_str(n->b, "to", "bool");
	if (!dyn) {
		ir_b_dims(n->b, "shape", dims, t->rank);
		return ox_set(n, 1, ir_b_node(n->b, OP_CONSTANT_OF_SHAPE, NULL, 0, 1)->out[0]);
	}
	return ox_set(n, 1, ir_b1(n->b, OP_CONSTANT_OF_SHAPE,
				  ir_b1(n->b, OP_SHAPE, ox_in(n, 0))));
}

static int
const_list(ONode *n, const Onnx__AttributeProto *a, DType dt)
{
	int isf = dt == DT_F32;
	int64_t cnt = isf ? (int64_t)a->n_floats : (int64_t)a->n_ints;
	int scalar = a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT ||
		     a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	Known *k;

	if (scalar)
		cnt = 1;
	if (cnt > OX_KNOWN_MAX)
		return ox_err(n, "constant list of %lld values is too long", (long long)cnt);
	k = ox_known_new(n->c, dt, scalar ? 0 : 1, &cnt);
	for (int64_t i = 0; i < cnt; i++) {
		if (isf)
			k->fv[i] = scalar ? a->f : a->floats[i];
		else
			k->iv[i] = (SInt){scalar ? a->i : a->ints[i], SI_NUM};
	}
	if (isf && cnt > OX_KNOWN_FMAX) {
		ox_set_known(n, 0, k);
		return ox_set(n, 0, ox_value(n->c, n->out[0]));
	}
	ox_set_known(n, 0, k);
	return 0;
}

static int
imp_constant(ONode *n)
{
	const Onnx__AttributeProto *a;
	OVal *o = n->out[0];

	if (n->np->n_attribute != 1)
		return ox_err(n, "needs exactly one value attribute");
	a = n->np->attribute[0];
	if (!a->name)
		return ox_err(n, "attribute without a name");
	if (!strcmp(a->name, "value") && a->t) {
		if (!o)
			return 0;
		if (ox_bind_tensor(n->c, o, a->t, n->loc, o->name))
			return -1;
		o->state = 1;
		return 0;
	}
	if (!strcmp(a->name, "value_float") || !strcmp(a->name, "value_floats"))
		return const_list(n, a, DT_F32);
	if (!strcmp(a->name, "value_int") || !strcmp(a->name, "value_ints"))
		return const_list(n, a, DT_I64);
	return ox_err(n, "constant attribute '%s' is not supported", a->name);
}

/* --- indexing ------------------------------------------------------------ */

static int
imp_gather_elements(ONode *n)
{
	ir_b_int(n->b, "axis", ox_attr_i(n, "axis", 0));
	return ox_set(n, 0, ir_b2(n->b, OP_GATHER_ELEMENTS, ox_in(n, 0), ox_in(n, 1)));
}

static int
imp_gather_nd(ONode *n)
{
	int64_t b = ox_attr_i(n, "batch_dims", 0);

	if (b)
		ir_b_int(n->b, "batch_dims", b);
	return ox_set(n, 0, ir_b2(n->b, OP_GATHER_ND, ox_in(n, 0), ox_in(n, 1)));
}

static int
imp_scatter(ONode *n)
{
	int elems = strcmp(n->np->op_type, "ScatterElements") == 0;
	const char *red = ox_attr_s(n, "reduction", "none");
	Value *in[3] = {ox_in(n, 0), ox_in(n, 1), ox_in(n, 2)};
	Node *r;

	if (elems)
		ir_b_int(n->b, "axis", ox_attr_i(n, "axis", 0));
	if (strcmp(red, "none") != 0)
		ir_b_str(n->b, "reduction", red);
	r = ir_b_node(n->b, elems ? OP_SCATTER_ELEMENTS : OP_SCATTER_ND, in, 3, 1);
	return ox_set(n, 0, r ? r->out[0] : NULL);
}

static int
imp_nonzero(ONode *n)
{
	return ox_set(n, 0, ir_b1(n->b, OP_NONZERO, ox_in(n, 0)));
}

static int
imp_onehot(ONode *n)
{
	const Known *dk = ox_kin(n, 1), *vk = ox_kin(n, 2);
	double depth;
	Value *ix;

	if (!dk || dk->n != 1 || !ox_known_static(dk))
		return ox_err(n, "depth must be a constant");
	if (!vk || vk->n != 2 || !ox_known_static(vk))
		return ox_err(n, "values must be a constant [off, on]");
	depth = dk->fv ? dk->fv[0] : (double)dk->iv[0].v;
	if (depth < 0 || depth > (double)INT32_MAX)
		return ox_err(n, "depth %g is out of range", depth);
	ir_b_int(n->b, "depth", (int64_t)depth);
	ir_b_int(n->b, "axis", ox_attr_i(n, "axis", -1));
	if (vk->fv) {
		ir_b_float(n->b, "off", vk->fv[0]);
		ir_b_float(n->b, "on", vk->fv[1]);
	} else {
		ir_b_int(n->b, "off", vk->iv[0].v);
		ir_b_int(n->b, "on", vk->iv[1].v);
	}
	ir_b_str(n->b, "to", dtype_name(vk->dt));
	ix = ox_in(n, 0);
	if (ix && dtype_is_float(ix->type.dt)) {	/* float indices are cast to int64 */
		Attr keep[16];
		int np = n->b->npend;
		memcpy(keep, n->b->pend, sizeof keep);
		n->b->npend = 0;
		ir_b_str(n->b, "to", "i64");
		ix = ir_b1(n->b, OP_CAST, ix);
		memcpy(n->b->pend, keep, sizeof keep);
		n->b->npend = np;
	}
	return ox_set(n, 0, ix ? ir_b1(n->b, OP_ONEHOT, ix) : NULL);
}

/* --- the table ----------------------------------------------------------- */

/* ORDER: first opset, then the inputs the importer needs present (the
 * first minin) and accepts (maxin, -1: any number). */
static const OpEntry ops[] = {
	/* elementwise */
	{"", "Abs", 13, imp_unary, 1, 1}, {"", "Neg", 13, imp_unary, 1, 1}, {"", "Exp", 13, imp_unary, 1, 1},
	{"", "Log", 13, imp_unary, 1, 1}, {"", "Sqrt", 13, imp_unary, 1, 1},
	{"", "Reciprocal", 13, imp_unary, 1, 1}, {"", "Erf", 13, imp_unary, 1, 1},
	{"", "Floor", 13, imp_unary, 1, 1}, {"", "Sign", 13, imp_unary, 1, 1},
	{"", "Tanh", 13, imp_unary, 1, 1}, {"", "Sigmoid", 13, imp_unary, 1, 1},
	{"", "Relu", 13, imp_unary, 1, 1}, {"", "Softplus", 13, imp_unary, 1, 1},
	{"", "HardSwish", 14, imp_unary, 1, 1}, {"", "Not", 13, imp_unary, 1, 1},
	{"", "LeakyRelu", 13, imp_leaky_relu, 1, 1}, {"", "HardSigmoid", 13, imp_hard_sigmoid, 1, 1},
	{"", "Gelu", 20, imp_gelu, 1, 1}, {"", "Clip", 13, imp_clip, 1, 3},
	{"", "Add", 13, imp_binary, 2, 2}, {"", "Sub", 13, imp_binary, 2, 2},
	{"", "Mul", 13, imp_binary, 2, 2}, {"", "Div", 13, imp_binary, 2, 2},
	{"", "Pow", 13, imp_binary, 2, 2}, {"", "Mod", 13, imp_mod, 2, 2},
	{"", "Equal", 13, imp_binary, 2, 2},
	{"", "Greater", 13, imp_binary, 2, 2}, {"", "Less", 13, imp_binary, 2, 2},
	{"", "GreaterOrEqual", 13, imp_binary, 2, 2}, {"", "LessOrEqual", 13, imp_binary, 2, 2},
	{"", "And", 13, imp_binary, 2, 2}, {"", "Or", 13, imp_binary, 2, 2},
	{"", "Min", 13, imp_variadic, 1, -1}, {"", "Max", 13, imp_variadic, 1, -1},
	{"", "Sum", 13, imp_variadic, 1, -1}, {"", "Where", 13, imp_where, 3, 3},
	{"", "Cast", 13, imp_cast, 1, 1}, {"", "CastLike", 15, imp_castlike, 2, 2},
	/* reductions, normalisation, matmul */
	{"", "Softmax", 13, imp_softmax, 1, 1}, {"", "LogSoftmax", 13, imp_softmax, 1, 1},
	{"", "ReduceSum", 13, imp_reduce, 1, 2}, {"", "ReduceMean", 13, imp_reduce, 1, 2},
	{"", "ReduceMax", 13, imp_reduce, 1, 2}, {"", "ReduceMin", 13, imp_reduce, 1, 2},
	{"", "ReduceL1", 13, imp_reduce, 1, 2}, {"", "ReduceL2", 13, imp_reduce, 1, 2},
	{"", "ReduceSumSquare", 13, imp_reduce, 1, 2}, {"", "ReduceLogSum", 13, imp_reduce, 1, 2},
	{"", "ReduceLogSumExp", 13, imp_reduce, 1, 2},
	{"", "ArgMax", 13, imp_argmax, 1, 1}, {"", "TopK", 13, imp_topk, 2, 2},
	{"", "CumSum", 14, imp_cumsum, 2, 2},
	/* onnxruntime registers LayerNormalization in the default domain from
	 * opset 1 (its fusions write it into opset-14 models): the same op */
	{"", "LayerNormalization", 1, imp_layer_norm, 2, 3},
	{"", "RMSNormalization", 23, imp_rms_norm, 2, 2},
	{"", "MatMul", 13, imp_matmul, 2, 2}, {"", "Gemm", 13, imp_gemm, 2, 3},
	{"", "Einsum", 13, imp_einsum, 1, 2},
	/* indexing */
	{"", "Gather", 13, imp_gather, 2, 2}, {"", "GatherElements", 13, imp_gather_elements, 2, 2},
	{"", "GatherND", 13, imp_gather_nd, 2, 2}, {"", "ScatterElements", 13, imp_scatter, 3, 3},
	{"", "ScatterND", 13, imp_scatter, 3, 3}, {"", "OneHot", 13, imp_onehot, 3, 3},
	{"", "NonZero", 13, imp_nonzero, 1, 1},
	/* shapes */
	{"", "Transpose", 13, imp_transpose, 1, 1}, {"", "Reshape", 13, imp_reshape, 2, 2},
	{"", "Flatten", 13, imp_flatten, 1, 1}, {"", "Squeeze", 13, imp_squeeze, 1, 2},
	{"", "Unsqueeze", 13, imp_unsqueeze, 2, 2}, {"", "Concat", 13, imp_concat, 1, -1},
	{"", "Split", 13, imp_split, 1, 2}, {"", "Slice", 13, imp_slice, 3, 5},
	{"", "Shape", 13, imp_shape, 1, 1}, {"", "Size", 13, imp_size, 1, 1},
	{"", "Expand", 13, imp_expand, 2, 2}, {"", "Tile", 13, imp_tile, 2, 2},
	{"", "Range", 13, imp_range, 3, 3}, {"", "Constant", 13, imp_constant, 0, 0},
	{"", "ConstantOfShape", 13, imp_constant_of_shape, 1, 1},
	{"", "Identity", 13, imp_identity, 1, 1}, {"", "Dropout", 13, imp_dropout, 1, 3},
	/* sequences of a known length (onnx_seq.c) */
	{"", "SplitToSequence", 13, imp_split_to_sequence, 1, 2},
	{"", "SequenceConstruct", 13, imp_sequence_construct, 1, -1},
	{"", "SequenceInsert", 13, imp_sequence_insert, 2, 3},
	{"", "SequenceAt", 13, imp_sequence_at, 2, 2},
	{"", "SequenceLength", 13, imp_sequence_length, 1, 1},
	{"", "ConcatFromSequence", 13, imp_concat_from_sequence, 1, 1},
	/* quantisation */
	{"", "QuantizeLinear", 13, imp_quantize, 2, 3},
	{"", "DequantizeLinear", 13, imp_dequantize, 2, 3},
	/* onnxruntime's copies, which quantize_static writes for int4/int16
	 * types at opsets without them (QInt4 weights): the same definitions */
	{"com.microsoft", "QuantizeLinear", 1, imp_quantize, 2, 3},
	{"com.microsoft", "DequantizeLinear", 1, imp_dequantize, 2, 3},
	{"", "DynamicQuantizeLinear", 13, imp_dynamic_quantize, 1, 1},
	{"", "MatMulInteger", 13, imp_matmul_integer, 2, 4},
	/* the QOperator format (onnx_qop.c) */
	{"", "QLinearMatMul", 13, imp_qlinear_matmul, 8, 8},
	{"com.microsoft", "QGemm", 1, imp_ms_qgemm, 6, 9},
	{"com.microsoft", "QLinearAdd", 1, imp_ms_qlinear_binary, 7, 8},
	{"com.microsoft", "QLinearMul", 1, imp_ms_qlinear_binary, 7, 8},
	{"com.microsoft", "QLinearSigmoid", 1, imp_ms_qlinear_unary, 4, 5},
	{"com.microsoft", "QLinearLeakyRelu", 1, imp_ms_qlinear_unary, 4, 5},
	{"com.microsoft", "QLinearSoftmax", 1, imp_ms_qlinear_unary, 4, 5},
	{"com.microsoft", "QLinearConcat", 1, imp_ms_qlinear_concat, 5, -1},
	{"com.microsoft", "QLinearWhere", 1, imp_ms_qlinear_where, 9, 9},
	/* com.microsoft */
	{"", "SimplifiedLayerNormalization", 1, imp_ms_simplified_ln, 2, 2},
	{"com.microsoft", "SimplifiedLayerNormalization", 1, imp_ms_simplified_ln, 2, 2},
	{"com.microsoft", "SkipSimplifiedLayerNormalization", 1, imp_ms_skip_simplified_ln, 3, 4},
	{"com.microsoft", "SkipLayerNormalization", 1, imp_ms_skip_ln, 3, 5},
	{"com.microsoft", "Gelu", 1, imp_ms_gelu, 1, 1},
	{"com.microsoft", "BiasGelu", 1, imp_ms_gelu, 2, 2},
	{"com.microsoft", "FastGelu", 1, imp_ms_fast_gelu, 1, 2},
	{"com.microsoft", "QuickGelu", 1, imp_ms_quick_gelu, 1, 1},
	{"com.microsoft", "FusedMatMul", 1, imp_ms_fused_matmul, 2, 2},
	{"com.microsoft", "FusedGemm", 1, imp_ms_fused_gemm, 2, 3},
	{"com.microsoft", "MatMulNBits", 1, imp_ms_matmul_nbits, 3, 6},
	{"com.microsoft", "MoE", 1, imp_ms_moe, 3, 8},
	{"com.microsoft", "QMoE", 1, imp_ms_qmoe, 4, 14},
};

static const char *
norm_domain(const char *d)
{
	return !d || !strcmp(d, "ai.onnx") ? "" : d;
}

/* Opsets 11 and 12 of the default domain (torch.onnx.export(opset_version=11),
 * still in many users' scripts) are read as opset 13 where an op's meaning
 * did not change, and through ox_legacy (onnx.c) where 13 moved an attribute
 * to an input (Squeeze, Unsqueeze, Split; ReduceSum's axes attribute
 * imp_reduce reads) or changed the meaning (Softmax, LogSoftmax: coerced to
 * 2-D at the axis, imp_softmax).  The ops whose opset-13 meaning is new are
 * not read below 13: */
static const char *const changed13[] = {"Hardmax", "Pad", "Resize"};	/* Clip-11's inputs are 13's */

/* The importer for op at the domain's opset; NULL if we have none. */
const OpEntry *
ox_find_op(const char *domain, const char *op, int opset)
{
	const OpEntry *e = NULL;

	domain = norm_domain(domain);
	if (!*domain && opset >= OX_OPSET_MIN && opset < 13) {
		for (size_t i = 0; i < NELEM(changed13); i++)
			if (!strcmp(op, changed13[i]))
				return NULL;
		opset = 13;
	}
	for (size_t i = 0; i < NELEM(ops); i++)
		if (!strcmp(ops[i].op, op) && !strcmp(ops[i].domain, domain) &&
		    ops[i].minver <= opset && (!e || ops[i].minver > e->minver))
			e = &ops[i];
	return e;
}

int
ox_op_known(const char *domain, const char *op)
{
	domain = norm_domain(domain);
	for (size_t i = 0; i < NELEM(ops); i++)
		if (!strcmp(ops[i].op, op) && !strcmp(ops[i].domain, domain))
			return 1;
	return 0;
}

int
onnx_op_supported(const char *domain, const char *op, int opset)
{
	if (!strcmp(norm_domain(domain), "") && (opset < OX_OPSET_MIN || opset > 23))
		return 0;
	return ox_find_op(domain, op, opset) != NULL;
}
