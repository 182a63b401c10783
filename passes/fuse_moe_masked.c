/*
 * fuse_moe_masked.c — the expert loop users write with a boolean mask per
 * expert (and older exports of it), read by what it computes rather than
 * by one exporter's syntax.  For each expert e:
 *
 *	m  = any(ids == e)                 a mask made from the router's indices
 *	                                   and the constant e alone
 *	y  = down_e(act(gate_up_e(x[m])))  x[m]: gather(_nd) by nonzero(m)
 *	out[m] += y * we[m]                we: the routing weight of (token, e),
 *	                                   (w * (ids == e)).sum(-1), where(ids == e,
 *	                                   w, 0).sum(-1), w[ids == e], or w[tok, pos]
 *	                                   of torch.where(ids == e)
 *
 * or with the weight on the expert's input rows, x[m] * we[m] (the moe's
 * scale_input).  A loop without a routing weight has no moe form.
 *
 * The add onto the running sum, from zeros: a scatter_nd or (along the
 * rows) scatter_elements with reduction add (index_put accumulate,
 * index_add, scatter_add), a scatter into zeros added onto it (TorchScript's
 * index_add), or the read-modify-write out[m] = out[m] + y (TorchScript's
 * index_put: a scatter_nd of gather_nd(out, rows) + y, its updates
 * flattened and cut to the index count).  Rows may be indexed by nonzero(m)
 * itself, by its first row (torch.where(m)[0]), or by the nonzero of m
 * broadcast over H (index_put's element indices).
 *
 * The masks are checked to depend on nothing but the indices: a mask from
 * a threshold on the input, or rows written that are not the ones read,
 * is no MoE.  What the loop computes, router included, is then confirmed
 * by the interpreter (fuse_moe_confirm.c) like every other form.
 */
#include <stdlib.h>
#include <string.h>

#include "fuse_moe.h"

enum { MASK_VALUES = 256 };	/* a mask is a short chain: equal, any, views */

/* Is v the indices the Equal compares (*ids; the first one seen sets it)? */
static int
is_ids(Value *v, Value **ids)
{
	if (!*ids)
		*ids = v;
	return v == *ids;
}

/* equal(ids, e) with e a constant scalar: e, or -1. */
static int64_t
equal_expert(const Node *n, Value **ids)
{
	int64_t e;

	for (int i = 0; i < 2; i++)
		if (ir_type_numel(&n->in[i]->type) == 1 && mo_const_ints(n->in[i], &e, 1) == 1 && e >= 0 &&
		    !ir_weight_only(n->in[1 - i]) && is_ids(mo_peel_index(n->in[1 - i]), ids))
			return e;
	return -1;
}

/* The expert whose tokens the mask m marks: m is computed from the router's
 * indices and constants alone (shapes aside), comparing the indices with
 * one constant e.  Returns e, or -1; *ids the indices (set if NULL). */
static int64_t
mask_expert(Value *m, Value **ids)
{
	Value *stack[MASK_VALUES];
	int n = 0, seen = 0;
	int64_t e = -1, ei;

	if (!m || dtype_is_float(m->type.dt))
		return -1;	/* a mask is boolean or integer */
	stack[n++] = m;
	while (n > 0) {
		Value *v = stack[--n];
		Node *d = v->kind == V_RESULT ? v->def : NULL;

		if (v->kind == V_WEIGHT || ir_weight_only(v) || (d && d->op == OP_SHAPE))
			continue;
		if (!d || d->op == OP_TOPK || ++seen > MASK_VALUES)
			return -1;
		if (d->op == OP_EQUAL) {
			if ((ei = equal_expert(d, ids)) < 0 || (e >= 0 && ei != e))
				return -1;
			e = ei;
			continue;
		}
		for (int i = 0; i < d->nin; i++)
			if (d->in[i]) {
				if (n == MASK_VALUES)
					return -1;
				stack[n++] = d->in[i];
			}
	}
	return e;
}

/* The mask m of t = transpose(nonzero(m)) [n,r]: a row per nonzero
 * element, its index along each of m's r axes. */
