/*
 * check_kernels.c — the kernels around the GEMMs: route, permute, synth and
 * the generic bodies.  Every builder is emitted for sm_80, sm_90 and sm_90a
 * and assembled by ptxas (skipped with a message when there is no ptxas),
 * and run on the CPU emulator against the IR interpreter (ir_eval of the
 * same body, or of a graph holding the op) on fresh random inputs, with
 * every output poisoned first.  Synthetic weights must equal the host's
 * bytes exactly.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "ir.h"

static const char *const targets[] = {"sm_80", "sm_90", "sm_90a"};

/* ---- random data ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double
urand(void)		/* [-1, 1) */
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rng_state >> 11) / 9007199254740992.0 * 2 - 1;
}

static int
irand(int n)		/* 0..n-1 */
{
	return (int)((urand() + 1) / 2 * n) % n;
}

/* A tensor of fresh random values (never all zeros): floats in [-scale, scale). */
static void
rand_tensor(Tensor *t, DType dt, int rank, const int64_t *dim, double scale)
{
	int64_t n;

	ck_assert_int_eq(tensor_alloc(t, dt, rank, dim), 0);
	n = tensor_numel(t);
	for (int64_t i = 0; i < n; i++) {
		if (dtype_is_float(dt))
			dtype_store(dt, t->data, (size_t)i, urand() * scale);
		else
			dtype_store_int(dt, t->data, (size_t)i, irand((int)scale));
	}
}

/* ---- IR graphs and the interpreter ---- */

static Module *
parse(const char *text)
{
	Diag d;
	Module *m;

	diag_init(&d, stderr);
	m = ir_parse("kernels.ir", text, strlen(text), &d);
	ck_assert_msg(m != NULL, "parse: %s", d.last);
	ck_assert_msg(ir_verify(m, &d) == 0, "verify: %s", d.last);
	return m;
}

static Graph *
graph_named(Module *m, const char *name)
{
	Graph *g = ir_find_graph(m, name);

	ck_assert_msg(g != NULL, "no graph @%s", name);
	return g;
}

static void
eval(Graph *g, const Tensor *in, int nin, Tensor *out)
{
	Diag d;

	diag_init(&d, stderr);
	ck_assert_msg(ir_eval(g, in, nin, out, NULL, &d) == 0, "ir_eval @%s: %s", g->name, d.last);
}

/* An output buffer like want, poisoned (0xff bytes: NaN, -1). */
static void
poisoned_like(Tensor *t, const Tensor *want)
{
	ck_assert_int_eq(tensor_alloc(t, want->dt, want->rank, want->dim), 0);
	memset(t->data, 0xff, tensor_nbytes(t));
}

/* got == want within the dtype's tolerance (integers exactly). */
static void
expect_close(const char *what, const Tensor *got, const Tensor *want, double atol, double rtol)
{
	int64_t n = tensor_numel(want);

	ck_assert_int_eq(tensor_numel(got), n);
	for (int64_t i = 0; i < n; i++) {
		double g = dtype_load(got->dt, got->data, (size_t)i);
		double w = dtype_load(want->dt, want->data, (size_t)i);
		if (!dtype_is_float(want->dt)) {
			ck_assert_msg(g == w, "%s: element %lld is %g, want %g", what, (long long)i, g, w);
			continue;
		}
		if (isnan(w) && isnan(g))
			continue;
		ck_assert_msg(fabs(g - w) <= atol + rtol * fabs(w),
			      "%s: element %lld of %lld is %.9g, want %.9g", what, (long long)i,
			      (long long)n, g, w);
	}
}

/* ---- running one kernel on the emulator ---- */

typedef struct Run Run;
struct Run {
	uint64_t args[32];
	CgEmuBuf buf[32];
	int na, nb;
};

static void
arg_ptr(Run *r, void *p, size_t bytes)
{
	r->buf[r->nb++] = (CgEmuBuf){p, bytes};
	r->args[r->na++] = (uint64_t)(uintptr_t)p;
}

static void
arg_int(Run *r, int64_t v)
{
	r->args[r->na++] = (uint64_t)v;
}

static void
arg_f32(Run *r, float v)
{
	uint32_t u;

	memcpy(&u, &v, 4);
	r->args[r->na++] = u;
}

/* Launch kernel `name` of m with its recorded geometry at T (grid0 > 0 overrides x). */
static int
launch(CgModule *m, const char *name, Run *r, int T, int grid0, Diag *d)
{
	const CgKernel *k = cg_module_find(m, name);
	CgEmuLaunch l;

	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(r->na, k->nparam);
	memset(&l, 0, sizeof l);
	for (int i = 0; i < 3; i++) {
		l.grid[i] = (int)cg_expr_eval(k->grid[i], T);
		l.block[i] = k->block[i];
	}
	if (grid0 > 0)
		l.grid[0] = grid0;
	l.smem = k->smem;
	l.args = r->args;
	l.nargs = r->na;
	l.buf = r->buf;
	l.nbuf = r->nb;
	if (l.grid[0] * l.grid[1] * l.grid[2] == 0)
		return 0;
	return cg_emu_run(m, name, &l, d);
}

static CgModule *
emu_module(Diag *d)
{
	CgTarget t = {"emu", NULL, 3};
	CgModule *m;

	diag_init(d, stderr);
	m = cg_module_new(&t, "kernels", d);
	ck_assert_msg(m != NULL, "%s", d->last);
	return m;
}

/* ---- synth ---- */

/* weight [dim...] (rank 1 or 3) with row_block rb and col_repeat cr: the device's bytes are the host's */
static void
check_synth_shape(DType dt, int rank, const int64_t *dim, int64_t rb, int64_t cr, double mean, double scale,
		  int grid)
{
	Module *im = ir_new_module();
	Weight *w = ir_add_weight(im, "blk.3.ffn_up.weight", ir_type(dt, rank, dim));
	int64_t count = ir_type_numel(&w->value->type);
	size_t bytes = dtype_bytes(dt, (size_t)count);
	unsigned char *out = malloc(bytes + 1);
	const unsigned char *want;
	CgModule *m;
	Run r = {0};
	Diag d;

	w->seed = 1234567;
	w->mean = mean;
	w->scale = scale;
	w->row_block = rb;
	w->col_repeat = cr;
	want = ir_weight_data(w, &d);
	ck_assert_ptr_nonnull(want);
	m = emu_module(&d);
	ck_assert_msg(cg_emit_synth_rows(m, "synth", dt, rb, cr, rank > 1 ? dim[rank - 2] : 0,
					 rank > 1 ? dim[rank - 1] : 0, &d) == 0, "%s", d.last);
	memset(out, 0xa5, bytes);
	arg_ptr(&r, out, bytes);
	arg_int(&r, (int64_t)w->seed);
	arg_int(&r, (int64_t)hash_str(w->value->name));
	arg_f32(&r, (float)w->mean);
	arg_f32(&r, (float)ir_weight_scale(w));
	arg_int(&r, count);
	ck_assert_msg(launch(m, "synth", &r, 0, grid, &d) == 0, "%s", d.last);
	for (size_t i = 0; i < bytes; i++)
		ck_assert_msg(out[i] == want[i], "synth %s: byte %zu is %02x, host %02x",
			      dtype_name(dt), i, out[i], want[i]);
	free(out);
	cg_module_free(m);
	ir_free_module(im);
}

static void
check_synth(DType dt, int64_t count, double mean, double scale, int grid)
{
	check_synth_shape(dt, 1, &count, 0, 0, mean, scale, grid);
}

/* row_block: rows r of each [N, C] matrix repeat row r - r % rb (fp8 block
 * scales), on the host (ir_weight_data, ir_weight_elems) and the device */
static void
check_synth_rows(void)
{
	int64_t dim[3] = {3, 300, 7};
	Module *im = ir_new_module();
	Weight *w = ir_add_weight(im, "s", ir_type(DT_F32, 3, dim));
	const float *v;
	double e[7];
	Diag d;

	w->row_block = 128;
	ir_weight_elems(w, (300 + 200) * 7, 7, e);	/* generated: expert 1, row 200 is row 128 */
	v = ir_weight_data(w, &d);
	ck_assert_ptr_nonnull(v);
	for (int64_t i = 0; i < 3 * 300 * 7; i++) {
		int64_t r = i / 7 % 300;
		ck_assert(v[i] == v[i - r % 128 * 7]);
	}
	ck_assert(v[300 * 7 + 128 * 7] != v[300 * 7 + 127 * 7]);	/* expert 1, blocks 1 and 0 */
	ck_assert(v[300 * 7] != v[0]);		/* experts 1 and 0 */
	for (int j = 0; j < 7; j++)
		ck_assert(e[j] == v[(300 + 128) * 7 + j]);
	ir_free_module(im);
	check_synth_shape(DT_F32, 3, dim, 128, 0, 0.01, 0.002, 3);
	check_synth_shape(DT_BF16, 3, dim, 64, 0, 0, -1, 2);
}

/* col_repeat: a per-channel scale [E, N, 1] widened to [E, N, C] keeps its
 * values (fp8-regroup), on the host and the device, with row_block too */
static void
check_synth_cols(void)
{
	int64_t narrow[3] = {3, 300, 1}, wide[3] = {3, 300, 7}, wide2[3] = {3, 300, 14};
	Module *im = ir_new_module();
	Weight *n = ir_add_weight(im, "s", ir_type(DT_F32, 3, narrow));
	Module *im2 = ir_new_module();
	Weight *w = ir_add_weight(im2, "s", ir_type(DT_F32, 3, wide));
	const float *vn, *vw;
	double e[7];
	Diag d;

	w->col_repeat = 7;
	n->scale = w->scale = 0.01;	/* the default follows the last dim */
	vn = ir_weight_data(n, &d);
	vw = ir_weight_data(w, &d);
	ck_assert_ptr_nonnull(vn);
	ck_assert_ptr_nonnull(vw);
	for (int64_t i = 0; i < 3 * 300 * 7; i++)
		ck_assert(vw[i] == vn[i / 7]);
	ir_weight_elems(w, (300 + 200) * 7 + 3, 7, e);
	for (int j = 0; j < 7; j++)
		ck_assert(e[j] == vw[(300 + 200) * 7 + 3 + j]);
	ir_free_module(im);
	ir_free_module(im2);
	check_synth_shape(DT_F32, 3, wide, 0, 7, 0.01, 0.002, 3);
	check_synth_shape(DT_F32, 3, wide2, 128, 7, 0.01, 0.002, 2);
}

