/*
 * k_gemm.h — private to the GEMM builders: what the tensor-core kernel
 * (k_gemm.c, with the sm_90a mainloop in k_gemm_wgmma.c) and the CUDA-core
 * kernel (k_gemm_simt.c) share, and the state of the tensor-core one.
 *
 * GemmCore is the part both kernels have in common: the spec, the
 * parameters, the thread ids and the current tile.  Each builder's state
 * embeds it as its first member, so k_gemm_common.c can run the parts that
 * are the same (parameters, expert table and schedule, A's row gather,
 * epilogue leaves and program, the store) and call back into the builder
 * for the tile's body.
 *
 * Both tensor-core mainloops leave the accumulators in acc[mi][j][q]:
 * fragment row block mi (rows wm0 + mstride*mi + lane/4, +8 for q >= 2),
 * column block j (columns wn0 + 8j + 2(lane%4) + q%2), which is the m16n8
 * accumulator layout of mma.sync and, per warp, the wgmma m64nN one
 * (mstride 64).
 */
#ifndef MOEC_K_GEMM_H
#define MOEC_K_GEMM_H

#define CG_INTERNAL
#include "codegen.h"

#define GEMM_SMEM_MAX 232448	/* sm_80/sm_90 opt-in limit per CTA */

typedef struct GemmCore GemmCore;
struct GemmCore {
	CgFn *f;
	GemmSpec s;		/* defaults resolved */
	int sw;			/* index of swiglu, -1 if none */
	int64_t width;		/* output columns: N, or N/2 after swiglu */
	int nt;			/* column tiles: cdiv(N, bn) */
	int nthr, nwarp;	/* per CTA */
	int clamp;		/* columns may pass N: leaves are read at clamped columns */
	int tab, wsum, smem;	/* shared bytes: expert table, warp sums, total */
	int offs_volatile;	/* the offsets by ld.volatile (stream_ahead, before the grid wait: no
				 * load after the wait may take their values) */
	/* parameters */
	LLVMValueRef A, B, C, Cs, gidx, sidx, offs, T, ep[CG_EP_MAX];
	LLVMValueRef Bs, Bz;	/* quantised B: scales, zero points */
	LLVMValueRef As;	/* FP8 x FP8: A's scales */
	LLVMValueRef q_scale_p, q_zero_p;	/* static quantisation */
	/* per thread */
	LLVMValueRef tid, lane, warp;
	/* per tile */
	LLVMValueRef e, row0, rend, n0, bexp;	/* expert, rows row0..rend-1, column n0, B of e */
	LLVMValueRef bshare;	/* GemmSpec.cluster_b, grouped (i1): the pair shares the tile's B (NULL: always) */
	int amap, bmap;		/* the warp-specialised mainloop: its tensor-map parameters */
	int bqmap;		/* CG_QBULK_TMA: the first of quantised B's tensor maps (words, scales, zero points) */
	int cmap;		/* ... C's (GemmSpec.tma_store; -1: none) */
	int arows;		/* ... and A's 16-row boxes (gemm_a_rows_map; -1: none) */
	int cnt, ord;		/* shared offsets of the heavy-first tables (0: expert order) */
	LLVMValueRef w;			/* tiles schedule: the tile's work index (split-K's slot);
					 * gemm_schedule_share: the item's */
	LLVMValueRef round;		/* GemmSpec.snake: the item's round (gemm_round_item) */
	LLVMValueRef ws;		/* split-K: the "splitk_ws" workspace */
	LLVMValueRef fold_w, fold_x, fold_y;	/* GemmSpec.fold: the combine's weights, residual, result */
};

/* One row of the epilogue: where it goes, and its row leaves. */
typedef struct GemmRow GemmRow;
struct GemmRow {
	LLVMValueRef drow;		/* i32: the destination row of C */
	LLVMValueRef rowv[CG_EP_MAX];	/* ROW leaves: the value */
	LLVMValueRef matb[CG_EP_MAX];	/* MAT leaves: the row's address */
};

/* Two adjacent columns col, col+1 of one row, which is what swiglu pairs. */
typedef struct GemmPair GemmPair;
struct GemmPair {
	LLVMValueRef col;			/* i32, even */
	LLVMValueRef acc[2];			/* f32 accumulators of col, col+1 */
	LLVMValueRef (*colv)[CG_EP_MAX];	/* COL leaves loaded ahead, [e][i]; NULL: load here */
	LLVMValueRef (*matv)[CG_EP_MAX];	/* MAT leaves loaded ahead (gemm_mat_leaves); NULL: here */
	LLVMValueRef res[2], out;		/* results, and the (output) column of res[0] */
};

