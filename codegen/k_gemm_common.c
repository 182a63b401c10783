/*
 * k_gemm_common.c — what the tensor-core (k_gemm.c) and the CUDA-core
 * (k_gemm_simt.c) GEMM kernels share: the same spec, parameters, schedule
 * and epilogue, so program.c binds either kernel the same way.
 *
 *	gemm_begin:  parameters in order, bound; tid, lane, warp
 *	gemm_end:    [expert table from the device offsets]
 *	             for each tile w of the schedule: coordinates, body(k)
 *	the body:    its own mainloop, then per row gemm_row (destination,
 *	             row leaves) and per column pair gemm_ep_pair, gemm_store
 *
 * Schedule: a linear work index w over (expert, n-tile, m-tile), m-tiles
 * fastest within an expert, so CTAs that run together share B tiles and one
 * expert's A rows (dense with GemmSpec.bands: m-tiles fastest within a band
 * of that many row tiles, so that a wave's A rows are a band's, not all of
 * A).  Grouped mode builds, at kernel start, the table of each
 * expert's first tile from the device offsets (a shuffle scan; empty experts
 * own no tiles) and finds a tile's expert by binary search.  CG_SCHED_TILES
 * launches one CTA per potential tile (those past the end exit);
 * CG_SCHED_PERSISTENT launches `ctas` CTAs that stride over w;
 * CG_SCHED_STREAM (k_gemm.c's stream()) gives `ctas` CTAs equal runs of
 * the (w, k-tile) sequence.  With
 * GemmCore.ord set (the warp-specialised mainloop), the experts are ranked
 * by their tiles first and w runs over them heaviest first.
 */
#include <stdio.h>
#include <string.h>

#include "k_gemm.h"

static int
swiglu_at(const CgEpilogue *e)
{
	for (int i = 0; i < e->n; i++)
		if (e->in[i].op == CGE_SWIGLU)
			return i;
	return -1;
}

void
gemm_resolve(GemmCore *k, const GemmSpec *in)
{
	GemmSpec *s = &k->s;

	*s = *in;
	if (s->m_per_t <= 0)
		s->m_per_t = 1;
	if (s->gather_div <= 0)
		s->gather_div = 1;
	if (s->a_rep < 1)
		s->a_rep = 1;
	if (s->lda == 0)
		s->lda = gemm_a_cols(s);
	if (s->ldb == 0)
		s->ldb = s->b_layout == CG_B_NK ? s->K : s->N;
	if (s->b_group_stride == 0)
		s->b_group_stride = s->N * s->K;
	k->sw = swiglu_at(&s->ep);
	k->width = k->sw >= 0 ? s->N / 2 : s->N;
	if (s->ldc == 0)
		s->ldc = k->width;
	k->nt = s->bn > 0 ? (int)((s->N + s->bn - 1) / s->bn) : 0;
}

int
gemm_check_common(const GemmCore *k, const char *who, Diag *d)
{
	const GemmSpec *s = &k->s;

	if (s->groups < 0 || s->groups > 4096)
		return diag_error(d, LOC_NONE, "%s: %d groups (0..4096)", who, s->groups);
	if (s->m_per_t < 1 || s->m_per_t > 1024)
		return diag_error(d, LOC_NONE, "%s: m_per_t = %d", who, s->m_per_t);
	if (s->sched != CG_SCHED_TILES && (s->ctas < 1 || s->ctas > 65535))
		return diag_error(d, LOC_NONE, "%s: %d persistent CTAs", who, s->ctas);
	if (s->sched != CG_SCHED_TILES && s->sched != CG_SCHED_PERSISTENT && s->sched != CG_SCHED_STREAM)
		return diag_error(d, LOC_NONE, "%s: unknown schedule %d", who, s->sched);
	if (s->bands < 0 || (s->bands > 0 && (s->groups > 0 || s->cluster >= 2 || s->sched == CG_SCHED_STREAM)))
		return diag_error(d, LOC_NONE, "%s: bands of %d row tiles (dense, no clusters or stream-K)", who,
				  s->bands);
	if (s->sched == CG_SCHED_STREAM && (s->split_k > 1 || s->split_slots < 1))
		return diag_error(d, LOC_NONE, "%s: stream-K needs a workspace (split_slots = %d) and no "
				  "split-K (%d)", who, s->split_slots, s->split_k);
	if (s->store != CG_STORE_ROWS && s->store != CG_STORE_SCATTER)
		return diag_error(d, LOC_NONE, "%s: unknown store mode %d", who, s->store);
	if (s->split_k < 0 || s->split_k > 64)
		return diag_error(d, LOC_NONE, "%s: split_k = %d (0..64)", who, s->split_k);
	if (s->split_k > 1 && (s->sched != CG_SCHED_TILES || s->split_slots < 1))
		return diag_error(d, LOC_NONE, "%s: split-K needs the tiles schedule and a workspace "
				  "(split_slots = %d)", who, s->split_slots);
	if (s->a_rep > 1 && (s->a_rep > 16 || s->K % s->a_rep || s->gather || s->f8.group > 0 ||
			     s->bq.group > 0))
		return diag_error(d, LOC_NONE, "%s: A read %d times along K = %lld (need K a multiple, "
				  "at most 16 times, A not gathered, not FP8, B not quantised)", who, s->a_rep,
				  (long long)s->K);
	if (s->snake && s->cluster >= 2)	/* a cluster's CTAs take items 2i, 2i + 1 (4i ..) by rank */
		return diag_error(d, LOC_NONE, "%s: serpentine rounds with clusters of %d", who, s->cluster);
	if (s->cluster_b && s->groups > 0 && (k->nt % 2 || s->split_k > 1 || s->sched == CG_SCHED_STREAM))
		return diag_error(d, LOC_NONE, "%s: grouped pairs sharing B (cluster_b) need an even number of column "
				  "tiles (%d) and no split-K or stream-K", who, k->nt);
	if (s->min_ctas < 0 || s->min_ctas > 32)
		return diag_error(d, LOC_NONE, "%s: min_ctas = %d", who, s->min_ctas);
	if (cg_ep_check(&s->ep, d) < 0)
		return -1;
	for (int i = 0; i < s->ep.n; i++) {
		const CgEpInst *e = &s->ep.in[i];
		if (e->op != CGE_ROW && e->op != CGE_MAT)
			continue;
		if ((e->rows == CGR_GATHER || e->rows == CGR_GATHER_RAW) && !s->gather &&
		    !(e->rows == CGR_GATHER_RAW && s->leaf_gather))
			return diag_error(d, LOC_NONE, "%s: epilogue e%d reads rows through gather_idx, but A is not gathered", who, i);
		if (e->rows == CGR_SCATTER && s->store != CG_STORE_SCATTER)
			return diag_error(d, LOC_NONE, "%s: epilogue e%d reads rows through scatter_idx, but the store is not scattered", who, i);
	}
	return 0;
}

