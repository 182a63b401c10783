/*
 * infer.c — shape inference: each op's result types from its operands and
 * attributes, with symbolic dims carried through (T*2, batch*seq) and "?"
 * for what depends on data.  One rule per op, in a table indexed by op.
 *
 * The interpreter reuses these rules on concrete types, so a rule must give
 * exact static dims whenever its operands are static.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef int InferFn(Graph *g, Node *n, Diag *d);

#define ERR(...) diag_error(d, n->loc, __VA_ARGS__)

static const Type *
ty(const Node *n, int i)
{
	return &n->in[i]->type;
}

static int
has(const Node *n, int i)
{
	return i < n->nin && n->in[i];
}

static Dim
bdim(Module *m, Dim a, Dim b, int *ok)
{
	if (a == b || b == 1)
		return a;
	if (a == 1)
		return b;
	if (a >= 0 && b >= 0) {
		*ok = 0;
		return a;
	}
	if (a >= 0)
		return a;	/* a static size is more precise than a symbol */
	if (b >= 0)
		return b;
	return ir_dim_has_unknown(m, a) ? b : a;
}

int
ir_broadcast(Module *m, const Type *a, const Type *b, Type *out)
{
	int r = MAX(a->rank, b->rank), ok = 1;

	memset(out, 0, sizeof *out);
	out->dt = a->dt;
	out->rank = r;
	for (int i = 0; i < r; i++) {
		int ia = i - (r - a->rank), ib = i - (r - b->rank);
		Dim da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
		out->dim[i] = bdim(m, da, db, &ok);
	}
	return ok ? 0 : -1;
}

static int
shape_str(char *buf, size_t n, const Module *m, const Type *t)
{
	return ir_type_print(buf, n, m, t);
}

static int
bcast_err(Graph *g, Node *n, Diag *d, const Type *a, const Type *b)
{
	char x[128], y[128];

	shape_str(x, sizeof x, g->m, a);
	shape_str(y, sizeof y, g->m, b);
	return ERR("%s: cannot broadcast %s with %s", ir_opname(n->op), x, y);
}

static int
same_dtype(Node *n, Diag *d, int i, int j)
{
	if (ty(n, i)->dt != ty(n, j)->dt)
		return ERR("%s: operands have different types %s and %s", ir_opname(n->op),
			   dtype_name(ty(n, i)->dt), dtype_name(ty(n, j)->dt));
	return 0;
}

static int
out_dtype(Node *n, Diag *d, const char *key, DType def, DType *dt)
{
	const char *s = ir_attr_str(n, key, NULL);

	*dt = def;
	if (s && dtype_parse(s, strlen(s), dt) != 0)
		return ERR("%s: unknown type '%s' in %s=", ir_opname(n->op), s, key);
	return 0;
}

/* --- elementwise --------------------------------------------------------- */

static int
infer_unary(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);

	if (n->op == OP_CAST && out_dtype(n, d, "to", t.dt, &t.dt))
		return -1;
	if (n->op == OP_CAST && !ir_attr(n, "to"))
		return ERR("cast: missing to=");
	if (n->op == OP_NOT && t.dt != DT_BOOL)
		return ERR("not: operand must be bool, not %s", dtype_name(t.dt));
	if (n->op != OP_CAST && n->op != OP_NOT && n->op != OP_IDENTITY &&
	    n->op != OP_NEG && n->op != OP_ABS && n->op != OP_RELU &&
	    n->op != OP_CLIP && !dtype_is_float(t.dt))
		return ERR("%s: operand must be a float type, not %s", ir_opname(n->op),
			   dtype_name(t.dt));
	n->out[0]->type = t;
	return 0;
}

static int
infer_binary(Graph *g, Node *n, Diag *d)
{
	Type t;
	Op op = n->op;

	if (op != OP_POW && same_dtype(n, d, 0, 1))
		return -1;
	if (ir_broadcast(g->m, ty(n, 0), ty(n, 1), &t))
		return bcast_err(g, n, d, ty(n, 0), ty(n, 1));
	if (op == OP_EQUAL || op == OP_GREATER || op == OP_LESS ||
	    op == OP_GREATER_EQUAL || op == OP_LESS_EQUAL)
		t.dt = DT_BOOL;
	if ((op == OP_AND || op == OP_OR) && ty(n, 0)->dt != DT_BOOL)
		return ERR("%s: operands must be bool", ir_opname(op));
	n->out[0]->type = t;
	return 0;
}

static int
infer_where(Graph *g, Node *n, Diag *d)
{
	Type t, u;

	if (ty(n, 0)->dt != DT_BOOL)
		return ERR("where: condition must be bool, not %s", dtype_name(ty(n, 0)->dt));
	if (same_dtype(n, d, 1, 2))
		return -1;
	if (ir_broadcast(g->m, ty(n, 1), ty(n, 2), &t))
		return bcast_err(g, n, d, ty(n, 1), ty(n, 2));
	if (ir_broadcast(g->m, &t, ty(n, 0), &u))
		return bcast_err(g, n, d, &t, ty(n, 0));
	u.dt = ty(n, 1)->dt;
	n->out[0]->type = u;
	return 0;
}

/* swiglu: [..., 2N] -> [..., N]; layout=concat (gate then up) or interleave */
static int
infer_swiglu(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);
	const char *lay = ir_attr_str(n, "layout", "concat");

	if (strcmp(lay, "concat") != 0 && strcmp(lay, "interleave") != 0)
		return ERR("swiglu: layout must be concat or interleave, not %s", lay);
	if (t.rank < 1)
		return ERR("swiglu: operand must have rank >= 1");
	t.dim[t.rank - 1] = ir_dim_div(g->m, t.dim[t.rank - 1], 2);
	if (ty(n, 0)->dim[t.rank - 1] >= 0 && ty(n, 0)->dim[t.rank - 1] % 2)
		return ERR("swiglu: last dim must be even");
	if (out_dtype(n, d, "to", t.dt, &t.dt))
		return -1;
	n->out[0]->type = t;
	return 0;
}

/* --- linear algebra ------------------------------------------------------ */

