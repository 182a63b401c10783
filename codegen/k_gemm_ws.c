/*
 * k_gemm_ws.c — the warp-specialised sm_90a mainloop of the GEMM builder
 * (GemmSpec.mainloop = CG_MAINLOOP_WS): TMA loads into a ring of stages
 * guarded by mbarriers, a producer warpgroup and consumer warpgroups.
 *
 *	all:       mbarrier.init full[S] (count 1), empty[S] (count: consumer
 *	           warps); [the expert table]; producer: setmaxnreg.dec 40,
 *	           consumers: setmaxnreg.inc 232 (with two consumer warpgroups:
 *	           regs_split below)
 *	producer   (one elected thread of warp 0), per tile of the schedule,
 *	           per k-tile, it = k-tiles so far, s = it % S:
 *	               wait empty[s] (parity of it/S, flipped); arrive.expect_tx
 *	               full[s] with the stage's bytes; TMA A's and B's blocks
 *	consumers, per tile, per k-tile: wait full[s]; wgmma over stage s;
 *	           commit; wait_group 1; lane 0 of each warp arrives on the
 *	           empty barrier of the k-tile before (its wgmmas retired);
 *	           after the last: wait_group 0, release it, then the epilogue
 *	           from registers (k_gemm.c's, unchanged) and the next tile
 *
 * The producer runs up to S k-tiles ahead, across tile boundaries, so the
 * loads of tile i+1 overlap the epilogue of tile i; with the persistent
 * schedule a CTA strides over the (expert, n-tile, m-tile) work items, the
 * experts ranked by their tiles from the device offsets (heavy first, up to
 * 512 experts), so that the longest experts start first and short ones
 * fill the tail.
 * Everything but the k-loop is k_gemm.c's and k_gemm_common.c's (schedule,
 * expert table from device offsets, epilogue, store); the wgmma issue and
 * the shared layout are k_gemm_wgmma.c's: per stage A as bk/64 blocks of
 * [bm][128 B] and B [N,K] as bk/64 blocks [bn][128 B] (K-major), B [K,N] as
 * bn/64 blocks [bk][128 B] (N-major), all 128-byte swizzled, which is what a
 * TMA box with an inner extent of 64 elements and the 128-byte swizzle
 * writes.  The tensor maps (CgKernel.tmap): A [M, K] (rank 2, box 64 x bm);
 * B [N, K] or [K, N], rank 3 over the experts when grouped (box 64 x bn or
 * 64 x bk, x 1).  A's rows past M read as zeros; a grouped tile's rows past
 * its expert belong to the next one and are never stored.
 *
 * Gathered A rows (the MoE up-projection reads x's rows through the
 * permutation; a TMA box reads consecutive rows): the whole producer
 * warpgroup loads A, each thread its 16-byte chunks of the stage with
 * cp.async (into the same swizzled layout TMA would write), then
 * cp.async.mbarrier.arrive.noinc on full[s], which counts those 128
 * arrivals too (count 129); one thread still loads B by TMA with
 * expect_tx of B's bytes.  cp.async writes through the generic proxy and
 * wgmma reads through the async one, so the consumers fence
 * (fence.proxy.async) after their wait on full[s].
 *
 *	producer (128 threads), per k-tile: wait empty[s]; thread 0:
 *	    arrive.expect_tx full[s] (B's bytes), TMA B; every thread:
 *	    cp.async its A chunks (rows from gather_idx, per tile),
 *	    cp.async.mbarrier.arrive.noinc full[s]
 *	consumers: wait full[s]; fence.proxy.async; wgmma ... as above
 *
 * Three consumer warpgroups (warps_m x warps_n = 12; 192x128: each 64
 * rows of all 128 columns, 64 accumulators a thread) cover an expert of up
 * to 192 rows in one tile, so its B tiles are read once where 128-row
 * tiles read them twice for every expert of 129..191 rows (DeepSeek-V3 at
 * T = 4096: 128 +- 11 rows an expert).  A warpgroup whose 64 rows hold no
 * row of the tile issues no wgmma (gemm_wgmma_by_rows) but still waits for
 * and releases each stage; 512 threads, registers 56 / 152 (consumer_regs).
 *
 * Registers (two consumer warpgroups, 384 threads): the kernel pins 168 a
 * thread at entry (.maxnreg, cg_regs_per_thread), 64512 in all, and that is
 * all the CTA has: setmaxnreg.dec gives registers back to a per-CTA pool and
 * setmaxnreg.inc blocks until the pool holds what it asks for (PTX ISA,
 * setmaxnreg).  So the consumers' 2 x 128 x 232 and the producer's 128 x P
 * must fit in 384 x 168: P = 40, gathered A or not.  (P = 48, 128 x 48 + 256
 * x 232 = 65536 "= 64K", left the second consumer warpgroup's .inc waiting
 * for 1024 registers forever: the gathered kernels hung on the H200 on
 * 2026-12-02; the emulator now models the pool.)  The producer's 40 hold the
 * gathered chunks' sources too: ptxas spills nothing.
 * FP8 x FP8 (GemmSpec.f8, DeepGEMM's promotion): e4m3 maps, a box row of
 * 128 e4m3 (one k-tile, one scale block); the whole producer warpgroup
 * runs, each thread staging the k-tile's A row and B column scales into the
 * stage's scale slot (cp.async, then its arrival on full[s]: 1 + 128); each
 * consumer warpgroup per k-tile: two wgmma groups of half its columns, the
 * promotion fin += acc * sb * sa (k_gemm_wgmma.c's) of one half while the
 * other runs, the scales from the slot (consume_f8).  The warpgroups meet
 * only at the ring; the producer stays S k-tiles ahead (and with
 * GemmSpec.f8.l2_ahead prefetches B into L2 S more: prefetch_b).
 *
 * Ping-pong (GemmSpec.ws_mode = CG_WS_PINGPONG, persistent): two consumer
 * warpgroups, each on whole tiles of its own (warps_m x warps_n = 4 warps
 * lay out one tile, accumulators and all), warpgroup c taking the CTA's
 * work items c, c + 2, ... (gemm_schedule_share) while the producer loads
 * them all in order; each skips the other's k-tiles in the ring.  They
 * take turns at the tensor cores with named barriers ORDER_BAR + c ("c's
 * turn", 256 threads: 128 wait, the other 128 arrive):
 *
 *	warpgroup c, per tile w:  [w not the CTA's first] bar.sync ORDER_BAR + c
 *	                          k-tiles as above (the last group in flight)
 *	                          [a next item exists] bar.arrive ORDER_BAR + 1 - c
 *	                          wait_group 0, release, epilogue; it += kt
 *
 * so one's epilogue runs while the other's wgmmas do.  The turn also keeps
 * the parity waits honest: a warpgroup waits on full[s] for tile j only
 * after the other has waited for all of tile j - 1's, so no stage is more
 * than one phase behind the parity it waits for.  Empty barriers count the
 * 4 warps of the tile's owner.
 *
 * Clusters of 2 (GemmSpec.cluster = 2, persistent, TMA for A; the
 * emulator runs a cluster's CTAs together): the two CTAs of a cluster take work
 * items 2i and 2i + 1, which gemm_tile_coords makes one row tile's column
 * tiles 2j and 2j + 1, so they share A's tile.  Each producer loads its
 * half of A's rows (a box of bm/2) multicast to both CTAs' stage (the same
 * offset), completing the bytes on each CTA's full[s]; B as before.  A
 * stage of either CTA is so written by both producers, so each consumer
 * warp releases it in both CTAs (empty[s] counts both CTAs' warps; the
 * peer's through mapa), and the CTAs meet at barrier.cluster after the
 * barriers' init and before they exit (no arrival or copy reaches a CTA
 * that has not started or has left).
 *
 *	producer (rank r):  wait empty[s]; arrive.expect_tx full[s] (the whole
 *	                    stage); TMA A rows r bm/2.. multicast to 0b11; TMA B
 *	consumer warps:     ... release: arrive empty[s] here and in the peer
 *
 * FP8's gate|up (the default since session 28, --debug=f8-cp not; cg_gemm_ws_for takes an interleaved B or
 * a group-quantised output only then): lower-moe's interleave (tile row
 * 2j + h is the expert's B row h N/2 + j) is a rank-3 box (128 bytes, 2,
 * bn/2) over (k, half, row) with the experts' rows as one run, which TMA
 * writes as the tile's rows in order (interleaved_bmap; clusters sharing B:
 * each CTA's half, a box of bn/4 pairs, load_b_half); the output quantisation's
 * amax exchange (k_gemm.c's group_amax) meets at a named barrier of the
 * consumer warpgroups (EPI_BAR) over slots of its own after the stages.
 *
 * Not here (cg_gemm_check refuses, and cg_gemm_mainloop_for picks the
 * cp.async wgmma mainloop instead): f32 operands (TMA copies, it does not
 * convert), group quantisation with ping-pong consumers (the amax barriers
 * would span two tiles).
 */
#include <stdio.h>
#include <stdlib.h>

#include "k_gemm.h"

#define PRODUCERS 128		/* threads of the producer warpgroup */
#define MAX_AUTO_STAGES 6	/* cg_gemm_ws_for: the most stages it tries */
#define HEAVY_FIRST_MAX 512	/* experts ranked by tiles up to this many (O(E^2) at start) */
#define PINGPONG_CTAS 132	/* --debug=ws-pingpong: one CTA per SM of an H100 SXM / H200 */
#define ORDER_BAR 1		/* ping-pong: named barriers 1, 2, consumer warpgroup 0's and 1's turn */
#define OUT_BAR 4		/* GemmSpec.tma_store: named barriers 4.., consumer warpgroup c's buffer (k_gemm.c's EPI_BAR: 3) */
#define OUT_ROWS 64		/* ... a buffer holds one fragment row block (64 rows) of its warpgroup's tile */
#define PF_RUN 4		/* GemmSpec.f8.l2_ahead: k-tiles of B prefetched together (a power of 2) */
#define MAX_ROW_BOXES 8	/* GemmSpec.gather_tma: a producer lane's rows of a tile (bm / 32, bm <= 256) */

/* Consumer warpgroups: one, two or three split a tile, or two take turns (ping-pong). */
static int
consumer_wgs(const GemmSpec *s)
{
	return s->ws_mode == CG_WS_PINGPONG ? 2 : s->warps_m * s->warps_n / 4;
}

/*
 * Registers per consumer thread under setmaxnreg (more than one consumer
 * warpgroup; one has all 255 a launch of 256 threads gives).  Two: 232 of
 * the 384 x 168 the CTA starts with (128 accumulators a thread: 128x256
 * over two warpgroups of 128x128), the producer 40.  Three (192 rows, one
 * 64-row block each, 512 threads pinned at 128): 152, the producer 56:
 * 64 accumulators a thread for a 64x128 warpgroup tile, and the gathered
 * producer's 12 chunk sources (192 x 64 of A, 24 registers) fit in 56
 * (ptxas, unit_ws).  Two with FP8 and a quantised output, persistent, A by
 * TMA: 240, the producer 24.  A multiple of 8 in 24..256 (PTX ISA, setmaxnreg).
 */
static int
consumer_regs(const GemmSpec *s)
{
	int wgs = consumer_wgs(s);

	if (wgs == 3)
		return 152;
	/* gathered bf16/f16 A, persistent (or in clusters): the producer's
	 * chunk sources and the schedule's state spilled at 40 (48 bytes,
	 * DeepSeek-V3's gate|up, ptxas CUDA 13.0); 56 / 224 spill nothing */
	if (gemm_a_cp_async(s) && s->f8.group == 0 && s->sched == CG_SCHED_PERSISTENT)
		return 224;
	/* FP8, A by TMA, persistent, the output quantised per group (the
	 * shared expert's dense gate|up: its SwiGLU and group amax): the
	 * consumers spilled 24 bytes at 232 (DeepSeek-V3's k5, ptxas CUDA
	 * 13.0); the TMA producer's schedule and scale copies fit 24, so 24 /
	 * 240 spill nothing */
	if (s->f8.group && !gemm_a_cp_async(s) && s->sched == CG_SCHED_PERSISTENT && s->quant.kind == CG_QUANT_GROUP)
		return 240;
	return 232;
}

/* Warps: the spec's warps_m * warps_n consume, one more warpgroup produces. */
void
gemm_ws_layout(G *g)
{
	GemmCore *k = &g->k;
	const GemmSpec *s = &k->s;
	int S = s->stages;

	k->nwarp = 4 * consumer_wgs(s) + 4;
	k->nthr = 32 * k->nwarp;
	/* [1 KiB slack][S stages][output buffers][full[S], empty[S]][expert table][warp sums][128];
	 * the output buffers (GemmSpec.tma_store) 1 KiB aligned as the stages are, one a consumer warpgroup */
	g->o_off = S * g->wg.stage;
	g->o_nbuf = s->tma_store > 0 ? MIN(s->tma_store, g->mi) : 0;
	g->o_bytes = g->o_nbuf * OUT_ROWS * g->wtn * esize(s->c_dt);
	k->tab = 1024 + g->o_off + consumer_wgs(s) * g->o_bytes + 16 * S;
	k->wsum = k->tab + ((4 * (s->groups + 1) + 15) & ~15);
	k->smem = s->groups > 0 ? k->wsum + 128 : k->tab;
	if (s->groups > 0 && s->groups <= HEAVY_FIRST_MAX && !s->no_rank) {	/* + cnt[E], ord[E] */
		k->cnt = k->smem;
		k->ord = k->cnt + 4 * s->groups;
		k->smem = k->ord + 4 * s->groups;
	}
	/* gathered A: the producer warpgroup's cp.async chunks; B by TMA */
	g->a_n = gemm_a_cp_async(s) ? (g->a_chunks + PRODUCERS - 1) / PRODUCERS : 0;
	g->b_n = 0;
	if (s->quant.kind == CG_QUANT_GROUP && g->q_sg > 0) {	/* the amax slots: the stages are the producer's */
		g->q_off = (k->smem + 15) & ~15;
		k->smem = g->q_off + g->q_bytes;
	}
}

/* CTAs per cluster (1: none). */
static int
csize(const GemmSpec *s)
{
	return s->cluster == 2 || s->cluster == 4 ? s->cluster : 1;
}

/* Clusters of 4 as 2x2 (GemmSpec.cluster = 4, dense): rank r's tile is row
 * tile 2i + (r & 1), column tile 2j + (r >> 1) of the cluster's 2x2. */
static int
quad(const GemmSpec *s)
{
	return s->cluster == 4;
}

/* The CTAs whose producers write a stage of this one (so many release it):
 * itself; its pair's peer; in a 2x2 its row and its column partner. */
static int
writers(const GemmSpec *s)
{
	return quad(s) ? 3 : csize(s);
}

/* Where the boxes past the tile's rows are not loaded (gemm_live_rows): A's
 * box rows, 64 (192-row tiles), or 16 with GemmSpec.live_rows (the short
 * second tile of a DeepSeek-V3 expert holds ~10 rows: one box of 16, not
 * 64; two 8-row swizzle atoms, so each box lands on a 1 KiB boundary). */
static int
live_box(const GemmSpec *s)
{
	return s->live_rows ? 16 : 64;
}

