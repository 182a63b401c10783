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
 * Schedule: a linear work index w over (expert, n-tile, m-tile), m-tiles
 * fastest within an expert, so CTAs that run together share B tiles and one
 * expert's A rows.  Grouped mode builds, at kernel start, the table of each
 * expert's first tile from the device offsets (a shuffle scan; empty experts
 * own no tiles) and finds a tile's expert by binary search.  CG_SCHED_TILES
 * launches one CTA per potential tile (those past the end exit);
 * CG_SCHED_PERSISTENT launches `ctas` CTAs that stride over w.
 */
#define CG_INTERNAL
#include <string.h>

#include "k_gemm.h"

#define SMEM_MAX 232448		/* sm_80/sm_90 opt-in limit per CTA */

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

static int
swiglu_at(const CgEpilogue *e)
{
	for (int i = 0; i < e->n; i++)
		if (e->in[i].op == CGE_SWIGLU)
			return i;
	return -1;
}

static DType
mma_type(const GemmSpec *s)
{
	if (s->a_dt == DT_F16 || s->b_dt == DT_F16)
		return DT_F16;
	return DT_BF16;
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
	const GemmSpec *s = &g->s;
	int group = s->quant.group;

	g->q_fw = g->sw >= 0 ? 4 : 8;
	g->q_wow = g->ni * g->q_fw;
	g->q_sg = group > 0 && group < g->q_wow ? group : g->q_wow;
	if (g->q_sg <= 0)
		return;
	g->q_bytes = s->bm * (s->bn * g->q_fw / 8 / g->q_sg) * 4;
	if (g->q_bytes <= g->tab) {
		g->q_off = 0;
	} else {
		g->q_off = (g->smem + 15) & ~15;
		g->smem = g->q_off + g->q_bytes;
	}
}

/* Fill in defaults and derived sizes; no checks. */
static void
layout(G *g, const GemmSpec *in)
{
	GemmSpec *s = &g->s;

	*s = *in;
	if (s->m_per_t <= 0)
		s->m_per_t = 1;
	if (s->gather_div <= 0)
		s->gather_div = 1;
	if (s->lda == 0)
		s->lda = s->K;
	if (s->ldb == 0)
		s->ldb = s->b_layout == CG_B_NK ? s->K : s->N;
	if (s->b_group_stride == 0)
		s->b_group_stride = s->N * s->K;
	g->sw = swiglu_at(&s->ep);
	g->width = g->sw >= 0 ? s->N / 2 : s->N;
	if (s->ldc == 0)
		s->ldc = g->width;
	g->mt = mma_type(s);
	g->nwarp = s->warps_m * s->warps_n;
	g->nthr = 32 * g->nwarp;
	g->wtm = s->warps_m > 0 ? s->bm / s->warps_m : 0;
	g->wtn = s->warps_n > 0 ? s->bn / s->warps_n : 0;
	g->mi = g->wtm / 16;
	g->ni = g->wtn / 8;
	g->mstride = 16;
	if (s->mainloop == CG_MAINLOOP_WGMMA)
		gemm_wgmma_layout(g);	/* warpgroup tiles instead of warp tiles */
	g->kt = s->bk > 0 ? (int)(s->K / s->bk) : 0;
	g->a_ld = (s->bk + 8) * 2;
	g->b_ld = s->b_layout == CG_B_NK ? (s->bk + 8) * 2 : (s->bn + 8) * 2;
	g->a_bytes = s->bm * g->a_ld;
	g->stage = g->a_bytes + (s->b_layout == CG_B_NK ? s->bn : s->bk) * g->b_ld;
	g->tab = s->stages * g->stage;
	g->wsum = g->tab + ((4 * (s->groups + 1) + 15) & ~15);
	g->smem = s->groups > 0 ? g->wsum + 128 : g->tab;
	if (s->quant.kind == CG_QUANT_GROUP)
		quant_layout(g);
	g->a_chunks = s->bm * s->bk / 8;
	g->b_chunks = s->bn * s->bk / 8;
	g->a_n = g->nthr ? (g->a_chunks + g->nthr - 1) / g->nthr : 0;
	g->b_n = g->nthr ? (g->b_chunks + g->nthr - 1) / g->nthr : 0;
}

void
cg_gemm_resolve(GemmSpec *s)
{
	G g;

	layout(&g, s);
	*s = g.s;
}

int
cg_gemm_smem(const GemmSpec *s)
{
	G g;

	layout(&g, s);
	return g.smem;
}

static int
check_ld(Diag *d, const char *what, int64_t ld, int64_t min)
{
	if (ld < min || ld % 8)
		return diag_error(d, LOC_NONE, "gemm: %s = %lld (need a multiple of 8, >= %lld)", what,
				  (long long)ld, (long long)min);
	return 0;
}

static int
is_io_type(DType t)
{
	return t == DT_BF16 || t == DT_F16 || t == DT_F32;
}

