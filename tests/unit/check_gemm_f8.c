/*
 * check_gemm_f8.c — FP8 x FP8 GEMMs (GemmSpec.f8: e4m3 A and B on the
 * sm_90a wgmma mainloop, f32 scales per row and 128 k of each, DeepGEMM's
 * promotion): the spec checks, the parameters, PTX for sm_90a through
 * ptxas, and kernels on the CPU emulator (its wgmma reads e4m3 k32 from
 * the PTX ISA's layouts) against a reference in double that sums each
 * 128-k block's products and scales them, as the kernel does: ragged M,
 * both warpgroup tiles, grouped experts with empty ones, gathered rows,
 * SwiGLU over lower-moe's interleaved B, routing weights through the
 * scattered store, the persistent schedule.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"
#include "passes.h"
#include "program.h"

/* e4m3 [T,K] x e4m3 [N,K]^T with scales per 128, f32 out, 2 warpgroups of 64x128 */
static void
spec_f8(GemmSpec *s, int64_t N, int64_t K)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->a_dt = s->b_dt = DT_F8E4M3;
	s->c_dt = DT_F32;
	s->f8.group = 128;
	gh_tiles(s, 128, 128, 128, 2, 4, 4);
	s->mainloop = CG_MAINLOOP_WGMMA;
}

static void
refused(const GemmSpec *s, const char *want)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;

	diag_init(&d, NULL);
	ck_assert_int_ne(cg_gemm_check(&t, s, &d), 0);
	ck_assert_msg(strstr(d.last, want), "want '%s' in: %s", want, d.last);
}

static void
accepted(const GemmSpec *s)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;

	diag_init(&d, NULL);
	ck_assert_msg(cg_gemm_check(&t, s, &d) == 0, "%s", d.last);
}

START_TEST(test_checks)
{
	GemmSpec s;
	CgTarget t90a = {"sm_90a", NULL, 3}, t80 = {"sm_80", NULL, 3};
	Diag d;

	diag_init(&d, NULL);
	spec_f8(&s, 256, 512);
	ck_assert_int_eq(cg_gemm_check(&t90a, &s, &d), 0);
	ck_assert_int_ne(cg_gemm_check(&t80, &s, &d), 0);	/* no wgmma */
	s.mainloop = CG_MAINLOOP_MMA;
	refused(&s, "needs the wgmma or the warp-specialised mainloop");
	spec_f8(&s, 256, 512);
	s.bk = 64;
	refused(&s, "need 128");
	spec_f8(&s, 256, 512);
	s.f8.group = 64;
	refused(&s, "scales per 64");
	spec_f8(&s, 256, 512);
	s.a_dt = DT_BF16;
	refused(&s, "A and B f8e4m3");
	spec_f8(&s, 256, 512);
	gh_tiles(&s, 128, 128, 128, 1, 4, 4);	/* one warpgroup of 128x128: 128 accumulators, twice */
	s.mainloop = CG_MAINLOOP_WGMMA;
	refused(&s, "held twice");
	/* the warp-specialised mainloop: sm_90a (TMA), 64 accumulators; an
	 * interleaved B through a rank-3 box (test_ws_gateup) */
	spec_f8(&s, 256, 512);
	s.mainloop = CG_MAINLOOP_WS;
	ck_assert_msg(cg_gemm_check(&t90a, &s, &d) == 0, "%s", d.last);
	ck_assert_int_ne(cg_gemm_check(&t80, &s, &d), 0);
	s.f8.b_interleave = 1;
	ck_assert_msg(cg_gemm_check(&t90a, &s, &d) == 0, "%s", d.last);
	spec_f8(&s, 256, 512);
	gh_tiles(&s, 128, 128, 128, 1, 4, 4);
	s.mainloop = CG_MAINLOOP_WS;
	refused(&s, "held twice");
	spec_f8(&s, 256, 512);
	s.mainloop = CG_MAINLOOP_WS;
	s.a_dt = DT_BF16;
	refused(&s, "bf16 x f8e4m3");
	ck_assert(cg_arch_fp8_mma("sm_90a", 0));
	ck_assert(!cg_arch_fp8_mma("sm_90", 0));
	ck_assert(!cg_arch_fp8_mma("sm_80", DBG_EMU_WGMMA));
	ck_assert(!cg_arch_fp8_mma("emu", 0));
	ck_assert(cg_arch_fp8_mma("emu", DBG_EMU_WGMMA));
}
END_TEST

