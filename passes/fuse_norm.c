/*
 * fuse-norm: fold RMSNorm and LayerNorm exactly into the GEMMs that read
 * them ("FlashNorm").  The norm weight goes into W at compile time; 1/rms of
 * each row is a cheap row statistic applied in the GEMM's epilogue.
 *
 *	%n = rms_norm %x, $g, eps=e          %r = rstd %x, eps=e : f32[T,1]
 *	%h = matmul %n, $w, trans_b=1   =>   %h0 = matmul %x, ($w * $g), to=f32
 *	                                     %h = cast (%h0 * %r) to h's dtype
 *
 * LayerNorm adds the mean correction: (x W' - mean(x) * colsum(W')) * rstd
 * + (beta W + b), with W' = g * W.  Only matmuls whose B is a weight (or a
 * weight-only value) are rewritten; other users keep the norm.
 *
 * A matmul whose result decides routing (a router's logits) keeps reading
 * the norm: folding would round differently from the graph's norm(x) @ W
 * (g * W rounded to the weight's dtype, the normalised rows not rounded),
 * and a near tie between two experts would flip.  The router is a small
 * GEMM; the norm stays a row kernel producing the rows the graph computes.
 *
 * The experts of a MoE block read the norm through the permutation's row
 * gather.  Row scaling commutes with a row gather, so RMSNorm folds there
 * too, with 1/rms gathered by the same index:
 *
 *	%xs = gather %n, %i                  %xs = gather %x, %i
 *	%h = grouped_matmul %xs, $w, %o  =>  %rs = gather %r, %i
 *	                                     %h0 = grouped_matmul %xs, ($w * $g), %o, to=f32
 *	                                     %h = cast (%h0 * %rs) to h's dtype
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/*
 * A weight dequantised from 8 bits or fewer: fuse-dequant reads it packed in
 * the GEMM's mainloop.  Scaling it by the norm weight (which varies along K,
 * inside the scales' blocks) would make it a bf16 weight: 2-4x the bytes,
 * and no longer the packed path, so such a norm stays a row kernel.
 */
static int
quantised(const Value *w)
{
	return w->kind == V_RESULT && w->def->op == OP_DEQUANTIZE && dtype_is_quantised(w->def->in[0]->type.dt);
}

/* A matmul n that reads norm result v as A with a fixed 2-D B. */
static int
foldable(const Node *n, const Value *v)
{
	return n && n->op == OP_MATMUL && n->in[0] == v && n->in[1] != v &&
	       n->in[1]->type.rank == 2 && !ir_attr_int(n, "trans_a", 0) &&
	       ir_weight_only(n->in[1]) && (n->nin < 3 || !n->in[2] || ir_weight_only(n->in[2]));
}

/*
 * The folded GEMM reads x where the graph's read the norm's result, and a
 * GEMM's operands share a type.  x (the norm's input) may be narrower than W
 * (rms_norm over bf16 with to=f32 before an f32 matmul): widening it to W's
 * float type is exact, so the fold stays exact.  A wider x (f32 rows, bf16 W)
 * would be rounded before the norm instead of after: not folded.
 */
static int
reads_as(DType x, DType w)
{
	return x == w || (w == DT_F32 && dtype_is_float(x) && dtype_bits(x) < 32);
}

static Value *
as_type(Builder *b, Value *x, DType t)
{
	if (x->type.dt == t)
		return x;
	ir_b_str(b, "to", dtype_name(t));
	return ir_b1(b, OP_CAST, x);
}

static Value *
reshape2(Builder *b, Value *v, Dim a, Dim c)
{
	Dim d[2] = {a, c};

	ir_b_dims(b, "shape", d, 2);
	return ir_b1(b, OP_RESHAPE, v);
}