static int
infer_matmul(Graph *g, Node *n, Diag *d)
{
	Type a = *ty(n, 0), b = *ty(n, 1), out;
	int ta = (int)ir_attr_int(n, "trans_a", 0), tb = (int)ir_attr_int(n, "trans_b", 0);
	int va = a.rank == 1, vb = b.rank == 1;
	Dim k1, k2, t;

	if (a.rank == 0 || b.rank == 0)
		return ERR("matmul: operands must have rank >= 1");
	if (same_dtype(n, d, 0, 1))
		return -1;
	if (va) {	/* [K] -> [1,K] */
		a.dim[1] = a.dim[0];
		a.dim[0] = 1;
		a.rank = 2;
		ta = 0;
	}
	if (vb) {	/* [K] -> [K,1] */
		b.dim[1] = 1;
		b.rank = 2;
		tb = 0;
	}
	if (ta) {
		t = a.dim[a.rank - 1], a.dim[a.rank - 1] = a.dim[a.rank - 2], a.dim[a.rank - 2] = t;
	}
	if (tb) {
		t = b.dim[b.rank - 1], b.dim[b.rank - 1] = b.dim[b.rank - 2], b.dim[b.rank - 2] = t;
	}
	k1 = a.dim[a.rank - 1];
	k2 = b.dim[b.rank - 2];
	if (!ir_dim_compatible(g->m, k1, k2)) {
		char x[64], y[64];
		ir_dim_print(x, sizeof x, g->m, k1);
		ir_dim_print(y, sizeof y, g->m, k2);
		return ERR("matmul: inner dims differ: %s vs %s", x, y);
	}
	/* batch dims broadcast */
	Type ba = a, bb = b;
	ba.rank -= 2;
	bb.rank -= 2;
	if (ir_broadcast(g->m, &ba, &bb, &out))
		return bcast_err(g, n, d, ty(n, 0), ty(n, 1));
	if (!va)
		out.dim[out.rank++] = a.dim[a.rank - 2];
	if (!vb)
		out.dim[out.rank++] = b.dim[b.rank - 1];
	if (out_dtype(n, d, "to", a.dt, &out.dt))
		return -1;
	if (has(n, 2)) {
		Type bt;
		if (ir_broadcast(g->m, &out, ty(n, 2), &bt) || bt.rank != out.rank)
			return ERR("matmul: bias does not broadcast to the result");
	}
	n->out[0]->type = out;
	return 0;
}

/* grouped_matmul a[R,K], w[E,N,K] (or [E,K,N] with trans_b=0), offsets[E+1] */
static int
infer_grouped_matmul(Graph *g, Node *n, Diag *d)
{
	const Type *a = ty(n, 0), *w = ty(n, 1), *o = ty(n, 2);
	int tb = (int)ir_attr_int(n, "trans_b", 1);
	Type out;

	if (a->rank != 2 || w->rank != 3 || o->rank != 1)
		return ERR("grouped_matmul: wants a[R,K], w[E,N,K] and offsets[E+1]");
	if (!dtype_is_int(o->dt))
		return ERR("grouped_matmul: offsets must be integers");
	if (same_dtype(n, d, 0, 1))
		return -1;
	Dim k = tb ? w->dim[2] : w->dim[1], nn = tb ? w->dim[1] : w->dim[2];
	if (!ir_dim_compatible(g->m, a->dim[1], k))
		return ERR("grouped_matmul: inner dims differ");
	if (o->dim[0] >= 0 && w->dim[0] >= 0 && o->dim[0] != w->dim[0] + 1)
		return ERR("grouped_matmul: offsets must have E+1 = %lld entries",
			   (long long)w->dim[0] + 1);
	Dim dims[2] = {a->dim[0], nn};
	out = ir_type(a->dt, 2, dims);
	if (out_dtype(n, d, "to", a->dt, &out.dt))
		return -1;
	n->out[0]->type = out;
	return 0;
}

/* --- reductions and normalisation ---------------------------------------- */

static int
infer_reduce(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0), out;
	int64_t axes[MAXRANK];
	int na = ir_attr_ints(n, "axes", axes, MAXRANK), keep = (int)ir_attr_int(n, "keepdims", 1);
	int red[MAXRANK] = {0};

	if (na < 0) {	/* absent: every axis */
		for (int i = 0; i < t.rank; i++)
			red[i] = 1;
	}
	for (int i = 0; i < na; i++) {
		int ax = ir_axis(axes[i], t.rank);
		if (ax < 0)
			return ERR("%s: axis %lld out of range for rank %d", ir_opname(n->op),
				   (long long)axes[i], t.rank);
		red[ax] = 1;
	}
	out = t;
	out.rank = 0;
	for (int i = 0; i < t.rank; i++) {
		if (!red[i])
			out.dim[out.rank++] = t.dim[i];
		else if (keep)
			out.dim[out.rank++] = 1;
	}
	n->out[0]->type = out;
	return 0;
}

static int
infer_argmax(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);
	int ax = ir_axis(ir_attr_int(n, "axis", 0), t.rank);
	int keep = (int)ir_attr_int(n, "keepdims", 1);

	if (ax < 0)
		return ERR("argmax: axis out of range");
	if (keep)
		t.dim[ax] = 1;
	else
		memmove(&t.dim[ax], &t.dim[ax + 1], sizeof(Dim) * (size_t)(t.rank-- - ax - 1));
	t.dt = DT_I64;
	n->out[0]->type = t;
	return 0;
}

static int
infer_softmax(Graph *g, Node *n, Diag *d)
{
	if (ir_axis(ir_attr_int(n, "axis", -1), ty(n, 0)->rank) < 0)
		return ERR("%s: axis out of range", ir_opname(n->op));
	if (!dtype_is_float(ty(n, 0)->dt))
		return ERR("%s: operand must be a float type", ir_opname(n->op));
	n->out[0]->type = *ty(n, 0);
	return 0;
}

/* Norm statistics have the normalised axes kept as 1. */
static Type
stat_type(const Type *x, int axis)
{
	Type t = *x;

	for (int i = axis; i < t.rank; i++)
		t.dim[i] = 1;
	t.dt = DT_F32;
	return t;
}

