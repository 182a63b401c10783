/*
 * check_gemm_quant.c — quantised GEMM outputs.  The builder's quantisation
 * stage (f8e4m3 and i8; a static scale and zero point, or per-group dynamic
 * scales with their scale output) runs on the CPU emulator against a
 * reference in double; q must equal the reference exactly wherever the
 * reference's rounding is unambiguous (a value not within a hair of a
 * rounding boundary) and be one of the two neighbours elsewhere; scales
 * agree to f32 precision.  Its checks and parameter lists, PTX assembled by
 * ptxas on sm_80/sm_90/sm_90a, and whole programs (fuse-gemm, lower_gemm,
 * program.c, the generic fallback) on the emulator against the interpreter.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"
#include "passes.h"

/* ---- the quantisation reference (ir/eval_quant.c's arithmetic) ---- */

static double
round_to(DType dt, double v)
{
	unsigned char b[8];

	dtype_store(dt, b, 0, v);
	return dtype_load(dt, b, 0);
}

/* The byte quantize writes for the quotient x (already x / scale) and zero. */
static int
qbyte(DType c, double x, double zero)
{
	unsigned char b[1];
	double v = (float)x;

	if (c == DT_I8)
		v = nearbyint(nearbyint(v) + zero);
	else
		v = v + zero;
	dtype_store(c, b, 0, v);
	return b[0];
}

typedef struct {
	int exact, loose;	/* elements compared exactly; at a rounding boundary */
} Stats;

/*
 * got must be the byte of v (rounded to in_dt) / s, exactly unless v lies
 * within a hair (the f32 epilogue against double: 1e-5 relative, 1e-6
 * absolute) of a rounding boundary of in_dt or of the quotient's rounding,
 * where either neighbour is right.  Given the same v, the kernel's f32
 * division is the reference's, ties included.
 */
static int
check_q(DType c, DType in_dt, int got, double v, double s, double zero, Stats *st)
{
	int cand[3], n = 0, same = 1, ok = 0;

	cand[n++] = qbyte(c, round_to(in_dt, v) / s, zero);
	for (int a = -1; a <= 1; a += 2)
		cand[n++] = qbyte(c, round_to(in_dt, v + a * (1e-5 * fabs(v) + 1e-6)) / s, zero);
	for (int i = 0; i < n; i++) {
		same &= cand[i] == cand[0];
		ok |= got == cand[i];
	}
	if (same)
		st->exact++;
	else
		st->loose++;
	return ok;
}

/* ---- a GEMM case on the emulator ---- */

/* Quantised cases: their own seed, B twice the usual scale (|x| up to ~2). */
#define QUANT_CASE {.seed = 4242, .b_scale = 2}

/* Compare one row of q (and its scales) with the reference; 0 or -1 with msg. */
static int
check_row(const GemmRun *r, const GemmCase *c, const double *v, int drow, Stats *st, char *msg,
	  size_t nmsg)
{
	const CgQuant *qu = &r->s.quant;
	const unsigned char *q = r->C;
	DType cd = r->s.c_dt;
	int64_t width = r->width;
	int G = qu->kind == CG_QUANT_GROUP ? qu->group : (int)width;

	for (int64_t g0 = 0; g0 < width; g0 += G) {
		double amax = 0, s = c->scale_v, zero = c->zero_v;
		for (int64_t i = g0; i < g0 + G; i++)
			amax = fmax(amax, fabs(round_to(qu->in_dt, v[i])));
		if (qu->kind == CG_QUANT_GROUP) {
			s = amax == 0 ? 1 : (float)(amax / cg_quant_qmax(cd));
			zero = 0;
			if (r->C_scale) {
				double got = r->C_scale[(int64_t)drow * (width / G) + g0 / G];
				double tol = 1e-5 + (qu->in_dt != DT_F32 ? 8e-3 : 0);
				if (!(fabs(got - s) <= tol * s)) {
					snprintf(msg, nmsg, "scale[%d,%lld] is %.9g, want %.9g", drow,
						 (long long)(g0 / G), got, s);
					return -1;
				}
				s = got;	/* q follows the kernel's scale */
			}
		}
		for (int64_t i = g0; i < g0 + G; i++) {
			int got = q[(int64_t)drow * r->s.ldc + i];
			if (!check_q(cd, qu->in_dt, got, v[i], s, zero, st)) {
				snprintf(msg, nmsg, "q[%d,%lld] is 0x%02x, want 0x%02x (x = %.9g, scale %.9g)",
					 drow, (long long)i, got, qbyte(cd, round_to(qu->in_dt, v[i]) / s, zero),
					 v[i], s);
				return -1;
			}
		}
	}
	return 0;
}

