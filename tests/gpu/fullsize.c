/*
 * fullsize.c — a config-built block at full size with synthetic weights
 * (seed 1), run by the interpreter on a few rows of tokens:
 *
 *	fullsize ref MODEL LAYER OUTDIR [ROWS]
 *	fullsize check MODEL LAYER [ROWS]
 *
 * `ref` writes reference rows for the full-size GPU check
 * (tests/gpu/make_fullsize.sh): OUTDIR/uniform/test_data_set_0/{input_0,
 * output_0}.pb and, for a routed block, OUTDIR/skewed/..., which
 * `moert test --tile=...` repeats to any T; with them the routing decisions
 * (routing_N.pb, routing_N_logits.pb, as `moec run --test-data` writes
 * them), so that moert test names any flip and tells one at a near tie of
 * the reference's values (left out) from a wrong kernel (failed).  `check` (CI, ctest fullsize_*)
 * runs the default pipeline and the fused IR on the same rows: routing
 * decisions identical to the graph's, outputs within the dtype's tolerance.
 *
 * Uniform rows are N(0,1) per element.  Skewed rows lean on two "hot"
 * experts: 90% of them are a hot expert's router row (divided by the norm
 * weight, so the normalised row points along it) plus noise, so most tokens
 * pick a hot expert; the router weight is read off the graph (the moe node's
 * logits matmul).  `ref` leaves out rows whose routing is within the f32
 * tolerance of a tie.  That does not cover a router whose f32 logits are
 * rounded to bf16 before the choice (Step-3.5-Flash): a device sum on the
 * other side of a rounding boundary moves a score by a bf16 ulp, more than
 * that tolerance.  moert test tells such a flip from a wrong kernel by the
 * routing files written beside the rows and the bundle's route lines.  A block with two inputs (Arctic's MoE layers: x, and layer_in
 * that the router's norm reads) gets rows for each, input_0 and input_1:
 * the skewed rows go to the input the router reads, the other input is
 * N(0,1) from its own seed.  Exit 0 ok, 1 failed, 2 bad usage, 77 the
 * weights do not fit this host's memory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend.h"
#include "passes.h"

enum { HOT = 2 };

static double
gauss(uint64_t seed, uint64_t i)
{
	double u1 = ((double)(mix64(seed ^ mix64(2 * i)) >> 11) + 1) * 0x1p-53;
	double u2 = (double)(mix64(seed ^ mix64(2 * i + 1)) >> 11) * 0x1p-53;

	return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The value v was computed from, through casts, bias adds and reshapes. */
static const Node *
through(const Value *v, Op want)
{
	for (const Node *n = v ? v->def : NULL; n; n = n->in[0] ? n->in[0]->def : NULL) {
		if (n->op == want)
			return n;
		if (n->op != OP_CAST && n->op != OP_ADD && n->op != OP_RESHAPE)
			return NULL;
	}
	return NULL;
}

typedef struct {
	Tensor w, g;		/* router weight [E,H] (as f32) and norm weight [H] */
	int64_t E;
	const Value *x;		/* what the norm reads: the input skewed rows lean through */
} Router;

static int
weight_f32(Value *v, Tensor *t, Diag *d)
{
	const void *data;

	if (!v || v->kind != V_WEIGHT || !(data = ir_weight_data(v->weight, d)))
		return -1;
	if (tensor_alloc(t, DT_F32, v->type.rank, v->type.dim))
		return -1;
	for (int64_t i = 0; i < tensor_numel(t); i++)
		((float *)t->data)[i] = (float)dtype_load(v->type.dt, data, (size_t)i);
	return 0;
}

/* The norm's weight as f32: a weight, or 1 + w (the zero-centred norms of
 * qwen3_next, Qwen3.5, Step-3.5: add(cast(w), const c) with a scalar c). */
