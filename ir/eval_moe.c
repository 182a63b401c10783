/*
 * eval_moe.c — mixture of experts: the router (route), the permutation of
 * token slots by expert (permute), and the whole block (moe), which is the
 * plain loop every fused kernel is compared against.
 *
 * route and moe share one router, so route+permute+grouped_matmul+
 * scatter_rows can reproduce moe.  Scores and routing weights are f32; in
 * moe the expert activations h and a are rounded to x's dtype, as a
 * framework running in that dtype would, and the weighted sum over the k
 * experts accumulates in double (with scale_input the weights scaled the
 * inputs instead: a plain sum).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_impl.h"

enum { R_SOFTMAX, R_SIGMOID, R_TOPK_SOFTMAX, R_SPARSEMIXER };

typedef struct {
	int kind, renorm, top2;
	int64_t k, ngroup, topk_group, ne;
	double scale, fill, eps;
	DType ldt;			/* the logits' dtype: sparsemixer's threshold arithmetic */
	double *s, *sel, *gscore;	/* scratch: scores, selection, groups */
	int64_t *order, *gorder;
} Router;

/* -1 if group_score is neither max nor top2. */
static int
router_init(const Node *n, int64_t ne, Router *r)
{
	const Value *l = n->in[n->op == OP_MOE ? 1 : 0];
	IrRouteAttrs ra;

	ir_route_attrs(n, &ra);
	memset(r, 0, sizeof *r);
	r->kind = ra.router == IR_ROUTER_SIGMOID ? R_SIGMOID
		: ra.router == IR_ROUTER_TOPK_SOFTMAX ? R_TOPK_SOFTMAX
		: ra.router == IR_ROUTER_SPARSEMIXER ? R_SPARSEMIXER : R_SOFTMAX;
	r->fill = ra.group_fill;
	r->eps = ra.jitter_eps;
	r->ldt = l->type.dt == DT_BF16 || l->type.dt == DT_F16 ? l->type.dt : DT_F32;
	r->k = ra.k;
	r->ngroup = ra.n_group;
	r->topk_group = ra.topk_group;
	r->renorm = ra.renorm;
	r->scale = ra.scale;
	r->top2 = ra.group_score == IR_GROUP_TOP2;
	r->ne = ne;
	if (ra.group_score == IR_GROUP_UNKNOWN)
		return -1;
	r->s = xmalloc(sizeof(double) * (size_t)(3 * ne + 1));
	r->sel = r->s + ne;
	r->gscore = r->sel + ne;
	r->order = xmalloc(sizeof(int64_t) * (size_t)(2 * ne + 1));
	r->gorder = r->order + ne;
	return 0;
}

static int
router_new(Ev *e, const Node *n, int64_t ne, Router *r)
{
	if (router_init(n, ne, r))
		return ev_err(e, n, "%s: group_score must be max or top2, not %s",
			      ir_opname(n->op), ir_attr_str(n, "group_score", "max"));
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
			 : r->kind == R_SIGMOID ? ev_sigmoid(l[x]) : l[x];	/* topk_softmax, sparsemixer */
		r->s[x] = (float)v;
	}
}

/* Keep the topk_group best groups of experts; the rest select with group_fill
 * (-inf; transformers 4.57's DeepSeek-V3: 0). */
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
			r->sel[r->gorder[j] * gsize + x] = r->fill;
}

/*
 * Sparsemixer (PhiMoE, eval mode) picks the top k of the logits; choice j's
 * weight is its softmax among the experts not chosen before it whose logit
 * lies within 2 eps of the choice's, relatively: kept when
 * (m - l) / max(|l|, m) <= 2 eps with m = l[ids[j]].  Since exp(m - m) = 1,
 * the weight is 1 / sum.  The threshold arithmetic is rounded to the
 * logits' dtype, as the model computes it.
 */
