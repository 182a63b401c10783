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
 * Both variants share the schedule of k_gemm.c (a work index over (expert,
 * n-tile, m-tile), grouped tiles from the device offsets), the row gather,
 * and the epilogue, which a thread applies to pairs of adjacent columns
 * (what swiglu pairs).  Vector loads (up to 16 bytes) wherever the leading
 * dimensions and the tails allow; rows past the end read the last valid
 * row and are never stored; k past K reads zeros.
 */
#define CG_INTERNAL
#include <string.h>

#include "codegen.h"

#define SMEM_MAX 232448		/* sm_80/sm_90 opt-in limit per CTA */
#define NTHR 256		/* threads per CTA, both variants */
#define NWARP (NTHR / 32)
#define MAXT 8			/* micro-tile rows or columns */
#define MAXC 16			/* load chunks per thread and operand */
#define MAXP 32			/* split-K: partial sums per thread */
#define RPITCH (NTHR + 1)	/* split-K: floats per row of the partials */

typedef struct G G;
struct G {
	CgFn *f;
	GemmSpec s;		/* defaults resolved */
	int sw;			/* index of swiglu, -1 if none */
	int64_t width;		/* output columns: N, or N/2 after swiglu */
	int splitk;		/* the variant */
	int nt;			/* column tiles: cdiv(N, bn) */
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
	/* shared memory */
	int tab, wsum, smem;
	/* parameters */
	LLVMValueRef A, B, C, gidx, sidx, offs, T, ep[CG_EP_MAX];
	/* per thread */
	LLVMValueRef tid, lane, warp, tx, ty;
	LLVMValueRef acc[MAXT][MAXT];	/* tile: vars */
	/* per tile */
	LLVMValueRef e, row0, rend, n0, bexp;
};

