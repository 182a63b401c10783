/*
 * k_gemm_vec.c — decode GEMMs of a few rows as warp dot products on CUDA
 * cores (GemmSpec.mainloop = CG_MAINLOOP_VEC): the same spec, parameters,
 * schedule and epilogue as k_gemm.c (k_gemm_common.c), for tiles of at most
 * VEC_MAXR rows, where the tensor-core decode tile (16 rows, 4 warps an
 * SM, cp.async stages) is bound by its instruction latency and not by DRAM
 * (docs/codegen.md, "Decode GEMMs as warp dot products").
 *
 *	work item: a row tile (bm rows of one expert) x bn columns (bn even:
 *	    swiglu's pairs), taken by one warp; items in schedule order
 *	    (expert, column group, row tile), warp w of the grid takes items
 *	    w, w + warps of the grid, ... (persistent: `ctas` CTAs)
 *	per item: lane l reads k = 8 (32 i + l) .. +7 of each column's B row
 *	    (16 bytes, ld.global.nc.L1::no_allocate: a warp reads 512
 *	    contiguous bytes of a row) and of each row of A (L1-cached: the
 *	    CTA's warps read the same rows), U rounds i of loads issued before
 *	    their FMAs; f32 FMAs in k order per lane, then a fixed shfl.up
 *	    sum over the lanes (lane 31 holds each dot product)
 *	epilogue: lane 31, per row and column pair (gemm_row, gemm_ep_pair,
 *	    gemm_store): the epilogue program of every builder.
 *
 * No shared memory but the expert table, no barrier after it: warps stream
 * independently, every SM busy with bm x bn items whatever the routing.
 * The sums are in a fixed order (T and the routing decide it): the same
 * bits every run.
 */
#include <stdio.h>
#include <string.h>

#include "k_gemm.h"

#define VTHR 256		/* threads a CTA */
#define VWARP (VTHR / 32)
#define VEC_MAXR 8		/* rows a tile */
#define VEC_MAXC 8		/* columns an item */
#define VEC_LOADS 24		/* 16-byte loads of A and B a lane issues per group of rounds */
#define VEC_EL 8		/* elements a 16-byte vector */

typedef struct Vec Vec;
struct Vec {
	GemmCore k;		/* first: the common callbacks cast back */
	int R, C;		/* rows a tile, columns an item */
	int rounds, tail;	/* full rounds of 32 vectors along K; vectors of the last, partial one */
	int U;			/* rounds a group of loads */
	LLVMValueRef acc[VEC_MAXR][VEC_MAXC];	/* vars */
};

static void
layout(Vec *g, const GemmSpec *in)
{
	const GemmSpec *s = &g->k.s;
	int64_t kv;

	memset(g, 0, sizeof *g);
	gemm_resolve(&g->k, in);
	g->k.nthr = VTHR;
	g->k.nwarp = VWARP;
	g->k.clamp = 0;		/* N % bn == 0: every column is valid */
	g->R = s->bm;
	g->C = s->bn;
	kv = s->K / VEC_EL;
	g->rounds = (int)(kv / 32);
	g->tail = (int)(kv % 32);
	/* more rows: A's unpacked rows take the registers (4 rows at 24 spilled); loads
	 * a group ahead: two groups live, half the loads each */
	g->U = g->R + g->C > 0 ? (g->R <= 2 ? VEC_LOADS : VEC_LOADS / 2) / (s->vec_ahead ? 2 : 1) / (g->R + g->C) : 1;
	if (g->U < 1)
		g->U = 1;
	if (g->U > g->rounds && g->rounds > 0)
		g->U = g->rounds;
	g->k.tab = 0;
	g->k.wsum = (4 * (s->groups + 1) + 15) & ~15;
	g->k.smem = s->groups > 0 ? g->k.wsum + 4 * VWARP : 0;
}

int
cg_gemm_vec_smem(const GemmSpec *s)
{
	Vec g;

	layout(&g, s);
	return g.k.smem;
}

