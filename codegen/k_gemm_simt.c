/*
 * k_gemm_simt.c — the GEMM family on CUDA cores (FFMA in f32): the same
 * GemmSpec, parameters and semantics as k_gemm.c, for what the tensor-core
 * builder refuses: f32 operands kept exact (fma.rn.f32, no tf32 or bf16
 * rounding), N and K of any size (masked tails), any lda/ldb/ldc.
 *
 *	tile (bm, bn in 32/64/128): 256 threads as 16 x 16, each owning a
 *	(bm/16) x (bn/16) micro-tile of f32 accumulators in registers.
 *	    load k-tile 0 (global -> registers -> f32 -> shared, k-major)
 *	    for kt: load k-tile kt+1 into registers; FMAs over buffer kt % 2;
 *	            store the registers into buffer (kt+1) % 2; barrier
 *	split-K (bm * bn <= 32): the CTA's 8 warps split K (thread t takes the
 *	    k-chunks t, t+256, ...), each thread holds all bm x bn partial sums,
 *	    which a fixed tree in shared memory adds up.  For routers (N = 8)
 *	    and few rows, where a tile would leave the GPU idle.
 *
 * Both variants share k_gemm_common.c's parameters, schedule (a work index
 * over (expert, n-tile, m-tile), grouped tiles from the device offsets), row
 * gather and epilogue, which a thread applies to pairs of adjacent columns
 * (what swiglu pairs).  Vector loads (up to 16 bytes) wherever the leading
 * dimensions and the tails allow; rows past the end read the last valid
 * row and are never stored; k past K reads zeros.
 */
#include <stdio.h>
#include <string.h>

#include "k_gemm.h"

#define NTHR 256		/* threads per CTA, both variants */
#define NWARP (NTHR / 32)
#define MAXT 8			/* micro-tile rows or columns */
#define MAXC 16			/* load chunks per thread and operand */
#define MAXP 32			/* split-K: partial sums per thread */
#define RPITCH (NTHR + 1)	/* split-K: floats per row of the partials */

typedef struct Simt Simt;
struct Simt {
	GemmCore k;		/* first: the common callbacks cast back */
	int splitk;		/* the variant */
	int va, vb;		/* elements per vector load of A (along k) and B */
	/* tile */
	int tm, tn, wm, wn;	/* micro-tile; chunk widths of its rows / columns */
	int kt;			/* k-tiles */
	int a_pitch, b_pitch;	/* shared row pitch (floats) of A [bk][bm], B [bk][bn] */
	int buf;		/* bytes of one buffer (A and B) */
	int a_n, b_n;		/* load chunks per thread */
	/* split-K */
	int kv;			/* k per chunk */
	int nk;			/* chunks per thread */
	int P, Pp, Gs;		/* partials, P rounded to a power of 2, 256 / Pp */
	int red2;		/* byte offset of the second level */
	/* per thread */
	LLVMValueRef tx, ty;		/* tile: column and row of the thread */
	LLVMValueRef acc[MAXT][MAXT];	/* tile: vars */
};

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/*
 * Elements per vector load along a contiguous run of len elements in rows
 * ld apart (and experts stride apart): the largest power of two up to 16
 * bytes that divides all of them, so a vector never straddles a row or a
 * tail and stays aligned (pointers are 16-byte aligned).
 */
static int
vec_of(DType dt, int64_t ld, int64_t len, int64_t stride, int cap)
{
	int v = 16 / esize(dt);

	while (v > 1 && (ld % v || len % v || stride % v || cap % v))
		v /= 2;
	return v;
}

/* A's column (i64) of a vector of v at k (i32, v | A's columns): k, or k
 * modulo A's columns when a_rep > 1; clamped to the last vector (past K:
 * read, then zeroed). */
static LLVMValueRef
a_col(Simt *g, LLVMValueRef k, int v)
{
	CgFn *f = g->k.f;
	int64_t ka = gemm_a_cols(&g->k.s);

	if (g->k.s.a_rep > 1)
		k = cg_urem(f, k, cg_i32(f, (int32_t)ka));
	return cg_sext64(f, cg_min(f, k, cg_i32(f, (int32_t)(ka - v))));
}

static int
is_splitk(const GemmSpec *s)
{
	return s->bm >= 1 && s->bn >= 2 && s->bm * s->bn <= MAXP;
}

