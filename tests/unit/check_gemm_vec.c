/*
 * check_gemm_vec.c — decode GEMMs as warp dot products (k_gemm_vec.c,
 * GemmSpec.mainloop = CG_MAINLOOP_VEC through cg_emit_gemm): its checks,
 * PTX for sm_80 / sm_90 / sm_90a assembled by ptxas without spills, and
 * kernels on the CPU emulator against the harness's double reference with
 * outputs poisoned first: grouped gate|up with gathered rows and SwiGLU,
 * the down projection's routing weights and scattered store, empty
 * experts, experts with more rows than a tile (several row tiles), dense
 * ragged M, K with partial rounds (K = 72: none full; 4104: a loop of
 * groups and a tail), bf16 and f16, f32 and bf16 outputs, exact sums bit
 * for bit, and a grid of fewer warps than items; each with the loads of
 * a group issued a group ahead (GemmSpec.vec_ahead) and without.
 */
#include <check.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"

/* A case for the vec builder (cg_emit_gemm dispatches on the mainloop). */
#define VEC_CASE {.builder = GH_MMA, .fill = GH_NONZERO}

static int ahead;	/* GemmSpec.vec_ahead of the emulated cases (the loop tests' index) */

static void
vec(GemmSpec *s, int bm, int bn, int ctas)
{
	s->mainloop = CG_MAINLOOP_VEC;
	s->vec_ahead = ahead;
	s->bm = bm;
	s->bn = bn;
	s->sched = CG_SCHED_PERSISTENT;
	s->ctas = ctas;
}

START_TEST(test_vec_rejects_bad_specs)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	ahead = 0;
	diag_init(&d, NULL);
	gh_spec_grouped_swiglu(&s, 8, 64, 128, 2);
	vec(&s, 1, 2, 264);
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), 0);
	ck_assert_int_eq(cg_gemm_smem(&s), cg_gemm_vec_smem(&s));
	vec(&s, 9, 2, 264);				/* too many rows */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "gemm-vec"));
	vec(&s, 1, 3, 264);				/* odd columns */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	vec(&s, 1, 6, 264);				/* 6 does not divide 64 */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	vec(&s, 1, 2, 264);
	s.sched = CG_SCHED_TILES;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "persistent"));
	vec(&s, 1, 2, 264);
	s.b_dt = DT_F16;				/* bf16 x f16 */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	gh_spec_grouped_swiglu(&s, 8, 64, 124, 2);	/* K not a multiple of 8 */
	vec(&s, 1, 2, 264);
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	gh_spec_grouped_swiglu(&s, 8, 64, 128, 2);
	vec(&s, 1, 2, 264);
	s.b_layout = CG_B_KN;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	gh_spec_grouped_swiglu(&s, 8, 64, 128, 2);
	vec(&s, 1, 2, 264);
	s.split_k = 2;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
}
END_TEST

START_TEST(test_vec_ptx_assembles_on_target)
{
	GemmSpec s[6];
	CgModule *m;
	const char *ptx;

	ahead = 0;
	gh_spec_grouped_swiglu(&s[0], 128, 1536, 2048, 8);	/* Qwen3-30B-A3B's gate|up at T = 1 */
	vec(&s[0], 1, 2, 264);
	gh_spec_grouped_scale_scatter(&s[1], 128, 2048, 768);	/* its down projection */
	s[1].c_dt = DT_F32;
	vec(&s[1], 1, 4, 264);
	gh_spec_grouped_swiglu(&s[2], 8, 28672, 4096, 2);	/* 4 rows, the loop of groups */
	vec(&s[2], 4, 2, 264);
	for (int i = 0; i < 3; i++) {		/* and each loading a group ahead */
		s[3 + i] = s[i];
		s[3 + i].vec_ahead = 1;
	}
	m = gh_emit_specs(gh_targets[_i], GH_MMA, s, 6, "k");
	ptx = gh_ptx(m);
	ck_assert_ptr_nonnull(strstr(ptx, "ld.global.nc"));
	ck_assert_ptr_nonnull(strstr(ptx, "fma.rn.f32"));
	ck_assert_ptr_nonnull(strstr(ptx, "shfl.sync.up"));
	ck_assert_ptr_null(strstr(ptx, "mma.sync"));
	ck_assert_ptr_null(strstr(ptx, "atom"));
	gh_assemble(m, 6, "check_gemm_vec", GH_NO_SPILLS);
	cg_module_free(m);
}
END_TEST

