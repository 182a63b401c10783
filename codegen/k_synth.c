/*
 * k_synth.c — synthetic weights generated on the device, bit-identical to
 * the host's ir_weight_data, and the element layer the other builders of
 * this family share: loads and stores of every dtype with the rounding of
 * dtype_store, in integer code only (no cvt), so that the GPU, the CPU
 * emulator and the host agree bit for bit.
 *
 *	h = mix64(seed ^ mix64(namehash ^ mix64(i)))       splitmix64 finaliser
 *	u = ((int32)(h >> 40) - 2^23) * 2^-23               exact in f32
 *	v = mean + scale * u                                f32, no FMA
 *	out[i] = v rounded to dt (integers: nearbyint, then saturated)
 *
 * NVPTX contracts a multiply and an add only when told (no contract flags,
 * AllowFPOpFusion Standard), so the separate f32 multiply and add survive.
 */
#define CG_INTERNAL
#include <string.h>

#include "codegen.h"

/* ---- dtypes ---- */

int
cg_dt_isint(DType dt)
{
	return !dtype_is_float(dt);
}

LLVMTypeRef
cg_dt_value_type(CgFn *f, DType dt)
{
	return cg_dt_isint(dt) ? f->ti64 : f->tf32;
}

/* Small float formats: exponent bits, mantissa bits, bias. */
typedef struct {
	int ebits, mbits, bias;
	unsigned maxbits;	/* largest finite magnitude, as bits */
	unsigned ovf;		/* what a larger magnitude becomes (inf or the max) */
	unsigned nan;		/* the NaN the host writes (no sign) */
	int special;		/* what reads as NaN/inf: SP_NONE, SP_E4M3 (all ones), SP_IEEE */
} Small;

enum { SP_NONE, SP_E4M3, SP_IEEE };

static const Small *
small_of(DType dt)
{
	static const Small f16 = {5, 10, 15, 0x7bff, 0x7c00, 0x7e00, SP_IEEE};
	static const Small e4m3 = {4, 3, 7, 0x7e, 0x7e, 0x7f, SP_E4M3};	/* saturates */
	static const Small e5m2 = {5, 2, 15, 0x7b, 0x7b, 0x7f, SP_IEEE};	/* saturates */
	static const Small e2m1 = {2, 1, 1, 0x7, 0x7, 0x8, SP_NONE};	/* saturates; NaN -> -0 */

	switch (dt) {
	case DT_F16: return &f16;
	case DT_F8E4M3: return &e4m3;
	case DT_F8E5M2: return &e5m2;
	case DT_F4E2M1: return &e2m1;
	default: return NULL;
	}
}

static LLVMValueRef
bitcast(CgFn *f, LLVMValueRef v, LLVMTypeRef t)
{
	return LLVMBuildBitCast(f->B, v, t, "");
}

static LLVMValueRef
icmp(CgFn *f, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildICmp(f->B, p, a, b, "");
}

/* f32_to_bf16: NaN keeps its top bits and is made quiet; else to nearest even. */
static LLVMValueRef
to_bf16(CgFn *f, LLVMValueRef x)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef u = bitcast(f, x, f->ti32);
	LLVMValueRef hi = cg_shr(f, u, 16);
	LLVMValueRef r = cg_shr(f, cg_add(f, u, cg_addi(f, cg_and(f, hi, 1), 0x7fff)), 16);
	LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");

	r = cg_select(f, nan, LLVMBuildOr(B, hi, cg_i32(f, 0x40), ""), r);
	return LLVMBuildTrunc(B, r, f->ti16, "");
}

/*
 * Round |x| to the format's grid as dtype.c's round_fmt does: the quantum is
 * 2^(max(E, emin) - mbits).  bits = ((max(E, emin) + bias - 1) << mbits) + q
 * covers normals, subnormals and the carry of a mantissa rounding up.
 */
