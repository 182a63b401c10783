/*
 * k_gemm_wgmma.c — the sm_90a mainloop of the GEMM builder: wgmma.mma_async
 * on 128-byte-swizzled shared tiles that cp.async fills.
 *
 *	prologue: cp.async k-tiles 0..L-1 into stages 0..L-1
 *	for kt:   wait for k-tile kt; fence.proxy.async; barrier;
 *	          wgmma.fence; bk/16 k-steps x mi row blocks of wgmma over
 *	          stage kt % S; commit; cp.async k-tile kt+L into stage
 *	          (kt+L) % S; wgmma.wait_group 1 (or 0)
 *	then:     wgmma.wait_group 0; barrier
 *
 * With 4 or 5 stages, L = S-2 and one wgmma group stays in flight across
 * k-tiles: the stage it reads is refilled only after the next barrier,
 * which every warpgroup passes after retiring it.  With 2 or 3 stages (and
 * with GemmSpec.no_frag_pipe) each k-tile's group retires before the next
 * (wait_group 0) and L = S-1: on the H200, 3 stages with L = 1 left the
 * load latency exposed (418 against 584 TFLOP/s, bench/gemm/NOTES.md run 3).
 * cp.async (not TMA) fills the tiles because the row gather needs per-row
 * addresses and the launch plan cannot pass tensor maps; the writes go
 * through the generic proxy, hence the fence before the barrier.
 *
 * Everything else is k_gemm.c's: parameters, the schedule (grouped tiles
 * from device offsets), which thread loads which 16-byte chunk from where
 * (gathered rows, f32 converted in registers), and the epilogue, which
 * reads the accumulators in the layout wgmma m64nN gives each warp (that of
 * mma.sync's m16n8 fragments, row blocks 64 apart).  Block, grid and shared
 * memory equal the mma.sync kernel's for the same spec (the stages fit in
 * its padded ones), so one launch plan serves sm_90a and sm_80.
 *
 * Tiles: the warps form warpgroups of 4, wg_n over the columns (at most 128
 * per warpgroup) and wg_m over the rows (multiples of 64); warp w % 4 of a
 * warpgroup holds rows 16 (w % 4) .. of each 64-row block.  A stage holds
 * A as bk/64 blocks [bm][128 B], B[N,K] as bk/64 blocks [bn][128 B] (both
 * K-major), B[K,N] as bn/64 blocks [bk][128 B] (N-major: wgmma's
 * transposed B).  Chunk c of a 128-byte row r sits at c ^ (r % 8), the
 * 128-byte swizzle of 8-row atoms that start on 1 KiB boundaries: the
 * stages start at the first 1 KiB boundary of the dynamic shared memory.
 */
#include <stdio.h>
#include <stdlib.h>

#include "k_gemm.h"

#define SWIZZLE_128B (1ull << 62)
#define SWIZZLE_32B (3ull << 62)

/* The first warpgroup split, columns first, that gives 64k-row and <= 128-column tiles. */
int
gemm_wg_cols(const GemmSpec *s)
{
	return s->wg_wide ? 256 : 128;
}

void
gemm_wgmma_layout(G *g)
{
	const GemmSpec *s = &g->k.s;
	int nwg = g->k.nwarp / 4, wn = 1;

	for (int c = 1; c <= nwg; c *= 2)
		if (nwg % c == 0 && s->bn % c == 0 && s->bn / c <= gemm_wg_cols(s) && s->bm % (64 * (nwg / c)) == 0) {
			wn = c;
			break;
		}
	g->wg.wg_n = wn;
	g->wg.wg_m = nwg >= wn ? nwg / wn : 0;
	g->wtm = g->wg.wg_m ? s->bm / g->wg.wg_m : 0;
	g->wtn = s->bn / wn;
	g->mi = g->wtm / 64;
	g->ni = g->wtn / 8;
	g->mstride = 64;
	g->wg.a_bytes = s->bm * s->bk * g->eb;
	g->wg.stage = (s->bm + s->bn) * s->bk * g->eb;
}

int
gemm_wgmma_check(const CgTarget *t, const G *g, Diag *d)
{
	const GemmSpec *s = &g->k.s;

	/* the emulator implements wgmma whatever target it stands for */
	if (!cg_target_is_emu(t) && cg_require(t, CG_WGMMA | CG_CP_ASYNC, "a wgmma GEMM mainloop", d) < 0)
		return -1;
	if (g->mt == DT_TF32)	/* the mma.sync mainloop runs tf32 on sm_90a too */
		return diag_error(d, LOC_NONE, "gemm: wgmma: no tf32 mainloop (the mma.sync one has it)");
	if (s->bk != 64 && s->bk != 128)
		return diag_error(d, LOC_NONE, "gemm: wgmma: bk = %d (need 64 or 128: 128-byte swizzled rows)",
				  s->bk);
	if (g->k.nwarp % 4)
		return diag_error(d, LOC_NONE, "gemm: wgmma: %d warps (need whole warpgroups: 4, 8 or 16)",
				  g->k.nwarp);
	if (!g->wg.wg_m || s->bm % (64 * g->wg.wg_m) || g->wtn > gemm_wg_cols(s) || g->wtn % 16)
		return diag_error(d, LOC_NONE,
				  "gemm: wgmma: a %dx%d tile does not split over %d warpgroups into tiles of "
				  "64k rows and 16..%d columns", s->bm, s->bn, g->k.nwarp / 4, gemm_wg_cols(s));
	if (s->b_layout == CG_B_KN && g->wtn % 64)
		return diag_error(d, LOC_NONE,
				  "gemm: wgmma: B[K,N] needs warpgroup tiles of 64 or 128 columns, not %d", g->wtn);
	if (g->mi * g->ni * 4 > 128)
		return diag_error(d, LOC_NONE, "gemm: wgmma: %dx%d per warpgroup is %d accumulators per thread (128 at most)",
				  g->wtm, g->wtn, g->mi * g->ni * 4);
	if (g->a_n > MAXI || g->b_n > MAXI)
		return diag_error(d, LOC_NONE, "gemm: wgmma: tile %dx%dx%d needs too many loads per thread",
				  s->bm, s->bn, s->bk);
	if (s->stages * g->wg.stage + 1008 > g->k.tab)	/* never, with 16-byte padding of >= 128 rows */
		return diag_error(d, LOC_NONE, "gemm: wgmma: %d stages of %d bytes exceed %d",
				  s->stages, g->wg.stage, g->k.tab - 1008);
	return 0;
}

/* ---- instructions (GPU: inline PTX; emu: calls into emu.c) ---- */

