/*
 * k_route.c — the MoE router: scores, optional expert groups, top-k and the
 * routing weights, one warp per token (4 tokens per CTA of 128 threads).
 *
 *	lane L holds experts x = L + 32j (j < cdiv(E,32)) in registers
 *	scores:  softmax (warp max, warp sum), sigmoid, or the logits
 *	groups:  each group's best (or best two) selection score, the best
 *	         topk_group groups kept, the others' experts set to group_fill
 *	top-k:   k rounds of a warp arg-max (value first, NaN largest, then
 *	         the lower expert), the winner marked taken by its lane (spec
 *	         bfly: as 64-bit keys in that order, a shfl.bfly maximum that
 *	         every lane gets, no broadcast or barrier a round; spec redux:
 *	         two redux.sync a round, and groups of whole lane slots scored
 *	         by the same maxima in registers: groups_redux)
 *	weights: lane j < k writes choice j (sparsemixer: one warp sum per
 *	         choice over the experts within its threshold)
 *	counts:  spec count_ch: lane j also adds 1 to the grid permute's
 *	         count of its expert and chunk (atomics; k_permute.c's hist)
 *
 * Cross-lane steps are shfl.sync.up scans (lane 31 ends with the whole
 * warp's result) broadcast through shared memory and a CTA barrier; every
 * warp runs the same sequence of barriers (tokens past T compute on token
 * T-1 and store nothing).  Each broadcast has its own shared slot, so no
 * slot is rewritten after a barrier.  Exactly ir/eval_moe.c's route_token,
 * with f32 arithmetic where it uses double (group scores stay in f64).
 */
#define CG_INTERNAL
#include <math.h>
#include <string.h>

#include "codegen.h"

#define WARPS 4
#define MAXJ 16		/* E <= 512 */
#define MAXK 16
#define BIG 0x7fffffff	/* the index of "no candidate" */

typedef struct R R;
struct R {
	CgFn *f;
	CgRouteSpec s;
	int J;
	/* shared memory: [slot][warp] i32 broadcasts, then groups */
	int nw;			/* warps of the CTA: one token each */
	int slots, nslot, gsel, gscore, gkeep, smem;
	int sids;		/* CgRouteIo.sids */
	LLVMValueRef lane, warp, tok, tokc, T;
	LLVMValueRef logits, selbias, weights, ids;
	LLVMValueRef hist;	/* count_ch: the grid permute's count table */
	LLVMValueRef l[MAXJ], sc[MAXJ], sel[MAXJ], ok[MAXJ];	/* per lane */
};

void
cg_route_default(CgRouteSpec *s)
{
	memset(s, 0, sizeof *s);
	s->E = 8;
	s->k = 2;
	s->router = CG_ROUTER_SOFTMAX;
	s->scale = 1.0;
	s->n_group = s->topk_group = 1;
	s->group_score = CG_GROUP_MAX;
	s->group_fill = -INFINITY;
	s->jitter_eps = 0.01;
	s->logits_dt = s->selbias_dt = DT_F32;
	s->m_per_t = 1;
}

static int
io_float(DType t)
{
	return t == DT_F32 || t == DT_BF16 || t == DT_F16;
}

static int
check(const CgRouteSpec *s, Diag *d)
{
	if (s->E < 1 || s->E > 32 * MAXJ)
		return diag_error(d, LOC_NONE, "route: %d experts (the router kernel takes 1..%d)",
				  s->E, 32 * MAXJ);
	if (s->k < 1 || s->k > MAXK || s->k > s->E)
		return diag_error(d, LOC_NONE, "route: k = %d (needs 1..min(%d, E = %d))", s->k, MAXK,
				  s->E);
	if ((unsigned)s->router > CG_ROUTER_SPARSEMIXER || (unsigned)s->group_score > CG_GROUP_TOP2)
		return diag_error(d, LOC_NONE, "route: unknown router or group score");
	if (s->n_group < 1 || s->E % s->n_group || s->topk_group < 1 || s->topk_group > s->n_group)
		return diag_error(d, LOC_NONE, "route: n_group = %d must divide E = %d and topk_group = %d "
				  "be in 1..n_group", s->n_group, s->E, s->topk_group);
	if (!io_float(s->logits_dt) || (s->has_selbias && !io_float(s->selbias_dt)))
		return diag_error(d, LOC_NONE, "route: logits %s, selection bias %s (need f32, bf16 or f16)",
				  dtype_name(s->logits_dt), dtype_name(s->selbias_dt));
	if (!isfinite(s->scale))
		return diag_error(d, LOC_NONE, "route: the scale is not finite");
	if (isnan(s->group_fill) || !(s->jitter_eps >= 0) ||
	    (s->router == CG_ROUTER_SPARSEMIXER && (s->n_group > 1 || s->has_selbias)))
		return diag_error(d, LOC_NONE, "route: group_fill NaN, jitter_eps < 0, or a sparsemixer "
				  "with groups or a selection bias");
	return 0;
}

