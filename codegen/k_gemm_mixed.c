/*
 * k_gemm_mixed.c — quantised B for the mma.sync GEMM (GemmSpec.bq): the
 * packed weights are copied as they are (cp.async, no dequantisation pass
 * over memory) and dequantised in registers into the mma's B fragments.
 *
 *	stage:  A (as before) | packed B | scales | zero points
 *	k-step: one 32-bit ld.shared per n8 block gives the lane its elements
 *	        (2t, 2t+1, 2t+8, 2t+9 of its column g, for 8/bits k-steps);
 *	        each (q - zero) * scale in f32, rounded to the mma type
 *
 * The layout, written once at compile time by cg_bq_pack (the bundle holds
 * it): B of each expert as [N/8][K/ka] atoms of 128 bytes, ka = 128 / bits
 * k per atom (32 for 4-bit, 16 for 8-bit types); word `lane` (g, t) =
 * (lane / 4, lane % 4) of atom (nb, kb) holds element e of k-step s of
 * column n = 8nb + g at bit 16(e & 1) + bits (2s + (e >> 1)):
 *
 *	k = ka*kb + 16s + 2t + (e & 1) + 8(e >> 1)      e = 0..3, s < 8 / bits
 *
 * which is the m16n8k16 B fragment (registers b0 = e 0,1 and b1 = e 2,3),
 * so a warp reads an atom as 32 consecutive words: no bank conflicts, no
 * shuffles; and the two halves of each register sit 16 bits apart, so one
 * shift and one mask put a pair of integers into the mantissas of a pair of
 * bf16/f16 (the fast path below).  Lane vectors (CgBQuant.vec): a lane's
 * words of vec consecutive atoms adjacent (word_off), one 8- or 16-byte load.
 * Direct B (CgBQuant.direct, decode): no stage of B; each lane holds its
 * words of a k-tile in registers and reloads each vector with the next
 * k-tile's as soon as it is dequantised (reload).  Scales and zero points as [E][K/group][N] in the scale's type:
 * a k-tile's are bn contiguous values per group, copied with the tile.
 * A format is one row of the table below: bits, and how a field becomes
 * an f32 (an integer, signed or not, or a small float's bits).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "k_gemm.h"

typedef enum { BQ_INT, BQ_UINT, BQ_FLOAT } BqKind;

typedef struct {
	DType dt;
	int bits;
	BqKind kind;		/* the field as a signed or unsigned integer, or a float's bits */
} BqFormat;

static const BqFormat formats[] = {
	{DT_I4, 4, BQ_INT},		/* GPTQ/AWQ/MatMulNBits (symmetric) */
	{DT_U4, 4, BQ_UINT},		/* with a zero point */
	{DT_I8, 8, BQ_INT},
	{DT_U8, 8, BQ_UINT},
	{DT_F8E4M3, 8, BQ_FLOAT},	/* DeepSeek-V3, FP8 per-channel */
	{DT_F8E5M2, 8, BQ_FLOAT},
	{DT_F4E2M1, 4, BQ_FLOAT},	/* MXFP4 (gpt-oss), with f8e8m0 scales */
};

/* Where element e of k-step s sits in its lane's word (the layout above). */
static int
field_bit(int bits, int s, int e)
{
	return 16 * (e & 1) + bits * (2 * s + (e >> 1));
}

/*
 * e2m1 (s.ee.m, bit 3 the sign) fields are not contiguous: field f = 2s +
 * (e >> 1) of the element in the low half puts its bits 0..3 (m, e0, e1,
 * sign) at word bits e2m1_pos[f], the high half's element at the same
 * positions plus 16 (mod 32), so that a rotation of the word (one funnel
 * shift: bits may come from the other half) and one mask place a pair as
 * the bf16 pair whose sign is bit 15 and whose exponent's low bits and
 * mantissa's top bit (bits 8..6) are ee.m (frags_e2m1): f = 0 is the mask
 * alone, f = 1 and 2 one rotation (by 4 and 10), f = 3 two (the mantissa by
 * 6, the rest by 14): 9 operations a word of 8 fields.  No tiling of a
 * 16-bit half by four translates of {6, 7, 8, 15} exists (an exhaustive
 * search), so one field needs two rotations.  Session 24's layout (bq.v1,
 * shifts within a half) took 11: its f = 3 needed three shifts.
 */
static const int e2m1_pos[4][4] = {{6, 7, 8, 15}, {2, 3, 4, 11}, {28, 29, 30, 5}, {0, 25, 26, 1}};
static const int e2m1_pos_v1[4][4] = {{6, 7, 8, 15}, {0, 1, 2, 9}, {3, 4, 5, 12}, {10, 11, 13, 14}};

/* The position of bit i of element e of k-step s in its lane's word. */
static int
bit_pos(const GemmSpec *gs, const BqFormat *fm, int s, int e, int i)
{
	if (fm->dt == DT_F4E2M1)
		return ((gs->bq.v1 ? e2m1_pos_v1 : e2m1_pos)[2 * s + (e >> 1)][i] + 16 * (e & 1)) % 32;
	return field_bit(fm->bits, s, e) + i;
}

/* The layout's lane vectors: 1 (none: session 25's) or CgBQuant.vec. */
static int
vec_of(const GemmSpec *s)
{
	return s->bq.vec > 1 ? s->bq.vec : 1;
}

/* The byte offset of atom kb's word for `lane` in its n8 block's row of
 * atoms: a lane's words of vec consecutive atoms are adjacent (one 4 * vec
 * byte load), the atoms' vectors of the 32 lanes one after another. */
static int64_t
word_off(int64_t kb, int lane, int vec)
{
	return (kb - kb % vec) * 128 + (int64_t)lane * 4 * vec + kb % vec * 4;
}

static int fast_path(const G *g, const BqFormat *fm);

static const BqFormat *
format_of(DType dt)
{
	for (size_t i = 0; i < NELEM(formats); i++)
		if (formats[i].dt == dt)
			return &formats[i];
	return NULL;
}

/* The word's bits of a field's value v (raw bits, i32): v placed at its positions. */
static LLVMValueRef
place_field(CgFn *f, const GemmSpec *gs, const BqFormat *fm, LLVMValueRef v, int s, int e)
{
	LLVMValueRef w = cg_i32(f, 0);

	if (fm->dt != DT_F4E2M1)
		return cg_shl(f, v, field_bit(fm->bits, s, e));
	for (int i = 0; i < fm->bits; i++)
		w = LLVMBuildOr(f->B, w, cg_shl(f, cg_and(f, cg_shr(f, v, i), 1), bit_pos(gs, fm, s, e, i)), "");
	return w;
}

/* The raw bits of element e of k-step s from the word w (i32). */
static LLVMValueRef
field_of(CgFn *f, const GemmSpec *gs, const BqFormat *fm, LLVMValueRef w, int s, int e)
{
	LLVMValueRef v = cg_i32(f, 0);

	if (fm->dt != DT_F4E2M1)
		return cg_and(f, cg_shr(f, w, field_bit(fm->bits, s, e)), (1 << fm->bits) - 1);
	for (int i = 0; i < fm->bits; i++)
		v = LLVMBuildOr(f->B, v, cg_shl(f, cg_and(f, cg_shr(f, w, bit_pos(gs, fm, s, e, i)), 1), i), "");
	return v;
}

int
cg_bq_format(DType dt)
{
	return format_of(dt) != NULL;
}

/* f8e8m0 (MXFP4's 2^(s-127)) is a byte: its tiles need bn and N multiples
 * of 16 (a 16-byte chunk per row of scales), which gemm_bq_check says. */
static int
scale_type(DType dt)
{
	return dt == DT_F32 || dt == DT_BF16 || dt == DT_F16 || dt == DT_F8E8M0;
}

static int
scale_bytes(DType dt)
{
	return dtype_bits(dt) / 8;
}

/* ---- sizes and checks ---- */

void
gemm_bq_layout(G *g)
{
	const GemmSpec *s = &g->k.s;
	const BqFormat *fm = format_of(s->b_dt);
	int G = s->bq.group;

	if (!fm || G <= 0 || s->bk <= 0 || !scale_type(s->bq.scale_dt))
		return;		/* gemm_bq_check says why */
	g->bq.bits = fm->bits;
	g->bq.ka = 128 / fm->bits;
	g->bq.vec = vec_of(s);
	g->bq.atoms = s->bk / g->bq.ka;
	g->bq.ssz = scale_bytes(s->bq.scale_dt);
	g->bq.ns = G >= s->bk ? 1 : s->bk / G;
	g->b_ld = s->bk * fm->bits;	/* bytes per n8 block per k-tile */
	g->bq.b_bytes = s->bq.direct ? 0 : s->bn / 8 * g->b_ld;	/* direct: B skips the stage */
	g->bq.s_bytes = g->bq.ns * s->bn * g->bq.ssz;
	g->stage = g->a_bytes + g->bq.b_bytes + g->bq.s_bytes * (s->bq.zero ? 2 : 1);
	g->bq.nchunk[0] = g->bq.b_bytes / 16;
	g->bq.nchunk[1] = g->bq.s_bytes / 16;
	g->bq.nchunk[2] = s->bq.zero ? g->bq.s_bytes / 16 : 0;
	g->bq.tx = g->stage - g->a_bytes;
	if (s->bq.bulk)		/* bulk copies, no cp.async chunks (bulk_load) */
		memset(g->bq.nchunk, 0, sizeof g->bq.nchunk);
	for (int i = 0; i < 3; i++)	/* bulk: one source a part, the tile's (at k-tile 0) */
		g->bq.nper[i] = s->bq.bulk ? (i < 2 || s->bq.zero)
			      : g->k.nthr ? (g->bq.nchunk[i] + g->k.nthr - 1) / g->k.nthr : 0;
}