/*
 * Grouped pairs (GemmSpec.cluster_b) with A by TMA (the MoE down
 * projection): a pair of an expert's two column tiles of one row tile (its
 * odd last row tile, every expert of one row tile) shares A's tile as the
 * pair of row tiles shares B's: each CTA loads half of its rows, multicast
 * to both.  A_map's box is half the tile's rows then (a tile alone loads
 * two); with live rows only with A_rows_map (the pairs sharing B load their
 * tiles' live rows, those sharing A every row).
 */
static int
pair_a(const GemmSpec *s)
{
	return s->cluster_b && s->groups > 0 && !s->gather && s->bm % 16 == 0 &&
	       (!gemm_live_rows(s) || gemm_a_rows_map(s));
}

/* A's box rows: the tile's, with clusters each CTA's half, and live_box
 * where the boxes past the tile's rows are not loaded (gemm_live_rows). */
static int
a_box_rows(const GemmSpec *s)
{
	if (pair_a(s))
		return s->bm / 2;
	if (gemm_a_rows_map(s))	/* whole tiles one box; A_rows_map's boxes are live_box rows */
		return s->bm;
	return gemm_live_rows(s) ? live_box(s) : s->cluster_b ? s->bm : csize(s) > 1 ? s->bm / 2 : s->bm;
}

/* Clusters sharing B (GemmSpec.cluster_b; grouped also without a cluster,
 * the pair schedule alone; the 2x2's column pairs): each CTA's half of B's box rows. */
static int
b_box_rows(const GemmSpec *s)
{
	return (s->cluster_b && (s->cluster == 2 || s->groups > 0)) || quad(s) ? s->bn / 2 : s->bn;
}

/* Clusters of 4 (2x2): dense, persistent over a multiple of 4 CTAs, A by
 * TMA, B [N,K], cooperative; the halves of A's and B's boxes whole 8-row atoms. */
static int
quad_check(const GemmSpec *s, Diag *d)
{
	if (s->groups > 0 || s->gather || s->cluster_b || s->f8.group > 0 || s->b_layout != CG_B_NK ||
	    s->ws_mode == CG_WS_PINGPONG)
		return diag_error(d, LOC_NONE, "gemm: ws: clusters of 4 (2x2 sharing A and B) are for dense "
				  "cooperative bf16/f16 GEMMs with A by TMA and B [N,K] (not grouped, gathered, "
				  "cluster_b, FP8 or ping-pong)");
	if (s->sched != CG_SCHED_PERSISTENT || s->ctas % 4)
		return diag_error(d, LOC_NONE, "gemm: ws: clusters of 4 need the persistent schedule over a "
				  "multiple of 4 CTAs (%d)", s->ctas);
	if (s->bm % 16 || s->bn % 16)
		return diag_error(d, LOC_NONE, "gemm: ws: clusters of 4: a %dx%d tile (each CTA's half of A's "
				  "and of B's box must be whole 8-row atoms)", s->bm, s->bn);
	return 0;
}

/* Clusters of 2: persistent over an even grid, TMA for A, column tiles in pairs. */
static int
cluster_check(const GemmCore *k, Diag *d)
{
	const GemmSpec *s = &k->s;

	if (s->cluster != 0 && s->cluster != 1 && s->cluster != 2 && s->cluster != 4)
		return diag_error(d, LOC_NONE, "gemm: ws: clusters of %d CTAs (need 2, 4, or none)", s->cluster);
	if (quad(s))
		return quad_check(s, d);
	if (s->cluster_b && (s->b_layout != CG_B_NK || s->bn % 16))
		return diag_error(d, LOC_NONE, "gemm: ws: clusters of 2 sharing B: B [N,K] and bn a multiple of 16 "
				  "(each CTA's half of B's box whole 8-row atoms)");
	if (s->cluster_b && s->cluster != 2 && s->groups == 0)
		return diag_error(d, LOC_NONE, "gemm: ws: cluster_b without clusters of 2 (only grouped GEMMs run "
				  "the pairs without a cluster, each CTA loading its whole B)");
	if (s->cluster != 2)
		return 0;
	if (s->sched != CG_SCHED_PERSISTENT || s->ctas % 2)
		return diag_error(d, LOC_NONE, "gemm: ws: clusters of 2 need the persistent schedule over an even "
				  "number of CTAs (%d)", s->ctas);
	if (s->cluster_b)	/* row tiles in pairs (grouped: gemm_check_common's even column tiles) */
		return 0;
	if (s->gather)
		return diag_error(d, LOC_NONE, "gemm: ws: clusters of 2 multicast A's TMA box: not with gathered "
				  "A rows (cluster_b shares B instead)");
	if (k->nt % 2)
		return diag_error(d, LOC_NONE, "gemm: ws: clusters of 2 pair column tiles: %d of them (need an "
				  "even count)", k->nt);
	if (s->bm % 16)
		return diag_error(d, LOC_NONE, "gemm: ws: clusters of 2: bm %d (each CTA's half of A's box must be "
				  "whole 8-row atoms)", s->bm);
	return 0;
}

/* Ping-pong: one warpgroup's tile, persistent, bf16/f16 consumers (not yet FP8). */
static int
pingpong_check(const GemmSpec *s, int cw, Diag *d)
{
	if (cw != 4)
		return diag_error(d, LOC_NONE, "gemm: ws: ping-pong: %d warps per tile (each consumer warpgroup "
				  "owns a tile: warps_m x warps_n = 4)", cw);
	if (s->sched != CG_SCHED_PERSISTENT)
		return diag_error(d, LOC_NONE, "gemm: ws: ping-pong needs the persistent schedule (the warpgroups "
				  "take turns over a CTA's tiles)");
	if (s->f8.group > 0 && s->bm != 64)
		return diag_error(d, LOC_NONE, "gemm: ws: ping-pong with FP8 x FP8 on %d rows a warpgroup (64: "
				  "its 64 promoted sums and the accumulators fit)", s->bm);
	return 0;
}

/*
 * C a plain row-major tile of the GEMM's rows, whole in one kernel (what a
 * TMA store writes): dense (a grouped tile's rows past its expert are the
 * next expert's, which a box would overwrite), not gathered, scattered,
 * quantised, halved by swiglu, split or stream-K; bf16/f16.  In clusters
 * too: each CTA stores its own tile from its own buffers (tma_store_for
 * takes that only with --debug=dense-c2 or CG_DENSE_C2_DEFAULT).
 */
static int
plain_tile(const GemmSpec *s)
{
	int sw = 0;

	for (int i = 0; i < s->ep.n; i++)
		sw |= s->ep.in[i].op == CGE_SWIGLU;
	return s->groups == 0 && !s->gather && !sw && s->store != CG_STORE_SCATTER &&
	       s->quant.kind == CG_QUANT_NONE && s->split_k <= 1 && s->sched != CG_SCHED_STREAM &&
	       s->f8.group == 0 && (s->c_dt == DT_BF16 || s->c_dt == DT_F16);
}

/*
 * GemmSpec.tma_store: C a plain tile (plain_tile) stored by boxes of 64
 * columns (128 bytes, the swizzle's row) and 64 rows.
 */
static int
tma_store_check(const G *g, Diag *d)
{
	const GemmSpec *s = &g->k.s;

	if (!plain_tile(s))
		return diag_error(d, LOC_NONE, "gemm: ws: TMA stores of C are for dense GEMMs whose output is a "
				  "plain bf16/f16 tile (not grouped, scattered, quantised, split or after swiglu)");
	if (s->tma_store > 2)
		return diag_error(d, LOC_NONE, "gemm: ws: %d output buffers a warpgroup (1 or 2)", s->tma_store);
	if (g->wtn % 64 || g->mstride != OUT_ROWS || (s->ldc * 2) % 16)
		return diag_error(d, LOC_NONE, "gemm: ws: TMA stores of C need warpgroup tiles of 64k columns "
				  "and a row pitch of 16k bytes (%d columns, ldc %lld)", g->wtn, (long long)s->ldc);
	return 0;
}

int
gemm_ws_check(const CgTarget *t, const G *g, Diag *d)
{
	const GemmSpec *s = &g->k.s;
	int cw = s->warps_m * s->warps_n;

	if (!cg_target_is_emu(t) &&
	    cg_require(t, CG_WGMMA | CG_TMA | CG_SETMAXNREG, "the warp-specialised GEMM mainloop", d) < 0)
		return -1;
	if (g->mt == DT_TF32)
		return diag_error(d, LOC_NONE, "gemm: ws: no tf32 mainloop (the mma.sync one has it)");
	if (cw != 4 && cw != 8 && cw != 12)
		return diag_error(d, LOC_NONE, "gemm: ws: %d consumer warps (need 4, 8 or 12: one, two or three "
				  "warpgroups)", cw);
	if (s->ws_mode == CG_WS_PINGPONG && pingpong_check(s, cw, d) < 0)
		return -1;
	if (cluster_check(&g->k, d) < 0)
		return -1;
	if (s->bk != 64 && s->bk != 128)
		return diag_error(d, LOC_NONE, "gemm: ws: bk = %d (need 64 or 128: 128-byte swizzled rows)", s->bk);
	if (s->bm > 256 || s->bn > 256)
		return diag_error(d, LOC_NONE, "gemm: ws: a %dx%d tile (a TMA box has at most 256 rows)", s->bm, s->bn);
	if (!g->wg.wg_m || s->bm % (64 * g->wg.wg_m) || g->wtn > gemm_wg_cols(s) || g->wtn % 16)
		return diag_error(d, LOC_NONE,
				  "gemm: ws: a %dx%d tile does not split over %d warpgroups into tiles of "
				  "64k rows and 16..%d columns", s->bm, s->bn, cw / 4, gemm_wg_cols(s));
	if (s->b_layout == CG_B_KN && (g->wtn % 64 || s->bn % 64))
		return diag_error(d, LOC_NONE, "gemm: ws: B[K,N] needs warpgroup tiles of 64 or 128 columns, not %d",
				  g->wtn);
	if (g->mi * g->ni * 4 > 128)
		return diag_error(d, LOC_NONE, "gemm: ws: %dx%d per warpgroup is %d accumulators per thread (128 at most)",
				  g->wtm, g->wtn, g->mi * g->ni * 4);
	if (s->gather_tma && (!s->gather || s->f8.group > 0 || s->bm % 32 || s->bm / 32 > MAX_ROW_BOXES))
		return diag_error(d, LOC_NONE, "gemm: ws: gathered A by one-row TMA boxes: bf16/f16 A, gathered, "
				  "tiles of 32k rows (a producer lane's rows), not %dx%d%s", s->bm, s->bk,
				  s->f8.group > 0 ? " FP8" : "");
	if (s->gather && g->a_n > MAXI)
		return diag_error(d, LOC_NONE, "gemm: ws: gathered A of a %dx%d tile: %d chunks per producer "
				  "thread (at most %d)", s->bm, s->bk, g->a_n, MAXI);
	if ((s->a_dt != DT_BF16 && s->a_dt != DT_F16 && !(s->a_dt == DT_F8E4M3 && s->f8.group > 0)) ||
	    s->b_dt != s->a_dt)
		return diag_error(d, LOC_NONE, "gemm: ws: %s x %s (TMA copies: both operands bf16, f16, or "
				  "f8e4m3 with block scales)", dtype_name(s->a_dt), dtype_name(s->b_dt));
	/* group quantisation: its barriers are the consumers' (k_gemm.c's epi_barrier), its slots their own */
	if (s->quant.kind == CG_QUANT_GROUP && s->ws_mode == CG_WS_PINGPONG)
		return diag_error(d, LOC_NONE, "gemm: ws: group quantisation with ping-pong consumers (each "
				  "warpgroup's tile its own; the amax barriers span both)");
	if (s->tma_store && tma_store_check(g, d) < 0)
		return -1;
	return 0;
}

/*
 * Ping-pong (a request: GemmSpec.ws_mode = CG_WS_PINGPONG on a cooperative
 * plan, which cg_gemm_ws_for turns into it): a cooperative plan's two
 * warpgroups of 128x128 (a 128x256 or 256x128 tile) become two ping-pong
 * warpgroups of 128x128 each, persistent over PINGPONG_CTAS; what wins is
 * the epilogue hidden behind the other warpgroup's wgmmas and a fuller last
 * wave (twice the tiles over the same SMs), at the price of B tiles shared
 * by no second warpgroup (a third more TMA bytes per flop).  FP8 only with
 * --debug=f8-pingpong (cg_gemm_f8_pingpong: 64x128 a warpgroup), not
 * gathered A (3303 -> 4343 us alone, Mixtral's up-projection).
 *
 * cg_gemm_pingpong_pays: where the H200 measured it faster (bundles,
 * bench/results/2026-12-02-s25-pingpong-default-ab.log and session 26's
 * A/B; bench/gemm kernels alone, -s25-final-gemm.log):
 *  - grouped with A not gathered (the MoE down projection, scattered with
 *    routing weights) of at most PINGPONG_KT k-tiles, where the epilogue is
 *    a large share of a tile: DeepSeek-V3's (32 k-tiles) 2966 -> 2691 us at
 *    T = 4096 in the block, Qwen3-30B-A3B's (12) 297 -> 292.  Not Mixtral's
 *    (224 k-tiles): 1527 -> 1594 us in the block (session 26), though 1548 ->
 *    1461 alone: the kernel alone was compared with the persistent
 *    cooperative kernel (wsdn_*_p), the bundle runs the tiles schedule, which
 *    is faster there (heuristic step 5a), and the epilogue ping-pong hides is
 *    small against 224 k-tiles.
 *  - dense, by waves at the bucket's most rows (thi: the T `moert tune` times
 *    a bucket at): the cooperative tiles run one CTA an SM in waves, ping-pong
 *    twice the tiles over the same SMs; each wave's fill is tiles / (SMs x
 *    waves).  Ping-pong where its fill x PINGPONG_DENSE_PCT% beats the
 *    cooperative's: at equal fill it measured 5.5% slower (N = 14336,
 *    K = 4096, M = 4096: 27.2 / 28 and 13.6 / 14 waves, 763 against 723 us),
 *    at M = 1024 (6.8 / 7 against 3.4 / 4 waves) 11% faster (184 against 207).
 * --debug=ws-pingpong takes it wherever it fits.
 */
enum { PINGPONG_KT = 32, PINGPONG_DENSE_PCT = 94 };

/* The share of wave slots a launch of `tiles` over `slots` CTAs at a time fills. */
static double
wave_fill(int64_t tiles, int64_t slots)
{
	return tiles <= 0 || slots <= 0 ? 0 : (double)tiles / (double)(slots * ((tiles + slots - 1) / slots));
}

/* A cooperative plan ping-pong can take: two warpgroups of 128x128, not FP8,
 * split-K or stream-K. */
static int
pingpong_shape(const CgTarget *t, const GemmSpec *s)
{
	return s->f8.group <= 0 && s->warps_m * s->warps_n == 8 && s->bm * s->bn == 128 * 256 && s->split_k <= 1 &&
	       s->sched != CG_SCHED_STREAM && cg_target_sms(t) > 0;
}