static inline int esize(DType t) { return t == DT_F32 ? 4 : t == DT_F8E4M3 || t == DT_F8E5M2 ? 1 : 2; }

/* A's columns: K, or K / a_rep when A is read a_rep times along K. */
static inline int64_t
gemm_a_cols(const GemmSpec *s)
{
	return s->a_rep > 1 ? s->K / s->a_rep : s->K;
}

static inline int
gemm_io_type(DType t)
{
	return t == DT_BF16 || t == DT_F16 || t == DT_F32;
}

/* The address of element elems64 (i64) of esz bytes from base. */
static inline LLVMValueRef
gptr(CgFn *f, LLVMValueRef base, LLVMValueRef elems64, int esz)
{
	return cg_gep(f, base, cg_muli(f, elems64, esz), 1);
}

/* k_gemm_common.c */
/* Copy in, fill in defaults (lda, ldb, ldc, ...), sw, width and nt. */
void gemm_resolve(GemmCore *k, const GemmSpec *in);
/* The rules of groups, schedule, store and epilogue; who prefixes the message. */
int gemm_check_common(const GemmCore *k, const char *who, Diag *d);
/* Declare the kernel, bind its parameters, compute tid/lane/warp; NULL on error. */
CgFn *gemm_begin(GemmCore *k, CgModule *m, const char *name, Diag *d);
/* The schedule around body (one tile, coordinates set), then the kernel's end:
 * gemm_prologue (the expert table), gemm_schedule (the loop), gemm_finish. */
int gemm_end(GemmCore *k, void (*body)(GemmCore *), const char *note);
void gemm_prologue(GemmCore *k);
/* The schedule's tiles: of all experts (after gemm_prologue), or cdiv(M, bm) * nt. */
LLVMValueRef gemm_work_total(GemmCore *k);
/* Tile w (i32) of the schedule: e, row0, rend, n0, bexp. */
void gemm_tile_coords(GemmCore *k, LLVMValueRef w);
void gemm_schedule(GemmCore *k, void (*body)(GemmCore *));
/* Persistent: worker part (i32) of parts takes every parts-th of the CTA's items. */
void gemm_schedule_share(GemmCore *k, void (*body)(GemmCore *), LLVMValueRef part, int parts);
/* Persistent schedules: this CTA's item of round j (i32; GemmSpec.snake: serpentine). */
LLVMValueRef gemm_round_item(GemmCore *k, LLVMValueRef j);
/* Persistent, within body: k->w is not the CTA's first item (i1); the CTA's
 * item after k->w (i32: past the work where it has none). */
LLVMValueRef gemm_later_item(GemmCore *k);
LLVMValueRef gemm_next_item(GemmCore *k);
/* GemmSpec.fold: the ticket and the last CTA's combine (after the work loop). */
void gemm_fold(GemmCore *k);
int gemm_finish(GemmCore *k, const char *note);
/* Append " tiles gather scatter grouped E=.. ep: .." to buf at at. */
int gemm_note_tail(const GemmCore *k, char *buf, size_t n, int at);
/* The dt element at base[idx64] (i64) from global memory, as f32. */
LLVMValueRef gemm_load_f32(CgFn *f, LLVMValueRef base, LLVMValueRef idx64, DType dt);
/* The row of A that GEMM row r (i32; clamped below rend) reads. */
LLVMValueRef gemm_a_row(GemmCore *k, LLVMValueRef r);
/* The row of C that GEMM row r (i32) is stored to. */
LLVMValueRef gemm_dest_row(GemmCore *k, LLVMValueRef r);
/* The COL leaf i at column col (i32) of its space. */
LLVMValueRef gemm_col_leaf(GemmCore *k, int i, LLVMValueRef col);
/* The destination row and the row leaves of GEMM row r (inside r < rend). */
void gemm_row(GemmCore *k, LLVMValueRef r, GemmRow *row);
/* Values a pair's MAT leaves load (2 per leaf before swiglu, 1 after); 0: none. */
int gemm_mat_values(const GemmCore *k);
/* Pair (row, col)'s MAT leaves, loaded ahead into matv[e][i] for gemm_ep_pair. */
void gemm_mat_leaves(GemmCore *k, const GemmRow *row, LLVMValueRef col, LLVMValueRef (*matv)[CG_EP_MAX]);
/* The epilogue program on one pair; returns the results: 2, or 1 after swiglu. */
int gemm_ep_pair(GemmCore *k, const GemmRow *row, GemmPair *p);
/* n (1 or 2) values to C[drow, col..]. */
void gemm_store(GemmCore *k, LLVMValueRef drow, LLVMValueRef col, LLVMValueRef *v, int n);
/* The same in two steps: C's element (drow, col), and the results stored there. */
LLVMValueRef gemm_c_ptr(GemmCore *k, LLVMValueRef drow, LLVMValueRef col);
void gemm_store_at(GemmCore *k, LLVMValueRef p, LLVMValueRef *v, int n);