int
gemm_bq_check(const G *g, Diag *d)
{
	const GemmSpec *s = &g->k.s;
	const BqFormat *fm = format_of(s->b_dt);
	int G = s->bq.group;

	if (!fm)
		return diag_error(d, LOC_NONE, "gemm: quantised B of %s (the formats: i4, u4, i8, u8, f8e4m3, f8e5m2, f4e2m1)",
				  dtype_name(s->b_dt));
	if (!scale_type(s->bq.scale_dt))
		return diag_error(d, LOC_NONE, "gemm: quantised B's scales are %s (need f32, bf16, f16 or f8e8m0)",
				  dtype_name(s->bq.scale_dt));
	if (s->mainloop != CG_MAINLOOP_MMA)
		return diag_error(d, LOC_NONE, "gemm: quantised B runs on the mma.sync mainloop only");
	if (s->bk <= 0 || s->bn <= 0 || s->N <= 0 || s->K <= 0)
		return 0;	/* the tile and size checks that follow say why */
	if (s->a_dt != DT_BF16 && s->a_dt != DT_F16)
		return diag_error(d, LOC_NONE, "gemm: quantised B needs A in bf16 or f16 (A is %s)",
				  dtype_name(s->a_dt));
	if (s->b_layout != CG_B_NK || s->ldb != s->K || s->b_group_stride != s->N * s->K)
		return diag_error(d, LOC_NONE, "gemm: quantised B is packed [N,K] (no ldb or group stride of its own)");
	if (G % 16 || s->K % G || (G % s->bk && s->bk % G))
		return diag_error(d, LOC_NONE, "gemm: quantisation groups of %d along K (need a multiple of 16 "
				  "dividing K = %lld, and bk = %d or a multiple of it)", G, (long long)s->K, s->bk);
	if (s->bk % g->bq.ka || s->N % 8)
		return diag_error(d, LOC_NONE, "gemm: %d-bit B needs bk a multiple of %d (bk = %d)",
				  fm->bits, g->bq.ka, s->bk);
	if (s->bq.vec < 0 || s->bq.vec > 4 || s->bq.vec == 3)
		return diag_error(d, LOC_NONE, "gemm: quantised B's lane vectors of %d atoms (1, 2 or 4)", s->bq.vec);
	if (s->K / g->bq.ka % g->bq.vec || g->bq.atoms % g->bq.vec)
		return diag_error(d, LOC_NONE, "gemm: quantised B's lane vectors of %d atoms need K / %d and "
				  "bk / %d multiples of %d (K = %lld, bk = %d)", g->bq.vec, g->bq.ka, g->bq.ka,
				  g->bq.vec, (long long)s->K, s->bk);
	if (s->bq.bulk && (s->bq.direct || s->sched != CG_SCHED_STREAM || s->units || s->split_k > 1 ||
			   g->bq.tx >= 1 << 20))
		return diag_error(d, LOC_NONE, "gemm: bulk copies of quantised B (bq.bulk) need static stream-K "
				  "with B staged (not direct, no split-K) and under 2^20 bytes a stage (%d)", g->bq.tx);
	if (s->bq.bulk == CG_QBULK_TMA && (g->b_ld / 4 > 256 || s->bn > 256 || g->bq.ns > 256 || g->a_bytes % 128 ||
					   g->bq.b_bytes % 128 || g->bq.s_bytes % 128))
		return diag_error(d, LOC_NONE, "gemm: tensor copies of quantised B need boxes of at most 256 (bk x "
				  "bits / 4 = %d, bn = %d, %d group rows) and 128-byte aligned parts of a stage (A %d, "
				  "B %d, scales %d bytes)", g->b_ld / 4, s->bn, g->bq.ns, g->a_bytes, g->bq.b_bytes,
				  g->bq.s_bytes);
	if (s->bq.direct && s->N % s->bn)
		return diag_error(d, LOC_NONE, "gemm: direct quantised B needs bn dividing N (bn = %d, N = %lld)",
				  s->bn, (long long)s->N);
	if (s->bq.direct && g->bq.ka * g->bq.vec < 32)
		return diag_error(d, LOC_NONE, "gemm: direct %d-bit B needs lane vectors of 2 or 4 atoms", fm->bits);
	if (s->bq.direct && g->ni * g->bq.atoms > BQ_DWORDS)
		return diag_error(d, LOC_NONE, "gemm: direct quantised B holds %d words a lane per k-tile "
				  "(at most %d: a smaller bk or more warps in N)", g->ni * g->bq.atoms, BQ_DWORDS);
	if (s->bn * g->bq.ssz % 16 || s->N * g->bq.ssz % 16)
		return diag_error(d, LOC_NONE, "gemm: %s scales need bn and N multiples of %d (bn = %d, N = %lld)",
				  dtype_name(s->bq.scale_dt), 16 / g->bq.ssz, s->bn, (long long)s->N);
	for (int i = 0; i < 3; i++)
		if (g->bq.nper[i] > MAXI)
			return diag_error(d, LOC_NONE, "gemm: tile %dx%dx%d too large for %d threads",
					  s->bm, s->bn, s->bk, g->k.nthr);
	return 0;
}

size_t
cg_bq_bytes(const GemmSpec *s, int E, int which)
{
	const BqFormat *fm = format_of(s->b_dt);
	size_t groups = s->bq.group > 0 ? (size_t)(s->K / s->bq.group) : 0;

	if (!fm || s->bq.group <= 0)
		return 0;
	switch (which) {
	case 0: return (size_t)E * (size_t)s->N * (size_t)s->K * (size_t)fm->bits / 8;
	case 1: return (size_t)E * groups * (size_t)s->N * (size_t)scale_bytes(s->bq.scale_dt);
	default: return s->bq.zero ? cg_bq_bytes(s, E, 1) : 0;
	}
}

/* ---- the kernel's part ---- */

/*
 * Group sums (CgBQuant.gacc): on the integer fast path the mma reads the
 * lop3's M + u as it is (no fma a register: frags_fast), u = q + off (off:
 * the signed formats' offset, 8 for int4), and for each group
 *
 *	sum_k a (q - z) s = s (sum_k a (M + u) - (M + off + z) sum_k a)
 *
 * in f32 once per group and column (gemm_bq_gacc_fold), sum_k a (M + u)
 * from the group's own accumulators and sum_k a, A's row sums, from one
 * more mma a k-step with B = 1 (a warp's n8 blocks share it).  The products
 * a (M + u) are exact in f32 (8 by 8 significant bits; f16's 8-bit path 11
 * by 11); the subtraction cancels about log2((M + z) / |u - z|) ~ 5 of the
 * f32 sum's 24 bits, far below the bf16 rounding of each weight (q - z) s
 * that the interpreter and the default path make and this one does not:
 * outputs agree to that rounding, not in their bits.  A group must end
 * inside the k-tile that holds it (bk a multiple of the group: stream-K
 * runs and split-K slices start and end at k-tiles) and span two k-steps
 * or more, so that its scales, read at its first k-step, are read before
 * the barrier that lets the stage be refilled (ktile_pipelined's last
 * k-step).  The k-steps a group, or 0.
 */
static int
gacc_steps(const G *g)
{
	const GemmSpec *s = &g->k.s;
	int G = s->bq.group;

	if (!s->bq.gacc || !fast_path(g, format_of(s->b_dt)) || G < 2 * g->kstep || s->bk % G ||
	    g->mi > MAXF_MMA || g->ni > MAXF_MMA)
		return 0;
	return G / g->kstep;
}

/* The pair (i32) of the lane's accumulator columns 2t, 2t+1 of block j in
 * the part of the stage at base + part bytes, group row srow, into var *v. */
static void
column_pair(G *g, LLVMValueRef base, int part, int srow, int j, LLVMValueRef *v)
{
	CgFn *f = g->k.f;

	if (!*v)
		*v = cg_var(f, f->ti32, NULL);
	cg_set(f, *v, cg_sload(f, f->ti32, cg_sptr(f, cg_addi(f, base, part + (srow * g->k.s.bn + 8 * j) * g->bq.ssz)), 4));
}

void
gemm_bq_gacc_scales(G *g, LLVMValueRef soff, int kk)
{
	LLVMValueRef base = cg_add(g->k.f, soff, g->bq.c_lane);
	int srow = kk * g->kstep / g->k.s.bq.group;

	for (int j = 0; j < g->ni; j++) {
		column_pair(g, base, 0, srow, j, &g->bq.fs[j]);
		if (g->k.s.bq.zero)
			column_pair(g, base, g->bq.s_bytes, srow, j, &g->bq.fz[j]);
	}
}

LLVMValueRef
gemm_bq_gacc_ones(G *g)
{
	return cg_i32(g->k.f, g->mt == DT_BF16 ? 0x3f803f80 : 0x3c003c00);
}

/* Half h (0, 1) of a pair of raw 16-bit values as f32. */
static LLVMValueRef
half_f32(CgFn *f, LLVMValueRef raw, int h, DType dt)
{
	return cg_to_f32(f, LLVMBuildTrunc(f->B, h ? cg_shr(f, raw, 16) : raw, f->ti16, ""), dt);
}