static int
norm_weight_f32(Value *v, Tensor *t, Diag *d)
{
	const Node *a = v ? v->def : NULL, *k;
	double c;

	if (!a || a->op != OP_ADD)
		return weight_f32(v, t, d);
	k = a->in[1] ? a->in[1]->def : NULL;
	if (!k || k->op != OP_CONST || ir_attr_floats(k, "value", &c, 1) != 1)
		return -1;
	v = a->in[0];
	if (v->def && v->def->op == OP_CAST)
		v = v->def->in[0];
	if (weight_f32(v, t, d))
		return -1;
	for (int64_t i = 0; i < tensor_numel(t); i++)
		((float *)t->data)[i] += (float)c;
	return 0;
}

/* The first moe node's router: logits = rms_norm(x, g) @ W^T. */
static int
find_router(Graph *g, Router *r, Diag *d)
{
	const Node *moe = NULL, *mm, *norm;

	for (const Node *n = g->first; n && !moe; n = n->next)
		if (n->op == OP_MOE)
			moe = n;
	if (!moe || !(mm = through(moe->in[1], OP_MATMUL)) || !ir_attr_int(mm, "trans_b", 0) ||
	    !(norm = through(mm->in[0], OP_RMS_NORM)))
		return -1;
	if (weight_f32(mm->in[1], &r->w, d) || norm_weight_f32(norm->in[1], &r->g, d))
		return -1;
	r->E = r->w.dim[0];
	r->x = norm->in[0];
	return 0;
}

/* Row `row` of candidates: uniform, or skewed towards hot expert e; input
 * p > 0 of a block with more draws its rows from seeds of its own. */
static void
make_row(const Router *r, int skew, int p, int64_t row, int64_t H, double *x)
{
	uint64_t seed = (skew ? 0x5ce3d : 0x0a1f0) + 0x10000 * (uint64_t)p;
	int64_t pick = (int64_t)(mix64(seed ^ (uint64_t)row) % 10);
	double rms = 0;

	for (int64_t c = 0; c < H; c++)
		x[c] = gauss(seed, (uint64_t)(row * H + c));
	if (!skew || pick == 9)
		return;
	int64_t e = (pick % HOT) * (r->E / HOT);	/* experts 0 and E/2 */
	const float *w = &((const float *)r->w.data)[e * H];
	const float *g = r->g.data;
	for (int64_t c = 0; c < H; c++) {
		double gc = fabs(g[c]) < 0.1 ? (g[c] < 0 ? -0.1 : 0.1) : g[c];
		x[H + c] = w[c] / gc;
		rms += x[H + c] * x[H + c];
	}
	rms = sqrt(rms / (double)H);
	for (int64_t c = 0; c < H && rms > 0; c++)
		x[c] = 2.0 * x[H + c] / rms + 0.5 * x[c];
}

/* Token t's routing is clear of the f32 tolerance of a tie. */
static int
clear_of_ties(const Routing *r, int64_t t)
{
	double atol, rtol, rel;

	tolerance_for(DT_F32, &atol, &rtol, &rel);
	return routing_clear(r, t, atol, rtol);
}

static int
write_set(const char *dir, const char *mode, const Tensor *t, const char *what, Diag *d)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/%s", dir, mode);
	mkdir(path, 0777);
	snprintf(path, sizeof path, "%s/%s/test_data_set_0", dir, mode);
	mkdir(path, 0777);
	snprintf(path, sizeof path, "%s/%s/test_data_set_0/%s.pb", dir, mode, what);
	return tensor_write(path, t, d);
}

/* Rows keep[0..n) of t (first dim) as a new tensor. */
static int
pick_rows(const Tensor *t, const int64_t *keep, int64_t n, Tensor *out)
{
	int64_t dim[MAXRANK];
	size_t row = tensor_nbytes(t) / (size_t)t->dim[0];

	memcpy(dim, t->dim, sizeof dim);
	dim[0] = n;
	if (tensor_alloc(out, t->dt, t->rank, dim))
		return -1;
	for (int64_t i = 0; i < n; i++)
		memcpy((char *)out->data + (size_t)i * row, (char *)t->data + (size_t)keep[i] * row,
		       row);
	return 0;
}

