/*
 * bound-dyn: data-dependent shapes (`?` dims) become static upper bounds,
 * the real count staying in device memory, so that a graph fuse-moe did
 * not recognise still compiles: no host round trip, every launch fixed,
 * CUDA-graph capturable.
 *
 *	%nz = nonzero %m : i64[2,?]                 %nz = nonzero %m, bound=[2*T] : i64[2,2*T]
 *	                                      =>    %nz.count = reduce_sum (cast (cast %m, bool), i64) : i64[]
 *	%t = transpose %nz : i64[?,2]               %t = transpose %nz : i64[2*T,2]
 *	%s0, %s1 = split %t, axis=0, sizes=[1,1]    %s0 = slice %t, starts=[0], ends=[1]  (rows 0, 1)
 *	%h = matmul (gather %x, %i), $w : [?,64]    %h : [2*T,64]       (every row of the bound computed)
 *	%y = scatter_elements %z, %ix, %h           %y = scatter_elements %z, %ix, %h, %nz.count
 *
 *	%xs = slice %rows, %a, %b, %ax, %st         %xs = slice %rows, %a, %b, %ax, %st, padded=1 : [2*T,64]
 *	      : [?,64]                              %xs.count = max(clamp(%b) - clamp(%a), 0)
 *
 * A bounded value is laid out padded: its one bounded axis has the bound's
 * length, the real entries first (nonzero writes each dim's last index
 * past its count, a padded slice the axis' last entry: valid indices).
 * A slice with data bounds (the rows sorted by expert, cut by a running
 * sum) is a count of its own, the length of the slice.  Ops that only move
 * or map elements along other axes carry the padding through harmlessly (a
 * padded row computes garbage nobody reads); the ones where padding would
 * leak into real values are made count-aware (a scatter skips the update
 * rows past the count; a concat of pieces along their bounded axis is
 * compacted, when a user pins its length) or refused: a reduction, a
 * contraction, a shape of a padded value used as data.  A split along it
 * becomes slices (the export's trace fixed how many entries there are; the
 * interpreter checks that on the original).
 * All or nothing: if one node is refused, the graph stays as it was and the
 * fusion report says which node and why (codegen then refuses it too).
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct {
	int ax;			/* the bounded axis, -1: none */
	const Node *src;	/* the nonzero or data-bounded slice whose count it is */
	int64_t mult;		/* real extent = mult * count */
	int taint;		/* a shape read off a padded value (shape positions only) */
	int split;		/* 1: a scatter that gets the count; 2: a split along the
				 * bounded axis, becomes slices; 3: a slice with data bounds;
				 * 4: a slice of all of a padded value, becomes the value;
				 * 5: a concat of padded pieces, compacted */
	Type t;			/* the padded type */
} Info;

typedef struct {
	Module *m;
	Graph *g;
	PassCtx *c;
	Info *inf;		/* by value id, for the values that existed at the start */
	uint32_t nval;
	Info none;
	char why[256];
	const Node *bad;
	const Node **dsl;	/* the count sources (nonzeros) and data-bounded slices, in order */
	int ndsl;
} B;

/* A value's bounds; parameters, weights and new values have none. */
static Info *
info(B *b, const Value *v)
{
	if (!v || v->kind != V_RESULT || v->graph != b->g || v->id >= b->nval) {
		b->none = (Info){-1, NULL, 1, 0, 0, v ? v->type : b->none.t};
		return &b->none;
	}
	return &b->inf[v->id];
}

static int
fail(B *b, const Node *n, const char *what)
{
	snprintf(b->why, sizeof b->why, "%s", what);
	b->bad = n;
	return -1;
}

static int
has_unknown(const Module *m, const Type *t)
{
	for (int i = 0; i < t->rank; i++)
		if (ir_dim_has_unknown(m, t->dim[i]))
			return 1;
	return 0;
}

/* The mask m whose entries v repeats, each *f times: v is m made bool, or
 * reshaped, or broadcast by an expand (the repeats counted on the types;
 * -1 if they are symbolic).  nonzero(v) counts f * nonzero(m) entries. */
static const Value *
mask_root(const Value *v, int64_t *f)
{
	*f = 1;
	for (const Node *d; v->kind == V_RESULT && *f > 0; v = d->in[0]) {
		d = v->def;
		if (d->op == OP_EXPAND) {
			const Type *x = &d->in[0]->type, *y = &v->type;
			for (int i = 0; i < y->rank; i++) {
				int j = i - (y->rank - x->rank);
				if (j >= 0 && x->dim[j] == y->dim[i])
					continue;
				*f = (j < 0 || x->dim[j] == 1) && ir_dim_is_static(y->dim[i]) ? *f * y->dim[i] : -1;
			}
		} else if (!(d->op == OP_RESHAPE ||
			     (d->op == OP_CAST && (v->type.dt == DT_BOOL || d->in[0]->type.dt == DT_BOOL)))) {
			break;
		}
	}
	return v;
}

/* Result types of n with its operands at their padded types (a scratch
 * inference, as the interpreter does with actual types). */
static int
infer_padded(B *b, Node *n, Type *res)
{
	Type save_in[64], save_out[8];
	Diag quiet;
	int rc;

	if (n->nin > 64 || n->nout > 8)
		return -1;
	diag_init(&quiet, NULL);
	for (int i = 0; i < n->nin; i++)
		if (n->in[i]) {
			save_in[i] = n->in[i]->type;
			n->in[i]->type = info(b, n->in[i])->t;
		}
	for (int i = 0; i < n->nout; i++)
		save_out[i] = n->out[i]->type;
	rc = ir_infer(b->g, n, &quiet);
	for (int i = 0; i < n->nout; i++) {
		res[i] = n->out[i]->type;
		n->out[i]->type = save_out[i];
	}
	for (int i = n->nin - 1; i >= 0; i--)	/* reverse: an operand repeated keeps its own */
		if (n->in[i])
			n->in[i]->type = save_in[i];
	return rc;
}