/* Run c on the emulator and compare, row by row; 0, or -1 with the reason in msg. */
static int
run_qcase(const GemmCase *c, Stats *st, char *msg, size_t nmsg)
{
	GemmRun r;
	double *v;
	int rc = 0;

	if (gh_run(&r, c) < 0) {
		snprintf(msg, nmsg, "%s", r.msg);
		gh_free(&r);
		return -1;
	}
	v = malloc(sizeof *v * (size_t)(r.width ? r.width : 1));
	for (int row = 0; row < r.M && rc == 0; row++) {
		GhRow w = gh_row(&r, row);
		gh_ref_row(&r, &w, v);
		if (check_row(&r, c, v, w.drow, st, msg, nmsg) < 0) {
			size_t k = strlen(msg);
			snprintf(msg + k, nmsg - k, " (row %d, expert %d)", row, w.e);
			rc = -1;
		}
	}
	free(v);
	gh_free(&r);
	return rc;
}

static void
check_qcase(const GemmCase *c)
{
	char msg[600];
	Stats st = {0, 0};

	ck_assert_msg(run_qcase(c, &st, msg, sizeof msg) == 0, "%s", msg);
	if (getenv("MOEC_CG_VERBOSE"))
		fprintf(stderr, "%d exact, %d at a boundary\n", st.exact, st.loose);
	/* the reference decides almost everything */
	ck_assert_msg(st.exact > 0 && st.loose * 50 <= st.exact + st.loose,
		      "%d exact, %d at a boundary", st.exact, st.loose);
}

/* ---- specs ---- */

/* dense, bias + gelu, quantised per group of G columns */
static void
spec_dense_group(GemmSpec *s, int64_t N, int64_t K, DType c_dt, int G)
{
	gh_spec_dense_bias_gelu(s, N, K);
	s->c_dt = c_dt;
	s->quant.kind = CG_QUANT_GROUP;
	s->quant.group = G;
	s->quant.want_scales = 1;
}

/* DeepSeek's activation quantisation: grouped gate|up, gathered rows, SwiGLU, f8 per 128 */
static void
spec_grouped_swiglu_f8(GemmSpec *s, int E, int64_t N, int64_t K)
{
	gh_spec_grouped_swiglu(s, E, N, K, 2);
	s->c_dt = DT_F8E4M3;
	s->quant.kind = CG_QUANT_GROUP;
	s->quant.group = 128;
	s->quant.want_scales = 1;
}

/* dense, i8 with a static scale and zero point */
static void
spec_dense_static(GemmSpec *s, int64_t N, int64_t K)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->c_dt = DT_I8;
	cg_ep_op(&s->ep, OP_MUL, cg_ep_acc(&s->ep), cg_ep_row(&s->ep, DT_F32, CGR_DIRECT, "rs"));
	s->quant.kind = CG_QUANT_STATIC;
	s->quant.scale = 0.004f;
	s->quant.zero = -3;
}

/* ---- tests: checks, parameters, printing ---- */

START_TEST(test_quant_checks)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	GemmSpec s;

	diag_init(&d, NULL);
	spec_dense_group(&s, 256, 64, DT_F8E4M3, 128);
	gh_tiles(&s, 64, 128, 32, 2, 2, 3);
	ck_assert_msg(cg_gemm_check(&t, &s, &d) == 0, "%s", d.last);
	gh_tiles(&s, 64, 64, 32, 2, 2, 3);			/* a tile of 64 columns, groups of 128 */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "do not tile"));
	spec_dense_group(&s, 384, 64, DT_F8E4M3, 64);	/* 64 vs 96 columns per warp */
	gh_tiles(&s, 64, 192, 32, 2, 2, 3);
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "96 per warp"));
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	spec_dense_group(&s, 256, 64, DT_F8E4M3, 12);	/* not whole fragments */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "multiple of 8"));
	spec_dense_group(&s, 256, 64, DT_BF16, 128);	/* quantised to bf16 */
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	spec_dense_group(&s, 256, 64, DT_I8, 128);	/* i8 without a quantisation */
	s.quant.kind = CG_QUANT_NONE;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "no quantisation"));
	spec_dense_static(&s, 128, 64);
	s.quant.in_dt = DT_I32;
	ck_assert_int_eq(cg_gemm_check(&t, &s, &d), -1);
}
END_TEST

