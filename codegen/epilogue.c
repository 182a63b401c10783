/*
 * epilogue.c — the epilogue program of a GEMM: building it, checking it,
 * printing it, and its code.  Its operations are IR ops (CGE_OP): ew.c
 * emits them as kernel bodies do, ir/eval_ew.c is their semantics.
 *
 *	e0 = acc                          one element of the f32 accumulator
 *	e1 = col bias bf16                bias[n]
 *	e2 = add e0, e1
 *	e3 = gelu e2                      the result: the last instruction
 *
 * Leaves that read memory (col, row, mat) become kernel parameters, in
 * program order.  SWIGLU pairs columns (2j, 2j+1) of its operand, which the
 * m16n8 accumulator fragment keeps in one thread; everything after it lives
 * in the output's column space (half as wide).
 *
 * The output quantisation stage (CgQuant) follows the program: its checks,
 * its printing, and the code of one element and of a group's scale, with
 * ir/eval_quant.c's arithmetic.  k_gemm.c gathers the groups' amax.
 */
#define CG_INTERNAL
#include <math.h>
#include <string.h>

#include "codegen.h"

/* ORDER CGE */
static const struct {
	const char *name;
	int arity;		/* operands; 0 for leaves */
	int load;		/* reads memory */
} ep_ops[NCGE] = {
	[CGE_ACC] = {"acc", 0, 0},
	[CGE_IMM] = {"imm", 0, 0},
	[CGE_COL] = {"col", 0, 1},
	[CGE_ROW] = {"row", 0, 1},
	[CGE_MAT] = {"mat", 0, 1},
	[CGE_OP] = {"op", 1, 0},	/* its IR op's arity: inst_arity */
	[CGE_SWIGLU] = {"swiglu", 1, 0},
	[CGE_ROUND] = {"round", 1, 0},
};

static const char *const row_names[NCGR] = {"r", "gather", "gather_raw", "scatter"};

const char *cg_ep_op_name(CgEpOp op) { return (unsigned)op < NCGE ? ep_ops[op].name : "?"; }
int cg_ep_is_leaf(CgEpOp op) { return (unsigned)op < NCGE && ep_ops[op].arity == 0; }
int cg_ep_is_load(CgEpOp op) { return (unsigned)op < NCGE && ep_ops[op].load; }
int cg_ep_arity(CgEpOp op) { return (unsigned)op < NCGE ? ep_ops[op].arity : -1; }

/* Operands of one instruction: CGE_OP has its IR op's. */
static int
inst_arity(const CgEpInst *in)
{
	if (in->op == CGE_OP)
		return cg_ew_has(in->iop) ? ir_opinfo[in->iop].inmax : -1;
	return cg_ep_arity(in->op);
}

const char *
cg_ep_inst_name(const CgEpInst *in)
{
	if (in->op == CGE_OP && in->iop == OP_GELU)	/* the approximation, in reports */
		return in->ew.tanh_approx ? "gelu_tanh" : "gelu_erf";
	return in->op == CGE_OP && cg_ew_has(in->iop) ? ir_opname(in->iop) : cg_ep_op_name(in->op);
}

static int
push(CgEpilogue *e, CgEpInst in)
{
	if (e->n >= CG_EP_MAX)
		return -1;
	e->in[e->n] = in;
	return e->n++;
}

static CgEpInst
inst(CgEpOp op)
{
	CgEpInst in;

	memset(&in, 0, sizeof in);
	in.op = op;
	in.a = in.b = -1;
	in.dt = DT_F32;
	return in;
}

int cg_ep_acc(CgEpilogue *e) { return push(e, inst(CGE_ACC)); }

int
cg_ep_imm(CgEpilogue *e, float v)
{
	CgEpInst in = inst(CGE_IMM);

	in.imm = v;
	return push(e, in);
}

int
cg_ep_col(CgEpilogue *e, DType dt, int64_t group_stride, const char *role)
{
	CgEpInst in = inst(CGE_COL);

	in.dt = dt;
	in.group_stride = group_stride;
	in.role = role;
	return push(e, in);
}