/* A reshape's one unknown dim (a -1) from its input's elements. */
static void
solve_reshape(B *b, const Type *x, Type *y)
{
	Dim nx = 1;
	int64_t rest = 1;
	int unk = -1;

	for (int i = 0; i < x->rank; i++)
		nx = ir_dim_mul(b->m, nx, x->dim[i]);
	for (int i = 0; i < y->rank; i++) {
		if (ir_dim_has_unknown(b->m, y->dim[i]) && unk < 0)
			unk = i;
		else if (ir_dim_is_static(y->dim[i]))
			rest *= y->dim[i];
		else
			return;
	}
	if (unk >= 0 && rest > 0 && !ir_dim_has_unknown(b->m, nx))
		y->dim[unk] = ir_dim_div(b->m, nx, rest);
}

/* The one bounded operand among n's (all bounded ones must agree on the
 * count); NULL when none.  *k: its operand index. */
static const Info *
bounded_operand(B *b, const Node *n, int *k, int *clash)
{
	const Info *found = NULL;

	*clash = 0;
	for (int i = 0; i < n->nin; i++) {
		const Info *in = info(b, n->in[i]);
		if (in->ax < 0)
			continue;
		if (found && (found->src != in->src || found->mult != in->mult))
			*clash = 1;
		if (!found)
			found = in, *k = i;
	}
	return found;
}

/* Positions that take a shape (taint is allowed there). */
static int
shape_operand(const Node *n, int i)
{
	switch (n->op) {
	case OP_RESHAPE: case OP_EXPAND: case OP_TILE: return i == 1;
	case OP_SLICE: return i >= 1;
	case OP_CONSTANT_OF_SHAPE: return i == 0;
	default: return 0;
	}
}

static int64_t
static_prod(const Type *t, int from, int to, int *ok)
{
	int64_t p = 1;

	for (int i = from; i < to; i++) {
		if (!ir_dim_is_static(t->dim[i]))
			*ok = 0;
		else
			p *= t->dim[i];
	}
	return p;
}

/* Are a slice's starts and ends constants (operands or attributes)? */
static int
slice_static_bounds(const Node *n)
{
	for (int i = 1; i < 3 && i < n->nin; i++)
		if (!n->in[i] || n->in[i]->kind != V_RESULT || n->in[i]->def->op != OP_CONST)
			return 0;
	return 1;
}

/* A slice of a token dim with constant bounds inside the first `coef`
 * rows: its size does not depend on T (T >= 1). */
static int
slice_static(B *b, const Node *n, Type *r)
{
	int64_t st[MAXRANK], en[MAXRANK], ax[MAXRANK], sp[MAXRANK];
	int ns = ir_attr_ints(n, "starts", st, MAXRANK), ne = ir_attr_ints(n, "ends", en, MAXRANK);
	int na = ir_attr_ints(n, "axes", ax, MAXRANK), np = ir_attr_ints(n, "steps", sp, MAXRANK);
	const Type *x = &info(b, n->in[0])->t;

	if (n->nin > 1 || ns < 1 || ns != ne || (na >= 0 && na != ns) || (np >= 0 && np != ns))
		return -1;
	for (int i = 0; i < ns; i++) {
		int a = (int)(na >= 0 ? ax[i] : i);
		a = a < 0 ? a + x->rank : a;
		if (a < 0 || a >= x->rank || !ir_dim_has_unknown(b->m, r->dim[a]))
			continue;
		const DimExpr *e = ir_dim_expr(b->m, x->dim[a]);
		if ((np >= 0 && sp[i] != 1) || !e || st[i] < 0 || en[i] < st[i])
			return -1;
		if (en[i] <= e->coef)
			r->dim[a] = en[i] - st[i];
		else if (st[i] == 0 && en[i] >= INT32_MAX)
			r->dim[a] = x->dim[a];
		else
			return -1;
	}
	return has_unknown(b->m, r) ? -1 : 0;
}

/* The constant axis of a slice with operands, its step 1; -1 if not. */
static int
slice_axis(const Node *n, int rank)
{
	const Node *a = n->nin > 3 && n->in[3] && n->in[3]->kind == V_RESULT ? n->in[3]->def : NULL;
	const Node *p = n->nin > 4 && n->in[4] && n->in[4]->kind == V_RESULT ? n->in[4]->def : NULL;
	int64_t ax = -1, st = 1;

	if (!a || a->op != OP_CONST || ir_attr_ints(a, "value", &ax, 1) != 1 ||
	    (n->nin > 4 && n->in[4] && (!p || p->op != OP_CONST || ir_attr_ints(p, "value", &st, 1) != 1)) ||
	    st != 1)
		return -1;
	return ir_axis(ax, rank);
}

/*
 * x[start:end] along one axis, start and end data (sorted rows cut by a
 * running sum of counts): padded to the whole axis (an N-row tensor's slice
 * has at most N rows), its length end - start computed on the device.  The
 * slices with the same start, end and axis length share one count: the
 * first of them is its source.
 */
static int
data_slice(B *b, Node *n, Info *o)
{
	const Type *x = &info(b, n->in[0])->t;
	int a = slice_axis(n, x->rank);

	if (a < 0 || n->in[1]->type.rank != 1 || n->in[1]->type.dim[0] != 1 || n->in[2]->type.rank != 1 ||
	    n->in[2]->type.dim[0] != 1 || has_unknown(b->m, x))
		return fail(b, n, "a slice with data-dependent bounds this pass cannot bound (more than one "
			    "axis, a step other than 1, or axes that are data)");
	o->t = *x;
	o->ax = a, o->mult = 1, o->split = 3, o->src = n;
	for (int i = 0; i < b->ndsl; i++) {
		const Node *d = b->dsl[i];
		if (d->op == OP_SLICE && d->in[1] == n->in[1] && d->in[2] == n->in[2] && info(b, d->out[0])->ax == a &&
		    d->in[0]->type.dim[a] == n->in[0]->type.dim[a]) {
			o->src = d;
			break;
		}
	}
	b->dsl[b->ndsl++] = n;
	return 0;
}

