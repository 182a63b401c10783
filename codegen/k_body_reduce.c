/*
 * k_body_reduce.c — reductions in kernel bodies: reduce_sum/mean/max/min,
 * argmax, softmax and log_softmax, rms_norm, layer_norm, rstd, topk,
 * quantize_dynamic; and the dot products of matmul and grouped_matmul.
 *
 * Each reduction sees its input X as rows (the kept dims) of members (the
 * reduced dims), adjacent dims of one kind merged (BdRows).  Its
 * statistics for a row (sum, max and sum of exponentials, mean and
 * 1/std, arg-max, the k best) come from passes over the members:
 *
 *	inline: one thread loops over the members in order (f32);
 *	block:  the anchor of a row-mode kernel: thread t takes members
 *	        t, t+threads, ... and a fixed tree in shared memory combines
 *	        the partials, so every run gives the same bits;
 *	warp:   a reduction nested in the anchor's rows (below): lane l takes
 *	        members l, l+32, ... and shfl.up steps combine the lanes in a
 *	        fixed order, lane 31 ending with the row's statistics.
 *
 * An element of a result asks for its row's statistics: in row mode, the
 * anchor's are in shared memory when the row is the CTA's (always, for the
 * shapes the fusion passes make); any other row is computed inline, so the
 * kernel is right for any body.  topk's k best are k rounds of arg-best,
 * each over the members strictly after the previous winner in the order
 * (value first, NaN largest, then the lower index), so nothing is marked.
 * matmul and grouped_matmul are in k_body_linalg.c.
 */
#include <math.h>
#include <string.h>

#include "k_body.h"

#define MAXST 4

int
bd_is_reduction(Op op)
{
	switch (op) {
	case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: case OP_REDUCE_MIN:
	case OP_ARGMAX: case OP_SOFTMAX: case OP_LOG_SOFTMAX: case OP_RMS_NORM:
	case OP_LAYER_NORM: case OP_RSTD: case OP_TOPK: case OP_QUANTIZE_DYNAMIC:
		return 1;
	default:
		return 0;
	}
}

/* ---- rows ---- */

/* Which dims of X = operand 0 the op reduces; for quantize_dynamic, the group. */
static void
reduced_dims(const Node *n, int *red, int64_t *qgroup)
{
	const Type *x = &n->in[0]->type;
	int r = x->rank, ax;
	int64_t axes[MAXRANK];
	int na;

	*qgroup = 0;
	memset(red, 0, sizeof(int) * MAXRANK);
	switch (n->op) {
	case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: case OP_REDUCE_MIN:
		na = ir_attr_ints(n, "axes", axes, MAXRANK);
		for (int i = 0; i < r; i++)
			red[i] = na < 0;
		for (int i = 0; i < na; i++)
			if ((ax = ir_axis(axes[i], r)) >= 0)
				red[ax] = 1;
		return;
	case OP_ARGMAX:
		ax = ir_axis(ir_attr_int(n, "axis", 0), r);
		break;
	case OP_SOFTMAX: case OP_LOG_SOFTMAX:
		ax = ir_axis(ir_attr_int(n, "axis", -1), r);
		break;
	case OP_TOPK: {
		IrTopkAttrs ta;
		ir_topk_attrs(n, &ta);
		ax = ir_axis(ta.axis, r);
		break;
	}
	case OP_QUANTIZE_DYNAMIC: {
		const Attr *g = ir_attr(n, "group");
		if (g && g->kind == A_INT)
			*qgroup = g->u.i;
		if (!g || (g->kind == A_STR && strcmp(g->u.s, "tensor") == 0))
			for (int i = 0; i < r; i++)
				red[i] = 1;
		else if (r > 0 && g->kind == A_STR)
			red[r - 1] = 1;
		return;
	}
	default:	/* the norms: axis.. */
		ax = ir_axis(ir_attr_int(n, "axis", -1), r);
		for (int i = ax; i >= 0 && i < r; i++)
			red[i] = 1;
		return;
	}
	if (ax >= 0)
		red[ax] = 1;
}

/* The rows of n over the dims of v (X, or a result of X's layout). */
static void
rows_over(Bd *b, const Node *n, const Value *v, BdRows *rw)
{
	int red[MAXRANK], r = v->type.rank;
	int64_t qg;

	reduced_dims(n, red, &qg);
	memset(rw, 0, sizeof *rw);
	if (qg > 0) {	/* groups of qg elements along the flat tensor */
		rw->ng = 2;
		rw->size[0] = cg_udiv(b->f, bd_numel(b, v), bd_i64(b, qg));
		rw->size[1] = bd_i64(b, qg);
		rw->red[1] = 1;
	} else {
		for (int i = 0; i < r; i++) {
			LLVMValueRef d = bd_dim(b, v->type.dim[i]);
			if (rw->ng > 0 && rw->red[rw->ng - 1] == red[i]) {
				rw->size[rw->ng - 1] = cg_mul(b->f, rw->size[rw->ng - 1], d);
				continue;
			}
			rw->size[rw->ng] = d;
			rw->red[rw->ng++] = red[i];
		}
	}
	rw->rows = rw->len = bd_i64(b, 1);
	for (int g = 0; g < rw->ng; g++) {
		if (rw->red[g])
			rw->len = cg_mul(b->f, rw->len, rw->size[g]);
		else
			rw->rows = cg_mul(b->f, rw->rows, rw->size[g]);
	}
}

