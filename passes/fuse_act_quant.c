/*
 * fuse-act-quant: the dynamic quantisation of activations (fp8 checkpoints
 * with `activation_scheme: dynamic`: per token and 128 columns) done in the
 * epilogue of the norm that produces them, not by a pass of its own over
 * memory.  The norm's row kernel reads x once and writes what the rest of
 * the program reads: the e4m3 values and their scales (the FP8 x FP8 expert
 * GEMMs), and a cast or the dequantised rows where a user still needs them
 * (the router's f32 input, a bf16 shared expert).
 *
 *	%h = rms_norm %x, $g                  %gin, %q, %s, %hq = call @g.k7(%x, $g)
 *	%gin = cast %h, to=f32          =>    kernel @g.k7 template=row_reduce {
 *	%q, %s = quantize_dynamic %h,                 %h = rms_norm %x, %g
 *	         group=128                            %gin = cast %h, to=f32
 *	%hq = dequantize %q, %s,                      %q, %s = quantize_dynamic %h, group=128
 *	      block_size=128                          %hq = dequantize %q, %s, block_size=128
 *	                                              ret %gin, %q, %s, %hq }
 *
 * Before, each was a kernel of its own (fuse-ew chains single-use values and
 * one reduction per kernel: %h has several users, quantize_dynamic is a
 * second reduction and has two results), each reading its operands back
 * from memory.  Codegen runs the norm's row as the CTA's row and each group
 * of 128 as a warp's (k_body_reduce.c, nested reductions); every value is
 * rounded where the interpreter rounds it, so the router reads the same
 * bits as before.
 *
 * fbgemm_fp8 clips the norm's rows to +-activation_scale_ub before the
 * quantize_dynamic (ir_b_act_quant): the clip joins the kernel as an
 * elementwise op and the quantisation reads it.
 *
 * A quantize_dynamic whose rows no norm makes takes the nodes that make
 * them instead, when only it reads them: Llama-4's expert input, the norm's
 * rows times the router's score (sigmoid of the top logit) and clipped,
 *
 *	%m = reduce_max %logits, axes=[-1]         %q, %s = call @g.k8(%logits, %h)
 *	%sc = cast (sigmoid %m), to=bf16     =>    kernel @g.k8 template=row_reduce {
 *	%c = clip (mul %h, %sc)                        (the same five nodes)
 *	%q, %s = quantize_dynamic %c, group=128        %q, %s = quantize_dynamic %c, group=128 }
 *
 * one row kernel: the max anchors the token's row and each group of 128 is
 * a warp's reduction nested in it (k_body_reduce.c, row_span), where fuse-ew
 * made a kernel of the five and the quantisation another (a CTA a group),
 * the scaled rows written and read back between them.  The cone takes
 * elementwise ops and reductions over the last axis of rows with the
 * quantised rows' leading dims (a row of theirs is a token's), nothing a
 * kernel, a weight's preparation or a graph result.
 *
 * Runs after fuse-gemm and fuse-dequant (the expert GEMMs then read %q and
 * %s themselves, and a GEMM epilogue that can quantise its own result has
 * done so) and before fuse-ew.  Every quantize_dynamic left in the main
 * graph is either fused here or named in the report with why and what its
 * separate pass costs.
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

enum { MAXSET = 32 };

/* A norm over the last axis of a value with static rows: its row length, else 0. */
static int64_t
norm_row(const Node *p)
{
	const Value *v;
	int64_t ax;

	if (!p || (p->op != OP_RMS_NORM && p->op != OP_LAYER_NORM) || p->nout != 1)
		return 0;
	v = p->out[0];
	ax = ir_attr_int(p, "axis", -1);
	if (v->type.rank < 1 || (ax != -1 && ax != v->type.rank - 1) ||
	    !ir_dim_is_static(v->type.dim[v->type.rank - 1]))
		return 0;
	return v->type.dim[v->type.rank - 1];
}

/* The norm whose rows quantize_dynamic q reads: its input's maker, or
 * through a clip of the norm's value (fbgemm's bound on the scales'
 * amax, ir_b_act_quant) that the row kernel computes first. */
static Node *
quant_source(const Node *q)
{
	Node *p = q->in[0]->kind == V_RESULT ? q->in[0]->def : NULL;

	if (p && p->op == OP_CLIP && p->in[0]->kind == V_RESULT && norm_row(p->in[0]->def))
		return p->in[0]->def;
	return p;
}

