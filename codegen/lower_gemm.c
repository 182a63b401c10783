/*
 * lower_gemm.c — a fused `template=gemm|grouped_gemm` kernel body becomes a
 * GemmSpec for k_gemm.c: the prologue (the MoE token gather) becomes A's
 * row gather, the ops after the (grouped) matmul become the epilogue
 * program, scatter_rows becomes the scattered store, and a final quantize
 * (scalar scale) or quantize_dynamic (group=N) the output quantisation.
 *
 *	%src = div %rows, 2 ; %xs = gather %x, %src      A = x, gather = rows / 2
 *	%h = grouped_matmul %xs, %w, %offs, to=bf16      B = w [E,N,K], offsets
 *	%a = swiglu %h, layout=interleave                 epilogue: swiglu(acc)
 *
 * FP8 x FP8 (GemmSpec.f8): A the dequantize of parameters (e4m3 values,
 * f32 scales per row and 128 columns; gathered after it) and B that of an
 * e4m3 weight with f32 scales per 128 along K, what fuse-dequant moves in
 * for sm_90a.
 *
 * Anything the GEMM builder cannot express makes this return -1 with the
 * reason; the caller then compiles the body as a generic kernel.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

int
cg_param_index(const Graph *k, const Value *v)
{
	for (int i = 0; i < k->nparam; i++)
		if (k->param[i] == v)
			return i;
	return -1;
}

/* concat(x, x, ..., axis=-1) of one value r times: r; else 0. */
int
cg_concat_repeats(const Value *v)
{
	const Node *c = v->kind == V_RESULT ? v->def : NULL;

	if (!c || c->op != OP_CONCAT || c->nin < 2 || v->type.rank < 1 ||
	    ir_axis(ir_attr_int(c, "axis", 0), v->type.rank) != v->type.rank - 1)
		return 0;
	for (int i = 1; i < c->nin; i++)
		if (c->in[i] != c->in[0])
			return 0;
	return c->nin;
}

static const Value *
strip_views(const Value *v)
{
	while (v->kind == V_RESULT && v->def->op == OP_RESHAPE && v->def->nin == 1)
		v = v->def->in[0];
	return v;
}

/* Views and float casts: the epilogue loads the source in its own type and
 * computes in f32 (a cast between float types only rounds). */
static const Value *
strip_loads(const Value *v)
{
	for (;;) {
		v = strip_views(v);
		if (v->kind != V_RESULT || v->def->op != OP_CAST ||
		    !dtype_is_float(v->type.dt) || !dtype_is_float(v->def->in[0]->type.dt))
			return v;
		v = v->def->in[0];
	}
}

typedef struct {
	const Graph *k;
	GemmSpec *s;
	CgGemmBind *bind;
	const Node *anchor;
	int acc_rank;
	Dim acc[MAXRANK];	/* the accumulator's shape (before swiglu halves N) */
	int64_t width;		/* current column count (N, or N/2 after swiglu) */
	const Value *a_idx;	/* the A rows' gather index (perhaps rows/k), or NULL */
	int *map;		/* epilogue index by value id; -1 none */
	uint32_t nmap;
	char why[256];
} L;

static int
fail(L *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l->why, sizeof l->why, fmt, ap);
	va_end(ap);
	return -1;
}

static int
slot(L *l, const Value *v)
{
	return v->id < l->nmap ? (int)v->id : -1;
}

static int
get(L *l, const Value *v)
{
	int i = slot(l, v);

	return i >= 0 ? l->map[i] : -1;
}

static void
put(L *l, const Value *v, int ep)
{
	int i = slot(l, v);

	if (i >= 0)
		l->map[i] = ep;
}

/* Epilogue leaves name the kernel parameter they read: "p3". */
static const char *
role(L *l, int param)
{
	static const char *names[] = {
		"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p11",
		"p12", "p13", "p14", "p15", "p16", "p17", "p18", "p19", "p20", "p21", "p22",
		"p23", "p24", "p25", "p26", "p27", "p28", "p29", "p30", "p31",
	};

	(void)l;
	return param < (int)NELEM(names) ? names[param] : "p?";
}