/* Fill in defaults and derived sizes; no checks. */
static void
layout(Simt *g, const GemmSpec *in)
{
	const GemmSpec *s = &g->k.s;
	int64_t bstride;

	memset(g, 0, sizeof *g);
	gemm_resolve(&g->k, in);
	g->k.nthr = NTHR;
	g->k.nwarp = NWARP;
	g->k.clamp = 1;
	g->splitk = is_splitk(s);
	bstride = s->groups > 0 ? s->b_group_stride : 0;
	if (g->splitk) {
		int vbk;
		g->va = vec_of(s->a_dt, s->lda, gemm_a_cols(s), 0, 8);
		if (s->b_layout == CG_B_NK) {
			vbk = vec_of(s->b_dt, s->ldb, s->K, bstride, 8);
			g->kv = g->va < vbk ? g->va : vbk;
			g->va = g->vb = g->kv;
		} else {
			g->kv = g->va;
			g->vb = vec_of(s->b_dt, s->ldb, s->N, bstride, s->bn);
		}
		g->nk = (int)cdiv(cdiv(s->K, g->kv), NTHR);
		g->P = s->bm * s->bn;
		for (g->Pp = 1; g->Pp < g->P; g->Pp *= 2)
			;
		g->Gs = NTHR / g->Pp;
		g->red2 = 4 * g->P * RPITCH;
		g->k.tab = (g->red2 + 4 * g->P * g->Gs + 15) & ~15;
	} else {
		g->tm = s->bm / 16;
		g->tn = s->bn / 16;
		g->wm = g->tm < 4 ? g->tm : 4;
		g->wn = g->tn < 4 ? g->tn : 4;
		g->kt = s->bk > 0 ? (int)cdiv(s->K, s->bk) : 0;
		g->va = vec_of(s->a_dt, s->lda, gemm_a_cols(s), 0, s->bk > 0 ? s->bk : 1);
		if (s->b_layout == CG_B_NK)
			g->vb = vec_of(s->b_dt, s->ldb, s->K, bstride, s->bk > 0 ? s->bk : 1);
		else
			g->vb = vec_of(s->b_dt, s->ldb, s->N, bstride, s->bn > 0 ? s->bn : 1);
		g->a_pitch = s->bm + 4;
		g->b_pitch = s->bn + 4;
		g->buf = 4 * s->bk * (g->a_pitch + g->b_pitch);
		g->a_n = g->va ? (int)cdiv((int64_t)s->bm * s->bk / g->va, NTHR) : 0;
		g->b_n = g->vb ? (int)cdiv((int64_t)s->bn * s->bk / g->vb, NTHR) : 0;
		g->k.tab = 2 * g->buf;
	}
	g->k.wsum = g->k.tab + ((4 * (s->groups + 1) + 15) & ~15);
	g->k.smem = s->groups > 0 ? g->k.wsum + 4 * NWARP : g->k.tab;
}

int
cg_gemm_simt_smem(const GemmSpec *s)
{
	Simt g;

	layout(&g, s);
	return g.k.smem;
}

/*
 * From the H200 run (docs/codegen.md): split-K for routers and decode
 * (4x8 for N = 8, 2x16 for wide N), 64x64x32 tiles unless 128-row tiles
 * still give two CTAs per SM (264), then 128x64x16; 32x32x32 where 64x64
 * tiles would leave most of the 132 SMs idle (DeepSeek-V3's f32 router at
 * T = 256: 16 CTAs, 320 us on the H200, bench/results/2026-12-02-bench.json;
 * 64 CTAs of a quarter of the work each at 32x32).
 */
void
cg_gemm_simt_tiles(GemmSpec *s, int64_t rows)
{
	int64_t n2 = s->N + (s->N & 1);		/* columns come in pairs */

	if (s->N <= MAXP) {
		s->bn = (int)n2;
		s->bm = MAXP / s->bn < 16 ? MAXP / s->bn : 16;
		s->bk = 16;
	} else if (rows <= 16) {
		s->bm = 2, s->bn = 16, s->bk = 16;
	} else if (cdiv(rows, 128) * cdiv(s->N, 64) >= 264) {
		s->bm = 128, s->bn = 64, s->bk = 16;
	} else if (cdiv(rows, 64) * cdiv(s->N, 64) * 2 < 132) {
		s->bm = 32, s->bn = 32, s->bk = 32;
	} else {
		s->bm = 64, s->bn = 64, s->bk = 32;
	}
}

static int
tile_ok(int x)
{
	return x == 32 || x == 64 || x == 128;
}

