/*
 * onnx_quant.c — QuantizeLinear and DequantizeLinear (per tensor, per axis,
 * blocked), and the com.microsoft ops that quantise or route: MatMulNBits,
 * MoE and QMoE (the optimizer's fusions are in onnx_ms.c).
 *
 * Packed weights (MatMulNBits' and QMoE's uint8 blobs) must be
 * initializers: their bytes are re-declared as u4/u8 weights of the logical
 * shape, since the IR has no bitcast.  Then
 *
 *	MatMulNBits(A, B, s, z)  =>  %w = dequantize $B.q, %s, %z, axis=1, block_size=bs
 *				     %y = matmul %a, %w, trans_b=1
 *	MoE(x, logits, fc1, fc2, fc3)  =>  %y = moe %x, %logits, _, %gu, %fc2, k=, renorm=, act=
 *
 * What the moe op cannot express (non-gated experts, sparse mixer, other
 * SwiGLU constants) is a diagnostic naming the attribute.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* --- QuantizeLinear, DequantizeLinear ------------------------------------ */

static int
quant_axis(ONode *n)
{
	int64_t axis, bs = ox_attr_i(n, "block_size", 0);

	if (ox_tin(n, 1)->rank == 0 && bs == 0)
		return 0;
	if (ox_axis(n, ox_attr_i(n, "axis", 1), ox_tin(n, 0)->rank, &axis))
		return -1;
	ir_b_int(n->b, "axis", axis);
	if (bs < 0)
		return ox_err(n, "negative block_size");
	if (bs > 0)
		ir_b_int(n->b, "block_size", bs);
	return 0;
}

static int
quant_node(ONode *n, Op op, DType to)
{
	Value *in[3] = {ox_in(n, 0), ox_in(n, 1), ox_in(n, 2)};
	Node *r;

	if (in[1] && in[2] && in[2]->type.rank != in[1]->type.rank &&
	    ir_type_numel(&in[2]->type) == 1 && ir_type_numel(&in[1]->type) == 1) {
		ir_b_dims(n->b, "shape", in[1]->type.dim, in[1]->type.rank);
		in[2] = ir_b1(n->b, OP_RESHAPE, in[2]);	/* zero point [1] with a scalar scale */
	}
	if (quant_axis(n))
		return -1;
	ir_b_str(n->b, "to", dtype_name(to));
	r = ir_b_node(n->b, op, in, in[2] ? 3 : 2, 1);
	return ox_set(n, 0, r ? r->out[0] : NULL);
}

int
imp_quantize(ONode *n)
{
	int64_t code = ox_attr_i(n, "output_dtype", 0);
	DType to = DT_U8;

	if (ox_has(n, 2))
		to = ox_tin(n, 2)->dt;
	else if (code && dtype_from_onnx((int)code, &to) != 0)
		return ox_err(n, "output_dtype %lld is not supported", (long long)code);
	if (code && ox_has(n, 2) && dtype_onnx(to) != code)
		return ox_err(n, "output_dtype disagrees with the zero point's type");
	if (ox_attr_i(n, "saturate", 1) == 0)
		ir_b_int(n->b, "saturate", 0);
	return quant_node(n, OP_QUANTIZE, to);
}

int
imp_dequantize(ONode *n)
{
	int64_t code = ox_attr_i(n, "output_dtype", 0);
	DType to = ox_tin(n, 1)->dt;

	if (code && dtype_from_onnx((int)code, &to) != 0)
		return ox_err(n, "output_dtype %lld is not supported", (long long)code);
	return quant_node(n, OP_DEQUANTIZE, to);
}

/* --- dynamic quantisation (onnxruntime's quantize_dynamic) -------------- */

/* DynamicQuantizeLinear: u8 with a scale and zero point from the whole
 * tensor's range, widened to hold 0 (ONNX's definition):
 *	lo = min(min(x), 0)  hi = max(max(x), 0)  scale = (hi - lo) / 255
 *	zero = saturate(round(-lo / scale))   y = saturate(round(x / scale) + zero)
 * The two roundings are the IR's quantize (half to even, saturating).  An
 * all-zero x has scale 1, as onnxruntime computes it (ONNX divides by 0). */