/* A routing weight read through the permutation: reshape(gather(reshape(w), idx)). */
static int
row_leaf_indirect(L *l, const Value *v)
{
	const Value *g = strip_views(v);
	int w, idx;

	if (g->kind != V_RESULT || g->def->op != OP_GATHER || ir_attr_int(g->def, "axis", 0) != 0)
		return -2;
	w = cg_param_index(l->k, strip_views(g->def->in[0]));
	if (w >= 0 && l->a_idx && g->def->in[1] == l->a_idx)	/* the A rows' own index */
		return cg_ep_row(&l->s->ep, strip_views(g->def->in[0])->type.dt, CGR_GATHER, role(l, w));
	idx = cg_param_index(l->k, g->def->in[1]);
	if (w < 0 || idx < 0)
		return fail(l, "a gathered epilogue operand is not read from a parameter");
	if (PERM_COPY_DEFAULT && idx >= 0 && idx != l->bind->scatter && !l->s->gather && l->bind->gather < 0) {
		/* A read in expert order already (a permuted copy): the index is the leaves' alone */
		l->bind->gather = idx;
		l->s->leaf_gather = 1;
	}
	CgRowIndex how = idx == l->bind->scatter ? CGR_SCATTER
			 : idx == l->bind->gather ? CGR_GATHER_RAW : NCGR;
	if (how == NCGR)
		return fail(l, "an epilogue operand is gathered by an index the GEMM does not know");
	if (strip_views(g->def->in[0])->type.rank < 1)
		return fail(l, "a gathered scalar");
	return cg_ep_row(&l->s->ep, strip_views(g->def->in[0])->type.dt, how, role(l, w));
}

/* Classify operand v of an epilogue op: immediate, column, row or matrix. */
static int
leaf(L *l, const Value *v)
{
	const Type *t = &v->type;
	int p, r = l->acc_rank, ones = 1;

	if (v->kind == V_RESULT && v->def->op == OP_CONST) {
		double f[1];
		if (ir_attr_floats(v->def, "value", f, 1) != 1)
			return fail(l, "a constant epilogue operand with more than one element");
		return cg_ep_imm(&l->s->ep, (float)f[0]);
	}
	if (v->kind == V_RESULT) {
		int k = row_leaf_indirect(l, v);
		if (k != -2)
			return k;
		v = strip_loads(v);
	}
	if ((p = cg_param_index(l->k, v)) < 0)
		return fail(l, "epilogue operand %%%s is computed in the kernel", v->name);
	t = &v->type;
	for (int i = 0; i + 1 < t->rank; i++)
		ones &= t->dim[i] == 1;
	if (t->dim[t->rank - 1] == l->width && ones)		/* [N] or [1,N] */
		return cg_ep_col(&l->s->ep, t->dt, 0, role(l, p));
	if (l->s->groups && t->rank == 2 && t->dim[0] == l->s->groups && t->dim[1] == l->width)
		return cg_ep_col(&l->s->ep, t->dt, l->width, role(l, p));	/* per expert */
	if (t->rank == r && t->dim[r - 1] == 1) {			/* [M,1] */
		for (int i = 0; i + 1 < r; i++)
			if (t->dim[i] != l->acc[i])
				return fail(l, "a row operand of another shape");
		return cg_ep_row(&l->s->ep, t->dt, CGR_DIRECT, role(l, p));
	}
	if (t->rank == r && t->dim[r - 1] == l->width) {		/* [M,N] */
		for (int i = 0; i + 1 < r; i++)
			if (t->dim[i] != l->acc[i])
				return fail(l, "a matrix operand of another shape");
		return cg_ep_mat(&l->s->ep, t->dt, l->width, CGR_DIRECT, role(l, p));
	}
	return fail(l, "epilogue operand %%%s is not a scalar, row, column or matrix", v->name);
}

static int
operand(L *l, const Value *v)
{
	int e = get(l, v);

	return e >= 0 ? e : leaf(l, v);
}