static void
asm0(CgFn *f, const char *text)
{
	cg_asm(f, NULL, text, "~{memory}", NULL, 0, 1);
}

void
gemm_fence_proxy_async(CgFn *f)
{
	if (f->emu)
		cg_call_emu(f, "moec_emu_fence_proxy_async", NULL, NULL, 0);
	else
		asm0(f, "fence.proxy.async.shared::cta;");
}

static void
wg_fence(CgFn *f)
{
	if (f->emu)
		cg_call_emu(f, "moec_emu_wg_fence", NULL, NULL, 0);
	else
		asm0(f, "wgmma.fence.sync.aligned;");
}

static void
wg_commit(CgFn *f)
{
	if (f->emu)
		cg_call_emu(f, "moec_emu_wg_commit", NULL, NULL, 0);
	else
		asm0(f, "wgmma.commit_group.sync.aligned;");
}

static void
wg_wait(CgFn *f, int n)
{
	char text[64];
	LLVMValueRef c = cg_i32(f, n);

	if (f->emu) {
		cg_call_emu(f, "moec_emu_wg_wait", NULL, &c, 1);
		return;
	}
	snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %d;", n);
	asm0(f, text);
}

/*
 * acc (N/2 vars, wgmma's register order) (+)= A . B, m64 nN k16, mt bf16 or
 * f16 (m64 nN k32 with e4m3: both operands K-major, no transpose operands),
 * B N-major when tb: descriptors da, db; scale (i32) 0 ignores the old
 * accumulators.  GPU: the accumulators are tied operands ("=f" outputs,
 * the same values in).  emu: they live in the array at emu_acc until
 * wgmma.wait_group retires the operation.
 */
static void
wgmma_emit(CgFn *f, LLVMValueRef *acc, int N, DType mt, int tb, LLVMValueRef da, LLVMValueRef db,
	   LLVMValueRef scale, LLVMValueRef emu_acc)
{
	int n = N / 2, len = 0, f8 = mt == DT_F8E4M3;
	const char *ty = f8 ? "e4m3" : mt == DT_F16 ? "f16" : "bf16";
	LLVMValueRef args[3 + 128], r;
	LLVMTypeRef ft[128];
	char text[2048], cons[1024];

	if (f->emu) {
		LLVMValueRef a[5] = {emu_acc, da, db, scale,
				     cg_i32(f, N | (mt == DT_F16) << 9 | tb << 11 | f8 << 14)};
		cg_call_emu(f, "moec_emu_wgmma", NULL, a, 5);
		return;
	}
	len += snprintf(text + len, sizeof text - (size_t)len,
			"{\n.reg .pred p;\nsetp.ne.b32 p, $%d, 0;\n"
			"wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s {", n + 2, N, f8 ? 32 : 16, ty, ty);
	for (int k = 0; k < n; k++)
		len += snprintf(text + len, sizeof text - (size_t)len, "%s$%d", k ? ", " : "", k);
	if (f8)
		snprintf(text + len, sizeof text - (size_t)len, "}, $%d, $%d, p, 1, 1;\n}", n, n + 1);
	else
		snprintf(text + len, sizeof text - (size_t)len, "}, $%d, $%d, p, 1, 1, 0, %d;\n}", n, n + 1, tb);
	len = 0;
	for (int k = 0; k < n; k++)
		len += snprintf(cons + len, sizeof cons - (size_t)len, "=f,");
	len += snprintf(cons + len, sizeof cons - (size_t)len, "l,l,r");
	for (int k = 0; k < n; k++)
		len += snprintf(cons + len, sizeof cons - (size_t)len, ",%d", k);
	args[0] = da;
	args[1] = db;
	args[2] = scale;
	for (int k = 0; k < n; k++) {
		args[3 + k] = cg_get(f, acc[k]);
		ft[k] = f->tf32;
	}
	r = cg_asm(f, LLVMStructTypeInContext(f->C, ft, (unsigned)n, 0), text, cons, args, 3 + n, 1);
	for (int k = 0; k < n; k++)
		cg_set(f, acc[k], LLVMBuildExtractValue(f->B, r, (unsigned)k, ""));
}

/* The vars of row block i, fragment columns j0..j0+nj of the tile's
 * accumulators, in wgmma's register order d[4j + q]. */
static void
acc_vars(G *g, int i, int j0, int nj, LLVMValueRef *acc)
{
	for (int j = 0; j < nj; j++)
		for (int q = 0; q < 4; q++)
			acc[4 * j + q] = g->acc[i][j0 + j][q];
}

/* emu: element k of the accumulator array buf (an alloca) */
static LLVMValueRef
emu_elem(CgFn *f, LLVMValueRef buf, int k)
{
	LLVMValueRef idx[2] = {cg_i32(f, 0), cg_i32(f, k)};

	return LLVMBuildGEP2(f->B, LLVMGetAllocatedType(buf), buf, idx, 2, "");
}

/* Row block i, fragment columns j0.. j0+nj of the tile's accumulators (m64 n(8 nj)). */
static void
wgmma(G *g, int i, int j0, int nj, LLVMValueRef da, LLVMValueRef db, LLVMValueRef scale)
{
	CgFn *f = g->k.f;
	LLVMValueRef acc[128];

	acc_vars(g, i, j0, nj, acc);
	wgmma_emit(f, acc, 8 * nj, g->mt, g->k.s.b_layout == CG_B_KN, da, db, scale,
		   f->emu ? emu_elem(f, g->wg.buf, (i * g->ni + j0) * 4) : NULL);
}

/*
 * After wgmma.wait_group 0: the n accumulator vars through an empty asm, so
 * nothing that reads them can be scheduled above the wait (CUTLASS's
 * warpgroup_fence_operand).  emu: their values from the emulator's array.
 */
static void
fence_operands(CgFn *f, LLVMValueRef *var, int n, LLVMValueRef emu_buf, int at)
{
	LLVMTypeRef ft[128];
	LLVMValueRef v[128], r;
	char cons[1024];

	if (f->emu) {
		for (int k = 0; k < n; k++)
			cg_set(f, var[k], LLVMBuildLoad2(f->B, f->tf32, emu_elem(f, emu_buf, at + k), ""));
		return;
	}
	for (int k = 0, len = 0; k < 2 * n; k++)
		len += snprintf(cons + len, sizeof cons - (size_t)len, k < n ? "=f," : k + 1 < 2 * n ? "%d," : "%d",
				k - n);
	for (int k = 0; k < n; k++) {
		v[k] = cg_get(f, var[k]);
		ft[k] = f->tf32;
	}
	r = cg_asm(f, LLVMStructTypeInContext(f->C, ft, (unsigned)n, 0), "", cons, v, n, 1);
	for (int k = 0; k < n; k++)
		cg_set(f, var[k], LLVMBuildExtractValue(f->B, r, (unsigned)k, ""));
}

