/*
 * k_gemm.c — the GEMM family on tensor cores (sm_80+): dense and grouped
 * (MoE) GEMM with a gathered A, a fused epilogue and scattered rows.
 *
 *	for each tile (expert e, rows row0.., columns n0..) of the schedule:
 *	    prologue: cp.async k-tiles 0..S-2 into stages 0..S-2
 *	    for kt:   wait k-tile kt; barrier; cp.async k-tile kt+S-1 into the
 *	              stage read in kt-1; ldmatrix + mma.sync on stage kt % S
 *	    epilogue: the program on the f32 accumulators, then the store
 *	              (or the output quantisation: a static scale, or per-group
 *	              scales from an amax over the quad and the warps)
 *
 * Tiles: bm x bn x bk per CTA, warps_m x warps_n warps, each warp owning a
 * (bm/warps_m) x (bn/warps_n) block of m16n8 accumulator fragments.  Shared
 * memory rows are padded by 16 bytes (row pitch = 16 (mod 128) bytes), so the
 * eight 16-byte rows one ldmatrix matrix reads, and the rows one warp's
 * cp.async writes, fall in distinct bank groups.  A and B[N,K] tiles are
 * stored k-contiguous and read with ldmatrix.x4; B[K,N] tiles are stored
 * n-contiguous and read with ldmatrix.x4.trans.
 *
 * TF32 (--precision=tf32: f32 x f32, GemmSpec.mma_dt): the tiles stay f32 in
 * shared memory (cp.async, 4-byte elements), k-steps are 8 deep
 * (mma.m16n8k8.tf32), and each fragment register is rounded with
 * cvt.rna.tf32.f32 after it is read.  ldmatrix.x4 of 8x4-f32 blocks gives
 * exactly the A and B[N,K] fragments of m16n8k8 (a b16 pair is one f32), so
 * those reads are the bf16 ones byte for byte; B[K,N] has no 32-bit
 * transposing ldmatrix and is read with two ld.shared per fragment.
 *
 * The schedule, the parameters, the epilogue program and the store are
 * k_gemm_common.c's, shared with the CUDA-core kernel.
 */
#include <stdio.h>
#include <string.h>

#include "k_gemm.h"

void
cg_gemm_default(GemmSpec *s)
{
	memset(s, 0, sizeof *s);
	s->m_per_t = 1;
	s->a_dt = s->b_dt = s->c_dt = DT_BF16;
	s->gather_div = 1;
	s->b_layout = CG_B_NK;
	s->store = CG_STORE_ROWS;
	s->mainloop = CG_MAINLOOP_MMA;
	s->bm = 128;
	s->bn = 128;
	s->bk = 32;
	s->warps_m = 2;
	s->warps_n = 4;
	s->stages = 4;
	s->sched = CG_SCHED_TILES;
	s->ctas = 264;
}

static DType
mma_type(const GemmSpec *s)
{
	if (s->f8.group > 0)
		return DT_F8E4M3;	/* FP8 x FP8 */
	if (s->a_dt == DT_F16 || s->b_dt == DT_F16)
		return DT_F16;
	if (s->a_dt == DT_F32 && s->b_dt == DT_F32 && (s->mma_dt == DT_F16 || s->mma_dt == DT_TF32))
		return s->mma_dt;	/* --precision=f16 or tf32 */
	return DT_BF16;
}

DType
cg_gemm_mma_type(const GemmSpec *s)
{
	return mma_type(s);
}

static int
pow2(int x)
{
	return x > 0 && (x & (x - 1)) == 0;
}

/*
 * Group quantisation: a warp's output columns (wow: ni fragments of q_fw)
 * split into segments of q_sg = min(group, wow); the amax of each row and
 * segment goes to shared memory [bm][segments of the tile], over the stages
 * (free after the mainloop) when they are large enough.
 */
static void
quant_layout(G *g)
{
	const GemmSpec *s = &g->k.s;
	int group = s->quant.group;

	g->q_fw = g->k.sw >= 0 ? 4 : 8;
	g->q_wow = g->ni * g->q_fw;
	g->q_sg = group > 0 && group < g->q_wow ? group : g->q_wow;
	if (g->q_sg <= 0)
		return;
	g->q_bytes = s->bm * (s->bn * g->q_fw / 8 / g->q_sg) * 4;
	if (g->q_bytes <= g->k.tab) {
		g->q_off = 0;
	} else {
		g->q_off = (g->k.smem + 15) & ~15;
		g->k.smem = g->q_off + g->q_bytes;
	}
}

/* Fill in defaults and derived sizes; no checks. */
static void
layout(G *g, const GemmSpec *in)
{
	const GemmSpec *s = &g->k.s;

	memset(g, 0, sizeof *g);
	gemm_resolve(&g->k, in);
	g->mt = mma_type(s);
	g->eb = g->mt == DT_F8E4M3 ? 1 : g->mt == DT_TF32 ? 4 : 2;
	g->kstep = g->mt == DT_TF32 ? 8 : 16;
	g->k.nwarp = s->warps_m * s->warps_n;
	g->k.nthr = 32 * g->k.nwarp;
	g->wtm = s->warps_m > 0 ? s->bm / s->warps_m : 0;
	g->wtn = s->warps_n > 0 ? s->bn / s->warps_n : 0;
	g->mi = g->wtm / 16;
	g->ni = g->wtn / 8;
	g->mstride = 16;
	if (s->mainloop == CG_MAINLOOP_WGMMA || s->mainloop == CG_MAINLOOP_WS)
		gemm_wgmma_layout(g);	/* warpgroup tiles instead of warp tiles */
	g->kt = s->bk > 0 ? (int)(s->K / s->bk) : 0;
	if (s->split_k > 1)
		g->kt /= s->split_k;	/* k-tiles per slice */
	g->a_ld = s->bk * g->eb + 16;
	g->b_ld = (s->b_layout == CG_B_NK ? s->bk : s->bn) * g->eb + 16;
	g->a_bytes = s->bm * g->a_ld;
	g->stage = g->a_bytes + (s->b_layout == CG_B_NK ? s->bn : s->bk) * g->b_ld;
	if (s->bq.group > 0)
		gemm_bq_layout(g);	/* packed B, its scales and zero points */
	g->k.tab = s->stages * g->stage;
	if (s->mainloop == CG_MAINLOOP_WGMMA && s->f8.group > 0)	/* FP8: its swizzled stages as they are */
		g->k.tab = 1024 + s->stages * g->wg.stage;	/* (+ 1 KiB alignment), not mma.sync's padded rows */
	g->k.wsum = g->k.tab + ((4 * (s->groups + 1) + 15) & ~15);
	g->k.smem = s->groups > 0 ? g->k.wsum + 128 : g->k.tab;
	if (s->quant.kind == CG_QUANT_GROUP)
		quant_layout(g);
	g->a_chunks = s->bm * s->bk * g->eb / 16;
	g->b_chunks = s->bq.group > 0 ? 0 : s->bn * s->bk * g->eb / 16;
	g->a_n = g->k.nthr ? (g->a_chunks + g->k.nthr - 1) / g->k.nthr : 0;
	g->b_n = g->k.nthr ? (g->b_chunks + g->k.nthr - 1) / g->k.nthr : 0;
	if (s->mainloop == CG_MAINLOOP_WS)
		gemm_ws_layout(g);	/* + a producer warpgroup, TMA stages, mbarriers */
	if (s->f8.group > 0) {	/* FP8 x FP8: + a slot of scales a stage, last */
		g->wg.f8s = (g->k.smem + 15) & ~15;
		g->k.smem = g->wg.f8s + s->stages * gemm_f8_slot(g);
	}
	if (s->sched == CG_SCHED_STREAM && s->units > 0) {	/* dynamic stream-K: two unit slots, a flag */
		g->dyn_off = (g->k.smem + 15) & ~15;
		g->k.smem = g->dyn_off + 16;
	}
	if (s->bq.group > 0 && s->bq.bulk) {	/* bulk B: an mbarrier a stage, after everything */
		g->bq.mbar = (g->k.smem + 7) & ~7;
		g->k.smem = g->bq.mbar + 8 * s->stages;
	}
}

void
cg_gemm_resolve(GemmSpec *s)
{
	GemmCore k;

	gemm_resolve(&k, s);
	*s = k.s;
}

int
cg_gemm_smem(const GemmSpec *s)
{
	G g;

	if (s->mainloop == CG_MAINLOOP_VEC)
		return cg_gemm_vec_smem(s);
	layout(&g, s);
	return g.k.smem;
}

static int
check_ld(Diag *d, const char *what, int64_t ld, int64_t min)
{
	if (ld < min || ld % 8)
		return diag_error(d, LOC_NONE, "gemm: %s = %lld (need a multiple of 8, >= %lld)", what,
				  (long long)ld, (long long)min);
	return 0;
}

int
cg_gemm_check(const CgTarget *t, const GemmSpec *in, Diag *d)
{
	G g;
	const GemmSpec *s = &g.k.s;

	if (in->mainloop == CG_MAINLOOP_VEC)
		return cg_gemm_vec_check(t, in, d);
	layout(&g, in);
	if (cg_target_check(t, d) < 0)
		return -1;
	if (s->fold.k > 0)
		return diag_error(d, LOC_NONE, "gemm: the combine in the last CTA (GemmSpec.fold) is gemm-vec's only");
	if (s->bq.group > 0 && gemm_bq_check(&g, d) < 0)
		return -1;
	if (s->bq.group <= 0 && (s->bq.direct || s->bq.vec > 1))
		return diag_error(d, LOC_NONE, "gemm: direct B and lane vectors are for quantised B");
	if (s->mainloop == CG_MAINLOOP_WGMMA) {
		if (gemm_wgmma_check(t, &g, d) < 0)
			return -1;
	} else if (s->mainloop == CG_MAINLOOP_WS) {
		if (gemm_ws_check(t, &g, d) < 0)
			return -1;
	} else if (cg_require(t, (g.mt == DT_BF16 ? CG_MMA_BF16 : g.mt == DT_TF32 ? CG_MMA_TF32 : CG_MMA_F16) |
				      CG_LDMATRIX | CG_CP_ASYNC,
			      "a tensor-core GEMM", d) < 0) {
		return -1;
	}
	if (s->f8.group > 0 && gemm_f8_check(&g, d) < 0)
		return -1;
	if (!(gemm_io_type(s->a_dt) || s->f8.group > 0) || !(gemm_io_type(s->b_dt) || s->bq.group > 0 || s->f8.group > 0) ||
	    !(gemm_io_type(s->c_dt) || cg_quant_qmax(s->c_dt) > 0))
		return diag_error(d, LOC_NONE, "gemm: types %s x %s -> %s (need f32, bf16 or f16; "
				  "C f8e4m3 or i8 when quantised)",
				  dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt));
	if (cg_quant_check(&s->quant, s->c_dt, d) < 0)
		return -1;
	if ((s->a_dt == DT_BF16 && s->b_dt == DT_F16) || (s->a_dt == DT_F16 && s->b_dt == DT_BF16))
		return diag_error(d, LOC_NONE, "gemm: bf16 x f16 has no mma type");
	if (s->N <= 0 || s->K <= 0)
		return diag_error(d, LOC_NONE, "gemm: N = %lld, K = %lld", (long long)s->N, (long long)s->K);
	if (s->bm < 16 || s->bm > 256 || !(pow2(s->bm) || s->bm == 192))
		return diag_error(d, LOC_NONE, "gemm: bm = %d (need 16, 32, 64, 128, 192 or 256)", s->bm);
	/* quantised B on mma.sync also takes wider tiles (up to 512 columns,
	 * 16 n8 blocks a warp): a decode warp's A fragments and loop serve
	 * more packed weights (gpt-oss's N = 5760 and 2880 are 18 and 9 tiles
	 * of 320, which no 256-column tile divides) */
	if (s->bn < 16 || s->bn % 16 ||
	    s->bn > (s->bq.group > 0 && s->mainloop == CG_MAINLOOP_MMA ? 512 : 256))
		return diag_error(d, LOC_NONE, "gemm: bn = %d (need a multiple of 16 in 16..256; quantised "
				  "B: up to 512)", s->bn);
	/* quantised B on mma.sync also takes deeper k-tiles (multiples of 64 up
	 * to 512: gpt-oss's K = 2880 is 15 k-tiles of 192), a decode tile's
	 * loop overhead spread over more fragments */
	if (s->bk != 16 && s->bk != 32 && s->bk != 64 && s->bk != 128 &&
	    !(s->bq.group > 0 && s->mainloop == CG_MAINLOOP_MMA && s->bk >= 64 && s->bk % 64 == 0 && s->bk <= 512))
		return diag_error(d, LOC_NONE, "gemm: bk = %d (need 16, 32, 64 or 128; quantised B: a multiple "
				  "of 64 up to 512)", s->bk);
	/* 12 warps: three warpgroups stacked over 192 rows (an expert of up to
	 * 192 rows in one tile: DeepSeek-V3's 128 +- 11 at T = 4096) */
	if (s->warps_m < 1 || s->warps_n < 1 || s->warps_m * s->warps_n > 16 ||
	    !(pow2(s->warps_m * s->warps_n) || (s->warps_m * s->warps_n == 12 && s->bm == 192)))
		return diag_error(d, LOC_NONE, "gemm: %d x %d warps (need 1..16 in all, a power of 2; 12 for "
				  "192 rows)", s->warps_m, s->warps_n);
	if (s->mainloop == CG_MAINLOOP_MMA && (s->bm % (16 * s->warps_m) || s->bn % (16 * s->warps_n)))
		return diag_error(d, LOC_NONE,
				  "gemm: a %dx%d tile over %dx%d warps leaves warp tiles that are not multiples of 16",
				  s->bm, s->bn, s->warps_m, s->warps_n);
	if (g.mi > MAXF || g.ni > MAXF || g.a_n > MAXI || g.b_n > MAXI ||
	    (s->mainloop == CG_MAINLOOP_MMA && (g.mi > MAXF_MMA || g.ni > MAXF_MMA)))
		return diag_error(d, LOC_NONE, "gemm: warp tile %dx%d or tile %dx%dx%d too large for %d threads",
				  g.wtm, g.wtn, s->bm, s->bn, s->bk, g.k.nthr);
	/* wg_wide: warpgroups' tiles; mma.sync's warp tiles ignore it (as they do clusters) */
	if (s->wg_wide && s->mainloop != CG_MAINLOOP_MMA && (s->f8.group > 0 || g.mt == DT_TF32))
		return diag_error(d, LOC_NONE, "gemm: 256-column warpgroup tiles (wg_wide) are for bf16/f16");
	if (s->ws_mode != CG_WS_COOPERATIVE && s->mainloop != CG_MAINLOOP_WS)
		return diag_error(d, LOC_NONE, "gemm: ping-pong consumers need the warp-specialised mainloop");
	if (s->stages < 2 || s->stages > (s->mainloop == CG_MAINLOOP_WS || s->bq.bulk ? 8 : 5))
		return diag_error(d, LOC_NONE, "gemm: %d stages (need 2..%d)", s->stages,
				  s->mainloop == CG_MAINLOOP_WS || s->bq.bulk ? 8 : 5);
	if (s->bq.bulk && (s->bq.group <= 0 || !(cg_target_is_emu(t) || cg_target_has(t, CG_TMA))))
		return diag_error(d, LOC_NONE, "gemm: bulk copies of B (bq.bulk) need quantised B and a target "
				  "with cp.async.bulk and mbarriers (sm_90)");
	if (s->N % s->bn)
		return diag_error(d, LOC_NONE, "gemm: N = %lld is not a multiple of bn = %d (pad the weight)",
				  (long long)s->N, s->bn);
	if (s->K % s->bk)
		return diag_error(d, LOC_NONE, "gemm: K = %lld is not a multiple of bk = %d (pad the weight)",
				  (long long)s->K, s->bk);
	if (s->split_k > 1 && ((s->mainloop != CG_MAINLOOP_MMA && !(s->mainloop == CG_MAINLOOP_WGMMA && s->f8.group > 0)) ||
			       (s->K / s->bk) % s->split_k))
		return diag_error(d, LOC_NONE, "gemm: split-K %d needs the mma.sync mainloop (or FP8 x FP8's "
				  "cp.async wgmma one) and a k-tile count (%lld) it divides", s->split_k,
				  (long long)(s->K / s->bk));
	if (s->sched == CG_SCHED_STREAM && (s->mainloop != CG_MAINLOOP_MMA || s->bq.direct ||
					    s->f8.group > 0 || s->quant.kind == CG_QUANT_GROUP))
		return diag_error(d, LOC_NONE, "gemm: stream-K needs the mma.sync mainloop, B in bf16, f16, "
				  "f32 or quantised and staged (not direct), and no group quantisation");
	if (s->units && (s->sched != CG_SCHED_STREAM || s->units < 0 || s->units > 64 || s->unit_rev < 0 ||
			 s->K / s->bk < s->stages - 1 || (int64_t)s->units * s->ctas > 1 << 20))
		return diag_error(d, LOC_NONE, "gemm: dynamic stream-K (%d units a CTA) needs stream-K, 1..64 "
				  "units a CTA and at least stages - 1 = %d k-tiles (K / bk = %lld)", s->units,
				  s->stages - 1, (long long)(s->K / s->bk));
	if (s->tail && (s->sched != CG_SCHED_STREAM || s->units || s->tail < 0 || s->tail >= s->ctas ||
			s->tail_w < 2 || s->tail_w > 64))
		return diag_error(d, LOC_NONE, "gemm: a stream-K tail (%d short runs of %d CTAs, long runs %d "
				  "times as long) needs static stream-K, fewer short runs than CTAs and a weight "
				  "of 2..64", s->tail, s->ctas, s->tail_w);
	if (s->sk_unroll && (s->sched != CG_SCHED_STREAM || s->units))
		return diag_error(d, LOC_NONE, "gemm: the unrolled stream-K loop needs static stream-K");
	if (s->b_ahead && (s->b_ahead < 0 || s->sched != CG_SCHED_STREAM || s->b_layout != CG_B_NK ||
			   s->f8.b_interleave || !(cg_target_is_emu(t) || cg_target_has(t, CG_TMA))))
		return diag_error(d, LOC_NONE, "gemm: B ahead of the grid wait (%d k-tiles) needs stream-K, "
				  "B [N,K] in bf16, f16, f32 or quantised and a target with bulk prefetches (sm_90)",
				  s->b_ahead);
	if (s->ahead_table && (s->b_ahead <= 0 || s->gather))
		return diag_error(d, LOC_NONE, "gemm: the table from before the grid wait needs B ahead and A not "
				  "gathered (offsets final before the wait)");
	if (s->a_rep > 1 && gemm_a_cols(s) % s->bk)
		return diag_error(d, LOC_NONE, "gemm: A's %lld columns (read %d times along K) are not a "
				  "multiple of bk = %d", (long long)gemm_a_cols(s), s->a_rep, s->bk);
	if (check_ld(d, "lda", s->lda, gemm_a_cols(s)) < 0 ||
	    check_ld(d, "ldb", s->ldb, s->b_layout == CG_B_NK ? s->K : s->N) < 0 ||
	    check_ld(d, "ldc", s->ldc, g.k.width) < 0)
		return -1;
	if (gemm_check_common(&g.k, "gemm", d) < 0)
		return -1;
	if (s->groups > 0 && (s->b_group_stride < (s->b_layout == CG_B_NK ? s->N * s->ldb : s->K * s->ldb) ||
			      s->b_group_stride % 8))
		return diag_error(d, LOC_NONE, "gemm: B's group stride %lld is below one expert's B or not a multiple of 8",
				  (long long)s->b_group_stride);
	if (s->quant.kind == CG_QUANT_GROUP) {
		int G = s->quant.group, bow = s->bn * g.q_fw / 8;
		if (bow % G || (g.q_wow % G && G % g.q_wow))
			return diag_error(d, LOC_NONE, "gemm: quantisation groups of %d columns do not tile "
					  "a CTA's %d output columns (%d per warp)", G, bow, g.q_wow);
	}
	if (g.k.smem > GEMM_SMEM_MAX)
		return diag_error(d, LOC_NONE, "gemm: %d bytes of shared memory (%d stages of %d) exceed %d",
				  g.k.smem, s->stages, g.stage, GEMM_SMEM_MAX);
	return 0;
}