static Value *
nz_rows(Value *t)
{
	Node *tr = mo_def(mo_peel_index(t), OP_TRANSPOSE), *nz;
	int64_t perm[2];

	if (!tr || ir_attr_ints(tr, "perm", perm, 2) != 2 || perm[0] != 1 ||
	    !(nz = mo_def(mo_peel_index(tr->in[0]), OP_NONZERO)))
		return NULL;
	return nz->in[0];
}

/* Is v the first output of split(t, axis=1), t [n,r]: the first column,
 * the indices along the mask's first axis (the tokens)? */
static int
first_column(const Node *n, const Value *v)
{
	return n->op == OP_SPLIT && n->in[0]->type.rank == 2 && mo_last_axis(n, "axis", 2, 0) && n->out[0] == v;
}

/* concat(split(t, axis=1)'s outputs in order, axis=1) is t: its input t,
 * or NULL (torch.where's (tok, pos) stacked back into index rows). */
static Value *
unsplit(const Node *c)
{
	Node *sp = c->nin > 0 ? mo_def(c->in[0], OP_SPLIT) : NULL;

	if (!sp || sp->nout != c->nin || !mo_last_axis(c, "axis", 2, 0) || sp->in[0]->type.rank != 2 ||
	    !mo_last_axis(sp, "axis", 2, 0))
		return NULL;
	for (int i = 0; i < c->nin; i++)
		if (c->in[i] != sp->out[i])
			return NULL;
	return sp->in[0];
}

/* The mask whose nonzero an index tensor is, through views and casts:
 * nonzero(m)'s rows transposed (index rows, of elements or of whole rows
 * of a [T] mask), or the indices along m's first axis (the tokens):
 * nonzero(m) of a [T] mask itself, its row 0 (torch.where(m)[0]), or the
 * first column of its transposed rows split (TorchScript's torch.where). */
static Value *
nz_mask(Value *v)
{
	Node *n, *nz;
	Value *t;
	int64_t z;

	v = mo_peel_index(v);
	if (!v || v->kind != V_RESULT)
		return NULL;
	n = v->def;
	if (n->op == OP_NONZERO)
		return n->in[0]->type.rank == 1 ? n->in[0] : NULL;
	if (n->op == OP_GATHER && !ir_attr_int(n, "axis", 0) && n->in[1]->type.rank == 0 &&
	    mo_const_ints(n->in[1], &z, 1) == 1 && z == 0 && (nz = mo_def(mo_peel_index(n->in[0]), OP_NONZERO)))
		return nz->in[0];
	if (first_column(n, v))
		return nz_rows(n->in[0]);
	if (n->op == OP_CONCAT && (t = unsplit(n)))
		return nz_rows(t);
	return nz_rows(v);
}

/* v = gather(flatten(w), tok * k + pos, axis=0) with tok, pos the columns
 * of torch.where(mask) (a split of its transposed nonzero): the elements of
 * w [T,k] the mask marks.  w, and in *mask the mask. */
static Value *
flat_picked(const Node *g, Value **mask)
{
	Node *add = mo_def(mo_peel_index(g->in[1]), OP_ADD), *mul, *sp;
	Value *w = mo_peel(g->in[0]);
	int64_t k;

	if (!add || w->type.rank != 2 || !ir_dim_is_static(w->type.dim[1]))
		return NULL;
	for (int i = 0; i < 2; i++)
		for (int j = 0; (mul = mo_def(mo_peel_index(add->in[i]), OP_MUL)) && j < 2; j++) {
			Value *tok = mo_peel_index(mul->in[j]), *pos = mo_peel_index(add->in[1 - i]);
			if (mo_const_ints(mul->in[1 - j], &k, 1) != 1 || k != w->type.dim[1] ||
			    !(sp = mo_def(tok, OP_SPLIT)) || sp->nout != 2 || sp->out[0] != tok || sp->out[1] != pos)
				continue;
			*mask = nz_mask(tok);
			return *mask && (*mask)->type.rank == 2 ? w : NULL;
		}
	return NULL;
}

/* v = gather(src, i, axis=0) or gather_nd(src, i): the rows (or, i [n,2],
 * the elements) of src a nonzero picks.  src, and in *mask the mask. */
