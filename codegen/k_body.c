/*
 * k_body.c — any kernel body the fusion passes leave (template=elementwise
 * or row_reduce), or one op of weight preparation, as one kernel.
 *
 *	elementwise:  one thread per element of the results, grid-stride,
 *	              grid cdiv(numel, threads); each result computed by the
 *	              walker from the body's parameters (k_body.h)
 *	row:          a reduction over at least row_min elements (the anchor)
 *	              gets one CTA per row: its statistics by a fixed-order
 *	              tree into shared memory, then the row's elements of
 *	              every result; a reduction whose rows are runs inside the
 *	              anchor's (quantize_dynamic per 128 columns of a norm's
 *	              rows) a warp per run, into shared memory too; other
 *	              reductions run inline, serially
 *	scatter:      a body whose result is a scatter: the owner of each
 *	              element position applies the updates in order
 *
 * The op table below says which ops lower; a NULL entry is a diagnostic at
 * the node's loc.  Symbolic dims must be coef*T, T the kernel's last
 * parameter.  f32 arithmetic throughout (f64 narrowed); every node's result
 * rounded to its dtype as the interpreter stores it (ir/eval*.c).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "k_body.h"

/* ORDER OP: lowerings, by op; NULL: no lowering */
static EmitFn *const emit[NOP] = {
	[OP_NEG] = bd_unary, [OP_ABS] = bd_unary, [OP_EXP] = bd_unary, [OP_LOG] = bd_unary,
	[OP_SQRT] = bd_unary, [OP_RSQRT] = bd_unary, [OP_RECIPROCAL] = bd_unary,
	[OP_FLOOR] = bd_unary, [OP_SIGN] = bd_unary,
	[OP_ERF] = bd_unary, [OP_TANH] = bd_unary, [OP_SIGMOID] = bd_unary,
	[OP_RELU] = bd_unary, [OP_SILU] = bd_unary, [OP_GELU] = bd_unary,
	[OP_SOFTPLUS] = bd_unary, [OP_LEAKY_RELU] = bd_unary, [OP_HARD_SIGMOID] = bd_unary,
	[OP_HARD_SWISH] = bd_unary, [OP_CLIP] = bd_unary, [OP_NOT] = bd_unary,
	[OP_CAST] = bd_identity, [OP_IDENTITY] = bd_identity,
	[OP_ADD] = bd_binary, [OP_SUB] = bd_binary, [OP_MUL] = bd_binary, [OP_DIV] = bd_binary,
	[OP_POW] = bd_binary, [OP_MIN] = bd_binary, [OP_MAX] = bd_binary,
	[OP_EQUAL] = bd_binary, [OP_GREATER] = bd_binary, [OP_LESS] = bd_binary,
	[OP_GREATER_EQUAL] = bd_binary, [OP_LESS_EQUAL] = bd_binary, [OP_AND] = bd_binary,
	[OP_OR] = bd_binary, [OP_WHERE] = bd_where, [OP_SWIGLU] = bd_swiglu,
	[OP_MATMUL] = bd_matmul, [OP_GROUPED_MATMUL] = bd_grouped_matmul,
	[OP_REDUCE_SUM] = bd_reduce, [OP_REDUCE_MEAN] = bd_reduce, [OP_REDUCE_MAX] = bd_reduce,
	[OP_REDUCE_MIN] = bd_reduce, [OP_ARGMAX] = bd_reduce, [OP_SOFTMAX] = bd_softmax,
	[OP_LOG_SOFTMAX] = bd_softmax, [OP_RMS_NORM] = bd_rms_norm,
	[OP_LAYER_NORM] = bd_layer_norm, [OP_RSTD] = bd_reduce, [OP_TOPK] = bd_topk,
	[OP_CUMSUM] = bd_cumsum,
	[OP_GATHER] = bd_gather, [OP_GATHER_ELEMENTS] = bd_gather_elements,
	[OP_GATHER_ND] = bd_gather_nd, [OP_ONEHOT] = bd_onehot, [OP_NONZERO] = bd_nonzero,
	[OP_TRANSPOSE] = bd_transpose, [OP_RESHAPE] = bd_identity, [OP_EXPAND] = bd_expand,
	[OP_CONCAT] = bd_concat, [OP_SPLIT] = bd_split, [OP_SLICE] = bd_slice,
	[OP_TILE] = bd_tile, [OP_SHAPE] = bd_shape_op, [OP_SIZE] = bd_size,
	[OP_CONSTANT_OF_SHAPE] = bd_constant_of_shape, [OP_CONST] = bd_const_op,
	[OP_QUANTIZE] = bd_quantize, [OP_DEQUANTIZE] = bd_dequantize,
	[OP_QUANTIZE_DYNAMIC] = bd_quantize_dynamic,
	/* scatters are whole kernels (bd_emit_scatter); nonzero and range have
	 * data-dependent shapes; route, permute and moe have builders of their own */
};