int
cg_gemm_vec_check(const CgTarget *t, const GemmSpec *in, Diag *d)
{
	Vec g;
	const GemmSpec *s = &g.k.s;

	layout(&g, in);
	if (cg_target_check(t, d) < 0)
		return -1;
	if (!(s->a_dt == DT_BF16 || s->a_dt == DT_F16) || s->b_dt != s->a_dt || !gemm_io_type(s->c_dt))
		return diag_error(d, LOC_NONE, "gemm-vec: types %s x %s -> %s (need A and B both bf16 or "
				  "both f16, C f32, bf16 or f16)", dtype_name(s->a_dt), dtype_name(s->b_dt),
				  dtype_name(s->c_dt));
	if (s->b_layout != CG_B_NK || s->bq.group > 0 || s->f8.group > 0 || s->a_rep > 1 ||
	    s->quant.kind != CG_QUANT_NONE || s->split_k > 1)
		return diag_error(d, LOC_NONE, "gemm-vec: B [N,K] in A's type only (no [K,N], quantised B, FP8, "
				  "A read along K more than once, output quantisation or split-K)");
	if (s->sched != CG_SCHED_PERSISTENT)
		return diag_error(d, LOC_NONE, "gemm-vec: the persistent schedule only (warps take items)");
	if (s->N <= 0 || s->K <= 0 || s->N > INT32_MAX || s->K > INT32_MAX || s->K % VEC_EL)
		return diag_error(d, LOC_NONE, "gemm-vec: N = %lld, K = %lld (need K a multiple of %d)",
				  (long long)s->N, (long long)s->K, VEC_EL);
	if (s->bm < 1 || s->bm > VEC_MAXR || s->bn < 2 || s->bn > VEC_MAXC || s->bn % 2 || s->N % s->bn)
		return diag_error(d, LOC_NONE, "gemm-vec: %d rows x %d columns an item (need 1..%d rows, an even "
				  "2..%d columns dividing N = %lld)", s->bm, s->bn, VEC_MAXR, VEC_MAXC,
				  (long long)s->N);
	if (s->lda < s->K || s->lda % VEC_EL || s->ldb < s->K || s->ldb % VEC_EL || s->ldc < g.k.width ||
	    (s->groups > 0 && (s->b_group_stride < s->N * s->ldb || s->b_group_stride % VEC_EL)))
		return diag_error(d, LOC_NONE, "gemm-vec: lda %lld, ldb %lld, B's group stride %lld (multiples of "
				  "%d, at least a row and an expert) or ldc %lld", (long long)s->lda,
				  (long long)s->ldb, (long long)s->b_group_stride, VEC_EL, (long long)s->ldc);
	if (s->ws_mode != CG_WS_COOPERATIVE || s->cluster > 1)
		return diag_error(d, LOC_NONE, "gemm-vec: no ping-pong consumers or clusters");
	if (s->fold.k > 0 && cg_combine_check(&s->fold, d) < 0)
		return -1;
	if (s->fold.k > 0 && (s->fold.slot_dt != s->c_dt || s->fold.H != g.k.width || s->store != CG_STORE_SCATTER))
		return diag_error(d, LOC_NONE, "gemm-vec: the combine in the last CTA needs C to be its slots "
				  "(%s rows of %lld scattered; C is %s, %lld columns)", dtype_name(s->fold.slot_dt),
				  (long long)s->fold.H, dtype_name(s->c_dt), (long long)g.k.width);
	return gemm_check_common(&g.k, "gemm-vec", d);
}

/* ---- pieces ---- */