static int esize(DType t) { return t == DT_F32 ? 4 : 2; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int
swiglu_at(const CgEpilogue *e)
{
	for (int i = 0; i < e->n; i++)
		if (e->in[i].op == CGE_SWIGLU)
			return i;
	return -1;
}

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

static int
is_splitk(const GemmSpec *s)
{
	return s->bm >= 1 && s->bn >= 2 && s->bm * s->bn <= MAXP;
}

/* Fill in defaults and derived sizes; no checks. */
static void
layout(G *g, const GemmSpec *in)
{
	GemmSpec *s = &g->s;
	int64_t bstride;

	memset(g, 0, sizeof *g);
	*s = *in;
	cg_gemm_resolve(s);
	g->sw = swiglu_at(&s->ep);
	g->width = g->sw >= 0 ? s->N / 2 : s->N;
	if (in->ldc == 0)
		s->ldc = g->width;
	g->splitk = is_splitk(s);
	g->nt = s->bn > 0 ? (int)cdiv(s->N, s->bn) : 0;
	bstride = s->groups > 0 ? s->b_group_stride : 0;
	if (g->splitk) {
		int vbk;
		g->va = vec_of(s->a_dt, s->lda, s->K, 0, 8);
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
		g->tab = (g->red2 + 4 * g->P * g->Gs + 15) & ~15;
	} else {
		g->tm = s->bm / 16;
		g->tn = s->bn / 16;
		g->wm = g->tm < 4 ? g->tm : 4;
		g->wn = g->tn < 4 ? g->tn : 4;
		g->kt = s->bk > 0 ? (int)cdiv(s->K, s->bk) : 0;
		g->va = vec_of(s->a_dt, s->lda, s->K, 0, s->bk > 0 ? s->bk : 1);
		if (s->b_layout == CG_B_NK)
			g->vb = vec_of(s->b_dt, s->ldb, s->K, bstride, s->bk > 0 ? s->bk : 1);
		else
			g->vb = vec_of(s->b_dt, s->ldb, s->N, bstride, s->bn > 0 ? s->bn : 1);
		g->a_pitch = s->bm + 4;
		g->b_pitch = s->bn + 4;
		g->buf = 4 * s->bk * (g->a_pitch + g->b_pitch);
		g->a_n = g->va ? (int)cdiv((int64_t)s->bm * s->bk / g->va, NTHR) : 0;
		g->b_n = g->vb ? (int)cdiv((int64_t)s->bn * s->bk / g->vb, NTHR) : 0;
		g->tab = 2 * g->buf;
	}
	g->wsum = g->tab + ((4 * (s->groups + 1) + 15) & ~15);
	g->smem = s->groups > 0 ? g->wsum + 4 * NWARP : g->tab;
}

int
cg_gemm_simt_smem(const GemmSpec *s)
{
	G g;

	layout(&g, s);
	return g.smem;
}

/*
 * From the H200 run (docs/codegen.md): split-K for routers and decode
 * (4x8 for N = 8, 2x16 for wide N), 64x64x32 tiles unless 128-row tiles
 * still give two CTAs per SM (264), then 128x64x16.
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
	} else {
		s->bm = 64, s->bn = 64, s->bk = 32;
	}
}

static int
is_io_type(DType t)
{
	return t == DT_BF16 || t == DT_F16 || t == DT_F32;
}

static int
tile_ok(int x)
{
	return x == 32 || x == 64 || x == 128;
}

int
cg_gemm_simt_check(const CgTarget *t, const GemmSpec *in, Diag *d)
{
	G g;
	const GemmSpec *s = &g.s;

	layout(&g, in);
	if (cg_target_check(t, d) < 0)
		return -1;
	if (!is_io_type(s->a_dt) || !is_io_type(s->b_dt) || !is_io_type(s->c_dt))
		return diag_error(d, LOC_NONE, "gemm-simt: types %s x %s -> %s (need f32, bf16 or f16)",
				  dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt));
	if (s->N <= 0 || s->K <= 0 || s->N > INT32_MAX || s->K > INT32_MAX)
		return diag_error(d, LOC_NONE, "gemm-simt: N = %lld, K = %lld", (long long)s->N,
				  (long long)s->K);
	if (g.sw >= 0 && s->N % 2)
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
	if (s->lda < s->K || s->ldb < (s->b_layout == CG_B_NK ? s->K : s->N) || s->ldc < g.width)
		return diag_error(d, LOC_NONE, "gemm-simt: lda %lld, ldb %lld or ldc %lld below the row",
				  (long long)s->lda, (long long)s->ldb, (long long)s->ldc);
	if (s->groups < 0 || s->groups > 4096)
		return diag_error(d, LOC_NONE, "gemm-simt: %d groups (0..4096)", s->groups);
	if (s->groups > 0 && s->b_group_stride < (s->b_layout == CG_B_NK ? s->N * s->ldb : s->K * s->ldb))
		return diag_error(d, LOC_NONE, "gemm-simt: B's group stride %lld is below one expert's B",
				  (long long)s->b_group_stride);
	if (s->m_per_t < 1 || s->m_per_t > 1024)
		return diag_error(d, LOC_NONE, "gemm-simt: m_per_t = %d", s->m_per_t);
	if (s->sched == CG_SCHED_PERSISTENT && (s->ctas < 1 || s->ctas > 65535))
		return diag_error(d, LOC_NONE, "gemm-simt: %d persistent CTAs", s->ctas);
	if (s->sched != CG_SCHED_TILES && s->sched != CG_SCHED_PERSISTENT)
		return diag_error(d, LOC_NONE, "gemm-simt: unknown schedule %d", s->sched);
	if (s->store != CG_STORE_ROWS && s->store != CG_STORE_SCATTER)
		return diag_error(d, LOC_NONE, "gemm-simt: unknown store mode %d", s->store);
	if (cg_ep_check(&s->ep, d) < 0)
		return -1;
	for (int i = 0; i < s->ep.n; i++) {
		const CgEpInst *e = &s->ep.in[i];
		if (e->op != CGE_ROW && e->op != CGE_MAT)
			continue;
		if ((e->rows == CGR_GATHER || e->rows == CGR_GATHER_RAW) && !s->gather)
			return diag_error(d, LOC_NONE, "gemm-simt: epilogue e%d reads rows through gather_idx, but A is not gathered", i);
		if (e->rows == CGR_SCATTER && s->store != CG_STORE_SCATTER)
			return diag_error(d, LOC_NONE, "gemm-simt: epilogue e%d reads rows through scatter_idx, but the store is not scattered", i);
	}
	if (g.smem > SMEM_MAX)
		return diag_error(d, LOC_NONE, "gemm-simt: %d bytes of shared memory exceed %d", g.smem,
				  SMEM_MAX);
	return 0;
}

/* ---- pieces ---- */

static LLVMValueRef
gptr(G *g, LLVMValueRef base, LLVMValueRef elems64, int esz)
{
	return cg_gep(g->f, base, cg_muli(g->f, elems64, esz), 1);
}

static LLVMValueRef
fma32(CgFn *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMValueRef x[3] = {a, b, c};

	return cg_intrinsic(f, "llvm.fma", f->tf32, &f->tf32, 1, x, 3);
}

/* n elements of dt at p (n-element aligned) as f32 */
static void
load_vec(G *g, LLVMValueRef p, DType dt, int n, LLVMValueRef *out)
{
	CgFn *f = g->f;
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
store_f32s(G *g, LLVMValueRef off, LLVMValueRef *v, int n)
{
	CgFn *f = g->f;

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
load_f32s(G *g, LLVMValueRef off, LLVMValueRef *out, int n)
{
	CgFn *f = g->f;
	LLVMValueRef p = cg_sptr(f, off), x;

	if (n == 1) {
		out[0] = cg_sload(f, f->tf32, p, 4);
		return;
	}
	x = cg_sload(f, LLVMVectorType(f->tf32, (unsigned)n), p, 4 * n);
	for (int j = 0; j < n; j++)
		out[j] = LLVMBuildExtractElement(f->B, x, cg_i32(f, j), "");
}

static LLVMValueRef
eq(CgFn *f, LLVMValueRef a, int64_t b)
{
	return LLVMBuildICmp(f->B, LLVMIntEQ, a, LLVMConstInt(LLVMTypeOf(a), (unsigned long long)b, 1), "");
}

/* The source row of A for GEMM row r (clamped into the tile's rows). */
static LLVMValueRef
a_row(G *g, LLVMValueRef r)
{
	CgFn *f = g->f;
	LLVMValueRef src;

	r = cg_min(f, r, cg_addi(f, g->rend, -1));
	if (!g->s.gather)
		return r;
	src = cg_gload(f, f->ti32, cg_gep(f, g->gidx, r, 4), 4);
	if (g->s.gather_div > 1)
		src = cg_udiv(f, src, cg_i32(f, g->s.gather_div));
	return src;
}

/* ---- schedule (as k_gemm.c, with cdiv(N, bn) column tiles) ---- */

/*
 * Grouped mode: tab[e] = first work index of expert e, for e = 0..E:
 * tab[e+1] - tab[e] = cdiv(offsets[e+1] - offsets[e], bm) * nt.  A shuffle
 * scan per warp, then over the warps' sums.
 */
static void
expert_table(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int E = s->groups;
	LLVMValueRef carry = cg_var(f, f->ti32, cg_i32(f, 0));
	CgIf c;

	for (int base = 0; base < E; base += NTHR) {
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
		cg_if(f, &c, eq(f, g->lane, 31));
		cg_sstore(f, v, cg_sptr(f, cg_addi(f, cg_muli(f, g->warp, 4), g->wsum)), 4);
		cg_endif(f, &c);
		cg_barrier(f);
		/* every thread scans the eight warp sums itself: no second shuffle round */
		pre = cg_i32(f, 0);
		for (int q = 0; q < NWARP; q++) {
			LLVMValueRef x = cg_sload(f, f->ti32, cg_sptr(f, cg_i32(f, g->wsum + 4 * q)), 4);
			pre = cg_add(f, pre, cg_select(f, cg_lt(f, cg_i32(f, q), g->warp), x, cg_i32(f, 0)));
		}
		tot = cg_i32(f, 0);
		for (int q = 0; q < NWARP; q++)
			tot = cg_add(f, tot, cg_sload(f, f->ti32, cg_sptr(f, cg_i32(f, g->wsum + 4 * q)), 4));
		v = cg_add(f, cg_add(f, v, pre), cg_get(f, carry));
		cg_if(f, &c, in);
		cg_sstore(f, cg_muli(f, v, g->nt), cg_sptr(f, cg_addi(f, cg_muli(f, e, 4), g->tab + 4)), 4);
		cg_endif(f, &c);
		cg_set(f, carry, cg_add(f, cg_get(f, carry), tot));
		cg_barrier(f);	/* wsum is rewritten by the next round */
	}
	cg_if(f, &c, eq(f, g->tid, 0));
	cg_sstore(f, cg_i32(f, 0), cg_sptr(f, cg_i32(f, g->tab)), 4);
	cg_endif(f, &c);
	cg_barrier(f);
}

static LLVMValueRef
work_total(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	LLVMValueRef M;

	if (s->groups > 0)
		return cg_sload(f, f->ti32, cg_sptr(f, cg_i32(f, g->tab + 4 * s->groups)), 4);
	M = cg_muli(f, g->T, s->m_per_t);
	return cg_muli(f, cg_udiv(f, cg_addi(f, M, s->bm - 1), cg_i32(f, s->bm)), g->nt);
}

/* Decode work index w: expert, first row, row end, first column, B base. */
static void
tile_coords(G *g, LLVMValueRef w)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	LLVMValueRef mte, local, t0;

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
		mte = cg_udiv(f, cg_sub(f, mte, t0), cg_i32(f, g->nt));
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
	g->row0 = cg_add(f, g->row0, cg_muli(f, cg_urem(f, local, mte), s->bm));
	g->n0 = cg_muli(f, cg_udiv(f, local, mte), s->bn);
	g->bexp = gptr(g, g->B, cg_muli(f, cg_sext64(f, g->e), s->b_group_stride), esize(s->b_dt));
}

/* ---- epilogue: one row, pairs of adjacent columns ---- */

static LLVMValueRef
load_f32(G *g, LLVMValueRef base, LLVMValueRef idx64, DType dt)
{
	CgFn *f = g->f;
	int sz = esize(dt);

	return cg_to_f32(f, cg_gload(f, cg_raw_type(f, dt), gptr(g, base, idx64, sz), sz), dt);
}

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

/* A COL leaf at column col (i32) of its space, clamped below lim. */
static LLVMValueRef
col_leaf(G *g, int i, LLVMValueRef col, int64_t lim)
{
	const CgEpInst *in = &g->s.ep.in[i];
	CgFn *f = g->f;
	LLVMValueRef idx = cg_sext64(f, cg_min(f, col, cg_i32(f, lim - 1)));

	if (in->group_stride)
		idx = cg_add(f, idx, cg_muli(f, cg_sext64(f, g->e), in->group_stride));
	return load_f32(g, g->ep[i], idx, in->dt);
}

static void
store1(G *g, LLVMValueRef drow, LLVMValueRef col, LLVMValueRef v)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int sz = esize(s->c_dt);
	LLVMValueRef off = cg_add(f, cg_muli(f, cg_sext64(f, drow), s->ldc), cg_sext64(f, col));

	cg_gstore(f, cg_from_f32(f, v, s->c_dt), gptr(g, g->C, off, sz), sz);
}

static void
store2(G *g, LLVMValueRef drow, LLVMValueRef col, LLVMValueRef *v)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int sz = esize(s->c_dt);
	LLVMValueRef off = cg_add(f, cg_muli(f, cg_sext64(f, drow), s->ldc), cg_sext64(f, col));
	LLVMValueRef p = gptr(g, g->C, off, sz);

	if (s->c_dt == DT_F32) {
		LLVMValueRef x = LLVMGetUndef(LLVMVectorType(f->tf32, 2));
		x = LLVMBuildInsertElement(f->B, x, v[0], cg_i32(f, 0), "");
		x = LLVMBuildInsertElement(f->B, x, v[1], cg_i32(f, 1), "");
		cg_gstore(f, x, p, 8);
	} else {
		cg_gstore(f, cg_pack16x2(f, cg_from_f32(f, v[0], s->c_dt), cg_from_f32(f, v[1], s->c_dt)),
			  p, 4);
	}
}