/* ORDER OP: extra checks */
static CheckFn *const check[NOP] = {
	[OP_NEG] = bd_check_unary, [OP_ABS] = bd_check_unary, [OP_EXP] = bd_check_unary,
	[OP_LOG] = bd_check_unary, [OP_SQRT] = bd_check_unary, [OP_RSQRT] = bd_check_unary,
	[OP_FLOOR] = bd_check_unary, [OP_SIGN] = bd_check_unary,
	[OP_RECIPROCAL] = bd_check_unary, [OP_ERF] = bd_check_unary, [OP_TANH] = bd_check_unary,
	[OP_SIGMOID] = bd_check_unary, [OP_RELU] = bd_check_unary, [OP_SILU] = bd_check_unary,
	[OP_GELU] = bd_check_unary, [OP_SOFTPLUS] = bd_check_unary,
	[OP_LEAKY_RELU] = bd_check_unary, [OP_HARD_SIGMOID] = bd_check_unary,
	[OP_HARD_SWISH] = bd_check_unary, [OP_CLIP] = bd_check_unary, [OP_NOT] = bd_check_unary,
	[OP_ADD] = bd_check_binary, [OP_SUB] = bd_check_binary, [OP_MUL] = bd_check_binary,
	[OP_DIV] = bd_check_binary, [OP_POW] = bd_check_binary, [OP_MIN] = bd_check_binary,
	[OP_MAX] = bd_check_binary, [OP_EQUAL] = bd_check_binary, [OP_GREATER] = bd_check_binary,
	[OP_LESS] = bd_check_binary, [OP_GREATER_EQUAL] = bd_check_binary,
	[OP_LESS_EQUAL] = bd_check_binary, [OP_AND] = bd_check_binary, [OP_OR] = bd_check_binary,
	[OP_SWIGLU] = bd_check_swiglu, [OP_CONST] = bd_check_const,
	[OP_CONSTANT_OF_SHAPE] = bd_check_const, [OP_QUANTIZE] = bd_check_quant,
	[OP_DEQUANTIZE] = bd_check_quant, [OP_SLICE] = bd_check_slice,
	[OP_GATHER_ND] = bd_check_gather_nd, [OP_REDUCE_SUM] = bd_check_reduce,
	[OP_REDUCE_MEAN] = bd_check_reduce, [OP_REDUCE_MAX] = bd_check_reduce,
	[OP_REDUCE_MIN] = bd_check_reduce, [OP_TOPK] = bd_check_topk,
	[OP_SCATTER_ELEMENTS] = bd_check_scatter, [OP_SCATTER_ND] = bd_check_scatter,
	[OP_SCATTER_ROWS] = bd_check_scatter, [OP_CONCAT] = bd_check_concat,
};

