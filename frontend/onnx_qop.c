/*
 * onnx_qop.c — the QOperator format of onnxruntime's quantize_static
 * (quant_format=QuantFormat.QOperator): ops that read and write 8-bit
 * tensors, each with a scale and a zero point, imported as their
 * definitions over the IR's quantize/dequantize and float ops:
 *
 *	QLinearMatMul(a, sa, za, b, sb, zb, sy, zy)
 *	    => q(matmul(a - za, b - zb) * (sa * sb / sy), zy)
 *	QGemm(a, sa, za, b, sb, zb, c?, sy?, zy?) alpha transA transB
 *	    => the same with the i32 bias c added to the product and
 *	       alpha * sa * sb [/ sy]; without sy the output is f32 (no q)
 *	QLinearAdd(a, sa, za, b, sb, zb, sc, zc)
 *	    => q((a - za) * (sa / sc) + (b - zb) * (sb / sc), zc)
 *	QLinearMul(a, sa, za, b, sb, zb, sc, zc)
 *	    => q((a - za) * (b - zb) * (sa * sb / sc), zc)
 *	QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax (x, sx, zx, sy, zy)
 *	    => quantize(f(dequantize(x, sx, zx)), sy, zy)
 *	QLinearConcat(sy, zy, (x, sx, zx)...) => quantize(concat(dequantize(x)...))
 *	QLinearWhere(c, x, sx, zx, y, sy, zy, sz, zz) => quantize(where(c, dq(x), dq(y)))
 *
 * where q(v, z) = saturate(round_half_even(v) + z) is the IR's quantize with
 * a scale of 1.  The forms (which product is formed first, what is
 * rounded) are onnxruntime's CPU kernels' (MLAS: the integer product is
 * exact, the scale ratio one f32 number, one rounding), so the 8-bit
 * results agree with onnxruntime's and not only with the ONNX definition
 * they approximate; the unary ops are onnxruntime's lookup tables
 * (dequantize, f, quantize), entry for entry.  QLinearSoftmax is the
 * definition: onnxruntime's kernel scales by floor(1 / sy) instead of
 * dividing by sy, the same when 1/sy is an integer (the quantizer gives
 * softmax outputs sy = 1/256).  The MatMul's centred operands are f32, as
 * MatMulInteger's (onnx_quant.c): exact products and sums to 2^24.
 *
 * A scale or zero point is per tensor (one element, any rank), except B's
 * of QLinearMatMul and QGemm, which may be 1-D with one per column of the
 * product (quantize_static(per_channel=True)).  What else the format has
 * (QLinearConv, the pools) is refused by the op table, by name.
 */
#include <string.h>

#include "onnx_int.h"

/* a op b, NULL when either is (a failed build has reported). */
static Value *
bin(ONode *n, Op op, Value *a, Value *b)
{
	return a && b ? ir_b2(n->b, op, a, b) : NULL;
}

/* Input i as a rank-0 value when it has one element (ONNX writes per-tensor
 * scales as [] or [1]); else as is. */
static Value *
flat(ONode *n, int i)
{
	Value *v = ox_in(n, i);

	if (!v || v->type.rank == 0 || ir_type_numel(&v->type) != 1)
		return v;
	ir_b_dims(n->b, "shape", NULL, 0);
	return ir_b1(n->b, OP_RESHAPE, v);
}

/* Scale input i as f32 (QLinearMatMul-21 takes float16 and bfloat16 scales:
 * widened exactly, the ratio then formed in f32 as for f32 scales). */
static Value *
scale(ONode *n, int i)
{
	Value *s = flat(n, i);

	if (!s || s->type.dt == DT_F32)
		return s;
	ir_b_str(n->b, "to", "f32");
	return ir_b1(n->b, OP_CAST, s);
}

/* The scale or zero point input i is per tensor; or, when cols, 1-D (one
 * per column of the product). */
static int
check_param(ONode *n, int i, int cols)
{
	const Type *t;

	if (!ox_has(n, i))
		return 0;
	t = ox_tin(n, i);
	if (ir_type_numel(t) == 1 || (cols && t->rank == 1))
		return 0;
	return ox_err(n, "input %d ('%s') must have one element%s", i, n->in[i]->name,
		      cols ? " or one per column (1-D)" : "");
}

/* 8-bit input q minus its zero point zi, as f32 (exact).  A 1-D zero point
 * of a transposed B ([N,K], one per row) is made a column [N,1]. */
