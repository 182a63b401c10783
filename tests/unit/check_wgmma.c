/*
 * check_wgmma.c — the sm_90a GEMM mainloop (GemmSpec.mainloop =
 * CG_MAINLOOP_WGMMA): its checks and diagnostics (sm_80 and sm_90 refuse
 * it, no abort), its geometry (block, grid and shared memory equal the
 * mma.sync kernel's, so one launch plan serves both), PTX for sm_90a
 * assembled by ptxas (wgmma present, registers, no spills, no serialised
 * wgmma), and kernels run on the CPU emulator, whose wgmma follows the PTX
 * ISA's descriptor layouts, against a host reference in double on random
 * inputs with NaN-poisoned outputs: dense with bias+GELU and ragged M,
 * every warpgroup split, bk 64 and 128, both pipelines, B [K,N] (N-major),
 * f16, f32 inputs, grouped with empty experts + gather + SwiGLU, routing
 * weights through the scattered store, persistent schedules.  Where both
 * mainloops run the same case, the outputs must agree bit for bit (the
 * emulator accumulates both k16 step by k16 step).  Last, the emulator's
 * own hazard checks, through cg_emit_wgmma_probe.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"

/*
 * The case with the wgmma mainloop against the reference; with same_as_mma,
 * also with the mma.sync mainloop, and the two outputs must be equal.
 */
static void
check_case(const GemmCase *c, double tol, int same_as_mma)
{
	const char *what = c->what ? c->what : "case";
	GemmCase w = *c;
	GemmRun r, q;
	GemmErr e, f;

	w.s.mainloop = CG_MAINLOOP_WGMMA;
	ck_assert_msg(gh_run(&r, &w) == 0 && gh_compare(&r, &e) == 0, "%s: wgmma: %s", what, r.msg);
	ck_assert_msg(e.err < tol, "%s: wgmma: relative L2 error %g >= %g", what, e.err, tol);
	if (same_as_mma) {
		w.s.mainloop = CG_MAINLOOP_MMA;
		ck_assert_msg(gh_run(&q, &w) == 0 && gh_compare(&q, &f) == 0, "%s: mma: %s", what, q.msg);
		ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
			      "%s: wgmma and mma.sync outputs differ (errors %g, %g)", what, e.err, f.err);
		gh_free(&q);
	}
	gh_free(&r);
}

/* ---- specs ---- */

static void
tiles(GemmSpec *s, int bm, int bn, int bk, int wm, int wn, int st)
{
	gh_tiles(s, bm, bn, bk, wm, wn, st);
	s->mainloop = CG_MAINLOOP_WGMMA;
}

/* ---- checks, diagnostics, geometry ---- */

START_TEST(test_wgmma_needs_sm90a)
{
	const char *sms[] = {"sm_80", "sm_86", "sm_90"};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&s, 256, 128);
	tiles(&s, 128, 128, 64, 2, 2, 3);
	for (size_t i = 0; i < NELEM(sms); i++) {
		CgTarget t = {sms[i], NULL, 3};
		CgModule *m = cg_module_new(&t, "w", &d);
		ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
		ck_assert_ptr_nonnull(strstr(d.last, "wgmma"));
		ck_assert_ptr_nonnull(strstr(d.last, "sm_90a"));
		ck_assert_int_eq(cg_emit_gemm(m, "g", &s, &d), -1);
		ck_assert_int_eq(cg_module_nkernel(m), 0);
		cg_module_free(m);
	}
	{
		CgTarget t = {"sm_90a", NULL, 3};
		ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
	}
}
END_TEST

START_TEST(test_wgmma_rejects_bad_tiles)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&s, 256, 128);
	tiles(&s, 128, 128, 32, 2, 2, 3);		/* 64-byte rows */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "bk = 32"));
	tiles(&s, 16, 128, 64, 1, 4, 4);		/* decode tile: wgmma has 64 rows */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "64k rows"));
	tiles(&s, 64, 64, 64, 1, 2, 3);			/* 2 warps: no warpgroup */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "warpgroups"));
	tiles(&s, 256, 128, 64, 2, 2, 3);		/* 4 warps, 256x128: 256 accumulators */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "accumulators"));
	tiles(&s, 64, 64, 64, 2, 4, 3);			/* 2 warpgroups over 64 columns: 32 each, N-major */
	s.b_layout = CG_B_KN;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "B[K,N]"));
	s.b_layout = CG_B_NK;				/* K-major: 32 columns per warpgroup are fine */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
}
END_TEST

