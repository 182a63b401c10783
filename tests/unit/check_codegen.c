/*
 * check_codegen.c — targets, size expressions, epilogue programs, the GEMM
 * builder's checks and parameter lists, PTX for sm_80 / sm_90 / sm_90a
 * assembled by ptxas (skipped with a message when there is no ptxas), and
 * the GEMM kernels run on the CPU emulator against a host reference in
 * double on random inputs (outputs poisoned with NaN first).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"
#include "program.h"

/* ---- tests: targets and expressions ---- */

START_TEST(test_target_caps)
{
	CgTarget a = {"sm_80", NULL, 3}, h = {"sm_90", NULL, 3}, ha = {"sm_90a", NULL, 3};
	CgTarget bad = {"sm_12", NULL, 3};
	Diag d;

	diag_init(&d, NULL);
	ck_assert(cg_target_has(&a, CG_MMA_BF16 | CG_CP_ASYNC | CG_LDMATRIX));
	ck_assert(!cg_target_has(&a, CG_WGMMA));
	ck_assert(!cg_target_has(&a, CG_TMA));
	ck_assert(cg_target_has(&h, CG_TMA));
	ck_assert(!cg_target_has(&h, CG_WGMMA));
	ck_assert(!cg_target_has(&h, CG_SETMAXNREG));
	ck_assert(cg_target_has(&ha, CG_WGMMA | CG_SETMAXNREG | CG_TMA | CG_MMA_BF16));
	ck_assert_int_eq(cg_require(&a, CG_WGMMA, "a test", &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "wgmma"));
	ck_assert_ptr_nonnull(strstr(d.last, "sm_90a"));
	ck_assert_int_eq(cg_target_check(&bad, &d), -1);
	ck_assert_ptr_null(cg_module_new(&bad, "x", &d));
}
END_TEST

START_TEST(test_expr_print_matches_bundle_grammar)
{
	char b[64];

	cg_expr_print(b, sizeof b, CG_EXPR_INT(132));
	ck_assert_str_eq(b, "132");
	cg_expr_print(b, sizeof b, (CgExpr){1, 0, 0});
	ck_assert_str_eq(b, "T");
	cg_expr_print(b, sizeof b, (CgExpr){2, 0, 0});
	ck_assert_str_eq(b, "2*T");
	cg_expr_print(b, sizeof b, (CgExpr){2, 889, 128});
	ck_assert_str_eq(b, "cdiv(2*T+889,128)");
	cg_expr_print(b, sizeof b, (CgExpr){1, 0, 128});
	ck_assert_str_eq(b, "cdiv(T,128)");
	ck_assert_int_eq(cg_expr_eval((CgExpr){2, 889, 128}, 4096), (2 * 4096 + 889 + 127) / 128);
	/* one type and one evaluator with the bundle's: an overflow is -1, not wrapped */
	MExpr m = (CgExpr){INT64_MAX / 2, 7, 0};
	ck_assert_int_eq(cg_expr_eval(m, 3), -1);
	ck_assert_int_eq(cg_expr_eval(m, 1), INT64_MAX / 2 + 7);
}
END_TEST

/* ---- epilogue programs ---- */

START_TEST(test_epilogue_check_rejects_bad_programs)
{
	CgEpilogue e;
	Diag d;
	int a;

	diag_init(&d, NULL);
	memset(&e, 0, sizeof e);
	a = cg_ep_acc(&e);
	cg_ep_op(&e, OP_ADD, a, 5);
	ck_assert_int_eq(cg_ep_check(&e, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not an earlier"));

	memset(&e, 0, sizeof e);
	a = cg_ep_acc(&e);
	cg_ep_swiglu(&e, a, NULL);
	cg_ep_op(&e, OP_ADD, a, 1);	/* uses acc from the input column space */
	ck_assert_int_eq(cg_ep_check(&e, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "column space"));

	memset(&e, 0, sizeof e);
	a = cg_ep_acc(&e);
	cg_ep_op(&e, OP_ADD, a, cg_ep_col(&e, DT_I32, 0, "bias"));
	ck_assert_int_eq(cg_ep_check(&e, &d), -1);

	memset(&e, 0, sizeof e);
	cg_ep_clamp(&e, cg_ep_acc(&e), 3, -3);
	ck_assert_int_eq(cg_ep_check(&e, &d), -1);
}
END_TEST

START_TEST(test_epilogue_print)
{
	GemmSpec s;
	char b[256];

	gh_spec_dense_bias_gelu(&s, 128, 64);
	cg_ep_print(b, sizeof b, &s.ep);
	ck_assert_str_eq(b, "e0=acc e1=bias[n]:bf16 e2=add(e0,e1) e3=gelu_erf(e2)");
}
END_TEST

START_TEST(test_epilogue_reference_values)
{
	CgEpilogue e;
	CgEpInst in;

	/* the epilogue's operations are IR ops: the interpreter's semantics */
	memset(&e, 0, sizeof e);
	cg_ep_op(&e, OP_GELU, cg_ep_acc(&e), -1);
	cg_ep_gelu(&e, 0, 1);
	ck_assert(fabs(ir_ew_scalar(e.in[1].iop, &e.in[1].ew, 1.0, 0) - 0.8413447460685429) < 1e-12);
	ck_assert(fabs(ir_ew_scalar(e.in[2].iop, &e.in[2].ew, 1.0, 0) - 0.8411919906082768) < 1e-12);
	memset(&e, 0, sizeof e);
	cg_ep_swiglu(&e, cg_ep_acc(&e), NULL);
	in = e.in[1];
	ck_assert(fabs(gh_swiglu(&in, 2.0, 3.0) - 2.0 / (1 + exp(-2.0)) * 3.0) < 1e-12);
	in.glu = gh_oai;
	/* gate clipped to 7, up clipped to 7: (7 + 1) * 7 * sigmoid(1.702 * 7) */
	ck_assert(fabs(gh_swiglu(&in, 9.0, 9.0) - 8 * 7 / (1 + exp(-1.702 * 7))) < 1e-5);
	/* Step-3.5's clamp, after silu: min(silu(9), 2) * clamp(-9, -2, 2) = 2 * -2 */
	in.glu.act = IR_GLU_SILU;
	in.glu.limit = 2;
	ck_assert(fabs(gh_swiglu(&in, 9.0, -9.0) + 4) < 1e-12);
	ck_assert(fabs(gh_swiglu(&in, 1.0, 1.5) - 1.5 / (1 + exp(-1.0))) < 1e-12);	/* inside */
}
END_TEST

/* ---- the GEMM builder's checks and kernel descriptions ---- */

START_TEST(test_gemm_params_and_geometry)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	CgModule *m;
	GemmSpec s;
	const CgKernel *k;
	char b[64];

	diag_init(&d, NULL);
	m = cg_module_new(&t, "p", &d);
	gh_spec_grouped_swiglu(&s, 8, 256, 128, 2);
	s.store = CG_STORE_SCATTER;
	cg_ep_op(&s.ep, OP_MUL, 1, cg_ep_row(&s.ep, DT_F32, CGR_GATHER_RAW, "route_w"));
	ck_assert_int_eq(cg_emit_gemm(m, "moe_up", &s, &d), 0);
	k = cg_module_find(m, "moe_up");
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(k->nparam, 8);
	ck_assert_str_eq(k->param[0].role, "A");
	ck_assert_str_eq(k->param[1].role, "gather_idx");
	ck_assert_str_eq(k->param[2].role, "B");
	ck_assert_str_eq(k->param[3].role, "C");
	ck_assert_str_eq(k->param[4].role, "scatter_idx");
	ck_assert_str_eq(k->param[5].role, "offsets");
	ck_assert_str_eq(k->param[6].role, "route_w");
	ck_assert_str_eq(k->param[7].role, "T");
	ck_assert_int_eq(k->param[7].kind, CGP_I32);
	ck_assert_str_eq(cg_param_kind_name(k->param[0].kind), "ptr");
	ck_assert_int_eq(k->block[0], 256);
	cg_expr_print(b, sizeof b, k->grid[0]);
	ck_assert_str_eq(b, "cdiv(2*T+1016,128)");	/* M = 2T rows, + E*(bm-1) */
	cg_expr_print(b, sizeof b, k->grid[1]);
	ck_assert_str_eq(b, "2");
	ck_assert_int_eq(k->smem, cg_gemm_smem(&s));
	ck_assert_ptr_nonnull(strstr(k->note, "grouped E=8"));
	cg_module_free(m);
}
END_TEST

START_TEST(test_gemm_rejects_bad_specs)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&s, 100, 64);		/* N % bn */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "pad the weight"));
	gh_spec_dense_bias_gelu(&s, 128, 64);
	s.a_dt = DT_F16;				/* f16 x bf16 */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	gh_spec_dense_bias_gelu(&s, 256, 64);
	gh_tiles(&s, 128, 256, 64, 2, 4, 5);		/* 5 stages x 55 KB */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "shared memory"));
	gh_spec_dense_bias_gelu(&s, 128, 64);
	cg_ep_op(&s.ep, OP_MUL, 3, cg_ep_row(&s.ep, DT_F32, CGR_SCATTER, "w"));
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "not scattered"));
	gh_spec_dense_bias_gelu(&s, 128, 64);
	s.lda = 60;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
}
END_TEST