/* Flat index of member l of row `row`. */
static LLVMValueRef
member(Bd *b, const BdRows *rw, LLVMValueRef row, LLVMValueRef l)
{
	LLVMValueRef kd[MAXRANK], rd[MAXRANK], kc[MAXRANK], rc[MAXRANK], c[MAXRANK];
	int nk = 0, nr = 0;

	for (int g = 0; g < rw->ng; g++) {
		if (rw->red[g])
			rd[nr++] = rw->size[g];
		else
			kd[nk++] = rw->size[g];
	}
	bd_unravel(b, row, nk, kd, kc);
	bd_unravel(b, l, nr, rd, rc);
	nk = nr = 0;
	for (int g = 0; g < rw->ng; g++)
		c[g] = rw->red[g] ? rc[nr++] : kc[nk++];
	return bd_ravel(b, rw->ng, rw->size, c);
}

/* Row and member of flat index idx. */
static void
split(Bd *b, const BdRows *rw, LLVMValueRef idx, LLVMValueRef *row, LLVMValueRef *l)
{
	LLVMValueRef c[MAXRANK], kd[MAXRANK], rd[MAXRANK], kc[MAXRANK], rc[MAXRANK];
	int nk = 0, nr = 0;

	bd_unravel(b, idx, rw->ng, rw->size, c);
	for (int g = 0; g < rw->ng; g++) {
		if (rw->red[g])
			rd[nr] = rw->size[g], rc[nr++] = c[g];
		else
			kd[nk] = rw->size[g], kc[nk++] = c[g];
	}
	*row = bd_ravel(b, nk, kd, kc);
	if (l)
		*l = bd_ravel(b, nr, rd, rc);
}

int64_t
bd_row_len(Bd *b, const Node *n)
{
	const Type *x = &n->in[0]->type;
	int red[MAXRANK];
	int64_t len = 1, qg;

	reduced_dims(n, red, &qg);
	if (qg > 0)
		return qg;
	for (int i = 0; i < x->rank; i++)
		if (red[i]) {
			if (!ir_dim_is_static(x->dim[i]))
				return -1;
			len *= x->dim[i];
		}
	return len;
}

LLVMValueRef
bd_row_count(Bd *b, const Node *n)
{
	BdRows rw;

	rows_over(b, n, n->in[0], &rw);
	return rw.rows;
}

int
bd_row_count_expr(Bd *b, const Node *n, CgExpr *e)
{
	const Type *x = &n->in[0]->type;
	int red[MAXRANK], nsym = 0;
	int64_t p = 1, qg;

	reduced_dims(n, red, &qg);
	for (int i = 0; i < x->rank; i++) {
		Dim d = x->dim[i];
		if (red[i] && qg <= 0)
			continue;
		if (ir_dim_is_static(d))
			p *= d;
		else
			p *= ir_dim_expr(b->m, d)->coef, nsym++;
	}
	if (qg > 0)
		p /= qg;
	if (nsym > 1)
		return -1;
	*e = nsym ? (CgExpr){p, 0, 0} : CG_EXPR_INT(p);
	return 0;
}

/* ---- passes over a row ---- */

enum { INLINE, BLOCK, WARP };	/* how a pass runs over a row's members */

typedef struct Pass Pass;
typedef void ElemFn(Bd *b, Pass *p, LLVMValueRef xidx, LLVMValueRef l, LLVMValueRef *e);
struct Pass {
	const Node *n;
	const BdRows *rw;
	LLVMValueRef row;
	LLVMValueRef st[2 * MAXST];	/* statistics of earlier passes */
	LLVMValueRef prev[2];		/* topk: the previous winner */
	int largest, last;		/* arg-best order */
	BdComb *comb;
	ElemFn *elem;
	int nc;
};

/* Lane 31 of the warp gets comb over every lane's acc (f32 components),
 * lane l combining lane l-d's partial for d = 1, 2, 4, 8, 16 in turn. */
static void
warp_reduce(Bd *b, Pass *p, LLVMValueRef *acc)
{
	CgFn *f = b->f;
	LLVMValueRef lane = LLVMBuildURem(f->B, cg_tid(f, 0), cg_i32(f, 32), ""), o[2], c[2];

	for (int d = 1; d < 32; d *= 2) {
		LLVMValueRef take = LLVMBuildICmp(f->B, LLVMIntUGE, lane, cg_i32(f, d), "");
		for (int i = 0; i < p->nc; i++) {
			LLVMValueRef v = LLVMBuildBitCast(f->B, acc[i], f->ti32, "");
			o[i] = LLVMBuildBitCast(f->B, cg_shfl_up(f, v, d), f->tf32, "");
			c[i] = acc[i];
		}
		p->comb(b, p, c, o);
		for (int i = 0; i < p->nc; i++)
			acc[i] = cg_select(f, take, c[i], acc[i]);
	}
}

/* acc = comb(acc, the row's elements): inline, over the block or the warp. */
static void
pass(Bd *b, Pass *p, int how, LLVMValueRef *acc)
{
	CgFn *f = b->f;
	LLVMValueRef var[2], e[2], cur[2], l;
	int nt = b->spec.threads;
	BdLoop lp;

	for (int i = 0; i < p->nc; i++)
		var[i] = cg_var(f, LLVMTypeOf(acc[i]), acc[i]);
	if (how == BLOCK)
		l = bd_loop(b, &lp, cg_sext64(f, cg_tid(f, 0)), p->rw->len, bd_i64(b, nt));
	else if (how == WARP)
		l = bd_loop(b, &lp, cg_sext64(f, LLVMBuildURem(f->B, cg_tid(f, 0), cg_i32(f, 32), "")),
			    p->rw->len, bd_i64(b, 32));
	else
		l = bd_loop(b, &lp, bd_i64(b, 0), p->rw->len, bd_i64(b, 1));
	p->elem(b, p, member(b, p->rw, p->row, l), l, e);
	for (int i = 0; i < p->nc; i++)
		cur[i] = cg_get(f, var[i]);
	p->comb(b, p, cur, e);
	for (int i = 0; i < p->nc; i++)
		cg_set(f, var[i], cur[i]);
	bd_endloop(b, &lp);
	for (int i = 0; i < p->nc; i++)
		acc[i] = cg_get(f, var[i]);
	if (how == BLOCK)
		bd_block_reduce(b, p->nc, acc, p->comb, p);
	else if (how == WARP)
		warp_reduce(b, p, acc);
}

