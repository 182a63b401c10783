/*
 * k_body_index.c — ops that move elements: views (reshape), transpose,
 * expand, concat, split, slice, tile, the gathers and onehot as index maps
 * from an output element to the operand element it copies; and the
 * scatters, which are whole kernels (ir/eval_shape.c, eval_index.c).
 *
 * Tensors are dense and row-major, so a reshape keeps the flat index.
 * Indices read from data wrap once when negative and are then clamped into
 * the dim, so a bad index reads a valid element (the interpreter reports
 * it).  A scatter's kernel gives each thread one element position of an
 * update "row" (a column for scatter_rows, a fiber along the axis for
 * scatter_elements, a slice element for scatter_nd); the thread copies the
 * data then applies every update to its position in order, so duplicate
 * indices resolve as the interpreter does (the last one wins) and nothing
 * races.
 */
#include <string.h>

#include "k_body.h"

/* Index v (i64) into 0..dim-1: negative wraps once, then clamped. */
static LLVMValueRef
wrap(Bd *b, LLVMValueRef v, LLVMValueRef dim)
{
	CgFn *f = b->f;

	v = cg_select(f, cg_lt(f, v, bd_i64(b, 0)), cg_add(f, v, dim), v);
	return cg_min(f, cg_max(f, v, bd_i64(b, 0)), cg_sub(f, dim, bd_i64(b, 1)));
}

static LLVMValueRef
as_index(Bd *b, LLVMValueRef v)	/* index operands are integers: i64 values */
{
	if (LLVMTypeOf(v) != b->f->ti64)
		v = LLVMBuildFPToSI(b->f->B, v, b->f->ti64, "");
	return v;
}

static void
strides(Bd *b, int rank, LLVMValueRef const *dim, LLVMValueRef *s)
{
	LLVMValueRef st = bd_i64(b, 1);

	for (int i = rank - 1; i >= 0; i--) {
		s[i] = st;
		st = cg_mul(b->f, st, dim[i]);
	}
}

LLVMValueRef
bd_transpose(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	const Value *x = n->in[0], *y = n->out[0];
	int r = x->type.rank;
	int64_t perm[MAXRANK];
	LLVMValueRef yd[MAXRANK], xd[MAXRANK], xs[MAXRANK], c[MAXRANK], at = bd_i64(b, 0);

	if (ir_attr_ints(n, "perm", perm, MAXRANK) < 0)
		for (int i = 0; i < r; i++)
			perm[i] = r - 1 - i;
	bd_dims(b, y, yd);
	bd_dims(b, x, xd);
	strides(b, r, xd, xs);
	bd_unravel(b, idx, r, yd, c);
	for (int i = 0; i < r; i++)
		at = cg_add(b->f, at, cg_mul(b->f, c[i], xs[ir_axis(perm[i], r)]));
	return bd_in(b, n, 0, at);
}

LLVMValueRef
bd_expand(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	return bd_in(b, n, 0, bd_bcast(b, n->in[0], n->out[0], idx));
}

LLVMValueRef
bd_tile(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	const Value *x = n->in[0], *y = n->out[0];
	int r = x->type.rank;
	LLVMValueRef yd[MAXRANK], xd[MAXRANK], c[MAXRANK];

	bd_dims(b, y, yd);
	bd_dims(b, x, xd);
	bd_unravel(b, idx, r, yd, c);
	for (int i = 0; i < r; i++)
		if (x->type.dim[i] != y->type.dim[i])
			c[i] = cg_urem(b->f, c[i], xd[i]);
	return bd_in(b, n, 0, bd_ravel(b, r, xd, c));
}

enum { MAXCONCAT = 64 };	/* nested branches, one per operand */

int
bd_check_concat(Bd *b, const Node *n)
{
	if (n->nin > MAXCONCAT)
		return bd_fail(b, n, "%d operands (the body compiler takes up to %d)", n->nin,
			       MAXCONCAT);
	return 0;
}