void
gemm_bq_gacc_fold(G *g)
{
	CgFn *f = g->k.f;
	const BqFormat *fm = format_of(g->k.s.b_dt);
	DType dt = g->k.s.bq.scale_dt;
	double moff = (g->mt == DT_BF16 ? 128 : 1024) + (fm->kind == BQ_INT ? 1 << (fm->bits - 1) : 0);

	for (int j = 0; j < g->ni; j++) {
		LLVMValueRef sc[2], nc[2];
		for (int h = 0; h < 2; h++) {	/* column 2t + h: its scale and -(M + off + z) */
			sc[h] = half_f32(f, cg_get(f, g->bq.fs[j]), h, dt);
			nc[h] = cg_f32(f, -moff);
			if (g->k.s.bq.zero)
				nc[h] = LLVMBuildFSub(f->B, nc[h], half_f32(f, cg_get(f, g->bq.fz[j]), h, dt), "");
		}
		for (int i = 0; i < g->mi; i++)
			for (int q = 0; q < 4; q++) {	/* the accumulator's row g + 8 (q / 2), column 2t + q % 2 */
				LLVMValueRef d = cg_fma(f, nc[q & 1], cg_get(f, g->bq.rs[i][q & 2]), cg_get(f, g->bq.pacc[i][j][q]));
				cg_set(f, g->acc[i][j][q], cg_fma(f, d, sc[q & 1], cg_get(f, g->acc[i][j][q])));
			}
	}
}

void
gemm_bq_setup(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int64_t rowb = s->K * g->bq.bits;	/* global bytes per n8 block */
	int cpr[3] = {g->b_ld / 16, s->bn * g->bq.ssz / 16, s->bn * g->bq.ssz / 16};
	int64_t pitch[3] = {rowb, s->N * g->bq.ssz, s->N * g->bq.ssz};
	int base[3] = {g->a_bytes, g->a_bytes + g->bq.b_bytes, g->a_bytes + g->bq.b_bytes + g->bq.s_bytes};

	for (int i = 0; i < 3; i++)
		for (int j = 0; j < g->bq.nper[i]; j++) {
			LLVMValueRef c = cg_addi(f, g->k.tid, (int64_t)j * g->k.nthr);
			LLVMValueRef row = cg_sext64(f, cg_udiv(f, c, cg_i32(f, cpr[i])));
			LLVMValueRef cc = cg_sext64(f, cg_urem(f, c, cg_i32(f, cpr[i])));
			g->bq.soff[i][j] = cg_addi(f, cg_muli(f, c, 16), base[i]);
			g->bq.goff[i][j] = s->bq.bulk ? cg_i64(f, 0)	/* gemm_bq_sources: the tile's base */
						      : cg_add(f, cg_muli(f, row, pitch[i]), cg_muli(f, cc, 16));
		}
	/* where the threads cover whole rows of chunks, chunk j is chunk 0
	 * j * gstep bytes on: one source pointer a part and immediate offsets
	 * (fewer registers, carried or not, and fewer adds a k-tile) */
	for (int i = 0; i < 3; i++)
		g->bq.gstep[i] = cpr[i] > 0 && g->k.nthr % cpr[i] == 0 ? (int64_t)(g->k.nthr / cpr[i]) * pitch[i] : 0;
	g->bq.w_lane = cg_addi(f, cg_add(f, cg_muli(f, cg_shr(f, g->wn0, 3), g->b_ld),
					 cg_muli(f, g->k.lane, 4 * g->bq.vec)), g->a_bytes);
	g->bq.d_lane = cg_add(f, cg_muli(f, cg_sext64(f, cg_shr(f, g->wn0, 3)), rowb),
			      cg_sext64(f, cg_muli(f, g->k.lane, 4 * g->bq.vec)));
	g->bq.s_lane = cg_addi(f, cg_muli(f, cg_add(f, g->wn0, cg_shr(f, g->k.lane, 2)), g->bq.ssz),
			       g->a_bytes + g->bq.b_bytes);
	g->bq.gsteps = gacc_steps(g);
	if (g->bq.gsteps)
		g->bq.c_lane = cg_addi(f, cg_muli(f, cg_add(f, g->wn0, cg_shl(f, cg_and(f, g->k.lane, 3), 1)), g->bq.ssz),
				       g->a_bytes + g->bq.b_bytes);
}

void
gemm_bq_sources(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef e = cg_sext64(f, g->k.e), n0 = cg_sext64(f, g->k.n0), base[3];
	int64_t sstride = s->K / s->bq.group * s->N * g->bq.ssz;

	base[0] = cg_gep(f, g->k.B, cg_add(f, cg_muli(f, e, s->N * s->K * g->bq.bits / 8),
					   cg_muli(f, n0, s->K * g->bq.bits / 8)), 1);
	base[1] = cg_gep(f, g->k.Bs, cg_add(f, cg_muli(f, e, sstride), cg_muli(f, n0, g->bq.ssz)), 1);
	base[2] = s->bq.zero ? cg_gep(f, g->k.Bz, cg_add(f, cg_muli(f, e, sstride), cg_muli(f, n0, g->bq.ssz)), 1)
			     : NULL;
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < g->bq.nper[i]; j++)
			g->bq.src[i][j] = j > 0 && g->bq.gstep[i] ? NULL	/* gemm_bq_src */
								  : cg_gep(f, base[i], g->bq.goff[i][j], 1);
	if (s->bq.direct)
		g->bq.dsrc = cg_gep(f, base[0], g->bq.d_lane, 1);
}

/* Chunk j of part i's source at k-tile 0 (src, or chunk 0's j * gstep on). */
LLVMValueRef
gemm_bq_src(G *g, int i, int j)
{
	if (g->bq.src[i][j])
		return g->bq.src[i][j];
	return cg_gep(g->k.f, g->bq.src[i][0], cg_i64(g->k.f, j * g->bq.gstep[i]), 1);
}

/*
 * B ahead of the grid wait (GemmSpec.b_ahead; k_gemm.c's stream_ahead calls
 * it for each tile part of the run's first k-tiles): k-tiles [ka, kb) of the
 * tile of expert g->k.e at column n0 (clamped into N) toward L2, one bulk
 * prefetch a piece, the pieces spread over the threads: the packed words of
 * each of the bn / 8 n8 blocks ((kb - ka) k-tiles contiguous in the layout),
 * and each group row's bn scales (and zero points) that the k-tiles read.
 * Every address lies inside B, its scales and zero points.
 */
void
gemm_bq_ahead(G *g, LLVMValueRef n0, LLVMValueRef ka, LLVMValueRef kb)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int nb = s->bn / 8, G = s->bq.group;
	int64_t rowb = s->K * g->bq.bits, sstride = s->K / G * s->N * g->bq.ssz;
	LLVMValueRef e = cg_sext64(f, g->k.e), gr0, gr1, r, p, sp;
	CgLoop l;

	/* packed words: n8 block r (rowb bytes along K) from k-tile ka */
	p = cg_gep(f, g->k.B, cg_add(f, cg_muli(f, e, s->N * s->K * g->bq.bits / 8),
				     cg_muli(f, cg_sext64(f, cg_shr(f, n0, 3)), rowb)), 1);
	r = cg_loop(f, &l, g->k.tid, cg_i32(f, nb), cg_i32(f, g->k.nthr));
	cg_prefetch_l2_bulk(f, cg_gep(f, p, cg_add(f, cg_muli(f, cg_sext64(f, r), rowb),
						   cg_sext64(f, cg_muli(f, ka, g->b_ld))), 1),
			    cg_muli(f, cg_sub(f, kb, ka), g->b_ld));
	cg_endloop(f, &l);
	/* group rows [ka bk / G, ceil(kb bk / G)): bn values each, from the
	 * threads after the words' (wrapping) */
	gr0 = cg_udiv(f, cg_muli(f, ka, s->bk), cg_i32(f, G));
	gr1 = cg_udiv(f, cg_addi(f, cg_muli(f, kb, s->bk), G - 1), cg_i32(f, G));
	r = cg_loop(f, &l, cg_urem(f, cg_addi(f, g->k.tid, g->k.nthr - nb % g->k.nthr), cg_i32(f, g->k.nthr)),
		    cg_sub(f, gr1, gr0), cg_i32(f, g->k.nthr));
	sp = cg_add(f, cg_add(f, cg_muli(f, e, sstride), cg_muli(f, cg_sext64(f, cg_add(f, gr0, r)), s->N * g->bq.ssz)),
		    cg_muli(f, cg_sext64(f, n0), g->bq.ssz));
	cg_prefetch_l2_bulk(f, cg_gep(f, g->k.Bs, sp, 1), cg_i32(f, (int64_t)s->bn * g->bq.ssz));
	if (s->bq.zero)
		cg_prefetch_l2_bulk(f, cg_gep(f, g->k.Bz, sp, 1), cg_i32(f, (int64_t)s->bn * g->bq.ssz));
	cg_endloop(f, &l);
}

/* k-tile kt (i32) of the launch's k (split-K: kt counts the slice's). */
static LLVMValueRef
ktile64(G *g, LLVMValueRef kt)
{
	CgFn *f = g->k.f;
	LLVMValueRef k64 = cg_sext64(f, kt);

	if (g->k.s.split_k > 1)
		k64 = cg_add(f, k64, cg_sext64(f, cg_muli(f, cg_ctaid(f, 2), g->kt)));
	return k64;
}

