/*
 * check_split.c — split-f32 (passes/split_f32.c): an f32 GEMM whose A is
 * bf16-exact, over an f32 weight split exactly into three bf16 parts, as one
 * bf16 GEMM over 3K that reads A's k index modulo K (GemmSpec.a_rep).
 *
 * The split itself (util: bf16_split3): hi + mid + lo == w bit for bit on
 * random, large, small, bf16-valued and signed-zero floats, and refused
 * where it is not exact or a part would be subnormal (tiny, subnormal,
 * non-finite, rounding to infinity in bf16).  The GEMM builders with A read
 * three times along K (mma.sync, wgmma, warp-specialised, split-K,
 * CUDA cores) on the emulator against a double reference, exact sums
 * compared element for element.  Whole programs (a bf16 RMSNorm upcast to
 * f32 into an f32 router weight, N = 64 on tensor cores and N = 8 on CUDA
 * cores) through the default pipeline on the emulator against the
 * interpreter's unsplit f32 GEMM to f32 accumulation order (rel. L2 < 1e-6;
 * tf32 or bf16 rounding would be 1e-4-1e-3), and with a routing decision
 * on top the same top-k ids.  The refusals, each with its reason in the
 * fusion report: A computed in f32, a weight with a tiny element, a
 * decode-range max_tokens, --debug=simt-router.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "gemm_harness.h"
#include "passes.h"

/* ---- the split ---- */

static void
expect_split(float w)
{
	uint16_t p[3];

	ck_assert_msg(bf16_split3(w, p) == 0, "%a: refused", (double)w);
	float s = (bf16_to_f32(p[0]) + bf16_to_f32(p[1])) + bf16_to_f32(p[2]);	/* f32 adds, exact */
	double t = (double)bf16_to_f32(p[0]) + bf16_to_f32(p[1]) + bf16_to_f32(p[2]);
	uint32_t a, b;
	memcpy(&a, &s, 4);
	memcpy(&b, &w, 4);
	ck_assert_msg(a == b && t == (double)w, "%a: %a + %a + %a = %a", (double)w,
		      (double)bf16_to_f32(p[0]), (double)bf16_to_f32(p[1]), (double)bf16_to_f32(p[2]), (double)s);
	ck_assert_uint_eq(p[0], f32_to_bf16(w));	/* hi is bf16(w) */
}

static void
expect_refused(float w)
{
	uint16_t p[3];

	ck_assert_msg(bf16_split3(w, p) != 0, "%a: split, but it should not be", (double)w);
}

START_TEST(test_split3)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int i = 0; i < 200000; i++) {	/* random bits: every normal exponent down to 2^-103 */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint32_t u = (uint32_t)(x >> 32);
		float w;
		memcpy(&w, &u, 4);
		int e = (int)((u >> 23) & 0xff) - 127;
		if (!isfinite(w) || fabsf(w) >= 0x1.ffp127f)
			expect_refused(w);
		else if (w == 0 || e >= -103)
			expect_split(w);
	}
	float ok[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, -3.1415927f, 1.0f + 0x1p-23f, 1.0f - 0x1p-24f,
		      0x1.fffffep0f, 0x1.010101p0f, 0x1.fefffep127f, -0x1.fefffep127f, 0x1.fep127f,
		      FLT_MIN * 0x1p23f, 0x1.abcdefp-103f, 0x1p-126f, 0.0123456789f};
	for (size_t i = 0; i < NELEM(ok); i++)
		expect_split(ok[i]);
	for (int i = 0; i < 1000; i++)	/* bf16 values: mid = lo = 0 */
		expect_split(bf16_to_f32((uint16_t)(0x3c00 + 13 * i)));
	float no[] = {INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, 0x1.ffp127f, -0x1.ff7ffep127f, 0x1p-149f, 0x1.8p-140f,
		      FLT_MIN * 0.5f, 0x1.000002p-110f, 0x1.fffffep-120f};
	for (size_t i = 0; i < NELEM(no); i++)
		expect_refused(no[i]);
}
END_TEST

/* ---- the GEMM builders with A read three times along K ---- */

