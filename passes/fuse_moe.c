/*
 * fuse-moe: the MoE blocks torch.onnx.export writes for Hugging Face
 * modules become one `moe` op carrying the router kind.  Anchor: each TopK
 * over [T,E] scores, and each sparsemixer (PhiMoE's k rounds of argmax over
 * masked logits, concatenated: fuse_moe_router.c).  From its indices, find the value where the routed
 * experts' weighted sum is complete (fuse_moe_experts.c), read the router
 * around the TopK (fuse_moe_router.c), and let one moe compute that value:
 *
 *	%l = matmul %x, $router               %l = matmul %x, $router
 *	%p = softmax %l                       %y = moe %x, %l, _, $gate_up, $down,
 *	%w, %ids = topk %p, k=2                       router=softmax, k=2, renorm=1,
 *	%wn = div %w, (reduce_sum %w)     =>          act=silu, gu_layout=concat
 *	... N slots: onehot, nonzero, gather
 *	    $gate_up[e], matmul, silu, ...
 *	    scatter_elements, add ...
 *	%y = add %acc6, %scatter7
 *
 * E comes from the stacked weights, not from the number of slots: a
 * TorchScript export only holds the experts its sample reached.  Weights
 * held transposed get a weight-only transpose that `fold` evaluates, and
 * one Linear per expert (transformers 4.x) a weight-only stack.  The moe is
 * built, then kept only if the interpreter agrees with the subgraph it
 * replaces on probes reaching every expert (fuse_moe_confirm.c).
 * Llama 4 runs every expert on every token, each input row scaled by the
 * token's sigmoid score scattered over the chosen experts (0 elsewhere):
 * the same top-k moe with scale_input=1 (fuse_moe_experts.c, dense).
 * The loop users write over boolean masks, out[m] += expert(x[m]) * w[m],
 * is read by what it computes (fuse_moe_masked.c).
 * Shared experts, the router's matmul and everything else stay; the slot
 * machinery dies in the next `dce`.  A block that does not fit is left as
 * it is, with the reason in the fusion report.
 */
#include <stdlib.h>
#include <string.h>

#include "fuse_moe.h"

/* Could v be where a routed sum completes?  A sum over the k choices of
 * [T,k,H] (bf16 rows may be widened to f32 for the sum: dynamo's bf16
 * batched_mm export), or a slot's add of its scatter onto the running sum (only the
 * last one of a chain). */
static int
candidate(Node *n)
{
	Node *u;

	if (n->op == OP_REDUCE_SUM)	/* over k, or over every expert's output [E,T,H] */
		return n->in[0]->type.rank == 3 && ir_attr_int(n, "keepdims", 1) == 0 &&
		       ((mo_axis(n, "axes", 3, -1) == 1 && (mo_def(mo_peel_cast(n->in[0]), OP_RESHAPE) ||
							   mo_def(mo_peel_cast(n->in[0]), OP_MUL))) ||
			mo_axis(n, "axes", 3, -1) == 0);
	if (n->op == OP_SCATTER_ND || n->op == OP_SCATTER_ELEMENTS) {	/* dynamo's index_add_, a masked loop: the last of the chain */
		if (strcmp(ir_attr_str(n, "reduction", "none"), "add") && !mo_is_masked(n->out[0]))
			return 0;
		for (int i = 0; i < n->out[0]->nuse; i++)
			if ((u = n->out[0]->use[i].node) && u->op == n->op && n->out[0]->use[i].index == 0)
				return 0;
		return 1;
	}
	if (n->op != OP_ADD ||
	    !(mo_def(n->in[0], OP_SCATTER_ELEMENTS) || mo_def(n->in[1], OP_SCATTER_ELEMENTS)))
		return 0;
	for (int i = 0; i < n->out[0]->nuse; i++)
		if ((u = n->out[0]->use[i].node) && u->op == OP_ADD &&
		    mo_def(u->in[1 - n->out[0]->use[i].index], OP_SCATTER_ELEMENTS))
			return 0;
	return 1;
}