int
cg_route_spec(const Node *n, CgRouteSpec *s, Diag *d)
{
	const Type *l = &n->in[0]->type;
	IrRouteAttrs ra;

	cg_route_default(s);
	if (n->op != OP_ROUTE || l->rank != 2 || !ir_dim_is_static(l->dim[1]))
		return diag_error(d, n->loc, "route: wants a route node with logits [T,E], E static");
	s->E = (int)l->dim[1];
	ir_route_attrs(n, &ra);
	s->k = (int)ra.k;
	s->router = ra.router == IR_ROUTER_SIGMOID ? CG_ROUTER_SIGMOID
		  : ra.router == IR_ROUTER_TOPK_SOFTMAX ? CG_ROUTER_TOPK_SOFTMAX
		  : ra.router == IR_ROUTER_SPARSEMIXER ? CG_ROUTER_SPARSEMIXER : CG_ROUTER_SOFTMAX;
	s->group_fill = ra.group_fill;
	s->jitter_eps = ra.jitter_eps;
	if (ra.router == IR_ROUTER_UNKNOWN)
		return diag_error(d, n->loc, "route: unknown router '%s'", ra.router_name);
	s->renorm = ra.renorm;
	s->scale = ra.scale;
	s->n_group = (int)ra.n_group;
	s->topk_group = (int)ra.topk_group;
	if (ra.group_score == IR_GROUP_UNKNOWN)
		return diag_error(d, n->loc, "route: group_score must be max or top2, not %s",
				  ra.group_score_name);
	s->group_score = ra.group_score == IR_GROUP_TOP2 ? CG_GROUP_TOP2 : CG_GROUP_MAX;
	s->logits_dt = l->dt;
	s->has_selbias = n->nin > 1 && n->in[1];
	if (s->has_selbias)
		s->selbias_dt = n->in[1]->type.dt;
	if (check(s, d) < 0) {
		d->nerror--;	/* reported again, with the node */
		return diag_error(d, n->loc, "%s", d->last);
	}
	return 0;
}

/* ---- shared memory ---- */

/* A fresh broadcast slot of this warp (byte offset); each is written once. */
static int
new_slot(R *r)
{
	return r->slots + 4 * r->nw * r->nslot++;
}

static LLVMValueRef
warp_addr(R *r, int base, LLVMValueRef elem, int esize)
{
	CgFn *f = r->f;

	/* [elem][warp] */
	return cg_sptr(f, cg_addi(f, cg_muli(f, cg_add(f, cg_muli(f, elem, r->nw), r->warp), esize), base));
}

static LLVMValueRef
slot_addr(R *r, int slot)
{
	return warp_addr(r, slot, cg_i32(r->f, 0), 4);
}

static LLVMValueRef
is_lane(R *r, int n)
{
	return LLVMBuildICmp(r->f->B, LLVMIntEQ, r->lane, cg_i32(r->f, n), "");
}

/* The CTA barrier after which a warp reads what its lanes wrote to its
 * slots (warp_sync: only its own lanes wrote them, a warp sync will do). */
static void
sync_(R *r)
{
	if (r->s.warp_sync)
		cg_syncwarp(r->f);
	else
		cg_barrier(r->f);
}

/* Lane 31 publishes v (i32 or f32) in a new slot; after the barrier every
 * lane reads it (warp_sync: by shuffles, the bits moved, no slot). */
static LLVMValueRef
broadcast31(R *r, LLVMValueRef v, int *slotp)
{
	CgFn *f = r->f;
	int slot;
	LLVMTypeRef t = LLVMTypeOf(v);
	CgIf c;

	if (r->s.warp_sync && !slotp && r->s.redux) {	/* the largest of lane 31's bits and 0s */
		LLVMValueRef b = cg_select(f, is_lane(r, 31), LLVMBuildBitCast(f->B, v, f->ti32, ""), cg_i32(f, 0));
		return LLVMBuildBitCast(f->B, cg_redux_umax(f, b), t, "");
	}
	if (r->s.warp_sync && !slotp)
		return LLVMBuildBitCast(f->B, cg_bcast31(f, LLVMBuildBitCast(f->B, v, f->tf32, "")), t, "");
	slot = new_slot(r);

	cg_if(f, &c, is_lane(r, 31));
	cg_sstore(f, v, slot_addr(r, slot), 4);
	cg_endif(f, &c);
	sync_(r);
	if (slotp)
		*slotp = slot;
	return cg_sload(f, t, slot_addr(r, slot), 4);
}

/* ---- warp scans ---- */

static LLVMValueRef
shfl_f32(CgFn *f, LLVMValueRef v, int d)
{
	LLVMValueRef i = LLVMBuildBitCast(f->B, v, f->ti32, "");

	return LLVMBuildBitCast(f->B, cg_shfl_up(f, i, d), f->tf32, "");
}

static LLVMValueRef
isnan_(CgFn *f, LLVMValueRef x)
{
	return LLVMBuildFCmp(f->B, LLVMRealUNO, x, x, "");
}

/* a before b in ev_order's largest-first order: NaN largest, then the lower index */
static LLVMValueRef
better(CgFn *f, LLVMValueRef av, LLVMValueRef ai, LLVMValueRef bv, LLVMValueRef bi)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef an = isnan_(f, av), bn = isnan_(f, bv);
	LLVMValueRef gt = LLVMBuildOr(B, LLVMBuildAnd(B, an, LLVMBuildNot(B, bn, ""), ""),
				      LLVMBuildFCmp(B, LLVMRealOGT, av, bv, ""), "");
	LLVMValueRef eq = LLVMBuildOr(B, LLVMBuildAnd(B, an, bn, ""),
				      LLVMBuildFCmp(B, LLVMRealOEQ, av, bv, ""), "");

	return LLVMBuildOr(B, gt, LLVMBuildAnd(B, eq, cg_lt(f, ai, bi), ""), "");
}