START_TEST(test_params)
{
	GemmSpec s;
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	CgModule *m;
	const CgKernel *k;

	diag_init(&d, NULL);
	gh_spec_grouped_swiglu(&s, 8, 256, 512, 2);
	s.a_dt = s.b_dt = DT_F8E4M3;
	s.f8.group = 128;
	gh_tiles(&s, 128, 128, 128, 2, 4, 4);
	s.mainloop = CG_MAINLOOP_WGMMA;
	m = cg_module_new(&t, "f8", &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_msg(cg_emit_gemm(m, "g", &s, &d) == 0, "%s", d.last);
	k = cg_module_find(m, "g");
	ck_assert_str_eq(k->param[0].role, "A");
	ck_assert_str_eq(k->param[1].role, "gather_idx");
	ck_assert_str_eq(k->param[2].role, "B");
	ck_assert_str_eq(k->param[3].role, "B_scale");
	ck_assert_str_eq(k->param[4].role, "A_scale");
	ck_assert_str_eq(k->param[5].role, "C");
	ck_assert_int_eq(k->smem, cg_gemm_smem(&s));
	ck_assert_ptr_nonnull(strstr(k->note, "f8e4m3.f8e4m3"));
	cg_module_free(m);
}
END_TEST

START_TEST(test_ptxas)
{
	GemmSpec s[3];

	spec_f8(&s[0], 512, 1024);
	gh_spec_grouped_swiglu(&s[1], 8, 512, 1024, 2);
	s[1].a_dt = s[1].b_dt = DT_F8E4M3;
	s[1].f8 = (CgF8){.group = 128, .b_interleave = 1};
	gh_tiles(&s[1], 64, 128, 128, 1, 4, 5);
	s[1].mainloop = CG_MAINLOOP_WGMMA;
	gh_spec_grouped_scale_scatter(&s[2], 8, 512, 1024);
	s[2].a_dt = s[2].b_dt = DT_F8E4M3;
	s[2].f8.group = 128;
	gh_tiles(&s[2], 128, 128, 128, 2, 4, 4);
	s[2].mainloop = CG_MAINLOOP_WGMMA;
	s[2].sched = CG_SCHED_PERSISTENT;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, s, 3, "f");
	const char *ptx = gh_ptx(m);
	/* each k-tile in two column halves (the promotion of one overlaps the other's wgmmas) */
	ck_assert_int_gt(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"), 0);
	ck_assert_int_eq(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 0);
	ck_assert_int_eq(gh_count(ptx, "mma.sync"), 0);
	gh_assemble(m, 3, "gemm_f8", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/* The same specs on the warp-specialised mainloop: TMA boxes of 128 e4m3
 * (one scale block a box row), the consumers' promotion, no spills. */
START_TEST(test_ws_ptxas)
{
	GemmSpec s[3];

	spec_f8(&s[0], 512, 1024);
	gh_tiles(&s[0], 128, 128, 128, 2, 4, 6);
	gh_spec_grouped_scale_scatter(&s[1], 8, 512, 1024);
	s[1].a_dt = s[1].b_dt = DT_F8E4M3;
	s[1].f8.group = 128;
	gh_tiles(&s[1], 128, 128, 128, 2, 4, 6);
	s[1].sched = CG_SCHED_PERSISTENT;
	gh_spec_grouped_swiglu(&s[2], 8, 512, 1024, 2);	/* gathered A: the producers' cp.async */
	s[2].a_dt = s[2].b_dt = DT_F8E4M3;
	s[2].f8.group = 128;
	gh_tiles(&s[2], 64, 256, 128, 1, 8, 5);
	for (int i = 0; i < 3; i++)
		s[i].mainloop = CG_MAINLOOP_WS;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, s, 3, "fw");
	const char *ptx = gh_ptx(m);
	/* each k-tile in two column halves (the promotion of one overlaps the other's wgmmas) */
	ck_assert_int_gt(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"), 0);
	ck_assert_int_eq(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 0);
	ck_assert_int_gt(gh_count(ptx, "cp.async.bulk.tensor"), 0);
	/* the scales staged by the producers with the stage, read from shared memory */
	ck_assert_int_gt(gh_count(ptx, "cp.async.ca.shared.global"), 0);
	ck_assert_int_gt(gh_count(ptx, "cp.async.mbarrier.arrive.noinc"), 0);
	ck_assert_int_gt(gh_count(ptx, "ld.shared.v4.f32"), 0);
	ck_assert_int_gt(gh_count(ptx, "setmaxnreg.inc.sync.aligned.u32 232"), 0);
	ck_assert_int_eq(gh_count(ptx, "mma.sync"), 0);
	gh_assemble(m, 3, "gemm_f8 ws", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/* ---- on the emulator ---- */

/*
 * c on the warp-specialised mainloop against the reference, and its output
 * bit for bit the wgmma mainloop's (the same k32 steps, the same promotion
 * order) with up to 5 of its stages.
 */
static void
ws_case(const GemmCase *c, double tol)
{
	GemmCase w = *c;
	GemmRun r, q;
	GemmErr e, f;

	w.s.mainloop = CG_MAINLOOP_WS;
	ck_assert_msg(gh_run(&r, &w) == 0 && gh_compare(&r, &e) == 0, "%s: ws: %s", c->what, r.msg);
	ck_assert_msg(e.err < tol, "%s: ws: relative L2 error %g >= %g", c->what, e.err, tol);
	w.s.mainloop = CG_MAINLOOP_WGMMA;
	w.s.stages = w.s.stages > 5 ? 5 : w.s.stages;
	w.s.f8.b_interleave = c->s.f8.b_interleave;
	ck_assert_msg(gh_run(&q, &w) == 0 && gh_compare(&q, &f) == 0, "%s: wgmma: %s", c->what, q.msg);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
		      "%s: ws and wgmma outputs differ (errors %g, %g)", c->what, e.err, f.err);
	gh_free(&q);
	gh_free(&r);
}

START_TEST(test_ws_dense)
{
	GemmCase c = {.what = "f8 ws dense 128x128 s6, 3 scale blocks, T = 45 (rows past M)", .T = 45};

	spec_f8(&c.s, 256, 384);
	gh_tiles(&c.s, 128, 128, 128, 2, 4, 6);
	ws_case(&c, 1e-5);
	c.what = "f8 ws dense 128x128 s2, one scale block (K = 128), T = 200";
	c.T = 200;
	spec_f8(&c.s, 256, 128);
	gh_tiles(&c.s, 128, 128, 128, 2, 4, 2);
	ws_case(&c, 1e-5);
	c.what = "f8 ws dense 64x256 (warpgroups side by side) s4, K = 640, T = 130";
	c.T = 130;
	spec_f8(&c.s, 512, 640);
	gh_tiles(&c.s, 64, 256, 128, 1, 8, 4);
	ws_case(&c, 1e-5);
	c.what = "f8 ws dense 64x128 (one consumer warpgroup) s3, T = 70";
	c.T = 70;
	spec_f8(&c.s, 256, 384);
	gh_tiles(&c.s, 64, 128, 128, 1, 4, 3);
	ws_case(&c, 1e-5);
	c.what = "f8 ws dense, bias + gelu to bf16, T = 1";
	c.T = 1;
	spec_f8(&c.s, 256, 384);
	gh_tiles(&c.s, 128, 128, 128, 2, 4, 6);
	gh_bias_gelu(&c.s, DT_BF16);
	c.s.c_dt = DT_BF16;
	ws_case(&c, 1e-2);
	c.what = "f8 ws dense, T = 0";
	c.T = 0;
	ws_case(&c, 1e-2);
}
END_TEST

START_TEST(test_ws_grouped)
{
	/* the down GEMM: A in sorted order (TMA), routing weights, scattered rows, empty experts */
	GemmCase dn = {.what = "f8 ws grouped down, scale + scatter", .T = 41, .counts = {3, 40, 0, 39}};

	gh_spec_grouped_scale_scatter(&dn.s, 4, 128, 384);
	dn.s.m_per_t = 2;
	dn.s.a_dt = dn.s.b_dt = DT_F8E4M3;
	dn.s.f8.group = 128;
	dn.s.c_dt = DT_F32;
	gh_tiles(&dn.s, 128, 128, 128, 2, 4, 4);
	ws_case(&dn, 1e-5);
	dn.what = "f8 ws grouped down, persistent with 3 CTAs over more tiles, 5 stages";
	dn.s.sched = CG_SCHED_PERSISTENT;
	dn.s.ctas = 3;
	dn.s.stages = 5;
	ws_case(&dn, 1e-5);
	/* the plan's tile for DeepSeek-V3's down GEMM (64 rows, two warpgroups side
	 * by side, each k-tile in column halves): K = 640, the ring wraps in a tile */
	dn.what = "f8 ws grouped down 64x256, persistent with 3 CTAs, K = 640";
	gh_spec_grouped_scale_scatter(&dn.s, 4, 512, 640);
	dn.s.m_per_t = 2;
	dn.s.a_dt = dn.s.b_dt = DT_F8E4M3;
	dn.s.f8.group = 128;
	dn.s.c_dt = DT_F32;
	gh_tiles(&dn.s, 64, 256, 128, 1, 8, 4);
	dn.s.sched = CG_SCHED_PERSISTENT;
	dn.s.ctas = 3;
	ws_case(&dn, 1e-5);
	/* gathered rows (the producers' cp.async chunks) + SwiGLU, B in order */
	GemmCase up = {.what = "f8 ws grouped gather + swiglu", .T = 37, .counts = {9, 0, 30, 0, 0, 17, 18, 0}};
	gh_spec_grouped_swiglu(&up.s, 8, 256, 256, 2);
	up.s.a_dt = up.s.b_dt = DT_F8E4M3;
	up.s.f8.group = 128;
	gh_tiles(&up.s, 128, 128, 128, 2, 4, 4);
	ws_case(&up, 1e-2);
	up.what = "f8 ws grouped gather + swiglu, persistent with 2 CTAs";
	up.s.sched = CG_SCHED_PERSISTENT;
	up.s.ctas = 2;
	ws_case(&up, 1e-2);
	up.what = "f8 ws grouped gather + swiglu 64x256 (4 chunks a producer thread), K = 384";
	gh_spec_grouped_swiglu(&up.s, 8, 512, 384, 2);
	up.s.a_dt = up.s.b_dt = DT_F8E4M3;
	up.s.f8.group = 128;
	gh_tiles(&up.s, 64, 256, 128, 1, 8, 3);
	ws_case(&up, 1e-2);
}
END_TEST

START_TEST(test_dense)
{
	GemmCase c = {.what = "f8 dense 128x128, 3 scale blocks, T = 45", .T = 45};

	spec_f8(&c.s, 256, 384);
	gh_check(&c, 1e-5);
	c.what = "f8 dense 64x128 (one warpgroup), 2 stages, T = 130";
	c.T = 130;
	gh_tiles(&c.s, 64, 128, 128, 1, 4, 2);
	c.s.mainloop = CG_MAINLOOP_WGMMA;
	gh_check(&c, 1e-5);
	c.what = "f8 dense, bias + gelu to bf16, T = 1";
	c.T = 1;
	gh_bias_gelu(&c.s, DT_BF16);
	c.s.c_dt = DT_BF16;
	gh_check(&c, 1e-2);
	c.what = "f8 dense, T = 0";
	c.T = 0;
	gh_check(&c, 1e-2);
}
END_TEST

START_TEST(test_grouped)
{
	/* DeepSeek's gate|up: gathered rows, interleaved B, SwiGLU, empty experts */
	GemmCase c = {.what = "f8 grouped gather + swiglu, interleaved B", .T = 37,
		      .counts = {9, 0, 30, 0, 0, 17, 18, 0}};

	gh_spec_grouped_swiglu(&c.s, 8, 256, 256, 2);
	c.s.a_dt = c.s.b_dt = DT_F8E4M3;
	c.s.f8 = (CgF8){.group = 128, .b_interleave = 1};
	gh_tiles(&c.s, 64, 128, 128, 1, 4, 3);
	c.s.mainloop = CG_MAINLOOP_WGMMA;
	gh_check(&c, 1e-2);
	c.what = "f8 grouped gather + swiglu, persistent with 3 CTAs";
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	gh_check(&c, 1e-2);
	/* the down GEMM: routing weight, scattered rows */
	GemmCase dn = {.what = "f8 grouped down, scale + scatter", .T = 41, .counts = {3, 40, 0, 39}};
	gh_spec_grouped_scale_scatter(&dn.s, 4, 128, 256);
	dn.s.m_per_t = 2;
	dn.s.a_dt = dn.s.b_dt = DT_F8E4M3;
	dn.s.f8.group = 128;
	dn.s.c_dt = DT_F32;
	gh_tiles(&dn.s, 128, 128, 128, 2, 4, 4);
	dn.s.mainloop = CG_MAINLOOP_WGMMA;
	gh_check(&dn, 1e-5);
}
END_TEST

/* DeepSeek-V3's routed gate|up (256 experts, 2 x 2048 x 7168) in FP8 with
 * 128-blocked, interleaved B and its output quantised per 128 columns, on
 * 64x256 tiles of the warp-specialised mainloop. */
static void
spec_dsv3_gateup(GemmSpec *s)
{
	gh_spec_grouped_swiglu(s, 256, 4096, 7168, 8);
	s->a_dt = s->b_dt = DT_F8E4M3;
	s->f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128, .whole = 1};
	s->c_dt = DT_F8E4M3;
	s->quant = (CgQuant){.kind = CG_QUANT_GROUP, .in_dt = DT_BF16, .group = 128, .want_scales = 1};
	gh_tiles(s, 64, 256, 128, 1, 8, 5);
	s->mainloop = CG_MAINLOOP_WS;
}

/* The down GEMM of 4 experts, 512 x K, FP8 x FP8 with 128-blocked B scales
 * (whole: a k-tile one wgmma group), f32 out, 64x256 tiles persistent over
 * 3 CTAs, two rows a token. */
static void
spec_f8_down(GemmSpec *s, int64_t K, int whole)
{
	gh_spec_grouped_scale_scatter(s, 4, 512, K);
	s->m_per_t = 2;
	s->a_dt = s->b_dt = DT_F8E4M3;
	s->f8 = (CgF8){.group = 128, .b_block = 128, .whole = whole};
	s->c_dt = DT_F32;
	gh_tiles(s, 64, 256, 128, 1, 8, 4);
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 3;
}
/*
 * B's scales in row blocks (GemmSpec.f8.b_block = 128, a checkpoint's 2-D
 * blocks): the checks, ptxas (no spills, no serialisation; one B scale
 * pair a column block staged, so no 4-float loads of B's), and on the
 * emulator with scales that repeat over 128 stored rows: dense, the
 * interleaved gate|up (a gate and an up block a column block) and the down
 * GEMM on WS, each against the reference and WS bit for bit the wgmma one.
 */
START_TEST(test_blocked)
{
	GemmSpec s[2];

	spec_f8(&s[0], 512, 512);
	s[0].f8.b_block = 128;
	accepted(&s[0]);
	s[0].f8.b_interleave = 1;	/* 64 gate and 64 up rows a warpgroup */
	accepted(&s[0]);
	s[0].f8.b_block = 64;	/* a warpgroup's 128 columns over two blocks */
	refused(&s[0], "would span two");

	gh_spec_grouped_swiglu(&s[0], 8, 1024, 512, 2);
	s[0].a_dt = s[0].b_dt = DT_F8E4M3;
	s[0].f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128};
	gh_tiles(&s[0], 64, 256, 128, 1, 8, 4);
	s[0].mainloop = CG_MAINLOOP_WGMMA;
	gh_spec_grouped_scale_scatter(&s[1], 8, 512, 1024);
	s[1].a_dt = s[1].b_dt = DT_F8E4M3;
	s[1].f8 = (CgF8){.group = 128, .b_block = 128};
	gh_tiles(&s[1], 64, 256, 128, 1, 8, 5);
	s[1].sched = CG_SCHED_PERSISTENT;
	s[1].mainloop = CG_MAINLOOP_WS;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "fb");
	const char *ptx = gh_ptx(m);
	ck_assert_int_gt(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"), 0);
	ck_assert_int_gt(gh_count(ptx, "ld.shared.v2.f32"), 0);
	gh_assemble(m, 2, "gemm_f8 blocked", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);

	GemmCase c = {.what = "f8 blocked dense 128x128, 4 row blocks, T = 45", .T = 45};
	spec_f8(&c.s, 512, 384);
	c.s.f8.b_block = 128;
	gh_tiles(&c.s, 128, 128, 128, 2, 4, 4);
	ws_case(&c, 1e-5);
	GemmCase up = {.what = "f8 blocked grouped gather + swiglu, interleaved B 64x256", .T = 37,
		       .counts = {9, 0, 30, 0, 0, 17, 18, 0}};
	gh_spec_grouped_swiglu(&up.s, 8, 1024, 256, 2);
	up.s.a_dt = up.s.b_dt = DT_F8E4M3;
	up.s.f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128};
	gh_tiles(&up.s, 64, 256, 128, 1, 8, 3);
	up.s.mainloop = CG_MAINLOOP_WGMMA;
	gh_check(&up, 1e-2);
	up.what = "f8 blocked grouped gather + swiglu, interleaved B 64x128, persistent with 3 CTAs";
	gh_tiles(&up.s, 64, 128, 128, 1, 4, 3);
	up.s.mainloop = CG_MAINLOOP_WGMMA;
	up.s.sched = CG_SCHED_PERSISTENT;
	up.s.ctas = 3;
	gh_check(&up, 1e-2);
	GemmCase dn = {.what = "f8 blocked ws grouped down 64x256, persistent with 3 CTAs, K = 640", .T = 41,
		       .counts = {3, 40, 0, 39}};
	spec_f8_down(&dn.s, 640, 0);
	ws_case(&dn, 1e-5);
}
END_TEST



/*
 * f8.whole: a k-tile as one wgmma group a warpgroup (m64n128k32), promoted
 * after its wait (DeepGEMM's order): ptxas (no spills, no serialisation),
 * and on the emulator against the reference, WS bit for bit the wgmma one,
 * with scales a column and in blocks.
 */
START_TEST(test_whole)
{
	GemmSpec s[2];

	gh_spec_grouped_swiglu(&s[0], 8, 1024, 512, 2);
	s[0].a_dt = s[0].b_dt = DT_F8E4M3;
	s[0].f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128, .whole = 1};
	gh_tiles(&s[0], 64, 256, 128, 1, 8, 4);
	s[0].mainloop = CG_MAINLOOP_WGMMA;
	gh_spec_grouped_scale_scatter(&s[1], 8, 512, 1024);
	s[1].a_dt = s[1].b_dt = DT_F8E4M3;
	s[1].f8 = (CgF8){.group = 128, .b_block = 128, .whole = 1};
	gh_tiles(&s[1], 64, 256, 128, 1, 8, 5);
	s[1].sched = CG_SCHED_PERSISTENT;
	s[1].mainloop = CG_MAINLOOP_WS;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "fw1");
	const char *ptx = gh_ptx(m);
	ck_assert_int_gt(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 0);
	ck_assert_int_eq(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"), 0);
	gh_assemble(m, 2, "gemm_f8 whole", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);

	GemmCase c = {.what = "f8 whole dense 128x128, scales a column, T = 45", .T = 45};
	spec_f8(&c.s, 256, 384);
	c.s.f8.whole = 1;
	gh_tiles(&c.s, 128, 128, 128, 2, 4, 4);
	ws_case(&c, 1e-5);
	GemmCase dn = {.what = "f8 whole ws grouped down 64x256, blocked, persistent with 3 CTAs, K = 640", .T = 41,
		       .counts = {3, 40, 0, 39}};
	spec_f8_down(&dn.s, 640, 1);
	ws_case(&dn, 1e-5);
}
END_TEST