/* The nodes downstream of the router's indices that could end a routed sum,
 * nearest first. */
static int
candidates(Graph *g, Value *ids, Node **out, int max)
{
	uint32_t nv = g->m->nvalue;
	char *seen = xcalloc(nv, 1);
	Value **queue = xmalloc(sizeof *queue * nv);
	int nq = 0, head = 0, n = 0;

	queue[nq++] = ids;
	seen[ids->id] = 1;
	while (head < nq) {
		Value *v = queue[head++];
		for (int i = 0; i < v->nuse; i++) {
			Node *u = v->use[i].node;
			if (!u || !u->nout || seen[u->out[0]->id])
				continue;
			if (candidate(u) && n < max)
				out[n++] = u;
			for (int j = 0; j < u->nout; j++)
				if (!seen[u->out[j]->id] && u->out[j]->id < nv) {
					seen[u->out[j]->id] = 1;
					queue[nq++] = u->out[j];
				}
		}
	}
	free(seen);
	free(queue);
	return n;
}

/* tk: a TopK, or a sparsemixer's concat of argmaxes. */
static const char *
match(Graph *g, Node *tk, Moe *mo)
{
	Node *cand[64];
	Router sm;
	int mixer = mo_is_sparsemixer(tk, &sm);
	Value *ids = mixer ? sm.ids : tk->out[1];
	int n = candidates(g, ids, cand, (int)NELEM(cand));
	const char *why = "its indices reach no routed sum (scatter-add slots or a sum over k)";

	for (int i = 0; i < n; i++) {
		const char *w = mo_experts(cand[i]->out[0], mo);
		if (!w && mo->ids != ids)
			w = "the experts are routed by another TopK";
		if (!w && !mo->routed)
			w = mixer ? mo_router_sparsemixer(tk, mo->x.rw, &mo->r)
				  : mo_router(tk, mo->x.rw, &mo->r);
		if (!w && (mo->x.kmul != mo->r.k || mo->ids->type.dim[1] != mo->r.k))
			w = "the experts and the TopK disagree on k";
		if (!w && (mo->r.logits->type.dim[1] != mo->e ||
			   (mo->r.selbias && ir_type_numel(&mo->r.selbias->type) != mo->e) ||
			   mo->r.k > mo->e))
			w = "the router's expert count is not the stacked weights'";
		if (!w)
			return NULL;
		if (i == 0)
			why = w;
	}
	return why;
}

static const char *
describe(char *buf, size_t n, const Moe *mo)
{
	const Router *r = &mo->r;
	const Expert *x = &mo->x;
	size_t k = 0;

	if (mo->masked)
		k += (size_t)snprintf(buf + k, n - k, "from a loop over %d experts' boolean masks", mo->nslot);
	else if (mo->nslot)
		k += (size_t)snprintf(buf + k, n - k, "from %d unrolled slots", mo->nslot);
	else if (mo->routed)
		k += (size_t)snprintf(buf + k, n - k, "from the dense form (every expert on every token)");
	else
		k += (size_t)snprintf(buf + k, n - k, "from the batched form");
	k += (size_t)snprintf(buf + k, n - k, ", %lld experts, router %s top-%lld",
			      (long long)mo->e, r->kind, (long long)r->k);
	if (r->selbias)
		k += (size_t)snprintf(buf + k, n - k, " with selection bias");
	if (r->ngroup > 1)
		k += (size_t)snprintf(buf + k, n - k, " in %lld of %lld groups (%s)",
				      (long long)r->topk_group, (long long)r->ngroup,
				      r->top2 ? "top2" : "max");
	if (r->zero_fill)
		k += (size_t)snprintf(buf + k, n - k, ", dropped groups selecting with 0");
	if (r->renorm)
		k += (size_t)snprintf(buf + k, n - k, ", renormalised");
	if (r->scale != 1)
		k += (size_t)snprintf(buf + k, n - k, ", scaled by %g", r->scale);
	if (x->scale_input)
		k += (size_t)snprintf(buf + k, n - k, ", routing weight on the input rows");
	k += (size_t)snprintf(buf + k, n - k, ", act %s", x->act);
	if (strcmp(x->act, "oai") && x->limit > 0)
		k += (size_t)snprintf(buf + k, n - k, " clamped at %g", x->limit);
	k += (size_t)snprintf(buf + k, n - k, ", %s%s%s%s%s",
			      x->ungated ? "ungated" : "gate|up ", x->ungated ? "" : x->layout,
			      x->bgu || x->bdn ? ", biases" : "",
			      x->gu_t || x->dn_t ? ", weights transposed" : "",
			      x->flat ? ", one weight set per expert (stacked)" : "");
	return buf;
}

