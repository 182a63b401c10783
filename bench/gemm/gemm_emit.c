/*
 * gemm_emit — PTX (and, with ptxas, cubins) for the GEMM specs that
 * bench/gemm/run_gemm.py checks against torch and times on the GPU.
 *
 *	gemm_emit [-t sm_90a] [-o DIR] [--list] [--only SUBSTR[,SUBSTR...]] [--ptx-only] [--scale S]
 *
 * Writes DIR/<case>.ptx, DIR/<case>.cubin and DIR/manifest.json: for each
 * case its kernel (parameters with roles, block, grid expressions, shared
 * memory, ptxas registers and spills) and the spec the script needs to
 * build inputs and the reference (sizes, dtypes, layouts, epilogue).
 * --scale S divides the problem sizes by S (to test run_gemm.py --fake on a
 * CPU).  Exit 0, or 1 when a spec fails to emit or assemble.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen.h"

typedef struct Case Case;
struct Case {
	const char *name;
	const char *problem;	/* what run_gemm.py does with it: dense, moe_up, moe_down, check */
	GemmSpec s;
};

#define MAXCASE 192
static Case cases[MAXCASE];
/* gpt-oss's act=oai, the one clamped swiglu the benchmark times */
static const IrGluAttrs oai = {.act = IR_GLU_OAI, .interleave = 1, .alpha = 1.702, .limit = 7.0};
static int ncase;

static GemmSpec *
add(const char *name, const char *problem)
{
	Case *c;

	if (ncase == MAXCASE) {
		fprintf(stderr, "gemm_emit: more than %d cases (MAXCASE)\n", MAXCASE);
		exit(1);
	}
	c = &cases[ncase++];

	c->name = name;
	c->problem = problem;
	cg_gemm_default(&c->s);
	return &c->s;
}

static void
tile(GemmSpec *s, int bm, int bn, int bk, int wm, int wn, int st, int minc)
{
	s->bm = bm;
	s->bn = bn;
	s->bk = bk;
	s->warps_m = wm;
	s->warps_n = wn;
	s->stages = st;
	s->min_ctas = minc;
}

/* Persistent grids: as many CTAs as fit on 132 SMs at this tile's shared memory. */
static void
persistent(GemmSpec *s)
{
	int smem = cg_gemm_smem(s), per = 228 * 1024 / (smem + 1024);

	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 132 * (per < 1 ? 1 : per > 4 ? 4 : per);
}

/* A check case over 40 experts (N = 256) whose rows are weighted by
 * route_w and stored through the scatter index; f8: e4m3 operands with
 * scales per 128 k and an f32 output. */
static GemmSpec *
check_scatter(const char *name, int f8, int64_t K)
{
	GemmSpec *s = add(name, "check");
	int a;

	if (f8) {
		s->a_dt = s->b_dt = DT_F8E4M3;
		s->f8.group = 128;
		s->c_dt = DT_F32;
	}
	s->N = 256;
	s->K = K;
	s->groups = 40;
	s->store = CG_STORE_SCATTER;
	a = cg_ep_acc(&s->ep);	/* the accumulator first, then the row */
	cg_ep_op(&s->ep, OP_MUL, a, cg_ep_row(&s->ep, DT_F32, CGR_SCATTER, "route_w"));
	return s;
}

/* A check case over 8 experts (N = 256) reading A rows through the index,
 * two per token ([T,2,H] inputs), then SwiGLU; f8 as above. */
static GemmSpec *
check_gather_swiglu(const char *name, int f8, int64_t K)
{
	GemmSpec *s = add(name, "check");

	if (f8) {
		s->a_dt = s->b_dt = DT_F8E4M3;
		s->f8.group = 128;
	}
	s->N = 256;
	s->K = K;
	s->groups = 8;
	s->m_per_t = 2;
	s->gather = 1;
	s->gather_div = 2;
	cg_ep_swiglu(&s->ep, cg_ep_acc(&s->ep), NULL);
	return s;
}

/* Dense: y = gelu(x W^T + b), Mixtral-size FFN up projection. */
static GemmSpec *
dense(const char *name, int bm, int bn, int bk, int wm, int wn, int st, int minc)
{
	GemmSpec *s = add(name, "dense");
	int a, b;

	s->N = 14336;
	s->K = 4096;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 0, "bias");
	cg_ep_op(&s->ep, OP_GELU, cg_ep_op(&s->ep, OP_ADD, a, b), -1);
	tile(s, bm, bn, bk, wm, wn, st, minc);
	return s;
}

/* MoE gate|up: h = swiglu(x[gidx / 2] W13_e^T), rows interleaved gate/up. */
static GemmSpec *
moe_up(const char *name, int bm, int bn, int bk, int wm, int wn, int st, int minc)
{
	GemmSpec *s = add(name, "moe_up");

	s->N = 2 * 14336;
	s->K = 4096;
	s->groups = 8;
	s->m_per_t = 2;
	s->gather = 1;
	s->gather_div = 2;
	cg_ep_swiglu(&s->ep, cg_ep_acc(&s->ep), NULL);
	tile(s, bm, bn, bk, wm, wn, st, minc);
	return s;
}

/* MoE down: y_pairs[sidx[r]] = w[sidx[r]] * (h[r] W2_e^T). */
static GemmSpec *
moe_down(const char *name, int bm, int bn, int bk, int wm, int wn, int st, int minc)
{
	GemmSpec *s = add(name, "moe_down");
	int a, w;

	s->N = 4096;
	s->K = 14336;
	s->groups = 8;
	s->m_per_t = 2;
	s->store = CG_STORE_SCATTER;
	a = cg_ep_acc(&s->ep);
	w = cg_ep_row(&s->ep, DT_F32, CGR_SCATTER, "route_w");
	cg_ep_op(&s->ep, OP_MUL, a, w);
	tile(s, bm, bn, bk, wm, wn, st, minc);
	return s;
}