static int
infer_norm(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0);
	int ax = ir_axis(ir_attr_int(n, "axis", -1), x->rank);
	Type nt = *x, t;

	if (ax < 0)
		return ERR("%s: axis out of range", ir_opname(n->op));
	if (!dtype_is_float(x->dt))
		return ERR("%s: operand must be a float type", ir_opname(n->op));
	/* the scale (and bias) broadcast over the normalised dims */
	nt.rank = x->rank - ax;
	memmove(nt.dim, &x->dim[ax], sizeof(Dim) * (size_t)nt.rank);
	for (int i = 1; i < n->nin; i++) {
		if (!has(n, i))
			continue;
		if (ir_broadcast(g->m, &nt, ty(n, i), &t) || t.rank != nt.rank)
			return ERR("%s: operand %d does not broadcast over the normalised dims",
				   ir_opname(n->op), i);
	}
	n->out[0]->type = *x;
	if (out_dtype(n, d, "to", x->dt, &n->out[0]->type.dt))
		return -1;
	for (int i = 1; i < n->nout; i++)
		n->out[i]->type = stat_type(x, ax);
	return 0;
}

static int
infer_rstd(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0);
	int ax = ir_axis(ir_attr_int(n, "axis", -1), x->rank);

	if (ax < 0)
		return ERR("rstd: axis out of range");
	n->out[0]->type = stat_type(x, ax);
	return 0;
}

static int
infer_cumsum(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0);

	if (ir_axis(ir_attr_int(n, "axis", 0), x->rank) < 0)
		return ERR("cumsum: axis %lld out of range", (long long)ir_attr_int(n, "axis", 0));
	if (x->dt == DT_BOOL)
		return ERR("cumsum: operand must be a number type, not bool");
	n->out[0]->type = *x;
	return 0;
}

static int
infer_topk(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);
	IrTopkAttrs ta;
	ir_topk_attrs(n, &ta);
	int ax = ir_axis(ta.axis, t.rank);
	int64_t k = ta.k;

	if (ax < 0)
		return ERR("topk: axis out of range");
	if (k < -1)
		return ERR("topk: needs k >= 0 (or -1: the whole axis)");
	if (t.dim[ax] >= 0 && k > t.dim[ax])
		return ERR("topk: k=%lld exceeds the axis size %lld", (long long)k,
			   (long long)t.dim[ax]);
	if (k >= 0)	/* k = -1 sorts the whole axis, of a size known at run time */
		t.dim[ax] = k;
	n->out[0]->type = t;
	t.dt = DT_I64;
	n->out[1]->type = t;
	return 0;
}

/* --- indexing ------------------------------------------------------------ */

static int
need_int(Node *n, Diag *d, int i, const char *what)
{
	if (!dtype_is_int(ty(n, i)->dt))
		return ERR("%s: %s must be integers, not %s", ir_opname(n->op), what,
			   dtype_name(ty(n, i)->dt));
	return 0;
}

static int
infer_gather(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0), *ix = ty(n, 1);
	int ax = ir_axis(ir_attr_int(n, "axis", 0), x->rank);
	Type t;

	if (ax < 0)
		return ERR("gather: axis out of range");
	if (need_int(n, d, 1, "indices"))
		return -1;
	if (x->rank - 1 + ix->rank > MAXRANK)
		return ERR("gather: result rank exceeds %d", MAXRANK);
	t = *x;
	t.rank = 0;
	for (int i = 0; i < ax; i++)
		t.dim[t.rank++] = x->dim[i];
	for (int i = 0; i < ix->rank; i++)
		t.dim[t.rank++] = ix->dim[i];
	for (int i = ax + 1; i < x->rank; i++)
		t.dim[t.rank++] = x->dim[i];
	n->out[0]->type = t;
	return 0;
}

static int
infer_gather_elements(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 1);

	if (need_int(n, d, 1, "indices"))
		return -1;
	if (ty(n, 1)->rank != ty(n, 0)->rank)
		return ERR("gather_elements: data and indices must have the same rank");
	if (ir_axis(ir_attr_int(n, "axis", 0), t.rank) < 0)
		return ERR("gather_elements: axis out of range");
	t.dt = ty(n, 0)->dt;
	n->out[0]->type = t;
	return 0;
}

static int
infer_gather_nd(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0), *ix = ty(n, 1);
	int b = (int)ir_attr_int(n, "batch_dims", 0);
	Dim last;
	Type t;

	if (need_int(n, d, 1, "indices"))
		return -1;
	if (ix->rank < 1 || b < 0 || b >= MIN(x->rank, ix->rank))
		return ERR("gather_nd: bad ranks or batch_dims");
	last = ix->dim[ix->rank - 1];
	if (last < 0)
		return ERR("gather_nd: the last dim of indices must be static");
	if (b + last > x->rank)
		return ERR("gather_nd: indices address %lld dims of a rank-%d tensor",
			   (long long)(b + last), x->rank);
	t = *x;
	t.rank = 0;
	for (int i = 0; i < ix->rank - 1; i++)
		t.dim[t.rank++] = ix->dim[i];
	for (int i = b + (int)last; i < x->rank; i++) {
		if (t.rank == MAXRANK)
			return ERR("gather_nd: result rank exceeds %d", MAXRANK);
		t.dim[t.rank++] = x->dim[i];
	}
	n->out[0]->type = t;
	return 0;
}