int
cg_gemm_check(const CgTarget *t, const GemmSpec *in, Diag *d)
{
	G g;
	const GemmSpec *s = &g.s;

	layout(&g, in);
	if (cg_target_check(t, d) < 0)
		return -1;
	if (s->mainloop == CG_MAINLOOP_WGMMA) {
		if (gemm_wgmma_check(t, &g, d) < 0)
			return -1;
	} else if (cg_require(t, (g.mt == DT_BF16 ? CG_MMA_BF16 : CG_MMA_F16) | CG_LDMATRIX | CG_CP_ASYNC,
			      "a tensor-core GEMM", d) < 0) {
		return -1;
	}
	if (!is_io_type(s->a_dt) || !is_io_type(s->b_dt) ||
	    !(is_io_type(s->c_dt) || cg_quant_qmax(s->c_dt) > 0))
		return diag_error(d, LOC_NONE, "gemm: types %s x %s -> %s (need f32, bf16 or f16; "
				  "C f8e4m3 or i8 when quantised)",
				  dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt));
	if (cg_quant_check(&s->quant, s->c_dt, d) < 0)
		return -1;
	if ((s->a_dt == DT_BF16 && s->b_dt == DT_F16) || (s->a_dt == DT_F16 && s->b_dt == DT_BF16))
		return diag_error(d, LOC_NONE, "gemm: bf16 x f16 has no mma type");
	if (s->N <= 0 || s->K <= 0)
		return diag_error(d, LOC_NONE, "gemm: N = %lld, K = %lld", (long long)s->N, (long long)s->K);
	if (s->bm < 16 || s->bm > 256 || !pow2(s->bm))
		return diag_error(d, LOC_NONE, "gemm: bm = %d (need 16, 32, 64, 128 or 256)", s->bm);
	if (s->bn < 16 || s->bn > 256 || s->bn % 16)
		return diag_error(d, LOC_NONE, "gemm: bn = %d (need a multiple of 16 in 16..256)", s->bn);
	if (s->bk != 16 && s->bk != 32 && s->bk != 64 && s->bk != 128)
		return diag_error(d, LOC_NONE, "gemm: bk = %d (need 16, 32, 64 or 128)", s->bk);
	if (s->warps_m < 1 || s->warps_n < 1 || g.nwarp > 16 || !pow2(g.nwarp))
		return diag_error(d, LOC_NONE, "gemm: %d x %d warps (need 1..16 in all, a power of 2)",
				  s->warps_m, s->warps_n);
	if (s->mainloop == CG_MAINLOOP_MMA && (s->bm % (16 * s->warps_m) || s->bn % (16 * s->warps_n)))
		return diag_error(d, LOC_NONE,
				  "gemm: a %dx%d tile over %dx%d warps leaves warp tiles that are not multiples of 16",
				  s->bm, s->bn, s->warps_m, s->warps_n);
	if (g.mi > MAXF || g.ni > MAXF || g.a_n > MAXI || g.b_n > MAXI)
		return diag_error(d, LOC_NONE, "gemm: warp tile %dx%d or tile %dx%dx%d too large for %d threads",
				  g.wtm, g.wtn, s->bm, s->bn, s->bk, g.nthr);
	if (s->stages < 2 || s->stages > 5)
		return diag_error(d, LOC_NONE, "gemm: %d stages (need 2..5)", s->stages);
	if (s->N % s->bn)
		return diag_error(d, LOC_NONE, "gemm: N = %lld is not a multiple of bn = %d (pad the weight)",
				  (long long)s->N, s->bn);
	if (s->K % s->bk)
		return diag_error(d, LOC_NONE, "gemm: K = %lld is not a multiple of bk = %d (pad the weight)",
				  (long long)s->K, s->bk);
	if (check_ld(d, "lda", s->lda, s->K) < 0 ||
	    check_ld(d, "ldb", s->ldb, s->b_layout == CG_B_NK ? s->K : s->N) < 0 ||
	    check_ld(d, "ldc", s->ldc, g.width) < 0)
		return -1;
	if (s->groups < 0 || s->groups > 4096)
		return diag_error(d, LOC_NONE, "gemm: %d groups (0..4096)", s->groups);
	if (s->groups > 0 && (s->b_group_stride < (s->b_layout == CG_B_NK ? s->N * s->ldb : s->K * s->ldb) ||
			      s->b_group_stride % 8))
		return diag_error(d, LOC_NONE, "gemm: B's group stride %lld is below one expert's B or not a multiple of 8",
				  (long long)s->b_group_stride);
	if (s->m_per_t < 1 || s->m_per_t > 1024)
		return diag_error(d, LOC_NONE, "gemm: m_per_t = %d", s->m_per_t);
	if (s->sched == CG_SCHED_PERSISTENT && (s->ctas < 1 || s->ctas > 65535))
		return diag_error(d, LOC_NONE, "gemm: %d persistent CTAs", s->ctas);
	if (s->sched != CG_SCHED_TILES && s->sched != CG_SCHED_PERSISTENT)
		return diag_error(d, LOC_NONE, "gemm: unknown schedule %d", s->sched);
	if (s->store != CG_STORE_ROWS && s->store != CG_STORE_SCATTER)
		return diag_error(d, LOC_NONE, "gemm: unknown store mode %d", s->store);
	if (s->min_ctas < 0 || s->min_ctas > 32)
		return diag_error(d, LOC_NONE, "gemm: min_ctas = %d", s->min_ctas);
	if (cg_ep_check(&s->ep, d) < 0)
		return -1;
	if (s->quant.kind == CG_QUANT_GROUP) {
		int G = s->quant.group, bow = s->bn * g.q_fw / 8;
		if (bow % G || (g.q_wow % G && G % g.q_wow))
			return diag_error(d, LOC_NONE, "gemm: quantisation groups of %d columns do not tile "
					  "a CTA's %d output columns (%d per warp)", G, bow, g.q_wow);
	}
	for (int i = 0; i < s->ep.n; i++) {
		const CgEpInst *e = &s->ep.in[i];
		if (e->op != CGE_ROW && e->op != CGE_MAT)
			continue;
		if ((e->rows == CGR_GATHER || e->rows == CGR_GATHER_RAW) && !s->gather)
			return diag_error(d, LOC_NONE, "gemm: epilogue e%d reads rows through gather_idx, but A is not gathered", i);
		if (e->rows == CGR_SCATTER && s->store != CG_STORE_SCATTER)
			return diag_error(d, LOC_NONE, "gemm: epilogue e%d reads rows through scatter_idx, but the store is not scattered", i);
	}
	if (g.smem > SMEM_MAX)
		return diag_error(d, LOC_NONE, "gemm: %d bytes of shared memory (%d stages of %d) exceed %d",
				  g.smem, s->stages, g.stage, SMEM_MAX);
	return 0;
}

/* ---- pieces of the kernel ---- */

static LLVMValueRef
gptr(G *g, LLVMValueRef base, LLVMValueRef elems64, int esz)
{
	return cg_gep(g->f, base, cg_muli(g->f, elems64, esz), 1);
}