/*
 * DeepSeek-V3's expert GEMMs, T = 4096 tokens of top-8 over 256 experts
 * (128 +- 11 rows an expert).  gate|up: N = 2 x 2048, K = 7168, SwiGLU to
 * bf16 (B's rows in order, not interleaved: the same work); gathered rows
 * (x through the permutation) or, `_sorted`, A already in expert order (TMA
 * for both).  down: N = 7168, K = 2048, routing weight and scattered rows,
 * f32 out.  run_gemm.py checks each at T = 300 (skewed) and times it alone
 * at T = 4096 (problems "f8" and "ds").
 */
static GemmSpec *
ds_moe(const char *name, const char *problem, int up, int gather)
{
	GemmSpec *s = add(name, problem);
	int a, w;

	s->groups = 256;
	s->m_per_t = 8;
	if (up) {
		s->N = 2 * 2048;
		s->K = 7168;
		s->gather = gather;
		s->gather_div = gather ? 8 : 1;
		cg_ep_swiglu(&s->ep, cg_ep_acc(&s->ep), NULL);
	} else {
		s->N = 7168;
		s->K = 2048;
		s->c_dt = DT_F32;
		s->store = CG_STORE_SCATTER;
		a = cg_ep_acc(&s->ep);
		w = cg_ep_row(&s->ep, DT_F32, CGR_SCATTER, "route_w");
		cg_ep_op(&s->ep, OP_MUL, a, w);
	}
	return s;
}

/* FP8 x FP8 (e4m3 A and B, f32 scales per row and 128 k of each;
 * k_gemm_wgmma.c's promotion) at those shapes. */
static GemmSpec *
f8_moe(const char *name, int up, int gather, int bm, int bn, int wm, int wn, int st)
{
	GemmSpec *s = ds_moe(name, "f8", up, gather);

	s->a_dt = s->b_dt = DT_F8E4M3;
	s->f8.group = 128;
	tile(s, bm, bn, 128, wm, wn, st, 1);
	return s;
}

/* bf16 at those shapes, bk 64. */
static GemmSpec *
ds_bf16(const char *name, int up, int gather, int bm, int bn, int wm, int wn, int st)
{
	GemmSpec *s = ds_moe(name, "ds", up, gather);

	tile(s, bm, bn, 64, wm, wn, st, 1);
	return s;
}

/* The wgmma mainloop (sm_90a); wait0: each k-tile's wgmma group retires before the next
 * (what 2-3 stages do anyway). */
static GemmSpec *
wgmma(GemmSpec *s, int wait0)
{
	s->mainloop = CG_MAINLOOP_WGMMA;
	s->no_frag_pipe = wait0;
	return s;
}

/* The warp-specialised mainloop (sm_90a: TMA, mbarriers, producer/consumer warpgroups). */
static GemmSpec *
ws(GemmSpec *s)
{
	s->mainloop = CG_MAINLOOP_WS;
	return s;
}

/* Ping-pong consumers (k_gemm_ws.c): two warpgroups, each on whole bm x bn
 * tiles of its own (4 warps lay one out), taking turns at the tensor cores;
 * persistent over 132 CTAs. */
static GemmSpec *
pingpong(GemmSpec *s)
{
	s->mainloop = CG_MAINLOOP_WS;
	s->ws_mode = CG_WS_PINGPONG;
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 132;
	return s;
}

/* Clusters of 2 (cooperative, or ping-pong), persistent over 132 CTAs. */
static GemmSpec *
cluster2(GemmSpec *s, int pp)
{
	if (pp)
		pingpong(s);
	s->mainloop = CG_MAINLOOP_WS;
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 132;
	s->cluster = 2;
	return s;
}

/* Clusters of 2 on row-tile pairs sharing B (dense). */
static GemmSpec *
cluster_b(GemmSpec *s)
{
	s->cluster_b = 1;
	return s;
}

/* Warpgroup tiles of up to 256 columns (GemmSpec.wg_wide), on schedule sc (persistent: 132 CTAs). */
static GemmSpec *
wide(GemmSpec *s, CgSched sc)
{
	s->wg_wide = 1;
	s->sched = sc;
	if (sc == CG_SCHED_PERSISTENT)
		s->ctas = 132;
	return s;
}

