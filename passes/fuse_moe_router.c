/*
 * fuse_moe_router.c — what kind of router feeds a TopK, read backwards
 * from the TopK's operand (the selection) and from the routing weights the
 * experts are scaled by:
 *
 *	softmax:       topk(softmax(l))            weights = values [/ sum] [* c]
 *	sigmoid:       topk(where(group mask, -inf, sigmoid(l) + b))
 *	                 weights = gather_elements(sigmoid(l), ids) [/ (sum + eps)] [* c]
 *	topk_softmax:  topk(l)                     weights = softmax(values) [* c]
 *	sparsemixer:   ids = concat(argmax(s_0), .., argmax(s_k-1)), s_0 = l,
 *	               s_j = scatter_elements(s_j-1, ids_j-1, -inf)
 *	               weights = concat(gather_elements(softmax(where(
 *	                   (max s_j - l) / max(|l|, max s_j) > 2 eps, -inf, s_j)), ids_j))
 *
 * The group mask (DeepSeek's group-limited selection) is
 * scatter(zeros[T,G], topk(group score, topk_group).ids, 1) broadcast to
 * [T,E], with group score = sum of the best two (top2) or the best (max) of
 * each group of the selection scores reshaped [T,G,E/G].
 */
#include <math.h>
#include <string.h>

#include "fuse_moe.h"

static int64_t
topk_k(const Node *tk)
{
	IrTopkAttrs t;

	ir_topk_attrs(tk, &t);
	return t.k;
}

static int
topk_largest(const Node *tk)
{
	IrTopkAttrs t;

	ir_topk_attrs(tk, &t);
	return t.largest == 1;
}

/* Through casts of any kind (indices cast between integer types). */
static Value *
strip_casts(Value *v)
{
	while (v && (mo_def(v, OP_CAST) || mo_def(v, OP_IDENTITY)))
		v = v->def->in[0];
	return v;
}

/* Is v >= 0 by construction: a softmax or sigmoid, or top-k values of one? */
static int
nonneg(Value *v)
{
	Node *n;

	v = mo_peel_cast(v);
	if ((n = mo_def(v, OP_TOPK)) && v == n->out[0])
		v = mo_peel_cast(n->in[0]);
	return mo_def(v, OP_SOFTMAX) || mo_def(v, OP_SIGMOID);
}

/* The largest guard a renormalisation may add to its sum: 1e-6 as float16
 * holds it (1.0133e-6). */
#define EPS_MAX 1.02e-6

/* Is d the sum of a over its last axis, kept as [T,1], plus a tiny eps or
 * clamped below by one (Ernie 4.5)?  The sum may be of |a| where a >= 0
 * (DBRX's L1 norm of the top-k probabilities, ReduceL1); a float16 sum may
 * be taken in float32. */
static int
sum_of(Value *d, Value *a)
{
	const Type *t = &d->type;
	double eps;
	Node *n;

	if (t->rank != a->type.rank || t->dim[t->rank - 1] != 1)
		return 0;
	d = mo_peel_cast(d);
	if ((n = mo_def(d, OP_ADD))) {
		for (int i = 0; i < 2; i++)
			if (mo_const_f(n->in[i], &eps) && fabs(eps) <= EPS_MAX) {
				d = n->in[1 - i];
				break;
			}
	} else if ((n = mo_def(d, OP_CLIP)) && n->nin == 1 &&
		   fabs(ir_attr_float(n, "min", 1)) <= EPS_MAX && ir_attr_float(n, "max", INFINITY) == INFINITY) {
		d = n->in[0];
	}
	n = mo_def(mo_peel_cast(mo_peel(d)), OP_REDUCE_SUM);	/* f16: summed in f32 */
	if (!n)
		return 0;
	Value *s = mo_peel_cast(n->in[0]);
	Node *ab = mo_def(s, OP_ABS);
	if (ab && nonneg(a))
		s = mo_peel_cast(ab->in[0]);
	return s == mo_peel_cast(a) && mo_last_axis(n, "axes", a->type.rank, -2);
}

/* Strip the weights' scale and renormalisation (either order) and a softmax
 * over the k; returns what is left, the root. */