/* The routing decision i of the rows kept, as `moec run --test-data` writes
 * it (routing_I.pb: the experts, routing_I_logits.pb: the values ranked), so
 * that moert test tells a flip from a wrong kernel by the reference's own
 * margins, and names the token and experts of any flip. */
static int
write_routing(const char *dir, const char *mode, const Routing *r, int i, const int64_t *keep,
	      int64_t n, Diag *d)
{
	Tensor ids = {DT_I32, 2, {r->T, r->k}, r->ids, NULL};
	Tensor val = {DT_F32, 2, {r->T, r->E}, r->val, NULL};
	Tensor sel = {0};
	char what[48];
	int bad;

	snprintf(what, sizeof what, "routing_%d", i);
	bad = pick_rows(&ids, keep, n, &sel) || write_set(dir, mode, &sel, what, d);
	tensor_free(&sel);
	snprintf(what, sizeof what, "routing_%d_logits", i);
	bad = bad || pick_rows(&val, keep, n, &sel) || write_set(dir, mode, &sel, what, d);
	tensor_free(&sel);
	return bad;
}

static uint64_t
mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;

	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb * 1024;
}

/* moe's synthetic expert stacks, and the quantised ones with their scales
 * behind a deferred dequantize (ir_eval_defers), are read a row at a time by
 * the interpreter: held whole only if something else reads them. */
static int
held_whole(const Graph *g, const Weight *w)
{
	int lazy = 0;

	if (w->data)
		return 1;
	for (const Node *n = g->first; n; n = n->next)
		for (int i = 0; i < n->nin; i++) {
			if (n->in[i] != w->value)
				continue;
			if ((n->op == OP_MOE && (i == 3 || i == 4)) || ir_eval_defers(g, n))
				lazy = 1;
			else
				return 1;
		}
	return !lazy;
}

/* The bytes of weights the graph's interpreter holds. */
static uint64_t
weight_bytes(const Module *m, const Graph *g)
{
	uint64_t b = 0;

	for (int i = 0; i < m->nweight; i++) {
		int64_t n = ir_type_numel(&m->weight[i]->value->type);
		if (n > 0 && held_whole(g, m->weight[i]))
			b += dtype_bytes(m->weight[i]->value->type.dt, (size_t)n);
	}
	return b;
}

/* Tokens that picked a hot expert, in percent. */
static double
hot_share(const Routing *r, const int64_t *keep, int64_t n)
{
	int64_t hot = 0;

	for (int64_t i = 0; i < n; i++) {
		int h = 0;
		for (int64_t j = 0; j < r->k; j++)
			h |= r->ids[keep[i] * r->k + j] % (r->E / HOT) == 0;
		hot += h;
	}
	return n ? 100.0 * (double)hot / (double)n : 0;
}

/* The block, its router, and rows of both kinds run through the graph. */
typedef struct {
	Module *m;
	Graph *g;
	Router r;
	int routed, nmode;
	int64_t cand;		/* rows per kind */
	Tensor in[2], out[8];	/* in: one per input of the block (x, layer_in) */
	RouteLog log;
} Run;

static void
run_free(Run *u)
{
	for (int i = 0; i < 8; i++)
		tensor_free(&u->out[i]);
	tensor_free(&u->in[0]);
	tensor_free(&u->in[1]);
	tensor_free(&u->r.w);
	tensor_free(&u->r.g);
	route_log_free(&u->log);
	ir_free_module(u->m);
}