/*
 * Split-K on the cp.async wgmma mainloop (CG_F8_SPLIT_DEFAULT, session 39): each
 * slice promotes its own k-tiles (its scales from its first scale block), the
 * slices' f32 sums are added in slice order (split_reduce, with and without
 * live rows), the last slice runs the epilogue.  Against the reference: the
 * dense gate|up with SwiGLU over an interleaved B (bf16 out), 1, 16 and 70
 * tokens (a second row tile with rows past M), S = 2 and 4 of 8 k-tiles;
 * the quantised output (e4m3 per 128) over the whole program is
 * test_f8_split_program's.  ptxas: DeepSeek-V3's k5 (N 4096, K 7168,
 * 64x256 whole, blocked scales, split 8) without spills.
 */
START_TEST(test_split)
{
	static const int Ts[] = {1, 16, 70}, Ss[] = {2, 4};
	GemmCase c = {.what = "f8 dense gate|up 64x256 split-K"};

	for (size_t i = 0; i < NELEM(Ts); i++)
		for (size_t j = 0; j < NELEM(Ss); j++)
			for (int live = 0; live < 2; live++) {
				char what[128];
				spec_f8(&c.s, 512, 1024);
				cg_ep_swiglu(&c.s.ep, cg_ep_acc(&c.s.ep), NULL);
				c.s.c_dt = DT_BF16;
				c.s.f8.b_interleave = 1;
				c.s.f8.b_block = 128;
				c.s.f8.whole = 1;
				gh_tiles(&c.s, 64, 256, 128, 1, 8, 4);
				c.s.mainloop = CG_MAINLOOP_WGMMA;
				c.T = Ts[i];
				gh_split(&c.s, Ss[j], 80);
				c.s.live_sums = live;
				snprintf(what, sizeof what, "f8 dense gate|up 64x256 split-K %d, T = %d%s", Ss[j], Ts[i],
					 live ? ", live rows" : "");
				c.what = what;
				gh_check(&c, 1e-2);
			}
	spec_f8(&c.s, 512, 1024);
	gh_split(&c.s, 3, 16);
	refused(&c.s, "split-K 3 needs");
	c.s.mainloop = CG_MAINLOOP_WS;
	gh_split(&c.s, 2, 16);
	refused(&c.s, "split-K 2 needs");

	GemmSpec ds = c.s;
	ds.N = 4096;
	ds.K = 7168;
	cg_ep_swiglu(&ds.ep, cg_ep_acc(&ds.ep), NULL);
	ds.f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128, .whole = 1};
	ds.c_dt = DT_F8E4M3;
	ds.quant = (CgQuant){.kind = CG_QUANT_GROUP, .in_dt = DT_BF16, .group = 128, .want_scales = 1};
	gh_tiles(&ds, 64, 256, 128, 2, 4, 4);
	ds.mainloop = CG_MAINLOOP_WGMMA;
	gh_split(&ds, 8, 16);
	ds.live_sums = 1;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, &ds, 1, "fsk");
	gh_assemble(m, 1, "gemm_f8 split-K shared gate|up", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/* ---- whole programs: fuse-dequant (A and B), lower_gemm, the plan, the emulator ---- */

/*
 * A DeepSeek-V3 dense FFN in the contract form: x quantised per token and
 * 128 columns (a kernel of its own: nothing produces x here), the SwiGLU
 * output quantised in the gate|up GEMM's epilogue, both GEMMs e4m3 x e4m3.
 */
static const char prog_dense[] =
	"weight $w1 : f8e4m3[512,256] scale=2\n"
	"weight $w1s : f32[512,2] mean=0.02 scale=0.005\n"
	"weight $w2 : f8e4m3[256,256] scale=2\n"
	"weight $w2s : f32[256,2] mean=0.02 scale=0.005\n"
	"graph @d(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
	"	%q, %qs = quantize_dynamic %x, group=128, to=f8e4m3 : f8e4m3[T,256], f32[T,2]\n"
	"	%xa = dequantize %q, %qs, axis=1, block_size=128, to=bf16 : bf16[T,256]\n"
	"	%w1d = dequantize $w1, $w1s, axis=1, block_size=128, to=bf16 : bf16[512,256]\n"
	"	%h = matmul %xa, %w1d, trans_b=1 : bf16[T,512]\n"
	"	%a = swiglu %h, act=silu, layout=interleave : bf16[T,256]\n"
	"	%aq, %as = quantize_dynamic %a, group=128, to=f8e4m3 : f8e4m3[T,256], f32[T,2]\n"
	"	%ad = dequantize %aq, %as, axis=1, block_size=128, to=bf16 : bf16[T,256]\n"
	"	%w2d = dequantize $w2, $w2s, axis=1, block_size=128, to=bf16 : bf16[256,256]\n"
	"	%y0 = matmul %ad, %w2d, trans_b=1 : bf16[T,256]\n"
	"	%y = add %x, %y0 : bf16[T,256]\n"
	"	ret %y\n"
	"}\n";

/* The routed experts' gate|up: the tokens' e4m3 rows gathered with their scales. */
static const char prog_moe[] =
	"weight $router : bf16[8,256]\n"
	"weight $wguq : f8e4m3[8,256,256] scale=2\n"
	"weight $wgus : f32[8,256,2] mean=0.02 scale=0.005\n"
	"weight $wdq : f8e4m3[8,256,128] scale=2\n"
	"weight $wds : f32[8,256,1] mean=0.03 scale=0.01\n"
	"graph @moe(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
	"	%q, %qs = quantize_dynamic %x, group=128, to=f8e4m3 : f8e4m3[T,256], f32[T,2]\n"
	"	%xa = dequantize %q, %qs, axis=1, block_size=128, to=bf16 : bf16[T,256]\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%wgu = dequantize $wguq, $wgus, axis=2, block_size=128, to=bf16 : bf16[8,256,256]\n"
	"	%wd = dequantize $wdq, $wds, axis=2, block_size=128, to=bf16 : bf16[8,256,128]\n"
	"	%y0 = moe %xa, %logits, _, %wgu, %wd, k=2, renorm=1, router=softmax : bf16[T,256]\n"
	"	%y = add %x, %y0 : bf16[T,256]\n"
	"	ret %y\n"
	"}\n";

/* The same with synthetic scales in 128-row blocks (cfg_quant's fp8 ones):
 * one B scale a warpgroup column block (GemmSpec.f8.b_block, program.c). */
static const char prog_moe_blocked[] =
	"weight $router : bf16[8,256]\n"
	"weight $wguq : f8e4m3[8,256,256] scale=2\n"
	"weight $wgus : f32[8,256,2] mean=0.02 scale=0.005 row_block=128\n"
	"weight $wdq : f8e4m3[8,256,128] scale=2\n"
	"weight $wds : f32[8,256,1] mean=0.03 scale=0.01 row_block=128\n"
	"graph @moe(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
	"	%q, %qs = quantize_dynamic %x, group=128, to=f8e4m3 : f8e4m3[T,256], f32[T,2]\n"
	"	%xa = dequantize %q, %qs, axis=1, block_size=128, to=bf16 : bf16[T,256]\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%wgu = dequantize $wguq, $wgus, axis=2, block_size=128, to=bf16 : bf16[8,256,256]\n"
	"	%wd = dequantize $wdq, $wds, axis=2, block_size=128, to=bf16 : bf16[8,256,128]\n"
	"	%y0 = moe %xa, %logits, _, %wgu, %wd, k=2, renorm=1, router=softmax : bf16[T,256]\n"
	"	%y = add %x, %y0 : bf16[T,256]\n"
	"	ret %y\n"
	"}\n";

/* Two column tiles of 256 in the gate|up (N 512 through the interleave),
 * for the pairs sharing B (test_ws_pairs). */
static const char prog_moe_c2[] =
	"weight $router : bf16[8,256]\n"
	"weight $wguq : f8e4m3[8,512,256] scale=2\n"
	"weight $wgus : f32[8,512,2] mean=0.02 scale=0.005 row_block=128\n"
	"weight $wdq : f8e4m3[8,256,256] scale=2\n"
	"weight $wds : f32[8,256,2] mean=0.03 scale=0.01 row_block=128\n"
	"graph @moe(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
	"	%q, %qs = quantize_dynamic %x, group=128, to=f8e4m3 : f8e4m3[T,256], f32[T,2]\n"
	"	%xa = dequantize %q, %qs, axis=1, block_size=128, to=bf16 : bf16[T,256]\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%wgu = dequantize $wguq, $wgus, axis=2, block_size=128, to=bf16 : bf16[8,512,256]\n"
	"	%wd = dequantize $wdq, $wds, axis=2, block_size=128, to=bf16 : bf16[8,256,256]\n"
	"	%y0 = moe %xa, %logits, _, %wgu, %wd, k=2, renorm=1, router=softmax : bf16[T,256]\n"
	"	%y = add %x, %y0 : bf16[T,256]\n"
	"	ret %y\n"
	"}\n";

static const struct {
	const char *text;
	int T;
	const char *kernel, *note;
} programs[] = {
	{prog_dense, 70, "d_k0", "f8e4m3.f8e4m3->f8e4m3 B[N,K] N=512 K=256 64x256x128"},
	{prog_dense, 3, "d_k1", "f8e4m3.f8e4m3->bf16 B[N,K] N=256 K=256"},
	{prog_moe, 45, "moe_k3", "f8e4m3.f8e4m3->bf16 B[N,K] N=256 K=256"},
	{prog_moe, 200, "moe_k3", "f8e4m3.f8e4m3->bf16 B[N,K] N=256 K=256"},
	{prog_moe_blocked, 45, "moe_k3", "f8: b_block=128"},
	{prog_moe_blocked, 200, "moe_k3", "f8: b_block=128"},
};

/* prog_dense with K = 1024 (8 k-tiles): the decode plan splits its gate|up
 * (CG_F8_SPLIT_DEFAULT; a table's split where it is 0), whose output is
 * quantised per 128. */
static const char prog_dense_deep[] =
	"weight $w1 : f8e4m3[512,1024] scale=2\n"
	"weight $w1s : f32[512,8] mean=0.02 scale=0.005\n"
	"weight $w2 : f8e4m3[1024,256] scale=2\n"
	"weight $w2s : f32[1024,2] mean=0.02 scale=0.005\n"
	"graph @d(%x: bf16[T,1024]) -> (y: bf16[T,1024]) {\n"
	"	%q, %qs = quantize_dynamic %x, group=128, to=f8e4m3 : f8e4m3[T,1024], f32[T,8]\n"
	"	%xa = dequantize %q, %qs, axis=1, block_size=128, to=bf16 : bf16[T,1024]\n"
	"	%w1d = dequantize $w1, $w1s, axis=1, block_size=128, to=bf16 : bf16[512,1024]\n"
	"	%h = matmul %xa, %w1d, trans_b=1 : bf16[T,512]\n"
	"	%a = swiglu %h, act=silu, layout=interleave : bf16[T,256]\n"
	"	%aq, %as = quantize_dynamic %a, group=128, to=f8e4m3 : f8e4m3[T,256], f32[T,2]\n"
	"	%ad = dequantize %aq, %as, axis=1, block_size=128, to=bf16 : bf16[T,256]\n"
	"	%w2d = dequantize $w2, $w2s, axis=1, block_size=128, to=bf16 : bf16[1024,256]\n"
	"	%y0 = matmul %ad, %w2d, trans_b=1 : bf16[T,1024]\n"
	"	%y = add %x, %y0 : bf16[T,1024]\n"
	"	ret %y\n"
	"}\n";

START_TEST(test_f8_split_program)
{
	/* the planner's split where CG_F8_SPLIT_DEFAULT is 1; else a table's (.k4) */
	const char *path = CG_F8_SPLIT_DEFAULT ? NULL : "check_gemm_f8_split.tuning";

	if (path) {
		FILE *fp = fopen(path, "w");
		ck_assert_ptr_nonnull(fp);
		fputs("moec-tuning 2\n"
		      "emu dense.m1.n512.k1024.f8e4m3.f8e4m3.nk.t1-1 64x256x128.w2x4.s4.k4.fw\n"
		      "emu dense.m1.n512.k1024.f8e4m3.f8e4m3.nk.t2-16 64x256x128.w2x4.s4.k4.fw\n", fp);
		fclose(fp);
	}
	gh_check_program_tuned(prog_dense_deep, 1, 16, "d_k0", "split-k", 2e-2, DBG_EMU_WGMMA, path);
	gh_check_program_tuned(prog_dense_deep, 16, 16, "d_k0", "split-k", 2e-2, DBG_EMU_WGMMA, path);
	gh_check_program_tuned(prog_dense_deep, 16, 16, "d_k0", "split-k", 2e-2, DBG_EMU_WGMMA | DBG_LIVE_SUMS, path);
	if (path)
		remove(path);
}
END_TEST

START_TEST(test_program_against_interpreter)
{
	gh_check_program_debug(programs[_i].text, programs[_i].T, programs[_i].kernel, programs[_i].note, 2e-2,
			       DBG_EMU_WGMMA);
}
END_TEST

/*
 * A checkpoint's scales (data, not synthetic): program.c reads one a block
 * (f8.b_block, the kernel's note) when every 128-row block of each expert
 * holds one value, and a column each when one value differs.
 */
static void
free_data(void *data, size_t size)
{
	(void)size;
	free(data);
}

static int
blocked_from_data(int spoil)
{
	size_t qbytes = dtype_bytes(DT_F8E4M3, 8 * 256 * 256);
	float *v = malloc(sizeof(float) * 8 * 256 * 2);
	void *qv = malloc(qbytes);
	PassOpts po;
	PassCtx pc = {0};
	CgCompileOpts co;
	CgProgram *p;
	const CgKernel *k;
	Module *m;
	Weight *w, *q;
	Diag d;
	int blocked;

	diag_init(&d, stderr);
	m = ir_parse("program.ir", prog_moe, strlen(prog_moe), &d);
	ck_assert_msg(m != NULL, "parse: %s", d.last);
	w = ir_find_weight(m, "wgus");
	q = ir_find_weight(m, "wguq");
	ck_assert(w && v && q && qv);
	memcpy(qv, ir_weight_data(q, &d), qbytes);	/* both with data: fold interleaves their rows */
	q->data = qv, q->size = qbytes, q->free_data = free_data;
	for (int i = 0; i < 8 * 256 * 2; i++)	/* expert e, row r, k-block b: one value a 128 rows */
		v[i] = 0.01f + 0.001f * (float)(i / 512 * 4 + i / 2 % 256 / 128 * 2 + i % 2);
	if (spoil)
		v[3 * 512 + 200 * 2 + 1] *= 1.5f;	/* expert 3, row 200 (block 1), k-block 1 */
	w->data = v;
	w->size = sizeof(float) * 8 * 256 * 2;
	w->free_data = free_data;
	pass_default_opts(&po);
	po.debug = DBG_EMU_WGMMA;
	po.fp8_mma = 1;
	pc.d = &d;
	ck_assert_msg(pass_run(m, &po, &pc) == 0, "passes: %s", d.last);
	cg_compile_default(&co);
	co.arch[0] = "emu";
	co.narch = 1;
	co.max_tokens = 256;
	co.debug = DBG_EMU_WGMMA;
	p = cg_compile(m, &co, &d);
	ck_assert_msg(p != NULL, "compile: %s", d.last);
	k = cg_module_find(cg_program_module(p, "emu"), "moe_k3");
	ck_assert_msg(k && strstr(k->note, "f8e4m3.f8e4m3"), "moe_k3: %s", k ? k->note : "none");
	blocked = strstr(k->note, "f8: b_block=128") != NULL;
	cg_program_free(p);
	ir_free_module(m);
	return blocked;
}

START_TEST(test_blocked_from_data)
{
	ck_assert_msg(blocked_from_data(0), "blocked data: no f8.b_block");
	ck_assert_msg(!blocked_from_data(1), "a value off its block: f8.b_block");
}
END_TEST

/* The dense FFN's down GEMM (A not gathered) on the warp-specialised
 * mainloop when the emulator stands for sm_90a with it (cg_gemm_ws_for);
 * the MoE's down GEMM so: ctest fp8_emulated_ws_deepseek_v3_128. */
static const struct {
	const char *text;
	int T;
	const char *kernel, *note;
} ws_programs[] = {
	{prog_dense, 3, "d_k1", "f8e4m3.f8e4m3->bf16 B[N,K] N=256 K=256 64x256x128 w2x4+4 s5 ws tma"},
	{prog_dense, 150, "d_k1", "f8e4m3.f8e4m3->bf16 B[N,K] N=256 K=256 64x256x128 w2x4+4 s5 ws tma"},
};

START_TEST(test_ws_program_against_interpreter)
{
	gh_check_program_debug(ws_programs[_i].text, ws_programs[_i].T, ws_programs[_i].kernel,
			       ws_programs[_i].note, 2e-2, DBG_EMU_WGMMA | DBG_EMU_WS);
}
END_TEST

/*
 * fp8-regroup (fbgemm_fp8's form): e4m3 weights with a scale per channel,
 * activations per token under a clip (activation_scale_ub).  On a target
 * with FP8 x FP8 the activations are quantised per token and 128 columns
 * and the weight scales repeated over K/128 (synthetic: col_repeat, the same
 * values; data: repeated), within the interpreter's tolerance (check-eval
 * after every pass); with --debug=fp8-per-token, or without FP8 x FP8, not.
 */
static const char prog_channel[] =
	"weight $w1 : f8e4m3[512,256] scale=2\n"
	"weight $w1s : f32[512,1] mean=0.02 scale=0.005\n"
	"weight $w2 : f8e4m3[256,256] scale=2\n"
	"weight $w2s : f32[256,1] mean=0.02 scale=0.005\n"
	"graph @d(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
	"	%xc = clip %x, max=2.5, min=-2.5 : bf16[T,256]\n"
	"	%q, %qs = quantize_dynamic %xc, group=row, to=f8e4m3 : f8e4m3[T,256], f32[T,1]\n"
	"	%xa = dequantize %q, %qs, axis=1, block_size=256, to=bf16 : bf16[T,256]\n"
	"	%w1d = dequantize $w1, $w1s, axis=1, block_size=256, to=bf16 : bf16[512,256]\n"
	"	%h = matmul %xa, %w1d, trans_b=1 : bf16[T,512]\n"
	"	%a = swiglu %h, act=silu, layout=interleave : bf16[T,256]\n"
	"	%aq, %as = quantize_dynamic %a, group=row, to=f8e4m3 : f8e4m3[T,256], f32[T,1]\n"
	"	%ad = dequantize %aq, %as, axis=1, block_size=256, to=bf16 : bf16[T,256]\n"
	"	%w2d = dequantize $w2, $w2s, axis=1, block_size=256, to=bf16 : bf16[256,256]\n"
	"	%y0 = matmul %ad, %w2d, trans_b=1 : bf16[T,256]\n"
	"	%y = add %x, %y0 : bf16[T,256]\n"
	"	ret %y\n"
	"}\n";

/* prog_channel through the default pipeline (check-eval on): whether it
 * regrouped; with data (w1s given values) or synthetic scales. */
static int
regrouped(int data, int fp8_mma, DbgFlags debug)
{
	PassOpts po;
	PassCtx pc = {0};
	Module *m;
	Weight *w1s, *w2s;
	double before[512], after[512 * 2];
	float *v = malloc(sizeof(float) * 512);
	Diag d;
	int changed;

	diag_init(&d, stderr);
	m = ir_parse("program.ir", prog_channel, strlen(prog_channel), &d);
	ck_assert_msg(m != NULL, "parse: %s", d.last);
	w1s = ir_find_weight(m, "w1s");
	w2s = ir_find_weight(m, "w2s");
	for (int i = 0; i < 512; i++)
		v[i] = 0.015f + 0.00002f * (float)i;
	if (data)
		w1s->data = v, w1s->size = sizeof(float) * 512, w1s->free_data = free_data;
	else
		free(v);
	ir_weight_elems(w1s, 0, 512, before);
	pass_default_opts(&po);
	po.debug = debug;
	po.fp8_mma = fp8_mma;
	po.check_eval = 1;
	pc.d = &d;
	ck_assert_msg(pass_run(m, &po, &pc) == 0, "passes: %s", d.last);
	changed = w1s->value->type.dim[1] == 2;
	ck_assert_int_eq(w2s->value->type.dim[1], changed ? 2 : 1);
	ck_assert_int_eq(w1s->col_repeat, changed && !data ? 2 : 0);
	ir_weight_elems(w1s, 0, changed ? 1024 : 512, after);
	for (int i = 0; i < (changed ? 1024 : 512); i++)
		ck_assert_msg(after[i] == before[changed ? i / 2 : i], "w1s[%d] %g, was %g", i, after[i],
			      before[changed ? i / 2 : i]);
	ir_free_module(m);
	return changed;
}

START_TEST(test_regroup_per_channel)
{
	ck_assert(regrouped(0, 1, DBG_EMU_WGMMA));
	ck_assert(regrouped(1, 1, DBG_EMU_WGMMA));
	ck_assert(!regrouped(0, 1, DBG_EMU_WGMMA | DBG_FP8_PER_TOKEN));
	ck_assert(!regrouped(1, 0, 0));
	/* both GEMMs FP8 x FP8 on the emulator, against the per-token interpreter */
	gh_check_program_debug(prog_channel, 70, "d_k0", "f8e4m3.f8e4m3->f8e4m3 B[N,K] N=512 K=256", 2e-2,
			       DBG_EMU_WGMMA);
	gh_check_program_debug(prog_channel, 3, "d_k1", "f8e4m3.f8e4m3->bf16 B[N,K] N=256 K=256", 2e-2,
			       DBG_EMU_WGMMA | DBG_EMU_WS);
}
END_TEST

/*
 * The cp.async mainloop's FP8 stages are counted as they are (swizzled,
 * unpadded, 1 KiB alignment): DeepSeek-V3's gate|up 64x256 tile (gathered,
 * interleaved blocked B, SwiGLU + e4m3 per 128) takes 5 stages on sm_90a
 * (it took 4: 5 padded ones were 480 bytes too many); and 5 stages with a
 * ring that wraps (7 k-tiles), halves and whole k-tiles, on the emulator
 * against the reference.
 */
START_TEST(test_five_stages)
{
	GemmSpec s;

	gh_spec_grouped_swiglu(&s, 256, 4096, 7168, 8);
	s.a_dt = s.b_dt = DT_F8E4M3;
	s.f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128};
	s.c_dt = DT_F8E4M3;
	s.quant = (CgQuant){.kind = CG_QUANT_GROUP, .in_dt = DT_BF16, .group = 128, .want_scales = 1};
	gh_tiles(&s, 64, 256, 128, 1, 8, 5);
	s.mainloop = CG_MAINLOOP_WGMMA;
	accepted(&s);
	ck_assert_int_le(cg_gemm_smem(&s), 232448);
	s.stages = 4;
	ck_assert_int_le(cg_gemm_smem(&s), 1024 + 4 * 40960 + 4096);

	GemmCase up = {.what = "f8 blocked grouped gather + swiglu 64x256 s5, K = 896", .T = 37,
		       .counts = {9, 0, 30, 0, 0, 17, 18, 0}};
	gh_spec_grouped_swiglu(&up.s, 8, 512, 896, 2);
	up.s.a_dt = up.s.b_dt = DT_F8E4M3;
	up.s.f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128};
	gh_tiles(&up.s, 64, 256, 128, 1, 8, 5);
	up.s.mainloop = CG_MAINLOOP_WGMMA;
	gh_check(&up, 1e-2);
	up.what = "f8 blocked grouped gather + swiglu 64x256 s5 whole, K = 896";
	up.s.f8.whole = 1;
	gh_check(&up, 1e-2);
}
END_TEST