/* ---- pieces of the kernel ---- */

/*
 * Chunk i of the mma.sync loads, where the threads are whole rows: its smem
 * destination (A and B) is chunk 0's + i x threads / per rows, and so is
 * B's global source (not A's: its rows are gathered or clamped), unless B's
 * rows are not stored in order (FP8's interleave); not for quantised B (its
 * own sources and loads).  gemm_load_stage then addresses chunks i > 0 as constant
 * offsets from chunk 0 (immediates in cp.async: session 26's ncu has the
 * decode CTAs bound by instructions a k-tile, ~225 a warp, of which the 16
 * B chunks' address arithmetic was ~4 each).
 */
static void
linear_chunks(G *g, int cpr)
{
	const GemmSpec *s = &g->k.s;
	int per = s->b_layout == CG_B_NK ? cpr : s->bn * g->eb / 16, nthr = g->k.nthr;

	g->a_sstep = g->b_sstep = g->b_gstep = 0;
	if (s->mainloop != CG_MAINLOOP_MMA || nthr == 0 || s->bq.group > 0)
		return;	/* (quantised B: its kernels keep their addressing, bq's own) */
	if (nthr % cpr == 0)
		g->a_sstep = (int64_t)(nthr / cpr) * g->a_ld;
	if (nthr % per == 0 && !s->f8.b_interleave) {
		g->b_sstep = (int64_t)(nthr / per) * g->b_ld;
		g->b_gstep = (int64_t)(nthr / per) * s->ldb * esize(s->b_dt);
	}
}

/* Per-thread constants: lane layout, load chunk offsets, ldmatrix offsets. */
static void
thread_setup(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int cpr = s->bk * g->eb / 16;	/* 16-byte chunks per k-contiguous row */

	g->wm0 = cg_muli(f, cg_udiv(f, g->k.warp, cg_i32(f, s->warps_n)), g->wtm);
	g->wn0 = cg_muli(f, cg_urem(f, g->k.warp, cg_i32(f, s->warps_n)), g->wtn);
	/* chunk c = tid + i * threads is row c / per, chunk c % per of it; where
	 * the threads are whole rows (threads % per == 0) chunk i is row
	 * row_0 + i * threads / per, chunk kc_0: said so, the offsets of chunks
	 * i > 0 are chunk 0's plus constants (immediates in the cp.async
	 * addresses: fewer instructions a k-tile, which decode CTAs are bound by) */
	for (int i = 0; i < g->a_n; i++) {
		LLVMValueRef c = cg_addi(f, g->k.tid, (int64_t)i * g->k.nthr);
		int lin = i > 0 && g->k.nthr % cpr == 0 && s->bq.group == 0;
		g->a_row[i] = lin ? cg_addi(f, g->a_row[0], (int64_t)i * (g->k.nthr / cpr)) : cg_udiv(f, c, cg_i32(f, cpr));
		g->a_kc[i] = lin ? g->a_kc[0] : cg_urem(f, c, cg_i32(f, cpr));
		g->a_soff[i] = cg_add(f, cg_muli(f, g->a_row[i], g->a_ld), cg_muli(f, g->a_kc[i], 16));
	}
	for (int i = 0; i < g->b_n; i++) {
		LLVMValueRef c = cg_addi(f, g->k.tid, (int64_t)i * g->k.nthr);
		int per = s->b_layout == CG_B_NK ? cpr : s->bn * g->eb / 16;
		int lin = i > 0 && g->k.nthr % per == 0 && s->bq.group == 0;
		g->b_row[i] = lin ? cg_addi(f, g->b_row[0], (int64_t)i * (g->k.nthr / per)) : cg_udiv(f, c, cg_i32(f, per));
		g->b_kc[i] = lin ? g->b_kc[0] : cg_urem(f, c, cg_i32(f, per));
		g->b_soff[i] = cg_addi(f, cg_add(f, cg_muli(f, g->b_row[i], g->b_ld),
						  cg_muli(f, g->b_kc[i], 16)), g->a_bytes);
	}
	linear_chunks(g, cpr);
	/* ldmatrix: A rows wm0 + (lane & 15), k chunk lane >> 4 */
	g->a_lane = cg_add(f, cg_muli(f, cg_add(f, g->wm0, cg_and(f, g->k.lane, 15)), g->a_ld),
			   cg_muli(f, cg_shr(f, g->k.lane, 4), 16));
	if (s->b_layout == CG_B_NK) {
		/* rows n = wn0 + (lane & 7) + 8 (lane >> 4), k chunk (lane >> 3) & 1 */
		LLVMValueRef n = cg_add(f, cg_add(f, g->wn0, cg_and(f, g->k.lane, 7)),
					cg_shl(f, cg_shr(f, g->k.lane, 4), 3));
		g->b_lane = cg_add(f, cg_muli(f, n, g->b_ld),
				   cg_muli(f, cg_and(f, cg_shr(f, g->k.lane, 3), 1), 16));
	} else if (g->mt == DT_TF32) {
		/* ld.shared: row k = lane & 3 (+4), column wn0 + (lane >> 2) (+8 per fragment) */
		g->b_lane = cg_add(f, cg_muli(f, cg_and(f, g->k.lane, 3), g->b_ld),
				   cg_muli(f, cg_add(f, g->wn0, cg_shr(f, g->k.lane, 2)), 4));
	} else {
		/* rows k = (lane & 7) + 8 ((lane >> 3) & 1), columns wn0 + 8 (lane >> 4) */
		LLVMValueRef k = cg_add(f, cg_and(f, g->k.lane, 7),
					cg_shl(f, cg_and(f, cg_shr(f, g->k.lane, 3), 1), 3));
		LLVMValueRef n = cg_add(f, g->wn0, cg_shl(f, cg_shr(f, g->k.lane, 4), 3));
		g->b_lane = cg_add(f, cg_muli(f, k, g->b_ld), cg_muli(f, n, 2));
	}
	g->b_lane = cg_addi(f, g->b_lane, g->a_bytes);
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				g->acc[i][j][q] = cg_var(f, f->tf32, NULL);
	if (s->mainloop == CG_MAINLOOP_WGMMA)
		gemm_wgmma_setup(g);
	if (s->bq.group > 0)
		gemm_bq_setup(g);
}

/*
 * Rows past the tile's expert (or M) are not loaded where the rows of a
 * tile often end early: the 192-row tiles (three warpgroups of 64 rows, an
 * expert's ~128 rows in one tile), and with GemmSpec.live_rows tiles of any
 * multiple of 64 rows (--debug=grouped-lean: DeepSeek-V3's second 128-row
 * tile of an expert holds ~10 rows at T = 4096, its 64-row tile ~8 at
 * T = 256).  Such rows are never stored and, in a
 * 64-row block without rows, never read by a wgmma (gemm_wgmma_by_rows);
 * loading them (clamped to the expert's last row) cost L2 bandwidth for
 * nothing: a third of A's bytes at 128 rows of 192.  cp.async chunks of
 * those rows are zero-filled without a global read (src-size 0); the WS
 * mainloop's TMA boxes of A are 64 rows each and those past the rows not
 * issued (k_gemm_ws.c).  --debug=full-blocks loads and issues everything
 * (the kernels before, the A/B).  With live_rows, also the 16-row mma.sync
 * decode tiles (--debug=qdec, program.c's qdec_rows), where an expert holds
 * 1-4 of the 16 rows at T = 16: A's clamped copies were a quarter of the L2
 * traffic of gpt-oss-20b's MXFP4 k-tiles (2 KB of A a 6 KB of B) and an
 * eighth of bf16's.  Stream-K carries the test with A's sources (Stream.live).
 */
int
gemm_live_rows(const GemmSpec *s)
{
	int mma16 = s->bm == 16 && s->mainloop == CG_MAINLOOP_MMA;	/* decode tiles (program.c's qdec_rows) */

	return (s->bm == 192 || (s->live_rows && (s->bm % 64 == 0 || mma16))) && !s->full_blocks &&
	       (s->cluster < 2 || (s->cluster == 2 && s->cluster_b));	/* not where A's box is shared */
}

int
gemm_a_rows_map(const GemmSpec *s)
{
	return s->mainloop == CG_MAINLOOP_WS && !s->gather && s->live_rows && gemm_live_rows(s);
}

void
gemm_a_live(G *g, int n)
{
	CgFn *f = g->k.f;

	for (int i = 0; i < n; i++)
		g->a_live[i] = gemm_live_rows(&g->k.s) ? cg_lt(f, cg_add(f, g->k.row0, g->a_row[i]), g->k.rend) : NULL;
}

/* Global addresses of this thread's load chunks at k = 0. */
static void
tile_sources(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int ea = esize(s->a_dt), eb = esize(s->b_dt), ce = 16 / g->eb;	/* elements per chunk */

	for (int i = 0; i < g->a_n; i++) {
		LLVMValueRef src = gemm_a_row(&g->k, cg_add(f, g->k.row0, g->a_row[i]));
		g->a_src[i] = gptr(f, g->k.A, cg_add(f, cg_muli(f, cg_sext64(f, src), s->lda),
						   cg_sext64(f, cg_muli(f, g->a_kc[i], ce))), ea);
	}
	for (int i = 0; i < g->b_n; i++) {
		LLVMValueRef off;
		if (s->b_layout == CG_B_NK)
			off = cg_add(f, cg_muli(f, cg_sext64(f, gemm_b_row(g, cg_add(f, g->k.n0, g->b_row[i]))), s->ldb),
				     cg_sext64(f, cg_muli(f, g->b_kc[i], ce)));
		else
			off = cg_add(f, cg_muli(f, cg_sext64(f, g->b_row[i]), s->ldb),
				     cg_sext64(f, cg_add(f, g->k.n0, cg_muli(f, g->b_kc[i], ce))));
		g->b_src[i] = gptr(f, g->k.bexp, off, eb);
	}
	if (s->bq.group > 0)
		gemm_bq_sources(g);
	gemm_a_live(g, s->a_dt == DT_F32 && g->mt != DT_TF32 ? 0 : g->a_n);	/* (not f32 converted in registers) */
	if (s->split_k > 1) {	/* the slice's first k-tile */
		LLVMValueRef k0 = cg_sext64(f, cg_muli(f, cg_ctaid(f, 2), (int64_t)g->kt * s->bk));
		for (int i = 0; i < g->a_n && s->a_rep == 1; i++)	/* a_rep: gemm_load_stage's */
			g->a_src[i] = gptr(f, g->a_src[i], k0, ea);
		for (int i = 0; i < g->b_n; i++)
			g->b_src[i] = gptr(f, g->b_src[i], s->b_layout == CG_B_NK ? k0
					   : cg_muli(f, k0, s->ldb), eb);
	}
}