/* ---- parameters ---- */

static int
params(const GemmCore *k, CgParam *p)
{
	const GemmSpec *s = &k->s;
	int n = 0;

	p[n++] = (CgParam){CGP_PTR, "A"};
	if (gemm_has_gidx(s))
		p[n++] = (CgParam){CGP_PTR, "gather_idx"};
	p[n++] = (CgParam){CGP_PTR, "B"};
	if (s->bq.group > 0)
		p[n++] = (CgParam){CGP_PTR, "B_scale"};
	if (s->bq.group > 0 && s->bq.zero)
		p[n++] = (CgParam){CGP_PTR, "B_zero"};
	if (s->f8.group > 0) {
		p[n++] = (CgParam){CGP_PTR, "B_scale"};
		p[n++] = (CgParam){CGP_PTR, "A_scale"};
	}
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
	if (s->bq.group > 0 && s->bq.bulk == CG_QBULK_TMA) {	/* k_gemm_mixed.c's tmaps_bq */
		p[n++] = (CgParam){CGP_TMAP, "B_map"};
		p[n++] = (CgParam){CGP_TMAP, "B_scale_map"};
		if (s->bq.zero)
			p[n++] = (CgParam){CGP_TMAP, "B_zero_map"};
	}
	if (s->mainloop == CG_MAINLOOP_WS) {	/* tensor maps of A (unless gathered by cp.async) and B (k_gemm_ws.c) */
		if (!gemm_a_cp_async(s))
			p[n++] = (CgParam){CGP_TMAP, "A_map"};
		if (gemm_a_rows_map(s))
			p[n++] = (CgParam){CGP_TMAP, "A_rows_map"};
		p[n++] = (CgParam){CGP_TMAP, "B_map"};
		if (s->tma_store)
			p[n++] = (CgParam){CGP_TMAP, "C_map"};
	}
	if (s->fold.k > 0) {	/* the combine in the last CTA: its operands */
		if (s->fold.weighted)
			p[n++] = (CgParam){CGP_PTR, "fold_w"};
		if (s->fold.residual)
			p[n++] = (CgParam){CGP_PTR, "fold_x"};
		p[n++] = (CgParam){CGP_PTR, "fold_y"};
	}
	if (s->split_k >= 1 || s->sched == CG_SCHED_STREAM || s->fold.k > 0)	/* split_k 1: unused (another target splits) */
		p[n++] = (CgParam){CGP_PTR, "splitk_ws"};
	p[n++] = (CgParam){CGP_I32, "T"};
	return n;
}

/* Parameter n, declared noalias: no other parameter points into it. */
static LLVMValueRef
arg_noalias(CgFn *f, int n)
{
	cg_arg_noalias(f, n);
	return cg_arg(f, n);
}

static void
bind_params(GemmCore *k)
{
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	int n = 0;

	k->A = arg_noalias(f, n++);
	if (gemm_has_gidx(s))
		k->gidx = arg_noalias(f, n++);
	k->B = arg_noalias(f, n++);
	if (s->bq.group > 0)
		k->Bs = arg_noalias(f, n++);
	if (s->bq.group > 0 && s->bq.zero)
		k->Bz = arg_noalias(f, n++);
	if (s->f8.group > 0) {
		k->Bs = arg_noalias(f, n++);
		k->As = arg_noalias(f, n++);
	}
	k->C = cg_arg(f, n++);
	if (s->quant.kind == CG_QUANT_GROUP && s->quant.want_scales)
		k->Cs = arg_noalias(f, n++);
	if (s->store == CG_STORE_SCATTER)
		k->sidx = arg_noalias(f, n++);
	if (s->groups > 0)
		k->offs = arg_noalias(f, n++);
	for (int i = 0; i < s->ep.n; i++) {
		if (!cg_ep_is_load(s->ep.in[i].op))
			continue;
		/* a residual (a MAT leaf) may be the output itself */
		k->ep[i] = s->ep.in[i].op != CGE_MAT ? arg_noalias(f, n++) : cg_arg(f, n++);
	}
	if (s->quant.kind == CG_QUANT_STATIC && s->quant.scale_role)
		k->q_scale_p = cg_arg(f, n++);
	if (s->quant.kind == CG_QUANT_STATIC && s->quant.zero_role)
		k->q_zero_p = cg_arg(f, n++);
	if (s->bq.group > 0 && s->bq.bulk == CG_QBULK_TMA) {	/* B's maps, in params()'s order */
		k->bqmap = n;
		n += 2 + (s->bq.zero != 0);
	}
	if (s->mainloop == CG_MAINLOOP_WS) {
		k->amap = gemm_a_cp_async(s) ? -1 : n++;
		k->arows = gemm_a_rows_map(s) ? n++ : -1;
		k->bmap = n++;
		k->cmap = s->tma_store ? n++ : -1;
	}
	if (s->fold.k > 0) {
		if (s->fold.weighted)
			k->fold_w = arg_noalias(f, n++);
		if (s->fold.residual)
			k->fold_x = arg_noalias(f, n++);
		k->fold_y = arg_noalias(f, n++);
	}
	if (s->split_k >= 1 || s->sched == CG_SCHED_STREAM || s->fold.k > 0)
		k->ws = arg_noalias(f, n++);
	k->T = cg_arg(f, n++);
}