static LLVMValueRef
to_small(CgFn *f, LLVMValueRef x, const Small *s)
{
	LLVMBuilderRef B = f->B;
	int emin = 1 - s->bias;
	LLVMValueRef u = bitcast(f, x, f->ti32);
	LLVMValueRef sign = cg_shr(f, u, 31);
	LLVMValueRef a = cg_and(f, u, 0x7fffffff);
	LLVMValueRef e32 = cg_shr(f, a, 23);
	LLVMValueRef E = cg_addi(f, e32, -127);
	LLVMValueRef M = LLVMBuildOr(B, cg_and(f, a, 0x7fffff), cg_i32(f, 0x800000), "");
	LLVMValueRef Ee = cg_max(f, E, cg_i32(f, emin));
	/* shift = 23 + (Ee - mbits) - E, at least 23 - mbits, at most 31 */
	LLVMValueRef sh = cg_min(f, cg_sub(f, cg_addi(f, Ee, 23 - s->mbits), E), cg_i32(f, 31));
	LLVMValueRef one = cg_i32(f, 1);
	LLVMValueRef q = LLVMBuildLShr(B, M, sh, "");
	LLVMValueRef r = LLVMBuildAnd(B, M, cg_sub(f, LLVMBuildShl(B, one, sh, ""), one), "");
	LLVMValueRef half = LLVMBuildShl(B, one, cg_addi(f, sh, -1), "");
	LLVMValueRef up = LLVMBuildOr(B, icmp(f, LLVMIntUGT, r, half),
				      LLVMBuildAnd(B, icmp(f, LLVMIntEQ, r, half),
						   icmp(f, LLVMIntNE, cg_and(f, q, 1), cg_i32(f, 0)), ""), "");
	LLVMValueRef bits, nan;

	q = cg_add(f, q, LLVMBuildZExt(B, up, f->ti32, ""));
	bits = cg_add(f, cg_shl(f, cg_addi(f, Ee, s->bias - 1), s->mbits), q);
	bits = cg_select(f, icmp(f, LLVMIntEQ, e32, cg_i32(f, 0)), cg_i32(f, 0), bits);	/* 0, f32 subnormals */
	bits = cg_select(f, icmp(f, LLVMIntUGT, bits, cg_i32(f, s->maxbits)), cg_i32(f, s->ovf), bits);
	bits = LLVMBuildOr(B, bits, cg_shl(f, sign, s->ebits + s->mbits), "");
	nan = icmp(f, LLVMIntUGT, a, cg_i32(f, 0x7f800000));
	bits = cg_select(f, nan, cg_i32(f, s->nan), bits);
	return LLVMBuildTrunc(B, bits, s->ebits + s->mbits >= 15 ? f->ti16 : f->ti8, "");
}

static LLVMValueRef
from_small(CgFn *f, LLVMValueRef raw, const Small *s, DType dt)
{
	LLVMBuilderRef B = f->B;
	int nb = 1 + s->ebits + s->mbits;
	LLVMValueRef b = LLVMBuildZExt(B, raw, f->ti32, "");
	LLVMValueRef sign = cg_and(f, cg_shr(f, b, nb - 1), 1);
	LLVMValueRef e = cg_and(f, cg_shr(f, b, s->mbits), (1 << s->ebits) - 1);
	LLVMValueRef m = cg_and(f, b, (1 << s->mbits) - 1);
	LLVMValueRef nrm = LLVMBuildOr(B, cg_shl(f, cg_addi(f, e, 127 - s->bias), 23),
				       cg_shl(f, m, 23 - s->mbits), "");
	LLVMValueRef sub = LLVMBuildFMul(B, LLVMBuildUIToFP(B, m, f->tf32, ""),
					 cg_f32(f, 1.0 / (double)(1ll << (s->bias - 1 + s->mbits))), "");
	LLVMValueRef v, nan, inf;

	sub = bitcast(f, sub, f->ti32);
	v = cg_select(f, icmp(f, LLVMIntEQ, e, cg_i32(f, 0)), sub, nrm);
	if (s->special != SP_IEEE) {
		nan = s->special == SP_NONE ? LLVMConstInt(f->ti1, 0, 0)
			: icmp(f, LLVMIntEQ, cg_and(f, b, 0x7f), cg_i32(f, 0x7f));
		inf = LLVMConstInt(f->ti1, 0, 0);
	} else {
		LLVMValueRef top = icmp(f, LLVMIntEQ, e, cg_i32(f, (1 << s->ebits) - 1));
		LLVMValueRef mz = icmp(f, LLVMIntEQ, m, cg_i32(f, 0));
		nan = LLVMBuildAnd(B, top, LLVMBuildNot(B, mz, ""), "");
		inf = LLVMBuildAnd(B, top, mz, "");
	}
	v = cg_select(f, inf, cg_i32(f, 0x7f800000), v);
	v = LLVMBuildOr(B, v, cg_shl(f, sign, 31), "");
	v = cg_select(f, nan, cg_i32(f, 0x7fc00000), v);
	return bitcast(f, v, f->tf32);
}