/* One branch per operand: the first whose range along the axis holds c[ax]. */
LLVMValueRef
bd_concat(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	const Value *y = n->out[0];
	int r = y->type.rank, ax = ir_axis(ir_attr_int(n, "axis", 0), r), open = 0;
	LLVMValueRef yd[MAXRANK], c[MAXRANK], a, off = bd_i64(b, 0);
	LLVMValueRef out = cg_var(f, cg_dt_value_type(f, y->type.dt), NULL);
	CgIf ifs[MAXCONCAT];

	bd_dims(b, y, yd);
	bd_unravel(b, idx, r, yd, c);
	a = c[ax];
	for (int k = 0; k < n->nin; k++) {	/* bd_check_concat bounds nin */
		const Value *x = n->in[k];
		LLVMValueRef xd[MAXRANK], xc[MAXRANK], end;
		int mark = bd_scope(b);
		bd_dims(b, x, xd);
		end = cg_add(f, off, xd[ax]);
		if (k < n->nin - 1) {
			cg_if(f, &ifs[open++], cg_lt(f, a, end));
		}
		memcpy(xc, c, sizeof xc);
		xc[ax] = cg_sub(f, a, off);
		cg_set(f, out, bd_in(b, n, k, bd_ravel(b, r, xd, xc)));
		bd_unscope(b, mark);
		if (k < n->nin - 1)
			cg_else(f, &ifs[open - 1]);
		off = end;
	}
	while (open > 0)
		cg_endif(f, &ifs[--open]);
	return cg_get(f, out);
}

LLVMValueRef
bd_split(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	const Value *x = n->in[0], *y = n->out[res];
	int r = x->type.rank, ax = ir_axis(ir_attr_int(n, "axis", 0), r);
	LLVMValueRef yd[MAXRANK], xd[MAXRANK], c[MAXRANK], off = bd_i64(b, 0);

	for (int k = 0; k < res; k++)
		off = cg_add(b->f, off, bd_dim(b, n->out[k]->type.dim[ax]));
	bd_dims(b, y, yd);
	bd_dims(b, x, xd);
	bd_unravel(b, idx, r, yd, c);
	c[ax] = cg_add(b->f, c[ax], off);
	return bd_in(b, n, 0, bd_ravel(b, r, xd, c));
}

/* ---- slice ---- */

/* Constant integers of operand k (a const node), or of attribute key. */
static int
int_list(const Node *n, int k, const char *key, int64_t *v)
{
	if (n->nin > 1) {
		const Value *o = k < n->nin ? n->in[k] : NULL;
		const Attr *a;
		if (!o)
			return -1;
		if (o->kind != V_RESULT || o->def->op != OP_CONST || !(a = ir_attr(o->def, "value")))
			return -2;
		if (a->kind == A_INT) {
			v[0] = a->u.i;
			return 1;
		}
		if (a->kind != A_INTS || a->n > MAXRANK)
			return -2;
		memcpy(v, a->u.ints, sizeof *v * (size_t)a->n);
		return a->n;
	}
	return ir_attr_ints(n, key, v, MAXRANK);
}

typedef struct {
	int n;
	int64_t start[MAXRANK], axis[MAXRANK], step[MAXRANK];
	int data;	/* padded=1: the one start read from the device (bound-dyn) */
} Slice;

static int
slice_args(Bd *b, const Node *n, Slice *s)
{
	int64_t end[MAXRANK];
	int ns = int_list(n, 1, "starts", s->start), ne = int_list(n, 2, "ends", end);
	int na = int_list(n, 3, "axes", s->axis), nsp = int_list(n, 4, "steps", s->step);

	s->data = n->nin > 2 && ir_attr_int(n, "padded", 0);
	if (s->data) {	/* the ends only bound the real length, which the graph computes beside it */
		if (na != 1 || (nsp >= 0 && (nsp != 1 || s->step[0] != 1)))
			return bd_fail(b, n, "padded=1 takes one constant axis with step 1");
		ns = ne = 1;
	}
	if (ns == -2 || ne == -2 || na == -2 || nsp == -2)
		return bd_fail(b, n, "starts, ends, axes and steps must be constants");
	if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
		return bd_fail(b, n, "starts, ends (and axes, steps) must have equal lengths");
	s->n = ns;
	for (int i = 0; i < ns; i++) {
		if (na < 0)
			s->axis[i] = i;
		if (nsp < 0)
			s->step[i] = 1;
		if (s->step[i] == 0 || ir_axis(s->axis[i], n->in[0]->type.rank) < 0)
			return bd_fail(b, n, "axis %lld out of range or a zero step", (long long)s->axis[i]);
	}
	return 0;
}