/* The accumulators of fragment columns j0..j0+nj, after the wait that retired them. */
static void
acc_fence_cols(G *g, int j0, int nj)
{
	LLVMValueRef acc[128];

	for (int i = 0; i < g->mi; i++) {
		acc_vars(g, i, j0, nj, acc);
		fence_operands(g->k.f, acc, nj * 4, g->wg.buf, (i * g->ni + j0) * 4);
	}
}

static void
acc_fence(G *g)
{
	acc_fence_cols(g, 0, g->ni);
}

/* ---- per thread ---- */

/* The swizzled offset of 16-byte chunk c (i32) of 128-byte row r in a block of 1 KiB atoms. */
static LLVMValueRef
swz(CgFn *f, LLVMValueRef r, LLVMValueRef c)
{
	LLVMValueRef x = LLVMBuildXor(f->B, c, cg_and(f, r, 7), "");

	return cg_add(f, cg_shl(f, r, 7), cg_shl(f, x, 4));
}

/* K-major chunk (row, kc): block kc/8 of `rows` rows, chunk kc%8. */
LLVMValueRef
gemm_kmajor_off(CgFn *f, LLVMValueRef row, LLVMValueRef kc, int rows)
{
	LLVMValueRef blk = cg_muli(f, cg_shr(f, kc, 3), (int64_t)rows * 128);

	return cg_add(f, blk, swz(f, row, cg_and(f, kc, 7)));
}

/* A descriptor of the shared address addr (i32): byte strides lbo, sbo; swizzle mode (bits 62-63). */
static LLVMValueRef
desc_swz(CgFn *f, LLVMValueRef addr, int lbo, int sbo, uint64_t swizzle)
{
	LLVMValueRef a = LLVMBuildZExt(f->B, cg_shr(f, cg_and(f, addr, 0x3ffff), 4), f->ti64, "");
	uint64_t hi = (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32 | swizzle;

	return LLVMBuildOr(f->B, a, LLVMConstInt(f->ti64, hi, 0), "");
}

static LLVMValueRef
desc(CgFn *f, LLVMValueRef addr, int lbo, int sbo)
{
	return desc_swz(f, addr, lbo, sbo, SWIZZLE_128B);
}

/* The 1 KiB-aligned start of the dynamic shared memory: offset (*base), address (*addr). */
void
gemm_aligned_smem(CgFn *f, LLVMValueRef *base, LLVMValueRef *addr)
{
	LLVMValueRef sb = LLVMBuildPtrToInt(f->B, cg_smem(f), f->ti32, "");

	*addr = cg_and(f, cg_addi(f, sb, 1023), ~1023);
	*base = cg_sub(f, *addr, sb);
}

void
gemm_wgmma_setup(G *g)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef wg = cg_shr(f, g->k.warp, 2);

	g->wm0 = cg_add(f, cg_muli(f, cg_udiv(f, wg, cg_i32(f, g->wg.wg_n)), g->wtm),
			cg_shl(f, cg_and(f, g->k.warp, 3), 4));
	g->wn0 = cg_muli(f, cg_urem(f, wg, cg_i32(f, g->wg.wg_n)), g->wtn);
	gemm_aligned_smem(f, &g->wg.base, &g->wg.addr);	/* the stages start on 1 KiB */
	for (int i = 0; i < g->a_n; i++)
		g->a_soff[i] = gemm_kmajor_off(f, g->a_row[i], g->a_kc[i], s->bm);
	for (int i = 0; i < g->b_n; i++) {
		/* B[N,K]: row n, k chunk; B[K,N]: row k, n chunk, blocks of bk rows */
		LLVMValueRef o = gemm_kmajor_off(f, g->b_row[i], g->b_kc[i],
					    s->b_layout == CG_B_NK ? s->bn : s->bk);
		g->b_soff[i] = cg_addi(f, o, g->wg.a_bytes);
	}
	if (f->emu)
		g->wg.buf = cg_var(f, LLVMArrayType(f->tf32, (unsigned)(g->mi * g->ni * 4)), NULL);
	gemm_f8_vars(g);
}

/* ---- the k-loop ---- */

void
gemm_wgmma_descs(G *g, LLVMValueRef *da0, LLVMValueRef *db0)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMValueRef wgm0 = cg_sub(f, g->wm0, cg_shl(f, cg_and(f, g->k.warp, 3), 4)), wgn0 = g->wn0;

	*da0 = desc(f, cg_add(f, g->wg.addr, cg_shl(f, wgm0, 7)), 16, 1024);
	if (s->b_layout != CG_B_KN)
		*db0 = desc(f, cg_addi(f, cg_add(f, g->wg.addr, cg_shl(f, wgn0, 7)), g->wg.a_bytes), 16, 1024);
	else	/* N-major: LBO = 64-column blocks, SBO = 8-row groups */
		*db0 = desc(f, cg_addi(f, cg_add(f, g->wg.addr, cg_muli(f, cg_shr(f, wgn0, 6), (int64_t)s->bk * 128)),
				       g->wg.a_bytes), s->bk * 128, 1024);
}

/*
 * Descriptor d (i64) moved on by off (i32) 16-byte units: an add to its low
 * word alone, whose address field (bits 0-13, the shared address / 16) does
 * not carry into the leading byte offset above it (shared memory is under
 * 256 KiB), so the high word stays the constant it is and ptxas keeps one
 * 32-bit add a wgmma instead of a 64-bit add through vector registers.
 */
static LLVMValueRef
desc_add(CgFn *f, LLVMValueRef d, LLVMValueRef off)
{
	LLVMValueRef lo = cg_add(f, LLVMBuildTrunc(f->B, d, f->ti32, ""), off);
	LLVMValueRef hi = LLVMBuildAnd(f->B, d, LLVMConstInt(f->ti64, 0xffffffff00000000ull, 0), "");

	return LLVMBuildOr(f->B, LLVMBuildZExt(f->B, lo, f->ti64, ""), hi, "");
}

void
gemm_wgmma_ktile(G *g, LLVMValueRef da0, LLVMValueRef db0, LLVMValueRef st, LLVMValueRef scale)
{
	gemm_wgmma_ktile_cols(g, da0, db0, st, scale, 0, g->ni);
}

