/*
 * k_body_ew.c — elementwise ops of kernel bodies: activations, casts,
 * broadcasting binary ops, where, swiglu, constants, shape values and
 * (de)quantisation, each one element at a flat index (ir/eval_ew.c,
 * eval_shape.c and eval_quant.c are the semantics).
 *
 * Floats compute in f32: + - * / and sqrt round exactly as the
 * interpreter's double-then-f32 does; exp, log, tanh, erf and pow are
 * within a few ulp.  Integers and bool compute in i64 as the interpreter
 * does, saturating where it saturates.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_body.h"

static LLVMValueRef
to_f32(Bd *b, LLVMValueRef v)
{
	if (LLVMTypeOf(v) == b->f->ti64)
		return LLVMBuildSIToFP(b->f->B, v, b->f->tf32, "");
	return v;
}

static LLVMValueRef
fmul_(Bd *b, LLVMValueRef x, LLVMValueRef y)
{
	return LLVMBuildFMul(b->f->B, x, y, "");
}

static LLVMValueRef
fadd_(Bd *b, LLVMValueRef x, LLVMValueRef y)
{
	return LLVMBuildFAdd(b->f->B, x, y, "");
}

static LLVMValueRef
c32(Bd *b, double v)
{
	return cg_f32(b->f, v);
}

static int
int_unary_ok(Op op)
{
	return op == OP_NEG || op == OP_ABS || op == OP_RELU || op == OP_NOT || op == OP_CLIP;
}

int
bd_check_unary(Bd *b, const Node *n)
{
	IrEwAttrs at;
	char why[128];

	if (cg_dt_isint(n->in[0]->type.dt) && !int_unary_ok(n->op))
		return bd_fail(b, n, "not defined on %s", dtype_name(n->in[0]->type.dt));
	if (n->op == OP_NOT && !cg_dt_isint(n->in[0]->type.dt))
		return bd_fail(b, n, "not defined on %s", dtype_name(n->in[0]->type.dt));
	return ir_ew_attrs(n, &at, why, sizeof why) < 0 ? bd_fail(b, n, "%s", why) : 0;
}

static LLVMValueRef
unary_int(Bd *b, const Node *n, LLVMValueRef v)
{
	CgFn *f = b->f;
	LLVMValueRef min = bd_i64(b, INT64_MIN), max = bd_i64(b, INT64_MAX);
	LLVMValueRef neg = cg_select(f, bd_icmp(b, LLVMIntEQ, v, min), max, cg_sub(f, bd_i64(b, 0), v));
	double lo = ir_attr_float(n, "min", -INFINITY), hi = ir_attr_float(n, "max", INFINITY);

	switch (n->op) {
	case OP_NEG: return neg;
	case OP_ABS: return cg_select(f, cg_lt(f, v, bd_i64(b, 0)), neg, v);
	case OP_RELU: return cg_max(f, v, bd_i64(b, 0));
	case OP_NOT: return LLVMBuildZExt(f->B, bd_icmp(b, LLVMIntEQ, v, bd_i64(b, 0)), f->ti64, "");
	default:	/* clip: an integer beyond a bound becomes the bound, truncated */
		if (isfinite(hi) && hi < 9e18)
			v = cg_select(f, bd_icmp(b, LLVMIntSGT, v, bd_i64(b, (int64_t)floor(hi))),
				      bd_i64(b, (int64_t)hi), v);
		if (isfinite(lo) && lo > -9e18)
			v = cg_select(f, bd_icmp(b, LLVMIntSLT, v, bd_i64(b, (int64_t)ceil(lo))),
				      bd_i64(b, (int64_t)lo), v);
		if (hi == -INFINITY)
			v = bd_i64(b, INT64_MIN);
		return v;
	}
}

LLVMValueRef
bd_unary(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	LLVMValueRef x = bd_in(b, n, 0, idx);
	IrEwAttrs at;
	char why[128];

	if (cg_dt_isint(n->in[0]->type.dt))
		return unary_int(b, n, x);
	if (ir_ew_attrs(n, &at, why, sizeof why) < 0 || !cg_ew_has(n->op)) {
		bd_fail(b, n, "no elementwise lowering");
		return x;
	}
	return cg_ew_emit(b->f, n->op, &at, x, NULL);
}