static Value *
weights_root(Value *w, Router *r, int *softk)
{
	Node *n;
	double c;
	int again = 1;

	w = mo_peel_cast(w);
	while (again) {
		again = 0;
		if ((n = mo_def(w, OP_MUL)) && r->scale == 1) {
			for (int i = 0; i < 2 && !again; i++)
				if (mo_const_f(n->in[i], &c) && ir_type_numel(&n->in[i]->type) == 1) {
					r->scale = c;
					w = mo_peel_cast(n->in[1 - i]);
					again = 1;
				}
		} else if ((n = mo_def(w, OP_DIV)) && !r->renorm && sum_of(n->in[1], n->in[0])) {
			r->renorm = 1;
			w = mo_peel_cast(n->in[0]);
			again = 1;
		}
	}
	if ((n = mo_def(w, OP_SOFTMAX)) && mo_last_axis(n, "axis", w->type.rank, w->type.rank - 1)) {
		*softk = 1;
		w = mo_peel_cast(n->in[0]);
	}
	return w;
}

/* The group score of each group: sum of the best two, or the best. */
static Value *
group_score(Value *gs, Router *r)
{
	Node *n = mo_def(mo_peel_cast(gs), OP_REDUCE_SUM), *tk;

	if (n && mo_last_axis(n, "axes", n->in[0]->type.rank, -2) &&
	    (tk = mo_def(n->in[0], OP_TOPK)) && n->in[0] == tk->out[0] &&
	    mo_last_axis(tk, "axis", tk->in[0]->type.rank, tk->in[0]->type.rank - 1) &&
	    topk_largest(tk)) {
		int64_t k = topk_k(tk);
		if (k != 1 && k != 2)
			return NULL;
		r->top2 = k == 2;
		r->aux[1] = tk;
		return tk->in[0];
	}
	n = mo_def(mo_peel_cast(gs), OP_REDUCE_MAX);
	if (n && mo_last_axis(n, "axes", n->in[0]->type.rank, -2))
		return n->in[0];
	return NULL;
}

/* The group mask keep[T,E] (true: the expert's group is selected) over the
 * selection scores x. */
static const char *
groups(Value *keep, Value *x, Router *r)
{
	const Type *xt = &x->type;
	Node *ex, *sc, *tg, *rs;
	Value *v;

	v = mo_peel(strip_casts(keep));
	if (!(ex = mo_def(v, OP_EXPAND)) || ex->out[0]->type.rank != 3)
		return "group mask not recognised";
	if (!(sc = mo_def(mo_peel(ex->in[0]), OP_SCATTER_ELEMENTS)) ||
	    !mo_last_axis(sc, "axis", 2, 0) || !mo_is_fill(sc->in[0], 0) ||
	    !mo_is_fill(sc->in[2], 1) || strcmp(ir_attr_str(sc, "reduction", "none"), "none"))
		return "group mask not recognised";
	v = strip_casts(sc->in[1]);
	if (!(tg = mo_def(v, OP_TOPK)) || v != tg->out[1] ||
	    !mo_last_axis(tg, "axis", 2, 1) || !topk_largest(tg))
		return "group selection is not a TopK";
	v = group_score(tg->in[0], r);
	if (!v || !(rs = mo_def(v, OP_RESHAPE)) || mo_peel_cast(rs->in[0]) != x)
		return "group score not recognised";
	const Type *gt = &v->type, *et = &ex->out[0]->type;
	if (gt->rank != 3 || xt->rank != 2 || gt->dim[1] < 1 || gt->dim[2] < 1 ||
	    xt->dim[1] != gt->dim[1] * gt->dim[2] || et->dim[1] != gt->dim[1] ||
	    et->dim[2] != gt->dim[2] || keep->type.rank != 2 || keep->type.dim[1] != xt->dim[1])
		return "group shapes do not agree";
	r->ngroup = gt->dim[1];
	r->topk_group = topk_k(tg);
	r->aux[0] = tg;
	if (r->topk_group < 1 || r->topk_group > r->ngroup)
		return "group selection k out of range";
	return NULL;
}

/* The fill of masked-out experts: -inf, or 0 (DeepSeek-V2; transformers
 * 4.57's DeepSeek-V3, whose scores + bias may be negative). */
static int
masked_fill(Value *v, int *zero)
{
	*zero = mo_is_fill(v, 0);
	return *zero || mo_is_fill(v, -INFINITY);
}

