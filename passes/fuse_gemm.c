/*
 * fuse-gemm: every matmul and grouped_matmul becomes a kernel holding its
 * prologue (the MoE token gather) and its epilogue (bias, activation,
 * scales, residual, SwiGLU, output cast, the scatter back to token order),
 * applied to the accumulators before the store.  route and permute become
 * kernels of their own.
 *
 *	%h = matmul %x, $w, to=f32            %y = call @g.k0(%x, $w, $b, %r)
 *	%a = add %h, $b                 =>    kernel @g.k0(...) template=gemm {
 *	%s = gelu %a                                  matmul, add, gelu, add, cast
 *	%z = add %s, %r ; %y = cast %z
 *
 * An op joins the epilogue when it is elementwise on the accumulator, its
 * other operand is a scalar, a per-row or per-column vector, or a matrix
 * of the result's shape, and the value it extends has no other user.
 * Everything it refuses is reported with the reason.
 */
#include <string.h>

#include "passes.h"

typedef struct {
	Node *n[64];
	int count;
} Set;

static void
add(Set *s, Node *n)
{
	for (int i = 0; i < s->count; i++)
		if (s->n[i] == n)
			return;
	if (s->count < (int)NELEM(s->n))
		s->n[s->count++] = n;
}

static int
single_use(const Graph *g, const Value *v)
{
	return v->nuse == 1 && v->use[0].node && !ir_is_graph_result(g, v);
}

/* Shape of `o` broadcasts onto acc as a scalar, row [M,1], column [N] or
 * [1,N], or a full matrix of acc's shape. */
static int
epilogue_operand(const Module *m, const Type *acc, const Type *o)
{
	int64_t n = ir_type_numel(o);
	int r = acc->rank;

	if (n == 1)
		return 1;
	if (o->rank == r) {
		int same = 1, row = o->dim[r - 1] == 1, col = 1;
		for (int i = 0; i < r; i++) {
			same &= o->dim[i] == acc->dim[i];
			if (i < r - 1)
				col &= o->dim[i] == 1;
			else
				row &= 1;
		}
		for (int i = 0; i < r - 1 && row; i++)
			row = o->dim[i] == acc->dim[i];
		col &= o->dim[r - 1] == acc->dim[r - 1];
		return same || row || col;
	}
	return o->rank == 1 && o->dim[0] == acc->dim[r - 1];
}

static int
epilogue_op(Op op)
{
	switch (op) {
	case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MIN: case OP_MAX:
	case OP_RELU: case OP_GELU: case OP_SILU: case OP_SIGMOID: case OP_TANH:
	case OP_EXP: case OP_NEG: case OP_CLIP: case OP_CAST: case OP_LEAKY_RELU:
	case OP_SOFTPLUS: case OP_HARD_SWISH: case OP_HARD_SIGMOID: case OP_IDENTITY:
		return 1;
	default:
		return 0;
	}
}

/* The nodes that only shape an epilogue operand (the routing weight
 * gathered through the permutation), when nothing else uses them. */
static void
operand_prep(const Graph *g, Value *v, Set *s)
{
	for (int depth = 0; depth < 4 && v->kind == V_RESULT && single_use(g, v); depth++) {
		Node *d = v->def;
		if (d->op != OP_RESHAPE && d->op != OP_GATHER && d->op != OP_CAST)
			return;
		add(s, d);
		v = d->in[0];
	}
}

/* Extend the epilogue from value v as far as the rules allow. */
static void
epilogue(Graph *g, Value *v, int grouped, Set *s, PassCtx *c)
{
	int paired = 0;		/* one swiglu per epilogue: it halves the columns */

	for (;;) {
		if (!single_use(g, v)) {
			if (v->nuse > 1)
				report_skip(c->report, "epilogue stops at %%%s: it has %d users",
					    v->name, v->nuse);
			return;
		}
		Node *u = v->use[0].node;
		if (u->op == OP_SWIGLU && !paired &&
		    strcmp(ir_attr_str(u, "layout", "concat"), "interleave") == 0) {
			add(s, u);
			paired = 1;
		} else if (u->op == OP_SCATTER_ROWS && grouped && u->in[0] == v) {
			add(s, u);
			return;		/* the store */
		} else if (epilogue_op(u->op)) {
			int ok = 1;
			for (int i = 0; i < u->nin && ok; i++)
				if (u->in[i] && u->in[i] != v)
					ok = epilogue_operand(g->m, &v->type, &u->in[i]->type);
			if (!ok || u->out[0]->type.rank != v->type.rank) {
				report_skip(c->report, "%s %%%s not fused into the epilogue of %%%s: "
					    "its other operand is not a scalar, row, column or matrix of the result",
					    ir_opname(u->op), u->out[0]->name, v->name);
				return;
			}
			add(s, u);
			for (int i = 0; i < u->nin; i++)
				if (u->in[i] && u->in[i] != v)
					operand_prep(g, u->in[i], s);
		} else {
			return;
		}
		v = u->out[0];
	}
}