/* An elementwise op: one instruction of ew.c's, with its IR op. */
static int
scalar(L *l, const Node *n)
{
	IrEwAttrs at;
	int a, b = -1;

	if (ir_ew_attrs(n, &at, l->why, sizeof l->why) < 0)
		return -1;
	if (ir_opinfo[n->op].inmax == 1 && get(l, n->in[0]) < 0)
		return fail(l, "%s of a value the epilogue does not compute", ir_opname(n->op));
	if ((a = operand(l, n->in[0])) < 0 || (n->nin > 1 && (b = operand(l, n->in[1])) < 0))
		return -1;
	return cg_ep_ew(&l->s->ep, n->op, &at, a, b);
}

/* A scalar operand of quantize: an immediate, or a parameter read as one element. */
static int
quant_scalar(L *l, const Value *v, float *imm, const char **r, DType *dt)
{
	double f[1];
	int p;

	v = strip_views(v);
	if (ir_type_numel(&v->type) != 1)
		return fail(l, "quantize with a scale or zero point that is not a scalar");
	if (v->kind == V_RESULT && v->def->op == OP_CONST) {
		if (ir_attr_floats(v->def, "value", f, 1) != 1)
			return fail(l, "a quantize constant without a value");
		*imm = (float)f[0];
		return 0;
	}
	if ((p = cg_param_index(l->k, v)) < 0)
		return fail(l, "the scale or zero point of quantize is computed in the kernel");
	*r = role(l, p);
	*dt = v->type.dt;
	return 0;
}

/*
 * The output quantisation: the last node, reading the last epilogue value;
 * its q is C and quantize_dynamic's scales (when the kernel returns them)
 * are C_scale.
 */
static int
quant_node(L *l, const Node *n)
{
	CgQuant *q = &l->s->quant;
	int e = get(l, n->in[0]);

	if (e < 0 || e != l->s->ep.n - 1)
		return fail(l, "%s of a value that is not the epilogue's result", ir_opname(n->op));
	if (n->next)
		return fail(l, "%s is not the last op of the kernel", ir_opname(n->op));
	q->in_dt = n->in[0]->type.dt;
	if (n->op == OP_QUANTIZE) {
		q->kind = CG_QUANT_STATIC;
		if (ir_attr_int(n, "block_size", 0) != 0)
			return fail(l, "a blocked quantize");
		if (quant_scalar(l, n->in[1], &q->scale, &q->scale_role, &q->scale_dt) < 0 ||
		    (n->nin > 2 && n->in[2] &&
		     quant_scalar(l, n->in[2], &q->zero, &q->zero_role, &q->zero_dt) < 0))
			return -1;
		if (n->out[0]->type.dt == DT_F8E4M3 && !ir_attr_int(n, "saturate", 1))
			return fail(l, "quantize to f8e4m3 with saturate=0");
	} else {
		const Attr *g = ir_attr(n, "group");
		if (!g || g->kind != A_INT)
			return fail(l, "quantize_dynamic per %s: its scale needs the whole %s",
				    g && g->kind == A_STR ? g->u.s : "tensor",
				    g && g->kind == A_STR ? g->u.s : "tensor");
		q->kind = CG_QUANT_GROUP;
		q->group = (int)g->u.i;
		if (l->k->nret == 2 && l->k->ret[1] == n->out[1]) {
			q->want_scales = 1;
			l->bind->c_scale = 1;
		}
	}
	if (l->k->ret[0] != n->out[0] || l->k->nret != 1 + q->want_scales)
		return fail(l, "the kernel returns something besides the quantised output and its scales");
	put(l, n->out[0], e);
	return 0;
}