/* g broadcast along K of B: [K] for B[N,K]; [K,1] for B[K,N]. */
static Value *
scale_b(Builder *b, Value *w, Value *g, int trans_b)
{
	if (g->type.dt != w->type.dt) {
		ir_b_str(b, "to", dtype_name(w->type.dt));
		g = ir_b1(b, OP_CAST, g);
	}
	if (!trans_b)
		g = reshape2(b, g, g->type.dim[0], 1);
	return ir_b2(b, OP_MUL, w, g);
}

/* colsum of B over K as [N] (the LayerNorm mean correction), in f32. */
static Value *
colsum(Builder *b, Value *w, int trans_b)
{
	int64_t ax = trans_b ? 1 : 0;

	if (w->type.dt != DT_F32) {
		ir_b_str(b, "to", "f32");
		w = ir_b1(b, OP_CAST, w);
	}
	ir_b_ints(b, "axes", &ax, 1);
	ir_b_int(b, "keepdims", 0);
	return ir_b1(b, OP_REDUCE_SUM, w);
}

/* beta W + b as [N] in f32. */
static Value *
folded_bias(Builder *b, Value *w, Value *beta, Value *bias, int trans_b)
{
	Value *bt = beta;
	Value *r;

	if (w->type.dt != DT_F32) {
		ir_b_str(b, "to", "f32");
		w = ir_b1(b, OP_CAST, w);
	}
	if (bt->type.dt != DT_F32) {
		ir_b_str(b, "to", "f32");
		bt = ir_b1(b, OP_CAST, bt);
	}
	ir_b_int(b, "trans_b", trans_b);
	r = ir_b2(b, OP_MATMUL, bt, w);
	if (bias) {
		if (bias->type.dt != DT_F32) {
			ir_b_str(b, "to", "f32");
			bias = ir_b1(b, OP_CAST, bias);
		}
		r = ir_b2(b, OP_ADD, r, bias);
	}
	return r;
}

static Value *
rewrite(Graph *g, Node *norm, Node *mm, Value *stat_r, Value *stat_m, PassCtx *c)
{
	Builder b = {.g = g, .before = mm, .loc = mm->loc, .d = c->d};
	Value *x = norm->in[0], *gam = norm->in[1], *w = mm->in[1];
	Value *bias = mm->nin > 2 ? mm->in[2] : NULL;
	int tb = (int)ir_attr_int(mm, "trans_b", 0);
	DType out = mm->out[0]->type.dt;
	Value *h, *beta = norm->op == OP_LAYER_NORM && norm->nin > 2 ? norm->in[2] : NULL;

	Value *wp = scale_b(&b, w, gam, tb);
	x = as_type(&b, x, w->type.dt);
	ir_b_int(&b, "trans_b", tb);
	ir_b_str(&b, "to", "f32");
	h = ir_b2(&b, OP_MATMUL, x, wp);
	if (stat_m) {
		Value *u = colsum(&b, wp, tb);
		h = ir_b2(&b, OP_SUB, h, ir_b2(&b, OP_MUL, stat_m, u));
	}
	h = ir_b2(&b, OP_MUL, h, stat_r);
	if (beta)
		h = ir_b2(&b, OP_ADD, h, folded_bias(&b, w, beta, bias, tb));
	else if (bias) {
		if (bias->type.dt != DT_F32) {
			ir_b_str(&b, "to", "f32");
			bias = ir_b1(&b, OP_CAST, bias);
		}
		h = ir_b2(&b, OP_ADD, h, bias);
	}
	if (h && out != DT_F32) {
		ir_b_str(&b, "to", dtype_name(out));
		h = ir_b1(&b, OP_CAST, h);
	}
	return b.err ? NULL : h;
}

/* A row gather of v (RMSNorm, [T,H]) read only by grouped matmuls with a
 * fixed, bias-free weight (a bias row would have to be picked per expert). */