int
imp_dynamic_quantize(ONode *n)
{
	Builder *b = n->b;
	Value *x = ox_in(n, 0), *lo, *hi, *s, *z, *in[3], *one = ir_b_const_f(b, DT_F32, 1);
	Node *r;

	if (ox_tin(n, 0)->dt != DT_F32)
		return ox_err(n, "x must be float32 (the operator's only type)");
	ir_b_int(b, "keepdims", 0);
	lo = ir_b2(b, OP_MIN, ir_b1(b, OP_REDUCE_MIN, x), ir_b_const_f(b, DT_F32, 0));
	ir_b_int(b, "keepdims", 0);
	hi = ir_b2(b, OP_MAX, ir_b1(b, OP_REDUCE_MAX, x), ir_b_const_f(b, DT_F32, 0));
	s = ir_b2(b, OP_DIV, ir_b2(b, OP_SUB, hi, lo), ir_b_const_f(b, DT_F32, 255));
	in[0] = ir_b2(b, OP_EQUAL, hi, lo), in[1] = one, in[2] = s;
	r = ir_b_node(b, OP_WHERE, in, 3, 1);
	s = r ? r->out[0] : NULL;
	in[0] = ir_b1(b, OP_NEG, lo), in[1] = s;
	ir_b_str(b, "to", "u8");
	r = ir_b_node(b, OP_QUANTIZE, in, 2, 1);
	z = r ? r->out[0] : NULL;
	in[0] = x, in[2] = z;
	ir_b_str(b, "to", "u8");
	r = ir_b_node(b, OP_QUANTIZE, in, 3, 1);
	if (ox_set(n, 0, r ? r->out[0] : NULL) || ox_set(n, 1, s))
		return -1;
	return ox_set(n, 2, z);
}

/* An 8-bit operand minus its zero point, as f32 (exact: |q - zero| <= 255).
 * A 1-D zero point of A is per row: [M] -> [M, 1]. */
static Value *
centred(ONode *n, int q, int zi)
{
	const Type *z = ox_has(n, zi) ? ox_tin(n, zi) : NULL;
	Value *v, *zv;

	ir_b_str(n->b, "to", "f32");
	v = ir_b1(n->b, OP_CAST, ox_in(n, q));
	if (!z)
		return v;
	ir_b_str(n->b, "to", "f32");
	zv = ir_b1(n->b, OP_CAST, ox_in(n, zi));
	if (q == 0 && z->rank == 1 && ir_type_numel(z) != 1) {
		Dim col[2] = {z->dim[0], 1};
		ir_b_dims(n->b, "shape", col, 2);
		zv = ir_b1(n->b, OP_RESHAPE, zv);
	}
	return ir_b2(n->b, OP_SUB, v, zv);
}

/* MatMulInteger: (A - a_zero) @ (B - b_zero) in int32.  Computed in f32 on
 * the centred operands: every product is exact, the sums are exact up to
 * 2^24 (quantize_dynamic's graphs multiply the result by scale_a * scale_b
 * in f32 anyway).  A zero point is per tensor, or 1-D for a 2-D operand: per
 * row of A, per column of B. */
int
imp_matmul_integer(ONode *n)
{
	for (int i = 0; i < 2; i++) {
		const Type *t = ox_tin(n, i), *z = ox_has(n, i + 2) ? ox_tin(n, i + 2) : NULL;
		if (t->dt != DT_U8 && t->dt != DT_I8)
			return ox_err(n, "%s must be uint8 or int8", i ? "B" : "A");
		if (z && z->dt != t->dt)
			return ox_err(n, "%s_zero_point's type differs from %s's", i ? "b" : "a", i ? "B" : "A");
		if (z && ir_type_numel(z) != 1 && !(t->rank == 2 && z->rank == 1))
			return ox_err(n, "%s_zero_point must be a scalar, or 1-D for a 2-D %s",
				      i ? "b" : "a", i ? "B" : "A");
	}
	Value *y = ir_b2(n->b, OP_MATMUL, centred(n, 0, 2), centred(n, 1, 3));
	ir_b_str(n->b, "to", "i32");
	return ox_set(n, 0, ir_b1(n->b, OP_CAST, y));
}

/* --- packed weights ------------------------------------------------------ */