/* The two elements (low half first) of a 32-bit word of dt, as f32. */
static void
unpack2(CgFn *f, LLVMValueRef w, DType dt, LLVMValueRef *out)
{
	LLVMBuilderRef B = f->B;

	if (dt == DT_BF16) {	/* exact: a bf16 is the high half of an f32 */
		out[0] = LLVMBuildBitCast(B, cg_shl(f, w, 16), f->tf32, "");
		out[1] = LLVMBuildBitCast(B, LLVMBuildAnd(B, w, cg_i32(f, (int32_t)0xffff0000u), ""), f->tf32, "");
		return;
	}
	out[0] = cg_to_f32(f, LLVMBuildTrunc(B, w, f->ti16, ""), dt);
	out[1] = cg_to_f32(f, LLVMBuildTrunc(B, LLVMBuildLShr(B, w, cg_i32(f, 16), ""), f->ti16, ""), dt);
}

/* 16 bytes at p as 8 f32 (the four words unpacked), zeros unless live (NULL: always). */
static void
vec8(CgFn *f, LLVMValueRef *w, DType dt, LLVMValueRef live, LLVMValueRef *out)
{
	for (int j = 0; j < 4; j++) {
		LLVMValueRef x = live ? cg_select(f, live, w[j], cg_i32(f, 0)) : w[j];
		unpack2(f, x, dt, &out[2 * j]);
	}
}

/* The four words of A at element offset off (i64), an ordinary (L1-cached) load. */
static void
load_a(Vec *g, LLVMValueRef off, LLVMValueRef *w)
{
	CgFn *f = g->k.f;
	LLVMValueRef v = cg_gload(f, LLVMVectorType(f->ti32, 4), gptr(f, g->k.A, off, 2), 16);

	for (int j = 0; j < 4; j++)
		w[j] = LLVMBuildExtractElement(f->B, v, cg_i32(f, j), "");
}

/* Round i0 + u's element offset (i64) of lane l: k = 8 (32 (i0 + u) + l);
 * in a partial round, vector 0 where the lane is dead. */
static LLVMValueRef
round_k(Vec *g, LLVMValueRef i0, int u, LLVMValueRef live)
{
	CgFn *f = g->k.f;
	LLVMValueRef v = cg_add(f, cg_muli(f, cg_addi(f, i0, u), 32), g->k.lane);

	if (live)
		v = cg_select(f, live, v, cg_i32(f, 0));
	return cg_sext64(f, cg_muli(f, v, VEC_EL));
}

/* The live lanes of a partial round (NULL: a full one). */
static LLVMValueRef
round_live(Vec *g, int partial)
{
	return partial ? cg_lt(g->k.f, g->k.lane, cg_i32(g->k.f, g->tail)) : NULL;
}

/* The B words of nu rounds from round i0 (i32) of the current item: bw[u][c][4]. */
static void
load_b(Vec *g, LLVMValueRef i0, int nu, int partial, const LLVMValueRef *bcol, LLVMValueRef (*bw)[VEC_MAXC][4])
{
	CgFn *f = g->k.f;
	LLVMValueRef live = round_live(g, partial);

	for (int u = 0; u < nu; u++) {
		LLVMValueRef k = round_k(g, i0, u, live);
		for (int c = 0; c < g->C; c++)
			cg_gload_stream(f, gptr(f, g->k.bexp, cg_add(f, bcol[c], k), 2), 4, bw[u][c]);
	}
}

/* The FMAs of those rounds, A's rows loaded per round (L1). */
static void
fma_rounds(Vec *g, LLVMValueRef i0, int nu, int partial, const LLVMValueRef *arow, LLVMValueRef (*bw)[VEC_MAXC][4])
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef live = round_live(g, partial);

	for (int u = 0; u < nu; u++) {
		LLVMValueRef a[VEC_MAXR][VEC_EL], b[VEC_MAXC][VEC_EL], aw[4], k = round_k(g, i0, u, live);
		for (int r = 0; r < g->R; r++) {
			load_a(g, cg_add(f, arow[r], k), aw);
			vec8(f, aw, s->a_dt, live, a[r]);
		}
		for (int c = 0; c < g->C; c++)
			vec8(f, bw[u][c], s->b_dt, live, b[c]);
		for (int x = 0; x < VEC_EL; x++)
			for (int r = 0; r < g->R; r++)
				for (int c = 0; c < g->C; c++)
					cg_set(f, g->acc[r][c], cg_fma(f, a[r][x], b[c][x], cg_get(f, g->acc[r][c])));
	}
}