/* identity, reshape (same element order) and cast: the walker rounds to
 * the result's dtype */
LLVMValueRef
bd_identity(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	return bd_in(b, n, 0, idx);
}

/* ---- binary ---- */

int
bd_check_binary(Bd *b, const Node *n)
{
	int ia = cg_dt_isint(n->in[0]->type.dt), ib = cg_dt_isint(n->in[1]->type.dt);

	if (ia != ib && n->op != OP_POW)
		return bd_fail(b, n, "operands of types %s and %s", dtype_name(n->in[0]->type.dt),
			       dtype_name(n->in[1]->type.dt));
	if ((n->op == OP_AND || n->op == OP_OR) && !ia)
		return bd_fail(b, n, "not defined on %s", dtype_name(n->in[0]->type.dt));
	return 0;
}

static LLVMValueRef
sat(Bd *b, const char *name, LLVMValueRef x, LLVMValueRef y)
{
	LLVMValueRef a[2] = {x, y};

	return cg_intrinsic(b->f, name, b->f->ti64, &b->f->ti64, 1, a, 2);
}

static LLVMValueRef
binary_int(Bd *b, Op op, LLVMValueRef x, LLVMValueRef y)
{
	CgFn *f = b->f;
	LLVMBuilderRef B = f->B;
	LLVMValueRef z = bd_i64(b, 0), r;
	LLVMIntPredicate p;

	switch (op) {
	case OP_ADD: return sat(b, "llvm.sadd.sat", x, y);
	case OP_SUB: return sat(b, "llvm.ssub.sat", x, y);
	case OP_MUL: {
		LLVMValueRef a[2] = {x, y};
		LLVMTypeRef st[2] = {f->ti64, f->ti1};
		LLVMValueRef o = cg_intrinsic(f, "llvm.smul.with.overflow", LLVMStructTypeInContext(f->C, st, 2, 0),
					      &f->ti64, 1, a, 2);
		LLVMValueRef neg = LLVMBuildXor(B, cg_lt(f, x, z), cg_lt(f, y, z), "");
		r = cg_select(f, neg, bd_i64(b, INT64_MIN), bd_i64(b, INT64_MAX));
		return cg_select(f, LLVMBuildExtractValue(B, o, 1, ""), r, LLVMBuildExtractValue(B, o, 0, ""));
	}
	case OP_DIV: {	/* by zero: 0 (the interpreter reports it); MIN / -1 saturates */
		LLVMValueRef y0 = bd_icmp(b, LLVMIntEQ, y, z);
		LLVMValueRef ovf = LLVMBuildAnd(B, bd_icmp(b, LLVMIntEQ, x, bd_i64(b, INT64_MIN)),
						bd_icmp(b, LLVMIntEQ, y, bd_i64(b, -1)), "");
		LLVMValueRef q = LLVMBuildSDiv(B, x, cg_select(f, LLVMBuildOr(B, y0, ovf, ""), bd_i64(b, 1), y), "");
		q = cg_select(f, ovf, bd_i64(b, INT64_MAX), q);
		return cg_select(f, y0, z, q);
	}
	case OP_MIN: return cg_min(f, x, y);
	case OP_MAX: return cg_max(f, x, y);
	case OP_AND: case OP_OR: {
		LLVMValueRef a = bd_icmp(b, LLVMIntNE, x, z), c = bd_icmp(b, LLVMIntNE, y, z);
		r = op == OP_AND ? LLVMBuildAnd(B, a, c, "") : LLVMBuildOr(B, a, c, "");
		return LLVMBuildZExt(B, r, f->ti64, "");
	}
	default:
		break;
	}
	p = op == OP_EQUAL ? LLVMIntEQ : op == OP_GREATER ? LLVMIntSGT : op == OP_LESS ? LLVMIntSLT
	  : op == OP_GREATER_EQUAL ? LLVMIntSGE : LLVMIntSLE;
	return LLVMBuildZExt(B, bd_icmp(b, p, x, y), f->ti64, "");
}

