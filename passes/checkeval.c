/*
 * checkeval.c — --check-eval: run the main graph with the interpreter on
 * seeded random inputs before the first pass and after every pass, and say
 * which outputs moved beyond the tolerance of their dtype.
 *
 * Symbols get small values (T=7 and 3 for any other, unless --check-dims
 * names them); floats are uniform in [-1, 1), integers in [0, 4).
 *
 * Routing decisions (route, moe, and top-k over [T,E]) are compared first:
 * a token whose experts changed is a failure unless the reference's values
 * put the competing experts within f64 rounding of each other (a near tie,
 * noted); the rows of such tokens are left out of the output comparison.
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
	RouteLog route;		/* its routing decisions */
	DType computed;		/* ir_results_dtype of the graph checked */
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
	r->computed = ir_results_dtype(g);
	return r;
}

/* --check-dims=T=7,batch=2: every entry NAME=N with N in 1..2^31-1 (a
 * symbol's value is a size); a name the graph lacks is only warned about. */
static int
check_dims_valid(const Module *m, const char *dims, Diag *d)
{
	for (const char *p = dims; p && *p;) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		size_t k = end ? (size_t)(end - p) : strlen(p);
		char *e;
		long long v = eq && eq < p + k ? strtoll(eq + 1, &e, 10) : 0;

		if (!eq || eq >= p + k || eq == p || e == eq + 1 || e != p + k || v < 1 ||
		    v > INT32_MAX)
			return diag_error(d, LOC_NONE, "--check-dims: '%.*s' is not NAME=N with N in "
					  "1..2147483647", (int)k, p);
		int found = 0;
		for (int a = 0; a < ir_natom(m); a++)
			found |= strlen(ir_atom_name(m, a)) == (size_t)(eq - p) &&
				 !strncmp(ir_atom_name(m, a), p, (size_t)(eq - p));
		if (!found)
			diag_warn(d, LOC_NONE, "--check-dims: the graph has no symbol '%.*s'",
				  (int)(eq - p), p);
		p += k + (end ? 1 : 0);
	}
	return 0;
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
	if (check_dims_valid(m, dims, d))
		return NULL;
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
	r->computed = ir_results_dtype(g);
	return r;
}

static void
free_outs(Tensor *t, int n)
{
	for (int i = 0; i < n; i++)
		tensor_free(&t[i]);
	free(t);
}

/* Output i of out against the reference, without the rows in drop. */
static int
compare_one(CheckRun *r, Graph *g, int i, Tensor *out, const RouteDiff *rd, char *why, size_t n)
{
	double atol, rtol, rel;
	Compare c;
	int bad;

	tolerance_for(tolerance_dtype(g->ret[i]->type.dt, r->computed), &atol, &rtol, &rel);
	routing_compare_kept(&out[i], &r->ref[i], rd, atol, rtol, &c);
	bad = c.rel_l2 > MAX(rel, 1e-6) || c.max_abs == (double)INFINITY;
	if (bad)
		snprintf(why, n, "result '%s' differs: rel_l2 %.3g, max_abs %.3g at element %lld%s",
			 g->retname[i], c.rel_l2, c.max_abs, (long long)c.worst,
			 rd->nflip ? " (rows of flipped tokens left out)" : "");
	return bad;
}

/* Routing against the first run's: 1 with *why if a flip is no near tie. */
static int
compare_routing(CheckRun *r, RouteLog *got, RouteDiff *rd, char *why, size_t n, Diag *d)
{
	double atol, rtol, rel;

	tolerance_for(DT_F64, &atol, &rtol, &rel);
	route_log_compare(&r->route, got, atol, rtol, rd);
	if (rd->nbad) {
		snprintf(why, n, "routing changed: %s", rd->msg);
		return 1;
	}
	if (rd->nflip)
		diag_note(d, LOC_NONE, "--check-eval: routing flipped at a near tie, rows left out: %s",
			  rd->msg);
	return 0;
}

int
check_eval(CheckRun *r, Module *m, char *why, size_t n, Diag *d)
{
	Graph *g = ir_main_graph(m);
	Tensor *out = xcalloc((size_t)g->nret + 1, sizeof *out);
	RouteLog route = {0};
	EvalOpts eo = {.hook = ir_route_log_hook, .hook_ctx = &route};
	RouteDiff rd = {0};
	int bad = 0;

	if (ir_eval(g, r->in, r->nin, out, &eo, d) != 0) {
		free(out);
		route_log_free(&route);
		snprintf(why, n, "the interpreter failed");
		return -1;
	}
	if (!r->ref) {
		r->ref = out;
		r->nref = g->nret;
		r->route = route;
		return 0;
	}
	if (g->nret != r->nref) {
		snprintf(why, n, "%d results instead of %d", g->nret, r->nref);
		bad = 1;
	} else {
		bad = compare_routing(r, &route, &rd, why, n, d);
	}
	for (int i = 0; !bad && i < g->nret; i++) {
		int same = out[i].rank == r->ref[i].rank;
		for (int k = 0; same && k < out[i].rank; k++)
			same = out[i].dim[k] == r->ref[i].dim[k];
		if (!same) {
			snprintf(why, n, "result '%s' changed shape", g->retname[i]);
			bad = 1;
		} else {
			bad = compare_one(r, g, i, out, &rd, why, n);
		}
	}
	route_diff_free(&rd);
	route_log_free(&route);
	free_outs(out, g->nret);
	return bad;
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
	route_log_free(&r->route);
	free(r);
}
