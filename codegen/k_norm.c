/*
 * k_norm.c — a block's RMSNorm row kernels as one launch, a warp a row.
 *
 *	before (prefill, Qwen3-30B-A3B; DeepSeek-V3 the same with a cast to f32)
 *	  h = rms_norm(x, gamma)   row kernel, a CTA of 256 a row, 2-byte loads,
 *	                           a tree of 8 barriers
 *	  rstd = rstd(x)           the same again (the norm folded into gate|up)
 *	after
 *	  norm<<<cdiv(T,4), 128>>> warp w of CTA c takes row 4c + w:
 *	    lane L (u = 31 - L) loads the row's 8-element groups u, u+32, ...
 *	    (16 bytes each), sums their squares into 8 partials, combines the
 *	    lanes with shfl.up, then stores h (16 bytes a group) and rstd
 *
 * The same bits as the row kernels: their thread t (of 256) sums members
 * t, t+256, ... in order and a tree combines s[t] += s[t+128], s[t+64], ...
 * s[t+1].  Lane L's group u + 32m holds members 256m + 8u + j, so its
 * partial j is thread 8u + j's sum, in the same order; the tree's levels
 * 128..8 pair lanes u and u + 16..1 (shfl.up by 16..1 with u = 31 - L, so
 * the root, u = 0, is lane 31), levels 4..1 a lane's own partials.  1/rms =
 * 1 / sqrt(ss / H + eps) in f32 and h = x * (1/rms) * gamma rounded to the
 * norm's type and then its cast's, as the row kernel's walker does.
 * Rows of up to 32 groups a lane (H <= 8192 for 2-byte x) stay in registers
 * between the two passes; longer ones are read again (from L1/L2).
 *
 * With a quantisation (qgroup, DeepSeek-V3 FP8's activations: h ->
 * quantize_dynamic group=128 -> dequantize, one row kernel of four results
 * that the body kernels ran as a CTA a row at ~350 GB/s): a group of 128
 * columns is 16 lanes' 8 values of one batch slot, so its amax is a
 * shfl.up max-scan over the 16 lanes (lane 15 / 31 ends with it) handed
 * to the others through shared memory; then each lane quantises its 8
 * values (8 bytes), the group's first lane stores the scale, and q * scale
 * is stored rounded (the same arithmetic as the body kernels: epilogue.c's
 * cg_quant_emit_scale and cg_quant_emit).
 */
#define CG_INTERNAL
#include <string.h>

#include "codegen.h"

#define WARPS 4		/* rows per CTA */
#define LV 8		/* elements a group: 16 bytes of bf16/f16 */
#define TREE 256	/* the row kernel's threads, whose order is matched */
#define KEEP_REGS 32	/* registers a lane may spend keeping its groups (more: spills) */
#define BATCH 8		/* groups a lane loads before it uses any (long rows) */
#define QBATCH 4	/* ... of the outputs when they are quantised (registers) */
#define OBATCH 2	/* groups a lane stores at a time with x kept and gamma in shared memory */
#define KEEP_MULTI 128	/* registers a lane may keep with several rows a warp (its kept row, or two) */
#define GAMMA_SMEM 32768	/* gamma's bytes that may go to shared memory once a CTA */

static int
io_float(DType t)
{
	return t == DT_F32 || t == DT_BF16 || t == DT_F16;
}

int
cg_norm_check(const CgNormSpec *s, Diag *d)
{
	if (s->H < 64 || s->H > (1 << 20) || s->H % LV)
		return diag_error(d, LOC_NONE, "norm: row length %lld (needs a multiple of %d in 64..2^20)",
				  (long long)s->H, LV);
	if (!s->norm && !s->rstd)
		return diag_error(d, LOC_NONE, "norm: neither the norm nor rstd asked for");
	if (!io_float(s->x_dt) || (s->norm && (!io_float(s->gamma_dt) || !io_float(s->h_dt) ||
					       !io_float(s->hout_dt))))
		return diag_error(d, LOC_NONE, "norm: x %s (needs f32, bf16 or f16, as gamma and h)",
				  dtype_name(s->x_dt));
	if (s->qgroup && (!s->norm || s->qgroup < LV || s->qgroup > 32 * LV || (s->qgroup & (s->qgroup - 1)) ||
			  s->H % s->qgroup || s->q_dt != DT_F8E4M3 || (s->dq_out && !io_float(s->dq_dt)) ||
			  !(s->q_out || s->qs_out || s->dq_out)))
		return diag_error(d, LOC_NONE, "norm: a quantisation per %d columns of rows of %lld to %s (needs "
				  "the norm, groups of 8..256 a power of 2 dividing the row, f8e4m3, an output)",
				  s->qgroup, (long long)s->H, dtype_name(s->q_dt));
	if (s->norm && s->no_h && !s->qgroup)
		return diag_error(d, LOC_NONE, "norm: the norm stores nothing");
	if (s->rows.a < 0 || s->rows.b < 0 || s->rows.div != 0 || s->rows.a > INT32_MAX ||
	    s->rows.b > INT32_MAX)
		return diag_error(d, LOC_NONE, "norm: rows %lld*T+%lld", (long long)s->rows.a,
				  (long long)s->rows.b);
	return 0;
}

