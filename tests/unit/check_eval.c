/*
 * check_eval.c — the reference interpreter against hand-computed values:
 * every op in ops.def, broadcasting, negative axes, symbolic dims bound
 * from the inputs, data-dependent shapes, low-precision types read exactly
 * and rounded on store, diagnostics without crashes, and the moe op against
 * plain loops written here and against its route/permute/grouped_matmul
 * decomposition.  Tolerances are stated per check (0 means bit-exact).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int ir_eval_has_fn(Op op);
int ir_infer_has_rule(Op op);

/* --- harness ------------------------------------------------------------- */

#define DIM(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define VAL(...) (double[]){__VA_ARGS__}
#define SCALAR 0, (int64_t[]){0}

static Tensor
ten(DType dt, int rank, const int64_t *dim, const double *v)
{
	Tensor t;

	ck_assert_int_eq(tensor_alloc(&t, dt, rank, dim), 0);
	for (int64_t i = 0; i < tensor_numel(&t); i++) {
		if (dtype_is_float(dt))
			dtype_store(dt, t.data, (size_t)i, v[i]);
		else
			dtype_store_int(dt, t.data, (size_t)i, (int64_t)v[i]);
	}
	return t;
}

static Tensor
zeros(DType dt, int rank, const int64_t *dim)
{
	Tensor t;

	ck_assert_int_eq(tensor_alloc(&t, dt, rank, dim), 0);
	return t;
}

typedef struct {
	Module *m;
	Tensor out[16];
	int nout, rc;
	Diag d;
	char *log;
	size_t loglen;
	FILE *f;
} Run;

/* Parse text, optionally verify it, and evaluate its main graph. */
static void
eval_text(Run *r, const char *text, const Tensor *in, int nin, const EvalOpts *o, int verify)
{
	Graph *g;

	memset(r, 0, sizeof *r);
	r->f = open_memstream(&r->log, &r->loglen);
	diag_init(&r->d, r->f);
	r->m = ir_parse("t.ir", text, strlen(text), &r->d);
	fflush(r->f);
	ck_assert_msg(r->m != NULL, "parse failed: %s", r->log);
	if (verify) {
		int rc = ir_verify(r->m, &r->d);
		fflush(r->f);
		ck_assert_msg(rc == 0, "verify failed: %s", r->log);
	}
	g = ir_main_graph(r->m);
	ck_assert_int_le(g->nret, 16);
	r->nout = g->nret;
	r->rc = ir_eval(g, in, nin, r->out, o, &r->d);
	fflush(r->f);
}

static void
ok(Run *r, const char *text, const Tensor *in, int nin)
{
	eval_text(r, text, in, nin, NULL, 1);
	ck_assert_msg(r->rc == 0, "eval failed: %s", r->log);
}

/* Evaluation must fail with a message containing want. */
static void
fails(const char *text, const Tensor *in, int nin, const EvalOpts *o, const char *want)
{
	Run r;

	eval_text(&r, text, in, nin, o, 0);
	ck_assert_msg(r.rc == -1, "eval should have failed with '%s'", want);
	ck_assert_msg(strstr(r.log, want) != NULL, "wanted '%s' in: %s", want, r.log);
	for (int i = 0; i < r.nout; i++)
		ck_assert_ptr_null(r.out[i].data);
	ir_free_module(r.m);
	fclose(r.f);
	free(r.log);
}

static void
done(Run *r, Tensor *in, int nin)
{
	for (int i = 0; i < r->nout; i++)
		tensor_free(&r->out[i]);
	for (int i = 0; i < nin; i++)
		tensor_free(&in[i]);
	ir_free_module(r->m);
	fclose(r->f);
	free(r->log);
}

/* want[i] within tol * max(1, |want[i]|); NaN must match NaN. */
static void
expect(const Tensor *t, DType dt, int rank, const int64_t *dim, const double *want, double tol)
{
	char buf[128];

	tensor_shape_string(buf, sizeof buf, t);
	ck_assert_msg(t->dt == dt && t->rank == rank, "got %s, want %s rank %d", buf,
		      dtype_name(dt), rank);
	for (int i = 0; i < rank; i++)
		ck_assert_msg(t->dim[i] == dim[i], "got %s: dim %d should be %lld", buf, i,
			      (long long)dim[i]);
	for (int64_t i = 0; i < tensor_numel(t); i++) {
		double g = dtype_load(t->dt, t->data, (size_t)i);
		if (isnan(want[i]))
			ck_assert_msg(isnan(g), "%s element %lld: got %.9g, want nan", buf,
				      (long long)i, g);
		else
			ck_assert_msg(fabs(g - want[i]) <= tol * fmax(1, fabs(want[i])) ||
					      g == want[i],
				      "%s element %lld: got %.9g, want %.9g", buf, (long long)i, g,
				      want[i]);
	}
}

static double
rnd(DType dt, double v)
{
	unsigned char b[16] = {0};

	dtype_store(dt, b, 0, v);
	return dtype_load(dt, b, 0);
}

/* --- the table ----------------------------------------------------------- */

START_TEST(test_eval_every_op_has_a_function)
{
	for (int op = 0; op < NOP; op++) {
		ck_assert_msg(ir_eval_has_fn((Op)op), "no eval function for %s", ir_opname((Op)op));
		ck_assert_msg(ir_infer_has_rule((Op)op), "no shape rule for %s", ir_opname((Op)op));
	}
}
END_TEST

/* --- elementwise --------------------------------------------------------- */

START_TEST(test_eval_unary_piecewise_exact)
{
	Tensor in[1] = {ten(DT_F32, DIM(5), VAL(-2, -0.5, 0, 1.5, 3))};
	Run r;

	ok(&r, "graph @u(%x: f32[5]) -> (a: f32[5], b: f32[5], c: f32[5], d: f32[5], "
	       "e: f32[5], f: f32[5], g: f32[5]) {\n"
	       "\t%a = neg %x : f32[5]\n"
	       "\t%b = abs %x : f32[5]\n"
	       "\t%c = relu %x : f32[5]\n"
	       "\t%d = leaky_relu %x, alpha=0.25 : f32[5]\n"
	       "\t%e = hard_sigmoid %x : f32[5]\n"
	       "\t%f = hard_swish %x : f32[5]\n"
	       "\t%g = clip %x, min=-1.0, max=2.0 : f32[5]\n"
	       "\tret %a, %b, %c, %d, %e, %f, %g\n}\n", in, 1);
	expect(&r.out[0], DT_F32, DIM(5), VAL(2, 0.5, 0, -1.5, -3), 0);
	expect(&r.out[1], DT_F32, DIM(5), VAL(2, 0.5, 0, 1.5, 3), 0);
	expect(&r.out[2], DT_F32, DIM(5), VAL(0, 0, 0, 1.5, 3), 0);
	expect(&r.out[3], DT_F32, DIM(5), VAL(-0.5, -0.125, 0, 1.5, 3), 0);
	/* alpha=0.2, beta=0.5: 0.2x+0.5 clamped to [0, 1] */
	expect(&r.out[4], DT_F32, DIM(5), VAL(0.1, 0.4, 0.5, 0.8, 1), 1e-7);
	/* x * clamp(x/6 + 0.5, 0, 1) */
	expect(&r.out[5], DT_F32, DIM(5), VAL(-1.0 / 3, -0.5 * 5 / 12, 0, 1.125, 3), 1e-7);
	expect(&r.out[6], DT_F32, DIM(5), VAL(-1, -0.5, 0, 1.5, 2), 0);
	done(&r, in, 1);
}
END_TEST

START_TEST(test_eval_unary_transcendental)
{
	Tensor in[1] = {ten(DT_F32, DIM(3), VAL(0, 1.5, 4))};
	Run r;

	ok(&r, "graph @u(%x: f32[3]) -> (a: f32[3], b: f32[3], c: f32[3], d: f32[3], "
	       "e: f32[3], f: f32[3], g: f32[3], h: f32[3], i: f32[3], j: f32[3], "
	       "k: f32[3], l: f32[3]) {\n"
	       "\t%a = exp %x : f32[3]\n"
	       "\t%b = erf %x : f32[3]\n"
	       "\t%c = tanh %x : f32[3]\n"
	       "\t%d = sigmoid %x : f32[3]\n"
	       "\t%e = silu %x : f32[3]\n"
	       "\t%f = gelu %x : f32[3]\n"
	       "\t%g = gelu %x, approx=tanh : f32[3]\n"
	       "\t%h = softplus %x : f32[3]\n"
	       "\t%i = sqrt %x : f32[3]\n"
	       "\t%j = rsqrt %x : f32[3]\n"
	       "\t%k = reciprocal %x : f32[3]\n"
	       "\t%l = log %x : f32[3]\n"
	       "\tret %a, %b, %c, %d, %e, %f, %g, %h, %i, %j, %k, %l\n}\n", in, 1);
	/* reference values from a calculator, to 1e-7 relative (f32) */
	expect(&r.out[0], DT_F32, DIM(3), VAL(1, 4.48168907, 54.5981500), 1e-7);
	expect(&r.out[1], DT_F32, DIM(3), VAL(0, 0.966105146, 0.999999985), 1e-7);
	expect(&r.out[2], DT_F32, DIM(3), VAL(0, 0.905148254, 0.999329300), 1e-7);
	expect(&r.out[3], DT_F32, DIM(3), VAL(0.5, 0.817574476, 0.982013790), 1e-7);
	expect(&r.out[4], DT_F32, DIM(3), VAL(0, 1.22636171, 3.92805516), 1e-7);
	expect(&r.out[5], DT_F32, DIM(3), VAL(0, 1.39978920, 3.99987367), 1e-7);
	expect(&r.out[6], DT_F32, DIM(3), VAL(0, 1.39957158, 3.99992964), 1e-7);
	expect(&r.out[7], DT_F32, DIM(3), VAL(0.693147181, 1.70141328, 4.01814993), 1e-7);
	expect(&r.out[8], DT_F32, DIM(3), VAL(0, 1.22474487, 2), 1e-7);
	expect(&r.out[9], DT_F32, DIM(3), VAL(INFINITY, 0.816496581, 0.5), 1e-7);
	expect(&r.out[10], DT_F32, DIM(3), VAL(INFINITY, 0.666666667, 0.25), 1e-7);
	expect(&r.out[11], DT_F32, DIM(3), VAL(-INFINITY, 0.405465108, 1.38629436), 1e-7);
	done(&r, in, 1);
}
END_TEST

START_TEST(test_eval_cast_not_identity)
{
	Tensor in[3] = {
		ten(DT_F32, DIM(6), VAL(-2.7, -0.5, 0, 2.7, 1e10, NAN)),
		ten(DT_I4, DIM(4), VAL(-8, 7, -1, 3)),
		ten(DT_I32, DIM(3), VAL(300, -300, 5)),
	};
	Run r;

	ok(&r, "graph @c(%x: f32[6], %q: i4[4], %n: i32[3]) -> (a: i32[6], b: i8[6], "
	       "c: bool[6], d: f8e4m3[6], e: bool[6], f: i32[4], g: i8[3], h: f32[3], "
	       "i: i4[4]) {\n"
	       "\t%a = cast %x, to=i32 : i32[6]\n"
	       "\t%b = cast %x, to=i8 : i8[6]\n"
	       "\t%c = cast %x, to=bool : bool[6]\n"
	       "\t%d = cast %x, to=f8e4m3 : f8e4m3[6]\n"
	       "\t%e = not %c : bool[6]\n"
	       "\t%f = cast %q, to=i32 : i32[4]\n"
	       "\t%g = cast %n, to=i8 : i8[3]\n"
	       "\t%h = cast %n, to=f32 : f32[3]\n"
	       "\t%i = identity %q : i4[4]\n"
	       "\tret %a, %b, %c, %d, %e, %f, %g, %h, %i\n}\n", in, 3);
	/* float -> int truncates toward zero, saturates, NaN -> 0 */
	expect(&r.out[0], DT_I32, DIM(6), VAL(-2, 0, 0, 2, 2147483647, 0), 0);
	expect(&r.out[1], DT_I8, DIM(6), VAL(-2, 0, 0, 2, 127, 0), 0);
	expect(&r.out[2], DT_BOOL, DIM(6), VAL(1, 1, 0, 1, 1, 1), 0);
	/* f8e4m3: 2.7 rounds to 2.75 (step 0.25 in [2, 4)), 1e10 saturates */
	expect(&r.out[3], DT_F8E4M3, DIM(6), VAL(-2.75, -0.5, 0, 2.75, 448, NAN), 0);
	expect(&r.out[4], DT_BOOL, DIM(6), VAL(0, 0, 1, 0, 0, 0), 0);
	expect(&r.out[5], DT_I32, DIM(4), VAL(-8, 7, -1, 3), 0);
	expect(&r.out[6], DT_I8, DIM(3), VAL(127, -128, 5), 0);
	expect(&r.out[7], DT_F32, DIM(3), VAL(300, -300, 5), 0);
	expect(&r.out[8], DT_I4, DIM(4), VAL(-8, 7, -1, 3), 0);
	done(&r, in, 3);
}
END_TEST

START_TEST(test_eval_low_precision_read_exactly_rounded_on_store)
{
	Tensor in[5] = {
		ten(DT_BF16, DIM(3), VAL(1, 256, 1.0078125)),
		ten(DT_BF16, DIM(3), VAL(0.00390625, 1, 0)),
		ten(DT_F16, DIM(2), VAL(300, 0.1)),
		ten(DT_F8E4M3, DIM(2), VAL(0.875, 448)),
		ten(DT_F32, DIM(1), VAL(0.1)),
	};
	Run r;

	ok(&r, "graph @p(%a: bf16[3], %b: bf16[3], %h: f16[2], %e: f8e4m3[2], %f: f32[1]) -> "
	       "(s: bf16[3], m: f16[2], x: f32[2], y: f8e4m3[2], z: f32[3], w: bf16[1]) {\n"
	       "\t%s = add %a, %b : bf16[3]\n"
	       "\t%m = mul %h, %h : f16[2]\n"
	       "\t%x = cast %e, to=f32 : f32[2]\n"
	       "\t%y = add %e, %e : f8e4m3[2]\n"
	       "\t%z = cast %a, to=f32 : f32[3]\n"
	       "\t%w = cast %f, to=bf16 : bf16[1]\n"
	       "\tret %s, %m, %x, %y, %z, %w\n}\n", in, 5);
	/* 1 + 2^-8 ties to even (1), 256 + 1 ties to even (256) */
	expect(&r.out[0], DT_BF16, DIM(3), VAL(1, 256, 1.0078125), 0);
	/* 300^2 overflows f16; 0.1 is read as its f16 value, squared, rounded */
	expect(&r.out[1], DT_F16, DIM(2), VAL(INFINITY, rnd(DT_F16, rnd(DT_F16, 0.1) * rnd(DT_F16, 0.1))), 0);
	expect(&r.out[2], DT_F32, DIM(2), VAL(0.875, 448), 0);
	expect(&r.out[3], DT_F8E4M3, DIM(2), VAL(1.75, 448), 0);
	expect(&r.out[4], DT_F32, DIM(3), VAL(1, 256, 1.0078125), 0);
	expect(&r.out[5], DT_BF16, DIM(1), VAL(0.10009765625), 0);
	done(&r, in, 5);
}
END_TEST