static Value *
centred(ONode *n, int q, int zi, int rows)
{
	Value *v, *z;

	if (ox_tin(n, q)->dt != DT_U8 && ox_tin(n, q)->dt != DT_I8) {
		ox_err(n, "input %d ('%s') must be uint8 or int8", q, n->in[q]->name);
		return NULL;
	}
	ir_b_str(n->b, "to", "f32");
	v = ir_b1(n->b, OP_CAST, ox_in(n, q));
	if (!ox_has(n, zi))
		return v;
	if (ox_tin(n, zi)->dt != ox_tin(n, q)->dt) {
		ox_err(n, "input %d ('%s') must have the type of input %d", zi, n->in[zi]->name, q);
		return NULL;
	}
	z = flat(n, zi);	/* before the pending to=: flat may build a reshape */
	ir_b_str(n->b, "to", "f32");
	z = z ? ir_b1(n->b, OP_CAST, z) : NULL;
	if (rows && z && z->type.rank == 1) {
		Dim col[2] = {z->type.dim[0], 1};
		ir_b_dims(n->b, "shape", col, 2);
		z = ir_b1(n->b, OP_RESHAPE, z);
	}
	return ir_b2(n->b, OP_SUB, v, z);
}

/* saturate(round(v) + zero point zi) in zi's type (uint8 without one). */
static int
requant(ONode *n, Value *v, int zi)
{
	Value *in[3] = {v, ir_b_const_f(n->b, DT_F32, 1), ox_has(n, zi) ? flat(n, zi) : NULL};
	DType to = ox_has(n, zi) ? ox_tin(n, zi)->dt : DT_U8;
	Node *r;

	if (!v || (ox_has(n, zi) && !in[2]))
		return -1;
	ir_b_str(n->b, "to", dtype_name(to));
	r = ir_b_node(n->b, OP_QUANTIZE, in, in[2] ? 3 : 2, 1);
	return ox_set(n, 0, r ? r->out[0] : NULL);
}

/* dequantize(x, s, z) for the (x, s, z) at input i: f32. */
static Value *
dq(ONode *n, int i)
{
	Value *in[3] = {ox_in(n, i), scale(n, i + 1), ox_has(n, i + 2) ? flat(n, i + 2) : NULL};
	Node *r;

	if (check_param(n, i + 1, 0) || check_param(n, i + 2, 0) || !in[0] || !in[1])
		return NULL;
	ir_b_str(n->b, "to", "f32");
	r = ir_b_node(n->b, OP_DEQUANTIZE, in, in[2] ? 3 : 2, 1);
	return r ? r->out[0] : NULL;
}

/* quantize(v, s, z) with the (s, z) at input i as the node's output. */
static int
q_out(ONode *n, Value *v, int i)
{
	Value *in[3] = {v, scale(n, i), ox_has(n, i + 1) ? flat(n, i + 1) : NULL};
	DType to = ox_has(n, i + 1) ? ox_tin(n, i + 1)->dt : DT_U8;
	Node *r;

	if (!v || check_param(n, i, 0) || check_param(n, i + 1, 0) || !in[1])
		return -1;
	ir_b_str(n->b, "to", dtype_name(to));
	r = ir_b_node(n->b, OP_QUANTIZE, in, in[2] ? 3 : 2, 1);
	return ox_set(n, 0, r ? r->out[0] : NULL);
}

/* --- matrix products ----------------------------------------------------- */

/* The product of the centred A (input 0, zero point 2) and B (3, 5),
 * with the node's transposes; B's zero point may be one per column. */
static Value *
qproduct(ONode *n, int ta, int tb)
{
	Value *in[2];
	Node *r;

	if (check_param(n, 1, 0) || check_param(n, 2, 0) || check_param(n, 4, 1) || check_param(n, 5, 1))
		return NULL;
	in[0] = centred(n, 0, 2, 0);
	in[1] = centred(n, 3, 5, tb);
	if (!in[0] || !in[1])
		return NULL;
	if (ta)
		ir_b_int(n->b, "trans_a", 1);
	if (tb)
		ir_b_int(n->b, "trans_b", 1);
	r = ir_b_node(n->b, OP_MATMUL, in, 2, 1);
	return r ? r->out[0] : NULL;
}

/* sa * sb [/ sy]: one f32 number, or one a column. */
static Value *
ratio(ONode *n, double alpha, int ys)
{
	Value *s = scale(n, 1);

	if (alpha != 1)
		s = bin(n, OP_MUL, ir_b_const_f(n->b, DT_F32, alpha), s);
	s = bin(n, OP_MUL, s, scale(n, 4));
	return ys >= 0 ? bin(n, OP_DIV, s, scale(n, ys)) : s;
}

int
imp_qlinear_matmul(ONode *n)
{
	Value *acc = qproduct(n, 0, 0);

	if (!acc || check_param(n, 6, 0) || check_param(n, 7, 0))
		return -1;
	return requant(n, bin(n, OP_MUL, acc, ratio(n, 1, 6)), 7);
}

/* com.microsoft.QGemm: C is the i32 bias in units of sa * sb (added to the
 * integer product); without y_scale the result is f32. */
