/*
 * check_gemm_simt.c — the CUDA-core GEMM (cg_emit_gemm_simt): its checks,
 * its tile choice, its parameters (the same as cg_emit_gemm's), PTX for
 * sm_80 / sm_90 / sm_90a assembled by ptxas with registers and spills
 * asserted, and kernels of both variants (register tiles, split-K) on the
 * CPU emulator against a host reference in double on random non-zero
 * inputs, outputs poisoned with NaN first: f32 exactness, N = 8 routers,
 * ragged M, N and K tails, odd leading dimensions, grouped with empty
 * experts, gather, swiglu, routing weights through the scatter index, the
 * scattered store, bf16/f16/f32 mixes, B [K,N], residuals.
 */
#include <check.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"

/* A case for the CUDA-core builder on non-zero inputs. */
#define SIMT_CASE {.builder = GH_SIMT, .fill = GH_NONZERO}

/* ---- specs ---- */

static void
all_dt(GemmSpec *s, DType dt)
{
	s->a_dt = s->b_dt = s->c_dt = dt;
}

static void
spec_f32(GemmSpec *s, int64_t N, int64_t K)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	all_dt(s, DT_F32);
}

static void
tiles(GemmSpec *s, int bm, int bn, int bk)
{
	s->bm = bm;
	s->bn = bn;
	s->bk = bk;
}

/* DeepSeek-V3's router: f32 [T,7168] x [7168,256], the tile chosen for prefill. */
static void
spec_ds_router(GemmSpec *s)
{
	spec_f32(s, 256, 7168);
	cg_gemm_simt_tiles(s, 4096);
}

/* A Mixtral-style router: [T,4096] x [4096,8], f32 out. */
static void
spec_router8(GemmSpec *s, DType a_dt, DType b_dt)
{
	spec_f32(s, 8, 4096);
	s->a_dt = a_dt;
	s->b_dt = b_dt;
	cg_gemm_simt_tiles(s, 4096);
}

static void
spec_grouped_swiglu(GemmSpec *s, int E, int64_t N, int64_t K, int topk, DType dt)
{
	gh_spec_grouped_swiglu(s, E, N, K, topk);
	all_dt(s, dt);
}

static void
spec_grouped_scale_scatter(GemmSpec *s, int E, int64_t N, int64_t K, DType dt)
{
	gh_spec_grouped_scale_scatter(s, E, N, K);
	all_dt(s, dt);
}

/* ---- checks, tiles, parameters ---- */

START_TEST(test_simt_rejects_bad_specs)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	spec_f32(&s, 100, 60);
	tiles(&s, 128, 64, 16);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);	/* N, K tails are fine */
	tiles(&s, 96, 64, 16);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "tile"));
	tiles(&s, 128, 64, 12);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	tiles(&s, 4, 7, 16);				/* split-K needs bn even */
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	spec_grouped_swiglu(&s, 4, 30, 64, 1, DT_F32);
	s.N = 31;					/* swiglu needs pairs */
	tiles(&s, 64, 64, 16);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "odd"));
	spec_f32(&s, 64, 64);
	tiles(&s, 64, 64, 16);
	s.a_dt = DT_I8;
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	spec_f32(&s, 64, 64);
	tiles(&s, 64, 64, 16);
	s.lda = 63;
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	spec_f32(&s, 64, 64);
	tiles(&s, 64, 64, 16);
	cg_ep_op(&s.ep, OP_MUL, cg_ep_acc(&s.ep), cg_ep_row(&s.ep, DT_F32, CGR_SCATTER, "w"));
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not scattered"));
	/* bf16 x f16 has no mma type, but is fine in f32 */
	spec_f32(&s, 64, 64);
	tiles(&s, 64, 64, 16);
	s.a_dt = DT_BF16;
	s.b_dt = DT_F16;
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
}
END_TEST

