/*
 * onnx_ms.c — the com.microsoft ops onnxruntime's fusions write into a
 * model (onnxruntime.transformers.optimizer, or a session's
 * optimized_model_filepath), imported as the plain ops they stand for:
 *
 *	Gelu(x)                    =>  gelu %x, approx=none
 *	BiasGelu(x, b)             =>  gelu (add %x, %b), approx=none
 *	FastGelu(x, b?)            =>  gelu (add %x, %b), approx=tanh
 *	QuickGelu(x) alpha         =>  mul %x, (sigmoid (mul %x, alpha))
 *	SkipLayerNormalization     =>  s = add %x, %skip (, %bias); layer_norm %s
 *	SkipSimplifiedLayerNorm..  =>  s = add ...; rms_norm %s
 *	SimplifiedLayerNorm..      =>  rms_norm
 *	FusedMatMul(a, b) alpha    =>  mul (matmul %a, %b, trans_a, trans_b), alpha
 *
 * so the canon and fusion passes see what an unoptimised export would
 * have given them (FastGelu's constants are sqrt(2/pi) and 0.044715: GELU's
 * tanh form exactly).  Semantics from onnxruntime's contrib op schemas
 * (docs/ContribOperators.md).
 */
#include <string.h>

#include "onnx_int.h"

/* --- activations --------------------------------------------------------- */

/* x, plus the bias input i when there is one. */
static Value *
biased(ONode *n, int i)
{
	Value *x = ox_in(n, 0);

	return ox_has(n, i) ? ir_b2(n->b, OP_ADD, x, ox_in(n, i)) : x;
}

static int
gelu(ONode *n, const char *approx)
{
	Value *x = biased(n, 1);

	if (!x)
		return -1;
	ir_b_str(n->b, "approx", approx);
	return ox_set(n, 0, ir_b1(n->b, OP_GELU, x));
}

/* Gelu and BiasGelu: the erf form. */
int
imp_ms_gelu(ONode *n)
{
	return gelu(n, "none");
}

int
imp_ms_fast_gelu(ONode *n)
{
	return gelu(n, "tanh");
}

/* x * sigmoid(alpha * x): CLIP's activation (alpha 1.702). */
int
imp_ms_quick_gelu(ONode *n)
{
	Value *x = ox_in(n, 0), *ax;
	double alpha = ox_attr_f(n, "alpha", 1.702);

	ax = alpha == 1 ? x : ir_b2(n->b, OP_MUL, x, ox_scalar(n->b, ox_tin(n, 0)->dt, alpha));
	return ox_set(n, 0, ir_b2(n->b, OP_MUL, x, ir_b1(n->b, OP_SIGMOID, ax)));
}

/* --- normalisation ------------------------------------------------------- */

static Value *
rstd(ONode *n, Value *x, int64_t axis, double eps)
{
	ir_b_int(n->b, "axis", axis);
	ir_b_float(n->b, "eps", eps);
	return ir_b1(n->b, OP_RSTD, x);
}

int
imp_ms_simplified_ln(ONode *n)
{
	int64_t axis = ox_attr_i(n, "axis", -1);
	double eps = ox_attr_f(n, "epsilon", 1e-5);

	ir_b_int(n->b, "axis", axis);
	ir_b_float(n->b, "eps", eps);
	if (ox_set(n, 0, ir_b2(n->b, OP_RMS_NORM, ox_in(n, 0), ox_in(n, 1))))
		return -1;
	if (n->nout > 1 && n->out[1])
		return ox_set(n, 1, rstd(n, ox_in(n, 0), axis, eps));
	return 0;
}

/* input + skip (+ the bias input i, if any): the Skip*Normalization's sum. */
static Value *
skip_sum(ONode *n, int i)
{
	Value *s = ir_b2(n->b, OP_ADD, ox_in(n, 0), ox_in(n, 1));

	return s && ox_has(n, i) ? ir_b2(n->b, OP_ADD, s, ox_in(n, i)) : s;
}

/* SkipSimplifiedLayerNormalization(input, skip, gamma, bias?):
 * output = rms_norm(s); inv_std_var; s. */
int
imp_ms_skip_simplified_ln(ONode *n)
{
	double eps = ox_attr_f(n, "epsilon", 1e-5);
	Value *s = skip_sum(n, 3);

	if (!s)
		return -1;
	if (n->nout > 1 && n->out[1])
		return ox_err(n, "output 1 (mean) is not defined for the simplified norm");
	ir_b_int(n->b, "axis", -1);
	ir_b_float(n->b, "eps", eps);
	if (ox_set(n, 0, ir_b2(n->b, OP_RMS_NORM, s, ox_in(n, 2))))
		return -1;
	if (n->nout > 2 && n->out[2] && ox_set(n, 2, rstd(n, s, -1, eps)))
		return -1;
	if (n->nout > 3 && n->out[3])
		return ox_set(n, 3, s);
	return 0;
}

/* SkipLayerNormalization(input, skip, gamma, beta?, bias?): output =
 * layer_norm(s) over the last axis; mean and inv_std_var as
 * LayerNormalization's; s. */
int
imp_ms_skip_ln(ONode *n)
{
	Value *in[3] = {skip_sum(n, 4), ox_in(n, 2), ox_has(n, 3) ? ox_in(n, 3) : NULL};
	int nout = 1;
	Node *r;

	if (!in[0])
		return -1;
	for (int i = 1; i < 3 && i < n->nout; i++)
		if (n->out[i])
			nout = i + 1;
	ir_b_int(n->b, "axis", -1);
	ir_b_float(n->b, "eps", ox_attr_f(n, "epsilon", 1e-12));
	if (!(r = ir_b_node(n->b, OP_LAYER_NORM, in, in[2] ? 3 : 2, nout)))
		return -1;
	for (int i = 0; i < nout; i++)
		if (ox_set(n, i, r->out[i]))
			return -1;
	if (n->nout > 3 && n->out[3])
		return ox_set(n, 3, in[0]);
	return 0;
}

/* --- matmul -------------------------------------------------------------- */

/* alpha * op(A) @ op(B); transA/transB swap the last two dims.  The batch
 * transposes (transBatchA/B move the batch dims next to the matrix dims)
 * have no IR form and are refused. */
int
imp_ms_fused_matmul(ONode *n)
{
	double alpha = ox_attr_f(n, "alpha", 1);
	Value *y;

	if (ox_attr_i(n, "transBatchA", 0) || ox_attr_i(n, "transBatchB", 0))
		return ox_err(n, "transBatchA/transBatchB are not supported");
	if (ox_attr_i(n, "transA", 0))
		ir_b_int(n->b, "trans_a", 1);
	if (ox_attr_i(n, "transB", 0))
		ir_b_int(n->b, "trans_b", 1);
	y = ir_b2(n->b, OP_MATMUL, ox_in(n, 0), ox_in(n, 1));
	if (y && alpha != 1)
		y = ir_b2(n->b, OP_MUL, y, ox_scalar(n->b, ox_tin(n, 0)->dt, alpha));
	return ox_set(n, 0, y);
}