/* x[0:shape(w)] with w padded like x (its padded dims, its count):
 * TorchScript's scatter_add takes src[:index.shape] this way.  Every entry
 * of x, real and padded, in place. */
static int
whole_slice(B *b, const Node *n, const Info *x)
{
	const Node *sh = n->nin > 2 && n->in[2]->kind == V_RESULT ? n->in[2]->def : NULL;
	const Info *w;
	int64_t st[MAXRANK];
	int ns;

	if (!sh || sh->op != OP_SHAPE || ir_attr(sh, "start") || ir_attr(sh, "end") || n->nin > 4 ||
	    (n->nin > 3 && n->in[3]) || n->in[1]->kind != V_RESULT || n->in[1]->def->op != OP_CONST)
		return 0;
	ns = ir_attr_ints(n->in[1]->def, "value", st, MAXRANK);
	w = info(b, sh->in[0]);
	if (ns != x->t.rank || w->src != x->src || w->mult != x->mult || w->ax != x->ax || w->t.rank != x->t.rank)
		return 0;
	for (int i = 0; i < ns; i++)
		if (st[i] != 0 || w->t.dim[i] != x->t.dim[i])
			return 0;
	return 1;
}

/* v's one integer when a const node makes it (a scalar or one element). */
static int
const_one(const Value *v, int64_t *x)
{
	return v && v->kind == V_RESULT && v->def->op == OP_CONST && ir_type_numel(&v->type) == 1 &&
	       ir_attr_ints(v->def, "value", x, 1) == 1;
}

/* The value whose padded length along its bounded axis v reads, as
 * TorchScript writes `[:n]` with n = w.shape[a]: shape(w) of a vector,
 * shape(w, start=a, end=a+1), or gather(shape(w), a) made a vector. */
static const Info *
padded_len(B *b, const Value *v)
{
	const Node *d = v && v->kind == V_RESULT ? v->def : NULL, *sh = d;
	int64_t a = 0;
	const Info *w;

	if (!d || v->type.rank != 1 || v->type.dim[0] != 1)
		return NULL;
	if (d->op == OP_RESHAPE && d->in[0]->kind == V_RESULT && ir_type_numel(&d->in[0]->type) == 1)
		d = sh = d->in[0]->def;
	if (d->op == OP_GATHER && !ir_attr_int(d, "axis", 0) && const_one(d->in[1], &a))
		sh = d->in[0]->kind == V_RESULT ? d->in[0]->def : NULL;
	else if (d->op == OP_SHAPE)
		a = ir_attr_int(d, "start", 0);
	else
		return NULL;
	if (!sh || sh->op != OP_SHAPE || (sh != d && (ir_attr(sh, "start") || ir_attr(sh, "end"))))
		return NULL;
	w = info(b, sh->in[0]);
	if (sh == d && ir_attr_int(sh, "end", w->t.rank) != a + 1)
		return NULL;
	return w->ax >= 0 && a == w->ax ? w : NULL;
}

/* x[0:n] along x's bounded axis, n the padded length of a value bounded by
 * the same count: all of x (TorchScript's index_put cuts the updates to the
 * length of its nonzero's indices this way). */
static int
len_slice(B *b, const Node *n, const Info *x)
{
	const Info *w = n->nin > 2 ? padded_len(b, n->in[2]) : NULL;
	int64_t st = -1, ax = 0;

	if (!w || !const_one(n->in[1], &st) || st != 0 || (n->nin > 3 && n->in[3] && !const_one(n->in[3], &ax)) ||
	    (n->nin > 4 && n->in[4]))
		return 0;
	return ir_axis(ax, x->t.rank) == x->ax && w->src == x->src && w->mult == x->mult &&
	       w->t.dim[w->ax] == x->t.dim[x->ax];
}

/* Does user u pin y's length along ax (*pin): a reshape to a static shape
 * (rows: y's elements per index of ax), or a scatter of y by indices of
 * known rows (static or symbolic)? */
static int
pinned(B *b, const Node *u, const Value *y, int ax, int64_t rows, Dim *pin)
{
	const Type *ix = u && u->nin > 2 ? &u->in[1]->type : NULL;
	int64_t ne;

	if (!u)
		return 0;
	if (u->op == OP_RESHAPE && u->in[0] == y && (ne = ir_type_numel(&u->out[0]->type)) > 0 && ne % rows == 0)
		return *pin = ne / rows, 1;
	if ((u->op == OP_SCATTER_ND || u->op == OP_SCATTER_ELEMENTS) && u->in[2] == y && u->in[0] != y &&
	    u->in[1] != y && ax < ix->rank - (u->op == OP_SCATTER_ND) && !ir_dim_has_unknown(b->m, ix->dim[ax]))
		return *pin = ix->dim[ax], 1;
	return 0;
}

/*
 * concat of pieces padded by their own counts along the axis they are
 * bounded on (the sorted rows' outputs put back together): compacted, each
 * piece's real rows copied to the running sum of the counts before it.  Its
 * length is data; the graph must pin it: a user reshapes the result to a
 * static shape or scatters it by static indices (TorchScript's trace wrote
 * the T*k rows it saw), so the result is that many rows, unpadded, as a
 * split along the bounded axis is (the interpreter checks the original).
 */
static int
concat_rule(B *b, Node *n, Info *o)
{
	int64_t ax = ir_attr_int(n, "axis", 0), rows = 1;
	Value *y = n->out[0];
	int ok = 1, found = 0;
	Dim pin = 0;

	o->t = info(b, n->in[0])->t;
	ax = ir_axis(ax, o->t.rank);
	for (int i = 0; i < n->nin; i++) {
		const Info *p = info(b, n->in[i]);
		if (p->ax != ax || p->t.rank != o->t.rank || p->t.dim[ax] != o->t.dim[ax])
			return fail(b, n, "a concat along a data-dependent dim of pieces not all bounded alike along it");
	}
	rows = static_prod(&o->t, 0, (int)ax, &ok) * static_prod(&o->t, (int)ax + 1, o->t.rank, &ok);
	for (int i = 0; i < y->nuse && ok && rows > 0 && !found; i++)
		found = pinned(b, y->use[i].node, y, (int)ax, rows, &pin);
	if (!found)
		return fail(b, n, "a concat along a data-dependent dim of pieces padded by different counts, "
			    "its length not pinned by a reshape to a static shape or a scatter's indices");
	o->t.dim[ax] = pin;
	o->split = 5;
	return 0;
}