/* quantize_dynamic's group along the last axis (group=row: the whole row), 0 per tensor. */
static int64_t
qgroup(const Node *q)
{
	const Attr *a = ir_attr(q, "group");
	const Value *x = q->in[0];

	if (a && a->kind == A_INT)
		return a->u.i;
	if (a && a->kind == A_STR && strcmp(a->u.s, "row") == 0 && x->type.rank > 0 &&
	    ir_dim_is_static(x->type.dim[x->type.rank - 1]))
		return x->type.dim[x->type.rank - 1];
	return 0;
}

static int
in_set(Node *const *set, int n, const Node *x)
{
	for (int i = 0; i < n; i++)
		if (set[i] == x)
			return 1;
	return 0;
}

/* Is every operand of u made by the set, or a weight or constant?  (A row
 * kernel reads those at any index.) */
static int
reads_set(Node *const *set, int n, const Node *u)
{
	for (int i = 0; i < u->nin; i++) {
		const Value *v = u->in[i];
		if (v && !(v->kind == V_RESULT && in_set(set, n, v->def)) && !ir_weight_only(v))
			return 0;
	}
	return 1;
}

static int
same_dims(const Value *a, const Value *b)
{
	return a->type.rank == b->type.rank &&
	       memcmp(a->type.dim, b->type.dim, sizeof(Dim) * (size_t)a->type.rank) == 0;
}

/*
 * May u join the kernel of the norm's rows v (the set so far)?  A
 * quantize_dynamic of v whose groups divide the rows; an elementwise op over
 * the rows (a cast); the dequantize of a quantize_dynamic of the set (the
 * rows as a bf16 user reads them).  Everything it reads comes from the set,
 * weights or constants.
 */
static int
joins(const Graph *g, Node *const *set, int n, const Node *u, const Value *v, int64_t row)
{
	int live = 0;

	if (!u || u->op == OP_CALL || !reads_set(set, n, u))
		return 0;
	for (int i = 0; i < u->nout; i++) {
		if (dtype_is_packed(u->out[i]->type.dt))
			return 0;
		live |= u->out[i]->nuse > 0 || ir_is_graph_result(g, u->out[i]);
	}
	if (!live)	/* dead (fuse-dequant moved its only user's copy in): dce's */
		return 0;
	switch (u->op) {
	case OP_QUANTIZE_DYNAMIC: {
		int64_t gq = qgroup(u);
		return (u->in[0] == v || (u->in[0]->kind == V_RESULT && in_set(set, n, u->in[0]->def) &&
					  quant_source(u) == v->def)) && gq > 0 && row % gq == 0;
	}
	case OP_DEQUANTIZE:
		return u->nin == 2 && u->in[0]->kind == V_RESULT &&
		       u->in[0]->def->op == OP_QUANTIZE_DYNAMIC && u->in[1] == u->in[0]->def->out[1] &&
		       same_dims(u->out[0], v);
	default:
		return (ir_opinfo[u->op].flags & OPF_EW) && u->nout == 1 && same_dims(u->out[0], v);
	}
}

/* Bytes of v per token: its elements after the first (token) dim (a scalar: none). */
static double
row_bytes(const Value *v)
{
	double n = v->type.rank ? dtype_bits(v->type.dt) / 8.0 : 0;

	for (int i = 1; i < v->type.rank; i++)
		n *= (double)v->type.dim[i];
	return n;
}

static int
reads_some(Node *const *set, int n, const Node *u)
{
	for (int i = 0; i < u->nin; i++)
		if (u->in[i] && u->in[i]->kind == V_RESULT && in_set(set, n, u->in[i]->def))
			return 1;
	return 0;
}

static int
used_outside(const Graph *g, Node *const *set, int n, const Value *v)
{
	if (ir_is_graph_result(g, v))
		return 1;
	for (int u = 0; u < v->nuse; u++)
		if (!v->use[u].node || !in_set(set, n, v->use[u].node))
			return 1;
	return 0;
}

/*
 * What the separate kernels moved that the fused one does not, per token:
 * each value of the set read back by another node of it, and written at all
 * when nothing outside reads it.
 */
static double
saved_bytes(const Graph *g, Node *const *set, int n)
{
	double s = 0;

	for (int k = 0; k < n; k++) {
		for (int i = 0; i < set[k]->nin; i++) {
			const Value *v = set[k]->in[i];
			if (v && v->kind == V_RESULT && in_set(set, n, v->def))
				s += row_bytes(v);
		}
		for (int i = 0; i < set[k]->nout; i++)
			if (!used_outside(g, set, n, set[k]->out[i]))
				s += row_bytes(set[k]->out[i]);
	}
	return s;
}