/* Asking for a Hopper-only feature on sm_80: a diagnostic, no abort. */
START_TEST(test_hopper_feature_on_sm80_is_a_diagnostic)
{
	CgTarget t80 = {"sm_80", NULL, 3}, t90 = {"sm_90", NULL, 3}, t90a = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;
	CgModule *m;
	size_t n;
	const char *ptx;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&s, 128, 64);
	s.mainloop = CG_MAINLOOP_WGMMA;
	ck_assert_int_eq(cg_gemm_check(&t80, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "wgmma"));

	m = cg_module_new(&t80, "h", &d);
	ck_assert_int_eq(cg_emit_probe(m, "regs", CG_SETMAXNREG, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "setmaxnreg"));
	ck_assert_int_eq(cg_emit_probe(m, "fence", CG_WGMMA, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "sm_90a"));
	ck_assert_int_eq(cg_module_nkernel(m), 0);
	/* the module is still usable: the failed kernels are gone */
	ck_assert_int_eq(cg_emit_gemm(m, "ok", &s, &d), -1);	/* wgmma: refused */
	s.mainloop = CG_MAINLOOP_MMA;
	ck_assert_int_eq(cg_emit_gemm(m, "ok", &s, &d), 0);
	ck_assert_int_eq(cg_emit_probe(m, "cpa", CG_CP_ASYNC, &d), 0);
	ptx = cg_module_ptx(m, &n, &d);
	ck_assert_ptr_nonnull(ptx);
	ck_assert_ptr_null(strstr(ptx, "regs"));
	cg_module_free(m);

	m = cg_module_new(&t90, "h", &d);	/* plain sm_90 lacks it too */
	ck_assert_int_eq(cg_emit_probe(m, "regs", CG_SETMAXNREG, &d), -1);
	cg_module_free(m);

	/* on sm_90a the same kernels are fine */
	m = cg_module_new(&t90a, "h", &d);
	ck_assert_int_eq(cg_emit_probe(m, "regs", CG_SETMAXNREG, &d), 0);
	ck_assert_int_eq(cg_emit_probe(m, "fence", CG_WGMMA, &d), 0);
	ptx = cg_module_ptx(m, &n, &d);
	ck_assert_ptr_nonnull(ptx);
	ck_assert_ptr_nonnull(strstr(ptx, "setmaxnreg.inc.sync.aligned.u32"));
	ck_assert_ptr_nonnull(strstr(ptx, "wgmma.fence.sync.aligned"));
	cg_module_free(m);
}
END_TEST

/* ---- PTX and ptxas on the three targets ---- */

/* The specs every target must emit and assemble. */
static int
suite_specs(GemmSpec *s)
{
	int n = 0;

	gh_spec_dense_bias_gelu(&s[n++], 1024, 512);	/* 128x128x32 2x4 s4 */
	gh_spec_dense_bias_gelu(&s[n], 1024, 512);	/* the prefill tile */
	gh_tiles(&s[n], 128, 256, 32, 2, 4, 4);
	s[n++].min_ctas = 1;
	gh_spec_grouped_swiglu(&s[n], 8, 1024, 512, 2);	/* decode tile, persistent */
	gh_tiles(&s[n], 16, 128, 64, 1, 4, 4);
	s[n++].sched = CG_SCHED_PERSISTENT;
	gh_spec_grouped_scale_scatter(&s[n++], 8, 512, 1024);
	gh_spec_kn_residual(&s[n], 512, 256, DT_F16);	/* f16, B [K,N], residual */
	gh_tiles(&s[n++], 64, 128, 64, 2, 2, 3);
	return n;
}

