/*
 * check_cross.c — the two frontends agree: for every family that has an ONNX
 * fixture, the block the config frontend builds for decoder layer 1 of the
 * tiny checkpoint in tests/fixtures/hf/<family>/ and the ONNX export of the
 * same sub-block of the same checkpoint (tests/fixtures/cross/<family>/,
 * made by tests/fixtures/gen_cross.py) give the same output on the same
 * input (issue 4 item 6).
 *
 * Per family and data set (T = 7; dense families also T = 1: the MoE exports
 * are 8-slot TorchScript graphs that only run inputs reaching every expert):
 *
 *  - each block alone matches the references it has, as `moec test` would
 *    judge them: the config block (model dtype: bf16 for the bf16
 *    checkpoints) against hf/<family>/test_data_set_N/output_0.pb, the ONNX
 *    block (f32) against cross/<family>/test_data_set_N/output_0.pb;
 *  - the two agree on the hf fixture's input (bf16 for the config block, the
 *    same values as f32 for the ONNX block) within the config block's dtype
 *    tolerance (bf16: it rounds every intermediate, the ONNX block computes
 *    in f32 from the same bf16-rounded weights);
 *  - the config block with every weight promoted to f32 agrees with the
 *    ONNX block to f32 tolerances (no rounding left: the same semantics);
 *  - the comparison can fail: the output differs from the input x by far
 *    more than the tolerance, so a frontend that dropped the FFN would not pass.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

static const struct {
	const char *family;
	int nset;		/* test_data_sets the ONNX graph can run */
} cross[] = {
	{"mixtral", 1}, {"qwen2_moe", 1}, {"qwen3_moe", 1}, {"deepseek_v3", 1}, {"olmoe", 1},
	{"gpt_oss", 1}, {"llama", 2}, {"gpt2", 2}, {"bert", 2},
};
#define NCROSS ((int)(sizeof cross / sizeof cross[0]))

static char *
path_of(char *buf, size_t n, const char *kind, const char *family, const char *rest)
{
	snprintf(buf, n, "%s/tests/fixtures/%s/%s%s", MOEC_SOURCE_DIR, kind, family, rest);
	return buf;
}

static Module *
load(const char *path, int layer)
{
	FeOpts o;
	Diag d;
	Module *m;

	fe_default_opts(&o);
	o.layer = layer;
	diag_init(&d, stderr);
	m = fe_load(path, &o, &d);
	ck_assert_msg(m != NULL, "%s did not import (run python3 tests/fixtures/gen_cross.py?)",
		      path);
	ck_assert_int_eq(d.nerror, 0);
	ck_assert_int_eq(ir_verify(m, &d), 0);
	ck_assert_int_eq(ir_main_graph(m)->nparam, 1);
	ck_assert_int_eq(ir_main_graph(m)->nret, 1);
	return m;
}

static void
read_pb(const char *kind, const char *family, int set, const char *file, Tensor *t)
{
	char rest[128], path[700];
	Diag d;

	snprintf(rest, sizeof rest, "/test_data_set_%d/%s", set, file);
	path_of(path, sizeof path, kind, family, rest);
	diag_init(&d, stderr);
	ck_assert_msg(tensor_read(path, t, &d) == 0, "cannot read %s", path);
}

/* x as f32 (exact from bf16 or f32). */
static void
to_f32(const Tensor *x, Tensor *y)
{
	ck_assert_int_eq(tensor_alloc(y, DT_F32, x->rank, x->dim), 0);
	for (int64_t i = 0; i < tensor_numel(x); i++)
		dtype_store(DT_F32, y->data, (size_t)i, dtype_load(x->dt, x->data, (size_t)i));
}

/* Every weight and the input in f32, types re-inferred (check_config.c). */
void promote_f32(Module *m);

/* m's graph on x, which must already have the parameter's dtype (no
 * conversion here: the point is that both blocks see the same values);
 * the result in f32. */
static void
run(Module *m, const Tensor *x, Tensor *y, const char *what)
{
	Graph *g = ir_main_graph(m);
	Tensor out;
	EvalOpts eo = {0};
	Diag d;

	ck_assert_msg(g->param[0]->type.dt == x->dt, "%s: parameter is %s, input %s", what,
		      dtype_name(g->param[0]->type.dt), dtype_name(x->dt));
	diag_init(&d, stderr);
	ck_assert_msg(ir_eval(g, x, 1, &out, &eo, &d) == 0, "%s: ir_eval failed", what);
	ck_assert_int_eq(out.rank, x->rank);
	for (int i = 0; i < x->rank; i++)
		ck_assert_int_eq(out.dim[i], x->dim[i]);
	to_f32(&out, y);
	tensor_free(&out);
}

/* got against want with dtype dt's tolerances; the comparison in c. */
static int
close_as(const Tensor *got, const Tensor *want, DType dt, Compare *c)
{
	double atol, rtol, rel;

	tolerance_for(dt, &atol, &rtol, &rel);
	tensor_compare(got, want, atol, rtol, c);
	return tensor_close(c, dt, tensor_numel(want));
}