typedef struct Nm Nm;
struct Nm {
	CgFn *f;
	const CgNormSpec *s;
	LLVMValueRef x, gamma, h, rstd, T;
	LLVMValueRef q, qs, dq;		/* the quantisation's results */
	LLVMValueRef lane, u, row, live;	/* row: the warp's (clamped); live: row < rows */
	LLVMValueRef rows, gwarp, nwarps;	/* several rows a warp: rows gwarp + i * nwarps */
	int M;				/* groups a lane: cdiv(H / 8, 32) */
	int keep;			/* the row stays in registers between the passes */
	int gsm;			/* gamma's offset in shared memory (bytes), -1: read from global */
};

/* Group u + 32m: its first element's index in the row (i64) and whether the row has it. */
static LLVMValueRef
group(Nm *n, LLVMValueRef m, LLVMValueRef *valid)
{
	CgFn *f = n->f;
	int64_t Q = n->s->H / LV;
	LLVMValueRef q = cg_add(f, n->u, cg_muli(f, m, 32));

	*valid = Q % 32 ? cg_lt(f, q, cg_i32(f, Q)) : LLVMConstInt(f->ti1, 1, 0);
	return cg_sext64(f, cg_muli(f, cg_min(f, q, cg_i32(f, Q - 1)), LV));
}

/* 8 elements of dt at base[at..at+7] (16-byte aligned), as loaded. */
static LLVMValueRef
load8(CgFn *f, DType dt, LLVMValueRef base, LLVMValueRef at)
{
	int es = dtype_bits(dt) / 8;

	return cg_gload(f, LLVMVectorType(cg_raw_type(f, dt), LV), cg_gep(f, base, at, es), 16);
}

/* ... as f32 (bf16: a 32-bit word's two halves by a shift and a mask, not
 * each half extracted, widened and shifted) */
static void
f32x8(CgFn *f, DType dt, LLVMValueRef v, LLVMValueRef *out)
{
	LLVMBuilderRef B = f->B;

	if (dt == DT_BF16) {
		LLVMValueRef w = LLVMBuildBitCast(B, v, LLVMVectorType(f->ti32, LV / 2), "");
		for (int j = 0; j < LV; j += 2) {
			LLVMValueRef e = LLVMBuildExtractElement(B, w, cg_i32(f, j / 2), "");
			out[j] = LLVMBuildBitCast(B, cg_shl(f, e, 16), f->tf32, "");
			out[j + 1] = LLVMBuildBitCast(B, cg_and(f, e, (int32_t)0xffff0000u), f->tf32, "");
		}
		return;
	}
	for (int j = 0; j < LV; j++)
		out[j] = cg_to_f32(f, LLVMBuildExtractElement(B, v, cg_i32(f, j), ""), dt);
}

/* The bits of v, a value of dt (rounded to it already: exact, no rounding code). */
static LLVMValueRef
exact_bits(CgFn *f, LLVMValueRef v, DType dt)
{
	if (dt == DT_BF16)
		return LLVMBuildTrunc(f->B, cg_shr(f, LLVMBuildBitCast(f->B, v, f->ti32, ""), 16), f->ti16, "");
	return cg_f32_to_bits(f, v, dt);
}

/* 8 values of dt (rounded to it) to base[at..at+7]. */
static void
store8(CgFn *f, DType dt, LLVMValueRef base, LLVMValueRef at, LLVMValueRef *v)
{
	int es = dtype_bits(dt) / 8;
	LLVMTypeRef et = dt == DT_F32 ? f->tf32 : f->ti16;
	LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(et, LV));

	for (int j = 0; j < LV; j++)
		vec = LLVMBuildInsertElement(f->B, vec, dt == DT_F32 ? v[j] : exact_bits(f, v[j], dt),
					     cg_i32(f, j), "");
	cg_gstore(f, vec, cg_gep(f, base, at, es), 16);
}

static LLVMValueRef
row_at(Nm *n, LLVMValueRef at)
{
	return cg_add(n->f, cg_muli(n->f, cg_sext64(n->f, n->row), n->s->H), at);
}

/* Pass 1 over groups m0..m0+cnt-1: partial j += x_j^2 (the row kernel's
 * (x - 0)^2, added to its accumulator); the groups as loaded kept in xs
 * when asked. */
static void
squares(Nm *n, LLVMValueRef m0, int cnt, LLVMValueRef *part, LLVMValueRef *xs, LLVMValueRef *pre)
{
	CgFn *f = n->f;
	LLVMBuilderRef B = f->B;
	LLVMValueRef raw[BATCH], ok[BATCH], xv[LV], at;

	for (int g = 0; g < cnt; g++) {
		at = group(n, cg_addi(f, m0, g), &ok[g]);
		raw[g] = pre ? pre[g] : load8(f, n->s->x_dt, n->x, row_at(n, at));
	}
	for (int g = 0; g < cnt; g++) {
		f32x8(f, n->s->x_dt, raw[g], xv);
		for (int j = 0; j < LV; j++) {
			LLVMValueRef d = LLVMBuildFSub(B, xv[j], cg_f32(f, 0), "");
			LLVMValueRef s = LLVMBuildFAdd(B, part[j], LLVMBuildFMul(B, d, d, ""), "");
			part[j] = cg_select(f, ok[g], s, part[j]);
		}
		if (xs)
			xs[g] = raw[g];
	}
}