/* Ops that only move elements: their results need no rounding. */
static int
exact(Op op)
{
	switch (op) {
	case OP_IDENTITY: case OP_RESHAPE: case OP_TRANSPOSE: case OP_EXPAND: case OP_CONCAT:
	case OP_SPLIT: case OP_SLICE: case OP_TILE: case OP_GATHER: case OP_GATHER_ELEMENTS:
	case OP_GATHER_ND: case OP_WHERE:
		return 1;
	default:
		return 0;
	}
}

void
cg_body_default(CgBodySpec *s)
{
	memset(s, 0, sizeof *s);
	s->threads = 256;
	s->row_min = 64;
}

/* ---- diagnostics ---- */

int
bd_fail(Bd *b, const Node *n, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	b->err = 1;
	if (b->f)
		b->f->err = 1;
	return diag_error(b->d, n ? n->loc : LOC_NONE, "kernel %s: %s%s%s", b->name,
			  n ? ir_opname(n->op) : "", n ? ": " : "", msg);
}

/* ---- dims ---- */

/* Symbolic dims must be coef*atoms (no unknowns): their value is coef*T. */
static int
dim_ok(Bd *b, Dim d)
{
	return ir_dim_is_static(d) || (ir_dim_expr(b->m, d) && !ir_dim_has_unknown(b->m, d));
}

static int
check_dims(Bd *b, const Node *n, const Value *v)
{
	char buf[128];

	for (int i = 0; i < v->type.rank; i++)
		if (!dim_ok(b, v->type.dim[i])) {
			ir_dim_print(buf, sizeof buf, b->m, v->type.dim[i]);
			return bd_fail(b, n, "dim %s of %%%s is data-dependent (not coef*T)", buf,
				       v->name);
		}
	return 0;
}

/* numel as coef*T + static: -1 when two symbolic dims multiply. */
int
bd_numel_expr(Bd *b, const Value *v, CgExpr *e)
{
	int64_t p = 1;
	int nsym = 0;

	for (int i = 0; i < v->type.rank; i++) {
		Dim d = v->type.dim[i];
		if (ir_dim_is_static(d)) {
			p *= d;
		} else {
			p *= ir_dim_expr(b->m, d)->coef;
			nsym++;
		}
	}
	if (nsym > 1)
		return -1;
	*e = nsym ? (CgExpr){p, 0, 0} : CG_EXPR_INT(p);
	return 0;
}

LLVMValueRef
bd_i64(Bd *b, int64_t v)
{
	return cg_i64(b->f, v);
}

LLVMValueRef
bd_dim(Bd *b, Dim d)
{
	if (ir_dim_is_static(d))
		return bd_i64(b, d);
	return cg_muli(b->f, b->T64, ir_dim_expr(b->m, d)->coef);
}

int
bd_dims(Bd *b, const Value *v, LLVMValueRef *dim)
{
	for (int i = 0; i < v->type.rank; i++)
		dim[i] = bd_dim(b, v->type.dim[i]);
	return v->type.rank;
}

LLVMValueRef
bd_numel(Bd *b, const Value *v)
{
	LLVMValueRef n = bd_i64(b, 1);

	for (int i = 0; i < v->type.rank; i++)
		n = ir_dim_is_static(v->type.dim[i]) ? cg_muli(b->f, n, v->type.dim[i])
			: cg_mul(b->f, n, bd_dim(b, v->type.dim[i]));
	return n;
}

int
bd_same_shape(const Value *a, const Value *c)
{
	if (a->type.rank != c->type.rank)
		return 0;
	for (int i = 0; i < a->type.rank; i++)
		if (a->type.dim[i] != c->type.dim[i])
			return 0;
	return 1;
}

/* ---- index arithmetic ---- */

static int
is_const(LLVMValueRef v, int64_t c)
{
	return LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) == c;
}