int
cg_gemm_pingpong_pays(const CgTarget *t, const GemmSpec *s, int64_t thi)
{
	int64_t M = (int64_t)(s->m_per_t > 0 ? s->m_per_t : 1) * thi, sms = cg_target_sms(t), nt, coop, pp;

	if (s->gather || !pingpong_shape(t, s))
		return 0;
	if (s->groups > 0)
		return s->K / s->bk <= PINGPONG_KT;
	nt = (s->N + s->bn - 1) / s->bn;
	coop = (M + s->bm - 1) / s->bm * nt;
	pp = (M + 127) / 128 * ((s->N + 127) / 128);
	return wave_fill(pp, PINGPONG_CTAS) * PINGPONG_DENSE_PCT > wave_fill(coop, sms) * 100;
}

/* FP8's down GEMM on ping-pong consumers without the flag (1) or only with --debug=f8-pingpong (0: until
 * the GPU's A/B says it wins; the flip is this line) */
enum { F8_PINGPONG_DEFAULT = 0 };	/* session 34's A/B: the FP8 layer 6160 -> 6285 us at T = 4096, 2799 -> 2784 at 256 */

/*
 * FP8 ping-pong (--debug=f8-pingpong): a grouped GEMM with A not gathered
 * and short tiles (at most PINGPONG_KT k-tiles: DeepSeek-V3's down, 16),
 * whose epilogue (x routing weight, f32 rows scattered: 64 KB a 64x256
 * tile) and last promotion the cooperative consumers run with the tensor
 * cores idle.  64 rows a warpgroup (its 64 promoted sums and 64
 * accumulators), so a warpgroup's tile is the 64x256 tile's half: B's
 * tiles are read by as many row tiles as before, A's twice.  With whole
 * k-tiles (.fw) a warpgroup promotes k before it issues k + 1, so while it
 * holds the tensor cores alone those promotions are exposed: the H200's
 * k4 1772 -> 1928 us at T = 4096 (docs/codegen.md, FP8 x FP8, session 34).
 */
int
cg_gemm_f8_pingpong(const CgModule *m, const GemmSpec *s)
{
	return (F8_PINGPONG_DEFAULT || (cg_module_debug(m) & DBG_F8_PINGPONG)) && s->f8.group > 0 &&
	       s->groups > 0 && !s->gather && s->split_k <= 1 && s->K / s->bk <= PINGPONG_KT;
}

/*
 * cg_gemm_gather_pingpong: the gathered grouped GEMMs (the MoE gate|up at
 * prefill) that program.c's --debug=gather-pingpong (session 34, an A/B on
 * the H200) asks ping-pong consumers for: a cooperative 128x256 plan of at
 * most GATHER_PINGPONG_KT k-tiles, bf16/f16 (not quantised B).  Why: the
 * downs' rule above (the epilogue a large share of a tile of few k-tiles,
 * hidden under the other warpgroup's k-tiles) holds for the gate|up too,
 * whose epilogue is the larger (SwiGLU, a per-row scale, the stores):
 * Mixtral-8x7B's (K 4096: 64 k-tiles) ran 598 TFLOP/s at T = 4096 where its
 * down (224) ran 650, about 0.92 us a k-tile against 0.83 (session 33's
 * profile); Qwen3-30B-A3B's has 32.  DeepSeek-V3's (112) is left alone, and
 * gpt-oss-20b's 128x192 tiles have no ping-pong form.  Measured slower on the
 * H200 (session 34: Mixtral's k3 3332 -> 3610 us, its block 1.061x; Qwen3's
 * block 1.020x): a 128x128 tile loads A (the gathered producer's cp.async)
 * twice a flop, which costs more than the epilogue it hides.
 */
enum { GATHER_PINGPONG_KT = 64 };

int
cg_gemm_gather_pingpong(const CgTarget *t, const GemmSpec *s)
{
	return s->gather && s->groups > 0 && s->bq.group <= 0 && s->bk > 0 && s->K / s->bk <= GATHER_PINGPONG_KT &&
	       pingpong_shape(t, s);
}

/* w as ping-pong where it is a cooperative plan of two 128x128 warpgroups
 * (with wg_wide two 64x256; FP8 where f8 says, two 64x128 of a 64x256
 * tile), else cooperative. */
static void
pingpong_plan(GemmSpec *w, int f8)
{
	w->ws_mode = CG_WS_COOPERATIVE;
	if (w->f8.group > 0) {
		if (!f8 || w->warps_m * w->warps_n != 8 || w->bm != 64 || w->bn != 256)
			return;
		w->ws_mode = CG_WS_PINGPONG;
		w->bn = 128;
		w->warps_m = 1;
		w->warps_n = 4;
		w->sched = CG_SCHED_PERSISTENT;
		w->ctas = PINGPONG_CTAS;
		return;
	}
	if (w->warps_m * w->warps_n != 8 || w->bm * w->bn != 128 * 256)
		return;
	w->ws_mode = CG_WS_PINGPONG;
	w->bm = w->wg_wide ? 64 : 128;
	w->bn = w->wg_wide ? 256 : 128;
	w->warps_m = w->wg_wide ? 1 : 2;
	w->warps_n = w->wg_wide ? 4 : 2;
	w->sched = CG_SCHED_PERSISTENT;
	w->ctas = PINGPONG_CTAS;
}

/* The most stages up to MAX_AUTO_STAGES (at least s->stages) that w passes with. */
static int
most_stages(const CgTarget *t, GemmSpec *w, int least)
{
	Diag quiet;

	diag_init(&quiet, NULL);
	for (w->stages = MAX_AUTO_STAGES; w->stages >= least && w->stages >= 2; w->stages--)
		if (cg_gemm_check(t, w, &quiet) == 0)
			return 1;
	return 0;
}

/*
 * A grouped FP8 GEMM of short tiles (K up to F8_PERSISTENT_KT k-tiles, A not
 * gathered: DeepSeek-V3's down GEMM) runs persistent, one CTA an SM (as
 * many as its shared memory lets an SM hold): every CTA of a tiled launch
 * builds the expert table (E = 256: the O(E^2) ranking, the offsets' loads,
 * four barriers) and fills its pipeline before its one tile of 16 k-tiles,
 * where a persistent CTA does so once and its producer runs ahead across
 * tiles.  Measured in session 24 (bench/results/2026-12-02-s24-f8gemm.log):
 * the down GEMM 128x128 on WS 3015 us persistent against 3518 tiled; the
 * gate|up shape (56 k-tiles, A sorted) the other way, 6187 against 5675,
 * hence the bound on K.
 */
enum { F8_PERSISTENT_KT = 16 };

static void
f8_persistent(const CgTarget *t, GemmSpec *s)
{
	int per = cg_target_smem_max(t) / (cg_gemm_smem(s) + 1024), sms = cg_target_sms(t);

	if (s->f8.group == 0 || s->groups == 0 || s->gather || s->sched != CG_SCHED_TILES ||
	    s->split_k > 1 || s->K / s->bk > F8_PERSISTENT_KT || sms <= 0)
		return;
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = sms * (per < 1 ? 1 : per);
}

/*
 * Three consumer warpgroups (192-row tiles) on a grouped GEMM with A not
 * gathered and short tiles (at most PINGPONG_KT k-tiles: DeepSeek-V3's down
 * projection, 32) run persistent, one CTA an SM (512 threads x 128
 * registers fill an SM's register file, so a tiled launch runs one CTA an
 * SM too, each filling its pipeline and building the expert table before
 * its one tile and leaving the tensor cores idle during its epilogue):
 * the producer loads the next tile's stages while the consumers store this
 * one's, as the ping-pong kernel this tile replaces did (its persistent
 * schedule was part of that 2966 -> 2691 us) and as FP8's down GEMM does
 * (f8_persistent).  Not measured alone yet: bench/gemm dsdn_ws_192x128_s5_t
 * against _p.
 */
static void
stacked_persistent(const CgTarget *t, GemmSpec *s)
{
	if (consumer_wgs(s) != 3 || s->groups == 0 || s->gather || s->sched != CG_SCHED_TILES ||
	    s->K / s->bk > PINGPONG_KT || cg_target_sms(t) <= 0)
		return;
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = cg_target_sms(t);
}

/* FP8's gate|up on this mainloop by default (1; --debug=f8-cp keeps the cp.async mainloop) or never (0:
 * until the GPU's A/B says it wins; the flip is this line) */
enum { F8_WS_DEFAULT = 1 };	/* session 28's A/B: the FP8 layer 7111 -> 6803 us */

static int
f8_ws(const CgModule *m)
{
	return F8_WS_DEFAULT && !(cg_module_debug(m) & DBG_F8_CP);
}

/*
 * A persistent grouped plan sized by the cp.async mainloop's shared memory
 * (program.c's mid_persistent and prefill_persistent: DeepSeek-V3's down at
 * T = 256, 264 CTAs, 2 an SM) holds fewer an SM on this mainloop's stages
 * (1: 152 KB), so the CTAs past those the SMs hold at once would run as a
 * second wave after the first: as many as they hold.  (Ping-pong, clusters,
 * FP8 and the stacked tiles size their own.)
 */
static void
resident_ctas(const CgModule *m, GemmSpec *s)
{
	const CgTarget *t = cg_module_target(m);
	int per = cg_target_smem_max(t) / (cg_gemm_smem(s) + 1024), sms = cg_target_sms(t);

	if (s->groups > 0 && s->sched == CG_SCHED_PERSISTENT && s->ws_mode != CG_WS_PINGPONG && s->f8.group == 0 &&
	    csize(s) == 1 && sms > 0 && s->ctas > sms * (per < 1 ? 1 : per))
		s->ctas = sms * (per < 1 ? 1 : per);
}

/*
 * Grouped clusters sharing B (the default on sm_90a, program.c GROUPED_C2_DEFAULT; --debug=grouped-c2):
 * bf16/f16 grouped GEMMs of 64+ rows a tile with B [N,K] (the MoE gate|up,
 * gathered A on this mainloop then, and the down projection) run in
 * clusters of 2 sharing B (GemmSpec.cluster_b, persistent over
 * CG_CLUSTER_CTAS): a pair of an expert's row tiles reads each B tile from
 * L2 once (DeepSeek-V3 at T = 4096, 128 +- 11 rows an expert: its expert
 * GEMMs are L2-bound, ncu of session 27: gate|up L2 88%, down 84%, and half
 * the experts have a second row tile that read B's tile again).  Where the
 * planner asks (s->cluster_b without a cluster: program.c's cluster_pays,
 * per T bucket, with the flag; on the emulator with the flag too).  The same pairs
 * run without a cluster (cluster_b, cluster 0: each CTA loads both halves of B's tile),
 * which the tests compare the clusters with bit for bit.  FP8 x FP8 (on this mainloop, f8_ws; the default
 * on cluster targets since session 30, --debug=f8-c2 on the emulator): the gate|up's interleaved B in half boxes (load_b_interleaved),
 * each CTA staging its own tile's scales.
 */
enum { F8_C2_DEFAULT = 1 };	/* on cluster targets without --debug=f8-c2 (session 30: DeepSeek-V3 FP8 T=4096 0.95x, same bits) */

enum { F8_ACC2_DEFAULT = 1 };	/* two accumulator sets (--debug=f8-acc1: one); session 35, H200: DeepSeek-V3 FP8 T=4096 0.943x, same bits */
enum { F8_L2PF_DEFAULT = 0 };	/* --debug=f8-l2pf: B into L2 a ring ahead (session 32, H200: 1.06x slower at T = 4096) */

static int
grouped_c2(const CgModule *m, const GemmSpec *s)
{
	const CgTarget *t = cg_module_target(m);
	int f8c2 = (cg_module_debug(m) & DBG_F8_C2) || (F8_C2_DEFAULT && cg_target_has(t, CG_CLUSTER));
	int f8 = s->f8.group > 0 && f8c2 && f8_ws(m);

	return s->cluster_b && s->cluster != 2 && s->groups > 0 &&
	       s->bm >= 64 && (s->f8.group == 0 || f8) &&
	       s->bq.group == 0 && (s->a_dt == DT_BF16 || s->a_dt == DT_F16 || f8) && s->b_dt == s->a_dt &&
	       s->b_layout == CG_B_NK && s->split_k <= 1 && s->sched != CG_SCHED_STREAM &&
	       (cg_target_has(t, CG_CLUSTER) || cg_target_is_emu(t));
}

/* w as clusters of 2 sharing B (the emulator runs them too), persistent,
 * where that passes with the most stages (at least `least`); else 0, w as it was. */
static int
cluster_b_plan(const CgTarget *t, GemmSpec *w, int least)
{
	GemmSpec c = *w;

	c.cluster = 2;
	c.cluster_b = 1;
	c.sched = CG_SCHED_PERSISTENT;
	c.ctas = CG_CLUSTER_CTAS;
	c.snake = 0;
	if (!most_stages(t, &c, least))
		return 0;
	*w = c;
	return 1;
}

/* --debug=ws-tma-store's one buffer on sm_90a without the flag (the flag: the emulator too); the default
 * since session 31's H200 A/B: dense_up M = 4096 745.6 -> 684.4 us persistent, M = 1024 0.97x, same bits */
enum { TMA_STORE_DEFAULT = 1 };

/* Dense clusters (--debug=dense-c2, CG_DENSE_C2_DEFAULT; issue 12): a cluster's CTAs store C by TMA
 * (before: from registers, session 27's clusters 787 against 751 us) and dense prefill plans take
 * clusters of 2 sharing B (dense_c2_plan). */
int
cg_gemm_dense_c2_on(const CgModule *m)
{
	return (cg_module_debug(m) & DBG_DENSE_C2) || CG_DENSE_C2_DEFAULT;
}

/*
 * The dense plan --debug=dense-c2 turns into clusters: 256x128 over two
 * 128x128 warpgroups (the heuristic's prefill tile; dense_c2_plan makes it
 * 128x256, N a multiple of 256), bf16/f16 with B [N,K], A by TMA, not split
 * or streamed.  Other tiles (DeepSeek-V3's 128x64 router) keep their plan.
 */
int
cg_gemm_dense_c2_tile(const GemmSpec *s)
{
	return s->groups == 0 && s->bm == 256 && s->bn == 128 && s->warps_m * s->warps_n == 8 && !s->wg_wide &&
	       s->N % 256 == 0 && !s->gather && s->f8.group == 0 && s->bq.group == 0 &&
	       (s->a_dt == DT_BF16 || s->a_dt == DT_F16) && s->b_dt == s->a_dt && s->b_layout == CG_B_NK &&
	       s->split_k <= 1 && s->sched != CG_SCHED_STREAM;
}

/* The emulator runs clusters since session 40, but its plans take the dense ones with the flag only
 * (like grouped-c2's; or --debug=dense-c4's), so that its other tests keep their plans. */
int
cg_gemm_dense_c2_here(const CgModule *m)
{
	const CgTarget *t = cg_module_target(m);

	return cg_gemm_dense_c2_on(m) &&
	       (cg_target_has(t, CG_CLUSTER) ||
		(cg_target_is_emu(t) && (cg_module_debug(m) & (DBG_DENSE_C2 | DBG_DENSE_C4))));
}

/* That plan asking for clusters sharing B (s->cluster_b: program.c's
 * request, per T bucket) where cg_gemm_dense_c2_here. */
static int
dense_c2_for(const CgModule *m, const GemmSpec *s)
{
	return s->cluster_b && s->cluster != 2 && cg_gemm_dense_c2_here(m) && cg_gemm_dense_c2_tile(s);
}