/* max(a, b) of b >= 0 (not NaN) and a >= 0 or NaN: a NaN is never taken, as
 * fcmp ogt's select takes none, in one max.f32 instead of a compare and a
 * select */
static LLVMValueRef
maxnum(CgFn *f, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef x[2] = {a, b};

	return cg_intrinsic(f, "llvm.maxnum", f->tf32, &f->tf32, 1, x, 2);
}

/* The amax of each of the cnt groups' qgroup columns (ok: the group is in
 * the row; else 0), in every lane of the quantisation group: a shfl.up
 * max-scan over its L = qgroup / 8 lanes (an aligned block of the warp,
 * whose last lane ends with the maximum), handed to the block's lanes
 * through the warp's slots in shared memory (after the warp's barrier
 * word: BATCH x 32 floats a warp).  NaN is never taken (fcmp ogt), as
 * the interpreter's fmax. */
static void
group_amax(Nm *n, int cnt, LLVMValueRef *ok, LLVMValueRef (*y)[LV], LLVMValueRef *amax)
{
	CgFn *f = n->f;
	LLVMBuilderRef B = f->B;
	int L = n->s->qgroup / LV;
	LLVMValueRef warp = cg_shr(f, cg_tid(f, 0), 5), top = LLVMBuildOr(B, n->lane, cg_i32(f, L - 1), "");
	LLVMValueRef slot = cg_addi(f, cg_muli(f, warp, BATCH * 32 * 4), 4 * WARPS);

	for (int g = 0; g < cnt; g++) {
		LLVMValueRef a = cg_f32(f, 0);
		for (int j = 0; j < LV; j++)
			a = maxnum(f, cg_fabs(f, y[g][j]), a);
		amax[g] = cg_select(f, ok[g], a, cg_f32(f, 0));
	}
	for (int d = 1; d < L; d *= 2)
		for (int g = 0; g < cnt; g++) {
			LLVMValueRef o = LLVMBuildBitCast(B, cg_shfl_up(f, LLVMBuildBitCast(B, amax[g], f->ti32, ""), d),
							  f->tf32, "");
			amax[g] = maxnum(f, o, amax[g]);
		}
	for (int g = 0; g < cnt; g++)
		cg_sstore(f, amax[g], cg_sptr(f, cg_add(f, slot, cg_shl(f, cg_addi(f, n->lane, 32 * g), 2))), 4);
	cg_syncwarp(f);
	for (int g = 0; g < cnt; g++)
		amax[g] = cg_sload(f, f->tf32, cg_sptr(f, cg_add(f, slot, cg_shl(f, cg_addi(f, top, 32 * g), 2))), 4);
	cg_syncwarp(f);		/* the slots are free for the next batch */
}

/* 8 bytes to base[at..at+7] (8-byte aligned). */
static void
store8_bytes(CgFn *f, LLVMValueRef base, LLVMValueRef at, LLVMValueRef *v)
{
	LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(f->ti8, LV));

	for (int j = 0; j < LV; j++)
		vec = LLVMBuildInsertElement(f->B, vec, v[j], cg_i32(f, j), "");
	cg_gstore(f, vec, cg_gep(f, base, at, 1), 8);
}

/* Group g's quantisation (its 8 values y, the group's scale sc) stored:
 * q, the scale (by the quantisation group's first lane), q * scale. */
static void
quant_store(Nm *n, LLVMValueRef at, LLVMValueRef *y, LLVMValueRef sc)
{
	CgFn *f = n->f;
	const CgNormSpec *s = n->s;
	CgQuant qz = {.kind = CG_QUANT_GROUP, .in_dt = DT_F32, .group = s->qgroup};
	LLVMValueRef q[LV], dq[LV], at_row = row_at(n, at);
	CgIf c;

	cg_quant_emit_v(f, &qz, s->q_dt, y, LV, sc, NULL, q);
	if (s->dq_out) {
		cg_f8_to_f32_v(f, s->q_dt, q, LV, dq);
		for (int j = 0; j < LV; j++)
			dq[j] = cg_round_cvt(f, LLVMBuildFMul(f->B, dq[j], sc, ""), s->dq_dt);
	}
	if (s->q_out)
		store8_bytes(f, n->q, at_row, q);
	if (s->dq_out)
		store8(f, s->dq_dt, n->dq, at_row, dq);
	if (!s->qs_out)
		return;
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, LLVMBuildTrunc(f->B, cg_and(f, at, s->qgroup - 1), f->ti32, ""),
				   cg_i32(f, 0), ""));
	cg_gstore(f, sc, cg_gep(f, n->qs, cg_add(f, cg_muli(f, cg_sext64(f, n->row), s->H / s->qgroup),
						     LLVMBuildSDiv(f->B, at, LLVMConstInt(f->ti64, s->qgroup, 0), "")), 4), 4);
	cg_endif(f, &c);
}

/* gamma[at..at+7] from its copy in shared memory. */
static LLVMValueRef
gamma_smem(Nm *n, LLVMValueRef at)
{
	CgFn *f = n->f;
	LLVMValueRef off = cg_muli(f, LLVMBuildTrunc(f->B, at, f->ti32, ""), dtype_bits(n->s->gamma_dt) / 8);

	return cg_sload(f, LLVMVectorType(cg_raw_type(f, n->s->gamma_dt), LV), cg_sptr(f, cg_addi(f, off, n->gsm)), 16);
}