static LLVMValueRef
binary_float(Bd *b, Op op, LLVMValueRef x, LLVMValueRef y)
{
	CgFn *f = b->f;
	LLVMBuilderRef B = f->B;
	LLVMRealPredicate p;
	IrEwAttrs at;

	if (cg_ew_has(op)) {
		memset(&at, 0, sizeof at);	/* binary ops have no attributes */
		return cg_ew_emit(f, op, &at, x, y);
	}
	p = op == OP_EQUAL ? LLVMRealOEQ : op == OP_GREATER ? LLVMRealOGT : op == OP_LESS ? LLVMRealOLT
	  : op == OP_GREATER_EQUAL ? LLVMRealOGE : LLVMRealOLE;
	return LLVMBuildZExt(B, bd_fcmp(b, p, x, y), f->ti64, "");
}

LLVMValueRef
bd_binary(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	const Value *y = n->out[0];
	LLVMValueRef x0 = bd_in(b, n, 0, bd_bcast(b, n->in[0], y, idx));
	LLVMValueRef x1 = bd_in(b, n, 1, bd_bcast(b, n->in[1], y, idx));

	if (cg_dt_isint(n->in[0]->type.dt) && n->op != OP_POW)
		return binary_int(b, n->op, x0, x1);
	return binary_float(b, n->op, to_f32(b, x0), to_f32(b, x1));
}

LLVMValueRef
bd_where(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	const Value *y = n->out[0];
	LLVMValueRef c = bd_in(b, n, 0, bd_bcast(b, n->in[0], y, idx));
	LLVMValueRef x1 = bd_in(b, n, 1, bd_bcast(b, n->in[1], y, idx));
	LLVMValueRef x2 = bd_in(b, n, 2, bd_bcast(b, n->in[2], y, idx));

	if (LLVMTypeOf(c) != b->f->ti64)
		c = LLVMBuildFPToSI(b->f->B, c, b->f->ti64, "");
	return cg_select(b->f, bd_icmp(b, LLVMIntNE, c, bd_i64(b, 0)), x1, x2);
}

/* ---- swiglu ---- */

static int
glu_parse(Bd *b, const Node *n, IrGluAttrs *g)
{
	char why[160];

	return ir_glu_attrs(n, "layout", g, why, sizeof why) ? bd_fail(b, n, "%s", why) : 0;
}

int
bd_check_swiglu(Bd *b, const Node *n)
{
	IrGluAttrs g;

	if (cg_dt_isint(n->in[0]->type.dt))
		return bd_fail(b, n, "not defined on %s", dtype_name(n->in[0]->type.dt));
	return glu_parse(b, n, &g);
}

LLVMValueRef
bd_swiglu(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	const Value *y = n->out[0];
	LLVMValueRef nn = bd_dim(b, y->type.dim[y->type.rank - 1]);
	LLVMValueRef r = cg_udiv(f, idx, nn), j = cg_urem(f, idx, nn);
	LLVMValueRef base = cg_mul(f, r, cg_muli(f, nn, 2)), gi, ui, gate, up;
	IrGluAttrs g;

	glu_parse(b, n, &g);
	gi = cg_add(f, base, g.interleave ? cg_muli(f, j, 2) : j);
	ui = cg_add(f, base, g.interleave ? cg_addi(f, cg_muli(f, j, 2), 1) : cg_add(f, nn, j));
	gate = bd_in(b, n, 0, gi);
	up = bd_in(b, n, 0, ui);
	switch (g.act) {
	case IR_GLU_SILU:
		gate = fmul_(b, gate, cg_sigmoid(f, gate));
		if (g.limit < INFINITY) {	/* Step-3.5: clamped after the activation */
			gate = cg_select(f, bd_fcmp(b, LLVMRealOGT, gate, c32(b, g.limit)), c32(b, g.limit), gate);
			up = cg_clamp(f, up, c32(b, -g.limit), c32(b, g.limit));
		}
		return fmul_(b, gate, up);
	case IR_GLU_GELU:
		return fmul_(b, cg_gelu(f, gate, g.tanh_approx), up);
	case IR_GLU_RELU:
		return fmul_(b, cg_select(f, bd_fcmp(b, LLVMRealOGT, gate, c32(b, 0)), gate, c32(b, 0)), up);
	default:
		gate = cg_select(f, bd_fcmp(b, LLVMRealOGT, gate, c32(b, g.limit)), c32(b, g.limit), gate);
		up = cg_clamp(f, up, c32(b, -g.limit), c32(b, g.limit));
		return fmul_(b, fadd_(b, up, c32(b, 1)),
			    fmul_(b, gate, cg_sigmoid(f, fmul_(b, c32(b, g.alpha), gate))));
	}
}