/* The bytes of an initializer input; NULL with a diagnostic otherwise. */
static const unsigned char *
init_bytes(ONode *n, int i, size_t *size)
{
	OVal *o = n->in[i];
	const Type *t = ox_type(o);
	unsigned char *p;

	*size = dtype_bytes(t->dt, (size_t)MAX(ir_type_numel(t), 0));
	if (o->v && o->v->kind == V_WEIGHT)
		return ir_weight_data(o->v->weight, n->c->d);
	if (!o->v && o->k && ox_known_static(o->k) && o->k->iv) {
		p = arena_alloc(n->c->tmp, *size + 1);
		for (int64_t j = 0; j < o->k->n; j++)
			dtype_store_int(t->dt, p, (size_t)j, o->k->iv[j].v);
		return p;
	}
	ox_err(n, "input %d ('%s') must be an initializer", i, o->name);
	return NULL;
}

static void
free_data(void *p, size_t n)
{
	(void)n;
	free(p);
}

/* A weight holding input i's bytes under another type (u8 -> u4 [N,K]);
 * to i4/i8 the values are shifted by the default zero point, so that they
 * need none (the IR's symmetric form). */
static Value *
retyped(ONode *n, int i, DType dt, int rank, const Dim *dims)
{
	Type t = ir_type(dt, rank, dims);
	size_t have, want = dtype_bytes(dt, (size_t)ir_type_numel(&t));
	const unsigned char *src = init_bytes(n, i, &have);
	Weight *w;

	if (!src)
		return NULL;
	if (ir_type_numel(ox_tin(n, i)) < 0 || have != want) {
		ox_err(n, "input %d holds %zu bytes, %s[...] of %lld elements needs %zu", i, have,
		       dtype_name(dt), (long long)ir_type_numel(&t), want);
		return NULL;
	}
	w = ir_add_weight(n->c->m, n->in[i]->name, t);
	w->data = xmalloc(want + 1);
	memcpy(w->data, src, want);
	if (dt == DT_I4 || dt == DT_I8)	/* unsigned q with the default zero 2^(bits-1): q - zero */
		for (size_t j = 0; j < want; j++)
			((uint8_t *)w->data)[j] ^= dt == DT_I4 ? 0x88 : 0x80;
	w->size = want;
	w->free_data = free_data;
	w->source = ir_intern(n->c->m, n->in[i]->name);
	return w->value;
}

static Value *
reshape_attr(Builder *b, Value *x, int rank, const Dim *dims)
{
	ir_b_dims(b, "shape", dims, rank);
	return x ? ir_b1(b, OP_RESHAPE, x) : NULL;
}

static Value *
slice_last(Builder *b, Value *x, int64_t len)
{
	int64_t st = 0, ax = x ? x->type.rank - 1 : 0;

	if (!x || x->type.dim[ax] == len)
		return x;
	ir_b_ints(b, "starts", &st, 1);
	ir_b_ints(b, "ends", &len, 1);
	ir_b_ints(b, "axes", &ax, 1);
	return ir_b1(b, OP_SLICE, x);
}

static Value *
dequant(ONode *n, Value *q, Value *s, Value *z, int64_t axis, int64_t bs, DType to)
{
	Value *in[3] = {q, s, z};
	Node *r;

	if (!q || !s)
		return NULL;
	ir_b_int(n->b, "axis", axis);
	ir_b_int(n->b, "block_size", bs);
	ir_b_str(n->b, "to", dtype_name(to));
	r = ir_b_node(n->b, OP_DEQUANTIZE, in, z ? 3 : 2, 1);
	return r ? r->out[0] : NULL;
}

/* --- MatMulNBits ---------------------------------------------------------- */

static int
nbits_zero(ONode *n, DType qt, int bits, Dim nn, Dim nb, Value **z)
{
	Dim packed[2];

	if (!ox_has(n, 3)) {
		*z = NULL;	/* the values were made signed: see retyped */
		return 0;
	}
	if (dtype_is_float(ox_tin(n, 3)->dt))
		return ox_err(n, "float zero points are not supported");
	packed[0] = nn;
	packed[1] = bits == 4 ? (nb + 1) / 2 * 2 : nb;
	*z = slice_last(n->b, retyped(n, 3, qt, 2, packed), nb);
	return 0;
}

/* g_idx (act-order GPTQ): the scale or zero point of each column, [N, K]. */
static Value *
by_gidx(ONode *n, Value *v, int64_t k)
{
	Value *in[2] = {v, ox_in(n, 4)};
	Node *r;

	if (!v || !in[1])
		return NULL;
	if (in[1]->type.rank != 1 || !dtype_is_int(in[1]->type.dt) || in[1]->type.dim[0] != k)
		return ox_err(n, "g_idx must be an integer tensor [K=%lld]", (long long)k), NULL;
	ir_b_int(n->b, "axis", 1);
	r = ir_b_node(n->b, OP_GATHER, in, 2, 1);
	return r ? r->out[0] : NULL;
}