/* Pass 2 over groups m0..m0+cnt-1: h = x * inv * gamma, rounded, stored
 * (and its quantisation). */
static void
outputs(Nm *n, LLVMValueRef m0, int cnt, LLVMValueRef inv, LLVMValueRef *xs)
{
	CgFn *f = n->f;
	LLVMBuilderRef B = f->B;
	const CgNormSpec *s = n->s;
	LLVMValueRef xr[BATCH], gr[BATCH], ok[BATCH], at[BATCH], xv[LV], gv[LV], y[BATCH][LV], amax[BATCH];
	LLVMValueRef yq[BATCH][LV];	/* what the quantisation reads: y, or y before the cast */
	CgIf c;

	if (s->qgroup && cnt > QBATCH) {	/* the values wait for their scales: fewer at a time */
		for (int g = 0; g < cnt; g += QBATCH)
			outputs(n, cg_addi(f, m0, g), MIN(QBATCH, cnt - g), inv, xs ? xs + g : NULL);
		return;
	}
	if (n->gsm >= 0)	/* a fence for ptxas: else it hoists every batch's shared loads (a row of registers) */
		cg_syncwarp(f);
	for (int g = 0; g < cnt; g++) {
		at[g] = group(n, cg_addi(f, m0, g), &ok[g]);
		xr[g] = xs ? xs[g] : load8(f, s->x_dt, n->x, row_at(n, at[g]));
		gr[g] = n->gsm < 0 ? load8(f, s->gamma_dt, n->gamma, at[g]) : gamma_smem(n, at[g]);
	}
	for (int g = 0; g < cnt; g++) {
		f32x8(f, s->x_dt, xr[g], xv);
		f32x8(f, s->gamma_dt, gr[g], gv);
		for (int j = 0; j < LV; j++) {
			y[g][j] = LLVMBuildFMul(B, LLVMBuildFMul(B, xv[j], inv, ""), gv[j], "");
			yq[g][j] = cg_round_cvt(f, y[g][j], s->h_dt);
			y[g][j] = s->hout_dt == s->h_dt ? yq[g][j] : cg_round_cvt(f, yq[g][j], s->hout_dt);
			if (!s->q_pre)
				yq[g][j] = y[g][j];
		}
	}
	if (s->qgroup)
		group_amax(n, cnt, ok, yq, amax);
	for (int g = 0; g < cnt; g++) {
		cg_if(f, &c, LLVMBuildAnd(B, n->live, ok[g], ""));
		if (!s->no_h)
			store8(f, s->hout_dt, n->h, row_at(n, at[g]), y[g]);
		if (s->qgroup)
			quant_store(n, at[g], yq[g], cg_quant_emit_scale(f, s->q_dt, amax[g]));
		cg_endif(f, &c);
	}
}

/* The tree's levels 128..8 across lanes (shfl.up: lane u gets lane u + d's
 * partials, u = 31 - lane), then 4..1 within lane 31's: the row's sum. */
static LLVMValueRef
tree(Nm *n, LLVMValueRef *p)
{
	CgFn *f = n->f;
	LLVMBuilderRef B = f->B;

	for (int d = 16; d >= 1; d /= 2)
		for (int j = 0; j < LV; j++) {
			LLVMValueRef o = cg_shfl_up(f, LLVMBuildBitCast(B, p[j], f->ti32, ""), d);
			p[j] = LLVMBuildFAdd(B, p[j], LLVMBuildBitCast(B, o, f->tf32, ""), "");
		}
	for (int s = LV / 2; s >= 1; s /= 2)
		for (int j = 0; j < s; j++)
			p[j] = LLVMBuildFAdd(B, p[j], p[j + s], "");
	return p[0];
}