static int
infer_scatter(Graph *g, Node *n, Diag *d)
{
	const char *r = ir_attr_str(n, "reduction", "none");

	if (need_int(n, d, 1, "indices") || same_dtype(n, d, 0, 2))
		return -1;
	if (n->nin > 3 && n->in[3] && (need_int(n, d, 3, "count") || ir_type_numel(ty(n, 3)) != 1))
		return ERR("%s: count must be one integer", ir_opname(n->op));
	if (strcmp(r, "none") && strcmp(r, "add") && strcmp(r, "mul") && strcmp(r, "max") &&
	    strcmp(r, "min"))
		return ERR("%s: unknown reduction '%s'", ir_opname(n->op), r);
	if (n->op == OP_SCATTER_ELEMENTS) {
		const Type *ix = ty(n, 1), *up = ty(n, 2);
		if (ix->rank != ty(n, 0)->rank || up->rank != ix->rank ||
		    ir_axis(ir_attr_int(n, "axis", 0), ty(n, 0)->rank) < 0)
			return ERR("scatter_elements: ranks differ or axis out of range");
		for (int i = 0; i < ix->rank; i++)
			if (!ir_dim_compatible(g->m, ix->dim[i], up->dim[i]))
				return ERR("scatter_elements: indices and updates differ in dim %d", i);
	} else {	/* updates = indices.shape[:-1] + data.shape[q:] */
		const Type *x = ty(n, 0), *ix = ty(n, 1), *up = ty(n, 2);
		Dim q = ix->rank ? ix->dim[ix->rank - 1] : -1;
		if (q < 0 || q > x->rank || up->rank != ix->rank - 1 + x->rank - (int)q)
			return ERR("scatter_nd: updates must have rank %d", ix->rank - 1 + x->rank - (int)MAX(q, 0));
		for (int i = 0; i < up->rank; i++) {
			Dim want = i < ix->rank - 1 ? ix->dim[i] : x->dim[q + i - (ix->rank - 1)];
			if (!ir_dim_compatible(g->m, want, up->dim[i]))
				return ERR("scatter_nd: updates differ from the indexed slices in dim %d", i);
		}
	}
	n->out[0]->type = *ty(n, 0);
	return 0;
}

/* scatter_rows src[R,...], idx[R], rows=[N] -> [N,...] */
static int
infer_scatter_rows(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);
	Dim rows;

	if (need_int(n, d, 1, "indices") || ty(n, 1)->rank != 1 || t.rank < 1)
		return ERR("scatter_rows: wants src[R,...] and idx[R]");
	if (ir_attr_dims(n, "rows", &rows, 1) != 1)
		return ERR("scatter_rows: needs rows=[N]");
	t.dim[0] = rows;
	n->out[0]->type = t;
	return 0;
}

static int
infer_onehot(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);
	int64_t depth = ir_attr_int(n, "depth", -1);
	int ax = (int)ir_attr_int(n, "axis", -1);

	if (need_int(n, d, 0, "indices"))
		return -1;
	if (depth < 0)
		return ERR("onehot: needs depth >= 0");
	if (t.rank == MAXRANK)
		return ERR("onehot: result rank exceeds %d", MAXRANK);
	if (ax < 0)
		ax += t.rank + 1;
	if (ax < 0 || ax > t.rank)
		return ERR("onehot: axis out of range");
	memmove(&t.dim[ax + 1], &t.dim[ax], sizeof(Dim) * (size_t)(t.rank - ax));
	t.dim[ax] = depth;
	t.rank++;
	if (out_dtype(n, d, "to", DT_F32, &t.dt))
		return -1;
	n->out[0]->type = t;
	return 0;
}

static int
infer_nonzero(Graph *g, Node *n, Diag *d)
{
	Dim dims[2] = {ty(n, 0)->rank, ir_dim_unknown(g->m)};

	if (ir_attr(n, "bound") && ir_attr_dims(n, "bound", &dims[1], 1) != 1)
		return ERR("nonzero: bound=[N] wants one dim");
	n->out[0]->type = ir_type(DT_I64, 2, dims);
	return 0;
}

/* --- shapes -------------------------------------------------------------- */

static int
infer_transpose(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0);
	int64_t perm[MAXRANK];
	int np = ir_attr_ints(n, "perm", perm, MAXRANK), seen[MAXRANK] = {0};
	Type t = *x;

	if (np < 0) {
		np = x->rank;
		for (int i = 0; i < np; i++)
			perm[i] = np - 1 - i;
	}
	if (np != x->rank)
		return ERR("transpose: perm has %d entries for rank %d", np, x->rank);
	for (int i = 0; i < np; i++) {
		if (perm[i] < 0 || perm[i] >= np || seen[perm[i]]++)
			return ERR("transpose: perm is not a permutation");
		t.dim[i] = x->dim[perm[i]];
	}
	n->out[0]->type = t;
	return 0;
}

/* A shape given as a dims attribute or, when data-dependent, an operand. */
static int
shape_arg(Graph *g, Node *n, Diag *d, int opnd, Type *t)
{
	int r = ir_attr_dims(n, "shape", t->dim, MAXRANK);

	if (r > MAXRANK)
		return ERR("%s: shape has more than %d dims", ir_opname(n->op), MAXRANK);
	if (r >= 0) {
		t->rank = r;
		return 0;
	}
	if (!has(n, opnd))
		return ERR("%s: needs shape= or a shape operand", ir_opname(n->op));
	const Type *s = ty(n, opnd);
	if (s->rank != 1 || s->dim[0] < 0 || s->dim[0] > MAXRANK || !dtype_is_int(s->dt))
		return ERR("%s: the shape operand must be a 1-D integer tensor of static length",
			   ir_opname(n->op));
	t->rank = (int)s->dim[0];
	for (int i = 0; i < t->rank; i++)
		t->dim[i] = ir_dim_unknown(g->m);
	return 0;
}

/* A reshape's shape operand that is a const (ONNX's 0 and -1 kept, so the
 * operand stays): its positive entries are static dims, a 0 copies the
 * input's dim (without allowzero), a -1 stays unknown. */
static void
const_shape(Graph *g, Node *n, const Type *in, Type *t)
{
	int64_t v[MAXRANK];
	Node *c = has(n, 1) && n->in[1]->kind == V_RESULT ? n->in[1]->def : NULL;

	(void)g;
	if (!c || c->op != OP_CONST || ir_attr_ints(c, "value", v, MAXRANK) != t->rank)
		return;
	for (int i = 0; i < t->rank; i++)
		if (v[i] > 0)
			t->dim[i] = v[i];
		else if (v[i] == 0 && !ir_attr_int(n, "allowzero", 0) && i < in->rank)
			t->dim[i] = in->dim[i];
}