int
cg_gemm_simt_check(const CgTarget *t, const GemmSpec *in, Diag *d)
{
	Simt g;
	const GemmSpec *s = &g.k.s;

	layout(&g, in);
	if (cg_target_check(t, d) < 0)
		return -1;
	if (s->split_k > 1 || s->sched == CG_SCHED_STREAM)
		return diag_error(d, LOC_NONE, "gemm-simt: no split-K or stream-K (the tensor-core kernel has them)");
	if (!gemm_io_type(s->a_dt) || !gemm_io_type(s->b_dt) || !gemm_io_type(s->c_dt))
		return diag_error(d, LOC_NONE, "gemm-simt: types %s x %s -> %s (need f32, bf16 or f16)",
				  dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt));
	if (s->N <= 0 || s->K <= 0 || s->N > INT32_MAX || s->K > INT32_MAX)
		return diag_error(d, LOC_NONE, "gemm-simt: N = %lld, K = %lld", (long long)s->N,
				  (long long)s->K);
	if (g.k.sw >= 0 && s->N % 2)
		return diag_error(d, LOC_NONE, "gemm-simt: swiglu pairs columns, but N = %lld is odd",
				  (long long)s->N);
	if (g.splitk) {
		if (s->bn % 2)
			return diag_error(d, LOC_NONE, "gemm-simt: split-K tile %dx%d (bn must be even)",
					  s->bm, s->bn);
	} else {
		if (!tile_ok(s->bm) || !tile_ok(s->bn))
			return diag_error(d, LOC_NONE,
					  "gemm-simt: tile %dx%d (need bm, bn in 32/64/128, or bm*bn <= %d with bn even)",
					  s->bm, s->bn, MAXP);
		if (s->bk != 8 && s->bk != 16 && s->bk != 32)
			return diag_error(d, LOC_NONE, "gemm-simt: bk = %d (need 8, 16 or 32)", s->bk);
		if (g.a_n > MAXC || g.b_n > MAXC)
			return diag_error(d, LOC_NONE, "gemm-simt: tile %dx%dx%d needs too many loads per thread",
					  s->bm, s->bn, s->bk);
	}
	if (s->lda < gemm_a_cols(s) || s->ldb < (s->b_layout == CG_B_NK ? s->K : s->N) || s->ldc < g.k.width)
		return diag_error(d, LOC_NONE, "gemm-simt: lda %lld, ldb %lld or ldc %lld below the row",
				  (long long)s->lda, (long long)s->ldb, (long long)s->ldc);
	if (s->quant.kind != CG_QUANT_NONE)
		return diag_error(d, LOC_NONE, "gemm-simt: no output quantisation on CUDA cores");
	if (gemm_check_common(&g.k, "gemm-simt", d) < 0)
		return -1;
	if (s->groups > 0 && s->b_group_stride < (s->b_layout == CG_B_NK ? s->N * s->ldb : s->K * s->ldb))
		return diag_error(d, LOC_NONE, "gemm-simt: B's group stride %lld is below one expert's B",
				  (long long)s->b_group_stride);
	if (g.k.smem > GEMM_SMEM_MAX)
		return diag_error(d, LOC_NONE, "gemm-simt: %d bytes of shared memory exceed %d", g.k.smem,
				  GEMM_SMEM_MAX);
	return 0;
}

/* ---- pieces ---- */

/* n elements of dt at p (n-element aligned) as f32 */
static void
load_vec(Simt *g, LLVMValueRef p, DType dt, int n, LLVMValueRef *out)
{
	CgFn *f = g->k.f;
	LLVMTypeRef raw = cg_raw_type(f, dt);
	LLVMValueRef x;

	if (n == 1) {
		out[0] = cg_to_f32(f, cg_gload(f, raw, p, esize(dt)), dt);
		return;
	}
	x = cg_gload(f, LLVMVectorType(raw, (unsigned)n), p, n * esize(dt));
	for (int j = 0; j < n; j++)
		out[j] = cg_to_f32(f, LLVMBuildExtractElement(f->B, x, cg_i32(f, j), ""), dt);
}

/* n f32 values to shared memory at byte offset off (4n-byte aligned when n <= 4) */
static void
store_f32s(Simt *g, LLVMValueRef off, LLVMValueRef *v, int n)
{
	CgFn *f = g->k.f;

	for (int j = 0; j < n; j += 4) {
		int w = n - j < 4 ? n - j : 4;
		LLVMValueRef p = cg_sptr(f, cg_addi(f, off, 4 * j));
		if (w == 1) {
			cg_sstore(f, v[j], p, 4);
		} else {
			LLVMValueRef x = LLVMGetUndef(LLVMVectorType(f->tf32, (unsigned)w));
			for (int q = 0; q < w; q++)
				x = LLVMBuildInsertElement(f->B, x, v[j + q], cg_i32(f, q), "");
			cg_sstore(f, x, p, 4 * w);
		}
	}
}