/* 0 ok; else the exit code, after a message. */
static int
run_graph(Run *u, const char *model, int layer, int64_t cand, Diag *d)
{
	FeOpts fo;
	EvalOpts eo = {.hook = ir_route_log_hook, .hook_ctx = &u->log};
	int64_t H, dim[2];
	double *x;

	memset(u, 0, sizeof *u);
	fe_default_opts(&fo);
	fo.layer = layer, fo.synthetic = 1, fo.seed = 1;
	u->m = fe_load(model, &fo, d);
	u->g = u->m ? ir_main_graph(u->m) : NULL;
	if (!u->g || u->g->nparam < 1 || u->g->nparam > 2 || u->g->nret > 8) {
		fprintf(stderr, "%s: not a config-built block\n", model);
		return 2;
	}
	for (int p = 0; p < u->g->nparam; p++)
		if (!ir_type_eq(&u->g->param[p]->type, &u->g->param[0]->type) ||
		    u->g->param[p]->type.rank != 2) {
			fprintf(stderr, "%s: not a config-built block (inputs [T,H] of one dtype)\n",
				model);
			return 2;
		}
	if (weight_bytes(u->m, u->g) > mem_available() / 10 * 9) {
		printf("SKIP %s layer %d: its weights (%.1f GB) do not fit this host's memory\n",
		       model, layer, weight_bytes(u->m, u->g) / 1e9);
		return 77;
	}
	H = u->g->param[0]->type.dim[1];
	u->routed = find_router(u->g, &u->r, d) == 0;
	u->nmode = u->routed ? 2 : 1;
	u->cand = cand;
	dim[0] = u->nmode * cand, dim[1] = H;
	x = xmalloc(sizeof *x * (size_t)(2 * H));
	for (int p = 0; p < u->g->nparam; p++) {
		/* skewed rows lean on hot experts through the input the router reads */
		int lean = u->routed && u->r.x == u->g->param[p];
		if (tensor_alloc(&u->in[p], u->g->param[p]->type.dt, 2, dim)) {
			free(x);
			return 1;
		}
		for (int64_t t = 0; t < dim[0]; t++) {
			make_row(&u->r, lean && t >= cand, p, t % cand, H, x);
			for (int64_t c = 0; c < H; c++)
				dtype_store(u->in[p].dt, u->in[p].data, (size_t)(t * H + c), x[c]);
		}
	}
	free(x);
	return ir_eval(u->g, u->in, u->g->nparam, u->out, &eo, d) ? 1 : 0;
}

static int
cmd_ref(const char *model, int layer, const char *dir, int64_t rows, Diag *d)
{
	Run u;
	int rc = run_graph(&u, model, layer, rows + rows / 2 + 8, d);

	for (int mode = 0; !rc && mode < u.nmode; mode++) {
		const char *name = mode ? "skewed" : "uniform";
		int64_t *keep = xmalloc(sizeof *keep * (size_t)u.cand), n = 0, ties = 0;
		const Routing *rt = u.log.n ? &u.log.r[0] : NULL;
		Tensor sel = {0};
		for (int64_t t = mode * u.cand; t < (mode + 1) * u.cand && n < rows; t++)
			if (!rt || clear_of_ties(rt, t))
				keep[n++] = t;
			else
				ties++;
		int bad = 0;
		for (int p = 0; !bad && p < u.g->nparam; p++) {
			char what[32];
			snprintf(what, sizeof what, "input_%d", p);
			bad = pick_rows(&u.in[p], keep, n, &sel) || write_set(dir, name, &sel, what, d);
			tensor_free(&sel);
		}
		for (int i = 0; !bad && i < u.g->nret; i++) {
			char what[32];
			snprintf(what, sizeof what, "output_%d", i);
			bad = pick_rows(&u.out[i], keep, n, &sel) ||
			      write_set(dir, name, &sel, what, d);
			tensor_free(&sel);
		}
		for (int i = 0; !bad && i < u.log.n; i++)
			bad = write_routing(dir, name, &u.log.r[i], i, keep, n, d);
		printf("%s: %lld rows", name, (long long)n);
		if (rt)
			printf(" (%lld near ties left out)", (long long)ties);
		if (rt && u.routed)	/* no router found (DBRX's LayerNorm): no hot experts */
			printf(", %.0f%% of them pick expert 0 or %lld", hot_share(rt, keep, n),
			       (long long)(u.r.E / HOT));
		printf("\n");
		free(keep);
		rc = bad;
	}
	run_free(&u);
	return rc;
}