/*
 * reshape: the bounded axis keeps the dims before it and those after it
 * (or merges with static dims after it: the count scales).  The target's
 * data-dependent dim (one at most) is where the bounded dim lands: copied
 * by a constant shape's 0, or inferred (-1, or a padded shape operand).
 */
static int
reshape_rule(B *b, Node *n, const Info *in, Info *out)
{
	const Type *x = &in->t;
	Type yt = n->out[0]->type;
	int ok = 1, unk = -1, nv = -1;
	int64_t rest = 1, pre, suf, val[MAXRANK];
	const Node *sh = n->nin > 1 && n->in[1]->kind == V_RESULT ? n->in[1]->def : NULL;

	if (sh && sh->op == OP_CONST)
		nv = ir_attr_ints(sh, "value", val, MAXRANK);
	for (int i = 0; i < yt.rank; i++) {
		if (ir_dim_has_unknown(b->m, yt.dim[i]) && nv == yt.rank && val[i] > 0 &&
		    !ir_attr_int(n, "allowzero", 0))
			yt.dim[i] = val[i];
		if (ir_dim_has_unknown(b->m, yt.dim[i]) && nv == yt.rank && val[i] == 0 && i < x->rank &&
		    i != in->ax && ir_dim_is_static(x->dim[i]))
			yt.dim[i] = x->dim[i];
		if (ir_dim_has_unknown(b->m, yt.dim[i])) {
			if (unk >= 0)
				return fail(b, n, "a reshape with two data-dependent dims");
			unk = i;
		} else if (!ir_dim_is_static(yt.dim[i])) {
			return fail(b, n, "a reshape of a padded value to a symbolic shape");
		} else {
			rest *= yt.dim[i];
		}
	}
	pre = static_prod(x, 0, in->ax, &ok);
	suf = static_prod(x, in->ax + 1, x->rank, &ok);
	if (!ok || unk < 0 || rest == 0)
		return fail(b, n, "a reshape of a padded value that does not keep its bounded dim");
	int64_t ypre = static_prod(&yt, 0, unk, &ok), ysuf = static_prod(&yt, unk + 1, yt.rank, &ok);
	if (ypre != pre || suf % ysuf)
		return fail(b, n, "a reshape of a padded value that moves its bounded dim");
	yt.dim[unk] = ir_dim_mul(b->m, x->dim[in->ax], suf / ysuf);
	*out = *in;
	out->split = 0;
	out->t = yt;
	out->ax = unk;
	out->mult = in->mult * (suf / ysuf);
	return 0;
}

/* The rule for one node: its results' padded types and bounds. */

/* A quantize or dequantize of padded x maps element to element when its
 * scale and zero point are not padded and do not run along the bounded
 * axis (per tensor, or per channel of another axis; a block is along the
 * axis it names): the padding rows compute garbage nobody reads. */
static int
q_elementwise(B *b, const Node *n, const Info *bi)
{
	int64_t a = ir_attr_int(n, "axis", 1);

	for (int i = 1; i < n->nin; i++)
		if (n->in[i] && info(b, n->in[i])->ax >= 0)
			return 0;
	if (n->in[1]->type.rank == 0)
		return 1;
	a = a < 0 ? a + bi->t.rank : a;
	return a != bi->ax;
}