/* n f32 values from shared memory (4n-byte aligned, n <= 4) */
static void
load_f32s(Simt *g, LLVMValueRef off, LLVMValueRef *out, int n)
{
	CgFn *f = g->k.f;
	LLVMValueRef p = cg_sptr(f, off), x;

	if (n == 1) {
		out[0] = cg_sload(f, f->tf32, p, 4);
		return;
	}
	x = cg_sload(f, LLVMVectorType(f->tf32, (unsigned)n), p, 4 * n);
	for (int j = 0; j < n; j++)
		out[j] = LLVMBuildExtractElement(f->B, x, cg_i32(f, j), "");
}

/* ---- epilogue: one row, pairs of adjacent columns ---- */

/*
 * GEMM row r (any value; rows at or past rend are skipped), np pairs of
 * columns: pair j covers columns col[j], col[j]+1 (col[j] even) with
 * accumulators acc[j][0..1].  Columns at or past N are computed on clamped
 * operands and not stored.
 */
static void
epilogue_row(Simt *g, LLVMValueRef r, int np, LLVMValueRef *col, LLVMValueRef (*acc)[2])
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	GemmRow row;
	CgIf c;

	cg_if(f, &c, cg_lt(f, r, g->k.rend));
	gemm_row(&g->k, r, &row);
	for (int j = 0; j < np; j++) {
		LLVMValueRef ok0 = cg_lt(f, col[j], cg_i32(f, s->N));
		LLVMValueRef ok1 = cg_lt(f, cg_addi(f, col[j], 1), cg_i32(f, s->N));
		GemmPair p = {.col = col[j], .acc = {acc[j][0], acc[j][1]}};
		CgIf c1, c2;
		if (gemm_ep_pair(&g->k, &row, &p) == 1) {
			/* swiglu: output column col/2, valid with col (N is even) */
			cg_if(f, &c1, ok0);
			gemm_store(&g->k, row.drow, p.out, p.res, 1);
			cg_endif(f, &c1);
		} else if (s->ldc % 2 == 0) {
			cg_if(f, &c1, ok1);
			gemm_store(&g->k, row.drow, col[j], p.res, 2);
			cg_else(f, &c1);
			cg_if(f, &c2, ok0);
			gemm_store(&g->k, row.drow, col[j], p.res, 1);
			cg_endif(f, &c2);
			cg_endif(f, &c1);
		} else {
			cg_if(f, &c1, ok0);
			gemm_store(&g->k, row.drow, col[j], p.res, 1);
			cg_endif(f, &c1);
			cg_if(f, &c1, ok1);
			gemm_store(&g->k, row.drow, cg_addi(f, col[j], 1), &p.res[1], 1);
			cg_endif(f, &c1);
		}
	}
	cg_endif(f, &c);
}

/* ---- the tile variant ---- */

/* Loads of one k-tile in flight: f32 values, and where they go in shared memory. */
typedef struct Stage Stage;
struct Stage {
	LLVMValueRef a[MAXC][8], b[MAXC][8];
};

/* Per-tile global element offsets of this thread's load chunks at k = 0. */
typedef struct Src Src;
struct Src {
	LLVMValueRef a[MAXC], b[MAXC];		/* i64 element offsets (A; B from bexp) */
	LLVMValueRef ak[MAXC], bk[MAXC];	/* i32: k (A, B[N,K]) or k row (B[K,N]) of the chunk within a k-tile */
	LLVMValueRef aso[MAXC], bso[MAXC];	/* i32 shared byte offsets within a buffer */
	LLVMValueRef aon[MAXC], bon[MAXC];	/* i1: the chunk exists (the last round may be partial) */
};

