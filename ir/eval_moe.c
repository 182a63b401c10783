/*
 * eval_moe.c — mixture of experts: the router (route), the permutation of
 * token slots by expert (permute), and the whole block (moe), which is the
 * plain loop every fused kernel is compared against.
 *
 * route and moe share one router, so route+permute+grouped_matmul+
 * scatter_rows can reproduce moe.  Scores and routing weights are f32; in
 * moe the expert activations h and a are rounded to x's dtype, as a
 * framework running in that dtype would, and the weighted sum over the k
 * experts accumulates in double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_impl.h"

enum { R_SOFTMAX, R_SIGMOID, R_TOPK_SOFTMAX };

typedef struct {
	int kind, renorm, top2;
	int64_t k, ngroup, topk_group, ne;
	double scale;
	double *s, *sel, *gscore;	/* scratch: scores, selection, groups */
	int64_t *order, *gorder;
} Router;

static int
router_new(Ev *e, const Node *n, int64_t ne, Router *r)
{
	IrRouteAttrs ra;

	ir_route_attrs(n, &ra);
	memset(r, 0, sizeof *r);
	r->kind = ra.router == IR_ROUTER_SIGMOID ? R_SIGMOID
		: ra.router == IR_ROUTER_TOPK_SOFTMAX ? R_TOPK_SOFTMAX : R_SOFTMAX;
	r->k = ra.k;
	r->ngroup = ra.n_group;
	r->topk_group = ra.topk_group;
	r->renorm = ra.renorm;
	r->scale = ra.scale;
	r->top2 = ra.group_score == IR_GROUP_TOP2;
	r->ne = ne;
	if (ra.group_score == IR_GROUP_UNKNOWN)
		return ev_err(e, n, "%s: group_score must be max or top2, not %s",
			      ir_opname(n->op), ra.group_score_name);
	r->s = xmalloc(sizeof(double) * (size_t)(3 * ne + 1));
	r->sel = r->s + ne;
	r->gscore = r->sel + ne;
	r->order = xmalloc(sizeof(int64_t) * (size_t)(2 * ne + 1));
	r->gorder = r->order + ne;
	return 0;
}

static void
router_free(Router *r)
{
	free(r->s);
	free(r->order);
}

/* Scores s (f32) from one token's logits. */
static void
scores(Router *r, const double *l)
{
	double m = -INFINITY, sum = 0;

	for (int64_t x = 0; x < r->ne; x++)
		m = isnan(l[x]) || l[x] > m ? l[x] : m;
	for (int64_t x = 0; x < r->ne; x++)
		sum += exp(l[x] - m);
	for (int64_t x = 0; x < r->ne; x++) {
		double v = r->kind == R_SOFTMAX ? exp(l[x] - m) / sum
			 : r->kind == R_SIGMOID ? ev_sigmoid(l[x]) : l[x];
		r->s[x] = (float)v;
	}
}

/* Keep the topk_group best groups of experts; mask the rest to -inf. */
static void
limit_groups(Router *r)
{
	int64_t gsize = r->ne / r->ngroup;

	for (int64_t g = 0; g < r->ngroup; g++) {
		const double *v = &r->sel[g * gsize];
		ev_order(v, gsize, 1, r->order);
		r->gscore[g] = v[r->order[0]];
		if (r->top2 && gsize > 1)
			r->gscore[g] += v[r->order[1]];
	}
	ev_order(r->gscore, r->ngroup, 1, r->gorder);
	for (int64_t j = r->topk_group; j < r->ngroup; j++)
		for (int64_t x = 0; x < gsize; x++)
			r->sel[r->gorder[j] * gsize + x] = -INFINITY;
}