static int
rule(B *b, Node *n)
{
	int k = 0, clash, taint = 0, unknown = 0;
	const Info *bi = bounded_operand(b, n, &k, &clash);
	Type res[8];

	for (int i = 0; i < n->nin; i++)
		if (info(b, n->in[i])->taint) {
			if (!shape_operand(n, i) && n->op != OP_SHAPE && n->op != OP_SIZE)
				taint = 1;
		}
	for (int i = 0; i < n->nout; i++)
		unknown |= has_unknown(b->m, &n->out[i]->type);
	if (!bi && !taint && !unknown && n->op != OP_NONZERO)
		return 0;
	if (bi && n->op == OP_CONCAT && ir_axis(ir_attr_int(n, "axis", 0), bi->t.rank) == bi->ax && !taint) {
		*info(b, n->out[0]) = (Info){-1, NULL, 1, 0, 0, n->out[0]->type};
		return concat_rule(b, n, info(b, n->out[0]));
	}
	if (clash)
		return fail(b, n, "operands bounded by different counts");
	if (n->nout > 8)
		return fail(b, n, "more than 8 results");
	for (int i = 0; i < n->nout; i++) {
		Info *o = info(b, n->out[i]);
		*o = (Info){-1, NULL, 1, 0, 0, n->out[i]->type};
	}
	Info *o = info(b, n->out[0]);
	if (n->op == OP_NONZERO) {
		const Type *x = &info(b, n->in[0])->t;
		Dim N = 1;
		if (bi || has_unknown(b->m, x))
			return fail(b, n, "a nonzero of a data-dependent shape");
		for (int i = 0; i < x->rank; i++)
			N = ir_dim_mul(b->m, N, x->dim[i]);
		o->t.dim[1] = N;
		o->ax = 1, o->src = n, o->mult = 1;
		for (int i = 0; i < b->ndsl; i++) {	/* a nonzero of the same mask: its count (times f) */
			int64_t f, fd;
			const Node *d = b->dsl[i];
			if (d->op == OP_NONZERO && mask_root(d->in[0], &fd) == mask_root(n->in[0], &f) &&
			    f > 0 && fd > 0 && f % fd == 0)
				o->src = d, o->mult = f / fd;
		}
		if (o->src == n)
			b->dsl[b->ndsl++] = n;
		return 0;
	}
	if (taint) {	/* shape arithmetic on padded shapes: stays shape arithmetic */
		if (bi)
			return fail(b, n, "a padded shape used as data");
		if (infer_padded(b, n, res) || has_unknown(b->m, &res[0]))
			return fail(b, n, "shape arithmetic on padded shapes");
		for (int i = 0; i < n->nout; i++)
			info(b, n->out[i])->t = res[i], info(b, n->out[i])->taint = 1;
		return 0;
	}
	if (!bi && n->op == OP_SLICE && n->nin > 2 && !slice_static_bounds(n))
		return data_slice(b, n, o);
	const Node *sh = n->op == OP_CONSTANT_OF_SHAPE && n->nin == 1 && n->in[0]->kind == V_RESULT ?
			 n->in[0]->def : NULL;
	if (sh && sh->op == OP_SHAPE && !ir_attr(sh, "start") && !ir_attr(sh, "end") &&
	    !has_unknown(b->m, &info(b, sh->in[0])->t)) {	/* zeros(shape(w)), w's type static now */
		o->t.rank = info(b, sh->in[0])->t.rank;
		memcpy(o->t.dim, info(b, sh->in[0])->t.dim, sizeof o->t.dim);
		return 0;
	}
	if (!bi && infer_padded(b, n, res) == 0) {	/* a `?` the operands' static types resolve */
		int all = 1;
		if (n->op == OP_RESHAPE)
			solve_reshape(b, &info(b, n->in[0])->t, &res[0]);
		for (int i = 0; i < n->nout; i++)
			all &= !has_unknown(b->m, &res[i]);
		for (int i = 0; all && i < n->nout; i++)
			info(b, n->out[i])->t = res[i];
		if (all)
			return 0;
	}
	if (!bi) {	/* a `?` that is no count: a slice of the first rows of T */
		if (n->op != OP_SLICE || infer_padded(b, n, res) || slice_static(b, n, &res[0]))
			return fail(b, n, "a data-dependent shape this pass cannot bound");
		o->t = res[0];
		return 0;
	}
	if (n->op == OP_SHAPE || n->op == OP_SIZE) {
		o->taint = 1;
		return 0;
	}
	if (n->op == OP_RESHAPE)
		return reshape_rule(b, n, bi, o);
	if (n->op == OP_SCATTER_ELEMENTS || n->op == OP_SCATTER_ND) {
		const Info *ix = info(b, n->in[1]), *up = info(b, n->in[2]);
		if (info(b, n->in[0])->ax >= 0 || ix->ax != 0 || up->ax != 0 || n->nin > 3)
			return fail(b, n, "a scatter whose indices and updates are not bounded by their rows");
		if (infer_padded(b, n, res))
			return fail(b, n, "a scatter of padded values");
		o->t = res[0];
		o->split = 1;	/* marks: gets the count operand */
		return 0;
	}
	if (n->op == OP_SPLIT) {
		int64_t ax = ir_attr_int(n, "axis", 0);
		ax = ax < 0 ? ax + bi->t.rank : ax;
		if (ax == bi->ax) {	/* into static pieces: slices of the real entries */
			for (int i = 0; i < n->nout; i++)
				if (!ir_type_static(&n->out[i]->type) && has_unknown(b->m, &n->out[i]->type))
					return fail(b, n, "a split of a data-dependent dim into data-dependent parts");
			o->split = 2;
			return 0;
		}
	}
	if (infer_padded(b, n, res))
		return fail(b, n, "shape inference fails on the padded operands");
	/* where the bounded axis goes */
	int ax = -1;
	int rx = bi->t.rank, ry = res[0].rank;
	Op op = n->op;
	if ((ir_opinfo[op].flags & OPF_EW) || op == OP_IDENTITY || op == OP_SPLIT)
		ax = ry - rx + bi->ax;
	else if (op == OP_TRANSPOSE) {
		int64_t perm[MAXRANK];
		int np = ir_attr_ints(n, "perm", perm, MAXRANK);
		for (int i = 0; i < ry; i++)
			if ((np == ry ? perm[i] : ry - 1 - i) == bi->ax)
				ax = i;
	} else if (op == OP_GATHER) {
		int64_t g = ir_attr_int(n, "axis", 0);
		g = g < 0 ? g + info(b, n->in[0])->t.rank : g;
		if (k == 1)
			ax = (int)g + bi->ax;
		else if (info(b, n->in[1])->ax >= 0)
			return fail(b, n, "a gather from a padded value by padded indices");
		else if (bi->ax == g)
			ax = -1;	/* reads real entries: valid indices are below the count */
		else
			ax = bi->ax < g ? bi->ax : bi->ax - 1 + info(b, n->in[1])->t.rank;
	} else if (op == OP_SWIGLU && bi->ax < rx - 1) {
		ax = bi->ax;	/* pairs along the last axis: rows map to rows */
	} else if (op == OP_GATHER_ND && k == 1 && info(b, n->in[0])->ax < 0 &&
		   ir_attr_int(n, "batch_dims", 0) == 0 && bi->ax < rx - 1) {
		ax = bi->ax;	/* rows of padded (valid) indices: padded result rows */
	} else if (op == OP_MATMUL && k == 0 && bi->ax < rx - 1)
		ax = ry - rx + bi->ax;
	else if (op == OP_EXPAND && k == 0) {
		/* the shape operand may be a padded shape: shape %w gives w's padded dims */
		const Node *sh = n->nin > 1 && n->in[1] && n->in[1]->kind == V_RESULT ? n->in[1]->def : NULL;
		const Type *w = sh && sh->op == OP_SHAPE && sh->nin == 1 && !ir_attr(sh, "start") &&
				!ir_attr(sh, "end") ? &info(b, sh->in[0])->t : NULL;
		Type wt = w ? *w : bi->t;
		ax = ry - rx + bi->ax;
		for (int i = 0; i < ry; i++)
			if (ir_dim_has_unknown(b->m, res[0].dim[i])) {
				int j = i - (ry - wt.rank);
				if (!w || wt.rank != ry || j < 0)
					return fail(b, n, "an expand to a data-dependent shape");
				res[0].dim[i] = wt.dim[j];
			}
	} else if (op == OP_SLICE && k == 0 && (whole_slice(b, n, bi) || len_slice(b, n, bi))) {
		res[0] = bi->t;
		ax = bi->ax;
		info(b, n->out[0])->split = 4;	/* x itself */
	} else if (op == OP_SLICE && k == 0) {
		int64_t axes[MAXRANK], st[MAXRANK], en[MAXRANK];
		int na = ir_attr_ints(n, "axes", axes, MAXRANK), ns = ir_attr_ints(n, "starts", st, MAXRANK);
		ir_attr_ints(n, "ends", en, MAXRANK);
		if (n->nin > 1 || ns < 0)
			return fail(b, n, "a slice of a padded value with data-dependent bounds");
		for (int i = 0; i < ns; i++) {
			int a = (int)(na >= 0 ? axes[i] : i);
			a = a < 0 ? a + rx : a;
			if (a == bi->ax && !(st[i] == 0 && en[i] >= INT32_MAX))
				return fail(b, n, "a slice along a data-dependent dim");
			if (a == bi->ax)
				res[0].dim[a] = bi->t.dim[a];
		}
		ax = bi->ax;
	} else if (op == OP_CONCAT && k >= 0) {
		int64_t c = ir_attr_int(n, "axis", 0);
		c = c < 0 ? c + rx : c;
		for (int i = 0; i < n->nin; i++)
			if (info(b, n->in[i])->ax != bi->ax)
				return fail(b, n, "a concat of padded and unpadded values");
		if (c == bi->ax)
			return fail(b, n, "a concat along a data-dependent dim");
		ax = bi->ax;
	} else if ((op == OP_QUANTIZE || op == OP_DEQUANTIZE) && k == 0 && q_elementwise(b, n, bi)) {
		ax = bi->ax;	/* per tensor or along another axis: element by element */
	} else if (op == OP_CAST || op == OP_SOFTMAX || op == OP_LOG_SOFTMAX) {
		int64_t a = ir_attr_int(n, "axis", -1);
		if (op != OP_CAST && (a < 0 ? a + rx : a) == bi->ax)
			return fail(b, n, "a softmax along a data-dependent dim");
		ax = bi->ax;
	} else {
		char w[128];
		snprintf(w, sizeof w, "%s of a padded value (operand %d)", ir_opname(op), k);
		return fail(b, n, w);
	}
	if (ax >= 0 && ax >= ry)
		return fail(b, n, "lost the bounded dim");
	for (int i = 0; i < n->nout; i++) {
		Info *oi = info(b, n->out[i]);
		oi->t = res[i];
		if (ax >= 0)
			oi->ax = ax, oi->src = bi->src, oi->mult = bi->mult;
		if (has_unknown(b->m, &oi->t))
			return fail(b, n, "a data-dependent dim left after bounding");
	}
	return 0;
}

