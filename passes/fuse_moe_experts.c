/*
 * fuse_moe_experts.c — the routed experts, read backwards from the value
 * where their weighted sum is complete.  Two forms:
 *
 * batched (dynamo, batched_mm): every (token, choice) row r = t*k + j gets
 * its expert's matrices by gather_nd(W[E,..], ids[T*k,1]):
 *	xr = reshape(expand(x[T,1,H], [T,k,H]), [T*k,H])
 *	o  = down(act(gate_up(xr)))          (batched matmuls, + gathered biases)
 *	sum = reduce_sum(reshape(o * w[T*k,1], [T,k,H]), axes=[1])
 *
 * slots (TorchScript, eager loop unrolled into N slots): slot i handles
 * expert e_i = hit[i] (hit = nonzero of the experts any token chose):
 *	pos, tok = split(transpose(nonzero(mask[e_i])))   mask = onehot(ids)^T
 *	o_i = down(act(gate_up(gather(x, tok))))        (W[e_i], gathered)
 *	acc_i = acc_{i-1} + scatter_elements(zeros, tok, o_i * w_flat[tok*k+pos])
 *	sum = acc_N
 *
 * torch 2.5's dynamo export of 4.x writes the same slots with slices of the
 * nonzero's columns, equal(ids, arange(E)) for the one-hot, gather_nd for
 * the tokens and weights, and scatter_nd(acc, tok, o_i * w, add).
 *
 * The slot's weights are W[e_i] of stacked [E,..] parameters (5.x), or
 * one expert's own 2-D matrices (4.x ModuleList of Linears: e_i is then a
 * constant mask row, or the j-th hit expert); its routing weight is the
 * flattened [T,k] weights at tok*k+pos, or (gpt-oss in 4.x) column e_i of
 * the dense [T,E] scores scattered from them.
 *
 * sorted rows (DeepSeek-V2 in 4.57, JetMoE, users' own loops): the (token,
 * choice) rows sorted by expert, each expert's run a slice by the running
 * sum of the counts; its outputs concatenated and put back, or added onto
 * their tokens one index_add_ per expert (sorted_index_add).
 *
 * dense (Llama 4): every expert on every token, reduce_sum over the E
 * axis of down(act(gate_up(x tiled E times, rows scaled by the router's
 * scattered sigmoid scores))): top-k with the weight on the input.
 *
 * The activation is SwiGLU (silu or gelu of the gate half times the up
 * half; halves from a split, two slices, or even/odd slices) or gpt-oss's
 * clamped form.  Expert matrices may be held as [E,N,K] (x @ W^T) or
 * transposed [E,K,N] (x @ W); the caller re-lays the latter out.
 */
#include <stdlib.h>
#include <string.h>

#include "fuse_moe.h"

/* One expert's part of a stacked [E,...] tensor of rank `rank`:
 * gather(w, e, axis=0) with e a scalar, or gather_nd(w, ids[R,1]). */
static Value *
stacked(Value *v, int rank, Value **sel)
{
	Node *n;

	if ((n = mo_def(v, OP_GATHER))) {
		if (n->in[1]->type.rank != 0 || ir_attr_int(n, "axis", 0) != 0)
			return NULL;
	} else if ((n = mo_def(v, OP_GATHER_ND))) {
		const Type *t = &n->in[1]->type;
		if (ir_attr_int(n, "batch_dims", 0) != 0 || t->rank != 2 || t->dim[1] != 1)
			return NULL;
	} else {
		return NULL;
	}
	if (n->in[0]->type.rank != rank || !ir_weight_only(n->in[0]))
		return NULL;
	*sel = n->in[1];
	return n->in[0];
}

/* Do two selectors pick the same expert(s)? */
static int
same_sel(Value *a, Value *b)
{
	return a == b || mo_peel_index(a) == mo_peel_index(b);
}

static int
swaps_last_two(const Node *t)
{
	int64_t p[MAXRANK];
	int r = ir_attr_ints(t, "perm", p, MAXRANK);

	if (r < 2)
		return 0;
	for (int i = 0; i < r - 2; i++)
		if (p[i] != i)
			return 0;
	return p[r - 2] == r - 1 && p[r - 1] == r - 2;
}

typedef struct {
	Value *w, *sel;		/* stacked [E,..] matrix and its selector */
	Value *wv;		/* the matmul's matrix operand (w itself, or w[sel]) */
	int flat;		/* w is one expert's own [N,K] matrix, no selector */
	int t;			/* held [E,K,N] (x @ W), not [E,N,K] */
	Value *b, *bsel;	/* stacked [E,N] bias, or NULL */
	Value *in;		/* the rows multiplied, [R,K] */
	Dim n, k;
} Proj;

static int
bias(Value *v, Proj *p)
{
	Value *sel, *b = stacked(v, 2, &sel);

	if (!b || p->b)
		return 0;
	p->b = b;
	p->bsel = sel;
	return 1;
}

/* A projection by one expert's matrix: matmul(in, W[e]) with the matrix on
 * either side, transposed or not, plus an expert's bias after it.  In the
 * batched form the rows are vectors [R,K,1] or [R,1,K] of a batched matmul. */
static const char *
proj(Value *v0, Proj *p)
{
	if (v0->kind != V_RESULT)
		return "the expert output is not a projection";
	Module *m = v0->graph->m;
	Value *v = mo_peel_rows(v0);
	Node *n;

	memset(p, 0, sizeof *p);
	if ((n = mo_def(v, OP_ADD)))
		for (int i = 0; i < 2; i++)
			if (bias(n->in[i], p)) {
				v = mo_peel_rows(n->in[1 - i]);
				if (!mo_same_rows(m, &v->type, &n->out[0]->type))
					return "the expert bias broadcasts over the rows";
				break;
			}
	if (!(n = mo_def(v, OP_MATMUL)))
		return "expert matmul not found";
	if (n->nin > 2 && n->in[2] && !bias(n->in[2], p))
		return "the expert matmul's bias is not an expert's";
	for (int i = 1; i >= 0; i--) {
		int flip = (int)ir_attr_int(n, i ? "trans_b" : "trans_a", 0);
		Value *wv = n->in[i], *o = n->in[1 - i];
		const Type *ot = &o->type;
		Node *t;

		while ((t = mo_def(wv, OP_TRANSPOSE)) && swaps_last_two(t)) {
			flip ^= 1;
			wv = t->in[0];
		}
		p->wv = wv;
		if (!(p->w = stacked(wv, 3, &p->sel))) {
			if (wv->type.rank != 2 || !ir_weight_only(wv))
				continue;
			p->w = wv, p->flat = 1;	/* a ModuleList expert's Linear */
		}
		if (ir_attr_int(n, i ? "trans_a" : "trans_b", 0))
			return "the expert matmul's input is transposed";
		p->t = i ? !flip : flip;
		p->n = p->w->type.dim[(p->t ? 2 : 1) - p->flat];
		p->k = p->w->type.dim[(p->t ? 1 : 2) - p->flat];
		p->in = o;
		if (wv->type.rank != ot->rank || mo_width(ot) != p->k || mo_width(&v0->type) != p->n ||
		    (ot->rank == 3 && (ot->dim[0] != wv->type.dim[0] || ot->dim[i ? 1 : 2] != 1)))
			return "the expert matmul's input does not fit its weights";
		return NULL;
	}
	return "expert weights not found";
}

/* One axis slice of n: start, end, step (attributes or constant operands). */
static int
slice1(const Node *n, int rank, int64_t *st, int64_t *en, int64_t *sp)
{
	int64_t v[4][MAXRANK];
	static const char *keys[] = {"starts", "ends", "axes", "steps"};
	int k[4];

	for (int i = 0; i < 4; i++) {
		if (n->nin > 1)
			k[i] = n->nin > i + 1 && n->in[i + 1] ? mo_const_ints(n->in[i + 1], v[i], MAXRANK) : -1;
		else
			k[i] = ir_attr_ints(n, keys[i], v[i], MAXRANK);
	}
	if (k[0] != 1 || k[1] != 1 || (k[2] >= 0 && k[2] != 1) || (k[3] >= 0 && k[3] != 1))
		return 0;
	if ((k[2] == 1 ? (v[2][0] < 0 ? v[2][0] + rank : v[2][0]) : 0) != rank - 1)
		return 0;
	*st = v[0][0];
	*en = v[1][0];
	*sp = k[3] == 1 ? v[3][0] : 1;
	return 1;
}

/* gate and up halves of h: a split in two, or two slices ([0,I) and
 * [I,2I): concat; even and odd columns: interleave).  Returns h. */
static Value *
halves(Value *g, Value *u, Expert *x)
{
	Node *a = g->kind == V_RESULT ? g->def : NULL, *b = u->kind == V_RESULT ? u->def : NULL;
	int64_t s0, e0, p0, s1, e1, p1, sz[2], d;

	if (!a || !b || a->nin < 1 || b->nin < 1 || a->in[0] != b->in[0])
		return NULL;
	Value *h = a->in[0];
	int r = h->type.rank;
	if (a->op == OP_SPLIT && a == b && a->nout == 2 && g == a->out[0] && u == a->out[1]) {
		int k = ir_attr_ints(a, "sizes", sz, 2);
		if (!mo_last_axis(a, "axis", r, 0) || (k >= 0 && (k != 2 || sz[0] != sz[1])) ||
		    g->type.dim[r - 1] != u->type.dim[r - 1])
			return NULL;
		x->layout = "concat";
		return h;
	}
	d = h->type.dim[r - 1];
	if (a->op != OP_SLICE || b->op != OP_SLICE || d < 2 || d % 2 ||
	    !slice1(a, r, &s0, &e0, &p0) || !slice1(b, r, &s1, &e1, &p1))
		return NULL;
	if (p0 == 1 && p1 == 1 && s0 == 0 && e0 == d / 2 && s1 == d / 2 && e1 >= d)
		x->layout = "concat";
	else if (p0 == 2 && p1 == 2 && s0 == 0 && s1 == 1 && e0 >= d - 1 && e1 >= d)
		x->layout = "interleave";
	else
		return NULL;
	return h;
}