int
bd_check_slice(Bd *b, const Node *n)
{
	Slice s;

	return slice_args(b, n, &s);
}

LLVMValueRef
bd_slice(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	const Value *x = n->in[0], *y = n->out[0];
	int r = x->type.rank;
	LLVMValueRef yd[MAXRANK], xd[MAXRANK], c[MAXRANK];
	Slice s;

	slice_args(b, n, &s);
	bd_dims(b, y, yd);
	bd_dims(b, x, xd);
	bd_unravel(b, idx, r, yd, c);
	for (int i = 0; i < s.n; i++) {
		int a = ir_axis(s.axis[i], r);
		LLVMValueRef dim = xd[a], lo, hi;
		LLVMValueRef st = s.data ? as_index(b, bd_in(b, n, 1, bd_i64(b, 0))) : bd_i64(b, s.start[i]);
		/* slice_range: start into [0, dim] (step > 0) or [-1, dim-1] */
		st = cg_select(f, cg_lt(f, st, bd_i64(b, 0)), cg_add(f, st, dim), st);
		lo = bd_i64(b, s.step[i] > 0 ? 0 : -1);
		hi = s.step[i] > 0 ? dim : cg_sub(f, dim, bd_i64(b, 1));
		st = cg_max(f, lo, cg_min(f, st, hi));
		c[a] = cg_add(f, st, cg_muli(f, c[a], s.step[i]));
		if (s.data)	/* the padding past the slice repeats x's last element */
			c[a] = cg_min(f, c[a], cg_sub(f, dim, bd_i64(b, 1)));
	}
	return bd_in(b, n, 0, bd_ravel(b, r, xd, c));
}

/* ---- gathers ---- */

LLVMValueRef
bd_gather(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	const Value *x = n->in[0];
	int r = x->type.rank, ax = ir_axis(ir_attr_int(n, "axis", 0), r);
	LLVMValueRef xd[MAXRANK], inner = bd_i64(b, 1), ni = bd_numel(b, n->in[1]);
	LLVMValueRef in, j, o, v;

	bd_dims(b, x, xd);
	for (int i = ax + 1; i < r; i++)
		inner = cg_mul(f, inner, xd[i]);
	in = cg_urem(f, idx, inner);
	j = cg_urem(f, cg_udiv(f, idx, inner), ni);
	o = cg_udiv(f, idx, cg_mul(f, inner, ni));
	v = wrap(b, as_index(b, bd_in(b, n, 1, j)), xd[ax]);
	return bd_in(b, n, 0, cg_add(f, cg_mul(f, cg_add(f, cg_mul(f, o, xd[ax]), v), inner), in));
}

LLVMValueRef
bd_gather_elements(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	const Value *x = n->in[0], *ix = n->in[1];
	int r = x->type.rank, ax = ir_axis(ir_attr_int(n, "axis", 0), r);
	LLVMValueRef xd[MAXRANK], id[MAXRANK], c[MAXRANK];

	bd_dims(b, x, xd);
	bd_dims(b, ix, id);
	bd_unravel(b, idx, r, id, c);
	c[ax] = wrap(b, as_index(b, bd_in(b, n, 1, idx)), xd[ax]);
	return bd_in(b, n, 0, bd_ravel(b, r, xd, c));
}

int
bd_check_gather_nd(Bd *b, const Node *n)
{
	const Type *ix = &n->in[1]->type;

	if (ix->rank < 1 || !ir_dim_is_static(ix->dim[ix->rank - 1]))
		return bd_fail(b, n, "the last dim of the indices must be static");
	return 0;
}