START_TEST(test_synth_matches_host_bytes)
{
	static const DType dts[] = {DT_F32, DT_BF16, DT_F16, DT_F8E4M3, DT_F8E5M2, DT_F64,
				    DT_I8, DT_U8, DT_I32, DT_I64, DT_BOOL, DT_I4, DT_U4,
				    DT_F4E2M1, DT_F8E8M0};

	for (size_t i = 0; i < NELEM(dts); i++)
		check_synth(dts[i], 3001, 0, -1, 3);	/* the default scale 1/sqrt(fan_in) */
	/* wide ranges: f16 overflow to inf, f8 saturation, subnormals, integer saturation */
	check_synth(DT_F16, 2000, 0, 70000, 2);
	check_synth(DT_F16, 2000, 0, 1e-6, 2);
	check_synth(DT_F8E4M3, 2000, 100, 500, 2);
	check_synth(DT_F8E5M2, 2000, 0, 70000, 2);
	check_synth(DT_F8E4M3, 2000, 0, 0.01, 2);
	check_synth(DT_BF16, 2000, 3, 1e30, 2);
	check_synth(DT_I8, 2000, 0.5, 300, 2);
	check_synth(DT_U8, 2000, 0, 300, 2);
	check_synth(DT_I4, 2001, 0, 12, 1);
	check_synth_rows();
	check_synth_cols();
	check_synth(DT_U4, 7, 4, 12, 1);
	check_synth(DT_BOOL, 1000, 0, 1, 1);
	check_synth(DT_F4E2M1, 2001, 0, 8, 2);	/* ties, saturation at 6, -0 */
	check_synth(DT_F4E2M1, 999, 0, 0.3, 1);	/* subnormal 0.5 and zero */
	check_synth(DT_F8E8M0, 2000, 0, 1e-38, 2);	/* 2^-127 and subnormal inputs */
	check_synth(DT_F8E8M0, 2000, 0, 3e38, 2);	/* saturation at 2^127, +-inf */
	check_synth(DT_F8E8M0, 2000, 0.01f, 0.005f, 2);
}
END_TEST

/* ---- route ---- */

typedef struct {
	const char *attrs;	/* route attributes */
	int E, k, bias, ties;
	DType dt, bdt;
} RouteCase;

/* Case c's graph: its logits [T,E] (and bias [E]) through one route node. */
static void
route_text(const RouteCase *c, char *text, size_t n)
{
	char bparam[64] = "";

	if (c->bias)
		snprintf(bparam, sizeof bparam, ", %%b: %s[%d]", dtype_name(c->bdt), c->E);
	snprintf(text, n,
		 "graph @r(%%l: %s[T,%d]%s) -> (w: f32[T,%d], ids: i32[T,%d]) {\n"
		 "\t%%w, %%ids = route %%l%s, k=%d, %s : f32[T,%d], i32[T,%d]\n"
		 "\tret %%w, %%ids\n}\n",
		 dtype_name(c->dt), c->E, bparam, c->k, c->k, c->bias ? ", %b" : "", c->k, c->attrs, c->k, c->k);
}

static void
check_route(const RouteCase *c, int T)
{
	char text[1024];
	Module *im;
	Graph *g;
	Node *n;
	CgRouteSpec s;
	CgModule *m;
	Tensor in[2], want[2], got[2], ws[2];
	int64_t ld[2] = {T, c->E}, bd[1] = {c->E};
	Run r = {0};
	Diag d;

	route_text(c, text, sizeof text);
	im = parse(text);
	g = graph_named(im, "r");
	n = g->first;
	rand_tensor(&in[0], c->dt, 2, ld, 3.0);
	if (c->ties)
		for (int64_t i = 0; i < T * c->E; i++)
			dtype_store(c->dt, in[0].data, (size_t)i, irand(3));
	if (c->bias)
		rand_tensor(&in[1], c->bdt, 1, bd, 0.5);
	eval(g, in, c->bias ? 2 : 1, want);

	m = emu_module(&d);
	ck_assert_msg(cg_route_spec(n, &s, &d) == 0, "%s", d.last);
	ck_assert_msg(cg_emit_route(m, "route", &s, &d) == 0, "%s", d.last);
	s.bfly = s.warp_sync = 1;
	ck_assert_msg(cg_emit_route(m, "route_ws", &s, &d) == 0, "%s", d.last);
	s.redux = 1;
	ck_assert_msg(cg_emit_route(m, "route_rx", &s, &d) == 0, "%s", d.last);
	poisoned_like(&got[0], &want[0]);
	poisoned_like(&got[1], &want[1]);
	arg_ptr(&r, in[0].data, tensor_nbytes(&in[0]));
	if (c->bias)
		arg_ptr(&r, in[1].data, tensor_nbytes(&in[1]));
	arg_ptr(&r, got[0].data, tensor_nbytes(&got[0]));
	arg_ptr(&r, got[1].data, tensor_nbytes(&got[1]));
	arg_int(&r, T);
	ck_assert_msg(launch(m, "route", &r, T, 0, &d) == 0, "%s", d.last);
	expect_close("route ids", &got[1], &want[1], 0, 0);
	expect_close("route weights", &got[0], &want[0], 1e-6, 1e-5);
	/* --debug=prefill-small's kernel (butterfly top-k, no CTA barrier), and the same with
	 * redux.sync (CgRouteSpec.redux: the decode front's route launch): the same bits */
	for (int v = 0; v < 2; v++) {
		const char *name = v ? "route_rx" : "route_ws";
		memset(&r, 0, sizeof r);
		poisoned_like(&ws[0], &want[0]);
		poisoned_like(&ws[1], &want[1]);
		arg_ptr(&r, in[0].data, tensor_nbytes(&in[0]));
		if (c->bias)
			arg_ptr(&r, in[1].data, tensor_nbytes(&in[1]));
		arg_ptr(&r, ws[0].data, tensor_nbytes(&ws[0]));
		arg_ptr(&r, ws[1].data, tensor_nbytes(&ws[1]));
		arg_int(&r, T);
		ck_assert_msg(launch(m, name, &r, T, 0, &d) == 0, "%s", d.last);
		for (int i = 0; i < 2; i++) {
			ck_assert_msg(memcmp(ws[i].data, got[i].data, tensor_nbytes(&got[i])) == 0,
				      "route %s T=%d: output %d differs in %s", c->attrs, T, i, name);
			tensor_free(&ws[i]);
		}
	}
	for (int i = 0; i < 2; i++) {
		tensor_free(&got[i]);
		tensor_free(&want[i]);
	}
	tensor_free(&in[0]);
	if (c->bias)
		tensor_free(&in[1]);
	cg_module_free(m);
	ir_free_module(im);
}

static const RouteCase route_cases[] = {
	{"router=softmax, renorm=1", 8, 2, 0, 0, DT_F32, DT_F32},		/* Mixtral */
	{"router=sigmoid, renorm=1, scale=2.5, n_group=8, topk_group=3, group_score=top2",
	 64, 6, 1, 0, DT_BF16, DT_F32},					/* DeepSeek-V3 */
	{"router=topk_softmax", 32, 4, 0, 0, DT_BF16, DT_F32},			/* gpt-oss */
	{"router=softmax, scale=0.5", 128, 8, 0, 0, DT_F16, DT_F32},		/* Qwen3 */
	{"router=sigmoid, n_group=4, topk_group=2", 512, 16, 1, 0, DT_F32, DT_BF16},
	{"router=softmax", 5, 5, 0, 0, DT_F32, DT_F32},			/* every expert */
	{"router=softmax, renorm=1", 40, 3, 0, 1, DT_F32, DT_F32},		/* ties */
	{"router=sigmoid, n_group=4, topk_group=1, group_score=top2", 16, 3, 1, 1, DT_BF16, DT_F16},
	{"router=sparsemixer, jitter_eps=0.2", 8, 2, 0, 0, DT_F32, DT_F32},	/* PhiMoE */
	{"router=sparsemixer", 64, 3, 0, 0, DT_BF16, DT_F32},		/* threshold in bf16 */
	{"router=sparsemixer, jitter_eps=0.1, scale=2", 40, 4, 0, 1, DT_F16, DT_F32},	/* ties */
	{"router=sigmoid, renorm=1, n_group=4, topk_group=2, group_score=top2, group_fill=0",
	 16, 3, 1, 0, DT_F32, DT_F32},					/* DeepSeek-V3, 4.57 */
	/* groups of whole lane slots (E / n_group a multiple of 32: redux's group scores) */
	{"router=sigmoid, renorm=1, scale=2.5, n_group=8, topk_group=4, group_score=top2",
	 256, 8, 1, 0, DT_F32, DT_F32},					/* DeepSeek-V3 */
	{"router=sigmoid, n_group=2, topk_group=1, group_score=top2", 128, 6, 0, 1, DT_BF16, DT_F32},	/* ties */
};

START_TEST(test_route_matches_interpreter)
{
	static const int Ts[] = {1, 7, 33};

	for (size_t i = 0; i < NELEM(Ts); i++)
		check_route(&route_cases[_i], Ts[i]);
}
END_TEST

/* ---- permute ---- */

enum { IDS_UNIFORM, IDS_SKEWED, IDS_FEW, IDS_DROPPED };

/* The permutation of T tokens' k ids of E experts (distribution dist) on
 * the emulator against the interpreter, twice (the same bits).  grid: the
 * grid sort (two launches and a workspace, poisoned too) sized for
 * max_slots (0: T*k; more: rounds a chunk). */