/* --- the rewrite --------------------------------------------------------- */

static Builder
builder(B *b, Node *before, const Node *n)
{
	Builder bb;

	memset(&bb, 0, sizeof bb);
	bb.g = b->g;
	bb.before = before;
	bb.loc = n->loc;
	bb.d = b->c->d;
	return bb;
}

/* %nz.count = reduce_sum(cast(cast(x, bool), i64)) : i64[] right after the nonzero */
static Value *
count_of(B *b, Node *nz)
{
	Builder bb = builder(b, nz->next, nz);
	Value *x = nz->in[0], *c;
	int64_t axes[MAXRANK];

	if (x->type.dt != DT_BOOL) {
		ir_b_str(&bb, "to", "bool");
		x = ir_b1(&bb, OP_CAST, x);
	}
	ir_b_str(&bb, "to", "i64");
	x = ir_b1(&bb, OP_CAST, x);
	for (int i = 0; i < x->type.rank; i++)
		axes[i] = i;
	ir_b_ints(&bb, "axes", axes, x->type.rank);
	ir_b_int(&bb, "keepdims", 0);
	c = ir_b1(&bb, OP_REDUCE_SUM, x);
	if (c)
		ir_set_name(b->g, c, arena_printf(b->m->arena, "%s.count", nz->out[0]->name));
	return bb.err ? NULL : c;
}

/* split along the bounded axis -> one slice per piece */
static int
split_to_slices(B *b, Node *n)
{
	int64_t ax = ir_attr_int(n, "axis", 0), off = 0;
	Value *x = n->in[0];

	ax = ax < 0 ? ax + x->type.rank : ax;
	for (int i = 0; i < n->nout; i++) {
		Builder bb = builder(b, n, n);
		int64_t len = n->out[i]->type.dim[ax], end = off + len;
		ir_b_ints(&bb, "starts", &off, 1);
		ir_b_ints(&bb, "ends", &end, 1);
		ir_b_ints(&bb, "axes", &ax, 1);
		Node *s = ir_b_node(&bb, OP_SLICE, &x, 1, 1);
		if (!s)
			return -1;
		s->out[0]->type = n->out[i]->type;
		ir_replace_uses(b->g, n->out[i], s->out[0]);
		ir_set_name(b->g, s->out[0], n->out[i]->name);
		off = end;
	}
	ir_erase(b->g, n);
	return 0;
}

/* ONNX's start or end v clamped into [0, N] (negative counts from the end). */
static Value *
clamp_bound(Builder *bb, Value *v, Value *N)
{
	int64_t z = 0;
	Value *zero = ir_b_const_i(bb, DT_I64, &z, 1, 0);
	Value *w[3] = {ir_b2(bb, OP_LESS, v, zero), ir_b2(bb, OP_ADD, v, N), v};
	Node *sel = ir_b_node(bb, OP_WHERE, w, 3, 1);

	return sel ? ir_b2(bb, OP_MIN, ir_b2(bb, OP_MAX, sel->out[0], zero), N) : NULL;
}

/* A data-bounded slice: padded=1, and for the first of its bounds the count
 * %s.count = max(clamp(end) - clamp(start), 0) right after it. */