static double
sparsemixer_weight(const Router *r, const double *l, const int64_t *ids, int64_t j)
{
	double m = l[ids[j]], sum = 0, thr = ev_round(r->ldt, 2 * r->eps);

	for (int64_t x = 0; x < r->ne; x++) {
		int64_t q = 0;
		while (q < j && ids[q] != x)
			q++;
		if (q < j)
			continue;
		double d = ev_round(r->ldt, m - l[x]);
		double ratio = ev_round(r->ldt, d / fmax(fabs(l[x]), m));
		if (!(ratio > thr))
			sum += exp(l[x] - m);
	}
	return 1 / sum;
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
		w[j] = r->kind == R_TOPK_SOFTMAX ? exp(l[ids[j]] - m)
		     : r->kind == R_SPARSEMIXER ? sparsemixer_weight(r, l, ids, j) : r->s[ids[j]];
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
 * position) and pos (sorted position of each slot).  A negative id drops
 * its slot (expert parallelism: a slot another rank holds, or padding):
 * dropped slots sort last, after offsets[E], which counts the kept ones. */
int
ev_permute(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *ids = in[0];
	int64_t ne = ir_attr_int(n, "experts", -1), ns = tensor_numel(ids);
	int64_t *cur = xcalloc((size_t)ne + 2, sizeof *cur);

	for (int64_t s = 0; s < ns; s++) {
		int64_t x = dtype_load_int(ids->dt, ids->data, (size_t)s);
		if (x >= ne) {
			free(cur);
			return ev_err(e, n, "permute: expert id %lld out of range for %lld experts",
				      (long long)x, (long long)ne);
		}
		cur[x < 0 ? ne + 1 : x + 1]++;
	}
	for (int64_t x = 0; x <= ne; x++)
		cur[x + 1] += cur[x];
	for (int64_t x = 0; x <= ne; x++)
		dtype_store_int(out[0].dt, out[0].data, (size_t)x, cur[x]);
	for (int64_t s = 0; s < ns; s++) {
		int64_t x = dtype_load_int(ids->dt, ids->data, (size_t)s), p = cur[x < 0 ? ne : x]++;
		dtype_store_int(out[1].dt, out[1].data, (size_t)p, s);
		dtype_store_int(out[2].dt, out[2].data, (size_t)s, p);
	}
	free(cur);
	return 0;
}

/* --- moe ----------------------------------------------------------------- */

typedef struct {
	int64_t ne, h, i, ngu;		/* experts, hidden, intermediate, gate|up rows (2I; ungated: I) */
	double *x, *l, *sb, *bgu, *bdn;
	const Tensor *gu, *dn;		/* read a row at a time, never copied whole */
	Weight *wgu, *wdn;		/* or, without data, generated a row at a time */
	const Node *dqgu, *dqdn;	/* or dequantised a row at a time (ir_eval_defers) */
	Ev *e;
	DType dt;			/* x's: h and a are rounded to it */
	IrGluAttrs glu;
	int64_t aq;			/* act_quant: a quantised per token and aq columns (0: not) */
	double aub;			/* act_quant_ub: a clipped to [-aub, aub] first (0: not) */
} Moe;

static int
moe_check(Ev *e, const Node *n, const Tensor *const *in, Moe *m)
{
	const Tensor *bgu = n->nin > 5 ? in[5] : NULL, *bdn = n->nin > 6 ? in[6] : NULL;

	m->ne = in[1]->dim[1];
	m->h = in[0]->dim[1];
	m->i = in[4]->dim[2];
	m->dt = in[0]->dt;
	m->aq = ir_attr_int(n, "act_quant", 0);
	m->aub = ir_attr_float(n, "act_quant_ub", 0);
	if (m->aq < 0 || (m->aq && m->i % m->aq))
		return ev_err(e, n, "moe: act_quant %lld does not divide the intermediate size %lld",
			      (long long)m->aq, (long long)m->i);
	if (in[2] && (in[2]->rank != 1 || in[2]->dim[0] != m->ne))
		return ev_err(e, n, "moe: the selection bias must be [%lld]", (long long)m->ne);
	if (ev_glu_parse(e, n, "gu_layout", &m->glu))
		return -1;
	m->ngu = m->glu.gated ? 2 * m->i : m->i;
	if (bgu && (bgu->rank != 2 || bgu->dim[0] != m->ne || bgu->dim[1] != m->ngu))
		return ev_err(e, n, "moe: the gate/up bias must be [%lld,%lld]", (long long)m->ne,
			      (long long)m->ngu);
	if (bdn && (bdn->rank != 2 || bdn->dim[0] != m->ne || bdn->dim[1] != m->h))
		return ev_err(e, n, "moe: the down bias must be [%lld,%lld]", (long long)m->ne,
			      (long long)m->h);
	return 0;
}

