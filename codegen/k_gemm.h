/*
 * k_gemm.h — private to the GEMM builder: the state of one GEMM kernel
 * under construction, shared by the builder proper (k_gemm.c: layout,
 * checks, scheduler, loads, epilogue, the mma.sync mainloop) and the
 * sm_90a mainloop (k_gemm_wgmma.c).
 *
 * Both mainloops leave the accumulators in acc[mi][j][q]: fragment row
 * block mi (rows wm0 + mstride*mi + lane/4, +8 for q >= 2), column block j
 * (columns wn0 + 8j + 2(lane%4) + q%2), which is the m16n8 accumulator
 * layout of mma.sync and, per warp, the wgmma m64nN one (mstride 64).
 */
#ifndef MOEC_K_GEMM_H
#define MOEC_K_GEMM_H

#define CG_INTERNAL
#include "codegen.h"

#define MAXI 16			/* load chunks per thread and operand */
#define MAXF 16			/* fragments per warp in m or n */

typedef struct G G;
struct G {
	CgFn *f;
	GemmSpec s;		/* defaults resolved */
	DType mt;		/* the mma input type */
	int nthr, nwarp, wtm, wtn, mi, ni, kt;
	int mstride;		/* rows between fragment row blocks: 16 (mma), 64 (wgmma) */
	int sw;			/* index of swiglu, -1 if none */
	int64_t width;		/* output columns: N, or N/2 after swiglu */
	int a_ld, b_ld;		/* shared row pitch, bytes */
	int a_bytes, stage, tab, wsum, smem;
	/* group quantisation: output columns per fragment, per warp; segment width; smem */
	int q_fw, q_wow, q_sg, q_off, q_bytes;
	/* parameters */
	LLVMValueRef A, B, C, Cs, gidx, sidx, offs, T, ep[CG_EP_MAX];
	LLVMValueRef q_scale_p, q_zero_p, q_scale, q_zero;	/* static quantisation */
	/* per thread */
	LLVMValueRef tid, lane, warp, wm0, wn0;
	LLVMValueRef a_soff[MAXI], b_soff[MAXI];	/* smem byte offsets of load chunks */
	LLVMValueRef a_row[MAXI], a_kc[MAXI], b_row[MAXI], b_kc[MAXI];
	int a_n, b_n, a_chunks, b_chunks;		/* chunks per thread, per tile */
	LLVMValueRef a_lane, b_lane;			/* ldmatrix lane offsets */
	LLVMValueRef acc[MAXF][MAXF][4];		/* vars */
	/* per tile */
	LLVMValueRef e, row0, rend, n0, bexp;
	LLVMValueRef a_src[MAXI], b_src[MAXI];
	/* the wgmma mainloop (k_gemm_wgmma.c) */
	struct {
		int wg_m, wg_n;		/* warpgroups over the tile's rows and columns */
		int a_bytes, stage;	/* per stage: A's bytes, both operands' (swizzled, unpadded) */
		LLVMValueRef base;	/* i32: 1 KiB-aligned offset of stage 0 in shared memory */
		LLVMValueRef addr;	/* i32: its shared-window address (descriptors) */
		LLVMValueRef buf;	/* emu: the accumulators as one array */
	} wg;
};

static inline int esize(DType t) { return t == DT_F32 ? 4 : 2; }

/* k_gemm.c */
/* Issue the loads of k-tile kt (i32) into the stage at byte offset soff. */
void gemm_load_stage(G *g, LLVMValueRef soff, LLVMValueRef kt);

/* k_gemm_wgmma.c */
/* Warpgroup tiles, fragment counts (mi, ni, mstride) and stage sizes. */
void gemm_wgmma_layout(G *g);
/* The target and the tile rules of the wgmma mainloop; 0 or a diagnostic. */
int gemm_wgmma_check(const CgTarget *t, const G *g, Diag *d);
/* Per thread, after the common setup: warpgroup origin, swizzled chunk offsets. */
void gemm_wgmma_setup(G *g);
/* One tile's k-loop; the accumulators end in g->acc. */
void gemm_wgmma_mainloop(G *g);

#endif