START_TEST(test_cross_config_and_onnx_agree)
{
	const char *fam = cross[_i].family;
	char hf[600], cx[600];
	Module *mc, *mo, *mf;
	DType dtc;
	Compare c;

	path_of(hf, sizeof hf, "hf", fam, "");
	path_of(cx, sizeof cx, "cross", fam, "");
	mc = load(hf, 1);	/* config.json + model.safetensors, layer 1 */
	mo = load(cx, -1);	/* model.onnx */
	mf = load(hf, 1);
	promote_f32(mf);
	dtc = ir_main_graph(mc)->param[0]->type.dt;
	ck_assert_msg(ir_main_graph(mo)->param[0]->type.dt == DT_F32, "%s: ONNX input not f32", fam);

	for (int set = 0; set < cross[_i].nset; set++) {
		Tensor x, x32, xcx, yhf, ycx, yc, yo, yf;
		char what[128];
		int ok;

		read_pb("hf", fam, set, "input_0.pb", &x);	/* model dtype */
		read_pb("hf", fam, set, "output_0.pb", &yhf);	/* f32 */
		read_pb("cross", fam, set, "input_0.pb", &xcx);	/* f32 */
		read_pb("cross", fam, set, "output_0.pb", &ycx);	/* f32 */
		ck_assert_int_eq(x.dt, dtc);
		to_f32(&x, &x32);

		/* the fixtures are in sync: the cross input is the hf input */
		ck_assert_int_eq(xcx.dt, DT_F32);
		ck_assert_int_eq(tensor_numel(&xcx), tensor_numel(&x32));
		ck_assert_msg(memcmp(xcx.data, x32.data, tensor_nbytes(&x32)) == 0,
			      "%s set %d: cross input differs from the hf input; regenerate", fam, set);

		snprintf(what, sizeof what, "%s set %d config (%s)", fam, set, dtype_name(dtc));
		run(mc, &x, &yc, what);
		snprintf(what, sizeof what, "%s set %d onnx (f32)", fam, set);
		run(mo, &x32, &yo, what);
		snprintf(what, sizeof what, "%s set %d config promoted to f32", fam, set);
		run(mf, &x32, &yf, what);

		/* each against its own reference */
		ok = close_as(&yc, &yhf, dtc, &c);
		ck_assert_msg(ok, "%s set %d: config block vs hf reference: rel_l2 %g, %lld off, max abs %g",
			      fam, set, c.rel_l2, (long long)c.nbad, c.max_abs);
		ok = close_as(&yo, &ycx, DT_F32, &c);
		ck_assert_msg(ok, "%s set %d: onnx block vs cross reference: rel_l2 %g, %lld off, max abs %g",
			      fam, set, c.rel_l2, (long long)c.nbad, c.max_abs);
		ok = close_as(&yf, &yhf, DT_F32, &c);
		ck_assert_msg(ok, "%s set %d: f32 config block vs hf reference: rel_l2 %g, max abs %g",
			      fam, set, c.rel_l2, c.max_abs);

		/* the two frontends, as imported: within the config block's dtype */
		ok = close_as(&yc, &yo, dtc, &c);
		fprintf(stderr, "cross: %-11s T=%lld  config %s vs onnx f32: rel_l2 %.2e max_abs %.2e "
			"(%lld beyond atol+rtol|y|)\n", fam, (long long)x.dim[0], dtype_name(dtc),
			c.rel_l2, c.max_abs, (long long)c.nbad);
		ck_assert_msg(ok, "%s set %d: config block (%s) vs onnx block: rel_l2 %g, %lld off, "
			      "max abs %g", fam, set, dtype_name(dtc), c.rel_l2, (long long)c.nbad,
			      c.max_abs);
		/* and without rounding: f32 tolerances */
		ok = close_as(&yf, &yo, DT_F32, &c);
		if (dtc != DT_F32)
			fprintf(stderr, "cross: %-11s T=%lld  config promoted to f32 vs onnx f32: "
				"rel_l2 %.2e max_abs %.2e\n", fam, (long long)x.dim[0], c.rel_l2,
				c.max_abs);
		ck_assert_msg(ok, "%s set %d: f32 config block vs onnx block: rel_l2 %g, %lld off, "
			      "max abs %g", fam, set, c.rel_l2, (long long)c.nbad, c.max_abs);

		/* the tolerance cannot hide the FFN: y is far from x */
		ck_assert_msg(!close_as(&x32, &yo, dtc, &c), "%s set %d: y is within tolerance of x",
			      fam, set);
		ck_assert_msg(c.rel_l2 > 10 * 2e-2, "%s set %d: |y - x| / |y| only %g", fam, set,
			      c.rel_l2);

		tensor_free(&x);
		tensor_free(&x32);
		tensor_free(&xcx);
		tensor_free(&yhf);
		tensor_free(&ycx);
		tensor_free(&yc);
		tensor_free(&yo);
		tensor_free(&yf);
	}
	ir_free_module(mc);
	ir_free_module(mo);
	ir_free_module(mf);
}
END_TEST

/* Every family with an ONNX fixture has a cross fixture (and nothing else). */
START_TEST(test_cross_covers_the_onnx_families)
{
	static const char *const onnx_fixture[] = {
		"mixtral_moe", "qwen2_moe", "qwen3_moe", "deepseek_v3_moe", "olmoe_moe",
		"gpt_oss_moe", "llama_mlp", "gpt2_mlp", "bert_ffn",
	};
	char path[600];

	ck_assert_int_eq(NCROSS, (int)(sizeof onnx_fixture / sizeof onnx_fixture[0]));
	for (int i = 0; i < NCROSS; i++) {
		ck_assert_msg(file_exists(path_of(path, sizeof path, "onnx", onnx_fixture[i],
						  "/model.onnx")), "%s", path);
		ck_assert_msg(file_exists(path_of(path, sizeof path, "cross", cross[i].family,
						  "/model.onnx")), "%s", path);
		ck_assert_msg(file_exists(path_of(path, sizeof path, "hf", cross[i].family,
						  "/config.json")), "%s", path);
	}
}
END_TEST

Suite *
cross_suite(void)
{
	Suite *s = suite_create("cross");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_cross_config_and_onnx_agree, 0, NCROSS);
	tcase_add_test(tc, test_cross_covers_the_onnx_families);
	suite_add_tcase(s, tc);
	return s;
}