START_TEST(test_simt_tile_choice)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	spec_f32(&s, 8, 4096);				/* routers: split-K 4x8 */
	cg_gemm_simt_tiles(&s, 4096);
	ck_assert_int_eq(s.bm, 4);
	ck_assert_int_eq(s.bn, 8);
	spec_f32(&s, 7, 4096);				/* odd N: a pair of columns past it */
	cg_gemm_simt_tiles(&s, 16);
	ck_assert_int_eq(s.bn, 8);
	spec_f32(&s, 256, 7168);			/* DeepSeek's router: 64x64x32 (256 CTAs) */
	cg_gemm_simt_tiles(&s, 4096);
	ck_assert_int_eq(s.bm, 64);
	ck_assert_int_eq(s.bn, 64);
	ck_assert_int_eq(s.bk, 32);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);
	cg_gemm_simt_tiles(&s, 256);			/* T = 256: 16 tiles of 64x64, so 32x32 (64) */
	ck_assert_int_eq(s.bm, 32);
	ck_assert_int_eq(s.bn, 32);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);
	spec_f32(&s, 3072, 768);			/* wide: 128x64x16 */
	cg_gemm_simt_tiles(&s, 4096);
	ck_assert_int_eq(s.bm, 128);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);
	spec_f32(&s, 256, 7168);
	cg_gemm_simt_tiles(&s, 16);			/* decode: split-K */
	ck_assert_int_eq(s.bm * s.bn, 32);
	ck_assert_int_eq(cg_gemm_simt_check(&t, &s, &d), 0);
	for (int64_t n = 1; n <= 40; n++) {		/* every small N has a valid tile */
		spec_f32(&s, n, 100);
		cg_gemm_simt_tiles(&s, 100);
		ck_assert_msg(cg_gemm_simt_check(&t, &s, &d) == 0, "N = %lld: %s", (long long)n, d.last);
	}
}
END_TEST

/* Same spec, same parameter list as the tensor-core builder: program.c binds either. */
START_TEST(test_simt_params_match_tensor_core_builder)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	CgModule *m;
	GemmSpec s;
	const CgKernel *a, *b;
	char buf[64];

	diag_init(&d, NULL);
	m = cg_module_new(&t, "p", &d);
	spec_grouped_swiglu(&s, 8, 256, 128, 2, DT_BF16);
	s.store = CG_STORE_SCATTER;
	cg_ep_op(&s.ep, OP_MUL, 1, cg_ep_row(&s.ep, DT_F32, CGR_GATHER_RAW, "route_w"));
	ck_assert_int_eq(cg_emit_gemm(m, "tc", &s, &d), 0);
	tiles(&s, 64, 64, 16);
	ck_assert_msg(cg_emit_gemm_simt(m, "simt", &s, &d) == 0, "%s", d.last);
	a = cg_module_find(m, "tc");
	b = cg_module_find(m, "simt");
	ck_assert_int_eq(a->nparam, b->nparam);
	for (int i = 0; i < a->nparam; i++) {
		ck_assert_str_eq(a->param[i].role, b->param[i].role);
		ck_assert_int_eq(a->param[i].kind, b->param[i].kind);
	}
	ck_assert_int_eq(b->block[0], 256);
	cg_expr_print(buf, sizeof buf, b->grid[0]);
	ck_assert_str_eq(buf, "cdiv(2*T+504,64)");	/* M = 2T rows, + E*(bm-1) */
	cg_expr_print(buf, sizeof buf, b->grid[1]);
	ck_assert_str_eq(buf, "4");
	ck_assert_int_eq(b->smem, cg_gemm_simt_smem(&s));
	ck_assert_ptr_nonnull(strstr(b->note, "gemm-simt"));
	ck_assert_ptr_nonnull(strstr(b->note, "grouped E=8"));
	cg_module_free(m);
}
END_TEST

/* ---- PTX and ptxas ---- */

static int
suite_specs(GemmSpec *s)
{
	int n = 0;

	spec_ds_router(&s[n++]);			/* f32 64x64x32 */
	spec_ds_router(&s[n]);
	tiles(&s[n++], 128, 64, 16);
	spec_router8(&s[n++], DT_F32, DT_F32);		/* split-K 4x8 */
	spec_router8(&s[n++], DT_BF16, DT_BF16);
	spec_f32(&s[n], 1000, 7168);			/* bias+gelu, 128x128x8, tails */
	gh_bias_gelu(&s[n], DT_F32);
	tiles(&s[n++], 128, 128, 8);
	spec_grouped_swiglu(&s[n], 8, 1024, 512, 2, DT_F32);
	tiles(&s[n++], 64, 64, 16);
	spec_grouped_scale_scatter(&s[n], 8, 512, 1024, DT_F32);
	tiles(&s[n], 32, 32, 32);
	s[n++].sched = CG_SCHED_PERSISTENT;
	gh_spec_kn_residual(&s[n], 512, 256, DT_F16);	/* f16 x f32, B [K,N], residual */
	s[n].b_dt = DT_F32;
	tiles(&s[n++], 64, 128, 16);
	return n;
}

START_TEST(test_simt_ptx_assembles_on_target)
{
	GemmSpec s[8];
	int ns = suite_specs(s);
	CgModule *m = gh_emit_specs(gh_targets[_i], GH_SIMT, s, ns, "k");
	const char *ptx = gh_ptx(m);

	ck_assert_ptr_nonnull(strstr(ptx, ".entry"));
	ck_assert_ptr_nonnull(strstr(ptx, "fma.rn.f32"));
	ck_assert_ptr_null(strstr(ptx, "mma.sync"));
	ck_assert_ptr_null(strstr(ptx, "cvt.rna.tf32"));
	ck_assert_ptr_nonnull(strstr(ptx, ".v4.f32"));	/* vector loads of f32 */
	gh_assemble(m, ns, "check_gemm_simt", GH_NO_SPILLS);
	cg_module_free(m);
}
END_TEST