void
bd_unravel(Bd *b, LLVMValueRef idx, int rank, LLVMValueRef const *dim, LLVMValueRef *c)
{
	LLVMValueRef rem = idx;

	for (int i = rank - 1; i > 0; i--) {
		if (is_const(dim[i], 1)) {
			c[i] = bd_i64(b, 0);
			continue;
		}
		c[i] = cg_urem(b->f, rem, dim[i]);
		rem = cg_udiv(b->f, rem, dim[i]);
	}
	if (rank > 0)
		c[0] = rem;
}

LLVMValueRef
bd_ravel(Bd *b, int rank, LLVMValueRef const *dim, LLVMValueRef const *c)
{
	LLVMValueRef idx = bd_i64(b, 0);

	for (int i = 0; i < rank; i++)
		idx = cg_add(b->f, cg_mul(b->f, idx, dim[i]), c[i]);
	return idx;
}

LLVMValueRef
bd_bcast(Bd *b, const Value *v, const Value *out, LLVMValueRef idx)
{
	LLVMValueRef od[MAXRANK], vd[MAXRANK], c[MAXRANK], vc[MAXRANK];
	int ro = out->type.rank, rv = v->type.rank;
	int64_t n = ir_type_numel(&v->type);

	if (bd_same_shape(v, out))
		return idx;
	if (n == 1)
		return bd_i64(b, 0);
	bd_dims(b, out, od);
	bd_dims(b, v, vd);
	bd_unravel(b, idx, ro, od, c);
	for (int j = 0; j < rv; j++)
		vc[j] = v->type.dim[j] == 1 ? bd_i64(b, 0) : c[ro - rv + j];
	return bd_ravel(b, rv, vd, vc);
}

/* ---- scalars ---- */

LLVMValueRef
bd_const(Bd *b, DType dt, double c)
{
	unsigned char buf[16] = {0};

	dtype_store(dt, buf, 0, c);
	if (cg_dt_isint(dt))
		return bd_i64(b, dtype_load_int(dt, buf, 0));
	return cg_f32(b->f, (float)dtype_load(dt, buf, 0));
}

LLVMValueRef
bd_fcmp(Bd *b, LLVMRealPredicate p, LLVMValueRef x, LLVMValueRef y)
{
	return LLVMBuildFCmp(b->f->B, p, x, y, "");
}

LLVMValueRef
bd_icmp(Bd *b, LLVMIntPredicate p, LLVMValueRef x, LLVMValueRef y)
{
	return LLVMBuildICmp(b->f->B, p, x, y, "");
}

LLVMValueRef
bd_isnan(Bd *b, LLVMValueRef x)
{
	return bd_fcmp(b, LLVMRealUNO, x, x);
}

/* ew.c's, for the families that compute their own maths */
LLVMValueRef bd_fabs(Bd *b, LLVMValueRef x) { return cg_fabs(b->f, x); }
LLVMValueRef bd_sqrt(Bd *b, LLVMValueRef x) { return cg_sqrt(b->f, x); }
LLVMValueRef bd_log(Bd *b, LLVMValueRef x) { return cg_log(b->f, x); }

/* ---- the walker ---- */

int
bd_scope(Bd *b)
{
	return b->nmemo;
}

void
bd_unscope(Bd *b, int mark)
{
	if (mark < b->nmemo)
		b->nmemo = mark;
}

LLVMValueRef
bd_loop(Bd *b, BdLoop *l, LLVMValueRef begin, LLVMValueRef end, LLVMValueRef step)
{
	l->mark = bd_scope(b);
	return cg_loop(b->f, &l->l, begin, end, step);
}

void
bd_endloop(Bd *b, BdLoop *l)
{
	bd_unscope(b, l->mark);
	cg_endloop(b->f, &l->l);
}

static int
param_index(const Bd *b, const Value *v)
{
	for (int i = 0; i < b->nparam; i++)
		if (b->param[i] == v)
			return i;
	return -1;
}

static int
in_region(const Bd *b, const Node *n)
{
	for (int i = 0; i < b->nnode; i++)
		if (b->node[i] == n)
			return 1;
	return 0;
}