static void
tile_sources(Simt *g, Src *src)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int acpr = s->bk / g->va;

	for (int i = 0; i < g->a_n; i++) {
		LLVMValueRef c = cg_addi(f, g->k.tid, (int64_t)i * NTHR);
		LLVMValueRef row = cg_udiv(f, c, cg_i32(f, acpr));
		LLVMValueRef kc = cg_muli(f, cg_urem(f, c, cg_i32(f, acpr)), g->va);
		src->a[i] = cg_muli(f, cg_sext64(f, gemm_a_row(&g->k, cg_add(f, g->k.row0, row))), s->lda);
		src->ak[i] = kc;
		src->aso[i] = cg_add(f, cg_muli(f, kc, 4 * g->a_pitch), cg_muli(f, row, 4));
		src->aon[i] = cg_lt(f, c, cg_i32(f, s->bm * s->bk / g->va));
	}
	for (int i = 0; i < g->b_n; i++) {
		LLVMValueRef c = cg_addi(f, g->k.tid, (int64_t)i * NTHR);
		if (s->b_layout == CG_B_NK) {
			int cpr = s->bk / g->vb;
			LLVMValueRef nr = cg_udiv(f, c, cg_i32(f, cpr));
			LLVMValueRef kc = cg_muli(f, cg_urem(f, c, cg_i32(f, cpr)), g->vb);
			LLVMValueRef n = cg_min(f, cg_add(f, g->k.n0, nr), cg_i32(f, s->N - 1));
			src->b[i] = cg_muli(f, cg_sext64(f, n), s->ldb);
			src->bk[i] = kc;
			src->bso[i] = cg_addi(f, cg_add(f, cg_muli(f, kc, 4 * g->b_pitch), cg_muli(f, nr, 4)),
					      4 * s->bk * g->a_pitch);
		} else {
			int cpr = s->bn / g->vb;
			LLVMValueRef kr = cg_udiv(f, c, cg_i32(f, cpr));
			LLVMValueRef nc = cg_muli(f, cg_urem(f, c, cg_i32(f, cpr)), g->vb);
			/* a chunk past N (vb divides N) reads the last one: never stored */
			LLVMValueRef n = cg_min(f, cg_add(f, g->k.n0, nc), cg_i32(f, s->N - g->vb));
			src->b[i] = cg_sext64(f, n);
			src->bk[i] = kr;
			src->bso[i] = cg_addi(f, cg_add(f, cg_muli(f, kr, 4 * g->b_pitch), cg_muli(f, nc, 4)),
					      4 * s->bk * g->a_pitch);
		}
		src->bon[i] = cg_lt(f, c, cg_i32(f, s->bn * s->bk / g->vb));
	}
}

/* Issue the global loads of k-tile kt (i32; past the end: zeros). */
static void
load_tile(Simt *g, const Src *src, LLVMValueRef kt, Stage *st)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef k0 = cg_muli(f, kt, s->bk), zero = cg_f32(f, 0);

	for (int i = 0; i < g->a_n; i++) {
		LLVMValueRef k = cg_add(f, k0, src->ak[i]);
		LLVMValueRef in = cg_lt(f, k, cg_i32(f, (int32_t)s->K));
		LLVMValueRef p = gptr(f, g->k.A, cg_add(f, src->a[i], a_col(g, k, g->va)), esize(s->a_dt));
		load_vec(g, p, s->a_dt, g->va, st->a[i]);
		for (int j = 0; j < g->va; j++)
			st->a[i][j] = cg_select(f, in, st->a[i][j], zero);
	}
	for (int i = 0; i < g->b_n; i++) {
		LLVMValueRef k = cg_add(f, k0, src->bk[i]), in, kc, off;
		in = cg_lt(f, k, cg_i32(f, (int32_t)s->K));
		if (s->b_layout == CG_B_NK) {
			kc = cg_min(f, k, cg_i32(f, (int32_t)(s->K - g->vb)));
			off = cg_add(f, src->b[i], cg_sext64(f, kc));
		} else {
			kc = cg_min(f, k, cg_i32(f, (int32_t)(s->K - 1)));
			off = cg_add(f, src->b[i], cg_muli(f, cg_sext64(f, kc), s->ldb));
		}
		load_vec(g, gptr(f, g->k.bexp, off, esize(s->b_dt)), s->b_dt, g->vb, st->b[i]);
		for (int j = 0; j < g->vb; j++)
			st->b[i][j] = cg_select(f, in, st->b[i][j], zero);
	}
}