/* Per-thread constants: lane layout, load chunk offsets, ldmatrix offsets. */
static void
thread_setup(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int cpr = s->bk / 8;	/* chunks per k-contiguous row */

	g->tid = cg_tid(f, 0);
	g->lane = cg_and(f, g->tid, 31);
	g->warp = cg_shr(f, g->tid, 5);
	g->wm0 = cg_muli(f, cg_udiv(f, g->warp, cg_i32(f, s->warps_n)), g->wtm);
	g->wn0 = cg_muli(f, cg_urem(f, g->warp, cg_i32(f, s->warps_n)), g->wtn);
	for (int i = 0; i < g->a_n; i++) {
		LLVMValueRef c = cg_addi(f, g->tid, (int64_t)i * g->nthr);
		g->a_row[i] = cg_udiv(f, c, cg_i32(f, cpr));
		g->a_kc[i] = cg_urem(f, c, cg_i32(f, cpr));
		g->a_soff[i] = cg_add(f, cg_muli(f, g->a_row[i], g->a_ld), cg_muli(f, g->a_kc[i], 16));
	}
	for (int i = 0; i < g->b_n; i++) {
		LLVMValueRef c = cg_addi(f, g->tid, (int64_t)i * g->nthr);
		int per = s->b_layout == CG_B_NK ? cpr : s->bn / 8;
		g->b_row[i] = cg_udiv(f, c, cg_i32(f, per));
		g->b_kc[i] = cg_urem(f, c, cg_i32(f, per));
		g->b_soff[i] = cg_addi(f, cg_add(f, cg_muli(f, g->b_row[i], g->b_ld),
						  cg_muli(f, g->b_kc[i], 16)), g->a_bytes);
	}
	/* ldmatrix: A rows wm0 + (lane & 15), k chunk lane >> 4 */
	g->a_lane = cg_add(f, cg_muli(f, cg_add(f, g->wm0, cg_and(f, g->lane, 15)), g->a_ld),
			   cg_muli(f, cg_shr(f, g->lane, 4), 16));
	if (s->b_layout == CG_B_NK) {
		/* rows n = wn0 + (lane & 7) + 8 (lane >> 4), k chunk (lane >> 3) & 1 */
		LLVMValueRef n = cg_add(f, cg_add(f, g->wn0, cg_and(f, g->lane, 7)),
					cg_shl(f, cg_shr(f, g->lane, 4), 3));
		g->b_lane = cg_add(f, cg_muli(f, n, g->b_ld),
				   cg_muli(f, cg_and(f, cg_shr(f, g->lane, 3), 1), 16));
	} else {
		/* rows k = (lane & 7) + 8 ((lane >> 3) & 1), columns wn0 + 8 (lane >> 4) */
		LLVMValueRef k = cg_add(f, cg_and(f, g->lane, 7),
					cg_shl(f, cg_and(f, cg_shr(f, g->lane, 3), 1), 3));
		LLVMValueRef n = cg_add(f, g->wn0, cg_shl(f, cg_shr(f, g->lane, 4), 3));
		g->b_lane = cg_add(f, cg_muli(f, k, g->b_ld), cg_muli(f, n, 2));
	}
	g->b_lane = cg_addi(f, g->b_lane, g->a_bytes);
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				g->acc[i][j][q] = cg_var(f, f->tf32, NULL);
	if (s->mainloop == CG_MAINLOOP_WGMMA)
		gemm_wgmma_setup(g);
}

/*
 * Grouped mode: tab[e] = first work index of expert e, for e = 0..E, from
 * offsets: tab[e+1] - tab[e] = cdiv(offsets[e+1] - offsets[e], bm) * N/bn.
 * A shuffle scan per warp, then over the warps' sums.
 */
static void
expert_table(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int E = s->groups, nt = (int)(s->N / s->bn);
	LLVMValueRef carry = cg_var(f, f->ti32, cg_i32(f, 0));
	CgIf c;

	for (int base = 0; base < E; base += g->nthr) {
		LLVMValueRef e = cg_addi(f, g->tid, base), v, in, lo, hi, tot, pre;
		LLVMValueRef ei = cg_min(f, e, cg_i32(f, E - 1));
		in = cg_lt(f, e, cg_i32(f, E));
		lo = cg_gload(f, f->ti32, cg_gep(f, g->offs, ei, 4), 4);
		hi = cg_gload(f, f->ti32, cg_gep(f, g->offs, cg_addi(f, ei, 1), 4), 4);
		v = cg_udiv(f, cg_addi(f, cg_max(f, cg_sub(f, hi, lo), cg_i32(f, 0)), s->bm - 1),
			    cg_i32(f, s->bm));
		v = cg_select(f, in, v, cg_i32(f, 0));
		for (int dl = 1; dl < 32; dl *= 2) {
			LLVMValueRef y = cg_shfl_up(f, v, dl);
			v = cg_select(f, cg_lt(f, g->lane, cg_i32(f, dl)), v, cg_add(f, v, y));
		}
		cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->lane, cg_i32(f, 31), ""));
		cg_sstore(f, v, cg_sptr(f, cg_addi(f, cg_muli(f, g->warp, 4), g->wsum)), 4);
		cg_endif(f, &c);
		cg_barrier(f);
		cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->warp, cg_i32(f, 0), ""));
		{
			LLVMValueRef ok = cg_lt(f, g->lane, cg_i32(f, g->nwarp));
			LLVMValueRef at = cg_sptr(f, cg_addi(f, cg_muli(f, cg_min(f, g->lane, cg_i32(f, g->nwarp - 1)), 4), g->wsum));
			LLVMValueRef w = cg_select(f, ok, cg_sload(f, f->ti32, at, 4), cg_i32(f, 0));
			CgIf c2;
			for (int dl = 1; dl < 32; dl *= 2) {
				LLVMValueRef y = cg_shfl_up(f, w, dl);
				w = cg_select(f, cg_lt(f, g->lane, cg_i32(f, dl)), w, cg_add(f, w, y));
			}
			cg_if(f, &c2, ok);
			cg_sstore(f, w, at, 4);
			cg_endif(f, &c2);
		}
		cg_endif(f, &c);
		cg_barrier(f);
		pre = cg_sload(f, f->ti32, cg_sptr(f, cg_addi(f, cg_muli(f, cg_max(f, cg_addi(f, g->warp, -1), cg_i32(f, 0)), 4), g->wsum)), 4);
		pre = cg_select(f, LLVMBuildICmp(f->B, LLVMIntEQ, g->warp, cg_i32(f, 0), ""), cg_i32(f, 0), pre);
		v = cg_add(f, cg_add(f, v, pre), cg_get(f, carry));
		cg_if(f, &c, in);
		cg_sstore(f, cg_muli(f, v, nt), cg_sptr(f, cg_addi(f, cg_muli(f, e, 4), g->tab + 4)), 4);
		cg_endif(f, &c);
		tot = cg_sload(f, f->ti32, cg_sptr(f, cg_i32(f, g->wsum + 4 * (g->nwarp - 1))), 4);
		cg_set(f, carry, cg_add(f, cg_get(f, carry), tot));
		cg_barrier(f);	/* wsum is rewritten by the next round */
	}
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->tid, cg_i32(f, 0), ""));
	cg_sstore(f, cg_i32(f, 0), cg_sptr(f, cg_i32(f, g->tab)), 4);
	cg_endif(f, &c);
	cg_barrier(f);
}