/* ---- constants ---- */

int
bd_check_const(Bd *b, const Node *n)
{
	const Attr *a = ir_attr(n, "value");
	int64_t numel = ir_type_numel(&n->out[0]->type);

	if (n->op == OP_CONSTANT_OF_SHAPE) {
		if (a && !(a->kind == A_INT || a->kind == A_FLOAT ||
			   ((a->kind == A_INTS || a->kind == A_FLOATS) && a->n == 1)))
			return bd_fail(b, n, "value must be one number");
		return 0;
	}
	if (!a)
		return bd_fail(b, n, "no value");
	if ((a->kind == A_INTS || a->kind == A_FLOATS) && a->n != 1 && a->n != numel)
		return bd_fail(b, n, "%d values for %lld elements", a->n, (long long)numel);
	return 0;
}

/* Element i of a value attribute, as stored in dt (ev_const's fill). */
static LLVMValueRef
attr_elem(Bd *b, const Attr *a, int i, DType dt)
{
	unsigned char buf[16] = {0};
	int k = a->n == 1 ? 0 : i;

	if (a->kind == A_INT)
		dtype_store_int(dt, buf, 0, a->u.i);
	else if (a->kind == A_FLOAT)
		dtype_store(dt, buf, 0, a->u.f);
	else if (a->kind == A_INTS && cg_dt_isint(dt))
		dtype_store_int(dt, buf, 0, a->u.ints[k]);
	else if (a->kind == A_INTS)
		dtype_store(dt, buf, 0, (double)a->u.ints[k]);
	else
		dtype_store(dt, buf, 0, a->u.floats[k]);
	if (cg_dt_isint(dt))
		return bd_i64(b, dtype_load_int(dt, buf, 0));
	return c32(b, (float)dtype_load(dt, buf, 0));
}

/* A constant table in the module (constant address space on the GPU). */
static LLVMValueRef
table(Bd *b, const Attr *a, int n, DType dt)
{
	CgFn *f = b->f;
	LLVMTypeRef et = cg_dt_value_type(f, dt), at = LLVMArrayType(et, (unsigned)n);
	LLVMValueRef *v = xcalloc((size_t)n, sizeof *v), g;

	for (int i = 0; i < n; i++)
		v[i] = attr_elem(b, a, i, dt);
	g = LLVMAddGlobalInAddressSpace(f->M, at, "moec_const", f->emu ? 0 : 4);
	LLVMSetInitializer(g, LLVMConstArray(et, v, (unsigned)n));
	LLVMSetGlobalConstant(g, 1);
	LLVMSetLinkage(g, LLVMPrivateLinkage);
	LLVMSetAlignment(g, 8);
	free(v);
	return g;
}

LLVMValueRef
bd_const_op(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	const Attr *a = ir_attr(n, "value");
	DType dt = n->out[0]->type.dt;
	CgFn *f = b->f;
	LLVMValueRef g, at[2];

	if (a->kind == A_INT || a->kind == A_FLOAT || a->n == 1)
		return attr_elem(b, a, 0, dt);
	g = table(b, a, a->n, dt);
	at[0] = bd_i64(b, 0);
	at[1] = cg_min(f, idx, bd_i64(b, a->n - 1));
	return LLVMBuildLoad2(f->B, cg_dt_value_type(f, dt),
			      LLVMBuildGEP2(f->B, LLVMArrayType(cg_dt_value_type(f, dt), (unsigned)a->n), g,
					    at, 2, ""), "");
}