/* silu(g) as the op or as g * sigmoid(g). */
static int
silu(Value *v, Value **g)
{
	Node *n, *s;

	if ((n = mo_def(v, OP_SILU)) && ir_attr_float(n, "alpha", 1) == 1) {
		*g = n->in[0];
		return 1;
	}
	if ((n = mo_def(v, OP_MUL)))
		for (int i = 0; i < 2; i++)
			if ((s = mo_def(n->in[1 - i], OP_SIGMOID)) && s->in[0] == n->in[i]) {
				*g = n->in[i];
				return 1;
			}
	return 0;
}

static int
clip_bounds(const Node *c, double *lo, double *hi)
{
	if (!c || c->nin != 1)
		return 0;
	*lo = ir_attr_float(c, "min", -1.0 / 0.0);
	*hi = ir_attr_float(c, "max", 1.0 / 0.0);
	return 1;
}

/* c = clip(g, max=L), or min(g, L) with L a scalar constant (dynamo's bf16
 * export of gpt-oss writes the gate's clamp so): its input and bounds. */
static Node *
upper_clip(Value *c, double *lo, double *hi, Value **g)
{
	Node *n = mo_def(c, OP_CLIP);

	if (n) {
		*g = n->in[0];
		return clip_bounds(n, lo, hi) ? n : NULL;
	}
	if (!(n = mo_def(c, OP_MIN)) || n->nin != 2)
		return NULL;
	for (int i = 0; i < 2; i++)
		if (ir_type_numel(&n->in[1 - i]->type) == 1 && mo_const_f(n->in[1 - i], hi) &&
		    ir_type_eq(&n->in[i]->type, &c->type)) {
			*lo = -1.0 / 0.0;
			*g = n->in[i];
			return n;
		}
	return NULL;
}

/* gpt-oss: (clip(u, -L, L) + 1) * (c * sigmoid(c * alpha)), c = clip(g, max=L)
 * (or silu(c, alpha), canon's spelling of the second factor). */
static int
oai(Node *mul, Value **g, Value **u, Expert *x)
{
	for (int i = 0; i < 2; i++) {
		Node *up = mo_def(mul->in[i], OP_ADD), *glu = mo_def(mul->in[1 - i], OP_MUL);
		Node *cu = NULL, *sg, *am;
		Value *gin;
		double one, lo, hi, glo, ghi, alpha;

		if (!up || (!glu && !mo_def(mul->in[1 - i], OP_SILU)))
			continue;
		for (int j = 0; j < 2; j++)
			if (mo_const_f(up->in[j], &one) && one == 1)
				cu = mo_def(up->in[1 - j], OP_CLIP);
		if (!clip_bounds(cu, &lo, &hi) || lo != -hi)
			continue;
		if ((sg = mo_def(mul->in[1 - i], OP_SILU)) && upper_clip(sg->in[0], &glo, &ghi, &gin) &&
		    ghi == hi && glo < -1e30) {	/* c * sigmoid(c * alpha) as canon writes it */
			x->alpha = mo_nice_float(ir_attr_float(sg, "alpha", 1));
			x->limit = mo_nice_float(hi);
			*g = gin;
			*u = cu->in[0];
			return 1;
		}
		for (int j = 0; glu && j < 2; j++) {
			Value *c = glu->in[j];
			if (!upper_clip(c, &glo, &ghi, &gin) || !(sg = mo_def(glu->in[1 - j], OP_SIGMOID)) ||
			    !(am = mo_def(sg->in[0], OP_MUL)))
				continue;
			for (int l = 0; l < 2; l++) {
				if (am->in[l] != c || !mo_const_f(am->in[1 - l], &alpha) ||
				    ghi != hi || glo > -1e30)
					continue;
				x->alpha = mo_nice_float(alpha);
				x->limit = mo_nice_float(hi);
				*g = gin;
				*u = cu->in[0];
				return 1;
			}
		}
	}
	return 0;
}

/* Step 3.5's and Ling's clamped SwiGLU (transformers 5.25's stacked experts):
 * min(silu(g), L) * clip(u, -L, L), the moe's act=silu with limit=L. */
static int
clamped_silu(Node *mul, Value **g, Value **u, Expert *x)
{
	for (int i = 0; i < 2; i++) {
		Node *cu = mo_def(mul->in[1 - i], OP_CLIP);
		double lo, hi, glo, ghi;
		Value *s;

		if (!clip_bounds(cu, &lo, &hi) || lo != -hi || !(hi > 0) ||
		    !upper_clip(mul->in[i], &glo, &ghi, &s) || glo > -1e30 || ghi != hi || !silu(s, g))
			continue;
		x->limit = mo_nice_float(hi);
		*u = cu->in[0];
		return 1;
	}
	return 0;
}

/* An ungated expert's act(h): relu(h)² as pow(relu(h), 2) or relu(h) *
 * relu(h) (Nemotron-H), or relu, silu, gelu of h alone.  h: the up rows. */
static int
ungated(Value *a, Expert *x, Value **h)
{
	Node *n = mo_def(a, OP_POW), *r;
	double two;

	if (n && (r = mo_def(n->in[0], OP_RELU)) && mo_const_f(n->in[1], &two) && two == 2)
		x->act = "relu2";
	else if ((n = mo_def(a, OP_MUL)) && n->in[0] == n->in[1] && (r = mo_def(n->in[0], OP_RELU)))
		x->act = "relu2";
	else if ((r = mo_def(a, OP_RELU)))
		x->act = "relu";
	else if ((r = mo_def(a, OP_GELU))) {
		x->act = "gelu";
		x->approx = ir_attr_str(r, "approx", "none");
	} else if (silu(a, h) && mo_def(mo_peel_rows(*h), OP_MATMUL)) {
		x->act = "silu";
		x->ungated = 1;
		x->layout = "concat";
		return 1;
	} else
		return 0;
	*h = r->in[0];
	x->ungated = 1;
	x->layout = "concat";
	return 1;
}

/* a = cast(a32) from f32 to a narrower float: the activation computed in
 * f32 from the gate and up halves and rounded once (Beam's experts:
 * act(gate.float()) * up.float(), then .to(gate.dtype)), which is the moe's
 * own rounding of a (docs/ir.md, "moe").  Returns a32, else a. */
static Value *
rounded_once(Value *a, int *wide)
{
	Node *c = mo_def(a, OP_CAST);

	if (!c || !dtype_is_float(a->type.dt) || c->in[0]->type.dt != DT_F32 ||
	    dtype_bytes(a->type.dt, 1) >= 4 || !mo_def(c->in[0], OP_MUL))
		return a;	/* a gated product's only: its halves are peeled back (widened) */
	*wide = 1;
	return c->in[0];
}

/* With the activation rounded once: a half widened to f32 (exact) is that
 * half. */
static Value *
widened(Value *v, int wide)
{
	Node *c = mo_def(v, OP_CAST);

	return wide && c && v->type.dt == DT_F32 && dtype_is_float(c->in[0]->type.dt) &&
	       dtype_bytes(c->in[0]->type.dt, 1) < 4 ? c->in[0] : v;
}

/* The activation between the two projections; returns the gate|up rows. */
static const char *
activation(Value *a, Expert *x, Value **h)
{
	Value *a0 = a, *g, *u;
	Node *n, *ge;
	int wide = 0;

	a = rounded_once(mo_peel_rows(a0), &wide);
	n = mo_def(a, OP_SWIGLU);

	x->approx = "none";
	if (n) {
		x->act = ir_attr_str(n, "act", "silu");
		x->layout = ir_attr_str(n, "layout", "concat");
		x->approx = ir_attr_str(n, "approx", "none");
		x->alpha = ir_attr_float(n, "alpha", 1.702);
		/* gpt-oss's clamp is 7 unless given; silu's none (0) */
		x->limit = ir_attr_float(n, "limit", strcmp(x->act, "oai") ? 0 : 7.0);
		*h = n->in[0];
		return NULL;
	}
	if (!(n = mo_def(a, OP_MUL)))
		return ungated(a, x, h) ? NULL : "expert activation not recognised";
	if (oai(n, &g, &u, x) && (*h = halves(widened(g, wide), widened(u, wide), x))) {
		x->act = "oai";
		return NULL;
	}
	if (clamped_silu(n, &g, &u, x) && (*h = halves(widened(g, wide), widened(u, wide), x))) {
		x->act = "silu";
		return NULL;
	}
	for (int i = 0; i < 2; i++) {
		u = widened(n->in[1 - i], wide);
		if (silu(n->in[i], &g) && (*h = halves(widened(g, wide), u, x))) {
			x->act = "silu";
			return NULL;
		}
		if ((ge = mo_def(n->in[i], OP_GELU)) && (*h = halves(widened(ge->in[0], wide), u, x))) {
			x->act = "gelu";
			x->approx = ir_attr_str(ge, "approx", "none");
			return NULL;
		}
	}
	return ungated(a, x, h) ? NULL
		: "expert activation not recognised (gate and up halves of one matmul, "
		  "silu, gelu or the clamped forms of gpt-oss and Step 3.5; or ungated relu, "
		  "relu², silu or gelu)";
}

/* The [T,k] routing weights a flattened view w[T*k(,1)] was made from:
 * back through reshapes to the first [T,k] with k > 1, or the start. */
static Value *
weights_view(Value *w)
{
	Value *v = w;

	while (v->kind == V_RESULT && (mo_def(v, OP_RESHAPE) || mo_def(v, OP_IDENTITY) ||
				       (mo_def(v, OP_CAST) && v->def->in[0]->type.dt == v->type.dt))) {
		if (v != w && v->type.rank == 2 && v->type.dim[1] != 1)
			break;
		v = v->def->in[0];
	}
	return v;
}