/* The norm p, the quantize_dynamic nodes of its rows and what joins them, as one row kernel. */
static int
fuse_norm_quant(Graph *g, Node *p, PassCtx *c)
{
	Value *v = p->out[0];
	int64_t row = norm_row(p);
	Node *set[MAXSET], *call;
	char what[256], quants[256];
	size_t k = 0, kq = 0;
	int n = 0;

	set[n++] = p;
	for (Node *u = p->next; u && n < MAXSET; u = u->next)
		if (reads_some(set, n, u) && joins(g, set, n, u, v, row))
			set[n++] = u;
	double saved = saved_bytes(g, set, n);
	what[0] = quants[0] = 0;
	for (int i = 0; i < n && k < sizeof what; i++)
		k += (size_t)snprintf(what + k, sizeof what - k, "%s%s", i ? ", " : "", ir_opname(set[i]->op));
	for (int i = 0; i < n && kq < sizeof quants; i++)
		if (set[i]->op == OP_QUANTIZE_DYNAMIC)
			kq += (size_t)snprintf(quants + kq, sizeof quants - kq, "%s%%%s", kq ? ", " : "",
					       set[i]->out[0]->name);
	if (!(call = pass_outline(g, set, n, IR_TMPL_ROW_REDUCE))) {
		report_skip(c->report, "quantize_dynamic %s of %s %%%s not fused into the norm's kernel: "
			    "a node between them feeds them (not convex); cost: the quantisation a kernel of its "
			    "own, %%%s (%.0f bytes per token) written and read back", quants, ir_opname(p->op),
			    v->name, v->name, row_bytes(v));
		return 0;
	}
	report_fused(c->report, call->callee->name, "row_reduce: %s (the quantisation per group of "
		     "the norm's rows in its epilogue)", what);
	report_note(c->report, "quantize_dynamic %s fused into the kernel of %s %%%s: x read once, "
		    "%.0f bytes per token fewer than the separate kernels moved", quants, ir_opname(p->op),
		    v->name, saved);
	return 1;
}

/* Why quantize_dynamic q is not fused into the kernel that produces its
 * input, and what its own pass costs. */
static void
say_why_not(const Node *q, const Node *p, int64_t row, int64_t gq, PassCtx *c)
{
	const Value *v = q->in[0];
	char why[200];

	if (!p)
		snprintf(why, sizeof why, "%%%s is a graph input, made outside this program", v->name);
	else if (p->op == OP_CALL)
		snprintf(why, sizeof why, "%%%s is the result of kernel @%s (%s), whose epilogue did not take it",
			 v->name, p->callee->name, ir_template_names[ir_kernel_template(p->callee)]);
	else if (!row)
		snprintf(why, sizeof why, "%%%s is made by %s, not a norm over static rows", v->name,
			 ir_opname(p->op));
	else if (!gq)
		snprintf(why, sizeof why, "a scale per tensor needs every row first");
	else
		snprintf(why, sizeof why, "groups of %lld columns do not divide the norm's rows of %lld",
			 (long long)gq, (long long)row);
	report_skip(c->report, "quantize_dynamic %%%s of %%%s not fused into the kernel that produces it: "
		    "%s; as a pass of its own it reads %.0f and writes %.0f bytes per token",
		    q->out[0]->name, v->name, why, row_bytes(v), row_bytes(q->out[0]) + row_bytes(q->out[1]));
}

/* May p join the cone of quantize_dynamic q (cone)?  An elementwise op, or a
 * reduction over the last axis of rows with the leading dims of q's input
 * (codegen nests q's groups in the row it anchors). */
static int
cone_op(const Node *p, const Node *q)
{
	const Type *t = &p->in[0]->type, *x = &q->in[0]->type;
	int64_t axes[MAXRANK];

	if (ir_opinfo[p->op].flags & OPF_EW)
		return 1;
	if (p->op < OP_REDUCE_SUM || p->op > OP_REDUCE_MIN || t->rank != x->rank || t->rank < 2 ||
	    ir_attr_ints(p, "axes", axes, MAXRANK) != 1 || ir_axis(axes[0], t->rank) != t->rank - 1)
		return 0;
	return memcmp(t->dim, x->dim, sizeof(Dim) * (size_t)(t->rank - 1)) == 0;
}

/* Does only the set read v (no graph result)? */
static int
read_by_set(const Graph *g, Node *const *set, int n, const Value *v)
{
	return v->nuse > 0 && !used_outside(g, set, n, v);
}

/* The cone of q into set, in program order, q last: the nodes before q
 * whose one result only the cone reads (cone_op).  Its size; 1: none. */
static int
cone(const Graph *g, Node *q, Node **set)
{
	int n = 0;

	set[n++] = q;
	for (Node *p = q->prev; p && n < MAXSET; p = p->prev)
		if (p->op != OP_CALL && p->nout == 1 && cone_op(p, q) && !ir_weight_only(p->out[0]) &&
		    read_by_set(g, set, n, p->out[0]))
			set[n++] = p;
	for (int i = 0; i < n / 2; i++) {
		Node *t = set[i];
		set[i] = set[n - 1 - i];
		set[n - 1 - i] = t;
	}
	return n;
}