static void
check_permute_as(int E, int k, int T, int dist, DType idt, int want_pos, int grid, int64_t max_slots)
{
	char text[512];
	Module *im;
	CgPermuteSpec s;
	CgModule *m;
	Tensor ids, want[3], got[3], again[3];
	int64_t dim[2] = {T, k};
	Run r = {0};
	Diag d;
	size_t ws_bytes;
	void *ws;

	snprintf(text, sizeof text,
		 "graph @p(%%ids: %s[T,%d]) -> (o: i32[%d], r: i32[%d*T], q: i32[%d*T]) {\n"
		 "\t%%o, %%r, %%q = permute %%ids, experts=%d : i32[%d], i32[%d*T], i32[%d*T]\n"
		 "\tret %%o, %%r, %%q\n}\n", dtype_name(idt), k, E + 1, k, k, E, E + 1, k, k);
	if (k == 1)	/* 1*T prints as T */
		snprintf(text, sizeof text,
			 "graph @p(%%ids: %s[T,1]) -> (o: i32[%d], r: i32[T], q: i32[T]) {\n"
			 "\t%%o, %%r, %%q = permute %%ids, experts=%d : i32[%d], i32[T], i32[T]\n"
			 "\tret %%o, %%r, %%q\n}\n", dtype_name(idt), E + 1, E, E + 1);
	im = parse(text);
	ck_assert_int_eq(tensor_alloc(&ids, idt, 2, dim), 0);
	for (int64_t i = 0; i < (int64_t)T * k; i++) {
		int x = dist == IDS_UNIFORM ? irand(E)
		      : dist == IDS_SKEWED ? (irand(4) ? 3 % E : irand(E))	/* 3/4 to expert 3 */
		      : dist == IDS_DROPPED ? (irand(3) ? -1 : irand(E))	/* 2/3 on other ranks */
		      : irand(MIN(E, 4)) * (E / 4 > 0 ? E / 4 : 1) % E;	/* 4 experts, the rest empty */
		dtype_store_int(idt, ids.data, (size_t)i, x);
	}
	eval(graph_named(im, "p"), &ids, 1, want);

	m = emu_module(&d);
	ck_assert_msg(cg_permute_spec(graph_named(im, "p")->first, &s, &d) == 0, "%s", d.last);
	s.want_pos = want_pos;
	s.grid = grid;
	s.max_slots = max_slots ? max_slots : (int64_t)T * k;
	ws_bytes = grid ? (size_t)cg_permute_ws_bytes(&s) : 0;
	ws = malloc(ws_bytes + 1);
	ck_assert_msg(cg_emit_permute(m, "permute", &s, &d) == 0, "%s", d.last);
	for (int run = 0; run < 2; run++) {
		Tensor *out = run ? again : got;
		memset(ws, 0xff, ws_bytes);
		if (grid) {
			memset(&r, 0, sizeof r);
			arg_ptr(&r, ids.data, tensor_nbytes(&ids));
			arg_ptr(&r, ws, ws_bytes);
			arg_int(&r, T);
			ck_assert_msg(launch(m, "permute_count", &r, T, 0, &d) == 0, "%s", d.last);
		}
		memset(&r, 0, sizeof r);
		for (int i = 0; i < 3; i++)
			poisoned_like(&out[i], &want[i]);
		arg_ptr(&r, ids.data, tensor_nbytes(&ids));
		for (int i = 0; i < (want_pos ? 3 : 2); i++)
			arg_ptr(&r, out[i].data, tensor_nbytes(&out[i]));
		if (grid)
			arg_ptr(&r, ws, ws_bytes);
		arg_int(&r, T);
		ck_assert_msg(launch(m, "permute", &r, T, 0, &d) == 0, "%s", d.last);
	}
	expect_close("permute offsets", &got[0], &want[0], 0, 0);
	expect_close("permute rows", &got[1], &want[1], 0, 0);
	if (want_pos)
		expect_close("permute pos", &got[2], &want[2], 0, 0);
	for (int i = 0; i < 3; i++) {
		ck_assert(memcmp(got[i].data, again[i].data, tensor_nbytes(&got[i])) == 0);
		tensor_free(&got[i]);
		tensor_free(&again[i]);
		tensor_free(&want[i]);
	}
	tensor_free(&ids);
	free(ws);
	cg_module_free(m);
	ir_free_module(im);
}

static void
check_permute(int E, int k, int T, int dist, DType idt, int want_pos)
{
	check_permute_as(E, k, T, dist, idt, want_pos, 0, 0);
}

START_TEST(test_permute_matches_interpreter)
{
	static const int Ts[] = {1, 7, 33};

	for (size_t i = 0; i < NELEM(Ts); i++) {
		check_permute(8, 2, Ts[i], IDS_UNIFORM, DT_I32, 1);
		check_permute(64, 6, Ts[i], IDS_SKEWED, DT_I32, 1);
		check_permute(128, 8, Ts[i], IDS_FEW, DT_I32, 0);
		check_permute(512, 8, Ts[i], IDS_UNIFORM, DT_I64, 1);
		check_permute(1024, 1, Ts[i], IDS_SKEWED, DT_I32, 1);
		check_permute(32, 8, Ts[i], IDS_DROPPED, DT_I32, 1);	/* expert parallelism */
		check_permute(1023, 2, Ts[i], IDS_DROPPED, DT_I64, 0);
	}
	check_permute(5, 3, 0, IDS_UNIFORM, DT_I32, 1);	/* no tokens: offsets all 0 */
}
END_TEST

START_TEST(test_permute_many_slots)
{
	check_permute(256, 8, 8200, IDS_SKEWED, DT_I32, 1);	/* 65600 slots */
	check_permute(16, 4, 16500, IDS_UNIFORM, DT_I32, 1);
}
END_TEST

/* The grid sort (spec.grid): every T from none to several chunks (a chunk
 * is 1024 slots up to E = 495; E = 1024: 480), E up to 1024, negative ids,
 * and rounds (a max_slots far above the run's T: chunks of several rounds). */
START_TEST(test_permute_grid_matches_interpreter)
{
	static const int Ts[] = {0, 1, 7, 33, 128, 129, 300};

	for (size_t i = 0; i < NELEM(Ts); i++) {
		check_permute_as(8, 2, Ts[i], IDS_UNIFORM, DT_I32, 1, 1, 0);
		check_permute_as(64, 6, Ts[i], IDS_SKEWED, DT_I32, 1, 1, 0);
		check_permute_as(128, 8, Ts[i], IDS_FEW, DT_I32, 0, 1, 0);
		check_permute_as(256, 8, Ts[i], IDS_UNIFORM, DT_I64, 1, 1, 0);
		check_permute_as(1024, 2, Ts[i], IDS_SKEWED, DT_I32, 1, 1, 0);
		check_permute_as(32, 4, Ts[i], IDS_DROPPED, DT_I32, 1, 1, 0);	/* expert parallelism */
		check_permute_as(1023, 2, Ts[i], IDS_DROPPED, DT_I64, 0, 1, 0);
		check_permute_as(128, 8, Ts[i], IDS_UNIFORM, DT_I32, 1, 1, 1 << 20);	/* 3 rounds */
		check_permute_as(1024, 8, Ts[i], IDS_DROPPED, DT_I32, 1, 1, 1 << 16);	/* 9 rounds */
	}
}
END_TEST

START_TEST(test_permute_grid_many_slots)
{
	check_permute_as(256, 8, 4096, IDS_SKEWED, DT_I32, 1, 1, 0);	/* DeepSeek-V3 at T = 4096 */
	check_permute_as(128, 8, 4096, IDS_UNIFORM, DT_I32, 1, 1, 0);	/* Qwen3-30B-A3B */
	check_permute_as(1024, 4, 3000, IDS_UNIFORM, DT_I32, 1, 1, 0);	/* rounds for E = 1024 */
}
END_TEST

/* ---- generic bodies ---- */

/* Typical bodies, as the fusion passes leave them. */
static const char ptx_bodies[] =
	"kernel @combine(%ys: f32[8*T,4096], %x: bf16[T,4096]) -> (y: bf16[T,4096]) template=row_reduce {\n"
	"\t%y3 = reshape %ys, shape=[T, 8, 4096] : f32[T,8,4096]\n"
	"\t%s = reduce_sum %y3, axes=[1], keepdims=0 : f32[T,4096]\n"
	"\t%c = cast %s, to=bf16 : bf16[T,4096]\n"
	"\t%y = add %c, %x : bf16[T,4096]\n"
	"\tret %y\n}\n"
	"kernel @rstd(%x: bf16[T,4096]) -> (r: f32[T,1]) template=row_reduce {\n"
	"\t%r = rstd %x, eps=1e-06 : f32[T,1]\n"
	"\tret %r\n}\n"
	"kernel @softmax(%x: f32[T,128]) -> (y: f32[T,128]) template=row_reduce {\n"
	"\t%y = softmax %x : f32[T,128]\n"
	"\tret %y\n}\n"
	"kernel @ln(%x: bf16[T,768], %g: bf16[768], %b: bf16[768], %r: bf16[T,768]) -> (y: bf16[T,768]) template=row_reduce {\n"
	"\t%n = layer_norm %x, %g, %b : bf16[T,768]\n"
	"\t%y = add %n, %r : bf16[T,768]\n"
	"\tret %y\n}\n"
	"kernel @prep(%a: bf16[8,4096,2048], %c: bf16[8,4096,2048]) -> (t: bf16[8,2048,4096], cat: bf16[8,8192,2048]) template=elementwise {\n"
	"\t%t = transpose %a, perm=[0, 2, 1] : bf16[8,2048,4096]\n"
	"\t%cat = concat %a, %c, axis=1 : bf16[8,8192,2048]\n"
	"\tret %t, %cat\n}\n"
	"kernel @emb(%w: bf16[32000,4096], %ids: i64[T]) -> (y: bf16[T,4096]) template=elementwise {\n"
	"\t%y = gather %w, %ids, axis=0 : bf16[T,4096]\n"
	"\tret %y\n}\n"
	"kernel @act(%h: bf16[T,28672], %g: bf16[1,14336]) -> (a: bf16[T,14336]) template=elementwise {\n"
	"\t%a0 = swiglu %h : bf16[T,14336]\n"
	"\t%e = expand %g, shape=[T, 14336] : bf16[T,14336]\n"
	"\t%a1 = mul %a0, %e : bf16[T,14336]\n"
	"\t%a = gelu %a1, approx=tanh : bf16[T,14336]\n"
	"\tret %a\n}\n"
	"kernel @topk(%x: f32[T,256]) -> (v: f32[T,8], i: i64[T,8]) template=row_reduce {\n"
	"\t%v, %i = topk %x, k=8 : f32[T,8], i64[T,8]\n"
	"\tret %v, %i\n}\n"
	"kernel @scatter(%x: f32[2*T,64], %i: i32[2*T]) -> (y: f32[2*T,64]) template=elementwise {\n"
	"\t%y = scatter_rows %x, %i, rows=[2*T] : f32[2*T,64]\n"
	"\tret %y\n}\n"
	"kernel @qdyn(%x: bf16[T,7168]) -> (q: f8e4m3[T,7168], s: f32[T,56]) template=elementwise {\n"
	"\t%q, %s = quantize_dynamic %x, group=128, to=f8e4m3 : f8e4m3[T,7168], f32[T,56]\n"
	"\tret %q, %s\n}\n"
	"kernel @ops(%x: f32[T,16], %y: f32[16], %i: i32[T,16], %w: u4[16,16], %s: f32[16]) -> (a: f32[T,16], q: i32[T,16], k: i64[T,16], m: f32[T,16], d: bf16[16,16], o: f16[T,16,3], am: i64[T], ls: f32[T,16]) template=elementwise {\n"
	"\t%ab = abs %x : f32[T,16]\n"
	"\t%l = log %ab : f32[T,16]\n"
	"\t%p = pow %ab, %x : f32[T,16]\n"
	"\t%sp = softplus %l : f32[T,16]\n"
	"\t%e = erf %sp : f32[T,16]\n"
	"\t%hs = hard_sigmoid %e : f32[T,16]\n"
	"\t%gt = greater %x, %y : bool[T,16]\n"
	"\t%w1 = where %gt, %p, %hs : f32[T,16]\n"
	"\t%tab = const value=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0] : f32[16]\n"
	"\t%a = mul %w1, %tab : f32[T,16]\n"
	"\t%three = const value=[3] : i32[]\n"
	"\t%q0 = div %i, %three : i32[T,16]\n"
	"\t%q1 = mul %q0, %i : i32[T,16]\n"
	"\t%q = sub %q1, %i : i32[T,16]\n"
	"\t%k0 = cast %x, to=i64 : i64[T,16]\n"
	"\t%k1 = add %k0, %k0 : i64[T,16]\n"
	"\t%k = neg %k1 : i64[T,16]\n"
	"\t%xt = reshape %x, shape=[T, 16] : f32[T,16]\n"
	"\t%d2 = dequantize %w, %s, axis=0 : f32[16,16]\n"
	"\t%m = matmul %xt, %d2, trans_b=1 : f32[T,16]\n"
	"\t%d = cast %d2, to=bf16 : bf16[16,16]\n"
	"\t%o = onehot %i, depth=3, to=f16 : f16[T,16,3]\n"
	"\t%am = argmax %x, axis=1, keepdims=0 : i64[T]\n"
	"\t%ls = log_softmax %x : f32[T,16]\n"
	"\tret %a, %q, %k, %m, %d, %o, %am, %ls\n}\n";