static LLVMValueRef
x_at(Bd *b, Pass *p, LLVMValueRef xidx)
{
	return bd_in(b, p->n, 0, xidx);
}

static LLVMValueRef
f32_of(Bd *b, LLVMValueRef v)
{
	return LLVMTypeOf(v) == b->f->ti64 ? LLVMBuildSIToFP(b->f->B, v, b->f->tf32, "") : v;
}

/* combines */

static void
comb_sum(Bd *b, void *ctx, LLVMValueRef *acc, LLVMValueRef *o)
{
	if (LLVMTypeOf(acc[0]) == b->f->ti64) {
		LLVMValueRef a[2] = {acc[0], o[0]};
		acc[0] = cg_intrinsic(b->f, "llvm.sadd.sat", b->f->ti64, &b->f->ti64, 1, a, 2);
	} else {
		acc[0] = LLVMBuildFAdd(b->f->B, acc[0], o[0], "");
	}
}

/* max or min; floats: NaN wins (numpy) */
static void
comb_ext(Bd *b, void *ctx, LLVMValueRef *acc, LLVMValueRef *o)
{
	Pass *p = ctx;
	int mx = p->largest;

	if (LLVMTypeOf(acc[0]) == b->f->ti64) {
		acc[0] = mx ? cg_max(b->f, acc[0], o[0]) : cg_min(b->f, acc[0], o[0]);
		return;
	}
	LLVMValueRef take = LLVMBuildOr(b->f->B, bd_isnan(b, o[0]),
					bd_fcmp(b, mx ? LLVMRealOGT : LLVMRealOLT, o[0], acc[0]), "");
	acc[0] = cg_select(b->f, take, o[0], acc[0]);
}

/* fmax of |x| (NaN ignored), for quantize_dynamic's amax */
static void
comb_amax(Bd *b, void *ctx, LLVMValueRef *acc, LLVMValueRef *o)
{
	acc[0] = cg_select(b->f, bd_fcmp(b, LLVMRealOGT, o[0], acc[0]), o[0], acc[0]);
}

/* a before c in the order of p (largest or smallest first; ties: index) */
static LLVMValueRef
before(Bd *b, Pass *p, LLVMValueRef av, LLVMValueRef ai, LLVMValueRef cv, LLVMValueRef ci)
{
	LLVMBuilderRef B = b->f->B;
	LLVMValueRef an = bd_isnan(b, av), cn = bd_isnan(b, cv), strict, eq, tie;

	if (p->largest)
		strict = LLVMBuildOr(B, LLVMBuildAnd(B, an, LLVMBuildNot(B, cn, ""), ""),
				     bd_fcmp(b, LLVMRealOGT, av, cv), "");
	else
		strict = LLVMBuildOr(B, LLVMBuildAnd(B, cn, LLVMBuildNot(B, an, ""), ""),
				     bd_fcmp(b, LLVMRealOLT, av, cv), "");
	eq = LLVMBuildOr(B, LLVMBuildAnd(B, an, cn, ""), bd_fcmp(b, LLVMRealOEQ, av, cv), "");
	tie = p->last ? bd_icmp(b, LLVMIntSGT, ai, ci) : bd_icmp(b, LLVMIntSLT, ai, ci);
	return LLVMBuildOr(B, strict, LLVMBuildAnd(B, eq, tie, ""), "");
}

static void
comb_best(Bd *b, void *ctx, LLVMValueRef *acc, LLVMValueRef *o)
{
	LLVMValueRef take = before(b, ctx, o[0], o[1], acc[0], acc[1]);

	acc[0] = cg_select(b->f, take, o[0], acc[0]);
	acc[1] = cg_select(b->f, take, o[1], acc[1]);
}

/* The worst candidate (loses to every member) and one before every member. */
static void
worst(Bd *b, Pass *p, LLVMValueRef *c)
{
	c[0] = cg_f32(b->f, p->largest ? -INFINITY : NAN);
	c[1] = bd_i64(b, p->last ? -1 : INT64_MAX);
}

static void
first(Bd *b, Pass *p, LLVMValueRef *c)
{
	c[0] = cg_f32(b->f, p->largest ? NAN : -INFINITY);
	c[1] = bd_i64(b, -1);
}

/* elements */

static void
el_x(Bd *b, Pass *p, LLVMValueRef xi, LLVMValueRef l, LLVMValueRef *e)
{
	e[0] = x_at(b, p, xi);
}

static void
el_xf(Bd *b, Pass *p, LLVMValueRef xi, LLVMValueRef l, LLVMValueRef *e)
{
	e[0] = f32_of(b, x_at(b, p, xi));
}

static void
el_absx(Bd *b, Pass *p, LLVMValueRef xi, LLVMValueRef l, LLVMValueRef *e)
{
	e[0] = bd_fabs(b, f32_of(b, x_at(b, p, xi)));
}

static void
el_exp(Bd *b, Pass *p, LLVMValueRef xi, LLVMValueRef l, LLVMValueRef *e)
{
	e[0] = cg_exp(b->f, LLVMBuildFSub(b->f->B, f32_of(b, x_at(b, p, xi)), p->st[0], ""));
}