START_TEST(test_eval_binary_broadcast)
{
	Tensor in[4] = {
		ten(DT_F32, DIM(2, 3), VAL(1, 2, 3, 4, 5, 6)),
		ten(DT_F32, DIM(3), VAL(10, 20, 30)),
		ten(DT_F32, DIM(2, 1), VAL(1, 2)),
		ten(DT_I32, SCALAR, VAL(2)),
	};
	Run r;

	ok(&r, "graph @b(%a: f32[2,3], %b: f32[3], %c: f32[2,1], %e: i32[]) -> (s: f32[2,3], "
	       "t: f32[2,3], u: f32[2,3], v: f32[2,3], w: f32[2,3]) {\n"
	       "\t%s = add %a, %b : f32[2,3]\n"
	       "\t%t = sub %c, %b : f32[2,3]\n"
	       "\t%u = mul %b, %a : f32[2,3]\n"
	       "\t%v = div %a, %b : f32[2,3]\n"
	       "\t%w = pow %a, %e : f32[2,3]\n"
	       "\tret %s, %t, %u, %v, %w\n}\n", in, 4);
	expect(&r.out[0], DT_F32, DIM(2, 3), VAL(11, 22, 33, 14, 25, 36), 0);
	expect(&r.out[1], DT_F32, DIM(2, 3), VAL(-9, -19, -29, -8, -18, -28), 0);
	expect(&r.out[2], DT_F32, DIM(2, 3), VAL(10, 40, 90, 40, 100, 180), 0);
	expect(&r.out[3], DT_F32, DIM(2, 3),
	       VAL(rnd(DT_F32, 0.1), 0.1f, 0.1f, 0.4f, 0.25, 0.2f), 0);
	expect(&r.out[4], DT_F32, DIM(2, 3), VAL(1, 4, 9, 16, 25, 36), 0);
	done(&r, in, 4);
}
END_TEST

START_TEST(test_eval_min_max_compare_logic_where)
{
	Tensor in[6] = {
		ten(DT_F32, DIM(3), VAL(1, NAN, 3)),
		ten(DT_F32, DIM(3), VAL(2, 2, NAN)),
		ten(DT_F32, DIM(3), VAL(1, 2, 3)),
		ten(DT_BOOL, DIM(4), VAL(1, 1, 0, 0)),
		ten(DT_BOOL, DIM(4), VAL(1, 0, 1, 0)),
		ten(DT_BOOL, DIM(2, 1), VAL(1, 0)),
	};
	Run r;

	ok(&r, "graph @m(%x: f32[3], %y: f32[3], %z: f32[3], %p: bool[4], %q: bool[4], "
	       "%c: bool[2,1]) -> (a: f32[3], b: f32[3], e: bool[3], g: bool[3], l: bool[3], "
	       "ge: bool[3], le: bool[3], n: bool[4], o: bool[4], w: f32[2,3], k: bool[3]) {\n"
	       "\t%two = const value=[2.0] : f32[]\n"
	       "\t%m1 = const value=[-1.0] : f32[]\n"
	       "\t%a = min %x, %y : f32[3]\n"
	       "\t%b = max %x, %y : f32[3]\n"
	       "\t%e = equal %z, %two : bool[3]\n"
	       "\t%g = greater %z, %two : bool[3]\n"
	       "\t%l = less %z, %two : bool[3]\n"
	       "\t%ge = greater_equal %z, %two : bool[3]\n"
	       "\t%le = less_equal %z, %two : bool[3]\n"
	       "\t%n = and %p, %q : bool[4]\n"
	       "\t%o = or %p, %q : bool[4]\n"
	       "\t%w = where %c, %z, %m1 : f32[2,3]\n"
	       "\t%k = equal %x, %x : bool[3]\n"
	       "\tret %a, %b, %e, %g, %l, %ge, %le, %n, %o, %w, %k\n}\n", in, 6);
	expect(&r.out[0], DT_F32, DIM(3), VAL(1, NAN, NAN), 0);
	expect(&r.out[1], DT_F32, DIM(3), VAL(2, NAN, NAN), 0);
	expect(&r.out[2], DT_BOOL, DIM(3), VAL(0, 1, 0), 0);
	expect(&r.out[3], DT_BOOL, DIM(3), VAL(0, 0, 1), 0);
	expect(&r.out[4], DT_BOOL, DIM(3), VAL(1, 0, 0), 0);
	expect(&r.out[5], DT_BOOL, DIM(3), VAL(0, 1, 1), 0);
	expect(&r.out[6], DT_BOOL, DIM(3), VAL(1, 1, 0), 0);
	expect(&r.out[7], DT_BOOL, DIM(4), VAL(1, 0, 0, 0), 0);
	expect(&r.out[8], DT_BOOL, DIM(4), VAL(1, 1, 1, 0), 0);
	expect(&r.out[9], DT_F32, DIM(2, 3), VAL(1, 2, 3, -1, -1, -1), 0);
	expect(&r.out[10], DT_BOOL, DIM(3), VAL(1, 0, 1), 0);	/* NaN != NaN */
	done(&r, in, 6);
}
END_TEST

START_TEST(test_eval_integer_arithmetic)
{
	Tensor in[4] = {
		ten(DT_I32, DIM(4), VAL(-7, 7, 7, -7)),
		ten(DT_I32, DIM(4), VAL(2, 2, -2, -2)),
		ten(DT_I8, DIM(2), VAL(100, -100)),
		ten(DT_I64, DIM(2), VAL(3, -4)),
	};
	Run r;

	ok(&r, "graph @i(%a: i32[4], %b: i32[4], %c: i8[2], %d: i64[2]) -> (q: i32[4], "
	       "s: i8[2], n: i64[2], x: i32[4], p: i32[4]) {\n"
	       "\t%q = div %a, %b : i32[4]\n"
	       "\t%s = add %c, %c : i8[2]\n"
	       "\t%n = neg %d : i64[2]\n"
	       "\t%x = max %a, %b : i32[4]\n"
	       "\t%p = pow %b, %b : i32[4]\n"
	       "\tret %q, %s, %n, %x, %p\n}\n", in, 4);
	expect(&r.out[0], DT_I32, DIM(4), VAL(-3, 3, -3, 3), 0);	/* toward zero */
	expect(&r.out[1], DT_I8, DIM(2), VAL(127, -128), 0);		/* saturates */
	expect(&r.out[2], DT_I64, DIM(2), VAL(-3, 4), 0);
	expect(&r.out[3], DT_I32, DIM(4), VAL(2, 7, 7, -2), 0);
	expect(&r.out[4], DT_I32, DIM(4), VAL(4, 4, 0, 0), 0);		/* 0.25 truncates */
	done(&r, in, 4);
	Tensor z[2] = {ten(DT_I32, DIM(2), VAL(1, 2)), ten(DT_I32, DIM(2), VAL(1, 0))};
	fails("graph @z(%a: i32[2], %b: i32[2]) -> (q: i32[2]) {\n"
	      "\t%q = div %a, %b : i32[2]\n\tret %q\n}\n", z, 2, NULL,
	      "t.ir:2:7: error: div: integer division by zero");
	tensor_free(&z[0]);
	tensor_free(&z[1]);
}
END_TEST

START_TEST(test_eval_swiglu_layouts_and_acts)
{
	Tensor in[2] = {
		ten(DT_F32, DIM(2, 4), VAL(1, 2, 3, 4, -1, 0.5, 2, -3)),
		ten(DT_F32, DIM(1, 4), VAL(8, 9, -1, -9)),
	};
	Run r;

	ok(&r, "graph @s(%x: f32[2,4], %o: f32[1,4]) -> (a: f32[2,2], b: f32[2,2], "
	       "c: f32[2,2], d: f32[1,2], e: bf16[2,2]) {\n"
	       "\t%a = swiglu %x : f32[2,2]\n"
	       "\t%b = swiglu %x, layout=interleave : f32[2,2]\n"
	       "\t%c = swiglu %x, act=gelu : f32[2,2]\n"
	       "\t%d = swiglu %o, act=oai, layout=interleave : f32[1,2]\n"
	       "\t%e = swiglu %x, to=bf16 : bf16[2,2]\n"
	       "\tret %a, %b, %c, %d, %e\n}\n", in, 2);
	/* concat: gate = first half, up = second half: silu(gate) * up */
	expect(&r.out[0], DT_F32, DIM(2, 2), VAL(2.1931758, 7.0463767, -0.53788286, -0.933689), 1e-7);
	/* interleave: gate = even columns, up = odd */
	expect(&r.out[1], DT_F32, DIM(2, 2), VAL(1.4621172, 11.430889, -0.13447072, -5.2847824), 1e-7);
	expect(&r.out[2], DT_F32, DIM(2, 2), VAL(2.5240343, 7.817999, -0.3173105, -1.0371937), 1e-7);
	/* gpt-oss: gate 8 -> 7, up 9 -> 7: 8 * 7 * sigmoid(1.702*7); gate -1, up -9 -> -7 */
	expect(&r.out[3], DT_F32, DIM(1, 2), VAL(55.999626, 0.9252254), 1e-7);
	expect(&r.out[4], DT_BF16, DIM(2, 2),
	       VAL(rnd(DT_BF16, 2.1931758), rnd(DT_BF16, 7.0463767), rnd(DT_BF16, -0.53788286),
		   rnd(DT_BF16, -0.933689)), 0);
	done(&r, in, 2);
}
END_TEST

/* --- linear algebra ------------------------------------------------------ */

START_TEST(test_eval_matmul_forms)
{
	Tensor in[7] = {
		ten(DT_F32, DIM(2, 3), VAL(1, 2, 3, 4, 5, 6)),
		ten(DT_F32, DIM(3, 2), VAL(1, 0, 0, 1, 1, 1)),
		ten(DT_F32, DIM(2, 3), VAL(1, 0, 1, 0, 1, 1)),	/* b transposed */
		ten(DT_F32, DIM(3), VAL(1, 1, 1)),
		ten(DT_F32, DIM(2, 1, 1, 2), VAL(1, 1, 2, 1)),
		ten(DT_F32, DIM(3, 2, 1), VAL(1, 0, 1, 1, 1, 2)),
		ten(DT_F32, DIM(2), VAL(100, 200)),
	};
	Run r;

	ok(&r, "graph @mm(%a: f32[2,3], %b: f32[3,2], %bt: f32[2,3], %v: f32[3], "
	       "%p: f32[2,1,1,2], %q: f32[3,2,1], %bias: f32[2]) -> (c: f32[2,2], d: f32[2,2], "
	       "e: f32[2,2], f: f32[2], g: f32[2], h: f32[], i: f32[2,3,1,1], j: f16[2,2]) {\n"
	       "\t%c = matmul %a, %b, _ : f32[2,2]\n"
	       "\t%d = matmul %a, %bt, trans_b=1 : f32[2,2]\n"
	       "\t%at = transpose %a : f32[3,2]\n"
	       "\t%e = matmul %at, %b, trans_a=1 : f32[2,2]\n"
	       "\t%f = matmul %v, %b : f32[2]\n"
	       "\t%g = matmul %a, %v : f32[2]\n"
	       "\t%h = matmul %v, %v : f32[]\n"
	       "\t%i = matmul %p, %q : f32[2,3,1,1]\n"
	       "\t%j = matmul %a, %b, %bias, to=f16 : f16[2,2]\n"
	       "\tret %c, %d, %e, %f, %g, %h, %i, %j\n}\n", in, 7);
	expect(&r.out[0], DT_F32, DIM(2, 2), VAL(4, 5, 10, 11), 0);
	expect(&r.out[1], DT_F32, DIM(2, 2), VAL(4, 5, 10, 11), 0);
	expect(&r.out[2], DT_F32, DIM(2, 2), VAL(4, 5, 10, 11), 0);
	expect(&r.out[3], DT_F32, DIM(2), VAL(2, 2), 0);
	expect(&r.out[4], DT_F32, DIM(2), VAL(6, 15), 0);
	expect(&r.out[5], DT_F32, SCALAR, VAL(3), 0);
	/* batch dims [2,1] and [3] broadcast: p[i] = [i+1, 1], q[j] = [1, j] */
	expect(&r.out[6], DT_F32, DIM(2, 3, 1, 1), VAL(1, 2, 3, 2, 3, 4), 0);
	expect(&r.out[7], DT_F16, DIM(2, 2), VAL(104, 205, 110, 211), 0);
	done(&r, in, 7);
}
END_TEST

START_TEST(test_eval_grouped_matmul)
{
	Tensor in[5] = {
		ten(DT_F32, DIM(5, 2), VAL(0, 1, 1, 1, 2, 1, 3, 1, 4, 1)),
		ten(DT_F32, DIM(2, 3, 2), VAL(1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 1, -1)),
		ten(DT_F32, DIM(2, 2, 3), VAL(1, 0, 1, 0, 1, 1, 2, 0, 1, 0, 2, -1)),
		ten(DT_I32, DIM(3), VAL(1, 3, 4)),
		ten(DT_F32, DIM(2, 3), VAL(10, 20, 30, 40, 50, 60)),
	};
	Run r;

	ok(&r, "graph @g(%a: f32[5,2], %w: f32[2,3,2], %wt: f32[2,2,3], %o: i32[3], "
	       "%b: f32[2,3]) -> (x: f32[5,3], y: f32[5,3], z: f32[5,3]) {\n"
	       "\t%x = grouped_matmul %a, %w, %o : f32[5,3]\n"
	       "\t%y = grouped_matmul %a, %wt, %o, trans_b=0 : f32[5,3]\n"
	       "\t%z = grouped_matmul %a, %w, %o, %b : f32[5,3]\n"
	       "\tret %x, %y, %z\n}\n", in, 5);
	/* rows 1-2 use expert 0, row 3 expert 1, rows 0 and 4 are outside: zero */
	double want[] = {0, 0, 0, 1, 1, 2, 2, 1, 3, 6, 2, 2, 0, 0, 0};
	expect(&r.out[0], DT_F32, DIM(5, 3), want, 0);
	expect(&r.out[1], DT_F32, DIM(5, 3), want, 0);
	expect(&r.out[2], DT_F32, DIM(5, 3),
	       VAL(0, 0, 0, 11, 21, 32, 12, 21, 33, 46, 52, 62, 0, 0, 0), 0);
	done(&r, in, 5);
	Tensor bad[3] = {
		ten(DT_F32, DIM(3, 1), VAL(1, 2, 3)),
		ten(DT_F32, DIM(2, 1, 1), VAL(1, 1)),
		ten(DT_I64, DIM(3), VAL(0, 3, 2)),
	};
	fails("graph @g(%a: f32[3,1], %w: f32[2,1,1], %o: i64[3]) -> (x: f32[3,1]) {\n"
	      "\t%x = grouped_matmul %a, %w, %o : f32[3,1]\n\tret %x\n}\n", bad, 3, NULL,
	      "offsets[2] = 2 is not non-decreasing");
	for (int i = 0; i < 3; i++)
		tensor_free(&bad[i]);
}
END_TEST

