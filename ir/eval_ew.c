/*
 * eval_ew.c — elementwise ops: unary activations, casts, broadcasting
 * binary ops, where, and swiglu (whose gated activations moe shares).
 *
 * Floats are read exactly and computed in double; the store rounds each
 * result once to f32 and then to its dtype, which for + - * / sqrt equals
 * f32 arithmetic.  Integer and bool operands are computed as int64 and
 * saturate when stored; integer division truncates toward zero like C.
 */
#include <math.h>
#include <string.h>

#include "eval_impl.h"

double
ev_sigmoid(double x)
{
	if (x >= 0)
		return 1 / (1 + exp(-x));
	return exp(x) / (1 + exp(x));
}

double
ev_gelu(double x, int tanh_approx)
{
	if (tanh_approx)
		return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	return 0.5 * x * (1 + erf(x / M_SQRT2));
}

/* Clamp to [lo, hi]; NaN stays NaN. */
static double
clamp(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

static double binary_f(Op op, double a, double b);

double
ir_ew_scalar(Op op, const IrEwAttrs *p, double x, double y)
{
	switch (op) {
	case OP_NEG: return -x;
	case OP_ABS: return fabs(x);
	case OP_EXP: return exp(x);
	case OP_LOG: return log(x);
	case OP_SQRT: return sqrt(x);
	case OP_RSQRT: return 1 / sqrt(x);
	case OP_FLOOR: return floor(x);
	case OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x;	/* 0, -0 and NaN as they are */
	case OP_RECIPROCAL: return 1 / x;
	case OP_ERF: return erf(x);
	case OP_TANH: return tanh(x);
	case OP_SIGMOID: return ev_sigmoid(x);
	case OP_RELU: return x < 0 ? 0 : x;
	case OP_SILU: return x * ev_sigmoid(p->alpha * x);	/* alpha 1.702: QuickGelu */
	case OP_GELU: return ev_gelu(x, p->tanh_approx);
	case OP_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
	case OP_LEAKY_RELU: return x < 0 ? p->alpha * x : x;
	case OP_HARD_SIGMOID: return clamp(p->alpha * x + p->beta, 0, 1);
	case OP_HARD_SWISH: return x * clamp(x / 6 + 0.5, 0, 1);
	case OP_CLIP: return clamp(x, p->lo, p->hi);
	case OP_CAST: case OP_IDENTITY: return x;
	default: return binary_f(op, x, y);
	}
}

/* neg, abs, relu, clip and not on integers and bools. */
static void
unary_i(Op op, const Tensor *x, Tensor *y, int64_t i, const IrEwAttrs *p)
{
	int64_t v = dtype_load_int(x->dt, x->data, (size_t)i);

	switch (op) {
	case OP_NEG: v = v == INT64_MIN ? INT64_MAX : -v; break;
	case OP_ABS: v = v == INT64_MIN ? INT64_MAX : v < 0 ? -v : v; break;
	case OP_RELU: v = v < 0 ? 0 : v; break;
	case OP_NOT: v = !v; break;
	case OP_CLIP:
		if ((double)v < p->lo || (double)v > p->hi) {
			dtype_store(y->dt, y->data, (size_t)i, clamp((double)v, p->lo, p->hi));
			return;
		}
		break;
	default: die("unary_i: %s", ir_opname(op));
	}
	dtype_store_int(y->dt, y->data, (size_t)i, v);
}

int
ev_unary(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	int64_t len = tensor_numel(x);
	IrEwAttrs p;
	char why[128];

	if (ir_ew_attrs(n, &p, why, sizeof why))
		return ev_err(e, n, "%s: %s", ir_opname(n->op), why);
	for (int64_t i = 0; i < len; i++) {
		if (ev_isint(x->dt))
			unary_i(n->op, x, &out[0], i, &p);
		else
			dtype_store(out[0].dt, out[0].data, (size_t)i,
				    ir_ew_scalar(n->op, &p, dtype_load(x->dt, x->data, (size_t)i), 0));
	}
	return 0;
}

/* Float to int truncates toward zero and saturates (NaN: 0), to bool is
 * x != 0, int to int saturates; float to float rounds to nearest even. */
int
ev_cast(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	Tensor *y = &out[0];
	int64_t len = tensor_numel(x);

	for (int64_t i = 0; i < len; i++) {
		if (ev_isint(x->dt) && ev_isint(y->dt))
			dtype_store_int(y->dt, y->data, (size_t)i,
					dtype_load_int(x->dt, x->data, (size_t)i));
		else
			dtype_store(y->dt, y->data, (size_t)i, dtype_load(x->dt, x->data, (size_t)i));
	}
	return 0;
}

int
ev_identity(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	memcpy(out[0].data, in[0]->data, tensor_nbytes(in[0]));
	return 0;
}

/* --- binary, broadcasting ------------------------------------------------ */

static int
is_compare(Op op)
{
	return op == OP_EQUAL || op == OP_GREATER || op == OP_LESS ||
	       op == OP_GREATER_EQUAL || op == OP_LESS_EQUAL;
}

static int
compare(Op op, int c)	/* c = sign of a - b, 2 when unordered (NaN) */
{
	if (c == 2)
		return 0;
	switch (op) {
	case OP_EQUAL: return c == 0;
	case OP_GREATER: return c > 0;
	case OP_LESS: return c < 0;
	case OP_GREATER_EQUAL: return c >= 0;
	default: return c <= 0;
	}
}

static double
binary_f(Op op, double a, double b)
{
	switch (op) {
	case OP_ADD: return a + b;
	case OP_SUB: return a - b;
	case OP_MUL: return a * b;
	case OP_DIV: return a / b;
	case OP_POW: return pow(a, b);
	case OP_MIN: return isnan(a) || isnan(b) ? NAN : fmin(a, b);
	case OP_MAX: return isnan(a) || isnan(b) ? NAN : fmax(a, b);
	default: die("binary_f: %s", ir_opname(op));
	}
}

/* Integer arithmetic saturates at the int64 range; b == 0 in div is
 * reported by the caller. */
static int64_t
binary_i(Op op, int64_t a, int64_t b)
{
	int64_t r;
	int ovf;

	switch (op) {
	case OP_ADD: ovf = __builtin_add_overflow(a, b, &r); break;
	case OP_SUB: ovf = __builtin_sub_overflow(a, b, &r); break;
	case OP_MUL: ovf = __builtin_mul_overflow(a, b, &r); break;
	case OP_DIV: return a == INT64_MIN && b == -1 ? INT64_MAX : a / b;
	case OP_MIN: return a < b ? a : b;
	case OP_MAX: return a > b ? a : b;
	case OP_AND: return a && b;
	case OP_OR: return a || b;
	default: die("binary_i: %s", ir_opname(op));
	}
	if (ovf)
		return (op == OP_MUL ? (a < 0) != (b < 0) : a < 0) ? INT64_MIN : INT64_MAX;
	return r;
}

static int
binary_at(Ev *e, const Node *n, const Tensor *a, int64_t ia, const Tensor *b, int64_t ib,
	  Tensor *y, int64_t i)
{
	Op op = n->op;

	if (ev_isint(a->dt) && op != OP_POW) {
		int64_t x = dtype_load_int(a->dt, a->data, (size_t)ia);
		int64_t z = dtype_load_int(b->dt, b->data, (size_t)ib);
		if (is_compare(op))
			dtype_store_int(y->dt, y->data, (size_t)i, compare(op, (x > z) - (x < z)));
		else if (op == OP_DIV && z == 0)
			return ev_err(e, n, "div: integer division by zero");
		else
			dtype_store_int(y->dt, y->data, (size_t)i, binary_i(op, x, z));
		return 0;
	}
	double x = dtype_load(a->dt, a->data, (size_t)ia);
	double z = dtype_load(b->dt, b->data, (size_t)ib);
	if (is_compare(op))
		dtype_store_int(y->dt, y->data, (size_t)i,
				compare(op, isnan(x) || isnan(z) ? 2 : (x > z) - (x < z)));
	else
		dtype_store(y->dt, y->data, (size_t)i, binary_f(op, x, z));
	return 0;
}

int
ev_binary(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	Tensor *y = &out[0];
	int64_t sa[MAXRANK], sb[MAXRANK], c[MAXRANK] = {0};
	int64_t len = tensor_numel(y);

	int r = y->rank;
	int64_t inner = r ? y->dim[r - 1] : 1;

	ev_bstrides(in[0], r, sa);
	ev_bstrides(in[1], r, sb);
	/* a row of the last dim at a time: offsets once per row (full-size
	 * weight transforms run billions of elements through here) */
	for (int64_t i = 0; i < len && inner > 0; i += inner, ev_next(c, y->dim, r - 1)) {
		int64_t oa = ev_off(c, sa, r), ob = ev_off(c, sb, r);
		int64_t da = r ? sa[r - 1] : 0, db = r ? sb[r - 1] : 0;
		for (int64_t j = 0; j < inner; j++)
			if (binary_at(e, n, in[0], oa + j * da, in[1], ob + j * db, y, i + j))
				return -1;
	}
	return 0;
}

/* Copy element si of src to element di of dst (same dtype), exactly. */
static void
copy_elem(Tensor *dst, int64_t di, const Tensor *src, int64_t si)
{
	ev_copy(src->dt, dst->data, di, src->data, si, 1);
}

int
ev_where(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	Tensor *y = &out[0];
	int64_t s[3][MAXRANK], c[MAXRANK] = {0};
	int64_t len = tensor_numel(y);

	for (int k = 0; k < 3; k++)
		ev_bstrides(in[k], y->rank, s[k]);
	for (int64_t i = 0; i < len; i++, ev_next(c, y->dim, y->rank)) {
		int64_t ci = ev_off(c, s[0], y->rank);
		int k = dtype_load_int(in[0]->dt, in[0]->data, (size_t)ci) ? 1 : 2;
		copy_elem(y, i, in[k], ev_off(c, s[k], y->rank));
	}
	return 0;
}

/* --- gated activations --------------------------------------------------- */

int
ev_glu_parse(Ev *e, const Node *n, const char *laykey, IrGluAttrs *p)
{
	char why[160];

	if (ir_glu_attrs(n, laykey, p, why, sizeof why))
		return ev_err(e, n, "%s: %s", ir_opname(n->op), why);
	return 0;
}

double
ir_glu_scalar(const IrGluAttrs *p, double gate, double up)
{
	switch (p->act) {
	case IR_GLU_SILU:	/* Step-3.5's limit clamps after the activation */
		gate = gate * ev_sigmoid(gate);
		if (p->limit < INFINITY) {
			gate = gate > p->limit ? p->limit : gate;
			up = clamp(up, -p->limit, p->limit);
		}
		return gate * up;
	case IR_GLU_GELU: return ev_gelu(gate, p->tanh_approx) * up;
	case IR_GLU_RELU: return (gate > 0 ? gate : 0) * up;	/* gate = up: relu² */
	default:	/* gpt-oss: clamped before, with a +1 on up */
		gate = gate > p->limit ? p->limit : gate;
		up = clamp(up, -p->limit, p->limit);
		return (up + 1) * (gate * ev_sigmoid(p->alpha * gate));
	}
}

double
ir_act_scalar(const IrGluAttrs *p, double h)
{
	switch (p->act) {
	case IR_GLU_SILU: return h * ev_sigmoid(h);
	case IR_GLU_GELU: return ev_gelu(h, p->tanh_approx);
	case IR_GLU_RELU: return h > 0 ? h : 0;
	default: return h > 0 ? h * h : 0;	/* relu2 */
	}
}

int
ev_swiglu(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0];
	Tensor *y = &out[0];
	int64_t nn = y->dim[y->rank - 1], rows = nn ? tensor_numel(y) / nn : 0;
	IrGluAttrs p;

	if (ev_glu_parse(e, n, "layout", &p))
		return -1;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < nn; j++) {
			int64_t gi = r * 2 * nn + (p.interleave ? 2 * j : j);
			int64_t ui = r * 2 * nn + (p.interleave ? 2 * j + 1 : nn + j);
			double g = dtype_load(x->dt, x->data, (size_t)gi);
			double u = dtype_load(x->dt, x->data, (size_t)ui);
			dtype_store(y->dt, y->data, (size_t)(r * nn + j), ir_glu_scalar(&p, g, u));
		}
	return 0;
}