static void
body(Nm *n, LLVMValueRef *pre)
{
	CgFn *f = n->f;
	LLVMBuilderRef B = f->B;
	const CgNormSpec *s = n->s;
	LLVMValueRef part[LV], xs[32], ss, inv, bc;
	CgIf c;

	for (int j = 0; j < LV; j++)
		part[j] = cg_f32(f, 0);
	if (n->keep) {
		for (int m = 0; m < n->M; m += BATCH)
			squares(n, cg_i32(f, m), MIN(BATCH, n->M - m), part, &xs[m], pre ? &pre[m] : NULL);
	} else {	/* a loop of BATCH groups, then the rest */
		LLVMValueRef var[LV], m;
		CgLoop l;
		int full = n->M / BATCH * BATCH;
		for (int j = 0; j < LV; j++)
			var[j] = cg_var(f, f->tf32, part[j]);
		m = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, full), cg_i32(f, BATCH));
		for (int j = 0; j < LV; j++)
			part[j] = cg_get(f, var[j]);
		squares(n, m, BATCH, part, NULL, NULL);
		for (int j = 0; j < LV; j++)
			cg_set(f, var[j], part[j]);
		cg_endloop(f, &l);
		for (int j = 0; j < LV; j++)
			part[j] = cg_get(f, var[j]);
		if (n->M > full)
			squares(n, cg_i32(f, full), n->M - full, part, NULL, NULL);
	}
	ss = tree(n, part);
	if (s->bcast || s->rows_warp > 1) {	/* lane 31 has the sum: to the warp by shuffles, no warp waits for another */
		ss = cg_bcast31(f, ss);
	} else {		/* ... through shared memory and a CTA barrier */
		bc = cg_sptr(f, cg_muli(f, cg_shr(f, cg_tid(f, 0), 5), 4));
		cg_if(f, &c, LLVMBuildICmp(B, LLVMIntEQ, n->lane, cg_i32(f, 31), ""));
		cg_sstore(f, ss, bc, 4);
		cg_endif(f, &c);
		cg_barrier(f);
		ss = cg_sload(f, f->tf32, bc, 4);
	}
	ss = LLVMBuildFDiv(B, ss, cg_f32(f, (double)s->H), "");
	if (s->rstd) {
		cg_if(f, &c, LLVMBuildAnd(B, n->live, LLVMBuildICmp(B, LLVMIntEQ, n->lane, cg_i32(f, 31), ""), ""));
		cg_gstore(f, cg_inv_std(f, ss, s->rstd_eps), cg_gep(f, n->rstd, cg_sext64(f, n->row), 4), 4);
		cg_endif(f, &c);
	}
	if (!s->norm)
		return;
	inv = cg_inv_std(f, ss, s->eps);
	if (n->keep) {
		int ob = n->gsm >= 0 ? OBATCH : BATCH;	/* shared gamma: little latency to cover */
		for (int m = 0; m < n->M; m += ob)
			outputs(n, cg_i32(f, m), MIN(ob, n->M - m), inv, &xs[m]);
	} else {
		CgLoop l;
		int full = n->M / BATCH * BATCH;
		LLVMValueRef m = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, full), cg_i32(f, BATCH));
		outputs(n, m, BATCH, inv, NULL);
		cg_endloop(f, &l);
		if (n->M > full)
			outputs(n, cg_i32(f, full), n->M - full, inv, NULL);
	}
}

/* Row r, clamped below rows (past it: loaded, not stored where live says so): n->row and n->live. */
static void
set_row(Nm *n, LLVMValueRef r, LLVMValueRef live)
{
	CgFn *f = n->f;

	n->live = live;
	n->row = cg_max(f, cg_min(f, r, cg_addi(f, n->rows, -1)), cg_i32(f, 0));
}

/* The kept row's M groups, loaded (the order squares() reads them in). */
static void
load_row(Nm *n, LLVMValueRef *xs)
{
	LLVMValueRef ok;

	for (int m = 0; m < n->M; m++)
		xs[m] = load8(n->f, n->s->x_dt, n->x, row_at(n, group(n, cg_i32(n->f, m), &ok)));
}

/* ... into the variables var[] (the loop's carried row). */
static void
load_into(Nm *n, LLVMValueRef *var)
{
	LLVMValueRef xs[32];

	load_row(n, xs);
	for (int m = 0; m < n->M; m++)
		cg_set(n->f, var[m], LLVMBuildBitCast(n->f->B, xs[m], LLVMGetAllocatedType(var[m]), ""));
}

/* gamma to shared memory once a CTA, 16 bytes a thread a step, then a barrier. */
static void
gamma_copy(Nm *n)
{
	CgFn *f = n->f;
	int64_t chunks = n->s->H * (dtype_bits(n->s->gamma_dt) / 8) / 16;
	LLVMTypeRef v4 = LLVMVectorType(f->ti32, 4);
	LLVMValueRef c, v;
	CgLoop l;

	c = cg_loop(f, &l, cg_tid(f, 0), cg_i32(f, (int)chunks), cg_i32(f, 32 * WARPS));
	v = cg_gload(f, v4, cg_gep(f, n->gamma, cg_sext64(f, c), 16), 16);
	cg_sstore(f, v, cg_sptr(f, cg_addi(f, cg_shl(f, c, 4), n->gsm)), 16);
	cg_endloop(f, &l);
	cg_barrier(f);
}

/*
 * Several rows a warp (rows_warp R > 1; the grid cdiv(rows, 4R)): warp g of
 * G takes rows g, g + G, ... below rows (at most R), a loop whose trip
 * count is known at run time only (unrolled, ptxas would hoist every row's
 * loads to the top: 255 registers and spills).  gamma is copied to shared
 * memory once a CTA (its loads then hit shared memory, not L1/L2 a row).  The
 * row (two rows fit the registers: cg_emit_norm takes R = 1 otherwise) is
 * carried into the loop from the iteration before, which issued its loads
 * before its own row's sums, so that a warp keeps a row in flight while it
 * reduces and stores the other.
 */
static void
rows_body(Nm *n)
{
	CgFn *f = n->f;
	LLVMValueRef var[32], cur[32], r, next, live = LLVMConstInt(f->ti1, 1, 0);	/* body(): rows below rows */
	LLVMTypeRef xt = LLVMVectorType(cg_raw_type(f, n->s->x_dt), LV);
	LLVMTypeRef vt = LLVMVectorType(f->ti32, LV * dtype_bits(n->s->x_dt) / 32);	/* 16-bit lanes would be split */
	CgLoop l;

	set_row(n, n->gwarp, live);	/* the first row's loads before the copy's barrier */
	load_row(n, cur);
	for (int m = 0; m < n->M; m++)
		var[m] = cg_var(f, vt, LLVMBuildBitCast(f->B, cur[m], vt, ""));
	if (n->gsm >= 0)
		gamma_copy(n);
	r = cg_loop(f, &l, n->gwarp, n->rows, n->nwarps);
	next = cg_add(f, r, n->nwarps);
	for (int m = 0; m < n->M; m++)
		cur[m] = LLVMBuildBitCast(f->B, cg_get(f, var[m]), xt, "");
	set_row(n, next, live);	/* clamped past the end: the last row again, not stored */
	load_into(n, var);
	set_row(n, r, live);
	body(n, cur);
	cg_endloop(f, &l);
}