/* bf16 [T,K/3] x [N,K]^T -> f32, A read 3 times along K. */
static void
spec_rep(GemmSpec *s, int64_t N, int64_t K)
{
	cg_gemm_default(s);
	s->N = N;
	s->K = K;
	s->a_rep = 3;
	s->c_dt = DT_F32;
}

START_TEST(test_rep_builders)
{
	GemmCase c = {.what = "mma.sync 64x64x32, A read 3 times", .T = 77, .fill = GH_EXACT};

	spec_rep(&c.s, 64, 3 * 96);
	gh_tiles(&c.s, 64, 64, 32, 2, 2, 3);
	gh_check(&c, 1e-6);
	c.what = "mma.sync, split-K 3 (a slice per part)";
	c.s.split_k = 3;
	c.s.split_slots = 2 * 1;
	gh_check(&c, 1e-6);
	c.what = "mma.sync, split-K 4 (a slice's k-tiles wrap around A)";
	spec_rep(&c.s, 64, 3 * 64);
	gh_tiles(&c.s, 64, 64, 16, 2, 2, 3);
	c.s.split_k = 4;
	c.s.split_slots = 2;
	gh_check(&c, 1e-6);
	c.what = "wgmma 128x128x64, A read 3 times";
	spec_rep(&c.s, 128, 3 * 128);
	gh_tiles(&c.s, 128, 128, 64, 2, 2, 3);
	c.s.mainloop = CG_MAINLOOP_WGMMA;
	c.T = 200;
	gh_check(&c, 1e-6);
	c.what = "warp-specialised (TMA) 128x128x64, A read 3 times";
	spec_rep(&c.s, 128, 3 * 128);
	gh_tiles(&c.s, 128, 128, 64, 2, 2, 4);
	c.s.mainloop = CG_MAINLOOP_WS;
	gh_check(&c, 1e-6);
	c.what = "CUDA cores 64x64x16, A read 3 times";
	c.builder = GH_SIMT;
	spec_rep(&c.s, 64, 3 * 40);
	gh_tiles(&c.s, 64, 64, 16, 1, 1, 2);
	c.T = 70;
	gh_check(&c, 1e-6);
	c.what = "CUDA cores, split-K router tile (N = 8)";
	spec_rep(&c.s, 8, 3 * 40);
	cg_gemm_simt_tiles(&c.s, 5);
	c.T = 5;
	gh_check(&c, 1e-6);
}
END_TEST

START_TEST(test_rep_checks)
{
	CgTarget t = {"emu", NULL, 3};
	GemmSpec s;
	Diag d;

	diag_init(&d, NULL);
	spec_rep(&s, 64, 3 * 80);	/* A's 80 columns are no multiple of bk 32 */
	gh_tiles(&s, 64, 64, 32, 2, 2, 3);
	ck_assert_int_ne(cg_gemm_check(&t, &s, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "not a multiple of bk"));
	spec_rep(&s, 64, 3 * 96);
	gh_tiles(&s, 64, 64, 32, 2, 2, 3);
	s.gather = 1;	/* the rows gathered too */
	ck_assert_int_ne(cg_gemm_check(&t, &s, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "times along K"));
	spec_rep(&s, 64, 3 * 96 + 1);
	s.a_rep = 3;
	ck_assert_int_ne(cg_gemm_simt_check(&t, &s, &d), 0);
}
END_TEST

/* ---- whole programs ---- */

/* A bf16 RMSNorm upcast to f32 into an f32 weight (DeepSeek-V3's router). */
static const char prog64[] =
	"weight $g : bf16[256]\n"
	"weight $w : f32[64,256]\n"
	"graph @r(%x: bf16[T,256]) -> (logits: f32[T,64]) {\n"
	"	%h = rms_norm %x, $g, axis=-1, eps=1e-06 : bf16[T,256]\n"
	"	%a = cast %h, to=f32 : f32[T,256]\n"
	"	%logits = matmul %a, $w, to=f32, trans_b=1 : f32[T,64]\n"
	"	ret %logits\n"
	"}\n";