/* Store a loaded k-tile into the buffer at byte offset boff (i32). */
static void
store_tile(Simt *g, const Src *src, LLVMValueRef boff, Stage *st)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	CgIf c;

	for (int i = 0; i < g->a_n; i++) {
		int guard = (i + 1) * NTHR > s->bm * s->bk / g->va;
		if (guard)
			cg_if(f, &c, src->aon[i]);
		for (int j = 0; j < g->va; j++)	/* k-major: one row of k per element */
			cg_sstore(f, st->a[i][j], cg_sptr(f, cg_add(f, boff, cg_addi(f, src->aso[i], 4 * j * g->a_pitch))), 4);
		if (guard)
			cg_endif(f, &c);
	}
	for (int i = 0; i < g->b_n; i++) {
		int guard = (i + 1) * NTHR > s->bn * s->bk / g->vb;
		LLVMValueRef at = cg_add(f, boff, src->bso[i]);
		if (guard)
			cg_if(f, &c, src->bon[i]);
		if (s->b_layout == CG_B_NK) {
			for (int j = 0; j < g->vb; j++)
				cg_sstore(f, st->b[i][j], cg_sptr(f, cg_addi(f, at, 4 * j * g->b_pitch)), 4);
		} else {
			store_f32s(g, at, st->b[i], g->vb);
		}
		if (guard)
			cg_endif(f, &c);
	}
}

/*
 * Micro-tile row i of thread ty: chunks of wm rows, chunk c at 16*wm*c, so
 * that a float4 of A serves four rows and the chunks of a warp are spread.
 */
static int
mrow(const Simt *g, int i)
{
	return (i / g->wm) * 16 * g->wm + i % g->wm;
}

static int
ncol(const Simt *g, int j)
{
	return (j / g->wn) * 16 * g->wn + j % g->wn;
}

/* The FMAs over one buffer (byte offset boff). */
static void
compute_tile(Simt *g, LLVMValueRef boff)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef abase = cg_add(f, boff, cg_muli(f, g->ty, 4 * g->wm));
	LLVMValueRef bbase = cg_addi(f, cg_add(f, boff, cg_muli(f, g->tx, 4 * g->wn)), 4 * s->bk * g->a_pitch);
	LLVMValueRef a[MAXT], b[MAXT];

	for (int kk = 0; kk < s->bk; kk++) {
		for (int i = 0; i < g->tm; i += g->wm)
			load_f32s(g, cg_addi(f, abase, 4 * (kk * g->a_pitch + mrow(g, i))), &a[i], g->wm);
		for (int j = 0; j < g->tn; j += g->wn)
			load_f32s(g, cg_addi(f, bbase, 4 * (kk * g->b_pitch + ncol(g, j))), &b[j], g->wn);
		for (int i = 0; i < g->tm; i++)
			for (int j = 0; j < g->tn; j++)
				cg_set(f, g->acc[i][j], cg_fma(f, a[i], b[j], cg_get(f, g->acc[i][j])));
	}
}

static void
tile_body(Simt *g)
{
	CgFn *f = g->k.f;
	Src src;
	Stage st;
	CgLoop l;
	LLVMValueRef kt, rd, cols[MAXT / 2], accp[MAXT / 2][2];

	for (int i = 0; i < g->tm; i++)
		for (int j = 0; j < g->tn; j++)
			cg_set(f, g->acc[i][j], cg_f32(f, 0));
	tile_sources(g, &src);
	load_tile(g, &src, cg_i32(f, 0), &st);
	store_tile(g, &src, cg_i32(f, 0), &st);
	cg_barrier(f);
	kt = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, g->kt), cg_i32(f, 1));
	rd = cg_muli(f, cg_and(f, kt, 1), g->buf);
	load_tile(g, &src, cg_addi(f, kt, 1), &st);	/* in flight during the FMAs */
	compute_tile(g, rd);
	store_tile(g, &src, cg_sub(f, cg_i32(f, g->buf), rd), &st);
	cg_barrier(f);
	cg_endloop(f, &l);

	for (int j = 0; j < g->tn; j += 2)
		cols[j / 2] = cg_add(f, g->k.n0, cg_addi(f, cg_muli(f, g->tx, g->wn), ncol(g, j)));
	for (int i = 0; i < g->tm; i++) {
		LLVMValueRef r = cg_add(f, g->k.row0, cg_addi(f, cg_muli(f, g->ty, g->wm), mrow(g, i)));
		for (int j = 0; j < g->tn; j += 2) {
			accp[j / 2][0] = cg_get(f, g->acc[i][j]);
			accp[j / 2][1] = cg_get(f, g->acc[i][j + 1]);
		}
		epilogue_row(g, r, g->tn / 2, cols, accp);
	}
}

/* ---- the split-K variant ---- */