/* Offset in x of the slice that index tuple p of ix addresses (batch dims first). */
static LLVMValueRef
nd_offset(Bd *b, const Node *n, int ib, int bb, LLVMValueRef p)
{
	CgFn *f = b->f;
	const Value *x = n->in[0], *ix = n->in[ib];
	int ri = ix->type.rank;
	int64_t q = ix->type.dim[ri - 1];
	LLVMValueRef xd[MAXRANK], xs[MAXRANK], id[MAXRANK], c[MAXRANK], off = bd_i64(b, 0);

	bd_dims(b, x, xd);
	strides(b, x->type.rank, xd, xs);
	bd_dims(b, ix, id);
	bd_unravel(b, p, ri - 1, id, c);
	for (int i = 0; i < bb; i++)
		off = cg_add(f, off, cg_mul(f, c[i], xs[i]));
	for (int64_t j = 0; j < q; j++) {
		LLVMValueRef v = as_index(b, bd_in(b, n, ib, cg_addi(f, cg_muli(f, p, q), j)));
		off = cg_add(f, off, cg_mul(f, wrap(b, v, xd[bb + j]), xs[bb + j]));
	}
	return off;
}

LLVMValueRef
bd_gather_nd(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	const Value *x = n->in[0];
	int bb = (int)ir_attr_int(n, "batch_dims", 0), ri = n->in[1]->type.rank;
	int64_t q = n->in[1]->type.dim[ri - 1];
	LLVMValueRef xd[MAXRANK], slice = bd_i64(b, 1), p, k;

	bd_dims(b, x, xd);
	for (int i = bb + (int)q; i < x->type.rank; i++)
		slice = cg_mul(f, slice, xd[i]);
	p = cg_udiv(f, idx, slice);
	k = cg_urem(f, idx, slice);
	return bd_in(b, n, 0, cg_add(f, nd_offset(b, n, 1, bb, p), k));
}

LLVMValueRef
bd_onehot(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	const Value *ix = n->in[0];
	int64_t depth = ir_attr_int(n, "depth", -1), ax = ir_attr_int(n, "axis", -1);
	LLVMValueRef inner = bd_i64(b, 1), d, o, i, v;

	if (ax < 0)
		ax += ix->type.rank + 1;
	for (int k = (int)ax; k < ix->type.rank; k++)
		inner = cg_mul(f, inner, bd_dim(b, ix->type.dim[k]));
	i = cg_urem(f, idx, inner);
	d = cg_urem(f, cg_udiv(f, idx, inner), bd_i64(b, depth));
	o = cg_udiv(f, idx, cg_muli(f, inner, depth));
	v = as_index(b, bd_in(b, n, 0, cg_add(f, cg_mul(f, o, inner), i)));
	v = cg_select(f, cg_lt(f, v, bd_i64(b, 0)), cg_addi(f, v, depth), v);
	return cg_select(f, bd_icmp(b, LLVMIntEQ, v, d), bd_const(b, DT_F32, ir_attr_float(n, "on", 1)),
			 bd_const(b, DT_F32, ir_attr_float(n, "off", 0)));
}

/*
 * nonzero with bound=[N] (passes/bound_dyn.c): element (d, j) is coordinate
 * d of the j-th non-zero element of x in row-major order, dim d - 1 past the
 * count.
 * Each element scans x: O(numel) per element, so O(rank * numel^2) for the
 * kernel, which is what an unrecognised MoE's [T,k] masks cost (the
 * fusion report says so); no atomics, the same bits every run.
 */