/* A bf16 input upcast to f32 (no norm: the GEMM alone against the interpreter). */
static const char progcast[] =
	"weight $w : f32[64,256]\n"
	"graph @r(%x: bf16[T,256]) -> (logits: f32[T,64]) {\n"
	"	%a = cast %x, to=f32 : f32[T,256]\n"
	"	%logits = matmul %a, $w, to=f32, trans_b=1 : f32[T,64]\n"
	"	ret %logits\n"
	"}\n";

/* DeepSeek-V3's routing on the split logits: sigmoid, a selection bias, 8
 * groups of 8 experts (top-2 score), 4 groups kept, top-6, renormalised and
 * scaled; the ids (and weights) must be the interpreter's. */
static const char progds[] =
	"weight $w : f32[64,512]\n"
	"weight $bias : f32[64] scale=0.05\n"
	"graph @r(%x: bf16[T,512]) -> (logits: f32[T,64], w: f32[T,6], ids: i32[T,6]) {\n"
	"	%a = cast %x, to=f32 : f32[T,512]\n"
	"	%logits = matmul %a, $w, to=f32, trans_b=1 : f32[T,64]\n"
	"	%w, %ids = route %logits, $bias, group_score=top2, k=6, n_group=8, renorm=1, router=sigmoid, "
	"scale=2.5, topk_group=4 : f32[T,6], i32[T,6]\n"
	"	ret %logits, %w, %ids\n"
	"}\n";

/* The same with 8 experts (CUDA cores) and the routing decision returned. */
static const char prog8[] =
	"weight $g : bf16[128]\n"
	"weight $w : f32[8,128]\n"
	"graph @r(%x: bf16[T,128]) -> (logits: f32[T,8], ids: i64[T,2]) {\n"
	"	%h = rms_norm %x, $g, axis=-1, eps=1e-06 : bf16[T,128]\n"
	"	%a = cast %h, to=f32 : f32[T,128]\n"
	"	%logits = matmul %a, $w, to=f32, trans_b=1 : f32[T,8]\n"
	"	%p = sigmoid %logits : f32[T,8]\n"
	"	%v, %ids = topk %p, k=2 : f32[T,2], i64[T,2]\n"
	"	ret %logits, %ids\n"
	"}\n";

START_TEST(test_split_programs)
{
	gh_check_program_max(progcast, 37, 4096, "r_k0_decode", "A x3 along K", 1e-6, 0);
	gh_check_program_max(progcast, 300, 4096, "r_k0", "A x3 along K", 1e-6, 0);
	gh_check_program_max(progcast, 300, 4096, "r_k0", "A x3 along K", 1e-6, DBG_EMU_WGMMA | DBG_EMU_WS);
	gh_check_program_max(progcast, 37, 64, "r_k0", "gemm-simt", 1e-6, 0);	/* decode range: left f32 */
	/* the norm's bf16 rows: the split GEMM as close to the interpreter as the CUDA-core one */
	gh_check_program_max(prog64, 300, 4096, "r_k0", "A x3 along K", 1e-4, 0);
	gh_check_program_max(prog64, 300, 4096, "r_k0", "gemm-simt", 1e-4, DBG_SIMT_ROUTER);
	gh_check_program_max(prog8, 45, 4096, "r_k0", "A x3 along K", 1e-6, 0);
	gh_check_program_max(progds, 200, 4096, "r_k0", "A x3 along K", 1e-6, 0);
	gh_check_program_max(progds, 200, 4096, "r_k0", "A x3 along K", 1e-6, DBG_EMU_WGMMA | DBG_EMU_WS);
}
END_TEST

/* The passes over text, the fusion report and the IR afterwards. */
static void
run_passes(const char *text, int64_t max_tokens, DbgFlags debug, char **report, char **ir)
{
	Diag d;
	Module *m;
	Report *r = report_new();
	PassOpts po;
	PassCtx pc = {0};
	size_t len;
	FILE *f;

	diag_init(&d, stderr);
	m = ir_parse("split", text, strlen(text), &d);
	ck_assert_ptr_nonnull(m);
	pass_default_opts(&po);
	po.debug = debug;
	po.max_tokens = max_tokens;
	pc.d = &d;
	pc.report = r;
	ck_assert_msg(pass_run(m, &po, &pc) == 0, "passes: %s", d.last);
	f = open_memstream(report, &len);
	report_print(f, r);
	fclose(f);
	*ir = ir_print_string(m, 0);
	report_free(r);
	ir_free_module(m);
}