/*
 * w (cooperative, cg_gemm_dense_c2_tile) as dense clusters of 2 sharing B:
 * the 256x128 plan over two 128x128 warpgroups becomes 128x256 (cuBLAS's shape for the dense
 * up-projection on the H200: 128 rows a CTA, the pair's 2 x 128 rows sharing
 * each B tile, half of it loaded by each CTA), persistent over
 * CG_CLUSTER_CTAS, C by TMA stores; 0 where that does not pass.  With
 * --debug=dense-c4 the same tiles in clusters of 4 as 2x2 sharing A and B
 * (GemmSpec.cluster = 4: 8 KB of A and 16 KB of B from L2 a CTA's 128x256x64
 * step, where the pair reads 16 + 16; the runtime launches as many clusters
 * of 4 as the device holds, 31 or 32 of the 33), where that passes.
 */
static int
dense_c2_plan(const CgModule *m, GemmSpec *w, int least)
{
	const CgTarget *t = cg_module_target(m);
	GemmSpec c = *w, q;

	c.bm = 128;
	c.bn = 256;
	c.warps_m = 2;
	c.warps_n = 4;
	if (!cluster_b_plan(t, &c, least))
		return 0;
	q = c;
	q.cluster = 4;
	q.cluster_b = 0;
	if ((cg_module_debug(m) & DBG_DENSE_C4) && most_stages(t, &q, least))
		c = q;
	*w = c;
	return 1;
}

/* C's stores by TMA (a tuning table's .tsN, or --debug=ws-tma-store's one buffer) where the
 * output is a plain tile (plain_tile); 0: from registers. */
static int
tma_store_for(const CgModule *m, const GemmSpec *s)
{
	if (!plain_tile(s) || (csize(s) > 1 && !cg_gemm_dense_c2_on(m)))
		return 0;
	return s->tma_store > 0 ? s->tma_store
	       : (cg_module_debug(m) & DBG_WS_TMA_STORE) || (TMA_STORE_DEFAULT && !cg_target_is_emu(cg_module_target(m)));
}

/* 64-row warpgroup tiles up to 256 columns (GemmSpec.wg_wide): a table's .wide; --debug=wg-wide for
 * dense bf16/f16; --debug=grouped-wide for grouped bf16/f16 with B [N,K] in tiles narrower than 256
 * columns (gpt-oss-20b's 128x192 as two 64x192, one m64n192k16 a k-step where two m64n96k16 read B
 * twice: its gate|up 1143.9 -> 1040.1 us on the H200, session 33; 128x256 grouped tiles were no
 * faster as two 64x256, DeepSeek-V3 equal, Qwen3-30B-A3B's block 1.056x slower, so they stay) */
enum { GROUPED_WIDE_DEFAULT = 1 };	/* the default since session 33 (gpt-oss-20b T = 4096 0.983x, skewed 0.940x, the same bits) */

static int
wide_for(const CgModule *m, const GemmSpec *s)
{
	DbgFlags dbg = cg_module_debug(m);
	int grouped = (dbg & DBG_GROUPED_WIDE) || (GROUPED_WIDE_DEFAULT && !cg_target_is_emu(cg_module_target(m)));

	if (s->wg_wide)
		return 1;
	if (s->f8.group > 0)
		return 0;
	return s->groups > 0 ? grouped && s->b_layout == CG_B_NK && s->bn < 256 : (dbg & DBG_WG_WIDE) != 0;
}

/* --debug=tma-gather without the flag: gathered bf16/f16 A by one-row TMA boxes.  Off: the same bits, but
 * 3-6x slower on the H200 (session 35: Mixtral's gate|up 3359 -> 14936 us; TMA-issue bound, a box of one
 * 128-byte row costs what a box of 128 rows does) */
enum { TMA_GATHER_DEFAULT = 0 };

/* Gathered bf16/f16 A by one-row TMA boxes (GemmSpec.gather_tma) where this mainloop takes gathered A:
 * the flag, or the default on a GPU. */
static int
gather_tma_asked(const CgModule *m, const GemmSpec *s)
{
	int on = (cg_module_debug(m) & DBG_TMA_GATHER) || (TMA_GATHER_DEFAULT && !cg_target_is_emu(cg_module_target(m)));

	return on && s->gather && s->f8.group == 0 && s->bm % 32 == 0 && s->bm / 32 <= MAX_ROW_BOXES;
}

/* Gathered A on this mainloop: asked for (--debug=ws-gather), or FP8's (f8_ws).  (Clusters sharing B,
 * grouped_c2, take it anyway; --debug=tma-gather changes how, not where.) */
static int
gather_asked(const CgModule *m, const GemmSpec *s)
{
	return (cg_module_debug(m) & DBG_WS_GATHER) || (s->f8.group > 0 && f8_ws(m));
}

/* FP8's gate|up (lower-moe's interleaved B, the output quantised per
 * group) on this mainloop: f8_ws; every other GEMM: yes. */
static int
gateup_asked(const CgModule *m, const GemmSpec *s)
{
	return !(s->f8.b_interleave || s->quant.kind == CG_QUANT_GROUP) || f8_ws(m);
}

int
cg_gemm_ws_for(const CgModule *m, GemmSpec *s)
{
	const CgTarget *t = cg_module_target(m);
	GemmSpec w = *s;
	int c2 = grouped_c2(m, s);

	if (w.cluster != 2)	/* a clusters' request: cluster_b_plan's to take (the plans below have none) */
		w.cluster_b = 0;
	if (!cg_target_has(t, CG_WGMMA | CG_TMA | CG_SETMAXNREG) &&
	    !(cg_target_is_emu(t) && cg_module_debug(m) & DBG_EMU_WS))
		return 0;
	/* Gathered A: correct on the H200 since the register split was fixed,
	 * but 7% slower than the cp.async wgmma mainloop there (Mixtral's
	 * up-projection at T=4096: 3431 against 3208 us, 2026-12-02; FP8
	 * 6081 against 4919 us): taken only when asked for (or for clusters,
	 * which need B's TMA boxes). */
	if ((s->gather && !gather_asked(m, s) && !c2 && s->cluster != 2) || !gateup_asked(m, s))
		return 0;
	w.mainloop = CG_MAINLOOP_WS;
	w.ws_mode = CG_WS_COOPERATIVE;	/* a ping-pong request is taken here or dropped */
	w.gather_tma = gather_tma_asked(m, s);	/* clusters sharing B too: each CTA loads its own rows */
	w.f8.l2_ahead = s->f8.group > 0 && (F8_L2PF_DEFAULT || (cg_module_debug(m) & DBG_F8_L2PF));
	w.f8.acc2 = s->f8.group > 0 && s->f8.whole &&
		    (s->f8.acc2 || (F8_ACC2_DEFAULT && !(cg_module_debug(m) & DBG_F8_ACC1)));
	w.tma_store = tma_store_for(m, s);
	/* wide warpgroup tiles (A/B on the GPU); a dense 256x128 plan (two 128x128
	 * warpgroups) becomes 128x256 */
	w.wg_wide = wide_for(m, s);
	if (w.wg_wide && s->groups == 0 && w.bm == 256 && w.bn == 128 && w.warps_m * w.warps_n == 8 && w.N % 256 == 0) {
		w.bm = 128;
		w.bn = 256;
		w.warps_m = 2;
		w.warps_n = 4;
	}
	if ((cg_module_debug(m) & DBG_WS_PINGPONG) || s->ws_mode == CG_WS_PINGPONG) {
		GemmSpec p = w;
		/* grouped ping-pong keeps 128x128 a warpgroup unless a table asks: 64x256 would
		 * stream a B tile twice as wide for half the rows of an expert's tile */
		p.wg_wide = w.wg_wide && (s->groups == 0 || s->wg_wide);
		pingpong_plan(&p, cg_gemm_f8_pingpong(m, s));
		if (p.ws_mode == CG_WS_PINGPONG && ((c2 && cluster_b_plan(t, &p, s->stages)) ||
						    most_stages(t, &p, s->stages))) {
			*s = p;
			return 1;
		}
	}
	if (c2 && cluster_b_plan(t, &w, s->stages)) {
		*s = w;
		return 1;
	}
	if (dense_c2_for(m, s) && dense_c2_plan(m, &w, s->stages)) {
		*s = w;
		return 1;
	}
	if (s->gather && !gather_asked(m, s) && s->cluster != 2)
		return 0;
	if (!most_stages(t, &w, s->stages) && !(w.tma_store && (w.tma_store = 0, most_stages(t, &w, s->stages))))
		return 0;
	/* the flag's TMA stores pay where they drain under the next tile's k-tiles (H200, session 31,
	 * dense_up M=4096: tiles 1.035x, persistent 0.918x; M=1024 ping-pong 0.973x): a cooperative
	 * tiled plan of two or three consumer warpgroups goes persistent, a CTA an SM (a table's .tsN
	 * keeps its schedule) */
	if (w.tma_store && !s->tma_store && w.sched == CG_SCHED_TILES && consumer_wgs(&w) >= 2) {
		w.sched = CG_SCHED_PERSISTENT;
		w.ctas = cg_target_sms(t) > 0 ? cg_target_sms(t) : CG_CLUSTER_CTAS;
	}
	/* the default (not the flag, not a table) keeps register stores where a CTA runs one tile (one
	 * consumer warpgroup: the decode tiles, M = 64 1.009x): nothing drains under the next tile */
	if (w.tma_store && !s->tma_store && w.sched == CG_SCHED_TILES && !(cg_module_debug(m) & DBG_WS_TMA_STORE)) {
		w.tma_store = 0;
		if (!most_stages(t, &w, s->stages))
			return 0;
	}
	f8_persistent(t, &w);
	stacked_persistent(t, &w);
	resident_ctas(m, &w);
	/* FP8 gathered (the default: the gate|up, tiled): each of DeepSeek-V3's
	 * 12224 CTAs would rank the 256 experts (O(E^2)) for its one tile */
	if (w.f8.group > 0 && w.gather && w.sched == CG_SCHED_TILES)
		w.no_rank = 1;
	*s = w;
	return 1;
}

/* ---- the tensor maps ---- */

/*
 * B's map through lower-moe's gate|up interleave (FP8, B [N,K]): tile row
 * 2j + h is the expert's B row h N/2 + j, so a box (128 bytes, 2, bn/2)
 * over (k, half, row), strides N/2 rows and one row, writes the tile's rows
 * in order; the experts' rows are one run (dims[2] ends at the last
 * expert's gate half; gemm_f8_check: N % bn == 0 keeps a box inside one).
 */
static void
interleaved_bmap(const GemmSpec *s, int esz, CgTmap *b)
{
	int64_t rows = s->N / 2 + (s->groups > 0 ? (s->groups - 1) * (s->b_group_stride / s->ldb) : 0);

	*b = (CgTmap){"B", s->b_dt, 3, {CG_EXPR_INT(s->K), CG_EXPR_INT(2), CG_EXPR_INT(rows)},
		      {s->N / 2 * s->ldb * esz, s->ldb * esz}, {128 / esz, 2, b_box_rows(s) / 2}, 128};
}

/* The kernel's maps in parameter order (A_map unless gathered by cp.async, A_rows_map, B_map); returns their count. */
static int
tmaps(const G *g, CgTmap *m)
{
	const GemmSpec *s = &g->k.s;
	int esz = g->eb, row = 128 / esz, grouped = s->groups > 0, n = 0;	/* a box row: 128 bytes of K */
	CgTmap a = {"A", s->a_dt, 2, {{0, gemm_a_cols(s), 0}, {s->m_per_t, 0, 0}}, {s->lda * esz, 0},
		    {row, a_box_rows(s), 1}, 128};	/* clusters: each CTA's half, multicast */

	if (s->gather_tma) {	/* x [rows of the gather index / gather_div, K]: boxes of one row */
		a.dims[1] = (CgExpr){s->m_per_t, 0, s->gather_div > 1 ? s->gather_div : 0};
		a.box[1] = 1;
	}
	if (!gemm_a_cp_async(s))
		m[n++] = a;
	if (gemm_a_rows_map(s)) {
		a.box[1] = live_box(s);
		m[n++] = a;
	}
	if (s->b_layout == CG_B_NK)
		m[n++] = (CgTmap){"B", s->b_dt, 2 + grouped, {CG_EXPR_INT(s->K), CG_EXPR_INT(s->N), CG_EXPR_INT(s->groups)},
				  {s->ldb * esz, s->b_group_stride * esz}, {row, b_box_rows(s), 1}, 128};
	else
		m[n++] = (CgTmap){"B", s->b_dt, 2 + grouped, {CG_EXPR_INT(s->N), CG_EXPR_INT(s->K), CG_EXPR_INT(s->groups)},
				  {s->ldb * esz, s->b_group_stride * esz}, {64, s->bk, 1}, 128};
	if (s->f8.b_interleave)
		interleaved_bmap(s, esz, &m[n - 1]);
	if (s->tma_store)	/* C [M, N]: boxes of 64 rows of 128 bytes (tma_store_check) */
		m[n++] = (CgTmap){"C", s->c_dt, 2, {CG_EXPR_INT(g->k.width), {s->m_per_t, 0, 0}},
				  {s->ldc * esize(s->c_dt), 0}, {128 / esize(s->c_dt), OUT_ROWS, 1}, 128};
	return n;
}

/* ---- C through shared memory by TMA (GemmSpec.tma_store; k_gemm.c's gemm_epilogue calls these) ---- */

/*
 * Each consumer warpgroup has o_nbuf (GemmSpec.tma_store: 1, or 2 where
 * its tile has two 64-row blocks) buffers of one fragment row block: 64 rows
 * of its tile's wtn columns, as wtn/64 boxes of [64 rows][128 bytes],
 * 128-byte swizzled (chunk c of row r at c ^ (r % 8): the 8 rows a warp's
 * store touches hit 8 different chunks, no bank conflicts), which is what
 * the C_map's box reads.  Per row block: [when it starts over at the first
 * buffer: the warpgroup's storer (its first thread) waits until its stores
 * have read the buffers, a named barrier (OUT_BAR + c, 128 threads)], the
 * threads write their results into the block's buffer, each fences
 * (fence.proxy.async: generic writes before an async-proxy read), a named
 * barrier, and the storer issues the boxes and commits them as a bulk
 * group.  The wait for the tile's last block is in the next tile's first
 * (persistent: after its mainloop) or before the CTA leaves.  Rows past M
 * are clipped by the TMA (the map's rows are M); they are never written.
 */
static LLVMValueRef
out_wg(G *g)
{
	return cg_addi(g->k.f, cg_shr(g->k.f, g->k.warp, 2), -1);
}

/* The buffer of row block mi: its warpgroup's (mi % o_nbuf)-th. */
static LLVMValueRef
out_buf(G *g, int mi)
{
	CgFn *f = g->k.f;
	int64_t at = g->o_off + (int64_t)(mi % g->o_nbuf) * (g->o_bytes / g->o_nbuf);

	return cg_add(f, g->wg.base, cg_addi(f, cg_muli(f, out_wg(g), g->o_bytes), at));
}

static LLVMValueRef
out_storer(G *g)
{
	CgFn *f = g->k.f;

	return LLVMBuildICmp(f->B, LLVMIntEQ, cg_and(f, g->k.tid, 127), cg_i32(f, 0), "");
}