/* One token: expert ids (best first, ties to the lower id) and weights. */
static void
route_token(Router *r, const double *l, const double *bias, int64_t *ids, double *w)
{
	double sum = 0, m = -INFINITY;

	scores(r, l);
	for (int64_t x = 0; x < r->ne; x++)
		r->sel[x] = bias ? (float)(r->s[x] + bias[x]) : r->s[x];
	if (r->ngroup > 1)
		limit_groups(r);
	ev_order(r->sel, r->ne, 1, r->order);
	for (int64_t j = 0; j < r->k; j++) {
		ids[j] = r->order[j];
		m = fmax(m, l[ids[j]]);
	}
	for (int64_t j = 0; j < r->k; j++) {
		w[j] = r->kind == R_TOPK_SOFTMAX ? exp(l[ids[j]] - m) : r->s[ids[j]];
		sum += w[j];
	}
	for (int64_t j = 0; j < r->k; j++) {
		if (r->kind == R_TOPK_SOFTMAX || r->renorm)
			w[j] /= sum;
		w[j] = (float)(w[j] * r->scale);
	}
}

static const double *
optional_doubles(const Tensor *t, double **keep)
{
	*keep = t ? ev_doubles(t) : NULL;
	return *keep;
}

int
ev_route(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *lt = in[0];
	int64_t nt = lt->dim[0], ne = lt->dim[1], *ids;
	double *l, *bias, *w;
	Router r;

	if (router_new(e, n, ne, &r))
		return -1;
	if (n->nin > 1 && in[1] && (in[1]->rank != 1 || in[1]->dim[0] != ne)) {
		router_free(&r);
		return ev_err(e, n, "route: the selection bias must be [%lld]", (long long)ne);
	}
	l = ev_doubles(lt);
	optional_doubles(n->nin > 1 ? in[1] : NULL, &bias);
	ids = xmalloc(sizeof *ids * (size_t)(r.k + 1));
	w = xmalloc(sizeof *w * (size_t)(r.k + 1));
	for (int64_t t = 0; t < nt; t++) {
		route_token(&r, &l[t * ne], bias, ids, w);
		for (int64_t j = 0; j < r.k; j++) {
			dtype_store(out[0].dt, out[0].data, (size_t)(t * r.k + j), w[j]);
			dtype_store_int(out[1].dt, out[1].data, (size_t)(t * r.k + j), ids[j]);
		}
	}
	free(l);
	free(bias);
	free(ids);
	free(w);
	router_free(&r);
	return 0;
}

/* Sort the T*k slots by expert, stably: offsets, rows (slot of each sorted
 * position) and pos (sorted position of each slot). */
int
ev_permute(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *ids = in[0];
	int64_t ne = ir_attr_int(n, "experts", -1), ns = tensor_numel(ids);
	int64_t *cur = xcalloc((size_t)ne + 2, sizeof *cur);

	for (int64_t s = 0; s < ns; s++) {
		int64_t x = dtype_load_int(ids->dt, ids->data, (size_t)s);
		if (x < 0 || x >= ne) {
			free(cur);
			return ev_err(e, n, "permute: expert id %lld out of range for %lld experts",
				      (long long)x, (long long)ne);
		}
		cur[x + 1]++;
	}
	for (int64_t x = 0; x < ne; x++)
		cur[x + 1] += cur[x];
	for (int64_t x = 0; x <= ne; x++)
		dtype_store_int(out[0].dt, out[0].data, (size_t)x, cur[x]);
	for (int64_t s = 0; s < ns; s++) {
		int64_t x = dtype_load_int(ids->dt, ids->data, (size_t)s), p = cur[x]++;
		dtype_store_int(out[1].dt, out[1].data, (size_t)p, s);
		dtype_store_int(out[2].dt, out[2].data, (size_t)s, p);
	}
	free(cur);
	return 0;
}

/* --- moe ----------------------------------------------------------------- */

typedef struct {
	int64_t ne, h, i;		/* experts, hidden, intermediate */
	double *x, *l, *sb, *gu, *dn, *bgu, *bdn;
	DType dt;			/* x's: h and a are rounded to it */
	Glu glu;
} Moe;