/* f32_to_f8e8m0: the f32 exponent field, plus one if a fraction bit is set. */
static LLVMValueRef
to_e8m0(CgFn *f, LLVMValueRef x)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef u = bitcast(f, x, f->ti32);
	LLVMValueRef e = cg_and(f, cg_shr(f, u, 23), 0xff);
	LLVMValueRef up = LLVMBuildAnd(B, icmp(f, LLVMIntNE, cg_and(f, u, 0x7fffff), cg_i32(f, 0)),
				       icmp(f, LLVMIntULT, e, cg_i32(f, 0xfe)), "");

	LLVMValueRef sub = icmp(f, LLVMIntUGT, cg_and(f, u, 0x7fffff), cg_i32(f, 0x400000));

	e = cg_add(f, e, LLVMBuildZExt(B, up, f->ti32, ""));
	e = cg_select(f, icmp(f, LLVMIntEQ, cg_and(f, cg_shr(f, u, 23), 0xff), cg_i32(f, 0)),
		      LLVMBuildZExt(B, sub, f->ti32, ""), e);	/* f32 subnormals, as dtype.c */
	return LLVMBuildTrunc(B, e, f->ti8, "");
}

/* 2^(e-127): e << 23, but e = 0 is the f32 subnormal 2^-127 and 0xff NaN. */
static LLVMValueRef
from_e8m0(CgFn *f, LLVMValueRef raw)
{
	LLVMValueRef e = LLVMBuildZExt(f->B, raw, f->ti32, "");
	LLVMValueRef v = cg_shl(f, e, 23);

	v = cg_select(f, icmp(f, LLVMIntEQ, e, cg_i32(f, 0)), cg_i32(f, 0x400000), v);
	v = cg_select(f, icmp(f, LLVMIntEQ, e, cg_i32(f, 0xff)), cg_i32(f, 0x7fc00000), v);
	return bitcast(f, v, f->tf32);
}

LLVMValueRef
cg_f32_to_bits(CgFn *f, LLVMValueRef x, DType dt)
{
	if (dt == DT_BF16)
		return to_bf16(f, x);
	if (dt == DT_F8E8M0)
		return to_e8m0(f, x);
	return to_small(f, x, small_of(dt));
}

LLVMValueRef
cg_bits_to_f32(CgFn *f, LLVMValueRef bits, DType dt)
{
	if (dt == DT_BF16)
		return bitcast(f, cg_shl(f, LLVMBuildZExt(f->B, bits, f->ti32, ""), 16), f->tf32);
	if (dt == DT_F8E8M0)
		return from_e8m0(f, bits);
	return from_small(f, bits, small_of(dt), dt);
}

static int
store_bytes(DType dt)
{
	return dtype_bits(dt) / 8;
}

LLVMValueRef
cg_load_dt(CgFn *f, DType dt, LLVMValueRef base, LLVMValueRef idx)
{
	LLVMBuilderRef B = f->B;
	int nb = store_bytes(dt);
	LLVMValueRef v;

	if (dtype_is_packed(dt)) {
		LLVMValueRef byte = cg_gload(f, f->ti8, cg_gep(f, base, cg_shr(f, idx, 1), 1), 1);
		LLVMValueRef sh = LLVMBuildTrunc(B, cg_shl(f, cg_and(f, idx, 1), 2), f->ti8, "");
		v = LLVMBuildAnd(B, LLVMBuildLShr(B, byte, sh, ""), LLVMConstInt(f->ti8, 15, 0), "");
		if (dt == DT_F4E2M1)
			return cg_bits_to_f32(f, v, dt);
		v = LLVMBuildZExt(B, v, f->ti64, "");
		if (dt == DT_I4)	/* (v ^ 8) - 8 */
			v = cg_addi(f, LLVMBuildXor(B, v, cg_i64(f, 8), ""), -8);
		return v;
	}
	switch (dt) {
	case DT_F32:
		return cg_gload(f, f->tf32, cg_gep(f, base, idx, 4), 4);
	case DT_F64:
		v = cg_gload(f, LLVMDoubleTypeInContext(f->C), cg_gep(f, base, idx, 8), 8);
		return LLVMBuildFPTrunc(B, v, f->tf32, "");
	case DT_BF16: case DT_F16:
		return cg_bits_to_f32(f, cg_gload(f, f->ti16, cg_gep(f, base, idx, 2), 2), dt);
	case DT_F8E4M3: case DT_F8E5M2: case DT_F8E8M0:
		return cg_bits_to_f32(f, cg_gload(f, f->ti8, cg_gep(f, base, idx, 1), 1), dt);
	default:
		break;
	}
	v = cg_gload(f, LLVMIntTypeInContext(f->C, (unsigned)nb * 8), cg_gep(f, base, idx, nb), nb);
	if (dt == DT_BOOL)
		return LLVMBuildZExt(B, icmp(f, LLVMIntNE, v, LLVMConstInt(f->ti8, 0, 0)), f->ti64, "");
	if (dt == DT_U8 || dt == DT_U16)	/* unsigned */
		return LLVMBuildZExt(B, v, f->ti64, "");
	return dt == DT_I64 ? v : LLVMBuildSExt(B, v, f->ti64, "");
}