void
gemm_wgmma_ktile_cols(G *g, LLVMValueRef da0, LLVMValueRef db0, LLVMValueRef st, LLVMValueRef scale,
		      int j0, int nj)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int KK = s->bk * g->eb / 32, kn_b = s->b_layout == CG_B_KN;	/* 32 bytes of K a k-step */
	LLVMValueRef adv;

	if (nj == 0)	/* an empty half (GemmSpec.f8.whole) */
		return;
	adv = cg_muli(f, st, g->wg.stage / 16);
	wg_fence(f);
	for (int kk = 0; kk < KK; kk++) {
		/* A: k-block kk/4, 32 bytes per k-step inside the 128-byte row */
		int64_t ka = ((int64_t)(kk / 4) * s->bm * 128 + (kk % 4) * 32) / 16;
		int64_t kb = kn_b ? (int64_t)kk * 16 * 128 / 16 : ((int64_t)(kk / 4) * s->bn * 128 + (kk % 4) * 32) / 16;
		/* columns j0..: B's rows 8 j0.. (K-major), or its 64-column block j0 / 8 (N-major) */
		kb += kn_b ? (int64_t)j0 / 8 * s->bk * 128 / 16 : (int64_t)j0 * 8 * 128 / 16;
		LLVMValueRef db = desc_add(f, db0, cg_addi(f, adv, kb));
		for (int i = 0; i < (g->wg.nb < 0 ? 0 : g->wg.nb ? g->wg.nb : g->mi); i++) {
			LLVMValueRef da = desc_add(f, da0, cg_addi(f, adv, ka + i * 64 * 128 / 16));
			wgmma(g, i, j0, nj, da, db, kk ? cg_i32(f, 1) : scale);
		}
	}
	wg_commit(f);
}

/*
 * The k-loop `loop` emitted twice, under a branch on this warpgroup's row
 * blocks: with rows of the tile in its second 64-row block, wgmma over all
 * of its blocks; without, over the first alone (GemmSpec.full_blocks, or
 * one block: once).  A grouped tile's rows past its expert belong to the
 * next one and are never stored, so their wgmma is work for nothing:
 * DeepSeek-V3's experts have 128 +- 11 rows at T = 4096, and every other
 * one a second 128-row tile of a few rows.  Warpgroups stacked over the
 * rows with one block each (192x128 over three: wg_m 3, mi 1) branch on
 * that block instead: without a row, the loop issues no wgmma at all (it
 * still waits for and releases the stages, loads and meets the barriers,
 * whatever the mainloop's loop does besides).  The skipped block's
 * accumulators keep the last tile's values (only rows past rend hold them,
 * which the epilogue does not store).  A branch around the whole loop, not
 * a guard on each wgmma: ptxas serialises a guarded wgmma (C7520, "WG.AR in
 * divergent path").
 */
void
gemm_wgmma_by_rows(G *g, void (*loop)(G *, void *), void *arg)
{
	CgFn *f = g->k.f;
	int stacked = g->mi == 1 && g->wg.wg_m > 1;	/* the warpgroup's one block may hold no row */
	LLVMValueRef wgm0, r1;
	CgIf c;

	if ((g->mi < 2 && !stacked) || g->k.s.full_blocks) {
		loop(g, arg);
		return;
	}
	wgm0 = cg_sub(f, g->wm0, cg_shl(f, cg_and(f, g->k.warp, 3), 4));
	/* the first row of the block whose rows decide: the second, or the only one */
	r1 = cg_add(f, g->k.row0, stacked ? wgm0 : cg_addi(f, wgm0, 64));
	cg_if(f, &c, cg_lt(f, r1, g->k.rend));
	loop(g, arg);
	cg_else(f, &c);
	g->wg.nb = stacked ? -1 : 1;
	loop(g, arg);
	g->wg.nb = 0;
	cg_endif(f, &c);
}

void
gemm_wgmma_wait(G *g, int n)
{
	wg_wait(g->k.f, n);
}

void
gemm_wgmma_acc_fence(G *g)
{
	acc_fence(g);
}

/* ---- FP8 x FP8 (GemmSpec.f8): DeepGEMM's promotion ---- */

/* B's scales in column blocks (GemmSpec.f8.b_block): per warpgroup column
 * block one scale per column parity (the gate and up rows of an interleaved
 * B; the same one twice otherwise), sb[0] and sb[1] of a thread. */
static int
f8_blocked(const G *g)
{
	return g->k.s.f8.b_block > 1;
}

int
gemm_f8_check(const G *g, Diag *d)
{
	const GemmSpec *s = &g->k.s;

	if (s->mainloop != CG_MAINLOOP_WGMMA && s->mainloop != CG_MAINLOOP_WS)
		return diag_error(d, LOC_NONE, "gemm: FP8 x FP8 needs the wgmma or the warp-specialised mainloop (sm_90a)");
	if (s->a_dt != DT_F8E4M3 || s->b_dt != DT_F8E4M3 || s->bq.group > 0 || s->b_layout != CG_B_NK)
		return diag_error(d, LOC_NONE, "gemm: FP8 x FP8 needs A and B f8e4m3 and B [N,K] (not %s x %s%s)",
				  dtype_name(s->a_dt), dtype_name(s->b_dt), s->b_layout != CG_B_NK ? " [K,N]" : "");
	if (s->f8.group != 128 || s->bk != 128)
		return diag_error(d, LOC_NONE, "gemm: FP8 x FP8 with scales per %d k and bk = %d (need 128 "
				  "for both: one 128-byte swizzled row per scale block)", s->f8.group, s->bk);
	if (g->mi * g->ni * 4 > 64)
		return diag_error(d, LOC_NONE, "gemm: FP8 x FP8: %dx%d per warpgroup is %d accumulators per "
				  "thread, held twice (64 at most)", g->wtm, g->wtn, g->mi * g->ni * 4);
	if (s->f8.b_interleave && s->N % 2)
		return diag_error(d, LOC_NONE, "gemm: FP8 x FP8: an interleaved B of %lld rows",
				  (long long)s->N);
	/* WS: a rank-3 box over (k, gate|up half, row) with the experts' rows as one run (k_gemm_ws.c's tmaps);
	 * clusters sharing B: each CTA's half of the tile's rows, a box of bn/4 pairs */
	if (s->f8.b_interleave && s->mainloop == CG_MAINLOOP_WS &&
	    (s->bn % (s->cluster_b ? 16 : 2) || (s->groups > 0 && (s->N % s->bn || s->b_group_stride % s->ldb))))
		return diag_error(d, LOC_NONE, "gemm: FP8 x FP8: ws: an interleaved B needs N a multiple of bn "
				  "(N = %lld, bn = %d) and experts whole rows apart when grouped, and with clusters "
				  "sharing B bn a multiple of 16", (long long)s->N, s->bn);
	if (f8_blocked(g) && s->f8.b_block % g->wtn)
		return diag_error(d, LOC_NONE, "gemm: FP8 x FP8: B scales in blocks of %d columns: a warpgroup's "
				  "%d columns would span two (one scale pair a column block needs them inside one)",
				  s->f8.b_block, g->wtn);
	return 0;
}