/* (x - center)^2, center = st[0] (0 for rms) */
static void
el_sq(Bd *b, Pass *p, LLVMValueRef xi, LLVMValueRef l, LLVMValueRef *e)
{
	LLVMValueRef d = LLVMBuildFSub(b->f->B, f32_of(b, x_at(b, p, xi)), p->st[0], "");

	e[0] = LLVMBuildFMul(b->f->B, d, d, "");
}

static void
el_best(Bd *b, Pass *p, LLVMValueRef xi, LLVMValueRef l, LLVMValueRef *e)
{
	LLVMValueRef w[2], ok;

	e[0] = f32_of(b, x_at(b, p, xi));
	e[1] = l;
	if (!p->prev[0])
		return;
	ok = before(b, p, p->prev[0], p->prev[1], e[0], e[1]);	/* strictly after the previous */
	worst(b, p, w);
	e[0] = cg_select(b->f, ok, e[0], w[0]);
	e[1] = cg_select(b->f, ok, e[1], w[1]);
}

static void
setup(Pass *p, const Node *n, const BdRows *rw, LLVMValueRef row, ElemFn *el, BdComb *comb, int nc)
{
	p->n = n;
	p->rw = rw;
	p->row = row;
	p->elem = el;
	p->comb = comb;
	p->nc = nc;
}

static double
eps_of(const Node *n)
{
	return ir_attr_float(n, "eps", 1e-5);
}

/* 1 / sqrt(ms + eps) */
static LLVMValueRef
inv_std(Bd *b, const Node *n, LLVMValueRef ms)
{
	LLVMValueRef v = LLVMBuildFAdd(b->f->B, ms, cg_f32(b->f, eps_of(n)), "");

	return LLVMBuildFDiv(b->f->B, cg_f32(b->f, 1), bd_sqrt(b, v), "");
}

static LLVMValueRef
lenf(Bd *b, const BdRows *rw)
{
	return LLVMBuildSIToFP(b->f->B, rw->len, b->f->tf32, "");
}

/*
 * The statistics of row `row` into st[]: per op,
 *	reduce_*: the value; argmax: (value, index); softmax: (max, sum exp);
 *	rms_norm, rstd: 1/std (rstd center: after the mean); layer_norm:
 *	(mean, 1/std); quantize_dynamic: the scale.  topk is separate.
 */
static int
stats(Bd *b, const Node *n, const BdRows *rw, LLVMValueRef row, int how, LLVMValueRef *st)
{
	CgFn *f = b->f;
	int isint = cg_dt_isint(n->in[0]->type.dt);
	LLVMValueRef acc[2];
	Pass p;

	memset(&p, 0, sizeof p);
	switch (n->op) {
	case OP_REDUCE_SUM: case OP_REDUCE_MEAN:
		setup(&p, n, rw, row, el_x, comb_sum, 1);
		acc[0] = isint ? bd_i64(b, 0) : cg_f32(f, 0);
		pass(b, &p, how, acc);
		st[0] = acc[0];
		if (n->op == OP_REDUCE_MEAN)
			st[0] = isint ? LLVMBuildSDiv(f->B, acc[0], cg_max(f, rw->len, bd_i64(b, 1)), "")
				: LLVMBuildFDiv(f->B, acc[0], lenf(b, rw), "");
		return 1;
	case OP_REDUCE_MAX: case OP_REDUCE_MIN:
		setup(&p, n, rw, row, el_x, comb_ext, 1);
		p.largest = n->op == OP_REDUCE_MAX;
		acc[0] = isint ? bd_i64(b, p.largest ? INT64_MIN : INT64_MAX)
			: cg_f32(f, p.largest ? -INFINITY : INFINITY);
		pass(b, &p, how, acc);
		st[0] = acc[0];
		return 1;
	case OP_ARGMAX:
		setup(&p, n, rw, row, el_best, comb_best, 2);
		p.largest = 1;
		p.last = (int)ir_attr_int(n, "select_last_index", 0);
		worst(b, &p, acc);
		pass(b, &p, how, acc);
		st[0] = acc[0];
		st[1] = acc[1];
		return 2;
	case OP_SOFTMAX: case OP_LOG_SOFTMAX:
		setup(&p, n, rw, row, el_xf, comb_ext, 1);
		p.largest = 1;
		acc[0] = cg_f32(f, -INFINITY);
		pass(b, &p, how, acc);
		st[0] = p.st[0] = acc[0];
		setup(&p, n, rw, row, el_exp, comb_sum, 1);
		acc[0] = cg_f32(f, 0);
		pass(b, &p, how, acc);
		st[1] = acc[0];
		return 2;
	case OP_RMS_NORM: case OP_RSTD: case OP_LAYER_NORM: {
		int center = n->op == OP_LAYER_NORM || (n->op == OP_RSTD && ir_attr_int(n, "center", 0));
		LLVMValueRef mean = cg_f32(f, 0);
		if (center) {
			setup(&p, n, rw, row, el_xf, comb_sum, 1);
			acc[0] = cg_f32(f, 0);
			pass(b, &p, how, acc);
			mean = LLVMBuildFDiv(f->B, acc[0], lenf(b, rw), "");
		}
		setup(&p, n, rw, row, el_sq, comb_sum, 1);
		p.st[0] = mean;
		acc[0] = cg_f32(f, 0);
		pass(b, &p, how, acc);
		st[0] = inv_std(b, n, LLVMBuildFDiv(f->B, acc[0], lenf(b, rw), ""));
		st[1] = mean;
		return 2;
	}
	case OP_QUANTIZE_DYNAMIC:
		setup(&p, n, rw, row, el_absx, comb_amax, 1);
		acc[0] = cg_f32(f, 0);
		pass(b, &p, how, acc);
		st[0] = cg_quant_emit_scale(f, n->out[0]->type.dt, acc[0]);
		return 1;
	default:
		bd_fail(b, n, "no statistics");
		return 0;
	}
}