int
cg_ep_row(CgEpilogue *e, DType dt, CgRowIndex rows, const char *role)
{
	CgEpInst in = inst(CGE_ROW);

	in.dt = dt;
	in.rows = rows;
	in.role = role;
	return push(e, in);
}

int
cg_ep_mat(CgEpilogue *e, DType dt, int64_t ld, CgRowIndex rows, const char *role)
{
	CgEpInst in = inst(CGE_MAT);

	in.dt = dt;
	in.ld = ld;
	in.rows = rows;
	in.role = role;
	return push(e, in);
}

int
cg_ep_ew(CgEpilogue *e, Op op, const IrEwAttrs *at, int a, int b)
{
	CgEpInst in = inst(CGE_OP);

	in.iop = op;
	in.ew = *at;
	in.a = a;
	in.b = b;
	return push(e, in);
}

/* The attributes' defaults: those of a node without attributes. */
static IrEwAttrs
defaults(Op op)
{
	IrEwAttrs at;
	Node n;
	char why[8];

	memset(&n, 0, sizeof n);
	n.op = op;
	ir_ew_attrs(&n, &at, why, sizeof why);
	return at;
}

int
cg_ep_op(CgEpilogue *e, Op op, int a, int b)
{
	IrEwAttrs at = defaults(op);

	return cg_ep_ew(e, op, &at, a, b);
}

int
cg_ep_gelu(CgEpilogue *e, int a, int tanh_approx)
{
	IrEwAttrs at = defaults(OP_GELU);

	at.tanh_approx = tanh_approx;
	return cg_ep_ew(e, OP_GELU, &at, a, -1);
}

int
cg_ep_clamp(CgEpilogue *e, int a, float lo, float hi)
{
	IrEwAttrs at = defaults(OP_CLIP);

	at.lo = lo;
	at.hi = hi;
	return cg_ep_ew(e, OP_CLIP, &at, a, -1);
}

int
cg_ep_round(CgEpilogue *e, int a, DType dt)
{
	CgEpInst in = inst(CGE_ROUND);

	if (dt != DT_BF16 && dt != DT_F16)
		return a;
	in.a = a;
	in.dt = dt;
	return push(e, in);
}

int
cg_ep_swiglu(CgEpilogue *e, int a, const IrGluAttrs *g)
{
	CgEpInst in = inst(CGE_SWIGLU);

	in.a = a;
	in.glu.act = IR_GLU_SILU;
	in.glu.limit = INFINITY;
	in.glu.interleave = 1;
	if (g)
		in.glu = *g;
	return push(e, in);
}