LLVMValueRef
gemm_b_row(G *g, LLVMValueRef n)
{
	CgFn *f = g->k.f;

	if (!g->k.s.f8.b_interleave)
		return n;
	return cg_add(f, cg_muli(f, cg_and(f, n, 1), g->k.s.N / 2), cg_shr(f, n, 1));
}

/* The cp.async pipeline's first L stages, one commit group each (empty past
 * the last k-tile, so the wait counts stay the same). */
static void
load_first(G *g, int L)
{
	CgFn *f = g->k.f;

	for (int i = 0; i < L; i++) {
		if (i < g->kt) {
			gemm_load_stage(g, cg_addi(f, g->wg.base, (int64_t)i * g->wg.stage), cg_i32(f, i));
			if (g->k.s.f8.group > 0)
				gemm_f8_scale_copies(g, g->k.nthr, gemm_f8_slot_at(g, cg_i32(f, i)), cg_i32(f, i));
		}
		cg_cp_async_commit(f);
	}
}

/* k-tile kt + L into its stage ((kt + L) % stages), if there is one; a
 * commit group either way. */
static void
load_ahead(G *g, LLVMValueRef kt, int L)
{
	CgFn *f = g->k.f;
	LLVMValueRef kn = cg_addi(f, kt, L), st;
	CgIf c;

	cg_if(f, &c, cg_lt(f, kn, cg_i32(f, g->kt)));
	st = cg_urem(f, kn, cg_i32(f, g->k.s.stages));
	gemm_load_stage(g, cg_add(f, g->wg.base, cg_muli(f, st, g->wg.stage)), kn);
	if (g->k.s.f8.group > 0)	/* FP8: the k-tile's scales with it */
		gemm_f8_scale_copies(g, g->k.nthr, gemm_f8_slot_at(g, st), kn);
	cg_endif(f, &c);
	cg_cp_async_commit(f);
}

void
gemm_f8_vars(G *g)
{
	for (int i = 0; g->k.s.f8.group > 0 && i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				g->wg.fin[i][j][q] = cg_var(g->k.f, g->k.f->tf32, NULL);
}

/* Per tile: fin = 0. */
void
gemm_f8_tile(G *g)
{
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				cg_set(g->k.f, g->wg.fin[i][j][q], cg_f32(g->k.f, 0));
}

/*
 * After wait_group 0: fin[r][c] += acc[r][c] * sb[c] * sa[r] (one fmul, one
 * fma); with B's scales in blocks (f8.b_block) fin[r][c] += acc[r][c] * (sa[r] *
 * sb[c % 2]), the products once for the 2 mi rows and 2 parities, one fma
 * an element (DeepGEMM's).
 */
void
gemm_f8_promote_cols(G *g, LLVMValueRef *sa, LLVMValueRef *sb, int j0, int nj)
{
	CgFn *f = g->k.f;

	if (nj == 0)
		return;
	acc_fence_cols(g, j0, nj);
	if (f8_blocked(g)) {
		LLVMValueRef ab[2 * MAXF][2];
		for (int r = 0; r < 2 * g->mi; r++)
			for (int p = 0; p < 2; p++)
				ab[r][p] = LLVMBuildFMul(f->B, sa[r], sb[p], "");
		for (int i = 0; i < g->mi; i++)
			for (int j = j0; j < j0 + nj; j++)
				for (int q = 0; q < 4; q++) {
					LLVMValueRef a[3] = {cg_get(f, g->acc[i][j][q]), ab[2 * i + q / 2][q % 2],
							     cg_get(f, g->wg.fin[i][j][q])};
					cg_set(f, g->wg.fin[i][j][q],
					       cg_intrinsic(f, "llvm.fma", f->tf32, &f->tf32, 1, a, 3));
				}
		return;
	}
	for (int i = 0; i < g->mi; i++)
		for (int j = j0; j < j0 + nj; j++)
			for (int q = 0; q < 4; q++) {
				LLVMValueRef x = LLVMBuildFMul(f->B, cg_get(f, g->acc[i][j][q]), sb[2 * j + q % 2], "");
				LLVMValueRef a[3] = {x, sa[2 * i + q / 2], cg_get(f, g->wg.fin[i][j][q])};
				cg_set(f, g->wg.fin[i][j][q], cg_intrinsic(f, "llvm.fma", f->tf32, &f->tf32, 1, a, 3));
			}
}

/* The promoted sums into the accumulators, for the epilogue. */
void
gemm_f8_result(G *g)
{
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				cg_set(g->k.f, g->acc[i][j][q], cg_get(g->k.f, g->wg.fin[i][j][q]));
}

/*
 * The scales staged with the stages (both FP8 mainloops): a slot per stage
 * at g->wg.f8s, A's bm rows (f32, in order) then B's bn columns in the order
 * the threads read them: per warpgroup column block of wtn, per lane quad
 * position q (the columns 8m + 2q, 8m + 2q + 1), the thread's wtn/4
 * columns in order (its sb[0..2 ni), 16-byte loads), each group padded by 4
 * floats so that the four quads' loads start on different banks.  With B's
 * scales in blocks: per warpgroup column block its two (f8_blocked),
 * B scale i of the slot that of tile column (i/2) wtn + i%2.
 */
static int
f8_group(const G *g)
{
	return g->wtn / 4 + 4;
}

/* B scales a slot holds */
static int
f8_bscales(const G *g)
{
	return f8_blocked(g) ? g->k.s.bn / g->wtn * 2 : g->k.s.bn;
}

int
gemm_f8_slot(const G *g)
{
	if (f8_blocked(g))
		return (4 * (g->k.s.bm + f8_bscales(g)) + 15) / 16 * 16;
	return 4 * (g->k.s.bm + g->k.s.bn / g->wtn * 4 * f8_group(g));
}

LLVMValueRef
gemm_f8_slot_at(G *g, LLVMValueRef st)
{
	return cg_addi(g->k.f, cg_muli(g->k.f, st, gemm_f8_slot(g)), g->wg.f8s);
}

/* Where B's column c (i32, of the tile) goes in a slot: its float index after A's rows. */
static LLVMValueRef
f8_bpos(const G *g, CgFn *f, LLVMValueRef c)
{
	LLVMValueRef blk = cg_udiv(f, c, cg_i32(f, g->wtn)), cw = cg_urem(f, c, cg_i32(f, g->wtn));
	LLVMValueRef q = cg_shr(f, cg_and(f, cw, 7), 1), m = cg_shr(f, cw, 3);

	return cg_add(f, cg_add(f, cg_muli(f, blk, 4 * f8_group(g)), cg_muli(f, q, f8_group(g))),
		      cg_add(f, cg_shl(f, m, 1), cg_and(f, cw, 1)));
}

/* Per tile, for the nthr threads that stage the scales (thread k.tid of them):
 * the sources at k-tile 0 (of the slice, split-K) of A's rows tid (+ nthr ..)
 * and B's columns tid (+ nthr ..) of the tile (g->wg.ssrc, A's first), A's
 * through the row gather, B's through the interleave. */
void
gemm_f8_scale_sources(G *g, int nthr)
{
	GemmCore *k = &g->k;
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	int64_t nb = s->K / s->f8.group;	/* scale blocks per row */
	int na = (s->bm + nthr - 1) / nthr, nbn = (f8_bscales(g) + nthr - 1) / nthr;
	LLVMValueRef kb0 = s->split_k > 1 ? cg_sext64(f, cg_muli(f, cg_ctaid(f, 2), g->kt)) : cg_i64(f, 0);

	for (int i = 0; i < na; i++) {
		LLVMValueRef r = gemm_a_row(k, cg_add(f, k->row0, cg_addi(f, k->tid, (int64_t)i * nthr)));
		g->wg.ssrc[i] = gptr(f, k->As, cg_add(f, cg_muli(f, cg_sext64(f, r), nb), kb0), 4);
	}
	for (int j = 0; j < nbn; j++) {
		LLVMValueRef c = cg_addi(f, k->tid, (int64_t)j * nthr), n;
		if (f8_blocked(g))	/* the first column of its parity in its column block */
			c = cg_add(f, cg_muli(f, cg_shr(f, c, 1), g->wtn), cg_and(f, c, 1));
		n = gemm_b_row(g, cg_add(f, k->n0, c));
		if (f8_blocked(g))	/* a column block past N: any row of the expert */
			n = cg_min(f, n, cg_i32(f, (int)(s->N - 1)));
		g->wg.ssrc[na + j] = gptr(f, k->Bs, cg_add(f, cg_muli(f, cg_add(f, cg_muli(f, cg_sext64(f, k->e), s->N),
									    cg_sext64(f, n)), nb), kb0), 4);
	}
}

/* k-tile kt's (i32) scales of this thread into the slot at shared offset
 * slot: cp.async of 4 bytes each, in the caller's commit group or before
 * its cp.async.mbarrier.arrive. */
void
gemm_f8_scale_copies(G *g, int nthr, LLVMValueRef slot, LLVMValueRef kt)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int na = (s->bm + nthr - 1) / nthr, nbn = (f8_bscales(g) + nthr - 1) / nthr;
	LLVMValueRef k64 = cg_sext64(f, kt);

	for (int i = 0; i < na + nbn; i++) {
		int a = i < na, idx = a ? i : i - na, lim = a ? s->bm : f8_bscales(g);
		LLVMValueRef at = cg_addi(f, g->k.tid, (int64_t)idx * nthr), dst;
		CgIf c;
		if ((idx + 1) * nthr > lim)
			cg_if(f, &c, cg_lt(f, at, cg_i32(f, lim)));
		dst = cg_add(f, slot, cg_shl(f, a || f8_blocked(g) ? cg_addi(f, at, a ? 0 : s->bm)
					     : cg_addi(f, f8_bpos(g, f, at), s->bm), 2));
		cg_cp_async4(f, cg_sptr(f, dst), gptr(f, g->wg.ssrc[i], k64, 4));
		if ((idx + 1) * nthr > lim)
			cg_endif(f, &c);
	}
}