static int
nstats(const Node *n)
{
	switch (n->op) {
	case OP_REDUCE_SUM: case OP_REDUCE_MEAN: case OP_REDUCE_MAX: case OP_REDUCE_MIN:
	case OP_QUANTIZE_DYNAMIC:
		return 1;
	case OP_TOPK: {
		IrTopkAttrs ta;
		ir_topk_attrs(n, &ta);
		return ta.k < 1 ? 2 : 2 * (int)ta.k;	/* 1..IR_TOPK_BODY_MAX: bd_check_topk */
	}
	default:
		return 2;
	}
}

int
bd_stat_words(Bd *b, const Node *n)
{
	return nstats(n);
}

/* The i-th best (value, index) of a row of topk: i+1 rounds of arg-best. */
static void
topk_nth(Bd *b, const Node *n, const BdRows *rw, LLVMValueRef row, LLVMValueRef nth,
	 int block, LLVMValueRef *vi)
{
	CgFn *f = b->f;
	LLVMValueRef pv = cg_var(f, f->tf32, NULL), pi = cg_var(f, f->ti64, NULL), acc[2];
	IrTopkAttrs ta;
	BdLoop l;
	Pass p;

	memset(&p, 0, sizeof p);
	setup(&p, n, rw, row, el_best, comb_best, 2);
	ir_topk_attrs(n, &ta);
	p.largest = ta.largest;
	first(b, &p, acc);
	cg_set(f, pv, acc[0]);
	cg_set(f, pi, acc[1]);
	bd_loop(b, &l, bd_i64(b, 0), cg_addi(f, nth, 1), bd_i64(b, 1));
	p.prev[0] = cg_get(f, pv);
	p.prev[1] = cg_get(f, pi);
	worst(b, &p, acc);
	pass(b, &p, block, acc);
	cg_set(f, pv, acc[0]);
	cg_set(f, pi, acc[1]);
	bd_endloop(b, &l);
	vi[0] = cg_get(f, pv);
	vi[1] = cg_get(f, pi);
}

/* ---- row mode: the anchor's statistics in shared memory ---- */

static LLVMValueRef
stat_addr(Bd *b, LLVMValueRef word)
{
	return cg_sptr(b->f, cg_addi(b->f, cg_muli(b->f, word, 8), b->stat_off));
}

void
bd_anchor_stats(Bd *b)
{
	CgFn *f = b->f;
	const Node *n = b->anchor;
	LLVMValueRef st[2 * MAXST], tid0 = bd_icmp(b, LLVMIntEQ, cg_tid(f, 0), cg_i32(f, 0));
	BdRows rw;
	CgIf c;
	int ns;

	rows_over(b, n, n->in[0], &rw);
	if (n->op == OP_TOPK) {
		IrTopkAttrs ta;
		ir_topk_attrs(n, &ta);
		int64_t k = ta.k;
		LLVMValueRef acc[2];
		Pass p;
		memset(&p, 0, sizeof p);
		setup(&p, n, &rw, b->row, el_best, comb_best, 2);
		p.largest = ta.largest;
		first(b, &p, acc);
		p.prev[0] = acc[0];
		p.prev[1] = acc[1];
		for (int64_t i = 0; i < k; i++) {
			/* k rounds; the previous winner is a value every thread holds */
			worst(b, &p, acc);
			pass(b, &p, 1, acc);
			cg_if(f, &c, tid0);
			cg_sstore(f, acc[0], stat_addr(b, cg_i32(f, 2 * i)), 8);
			cg_sstore(f, acc[1], stat_addr(b, cg_i32(f, 2 * i + 1)), 8);
			cg_endif(f, &c);
			p.prev[0] = acc[0];
			p.prev[1] = acc[1];
		}
		cg_barrier(f);
		return;
	}
	ns = stats(b, n, &rw, b->row, 1, st);
	cg_if(f, &c, tid0);
	for (int i = 0; i < ns; i++)
		cg_sstore(f, st[i], stat_addr(b, cg_i32(f, i)), 8);
	cg_endif(f, &c);
	cg_barrier(f);
}

/*
 * Reductions nested in the anchor's rows: n's rows are runs of `len`
 * consecutive elements of an input shaped like the anchor's, whose rows are
 * runs of L (its reduced dims trailing), and len divides L: the L/len runs
 * of the CTA's row are n's rows the CTA's elements ask for.  Or of an input
 * with the anchor's rows as its leading dims and `span` elements a row
 * (row_span: the router's max over [T,E] anchors a row kernel whose
 * quantize_dynamic reads the router-scaled rows [T,H]): span/len runs.  quantize_dynamic
 * per group of a norm's rows is the one the fusion passes make (fuse-act-quant);
 * its single f32 statistic (the scale) is what the warp pass combines.  A
 * reduction over the anchor's own rows (group=row) takes the block's pass.
 */

/* The length of n's rows when they are runs of consecutive elements of its
 * input (static), else -1. */
static int64_t
run_len(const Node *n)
{
	const Type *x = &n->in[0]->type;
	int red[MAXRANK], i = x->rank;
	int64_t qg, len = 1;

	reduced_dims(n, red, &qg);
	if (qg > 0)
		return qg;
	while (i > 0 && red[i - 1])
		i--;
	for (int j = 0; j < i; j++)
		if (red[j] && x->dim[j] != 1)
			return -1;
	for (int j = i; j < x->rank; j++) {
		if (!ir_dim_is_static(x->dim[j]))
			return -1;
		len *= x->dim[j];
	}
	return i < x->rank ? len : -1;
}

