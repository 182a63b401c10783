/*
 * outline.c — move a set of nodes into a new kernel and call it.  Fusion
 * passes choose the nodes; this is the one place that builds kernels.
 *
 *	%a = matmul %x, $w            %a = call @g.k0(%x, $w, $b)
 *	%b2 = add %a, $b      =>      kernel @g.k0(%x, %w, %b) template=gemm {
 *	                                      %a = matmul %x, %w
 *	                                      %b2 = add %a, %b ...
 *
 * The results keep their Value objects (names and ids), so nothing outside
 * the region changes.  The region must be convex: a node outside it that
 * uses a result and feeds the region makes outlining refuse (NULL).
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* The operands a routing decision ranks: route's logits, moe's logits and
 * selection bias, a top-k's values (an exported router's). */
static int
routing_operand(const Node *n, int i)
{
	return (n->op == OP_ROUTE && i < 2) || (n->op == OP_MOE && (i == 1 || i == 2)) ||
	       (n->op == OP_TOPK && i == 0);
}

unsigned char *
pass_feeds_routing(const Graph *g)
{
	unsigned char *mark = xcalloc((size_t)g->m->nvalue + 1, 1);

	for (const Node *n = g->last; n; n = n->prev) {
		int live = 0;
		for (int i = 0; i < n->nout; i++)
			live |= n->out[i] && mark[n->out[i]->id];
		for (int i = 0; i < n->nin; i++)
			if (n->in[i] && (live || routing_operand(n, i)))
				mark[n->in[i]->id] = 1;
	}
	return mark;
}

/* Route and permute kernels bind the call's results by position: an unused
 * one ahead of a used one (a route whose weights nothing reads) stays a
 * kernel result, written and dropped.  A permute's last result, pos, is
 * optional (CgPermuteSpec.want_pos): unused, it is not written, since it
 * costs a store a slot in the sort's serial walk. */
static int
keeps(const Node *n, int j)
{
	return n->op == OP_ROUTE || (n->op == OP_PERMUTE && j < 2);
}

void
pass_take_over(Graph *g, Node *dead, Value *old, Value *y)
{
	ir_erase(g, dead);
	y->def->out[y->resno] = old;
	old->def = y->def;
	old->resno = y->resno;
}

typedef struct {
	Value **v;
	int n, cap;
} Vals;

static void
vals_add(Vals *s, Value *v)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == v)
			return;
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = xrealloc(s->v, sizeof *s->v * (size_t)s->cap);
	}
	s->v[s->n++] = v;
}

static int
vals_find(const Vals *s, const Value *v)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == v)
			return i;
	return -1;
}

static int
member(Node *const *set, int n, const Node *x)
{
	for (int i = 0; i < n; i++)
		if (set[i] == x)
			return 1;
	return 0;
}

/* Is every node between first and last that depends on the region free of
 * feeding it?  Moves such nodes after `last`; 0 ok, -1 not convex. */
static int
make_convex(Graph *g, Node **set, int n, unsigned char *in_set, unsigned char *tainted)
{
	Node *first = set[0], *last = set[n - 1];
	Node *moved[4096];
	int nmoved = 0;

	if (first == last)
		return 0;
	for (Node *x = first->next; x && x != last; x = x->next) {
		if (member(set, n, x))
			continue;
		int dep = 0;
		for (int i = 0; i < x->nin && !dep; i++)
			dep = x->in[i] && tainted[x->in[i]->id];
		if (!dep)
			continue;
		if (nmoved == (int)NELEM(moved))
			return -1;
		moved[nmoved++] = x;
		for (int i = 0; i < x->nout; i++)
			tainted[x->out[i]->id] = 1;
	}
	/* a moved node must not feed the region */
	for (int k = 0; k < n; k++)
		for (int i = 0; i < set[k]->nin; i++) {
			Value *v = set[k]->in[i];
			if (v && v->kind == V_RESULT && !in_set[v->id] && tainted[v->id])
				return -1;
		}
	for (int k = nmoved - 1; k >= 0; k--) {
		ir_erase(g, moved[k]);
		ir_insert(g, last->next, moved[k]);
	}
	return 0;
}

static int
is_scalar_const(const Value *v)
{
	return v->kind == V_RESULT && v->def->op == OP_CONST && ir_type_numel(&v->type) == 1;
}

/* The next free @g.k<i>; counting on from the last one keeps outlining K
 * kernels linear in K (probing from 0 each time was cubic). */
static const char *
kernel_name(Module *m, Graph *g)
{
	char buf[256];

	for (int i = g->nextkernel;; i++) {
		snprintf(buf, sizeof buf, "%s.k%d", g->name, i);
		if (!ir_find_graph(m, buf)) {
			g->nextkernel = i + 1;
			return ir_intern(m, buf);
		}
	}
}

/*
 * v's uses by nodes of the set are gone; the call's use of it, if any, is
 * added.  Keeps g's uses current without a sweep of the graph per kernel
 * (a sweep each made fusing a 100,000-node chain take minutes).  The scan
 * stops at the last use by the set, and uses stay in program order, so for
 * a value that every node reads (a Sum of 100,000 operands) the set's uses
 * come first and the rest is one memmove.
 */