/* nu rounds from round i0: every B load first (the bytes in flight), then the FMAs. */
static void
rounds(Vec *g, LLVMValueRef i0, int nu, int partial, const LLVMValueRef *arow, const LLVMValueRef *bcol)
{
	LLVMValueRef bw[VEC_LOADS][VEC_MAXC][4];

	load_b(g, i0, nu, partial, bcol, bw);
	fma_rounds(g, i0, nu, partial, arow, bw);
}

/* The warp's sum (shfl.up steps, a fixed order), in lane 31. */
static LLVMValueRef
warp_sum31(Vec *g, LLVMValueRef v)
{
	CgFn *f = g->k.f;

	for (int d = 1; d < 32; d *= 2) {
		LLVMValueRef o = LLVMBuildBitCast(f->B, cg_shfl_up(f, LLVMBuildBitCast(f->B, v, f->ti32, ""), d),
						  f->tf32, "");
		o = cg_select(f, cg_lt(f, g->k.lane, cg_i32(f, d)), cg_f32(f, 0), o);
		v = LLVMBuildFAdd(f->B, o, v, "");
	}
	return v;
}

/* Row r of the tile (sums[r][c], in lane 31; rw: its leaves, loaded
 * ahead): each column pair's epilogue and store. */
static void
epilogue_row(Vec *g, int r, const GemmRow *rw, LLVMValueRef (*sum)[VEC_MAXC])
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	CgIf c;

	cg_if(f, &c, cg_lt(f, cg_addi(f, g->k.row0, r), g->k.rend));
	for (int j = 0; j < g->C; j += 2) {
		GemmPair p = {.col = cg_addi(f, g->k.n0, j), .acc = {sum[r][j], sum[r][j + 1]}};
		if (gemm_ep_pair(&g->k, rw, &p) == 1) {
			gemm_store(&g->k, rw->drow, p.out, p.res, 1);
		} else if (s->ldc % 2 == 0) {
			gemm_store(&g->k, rw->drow, p.col, p.res, 2);
		} else {
			gemm_store(&g->k, rw->drow, p.col, p.res, 1);
			gemm_store(&g->k, rw->drow, cg_addi(f, p.col, 1), &p.res[1], 1);
		}
	}
	cg_endif(f, &c);
}

/*
 * The item's first group of rounds (U of them, or the partial round when K
 * is under 256), whose B loads the previous item issued ahead (prefetch).
 */
static int
first_nu(const Vec *g, int *partial)
{
	*partial = g->rounds == 0;
	return g->rounds ? g->U : 1;
}

/* What the loop carries from one item to the next: its coordinates and its
 * first group's B words (vars). */
typedef struct Carry Carry;
struct Carry {
	LLVMValueRef e, row0, rend, n0, bexp;
	LLVMValueRef bw[VEC_LOADS][VEC_MAXC][4];
};

/* B of the columns from n0: their rows' element offsets (i64). */
static void
b_cols(Vec *g, LLVMValueRef *bcol)
{
	for (int j = 0; j < g->C; j++)
		bcol[j] = cg_muli(g->k.f, cg_sext64(g->k.f, cg_addi(g->k.f, g->k.n0, j)), g->k.s.ldb);
}