/* The byte at offset off of shared pointer p. */
static LLVMValueRef
sptr_at(CgFn *f, LLVMValueRef p, int off)
{
	LLVMValueRef o = cg_i32(f, off);

	return LLVMBuildGEP2(f->B, f->ti8, p, &o, 1, "");
}

/* The thread's scales in the slot at shared offset slot for fragment columns
 * j0..j0+nj: A's of its 2 mi rows (sa), B's of its columns (sb[2 j0 ..
 * 2 (j0+nj)), the rows and columns of gemm_f8_scales), four at a time; one
 * base address, constant offsets. */
void
gemm_f8_stage_scales(G *g, LLVMValueRef slot, int j0, int nj, LLVMValueRef *sa, LLVMValueRef *sb)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	LLVMTypeRef v4 = LLVMVectorType(f->tf32, 4), v2 = LLVMVectorType(f->tf32, 2);
	LLVMValueRef pa = cg_sptr(f, cg_add(f, slot, cg_shl(f, cg_add(f, g->wm0, cg_shr(f, g->k.lane, 2)), 2)));
	LLVMValueRef pb = cg_sptr(f, cg_add(f, slot, cg_shl(f, f8_bpos(g, f, cg_add(f, g->wn0, cg_shl(f,
				  cg_and(f, g->k.lane, 3), 1))), 2)));

	for (int i = 0; i < 2 * g->mi; i++)
		sa[i] = cg_sload(f, f->tf32, sptr_at(f, pa, 4 * (64 * (i / 2) + 8 * (i % 2))), 4);
	if (f8_blocked(g)) {	/* the column block's two */
		LLVMValueRef pbb = cg_sptr(f, cg_add(f, slot, cg_shl(f, cg_addi(f, cg_shl(f, cg_udiv(f, g->wn0,
						cg_i32(f, g->wtn)), 1), s->bm), 2)));
		LLVMValueRef v = cg_sload(f, v2, pbb, 8);
		for (int q = 0; q < 2; q++)
			sb[q] = LLVMBuildExtractElement(f->B, v, cg_i32(f, q), "");
		return;
	}
	for (int j = 2 * j0; j < 2 * (j0 + nj);) {
		int four = j % 4 == 0 && j + 4 <= 2 * (j0 + nj), m = four ? 4 : 2;
		LLVMValueRef v = cg_sload(f, four ? v4 : v2, sptr_at(f, pb, 4 * (s->bm + j)), 4 * m);
		for (int q = 0; q < m; q++)
			sb[j + q] = LLVMBuildExtractElement(f->B, v, cg_i32(f, q), "");
		j += m;
	}
}

/* The entries of sb that the promotion of columns j0..j0+nj reads: [*lo, *hi). */
static void
f8_sb_range(const G *g, int j0, int nj, int *lo, int *hi)
{
	*lo = f8_blocked(g) ? 0 : 2 * j0;
	*hi = f8_blocked(g) ? 2 : 2 * (j0 + nj);
}