/*
 * Direct B: the lane's words of a k-tile for its ni n8 blocks, vec atoms a
 * load (ld.global.nc.L1::no_allocate: streamed once).  Each vector of words
 * is reloaded with the next k-tile's as soon as its last k-step is
 * dequantised (gemm_bq_frags), into the same registers: a k-tile of
 * weights in flight a warp, no second set of registers and no copies.  Past
 * the last k-tile the reloads read it again (from L2; no branch).
 */
static void
reload(G *g, LLVMValueRef p, int a)
{
	CgFn *f = g->k.f;
	int64_t rowb = g->k.s.K * g->bq.bits;
	LLVMValueRef w[4];

	for (int j = 0; j < g->ni; j++) {
		cg_gload_stream(f, cg_gep(f, p, cg_i64(f, j * rowb + a * 128), 1), g->bq.vec, w);
		for (int v = 0; v < g->bq.vec; v++) {
			LLVMValueRef *d = &g->bq.dw[j * g->bq.atoms + a + v];
			if (!*d)
				*d = cg_var(f, f->ti32, NULL);
			cg_set(f, *d, w[v]);
		}
	}
}

void
gemm_bq_fetch(G *g, LLVMValueRef kt)
{
	CgFn *f = g->k.f;
	LLVMValueRef k = cg_select(f, cg_lt(f, kt, cg_i32(f, g->kt)), kt, cg_addi(f, kt, -1));

	g->bq.dptr = cg_gep(f, g->bq.dsrc, cg_muli(f, ktile64(g, k), (int64_t)g->k.s.bk * g->bq.bits), 1);
}

void
gemm_bq_first(G *g)
{
	gemm_bq_fetch(g, cg_i32(g->k.f, 0));
	for (int a = 0; a < g->bq.atoms; a += g->bq.vec)
		reload(g, g->bq.dptr, a);
	g->bq.dptr = NULL;	/* set per k-tile by gemm_bq_fetch */
}

/*
 * Bulk B (CgBQuant.bulk): a stage's packed words, scales and zero points
 * are P = bn / 8 + ns (1 + zero) contiguous pieces in global memory (n8
 * block i's b_ld bytes of the k-tile, adv0 on in its row of atoms; group
 * row r's bn scales or zero points, grp + r rows of N on), copied into the
 * stage's parts (cp.async's layout, byte for byte) by warp 0: a
 * cp.async.bulk a piece, lane p (p + 32, ...) piece p (CG_QBULK_LANES), or
 * one cp.async.bulk.tensor a part from lane 0 (CG_QBULK_TMA: the pieces
 * are a box's rows), complete_tx on the stage's mbarrier, whose one
 * arrival (lane 0's) expects the stage's tx bytes.  The consumers wait for
 * its phase (gemm_bq_wait) instead of cp.async's groups; no thread of the
 * other warps issues anything for B.
 */
static LLVMValueRef
mbar_of(G *g, LLVMValueRef soff)
{
	CgFn *f = g->k.f;

	return cg_addi(f, cg_muli(f, cg_udiv(f, soff, cg_i32(f, g->stage)), 8), g->bq.mbar);
}

/* The tensor maps of CG_QBULK_TMA: the packed words as rows of 4-byte
 * elements, an n8 block's row (K x bits bytes) each, every expert's rows
 * one after another (boxes of bk x bits / 4 elements by bn / 8 rows); the
 * scales (zero points) as rows of N values, a group row each (boxes of bn
 * by the k-tile's group rows). */
void
gemm_bq_tmaps(G *g)
{
	const GemmSpec *s = &g->k.s;
	int64_t E = s->groups > 0 ? s->groups : 1, rowb = s->K * g->bq.bits;
	DType sdt = g->bq.ssz == 1 ? DT_F8E4M3 : g->bq.ssz == 2 ? DT_BF16 : DT_F32;	/* bytes to the TMA */
	CgTmap m[3] = {
		{"B", DT_F32, 2, {CG_EXPR_INT(rowb / 4), CG_EXPR_INT(E * s->N / 8)}, {rowb, 0},
		 {g->b_ld / 4, s->bn / 8, 1}, 0},
		{"B_scale", sdt, 2, {CG_EXPR_INT(s->N), CG_EXPR_INT(E * (s->K / s->bq.group))}, {s->N * g->bq.ssz, 0},
		 {s->bn, g->bq.ns, 1}, 0},
	};

	if (s->bq.bulk != CG_QBULK_TMA)
		return;
	m[2] = m[1];
	m[2].of = "B_zero";
	cg_fn_tmaps(g->k.f, m, s->bq.zero ? 3 : 2);
}

/* CG_QBULK_TMA: the tensor copy of part i (words, scales, zero points);
 * the box's coordinates from the tile's sources (the expert and column
 * tile are in them: the load stream carries pointers, not coordinates). */
static void
bulk_tma(G *g, LLVMValueRef soff, LLVMValueRef mb, LLVMValueRef adv0, LLVMValueRef grp, int i)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef base[3] = {g->k.B, g->k.Bs, g->k.Bz}, c[2];
	int64_t rowb = s->K * g->bq.bits, pitch = s->N * g->bq.ssz;
	int part = g->a_bytes + (i ? g->bq.b_bytes + (i - 1) * g->bq.s_bytes : 0);
	/* in 32 bits where the part's bytes fit (a 32-bit division by a constant: 2-3 instructions) */
	LLVMTypeRef t = cg_bq_bytes(s, s->groups > 0 ? s->groups : 1, i) < (size_t)1 << 31 ? f->ti32 : f->ti64;
	LLVMValueRef off = LLVMBuildTrunc(f->B, LLVMBuildPtrDiff2(f->B, f->ti8, g->bq.src[i][0], base[i], ""), t, "");
	LLVMValueRef pb = LLVMConstInt(t, (unsigned long long)pitch, 0);

	if (i == 0) {	/* n8 row e N/8 + n0/8, element kt bk bits / 4 */
		c[0] = LLVMBuildTrunc(f->B, LLVMBuildUDiv(f->B, adv0, cg_i64(f, 4), ""), f->ti32, "");
		off = LLVMBuildUDiv(f->B, off, LLVMConstInt(t, (unsigned long long)rowb, 0), "");
		c[1] = LLVMBuildTrunc(f->B, off, f->ti32, "");
	} else {	/* column n0, group row e K/G + grp */
		c[0] = LLVMBuildUDiv(f->B, LLVMBuildURem(f->B, off, pb, ""),
				     LLVMConstInt(t, (unsigned long long)g->bq.ssz, 0), "");
		c[0] = LLVMBuildTrunc(f->B, c[0], f->ti32, "");
		c[1] = cg_add(f, LLVMBuildTrunc(f->B, LLVMBuildUDiv(f->B, off, pb, ""), f->ti32, ""),
			      LLVMBuildTrunc(f->B, grp, f->ti32, ""));
	}
	cg_tma_load(f, g->k.bqmap + i, cg_addi(f, soff, part), mb, 2, c);
}

/* CG_QBULK_LANES: piece p = lane + 32 j of the stage (the n8 blocks'
 * words, then the scales' group rows, then the zero points'), one
 * cp.async.bulk a lane (ptxas serialises them: docs/codegen.md). */
static void
bulk_lanes(G *g, LLVMValueRef soff, LLVMValueRef mb, LLVMValueRef adv0, LLVMValueRef grp)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int nb = s->bn / 8, ns = g->bq.ns, P = nb + ns * (s->bq.zero ? 2 : 1), srow = s->bn * g->bq.ssz;
	int64_t rowb = s->K * g->bq.bits, pitch = s->N * g->bq.ssz;
	CgIf c;

	for (int j = 0; j < (P + 31) / 32; j++) {
		LLVMValueRef p = cg_addi(f, g->k.lane, 32 * j), isw = cg_lt(f, p, cg_i32(f, nb));
		LLVMValueRef q = cg_addi(f, p, -nb), zp = cg_lt(f, cg_i32(f, ns - 1), q);	/* a zero point's row */
		LLVMValueRef r = cg_sub(f, q, cg_select(f, zp, cg_i32(f, ns), cg_i32(f, 0)));
		LLVMValueRef sbase = s->bq.zero ? cg_select(f, zp, g->bq.src[2][0], g->bq.src[1][0]) : g->bq.src[1][0];
		LLVMValueRef wsrc = cg_gep(f, g->bq.src[0][0], cg_add(f, cg_muli(f, cg_sext64(f, p), rowb), adv0), 1);
		LLVMValueRef ssrc = cg_gep(f, sbase, cg_muli(f, cg_add(f, grp, cg_sext64(f, r)), pitch), 1);
		LLVMValueRef sdst = cg_add(f, cg_muli(f, r, srow), cg_select(f, zp, cg_i32(f, g->bq.b_bytes + g->bq.s_bytes),
									   cg_i32(f, g->bq.b_bytes)));
		LLVMValueRef dst = cg_add(f, soff, cg_select(f, isw, cg_muli(f, p, g->b_ld), sdst));
		if ((j + 1) * 32 > P)
			cg_if(f, &c, cg_lt(f, p, cg_i32(f, P)));
		cg_bulk_load(f, cg_addi(f, dst, g->a_bytes), cg_select(f, isw, wsrc, ssrc),
			     cg_select(f, isw, cg_i32(f, g->b_ld), cg_i32(f, srow)), mb);
		if ((j + 1) * 32 > P)
			cg_endif(f, &c);
	}
}