void
gemm_ostage_begin(G *g, int mi)
{
	CgFn *f = g->k.f;
	CgIf c;

	if (mi % g->o_nbuf)	/* a buffer of this tile's not yet used */
		return;
	cg_if(f, &c, out_storer(g));
	cg_bulk_wait_read(f, 0);
	cg_endif(f, &c);
	cg_bar_sync(f, cg_addi(f, out_wg(g), OUT_BAR), 128);
}

void
gemm_ostage_put(G *g, int mi, int h, int j, LLVMValueRef *v)
{
	CgFn *f = g->k.f;
	DType dt = g->k.s.c_dt;
	LLVMValueRef r = cg_add(f, cg_shl(f, cg_and(f, g->k.warp, 3), 4), cg_addi(f, cg_shr(f, g->k.lane, 2), 8 * h));
	LLVMValueRef o = cg_add(f, out_buf(g, mi), gemm_kmajor_off(f, r, cg_i32(f, j), OUT_ROWS));

	o = cg_add(f, o, cg_shl(f, cg_and(f, g->k.lane, 3), 2));
	cg_sstore(f, cg_pack16x2(f, cg_from_f32(f, v[0], dt), cg_from_f32(f, v[1], dt)), cg_sptr(f, o), 4);
}

void
gemm_ostage_flush(G *g, int mi)
{
	GemmCore *k = &g->k;
	CgFn *f = k->f;
	LLVMValueRef r0, c[2];
	CgIf s;

	gemm_fence_proxy_async(f);
	cg_bar_sync(f, cg_addi(f, out_wg(g), OUT_BAR), 128);
	/* the block's first row: the warpgroup's (wm0 less the warp's 16 rows) + 64 mi */
	r0 = cg_add(f, k->row0, cg_addi(f, cg_sub(f, g->wm0, cg_shl(f, cg_and(f, k->warp, 3), 4)), OUT_ROWS * mi));
	cg_if(f, &s, LLVMBuildAnd(f->B, out_storer(g), cg_lt(f, r0, k->rend), ""));
	for (int b = 0; b < g->wtn / 64; b++) {
		c[0] = cg_add(f, k->n0, cg_addi(f, g->wn0, 64 * b));
		c[1] = r0;
		cg_tma_store(f, k->cmap, cg_add(f, out_buf(g, mi), cg_i32(f, b * OUT_ROWS * 128)), 2, c);
	}
	cg_bulk_commit(f);
	cg_endif(f, &s);
}

void
gemm_ostage_end(G *g)
{
	CgIf c;

	cg_if(g->k.f, &c, out_storer(g));
	cg_bulk_wait_read(g->k.f, 0);
	cg_endif(g->k.f, &c);
}

/* ---- per thread ---- */

/* The builder's state on top of G's. */
typedef struct W W;
struct W {
	G g;			/* first: callbacks cast back */
	LLVMValueRef bar;	/* i32: shared offset of full[0]; empty[s] is 8 S bytes on */
	LLVMValueRef it;	/* var i32: k-tiles so far (the ring's position) */
	LLVMValueRef da0, db0;	/* consumers: descriptors of stage 0 */
	LLVMValueRef cwg;	/* consumers: the warpgroup, 0 or 1 (i32) */
	int nfull;		/* arrivals on full[s]: 1, + the producers' with gathered A or FP8 */
	int all;		/* the whole producer warpgroup runs: gathered A by cp.async, FP8 scales */
	int lanes;		/* warp 0's 32 lanes run (gathered A by one-row TMA boxes, GemmSpec.gather_tma) */
	LLVMValueRef trow[MAX_ROW_BOXES];	/* ... a lane's rows of the tile in x (i32), lane + 32 i */
	LLVMValueRef crank;	/* clusters: this CTA's rank in its cluster (i32) */
	LLVMValueRef amask, bmask;	/* 2x2 (quad): the ranks on this CTA's row tile (A's multicast), column tile (B's) */
	int l2pf;		/* producer: B's boxes go to L2 only (b_box; GemmSpec.f8.l2_ahead) */
	/* GemmSpec.f8.acc2: the second accumulator set (vars; emu: its array), swapped
	 * with g.acc / g.wg.buf by acc2_swap */
	LLVMValueRef acc2[MAXF][MAXF][4];
	LLVMValueRef buf2;
};

static LLVMValueRef
full_bar(W *w, LLVMValueRef st)
{
	return cg_add(w->g.k.f, w->bar, cg_shl(w->g.k.f, st, 3));
}

static LLVMValueRef
empty_bar(W *w, LLVMValueRef st)
{
	return cg_addi(w->g.k.f, full_bar(w, st), 8 * w->g.k.s.stages);
}

/* The 2x2's (quad) partners of this CTA (rank r, i32): on its row tile the
 * other column tile, r ^ 2, which shares A's tile; on its column tile the
 * other row tile, r ^ 1, which shares B's. */
static LLVMValueRef
row_partner(W *w)
{
	return LLVMBuildXor(w->g.k.f->B, w->crank, cg_i32(w->g.k.f, 2), "");
}

static LLVMValueRef
col_partner(W *w)
{
	return LLVMBuildXor(w->g.k.f->B, w->crank, cg_i32(w->g.k.f, 1), "");
}

/* The multicast mask of this CTA and rank p (i32): bits r and p. */
static LLVMValueRef
pair_mask(W *w, LLVMValueRef p)
{
	CgFn *f = w->g.k.f;
	LLVMValueRef one = cg_i32(f, 1);

	return LLVMBuildOr(f->B, LLVMBuildShl(f->B, one, w->crank, ""), LLVMBuildShl(f->B, one, p, ""), "");
}

/* After the expert table: barriers and roles; the consumers' descriptors. */
static void
setup(W *w)
{
	G *g = &w->g;
	GemmCore *k = &g->k;
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	int S = s->stages, cw = s->warps_m * s->warps_n;
	LLVMValueRef cwarp, cwg;
	CgIf c;

	gemm_aligned_smem(f, &g->wg.base, &g->wg.addr);
	w->bar = cg_i32(f, 1024 + S * g->wg.stage + consumer_wgs(s) * g->o_bytes);
	w->nfull = w->all ? 1 + PRODUCERS : 1;
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, k->tid, cg_i32(f, 0), ""));
	for (int i = 0; i < S; i++) {
		cg_mbar_init(f, full_bar(w, cg_i32(f, i)), w->nfull);
		cg_mbar_init(f, empty_bar(w, cg_i32(f, i)), cw * writers(s));
	}
	cg_mbar_init_fence(f);
	cg_endif(f, &c);
	if (csize(s) > 1) {	/* the peers' barriers are initialised before anything reaches them */
		cg_cluster_check(f, csize(s));
		w->crank = cg_cluster_rank(f);
		if (quad(s)) {
			w->amask = pair_mask(w, s->quad_fault & CG_QUAD_NO_A_PARTNER ? w->crank : row_partner(w));
			w->bmask = pair_mask(w, s->quad_fault & CG_QUAD_NO_B_PARTNER ? w->crank : col_partner(w));
		}
		cg_cluster_sync(f);
	} else {
		cg_barrier(f);
	}
	/* consumers: warpgroup tiles as the wgmma mainloop's, counted from warp 4
	 * (ping-pong: each warpgroup's tile is whole, at 0) */
	cwarp = cg_addi(f, k->warp, -4);
	w->cwg = cg_shr(f, cwarp, 2);
	cwg = s->ws_mode == CG_WS_PINGPONG ? cg_i32(f, 0) : w->cwg;
	g->wm0 = cg_add(f, cg_muli(f, cg_udiv(f, cwg, cg_i32(f, g->wg.wg_n)), g->wtm),
			cg_shl(f, cg_and(f, cwarp, 3), 4));
	g->wn0 = cg_muli(f, cg_urem(f, cwg, cg_i32(f, g->wg.wg_n)), g->wtn);
	w->it = cg_var(f, f->ti32, cg_i32(f, 0));
	for (int i = 0; i < g->a_n; i++) {	/* gathered A: producer thread tid's chunks */
		LLVMValueRef ch = cg_addi(f, k->tid, (int64_t)i * PRODUCERS);
		g->a_row[i] = cg_udiv(f, ch, cg_i32(f, s->bk * g->eb / 16));
		g->a_kc[i] = cg_urem(f, ch, cg_i32(f, s->bk * g->eb / 16));
		g->a_soff[i] = gemm_kmajor_off(f, g->a_row[i], g->a_kc[i], s->bm);
	}
}

/* Ring position it (i32): stage it % S and the parity of it / S. */
static void
ring(W *w, LLVMValueRef it, LLVMValueRef *st, LLVMValueRef *par)
{
	CgFn *f = w->g.k.f;
	int S = w->g.k.s.stages;

	*st = cg_urem(f, it, cg_i32(f, S));
	*par = cg_and(f, cg_udiv(f, it, cg_i32(f, S)), 1);
}

/* Gathered A: this thread's chunks of k-tile kt (i32) into the stage at
 * sbase by cp.async. */
static void
gather_a(W *w, LLVMValueRef sbase, LLVMValueRef kt)
{
	G *g = &w->g;
	CgFn *f = g->k.f;
	LLVMValueRef adv = cg_muli(f, cg_sext64(f, kt), (int64_t)g->k.s.bk * g->eb);

	for (int i = 0; i < g->a_n; i++) {
		CgIf c;
		int guard = (i + 1) * PRODUCERS > g->a_chunks;
		if (guard)
			cg_if(f, &c, cg_lt(f, cg_addi(f, g->k.tid, (int64_t)i * PRODUCERS), cg_i32(f, g->a_chunks)));
		if (g->a_live[i])	/* rows past the tile's: zeros, no read */
			cg_cp_async16_zfill(f, cg_sptr(f, cg_add(f, sbase, g->a_soff[i])), cg_gep(f, g->a_src[i], adv, 1),
					    g->a_live[i]);
		else
			cg_cp_async16(f, cg_sptr(f, cg_add(f, sbase, g->a_soff[i])), cg_gep(f, g->a_src[i], adv, 1));
		if (guard)
			cg_endif(f, &c);
	}
}

/* The boxes of A (live_box rows each) a tile loads (gemm_live_rows): those
 * with a row of the tile, min(bm / R, ceil((rend - row0) / R)) (i32). */
static LLVMValueRef
live_boxes(GemmCore *k)
{
	CgFn *f = k->f;
	int R = live_box(&k->s);
	LLVMValueRef n = cg_udiv(f, cg_addi(f, cg_sub(f, k->rend, k->row0), R - 1), cg_i32(f, R));

	return cg_min(f, n, cg_i32(f, k->s.bm / R));
}

/*
 * With A_rows_map (gemm_a_rows_map: live rows in 16-row boxes, A by TMA), a
 * tile of at most FEW_BOXES x 16 rows (i1) loads its 16-row boxes with rows;
 * the others one box of the tile's bm rows.  Session 27's lean down
 * projection loaded every tile in 16-row boxes, eight TMA copies of 2 KB
 * for each 64-k block of a whole 128-row tile where one of 16 KB did, and
 * measured 11% slower on DeepSeek-V3 (2668 -> 2968 us) though it read
 * fewer bytes: the short second tiles (~10 rows) are what live rows are
 * for, one box of 16; a tile of 65..127 rows reads its last rows past the
 * expert as before.
 */
enum { FEW_BOXES = 4 };

static LLVMValueRef
few_rows(GemmCore *k)
{
	return cg_lt(k->f, live_boxes(k), cg_i32(k->f, FEW_BOXES + 1));
}

/* The rows of A a tile's stage brings by TMA under gemm_live_rows (i32). */
static LLVMValueRef
live_a_rows(GemmCore *k)
{
	CgFn *f = k->f;
	LLVMValueRef n = cg_muli(f, live_boxes(k), live_box(&k->s));

	return gemm_a_rows_map(&k->s) ? cg_select(f, few_rows(k), n, cg_i32(f, k->s.bm)) : n;
}

/* A's tile rows from k-column k0 (i32) into dst, here: A_map's box, or its
 * two boxes where the box is half the tile (pair_a). */
static void
a_tile(W *w, LLVMValueRef dst, LLVMValueRef k0, LLVMValueRef st)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	int nb = pair_a(&k->s) ? 2 : 1, R = k->s.bm / nb;

	for (int b = 0; b < nb; b++) {
		LLVMValueRef c[2] = {k0, cg_addi(f, k->row0, R * b)};
		cg_tma_load(f, k->amap, cg_addi(f, dst, R * 128 * b), full_bar(w, st), 2, c);
	}
}

/* Clusters sharing A's tile: this CTA's half of its rows multicast to both
 * CTAs (without a cluster, the grouped pairs alone: both halves here); in
 * a 2x2 (quad) half r >> 1 to this CTA and its row partner. */
static void
a_shared(W *w, LLVMValueRef dst, LLVMValueRef k0, LLVMValueRef st)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	int half = k->s.bm / 2;
	LLVMValueRef c[2], h = quad(&k->s) ? cg_shr(f, w->crank, 1) : w->crank;

	if (k->s.cluster != 2 && !quad(&k->s)) {
		a_tile(w, dst, k0, st);
		return;
	}
	c[0] = k0;
	c[1] = cg_add(f, k->row0, cg_muli(f, h, half));
	dst = cg_add(f, dst, cg_muli(f, h, half * 128));
	if (quad(&k->s))
		cg_tma_load_multicast_to(f, k->amap, dst, full_bar(w, st), 2, c, w->amask);
	else
		cg_tma_load_multicast(f, k->amap, dst, full_bar(w, st), 2, c, 3);
}

/* Live rows (gemm_live_rows): the boxes of live_box rows with a row of the
 * tile; with A_rows_map, a tile of more than FEW_BOXES of them its whole rows. */
static void
a_live(W *w, LLVMValueRef dst, LLVMValueRef k0, LLVMValueRef st)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	LLVMValueRef n = live_boxes(k), c[2] = {k0, k->row0};
	int R = live_box(&k->s), nb = k->s.bm / R, map = k->amap, rows = gemm_a_rows_map(&k->s);
	CgIf few;

	if (rows) {	/* a whole tile (or most of one): its bm rows */
		cg_if(f, &few, LLVMBuildNot(f->B, few_rows(k), ""));
		a_tile(w, dst, k0, st);
		cg_else(f, &few);
		nb = FEW_BOXES < nb ? FEW_BOXES : nb;
		map = k->arows;
	}
	for (int b = 0; b < nb; b++) {
		CgIf l;
		cg_if(f, &l, cg_lt(f, cg_i32(f, b), n));
		c[1] = cg_addi(f, k->row0, R * b);
		cg_tma_load(f, map, cg_addi(f, dst, R * 128 * b), full_bar(w, st), 2, c);
		cg_endif(f, &l);
	}
	if (rows)
		cg_endif(f, &few);
}

/* A's box at k-column k0 (i32) into dst: the tile's rows (live rows: those
 * with rows of the tile), or with clusters sharing A this CTA's half of
 * them, multicast to both CTAs of the cluster.  Grouped pairs (pair_a): a
 * pair sharing B loads its own tiles, a pair of column tiles shares A. */
static void
load_a(W *w, LLVMValueRef dst, LLVMValueRef k0, LLVMValueRef st)
{
	GemmCore *k = &w->g.k;
	const GemmSpec *s = &k->s;
	CgIf c;

	if (pair_a(s)) {
		cg_if(k->f, &c, k->bshare);
		(gemm_live_rows(s) ? a_live : a_tile)(w, dst, k0, st);
		cg_else(k->f, &c);
		a_shared(w, dst, k0, st);
		cg_endif(k->f, &c);
	} else if (gemm_live_rows(s)) {
		a_live(w, dst, k0, st);
	} else if ((s->cluster == 2 && !s->cluster_b) || quad(s)) {
		a_shared(w, dst, k0, st);
	} else {
		a_tile(w, dst, k0, st);
	}
}