/* A dim of a body at T: static, or coef*T. */
static int64_t
dim_at(const Module *m, Dim d, int T)
{
	return ir_dim_is_static(d) ? d : ir_dim_expr(m, d)->coef * T;
}

/* Integer parameters: values in [0, hi) where hi is given per name ("ids:8"). */
static int
int_range(const char *ranges, const char *name)
{
	const char *p = ranges ? strstr(ranges, name) : NULL;

	while (p && !((p == ranges || p[-1] == ' ') && p[strlen(name)] == ':'))
		p = strstr(p + 1, name);
	return p ? atoi(p + strlen(name) + 1) : 16;
}

static void
tol(DType dt, double *atol, double *rtol)
{
	double rel;

	tolerance_for(dt, atol, rtol, &rel);
	if (dt == DT_F32)
		*atol = 2e-5, *rtol = 2e-4;
}

/*
 * Emit kernel @name of the module text (or, with node >= 0, that node of
 * graph @name alone, through cg_emit_node) for emu, run it at each T on
 * fresh random inputs, and compare every result with ir_eval.
 */
static void
check_body_at(const char *text, const char *name, int node, const char *ranges, const int *Ts,
	      int nT, const CgBodySpec *spec)
{
	Module *im = parse(text);
	Graph *g = graph_named(im, name);
	const Node *n = NULL;
	const Value **param, **res;
	int nparam = 0, nres;
	CgModule *m;
	Diag d;

	m = emu_module(&d);
	if (node >= 0) {
		n = g->first;
		for (int i = 0; i < node; i++)
			n = n->next;
		ck_assert_msg(cg_emit_node(m, "k", n, spec, &d) == 0, "%s", d.last);
		param = xcalloc((size_t)n->nin + 1, sizeof *param);
		for (int i = 0; i < n->nin; i++) {
			const Value *v = n->in[i];
			if (v && !(v->kind == V_RESULT && v->def->op == OP_CONST))
				param[nparam++] = v;
		}
		res = (const Value **)n->out;
		nres = n->nout;
	} else {
		ck_assert_msg(cg_emit_body(m, "k", g, spec, &d) == 0, "%s", d.last);
		param = (const Value **)g->param;
		nparam = g->nparam;
		res = (const Value **)g->ret;
		nres = g->nret;
	}
	if (getenv("MOEC_CG_VERBOSE"))
		fprintf(stderr, "%s: %s grid %lld*T+%lld /%lld\n", name, cg_module_find(m, "k")->note,
			(long long)cg_module_find(m, "k")->grid[0].a, (long long)cg_module_find(m, "k")->grid[0].b,
			(long long)cg_module_find(m, "k")->grid[0].div);
	for (int t = 0; t < nT; t++) {
		int T = Ts[t];
		Tensor *in = xcalloc((size_t)nparam + 1, sizeof *in), *want, *got;
		Run r = {0};
		for (int i = 0; i < nparam; i++) {
			const Value *v = param[i];
			int64_t dim[MAXRANK];
			for (int k = 0; k < v->type.rank; k++)
				dim[k] = dim_at(im, v->type.dim[k], T);
			rand_tensor(&in[i], v->type.dt, v->type.rank, dim,
				    dtype_is_float(v->type.dt) ? 2.0 : int_range(ranges, v->name));
			if (v->type.dt == DT_BOOL)
				for (int64_t k = 0; k < tensor_numel(&in[i]); k++)
					((uint8_t *)in[i].data)[k] = (uint8_t)irand(2);
			arg_ptr(&r, in[i].data, tensor_nbytes(&in[i]) + (tensor_nbytes(&in[i]) == 0));
		}
		want = xcalloc((size_t)nres + 1, sizeof *want);
		got = xcalloc((size_t)nres + 1, sizeof *got);
		eval(g, in, nparam, want);	/* node >= 0: the graph returns the node's results */
		for (int i = 0; i < nres; i++) {
			poisoned_like(&got[i], &want[i]);
			arg_ptr(&r, got[i].data, tensor_nbytes(&got[i]) + (tensor_nbytes(&got[i]) == 0));
		}
		arg_int(&r, T);
		ck_assert_msg(launch(m, "k", &r, T, 0, &d) == 0, "%s at T=%d: %s", name, T, d.last);
		for (int i = 0; i < nres; i++) {
			char what[128];
			double atol, rtol;
			tol(want[i].dt, &atol, &rtol);
			snprintf(what, sizeof what, "%s T=%d result %%%s", name, T, res[i]->name);
			expect_close(what, &got[i], &want[i], atol, rtol);
			tensor_free(&got[i]);
			tensor_free(&want[i]);
		}
		for (int i = 0; i < nparam; i++)
			tensor_free(&in[i]);
		free(in);
		free(want);
		free(got);
	}
	if (node >= 0)
		free(param);
	cg_module_free(m);
	ir_free_module(im);
}

static const int body_Ts[] = {1, 7, 33};

static void
check_body(const char *text, const char *name, const char *ranges)
{
	check_body_at(text, name, -1, ranges, body_Ts, (int)NELEM(body_Ts), NULL);
}

START_TEST(test_body_moe_combine)
{
	check_body("kernel @combine(%ys: f32[4*T,64], %x: bf16[T,64]) -> (y: bf16[T,64]) template=row_reduce {\n"
		   "\t%y3 = reshape %ys, shape=[T, 4, 64] : f32[T,4,64]\n"
		   "\t%s = reduce_sum %y3, axes=[1], keepdims=0 : f32[T,64]\n"
		   "\t%c = cast %s, to=bf16 : bf16[T,64]\n"
		   "\t%y = add %c, %x : bf16[T,64]\n"
		   "\tret %y\n}\n", "combine", NULL);
}
END_TEST

/*
 * k_combine.c: module text with graph @main calling one row kernel; the
 * call must match (or, with want 0, not) and the combine kernel give the
 * body kernel's bits and the interpreter's values at each T.
 */
static void
check_combine(const char *text, int want)
{
	static const int Ts[] = {1, 7, 33};
	Module *im = parse(text);
	Graph *g = graph_named(im, "main"), *k;
	const Node *call = g->first;
	CgCombineSpec s;
	CgModule *m;
	Diag d;

	ck_assert(call && call->op == OP_CALL);
	k = call->callee;
	ck_assert_int_eq(cg_combine_match(im, call, &s), want);
	ck_assert(k->nparam <= 3);
	if (!want) {
		ir_free_module(im);
		return;
	}
	m = emu_module(&d);
	ck_assert_msg(cg_emit_combine(m, "c", &s, &d) == 0, "%s", d.last);
	ck_assert_msg(cg_emit_body(m, "k", k, NULL, &d) == 0, "%s", d.last);
	for (size_t t = 0; t < NELEM(Ts); t++) {
		int T = Ts[t];
		Tensor in[3], want_y, got[2];
		for (int i = 0; i < k->nparam; i++) {
			const Value *v = k->param[i];
			int64_t dim[MAXRANK];
			for (int j = 0; j < v->type.rank; j++)
				dim[j] = dim_at(im, v->type.dim[j], T);
			rand_tensor(&in[i], v->type.dt, v->type.rank, dim, 2.0);
		}
		eval(k, in, k->nparam, &want_y);
		for (int c = 0; c < 2; c++) {
			Run r = {0};
			poisoned_like(&got[c], &want_y);
			for (int i = 0; i < k->nparam; i++)
				arg_ptr(&r, in[i].data, tensor_nbytes(&in[i]));
			arg_ptr(&r, got[c].data, tensor_nbytes(&got[c]));
			arg_int(&r, T);
			ck_assert_msg(launch(m, c ? "k" : "c", &r, T, 0, &d) == 0, "%s", d.last);
		}
		ck_assert_msg(memcmp(got[0].data, got[1].data, tensor_nbytes(&got[0])) == 0,
			      "combine at T=%d: not the body kernel's bits", T);
		double atol, rtol;
		tol(want_y.dt, &atol, &rtol);
		expect_close("combine", &got[0], &want_y, atol, rtol);
		for (int i = 0; i < k->nparam; i++)
			tensor_free(&in[i]);
		tensor_free(&want_y);
		tensor_free(&got[0]);
		tensor_free(&got[1]);
	}
	cg_module_free(m);
	ir_free_module(im);
}