/* One k-chunk per round u: the loads of chunk q = tid + 256 * (i + u). */
static void
splitk_rounds(Simt *g, LLVMValueRef i, int nu, LLVMValueRef *arow, LLVMValueRef *bcol, LLVMValueRef *part)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int kv = g->kv, bm = s->bm, bn = s->bn;
	LLVMValueRef av[4][16][8], bv[4][32][8], zero = cg_f32(f, 0);

	for (int u = 0; u < nu; u++) {
		LLVMValueRef q = cg_add(f, g->k.tid, cg_muli(f, cg_addi(f, i, u), NTHR));
		LLVMValueRef k = cg_muli(f, q, kv);
		LLVMValueRef in = cg_lt(f, k, cg_i32(f, (int32_t)s->K));
		LLVMValueRef kc = cg_sext64(f, cg_min(f, k, cg_i32(f, (int32_t)(s->K - kv))));
		LLVMValueRef ka = a_col(g, k, kv);
		for (int r = 0; r < bm; r++) {
			load_vec(g, gptr(f, g->k.A, cg_add(f, arow[r], ka), esize(s->a_dt)), s->a_dt, kv, av[u][r]);
			for (int x = 0; x < kv; x++)	/* zeros past K: B there is read, but finite */
				av[u][r][x] = cg_select(f, in, av[u][r][x], zero);
		}
		if (s->b_layout == CG_B_NK) {
			for (int c = 0; c < bn; c++)
				load_vec(g, gptr(f, g->k.bexp, cg_add(f, bcol[c], kc), esize(s->b_dt)), s->b_dt, kv,
					 bv[u][c]);
		} else {
			for (int x = 0; x < kv; x++) {
				LLVMValueRef row = cg_muli(f, cg_add(f, kc, cg_i64(f, x)), s->ldb);
				LLVMValueRef t[8];
				for (int c = 0; c < bn; c += g->vb) {
					load_vec(g, gptr(f, g->k.bexp, cg_add(f, row, bcol[c]), esize(s->b_dt)), s->b_dt,
						 g->vb, t);
					for (int y = 0; y < g->vb; y++)
						bv[u][c + y][x] = t[y];
				}
			}
		}
	}
	for (int u = 0; u < nu; u++)
		for (int r = 0; r < bm; r++)
			for (int c = 0; c < bn; c++) {
				LLVMValueRef v = cg_get(f, part[r * bn + c]);
				for (int x = 0; x < kv; x++)
					v = cg_fma(f, av[u][r][x], bv[u][c][x], v);
				cg_set(f, part[r * bn + c], v);
			}
}