/* The bytes the tensor copies of a stage bring (expect_tx): B's, and A's
 * boxes unless gathered (only those with rows of the tile: gemm_live_rows). */
static LLVMValueRef
stage_tx(W *w)
{
	G *g = &w->g;
	CgFn *f = g->k.f;
	const GemmSpec *s = &g->k.s;
	int b_bytes = g->wg.stage - g->wg.a_bytes;

	LLVMValueRef rows;

	if (gemm_a_cp_async(s))
		return cg_i32(f, b_bytes);
	if (!gemm_live_rows(s) || s->gather_tma)	/* one-row boxes: every row, clamped (row_boxes) */
		return cg_i32(f, g->wg.stage);
	rows = live_a_rows(&g->k);
	if (pair_a(s))	/* a pair of column tiles shares A's whole tile */
		rows = cg_select(f, g->k.bshare, rows, cg_i32(f, s->bm));
	return cg_addi(f, cg_muli(f, rows, s->bk * g->eb), b_bytes);
}

/* The row coordinate of B's interleaved map (interleaved_bmap) for tile
 * row n (i32, even) of expert k->e: the expert's gate row n/2, its rows a run. */
static LLVMValueRef
interleaved_row(GemmCore *k, LLVMValueRef n)
{
	CgFn *f = k->f;
	LLVMValueRef r = cg_shr(f, n, 1);

	return k->s.groups > 0 ? cg_add(f, r, cg_muli(f, k->e, k->s.b_group_stride / k->s.ldb)) : r;
}

/* One of B's boxes at coords c into dst, completing on full[st] (multicast:
 * to both CTAs of the cluster, a 2x2's column pair); while w->l2pf, the box into L2 alone. */
static void
b_box(W *w, LLVMValueRef dst, LLVMValueRef st, int rank, LLVMValueRef *c, int multicast)
{
	CgFn *f = w->g.k.f;

	if (w->l2pf)
		cg_tma_prefetch(f, w->g.k.bmap, rank, c);
	else if (multicast && w->bmask)
		cg_tma_load_multicast_to(f, w->g.k.bmap, dst, full_bar(w, st), rank, c, w->bmask);
	else if (multicast)
		cg_tma_load_multicast(f, w->g.k.bmap, dst, full_bar(w, st), rank, c, 3);
	else
		cg_tma_load(f, w->g.k.bmap, dst, full_bar(w, st), rank, c);
}

/* B's half h (0, 1: rows n0 + h bn/2..) of k-tile kt (i32), 64-k block j,
 * into the stage's B at sbase: here, or (multicast) to both CTAs of the
 * cluster.  Through the gate|up interleave the half's box (128 bytes, 2,
 * bn/4) writes its bn/2 tile rows in order as the whole tile's box does. */
static void
load_b_half(W *w, LLVMValueRef sbase, LLVMValueRef kt, LLVMValueRef st, int j, LLVMValueRef h, int multicast)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	int half = s->bn / 2, rank = 2 + (s->groups > 0 || s->f8.b_interleave);
	LLVMValueRef c[3], dst, n = cg_add(f, k->n0, cg_muli(f, h, half));

	c[0] = cg_addi(f, cg_muli(f, kt, s->bk), (int64_t)(128 / w->g.eb) * j);
	c[1] = s->f8.b_interleave ? cg_i32(f, 0) : n;
	c[2] = s->f8.b_interleave ? interleaved_row(k, n) : k->e;
	dst = cg_add(f, cg_addi(f, sbase, (int64_t)j * s->bn * 128), cg_muli(f, h, half * 128));
	b_box(w, dst, st, rank, c, multicast);
}

/*
 * Clusters sharing B (GemmSpec.cluster_b): where the pair shares the tile's
 * B (dense always; grouped where k->bshare says), rank r loads B's rows
 * n0 + r bn/2.. multicast to both CTAs, the peer the other half; else (a
 * grouped pair on two column tiles, or the pairs without a cluster) this
 * CTA loads both halves for itself.  The stage's bytes on full[s] are the
 * same either way.
 */
static void
load_b_halves(W *w, LLVMValueRef sbase, LLVMValueRef kt, LLVMValueRef st)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	int kb = k->s.bk * w->g.eb / 128;
	CgIf c;

	if (quad(&k->s)) {	/* half r & 1, to this CTA and its column partner */
		for (int j = 0; j < kb; j++)
			load_b_half(w, sbase, kt, st, j, cg_and(f, w->crank, 1), 1);
		return;
	}
	if (k->s.cluster == 2) {
		if (k->bshare)
			cg_if(f, &c, k->bshare);
		for (int j = 0; j < kb; j++)
			load_b_half(w, sbase, kt, st, j, w->crank, 1);
		if (!k->bshare)
			return;
		cg_else(f, &c);
	}
	for (int j = 0; j < kb; j++)
		for (int h = 0; h < 2; h++)
			load_b_half(w, sbase, kt, st, j, cg_i32(f, h), 0);
	if (k->s.cluster == 2)
		cg_endif(f, &c);
}

/* B's boxes of k-tile kt (i32) into the stage's B at sbase through the
 * gate|up interleave (interleaved_bmap): (k, half 0, the expert's row n0/2). */
static void
load_b_interleaved(W *w, LLVMValueRef sbase, LLVMValueRef kt, LLVMValueRef st)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	int row = 128 / w->g.eb;
	LLVMValueRef c[3];

	c[1] = cg_i32(f, 0);
	c[2] = interleaved_row(k, k->n0);
	for (int j = 0; j < s->bk / row; j++) {
		c[0] = cg_addi(f, cg_muli(f, kt, s->bk), (int64_t)row * j);
		b_box(w, cg_addi(f, sbase, (int64_t)j * s->bn * 128), st, 3, c, 0);
	}
}

/* B's boxes of k-tile kt (i32) into the stage at sbase (its B), on full[st]. */
static void
load_b(W *w, LLVMValueRef sbase, LLVMValueRef kt, LLVMValueRef st)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	int row = 128 / w->g.eb, rank = 2 + (s->groups > 0);
	LLVMValueRef c[3];

	if (s->b_layout == CG_B_NK && b_box_rows(s) < s->bn) {
		load_b_halves(w, sbase, kt, st);
	} else if (s->b_layout == CG_B_NK && s->f8.b_interleave) {
		load_b_interleaved(w, sbase, kt, st);
	} else if (s->b_layout == CG_B_NK) {
		for (int j = 0; j < s->bk / row; j++) {
			c[0] = cg_addi(f, cg_muli(f, kt, s->bk), (int64_t)row * j);
			c[1] = k->n0;
			c[2] = k->e;
			b_box(w, cg_addi(f, sbase, (int64_t)j * s->bn * 128), st, rank, c, 0);
		}
	} else {
		for (int j = 0; j < s->bn / 64; j++) {
			c[0] = cg_addi(f, k->n0, 64 * j);
			c[1] = cg_muli(f, kt, s->bk);
			c[2] = k->e;
			b_box(w, cg_addi(f, sbase, (int64_t)j * s->bk * 128), st, rank, c, 0);
		}
	}
}

/*
 * GemmSpec.f8.l2_ahead: with k-tile kt (kt % PF_RUN == 0), B's boxes of
 * k-tiles kt + S .. kt + S + PF_RUN - 1 of the tile into L2 (the ring holds
 * kt - S + 1 .. kt), so that DRAM's latency is hidden over S + PF_RUN k-tiles
 * of B instead of the S that shared memory holds, and each of B's rows is
 * asked for PF_RUN x 128 consecutive bytes at once (a DRAM page, where the
 * ring's loads ask 128 bytes of a row a k-tile).
 */
static void
prefetch_b(W *w, LLVMValueRef kt)
{
	CgFn *f = w->g.k.f;
	CgIf c, r;

	if (!w->g.k.s.f8.l2_ahead)
		return;
	cg_if(f, &r, LLVMBuildICmp(f->B, LLVMIntEQ, cg_and(f, kt, PF_RUN - 1), cg_i32(f, 0), ""));
	w->l2pf = 1;
	for (int j = 0; j < PF_RUN; j++) {
		LLVMValueRef ka = cg_addi(f, kt, w->g.k.s.stages + j);
		cg_if(f, &c, cg_lt(f, ka, cg_i32(f, w->g.kt)));
		load_b(w, cg_i32(f, 0), ka, cg_i32(f, 0));
		cg_endif(f, &c);
	}
	w->l2pf = 0;
	cg_endif(f, &r);
}

/*
 * Gathered A by one-row TMA boxes (GemmSpec.gather_tma): lane l of the
 * producer warp loads the tile's rows l, l + 32, ..: per 64-k block j, x's
 * row trow[i] (gemm_a_row: through gather_idx / gather_div, clamped to the
 * tile's expert, so a row past its end loads a valid row whose result is
 * never stored and the stage's bytes stay bm x bk) as one box of one row
 * to the row's place in the block, sbase + j bm 128 + r 128.  The 128-byte
 * swizzle is the shared address's (chunk bits [4:6] ^ row bits [7:9]) and
 * the block starts 1 KiB-aligned, so the row lands where the whole tile's
 * box would put it (the emulator swizzles on the address too).
 */
static void
row_boxes(W *w, LLVMValueRef sbase, LLVMValueRef kt, LLVMValueRef st)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	int row = 128 / w->g.eb;
	LLVMValueRef c[2], r;

	for (int i = 0; i < s->bm / 32; i++) {
		r = cg_addi(f, k->lane, 32 * i);
		for (int j = 0; j < s->bk / row; j++) {
			c[0] = cg_addi(f, cg_muli(f, gemm_a_ktile(&w->g, kt), s->bk), (int64_t)row * j);
			c[1] = w->trow[i];
			cg_tma_load(f, k->amap, cg_add(f, cg_addi(f, sbase, (int64_t)j * s->bm * 128), cg_shl(f, r, 7)),
				    full_bar(w, st), 2, c);
		}
	}
}

/* The producer's k-tiles of one tile: one thread, or (gathered A, FP8
 * scales) the producer warpgroup with thread 0 issuing the TMA boxes, or
 * (gathered A by one-row boxes) warp 0, lane 0 the stage's expect_tx and B. */
static void
produce(W *w)
{
	G *g = &w->g;
	GemmCore *k = &g->k;
	CgFn *f = k->f;
	const GemmSpec *s = &k->s;
	int row = 128 / g->eb, kb = s->bk / row;	/* boxes of 128-byte rows */
	LLVMValueRef kt, it, st, par, sbase, abase, c[3];
	CgLoop l;
	CgIf t0;

	for (int i = 0; i < g->a_n; i++) {	/* gathered A: the chunks' rows, at k 0 */
		LLVMValueRef src = gemm_a_row(k, cg_add(f, k->row0, g->a_row[i]));
		g->a_src[i] = gptr(f, k->A, cg_add(f, cg_muli(f, cg_sext64(f, src), s->lda),
						   cg_sext64(f, cg_muli(f, g->a_kc[i], 16 / g->eb))), g->eb);
	}
	for (int i = 0; w->lanes && i < s->bm / 32; i++)	/* one-row boxes: the lane's rows in x */
		w->trow[i] = gemm_a_row(k, cg_add(f, k->row0, cg_addi(f, k->lane, 32 * i)));
	gemm_a_live(g, g->a_n);
	if (s->f8.group > 0)
		gemm_f8_scale_sources(g, PRODUCERS);
	kt = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, g->kt), cg_i32(f, 1));
	it = cg_get(f, w->it);
	ring(w, it, &st, &par);
	cg_mbar_wait(f, empty_bar(w, st), LLVMBuildXor(f->B, par, cg_i32(f, 1), ""));
	abase = sbase = cg_add(f, g->wg.base, cg_muli(f, st, g->wg.stage));
	if (w->all || w->lanes)
		cg_if(f, &t0, LLVMBuildICmp(f->B, LLVMIntEQ, k->tid, cg_i32(f, 0), ""));
	cg_mbar_arrive_tx(f, full_bar(w, st), stage_tx(w));
	for (int j = 0; j < kb && !s->gather; j++) {	/* A: rows row0.., k 64j.. of the k-tile */
		c[0] = cg_addi(f, cg_muli(f, gemm_a_ktile(g, kt), s->bk), (int64_t)row * j);
		load_a(w, cg_addi(f, sbase, (int64_t)j * s->bm * 128), c[0], st);
	}
	load_b(w, cg_addi(f, sbase, g->wg.a_bytes), kt, st);
	prefetch_b(w, kt);
	if (w->lanes) {	/* every lane its rows, after lane 0's expect_tx of the stage's bytes */
		cg_endif(f, &t0);
		cg_syncwarp(f);
		row_boxes(w, abase, kt, st);
	}
	if (w->all) {	/* every producer thread: its copies, then its arrival once they land */
		cg_endif(f, &t0);
		if (s->gather)
			gather_a(w, abase, kt);
		if (s->f8.group > 0)
			gemm_f8_scale_copies(g, PRODUCERS, gemm_f8_slot_at(g, st), kt);
		cg_cp_async_mbar_arrive(f, full_bar(w, st));
	}
	cg_set(f, w->it, cg_addi(f, it, 1));
	cg_endloop(f, &l);
}

/* Lane 0 of each consumer warp releases stage st: here, and to every CTA
 * whose producer writes it too (a pair's peer; a 2x2's row partner, A's
 * other half, and column partner, B's). */
static void
release(W *w, LLVMValueRef st)
{
	CgFn *f = w->g.k.f;
	CgIf c;

	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, w->g.k.lane, cg_i32(f, 0), ""));
	cg_mbar_arrive(f, empty_bar(w, st));
	if (quad(&w->g.k.s)) {
		cg_mbar_arrive_cluster(f, empty_bar(w, st), row_partner(w));
		if (!(w->g.k.s.quad_fault & CG_QUAD_NO_COL_RELEASE))
			cg_mbar_arrive_cluster(f, empty_bar(w, st), col_partner(w));
	} else if (w->g.k.s.cluster == 2) {	/* the peer's producer writes this stage too */
		cg_mbar_arrive_cluster(f, empty_bar(w, st), col_partner(w));
	}
	cg_endif(f, &c);
}

/* The consumers' wait for k-tile it's stage (the it-th of the ring): its
 * stage, once full; a gathered A came through the generic proxy (cp.async),
 * so it is fenced before wgmma reads it through the async one. */
static LLVMValueRef
stage_full(W *w, LLVMValueRef it)
{
	CgFn *f = w->g.k.f;
	LLVMValueRef st, par;

	ring(w, it, &st, &par);
	cg_mbar_wait(f, full_bar(w, st), par);
	if (gemm_a_cp_async(&w->g.k.s))
		gemm_fence_proxy_async(f);
	return st;
}

/* Columns half h of the k-tile in stage st into fresh accumulators; commit. */
static void
f8_issue(W *w, LLVMValueRef st, int h)
{
	int j0, nj;

	gemm_f8_half(&w->g, h, &j0, &nj);
	gemm_wgmma_ktile_cols(&w->g, w->da0, w->db0, st, cg_i32(w->g.k.f, 0), j0, nj);
}