CgFn *
gemm_begin(GemmCore *k, CgModule *m, const char *name, Diag *d)
{
	CgParam p[16 + CG_EP_MAX];
	int np = params(k, p);
	CgFn *f;

	m->griddep_later = k->s.b_ahead > 0;	/* stream_ahead opens it */
	f = cg_fn_begin(m, name, p, np, k->nthr, k->s.min_ctas, d);
	m->griddep_later = 0;
	if (!f)
		return NULL;
	k->f = f;
	/* the fast division's extra registers spill in the WS variants that
	 * already hold the most: ping-pong, clusters, 64x256 warpgroup tiles
	 * (ptxas, unit_ws: 16-44 bytes with the default epilogue of GELU) */
	f->div_rn = k->s.mainloop == CG_MAINLOOP_WS &&
		    (k->s.ws_mode == CG_WS_PINGPONG || k->s.cluster >= 2 || k->s.wg_wide);
	bind_params(k);
	k->tid = cg_tid(f, 0);
	k->lane = cg_and(f, k->tid, 31);
	k->warp = cg_shr(f, k->tid, 5);
	return f;
}

/* ---- schedule ---- */

static LLVMValueRef
ieq(CgFn *f, LLVMValueRef a, int64_t b)
{
	return LLVMBuildICmp(f->B, LLVMIntEQ, a, cg_i32(f, b), "");
}

/* The inclusive sum of v over lanes 0..lane of the warp (shfl.up steps). */
static LLVMValueRef
warp_scan(GemmCore *k, LLVMValueRef v)
{
	CgFn *f = k->f;

	for (int dl = 1; dl < 32; dl *= 2) {
		LLVMValueRef y = cg_shfl_up(f, v, dl);
		v = cg_select(f, cg_lt(f, k->lane, cg_i32(f, dl)), v, cg_add(f, v, y));
	}
	return v;
}

/* The i32 at shared byte offset off (i32). */
static LLVMValueRef
sload32(CgFn *f, LLVMValueRef off)
{
	return cg_sload(f, f->ti32, cg_sptr(f, off), 4);
}

/* offsets[e] (e i32) */
static LLVMValueRef
offs_load(GemmCore *k, LLVMValueRef e)
{
	LLVMValueRef p = cg_gep(k->f, k->offs, e, 4);

	return k->offs_volatile ? cg_gload_volatile(k->f, k->f->ti32, p, 4) : cg_gload(k->f, k->f->ti32, p, 4);
}

/* Tiles of expert e (i32, < E): cdiv(offsets[e+1] - offsets[e], bm), 0 unless in. */
static LLVMValueRef
expert_tiles(GemmCore *k, LLVMValueRef e, LLVMValueRef in)
{
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	LLVMValueRef lo, hi, v;

	lo = offs_load(k, e);
	hi = offs_load(k, cg_addi(f, e, 1));
	v = cg_udiv(f, cg_addi(f, cg_max(f, cg_sub(f, hi, lo), cg_i32(f, 0)), s->bm - 1),
		    cg_i32(f, s->bm));
	return cg_select(f, in, v, cg_i32(f, 0));
}

/* Warp 0 turns the warps' sums in wsum into their inclusive scan. */
static void
scan_warp_sums(GemmCore *k)
{
	CgFn *f = k->f;
	LLVMValueRef ok = cg_lt(f, k->lane, cg_i32(f, k->nwarp));
	LLVMValueRef at = cg_sptr(f, cg_addi(f, cg_muli(f, cg_min(f, k->lane, cg_i32(f, k->nwarp - 1)), 4), k->wsum));
	LLVMValueRef w = cg_select(f, ok, cg_sload(f, f->ti32, at, 4), cg_i32(f, 0));
	CgIf c;

	w = warp_scan(k, w);
	cg_if(f, &c, ok);
	cg_sstore(f, w, at, 4);
	cg_endif(f, &c);
}

/*
 * Heavy experts first (GemmCore.ord): cnt[e] = tiles of expert e, and
 * ord[r] = the expert of rank r, ranked by tiles, most first (ties by
 * index), so the schedule hands out the longest experts' tiles first and
 * the short ones fill in at the end.  O(E^2 / threads): for E <= 512.
 */
static void
rank_experts(GemmCore *k)
{
	CgFn *f = k->f;
	int E = k->s.groups;
	CgIf c;
	CgLoop l;

	for (int base = 0; base < E; base += k->nthr) {
		LLVMValueRef e = cg_addi(f, k->tid, base), in = cg_lt(f, e, cg_i32(f, E));
		LLVMValueRef t = expert_tiles(k, cg_min(f, e, cg_i32(f, E - 1)), in);
		cg_if(f, &c, in);
		cg_sstore(f, t, cg_sptr(f, cg_addi(f, cg_shl(f, e, 2), k->cnt)), 4);
		cg_endif(f, &c);
	}
	cg_barrier(f);
	for (int base = 0; base < E; base += k->nthr) {
		LLVMValueRef e = cg_addi(f, k->tid, base), te, j, tj, before, r;
		LLVMValueRef rank = cg_var(f, f->ti32, cg_i32(f, 0));
		cg_if(f, &c, cg_lt(f, e, cg_i32(f, E)));
		te = sload32(f, cg_addi(f, cg_shl(f, e, 2), k->cnt));
		j = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, E), cg_i32(f, 1));
		tj = sload32(f, cg_addi(f, cg_shl(f, j, 2), k->cnt));
		before = LLVMBuildOr(f->B, LLVMBuildICmp(f->B, LLVMIntSGT, tj, te, ""),
				     LLVMBuildAnd(f->B, LLVMBuildICmp(f->B, LLVMIntEQ, tj, te, ""), cg_lt(f, j, e), ""), "");
		cg_set(f, rank, cg_add(f, cg_get(f, rank), LLVMBuildZExt(f->B, before, f->ti32, "")));
		cg_endloop(f, &l);
		r = cg_get(f, rank);
		cg_sstore(f, e, cg_sptr(f, cg_addi(f, cg_shl(f, r, 2), k->ord)), 4);
		cg_endif(f, &c);
	}
	cg_barrier(f);
}