/* Item w's coordinates and its first group's B loads, into the carry. */
static void
prefetch(Vec *g, Carry *cy, LLVMValueRef w)
{
	CgFn *f = g->k.f;
	LLVMValueRef bcol[VEC_MAXC], bw[VEC_LOADS][VEC_MAXC][4];
	int partial, nu = first_nu(g, &partial);

	gemm_tile_coords(&g->k, w);
	cg_set(f, cy->e, g->k.e);
	cg_set(f, cy->row0, g->k.row0);
	cg_set(f, cy->rend, g->k.rend);
	cg_set(f, cy->n0, g->k.n0);
	cg_set(f, cy->bexp, g->k.bexp);
	b_cols(g, bcol);
	load_b(g, cg_i32(f, 0), nu, partial, bcol, bw);
	for (int u = 0; u < nu; u++)
		for (int c = 0; c < g->C; c++)
			for (int q = 0; q < 4; q++)
				cg_set(f, cy->bw[u][c][q], bw[u][c][q]);
}

/*
 * One item, its coordinates and first group's B words in the carry: the
 * row leaves (loaded ahead), the warp's dot products, then (unless it is the
 * grid's last) the next item's coordinates and first B loads, so that they
 * are in flight during this item's sums and epilogue, then lane 31's
 * epilogue.
 */
static void
item(Vec *g, Carry *cy, LLVMValueRef w, LLVMValueRef step, LLVMValueRef total)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef arow[VEC_MAXR], bcol[VEC_MAXC], sum[VEC_MAXR][VEC_MAXC], bw[VEC_LOADS][VEC_MAXC][4];
	LLVMValueRef e, row0, rend, n0, bexp, wn;
	GemmRow rw[VEC_MAXR];
	int full = g->rounds / g->U * g->U, partial, nu = first_nu(g, &partial);
	CgLoop l;
	CgIf c;

	g->k.e = e = cg_get(f, cy->e);
	g->k.row0 = row0 = cg_get(f, cy->row0);
	g->k.rend = rend = cg_get(f, cy->rend);
	g->k.n0 = n0 = cg_get(f, cy->n0);
	g->k.bexp = bexp = cg_get(f, cy->bexp);
	for (int r = 0; r < g->R; r++) {	/* rows past the tile's read its last: never stored */
		LLVMValueRef row = cg_min(f, cg_addi(f, row0, r), cg_addi(f, rend, -1));
		gemm_row(&g->k, row, &rw[r]);
		arow[r] = cg_muli(f, cg_sext64(f, gemm_a_row(&g->k, row)), s->lda);
		for (int j = 0; j < g->C; j++)
			cg_set(f, g->acc[r][j], cg_f32(f, 0));
	}
	b_cols(g, bcol);
	for (int u = 0; u < nu; u++)
		for (int j = 0; j < g->C; j++)
			for (int q = 0; q < 4; q++)
				bw[u][j][q] = cg_get(f, cy->bw[u][j][q]);
	fma_rounds(g, cg_i32(f, 0), nu, partial, arow, bw);
	if (full > g->U) {
		LLVMValueRef i = cg_loop(f, &l, cg_i32(f, g->U), cg_i32(f, full), cg_i32(f, g->U));
		rounds(g, i, g->U, 0, arow, bcol);
		cg_endloop(f, &l);
	}
	if (g->rounds > full)
		rounds(g, cg_i32(f, full), g->rounds - full, 0, arow, bcol);
	if (g->tail && g->rounds)
		rounds(g, cg_i32(f, g->rounds), 1, 1, arow, bcol);
	for (int r = 0; r < g->R; r++)
		for (int j = 0; j < g->C; j++)
			sum[r][j] = warp_sum31(g, cg_get(f, g->acc[r][j]));
	wn = cg_add(f, w, step);
	cg_if(f, &c, cg_lt(f, wn, total));
	prefetch(g, cy, wn);
	cg_endif(f, &c);
	g->k.e = e, g->k.row0 = row0, g->k.rend = rend, g->k.n0 = n0, g->k.bexp = bexp;
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->k.lane, cg_i32(f, 31), ""));
	for (int r = 0; r < g->R; r++)
		epilogue_row(g, r, &rw[r], sum);
	cg_endif(f, &c);
}

