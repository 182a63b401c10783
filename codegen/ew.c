/*
 * ew.c — the scalar emitter: the code of every f32 elementwise op
 * (OPF_SCALAR in ir/ops.def), written once.  Generic kernel bodies
 * (k_body_ew.c) and GEMM epilogues (epilogue.c) both call it, so fusing
 * an op into a GEMM does not change its bits.  ir/eval_ew.c is the
 * reference semantics; a unit test walks ops.def to check that both tables
 * are complete and that fused and unfused results agree on the emulator.
 *
 *	x = f32 operand(s)            y = cg_ew_emit(f, OP_SOFTPLUS, &attr, x, NULL)
 *
 * + - * / and sqrt round as the interpreter's double-then-f32 does; exp,
 * log, tanh, erf and pow are within a few ulp.  NaN propagates as in the
 * interpreter: min and max of NaN are NaN, clip and relu keep NaN.
 */
#define CG_INTERNAL
#include <math.h>
#include <string.h>

#include "codegen.h"

/* ---- helpers (k_body.c's bd_* call these too) ---- */

static LLVMValueRef
fcmp(CgFn *f, LLVMRealPredicate p, LLVMValueRef x, LLVMValueRef y)
{
	return LLVMBuildFCmp(f->B, p, x, y, "");
}

static LLVMValueRef fmul_(CgFn *f, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFMul(f->B, x, y, ""); }
static LLVMValueRef fadd_(CgFn *f, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFAdd(f->B, x, y, ""); }

LLVMValueRef
cg_fabs(CgFn *f, LLVMValueRef x)
{
	return cg_intrinsic(f, "llvm.fabs", f->tf32, &f->tf32, 1, &x, 1);
}

LLVMValueRef
cg_sqrt(CgFn *f, LLVMValueRef x)
{
	return cg_intrinsic(f, "llvm.sqrt", f->tf32, &f->tf32, 1, &x, 1);
}

/* 1 / sqrt(ms + eps), as the row kernels compute an RMSNorm's scale */
LLVMValueRef
cg_inv_std(CgFn *f, LLVMValueRef ms, double eps)
{
	return LLVMBuildFDiv(f->B, cg_f32(f, 1), cg_sqrt(f, LLVMBuildFAdd(f->B, ms, cg_f32(f, eps), "")), "");
}

/*
 * Natural log in f32 from the bits (cephes logf): x = m 2^e with m in
 * [sqrt(1/2), sqrt(2)), a degree-9 polynomial in m - 1.  Pure arithmetic,
 * so the GPU and the emulator agree; NaN, negative: NaN; 0: -inf; inf: inf.
 */
LLVMValueRef
cg_log(CgFn *f, LLVMValueRef x)
{
	static const double p[9] = {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1,
				    -1.2420140846E-1, 1.4249322787E-1, -1.6668057665E-1,
				    2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1};
	LLVMBuilderRef B = f->B;
	LLVMValueRef sub = fcmp(f, LLVMRealOLT, x, cg_f32(f, 1.17549435e-38f));
	LLVMValueRef xs = cg_select(f, sub, LLVMBuildFMul(B, x, cg_f32(f, 16777216.0), ""), x);
	LLVMValueRef u = LLVMBuildBitCast(B, xs, f->ti32, "");
	LLVMValueRef e = cg_addi(f, cg_and(f, cg_shr(f, u, 23), 0xff), -126);
	LLVMValueRef m, big, z, y, r, ef;

	e = cg_select(f, sub, cg_addi(f, e, -24), e);
	/* m in [0.5, 1) */
	m = LLVMBuildBitCast(B, LLVMBuildOr(B, cg_and(f, u, 0x807fffff), cg_i32(f, 0x3f000000), ""), f->tf32, "");
	big = fcmp(f, LLVMRealOGE, m, cg_f32(f, 0.707106781186547524));
	e = cg_select(f, big, e, cg_addi(f, e, -1));
	m = cg_select(f, big, LLVMBuildFSub(B, m, cg_f32(f, 1.0), ""),
		      LLVMBuildFSub(B, LLVMBuildFAdd(B, m, m, ""), cg_f32(f, 1.0), ""));
	z = LLVMBuildFMul(B, m, m, "");
	y = cg_f32(f, p[0]);
	for (int i = 1; i < 9; i++)
		y = LLVMBuildFAdd(B, LLVMBuildFMul(B, y, m, ""), cg_f32(f, p[i]), "");
	y = LLVMBuildFMul(B, LLVMBuildFMul(B, y, m, ""), z, "");
	ef = LLVMBuildSIToFP(B, e, f->tf32, "");
	y = LLVMBuildFAdd(B, y, LLVMBuildFMul(B, ef, cg_f32(f, -2.12194440e-4), ""), "");
	y = LLVMBuildFAdd(B, y, LLVMBuildFMul(B, z, cg_f32(f, -0.5), ""), "");
	r = LLVMBuildFAdd(B, m, y, "");
	r = LLVMBuildFAdd(B, r, LLVMBuildFMul(B, ef, cg_f32(f, 0.693359375), ""), "");
	/* specials */
	r = cg_select(f, fcmp(f, LLVMRealOEQ, x, cg_f32(f, INFINITY)), x, r);
	r = cg_select(f, fcmp(f, LLVMRealOEQ, x, cg_f32(f, 0)), cg_f32(f, -INFINITY), r);
	r = cg_select(f, fcmp(f, LLVMRealULT, x, cg_f32(f, 0)), cg_f32(f, NAN), r);
	return r;
}

