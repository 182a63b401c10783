/*
 * cse: merge nodes that compute the same thing — same op, same operands,
 * same attributes (and, for constants, the same type and values).
 *
 *	%a = mul %x, %y                  %a = mul %x, %y
 *	%b = mul %x, %y       =>         %c = add %a, %a
 *	%c = add %a, %b
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static int
attr_equal(const Attr *a, const Attr *b)
{
	size_t elem;

	if (a->key != b->key || a->kind != b->kind || a->n != b->n)
		return 0;
	switch (a->kind) {
	case A_INT: return a->u.i == b->u.i;
	case A_FLOAT: return memcmp(&a->u.f, &b->u.f, sizeof a->u.f) == 0;
	case A_STR: return a->u.s == b->u.s;	/* interned */
	default:
		elem = sizeof(int64_t);		/* ints, floats and dims are all 8 bytes */
		return memcmp(a->u.ints, b->u.ints, elem * (size_t)a->n) == 0;
	}
}

static int
same(const Node *a, const Node *b)
{
	if (a->op != b->op || a->nin != b->nin || a->nout != b->nout ||
	    a->nattr != b->nattr || a->callee != b->callee)
		return 0;
	for (int i = 0; i < a->nin; i++)
		if (a->in[i] != b->in[i])
			return 0;
	for (int i = 0; i < a->nattr; i++)
		if (!attr_equal(&a->attr[i], &b->attr[i]))
			return 0;
	for (int i = 0; i < a->nout; i++)
		if (!ir_type_eq(&a->out[i]->type, &b->out[i]->type))
			return 0;
	return 1;
}

static uint64_t
node_hash(const Node *n)
{
	uint64_t h = mix64((uint64_t)n->op * 131 + (uint64_t)n->nin);

	for (int i = 0; i < n->nin; i++)
		h = mix64(h ^ (n->in[i] ? n->in[i]->id + 1 : 0));
	for (int i = 0; i < n->nattr; i++)
		h = mix64(h ^ (uint64_t)(uintptr_t)n->attr[i].key);
	return h;
}

static int
cse_graph(Graph *g)
{
	size_t cap = 64;
	int changed = 0;

	while (cap < 2 * (size_t)g->nnode + 2)
		cap *= 2;
	Node **tab = xcalloc(cap, sizeof *tab);
	for (Node *n = g->first, *next; n; n = next) {
		size_t i = node_hash(n) & (cap - 1);
		next = n->next;
		while (tab[i] && !same(tab[i], n))
			i = (i + 1) & (cap - 1);
		if (!tab[i]) {
			tab[i] = n;
			continue;
		}
		for (int k = 0; k < n->nout; k++)
			ir_replace_uses(g, n->out[k], tab[i]->out[k]);
		ir_erase(g, n);
		changed = 1;
	}
	free(tab);
	return changed;
}

int
cse(Module *m, PassCtx *c)
{
	int changed = 0;

	for (int i = 0; i < m->ngraph; i++)
		changed |= cse_graph(m->graph[i]);
	return changed;
}