int
cg_emit_norm(CgModule *m, const char *name, const CgNormSpec *s, Diag *d)
{
	CgParam par[8];
	LLVMValueRef *slot[8], rows, warp;
	int np = 0, block[3] = {32 * WARPS, 1, 1}, R, regs, smem;
	CgExpr grid[3] = {{s->rows.a, s->rows.b, WARPS}, CG_EXPR_INT(1), CG_EXPR_INT(1)};
	char note[200];
	Nm n;

	memset(&n, 0, sizeof n);
	if (cg_norm_check(s, d) < 0)
		return -1;
	n.s = s;
	n.M = (int)((s->H / LV + 31) / 32);
	regs = n.M * LV * dtype_bits(s->x_dt) / 32;
	/* several rows a warp only where two rows fit the registers (kept, the next
	 * one's loads ahead): ptxas hoists the next row's .nc loads above this
	 * row's stores whatever the order (DeepSeek-V3's 7168 kept alone spilled),
	 * and rows read twice want the CTAs of a row a warp in flight */
	R = s->rows_warp > 1 && n.M <= 32 && 2 * regs <= KEEP_MULTI ? s->rows_warp : 1;
	grid[0].div = WARPS * R;
	n.keep = n.M <= 32 && (R > 1 || regs <= KEEP_REGS);
	smem = 4 * WARPS + (s->qgroup ? WARPS * BATCH * 32 * 4 : 0);
	n.gsm = -1;
	if (R > 1 && s->norm && s->H * dtype_bits(s->gamma_dt) / 8 <= GAMMA_SMEM) {
		n.gsm = (smem + 15) / 16 * 16;
		smem = n.gsm + (int)(s->H * dtype_bits(s->gamma_dt) / 8);
	}
#define P(kind, role, field) (slot[np] = &n.field, par[np++] = (CgParam){kind, role})
	P(CGP_PTR, "x", x);
	if (s->norm) {
		P(CGP_PTR, "gamma", gamma);
		if (!s->no_h)
			P(CGP_PTR, "h", h);
	}
	if (s->qgroup && s->q_out)
		P(CGP_PTR, "q", q);
	if (s->qgroup && s->qs_out)
		P(CGP_PTR, "q_scale", qs);
	if (s->qgroup && s->dq_out)
		P(CGP_PTR, "dq", dq);
	if (s->rstd)
		P(CGP_PTR, "rstd", rstd);
	P(CGP_I32, "T", T);
#undef P
	/* a quantising norm: a launch bound of 1 CTA an SM, else ptxas may cap
	 * it at 128 registers and spill (DeepSeek-V3's layer 0, 7168 read
	 * twice: 44 bytes at 128, none at 135; its layer 3's took 150 unasked) */
	n.f = cg_fn_begin(m, name, par, np, 32 * WARPS, s->qgroup ? 1 : 0, d);
	if (!n.f)
		return -1;
	for (int i = 0; i < np; i++) {
		*slot[i] = cg_arg(n.f, i);
		if (i < np - 1)
			cg_arg_noalias(n.f, i);
	}
	rows = cg_addi(n.f, cg_muli(n.f, n.T, s->rows.a), s->rows.b);
	n.lane = cg_and(n.f, cg_tid(n.f, 0), 31);
	n.u = cg_sub(n.f, cg_i32(n.f, 31), n.lane);
	warp = cg_add(n.f, cg_muli(n.f, cg_ctaid(n.f, 0), WARPS), cg_shr(n.f, cg_tid(n.f, 0), 5));
	n.rows = rows;
	if (R > 1) {
		n.gwarp = warp;
		n.nwarps = cg_muli(n.f, cg_nctaid(n.f, 0), WARPS);
		rows_body(&n);
	} else {
		set_row(&n, warp, cg_lt(n.f, warp, rows));
		body(&n, NULL);
	}
	snprintf(note, sizeof note, "norm H=%lld %s%s%s%s, %s%s%s%s", (long long)s->H,
		 dtype_name(s->x_dt), s->norm ? " rms_norm" : "", s->rstd ? " rstd" : "",
		 s->qgroup ? " quantised per group" : "", R > 1 ? "rows a warp" : "a warp a row",
		 n.keep ? ", kept in registers" : "", R > 1 ? ", the next row's loads ahead" : "",
		 n.gsm >= 0 ? ", gamma in shared memory" : s->bcast ? ", sums by shuffles" : "");
	return cg_fn_end(n.f, block, grid, smem, note);
}

/* --- which row kernels it replaces ------------------------------------------- */

static int
last_axis(const Node *n)
{
	int64_t ax = ir_attr_int(n, "axis", -1);

	return ax == -1 || ax == n->in[0]->type.rank - 1;
}