static LLVMValueRef
undef(Bd *b, const Value *v)
{
	return LLVMGetUndef(cg_dt_value_type(b->f, v->type.dt));
}

LLVMValueRef
bd_value(Bd *b, const Value *v, LLVMValueRef idx)
{
	LLVMValueRef val;
	int p;

	if (b->err)
		return undef(b, v);
	for (int i = b->nmemo - 1; i >= 0; i--)
		if (b->memo[i].v == v && b->memo[i].idx == idx)
			return b->memo[i].val;
	if ((p = param_index(b, v)) >= 0) {
		val = cg_load_dt(b->f, v->type.dt, b->pin[p], idx);
	} else if (v->kind == V_RESULT && (in_region(b, v->def) || v->def->op == OP_CONST)) {
		const Node *n = v->def;
		if (!emit[n->op]) {
			bd_fail(b, n, "no lowering in a kernel body");
			return undef(b, v);
		}
		val = emit[n->op](b, n, v->resno, idx);
		if (b->err)
			return undef(b, v);
		if (!exact(n->op))
			val = cg_round_dt(b->f, val, v->type.dt);
	} else {
		bd_fail(b, NULL, "value %%%s is neither a parameter nor computed in the kernel", v->name);
		return undef(b, v);
	}
	if (b->nmemo == b->capmemo) {
		b->capmemo = b->capmemo ? 2 * b->capmemo : 64;
		b->memo = xrealloc(b->memo, sizeof *b->memo * (size_t)b->capmemo);
	}
	b->memo[b->nmemo++] = (BdMemo){v, idx, val};
	return val;
}

LLVMValueRef
bd_in(Bd *b, const Node *n, int k, LLVMValueRef idx)
{
	return bd_value(b, n->in[k], idx);
}

/* ---- block reduction (row mode) ---- */

void
bd_block_reduce(Bd *b, int nc, LLVMValueRef *v, BdComb *comb, void *ctx)
{
	CgFn *f = b->f;
	int nt = b->spec.threads;
	LLVMValueRef tid = cg_tid(f, 0), acc[4], oth[4];
	LLVMTypeRef ty[4];
	CgIf c;

	for (int i = 0; i < nc; i++) {
		ty[i] = LLVMTypeOf(v[i]);
		cg_sstore(f, v[i], cg_sptr(f, cg_addi(f, cg_muli(f, tid, 8), b->scratch_off + i * 8 * nt)), 8);
	}
	cg_barrier(f);
	for (int s = nt / 2; s > 0; s /= 2) {
		cg_if(f, &c, cg_lt(f, tid, cg_i32(f, s)));
		for (int i = 0; i < nc; i++) {
			LLVMValueRef base = cg_addi(f, cg_muli(f, tid, 8), b->scratch_off + i * 8 * nt);
			acc[i] = cg_sload(f, ty[i], cg_sptr(f, base), 8);
			oth[i] = cg_sload(f, ty[i], cg_sptr(f, cg_addi(f, base, 8 * s)), 8);
		}
		comb(b, ctx, acc, oth);
		for (int i = 0; i < nc; i++)
			cg_sstore(f, acc[i], cg_sptr(f, cg_addi(f, cg_muli(f, tid, 8), b->scratch_off + i * 8 * nt)), 8);
		cg_endif(f, &c);
		cg_barrier(f);
	}
	for (int i = 0; i < nc; i++)
		v[i] = cg_sload(f, ty[i], cg_sptr(f, cg_i32(f, b->scratch_off + i * 8 * nt)), 8);
	cg_barrier(f);		/* the scratch is reused by the next reduction */
}

/* ---- checks ---- */