/* ---- the tensor-core kernel ---- */

#define MAXI 16			/* load chunks per thread and operand */
#define MAXF 32			/* fragments per warp in m or n (32: a 64x256 warpgroup tile, GemmSpec.wg_wide) */
#define MAXF_MMA 16		/* ... on mma.sync (warp tiles up to 256 x 128) */
#define BQ_DWORDS 64		/* direct quantised B: words per lane and k-tile, at most */
#define PRE_MI 4		/* gemm_rows_ahead: fragment row blocks, at most */

typedef struct G G;
struct G {
	GemmCore k;		/* first: the common callbacks cast back */
	DType mt;		/* the mma input type: bf16, f16, tf32 or e4m3 (FP8 x FP8) */
	int eb, kstep;		/* its bytes in shared memory (tf32: 4, f32; FP8: 1), k per mma.sync */
	int wtm, wtn, mi, ni, kt;
	int mstride;		/* rows between fragment row blocks: 16 (mma), 64 (wgmma) */
	int a_ld, b_ld;		/* shared row pitch, bytes */
	int a_bytes, stage;
	int dyn_off;		/* dynamic stream-K (GemmSpec.units): smem of the next units, the last flag */
	/* group quantisation: output columns per fragment, per warp; segment width; smem */
	int q_fw, q_wow, q_sg, q_off, q_bytes;
	/* GemmSpec.tma_store: the consumer warpgroups' output buffers (from the aligned base), bytes of
	 * each warpgroup's, 64-row buffers in them */
	int o_off, o_bytes, o_nbuf;
	int o_late;	/* --debug=dense-c2: a block's results computed into the accumulators before the wait
			 * for its buffer (gemm_epilogue), so the previous block's TMA store reads meanwhile */
	LLVMValueRef q_scale, q_zero;	/* static quantisation, f32 */
	/* per thread */
	LLVMValueRef wm0, wn0;
	LLVMValueRef a_soff[MAXI], b_soff[MAXI];	/* smem byte offsets of load chunks */
	LLVMValueRef a_row[MAXI], a_kc[MAXI], b_row[MAXI], b_kc[MAXI];
	int a_n, b_n, a_chunks, b_chunks;		/* chunks per thread, per tile */
	/* mma.sync loads: chunk i's smem (A, B) and global (B) addresses are chunk
	 * 0's + i x these bytes (0: computed per chunk) */
	int64_t a_sstep, b_sstep, b_gstep;
	LLVMValueRef a_lane, b_lane;			/* ldmatrix lane offsets */
	LLVMValueRef acc[MAXF][MAXF][4];		/* vars */
	/* per tile */
	LLVMValueRef a_src[MAXI], b_src[MAXI];
	LLVMValueRef a_live[MAXI];	/* per tile, i1: A chunk i's row is in the tile (NULL: load every row) */
	/* quantised B (k_gemm_mixed.c) */
	struct {
		int bits, ka;		/* bits per element; k per 128-byte fragment atom */
		int ssz, ns;		/* scale bytes; scale rows per stage */
		int b_bytes, s_bytes;	/* per stage: packed B, one of scales/zeros */
		int nchunk[3], nper[3];	/* 16-byte chunks per stage: B, scales, zeros; per thread */
		LLVMValueRef soff[3][MAXI];	/* per thread: the chunks' smem offsets in a stage */
		LLVMValueRef goff[3][MAXI];	/* ... and global byte offsets at k-tile 0 (i64) */
		LLVMValueRef src[3][MAXI];	/* per tile: global addresses at k-tile 0 (NULL: gemm_bq_src) */
		int64_t gstep[3];		/* bytes from chunk j to j+1 where constant (else 0) */
		LLVMValueRef w_lane, s_lane;	/* smem offsets of the lane's word and scale */
		LLVMValueRef sv[MAXF], zv[MAXF];	/* vars: fragment j's group scale, zero point (as used) */
		LLVMValueRef wv[MAXF][4];	/* vars: fragment j's packed words of the atom's vector */
		int vec;			/* the layout's lane vectors (1: none) */
		/* direct (CgBQuant.direct): the k-tile's words in registers, ni x atoms */
		int atoms;			/* atoms per k-tile: bk / ka */
		LLVMValueRef d_lane;		/* i64: the lane's byte offset in the warp's first n8 row */
		LLVMValueRef dsrc;		/* per tile: B of the tile's first n8 row + d_lane */
		LLVMValueRef dw[BQ_DWORDS];	/* vars: the lane's words, [j * atoms + a]: of the current
						 * k-tile, or the next one's where already reloaded */
		LLVMValueRef dptr;		/* per k-tile: where the next k-tile's words are */
		LLVMValueRef bigv;		/* var (i1): the group has an e8m0 scale > 2 in some lane */
		/* group sums (CgBQuant.gacc, gemm_bq_gacc_scales): k-steps a group, 0: off */
		int gsteps;
		LLVMValueRef c_lane;		/* smem offset of the scales of the lane's accumulator columns */
		LLVMValueRef fs[MAXF_MMA];	/* vars: block j's scale pair of those columns, raw bits */
		LLVMValueRef fz[MAXF_MMA];	/* ... and zero-point pair (CgBQuant.zero) */
		LLVMValueRef pacc[MAXF_MMA][MAXF_MMA][4];	/* vars: the group's f32 sums of a (M + u) */
		LLVMValueRef rs[MAXF_MMA][4];	/* vars: the group's row sums of A (a mma with B = 1) */
		/* bulk (CgBQuant.bulk): an mbarrier a stage, at mbar + 8 x stage */
		int mbar, tx;			/* their shared offset; the bytes a stage's copies bring */
		LLVMValueRef ph;		/* var (i32): bit i, the parity stage i's next wait takes */
	} bq;
	/* gemm_rows_ahead: the epilogue's rows of the tile, loaded before its k-tiles (npre 0: none) */
	GemmRow pre[PRE_MI][2];
	int npre;
	/* the wgmma mainloop (k_gemm_wgmma.c) */
	struct {
		int wg_m, wg_n;		/* warpgroups over the tile's rows and columns */
		int a_bytes, stage;	/* per stage: A's bytes, both operands' (swizzled, unpadded) */
		LLVMValueRef base;	/* i32: 1 KiB-aligned offset of stage 0 in shared memory */
		LLVMValueRef addr;	/* i32: its shared-window address (descriptors) */
		LLVMValueRef buf;	/* emu: the accumulators as one array */
		int nb;			/* row blocks a k-tile issues (0: mi, -1: none; gemm_wgmma_by_rows) */
		LLVMValueRef fin[MAXF][MAXF][4];	/* FP8 x FP8: the promoted sums (acc: a block's) */
		int f8s;			/* ... shared offset of the scale slots (one a stage) */
		LLVMValueRef ssrc[4];		/* ... per tile: the thread's scale sources (gemm_f8_scale_sources) */
	} wg;
};