START_TEST(test_quant_params_and_note)
{
	CgTarget t = {"sm_90a", NULL, 3};
	Diag d;
	CgModule *m;
	GemmSpec s;
	const CgKernel *k;
	char b[128];

	diag_init(&d, NULL);
	m = cg_module_new(&t, "p", &d);
	spec_grouped_swiglu_f8(&s, 8, 512, 128);
	gh_tiles(&s, 16, 256, 64, 1, 4, 3);
	ck_assert_msg(cg_emit_gemm(m, "up", &s, &d) == 0, "%s", d.last);
	k = cg_module_find(m, "up");
	ck_assert_int_eq(k->nparam, 7);
	ck_assert_str_eq(k->param[3].role, "C");
	ck_assert_str_eq(k->param[4].role, "C_scale");
	ck_assert_str_eq(k->param[5].role, "offsets");
	ck_assert_ptr_nonnull(strstr(k->note, "quant: f8e4m3 group=128 scales"));

	spec_dense_static(&s, 128, 64);
	s.quant.scale_role = "p5";
	s.quant.scale_dt = DT_F32;
	s.quant.zero_role = "p6";
	s.quant.zero_dt = DT_I8;
	s.quant.in_dt = DT_BF16;
	ck_assert_msg(cg_emit_gemm(m, "st", &s, &d) == 0, "%s", d.last);
	k = cg_module_find(m, "st");
	ck_assert_int_eq(k->nparam, 7);	/* A B C rs p5 p6 T */
	ck_assert_str_eq(k->param[3].role, "rs");
	ck_assert_str_eq(k->param[4].role, "p5");
	ck_assert_str_eq(k->param[5].role, "p6");
	cg_quant_print(b, sizeof b, &s.quant, s.c_dt);
	ck_assert_str_eq(b, "i8 static scale=p5:f32 zero=p6:i8 of bf16");
	cg_module_free(m);
}
END_TEST

/* ---- tests: the builder on the emulator ---- */

START_TEST(test_emu_dense_f8_group128_across_warps)
{
	GemmCase c = QUANT_CASE;

	spec_dense_group(&c.s, 256, 96, DT_F8E4M3, 128);
	gh_tiles(&c.s, 64, 128, 32, 2, 2, 3);		/* 64 columns per warp: a group spans two */
	c.T = 77;
	check_qcase(&c);
}
END_TEST

/* The sm_90a mainloop leaves the same accumulator layout (rows 64 apart per
 * warp): the quantisation stage follows it. */
START_TEST(test_emu_wgmma_f8_group128)
{
	GemmCase c = QUANT_CASE;

	CgTarget emu = {"emu", NULL, 3};
	Diag d;

	spec_dense_group(&c.s, 256, 128, DT_F8E4M3, 128);
	c.s.mainloop = CG_MAINLOOP_WGMMA;
	gh_tiles(&c.s, 128, 128, 64, 2, 2, 3);		/* one warpgroup: 128 rows, 128 columns */
	c.T = 150;
	diag_init(&d, NULL);
	if (cg_gemm_check(&emu, &c.s, &d) != 0) {	/* a builder without the wgmma mainloop */
		fprintf(stderr, "check_gemm_quant: wgmma on the emulator skipped: %s\n", d.last);
		return;
	}
	check_qcase(&c);
}
END_TEST

START_TEST(test_emu_dense_i8_group128_wide_tile)
{
	GemmCase c = QUANT_CASE;

	spec_dense_group(&c.s, 512, 64, DT_I8, 128);
	gh_tiles(&c.s, 128, 256, 32, 2, 4, 3);		/* two groups per tile, four warps across */
	c.T = 130;
	check_qcase(&c);
}
END_TEST

START_TEST(test_emu_dense_i8_group32_within_a_warp_no_scales)
{
	GemmCase c = QUANT_CASE;

	spec_dense_group(&c.s, 128, 64, DT_I8, 32);
	c.s.quant.want_scales = 0;
	gh_tiles(&c.s, 32, 128, 32, 1, 2, 2);		/* 64 columns per warp: two groups each */
	c.T = 40;
	check_qcase(&c);
}
END_TEST