/* --- reductions and normalisation ---------------------------------------- */

START_TEST(test_eval_reductions)
{
	Tensor in[2] = {
		ten(DT_F32, DIM(2, 3), VAL(1, 2, 3, 4, 5, 6)),
		ten(DT_I32, DIM(2, 2), VAL(1, 2, 3, 4)),
	};
	Run r;

	ok(&r, "graph @r(%x: f32[2,3], %n: i32[2,2]) -> (a: f32[2], b: f32[2,1], c: f32[1,3], "
	       "d: f32[1,1], e: f32[], f: i32[2], g: i32[2]) {\n"
	       "\t%a = reduce_sum %x, axes=[1], keepdims=0 : f32[2]\n"
	       "\t%b = reduce_mean %x, axes=[-1] : f32[2,1]\n"
	       "\t%c = reduce_max %x, axes=[0] : f32[1,3]\n"
	       "\t%d = reduce_min %x : f32[1,1]\n"
	       "\t%e = reduce_sum %x, keepdims=0 : f32[]\n"
	       "\t%f = reduce_sum %n, axes=[0], keepdims=0 : i32[2]\n"
	       "\t%g = reduce_mean %n, axes=[1], keepdims=0 : i32[2]\n"
	       "\tret %a, %b, %c, %d, %e, %f, %g\n}\n", in, 2);
	expect(&r.out[0], DT_F32, DIM(2), VAL(6, 15), 0);
	expect(&r.out[1], DT_F32, DIM(2, 1), VAL(2, 5), 0);
	expect(&r.out[2], DT_F32, DIM(1, 3), VAL(4, 5, 6), 0);
	expect(&r.out[3], DT_F32, DIM(1, 1), VAL(1), 0);
	expect(&r.out[4], DT_F32, SCALAR, VAL(21), 0);
	expect(&r.out[5], DT_I32, DIM(2), VAL(4, 6), 0);
	expect(&r.out[6], DT_I32, DIM(2), VAL(1, 3), 0);	/* 1.5, 3.5 truncate */
	done(&r, in, 2);
}
END_TEST

START_TEST(test_eval_argmax_ties)
{
	Tensor in[1] = {ten(DT_F32, DIM(2, 3), VAL(1, 3, 3, 5, 2, 5))};
	Run r;

	ok(&r, "graph @a(%x: f32[2,3]) -> (a: i64[2,1], b: i64[2,1], c: i64[3]) {\n"
	       "\t%a = argmax %x, axis=1 : i64[2,1]\n"
	       "\t%b = argmax %x, axis=-1, select_last_index=1 : i64[2,1]\n"
	       "\t%c = argmax %x, keepdims=0 : i64[3]\n"
	       "\tret %a, %b, %c\n}\n", in, 1);
	expect(&r.out[0], DT_I64, DIM(2, 1), VAL(1, 0), 0);
	expect(&r.out[1], DT_I64, DIM(2, 1), VAL(2, 2), 0);
	expect(&r.out[2], DT_I64, DIM(3), VAL(1, 0, 1), 0);
	done(&r, in, 1);
}
END_TEST

START_TEST(test_eval_softmax_axes)
{
	Tensor in[1] = {ten(DT_F32, DIM(2, 2), VAL(1, 1, 0, log(3.0)))};
	Run r;
	double l3 = (float)log(3.0), e = exp(1.0);

	ok(&r, "graph @s(%x: f32[2,2]) -> (a: f32[2,2], b: f32[2,2], c: f32[2,2]) {\n"
	       "\t%a = softmax %x : f32[2,2]\n"
	       "\t%b = log_softmax %x, axis=-1 : f32[2,2]\n"
	       "\t%c = softmax %x, axis=0 : f32[2,2]\n"
	       "\tret %a, %b, %c\n}\n", in, 1);
	expect(&r.out[0], DT_F32, DIM(2, 2), VAL(0.5, 0.5, 1 / (1 + exp(l3)), exp(l3) / (1 + exp(l3))), 1e-7);
	expect(&r.out[1], DT_F32, DIM(2, 2), VAL(-log(2.0), -log(2.0), -log(1 + exp(l3)), l3 - log(1 + exp(l3))), 1e-7);
	expect(&r.out[2], DT_F32, DIM(2, 2), VAL(e / (e + 1), e / (e + exp(l3)), 1 / (e + 1), exp(l3) / (e + exp(l3))), 1e-7);
	done(&r, in, 1);
}
END_TEST

START_TEST(test_eval_rms_norm)
{
	Tensor in[4] = {
		ten(DT_F32, DIM(2, 2), VAL(3, 4, 1, 1)),
		ten(DT_F32, DIM(2), VAL(1, 2)),
		ten(DT_F32, DIM(2, 2, 2), VAL(1, 2, 3, 4, 1, 1, 1, 1)),
		ten(DT_F32, DIM(2), VAL(1, 10)),
	};
	Run r;
	double r0 = 1 / sqrt(12.5 + 1e-5), r1 = 1 / sqrt(1 + 1e-5), q = 1 / sqrt(7.5);

	ok(&r, "graph @n(%x: f32[2,2], %s: f32[2], %y: f32[2,2,2], %t: f32[2]) -> "
	       "(a: f32[2,2], b: f32[2,2], c: f32[2,2,2], d: bf16[2,2,2]) {\n"
	       "\t%a = rms_norm %x, %s : f32[2,2]\n"
	       "\t%b = rms_norm %x, %s, eps=0.0 : f32[2,2]\n"
	       "\t%c = rms_norm %y, %t, axis=-2, eps=0.0 : f32[2,2,2]\n"
	       "\t%d = rms_norm %y, %t, axis=1, eps=0.0, to=bf16 : bf16[2,2,2]\n"
	       "\tret %a, %b, %c, %d\n}\n", in, 4);
	expect(&r.out[0], DT_F32, DIM(2, 2), VAL(3 * r0, 8 * r0, r1, 2 * r1), 1e-7);
	expect(&r.out[1], DT_F32, DIM(2, 2), VAL(0.848528137, 2.26274170, 1, 2), 1e-7);
	/* normalised over the last two dims; the scale broadcasts over them */
	expect(&r.out[2], DT_F32, DIM(2, 2, 2), VAL(q, 20 * q, 3 * q, 40 * q, 1, 10, 1, 10), 1e-7);
	expect(&r.out[3], DT_BF16, DIM(2, 2, 2),
	       VAL(rnd(DT_BF16, q), rnd(DT_BF16, 20 * q), rnd(DT_BF16, 3 * q),
		   rnd(DT_BF16, 40 * q), 1, 10, 1, 10), 0);
	done(&r, in, 4);
}
END_TEST

START_TEST(test_eval_layer_norm_and_rstd)
{
	Tensor in[4] = {
		ten(DT_F32, DIM(2, 4), VAL(1, 2, 3, 4, 2, 2, 2, 2)),
		ten(DT_F32, DIM(4), VAL(1, 1, 2, 2)),
		ten(DT_F32, DIM(4), VAL(0, 0, 0, 1)),
		ten(DT_F32, DIM(2, 2), VAL(3, 4, 1, 3)),
	};
	Run r;
	double i0 = 1 / sqrt(1.25 + 1e-5), i1 = 1 / sqrt(1e-5);

	ok(&r, "graph @l(%x: f32[2,4], %s: f32[4], %b: f32[4], %z: f32[2,2]) -> (y: f32[2,4], "
	       "m: f32[2,1], v: f32[2,1], w: f32[2,4], r: f32[2,1], c: f32[2,1]) {\n"
	       "\t%y, %m, %v = layer_norm %x, %s, %b : f32[2,4], f32[2,1], f32[2,1]\n"
	       "\t%w = layer_norm %x, %s, _ : f32[2,4]\n"
	       "\t%r = rstd %z, eps=0.0 : f32[2,1]\n"
	       "\t%c = rstd %z, eps=0.0, center=1 : f32[2,1]\n"
	       "\tret %y, %m, %v, %w, %r, %c\n}\n", in, 4);
	expect(&r.out[0], DT_F32, DIM(2, 4), VAL(-1.5 * i0, -0.5 * i0, i0, 3 * i0 + 1, 0, 0, 0, 1), 1e-7);
	expect(&r.out[1], DT_F32, DIM(2, 1), VAL(2.5, 2), 0);
	expect(&r.out[2], DT_F32, DIM(2, 1), VAL(i0, i1), 1e-7);
	expect(&r.out[3], DT_F32, DIM(2, 4), VAL(-1.5 * i0, -0.5 * i0, i0, 3 * i0, 0, 0, 0, 0), 1e-7);
	expect(&r.out[4], DT_F32, DIM(2, 1), VAL(1 / sqrt(12.5), 1 / sqrt(5.0)), 1e-7);
	expect(&r.out[5], DT_F32, DIM(2, 1), VAL(2, 1), 0);
	done(&r, in, 4);
}
END_TEST

START_TEST(test_eval_topk_ties_toward_lower_index)
{
	Tensor in[1] = {ten(DT_F32, DIM(2, 4), VAL(1, 3, 3, 2, 4, 0, 4, 4))};
	Run r;

	ok(&r, "graph @t(%x: f32[2,4]) -> (a: f32[2,2], b: i64[2,2], c: f32[2,3], d: i64[2,3], "
	       "e: f32[1,4], f: i64[1,4]) {\n"
	       "\t%a, %b = topk %x, k=2 : f32[2,2], i64[2,2]\n"
	       "\t%c, %d = topk %x, k=3, largest=0 : f32[2,3], i64[2,3]\n"
	       "\t%e, %f = topk %x, k=1, axis=0 : f32[1,4], i64[1,4]\n"
	       "\tret %a, %b, %c, %d, %e, %f\n}\n", in, 1);
	expect(&r.out[0], DT_F32, DIM(2, 2), VAL(3, 3, 4, 4), 0);
	expect(&r.out[1], DT_I64, DIM(2, 2), VAL(1, 2, 0, 2), 0);
	expect(&r.out[2], DT_F32, DIM(2, 3), VAL(1, 2, 3, 0, 4, 4), 0);
	expect(&r.out[3], DT_I64, DIM(2, 3), VAL(0, 3, 1, 1, 0, 2), 0);
	expect(&r.out[4], DT_F32, DIM(1, 4), VAL(4, 3, 4, 4), 0);
	expect(&r.out[5], DT_I64, DIM(1, 4), VAL(1, 0, 1, 1), 0);
	done(&r, in, 1);
}
END_TEST

/* --- indexing ------------------------------------------------------------ */

START_TEST(test_eval_gather)
{
	Tensor in[3] = {
		ten(DT_F32, DIM(2, 3), VAL(1, 2, 3, 4, 5, 6)),
		ten(DT_I64, DIM(2), VAL(2, -1)),
		ten(DT_I32, DIM(2, 1), VAL(1, 0)),
	};
	Run r;

	ok(&r, "graph @g(%x: f32[2,3], %i: i64[2], %j: i32[2,1]) -> (a: f32[2,2], b: f32[2,1,3]) {\n"
	       "\t%a = gather %x, %i, axis=-1 : f32[2,2]\n"
	       "\t%b = gather %x, %j : f32[2,1,3]\n"
	       "\tret %a, %b\n}\n", in, 3);
	expect(&r.out[0], DT_F32, DIM(2, 2), VAL(3, 3, 6, 6), 0);
	expect(&r.out[1], DT_F32, DIM(2, 1, 3), VAL(4, 5, 6, 1, 2, 3), 0);
	done(&r, in, 3);
}
END_TEST

START_TEST(test_eval_gather_out_of_range_is_a_diagnostic)
{
	Tensor in[2] = {
		ten(DT_F32, DIM(8), VAL(0, 1, 2, 3, 4, 5, 6, 7)),
		ten(DT_I64, DIM(2), VAL(3, 9)),
	};

	fails("graph @g(%x: f32[8], %i: i64[2]) -> (y: f32[2]) {\n"
	      "\t%y = gather %x, %i : f32[2]\n\tret %y\n}\n", in, 2, NULL,
	      "t.ir:2:7: error: gather: index 9 out of range for dim 8\n");
	dtype_store_int(DT_I64, in[1].data, 1, -9);
	fails("graph @g(%x: f32[8], %i: i64[2]) -> (y: f32[2]) {\n"
	      "\t%y = gather %x, %i : f32[2]\n\tret %y\n}\n", in, 2, NULL,
	      "gather: index -9 out of range for dim 8");
	tensor_free(&in[0]);
	tensor_free(&in[1]);
}
END_TEST

START_TEST(test_eval_gather_elements_and_nd)
{
	Tensor in[6] = {
		ten(DT_F32, DIM(2, 2), VAL(1, 2, 3, 4)),
		ten(DT_I64, DIM(2, 2), VAL(0, 0, 1, 0)),
		ten(DT_I64, DIM(2, 2), VAL(0, 0, 1, 1)),
		ten(DT_I64, DIM(2, 1), VAL(1, 0)),
		ten(DT_F32, DIM(2, 2, 2), VAL(0, 1, 2, 3, 4, 5, 6, 7)),
		ten(DT_I64, DIM(2, 2), VAL(-1, 0, 0, 1)),
	};
	Run r;

	ok(&r, "graph @g(%x: f32[2,2], %i: i64[2,2], %j: i64[2,2], %k: i64[2,1], %y: f32[2,2,2], "
	       "%m: i64[2,2]) -> (a: f32[2,2], b: f32[2], c: f32[2,2], d: f32[2,2], e: f32[2,2]) {\n"
	       "\t%a = gather_elements %x, %i, axis=1 : f32[2,2]\n"
	       "\t%b = gather_nd %x, %j : f32[2]\n"
	       "\t%c = gather_nd %x, %k : f32[2,2]\n"
	       "\t%d = gather_nd %y, %k, batch_dims=1 : f32[2,2]\n"
	       "\t%e = gather_elements %x, %m : f32[2,2]\n"
	       "\tret %a, %b, %c, %d, %e\n}\n", in, 6);
	expect(&r.out[0], DT_F32, DIM(2, 2), VAL(1, 1, 4, 3), 0);
	expect(&r.out[1], DT_F32, DIM(2), VAL(1, 4), 0);
	expect(&r.out[2], DT_F32, DIM(2, 2), VAL(3, 4, 1, 2), 0);
	expect(&r.out[3], DT_F32, DIM(2, 2), VAL(2, 3, 4, 5), 0);
	/* axis 0, index -1 wraps to 1 */
	expect(&r.out[4], DT_F32, DIM(2, 2), VAL(3, 2, 1, 4), 0);
	done(&r, in, 6);
}
END_TEST