/* Through where(mask, -inf, x): the scores being masked, with the groups. */
static const char *
unmask(Value **sel, Router *r)
{
	Node *w = mo_def(*sel, OP_WHERE), *not;
	Value *x, *keep;
	const char *why;
	int zero;

	if (!w)
		return NULL;
	if (masked_fill(w->in[1], &zero)) {
		if (!(not = mo_def(strip_casts(w->in[0]), OP_NOT)))
			return "masked selection not recognised";
		keep = not->in[0];
		x = w->in[2];
	} else if (masked_fill(w->in[2], &zero)) {
		keep = w->in[0];
		x = w->in[1];
	} else {
		return "masked selection is not filled with -inf";
	}
	x = mo_peel_cast(x);
	if ((why = groups(keep, x, r)))
		return why;
	/* 0 selects as -inf does over positive scores when the kept groups hold k
	 * experts; otherwise a dropped expert can win: router group_fill=0 */
	if (zero && ((!mo_def(x, OP_SOFTMAX) && !mo_def(x, OP_SIGMOID)) ||
		     r->k > r->topk_group * (x->type.dim[1] / r->ngroup)))
		r->zero_fill = 1;
	*sel = x;
	return NULL;
}

/* A selection bias: add(s, b) with s the scores (softmax or sigmoid) and b
 * an [E] (or [1,E]) constant or weight.  A bias on raw logits is part of
 * the logits. */
static void
unbias(Value **sel, Router *r)
{
	Node *n = mo_def(*sel, OP_ADD);

	if (!n)
		return;
	for (int i = 0; i < 2; i++) {
		Value *b = n->in[i], *s = mo_peel_cast(n->in[1 - i]);
		const Type *t = &b->type;
		if (((t->rank == 1 && t->dim[0] == (*sel)->type.dim[1]) ||
		     (t->rank == 2 && t->dim[0] == 1 && t->dim[1] == (*sel)->type.dim[1])) &&
		    (b->kind == V_WEIGHT || mo_def(b, OP_CONST)) &&
		    (mo_def(s, OP_SOFTMAX) || mo_def(s, OP_SIGMOID))) {
			r->selbias = b;
			*sel = s;
			return;
		}
	}
}

const char *
mo_router(Node *tk, Value *w, Router *r)
{
	Value *ids = tk->out[1], *sel, *root, *gscores = NULL;
	int rank = tk->in[0]->type.rank, softk = 0;
	const char *why;
	Node *n;

	memset(r, 0, sizeof *r);
	r->topk = tk;
	r->ids = tk->out[1];
	r->anchor = "TopK";
	r->scale = 1;
	r->ngroup = r->topk_group = 1;
	r->k = topk_k(tk);
	if (rank != 2 || !mo_last_axis(tk, "axis", rank, rank - 1) ||
	    !topk_largest(tk) || r->k < 1)
		return "the TopK is not over the last axis of [T,E] scores";

	/* the weights: scale, renormalisation, softmax over k; then the root */
	root = weights_root(w, r, &softk);
	if ((n = mo_def(root, OP_GATHER_ELEMENTS)) &&
	    mo_last_axis(n, "axis", 2, 0) && strip_casts(n->in[1]) == ids)
		gscores = mo_peel_cast(n->in[0]);
	else if (root != tk->out[0])
		return "the routing weights do not come from the router's TopK";

	/* the selection: group mask, selection bias, scores */
	sel = mo_peel_cast(tk->in[0]);
	if ((why = unmask(&sel, r)))
		return why;
	unbias(&sel, r);
	if ((n = mo_def(sel, OP_SOFTMAX)) && mo_last_axis(n, "axis", 2, 1)) {
		r->kind = "softmax";
		r->logits = n->in[0];
	} else if ((n = mo_def(sel, OP_SIGMOID))) {
		r->kind = "sigmoid";
		r->logits = n->in[0];
	} else {
		r->kind = "topk_softmax";
		r->logits = sel;
	}

	if (gscores && gscores != sel)
		return "the routing weights gather other scores than the selection's";
	if (!gscores && r->selbias)
		return "the routing weights include the selection bias";
	if (strcmp(r->kind, "topk_softmax") == 0) {
		if (!softk)
			return "the routing weights are raw logits (no softmax or sigmoid)";
		r->renorm = 0;	/* a softmax over the k is normalised already */
	} else if (softk) {
		return "a softmax over the k of scores that are already normalised";
	}
	if (r->logits->type.rank != 2 || r->logits->type.dim[1] < 1)
		return "the router logits are not [T,E] with E known";
	return NULL;
}

/* ---- sparsemixer (PhiMoE): no TopK; k rounds of arg-max ---- */