static int
check_node(Bd *b, const Node *n)
{
	if ((!emit[n->op] && !bd_is_scatter(n->op)) || (n->op == OP_NONZERO && !ir_attr(n, "bound"))) {
		const char *why = ir_opinfo[n->op].flags & OPF_DYNSHAPE
			? " (its shape depends on data: it must be gone before codegen)"
			: n->op == OP_ROUTE || n->op == OP_PERMUTE ? " (use cg_emit_route/cg_emit_permute)"
			: n->op == OP_MOE ? " (lower-moe lowers it)" : "";
		return bd_fail(b, n, "no lowering in a kernel body%s", why);
	}
	for (int i = 0; i < n->nin; i++)
		if (n->in[i] && check_dims(b, n, n->in[i]))
			return -1;
	for (int i = 0; i < n->nout; i++) {
		DType dt = n->out[i]->type.dt;
		if (check_dims(b, n, n->out[i]))
			return -1;
		if (dtype_is_packed(dt))
			return bd_fail(b, n, "results of type %s (packed) are not supported", dtype_name(dt));
	}
	return check[n->op] ? check[n->op](b, n) : 0;
}

static int
check_region(Bd *b)
{
	int bad = 0;
	CgExpr e;

	for (int i = 0; i < b->nnode; i++)
		bad |= check_node(b, b->node[i]) < 0;
	for (int i = 0; i < b->nres; i++) {
		const Value *v = b->res[i];
		if (check_dims(b, v->kind == V_RESULT ? v->def : NULL, v) < 0) {
			bad = 1;
			continue;
		}
		if (bd_numel_expr(b, v, &e) < 0)
			bad |= bd_fail(b, v->kind == V_RESULT ? v->def : NULL,
				       "result %%%s has two symbolic dims (T*T elements)", v->name) < 0;
		if (dtype_is_packed(v->type.dt))
			bad |= bd_fail(b, NULL, "result %%%s of type %s (packed) is not supported",
				       v->name, dtype_name(v->type.dt)) < 0;
	}
	for (int i = 0; i < b->nparam; i++)
		bad |= check_dims(b, NULL, b->param[i]) < 0;
	if (b->nres == 0)
		bad |= bd_fail(b, NULL, "no results") < 0;
	for (int i = 0; i < b->nnode && !bad; i++)
		if (bd_is_scatter(b->node[i]->op) && (b->nres != 1 || b->res[0] != b->node[i]->out[0]))
			bad |= bd_fail(b, b->node[i], "a scatter must be the body's only result") < 0;
	return bad ? -1 : 0;
}

/* The reduction that gets a CTA per row: the first one over >= row_min elements. */
static const Node *
find_anchor(Bd *b)
{
	for (int i = 0; i < b->nnode; i++) {
		const Node *n = b->node[i];
		int64_t len;
		CgExpr e;
		if (!bd_is_reduction(n->op))
			continue;
		len = bd_row_len(b, n);
		if ((len < 0 || len >= b->spec.row_min) && bd_row_count_expr(b, n, &e) == 0)
			return n;
	}
	return NULL;
}

/* ---- the kernel ---- */

static void
store_result(Bd *b, int r, LLVMValueRef idx)
{
	const Value *v = b->res[r];

	cg_store_dt(b->f, v->type.dt, b->pout[r], idx, bd_value(b, v, idx));
}

static void
elementwise(Bd *b, CgExpr *total)
{
	CgFn *f = b->f;
	int nt = b->spec.threads;
	LLVMValueRef gid = cg_add(f, cg_muli(f, cg_sext64(f, cg_ctaid(f, 0)), nt), cg_sext64(f, cg_tid(f, 0)));
	LLVMValueRef stride = cg_muli(f, cg_sext64(f, cg_nctaid(f, 0)), nt);
	LLVMValueRef n, i;
	BdLoop l;
	CgExpr e;

	*total = CG_EXPR_INT(0);
	for (int r = 0; r < b->nres; r++) {
		bd_numel_expr(b, b->res[r], &e);
		total->a = MAX(total->a, e.a);
		total->b = MAX(total->b, e.b);
	}
	n = cg_add(f, cg_muli(f, b->T64, total->a), bd_i64(b, total->b));
	i = bd_loop(b, &l, gid, n, stride);
	for (int r = 0; r < b->nres; r++) {
		CgIf c;
		bd_numel_expr(b, b->res[r], &e);
		if (e.a == total->a && e.b == total->b) {
			store_result(b, r, i);
			continue;
		}
		int mark = bd_scope(b);
		cg_if(f, &c, cg_lt(f, i, bd_numel(b, b->res[r])));
		store_result(b, r, i);
		cg_endif(f, &c);
		bd_unscope(b, mark);
	}
	bd_endloop(b, &l);
}

