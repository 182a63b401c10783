/*
 * fuse_moe_confirm.c — a recognised MoE is accepted only once the
 * interpreter agrees.  The matchers read structure (the TopK, the expert
 * weight sets, the combine); this file checks the meaning: the graph, cut
 * to the nodes they need, is run on seeded probe inputs with three
 * results, the router's indices, the value the moe replaces and the
 * candidate moe's output:
 *
 *	%ids  = topk ...            results: %ids   every expert 0..E-1 chosen?
 *	%sum  = add %acc7, %sc8              %sum
 *	%cand = moe %x, %l, ...              %cand  == %sum within the dtype's
 *	                                             tolerance (tolerance_for)?
 *
 * Every probe the matched subgraph runs must agree, and together they
 * must reach every expert (an expert no token chose would leave its
 * weights unchecked).  A probe the subgraph cannot run is skipped: a
 * TorchScript export has as many slots as experts its sample hit and runs
 * only on inputs hitting that many, so a partial export (4 slots of 8
 * experts) is confirmed by several probes of 4 experts each.  The first
 * symbol of the tokens' dims is 1, 2, 4, ... tokens, doubled after a few
 * probes in a row that reached no new expert or could not run (every
 * other symbol is 1); static shapes keep their size and change the seed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_moe.h"

enum { PROBES = 64, PROBES_PER_SIZE = 4 };

/* Uniform values, each row (last axis) scaled by 2^-2..2^4: large rows
 * push the router past any selection bias, so every expert gets chosen. */
static void
fill(Tensor *t, uint64_t seed)
{
	int64_t n = tensor_numel(t), w = t->rank ? t->dim[t->rank - 1] : 1;

	for (int64_t i = 0; i < n; i++) {
		uint64_t h = mix64(seed ^ mix64((uint64_t)i));
		uint64_t r = mix64(~seed ^ mix64((uint64_t)(w ? i / w : 0)));
		double u = (double)(h >> 11) / 9007199254740992.0;
		double s = exp2((double)(r >> 11) / 9007199254740992.0 * 6 - 2);
		if (dtype_is_float(t->dt))
			dtype_store(t->dt, t->data, (size_t)i, (2 * u - 1) * s);
		else
			dtype_store_int(t->dt, t->data, (size_t)i, (int64_t)(u * 4));
	}
}

static void
free_all(Tensor *t, int n)
{
	for (int i = 0; i < n; i++)
		tensor_free(&t[i]);
}

/* Inputs for g: the first symbol of the tokens' dims is `tokens`, every
 * other symbol 1.  -1 if a dim cannot be evaluated. */
static int
probe_inputs(Graph *g, Value *x, int64_t tokens, uint64_t seed, Tensor *in)
{
	Module *m = g->m;
	DimEnv env = {ir_natom(m), NULL};
	int rc = 0;

	env.val = xcalloc((size_t)env.n + 1, sizeof *env.val);
	for (int a = 0; a < env.n; a++)
		env.val[a] = 1;
	for (int i = 0; i < x->type.rank - 1; i++) {
		const DimExpr *e = ir_dim_is_static(x->type.dim[i]) ? NULL
				   : ir_dim_expr(m, x->type.dim[i]);
		if (e && e->natom > 0) {
			env.val[e->atom[0]] = tokens;
			break;
		}
	}
	for (int i = 0; rc == 0 && i < g->nparam; i++) {
		const Type *t = &g->param[i]->type;
		int64_t dim[MAXRANK];
		for (int k = 0; rc == 0 && k < t->rank; k++)
			rc = ir_dim_eval(m, t->dim[k], &env, &dim[k]);
		if (rc == 0 && (rc = tensor_alloc(&in[i], t->dt, t->rank, dim)) == 0)
			fill(&in[i], seed * 1000003u + (uint64_t)i);
	}
	free(env.val);
	if (rc != 0)
		free_all(in, g->nparam);
	return rc;
}

/* Relink g's nodes: those of all[0..n) with keep[i] set, in order. */
static void
relink(Graph *g, Node **all, const char *keep, int n)
{
	Node *p = NULL;

	g->first = NULL;
	for (int i = 0; i < n; i++) {
		if (keep && !keep[i])
			continue;
		all[i]->prev = p;
		if (p)
			p->next = all[i];
		else
			g->first = all[i];
		p = all[i];
	}
	if (p)
		p->next = NULL;
	g->last = p;
}

/* Only what the probes' results need runs: the other nodes (the layers
 * after the block, other outputs) are unlinked until restore().  Returns
 * every node in order, *n of them. */