/* The work total: tiles of all experts, or cdiv(M, bm) * N/bn. */
static LLVMValueRef
work_total(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int nt = (int)(s->N / s->bn);

	if (s->groups > 0)
		return cg_sload(f, f->ti32, cg_sptr(f, cg_i32(f, g->tab + 4 * s->groups)), 4);
	{
		LLVMValueRef M = cg_muli(f, g->T, s->m_per_t);
		LLVMValueRef mt = cg_udiv(f, cg_addi(f, M, s->bm - 1), cg_i32(f, s->bm));
		return cg_muli(f, mt, nt);
	}
}

/* Decode work index w: expert, first row, row end, first column, B base. */
static void
tile_coords(G *g, LLVMValueRef w)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int nt = (int)(s->N / s->bn);
	LLVMValueRef mte, local, mt, ntile, t0;

	if (s->groups > 0) {
		int E = s->groups, step = 1;
		LLVMValueRef lo = cg_i32(f, 0);
		while (step * 2 < E)
			step *= 2;
		for (; step >= 1 && E > 1; step /= 2) {
			LLVMValueRef cand = cg_addi(f, lo, step);
			LLVMValueRef ok = cg_lt(f, cand, cg_i32(f, E));
			LLVMValueRef at = cg_min(f, cand, cg_i32(f, E - 1));
			LLVMValueRef v = cg_sload(f, f->ti32, cg_sptr(f, cg_addi(f, cg_muli(f, at, 4), g->tab)), 4);
			ok = LLVMBuildAnd(f->B, ok, LLVMBuildICmp(f->B, LLVMIntSLE, v, w, ""), "");
			lo = cg_select(f, ok, cand, lo);
		}
		g->e = lo;
		t0 = cg_sload(f, f->ti32, cg_sptr(f, cg_addi(f, cg_muli(f, lo, 4), g->tab)), 4);
		mte = cg_sload(f, f->ti32, cg_sptr(f, cg_addi(f, cg_muli(f, lo, 4), g->tab + 4)), 4);
		mte = cg_udiv(f, cg_sub(f, mte, t0), cg_i32(f, nt));
		local = cg_sub(f, w, t0);
		g->row0 = cg_gload(f, f->ti32, cg_gep(f, g->offs, lo, 4), 4);
		g->rend = cg_gload(f, f->ti32, cg_gep(f, g->offs, cg_addi(f, lo, 1), 4), 4);
	} else {
		LLVMValueRef M = cg_muli(f, g->T, s->m_per_t);
		mte = cg_udiv(f, cg_addi(f, M, s->bm - 1), cg_i32(f, s->bm));
		local = w;
		g->e = cg_i32(f, 0);
		g->row0 = cg_i32(f, 0);
		g->rend = M;
	}
	mt = cg_urem(f, local, mte);
	ntile = cg_udiv(f, local, mte);
	g->row0 = cg_add(f, g->row0, cg_muli(f, mt, s->bm));
	g->n0 = cg_muli(f, ntile, s->bn);
	g->bexp = gptr(g, g->B, cg_muli(f, cg_sext64(f, g->e), s->b_group_stride), esize(s->b_dt));
}

/* Global addresses of this thread's load chunks at k = 0. */
static void
tile_sources(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int ea = esize(s->a_dt), eb = esize(s->b_dt);

	for (int i = 0; i < g->a_n; i++) {
		/* rows past the segment read its last row: valid memory, never stored */
		LLVMValueRef r = cg_min(f, cg_add(f, g->row0, g->a_row[i]), cg_addi(f, g->rend, -1));
		LLVMValueRef src;
		if (s->gather) {
			src = cg_gload(f, f->ti32, cg_gep(f, g->gidx, r, 4), 4);
			if (s->gather_div > 1)
				src = cg_udiv(f, src, cg_i32(f, s->gather_div));
		} else {
			src = r;
		}
		g->a_src[i] = gptr(g, g->A, cg_add(f, cg_muli(f, cg_sext64(f, src), s->lda),
						   cg_sext64(f, cg_muli(f, g->a_kc[i], 8))), ea);
	}
	for (int i = 0; i < g->b_n; i++) {
		LLVMValueRef off;
		if (s->b_layout == CG_B_NK)
			off = cg_add(f, cg_muli(f, cg_sext64(f, cg_add(f, g->n0, g->b_row[i])), s->ldb),
				     cg_sext64(f, cg_muli(f, g->b_kc[i], 8)));
		else
			off = cg_add(f, cg_muli(f, cg_sext64(f, g->b_row[i]), s->ldb),
				     cg_sext64(f, cg_add(f, g->n0, cg_muli(f, g->b_kc[i], 8))));
		g->b_src[i] = gptr(g, g->bexp, off, eb);
	}
}