int
cg_ep_check(const CgEpilogue *e, Diag *d)
{
	int sw = -1;

	if (e->n < 0 || e->n > CG_EP_MAX)
		return diag_error(d, LOC_NONE, "epilogue: %d instructions (at most %d)", e->n, CG_EP_MAX);
	for (int i = 0; i < e->n; i++) {
		const CgEpInst *in = &e->in[i];
		int ar = inst_arity(in);
		int ops[2] = {in->a, in->b};
		if (ar < 0 || ar > 2)
			return diag_error(d, LOC_NONE, "epilogue e%d: unknown op %d", i, in->op);
		for (int k = 0; k < ar; k++) {
			if (ops[k] < 0 || ops[k] >= i)
				return diag_error(d, LOC_NONE,
						  "epilogue e%d (%s): operand %d is e%d, not an earlier instruction",
						  i, cg_ep_inst_name(in), k, ops[k]);
			if (sw >= 0 && ops[k] < sw)
				return diag_error(d, LOC_NONE,
						  "epilogue e%d (%s): uses e%d from before swiglu e%d (another column space)",
						  i, cg_ep_inst_name(in), ops[k], sw);
		}
		if (cg_ep_is_load(in->op)) {
			if (in->dt != DT_F32 && in->dt != DT_BF16 && in->dt != DT_F16)
				return diag_error(d, LOC_NONE, "epilogue e%d (%s): dtype %s (need f32, bf16 or f16)",
						  i, cg_ep_op_name(in->op), dtype_name(in->dt));
			if (!in->role || !in->role[0])
				return diag_error(d, LOC_NONE, "epilogue e%d (%s): no parameter role",
						  i, cg_ep_op_name(in->op));
			if ((unsigned)in->rows >= NCGR)
				return diag_error(d, LOC_NONE, "epilogue e%d: bad row index %d", i, in->rows);
			if (in->op == CGE_MAT && (in->ld < 0 || in->ld % 8))
				return diag_error(d, LOC_NONE, "epilogue e%d (mat): ld %lld is not a multiple of 8",
						  i, (long long)in->ld);
			if (in->group_stride < 0)
				return diag_error(d, LOC_NONE, "epilogue e%d: negative group stride", i);
		}
		if (in->op == CGE_ACC && sw >= 0)
			return diag_error(d, LOC_NONE, "epilogue e%d: acc after swiglu e%d", i, sw);
		if (in->op == CGE_OP && in->iop == OP_CLIP && !(in->ew.lo <= in->ew.hi))
			return diag_error(d, LOC_NONE, "epilogue e%d: clip(%g, %g) is empty", i,
					  in->ew.lo, in->ew.hi);
		if (in->op == CGE_ROUND && in->dt != DT_BF16 && in->dt != DT_F16)
			return diag_error(d, LOC_NONE, "epilogue e%d: round to %s (need bf16 or f16)", i,
					  dtype_name(in->dt));
		if (in->op == CGE_SWIGLU) {
			if (sw >= 0)
				return diag_error(d, LOC_NONE, "epilogue e%d: a second swiglu (first e%d)", i, sw);
			if (in->glu.act != IR_GLU_SILU && in->glu.act != IR_GLU_OAI)
				return diag_error(d, LOC_NONE, "epilogue e%d: swiglu act %d (need silu or oai)",
						  i, in->glu.act);
			if (!(in->glu.limit > 0))
				return diag_error(d, LOC_NONE, "epilogue e%d: swiglu limit %g <= 0", i,
						  in->glu.limit);
			sw = i;
		}
	}
	return 0;
}

int
cg_ep_print(char *buf, size_t n, const CgEpilogue *e)
{
	size_t k = 0;

	buf[0] = 0;
	for (int i = 0; i < e->n && k < n; i++) {
		const CgEpInst *in = &e->in[i];
		const char *sep = i ? " " : "";
		switch (in->op) {
		case CGE_ACC:
			k += snprintf(buf + k, n - k, "%se%d=acc", sep, i);
			break;
		case CGE_IMM:
			k += snprintf(buf + k, n - k, "%se%d=%g", sep, i, in->imm);
			break;
		case CGE_COL:
			k += snprintf(buf + k, n - k, "%se%d=%s[n]:%s", sep, i, in->role, dtype_name(in->dt));
			break;
		case CGE_ROW:
			k += snprintf(buf + k, n - k, "%se%d=%s[%s]:%s", sep, i, in->role,
				      row_names[in->rows], dtype_name(in->dt));
			break;
		case CGE_MAT:
			k += snprintf(buf + k, n - k, "%se%d=%s[%s,n]:%s", sep, i, in->role,
				      row_names[in->rows], dtype_name(in->dt));
			break;
		case CGE_SWIGLU:
			if (in->glu.act == IR_GLU_OAI)
				k += snprintf(buf + k, n - k, "%se%d=swiglu(e%d,lim=%g,alpha=%g)", sep, i,
					      in->a, in->glu.limit, in->glu.alpha);
			else if (in->glu.limit < INFINITY)
				k += snprintf(buf + k, n - k, "%se%d=swiglu(e%d,silu,lim=%g)", sep, i,
					      in->a, in->glu.limit);
			else
				k += snprintf(buf + k, n - k, "%se%d=swiglu(e%d)", sep, i, in->a);
			break;
		default:
			if (in->iop == OP_CLIP)
				k += snprintf(buf + k, n - k, "%se%d=clip(e%d,%g,%g)", sep, i, in->a,
					      in->ew.lo, in->ew.hi);
			else if (in->op == CGE_ROUND)
				k += snprintf(buf + k, n - k, "%se%d=round(e%d):%s", sep, i, in->a,
					      dtype_name(in->dt));
			else if (inst_arity(in) == 2)
				k += snprintf(buf + k, n - k, "%se%d=%s(e%d,e%d)", sep, i,
					      cg_ep_inst_name(in), in->a, in->b);
			else
				k += snprintf(buf + k, n - k, "%se%d=%s(e%d)", sep, i,
					      cg_ep_inst_name(in), in->a);
		}
	}
	return (int)k;
}