/* Elements [first, first+n) of an expert stack. */
static int
stack_row(Ev *e, const Tensor *t, Weight *w, const Node *dq, int64_t first, int64_t n,
	  double *out)
{
	if (t->data)
		dtype_load_n(t->dt, t->data, (size_t)first, (size_t)n, out);
	else if (dq)
		return ev_dequant_elems(e, dq, first, n, out);
	else
		ir_weight_elems(w, first, n, out);
	return 0;
}

/*
 * Expert x on the ns token slots in slot[]: out[s*H..] = its output for the
 * token row of slot s, with h and a rounded to x's dtype.  Expert-major, so
 * each weight row is converted once for all the tokens that chose x.  With
 * scale_input the rows are x[t] * w[slot] (w rounded to x's dtype, then
 * the product), as Llama 4 scales its experts' inputs.
 */
static int
expert(const Moe *m, int64_t x, const int64_t *slot, int64_t ns, int64_t k, const double *w,
       double *out)
{
	int rc = 0;
	int64_t ni = m->i, nh = m->h, ngu = m->ngu;
	double *wr = xmalloc(sizeof *wr * (size_t)(MAX(nh, ni) + 1));
	double *hb = xmalloc(sizeof *hb * (size_t)(ns * ngu + 1));
	double *a = xmalloc(sizeof *a * (size_t)(ns * ni + 1));
	double *xs = xmalloc(sizeof *xs * (size_t)(ns * nh + 1));

	for (int64_t s = 0; s < ns; s++)
		for (int64_t q = 0; q < nh; q++) {
			double v = m->x[slot[s] / k * nh + q];
			xs[s * nh + q] = m->glu.scale_input ? ev_round(m->dt, v * ev_round(m->dt, w[slot[s]])) : v;
		}
	for (int64_t c = 0; c < ngu; c++) {
		if ((rc = stack_row(m->e, m->gu, m->wgu, m->dqgu, (x * ngu + c) * nh, nh, wr)))
			break;
		for (int64_t s = 0; s < ns; s++) {
			const double *row = &xs[s * nh];
			double acc = 0;
			for (int64_t q = 0; q < nh; q++)
				acc += row[q] * wr[q];
			hb[s * ngu + c] = ev_round(m->dt, acc + (m->bgu ? m->bgu[x * ngu + c] : 0));
		}
	}
	for (int64_t s = 0; s < ns; s++)
		for (int64_t j = 0; j < ni; j++) {
			const double *h = &hb[s * ngu];	/* ungated: ngu == ni, no up half to read */
			double v = m->glu.gated ? ir_glu_scalar(&m->glu, h[m->glu.interleave ? 2 * j : j],
								h[m->glu.interleave ? 2 * j + 1 : ni + j])
						: ir_act_scalar(&m->glu, h[j]);
			a[s * ni + j] = ev_round(m->dt, v);
		}
	for (int64_t s = 0; m->aq && s < ns; s++)	/* the down projection's input, as DeepSeek's kernels */
		for (int64_t j = 0; j < ni; j += m->aq)
			ev_quant_dequant(&a[s * ni + j], m->aq, m->aub, m->dt);
	for (int64_t c = 0; rc == 0 && c < nh; c++) {
		if ((rc = stack_row(m->e, m->dn, m->wdn, m->dqdn, (x * nh + c) * ni, ni, wr)))
			break;
		for (int64_t s = 0; s < ns; s++) {
			double acc = 0;
			for (int64_t q = 0; q < ni; q++)
				acc += a[s * ni + q] * wr[q];
			out[s * nh + c] = acc + (m->bdn ? m->bdn[x * nh + c] : 0);
		}
	}
	free(wr);
	free(hb);
	free(a);
	free(xs);
	return rc;
}