/* The warp's maximum (NaN wins), in every lane. */
static LLVMValueRef
warp_max(R *r, LLVMValueRef v)
{
	CgFn *f = r->f;

	for (int d = 1; d < 32; d *= 2) {
		LLVMValueRef o = shfl_f32(f, v, d);
		LLVMValueRef take = LLVMBuildOr(f->B, isnan_(f, o), LLVMBuildFCmp(f->B, LLVMRealOGT, o, v, ""), "");
		take = LLVMBuildAnd(f->B, take, LLVMBuildICmp(f->B, LLVMIntUGE, r->lane, cg_i32(f, d), ""), "");
		v = cg_select(f, take, o, v);
	}
	return broadcast31(r, v, NULL);
}

/* The warp's sum, in a fixed order, in every lane. */
static LLVMValueRef
warp_sum(R *r, LLVMValueRef v)
{
	CgFn *f = r->f;

	for (int d = 1; d < 32; d *= 2) {
		LLVMValueRef o = shfl_f32(f, v, d);
		o = cg_select(f, cg_lt(f, r->lane, cg_i32(f, d)), cg_f32(f, 0), o);
		v = LLVMBuildFAdd(f->B, o, v, "");
	}
	return broadcast31(r, v, NULL);
}

/* The warp's best candidate's index (value first, then the lower index), and its slot. */
static LLVMValueRef
warp_argbest(R *r, LLVMValueRef v, LLVMValueRef i, int *slot)
{
	CgFn *f = r->f;

	for (int d = 1; d < 32; d *= 2) {
		LLVMValueRef ov = shfl_f32(f, v, d), oi = cg_shfl_up(f, i, d);
		LLVMValueRef take = LLVMBuildAnd(f->B, better(f, ov, oi, v, i),
						  LLVMBuildICmp(f->B, LLVMIntUGE, r->lane, cg_i32(f, d), ""), "");
		v = cg_select(f, take, ov, v);
		i = cg_select(f, take, oi, i);
	}
	return broadcast31(r, i, slot);
}

/* ---- the steps ---- */

static LLVMValueRef
expert(R *r, int j)
{
	return cg_addi(r->f, r->lane, 32 * j);
}

static void
load_logits(R *r)
{
	CgFn *f = r->f;
	LLVMValueRef row = cg_muli(f, cg_sext64(f, r->tokc), r->s.E);

	for (int j = 0; j < r->J; j++) {
		LLVMValueRef x = expert(r, j);
		r->ok[j] = cg_lt(f, x, cg_i32(f, r->s.E));
		x = cg_min(f, x, cg_i32(f, r->s.E - 1));
		r->l[j] = cg_load_dt(f, r->s.logits_dt, r->logits, cg_add(f, row, cg_sext64(f, x)));
	}
}

static LLVMValueRef
neg_inf(CgFn *f)
{
	return cg_f32(f, -INFINITY);
}

static void
scores(R *r)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;

	if (r->s.router == CG_ROUTER_SOFTMAX) {
		LLVMValueRef m = neg_inf(f), sum = cg_f32(f, 0), e[MAXJ];
		for (int j = 0; j < r->J; j++) {
			LLVMValueRef take = LLVMBuildOr(B, isnan_(f, r->l[j]),
							LLVMBuildFCmp(B, LLVMRealOGT, r->l[j], m, ""), "");
			m = cg_select(f, LLVMBuildAnd(B, take, r->ok[j], ""), r->l[j], m);
		}
		m = warp_max(r, m);
		for (int j = 0; j < r->J; j++) {
			e[j] = cg_exp(f, LLVMBuildFSub(B, r->l[j], m, ""));
			sum = LLVMBuildFAdd(B, sum, cg_select(f, r->ok[j], e[j], cg_f32(f, 0)), "");
		}
		sum = warp_sum(r, sum);
		for (int j = 0; j < r->J; j++)
			r->sc[j] = LLVMBuildFDiv(B, e[j], sum, "");
	} else {
		for (int j = 0; j < r->J; j++)
			r->sc[j] = r->s.router == CG_ROUTER_SIGMOID ? cg_sigmoid(f, r->l[j]) : r->l[j];
	}
	for (int j = 0; j < r->J; j++) {
		r->sel[j] = r->sc[j];
		if (r->s.has_selbias) {
			LLVMValueRef x = cg_min(f, expert(r, j), cg_i32(f, r->s.E - 1));
			LLVMValueRef b = cg_load_dt(f, r->s.selbias_dt, r->selbias, cg_sext64(f, x));
			r->sel[j] = LLVMBuildFAdd(B, r->sel[j], b, "");
		}
	}
}

/* Group h's score o ranks before group g's, mine (f64): larger, a NaN above
 * any number, or equal (NaN with NaN) and h the lower group (h, g: i32). */
static LLVMValueRef
score_before(CgFn *f, LLVMValueRef o, LLVMValueRef mine, LLVMValueRef h, LLVMValueRef g)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef on = LLVMBuildFCmp(B, LLVMRealUNO, o, o, ""), mn = LLVMBuildFCmp(B, LLVMRealUNO, mine, mine, "");
	LLVMValueRef gt = LLVMBuildOr(B, LLVMBuildAnd(B, on, LLVMBuildNot(B, mn, ""), ""),
				      LLVMBuildFCmp(B, LLVMRealOGT, o, mine, ""), "");
	LLVMValueRef eq = LLVMBuildOr(B, LLVMBuildAnd(B, on, mn, ""), LLVMBuildFCmp(B, LLVMRealOEQ, o, mine, ""), "");

	return LLVMBuildOr(B, gt, LLVMBuildAnd(B, eq, cg_lt(f, h, g), ""), "");
}