LLVMValueRef
bd_nonzero(Bd *b, const Node *n, int res, LLVMValueRef idx)
{
	CgFn *f = b->f;
	const Value *x = n->in[0];
	LLVMValueRef xd[MAXRANK], N = bd_dim(b, n->out[0]->type.dim[1]);
	LLVMValueRef d = cg_udiv(f, idx, N), j = cg_urem(f, idx, N), rem, out, pad, v, nz, cnt;
	LLVMValueRef cntv = cg_var(f, f->ti64, bd_i64(b, 0)), atv = cg_var(f, f->ti64, bd_i64(b, -1));
	int r = bd_dims(b, x, xd);
	BdLoop l;
	CgIf c;

	(void)res;
	LLVMValueRef i = bd_loop(b, &l, bd_i64(b, 0), bd_numel(b, x), bd_i64(b, 1));
	v = bd_in(b, n, 0, i);
	nz = dtype_flags(x->type.dt) & DTF_FLOAT ? bd_fcmp(b, LLVMRealUNE, v, bd_const(b, x->type.dt, 0))
						  : bd_icmp(b, LLVMIntNE, v, bd_i64(b, 0));
	cnt = cg_get(f, cntv);
	cg_if(f, &c, LLVMBuildAnd(f->B, nz, bd_icmp(b, LLVMIntEQ, cnt, j), ""));
	cg_set(f, atv, i);
	cg_endif(f, &c);
	cg_set(f, cntv, cg_add(f, cnt, LLVMBuildZExt(f->B, nz, f->ti64, "")));
	bd_endloop(b, &l);
	LLVMValueRef at = cg_get(f, atv);
	rem = cg_max(f, at, bd_i64(b, 0));
	out = pad = bd_i64(b, 0);
	for (int k = r - 1; k >= 0; k--) {
		LLVMValueRef here = bd_icmp(b, LLVMIntEQ, d, bd_i64(b, k));
		out = cg_select(f, here, cg_urem(f, rem, xd[k]), out);
		pad = cg_select(f, here, cg_sub(f, xd[k], bd_i64(b, 1)), pad);
		rem = cg_udiv(f, rem, xd[k]);
	}
	return cg_select(f, cg_lt(f, at, bd_i64(b, 0)), pad, out);
}

/* ---- scatters: whole kernels ---- */

int
bd_is_scatter(Op op)
{
	return op == OP_SCATTER_ELEMENTS || op == OP_SCATTER_ND || op == OP_SCATTER_ROWS;
}

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int
reduction(const Node *n)
{
	static const char *const names[] = {"none", "add", "mul", "max", "min"};
	const char *s = ir_attr_str(n, "reduction", "none");

	for (int r = 0; r < (int)NELEM(names); r++)
		if (strcmp(s, names[r]) == 0)
			return r;
	return -1;
}

int
bd_check_scatter(Bd *b, const Node *n)
{
	if (n->op != OP_SCATTER_ROWS && reduction(n) < 0)
		return bd_fail(b, n, "unknown reduction '%s'", ir_attr_str(n, "reduction", "none"));
	if (n->op == OP_SCATTER_ND)
		return bd_check_gather_nd(b, n);
	return 0;
}

/* out[oi] = out[oi] (red) u, as the interpreter's combine. */
static void
combine(Bd *b, int red, const Value *y, LLVMValueRef out, LLVMValueRef oi, LLVMValueRef u)
{
	CgFn *f = b->f;
	DType dt = y->type.dt;
	LLVMValueRef a, r;

	if (red == RED_NONE) {
		cg_store_dt(f, dt, out, oi, u);
		return;
	}
	a = cg_load_dt(f, dt, out, oi);
	if (cg_dt_isint(dt)) {
		LLVMValueRef ab[2] = {a, u};
		r = red == RED_ADD ? cg_intrinsic(f, "llvm.sadd.sat", f->ti64, &f->ti64, 1, ab, 2)
		  : red == RED_MUL ? cg_mul(f, a, u)
		  : red == RED_MAX ? cg_max(f, a, u) : cg_min(f, a, u);
	} else {
		r = red == RED_ADD ? LLVMBuildFAdd(f->B, a, u, "") : red == RED_MUL ? LLVMBuildFMul(f->B, a, u, "")
		  : red == RED_MAX ? cg_select(f, bd_fcmp(b, LLVMRealOGT, u, a), u, a)
		  : cg_select(f, bd_fcmp(b, LLVMRealOLT, u, a), u, a);
	}
	cg_store_dt(f, dt, out, oi, cg_round_dt(f, r, dt));
}

/* A scatter's optional count operand (docs/ir.md): update entries whose
 * first index coordinate is at or past it are padding. */
static LLVMValueRef
count(Bd *b, const Node *n)
{
	if (n->nin < 4 || !n->in[3])
		return bd_i64(b, INT64_MAX);
	return as_index(b, bd_in(b, n, 3, bd_i64(b, 0)));
}

/* The global thread id (i64) and whether it is below n. */
static LLVMValueRef
gid(Bd *b)
{
	CgFn *f = b->f;

	return cg_add(f, cg_muli(f, cg_sext64(f, cg_ctaid(f, 0)), b->spec.threads), cg_sext64(f, cg_tid(f, 0)));
}