/* One 16-byte shared chunk from 8 global elements of type dt. */
static void
load_chunk(G *g, LLVMValueRef sdst, LLVMValueRef gsrc, DType dt)
{
	CgFn *f = g->f;
	LLVMValueRef h[8], w[4], v;

	if (dt != DT_F32) {
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

void
gemm_load_stage(G *g, LLVMValueRef soff, LLVMValueRef kt)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int ea = esize(s->a_dt), eb = esize(s->b_dt);
	LLVMValueRef k64 = cg_sext64(f, kt);
	LLVMValueRef adv_a = cg_muli(f, k64, (int64_t)s->bk * ea);
	LLVMValueRef adv_b = cg_muli(f, k64, s->b_layout == CG_B_NK ? (int64_t)s->bk * eb
								     : (int64_t)s->bk * s->ldb * eb);
	CgIf c;

	for (int i = 0; i < g->a_n; i++) {
		int guard = (i + 1) * g->nthr > g->a_chunks;
		if (guard)
			cg_if(f, &c, cg_lt(f, cg_addi(f, g->tid, (int64_t)i * g->nthr), cg_i32(f, g->a_chunks)));
		load_chunk(g, cg_sptr(f, cg_add(f, soff, g->a_soff[i])), cg_gep(f, g->a_src[i], adv_a, 1),
			   s->a_dt);
		if (guard)
			cg_endif(f, &c);
	}
	for (int i = 0; i < g->b_n; i++) {
		int guard = (i + 1) * g->nthr > g->b_chunks;
		if (guard)
			cg_if(f, &c, cg_lt(f, cg_addi(f, g->tid, (int64_t)i * g->nthr), cg_i32(f, g->b_chunks)));
		load_chunk(g, cg_sptr(f, cg_add(f, soff, g->b_soff[i])), cg_gep(f, g->b_src[i], adv_b, 1),
			   s->b_dt);
		if (guard)
			cg_endif(f, &c);
	}
}

/* Fragments of one k-step (16 deep) for the warp: A (mi x 4 regs), B (ni x 2). */
typedef struct Frag Frag;
struct Frag {
	LLVMValueRef a[MAXF][4], b[MAXF][2];
};

/* ldmatrix the fragments of k-step kk from the stage at byte offset soff. */
static void
load_frags(G *g, LLVMValueRef soff, int kk, Frag *fr)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	LLVMValueRef abase = cg_add(f, soff, g->a_lane), bbase = cg_add(f, soff, g->b_lane), r[4];

	for (int i = 0; i < g->mi; i++)
		cg_ldmatrix_x4(f, cg_sptr(f, cg_addi(f, abase, i * 16 * g->a_ld + kk * 32)), 0, fr->a[i]);
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
}

static void
mma_frags(G *g, Frag *fr)
{
	CgFn *f = g->f;

	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++) {
			LLVMValueRef c[4], d[4];
			for (int q = 0; q < 4; q++)
				c[q] = cg_get(f, g->acc[i][j][q]);
			cg_mma_16816(f, g->mt, fr->a[i], fr->b[j], c, d);
			for (int q = 0; q < 4; q++)
				cg_set(f, g->acc[i][j][q], d[q]);
		}
}

/* Fragments carried across loop iterations live in vars (promoted to phis). */
static void
frag_vars(G *g, Frag *v)
{
	CgFn *f = g->f;

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
				cg_set(g->f, v->a[i][q], x->a[i][q]);
			else
				x->a[i][q] = cg_get(g->f, v->a[i][q]);
		}
	for (int j = 0; j < g->ni; j++)
		for (int q = 0; q < 2; q++) {
			if (to_vars)
				cg_set(g->f, v->b[j][q], x->b[j][q]);
			else
				x->b[j][q] = cg_get(g->f, v->b[j][q]);
		}
}

static LLVMValueRef
stage_off(G *g, LLVMValueRef kt)
{
	CgFn *f = g->f;

	return cg_muli(f, cg_urem(f, kt, cg_i32(f, g->s.stages)), g->stage);
}

/*
 * The loop without fragment pipelining (GemmSpec.no_frag_pipe), after the
 * prologue: wait, barrier, refill the stage of k-tile kt-1, then ldmatrix
 * and mma over the stage of kt.  Kept to compare against.
 */
static void
mainloop_plain(G *g)
{
	CgFn *f = g->f;
	int S = g->s.stages;
	CgLoop l;
	CgIf c;
	LLVMValueRef kt, kn;
	Frag fr;

	kt = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, g->kt), cg_i32(f, 1));
	kn = cg_addi(f, kt, S - 1);
	cg_if(f, &c, cg_lt(f, kn, cg_i32(f, g->kt)));
	gemm_load_stage(g, stage_off(g, kn), kn);
	cg_endif(f, &c);
	cg_cp_async_commit(f);
	for (int kk = 0; kk < g->s.bk / 16; kk++) {
		load_frags(g, stage_off(g, kt), kk, &fr);
		mma_frags(g, &fr);
	}
	/* k-tile kt+1 has landed; every warp is done with kt */
	cg_cp_async_wait(f, S - 2);
	cg_barrier(f);
	cg_endloop(f, &l);
	cg_barrier(f);
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
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int S = s->stages, KK = s->bk / 16;
	CgLoop l;
	CgIf c;
	LLVMValueRef kt, kn, rd, nx;
	Frag cur, next, vars;

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
	kn = cg_addi(f, kt, S - 1);
	cg_if(f, &c, cg_lt(f, kn, cg_i32(f, g->kt)));
	gemm_load_stage(g, stage_off(g, kn), kn);
	cg_endif(f, &c);
	cg_cp_async_commit(f);
	frag_move(g, &vars, &cur, 0);
	for (int kk = 0; kk < KK; kk++) {
		if (kk + 1 < KK) {
			load_frags(g, rd, kk + 1, &next);
		} else {
			/* k-tile kt+1 has landed; every warp is past its reads of kt-1 */
			cg_cp_async_wait(f, S - 2);
			cg_barrier(f);
			load_frags(g, nx, 0, &next);	/* past the last tile: unused */
		}
		mma_frags(g, &cur);
		cur = next;
	}
	frag_move(g, &vars, &cur, 1);
	cg_endloop(f, &l);
	cg_barrier(f);		/* every warp is done with the stages */
}

/* ---- epilogue ---- */

static LLVMValueRef
load_f32(G *g, LLVMValueRef base, LLVMValueRef idx64, DType dt)
{
	CgFn *f = g->f;
	int sz = esize(dt);

	return cg_to_f32(f, cg_gload(f, cg_raw_type(f, dt), gptr(g, base, idx64, sz), sz), dt);
}

/* Row index of a row leaf for GEMM row r. */
static LLVMValueRef
leaf_row(G *g, const CgEpInst *in, LLVMValueRef r)
{
	CgFn *f = g->f;
	LLVMValueRef v;

	switch (in->rows) {
	case CGR_GATHER:
	case CGR_GATHER_RAW:
		v = cg_gload(f, f->ti32, cg_gep(f, g->gidx, r, 4), 4);
		if (in->rows == CGR_GATHER && g->s.gather_div > 1)
			v = cg_udiv(f, v, cg_i32(f, g->s.gather_div));
		return v;
	case CGR_SCATTER:
		return cg_gload(f, f->ti32, cg_gep(f, g->sidx, r, 4), 4);
	default:
		return r;
	}
}