/* Clamp to [lo, hi]; NaN stays NaN. */
LLVMValueRef
cg_clamp(CgFn *f, LLVMValueRef x, LLVMValueRef lo, LLVMValueRef hi)
{
	x = cg_select(f, fcmp(f, LLVMRealOGT, x, hi), hi, x);
	return cg_select(f, fcmp(f, LLVMRealOLT, x, lo), lo, x);
}

/* log(1 + y), accurate for small y: log(u) * y / (u - 1) with u = 1 + y. */
static LLVMValueRef
log1p_(CgFn *f, LLVMValueRef y)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef u = fadd_(f, cg_f32(f, 1), y);
	LLVMValueRef r = LLVMBuildFDiv(B, fmul_(f, cg_log(f, u), y), LLVMBuildFSub(B, u, cg_f32(f, 1), ""), "");

	return cg_select(f, fcmp(f, LLVMRealOEQ, u, cg_f32(f, 1)), y, r);
}

/*
 * GELU (tanh) as x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): the same
 * function as 0.5 x (1 + tanh u), in ~8 instructions an element instead of
 * tanh's ~30 (the default since session 30, --debug=gelu-tanh the tanh form;
 * docs/codegen.md, "GELU as a sigmoid"):
 * x / (1 + 2^a), a = -2u log2(e) = x (k0 + k1 x^2), the quotient as x times
 * rcp.approx (an ulp or two of f32, no branch).  Relative error a few ulp
 * everywhere, where 1 + tanh u cancels for x < 0 (0 below x ~ -5); for
 * x < -9.4 1 + 2^a reaches 2^126 and the result, below 1e-37, is 0.
 */
static LLVMValueRef
gelu_sigmoid(CgFn *f, LLVMValueRef x)
{
	const double k0 = -2 * 0.7978845608028654 * 1.4426950408889634, k1 = k0 * 0.044715;
	LLVMValueRef a = fmul_(f, x, fadd_(f, cg_f32(f, k0), fmul_(f, cg_f32(f, k1), fmul_(f, x, x))));

	return fmul_(f, x, cg_rcp(f, fadd_(f, cg_f32(f, 1), cg_exp2(f, a))));
}

LLVMValueRef
cg_gelu(CgFn *f, LLVMValueRef x, int tanh_approx)
{
	LLVMValueRef t;

	if (tanh_approx && !(cg_module_debug(f->m) & DBG_GELU_TANH))
		return gelu_sigmoid(f, x);
	if (tanh_approx) {
		LLVMValueRef x3 = fmul_(f, fmul_(f, x, x), x);
		t = cg_tanh(f, fmul_(f, cg_f32(f, 0.7978845608028654),
				     fadd_(f, x, fmul_(f, cg_f32(f, 0.044715), x3))));
	} else {
		t = cg_erf(f, fmul_(f, x, cg_f32(f, 0.7071067811865476)));
	}
	return fmul_(f, fmul_(f, cg_f32(f, 0.5), x), fadd_(f, cg_f32(f, 1), t));
}