/* The stage at soff's B by bulk copies: lane 0 of warp 0 arrives
 * expecting its bytes; the lanes of warp 0 copy (CG_QBULK_LANES), or lane 0
 * of warp i part i (CG_QBULK_TMA; all from warp 0 where the warps are
 * fewer than the parts), which may complete before that arrival (the
 * transaction count goes below zero meanwhile: the phase cannot complete
 * before its one arrival). */
static void
bulk_load(G *g, LLVMValueRef soff, LLVMValueRef adv0, LLVMValueRef grp)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int parts = s->bq.bulk == CG_QBULK_TMA ? (s->bq.zero ? 3 : 2) : 0, spread = parts <= g->k.nwarp;
	LLVMValueRef mb = mbar_of(g, soff);
	CgIf c, c1;

	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->k.warp, cg_i32(f, 0), ""));
	cg_if(f, &c1, LLVMBuildICmp(f->B, LLVMIntEQ, g->k.lane, cg_i32(f, 0), ""));
	cg_mbar_arrive_tx(f, mb, cg_i32(f, g->bq.tx - (s->bq.bulk_mut == CG_QBULK_MUT_SHORT_TX ? 16 : 0)));
	for (int i = 0; i < (spread ? MIN(parts, 1) : parts); i++)
		bulk_tma(g, soff, mb, adv0, grp, i);
	cg_endif(f, &c1);
	if (s->bq.bulk == CG_QBULK_LANES)
		bulk_lanes(g, soff, mb, adv0, grp);
	cg_endif(f, &c);
	for (int i = 1; spread && i < parts; i++) {
		cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->k.tid, cg_i32(f, 32 * i), ""));
		bulk_tma(g, soff, mb, adv0, grp, i);
		cg_endif(f, &c);
	}
}

void
gemm_bq_bulk_init(G *g)
{
	CgFn *f = g->k.f;
	CgIf c;

	if (!g->k.s.bq.bulk)
		return;
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->k.tid, cg_i32(f, 0), ""));
	for (int i = 0; i < g->k.s.stages; i++)
		cg_mbar_init(f, cg_i32(f, g->bq.mbar + 8 * i), 1);
	cg_mbar_init_fence(f);
	cg_endif(f, &c);
	cg_barrier(f);
	g->bq.ph = cg_var(f, f->ti32, cg_i32(f, 0));
}

void
gemm_bq_skip(G *g, LLVMValueRef soff)
{
	CgFn *f = g->k.f;
	CgIf c;

	if (g->k.s.bq.bulk_mut == CG_QBULK_MUT_NO_SKIP)
		return;
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->k.tid, cg_i32(f, 0), ""));
	cg_mbar_arrive(f, mbar_of(g, soff));
	cg_endif(f, &c);
}

void
gemm_bq_wait(G *g, LLVMValueRef soff)
{
	CgFn *f = g->k.f;
	LLVMValueRef st, ph, par;

	if (!g->k.s.bq.bulk)
		return;
	st = cg_udiv(f, soff, cg_i32(f, g->stage));
	ph = cg_get(f, g->bq.ph);
	par = cg_and(f, LLVMBuildLShr(f->B, ph, st, ""), 1);
	if (g->k.s.bq.bulk_mut == CG_QBULK_MUT_PARITY)
		par = LLVMBuildXor(f->B, par, cg_i32(f, 1), "");
	cg_mbar_wait(f, mbar_of(g, soff), par);
	cg_set(f, g->bq.ph, LLVMBuildXor(f->B, ph, LLVMBuildShl(f->B, cg_i32(f, 1), st, ""), ""));
}

void
gemm_bq_load(G *g, LLVMValueRef soff, LLVMValueRef kt)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	/* split-K: the packed sources start at k = 0 (a slice's group rows
	 * depend on its first k-tile) */
	LLVMValueRef k64 = ktile64(g, kt), adv[3];
	CgIf c;

	/* the k-tile's first group row: kt * bk / group */
	LLVMValueRef grp = s->bq.group >= s->bk ? LLVMBuildSDiv(f->B, k64, cg_i64(f, s->bq.group / s->bk), "")
						: cg_muli(f, k64, s->bk / s->bq.group);

	adv[0] = cg_muli(f, k64, (int64_t)s->bk * g->bq.bits);
	adv[1] = adv[2] = cg_muli(f, grp, s->N * g->bq.ssz);
	if (s->bq.bulk) {
		bulk_load(g, soff, adv[0], grp);
		return;
	}
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < g->bq.nper[i]; j++) {
			int guard = (j + 1) * g->k.nthr > g->bq.nchunk[i];
			if (guard)
				cg_if(f, &c, cg_lt(f, cg_addi(f, g->k.tid, (int64_t)j * g->k.nthr),
						   cg_i32(f, g->bq.nchunk[i])));
			cg_cp_async16(f, cg_sptr(f, cg_add(f, soff, g->bq.soff[i][j])),
				      cg_gep(f, gemm_bq_src(g, i, j), adv[i], 1));
			if (guard)
				cg_endif(f, &c);
		}
}

/* A scale or zero point from shared memory, as f32. */
static LLVMValueRef
load_scale(G *g, LLVMValueRef off)
{
	CgFn *f = g->k.f;
	DType dt = g->k.s.bq.scale_dt;

	if (dt == DT_F32)
		return cg_sload(f, f->tf32, cg_sptr(f, off), 4);
	if (g->bq.ssz == 1)
		return cg_bits_to_f32(f, cg_sload(f, f->ti8, cg_sptr(f, off), 1), dt);
	return cg_to_f32(f, cg_sload(f, f->ti16, cg_sptr(f, off), 2), dt);
}

/* Element e of k-step s of word w as an f32. */
static LLVMValueRef
decode(CgFn *f, const GemmSpec *gs, const BqFormat *fm, LLVMValueRef w, int s, int e)
{
	LLVMBuilderRef B = f->B;
	int half = 1 << (fm->bits - 1);
	LLVMValueRef v = field_of(f, gs, fm, w, s, e);

	switch (fm->kind) {
	case BQ_INT:	/* (v ^ half) - half */
		v = cg_addi(f, LLVMBuildXor(B, v, cg_i32(f, half), ""), -half);
		return LLVMBuildSIToFP(B, v, f->tf32, "");
	case BQ_UINT:
		return LLVMBuildUIToFP(B, v, f->tf32, "");
	default:
		return cg_bits_to_f32(f, LLVMBuildTrunc(B, v, f->ti8, ""), fm->dt);
	}
}

/*
 * The fast path, for integers whose offset values fit the mma type's
 * mantissa (4-bit into bf16 or f16, 8-bit into f16) with scales of the mma
 * type: a pair of fields shifted and masked into the mantissas of a pair
 * M + u (M = 128 for bf16, 1024 for f16; u = q, or q + 2^(bits-1) for signed
 * q after an xor), then d = (M + u) - (M + off + z) and d * s, each one
 * fma.rn on the pair.  d is an exact small integer and d * s rounds once:
 * the same value as (q - z) * s rounded to the mma type (cg_bq_pack checks
 * that zero points are such integers).
 */
static int
fast_path(const G *g, const BqFormat *fm)
{
	DType mt = g->mt;

	return fm->kind != BQ_FLOAT && g->k.s.bq.scale_dt == mt &&
	       ((fm->bits == 4 && (mt == DT_BF16 || mt == DT_F16)) || (fm->bits == 8 && mt == DT_F16));
}

/* The fast path's per-group registers: the scale as a pair of the mma
 * type, and -(M + off + z) as a pair (the zero point's raw bits zraw, of
 * the mma type too: NULL for none): one fma.rn on the pair, z * -1 - (M +
 * off), the exact integer rounded once as the f32 path rounds it. */
static void
fast_group(G *g, const BqFormat *fm, LLVMValueRef sraw, LLVMValueRef zraw, LLVMValueRef *s2, LLVMValueRef *negz2)
{
	CgFn *f = g->k.f;
	int half = fm->kind == BQ_INT ? 1 << (fm->bits - 1) : 0;
	double M = g->mt == DT_BF16 ? 128 : 1024;
	unsigned char c[2], m1[2];

	dtype_store(g->mt, c, 0, -(M + half));
	dtype_store(g->mt, m1, 0, -1.0);
	unsigned cb = (unsigned)c[0] | (unsigned)c[1] << 8, mb = (unsigned)m1[0] | (unsigned)m1[1] << 8;
	*negz2 = cg_i32(f, (int64_t)(cb | cb << 16));
	if (zraw)
		*negz2 = cg_fma16x2(f, g->mt, cg_pack16x2(f, zraw, zraw), cg_i32(f, (int64_t)(mb | mb << 16)), *negz2);
	*s2 = cg_pack16x2(f, sraw, sraw);
}