const Node *
cg_row_op(const Node *call, Op op, int64_t H)
{
	const Node *n;

	if (!call || call->op != OP_CALL || ir_kernel_template(call->callee) != IR_TMPL_ROW_REDUCE ||
	    !(n = cg_only_node(call->callee, op)) || n->out[0]->type.rank != 2 ||
	    cg_param_index(call->callee, n->in[0]) != 0 || n->in[0]->type.rank != 2 ||
	    (H >= 0 && n->in[0]->type.dim[1] != H) || !last_axis(n))
		return NULL;
	return n;
}

/* Node x of kernel k as the norm rms_norm(p0, p1) over the last axis of
 * rows of static H: 1 with the spec's norm fields set. */
static int
norm_node(const Graph *k, const Node *x, CgNormSpec *s)
{
	const Type *t = x->nin == 2 ? &x->in[1]->type : NULL, *xt = &x->in[0]->type;

	if (x->op != OP_RMS_NORM || !t || cg_param_index(k, x->in[0]) != 0 || cg_param_index(k, x->in[1]) != 1 ||
	    xt->rank != 2 || !ir_dim_is_static(xt->dim[1]) || !last_axis(x) || t->rank != 1 ||
	    t->dim[0] != xt->dim[1] || !io_float(t->dt) || !io_float(xt->dt) || !io_float(x->out[0]->type.dt))
		return 0;
	s->H = xt->dim[1];
	s->x_dt = xt->dt;
	s->eps = ir_attr_float(x, "eps", 1e-5);
	s->gamma_dt = t->dt;
	s->h_dt = s->hout_dt = x->out[0]->type.dt;
	return 1;
}

/* The norm's nodes from the first non-constant one: rms_norm [-> one cast];
 * its value in *v, the node after them returned (NULL: the end). */
static const Node *
norm_head(const Graph *k, CgNormSpec *s, const Value **v, int *ok)
{
	const Node *x = k->first;

	while (x && x->op == OP_CONST)
		x = x->next;
	*ok = x && norm_node(k, x, s);
	if (!*ok)
		return NULL;
	*v = x->out[0];
	for (x = x->next; x && x->op == OP_CONST; x = x->next)
		;
	if (x && x->op == OP_CAST && x->in[0] == *v && io_float(x->out[0]->type.dt)) {
		*v = x->out[0];
		s->hout_dt = (*v)->type.dt;
		for (x = x->next; x && x->op == OP_CONST; x = x->next)
			;
	}
	return x;
}

int
cg_norm_body(const Node *call, CgNormSpec *s)
{
	const Graph *k = call->callee;
	const Value *v = NULL;
	int ok;

	if (call->op != OP_CALL || ir_kernel_template(k) != IR_TMPL_ROW_REDUCE || k->nret != 1)
		return 0;
	return !norm_head(k, s, &v, &ok) && ok && k->ret[0] == v;
}

/*
 * A row kernel rms_norm(p0, p1) [-> one cast] -> quantize_dynamic group=G
 * to f8e4m3 [-> dequantize of both per G columns of a row] (DeepSeek-V3
 * FP8's norm), whose results are any of the norm's value, q, the scales
 * and the dequantized values: 1 with the spec set and the results' indices
 * in ret[] (h, q, scales, dequantized; -1: not a result), else 0.
 */
static int
norm_quant_body(const Node *call, CgNormSpec *s, int *ret)
{
	const Graph *k = call->callee;
	const Value *v = NULL, *res[4];
	const Node *x, *qd, *dq = NULL;
	const Attr *g;
	int ok, n = 0;

	if (call->op != OP_CALL || ir_kernel_template(k) != IR_TMPL_ROW_REDUCE || k->nret < 2 || k->nret > 4)
		return 0;
	qd = norm_head(k, s, &v, &ok);
	if (ok && qd && qd->op == OP_QUANTIZE_DYNAMIC && v->def->op == OP_CAST && qd->in[0] == v->def->in[0])
		s->q_pre = 1;	/* of the norm's value, not its cast's */
	if (!ok || !qd || qd->op != OP_QUANTIZE_DYNAMIC || (qd->in[0] != v && !s->q_pre) || qd->nout != 2 ||
	    qd->out[0]->type.dt != DT_F8E4M3 || !(g = ir_attr(qd, "group")) || g->kind != A_INT ||
	    g->u.i <= 0 || g->u.i > INT32_MAX)
		return 0;
	s->qgroup = (int)g->u.i;
	s->q_dt = DT_F8E4M3;
	for (x = qd->next; x && x->op == OP_CONST; x = x->next)
		;
	if (x) {
		dq = x;
		if (dq->op != OP_DEQUANTIZE || dq->in[0] != qd->out[0] || dq->nin < 2 || dq->in[1] != qd->out[1] ||
		    (dq->nin > 2 && dq->in[2]) || ir_attr_int(dq, "block_size", 0) != s->qgroup ||
		    (ir_attr_int(dq, "axis", -1) != 1 && ir_attr_int(dq, "axis", -1) != -1) ||
		    !io_float(dq->out[0]->type.dt))
			return 0;
		for (x = dq->next; x && x->op == OP_CONST; x = x->next)
			;
		if (x)
			return 0;
		s->dq_dt = dq->out[0]->type.dt;
	}
	res[0] = v;
	res[1] = qd->out[0];
	res[2] = qd->out[1];
	res[3] = dq ? dq->out[0] : NULL;
	for (int i = 0; i < 4; i++) {
		ret[i] = -1;
		for (int j = 0; j < k->nret; j++)
			if (res[i] && k->ret[j] == res[i]) {
				if (ret[i] >= 0)
					return 0;
				ret[i] = j;
				n++;
			}
	}
	if (n != k->nret)
		return 0;
	s->no_h = ret[0] < 0;
	s->q_out = ret[1] >= 0;
	s->qs_out = ret[2] >= 0;
	s->dq_out = ret[3] >= 0;
	return 1;
}