/* k_gemm.c */
/* A's k-tile (i32) for k-tile kt of the tile's loop (of the slice under
 * split-K): kt itself, or modulo A's k-tiles when a_rep > 1. */
LLVMValueRef gemm_a_ktile(G *g, LLVMValueRef kt);
/* Issue the loads of k-tile kt (i32) into the stage at byte offset soff. */
void gemm_load_stage(G *g, LLVMValueRef soff, LLVMValueRef kt);

/* k_gemm_mixed.c: quantised B (GemmSpec.bq) */
/* Sizes of the B part of a stage (after layout's defaults). */
void gemm_bq_layout(G *g);
/* The format and tile rules; 0 or a diagnostic. */
int gemm_bq_check(const G *g, Diag *d);
/* Per thread: the chunk offsets and the lane's fragment offsets. */
void gemm_bq_setup(G *g);
/* Per tile: the chunks' global addresses. */
void gemm_bq_sources(G *g);
/* B ahead of the grid wait: k-tiles [ka, kb) of the tile at n0 toward L2 (stream_ahead). */
void gemm_bq_ahead(G *g, LLVMValueRef n0, LLVMValueRef ka, LLVMValueRef kb);
/* Group sums (g->bq.gsteps > 0): at a group's first k-step kk, the scales
 * and zero points of the lane's accumulator columns from the stage at soff;
 * the B fragment of ones for A's row sums; after the group's last k-step,
 * acc += scale * (sum - (M + z) * row sum). */