static int
moe_check(Ev *e, const Node *n, const Tensor *const *in, Moe *m)
{
	const Tensor *bgu = n->nin > 5 ? in[5] : NULL, *bdn = n->nin > 6 ? in[6] : NULL;

	m->ne = in[1]->dim[1];
	m->h = in[0]->dim[1];
	m->i = in[4]->dim[2];
	m->dt = in[0]->dt;
	if (in[2] && (in[2]->rank != 1 || in[2]->dim[0] != m->ne))
		return ev_err(e, n, "moe: the selection bias must be [%lld]", (long long)m->ne);
	if (bgu && (bgu->rank != 2 || bgu->dim[0] != m->ne || bgu->dim[1] != 2 * m->i))
		return ev_err(e, n, "moe: the gate/up bias must be [%lld,%lld]", (long long)m->ne,
			      (long long)(2 * m->i));
	if (bdn && (bdn->rank != 2 || bdn->dim[0] != m->ne || bdn->dim[1] != m->h))
		return ev_err(e, n, "moe: the down bias must be [%lld,%lld]", (long long)m->ne,
			      (long long)m->h);
	return ev_glu_parse(e, n, "act", "gu_layout", &m->glu);
}

/* acc[H] += w * expert x(row)'s output, with h and a rounded to x's dtype. */
static void
expert(const Moe *m, int64_t x, const double *row, double w, double *hbuf, double *acc)
{
	int64_t ni = m->i, nh = m->h;
	double *a = hbuf + 2 * ni;

	for (int64_t c = 0; c < 2 * ni; c++) {
		const double *wr = &m->gu[(x * 2 * ni + c) * nh];
		double s = 0;
		for (int64_t k = 0; k < nh; k++)
			s += row[k] * wr[k];
		hbuf[c] = ev_round(m->dt, s + (m->bgu ? m->bgu[x * 2 * ni + c] : 0));
	}
	for (int64_t j = 0; j < ni; j++) {
		double g = hbuf[m->glu.interleave ? 2 * j : j];
		double u = hbuf[m->glu.interleave ? 2 * j + 1 : ni + j];
		a[j] = ev_round(m->dt, ev_glu(&m->glu, g, u));
	}
	for (int64_t c = 0; c < nh; c++) {
		const double *wr = &m->dn[(x * nh + c) * ni];
		double s = 0;
		for (int64_t k = 0; k < ni; k++)
			s += a[k] * wr[k];
		acc[c] += w * (s + (m->bdn ? m->bdn[x * nh + c] : 0));
	}
}

static void
moe_free(Moe *m)
{
	free(m->x);
	free(m->l);
	free(m->sb);
	free(m->gu);
	free(m->dn);
	free(m->bgu);
	free(m->bdn);
}

int
ev_moe(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	int64_t nt = in[0]->dim[0], *ids;
	double *w, *hbuf, *acc;
	Router r;
	Moe m;

	memset(&m, 0, sizeof m);
	if (moe_check(e, n, in, &m) || router_new(e, n, m.ne, &r))
		return -1;
	m.x = ev_doubles(in[0]);
	m.l = ev_doubles(in[1]);
	optional_doubles(in[2], &m.sb);
	m.gu = ev_doubles(in[3]);
	m.dn = ev_doubles(in[4]);
	optional_doubles(n->nin > 5 ? in[5] : NULL, &m.bgu);
	optional_doubles(n->nin > 6 ? in[6] : NULL, &m.bdn);
	ids = xmalloc(sizeof *ids * (size_t)(r.k + 1));
	w = xmalloc(sizeof *w * (size_t)(r.k + 1));
	hbuf = xmalloc(sizeof *hbuf * (size_t)(3 * m.i + 1));
	acc = xmalloc(sizeof *acc * (size_t)(m.h + 1));
	for (int64_t t = 0; t < nt; t++) {
		route_token(&r, &m.l[t * m.ne], m.sb, ids, w);
		memset(acc, 0, sizeof *acc * (size_t)m.h);
		for (int64_t j = 0; j < r.k; j++)
			expert(&m, ids[j], &m.x[t * m.h], w[j], hbuf, acc);
		for (int64_t c = 0; c < m.h; c++)
			dtype_store(out[0].dt, out[0].data, (size_t)(t * m.h + c), acc[c]);
	}
	free(ids);
	free(w);
	free(hbuf);
	free(acc);
	router_free(&r);
	moe_free(&m);
	return 0;
}