static void
build(void)
{
	GemmSpec *s;
	int a, b, r, x, y;

	/* dense, prefill-sized tiles: 64x64 warp tiles (w2x4, w4x2; w2x2 at 2 CTAs/SM) */
	dense("d_128x256x64_s3", 128, 256, 64, 2, 4, 3, 1);
	dense("d_128x256x32_s4", 128, 256, 32, 2, 4, 4, 1);
	dense("d_256x128x64_s3", 256, 128, 64, 4, 2, 3, 1);
	dense("d_128x128x64_s3_w4", 128, 128, 64, 2, 2, 3, 2);
	dense("d_128x128x32_s4_w4", 128, 128, 32, 2, 2, 4, 2);
	dense("d_128x128x64_s3", 128, 128, 64, 2, 4, 3, 2);
	/* controls: run 1's loop (no fragment pipelining) */
	s = dense("d_128x128x64_s3_plain", 128, 128, 64, 2, 4, 3, 2);
	s->no_frag_pipe = 1;
	s = dense("d_128x256x64_s3_plain", 128, 256, 64, 2, 4, 3, 1);
	s->no_frag_pipe = 1;
	/* dense, decode-sized tiles: deeper pipelines */
	dense("d_16x128x64_s4", 16, 128, 64, 1, 4, 4, 0);
	dense("d_16x128x128_s4", 16, 128, 128, 1, 4, 4, 0);
	dense("d_16x128x128_s5", 16, 128, 128, 1, 4, 5, 0);
	dense("d_16x64x128_s5", 16, 64, 128, 1, 4, 5, 0);

	/* MoE decode */
	moe_up("up_16x128x128_s3_t", 16, 128, 128, 1, 4, 3, 0);
	moe_up("up_16x128x128_s4_t", 16, 128, 128, 1, 4, 4, 0);
	moe_up("up_16x128x128_s5_t", 16, 128, 128, 1, 4, 5, 0);
	moe_up("up_16x64x128_s5_t", 16, 64, 128, 1, 4, 5, 0);
	s = moe_up("up_16x128x128_s4_p", 16, 128, 128, 1, 4, 4, 0);
	persistent(s);
	moe_down("dn_16x128x128_s3_t", 16, 128, 128, 1, 4, 3, 0);
	moe_down("dn_16x128x128_s4_t", 16, 128, 128, 1, 4, 4, 0);
	moe_down("dn_16x128x128_s5_t", 16, 128, 128, 1, 4, 5, 0);
	moe_down("dn_16x64x128_s5_t", 16, 64, 128, 1, 4, 5, 0);
	s = moe_down("dn_16x128x128_s4_p", 16, 128, 128, 1, 4, 4, 0);
	persistent(s);
	/* MoE prefill */
	moe_up("up_128x256x64_s3_t", 128, 256, 64, 2, 4, 3, 1);
	moe_up("up_128x128x64_s3_w4_t", 128, 128, 64, 2, 2, 3, 2);
	moe_down("dn_128x256x64_s3_t", 128, 256, 64, 2, 4, 3, 1);
	moe_down("dn_128x128x64_s3_w4_t", 128, 128, 64, 2, 2, 3, 2);

	/* sm_90a: the wgmma mainloop on the prefill tiles (same geometry as mma.sync's);
	 * 3 stages retire each k-tile's wgmma group (wait_group 0), 4 keep one in flight */
	wgmma(dense("wd_256x128x64_s3", 256, 128, 64, 4, 2, 3, 1), 0);
	wgmma(dense("wd_128x256x64_s3", 128, 256, 64, 2, 4, 3, 1), 0);
	wgmma(dense("wd_128x128x64_s4_w4", 128, 128, 64, 2, 2, 4, 1), 0);
	wgmma(dense("wd_128x128x64_s3_w4", 128, 128, 64, 2, 2, 3, 2), 0);	/* 2 CTAs per SM */
	wgmma(dense("wd_128x128x64_s4", 128, 128, 64, 2, 4, 4, 1), 0);
	/* 4 stages: fits sm_90a (221 KB) but not sm_80's 163 KB, so programs keep 3 */
	wgmma(dense("wd_256x128x64_s4", 256, 128, 64, 4, 2, 4, 1), 0);
	wgmma(dense("wd_128x256x64_s4", 128, 256, 64, 2, 4, 4, 1), 0);
	wgmma(dense("wd_128x256x64_s4_wait0", 128, 256, 64, 2, 4, 4, 1), 1);
	wgmma(moe_up("wup_128x256x64_s3_t", 128, 256, 64, 2, 4, 3, 1), 0);
	wgmma(moe_up("wup_256x128x64_s3_t", 256, 128, 64, 4, 2, 3, 1), 0);
	wgmma(moe_up("wup_128x128x64_s4_w4_t", 128, 128, 64, 2, 2, 4, 1), 0);
	wgmma(moe_up("wup_128x128x64_s3_w4_t", 128, 128, 64, 2, 2, 3, 2), 0);
	wgmma(moe_up("wup_128x256x64_s4_t", 128, 256, 64, 2, 4, 4, 1), 0);
	wgmma(moe_down("wdn_128x256x64_s3_t", 128, 256, 64, 2, 4, 3, 1), 0);
	wgmma(moe_down("wdn_256x128x64_s3_t", 256, 128, 64, 4, 2, 3, 1), 0);
	wgmma(moe_down("wdn_128x128x64_s4_w4_t", 128, 128, 64, 2, 2, 4, 1), 0);
	wgmma(moe_down("wdn_128x128x64_s3_w4_t", 128, 128, 64, 2, 2, 3, 2), 0);
	wgmma(moe_down("wdn_128x256x64_s4_t", 128, 256, 64, 2, 4, 4, 1), 0);

	/* correctness only: the other paths, at small sizes */
	s = add("c_f16_kn_residual", "check");
	s->N = 512;
	s->K = 256;
	s->a_dt = s->b_dt = s->c_dt = DT_F16;
	s->b_layout = CG_B_KN;
	a = cg_ep_acc(&s->ep);
	r = cg_ep_mat(&s->ep, DT_F16, 0, CGR_DIRECT, "residual");
	cg_ep_op(&s->ep, OP_ADD, a, r);
	tile(s, 64, 128, 64, 2, 2, 3, 0);

	s = add("c_f32_inputs_f32_out", "check");
	s->N = 256;
	s->K = 192;
	s->a_dt = s->b_dt = s->c_dt = DT_F32;
	tile(s, 64, 64, 32, 2, 2, 3, 0);

	s = add("c_kn_gelu_tanh_f32_out", "check");
	s->N = 256;
	s->K = 128;
	s->b_layout = CG_B_KN;
	s->c_dt = DT_F32;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_F32, 0, "bias");
	cg_ep_gelu(&s->ep, cg_ep_op(&s->ep, OP_ADD, a, b), 1);
	tile(s, 64, 64, 64, 2, 2, 2, 0);

	s = add("c_ops_chain", "check");	/* every unpaired op once */
	s->N = 128;
	s->K = 64;
	s->c_dt = DT_F32;
	a = cg_ep_acc(&s->ep);
	r = cg_ep_row(&s->ep, DT_BF16, CGR_DIRECT, "rscale");		/* 1/rms */
	x = cg_ep_op(&s->ep, OP_MUL, a, r);
	y = cg_ep_op(&s->ep, OP_SUB, cg_ep_op(&s->ep, OP_TANH, x, -1),
		     cg_ep_op(&s->ep, OP_SIGMOID, x, -1));
	y = cg_ep_op(&s->ep, OP_ADD, y, cg_ep_op(&s->ep, OP_RELU, cg_ep_op(&s->ep, OP_NEG, x, -1), -1));
	y = cg_ep_op(&s->ep, OP_DIV, y, cg_ep_op(&s->ep, OP_ADD, cg_ep_op(&s->ep, OP_EXP,
		cg_ep_clamp(&s->ep, x, -3, 3), -1), cg_ep_imm(&s->ep, 1.0f)));
	y = cg_ep_op(&s->ep, OP_MAX, cg_ep_op(&s->ep, OP_MIN, y, cg_ep_imm(&s->ep, 0.75f)),
		     cg_ep_op(&s->ep, OP_SILU, x, -1));
	cg_ep_op(&s->ep, OP_ADD, y, cg_ep_gelu(&s->ep, x, 1));
	tile(s, 32, 64, 32, 2, 2, 3, 0);

	s = add("c_grouped_gptoss_bias", "check");
	s->N = 256;
	s->K = 128;
	s->groups = 4;
	s->m_per_t = 4;
	s->gather = 1;
	s->gather_div = 4;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 256, "bias");
	cg_ep_swiglu(&s->ep, cg_ep_op(&s->ep, OP_ADD, a, b), &oai);
	tile(s, 16, 64, 32, 1, 2, 2, 0);

	s = add("c_grouped_many_experts", "check");
	s->N = 128;
	s->K = 64;
	s->groups = 40;
	s->store = CG_STORE_SCATTER;
	a = cg_ep_acc(&s->ep);
	r = cg_ep_row(&s->ep, DT_F32, CGR_SCATTER, "route_w");
	cg_ep_op(&s->ep, OP_MUL, a, r);
	tile(s, 32, 64, 32, 2, 2, 3, 0);
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 7;

	/* the wgmma mainloop's other paths: B [K,N] (N-major descriptors), f16, bk 128, f32 inputs */
	s = add("cw_f16_kn_residual", "check");
	s->N = 512;
	s->K = 256;
	s->a_dt = s->b_dt = s->c_dt = DT_F16;
	s->b_layout = CG_B_KN;
	a = cg_ep_acc(&s->ep);
	r = cg_ep_mat(&s->ep, DT_F16, 0, CGR_DIRECT, "residual");
	cg_ep_op(&s->ep, OP_ADD, a, r);
	wgmma(s, 0);
	tile(s, 64, 128, 64, 2, 2, 3, 0);

	s = add("cw_kn_bk128_gelu_tanh", "check");
	s->N = 512;
	s->K = 384;
	s->b_layout = CG_B_KN;
	s->c_dt = DT_F32;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_F32, 0, "bias");
	cg_ep_gelu(&s->ep, cg_ep_op(&s->ep, OP_ADD, a, b), 1);
	wgmma(s, 0);
	tile(s, 128, 256, 128, 2, 4, 2, 0);

	s = add("cw_f32_inputs_16warps", "check");
	s->N = 256;
	s->K = 256;
	s->a_dt = s->b_dt = s->c_dt = DT_F32;
	wgmma(s, 0);
	tile(s, 256, 128, 64, 4, 4, 2, 0);

	s = add("cw_grouped_gptoss_bias", "check");
	s->N = 256;
	s->K = 128;
	s->groups = 4;
	s->m_per_t = 4;
	s->gather = 1;
	s->gather_div = 4;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 256, "bias");
	cg_ep_swiglu(&s->ep, cg_ep_op(&s->ep, OP_ADD, a, b), &oai);
	wgmma(s, 0);
	tile(s, 64, 128, 64, 2, 2, 4, 0);

	/* the warp-specialised mainloop: dense and the (ungathered) MoE down projection,
	 * tiles and persistent (132 CTAs), 4-6 stages; its check cases */
	ws(dense("wsd_128x256x64_s4", 128, 256, 64, 2, 4, 4, 1));
	ws(dense("wsd_256x128x64_s4", 256, 128, 64, 4, 2, 4, 1));
	ws(dense("wsd_128x128x64_s6_w4", 128, 128, 64, 2, 2, 6, 1));
	s = ws(dense("wsd_128x256x64_s4_p", 128, 256, 64, 2, 4, 4, 1));
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 132;
	ws(moe_down("wsdn_128x256x64_s4_t", 128, 256, 64, 2, 4, 4, 1));
	s = ws(moe_down("wsdn_128x256x64_s4_p", 128, 256, 64, 2, 4, 4, 1));
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 132;
	s = ws(moe_down("wsdn_128x128x64_s6_w4_p", 128, 128, 64, 2, 2, 6, 1));
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 132;
	/* the gathered MoE up projection: A rows by cp.async from the producer
	 * warpgroup (k_gemm_ws.c), B by TMA; against wup_* (cp.async wgmma) */
	ws(moe_up("wsup_128x256x64_s4_t", 128, 256, 64, 2, 4, 4, 1));
	s = ws(moe_up("wsup_128x256x64_s4_p", 128, 256, 64, 2, 4, 4, 1));
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 132;
	s = ws(moe_up("wsup_128x128x64_s6_w4_p", 128, 128, 64, 2, 2, 6, 1));
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 132;
	/* ping-pong against the cooperative kernels above (wsd_*, wsdn_*, wsup_*):
	 * 128x128 per consumer warpgroup, 6 stages (7 for dense: 226 KB) */
	pingpong(dense("wspd_128x128x64_s6_p", 128, 128, 64, 2, 2, 6, 1));
	pingpong(dense("wspd_128x128x64_s7_p", 128, 128, 64, 2, 2, 7, 1));
	pingpong(dense("wspd_64x128x64_s8_p", 64, 128, 64, 2, 2, 8, 1));
	pingpong(moe_down("wspdn_128x128x64_s6_p", 128, 128, 64, 2, 2, 6, 1));
	pingpong(moe_up("wspup_128x128x64_s6_p", 128, 128, 64, 2, 2, 6, 1));
	s = pingpong(check_scatter("cwsp_grouped_scatter", 0, 640));
	tile(s, 128, 128, 64, 2, 2, 6, 0);
	s->ctas = 7;
	s = pingpong(check_gather_swiglu("cwsp_grouped_gather_swiglu", 0, 320));
	tile(s, 128, 128, 64, 2, 2, 5, 0);
	s->ctas = 5;
	/* clusters of 2 (k_gemm_ws.c): column-tile pairs sharing A, each CTA's
	 * half of A's box multicast to both; cooperative and ping-pong, against
	 * wsd_128x256x64_s4_p, wspd_128x128x64_s6_p, wsdn_*_p above (cuLaunchKernelEx) */
	cluster2(dense("wsc2d_128x256x64_s4_p", 128, 256, 64, 2, 4, 4, 1), 0);
	cluster2(dense("wsc2pd_128x128x64_s6_p", 128, 128, 64, 2, 2, 6, 1), 1);
	cluster2(moe_down("wsc2dn_128x256x64_s4_p", 128, 256, 64, 2, 4, 4, 1), 0);
	cluster2(moe_down("wsc2pdn_128x128x64_s6_p", 128, 128, 64, 2, 2, 6, 1), 1);
	s = cluster2(check_scatter("cwsc2_grouped_scatter", 0, 640), 0);
	tile(s, 128, 128, 64, 2, 4, 6, 0);
	s->ctas = 8;
	s = cluster2(check_scatter("cwsc2p_grouped_scatter", 0, 640), 1);
	tile(s, 128, 128, 64, 2, 2, 6, 0);
	s->ctas = 6;
	s = add("cwsc2p_dense_bias_gelu", "check");
	s->N = 512;
	s->K = 384;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 0, "bias");
	cg_ep_op(&s->ep, OP_GELU, cg_ep_op(&s->ep, OP_ADD, a, b), -1);
	cluster2(s, 1);
	tile(s, 128, 128, 64, 2, 2, 5, 0);
	s->ctas = 4;
	/* 256-column warpgroup tiles (GemmSpec.wg_wide): 128x256 as two 64x256
	 * warpgroups (one wgmma m64n256k16 a k-step each: a k-step's shared
	 * reads 20 KB, not 24: A 2 x 2 KB + B 8 KB against A 4 KB + B twice
	 * 8 KB), against wsd_128x256x64_s4_p / wsc2d_ / wspd_ above; ping-pong
	 * 64x256 per warpgroup; the checks */
	wide(ws(dense("wswd_128x256x64_s4_p", 128, 256, 64, 2, 4, 4, 1)), CG_SCHED_PERSISTENT);
	wide(ws(dense("wswd_128x256x64_s4_t", 128, 256, 64, 2, 4, 4, 1)), CG_SCHED_TILES);
	wide(cluster2(dense("wsc2wd_128x256x64_s4_p", 128, 256, 64, 2, 4, 4, 1), 0), CG_SCHED_PERSISTENT);
	wide(pingpong(dense("wspwd_64x256x64_s4_p", 64, 256, 64, 1, 4, 4, 1)), CG_SCHED_PERSISTENT);
	wide(pingpong(dense("wspwd_64x256x64_s5_p", 64, 256, 64, 1, 4, 5, 1)), CG_SCHED_PERSISTENT);
	s = wide(ws(add("cwsw_dense_bias_gelu", "check")), CG_SCHED_PERSISTENT);
	s->N = 512;
	s->K = 384;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 0, "bias");
	cg_ep_op(&s->ep, OP_GELU, cg_ep_op(&s->ep, OP_ADD, a, b), -1);
	tile(s, 128, 256, 64, 2, 4, 4, 0);
	s->ctas = 3;
	s = wide(cluster2(add("cwsc2w_dense_bias_gelu", "check"), 0), CG_SCHED_PERSISTENT);
	s->N = 512;
	s->K = 384;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 0, "bias");
	cg_ep_op(&s->ep, OP_GELU, cg_ep_op(&s->ep, OP_ADD, a, b), -1);
	tile(s, 128, 256, 64, 2, 4, 4, 0);
	s->ctas = 4;
	/* clusters of 2 sharing B (GemmSpec.cluster_b: row-tile pairs, each CTA's
	 * half of B's box multicast to both; cuBLAS's 2x1 cluster at this shape):
	 * 128x256 cooperative (narrow and wide warpgroup tiles), ping-pong; checks
	 * (T = 1, 45: one row tile, the pair's second without rows) */
	cluster_b(cluster2(dense("wsc2bd_128x256x64_s4_p", 128, 256, 64, 2, 4, 4, 1), 0));
	wide(cluster_b(cluster2(dense("wsc2bwd_128x256x64_s4_p", 128, 256, 64, 2, 4, 4, 1), 0)), CG_SCHED_PERSISTENT);
	cluster_b(cluster2(dense("wsc2bpd_128x128x64_s6_p", 128, 128, 64, 2, 2, 6, 1), 1));
	wide(cluster_b(cluster2(dense("wsc2bpwd_64x256x64_s5_p", 64, 256, 64, 1, 4, 5, 1), 1)), CG_SCHED_PERSISTENT);
	s = cluster_b(cluster2(add("cwsc2b_dense_bias_gelu", "check"), 0));
	s->N = 512;
	s->K = 384;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 0, "bias");
	cg_ep_op(&s->ep, OP_GELU, cg_ep_op(&s->ep, OP_ADD, a, b), -1);
	tile(s, 128, 256, 64, 2, 4, 4, 0);
	s->ctas = 4;
	s = wide(cluster_b(cluster2(add("cwsc2bw_dense_bias_gelu", "check"), 0)), CG_SCHED_PERSISTENT);
	s->N = 512;
	s->K = 384;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 0, "bias");
	cg_ep_op(&s->ep, OP_GELU, cg_ep_op(&s->ep, OP_ADD, a, b), -1);
	tile(s, 128, 256, 64, 2, 4, 4, 0);
	s->ctas = 6;
	s = cluster_b(cluster2(add("cwsc2bp_dense_bias_gelu", "check"), 1));
	s->N = 384;
	s->K = 320;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 0, "bias");
	cg_ep_op(&s->ep, OP_GELU, cg_ep_op(&s->ep, OP_ADD, a, b), -1);
	tile(s, 128, 128, 64, 2, 2, 5, 0);
	s->ctas = 4;
	s = add("cws_f16_kn_residual", "check");
	s->N = 256;
	s->K = 192;
	s->a_dt = s->b_dt = s->c_dt = DT_F16;
	s->b_layout = CG_B_KN;
	a = cg_ep_acc(&s->ep);
	x = cg_ep_mat(&s->ep, DT_F16, 0, CGR_DIRECT, "residual");
	cg_ep_op(&s->ep, OP_ADD, a, x);
	ws(s);
	tile(s, 128, 128, 64, 2, 2, 5, 0);
	s = ws(check_scatter("cws_grouped_scatter_persistent", 0, 640));
	tile(s, 128, 128, 64, 2, 4, 6, 0);
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 7;

	s = ws(check_gather_swiglu("cws_grouped_gather_swiglu", 0, 320));	/* gathered A on the WS mainloop */
	tile(s, 128, 128, 64, 2, 4, 5, 0);
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 5;

	/* FP8 x FP8, DeepSeek-V3 layer shapes: the cp.async wgmma mainloop (what
	 * programs took before: gate|up 64x256, down 128x128) against the
	 * warp-specialised one (two consumer warpgroups of 64x128, 5-6 stages),
	 * tiles and persistent; gate|up gathered on WS (f8gather_*, apart: it
	 * needs --debug=ws-gather in programs and hung on the H200 in bf16) */
	wgmma(f8_moe("f8wup_64x256_s4_t", 1, 1, 64, 256, 1, 8, 4), 0);
	wgmma(f8_moe("f8wdn_128x128_s4_t", 0, 0, 128, 128, 2, 4, 4), 0);
	ws(f8_moe("f8wsdn_128x128_s6_t", 0, 0, 128, 128, 2, 4, 6));
	persistent(ws(f8_moe("f8wsdn_128x128_s6_p", 0, 0, 128, 128, 2, 4, 6)));
	ws(f8_moe("f8wsdn_64x256_s5_t", 0, 0, 64, 256, 1, 8, 5));
	ws(f8_moe("f8wsgu_sorted_128x128_s6_t", 1, 0, 128, 128, 2, 4, 6));
	persistent(ws(f8_moe("f8wsgu_sorted_128x128_s6_p", 1, 0, 128, 128, 2, 4, 6)));
	ws(f8_moe("f8wsgu_sorted_64x256_s5_t", 1, 0, 64, 256, 1, 8, 5));
	ws(f8_moe("f8gather_wsup_128x128_s6_t", 1, 1, 128, 128, 2, 4, 6));
	/* 64-row tiles (DeepSeek-V3 has ~128 rows an expert: less of the second
	 * row tile wasted), persistent; gathered gate|up at 64x256 */
	persistent(ws(f8_moe("f8wsdn_64x256_s5_p", 0, 0, 64, 256, 1, 8, 5)));
	persistent(ws(f8_moe("f8wsgu_sorted_64x256_s5_p", 1, 0, 64, 256, 1, 8, 5)));
	ws(f8_moe("f8gather_wsup_64x256_s5_t", 1, 1, 64, 256, 1, 8, 5));
	persistent(ws(f8_moe("f8gather_wsup_64x256_s5_p", 1, 1, 64, 256, 1, 8, 5)));
	/* B's scales in 128-row blocks (DeepSeek-V3's checkpoints: one scale a
	 * 128x128 block): one B scale pair a column block, one fma a promoted
	 * element; the plans' kernels, against the rows above (_bb) */
	wgmma(f8_moe("f8wup_64x256_s4_t_bb", 1, 1, 64, 256, 1, 8, 4), 0)->f8.b_block = 128;
	s = ws(f8_moe("f8wsdn_64x256_s5_p_bb", 0, 0, 64, 256, 1, 8, 5));
	s->f8.b_block = 128;
	persistent(s);
	s = ws(f8_moe("f8wsgu_sorted_64x256_s5_p_bb", 1, 0, 64, 256, 1, 8, 5));
	s->f8.b_block = 128;
	persistent(s);
	/* ... and a k-tile as one wgmma group, promoted after its wait (f8.whole,
	 * DeepGEMM's order: the other consumer warpgroup's wgmmas overlap it) */
	s = ws(f8_moe("f8wsdn_64x256_s5_p_bbw", 0, 0, 64, 256, 1, 8, 5));
	s->f8.b_block = 128;
	s->f8.whole = 1;
	persistent(s);
	s = ws(f8_moe("f8wsgu_sorted_64x256_s5_p_bbw", 1, 0, 64, 256, 1, 8, 5));
	s->f8.b_block = 128;
	s->f8.whole = 1;
	persistent(s);
	/* FP8 x FP8 correctness at small sizes: WS down (scatter, persistent over
	 * more tiles than CTAs, empty experts), dense with K = 384, gathered */
	s = ws(check_scatter("cf8ws_grouped_scatter_persistent", 1, 640));
	tile(s, 128, 128, 128, 2, 4, 6, 0);
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 7;
	s = add("cf8ws_dense_bias_gelu", "check");
	s->a_dt = s->b_dt = DT_F8E4M3;
	s->f8.group = 128;
	s->N = 512;
	s->K = 384;
	a = cg_ep_acc(&s->ep);
	b = cg_ep_col(&s->ep, DT_BF16, 0, "bias");
	cg_ep_op(&s->ep, OP_GELU, cg_ep_op(&s->ep, OP_ADD, a, b), -1);
	ws(s);
	tile(s, 128, 128, 128, 2, 4, 5, 0);
	s = ws(check_gather_swiglu("cf8gather_ws_swiglu", 1, 256));
	tile(s, 128, 128, 128, 2, 4, 4, 0);

	/* bf16 DeepSeek-V3: 192-row tiles (three warpgroups of 64 rows: an
	 * expert's ~128 rows in one tile, its weights read once) against the
	 * plan before (gate|up 128x256 cp.async wgmma, down ping-pong 128x128
	 * persistent); gate|up on both mainloops, down tiles and persistent */
	wgmma(ds_bf16("dsup_w_128x256_s4_t", 1, 1, 128, 256, 2, 4, 4), 0);
	wgmma(ds_bf16("dsup_w_192x128_s5_t", 1, 1, 192, 128, 3, 4, 5), 0);
	ws(ds_bf16("dsup_ws_192x128_s5_t", 1, 1, 192, 128, 3, 4, 5));
	persistent(ws(ds_bf16("dsup_ws_192x128_s5_p", 1, 1, 192, 128, 3, 4, 5)));
	pingpong(ds_bf16("dsdn_pp_128x128_s6_p", 0, 0, 128, 128, 2, 2, 6));
	ws(ds_bf16("dsdn_ws_128x256_s4_t", 0, 0, 128, 256, 2, 4, 4));
	ws(ds_bf16("dsdn_ws_192x128_s5_t", 0, 0, 192, 128, 3, 4, 5));
	persistent(ws(ds_bf16("dsdn_ws_192x128_s5_p", 0, 0, 192, 128, 3, 4, 5)));
	wgmma(ds_bf16("dsdn_w_192x128_s5_t", 0, 0, 192, 128, 3, 4, 5), 0);
	/* the alternative: 64-row tiles, the m-tiles of an (expert, column tile) side by side sharing B in L2 */
	wgmma(ds_bf16("dsup_w_64x256_s4_t", 1, 1, 64, 256, 2, 4, 4), 0);
	ws(ds_bf16("dsdn_ws_64x256_s5_t", 0, 0, 64, 256, 2, 4, 5));
	/* ... and their checks at small sizes: 40 experts (N = 256), both mainloops */
	s = ws(check_scatter("cws192_grouped_scatter", 0, 640));
	tile(s, 192, 128, 64, 3, 4, 5, 0);
	s = ws(check_gather_swiglu("cws192_grouped_gather_swiglu", 0, 320));
	tile(s, 192, 128, 64, 3, 4, 4, 0);
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 5;
	s = wgmma(check_gather_swiglu("cw192_grouped_gather_swiglu", 0, 320), 0);
	tile(s, 192, 128, 64, 3, 4, 5, 0);

	s = check_scatter("cw_grouped_scatter_persistent", 0, 192);
	wgmma(s, 0);
	tile(s, 128, 128, 64, 2, 4, 3, 0);
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 7;
}