static void
moe_free(Moe *m)
{
	free(m->x);
	free(m->l);
	free(m->sb);
	free(m->bgu);
	free(m->bdn);
}

/* Every token's experts and weights, then each expert over its tokens; the
 * weighted sum over a token's k experts in choice order, in double. */
int
ev_moe(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	int64_t nt = in[0]->dim[0], *ids, *slot, k;
	double *w, *part, *acc;
	Router r;
	Moe m;
	int rc = 0;

	memset(&m, 0, sizeof m);
	if (moe_check(e, n, in, &m) || router_new(e, n, m.ne, &r))
		return -1;
	k = r.k;
	m.x = ev_doubles(in[0]);
	m.l = ev_doubles(in[1]);
	optional_doubles(in[2], &m.sb);
	m.gu = in[3];
	m.dn = in[4];
	m.wgu = n->in[3]->kind == V_WEIGHT ? n->in[3]->weight : NULL;
	m.wdn = n->in[4]->kind == V_WEIGHT ? n->in[4]->weight : NULL;
	m.dqgu = n->in[3]->kind == V_RESULT && !in[3]->data ? n->in[3]->def : NULL;
	m.dqdn = n->in[4]->kind == V_RESULT && !in[4]->data ? n->in[4]->def : NULL;
	m.e = e;
	optional_doubles(n->nin > 5 ? in[5] : NULL, &m.bgu);
	optional_doubles(n->nin > 6 ? in[6] : NULL, &m.bdn);
	ids = xmalloc(sizeof *ids * (size_t)(nt * k + 1));
	slot = xmalloc(sizeof *slot * (size_t)(nt * k + 1));
	w = xmalloc(sizeof *w * (size_t)(nt * k + 1));
	part = xmalloc(sizeof *part * (size_t)(nt * k * m.h + 1));
	acc = xmalloc(sizeof *acc * (size_t)(m.h + 1));
	for (int64_t t = 0; t < nt; t++)
		route_token(&r, &m.l[t * m.ne], m.sb, &ids[t * k], &w[t * k]);
	for (int64_t x = 0; x < m.ne; x++) {
		int64_t ns = 0;
		for (int64_t s = 0; s < nt * k; s++)
			if (ids[s] == x)
				slot[ns++] = s;
		if (!ns)
			continue;
		double *o = xmalloc(sizeof *o * (size_t)(ns * m.h + 1));
		if (expert(&m, x, slot, ns, k, w, o)) {
			free(o);
			rc = -1;
			break;
		}
		for (int64_t s = 0; s < ns; s++)
			memcpy(&part[slot[s] * m.h], &o[s * m.h], sizeof *o * (size_t)m.h);
		free(o);
	}
	for (int64_t t = 0; rc == 0 && t < nt; t++) {
		memset(acc, 0, sizeof *acc * (size_t)m.h);
		for (int64_t j = 0; j < k; j++)
			for (int64_t c = 0; c < m.h; c++)
				acc[c] += (m.glu.scale_input ? 1 : w[t * k + j]) * part[(t * k + j) * m.h + c];
		for (int64_t c = 0; c < m.h; c++)
			dtype_store(out[0].dt, out[0].data, (size_t)(t * m.h + c), acc[c]);
	}
	free(ids);
	free(slot);
	free(w);
	free(part);
	free(acc);
	router_free(&r);
	moe_free(&m);
	return rc;
}

/* --- routing decisions, for tests ---------------------------------------- */