/* ---- code ---- */

/*
 * round to bf16/f16 and back to f32: cvt.rn to the narrow type and back
 * (F2FP and a shift on the device, moec_emu_f32_to_* in the emulator)
 * rather than cg_round_dt's integer code, which is bit-exact with the host
 * also for a NaN's payload.  The values are the same; a NaN comes back as
 * the canonical one, and an epilogue's value reaches memory only through
 * f32 arithmetic, whose NaNs are canonical too, or through the store's cvt.
 * The integer code was 11 instructions a value, a third of a gate|up GEMM's
 * epilogue (and of its ptxas time); cvt is 2.  A target without cvt bf16
 * (below sm_80, CUDA-core GEMMs only) keeps the integer code.
 */
LLVMValueRef
cg_round_cvt(CgFn *f, LLVMValueRef x, DType dt)
{
	if (dt == DT_F32)
		return x;
	if (dt == DT_BF16 && !f->emu && !cg_target_has(&f->m->t, CG_CVT_BF16))
		return cg_round_dt(f, x, dt);
	return cg_to_f32(f, cg_from_f32(f, x, dt), dt);
}

LLVMValueRef
cg_ep_emit_op(CgFn *f, const CgEpInst *in, LLVMValueRef a, LLVMValueRef b)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef one = cg_f32(f, 1.0);

	if (in->op == CGE_OP)
		return cg_ew_emit(f, in->iop, &in->ew, a, b);
	if (in->op == CGE_ROUND)
		return cg_round_cvt(f, a, in->dt);
	if (in->op == CGE_SWIGLU) {	/* ir_glu_scalar's arithmetic in f32 */
		LLVMValueRef lim = cg_f32(f, in->glu.limit), nlim = cg_f32(f, -in->glu.limit);
		if (in->glu.act == IR_GLU_OAI) {
			LLVMValueRef g = cg_fmin(f, a, lim);
			LLVMValueRef u = cg_fmin(f, cg_fmax(f, b, nlim), lim);
			LLVMValueRef s = cg_sigmoid(f, LLVMBuildFMul(B, g, cg_f32(f, in->glu.alpha), ""));
			return LLVMBuildFMul(B, LLVMBuildFAdd(B, u, one, ""),
					     LLVMBuildFMul(B, g, s, ""), "");
		}
		a = LLVMBuildFMul(B, a, cg_sigmoid(f, a), "");
		if (in->glu.limit < INFINITY) {	/* Step-3.5: clamped after the activation */
			a = cg_fmin(f, a, lim);
			b = cg_fmin(f, cg_fmax(f, b, nlim), lim);
		}
		return LLVMBuildFMul(B, a, b, "");
	}
	die("cg_ep_emit_op: %s is not an operation", cg_ep_op_name(in->op));
}

void
cg_ep_emit_range(CgFn *f, const CgEpilogue *e, int from, int to, LLVMValueRef *val)
{
	for (int i = from; i < to; i++) {
		const CgEpInst *in = &e->in[i];
		if (cg_ep_is_leaf(in->op) || in->op == CGE_SWIGLU)
			continue;	/* the caller's */
		val[i] = cg_ep_emit_op(f, in, val[in->a], in->b >= 0 ? val[in->b] : NULL);
	}
}

/* ---- the output quantisation stage ---- */

double
cg_quant_qmax(DType c_dt)
{
	return c_dt == DT_F8E4M3 ? 448 : c_dt == DT_I8 ? 127 : 0;
}

static int
scalar_type(DType t)
{
	return !dtype_is_packed(t);
}