void gemm_bq_gacc_scales(G *g, LLVMValueRef soff, int kk);
LLVMValueRef gemm_bq_gacc_ones(G *g);
void gemm_bq_gacc_fold(G *g);
/* Chunk j of part i's (B, scales, zero points) source at k-tile 0. */
LLVMValueRef gemm_bq_src(G *g, int i, int j);
/* cp.async k-tile kt's packed B, scales and zero points into the stage at soff. */
void gemm_bq_load(G *g, LLVMValueRef soff, LLVMValueRef kt);
/* bulk B (CgBQuant.bulk; else nothing): the mbarriers made (gemm_bq_bulk_init,
 * before the prologue; a CTA barrier follows), a stage with no k-tile to load
 * completed by one plain arrival (gemm_bq_skip, bulk only: the consumers wait
 * for every stage in turn), and every thread's wait for the stage at soff
 * (gemm_bq_wait) before it reads the stage's B */
void gemm_bq_bulk_init(G *g);
/* CG_QBULK_TMA: the kernel's tensor maps (after gemm_begin) */
void gemm_bq_tmaps(G *g);
void gemm_bq_skip(G *g, LLVMValueRef soff);
void gemm_bq_wait(G *g, LLVMValueRef soff);
/* The B fragments (ni x 2 registers of the mma type) of k-step kk, dequantised. */
void gemm_bq_frags(G *g, LLVMValueRef soff, int kk, LLVMValueRef (*b)[2]);
/* Direct B: k-tile 0's words into registers (per tile, before the loop);
 * where k-tile kt's (i32) are (at the top of k-tile kt - 1, whose
 * gemm_bq_frags reload each vector of words after its last k-step). */
void gemm_bq_first(G *g);
void gemm_bq_fetch(G *g, LLVMValueRef kt);

/* k_gemm_wgmma.c */
/* Warpgroup tiles, fragment counts (mi, ni, mstride) and stage sizes. */
void gemm_wgmma_layout(G *g);
int gemm_wg_cols(const GemmSpec *s);	/* the most columns a warpgroup tile has: 128, 256 with wg_wide */
/* The target and the tile rules of the wgmma mainloop; 0 or a diagnostic. */
int gemm_wgmma_check(const CgTarget *t, const G *g, Diag *d);
/* Per thread, after the common setup: warpgroup origin, swizzled chunk offsets. */
void gemm_wgmma_setup(G *g);
/* One tile's k-loop; the accumulators end in g->acc. */
void gemm_wgmma_mainloop(G *g);
/* The pieces of it the warp-specialised mainloop (k_gemm_ws.c) shares: */
/* descriptors of stage 0 at this warpgroup's rows (wm0, warp) and columns (wn0) */
void gemm_wgmma_descs(G *g, LLVMValueRef *da0, LLVMValueRef *db0);
/* wgmma.fence, the k-steps of stage st (i32) (scale i32: 0 starts the sums), commit */
void gemm_wgmma_ktile(G *g, LLVMValueRef da0, LLVMValueRef db0, LLVMValueRef st, LLVMValueRef scale);
/* ... over fragment columns j0..j0+nj only (m64 n(8 nj), B's rows or columns 8 j0..) */
void gemm_wgmma_ktile_cols(G *g, LLVMValueRef da0, LLVMValueRef db0, LLVMValueRef st, LLVMValueRef scale,
			   int j0, int nj);
void gemm_wgmma_wait(G *g, int n);	/* wgmma.wait_group n */
/* loop(g, arg) for all of the warpgroup's row blocks, and (branch) its first alone when the second has no
 * row (none when its only block has none: warpgroups stacked over the rows, 192x128) */
void gemm_wgmma_by_rows(G *g, void (*loop)(G *, void *), void *arg);
void gemm_wgmma_acc_fence(G *g);	/* after wait_group 0: the accumulators usable */
/* The 128-byte-swizzled K-major offset of 16-byte chunk kc of row `row`
 * (blocks of 64 k of `rows` rows), as a TMA box writes it. */