/*
 * Groups: lanes g < n_group (strided) find their group's best (and second)
 * selection score serially, in f64 as the reference sums them; each group's
 * rank among the groups decides whether it is kept.
 */
static void
groups(R *r)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	int E = r->s.E, G = r->s.n_group, gsize = E / G;
	LLVMTypeRef tf64 = LLVMDoubleTypeInContext(f->C);
	CgLoop lg, lx;
	CgIf c;

	for (int j = 0; j < r->J; j++) {
		cg_if(f, &c, r->ok[j]);
		cg_sstore(f, r->sel[j], warp_addr(r, r->gsel, expert(r, j), 4), 4);
		cg_endif(f, &c);
	}
	sync_(r);
	LLVMValueRef g = cg_loop(f, &lg, r->lane, cg_i32(f, G), cg_i32(f, 32));
	{
		LLVMValueRef bv = cg_var(f, f->tf32, neg_inf(f)), bi = cg_var(f, f->ti32, cg_i32(f, BIG));
		LLVMValueRef sv = cg_var(f, f->tf32, neg_inf(f)), si = cg_var(f, f->ti32, cg_i32(f, BIG));
		LLVMValueRef x0 = cg_muli(f, g, gsize), score;
		LLVMValueRef x = cg_loop(f, &lx, x0, cg_addi(f, x0, gsize), cg_i32(f, 1));
		{
			LLVMValueRef v = cg_sload(f, f->tf32, warp_addr(r, r->gsel, x, 4), 4);
			LLVMValueRef b1 = better(f, v, x, cg_get(f, bv), cg_get(f, bi));
			LLVMValueRef b2 = better(f, v, x, cg_get(f, sv), cg_get(f, si));
			/* new best: the old best becomes second; else maybe a new second */
			cg_set(f, sv, cg_select(f, b1, cg_get(f, bv), cg_select(f, b2, v, cg_get(f, sv))));
			cg_set(f, si, cg_select(f, b1, cg_get(f, bi), cg_select(f, b2, x, cg_get(f, si))));
			cg_set(f, bv, cg_select(f, b1, v, cg_get(f, bv)));
			cg_set(f, bi, cg_select(f, b1, x, cg_get(f, bi)));
		}
		cg_endloop(f, &lx);
		score = LLVMBuildFPExt(B, cg_get(f, bv), tf64, "");
		if (r->s.group_score == CG_GROUP_TOP2 && gsize > 1)
			score = LLVMBuildFAdd(B, score, LLVMBuildFPExt(B, cg_get(f, sv), tf64, ""), "");
		cg_sstore(f, score, warp_addr(r, r->gscore, g, 8), 8);
	}
	cg_endloop(f, &lg);
	sync_(r);
	g = cg_loop(f, &lg, r->lane, cg_i32(f, G), cg_i32(f, 32));
	{
		LLVMValueRef rank = cg_var(f, f->ti32, cg_i32(f, 0));
		LLVMValueRef mine = cg_sload(f, tf64, warp_addr(r, r->gscore, g, 8), 8);
		LLVMValueRef h = cg_loop(f, &lx, cg_i32(f, 0), cg_i32(f, G), cg_i32(f, 1));
		{
			LLVMValueRef o = cg_sload(f, tf64, warp_addr(r, r->gscore, h, 8), 8);
			LLVMValueRef before = score_before(f, o, mine, h, g);
			cg_set(f, rank, cg_add(f, cg_get(f, rank), LLVMBuildZExt(B, before, f->ti32, "")));
		}
		cg_endloop(f, &lx);
		LLVMValueRef keep = cg_lt(f, cg_get(f, rank), cg_i32(f, r->s.topk_group));
		cg_sstore(f, LLVMBuildZExt(B, keep, f->ti32, ""), warp_addr(r, r->gkeep, g, 4), 4);
	}
	cg_endloop(f, &lg);
	sync_(r);
	for (int j = 0; j < r->J; j++) {
		LLVMValueRef x = cg_min(f, expert(r, j), cg_i32(f, E - 1));
		LLVMValueRef keep = cg_sload(f, f->ti32, warp_addr(r, r->gkeep, cg_udiv(f, x, cg_i32(f, gsize)), 4), 4);
		keep = LLVMBuildICmp(B, LLVMIntNE, keep, cg_i32(f, 0), "");
		r->sel[j] = cg_select(f, keep, r->sel[j], cg_f32(f, (float)r->s.group_fill));
	}
}

/* Value of lane-held array a at slot j (runtime), by a select chain. */
static LLVMValueRef
pick(R *r, LLVMValueRef *a, LLVMValueRef j)
{
	CgFn *f = r->f;
	LLVMValueRef v = a[0];

	for (int q = 1; q < r->J; q++)
		v = cg_select(f, LLVMBuildICmp(f->B, LLVMIntEQ, j, cg_i32(f, q), ""), a[q], v);
	return v;
}

/*
 * k rounds of arg-max.  Round n's winner lands in slot id[n]; its owner lane
 * writes its logit and score to slots lg[n], sc[n] (read after the loop).
 */