/* Bundles for at most this many tokens (codegen's CG_FRONT_MAX_T, the decode
 * range) keep the cone's kernels apart: its row kernel is a CTA a token, 16
 * CTAs at T = 16, where the quantisation alone runs a CTA a group (H200,
 * Maverick: 19.1 us against 11.2 + 4.8; at T = 4096 258 us against 99 + 269). */
#define CONE_MIN_T 64

/* Quantize_dynamic q with the nodes that make its rows (cone), as one row kernel. */
static int
fuse_cone(Graph *g, Node *q, PassCtx *c)
{
	Node *set[MAXSET], *call;
	int n = cone(g, q, set);
	const char *qname = q->out[0]->name, *xname = q->in[0]->name;
	double rb = row_bytes(q->in[0]);
	char what[256];
	size_t k = 0;

	if (n < 2)
		return 0;
	if (c->max_tokens > 0 && c->max_tokens <= CONE_MIN_T) {
		report_skip(c->report, "quantize_dynamic %%%s not fused into the kernel that makes %%%s: a decode "
			    "bundle (max_tokens <= %d), where a row kernel a token leaves the SMs idle and the "
			    "quantisation's own kernel runs a CTA a group", qname, xname, CONE_MIN_T);
		return -1;
	}
	what[0] = 0;
	for (int i = 0; i < n && k < sizeof what; i++)
		k += (size_t)snprintf(what + k, sizeof what - k, "%s%s", i ? ", " : "", ir_opname(set[i]->op));
	if (!(call = pass_outline(g, set, n, IR_TMPL_ROW_REDUCE)))
		return 0;
	report_fused(c->report, call->callee->name, "row_reduce: %s (the quantisation per group in the "
		     "kernel that makes its rows)", what);
	report_note(c->report, "quantize_dynamic %%%s fused into the kernel that makes %%%s: %%%s (%.0f bytes "
		    "per token) not written and read back, one launch fewer",
		    qname, xname, xname, rb);
	return 1;
}

/* Is q's input made by a node a cone could take (not a norm, a call, a graph input)? */
static int
cone_candidate(const Node *q, const Node *p)
{
	const Type *x = &q->in[0]->type;

	return p && p->op != OP_CALL && !norm_row(p) && x->rank >= 2 && qgroup(q) > 0 &&
	       ir_dim_is_static(x->dim[x->rank - 1]) && x->dim[x->rank - 1] % qgroup(q) == 0;
}

int
fuse_act_quant(Module *m, PassCtx *c)
{
	Graph *g = ir_main_graph(m);
	Node **norms = NULL, **cones = NULL;
	int nn = 0, nc = 0, changed = 0;

	if (!g)
		return 0;
	ir_fill_uses(g);	/* pass_outline keeps them current */
	for (Node *q = g->first; q; q = q->next) {
		if (q->op != OP_QUANTIZE_DYNAMIC)
			continue;
		Node *p = quant_source(q);
		int64_t row = norm_row(p), gq = qgroup(q);
		int seen = 0;
		if (cone_candidate(q, p)) {
			cones = xrealloc(cones, sizeof *cones * (size_t)(nc + 1));
			cones[nc++] = q;
			continue;
		}
		if (!row || !gq || row % gq) {
			say_why_not(q, p, row, gq, c);
			continue;
		}
		for (int i = 0; i < nn; i++)
			seen |= norms[i] == p;
		if (!seen) {
			norms = xrealloc(norms, sizeof *norms * (size_t)(nn + 1));
			norms[nn++] = p;
		}
	}
	for (int i = 0; i < nn; i++)
		changed |= fuse_norm_quant(g, norms[i], c);
	for (int i = 0; i < nc; i++) {
		const Node *q = cones[i];
		int done = fuse_cone(g, cones[i], c);
		if (done < 0)	/* said why */
			continue;
		if (!done)
			report_skip(c->report, "quantize_dynamic %%%s of %%%s not fused into the kernel that makes "
				    "%%%s: something besides the quantisation reads it or what makes it (a graph "
				    "result, another node), or a node between them feeds them; as a pass of its own "
				    "it reads %.0f and writes %.0f bytes per token", q->out[0]->name, q->in[0]->name,
				    q->in[0]->name, row_bytes(q->in[0]), row_bytes(q->out[0]) + row_bytes(q->out[1]));
		changed |= done;
	}
	free(norms);
	free(cones);
	return changed;
}