static void
retarget_uses(Module *m, Value *v, Node *const *set, int n, const unsigned char *in_set,
	      Node *call, int arg)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		for (int j = 0; j < set[i]->nin; j++)
			k += set[i]->in[j] == v;
	int i = 0, kept = 0;
	for (; i < v->nuse && k > 0; i++) {
		const Node *u = v->use[i].node;
		if (u && u->nout && in_set[u->out[0]->id])	/* u is in the set */
			k--;
		else
			v->use[kept++] = v->use[i];
	}
	if (i < v->nuse)	/* v->use may be NULL when v has no uses */
		memmove(v->use + kept, v->use + i, sizeof *v->use * (size_t)(v->nuse - i));
	v->nuse = kept + v->nuse - i;
	if (arg < 0)
		return;
	if (v->nuse == v->usecap) {
		Use *u = arena_array(m->arena, Use, 2 * v->usecap + 1);
		if (v->nuse)
			memcpy(u, v->use, sizeof *u * (size_t)v->nuse);
		v->use = u;
		v->usecap = 2 * v->usecap + 1;
	}
	v->use[v->nuse++] = (Use){call, arg};
}

Node *
pass_outline(Graph *g, Node **set, int n, IrTemplate tmpl)
{
	Module *m = g->m;
	unsigned char *in_set = xcalloc(m->nvalue + 1, 1), *tainted = xcalloc(m->nvalue + 1, 1);
	Vals ins = {0}, outs = {0}, kin = {0};
	Node *call = NULL;
	Graph *k;

	if (n <= 0)
		goto out;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < set[i]->nout; j++)
			in_set[set[i]->out[j]->id] = tainted[set[i]->out[j]->id] = 1;
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < set[i]->nin; j++) {
			Value *v = set[i]->in[j];
			if (v && !(v->kind == V_RESULT && in_set[v->id]))
				vals_add(&ins, v);
		}
		for (int j = 0; j < set[i]->nout; j++) {
			Value *v = set[i]->out[j];
			int outside = ir_is_graph_result(g, v) || keeps(set[i], j);
			for (int u = 0; u < v->nuse && !outside; u++)
				outside = v->use[u].node && !member(set, n, v->use[u].node);
			if (outside)
				vals_add(&outs, v);
		}
	}
	if (outs.n == 0 || make_convex(g, set, n, in_set, tainted) != 0)
		goto out;

	/* the kernel: parameters for the inputs, clones of the nodes */
	k = ir_new_graph(m, kernel_name(m, g), G_KERNEL);
	ir_set_kernel_template(k, tmpl);
	/* scalar constants are copied into the kernel; the rest are passed */
	for (int i = 0; i < ins.n; i++) {
		Value *v = ins.v[i];
		if (is_scalar_const(v)) {
			Node *cc = ir_new_node(k, OP_CONST, NULL, 0, 1);
			cc->loc = v->def->loc;
			ir_copy_attrs(m, cc, v->def);
			cc->out[0]->type = v->type;
			ir_set_name(k, cc->out[0], v->name);
			ir_insert(k, NULL, cc);
			vals_add(&kin, cc->out[0]);
		} else {
			vals_add(&kin, ir_add_param(k, v->name, v->type));
		}
	}
	Value **map = xcalloc(m->nvalue + 1, sizeof *map);
	for (int i = 0; i < n; i++) {
		Node *c = ir_new_node(k, set[i]->op, NULL, set[i]->nin, set[i]->nout);
		c->loc = set[i]->loc;
		c->callee = set[i]->callee;
		ir_copy_attrs(m, c, set[i]);
		for (int j = 0; j < set[i]->nin; j++) {
			Value *v = set[i]->in[j];
			int p = v ? vals_find(&ins, v) : -1;
			c->in[j] = !v ? NULL : p >= 0 ? kin.v[p] : map[v->id];
		}
		for (int j = 0; j < set[i]->nout; j++) {
			c->out[j]->type = set[i]->out[j]->type;
			ir_set_name(k, c->out[j], set[i]->out[j]->name);
			map[set[i]->out[j]->id] = c->out[j];
		}
		ir_insert(k, NULL, c);
	}
	Value **kret = xcalloc((size_t)outs.n + 1, sizeof *kret);
	const char **rname = xcalloc((size_t)outs.n + 1, sizeof *rname);
	for (int i = 0; i < outs.n; i++) {
		kret[i] = map[outs.v[i]->id];
		rname[i] = outs.v[i]->name;
	}
	ir_set_results(k, kret, rname, outs.n);

	/* the call takes over the result values, so their users don't change */
	int nargs = 0;
	Value **args = xcalloc((size_t)ins.n + 1, sizeof *args);
	for (int i = 0; i < ins.n; i++)
		if (!is_scalar_const(ins.v[i]))
			args[nargs++] = ins.v[i];
	call = ir_new_node(g, OP_CALL, args, nargs, outs.n);
	call->callee = k;
	call->loc = set[n - 1]->loc;
	for (int i = 0, a = 0; i < ins.n; i++)	/* args are ins in order, less scalars */
		retarget_uses(m, ins.v[i], set, n, in_set, call,
			      a < nargs && args[a] == ins.v[i] ? a++ : -1);
	for (int i = 0; i < outs.n; i++) {
		call->out[i] = outs.v[i];
		outs.v[i]->def = call;
		outs.v[i]->resno = i;
		retarget_uses(m, outs.v[i], set, n, in_set, NULL, -1);
	}
	free(args);
	ir_insert(g, set[n - 1]->next, call);
	for (int i = 0; i < n; i++)
		ir_erase(g, set[i]);
	free(map);
	free(kret);
	free(rname);
out:
	free(in_set);
	free(tainted);
	free(ins.v);
	free(outs.v);
	free(kin.v);
	return call;
}