/* One 16-byte shared chunk from 8 global elements of type dt (tf32: 4 f32). */
static void
load_chunk(G *g, LLVMValueRef sdst, LLVMValueRef gsrc, DType dt)
{
	CgFn *f = g->k.f;
	LLVMValueRef h[8], w[4], v;

	if (dt != DT_F32 || g->mt == DT_TF32) {
		cg_cp_async16(f, sdst, gsrc);
		return;
	}
	/* f32: two 16-byte loads, converted to the mma type through registers */
	for (int half = 0; half < 2; half++) {
		LLVMValueRef p = cg_gep(f, gsrc, cg_i64(f, 16 * half), 1);
		LLVMValueRef x = cg_gload(f, LLVMVectorType(f->tf32, 4), p, 16);
		for (int j = 0; j < 4; j++)
			h[4 * half + j] = cg_from_f32(f, LLVMBuildExtractElement(f->B, x, cg_i32(f, j), ""), g->mt);
	}
	v = LLVMGetUndef(LLVMVectorType(f->ti32, 4));
	for (int j = 0; j < 4; j++) {
		w[j] = cg_pack16x2(f, h[2 * j], h[2 * j + 1]);
		v = LLVMBuildInsertElement(f->B, v, w[j], cg_i32(f, j), "");
	}
	cg_sstore(f, v, sdst, 16);
}

LLVMValueRef
gemm_a_ktile(G *g, LLVMValueRef kt)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;

	if (s->a_rep <= 1)
		return kt;
	if (s->split_k > 1)	/* kt counts from the slice's first k-tile */
		kt = cg_add(f, cg_muli(f, cg_ctaid(f, 2), g->kt), kt);
	return cg_urem(f, kt, cg_i32(f, (int32_t)(gemm_a_cols(s) / s->bk)));
}

void
gemm_load_stage(G *g, LLVMValueRef soff, LLVMValueRef kt)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int ea = esize(s->a_dt), eb = esize(s->b_dt);
	LLVMValueRef k64 = cg_sext64(f, kt);
	LLVMValueRef adv_a = cg_muli(f, cg_sext64(f, gemm_a_ktile(g, kt)), (int64_t)s->bk * ea);
	LLVMValueRef adv_b = cg_muli(f, k64, s->b_layout == CG_B_NK ? (int64_t)s->bk * eb
								     : (int64_t)s->bk * s->ldb * eb);
	/* chunks i > 0 at constant offsets from chunk 0 where they are (linear_chunks) */
	LLVMValueRef a_dst0 = g->a_n && g->a_sstep ? cg_sptr(f, cg_add(f, soff, g->a_soff[0])) : NULL;
	LLVMValueRef b_dst0 = g->b_n && g->b_sstep ? cg_sptr(f, cg_add(f, soff, g->b_soff[0])) : NULL;
	LLVMValueRef b_src0 = g->b_n && g->b_gstep ? cg_gep(f, g->b_src[0], adv_b, 1) : NULL;
	CgIf c;

	for (int i = 0; i < g->a_n; i++) {
		int guard = (i + 1) * g->k.nthr > g->a_chunks;
		LLVMValueRef dst;
		if (guard)
			cg_if(f, &c, cg_lt(f, cg_addi(f, g->k.tid, (int64_t)i * g->k.nthr), cg_i32(f, g->a_chunks)));
		dst = a_dst0 ? cg_gep(f, a_dst0, cg_i64(f, i * g->a_sstep), 1) : cg_sptr(f, cg_add(f, soff, g->a_soff[i]));
		if (g->a_live[i])
			cg_cp_async16_zfill(f, dst, cg_gep(f, g->a_src[i], adv_a, 1), g->a_live[i]);
		else
			load_chunk(g, dst, cg_gep(f, g->a_src[i], adv_a, 1), s->a_dt);
		if (guard)
			cg_endif(f, &c);
	}
	for (int i = 0; i < g->b_n; i++) {
		int guard = (i + 1) * g->k.nthr > g->b_chunks;
		LLVMValueRef dst, src;
		if (guard)
			cg_if(f, &c, cg_lt(f, cg_addi(f, g->k.tid, (int64_t)i * g->k.nthr), cg_i32(f, g->b_chunks)));
		dst = b_dst0 ? cg_gep(f, b_dst0, cg_i64(f, i * g->b_sstep), 1) : cg_sptr(f, cg_add(f, soff, g->b_soff[i]));
		src = b_src0 ? cg_gep(f, b_src0, cg_i64(f, i * g->b_gstep), 1) : cg_gep(f, g->b_src[i], adv_b, 1);
		load_chunk(g, dst, src, s->b_dt);
		if (guard)
			cg_endif(f, &c);
	}
	if (s->bq.group > 0)
		gemm_bq_load(g, soff, kt);
}

/* Fragments of one k-step (kstep deep) for the warp: A (mi x 4 regs), B (ni x 2). */
typedef struct Frag Frag;
struct Frag {
	LLVMValueRef a[MAXF][4], b[MAXF][2];
};

/* tf32: the f32 fragments rounded with cvt.rna.tf32.f32 (the mma reads 19 bits) */
static void
tf32_frags(G *g, Frag *fr)
{
	for (int i = 0; i < g->mi; i++)
		for (int q = 0; q < 4; q++)
			fr->a[i][q] = cg_to_tf32(g->k.f, fr->a[i][q]);
	for (int j = 0; j < g->ni; j++)
		for (int q = 0; q < 2; q++)
			fr->b[j][q] = cg_to_tf32(g->k.f, fr->b[j][q]);
}

/* ldmatrix the fragments of k-step kk from the stage at byte offset soff
 * (kk * 32 bytes into a row: 16 bf16/f16 or 8 f32). */
static void
load_frags(G *g, LLVMValueRef soff, int kk, Frag *fr)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef abase = cg_add(f, soff, g->a_lane), bbase = cg_add(f, soff, g->b_lane), r[4];

	for (int i = 0; i < g->mi; i++)
		cg_ldmatrix_x4(f, cg_sptr(f, cg_addi(f, abase, i * 16 * g->a_ld + kk * 32)), 0, fr->a[i]);
	if (s->bq.group > 0) {
		gemm_bq_frags(g, soff, kk, fr->b);
		return;
	}
	if (g->mt == DT_TF32 && s->b_layout == CG_B_KN) {
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 2; q++)
				fr->b[j][q] = cg_sload(f, f->ti32, cg_sptr(f, cg_addi(f, bbase, (kk * 8 + 4 * q) * g->b_ld +
										  j * 32)), 4);
		tf32_frags(g, fr);
		return;
	}
	for (int j = 0; j < g->ni / 2; j++) {
		if (s->b_layout == CG_B_NK)
			cg_ldmatrix_x4(f, cg_sptr(f, cg_addi(f, bbase, j * 16 * g->b_ld + kk * 32)), 0, r);
		else
			cg_ldmatrix_x4(f, cg_sptr(f, cg_addi(f, bbase, kk * 16 * g->b_ld + j * 32)), 1, r);
		fr->b[2 * j][0] = r[0];
		fr->b[2 * j][1] = r[1];
		fr->b[2 * j + 1][0] = r[2];
		fr->b[2 * j + 1][1] = r[3];
	}
	if (g->mt == DT_TF32)
		tf32_frags(g, fr);
}

/* The mma of k-step kk (of the stage at soff); with group sums (quantised
 * B, g->bq.gsteps) into the group's own sums, with A's row sums, started at
 * its first k-step and folded into acc after its last. */
static void
mma_frags(G *g, Frag *fr, LLVMValueRef soff, int kk)
{
	CgFn *f = g->k.f;
	int gs = g->bq.gsteps, first = gs && kk % gs == 0;

	if (first)
		gemm_bq_gacc_scales(g, soff, kk);
	for (int i = 0; gs && i < g->mi; i++) {	/* A's row sums: B = 1 */
		LLVMValueRef c[4], d[4], one[2] = {gemm_bq_gacc_ones(g), gemm_bq_gacc_ones(g)};
		for (int q = 0; q < 4; q++) {
			if (!g->bq.rs[i][q])
				g->bq.rs[i][q] = cg_var(f, f->tf32, NULL);
			c[q] = first ? cg_f32(f, 0) : cg_get(f, g->bq.rs[i][q]);
		}
		cg_mma_sync(f, g->mt, fr->a[i], one, c, d);
		for (int q = 0; q < 4; q++)
			cg_set(f, g->bq.rs[i][q], d[q]);
	}
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++) {
			LLVMValueRef c[4], d[4], *v = gs ? g->bq.pacc[i][j] : g->acc[i][j];
			for (int q = 0; q < 4; q++) {
				if (gs && !v[q])
					v[q] = cg_var(f, f->tf32, NULL);
				c[q] = first ? cg_f32(f, 0) : cg_get(f, v[q]);
			}
			cg_mma_sync(f, g->mt, fr->a[i], fr->b[j], c, d);
			for (int q = 0; q < 4; q++)
				cg_set(f, v[q], d[q]);
		}
	if (gs && (kk + 1) % gs == 0)
		gemm_bq_gacc_fold(g);
}

/* Fragments carried across loop iterations live in vars (promoted to phis). */
static void
frag_vars(G *g, Frag *v)
{
	CgFn *f = g->k.f;

	for (int i = 0; i < g->mi; i++)
		for (int q = 0; q < 4; q++)
			v->a[i][q] = cg_var(f, f->ti32, NULL);
	for (int j = 0; j < g->ni; j++)
		for (int q = 0; q < 2; q++)
			v->b[j][q] = cg_var(f, f->ti32, NULL);
}

/* set (to_vars) or get the carried fragments */
static void
frag_move(G *g, Frag *v, Frag *x, int to_vars)
{
	for (int i = 0; i < g->mi; i++)
		for (int q = 0; q < 4; q++) {
			if (to_vars)
				cg_set(g->k.f, v->a[i][q], x->a[i][q]);
			else
				x->a[i][q] = cg_get(g->k.f, v->a[i][q]);
		}
	for (int j = 0; j < g->ni; j++)
		for (int q = 0; q < 2; q++) {
			if (to_vars)
				cg_set(g->k.f, v->b[j][q], x->b[j][q]);
			else
				x->b[j][q] = cg_get(g->k.f, v->b[j][q]);
		}
}

static LLVMValueRef
stage_off(G *g, LLVMValueRef kt)
{
	CgFn *f = g->k.f;

	return cg_muli(f, cg_urem(f, kt, cg_i32(f, g->k.s.stages)), g->stage);
}

/* Refill: cp.async k-tile kt+S-1, if there is one, into its stage; commit. */
static void
refill(G *g, LLVMValueRef kt)
{
	CgFn *f = g->k.f;
	LLVMValueRef kn = cg_addi(f, kt, g->k.s.stages - 1);
	CgIf c;

	cg_if(f, &c, cg_lt(f, kn, cg_i32(f, g->kt)));
	gemm_load_stage(g, stage_off(g, kn), kn);
	cg_endif(f, &c);
	cg_cp_async_commit(f);
}

/*
 * The loop without fragment pipelining (GemmSpec.no_frag_pipe), after the
 * prologue: wait, barrier, refill the stage of k-tile kt-1, then ldmatrix
 * and mma over the stage of kt.  Kept to compare against.
 */
static void
mainloop_plain(G *g)
{
	CgFn *f = g->k.f;
	int S = g->k.s.stages;
	CgLoop l;
	LLVMValueRef kt;
	Frag fr;

	kt = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, g->kt), cg_i32(f, 1));
	refill(g, kt);
	if (g->k.s.bq.direct)
		gemm_bq_fetch(g, cg_addi(f, kt, 1));
	for (int kk = 0; kk < g->k.s.bk / g->kstep; kk++) {
		load_frags(g, stage_off(g, kt), kk, &fr);
		mma_frags(g, &fr, stage_off(g, kt), kk);
	}
	/* k-tile kt+1 has landed; every warp is done with kt */
	cg_cp_async_wait(f, S - 2);
	cg_barrier(f);
	cg_endloop(f, &l);
	cg_barrier(f);
}

/*
 * One k-tile of the pipelined loop over the stage at rd (the next k-tile's at
 * nx): the fragments carried in vars come in and the next tile's first go
 * back out; the barrier that hands over to the next k-tile sits before the
 * last step's mma.
 */
static void
ktile_pipelined(G *g, Frag *vars, LLVMValueRef rd, LLVMValueRef nx)
{
	CgFn *f = g->k.f;
	int KK = g->k.s.bk / g->kstep;
	Frag cur, next;

	frag_move(g, vars, &cur, 0);
	for (int kk = 0; kk < KK; kk++) {
		if (kk + 1 < KK) {
			load_frags(g, rd, kk + 1, &next);
		} else {
			/* k-tile kt+1 has landed; every warp is past its reads of kt-1 */
			cg_cp_async_wait(f, g->k.s.stages - 2);
			cg_barrier(f);
			gemm_bq_wait(g, nx);	/* bulk B: its copies landed (or the stage was skipped) */
			load_frags(g, nx, 0, &next);	/* past the last tile: unused */
		}
		mma_frags(g, &cur, rd, kk);
		cur = next;
	}
	frag_move(g, vars, &cur, 1);
}

/*
 * The multistage mainloop.  Fragments are double-buffered across k-steps:
 * step kk's mma runs while step kk+1's ldmatrix is in flight, and the
 * barrier that hands over to the next k-tile sits before the last step's
 * mma, so the next tile's first ldmatrix overlaps it.  A stage is refilled
 * (k-tile kt+S-1 into the stage of k-tile kt-1) at the top of iteration
 * kt, after the barrier that ended every read of it.
 */
static void
mainloop(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int S = s->stages;
	CgLoop l;
	LLVMValueRef kt, rd, nx;
	Frag cur, vars;

	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				cg_set(f, g->acc[i][j][q], cg_f32(f, 0));
	for (int st = 0; st < S - 1; st++) {
		if (st < g->kt)
			gemm_load_stage(g, cg_i32(f, (int64_t)st * g->stage), cg_i32(f, st));
		cg_cp_async_commit(f);
	}
	cg_cp_async_wait(f, S - 2);
	cg_barrier(f);
	if (s->bq.direct)	/* k-tile 0's B words, straight into registers */
		gemm_bq_first(g);
	if (s->no_frag_pipe) {
		mainloop_plain(g);
		return;
	}
	frag_vars(g, &vars);
	load_frags(g, cg_i32(f, 0), 0, &cur);
	frag_move(g, &vars, &cur, 1);

	kt = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, g->kt), cg_i32(f, 1));
	rd = stage_off(g, kt);
	nx = stage_off(g, cg_addi(f, kt, 1));
	refill(g, kt);
	if (s->bq.direct)	/* k-tile kt+1's B words in flight during kt */
		gemm_bq_fetch(g, cg_addi(f, kt, 1));
	ktile_pipelined(g, &vars, rd, nx);
	cg_endloop(f, &l);
	cg_barrier(f);		/* every warp is done with the stages */
}

/* ---- output quantisation ---- */