int
imp_ms_matmul_nbits(ONode *n)
{
	int64_t k = ox_attr_i(n, "K", -1), nn = ox_attr_i(n, "N", -1);
	int64_t bits = ox_attr_i(n, "bits", 4), bs = ox_attr_i(n, "block_size", -1), nb;
	DType qt = ox_has(n, 3) ? (bits == 4 ? DT_U4 : DT_U8) : (bits == 4 ? DT_I4 : DT_I8);
	DType to = ox_tin(n, 0)->dt;
	Value *w, *s, *z = NULL, *in[3];
	Dim d2[2];
	Node *r;

	if (bits != 4 && bits != 8)
		return ox_err(n, "bits=%lld: 4 and 8 are supported", (long long)bits);
	if (k < 1 || nn < 1 || bs < 16 || (bs & (bs - 1)) || k >> 24 || nn >> 24 || bs >> 24)
		return ox_err(n, "bad K=%lld, N=%lld or block_size=%lld", (long long)k,
			      (long long)nn, (long long)bs);
	nb = (k + bs - 1) / bs;
	d2[0] = nn;
	d2[1] = nb * bs;
	w = retyped(n, 1, qt, 2, d2);
	d2[1] = nb;
	s = reshape_attr(n->b, ox_in(n, 2), 2, d2);
	if (!w || nbits_zero(n, qt, (int)bits, nn, nb, &z))
		return -1;
	if (ox_has(n, 4)) {	/* column k's block is g_idx[k]: per-column scales, block 1 */
		if (z && !(z = by_gidx(n, z, k)))
			return -1;
		w = dequant(n, slice_last(n->b, w, k), by_gidx(n, s, k), z, 1, 1, to);
	} else {
		w = slice_last(n->b, dequant(n, w, s, z, 1, bs, to), k);
	}
	in[0] = ox_in(n, 0);
	in[1] = w;
	in[2] = ox_in(n, 5);
	if (!w)
		return -1;
	ir_b_int(n->b, "trans_b", 1);
	r = ir_b_node(n->b, OP_MATMUL, in, in[2] ? 3 : 2, 1);
	return ox_set(n, 0, r ? r->out[0] : NULL);
}

/* --- MoE, QMoE ------------------------------------------------------------ */

typedef struct {
	Value *fc1, *fc2, *fc3;	/* float weights in the current layout */
	Value *b1, *b2, *b3;
	int fusion;		/* 0: fc1 and fc3, 1: interleaved, 2: concatenated */
} Experts;

/* Old exports store fc1 as [E,H,I] (x @ W); the schema now says [E,I,H]. */
static Value *
new_layout(ONode *n, Value *w, Dim h, int hpos)
{
	int64_t perm[3] = {0, 2, 1};

	if (!w || w->type.rank != 3)
		return w;
	if (w->type.dim[hpos] != h && w->type.dim[3 - hpos] == h) {
		ir_b_ints(n->b, "perm", perm, 3);
		return ir_b1(n->b, OP_TRANSPOSE, w);
	}
	return w;
}

static int
moe_act(ONode *n, const Experts *ex)
{
	const char *act = ox_attr_s(n, "activation_type", "relu");
	double alpha = ox_attr_f(n, "activation_alpha", 1), beta = ox_attr_f(n, "activation_beta", 0);
	const Onnx__AttributeProto *lim = ox_attr(n, "swiglu_limit");

	if (!strcmp(act, "silu") && ex->fc3) {
		ir_b_str(n->b, "act", "silu");
		return 0;
	}
	if (strcmp(act, "swiglu") != 0)
		return ox_err(n, "activation_type='%s'%s cannot be expressed by moe (its experts "
			      "are gated)", act, ex->fc3 ? "" : " without fc3");
	if (ex->fusion == 1)
		ir_b_str(n->b, "gu_layout", "interleave");
	if (beta == 1) {
		ir_b_str(n->b, "act", "oai");
		ir_b_float(n->b, "alpha", alpha);
		ir_b_float(n->b, "limit", lim && lim->has_f ? lim->f : 1e300);
		return 0;
	}
	if (beta == 0 && alpha == 1 && !lim) {
		ir_b_str(n->b, "act", "silu");
		return 0;
	}
	return ox_err(n, "swiglu with activation_alpha=%g, activation_beta=%g%s cannot be "
		      "expressed by moe", alpha, beta, lim ? " and a limit" : "");
}