/* The promotion of columns j0..j0+nj with the scales kept in vars va, vb. */
static void
f8_promote_kept(G *g, LLVMValueRef *va, LLVMValueRef *vb, int j0, int nj)
{
	LLVMValueRef sa[2 * MAXF], sb[2 * MAXF];
	int lo, hi;

	for (int i = 0; i < 2 * g->mi; i++)
		sa[i] = cg_get(g->k.f, va[i]);
	f8_sb_range(g, j0, nj, &lo, &hi);
	for (int j = lo; j < hi; j++)
		sb[j] = cg_get(g->k.f, vb[j]);
	gemm_f8_promote_cols(g, sa, sb, j0, nj);
}

/* Half h (0, 1) of a warpgroup's fragment columns: the first and the count;
 * with f8.whole the first is all of them and the second none (both
 * mainloops then issue a k-tile as one group and promote it after its wait:
 * an empty half issues and promotes nothing). */
void
gemm_f8_half(const G *g, int h, int *j0, int *nj)
{
	int lo = g->k.s.f8.whole ? g->ni : g->ni / 2;

	*j0 = h ? lo : 0;
	*nj = h ? g->ni - lo : lo;
}

/*
 * One tile's k-loop (f8_ktile each k-tile, the first peeled): k-tile kt (= scale block kt) into fresh accumulators
 * (scale-d 0) in two halves of the warpgroup's columns (two wgmma groups),
 * so that the promotion of one half,
 *	fin[r][c] += acc[r][c] * sb[c][kt] * sa[r][kt]
 * runs while the tensor cores work on the other:
 *
 *	per k-tile kt: cp.async wait, fence, barrier; issue (kt, lo);
 *	    [kt > 0: promote (kt-1, hi)]; the next loads; kt's scales;
 *	    wait_group 0; issue (kt, hi); promote (kt, lo); wait_group 0
 *	after the last: promote (n-1, hi)
 *
 * for the thread's 2 mi rows and 2 ni columns, whose scales it loads (A's
 * through the row gather, B's through the interleave), hi's kept for the
 * next k-tile.  Nothing is in flight across the loop's back edge (ptxas
 * would serialise the wgmmas: C7514).  L = S-1 k-tiles in flight; a stage
 * is refilled after the barrier that follows the wait of the k-tile that
 * read it.  The sums end in g->acc for the epilogue.
 */
static void
f8_ktile(G *g, LLVMValueRef da0, LLVMValueRef db0, LLVMValueRef kt, LLVMValueRef *va, LLVMValueRef *vb, int first)
{
	CgFn *f = g->k.f;
	int S = g->k.s.stages, lo0, lon, hi0, hin, blo, bhi;
	LLVMValueRef st, sa[2 * MAXF], sb[2 * MAXF];

	gemm_f8_half(g, 0, &lo0, &lon);
	gemm_f8_half(g, 1, &hi0, &hin);
	cg_cp_async_wait(f, S - 2);
	gemm_fence_proxy_async(f);
	cg_barrier(f);
	st = cg_urem(f, kt, cg_i32(f, S));
	gemm_wgmma_ktile_cols(g, da0, db0, st, cg_i32(f, 0), lo0, lon);
	if (!first)
		f8_promote_kept(g, va, vb, hi0, hin);
	load_ahead(g, kt, S - 1);
	gemm_f8_stage_scales(g, gemm_f8_slot_at(g, st), 0, g->ni, sa, sb);	/* staged with the stage */
	for (int i = 0; i < 2 * g->mi; i++)
		cg_set(f, va[i], sa[i]);
	f8_sb_range(g, hi0, hin, &blo, &bhi);
	for (int j = blo; j < bhi; j++)
		cg_set(f, vb[j], sb[j]);
	wg_wait(f, 0);
	gemm_wgmma_ktile_cols(g, da0, db0, st, cg_i32(f, 0), hi0, hin);
	gemm_f8_promote_cols(g, sa, sb, lo0, lon);
	wg_wait(f, 0);
}

static void
f8_mainloop(G *g)
{
	CgFn *f = g->k.f;
	int hi0, hin;
	LLVMValueRef da0, db0, kt, va[2 * MAXF], vb[2 * MAXF];
	CgLoop l;

	gemm_f8_half(g, 1, &hi0, &hin);
	for (int i = 0; i < 2 * MAXF; i++) {
		va[i] = i < 2 * g->mi ? cg_var(f, f->tf32, NULL) : NULL;
		vb[i] = i < 2 * g->ni || (f8_blocked(g) && i < 2) ? cg_var(f, f->tf32, NULL) : NULL;
	}
	gemm_wgmma_descs(g, &da0, &db0);
	gemm_f8_tile(g);
	gemm_f8_scale_sources(g, g->k.nthr);
	load_first(g, g->k.s.stages - 1);
	if (g->kt > 0) {
		f8_ktile(g, da0, db0, cg_i32(f, 0), va, vb, 1);
		kt = cg_loop(f, &l, cg_i32(f, 1), cg_i32(f, g->kt), cg_i32(f, 1));
		f8_ktile(g, da0, db0, kt, va, vb, 0);
		cg_endloop(f, &l);
		f8_promote_kept(g, va, vb, hi0, hin);
	}
	cg_barrier(f);		/* every warpgroup is done with the stages */
	gemm_f8_result(g);
}

static void
kloop(G *g, void *arg)
{
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int S = s->stages;
	int pipe = !s->no_frag_pipe && S >= 4, L = pipe ? S - 2 : S - 1;
	LLVMValueRef da0, db0, kt, scale;
	CgLoop l;

	(void)arg;
	gemm_wgmma_descs(g, &da0, &db0);	/* stage 0 at this warpgroup's rows and columns */
	load_first(g, L);
	kt = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, g->kt), cg_i32(f, 1));
	cg_cp_async_wait(f, L - 1);	/* k-tile kt has landed (this thread's part) */
	gemm_fence_proxy_async(f);
	cg_barrier(f);			/* ... everybody's; stage (kt+L) % S is retired */
	scale = LLVMBuildZExt(f->B, LLVMBuildICmp(f->B, LLVMIntNE, kt, cg_i32(f, 0), ""), f->ti32, "");
	gemm_wgmma_ktile(g, da0, db0, cg_urem(f, kt, cg_i32(f, S)), scale);
	/* the next loads go out while the tensor cores work */
	load_ahead(g, kt, L);
	wg_wait(f, pipe ? 1 : 0);
	cg_endloop(f, &l);
	wg_wait(f, 0);
	acc_fence(g);
	cg_barrier(f);		/* every warpgroup is done with the stages */
}