static int
foldable_gather(const Graph *g, const Node *ga, const Node *norm)
{
	const Value *v = norm->out[0], *o;

	if (!ga || ga->op != OP_GATHER || ga->in[0] != v || ir_attr_int(ga, "axis", 0) != 0 ||
	    norm->op != OP_RMS_NORM || v->type.rank != 2 || ga->in[1]->type.rank != 1)
		return 0;
	o = ga->out[0];
	if (o->nuse == 0 || ir_is_graph_result(g, o))
		return 0;
	for (int u = 0; u < o->nuse; u++) {
		const Node *mm = o->use[u].node;
		if (!mm || mm->op != OP_GROUPED_MATMUL || mm->in[0] != o || mm->in[1] == o ||
		    !ir_weight_only(mm->in[1]) || quantised(mm->in[1]) || (mm->nin > 3 && mm->in[3]) ||
		    !reads_as(norm->in[0]->type.dt, mm->in[1]->type.dt))
			return 0;
	}
	return 1;
}

/* One grouped matmul mm of the gathered norm, rewritten over xs and rs. */
static Value *
rewrite_grouped(Graph *g, Node *norm, Node *mm, Value *xs, Value *rs, PassCtx *c)
{
	Builder b = {.g = g, .before = mm, .loc = mm->loc, .d = c->d};
	int tb = (int)ir_attr_int(mm, "trans_b", 1);
	DType out = mm->out[0]->type.dt;
	Value *in[3] = {as_type(&b, xs, mm->in[1]->type.dt), scale_b(&b, mm->in[1], norm->in[1], tb), mm->in[2]};
	Node *n;
	Value *h;

	if (!in[1])
		return NULL;
	ir_b_int(&b, "trans_b", tb);
	ir_b_str(&b, "to", "f32");
	if (!(n = ir_b_node(&b, OP_GROUPED_MATMUL, in, 3, 1)))
		return NULL;
	h = ir_b2(&b, OP_MUL, n->out[0], rs);
	if (h && out != DT_F32) {
		ir_b_str(&b, "to", dtype_name(out));
		h = ir_b1(&b, OP_CAST, h);
	}
	return b.err ? NULL : h;
}

/* Fold the norm through row gather ga into every grouped matmul reading it. */
static int
fold_gather(Graph *g, Node *norm, Node *ga, Value *r, PassCtx *c)
{
	Builder b = {.g = g, .before = ga, .loc = ga->loc, .d = c->d};
	Value *o = ga->out[0], *xs, *rs;
	Node *users[64];
	int nu = 0;

	for (int u = 0; u < o->nuse && nu < (int)NELEM(users); u++)
		users[nu++] = o->use[u].node;
	if (nu < o->nuse)
		return 0;
	ir_b_int(&b, "axis", 0);
	xs = ir_b2(&b, OP_GATHER, norm->in[0], ga->in[1]);
	ir_b_int(&b, "axis", 0);
	rs = ir_b2(&b, OP_GATHER, r, ga->in[1]);
	if (b.err)
		return -1;
	for (int i = 0; i < nu; i++) {
		Value *h = rewrite_grouped(g, norm, users[i], xs, rs, c);
		if (!h)
			return -1;
		report_note(c->report, "%s %%%s folded into grouped_matmul %%%s through the row gather %%%s: "
			    "x gathered instead, weight scaled by the norm weight at compile time, "
			    "1/rms gathered per row in the epilogue",
			    ir_opname(norm->op), norm->out[0]->name, users[i]->out[0]->name, o->name);
		pass_take_over(g, users[i], users[i]->out[0], h);
	}
	return 1;
}

/* The row statistics: rstd (and the mean for LayerNorm), as [.., 1] f32. */
static int
stats(Graph *g, Node *norm, Value **r, Value **mean, PassCtx *c)
{
	Builder b = {.g = g, .before = norm->next, .loc = norm->loc, .d = c->d};
	Value *x = norm->in[0];
	int ln = norm->op == OP_LAYER_NORM;

	ir_b_float(&b, "eps", ir_attr_float(norm, "eps", 1e-5));
	if (ln)
		ir_b_int(&b, "center", 1);
	*r = ir_b1(&b, OP_RSTD, x);
	*mean = NULL;
	if (ln) {
		int64_t ax = -1;
		if (x->type.dt != DT_F32) {
			ir_b_str(&b, "to", "f32");
			x = ir_b1(&b, OP_CAST, x);
		}
		ir_b_ints(&b, "axes", &ax, 1);
		*mean = ir_b1(&b, OP_REDUCE_MEAN, x);
	}
	return b.err ? -1 : 0;
}