static int
grid_for(Bd *b, const Node *n, CgExpr count, CgExpr *grid)
{
	*grid = (CgExpr){count.a, count.b, b->spec.threads};
	return 0;
}

/* count of something as coef*T or a constant, from a product of dims */
static int
dims_expr(Bd *b, const Value *v, int from, int to, CgExpr *e)
{
	int64_t p = 1;
	int nsym = 0;

	for (int i = from; i < to; i++) {
		Dim d = v->type.dim[i];
		if (ir_dim_is_static(d))
			p *= d;
		else
			p *= ir_dim_expr(b->m, d)->coef, nsym++;
	}
	if (nsym > 1)
		return -1;
	*e = nsym ? (CgExpr){p, 0, 0} : CG_EXPR_INT(p);
	return 0;
}

static LLVMValueRef
dims_prod(Bd *b, const Value *v, int from, int to)
{
	LLVMValueRef p = bd_i64(b, 1);

	for (int i = from; i < to; i++)
		p = cg_mul(b->f, p, bd_dim(b, v->type.dim[i]));
	return p;
}

/* scatter_rows: thread j owns column j of every row. */
static int
scatter_rows(Bd *b, const Node *n, LLVMValueRef out, CgExpr *grid)
{
	CgFn *f = b->f;
	const Value *src = n->in[0], *y = n->out[0];
	LLVMValueRef row = dims_prod(b, src, 1, src->type.rank), j = gid(b);
	LLVMValueRef N = bd_dim(b, y->type.dim[0]), R = bd_dim(b, src->type.dim[0]), i, r;
	BdLoop l;
	CgExpr e;
	CgIf c, c2;

	if (dims_expr(b, src, 1, src->type.rank, &e) < 0)
		return bd_fail(b, n, "rows of T*T elements");
	cg_if(f, &c, cg_lt(f, j, row));
	i = bd_loop(b, &l, bd_i64(b, 0), N, bd_i64(b, 1));
	cg_store_dt(f, y->type.dt, out, cg_add(f, cg_mul(f, i, row), j), bd_const(b, y->type.dt, 0));
	bd_endloop(b, &l);
	r = bd_loop(b, &l, bd_i64(b, 0), R, bd_i64(b, 1));
	{
		LLVMValueRef t = as_index(b, bd_in(b, n, 1, r));
		cg_if(f, &c2, LLVMBuildAnd(f->B, bd_icmp(b, LLVMIntSGE, t, bd_i64(b, 0)), cg_lt(f, t, N), ""));
		cg_store_dt(f, y->type.dt, out, cg_add(f, cg_mul(f, t, row), j),
			    bd_in(b, n, 0, cg_add(f, cg_mul(f, r, row), j)));
		cg_endif(f, &c2);
	}
	bd_endloop(b, &l);
	cg_endif(f, &c);
	return grid_for(b, n, e, grid);
}