/*
 * A tuning table's `.fw` (GemmSpec.f8.whole in programs, per GEMM key: the
 * session-27 A/B): the MoE's gate|up on the wgmma mainloop and the dense
 * FFN's down on the warp-specialised one take it (their notes say whole)
 * and match the interpreter; `.fw` on a GEMM that is not FP8 x FP8 is
 * not taken (a warning; the heuristic tiles it); one spelling.
 */
START_TEST(test_tuned_whole)
{
	const char *path = "check_gemm_f8_fw.tuning";
	FILE *fp = fopen(path, "w");
	CgVariant v;

	ck_assert_ptr_nonnull(fp);
	fputs("moec-tuning 2\n"
	      "emu g8.m2.n256.k256.f8e4m3.f8e4m3.nk.t65-256 64x64x128.w2x2.s4.k1.fw\n"
	      "emu dense.m1.n256.k256.f8e4m3.f8e4m3.nk.t65-256 64x256x128.w2x4.s4.k1.fw\n"
	      "emu g8.m2.n256.k128.bf16.f8e4m3.nk.t65-256 64x64x64.w2x2.s4.k1.fw\n", fp);
	fclose(fp);
	gh_check_program_tuned(prog_moe_blocked, 200, 256, "moe_k3", "b_block=128 whole", 2e-2, DBG_EMU_WGMMA, path);
	gh_check_program_tuned(prog_dense, 150, 256, "d_k1", "f8: whole", 2e-2,
			       DBG_EMU_WGMMA | DBG_EMU_WS, path);
	ck_assert_int_eq(cg_variant_parse("64x256x128.w2x4.s4.k1.fw", &v), 0);
	ck_assert_int_eq(v.f8whole, 1);
	ck_assert_int_eq(cg_variant_parse("64x256x128.w2x4.s4.k1.d.fw", &v), 0);
	ck_assert(v.f8whole && v.direct);
	ck_assert_int_eq(cg_variant_parse("64x256x128.w2x4.s4.k1.fw.d", &v), -1);
	ck_assert_int_eq(cg_variant_parse("64x256x128.w2x4.s4.k1.fw.fw", &v), -1);
	remove(path);
}
END_TEST