static int
epilogue_node(L *l, const Node *n)
{
	int e;

	if (n->op == OP_CONST)
		return 0;
	if ((n->op == OP_RESHAPE && n->nin == 1) || n->op == OP_GATHER)
		return 0;	/* operand preparation, read by the leaf that needs it */
	if (n->op == OP_QUANTIZE || n->op == OP_QUANTIZE_DYNAMIC)
		return quant_node(l, n);
	if (n->op == OP_SCATTER_ROWS) {
		int p = cg_param_index(l->k, n->in[1]);
		if (get(l, n->in[0]) < 0 || p < 0)
			return fail(l, "scatter_rows of something the epilogue does not compute");
		l->s->store = CG_STORE_SCATTER;
		l->bind->scatter = p;
		put(l, n->out[0], get(l, n->in[0]));
		return 0;
	}
	if (n->op == OP_SWIGLU) {
		IrGluAttrs g;
		char why[160];
		if (ir_glu_attrs(n, "layout", &g, why, sizeof why))
			return fail(l, "swiglu: %s", why);
		if (!g.interleave)
			return fail(l, "swiglu with concatenated gate|up (needs interleaved columns)");
		if (g.act != IR_GLU_SILU && g.act != IR_GLU_OAI)
			return fail(l, "swiglu act=%s", ir_attr_str(n, "act", "silu"));
		if ((e = get(l, n->in[0])) < 0)
			return fail(l, "swiglu of a value the epilogue does not compute");
		e = cg_ep_swiglu(&l->s->ep, e, &g);
		l->width /= 2;
	} else if (n->op == OP_CAST || n->op == OP_IDENTITY) {
		if ((e = get(l, n->in[0])) < 0)	/* computed in f32: only a rounding */
			return fail(l, "%s of a value the epilogue does not compute", ir_opname(n->op));
		if (n->out[0]->type.dt != n->in[0]->type.dt)
			e = cg_ep_round(&l->s->ep, e, n->out[0]->type.dt);
	} else if (cg_ew_has(n->op)) {
		/* rounded to its type as the IR rounds it (a bf16 residual add) */
		if ((e = scalar(l, n)) >= 0)
			e = cg_ep_round(&l->s->ep, e, n->out[0]->type.dt);
	} else {
		return fail(l, "%s has no epilogue form", ir_opname(n->op));
	}
	if (e < 0)
		return l->why[0] ? -1 : fail(l, "the epilogue program is full");
	put(l, n->out[0], e);
	return 0;
}

/* Blocks of bs along the last axis of e4m3 values with f32 scales of their rank. */
static int
f8_blocks(const Node *dq, int64_t bs)
{
	const Type *q = &dq->in[0]->type, *sc = &dq->in[1]->type;
	int r = q->rank, axis = (int)ir_attr_int(dq, "axis", 1);

	return q->dt == DT_F8E4M3 && sc->dt == DT_F32 && (dq->nin < 3 || !dq->in[2]) &&
	       (axis == r - 1 || axis == -1) && ir_attr_int(dq, "block_size", 0) == bs &&
	       sc->rank == r && ir_dim_is_static(q->dim[r - 1]) && q->dim[r - 1] % bs == 0 &&
	       sc->dim[r - 1] == q->dim[r - 1] / bs;
}

/* FP8 x FP8: A = dequantize(q, scale) of parameters, per row and 128 columns. */
static int
bind_a_f8(L *l, const Node *dq)
{
	if (!f8_blocks(dq, 128))
		return fail(l, "A is dequantized from other than e4m3 with f32 scales per 128 columns");
	l->bind->a = cg_param_index(l->k, dq->in[0]);
	l->bind->ascale = cg_param_index(l->k, dq->in[1]);
	if (l->bind->a < 0 || l->bind->ascale < 0)
		return fail(l, "the dequantized A's operands are computed in the kernel");
	l->s->a_dt = DT_F8E4M3;
	l->s->f8.group = 128;
	return 0;
}

static int quant_operand(L *l, const Value *v, int *il);

/* FP8 x FP8: B = dequantize(q, scale) of (lower-moe's interleave of) weights, per 128 along K. */
static int
bind_b_f8(L *l, const Node *dq, int tb)
{
	int il[2];

	if (!dq || !tb || !f8_blocks(dq, l->s->f8.group))
		return fail(l, "an e4m3 A needs B e4m3 [N,K] with f32 scales per %d along K", l->s->f8.group);
	l->bind->b = quant_operand(l, dq->in[0], &il[0]);
	l->bind->bscale = quant_operand(l, dq->in[1], &il[1]);
	if (l->bind->b < 0 || l->bind->bscale < 0 || il[0] != il[1])
		return fail(l, "the dequantized B's operands are computed in the kernel");
	l->s->b_dt = DT_F8E4M3;
	l->s->f8.b_interleave = il[0];
	l->s->mainloop = CG_MAINLOOP_WGMMA;	/* its one mainloop */
	return 0;
}