START_TEST(test_emu_dense_f8_group_of_bf16_values)
{
	GemmCase c = QUANT_CASE;

	spec_dense_group(&c.s, 128, 64, DT_F8E4M3, 64);	/* the IR value is bf16 */
	c.s.quant.in_dt = DT_BF16;
	gh_tiles(&c.s, 32, 64, 32, 1, 2, 2);
	c.T = 33;
	check_qcase(&c);
}
END_TEST

START_TEST(test_emu_grouped_swiglu_f8_group128)
{
	GemmCase c = QUANT_CASE;
	int counts[8] = {0, 37, 1, 0, 0, 70, 12, 0};	/* 120 = 2 * 60 */

	spec_grouped_swiglu_f8(&c.s, 8, 512, 64);
	gh_tiles(&c.s, 32, 256, 32, 2, 2, 3);		/* 128 output columns per tile */
	c.T = 60;
	memcpy(c.counts, counts, sizeof counts);
	check_qcase(&c);
}
END_TEST

START_TEST(test_emu_grouped_swiglu_f8_decode_persistent)
{
	GemmCase c = QUANT_CASE;
	int counts[8] = {5, 0, 3, 2, 11, 0, 7, 4};	/* 32 = 2 * 16 */

	spec_grouped_swiglu_f8(&c.s, 8, 512, 128);
	gh_tiles(&c.s, 16, 256, 64, 1, 4, 3);		/* 32 output columns per warp */
	c.s.sched = CG_SCHED_PERSISTENT;
	c.s.ctas = 5;
	c.T = 16;
	memcpy(c.counts, counts, sizeof counts);
	check_qcase(&c);
}
END_TEST

START_TEST(test_emu_grouped_scatter_i8_group64)
{
	GemmCase c = QUANT_CASE;
	int counts[4] = {9, 0, 30, 1};

	gh_spec_grouped_scale_scatter(&c.s, 4, 128, 64);
	c.s.c_dt = DT_I8;
	c.s.quant.kind = CG_QUANT_GROUP;
	c.s.quant.group = 64;
	c.s.quant.want_scales = 1;
	gh_tiles(&c.s, 16, 128, 32, 1, 4, 2);
	c.T = 40;
	memcpy(c.counts, counts, sizeof counts);
	check_qcase(&c);
}
END_TEST

START_TEST(test_emu_static_i8_immediates)
{
	GemmCase c = QUANT_CASE;

	spec_dense_static(&c.s, 128, 64);
	gh_tiles(&c.s, 64, 64, 32, 2, 2, 3);
	c.scale_v = 0.004f;
	c.zero_v = -3;
	c.T = 70;
	check_qcase(&c);	/* |x| reaches ~2: q saturates at both ends */
}
END_TEST

START_TEST(test_emu_static_f8_parameters_swiglu)
{
	GemmCase c = QUANT_CASE;
	int counts[4] = {3, 20, 0, 9};

	cg_gemm_default(&c.s);
	c.s.N = 256;
	c.s.K = 64;
	c.s.groups = 4;
	c.s.c_dt = DT_F8E4M3;
	cg_ep_swiglu(&c.s.ep, cg_ep_acc(&c.s.ep), &gh_oai);
	c.s.quant.kind = CG_QUANT_STATIC;
	c.s.quant.scale_role = "qscale";
	c.s.quant.scale_dt = DT_BF16;
	c.s.quant.zero_role = "qzero";
	c.s.quant.zero_dt = DT_F8E4M3;
	c.s.quant.in_dt = DT_BF16;
	gh_tiles(&c.s, 16, 128, 32, 1, 4, 2);
	c.scale_v = 0.0078125;
	c.zero_v = 0;
	c.T = 32;
	memcpy(c.counts, counts, sizeof counts);
	check_qcase(&c);
	c.s.quant.zero_dt = DT_I8;	/* an i8 zero point with an f8 output (ONNX allows 0 only) */
	c.zero_v = 2;
	check_qcase(&c);
}
END_TEST

/* ---- tests: PTX on the three targets ---- */