/* Batched: w[T*k] or w[T*k,1] is the flattened routing weights [T,k]. */
static const char *
batched_weight(Value *w, Expert *x)
{
	Value *rw = weights_view(w);
	Module *m = w->graph->m;

	if (rw->type.rank != 2 || w->type.dim[0] != ir_dim_mul(m, rw->type.dim[0], rw->type.dim[1]))
		return "the routing weights are not the flattened [T,k] weights";
	x->rw = rw;
	return NULL;
}

/* Slot, dense scores (gpt-oss in 4.x): w[n,1] = gather(scores[T,E][:, e],
 * tok), scores = scatter_elements(zeros, ids, weights[T,k], axis=1). */
static const char *
dense_weight(Node *gn, Node *col, Expert *x)
{
	Node *sc = mo_def(col->in[0], OP_SCATTER_ELEMENTS);
	const Type *t;

	if (!sc || ir_attr_int(sc, "axis", 0) != 1 || !mo_is_fill(sc->in[0], 0) ||
	    strcmp(ir_attr_str(sc, "reduction", "none"), "none") != 0 ||
	    (t = &sc->in[2]->type)->rank != 2 || sc->in[1]->type.rank != 2 ||
	    sc->in[1]->type.dim[1] != t->dim[1] || !ir_dim_is_static(t->dim[1]))
		return "the routing weight is not gathered from the router's scattered scores";
	x->rw = sc->in[2];
	x->kmul = t->dim[1];
	x->tok = mo_peel_index(gn->in[1]);
	x->pos = NULL;
	x->wsel = mo_peel_index(col->in[1]);
	x->wids = mo_peel_index(sc->in[1]);
	return NULL;
}

/* Slot (torch 2.5's dynamo export of 4.x): w[n,1] = gather_nd(weights
 * [T,k,1], concat(tok[n,1], pos[n,1], axis=1)). */
static const char *
slot_weight_nd(Node *gn, Expert *x)
{
	Value *rw = mo_peel(gn->in[0]);
	Node *c = mo_def(gn->in[1], OP_CONCAT);

	if (ir_attr_int(gn, "batch_dims", 0) || rw->type.rank != 2 || gn->in[0]->type.rank != 3 ||
	    !c || c->nin != 2 || !mo_last_axis(c, "axis", 2, 1) || !ir_dim_is_static(rw->type.dim[1]))
		return "the routing weight is not gathered from the [T,k] weights at (tok, pos)";
	x->rw = rw;
	x->kmul = rw->type.dim[1];
	x->tok = mo_peel_index(c->in[0]);
	x->pos = mo_peel_index(c->in[1]);
	return NULL;
}

/* Slot: w[n,1] = gather(flatten(weights[T,k]), pos + tok * k, axis=0), or
 * the dense form above, or the gather_nd form. */
static const char *
slot_weight(Value *w, Expert *x)
{
	Node *gn = mo_def(mo_peel(w), OP_GATHER), *add, *mul, *col;
	Value *f, *rw;

	if (!gn && (gn = mo_def(mo_peel(w), OP_GATHER_ND)))
		return slot_weight_nd(gn, x);

	if (!gn || ir_attr_int(gn, "axis", 0) != 0)
		return "the routing weight is not gathered per row";
	if ((col = mo_def(mo_peel(gn->in[0]), OP_GATHER)) && ir_attr_int(col, "axis", 0) == 1 &&
	    col->in[0]->type.rank == 2 && col->in[1]->type.rank == 0)
		return dense_weight(gn, col, x);
	f = gn->in[0];
	rw = weights_view(f);
	if (rw->type.rank != 2 ||
	    f->type.dim[0] != ir_dim_mul(w->graph->m, rw->type.dim[0], rw->type.dim[1]) ||
	    ir_type_numel(&f->type) != ir_type_numel(&rw->type) ||
	    !(add = mo_def(mo_peel_index(gn->in[1]), OP_ADD)))
		return "the routing weight is not gathered from the flattened [T,k] weights";
	for (int i = 0; i < 2; i++) {
		double kc;
		if (!(mul = mo_def(add->in[i], OP_MUL)))
			continue;
		for (int j = 0; j < 2; j++)
			if (mo_const_f(mul->in[j], &kc)) {
				x->rw = rw;
				x->kmul = (int64_t)kc;
				x->tok = mo_peel_index(mul->in[1 - j]);
				x->pos = mo_peel_index(add->in[1 - i]);
				return NULL;
			}
	}
	return "the routing weight index is not tok * k + pos";
}

/* The tokens [T,H] a view v was made from: back through reshapes to the
 * first [T,H], or the start of the chain if it is [...,H] with T rows. */
Value *
mo_tokens(Value *v, Dim t, Dim h)
{
	Module *m = v->graph ? v->graph->m : NULL;
	const Type *ty;
	Dim lead = 1;

	for (;; v = v->def->in[0]) {
		ty = &v->type;
		if (ty->rank == 2 && ty->dim[0] == t && ty->dim[1] == h)
			return v;
		if (!mo_def(v, OP_RESHAPE))
			break;
	}
	if (!m || ty->rank < 2 || ty->dim[ty->rank - 1] != h)
		return NULL;
	for (int i = 0; i < ty->rank - 1; i++)
		lead = ir_dim_mul(m, lead, ty->dim[i]);
	return lead == t ? v : NULL;
}

/* Batched: the rows are x repeated k times, expand(x[T,1,H], [T,k,H]). */
static const char *
batched_input(Value *in, Expert *x)
{
	if (in->kind != V_RESULT)
		return "the expert input is not the tokens";
	Value *v = mo_peel(in);
	Node *ex = mo_def(v, OP_EXPAND);
	Module *m = in->graph->m;
	int64_t w = mo_width(&in->type);

	if (!ex) {	/* k = 1: the tokens themselves */
		x->kmul = 1;
		x->x = mo_tokens(in, in->type.dim[0], w);
		return x->x ? NULL : "the expert input is not the tokens repeated k times";
	}
	const Type *et = &v->type, *it = &ex->in[0]->type;
	if (et->rank != 3 || it->rank != 3 || it->dim[1] != 1 || et->dim[2] != w || et->dim[1] < 1 ||
	    in->type.dim[0] != ir_dim_mul(m, et->dim[0], et->dim[1]))
		return "the expert input is not the tokens repeated k times";
	x->kmul = et->dim[1];
	x->x = mo_tokens(ex->in[0], et->dim[0], et->dim[2]);
	return x->x ? NULL : "the expert input is not the tokens repeated k times";
}

/* Slot: the rows gather(x[T,H], tok, axis=0), or gather(x[1,T,H], tok,
 * axis=1) reshaped to [n,H] (transformers 4.x: hidden_states[None, tok]);
 * returns x. */
static Value *
through_views(Value *v)	/* reshapes and transposes */
{
	while (mo_def(v, OP_RESHAPE) || mo_def(v, OP_TRANSPOSE))
		v = v->def->in[0];
	return v;
}

static Value *
slot_tokens(Value *in, Value *tok)
{
	Node *n = mo_def(mo_peel(in), OP_GATHER);

	/* dynamo (torch 2.5): gather_nd(x viewed [T,1,H], tok[n,1]), viewed [n,H]
	 * (the views only move unit dims; the interpreter confirms the block) */
	if (!n && (n = mo_def(through_views(in), OP_GATHER_ND)))
		return !ir_attr_int(n, "batch_dims", 0) && mo_peel_index(n->in[1]) == tok &&
		       n->in[1]->type.rank == 2 && n->in[1]->type.dim[1] == 1 && n->in[0]->type.rank == 3 &&
		       n->in[0]->type.dim[1] == 1 ? through_views(n->in[0]) : NULL;
	const Type *t = n ? &n->in[0]->type : NULL;
	int64_t axis = n ? ir_attr_int(n, "axis", 0) : -1;

	if (!n || mo_peel_index(n->in[1]) != tok ||
	    !((axis == 0 && t->rank == 2) || (axis == 1 && t->rank == 3 && t->dim[0] == 1)))
		return NULL;
	return n->in[0];
}

/* One expert's MLP o = down(act(gate_up(rows))): its matrices, biases and
 * activation into x, the rows it multiplies into *rows. */
const char *
mo_mlp(Value *o, Expert *x, Value **rows)
{
	const char *why;
	Value *h;
	Proj dn, gu;

	if ((why = proj(mo_peel_cast(o), &dn)) || (why = activation(dn.in, x, &h)) ||
	    (why = proj(h, &gu)))
		return why;
	x->sel = dn.sel;
	x->flat = dn.flat;
	if (gu.flat != dn.flat || (dn.flat && (gu.b || dn.b)))
		return "the expert matrices are neither all stacked nor all one expert's";
	if (!same_sel(gu.sel, dn.sel) || (dn.b && !same_sel(dn.bsel, dn.sel)) ||
	    (gu.b && !same_sel(gu.bsel, dn.sel)))
		return "the expert matrices are not picked by one selector";
	x->wgu = gu.w, x->gu_t = gu.t, x->bgu = gu.b;
	x->wdn = dn.w, x->dn_t = dn.t, x->bdn = dn.b;
	if (gu.n != (x->ungated ? 1 : 2) * dn.k || gu.k != dn.n || gu.n < 1 || gu.k < 1 ||
	    (!dn.flat && (gu.w->type.dim[0] != dn.w->type.dim[0] || gu.w->type.dim[0] < 1)) ||
	    (gu.b && (gu.b->type.dim[0] != gu.w->type.dim[0] || gu.b->type.dim[1] != gu.n)) ||
	    (dn.b && (dn.b->type.dim[0] != gu.w->type.dim[0] || dn.b->type.dim[1] != dn.n)))
		return "the expert weight shapes do not agree";
	*rows = gu.in;
	return NULL;
}