START_TEST(test_combine_matches_body)
{
	/* Qwen3-30B-A3B's, as the plan has it: [T,k,H] slots, cast, + x */
	check_combine("graph @main(%s: f32[T,8,64], %x: bf16[T,64]) -> (y: bf16[T,64]) {\n"
		      "\t%y = call @main.k(%s, %x) : bf16[T,64]\n\tret %y\n}\n"
		      "kernel @main.k(%s: f32[T,8,64], %x: bf16[T,64]) -> (y: bf16[T,64]) template=row_reduce {\n"
		      "\t%t = reduce_sum %s, axes=[1], keepdims=0 : f32[T,64]\n"
		      "\t%c = cast %t, to=bf16 : bf16[T,64]\n"
		      "\t%y = add %x, %c : bf16[T,64]\n\tret %y\n}\n", 1);
	/* the slots reshaped in the kernel, the residual second, k = 4, H not a multiple of 8 */
	check_combine("graph @main(%s: f32[4*T,36], %x: bf16[T,36]) -> (y: bf16[T,36]) {\n"
		      "\t%y = call @main.k(%s, %x) : bf16[T,36]\n\tret %y\n}\n"
		      "kernel @main.k(%s: f32[4*T,36], %x: bf16[T,36]) -> (y: bf16[T,36]) template=row_reduce {\n"
		      "\t%s3 = reshape %s, shape=[T, 4, 36] : f32[T,4,36]\n"
		      "\t%t = reduce_sum %s3, axes=[1], keepdims=0 : f32[T,36]\n"
		      "\t%c = cast %t, to=bf16 : bf16[T,36]\n"
		      "\t%y = add %c, %x : bf16[T,36]\n\tret %y\n}\n", 1);
	/* DeepSeek-V3's: f32 out, no cast, no residual */
	check_combine("graph @main(%s: f32[T,8,128]) -> (y: f32[T,128]) {\n"
		      "\t%y = call @main.k(%s) : f32[T,128]\n\tret %y\n}\n"
		      "kernel @main.k(%s: f32[T,8,128]) -> (y: f32[T,128]) template=row_reduce {\n"
		      "\t%y = reduce_sum %s, axes=[1], keepdims=0 : f32[T,128]\n\tret %y\n}\n", 1);
	/* f16, one slot, rows 2*T */
	check_combine("graph @main(%s: f32[2*T,1,20], %x: f16[2*T,20]) -> (y: f16[2*T,20]) {\n"
		      "\t%y = call @main.k(%s, %x) : f16[2*T,20]\n\tret %y\n}\n"
		      "kernel @main.k(%s: f32[2*T,1,20], %x: f16[2*T,20]) -> (y: f16[2*T,20]) template=row_reduce {\n"
		      "\t%t = reduce_sum %s, axes=[1], keepdims=0 : f32[2*T,20]\n"
		      "\t%c = cast %t, to=f16 : f16[2*T,20]\n"
		      "\t%y = add %c, %x : f16[2*T,20]\n\tret %y\n}\n", 1);
	/* --debug=slots-x: bf16 slots [k*T,H] reshaped, cast to f32, summed (16-byte loads of 8), + x */
	check_combine("graph @main(%s: bf16[8*T,64], %x: bf16[T,64]) -> (y: bf16[T,64]) {\n"
		      "\t%y = call @main.k(%s, %x) : bf16[T,64]\n\tret %y\n}\n"
		      "kernel @main.k(%s: bf16[8*T,64], %x: bf16[T,64]) -> (y: bf16[T,64]) template=row_reduce {\n"
		      "\t%s3 = reshape %s, shape=[T, 8, 64] : bf16[T,8,64]\n"
		      "\t%f = cast %s3, to=f32 : f32[T,8,64]\n"
		      "\t%t = reduce_sum %f, axes=[1], keepdims=0 : f32[T,64]\n"
		      "\t%c = cast %t, to=bf16 : bf16[T,64]\n"
		      "\t%y = add %x, %c : bf16[T,64]\n\tret %y\n}\n", 1);
	/* f16 slots [T,k,H] cast directly, k = 3, f32 x and y */
	check_combine("graph @main(%s: f16[T,3,24], %x: f32[T,24]) -> (y: f32[T,24]) {\n"
		      "\t%y = call @main.k(%s, %x) : f32[T,24]\n\tret %y\n}\n"
		      "kernel @main.k(%s: f16[T,3,24], %x: f32[T,24]) -> (y: f32[T,24]) template=row_reduce {\n"
		      "\t%f = cast %s, to=f32 : f32[T,3,24]\n"
		      "\t%t = reduce_sum %f, axes=[1], keepdims=0 : f32[T,24]\n"
		      "\t%y = add %t, %x : f32[T,24]\n\tret %y\n}\n", 1);
	/* --debug=fp8 (lower-moe's slots_out, DeepSeek-V3): bf16 slots of unweighted expert outputs, each
	 * times its f32 routing weight [T,k,1] before the sum (an fmul, then the adds), f32 out */
	check_combine("graph @main(%s: bf16[T,8,64], %w: f32[T,8,1]) -> (y: f32[T,64]) {\n"
		      "\t%y = call @main.k(%s, %w) : f32[T,64]\n\tret %y\n}\n"
		      "kernel @main.k(%s: bf16[T,8,64], %w: f32[T,8,1]) -> (y: f32[T,64]) template=row_reduce {\n"
		      "\t%f = cast %s, to=f32 : f32[T,8,64]\n"
		      "\t%m = mul %f, %w : f32[T,8,64]\n"
		      "\t%y = reduce_sum %m, axes=[1], keepdims=0 : f32[T,64]\n\tret %y\n}\n", 1);
	/* the same weighted, with a cast and the residual third, k = 3 */
	check_combine("graph @main(%s: bf16[T,3,16], %w: f32[T,3,1], %x: bf16[T,16]) -> (y: bf16[T,16]) {\n"
		      "\t%y = call @main.k(%s, %w, %x) : bf16[T,16]\n\tret %y\n}\n"
		      "kernel @main.k(%s: bf16[T,3,16], %w: f32[T,3,1], %x: bf16[T,16]) -> (y: bf16[T,16]) "
		      "template=row_reduce {\n"
		      "\t%f = cast %s, to=f32 : f32[T,3,16]\n"
		      "\t%m = mul %f, %w : f32[T,3,16]\n"
		      "\t%t = reduce_sum %m, axes=[1], keepdims=0 : f32[T,16]\n"
		      "\t%c = cast %t, to=bf16 : bf16[T,16]\n"
		      "\t%y = add %x, %c : bf16[T,16]\n\tret %y\n}\n", 1);
	/* not taken: a weight per element ([T,k,H], not [T,k,1]) */
	check_combine("graph @main(%s: bf16[T,8,64], %w: f32[T,8,64]) -> (y: f32[T,64]) {\n"
		      "\t%y = call @main.k(%s, %w) : f32[T,64]\n\tret %y\n}\n"
		      "kernel @main.k(%s: bf16[T,8,64], %w: f32[T,8,64]) -> (y: f32[T,64]) template=row_reduce {\n"
		      "\t%f = cast %s, to=f32 : f32[T,8,64]\n"
		      "\t%m = mul %f, %w : f32[T,8,64]\n"
		      "\t%y = reduce_sum %m, axes=[1], keepdims=0 : f32[T,64]\n\tret %y\n}\n", 0);
	/* not taken: 2-byte slots with H not a multiple of 8 (16-byte loads) */
	check_combine("graph @main(%s: bf16[T,2,36]) -> (y: f32[T,36]) {\n"
		      "\t%y = call @main.k(%s) : f32[T,36]\n\tret %y\n}\n"
		      "kernel @main.k(%s: bf16[T,2,36]) -> (y: f32[T,36]) template=row_reduce {\n"
		      "\t%f = cast %s, to=f32 : f32[T,2,36]\n"
		      "\t%y = reduce_sum %f, axes=[1], keepdims=0 : f32[T,36]\n\tret %y\n}\n", 0);
	/* not taken: H not a multiple of 4; a sum over the last axis; something after the add */
	check_combine("graph @main(%s: f32[T,8,66]) -> (y: f32[T,66]) {\n"
		      "\t%y = call @main.k(%s) : f32[T,66]\n\tret %y\n}\n"
		      "kernel @main.k(%s: f32[T,8,66]) -> (y: f32[T,66]) template=row_reduce {\n"
		      "\t%y = reduce_sum %s, axes=[1], keepdims=0 : f32[T,66]\n\tret %y\n}\n", 0);
	check_combine("graph @main(%s: f32[T,8,64]) -> (y: f32[T,8]) {\n"
		      "\t%y = call @main.k(%s) : f32[T,8]\n\tret %y\n}\n"
		      "kernel @main.k(%s: f32[T,8,64]) -> (y: f32[T,8]) template=row_reduce {\n"
		      "\t%y = reduce_sum %s, axes=[2], keepdims=0 : f32[T,8]\n\tret %y\n}\n", 0);
	check_combine("graph @main(%s: f32[T,8,64], %x: f32[T,64]) -> (y: f32[T,64]) {\n"
		      "\t%y = call @main.k(%s, %x) : f32[T,64]\n\tret %y\n}\n"
		      "kernel @main.k(%s: f32[T,8,64], %x: f32[T,64]) -> (y: f32[T,64]) template=row_reduce {\n"
		      "\t%t = reduce_sum %s, axes=[1], keepdims=0 : f32[T,64]\n"
		      "\t%a = add %t, %x : f32[T,64]\n"
		      "\t%y = mul %a, %x : f32[T,64]\n\tret %y\n}\n", 0);
}
END_TEST

START_TEST(test_body_rstd)
{
	check_body("kernel @r(%x: bf16[T,256]) -> (r: f32[T,1]) template=row_reduce {\n"
		   "\t%r = rstd %x, eps=1e-06 : f32[T,1]\n"
		   "\tret %r\n}\n", "r", NULL);
	check_body("kernel @r64(%x: bf16[T,64]) -> (r: f32[T,1]) template=row_reduce {\n"
		   "\t%r = rstd %x, eps=1e-05 : f32[T,1]\n"
		   "\tret %r\n}\n", "r64", NULL);
	check_body("kernel @rc(%x: f32[T,40]) -> (r: f32[T,1]) template=row_reduce {\n"
		   "\t%r = rstd %x, center=1 : f32[T,1]\n"
		   "\tret %r\n}\n", "rc", NULL);
}
END_TEST

START_TEST(test_body_softmax)
{
	check_body("kernel @sm(%x: f32[T,100]) -> (y: f32[T,100]) template=row_reduce {\n"
		   "\t%y = softmax %x, axis=-1 : f32[T,100]\n"
		   "\tret %y\n}\n", "sm", NULL);
	check_body("kernel @sm8(%x: bf16[T,8]) -> (y: f32[T,8]) template=row_reduce {\n"
		   "\t%c = cast %x, to=f32 : f32[T,8]\n"
		   "\t%y = softmax %c, axis=-1 : f32[T,8]\n"
		   "\tret %y\n}\n", "sm8", NULL);
	check_body("kernel @lsm(%x: f32[T,3,70]) -> (y: f32[T,3,70]) template=row_reduce {\n"
		   "\t%y = log_softmax %x, axis=1 : f32[T,3,70]\n"
		   "\tret %y\n}\n", "lsm", NULL);
	check_body("kernel @sm0(%x: f32[T,5]) -> (y: f32[T,5]) template=row_reduce {\n"
		   "\t%y = softmax %x, axis=0 : f32[T,5]\n"
		   "\tret %y\n}\n", "sm0", NULL);
}
END_TEST