/* The wgmma kernel launches exactly like the mma.sync one. */
START_TEST(test_wgmma_geometry_equals_mma)
{
	static const int tl[][6] = {
		{128, 256, 64, 2, 4, 3}, {256, 128, 64, 4, 2, 3}, {128, 128, 64, 2, 2, 4},
		{64, 128, 64, 2, 2, 4}, {64, 64, 128, 2, 2, 2}, {128, 128, 128, 2, 4, 2},
	};
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;

	diag_init(&d, NULL);
	for (size_t i = 0; i < NELEM(tl); i++) {
		GemmSpec s;
		CgModule *m = cg_module_new(&t, "geo", &d);
		const CgKernel *a, *b;
		gh_spec_grouped_swiglu(&s, 8, 512, 256, 2);
		tiles(&s, tl[i][0], tl[i][1], tl[i][2], tl[i][3], tl[i][4], tl[i][5]);
		ck_assert_msg(cg_emit_gemm(m, "w", &s, &d) == 0, "%d: %s", (int)i, d.last);
		s.mainloop = CG_MAINLOOP_MMA;
		ck_assert_msg(cg_emit_gemm(m, "m", &s, &d) == 0, "%d: %s", (int)i, d.last);
		a = cg_module_find(m, "w");
		b = cg_module_find(m, "m");
		ck_assert_int_eq(a->nparam, b->nparam);
		for (int p = 0; p < a->nparam; p++)
			ck_assert_str_eq(a->param[p].role, b->param[p].role);
		ck_assert_int_eq(a->block[0], b->block[0]);
		ck_assert_int_eq(a->smem, b->smem);
		ck_assert_int_eq(a->smem, cg_gemm_smem(&s));
		for (int g = 0; g < 3; g++)
			ck_assert(memcmp(&a->grid[g], &b->grid[g], sizeof a->grid[g]) == 0);
		ck_assert_ptr_nonnull(strstr(a->note, " wgmma"));
		ck_assert_ptr_null(strstr(b->note, "wgmma"));
		cg_module_free(m);
	}
}
END_TEST

/* ---- PTX and ptxas ---- */