START_TEST(test_eval_scatters)
{
	Tensor in[9] = {
		ten(DT_F32, DIM(3, 3), VAL(0, 0, 0, 0, 0, 0, 0, 0, 0)),
		ten(DT_I64, DIM(2, 3), VAL(1, 0, 2, 0, 2, 1)),
		ten(DT_F32, DIM(2, 3), VAL(1.0, 1.1, 1.2, 2.0, 2.1, 2.2)),
		ten(DT_F32, DIM(1, 5), VAL(1, 2, 3, 4, 5)),
		ten(DT_I64, DIM(1, 2), VAL(1, 1)),
		ten(DT_F32, DIM(1, 2), VAL(1.1, 2.1)),
		ten(DT_F32, DIM(8), VAL(1, 2, 3, 4, 5, 6, 7, 8)),
		ten(DT_I64, DIM(4, 1), VAL(4, 3, 1, 7)),
		ten(DT_F32, DIM(4), VAL(9, 10, 11, 12)),
	};
	Run r;

	ok(&r, "graph @s(%d: f32[3,3], %i: i64[2,3], %u: f32[2,3], %e: f32[1,5], %j: i64[1,2], "
	       "%v: f32[1,2], %n: f32[8], %k: i64[4,1], %w: f32[4]) -> (a: f32[3,3], b: f32[1,5], "
	       "c: f32[8], f: f32[8]) {\n"
	       "\t%a = scatter_elements %d, %i, %u : f32[3,3]\n"
	       "\t%b = scatter_elements %e, %j, %v, axis=1, reduction=add : f32[1,5]\n"
	       "\t%c = scatter_nd %n, %k, %w : f32[8]\n"
	       "\t%f = scatter_nd %n, %k, %w, reduction=mul : f32[8]\n"
	       "\tret %a, %b, %c, %f\n}\n", in, 9);
	expect(&r.out[0], DT_F32, DIM(3, 3), VAL(2.0, 1.1f, 0, 1.0, 0, 2.2f, 0, 2.1f, 1.2f), 0);
	expect(&r.out[1], DT_F32, DIM(1, 5), VAL(1, (float)(2 + 1.1f + 2.1f), 3, 4, 5), 1e-7);
	expect(&r.out[2], DT_F32, DIM(8), VAL(1, 11, 3, 10, 9, 6, 7, 12), 0);
	expect(&r.out[3], DT_F32, DIM(8), VAL(1, 22, 3, 40, 45, 6, 7, 96), 0);
	done(&r, in, 9);
}
END_TEST

START_TEST(test_eval_scatter_rows)
{
	Tensor in[2] = {
		ten(DT_F32, DIM(3, 2), VAL(1, 2, 3, 4, 5, 6)),
		ten(DT_I32, DIM(3), VAL(2, -1, 0)),
	};
	Run r;

	/* rows=[2*T] is symbolic: T is bound from %s */
	ok(&r, "graph @s(%s: f32[T,2], %i: i32[T]) -> (a: f32[4,2], b: f32[2*T,2]) {\n"
	       "\t%a = scatter_rows %s, %i, rows=[4] : f32[4,2]\n"
	       "\t%b = scatter_rows %s, %i, rows=[2*T] : f32[2*T,2]\n"
	       "\tret %a, %b\n}\n", in, 2);
	expect(&r.out[0], DT_F32, DIM(4, 2), VAL(5, 6, 0, 0, 1, 2, 0, 0), 0);
	expect(&r.out[1], DT_F32, DIM(6, 2), VAL(5, 6, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0), 0);
	done(&r, in, 2);
	Tensor bad[2] = {ten(DT_F32, DIM(1, 1), VAL(1)), ten(DT_I32, DIM(1), VAL(4))};
	fails("graph @s(%s: f32[1,1], %i: i32[1]) -> (a: f32[4,1]) {\n"
	      "\t%a = scatter_rows %s, %i, rows=[4] : f32[4,1]\n\tret %a\n}\n", bad, 2, NULL,
	      "scatter_rows: index 4 out of range for dim 4");
	tensor_free(&bad[0]);
	tensor_free(&bad[1]);
}
END_TEST

START_TEST(test_eval_onehot)
{
	Tensor in[1] = {ten(DT_I64, DIM(4), VAL(0, 2, -1, 5))};
	Run r;

	ok(&r, "graph @o(%i: i64[4]) -> (a: f32[4,3], b: i32[3,4]) {\n"
	       "\t%a = onehot %i, depth=3, on=5.0, off=-1.0 : f32[4,3]\n"
	       "\t%b = onehot %i, depth=3, axis=0, to=i32 : i32[3,4]\n"
	       "\tret %a, %b\n}\n", in, 1);
	/* -1 wraps to 2; 5 is out of range: all off */
	expect(&r.out[0], DT_F32, DIM(4, 3), VAL(5, -1, -1, -1, -1, 5, -1, -1, 5, -1, -1, -1), 0);
	expect(&r.out[1], DT_I32, DIM(3, 4), VAL(1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0), 0);
	done(&r, in, 1);
}
END_TEST

START_TEST(test_eval_nonzero_feeds_a_data_dependent_reshape)
{
	Tensor in[1] = {ten(DT_F32, DIM(2, 3), VAL(0, 1, 0, 2, 0, NAN))};
	Run r;

	ok(&r, "graph @n(%x: f32[2,3]) -> (a: i64[2,?], b: i64[?], c: i64[], d: f32[?]) {\n"
	       "\t%a = nonzero %x : i64[2,?]\n"
	       "\t%m1 = const value=[-1] : i64[1]\n"
	       "\t%b = reshape %a, %m1 : i64[?]\n"
	       "\t%c = size %b : i64[]\n"
	       "\t%flat = reshape %x, shape=[6] : f32[6]\n"
	       "\t%idx = nonzero %flat : i64[1,?]\n"
	       "\t%i1 = reshape %idx, %m1 : i64[?]\n"
	       "\t%d = gather %flat, %i1 : f32[?]\n"
	       "\tret %a, %b, %c, %d\n}\n", in, 1);
	/* row-major: (0,1), (1,0), (1,2); NaN counts as nonzero */
	expect(&r.out[0], DT_I64, DIM(2, 3), VAL(0, 1, 1, 1, 0, 2), 0);
	expect(&r.out[1], DT_I64, DIM(6), VAL(0, 1, 1, 1, 0, 2), 0);
	expect(&r.out[2], DT_I64, SCALAR, VAL(6), 0);
	expect(&r.out[3], DT_F32, DIM(3), VAL(1, 2, NAN), 0);
	done(&r, in, 1);
}
END_TEST

/* --- shapes -------------------------------------------------------------- */

START_TEST(test_eval_transpose_reshape_expand)
{
	Tensor in[4] = {
		ten(DT_F32, DIM(2, 4), VAL(1, 2, 3, 4, 5, 6, 7, 8)),
		ten(DT_F32, DIM(2, 2, 2), VAL(0, 1, 2, 3, 4, 5, 6, 7)),
		ten(DT_I64, DIM(3), VAL(0, -1, 2)),
		ten(DT_I64, DIM(2), VAL(1, 2)),
	};
	Run r;

	ok(&r, "graph @t(%x: f32[T,4], %y: f32[2,2,2], %s: i64[3], %e: i64[2]) -> "
	       "(a: f32[4,T], b: f32[2,2,2], c: f32[T,2,2], d: f32[2*T,2], f: f32[?,?,?], "
	       "g: f32[2,T,4], h: f32[?,?]) {\n"
	       "\t%a = transpose %x : f32[4,T]\n"
	       "\t%b = transpose %y, perm=[1,0,2] : f32[2,2,2]\n"
	       "\t%c = reshape %x, shape=[T,2,2] : f32[T,2,2]\n"
	       "\t%d = reshape %x, shape=[2*T,2] : f32[2*T,2]\n"
	       "\t%f = reshape %x, %s : f32[?,?,?]\n"
	       "\t%g = expand %x, shape=[2,1,4] : f32[2,T,4]\n"
	       "\t%col = slice %x, starts=[0], ends=[1], axes=[1] : f32[T,1]\n"
	       "\t%h = expand %col, %e : f32[?,?]\n"
	       "\tret %a, %b, %c, %d, %f, %g, %h\n}\n", in, 4);
	expect(&r.out[0], DT_F32, DIM(4, 2), VAL(1, 5, 2, 6, 3, 7, 4, 8), 0);
	expect(&r.out[1], DT_F32, DIM(2, 2, 2), VAL(0, 1, 4, 5, 2, 3, 6, 7), 0);
	expect(&r.out[2], DT_F32, DIM(2, 2, 2), VAL(1, 2, 3, 4, 5, 6, 7, 8), 0);
	expect(&r.out[3], DT_F32, DIM(4, 2), VAL(1, 2, 3, 4, 5, 6, 7, 8), 0);
	/* 0 copies dim 0 (2), -1 is inferred (2) */
	expect(&r.out[4], DT_F32, DIM(2, 2, 2), VAL(1, 2, 3, 4, 5, 6, 7, 8), 0);
	expect(&r.out[5], DT_F32, DIM(2, 2, 4),
	       VAL(1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8), 0);
	expect(&r.out[6], DT_F32, DIM(2, 2), VAL(1, 1, 5, 5), 0);
	done(&r, in, 4);
	Tensor bad[2] = {ten(DT_F32, DIM(2, 4), VAL(1, 2, 3, 4, 5, 6, 7, 8)),
			 ten(DT_I64, DIM(2), VAL(3, 3))};
	fails("graph @t(%x: f32[2,4], %s: i64[2]) -> (a: f32[?,?]) {\n"
	      "\t%a = reshape %x, %s : f32[?,?]\n\tret %a\n}\n", bad, 2, NULL,
	      "t.ir:2:7: error: reshape: 8 elements cannot become 9");
	tensor_free(&bad[0]);
	tensor_free(&bad[1]);
}
END_TEST

START_TEST(test_eval_concat_split_slice_tile)
{
	Tensor in[7] = {
		ten(DT_F32, DIM(2, 1), VAL(1, 2)),
		ten(DT_F32, DIM(2, 2), VAL(3, 4, 5, 6)),
		ten(DT_F32, DIM(2, 4), VAL(1, 2, 3, 4, 5, 6, 7, 8)),
		ten(DT_F32, DIM(5), VAL(0, 1, 2, 3, 4)),
		ten(DT_I64, DIM(1), VAL(-2)),
		ten(DT_I64, DIM(1), VAL(-100)),
		ten(DT_I64, DIM(2), VAL(3, 1)),
	};
	Run r;

	ok(&r, "graph @c(%a: f32[2,1], %b: f32[2,2], %x: f32[2,4], %v: f32[5], %st: i64[1], "
	       "%en: i64[1], %rp: i64[2]) -> (c: f32[2,3], s0: f32[2,2], s1: f32[2,2], "
	       "v0: f32[2,1], v1: f32[2,3], a: f32[3], b: f32[4], d: f32[1,2], e: f32[0], "
	       "f: f32[?], g: f32[2,4], h: f32[?,?]) {\n"
	       "\t%c = concat %a, %b, axis=-1 : f32[2,3]\n"
	       "\t%s0, %s1 = split %x, axis=1 : f32[2,2], f32[2,2]\n"
	       "\t%v0, %v1 = split %x, axis=1, sizes=[1,3] : f32[2,1], f32[2,3]\n"
	       "\t%a1 = slice %v, starts=[-1], ends=[-100], steps=[-2] : f32[3]\n"
	       "\t%b1 = slice %v, starts=[1], ends=[1000] : f32[4]\n"
	       "\t%d = slice %x, starts=[0,1], ends=[1,5], axes=[0,-1], steps=[1,2] : f32[1,2]\n"
	       "\t%e = slice %v, starts=[-100], ends=[-200], steps=[-1] : f32[0]\n"
	       "\t%f = slice %v, %st, %en, _, %st : f32[?]\n"
	       "\t%g = tile %a, repeats=[1,4] : f32[2,4]\n"
	       "\t%h = tile %a, %rp : f32[?,?]\n"
	       "\tret %c, %s0, %s1, %v0, %v1, %a1, %b1, %d, %e, %f, %g, %h\n}\n", in, 7);
	expect(&r.out[0], DT_F32, DIM(2, 3), VAL(1, 3, 4, 2, 5, 6), 0);
	expect(&r.out[1], DT_F32, DIM(2, 2), VAL(1, 2, 5, 6), 0);
	expect(&r.out[2], DT_F32, DIM(2, 2), VAL(3, 4, 7, 8), 0);
	expect(&r.out[3], DT_F32, DIM(2, 1), VAL(1, 5), 0);
	expect(&r.out[4], DT_F32, DIM(2, 3), VAL(2, 3, 4, 6, 7, 8), 0);
	expect(&r.out[5], DT_F32, DIM(3), VAL(4, 2, 0), 0);
	expect(&r.out[6], DT_F32, DIM(4), VAL(1, 2, 3, 4), 0);
	expect(&r.out[7], DT_F32, DIM(1, 2), VAL(2, 4), 0);
	expect(&r.out[8], DT_F32, DIM(0), VAL(0), 0);
	/* start -2 -> 3, end -100 -> clamped to -1, step -2: 3, 1 */
	expect(&r.out[9], DT_F32, DIM(2), VAL(3, 1), 0);
	expect(&r.out[10], DT_F32, DIM(2, 4), VAL(1, 1, 1, 1, 2, 2, 2, 2), 0);
	expect(&r.out[11], DT_F32, DIM(6, 1), VAL(1, 2, 1, 2, 1, 2), 0);
	done(&r, in, 7);
}
END_TEST