static void
frags_fast(G *g, const BqFormat *fm, LLVMValueRef w, LLVMValueRef s2, LLVMValueRef negz2, int sub,
	   LLVMValueRef *b)
{
	CgFn *f = g->k.f;
	int bits = fm->bits, half = fm->kind == BQ_INT ? 1 << (bits - 1) : 0;
	unsigned magic = g->mt == DT_BF16 ? 0x4300 : 0x6400, mask = (1u << bits) - 1;
	LLVMValueRef one2 = cg_i32(f, g->mt == DT_BF16 ? 0x3f803f80 : 0x3c003c00);

	/* one lop3 a register: the pair's fields masked into the magic's
	 * mantissas, signed ones in offset binary (q + half: the sign bit
	 * flipped): with (on, keep) per bit, (0, 0) 0, (0, 1) the field's bit,
	 * (1, 0) its complement (the sign bit), (1, 1) the magic's 1 bits */
	unsigned on = (unsigned)half | magic, keep = (mask >> 1) | magic;
	for (int r = 0; r < 2; r++) {	/* register r: elements 2r, 2r+1 */
		LLVMValueRef v = cg_shr(f, w, field_bit(bits, sub, 2 * r));
		v = half ? cg_lop3(f, v, cg_i32(f, (int64_t)(on | on << 16)), cg_i32(f, (int64_t)(keep | keep << 16)), 0xac)
			 : cg_lop3(f, v, cg_i32(f, (int64_t)(mask | mask << 16)), cg_i32(f, (int64_t)(magic | magic << 16)),
				   0xea);
		if (g->bq.gsteps) {	/* group sums: M + u as it is */
			b[r] = v;
			continue;
		}
		v = cg_fma16x2(f, g->mt, v, one2, negz2);
		b[r] = cg_fma16x2(f, g->mt, v, s2, cg_i32(f, (int64_t)0x80008000u));
	}
}

/*
 * MXFP4's fast path (bf16 mma): an e2m1 field s.ee.m is the bf16 whose sign
 * is s and whose exponent's low bits and mantissa's top bit are ee.m (a
 * shift of each part), which is the e2m1 value times 2^-126 for every
 * field, 0.5 included (then a bf16 subnormal: the bias of e2m1 is 1, of bf16
 * 127, and both formats' subnormals are linear in the bits).  One fma.rn
 * with 2^126 makes it exact, one with the scale (2^(s-127), exact in bf16
 * for every e8m0 but NaN; or a bf16 scale: the exact product has at most
 * 10 significant bits) rounds once: the f32 path's value.
 */
static int
fast_e2m1(const G *g, const BqFormat *fm)
{
	DType sd = g->k.s.bq.scale_dt;

	/* with scales of more mantissa than bf16 (f32, f16) the product must
	 * round once in f32: the f32 path */
	return fm->dt == DT_F4E2M1 && g->mt == DT_BF16 && (sd == DT_BF16 || sd == DT_F8E8M0);
}

/* The scale at off (bf16 or e8m0: fast_e2m1) as a pair of bf16 (i32): bf16
 * as stored, twice; e8m0 s is the bf16 2^(s-127), s << 7 in each half (one
 * multiply), but for 0, the subnormal 2^-127 (the max with it: s << 7 is
 * +0 there, and non-negative bf16 order as their bits do), and 0xff, NaN
 * (s << 7 is +inf there: x * 0 + x is NaN for inf and x for the rest). */
static LLVMValueRef
scale_pair(G *g, LLVMValueRef off)
{
	CgFn *f = g->k.f;
	LLVMValueRef v;

	if (g->k.s.bq.scale_dt == DT_BF16) {
		v = cg_sload(f, f->ti16, cg_sptr(f, off), 2);
		return cg_pack16x2(f, v, v);
	}
	v = LLVMBuildZExt(f->B, cg_sload(f, f->ti8, cg_sptr(f, off), 1), f->ti32, "");
	v = cg_max_bf16x2(f, LLVMBuildMul(f->B, v, cg_i32(f, 0x00800080), ""), cg_i32(f, 0x00400040));
	return cg_fma16x2(f, DT_BF16, v, cg_i32(f, 0), v);
}

/* One e8m0 multiply (bq.v1 off): the bf16 pair 2^(s-1) = 2^126 * 2^(s-127),
 * the exact product with a placed field for s <= 128 (up to 6 * 2^1, and
 * down to 2^-128, a bf16 subnormal), in one multiply-add: (s + 126) << 7
 * in each half.  Larger s (scales > 2, which no quantiser writes but the
 * format allows) give a bf16 that is not 2^(s-1); frags_e2m1_big redoes
 * their groups, unless bq.scales_le2 says the weights have none. */
static int
one_mul(const G *g, const BqFormat *fm)
{
	return fast_e2m1(g, fm) && g->k.s.bq.scale_dt == DT_F8E8M0 && !g->k.s.bq.v1;
}

static LLVMValueRef
scale_one_mul(G *g, LLVMValueRef off, LLVMValueRef *big)
{
	CgFn *f = g->k.f;
	LLVMValueRef v = LLVMBuildZExt(f->B, cg_sload(f, f->ti8, cg_sptr(f, off), 1), f->ti32, "");

	*big = LLVMBuildICmp(f->B, LLVMIntUGT, v, cg_i32(f, 128), "");
	return cg_add(f, LLVMBuildMul(f->B, v, cg_i32(f, 0x00800080), ""), cg_i32(f, 0x3f003f00));
}

/* Register r of k-step sub: its two fields' bits moved to bf16 bits 8..6
 * (ee.m) and 15 (sign) in each half, by one rotation and mask per distinct
 * distance (e2m1_pos; a plain shift where no masked bit wraps). */
static LLVMValueRef
e2m1_pair(CgFn *f, const GemmSpec *gs, LLVMValueRef w, int sub, int r)
{
	static const int to[4] = {6, 7, 8, 15};
	const int *pos = (gs->bq.v1 ? e2m1_pos_v1 : e2m1_pos)[2 * sub + r];
	LLVMValueRef v = NULL;
	int done = 0;

	for (int i = 0; i < 4; i++) {
		int d = ((to[i] - pos[i]) % 32 + 32) % 32, lo = 32, hi = -1;
		int64_t mask = 0;
		LLVMValueRef x;
		if (done & 1 << i)
			continue;
		for (int j = i; j < 4; j++)
			if (((to[j] - pos[j]) % 32 + 32) % 32 == d) {
				mask |= (int64_t)1 << to[j] | (int64_t)1 << (16 + to[j]);
				done |= 1 << j;
				lo = to[j] < lo ? to[j] : lo;
				hi = 16 + to[j] > hi ? 16 + to[j] : hi;
			}
		if (d == 0)
			x = w;
		else if (lo >= d)		/* no source below bit 0: a left shift */
			x = cg_shl(f, w, d);
		else if (hi + 32 - d <= 31)	/* none above bit 31: a right shift */
			x = cg_shr(f, w, 32 - d);
		else				/* a rotation (shf.l.wrap) */
			x = LLVMBuildOr(f->B, cg_shl(f, w, d), cg_shr(f, w, 32 - d), "");
		v = v ? cg_lop3(f, x, cg_i32(f, mask), v, 0xea) : cg_and(f, x, mask);	/* (x & mask) | v */
	}
	return v;
}

/* Two fmas a register: x 2^126, x the scale pair s2 (bq.v1, and bf16 scales). */
static void
frags_e2m1(G *g, LLVMValueRef w, LLVMValueRef s2, int sub, LLVMValueRef *b)
{
	CgFn *f = g->k.f;
	LLVMValueRef c2 = cg_i32(f, 0x7e807e80), nz2 = cg_i32(f, (int64_t)0x80008000u);

	for (int r = 0; r < 2; r++) {	/* register r: elements 2r, 2r+1 */
		LLVMValueRef v = cg_fma16x2(f, DT_BF16, e2m1_pair(f, &g->k.s, w, sub, r), c2, nz2);
		b[r] = cg_fma16x2(f, DT_BF16, v, s2, nz2);
	}
}

/* The big-scale redo of one register (one_mul's groups with some s > 128
 * in the warp; rare, so a warp-uniform branch), s read again from the
 * stage at off: x 2^(min(s,128)-1), exact, then x 2^(s-128) (1 for s <=
 * 128, NaN for s = 0xff), rounded once. */
static LLVMValueRef
frag_e2m1_big(G *g, LLVMValueRef w, LLVMValueRef off, int sub, int r)
{
	CgFn *f = g->k.f;
	LLVMValueRef nz2 = cg_i32(f, (int64_t)0x80008000u);
	LLVMValueRef sv = LLVMBuildZExt(f->B, cg_sload(f, f->ti8, cg_sptr(f, off), 1), f->ti32, "");
	LLVMValueRef big = LLVMBuildICmp(f->B, LLVMIntUGT, sv, cg_i32(f, 128), "");
	LLVMValueRef c1 = cg_add(f, LLVMBuildMul(f->B, sv, cg_i32(f, 0x00800080), ""), cg_i32(f, 0x3f003f00));
	LLVMValueRef c2 = cg_mul(f, cg_shl(f, cg_addi(f, sv, -1), 7), cg_i32(f, 0x10001));

	c2 = cg_select(f, LLVMBuildICmp(f->B, LLVMIntEQ, sv, cg_i32(f, 255), ""), cg_i32(f, 0x7fc07fc0), c2);
	c2 = cg_select(f, big, c2, cg_i32(f, 0x3f803f80));
	c1 = cg_select(f, big, cg_i32(f, 0x7f007f00), c1);
	return cg_fma16x2(f, DT_BF16, cg_fma16x2(f, DT_BF16, e2m1_pair(f, &g->k.s, w, sub, r), c1, nz2), c2, nz2);
}

/*
 * The lane's scale and zero point of fragment j at byte offset so of the
 * stage's scale rows, in the form its path uses (fast: the scale pair and
 * -(M + off + z) pair; e2m1: the scale pair, or one_mul's 2^(s-1) pair and
 * whether s > 128 in big; else f32 scale and zero).
 */