/* scatter_elements: thread p owns the fiber along the axis at x's other coordinates p. */
static int
scatter_elements(Bd *b, const Node *n, LLVMValueRef out, CgExpr *grid)
{
	CgFn *f = b->f;
	const Value *x = n->in[0], *ix = n->in[1], *y = n->out[0];
	int r = x->type.rank, ax = ir_axis(ir_attr_int(n, "axis", 0), r), red = reduction(n);
	LLVMValueRef xd[MAXRANK], id[MAXRANK], fd[MAXRANK], c[MAXRANK], p = gid(b), nf, a, inside;
	BdLoop l;
	CgExpr e, e2;
	CgIf cf, ci, cc;

	bd_dims(b, x, xd);
	bd_dims(b, ix, id);
	memcpy(fd, xd, sizeof fd);
	fd[ax] = bd_i64(b, 1);
	nf = bd_i64(b, 1);
	for (int i = 0; i < r; i++)
		nf = cg_mul(f, nf, fd[i]);
	if (dims_expr(b, x, 0, ax, &e) < 0 || dims_expr(b, x, ax + 1, r, &e2) < 0 ||
	    (e.a && e2.a))
		return bd_fail(b, n, "fibers of T*T elements");
	e = e.a ? (CgExpr){e.a * e2.b, 0, 0} : e2.a ? (CgExpr){e2.a * e.b, 0, 0} : CG_EXPR_INT(e.b * e2.b);
	cg_if(f, &cf, cg_lt(f, p, nf));
	bd_unravel(b, p, r, fd, c);
	a = bd_loop(b, &l, bd_i64(b, 0), xd[ax], bd_i64(b, 1));
	c[ax] = a;
	{
		LLVMValueRef at = bd_ravel(b, r, xd, c);
		cg_store_dt(f, y->type.dt, out, at, bd_in(b, n, 0, at));
	}
	bd_endloop(b, &l);
	inside = LLVMConstInt(f->ti1, 1, 0);
	for (int i = 0; i < r; i++)
		if (i != ax && x->type.dim[i] != ix->type.dim[i])
			inside = LLVMBuildAnd(f->B, inside, cg_lt(f, c[i], id[i]), "");
	cg_if(f, &ci, inside);
	a = bd_loop(b, &l, bd_i64(b, 0), id[ax], bd_i64(b, 1));
	{
		LLVMValueRef uc[MAXRANK], ui, t;
		memcpy(uc, c, sizeof uc);
		uc[ax] = a;
		ui = bd_ravel(b, r, id, uc);
		cg_if(f, &cc, cg_lt(f, uc[0], count(b, n)));	/* past the count: padding */
		t = wrap(b, as_index(b, bd_in(b, n, 1, ui)), xd[ax]);
		uc[ax] = t;
		combine(b, red, y, out, bd_ravel(b, r, xd, uc), bd_in(b, n, 2, ui));
		cg_endif(f, &cc);
	}
	bd_endloop(b, &l);
	cg_endif(f, &ci);
	cg_endif(f, &cf);
	return grid_for(b, n, e, grid);
}

/* scatter_nd: thread k owns element k of every addressed slice. */
static int
scatter_nd(Bd *b, const Node *n, LLVMValueRef out, CgExpr *grid)
{
	CgFn *f = b->f;
	const Value *x = n->in[0], *ix = n->in[1], *y = n->out[0];
	int ri = ix->type.rank, red = reduction(n);
	int64_t q = ix->type.dim[ri - 1];
	LLVMValueRef slice = dims_prod(b, x, (int)q, x->type.rank), k = gid(b), np, nx, p;
	BdLoop l;
	CgExpr e;
	CgIf c, cc;

	if (q > x->type.rank || dims_expr(b, x, (int)q, x->type.rank, &e) < 0)
		return bd_fail(b, n, "indices must be [..., q] with q <= the rank of the data");
	np = dims_prod(b, ix, 0, ri - 1);
	nx = dims_prod(b, x, 0, (int)q);
	cg_if(f, &c, cg_lt(f, k, slice));
	p = bd_loop(b, &l, bd_i64(b, 0), nx, bd_i64(b, 1));
	{
		LLVMValueRef at = cg_add(f, cg_mul(f, p, slice), k);
		cg_store_dt(f, y->type.dt, out, at, bd_in(b, n, 0, at));
	}
	bd_endloop(b, &l);
	p = bd_loop(b, &l, bd_i64(b, 0), np, bd_i64(b, 1));
	cg_if(f, &cc, ri < 2 ? LLVMConstInt(f->ti1, 1, 0)
			     : cg_lt(f, cg_udiv(f, p, dims_prod(b, ix, 1, ri - 1)), count(b, n)));
	combine(b, red, y, out, cg_add(f, nd_offset(b, n, 1, 0, p), k),
		bd_in(b, n, 2, cg_add(f, cg_mul(f, p, slice), k)));
	cg_endif(f, &cc);
	bd_endloop(b, &l);
	cg_endif(f, &c);
	return grid_for(b, n, e, grid);
}

int
bd_emit_scatter(Bd *b, const Node *n, LLVMValueRef out, CgExpr *grid)
{
	switch (n->op) {
	case OP_SCATTER_ROWS: return scatter_rows(b, n, out, grid);
	case OP_SCATTER_ELEMENTS: return scatter_elements(b, n, out, grid);
	default: return scatter_nd(b, n, out, grid);
	}
}
