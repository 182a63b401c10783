/*
 * fuse-ew: whatever the GEMM fusion left — residual adds, the MoE combine,
 * norm statistics, casts, leftovers of any kind — goes into elementwise and
 * row-reduce kernels, chains of single-use ops merged into one kernel so
 * intermediates stay in registers.  After this pass the main graph holds
 * only calls, views (reshape) and weight preparation.
 *
 *	%s = reduce_sum %ys, axes=[1]          %y = call @g.k4(%ys, %x)
 *	%c = cast %s, to=bf16          =>      kernel @g.k4 template=row_reduce {
 *	%y = add %c, %x                                reduce_sum, cast, add }
 */
#include <string.h>

#include "passes.h"

enum { MAXSET = 32 };

static int
is_reduce(Op op)
{
	return (ir_opinfo[op].flags & OPF_REDUCE) || op == OP_RSTD || op == OP_SOFTMAX ||
	       op == OP_LOG_SOFTMAX || op == OP_RMS_NORM || op == OP_LAYER_NORM ||
	       op == OP_ARGMAX || op == OP_TOPK;
}

/* May n start or extend a fused chain?  Views and constants stay outside,
 * and so does all_to_all: communication, a step of the plan, not a kernel. */
static int
fusible(const Node *n)
{
	return n->op != OP_CALL && n->op != OP_CONST && n->op != OP_ALL_TO_ALL && !ir_is_view(n) &&
	       !ir_weight_only(n->out[0]);
}

/* Ops that chain: elementwise on one main operand, or a reduction that
 * ends a row kernel's prologue. */
static int
chains(const Node *n)
{
	return (ir_opinfo[n->op].flags & OPF_EW) || is_reduce(n->op) || n->op == OP_SWIGLU;
}

static int
fuse_from(Graph *g, Node *start, PassCtx *c)
{
	Node *set[MAXSET];
	int n = 0, reduce = 0;
	Node *cur = start;
	char what[256];
	size_t k = 0;

	for (;;) {
		set[n++] = cur;
		reduce |= is_reduce(cur->op);
		if (!chains(cur) || n == MAXSET || cur->nout != 1)
			break;
		Value *v = cur->out[0];
		if (v->nuse != 1 || !v->use[0].node || ir_is_graph_result(g, v))
			break;
		Node *u = v->use[0].node;
		/* skip over views between ops of the chain */
		while (ir_is_view(u) && u->out[0]->nuse == 1 && u->out[0]->use[0].node &&
		       !ir_is_graph_result(g, u->out[0]) && n < MAXSET - 1) {
			set[n++] = u;
			u = u->out[0]->use[0].node;
		}
		if (!fusible(u) || !chains(u) || (reduce && is_reduce(u->op)))
			break;
		cur = u;
	}
	while (n > 1 && ir_is_view(set[n - 1]))
		n--;	/* a trailing view stays a view */
	what[0] = 0;
	for (int i = 0; i < n && k < sizeof what; i++)
		if (!ir_is_view(set[i]))
			k += (size_t)snprintf(what + k, sizeof what - k, "%s%s", k ? ", " : "",
					      ir_opname(set[i]->op));
	Node *call = pass_outline(g, set, n, reduce ? IR_TMPL_ROW_REDUCE : IR_TMPL_ELEMENTWISE);
	if (!call)
		return 0;
	report_fused(c->report, call->callee->name, "%s: %s", reduce ? "row_reduce" : "elementwise",
		     what);
	return 1;
}

int
fuse_ew(Module *m, PassCtx *c)
{
	Graph *g = ir_main_graph(m);
	int changed = 0;

	if (!g)
		return 0;
	ir_fill_uses(g);	/* pass_outline keeps them current */
	for (Node *n = g->first, *next; n; n = next) {
		Node *prev = n->prev;	/* outside the chain fuse_from takes */
		next = n->next;
		if (!fusible(n))
			continue;
		if (fuse_from(g, n, c)) {	/* nodes from n on may have moved */
			changed = 1;
			next = prev ? prev->next : g->first;
		}
	}
	return changed;
}
