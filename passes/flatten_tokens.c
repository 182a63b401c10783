/*
 * flatten-tokens: a model exported with [batch, seq, H] activations runs
 * on [batch*seq, H] inside: the inputs are viewed flat once, every shape,
 * axis and permutation that spans the leading symbolic dims is rewritten
 * for one merged dim, and the outputs are viewed back.  Codegen then sees
 * one token dim (T), as a config-built block has from the start.
 *
 *	graph @g(%x: f32[batch,seq,64])          %x.flat = reshape %x, shape=[batch*seq, 64]
 *	  %n = softmax %x, axis=2         =>       %n = softmax %x.flat, axis=1 : f32[batch*seq,64]
 *	  ret %n                                   %n.out = reshape %n, shape=[batch, seq, 64]
 *
 * All or nothing: if a node names an axis inside the merged dims, nothing
 * changes (the node's results keep their shapes; codegen then refuses the
 * kernel with a diagnostic).
 */
#include <string.h>

#include "passes.h"

/* Leading symbolic dims of a type or a dims list. */
static int
prefix(const Dim *d, int n)
{
	int k = 0;

	while (k < n && d[k] < 0)
		k++;
	return k;
}

static int
graph_prefix(const Graph *g)
{
	int k = 0;

	for (int i = 0; i < g->nparam; i++) {
		const Type *t = &g->param[i]->type;
		int p = prefix(t->dim, t->rank);
		if (p > 1 && k && p != k)
			return -1;
		if (p > 1)
			k = p;
	}
	return k;
}

/* An axis of a rank-`rank` value whose first k dims merge into one. */
static int
move_axis(int64_t *a, int rank, int k)
{
	int64_t v = *a < 0 ? *a + rank : *a;

	if (v < k)
		return v == 0 ? 0 : -1;	/* inside the merged dims: only the first survives */
	if (*a >= 0)
		*a -= k - 1;
	return 0;
}

/* Merge the first k dims of a dims list in place; the new length. */
static int
merge_dims(Module *m, Dim *d, int n, int k)
{
	Dim p = 1;

	for (int i = 0; i < k; i++)
		p = ir_dim_mul(m, p, d[i]);
	d[0] = p;
	memmove(d + 1, d + k, sizeof *d * (size_t)(n - k));
	return n - k + 1;
}

/* The rewrite of one node's attributes; with apply 0 only the check. */
static int
rewrite(Module *m, Node *n, int k, int apply)
{
	const Type *ref = n->nin && n->in[0] ? &n->in[0]->type : &n->out[0]->type;
	int64_t v[2 * MAXRANK];
	Dim dv[MAXRANK];
	int c, kn = prefix(ref->dim, ref->rank);

	if ((c = ir_attr_dims(n, "shape", dv, MAXRANK)) > 0 && prefix(dv, c) == k && apply)
		ir_set_dims(m, n, "shape", dv, merge_dims(m, dv, c, k));
	if (kn <= 1 || n->op == OP_RESHAPE)
		return 0;
	if (kn != k)
		return -1;
	if (n->op == OP_SLICE && n->nin > 1)
		return -1;	/* starts/ends/axes as operands (run-time bounds): per axis, not rewritten */
	if (ir_attr(n, "axis")) {
		int64_t a = ir_attr_int(n, "axis", 0);
		if (move_axis(&a, ref->rank, k))
			return -1;
		if (apply)
			ir_set_int(m, n, "axis", a);
	}
	if ((c = ir_attr_ints(n, "axes", v, (int)NELEM(v))) > 0) {
		for (int i = 0; i < c; i++)
			if (move_axis(&v[i], ref->rank, k))
				return -1;
		if (apply)
			ir_set_ints(m, n, "axes", v, c);
	}
	if ((c = ir_attr_ints(n, "repeats", v, (int)NELEM(v))) > 0) {	/* tile */
		for (int i = 0; i < k; i++)
			if (c != ref->rank || v[i] != 1)
				return -1;	/* the merged dims repeated */
		if (apply)
			ir_set_ints(m, n, "repeats", v + k - 1, c - k + 1);
	}
	if ((c = ir_attr_ints(n, "perm", v, (int)NELEM(v))) > 0) {
		int64_t p[MAXRANK];
		for (int i = 0; i < k; i++)
			if (v[i] != i)
				return -1;
		p[0] = 0;
		for (int i = k; i < c; i++)
			p[i - k + 1] = v[i] - (k - 1);
		if (apply)
			ir_set_ints(m, n, "perm", p, c - k + 1);
	}
	return 0;
}

static Value *
view(Builder *b, Value *v, const Dim *dims, int rank)
{
	ir_b_dims(b, "shape", dims, rank);
	return ir_b1(b, OP_RESHAPE, v);
}

int
flatten_tokens(Module *m, PassCtx *c)
{
	Graph *g = ir_main_graph(m);
	Builder b = {.d = c->d};
	Type orig[64];
	int k;

	if (!g || (k = graph_prefix(g)) < 2 || g->nret > 64)
		return 0;
	for (Node *n = g->first; n; n = n->next)
		if (n->op == OP_CALL || rewrite(m, n, k, 0)) {
			report_skip(c->report, "tokens not flattened: %s %%%s names an axis inside "
				    "the leading symbolic dims; cost: the later passes see [B,S,..] values, "
				    "which GEMM fusion and lower-moe take only through views as [B*S,..]", ir_opname(n->op),
				    n->nout ? n->out[0]->name : "");
			return 0;
		}
	for (Node *n = g->first; n; n = n->next)
		rewrite(m, n, k, 1);
	for (int i = 0; i < g->nret; i++)
		orig[i] = g->ret[i]->type;

	/* flat views of the inputs, then every node inferred again */
	b.g = g;
	b.before = g->first;
	for (int i = 0; i < g->nparam; i++) {
		Value *x = g->param[i];
		Type t = x->type;
		char name[256];
		if (prefix(t.dim, t.rank) != k)
			continue;
		Value *flat = view(&b, x, t.dim, merge_dims(m, t.dim, t.rank, k));
		if (!flat)
			return -1;
		ir_replace_uses(g, x, flat);
		flat->def->in[0] = x;	/* the view itself still reads the input */
		snprintf(name, sizeof name, "%s.flat", x->name);
		ir_set_name(g, flat, name);
	}
	if (ir_infer_graph(g, c->d))
		return -1;
	/* the outputs viewed back in their declared shapes */
	b.before = NULL;
	for (int i = 0; i < g->nret; i++) {
		const Type *t = &g->ret[i]->type;
		if (t->rank == orig[i].rank && !memcmp(t->dim, orig[i].dim, sizeof(Dim) * (size_t)t->rank))
			continue;
		Value *back = view(&b, g->ret[i], orig[i].dim, orig[i].rank);
		if (!back)
			return -1;
		g->ret[i] = back;
	}
	report_note(c->report, "tokens flattened: %d leading symbolic dims are one inside the block", k);
	return 1;
}