/*
 * Grouped mode: tab[e] = first work index of expert e, for e = 0..E, from
 * offsets: tab[e+1] - tab[e] = cdiv(offsets[e+1] - offsets[e], bm) * nt.
 * A shuffle scan per warp, then over the warps' sums; nthr experts a round.
 */
static void
expert_table(GemmCore *k)
{
	CgFn *f = k->f;
	int E = k->s.groups;
	LLVMValueRef carry = cg_var(f, f->ti32, cg_i32(f, 0));
	CgIf c;

	if (k->ord)
		rank_experts(k);
	for (int base = 0; base < E; base += k->nthr) {
		LLVMValueRef e = cg_addi(f, k->tid, base), v, in, tot, pre;
		LLVMValueRef ei = cg_min(f, e, cg_i32(f, E - 1));
		in = cg_lt(f, e, cg_i32(f, E));
		if (k->ord)	/* slot e holds the expert of rank e */
			v = cg_select(f, in, sload32(f, cg_addi(f, cg_shl(f, sload32(f, cg_addi(f, cg_shl(f, ei, 2), k->ord)), 2),
								 k->cnt)), cg_i32(f, 0));
		else
			v = expert_tiles(k, ei, in);
		v = warp_scan(k, v);
		cg_if(f, &c, ieq(f, k->lane, 31));
		cg_sstore(f, v, cg_sptr(f, cg_addi(f, cg_muli(f, k->warp, 4), k->wsum)), 4);
		cg_endif(f, &c);
		cg_barrier(f);
		cg_if(f, &c, ieq(f, k->warp, 0));
		scan_warp_sums(k);
		cg_endif(f, &c);
		cg_barrier(f);
		pre = sload32(f, cg_addi(f, cg_muli(f, cg_max(f, cg_addi(f, k->warp, -1), cg_i32(f, 0)), 4), k->wsum));
		pre = cg_select(f, ieq(f, k->warp, 0), cg_i32(f, 0), pre);
		v = cg_add(f, cg_add(f, v, pre), cg_get(f, carry));
		cg_if(f, &c, in);
		cg_sstore(f, cg_muli(f, v, k->nt), cg_sptr(f, cg_addi(f, cg_muli(f, e, 4), k->tab + 4)), 4);
		cg_endif(f, &c);
		tot = sload32(f, cg_i32(f, k->wsum + 4 * (k->nwarp - 1)));
		cg_set(f, carry, cg_add(f, cg_get(f, carry), tot));
		cg_barrier(f);	/* wsum is rewritten by the next round */
	}
	cg_if(f, &c, ieq(f, k->tid, 0));
	cg_sstore(f, cg_i32(f, 0), cg_sptr(f, cg_i32(f, k->tab)), 4);
	cg_endif(f, &c);
	cg_barrier(f);
}

LLVMValueRef
gemm_work_total(GemmCore *k)
{
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	LLVMValueRef M, mt;

	if (s->groups > 0)
		return sload32(f, cg_i32(f, k->tab + 4 * s->groups));
	M = cg_muli(f, k->T, s->m_per_t);
	mt = cg_udiv(f, cg_addi(f, M, s->bm - 1), cg_i32(f, s->bm));
	if ((s->cluster == 2 && s->cluster_b) || s->cluster == 4)	/* row tiles in pairs: an odd count's last has no rows */
		mt = cg_and(f, cg_addi(f, mt, 1), ~1);
	return cg_muli(f, mt, s->cluster == 4 ? (k->nt + 1) & ~1 : k->nt);	/* 2x2: column tiles in pairs too */
}

/* The last expert whose first work index is <= w: a binary search of tab. */
static LLVMValueRef
find_expert(GemmCore *k, LLVMValueRef w)
{
	CgFn *f = k->f;
	int E = k->s.groups, step = 1;
	LLVMValueRef lo = cg_i32(f, 0);

	while (step * 2 < E)
		step *= 2;
	for (; step >= 1 && E > 1; step /= 2) {
		LLVMValueRef cand = cg_addi(f, lo, step);
		LLVMValueRef ok = cg_lt(f, cand, cg_i32(f, E));
		LLVMValueRef at = cg_min(f, cand, cg_i32(f, E - 1));
		LLVMValueRef v = sload32(f, cg_addi(f, cg_muli(f, at, 4), k->tab));
		ok = LLVMBuildAnd(f->B, ok, LLVMBuildICmp(f->B, LLVMIntSLE, v, w, ""), "");
		lo = cg_select(f, ok, cand, lo);
	}
	return lo;
}

/*
 * Grouped pairs (GemmSpec.cluster_b: clusters of 2 sharing B): an expert of
 * R row tiles and nt column tiles (nt even) has R x nt items, as without
 * pairs, so items 2i and 2i + 1 (a cluster's two CTAs) are always one
 * expert's.  The first R/2 x nt pairs (R/2 rounded down) are row tiles 2j,
 * 2j + 1 of one column tile, which share its B (k->bshare); where R is odd
 * the last row tile's column tiles go in pairs 2j, 2j + 1, each CTA loading
 * its own B: an expert of one row tile (DeepSeek-V3 at T = 4096: 128 +- 11
 * rows, about half the experts) leaves no CTA of the pair idle.
 */
static void
grouped_pairs(GemmCore *k, LLVMValueRef mte, LLVMValueRef local, LLVMValueRef *mt, LLVMValueRef *ntile)
{
	CgFn *f = k->f;
	LLVMValueRef half = cg_shr(f, mte, 1), pair = cg_shr(f, local, 1), odd = cg_and(f, local, 1);
	LLVMValueRef shared = cg_muli(f, half, k->nt), hd = cg_max(f, half, cg_i32(f, 1));

	k->bshare = cg_lt(f, pair, shared);
	*mt = cg_select(f, k->bshare, cg_add(f, cg_shl(f, cg_urem(f, pair, hd), 1), odd), cg_addi(f, mte, -1));
	*ntile = cg_select(f, k->bshare, cg_udiv(f, pair, hd), cg_add(f, cg_shl(f, cg_sub(f, pair, shared), 1), odd));
}