/* The norm of a row kernel, plain or quantised (the spec's fields set). */
static int
norm_any(const Node *call, CgNormSpec *s)
{
	int ret[4];

	return cg_norm_body(call, s) || (memset(s, 0, sizeof *s), norm_quant_body(call, s, ret));
}

/* An uncentred rstd row kernel of x alone, to f32. */
static const Node *
rstd_body(const Node *call)
{
	const Node *rn = call->op == OP_CALL && call->nin == 1 ? cg_row_op(call, OP_RSTD, -1) : NULL;

	if (!rn || ir_attr_int(rn, "center", 0) || rn->out[0]->type.dt != DT_F32 || call->callee->nret != 1 ||
	    call->callee->ret[0] != rn->out[0] || !ir_dim_is_static(rn->in[0]->type.dim[1]) ||
	    !io_float(rn->in[0]->type.dt))
		return NULL;
	return rn;
}

static int
why(char *buf, size_t n, const char *s)
{
	snprintf(buf, n, "%s", s);
	return 0;
}

/* Is v computed before node `first` of g (or not computed in g at all)? */
static int
ready_before(const Graph *g, const Value *v, const Node *first)
{
	const Node *n;

	if (!v || v->kind != V_RESULT)
		return 1;
	for (n = g->first; n && n != v->def && n != first; n = n->next)
		;
	return n == v->def;
}

int
cg_norm_match(const Module *m, const Node *call, int (*skip)(const void *ctx, const Node *c),
	      const void *ctx, CgNormMatch *nm, char *buf, size_t n)
{
	const Graph *g = ir_main_graph(m);
	CgNormSpec *s = &nm->s;
	CgBodySpec bs;
	const Node *rn;
	Diag quiet;

	memset(nm, 0, sizeof *nm);
	diag_init(&quiet, NULL);
	if (call->op != OP_CALL || ir_kernel_template(call->callee) != IR_TMPL_ROW_REDUCE || !g)
		return why(buf, n, "not a row kernel");
	if (call->nin == 2 && norm_any(call, s)) {
		s->norm = 1;
		nm->norm = call;
	} else if ((rn = rstd_body(call))) {
		s->rstd = 1;
		s->rstd_eps = ir_attr_float(rn, "eps", 1e-5);
		s->H = rn->in[0]->type.dim[1];
		s->x_dt = rn->in[0]->type.dt;
		nm->rstd_call = call;
	} else {
		return why(buf, n, "not rms_norm [-> cast] or rstd of one [rows,H] operand over its last axis");
	}
	nm->x = call->in[0];
	/* the other one of the same rows, after it */
	for (const Node *c = call->next; c; c = c->next) {
		CgNormSpec o;
		if (c->op != OP_CALL || c->nin < 1 || c->in[0] != nm->x || (skip && skip(ctx, c)))
			continue;
		memset(&o, 0, sizeof o);
		if (!s->norm && c->nin == 2 && norm_any(c, &o) && ready_before(g, c->in[1], call)) {
			o.rstd = s->rstd;
			o.rstd_eps = s->rstd_eps;
			*s = o;
			s->norm = 1;
			nm->norm = c;
			break;
		}
		if (!s->rstd && (rn = rstd_body(c))) {
			s->rstd = 1;
			s->rstd_eps = ir_attr_float(rn, "eps", 1e-5);
			nm->rstd_call = c;
			break;
		}
	}
	if (nm->norm) {
		int ret[4];
		nm->gamma = nm->norm->in[1];
		if (!s->qgroup) {
			nm->h = nm->norm->out[0];
		} else {	/* the call's results, as its kernel returns them */
			CgNormSpec o;
			memset(&o, 0, sizeof o);
			norm_quant_body(nm->norm, &o, ret);
			nm->h = ret[0] >= 0 ? nm->norm->out[ret[0]] : NULL;
			nm->q = ret[1] >= 0 ? nm->norm->out[ret[1]] : NULL;
			nm->qs = ret[2] >= 0 ? nm->norm->out[ret[2]] : NULL;
			nm->dq = ret[3] >= 0 ? nm->norm->out[ret[3]] : NULL;
		}
	}
	if (nm->rstd_call)
		nm->rstd_out = nm->rstd_call->out[0];
	/* rows: static, or coef * T */
	Dim r = nm->x->type.dim[0];
	if (ir_dim_is_static(r)) {
		s->rows = MEXPR_INT(r);
	} else {
		const DimExpr *e = ir_dim_expr(m, r);
		if (!e || e->coef < 1)
			return why(buf, n, "its rows are not a multiple of T");
		s->rows = MEXPR_T(e->coef);
	}
	cg_body_default(&bs);
	if (bs.threads != TREE || s->H < bs.row_min)
		return why(buf, n, "the row kernel would not sum in a 256-thread tree");
	if (cg_norm_check(s, &quiet))
		return why(buf, n, quiet.last);
	return 1;
}
