/*
 * canon: canonicalise what exporters write, so later passes see one form
 * per concept.  A fixed point of small local rewrites, each of which keeps
 * the graph valid and its results the same (--check-eval checks it):
 *
 *	%s = sigmoid %x                      %y = silu %x
 *	%y = mul %x, %s                =>
 *
 *	%h = matmul %x, $w : [T,N]           %y = matmul %x, $w, $b : [T,N]
 *	%y = add $b, %h                =>
 *
 * The families live in canon_act.c (silu, gelu, GLU MLPs), canon_norm.c
 * (rms_norm, layer_norm), canon_linalg.c (bias, transposed operands, batch
 * flattening around matmul) and canon_shape.c (no-op reshapes, transposes,
 * casts, a topk's prefix).  A rewrite builds its nodes in front of the root, keeps the
 * root's loc, and gives the new root node the old root's Value, so names
 * and graph results stay.  Nodes a rewrite leaves dead are deleted here;
 * nodes that were dead before are dce's.  Never fails: a pattern that does
 * not match is left alone.
 */
#include <stdlib.h>
#include <string.h>

#include "match.h"

Builder
canon_builder(Canon *k, Node *at)
{
	return (Builder){.g = k->g, .before = at, .loc = at->loc, .d = &k->quiet};
}

int
canon_adopt(Canon *k, Node *root, Value *nv)
{
	Value *old = root->out[0];
	Node *d;

	if (!nv || nv->kind != V_RESULT || !type_like(old, nv))
		return 0;
	d = nv->def;
	ir_replace_uses(k->g, nv, old);
	d->out[nv->resno] = old;
	old->def = d;
	old->resno = nv->resno;
	ir_erase(k->g, root);
	return 1;
}

int
canon_forward(Canon *k, Node *root, Value *v)
{
	Value *old = root->out[0];

	if (!type_like(old, v))
		return 0;
	if (ir_is_graph_result(k->g, old)) {
		/* the graph result keeps its name: v's node takes it over */
		if (v->kind != V_RESULT)
			return 0;
		return canon_adopt(k, root, v);
	}
	ir_replace_uses(k->g, old, v);
	ir_erase(k->g, root);
	return 1;
}

Value *
canon_matmul(Builder *b, const Node *tmpl, Value *a, Value *w, Value *bias, int ta, int tb)
{
	Value *in[3] = {a, w, bias};
	Node *n;

	if (b->err || !a || !w)
		return NULL;
	for (int i = 0; i < tmpl->nattr; i++) {
		const char *key = tmpl->attr[i].key;
		if (strcmp(key, "trans_a") != 0 && strcmp(key, "trans_b") != 0 &&
		    b->npend < (int)NELEM(b->pend))
			b->pend[b->npend++] = tmpl->attr[i];
	}
	if (ta)
		ir_b_int(b, "trans_a", 1);
	if (tb)
		ir_b_int(b, "trans_b", 1);
	n = ir_b_node(b, OP_MATMUL, in, bias ? 3 : 2, 1);
	return n ? n->out[0] : NULL;
}

Value *
canon_reshape(Builder *b, Value *v, int rank, const Dim *dims)
{
	if (b->err || !v)
		return NULL;
	ir_b_dims(b, "shape", dims, rank);
	return ir_b1(b, OP_RESHAPE, v);
}

/* Each op's rewrites, most specific first. */
static int
rewrite(Canon *k, Node *n)
{
	switch (n->op) {
	case OP_MUL:
		return canon_silu(k, n) || canon_glu(k, n) || canon_gelu(k, n) ||
		       canon_norm_core(k, n) || canon_norm_scale(k, n);
	case OP_DIV:
		return canon_norm_core(k, n);
	case OP_ADD:
		return canon_bias(k, n) || canon_norm_bias(k, n);
	case OP_RMS_NORM:
	case OP_LAYER_NORM:
		return canon_norm_input(k, n);
	case OP_MATMUL:
		return canon_matmul_trans(k, n) || canon_dequant_kn(k, n);
	case OP_RESHAPE:
		return canon_noop(k, n) || canon_matmul_flatten(k, n) || canon_reshape2(k, n);
	case OP_TRANSPOSE:
		return canon_noop(k, n) || canon_transpose2(k, n);
	case OP_CAST:
		return canon_noop(k, n) || canon_cast2(k, n) || canon_norm_cast(k, n);
	case OP_SPLIT:
		return canon_split_transpose(k, n);
	case OP_SLICE:
		return canon_topk_prefix(k, n);
	case OP_TOPK:
		return canon_topk_cast(k, n);
	case OP_DEQUANTIZE:
		return canon_dequant_up(k, n);
	case OP_IDENTITY:
	case OP_EXPAND:
		return canon_noop(k, n);
	default:
		return 0;
	}
}

static int
member(Node *const *v, size_t n, const Node *x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

int
canon_report(Canon *k, Node *root)
{
	if (!k->c->report || member(k->reported.v, k->reported.n, root))
		return 0;
	vec_push(&k->reported, root);
	return 1;
}

static int
dead(const Node *n)
{
	for (int i = 0; i < n->nout; i++)
		if (n->out[i]->nuse)
			return 0;
	return 1;
}

/* Delete what the rewrites left without users, then refill the uses. */
static void
sweep(Canon *k)
{
	ir_fill_uses(k->g);
	for (Node *n = k->g->last, *prev; n; n = prev) {
		prev = n->prev;
		if (!dead(n) || member(k->predead.v, k->predead.n, n))
			continue;
		for (int i = 0; i < n->nin; i++)
			if (n->in[i] && n->in[i]->nuse)
				n->in[i]->nuse--;
		ir_erase(k->g, n);
	}
	ir_fill_uses(k->g);
}

static int
canon_graph(Graph *g, PassCtx *c)
{
	Canon k = {.g = g, .c = c};
	int changed = 0, budget = 100000;

	diag_init(&k.quiet, NULL);
	ir_fill_uses(g);
	for (Node *n = g->first; n; n = n->next)
		if (dead(n))
			vec_push(&k.predead, n);
	for (Node *n = g->first; n && budget > 0;) {
		Node *next = n->next;
		int nnode = g->nnode, hit = rewrite(&k, n);
		if (hit || g->nnode != nnode)
			sweep(&k);	/* also what a build that failed half-way left */
		if (hit) {
			changed = 1;
			budget--;
			next = g->first;	/* uses and neighbours changed: start over */
		}
		n = next;
	}
	vec_free(&k.predead);
	vec_free(&k.reported);
	return changed;
}

int
canon(Module *m, PassCtx *c)
{
	int changed = 0;

	for (int i = 0; i < m->ngraph; i++)
		if (m->graph[i]->kind == G_GRAPH)	/* kernel bodies are codegen's */
			changed |= canon_graph(m->graph[i], c);
	return changed;
}