/* Gate and up in one [E,2I,H] tensor (and bias [E,2I]). */
static int
gate_up(ONode *n, Experts *ex, Value **gu, Value **bgu)
{
	Value *cat[2];
	Node *r;

	*gu = ex->fc1;
	*bgu = ex->b1;
	if (ex->fusion != 0 || !ex->fc3)
		return 0;
	cat[0] = ex->fc1;
	cat[1] = ex->fc3;
	ir_b_int(n->b, "axis", 1);
	if (!(r = ir_b_node(n->b, OP_CONCAT, cat, 2, 1)))
		return -1;
	*gu = r->out[0];
	if (!ex->b1 && !ex->b3)
		return 0;
	if (!ex->b1 || !ex->b3)
		return ox_err(n, "fc1 and fc3 must both have biases or neither");
	cat[0] = ex->b1;
	cat[1] = ex->b3;
	ir_b_int(n->b, "axis", 1);
	if (!(r = ir_b_node(n->b, OP_CONCAT, cat, 2, 1)))
		return -1;
	*bgu = r->out[0];
	return 0;
}

/*
 * Routing.  Softmax over all experts, top-k, renormalised when
 * normalize_routing_weights=1.  use_sparse_mixer=1 is PhiMoE's sparsemixer
 * as onnxruntime's kernel computes it (sparse_mixer_top2): top-2 of the raw
 * logits, choice j weighted by its softmax among the experts not chosen
 * before it whose logit l is within 2 eps of the choice's m relatively
 * (kept unless m - l > 2 eps max(|l|, m)), eps = 0.01 (a constant of the
 * kernel, not an attribute), never renormalised: the moe op's
 * router=sparsemixer (docs/onnx.md).
 */
static int
moe_router(ONode *n)
{
	int64_t k = ox_attr_i(n, "k", 1);

	if (ox_attr_i(n, "use_sparse_mixer", 0)) {
		if (k != 2)
			return ox_err(n, "use_sparse_mixer=1 with k=%lld (sparsemixer chooses 2 experts)",
				      (long long)k);
		ir_b_str(n->b, "router", "sparsemixer");
		ir_b_int(n->b, "k", 2);
		ir_b_float(n->b, "jitter_eps", 0.01);
		return 0;
	}
	ir_b_str(n->b, "router", "softmax");
	ir_b_int(n->b, "k", k);
	if (ox_attr_i(n, "normalize_routing_weights", 0))
		ir_b_int(n->b, "renorm", 1);
	return 0;
}

/* The moe op over x flattened to [T,H], reshaped back. */
static int
build_moe(ONode *n, Experts *ex)
{
	const Type *xt = ox_tin(n, 0);
	Value *x = ox_in(n, 0), *in[7], *y;
	Dim h = xt->dim[xt->rank - 1], t = 1, d2[2];
	Node *r;

	if (xt->rank != 2 && xt->rank != 3)
		return ox_err(n, "input must be [T,H] or [B,S,H]");
	for (int i = 0; i + 1 < xt->rank; i++)
		t = ir_dim_mul(n->c->m, t, xt->dim[i]);
	ex->fc1 = new_layout(n, ex->fc1, h, 2);
	ex->fc2 = new_layout(n, ex->fc2, h, 1);
	ex->fc3 = new_layout(n, ex->fc3, h, 2);
	d2[0] = t;
	d2[1] = h;
	if (xt->rank == 3)
		x = ir_dim_has_unknown(n->c->m, t) ? NULL : reshape_attr(n->b, x, 2, d2);
	if (!x)
		return ox_err(n, "cannot flatten the input to [T,H]");
	in[0] = x;
	in[1] = ox_in(n, 1);
	in[2] = NULL;
	in[4] = ex->fc2;
	in[6] = ex->b2;
	if (gate_up(n, ex, &in[3], &in[5]) || moe_act(n, ex))
		return -1;
	if (moe_router(n))
		return -1;
	r = ir_b_node(n->b, OP_MOE, in, in[6] ? 7 : in[5] ? 6 : 5, 1);
	y = r ? r->out[0] : NULL;
	if (y && xt->rank == 3)
		y = reshape_attr(n->b, y, 3, xt->dim);
	return ox_set(n, 0, y);
}