/* A group of rounds: from round i0 (i32), nu of them, the partial one or not. */
typedef struct Group Group;
struct Group {
	LLVMValueRef i0;
	int nu, partial;
};

/* The carried B words of nu rounds, as values. */
static void
take(Vec *g, Carry *cy, int nu, LLVMValueRef (*bw)[VEC_MAXC][4])
{
	for (int u = 0; u < nu; u++)
		for (int c = 0; c < g->C; c++)
			for (int q = 0; q < 4; q++)
				bw[u][c][q] = cg_get(g->k.f, cy->bw[u][c][q]);
}

/*
 * One group of the item with loads ahead: its words are in the carry; the
 * next group's loads (nx; NULL: the next item's coordinates and first
 * group, when there is one) are issued into the carry before this group's
 * FMAs, so that a warp always has weights in flight.
 */
static void
group_ahead(Vec *g, Carry *cy, const Group *cur, const Group *nx, const LLVMValueRef *arow,
	    const LLVMValueRef *bcol, LLVMValueRef wn, LLVMValueRef total)
{
	CgFn *f = g->k.f;
	LLVMValueRef bw[VEC_LOADS][VEC_MAXC][4], nw[VEC_LOADS][VEC_MAXC][4];
	LLVMValueRef e = g->k.e, row0 = g->k.row0, rend = g->k.rend, n0 = g->k.n0, bexp = g->k.bexp;
	CgIf c;

	take(g, cy, cur->nu, bw);
	if (nx) {
		load_b(g, nx->i0, nx->nu, nx->partial, bcol, nw);
		for (int u = 0; u < nx->nu; u++)
			for (int j = 0; j < g->C; j++)
				for (int q = 0; q < 4; q++)
					cg_set(f, cy->bw[u][j][q], nw[u][j][q]);
	} else {
		cg_if(f, &c, cg_lt(f, wn, total));
		prefetch(g, cy, wn);
		cg_endif(f, &c);
		g->k.e = e, g->k.row0 = row0, g->k.rend = rend, g->k.n0 = n0, g->k.bexp = bexp;
	}
	fma_rounds(g, cur->i0, cur->nu, cur->partial, arow, bw);
}

/*
 * One item with loads a group ahead (GemmSpec.vec_ahead): its groups are
 * U full rounds each, the rest of the full rounds, the partial round; the
 * run of full groups is a loop whose step loads group j + 1 and sums group
 * j, the last group loads the next item's first.  Then the warp sums and
 * lane 31's epilogue, while the next item's first group is in flight.
 */
static void
item_ahead(Vec *g, Carry *cy, LLVMValueRef w, LLVMValueRef step, LLVMValueRef total)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef arow[VEC_MAXR], bcol[VEC_MAXC], sum[VEC_MAXR][VEC_MAXC], wn = cg_add(f, w, step);
	GemmRow rw[VEC_MAXR];
	Group gr[3];
	int nf = g->rounds / g->U, n = 0;
	CgLoop l;
	CgIf c;

	g->k.e = cg_get(f, cy->e);
	g->k.row0 = cg_get(f, cy->row0);
	g->k.rend = cg_get(f, cy->rend);
	g->k.n0 = cg_get(f, cy->n0);
	g->k.bexp = cg_get(f, cy->bexp);
	for (int r = 0; r < g->R; r++) {	/* rows past the tile's read its last: never stored */
		LLVMValueRef row = cg_min(f, cg_addi(f, g->k.row0, r), cg_addi(f, g->k.rend, -1));
		gemm_row(&g->k, row, &rw[r]);
		arow[r] = cg_muli(f, cg_sext64(f, gemm_a_row(&g->k, row)), s->lda);
		for (int j = 0; j < g->C; j++)
			cg_set(f, g->acc[r][j], cg_f32(f, 0));
	}
	b_cols(g, bcol);
	if (nf > 1) {		/* full groups 0 .. nf - 2, each loading the next full one */
		LLVMValueRef i = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, (nf - 1) * g->U), cg_i32(f, g->U));
		Group a = {i, g->U, 0}, b = {cg_addi(f, i, g->U), g->U, 0};
		group_ahead(g, cy, &a, &b, arow, bcol, wn, total);
		cg_endloop(f, &l);
	}
	if (nf > 0)
		gr[n++] = (Group){cg_i32(f, (nf - 1) * g->U), g->U, 0};
	if (g->rounds % g->U)
		gr[n++] = (Group){cg_i32(f, nf * g->U), g->rounds % g->U, 0};
	if (g->tail)
		gr[n++] = (Group){cg_i32(f, g->rounds), 1, 1};
	for (int j = 0; j < n; j++)
		group_ahead(g, cy, &gr[j], j + 1 < n ? &gr[j + 1] : NULL, arow, bcol, wn, total);
	for (int r = 0; r < g->R; r++)
		for (int j = 0; j < g->C; j++)
			sum[r][j] = warp_sum31(g, cg_get(f, g->acc[r][j]));
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, g->k.lane, cg_i32(f, 31), ""));
	for (int r = 0; r < g->R; r++)
		epilogue_row(g, r, &rw[r], sum);
	cg_endif(f, &c);
}