static int
quant_specs(GemmSpec *s)
{
	int n = 0;

	spec_dense_group(&s[n], 1024, 256, DT_F8E4M3, 128);
	gh_tiles(&s[n++], 128, 256, 64, 2, 4, 3);		/* the prefill tile */
	spec_dense_group(&s[n], 1024, 256, DT_I8, 128);
	gh_tiles(&s[n++], 16, 128, 128, 1, 4, 4);		/* the decode tile */
	spec_grouped_swiglu_f8(&s[n], 8, 1024, 512);
	gh_tiles(&s[n], 16, 256, 64, 1, 4, 3);
	s[n++].sched = CG_SCHED_PERSISTENT;
	spec_dense_static(&s[n], 512, 256);
	s[n].quant.zero_role = "z";
	s[n].quant.zero_dt = DT_I8;
	gh_tiles(&s[n++], 64, 128, 64, 2, 2, 3);
	return n;
}

START_TEST(test_quant_ptx_assembles_on_target)
{
	GemmSpec s[8];
	int ns = quant_specs(s);
	CgModule *m = gh_emit_specs(gh_targets[_i], GH_MMA, s, ns, "q");
	const char *ptx = gh_ptx(m);

	ck_assert(strstr(ptx, "shfl.sync.up.b32") != NULL);	/* the quad's amax */
	ck_assert(strstr(ptx, "st.global.b16") != NULL || strstr(ptx, "st.global.u16") != NULL);
	ck_assert(strstr(ptx, "div.rn.f32") != NULL);		/* x / scale, IEEE */
	gh_assemble(m, ns, "check_gemm_quant", 0);
	cg_module_free(m);
}
END_TEST

/* ---- tests: whole programs on the emulator against the interpreter ---- */

/* GEMM + SiLU + per-128 f8 quantisation: one tensor-core kernel, two outputs */
static const char prog_group128[] =
	"weight $w : bf16[256,64]\n"
	"weight $b : f32[256] scale=0.1\n"
	"graph @g(%x: bf16[T,64]) -> (q: f8e4m3[T,256], s: f32[T,2]) {\n"
	"	%h = matmul %x, $w, $b, to=f32, trans_b=1 : f32[T,256]\n"
	"	%a = silu %h : f32[T,256]\n"
	"	%q, %s = quantize_dynamic %a, group=128, to=f8e4m3 : f8e4m3[T,256], f32[T,2]\n"
	"	ret %q, %s\n"
	"}\n";

/* static i8 with a constant scale and a weight zero point, from a bf16 GEMM result */
static const char prog_static_i8[] =
	"weight $w : bf16[128,64]\n"
	"weight $z : i8[] mean=3 scale=0\n"
	"graph @g(%x: bf16[T,64]) -> (q: i8[T,128]) {\n"
	"	%h = matmul %x, $w, trans_b=1 : bf16[T,128]\n"
	"	%c = const value=[0.02] : f32[]\n"
	"	%q = quantize %h, %c, $z, to=i8 : i8[T,128]\n"
	"	ret %q\n"
	"}\n";

/* f32 operands: the tensor-core builder declines; the generic body quantises */
static const char prog_f32_falls_back[] =
	"weight $w : f32[128,32]\n"
	"graph @g(%x: f32[T,32]) -> (q: i8[T,128], s: f32[T,2]) {\n"
	"	%h = matmul %x, $w, trans_b=1 : f32[T,128]\n"
	"	%q, %s = quantize_dynamic %h, group=64, to=i8 : i8[T,128], f32[T,2]\n"
	"	ret %q, %s\n"
	"}\n";

/* per-token scales stay a row kernel of their own after the GEMM */
static const char prog_per_token[] =
	"weight $w : bf16[128,64]\n"
	"graph @g(%x: bf16[T,64]) -> (q: f8e4m3[T,128], s: f32[T,1]) {\n"
	"	%h = matmul %x, $w, to=f32, trans_b=1 : f32[T,128]\n"
	"	%q, %s = quantize_dynamic %h, group=row, to=f8e4m3 : f8e4m3[T,128], f32[T,1]\n"
	"	ret %q, %s\n"
	"}\n";

/*
 * DeepSeek-V3's FP8 experts: the gate|up grouped GEMM (gathered token rows,
 * SwiGLU) quantises its activations per 128 columns in the epilogue; the
 * down GEMM reads them dequantised.  The whole block on the emulator.
 */