/* v = o * w with w [n,1], a weight a row (f16: the product in f32): o and
 * w, or 0.  Both are computed: a parameter times the output is not a
 * routing weight (Ergo's per-expert post-norm weight [E,H] gathered or not). */
int
mo_scaled(Value *v, Value **o, Value **w)
{
	Node *n = mo_def(mo_peel_cast(mo_peel_rows(v)), OP_MUL);

	for (int i = 0; n && i < 2; i++) {
		const Type *a = &n->in[i]->type, *b = &n->in[1 - i]->type;
		if (n->in[i]->kind != V_RESULT || n->in[1 - i]->kind != V_RESULT)
			continue;
		if (b->dim[b->rank - 1] == 1 && a->dim[a->rank - 1] != 1) {
			*o = n->in[i], *w = n->in[1 - i];
			return 1;
		}
	}
	return 0;
}

/* One routed contribution, o * w with o = down(act(gate_up(rows))). */
static const char *
contribution(Value *c, int batched, Expert *x)
{
	Value *o, *w, *rows;
	const char *why;

	if (!mo_scaled(c, &o, &w))
		return "the expert output is not scaled by a routing weight";
	if ((why = batched ? batched_weight(w, x) : slot_weight(w, x)) || (why = mo_mlp(o, x, &rows)))
		return why;
	if (batched)
		return batched_input(rows, x);
	return (x->x = slot_tokens(rows, x->tok)) ? NULL
		: "the expert input is not the tokens routed to the slot";
}

static const char *
batched(Value *sum, Moe *mo)
{
	Node *rs = mo_def(sum, OP_REDUCE_SUM);
	Module *m = sum->graph->m;
	const Type *t = &rs->in[0]->type;
	Value *c = mo_peel(mo_peel_cast(rs->in[0]));	/* through a widening cast for the sum */
	const char *why;

	if (t->rank != 3 || mo_axis(rs, "axes", 3, -1) != 1 || ir_attr_int(rs, "keepdims", 1) != 0 ||
	    c->type.rank != 2 || c->type.dim[0] != ir_dim_mul(m, t->dim[0], t->dim[1]))
		return "not a sum over the k choices";
	if ((why = contribution(c, 1, &mo->x)))
		return why;
	mo->ids = mo_peel_index(mo->x.sel);
	const Type *it = &mo->ids->type, *st = &mo->x.sel->type;
	if (it->rank != 2 || it->dim[0] != t->dim[0] || it->dim[1] != t->dim[1] ||
	    st->dim[0] != ir_dim_mul(m, it->dim[0], it->dim[1]) || mo->x.kmul != t->dim[1] ||
	    mo->x.rw->type.dim[0] != t->dim[0] || mo->x.rw->type.dim[1] != t->dim[1])
		return "the experts, routing weights and sum disagree on [T,k]";
	return NULL;
}

/* --- dense: every expert on every token (Llama 4) -------------------------- */

/* A batched matmul by a whole expert stack: in[E,T,K] @ W[E,K,N], or W
 * held [E,N,K] and transposed (trans_b or a transpose of the last two). */
static const char *
whole(Value *v, Proj *p)
{
	Node *n = mo_def(mo_peel(v), OP_MATMUL), *t;
	Value *w;
	int flip;

	memset(p, 0, sizeof *p);
	if (!n || (n->nin > 2 && n->in[2]) || ir_attr_int(n, "trans_a", 0))
		return "expert matmul not found";
	w = n->in[1];
	flip = (int)ir_attr_int(n, "trans_b", 0);
	while ((t = mo_def(w, OP_TRANSPOSE)) && swaps_last_two(t)) {
		flip ^= 1;
		w = t->in[0];
	}
	p->in = n->in[0];
	if (w->type.rank != 3 || !ir_weight_only(w) || p->in->type.rank != 3 || n->out[0]->type.rank != 3)
		return "the experts' matmul is not by a whole [E,..] stack";
	p->w = w;
	p->t = !flip;
	p->n = w->type.dim[p->t ? 2 : 1];
	p->k = w->type.dim[p->t ? 1 : 2];
	if (p->in->type.dim[0] != w->type.dim[0] || p->in->type.dim[2] != p->k ||
	    n->out[0]->type.dim[2] != p->n)
		return "the expert matmul's input does not fit its weights";
	return NULL;
}

/* s[T,E] = sigmoid(scatter_elements(fill(-inf), ids, values, axis=1)) with
 * values, ids = topk(logits): each chosen expert's sigmoid(logit), 0
 * elsewhere, which is router=sigmoid's weights. */
static const char *
dense_scores(Value *s, Moe *mo)
{
	Node *sg = mo_def(mo_peel_cast(s), OP_SIGMOID), *sc, *tk;
	Router *r = &mo->r;
	IrTopkAttrs ta;

	if (!sg || !(sc = mo_def(mo_peel_cast(sg->in[0]), OP_SCATTER_ELEMENTS)) ||
	    !mo_last_axis(sc, "axis", 2, 0) || !mo_is_fill(sc->in[0], -1.0 / 0.0) ||
	    strcmp(ir_attr_str(sc, "reduction", "none"), "none") ||
	    !(tk = mo_def(mo_peel_cast(sc->in[2]), OP_TOPK)) || mo_peel_cast(sc->in[2]) != tk->out[0] ||
	    mo_peel_index(sc->in[1]) != tk->out[1])
		return "the expert inputs are not scaled by the router's scores scattered over its choices";
	ir_topk_attrs(tk, &ta);
	if (tk->in[0]->type.rank != 2 || !mo_last_axis(tk, "axis", 2, 1) || ta.largest != 1 || ta.k < 1)
		return "the TopK is not over the last axis of [T,E] logits";
	memset(r, 0, sizeof *r);
	r->topk = tk;
	r->ids = mo->ids = tk->out[1];
	r->anchor = "TopK";
	r->kind = "sigmoid";
	r->logits = mo_peel_cast(tk->in[0]);
	r->k = ta.k;
	r->scale = 1;
	r->ngroup = r->topk_group = 1;
	mo->routed = 1;
	return NULL;
}

/* The experts' input [E,T,H]: the tokens tiled E times (expert-major), each
 * copy's rows times that expert's column of the scores,
 * mul(tile(x, [E,1]), reshape(transpose(s), [E*T,1])). */
static const char *
dense_input(Value *in, Moe *mo)
{
	Node *mul = mo_def(mo_peel(in), OP_MUL), *tl, *tr;
	const Type *it = &in->type;

	for (int i = 0; mul && i < 2; i++) {
		if (!(tl = mo_def(mul->in[i], OP_TILE)) || !(tr = mo_def(mo_peel(mul->in[1 - i]), OP_TRANSPOSE)))
			continue;
		const Type *xt = &tl->in[0]->type, *st = &tr->in[0]->type;
		if (xt->rank != 2 || st->rank != 2 || st->dim[1] != it->dim[0] || st->dim[0] != xt->dim[0] ||
		    xt->dim[0] != it->dim[1] || xt->dim[1] != it->dim[2] ||
		    tl->out[0]->type.dim[0] != ir_dim_mul(in->graph->m, it->dim[0], it->dim[1]))
			continue;
		mo->x.x = mo_tokens(tl->in[0], xt->dim[0], xt->dim[1]);
		return mo->x.x ? dense_scores(tr->in[0], mo) : "the expert input is not the tokens";
	}
	return "the experts' input is not the tokens tiled once per expert and scaled by the router's scores";
}

static const char *
dense(Value *sum, Moe *mo)
{
	Node *rs = mo_def(sum, OP_REDUCE_SUM);
	const char *why;
	Value *h;
	Proj dn, gu;

	if (rs->in[0]->type.rank != 3 || mo_axis(rs, "axes", 3, -1) != 0 || ir_attr_int(rs, "keepdims", 1))
		return "not a sum over the experts";
	/* bf16 experts may be widened to f32 for the sum (dynamo's bf16 export) */
	if ((why = whole(mo_peel_cast(rs->in[0]), &dn)) || (why = activation(dn.in, &mo->x, &h)) ||
	    (why = whole(h, &gu)))
		return why;
	if (gu.w->type.dim[0] != dn.w->type.dim[0] || gu.n != (mo->x.ungated ? 1 : 2) * dn.k || gu.k != dn.n)
		return "the expert weight shapes do not agree";
	if ((why = dense_input(gu.in, mo)))
		return why;
	mo->x.wgu = gu.w, mo->x.gu_t = gu.t;
	mo->x.wdn = dn.w, mo->x.dn_t = dn.t;
	mo->x.kmul = mo->r.k;
	mo->x.scale_input = 1;
	return NULL;
}

/* --- slots ---------------------------------------------------------------- */

typedef struct {
	Node *hit;		/* split of the hit experts; slot takes output j */
	int j;
	int64_t e;		/* the slot's key: j, or its constant expert */
	int64_t nkey;		/* the keys, when the mask's form says (split_mask) */
	Value *mask, *ids;	/* transpose(onehot(ids)) [E(+1),k,T] */
} Slot;

/* Does the reduce_sum n count, per expert, over the k and T axes of the
 * mask [E+1,k,T]?  It reads the mask, or (onnxruntime's transpose
 * optimizer) the one-hot the mask transposes, over the axes other than the
 * one the transpose makes the expert axis. */