/* An i64 tensor of exact values (doubles cannot hold INT64_MAX). */
static Tensor
i64s(int n, const int64_t *v)
{
	Tensor t = zeros(DT_I64, 1, (int64_t[]){n});

	for (int i = 0; i < n; i++)
		dtype_store_int(DT_I64, t.data, (size_t)i, v[i]);
	return t;
}

/* Sizes and steps at the ends of int64 (UBSan found each overflowing):
 * results exact or a diagnostic, never a wrapped product. */
START_TEST(test_eval_int64_edges_do_not_overflow)
{
	Run r;
	Tensor in[4];

	/* range: i * delta passes INT64_MAX on the way to an in-range value */
	in[0] = ten(DT_I64, SCALAR, VAL(0));
	in[1] = ten(DT_I64, SCALAR, VAL(0));
	in[2] = ten(DT_I64, SCALAR, VAL(0));
	dtype_store_int(DT_I64, in[0].data, 0, INT64_MIN);
	dtype_store_int(DT_I64, in[1].data, 0, INT64_MAX);
	dtype_store_int(DT_I64, in[2].data, 0, (int64_t)1 << 62);
	ok(&r, "graph @r(%a: i64[], %b: i64[], %c: i64[]) -> (i: i64[?]) {\n"
	       "\t%i = range %a, %b, %c : i64[?]\n\tret %i\n}\n", in, 3);
	ck_assert_int_eq(r.out[0].dim[0], 4);
	ck_assert(dtype_load_int(DT_I64, r.out[0].data, 0) == INT64_MIN);
	ck_assert(dtype_load_int(DT_I64, r.out[0].data, 1) == -((int64_t)1 << 62));
	ck_assert(dtype_load_int(DT_I64, r.out[0].data, 2) == 0);
	ck_assert(dtype_load_int(DT_I64, r.out[0].data, 3) == (int64_t)1 << 62);
	done(&r, in, 3);
	/* the exact count: (2^64 - 1) / (2^63 - 1) is a little over 2, so 3
	 * elements (doubles said 2) */
	in[0] = ten(DT_I64, SCALAR, VAL(0));
	in[1] = ten(DT_I64, SCALAR, VAL(0));
	in[2] = ten(DT_I64, SCALAR, VAL(0));
	dtype_store_int(DT_I64, in[0].data, 0, INT64_MIN);
	dtype_store_int(DT_I64, in[1].data, 0, INT64_MAX);
	dtype_store_int(DT_I64, in[2].data, 0, INT64_MAX);
	ok(&r, "graph @r(%a: i64[], %b: i64[], %c: i64[]) -> (i: i64[?]) {\n"
	       "\t%i = range %a, %b, %c : i64[?]\n\tret %i\n}\n", in, 3);
	ck_assert_int_eq(r.out[0].dim[0], 3);
	ck_assert(dtype_load_int(DT_I64, r.out[0].data, 2) == INT64_MAX - 1);
	done(&r, in, 3);

	/* reshape: (2^62 + 1) * 4 wraps to 4, the input's count */
	in[0] = ten(DT_F32, DIM(4), VAL(1, 2, 3, 4));
	in[1] = i64s(2, (int64_t[]){((int64_t)1 << 62) + 1, 4});
	fails("graph @t(%x: f32[4], %s: i64[2]) -> (a: f32[?,?]) {\n"
	      "\t%a = reshape %x, %s : f32[?,?]\n\tret %a\n}\n", in, 2, NULL,
	      "reshape: the shape's product overflows 64 bits");
	/* with a -1 to infer, the known dims' product */
	tensor_free(&in[1]);
	in[1] = i64s(3, (int64_t[]){((int64_t)1 << 62) + 1, 4, -1});
	fails("graph @t(%x: f32[4], %s: i64[3]) -> (a: f32[?,?,?]) {\n"
	      "\t%a = reshape %x, %s : f32[?,?,?]\n\tret %a\n}\n", in, 2, NULL,
	      "reshape: the shape's product overflows 64 bits");
	/* tile: 4 * 2^62 */
	tensor_free(&in[1]);
	in[1] = i64s(1, (int64_t[]){(int64_t)1 << 62});
	fails("graph @t(%x: f32[4], %s: i64[1]) -> (a: f32[?]) {\n"
	      "\t%a = tile %x, %s : f32[?]\n\tret %a\n}\n", in, 2, NULL,
	      "tile: dim 0 times 4611686018427387904 overflows 64 bits");
	/* slice: a step of INT64_MIN (negating it overflowed), as operands and
	 * as attributes (shape inference) */
	tensor_free(&in[1]);
	in[1] = i64s(1, (int64_t[]){3});
	in[2] = i64s(1, (int64_t[]){INT64_MIN});
	in[3] = i64s(1, (int64_t[]){0});
	{
		Tensor st = i64s(1, (int64_t[]){INT64_MIN});
		Tensor all[5] = {in[0], in[1], in[2], in[3], st};
		ok(&r, "graph @t(%x: f32[4], %s: i64[1], %e: i64[1], %a: i64[1], %p: i64[1]) -> "
		       "(y: f32[?], z: f32[?]) {\n"
		       "\t%y = slice %x, %s, %e, %a, %p : f32[?]\n"
		       "\t%z = slice %x, starts=[3], ends=[-9223372036854775808], "
		       "steps=[-9223372036854775808] : f32[1]\n\tret %y, %z\n}\n", all, 5);
		expect(&r.out[0], DT_F32, DIM(1), VAL(4), 0);
		expect(&r.out[1], DT_F32, DIM(1), VAL(4), 0);
		done(&r, all, 5);
	}
}
END_TEST

START_TEST(test_eval_shape_size_range_constants)
{
	Tensor in[7] = {
		zeros(DT_F32, DIM(2, 3, 4)),
		ten(DT_I32, SCALAR, VAL(1)), ten(DT_I32, SCALAR, VAL(10)), ten(DT_I32, SCALAR, VAL(3)),
		ten(DT_F32, SCALAR, VAL(0)), ten(DT_F32, SCALAR, VAL(1)), ten(DT_F32, SCALAR, VAL(0.3)),
	};
	Run r;

	ok(&r, "graph @s(%x: f32[T,3,4], %a: i32[], %b: i32[], %c: i32[], %p: f32[], %q: f32[], "
	       "%r: f32[]) -> (s: i64[2], t: i64[2], n: i64[], i: i32[?], f: f32[?], "
	       "k: i32[2,T], z: f32[1,3], u: f32[2], v: i32[3], w: bf16[2], m: f64[T]) {\n"
	       "\t%s = shape %x, start=1 : i64[2]\n"
	       "\t%t = shape %x, end=-1 : i64[2]\n"
	       "\t%n = size %x : i64[]\n"
	       "\t%i = range %a, %b, %c : i32[?]\n"
	       "\t%f = range %p, %q, %r : f32[?]\n"
	       "\t%k = constant_of_shape shape=[2,T], value=[3], to=i32 : i32[2,T]\n"
	       "\t%one3 = const value=[1, 3] : i64[2]\n"
	       "\t%z = constant_of_shape %one3, value=1.5 : f32[1,3]\n"
	       "\t%u = constant_of_shape shape=[2] : f32[2]\n"
	       "\t%v = const value=[1, 2, 3] : i32[3]\n"
	       "\t%w = const value=[0.5, 0.1] : bf16[2]\n"
	       "\t%m = constant_of_shape shape=[T], value=0.1, to=f64 : f64[T]\n"
	       "\tret %s, %t, %n, %i, %f, %k, %z, %u, %v, %w, %m\n}\n", in, 7);
	expect(&r.out[0], DT_I64, DIM(2), VAL(3, 4), 0);
	expect(&r.out[1], DT_I64, DIM(2), VAL(2, 3), 0);
	expect(&r.out[2], DT_I64, SCALAR, VAL(24), 0);
	expect(&r.out[3], DT_I32, DIM(3), VAL(1, 4, 7), 0);
	expect(&r.out[4], DT_F32, DIM(4), VAL(0, 0.3f, 0.6f, (float)(3 * (double)0.3f)), 0);
	expect(&r.out[5], DT_I32, DIM(2, 2), VAL(3, 3, 3, 3), 0);
	expect(&r.out[6], DT_F32, DIM(1, 3), VAL(1.5, 1.5, 1.5), 0);
	expect(&r.out[7], DT_F32, DIM(2), VAL(0, 0), 0);
	expect(&r.out[8], DT_I32, DIM(3), VAL(1, 2, 3), 0);
	expect(&r.out[9], DT_BF16, DIM(2), VAL(0.5, rnd(DT_BF16, 0.1)), 0);
	expect(&r.out[10], DT_F64, DIM(2), VAL(0.1, 0.1), 0);
	done(&r, in, 7);
	Tensor z[3] = {ten(DT_I64, SCALAR, VAL(0)), ten(DT_I64, SCALAR, VAL(5)),
		       ten(DT_I64, SCALAR, VAL(0))};
	fails("graph @r(%a: i64[], %b: i64[], %c: i64[]) -> (i: i64[?]) {\n"
	      "\t%i = range %a, %b, %c : i64[?]\n\tret %i\n}\n", z, 3, NULL,
	      "range: delta is zero");
	dtype_store_int(DT_I64, z[0].data, 0, 5);
	dtype_store_int(DT_I64, z[1].data, 0, 0);
	dtype_store_int(DT_I64, z[2].data, 0, -2);
	ok(&r, "graph @r(%a: i64[], %b: i64[], %c: i64[]) -> (i: i64[?]) {\n"
	       "\t%i = range %a, %b, %c : i64[?]\n\tret %i\n}\n", z, 3);
	expect(&r.out[0], DT_I64, DIM(3), VAL(5, 3, 1), 0);
	done(&r, z, 3);
}
END_TEST

/* --- quantisation -------------------------------------------------------- */

START_TEST(test_eval_quantize_layouts)
{
	Tensor in[10] = {
		ten(DT_F32, DIM(6), VAL(0, 1, 2.5, 3.5, -300, 1000)),
		ten(DT_F32, SCALAR, VAL(1)),
		ten(DT_U8, SCALAR, VAL(128)),
		ten(DT_F32, SCALAR, VAL(0.5)),
		ten(DT_F32, DIM(2, 2), VAL(1, 2, 3, 4)),
		ten(DT_F32, DIM(2), VAL(1, 2)),
		ten(DT_F32, DIM(1, 4), VAL(1, 2, 3, 4)),
		ten(DT_F32, DIM(1, 2), VAL(1, 0.5)),
		ten(DT_F32, DIM(3), VAL(1, 500, -1000)),
		ten(DT_F8E4M3, SCALAR, VAL(0)),
	};
	Run r;

	ok(&r, "graph @q(%x: f32[6], %one: f32[], %z: u8[], %half: f32[], %m: f32[2,2], "
	       "%s2: f32[2], %b: f32[1,4], %sb: f32[1,2], %f: f32[3], %fz: f8e4m3[]) -> "
	       "(a: u8[6], c: u8[6], d: i8[2,2], e: i8[1,4], g: f8e4m3[3], h: f8e4m3[3]) {\n"
	       "\t%a = quantize %x, %one, %z : u8[6]\n"
	       "\t%c = quantize %x, %half : u8[6]\n"
	       "\t%d = quantize %m, %s2, to=i8 : i8[2,2]\n"
	       "\t%e = quantize %b, %sb, axis=-1, block_size=2, to=i8 : i8[1,4]\n"
	       "\t%g = quantize %f, %one, %fz : f8e4m3[3]\n"
	       "\t%h = quantize %f, %one, %fz, saturate=0 : f8e4m3[3]\n"
	       "\tret %a, %c, %d, %e, %g, %h\n}\n", in, 10);
	/* round half to even, plus the zero point, saturated to u8 */
	expect(&r.out[0], DT_U8, DIM(6), VAL(128, 129, 130, 132, 0, 255), 0);
	expect(&r.out[1], DT_U8, DIM(6), VAL(0, 2, 5, 7, 0, 255), 0);
	expect(&r.out[2], DT_I8, DIM(2, 2), VAL(1, 1, 3, 2), 0);
	expect(&r.out[3], DT_I8, DIM(1, 4), VAL(1, 2, 6, 8), 0);
	expect(&r.out[4], DT_F8E4M3, DIM(3), VAL(1, 448, -448), 0);
	expect(&r.out[5], DT_F8E4M3, DIM(3), VAL(1, NAN, NAN), 0);
	done(&r, in, 10);
}
END_TEST

START_TEST(test_eval_dequantize_layouts)
{
	Tensor in[7] = {
		ten(DT_I8, DIM(4), VAL(-2, 0, 3, 127)),
		ten(DT_F32, SCALAR, VAL(0.5)),
		ten(DT_I8, SCALAR, VAL(1)),
		ten(DT_U8, DIM(2, 2), VAL(10, 20, 30, 40)),
		ten(DT_F32, DIM(2), VAL(1, 2)),
		ten(DT_U8, DIM(2), VAL(10, 20)),
		ten(DT_F8E4M3, DIM(2), VAL(1.5, -2)),
	};
	Run r;

	ok(&r, "graph @d(%x: i8[4], %s: f32[], %z: i8[], %u: u8[2,2], %s2: f32[2], %z2: u8[2], "
	       "%f: f8e4m3[2]) -> (a: f32[4], b: f32[2,2], c: bf16[2]) {\n"
	       "\t%a = dequantize %x, %s, %z : f32[4]\n"
	       "\t%b = dequantize %u, %s2, %z2, axis=0 : f32[2,2]\n"
	       "\t%two = const value=[2.0] : f32[]\n"
	       "\t%c = dequantize %f, %two, to=bf16 : bf16[2]\n"
	       "\tret %a, %b, %c\n}\n", in, 7);
	expect(&r.out[0], DT_F32, DIM(4), VAL(-1.5, -0.5, 1, 63), 0);
	expect(&r.out[1], DT_F32, DIM(2, 2), VAL(0, 10, 20, 40), 0);
	expect(&r.out[2], DT_BF16, DIM(2), VAL(3, -4), 0);
	done(&r, in, 7);
}
END_TEST