static void
select_topk(R *r, int *id, int *lg, int *sc)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	LLVMValueRef taken = cg_i32(f, 0);

	for (int n = 0; n < r->s.k; n++) {
		LLVMValueRef bv = neg_inf(f), bi = cg_i32(f, BIG), w, own, j;
		CgIf c;
		for (int q = 0; q < r->J; q++) {
			LLVMValueRef free_ = LLVMBuildICmp(B, LLVMIntEQ, cg_and(f, taken, 1 << q), cg_i32(f, 0), "");
			LLVMValueRef x = expert(r, q);
			LLVMValueRef take = LLVMBuildAnd(B, LLVMBuildAnd(B, r->ok[q], free_, ""),
							 better(f, r->sel[q], x, bv, bi), "");
			bv = cg_select(f, take, r->sel[q], bv);
			bi = cg_select(f, take, x, bi);
		}
		w = warp_argbest(r, bv, bi, &id[n]);
		own = LLVMBuildICmp(B, LLVMIntEQ, cg_and(f, w, 31), r->lane, "");
		j = cg_shr(f, w, 5);
		taken = LLVMBuildOr(B, taken, cg_select(f, own, LLVMBuildShl(B, cg_i32(f, 1), j, ""),
							cg_i32(f, 0)), "");
		lg[n] = new_slot(r);
		sc[n] = new_slot(r);
		cg_if(f, &c, own);
		cg_sstore(f, pick(r, r->l, j), slot_addr(r, lg[n]), 4);
		cg_sstore(f, pick(r, r->sc, j), slot_addr(r, sc[n]), 4);
		cg_endif(f, &c);
	}
	sync_(r);
}

/*
 * The selection key of score v of expert x (i64): larger is better in
 * better()'s order.  The high word orders the values (NaN largest, -0 as
 * +0: the bits of a positive value with the sign bit set, a negative one's
 * complemented), the low word is ~x (the lower expert wins a tie); 0 is
 * below every key (its high word would be a NaN's).
 */
static LLVMValueRef
sel_key(R *r, LLVMValueRef v, LLVMValueRef x)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	LLVMTypeRef t64 = LLVMInt64TypeInContext(f->C);
	LLVMValueRef b, hi, lo;

	v = cg_select(f, LLVMBuildFCmp(B, LLVMRealOEQ, v, cg_f32(f, 0), ""), cg_f32(f, 0), v);
	b = LLVMBuildBitCast(B, v, f->ti32, "");
	hi = cg_select(f, cg_lt(f, b, cg_i32(f, 0)), LLVMBuildNot(B, b, ""), LLVMBuildOr(B, b, cg_i32(f, INT32_MIN), ""));
	hi = cg_select(f, isnan_(f, v), cg_i32(f, -1), hi);
	lo = LLVMBuildNot(B, x, "");
	return LLVMBuildOr(B, LLVMBuildShl(B, LLVMBuildZExt(B, hi, t64, ""), LLVMConstInt(t64, 32, 0), ""),
			   LLVMBuildZExt(B, lo, t64, ""), "");
}

static LLVMValueRef
umax64(CgFn *f, LLVMValueRef a, LLVMValueRef b)
{
	return cg_select(f, LLVMBuildICmp(f->B, LLVMIntUGT, a, b, ""), a, b);
}

/* The warp's largest key (i64) in every lane: shfl.bfly steps of both words
 * (the maximum of a total order: the same whatever the order of steps);
 * spec redux: two redux.sync.max.u32, the same key. */
static LLVMValueRef
warp_max_key(R *r, LLVMValueRef k)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	LLVMTypeRef t64 = LLVMInt64TypeInContext(f->C);
	LLVMValueRef c32 = LLVMConstInt(t64, 32, 0);

	if (r->s.redux) {	/* the largest high word, then the largest low word under it */
		LLVMValueRef hi = LLVMBuildTrunc(B, LLVMBuildLShr(B, k, c32, ""), f->ti32, "");
		LLVMValueRef mh = cg_redux_umax(f, hi);
		LLVMValueRef lo = cg_select(f, LLVMBuildICmp(B, LLVMIntEQ, hi, mh, ""),
					    LLVMBuildTrunc(B, k, f->ti32, ""), cg_i32(f, 0));
		return LLVMBuildOr(B, LLVMBuildShl(B, LLVMBuildZExt(B, mh, t64, ""), c32, ""),
				   LLVMBuildZExt(B, cg_redux_umax(f, lo), t64, ""), "");
	}
	for (int m = 16; m >= 1; m /= 2) {
		LLVMValueRef lo = cg_shfl_xor(f, LLVMBuildTrunc(B, k, f->ti32, ""), m);
		LLVMValueRef hi = cg_shfl_xor(f, LLVMBuildTrunc(B, LLVMBuildLShr(B, k, c32, ""), f->ti32, ""), m);
		LLVMValueRef o = LLVMBuildOr(B, LLVMBuildShl(B, LLVMBuildZExt(B, hi, t64, ""), c32, ""),
					     LLVMBuildZExt(B, lo, t64, ""), "");
		k = umax64(f, k, o);
	}
	return k;
}

/* The score of key k (sel_key's inverse, but -0 as +0 and a NaN as 0x7fffffff). */
static LLVMValueRef
key_value(R *r, LLVMValueRef k)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	LLVMValueRef hi = LLVMBuildTrunc(B, LLVMBuildLShr(B, k, LLVMConstInt(LLVMTypeOf(k), 32, 0), ""), f->ti32, "");
	LLVMValueRef b = cg_select(f, cg_lt(f, hi, cg_i32(f, 0)), cg_and(f, hi, INT32_MAX), LLVMBuildNot(B, hi, ""));

	return LLVMBuildBitCast(B, b, f->tf32, "");
}