static int
infer_reshape(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);
	int64_t a, b;

	if (shape_arg(g, n, d, 1, &t))
		return -1;
	const_shape(g, n, ty(n, 0), &t);
	a = ir_type_numel(ty(n, 0));
	b = ir_type_numel(&t);
	if (a >= 0 && b >= 0 && a != b)
		return ERR("reshape: %lld elements cannot become %lld", (long long)a, (long long)b);
	n->out[0]->type = t;
	return 0;
}

static int
infer_expand(Graph *g, Node *n, Diag *d)
{
	Type s = *ty(n, 0), t;

	if (shape_arg(g, n, d, 1, &s))
		return -1;
	if (ir_broadcast(g->m, ty(n, 0), &s, &t))
		return bcast_err(g, n, d, ty(n, 0), &s);
	n->out[0]->type = t;
	return 0;
}

static int
infer_concat(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);
	int ax = ir_axis(ir_attr_int(n, "axis", 0), t.rank);

	if (ax < 0)
		return ERR("concat: axis out of range");
	for (int i = 1; i < n->nin; i++) {
		if (!has(n, i))
			return ERR("concat: operand %d is absent", i);
		const Type *u = ty(n, i);
		if (u->rank != t.rank || u->dt != t.dt)
			return ERR("concat: operand %d has another rank or type", i);
		for (int j = 0; j < t.rank; j++)
			if (j != ax && !ir_dim_compatible(g->m, t.dim[j], u->dim[j]))
				return ERR("concat: operand %d differs in dim %d", i, j);
		t.dim[ax] = ir_dim_add(g->m, t.dim[ax], u->dim[ax]);
	}
	n->out[0]->type = t;
	return 0;
}

static int
infer_split(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0);
	int ax = ir_axis(ir_attr_int(n, "axis", 0), x->rank);
	int64_t sizes[64], sum = 0;
	int ns = ir_attr_ints(n, "sizes", sizes, 64);

	if (ax < 0)
		return ERR("split: axis out of range");
	if (ns >= 0 && ns != n->nout)
		return ERR("split: %d sizes for %d results", ns, n->nout);
	for (int i = 0; i < n->nout; i++) {
		Type t = *x;
		t.dim[ax] = ns >= 0 ? sizes[i] : ir_dim_div(g->m, x->dim[ax], n->nout);
		if (ns >= 0)
			sum += sizes[i];
		n->out[i]->type = t;
	}
	if (ns >= 0 && x->dim[ax] >= 0 && sum != x->dim[ax])
		return ERR("split: sizes sum to %lld, the axis has %lld", (long long)sum,
			   (long long)x->dim[ax]);
	if (ns < 0 && x->dim[ax] >= 0 && x->dim[ax] % n->nout)
		return ERR("split: %lld does not split evenly in %d", (long long)x->dim[ax], n->nout);
	return 0;
}

/* The axes of a slice with operands: a constant axes operand, or (none)
 * 0..n-1 for n starts; -1 when they are data. */
static int
slice_axes(const Node *n, int64_t *ax)
{
	const Value *a = n->nin > 3 ? n->in[3] : NULL, *st = n->in[1];

	if (a)
		return a->kind == V_RESULT && a->def->op == OP_CONST ? ir_attr_ints(a->def, "value", ax, MAXRANK) : -1;
	if (!st || st->type.rank != 1 || !ir_dim_is_static(st->type.dim[0]) || st->type.dim[0] > MAXRANK)
		return -1;
	for (int i = 0; i < st->type.dim[0]; i++)
		ax[i] = i;
	return (int)st->type.dim[0];
}

static int
infer_slice(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0);
	int64_t st[MAXRANK], en[MAXRANK], ax[MAXRANK], sp[MAXRANK];
	int ns, ne, na, nsp;
	Type t = *x;

	if (n->nin > 1) {	/* data-dependent bounds: the sliced axes are `?` */
		int pad = (int)ir_attr_int(n, "padded", 0);
		na = slice_axes(n, ax);
		if (pad && (na != 1 || ir_axis(ax[0], t.rank) < 0))
			return ERR("slice: padded=1 takes one constant axis");
		for (int i = 0; i < t.rank; i++)
			for (int j = 0; j < (na < 0 ? 1 : na); j++)
				if (!pad && (na < 0 || ir_axis(ax[j], t.rank) == i))
					t.dim[i] = ir_dim_unknown(g->m);
		n->out[0]->type = t;
		return 0;
	}
	ns = ir_attr_ints(n, "starts", st, MAXRANK);
	ne = ir_attr_ints(n, "ends", en, MAXRANK);
	na = ir_attr_ints(n, "axes", ax, MAXRANK);
	nsp = ir_attr_ints(n, "steps", sp, MAXRANK);
	if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
		return ERR("slice: starts, ends (and axes, steps) must have equal lengths");
	for (int i = 0; i < ns; i++) {
		int a = ir_axis(na >= 0 ? ax[i] : i, x->rank);
		int64_t step = nsp >= 0 ? sp[i] : 1;
		if (a < 0 || step == 0)
			return ERR("slice: axis out of range or zero step");
		int64_t first;
		if (x->dim[a] >= 0)
			ir_slice_range(x->dim[a], st[i], en[i], step, &first, &t.dim[a]);
		else if (!(st[i] == 0 && en[i] >= INT32_MAX && step == 1))
			t.dim[a] = ir_dim_unknown(g->m);
	}
	n->out[0]->type = t;
	return 0;
}

static int
infer_tile(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);
	int64_t rep[MAXRANK];
	int nr = ir_attr_ints(n, "repeats", rep, MAXRANK);

	if (nr < 0 && has(n, 1)) {
		for (int i = 0; i < t.rank; i++)
			t.dim[i] = ir_dim_unknown(g->m);
	} else {
		if (nr != t.rank)
			return ERR("tile: repeats must have one entry per dim");
		for (int i = 0; i < t.rank; i++) {
			if (rep[i] < 0)
				return ERR("tile: negative repeat");
			t.dim[i] = ir_dim_mul(g->m, t.dim[i], rep[i]);
		}
	}
	n->out[0]->type = t;
	return 0;
}