/* ---- on the emulator ---- */

START_TEST(test_vec_grouped_swiglu_gather)
{
	ahead = _i;
	GemmCase c = VEC_CASE;
	int counts[8] = {0, 1, 1, 0, 0, 1, 1, 0};	/* T = 2, top-2: one row an expert */

	gh_spec_grouped_swiglu(&c.s, 8, 96, 520, 2);	/* 2 rounds + 1 vector */
	vec(&c.s, 1, 2, 3);
	c.T = 2;
	memcpy(c.counts, counts, sizeof counts);
	gh_check(&c, 1e-2);
	c.s.c_dt = DT_F32;
	gh_check(&c, 1e-5);
	vec(&c.s, 2, 4, 1);				/* one CTA: every warp many items */
	gh_check(&c, 1e-5);
	counts[1] = 5, counts[5] = 3, counts[2] = 0, counts[6] = 0;	/* more rows than a tile: row tiles */
	c.T = 4;
	memcpy(c.counts, counts, sizeof counts);
	vec(&c.s, 2, 2, 4);
	gh_check(&c, 1e-5);
	c.s.K = 72;					/* no full round: 9 live lanes */
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_vec_grouped_route_weight_scatter)
{
	ahead = _i;
	GemmCase c = VEC_CASE;
	int counts[16] = {0};

	gh_spec_grouped_scale_scatter(&c.s, 16, 64, 4104);
	c.s.c_dt = DT_F32;
	for (int e = 0; e < 16; e += 3)
		counts[e] = e % 2 + 1;			/* 1, 2, 1, 2, 1, 2 rows: 9 */
	memcpy(c.counts, counts, sizeof counts);
	c.T = 9;
	vec(&c.s, 1, 4, 2);				/* 16 rounds + 1 vector: loops of 4 */
	gh_check(&c, 1e-5);
	vec(&c.s, 4, 8, 5);
	gh_check(&c, 1e-5);
	c.fill = GH_EXACT;				/* exact f32 sums: every element the exact value */
	c.s.K = 520;
	vec(&c.s, 3, 2, 7);
	gh_check(&c, 1e-6);				/* (the routing weight's product rounds in f32) */
}
END_TEST

START_TEST(test_vec_dense_f16_ragged)
{
	ahead = _i;
	GemmCase c = VEC_CASE;

	gh_spec_dense_bias_gelu(&c.s, 48, 256);
	c.s.a_dt = c.s.b_dt = DT_F16;
	c.s.c_dt = DT_F32;
	for (int T = 0; T <= 5; T++) {			/* M = 0..5 in tiles of 2 */
		c.T = T;
		vec(&c.s, 2, 6, 3);
		gh_check(&c, 1e-5);
	}
	c.s.c_dt = DT_F16;
	c.T = 3;
	vec(&c.s, 4, 8, 1);
	gh_check(&c, 2e-3);
}
END_TEST

Suite *
gemm_vec_suite(void)
{
	Suite *s = suite_create("gemm_vec");
	TCase *t = tcase_create("vec");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_vec_rejects_bad_specs);
	tcase_add_loop_test(t, test_vec_ptx_assembles_on_target, 0, (int)NELEM(gh_targets));
	tcase_add_loop_test(t, test_vec_grouped_swiglu_gather, 0, 2);
	tcase_add_loop_test(t, test_vec_grouped_route_weight_scatter, 0, 2);
	tcase_add_loop_test(t, test_vec_dense_f16_ragged, 0, 2);
	suite_add_tcase(s, t);
	return s;
}