/* Does name contain one of the comma-separated substrings of list? */
static int
matches(const char *name, const char *list)
{
	char buf[256];

	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		if (n > 0 && n < sizeof buf) {
			memcpy(buf, p, n);
			buf[n] = 0;
			if (strstr(name, buf))
				return 1;
		}
		p += n + (p[n] == ',');
	}
	return 0;
}

/* ---- manifest ---- */

static void
jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++)
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else
			fputc(*s, f);
	fputc('"', f);
}

/* A number as Python's json reads it (it takes Infinity and NaN, not inf). */
static void
jnum(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "NaN");
	else if (isinf(v))
		snprintf(buf, n, "%sInfinity", v < 0 ? "-" : "");
	else
		snprintf(buf, n, "%.9g", v);
}

static void
jexpr(FILE *f, CgExpr e)
{
	char b[64];

	cg_expr_print(b, sizeof b, e);
	fprintf(f, "{\"a\": %lld, \"b\": %lld, \"div\": %lld, \"text\": \"%s\"}", (long long)e.a,
		(long long)e.b, (long long)e.div, b);
}

static void
jcase(FILE *f, const Case *c, const CgKernel *k, const char *file)
{
	GemmSpec rs = c->s, *s = &rs;

	cg_gemm_resolve(s);
	fprintf(f, "  {\"name\": ");
	jstr(f, c->name);
	fprintf(f, ", \"problem\": ");
	jstr(f, c->problem);
	fprintf(f, ", \"file\": ");
	jstr(f, file);
	fprintf(f, ",\n   \"kernel\": {\"name\": ");
	jstr(f, k->name);
	fprintf(f, ", \"params\": [");
	for (int i = 0; i < k->nparam; i++) {
		fprintf(f, "%s[\"%s\", ", i ? ", " : "", cg_param_kind_name(k->param[i].kind));
		jstr(f, k->param[i].role);
		fprintf(f, "]");
	}
	fprintf(f, "], \"block\": [%d, %d, %d], \"grid\": [", k->block[0], k->block[1], k->block[2]);
	for (int i = 0; i < 3; i++) {
		if (i)
			fprintf(f, ", ");
		jexpr(f, k->grid[i]);
	}
	fprintf(f, "], \"smem\": %d, \"regs\": %d, \"spill_stores\": %d, \"spill_loads\": %d, \"cluster\": %d, "
		   "\"note\": ", k->smem, k->regs, k->spill_stores, k->spill_loads, k->cluster);
	jstr(f, k->note);
	fprintf(f, ", \"tmaps\": [");	/* per tmap parameter: what the launcher encodes */
	for (int i = 0; i < k->ntmap; i++) {
		const CgTmap *t = &k->tmap[i];
		fprintf(f, "%s{\"of\": ", i ? ", " : "");
		jstr(f, t->of);
		fprintf(f, ", \"dt\": \"%s\", \"rank\": %d, \"dims\": [", dtype_name(t->dt), t->rank);
		for (int j = 0; j < t->rank; j++) {
			fprintf(f, "%s", j ? ", " : "");
			jexpr(f, t->dims[j]);
		}
		fprintf(f, "], \"strides\": [%lld, %lld], \"box\": [%d, %d, %d], \"swizzle\": %d}",
			(long long)t->strides[0], (long long)t->strides[1], t->box[0], t->box[1], t->box[2],
			t->swizzle);
	}
	fprintf(f, "]");
	fprintf(f, "},\n   \"spec\": {\"N\": %lld, \"K\": %lld, \"m_per_t\": %d, \"groups\": %d, "
		   "\"a_dt\": \"%s\", \"lda\": %lld, \"gather\": %d, \"gather_div\": %d, "
		   "\"b_dt\": \"%s\", \"b_layout\": \"%s\", \"ldb\": %lld, \"b_group_stride\": %lld, "
		   "\"c_dt\": \"%s\", \"ldc\": %lld, \"store\": \"%s\", "
		   "\"bm\": %d, \"bn\": %d, \"bk\": %d, \"warps_m\": %d, \"warps_n\": %d, \"stages\": %d, "
		   "\"sched\": \"%s\", \"ctas\": %d, \"f8_group\": %d, \"f8_interleave\": %d, \"f8_b_block\": %d, \"ws_mode\": \"%s\",\n    \"ep\": [",
		(long long)s->N, (long long)s->K, s->m_per_t, s->groups, dtype_name(s->a_dt),
		(long long)s->lda, s->gather, s->gather_div, dtype_name(s->b_dt),
		s->b_layout == CG_B_NK ? "NK" : "KN", (long long)s->ldb, (long long)s->b_group_stride,
		dtype_name(s->c_dt), (long long)s->ldc, s->store == CG_STORE_SCATTER ? "scatter" : "rows",
		s->bm, s->bn, s->bk, s->warps_m, s->warps_n, s->stages,
		s->sched == CG_SCHED_PERSISTENT ? "persistent" : "tiles", s->ctas, s->f8.group, s->f8.b_interleave,
		s->f8.b_block,
		s->ws_mode == CG_WS_PINGPONG ? "pingpong" : "cooperative");
	for (int i = 0; i < s->ep.n; i++) {
		const CgEpInst *in = &s->ep.in[i];
		static const char *const rows[] = {"direct", "gather", "gather_raw", "scatter"};
		char lo[32], hi[32];
		/* run_gemm.py reads lim > 0 as act=oai */
		double oai_lim = in->op == CGE_SWIGLU && in->glu.act == IR_GLU_OAI ? in->glu.limit : 0;
		double oai_alpha = oai_lim > 0 ? in->glu.alpha : 0;
		jnum(lo, sizeof lo, in->ew.lo);
		jnum(hi, sizeof hi, in->ew.hi);
		fprintf(f, "%s{\"op\": \"%s\", \"a\": %d, \"b\": %d, \"imm\": %.9g, \"lo\": %s, "
			   "\"hi\": %s, \"lim\": %.9g, \"alpha\": %.9g, \"dt\": \"%s\", \"rows\": \"%s\", "
			   "\"ld\": %lld, \"group_stride\": %lld, \"role\": ",
			i ? ", " : "", cg_ep_inst_name(in), in->a, in->b, in->imm, lo, hi,
			oai_lim, oai_alpha, dtype_name(in->dt), rows[in->rows], (long long)in->ld,
			(long long)in->group_stride);
		jstr(f, in->role ? in->role : "");
		fprintf(f, "}");
	}
	fprintf(f, "]}}");
}