int
imp_ms_qgemm(ONode *n)
{
	int ta = ox_attr_i(n, "transA", 0) != 0, tb = ox_attr_i(n, "transB", 0) != 0;
	double alpha = ox_attr_f(n, "alpha", 1);
	Value *acc;

	if (ox_tin(n, 0)->rank != 2 || ox_tin(n, 3)->rank != 2)
		return ox_err(n, "A and B must be matrices");
	if (ox_has(n, 8) && !ox_has(n, 7))
		return ox_err(n, "y_zero_point without y_scale");
	if (!(acc = qproduct(n, ta, tb)) || check_param(n, 7, 0) || check_param(n, 8, 0))
		return -1;
	if (ox_has(n, 6)) {
		if (ox_tin(n, 6)->dt != DT_I32)
			return ox_err(n, "C must be int32");
		ir_b_str(n->b, "to", "f32");
		acc = bin(n, OP_ADD, acc, ir_b1(n->b, OP_CAST, ox_in(n, 6)));
	}
	if (!ox_has(n, 7))
		return ox_set(n, 0, bin(n, OP_MUL, acc, ratio(n, alpha, -1)));
	return requant(n, bin(n, OP_MUL, acc, ratio(n, alpha, 7)), 8);
}

/* --- elementwise --------------------------------------------------------- */

/* (input q - zero point) * (scale / sc): an operand of QLinearAdd. */
static Value *
add_term(ONode *n, int q)
{
	Value *c = centred(n, q, q + 2, 0);

	return bin(n, OP_MUL, c, bin(n, OP_DIV, scale(n, q + 1), scale(n, 6)));
}

/* QLinearAdd and QLinearMul (com.microsoft), broadcasting as Add and Mul. */
int
imp_ms_qlinear_binary(ONode *n)
{
	int add = strcmp(n->np->op_type, "QLinearAdd") == 0;
	Value *v, *s;

	for (int i = 1; i < 8; i++)
		if (i != 3 && check_param(n, i, 0))
			return -1;
	if (ox_has(n, 7) && ox_tin(n, 7)->dt != ox_tin(n, 0)->dt)
		return ox_err(n, "C_zero_point must have A's type");
	if (add) {
		v = add_term(n, 0);
		return requant(n, bin(n, OP_ADD, v, v ? add_term(n, 3) : NULL), 7);
	}
	v = centred(n, 0, 2, 0);
	v = bin(n, OP_MUL, v, v ? centred(n, 3, 5, 0) : NULL);
	s = bin(n, OP_DIV, bin(n, OP_MUL, scale(n, 1), scale(n, 4)), scale(n, 6));
	return requant(n, bin(n, OP_MUL, v, s), 7);
}

/* QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax: f between a
 * dequantize and a quantize. */
int
imp_ms_qlinear_unary(ONode *n)
{
	const char *op = n->np->op_type;
	Value *x = dq(n, 0);

	if (!x)
		return -1;
	if (!strcmp(op, "QLinearSigmoid")) {
		x = ir_b1(n->b, OP_SIGMOID, x);
	} else if (!strcmp(op, "QLinearLeakyRelu")) {
		ir_b_float(n->b, "alpha", ox_attr_f(n, "alpha", 0.01));
		x = ir_b1(n->b, OP_LEAKY_RELU, x);
	} else {	/* QLinearSoftmax: the attribute opset says which Softmax */
		if (ox_attr_i(n, "opset", 13) < 13)
			return ox_err(n, "opset %lld: Softmax before opset 13 (a flattened axis) is not supported",
				      (long long)ox_attr_i(n, "opset", 13));
		ir_b_int(n->b, "axis", ox_attr_i(n, "axis", -1));
		x = ir_b1(n->b, OP_SOFTMAX, x);
	}
	return q_out(n, x, 3);
}

/* QLinearConcat(Y_scale, Y_zero_point, X0, s0, z0, X1, s1, z1, ...). */
int
imp_ms_qlinear_concat(ONode *n)
{
	int k = (n->nin - 2) / 3;
	Value **in;
	Node *r;

	if (k < 1 || n->nin != 2 + 3 * k)
		return ox_err(n, "inputs must be Y_scale, Y_zero_point and (X, scale, zero point) triples");
	in = arena_array(n->c->tmp, Value *, k);
	for (int i = 0; i < k; i++)
		if (!n->in[2 + 3 * i] || !(in[i] = dq(n, 2 + 3 * i)))
			return n->in[2 + 3 * i] ? -1 : ox_err(n, "input %d is missing", 2 + 3 * i);
	ir_b_int(n->b, "axis", ox_attr_i(n, "axis", 0));
	r = ir_b_node(n->b, OP_CONCAT, in, k, 1);	/* the axis's range: infer */
	return q_out(n, r ? r->out[0] : NULL, 0);
}

/* QLinearWhere(condition, X, sx, zx, Y, sy, zy, sz, zz). */
int
imp_ms_qlinear_where(ONode *n)
{
	Value *in[3] = {ox_in(n, 0), dq(n, 1), dq(n, 4)};
	Node *r;

	if (!in[1] || !in[2])
		return -1;
	r = ir_b_node(n->b, OP_WHERE, in, 3, 1);
	return q_out(n, r ? r->out[0] : NULL, 7);
}