static int
over_tokens(const Node *n, Value *mask)
{
	int64_t ax[MAXRANK], perm[3];
	int na = ir_attr_ints(n, "axes", ax, MAXRANK), seen = 0, want = 6;
	Node *tm;

	if (na != 2 || ir_attr_int(n, "keepdims", 1) != 0)
		return 0;
	if (n->in[0] != mask) {
		if (!(tm = mo_def(mask, OP_TRANSPOSE)) || n->in[0] != tm->in[0] ||
		    ir_attr_ints(tm, "perm", perm, 3) != 3 || perm[0] < 0 || perm[0] > 2)
			return 0;
		want = 7 & ~(1 << perm[0]);
	}
	for (int i = 0; i < 2; i++)
		seen |= 1 << (ax[i] < 0 ? ax[i] + 3 : ax[i]);
	return seen == want;
}

/* tok and pos are the two columns of nonzero(mask[e]); e is hit[j], or a
 * constant (transformers 4.46 loops over every expert).  Stacked weights
 * must be picked by the same e; one expert's own weights belong to expert
 * j or the constant. */
/* Column col of nzt[n,2]: an output of split(nzt, axis=1) or slice
 * [:, c:c+1] (dynamo); the source nzt, or NULL. */
static Value *
nz_column(Value *v, int *col)
{
	Node *n = v && v->kind == V_RESULT ? v->def : NULL;
	int64_t ax[1], st[1], en[1];

	if (n && n->op == OP_SPLIT && n->nout == 2) {
		for (*col = 0; n->out[*col] != v; (*col)++)
			;
		return n->in[0];
	}
	if (n && n->op == OP_SLICE && n->nin == 1 && ir_attr_ints(n, "axes", ax, 1) == 1 &&
	    ir_attr_ints(n, "starts", st, 1) == 1 && ir_attr_ints(n, "ends", en, 1) == 1 &&
	    (ax[0] == 1 || ax[0] == -1) && (st[0] == 0 || st[0] == 1) && en[0] == st[0] + 1 &&
	    n->in[0]->type.rank == 2 && n->in[0]->type.dim[1] == 2) {
		*col = (int)st[0];
		return n->in[0];
	}
	return NULL;
}

/* A one-hot of ids over the last axis: onehot(ids), or (dynamo) the cast of
 * equal(ids[..,1], arange(E)); the ids, or NULL. */
static Value *
one_hot_of(Value *v)
{
	Node *n = mo_def(v, OP_ONEHOT), *eq;
	int64_t r[1024];
	int ne;

	if (n)
		return mo_last_axis(n, "axis", 3, 2) ? mo_peel_index(n->in[0]) : NULL;
	v = mo_peel_index(v);
	if (!(eq = mo_def(v, OP_EQUAL)) || eq->out[0]->type.rank != 3)
		return NULL;
	for (int i = 0; i < 2; i++) {
		const Value *a = eq->in[i];
		if (a->type.rank == 1 && (ne = mo_const_ints(eq->in[i], r, (int)NELEM(r))) > 0 &&
		    eq->in[1 - i]->type.rank == 3 && eq->in[1 - i]->type.dim[2] == 1) {
			for (int j = 0; j < ne; j++)
				if (r[j] != j)
					return NULL;
			return mo_peel_index(eq->in[1 - i]);
		}
	}
	return NULL;
}

/* onnxruntime's transpose optimizer turns mask[e] = gather(transpose(
 * onehot(ids)), e) into output e of split(onehot(ids)[T,k,E], 1 each,
 * axis=-1): nz reads a [T,k] view of it (nonzero's columns tok, pos) and the
 * slot's expert is the output's index.  0 if nz reads no such split. */
static int
split_mask(const Expert *x, Slot *s, const Node *nz, int ct, int cp)
{
	Value *v = mo_peel_index(nz->in[0]), *ids;
	Node *sp = v && v->kind == V_RESULT ? v->def : NULL;
	const Type *t;

	if (!sp || sp->op != OP_SPLIT || (t = &sp->in[0]->type)->rank != 3 || !mo_last_axis(sp, "axis", 3, 0) ||
	    sp->nout != t->dim[2] || nz->in[0]->type.rank != 2 || !(ids = one_hot_of(sp->in[0])) ||
	    !x->flat || !x->pos || ct != 0 || cp != 1)
		return 0;
	for (int i = 0; i < sp->nout; i++)
		if (sp->out[i]->type.dim[2] != 1)
			return 0;
	for (s->e = 0; sp->out[s->e] != v; s->e++)
		;
	s->mask = sp->in[0];
	s->ids = ids;
	s->hit = NULL;
	s->nkey = sp->nout;
	return 1;
}

static const char *
slot_mask(const Expert *x, Slot *s)
{
	int ct, cp = -1;
	Value *nzt = nz_column(x->tok, &ct), *ids;
	Node *tr, *nz, *gm, *g, *tm, *sp;
	int64_t z, perm[3];
	Value *e;

	if (x->pos && nz_column(x->pos, &cp) != nzt)
		nzt = NULL;
	s->nkey = 0;
	if (nzt && (tr = mo_def(nzt, OP_TRANSPOSE)) && (nz = mo_def(tr->in[0], OP_NONZERO)) &&
	    split_mask(x, s, nz, ct, cp))
		return NULL;
	if (!nzt || !(tr = mo_def(nzt, OP_TRANSPOSE)) ||
	    !(nz = mo_def(tr->in[0], OP_NONZERO)) ||
	    !(gm = mo_def(mo_peel_index(nz->in[0]), OP_GATHER)) ||
	    ir_attr_int(gm, "axis", 0) != 0 || (e = mo_peel_index(gm->in[1]),
					       !x->flat && e != mo_peel_index(x->sel)))
		return "the slot's tokens are not the ones routed to its expert";
	s->mask = gm->in[0];
	/* mask [E,k,T] (permute(2,1,0): nonzero's columns are pos, tok) or
	 * [E,T,k] (permute(2,0,1), DeepSeek in 4.x: tok, pos) */
	if (!(tm = mo_def(s->mask, OP_TRANSPOSE)) || ir_attr_ints(tm, "perm", perm, 3) != 3 ||
	    perm[0] != 2 || perm[1] + perm[2] != 1 || !(ids = one_hot_of(tm->in[0])))
		return "the slot's mask is not a one-hot of the router's choices";
	if (ct != perm[1] || (x->pos && cp != perm[2]) ||
	    (!x->pos && (x->wsel != e || x->wids != ids)))
		return "the slot's tokens are not the ones routed to its expert";
	s->ids = ids;
	s->hit = NULL;
	if (x->flat && mo_const_ints(e, &s->e, 1) == 1 && e->type.rank == 0)
		return s->e >= 0 && ir_dim_is_static(s->mask->type.dim[0]) &&
		       s->e < s->mask->type.dim[0] ? NULL : "the slot's expert is out of range";
	/* e = gather(hit_j, 0) or hit_j itself: hit_j one output of the split
	 * of nonzero(any) */
	Value *h = e;
	if ((g = mo_def(e, OP_GATHER)) && mo_const_ints(g->in[1], &z, 1) == 1 && z == 0)
		h = g->in[0];
	else if (!x->flat)
		return "the slot's expert id is not one of the hit experts";
	h = mo_peel(h);
	if (!(sp = h->kind == V_RESULT ? h->def : NULL) || sp->op != OP_SPLIT)
		return "the slot's expert id is not one of the hit experts";
	s->hit = sp;
	for (s->j = 0; sp->out[s->j] != h; s->j++)
		;
	s->e = s->j;
	if (!(tr = mo_def(sp->in[0], OP_TRANSPOSE)) || !(nz = mo_def(tr->in[0], OP_NONZERO)) ||
	    !(g = mo_def(mo_peel_index(nz->in[0]), OP_GREATER)) || !mo_is_fill(g->in[1], 0) ||
	    !(g = mo_def(mo_peel_index(g->in[0]), OP_REDUCE_SUM)) || !over_tokens(g, s->mask))
		return "the hit experts are not the nonzero rows of the mask";
	return NULL;
}

/* One slot: scatter_elements(zeros, tok, contribution, axis=0). */
static const char *
slot(Node *sc, Expert *x, Slot *s)
{
	Value *u = sc->in[2];
	Node *ex;
	const char *why;

	if (sc->op == OP_SCATTER_ND) {	/* dynamo: scatter_nd(acc, tok[n,1], o, add) */
		while ((ex = mo_def(u, OP_EXPAND)))
			u = ex->in[0];
		if (strcmp(ir_attr_str(sc, "reduction", "none"), "add") || sc->in[1]->type.rank != 2 ||
		    sc->in[1]->type.dim[1] != 1)
			return "the slot's scatter_nd does not add rows";
		if ((why = contribution(u, 0, x)) || (why = slot_mask(x, s)))
			return why;
		return mo_peel_index(sc->in[1]) == x->tok ? NULL
			: "the slot scatters to other rows than its tokens";
	}
	if (ir_attr_int(sc, "axis", 0) != 0 || strcmp(ir_attr_str(sc, "reduction", "none"), "none") ||
	    !mo_is_fill(sc->in[0], 0))
		return "the slot's scatter is not into zeros along the tokens";
	while ((ex = mo_def(u, OP_EXPAND)) && ex->in[0]->type.rank == u->type.rank &&
	       ex->in[0]->type.dim[u->type.rank - 1] == u->type.dim[u->type.rank - 1])
		u = ex->in[0];
	if ((why = contribution(u, 0, x)) || (why = slot_mask(x, s)))
		return why;
	ex = mo_def(sc->in[1], OP_EXPAND);
	if (!ex || ex->in[0]->type.rank != 2 || ex->in[0]->type.dim[1] != 1 ||
	    mo_peel_index(ex->in[0]) != x->tok)
		return "the slot scatters to other rows than its tokens";
	return NULL;
}