int
cg_quant_check(const CgQuant *q, DType c_dt, Diag *d)
{
	if (q->kind == CG_QUANT_NONE)
		return cg_quant_qmax(c_dt) > 0
			? diag_error(d, LOC_NONE, "gemm: C is %s, but no quantisation is given", dtype_name(c_dt))
			: 0;
	if (q->kind != CG_QUANT_STATIC && q->kind != CG_QUANT_GROUP)
		return diag_error(d, LOC_NONE, "gemm: unknown quantisation %d", q->kind);
	if (cg_quant_qmax(c_dt) == 0)
		return diag_error(d, LOC_NONE, "gemm: quantised C is %s (need f8e4m3 or i8)", dtype_name(c_dt));
	if (q->in_dt != DT_F32 && q->in_dt != DT_BF16 && q->in_dt != DT_F16)
		return diag_error(d, LOC_NONE, "gemm: quantisation of a %s value (need f32, bf16 or f16)",
				  dtype_name(q->in_dt));
	if (q->kind == CG_QUANT_STATIC) {
		if ((q->scale_role && (!q->scale_role[0] || !scalar_type(q->scale_dt))) ||
		    (q->zero_role && (!q->zero_role[0] || !scalar_type(q->zero_dt))))
			return diag_error(d, LOC_NONE, "gemm: a static scale or zero point without a role, or packed");
		return 0;
	}
	if (q->group < 8 || q->group % 8)
		return diag_error(d, LOC_NONE, "gemm: quantisation groups of %d columns (need a multiple of 8)",
				  q->group);
	return 0;
}

int
cg_quant_print(char *buf, size_t n, const CgQuant *q, DType c_dt)
{
	char sc[64], z[64] = "";
	int k;

	if (q->kind == CG_QUANT_NONE)
		return snprintf(buf, n, "none");
	if (q->kind == CG_QUANT_GROUP) {
		k = snprintf(buf, n, "%s group=%d%s", dtype_name(c_dt), q->group,
			     q->want_scales ? " scales" : "");
	} else {
		if (q->scale_role)
			snprintf(sc, sizeof sc, "%s:%s", q->scale_role, dtype_name(q->scale_dt));
		else
			snprintf(sc, sizeof sc, "%g", q->scale);
		if (q->zero_role)
			snprintf(z, sizeof z, " zero=%s:%s", q->zero_role, dtype_name(q->zero_dt));
		else if (q->zero != 0)
			snprintf(z, sizeof z, " zero=%g", q->zero);
		k = snprintf(buf, n, "%s static scale=%s%s", dtype_name(c_dt), sc, z);
	}
	if (q->in_dt != DT_F32 && k >= 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, " of %s", dtype_name(q->in_dt));
	return k;
}

/*
 * On sm_89+ (the default; --debug=f8-cvt names it): f32 to e4m3 by cvt.rn.satfinite.e4m3x2.f32, two
 * values an instruction, instead of k_synth.c's integer code (about 25
 * instructions a value, most of the norm's kernel's time): the same bits,
 * nearest even with e4m3's subnormals, beyond 448 (and inf) 448, f32
 * subnormals +-0, NaN 0x7f (the f32 NaNs that reach it are the arithmetic's
 * canonical positive one).  The emulator keeps the integer code.  The
 * default since session 33 (H200: DeepSeek-V3's FP8 layer the same bits,
 * 0.966x at T = 4096, 0.952x at T = 16; the norm step 290 -> 80 us).
 */
enum { F8_CVT_DEFAULT = 1 };

static int
f8_cvt(CgFn *f, DType dt)
{
	return dt == DT_F8E4M3 && !f->emu && (F8_CVT_DEFAULT || (f->m->debug & DBG_F8_CVT)) &&
	       cg_target_has(&f->m->t, CG_CVT_F8);
}

/* The e4m3 bits (i8) of f32 x[0..n-1] into bits[]. */
static void
f8_bits(CgFn *f, DType dt, const LLVMValueRef *x, int n, LLVMValueRef *bits)
{
	if (!f8_cvt(f, dt)) {
		for (int i = 0; i < n; i++)
			bits[i] = cg_f32_to_bits(f, x[i], dt);
		return;
	}
	for (int i = 0; i < n; i += 2) {
		LLVMValueRef a[2] = {i + 1 < n ? x[i + 1] : cg_f32(f, 0), x[i]};
		LLVMValueRef p = cg_asm(f, f->ti16, "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", a, 2, 0);
		bits[i] = LLVMBuildTrunc(f->B, p, f->ti8, "");
		if (i + 1 < n)
			bits[i + 1] = LLVMBuildTrunc(f->B, LLVMBuildLShr(f->B, p, LLVMConstInt(f->ti16, 8, 0), ""),
						     f->ti8, "");
	}
}