/* ---- on the emulator ---- */

/* f32 x f32 is f32 FMA arithmetic: operands that bf16 or tf32 would round give the exact result. */
START_TEST(test_simt_f32_exact)
{
	GemmCase c = {.builder = GH_SIMT, .fill = GH_EXACT};

	spec_f32(&c.s, 96, 80);
	tiles(&c.s, 64, 64, 16);
	c.T = 70;
	gh_check(&c, 1e-12);
	tiles(&c.s, 4, 8, 16);				/* split-K */
	c.T = 9;
	gh_check(&c, 1e-12);
}
END_TEST

START_TEST(test_simt_f32_dense_bias_gelu_ragged_m)
{
	static const int tl[][4] = {	/* bm, bn, bk, T */
		{64, 64, 16, 77},	/* T not a multiple of bm */
		{128, 128, 8, 130},	/* 8x8 per thread, one partial tile */
		{32, 32, 32, 33},	/* 2x2 per thread */
	};
	GemmCase c = SIMT_CASE;

	spec_f32(&c.s, 128, 96);
	gh_bias_gelu(&c.s, DT_F32);
	for (size_t i = 0; i < NELEM(tl); i++) {
		tiles(&c.s, tl[i][0], tl[i][1], tl[i][2]);
		c.T = tl[i][3];
		gh_check(&c, 1e-5);
	}
}
END_TEST

/* N, K not multiples of anything; odd lda and ldc: scalar loads and stores. */
START_TEST(test_simt_tails_and_odd_leading_dims)
{
	GemmCase c = SIMT_CASE;

	spec_f32(&c.s, 100, 75);
	gh_bias_gelu(&c.s, DT_BF16);
	tiles(&c.s, 64, 64, 16);
	c.T = 65;
	gh_check(&c, 1e-5);
	c.s.lda = 77;
	c.s.ldc = 101;
	c.s.ldb = 79;
	gh_check(&c, 1e-5);
	c.s.b_layout = CG_B_KN;			/* B [75, 100] with ldb 103 */
	c.s.ldb = 103;
	gh_check(&c, 1e-5);
	c.s.N = 6;					/* split-K, N tail inside the pair tile */
	c.s.ldb = 0;
	c.s.ldc = 0;
	c.s.ep.n = 0;
	tiles(&c.s, 5, 6, 16);
	c.T = 11;
	gh_check(&c, 1e-5);
}
END_TEST

/* The routers: [T,4096] x [4096,8], f32 and bf16 operands, T ragged and tiny. */
START_TEST(test_simt_router_n8)
{
	GemmCase c = SIMT_CASE;

	spec_router8(&c.s, DT_F32, DT_F32);
	ck_assert_int_eq(c.s.bm * c.s.bn, 32);
	c.T = 19;
	gh_check(&c, 1e-5);
	c.T = 1;
	gh_check(&c, 1e-5);
	spec_router8(&c.s, DT_BF16, DT_BF16);
	c.T = 16;
	gh_check(&c, 1e-5);
	spec_router8(&c.s, DT_BF16, DT_F32);		/* mixed */
	c.s.K = 1001;					/* odd K: scalar loads */
	c.T = 5;
	gh_check(&c, 1e-5);
	spec_router8(&c.s, DT_F32, DT_F32);		/* B [K,N] */
	c.s.b_layout = CG_B_KN;
	c.s.K = 512;
	c.T = 23;
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_simt_dense_zero_rows)
{
	GemmCase c = SIMT_CASE;

	spec_f32(&c.s, 64, 32);
	tiles(&c.s, 64, 64, 16);
	c.T = 0;
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_simt_grouped_swiglu_gather_empty_experts)
{
	GemmCase c = SIMT_CASE;
	int counts[8] = {0, 37, 1, 0, 0, 70, 12, 0};	/* sum 120 = 2 * 60 */

	spec_grouped_swiglu(&c.s, 8, 96, 72, 2, DT_F32);	/* N tail in the 64-wide tile, K tail */
	tiles(&c.s, 32, 64, 16);
	c.T = 60;
	memcpy(c.counts, counts, sizeof counts);
	gh_check(&c, 1e-5);
	tiles(&c.s, 4, 8, 16);				/* split-K */
	gh_check(&c, 1e-5);
	c.s.N = 12;
	tiles(&c.s, 2, 12, 16);
	gh_check(&c, 1e-5);
}
END_TEST