LLVMValueRef gemm_kmajor_off(CgFn *f, LLVMValueRef row, LLVMValueRef kc, int rows);
void gemm_fence_proxy_async(CgFn *f);	/* fence.proxy.async.shared::cta */
/* The 1 KiB-aligned start of the dynamic shared memory: offset, address (i32). */
void gemm_aligned_smem(CgFn *f, LLVMValueRef *base, LLVMValueRef *addr);
/* FP8 x FP8 (GemmSpec.f8; the mainloop is gemm_wgmma_mainloop's variant) */
int gemm_f8_check(const G *g, Diag *d);	/* its rules; 0 or a diagnostic */
LLVMValueRef gemm_b_row(G *g, LLVMValueRef n);	/* where B row n (i32) of an expert is stored */
/* Its promotion, which the warp-specialised consumers share: per tile fin =
 * 0; per k-tile and column half, the thread's scales (sa[2 mi], sb[2 ni])
 * from the stage's scale slot, then, after the wait that retired the half
 * and the accumulator fence, fin += acc * sb * sa; after the last, fin into acc. */
void gemm_f8_tile(G *g);
/* (of fragment columns j0..j0+nj; sb indexed as for all columns) */
void gemm_f8_promote_cols(G *g, LLVMValueRef *sa, LLVMValueRef *sb, int j0, int nj);
/* half h (0, 1) of the warpgroup's fragment columns: j0, nj (the two wgmma groups of a k-tile) */
void gemm_f8_half(const G *g, int h, int *j0, int *nj);
/* The scales staged with each stage (a slot of gemm_f8_slot bytes a stage at
 * g->wg.f8s; gemm_f8_slot_at: stage st's, i32): per tile the sources of
 * the nthr staging threads' scales, per k-tile their cp.async copies, and
 * the promotion's reads (sa[2 mi], sb[2 j0 .. 2 (j0+nj))). */
int gemm_f8_slot(const G *g);
LLVMValueRef gemm_f8_slot_at(G *g, LLVMValueRef st);
void gemm_f8_scale_sources(G *g, int nthr);
void gemm_f8_scale_copies(G *g, int nthr, LLVMValueRef slot, LLVMValueRef kt);
void gemm_f8_stage_scales(G *g, LLVMValueRef slot, int j0, int nj, LLVMValueRef *sa, LLVMValueRef *sb);
void gemm_f8_result(G *g);
void gemm_f8_vars(G *g);	/* the fin vars (setup) */

/* k_gemm.c, for k_gemm_ws.c */
/* Rows past the tile's expert (or M) are not loaded (gemm_live_rows): per tile,
 * a_live[i] of the n chunks whose rows are a_row[i] (none: NULL) */
int gemm_live_rows(const GemmSpec *s);
/* The WS mainloop's A by TMA with live rows at 16-row steps: a second map of A ("A_rows_map", 16-row
 * boxes) for tiles of few rows, A_map's box the whole tile's rows for the others (k_gemm_ws.c) */
int gemm_a_rows_map(const GemmSpec *s);
/* A's rows gathered by the producers' cp.async (not by one-row TMA boxes, GemmSpec.gather_tma) */
static inline int gemm_a_cp_async(const GemmSpec *s) { return s->gather && !s->gather_tma; }
/* the kernel takes gather_idx: A gathered, or only the epilogue's row leaves (GemmSpec.leaf_gather) */
static inline int gemm_has_gidx(const GemmSpec *s) { return s->gather || s->leaf_gather; }
void gemm_a_live(G *g, int n);
void gemm_quant_setup(G *g);	/* static quantisation's scale and zero point */
void gemm_epilogue(G *g);	/* the program on g->acc, then the store */
/* GemmSpec.tma_store (k_gemm_ws.c): C's row block mi of each consumer warpgroup through its
 * shared buffer: begin (the buffer free), put fragment (h, j)'s two results, flush (the TMA
 * stores); end: the stores' reads waited for, before the consumers leave */
void gemm_ostage_begin(G *g, int mi);
void gemm_ostage_put(G *g, int mi, int h, int j, LLVMValueRef *v);
void gemm_ostage_flush(G *g, int mi);
void gemm_ostage_end(G *g);
/* Grouped GEMMs: the epilogue's rows (destination, row leaves) loaded now,
 * before the tile's k-tiles, for the next gemm_epilogue (none: g->npre 0). */
void gemm_rows_ahead(G *g);

/* k_gemm_ws.c: the warp-specialised sm_90a mainloop (CG_MAINLOOP_WS) */
void gemm_ws_layout(G *g);
int gemm_ws_check(const CgTarget *t, const G *g, Diag *d);
int gemm_ws_emit(G *g, CgModule *m, const char *name, Diag *d);

#endif