/*
 * Clusters of 4 as 2x2 (GemmSpec.cluster = 4, dense): items 4q .. 4q + 3 (a
 * cluster's CTAs, rank r = item & 3 under the persistent stride over a
 * multiple of 4) are row tiles 2i, 2i + 1 (r & 1) of column tiles 2j, 2j + 1
 * (r >> 1), row pairs fastest, the counts rounded up to even
 * (gemm_work_total): a row tile past M reads zeros and stores no row; a
 * column tile past N (gemm_tile_coords) loads the last real one's B for
 * its column partner and stores nothing.
 */
static void
quad_tile(GemmCore *k, LLVMValueRef mte, LLVMValueRef local, LLVMValueRef *mt, LLVMValueRef *ntile)
{
	CgFn *f = k->f;
	LLVMValueRef rp = cg_shr(f, cg_addi(f, mte, 1), 1), q = cg_shr(f, local, 2), r = cg_and(f, local, 3);

	*mt = cg_add(f, cg_shl(f, cg_urem(f, q, rp), 1), cg_and(f, r, 1));
	*ntile = cg_add(f, cg_shl(f, cg_udiv(f, q, rp), 1), cg_shr(f, r, 1));
}

void
gemm_tile_coords(GemmCore *k, LLVMValueRef w)
{
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	LLVMValueRef mte, local, mt, ntile, t0;

	if (s->groups > 0) {
		LLVMValueRef lo = find_expert(k, w);	/* the slot: the expert, or its rank */
		k->e = k->ord ? sload32(f, cg_addi(f, cg_shl(f, lo, 2), k->ord)) : lo;
		t0 = sload32(f, cg_addi(f, cg_muli(f, lo, 4), k->tab));
		mte = sload32(f, cg_addi(f, cg_muli(f, lo, 4), k->tab + 4));
		mte = cg_udiv(f, cg_sub(f, mte, t0), cg_i32(f, k->nt));
		local = cg_sub(f, w, t0);
		k->row0 = offs_load(k, k->e);
		k->rend = offs_load(k, cg_addi(f, k->e, 1));
	} else {
		LLVMValueRef M = cg_muli(f, k->T, s->m_per_t);
		mte = cg_udiv(f, cg_addi(f, M, s->bm - 1), cg_i32(f, s->bm));
		local = w;
		k->e = cg_i32(f, 0);
		k->row0 = cg_i32(f, 0);
		k->rend = M;
	}
	k->bshare = NULL;
	if (s->cluster_b && s->groups > 0) {
		grouped_pairs(k, mte, local, &mt, &ntile);
	} else if (s->cluster == 4) {
		quad_tile(k, mte, local, &mt, &ntile);
	} else if (s->cluster == 2 && s->cluster_b) {	/* items 2i, 2i + 1: row tiles 2j, 2j + 1 of one column tile
						 * (dense: the pairs' count, mte rounded up to even) */
		LLVMValueRef pairs = cg_shr(f, cg_addi(f, mte, 1), 1), pair = cg_shr(f, local, 1);
		mt = cg_add(f, cg_shl(f, cg_urem(f, pair, pairs), 1), cg_and(f, local, 1));
		ntile = cg_udiv(f, pair, pairs);
	} else if (s->cluster == 2) {	/* items 2i, 2i + 1: one row tile, column tiles 2j, 2j + 1 (the cluster's pair) */
		LLVMValueRef pair = cg_shr(f, local, 1);
		mt = cg_urem(f, pair, mte);
		ntile = cg_add(f, cg_shl(f, cg_udiv(f, pair, mte), 1), cg_and(f, local, 1));
	} else if (s->bands > 0) {	/* band b: row tiles b B .. b B + h - 1, fastest */
		LLVMValueRef per = cg_i32(f, s->bands * k->nt), r = cg_urem(f, local, per);
		LLVMValueRef first = cg_muli(f, cg_udiv(f, local, per), s->bands);
		LLVMValueRef h = cg_min(f, cg_sub(f, mte, first), cg_i32(f, s->bands));
		mt = cg_add(f, first, cg_urem(f, r, h));
		ntile = cg_udiv(f, r, h);
	} else {
		mt = cg_urem(f, local, mte);
		ntile = cg_udiv(f, local, mte);
	}
	k->row0 = cg_add(f, k->row0, cg_muli(f, mt, s->bm));
	if (s->cluster == 4 && k->nt % 2) {	/* the 2x2's column tile past N: a real one's B, no rows to store */
		LLVMValueRef past = cg_lt(f, cg_i32(f, k->nt - 1), ntile);
		k->rend = cg_select(f, past, k->row0, k->rend);
		ntile = cg_min(f, ntile, cg_i32(f, k->nt - 1));
	}
	k->n0 = cg_muli(f, ntile, s->bn);
	k->bexp = gptr(f, k->B, cg_muli(f, cg_sext64(f, k->e), s->b_group_stride), esize(s->b_dt));
}

void
gemm_prologue(GemmCore *k)
{
	if (k->s.groups > 0)
		expert_table(k);
}

/*
 * Serpentine rounds (GemmSpec.snake): this CTA's item of round j (i32),
 * j*n + c on even rounds and j*n + n-1-c on odd ones (n CTAs, c this one).
 * Round j's items are j*n .. j*n + n-1 either way, so the CTAs that run
 * together still share B tiles and A rows; but with n even and m-tiles
 * fastest, the plain stride gave CTA c only items of c's parity, and a
 * grouped GEMM whose experts have one full row tile and one of a few rows
 * (DeepSeek-V3 at T = 4096: 128 +- 11 rows) handed the even CTAs every full
 * tile and the odd ones every short tile.  A CTA's items only grow with j:
 * when round j's is past the work, so are the later ones.
 */