/* MXFP4: e2m1 values, one e8m0 scale per 32 along the last axis (exact) */
START_TEST(test_eval_dequantize_mxfp4)
{
	double x[64], sc[4] = {0.25, 8, 1.0 / 1024, 1};
	Tensor in[3];
	Run r;

	for (int i = 0; i < 64; i++)
		x[i] = (i & 1 ? -1 : 1) * (double[]){0, 0.5, 1, 1.5, 2, 3, 4, 6}[i % 8];
	in[0] = ten(DT_F4E2M1, DIM(2, 32), x);
	in[1] = ten(DT_F8E8M0, DIM(2, 1), sc);
	in[2] = ten(DT_F8E8M0, DIM(2, 2), sc);
	ok(&r, "graph @m(%x: f4e2m1[2,32], %s: f8e8m0[2,1], %s2: f8e8m0[2,2]) -> "
	       "(a: f32[2,32], b: bf16[2,32]) {\n"
	       "\t%a = dequantize %x, %s, axis=1, block_size=32 : f32[2,32]\n"
	       "\t%b = dequantize %x, %s2, axis=1, block_size=16, to=bf16 : bf16[2,32]\n"
	       "\tret %a, %b\n}\n", in, 3);
	for (int i = 0; i < 64; i++)
		ck_assert_double_eq(dtype_load(DT_F32, r.out[0].data, (size_t)i), x[i] * sc[i / 32]);
	for (int i = 0; i < 64; i++)
		ck_assert_double_eq(dtype_load(DT_BF16, r.out[1].data, (size_t)i), x[i] * sc[i / 16]);
	done(&r, in, 3);
}
END_TEST

START_TEST(test_eval_quantize_dynamic_groups)
{
	Tensor in[1] = {ten(DT_F32, DIM(2, 4), VAL(1, -2, 0.5, 4, 0, 0, 0, 0))};
	Run r;
	double s4 = (float)(4.0 / 127), s2 = (float)(2.0 / 127), st = (float)(4.0 / 448);

	ok(&r, "graph @q(%x: f32[2,4]) -> (a: i8[2,4], b: f32[2,1], c: f8e4m3[2,4], d: f32[], "
	       "e: i8[2,4], f: f32[2,2]) {\n"
	       "\t%a, %b = quantize_dynamic %x, to=i8, group=row : i8[2,4], f32[2,1]\n"
	       "\t%c, %d = quantize_dynamic %x : f8e4m3[2,4], f32[]\n"
	       "\t%e, %f = quantize_dynamic %x, to=i8, group=2 : i8[2,4], f32[2,2]\n"
	       "\tret %a, %b, %c, %d, %e, %f\n}\n", in, 1);
	/* scale = amax / 127; 31.75 -> 32, -63.5 -> -64 (half to even); amax 0: scale 1 */
	expect(&r.out[0], DT_I8, DIM(2, 4), VAL(32, -64, 16, 127, 0, 0, 0, 0), 0);
	expect(&r.out[1], DT_F32, DIM(2, 1), VAL(s4, 1), 0);
	expect(&r.out[2], DT_F8E4M3, DIM(2, 4), VAL(112, -224, 56, 448, 0, 0, 0, 0), 0);
	expect(&r.out[3], DT_F32, SCALAR, VAL(st), 0);
	expect(&r.out[4], DT_I8, DIM(2, 4), VAL(64, -127, 16, 127, 0, 0, 0, 0), 0);
	expect(&r.out[5], DT_F32, DIM(2, 2), VAL(s2, s4, 1, 1), 0);
	done(&r, in, 1);
}
END_TEST

/* --- mixture of experts -------------------------------------------------- */

START_TEST(test_eval_route_hand_computed)
{
	Tensor in[3] = {
		ten(DT_F32, DIM(2, 4), VAL(1, 3, 2, 3, 0, 0, 0, 0)),
		ten(DT_F32, DIM(1, 4), VAL(3, -1, 2, 2.5)),
		ten(DT_F32, DIM(4), VAL(0, 0.1, -0.1, 0.2)),
	};
	Run r;
	double p3 = exp(3.0) / (exp(1.0) + 2 * exp(3.0) + exp(2.0));
	double s3 = 1 / (1 + exp(-3.0)), sm1 = 1 / (1 + exp(1.0));
	double s2 = 1 / (1 + exp(-2.0)), s25 = 1 / (1 + exp(-2.5));

	ok(&r, "graph @r(%l: f32[2,4], %g: f32[1,4], %b: f32[4]) -> (w: f32[2,2], i: i32[2,2], "
	       "w2: f32[2,2], w3: f32[2,2], i3: i32[2,2], w4: f32[1,2], i4: i32[1,2], "
	       "w5: f32[1,2], i5: i32[1,2], w6: f32[2,2], i6: i32[2,2]) {\n"
	       "\t%w, %i = route %l, k=2 : f32[2,2], i32[2,2]\n"
	       "\t%w2, %i2 = route %l, k=2, renorm=1 : f32[2,2], i32[2,2]\n"
	       "\t%w3, %i3 = route %l, %b, router=sigmoid, k=2, scale=2.0 : f32[2,2], i32[2,2]\n"
	       "\t%w4, %i4 = route %g, router=sigmoid, k=2, n_group=2, topk_group=1 : f32[1,2], i32[1,2]\n"
	       "\t%w5, %i5 = route %g, router=sigmoid, k=2, n_group=2, topk_group=1, "
	       "group_score=top2 : f32[1,2], i32[1,2]\n"
	       "\t%w6, %i6 = route %l, router=topk_softmax, k=2 : f32[2,2], i32[2,2]\n"
	       "\tret %w, %i, %w2, %w3, %i3, %w4, %i4, %w5, %i5, %w6, %i6\n}\n", in, 3);
	/* ties go to the lower expert id */
	expect(&r.out[0], DT_F32, DIM(2, 2), VAL(p3, p3, 0.25, 0.25), 1e-7);
	expect(&r.out[1], DT_I32, DIM(2, 2), VAL(1, 3, 0, 1), 0);
	expect(&r.out[2], DT_F32, DIM(2, 2), VAL(0.5, 0.5, 0.5, 0.5), 0);
	/* the bias steers the choice, the weights stay unbiased, then scaled */
	expect(&r.out[3], DT_F32, DIM(2, 2),
	       VAL(2 / (1 + exp(-3.0)), 2 / (1 + exp(-3.0)), 1, 1), 1e-7);
	expect(&r.out[4], DT_I32, DIM(2, 2), VAL(3, 1, 3, 1), 0);
	/* groups {0,1}, {2,3}: by max, group 0 (0.953) wins; by top-2 sums, group 1 */
	expect(&r.out[5], DT_F32, DIM(1, 2), VAL(s3, sm1), 1e-7);
	expect(&r.out[6], DT_I32, DIM(1, 2), VAL(0, 1), 0);
	expect(&r.out[7], DT_F32, DIM(1, 2), VAL(s25, s2), 1e-7);
	expect(&r.out[8], DT_I32, DIM(1, 2), VAL(3, 2), 0);
	/* topk_softmax: softmax over the k chosen logits */
	expect(&r.out[9], DT_F32, DIM(2, 2), VAL(0.5, 0.5, 0.5, 0.5), 0);
	expect(&r.out[10], DT_I32, DIM(2, 2), VAL(1, 3, 0, 1), 0);
	done(&r, in, 3);
}
END_TEST

/* The routing a test compares records what the router ranks: ERNIE's
 * softmax probabilities plus its selection bias, not the logits, which
 * order the experts otherwise (before, every such token looked like a near
 * tie: a flip on the device was excused, and full-size references had no
 * rows left). */
START_TEST(test_eval_routing_ranks_softmax_plus_bias)
{
	/* logits 2, 1, 0, -1 (softmax .64 .24 .09 .03) with bias 0, 0, 0.3, 0:
	 * top-2 by p + b is {0, 2} (0.64, 0.39 against 0.24), by logits {0, 1} */
	Tensor in[2] = {ten(DT_F32, DIM(1, 4), VAL(2, 1, 0, -1)), ten(DT_F32, DIM(4), VAL(0, 0, 0.3, 0))};
	RouteLog log = {0};
	EvalOpts eo = {.hook = ir_route_log_hook, .hook_ctx = &log};
	double sum = exp(2.0) + exp(1.0) + exp(0.0) + exp(-1.0);
	Run r;

	eval_text(&r, "graph @r(%l: f32[1,4], %b: f32[4]) -> (w: f32[1,2], i: i32[1,2]) {\n"
		  "\t%w, %i = route %l, %b, k=2 : f32[1,2], i32[1,2]\n"
		  "\tret %w, %i\n}\n", in, 2, &eo, 1);
	ck_assert_msg(r.rc == 0, "%s", r.log);
	expect(&r.out[1], DT_I32, DIM(1, 2), VAL(0, 2), 0);
	ck_assert_int_eq(log.n, 1);
	ck_assert_str_eq(log.r[0].what, "score");
	ck_assert_float_eq_tol(log.r[0].val[1], exp(1.0) / sum, 1e-6);
	ck_assert_float_eq_tol(log.r[0].val[2], 1 / sum + 0.3, 1e-6);
	ck_assert(routing_clear(&log.r[0], 0, 1e-4, 1e-3));
	route_log_free(&log);
	done(&r, in, 2);
}
END_TEST

START_TEST(test_eval_permute_hand_computed)
{
	Tensor in[1] = {ten(DT_I32, DIM(3, 2), VAL(2, 0, 1, 2, 0, 2))};
	Run r;

	ok(&r, "graph @p(%i: i32[T,2]) -> (o: i32[5], r: i32[2*T], s: i32[2*T]) {\n"
	       "\t%o, %r, %s = permute %i, experts=4 : i32[5], i32[2*T], i32[2*T]\n"
	       "\tret %o, %r, %s\n}\n", in, 1);
	/* expert 0 gets slots 1, 4; expert 1 slot 2; expert 2 slots 0, 3, 5 */
	expect(&r.out[0], DT_I32, DIM(5), VAL(0, 2, 3, 6, 6), 0);
	expect(&r.out[1], DT_I32, DIM(6), VAL(1, 4, 2, 0, 3, 5), 0);
	expect(&r.out[2], DT_I32, DIM(6), VAL(3, 0, 2, 4, 1, 5), 0);
	done(&r, in, 1);
	Tensor bad[1] = {ten(DT_I32, DIM(1, 1), VAL(4))};
	fails("graph @p(%i: i32[1,1]) -> (o: i32[5], r: i32[1], s: i32[1]) {\n"
	      "\t%o, %r, %s = permute %i, experts=4 : i32[5], i32[1], i32[1]\n"
	      "\tret %o, %r, %s\n}\n", bad, 1, NULL, "permute: expert id 4 out of range");
	tensor_free(&bad[0]);
}
END_TEST

/* A negative id drops its slot: after offsets[E], in slot order. */
START_TEST(test_eval_permute_drops_negative_ids)
{
	Tensor in[1] = {ten(DT_I32, DIM(3, 2), VAL(1, -1, -1, 0, 1, -1))};
	Run r;

	ok(&r, "graph @p(%i: i32[T,2]) -> (o: i32[3], r: i32[2*T], s: i32[2*T]) {\n"
	       "\t%o, %r, %s = permute %i, experts=2 : i32[3], i32[2*T], i32[2*T]\n"
	       "\tret %o, %r, %s\n}\n", in, 1);
	expect(&r.out[0], DT_I32, DIM(3), VAL(0, 1, 3), 0);
	expect(&r.out[1], DT_I32, DIM(6), VAL(3, 0, 4, 1, 2, 5), 0);
	expect(&r.out[2], DT_I32, DIM(6), VAL(1, 3, 4, 0, 2, 5), 0);
	done(&r, in, 1);
}
END_TEST

/* ep_pack by hand: 3 tokens, top-2 of 4 experts, experts 0,1 on rank 0
 * and 2,3 on rank 1 (local ids 0,1 on each). */
START_TEST(test_eval_ep_pack_hand_computed)
{
	Tensor in[3] = {ten(DT_F32, DIM(3, 2), VAL(1, 2, 3, 4, 5, 6)),
			ten(DT_F32, DIM(3, 2), VAL(.5, .25, .75, .125, .625, .375)),
			ten(DT_I32, DIM(3, 2), VAL(2, 0, 3, 2, 1, 0))};
	Run r;

	ok(&r, "graph @p(%x: f32[T,2], %w: f32[T,2], %i: i32[T,2]) -> (xs: f32[2,T,2], ws: f32[2,T,2], "
	       "is: i32[2,T,2], back: i32[2*T]) {\n"
	       "\t%xs, %ws, %is, %back = ep_pack %x, %w, %i, local=[0, 1, 0, 1], owner=[0, 0, 1, 1], "
	       "ranks=2 : f32[2,T,2], f32[2,T,2], i32[2,T,2], i32[2*T]\n"
	       "\tret %xs, %ws, %is, %back\n}\n", in, 3);
	/* rank 0 gets tokens 0 (slot 1) and 2 (both slots); rank 1 tokens 0 (slot 0) and 1 */
	expect(&r.out[0], DT_F32, DIM(2, 3, 2), VAL(1, 2, 5, 6, 0, 0, 1, 2, 3, 4, 0, 0), 0);
	expect(&r.out[1], DT_F32, DIM(2, 3, 2), VAL(0, .25, .625, .375, 0, 0, .5, 0, .75, .125, 0, 0), 0);
	expect(&r.out[2], DT_I32, DIM(2, 3, 2), VAL(-1, 0, 1, 0, -1, -1, 0, -1, 1, 0, -1, -1), 0);
	/* back: (d*T + j)*k + i */
	expect(&r.out[3], DT_I32, DIM(6), VAL(6, 1, 8, 9, 2, 3), 0);
	done(&r, in, 3);
	Tensor bad[3] = {ten(DT_F32, DIM(1, 2), VAL(1, 2)), ten(DT_F32, DIM(1, 1), VAL(1)),
			 ten(DT_I32, DIM(1, 1), VAL(4))};
	fails("graph @p(%x: f32[1,2], %w: f32[1,1], %i: i32[1,1]) -> (b: i32[1]) {\n"
	      "\t%xs, %ws, %is, %b = ep_pack %x, %w, %i, local=[0, 0, 0, 0], owner=[0, 0, 0, 0], "
	      "ranks=1 : f32[1,1,2], f32[1,1,1], i32[1,1,1], i32[1]\n\tret %b\n}\n", bad, 3, NULL,
	      "ep_pack: expert id 4 out of range for 4 experts");
	for (int i = 0; i < 3; i++)
		tensor_free(&bad[i]);
}
END_TEST

static const char a2a_text[] =
	"graph @a(%x: f32[2,T]) -> (y: f32[2,T]) {\n"
	"\t%y = all_to_all %x, ranks=2 : f32[2,T]\n\tret %y\n}\n";

/* Two ranks in one process; shapes that differ between ranks, or one rank
 * alone, are errors (and nobody waits forever). */
