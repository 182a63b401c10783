/*
 * fullsize_ref.c — reference rows for the full-size GPU check
 * (tests/gpu/make_fullsize.sh): a config-built block at full size with
 * synthetic weights, run by the interpreter on a few rows of tokens, written
 * as test sets that `moert test --tile=...` repeats to any T.
 *
 *	fullsize_ref MODEL LAYER OUTDIR [ROWS]
 *
 * writes OUTDIR/uniform/test_data_set_0/{input_0,output_0}.pb and, for a
 * routed block, OUTDIR/skewed/... .  Uniform rows are N(0,1) per element.
 * Skewed rows lean on two "hot" experts: 90% of them are a hot expert's
 * router row (divided by the norm weight, so the normalised row points along
 * it) plus noise, so most tokens pick the hot experts; the router weight is
 * read off the graph (the moe node's logits matmul).  Rows whose routing is
 * within the f32 tolerance of a tie are left out, so a flip on the device is
 * a wrong kernel, never rounding.  Exit 0 written, 1 failed, 2 bad usage,
 * 77 the weights do not fit this host's memory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend.h"

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
	if (weight_f32(mm->in[1], &r->w, d) || weight_f32(norm->in[1], &r->g, d))
		return -1;
	r->E = r->w.dim[0];
	return 0;
}

/* Row `row` of candidates: uniform, or skewed towards hot expert e. */
static void
make_row(const Router *r, int skew, int64_t row, int64_t H, double *x)
{
	uint64_t seed = skew ? 0x5ce3d : 0x0a1f0;
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

/* The routing margin of token t: the worst chosen value over the best
 * other (and, with groups, the same between groups), against the tolerance. */
static int
clear_of_ties(const Routing *r, int64_t t)
{
	const float *v = &r->val[t * r->E];
	const int32_t *ids = &r->ids[t * r->k];
	double worst = INFINITY, best = -INFINITY, atol, rtol, rel;

	tolerance_for(DT_F32, &atol, &rtol, &rel);
	for (int64_t x = 0; x < r->E; x++) {
		int chosen = 0;
		for (int64_t j = 0; j < r->k; j++)
			chosen |= ids[j] == x;
		if (chosen)
			worst = fmin(worst, v[x]);
		else
			best = fmax(best, v[x]);
	}
	return worst - best > atol + rtol * fmax(fabs(worst), fabs(best));
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

static uint64_t
weight_bytes(const Module *m)
{
	uint64_t b = 0;

	for (int i = 0; i < m->nweight; i++) {
		int64_t n = ir_type_numel(&m->weight[i]->value->type);
		b += n > 0 ? dtype_bytes(m->weight[i]->value->type.dt, (size_t)n) : 0;
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

static int
run(const char *model, int layer, const char *dir, int64_t rows, Diag *d)
{
	FeOpts fo;
	Router r = {0};
	RouteLog log = {0};
	EvalOpts eo = {.hook = ir_route_log_hook, .hook_ctx = &log};
	Tensor in = {0}, out[8] = {{0}};
	int64_t cand = rows + rows / 2 + 8, H, dim[2];
	int rc = 1, routed, nmode;

	fe_default_opts(&fo);
	fo.layer = layer, fo.synthetic = 1, fo.seed = 1;
	Module *m = fe_load(model, &fo, d);
	Graph *g = m ? ir_main_graph(m) : NULL;
	if (!g || g->nparam != 1 || g->nret > 8 || g->param[0]->type.rank != 2) {
		fprintf(stderr, "%s: not a config-built block\n", model);
		ir_free_module(m);
		return 2;
	}
	if (weight_bytes(m) > mem_available() / 10 * 9) {
		printf("SKIP %s layer %d: its weights (%.1f GB) do not fit this host's memory\n",
		       model, layer, weight_bytes(m) / 1e9);
		ir_free_module(m);
		return 77;
	}
	H = g->param[0]->type.dim[1];
	routed = find_router(g, &r, d) == 0;
	nmode = routed ? 2 : 1;
	dim[0] = nmode * cand, dim[1] = H;
	if (tensor_alloc(&in, g->param[0]->type.dt, 2, dim))
		goto out;
	double *x = xmalloc(sizeof *x * (size_t)(2 * H));
	for (int64_t t = 0; t < dim[0]; t++) {
		make_row(&r, t >= cand, t % cand, H, x);
		for (int64_t c = 0; c < H; c++)
			dtype_store(in.dt, in.data, (size_t)(t * H + c), x[c]);
	}
	free(x);
	if (ir_eval(g, &in, 1, out, &eo, d) != 0)
		goto out;
	for (int mode = 0; mode < nmode; mode++) {
		const char *name = mode ? "skewed" : "uniform";
		int64_t *keep = xmalloc(sizeof *keep * (size_t)cand), n = 0, ties = 0;
		const Routing *rt = log.n ? &log.r[0] : NULL;
		for (int64_t t = mode * cand; t < (mode + 1) * cand && n < rows; t++)
			if (!rt || clear_of_ties(rt, t))
				keep[n++] = t;
			else
				ties++;
		Tensor sel = {0};
		int bad = pick_rows(&in, keep, n, &sel) || write_set(dir, name, &sel, "input_0", d);
		tensor_free(&sel);
		for (int i = 0; !bad && i < g->nret; i++) {
			char what[32];
			snprintf(what, sizeof what, "output_%d", i);
			bad = pick_rows(&out[i], keep, n, &sel) || write_set(dir, name, &sel, what, d);
			tensor_free(&sel);
		}
		printf("%s: %lld rows", name, (long long)n);
		if (rt)
			printf(" (%lld near ties left out), %.0f%% of them pick expert 0 or %lld",
			       (long long)ties, hot_share(rt, keep, n), (long long)(r.E / HOT));
		printf("\n");
		free(keep);
		if (bad)
			goto out;
	}
	rc = 0;
out:
	for (int i = 0; i < 8; i++)
		tensor_free(&out[i]);
	tensor_free(&in);
	tensor_free(&r.w);
	tensor_free(&r.g);
	route_log_free(&log);
	ir_free_module(m);
	return rc;
}

int
main(int argc, char **argv)
{
	Diag d;
	long rows = argc > 4 ? strtol(argv[4], NULL, 10) : 48;

	if (argc < 4 || argc > 5 || rows < 1 || rows > 4096) {
		fprintf(stderr, "usage: fullsize_ref MODEL LAYER OUTDIR [ROWS]\n");
		return 2;
	}
	diag_init(&d, stderr);
	mkdir(argv[3], 0777);
	return run(argv[1], atoi(argv[2]), argv[3], rows, &d);
}
