/*
 * check_passes.c — the pass manager and the passes' shared machinery:
 * running by name, unknown names, dumps, the verifier after a pass,
 * --check-eval catching a wrong rewrite (test-break, this file's own pass),
 * outlining a region into a kernel,
 * and the fusion report.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static Module *
parse(const char *text)
{
	Diag d;
	Module *m;

	diag_init(&d, stderr);
	m = ir_parse("t.ir", text, strlen(text), &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(ir_verify(m, &d), 0);
	return m;
}

static const char chain[] =
	"graph @g(%x: f32[T,4], %y: f32[T,4]) -> (z: f32[T,4]) {\n"
	"\t%a = add %x, %y : f32[T,4]\n"
	"\t%b = add %x, %y : f32[T,4]\n"
	"\t%dead = exp %x : f32[T,4]\n"
	"\t%z = mul %a, %b : f32[T,4]\n"
	"\tret %z\n}\n";

/*
 * test-break: a deliberately wrong rewrite, for testing that --check-eval
 * catches a pass that changes what the graph computes.  This program's own
 * (pass_register_test): moec does not have it.
 *
 *	%y = add %a, %b        =>        %y = sub %a, %b
 */
static int
test_break(Module *m, PassCtx *c)
{
	Graph *g = ir_main_graph(m);

	for (Node *n = g ? g->first : NULL; n; n = n->next)
		if (n->op == OP_ADD) {
			n->op = OP_SUB;
			return 1;
		}
	return 0;
}

static int
run(Module *m, const char *pipeline, int check, Diag *d)
{
	PassOpts o;
	PassCtx c = {.d = d};

	ck_assert_int_eq(pass_register_test("test-break", "add -> sub, on purpose", test_break), 0);
	pass_default_opts(&o);
	o.pipeline = pipeline;
	o.verify_each = 1;
	o.check_eval = check;
	return pass_run(m, &o, &c);
}

START_TEST(test_passes_run_by_name)
{
	Module *m = parse(chain);
	Diag d;

	diag_init(&d, stderr);
	ck_assert_int_eq(run(m, "cse,dce", 1, &d), 0);
	ck_assert_int_eq(ir_main_graph(m)->nnode, 2);	/* one add, the mul */
	ir_free_module(m);
}
END_TEST

START_TEST(test_unknown_passes_are_all_reported)
{
	Module *m = parse(chain);
	Diag d;

	diag_init(&d, NULL);
	ck_assert_int_lt(run(m, "cse,nope,dce,bogus", 0, &d), 0);
	ck_assert_int_eq(d.nerror, 2);
	ck_assert(strstr(d.last, "unknown pass 'bogus'") != NULL);
	ck_assert_int_eq(ir_main_graph(m)->nnode, 4);	/* nothing ran */
	ir_free_module(m);
}
END_TEST

START_TEST(test_check_eval_names_the_wrong_pass)
{
	Module *m = parse(chain);
	Diag d;

	diag_init(&d, NULL);
	ck_assert_int_eq(run(m, "cse,test-break,dce", 1, &d), 1);
	ck_assert(strstr(d.last, "pass 'test-break' changed the result") != NULL);
	ir_free_module(m);
	/* the result that differs is named */
	m = parse("graph @g(%a: f32[T,4], %b: f32[T,4]) -> (y: f32[T,4]) {\n"
		  "\t%y = add %a, %b : f32[T,4]\n"
		  "\tret %y\n}\n");
	ck_assert_int_eq(run(m, "dce,test-break", 1, &d), 1);
	ck_assert_msg(strstr(d.last, "--check-eval: pass 'test-break' changed the result: result 'y' differs"),
		      "%s", d.last);
	ir_free_module(m);
}
END_TEST

/* --check-eval compares routing decisions before the outputs: a rewrite that
 * changes the router's logits (here the selection shift turns from + to -)
 * is named with the tokens whose experts changed and the reference's margin. */