START_TEST(test_eval_all_to_all_between_ranks)
{
	Diag d;
	Module *m[2];
	Graph *g[2];
	Tensor in0[1] = {ten(DT_F32, DIM(2, 2), VAL(1, 2, 3, 4))};
	Tensor in1[1] = {ten(DT_F32, DIM(2, 2), VAL(5, 6, 7, 8))};
	Tensor in1b[1] = {ten(DT_F32, DIM(2, 3), VAL(5, 6, 7, 8, 9, 10))};
	Tensor out0[1], out1[1], *in[2] = {in0, in1}, *out[2] = {out0, out1};

	diag_init(&d, NULL);
	for (int i = 0; i < 2; i++) {
		m[i] = ir_parse("a.ir", a2a_text, strlen(a2a_text), &d);
		ck_assert_ptr_nonnull(m[i]);
		g[i] = ir_main_graph(m[i]);
	}
	ck_assert_int_eq(ir_eval_ranks(g, 2, in, 1, out, NULL, &d), 0);
	expect(&out0[0], DT_F32, DIM(2, 2), VAL(1, 2, 5, 6), 0);
	expect(&out1[0], DT_F32, DIM(2, 2), VAL(3, 4, 7, 8), 0);
	tensor_free(&out0[0]);
	tensor_free(&out1[0]);
	in[1] = in1b;
	ck_assert_int_eq(ir_eval_ranks(g, 2, in, 1, out, NULL, &d), -1);
	ck_assert_msg(strstr(d.last, "sends a different shape"), "%s", d.last);
	ck_assert_ptr_null(out0[0].data);
	ck_assert_ptr_null(out1[0].data);
	fails(a2a_text, in0, 1, NULL, "all_to_all over 2 ranks needs its peers");
	for (int i = 0; i < 2; i++)
		ir_free_module(m[i]);
	tensor_free(&in0[0]);
	tensor_free(&in1[0]);
	tensor_free(&in1b[0]);
}
END_TEST

/* The moe op written out as plain loops, independently of eval_moe.c:
 * selection by repeated arg-max instead of a sort. */
typedef struct {
	int router;		/* 0 softmax, 1 sigmoid, 2 topk_softmax */
	int k, renorm, ngroup, topk_group, top2, act, interleave;
	double scale;
	int T, H, I, E;
	DType dt;
	double *x, *l, *sb, *gu, *dn, *bgu, *bdn;
} MoeRef;

static double
sig(double x)
{
	return 1 / (1 + exp(-x));
}

/* Index of the largest v[i] not yet taken (lower index on ties). */
static int
argmax_free(const double *v, const int *taken, int n)
{
	int best = -1;

	for (int i = 0; i < n; i++)
		if (!taken[i] && (best < 0 || v[i] > v[best]))
			best = i;
	return best;
}

static void
ref_route(const MoeRef *p, const double *l, int *ids, double *w)
{
	double s[16], sel[16], gs[16], m = -INFINITY, sum = 0;
	int taken[16] = {0}, gt[16] = {0}, gsize = p->E / p->ngroup;

	for (int e = 0; e < p->E; e++)
		m = fmax(m, l[e]);
	for (int e = 0; e < p->E; e++)
		sum += exp(l[e] - m);
	for (int e = 0; e < p->E; e++) {
		s[e] = p->router == 0 ? (float)(exp(l[e] - m) / sum)
		     : p->router == 1 ? (float)sig(l[e]) : l[e];
		sel[e] = p->sb ? (float)(s[e] + p->sb[e]) : s[e];
	}
	for (int g = 0; p->ngroup > 1 && g < p->ngroup; g++) {
		int used[16] = {0}, a = argmax_free(&sel[g * gsize], used, gsize);
		used[a] = 1;
		gs[g] = sel[g * gsize + a];
		if (p->top2)
			gs[g] += sel[g * gsize + argmax_free(&sel[g * gsize], used, gsize)];
	}
	for (int j = 0; p->ngroup > 1 && j < p->topk_group; j++)
		gt[argmax_free(gs, gt, p->ngroup)] = 1;
	for (int e = 0; p->ngroup > 1 && e < p->E; e++)
		if (!gt[e / gsize])
			sel[e] = -INFINITY;
	sum = 0;
	for (int j = 0; j < p->k; j++) {
		ids[j] = argmax_free(sel, taken, p->E);
		taken[ids[j]] = 1;
	}
	for (int j = 0; j < p->k; j++) {
		w[j] = p->router == 2 ? exp(l[ids[j]] - l[ids[0]]) : s[ids[j]];
		sum += w[j];
	}
	for (int j = 0; j < p->k; j++)
		w[j] = (float)((p->router == 2 || p->renorm ? w[j] / sum : w[j]) * p->scale);
}

static double
ref_act(const MoeRef *p, double g, double u)
{
	if (p->act == 0)
		return g * sig(g) * u;
	if (p->act == 1)
		return 0.5 * g * (1 + erf(g / sqrt(2.0))) * u;
	g = fmin(g, 7.0);
	u = fmax(-7.0, fmin(u, 7.0));
	return (u + 1) * (g * sig(1.702 * g));
}

static void
moe_ref(const MoeRef *p, double *y)
{
	int H = p->H, I = p->I, ids[16];
	double w[16], h[64], a[32];

	for (int t = 0; t < p->T; t++) {
		ref_route(p, &p->l[t * p->E], ids, w);
		for (int c = 0; c < H; c++)
			y[t * H + c] = 0;
		for (int j = 0; j < p->k; j++) {
			int e = ids[j];
			for (int c = 0; c < 2 * I; c++) {
				double s = 0;
				for (int k = 0; k < H; k++)
					s += p->x[t * H + k] * p->gu[(e * 2 * I + c) * H + k];
				h[c] = rnd(p->dt, s + (p->bgu ? p->bgu[e * 2 * I + c] : 0));
			}
			for (int i = 0; i < I; i++)
				a[i] = rnd(p->dt, p->interleave ? ref_act(p, h[2 * i], h[2 * i + 1])
								: ref_act(p, h[i], h[I + i]));
			for (int c = 0; c < H; c++) {
				double s = 0;
				for (int i = 0; i < I; i++)
					s += a[i] * p->dn[(e * H + c) * I + i];
				y[t * H + c] += w[j] * (s + (p->bdn ? p->bdn[e * H + c] : 0));
			}
		}
	}
}

static uint64_t lcg = 12345;

static double
urand(double lo, double hi)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

static Tensor
rand_tensor(DType dt, int rank, const int64_t *dim, double lo, double hi)
{
	Tensor t = zeros(dt, rank, dim);

	for (int64_t i = 0; i < tensor_numel(&t); i++)
		dtype_store(dt, t.data, (size_t)i, urand(lo, hi));
	return t;
}

static double *
doubles_of(const Tensor *t)
{
	double *v = malloc(sizeof *v * (size_t)(tensor_numel(t) + 1));

	for (int64_t i = 0; i < tensor_numel(t); i++)
		v[i] = dtype_load(t->dt, t->data, (size_t)i);
	return v;
}

static double *
weight_doubles(Module *m, const char *name)
{
	Weight *w = ir_find_weight(m, name);
	Diag d;
	Tensor t;

	if (!w)
		return NULL;
	diag_init(&d, stderr);
	memset(&t, 0, sizeof t);
	t.dt = w->value->type.dt;
	t.rank = w->value->type.rank;
	for (int i = 0; i < t.rank; i++)
		t.dim[i] = w->value->type.dim[i];
	t.data = (void *)ir_weight_data(w, &d);
	ck_assert_ptr_nonnull(t.data);
	return doubles_of(&t);
}

/* Run the moe text on random x and logits and compare with moe_ref. */
static void
check_moe(MoeRef *p, const char *text, double tol)
{
	Tensor in[2] = {
		rand_tensor(p->dt, DIM(p->T, p->H), -1, 1),
		rand_tensor(DT_F32, DIM(p->T, p->E), -2, 2),
	};
	double *y = malloc(sizeof *y * (size_t)(p->T * p->H));
	Run r;

	ok(&r, text, in, 2);
	p->x = doubles_of(&in[0]);
	p->l = doubles_of(&in[1]);
	p->sb = weight_doubles(r.m, "sb");
	p->gu = weight_doubles(r.m, "wgu");
	p->dn = weight_doubles(r.m, "wdn");
	p->bgu = weight_doubles(r.m, "bgu");
	p->bdn = weight_doubles(r.m, "bdn");
	moe_ref(p, y);
	for (int i = 0; i < p->T * p->H; i++)
		y[i] = rnd(p->dt, y[i]);
	expect(&r.out[0], p->dt, DIM(p->T, p->H), y, tol);
	free(p->x), free(p->l), free(p->sb), free(p->gu), free(p->dn), free(p->bgu), free(p->bdn);
	free(y);
	done(&r, in, 2);
}

START_TEST(test_eval_moe_softmax_renorm_matches_loops)
{
	MoeRef p = {.router = 0, .k = 2, .renorm = 1, .ngroup = 1, .scale = 1,
		    .T = 5, .H = 6, .I = 4, .E = 4, .dt = DT_F32};

	check_moe(&p, "weight $wgu : f32[4,8,6] seed=1\n"
		      "weight $wdn : f32[4,6,4] seed=2\n"
		      "graph @m(%x: f32[T,6], %l: f32[T,4]) -> (y: f32[T,6]) {\n"
		      "\t%y = moe %x, %l, _, $wgu, $wdn, k=2, renorm=1 : f32[T,6]\n"
		      "\tret %y\n}\n", 1e-6);
}
END_TEST

START_TEST(test_eval_moe_sigmoid_bias_groups_matches_loops)
{
	MoeRef p = {.router = 1, .k = 3, .renorm = 1, .ngroup = 4, .topk_group = 2, .top2 = 1,
		    .act = 1, .scale = 2.5, .T = 6, .H = 4, .I = 3, .E = 8, .dt = DT_F32};

	check_moe(&p, "weight $sb : f32[8] seed=3 scale=0.5\n"
		      "weight $wgu : f32[8,6,4] seed=4\n"
		      "weight $wdn : f32[8,4,3] seed=5\n"
		      "graph @m(%x: f32[T,4], %l: f32[T,8]) -> (y: f32[T,4]) {\n"
		      "\t%y = moe %x, %l, $sb, $wgu, $wdn, router=sigmoid, k=3, renorm=1, "
		      "scale=2.5, n_group=4, topk_group=2, group_score=top2, act=gelu : f32[T,4]\n"
		      "\tret %y\n}\n", 1e-6);
	p.top2 = 0;
	p.ngroup = 2;
	p.topk_group = 1;
	p.renorm = 0;
	check_moe(&p, "weight $sb : f32[8] seed=3 scale=0.5\n"
		      "weight $wgu : f32[8,6,4] seed=4\n"
		      "weight $wdn : f32[8,4,3] seed=5\n"
		      "graph @m(%x: f32[T,4], %l: f32[T,8]) -> (y: f32[T,4]) {\n"
		      "\t%y = moe %x, %l, $sb, $wgu, $wdn, router=sigmoid, k=3, "
		      "scale=2.5, n_group=2, topk_group=1, act=gelu : f32[T,4]\n"
		      "\tret %y\n}\n", 1e-6);
}
END_TEST

START_TEST(test_eval_moe_topk_softmax_oai_bf16_matches_loops)
{
	MoeRef p = {.router = 2, .k = 2, .ngroup = 1, .act = 2, .interleave = 1, .scale = 1,
		    .T = 4, .H = 6, .I = 4, .E = 4, .dt = DT_BF16};

	check_moe(&p, "weight $wgu : bf16[4,8,6] seed=6\n"
		      "weight $wdn : bf16[4,6,4] seed=7\n"
		      "weight $bgu : bf16[4,8] seed=8 scale=0.1\n"
		      "weight $bdn : bf16[4,6] seed=9 scale=0.1\n"
		      "graph @m(%x: bf16[T,6], %l: f32[T,4]) -> (y: bf16[T,6]) {\n"
		      "\t%y = moe %x, %l, _, $wgu, $wdn, $bgu, $bdn, router=topk_softmax, k=2, "
		      "act=oai, gu_layout=interleave : bf16[T,6]\n"
		      "\tret %y\n}\n", 0);
}
END_TEST

/*
 * route -> permute -> gather rows -> grouped_matmul -> swiglu ->
 * grouped_matmul -> scatter_rows -> weighted sum over k reproduces moe bit
 * for bit: the down projection is kept in f64 so that, like moe, only h
 * and a are rounded to bf16 before the final sum.
 */
/*
 * A dequantize that only moe's expert stacks read is deferred (moe
 * dequantises rows as it reads them: a full-size FP8 stack is never held);
 * returned as well, it runs whole.  Both give the same bits: int4 with zero
 * points in blocks of 32, FP8 in blocks of 128, synthetic weights.
 */
#define QMOE(RET, RETV) \
	"weight $router : bf16[8,64]\n" \
	"weight $wguq : i4[8,256,64] scale=7\n" \
	"weight $wgus : bf16[8,256,2] mean=0.02 scale=0.005\n" \
	"weight $wguz : i4[8,256,2] scale=3\n" \
	"weight $wdq : f8e4m3[8,64,128] scale=200\n" \
	"weight $wds : f32[8,64,1] mean=0.003 scale=0.001\n" \
	"graph @moe(%x: bf16[T,64]) -> (y: bf16[T,64]" RET ") {\n" \
	"\t%logits = matmul %x, $router, to=f32, trans_b=1 : f32[T,8]\n" \
	"\t%wgu = dequantize $wguq, $wgus, $wguz, axis=2, block_size=32, to=bf16 : bf16[8,256,64]\n" \
	"\t%wd = dequantize $wdq, $wds, axis=2, block_size=128, to=bf16 : bf16[8,64,128]\n" \
	"\t%y = moe %x, %logits, _, %wgu, %wd, k=2, renorm=1, router=softmax : bf16[T,64]\n" \
	"\tret %y" RETV "\n}\n"

START_TEST(test_eval_moe_deferred_dequantize_same_bits)
{
	Tensor in[2] = {rand_tensor(DT_BF16, DIM(5, 64), -1, 1)}, in2[1];
	Run a, b;
	int deferred = 0;

	in2[0] = in[0];
	ok(&a, QMOE("", ""), in, 1);
	ok(&b, QMOE(", wgu: bf16[8,256,64], wd: bf16[8,64,128]", ", %wgu, %wd"), in2, 1);
	for (const Node *n = ir_main_graph(a.m)->first; n; n = n->next)
		deferred += ir_eval_defers(ir_main_graph(a.m), n);
	ck_assert_int_eq(deferred, 2);
	for (const Node *n = ir_main_graph(b.m)->first; n; n = n->next)
		ck_assert_int_eq(ir_eval_defers(ir_main_graph(b.m), n), 0);
	ck_assert_int_eq(a.out[0].dt, b.out[0].dt);
	ck_assert_mem_eq(a.out[0].data, b.out[0].data, tensor_nbytes(&a.out[0]));
	done(&b, in2, 0);
	done(&a, in, 1);
}
END_TEST