/* After the wait that retired columns half h of the k-tile in stage st:
 * fin += acc * sb * sa for those columns, with the stage's scales. */
static void
f8_promote(W *w, LLVMValueRef st, int h)
{
	LLVMValueRef sa[2 * MAXF], sb[2 * MAXF];
	int j0, nj;

	gemm_f8_half(&w->g, h, &j0, &nj);
	if (nj == 0)	/* the empty half of GemmSpec.f8.whole */
		return;
	gemm_f8_stage_scales(&w->g, gemm_f8_slot_at(&w->g, st), j0, nj, sa, sb);
	gemm_f8_promote_cols(&w->g, sa, sb, j0, nj);
}

/* Ping-pong: wait for this warpgroup's turn (after the other's tile before this one). */
static void
pp_turn_wait(W *w)
{
	CgFn *f = w->g.k.f;
	CgIf c;

	cg_if(f, &c, gemm_later_item(&w->g.k));
	cg_bar_sync(f, cg_addi(f, w->cwg, ORDER_BAR), 256);
	cg_endif(f, &c);
}

/* Ping-pong: this tile's wgmmas issued, the turn to the other's tile after
 * it (if any; next: gemm_next_item, the item after this warpgroup's). */
static void
pp_turn_give(W *w, LLVMValueRef next)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	CgIf c;

	cg_if(f, &c, cg_lt(f, next, gemm_work_total(k)));
	cg_bar_arrive(f, cg_sub(f, cg_i32(f, ORDER_BAR + 1), w->cwg), 256);
	cg_endif(f, &c);
}

/* GemmSpec.f8.acc2 on this tile: whole k-tiles on cooperative consumers
 * (ping-pong keeps one set: its turn is handed over after the last issue). */
static int
acc2(const GemmSpec *s)
{
	return s->f8.acc2 && s->f8.whole && s->f8.group > 0 && s->ws_mode != CG_WS_PINGPONG;
}

/* The other accumulator set becomes g's (the wgmmas' destination, the
 * promotion's source): a swap of the vars the code refers to, no instruction. */
static void
acc2_swap(W *w)
{
	G *g = &w->g;
	LLVMValueRef t;

	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++) {
				t = g->acc[i][j][q];
				g->acc[i][j][q] = w->acc2[i][j][q];
				w->acc2[i][j][q] = t;
			}
	t = g->wg.buf;
	g->wg.buf = w->buf2;
	w->buf2 = t;
}

/*
 * A run of n k-tiles from the ring's position it (i32), unrolled, each
 * k-tile one wgmma group into the set of its parity:
 *
 *	wait full[0]; issue 0 -> set 0
 *	per k-tile u:  [u + 1 < n: wait full[u+1]; issue u+1 -> set (u+1)%2;
 *	                wait_group 1, else wait_group 0]  (u's group retired)
 *	               promote u from set u%2; release u's stage
 *
 * so u's promotion (64 FFMA a thread at 64x128) runs while the tensor
 * cores work on u + 1.  The promotions are main's, in the same order: the
 * same bits.  Nothing is in flight at the run's end, so a loop over runs
 * has none across its back edge (ptxas would serialise every wgmma:
 * C7514); unrolled, a set's registers are never read across one either.
 * Set 0 is g's again at the end.
 */
static void
acc2_run(W *w, LLVMValueRef it, int n)
{
	G *g = &w->g;
	CgFn *f = g->k.f;
	LLVMValueRef st, nst = NULL;

	st = stage_full(w, it);
	f8_issue(w, st, 0);
	for (int u = 0; u < n; u++) {
		if (u + 1 < n) {
			acc2_swap(w);
			nst = stage_full(w, cg_addi(f, it, u + 1));
			f8_issue(w, nst, 0);
			acc2_swap(w);
			gemm_wgmma_wait(g, 1);
		} else
			gemm_wgmma_wait(g, 0);
		f8_promote(w, st, 0);
		release(w, st);
		st = nst;
		acc2_swap(w);
	}
	if (n % 2)
		acc2_swap(w);
}

#define ACC2_RUN 8	/* GemmSpec.f8.acc2: the most k-tiles a run unrolls (k4: two of 8, k3: seven of 8; 16 spilled the dense down k6, 5.5 KB) */

/* A tile's n k-tiles as runs of equal length (acc2_run), the whole ones in a loop. */
static void
acc2_ktiles(W *w, LLVMValueRef it0, int n)
{
	CgFn *f = w->g.k.f;
	int runs = (n + ACC2_RUN - 1) / ACC2_RUN, len, whole;
	LLVMValueRef r;
	CgLoop l;

	if (n == 0)
		return;
	len = (n + runs - 1) / runs;
	whole = n / len;
	if (whole == 1)
		acc2_run(w, it0, len);
	else {
		r = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, whole), cg_i32(f, 1));
		acc2_run(w, cg_add(f, it0, cg_muli(f, r, len)), len);
		cg_endloop(f, &l);
	}
	if (n % len)
		acc2_run(w, cg_addi(f, it0, whole * len), n % len);
}

/*
 * FP8 x FP8 (GemmSpec.f8): each k-tile (one scale block) in two halves of
 * the warpgroup's columns (two wgmma groups of m64 n(wtn/2)), so that the
 * promotion of one half runs while the tensor cores work on the other:
 *
 *	wait full[0]; issue (0, lo); wait_group 0
 *	per k-tile k:  [(k, lo) retired]
 *	    issue (k, hi); promote (k, lo); wait_group 0
 *	    [k+1 < n: wait full[k+1]; issue (k+1, lo)]
 *	    promote (k, hi); release k's stage; wait_group 0
 *
 * Promote = the stage's scales from shared memory (the producer staged them
 * with the stage) and fin += acc * sb * sa (k_gemm_wgmma.c's promotion: the
 * same operations in the same order, so the sums are bit for bit the
 * cp.async mainloop's).  Nothing is in flight across the loop's back edge
 * (ptxas serialises every wgmma of a loop that reads one group's registers
 * while another's wgmma is in flight across it: C7514), and the registers
 * are the single-set loop's: 64 promoted sums, 2 x 32 accumulators.  The
 * other consumer warpgroup meets this one only at the ring.  With whole
 * k-tiles on cooperative consumers (the default plan) the tile takes
 * acc2_ktiles instead (GemmSpec.f8.acc2, the default since session 35: two
 * accumulator sets, k promoted under k + 1's wgmmas); the loop below is
 * then the halves' and ping-pong's (and --debug=f8-acc1's).
 */
static void
consume_f8(W *w)
{
	G *g = &w->g;
	CgFn *f = g->k.f;
	int n = g->kt, pp = g->k.s.ws_mode == CG_WS_PINGPONG;
	LLVMValueRef it0, it, st, nst;
	CgLoop l;

	gemm_f8_tile(g);
	it0 = cg_get(f, w->it);
	if (pp)
		pp_turn_wait(w);
	if (acc2(&g->k.s)) {
		acc2_ktiles(w, it0, n);
	} else if (n > 0) {
		st = stage_full(w, it0);
		f8_issue(w, st, 0);
		gemm_wgmma_wait(g, 0);
		if (n > 1) {
			it = cg_loop(f, &l, it0, cg_addi(f, it0, n - 1), cg_i32(f, 1));
			st = cg_urem(f, it, cg_i32(f, g->k.s.stages));
			f8_issue(w, st, 1);
			f8_promote(w, st, 0);
			gemm_wgmma_wait(g, 0);
			nst = stage_full(w, cg_addi(f, it, 1));
			f8_issue(w, nst, 0);
			f8_promote(w, st, 1);
			release(w, st);
			gemm_wgmma_wait(g, 0);
			cg_endloop(f, &l);
		}
		st = cg_urem(f, cg_addi(f, it0, n - 1), cg_i32(f, g->k.s.stages));
		f8_issue(w, st, 1);
		if (pp)	/* its last wgmmas issued: the other's turn */
			pp_turn_give(w, gemm_next_item(&g->k));
		f8_promote(w, st, 0);
		gemm_wgmma_wait(g, 0);
		f8_promote(w, st, 1);
		release(w, st);
	} else if (pp) {
		pp_turn_give(w, gemm_next_item(&g->k));
	}
	/* ping-pong: past the other warpgroup's k-tiles too */
	cg_set(f, w->it, cg_addi(f, it0, pp ? 2 * n : n));
	gemm_f8_result(g);
	gemm_epilogue(g);
}

/* The consumers' k-tiles of one tile; the last one's wgmma group stays in flight. */
static void
mainloop(W *w)
{
	G *g = &w->g;
	CgFn *f = g->k.f;
	LLVMValueRef kt, it, st, scale, pst, ppar;
	CgLoop l;
	CgIf c;

	kt = cg_loop(f, &l, cg_i32(f, 0), cg_i32(f, g->kt), cg_i32(f, 1));
	it = cg_get(f, w->it);
	st = stage_full(w, it);
	scale = LLVMBuildZExt(f->B, LLVMBuildICmp(f->B, LLVMIntNE, kt, cg_i32(f, 0), ""), f->ti32, "");
	gemm_wgmma_ktile(g, w->da0, w->db0, st, scale);
	gemm_wgmma_wait(g, 1);	/* the k-tile before has retired: its stage is free */
	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntNE, kt, cg_i32(f, 0), ""));
	ring(w, cg_addi(f, it, -1), &pst, &ppar);
	release(w, pst);
	cg_endif(f, &c);
	cg_set(f, w->it, cg_addi(f, it, 1));
	cg_endloop(f, &l);
}

/* After the k-loop: the last k-tile retired and its stage released. */
static void
retire_tile(W *w)
{
	G *g = &w->g;
	CgFn *f = g->k.f;
	LLVMValueRef pst, ppar;

	gemm_wgmma_wait(g, 0);
	if (g->kt > 0) {
		ring(w, cg_addi(f, cg_get(f, w->it), -1), &pst, &ppar);
		release(w, pst);
	}
	gemm_wgmma_acc_fence(g);
}

/* The k-tiles of one tile, all retired (gemm_wgmma_by_rows: g is &w->g). */
static void
consume_ktiles(G *g, void *arg)
{
	(void)g;
	mainloop(arg);
	retire_tile(arg);
}

/* The consumers' k-tiles of one tile, then its epilogue. */
static void
consume(W *w)
{
	gemm_rows_ahead(&w->g);
	gemm_wgmma_by_rows(&w->g, consume_ktiles, w);
	gemm_epilogue(&w->g);
}

/*
 * Ping-pong: this warpgroup's tile k->w, its k-tiles in its turn (after the
 * other's tile before it), the turn handed over once its wgmmas are issued
 * (to the other's tile after it), then its epilogue while the other's run;
 * then past the other's k-tiles in the ring.
 */
static void
consume_pingpong(W *w)
{
	G *g = &w->g;
	GemmCore *k = &g->k;
	CgFn *f = k->f;
	LLVMValueRef next = gemm_next_item(k);

	gemm_rows_ahead(g);	/* in flight during the wait for the turn too */
	pp_turn_wait(w);
	mainloop(w);
	pp_turn_give(w, next);
	retire_tile(w);
	gemm_epilogue(g);
	cg_set(f, w->it, cg_addi(f, cg_get(f, w->it), g->kt));
}

static void
produce_tile(GemmCore *k)
{
	produce((W *)k);
}

static void
consume_tile(GemmCore *k)
{
	if (k->s.f8.group > 0)
		consume_f8((W *)k);
	else if (k->s.ws_mode == CG_WS_PINGPONG)
		consume_pingpong((W *)k);
	else
		consume((W *)k);
}

/*
 * With two or three consumer warpgroups: the producer's registers per
 * thread, what is left of the CTA's (pinned at entry) once the consumers take
 * consumer_regs each (384 threads: 3 x 168 = 40 + 2 x 232; 512: 4 x 128 =
 * 56 + 3 x 152).
 */
static int
producer_regs(int nthr, int cregs)
{
	return (cg_regs_per_thread(nthr) * nthr - (nthr - PRODUCERS) * cregs) / PRODUCERS / 8 * 8;
}

/*
 * The roles, each with its own copy of the schedule, so that all of a
 * role's code follows its setmaxnreg (ptxas budgets registers per region:
 * code shared after the branches would get the launch's 168).
 */
static void
roles(W *w)
{
	GemmCore *k = &w->g.k;
	CgFn *f = k->f;
	int split = consumer_wgs(&k->s) >= 2, cregs = consumer_regs(&k->s);
	LLVMValueRef leader;
	CgIf p, e;

	cg_if(f, &p, LLVMBuildICmp(f->B, LLVMIntEQ, cg_shr(f, k->warp, 2), cg_i32(f, 0), ""));
	if (split)
		cg_setmaxnreg(f, 0, producer_regs(k->nthr, cregs));
	if (w->all) {	/* every producer thread: its A chunks, its FP8 scales */
		gemm_schedule(k, produce_tile);
		cg_cp_async_commit(f);	/* no thread leaves with copies in flight */
		cg_cp_async_wait(f, 0);
	} else if (w->lanes) {	/* warp 0: each lane its rows' boxes, lane 0 B's */
		cg_if(f, &e, LLVMBuildICmp(f->B, LLVMIntEQ, k->warp, cg_i32(f, 0), ""));
		gemm_schedule(k, produce_tile);
		cg_endif(f, &e);
	} else {
		leader = cg_elect(f);
		cg_if(f, &e, LLVMBuildAnd(f->B, LLVMBuildICmp(f->B, LLVMIntEQ, k->warp, cg_i32(f, 0), ""),
					   leader, ""));
		gemm_schedule(k, produce_tile);
		cg_endif(f, &e);
	}
	cg_else(f, &p);
	if (split)
		cg_setmaxnreg(f, 1, cregs);
	gemm_wgmma_descs(&w->g, &w->da0, &w->db0);
	if (k->s.ws_mode == CG_WS_PINGPONG) {	/* from its first tile's k-tiles on */
		cg_set(f, w->it, cg_muli(f, w->cwg, w->g.kt));
		gemm_schedule_share(k, consume_tile, w->cwg, 2);
	} else {
		gemm_schedule(k, consume_tile);
	}
	if (k->s.tma_store)	/* no CTA leaves while a TMA store still reads its buffer */
		gemm_ostage_end(&w->g);
	cg_endif(f, &p);
	if (csize(&k->s) > 1)	/* no CTA leaves while a peer may still arrive on its barriers */
		cg_cluster_sync(f);
}