START_TEST(test_body_layer_norm)
{
	check_body("kernel @ln(%x: f32[T,96], %g: f32[96], %b: f32[96]) -> (y: f32[T,96], mean: f32[T,1], istd: f32[T,1]) template=row_reduce {\n"
		   "\t%y, %mean, %istd = layer_norm %x, %g, %b, eps=1e-05 : f32[T,96], f32[T,1], f32[T,1]\n"
		   "\tret %y, %mean, %istd\n}\n", "ln", NULL);
	check_body("kernel @lnb(%x: bf16[T,128], %g: bf16[128]) -> (y: bf16[T,128]) template=row_reduce {\n"
		   "\t%y = layer_norm %x, %g, axis=-1 : bf16[T,128]\n"
		   "\tret %y\n}\n", "lnb", NULL);
	check_body("kernel @rms(%x: bf16[T,2,64], %g: bf16[64], %r: bf16[T,2,64]) -> (y: bf16[T,2,64]) template=row_reduce {\n"
		   "\t%n = rms_norm %x, %g, axis=2, eps=1e-06 : bf16[T,2,64]\n"
		   "\t%y = add %n, %r : bf16[T,2,64]\n"
		   "\tret %y\n}\n", "rms", NULL);
}
END_TEST

START_TEST(test_body_residual_add_cast)
{
	check_body("kernel @res(%x: f32[T,64], %r: bf16[T,64]) -> (y: bf16[T,64]) template=elementwise {\n"
		   "\t%rc = cast %r, to=f32 : f32[T,64]\n"
		   "\t%s = add %x, %rc : f32[T,64]\n"
		   "\t%y = cast %s, to=bf16 : bf16[T,64]\n"
		   "\tret %y\n}\n", "res", NULL);
}
END_TEST

START_TEST(test_body_weight_prep)
{
	static const int one[] = {1};

	check_body_at("kernel @tc(%a: bf16[4,8,16], %c: f32[4,3,16]) -> (t: bf16[4,16,8], cat: bf16[4,11,16], r: bf16[4,2,4,16]) template=elementwise {\n"
		      "\t%t = transpose %a, perm=[0, 2, 1] : bf16[4,16,8]\n"
		      "\t%cc = cast %c, to=bf16 : bf16[4,3,16]\n"
		      "\t%cat = concat %a, %cc, axis=1 : bf16[4,11,16]\n"
		      "\t%r = reshape %a, shape=[4, 2, 4, 16] : bf16[4,2,4,16]\n"
		      "\tret %t, %cat, %r\n}\n", "tc", -1, NULL, one, 1, NULL);
}
END_TEST

/* Weight preparation left in a graph: each node alone through cg_emit_node. */
START_TEST(test_body_weight_prep_nodes)
{
	Module *im;
	Graph *g;
	Tensor x, want[9];
	int64_t xd[2] = {3, 4};
	Diag d;
	int k = 0;

	im = parse("weight $a : bf16[4,8,16]\n"
		   "weight $b : bf16[4,8,16] mean=0.5 scale=0.25 seed=7\n"
		   "weight $c : f32[4,3,16]\n"
		   "weight $s : f32[3]\n"
		   "graph @prep(%x: f32[T,4]) -> (t: bf16[4,16,8], cc: bf16[4,3,16], cat: bf16[4,19,16], r: bf16[32,16], m: bf16[4,8,16], w: f32[4,3,16], mm: f32[4,8,8], g: bf16[4,2,16], sq: bf16[4,8,16]) {\n"
		   "\t%t = transpose $a, perm=[0, 2, 1] : bf16[4,16,8]\n"
		   "\t%cc = cast $c, to=bf16 : bf16[4,3,16]\n"
		   "\t%cat = concat $a, %cc, $b, axis=1 : bf16[4,19,16]\n"
		   "\t%r = reshape $b, shape=[32, 16] : bf16[32,16]\n"
		   "\t%m = mul $a, $b : bf16[4,8,16]\n"
		   "\t%s2 = reshape $s, shape=[3, 1] : f32[3,1]\n"
		   "\t%w = mul $c, %s2 : f32[4,3,16]\n"
		   "\t%mm = matmul $a, $b, trans_b=1, to=f32 : f32[4,8,8]\n"
		   "\t%i = const value=[5, 2] : i32[2]\n"
		   "\t%g = gather $a, %i, axis=1 : bf16[4,2,16]\n"
		   "\t%sq = mul $a, $a : bf16[4,8,16]\n"
		   "\tret %t, %cc, %cat, %r, %m, %w, %mm, %g, %sq\n}\n");
	g = graph_named(im, "prep");
	rand_tensor(&x, DT_F32, 2, xd, 1.0);
	eval(g, &x, 1, want);
	for (Node *n = g->first; n; n = n->next) {
		CgModule *m;
		Run r = {0};
		Tensor got;
		int ri = -1;
		if (n->op == OP_CONST || n->op == OP_RESHAPE)
			continue;
		for (int i = 0; i < g->nret; i++)
			if (g->ret[i] == n->out[0])
				ri = i;
		ck_assert_int_ge(ri, 0);
		m = emu_module(&d);
		ck_assert_msg(cg_emit_node(m, "k", n, NULL, &d) == 0, "%s: %s", ir_opname(n->op), d.last);
		for (int i = 0; i < n->nin; i++) {
			const Value *v = n->in[i];
			if (v->kind == V_WEIGHT) {
				const void *data = ir_weight_data(v->weight, &d);
				arg_ptr(&r, (void *)data, dtype_bytes(v->type.dt, (size_t)ir_type_numel(&v->type)));
			} else if (v->def->op == OP_CONST) {
				continue;
			} else {	/* an earlier node's result: the interpreter's */
				for (int j = 0; j < g->nret; j++)
					if (g->ret[j] == v)
						arg_ptr(&r, want[j].data, tensor_nbytes(&want[j]));
				if (v->def->op == OP_RESHAPE) {	/* a view of a weight */
					const void *data = ir_weight_data(v->def->in[0]->weight, &d);
					arg_ptr(&r, (void *)data, dtype_bytes(v->type.dt, (size_t)ir_type_numel(&v->type)));
				}
			}
		}
		poisoned_like(&got, &want[ri]);
		arg_ptr(&r, got.data, tensor_nbytes(&got));
		arg_int(&r, 3);
		ck_assert_msg(launch(m, "k", &r, 3, 0, &d) == 0, "%s: %s", ir_opname(n->op), d.last);
		expect_close(ir_opname(n->op), &got, &want[ri], 1e-5, want[ri].dt == DT_F32 ? 1e-5 : 1e-2);
		tensor_free(&got);
		cg_module_free(m);
		k++;
	}
	ck_assert_int_eq(k, 8);
	for (int i = 0; i < g->nret; i++)
		tensor_free(&want[i]);
	tensor_free(&x);
	ir_free_module(im);
}
END_TEST

START_TEST(test_body_gather_expand)
{
	check_body("kernel @emb(%w: bf16[50,16], %ids: i32[T]) -> (y: bf16[T,16]) template=elementwise {\n"
		   "\t%y = gather %w, %ids, axis=0 : bf16[T,16]\n"
		   "\tret %y\n}\n", "emb", "ids:50");
	check_body("kernel @g1(%x: f32[T,32], %i: i64[2,3]) -> (y: f32[T,2,3]) template=elementwise {\n"
		   "\t%y = gather %x, %i, axis=1 : f32[T,2,3]\n"
		   "\tret %y\n}\n", "g1", "i:32");
	check_body("kernel @ge(%x: f32[T,8], %i: i64[T,3]) -> (y: f32[T,3]) template=elementwise {\n"
		   "\t%y = gather_elements %x, %i, axis=1 : f32[T,3]\n"
		   "\tret %y\n}\n", "ge", "i:8");
	check_body("kernel @gnd(%x: f32[T,8,4], %i: i64[T,2,1]) -> (y: f32[T,2,4]) template=elementwise {\n"
		   "\t%y = gather_nd %x, %i, batch_dims=1 : f32[T,2,4]\n"
		   "\tret %y\n}\n", "gnd", "i:8");
	check_body("kernel @ex(%g: f32[1,64], %x: f32[T,64]) -> (y: f32[T,64]) template=elementwise {\n"
		   "\t%e = expand %g, shape=[T, 64] : f32[T,64]\n"
		   "\t%y = mul %e, %x : f32[T,64]\n"
		   "\tret %y\n}\n", "ex", NULL);
	check_body("kernel @ex3(%g: bf16[64], %x: bf16[T,1,1]) -> (y: bf16[T,3,64]) template=elementwise {\n"
		   "\t%e = expand %g, shape=[T, 3, 64] : bf16[T,3,64]\n"
		   "\t%y = sub %e, %x : bf16[T,3,64]\n"
		   "\tret %y\n}\n", "ex3", NULL);
}
END_TEST

START_TEST(test_body_swiglu_gelu)
{
	check_body("kernel @sw(%h: bf16[T,128]) -> (a: bf16[T,64]) template=elementwise {\n"
		   "\t%a = swiglu %h : bf16[T,64]\n"
		   "\tret %a\n}\n", "sw", NULL);
	check_body("kernel @swi(%h: f32[T,64]) -> (a: f32[T,32]) template=elementwise {\n"
		   "\t%a = swiglu %h, layout=interleave, act=gelu, approx=tanh : f32[T,32]\n"
		   "\tret %a\n}\n", "swi", NULL);
	check_body("kernel @oai(%h: f32[T,64]) -> (a: f32[T,32]) template=elementwise {\n"
		   "\t%a = swiglu %h, layout=interleave, act=oai, alpha=1.702, limit=1.5 : f32[T,32]\n"
		   "\tret %a\n}\n", "oai", NULL);
	check_body("kernel @gt(%x: bf16[T,96]) -> (y: bf16[T,96]) template=elementwise {\n"
		   "\t%y = gelu %x, approx=tanh : bf16[T,96]\n"
		   "\tret %y\n}\n", "gt", NULL);
	check_body("kernel @ge(%x: f32[T,96]) -> (y: f32[T,96]) template=elementwise {\n"
		   "\t%y = gelu %x : f32[T,96]\n"
		   "\tret %y\n}\n", "ge", NULL);
}
END_TEST