/* The default pipeline, then the fused IR on the same rows. */
static int
cmd_check(const char *model, int layer, int64_t rows, Diag *d)
{
	Run u;
	PassOpts po;
	PassCtx pc = {.d = d};
	RouteLog log = {0};
	EvalOpts eo = {.hook = ir_route_log_hook, .hook_ctx = &log};
	Tensor out[8] = {{0}};
	RouteDiff rd = {0};
	int rc = run_graph(&u, model, layer, rows, d), ok = 1;

	pass_default_opts(&po);
	if (!rc && (pass_run(u.m, &po, &pc) != 0 ||
		    ir_eval(u.g, u.in, u.g->nparam, out, &eo, d) != 0))
		rc = 1;
	if (!rc) {
		int n = route_log_compare(&u.log, &log, 0, 0, &rd);	/* identical */
		printf("%s layer %d, %lld rows: routing: %d decisions compared, %lld tokens flipped%s%s\n",
		       model, layer, (long long)u.in[0].dim[0], n, (long long)rd.nflip,
		       rd.nflip ? ": " : "", rd.msg);
		ok = n == u.log.n && u.log.n == log.n && !rd.nflip;
		for (int i = 0; ok && i < log.n; i++) {	/* the router's values, bit for bit */
			const Routing *a = &u.log.r[i], *b = &log.r[i];
			if (!routing_same_shape(a, b) ||
			    memcmp(a->val, b->val, sizeof *a->val * (size_t)(a->T * a->E))) {
				printf("  routing decision %d: the router's %ss differ from the graph's\n",
				       i, a->what);
				ok = 0;
			}
		}
	}
	for (int i = 0; !rc && i < u.g->nret; i++) {
		double atol, rtol, rel;
		Compare c;
		DType dt = u.g->ret[i]->type.dt;
		tolerance_for(dt, &atol, &rtol, &rel);
		tensor_compare(&out[i], &u.out[i], atol, rtol, &c);
		int good = tensor_close(&c, dt, tensor_numel(&u.out[i]));
		printf("  %s: rel_l2 %.2e max_abs %.2e, %lld elements outside tolerance%s\n",
		       u.g->retname[i], c.rel_l2, c.max_abs, (long long)c.nbad,
		       good ? "" : " (beyond tolerance)");
		ok &= good;
	}
	for (int i = 0; i < 8; i++)
		tensor_free(&out[i]);
	route_diff_free(&rd);
	route_log_free(&log);
	run_free(&u);
	if (!rc)
		printf("%s\n", ok ? "ok" : "FAIL");
	return rc ? rc : !ok;
}

int
main(int argc, char **argv)
{
	Diag d;
	int check = argc > 1 && strcmp(argv[1], "check") == 0;
	int ref = argc > 1 && strcmp(argv[1], "ref") == 0;
	int want = check ? 4 : 5;
	long rows = argc > want ? strtol(argv[want], NULL, 10) : check ? 8 : 48;

	if ((!check && !ref) || argc < want || argc > want + 1 || rows < 1 || rows > 4096) {
		fprintf(stderr, "usage: fullsize ref MODEL LAYER OUTDIR [ROWS]\n"
				"       fullsize check MODEL LAYER [ROWS]\n");
		return 2;
	}
	diag_init(&d, stderr);
	if (check)
		return cmd_check(argv[2], atoi(argv[3]), rows, &d);
	mkdir(argv[4], 0777);
	return cmd_ref(argv[2], atoi(argv[3]), argv[4], rows, &d);
}