/* The elements of v in one row of the anchor a (runs of L of its input):
 * L when v is shaped like that input; else, when a's rows are its leading
 * dims and v has the same leading dims (the router's logits [T,E] and the
 * rows [T,H] their score scales), the product of v's static trailing dims;
 * else -1. */
static int64_t
row_span(const Node *a, const Value *v, int64_t L)
{
	const Type *x = &a->in[0]->type, *t = &v->type;
	int red[MAXRANK], i = x->rank;
	int64_t qg, span = 1;

	if (bd_same_shape(v, a->in[0]))
		return L;
	reduced_dims(a, red, &qg);
	if (qg > 0)
		return -1;
	while (i > 0 && red[i - 1])
		i--;
	if (t->rank <= i)
		return -1;
	for (int j = 0; j < i; j++)
		if (red[j] || t->dim[j] != x->dim[j])
			return -1;
	for (int j = i; j < t->rank; j++) {
		if (!ir_dim_is_static(t->dim[j]))
			return -1;
		span *= t->dim[j];
	}
	return span;
}

void
bd_find_nested(Bd *b)
{
	const Node *a = b->anchor;
	int64_t L = a->op == OP_TOPK ? -1 : run_len(a), len, span;

	b->nnest = b->nest_ready = 0;
	for (int i = 0; i < b->nnode && L > 0 && b->nnest < BD_MAXNEST; i++) {
		const Node *n = b->node[i];
		if (n == a || n->op != OP_QUANTIZE_DYNAMIC || (span = row_span(a, n->in[0], L)) <= 0 ||
		    (len = run_len(n)) <= 0 || span % len || span / len > 2048)
			continue;
		b->nest[b->nnest] = n;
		b->nest_per[b->nnest] = span / len;
		b->nest_off[b->nnest++] = b->smem;
		b->smem += (int)(8 * nstats(n) * (span / len));
	}
}

/* Row j of nested reduction i's statistics st (ns words) into shared memory, by the thread `who`. */
static void
nest_store(Bd *b, int i, LLVMValueRef j, LLVMValueRef who, LLVMValueRef *st)
{
	CgFn *f = b->f;
	int ns = nstats(b->nest[i]);
	CgIf c;

	cg_if(f, &c, who);
	for (int k = 0; k < ns; k++) {
		LLVMValueRef w = cg_addi(f, cg_muli(f, j, ns), k);
		cg_sstore(f, st[k], cg_sptr(f, cg_addi(f, LLVMBuildTrunc(f->B, cg_muli(f, w, 8), f->ti32, ""),
						   b->nest_off[i])), 8);
	}
	cg_endif(f, &c);
}

void
bd_nested_stats(Bd *b)
{
	CgFn *f = b->f;
	LLVMValueRef tid = cg_tid(f, 0), lane = LLVMBuildURem(f->B, tid, cg_i32(f, 32), "");
	LLVMValueRef warp = cg_sext64(f, LLVMBuildUDiv(f->B, tid, cg_i32(f, 32), "")), st[2 * MAXST];
	int nw = b->spec.threads / 32;

	for (int i = 0; i < b->nnest; i++) {
		const Node *n = b->nest[i];
		int64_t per = b->nest_per[i];
		BdRows rw;
		BdLoop l;

		rows_over(b, n, n->in[0], &rw);
		if (per == 1) {	/* the anchor's own rows (group=row): the block's pass */
			stats(b, n, &rw, b->row, BLOCK, st);
			nest_store(b, i, bd_i64(b, 0), bd_icmp(b, LLVMIntEQ, tid, cg_i32(f, 0)), st);
		} else {	/* a warp per run of the row */
			LLVMValueRef j = bd_loop(b, &l, warp, bd_i64(b, per), bd_i64(b, nw));
			stats(b, n, &rw, cg_add(f, cg_muli(f, b->row, per), j), WARP, st);
			nest_store(b, i, j, bd_icmp(b, LLVMIntEQ, lane, cg_i32(f, 31)), st);
			bd_endloop(b, &l);
		}
		cg_barrier(f);
		b->nest_ready = i + 1;
	}
}

static LLVMTypeRef
stat_type(Bd *b, const Node *n, int i)
{
	int isint = cg_dt_isint(n->in[0]->type.dt);

	if (n->op == OP_ARGMAX || n->op == OP_TOPK)
		return i % 2 ? b->f->ti64 : b->f->tf32;
	if (n->op >= OP_REDUCE_SUM && n->op <= OP_REDUCE_MIN && isint)
		return b->f->ti64;
	return b->f->tf32;
}

/* Which of b->nest[0..nest_ready) n is, or -1. */
static int
nested(const Bd *b, const Node *n)
{
	for (int i = 0; i < b->nest_ready; i++)
		if (b->nest[i] == n)
			return i;
	return -1;
}

/* The statistics of row `row` for an element: shared memory when it is the
 * CTA's row (the anchor's) or one of its runs (a nested reduction's). */