int
imp_ms_moe(ONode *n)
{
	Experts ex = {0};

	ex.fusion = (int)ox_attr_i(n, "swiglu_fusion", 0);
	ex.fc1 = ox_in(n, 2);
	ex.b1 = ox_in(n, 3);
	ex.fc2 = ox_in(n, 4);
	ex.b2 = ox_in(n, 5);
	ex.fc3 = ox_in(n, 6);
	ex.b3 = ox_in(n, 7);
	if (!ex.fc1 || !ex.fc2)
		return ox_err(n, "needs fc1 and fc2 expert weights");
	return build_moe(n, &ex);
}

/* One QMoE weight: u8 [E,N,K/pack] -> dequantized [E,N,K] in x's type. */
static Value *
qmoe_weight(ONode *n, int wi, int si, int zi, int bits, int64_t bs)
{
	const Type *wt = ox_tin(n, wi), *st;
	DType qt = ox_has(n, zi) ? (bits == 4 ? DT_U4 : DT_U8) : (bits == 4 ? DT_I4 : DT_I8);
	DType to = ox_tin(n, 0)->dt;
	Dim d3[3], nb;
	Value *q, *s, *z, *y;

	if (!ox_has(n, si))
		return ox_err(n, "input %d (scales) is missing", si), NULL;
	st = ox_tin(n, si);
	if (wt->rank != 3 || !ir_type_static(wt))
		return ox_err(n, "input %d must be a static [E,N,K/pack] tensor", wi), NULL;
	d3[0] = wt->dim[0];
	d3[1] = wt->dim[1];
	d3[2] = wt->dim[2] * (8 / bits);
	if (bs > 0 && d3[2] % bs)
		return ox_err(n, "block_size %lld does not divide %lld", (long long)bs,
			      (long long)d3[2]), NULL;
	q = retyped(n, wi, qt, 3, d3);
	nb = bs > 0 ? d3[2] / bs : 1;
	if (st->rank != 2 && st->rank != 3)
		return ox_err(n, "input %d (scales) must be [E,N] or [E,N,K/block]", si), NULL;
	d3[2] = nb;
	s = reshape_attr(n->b, ox_in(n, si), 3, d3);
	if (!ox_has(n, zi)) {
		z = NULL;	/* the values were made signed: see retyped */
	} else {
		Dim zd[3] = {d3[0], d3[1], nb};
		if (ox_tin(n, zi)->rank == 2)	/* [E, N/pack]: packed along N */
			z = reshape_attr(n->b, retyped(n, zi, qt, 2, zd), 3, zd);
		else
			z = retyped(n, zi, qt, 3, zd);
	}
	y = dequant(n, q, s, z, 2, bs > 0 ? bs : wt->dim[2] * (8 / bits), st->dt);
	if (y && st->dt != to) {
		ir_b_str(n->b, "to", dtype_name(to));
		y = ir_b1(n->b, OP_CAST, y);
	}
	return y;
}

int
imp_ms_qmoe(ONode *n)
{
	int bits = (int)ox_attr_i(n, "expert_weight_bits", 4);
	int64_t bs = ox_attr_i(n, "block_size", 0);
	Experts ex = {0};

	if (bits != 4 && bits != 8)
		return ox_err(n, "expert_weight_bits=%d: 4 and 8 are supported", bits);
	if (!ox_has(n, 2) || !ox_has(n, 5))
		return ox_err(n, "needs fc1 and fc2 expert weights");
	ex.fusion = (int)ox_attr_i(n, "swiglu_fusion", 0);
	if (!(ex.fc1 = qmoe_weight(n, 2, 3, 11, bits, bs)) ||
	    !(ex.fc2 = qmoe_weight(n, 5, 6, 12, bits, bs)))
		return -1;
	if (ox_has(n, 8) && !(ex.fc3 = qmoe_weight(n, 8, 9, 13, bits, bs)))
		return -1;
	ex.b1 = ox_in(n, 4);
	ex.b2 = ox_in(n, 7);
	ex.b3 = ox_in(n, 10);
	return build_moe(n, &ex);
}