START_TEST(test_body_unary_binary)
{
	check_body("kernel @un(%x: f32[T,16]) -> (a: f32[T,16], b: f32[T,16], c: f32[T,16], d: f32[T,16], e: f32[T,16], f: f32[T,16], g: f32[T,16], h: f32[T,16]) template=elementwise {\n"
		   "\t%ab = abs %x : f32[T,16]\n"
		   "\t%a = log %ab : f32[T,16]\n"
		   "\t%b = rsqrt %ab : f32[T,16]\n"
		   "\t%e1 = exp %x : f32[T,16]\n"
		   "\t%c = softplus %x : f32[T,16]\n"
		   "\t%d = hard_swish %x : f32[T,16]\n"
		   "\t%e = pow %ab, %x : f32[T,16]\n"
		   "\t%f = tanh %e1 : f32[T,16]\n"
		   "\t%g = clip %x, max=1.0, min=-0.5 : f32[T,16]\n"
		   "\t%s = sigmoid %x : f32[T,16]\n"
		   "\t%l = leaky_relu %s, alpha=0.1 : f32[T,16]\n"
		   "\t%h = max %l, %g : f32[T,16]\n"
		   "\tret %a, %b, %c, %d, %e, %f, %g, %h\n}\n", "un", NULL);
	check_body("kernel @cmp(%x: f32[T,16], %y: f32[16], %i: i32[T,16]) -> (w: f32[T,16], q: i32[T,16], b: bool[T,16], k: i64[T,16]) template=elementwise {\n"
		   "\t%gt = greater %x, %y : bool[T,16]\n"
		   "\t%le = less_equal %x, %y : bool[T,16]\n"
		   "\t%n = not %le : bool[T,16]\n"
		   "\t%b = and %gt, %n : bool[T,16]\n"
		   "\t%w = where %b, %x, %y : f32[T,16]\n"
		   "\t%two = const value=[3] : i32[]\n"
		   "\t%q0 = div %i, %two : i32[T,16]\n"
		   "\t%q1 = mul %q0, %i : i32[T,16]\n"
		   "\t%q = sub %q1, %i : i32[T,16]\n"
		   "\t%k0 = cast %x, to=i64 : i64[T,16]\n"
		   "\t%k = neg %k0 : i64[T,16]\n"
		   "\tret %w, %q, %b, %k\n}\n", "cmp", "i:100");
	check_body("kernel @pw(%x: f32[T,8], %i: i32[T,8]) -> (p: f32[T,8], q: i32[T,8]) template=elementwise {\n"
		   "\t%three = const value=[3.0] : f32[]\n"
		   "\t%p = pow %x, %three : f32[T,8]\n"
		   "\t%two = const value=[2] : i32[]\n"
		   "\t%q = pow %i, %two : i32[T,8]\n"
		   "\tret %p, %q\n}\n", "pw", "i:30");
}
END_TEST

START_TEST(test_body_shapes)
{
	check_body("kernel @sh(%x: f32[T,8], %y: f32[T,4]) -> (s: f32[T,4], t: f32[T,16], a: f32[T,3], b: f32[T,5], c: f32[2*T,8], o: f32[T,8], z: i64[2]) template=elementwise {\n"
		   "\t%s = slice %x, axes=[1], ends=[8], starts=[1], steps=[2] : f32[T,4]\n"
		   "\t%t = tile %y, repeats=[1, 4] : f32[T,16]\n"
		   "\t%a, %b = split %x, axis=1, sizes=[3, 5] : f32[T,3], f32[T,5]\n"
		   "\t%c = concat %x, %x, axis=0 : f32[2*T,8]\n"
		   "\t%st = const value=[-1] : i64[1]\n"
		   "\t%en = const value=[-9] : i64[1]\n"
		   "\t%ax = const value=[1] : i64[1]\n"
		   "\t%sp = const value=[-1] : i64[1]\n"
		   "\t%o = slice %x, %st, %en, %ax, %sp : f32[T,8]\n"
		   "\t%z = shape %x : i64[2]\n"
		   "\tret %s, %t, %a, %b, %c, %o, %z\n}\n", "sh", NULL);
	check_body("kernel @oh(%i: i64[T,2]) -> (y: f32[T,2,5]) template=elementwise {\n"
		   "\t%y = onehot %i, depth=5, off=0.0, on=2.5, to=f32 : f32[T,2,5]\n"
		   "\tret %y\n}\n", "oh", "i:5");
}
END_TEST

START_TEST(test_body_topk_argmax)
{
	check_body("kernel @tk(%x: f32[T,100]) -> (v: f32[T,4], i: i64[T,4]) template=row_reduce {\n"
		   "\t%v, %i = topk %x, k=4 : f32[T,4], i64[T,4]\n"
		   "\tret %v, %i\n}\n", "tk", NULL);
	check_body("kernel @tks(%x: bf16[T,6,3]) -> (v: bf16[T,2,3], i: i64[T,2,3]) template=row_reduce {\n"
		   "\t%v, %i = topk %x, k=2, axis=1, largest=0 : bf16[T,2,3], i64[T,2,3]\n"
		   "\tret %v, %i\n}\n", "tks", NULL);
	check_body("kernel @am(%x: i32[T,70]) -> (i: i64[T]) template=row_reduce {\n"
		   "\t%i = argmax %x, axis=1, keepdims=0 : i64[T]\n"
		   "\tret %i\n}\n", "am", "x:9");
	check_body("kernel @amf(%x: f32[T,20]) -> (i: i64[T,1]) template=row_reduce {\n"
		   "\t%i = argmax %x, axis=1, select_last_index=1 : i64[T,1]\n"
		   "\tret %i\n}\n", "amf", NULL);
}
END_TEST

START_TEST(test_body_reductions)
{
	check_body("kernel @rd(%x: f32[T,4,80]) -> (s: f32[T,4], m: f32[T,1,1], x2: f32[1,4,80], n: f32[T,4]) template=row_reduce {\n"
		   "\t%s = reduce_mean %x, axes=[2], keepdims=0 : f32[T,4]\n"
		   "\t%m = reduce_max %x, axes=[1, 2] : f32[T,1,1]\n"
		   "\t%x2 = reduce_sum %x, axes=[0] : f32[1,4,80]\n"
		   "\t%n = reduce_min %x, axes=[-1], keepdims=0 : f32[T,4]\n"
		   "\tret %s, %m, %x2, %n\n}\n", "rd", NULL);
	check_body("kernel @rsum(%x: i32[T,6,5]) -> (s: i32[T,5]) template=row_reduce {\n"
		   "\t%s = reduce_sum %x, axes=[1], keepdims=0 : i32[T,5]\n"
		   "\tret %s\n}\n", "rsum", "x:1000");
	check_body("kernel @rsx(%x: f32[T,4,80]) -> (y: f32[T,4,80]) template=row_reduce {\n"
		   "\t%m = reduce_mean %x, axes=[0, 2] : f32[1,4,1]\n"
		   "\t%y = sub %x, %m : f32[T,4,80]\n"
		   "\tret %y\n}\n", "rsx", NULL);
	check_body("kernel @qd(%x: f32[T,128]) -> (q: f8e4m3[T,128], s: f32[T,1]) template=elementwise {\n"
		   "\t%q, %s = quantize_dynamic %x, group=row, to=f8e4m3 : f8e4m3[T,128], f32[T,1]\n"
		   "\tret %q, %s\n}\n", "qd", NULL);
	check_body("kernel @qg(%x: f32[T,64]) -> (q: i8[T,64], s: f32[T,2]) template=elementwise {\n"
		   "\t%q, %s = quantize_dynamic %x, group=32, to=i8 : i8[T,64], f32[T,2]\n"
		   "\tret %q, %s\n}\n", "qg", NULL);
}
END_TEST

/*
 * A norm's row kernel that also quantises its rows per group (fuse-act-quant):
 * the groups' scales are a warp's reduction each, nested in the CTA's row
 * (8 bytes of shared memory a group after the anchor's 16 and the 2·8·256
 * scratch), or the block's for a group of the whole row; every result
 * against the interpreter.  (f32 norms: a bf16 norm's rounding flips near a
 * tie, as the separate kernels' did, and an f32 scale shows it.)
 */
static const char nested_bodies[] =
	"kernel @nq(%x: f32[T,320], %g: f32[320]) -> (c: bf16[T,320], q: f8e4m3[T,320], s: f32[T,5], d: bf16[T,320]) template=row_reduce {\n"
	"\t%h = rms_norm %x, %g, eps=1e-06 : f32[T,320]\n"
	"\t%c = cast %h, to=bf16 : bf16[T,320]\n"
	"\t%q, %s = quantize_dynamic %h, group=64, to=f8e4m3 : f8e4m3[T,320], f32[T,5]\n"
	"\t%d = dequantize %q, %s, axis=1, block_size=64, to=bf16 : bf16[T,320]\n"
	"\tret %c, %q, %s, %d\n}\n"
	"kernel @nq3(%x: f32[T,2,256], %g: f32[256]) -> (q: f8e4m3[T,2,256], s: f32[T,2,16]) template=row_reduce {\n"
	"\t%h = rms_norm %x, %g, eps=1e-06 : f32[T,2,256]\n"
	"\t%q, %s = quantize_dynamic %h, group=16, to=f8e4m3 : f8e4m3[T,2,256], f32[T,2,16]\n"
	"\tret %q, %s\n}\n"
	"kernel @nqr(%x: f32[T,96], %g: f32[96], %b: f32[96]) -> (q: f8e4m3[T,96], s: f32[T,1]) template=row_reduce {\n"
	"\t%h = layer_norm %x, %g, %b, eps=1e-05 : f32[T,96]\n"
	"\t%q, %s = quantize_dynamic %h, group=row, to=f8e4m3 : f8e4m3[T,96], f32[T,1]\n"
	"\tret %q, %s\n}\n"
	/* Llama-4's router-scaled expert input: the max of the router's logits
	 * anchors the row, the groups of the scaled rows nest in it */
	"kernel @rq(%l: f32[T,64], %h: bf16[T,320]) -> (q: f8e4m3[T,320], s: f32[T,5]) template=row_reduce {\n"
	"\t%m = reduce_max %l, axes=[-1], keepdims=1 : f32[T,1]\n"
	"\t%sg = sigmoid %m : f32[T,1]\n"
	"\t%sc = cast %sg, to=bf16 : bf16[T,1]\n"
	"\t%y = mul %h, %sc : bf16[T,320]\n"
	"\t%c = clip %y, max=1.5, min=-1.5 : bf16[T,320]\n"
	"\t%q, %s = quantize_dynamic %c, group=64, to=f8e4m3 : f8e4m3[T,320], f32[T,5]\n"
	"\tret %q, %s\n}\n";

START_TEST(test_body_nested_quantisation)
{
	static const struct {
		const char *name;
		int groups;	/* per row of the norm */
		int anchor;	/* bytes of the anchor's statistics */
	} k[] = {{"nq", 5, 16}, {"nq3", 16, 16}, {"nqr", 1, 16}, {"rq", 5, 8}};
	Module *im = parse(nested_bodies);

	for (int i = 0; i < (int)NELEM(k); i++) {
		Diag d;
		CgModule *m = emu_module(&d);
		ck_assert_msg(cg_emit_body(m, "k", graph_named(im, k[i].name), NULL, &d) == 0, "%s", d.last);
		ck_assert_int_eq(cg_module_find(m, "k")->smem, k[i].anchor + 2 * 8 * 256 + 8 * k[i].groups);
		cg_module_free(m);
		check_body(nested_bodies, k[i].name, NULL);
	}
	ir_free_module(im);
}
END_TEST