LLVMValueRef
gemm_round_item(GemmCore *k, LLVMValueRef j)
{
	CgFn *f = k->f;
	LLVMValueRef n = cg_nctaid(f, 0), c = cg_ctaid(f, 0);
	LLVMValueRef odd = LLVMBuildICmp(f->B, LLVMIntNE, cg_and(f, j, 1), cg_i32(f, 0), "");

	return cg_add(f, cg_mul(f, j, n), cg_select(f, odd, cg_sub(f, cg_addi(f, n, -1), c), c));
}

/* Rounds j = first, first + step, ... while round j has work: body for
 * this CTA's item of each (k->w, k->round), skipping one past the work. */
static void
snake_rounds(GemmCore *k, void (*body)(GemmCore *), LLVMValueRef first, int step)
{
	CgFn *f = k->f;
	LLVMValueRef n = cg_nctaid(f, 0), total = gemm_work_total(k);
	LLVMValueRef rounds = cg_udiv(f, cg_add(f, total, cg_addi(f, n, -1)), n);
	CgLoop l;
	CgIf c;

	k->round = cg_loop(f, &l, first, rounds, cg_i32(f, step));
	k->w = gemm_round_item(k, k->round);
	cg_if(f, &c, cg_lt(f, k->w, total));
	gemm_tile_coords(k, k->w);
	body(k);
	cg_endif(f, &c);
	cg_endloop(f, &l);
}

LLVMValueRef
gemm_later_item(GemmCore *k)
{
	CgFn *f = k->f;

	if (k->s.snake)
		return LLVMBuildICmp(f->B, LLVMIntNE, k->round, cg_i32(f, 0), "");
	return LLVMBuildICmp(f->B, LLVMIntNE, k->w, cg_ctaid(f, 0), "");
}

LLVMValueRef
gemm_next_item(GemmCore *k)
{
	CgFn *f = k->f;

	if (k->s.snake)
		return gemm_round_item(k, cg_addi(f, k->round, 1));
	return cg_add(f, k->w, cg_nctaid(f, 0));
}

void
gemm_schedule(GemmCore *k, void (*body)(GemmCore *))
{
	CgFn *f = k->f;
	LLVMValueRef w;

	if (k->s.sched == CG_SCHED_PERSISTENT && k->s.snake) {
		snake_rounds(k, body, cg_i32(f, 0), 1);
	} else if (k->s.sched == CG_SCHED_PERSISTENT) {
		CgLoop l;
		LLVMValueRef total = gemm_work_total(k);
		w = cg_loop(f, &l, cg_ctaid(f, 0), total, cg_nctaid(f, 0));
		k->w = w;
		gemm_tile_coords(k, w);
		body(k);
		cg_endloop(f, &l);
	} else {
		CgIf c;
		w = cg_add(f, cg_mul(f, cg_ctaid(f, 1), cg_nctaid(f, 0)), cg_ctaid(f, 0));
		cg_if(f, &c, cg_lt(f, w, gemm_work_total(k)));
		k->w = w;
		gemm_tile_coords(k, w);
		body(k);
		cg_endif(f, &c);
	}
}

/*
 * The persistent schedule shared by `parts` workers (the ping-pong consumer
 * warpgroups): worker `part` (i32) takes this CTA's work items part, part +
 * parts, ... (w = ctaid + nctaid * (part + parts * i)), so that they
 * alternate in the order gemm_schedule hands them to the producer; k->w is
 * the item's index.
 */
void
gemm_schedule_share(GemmCore *k, void (*body)(GemmCore *), LLVMValueRef part, int parts)
{
	CgFn *f = k->f;
	LLVMValueRef n = cg_nctaid(f, 0), total = gemm_work_total(k);
	CgLoop l;

	if (k->s.snake) {	/* rounds part, part + parts, ... */
		snake_rounds(k, body, part, parts);
		return;
	}
	k->w = cg_loop(f, &l, cg_add(f, cg_ctaid(f, 0), cg_mul(f, part, n)), total, cg_muli(f, n, parts));
	gemm_tile_coords(k, k->w);
	body(k);
	cg_endloop(f, &l);
}

/*
 * GemmSpec.fold: the combine of the slots C in the CTA that finishes last.
 * After the CTA's barrier (every warp's stores issued) thread 0 releases
 * them (fence.acq_rel.gpu), adds 1 to the ticket (word 0 of the workspace)
 * and, where it drew the last (ctas - 1), resets it to 0 and acquires the
 * others' stores (the fence again); the CTA learns its draw through shared
 * word 0 (the expert table's, read by no warp after the barrier) and a
 * second barrier.  Then its threads take the combine's thread groups g,
 * g + nthr, ... as the combine kernel's thread g computes them: the same
 * bits, with no launch and no grid dependency.  Nothing waits for a CTA
 * still running (the front's ticket, k_front.c draw_ticket): the emulator's
 * CTA-after-CTA run draws them in order.
 */
void
gemm_fold(GemmCore *k)
{
	CgFn *f = k->f;
	const CgCombineSpec *c = &k->s.fold;
	LLVMValueRef rows, g;
	CgIf ci;
	CgLoop l;

	cg_barrier(f);
	cg_if(f, &ci, cg_last_cta(f, k->tid, k->ws, cg_nctaid(f, 0)));
	rows = cg_addi(f, cg_muli(f, cg_max(f, k->T, cg_i32(f, 0)), c->rows.a), c->rows.b);
	g = cg_loop(f, &l, k->tid, cg_muli(f, rows, c->H / cg_combine_vw(c)), cg_i32(f, k->nthr));
	cg_combine_group(f, c, k->C, k->fold_w, k->fold_x, k->fold_y, g);
	cg_endloop(f, &l);
	cg_endif(f, &ci);
}