/*
 * Clusters of 2 sharing A (`.c2a`, GemmSpec.cluster = 2) on the FP8 x FP8
 * warp-specialised mainloop: DeepSeek-V3's down GEMM (grouped, A in sorted
 * order, persistent over 132 CTAs) at 64x256 and 128x128, whole k-tiles:
 * A's box halved and multicast, each CTA's producers staging its own scales,
 * the consumers releasing both CTAs' stages; ptxas with no spills and no
 * serialisation.  On the emulator (which runs a cluster's CTAs together):
 * the down at 64x256 and 128x128 in clusters against the reference and bit
 * for bit without them.  Gathered A stays refused.
 */
/* c in clusters of 2 (the kernel's note: note) against the reference (tol > 0)
 * and bit for bit, scales too, the same spec without them (grouped sharing B:
 * the pairs alone, each CTA loading both halves of B's tile) */
static void
cluster_same(const GemmCase *c, const char *note, double tol)
{
	GemmCase a = *c, b = *c;
	GemmRun r, q;
	GemmErr e;
	CgModule *m;

	a.s.mainloop = b.s.mainloop = CG_MAINLOOP_WS;
	a.s.cluster = 2;
	b.s.cluster = 0;
	m = gh_emit_specs("emu", GH_MMA, &a.s, 1, "c");
	ck_assert_int_eq(cg_module_find(m, "c0")->cluster, 2);
	ck_assert_msg(strstr(cg_module_find(m, "c0")->note, note), "%s", cg_module_find(m, "c0")->note);
	cg_module_free(m);
	ck_assert_msg(gh_run(&r, &a) == 0, "%s: clusters: %s", c->what, r.msg);
	ck_assert_msg(tol == 0 || (gh_compare(&r, &e) == 0 && e.err < tol), "%s: clusters: %s, error %g", c->what,
		      r.msg, e.err);
	ck_assert_msg(gh_run(&q, &b) == 0, "%s: without: %s", c->what, q.msg);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
		      "%s: clusters and the same tiles without them differ", c->what);
	if (c->s.quant.want_scales)
		ck_assert_msg(memcmp(q.C_scale, r.C_scale, (size_t)r.M * (size_t)(r.width / c->s.quant.group) *
				     sizeof(float)) == 0, "%s: clusters' scales differ", c->what);
	gh_free(&r);
	gh_free(&q);
}

START_TEST(test_ws_cluster)
{
	CgTarget e = {"emu", NULL, 3};
	GemmSpec s[2];
	const CgKernel *k;
	Diag d;

	for (int i = 0; i < 2; i++) {
		gh_spec_grouped_scale_scatter(&s[i], 256, 7168, 2048);
		s[i].m_per_t = 8;
		s[i].a_dt = s[i].b_dt = DT_F8E4M3;
		s[i].f8 = (CgF8){.group = 128, .b_block = 128, .whole = 1};
		s[i].c_dt = DT_F32;
		s[i].mainloop = CG_MAINLOOP_WS;
	}
	gh_tiles(&s[0], 64, 256, 128, 1, 8, 5);
	gh_tiles(&s[1], 128, 128, 128, 2, 4, 5);
	for (int i = 0; i < 2; i++) {
		s[i].sched = CG_SCHED_PERSISTENT;
		s[i].ctas = 132;
		s[i].cluster = 2;
		accepted(&s[i]);
	}
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, s, 2, "fc");
	k = cg_module_find(m, "fc0");
	ck_assert_int_eq(k->cluster, 2);
	ck_assert_int_eq(k->tmap[0].box[1], 32);	/* half of A's 64 rows */
	ck_assert_ptr_nonnull(strstr(k->note, "cluster2 multicast-a"));
	ck_assert_int_eq(cg_module_find(m, "fc1")->tmap[0].box[1], 64);
	const char *ptx = gh_ptx(m);
	ck_assert_int_gt(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 0);
	ck_assert(gh_count(ptx, ".multicast::cluster [") >= 2);
	ck_assert(gh_count(ptx, "mapa.shared::cluster.u32") >= 2);
	ck_assert_int_gt(gh_count(ptx, "cp.async.mbarrier.arrive.noinc"), 0);
	gh_assemble(m, 2, "gemm_f8 ws cluster", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
	diag_init(&d, NULL);
	ck_assert_msg(cg_gemm_check(&e, &s[0], &d) == 0, "%s", d.last);

	GemmCase dn = {.what = "f8 ws grouped down 64x256 in clusters of 2 sharing A, whole, blocked, 4 CTAs",
		       .T = 167, .counts = {1, 129, 64, 140}};
	spec_f8_down(&dn.s, 384, 1);
	dn.s.ctas = 4;
	cluster_same(&dn, "cluster2 multicast-a", 1e-5);
	dn.what = "f8 ws grouped down 128x128 in clusters of 2 sharing A, 2 CTAs";
	gh_tiles(&dn.s, 128, 128, 128, 2, 4, 4);
	dn.s.ctas = 2;
	cluster_same(&dn, "cluster2 multicast-a", 1e-5);

	gh_spec_grouped_swiglu(&s[0], 8, 1024, 512, 2);	/* gathered A: no TMA box of A to share */
	s[0].a_dt = s[0].b_dt = DT_F8E4M3;
	s[0].f8 = (CgF8){.group = 128, .whole = 1};
	gh_tiles(&s[0], 64, 256, 128, 1, 8, 4);
	s[0].mainloop = CG_MAINLOOP_WS;
	s[0].sched = CG_SCHED_PERSISTENT;
	s[0].ctas = 132;
	s[0].cluster = 2;
	refused(&s[0], "not with gathered");
}
END_TEST