void
cg_store_dt(CgFn *f, DType dt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v)
{
	LLVMBuilderRef B = f->B;
	int nb = store_bytes(dt);

	switch (dt) {
	case DT_F32:
		cg_gstore(f, v, cg_gep(f, base, idx, 4), 4);
		return;
	case DT_F64:
		cg_gstore(f, LLVMBuildFPExt(B, v, LLVMDoubleTypeInContext(f->C), ""),
			  cg_gep(f, base, idx, 8), 8);
		return;
	case DT_BF16: case DT_F16: case DT_F8E4M3: case DT_F8E5M2: case DT_F8E8M0:
		cg_gstore(f, cg_f32_to_bits(f, v, dt), cg_gep(f, base, idx, nb), nb);
		return;
	case DT_I4: case DT_U4: case DT_F4E2M1:
		die("cg_store_dt: packed %s", dtype_name(dt));
	default:
		break;
	}
	if (nb < 8)
		v = LLVMBuildTrunc(B, v, LLVMIntTypeInContext(f->C, (unsigned)nb * 8), "");
	cg_gstore(f, v, cg_gep(f, base, idx, nb), nb);
}

static void
int_range(DType dt, int64_t *lo, int64_t *hi)
{
	switch (dt) {
	case DT_I32: *lo = INT32_MIN, *hi = INT32_MAX; break;
	case DT_I16: *lo = INT16_MIN, *hi = INT16_MAX; break;
	case DT_U16: *lo = 0, *hi = UINT16_MAX; break;
	case DT_I8: *lo = -128, *hi = 127; break;
	case DT_U8: *lo = 0, *hi = 255; break;
	case DT_I4: *lo = -8, *hi = 7; break;
	case DT_U4: *lo = 0, *hi = 15; break;
	default: *lo = INT64_MIN, *hi = INT64_MAX; break;
	}
}

LLVMValueRef
cg_round_dt(CgFn *f, LLVMValueRef v, DType dt)
{
	LLVMBuilderRef B = f->B;
	int from_int = LLVMTypeOf(v) == f->ti64;
	int64_t lo, hi;

	if (!cg_dt_isint(dt)) {
		LLVMValueRef x = from_int ? LLVMBuildSIToFP(B, v, f->tf32, "") : v;
		if (dt == DT_F32 || dt == DT_F64)
			return x;
		return cg_bits_to_f32(f, cg_f32_to_bits(f, x, dt), dt);
	}
	if (dt == DT_BOOL) {
		LLVMValueRef nz = from_int ? icmp(f, LLVMIntNE, v, cg_i64(f, 0))
			: LLVMBuildFCmp(B, LLVMRealUNE, v, cg_f32(f, 0), "");
		return LLVMBuildZExt(B, nz, f->ti64, "");
	}
	if (!from_int) {	/* toward zero, saturating, NaN -> 0 */
		LLVMTypeRef ovl[2] = {f->ti64, f->tf32};
		v = cg_intrinsic(f, "llvm.fptosi.sat", f->ti64, ovl, 2, &v, 1);
	}
	int_range(dt, &lo, &hi);
	if (dt != DT_I64) {
		v = cg_max(f, v, cg_i64(f, lo));
		v = cg_min(f, v, cg_i64(f, hi));
	}
	return v;
}

/* ---- the synth kernel ---- */