static Value *
transpose(Builder *b, Value *w)
{
	int64_t perm[3] = {0, 2, 1};

	ir_b_ints(b, "perm", perm, 3);
	return ir_b1(b, OP_TRANSPOSE, w);
}

/* Each expert's own [N,K] matrix (a ModuleList's Linear) stacked into
 * [E,N,K]: concats of at most STACK operands (the interpreter's limit on
 * one node), each of rows [1,N,K].  Weight-only: `fold` computes it. */
enum { STACK = 32 };

static Value *
stack(Builder *b, Value **w, int64_t e)
{
	Value *part[STACK], *top[STACK];
	int64_t ntop = 0;
	const Type *t = &w[0]->type;
	Dim d[3] = {1, t->dim[0], t->dim[1]};

	if (e > (int64_t)STACK * STACK)
		return NULL;
	for (int64_t i = 0; i < e; i += STACK) {
		int n = 0;
		for (int64_t j = i; j < e && j < i + STACK; j++) {
			ir_b_dims(b, "shape", d, 3);
			part[n++] = ir_b1(b, OP_RESHAPE, w[j]);
		}
		ir_b_int(b, "axis", 0);
		Node *c = ir_b_node(b, OP_CONCAT, part, n, 1);
		if (!c)
			return NULL;
		top[ntop++] = c->out[0];
	}
	if (ntop == 1)
		return top[0];
	ir_b_int(b, "axis", 0);
	Node *c = ir_b_node(b, OP_CONCAT, top, (int)ntop, 1);
	return c ? c->out[0] : NULL;
}

static void
moe_attrs(Builder *b, const Moe *mo)
{
	const Router *r = &mo->r;
	const Expert *x = &mo->x;

	ir_b_str(b, "router", r->kind);
	ir_b_int(b, "k", r->k);
	if (r->renorm)
		ir_b_int(b, "renorm", 1);
	if (r->scale != 1)
		ir_b_float(b, "scale", mo_nice_float(r->scale));
	if (r->ngroup > 1) {
		ir_b_int(b, "n_group", r->ngroup);
		ir_b_int(b, "topk_group", r->topk_group);
		ir_b_str(b, "group_score", r->top2 ? "top2" : "max");
		if (r->zero_fill)
			ir_b_float(b, "group_fill", 0);
	}
	if (strcmp(r->kind, "sparsemixer") == 0)
		ir_b_float(b, "jitter_eps", r->jitter_eps);
	ir_b_str(b, "act", x->act);
	if (x->ungated)
		ir_b_int(b, "gated", 0);
	else
		ir_b_str(b, "gu_layout", x->layout);
	if (x->scale_input)
		ir_b_int(b, "scale_input", 1);
	if (strcmp(x->act, "gelu") == 0 && strcmp(x->approx, "none") != 0)
		ir_b_str(b, "approx", x->approx);
	if (strcmp(x->act, "oai") == 0) {
		ir_b_float(b, "alpha", x->alpha);
		ir_b_float(b, "limit", x->limit);
	} else if (x->limit > 0) {	/* Step 3.5's clamped silu */
		ir_b_float(b, "limit", x->limit);
	}
}