static int
fold_norm(Graph *g, Node *norm, const unsigned char *routing, PassCtx *c)
{
	Value *v = norm->out[0], *r = NULL, *mean = NULL;
	char cost[200];
	int changed = 0;

	int64_t ax = ir_attr_int(norm, "axis", -1);

	if ((norm->op == OP_LAYER_NORM && norm->nout > 1) || (ax != -1 && ax != v->type.rank - 1))
		return 0;
	for (int u = 0; u < v->nuse; u++) {
		Node *mm = v->use[u].node;
		if (foldable_gather(g, mm, norm)) {
			if (!r && stats(g, norm, &r, &mean, c))
				return -1;
			int k = fold_gather(g, norm, mm, r, c);
			if (k < 0)
				return -1;
			changed |= k;
			continue;
		}
		if (foldable(mm, v) && routing[mm->out[0]->id]) {
			report_skip(c->report, "%s %%%s not folded into matmul %%%s: it computes "
				    "router logits, which must round as the graph's do; %s",
				    ir_opname(norm->op), v->name, mm->out[0]->name,
				    report_trip(cost, sizeof cost, v, 1, 1));
			continue;
		}
		if (foldable(mm, v) && quantised(mm->in[1])) {
			report_skip(c->report, "%s %%%s not folded into matmul %%%s: its weight is quantised "
				    "(read packed by the GEMM; scaled by the norm weight it would be bf16); %s",
				    ir_opname(norm->op), v->name, mm->out[0]->name,
				    report_trip(cost, sizeof cost, v, 1, 1));
			continue;
		}
		if (foldable(mm, v) && !reads_as(norm->in[0]->type.dt, mm->in[1]->type.dt)) {
			report_skip(c->report, "%s %%%s not folded into matmul %%%s: its input is %s, wider "
				    "than the %s weight (it would round before the norm, not after); %s",
				    ir_opname(norm->op), v->name, mm->out[0]->name,
				    dtype_name(norm->in[0]->type.dt), dtype_name(mm->in[1]->type.dt),
				    report_trip(cost, sizeof cost, v, 1, 1));
			continue;
		}
		if (!foldable(mm, v)) {
			report_skip(c->report, "%s %%%s not folded into its user %s: not a matmul with a fixed weight; %s",
				    ir_opname(norm->op), v->name, mm ? ir_opname(mm->op) : "ret",
				    report_trip(cost, sizeof cost, v, 1, 1));
			continue;
		}
		if (!r && stats(g, norm, &r, &mean, c))
			return -1;
		Value *h = rewrite(g, norm, mm, r, mean, c);
		if (!h)
			return -1;
		report_note(c->report, "%s %%%s folded into matmul %%%s: weight scaled by the norm "
			    "weight at compile time, 1/rms per row in the epilogue",
			    ir_opname(norm->op), v->name, mm->out[0]->name);
		pass_take_over(g, mm, mm->out[0], h);
		changed = 1;
	}
	return changed;
}

int
fuse_norm(Module *m, PassCtx *c)
{
	int changed = 0;

	for (int i = 0; i < m->ngraph; i++) {
		Graph *g = m->graph[i];
		unsigned char *routing = pass_feeds_routing(g);	/* ids of values as they are now */
		ir_fill_uses(g);
		for (Node *n = g->first, *next; n; n = next) {
			next = n->next;
			if (n->op != OP_RMS_NORM && n->op != OP_LAYER_NORM)
				continue;
			int k = fold_norm(g, n, routing, c);
			if (k < 0) {
				free(routing);
				return -1;
			}
			if (k)
				ir_fill_uses(g);
			changed |= k;
		}
		free(routing);
	}
	return changed;
}