/* A: the matmul's first operand, or the source of the token gather. */
static int
bind_a(L *l, const Node *mm)
{
	const Value *a = mm->in[0];

	if (a->kind == V_RESULT && a->def->op == OP_GATHER && ir_attr_int(a->def, "axis", 0) == 0) {
		const Value *src = a->def->in[1];
		int div = 1;
		l->a_idx = src;
		if (src->kind == V_RESULT && src->def->op == OP_DIV) {
			double f[1];
			const Value *c = src->def->in[1];
			if (c->kind != V_RESULT || c->def->op != OP_CONST ||
			    ir_attr_floats(c->def, "value", f, 1) != 1 || f[0] < 1)
				return fail(l, "a gather index divided by something other than a constant");
			div = (int)f[0];
			src = src->def->in[0];
		}
		l->bind->gather = cg_param_index(l->k, src);
		l->s->gather = 1;
		l->s->gather_div = div;
		a = a->def->in[0];
		if (l->bind->gather < 0)
			return fail(l, "the gather index is computed in the kernel");
	}
	if (a->kind == V_RESULT && a->def->op == OP_DEQUANTIZE)
		return bind_a_f8(l, a->def);
	if ((l->s->a_rep = cg_concat_repeats(a)) > 1)	/* split-f32: A read a_rep times along K */
		a = a->def->in[0];
	l->bind->a = cg_param_index(l->k, a);
	if (l->bind->a < 0)
		return fail(l, "A is computed in the kernel");
	return 0;
}

/* The accumulator's row count as m_per_t * T, or static (a model without
 * symbols: m_per_t 1, and the kernel's T is the row count). */
static int
rows_per_t(L *l, const Module *m, const Value *a, int64_t K)
{
	Dim rows = 1;
	const Type *t = &a->type;

	if (l->s->gather)
		rows = l->k->param[l->bind->gather]->type.dim[0];
	else
		for (int i = 0; i + 1 < t->rank; i++)
			rows = ir_dim_mul((Module *)m, rows, t->dim[i]);
	const DimExpr *e = ir_dim_expr(m, rows);
	if (ir_dim_is_static(rows) && rows >= 0 && rows <= INT32_MAX) {
		l->s->m_per_t = 1;
		l->bind->rows = rows;
		return 0;
	}
	if (!e || e->coef < 1 || e->coef > 1024 || ir_dim_has_unknown(m, rows))
		return fail(l, "A's rows are not a multiple of the token count");
	l->s->m_per_t = (int)e->coef;
	(void)K;
	return 0;
}

/*
 * B as dequantize(q, scale[, zero]) of parameters (fold-dequant's form): the
 * kernel reads q packed and dequantises in registers (GemmSpec.bq).  The
 * blocks run along K of B [N,K] (or [E,N,K]): block_size = group with scale
 * [.., N, K/group], or per channel (block_size 0, a 1-D scale along N: one
 * group of K).  The result type is the mma's: A's.
 */
/*
 * An operand of B's dequantize: a kernel parameter, or lower-moe's gate|up
 * interleave of one (reshape [E,2,N/2,X], transpose [0,2,1,3], reshape back),
 * which the compile-time repack applies (*il = 1).  -1: neither.
 */