START_TEST(test_ptx_assembles_on_target)
{
	GemmSpec s[8];
	int ns = suite_specs(s);
	CgModule *m = gh_emit_specs(gh_targets[_i], GH_MMA, s, ns, "k");
	const char *ptx = gh_ptx(m);

	ck_assert_int_eq(gh_count(ptx, ".entry"), ns);
	ck_assert(gh_count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") > 0);
	ck_assert(gh_count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") > 0);
	ck_assert(gh_count(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16") > 0);
	ck_assert(gh_count(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") > 0);
	ck_assert(gh_count(ptx, "cp.async.cg.shared.global") > 0);
	ck_assert(gh_count(ptx, "cp.async.wait_group") > 0);
	ck_assert(gh_count(ptx, ".maxntid") == ns);
	gh_assemble(m, ns, "check_codegen", GH_CUBIN);
	cg_module_free(m);
}
END_TEST

START_TEST(test_ptxas_reports_errors)
{
	Diag d;
	CgPtxasResult r;
	const char *bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry x() { bogus; }\n";

	if (!cg_ptxas_path())
		return;
	diag_init(&d, NULL);
	ck_assert_int_eq(cg_ptxas(bad, strlen(bad), "sm_90", 0, &r, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "ptxas"));
	cg_ptxas_free(&r);
}
END_TEST

/*
 * Five ptxas runs at once (two at a time with MOEC_PTXAS_JOBS=2, and one per
 * core): results in job order, each the same as a run alone; the bad one
 * and only it fails, its diagnostic between the good ones' (none).
 */
START_TEST(test_ptxas_many_in_order)
{
	static const char *const ptx[2] = {
		".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry a%d() { ret; }\n",
		".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry b%d() { bogus; }\n",
	};
	char text[5][200];
	CgPtxasJob job[5];
	CgPtxasResult r[5];
	Diag d;

	if (!cg_ptxas_path())
		return;
	for (int jobs = 1; jobs <= 2; jobs++) {
		setenv("MOEC_PTXAS_JOBS", jobs == 1 ? "2" : "0", 1);
		for (int i = 0; i < 5; i++) {
			snprintf(text[i], sizeof text[i], ptx[i == 3], i);
			job[i] = (CgPtxasJob){text[i], strlen(text[i]), i % 2 ? "sm_90" : "sm_80", i == 0};
		}
		diag_init(&d, NULL);
		ck_assert_int_eq(cg_ptxas_many(job, 5, r, &d), -1);
		ck_assert_int_eq(d.nerror, 1);
		ck_assert_ptr_nonnull(strstr(d.last, "ptxas -arch=sm_90 failed"));
		for (int i = 0; i < 5; i++) {
			char name[16];
			snprintf(name, sizeof name, "a%d", i);
			if (i == 3) {
				ck_assert_int_eq(r[i].n, 0);
			} else {
				ck_assert_int_eq(r[i].n, 1);
				ck_assert_str_eq(r[i].k[0].name, name);
			}
			ck_assert(i == 0 ? r[i].cubin && r[i].cubin_len > 0 : !r[i].cubin);
			cg_ptxas_free(&r[i]);
		}
	}
	unsetenv("MOEC_PTXAS_JOBS");
}
END_TEST

/* ---- the GEMM on the CPU emulator ---- */

/*
 * Dense bias + GELU, and grouped top-2 SwiGLU over 8 experts with skewed
 * and empty experts, at tiles of several shapes; relative L2 below 1e-2.
 */
static const struct {
	const char *what;
	int grouped;		/* 0: gh_spec_dense_bias_gelu; 1: gh_spec_grouped_swiglu */
	int N, K, tile[6], T;
	int ctas;		/* > 0: persistent, this many CTAs */
	int counts[8];		/* grouped: sum = 2T */
} emu_cases[] = {
	{"dense, ragged M", 0, 256, 96, {64, 128, 32, 2, 2, 3}, 77, 0, {0}},	/* T not a multiple of bm */
	{"dense, the prefill tile", 0, 256, 64, {128, 256, 32, 2, 4, 4}, 130, 0, {0}},
	{"grouped, skewed and empty experts", 1, 128, 64, {32, 64, 32, 2, 2, 3}, 60, 0,
	 {0, 37, 1, 0, 0, 70, 12, 0}},
	{"grouped, the decode tile, persistent", 1, 256, 128, {16, 128, 64, 1, 4, 4}, 16, 7,
	 {5, 0, 3, 2, 11, 0, 7, 4}},
	{"grouped, bk 128", 1, 128, 256, {16, 64, 128, 1, 4, 3}, 12, 0, {0, 9, 0, 0, 14, 0, 0, 1}},
};

START_TEST(test_emu_dense_and_grouped_tiles)
{
	GemmCase c = {.what = emu_cases[_i].what};
	const int *tl = emu_cases[_i].tile;

	if (emu_cases[_i].grouped)
		gh_spec_grouped_swiglu(&c.s, 8, emu_cases[_i].N, emu_cases[_i].K, 2);
	else
		gh_spec_dense_bias_gelu(&c.s, emu_cases[_i].N, emu_cases[_i].K);
	gh_tiles(&c.s, tl[0], tl[1], tl[2], tl[3], tl[4], tl[5]);
	if (emu_cases[_i].ctas) {
		c.s.sched = CG_SCHED_PERSISTENT;
		c.s.ctas = emu_cases[_i].ctas;
	}
	c.T = emu_cases[_i].T;
	memcpy(c.counts, emu_cases[_i].counts, sizeof emu_cases[_i].counts);
	gh_check(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_dense_plain_mainloop)
{
	GemmCase c = {0};

	gh_spec_dense_bias_gelu(&c.s, 128, 160);
	gh_tiles(&c.s, 64, 64, 32, 2, 2, 3);
	c.s.no_frag_pipe = 1;
	c.T = 70;
	gh_check(&c, 1e-2);
	gh_tiles(&c.s, 64, 64, 32, 2, 2, 2);
	gh_check(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_kn_layout_tanh_f32_out)
{
	GemmCase c = {0};
	int a, b;

	cg_gemm_default(&c.s);
	c.s.N = 128;
	c.s.K = 128;
	c.s.b_layout = CG_B_KN;
	c.s.c_dt = DT_F32;
	a = cg_ep_acc(&c.s.ep);
	b = cg_ep_col(&c.s.ep, DT_F32, 0, "bias");
	cg_ep_gelu(&c.s.ep, cg_ep_op(&c.s.ep, OP_ADD, a, b), 1);
	gh_tiles(&c.s, 64, 64, 64, 2, 2, 2);
	c.T = 70;
	gh_check(&c, 1e-4);
}
END_TEST

START_TEST(test_emu_f16_residual_bk16_5_stages)
{
	GemmCase c = {0};
	int a, r, s;

	cg_gemm_default(&c.s);
	c.s.N = 64;
	c.s.K = 160;
	c.s.a_dt = c.s.b_dt = c.s.c_dt = DT_F16;
	a = cg_ep_acc(&c.s.ep);
	r = cg_ep_mat(&c.s.ep, DT_F16, 0, CGR_DIRECT, "residual");
	s = cg_ep_op(&c.s.ep, OP_ADD, a, r);
	cg_ep_clamp(&c.s.ep, cg_ep_op(&c.s.ep, OP_SILU, s, -1), -0.5f, 2.0f);
	gh_tiles(&c.s, 32, 64, 16, 1, 2, 5);
	c.T = 40;
	gh_check(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_f32_inputs_convert_in_the_load)
{
	GemmCase c = {0};

	cg_gemm_default(&c.s);
	c.s.N = 64;
	c.s.K = 64;
	c.s.a_dt = c.s.b_dt = c.s.c_dt = DT_F32;
	gh_tiles(&c.s, 32, 64, 32, 2, 2, 3);
	c.T = 33;
	gh_check(&c, 1e-2);	/* bf16 rounding of the inputs */
}
END_TEST

START_TEST(test_emu_grouped_gpt_oss_swiglu_bias)
{
	GemmCase c = {0};
	int counts[4] = {9, 0, 30, 1};

	gh_spec_expert_bias_swiglu(&c.s, 4, 128, 64);
	gh_tiles(&c.s, 16, 64, 32, 1, 2, 2);
	c.T = 40;
	memcpy(c.counts, counts, sizeof counts);
	gh_check(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_grouped_scale_scatter)
{
	GemmCase c = {0};
	int counts[8] = {3, 0, 40, 0, 1, 19, 0, 1};	/* 64 */

	gh_spec_grouped_scale_scatter(&c.s, 8, 64, 128);
	gh_tiles(&c.s, 32, 64, 32, 2, 2, 4);
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 5;
	c.T = 64;
	memcpy(c.counts, counts, sizeof counts);
	gh_check(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_grouped_many_experts_table)
{
	/* 40 experts: the shuffle scan crosses warps (32 per warp) */
	GemmCase c = {0};

	gh_spec_grouped_scale_scatter(&c.s, 40, 64, 32);
	gh_tiles(&c.s, 16, 64, 32, 1, 2, 2);
	c.T = 0;
	for (int e = 0; e < 40; e++) {
		c.counts[e] = (e % 3 == 0) ? 0 : (e % 7) * 3;
		c.T += c.counts[e];
	}
	gh_check(&c, 1e-2);
}
END_TEST

START_TEST(test_emu_grouped_all_rows_one_expert_and_zero_rows)
{
	GemmCase c = {0};

	gh_spec_grouped_swiglu(&c.s, 4, 64, 32, 1);
	gh_tiles(&c.s, 16, 64, 32, 1, 2, 2);
	c.T = 21;
	c.counts[3] = 21;
	gh_check(&c, 1e-2);
	c.T = 0;		/* no rows: nothing runs, nothing breaks */
	c.counts[3] = 0;
	gh_check(&c, 1e-2);
}
END_TEST

/* ---- split-K (GemmSpec.split_k) ---- */

static const struct {
	const char *what;
	int kind;		/* 0 dense bias+GELU, 1 grouped gather+SwiGLU, 2 grouped scale+scatter */
	int64_t N, K;
	int tile[6], S, T;
	int counts[8];
} split_cases[] = {
	{"dense M=13, split 2", 0, 128, 256, {16, 64, 64, 1, 4, 3}, 2, 13, {0}},
	{"dense M=16, the decode tile, split 4", 0, 256, 512, {16, 128, 128, 1, 4, 5}, 4, 16, {0}},
	{"dense M=40 over 2 row tiles, split 8", 0, 64, 512, {32, 64, 64, 2, 2, 2}, 8, 40, {0}},
	{"grouped gather + SwiGLU, empty experts, split 3", 1, 128, 192, {16, 64, 64, 1, 4, 4}, 3, 10,
	 {3, 0, 7, 0, 0, 9, 1, 0}},
	{"grouped scale + scatter, split 2", 2, 64, 256, {16, 64, 128, 1, 4, 3}, 2, 24,
	 {5, 0, 0, 11, 2, 0, 6, 0}},
};

static void
split_case(GemmCase *c, int i)
{
	const int *tl = split_cases[i].tile;

	memset(c, 0, sizeof *c);
	c->what = split_cases[i].what;
	if (split_cases[i].kind == 0)
		gh_spec_dense_bias_gelu(&c->s, split_cases[i].N, split_cases[i].K);
	else if (split_cases[i].kind == 1)
		gh_spec_grouped_swiglu(&c->s, 8, split_cases[i].N, split_cases[i].K, 2);
	else
		gh_spec_grouped_scale_scatter(&c->s, 8, split_cases[i].N, split_cases[i].K);
	gh_tiles(&c->s, tl[0], tl[1], tl[2], tl[3], tl[4], tl[5]);
	c->T = split_cases[i].T;
	memcpy(c->counts, split_cases[i].counts, sizeof split_cases[i].counts);	/* the rest stay 0 */
	gh_split(&c->s, split_cases[i].S, c->T);
}

/* Both runs; 1 when their outputs are the same bits. */
static int
same_bits(const GemmCase *a, const GemmCase *b)
{
	GemmRun r1, r2;
	int same;

	ck_assert_msg(gh_run(&r1, a) == 0, "%s: %s", a->what, r1.msg);
	ck_assert_msg(gh_run(&r2, b) == 0, "%s: %s", b->what, r2.msg);
	same = r1.cbytes == r2.cbytes && memcmp(r1.C, r2.C, r1.cbytes) == 0;
	gh_free(&r1);
	gh_free(&r2);
	return same;
}

/*
 * Against the double reference; with sums that are exact in f32 whatever
 * their order, the same bits as the kernel without split-K (no slice lost
 * or added twice, the epilogue once); and the same bits on a second run.
 */
START_TEST(test_emu_split_k)
{
	GemmCase c, whole;

	split_case(&c, _i);
	gh_check(&c, 1e-2);
	c.fill = GH_EXACT;
	whole = c;
	whole.s.split_k = whole.s.split_slots = 0;
	ck_assert_msg(same_bits(&c, &whole), "%s: differs from the unsplit kernel on exact sums", c.what);
	c.fill = GH_UNIFORM;
	ck_assert_msg(same_bits(&c, &c), "%s: two runs differ", c.what);
}
END_TEST

START_TEST(test_split_k_rules)
{
	CgTarget t90a = {"sm_90a", NULL, 3}, t80 = {"sm_80", NULL, 3};
	GemmSpec s;
	Diag d;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&s, 256, 512);
	gh_tiles(&s, 16, 128, 128, 1, 4, 4);
	gh_split(&s, 2, 16);
	ck_assert_int_eq(cg_gemm_check(&t80, &s, &d), 0);
	CgModule *m = cg_module_new(&t80, "split", &d);
	ck_assert_int_eq(cg_emit_gemm(m, "g", &s, &d), 0);
	const CgKernel *k = cg_module_find(m, "g");
	ck_assert_int_ge(k->nparam, 2);
	ck_assert_str_eq(k->param[k->nparam - 2].role, "splitk_ws");
	ck_assert_int_eq(cg_expr_eval(k->grid[2], 16), 2);
	ck_assert_int_eq(cg_gemm_split_flag_bytes(&s), 4 * s.split_slots);
	ck_assert_int_eq(cg_gemm_split_bytes(&s), ((4 * s.split_slots + 15) & ~15) +
			 (int64_t)s.split_slots * 16 * 128 * 4);
	s.split_k = 1;		/* no split, the parameter kept (another target splits) */
	ck_assert_int_eq(cg_emit_gemm(m, "g1", &s, &d), 0);
	k = cg_module_find(m, "g1");
	ck_assert_str_eq(k->param[k->nparam - 2].role, "splitk_ws");
	ck_assert_int_eq(cg_expr_eval(k->grid[2], 16), 1);
	ck_assert_int_eq(cg_gemm_split_bytes(&s), 0);
	s.split_k = 2;
	cg_module_free(m);
	s.split_k = 3;		/* 4 k-tiles */
	ck_assert_int_lt(cg_gemm_check(&t80, &s, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "k-tile count"));
	s.split_k = 2;
	s.sched = CG_SCHED_PERSISTENT, s.ctas = 4;
	ck_assert_int_lt(cg_gemm_check(&t80, &s, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "tiles schedule"));
	s.sched = CG_SCHED_TILES;
	s.split_slots = 0;
	ck_assert_int_lt(cg_gemm_check(&t80, &s, &d), 0);
	gh_split(&s, 2, 16);
	gh_tiles(&s, 128, 128, 64, 2, 2, 4);
	s.mainloop = CG_MAINLOOP_WGMMA;
	ck_assert_int_lt(cg_gemm_check(&t90a, &s, &d), 0);
	CgModule *m90a = cg_module_new(&t90a, "split", &d);
	ck_assert_ptr_nonnull(m90a);
	ck_assert_int_eq(cg_gemm_mainloop_for(m90a, &s), CG_MAINLOOP_MMA);
	cg_module_free(m90a);
	ck_assert_int_lt(cg_gemm_simt_check(&t80, &s, &d), 0);
}
END_TEST

/* ---- stream-K (GemmSpec.sched = CG_SCHED_STREAM) ---- */

static const struct {
	const char *what;
	int kind, E;		/* kind as split_cases'; E experts when grouped */
	int64_t N, K;
	int tile[6], ctas, T;
	int counts[64];
} stream_cases[] = {
	{"dense M=16, the decode tile, 3 CTAs (every tile cut)", 0, 0, 256, 512, {16, 128, 128, 1, 4, 5}, 3, 16, {0}},
	{"dense M=16, 7 CTAs: runs shorter than a tile", 0, 0, 256, 512, {16, 128, 128, 1, 4, 5}, 7, 16, {0}},
	{"dense M=40 over 2 row tiles, 5 CTAs, 2 stages", 0, 0, 64, 512, {32, 64, 64, 2, 2, 2}, 5, 40, {0}},
	{"dense, more CTAs than k-tiles (n = L)", 0, 0, 64, 256, {16, 64, 64, 1, 4, 3}, 40, 5, {0}},
	{"grouped gather + SwiGLU, empty experts", 1, 8, 128, 192, {16, 64, 64, 1, 4, 4}, 4, 10,
	 {3, 0, 7, 0, 0, 9, 1, 0}},
	{"grouped, one expert with every row", 1, 8, 128, 256, {16, 64, 64, 1, 4, 3}, 6, 24,
	 {0, 0, 0, 0, 48, 0, 0, 0}},
	{"grouped, 40 experts of one row each", 1, 40, 64, 256, {16, 64, 128, 1, 4, 3}, 9, 20,
	 {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	{"grouped scale + scatter, 5 CTAs", 2, 8, 64, 256, {16, 64, 128, 1, 4, 3}, 5, 24,
	 {5, 0, 0, 11, 2, 0, 6, 0}},
	{"grouped, T = 0", 1, 8, 128, 192, {16, 64, 64, 1, 4, 4}, 4, 0, {0}},
};

static void
stream_case(GemmCase *c, int i, int ctas)
{
	const int *tl = stream_cases[i].tile;
	int E = stream_cases[i].E;

	memset(c, 0, sizeof *c);
	c->what = stream_cases[i].what;
	if (stream_cases[i].kind == 0)
		gh_spec_dense_bias_gelu(&c->s, stream_cases[i].N, stream_cases[i].K);
	else if (stream_cases[i].kind == 1)
		gh_spec_grouped_swiglu(&c->s, E, stream_cases[i].N, stream_cases[i].K, 2);
	else
		gh_spec_grouped_scale_scatter(&c->s, E, stream_cases[i].N, stream_cases[i].K);
	gh_tiles(&c->s, tl[0], tl[1], tl[2], tl[3], tl[4], tl[5]);
	c->T = stream_cases[i].T;
	memcpy(c->counts, stream_cases[i].counts, sizeof stream_cases[i].counts);
	gh_split(&c->s, 0, MAX(c->T, 1));	/* a slot per tile */
	c->s.sched = CG_SCHED_STREAM;
	c->s.ctas = ctas;
}

/*
 * Against the double reference; on exact sums the same bits as the tiles
 * kernel and as stream-K over another CTA count (nothing lost or added
 * twice, the epilogue once per tile); the same bits on a second run (the
 * hand-over order is fixed); and with live rows (GemmSpec.live_rows at 16-row
 * tiles: program.c's qdec_rows), the same bits as without.
 */
START_TEST(test_emu_stream_k)
{
	GemmCase c, tiles, other;

	stream_case(&c, _i, stream_cases[_i].ctas);
	gh_check(&c, 1e-2);
	c.fill = GH_EXACT;
	tiles = c;
	tiles.s.sched = CG_SCHED_TILES;
	tiles.s.split_slots = 0;
	ck_assert_msg(same_bits(&c, &tiles), "%s: differs from the tiles kernel on exact sums", c.what);
	other = c;
	other.s.ctas = stream_cases[_i].ctas * 2 + 1;
	ck_assert_msg(same_bits(&c, &other), "%s: differs from %d CTAs on exact sums", c.what, other.s.ctas);
	c.fill = GH_UNIFORM;
	ck_assert_msg(same_bits(&c, &c), "%s: two runs differ", c.what);
	for (int k = 1; k <= 2; k++) {	/* the loop unrolled over the stages: the same sums */
		c.s.ctas = k * stream_cases[_i].ctas + k - 1;
		other = c;
		other.s.sk_unroll = 1;
		ck_assert_msg(same_bits(&c, &other), "%s, %d CTAs: the unrolled loop differs from stream()", c.what,
			      c.s.ctas);
		other.s.live_rows = 1;	/* --debug=qdec: A's rows past the tile's expert not read (16-row tiles) */
		ck_assert_msg(same_bits(&c, &other), "%s, %d CTAs: live rows change the unrolled loop's bits", c.what,
			      c.s.ctas);
		other.s.sk_unroll = 0;
		ck_assert_msg(same_bits(&c, &other), "%s, %d CTAs: live rows change stream()'s bits", c.what, c.s.ctas);
	}
	other = tiles;
	other.s.live_rows = 1;
	ck_assert_msg(same_bits(&tiles, &other), "%s: live rows change the tiles kernel's bits", c.what);
}
END_TEST

/*
 * Stream-K with a tail (GemmSpec.tail, --debug=sk-tail): the grid's last
 * `tail` CTAs take short runs, the others runs tail_w times as long (k_gemm.c's
 * stream_runs).  Against the double reference; on exact sums the same bits as
 * the tiles kernel (no pair lost or counted twice, one epilogue per tile) at
 * a tail of 1 run, one run a first-wave CTA and more runs than pairs (then
 * equal runs: weighed ones could be empty), weights 2, 6 and 64; the same
 * bits on a second run and from the loop unrolled over the stages.  The
 * emulator runs CTAs in launch order, so the short runs start last, each
 * waiting (at its run's end) for the run after it, as on the GPU.
 */
START_TEST(test_emu_stream_tail)
{
	static const int cfg[][2] = {{-1, 6}, {1, 3}, {-1, 2}, {-2, 64}, {500, 6}};	/* tail (-k: k x ctas), w */
	GemmCase c, tiles, other;

	stream_case(&c, _i, stream_cases[_i].ctas);
	tiles = c;
	tiles.s.sched = CG_SCHED_TILES;
	tiles.s.split_slots = 0;
	tiles.fill = GH_EXACT;
	for (size_t i = 0; i < NELEM(cfg); i++) {
		int ctas = stream_cases[_i].ctas;

		other = c;
		other.s.tail = cfg[i][0] < 0 ? -cfg[i][0] * ctas : cfg[i][0];
		other.s.tail_w = cfg[i][1];
		other.s.ctas = ctas + other.s.tail;
		gh_check(&other, 1e-2);
		other.fill = GH_EXACT;
		ck_assert_msg(same_bits(&other, &tiles), "%s: a tail of %d runs (w %d) differs from the tiles "
			      "kernel on exact sums", c.what, other.s.tail, cfg[i][1]);
		other.fill = GH_UNIFORM;
		ck_assert_msg(same_bits(&other, &other), "%s: tail %d: two runs differ", c.what, other.s.tail);
		tiles.s = other.s;
		tiles.s.sk_unroll = 1;
		tiles.fill = GH_UNIFORM;
		ck_assert_msg(same_bits(&other, &tiles), "%s: tail %d: the unrolled loop differs from stream()",
			      c.what, other.s.tail);
		tiles = c;
		tiles.s.sched = CG_SCHED_TILES;
		tiles.s.split_slots = 0;
		tiles.fill = GH_EXACT;
	}
}
END_TEST

/* The tail's refusals: static stream-K only, fewer short runs than CTAs, w 2..64. */
START_TEST(test_stream_tail_rules)
{
	CgTarget t80 = {"sm_80", NULL, 3};
	GemmCase c;
	Diag d;

	diag_init(&d, NULL);
	stream_case(&c, 0, 8);
	c.s.tail = 4, c.s.tail_w = 6;
	ck_assert_int_eq(cg_gemm_check(&t80, &c.s, &d), 0);
	c.s.tail = 8;
	ck_assert_int_lt(cg_gemm_check(&t80, &c.s, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "stream-K tail"));
	c.s.tail = 4, c.s.tail_w = 1;
	ck_assert_int_lt(cg_gemm_check(&t80, &c.s, &d), 0);
	c.s.tail_w = 65;
	ck_assert_int_lt(cg_gemm_check(&t80, &c.s, &d), 0);
	c.s.tail_w = 6, c.s.units = 8;
	ck_assert_int_lt(cg_gemm_check(&t80, &c.s, &d), 0);
	c.s.units = 0, c.s.sched = CG_SCHED_PERSISTENT;
	ck_assert_int_lt(cg_gemm_check(&t80, &c.s, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "stream-K tail"));
	/* its tuning-table spelling: .pN.tXwW, one way; a table's tail is kept, the flag's is 0 elsewhere */
	static const char *const bad[] = {"16x128x128.w1x4.s5.k1.t132w6", "16x128x128.w1x4.s5.k1.p264.t0w6",
					  "16x128x128.w1x4.s5.k1.p264.t132w1", "16x128x128.w1x4.s5.k1.p264.t132w65",
					  "16x128x128.w1x4.s5.k1.p264.t264w6", "16x128x128.w1x4.s5.k1.p264.t132",
					  "16x128x128.w1x4.s5.k1.p264.t132w6x", "16x128x128.w1x4.s5.k1.p264.u8.t132w6",
					  "16x128x128.w1x4.s5.k1.p264.t0132w6"};
	CgVariant v;
	ck_assert_int_eq(cg_variant_parse("16x128x128.w1x4.s5.k1.p264.t132w6", &v), 0);
	ck_assert(v.stream == 264 && v.tail == 132 && v.tail_w == 6);
	cg_variant_apply(&v, &c.s);
	ck_assert(c.s.sched == CG_SCHED_STREAM && c.s.ctas == 264 && c.s.tail == 132 && c.s.tail_w == 6);
	memset(&v, 0, sizeof v);
	cg_variant_of(&c.s, &v);
	ck_assert(v.tail == 132 && v.tail_w == 6);
	ck_assert_int_eq(cg_variant_parse("16x128x128.w1x4.s5.k1.p132", &v), 0);
	cg_variant_apply(&v, &c.s);
	ck_assert_int_eq(c.s.tail, 0);
	for (size_t i = 0; i < NELEM(bad); i++)
		ck_assert_msg(cg_variant_parse(bad[i], &v) == -1, "%s parsed", bad[i]);
}
END_TEST

/*
 * Dynamic stream-K (GemmSpec.units): units handed out by an atomic counter.
 * The emulator runs CTAs one after another (CTA 0 takes every unit), so the
 * arrival orders come from unit_rev (units handed out reversed in blocks):
 * the tile's last slice to arrive is then any slice.  Against the double
 * reference; on exact sums the same bits as the tiles kernel at 1, 8 and 64
 * units a CTA (P = 1 and P > 1 slices a tile); on random inputs the same bits
 * whatever the order (the slices are added in slice order by whichever
 * arrives last).
 */
START_TEST(test_emu_stream_dyn)
{
	static const int cfg[][2] = {{8, 0}, {1, 0}, {64, 1000}, {8, 3}, {64, 2}};
	GemmCase c, tiles, other;

	stream_case(&c, _i, stream_cases[_i].ctas);
	c.s.units = 8, c.s.unit_rev = 3;
	gh_check(&c, 1e-2);
	c.fill = GH_EXACT;
	tiles = c;
	tiles.s.sched = CG_SCHED_TILES;
	tiles.s.split_slots = tiles.s.units = tiles.s.unit_rev = 0;
	for (size_t i = 0; i < NELEM(cfg); i++) {
		other = c;
		other.s.units = cfg[i][0], other.s.unit_rev = cfg[i][1];
		ck_assert_msg(same_bits(&other, &tiles), "%s: %d units a CTA (rev %d) differ from the tiles "
			      "kernel on exact sums", c.what, cfg[i][0], cfg[i][1]);
	}
	c.fill = GH_UNIFORM;
	for (size_t i = 2; i < NELEM(cfg); i++) {
		other = c;
		other.s.units = cfg[i][0], other.s.unit_rev = cfg[i][1];
		c.s.units = cfg[i][0], c.s.unit_rev = 0;
		ck_assert_msg(same_bits(&c, &other), "%s: %d units a CTA: the order reversed in blocks of %d "
			      "changes the bits", c.what, cfg[i][0], cfg[i][1]);
	}
}
END_TEST

/* Its rules, workspace and PTX: the counters are atomics, no spills. */
START_TEST(test_stream_dyn_rules)
{
	CgTarget t80 = {"sm_80", NULL, 3};
	GemmSpec s[2];
	CgModule *m;
	Diag d;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&s[0], 14336, 4096);
	gh_tiles(&s[0], 16, 128, 128, 1, 4, 5);
	gh_split(&s[0], 0, 16);
	s[0].units = 8;
	ck_assert_int_lt(cg_gemm_check(&t80, &s[0], &d), 0);	/* not stream-K */
	ck_assert_ptr_nonnull(strstr(d.last, "dynamic stream-K"));
	s[0].sched = CG_SCHED_STREAM, s[0].ctas = 132;
	ck_assert_int_eq(cg_gemm_check(&t80, &s[0], &d), 0);
	ck_assert_int_eq(cg_gemm_split_flag_bytes(&s[0]), 4 * (s[0].split_slots + 1));
	ck_assert_int_eq(cg_gemm_split_bytes(&s[0]), ((4 * (s[0].split_slots + 1) + 15) & ~15) +
			 (int64_t)8 * 132 * 16 * 128 * 4);
	s[0].units = 65;
	ck_assert_int_lt(cg_gemm_check(&t80, &s[0], &d), 0);
	s[0].units = 8;
	gh_spec_dense_bias_gelu(&s[1], 256, 256);	/* 2 k-tiles for 5 stages */
	gh_tiles(&s[1], 16, 128, 128, 1, 4, 5);
	gh_split(&s[1], 0, 16);
	s[1].sched = CG_SCHED_STREAM, s[1].ctas = 132, s[1].units = 8;
	ck_assert_int_lt(cg_gemm_check(&t80, &s[1], &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "stages - 1"));
	gh_spec_grouped_swiglu(&s[1], 128, 1536, 2048, 8);
	gh_tiles(&s[1], 16, 128, 128, 1, 4, 5);
	gh_split(&s[1], 0, 64);
	s[1].sched = CG_SCHED_STREAM, s[1].ctas = 132, s[1].units = 8;
	for (size_t i = 0; i < NELEM(gh_targets); i++) {
		const char *ptx;
		m = gh_emit_specs(gh_targets[i], GH_MMA, s, 2, "dyn");
		ck_assert_ptr_nonnull(strstr(cg_module_find(m, "dyn0")->note, "units 8 a CTA"));
		ptx = gh_ptx(m);
		ck_assert_int_gt(gh_count(ptx, "atom.global.add.u32"), 0);
		ck_assert_int_gt(gh_count(ptx, "cp.async"), 0);
		gh_assemble(m, 2, "test_stream_dyn_rules", GH_NO_SPILLS);
		cg_module_free(m);
	}
	/* its tuning-table spelling: .pN.uU, one way */
	static const char *const bad[] = {"16x128x128.w1x4.s5.k1.u8", "16x128x128.w1x4.s5.k1.p132.u0",
					  "16x128x128.w1x4.s5.k1.p132.u65", "16x128x128.w1x4.s5.k1.p132.u08",
					  "16x128x128.w1x4.s5.k1.p132.u8x", "16x128x128.w1x4.s5.k1.p132.u",
					  "16x128x128.w1x4.s5.k1.p132.u8.u8"};
	CgVariant v;
	GemmSpec t = s[0];
	ck_assert_int_eq(cg_variant_parse("16x128x128.w1x4.s5.k1.p264.u16", &v), 0);
	ck_assert_int_eq(v.stream, 264);
	ck_assert_int_eq(v.units, 16);
	cg_variant_apply(&v, &t);
	ck_assert(t.sched == CG_SCHED_STREAM && t.ctas == 264 && t.units == 16);
	cg_variant_of(&t, &v);
	ck_assert_int_eq(v.units, 16);
	ck_assert_int_eq(cg_variant_parse("16x128x128.w1x4.s5.k1.p132", &v), 0);
	cg_variant_apply(&v, &t);
	ck_assert_int_eq(t.units, 0);
	for (size_t i = 0; i < NELEM(bad); i++)
		ck_assert_msg(cg_variant_parse(bad[i], &v) == -1, "%s parsed", bad[i]);
}
END_TEST

START_TEST(test_stream_k_rules)
{
	CgTarget t90a = {"sm_90a", NULL, 3}, t80 = {"sm_80", NULL, 3};
	GemmSpec s;
	Diag d;

	diag_init(&d, NULL);
	gh_spec_dense_bias_gelu(&s, 256, 512);
	gh_tiles(&s, 16, 128, 128, 1, 4, 5);
	gh_split(&s, 0, 16);
	s.sched = CG_SCHED_STREAM, s.ctas = 132;
	ck_assert_int_eq(cg_gemm_check(&t80, &s, &d), 0);
	CgModule *m = cg_module_new(&t90a, "stream", &d);
	ck_assert_int_eq(cg_gemm_mainloop_for(m, &s), CG_MAINLOOP_MMA);
	ck_assert_int_eq(cg_emit_gemm(m, "g", &s, &d), 0);
	const CgKernel *k = cg_module_find(m, "g");
	ck_assert_str_eq(k->param[k->nparam - 2].role, "splitk_ws");
	ck_assert_int_eq(cg_expr_eval(k->grid[0], 16), 132);
	ck_assert_int_eq(cg_expr_eval(k->grid[0], 1), 132);
	ck_assert_int_eq(cg_expr_eval(k->grid[2], 16), 1);
	ck_assert_int_eq(cg_gemm_split_flag_bytes(&s), 4 * s.split_slots);
	ck_assert_ptr_nonnull(strstr(k->note, "stream-k"));
	cg_module_free(m);
	s.split_slots = 0;	/* no workspace */
	ck_assert_int_lt(cg_gemm_check(&t80, &s, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "workspace"));
	gh_split(&s, 2, 16);	/* and split-K */
	ck_assert_int_lt(cg_gemm_check(&t80, &s, &d), 0);
	gh_split(&s, 0, 16);
	s.ctas = 0;
	ck_assert_int_lt(cg_gemm_check(&t80, &s, &d), 0);
	s.ctas = 132;
	gh_tiles(&s, 128, 128, 64, 2, 2, 4);
	gh_split(&s, 0, 16);
	s.mainloop = CG_MAINLOOP_WGMMA;
	ck_assert_int_lt(cg_gemm_check(&t90a, &s, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "stream-K"));
	s.mainloop = CG_MAINLOOP_MMA;
	ck_assert_int_lt(cg_gemm_simt_check(&t80, &s, &d), 0);
}
END_TEST

/* The stream-K kernel through ptxas: the hand-over without atomics, no spills. */
START_TEST(test_stream_k_ptx)
{
	GemmSpec s[2];
	CgModule *m;
	const char *ptx;

	gh_spec_dense_bias_gelu(&s[0], 14336, 4096);
	gh_tiles(&s[0], 16, 128, 128, 1, 4, 5);
	gh_split(&s[0], 0, 16);
	gh_spec_grouped_swiglu(&s[1], 128, 1536, 2048, 8);
	gh_tiles(&s[1], 16, 128, 128, 1, 4, 5);
	gh_split(&s[1], 0, 64);
	for (int i = 0; i < 2; i++)
		s[i].sched = CG_SCHED_STREAM, s[i].ctas = 132;
	for (size_t i = 0; i < NELEM(gh_targets); i++) {
		m = gh_emit_specs(gh_targets[i], GH_MMA, s, 2, "stream");
		ptx = gh_ptx(m);
		ck_assert_int_gt(gh_count(ptx, "ld.volatile.global.u32"), 0);
		ck_assert_int_gt(gh_count(ptx, "cp.async"), 0);
		ck_assert_int_eq(gh_count(ptx, "\tatom."), 0);
		gh_assemble(m, 2, "test_stream_k_ptx", GH_NO_SPILLS);
		cg_module_free(m);
	}
}
END_TEST

/*
 * cg_modules_assemble: each target's LLVM on a thread of its own and its
 * ptxas started as its PTX comes (in parts): the same PTX and the same
 * registers as the targets one after another on this thread.  The
 * mma.sync GEMMs build alike for sm_80 and sm_90a: sm_90a takes their PTX
 * from sm_80's LLVM (share.c), the same text its own LLVM writes.
 */
START_TEST(test_modules_assemble_in_threads)
{
	static const char *const sm[2] = {"sm_80", "sm_90a"};
	GemmSpec s[8];
	int ns = MIN(suite_specs(s), 3), nt = 2;	/* small: it runs twice */
	CgModule *par[2], *seq;
	CgPtxasResult r[2], one;
	CgAssembleTimes t = {0};
	Diag d;

	if (!cg_ptxas_path())
		return;
	for (int i = 0; i < nt; i++)
		par[i] = gh_emit_specs(sm[i], GH_MMA, s, ns, "k");
	diag_init(&d, NULL);
	ck_assert_msg(cg_modules_assemble(par, nt, 0, r, &t, &d) == 0, "%s", d.last);
	ck_assert(t.ptx > 0 && t.ptxas >= 0);
	ck_assert_int_eq(t.shared[0], 0);
	ck_assert_int_eq(t.shared[1], ns);
	for (int i = 0; i < nt; i++) {
		size_t a, b;
		seq = gh_emit_specs(sm[i], GH_MMA, s, ns, "k");
		ck_assert_int_eq(cg_module_assemble(seq, 0, &one, &d), 0);
		ck_assert(t.llvm[i] > 0);
		ck_assert_str_eq(cg_module_ptx(par[i], &a, &d), cg_module_ptx(seq, &b, &d));
		ck_assert_int_eq(r[i].n, ns);
		ck_assert_int_eq(one.n, ns);
		for (int k = 0; k < ns; k++) {
			const CgKernel *x = cg_module_kernel(par[i], k), *y = cg_module_kernel(seq, k);
			ck_assert_int_gt(x->regs, 0);
			ck_assert_int_eq(x->regs, y->regs);
			ck_assert_int_eq(x->spill_stores, y->spill_stores);
		}
		cg_ptxas_free(&one);
		cg_ptxas_free(&r[i]);
		cg_module_free(seq);
		cg_module_free(par[i]);
	}
}
END_TEST

/*
 * share.c's plan: the donor is the module whose PTX fits the others (sm_80,
 * in either order), and every kernel alike is emptied in the others; a
 * module whose IR is wanted whole afterwards (--emit=llvm) gives none.
 */
START_TEST(test_share_plan)
{
	static const char *const sm[2][2] = {{"sm_80", "sm_90a"}, {"sm_90a", "sm_80"}};
	GemmSpec s[8];
	int ns = MIN(suite_specs(s), 3);

	for (int order = 0; order < 3; order++) {
		CgModule *m[2];
		CgShare *sh;
		int lo = order == 1;	/* the sm_80 module */
		for (int i = 0; i < 2; i++)
			m[i] = gh_emit_specs(sm[order == 1][i], GH_MMA, s, ns, "k");
		if (order == 2)
			cg_module_keep_ir(m[1]);
		sh = cg_share_plan(m, 2);
		ck_assert_int_eq(cg_share_donor(sh, lo), -1);
		ck_assert_int_eq(cg_share_donor(sh, !lo), order == 2 ? -1 : lo);
		ck_assert_int_eq(cg_share_count(sh, !lo), order == 2 ? 0 : ns);
		ck_assert_int_eq(cg_share_count(sh, lo), 0);
		cg_share_free(sh);
		for (int i = 0; i < 2; i++)
			cg_module_free(m[i]);
	}
}
END_TEST

/* The hand-over in PTX: volatile accesses and a fence, no atomics; ptxas takes it. */
START_TEST(test_split_k_ptx)
{
	GemmSpec s[2];
	CgModule *m;
	const char *ptx;

	gh_spec_dense_bias_gelu(&s[0], 256, 512);
	gh_tiles(&s[0], 16, 128, 128, 1, 4, 4);
	gh_split(&s[0], 4, 16);
	gh_spec_grouped_swiglu(&s[1], 8, 256, 512, 2);
	gh_tiles(&s[1], 16, 128, 128, 1, 4, 4);
	gh_split(&s[1], 2, 64);
	for (size_t i = 0; i < NELEM(gh_targets); i++) {
		m = gh_emit_specs(gh_targets[i], GH_MMA, s, 2, "split");
		ptx = gh_ptx(m);
		ck_assert_int_gt(gh_count(ptx, "ld.volatile.global.u32"), 0);
		ck_assert_int_gt(gh_count(ptx, "st.volatile.global.u32"), 0);
		ck_assert_int_gt(gh_count(ptx, "fence.sc") + gh_count(ptx, "membar"), 0);
		ck_assert_int_eq(gh_count(ptx, "\tatom."), 0);
		ck_assert_int_eq(gh_count(ptx, "\tred."), 0);
		gh_assemble(m, 2, "test_split_k_ptx", GH_NO_SPILLS);
		cg_module_free(m);
	}
}
END_TEST

/*
 * --precision=tf32: f32 x f32 through the mma.sync mainloop with tf32
 * operands (f32 tiles in shared memory, cvt.rna.tf32.f32 on the fragments,
 * m16n8k8).  The reference rounds A and B the same way (f32_to_tf32), so
 * what is left is the order of the f32 sums: any operand left unrounded
 * (the emulator refuses it), truncated instead of rounded, or a fragment
 * element out of place is far above 1e-5.
 */
static const struct {
	const char *what;
	int kind;		/* 0 dense bias+GELU, 1 grouped gather+SwiGLU, 2 grouped scale+scatter, 3 dense B[K,N] + residual */
	int kn, plain, S;	/* B [K,N]; no fragment pipelining; split-K slices */
	int64_t N, K;
	int tile[6], T;
	int counts[8];
} tf32_cases[] = {
	{"tf32 dense", 0, 0, 0, 0, 128, 96, {64, 64, 32, 2, 2, 3}, 70, {0}},
	{"tf32 dense B[K,N] + residual", 3, 1, 0, 0, 128, 64, {64, 64, 32, 2, 2, 3}, 40, {0}},
	{"tf32 grouped gather + SwiGLU", 1, 0, 0, 0, 128, 64, {16, 64, 32, 1, 4, 4}, 20,
	 {9, 0, 12, 0, 3, 11, 0, 5}},
	{"tf32 grouped scale + scatter, B[K,N]", 2, 1, 0, 0, 64, 128, {32, 64, 64, 2, 2, 4}, 48,
	 {3, 0, 20, 0, 1, 19, 0, 5}},
	{"tf32 plain mainloop, bk 16, 5 stages", 0, 0, 1, 0, 64, 80, {32, 32, 16, 1, 2, 5}, 33, {0}},
	{"tf32 grouped, bk 128, split 2", 1, 0, 0, 2, 128, 256, {16, 64, 128, 1, 4, 3}, 10,
	 {3, 0, 7, 0, 0, 9, 1, 0}},
};

static void
tf32_case(GemmCase *c, int i)
{
	const int *tl = tf32_cases[i].tile;
	int64_t N = tf32_cases[i].N, K = tf32_cases[i].K;

	memset(c, 0, sizeof *c);
	c->what = tf32_cases[i].what;
	switch (tf32_cases[i].kind) {
	case 0: gh_spec_dense_bias_gelu(&c->s, N, K); break;
	case 1: gh_spec_grouped_swiglu(&c->s, 8, N, K, 2); break;
	case 2: gh_spec_grouped_scale_scatter(&c->s, 8, N, K); break;
	default: gh_spec_kn_residual(&c->s, N, K, DT_F32); break;
	}
	c->s.a_dt = c->s.b_dt = c->s.c_dt = DT_F32;
	c->s.mma_dt = DT_TF32;
	c->s.b_layout = tf32_cases[i].kn ? CG_B_KN : CG_B_NK;
	c->s.no_frag_pipe = tf32_cases[i].plain;
	gh_tiles(&c->s, tl[0], tl[1], tl[2], tl[3], tl[4], tl[5]);
	c->T = tf32_cases[i].T;
	memcpy(c->counts, tf32_cases[i].counts, sizeof tf32_cases[i].counts);
	if (tf32_cases[i].S)
		gh_split(&c->s, tf32_cases[i].S, c->T);
}

START_TEST(test_emu_tf32)
{
	GemmCase c;
	GemmRun r;
	GemmErr e;

	tf32_case(&c, _i);
	gh_check(&c, 1e-5);
	/* and it is tf32, not f32: against the unrounded operands the error is
	 * the operands' rounding, well above the f32 sums' */
	ck_assert_msg(gh_run(&r, &c) == 0, "%s: %s", c.what, r.msg);
	r.tf32 = 0;
	ck_assert_int_eq(gh_compare(&r, &e), 0);
	ck_assert_msg(e.err > 3e-5 && e.err < 2e-3, "%s: %.3g against f32 operands", c.what, e.err);
	gh_free(&r);
}
END_TEST

/* The emulator's mma tf32 takes f32 words whose low 13 bits are 0 (what
 * cvt.rna.tf32.f32 leaves) and refuses others, whose meaning the PTX ISA
 * leaves to the hardware: a builder that forgets the rounding fails there. */
START_TEST(test_emu_tf32_operands_must_be_rounded)
{
	CgTarget t = {"emu", NULL, 3};
	float x[32];
	Diag d;

	for (int round = 0; round < 2; round++) {
		CgModule *m;
		const CgKernel *k;
		uint64_t arg = (uint64_t)(uintptr_t)x;
		CgEmuBuf buf = {x, sizeof x};
		int rc;

		for (int i = 0; i < 32; i++)
			x[i] = round ? f32_to_tf32(1.0f / (3 + i)) : 1.0f / (3 + i);
		diag_init(&d, NULL);
		m = cg_module_new(&t, "probe", &d);
		ck_assert_int_eq(cg_emit_probe(m, "p", CG_MMA_TF32, &d), 0);
		k = cg_module_find(m, "p");
		{
			CgEmuLaunch l = {{1, 1, 1}, {128, 1, 1}, k->smem, &arg, 1, &buf, 1};
			rc = cg_emu_run(m, "p", &l, &d);
		}
		if (round) {
			ck_assert_msg(rc == 0, "%s", d.last);
		} else {
			ck_assert_int_lt(rc, 0);
			ck_assert_ptr_nonnull(strstr(d.last, "is not a tf32"));
		}
		cg_module_free(m);
	}
}
END_TEST

/* The tf32 mma and cvt in the PTX of every target (sm_90a too: the wgmma
 * mainloop has no tf32 and refuses it); ptxas takes them without spills at
 * the plan's tiles (program.c halves the table's bk for tf32): prefill
 * 128x128x32 dense, the decode tile 16x128x64 grouped with B[K,N]. */
START_TEST(test_tf32_ptx)
{
	CgTarget t90a = {"sm_90a", NULL, 3};
	GemmSpec s[2];
	GemmCase c;
	CgModule *m;
	const char *ptx;
	Diag d;

	tf32_case(&c, 0);
	s[0] = c.s;
	s[0].N = s[0].K = 1024;
	gh_tiles(&s[0], 128, 128, 32, 2, 2, 4);
	tf32_case(&c, 3);
	s[1] = c.s;
	s[1].N = s[1].K = 1024;
	gh_tiles(&s[1], 16, 128, 64, 1, 4, 5);
	for (size_t i = 0; i < NELEM(gh_targets); i++) {
		m = gh_emit_specs(gh_targets[i], GH_MMA, s, 2, "tf32");
		ptx = gh_ptx(m);
		ck_assert_int_gt(gh_count(ptx, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), 0);
		ck_assert_int_gt(gh_count(ptx, "cvt.rna.tf32.f32"), 0);
		ck_assert_int_eq(gh_count(ptx, "m16n8k16"), 0);
		gh_assemble(m, 2, "test_tf32_ptx", GH_NO_SPILLS);
		cg_module_free(m);
	}
	diag_init(&d, NULL);
	s[0].mainloop = CG_MAINLOOP_WGMMA;
	s[0].bk = 64;
	ck_assert_int_lt(cg_gemm_check(&t90a, &s[0], &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "no tf32"));
}
END_TEST

Suite *
codegen_suite(void)
{
	Suite *s = suite_create("codegen");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_target_caps);
	tcase_add_test(t, test_expr_print_matches_bundle_grammar);
	tcase_add_test(t, test_epilogue_check_rejects_bad_programs);
	tcase_add_test(t, test_epilogue_print);
	tcase_add_test(t, test_epilogue_reference_values);
	tcase_add_test(t, test_gemm_params_and_geometry);
	tcase_add_test(t, test_gemm_rejects_bad_specs);
	tcase_add_test(t, test_hopper_feature_on_sm80_is_a_diagnostic);
	tcase_add_loop_test(t, test_ptx_assembles_on_target, 0, (int)NELEM(gh_targets));
	tcase_add_test(t, test_ptxas_reports_errors);
	tcase_add_test(t, test_ptxas_many_in_order);
	tcase_add_test(t, test_modules_assemble_in_threads);
	tcase_add_test(t, test_share_plan);
	tcase_add_loop_test(t, test_emu_dense_and_grouped_tiles, 0, (int)NELEM(emu_cases));
	tcase_add_test(t, test_emu_dense_plain_mainloop);
	tcase_add_test(t, test_emu_kn_layout_tanh_f32_out);
	tcase_add_test(t, test_emu_f16_residual_bk16_5_stages);
	tcase_add_test(t, test_emu_f32_inputs_convert_in_the_load);
	tcase_add_test(t, test_emu_grouped_gpt_oss_swiglu_bias);
	tcase_add_test(t, test_emu_grouped_scale_scatter);
	tcase_add_test(t, test_emu_grouped_many_experts_table);
	tcase_add_test(t, test_emu_grouped_all_rows_one_expert_and_zero_rows);
	tcase_add_loop_test(t, test_emu_split_k, 0, (int)NELEM(split_cases));
	tcase_add_test(t, test_split_k_rules);
	tcase_add_test(t, test_split_k_ptx);
	tcase_add_loop_test(t, test_emu_stream_k, 0, (int)NELEM(stream_cases));
	tcase_add_test(t, test_stream_k_rules);
	tcase_add_test(t, test_stream_k_ptx);
	tcase_add_loop_test(t, test_emu_tf32, 0, (int)NELEM(tf32_cases));
	tcase_add_test(t, test_tf32_ptx);
	tcase_add_test(t, test_emu_tf32_operands_must_be_rounded);
	suite_add_tcase(s, t);
	t = tcase_create("stream-tail");	/* stream-K with a tail of short runs (--debug=sk-tail) */
	tcase_set_timeout(t, 120);
	tcase_add_loop_test(t, test_emu_stream_tail, 0, (int)NELEM(stream_cases));
	tcase_add_test(t, test_stream_tail_rules);
	suite_add_tcase(s, t);
	t = tcase_create("stream-dyn");	/* dynamic stream-K (CK_RUN_CASE=stream-dyn) */
	tcase_set_timeout(t, 120);
	tcase_add_loop_test(t, test_emu_stream_dyn, 0, (int)NELEM(stream_cases));
	tcase_add_test(t, test_stream_dyn_rules);
	suite_add_tcase(s, t);
	return s;
}