static LLVMValueRef
mix64_ir(CgFn *f, LLVMValueRef x)
{
	LLVMBuilderRef B = f->B;

	x = LLVMBuildAdd(B, x, LLVMConstInt(f->ti64, 0x9e3779b97f4a7c15ull, 0), "");
	x = LLVMBuildMul(B, LLVMBuildXor(B, x, LLVMBuildLShr(B, x, cg_i64(f, 30), ""), ""),
			 LLVMConstInt(f->ti64, 0xbf58476d1ce4e5b9ull, 0), "");
	x = LLVMBuildMul(B, LLVMBuildXor(B, x, LLVMBuildLShr(B, x, cg_i64(f, 27), ""), ""),
			 LLVMConstInt(f->ti64, 0x94d049bb133111ebull, 0), "");
	return LLVMBuildXor(B, x, LLVMBuildLShr(B, x, cg_i64(f, 31), ""), "");
}

/* ir_synth_value(seed, nh, i, mean, scale) as an f32 */
static LLVMValueRef
synth_value(CgFn *f, LLVMValueRef seed, LLVMValueRef nh, LLVMValueRef i, LLVMValueRef mean,
	    LLVMValueRef scale)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef h = mix64_ir(f, LLVMBuildXor(B, seed, mix64_ir(f, LLVMBuildXor(B, nh, mix64_ir(f, i), "")), ""));
	LLVMValueRef k = LLVMBuildTrunc(B, LLVMBuildLShr(B, h, cg_i64(f, 40), ""), f->ti32, "");
	LLVMValueRef u = LLVMBuildSIToFP(B, cg_addi(f, k, -(1 << 23)), f->tf32, "");

	u = LLVMBuildFMul(B, u, cg_f32(f, 1.0 / (1 << 23)), "");
	return LLVMBuildFAdd(B, mean, LLVMBuildFMul(B, scale, u, ""), "");
}

/* nearbyintf: below 2^23, adding and removing 2^23 rounds to nearest even. */
LLVMValueRef
cg_round_even(CgFn *f, LLVMValueRef v)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef a = cg_intrinsic(f, "llvm.fabs", f->tf32, &f->tf32, 1, &v, 1);
	LLVMValueRef big = cg_f32(f, 8388608.0), r, args[2];

	r = LLVMBuildFSub(B, LLVMBuildFAdd(B, a, big, ""), big, "");
	r = cg_select(f, LLVMBuildFCmp(B, LLVMRealOLT, a, big, ""), r, a);
	args[0] = r;
	args[1] = v;
	return cg_intrinsic(f, "llvm.copysign", f->tf32, &f->tf32, 1, args, 2);
}

/* The value element i takes in dt (f32 or i64), as ir_weight_data stores it. */
LLVMValueRef
cg_synth_value(CgFn *f, DType dt, LLVMValueRef *p, LLVMValueRef i)
{
	LLVMValueRef v = synth_value(f, p[1], p[2], i, p[3], p[4]);

	if (!dtype_is_int(dt))		/* floats, and bool: v != 0 */
		return cg_round_dt(f, v, dt);
	return cg_round_dt(f, cg_round_dt(f, cg_round_even(f, v), DT_I64), dt);
}

LLVMValueRef
cg_synth_bits(CgFn *f, DType dt, LLVMValueRef *p, LLVMValueRef i)
{
	LLVMValueRef v = cg_synth_value(f, dt, p, i);
	int bits = dtype_bits(dt);

	if (dt == DT_F32)
		return LLVMBuildBitCast(f->B, v, f->ti32, "");
	if (!cg_dt_isint(dt))
		v = LLVMBuildZExt(f->B, cg_f32_to_bits(f, v, dt), f->ti32, "");
	else
		v = LLVMBuildTrunc(f->B, v, f->ti32, "");
	return bits < 32 ? cg_and(f, v, (int64_t)((1u << bits) - 1)) : v;
}

CgFn *
cg_synth_begin(CgModule *m, const char *name, LLVMValueRef *a, Diag *d)
{
	static const CgParam p[] = {
		{CGP_PTR, "out"}, {CGP_U64, "seed"}, {CGP_U64, "namehash"},
		{CGP_F32, "mean"}, {CGP_F32, "scale"}, {CGP_I64, "count"},
	};
	CgFn *f = cg_fn_begin(m, name, p, (int)NELEM(p), 256, 0, d);

	if (!f)
		return NULL;
	cg_arg_noalias(f, 0);
	for (int k = 0; k < (int)NELEM(p); k++)
		a[k] = cg_arg(f, k);
	return f;
}