/*
 * FP8's gate|up on the warp-specialised mainloop (the default since session 28): gathered
 * A (the producers' cp.async), lower-moe's interleaved B by a rank-3 TMA
 * box (k, gate|up half, row), SwiGLU, the output quantised to e4m3 per 128
 * with its scales (the amax barriers the consumers' named one, the slots
 * their own), whole k-tiles and blocked scales: against the reference (bf16
 * out), and bit for bit the cp.async mainloop's output and scales (e4m3
 * out), tiled and persistent (the slots reused across tiles).  Then whole
 * programs against the interpreter: the MoE block's routed gate|up and the
 * dense FFN's gate|up (A by TMA) on WS.
 */
static void
ws_same(const GemmCase *c)
{
	GemmCase w = *c;
	GemmRun r, q;
	size_t ns;

	w.s.mainloop = CG_MAINLOOP_WS;
	ck_assert_msg(gh_run(&r, &w) == 0, "%s: ws: %s", c->what, r.msg);
	w.s.mainloop = CG_MAINLOOP_WGMMA;
	w.s.stages = w.s.stages > 5 ? 5 : w.s.stages;
	ck_assert_msg(gh_run(&q, &w) == 0, "%s: wgmma: %s", c->what, q.msg);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0, "%s: ws and wgmma outputs differ",
		      c->what);
	ns = (size_t)r.M * (size_t)(r.width / c->s.quant.group);
	ck_assert_msg(memcmp(q.C_scale, r.C_scale, ns * sizeof(float)) == 0, "%s: ws and wgmma scales differ",
		      c->what);
	for (size_t i = 0; i < ns; i++)	/* every row's scales written (not the NaN fill) */
		ck_assert_msg(!isnan(r.C_scale[i]) && r.C_scale[i] > 0, "%s: scale %zu is %g", c->what, i,
			      r.C_scale[i]);
	gh_free(&q);
	gh_free(&r);
}

START_TEST(test_ws_gateup)
{
	GemmCase up = {.what = "f8 ws gate|up 64x256: gather, interleaved B, swiglu, whole, blocked, K = 384", .T = 37,
		       .counts = {9, 0, 30, 0, 0, 17, 18, 0}};

	gh_spec_grouped_swiglu(&up.s, 8, 512, 384, 2);
	up.s.a_dt = up.s.b_dt = DT_F8E4M3;
	up.s.f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128, .whole = 1};
	gh_tiles(&up.s, 64, 256, 128, 1, 8, 5);
	ws_case(&up, 1e-2);
	up.what = "f8 ws gate|up 64x256, scales a column, halves, 3 stages (the ring wraps)";
	up.s.f8 = (CgF8){.group = 128, .b_interleave = 1};
	up.s.stages = 3;
	ws_case(&up, 1e-2);
	up.what = "f8 ws gate|up 64x256 quantised to e4m3 per 128";
	up.s.f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128, .whole = 1};
	up.s.stages = 5;
	up.s.c_dt = DT_F8E4M3;
	up.s.quant = (CgQuant){.kind = CG_QUANT_GROUP, .in_dt = DT_BF16, .group = 128, .want_scales = 1};
	ws_same(&up);
	up.what = "f8 ws gate|up 64x256 quantised, persistent with 2 CTAs";
	up.s.sched = CG_SCHED_PERSISTENT;
	up.s.ctas = 2;
	ws_same(&up);
	up.what = "f8 ws gate|up 128x128 quantised per 64 (warpgroups stacked), persistent";
	gh_tiles(&up.s, 128, 128, 128, 2, 4, 4);
	up.s.quant.group = 64;
	up.s.f8.b_block = 0;
	ws_same(&up);
	up.s.N = 384;	/* 1.5 tiles an expert: a box would take the next expert's rows */
	up.s.sched = CG_SCHED_TILES;
	gh_tiles(&up.s, 64, 256, 128, 1, 8, 4);
	up.s.mainloop = CG_MAINLOOP_WS;
	refused(&up.s, "interleaved B needs N a multiple of bn");

	up.what = "bf16 ws gate|up 64x256 quantised to e4m3 per 128 (the shared expert's, bf16 x bf16)";
	gh_spec_grouped_swiglu(&up.s, 8, 512, 384, 2);
	gh_tiles(&up.s, 64, 256, 64, 1, 8, 4);
	up.s.c_dt = DT_F8E4M3;
	up.s.quant = (CgQuant){.kind = CG_QUANT_GROUP, .in_dt = DT_BF16, .group = 128, .want_scales = 1};
	ws_same(&up);

	/* DeepSeek-V3's routed gate|up as the default plans it: ptxas, no spills or serialisation */
	GemmSpec ds;
	spec_dsv3_gateup(&ds);
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, &ds, 1, "fgu");
	const CgKernel *k = cg_module_find(m, "fgu0");
	ck_assert_int_eq(k->tmap[0].rank, 3);	/* B only (A gathered): (k, half, row) */
	ck_assert_int_eq(k->tmap[0].box[1], 2);
	ck_assert_int_eq(k->tmap[0].box[2], 128);
	ck_assert_int_ge(gh_count(gh_ptx(m), "bar.sync %r"), 3);	/* the amax barriers: the consumers' (named) */
	gh_assemble(m, 1, "gemm_f8 ws gate|up", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);

	gh_check_program_debug(prog_moe_blocked, 45, "moe_k3", "cp.async-a", 2e-2,
			       DBG_EMU_WGMMA | DBG_EMU_WS);
	gh_check_program_debug(prog_moe_blocked, 200, "moe_k3", "cp.async-a", 2e-2,
			       DBG_EMU_WGMMA | DBG_EMU_WS);
	gh_check_program_debug(prog_dense, 70, "d_k0", "ws tma", 2e-2, DBG_EMU_WGMMA | DBG_EMU_WS);
}
END_TEST

/* A quantised FP8 gate|up (8 experts, N 512) on 64x256 tiles in pairs sharing
 * B, persistent over 3 CTAs: K, the stages, B prefetched into L2 or not. */
static void
spec_gateup_pairs(GemmSpec *s, int64_t K, int stages, int l2_ahead)
{
	gh_spec_grouped_swiglu(s, 8, 512, K, 2);
	s->a_dt = s->b_dt = DT_F8E4M3;
	s->f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128, .whole = 1,
		       .l2_ahead = l2_ahead};
	s->c_dt = DT_F8E4M3;
	s->quant = (CgQuant){.kind = CG_QUANT_GROUP, .in_dt = DT_BF16, .group = 128, .want_scales = 1};
	gh_tiles(s, 64, 256, 128, 1, 8, stages);
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = 3;
	s->cluster_b = 1;
}

/*
 * Clusters of 2 sharing B (--debug=f8-c2; GemmSpec.cluster_b): the pairs
 * without the cluster, each CTA loading both halves of B's tile itself (the
 * gate|up's through the interleave, a box of bn/4 pairs each): an expert's
 * row tiles 2j, 2j + 1 of one column tile, an odd last row tile's column
 * tiles in pairs; bit for bit the wgmma mainloop; the same in clusters on
 * the emulator bit for bit the pairs.
 * DeepSeek-V3's gate|up in clusters through ptxas; a MoE program with the
 * flag against the interpreter.
 */
START_TEST(test_ws_pairs)
{
	GemmCase up = {.what = "f8 ws gate|up 64x256 quantised, pairs sharing B (half boxes through the interleave), "
			       "3 CTAs", .T = 215, .counts = {1, 0, 64, 65, 129, 140, 30, 1}};	/* 1-3 row tiles */

	spec_gateup_pairs(&up.s, 384, 4, 0);
	ws_same(&up);
	up.what = "f8 ws gate|up 64x256 quantised, clusters of 2 sharing B (the emulator runs them), 4 CTAs";
	up.s.ctas = 4;
	cluster_same(&up, "cluster2 multicast-b", 0);
	up.s.ctas = 3;

	/* the down GEMM in pairs (A by TMA: a pair of row tiles its own tiles, an odd last row tile's column
	 * tiles A's half boxes), 1, 2 and 3 row tiles an expert, persistent over 3 CTAs */
	GemmCase dn = {.what = "f8 ws grouped down 64x256 in pairs sharing B, whole, blocked", .T = 167,
		       .counts = {1, 129, 64, 140}};
	spec_f8_down(&dn.s, 384, 1);
	dn.s.cluster_b = 1;
	ws_case(&dn, 1e-5);

	/* DeepSeek-V3's routed gate|up as the cluster default plans it: clusters of 2 sharing B, each CTA's half of the
	 * interleaved rows (a box of 64 pairs) multicast, or both halves itself (an odd last row tile) */
	GemmSpec ds;
	spec_dsv3_gateup(&ds);
	ds.sched = CG_SCHED_PERSISTENT;
	ds.ctas = 132;
	ds.cluster = 2;
	ds.cluster_b = 1;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, &ds, 1, "fgc");
	const CgKernel *k = cg_module_find(m, "fgc0");
	ck_assert_int_eq(k->cluster, 2);
	ck_assert_int_eq(k->tmap[0].rank, 3);
	ck_assert_int_eq(k->tmap[0].box[1], 2);
	ck_assert_int_eq(k->tmap[0].box[2], 64);
	ck_assert_int_eq(gh_count(gh_ptx(m), "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::"
					     "bytes.multicast::cluster ["), 1);
	ck_assert_int_eq(gh_count(gh_ptx(m), "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::"
					     "bytes ["), 2);
	gh_assemble(m, 1, "gemm_f8 ws gate|up cluster_b", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);

	/* with grouped-c2, which takes the clusters on the emulator too: the gate|up (two column tiles through
	 * the interleave) in pairs at 130 rows an expert (1 and 2 row tiles of 128), against the interpreter */
	gh_check_program_max(prog_moe_c2, 520, 600, "moe_k3", "cluster2 multicast-b", 2e-2,
			     DBG_EMU_WGMMA | DBG_EMU_WS | DBG_GROUPED_C2 | DBG_F8_C2);
}
END_TEST