static void
group_regs(G *g, const BqFormat *fm, LLVMValueRef sbase, int so, LLVMValueRef *sc, LLVMValueRef *z,
	   LLVMValueRef *big)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef zf = NULL;

	*big = NULL;
	if (fast_path(g, fm) && g->bq.gsteps) {	/* group sums: the fold's, not the fragments' */
		*sc = *z = cg_i32(f, 0);
		return;
	}
	if (fast_path(g, fm)) {	/* scales and zero points of the mma type: raw bits */
		LLVMValueRef zraw = s->bq.zero ? cg_sload(f, f->ti16, cg_sptr(f, cg_addi(f, sbase, so + g->bq.s_bytes)), 2)
					       : NULL;
		fast_group(g, fm, cg_sload(f, f->ti16, cg_sptr(f, cg_addi(f, sbase, so)), 2), zraw, sc, z);
		return;
	}
	zf = s->bq.zero ? load_scale(g, cg_addi(f, sbase, so + g->bq.s_bytes)) : NULL;
	*z = zf;
	if (one_mul(g, fm) && !zf) {
		*sc = scale_one_mul(g, cg_addi(f, sbase, so), big);
	} else if (fast_e2m1(g, fm) && !zf) {
		*sc = scale_pair(g, cg_addi(f, sbase, so));
	} else {
		*sc = load_scale(g, cg_addi(f, sbase, so));
	}
}

/* one_mul's fragments of k-step sub for the warp's ni blocks: one fma a
 * register, and the groups with a big scale in some lane redone (off[j]:
 * block j's scale in the stage). */
static void
frags_one_mul(G *g, LLVMValueRef *w, LLVMValueRef *c1, LLVMValueRef *off, int sub, LLVMValueRef (*b)[2])
{
	CgFn *f = g->k.f;
	LLVMValueRef nz2 = cg_i32(f, (int64_t)0x80008000u), v[MAXF][2];
	CgIf c;

	for (int j = 0; j < g->ni; j++)
		for (int r = 0; r < 2; r++)
			v[j][r] = cg_var(f, f->ti32, cg_fma16x2(f, DT_BF16, e2m1_pair(f, &g->k.s, w[j], sub, r), c1[j], nz2));
	if (!g->k.s.bq.scales_le2) {
		cg_if(f, &c, cg_get(f, g->bq.bigv));
		for (int j = 0; j < g->ni; j++)
			for (int r = 0; r < 2; r++)
				cg_set(f, v[j][r], frag_e2m1_big(g, w[j], off[j], sub, r));
		cg_endif(f, &c);
	}
	for (int j = 0; j < g->ni; j++)
		for (int r = 0; r < 2; r++)
			b[j][r] = cg_get(f, v[j][r]);
}

/* The lane's vec words at off in the stage, into the vars wv (made here). */
static void
stage_words(G *g, LLVMValueRef off, LLVMValueRef *wv)
{
	CgFn *f = g->k.f;
	int n = g->bq.vec;
	LLVMValueRef v = cg_sload(f, n > 1 ? LLVMVectorType(f->ti32, (unsigned)n) : f->ti32, cg_sptr(f, off), 4 * n);

	for (int i = 0; i < n; i++) {
		if (!wv[i])
			wv[i] = cg_var(f, f->ti32, NULL);
		cg_set(f, wv[i], n > 1 ? LLVMBuildExtractElement(f->B, v, cg_i32(f, i), "") : v);
	}
}

/*
 * B fragments of k-step kk from the stage at soff.  The scales (and zero
 * points) of a group row are read and converted once, at its first k-step,
 * the packed word once per atom (8 / bits k-steps), each kept in vars (loop-carried: k-step 0 of a k-tile is loaded at the end
 * of the previous iteration, the fragments' double buffer).
 */
static void
frags(G *g, LLVMValueRef soff, int kk, LLVMValueRef (*b)[2])
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	const BqFormat *fm = format_of(s->b_dt);
	int atom = kk * 16 / g->bq.ka, sub = kk * 16 % g->bq.ka / 16;
	int srow = s->bq.group >= s->bk ? 0 : kk * 16 / s->bq.group;
	int first = kk * 16 % (s->bq.group < s->bk ? s->bq.group : s->bk) == 0;
	LLVMValueRef wbase = cg_add(f, soff, g->bq.w_lane), sbase = cg_add(f, soff, g->bq.s_lane);
	LLVMValueRef ws[MAXF], scs[MAXF], soffs[MAXF], anybig = NULL;

	for (int j = 0; j < g->ni; j++) {
		LLVMValueRef w, sc, z, big, h[4];

		if (s->bq.direct) {	/* in registers (reload) */
			w = cg_get(f, g->bq.dw[j * g->bq.atoms + atom]);
		} else {
			int v = atom % g->bq.vec;
			if (sub == 0 && v == 0)	/* the vector's words serve its vec atoms' k-steps */
				stage_words(g, cg_addi(f, wbase, j * g->b_ld + atom * 128), g->bq.wv[j]);
			w = cg_get(f, g->bq.wv[j][v]);
		}
		if (first) {
			group_regs(g, fm, sbase, (srow * s->bn + 8 * j) * g->bq.ssz, &sc, &z, &big);
			if (!g->bq.sv[j])
				g->bq.sv[j] = cg_var(f, LLVMTypeOf(sc), NULL);
			cg_set(f, g->bq.sv[j], sc);
			if (z && !g->bq.zv[j])
				g->bq.zv[j] = cg_var(f, LLVMTypeOf(z), NULL);
			if (z)
				cg_set(f, g->bq.zv[j], z);
			if (big && !s->bq.scales_le2)
				anybig = anybig ? LLVMBuildOr(f->B, anybig, big, "") : big;
		}
		sc = cg_get(f, g->bq.sv[j]);
		z = g->bq.zv[j] ? cg_get(f, g->bq.zv[j]) : NULL;
		ws[j] = w;
		scs[j] = sc;
		soffs[j] = cg_addi(f, sbase, (srow * s->bn + 8 * j) * g->bq.ssz);
		if (fast_path(g, fm)) {
			frags_fast(g, fm, w, sc, z, sub, b[j]);
			continue;
		}
		if (one_mul(g, fm) && !s->bq.zero)
			continue;	/* below, for the ni blocks together */
		if (fast_e2m1(g, fm) && !s->bq.zero) {
			frags_e2m1(g, w, sc, sub, b[j]);
			continue;
		}
		for (int e = 0; e < 4; e++) {
			LLVMValueRef x = decode(f, s, fm, w, sub, e);
			if (z)
				x = LLVMBuildFSub(f->B, x, z, "");
			h[e] = cg_from_f32(f, LLVMBuildFMul(f->B, x, sc, ""), g->mt);
		}
		b[j][0] = cg_pack16x2(f, h[0], h[1]);
		b[j][1] = cg_pack16x2(f, h[2], h[3]);
	}
	if (!(one_mul(g, fm) && !s->bq.zero))
		return;
	if (anybig) {	/* the group's first k-step: one vote for the warp's blocks */
		if (!g->bq.bigv)
			g->bq.bigv = cg_var(f, f->ti1, NULL);
		cg_set(f, g->bq.bigv, cg_vote_any(f, anybig));
	}
	frags_one_mul(g, ws, scs, soffs, sub, b);
}

/* The fragments of k-step kk; direct B reloads a vector of words with the
 * next k-tile's once its last k-step is done (never k-step 0: a vector
 * spans 2 k-steps or more, so neither the loop's prologue nor its first
 * k-step of the next k-tile reloads). */
void
gemm_bq_frags(G *g, LLVMValueRef soff, int kk, LLVMValueRef (*b)[2])
{
	int span = g->bq.ka * g->bq.vec;	/* k of a vector of words */

	frags(g, soff, kk, b);
	if (g->k.s.bq.direct && g->bq.dptr && (kk + 1) * 16 % span == 0)
		reload(g, g->bq.dptr, (kk * 16 - kk * 16 % span) / g->bq.ka);
}

/* ---- the compile-time repack ---- */

/* The raw bits of element i of a packed q (i4/u4: nibbles, low first). */
static unsigned
raw_bits(const BqFormat *fm, const unsigned char *q, size_t i)
{
	return fm->bits == 4 ? (q[i / 2] >> (4 * (i & 1))) & 15u : q[i];
}