static void
row_stats(Bd *b, const Node *n, const BdRows *rw, LLVMValueRef row, LLVMValueRef *st)
{
	CgFn *f = b->f;
	int ns = nstats(n), mark, k = b->mode == BD_ROW ? nested(b, n) : -1;
	LLVMValueRef var[2 * MAXST], tmp[2 * MAXST], mine, word = NULL;
	CgIf c;

	if (b->mode != BD_ROW || (n != b->anchor && k < 0)) {
		stats(b, n, rw, row, INLINE, st);
		return;
	}
	if (k < 0) {
		mine = bd_icmp(b, LLVMIntEQ, row, b->row);
	} else {	/* run j of the CTA's row: words nest_off + 8 (j ns + i) */
		LLVMValueRef j = LLVMBuildSub(f->B, row, cg_muli(f, b->row, b->nest_per[k]), "");
		mine = bd_icmp(b, LLVMIntULT, j, bd_i64(b, b->nest_per[k]));
		word = cg_addi(f, LLVMBuildTrunc(f->B, cg_muli(f, j, 8 * ns), f->ti32, ""), b->nest_off[k]);
	}
	for (int i = 0; i < ns; i++)
		var[i] = cg_var(f, stat_type(b, n, i), NULL);
	cg_if(f, &c, mine);
	for (int i = 0; i < ns; i++)
		cg_set(f, var[i], cg_sload(f, stat_type(b, n, i), k < 0 ? stat_addr(b, cg_i32(f, i))
					   : cg_sptr(f, cg_addi(f, word, 8 * i)), 8));
	cg_else(f, &c);
	mark = bd_scope(b);
	stats(b, n, rw, row, INLINE, tmp);
	for (int i = 0; i < ns; i++)
		cg_set(f, var[i], tmp[i]);
	bd_unscope(b, mark);
	cg_endif(f, &c);
	for (int i = 0; i < ns; i++)
		st[i] = cg_get(f, var[i]);
}

/* ---- the ops ---- */

int
bd_check_reduce(Bd *b, const Node *n)
{
	int64_t axes[MAXRANK];
	int na = ir_attr_ints(n, "axes", axes, MAXRANK);

	for (int i = 0; i < na; i++)
		if (ir_axis(axes[i], n->in[0]->type.rank) < 0)
			return bd_fail(b, n, "axis %lld out of range", (long long)axes[i]);
	return 0;
}

int
bd_check_topk(Bd *b, const Node *n)
{
	IrTopkAttrs ta;

	ir_topk_attrs(n, &ta);
	int64_t k = ta.k;
	if (k < 1 || k > IR_TOPK_BODY_MAX)
		return bd_fail(b, n, "k = %lld (the body compiler takes 1..%d; lower-sort sorts the last axis by ranks)",
			       (long long)k, IR_TOPK_BODY_MAX);
	return 0;
}

/* results indexed by row: reduce_*, argmax (the index, second of its
 * statistics), rstd */
LLVMValueRef
bd_reduce(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	LLVMValueRef st[2];
	BdRows rw;

	rows_over(b, n, n->in[0], &rw);
	row_stats(b, n, &rw, idx, st);
	return st[n->op == OP_ARGMAX];
}

LLVMValueRef
bd_softmax(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	LLVMBuilderRef B = b->f->B;
	LLVMValueRef st[2], row, d;
	BdRows rw;

	rows_over(b, n, n->in[0], &rw);
	split(b, &rw, idx, &row, NULL);
	row_stats(b, n, &rw, row, st);
	d = LLVMBuildFSub(B, f32_of(b, bd_in(b, n, 0, idx)), st[0], "");
	if (n->op == OP_SOFTMAX)
		return LLVMBuildFDiv(B, cg_exp(b->f, d), st[1], "");
	return LLVMBuildFSub(B, d, bd_log(b, st[1]), "");
}

/* Element of the norm's scale or bias p for member l: p broadcasts over x's dims ax.. */
static LLVMValueRef
norm_param(Bd *b, const Node *n, int k, LLVMValueRef l)
{
	const Value *x = n->in[0], *p = n->in[k];
	int r = x->type.rank, ax = ir_axis(ir_attr_int(n, "axis", -1), r), tr = r - ax;
	LLVMValueRef td[MAXRANK], pd[MAXRANK], c[MAXRANK], pc[MAXRANK];

	for (int i = 0; i < tr; i++)
		td[i] = bd_dim(b, x->type.dim[ax + i]);
	bd_unravel(b, l, tr, td, c);
	bd_dims(b, p, pd);
	for (int j = 0; j < p->type.rank; j++)
		pc[j] = p->type.dim[j] == 1 ? bd_i64(b, 0) : c[tr - p->type.rank + j];
	return f32_of(b, bd_in(b, n, k, bd_ravel(b, p->type.rank, pd, pc)));
}

LLVMValueRef
bd_rms_norm(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	LLVMBuilderRef B = b->f->B;
	LLVMValueRef st[2], row, l, x;
	BdRows rw;

	rows_over(b, n, n->in[0], &rw);
	split(b, &rw, idx, &row, &l);
	row_stats(b, n, &rw, row, st);
	x = f32_of(b, bd_in(b, n, 0, idx));
	return LLVMBuildFMul(B, LLVMBuildFMul(B, x, st[0], ""), norm_param(b, n, 1, l), "");
}

LLVMValueRef
bd_layer_norm(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	LLVMBuilderRef B = b->f->B;
	LLVMValueRef st[2], row, l, v;
	BdRows rw;

	rows_over(b, n, n->in[0], &rw);
	if (res > 0) {		/* mean, 1/std: by row */
		row_stats(b, n, &rw, idx, st);
		return res == 1 ? st[1] : st[0];
	}
	split(b, &rw, idx, &row, &l);
	row_stats(b, n, &rw, row, st);
	v = LLVMBuildFSub(B, f32_of(b, bd_in(b, n, 0, idx)), st[1], "");
	v = LLVMBuildFMul(B, LLVMBuildFMul(B, v, st[0], ""), norm_param(b, n, 1, l), "");
	if (n->nin > 2 && n->in[2])
		v = LLVMBuildFAdd(B, v, norm_param(b, n, 2, l), "");
	return v;
}