/* Static quantisation: the scale and zero point, once per thread, as f32. */
void
gemm_quant_setup(G *g)
{
	CgFn *f = g->k.f;
	const CgQuant *q = &g->k.s.quant;
	LLVMValueRef v;

	if (q->kind != CG_QUANT_STATIC)
		return;
	g->q_scale = cg_f32(f, q->scale);
	g->q_zero = q->zero != 0 ? cg_f32(f, q->zero) : NULL;
	if (q->scale_role) {
		v = cg_load_dt(f, q->scale_dt, g->k.q_scale_p, cg_i64(f, 0));
		g->q_scale = cg_round_dt(f, v, DT_F32);
	}
	if (q->zero_role) {
		v = cg_load_dt(f, q->zero_dt, g->k.q_zero_p, cg_i64(f, 0));
		g->q_zero = cg_round_dt(f, v, DT_F32);
	}
}

/* n quantised bytes (i8) at C[drow, col..]: one 16-bit store for a pair. */
static void
store_q(G *g, LLVMValueRef drow, LLVMValueRef col, LLVMValueRef *bits, int n)
{
	CgFn *f = g->k.f;
	LLVMBuilderRef B = f->B;
	LLVMValueRef off = cg_add(f, cg_muli(f, cg_sext64(f, drow), g->k.s.ldc), cg_sext64(f, col));
	LLVMValueRef p = gptr(f, g->k.C, off, 1), lo, hi;

	if (n == 1) {
		cg_gstore(f, bits[0], p, 1);
		return;
	}
	lo = LLVMBuildZExt(B, bits[0], f->ti16, "");
	hi = LLVMBuildShl(B, LLVMBuildZExt(B, bits[1], f->ti16, ""), LLVMConstInt(f->ti16, 8, 0), "");
	cg_gstore(f, LLVMBuildOr(B, lo, hi, ""), p, 2);
}

/*
 * The epilogue's n results for row slot (mi, h) and fragment j, at columns
 * col, col+1 (n = 2) or output column col (n = 1, after swiglu): stored
 * (at p, C's element (drow, col)), quantised with the static scale, or
 * (group) kept in the accumulator registers until the group scales are
 * known.
 */
static void
result(G *g, int mi, int h, int j, LLVMValueRef drow, LLVMValueRef col, LLVMValueRef p,
       LLVMValueRef *v, int n)
{
	const GemmSpec *s = &g->k.s;
	LLVMValueRef bits[2];

	switch (s->quant.kind) {
	case CG_QUANT_NONE:
		if (s->tma_store && g->o_late)	/* kept until the buffer is free (gemm_epilogue) */
			for (int e = 0; e < n; e++)
				cg_set(g->k.f, g->acc[mi][j][2 * h + e], v[e]);
		else if (s->tma_store)	/* into the warpgroup's buffer (k_gemm_ws.c; tma_store_check: n is 2) */
			gemm_ostage_put(g, mi, h, j, v);
		else
			gemm_store_at(&g->k, p, v, n);
		break;
	case CG_QUANT_STATIC:
		for (int e = 0; e < n; e++)
			bits[e] = cg_quant_emit(g->k.f, &s->quant, s->c_dt, v[e], g->q_scale, g->q_zero);
		store_q(g, drow, col, bits, n);
		break;
	case CG_QUANT_GROUP:	/* the value quantize_dynamic reads: amax and q agree */
		for (int e = 0; e < n; e++)
			cg_set(g->k.f, g->acc[mi][j][2 * h + e], cg_round_dt(g->k.f, v[e], s->quant.in_dt));
		break;
	}
}

/* max(a, |x|), NaN ignored (as fmax in the interpreter) */
static LLVMValueRef
amax(CgFn *f, LLVMValueRef a, LLVMValueRef x)
{
	LLVMValueRef ax = cg_intrinsic(f, "llvm.fabs", f->tf32, &f->tf32, 1, &x, 1);

	return cg_select(f, LLVMBuildFCmp(f->B, LLVMRealOGT, ax, a, ""), ax, a);
}

/* The max over the quad's four lanes, in lane 3 (two shfl.up steps). */
static LLVMValueRef
quad_max(G *g, LLVMValueRef v, LLVMValueRef tq)
{
	CgFn *f = g->k.f;
	LLVMBuilderRef B = f->B;

	for (int d = 1; d < 4; d *= 2) {
		LLVMValueRef o = LLVMBuildBitCast(B, cg_shfl_up(f, LLVMBuildBitCast(B, v, f->ti32, ""), d),
						  f->tf32, "");
		LLVMValueRef take = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSGE, tq, cg_i32(f, d), ""),
						 LLVMBuildFCmp(B, LLVMRealOGT, o, v, ""), "");
		v = cg_select(f, take, o, v);
	}
	return v;
}

/*
 * Group quantisation, after the epilogue program left its results in the
 * accumulator registers.  Row slot (mi, h) of a quad is one row; its
 * fragments j hold output columns q_fw*j + (2t, 2t+1) (or + t after
 * swiglu).  Per segment of q_sg columns: each thread's amax, the quad's in
 * lane 3 (shuffles), written to shared memory [row][segment]; a barrier;
 * each thread reads the group's segments (one, or those of several warps
 * when a group is wider than a warp), and the scale follows.  A second
 * barrier frees the shared memory for the next tile's stages.  Rows past
 * the end take part in the reductions (their values are finite garbage,
 * never stored); only the stores are guarded.
 */
typedef struct {
	int nv, fps, nsw, nst, gs;	/* values per fragment, fragments per segment, segments per
					 * warp and per tile, segments per group */
	LLVMValueRef tq, wo0, seg0, n0;	/* quad lane; the warp's first output column and segment;
					 * the tile's first output column */
	LLVMValueRef rl[MAXF][2];	/* row slot (mi, h): row in the tile */
	LLVMValueRef scale[MAXF][2][MAXF];	/* per row slot and warp segment */
} GQ;

static LLVMValueRef
ieq(CgFn *f, LLVMValueRef a, int64_t b)
{
	return LLVMBuildICmp(f->B, LLVMIntEQ, a, cg_i32(f, b), "");
}

/* The shared slot of (row in the tile, segment of the tile). */
static LLVMValueRef
qslot(G *g, const GQ *q, LLVMValueRef row, LLVMValueRef seg)
{
	CgFn *f = g->k.f;

	return cg_sptr(f, cg_addi(f, cg_muli(f, cg_add(f, cg_muli(f, row, q->nst), seg), 4), g->q_off));
}

/* A barrier of the threads that run the epilogue: the CTA, or on the
 * warp-specialised mainloop its consumer warpgroups (named barrier EPI_BAR;
 * the producer never comes, and its stages are not the amax slots there). */
enum { EPI_BAR = 3 };	/* k_gemm_ws.c's ping-pong takes 1 and 2 */

static void
epi_barrier(G *g)
{
	if (g->k.s.mainloop == CG_MAINLOOP_WS)
		cg_bar_sync(g->k.f, cg_i32(g->k.f, EPI_BAR), g->k.nthr - 128);
	else
		cg_barrier(g->k.f);
}

static void
group_amax(G *g, GQ *q)
{
	CgFn *f = g->k.f;
	CgIf c;

	epi_barrier(g);		/* every warp is past the mainloop's reads of the stages (and the last tile's slots) */
	for (int mi = 0; mi < g->mi; mi++)
		for (int h = 0; h < 2; h++)
			for (int k = 0; k < q->nsw; k++) {
				LLVMValueRef a = cg_f32(f, 0);
				for (int j = k * q->fps; j < (k + 1) * q->fps; j++)
					for (int e = 0; e < q->nv; e++)
						a = amax(f, a, cg_get(f, g->acc[mi][j][2 * h + e]));
				a = quad_max(g, a, q->tq);
				cg_if(f, &c, ieq(f, q->tq, 3));
				cg_sstore(f, a, qslot(g, q, q->rl[mi][h], cg_addi(f, q->seg0, k)), 4);
				cg_endif(f, &c);
			}
	epi_barrier(g);
	for (int mi = 0; mi < g->mi; mi++)
		for (int h = 0; h < 2; h++)
			for (int k = 0; k < q->nsw; k++) {
				LLVMValueRef seg = cg_addi(f, q->seg0, k), a = cg_f32(f, 0);
				LLVMValueRef first = cg_muli(f, cg_udiv(f, seg, cg_i32(f, q->gs)), q->gs);
				for (int i = 0; i < q->gs; i++)
					a = cg_fmax(f, a, cg_sload(f, f->tf32, qslot(g, q, q->rl[mi][h], cg_addi(f, first, i)), 4));
				q->scale[mi][h][k] = cg_quant_emit_scale(f, g->k.s.c_dt, a);
			}
	epi_barrier(g);		/* the slots are stage memory again */
}

/* Row slot (mi, h), stored at row drow: its q, and the scales its warp writes. */
static void
group_store(G *g, const GQ *q, int mi, int h, LLVMValueRef drow)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int64_t ldcs = (g->k.sw >= 0 ? s->N / 2 : s->N) / s->quant.group;
	CgIf c;

	for (int k = 0; k < q->nsw; k++) {
		LLVMValueRef seg = cg_addi(f, q->seg0, k), gcol, off;
		for (int j = k * q->fps; j < (k + 1) * q->fps; j++) {
			LLVMValueRef bits[2], col;
			col = cg_add(f, q->n0, cg_add(f, q->wo0, cg_addi(f, cg_muli(f, q->tq, q->nv), g->q_fw * j)));
			for (int e = 0; e < q->nv; e++)
				bits[e] = cg_quant_emit(f, &s->quant, s->c_dt, cg_get(f, g->acc[mi][j][2 * h + e]),
							q->scale[mi][h][k], NULL);
			store_q(g, drow, col, bits, q->nv);
		}
		if (!s->quant.want_scales)
			continue;
		/* lane t = 0 of the warp holding the group's first segment */
		cg_if(f, &c, LLVMBuildAnd(f->B, ieq(f, cg_urem(f, seg, cg_i32(f, q->gs)), 0), ieq(f, q->tq, 0), ""));
		gcol = cg_add(f, cg_udiv(f, q->n0, cg_i32(f, s->quant.group)), cg_udiv(f, seg, cg_i32(f, q->gs)));
		off = cg_add(f, cg_muli(f, cg_sext64(f, drow), ldcs), cg_sext64(f, gcol));
		cg_gstore(f, q->scale[mi][h][k], gptr(f, g->k.Cs, off, 4), 4);
		cg_endif(f, &c);
	}
}

static void
group_quant(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef gq = cg_shr(f, g->k.lane, 2);
	GQ q;
	CgIf c;

	q.nv = g->k.sw >= 0 ? 1 : 2;
	q.fps = g->q_sg / g->q_fw;
	q.nsw = g->q_wow / g->q_sg;
	q.nst = s->bn * g->q_fw / 8 / g->q_sg;
	q.gs = s->quant.group / g->q_sg;
	q.tq = cg_and(f, g->k.lane, 3);
	q.wo0 = g->k.sw >= 0 ? cg_shr(f, g->wn0, 1) : g->wn0;
	q.seg0 = cg_udiv(f, q.wo0, cg_i32(f, g->q_sg));
	q.n0 = g->k.sw >= 0 ? cg_shr(f, g->k.n0, 1) : g->k.n0;
	for (int mi = 0; mi < g->mi; mi++)
		for (int h = 0; h < 2; h++)
			q.rl[mi][h] = cg_add(f, g->wm0, cg_addi(f, gq, g->mstride * mi + 8 * h));
	group_amax(g, &q);
	for (int mi = 0; mi < g->mi; mi++)
		for (int h = 0; h < 2; h++) {
			LLVMValueRef r = cg_add(f, g->k.row0, q.rl[mi][h]);
			cg_if(f, &c, cg_lt(f, r, g->k.rend));
			group_store(g, &q, mi, h, gemm_dest_row(&g->k, r));
			cg_endif(f, &c);
		}
}

enum { MAT_AHEAD = 32 };	/* MAT leaf values in flight per thread (registers) */

/*
 * Quad stores (GemmSpec.quad_store: --debug=quad-store, CG_QUAD_STORE_DEFAULT; issue 12, session 38).
 * A thread's results of a row are 2 bytes a fragment after swiglu (output
 * column 4j + t) or 4 before (columns 8j + 2t, +1), so a warp's store of
 * fragment j wrote 8 rows x 8 or 16 bytes: each a 32-byte sector of its own,
 * 4x (2x) the sectors C has, one store instruction a fragment.  ncu of
 * Qwen3-30B-A3B at T = 4096 (session 37): k3's 4.84 M "excessive sectors"
 * are 3x its 1.57 M sectors of h, Mixtral's 22.1 M 3x its 7.3 M, and k4's
 * 4.45 M its 4.2 M of slots once more; the cooperative gate|up's consumers
 * store them with the tensor cores idle (64 st.global.b16 a thread a tile).
 * Instead the quad's four lanes (one row) swap their 16-bit results in
 * registers (quad_transpose: four shuffles a 4x4 of words), so that lane t
 * holds 16 consecutive bytes (8 outputs: fragments j0 + 2t and j0 + 2t + 1
 * after swiglu; fragment j0 + t's 8 columns before) and stores them at
 * once: a quad writes 64 whole bytes of its row.  The same values in the
 * same places (the math and its rounding are the lane's own, only the bits
 * move); fragments past the last whole group store as before.  The shuffles
 * need the warp whole, so the results of a warp's rows are computed when
 * its first row is the tile's (rows past it read the rows-ahead row 0,
 * gemm_rows_ahead) and each row stores only where it is the tile's.
 * quad_store: the fragments whose results a lane's 16 bytes gather, where
 * quad stores apply (0: none).
 */
static int
quad_store(const G *g, int nmat)
{
	const GemmSpec *s = &g->k.s;
	int per = g->k.sw >= 0 ? 8 : 4, col = 0;

	for (int i = 0; i < s->ep.n; i++)
		col |= s->ep.in[i].op == CGE_COL;
	/* after swiglu, column leaves (gpt-oss-20b's bias: 2 registers a column, held for all 30
	 * fragments of its 64x240 warpgroups) and a group's results spill (ptxas, CUDA 13.0: 16-32 bytes) */
	if (!s->quad_store || !g->npre || nmat || (g->k.sw >= 0 && col) ||
	    s->quant.kind != CG_QUANT_NONE || s->tma_store || (s->c_dt != DT_BF16 && s->c_dt != DT_F16) ||
	    g->ni < per || s->N % s->bn || (s->ldc * 2) % 16 || (g->k.sw >= 0 && (s->bn % 16 || g->wtn % 16)))
		return 0;
	return per;
}

/* The 4x4 of i32 words x[m] of lane t = m's row of column t, over the quad: y[s] = lane s's x[t]
 * (tq = lane % 4).  Two butterfly steps (lanes t ^ 2, then t ^ 1), two shuffles each. */