static Value *
picked(Value *v, Value **mask)
{
	Node *n = mo_def(mo_peel(v), OP_GATHER);

	if (n && ir_attr_int(n, "axis", 0))
		return NULL;
	if (n && mo_def(mo_peel_index(n->in[1]), OP_ADD))
		return flat_picked(n, mask);
	if (!n && (!(n = mo_def(mo_peel(v), OP_GATHER_ND)) || ir_attr_int(n, "batch_dims", 0)))
		return NULL;
	*mask = nz_mask(n->in[1]);
	return *mask ? n->in[0] : NULL;
}

/* The routing weight of (token, e) for the picked rows: w = we[m] with we
 * the sum over k of rw * (ids == e) or where(ids == e, rw, 0), or w =
 * rw[ids == e].  rw [T,k] into x. */
static const char *
weight_of(Value *w, Expert *x, int64_t e, Value **ids)
{
	Value *m = NULL, *we = picked(w, &m), *rw = NULL;
	Node *rs, *n;

	if (!we || mask_expert(m, ids) != e)
		return "the routing weight is not read at the rows that chose the expert";
	if (we->type.rank == 2 && dtype_is_float(we->type.dt) && m->type.rank == 2) {
		rw = we;	/* rw[ids == e]: one weight per row, as each token picks e once */
	} else if ((rs = mo_def(mo_peel(we), OP_REDUCE_SUM)) && mo_last_axis(rs, "axes", 2, 0) &&
		   rs->in[0]->type.rank == 2) {
		Value *p = mo_peel_cast(rs->in[0]);
		if ((n = mo_def(p, OP_MUL))) {
			for (int i = 0; i < 2 && !rw; i++)
				if (mask_expert(mo_peel_index(n->in[i]), ids) == e)
					rw = n->in[1 - i];
		} else if ((n = mo_def(p, OP_WHERE)) && mask_expert(n->in[0], ids) == e && mo_is_fill(n->in[2], 0)) {
			rw = n->in[1];
		}
	}
	if (!rw || rw->type.rank != 2 || !*ids || rw->type.dim[1] != (*ids)->type.dim[1] || rw->type.dim[1] < 1)
		return "the routing weight is not the router's weight of the expert's (token, choice)";
	x->rw = mo_peel_cast(rw);
	x->kmul = rw->type.dim[1];
	return NULL;
}

/* c = y * w[n,1] with y = down(act(gate_up(x[m]))), m the mask of e; or
 * (the weight before the MLP: scale_input) y = down(act(gate_up(x[m] * w))). */
static const char *
contribution(Value *c, Expert *x, int64_t e, Value **ids)
{
	Value *o = c, *w = NULL, *rows, *src, *m = NULL;
	const char *why;
	int64_t se = -1;

	mo_scaled(c, &o, &w);
	if ((why = mo_mlp(o, x, &rows)))
		return why;
	if (!w && mo_scaled(rows, &rows, &w))
		x->scale_input = 1;
	if (!w)
		return "the expert's rows are scaled by no routing weight, before or after the MLP "
		       "(a moe scales each row by its own)";
	if ((why = weight_of(w, x, e, ids)))
		return why;
	if (!(src = picked(rows, &m)) || mask_expert(m, ids) != e || src->type.rank != 2)
		return "the expert's input rows are not the tokens that chose it";
	if (!x->flat && (mo_const_ints(x->sel, &se, 1) != 1 || x->sel->type.rank != 0 || se != e))
		return "the expert's stacked weights are not the ones its mask selects";
	x->x = mo_tokens(src, src->type.dim[0], src->type.dim[1]);
	return x->x ? NULL : "the expert's input rows are not the tokens";
}

/* The scatter of one expert's update: onto the running sum (scatter_nd, or
 * scatter_elements along the rows), or into zeros added onto it.  The
 * running sum into *acc; *add: the scatter adds rather than writes. */