int
mo_same_expert(const Expert *a, const Expert *b)
{
	int w = a->flat ? ir_type_eq(&a->wgu->type, &b->wgu->type) &&
			      ir_type_eq(&a->wdn->type, &b->wdn->type)
			: a->wgu == b->wgu && a->wdn == b->wdn;

	return w && a->flat == b->flat && a->x == b->x && a->bgu == b->bgu &&
	       a->bdn == b->bdn && a->gu_t == b->gu_t && a->dn_t == b->dn_t &&
	       strcmp(a->act, b->act) == 0 && strcmp(a->layout, b->layout) == 0 &&
	       strcmp(a->approx, b->approx) == 0 && a->alpha == b->alpha &&
	       a->ungated == b->ungated && a->scale_input == b->scale_input &&
	       a->limit == b->limit && a->rw == b->rw && a->kmul == b->kmul;
}

/* The number of slot keys: the hit experts, or (experts looped over by a
 * constant) the mask's rows. */
static int64_t
slot_keys(const Slot *s)
{
	if (s->hit)
		return s->hit->nout;
	if (s->nkey)
		return s->nkey;
	return ir_dim_is_static(s->mask->type.dim[0]) ? s->mask->type.dim[0] : -1;
}

static const char *
slots(Value *sum, Moe *mo)
{
	Module *m = sum->graph->m;
	Value *v = sum, *acc = NULL, *mask = NULL;
	Node *hit = NULL;
	char *seen = NULL;
	const char *why = NULL;
	int64_t nkey = 0;

	for (; !why; v = acc) {
		Node *add = mo_def(v, OP_ADD), *sc = mo_def(v, OP_SCATTER_ELEMENTS);
		Expert x;
		Slot s;

		acc = NULL;	/* a bare scatter: the first slot, zeros + s folded */
		for (int i = 0; add && i < 2 && !sc; i++)
			if ((sc = mo_def(add->in[i], OP_SCATTER_ELEMENTS)))
				acc = add->in[1 - i];
		if (!sc && (sc = mo_def(v, OP_SCATTER_ND)))
			acc = sc->in[0];	/* dynamo: each slot adds onto the sum */
		if (!sc) {
			why = "not a sum of scattered expert slots";
			break;
		}
		memset(&x, 0, sizeof x);
		if ((why = slot(sc, &x, &s)))
			break;
		if (!seen) {
			hit = s.hit, mask = s.mask, mo->ids = s.ids, mo->x = x;
			if ((nkey = slot_keys(&s)) < 1) {
				why = "the slots' experts cannot be counted";
				break;
			}
			seen = xcalloc((size_t)nkey, 1);
			mo->gu_e = arena_array(m->arena, Value *, nkey);
			mo->dn_e = arena_array(m->arena, Value *, nkey);
		}
		if (s.hit != hit || s.mask != mask || s.ids != mo->ids || s.e >= nkey ||
		    seen[s.e] || !mo_same_expert(&mo->x, &x)) {
			why = "the slots do not agree";
		} else {
			seen[s.e] = 1, mo->nslot++;
			mo->gu_e[s.e] = x.wgu, mo->dn_e[s.e] = x.wdn;
		}
		if (!acc || mo_is_fill(acc, 0))
			break;
	}
	/* a one-hot of depth E+1 (transformers 5's loop over every expert of a
	 * ModuleList): its last row is no expert's, and has no slot */
	if (!why && !hit && nkey >= 2 && mo->nslot == nkey - 1 && !seen[nkey - 1])
		nkey--;
	free(seen);
	if (!why && mo->nslot != nkey)
		why = hit ? "some hit experts have no slot" : "some experts have no slot";
	if (!why && mo->x.flat && mo->nslot != nkey)
		why = "one expert's own weights per slot, but not every expert has a slot "
		      "(the export sample did not reach them all)";
	if (!why && (mo->ids->type.rank != 2 || mo->x.kmul != mo->ids->type.dim[1] ||
		     mo->x.rw->type.dim[0] != mo->ids->type.dim[0] ||
		     mo->x.rw->type.dim[1] != mo->ids->type.dim[1]))
		why = "the slots, routing weights and indices disagree on [T,k]";
	return why;
}

/* --- sorted rows (DeepSeek-V2 in 4.57, JetMoE by dynamo) ------------------- */

/* The ids [T,k] whose flattening perm sorts: perm = topk(reshape(ids,
 * [T*k]), k=T*k, largest=0)'s indices, ties to the lower index (a stable
 * sort, as ONNX's TopK and the IR's define it); NULL if not. */
static Value *
sort_of_ids(Value *perm)
{
	Node *tk = mo_def(perm, OP_TOPK);
	Value *ids;
	IrTopkAttrs ta;

	if (!tk || tk->out[1] != perm || tk->in[0]->type.rank != 1)
		return NULL;
	ir_topk_attrs(tk, &ta);
	ids = mo_peel_index(tk->in[0]);
	if (ta.largest || perm->type.dim[0] != tk->in[0]->type.dim[0] || ids->type.rank != 2 ||
	    ir_dim_mul(perm->graph->m, ids->type.dim[0], ids->type.dim[1]) != perm->type.dim[0])
		return NULL;
	return ids;
}

/* counts = reduce_sum(scatter_elements(zeros[T,E], ids, ones, axis=1),
 * axes=[0]), or reduce_sum(onehot(reshape(ids, [T*k]), depth=E), axes=[0])
 * (F.one_hot(ids.view(-1), E).sum(0)): how often each expert was chosen (a
 * row of top-k ids holds each expert at most once). */
static int
is_counts(const Node *rs, Value *ids)
{
	Node *sc, *oh;

	if (!rs || rs->op != OP_REDUCE_SUM || rs->in[0]->type.rank != 2 || mo_axis(rs, "axes", 2, -1) != 0 ||
	    ir_attr_int(rs, "keepdims", 1))
		return 0;
	if ((oh = mo_def(mo_peel_index(rs->in[0]), OP_ONEHOT)))
		return oh->in[0]->type.rank == 1 && mo_last_axis(oh, "axis", 2, 1) &&
		       ir_attr_float(oh, "on", 1) == 1 && ir_attr_float(oh, "off", 0) == 0 &&
		       mo_peel_index(oh->in[0]) == ids;
	return (sc = mo_def(mo_peel_index(rs->in[0]), OP_SCATTER_ELEMENTS)) &&
	       mo_last_axis(sc, "axis", 2, 0) && !strcmp(ir_attr_str(sc, "reduction", "none"), "none") &&
	       mo_is_fill(sc->in[0], 0) && mo_is_fill(sc->in[2], 1) && mo_peel_index(sc->in[1]) == ids;
}

/* Element e of a counts vector: reshape(gather(slice(counts, [e:e+1]), 0))
 * (dynamo's per-expert item()); the counts' node, or NULL. */
static Node *
count_elem(Value *v, int e)
{
	Node *g = mo_def(mo_peel(v), OP_GATHER), *sl;
	int64_t z = -1, st, en, sp;

	if (!g || mo_const_ints(g->in[1], &z, 1) != 1 || z != 0 || !(sl = mo_def(g->in[0], OP_SLICE)) ||
	    sl->in[0]->type.rank != 1 || !slice1(sl, 1, &st, &en, &sp) || st != e || en != e + 1 || sp != 1)
		return NULL;
	return mo_def(sl->in[0], OP_REDUCE_SUM);
}

/* Which expert's row count v is: output e of split(counts, 1 each), or of
 * the split of a concat of the counts' elements in order, or gather(counts,
 * e) (a user's loop over counts[e]); -1 if not.  Every count must come from
 * one split or one counts vector (*sp). */
static int
count_of(Value *v, Value *ids, Node **sp)
{
	Node *s, *c;
	int64_t e64 = -1;
	int e;

	v = mo_peel(v);
	if (v && v->kind == V_RESULT && v->def->op == OP_GATHER && v->type.rank == 0 &&
	    !ir_attr_int(v->def, "axis", 0) && mo_const_ints(v->def->in[1], &e64, 1) == 1 &&
	    is_counts(mo_def(v->def->in[0], OP_REDUCE_SUM), ids) && (!*sp || *sp == v->def->in[0]->def) &&
	    e64 >= 0 && e64 < v->def->in[0]->type.dim[0]) {
		*sp = v->def->in[0]->def;
		return (int)e64;
	}
	if (!v || v->kind != V_RESULT || (s = v->def)->op != OP_SPLIT || (*sp && *sp != s) ||
	    v->type.rank != 1 || v->type.dim[0] != 1)
		return -1;
	for (e = 0; s->out[e] != v; e++)
		;
	if ((c = mo_def(s->in[0], OP_CONCAT))) {
		if (c->nin != s->nout || !is_counts(count_elem(c->in[e], e), ids))
			return -1;
	} else if (!is_counts(mo_def(s->in[0], OP_REDUCE_SUM), ids) || s->in[0]->type.dim[0] != s->nout) {
		return -1;
	}
	*sp = s;
	return e;
}

/* How many experts the counts source *sp counts: a split's pieces or the
 * counts vector's length. */
static int64_t
count_len(const Node *sp)
{
	return sp->op == OP_SPLIT ? sp->nout : sp->out[0]->type.dim[0];
}

/* Is v the counts vector (is_counts), the one every count comes from? */
static int
counts_vec(Value *v, Value *ids, Node **sp)
{
	Node *rs = mo_def(v, OP_REDUCE_SUM);

	if (!is_counts(rs, ids) || (*sp && *sp != rs))
		return 0;
	*sp = rs;
	return 1;
}

/* Which running sum of the experts' counts v is: m for c_0 + .. + c_{m-1},
 * written as a chain of adds (0: a constant 0), as cumsum(counts)[e] (m =
 * e + 1; exclusive: e) or as (cumsum(counts) - counts)[e] (m = e); -1 if
 * none. */