int
main(int argc, char **argv)
{
	const char *sm = "sm_90a", *dir = "bench/gemm/out", *only = NULL;
	int list = 0, ptx_only = 0, bad = 0, first = 1, scale = 1;
	char path[4096];
	FILE *man;
	Diag d;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-t") && i + 1 < argc)
			sm = argv[++i];
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--list"))
			list = 1;
		else if (!strcmp(argv[i], "--ptx-only"))
			ptx_only = 1;
		else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
			scale = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: gemm_emit [-t SM] [-o DIR] [--only SUBSTR] [--list] [--ptx-only] [--scale S]\n");
			return 2;
		}
	}
	build();
	for (int i = 0; scale > 1 && i < ncase; i++)
		if (strcmp(cases[i].problem, "check")) {
			cases[i].s.N /= scale;
			cases[i].s.K /= scale;
		}
	if (list) {
		for (int i = 0; i < ncase; i++)
			printf("%s\t%s\n", cases[i].name, cases[i].problem);
		return 0;
	}
	if (!cg_ptxas_path())
		ptx_only = 1;
	mkdir(dir, 0777);
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	if (!(man = fopen(path, "w"))) {
		perror(path);
		return 2;
	}
	fprintf(man, "{\"target\": \"%s\", \"cases\": [\n", sm);
	diag_init(&d, stderr);
	for (int i = 0; i < ncase; i++) {
		Case *c = &cases[i];
		CgTarget t = {sm, NULL, 3};
		CgModule *m;
		CgPtxasResult r;
		const CgKernel *k;
		const char *ptx;
		size_t len;
		char file[256];

		if (only && !matches(c->name, only))
			continue;
		m = cg_module_new(&t, c->name, &d);
		if (!m || cg_emit_gemm(m, c->name, &c->s, &d) < 0 || !(ptx = cg_module_ptx(m, &len, &d))) {
			fprintf(stderr, "gemm_emit: %s: failed\n", c->name);
			bad = 1;
			cg_module_free(m);
			continue;
		}
		snprintf(path, sizeof path, "%s/%s.ptx", dir, c->name);
		file_write(path, ptx, len, &d);
		snprintf(file, sizeof file, "%s.ptx", c->name);
		if (!ptx_only) {
			if (cg_module_assemble(m, 1, &r, &d) < 0) {
				fprintf(stderr, "gemm_emit: %s: ptxas failed\n%s\n", c->name, r.log ? r.log : "");
				bad = 1;
			} else {
				snprintf(path, sizeof path, "%s/%s.cubin", dir, c->name);
				file_write(path, r.cubin, r.cubin_len, &d);
				snprintf(file, sizeof file, "%s.cubin", c->name);
			}
			cg_ptxas_free(&r);
		}
		k = cg_module_kernel(m, 0);
		fprintf(stderr, "%-24s %3d regs %3d/%d spill %6d smem  %s\n", c->name, k->regs,
			k->spill_stores, k->spill_loads, k->smem, k->note);
		if (!first)
			fprintf(man, ",\n");
		first = 0;
		jcase(man, c, k, file);
		cg_module_free(m);
	}
	fprintf(man, "\n]}\n");
	fclose(man);
	return bad;
}