static void
quad_transpose(CgFn *f, LLVMValueRef tq, LLVMValueRef *x, LLVMValueRef *y)
{
	LLVMValueRef t0 = LLVMBuildICmp(f->B, LLVMIntNE, cg_and(f, tq, 1), cg_i32(f, 0), "");
	LLVMValueRef t1 = LLVMBuildICmp(f->B, LLVMIntNE, cg_and(f, tq, 2), cg_i32(f, 0), "");
	LLVMValueRef own[2], got[2], p, q, c, d, v[4];

	/* step 1: keep rows (t & 2) | 0,1 of column t, take them of column t ^ 2 */
	for (int e = 0; e < 2; e++) {
		own[e] = cg_select(f, t1, x[2 + e], x[e]);
		got[e] = cg_shfl_xor(f, cg_select(f, t1, x[e], x[2 + e]), 2);
	}
	/* step 2: row t ^ 1 of columns t, t ^ 2 to lane t ^ 1; row t of columns t ^ 1, t ^ 3 back */
	p = cg_select(f, t0, own[1], own[0]);	/* (t, t) */
	q = cg_select(f, t0, got[1], got[0]);	/* (t, t ^ 2) */
	c = cg_shfl_xor(f, cg_select(f, t0, own[0], own[1]), 1);	/* (t, t ^ 1) */
	d = cg_shfl_xor(f, cg_select(f, t0, got[0], got[1]), 1);	/* (t, t ^ 3) */
	/* y[s] = (t, s): the values of columns t ^ u, u = 0..3, put in order */
	v[0] = cg_select(f, t0, c, p);
	v[1] = cg_select(f, t0, p, c);
	v[2] = cg_select(f, t0, d, q);
	v[3] = cg_select(f, t0, q, d);
	for (int s = 0; s < 4; s++)
		y[s] = cg_select(f, t1, v[s ^ 2], v[s]);
}

/* Lane tq's 16 bytes from the words x[m] (m = 0..3, quad_row): fragment j0 + m's pair before swiglu,
 * fragments j0 + 2m (low half) and j0 + 2m + 1 after (per 8); the words in column order. */
static void
quad_words(CgFn *f, LLVMValueRef tq, LLVMValueRef *x, int per, LLVMValueRef *o)
{
	LLVMValueRef y[4], lo = cg_i32(f, 0xffff), hi = cg_i32(f, (int32_t)0xffff0000);

	quad_transpose(f, tq, x, y);
	if (per == 4) {
		memcpy(o, y, sizeof y);
		return;
	}
	for (int e = 0; e < 2; e++) {	/* fragment j0 + 2 tq's 4 outputs (lanes 0..3), then j0 + 2 tq + 1's */
		o[e] = LLVMBuildOr(f->B, LLVMBuildAnd(f->B, y[2 * e], lo, ""),
				   LLVMBuildShl(f->B, y[2 * e + 1], cg_i32(f, 16), ""), "");
		o[2 + e] = LLVMBuildOr(f->B, LLVMBuildLShr(f->B, y[2 * e], cg_i32(f, 16), ""),
				       LLVMBuildAnd(f->B, y[2 * e + 1], hi, ""), "");
	}
}

/* Fragment j's results of row slot (mi, h): n (1 after swiglu, else 2) in res, their column in *out. */
static int
quad_pair(G *g, int mi, int h, int j, LLVMValueRef *cols, LLVMValueRef (*colv)[2][CG_EP_MAX],
	  LLVMValueRef *res, LLVMValueRef *out)
{
	CgFn *f = g->k.f;
	GemmPair p = {.col = cols[j], .colv = colv[j]};
	int n;

	p.acc[0] = cg_get(f, g->acc[mi][j][2 * h]);
	p.acc[1] = cg_get(f, g->acc[mi][j][2 * h + 1]);
	n = gemm_ep_pair(&g->k, &g->pre[mi][h], &p);
	*out = p.out;
	for (int e = 0; e < n; e++)
		res[e] = p.res[e];
	return n;
}

/* Row slot (mi, h) by quad stores (quad_store: per fragments a lane's 16
 * bytes), a group at a time: its results, the shuffles, then the row's store
 * where the row is the tile's (so that only a group's results are live). */
static void
quad_row(G *g, int mi, int h, int per, LLVMValueRef *cols, LLVMValueRef (*colv)[2][CG_EP_MAX])
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int sw = g->k.sw >= 0, esz = esize(s->c_dt), nq = g->ni / per * per;
	LLVMValueRef tq = cg_and(f, g->k.lane, 3);
	LLVMValueRef rw = cg_add(f, g->k.row0, cg_add(f, g->wm0, cg_i32(f, g->mstride * mi + 8 * h)));
	LLVMValueRef bits[2], x[4], words[4], res[2], out, c0, lane0, mine;
	const GemmRow *row = &g->pre[mi][h];
	CgIf w, c;

	cg_if(f, &w, cg_lt(f, rw, g->k.rend));	/* the warp's first row is the tile's (wm0 has no gq) */
	mine = cg_lt(f, cg_add(f, rw, cg_shr(f, g->k.lane, 2)), g->k.rend);
	c0 = gemm_c_ptr(&g->k, row->drow, sw ? cg_shr(f, cols[0], 1) : cols[0]);
	/* lane tq's first element: (n0 + wn0)/2 + 4 j0 + 8 tq after swiglu (c0 is tq on), n0 + wn0 + 8 j0 + 8 tq
	 * before (c0: 2 tq) */
	lane0 = cg_sext64(f, cg_muli(f, tq, (sw ? 7 : 6) * esz));
	for (int j0 = 0; j0 < nq; j0 += per) {
		LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(f->ti32, 4));
		for (int j = j0; j < j0 + per; j++) {	/* packed as they come: a word a pair */
			int n = quad_pair(g, mi, h, j, cols, colv, res, &out);
			for (int e = 0; e < n; e++)
				bits[e] = cg_from_f32(f, res[e], s->c_dt);
			if (n == 2)
				x[j - j0] = cg_pack16x2(f, bits[0], bits[1]);
			else if ((j - j0) % 2)
				x[(j - j0) / 2] = cg_pack16x2(f, x[(j - j0) / 2], bits[0]);
			else
				x[(j - j0) / 2] = bits[0];
		}
		quad_words(f, tq, x, per, words);
		for (int e = 0; e < 4; e++)
			vec = LLVMBuildInsertElement(f->B, vec, words[e], cg_i32(f, e), "");
		cg_if(f, &c, mine);
		cg_gstore(f, vec, cg_gep(f, c0, cg_add(f, lane0, cg_i64(f, (int64_t)(sw ? 4 : 8) * j0 * esz)), 1), 16);
		cg_endif(f, &c);
	}
	cg_if(f, &c, mine);
	for (int j = nq; j < g->ni; j++) {	/* past the last whole group: as gemm_epilogue stores */
		int n = quad_pair(g, mi, h, j, cols, colv, res, &out);
		result(g, mi, h, j, row->drow, out, cg_gep(f, c0, cg_i64(f, (int64_t)(sw ? 4 : 8) * j * esz), 1), res, n);
	}
	cg_endif(f, &c);
	cg_endif(f, &w);
}

/*
 * Thread (g, t) = (lane / 4, lane % 4) holds, for fragment (i, j), rows
 * wm0 + 16i + g (+8) and columns wn0 + 8j + 2t (+1): one row at a time,
 * two adjacent columns per fragment, which is what swiglu pairs.  The COL
 * leaves depend on the column only: loaded once, before the rows.  A row's
 * stores go to its first fragment's C element plus 8j columns (4j after
 * swiglu: the column is even), constant offsets the stores take as they
 * are, not 64-bit sums per fragment.
 */
void
gemm_epilogue(G *g)
{
	CgFn *f = g->k.f;
	const CgEpilogue *ep = &g->k.s.ep;
	int sw = g->k.sw, nin = sw >= 0 ? sw : ep->n;
	LLVMValueRef gq = cg_shr(f, g->k.lane, 2), tq = cg_and(f, g->k.lane, 3);
	LLVMValueRef colv[MAXF][2][CG_EP_MAX], matv[MAXF][2][CG_EP_MAX], cols[MAXF];
	/* matrix leaves (a residual) of `ahead` pairs are loaded before their
	 * stores (gemm_mat_leaves), MAT_AHEAD values at most */
	int nmat = gemm_mat_values(&g->k), ahead = nmat ? MAX(1, MIN(g->ni, MAT_AHEAD / nmat)) : g->ni, quad;

	for (int j = 0; j < g->ni; j++) {
		LLVMValueRef c = cg_add(f, g->k.n0, cg_add(f, g->wn0, cg_addi(f, cg_shl(f, tq, 1), 8 * j)));
		cols[j] = c;
		for (int i = 0; i < ep->n; i++) {
			if (ep->in[i].op != CGE_COL)
				continue;
			if (i < nin) {
				colv[j][0][i] = gemm_col_leaf(&g->k, i, c);
				colv[j][1][i] = gemm_col_leaf(&g->k, i, cg_addi(f, c, 1));
			} else {
				colv[j][0][i] = gemm_col_leaf(&g->k, i, cg_shr(f, c, 1));
			}
		}
	}
	/* --debug=dense-c2: with one buffer a warpgroup, block mi's wait for block mi - 1's TMA store
	 * comes after mi's epilogue math (the results wait in the accumulators), not before it */
	g->o_late = g->k.s.tma_store && cg_gemm_dense_c2_on(f->m);
	quad = quad_store(g, nmat);
	for (int mi = 0; mi < g->mi; mi++) {
		if (g->k.s.tma_store && !g->o_late)
			gemm_ostage_begin(g, mi);
		for (int h = 0; h < 2; h++) {
			if (quad) {
				quad_row(g, mi, h, quad, cols, colv);
				continue;
			}
			LLVMValueRef r = cg_add(f, g->k.row0, cg_add(f, g->wm0, cg_addi(f, gq, g->mstride * mi + 8 * h)));
			GemmRow row;
			CgIf c;
			LLVMValueRef c0;
			cg_if(f, &c, cg_lt(f, r, g->k.rend));
			if (g->npre)
				row = g->pre[mi][h];
			else
				gemm_row(&g->k, r, &row);
			c0 = g->k.s.quant.kind != CG_QUANT_NONE || g->k.s.tma_store ? NULL
				: gemm_c_ptr(&g->k, row.drow, sw >= 0 ? cg_shr(f, cols[0], 1) : cols[0]);
			for (int j0 = 0; j0 < g->ni; j0 += ahead) {
				int j1 = MIN(j0 + ahead, g->ni);
				for (int j = j0; j < j1 && nmat; j++)
					gemm_mat_leaves(&g->k, &row, cols[j], matv[j]);
				for (int j = j0; j < j1; j++) {
					GemmPair p = {.col = cols[j], .colv = colv[j], .matv = nmat ? matv[j] : NULL};
					int64_t at = (sw >= 0 ? 4 : 8) * j * esize(g->k.s.c_dt);
					p.acc[0] = cg_get(f, g->acc[mi][j][2 * h]);
					p.acc[1] = cg_get(f, g->acc[mi][j][2 * h + 1]);
					int n = gemm_ep_pair(&g->k, &row, &p);
					result(g, mi, h, j, row.drow, p.out, c0 ? cg_gep(f, c0, cg_i64(f, at), 1) : NULL,
					       p.res, n);
				}
			}
			cg_endif(f, &c);
		}
		if (g->o_late) {	/* rows past M: their accumulators, never stored (the map clips them) */
			gemm_ostage_begin(g, mi);
			for (int h = 0; h < 2; h++)
				for (int j = 0; j < g->ni; j++) {
					LLVMValueRef v[2] = {cg_get(f, g->acc[mi][j][2 * h]),
							     cg_get(f, g->acc[mi][j][2 * h + 1])};
					gemm_ostage_put(g, mi, h, j, v);
				}
		}
		if (g->k.s.tma_store)
			gemm_ostage_flush(g, mi);
	}
	if (g->k.s.quant.kind == CG_QUANT_GROUP)
		group_quant(g);
	g->npre = 0;
}

/*
 * A grouped tile's epilogue rows are loads of loads (the scatter's
 * destination row, sidx[r]; a gathered row leaf, rstd[rows[r] / k]; the
 * routing weight, w[rows[r]]), which the epilogue would wait for row by
 * row while the tensor cores idle (ncu, Qwen3-30B-A3B at T = 4096: the
 * expert GEMMs' top stall is long_scoreboard).  Issued before the tile's
 * k-tiles they land during them.  A row past the tile reads row 0 (every
 * index array has one; such rows are not stored).  The same bits.
 */
void
gemm_rows_ahead(G *g)
{
	CgFn *f = g->k.f;
	LLVMValueRef gq = cg_shr(f, g->k.lane, 2);

	g->npre = 0;
	if (g->k.s.groups == 0 || g->mi > PRE_MI)
		return;
	for (int mi = 0; mi < g->mi; mi++)
		for (int h = 0; h < 2; h++) {
			LLVMValueRef r = cg_add(f, g->k.row0, cg_add(f, g->wm0, cg_addi(f, gq, g->mstride * mi + 8 * h)));
			r = LLVMBuildSelect(f->B, cg_lt(f, r, g->k.rend), r, cg_i32(f, 0), "");
			gemm_row(&g->k, r, &g->pre[mi][h]);
		}
	g->npre = 1;
}

/* ---- split-K (GemmSpec.split_k; the workspace layout is in codegen.h) ---- */

/* dynamic stream-K: units handed out by a counter (GemmSpec.units) */
static int
dyn(const GemmSpec *s)
{
	return s->sched == CG_SCHED_STREAM && s->units > 0;
}

/* The flags: a tile's each, then (dynamic stream-K) the unit counter. */
static int64_t
split_flags(const GemmSpec *s)
{
	return ((int64_t)(s->split_slots + dyn(s)) * 4 + 15) & ~(int64_t)15;
}

/* split-K or stream-K: the kernel hands partial sums over in the workspace */
static int
hands_over(const GemmSpec *s)
{
	return s->split_k > 1 || s->sched == CG_SCHED_STREAM;
}

/* GemmSpec.fold's ticket: one word (16 bytes, the flags' alignment) */
#define FOLD_FLAG_BYTES 16

int64_t
cg_gemm_split_flag_bytes(const GemmSpec *s)
{
	return hands_over(s) ? (int64_t)(s->split_slots + dyn(s)) * 4 : s->fold.k > 0 ? FOLD_FLAG_BYTES : 0;
}

int64_t
cg_gemm_split_bytes(const GemmSpec *s)
{
	int64_t slots = dyn(s) ? (int64_t)s->units * s->ctas : s->split_slots;	/* a unit's, a tile's */

	return hands_over(s) ? split_flags(s) + slots * s->bm * s->bn * 4 : s->fold.k > 0 ? FOLD_FLAG_BYTES : 0;
}

/*
 * GemmSpec.live_sums: whether this thread's accumulator row (mi, h) is in
 * the tile (row < rend).  Rows past it are never stored (the epilogue's
 * test), so their sums need not travel: at T = 16 a decode tile's expert
 * holds 1-4 of its 16 rows, and a hand-over of all 16 moved 12 KB of f32
 * each way where ~1.5 KB are live (gpt-oss-20b's MXFP4 down: 528 of them,
 * ~10% of its bytes through the L2).  The lanes of dead rows skip their
 * stores and loads, so a warp's access for element a touches only the
 * sectors of its live lanes.
 */
static LLVMValueRef
sum_row_live(G *g, int mi, int h)
{
	CgFn *f = g->k.f;
	LLVMValueRef r = cg_addi(f, cg_shr(f, g->k.lane, 2), g->mstride * mi + 8 * h);

	return cg_lt(f, cg_add(f, g->k.row0, cg_add(f, g->wm0, r)), g->k.rend);
}