static int
infer_shape(Graph *g, Node *n, Diag *d)
{
	int r = ty(n, 0)->rank;
	int64_t s = ir_attr_int(n, "start", 0), e = ir_attr_int(n, "end", r);
	Dim len;

	s = s < 0 ? MAX(0, s + r) : MIN(s, r);
	e = e < 0 ? MAX(0, e + r) : MIN(e, r);
	len = MAX(0, e - s);
	n->out[0]->type = ir_type(DT_I64, 1, &len);
	return 0;
}

static int
infer_size(Graph *g, Node *n, Diag *d)
{
	n->out[0]->type = ir_scalar(DT_I64);
	return 0;
}

static int
infer_range(Graph *g, Node *n, Diag *d)
{
	Dim u = ir_dim_unknown(g->m);

	for (int i = 0; i < 3; i++)
		if (ty(n, i)->rank != 0)
			return ERR("range: start, limit and delta must be scalars");
	if (same_dtype(n, d, 0, 1) || same_dtype(n, d, 0, 2))
		return -1;
	n->out[0]->type = ir_type(ty(n, 0)->dt, 1, &u);
	return 0;
}

static int
infer_constant_of_shape(Graph *g, Node *n, Diag *d)
{
	Type t;

	memset(&t, 0, sizeof t);
	if (shape_arg(g, n, d, 0, &t) || out_dtype(n, d, "to", DT_F32, &t.dt))
		return -1;
	n->out[0]->type = t;
	return 0;
}

/* A constant's type is declared; check the values fit it. */
static int
infer_const(Graph *g, Node *n, Diag *d)
{
	const Attr *v = ir_attr(n, "value");
	int64_t want = ir_type_numel(&n->out[0]->type);

	if (!v || (v->kind != A_INTS && v->kind != A_FLOATS))
		return ERR("const: needs value=[...]");
	if (want < 0)
		return ERR("const: the type must be static");
	if (v->n != want)
		return ERR("const: %d values for %lld elements", v->n, (long long)want);
	if (v->kind == A_FLOATS && !dtype_is_float(n->out[0]->type.dt))
		return ERR("const: float values for an integer type");
	return 0;
}

static int
infer_quantize(Graph *g, Node *n, Diag *d)
{
	Type t = *ty(n, 0);
	DType def = n->op == OP_QUANTIZE ? (has(n, 2) ? ty(n, 2)->dt : DT_U8) : DT_F32;

	if (n->op == OP_DEQUANTIZE && has(n, 2) && ty(n, 2)->dt != t.dt)
		return ERR("dequantize: zero point must have the input's type");
	if (out_dtype(n, d, "to", def, &t.dt))
		return -1;
	n->out[0]->type = t;
	return 0;
}

/* quantize_dynamic x -> q (to=f8e4m3|i8), scale: group=tensor|row|N */
static int
infer_quantize_dynamic(Graph *g, Node *n, Diag *d)
{
	Type q = *ty(n, 0), s = q;
	const Attr *grp = ir_attr(n, "group");

	if (out_dtype(n, d, "to", DT_F8E4M3, &q.dt))
		return -1;
	if (q.rank < 1 && grp && !(grp->kind == A_STR && strcmp(grp->u.s, "tensor") == 0))
		return ERR("quantize_dynamic: a scalar has no rows or groups");
	if (q.dt != DT_F8E4M3 && q.dt != DT_I8)
		return ERR("quantize_dynamic: to must be f8e4m3 or i8");
	s.dt = DT_F32;
	if (!grp || (grp->kind == A_STR && strcmp(grp->u.s, "tensor") == 0))
		s.rank = 0;
	else if (grp->kind == A_STR && strcmp(grp->u.s, "row") == 0)
		s.dim[s.rank - 1] = 1;
	else if (grp->kind == A_INT && grp->u.i > 0)
		s.dim[s.rank - 1] = ir_dim_div(g->m, s.dim[s.rank - 1], grp->u.i);
	else
		return ERR("quantize_dynamic: group must be tensor, row or a positive size");
	n->out[0]->type = q;
	n->out[1]->type = s;
	return 0;
}

/* --- mixture of experts -------------------------------------------------- */

static int
check_router(Graph *g, Node *n, Diag *d, const Type *logits, int64_t *k)
{
	IrRouteAttrs ra;

	ir_route_attrs(n, &ra);
	if (ra.router == IR_ROUTER_UNKNOWN)
		return ERR("%s: router must be softmax, sigmoid, topk_softmax or sparsemixer, not %s",
			   ir_opname(n->op), ra.router_name);
	if (ra.router == IR_ROUTER_SPARSEMIXER && (ra.n_group != 1 || !(ra.jitter_eps >= 0) ||
						   (n->op == OP_MOE ? n->in[2] != NULL : n->nin > 1 && n->in[1])))
		return ERR("%s: router=sparsemixer takes no groups or selection bias, and jitter_eps >= 0",
			   ir_opname(n->op));
	if (isnan(ra.group_fill))
		return ERR("%s: group_fill must not be NaN", ir_opname(n->op));
	*k = ra.k;
	if (logits->rank != 2)
		return ERR("%s: router logits must be [T,E]", ir_opname(n->op));
	if (*k < 1 || (logits->dim[1] >= 0 && *k > logits->dim[1]))
		return ERR("%s: k must be in 1..E", ir_opname(n->op));
	int64_t ng = ra.n_group, tg = ra.topk_group;
	if (ng < 1 || tg < 1 || tg > ng || (logits->dim[1] >= 0 && logits->dim[1] % ng))
		return ERR("%s: n_group must divide E and topk_group be in 1..n_group",
			   ir_opname(n->op));
	return 0;
}