START_TEST(test_wgmma_ptx_assembles_for_sm90a)
{
	GemmSpec s[9];
	int ns = 0;
	CgModule *m;
	const char *ptx;

	gh_spec_dense_bias_gelu(&s[ns], 14336, 4096);		/* the dense prefill tiles */
	tiles(&s[ns++], 256, 128, 64, 4, 2, 3);
	gh_spec_dense_bias_gelu(&s[ns], 14336, 4096);
	tiles(&s[ns++], 128, 256, 64, 2, 4, 3);
	gh_spec_dense_bias_gelu(&s[ns], 14336, 4096);
	tiles(&s[ns++], 128, 128, 64, 2, 2, 4);
	s[ns - 1].min_ctas = 1;
	gh_spec_grouped_swiglu(&s[ns], 8, 28672, 4096, 2);	/* Mixtral gate|up */
	tiles(&s[ns++], 128, 256, 64, 2, 4, 3);
	gh_spec_grouped_scale_scatter(&s[ns], 8, 4096, 14336);	/* Mixtral down */
	tiles(&s[ns++], 128, 256, 64, 2, 4, 3);
	gh_spec_kn_residual(&s[ns], 512, 256, DT_F16);		/* f16, B [K,N], residual */
	tiles(&s[ns++], 64, 128, 64, 2, 2, 3);
	gh_spec_dense_bias_gelu(&s[ns], 14336, 4096);		/* 4 stages: a group in flight */
	tiles(&s[ns++], 256, 128, 64, 4, 2, 4);
	gh_spec_expert_bias_swiglu(&s[ns], 32, 5760, 2880);	/* gpt-oss gate|up: 192 columns */
	s[ns].m_per_t = 4;
	s[ns].gather = 1;
	s[ns].gather_div = 4;
	tiles(&s[ns++], 128, 192, 64, 2, 4, 4);

	m = gh_emit_specs("sm_90a", GH_MMA, s, ns, "w");
	ptx = gh_ptx(m);
	ck_assert_int_eq(gh_count(ptx, ".entry"), ns);
	ck_assert(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") > 0);
	ck_assert(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") > 0);
	ck_assert(gh_count(ptx, "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16") > 0);
	ck_assert(gh_count(ptx, "wgmma.fence.sync.aligned") >= ns);
	ck_assert(gh_count(ptx, "wgmma.commit_group.sync.aligned") >= ns);
	ck_assert(gh_count(ptx, "wgmma.wait_group.sync.aligned 1") > 0);
	ck_assert(gh_count(ptx, "fence.proxy.async.shared::cta") >= ns);
	ck_assert_int_eq(gh_count(ptx, "mma.sync"), 0);
	ck_assert_int_eq(gh_count(ptx, "ldmatrix"), 0);
	gh_assemble(m, ns, "check_wgmma", GH_NO_SPILLS | GH_NO_SERIAL);
	cg_module_free(m);
}
END_TEST

/* ---- the kernels on the emulator ---- */

/* Dense bias + GELU over every warpgroup split; both mainloops, equal outputs. */
static const struct {
	const char *what;
	int N, K, tile[6], T;
} dense_cases[] = {
	{"one warpgroup, 3 k-tiles, 4 stages, ragged M", 256, 192, {128, 128, 64, 2, 2, 4}, 77},
	{"2 warpgroups over 256 rows", 256, 256, {256, 128, 64, 4, 2, 3}, 300},
	{"2 warpgroups over 256 columns", 512, 256, {128, 256, 64, 2, 4, 3}, 130},
	{"16 warps: 4 x 64 rows, two 64-wide k-blocks", 256, 384, {256, 128, 128, 4, 4, 2}, 270},
};

START_TEST(test_wgmma_emu_dense_warpgroup_splits)
{
	GemmCase c = {.what = dense_cases[_i].what};
	const int *tl = dense_cases[_i].tile;

	gh_spec_dense_bias_gelu(&c.s, dense_cases[_i].N, dense_cases[_i].K);
	tiles(&c.s, tl[0], tl[1], tl[2], tl[3], tl[4], tl[5]);
	c.T = dense_cases[_i].T;
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_wait0_pipeline_and_two_stages)
{
	GemmCase c = {0};

	gh_spec_dense_bias_gelu(&c.s, 128, 320);
	tiles(&c.s, 64, 64, 64, 2, 2, 4);		/* 4 stages, but wait_group 0 */
	c.s.no_frag_pipe = 1;
	c.T = 100;
	check_case(&c, 1e-2, 1);
	tiles(&c.s, 64, 64, 64, 2, 2, 3);		/* 3 stages: wait_group 0 by default */
	check_case(&c, 1e-2, 0);
	tiles(&c.s, 64, 64, 64, 2, 2, 2);
	c.s.no_frag_pipe = 0;
	check_case(&c, 1e-2, 0);
	tiles(&c.s, 64, 128, 64, 2, 4, 5);		/* 5 stages, 2 warpgroups of 64 columns */
	check_case(&c, 1e-2, 0);
}
END_TEST

START_TEST(test_wgmma_emu_kn_f16_residual)
{
	GemmCase c = {0};

	gh_spec_kn_residual(&c.s, 256, 192, DT_F16);
	tiles(&c.s, 64, 128, 64, 2, 2, 3);
	c.T = 90;
	check_case(&c, 1e-2, 1);
	tiles(&c.s, 128, 256, 128, 2, 4, 2);		/* two N-major blocks per warpgroup, bk 128 */
	c.s.ldb = 264;					/* a padded B */
	c.s.K = 256;
	c.T = 140;
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_f32_inputs_f32_out)
{
	GemmCase c = {0};

	cg_gemm_default(&c.s);
	c.s.N = 128;
	c.s.K = 128;
	c.s.a_dt = c.s.b_dt = c.s.c_dt = DT_F32;
	tiles(&c.s, 64, 128, 64, 2, 2, 3);
	c.T = 65;
	check_case(&c, 1e-2, 1);	/* bf16 rounding of the inputs */
}
END_TEST

START_TEST(test_wgmma_emu_grouped_swiglu_gather_empty_experts)
{
	GemmCase c = {0};
	int counts[8] = {0, 150, 1, 0, 0, 70, 19, 0};	/* 240 = 2 * 120 */

	gh_spec_grouped_swiglu(&c.s, 8, 256, 128, 2);
	tiles(&c.s, 128, 128, 64, 2, 2, 3);
	c.T = 120;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_grouped_prefill_tile_persistent)
{
	GemmCase c = {0};
	int counts[8] = {31, 0, 130, 2, 0, 0, 64, 29};	/* 256 = 2 * 128 */

	gh_spec_grouped_swiglu(&c.s, 8, 512, 128, 2);
	tiles(&c.s, 128, 256, 64, 2, 4, 3);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 5;
	c.T = 128;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2, 1);
}
END_TEST

/* The case with and without GemmSpec.full_blocks: equal outputs, and the
 * emulated wgmma operations (one per warpgroup) of each. */
static void
run_blocks(const GemmCase *c, long *full, long *skip)
{
	GemmCase w = *c;
	GemmRun r, q;
	GemmErr e;
	long n0;

	w.s.mainloop = CG_MAINLOOP_WGMMA;
	w.s.full_blocks = 1;
	n0 = cg_emu_wgmma_count();
	ck_assert_msg(gh_run(&r, &w) == 0 && gh_compare(&r, &e) == 0, "full blocks: %s", r.msg);
	*full = cg_emu_wgmma_count() - n0;
	w.s.full_blocks = 0;
	n0 = cg_emu_wgmma_count();
	ck_assert_msg(gh_run(&q, &w) == 0 && gh_compare(&q, &e) == 0, "skipped blocks: %s", q.msg);
	*skip = cg_emu_wgmma_count() - n0;
	ck_assert_msg(e.err < 1e-2, "skipped blocks: relative L2 error %g", e.err);
	ck_assert_msg(q.cbytes == r.cbytes && memcmp(q.C, r.C, r.cbytes) == 0,
		      "outputs with and without the skipped row blocks differ");
	gh_free(&r);
	gh_free(&q);
}

/*
 * A warpgroup's second 64-row block without a row of the tile issues no
 * wgmma (gemm_wgmma_by_rows).  128x256 on two warpgroups of 128x128, K = 128
 * (2 k-tiles of 4 k-steps), 2 column tiles: experts of 31, 130 (a full tile
 * and one of 2 rows), 2, 64 (exactly one block) and 29 rows are 6 row tiles,
 * one full: per column tile and warpgroup 2 x 4 x 2 wgmma a full tile, half
 * that for the others; 6 x 2 x 2 x 16 = 384 with every block, (1 x 16 + 5 x
 * 8) x 2 x 2 = 224 without.  Then 256x128 over two warpgroups of 128 rows
 * each (the second one's rows 128..255: none but expert 2's 129th and
 * 130th), persistent.
 */
START_TEST(test_wgmma_emu_skips_row_blocks_without_rows)
{
	GemmCase c = {0};
	int counts[8] = {31, 0, 130, 2, 0, 0, 64, 29};	/* 256 = 2 * 128 */
	long full, skip;

	gh_spec_grouped_swiglu(&c.s, 8, 512, 128, 2);
	tiles(&c.s, 128, 256, 64, 2, 4, 4);
	c.T = 128;
	memcpy(c.counts, counts, sizeof counts);
	run_blocks(&c, &full, &skip);
	ck_assert_int_eq(full, 384);
	ck_assert_int_eq(skip, 224);
	/* 256x128: 5 row tiles (one per expert with rows), 4 column tiles;
	 * warpgroup 0 rows 0-127, 1 rows 128-255, 2 k-tiles x 4 k-steps a block.
	 * Every block: 5 x 2 x 2 = 20 blocks, x 8 x 4 = 640.  Skipped: e2 (130
	 * rows) 2 + 1 blocks, the others 1 + 1 (a warpgroup without a row issues
	 * its first block all the same): 11 x 8 x 4 = 352. */
	gh_spec_grouped_swiglu(&c.s, 8, 512, 128, 2);
	tiles(&c.s, 256, 128, 64, 4, 2, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 3;
	run_blocks(&c, &full, &skip);
	ck_assert_int_eq(full, 640);
	ck_assert_int_eq(skip, 352);
}
END_TEST

START_TEST(test_wgmma_emu_grouped_gpt_oss_expert_bias)
{
	GemmCase c = {0};
	int counts[4] = {9, 0, 80, 1};

	gh_spec_expert_bias_swiglu(&c.s, 4, 128, 128);
	tiles(&c.s, 64, 128, 64, 2, 2, 3);
	c.T = 90;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2, 1);
}
END_TEST

/*
 * 192-column tiles (gpt-oss: N = 5760 and 2880 are multiples of 192, not of
 * 256): two warpgroups of 96 columns (m64n96k16), K = 192 three 64-wide
 * k-tiles (no multiple of 128), rows past an expert's 128 in a second row
 * tile; gathered gate|up with the per-expert bias and clamped SwiGLU, and
 * the down projection's routing weight and scattered rows.
 */
START_TEST(test_wgmma_emu_grouped_192_columns)
{
	GemmCase c = {.what = "128x192: gathered gate|up, expert bias, clamped SwiGLU"};
	int counts[4] = {9, 0, 200, 131};	/* 340 = 4 * 85 */

	gh_spec_expert_bias_swiglu(&c.s, 4, 384, 192);
	c.s.m_per_t = 4;
	c.s.gather = 1;
	c.s.gather_div = 4;
	tiles(&c.s, 128, 192, 64, 2, 4, 4);
	c.T = 85;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2, 1);
	c.what = "128x192: routing weight, scattered rows, persistent";
	gh_spec_grouped_scale_scatter(&c.s, 4, 576, 192);
	tiles(&c.s, 128, 192, 64, 2, 4, 5);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 5;
	c.T = 340;
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_grouped_scale_scatter)
{
	GemmCase c = {0};
	int counts[8] = {3, 0, 140, 0, 1, 49, 0, 7};	/* 200 */

	gh_spec_grouped_scale_scatter(&c.s, 8, 256, 192);
	tiles(&c.s, 64, 128, 64, 2, 2, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 6;
	c.T = 200;
	memcpy(c.counts, counts, sizeof counts);
	check_case(&c, 1e-2, 1);
}
END_TEST

START_TEST(test_wgmma_emu_grouped_no_rows)
{
	GemmCase c = {0};

	gh_spec_grouped_swiglu(&c.s, 4, 128, 64, 1);
	tiles(&c.s, 64, 128, 64, 2, 2, 2);
	c.T = 21;
	c.counts[3] = 21;
	check_case(&c, 1e-2, 1);
	c.T = 0;		/* no rows: nothing runs, nothing breaks */
	c.counts[3] = 0;
	check_case(&c, 1e-2, 0);
}
END_TEST

/* ---- the emulator's wgmma itself, through the one-instruction probe ---- */

/* Run the probe; 0 with the relative error in *err, or -1 with the diagnostic in msg. */
static int
run_probe(int n, DbgFlags flags, double *err, char *msg, size_t nmsg)
{
	CgTarget t = {"emu", NULL, 3};
	Diag d;
	CgModule *m;
	const CgKernel *k;
	void *A, *B;
	float *D;
	uint64_t args[3];
	CgEmuBuf buf[3];
	double e2 = 0, r2 = 0;
	int rc = -1;

	gh_seed(777);
	diag_init(&d, NULL);
	m = cg_module_new(&t, "probe", &d);
	if (!m || cg_emit_wgmma_probe(m, "p", n, flags, &d) < 0) {
		snprintf(msg, nmsg, "emit: %s", d.last);
		cg_module_free(m);
		return -1;
	}
	k = cg_module_find(m, "p");
	A = gh_rand(DT_BF16, 64 * 16, 1.0);
	B = gh_rand(DT_BF16, (size_t)n * 16, 1.0);
	D = malloc(sizeof(float) * 64 * (size_t)n);
	memset(D, 0xff, sizeof(float) * 64 * (size_t)n);
	args[0] = (uint64_t)(uintptr_t)A;
	args[1] = (uint64_t)(uintptr_t)B;
	args[2] = (uint64_t)(uintptr_t)D;
	buf[0] = (CgEmuBuf){A, 64 * 16 * 2};
	buf[1] = (CgEmuBuf){B, (size_t)n * 16 * 2};
	buf[2] = (CgEmuBuf){D, sizeof(float) * 64 * (size_t)n};
	{
		CgEmuLaunch l = {{1, 1, 1}, {128, 1, 1}, k->smem, args, 3, buf, 3};
		if (cg_emu_run(m, "p", &l, &d) < 0) {
			snprintf(msg, nmsg, "%s", d.last);
			goto done;
		}
	}
	for (int r = 0; r < 64; r++)
		for (int c = 0; c < n; c++) {
			double want = 0, got = D[r * n + c];
			for (int q = 0; q < 16; q++)
				want += dtype_load(DT_BF16, A, (size_t)(r * 16 + q)) *
					dtype_load(DT_BF16, B, (size_t)(c * 16 + q));
			if (isnan(got)) {
				snprintf(msg, nmsg, "D[%d,%d] not written", r, c);
				goto done;
			}
			e2 += (got - want) * (got - want);
			r2 += want * want;
		}
	*err = sqrt(e2 / r2);
	rc = 0;
done:
	cg_module_free(m);
	free(A);
	free(B);
	free(D);
	return rc;
}

START_TEST(test_wgmma_probe_fragment_and_32b_swizzle)
{
	int ns[] = {8, 64, 136, 256};
	char msg[600];
	double err;

	for (size_t i = 0; i < NELEM(ns); i++) {
		ck_assert_msg(run_probe(ns[i], 0, &err, msg, sizeof msg) == 0, "n=%d: %s", ns[i], msg);
		ck_assert_msg(err < 1e-6, "n=%d: relative error %g", ns[i], err);
	}
}
END_TEST

/* The emulator's hazard checks fire on kernels that break the rules. */
START_TEST(test_wgmma_probe_hazards_are_diagnostics)
{
	char msg[600];
	double err;

	ck_assert_int_eq(run_probe(64, CG_WGPROBE_NO_FENCE, &err, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "fence.proxy.async") != NULL, "%s", msg);
	ck_assert_int_eq(run_probe(64, CG_WGPROBE_WRITE_IN_FLIGHT, &err, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "in-flight wgmma") != NULL, "%s", msg);
	ck_assert_int_eq(run_probe(64, CG_WGPROBE_NO_WAIT, &err, msg, sizeof msg), -1);
	ck_assert_msg(strstr(msg, "not retired") != NULL, "%s", msg);
}
END_TEST

START_TEST(test_wgmma_probe_ptx)
{
	CgTarget t80 = {"sm_80", NULL, 3}, t90 = {"sm_90", NULL, 3}, t90a = {"sm_90a", NULL, 3};
	Diag d;
	CgModule *m;
	CgPtxasResult r;
	const char *ptx;
	size_t len;

	diag_init(&d, NULL);
	m = cg_module_new(&t80, "p", &d);
	ck_assert_int_eq(cg_emit_wgmma_probe(m, "p", 64, 0, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "sm_90a"));
	cg_module_free(m);
	m = cg_module_new(&t90, "p", &d);
	ck_assert_int_eq(cg_emit_wgmma_probe(m, "p", 64, 0, &d), -1);
	cg_module_free(m);
	m = cg_module_new(&t90a, "p", &d);
	ck_assert_int_eq(cg_emit_wgmma_probe(m, "p", 256, 0, &d), 0);
	ptx = cg_module_ptx(m, &len, &d);
	ck_assert_ptr_nonnull(ptx);
	ck_assert_ptr_nonnull(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"));
	if (cg_ptxas_path()) {
		ck_assert_msg(cg_module_assemble(m, 0, &r, &d) == 0, "%s", d.last);
		cg_ptxas_free(&r);
	}
	cg_module_free(m);
}
END_TEST

Suite *
wgmma_suite(void)
{
	Suite *s = suite_create("wgmma");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_wgmma_needs_sm90a);
	tcase_add_test(t, test_wgmma_rejects_bad_tiles);
	tcase_add_test(t, test_wgmma_geometry_equals_mma);
	tcase_add_test(t, test_wgmma_ptx_assembles_for_sm90a);
	tcase_add_loop_test(t, test_wgmma_emu_dense_warpgroup_splits, 0, (int)NELEM(dense_cases));
	tcase_add_test(t, test_wgmma_emu_wait0_pipeline_and_two_stages);
	tcase_add_test(t, test_wgmma_emu_kn_f16_residual);
	tcase_add_test(t, test_wgmma_emu_f32_inputs_f32_out);
	tcase_add_test(t, test_wgmma_emu_grouped_swiglu_gather_empty_experts);
	tcase_add_test(t, test_wgmma_emu_grouped_prefill_tile_persistent);
	tcase_add_test(t, test_wgmma_emu_grouped_gpt_oss_expert_bias);
	tcase_add_test(t, test_wgmma_emu_grouped_scale_scatter);
	tcase_add_test(t, test_wgmma_emu_grouped_192_columns);
	tcase_add_test(t, test_wgmma_emu_skips_row_blocks_without_rows);
	tcase_add_test(t, test_wgmma_emu_grouped_no_rows);
	tcase_add_test(t, test_wgmma_probe_fragment_and_32b_swizzle);
	tcase_add_test(t, test_wgmma_probe_hazards_are_diagnostics);
	tcase_add_test(t, test_wgmma_probe_ptx);
	suite_add_tcase(s, t);
	return s;
}