/*
 * Accumulator (i, j, q): element a = ((i ni) + j) 4 + q of the slot at
 * part, thread t's at a * threads + t: the running sum of the part before
 * added to it (load = 1), or it stored for the next part (0).  live (i1,
 * live_sums; NULL: every row) is whether the accumulator's row is in the
 * tile.  Without branches around blocks of them: a lane-divergent region in
 * the tile end makes ptxas put convergence barriers (BSSY, BSYNC,
 * WARPSYNC) into the unrolled loop's copies (+20 instructions over 5 bf16
 * k-tiles).  A dead lane loads the element of lane t % 4 (its warp's first
 * row: in the tile for 16-row tiles, so a sector the live lanes read anyway)
 * and adds it to an accumulator nobody stores; a store is one instruction
 * under its condition, which ptxas predicates.
 */
static void
sum_elem(G *g, LLVMValueRef part, int i, int j, int q, int load, LLVMValueRef live)
{
	CgFn *f = g->k.f;
	int64_t a = ((int64_t)i * g->ni + j) * 4 + q;
	LLVMValueRef t = g->k.tid, at;
	CgIf c;

	if (live && load)	/* tid - lane + lane % 4 */
		t = cg_select(f, live, t, cg_sub(f, t, cg_and(f, g->k.lane, ~3)));
	at = cg_gep(f, part, cg_sext64(f, cg_addi(f, t, a * g->k.nthr)), 4);
	if (load) {
		LLVMValueRef run = cg_gload_volatile(f, f->tf32, at, 4);
		cg_set(f, g->acc[i][j][q], LLVMBuildFAdd(f->B, run, cg_get(f, g->acc[i][j][q]), ""));
		return;
	}
	if (live)
		cg_if(f, &c, live);
	cg_gstore_volatile(f, cg_get(f, g->acc[i][j][q]), at, 4);
	if (live)
		cg_endif(f, &c);
}

/* Every accumulator through sum_elem; under live_sums (the mma.sync
 * mainloop's rows, or the cp.async wgmma one's: row blocks 64 apart) with
 * its row's test. */
static void
sum_move(G *g, LLVMValueRef part, int load)
{
	const GemmSpec *s = &g->k.s;
	int by_row = s->live_sums && (s->mainloop == CG_MAINLOOP_MMA || s->mainloop == CG_MAINLOOP_WGMMA);

	for (int i = 0; i < g->mi; i++) {
		LLVMValueRef live[2] = {by_row ? sum_row_live(g, i, 0) : NULL, by_row ? sum_row_live(g, i, 1) : NULL};
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				sum_elem(g, part, i, j, q, load, live[q / 2]);
	}
}

/*
 * Hand the tile's partial sums along its parts: part z (of nz, i32) waits
 * until part z-1 has handed over (the flag of slot w says z), adds the
 * running sum to the accumulators (running sum first: the order is the
 * parts' order), and passes the sum on unless it is the last part.  Thread
 * t keeps accumulator a at element a * threads + t of the slot (coalesced).
 * Returns "this is the last part": only it runs the epilogue.  Split-K:
 * the parts are the slices (grid z); stream-K: the CTAs sharing a tile.
 */
static LLVMValueRef
split_reduce(G *g, LLVMValueRef z, LLVMValueRef nz, LLVMValueRef w)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef t0 = LLVMBuildICmp(f->B, LLVMIntEQ, g->k.tid, cg_i32(f, 0), "");
	LLVMValueRef w64 = cg_sext64(f, w), last = cg_addi(f, nz, -1);
	LLVMValueRef flag = cg_gep(f, g->k.ws, w64, 4);
	LLVMValueRef part = cg_gep(f, cg_gep(f, g->k.ws, cg_i64(f, split_flags(s)), 1),
				   cg_muli(f, w64, (int64_t)s->bm * s->bn), 4);
	/* live_sums: also the hand-over of the front and CUTLASS's semaphore: the
	 * parts out, a barrier, thread 0's fence.acq_rel.gpu and the flag (a
	 * release), where every thread's fence.sc.gpu came before the barrier */
	int light = s->live_sums;
	CgIf c, c0;

	cg_if(f, &c, cg_lt(f, cg_i32(f, 0), z));
	cg_if(f, &c0, t0);
	cg_spin_until(f, flag, z);
	if (cg_module_debug(f->m) & DBG_KEPT_FLAGS) {	/* the last part leaves the flag 0 for the next launch */
		CgIf c1;
		cg_if(f, &c1, LLVMBuildICmp(f->B, LLVMIntEQ, z, last, ""));
		cg_gstore_volatile(f, cg_i32(f, 0), flag, 4);
		cg_endif(f, &c1);
	}
	if (light)		/* an acquire of what the flag released */
		cg_fence_acq_rel(f);
	else
		cg_fence(f);
	cg_endif(f, &c0);
	cg_barrier(f);
	sum_move(g, part, 1);
	cg_endif(f, &c);
	cg_if(f, &c, cg_lt(f, z, last));
	sum_move(g, part, 0);
	if (!light)
		cg_fence(f);
	cg_barrier(f);		/* every thread's part is out */
	cg_if(f, &c0, t0);
	if (light)		/* the release of the CTA's part: cumulative over the barrier */
		cg_fence_acq_rel(f);
	cg_gstore_volatile(f, cg_addi(f, z, 1), flag, 4);
	cg_endif(f, &c0);
	cg_endif(f, &c);
	return LLVMBuildICmp(f->B, LLVMIntEQ, z, last, "");
}

/* ---- the kernel ---- */

/* One tile, its coordinates set (gemm_end's callback: k is g's first member). */
static void
tile(GemmCore *k)
{
	G *g = (G *)k;

	tile_sources(g);
	if (k->s.mainloop == CG_MAINLOOP_WGMMA)
		gemm_wgmma_mainloop(g);
	else
		mainloop(g);
	if (k->s.split_k > 1) {
		CgIf c;
		cg_if(k->f, &c, split_reduce(g, cg_ctaid(k->f, 2), cg_i32(k->f, k->s.split_k), k->w));
		gemm_epilogue(g);
		cg_endif(k->f, &c);
		return;
	}
	gemm_epilogue(g);
}

/* ---- stream-K (CG_SCHED_STREAM; codegen.h has the contract) ---- */

/* A CTA's run over the pairs g = tile * KT + k-tile: virtual index v (CTA
 * ctas-1-c), [g0, g1), and the sources of the tile its loads are in. */
typedef struct Stream Stream;
struct Stream {
	LLVMValueRef v, g0, g1, L64, n64;
	LLVMValueRef X64, w64, W64;		/* GemmSpec.tail: the short runs, a long run's weight, the
						 * weights' sum (stream_runs); X64 NULL: equal runs */
	LLVMValueRef lt;			/* var: the tile a_src/b_src are for (-1: none) */
	LLVMValueRef lkt, ct, pend, last;	/* stream_unrolled: vars: the load stream's k-tile in lt, the
						 * mma side's tile, the pair its part of it ends at; g1-1 */
	LLVMValueRef a[MAXI], b[MAXI];		/* vars: its sources at k-tile 0 */
	LLVMValueRef live[MAXI];		/* vars: A's chunk i in a row of the tile (gemm_live_rows) */
	LLVMValueRef q[3][MAXI];		/* vars: quantised B's (packed B, scales, zero points) */
};

/* The load stream's variables: no tile's sources yet. */
static void
stream_vars(G *g, Stream *st)
{
	CgFn *f = g->k.f;

	st->lt = cg_var(f, f->ti32, cg_i32(f, -1));
	st->lkt = cg_var(f, f->ti32, NULL);
	st->ct = cg_var(f, f->ti32, NULL);
	st->pend = cg_var(f, f->ti32, NULL);
	for (int i = 0; i < g->a_n; i++) {
		st->a[i] = cg_var(f, LLVMTypeOf(g->k.A), NULL);
		st->live[i] = gemm_live_rows(&g->k.s) ? cg_var(f, f->ti1, NULL) : NULL;
	}
	for (int i = 0; i < g->b_n; i++)
		st->b[i] = cg_var(f, LLVMTypeOf(g->k.B), NULL);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < g->bq.nper[i]; j++)	/* chunks after 0 at a constant step: none */
			st->q[i][j] = j > 0 && g->bq.gstep[i] ? NULL : cg_var(f, LLVMTypeOf(g->k.B), NULL);
}

/*
 * L pairs over n runs (i64).  Equal runs, v * L / n; or with a tail
 * (GemmSpec.tail, --debug=sk-tail) weighed runs: the SMs do not stream at one
 * rate (ncu: the slowest 14-17% above the average, docs/codegen.md "Stream-K
 * in waves"), so the first-dispatched CTAs take long runs and the last `tail`
 * CTAs (runs v < X = min(tail, n), dispatched as slots free up: on the SMs
 * that finished first) short ones.  Run v's weight is 1 below X and w above:
 * W(v) = v + (w - 1) max(v - X, 0), run v = [L W(v) / Wt, L W(v+1) / Wt),
 * Wt = W(n).  Where L < Wt a short run could be empty and a hand-over chain
 * would wait for a part that no run holds: equal runs then (w = 1, Wt = n).
 */
static void
stream_runs(G *g, Stream *st, LLVMValueRef L, LLVMValueRef n)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef wt, few;

	st->L64 = cg_sext64(f, L);
	st->n64 = cg_sext64(f, n);
	st->X64 = st->w64 = st->W64 = NULL;
	if (!s->tail)
		return;
	st->X64 = cg_min(f, cg_i64(f, s->tail), st->n64);
	wt = cg_add(f, st->X64, cg_muli(f, cg_sub(f, st->n64, st->X64), s->tail_w));
	few = cg_lt(f, st->L64, wt);
	st->w64 = cg_select(f, few, cg_i64(f, 1), cg_i64(f, s->tail_w));
	st->W64 = cg_select(f, few, st->n64, wt);
}

/* The first pair of run v: L W(v) / Wt, v * L / n for equal runs (an i32). */
static LLVMValueRef
run_start(CgFn *f, const Stream *st, LLVMValueRef v)
{
	LLVMValueRef v64 = cg_sext64(f, v), w;

	if (!st->X64)
		return LLVMBuildTrunc(f->B, cg_udiv(f, cg_mul(f, v64, st->L64), st->n64), f->ti32, "");
	w = cg_add(f, v64, cg_mul(f, cg_addi(f, st->w64, -1), cg_max(f, cg_sub(f, v64, st->X64), cg_i64(f, 0))));
	return LLVMBuildTrunc(f->B, cg_udiv(f, cg_mul(f, w, st->L64), st->W64), f->ti32, "");
}

/* The run holding pair x: the last v with run_start(v) <= x.  Equal runs:
 * ((x+1) * n - 1) / L.  Weighed: the last weight m = ((x+1) Wt - 1) / L with
 * L m / Wt <= x, then the last v with W(v) <= m: min(m, X) + max(m - X, 0) / w. */
static LLVMValueRef
run_owner(CgFn *f, const Stream *st, LLVMValueRef x)
{
	LLVMValueRef x1 = cg_sext64(f, cg_addi(f, x, 1)), m, v;

	if (!st->X64)
		return LLVMBuildTrunc(f->B, cg_udiv(f, cg_addi(f, cg_mul(f, x1, st->n64), -1), st->L64), f->ti32, "");
	m = cg_udiv(f, cg_addi(f, cg_mul(f, x1, st->W64), -1), st->L64);
	v = cg_add(f, cg_min(f, m, st->X64), cg_udiv(f, cg_max(f, cg_sub(f, m, st->X64), cg_i64(f, 0)), st->w64));
	return LLVMBuildTrunc(f->B, v, f->ti32, "");
}

/* The load stream enters tile t: its coordinates and sources, into the vars. */
static void
stream_enter(G *g, Stream *st, LLVMValueRef t)
{
	CgFn *f = g->k.f;

	gemm_tile_coords(&g->k, t);
	tile_sources(g);
	for (int i = 0; i < g->a_n; i++) {
		cg_set(f, st->a[i], g->a_src[i]);
		if (st->live[i] && g->a_live[i])
			cg_set(f, st->live[i], g->a_live[i]);
	}
	for (int i = 0; i < g->b_n; i++)
		cg_set(f, st->b[i], g->b_src[i]);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < g->bq.nper[i]; j++)
			if (g->bq.src[i][j])
				cg_set(f, st->q[i][j], g->bq.src[i][j]);
	cg_set(f, st->lt, t);
}

/* The sources of the load stream's tile, from the vars. */
static void
stream_sources(G *g, Stream *st)
{
	CgFn *f = g->k.f;

	for (int i = 0; i < g->a_n; i++) {
		g->a_src[i] = cg_get(f, st->a[i]);
		if (st->live[i] && g->a_live[i])
			g->a_live[i] = cg_get(f, st->live[i]);
	}
	for (int i = 0; i < g->b_n; i++)
		g->b_src[i] = cg_get(f, st->b[i]);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < g->bq.nper[i]; j++)
			if (st->q[i][j])
				g->bq.src[i][j] = cg_get(f, st->q[i][j]);
}

/* cp.async pair gi into its stage: the tile's sources first when the load
 * stream enters a new tile (this is what runs ahead of the tile in the mma). */
static void
stream_load(G *g, Stream *st, LLVMValueRef gi, LLVMValueRef soff)
{
	CgFn *f = g->k.f;
	LLVMValueRef t = cg_udiv(f, gi, cg_i32(f, g->kt)), kt = cg_urem(f, gi, cg_i32(f, g->kt));
	CgIf c;

	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntNE, t, cg_get(f, st->lt), ""));
	stream_enter(g, st, t);
	cg_endif(f, &c);
	stream_sources(g, st);
	gemm_load_stage(g, soff, kt);
}

/* The end of this run's part of tile t: hand the partial sums over along
 * the runs sharing the tile (from the one with its last k-tile, part 0, to
 * the one with its first), the last of them runs the epilogue. */
static void
stream_end(G *g, Stream *st, LLVMValueRef t)
{
	CgFn *f = g->k.f;
	LLVMValueRef first = cg_muli(f, t, g->kt);
	LLVMValueRef lo = run_owner(f, st, first), hi = run_owner(f, st, cg_addi(f, first, g->kt - 1));
	CgIf c;

	gemm_tile_coords(&g->k, t);
	cg_if(f, &c, split_reduce(g, cg_sub(f, hi, st->v), cg_addi(f, cg_sub(f, hi, lo), 1), t));
	gemm_epilogue(g);
	cg_endif(f, &c);
}

/* Bulk B (CgBQuant.bulk): the else of a refill's test, where the stage of
 * pair p + d (i32, built in the else), with no pair to load, gets its one
 * arrival (the consumers wait for every stage in turn); without bulk B no
 * else at all (the branches as they were). */
static void
refill_else(G *g, CgIf *c, LLVMValueRef p, int d)
{
	if (!g->k.s.bq.bulk)
		return;
	cg_else(g->k.f, c);
	gemm_bq_skip(g, stage_off(g, cg_addi(g->k.f, p, d)));
}

/*
 * The whole schedule of a stream-K kernel: mainloop()'s pipeline over the
 * run's pairs instead of one tile's k-tiles, the accumulators zeroed where
 * a tile starts and handed over (or stored) where it ends, in the loop, so
 * the loads of the next tile are in flight during that tile's end.
 */