void
cg_f8_to_f32_v(CgFn *f, DType dt, const LLVMValueRef *bits, int n, LLVMValueRef *x)
{
	if (!f8_cvt(f, dt)) {
		for (int i = 0; i < n; i++)
			x[i] = cg_bits_to_f32(f, bits[i], dt);
		return;
	}
	for (int i = 0; i < n; i += 2) {
		LLVMValueRef hi = i + 1 < n ? LLVMBuildShl(f->B, LLVMBuildZExt(f->B, bits[i + 1], f->ti16, ""),
							   LLVMConstInt(f->ti16, 8, 0), "")
					    : LLVMConstInt(f->ti16, 0, 0);
		LLVMValueRef p = LLVMBuildOr(f->B, hi, LLVMBuildZExt(f->B, bits[i], f->ti16, ""), "");
		LLVMValueRef h2 = cg_asm(f, f->ti32, "cvt.rn.f16x2.e4m3x2 $0, $1;", "=r,h", &p, 1, 0);
		for (int j = i; j < n && j < i + 2; j++)	/* f16 to f32 is exact */
			x[j] = cg_to_f32(f, LLVMBuildTrunc(f->B, j == i ? h2 : LLVMBuildLShr(f->B, h2, cg_i32(f, 16), ""),
							    f->ti16, ""), DT_F16);
	}
}

/*
 * ir/eval_quant.c's arithmetic: x / scale rounded to f32 (a group's values
 * by one reciprocal, cg_fdiv_recip: the same quotient); for i8 rounded
 * half to even, the zero point added (rounded again), saturated, NaN 0;
 * for f8 the sum cast with saturation (the rounding of dtype_store).
 */
void
cg_quant_emit_v(CgFn *f, const CgQuant *q, DType c_dt, const LLVMValueRef *x, int n, LLVMValueRef scale,
		LLVMValueRef zero, LLVMValueRef *bits)
{
	LLVMValueRef v[16];
	CgRecip r;

	if (n > 1 && q->kind == CG_QUANT_GROUP)	/* |x| <= amax: one reciprocal for the n */
		cg_recip(f, scale, &r);
	for (int i = 0; i < n; i += 16) {
		int k = MIN(16, n - i);
		for (int j = 0; j < k; j++) {
			LLVMValueRef xv = q->in_dt != DT_F32 ? cg_round_dt(f, x[i + j], q->in_dt) : x[i + j];
			v[j] = n > 1 && q->kind == CG_QUANT_GROUP ? cg_fdiv_recip(f, xv, &r)
				: LLVMBuildFDiv(f->B, xv, scale, "");
			if (c_dt == DT_I8)
				v[j] = cg_round_even(f, v[j]);
			if (zero)
				v[j] = LLVMBuildFAdd(f->B, v[j], zero, "");
			if (c_dt == DT_I8)
				bits[i + j] = LLVMBuildTrunc(f->B, cg_round_dt(f, zero ? cg_round_even(f, v[j]) : v[j], DT_I8),
							     f->ti8, "");
		}
		if (c_dt != DT_I8)
			f8_bits(f, c_dt, v, k, bits + i);
	}
}

LLVMValueRef
cg_quant_emit(CgFn *f, const CgQuant *q, DType c_dt, LLVMValueRef x, LLVMValueRef scale,
	      LLVMValueRef zero)
{
	LLVMValueRef bits;

	cg_quant_emit_v(f, q, c_dt, &x, 1, scale, zero, &bits);
	return bits;
}

LLVMValueRef
cg_quant_emit_scale(CgFn *f, DType c_dt, LLVMValueRef amax)
{
	LLVMValueRef s = LLVMBuildFDiv(f->B, amax, cg_f32(f, cg_quant_qmax(c_dt)), "");

	return cg_select(f, LLVMBuildFCmp(f->B, LLVMRealOEQ, amax, cg_f32(f, 0), ""), cg_f32(f, 1), s);
}