/* gpt-oss's clamped swiglu over a per-expert bias, bf16 in, f32 out. */
START_TEST(test_simt_grouped_gpt_oss_swiglu_bias)
{
	GemmCase c = SIMT_CASE;
	int counts[4] = {9, 0, 30, 1};

	gh_spec_expert_bias_swiglu(&c.s, 4, 128, 64);
	c.s.c_dt = DT_F32;
	tiles(&c.s, 32, 64, 16);
	c.T = 40;
	memcpy(c.counts, counts, sizeof counts);
	gh_check(&c, 1e-5);
}
END_TEST

START_TEST(test_simt_grouped_route_weight_scatter)
{
	GemmCase c = SIMT_CASE;
	int counts[8] = {3, 0, 40, 0, 1, 19, 0, 1};	/* 64 */

	spec_grouped_scale_scatter(&c.s, 8, 72, 136, DT_F32);
	tiles(&c.s, 32, 64, 16);
	c.T = 64;
	memcpy(c.counts, counts, sizeof counts);
	gh_check(&c, 1e-5);
	c.s.sched = CG_SCHED_PERSISTENT;		/* few CTAs striding over the tiles */
	c.s.ctas = 5;
	gh_check(&c, 1e-5);
	tiles(&c.s, 8, 4, 16);				/* split-K */
	gh_check(&c, 1e-5);
}
END_TEST

/* 40 experts (the table's scan crosses warps), some empty, and T = 0. */
START_TEST(test_simt_grouped_many_experts)
{
	GemmCase c = SIMT_CASE;

	spec_grouped_scale_scatter(&c.s, 40, 64, 32, DT_F32);
	tiles(&c.s, 32, 32, 8);
	c.T = 0;
	for (int e = 0; e < 40; e++) {
		c.counts[e] = (e % 3 == 0) ? 0 : (e % 7) * 3;
		c.T += c.counts[e];
	}
	gh_check(&c, 1e-5);
	memset(c.counts, 0, sizeof c.counts);
	c.T = 0;
	gh_check(&c, 1e-5);
}
END_TEST

/* bf16 and f16 operands, in mixes the tensor cores cannot take. */
START_TEST(test_simt_mixed_bf16_inputs)
{
	GemmCase c = SIMT_CASE;
	int a, r, s;

	spec_f32(&c.s, 160, 200);
	c.s.a_dt = DT_BF16;
	c.s.b_dt = DT_BF16;
	c.s.c_dt = DT_BF16;
	gh_bias_gelu(&c.s, DT_BF16);
	tiles(&c.s, 64, 128, 16);
	c.T = 50;
	gh_check(&c, 1e-2);				/* bf16 output */
	c.s.c_dt = DT_F32;
	gh_check(&c, 1e-5);				/* exact f32 sums of bf16 products */
	c.s.b_dt = DT_F16;				/* bf16 x f16 */
	gh_check(&c, 1e-5);
	c.s.a_dt = DT_F32;				/* f32 x bf16, B [K,N], residual */
	c.s.b_dt = DT_BF16;
	c.s.b_layout = CG_B_KN;
	c.s.ep.n = 0;
	a = cg_ep_acc(&c.s.ep);
	r = cg_ep_mat(&c.s.ep, DT_F16, 0, CGR_DIRECT, "residual");
	s = cg_ep_op(&c.s.ep, OP_ADD, a, r);
	cg_ep_clamp(&c.s.ep, cg_ep_op(&c.s.ep, OP_SILU, s, -1), -0.5f, 2.0f);
	tiles(&c.s, 64, 64, 32);
	gh_check(&c, 1e-5);
}
END_TEST

Suite *
gemm_simt_suite(void)
{
	Suite *s = suite_create("gemm_simt");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_simt_rejects_bad_specs);
	tcase_add_test(t, test_simt_tile_choice);
	tcase_add_test(t, test_simt_params_match_tensor_core_builder);
	tcase_add_loop_test(t, test_simt_ptx_assembles_on_target, 0, (int)NELEM(gh_targets));
	tcase_add_test(t, test_simt_f32_exact);
	tcase_add_test(t, test_simt_f32_dense_bias_gelu_ragged_m);
	tcase_add_test(t, test_simt_tails_and_odd_leading_dims);
	tcase_add_test(t, test_simt_router_n8);
	tcase_add_test(t, test_simt_dense_zero_rows);
	tcase_add_test(t, test_simt_grouped_swiglu_gather_empty_experts);
	tcase_add_test(t, test_simt_grouped_gpt_oss_swiglu_bias);
	tcase_add_test(t, test_simt_grouped_route_weight_scatter);
	tcase_add_test(t, test_simt_grouped_many_experts);
	tcase_add_test(t, test_simt_mixed_bf16_inputs);
	suite_add_tcase(s, t);
	return s;
}