/* Does y's shape fit where the sum's is?  The same dims, where a data-dependent
 * "?" of the sum (the sorted rows' width, DeepSeek-V2 in 4.57) is any. */
static int
same_dims(const Module *m, const Type *y, const Type *sum)
{
	if (y->rank != sum->rank)
		return 0;
	for (int i = 0; i < y->rank; i++)
		if (y->dim[i] != sum->dim[i] && !(ir_dim_has_unknown(m, sum->dim[i]) && ir_dim_is_static(y->dim[i])))
			return 0;
	return 1;
}

/* Unlink what rewrite built between after and end, last first. */
static void
unbuild(Graph *g, Node *after, Node *end)
{
	while (end->prev && end->prev != after)
		ir_erase(g, end->prev);
}

/* What the block left unfused costs: the ops downstream of the router's
 * TopK (an upper bound: up to the graph's end), each a kernel of its own or
 * part of a generic one, against the moe path's five kernels. */
static const char *
block_cost(Graph *g, Node *tk, char *buf, size_t len)
{
	uint32_t nv = g->m->nvalue;
	char *seen = xcalloc(nv + 1, 1);
	Value **queue = xmalloc(sizeof *queue * (nv + 1));
	int nq = 0, head = 0, ops = 0, mms = 0;

	for (int i = 0; i < tk->nout; i++)
		if (tk->out[i]->id < nv && !seen[tk->out[i]->id])
			seen[tk->out[i]->id] = 1, queue[nq++] = tk->out[i];
	while (head < nq) {
		Value *v = queue[head++];
		for (int i = 0; i < v->nuse; i++) {
			Node *u = v->use[i].node;
			if (!u || !u->nout || seen[u->out[0]->id])
				continue;
			ops += !ir_is_view(u) && u->op != OP_CONST;
			mms += u->op == OP_MATMUL;
			for (int j = 0; j < u->nout; j++)
				if (u->out[j]->id < nv && !seen[u->out[j]->id])
					seen[u->out[j]->id] = 1, queue[nq++] = u->out[j];
		}
	}
	free(seen);
	free(queue);
	snprintf(buf, len, "cost: up to %d ops after the TopK run unfused (%d matmuls, a GEMM or "
		 "element-wise kernel each, with the experts' slot machinery), where route, permute, two "
		 "grouped GEMMs and the sum over k are 5 kernels reading each expert's weights once", ops, mms);
	return buf;
}

/* Build the moe before the node that completed the sum; once the
 * interpreter confirms it, the last node built takes over the sum's value,
 * name and users. */
