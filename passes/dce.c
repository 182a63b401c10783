/*
 * dce: delete what nothing uses — nodes whose results are dead, kernels no
 * graph calls, weights no graph reads.  Every op is free of side effects.
 *
 *	%a = mul %x, %x          (unused)        =>    (gone)
 *	%b = add %x, %x
 *	ret %b                                         ret %b
 */
#include <stdlib.h>

#include "passes.h"

static int
dead(const Node *n)
{
	for (int i = 0; i < n->nout; i++)
		if (n->out[i]->nuse)
			return 0;
	return 1;
}

static int
dce_graph(Graph *g)
{
	int changed = 0, again = 1;

	while (again) {
		again = 0;
		ir_fill_uses(g);
		for (Node *n = g->last, *prev; n; n = prev) {
			prev = n->prev;
			if (!dead(n))
				continue;
			for (int i = 0; i < n->nin; i++)
				if (n->in[i] && n->in[i]->nuse)
					n->in[i]->nuse--;
			ir_erase(g, n);
			changed = again = 1;
		}
	}
	return changed;
}

/* A kernel is live if a live graph calls it (graphs are roots). */
static int
drop_kernels(Module *m)
{
	int changed = 0;

	for (int i = m->ngraph - 1; i >= 0; i--) {
		Graph *k = m->graph[i];
		int used = k->kind == G_GRAPH;
		for (int j = 0; j < m->ngraph && !used; j++)
			for (Node *n = m->graph[j]->first; n && !used; n = n->next)
				used = n->op == OP_CALL && n->callee == k && m->graph[j] != k;
		if (!used) {
			ir_remove_graph(m, k);
			changed = 1;
		}
	}
	return changed;
}

static int
drop_weights(Module *m)
{
	unsigned char *used = xcalloc(m->nvalue + 1, 1);
	int changed = 0;

	for (int j = 0; j < m->ngraph; j++) {
		Graph *g = m->graph[j];
		for (Node *n = g->first; n; n = n->next)
			for (int i = 0; i < n->nin; i++)
				if (n->in[i] && n->in[i]->kind == V_WEIGHT)
					used[n->in[i]->id] = 1;
		for (int i = 0; i < g->nret; i++)
			if (g->ret[i]->kind == V_WEIGHT)
				used[g->ret[i]->id] = 1;
	}
	for (int i = m->nweight - 1; i >= 0; i--)
		if (!used[m->weight[i]->value->id]) {
			ir_remove_weight(m, m->weight[i]);
			changed = 1;
		}
	free(used);
	return changed;
}

int
dce(Module *m, PassCtx *c)
{
	int changed = 0;

	for (int i = 0; i < m->ngraph; i++)
		changed |= dce_graph(m->graph[i]);
	changed |= drop_kernels(m);
	changed |= drop_weights(m);
	return changed;
}