int
cg_emit_gemm_vec(CgModule *m, const char *name, const GemmSpec *spec, Diag *d)
{
	Vec g;
	const GemmSpec *s = &g.k.s;
	char buf[800];
	CgFn *f;
	CgLoop l;
	CgIf c;
	Carry cy;
	LLVMValueRef w, w0, total, step;
	int k;

	if (cg_gemm_vec_check(cg_module_target(m), spec, d) < 0)
		return -1;
	layout(&g, spec);
	f = gemm_begin(&g.k, m, name, d);
	if (!f)
		return -1;
	for (int r = 0; r < g.R; r++)
		for (int j = 0; j < g.C; j++)
			g.acc[r][j] = cg_var(f, f->tf32, NULL);
	cy.e = cg_var(f, f->ti32, NULL);
	cy.row0 = cg_var(f, f->ti32, NULL);
	cy.rend = cg_var(f, f->ti32, NULL);
	cy.n0 = cg_var(f, f->ti32, NULL);
	cy.bexp = cg_var(f, f->tgptr, NULL);
	for (int u = 0; u < first_nu(&g, &k); u++)
		for (int j = 0; j < g.C; j++)
			for (int q = 0; q < 4; q++)
				cy.bw[u][j][q] = cg_var(f, f->ti32, NULL);
	gemm_prologue(&g.k);	/* the expert table: the CTA's last barrier */
	total = gemm_work_total(&g.k);
	step = cg_muli(f, cg_nctaid(f, 0), VWARP);
	w0 = cg_add(f, cg_muli(f, cg_ctaid(f, 0), VWARP), g.k.warp);
	cg_if(f, &c, cg_lt(f, w0, total));
	prefetch(&g, &cy, w0);
	cg_endif(f, &c);
	w = cg_loop(f, &l, w0, total, step);
	if (s->vec_ahead)
		item_ahead(&g, &cy, w, step, total);
	else
		item(&g, &cy, w, step, total);
	cg_endloop(f, &l);
	if (s->fold.k > 0)
		gemm_fold(&g.k);
	k = snprintf(buf, sizeof buf, "gemm-vec %s.%s->%s B[N,K] N=%lld K=%lld %dx%d a warp, %d rounds of 16 "
		     "bytes a lane%s, %d a group%s%s", dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt),
		     (long long)s->N, (long long)s->K, g.R, g.C, g.rounds, g.tail ? " + a partial one" : "", g.U,
		     s->vec_ahead ? ", loaded a group ahead" : "", s->fold.k > 0 ? ", the combine in the last CTA" : "");
	gemm_note_tail(&g.k, buf, sizeof buf, k);
	return gemm_finish(&g.k, buf);
}