static void
row_mode(Bd *b)
{
	b->row = cg_sext64(b->f, cg_ctaid(b->f, 0));
	bd_anchor_stats(b);
	bd_nested_stats(b);
	bd_row_elements(b, store_result);
}

static const Node *
scatter_node(Bd *b)
{
	for (int i = 0; i < b->nnode; i++)
		if (bd_is_scatter(b->node[i]->op))
			return b->node[i];
	return NULL;
}

static void
note(Bd *b, char *buf, size_t len)
{
	size_t k = (size_t)snprintf(buf, len, "body %s:", b->mode == BD_ROW ? "row" : b->mode == BD_SCATTER
				    ? "scatter" : "elementwise");

	for (int i = 0; i < b->nnode && k < len; i++)
		if (b->node[i]->op != OP_CONST && b->node[i]->op != OP_RESHAPE)
			k += (size_t)snprintf(buf + k, len - k, " %s", ir_opname(b->node[i]->op));
}

static int
emit_region(Bd *b, CgModule *m, const char *name)
{
	CgParam *p;
	int np = 0, nt, block[3];
	CgExpr grid[3] = {CG_EXPR_INT(1), CG_EXPR_INT(1), CG_EXPR_INT(1)}, total;
	const Node *sc;
	char buf[512];
	int rc;

	b->name = name;
	if (b->spec.threads < 32 || b->spec.threads > 1024 || (b->spec.threads & (b->spec.threads - 1)))
		return diag_error(b->d, LOC_NONE, "kernel %s: %d threads (need a power of two, 32..1024)",
				  name, b->spec.threads);
	if (check_region(b) < 0)
		return -1;
	nt = b->spec.threads;
	sc = scatter_node(b);
	b->anchor = sc ? NULL : find_anchor(b);
	b->mode = sc ? BD_SCATTER : b->anchor ? BD_ROW : BD_EW;
	p = xcalloc((size_t)(b->nparam + b->nres + 1), sizeof *p);
	for (int i = 0; i < b->nparam; i++) {
		snprintf(buf, sizeof buf, "in:%s", b->param[i]->name);
		p[np++] = (CgParam){CGP_PTR, arena_strdup(b->m->arena, buf)};
	}
	for (int i = 0; i < b->nres; i++) {
		snprintf(buf, sizeof buf, "out:%s", b->resname[i]);
		p[np++] = (CgParam){CGP_PTR, arena_strdup(b->m->arena, buf)};
	}
	p[np++] = (CgParam){CGP_I32, "T"};
	b->f = cg_fn_begin(m, name, p, np, nt, 0, b->d);
	free(p);
	if (!b->f)
		return -1;
	b->pin = xcalloc((size_t)b->nparam + 1, sizeof *b->pin);
	b->pout = xcalloc((size_t)b->nres + 1, sizeof *b->pout);
	np = 0;
	for (int i = 0; i < b->nparam; i++)
		b->pin[i] = cg_arg(b->f, np++);
	for (int i = 0; i < b->nres; i++)
		b->pout[i] = cg_arg(b->f, np++);
	b->T = cg_arg(b->f, np);
	b->T64 = cg_sext64(b->f, cg_max(b->f, b->T, cg_i32(b->f, 0)));
	block[0] = nt;
	block[1] = block[2] = 1;
	if (b->mode == BD_SCATTER) {
		bd_emit_scatter(b, sc, b->pout[0], &grid[0]);
	} else if (b->mode == BD_ROW) {
		b->nstat = bd_stat_words(b, b->anchor);
		b->stat_off = 0;
		b->scratch_off = 8 * b->nstat;
		b->smem = b->scratch_off + 2 * 8 * nt;
		bd_find_nested(b);
		bd_row_count_expr(b, b->anchor, &grid[0]);
		row_mode(b);
	} else {
		elementwise(b, &total);
		grid[0] = (CgExpr){total.a, total.b, nt};
	}
	note(b, buf, sizeof buf);
	rc = cg_fn_end(b->f, block, grid, b->smem, buf);
	free(b->pin);
	free(b->pout);
	free(b->memo);
	return rc;
}