LLVMValueRef
bd_constant_of_shape(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	const Attr *a = ir_attr(n, "value");

	return a ? attr_elem(b, a, 0, n->out[0]->type.dt) : bd_const(b, n->out[0]->type.dt, 0);
}

LLVMValueRef
bd_shape_op(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	const Value *x = n->in[0];
	int r = x->type.rank;
	int64_t s = ir_attr_int(n, "start", 0);
	int64_t len = n->out[0]->type.rank ? n->out[0]->type.dim[0] : 1;
	LLVMValueRef v = bd_i64(b, 0);

	s = s < 0 ? MAX(0, s + r) : MIN(s, r);
	for (int64_t i = 0; i < len && s + i < r; i++)
		v = cg_select(b->f, bd_icmp(b, LLVMIntEQ, idx, bd_i64(b, i)), bd_dim(b, x->type.dim[s + i]), v);
	return v;
}

LLVMValueRef
bd_size(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	return bd_numel(b, n->in[0]);
}

/* ---- quantisation ---- */

static int
qlayout(Bd *b, const Node *n, IrQuantAttrs *q)
{
	const Type *x = &n->in[0]->type, *s = &n->in[1]->type;
	char why[128];

	if (ir_quant_attrs(n, x->rank, x->dim, s->rank, s->dim, q, why, sizeof why))
		return bd_fail(b, n, "%s", why);
	return 0;
}

int
bd_check_quant(Bd *b, const Node *n)
{
	IrQuantAttrs q;

	return qlayout(b, n, &q);
}

/* The scale's (and zero's) element for x's element idx. */
static LLVMValueRef
qindex(Bd *b, const Node *n, LLVMValueRef idx)
{
	const Value *x = n->in[0], *s = n->in[1];
	LLVMValueRef xd[MAXRANK], sd[MAXRANK], c[MAXRANK];
	int r = x->type.rank;
	IrQuantAttrs q;

	qlayout(b, n, &q);
	if (q.layout == IR_QUANT_TENSOR)
		return bd_i64(b, 0);
	bd_dims(b, x, xd);
	bd_unravel(b, idx, r, xd, c);
	if (q.layout == IR_QUANT_AXIS)
		return c[q.axis];
	bd_dims(b, s, sd);
	c[q.axis] = cg_udiv(b->f, c[q.axis], bd_i64(b, q.block_size));
	return bd_ravel(b, r, sd, c);
}

LLVMValueRef
bd_quantize(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	DType dt = n->out[0]->type.dt;
	LLVMValueRef si = qindex(b, n, idx);
	LLVMValueRef v = LLVMBuildFDiv(f->B, to_f32(b, bd_in(b, n, 0, idx)), to_f32(b, bd_in(b, n, 1, si)), "");
	LLVMValueRef big;

	if (cg_dt_isint(dt))
		v = cg_round_even(b->f, v);
	if (n->nin > 2 && n->in[2])
		v = fadd_(b, v, to_f32(b, bd_in(b, n, 2, si)));
	if (cg_dt_isint(dt))
		return cg_round_even(b->f, v);
	if (dt == DT_F8E4M3 && !ir_attr_int(n, "saturate", 1)) {
		big = bd_fcmp(b, LLVMRealOGT, bd_fabs(b, v), c32(b, 448));
		v = cg_select(f, big, c32(b, NAN), v);
	}
	return v;
}

LLVMValueRef
bd_dequantize(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	LLVMValueRef si = qindex(b, n, idx), x = to_f32(b, bd_in(b, n, 0, idx));

	if (n->nin > 2 && n->in[2])
		x = LLVMBuildFSub(b->f->B, x, to_f32(b, bd_in(b, n, 2, si)), "");
	return fmul_(b, x, to_f32(b, bd_in(b, n, 1, si)));
}