static int
quant_operand(L *l, const Value *v, int *il)
{
	const Value *t, *r, *w;
	int64_t perm[4], want[4] = {0, 2, 1, 3};

	*il = 0;
	if (cg_param_index(l->k, v) >= 0)
		return cg_param_index(l->k, v);
	if (v->kind != V_RESULT || v->def->op != OP_RESHAPE || v->type.rank != 3)
		return -1;
	t = v->def->in[0];
	if (t->kind != V_RESULT || t->def->op != OP_TRANSPOSE || ir_attr_ints(t->def, "perm", perm, 4) != 4 ||
	    memcmp(perm, want, sizeof perm))
		return -1;
	r = t->def->in[0];
	if (r->kind != V_RESULT || r->def->op != OP_RESHAPE || r->type.rank != 4)
		return -1;
	w = r->def->in[0];
	if (w->type.rank != 3 || r->type.dim[0] != w->type.dim[0] || r->type.dim[1] != 2 ||
	    !ir_dim_is_static(w->type.dim[1]) || r->type.dim[2] * 2 != w->type.dim[1] ||
	    r->type.dim[3] != w->type.dim[2] || memcmp(v->type.dim, w->type.dim, sizeof(Dim) * 3))
		return -1;
	*il = 1;
	return cg_param_index(l->k, w);
}

static int
bind_b_quant(L *l, const Node *dq, int tb)
{
	const Type *q = &dq->in[0]->type, *sc = &dq->in[1]->type;
	int r = q->rank, axis = (int)ir_attr_int(dq, "axis", 1);
	int64_t bs = ir_attr_int(dq, "block_size", 0), K = q->dim[r - 1];

	if (axis < 0)
		axis += r;
	if (!tb)
		return fail(l, "a dequantized B [K,N] (only [N,K] weights are packed)");
	int il[3] = {0, 0, 0}, zero = dq->nin > 2 && dq->in[2];
	l->bind->b = quant_operand(l, dq->in[0], &il[0]);
	l->bind->bscale = quant_operand(l, dq->in[1], &il[1]);
	l->bind->bzero = zero ? quant_operand(l, dq->in[2], &il[2]) : -1;
	if (l->bind->b < 0 || l->bind->bscale < 0 || (zero && l->bind->bzero < 0))
		return fail(l, "the dequantized B's operands are computed in the kernel");
	if (il[1] != il[0] || (zero && il[2] != il[0]))
		return fail(l, "the dequantized B's operands are not laid out alike");
	l->bind->b_interleave = il[0];
	if (dq->out[0]->type.dt != l->s->a_dt)
		return fail(l, "B dequantized to %s for an A of %s", dtype_name(dq->out[0]->type.dt),
			    dtype_name(l->s->a_dt));
	if (bs > 0 && axis == r - 1 && sc->rank == r && sc->dim[r - 1] == K / bs && K % bs == 0)
		l->s->bq.group = (int)bs;
	else if (bs == 0 && r == 2 && axis == 0 && sc->rank == 1)
		l->s->bq.group = (int)K;	/* per output channel */
	else
		return fail(l, "a dequantized B whose scales are not blocks along K");
	l->s->b_dt = q->dt;
	l->s->bq.scale_dt = sc->dt;
	l->s->bq.zero = l->bind->bzero >= 0;
	return 0;
}

static int lower(const Module *m, const Graph *k, L *l, char *why, size_t whylen);

int
cg_gemm_from_kernel(const Module *m, const Graph *k, GemmSpec *s, CgGemmBind *bind,
		    char *why, size_t whylen)
{
	L l;
	int rc;

	memset(&l, 0, sizeof l);
	l.nmap = m->nvalue;
	l.map = xmalloc(sizeof *l.map * (l.nmap + 1));
	memset(l.map, -1, sizeof *l.map * (l.nmap + 1));
	l.k = k;
	l.s = s;
	l.bind = bind;
	if (k->nparam > 32) {
		free(l.map);
		return snprintf(why, whylen, "more than 32 parameters"), -1;
	}
	rc = lower(m, k, &l, why, whylen);
	free(l.map);
	return rc;
}