/* A COL leaf at column col (i32) of its space. */
static LLVMValueRef
col_leaf(G *g, int i, LLVMValueRef col)
{
	const CgEpInst *in = &g->s.ep.in[i];
	CgFn *f = g->f;
	LLVMValueRef idx = cg_sext64(f, col);

	if (in->group_stride)
		idx = cg_add(f, idx, cg_muli(f, cg_sext64(f, g->e), in->group_stride));
	return load_f32(g, g->ep[i], idx, in->dt);
}

static void
store_out(G *g, LLVMValueRef drow, LLVMValueRef col, LLVMValueRef *v, int n)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int sz = esize(s->c_dt);
	LLVMValueRef off = cg_add(f, cg_muli(f, cg_sext64(f, drow), s->ldc), cg_sext64(f, col));
	LLVMValueRef p = gptr(g, g->C, off, sz);

	if (n == 1) {
		cg_gstore(f, cg_from_f32(f, v[0], s->c_dt), p, sz);
	} else if (s->c_dt == DT_F32) {
		LLVMValueRef x = LLVMGetUndef(LLVMVectorType(f->tf32, 2));
		x = LLVMBuildInsertElement(f->B, x, v[0], cg_i32(f, 0), "");
		x = LLVMBuildInsertElement(f->B, x, v[1], cg_i32(f, 1), "");
		cg_gstore(f, x, p, 8);
	} else {
		cg_gstore(f, cg_pack16x2(f, cg_from_f32(f, v[0], s->c_dt), cg_from_f32(f, v[1], s->c_dt)), p, 4);
	}
}

/* ---- output quantisation ---- */

/* Static quantisation: the scale and zero point, once per thread, as f32. */
static void
quant_setup(G *g)
{
	CgFn *f = g->f;
	const CgQuant *q = &g->s.quant;
	LLVMValueRef v;

	if (q->kind != CG_QUANT_STATIC)
		return;
	g->q_scale = cg_f32(f, q->scale);
	g->q_zero = q->zero != 0 ? cg_f32(f, q->zero) : NULL;
	if (q->scale_role) {
		v = cg_load_dt(f, q->scale_dt, g->q_scale_p, cg_i64(f, 0));
		g->q_scale = cg_round_dt(f, v, DT_F32);
	}
	if (q->zero_role) {
		v = cg_load_dt(f, q->zero_dt, g->q_zero_p, cg_i64(f, 0));
		g->q_zero = cg_round_dt(f, v, DT_F32);
	}
}

/* n quantised bytes (i8) at C[drow, col..]: one 16-bit store for a pair. */
static void
store_q(G *g, LLVMValueRef drow, LLVMValueRef col, LLVMValueRef *bits, int n)
{
	CgFn *f = g->f;
	LLVMBuilderRef B = f->B;
	LLVMValueRef off = cg_add(f, cg_muli(f, cg_sext64(f, drow), g->s.ldc), cg_sext64(f, col));
	LLVMValueRef p = gptr(g, g->C, off, 1), lo, hi;

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
 * col, col+1 (n = 2) or output column col (n = 1, after swiglu): stored,
 * quantised with the static scale, or (group) kept in the accumulator
 * registers until the group scales are known.
 */
static void
result(G *g, int mi, int h, int j, LLVMValueRef drow, LLVMValueRef col, LLVMValueRef *v, int n)
{
	const GemmSpec *s = &g->s;
	LLVMValueRef bits[2];

	switch (s->quant.kind) {
	case CG_QUANT_NONE:
		store_out(g, drow, col, v, n);
		break;
	case CG_QUANT_STATIC:
		for (int e = 0; e < n; e++)
			bits[e] = cg_quant_emit(g->f, &s->quant, s->c_dt, v[e], g->q_scale, g->q_zero);
		store_q(g, drow, col, bits, n);
		break;
	case CG_QUANT_GROUP:	/* the value quantize_dynamic reads: amax and q agree */
		for (int e = 0; e < n; e++)
			cg_set(g->f, g->acc[mi][j][2 * h + e], cg_round_dt(g->f, v[e], s->quant.in_dt));
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
	CgFn *f = g->f;
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
	CgFn *f = g->f;

	return cg_sptr(f, cg_addi(f, cg_muli(f, cg_add(f, cg_muli(f, row, q->nst), seg), 4), g->q_off));
}

static void
group_amax(G *g, GQ *q)
{
	CgFn *f = g->f;
	CgIf c;

	cg_barrier(f);		/* every warp is past the mainloop's reads of the stages */
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
	cg_barrier(f);
	for (int mi = 0; mi < g->mi; mi++)
		for (int h = 0; h < 2; h++)
			for (int k = 0; k < q->nsw; k++) {
				LLVMValueRef seg = cg_addi(f, q->seg0, k), a = cg_f32(f, 0);
				LLVMValueRef first = cg_muli(f, cg_udiv(f, seg, cg_i32(f, q->gs)), q->gs);
				for (int i = 0; i < q->gs; i++)
					a = cg_fmax(f, a, cg_sload(f, f->tf32, qslot(g, q, q->rl[mi][h], cg_addi(f, first, i)), 4));
				q->scale[mi][h][k] = cg_quant_emit_scale(f, g->s.c_dt, a);
			}
	cg_barrier(f);		/* the slots are stage memory again */
}

/* Row slot (mi, h), stored at row drow: its q, and the scales its warp writes. */
static void
group_store(G *g, const GQ *q, int mi, int h, LLVMValueRef drow)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int64_t ldcs = (g->sw >= 0 ? s->N / 2 : s->N) / s->quant.group;
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
		cg_gstore(f, q->scale[mi][h][k], gptr(g, g->Cs, off, 4), 4);
		cg_endif(f, &c);
	}
}