static void
stream(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int S = s->stages, KT = g->kt;
	LLVMValueRef L = cg_muli(f, gemm_work_total(&g->k), KT), n = cg_min(f, cg_nctaid(f, 0), L);
	LLVMValueRef gi, kt, rd, nx, edge;
	Stream st;
	CgIf c, c1;
	CgLoop l;
	Frag cur, vars;

	st.v = cg_sub(f, cg_addi(f, cg_nctaid(f, 0), -1), cg_ctaid(f, 0));
	stream_vars(g, &st);
	gemm_bq_bulk_init(g);
	cg_if(f, &c, cg_lt(f, st.v, n));	/* n = 0 (T = 0, no rows): nothing */
	stream_runs(g, &st, L, n);
	st.g0 = run_start(f, &st, st.v);
	st.g1 = run_start(f, &st, cg_addi(f, st.v, 1));
	for (int i = 0; i < S - 1; i++) {
		LLVMValueRef p = cg_addi(f, st.g0, i);
		cg_if(f, &c1, cg_lt(f, p, st.g1));
		stream_load(g, &st, p, stage_off(g, p));
		refill_else(g, &c1, p, 0);
		cg_endif(f, &c1);
		cg_cp_async_commit(f);
	}
	cg_cp_async_wait(f, S - 2);
	cg_barrier(f);
	frag_vars(g, &vars);
	gemm_bq_wait(g, stage_off(g, st.g0));
	load_frags(g, stage_off(g, st.g0), 0, &cur);
	frag_move(g, &vars, &cur, 1);

	gi = cg_loop(f, &l, st.g0, st.g1, cg_i32(f, 1));
	kt = cg_urem(f, gi, cg_i32(f, KT));
	rd = stage_off(g, gi);
	nx = stage_off(g, cg_addi(f, gi, 1));
	cg_if(f, &c1, cg_lt(f, cg_addi(f, gi, S - 1), st.g1));	/* refill: pair gi+S-1 */
	stream_load(g, &st, cg_addi(f, gi, S - 1), stage_off(g, cg_addi(f, gi, S - 1)));
	refill_else(g, &c1, gi, S - 1);
	cg_endif(f, &c1);
	cg_cp_async_commit(f);
	edge = LLVMBuildOr(f->B, LLVMBuildICmp(f->B, LLVMIntEQ, gi, st.g0, ""),
			   LLVMBuildICmp(f->B, LLVMIntEQ, kt, cg_i32(f, 0), ""), "");
	cg_if(f, &c1, edge);	/* the first k-tile of this run's part of a tile */
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				cg_set(f, g->acc[i][j][q], cg_f32(f, 0));
	cg_endif(f, &c1);
	ktile_pipelined(g, &vars, rd, nx);
	edge = LLVMBuildOr(f->B, LLVMBuildICmp(f->B, LLVMIntEQ, gi, cg_addi(f, st.g1, -1), ""),
			   LLVMBuildICmp(f->B, LLVMIntEQ, kt, cg_i32(f, KT - 1), ""), "");
	cg_if(f, &c1, edge);	/* its last: hand over, or the epilogue */
	stream_end(g, &st, cg_udiv(f, gi, cg_i32(f, KT)));
	cg_endif(f, &c1);
	cg_endloop(f, &l);
	cg_cp_async_wait(f, 0);
	cg_barrier(f);
	cg_endif(f, &c);
}

/* Zero the accumulators. */
static void
acc_zero(G *g)
{
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				cg_set(g->k.f, g->acc[i][j][q], cg_f32(g->k.f, 0));
}

/* The load stream's next pair into the stage at soff: its k-tile (st->lkt)
 * counts on, into the next tile where it reaches KT. */
static void
stream_next(G *g, Stream *st, LLVMValueRef soff)
{
	CgFn *f = g->k.f;
	LLVMValueRef kt;
	CgIf c;

	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, cg_get(f, st->lkt), cg_i32(f, g->kt), ""));
	stream_enter(g, st, cg_addi(f, cg_get(f, st->lt), 1));
	cg_set(f, st->lkt, cg_i32(f, 0));
	cg_endif(f, &c);
	kt = cg_get(f, st->lkt);
	stream_sources(g, st);
	gemm_load_stage(g, soff, kt);
	cg_set(f, st->lkt, cg_addi(f, kt, 1));
}

/* stream_unrolled's start (in the CTA's branch): the run, the counters,
 * its first S-1 pairs into stages 0..S-2, the accumulators zeroed. */
static void
unrolled_begin(G *g, Stream *st, LLVMValueRef L, LLVMValueRef n)
{
	CgFn *f = g->k.f;
	int S = g->k.s.stages, KT = g->kt;
	LLVMValueRef t0;
	CgIf c;

	stream_runs(g, st, L, n);
	st->g0 = run_start(f, st, st->v);
	st->g1 = run_start(f, st, cg_addi(f, st->v, 1));
	st->last = cg_addi(f, st->g1, -1);
	t0 = cg_udiv(f, st->g0, cg_i32(f, KT));
	stream_enter(g, st, t0);
	cg_set(f, st->lkt, cg_sub(f, st->g0, cg_muli(f, t0, KT)));
	cg_set(f, st->ct, t0);
	cg_set(f, st->pend, cg_min(f, cg_addi(f, cg_muli(f, t0, KT), KT - 1), st->last));
	for (int i = 0; i < S - 1; i++) {
		cg_if(f, &c, cg_lt(f, cg_addi(f, st->g0, i), st->g1));
		stream_next(g, st, cg_i32(f, (int64_t)i * g->stage));
		refill_else(g, &c, cg_i32(f, i), 0);
		cg_endif(f, &c);
		cg_cp_async_commit(f);
	}
	cg_cp_async_wait(f, S - 2);
	cg_barrier(f);
	gemm_bq_wait(g, cg_i32(f, 0));
	acc_zero(g);
}

/* The tile-end block `end`: this run's part of tile ct ends (hand-over or
 * epilogue), the accumulators are zeroed, ct and pend move to the next
 * tile, and the copy after copy jv goes on (cont[jv]). */
static void
unrolled_end(G *g, Stream *st, LLVMBasicBlockRef end, LLVMValueRef jv, LLVMBasicBlockRef *cont)
{
	CgFn *f = g->k.f;
	LLVMBasicBlockRef at = LLVMGetInsertBlock(f->B);
	LLVMValueRef sw;

	LLVMPositionBuilderAtEnd(f->B, end);
	stream_end(g, st, cg_get(f, st->ct));
	acc_zero(g);
	cg_set(f, st->ct, cg_addi(f, cg_get(f, st->ct), 1));
	cg_set(f, st->pend, cg_min(f, cg_addi(f, cg_get(f, st->pend), g->kt), st->last));
	sw = LLVMBuildSwitch(f->B, cg_get(f, jv), cont[0], (unsigned)(g->k.s.stages - 1));
	for (int j = 1; j < g->k.s.stages; j++)
		LLVMAddCase(sw, cg_i32(f, j), cont[j]);
	LLVMPositionBuilderAtEnd(f->B, at);
}

/*
 * stream() unrolled over the S stages (GemmSpec.sk_unroll): pair g0 + i
 * lives in stage i % S, so copy j of the loop body reads stage j, refills
 * stage j - 1 and prefetches stage j + 1's first fragments at constant
 * shared offsets; no pair index is divided: the load stream carries its
 * k-tile (lkt) and tile, the mma side its tile (ct) and the pair where its
 * part of that tile ends (pend).  A tile's end (hand-over or epilogue, the
 * accumulators zeroed for the next) is one block that every copy enters
 * and that returns to the copy after it (a switch on jv), so the epilogue
 * is built once.
 */
static void
stream_unrolled(G *g)
{
	CgFn *f = g->k.f;
	int S = g->k.s.stages;
	LLVMValueRef L = cg_muli(f, gemm_work_total(&g->k), g->kt), n = cg_min(f, cg_nctaid(f, 0), L);
	LLVMValueRef jv = cg_var(f, f->ti32, NULL), gi, lim;
	LLVMBasicBlockRef end = LLVMAppendBasicBlockInContext(f->C, f->fn, "tile_end"), cont[8];	/* S <= 8 */
	Stream st;
	CgIf c, c1;
	CgLoop l;
	Frag cur, vars;

	st.v = cg_sub(f, cg_addi(f, cg_nctaid(f, 0), -1), cg_ctaid(f, 0));
	stream_vars(g, &st);
	gemm_bq_bulk_init(g);
	cg_if(f, &c, cg_lt(f, st.v, n));	/* n = 0 (T = 0, no rows): nothing */
	unrolled_begin(g, &st, L, n);
	frag_vars(g, &vars);
	load_frags(g, cg_i32(f, 0), 0, &cur);
	frag_move(g, &vars, &cur, 1);
	lim = cg_addi(f, st.g1, -(S - 1));	/* pairs below it refill */
	gi = cg_loop(f, &l, st.g0, st.g1, cg_i32(f, S));
	for (int j = 0; j < S; j++) {
		LLVMValueRef p = cg_addi(f, gi, j);
		LLVMBasicBlockRef to_end = LLVMAppendBasicBlockInContext(f->C, f->fn, "to_end");

		if (j > 0)
			cg_loop_while(f, &l, cg_lt(f, p, st.g1));
		cg_if(f, &c1, cg_lt(f, p, lim));	/* refill: pair p+S-1 into the stage of p-1 */
		stream_next(g, &st, cg_i32(f, (int64_t)((j + S - 1) % S) * g->stage));
		refill_else(g, &c1, cg_i32(f, (j + S - 1) % S), 0);
		cg_endif(f, &c1);
		cg_cp_async_commit(f);
		ktile_pipelined(g, &vars, cg_i32(f, (int64_t)j * g->stage), cg_i32(f, (int64_t)((j + 1) % S) * g->stage));
		cont[j] = LLVMAppendBasicBlockInContext(f->C, f->fn, "tile_go_on");
		LLVMBuildCondBr(f->B, LLVMBuildICmp(f->B, LLVMIntEQ, p, cg_get(f, st.pend), ""), to_end, cont[j]);
		LLVMPositionBuilderAtEnd(f->B, to_end);
		cg_set(f, jv, cg_i32(f, j));
		LLVMBuildBr(f->B, end);
		LLVMPositionBuilderAtEnd(f->B, cont[j]);
	}
	cg_endloop(f, &l);
	unrolled_end(g, &st, end, jv, cont);
	cg_cp_async_wait(f, 0);
	cg_barrier(f);
	cg_endif(f, &c);
}

/*
 * B ahead of the grid wait (GemmSpec.b_ahead, PDL): a stream-K GEMM's
 * weights do not depend on the grid before it, so each CTA, launched while
 * that grid's last SMs still stream, sends the first b_ahead k-tiles of its
 * run's B toward L2 (a bulk prefetch a B row of each tile part, thread r
 * row r; quantised B: gemm_bq_ahead's pieces, the packed words, scales and
 * zero points) before it waits: the SMs the previous grid has left idle start the
 * DRAM reads the run begins with.  The run comes from the expert table as
 * the offsets read before the wait (the MoE down projection's were written
 * two launches back, by the front or the permute); whatever they say it is
 * a hint: tiles come from a table built like the real one, column tiles are
 * clamped into N and k-tiles into K, so every address lies inside B.  The
 * table is built again after the wait for the schedule itself.  On the
 * emulator all of it runs but the prefetch.
 */
static void
stream_ahead(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int KT = g->kt, eb = esize(s->b_dt);
	LLVMValueRef L, n, g0, gend, t, first, ka, kb, n0, row, bp, go;
	Stream st;
	CgIf c;
	CgLoop l;

	g->k.offs_volatile = 1;
	gemm_prologue(&g->k);
	L = cg_muli(f, gemm_work_total(&g->k), KT);
	n = cg_min(f, cg_nctaid(f, 0), L);
	st.v = cg_sub(f, cg_addi(f, cg_nctaid(f, 0), -1), cg_ctaid(f, 0));
	stream_runs(g, &st, L, n);
	go = cg_lt(f, st.v, n);
	if (s->bq.group <= 0)	/* quantised B: gemm_bq_ahead spreads its pieces over the threads */
		go = LLVMBuildAnd(f->B, go, cg_lt(f, g->k.tid, cg_i32(f, s->bn)), "");
	cg_if(f, &c, go);
	g0 = run_start(f, &st, st.v);
	gend = cg_min(f, run_start(f, &st, cg_addi(f, st.v, 1)), cg_addi(f, g0, s->b_ahead));
	t = cg_loop(f, &l, cg_udiv(f, g0, cg_i32(f, KT)), cg_udiv(f, cg_addi(f, gend, KT - 1), cg_i32(f, KT)),
		    cg_i32(f, 1));
	first = cg_muli(f, t, KT);
	ka = cg_min(f, cg_max(f, cg_sub(f, g0, first), cg_i32(f, 0)), cg_i32(f, KT));
	kb = cg_min(f, cg_max(f, cg_sub(f, gend, first), ka), cg_i32(f, KT));
	gemm_tile_coords(&g->k, t);
	n0 = cg_min(f, cg_max(f, g->k.n0, cg_i32(f, 0)), cg_i32(f, (int)(s->N - s->bn)));
	if (s->bq.group > 0) {
		gemm_bq_ahead(g, n0, ka, kb);
	} else {
		row = cg_add(f, n0, g->k.tid);
		bp = gptr(f, g->k.bexp, cg_add(f, cg_muli(f, cg_sext64(f, gemm_b_row(g, row)), s->ldb),
					       cg_sext64(f, cg_muli(f, ka, s->bk))), eb);
		cg_prefetch_l2_bulk(f, bp, cg_muli(f, cg_sub(f, kb, ka), (int64_t)s->bk * eb));
	}
	cg_endloop(f, &l);
	cg_endif(f, &c);
	g->k.offs_volatile = 0;
	cg_barrier(f);	/* every thread past the table: the schedule's is built after the wait */
	cg_fn_griddep(f);
}

/* ---- dynamic stream-K (GemmSpec.units; codegen.h has the contract) ---- */

/*
 * The CTA's units: u_0, u_1, ... as the counter hands them out.  The load
 * stream runs S-1 pairs ahead of the mma (one pipeline over every unit of
 * the CTA, virtual pair j in stage j % S); a unit has S-1 pairs or more, so
 * the loads are in the mma's unit or the next one.  Thread 0 takes the unit
 * after the load stream's two pairs before its end (GRAB_AHEAD: the atomic's
 * round trip under the mma) into shared slot (k+1) & 1, which every thread
 * reads, after a barrier, where the load stream enters it.
 */
enum { GRAB_AHEAD = 2 };

typedef struct Dyn Dyn;
struct Dyn {
	LLVMValueRef U, P;		/* units, slices a tile (per launch) */
	LLVMValueRef ctr, cnt, parts;	/* the unit counter, the tiles' arrival counts, slot 0 */
	LLVMValueRef cu, cg, cs, ce;	/* vars: the mma's unit (-1: none), pair, first pair, end */
	LLVMValueRef cnext;		/* var: the unit after it (set where the loads enter it) */
	LLVMValueRef lu, lg, ls, le, lk;	/* vars: the loads' unit, next pair, first, end; its index */
};

/* Unit u's pairs [*first, *end): tile u / P, k-tiles [p KT / P, (p+1) KT / P) of it. */
static void
unit_range(G *g, const Dyn *d, LLVMValueRef u, LLVMValueRef *first, LLVMValueRef *end)
{
	CgFn *f = g->k.f;
	LLVMValueRef t = cg_udiv(f, u, d->P), p = cg_urem(f, u, d->P), base = cg_muli(f, t, g->kt);

	*first = cg_add(f, base, cg_udiv(f, cg_muli(f, p, g->kt), d->P));
	*end = cg_add(f, base, cg_udiv(f, cg_muli(f, cg_addi(f, p, 1), g->kt), d->P));
}