static int
infer_moe(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0), *l = ty(n, 1), *gu = ty(n, 3), *dn = ty(n, 4);
	int64_t k;

	if (check_router(g, n, d, l, &k))
		return -1;
	int gated = ir_attr_int(n, "gated", 1) != 0;
	IrGluAttrs glu;
	char why[160];

	if (ir_glu_attrs(n, "gu_layout", &glu, why, sizeof why))
		return ERR("moe: %s", why);
	if (x->rank != 2 || gu->rank != 3 || dn->rank != 3)
		return ERR("moe: wants x[T,H], w_gate_up[E,%sI,H], w_down[E,H,I]", gated ? "2" : "");
	if (!ir_dim_compatible(g->m, gu->dim[2], x->dim[1]) ||
	    !ir_dim_compatible(g->m, dn->dim[1], x->dim[1]) ||
	    !ir_dim_compatible(g->m, gu->dim[1], gated ? ir_dim_mul(g->m, dn->dim[2], 2) : dn->dim[2]) ||
	    !ir_dim_compatible(g->m, gu->dim[0], l->dim[1]) ||
	    !ir_dim_compatible(g->m, dn->dim[0], l->dim[1]))
		return ERR("moe: expert weight shapes do not agree with x and the logits");
	if (has(n, 2) && (ty(n, 2)->rank != 1 || !ir_dim_compatible(g->m, ty(n, 2)->dim[0], l->dim[1])))
		return ERR("moe: the selection bias must be [E]");
	int64_t aq = ir_attr_int(n, "act_quant", 0), I = dn->dim[2];
	if (aq < 0 || (aq > 0 && (!ir_dim_is_static(I) || I % aq)))
		return ERR("moe: act_quant (the down projection's input quantised in groups of N "
			   "columns) must divide the intermediate size");
	if (ir_attr(n, "act_quant_ub") && (!aq || !(ir_attr_float(n, "act_quant_ub", 0) > 0)))
		return ERR("moe: act_quant_ub (the clamp of act_quant's amax) must be positive, with "
			   "act_quant");
	n->out[0]->type = *x;
	return 0;
}

static int
infer_route(Graph *g, Node *n, Diag *d)
{
	const Type *l = ty(n, 0);
	int64_t k;
	Dim dims[2];

	if (check_router(g, n, d, l, &k))
		return -1;
	dims[0] = l->dim[0];
	dims[1] = k;
	n->out[0]->type = ir_type(DT_F32, 2, dims);
	n->out[1]->type = ir_type(DT_I32, 2, dims);
	return 0;
}

static int
infer_permute(Graph *g, Node *n, Diag *d)
{
	const Type *ids = ty(n, 0);
	int64_t e = ir_attr_int(n, "experts", -1);
	Dim rows, offs;

	if (ids->rank != 2 || need_int(n, d, 0, "expert ids"))
		return ERR("permute: wants ids[T,k]");
	if (e < 1)
		return ERR("permute: needs experts=E");
	rows = ir_dim_mul(g->m, ids->dim[0], ids->dim[1]);
	offs = e + 1;
	n->out[0]->type = ir_type(DT_I32, 1, &offs);
	n->out[1]->type = ir_type(DT_I32, 1, &rows);
	n->out[2]->type = ir_type(DT_I32, 1, &rows);
	return 0;
}

/* --- expert parallelism --------------------------------------------------- */

/* ranks=N, owner=[E] (each expert's rank), local=[E] (its index there). */
static int
check_ep_attrs(Node *n, Diag *d, int64_t *nr)
{
	int64_t ne = ir_attr_ints(n, "owner", NULL, 0), nl = ir_attr_ints(n, "local", NULL, 0);

	*nr = ir_attr_int(n, "ranks", -1);
	if (*nr < 1 || *nr > IR_EP_MAX_RANKS)
		return ERR("%s: ranks must be in 1..%d", ir_opname(n->op), IR_EP_MAX_RANKS);
	if (n->op != OP_EP_PACK)
		return 0;
	if (ir_ep_sum(n) < 0)
		return ERR("ep_pack: combine must be slots or sum");
	if (ne < 1 || nl != ne)
		return ERR("ep_pack: owner and local must list every expert, as many of each");
	int64_t *v = xmalloc(sizeof *v * (size_t)(2 * ne));
	int bad = -1;
	ir_attr_ints(n, "owner", v, (int)ne);
	ir_attr_ints(n, "local", v + ne, (int)ne);
	for (int64_t x = 0; x < ne && bad < 0; x++)
		if (v[x] < 0 || v[x] >= *nr || v[ne + x] < 0 || v[ne + x] >= ne)
			bad = (int)x;
	free(v);
	if (bad >= 0)
		return ERR("ep_pack: expert %d's owner is not a rank in 0..%lld or its local index "
			   "not in 0..E-1", bad, (long long)*nr - 1);
	return 0;
}

/* x[T,H], w[T,k], ids[T,k] -> xs[N,T,H], ws[N,T,k] f32, is[N,T,k] i32, back[T*k] i32
 * (combine=sum: back[T*N]) */
static int
infer_ep_pack(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0), *w = ty(n, 1), *ids = ty(n, 2);
	int64_t nr;
	Dim d3[3], r;

	if (check_ep_attrs(n, d, &nr))
		return -1;
	if (x->rank != 2 || w->rank != 2 || ids->rank != 2 ||
	    !ir_dim_compatible(g->m, w->dim[0], x->dim[0]) ||
	    !ir_dim_compatible(g->m, ids->dim[0], x->dim[0]) ||
	    !ir_dim_compatible(g->m, ids->dim[1], w->dim[1]))
		return ERR("ep_pack: wants x[T,H], weights[T,k], ids[T,k]");
	if (need_int(n, d, 2, "expert ids"))
		return -1;
	d3[0] = nr, d3[1] = x->dim[0], d3[2] = x->dim[1];
	n->out[0]->type = ir_type(x->dt, 3, d3);
	d3[2] = ids->dim[1];
	n->out[1]->type = ir_type(DT_F32, 3, d3);
	n->out[2]->type = ir_type(DT_I32, 3, d3);
	r = ir_dim_mul(g->m, ids->dim[0], ir_ep_sum(n) ? nr : ids->dim[1]);
	n->out[3]->type = ir_type(DT_I32, 1, &r);
	return 0;
}