/* The grouped GEMM's prologue: A rows gathered through the permutation. */
static void
prologue(const Graph *g, Node *mm, Set *s)
{
	Value *a = mm->in[0];

	if (a->kind != V_RESULT || a->def->op != OP_GATHER || !single_use(g, a))
		return;
	add(s, a->def);
	Value *src = a->def->in[1];
	if (src->kind == V_RESULT && src->def->op == OP_DIV && single_use(g, src)) {
		add(s, src->def);
		Value *k = src->def->in[1];
		if (k->kind == V_RESULT && k->def->op == OP_CONST && single_use(g, k))
			add(s, k->def);
	}
}

/* Program order of the set, as outline wants it. */
static void
sort(Graph *g, Set *s)
{
	int k = 0;

	for (Node *n = g->first; n && k < s->count; n = n->next)
		for (int i = k; i < s->count; i++)
			if (s->n[i] == n) {
				Node *t = s->n[k];
				s->n[k++] = n;
				s->n[i] = t;
				break;
			}
}

static void
describe(char *buf, size_t len, const Set *s, const Node *anchor)
{
	size_t k = 0;

	buf[0] = 0;
	for (int i = 0; i < s->count && k < len; i++) {
		if (s->n[i] == anchor || s->n[i]->op == OP_CONST || s->n[i]->op == OP_RESHAPE)
			continue;
		k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? ", " : "", ir_opname(s->n[i]->op));
	}
}

static int
fuse_anchor(Graph *g, Node *n, PassCtx *c)
{
	int grouped = n->op == OP_GROUPED_MATMUL;
	const char *tmpl = grouped ? "grouped_gemm" : n->op == OP_MATMUL ? "gemm"
			   : n->op == OP_ROUTE ? "route" : "permute";
	Set s = {.count = 0};
	char what[512];
	Node *call;

	ir_fill_uses(g);
	add(&s, n);
	if (n->op == OP_MATMUL || grouped) {
		if (grouped)
			prologue(g, n, &s);
		epilogue(g, n->out[0], grouped, &s, c);
	}
	sort(g, &s);
	describe(what, sizeof what, &s, n);
	call = pass_outline(g, s.n, s.count, tmpl);
	if (!call) {
		report_skip(c->report, "%s %%%s left unfused: its region is not convex",
			    ir_opname(n->op), n->out[0]->name);
		return 0;
	}
	report_fused(c->report, call->callee->name, "%s: %s%s%s", tmpl, ir_opname(n->op),
		     what[0] ? " + " : "", what);
	return 1;
}

int
fuse_gemm(Module *m, PassCtx *c)
{
	Graph *g = ir_main_graph(m);
	int changed = 0;

	if (!g)
		return 0;
	for (Node *n = g->first, *next; n; n = next) {
		next = n->next;
		if (n->op != OP_MATMUL && n->op != OP_GROUPED_MATMUL && n->op != OP_ROUTE &&
		    n->op != OP_PERMUTE)
			continue;
		if (pass_weight_only(n->out[0]))
			continue;	/* weight preparation: folded or run once at load */
		if (n->op == OP_MATMUL && n->in[1]->type.rank != 2) {
			report_skip(c->report, "matmul %%%s not a GEMM kernel: B is not a 2-D matrix",
				    n->out[0]->name);
			continue;
		}
		if (fuse_anchor(g, n, c)) {
			changed = 1;
			next = g->first;	/* the list changed: rescan; fused nodes are calls now */
		}
	}
	return changed;
}