static LLVMValueRef
umin64(CgFn *f, LLVMValueRef a, LLVMValueRef b)
{
	return cg_select(f, LLVMBuildICmp(f->B, LLVMIntULT, a, b, ""), a, b);
}

/* groups() where a group is whole lane slots (E / n_group a multiple of 32,
 * E <= 256) and the spec has redux: a group's best and second keys by warp maxima
 * (sel_key's order is better()'s), its score from their values, each
 * group's rank from every group's score in registers: no shared memory, no
 * sync, no serial walk.  The scores differ from groups()' only in a zero's
 * sign and a NaN's payload, which no comparison of the ranks sees: the same
 * groups kept. */
static void
groups_redux(R *r)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	int G = r->s.n_group, per = r->s.E / G / 32;
	LLVMTypeRef t64 = LLVMInt64TypeInContext(f->C), tf64 = LLVMDoubleTypeInContext(f->C);
	LLVMValueRef zero = LLVMConstInt(t64, 0, 0), score[32 * MAXJ], keep[32 * MAXJ];

	for (int g = 0; g < G; g++) {
		LLVMValueRef b1 = zero, b2 = zero, w1, w2;
		for (int j = g * per; j < (g + 1) * per; j++) {
			LLVMValueRef k = sel_key(r, r->sel[j], expert(r, j));
			b2 = umax64(f, b2, umin64(f, b1, k));
			b1 = umax64(f, b1, k);
		}
		w1 = warp_max_key(r, b1);
		w2 = warp_max_key(r, cg_select(f, LLVMBuildICmp(B, LLVMIntEQ, b1, w1, ""), b2, b1));
		score[g] = LLVMBuildFPExt(B, key_value(r, w1), tf64, "");
		if (r->s.group_score == CG_GROUP_TOP2)
			score[g] = LLVMBuildFAdd(B, score[g], LLVMBuildFPExt(B, key_value(r, w2), tf64, ""), "");
	}
	for (int g = 0; g < G; g++) {
		LLVMValueRef rank = cg_i32(f, 0);
		for (int h = 0; h < G; h++)
			if (h != g)
				rank = cg_add(f, rank, LLVMBuildZExt(B, score_before(f, score[h], score[g],
										    cg_i32(f, h), cg_i32(f, g)),
								     f->ti32, ""));
		keep[g] = cg_lt(f, rank, cg_i32(f, r->s.topk_group));
	}
	for (int j = 0; j < r->J; j++)
		r->sel[j] = cg_select(f, keep[j / per], r->sel[j], cg_f32(f, (float)r->s.group_fill));
}

/*
 * select_topk with the spec's bfly: the lane's candidates as keys (0 once
 * taken or past E), k rounds of the lane's largest and the warp's
 * (warp_max_key, in every lane: no broadcast, no barrier), the winner's
 * owner zeroes its key.  The same slots as select_topk: lane 0 writes
 * the winner to id[n], its owner the logit and score; one barrier at the
 * end.
 */
static void
select_topk_bfly(R *r, int *id, int *lg, int *sc)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	LLVMTypeRef t64 = LLVMInt64TypeInContext(f->C);
	LLVMValueRef key[MAXJ], zero = LLVMConstInt(t64, 0, 0);

	for (int q = 0; q < r->J; q++)
		key[q] = cg_select(f, r->ok[q], sel_key(r, r->sel[q], expert(r, q)), zero);
	for (int n = 0; n < r->s.k; n++) {
		LLVMValueRef best = key[0], w, own, j;
		CgIf c;
		for (int q = 1; q < r->J; q++)
			best = umax64(f, best, key[q]);
		best = warp_max_key(r, best);
		w = LLVMBuildNot(B, LLVMBuildTrunc(B, best, f->ti32, ""), "");
		own = LLVMBuildICmp(B, LLVMIntEQ, cg_and(f, w, 31), r->lane, "");
		j = cg_shr(f, w, 5);
		for (int q = 0; q < r->J; q++)
			key[q] = cg_select(f, LLVMBuildAnd(B, own, LLVMBuildICmp(B, LLVMIntEQ, j, cg_i32(f, q), ""), ""),
					   zero, key[q]);
		id[n] = new_slot(r);
		lg[n] = new_slot(r);
		sc[n] = new_slot(r);
		cg_if(f, &c, is_lane(r, 0));
		cg_sstore(f, w, slot_addr(r, id[n]), 4);
		cg_endif(f, &c);
		cg_if(f, &c, own);
		cg_sstore(f, pick(r, r->l, j), slot_addr(r, lg[n]), 4);
		cg_sstore(f, pick(r, r->sc, j), slot_addr(r, sc[n]), 4);
		cg_endif(f, &c);
	}
	sync_(r);
}

/*
 * Sparsemixer's weight of choice n (ir/eval_moe.c's sparsemixer_weight):
 * 1 / the warp's sum of exp(l - m) over the experts not chosen before n
 * whose (m - l) / max(|l|, m), rounded to the logits' dtype, is at most
 * 2 eps; m is choice n's logit.
 */