static int
infer_all_to_all(Graph *g, Node *n, Diag *d)
{
	const Type *x = ty(n, 0);
	int64_t nr;

	if (check_ep_attrs(n, d, &nr))
		return -1;
	if (x->rank < 1 || !ir_dim_compatible(g->m, x->dim[0], nr))
		return ERR("all_to_all: wants [ranks, ...] with ranks = %lld", (long long)nr);
	n->out[0]->type = *x;
	return 0;
}

static int
infer_call(Graph *g, Node *n, Diag *d)
{
	if (!n->callee || n->callee->nret != n->nout)
		return ERR("call: result count does not match the kernel");
	for (int i = 0; i < n->nout; i++)
		n->out[i]->type = n->callee->ret[i]->type;
	return 0;
}

static InferFn *const rule[NOP] = {
	[OP_NEG] = infer_unary, [OP_ABS] = infer_unary, [OP_EXP] = infer_unary,
	[OP_LOG] = infer_unary, [OP_SQRT] = infer_unary, [OP_RSQRT] = infer_unary,
	[OP_FLOOR] = infer_unary, [OP_SIGN] = infer_unary,
	[OP_RECIPROCAL] = infer_unary, [OP_ERF] = infer_unary, [OP_TANH] = infer_unary,
	[OP_SIGMOID] = infer_unary, [OP_RELU] = infer_unary, [OP_SILU] = infer_unary,
	[OP_GELU] = infer_unary, [OP_SOFTPLUS] = infer_unary,
	[OP_LEAKY_RELU] = infer_unary, [OP_HARD_SIGMOID] = infer_unary,
	[OP_HARD_SWISH] = infer_unary, [OP_CLIP] = infer_unary, [OP_NOT] = infer_unary,
	[OP_CAST] = infer_unary, [OP_IDENTITY] = infer_unary,
	[OP_ADD] = infer_binary, [OP_SUB] = infer_binary, [OP_MUL] = infer_binary,
	[OP_DIV] = infer_binary, [OP_POW] = infer_binary, [OP_MIN] = infer_binary,
	[OP_MAX] = infer_binary, [OP_EQUAL] = infer_binary, [OP_GREATER] = infer_binary,
	[OP_LESS] = infer_binary, [OP_GREATER_EQUAL] = infer_binary,
	[OP_LESS_EQUAL] = infer_binary, [OP_AND] = infer_binary, [OP_OR] = infer_binary,
	[OP_WHERE] = infer_where, [OP_SWIGLU] = infer_swiglu,
	[OP_MATMUL] = infer_matmul, [OP_GROUPED_MATMUL] = infer_grouped_matmul,
	[OP_REDUCE_SUM] = infer_reduce, [OP_REDUCE_MEAN] = infer_reduce,
	[OP_REDUCE_MAX] = infer_reduce, [OP_REDUCE_MIN] = infer_reduce,
	[OP_ARGMAX] = infer_argmax, [OP_CUMSUM] = infer_cumsum, [OP_SOFTMAX] = infer_softmax,
	[OP_LOG_SOFTMAX] = infer_softmax, [OP_RMS_NORM] = infer_norm,
	[OP_LAYER_NORM] = infer_norm, [OP_RSTD] = infer_rstd, [OP_TOPK] = infer_topk,
	[OP_GATHER] = infer_gather, [OP_GATHER_ELEMENTS] = infer_gather_elements,
	[OP_GATHER_ND] = infer_gather_nd, [OP_SCATTER_ELEMENTS] = infer_scatter,
	[OP_SCATTER_ND] = infer_scatter, [OP_SCATTER_ROWS] = infer_scatter_rows,
	[OP_ONEHOT] = infer_onehot, [OP_NONZERO] = infer_nonzero,
	[OP_TRANSPOSE] = infer_transpose, [OP_RESHAPE] = infer_reshape,
	[OP_EXPAND] = infer_expand, [OP_CONCAT] = infer_concat, [OP_SPLIT] = infer_split,
	[OP_SLICE] = infer_slice, [OP_TILE] = infer_tile, [OP_SHAPE] = infer_shape,
	[OP_SIZE] = infer_size, [OP_RANGE] = infer_range,
	[OP_CONSTANT_OF_SHAPE] = infer_constant_of_shape, [OP_CONST] = infer_const,
	[OP_QUANTIZE] = infer_quantize, [OP_DEQUANTIZE] = infer_quantize,
	[OP_QUANTIZE_DYNAMIC] = infer_quantize_dynamic, [OP_MOE] = infer_moe,
	[OP_ROUTE] = infer_route, [OP_PERMUTE] = infer_permute, [OP_CALL] = infer_call,
	[OP_EP_PACK] = infer_ep_pack, [OP_ALL_TO_ALL] = infer_all_to_all,
};

int
ir_infer(Graph *g, Node *n, Diag *d)
{
	const OpInfo *oi = &ir_opinfo[n->op];

	if (n->nin < oi->inmin || (oi->inmax >= 0 && n->nin > oi->inmax))
		return ERR("%s takes %d to %d operands, not %d", oi->name, oi->inmin,
			   oi->inmax, n->nin);
	if (n->nout < oi->outmin || (oi->outmax >= 0 && n->nout > oi->outmax))
		return ERR("%s has %d to %d results, not %d", oi->name, oi->outmin,
			   oi->outmax, n->nout);
	for (int i = 0; i < n->nin; i++)
		if (!n->in[i] && i < oi->inmin && !(n->op == OP_MOE && i == 2))
			return ERR("%s: operand %d is required", oi->name, i);
	if (!rule[n->op])
		return ERR("%s: no shape rule", oi->name);
	if (rule[n->op](g, n, d))
		return -1;
	for (int i = 0; i < n->nout; i++)
		if (!ir_type_ok(g->m, &n->out[i]->type))
			return ERR("%s: result %d would have more than 2^48 elements", oi->name, i);
	return 0;
}

int
ir_infer_graph(Graph *g, Diag *d)
{
	for (Node *n = g->first; n; n = n->next)
		if (ir_infer(g, n, d))
			return -1;
	return 0;
}

/* Exposed for the unit test that checks the table is complete. */
int ir_infer_has_rule(Op op);
int
ir_infer_has_rule(Op op)
{
	return rule[op] != NULL;
}