LLVMValueRef
cg_synth_loop(CgFn *f, CgLoop *l, LLVMValueRef units)
{
	LLVMValueRef gid = cg_add(f, cg_muli(f, cg_sext64(f, cg_ctaid(f, 0)), 256), cg_sext64(f, cg_tid(f, 0)));
	LLVMValueRef stride = cg_muli(f, cg_sext64(f, cg_nctaid(f, 0)), 256);

	return cg_loop(f, l, gid, units, stride);
}

int
cg_synth_end(CgFn *f, const char *note)
{
	int block[3] = {256, 1, 1};
	CgExpr grid[3] = {CG_EXPR_INT(1024), CG_EXPR_INT(1), CG_EXPR_INT(1)};

	return cg_fn_end(f, block, grid, 0, note);
}

int
cg_emit_synth(CgModule *m, const char *name, DType dt, Diag *d)
{
	return cg_emit_synth_rows(m, name, dt, 0, 0, 0, 0, d);
}

/* ir_synth_index: the generated weight's element that element i repeats. */
static LLVMValueRef
synth_index(CgFn *f, LLVMValueRef i, int64_t rb, int64_t cr, int64_t rows, int64_t cols)
{
	int64_t gcols = cr > 1 ? cols / cr : cols;	/* the generated weight's last dim */

	if (cr > 1)	/* i / cols * gcols + i % cols / cr */
		i = LLVMBuildAdd(f->B, cg_muli(f, LLVMBuildUDiv(f->B, i, cg_i64(f, cols), ""), gcols),
				 LLVMBuildUDiv(f->B, cg_urem(f, i, cg_i64(f, cols)), cg_i64(f, cr), ""), "");
	if (rb > 1) {	/* i - (i / gcols % rows % rb) gcols */
		LLVMValueRef r = cg_urem(f, cg_urem(f, LLVMBuildUDiv(f->B, i, cg_i64(f, gcols), ""),
						    cg_i64(f, rows)), cg_i64(f, rb));
		i = LLVMBuildSub(f->B, i, cg_muli(f, r, gcols), "");
	}
	return i;
}

int
cg_emit_synth_rows(CgModule *m, const char *name, DType dt, int64_t rb, int64_t cr, int64_t rows, int64_t cols,
		   Diag *d)
{
	int packed = dtype_is_packed(dt);
	LLVMValueRef a[6], units, i;
	char note[64];
	CgLoop l;
	CgFn *f;

	if ((unsigned)dt >= NDTYPE)
		return diag_error(d, LOC_NONE, "synth: no synthetic weights of type %s", dtype_name(dt));
	if ((rb > 1 || cr > 1) && (packed || rows <= 0 || cols <= 0 || cols % (cr > 1 ? cr : 1)))
		return diag_error(d, LOC_NONE, "synth: rows repeated in blocks of %lld, columns %lld times, "
				  "need an unpacked [.., rows, cols] weight (not %s, %lld x %lld)", (long long)rb,
				  (long long)cr, dtype_name(dt), (long long)rows, (long long)cols);
	if (!(f = cg_synth_begin(m, name, a, d)))
		return -1;
	units = packed ? cg_shr(f, cg_addi(f, a[5], 1), 1) : a[5];
	i = cg_synth_loop(f, &l, units);
	if (packed) {
		/* one byte: elements 2i (low nibble) and 2i+1 (high, 0 past the end) */
		LLVMValueRef lo = cg_synth_bits(f, dt, a, cg_shl(f, i, 1));
		LLVMValueRef j = cg_addi(f, cg_shl(f, i, 1), 1);
		LLVMValueRef hi = cg_select(f, cg_lt(f, j, a[5]), cg_synth_bits(f, dt, a, j), cg_i32(f, 0));
		LLVMValueRef b = LLVMBuildOr(f->B, lo, cg_shl(f, hi, 4), "");
		cg_gstore(f, LLVMBuildTrunc(f->B, b, f->ti8, ""), cg_gep(f, a[0], i, 1), 1);
	} else if (rb > 1 || cr > 1) {
		cg_store_dt(f, dt, a[0], i, cg_synth_value(f, dt, a, synth_index(f, i, rb, cr, rows, cols)));
	} else {
		cg_store_dt(f, dt, a[0], i, cg_synth_value(f, dt, a, i));
	}
	cg_endloop(f, &l);
	snprintf(note, sizeof note, "synth %s", dtype_name(dt));
	return cg_synth_end(f, note);
}