static LLVMValueRef
sparsemixer_weight(R *r, int n, const int *id, const int *lg)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	DType dt = r->s.logits_dt;
	LLVMValueRef m = cg_sload(f, f->tf32, slot_addr(r, lg[n]), 4), prev[MAXK], sum = cg_f32(f, 0);
	LLVMValueRef thr = cg_round_dt(f, cg_f32(f, (float)(2 * r->s.jitter_eps)), dt);

	for (int q = 0; q < n; q++)
		prev[q] = cg_sload(f, f->ti32, slot_addr(r, id[q]), 4);
	for (int j = 0; j < r->J; j++) {
		LLVMValueRef use = r->ok[j], l = r->l[j], a = cg_fabs(f, l);
		for (int q = 0; q < n; q++)
			use = LLVMBuildAnd(B, use, LLVMBuildICmp(B, LLVMIntNE, expert(r, j), prev[q], ""), "");
		LLVMValueRef fac = cg_select(f, LLVMBuildFCmp(B, LLVMRealOGT, a, m, ""), a, m);
		LLVMValueRef d = cg_round_dt(f, LLVMBuildFSub(B, m, l, ""), dt);
		LLVMValueRef ratio = cg_round_dt(f, LLVMBuildFDiv(B, d, fac, ""), dt);
		use = LLVMBuildAnd(B, use, LLVMBuildFCmp(B, LLVMRealULE, ratio, thr, ""), "");
		sum = LLVMBuildFAdd(B, sum, cg_select(f, use, cg_exp(f, LLVMBuildFSub(B, l, m, "")),
						      cg_f32(f, 0)), "");
	}
	return LLVMBuildFDiv(B, cg_f32(f, 1), warp_sum(r, sum), "");
}

/*
 * The grid permute's count (k_permute.c, NAME_count's hist[x][c]) of this
 * lane's slot s = tok k + lane: hist[id G + s / CH] += 1, G = (T k + CH) /
 * CH chunks.  Integer adds: the same counts in any order, so the atomics
 * leave the sort's bits alone; the table must be 0 at launch.
 */
static void
count(R *r, LLVMValueRef id)
{
	CgFn *f = r->f;
	LLVMValueRef ch = cg_i32(f, r->s.count_ch), s = cg_add(f, cg_muli(f, r->tok, r->s.k), r->lane);
	LLVMValueRef G = cg_udiv(f, cg_addi(f, cg_muli(f, r->T, r->s.k), r->s.count_ch), ch);
	LLVMValueRef at = cg_add(f, cg_mul(f, id, G), cg_udiv(f, s, ch));

	(void)cg_atom_add(f, cg_gep(f, r->hist, cg_sext64(f, at), 4), cg_i32(f, 1));
}

/* Weights of the k choices; lane n < k stores choice n. */
static void
store(R *r, const int *id, const int *lg, const int *sc)
{
	CgFn *f = r->f;
	LLVMBuilderRef B = f->B;
	int k = r->s.k;
	LLVMValueRef w[MAXK] = {0}, sum = cg_f32(f, 0), m = neg_inf(f), mine_w, mine_i;
	LLVMValueRef at = cg_add(f, cg_muli(f, cg_sext64(f, r->tokc), k),
				 cg_sext64(f, cg_min(f, r->lane, cg_i32(f, k - 1))));
	CgIf c;

	for (int n = 0; n < k; n++) {
		LLVMValueRef l = cg_sload(f, f->tf32, slot_addr(r, lg[n]), 4);
		w[n] = cg_sload(f, f->tf32, slot_addr(r, sc[n]), 4);
		if (r->s.router == CG_ROUTER_TOPK_SOFTMAX) {
			w[n] = l;	/* the max of the chosen logits first; fmax skips NaN */
			m = cg_select(f, LLVMBuildFCmp(B, LLVMRealOGT, l, m, ""), l, m);
		}
		if (r->s.router == CG_ROUTER_SPARSEMIXER)
			w[n] = sparsemixer_weight(r, n, id, lg);
	}
	for (int n = 0; n < k; n++) {
		if (r->s.router == CG_ROUTER_TOPK_SOFTMAX)
			w[n] = cg_exp(f, LLVMBuildFSub(B, w[n], m, ""));
		sum = LLVMBuildFAdd(B, sum, w[n], "");
	}
	mine_w = w[0];
	mine_i = cg_sload(f, f->ti32, slot_addr(r, id[0]), 4);
	for (int n = 1; n < k; n++) {
		LLVMValueRef is = is_lane(r, n);
		mine_w = cg_select(f, is, w[n], mine_w);
		mine_i = cg_select(f, is, cg_sload(f, f->ti32, slot_addr(r, id[n]), 4), mine_i);
	}
	if (r->s.router == CG_ROUTER_TOPK_SOFTMAX || r->s.renorm)
		mine_w = LLVMBuildFDiv(B, mine_w, sum, "");
	if (r->s.scale != 1.0)
		mine_w = LLVMBuildFMul(B, mine_w, cg_f32(f, (float)r->s.scale), "");
	cg_if(f, &c, LLVMBuildAnd(B, cg_lt(f, r->lane, cg_i32(f, k)), cg_lt(f, r->tok, r->T), ""));
	cg_gstore(f, mine_w, cg_gep(f, r->weights, at, 4), 4);
	cg_gstore(f, mine_i, cg_gep(f, r->ids, at, 4), 4);
	if (r->sids)	/* the front's slot sort reads them here, not back from memory */
		cg_sstore(f, mine_i, cg_sptr(f, cg_addi(f, cg_muli(f, cg_add(f, cg_muli(f, r->tok, k), r->lane), 4),
							r->sids)), 4);
	if (r->hist)
		count(r, mine_i);
	cg_endif(f, &c);
}