static void
group_quant(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	LLVMValueRef gq = cg_shr(f, g->lane, 2);
	GQ q;
	CgIf c;

	q.nv = g->sw >= 0 ? 1 : 2;
	q.fps = g->q_sg / g->q_fw;
	q.nsw = g->q_wow / g->q_sg;
	q.nst = s->bn * g->q_fw / 8 / g->q_sg;
	q.gs = s->quant.group / g->q_sg;
	q.tq = cg_and(f, g->lane, 3);
	q.wo0 = g->sw >= 0 ? cg_shr(f, g->wn0, 1) : g->wn0;
	q.seg0 = cg_udiv(f, q.wo0, cg_i32(f, g->q_sg));
	q.n0 = g->sw >= 0 ? cg_shr(f, g->n0, 1) : g->n0;
	for (int mi = 0; mi < g->mi; mi++)
		for (int h = 0; h < 2; h++)
			q.rl[mi][h] = cg_add(f, g->wm0, cg_addi(f, gq, g->mstride * mi + 8 * h));
	group_amax(g, &q);
	for (int mi = 0; mi < g->mi; mi++)
		for (int h = 0; h < 2; h++) {
			LLVMValueRef r = cg_add(f, g->row0, q.rl[mi][h]), drow;
			cg_if(f, &c, cg_lt(f, r, g->rend));
			drow = s->store == CG_STORE_SCATTER ? cg_gload(f, f->ti32, cg_gep(f, g->sidx, r, 4), 4) : r;
			group_store(g, &q, mi, h, drow);
			cg_endif(f, &c);
		}
}

/*
 * Thread (g, t) = (lane / 4, lane % 4) holds, for fragment (i, j), rows
 * wm0 + 16i + g (+8) and columns wn0 + 8j + 2t (+1): one row at a time,
 * two adjacent columns per fragment, which is what swiglu pairs.
 */
static void
epilogue(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	const CgEpilogue *ep = &s->ep;
	int n = ep->n, sw = g->sw, nin = sw >= 0 ? sw : n;
	LLVMValueRef gq = cg_shr(f, g->lane, 2), tq = cg_and(f, g->lane, 3);
	LLVMValueRef colv[MAXF][CG_EP_MAX][2], cols[MAXF];

	for (int j = 0; j < g->ni; j++) {
		LLVMValueRef c = cg_add(f, g->n0, cg_add(f, g->wn0, cg_addi(f, cg_shl(f, tq, 1), 8 * j)));
		cols[j] = c;
		for (int i = 0; i < n; i++) {
			if (ep->in[i].op != CGE_COL)
				continue;
			if (i < nin) {
				colv[j][i][0] = col_leaf(g, i, c);
				colv[j][i][1] = col_leaf(g, i, cg_addi(f, c, 1));
			} else {
				colv[j][i][0] = col_leaf(g, i, cg_shr(f, c, 1));
			}
		}
	}
	for (int mi = 0; mi < g->mi; mi++)
		for (int h = 0; h < 2; h++) {
			LLVMValueRef r = cg_add(f, g->row0, cg_add(f, g->wm0, cg_addi(f, gq, g->mstride * mi + 8 * h)));
			LLVMValueRef drow, rowv[CG_EP_MAX], matb[CG_EP_MAX];
			CgIf c;
			cg_if(f, &c, cg_lt(f, r, g->rend));
			drow = s->store == CG_STORE_SCATTER ? cg_gload(f, f->ti32, cg_gep(f, g->sidx, r, 4), 4) : r;
			for (int i = 0; i < n; i++) {
				const CgEpInst *in = &ep->in[i];
				if (in->op == CGE_ROW)
					rowv[i] = load_f32(g, g->ep[i], cg_sext64(f, leaf_row(g, in, r)), in->dt);
				if (in->op == CGE_MAT) {
					int64_t ld = in->ld ? in->ld : (i < nin ? s->N : g->width);
					matb[i] = gptr(g, g->ep[i], cg_muli(f, cg_sext64(f, leaf_row(g, in, r)), ld),
						       esize(in->dt));
				}
			}
			for (int j = 0; j < g->ni; j++) {
				LLVMValueRef val[2][CG_EP_MAX], res[2];
				for (int e = 0; e < 2; e++) {
					LLVMValueRef acc = cg_get(f, g->acc[mi][j][2 * h + e]);
					LLVMValueRef col = cg_addi(f, cols[j], e);
					for (int i = 0; i < nin; i++) {
						const CgEpInst *in = &ep->in[i];
						switch (in->op) {
						case CGE_ACC: val[e][i] = acc; break;
						case CGE_IMM: val[e][i] = cg_f32(f, in->imm); break;
						case CGE_COL: val[e][i] = colv[j][i][e]; break;
						case CGE_ROW: val[e][i] = rowv[i]; break;
						case CGE_MAT:
							val[e][i] = load_f32(g, matb[i], cg_sext64(f, col), in->dt);
							break;
						default: break;
						}
					}
					cg_ep_emit_range(f, ep, 0, nin, val[e]);
					res[e] = n == 0 ? acc : sw < 0 ? val[e][n - 1] : NULL;
				}
				if (sw < 0) {
					result(g, mi, h, j, drow, cols[j], res, 2);
					continue;
				}
				{
					LLVMValueRef *v = val[0], oc = cg_shr(f, cols[j], 1);
					const CgEpInst *w = &ep->in[sw];
					v[sw] = cg_ep_emit_op(f, w, val[0][w->a], val[1][w->a]);
					for (int i = sw + 1; i < n; i++) {
						const CgEpInst *in = &ep->in[i];
						switch (in->op) {
						case CGE_IMM: v[i] = cg_f32(f, in->imm); break;
						case CGE_COL: v[i] = colv[j][i][0]; break;
						case CGE_ROW: v[i] = rowv[i]; break;
						case CGE_MAT: v[i] = load_f32(g, matb[i], cg_sext64(f, oc), in->dt); break;
						default: break;
						}
					}
					cg_ep_emit_range(f, ep, sw + 1, n, v);
					result(g, mi, h, j, drow, oc, &v[n - 1], 1);
				}
			}
			cg_endif(f, &c);
		}
	if (s->quant.kind == CG_QUANT_GROUP)
		group_quant(g);
}

/* ---- the kernel ---- */

static void
tile(G *g, LLVMValueRef w)
{
	tile_coords(g, w);
	tile_sources(g);
	if (g->s.mainloop == CG_MAINLOOP_WGMMA)
		gemm_wgmma_mainloop(g);
	else
		mainloop(g);
	epilogue(g);
}

