/*
 * check_ir.c — the IR core: dims and types, the builder, the printer and
 * parser (round trip, errors with locations), the verifier and shape
 * inference, synthetic weights.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static Module *
parse(const char *text, Diag *d)
{
	return ir_parse("t.ir", text, strlen(text), d);
}

/* Parse, verify, print; parse the print and print again: equal. */
static char *
roundtrip(const char *text)
{
	Diag d;
	Module *m, *m2;
	char *a, *b;

	diag_init(&d, stderr);
	m = parse(text, &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(ir_verify(m, &d), 0);
	a = ir_print_string(m, 0);
	m2 = ir_parse("again", a, strlen(a), &d);
	ck_assert_ptr_nonnull(m2);
	b = ir_print_string(m2, 0);
	ck_assert_str_eq(a, b);
	free(b);
	ir_free_module(m);
	ir_free_module(m2);
	return a;
}

START_TEST(test_dim_products_are_interned)
{
	Module *m = ir_new_module();
	Dim t = ir_dim_sym(m, "T"), b = ir_dim_sym(m, "batch");
	char buf[64];

	ck_assert_int_eq(ir_dim_mul(m, t, 2), ir_dim_mul(m, 2, t));
	ck_assert_int_eq(ir_dim_mul(m, t, b), ir_dim_mul(m, b, t));
	ck_assert_int_eq(ir_dim_add(m, t, t), ir_dim_mul(m, t, 2));
	ck_assert_int_eq(ir_dim_div(m, ir_dim_mul(m, t, 4), 2), ir_dim_mul(m, t, 2));
	ck_assert(ir_dim_has_unknown(m, ir_dim_div(m, t, 2)));
	ck_assert_int_eq(ir_dim_mul(m, 3, 4), 12);
	ir_dim_print(buf, sizeof buf, m, ir_dim_mul(m, ir_dim_mul(m, t, b), 8));
	ck_assert_str_eq(buf, "8*T*batch");
	ir_dim_print(buf, sizeof buf, m, ir_dim_unknown(m));
	ck_assert_str_eq(buf, "?");
	ck_assert(ir_dim_unknown(m) != ir_dim_unknown(m));	/* each ? is fresh */
	ir_free_module(m);
}
END_TEST

START_TEST(test_dim_eval_binds_atoms)
{
	Module *m = ir_new_module();
	Dim t = ir_dim_sym(m, "T"), e = ir_dim_mul(m, t, 3);
	int64_t vals[8] = {5, -1}, out;
	DimEnv env = {ir_natom(m), vals};

	ck_assert_int_eq(ir_dim_eval(m, e, &env, &out), 0);
	ck_assert_int_eq(out, 15);
	vals[0] = -1;
	ck_assert_int_eq(ir_dim_eval(m, e, &env, &out), -1);	/* unbound */
	ir_free_module(m);
}
END_TEST

START_TEST(test_builder_infers_types)
{
	Module *m = ir_new_module();
	Graph *g = ir_new_graph(m, "g", G_GRAPH);
	Dim d2[2] = {ir_dim_sym(m, "T"), 64}, w2[2] = {128, 64};
	Value *x = ir_add_param(g, "x", ir_type(DT_BF16, 2, d2));
	Weight *w = ir_add_weight(m, "w", ir_type(DT_BF16, 2, w2));
	Diag d;
	Builder b = {.g = g, .loc = LOC_NONE, .d = &d};
	char buf[64];

	diag_init(&d, stderr);
	ir_b_int(&b, "trans_b", 1);
	ir_b_str(&b, "to", "f32");
	Value *h = ir_b2(&b, OP_MATMUL, x, w->value);
	ck_assert_ptr_nonnull(h);
	ir_type_print(buf, sizeof buf, m, &h->type);
	ck_assert_str_eq(buf, "f32[T,128]");
	Value *s = ir_b1(&b, OP_SILU, h);
	ir_set_results(g, &s, NULL, 1);
	ck_assert_int_eq(ir_verify(m, &d), 0);
	/* a bad build fails with a diagnostic and no node */
	diag_init(&d, NULL);
	ck_assert_ptr_null(ir_b2(&b, OP_MATMUL, x, w->value));	/* 64 vs 128 */
	ck_assert(b.err);
	ck_assert(strstr(d.last, "inner dims differ") != NULL);
	ck_assert_int_eq(g->nnode, 2);
	ir_free_module(m);
}
END_TEST

START_TEST(test_names_are_sanitised_and_unique)
{
	Module *m = ir_new_module();
	Graph *g = ir_new_graph(m, "g", G_GRAPH);
	Value *a = ir_add_param(g, "/layers.0/mlp/MatMul_output_0", ir_scalar(DT_F32));
	Value *b = ir_add_param(g, "/layers.0/mlp/MatMul_output_0", ir_scalar(DT_F32));
	Value *c = ir_add_param(g, "onnx::Gemm_7", ir_scalar(DT_F32));

	ck_assert_str_eq(a->name, "layers.0.mlp.MatMul_output_0");
	ck_assert_str_ne(a->name, b->name);
	ck_assert_str_eq(c->name, "onnx__Gemm_7");
	ir_free_module(m);
}
END_TEST

START_TEST(test_roundtrip_attrs_and_floats)
{
	char *s = roundtrip(
		"graph @g(%x: f32[T,4]) -> (y: f32[T,4], \"3\": f32[T,4]) {\n"
		"\t%c = const value=[0.1, 1e-30, -2.5, 3.4028234663852886e+38] : f32[4]\n"
		"\t%y = clip %x, max=inf, min=-inf : f32[T,4]\n"
		"\t%z = leaky_relu %x, alpha=0.30000000000000004, tag=\"a b\\\"c\" : f32[T,4]\n"
		"\tret %y, %z\n}\n");

	ck_assert(strstr(s, "0.30000000000000004") != NULL);
	ck_assert(strstr(s, "tag=\"a b\\\"c\"") != NULL);
	ck_assert(strstr(s, "\"3\": f32[T,4]") != NULL);
	ck_assert(strstr(s, "max=inf, min=-inf") != NULL);
	free(s);
}
END_TEST

START_TEST(test_roundtrip_symbolic_and_unknown_dims)
{
	char *s = roundtrip(
		"graph @g(%x: f32[batch*seq,8], %b: bool[4]) -> (y: i64[1,?]) {\n"
		"\t%r = reshape %x, shape=[2*batch*seq, 4] : f32[2*batch*seq,4]\n"
		"\t%y = nonzero %b : i64[1,?]\n"
		"\tret %y\n}\n");

	ck_assert(strstr(s, "shape=[2*batch*seq, 4]") != NULL);
	free(s);
}
END_TEST

START_TEST(test_user_names_like_temporaries_parse)
{
	/* auto-named temporaries must not block a later %tN */
	char *s = roundtrip("graph @g(%x: f32[4]) -> (y: f32[4]) {\n\t%h = neg %x : f32[4]\n"
			    "\t%t1 = neg %h : f32[4]\n\t%t0 = neg %t1 : f32[4]\n\tret %t0\n}\n");
	free(s);
}
END_TEST

START_TEST(test_roundtrip_loc)
{
	Diag d;
	const char *text = "graph @g(%x: f32[4]) -> (y: f32[4]) {\n"
			   "\t%y = relu %x : f32[4] loc(\"m.onnx\" 3 \"/a/Relu\" \"Relu\")\n"
			   "\tret %y\n}\n";
	Module *m;
	char *a;

	diag_init(&d, stderr);
	m = parse(text, &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(ir_main_graph(m)->first->loc.node, 3);
	a = ir_print_string(m, IR_PRINT_LOC);
	ck_assert(strstr(a, "loc(\"m.onnx\" 3 \"/a/Relu\" \"Relu\")") != NULL);
	free(a);
	a = ir_print_string(m, 0);
	ck_assert(strstr(a, "loc(") == NULL);
	free(a);
	ir_free_module(m);
}
END_TEST

static void
expect_error(const char *text, const char *msg)
{
	Diag d;
	Module *m;

	diag_init(&d, NULL);
	m = parse(text, &d);
	if (m) {
		ck_assert_int_ne(ir_verify(m, &d), 0);
		ir_free_module(m);
	}
	ck_assert_msg(strstr(d.last, msg) != NULL, "got '%s', wanted '%s'", d.last, msg);
}

START_TEST(test_parse_errors_have_locations)
{
	expect_error("graph @g() -> () {\n\t%y = bogus : f32[1]\n\tret\n}\n",
		     "t.ir:2:7: unknown op 'bogus'");
	expect_error("weight $w : f32[2]\nweight $w : f32[2]\n", "t.ir:2:8: weight $w is declared twice");
	expect_error("graph @g() -> () {\n\tret\n}\ngraph @g() -> () {\n\tret\n}\n",
		     "t.ir:4:7: @g is defined twice");
	expect_error("graph @g(%x: f32[4]) -> (y: f32[5]) {\n\tret %x\n}\n",
		     "declared with another type");
	expect_error("graph @g(%x: f32[4]) -> (y: f32[4]) {\n\tret %x\n\t%z = relu %x : f32[4]\n}\n",
		     "statement after ret");
	expect_error("graph @g(%x: f32[T]) -> (y: f32[T]) {\n\t%y = reshape %x, shape=[-1, T] : f32[T]\n\tret %y\n}\n",
		     "negative value in a list of dimensions");
	expect_error("graph @g(%x: f32[4]) -> (y: f32[4]) {\n\t%y = relu %x, a=1, a=2 : f32[4]\n\tret %y\n}\n",
		     "attribute 'a' given twice");
	expect_error("graph @g(%x: f32[4]) -> (y: f32[4]) {\n\t%y = relu _ : f32[4]\n\tret %y\n}\n",
		     "relu: operand 0 is required");
	expect_error("graph @g(%x: f32[4]) -> (y: f32[4]) {\n\t%y = relu %x : f32[4]\n\tret %y\n}\n\"open",
		     "unterminated string");
	expect_error("graph @g(%x: f32[4]) -> (y: f32[4]) {\n\t%y = relu %x : f32[99999999999999999999]\n",
		     "integer out of range");
}
END_TEST

START_TEST(test_parse_rejects_nul_and_garbage)
{
	Diag d;
	const char bytes[] = "graph @g\0 oops";
	Module *m;

	diag_init(&d, NULL);
	m = ir_parse("t.ir", bytes, sizeof bytes - 1, &d);
	ck_assert_ptr_null(m);
	ck_assert(strstr(d.last, "NUL byte") != NULL);
	/* every prefix of a valid module either parses or fails cleanly */
	const char *text = "weight $w : f32[4,4]\n\ngraph @g(%x: f32[T,4]) -> (y: f32[T,4]) {\n"
			   "\t%y = matmul %x, $w, trans_b=1 : f32[T,4]\n\tret %y\n}\n";
	for (size_t n = 0; n <= strlen(text); n++) {
		m = ir_parse("t.ir", text, n, &d);
		if (m) {
			ir_verify(m, &d);
			ir_free_module(m);
		}
	}
}
END_TEST

START_TEST(test_verifier_catches_use_before_def_and_broken_calls)
{
	Diag d;
	Module *m;
	Graph *g;
	Node *a, *b;

	diag_init(&d, NULL);
	m = parse("graph @g(%x: f32[4]) -> (y: f32[4]) {\n\t%a = relu %x : f32[4]\n"
		  "\t%b = exp %a : f32[4]\n\tret %b\n}\n", &d);
	ck_assert_ptr_nonnull(m);
	g = ir_main_graph(m);
	a = g->first;
	b = a->next;
	ir_erase(g, a);		/* move %a after its user */
	ir_insert(g, NULL, a);
	ck_assert_int_ne(ir_verify(m, &d), 0);
	ck_assert(strstr(d.last, "not defined before use") != NULL ||
		  strstr(d.last, "returns a value") != NULL);
	(void)b;
	ir_free_module(m);

	m = parse("graph @g(%x: f32[4]) -> (y: f32[4]) {\n\t%y = call @k(%x) : f32[4]\n\tret %y\n}\n"
		  "kernel @k(%a: f32[4], %b: f32[4]) -> (r: f32[4]) {\n\tret %a\n}\n", &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_ne(ir_verify(m, &d), 0);
	ck_assert(strstr(d.last, "call of @k with 1 operands") != NULL);
	ir_free_module(m);
}
END_TEST

/* One shape rule per op: every op in ops.def has one. */
int ir_infer_has_rule(Op op);

START_TEST(test_every_op_has_a_shape_rule)
{
	for (int op = 0; op < NOP; op++)
		ck_assert_msg(ir_infer_has_rule((Op)op), "no shape rule for %s", ir_opname((Op)op));
}
END_TEST

static const char *
infer_one(const char *stmt_and_types)
{
	static char buf[600];
	Diag d;
	char text[1024];
	Module *m;

	snprintf(text, sizeof text, "graph @g(%%x: f32[T,8], %%i: i64[3,2], %%w: f32[E,2*I,8], "
				    "%%l: f32[T,E]) -> () {\n%s\n\tret\n}\n", stmt_and_types);
	diag_init(&d, NULL);
	m = parse(text, &d);
	if (!m)
		return "parse error";
	Graph *g = ir_main_graph(m);
	if (ir_infer(g, g->last, &d) != 0)
		snprintf(buf, sizeof buf, "error: %s", d.last);
	else
		ir_type_print(buf, sizeof buf, m, &g->last->out[0]->type);
	ir_free_module(m);
	return buf;
}

START_TEST(test_shape_rules)
{
	ck_assert_str_eq(infer_one("\t%y = concat %x, %x, %x, axis=0 : f32[1]"), "f32[3*T,8]");
	ck_assert_str_eq(infer_one("\t%y = reshape %x, shape=[T, 2, 4] : f32[1]"), "f32[T,2,4]");
	ck_assert_str_eq(infer_one("\t%y = gather %x, %i, axis=1 : f32[1]"), "f32[T,3,2]");
	ck_assert_str_eq(infer_one("\t%y = transpose %x : f32[1]"), "f32[8,T]");
	ck_assert_str_eq(infer_one("\t%y = swiglu %x : f32[1]"), "f32[T,4]");
	ck_assert_str_eq(infer_one("\t%y = slice %x, axes=[1], ends=[7], starts=[1], steps=[2] : f32[1]"),
			 "f32[T,3]");
	ck_assert_str_eq(infer_one("\t%y = slice %x, axes=[0], ends=[9223372036854775807], starts=[0] : f32[1]"),
			 "f32[T,8]");
	ck_assert_str_eq(infer_one("\t%y = reduce_mean %x, axes=[-1], keepdims=1 : f32[1]"), "f32[T,1]");
	ck_assert_str_eq(infer_one("\t%y = onehot %i, depth=5, axis=1 : f32[1]"), "f32[3,5,2]");
	ck_assert_str_eq(infer_one("\t%y = tile %x, repeats=[2, 1] : f32[1]"), "f32[2*T,8]");
	ck_assert_str_eq(infer_one("\t%y, %z = topk %x, k=3 : f32[1], i64[1]"), "f32[T,3]");
	ck_assert_str_eq(infer_one("\t%y = moe %x, %l, _, %w, %w, k=2 : f32[1]"), "f32[T,8]");
	ck_assert_str_eq(infer_one("\t%y = moe %x, %l, _, %w, %x, k=2 : f32[1]"),
			 "error: t.ir:2:7: moe: wants x[T,H], w_gate_up[E,2I,H], w_down[E,H,I]");
	ck_assert(strstr(infer_one("\t%y = reshape %x, shape=[7, 9] : f32[1]"), "error") == NULL);
	ck_assert(strstr(infer_one("\t%y = add %x, %i : f32[1]"), "different types") != NULL);
	ck_assert(strstr(infer_one("\t%y = gather_nd %x, %i, batch_dims=0 : f32[1]"), "error") == NULL);
}
END_TEST

START_TEST(test_synthetic_weights_are_reproducible)
{
	Diag d;
	Module *m;
	Weight *w;
	const uint16_t *p;
	uint16_t first[4];

	diag_init(&d, stderr);
	m = parse("weight $w : bf16[16,64] mean=1.0 scale=0.5 seed=9\n", &d);
	ck_assert_ptr_nonnull(m);
	w = ir_find_weight(m, "w");
	p = ir_weight_data(w, &d);
	ck_assert_ptr_nonnull(p);
	memcpy(first, p, sizeof first);
	for (int i = 0; i < 16 * 64; i++) {
		float v = bf16_to_f32(p[i]);
		ck_assert(v >= 0.5f && v <= 1.5f);
	}
	/* the formula, not the cache: same seed, name and index, same value */
	float v0 = ir_synth_value(9, hash_str("w"), 0, 1.0f, 0.5f);
	ck_assert_uint_eq(f32_to_bf16(v0), first[0]);
	ck_assert(ir_synth_value(9, hash_str("w"), 1, 1.0f, 0.5f) != v0);
	ck_assert(ir_synth_value(10, hash_str("w"), 0, 1.0f, 0.5f) != v0);
	ck_assert_double_eq_tol(ir_weight_scale(w), 0.5, 1e-12);
	ir_free_module(m);
}
END_TEST

/* Attributes are decoded by one getter per family, with one default each. */
START_TEST(test_attribute_getters_have_one_default)
{
	Diag d;
	Module *m;
	IrRouteAttrs r;
	IrEwAttrs a;
	char why[64];
	Node n;

	diag_init(&d, stderr);
	m = parse("graph @g(%l: f32[T,8]) -> (w: f32[T,2], i: i32[T,2]) {\n"
		  "\t%w, %i = route %l, k=2, n_group=4 : f32[T,2], i32[T,2]\n"
		  "\tret %w, %i\n}\n", &d);
	ck_assert_ptr_nonnull(m);
	ir_route_attrs(ir_main_graph(m)->first, &r);
	ck_assert_int_eq(r.router, IR_ROUTER_SOFTMAX);
	ck_assert_int_eq(r.k, 2);
	ck_assert_int_eq(r.renorm, 0);
	ck_assert(r.scale == 1.0);
	ck_assert_int_eq(r.n_group, 4);
	ck_assert_int_eq(r.topk_group, 4);	/* n_group by default */
	ck_assert_int_eq(r.group_score, IR_GROUP_MAX);
	ir_free_module(m);

	/* k is required: absent, it is -1, and the shape rule refuses the node */
	m = parse("graph @g(%l: f32[T,8]) -> (w: f32[T,2], i: i32[T,2]) {\n"
		  "\t%w, %i = route %l, router=sigmoid : f32[T,2], i32[T,2]\n"
		  "\tret %w, %i\n}\n", &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_ne(ir_infer(ir_main_graph(m), ir_main_graph(m)->first, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "k must be in 1..E"));
	ir_free_module(m);

	memset(&n, 0, sizeof n);
	n.op = OP_HARD_SIGMOID;
	ck_assert_int_eq(ir_ew_attrs(&n, &a, why, sizeof why), 0);
	ck_assert(a.alpha == 0.2 && a.beta == 0.5 && a.lo == -INFINITY && a.hi == INFINITY);
	n.op = OP_LEAKY_RELU;
	ck_assert_int_eq(ir_ew_attrs(&n, &a, why, sizeof why), 0);
	ck_assert(a.alpha == 0.01);

	/* swiglu's act (ir_glu_attrs): oai's limit defaults to 7, silu's to none;
	 * a limit on gelu, a limit <= 0 and an unknown act are refused; silu's
	 * clamp comes after the activation (ir_glu_scalar) */
	{
		static const struct { const char *attrs; int ok; double limit; } gc[] = {
			{"act=oai", 1, 7.0}, {"act=silu", 1, INFINITY}, {"act=silu, limit=2.0", 1, 2.0},
			{"act=gelu, limit=2.0", 0, 0}, {"act=silu, limit=0.0", 0, 0}, {"act=swish", 0, 0},
		};
		for (size_t i = 0; i < NELEM(gc); i++) {
			char text[256];
			IrGluAttrs ga;
			snprintf(text, sizeof text, "graph @g(%%x: f32[T,8]) -> (y: f32[T,4]) {\n"
				 "\t%%y = swiglu %%x, %s : f32[T,4]\n\tret %%y\n}\n", gc[i].attrs);
			m = parse(text, &d);
			ck_assert_ptr_nonnull(m);
			ck_assert_int_eq(ir_glu_attrs(ir_main_graph(m)->first, "layout", &ga, why, sizeof why),
					 gc[i].ok ? 0 : -1);
			if (gc[i].ok)
				ck_assert_msg(ga.limit == gc[i].limit, "%s: %g", gc[i].attrs, ga.limit);
			if (i == 2) {	/* min(silu(9), 2) * clamp(-9, -2, 2); inside the limit plain */
				ck_assert(fabs(ir_glu_scalar(&ga, 9, -9) + 4) < 1e-12);
				ck_assert(fabs(ir_glu_scalar(&ga, 1, 1.5) - 1.5 / (1 + exp(-1.0))) < 1e-12);
			}
			ir_free_module(m);
		}
		ck_assert_ptr_nonnull(strstr(why, "act must be silu, gelu, oai or relu, not swish"));
	}

	/* topk: k required (-2 absent, refused by the shape rule; -1 is the whole axis), axis -1, largest 1 */
	IrTopkAttrs t;
	n.op = OP_TOPK;
	ir_topk_attrs(&n, &t);
	ck_assert(t.k == -2 && t.axis == -1 && t.largest == 1);
	m = parse("graph @g(%x: f32[T,8]) -> (v: f32[T,2], i: i64[T,2]) {\n"
		  "\t%v, %i = topk %x, largest=0 : f32[T,2], i64[T,2]\n"
		  "\tret %v, %i\n}\n", &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_ne(ir_infer(ir_main_graph(m), ir_main_graph(m)->first, &d), 0);
	ck_assert_ptr_nonnull(strstr(d.last, "topk: needs k >= 0"));
	ir_free_module(m);
	/* quantize/dequantize: axis 1, no blocks; the scale's layout from the dims */
	IrQuantAttrs q;
	n.op = OP_DEQUANTIZE;
	n.nattr = 0;
	ck_assert_int_eq(ir_quant_attrs(&n, 2, (int64_t[]){4, 6}, 0, NULL, &q, why, sizeof why), 0);
	ck_assert(q.layout == IR_QUANT_TENSOR && q.axis == 1 && q.block_size == 0);
	ck_assert_int_eq(ir_quant_attrs(&n, 2, (int64_t[]){4, 6}, 2, (int64_t[]){1, 1}, &q, why, sizeof why), 0);
	ck_assert(q.layout == IR_QUANT_TENSOR);
	ck_assert_int_eq(ir_quant_attrs(&n, 2, (int64_t[]){4, 6}, 1, (int64_t[]){6}, &q, why, sizeof why), 0);
	ck_assert(q.layout == IR_QUANT_AXIS && q.axis == 1);
	ck_assert_int_eq(ir_quant_attrs(&n, 2, (int64_t[]){4, 6}, 1, (int64_t[]){4}, &q, why, sizeof why), -1);
	ck_assert_str_eq(why, "the scale must be a scalar, 1-D along axis 1, or blocked");
	Attr bs = {.key = "block_size", .kind = A_INT, .u.i = 4};
	n.attr = &bs;
	n.nattr = 1;
	ck_assert_int_eq(ir_quant_attrs(&n, 2, (int64_t[]){4, 6}, 2, (int64_t[]){4, 2}, &q, why, sizeof why), 0);
	ck_assert(q.layout == IR_QUANT_BLOCK && q.block_size == 4);
	ck_assert_int_eq(ir_quant_attrs(&n, 2, (int64_t[]){4, 6}, 2, (int64_t[]){4, 1}, &q, why, sizeof why), -1);
	ck_assert_str_eq(why, "scale dim 1 is 1, blocks need 2");
	n.attr = NULL;
	n.nattr = 0;
	/* kernel templates: one name table, unknown names apart from none */
	m = parse("graph @g(%x: f32[4]) -> (y: f32[4]) {\n\t%y = call @k(%x) : f32[4]\n\tret %y\n}\n"
		  "kernel @k(%a: f32[4]) -> (r: f32[4]) template=row_reduce {\n"
		  "\t%r = neg %a : f32[4]\n\tret %r\n}\n", &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(ir_kernel_template(m->graph[1]), IR_TMPL_ROW_REDUCE);
	ck_assert_int_eq(ir_kernel_template(m->graph[0]), IR_TMPL_NONE);
	ir_set_kernel_template(m->graph[0], IR_TMPL_PERMUTE);
	ck_assert_str_eq(ir_graph_str(m->graph[0], "template", ""), "permute");
	ir_graph_set_str(m->graph[0], "template", "gemv");
	ck_assert_int_eq(ir_kernel_template(m->graph[0]), IR_TMPL_UNKNOWN);
	ir_free_module(m);
}
END_TEST

Suite *
ir_suite(void)
{
	Suite *s = suite_create("ir");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_dim_products_are_interned);
	tcase_add_test(tc, test_dim_eval_binds_atoms);
	tcase_add_test(tc, test_builder_infers_types);
	tcase_add_test(tc, test_names_are_sanitised_and_unique);
	tcase_add_test(tc, test_roundtrip_attrs_and_floats);
	tcase_add_test(tc, test_roundtrip_symbolic_and_unknown_dims);
	tcase_add_test(tc, test_roundtrip_loc);
	tcase_add_test(tc, test_user_names_like_temporaries_parse);
	tcase_add_test(tc, test_parse_errors_have_locations);
	tcase_add_test(tc, test_parse_rejects_nul_and_garbage);
	tcase_add_test(tc, test_verifier_catches_use_before_def_and_broken_calls);
	tcase_add_test(tc, test_every_op_has_a_shape_rule);
	tcase_add_test(tc, test_attribute_getters_have_one_default);
	tcase_add_test(tc, test_shape_rules);
	tcase_add_test(tc, test_synthetic_weights_are_reproducible);
	suite_add_tcase(s, tc);
	return s;
}