static void
region_of_graph(Bd *b, const Graph *g, const Node **nodes)
{
	int k = 0;

	b->m = g->m;
	b->param = (const Value **)g->param;
	b->nparam = g->nparam;
	for (const Node *n = g->first; n; n = n->next)
		nodes[k++] = n;
	b->node = nodes;
	b->nnode = k;
	b->res = (const Value **)g->ret;
	b->resname = g->retname;
	b->nres = g->nret;
}

int
cg_body_check(const Graph *g, Diag *d)
{
	const Node **nodes = xcalloc((size_t)g->nnode + 1, sizeof *nodes);
	Bd b;
	int rc;

	memset(&b, 0, sizeof b);
	cg_body_default(&b.spec);
	b.d = d;
	b.name = g->name;
	region_of_graph(&b, g, nodes);
	rc = check_region(&b);
	free(nodes);
	return rc;
}

int
cg_emit_body(CgModule *m, const char *name, const Graph *g, const CgBodySpec *s, Diag *d)
{
	const Node **nodes = xcalloc((size_t)g->nnode + 1, sizeof *nodes);
	Bd b;
	int rc;

	memset(&b, 0, sizeof b);
	if (s)
		b.spec = *s;
	else
		cg_body_default(&b.spec);
	b.d = d;
	region_of_graph(&b, g, nodes);
	if (!b.resname) {
		b.resname = xcalloc((size_t)b.nres + 1, sizeof *b.resname);
		for (int i = 0; i < b.nres; i++)
			b.resname[i] = b.res[i]->name;
	}
	rc = emit_region(&b, m, name);
	if (b.resname != g->retname)
		free((void *)b.resname);
	free(nodes);
	return rc;
}

int
cg_emit_node(CgModule *m, const char *name, const Node *n, const CgBodySpec *s, Diag *d)
{
	const Value **param = xcalloc((size_t)n->nin + 1, sizeof *param);
	const char **rname = xcalloc((size_t)n->nout + 1, sizeof *rname);
	const Node *nodes[1] = {n};
	Bd b;
	int rc;

	memset(&b, 0, sizeof b);
	if (s)
		b.spec = *s;
	else
		cg_body_default(&b.spec);
	b.d = d;
	b.m = n->out[0]->graph ? n->out[0]->graph->m : NULL;
	for (int i = 0; i < n->nin; i++) {	/* a repeated operand is passed again */
		const Value *v = n->in[i];
		if (v && !(v->kind == V_RESULT && v->def->op == OP_CONST))
			param[b.nparam++] = v;
	}
	for (int i = 0; i < n->nout; i++)
		rname[i] = n->out[i]->name;
	b.param = param;
	b.node = nodes;
	b.nnode = 1;
	b.res = (const Value **)n->out;
	b.resname = rname;
	b.nres = n->nout;
	rc = b.m ? emit_region(&b, m, name) : diag_error(d, n->loc, "kernel %s: node outside a graph", name);
	free(param);
	free(rname);
	return rc;
}