static int
pad_slice(B *b, Node *n, Value **count)
{
	const Info *in = info(b, n->out[0]);
	int64_t a = in->ax, z = 0, nn = n->in[0]->type.dim[a];
	Builder bb = builder(b, n->next, n);
	Value *N, *c;

	ir_set_int(b->m, n, "padded", 1);
	if (in->src != n)
		return 0;
	if (ir_dim_is_static(n->in[0]->type.dim[a])) {
		N = ir_b_const_i(&bb, DT_I64, &nn, 1, 0);
	} else {
		int64_t e = a + 1;
		ir_b_int(&bb, "start", a);
		ir_b_int(&bb, "end", e);
		N = ir_b1(&bb, OP_SHAPE, n->in[0]);
	}
	c = ir_b2(&bb, OP_SUB, clamp_bound(&bb, n->in[2], N), clamp_bound(&bb, n->in[1], N));
	c = ir_b2(&bb, OP_MAX, c, ir_b_const_i(&bb, DT_I64, &z, 1, 0));
	if (bb.err || !c)
		return -1;
	ir_set_name(b->g, c, arena_printf(b->m->arena, "%s.count", n->out[0]->name));
	count[n->out[0]->id] = c;
	return 0;
}

static int
add_count(B *b, Node *n, Value **count)
{
	const Info *ix = info(b, n->in[1]);
	Value *c = count[ix->src->out[0]->id], *in[4] = {n->in[0], n->in[1], n->in[2], NULL};
	Builder bb = builder(b, n, n);

	if (ix->mult != 1) {
		int64_t m = ix->mult;
		c = ir_b2(&bb, OP_MUL, c, ir_b_const_i(&bb, DT_I64, &m, 1, 0));
	}
	in[3] = c;
	Node *s = ir_new_node(b->g, n->op, in, 4, 1);
	ir_copy_attrs(b->m, s, n);
	s->loc = n->loc;
	s->out[0]->type = n->out[0]->type;
	ir_insert(b->g, n, s);
	pass_take_over(b->g, n, n->out[0], s->out[0]);
	return bb.err ? -1 : 0;
}

/* The counts of concat n's pieces, [E] (i64), before n. */
static Value *
piece_counts(B *b, Builder *bb, const Node *n, Value **count)
{
	Value **c = xcalloc((size_t)n->nin + 1, sizeof *c), *cs = NULL;
	int64_t one = 1;
	Node *nc;
	int i;

	for (i = 0; i < n->nin; i++) {
		const Info *p = info(b, n->in[i]);
		int64_t m = p->mult;
		if (!(c[i] = count[p->src->out[0]->id]))
			break;
		if (m != 1)
			c[i] = ir_b2(bb, OP_MUL, c[i], ir_b_const_i(bb, DT_I64, &m, 1, 0));
		ir_b_ints(bb, "shape", &one, 1);
		c[i] = ir_b1(bb, OP_RESHAPE, c[i]);
	}
	if (i == n->nin && !bb->err) {
		ir_b_int(bb, "axis", 0);
		cs = (nc = ir_b_node(bb, OP_CONCAT, c, n->nin, 1)) ? nc->out[0] : NULL;
	}
	free(c);
	return cs;
}

/*
 * The compaction of concat n (pinned to P rows along axis a): the padded
 * pieces concatenated, then row r of the result is row r - start[e] of
 * piece e, e the piece whose rows [start[e], end[e]) hold r (end = the
 * running sum of the counts): e = #{end <= r}; rows past the last end (the
 * trace pinned them away) read row 0.
 */
static Value *
compact(B *b, Node *n, Value **count)
{
	Builder bb = builder(b, n, n);
	int64_t ax = ir_axis(ir_attr_int(n, "axis", 0), n->in[0]->type.rank);
	int64_t E = n->nin, zero = 0, k1 = 1, last = E - 1;
	Dim P = info(b, n->out[0])->t.dim[ax], N = n->in[0]->type.dim[ax];
	Value *cat, *cs, *end, *start, *e, *ri, *Nv;
	Node *nc;

	if (!(cs = piece_counts(b, &bb, n, count)))
		return NULL;
	ir_b_int(&bb, "axis", ax);
	cat = (nc = ir_b_node(&bb, OP_CONCAT, n->in, n->nin, 1)) ? nc->out[0] : NULL;	/* E pieces of N */
	ir_b_int(&bb, "axis", 0);
	end = ir_b1(&bb, OP_CUMSUM, cs);
	start = end ? ir_b2(&bb, OP_SUB, end, cs) : NULL;
	ri = pass_iota(&bb, &P, 1, 0);	/* r = 0 .. P-1 */
	if (ir_dim_is_static(N)) {
		Nv = ir_b_const_i(&bb, DT_I64, &N, 1, 0);
	} else {
		ir_b_int(&bb, "start", ax);
		ir_b_int(&bb, "end", ax + 1);
		Nv = ir_b1(&bb, OP_SHAPE, n->in[0]);
	}
	if (!cat || !start || !ri || !Nv)
		return NULL;
	/* e = #{end <= r}: the piece of row r, E past the last end */
	Dim row[2] = {1, E}, col[2] = {P, 1};
	ir_b_dims(&bb, "shape", row, 2);
	Value *endr = ir_b1(&bb, OP_RESHAPE, end);
	ir_b_dims(&bb, "shape", col, 2);
	e = ir_b2(&bb, OP_LESS_EQUAL, endr, ir_b1(&bb, OP_RESHAPE, ri));
	ir_b_str(&bb, "to", "i64");
	e = ir_b1(&bb, OP_CAST, e);
	ir_b_ints(&bb, "axes", &k1, 1);
	ir_b_int(&bb, "keepdims", 0);
	if (!(e = ir_b1(&bb, OP_REDUCE_SUM, e)))
		return NULL;
	Value *valid = ir_b2(&bb, OP_LESS, e, ir_b_const_i(&bb, DT_I64, &E, 1, 0));
	Value *ec = ir_b2(&bb, OP_MIN, e, ir_b_const_i(&bb, DT_I64, &last, 1, 0));
	/* its row in the padded pieces: e*N + r - start[e] */
	ir_b_int(&bb, "axis", 0);
	Value *st = ir_b2(&bb, OP_GATHER, start, ec);
	Value *src = ir_b2(&bb, OP_ADD, ir_b2(&bb, OP_MUL, ec, Nv), ir_b2(&bb, OP_SUB, ri, st));
	if (bb.err)
		return NULL;
	Value *w[3] = {valid, src, ir_b_const_i(&bb, DT_I64, &zero, 1, 0)};
	src = (nc = ir_b_node(&bb, OP_WHERE, w, 3, 1)) ? nc->out[0] : NULL;
	ir_b_int(&bb, "axis", ax);
	Value *y = src ? ir_b2(&bb, OP_GATHER, cat, src) : NULL;
	return bb.err ? NULL : y;
}