static void
splitk_body(Simt *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int bm = s->bm, bn = s->bn, P = g->P, U, per;
	LLVMValueRef arow[16], bcol[32], part[MAXP];
	CgLoop l;
	CgIf c;

	for (int r = 0; r < bm; r++)
		arow[r] = cg_muli(f, cg_sext64(f, gemm_a_row(&g->k, cg_addi(f, g->k.row0, r))), s->lda);
	for (int cc = 0; cc < bn; cc++) {
		if (s->b_layout == CG_B_NK) {
			LLVMValueRef n = cg_min(f, cg_addi(f, g->k.n0, cc), cg_i32(f, (int32_t)s->N - 1));
			bcol[cc] = cg_muli(f, cg_sext64(f, n), s->ldb);
		} else {	/* vb divides N: a vector past N reads the last one */
			LLVMValueRef n = cg_min(f, cg_addi(f, g->k.n0, cc), cg_i32(f, (int32_t)(s->N - g->vb)));
			bcol[cc] = cg_sext64(f, n);
		}
	}
	for (int p = 0; p < P; p++)
		part[p] = cg_var(f, f->tf32, cg_f32(f, 0));

	/* two chunks' loads in flight per round while registers allow */
	U = (bm + bn) * g->kv <= 64 && g->nk >= 2 ? 2 : 1;
	if (g->nk / U > 0) {
		LLVMValueRef i = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, g->nk / U * U), cg_i32(f, U));
		splitk_rounds(g, i, U, arow, bcol, part);
		cg_endloop(f, &l);
	}
	if (g->nk % U)
		splitk_rounds(g, cg_i32(f, g->nk / U * U), g->nk % U, arow, bcol, part);

	/* partials[p][t], then 256/Pp threads per p sum Pp each, then one per p */
	for (int p = 0; p < P; p++)
		cg_sstore(f, cg_get(f, part[p]), cg_sptr(f, cg_addi(f, cg_muli(f, g->k.tid, 4), 4 * p * RPITCH)), 4);
	cg_barrier(f);
	per = NTHR / g->Gs;
	{
		LLVMValueRef p = cg_and(f, g->k.tid, g->Pp - 1), grp, sum = cg_f32(f, 0), base;
		int sh = 0;
		while ((1 << sh) < g->Pp)
			sh++;
		grp = cg_shr(f, g->k.tid, sh);
		cg_if(f, &c, cg_lt(f, p, cg_i32(f, P)));
		base = cg_add(f, cg_muli(f, p, 4 * RPITCH), cg_muli(f, grp, 4 * per));
		for (int x = 0; x < per; x++)
			sum = LLVMBuildFAdd(f->B, sum, cg_sload(f, f->tf32, cg_sptr(f, cg_addi(f, base, 4 * x)), 4), "");
		cg_sstore(f, sum, cg_sptr(f, cg_addi(f, cg_add(f, cg_muli(f, p, 4 * g->Gs), cg_muli(f, grp, 4)),
						      g->red2)), 4);
		cg_endif(f, &c);
	}
	cg_barrier(f);
	cg_if(f, &c, cg_lt(f, g->k.tid, cg_i32(f, P / 2)));
	{
		LLVMValueRef row = cg_udiv(f, g->k.tid, cg_i32(f, bn / 2));
		LLVMValueRef cp = cg_shl(f, cg_urem(f, g->k.tid, cg_i32(f, bn / 2)), 1);
		LLVMValueRef acc[1][2], col;
		for (int e = 0; e < 2; e++) {
			LLVMValueRef p = cg_addi(f, cg_add(f, cg_muli(f, row, bn), cp), e);
			LLVMValueRef base = cg_addi(f, cg_muli(f, p, 4 * g->Gs), g->red2);
			LLVMValueRef sum = cg_f32(f, 0);
			for (int x = 0; x < g->Gs; x++)
				sum = LLVMBuildFAdd(f->B, sum, cg_sload(f, f->tf32, cg_sptr(f, cg_addi(f, base, 4 * x)), 4), "");
			acc[0][e] = sum;
		}
		col = cg_add(f, g->k.n0, cp);
		epilogue_row(g, cg_add(f, g->k.row0, row), 1, &col, acc);
	}
	cg_endif(f, &c);
	cg_barrier(f);		/* the partials are rewritten by the next tile */
}

/* ---- the kernel ---- */

static void
note(Simt *g, char *buf, size_t n)
{
	const GemmSpec *s = &g->k.s;
	int k;

	if (g->splitk)
		k = snprintf(buf, n, "gemm-simt %s.%s->%s B[%s] N=%lld K=%lld split-K %dx%d kv%d",
			     dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt),
			     s->b_layout == CG_B_NK ? "N,K" : "K,N", (long long)s->N, (long long)s->K,
			     s->bm, s->bn, g->kv);
	else
		k = snprintf(buf, n, "gemm-simt %s.%s->%s B[%s] N=%lld K=%lld %dx%dx%d %dx%d/thread v%d.%d",
			     dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt),
			     s->b_layout == CG_B_NK ? "N,K" : "K,N", (long long)s->N, (long long)s->K,
			     s->bm, s->bn, s->bk, g->tm, g->tn, g->va, g->vb);
	gemm_note_tail(&g->k, buf, n, k);
}

/* One tile, its coordinates set (gemm_end's callback: k is g's first member). */
static void
tile(GemmCore *k)
{
	Simt *g = (Simt *)k;

	if (g->splitk)
		splitk_body(g);
	else
		tile_body(g);
}

int
cg_emit_gemm_simt(CgModule *m, const char *name, const GemmSpec *spec, Diag *d)
{
	Simt g;
	char buf[800];
	CgFn *f;

	if (cg_gemm_simt_check(cg_module_target(m), spec, d) < 0)
		return -1;
	layout(&g, spec);
	f = gemm_begin(&g.k, m, name, d);
	if (!f)
		return -1;
	g.tx = cg_and(f, g.k.tid, 15);
	g.ty = cg_shr(f, g.k.tid, 4);
	if (!g.splitk)
		for (int i = 0; i < g.tm; i++)
			for (int j = 0; j < g.tn; j++)
				g.acc[i][j] = cg_var(f, f->tf32, NULL);
	note(&g, buf, sizeof buf);
	return gemm_end(&g.k, tile, buf);
}