static Node **
slice(Graph *g, Value *const *ret, int nret, int *n)
{
	uint32_t nv = g->m->nvalue;
	char *need = xcalloc((size_t)nv + 1, 1), *keep;
	Node **all;
	int k = 0;

	for (Node *x = g->first; x; x = x->next)
		k++;
	all = xcalloc((size_t)k + 1, sizeof *all);
	keep = xcalloc((size_t)k + 1, 1);
	k = 0;
	for (Node *x = g->first; x; x = x->next)
		all[k++] = x;
	for (int i = 0; i < nret; i++)
		need[ret[i]->id] = 1;
	for (int i = k - 1; i >= 0; i--) {
		for (int j = 0; j < all[i]->nout; j++)
			keep[i] |= need[all[i]->out[j]->id];
		for (int j = 0; keep[i] && j < all[i]->nin; j++)
			if (all[i]->in[j])
				need[all[i]->in[j]->id] = 1;
	}
	relink(g, all, keep, k);
	free(need);
	free(keep);
	*n = k;
	return all;
}

/* Mark the experts the indices chose; 0 if an index is out of range. */
static int
mark(const Tensor *ids, char *hit, int64_t e)
{
	int64_t n = tensor_numel(ids);

	for (int64_t i = 0; i < n; i++) {
		int64_t v = dtype_load_int(ids->dt, ids->data, (size_t)i);
		if (v < 0 || v >= e)
			return 0;
		hit[v] = 1;
	}
	return 1;
}

/* f16/bf16: the exported graph rounds every intermediate (the expert's
 * activations, each slot's product) to the dtype and the moe does not, so
 * single elements where terms cancel differ by many ulps; the relative L2
 * error is the test (a wrong block is off by O(1)). */
static int
agree_low(const Compare *c, double rel_l2)
{
	return c->rel_l2 <= rel_l2 && !(c->max_abs == (double)INFINITY && c->nbad);
}

/* Run g with results ids, sum, cand on one probe: 0 compared (c filled,
 * the experts chosen marked in hit), 1 the probe does not count. */
static int
probe(Graph *g, const Moe *mo, Value *cand, int64_t tokens, uint64_t seed, Compare *c, char *hit)
{
	Value *ret[3] = {mo->ids, mo->sum, cand};
	Value **old = g->ret;
	const char **oldname = g->retname;
	int oldn = g->nret, rc;
	Tensor *in = xcalloc((size_t)g->nparam + 1, sizeof *in), out[3];
	Diag quiet;
	double atol, rtol, rl2;

	diag_init(&quiet, NULL);
	if (probe_inputs(g, mo->x.x, tokens, seed, in) != 0) {
		free(in);
		return 1;
	}
	ir_set_results(g, ret, NULL, 3);
	rc = ir_eval(g, in, g->nparam, out, NULL, &quiet);
	g->ret = old, g->retname = oldname, g->nret = oldn;
	free_all(in, g->nparam);
	free(in);
	if (rc != 0)
		return 1;
	rc = !mark(&out[0], hit, mo->e);
	if (!rc) {
		DType dt = mo->sum->type.dt;
		/* a bf16 block may widen its rows to f32 for the sum over k
		 * (dynamo's bf16 export): the experts' type decides */
		if (dtype_is_float(mo->x.x->type.dt) && dtype_bits(mo->x.x->type.dt) < dtype_bits(dt))
			dt = mo->x.x->type.dt;
		tolerance_for(dt, &atol, &rtol, &rl2);
		tensor_compare(&out[2], &out[1], atol, rtol, c);
		c->nbad = dtype_bits(dt) < 32 ? !agree_low(c, rl2)
						 : !tensor_close(c, dt, tensor_numel(&out[1]));
	}
	free_all(out, 3);
	return rc;
}

const char *
mo_confirm(Graph *g, const Moe *mo, Value *cand, char *why, size_t n)
{
	char *hit = xcalloc((size_t)mo->e + 1, 1);
	int64_t tokens = 1, covered = 0;
	int ran = 0, fails = 0, nall;
	Value *ret[3] = {mo->ids, mo->sum, cand};
	Node **all = slice(g, ret, 3, &nall);
	const char *bad = NULL;
	Compare c;

	for (int i = 0; i < PROBES && covered < mo->e; i++) {
		if (fails == PROBES_PER_SIZE)
			tokens *= 2, fails = 0;
		if (probe(g, mo, cand, tokens, 0x9e3779b9u + (uint64_t)i, &c, hit)) {
			fails++;
			continue;
		}
		ran++;
		if (c.nbad) {
			snprintf(why, n, "the candidate moe differs from the matched subgraph on a "
				 "probe of %lld tokens: rel_l2 %.3g, max_abs %.3g",
				 (long long)tokens, c.rel_l2, c.max_abs);
			bad = why;
			break;
		}
		int64_t before = covered;
		covered = 0;
		for (int64_t e = 0; e < mo->e; e++)
			covered += hit[e];
		fails = covered > before ? 0 : fails + 1;
	}
	relink(g, all, NULL, nall);
	free(all);
	free(hit);
	if (bad || covered == mo->e)
		return bad;
	if (!ran)
		snprintf(why, n, "the interpreter ran the matched subgraph on none of %d probes",
			 PROBES);
	else
		snprintf(why, n, "the probes the matched subgraph ran reached %lld of %lld experts",
			 (long long)covered, (long long)mo->e);
	return why;
}