/*
 * --debug=f8-l2 (program.c's f8_l2): the FP8 gate|up's gathered A rows past
 * each tile's expert zero-filled without a read (live_rows).  A dead row's
 * result is never stored and a live row's sums do not read it, so the
 * output is main's bit for bit: on the emulator the quantised gate|up (its
 * e4m3 output and scales) at 1 to 5 row tiles an expert (tiles of 1..64
 * live rows), in pairs sharing B persistent over 3 CTAs (T > 1024's plan)
 * and on tiles (T <= 1024's), each against the same spec without live rows;
 * the MoE program with the flag against the interpreter, its k3 noting them.
 */
static void
live_same(const GemmCase *c)
{
	GemmCase w = *c;
	GemmRun r, q;
	size_t ns;

	w.s.mainloop = CG_MAINLOOP_WS;
	ck_assert_msg(gh_run(&q, &w) == 0, "%s: every row: %s", c->what, q.msg);
	w.s.live_rows = 1;
	ck_assert_msg(gh_run(&r, &w) == 0, "%s: live rows: %s", c->what, r.msg);
	ck_assert_int_eq(r.s.live_rows, 1);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0, "%s: outputs differ", c->what);
	ns = (size_t)r.M * (size_t)(r.width / c->s.quant.group);
	ck_assert_msg(memcmp(q.C_scale, r.C_scale, ns * sizeof(float)) == 0, "%s: scales differ", c->what);
	gh_free(&q);
	gh_free(&r);
}

START_TEST(test_ws_f8_l2)
{
	GemmCase up = {.what = "f8 ws gate|up 64x256 quantised, pairs sharing B, live rows, 1-5 row tiles",
		       .T = 500, .counts = {1, 300, 64, 65, 129, 250, 0, 191}};

	spec_gateup_pairs(&up.s, 384, 4, 0);
	live_same(&up);
	up.what = "f8 ws gate|up 64x256 quantised, tiles (T <= 1024's plan), live rows";
	up.s.cluster_b = 0;
	up.s.sched = CG_SCHED_TILES;
	live_same(&up);

	gh_check_program_max(prog_moe_c2, 520, 600, "moe_k3", "live-rows", 2e-2,
			     DBG_EMU_WGMMA | DBG_EMU_WS | DBG_GROUPED_C2 | DBG_F8_C2 | DBG_F8_L2);
	gh_check_program_max(prog_moe_c2, 520, 600, "moe_k3", "live-rows", 2e-2,
			     DBG_EMU_WGMMA | DBG_EMU_WS | DBG_GROUPED_C2 | DBG_F8_C2);	/* without: F8_L2_DEFAULT */
}
END_TEST

/*
 * --debug=f8-l2pf (GemmSpec.f8.l2_ahead): the producers prefetch B's boxes
 * a ring ahead into L2, 4 k-tiles at once (a hint: nothing on the
 * emulator, where the builder still runs every box's coordinates and tensor
 * map check): bit for bit the wgmma mainloop (the gate|up in pairs, the
 * ring wrapping over 7 k-tiles at 3 stages); DeepSeek-V3's gate|up in
 * clusters through ptxas with each box of the ring's loads prefetched 4
 * times (no spills in the producer's 40 registers, no serialisation); a MoE
 * program with the flag against the interpreter.
 */
START_TEST(test_ws_l2_ahead)
{
	GemmCase up = {.what = "f8 ws gate|up 64x256 quantised, pairs sharing B, B prefetched into L2, 3 stages, "
			       "K = 896", .T = 215, .counts = {1, 0, 64, 65, 129, 140, 30, 1}};

	spec_gateup_pairs(&up.s, 896, 3, 1);
	ws_same(&up);

	GemmSpec ds;
	spec_dsv3_gateup(&ds);
	ds.sched = CG_SCHED_PERSISTENT;
	ds.ctas = 132;
	ds.cluster = 2;
	ds.cluster_b = 1;
	ds.f8.l2_ahead = 1;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, &ds, 1, "fgp");
	/* the multicast half box, or both halves (an odd last row tile): 3 boxes, 4 k-tiles each */
	ck_assert_int_eq(gh_count(gh_ptx(m), "cp.async.bulk.prefetch.tensor.3d.L2.global.tile ["), 12);
	gh_assemble(m, 1, "gemm_f8 ws gate|up cluster_b l2_ahead", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);

	gh_check_program_debug(prog_moe_blocked, 200, "moe_k3", "cp.async-a", 2e-2,
			       DBG_EMU_WGMMA | DBG_EMU_WS | DBG_F8_L2PF);
}
END_TEST

/*
 * The down GEMM on 192-row tiles (bench/quant/fp8_down192.tuning, session 34):
 * three consumer warpgroups stacked over the rows, 64x128 each (the same
 * whole k-tile wgmma group and promotion as the 64x256 tile's), so its
 * output is bit for bit the 64x256 plan's (main's) and the reference's within
 * f32 rounding.  Experts of 3 rows (two warpgroups without a row), 197 (two
 * row tiles, the second of 5 rows), none, and 130 (the third warpgroup 2
 * rows); persistent over 3 CTAs, the ring wrapping over K = 640.  Then
 * DeepSeek-V3's down at that tile through ptxas: 512 threads, no spills, no
 * serialisation, each k-tile one group of m64n128k32 a warpgroup.
 */