/* An argmax over the last axis of [T,E], its index kept as [T,1]. */
static Node *
argmax_of(Value *v)
{
	Node *n = mo_def(strip_casts(v), OP_ARGMAX);

	if (!n || n->in[0]->type.rank != 2 || !mo_last_axis(n, "axis", 2, 0) ||
	    !ir_attr_int(n, "keepdims", 1) || ir_attr_int(n, "select_last_index", 0))
		return NULL;
	return n;
}

/* Is c = concat(argmax(s_0), ..) over successively masked logits?  The
 * logits and k in r. */
int
mo_is_sparsemixer(Node *c, Router *r)
{
	Value *s = NULL;
	Node *a, *sc;

	memset(r, 0, sizeof *r);
	if (c->op != OP_CONCAT || c->out[0]->type.rank != 2 || !mo_last_axis(c, "axis", 2, 0) ||
	    !dtype_is_int(c->out[0]->type.dt))
		return 0;
	for (int j = 0; j < c->nin; j++) {
		if (!(a = argmax_of(c->in[j])))
			return 0;
		if (j == 0) {
			s = r->logits = mo_peel_cast(a->in[0]);
			continue;
		}
		sc = mo_def(a->in[0], OP_SCATTER_ELEMENTS);
		if (!sc || mo_peel_cast(sc->in[0]) != s || !argmax_of(sc->in[1]) ||
		    argmax_of(sc->in[1]) != argmax_of(c->in[j - 1]) || !mo_is_fill(sc->in[2], -INFINITY) ||
		    !mo_last_axis(sc, "axis", 2, 0) || strcmp(ir_attr_str(sc, "reduction", "none"), "none"))
			return 0;
		s = sc->out[0];
	}
	r->topk = c;
	r->ids = c->out[0];
	r->anchor = "sparsemixer";
	r->kind = "sparsemixer";
	r->k = c->nin;
	r->scale = 1;
	r->ngroup = r->topk_group = 1;
	return 1;
}

/* Choice j's weight: gather_elements(softmax(where(gt(ratio, 2 eps), -inf,
 * s_j)), ids_j); 2 eps into *thr. */
static const char *
sparsemixer_weight(Value *w, Node *c, int j, double *thr)
{
	Node *g = mo_def(mo_peel_cast(w), OP_GATHER_ELEMENTS), *sm, *wh, *gt;
	Value *sj = argmax_of(c->in[j])->in[0];

	if (!g || argmax_of(g->in[1]) != argmax_of(c->in[j]) || !mo_last_axis(g, "axis", 2, 0))
		return "a sparsemixer weight is not the softmax at its choice";
	if (!(sm = mo_def(mo_peel_cast(g->in[0]), OP_SOFTMAX)) || !mo_last_axis(sm, "axis", 2, 1) ||
	    !(wh = mo_def(mo_peel_cast(sm->in[0]), OP_WHERE)) || !mo_is_fill(wh->in[1], -INFINITY) ||
	    mo_peel_cast(wh->in[2]) != mo_peel_cast(sj))
		return "a sparsemixer weight is not a softmax of the masked logits";
	if (!(gt = mo_def(strip_casts(wh->in[0]), OP_GREATER)) || !mo_def(mo_peel_cast(gt->in[0]), OP_DIV) ||
	    !mo_const_f(gt->in[1], thr) || !(*thr >= 0))
		return "sparsemixer's threshold is not (max - l) / max(|l|, max) > 2 eps";
	return NULL;
}

/* The routing weights w of the experts: concat of the k choices' weights. */
const char *
mo_router_sparsemixer(Node *c, Value *w, Router *r)
{
	Node *cw;
	const char *why;
	double thr = -1, t;

	if (!mo_is_sparsemixer(c, r))
		return "not a sparsemixer";
	w = weights_root(w, r, &(int){0});
	if (r->renorm)
		return "sparsemixer weights renormalised";
	if (!(cw = mo_def(mo_peel(w), OP_CONCAT)) || cw->nin != c->nin || !mo_last_axis(cw, "axis", 2, 0))
		return "the routing weights are not the sparsemixer's k weights";
	for (int j = 0; j < c->nin; j++) {
		if ((why = sparsemixer_weight(cw->in[j], c, j, &t)))
			return why;
		if (j && t != thr)
			return "sparsemixer's rounds have different thresholds";
		thr = t;
	}
	r->jitter_eps = mo_nice_float(thr) / 2;
	if (r->logits->type.rank != 2 || r->logits->type.dim[1] < 1)
		return "the router logits are not [T,E] with E known";
	return NULL;
}