START_TEST(test_body_quant_matmul_scatter)
{
	check_body("kernel @dq(%w: u4[T,64], %s: f32[T,2]) -> (y: bf16[T,64]) template=elementwise {\n"
		   "\t%y = dequantize %w, %s, axis=1, block_size=32, to=bf16 : bf16[T,64]\n"
		   "\tret %y\n}\n", "dq", "w:16");
	check_body("kernel @q(%x: f32[T,8], %s: f32[8]) -> (y: i8[T,8]) template=elementwise {\n"
		   "\t%y = quantize %x, %s, axis=1, to=i8 : i8[T,8]\n"
		   "\tret %y\n}\n", "q", NULL);
	check_body("kernel @mm(%x: f32[T,24], %w: f32[10,24], %b: f32[10]) -> (y: f32[T,10]) template=elementwise {\n"
		   "\t%y = matmul %x, %w, %b, trans_b=1 : f32[T,10]\n"
		   "\tret %y\n}\n", "mm", NULL);
	check_body("kernel @sr(%x: f32[T,8], %i: i32[T]) -> (y: f32[2*T,8]) template=elementwise {\n"
		   "\t%y = scatter_rows %x, %i, rows=[2*T] : f32[2*T,8]\n"
		   "\tret %y\n}\n", "sr", "i:2");
	check_body("kernel @se(%x: f32[T,8], %i: i64[T,3], %u: f32[T,3]) -> (y: f32[T,8]) template=elementwise {\n"
		   "\t%y = scatter_elements %x, %i, %u, axis=1, reduction=add : f32[T,8]\n"
		   "\tret %y\n}\n", "se", "i:8");
	check_body("kernel @snd(%x: f32[6,8], %i: i64[T,1], %u: f32[T,8]) -> (y: f32[6,8]) template=elementwise {\n"
		   "\t%y = scatter_nd %x, %i, %u : f32[6,8]\n"
		   "\tret %y\n}\n", "snd", "i:6");
}
END_TEST

START_TEST(test_body_many_ops)
{
	check_body(ptx_bodies, "ops", "i:100 w:16");
}
END_TEST

START_TEST(test_body_refuses_with_a_diagnostic)
{
	Module *im = parse("kernel @nz(%b: bool[T,8]) -> (y: i64[2,?]) template=elementwise {\n"
			   "\t%y = nonzero %b : i64[2,?]\n"
			   "\tret %y\n}\n"
			   "kernel @rt(%l: f32[T,8]) -> (w: f32[T,2], i: i32[T,2]) template=route {\n"
			   "\t%w, %i = route %l, k=2 : f32[T,2], i32[T,2]\n"
			   "\tret %w, %i\n}\n");
	CgModule *m;
	Diag d;

	m = emu_module(&d);
	diag_init(&d, NULL);
	ck_assert_int_eq(cg_emit_body(m, "nz", graph_named(im, "nz"), NULL, &d), -1);
	ck_assert_msg(strstr(d.last, "nonzero") && strstr(d.last, "kernels.ir:2:"), "%s", d.last);
	ck_assert_int_eq(cg_body_check(graph_named(im, "rt"), &d), -1);
	ck_assert_msg(strstr(d.last, "route") && strstr(d.last, "kernels.ir:6:"), "%s", d.last);
	ck_assert_int_eq(cg_module_nkernel(m), 0);
	cg_module_free(m);
	ir_free_module(im);
}
END_TEST

/* A concat is one branch per operand, at most 64: more is refused, not
 * compiled with the operands past 64 left out. */
START_TEST(test_body_refuses_concat_of_65)
{
	char text[4096], *p = text;
	Module *im;
	Diag d;

	p += sprintf(p, "kernel @c(%%x: f32[T,1]) -> (y: f32[T,65]) template=elementwise {\n"
		     "\t%%y = concat");
	for (int i = 0; i < 65; i++)
		p += sprintf(p, "%s %%x", i ? "," : "");
	sprintf(p, ", axis=1 : f32[T,65]\n\tret %%y\n}\n");
	im = parse(text);
	diag_init(&d, NULL);
	ck_assert_int_eq(cg_body_check(graph_named(im, "c"), &d), -1);
	ck_assert_msg(strstr(d.last, "65 operands (the body compiler takes up to 64)"), "%s",
		      d.last);
	ir_free_module(im);
}
END_TEST

/* ---- PTX for sm_80, sm_90, sm_90a, assembled by ptxas ---- */

/* Every builder's typical kernels into m; returns how many. */
static int
emit_all(CgModule *m, Diag *d)
{
	static const DType sdt[] = {DT_BF16, DT_F16, DT_F32, DT_F8E4M3, DT_I8, DT_U4};
	int n = 0;
	char name[64];

	for (size_t i = 0; i < NELEM(route_cases); i++) {
		Module *im;
		CgRouteSpec s;
		char text[512];
		route_text(&route_cases[i], text, sizeof text);
		im = parse(text);
		ck_assert_msg(cg_route_spec(graph_named(im, "r")->first, &s, d) == 0, "%s", d->last);
		snprintf(name, sizeof name, "route%zu", i);
		ck_assert_msg(cg_emit_route(m, name, &s, d) == 0, "%s: %s", name, d->last);
		s.bfly = s.warp_sync = s.redux = 1;	/* the decode front's route launch: redux.sync */
		snprintf(name, sizeof name, "route%zu_rx", i);
		ck_assert_msg(cg_emit_route(m, name, &s, d) == 0, "%s: %s", name, d->last);
		ir_free_module(im);
		n += 2;
	}
	for (size_t i = 0; i < NELEM(sdt); i++) {
		snprintf(name, sizeof name, "synth_%s", dtype_name(sdt[i]));
		ck_assert_msg(cg_emit_synth(m, name, sdt[i], d) == 0, "%s: %s", name, d->last);
		n++;
	}
	{
		Module *im = parse(ptx_bodies);
		for (int i = 0; i < im->ngraph; i++) {
			Graph *g = im->graph[i];
			snprintf(name, sizeof name, "body_%s", g->name);
			ck_assert_msg(cg_emit_body(m, name, g, NULL, d) == 0, "%s: %s", name, d->last);
			n++;
		}
		ir_free_module(im);
	}
	for (int i = 0; i < 3; i++) {
		CgPermuteSpec s;
		cg_permute_default(&s);
		s.E = i == 0 ? 8 : i == 1 ? 256 : 1024;
		s.k = i == 0 ? 2 : 8;
		s.want_pos = i != 2;
		snprintf(name, sizeof name, "permute%d", i);
		ck_assert_msg(cg_emit_permute(m, name, &s, d) == 0, "%s: %s", name, d->last);
		n++;
		s.grid = 1;	/* the grid sort: two kernels */
		s.max_slots = 8 * 4096;
		snprintf(name, sizeof name, "gpermute%d", i);
		ck_assert_msg(cg_emit_permute(m, name, &s, d) == 0, "%s: %s", name, d->last);
		n += 2;
	}
	for (int i = 0; i < 2; i++) {	/* combines: Qwen3-30B-A3B's and DeepSeek-V3's */
		CgCombineSpec c = {.H = i ? 7168 : 2048, .k = 8, .rows = MEXPR_T(1), .residual = !i,
				   .sum_dt = i ? DT_F32 : DT_BF16, .x_dt = DT_BF16, .y_dt = i ? DT_F32 : DT_BF16};
		snprintf(name, sizeof name, "combine%d", i);
		ck_assert_msg(cg_emit_combine(m, name, &c, d) == 0, "%s: %s", name, d->last);
		n++;
	}
	return n;
}

START_TEST(test_ptx_assembles_on_target)
{
	const char *sm = targets[_i];
	CgTarget t = {sm, NULL, 3};
	CgPtxasResult r;
	CgModule *m;
	Diag d;
	int n;

	diag_init(&d, stderr);
	m = cg_module_new(&t, "kernels", &d);
	ck_assert_ptr_nonnull(m);
	n = emit_all(m, &d);
	ck_assert_msg(cg_module_ptx(m, NULL, &d) != NULL, "%s", d.last);
	if (!cg_ptxas_path()) {
		fprintf(stderr, "check_kernels: no ptxas; PTX for %s not assembled (skipped)\n", sm);
		cg_module_free(m);
		return;
	}
	ck_assert_msg(cg_module_assemble(m, 0, &r, &d) == 0, "%s", d.last);
	ck_assert_int_eq(r.n, n);
	for (int i = 0; i < n; i++) {
		const CgKernel *k = cg_module_kernel(m, i);
		ck_assert_msg(k->regs > 0 && k->regs <= 255, "%s: %d registers", k->name, k->regs);
		ck_assert_msg(k->spill_stores == 0 && k->spill_loads == 0, "%s: spills %d/%d",
			      k->name, k->spill_stores, k->spill_loads);
		if (getenv("MOEC_CG_VERBOSE"))
			fprintf(stderr, "%s %-16s %3d regs, spills %d/%d, smem %6d: %s\n", sm, k->name,
				k->regs, k->spill_stores, k->spill_loads, k->smem, k->note);
	}
	cg_ptxas_free(&r);
	cg_module_free(m);
}
END_TEST

Suite *
kernels_suite(void)
{
	Suite *s = suite_create("kernels");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 300);
	tcase_add_loop_test(t, test_ptx_assembles_on_target, 0, (int)NELEM(targets));
	tcase_add_test(t, test_synth_matches_host_bytes);
	tcase_add_loop_test(t, test_route_matches_interpreter, 0, (int)NELEM(route_cases));
	tcase_add_test(t, test_body_moe_combine);
	tcase_add_test(t, test_combine_matches_body);
	tcase_add_test(t, test_body_rstd);
	tcase_add_test(t, test_body_softmax);
	tcase_add_test(t, test_body_layer_norm);
	tcase_add_test(t, test_body_residual_add_cast);
	tcase_add_test(t, test_body_weight_prep);
	tcase_add_test(t, test_body_weight_prep_nodes);
	tcase_add_test(t, test_body_gather_expand);
	tcase_add_test(t, test_body_swiglu_gelu);
	tcase_add_test(t, test_body_unary_binary);
	tcase_add_test(t, test_body_shapes);
	tcase_add_test(t, test_body_topk_argmax);
	tcase_add_test(t, test_body_reductions);
	tcase_add_test(t, test_body_quant_matmul_scatter);
	tcase_add_test(t, test_body_many_ops);
	tcase_add_test(t, test_body_refuses_with_a_diagnostic);
	tcase_add_test(t, test_body_refuses_concat_of_65);
	suite_add_tcase(s, t);
	t = tcase_create("permute");	/* apart from core: the longest, for ctest -j */
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_permute_matches_interpreter);
	tcase_add_test(t, test_permute_many_slots);
	tcase_add_test(t, test_permute_grid_matches_interpreter);
	tcase_add_test(t, test_permute_grid_many_slots);
	suite_add_tcase(s, t);
	t = tcase_create("nested");	/* row kernels with a reduction nested in the rows */
	tcase_add_test(t, test_body_nested_quantisation);
	suite_add_tcase(s, t);
	return s;
}
