/*
 * checkeval.c — --check-eval: run the main graph with the interpreter on
 * seeded random inputs before the first pass and after every pass, and say
 * which outputs moved beyond the tolerance of their dtype.
 *
 * Symbols get small values (T=7 and 3 for any other, unless --check-dims
 * names them); floats are uniform in [-1, 1), integers in [0, 4).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

struct CheckRun {
	Tensor *in;
	int nin;
	Tensor *ref;		/* outputs of the first run */
	int nref;
};

static int64_t
dim_value(const Module *m, int atom, const char *dims)
{
	const char *name = ir_atom_name(m, atom);
	size_t n = strlen(name);

	for (const char *p = dims; p && *p;) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		if (!eq)
			break;
		if ((size_t)(eq - p) == n && strncmp(p, name, n) == 0)
			return strtoll(eq + 1, NULL, 10);
		if (!end)
			break;
		p = end + 1;
	}
	return strcmp(name, "T") == 0 ? 7 : 3;
}

static void
fill_random(Tensor *t, uint64_t seed)
{
	int64_t n = tensor_numel(t);

	for (int64_t i = 0; i < n; i++) {
		uint64_t h = mix64(seed ^ mix64((uint64_t)i));
		double u = (double)(h >> 11) / 9007199254740992.0;
		if (dtype_is_float(t->dt))
			dtype_store(t->dt, t->data, (size_t)i, 2 * u - 1);
		else
			dtype_store_int(t->dt, t->data, (size_t)i, (int64_t)(u * 4));
	}
}

/* Copies of inputs the caller gave (a test case's), checked against g. */
static CheckRun *
given_inputs(Graph *g, const PassOpts *o, Diag *d)
{
	CheckRun *r;

	if (o->ncheck_inputs != g->nparam) {
		diag_error(d, g->loc, "--check-eval: %d inputs given, the graph takes %d",
			   o->ncheck_inputs, g->nparam);
		return NULL;
	}
	r = xcalloc(1, sizeof *r);
	r->nin = g->nparam;
	r->in = xcalloc((size_t)g->nparam + 1, sizeof *r->in);
	for (int i = 0; i < g->nparam; i++) {
		const Tensor *t = &o->check_inputs[i];
		if (tensor_alloc(&r->in[i], t->dt, t->rank, t->dim) != 0) {
			check_free(r);
			return NULL;
		}
		memcpy(r->in[i].data, t->data, tensor_nbytes(t));
	}
	return r;
}

CheckRun *
check_new(Module *m, const PassOpts *o, Diag *d)
{
	Graph *g = ir_main_graph(m);
	const char *dims = o->check_dims;
	uint64_t seed = o->check_seed;
	CheckRun *r;
	DimEnv env;

	if (!g) {
		diag_error(d, LOC_NONE, "--check-eval: the module has no graph");
		return NULL;
	}
	if (o->check_inputs)
		return given_inputs(g, o, d);
	env.n = ir_natom(m);
	env.val = xcalloc((size_t)env.n + 1, sizeof *env.val);
	for (int a = 0; a < env.n; a++)
		env.val[a] = dim_value(m, a, dims);
	r = xcalloc(1, sizeof *r);
	r->nin = g->nparam;
	r->in = xcalloc((size_t)g->nparam + 1, sizeof *r->in);
	for (int i = 0; i < g->nparam; i++) {
		const Type *t = &g->param[i]->type;
		int64_t dim[MAXRANK];
		for (int k = 0; k < t->rank; k++)
			if (ir_dim_eval(m, t->dim[k], &env, &dim[k]) != 0)
				dim[k] = 3;
		if (tensor_alloc(&r->in[i], t->dt, t->rank, dim) != 0) {
			diag_error(d, g->loc, "--check-eval: input %%%s is too large",
				   g->param[i]->name);
			free(env.val);
			check_free(r);
			return NULL;
		}
		fill_random(&r->in[i], seed * 1000003u + (uint64_t)i);
	}
	free(env.val);
	return r;
}

static void
free_outs(Tensor *t, int n)
{
	for (int i = 0; i < n; i++)
		tensor_free(&t[i]);
	free(t);
}

int
check_eval(CheckRun *r, Module *m, char *why, size_t n, Diag *d)
{
	Graph *g = ir_main_graph(m);
	Tensor *out = xcalloc((size_t)g->nret + 1, sizeof *out);

	if (ir_eval(g, r->in, r->nin, out, NULL, d) != 0) {
		free(out);
		snprintf(why, n, "the interpreter failed");
		return -1;
	}
	if (!r->ref) {
		r->ref = out;
		r->nref = g->nret;
		return 0;
	}
	if (g->nret != r->nref) {
		snprintf(why, n, "%d results instead of %d", g->nret, r->nref);
		free_outs(out, g->nret);
		return 1;
	}
	for (int i = 0; i < g->nret; i++) {
		double atol, rtol, rel;
		Compare c;
		int same = out[i].rank == r->ref[i].rank;

		for (int k = 0; same && k < out[i].rank; k++)
			same = out[i].dim[k] == r->ref[i].dim[k];
		if (!same) {
			snprintf(why, n, "result '%s' changed shape", g->retname[i]);
			free_outs(out, g->nret);
			return 1;
		}
		tolerance_for(g->ret[i]->type.dt, &atol, &rtol, &rel);
		tensor_compare(&out[i], &r->ref[i], atol, rtol, &c);
		if (c.rel_l2 > MAX(rel, 1e-6) || c.max_abs == (double)INFINITY) {
			snprintf(why, n, "result '%s' differs: rel_l2 %.3g, max_abs %.3g at element %lld",
				 g->retname[i], c.rel_l2, c.max_abs, (long long)c.worst);
			free_outs(out, g->nret);
			return 1;
		}
	}
	free_outs(out, g->nret);
	return 0;
}

void
check_free(CheckRun *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->nin; i++)
		tensor_free(&r->in[i]);
	free(r->in);
	if (r->ref)
		free_outs(r->ref, r->nref);
	free(r);
}