static int
rewrite(Graph *g, Moe *mo, PassCtx *c)
{
	Node *end = mo->sum->def, *after = end->prev, *n;
	const char *bad;
	Diag quiet;
	Builder b = {.g = g, .before = end, .loc = end->loc, .d = &quiet};
	Value *in[7] = {mo->x.x, mo->r.logits, mo->r.selbias, mo->x.wgu, mo->x.wdn,
			mo->x.bgu, mo->x.bdn};
	int nin = in[6] ? 7 : in[5] ? 6 : 5;
	char buf[1024];

	diag_init(&quiet, NULL);
	if (in[0]->type.rank != 2) {	/* [B,S,H] -> [B*S,H] */
		Dim d[2] = {mo->sum->type.dim[0], in[0]->type.dim[in[0]->type.rank - 1]};
		ir_b_dims(&b, "shape", d, 2);
		in[0] = ir_b1(&b, OP_RESHAPE, in[0]);
	}
	if (in[2] && in[2]->type.rank != 1) {	/* [1,E] -> [E] */
		ir_b_dims(&b, "shape", &mo->e, 1);
		in[2] = ir_b1(&b, OP_RESHAPE, in[2]);
	}
	if (mo->x.flat) {
		in[3] = stack(&b, mo->gu_e, mo->e);
		in[4] = in[3] ? stack(&b, mo->dn_e, mo->e) : NULL;
	}
	if (mo->x.gu_t && in[3])
		in[3] = transpose(&b, in[3]);
	if (mo->x.dn_t && in[4])
		in[4] = transpose(&b, in[4]);
	moe_attrs(&b, mo);
	n = NULL;
	if (in[0] && (in[2] || !mo->r.selbias) && in[3] && in[4])
		n = ir_b_node(&b, OP_MOE, in, nin, 1);
	Value *y = n ? n->out[0] : NULL;
	if (y && !same_dims(g->m, &y->type, &mo->sum->type)) {
		ir_b_dims(&b, "shape", mo->sum->type.dim, mo->sum->type.rank);
		y = ir_b1(&b, OP_RESHAPE, y);
	}
	if (y && y->type.dt != mo->sum->type.dt) {
		ir_b_str(&b, "to", dtype_name(mo->sum->type.dt));
		y = ir_b1(&b, OP_CAST, y);
	}
	if (!y) {
		if (c->report)
			report_skip(c->report, "moe not built at %s %%%s: %s; %s", mo->r.anchor,
				    mo->r.topk->out[0]->name, quiet.last,
				    block_cost(g, mo->r.topk, buf, sizeof buf));
		return 0;
	}
	if ((bad = mo_confirm(g, mo, y, buf, sizeof buf))) {
		if (c->report) {
			char cost[400];
			report_skip(c->report, "moe not accepted at %s %%%s: %s; %s", mo->r.anchor,
				    mo->r.topk->out[0]->name, bad, block_cost(g, mo->r.topk, cost, sizeof cost));
		}
		unbuild(g, after, end);
		return 0;
	}
	Type yt = y->type;	/* static where the sum's width was data-dependent */
	pass_take_over(g, end, mo->sum, y);
	mo->sum->type = yt;
	if (c->report)
		report_note(c->report, "moe %%%s recognised at %s %%%s %s", mo->sum->name,
			    mo->r.anchor, mo->r.topk->out[0]->name, describe(buf, sizeof buf, mo));
	return 1;
}

static int
in_router(Node *tk, const Moe *found, const char *const *why, int n)
{
	for (int i = 0; i < n; i++)
		if (!why[i] && (found[i].r.aux[0] == tk || found[i].r.aux[1] == tk))
			return 1;
	return 0;
}

static int
fuse_graph(Graph *g, PassCtx *c)
{
	VEC(Node *) tk = {0};
	int ntk, changed = 0;
	char cost[400];

	ir_fill_uses(g);
	for (Node *n = g->first; n; n = n->next)
		if ((n->op == OP_TOPK && n->in[0]->type.rank == 2) || mo_is_sparsemixer(n, &(Router){0}))
			vec_push(&tk, n);	/* x-allocators: out of memory is moec's diagnostic, exit 2 */
	ntk = (int)tk.n;
	Moe *found = xcalloc((size_t)ntk + 1, sizeof *found);
	const char **why = xcalloc((size_t)ntk + 1, sizeof *why);
	for (int i = 0; i < ntk; i++)
		why[i] = match(g, tk.v[i], &found[i]);
	for (int i = 0; i < ntk; i++)
		if (why[i] && c->report && !in_router(tk.v[i], found, why, ntk))
			report_skip(c->report, "moe not recognised at %s %%%s: %s; %s",
				    tk.v[i]->op == OP_TOPK ? "TopK" : "sparsemixer", tk.v[i]->out[0]->name,
				    why[i], block_cost(g, tk.v[i], cost, sizeof cost));
	for (int i = 0; i < ntk; i++)
		if (!why[i])
			changed |= rewrite(g, &found[i], c);
	vec_free(&tk);
	free(found);
	free(why);
	return changed;
}

int
fuse_moe(Module *m, PassCtx *c)
{
	int changed = 0;

	for (int i = 0; i < m->ngraph; i++)
		if (m->graph[i]->kind == G_GRAPH)
			changed |= fuse_graph(m->graph[i], c);
	return changed;
}