static const char prog_moe_act_quant[] =
	"weight $router : bf16[8,64]\n"
	"weight $wgu : bf16[8,256,64]\n"
	"weight $wdown : bf16[8,64,128]\n"
	"graph @moe(%x: bf16[T,64]) -> (y: bf16[T,64], qs: f32[2*T,1]) {\n"
	"	%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"	%w, %ids = route %logits, k=2, renorm=1, router=softmax : f32[T,2], i32[T,2]\n"
	"	%offs, %rows, %pos = permute %ids, experts=8 : i32[9], i32[2*T], i32[2*T]\n"
	"	%two = const value=[2] : i32[]\n"
	"	%src = div %rows, %two : i32[2*T]\n"
	"	%xs = gather %x, %src, axis=0 : bf16[2*T,64]\n"
	"	%h = grouped_matmul %xs, $wgu, %offs, to=f32 : f32[2*T,256]\n"
	"	%act = swiglu %h, act=silu, layout=interleave : f32[2*T,128]\n"
	"	%q, %qs = quantize_dynamic %act, group=128, to=f8e4m3 : f8e4m3[2*T,128], f32[2*T,1]\n"
	"	%a8 = dequantize %q, %qs, axis=1, block_size=128, to=bf16 : bf16[2*T,128]\n"
	"	%down = grouped_matmul %a8, $wdown, %offs, to=f32 : f32[2*T,64]\n"
	"	%wf = reshape %w, shape=[2*T] : f32[2*T]\n"
	"	%wr = gather %wf, %rows, axis=0 : f32[2*T]\n"
	"	%wc = reshape %wr, shape=[2*T, 1] : f32[2*T,1]\n"
	"	%scaled = mul %down, %wc : f32[2*T,64]\n"
	"	%slots = scatter_rows %scaled, %rows, rows=[2*T] : f32[2*T,64]\n"
	"	%s3 = reshape %slots, shape=[T, 2, 64] : f32[T,2,64]\n"
	"	%sum = reduce_sum %s3, axes=[1], keepdims=0 : f32[T,64]\n"
	"	%y = cast %sum, to=bf16 : bf16[T,64]\n"
	"	ret %y, %qs\n"
	"}\n";

static const struct {
	const char *text;
	int T[2];		/* token counts to run at (0: none) */
	const char *kernel;	/* the kernel whose note must hold note */
	const char *note;
} programs[] = {
	{prog_group128, {37, 200}, "g_k0", "quant: f8e4m3 group=128 scales"},
	{prog_static_i8, {45, 0}, "g_k0", "quant: i8 static scale=0.02 zero=p2:i8 of bf16"},
	{prog_f32_falls_back, {19, 0}, "g_k0", ""},
	{prog_per_token, {23, 0}, "g_k0", "gemm"},
	{prog_moe_act_quant, {29, 0}, "moe_k3", "quant: f8e4m3 group=128 scales"},
};

START_TEST(test_program_against_interpreter)
{
	for (int i = 0; i < 2 && programs[_i].T[i] > 0; i++)
		gh_check_program(programs[_i].text, programs[_i].T[i], programs[_i].kernel, programs[_i].note);
}
END_TEST

Suite *
gemm_quant_suite(void)
{
	Suite *s = suite_create("gemm_quant");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 240);
	tcase_add_test(t, test_quant_checks);
	tcase_add_test(t, test_quant_params_and_note);
	tcase_add_test(t, test_emu_dense_f8_group128_across_warps);
	tcase_add_test(t, test_emu_dense_i8_group128_wide_tile);
	tcase_add_test(t, test_emu_wgmma_f8_group128);
	tcase_add_test(t, test_emu_dense_i8_group32_within_a_warp_no_scales);
	tcase_add_test(t, test_emu_dense_f8_group_of_bf16_values);
	tcase_add_test(t, test_emu_grouped_swiglu_f8_group128);
	tcase_add_test(t, test_emu_grouped_swiglu_f8_decode_persistent);
	tcase_add_test(t, test_emu_grouped_scatter_i8_group64);
	tcase_add_test(t, test_emu_static_i8_immediates);
	tcase_add_test(t, test_emu_static_f8_parameters_swiglu);
	tcase_add_loop_test(t, test_quant_ptx_assembles_on_target, 0, (int)NELEM(gh_targets));
	tcase_add_loop_test(t, test_program_against_interpreter, 0, (int)NELEM(programs));
	suite_add_tcase(s, t);
	return s;
}