START_TEST(test_eval_moe_equals_its_decomposition)
{
	Tensor in[2] = {
		rand_tensor(DT_BF16, DIM(7, 6), -1, 1),
		rand_tensor(DT_F32, DIM(7, 4), -2, 2),
	};
	Run r;

	ok(&r, "weight $wgu : bf16[4,8,6] seed=11\n"
	       "weight $wdn : bf16[4,6,4] seed=12\n"
	       "graph @d(%x: bf16[T,6], %l: f32[T,4]) -> (y: bf16[T,6], z: bf16[T,6], "
	       "v: bf16[T,6]) {\n"
	       "\t%y = moe %x, %l, _, $wgu, $wdn, k=2, renorm=1 : bf16[T,6]\n"
	       "\t%w, %ids = route %l, k=2, renorm=1 : f32[T,2], i32[T,2]\n"
	       "\t%off, %rows, %pos = permute %ids, experts=4 : i32[5], i32[2*T], i32[2*T]\n"
	       "\t%two = const value=[2] : i32[]\n"
	       "\t%tok = div %rows, %two : i32[2*T]\n"
	       "\t%xs = gather %x, %tok : bf16[2*T,6]\n"
	       "\t%h = grouped_matmul %xs, $wgu, %off : bf16[2*T,8]\n"
	       "\t%a = swiglu %h : bf16[2*T,4]\n"
	       "\t%ys = grouped_matmul %a, $wdn, %off, to=f64 : f64[2*T,6]\n"
	       "\t%yu = scatter_rows %ys, %rows, rows=[2*T] : f64[2*T,6]\n"
	       "\t%y3 = reshape %yu, shape=[T,2,6] : f64[T,2,6]\n"
	       "\t%w64 = cast %w, to=f64 : f64[T,2]\n"
	       "\t%w3 = reshape %w64, shape=[T,2,1] : f64[T,2,1]\n"
	       "\t%p = mul %y3, %w3 : f64[T,2,6]\n"
	       "\t%s = reduce_sum %p, axes=[1], keepdims=0 : f64[T,6]\n"
	       "\t%z = cast %s, to=bf16 : bf16[T,6]\n"
	       "\t%yg = gather %ys, %pos : f64[2*T,6]\n"
	       "\t%g3 = reshape %yg, shape=[T,2,6] : f64[T,2,6]\n"
	       "\t%q = mul %g3, %w3 : f64[T,2,6]\n"
	       "\t%qs = reduce_sum %q, axes=[-2], keepdims=0 : f64[T,6]\n"
	       "\t%v = cast %qs, to=bf16 : bf16[T,6]\n"
	       "\tret %y, %z, %v\n}\n", in, 2);
	ck_assert_int_eq(memcmp(r.out[0].data, r.out[1].data, tensor_nbytes(&r.out[0])), 0);
	ck_assert_int_eq(memcmp(r.out[0].data, r.out[2].data, tensor_nbytes(&r.out[0])), 0);
	done(&r, in, 2);
}
END_TEST

/* --- graphs: calls, bindings, weights, diagnostics ----------------------- */

START_TEST(test_eval_call_binds_the_kernel_dims)
{
	Tensor in[1] = {ten(DT_F32, DIM(3, 2), VAL(1, 2, 3, 4, 5, 6))};
	Run r;

	ok(&r, "kernel @k(%a: f32[N,2]) -> (r: f32[N,2], s: f32[2*N]) template=elementwise {\n"
	       "\t%r = add %a, %a : f32[N,2]\n"
	       "\t%s = reshape %a, shape=[2*N] : f32[2*N]\n"
	       "\tret %r, %s\n}\n"
	       "graph @g(%x: f32[T,2]) -> (y: f32[T,2], z: f32[2*T]) {\n"
	       "\t%y, %z = call @k(%x) : f32[T,2], f32[2*T]\n"
	       "\tret %y, %z\n}\n", in, 1);
	expect(&r.out[0], DT_F32, DIM(3, 2), VAL(2, 4, 6, 8, 10, 12), 0);
	expect(&r.out[1], DT_F32, DIM(6), VAL(1, 2, 3, 4, 5, 6), 0);
	done(&r, in, 1);
}
END_TEST

START_TEST(test_eval_inputs_bind_and_check_symbolic_dims)
{
	const char *g = "graph @g(%x: f32[T,4], %y: f32[2*T,4]) -> (z: f32[T,4]) {\n"
			"\t%z = add %x, %x : f32[T,4]\n\tret %z\n}\n";
	Tensor in[2] = {zeros(DT_F32, DIM(3, 4)), zeros(DT_F32, DIM(5, 4))};
	Tensor i32[2] = {zeros(DT_I32, DIM(3, 4)), zeros(DT_F32, DIM(6, 4))};
	Tensor r1[2] = {zeros(DT_F32, DIM(12)), zeros(DT_F32, DIM(6, 4))};
	Tensor ok6[1] = {zeros(DT_F32, DIM(6))}, odd[1] = {zeros(DT_F32, DIM(5))};
	Run r;

	fails(g, in, 2, NULL, "@g: input %y is f32[5,4] but declared f32[2*T,4] (T=3)");
	fails(g, i32, 2, NULL, "@g: input %x is i32[3,4] but declared f32[T,4]");
	fails(g, r1, 2, NULL, "@g: input %x is f32[12] but declared f32[T,4]");
	fails(g, in, 1, NULL, "@g takes 2 inputs, not 1");
	/* T is bound from 2*T alone */
	const char *h = "graph @h(%y: f32[2*T]) -> (z: f32[T,2]) {\n"
			"\t%z = reshape %y, shape=[T,2] : f32[T,2]\n\tret %z\n}\n";
	ok(&r, h, ok6, 1);
	expect(&r.out[0], DT_F32, DIM(3, 2), VAL(0, 0, 0, 0, 0, 0), 0);
	done(&r, ok6, 1);
	fails(h, odd, 1, NULL, "input %y is f32[5] but declared f32[2*T]");
	for (int i = 0; i < 2; i++) {
		tensor_free(&in[i]);
		tensor_free(&i32[i]);
		tensor_free(&r1[i]);
	}
	tensor_free(&odd[0]);
}
END_TEST

START_TEST(test_eval_result_checked_against_declared_type)
{
	Tensor in[1] = {zeros(DT_F32, DIM(2, 4))};
	EvalOpts small = {.max_bytes = 64};

	/* not verified: the declared type disagrees with what add computes */
	fails("graph @g(%x: f32[T,4]) -> (z: f32[T,5]) {\n"
	      "\t%z = add %x, %x : f32[T,5]\n\tret %z\n}\n", in, 1, NULL,
	      "t.ir:2:7: error: add: result %z is f32[2,4] but declared f32[T,5] (T=2)");
	fails("graph @g(%x: f32[T,4]) -> (z: f32[N,2]) {\n"
	      "\t%z = reshape %x, shape=[N,2] : f32[N,2]\n\tret %z\n}\n", in, 1, NULL,
	      "reshape: cannot evaluate dim N of shape=");
	fails("graph @g(%x: f32[T,4]) -> (z: f32[100]) {\n"
	      "\t%z = constant_of_shape shape=[100] : f32[100]\n\tret %z\n}\n", in, 1, &small,
	      "constant_of_shape: result f32[100] exceeds the 64-byte tensor limit");
	fails("graph @g(%x: f32[T,4]) -> (z: f32[T,4]) {\n"
	      "\t%z = concat %x, _ : f32[T,4]\n\tret %z\n}\n", in, 1, NULL,
	      "concat: operand 1 is absent");
	tensor_free(&in[0]);
}
END_TEST

START_TEST(test_eval_weights_params_and_repeated_results)
{
	Tensor in[1] = {ten(DT_F32, DIM(2), VAL(1, -2))};
	Run r;
	float sc = (float)(1 / sqrt(3.0));

	ok(&r, "weight $w : f32[3] seed=7\n"
	       "weight $v : bf16[2,2] mean=1.0 scale=0.5\n"
	       "graph @g(%x: f32[2]) -> (a: f32[2], b: f32[2], c: f32[2], w: f32[3], v: bf16[2,2]) {\n"
	       "\t%y = neg %x : f32[2]\n"
	       "\t%v2 = add $v, $v : bf16[2,2]\n"
	       "\tret %x, %y, %y, $w, %v2\n}\n", in, 1);
	expect(&r.out[0], DT_F32, DIM(2), VAL(1, -2), 0);
	expect(&r.out[1], DT_F32, DIM(2), VAL(-1, 2), 0);
	expect(&r.out[2], DT_F32, DIM(2), VAL(-1, 2), 0);
	ck_assert_ptr_ne(r.out[0].data, in[0].data);
	ck_assert_ptr_ne(r.out[1].data, r.out[2].data);
	double w[3], v[4];
	for (int i = 0; i < 3; i++)
		w[i] = ir_synth_value(7, hash_str("w"), (uint64_t)i, 0, sc);
	for (int i = 0; i < 4; i++)
		v[i] = rnd(DT_BF16, 2 * rnd(DT_BF16, ir_synth_value(0, hash_str("v"), (uint64_t)i,
								     1.0f, 0.5f)));
	expect(&r.out[3], DT_F32, DIM(3), w, 0);
	expect(&r.out[4], DT_BF16, DIM(2, 2), v, 0);
	done(&r, in, 1);
}
END_TEST

/* Every op of tests/ir/text/all-ops.ir evaluates on consistent inputs (T=8). */
START_TEST(test_eval_runs_the_all_ops_text)
{
	char *path = file_join(MOEC_SOURCE_DIR, "tests/ir/text/all-ops.ir"), *text;
	Tensor in[4] = {
		rand_tensor(DT_F32, DIM(8, 8), -2, 2),
		rand_tensor(DT_BF16, DIM(8, 8), -1, 1),
		ten(DT_I64, DIM(8), VAL(3, 1, 4, 1, 5, 2, 6, 0)),
		zeros(DT_BOOL, DIM(8, 8)),
	};
	size_t len;
	Diag d;
	Run r;

	diag_init(&d, stderr);
	text = file_read(path, &len, &d);
	ck_assert_ptr_nonnull(text);
	/* ONNX wants updates of shape indices[:-1] + data[q:] = [T] here: use
	 * %gnd (f32[T]) for %tv (f32[T,2]); same length, so it fits in place */
	char *bad = strstr(text, "%ti, %tv :");
	if (bad)
		memcpy(bad, "%ti,%gnd :", 10);
	for (int i = 0; i < 64; i += 3)
		dtype_store_int(DT_BOOL, in[3].data, (size_t)i, 1);
	ok(&r, text, in, 4);
	ck_assert_int_eq(r.nout, 2);
	expect(&r.out[0], DT_F32, DIM(8, 8), (double[64]){0}, INFINITY);
	done(&r, in, 4);
	free(text);
	free(path);
}
END_TEST

Suite *
eval_suite(void)
{
	Suite *s = suite_create("eval");
	TCase *tc = tcase_create("ops");

	tcase_add_test(tc, test_eval_every_op_has_a_function);
	tcase_add_test(tc, test_eval_unary_piecewise_exact);
	tcase_add_test(tc, test_eval_unary_transcendental);
	tcase_add_test(tc, test_eval_cast_not_identity);
	tcase_add_test(tc, test_eval_low_precision_read_exactly_rounded_on_store);
	tcase_add_test(tc, test_eval_binary_broadcast);
	tcase_add_test(tc, test_eval_min_max_compare_logic_where);
	tcase_add_test(tc, test_eval_integer_arithmetic);
	tcase_add_test(tc, test_eval_swiglu_layouts_and_acts);
	tcase_add_test(tc, test_eval_matmul_forms);
	tcase_add_test(tc, test_eval_grouped_matmul);
	tcase_add_test(tc, test_eval_reductions);
	tcase_add_test(tc, test_eval_argmax_ties);
	tcase_add_test(tc, test_eval_softmax_axes);
	tcase_add_test(tc, test_eval_rms_norm);
	tcase_add_test(tc, test_eval_layer_norm_and_rstd);
	tcase_add_test(tc, test_eval_topk_ties_toward_lower_index);
	tcase_add_test(tc, test_eval_gather);
	tcase_add_test(tc, test_eval_gather_out_of_range_is_a_diagnostic);
	tcase_add_test(tc, test_eval_gather_elements_and_nd);
	tcase_add_test(tc, test_eval_scatters);
	tcase_add_test(tc, test_eval_scatter_rows);
	tcase_add_test(tc, test_eval_onehot);
	tcase_add_test(tc, test_eval_nonzero_feeds_a_data_dependent_reshape);
	tcase_add_test(tc, test_eval_transpose_reshape_expand);
	tcase_add_test(tc, test_eval_concat_split_slice_tile);
	tcase_add_test(tc, test_eval_shape_size_range_constants);
	tcase_add_test(tc, test_eval_int64_edges_do_not_overflow);
	tcase_add_test(tc, test_eval_quantize_layouts);
	tcase_add_test(tc, test_eval_dequantize_layouts);
	tcase_add_test(tc, test_eval_dequantize_mxfp4);
	tcase_add_test(tc, test_eval_quantize_dynamic_groups);
	tcase_add_test(tc, test_eval_route_hand_computed);
	tcase_add_test(tc, test_eval_routing_ranks_softmax_plus_bias);
	tcase_add_test(tc, test_eval_permute_hand_computed);
	tcase_add_test(tc, test_eval_moe_softmax_renorm_matches_loops);
	tcase_add_test(tc, test_eval_moe_sigmoid_bias_groups_matches_loops);
	tcase_add_test(tc, test_eval_moe_topk_softmax_oai_bf16_matches_loops);
	tcase_add_test(tc, test_eval_moe_equals_its_decomposition);
	tcase_add_test(tc, test_eval_moe_deferred_dequantize_same_bits);
	tcase_add_test(tc, test_eval_permute_drops_negative_ids);
	tcase_add_test(tc, test_eval_ep_pack_hand_computed);
	tcase_add_test(tc, test_eval_all_to_all_between_ranks);
	tcase_add_test(tc, test_eval_call_binds_the_kernel_dims);
	tcase_add_test(tc, test_eval_inputs_bind_and_check_symbolic_dims);
	tcase_add_test(tc, test_eval_result_checked_against_declared_type);
	tcase_add_test(tc, test_eval_weights_params_and_repeated_results);
	tcase_add_test(tc, test_eval_runs_the_all_ops_text);
	suite_add_tcase(s, tc);
	return s;
}