START_TEST(test_ws_stacked_down)
{
	GemmCase dn = {.what = "f8 whole ws grouped down 192x128 (three warpgroups stacked), blocked, persistent "
			       "with 3 CTAs, K = 640", .T = 165, .counts = {3, 197, 0, 130}};
	GemmCase ref = dn;
	GemmRun r, q;
	GemmErr e;

	spec_f8_down(&ref.s, 640, 1);
	ref.s.mainloop = CG_MAINLOOP_WS;
	dn.s = ref.s;
	gh_tiles(&dn.s, 192, 128, 128, 3, 4, 5);
	ck_assert_msg(gh_run(&r, &dn) == 0 && gh_compare(&r, &e) == 0, "%s: %s", dn.what, r.msg);
	ck_assert_msg(e.err < 1e-5, "%s: relative L2 error %g", dn.what, e.err);
	ck_assert_msg(gh_run(&q, &ref) == 0, "%s: 64x256: %s", dn.what, q.msg);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0, "%s: 192x128 and 64x256 differ",
		      dn.what);
	gh_free(&q);
	gh_free(&r);

	GemmSpec ds;
	gh_spec_grouped_scale_scatter(&ds, 256, 7168, 2048);
	ds.m_per_t = 8;
	ds.a_dt = ds.b_dt = DT_F8E4M3;
	ds.f8 = (CgF8){.group = 128, .b_block = 128, .whole = 1};
	ds.c_dt = DT_F32;
	gh_tiles(&ds, 192, 128, 128, 3, 4, 5);
	ds.sched = CG_SCHED_PERSISTENT;
	ds.ctas = 132;
	ds.mainloop = CG_MAINLOOP_WS;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, &ds, 1, "fd192");
	ck_assert_int_gt(gh_count(gh_ptx(m), "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 0);
	ck_assert_int_eq(gh_count(gh_ptx(m), "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"), 0);
	gh_assemble(m, 1, "gemm_f8 ws down 192x128", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/*
 * Ping-pong FP8 consumers (--debug=f8-pingpong, session 34): the down GEMM's
 * 64x256 cooperative tile as two warpgroups of 64x128 on whole tiles of
 * their own, taking turns at the tensor cores (one's promotion of its last
 * k-tile and its epilogue under the other's wgmmas): bit for bit the 64x256
 * plan's output (the same k-tile groups and promotion per element; whole
 * k-tiles and halves) and the reference's within f32 rounding; an odd
 * number of work items a CTA (the turn's last hand-over skipped), empty
 * experts, the ring wrapping.  Then DeepSeek-V3's down so through ptxas: no
 * spills, no serialisation.
 */
START_TEST(test_ws_pingpong_down)
{
	GemmCase dn = {.what = "f8 ws grouped down ping-pong 64x128 x2, blocked, persistent, K = 640", .T = 165,
		       .counts = {3, 197, 0, 130}};
	GemmCase ref = dn;
	GemmRun r, q;
	GemmErr e;

	for (int i = 0; i < 4; i++) {	/* whole k-tiles and halves, 3 and 4 CTAs */
		int whole = i < 2, ctas = 3 + i % 2;
		spec_f8_down(&ref.s, 640, whole);
		ref.s.mainloop = CG_MAINLOOP_WS;
		dn.s = ref.s;
		gh_tiles(&dn.s, 64, 128, 128, 1, 4, 4);
		dn.s.ws_mode = CG_WS_PINGPONG;
		dn.s.ctas = ctas;
		ck_assert_msg(gh_run(&r, &dn) == 0 && gh_compare(&r, &e) == 0, "%s (whole %d, %d CTAs): %s", dn.what,
			      whole, ctas, r.msg);
		ck_assert_msg(e.err < 1e-5, "%s: relative L2 error %g", dn.what, e.err);
		ck_assert_msg(gh_run(&q, &ref) == 0, "%s: 64x256: %s", dn.what, q.msg);
		ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
			      "%s (whole %d, %d CTAs): ping-pong and 64x256 differ", dn.what, whole, ctas);
		gh_free(&q);
		gh_free(&r);
	}

	GemmSpec ds;
	gh_spec_grouped_scale_scatter(&ds, 256, 7168, 2048);
	ds.m_per_t = 8;
	ds.a_dt = ds.b_dt = DT_F8E4M3;
	ds.f8 = (CgF8){.group = 128, .b_block = 128, .whole = 1};
	ds.c_dt = DT_F32;
	gh_tiles(&ds, 64, 128, 128, 1, 4, 5);
	ds.sched = CG_SCHED_PERSISTENT;
	ds.ctas = 132;
	ds.ws_mode = CG_WS_PINGPONG;
	ds.mainloop = CG_MAINLOOP_WS;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, &ds, 1, "fdpp");
	ck_assert_int_gt(gh_count(gh_ptx(m), "bar.arrive"), 0);
	gh_assemble(m, 1, "gemm_f8 ws down ping-pong", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/*
 * Two accumulator sets (GemmSpec.f8.acc2, the default since session 35; --debug=f8-acc1 not): k-tile
 * k + 1's wgmma group issued into one set before k's is waited for
 * (wait_group 1) and promoted from the other, in runs of up to 8 k-tiles
 * unrolled (a loop over the whole runs, then a shorter one).  The promotions
 * are main's, in main's order: bit for bit the one-set consumer's output, and
 * the reference's within f32 rounding.  The down (scattered, f32 out:
 * experts of 3, 197, 0 and 130 rows, persistent over 3 CTAs so the ring
 * wraps across tiles) and the gate|up (gathered A, interleaved B, SwiGLU,
 * quantised to e4m3 per 128, its scales too) at K of 1 k-tile, 5 (one odd
 * run), 17 (two runs of 6 in the loop, then 5: the sets' parity flips) and
 * 20 (two of 7, then 6).  Then DeepSeek-V3's gate|up
 * and down through ptxas: no spills, no serialisation, wait_group 1 in the
 * loop; cg_gemm_ws_for's switch (on by default, off with f8-acc1, kept when
 * a spec asks; never on halves); and the MoE program both ways against the
 * interpreter.
 */
START_TEST(test_ws_acc2)
{
	static const int kts[] = {1, 5, 17, 20};
	GemmCase dn = {.what = "f8 ws grouped down, two accumulator sets", .T = 165, .counts = {3, 197, 0, 130}};
	GemmCase up = {.what = "f8 ws gate|up 64x256 quantised, two accumulator sets", .T = 37,
		       .counts = {9, 0, 30, 0, 0, 17, 18, 0}};
	GemmRun r, q;
	GemmErr e;
	size_t ns;

	for (int i = 0; i < (int)NELEM(kts); i++) {
		GemmCase one = dn;
		spec_f8_down(&one.s, 128 * (int64_t)kts[i], 1);
		one.s.mainloop = CG_MAINLOOP_WS;
		dn.s = one.s;
		dn.s.f8.acc2 = 1;
		ck_assert_msg(gh_run(&r, &dn) == 0 && gh_compare(&r, &e) == 0, "%s (%d k-tiles): %s", dn.what,
			      kts[i], r.msg);
		ck_assert_msg(e.err < 1e-5, "%s (%d k-tiles): relative L2 error %g", dn.what, kts[i], e.err);
		ck_assert_msg(gh_run(&q, &one) == 0, "%s: one set: %s", dn.what, q.msg);
		ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
			      "%s (%d k-tiles): two sets and one differ", dn.what, kts[i]);
		gh_free(&q);
		gh_free(&r);
	}
	for (int i = 0; i < (int)NELEM(kts); i++) {
		GemmCase one = up;
		gh_spec_grouped_swiglu(&one.s, 8, 512, 128 * (int64_t)kts[i], 2);
		one.s.a_dt = one.s.b_dt = DT_F8E4M3;
		one.s.f8 = (CgF8){.group = 128, .b_interleave = 1, .b_block = 128, .whole = 1};
		one.s.c_dt = DT_F8E4M3;
		one.s.quant = (CgQuant){.kind = CG_QUANT_GROUP, .in_dt = DT_BF16, .group = 128, .want_scales = 1};
		gh_tiles(&one.s, 64, 256, 128, 1, 8, 4);
		one.s.mainloop = CG_MAINLOOP_WS;
		one.s.sched = CG_SCHED_PERSISTENT;
		one.s.ctas = 2;
		up.s = one.s;
		up.s.f8.acc2 = 1;
		ck_assert_msg(gh_run(&r, &up) == 0, "%s (%d k-tiles): %s", up.what, kts[i], r.msg);
		ck_assert_msg(gh_run(&q, &one) == 0, "%s: one set: %s", up.what, q.msg);
		ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
			      "%s (%d k-tiles): two sets and one differ", up.what, kts[i]);
		ns = (size_t)r.M * (size_t)(r.width / up.s.quant.group);
		ck_assert_msg(memcmp(q.C_scale, r.C_scale, ns * sizeof(float)) == 0,
			      "%s (%d k-tiles): the scales differ", up.what, kts[i]);
		gh_free(&q);
		gh_free(&r);
	}
	up.s.c_dt = DT_BF16;	/* the gate|up against the reference (bf16 out) */
	up.s.quant = (CgQuant){0};
	ws_case(&up, 1e-2);

	GemmSpec ds[2];
	spec_dsv3_gateup(&ds[0]);
	ds[0].sched = CG_SCHED_PERSISTENT;
	ds[0].ctas = 132;
	gh_spec_grouped_scale_scatter(&ds[1], 256, 7168, 2048);
	ds[1].m_per_t = 8;
	ds[1].a_dt = ds[1].b_dt = DT_F8E4M3;
	ds[1].f8 = (CgF8){.group = 128, .b_block = 128, .whole = 1};
	ds[1].c_dt = DT_F32;
	gh_tiles(&ds[1], 64, 256, 128, 1, 8, 5);
	ds[1].sched = CG_SCHED_PERSISTENT;
	ds[1].ctas = 132;
	ds[1].mainloop = CG_MAINLOOP_WS;
	for (int i = 0; i < 2; i++) {
		ds[i].f8.acc2 = 1;
		CgModule *m = gh_emit_specs("sm_90a", GH_MMA, &ds[i], 1, "fa2");
		ck_assert_int_gt(gh_count(gh_ptx(m), "wgmma.wait_group.sync.aligned 1;"), 0);
		gh_assemble(m, 1, i ? "gemm_f8 ws down acc2" : "gemm_f8 ws gate|up acc2", GH_NO_SPILLS | GH_NO_SERIAL);
		cg_module_free(m);
	}

	CgTarget t90a = {"sm_90a", NULL, 3};
	Diag d;
	diag_init(&d, stderr);
	CgModule *mod = cg_module_new(&t90a, "acc2", &d);
	for (int i = 0; i < 4; i++) {	/* default, f8-acc1, f8-acc1 with the spec's own ask, halves */
		GemmSpec w;
		spec_dsv3_gateup(&w);
		w.mainloop = CG_MAINLOOP_WGMMA;
		w.f8.acc2 = i == 2;
		w.f8.whole = i != 3;
		cg_module_set_debug(mod, i == 1 || i == 2 ? DBG_F8_ACC1 : 0);
		ck_assert(cg_gemm_ws_for(mod, &w));
		ck_assert_int_eq(w.f8.acc2, i == 0 || i == 2);
	}
	cg_module_free(mod);

	gh_check_program_debug(prog_moe_blocked, 200, "moe_k3", "whole acc2", 2e-2, DBG_EMU_WGMMA | DBG_EMU_WS);
	gh_check_program_debug(prog_moe_blocked, 200, "moe_k3", "whole", 2e-2,
			       DBG_EMU_WGMMA | DBG_EMU_WS | DBG_F8_ACC1);
}
END_TEST

/*
 * The shared expert's dense gate|up FP8 x FP8 (FP8_GLU_DEFAULT, session 39):
 * A by TMA, B the e4m3 weights with gate and up rows alternating (canon's
 * interleave), SwiGLU, the output quantised to e4m3 per 128 with its scales,
 * persistent: its consumers take 240 registers and the producer 24
 * (consumer_regs; at 232 / 40 DeepSeek-V3's k5 spilled 24 bytes: the
 * program's kernel, diag/fp8-shared-pers.test).  On the emulator, which
 * models the CTA's register pool, bit for bit the cp.async mainloop's output
 * and scales over 3 CTAs; DeepSeek-V3's k5 shape (N 4096, K 7168, 5 stages,
 * blocked B scales) so through ptxas: no spills, no serialisation.
 */
START_TEST(test_ws_shared_gateup)
{
	GemmCase c = {.what = "f8 ws dense gate|up 64x256 quantised per 128, persistent over 3 CTAs", .T = 150};

	spec_f8(&c.s, 512, 640);
	cg_ep_swiglu(&c.s.ep, cg_ep_acc(&c.s.ep), NULL);
	c.s.f8.whole = 1;
	c.s.c_dt = DT_F8E4M3;
	c.s.quant = (CgQuant){.kind = CG_QUANT_GROUP, .in_dt = DT_BF16, .group = 128, .want_scales = 1};
	gh_tiles(&c.s, 64, 256, 128, 1, 8, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	ws_same(&c);
	c.what = "f8 ws dense gate|up 64x256 quantised per 128, tiles";
	c.s.sched = CG_SCHED_TILES;
	ws_same(&c);

	GemmSpec ds = c.s;
	ds.N = 4096;
	ds.K = 7168;
	ds.mainloop = CG_MAINLOOP_WS;
	ds.sched = CG_SCHED_PERSISTENT;
	ds.ctas = 132;
	ds.stages = 5;
	ds.f8.b_block = 128;
	CgModule *m = gh_emit_specs("sm_90a", GH_MMA, &ds, 1, "fsg");
	ck_assert_int_gt(gh_count(gh_ptx(m), "setmaxnreg.inc.sync.aligned.u32 240;"), 0);
	ck_assert_int_gt(gh_count(gh_ptx(m), "setmaxnreg.dec.sync.aligned.u32 24;"), 0);
	gh_assemble(m, 1, "gemm_f8 ws shared gate|up persistent", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

Suite *
gemm_f8_suite(void)
{
	Suite *s = suite_create("gemm_f8");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_checks);
	tcase_add_test(t, test_params);
	tcase_add_test(t, test_ptxas);
	tcase_add_test(t, test_dense);
	tcase_add_test(t, test_grouped);
	tcase_add_test(t, test_ws_ptxas);
	tcase_add_test(t, test_ws_dense);
	tcase_add_test(t, test_ws_grouped);
	tcase_add_test(t, test_blocked);
	tcase_add_test(t, test_blocked_from_data);
	tcase_add_test(t, test_whole);
	tcase_add_loop_test(t, test_program_against_interpreter, 0, (int)NELEM(programs));
	tcase_add_loop_test(t, test_ws_program_against_interpreter, 0, (int)NELEM(ws_programs));
	suite_add_tcase(s, t);
	t = tcase_create("tuned");	/* tuning-table spellings of the FP8 variants */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_tuned_whole);
	tcase_add_test(t, test_five_stages);
	tcase_add_test(t, test_regroup_per_channel);
	tcase_add_test(t, test_ws_cluster);
	tcase_add_test(t, test_ws_gateup);
	tcase_add_test(t, test_ws_pairs);
	tcase_add_test(t, test_ws_l2_ahead);
	suite_add_tcase(s, t);
	t = tcase_create("stacked");	/* the down GEMM on 192-row tiles and ping-pong (session 34) */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_ws_stacked_down);
	tcase_add_test(t, test_ws_pingpong_down);
	tcase_add_test(t, test_ws_acc2);
	suite_add_tcase(s, t);
	t = tcase_create("l2");	/* --debug=f8-l2: the gathered A's live rows (session 38) */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_ws_f8_l2);
	suite_add_tcase(s, t);
	t = tcase_create("shared");	/* the shared expert's gate|up FP8 x FP8, persistent (session 39) */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_ws_shared_gateup);
	suite_add_tcase(s, t);
	t = tcase_create("split");	/* FP8 x FP8 split-K at decode (session 39) */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_split);
	tcase_add_test(t, test_f8_split_program);
	suite_add_tcase(s, t);
	return s;
}