START_TEST(test_check_eval_names_a_routing_change)
{
	Module *m = parse("weight $shift : f32[4]\n\n"
			  "graph @g(%l: f32[T,4]) -> (w: f32[T,2], ids: i32[T,2]) {\n"
			  "\t%s = add %l, $shift : f32[T,4]\n"
			  "\t%w, %ids = route %s, k=2, renorm=1, router=softmax : f32[T,2], i32[T,2]\n"
			  "\tret %w, %ids\n}\n");
	Diag d;

	diag_init(&d, NULL);
	ck_assert_int_eq(run(m, "dce,test-break", 1, &d), 1);
	ck_assert_msg(strstr(d.last, "pass 'test-break' changed the result: routing changed: token ") &&
		      strstr(d.last, ", logit gap ") && strstr(d.last, "(beyond a near tie)"), "%s", d.last);
	ir_free_module(m);
}
END_TEST

START_TEST(test_default_pipeline_names_real_passes)
{
	Module *m = parse(chain);
	Diag d;

	diag_init(&d, stderr);
	ck_assert_int_eq(run(m, NULL, 1, &d), 0);	/* NULL: the default pipeline */
	ck_assert_ptr_nonnull(strstr(pass_default_pipeline(), "fuse-gemm"));
	ir_free_module(m);
}
END_TEST

START_TEST(test_outline_keeps_values_and_names)
{
	Module *m = parse(chain);
	Graph *g = ir_main_graph(m);
	Node *set[2];
	Value *z = g->ret[0];
	Diag d;

	set[0] = g->first->next;	/* %b */
	set[1] = g->last;		/* %z = mul %a, %b */
	Node *call = pass_outline(g, set, 2, IR_TMPL_ELEMENTWISE);
	ck_assert_ptr_nonnull(call);
	ck_assert_ptr_eq(call->out[0], z);	/* the result keeps its Value */
	ck_assert_str_eq(z->name, "z");
	ck_assert_int_eq(call->nin, 3);		/* %x, %y, %a */
	ck_assert_str_eq(ir_graph_str(call->callee, "template", ""), "elementwise");
	diag_init(&d, stderr);
	ck_assert_int_eq(ir_verify(m, &d), 0);
	ir_free_module(m);
}
END_TEST

START_TEST(test_outline_refuses_a_region_that_is_not_convex)
{
	Module *m = parse("graph @g(%x: f32[4]) -> (z: f32[4]) {\n"
			  "\t%a = exp %x : f32[4]\n"
			  "\t%b = neg %a : f32[4]\n"
			  "\t%z = add %a, %b : f32[4]\n"
			  "\tret %z\n}\n");
	Graph *g = ir_main_graph(m);
	Node *set[2] = {g->first, g->last};	/* %a and %z, not %b between them */

	ck_assert_ptr_null(pass_outline(g, set, 2, IR_TMPL_NONE));
	ck_assert_int_eq(g->nnode, 3);
	ir_free_module(m);
}
END_TEST

START_TEST(test_report_sections)
{
	Report *r = report_new();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	report_skip(r, "bias add not fused into matmul %%h: %%h has %d users", 2);
	report_fused(r, "g.k0", "gemm: GEMM with $w");
	report_note(r, "moe %%y recognised");
	report_print(f, r);
	fclose(f);
	ck_assert_int_eq(report_count(r), 3);
	char *a = strstr(buf, "# rewrites"), *b = strstr(buf, "# kernels"), *c = strstr(buf, "# not fused");
	ck_assert(a && b && c && a < b && b < c);
	ck_assert(strstr(buf, "kernel @g.k0: gemm: GEMM with $w") != NULL);
	ck_assert(strstr(buf, "%h has 2 users") != NULL);
	free(buf);
	report_free(r);
	report_skip(NULL, "ignored");	/* no report: nothing recorded, no crash */
}
END_TEST

Suite *
passes_suite(void)
{
	Suite *s = suite_create("passes");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_passes_run_by_name);
	tcase_add_test(tc, test_unknown_passes_are_all_reported);
	tcase_add_test(tc, test_check_eval_names_the_wrong_pass);
	tcase_add_test(tc, test_check_eval_names_a_routing_change);
	tcase_add_test(tc, test_default_pipeline_names_real_passes);
	tcase_add_test(tc, test_outline_keeps_values_and_names);
	tcase_add_test(tc, test_outline_refuses_a_region_that_is_not_convex);
	tcase_add_test(tc, test_report_sections);
	suite_add_tcase(s, tc);
	return s;
}