void
gemm_wgmma_mainloop(G *g)
{
	if (g->k.s.f8.group > 0)
		f8_mainloop(g);
	else
		gemm_wgmma_by_rows(g, kloop, NULL);
}

/* ---- a one-instruction probe (tests of the emulator and the toolchain) ---- */

/*
 * D[64][n] (f32) = A[64][16] . B[n][16]^T (bf16, row-major): one warpgroup
 * stages A and B in shared memory with plain stores, 32-byte swizzled
 * K-major (chunk c of row r at c ^ (r/4 % 2)), fence.proxy.async,
 * barrier, one wgmma m64nNk16, commit, wait, and each thread stores its
 * fragment.  The flags break it on purpose, for the emulator to notice.
 */
int
cg_emit_wgmma_probe(CgModule *m, const char *name, int n, DbgFlags flags, Diag *d)
{
	CgParam p[3] = {{CGP_PTR, "A"}, {CGP_PTR, "B"}, {CGP_PTR, "D"}};
	int block[3] = {128, 1, 1}, nch = 128 + 2 * n;
	CgExpr grid[3] = {CG_EXPR_INT(1), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	LLVMValueRef tid, warp, lane, base, addr, acc[128], da, db;
	CgFn *f;

	if (n < 8 || n > 256 || n % 8)
		return diag_error(d, LOC_NONE, "wgmma probe: n = %d (need a multiple of 8 in 8..256)", n);
	if (!cg_target_is_emu(cg_module_target(m)) &&
	    cg_require(cg_module_target(m), CG_WGMMA, "the wgmma probe", d) < 0)
		return -1;
	if (!(f = cg_fn_begin(m, name, p, 3, 128, 1, d)))
		return -1;
	tid = cg_tid(f, 0);
	warp = cg_shr(f, tid, 5);
	lane = cg_and(f, tid, 31);
	gemm_aligned_smem(f, &base, &addr);
	for (int i = 0; i * 128 < nch; i++) {
		/* chunk c: row c/2 (A's 64 rows, then B's n), half c%2; 32 bytes a row */
		LLVMValueRef c = cg_addi(f, tid, i * 128), r, src, dst, v;
		CgIf in, ab;
		cg_if(f, &in, cg_lt(f, c, cg_i32(f, nch)));
		r = cg_shr(f, c, 1);
		dst = cg_add(f, cg_shl(f, r, 5),
			     cg_shl(f, LLVMBuildXor(f->B, cg_and(f, c, 1), cg_and(f, cg_shr(f, r, 2), 1), ""), 4));
		cg_if(f, &ab, cg_lt(f, c, cg_i32(f, 128)));
		src = cg_gep(f, cg_arg(f, 0), c, 16);
		v = cg_gload(f, LLVMVectorType(f->ti32, 4), src, 16);
		cg_sstore(f, v, cg_sptr(f, cg_add(f, base, dst)), 16);
		cg_else(f, &ab);
		src = cg_gep(f, cg_arg(f, 1), cg_addi(f, c, -128), 16);
		v = cg_gload(f, LLVMVectorType(f->ti32, 4), src, 16);
		cg_sstore(f, v, cg_sptr(f, cg_add(f, base, dst)), 16);	/* rows 64.. */
		cg_endif(f, &ab);
		cg_endif(f, &in);
	}
	if (!(flags & CG_WGPROBE_NO_FENCE))
		gemm_fence_proxy_async(f);
	cg_barrier(f);
	for (int k = 0; k < n / 2; k++)
		acc[k] = cg_var(f, f->tf32, cg_f32(f, 0));
	{
		LLVMValueRef buf = f->emu ? cg_var(f, LLVMArrayType(f->tf32, (unsigned)(n / 2)), NULL) : NULL;
		da = desc_swz(f, addr, 16, 256, SWIZZLE_32B);
		db = desc_swz(f, cg_addi(f, addr, 64 * 32), 16, 256, SWIZZLE_32B);
		wg_fence(f);
		wgmma_emit(f, acc, n, DT_BF16, 0, da, db, cg_i32(f, 0), buf ? emu_elem(f, buf, 0) : NULL);
		wg_commit(f);
		if (flags & CG_WGPROBE_WRITE_IN_FLIGHT) {
			CgIf t0;
			cg_if(f, &t0, LLVMBuildICmp(f->B, LLVMIntEQ, tid, cg_i32(f, 0), ""));
			cg_sstore(f, cg_i32(f, 0), cg_sptr(f, base), 4);
			cg_endif(f, &t0);
		}
		if (!(flags & CG_WGPROBE_NO_WAIT))
			wg_wait(f, 0);
		fence_operands(f, acc, n / 2, buf, 0);
	}
	for (int k = 0; k < n / 2; k++) {
		/* d[k]: row 16 warp + lane/4 (+8 for k%4 >= 2), column 8 (k/4) + 2 (lane%4) + k%2 */
		LLVMValueRef row = cg_add(f, cg_shl(f, warp, 4), cg_addi(f, cg_shr(f, lane, 2), k % 4 / 2 * 8));
		LLVMValueRef col = cg_addi(f, cg_shl(f, cg_and(f, lane, 3), 1), k / 4 * 8 + k % 2);
		LLVMValueRef at = cg_add(f, cg_muli(f, row, n), col);
		cg_gstore(f, cg_get(f, acc[k]), cg_gep(f, cg_arg(f, 2), at, 4), 4);
	}
	return cg_fn_end(f, block, grid, 2048 + (64 + n) * 32, "wgmma probe");
}

CgMainloop
cg_gemm_mainloop_for(const CgModule *m, const GemmSpec *s)
{
	const CgTarget *t = cg_module_target(m);
	GemmSpec w = *s;
	Diag quiet;

	/* --debug=emu-wgmma: the emulator stands for sm_90a here, so that
	 * `moec test --emulate` runs a model's GEMMs through this mainloop */
	if (s->f8.group > 0)
		return CG_MAINLOOP_WGMMA;	/* FP8 x FP8 has no other */
	if (!cg_target_has(t, CG_WGMMA) && !(cg_target_is_emu(t) && cg_module_debug(m) & DBG_EMU_WGMMA))
		return CG_MAINLOOP_MMA;
	diag_init(&quiet, NULL);
	w.mainloop = CG_MAINLOOP_WGMMA;
	return cg_gemm_check(t, &w, &quiet) == 0 ? CG_MAINLOOP_WGMMA : CG_MAINLOOP_MMA;
}

int
cg_arch_fp8_mma(const char *sm, DbgFlags debug)
{
	CgTarget t = {sm, NULL, 3};

	return cg_target_has(&t, CG_WGMMA) || (cg_target_is_emu(&t) && debug & DBG_EMU_WGMMA);
}