int
gemm_finish(GemmCore *k, const char *note)
{
	const GemmSpec *s = &k->s;
	int block[3] = {k->nthr, 1, 1};
	CgExpr grid[3];

	if (s->sched != CG_SCHED_TILES) {
		grid[0] = CG_EXPR_INT(s->ctas);
		grid[1] = CG_EXPR_INT(1);
	} else {
		grid[0] = (CgExpr){s->m_per_t, (int64_t)s->groups * (s->bm - 1), s->bm};
		grid[1] = CG_EXPR_INT(k->nt);
	}
	grid[2] = CG_EXPR_INT(k->s.split_k > 1 ? k->s.split_k : 1);
	return cg_fn_end(k->f, block, grid, k->smem, note);
}

int
gemm_end(GemmCore *k, void (*body)(GemmCore *), const char *note)
{
	gemm_prologue(k);
	gemm_schedule(k, body);
	return gemm_finish(k, note);
}

int
gemm_note_tail(const GemmCore *k, char *buf, size_t n, int at)
{
	const GemmSpec *s = &k->s;
	char ep[512];

	if ((size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " %s%s%s%s%s%s%s",
			       s->sched == CG_SCHED_PERSISTENT ? "persistent" :
			       s->sched == CG_SCHED_STREAM ? (s->sk_unroll ? "stream-k unrolled" : "stream-k") : "tiles",
			       s->snake && s->sched == CG_SCHED_PERSISTENT ? " snake" : "",
			       s->live_rows && gemm_live_rows(s) ? " live-rows" : "",
			       s->no_rank && s->groups && s->mainloop == CG_MAINLOOP_WS ? " no-rank" : "",
			       s->gather ? " gather" : "", s->store == CG_STORE_SCATTER ? " scatter" : "",
			       s->groups ? " grouped" : " dense");
	if (s->groups && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " E=%d", s->groups);
	if (s->b_ahead > 0 && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " B ahead %d k-tiles%s", s->b_ahead,
			       s->ahead_table ? " (its table)" : "");
	if (s->bands > 0 && !s->groups && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " bands of %d", s->bands);
	if (s->split_k > 1 && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " split-k %d", s->split_k);
	if (s->live_sums && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " live-sums");
	if (s->sched == CG_SCHED_STREAM && s->tail > 0 && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " tail %d runs of 1/%d", s->tail, s->tail_w);
	if (s->sched == CG_SCHED_STREAM && s->units > 0 && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " units %d a CTA", s->units);
	if (s->a_rep > 1 && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " A x%d along K", s->a_rep);
	if (s->ep.n && (size_t)at < n) {
		cg_ep_print(ep, sizeof ep, &s->ep);
		at += snprintf(buf + at, n - (size_t)at, " ep: %s", ep);
	}
	if ((s->f8.b_block > 1 || s->f8.whole) && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, " f8:%s%.0d%s%s", s->f8.b_block > 1 ? " b_block=" : "",
			       s->f8.b_block > 1 ? s->f8.b_block : 0, s->f8.whole ? " whole" : "", s->f8.acc2 ? " acc2" : "");
	return at;
}

/* ---- rows, leaves, the epilogue program, the store ---- */

LLVMValueRef
gemm_load_f32(CgFn *f, LLVMValueRef base, LLVMValueRef idx64, DType dt)
{
	int sz = esize(dt);

	return cg_to_f32(f, cg_gload(f, cg_raw_type(f, dt), gptr(f, base, idx64, sz), sz), dt);
}

/* gather_idx[r], divided by gather_div unless raw. */
static LLVMValueRef
gathered(GemmCore *k, LLVMValueRef r, int raw)
{
	CgFn *f = k->f;
	LLVMValueRef v = cg_gload(f, f->ti32, cg_gep(f, k->gidx, r, 4), 4);

	if (!raw && k->s.gather_div > 1)
		v = cg_udiv(f, v, cg_i32(f, k->s.gather_div));
	return v;
}

LLVMValueRef
gemm_a_row(GemmCore *k, LLVMValueRef r)
{
	/* rows past the segment read its last row: valid memory, never stored */
	r = cg_min(k->f, r, cg_addi(k->f, k->rend, -1));
	return k->s.gather ? gathered(k, r, 0) : r;
}

/* Row index of a row leaf for GEMM row r. */
static LLVMValueRef
leaf_row(GemmCore *k, const CgEpInst *in, LLVMValueRef r)
{
	CgFn *f = k->f;

	switch (in->rows) {
	case CGR_GATHER:
	case CGR_GATHER_RAW:
		return gathered(k, r, in->rows == CGR_GATHER_RAW);
	case CGR_SCATTER:
		return cg_gload(f, f->ti32, cg_gep(f, k->sidx, r, 4), 4);
	default:
		return r;
	}
}

LLVMValueRef
gemm_dest_row(GemmCore *k, LLVMValueRef r)
{
	CgFn *f = k->f;

	return k->s.store == CG_STORE_SCATTER ? cg_gload(f, f->ti32, cg_gep(f, k->sidx, r, 4), 4) : r;
}

LLVMValueRef
gemm_col_leaf(GemmCore *k, int i, LLVMValueRef col)
{
	const CgEpInst *in = &k->s.ep.in[i];
	CgFn *f = k->f;
	LLVMValueRef idx = cg_sext64(f, col);

	if (in->group_stride)
		idx = cg_add(f, idx, cg_muli(f, cg_sext64(f, k->e), in->group_stride));
	return gemm_load_f32(f, k->ep[i], idx, in->dt);
}

void
gemm_row(GemmCore *k, LLVMValueRef r, GemmRow *row)
{
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	const CgEpilogue *ep = &s->ep;
	int nin = k->sw >= 0 ? k->sw : ep->n;

	row->drow = gemm_dest_row(k, r);
	for (int i = 0; i < ep->n; i++) {
		const CgEpInst *in = &ep->in[i];
		if (in->op == CGE_ROW)
			row->rowv[i] = gemm_load_f32(f, k->ep[i], cg_sext64(f, leaf_row(k, in, r)), in->dt);
		if (in->op == CGE_MAT) {
			int64_t ld = in->ld ? in->ld : (i < nin ? s->N : k->width);
			row->matb[i] = gptr(f, k->ep[i], cg_muli(f, cg_sext64(f, leaf_row(k, in, r)), ld),
					    esize(in->dt));
		}
	}
}

/*
 * The leaves of pair p for its column col+e (e = 0, 1: the program before
 * swiglu), or for its output column (e < 0: the program after swiglu).
 * With clamp, the column is clamped into the row (columns past N compute
 * on valid operands and are not stored).
 */
static void
leaves(GemmCore *k, const GemmRow *row, const GemmPair *p, int e, LLVMValueRef *val)
{
	CgFn *f = k->f;
	int after = e < 0, n = k->s.ep.n;
	int i0 = after ? k->sw + 1 : 0, i1 = after || k->sw < 0 ? n : k->sw;
	const LLVMValueRef *colv = p->colv ? p->colv[after ? 0 : e] : NULL;
	LLVMValueRef col = after ? p->out : cg_addi(f, p->col, e);

	if (k->clamp)
		col = cg_min(f, col, cg_i32(f, (after ? k->width : k->s.N) - 1));
	for (int i = i0; i < i1; i++) {
		const CgEpInst *in = &k->s.ep.in[i];
		switch (in->op) {
		case CGE_ACC: val[i] = after ? NULL : p->acc[e]; break;
		case CGE_IMM: val[i] = cg_f32(f, in->imm); break;
		case CGE_COL: val[i] = colv ? colv[i] : gemm_col_leaf(k, i, col); break;
		case CGE_ROW: val[i] = row->rowv[i]; break;
		case CGE_MAT:
			val[i] = p->matv ? p->matv[after ? 0 : e][i]
					 : gemm_load_f32(f, row->matb[i], cg_sext64(f, col), in->dt);
			break;
		default: break;
		}
	}
}

int
gemm_mat_values(const GemmCore *k)
{
	int n = 0, nin = k->sw >= 0 ? k->sw : k->s.ep.n;

	for (int i = 0; i < k->s.ep.n; i++)
		if (k->s.ep.in[i].op == CGE_MAT)
			n += i < nin ? 2 : 1;
	return n;
}

/*
 * A residual or other matrix leaf is read from a parameter that may be C
 * itself (not noalias), so neither LLVM nor ptxas moves a pair's loads above
 * the store of the pair before: loaded in gemm_ep_pair, each pair waits a
 * full memory latency (DeepSeek-V3's shared down projection at T = 4096, two
 * leaves, 64 pairs a thread: 435 us for 120 GFLOP).  Loaded ahead for
 * several pairs, they overlap.  In place (C is the leaf) it stays exact: a
 * thread reads only the elements it then stores, each before its store.
 * The columns are leaves()'s: col + e before swiglu, col / 2 after.
 */
void
gemm_mat_leaves(GemmCore *k, const GemmRow *row, LLVMValueRef col, LLVMValueRef (*matv)[CG_EP_MAX])
{
	CgFn *f = k->f;
	int n = k->s.ep.n, sw = k->sw, nin = sw >= 0 ? sw : n;

	for (int i = 0; i < n; i++) {
		const CgEpInst *in = &k->s.ep.in[i];
		if (in->op != CGE_MAT)
			continue;
		if (i < nin && !k->clamp) {	/* the pair in one load: col is even, ld a multiple of 8 */
			int sz = esize(in->dt);
			LLVMTypeRef vt = LLVMVectorType(cg_raw_type(f, in->dt), 2);
			LLVMValueRef v = cg_gload(f, vt, gptr(f, row->matb[i], cg_sext64(f, col), sz), 2 * sz);
			for (int e = 0; e < 2; e++)
				matv[e][i] = cg_to_f32(f, LLVMBuildExtractElement(f->B, v, cg_i32(f, e), ""), in->dt);
			continue;
		}
		for (int e = 0; e < (i < nin ? 2 : 1); e++) {
			LLVMValueRef c = i < nin ? cg_addi(f, col, e) : cg_shr(f, col, 1);
			if (k->clamp)
				c = cg_min(f, c, cg_i32(f, (i < nin ? k->s.N : k->width) - 1));
			matv[e][i] = gemm_load_f32(f, row->matb[i], cg_sext64(f, c), in->dt);
		}
	}
}

int
gemm_ep_pair(GemmCore *k, const GemmRow *row, GemmPair *p)
{
	CgFn *f = k->f;
	const CgEpilogue *ep = &k->s.ep;
	int n = ep->n, sw = k->sw, nin = sw >= 0 ? sw : n;
	LLVMValueRef val[2][CG_EP_MAX], *v = val[0];
	const CgEpInst *w;

	for (int e = 0; e < 2; e++) {
		leaves(k, row, p, e, val[e]);
		cg_ep_emit_range(f, ep, 0, nin, val[e]);
		p->res[e] = n == 0 ? p->acc[e] : sw < 0 ? val[e][n - 1] : NULL;
	}
	p->out = p->col;
	if (sw < 0)
		return 2;
	/* swiglu: one value at output column col/2, then the rest of the program */
	w = &ep->in[sw];
	p->out = cg_shr(f, p->col, 1);
	v[sw] = cg_ep_emit_op(f, w, val[0][w->a], val[1][w->a]);
	leaves(k, row, p, -1, v);
	cg_ep_emit_range(f, ep, sw + 1, n, v);
	p->res[0] = v[n - 1];
	return 1;
}

LLVMValueRef
gemm_c_ptr(GemmCore *k, LLVMValueRef drow, LLVMValueRef col)
{
	CgFn *f = k->f;
	LLVMValueRef off = cg_add(f, cg_muli(f, cg_sext64(f, drow), k->s.ldc), cg_sext64(f, col));

	return gptr(f, k->C, off, esize(k->s.c_dt));
}

void
gemm_store(GemmCore *k, LLVMValueRef drow, LLVMValueRef col, LLVMValueRef *v, int n)
{
	gemm_store_at(k, gemm_c_ptr(k, drow, col), v, n);
}

void
gemm_store_at(GemmCore *k, LLVMValueRef p, LLVMValueRef *v, int n)
{
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	int sz = esize(s->c_dt);

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