/*
 * pow: an integral exponent up to 64 in magnitude by repeated squaring
 * (exact for small integers, as C's pow is); otherwise 2^(y log2 x) for
 * x > 0, NaN for x < 0, and C's values at x = 0.
 */
static LLVMValueRef
pow_(CgFn *f, LLVMValueRef x, LLVMValueRef y)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef ay = cg_fabs(f, y), one = cg_f32(f, 1), zero = cg_f32(f, 0);
	LLVMValueRef small = fcmp(f, LLVMRealOLE, ay, cg_f32(f, 64));
	LLVMValueRef k = LLVMBuildFPToSI(B, cg_select(f, small, ay, zero), f->ti32, "");
	LLVMValueRef integral = LLVMBuildAnd(B, small, fcmp(f, LLVMRealOEQ,
					     LLVMBuildSIToFP(B, k, f->tf32, ""), ay), "");
	LLVMValueRef acc = one, sq = x, gen, r, odd;

	for (int bit = 0; bit < 7; bit++) {
		LLVMValueRef on = LLVMBuildICmp(B, LLVMIntNE, cg_and(f, k, 1 << bit), cg_i32(f, 0), "");
		acc = cg_select(f, on, fmul_(f, acc, sq), acc);
		sq = fmul_(f, sq, sq);
	}
	acc = cg_select(f, fcmp(f, LLVMRealOLT, y, zero), LLVMBuildFDiv(B, one, acc, ""), acc);
	gen = cg_exp2(f, fmul_(f, y, fmul_(f, cg_log(f, x), cg_f32(f, 1.4426950408889634))));
	gen = cg_select(f, fcmp(f, LLVMRealOLT, x, zero), cg_f32(f, NAN), gen);
	odd = fcmp(f, LLVMRealOGT, y, zero);
	gen = cg_select(f, fcmp(f, LLVMRealOEQ, x, zero), cg_select(f, odd, zero, cg_f32(f, INFINITY)), gen);
	r = cg_select(f, integral, acc, gen);
	r = cg_select(f, fcmp(f, LLVMRealOEQ, y, zero), one, r);
	return cg_select(f, fcmp(f, LLVMRealOEQ, x, one), one, r);
}

/* ---- the table ---- */

typedef LLVMValueRef EwFn(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y);

#define ZERO cg_f32(f, 0)
#define ONE cg_f32(f, 1)
static LLVMValueRef e_neg(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFNeg(f->B, x, ""); }
static LLVMValueRef e_abs(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return cg_fabs(f, x); }
static LLVMValueRef e_exp(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return cg_exp(f, x); }
static LLVMValueRef e_log(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return cg_log(f, x); }
static LLVMValueRef e_sqrt(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return cg_sqrt(f, x); }
static LLVMValueRef e_rsqrt(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFDiv(f->B, ONE, cg_sqrt(f, x), ""); }
static LLVMValueRef e_floor(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return cg_intrinsic(f, "llvm.floor", f->tf32, &f->tf32, 1, &x, 1); }
static LLVMValueRef e_sign(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y)
{
	LLVMValueRef z = cg_f32(f, 0.0);	/* 0, -0 and NaN as they are */
	return cg_select(f, fcmp(f, LLVMRealOGT, x, z), ONE, cg_select(f, fcmp(f, LLVMRealOLT, x, z), cg_f32(f, -1.0), x));
}
static LLVMValueRef e_recip(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFDiv(f->B, ONE, x, ""); }
static LLVMValueRef e_erf(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return cg_erf(f, x); }
static LLVMValueRef e_tanh(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return cg_tanh(f, x); }
static LLVMValueRef e_sigmoid(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return cg_sigmoid(f, x); }
static LLVMValueRef
e_silu(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y)	/* x sigmoid(alpha x) */
{
	return fmul_(f, x, cg_sigmoid(f, a->alpha == 1 ? x : fmul_(f, cg_f32(f, a->alpha), x)));
}
static LLVMValueRef e_gelu(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return cg_gelu(f, x, a->tanh_approx); }
static LLVMValueRef e_ident(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return x; }
static LLVMValueRef e_add(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return fadd_(f, x, y); }
static LLVMValueRef e_sub(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFSub(f->B, x, y, ""); }
static LLVMValueRef e_mul(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return fmul_(f, x, y); }
static LLVMValueRef e_div(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return LLVMBuildFDiv(f->B, x, y, ""); }
static LLVMValueRef e_pow(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return pow_(f, x, y); }