/*
 * GEMM row r (any value; rows at or past rend are skipped), np pairs of
 * columns: pair j covers columns col[j], col[j]+1 (col[j] even) with
 * accumulators acc[j][0..1].  Columns at or past N are computed on clamped
 * operands and not stored.
 */
static void
epilogue_row(G *g, LLVMValueRef r, int np, LLVMValueRef *col, LLVMValueRef (*acc)[2])
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	const CgEpilogue *ep = &s->ep;
	int n = ep->n, sw = g->sw, nin = sw >= 0 ? sw : n;
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
	for (int j = 0; j < np; j++) {
		LLVMValueRef val[2][CG_EP_MAX], res[2], oc;
		LLVMValueRef ok0 = cg_lt(f, col[j], cg_i32(f, s->N));
		LLVMValueRef ok1 = cg_lt(f, cg_addi(f, col[j], 1), cg_i32(f, s->N));
		CgIf c1, c2;
		for (int e = 0; e < 2; e++) {
			LLVMValueRef cc = cg_addi(f, col[j], e);
			for (int i = 0; i < nin; i++) {
				const CgEpInst *in = &ep->in[i];
				switch (in->op) {
				case CGE_ACC: val[e][i] = acc[j][e]; break;
				case CGE_IMM: val[e][i] = cg_f32(f, in->imm); break;
				case CGE_COL: val[e][i] = col_leaf(g, i, cc, s->N); break;
				case CGE_ROW: val[e][i] = rowv[i]; break;
				case CGE_MAT:
					val[e][i] = load_f32(g, matb[i],
							     cg_sext64(f, cg_min(f, cc, cg_i32(f, s->N - 1))), in->dt);
					break;
				default: break;
				}
			}
			cg_ep_emit_range(f, ep, 0, nin, val[e]);
			res[e] = n == 0 ? acc[j][e] : sw < 0 ? val[e][n - 1] : NULL;
		}
		if (sw < 0) {
			if (s->ldc % 2 == 0) {
				cg_if(f, &c1, ok1);
				store2(g, drow, col[j], res);
				cg_else(f, &c1);
				cg_if(f, &c2, ok0);
				store1(g, drow, col[j], res[0]);
				cg_endif(f, &c2);
				cg_endif(f, &c1);
			} else {
				cg_if(f, &c1, ok0);
				store1(g, drow, col[j], res[0]);
				cg_endif(f, &c1);
				cg_if(f, &c1, ok1);
				store1(g, drow, cg_addi(f, col[j], 1), res[1]);
				cg_endif(f, &c1);
			}
			continue;
		}
		/* swiglu: output column col/2, valid with col (N is even) */
		{
			LLVMValueRef *v = val[0];
			const CgEpInst *w = &ep->in[sw];
			oc = cg_shr(f, col[j], 1);
			v[sw] = cg_ep_emit_op(f, w, val[0][w->a], val[1][w->a]);
			for (int i = sw + 1; i < n; i++) {
				const CgEpInst *in = &ep->in[i];
				switch (in->op) {
				case CGE_IMM: v[i] = cg_f32(f, in->imm); break;
				case CGE_COL: v[i] = col_leaf(g, i, oc, g->width); break;
				case CGE_ROW: v[i] = rowv[i]; break;
				case CGE_MAT:
					v[i] = load_f32(g, matb[i],
							cg_sext64(f, cg_min(f, oc, cg_i32(f, g->width - 1))), in->dt);
					break;
				default: break;
				}
			}
			cg_ep_emit_range(f, ep, sw + 1, n, v);
			cg_if(f, &c1, ok0);
			store1(g, drow, oc, v[n - 1]);
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
tile_sources(G *g, Src *src)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int acpr = s->bk / g->va;

	for (int i = 0; i < g->a_n; i++) {
		LLVMValueRef c = cg_addi(f, g->tid, (int64_t)i * NTHR);
		LLVMValueRef row = cg_udiv(f, c, cg_i32(f, acpr));
		LLVMValueRef kc = cg_muli(f, cg_urem(f, c, cg_i32(f, acpr)), g->va);
		src->a[i] = cg_muli(f, cg_sext64(f, a_row(g, cg_add(f, g->row0, row))), s->lda);
		src->ak[i] = kc;
		src->aso[i] = cg_add(f, cg_muli(f, kc, 4 * g->a_pitch), cg_muli(f, row, 4));
		src->aon[i] = cg_lt(f, c, cg_i32(f, s->bm * s->bk / g->va));
	}
	for (int i = 0; i < g->b_n; i++) {
		LLVMValueRef c = cg_addi(f, g->tid, (int64_t)i * NTHR);
		if (s->b_layout == CG_B_NK) {
			int cpr = s->bk / g->vb;
			LLVMValueRef nr = cg_udiv(f, c, cg_i32(f, cpr));
			LLVMValueRef kc = cg_muli(f, cg_urem(f, c, cg_i32(f, cpr)), g->vb);
			LLVMValueRef n = cg_min(f, cg_add(f, g->n0, nr), cg_i32(f, s->N - 1));
			src->b[i] = cg_muli(f, cg_sext64(f, n), s->ldb);
			src->bk[i] = kc;
			src->bso[i] = cg_addi(f, cg_add(f, cg_muli(f, kc, 4 * g->b_pitch), cg_muli(f, nr, 4)),
					      4 * s->bk * g->a_pitch);
		} else {
			int cpr = s->bn / g->vb;
			LLVMValueRef kr = cg_udiv(f, c, cg_i32(f, cpr));
			LLVMValueRef nc = cg_muli(f, cg_urem(f, c, cg_i32(f, cpr)), g->vb);
			/* a chunk past N (vb divides N) reads the last one: never stored */
			LLVMValueRef n = cg_min(f, cg_add(f, g->n0, nc), cg_i32(f, s->N - g->vb));
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
load_tile(G *g, const Src *src, LLVMValueRef kt, Stage *st)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	LLVMValueRef k0 = cg_muli(f, kt, s->bk), zero = cg_f32(f, 0);

	for (int i = 0; i < g->a_n; i++) {
		LLVMValueRef k = cg_add(f, k0, src->ak[i]);
		LLVMValueRef in = cg_lt(f, k, cg_i32(f, (int32_t)s->K));
		LLVMValueRef kc = cg_min(f, k, cg_i32(f, (int32_t)(s->K - g->va)));
		LLVMValueRef p = gptr(g, g->A, cg_add(f, src->a[i], cg_sext64(f, kc)), esize(s->a_dt));
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
		load_vec(g, gptr(g, g->bexp, off, esize(s->b_dt)), s->b_dt, g->vb, st->b[i]);
		for (int j = 0; j < g->vb; j++)
			st->b[i][j] = cg_select(f, in, st->b[i][j], zero);
	}
}

/* Store a loaded k-tile into the buffer at byte offset boff (i32). */
static void
store_tile(G *g, const Src *src, LLVMValueRef boff, Stage *st)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
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
mrow(const G *g, int i)
{
	return (i / g->wm) * 16 * g->wm + i % g->wm;
}

static int
ncol(const G *g, int j)
{
	return (j / g->wn) * 16 * g->wn + j % g->wn;
}

/* The FMAs over one buffer (byte offset boff). */
static void
compute_tile(G *g, LLVMValueRef boff)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
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
				cg_set(f, g->acc[i][j], fma32(f, a[i], b[j], cg_get(f, g->acc[i][j])));
	}
}

static void
tile_body(G *g)
{
	CgFn *f = g->f;
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
		cols[j / 2] = cg_add(f, g->n0, cg_addi(f, cg_muli(f, g->tx, g->wn), ncol(g, j)));
	for (int i = 0; i < g->tm; i++) {
		LLVMValueRef r = cg_add(f, g->row0, cg_addi(f, cg_muli(f, g->ty, g->wm), mrow(g, i)));
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
splitk_rounds(G *g, LLVMValueRef i, int nu, LLVMValueRef *arow, LLVMValueRef *bcol, LLVMValueRef *part)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int kv = g->kv, bm = s->bm, bn = s->bn;
	LLVMValueRef av[4][16][8], bv[4][32][8], zero = cg_f32(f, 0);

	for (int u = 0; u < nu; u++) {
		LLVMValueRef q = cg_add(f, g->tid, cg_muli(f, cg_addi(f, i, u), NTHR));
		LLVMValueRef k = cg_muli(f, q, kv);
		LLVMValueRef in = cg_lt(f, k, cg_i32(f, (int32_t)s->K));
		LLVMValueRef kc = cg_sext64(f, cg_min(f, k, cg_i32(f, (int32_t)(s->K - kv))));
		for (int r = 0; r < bm; r++) {
			load_vec(g, gptr(g, g->A, cg_add(f, arow[r], kc), esize(s->a_dt)), s->a_dt, kv, av[u][r]);
			for (int x = 0; x < kv; x++)	/* zeros past K: B there is read, but finite */
				av[u][r][x] = cg_select(f, in, av[u][r][x], zero);
		}
		if (s->b_layout == CG_B_NK) {
			for (int c = 0; c < bn; c++)
				load_vec(g, gptr(g, g->bexp, cg_add(f, bcol[c], kc), esize(s->b_dt)), s->b_dt, kv,
					 bv[u][c]);
		} else {
			for (int x = 0; x < kv; x++) {
				LLVMValueRef row = cg_muli(f, cg_add(f, kc, cg_i64(f, x)), s->ldb);
				LLVMValueRef t[8];
				for (int c = 0; c < bn; c += g->vb) {
					load_vec(g, gptr(g, g->bexp, cg_add(f, row, bcol[c]), esize(s->b_dt)), s->b_dt,
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
					v = fma32(f, av[u][r][x], bv[u][c][x], v);
				cg_set(f, part[r * bn + c], v);
			}
}

static void
splitk_body(G *g)
{
	CgFn *f = g->f;
	const GemmSpec *s = &g->s;
	int bm = s->bm, bn = s->bn, P = g->P, U, per;
	LLVMValueRef arow[16], bcol[32], part[MAXP];
	CgLoop l;
	CgIf c;

	for (int r = 0; r < bm; r++)
		arow[r] = cg_muli(f, cg_sext64(f, a_row(g, cg_addi(f, g->row0, r))), s->lda);
	for (int cc = 0; cc < bn; cc++) {
		if (s->b_layout == CG_B_NK) {
			LLVMValueRef n = cg_min(f, cg_addi(f, g->n0, cc), cg_i32(f, (int32_t)s->N - 1));
			bcol[cc] = cg_muli(f, cg_sext64(f, n), s->ldb);
		} else {	/* vb divides N: a vector past N reads the last one */
			LLVMValueRef n = cg_min(f, cg_addi(f, g->n0, cc), cg_i32(f, (int32_t)(s->N - g->vb)));
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
		cg_sstore(f, cg_get(f, part[p]), cg_sptr(f, cg_addi(f, cg_muli(f, g->tid, 4), 4 * p * RPITCH)), 4);
	cg_barrier(f);
	per = NTHR / g->Gs;
	{
		LLVMValueRef p = cg_and(f, g->tid, g->Pp - 1), grp, sum = cg_f32(f, 0), base;
		int sh = 0;
		while ((1 << sh) < g->Pp)
			sh++;
		grp = cg_shr(f, g->tid, sh);
		cg_if(f, &c, cg_lt(f, p, cg_i32(f, P)));
		base = cg_add(f, cg_muli(f, p, 4 * RPITCH), cg_muli(f, grp, 4 * per));
		for (int x = 0; x < per; x++)
			sum = LLVMBuildFAdd(f->B, sum, cg_sload(f, f->tf32, cg_sptr(f, cg_addi(f, base, 4 * x)), 4), "");
		cg_sstore(f, sum, cg_sptr(f, cg_addi(f, cg_add(f, cg_muli(f, p, 4 * g->Gs), cg_muli(f, grp, 4)),
						      g->red2)), 4);
		cg_endif(f, &c);
	}
	cg_barrier(f);
	cg_if(f, &c, cg_lt(f, g->tid, cg_i32(f, P / 2)));
	{
		LLVMValueRef row = cg_udiv(f, g->tid, cg_i32(f, bn / 2));
		LLVMValueRef cp = cg_shl(f, cg_urem(f, g->tid, cg_i32(f, bn / 2)), 1);
		LLVMValueRef acc[1][2], col;
		for (int e = 0; e < 2; e++) {
			LLVMValueRef p = cg_addi(f, cg_add(f, cg_muli(f, row, bn), cp), e);
			LLVMValueRef base = cg_addi(f, cg_muli(f, p, 4 * g->Gs), g->red2);
			LLVMValueRef sum = cg_f32(f, 0);
			for (int x = 0; x < g->Gs; x++)
				sum = LLVMBuildFAdd(f->B, sum, cg_sload(f, f->tf32, cg_sptr(f, cg_addi(f, base, 4 * x)), 4), "");
			acc[0][e] = sum;
		}
		col = cg_add(f, g->n0, cp);
		epilogue_row(g, cg_add(f, g->row0, row), 1, &col, acc);
	}
	cg_endif(f, &c);
	cg_barrier(f);		/* the partials are rewritten by the next tile */
}

/* ---- the kernel ---- */

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
	if (s->store == CG_STORE_SCATTER)
		p[n++] = (CgParam){CGP_PTR, "scatter_idx"};
	if (s->groups > 0)
		p[n++] = (CgParam){CGP_PTR, "offsets"};
	for (int i = 0; i < s->ep.n; i++)
		if (cg_ep_is_load(s->ep.in[i].op))
			p[n++] = (CgParam){CGP_PTR, s->ep.in[i].role};
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
	g->T = cg_arg(f, n++);
}

static void
note(G *g, char *buf, size_t n)
{
	const GemmSpec *s = &g->s;
	char ep[512];
	int k;

	cg_ep_print(ep, sizeof ep, &s->ep);
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
	if ((size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, " %s%s%s%s",
			      s->sched == CG_SCHED_PERSISTENT ? "persistent" : "tiles",
			      s->gather ? " gather" : "", s->store == CG_STORE_SCATTER ? " scatter" : "",
			      s->groups ? " grouped" : " dense");
	if (s->groups && (size_t)k < n)
		k += snprintf(buf + k, n - (size_t)k, " E=%d", s->groups);
	if (s->ep.n && (size_t)k < n)
		snprintf(buf + k, n - (size_t)k, " ep: %s", ep);
}

static void
tile(G *g, LLVMValueRef w)
{
	tile_coords(g, w);
	if (g->splitk)
		splitk_body(g);
	else
		tile_body(g);
}

int
cg_emit_gemm_simt(CgModule *m, const char *name, const GemmSpec *spec, Diag *d)
{
	G g;
	CgParam p[8 + CG_EP_MAX];
	int np, block[3];
	CgExpr grid[3];
	char buf[800];
	CgFn *f;

	if (cg_gemm_simt_check(cg_module_target(m), spec, d) < 0)
		return -1;
	layout(&g, spec);
	np = params(&g, p);
	f = cg_fn_begin(m, name, p, np, NTHR, g.s.min_ctas, d);
	if (!f)
		return -1;
	g.f = f;
	bind_params(&g);
	g.tid = cg_tid(f, 0);
	g.lane = cg_and(f, g.tid, 31);
	g.warp = cg_shr(f, g.tid, 5);
	g.tx = cg_and(f, g.tid, 15);
	g.ty = cg_shr(f, g.tid, 4);
	if (!g.splitk)
		for (int i = 0; i < g.tm; i++)
			for (int j = 0; j < g.tn; j++)
				g.acc[i][j] = cg_var(f, f->tf32, NULL);
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
		grid[1] = CG_EXPR_INT(g.nt);
	}
	grid[2] = CG_EXPR_INT(1);
	block[0] = NTHR;
	block[1] = block[2] = 1;
	note(&g, buf, sizeof buf);
	return cg_fn_end(f, block, grid, g.smem, buf);
}