static void
expect_kept(const char *text, int64_t max_tokens, DbgFlags debug, const char *why)
{
	char *rep, *ir;

	run_passes(text, max_tokens, debug, &rep, &ir);
	ck_assert_msg(strstr(rep, "kept an f32 GEMM") && strstr(rep, why), "report lacks '%s':\n%s", why, rep);
	ck_assert_msg(!strstr(ir, "concat"), "split anyway:\n%s", ir);
	free(rep);
	free(ir);
}

START_TEST(test_split_refused)
{
	char *rep, *ir;
	/* A computed in f32: the norm's output is f32, not a cast of bf16 */
	static const char f32_act[] =
		"weight $w : f32[64,256]\n"
		"graph @r(%x: bf16[T,256], %s: f32[T,1]) -> (logits: f32[T,64]) {\n"
		"	%a = cast %x, to=f32 : f32[T,256]\n"
		"	%h = mul %a, %s : f32[T,256]\n"
		"	%logits = matmul %h, $w, to=f32, trans_b=1 : f32[T,64]\n"
		"	ret %logits\n"
		"}\n";

	expect_kept(f32_act, 0, 0, "A is not provably bf16-exact");
	expect_kept(prog64, 16, 0, "decode range");
	run_passes(prog64, 16, DBG_NO_FRONT, &rep, &ir);	/* no front: split at decode too */
	ck_assert_msg(strstr(rep, "f32 GEMM %logits split"), "%s", rep);
	free(rep);
	free(ir);
	expect_kept(prog64, 0, DBG_SIMT_ROUTER, "--debug=simt-router");
	/* through a reshape and a widening chain: still bf16-exact, split */
	run_passes(prog8, 0, 0, &rep, &ir);
	ck_assert_msg(strstr(rep, "router GEMM %logits split"), "%s", rep);
	ck_assert_msg(strstr(ir, "axis=-1 : bf16[8,384]"), "%s", ir);
	free(rep);
	free(ir);
}
END_TEST

/* A weight with a tiny element (data, not synthetic) is left in f32. */
START_TEST(test_split_tiny_weight)
{
	Diag d;
	Module *m;
	Report *r = report_new();
	PassCtx pc = {0};
	char *rep;
	size_t len;
	FILE *f;

	diag_init(&d, stderr);
	m = ir_parse("split", prog64, strlen(prog64), &d);
	ck_assert_ptr_nonnull(m);
	Weight *w = ir_find_weight(m, "w");
	float *x = calloc(64 * 256, sizeof *x);
	for (int i = 0; i < 64 * 256; i++)
		x[i] = 0.01f * (float)(i % 97) - 0.3f;
	x[1000] = 1e-35f;	/* lo would be subnormal */
	w->data = x;
	w->size = 64 * 256 * sizeof *x;
	w->free_data = NULL;
	pc.d = &d;
	pc.report = r;
	ck_assert_int_eq(split_f32(m, &pc), 0);
	f = open_memstream(&rep, &len);
	report_print(f, r);
	fclose(f);
	ck_assert_msg(strstr(rep, "$w[1000]") && strstr(rep, "subnormal"), "%s", rep);
	free(rep);
	report_free(r);
	ir_free_module(m);
	free(x);
}
END_TEST

Suite *
split_suite(void)
{
	Suite *s = suite_create("split");
	TCase *c = tcase_create("split");

	tcase_set_timeout(c, 120);
	tcase_add_test(c, test_split3);
	tcase_add_test(c, test_rep_builders);
	tcase_add_test(c, test_rep_checks);
	tcase_add_test(c, test_split_programs);
	tcase_add_test(c, test_split_refused);
	tcase_add_test(c, test_split_tiny_weight);
	suite_add_tcase(s, c);
	return s;
}