int
gemm_ws_emit(G *in, CgModule *m, const char *name, Diag *d)
{
	W *w = xcalloc(1, sizeof *w);	/* large: G holds the accumulator vars */
	G *g = &w->g;
	const GemmSpec *s = &in->k.s;
	CgTmap maps[4];
	char buf[800];
	int n, rc;

	*g = *in;
	w->all = gemm_a_cp_async(s) || s->f8.group > 0;
	w->lanes = s->gather_tma;
	if (!gemm_begin(&g->k, m, name, d)) {
		free(w);
		return -1;
	}
	if (consumer_wgs(s) >= 2)	/* setmaxnreg's pool: what the threads start with */
		cg_fn_maxnreg(g->k.f, cg_regs_per_thread(g->k.nthr));
	if (csize(s) > 1)
		cg_fn_cluster(g->k.f, csize(s));
	cg_fn_tmaps(g->k.f, maps, tmaps(g, maps));	/* gathered: B only */
	for (int i = 0; i < g->mi; i++)
		for (int j = 0; j < g->ni; j++)
			for (int q = 0; q < 4; q++)
				g->acc[i][j][q] = cg_var(g->k.f, g->k.f->tf32, NULL);
	if (g->k.f->emu)
		g->wg.buf = cg_var(g->k.f, LLVMArrayType(g->k.f->tf32, (unsigned)(g->mi * g->ni * 4)), NULL);
	if (acc2(s)) {
		for (int i = 0; i < g->mi; i++)
			for (int j = 0; j < g->ni; j++)
				for (int q = 0; q < 4; q++)
					w->acc2[i][j][q] = cg_var(g->k.f, g->k.f->tf32, NULL);
		if (g->k.f->emu)
			w->buf2 = cg_var(g->k.f, LLVMArrayType(g->k.f->tf32, (unsigned)(g->mi * g->ni * 4)), NULL);
	}
	gemm_f8_vars(g);
	gemm_quant_setup(g);
	n = snprintf(buf, sizeof buf, "gemm %s.%s->%s B[%s] N=%lld K=%lld %dx%dx%d w%dx%d%s+4 s%d ws tma%s%s",
		     dtype_name(s->a_dt), dtype_name(s->b_dt), dtype_name(s->c_dt),
		     s->b_layout == CG_B_NK ? "N,K" : "K,N", (long long)s->N, (long long)s->K,
		     s->bm, s->bn, s->bk, s->warps_m, s->warps_n, s->ws_mode == CG_WS_PINGPONG ? "x2" : "",
		     s->stages, s->gather_tma ? " tma-rows-a" : s->gather ? " cp.async-a" : "", s->ws_mode == CG_WS_PINGPONG ? " pingpong" : "");
	n += snprintf(buf + n, sizeof buf - (size_t)n, "%s",
		      quad(s) ? " cluster4 multicast-ab"
		      : s->cluster == 2 ? (s->cluster_b ? " cluster2 multicast-b" : " cluster2 multicast-a")
		      : s->cluster_b ? " pairs-b" : "");
	if (s->wg_wide)	/* warpgroup tiles of up to 256 columns */
		n += snprintf(buf + n, sizeof buf - (size_t)n, " wg%dx%d", g->wtm, g->wtn);
	if (s->tma_store)
		n += snprintf(buf + n, sizeof buf - (size_t)n, " tma-store");
	gemm_note_tail(&g->k, buf, sizeof buf, n);
	gemm_prologue(&g->k);
	setup(w);
	roles(w);
	rc = gemm_finish(&g->k, buf);
	free(w);
	return rc;
}

/* ---- a probe of the TMA and mbarrier helpers (tests of the emulator and the toolchain) ---- */

CgTmap
cg_tma_probe_map(int rows)
{
	return (CgTmap){"A", DT_BF16, 2, {CG_EXPR_INT(64), CG_EXPR_INT(rows)}, {128, 0}, {64, 16, 1}, 128};
}

int
cg_emit_tma_probe(CgModule *m, const char *name, DbgFlags flags, Diag *d)
{
	CgParam p[4] = {{CGP_PTR, "A"}, {CGP_PTR, "D"}, {CGP_TMAP, "A_map"}, {CGP_I32, "row0"}};
	CgTmap map = cg_tma_probe_map(16);
	int block[3] = {128, 1, 1};
	CgExpr grid[3] = {CG_EXPR_INT(1), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	LLVMValueRef tid, base, addr, bar, row, ch, v, c[2];
	CgFn *f;
	CgIf t0;

	if (!cg_target_is_emu(cg_module_target(m)) &&
	    cg_require(cg_module_target(m), CG_TMA, "the TMA probe", d) < 0)
		return -1;
	if (!(f = cg_fn_begin(m, name, p, 4, 128, 1, d)))
		return -1;
	cg_fn_tmaps(f, &map, 1);
	tid = cg_tid(f, 0);
	gemm_aligned_smem(f, &base, &addr);
	bar = cg_addi(f, base, 2048);
	cg_if(f, &t0, LLVMBuildICmp(f->B, LLVMIntEQ, tid, cg_i32(f, 0), ""));
	cg_mbar_init(f, bar, 1);
	cg_mbar_init_fence(f);
	cg_endif(f, &t0);
	cg_barrier(f);
	cg_if(f, &t0, LLVMBuildICmp(f->B, LLVMIntEQ, tid, cg_i32(f, 0), ""));
	cg_mbar_arrive_tx(f, bar, cg_i32(f, flags & CG_TMAPROBE_SHORT_TX ? 2048 - 16 : 2048));
	c[0] = cg_i32(f, 0);
	c[1] = cg_arg(f, 3);
	cg_tma_load(f, 2, base, bar, 2, c);
	if (flags & CG_TMAPROBE_EXTRA_ARRIVE)
		cg_mbar_arrive(f, bar);
	if (flags & CG_TMAPROBE_OVERWRITE)
		cg_sstore(f, cg_i32(f, 0), cg_sptr(f, base), 4);
	cg_endif(f, &t0);
	if (!(flags & CG_TMAPROBE_NO_WAIT))
		cg_mbar_wait(f, bar, cg_i32(f, 0));
	if (flags & CG_TMAPROBE_STRAY_TX) {
		cg_if(f, &t0, LLVMBuildICmp(f->B, LLVMIntEQ, tid, cg_i32(f, 0), ""));
		cg_mbar_arrive_tx(f, bar, cg_i32(f, 16));
		cg_endif(f, &t0);
	}
	/* thread t: row t/8, 16-byte chunk t%8, stored at chunk ^ (row % 8) */
	row = cg_shr(f, tid, 3);
	ch = cg_and(f, tid, 7);
	v = cg_sload(f, LLVMVectorType(f->ti32, 4),
		     cg_sptr(f, cg_add(f, base, cg_add(f, cg_shl(f, row, 7),
						       cg_shl(f, LLVMBuildXor(f->B, ch, cg_and(f, row, 7), ""), 4)))), 16);
	cg_gstore(f, v, cg_gep(f, cg_arg(f, 1), tid, 16), 16);
	return cg_fn_end(f, block, grid, 4096, "tma probe");
}

int
cg_emit_regs_probe(CgModule *m, const char *name, int entry, int dec, int inc, Diag *d)
{
	CgParam p[1] = {{CGP_PTR, "D"}};
	int block[3] = {3 * PRODUCERS, 1, 1};
	CgExpr grid[3] = {CG_EXPR_INT(1), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	LLVMValueRef tid;
	CgFn *f;
	CgIf p0;

	if (!(f = cg_fn_begin(m, name, p, 1, block[0], 1, d)))
		return -1;
	if (entry)
		cg_fn_maxnreg(f, entry);
	tid = cg_tid(f, 0);
	cg_if(f, &p0, cg_lt(f, tid, cg_i32(f, PRODUCERS)));
	cg_setmaxnreg(f, 0, dec);
	cg_else(f, &p0);
	cg_setmaxnreg(f, 1, inc);
	cg_endif(f, &p0);
	cg_gstore(f, cg_addi(f, tid, 1), cg_gep(f, cg_arg(f, 0), tid, 4), 4);
	return cg_fn_end(f, block, grid, 0, "setmaxnreg probe");
}

int
cg_emit_turns_probe(CgModule *m, const char *name, int rounds, DbgFlags flags, Diag *d)
{
	CgParam p[1] = {{CGP_PTR, "D"}};
	int block[3] = {256, 1, 1};
	CgExpr grid[3] = {CG_EXPR_INT(1), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	LLVMValueRef tid, c, t, last, v;
	CgFn *f;
	CgIf i0, w, a;
	CgLoop l;

	if (!(f = cg_fn_begin(m, name, p, 1, block[0], 1, d)))
		return -1;
	tid = cg_tid(f, 0);
	c = cg_shr(f, tid, 7);
	cg_if(f, &i0, LLVMBuildICmp(f->B, LLVMIntEQ, tid, cg_i32(f, 0), ""));
	cg_sstore(f, cg_i32(f, 0), cg_sptr(f, cg_i32(f, 0)), 4);
	cg_endif(f, &i0);
	cg_barrier(f);
	t = cg_loop(f, &l, c, cg_i32(f, 2 * rounds), cg_i32(f, 2));
	cg_if(f, &w, LLVMBuildICmp(f->B, LLVMIntNE, t, cg_i32(f, 0), ""));
	cg_bar_sync(f, cg_addi(f, c, ORDER_BAR), 256);
	cg_endif(f, &w);
	cg_if(f, &i0, LLVMBuildICmp(f->B, LLVMIntEQ, cg_and(f, tid, 127), cg_i32(f, 0), ""));
	v = cg_sload(f, f->ti32, cg_sptr(f, cg_i32(f, 0)), 4);
	cg_gstore(f, v, cg_gep(f, cg_arg(f, 0), t, 4), 4);
	cg_sstore(f, cg_addi(f, v, 1), cg_sptr(f, cg_i32(f, 0)), 4);
	cg_endif(f, &i0);
	last = LLVMBuildICmp(f->B, LLVMIntEQ, t, cg_i32(f, 2 * rounds - (flags & CG_TURNS_SKIP_ARRIVE ? 2 : 1)), "");
	cg_if(f, &a, flags & CG_TURNS_EXTRA_ARRIVE ? LLVMConstInt(f->ti1, 1, 0) : LLVMBuildNot(f->B, last, ""));
	cg_bar_arrive(f, cg_sub(f, cg_i32(f, ORDER_BAR + 1), c), flags & CG_TURNS_HALF_COUNT ? 128 : 256);
	cg_endif(f, &a);
	cg_endloop(f, &l);
	return cg_fn_end(f, block, grid, 16, "named-barrier turns probe");
}

CgTmap
cg_cluster_probe_map(int rows)
{
	return (CgTmap){"A", DT_BF16, 2, {CG_EXPR_INT(64), CG_EXPR_INT(rows)}, {128, 0}, {64, 8, 1}, 128};
}

/* Thread 0's multicast of its half of round i's tile (rank 0's mask missing its peer with the flag). */
static void
cluster_probe_load(CgFn *f, LLVMValueRef base, LLVMValueRef full, LLVMValueRef rank, LLVMValueRef i, DbgFlags flags)
{
	LLVMValueRef c[2], dst = cg_add(f, base, cg_muli(f, rank, 1024));
	CgIf r0;

	c[0] = cg_i32(f, 0);
	c[1] = cg_add(f, cg_muli(f, cg_add(f, cg_mul(f, cg_shr(f, cg_ctaid(f, 0), 1), cg_arg(f, 3)), i), 16),
		      cg_muli(f, rank, 8));
	cg_mbar_arrive_tx(f, full, cg_i32(f, 2048));
	if (!(flags & (CG_CLPROBE_MASK_SELF | CG_CLPROBE_MASK_OUTSIDE))) {
		cg_tma_load_multicast(f, 2, dst, full, 2, c, 3);
		return;
	}
	cg_if(f, &r0, LLVMBuildICmp(f->B, LLVMIntEQ, rank, cg_i32(f, 0), ""));
	cg_tma_load_multicast(f, 2, dst, full, 2, c, flags & CG_CLPROBE_MASK_SELF ? 1 : 5);
	cg_else(f, &r0);
	cg_tma_load_multicast(f, 2, dst, full, 2, c, 3);
	cg_endif(f, &r0);
}

int
cg_emit_cluster_probe(CgModule *m, const char *name, int ctas, DbgFlags flags, Diag *d)
{
	CgParam p[4] = {{CGP_PTR, "A"}, {CGP_PTR, "D"}, {CGP_TMAP, "A_map"}, {CGP_I32, "rounds"}};
	CgTmap map = cg_cluster_probe_map(16);
	int block[3] = {128, 1, 1};
	CgExpr grid[3] = {CG_EXPR_INT(ctas), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	LLVMValueRef tid, base, addr, full, empty, rank, peer, i, t0, row, ch, v, at;
	CgFn *f;
	CgIf a, b;
	CgLoop l;

	if (!cg_target_is_emu(cg_module_target(m)) &&
	    cg_require(cg_module_target(m), CG_TMA | CG_CLUSTER, "the cluster probe", d) < 0)
		return -1;
	if (!(f = cg_fn_begin(m, name, p, 4, 128, 1, d)))
		return -1;
	cg_fn_cluster(f, 2);
	cg_fn_tmaps(f, &map, 1);
	tid = cg_tid(f, 0);
	gemm_aligned_smem(f, &base, &addr);
	full = cg_addi(f, base, 2048);
	empty = cg_addi(f, base, 2056);
	t0 = LLVMBuildICmp(f->B, LLVMIntEQ, tid, cg_i32(f, 0), "");
	cg_if(f, &a, t0);
	cg_mbar_init(f, full, 1);
	cg_mbar_init(f, empty, 2);
	if (!(flags & CG_CLPROBE_NO_INIT_SYNC))
		cg_mbar_init_fence(f);
	cg_endif(f, &a);
	cg_cluster_check(f, 2);
	rank = cg_cluster_rank(f);
	peer = flags & CG_CLPROBE_SELF_RELEASE ? rank : LLVMBuildXor(f->B, rank, cg_i32(f, 1), "");
	if (flags & CG_CLPROBE_NO_INIT_SYNC)
		cg_barrier(f);
	else
		cg_cluster_sync(f);
	i = cg_loop(f, &l, cg_i32(f, 0), cg_arg(f, 3), cg_i32(f, 1));
	cg_if(f, &a, t0);	/* the producer: the stage once both CTAs released it */
	cg_if(f, &b, LLVMBuildICmp(f->B, LLVMIntNE, i, cg_i32(f, 0), ""));
	cg_mbar_wait(f, empty, cg_and(f, cg_addi(f, i, -1), 1));
	cg_endif(f, &b);
	cluster_probe_load(f, base, full, rank, i, flags);
	cg_endif(f, &a);
	cg_mbar_wait(f, full, cg_and(f, i, 1));
	row = cg_shr(f, tid, 3);	/* thread t: row t/8, 16-byte chunk t%8, at chunk ^ (row % 8) */
	ch = cg_and(f, tid, 7);
	v = cg_sload(f, LLVMVectorType(f->ti32, 4),
		     cg_sptr(f, cg_add(f, base, cg_add(f, cg_shl(f, row, 7),
						       cg_shl(f, LLVMBuildXor(f->B, ch, cg_and(f, row, 7), ""), 4)))), 16);
	at = cg_add(f, cg_muli(f, cg_add(f, cg_mul(f, cg_ctaid(f, 0), cg_arg(f, 3)), i), 128), tid);
	cg_gstore(f, v, cg_gep(f, cg_arg(f, 1), at, 16), 16);
	cg_barrier(f);		/* the CTA has read the stage: release it here and in the peer */
	cg_if(f, &a, t0);
	cg_mbar_arrive(f, empty);
	cg_mbar_arrive_cluster(f, empty, peer);
	cg_endif(f, &a);
	cg_endloop(f, &l);
	if (!(flags & CG_CLPROBE_NO_END_SYNC))
		cg_cluster_sync(f);
	return cg_fn_end(f, block, grid, 4096, "cluster probe");
}