/* The fusion report's line for a count source: what bounding it costs. */
static void
data_slice_note(B *b, const Node *n, const Value *c)
{
	int more = 0;
	char s[64];

	for (int i = 0; i < b->ndsl; i++)
		more += b->dsl[i] != n && info(b, b->dsl[i]->out[0])->src == n;
	ir_dim_print(s, sizeof s, b->m, n->in[0]->type.dim[info(b, n->out[0])->ax]);
	report_note(b->c->report, "slice %%%s (and %d more with the same bounds) not fused: data-dependent "
		    "bounds, padded to the %s rows of the sliced axis, the length stays on the device (%%%s); "
		    "every row up to the bound is computed", n->out[0]->name, more, s, c->name);
}

static int
apply(B *b)
{
	Value **count = xcalloc(b->nval + 1, sizeof *count);
	int nnz = 0, rc = 0;
	Node *next;

	for (Node *n = b->g->first; n && rc == 0; n = next) {
		next = n->next;
		if (n->nout == 0 || n->out[0]->id >= b->nval)
			continue;	/* made here */
		for (int i = 0; i < n->nout; i++)	/* the padded types */
			n->out[i]->type = info(b, n->out[i])->t;
		if (n->op == OP_NONZERO) {
			Dim bound = n->out[0]->type.dim[1];
			char s[64];
			ir_set_dims(b->m, n, "bound", &bound, 1);
			if (info(b, n->out[0])->src != n)
				continue;	/* the same mask's nonzero before it counts */
			if (!(count[n->out[0]->id] = count_of(b, n)))
				rc = -1;
			next = n->next;
			ir_dim_print(s, sizeof s, b->m, bound);
			report_note(b->c->report, "nonzero %%%s not fused: bounded by %s entries, the count "
				    "stays on the device (%%%s); every row up to the bound is computed",
				    n->out[0]->name, s, count[n->out[0]->id] ? count[n->out[0]->id]->name : "?");
			nnz++;
		} else if (info(b, n->out[0])->split == 3) {
			rc = pad_slice(b, n, count);
			if (rc == 0 && count[n->out[0]->id])
				data_slice_note(b, n, count[n->out[0]->id]);
		} else if (info(b, n->out[0])->split == 5) {
			Value *y = compact(b, n, count);
			char s[64];
			if (!y) {
				rc = -1;
				continue;
			}
			ir_dim_print(s, sizeof s, b->m, y->type.dim[ir_axis(ir_attr_int(n, "axis", 0), y->type.rank)]);
			report_note(b->c->report, "concat %%%s not fused: %d pieces padded by their own counts, "
				    "compacted to the %s rows the graph pins (a running sum of the counts, a gather of "
				    "each row)", n->out[0]->name, n->nin, s);
			pass_take_over(b->g, n, n->out[0], y);
		} else if (info(b, n->out[0])->split == 4) {
			ir_replace_uses(b->g, n->out[0], n->in[0]);
			ir_erase(b->g, n);
		} else if (info(b, n->out[0])->split == 2) {
			rc = split_to_slices(b, n);
		} else if (info(b, n->out[0])->split == 1) {
			rc = add_count(b, n, count);
		}
	}
	free(count);
	return rc ? -1 : nnz;
}

int
bound_dyn(Module *m, PassCtx *c)
{
	B b;
	int any = 0, rc = 0;

	memset(&b, 0, sizeof b);
	b.m = m;
	b.c = c;
	b.g = ir_main_graph(m);
	if (!b.g)
		return 0;
	for (Node *n = b.g->first; n; n = n->next)
		for (int i = 0; i < n->nout; i++)
			any |= has_unknown(m, &n->out[i]->type);
	if (!any)
		return 0;
	b.nval = m->nvalue;
	b.inf = xcalloc(m->nvalue + 1, sizeof *b.inf);
	b.dsl = xcalloc(m->nvalue + 1, sizeof *b.dsl);
	for (uint32_t i = 0; i < m->nvalue; i++)
		b.inf[i] = (Info){-1, NULL, 1, 0, 0, {0}};
	for (Node *n = b.g->first; n; n = n->next)
		for (int i = 0; i < n->nout; i++)
			b.inf[n->out[i]->id].t = n->out[i]->type;
	ir_fill_uses(b.g);
	for (Node *n = b.g->first; n && rc == 0; n = n->next)
		rc = rule(&b, n);
	for (int i = 0; rc == 0 && i < b.g->nret; i++)
		if (info(&b, b.g->ret[i])->ax >= 0 || info(&b, b.g->ret[i])->taint)
			rc = fail(&b, b.g->ret[i]->def, "an output with a data-dependent shape");
	if (rc) {
		report_skip(c->report, "data-dependent shapes not bounded at %s %%%s: %s; the graph "
			    "cannot be compiled; cost: no bundle (the interpreter, moec run, still runs it)", ir_opname(b.bad->op),
			    b.bad->nout ? b.bad->out[0]->name : "", b.why);
		free(b.inf);
		free(b.dsl);
		return 0;
	}
	rc = apply(&b);
	free(b.inf);
	free(b.dsl);
	return rc < 0 ? -1 : 1;
}