static int
prefix_of(Value *v, Value *ids, Node **sp)
{
	Node *n, *cs, *sub;
	int64_t e = -1;
	int m;

	v = mo_peel(v);
	if (mo_const_ints(v, &e, 1) == 1)
		return e == 0 ? 0 : -1;
	if ((n = mo_def(v, OP_ADD))) {
		for (int i = 0; i < 2; i++)
			if ((m = prefix_of(n->in[i], ids, sp)) >= 0 && count_of(n->in[1 - i], ids, sp) == m)
				return m + 1;
		return -1;
	}
	sub = (n = mo_def(v, OP_GATHER)) ? mo_def(n->in[0], OP_SUB) : NULL;
	cs = n ? mo_def(sub ? sub->in[0] : n->in[0], OP_CUMSUM) : NULL;
	if (cs && v->type.rank == 0 && !ir_attr_int(n, "axis", 0) && mo_const_ints(n->in[1], &e, 1) == 1 && e >= 0) {
		if (ir_attr_int(cs, "reverse", 0) || cs->in[0]->type.rank != 1 || ir_attr_int(cs, "axis", 0) ||
		    !counts_vec(cs->in[0], ids, sp) || (sub && (sub->in[1] != cs->in[0] || ir_attr_int(cs, "exclusive", 0))))
			return -1;
		if (e >= cs->in[0]->type.dim[0])
			return -1;
		/* cumsum[e] = c_0 + .. + c_e; exclusive, or less the counts: .. + c_{e-1} */
		return sub || ir_attr_int(cs, "exclusive", 0) ? (int)e : (int)e + 1;
	}
	return count_of(v, ids, sp) == 0 ? 1 : -1;
}

/* Slot j's rows: slice(rows, c_0 + .. + c_{j-1}, c_0 + .. + c_j, axes=[0])
 * (prefix_of's running sums).  Returns the sliced rows. */
static Value *
sorted_slot(Value *in, int j, Value *ids, Node **sp)
{
	Node *sl = mo_def(in, OP_SLICE);
	int64_t ax = -1, st = 1;

	if (!sl || sl->nin < 4 || mo_const_ints(sl->in[3], &ax, 1) != 1 || ax != 0 ||
	    (sl->nin > 4 && sl->in[4] && (mo_const_ints(sl->in[4], &st, 1) != 1 || st != 1)))
		return NULL;
	if (prefix_of(sl->in[1], ids, sp) != j || prefix_of(sl->in[2], ids, sp) != j + 1)
		return NULL;
	return sl->in[0];
}

/* v = perm / k: an integer div, or (dynamo) the float truncation
 * cast(floor(abs(d)) * sign(d)) of d = cast(perm) / k. */
static int
div_by(Value *v, Value *perm, int64_t k)
{
	Node *n = mo_def(v, OP_DIV), *c = mo_def(v, OP_CAST), *m, *f, *a, *sg;
	double kc;

	if (n && !dtype_is_float(n->out[0]->type.dt))
		return mo_peel_index(n->in[0]) == perm && mo_const_f(n->in[1], &kc) && kc == (double)k;
	if (!(m = mo_def(c ? c->in[0] : v, OP_MUL)))	/* the cast may be peeled already */
		return 0;
	for (int i = 0; i < 2; i++)
		if ((f = mo_def(m->in[i], OP_FLOOR)) && (a = mo_def(f->in[0], OP_ABS)) &&
		    (sg = mo_def(m->in[1 - i], OP_SIGN)) && sg->in[0] == a->in[0] && (n = mo_def(a->in[0], OP_DIV)))
			return mo_peel_index(n->in[0]) == perm && mo_const_f(n->in[1], &kc) && kc == (double)k;
	return 0;
}

/* rows = gather(x[T,H], perm / k, axis=0) or gather_nd(x, (perm / k)[n,1]):
 * each sorted row's token; x, or NULL. */
static Value *
sorted_tokens(Value *rows, Value *perm, int64_t k)
{
	Node *g = mo_def(rows, OP_GATHER);

	if (!g && (g = mo_def(rows, OP_GATHER_ND)) && (ir_attr_int(g, "batch_dims", 0) ||
						     g->in[1]->type.rank != 2 || g->in[1]->type.dim[1] != 1))
		return NULL;
	if (!g || ir_attr_int(g, "axis", 0) != 0 || g->in[0]->type.rank != 2 || !div_by(mo_peel_index(g->in[1]), perm, k))
		return NULL;
	return mo_tokens(g->in[0], g->in[0]->type.dim[0], g->in[0]->type.dim[1]);
}

/* One expert's 2-D matrix for slot j: its own (a ModuleList Linear), or a
 * stacked parameter's gather(W, j) (JetMoE's gate|up). */
static int
slot_matrix(Proj *p, int j)
{
	int64_t e = -1;

	if (p->flat)
		return !p->b;
	if (p->b || mo_const_ints(p->sel, &e, 1) != 1 || e != j || p->sel->type.rank != 0 ||
	    p->wv->type.rank != 2)
		return 0;
	p->w = p->wv;	/* gather(W, j): weight-only, fold computes it */
	p->flat = 1;
	return 1;
}

/*
 * The (token, choice) rows sorted by expert, each expert's run a slice
 * bounded by the running sum of the per-expert counts, every expert a slot
 * in order (cat: the experts' outputs, concatenated in that order):
 *	perm = argsort(ids[T*k])       rows = gather(x, perm / k)
 *	o_e  = down_e(act(gate_up_e(rows[c_0+..+c_{e-1} : c_0+..+c_e])))
 * or (JetMoE) the activation over every row between the two concats.  The
 * slices follow the sort, so sorted row i is (token perm[i]/k, choice
 * perm[i]%k) on expert ids[perm[i]].
 */
static const char *
sorted_experts(Node *cat, Value *ids, Value *perm, Value *rw, Moe *mo)
{
	Module *m = cat->out[0]->graph->m;
	Value *rows = NULL, *act = NULL;
	Node *sp = NULL, *gcat = NULL;
	const char *why;

	if (ir_attr_int(cat, "axis", 0) != 0)
		return "the sorted rows' expert outputs are not concatenated along the rows";
	mo->gu_e = arena_array(m->arena, Value *, cat->nin);
	mo->dn_e = arena_array(m->arena, Value *, cat->nin);
	for (int j = 0; j < cat->nin; j++) {
		Expert x;
		Proj dn, gu;
		Value *h, *r, *a;

		memset(&x, 0, sizeof x);
		if ((why = proj(cat->in[j], &dn)))
			return why;
		/* JetMoE: the activation once over every sorted row, then sliced */
		a = mo_def(dn.in, OP_SLICE) ? dn.in->def->in[0] : NULL;
		if (a && (a == act || (!act && !activation(a, &x, &h) && (gcat = mo_def(h, OP_CONCAT))))) {
			if (!act)
				act = a, mo->x = x;
			x = mo->x;
			if (!sorted_slot(dn.in, j, ids, &sp) || gcat->nin != cat->nin || (why = proj(gcat->in[j], &gu)))
				return why ? why : "the sorted rows are not sliced by the running sum of the experts' counts";
		} else if ((why = activation(dn.in, &x, &h)) || (why = proj(h, &gu))) {
			return why;
		}
		if (!slot_matrix(&dn, j) || !slot_matrix(&gu, j) || gu.n != (x.ungated ? 1 : 2) * dn.k || gu.k != dn.n)
			return "the sorted rows' experts are not one expert's matrices each";
		if (!(r = sorted_slot(gu.in, j, ids, &sp)) || (rows && r != rows))
			return "the sorted rows are not sliced by the running sum of the experts' counts";
		rows = r;
		x.flat = 1, x.rw = rw, x.kmul = ids->type.dim[1];
		x.wgu = gu.w, x.gu_t = gu.t, x.wdn = dn.w, x.dn_t = dn.t;
		if (j == 0 && !(x.x = sorted_tokens(rows, perm, x.kmul)))
			return "the sorted rows are not the tokens in the sort's order";
		if (j == 0)
			mo->x = x;
		else if (x.x = mo->x.x, !mo_same_expert(&mo->x, &x))
			return "the sorted rows' experts do not agree";
		mo->gu_e[j] = gu.w, mo->dn_e[j] = dn.w;
	}
	if (!sp || count_len(sp) != cat->nin)
		return "one expert's own weights per slot, but not every expert has a slot "
		       "(the export sample did not reach them all)";
	mo->nslot = cat->nin;
	mo->ids = ids;
	return NULL;
}

/* DeepSeek-V2 (4.57, TorchScript): the outputs put back by the sort and
 * summed over k,
 *	sum = reduce_sum(reshape(scatter_nd(0, perm, concat(o_0..)), [T,k,H]) * w[T,k,1], axes=[1]) */
static const char *
sorted_rows(Value *sum, Moe *mo)
{
	Node *rs = mo_def(sum, OP_REDUCE_SUM), *mul = mo_def(mo_peel_cast(rs->in[0]), OP_MUL);
	Node *sn = NULL, *cat;
	const Type *t = &rs->in[0]->type;
	Value *w = NULL, *perm, *ids;

	if (t->rank != 3 || mo_axis(rs, "axes", 3, -1) != 1 || ir_attr_int(rs, "keepdims", 1) || !mul)
		return "not a sum over the k choices";
	for (int i = 0; i < 2 && !sn; i++)
		if ((sn = mo_def(mo_peel(mul->in[i]), OP_SCATTER_ND)))
			w = mul->in[1 - i];
	if (!sn || strcmp(ir_attr_str(sn, "reduction", "none"), "none") || !mo_is_fill(sn->in[0], 0) ||
	    sn->in[1]->type.rank != 2 || sn->in[1]->type.dim[1] != 1 || !(cat = mo_def(sn->in[2], OP_CONCAT)))
		return "not a sum over the k choices";
	if (!(ids = sort_of_ids(perm = mo_peel_index(sn->in[1]))))
		return "the expert rows are not scattered back by the sort of the router's choices";
	w = mo_peel(w);
	if (w->type.rank != 2 || w->type.dim[0] != ids->type.dim[0] || w->type.dim[1] != ids->type.dim[1] ||
	    t->dim[0] != ids->type.dim[0] || t->dim[1] != ids->type.dim[1])
		return "the sorted rows' routing weights are not [T,k]";
	return sorted_experts(cat, ids, perm, w, mo);
}