static LLVMValueRef
e_relu(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y)	/* NaN stays NaN */
{
	return cg_select(f, fcmp(f, LLVMRealOLT, x, ZERO), ZERO, x);
}

static LLVMValueRef
e_softplus(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y)	/* max(x,0) + log1p(e^-|x|) */
{
	LLVMValueRef pos = fcmp(f, LLVMRealOGT, x, ZERO);
	LLVMValueRef e = cg_exp(f, cg_select(f, pos, LLVMBuildFNeg(f->B, x, ""), x));

	return fadd_(f, cg_select(f, pos, x, ZERO), log1p_(f, e));
}

static LLVMValueRef
e_leaky_relu(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y)
{
	return cg_select(f, fcmp(f, LLVMRealOLT, x, ZERO), fmul_(f, cg_f32(f, a->alpha), x), x);
}

static LLVMValueRef
e_hard_sigmoid(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y)
{
	return cg_clamp(f, fadd_(f, fmul_(f, cg_f32(f, a->alpha), x), cg_f32(f, a->beta)), ZERO, ONE);
}

static LLVMValueRef
e_hard_swish(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y)	/* x clamp(x/6 + 1/2, 0, 1) */
{
	return fmul_(f, x, cg_clamp(f, fadd_(f, LLVMBuildFDiv(f->B, x, cg_f32(f, 6), ""), cg_f32(f, 0.5)),
				    ZERO, ONE));
}

static LLVMValueRef
e_clip(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y)
{
	return cg_clamp(f, x, cg_f32(f, a->lo), cg_f32(f, a->hi));
}

static LLVMValueRef
e_minmax(CgFn *f, int max, LLVMValueRef x, LLVMValueRef y)	/* NaN if either is */
{
	LLVMValueRef nan = LLVMBuildOr(f->B, fcmp(f, LLVMRealUNO, x, x), fcmp(f, LLVMRealUNO, y, y), "");

	return cg_select(f, nan, cg_f32(f, NAN), max ? cg_fmax(f, x, y) : cg_fmin(f, x, y));
}

static LLVMValueRef e_min(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return e_minmax(f, 0, x, y); }
static LLVMValueRef e_max(CgFn *f, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y) { return e_minmax(f, 1, x, y); }
#undef ZERO
#undef ONE

/* Indexed by IR op: exactly the OPF_SCALAR ops of ops.def (a unit test checks). */
static EwFn *const ew[NOP] = {
	[OP_NEG] = e_neg, [OP_ABS] = e_abs, [OP_EXP] = e_exp, [OP_LOG] = e_log,
	[OP_SQRT] = e_sqrt, [OP_RSQRT] = e_rsqrt, [OP_RECIPROCAL] = e_recip,
	[OP_FLOOR] = e_floor, [OP_SIGN] = e_sign,
	[OP_ERF] = e_erf, [OP_TANH] = e_tanh, [OP_SIGMOID] = e_sigmoid,
	[OP_RELU] = e_relu, [OP_SILU] = e_silu, [OP_GELU] = e_gelu,
	[OP_SOFTPLUS] = e_softplus, [OP_LEAKY_RELU] = e_leaky_relu,
	[OP_HARD_SIGMOID] = e_hard_sigmoid, [OP_HARD_SWISH] = e_hard_swish, [OP_CLIP] = e_clip,
	[OP_CAST] = e_ident, [OP_IDENTITY] = e_ident,
	[OP_ADD] = e_add, [OP_SUB] = e_sub, [OP_MUL] = e_mul, [OP_DIV] = e_div,
	[OP_POW] = e_pow, [OP_MIN] = e_min, [OP_MAX] = e_max,
};

int
cg_ew_has(Op op)
{
	return (unsigned)op < NOP && ew[op] != NULL;
}

LLVMValueRef
cg_ew_emit(CgFn *f, Op op, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y)
{
	if (!cg_ew_has(op))
		die("cg_ew_emit: %s is not a scalar op", ir_opname(op));
	return ew[op](f, a, x, y);
}