/* The unit handed out v-th (-1: v >= U, none left): v itself, or for tests
 * (unit_rev = m) reversed in blocks of m, the last as long as is left. */
static LLVMValueRef
unit_of(G *g, const Dyn *d, LLVMValueRef v)
{
	CgFn *f = g->k.f;
	int m = g->k.s.unit_rev;
	LLVMValueRef u = v;

	if (m > 1) {
		LLVMValueRef base = cg_muli(f, cg_udiv(f, v, cg_i32(f, m)), m);
		LLVMValueRef len = cg_min(f, cg_i32(f, m), cg_sub(f, d->U, base));
		u = cg_sub(f, cg_add(f, base, cg_addi(f, len, -1)), cg_urem(f, v, cg_i32(f, m)));
	}
	return cg_select(f, cg_lt(f, v, d->U), u, cg_i32(f, -1));
}

/* Thread 0: the next unit into shared slot `slot` (i32).  CTA c's first is
 * c (no atomic), so the counter's k-th is number ctas + k. */
static void
unit_grab(G *g, const Dyn *d, LLVMValueRef slot)
{
	CgFn *f = g->k.f;
	LLVMValueRef v;
	CgIf c;

	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->k.tid, cg_i32(f, 0), ""));
	v = cg_add(f, cg_atom_add(f, d->ctr, cg_i32(f, 1)), cg_nctaid(f, 0));
	cg_sstore(f, unit_of(g, d, v), cg_sptr(f, cg_addi(f, cg_muli(f, slot, 4), g->dyn_off)), 4);
	cg_endif(f, &c);
}

static void
set_range(G *g, const Dyn *d, LLVMValueRef u, LLVMValueRef first, LLVMValueRef cur, LLVMValueRef end)
{
	LLVMValueRef a, b;

	unit_range(g, d, u, &a, &b);
	cg_set(g->k.f, first, a);
	cg_set(g->k.f, cur, a);
	cg_set(g->k.f, end, b);
}

/* The load stream's pair for the stage at soff: into the next unit where
 * this one ends, the unit after taken GRAB_AHEAD pairs before the end. */
static void
dyn_load(G *g, Dyn *d, Stream *st, LLVMValueRef soff)
{
	CgFn *f = g->k.f;
	LLVMValueRef lg, le, k, u, grab;
	CgIf c, c1;

	cg_if(f, &c, LLVMBuildAnd(f->B, LLVMBuildICmp(f->B, LLVMIntSGE, cg_get(f, d->lu), cg_i32(f, 0), ""),
				  LLVMBuildICmp(f->B, LLVMIntEQ, cg_get(f, d->lg), cg_get(f, d->le), ""), ""));
	k = cg_addi(f, cg_get(f, d->lk), 1);
	cg_set(f, d->lk, k);
	u = cg_sload(f, f->ti32, cg_sptr(f, cg_addi(f, cg_muli(f, cg_and(f, k, 1), 4), g->dyn_off)), 4);
	cg_set(f, d->lu, u);
	cg_set(f, d->cnext, u);
	cg_if(f, &c1, LLVMBuildICmp(f->B, LLVMIntSGE, u, cg_i32(f, 0), ""));
	set_range(g, d, u, d->ls, d->lg, d->le);
	cg_endif(f, &c1);
	cg_endif(f, &c);
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntSGE, cg_get(f, d->lu), cg_i32(f, 0), ""));
	lg = cg_get(f, d->lg);
	le = cg_get(f, d->le);
	grab = LLVMBuildICmp(f->B, LLVMIntEQ, lg, cg_max(f, cg_get(f, d->ls), cg_addi(f, le, -GRAB_AHEAD)), "");
	stream_load(g, st, lg, soff);	/* first: thread 0's loads go out before the atomic's wait */
	cg_set(f, d->lg, cg_addi(f, lg, 1));
	cg_if(f, &c1, grab);
	unit_grab(g, d, cg_and(f, cg_addi(f, cg_get(f, d->lk), 1), 1));
	cg_endif(f, &c1);
	cg_endif(f, &c);
}

/* The end of unit u (its tile's slice u % P): the epilogue when P = 1;
 * else its partial sums to slot u, counted in at the tile's flag, and the
 * tile's last slice to arrive adds the slots in slice order (slot t P + p)
 * and runs the epilogue. */
static void
unit_end(G *g, Dyn *d, LLVMValueRef u)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef t = cg_udiv(f, u, d->P), t0 = LLVMBuildICmp(f->B, LLVMIntEQ, g->k.tid, cg_i32(f, 0), "");
	LLVMValueRef whole = LLVMBuildICmp(f->B, LLVMIntEQ, d->P, cg_i32(f, 1), "");
	LLVMValueRef runs = cg_var(f, f->ti1, whole), flag = cg_sptr(f, cg_i32(f, g->dyn_off + 8));
	int64_t tile = (int64_t)s->bm * s->bn;
	CgIf c, c0;
	CgLoop l;
	int a;

	gemm_tile_coords(&g->k, t);
	cg_if(f, &c, LLVMBuildNot(f->B, whole, ""));
	LLVMValueRef mine = cg_gep(f, d->parts, cg_muli(f, cg_sext64(f, u), tile), 4);
	a = 0;
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++, a++) {
				LLVMValueRef e = cg_addi(f, g->k.tid, (int64_t)a * g->k.nthr);
				cg_gstore_volatile(f, cg_get(f, g->acc[i][j][q]), cg_gep(f, mine, cg_sext64(f, e), 4), 4);
			}
	cg_barrier(f);		/* every thread's part is written */
	cg_if(f, &c0, t0);	/* the fences of thread 0 order the CTA's parts (seen through the barrier) */
	cg_fence(f);		/* before the count (release) */
	LLVMValueRef old = cg_atom_add(f, cg_gep(f, d->cnt, cg_sext64(f, t), 4), cg_i32(f, 1));
	LLVMValueRef last = LLVMBuildICmp(f->B, LLVMIntEQ, old, cg_addi(f, d->P, -1), "");
	cg_fence(f);		/* and the other slices' parts after it (acquire) */
	cg_sstore(f, LLVMBuildZExt(f->B, last, f->ti32, ""), flag, 4);
	cg_endif(f, &c0);
	cg_barrier(f);
	LLVMValueRef lastv = LLVMBuildICmp(f->B, LLVMIntNE, cg_sload(f, f->ti32, flag, 4), cg_i32(f, 0), "");
	cg_set(f, runs, lastv);
	cg_if(f, &c0, lastv);	/* the sum in slice order: ((p0 + p1) + p2) + ... */
	LLVMValueRef first = cg_mul(f, t, d->P);
	LLVMValueRef p = cg_loop(f, &l, cg_i32(f, 0), d->P, cg_i32(f, 1));
	LLVMValueRef part = cg_gep(f, d->parts, cg_muli(f, cg_sext64(f, cg_add(f, first, p)), tile), 4);
	LLVMValueRef p0 = LLVMBuildICmp(f->B, LLVMIntEQ, p, cg_i32(f, 0), "");
	a = 0;
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++, a++) {
				LLVMValueRef e = cg_addi(f, g->k.tid, (int64_t)a * g->k.nthr);
				LLVMValueRef v = cg_gload_volatile(f, f->tf32, cg_gep(f, part, cg_sext64(f, e), 4), 4);
				LLVMValueRef sum = LLVMBuildFAdd(f->B, cg_get(f, g->acc[i][j][q]), v, "");
				cg_set(f, g->acc[i][j][q], cg_select(f, p0, v, sum));
			}
	cg_endloop(f, &l);
	cg_endif(f, &c0);
	cg_endif(f, &c);
	cg_if(f, &c, cg_get(f, runs));
	gemm_epilogue(g);
	cg_endif(f, &c);
}

/*
 * The whole schedule of a dynamic stream-K kernel: stream()'s pipeline over
 * the pairs of the units this CTA takes, as it takes them; the loop runs
 * while the mma has a unit.
 */
static void
stream_dyn(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int S = s->stages, KT = g->kt;
	LLVMValueRef tiles = gemm_work_total(&g->k), j, cgv, u;
	int64_t pmax = MAX(1, KT / (S - 1));
	Stream st;
	Dyn d;
	CgIf c;
	CgLoop l;
	Frag cur, vars;

	stream_vars(g, &st);
	d.P = cg_max(f, cg_i32(f, 1), cg_min(f, cg_i32(f, pmax), cg_udiv(f, cg_i32(f, (int64_t)s->units * s->ctas),
									 cg_max(f, tiles, cg_i32(f, 1)))));
	d.U = cg_mul(f, tiles, d.P);
	d.cnt = g->k.ws;
	d.ctr = cg_gep(f, g->k.ws, cg_i64(f, s->split_slots), 4);
	d.parts = cg_gep(f, g->k.ws, cg_i64(f, split_flags(s)), 1);
	d.cu = cg_var(f, f->ti32, NULL);
	d.cg = cg_var(f, f->ti32, cg_i32(f, 0));
	d.cs = cg_var(f, f->ti32, cg_i32(f, 0));
	d.ce = cg_var(f, f->ti32, cg_i32(f, 0));
	d.cnext = cg_var(f, f->ti32, cg_i32(f, -1));
	d.lu = cg_var(f, f->ti32, NULL);
	d.lg = cg_var(f, f->ti32, cg_i32(f, 0));
	d.ls = cg_var(f, f->ti32, cg_i32(f, 0));
	d.le = cg_var(f, f->ti32, cg_i32(f, 0));
	d.lk = cg_var(f, f->ti32, cg_i32(f, 0));

	u = unit_of(g, &d, cg_ctaid(f, 0));	/* u_0: the CTA's own */
	cg_set(f, d.cu, u);
	cg_set(f, d.lu, u);
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntSGE, u, cg_i32(f, 0), ""));
	set_range(g, &d, u, d.cs, d.cg, d.ce);
	set_range(g, &d, u, d.ls, d.lg, d.le);
	cg_endif(f, &c);
	for (int i = 0; i < S - 1; i++) {	/* u_0 has S-1 pairs or more */
		dyn_load(g, &d, &st, cg_i32(f, (int64_t)i * g->stage));
		cg_cp_async_commit(f);
	}
	cg_cp_async_wait(f, S - 2);
	cg_barrier(f);
	frag_vars(g, &vars);
	load_frags(g, cg_i32(f, 0), 0, &cur);
	frag_move(g, &vars, &cur, 1);

	j = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, INT32_MAX), cg_i32(f, 1));
	cg_loop_while(f, &l, LLVMBuildICmp(f->B, LLVMIntSGE, cg_get(f, d.cu), cg_i32(f, 0), ""));
	dyn_load(g, &d, &st, stage_off(g, cg_addi(f, j, S - 1)));
	cg_cp_async_commit(f);
	cgv = cg_get(f, d.cg);
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, cgv, cg_get(f, d.cs), ""));	/* the unit's first pair */
	for (int i = 0; i < g->mi; i++)
		for (int jj = 0; jj < g->ni; jj++)
			for (int q = 0; q < 4; q++)
				cg_set(f, g->acc[i][jj][q], cg_f32(f, 0));
	cg_endif(f, &c);
	ktile_pipelined(g, &vars, stage_off(g, j), stage_off(g, cg_addi(f, j, 1)));
	cgv = cg_addi(f, cgv, 1);
	cg_set(f, d.cg, cgv);
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, cgv, cg_get(f, d.ce), ""));	/* its last: the next unit */
	unit_end(g, &d, cg_get(f, d.cu));
	u = cg_get(f, d.cnext);
	cg_set(f, d.cu, u);
	CgIf c1;
	cg_if(f, &c1, LLVMBuildICmp(f->B, LLVMIntSGE, u, cg_i32(f, 0), ""));
	set_range(g, &d, u, d.cs, d.cg, d.ce);
	cg_endif(f, &c1);
	cg_endif(f, &c);
	cg_endloop(f, &l);
	cg_cp_async_wait(f, 0);
	cg_barrier(f);
}

static void
note(G *g, char *buf, size_t n)
{
	const GemmSpec *s = &g->k.s;
	char q[512];
	int k;

	k = snprintf(buf, n, "gemm %s.%s->%s B[%s] N=%lld K=%lld %dx%dx%d w%dx%d s%d%s%s",
		     dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt),
		     s->b_layout == CG_B_NK ? "N,K" : "K,N", (long long)s->N, (long long)s->K,
		     s->bm, s->bn, s->bk, s->warps_m, s->warps_n, s->stages,
		     s->mainloop == CG_MAINLOOP_WGMMA ? " wgmma" : "",
		     s->mainloop == CG_MAINLOOP_WGMMA && (s->no_frag_pipe || s->stages < 4) ? " wait0" : "");
	if (s->wg_wide && s->mainloop != CG_MAINLOOP_MMA && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, " wg%dx%d", g->wtm, g->wtn);
	if (s->bq.group > 0 && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, " bq: group=%d scale=%s%s%s%s%s%s%s%s", s->bq.group,
			      dtype_name(s->bq.scale_dt), s->bq.zero ? " zero" : "", s->bq.v1 ? " v1" : "",
			      s->bq.scales_le2 ? " le2" : "", s->bq.vec > 1 ? (s->bq.vec == 2 ? " vec2" : " vec4") : "",
			      s->bq.direct ? " direct" : "", g->bq.gsteps ? " gacc" : "",
			      s->bq.bulk == CG_QBULK_TMA ? " bulk=tma" : s->bq.bulk ? " bulk=lanes" : "");
	k = gemm_note_tail(&g->k, buf, n, k);
	if (s->min_ctas > 0 && (size_t)k < n)	/* the launch bound (.minnctapersm) */
		k += snprintf(buf + k, n - (size_t)k, " min_ctas=%d", s->min_ctas);
	if (s->quant.kind != CG_QUANT_NONE && (size_t)k < n) {
		cg_quant_print(q, sizeof q, &s->quant, s->c_dt);
		snprintf(buf + k, n - (size_t)k, " quant: %s", q);
	}
}

int
cg_emit_gemm(CgModule *m, const char *name, const GemmSpec *spec, Diag *d)
{
	G g;
	char buf[800];

	if (spec->mainloop == CG_MAINLOOP_VEC)
		return cg_emit_gemm_vec(m, name, spec, d);
	if (cg_gemm_check(cg_module_target(m), spec, d) < 0)
		return -1;
	layout(&g, spec);
	if (spec->mainloop == CG_MAINLOOP_WS)
		return gemm_ws_emit(&g, m, name, d);
	if (!gemm_begin(&g.k, m, name, d))
		return -1;
	if (spec->bq.group > 0)
		gemm_bq_tmaps(&g);
	thread_setup(&g);
	gemm_quant_setup(&g);
	note(&g, buf, sizeof buf);
	if (spec->sched != CG_SCHED_STREAM)
		return gemm_end(&g.k, tile, buf);
	if (spec->b_ahead > 0)
		stream_ahead(&g);
	if (!spec->ahead_table)	/* else stream_ahead's table is the schedule's */
		gemm_prologue(&g.k);
	if (spec->units > 0)
		stream_dyn(&g);
	else if (spec->sk_unroll)
		stream_unrolled(&g);
	else
		stream(&g);
	return gemm_finish(&g.k, buf);
}