int
cg_bq_pack(const GemmSpec *s, int E, const void *q, const void *scale, const void *zero,
	   DType zero_dt, int interleave, void *b, void *bscale, void *bzero, Diag *d)
{
	const BqFormat *fm = format_of(s->b_dt);
	int64_t N = s->N, K = s->K, G = s->bq.group, ka, ng;
	int ssz;

	if (!fm || G <= 0 || K % G || N % 8 || !scale_type(s->bq.scale_dt) || K % (128 / fm->bits * vec_of(s)) ||
	    (interleave && N % 2))
		return diag_error(d, LOC_NONE, "bq-pack: not a quantised B spec (%s, group %lld, N = %lld, K = %lld)",
				  dtype_name(s->b_dt), (long long)G, (long long)N, (long long)K);
	ka = 128 / fm->bits;
	ng = K / G;
	ssz = scale_bytes(s->bq.scale_dt);
	for (int64_t e = 0; e < E; e++)
		for (int64_t nb = 0; nb < N / 8; nb++)
			for (int64_t kb = 0; kb < K / ka; kb++)
				for (int lane = 0; lane < 32; lane++) {
					int64_t n = 8 * nb + lane / 4, t = lane % 4;
					uint32_t w = 0;
					unsigned char *o = (unsigned char *)b + ((e * N / 8 + nb) * (K / ka) * 128 +
										 word_off(kb, lane, vec_of(s)));
					int64_t src = interleave ? n % 2 * (N / 2) + n / 2 : n;
					for (int sub = 0; sub < 8 / fm->bits; sub++)
						for (int el = 0; el < 4; el++) {
							int64_t k = ka * kb + 16 * sub + 2 * t + (el & 1) + 8 * (el >> 1);
							unsigned v = raw_bits(fm, q, (size_t)((e * N + src) * K + k));
							for (int i = 0; i < fm->bits; i++)
								w |= (uint32_t)(v >> i & 1u) << bit_pos(s, fm, sub, el, i);
						}
					for (int i = 0; i < 4; i++)
						o[i] = (unsigned char)(w >> (8 * i));
				}
	for (int64_t e = 0; e < E; e++)
		for (int64_t n = 0; n < N; n++)
			for (int64_t kg = 0; kg < ng; kg++) {
				int64_t src = interleave ? n % 2 * (N / 2) + n / 2 : n;
				size_t from = (size_t)((e * N + src) * ng + kg), to = (size_t)((e * ng + kg) * N + n);
				memcpy((char *)bscale + to * (size_t)ssz, (const char *)scale + from * (size_t)ssz, (size_t)ssz);
				if (!s->bq.zero)
					continue;
				double z = zero ? dtype_load(zero_dt, zero, from) : 0;
				if (fm->kind != BQ_FLOAT && (z != floor(z) || fabs(z) > 256))
					return diag_error(d, LOC_NONE, "bq-pack: zero point %g of a %s weight is not an "
							  "integer in -256..256", z, dtype_name(s->b_dt));
				dtype_store(s->bq.scale_dt, bzero, to, z);
				if (dtype_load(s->bq.scale_dt, bzero, to) != z)
					return diag_error(d, LOC_NONE, "bq-pack: zero point %g is not exact in %s",
							  z, dtype_name(s->bq.scale_dt));
			}
	return 0;
}

/* ---- the same layout generated on the device (synthetic weights) ---- */

/* Row n of the repacked B (or its scales) reads source row src(n): n
 * itself, or through lower-moe's gate|up interleave (cg_bq_pack's). */
static LLVMValueRef
src_row(CgFn *f, LLVMValueRef n, int64_t N, int interleave)
{
	if (!interleave)
		return n;
	return cg_add(f, cg_muli(f, cg_and(f, n, 1), N / 2), LLVMBuildLShr(f->B, n, cg_i64(f, 1), ""));
}

/* Word wi (i64) of the packed B: the fields of the source elements that
 * cg_bq_pack puts there, each generated as ir_weight_data would. */
static LLVMValueRef
synth_word(CgFn *f, const GemmSpec *s, const BqFormat *fm, int interleave, LLVMValueRef *a, LLVMValueRef wi)
{
	int64_t N = s->N, K = s->K, ka = 128 / fm->bits, vec = vec_of(s);
	/* word wi = (row of atoms) * 32 K/ka + word_off / 4: vectors of vec words a lane */
	LLVMValueRef r = LLVMBuildURem(f->B, wi, cg_i64(f, 32 * (K / ka)), "");
	LLVMValueRef rest = LLVMBuildUDiv(f->B, wi, cg_i64(f, 32 * (K / ka)), "");
	LLVMValueRef in = LLVMBuildURem(f->B, r, cg_i64(f, 32 * vec), "");
	LLVMValueRef lane = LLVMBuildUDiv(f->B, in, cg_i64(f, vec), "");
	LLVMValueRef kb = cg_add(f, cg_muli(f, LLVMBuildUDiv(f->B, r, cg_i64(f, 32 * vec), ""), vec),
				 LLVMBuildURem(f->B, in, cg_i64(f, vec), ""));
	LLVMValueRef nb = LLVMBuildURem(f->B, rest, cg_i64(f, N / 8), "");
	LLVMValueRef e = LLVMBuildUDiv(f->B, rest, cg_i64(f, N / 8), "");
	LLVMValueRef n = cg_add(f, cg_muli(f, nb, 8), LLVMBuildLShr(f->B, lane, cg_i64(f, 2), ""));
	LLVMValueRef row = cg_muli(f, cg_add(f, cg_muli(f, e, N), src_row(f, n, N, interleave)), K);
	LLVMValueRef k0 = cg_add(f, cg_muli(f, kb, ka), cg_muli(f, cg_and(f, lane, 3), 2));
	LLVMValueRef w = cg_i32(f, 0);

	for (int sub = 0; sub < 8 / fm->bits; sub++)
		for (int el = 0; el < 4; el++) {
			int dk = 16 * sub + (el & 1) + 8 * (el >> 1);
			LLVMValueRef v = cg_synth_bits(f, fm->dt, a, cg_add(f, row, cg_addi(f, k0, dk)));
			w = LLVMBuildOr(f->B, w, place_field(f, s, fm, v, sub, el), "");
		}
	return w;
}

int
cg_emit_synth_bq(CgModule *m, const char *name, const GemmSpec *s, int E, int interleave, int which,
		 DType src_dt, int64_t row_block, Diag *d)
{
	const BqFormat *fm = format_of(s->b_dt);
	int64_t N = s->N, K = s->K, G = s->bq.group, ng = G > 0 ? K / G : 0;
	LLVMValueRef a[6], i;
	char note[96];
	CgLoop l;
	CgFn *f;

	if (!fm || G <= 0 || K % G || N % 8 || !scale_type(s->bq.scale_dt) || K % (128 / fm->bits * vec_of(s)) ||
	    (interleave && N % 2) || which < 0 || which > 2 || (which == 0 && src_dt != s->b_dt) ||
	    (which == 1 && src_dt != s->bq.scale_dt) || (which == 2 && !s->bq.zero))
		return diag_error(d, LOC_NONE, "synth-bq: not a quantised B spec (%s, group %lld, N = %lld, "
				  "K = %lld, part %d of %s)", dtype_name(s->b_dt), (long long)G, (long long)N,
				  (long long)K, which, dtype_name(src_dt));
	if (!(f = cg_synth_begin(m, name, a, d)))
		return -1;
	if (which == 0) {
		i = cg_synth_loop(f, &l, cg_i64(f, (int64_t)(cg_bq_bytes(s, E, 0) / 4)));
		cg_gstore(f, synth_word(f, s, fm, interleave, a, i), cg_gep(f, a[0], i, 4), 4);
	} else {
		/* scales and zero points: to = (e*ng + kg)*N + n from (e*N + src(n))*ng + kg */
		i = cg_synth_loop(f, &l, cg_i64(f, E * ng * N));
		LLVMValueRef n = LLVMBuildURem(f->B, i, cg_i64(f, N), ""), r = LLVMBuildUDiv(f->B, i, cg_i64(f, N), "");
		LLVMValueRef kg = LLVMBuildURem(f->B, r, cg_i64(f, ng), ""), e = LLVMBuildUDiv(f->B, r, cg_i64(f, ng), "");
		LLVMValueRef row = src_row(f, n, N, interleave);
		LLVMValueRef from = cg_add(f, cg_muli(f, cg_add(f, cg_muli(f, e, N), row), ng), kg);
		if (row_block > 1)	/* ir_synth_index: a block of rows takes its first row's values */
			from = LLVMBuildSub(f->B, from, cg_muli(f, LLVMBuildURem(f->B, row, cg_i64(f, row_block), ""),
								 ng), "");
		if (which == 1) {
			int sb = scale_bytes(s->bq.scale_dt);
			LLVMValueRef v = cg_synth_bits(f, src_dt, a, from);
			if (sb < 4)
				v = LLVMBuildTrunc(f->B, v, LLVMIntTypeInContext(f->C, (unsigned)sb * 8), "");
			cg_gstore(f, v, cg_gep(f, a[0], i, sb), sb);
		} else {	/* a zero point in the scale's type (exact: bq_synth_ok) */
			LLVMValueRef v = cg_synth_value(f, src_dt, a, from);
			if (cg_dt_isint(src_dt))
				v = LLVMBuildSIToFP(f->B, v, f->tf32, "");
			cg_store_dt(f, s->bq.scale_dt, a[0], i, v);
		}
	}
	cg_endloop(f, &l);
	snprintf(note, sizeof note, "synth %s in the bq layout (%s)", dtype_name(src_dt),
		 which == 0 ? "B" : which == 1 ? "B_scale" : "B_zero");
	return cg_synth_end(f, note);
}

int
cg_bq_synth_ok(const GemmSpec *s, DType scale_src, DType zero_src)
{
	static const DType exact_zero[] = {DT_I4, DT_U4, DT_I8, DT_U8, DT_F8E4M3, DT_F8E5M2};
	int ok = 0;

	if (!format_of(s->b_dt) || scale_src != s->bq.scale_dt)
		return 0;
	if (!s->bq.zero)
		return 1;
	for (size_t i = 0; i < NELEM(exact_zero); i++)
		ok |= zero_src == exact_zero[i];
	/* integers of at most 8 bits and f8 values are exact in f32, bf16 and f16 */
	return ok && s->bq.scale_dt != DT_F8E8M0;
}