static int
lower(const Module *m, const Graph *k, L *lp, char *why, size_t whylen)
{
	L l = *lp;
	GemmSpec *s = l.s;
	CgGemmBind *bind = l.bind;
	const Node *mm = NULL;

	bind->a = bind->b = bind->gather = bind->scatter = bind->offsets = bind->c_scale = -1;
	bind->bscale = bind->bzero = bind->ascale = -1;
	bind->b_interleave = 0;
	bind->rows = 0;
	bind->fold = NULL;
	cg_gemm_default(s);
	for (const Node *n = k->first; n; n = n->next)
		if (n->op == OP_MATMUL || n->op == OP_GROUPED_MATMUL) {
			if (mm)
				return snprintf(why, whylen, "two matmuls in one kernel"), -1;
			mm = n;
		}
	if (!mm || (k->nret != 1 && !(k->nret == 2 && k->last->op == OP_QUANTIZE_DYNAMIC)))
		return snprintf(why, whylen, "not one matmul with one result"), -1;
	l.anchor = mm;
	const Value *w = mm->in[1];
	int grouped = mm->op == OP_GROUPED_MATMUL;
	int tb = (int)ir_attr_int(mm, "trans_b", grouped ? 1 : 0);
	if (ir_attr_int(mm, "trans_a", 0) || w->type.rank != 2 + grouped)
		return snprintf(why, whylen, "A transposed or B not a matrix per expert"), -1;
	const Node *dq = w->kind == V_RESULT && w->def->op == OP_DEQUANTIZE ? w->def : NULL;
	s->a_dt = mm->in[0]->type.dt;
	s->b_dt = w->type.dt;
	if (bind_a(&l, mm) < 0 ||
	    (s->f8.group ? bind_b_f8(&l, dq, tb) : dq ? bind_b_quant(&l, dq, tb) : (bind->b = cg_param_index(k, w))) < 0) {
		snprintf(why, whylen, "%s", l.why[0] ? l.why : "B is computed in the kernel");
		return -1;
	}
	s->b_layout = tb ? CG_B_NK : CG_B_KN;
	s->N = tb ? w->type.dim[grouped + 0] : w->type.dim[grouped + 1];
	s->K = tb ? w->type.dim[grouped + 1] : w->type.dim[grouped + 0];
	/* the scattered store's index first: epilogue leaves may read through it */
	for (const Node *n = mm->next; n; n = n->next)
		if (n->op == OP_SCATTER_ROWS)
			bind->scatter = cg_param_index(k, n->in[1]);
	if (grouped) {
		s->groups = (int)w->type.dim[0];
		if ((bind->offsets = cg_param_index(k, mm->in[2])) < 0)
			return snprintf(why, whylen, "the expert offsets are computed in the kernel"), -1;
	}
	l.acc_rank = mm->out[0]->type.rank;
	memcpy(l.acc, mm->out[0]->type.dim, sizeof l.acc);
	l.width = s->N;
	if (rows_per_t(&l, m, l.s->gather ? mm->in[0] : k->param[bind->a], s->K) < 0)
		return snprintf(why, whylen, "%s", l.why), -1;
	put(&l, mm->out[0], cg_ep_acc(&s->ep));
	if (mm->nin > 2 + grouped && mm->in[2 + grouped]) {	/* the bias operand */
		int b = leaf(&l, mm->in[2 + grouped]);
		if (b < 0)
			return snprintf(why, whylen, "%s", l.why), -1;
		put(&l, mm->out[0], cg_ep_op(&s->ep, OP_ADD, get(&l, mm->out[0]), b));
	}
	/* the matmul's result as the IR types it (bf16: rounded before what follows) */
	put(&l, mm->out[0], cg_ep_round(&s->ep, get(&l, mm->out[0]), mm->out[0]->type.dt));
	for (const Node *n = mm->next; n; n = n->next)
		if (epilogue_node(&l, n) < 0)
			return snprintf(why, whylen, "%s", l.why), -1;
	if (get(&l, k->ret[0]) != s->ep.n - 1 && s->ep.n > 1)
		return snprintf(why, whylen, "the result is not the last epilogue value"), -1;
	s->c_dt = k->ret[0]->type.dt;
	/* a last rounding to C's type is the store's own */
	if (s->ep.n > 1 && s->ep.in[s->ep.n - 1].op == CGE_ROUND &&
	    s->ep.in[s->ep.n - 1].dt == s->c_dt && s->ep.in[s->ep.n - 1].a == s->ep.n - 2)
		s->ep.n--;
	return 0;
}