static int
params(G *g, CgParam *p)
{
	const GemmSpec *s = &g->s;
	int n = 0;

	p[n++] = (CgParam){CGP_PTR, "A"};
	if (s->gather)
		p[n++] = (CgParam){CGP_PTR, "gather_idx"};
	p[n++] = (CgParam){CGP_PTR, "B"};
	p[n++] = (CgParam){CGP_PTR, "C"};
	if (s->quant.kind == CG_QUANT_GROUP && s->quant.want_scales)
		p[n++] = (CgParam){CGP_PTR, "C_scale"};
	if (s->store == CG_STORE_SCATTER)
		p[n++] = (CgParam){CGP_PTR, "scatter_idx"};
	if (s->groups > 0)
		p[n++] = (CgParam){CGP_PTR, "offsets"};
	for (int i = 0; i < s->ep.n; i++)
		if (cg_ep_is_load(s->ep.in[i].op))
			p[n++] = (CgParam){CGP_PTR, s->ep.in[i].role};
	if (s->quant.kind == CG_QUANT_STATIC && s->quant.scale_role)
		p[n++] = (CgParam){CGP_PTR, s->quant.scale_role};
	if (s->quant.kind == CG_QUANT_STATIC && s->quant.zero_role)
		p[n++] = (CgParam){CGP_PTR, s->quant.zero_role};
	p[n++] = (CgParam){CGP_I32, "T"};
	return n;
}

static void
bind_params(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int n = 0;

	cg_arg_noalias(f, n);
	g->A = cg_arg(f, n++);
	if (s->gather) {
		cg_arg_noalias(f, n);
		g->gidx = cg_arg(f, n++);
	}
	cg_arg_noalias(f, n);
	g->B = cg_arg(f, n++);
	g->C = cg_arg(f, n++);
	if (s->quant.kind == CG_QUANT_GROUP && s->quant.want_scales) {
		cg_arg_noalias(f, n);
		g->Cs = cg_arg(f, n++);
	}
	if (s->store == CG_STORE_SCATTER) {
		cg_arg_noalias(f, n);
		g->sidx = cg_arg(f, n++);
	}
	if (s->groups > 0) {
		cg_arg_noalias(f, n);
		g->offs = cg_arg(f, n++);
	}
	for (int i = 0; i < s->ep.n; i++)
		if (cg_ep_is_load(s->ep.in[i].op)) {
			if (s->ep.in[i].op != CGE_MAT)	/* a residual may be the output itself */
				cg_arg_noalias(f, n);
			g->ep[i] = cg_arg(f, n++);
		}
	if (s->quant.kind == CG_QUANT_STATIC && s->quant.scale_role)
		g->q_scale_p = cg_arg(f, n++);
	if (s->quant.kind == CG_QUANT_STATIC && s->quant.zero_role)
		g->q_zero_p = cg_arg(f, n++);
	g->T = cg_arg(f, n++);
}

static void
note(G *g, char *buf, size_t n)
{
	const GemmSpec *s = &g->s;
	char ep[512];
	int k;

	cg_ep_print(ep, sizeof ep, &s->ep);
	k = snprintf(buf, n, "gemm %s.%s->%s B[%s] N=%lld K=%lld %dx%dx%d w%dx%d s%d%s%s %s%s%s%s",
		     dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt),
		     s->b_layout == CG_B_NK ? "N,K" : "K,N", (long long)s->N, (long long)s->K,
		     s->bm, s->bn, s->bk, s->warps_m, s->warps_n, s->stages,
		     s->mainloop == CG_MAINLOOP_WGMMA ? " wgmma" : "",
		     s->mainloop == CG_MAINLOOP_WGMMA && (s->no_frag_pipe || s->stages < 4) ? " wait0" : "",
		     s->sched == CG_SCHED_PERSISTENT ? "persistent" : "tiles",
		     s->gather ? " gather" : "", s->store == CG_STORE_SCATTER ? " scatter" : "",
		     s->groups ? " grouped" : " dense");
	if (s->groups && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, " E=%d", s->groups);
	if (s->ep.n && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, " ep: %s", ep);
	if (s->quant.kind != CG_QUANT_NONE && (size_t)k < n) {
		cg_quant_print(ep, sizeof ep, &s->quant, s->c_dt);
		snprintf(buf + k, n - (size_t)k, " quant: %s", ep);
	}
}

int
cg_emit_gemm(CgModule *m, const char *name, const GemmSpec *spec, Diag *d)
{
	G g;
	CgParam p[10 + CG_EP_MAX];
	int np, block[3];
	CgExpr grid[3];
	char buf[800];
	CgFn *f;

	memset(&g, 0, sizeof g);
	if (cg_gemm_check(cg_module_target(m), spec, d) < 0)
		return -1;
	layout(&g, spec);
	np = params(&g, p);
	f = cg_fn_begin(m, name, p, np, g.nthr, g.s.min_ctas, d);
	if (!f)
		return -1;
	g.f = f;
	bind_params(&g);
	thread_setup(&g);
	quant_setup(&g);
	if (g.s.groups > 0)
		expert_table(&g);
	if (g.s.sched == CG_SCHED_PERSISTENT) {
		CgLoop l;
		LLVMValueRef total = work_total(&g);
		LLVMValueRef w = cg_loop(f, &l, cg_ctaid(f, 0), total, cg_nctaid(f, 0));
		tile(&g, w);
		cg_endloop(f, &l);
		grid[0] = CG_EXPR_INT(g.s.ctas);
		grid[1] = CG_EXPR_INT(1);
	} else {
		CgIf c;
		LLVMValueRef w = cg_add(f, cg_mul(f, cg_ctaid(f, 1), cg_nctaid(f, 0)), cg_ctaid(f, 0));
		cg_if(f, &c, cg_lt(f, w, work_total(&g)));
		tile(&g, w);
		cg_endif(f, &c);
		grid[0] = (CgExpr){g.s.m_per_t, (int64_t)g.s.groups * (g.s.bm - 1), g.s.bm};
		grid[1] = CG_EXPR_INT(g.s.N / g.s.bn);
	}
	grid[2] = CG_EXPR_INT(1);
	block[0] = g.nthr;
	block[1] = block[2] = 1;
	note(&g, buf, sizeof buf);
	return cg_fn_end(f, block, grid, g.smem, buf);
}