static int
routing_alloc(Routing *r, int64_t T, int64_t E, int64_t k)
{
	memset(r, 0, sizeof *r);
	if (T < 0 || E < 1 || k < 1 || k > E)
		return -1;
	r->T = T, r->E = E, r->k = k, r->ngroup = 1;
	r->ids = xmalloc(sizeof *r->ids * (size_t)(T * k + 1));
	r->val = xmalloc(sizeof *r->val * (size_t)(T * E + 1));
	r->what = "logit";
	return 0;
}

/* route or moe: the router's choice from its logits and selection bias. */
static int
router_routing(const Node *n, const Tensor *lt, const Tensor *sb, const Tensor *ids,
	       Routing *out)
{
	int64_t T = lt->dim[0], E = lt->dim[1];
	double *l, *bias = NULL, *w;
	int64_t *id;
	int byscore;
	Router r;

	if (lt->rank != 2 || (sb && tensor_numel(sb) != E) || router_init(n, E, &r))
		return 0;
	if (routing_alloc(out, T, E, r.k)) {
		router_free(&r);
		return 0;
	}
	out->ngroup = r.ngroup;
	out->topk_group = r.topk_group;
	out->top2 = r.top2;
	/* what route_token ranks, before groups: the scores plus the selection
	 * bias; the logits where they rank the same and groups are not scored
	 * (a softmax's top-2 sums are not its logits'; ERNIE ranks softmax
	 * probabilities plus a bias, which the logits alone order otherwise) */
	byscore = r.kind == R_SIGMOID || sb || r.ngroup > 1;
	out->what = byscore ? "score" : "logit";
	l = ev_doubles(lt);
	optional_doubles(sb, &bias);
	id = xmalloc(sizeof *id * (size_t)(r.k + 1));
	w = xmalloc(sizeof *w * (size_t)(r.k + 1));
	for (int64_t t = 0; t < T; t++) {
		route_token(&r, &l[t * E], bias, id, w);
		for (int64_t x = 0; x < E; x++)
			out->val[t * E + x] = !byscore ? (float)l[t * E + x]
					    : bias ? (float)(r.s[x] + bias[x]) : (float)r.s[x];
		for (int64_t j = 0; j < r.k; j++)	/* route's own result where it ran */
			out->ids[t * r.k + j] = (int32_t)(ids ? dtype_load_int(ids->dt, ids->data,
							     (size_t)(t * r.k + j)) : id[j]);
	}
	free(l);
	free(bias);
	free(id);
	free(w);
	router_free(&r);
	return 1;
}

/* A top-k of the largest along the last axis of [T,E]. */
static int
topk_routing(const Node *n, const Tensor *v, const Tensor *ids, Routing *out)
{
	IrTopkAttrs ta;
	ir_topk_attrs(n, &ta);
	int64_t ax = ta.axis, k = ids->rank == 2 ? ids->dim[1] : 0;

	if (v->rank != 2 || (ax != -1 && ax != 1) || !ta.largest ||
	    !dtype_is_float(v->dt) || routing_alloc(out, v->dim[0], v->dim[1], k))
		return 0;
	out->what = "score";
	for (int64_t i = 0; i < v->dim[0] * v->dim[1]; i++)
		out->val[i] = (float)dtype_load(v->dt, v->data, (size_t)i);
	for (int64_t i = 0; i < v->dim[0] * k; i++)
		out->ids[i] = (int32_t)dtype_load_int(ids->dt, ids->data, (size_t)i);
	return 1;
}

int
ir_routing_of(const Node *n, const Tensor *const *in, const Tensor *out, Routing *r)
{
	memset(r, 0, sizeof *r);
	switch (n->op) {
	case OP_ROUTE:
		return router_routing(n, in[0], n->nin > 1 ? in[1] : NULL, &out[1], r);
	case OP_MOE:
		return router_routing(n, in[1], in[2], NULL, r);
	case OP_TOPK:
		return topk_routing(n, in[0], &out[1], r);
	default:
		return 0;
	}
}

void
ir_route_log_hook(void *log, const Node *n, const Tensor *const *in, const Tensor *out)
{
	Routing r;

	if (ir_routing_of(n, in, out, &r))
		route_log_push(log, &r);
}