static Node *
scatter(Value *v, Value **acc, int *add)
{
	Node *a = mo_def(v, OP_ADD), *sc = NULL;

	for (int i = 0; a && i < 2 && !sc; i++) {
		Node *s = mo_def(a->in[i], OP_SCATTER_ND);
		if ((s || (s = mo_def(a->in[i], OP_SCATTER_ELEMENTS))) && mo_is_fill(s->in[0], 0))
			sc = s, *acc = a->in[1 - i];
	}
	if (!a && !(sc = mo_def(v, OP_SCATTER_ND)))
		sc = mo_def(v, OP_SCATTER_ELEMENTS);
	if (!sc || (sc->op == OP_SCATTER_ELEMENTS && ir_attr_int(sc, "axis", 0)))
		return NULL;
	*add = a || !strcmp(ir_attr_str(sc, "reduction", "none"), "add");
	if (!a)
		*acc = sc->in[0];
	return nz_mask(sc->in[1]) ? sc : NULL;
}

/* One expert's update of the running sum v: the rows of its mask added,
 * or written back where they were read (out[m] = out[m] + y). */
static const char *
update(Value *v, Expert *x, int64_t *e, Value **ids, Value **acc)
{
	Value *u, *c = NULL, *m = NULL, *src;
	int adds = 0;
	Node *sc = scatter(v, acc, &adds), *add;

	if (!sc)
		return "the masked loop's sum is not a chain of scatters by the masks' rows, from zeros";
	if ((*e = mask_expert(nz_mask(sc->in[1]), ids)) < 0)
		return "the scattered rows are not the tokens that chose one expert (a mask of the "
		       "router's indices equal to it)";
	u = mo_uncut(sc->in[2]);
	if (adds) {
		c = u;
	} else if (!strcmp(ir_attr_str(sc, "reduction", "none"), "none") && (add = mo_def(u, OP_ADD))) {
		for (int i = 0; i < 2 && !c; i++)
			if ((src = picked(add->in[i], &m)) && mo_peel(src) == mo_peel(*acc) &&
			    mask_expert(m, ids) == *e)
				c = add->in[1 - i];
	}
	if (!c)
		return "the expert's rows are neither added onto the sum nor written back where "
		       "they were read (out[m] = out[m] + y)";
	return contribution(c, x, *e, ids);
}

int
mo_is_masked(Value *sum)
{
	Value *acc;
	int add;

	return scatter(sum, &acc, &add) != NULL;
}

/* The loop's updates, last first, back to the zeros it starts from; every
 * expert 0..N-1 once, all with the same activation, tokens and weights. */
const char *
mo_masked(Value *sum, Moe *mo)
{
	typedef struct {
		int64_t e;
		Value *gu, *dn;
	} Step;
	Module *mod = sum->graph->m;
	Value *v = sum, *acc, *ids = NULL;
	VEC(Step) st = {0};
	int64_t n;
	const char *why = NULL;

	for (; !why; v = acc) {
		Expert x;
		int64_t e;

		memset(&x, 0, sizeof x);
		if (!(why = update(v, &x, &e, &ids, &acc))) {
			if (st.n && !mo_same_expert(&mo->x, &x))
				why = "the masked loop's experts do not agree (activation, tokens or routing weights)";
			mo->x = x;
			vec_push(&st, ((Step){e, x.wgu, x.wdn}));
			if (mo_is_fill(acc, 0))
				break;
		}
	}
	n = (int64_t)st.n;
	if (!why) {
		mo->gu_e = arena_array(mod->arena, Value *, n);
		mo->dn_e = arena_array(mod->arena, Value *, n);
		for (int64_t i = 0; i < n && !why; i++)
			if (st.v[i].e >= n || mo->gu_e[st.v[i].e])
				why = "the masked loop does not run each of its experts 0..N-1 once";
			else
				mo->gu_e[st.v[i].e] = st.v[i].gu, mo->dn_e[st.v[i].e] = st.v[i].dn;
	}
	vec_free(&st);
	if (why)
		return why;
	if (!mo->x.flat && mo->x.wgu->type.dim[0] != n)
		return "the masked loop does not run every expert of its stacked weights";
	mo->nslot = (int)n;
	mo->masked = 1;
	mo->ids = ids;
	return NULL;
}