static void
layout(R *r, int smem0)
{
	int G = r->s.n_group > 1 ? r->s.n_group : 0;
	int nslot = 2 + 4 * r->s.k + 1;	/* sparsemixer: a warp sum per choice */

	r->J = (r->s.E + 31) / 32;
	r->gsel = smem0;
	r->gscore = r->gsel + (G ? 4 * r->nw * r->s.E : 0);
	r->gkeep = r->gscore + 8 * r->nw * G;
	r->slots = r->gkeep + 4 * r->nw * G;
	if (!G)
		r->slots = smem0;
	r->smem = r->slots + 4 * r->nw * nslot;
}

int
cg_route_smem(const CgRouteSpec *s, int nw)
{
	R r;

	memset(&r, 0, sizeof r);
	r.s = *s;
	r.nw = nw;
	layout(&r, 0);
	return r.smem;
}

int
cg_route_check(const CgRouteSpec *s, Diag *d)
{
	return check(s, d);
}

/* Warp w of the CTA routes token tok0 + w (one barrier sequence for all). */
static void
route_tokens(R *r, LLVMValueRef tok0)
{
	int id[MAXK], lg[MAXK], sc[MAXK];

	r->nslot = 0;
	r->lane = cg_and(r->f, cg_tid(r->f, 0), 31);
	r->warp = cg_shr(r->f, cg_tid(r->f, 0), 5);
	r->tok = cg_add(r->f, tok0, r->warp);
	r->tokc = cg_max(r->f, cg_min(r->f, r->tok, cg_addi(r->f, r->T, -1)), cg_i32(r->f, 0));
	load_logits(r);
	scores(r);
	if (r->s.n_group > 1 && r->s.redux && r->s.warp_sync && r->s.E / r->s.n_group % 32 == 0 && r->J <= 8)
		groups_redux(r);	/* (E = 512, 16 slots a lane: ptxas spilled 4 bytes at 80 registers) */
	else if (r->s.n_group > 1)
		groups(r);
	if (r->s.bfly)
		select_topk_bfly(r, id, lg, sc);
	else
		select_topk(r, id, lg, sc);
	store(r, id, lg, sc);
}

void
cg_route_tokens(CgFn *f, const CgRouteSpec *s, int nw, int smem0, const CgRouteIo *io)
{
	CgLoop l;
	R r;

	memset(&r, 0, sizeof r);
	r.f = f;
	r.s = *s;
	r.nw = nw;
	layout(&r, smem0);
	r.logits = io->logits;
	r.selbias = io->selbias;
	r.weights = io->weights;
	r.ids = io->ids;
	r.sids = io->sids;
	r.T = io->T;
	LLVMValueRef tok0 = cg_loop(f, &l, cg_i32(f, 0), r.T, cg_i32(f, nw));
	route_tokens(&r, tok0);
	cg_barrier(f);	/* the next tokens rewrite the broadcast slots */
	cg_endloop(f, &l);
}

int
cg_emit_route(CgModule *m, const char *name, const CgRouteSpec *spec, Diag *d)
{
	CgParam p[6];
	int np = 0, block[3] = {32 * WARPS, 1, 1};
	CgExpr grid[3] = {{spec->m_per_t, 0, WARPS}, CG_EXPR_INT(1), CG_EXPR_INT(1)};
	char note[160];
	R r;

	memset(&r, 0, sizeof r);
	if (check(spec, d) < 0)
		return -1;
	r.s = *spec;
	r.nw = WARPS;
	layout(&r, 0);
	p[np++] = (CgParam){CGP_PTR, "logits"};
	if (r.s.has_selbias)
		p[np++] = (CgParam){CGP_PTR, "selbias"};
	p[np++] = (CgParam){CGP_PTR, "weights"};
	p[np++] = (CgParam){CGP_PTR, "ids"};
	if (r.s.count_ch)
		p[np++] = (CgParam){CGP_PTR, "count_ws"};
	p[np++] = (CgParam){CGP_I32, "T"};
	r.f = cg_fn_begin(m, name, p, np, 32 * WARPS, 0, d);
	if (!r.f)
		return -1;
	np = 0;
	for (int i = 0; i < (r.s.has_selbias ? 4 : 3); i++)
		cg_arg_noalias(r.f, i);
	r.logits = cg_arg(r.f, np++);
	if (r.s.has_selbias)
		r.selbias = cg_arg(r.f, np++);
	r.weights = cg_arg(r.f, np++);
	r.ids = cg_arg(r.f, np++);
	if (r.s.count_ch)
		r.hist = cg_arg(r.f, np++);
	r.T = cg_muli(r.f, cg_arg(r.f, np++), r.s.m_per_t);	/* token rows */
	route_tokens(&r, cg_muli(r.f, cg_ctaid(r.f, 0), WARPS));
	snprintf(note, sizeof note, "route %s E=%d k=%d%s%s groups=%d/%d%s%s %s%s",
		 r.s.router == CG_ROUTER_SOFTMAX ? "softmax" : r.s.router == CG_ROUTER_SIGMOID
		 ? "sigmoid" : r.s.router == CG_ROUTER_SPARSEMIXER ? "sparsemixer" : "topk_softmax",
		 r.s.E, r.s.k, r.s.renorm ? " renorm" : "",
		 r.s.has_selbias ? " selbias" : "", r.s.topk_group, r.s.n_group,
		 r.s.group_score == CG_GROUP_TOP2 ? " top2" : "",
		 r.s.group_fill == -INFINITY ? "" : " fill", dtype_name(r.s.logits_dt),
		 r.s.count_ch ? " counts" : "");
	return cg_fn_end(r.f, block, grid, r.smem, note);
}