/* JetMoE (dynamo): each sorted row's output times its routing weight,
 * added onto its token,
 *	sum = scatter_nd(0[T,H], (perm / k)[n,1], concat(o_0..) * gather_nd(w[T*k], perm[n,1]), add) */
static int
is_sorted_add(Value *sum)
{
	Node *mul = mo_def(mo_peel(sum->def->in[2]), OP_MUL);

	return mul && (mo_def(mul->in[0], OP_CONCAT) || mo_def(mul->in[1], OP_CONCAT));
}

static const char *
sorted_add(Value *sum, Moe *mo)
{
	Node *sn = sum->def, *mul = mo_def(mo_peel(sn->in[2]), OP_MUL), *cat = NULL, *g;
	Value *w = NULL, *perm, *ids, *rw;

	for (int i = 0; i < 2 && !cat; i++)
		if ((cat = mo_def(mul->in[i], OP_CONCAT)))
			w = mul->in[1 - i];
	if (strcmp(ir_attr_str(sn, "reduction", "none"), "add") || !mo_is_fill(sn->in[0], 0) ||
	    sn->in[0]->type.rank != 2 || sn->in[1]->type.rank != 2 || sn->in[1]->type.dim[1] != 1)
		return "the sorted rows are not added onto their tokens";
	g = mo_def(mo_peel(w), OP_GATHER_ND);
	if (!g && (g = mo_def(mo_peel(w), OP_GATHER)) && ir_attr_int(g, "axis", 0))
		g = NULL;
	if (!g || !(ids = sort_of_ids(perm = mo_peel_index(g->in[1]))))
		return "the sorted rows' routing weights are not read in the sort's order";
	rw = weights_view(g->in[0]);
	if (rw->type.rank != 2 || rw->type.dim[0] != ids->type.dim[0] || rw->type.dim[1] != ids->type.dim[1] ||
	    !div_by(mo_peel_index(sn->in[1]), perm, ids->type.dim[1]))
		return "the sorted rows are not added onto their tokens";
	return sorted_experts(cat, ids, perm, rw, mo);
}

/* --- sorted rows added back per expert (a user's index_add_ loop) --------- */

/* Which expert's run of the sorted rows v is: slice(src, c_0 + .. +
 * c_{j-1}, c_0 + .. + c_j) along the rows; j and src, or -1. */
static int
run_of(Value *v, Value *ids, Node **sp, Value **src)
{
	Node *sl = mo_def(v, OP_SLICE);
	int64_t ax = -1, st = 1;
	int j;

	if (!sl || sl->nin < 4 || mo_const_ints(sl->in[3], &ax, 1) != 1 || ax != 0 ||
	    (sl->nin > 4 && sl->in[4] && (mo_const_ints(sl->in[4], &st, 1) != 1 || st != 1)))
		return -1;
	if ((j = prefix_of(sl->in[1], ids, sp)) < 0 || prefix_of(sl->in[2], ids, sp) != j + 1)
		return -1;
	*src = sl->in[0];
	return j;
}

/* v = acc + scatter_elements(0, idx, c, axis=0) (TorchScript's index_add_),
 * or scatter_elements(acc, idx, c, axis=0, reduction=add): the scatter, and
 * the running sum in *acc. */
static Node *
row_scatter(Value *v, Value **acc)
{
	Node *add = mo_def(v, OP_ADD), *sc = mo_def(v, OP_SCATTER_ELEMENTS);

	if (sc && !ir_attr_int(sc, "axis", 0) && !strcmp(ir_attr_str(sc, "reduction", "none"), "add")) {
		*acc = sc->in[0];
		return sc;
	}
	for (int i = 0; add && i < 2; i++)
		if ((sc = mo_def(add->in[i], OP_SCATTER_ELEMENTS)) && !ir_attr_int(sc, "axis", 0) &&
		    mo_is_fill(sc->in[0], 0)) {
			*acc = add->in[1 - i];
			return sc;
		}
	return NULL;
}

static int
is_sorted_index_add(Value *sum)
{
	Value *acc;
	Node *sc = row_scatter(sum, &acc);

	return sc && mo_def(mo_peel_index(sc->in[1]), OP_SLICE);
}

/* One expert's slot: the scatter's updates o * w[n,1], w the expert's run
 * of gather(flatten(weights), perm) (the weights in the sort's order, which
 * fixes perm and the ids it sorts), o its MLP on its run of gather(x, perm /
 * k), added onto its run of perm / k.  The expert's index into *j. */
static const char *
sorted_index_slot(Node *sc, Expert *x, Value **ids, Value **perm, Node **sp, int *j)
{
	Node *sl, *g;
	Value *o, *w, *src, *rows, *rw;
	const char *why;
	int64_t k;

	if (!mo_scaled(mo_uncut(sc->in[2]), &o, &w))
		return "the expert output is not scaled by a routing weight";
	g = (sl = mo_def(mo_peel(w), OP_SLICE)) ? mo_def(sl->in[0], OP_GATHER) : NULL;
	if (!g || ir_attr_int(g, "axis", 0) || (*perm && mo_peel_index(g->in[1]) != *perm) ||
	    (!*perm && !(*ids = sort_of_ids(*perm = mo_peel_index(g->in[1])))))
		return "the sorted rows' routing weights are not read in the sort's order";
	k = (*ids)->type.dim[1];
	rw = weights_view(g->in[0]);
	if (rw->type.rank != 2 || rw->type.dim[0] != (*ids)->type.dim[0] || rw->type.dim[1] != k)
		return "the sorted rows' routing weights are not [T,k]";
	if ((*j = run_of(sl->out[0], *ids, sp, &src)) < 0)
		return "the sorted rows are not sliced by the running sum of the experts' counts";
	if ((why = mo_mlp(o, x, &rows)))
		return why;
	if (!x->flat)
		return "the sorted rows' experts are not one expert's own matrices each";
	if (run_of(rows, *ids, sp, &src) != *j || !(x->x = sorted_tokens(src, *perm, k)))
		return "the sorted rows' expert input is not its run of the tokens in the sort's order";
	if (run_of(mo_peel_index(sc->in[1]), *ids, sp, &src) != *j || !div_by(mo_peel_index(src), *perm, k))
		return "the sorted rows are not added onto their own tokens";
	x->rw = rw;
	x->kmul = k;
	return NULL;
}

/* Session 31's sorted_rows_index_add: the (token, choice) rows sorted by
 * expert, each expert's run of them (a slice by the running sum of the
 * counts) through its MLP, scaled and added onto its tokens with
 * out.index_add_(0, tok[a:b], y) — no concat: one slot per expert. */
static const char *
sorted_index_add(Value *sum, Moe *mo)
{
	Module *m = sum->graph->m;
	Value *v = sum, *acc = NULL, *ids = NULL, *perm = NULL;
	Node *sp = NULL, *sc;
	const char *why;
	int64_t nkey = 0;

	for (;; v = acc) {
		Expert x;
		int j;

		memset(&x, 0, sizeof x);
		if (!(sc = row_scatter(v, &acc)))
			return "the sorted rows' slots are not added onto a sum from zeros";
		if ((why = sorted_index_slot(sc, &x, &ids, &perm, &sp, &j)))
			return why;
		if (!mo->gu_e) {
			nkey = count_len(sp);
			mo->gu_e = arena_array(m->arena, Value *, nkey);
			mo->dn_e = arena_array(m->arena, Value *, nkey);
		}
		if (j >= nkey || mo->gu_e[j] || (mo->nslot && !mo_same_expert(&mo->x, &x)))
			return "the sorted rows' slots do not agree";
		mo->x = x;
		mo->gu_e[j] = x.wgu, mo->dn_e[j] = x.wdn;
		mo->nslot++;
		if (mo_is_fill(acc, 0))
			break;
	}
	if (mo->nslot != nkey)
		return "one expert's own weights per slot, but not every expert has a slot "
		       "(the export sample did not reach them all)";
	mo->ids = ids;
	return NULL;
}

const char *
mo_experts(Value *sum, Moe *mo)
{
	const char *why;

	memset(mo, 0, sizeof *mo);
	mo->sum = sum;
	if (mo_def(sum, OP_REDUCE_SUM) && mo_axis(sum->def, "axes", 3, -1) == 0)
		why = dense(sum, mo);
	else if (mo_def(sum, OP_REDUCE_SUM) && mo_def(mo_peel_cast(sum->def->in[0]), OP_MUL))
		why = sorted_rows(sum, mo);
	else if (mo_def(sum, OP_REDUCE_SUM))
		why = batched(sum, mo);
	else if (mo_def(sum, OP_SCATTER_ND) && is_sorted_add(sum))
		why = sorted_add(sum, mo);
	else if (mo_def(sum, OP_ADD) || mo_def(sum, OP_SCATTER_ND) || mo_def(sum, OP_SCATTER_ELEMENTS))
		why = slots(sum, mo);
	else
		why = "not a routed sum";
	if (why) {	/* loops users write */
		int masked = mo_is_masked(sum);
		if (masked || is_sorted_index_add(sum)) {
			memset(mo, 0, sizeof *mo);
			mo->sum = sum;
			why = masked ? mo_masked(sum, mo) : sorted_index_add(sum, mo);
		}
	}
	if (!why && mo->x.x->type.dim[mo->x.x->type.rank - 1] !=
			    mo->x.wdn->type.dim[(mo->x.dn_t ? 2 : 1) - mo->x.flat])
		why = "the tokens' width is not the experts' hidden size";
	mo->e = why ? 0 : mo->x.flat ? mo->nslot : mo->x.wgu->type.dim[0];
	return why;
}