LLVMValueRef
bd_topk(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	LLVMValueRef row, i, vi[2], var[2];
	BdRows rw, ro;
	CgIf c;
	int mark;

	rows_over(b, n, n->in[0], &rw);
	rows_over(b, n, n->out[0], &ro);	/* the result: k members per row */
	split(b, &ro, idx, &row, &i);
	if (b->mode == BD_ROW && n == b->anchor) {
		var[0] = cg_var(f, f->tf32, NULL);
		var[1] = cg_var(f, f->ti64, NULL);
		cg_if(f, &c, bd_icmp(b, LLVMIntEQ, row, b->row));
		cg_set(f, var[0], cg_sload(f, f->tf32, stat_addr(b, LLVMBuildTrunc(f->B, cg_muli(f, i, 2), f->ti32, "")), 8));
		cg_set(f, var[1], cg_sload(f, f->ti64, stat_addr(b, LLVMBuildTrunc(f->B, cg_addi(f, cg_muli(f, i, 2), 1), f->ti32, "")), 8));
		cg_else(f, &c);
		mark = bd_scope(b);
		topk_nth(b, n, &rw, row, i, 0, vi);
		cg_set(f, var[0], vi[0]);
		cg_set(f, var[1], vi[1]);
		bd_unscope(b, mark);
		cg_endif(f, &c);
		vi[0] = cg_get(f, var[0]);
		vi[1] = cg_get(f, var[1]);
	} else {
		topk_nth(b, n, &rw, row, i, 0, vi);
	}
	if (res == 1)
		return vi[1];
	return bd_in(b, n, 0, member(b, &rw, row, vi[1]));	/* the element itself, exactly */
}

LLVMValueRef
bd_quantize_dynamic(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	DType dt = n->out[0]->type.dt;
	LLVMValueRef st[1], row, v;
	BdRows rw;

	rows_over(b, n, n->in[0], &rw);
	if (res == 1) {
		row_stats(b, n, &rw, idx, st);
		return st[0];
	}
	split(b, &rw, idx, &row, NULL);
	row_stats(b, n, &rw, row, st);
	v = LLVMBuildFDiv(f->B, f32_of(b, bd_in(b, n, 0, idx)), st[0], "");
	return cg_dt_isint(dt) ? cg_round_even(f, v) : v;	/* as qstore */
}

/* ---- row mode: which elements of a result belong to the CTA's row ---- */

static int
expr_eq(CgExpr a, CgExpr c)
{
	return a.a == c.a && a.b == c.b && a.div == c.div;
}

/* Is result v laid out as the row's members (the anchor's input, or topk's result)? */
static int
row_shaped(const Bd *b, const Value *v)
{
	const Node *a = b->anchor;

	return bd_same_shape(v, a->in[0]) || (a->op == OP_TOPK && bd_same_shape(v, a->out[0]));
}

/* The row's members: every row-shaped result in one loop, so that what they
 * share (a norm's value under its quantisation and a cast) is computed once. */
static void
row_members(Bd *b, BdElemFn *fn)
{
	CgFn *f = b->f;
	const Node *a = b->anchor;
	LLVMValueRef k, idx;
	BdRows rw;
	BdLoop l;
	int first = -1;

	for (int r = 0; r < b->nres && first < 0; r++)
		if (row_shaped(b, b->res[r]))
			first = r;
	if (first < 0)
		return;
	rows_over(b, a, b->res[first], &rw);
	k = bd_loop(b, &l, cg_sext64(f, cg_tid(f, 0)), rw.len, bd_i64(b, b->spec.threads));
	idx = member(b, &rw, b->row, k);
	for (int r = first; r < b->nres; r++)
		if (row_shaped(b, b->res[r]) && bd_same_shape(b->res[r], b->res[first]))
			fn(b, r, idx);
	bd_endloop(b, &l);
}

static void
row_elements(Bd *b, int r, BdElemFn *fn)
{
	CgFn *f = b->f;
	const Node *a = b->anchor;
	const Value *v = b->res[r];
	int nt = b->spec.threads;
	LLVMValueRef tid = cg_sext64(f, cg_tid(f, 0)), k, lo, hi, nv, R;
	CgExpr ev, er;
	BdRows rw;
	BdLoop l;
	CgIf c;

	if (row_shaped(b, v)) {
		rows_over(b, a, v, &rw);
		k = bd_loop(b, &l, tid, rw.len, bd_i64(b, nt));
		fn(b, r, member(b, &rw, b->row, k));
		bd_endloop(b, &l);
		return;
	}
	/* one element per row: thread 0 (either count may be beyond coef*T+k) */
	if (bd_numel_expr(b, v, &ev) == 0 && bd_row_count_expr(b, a, &er) == 0 && expr_eq(ev, er)) {
		int mark = bd_scope(b);
		cg_if(f, &c, bd_icmp(b, LLVMIntEQ, tid, bd_i64(b, 0)));
		fn(b, r, b->row);
		cg_endif(f, &c);
		bd_unscope(b, mark);
		return;
	}
	/* anything else: an even share of the flat elements */
	nv = bd_numel(b, v);
	R = cg_max(f, bd_row_count(b, a), bd_i64(b, 1));
	lo = cg_udiv(f, cg_mul(f, b->row, nv), R);
	hi = cg_udiv(f, cg_mul(f, cg_addi(f, b->row, 1), nv), R);
	k = bd_loop(b, &l, cg_add(f, lo, tid), hi, bd_i64(b, nt));
	fn(b, r, k);
	bd_endloop(b, &l);
}

void
bd_row_elements(Bd *b, BdElemFn *fn)
{
	int first = -1;

	row_members(b, fn);
	for (int r = 0; r < b->nres; r++) {
		if (row_shaped(b, b->res[r]) && first < 0)
			first = r;
		if (!row_shaped(b, b->res[r]) || !bd_same_shape(b->res[r], b->res[first]))
			row_elements(b, r, fn);
	}
}
