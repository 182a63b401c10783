/*
 * lower-sort: a topk the kernel bodies do not take (k = -1, an export's
 * argsort over a run-time length, or k above IR_TOPK_BODY_MAX; the bodies
 * select the k best by k rounds) becomes a rank sort.  A member's rank is
 * how many members come before it in topk's order (docs/ir.md: the value,
 * NaN largest, then the lower index), and the member goes to its rank:
 *
 *	%v, %i = topk %x, k=K : [R,K]        %a = reshape %x : [R,n,1]   (member j)
 *	                              =>     %c = reshape %x : [R,1,n]   (member m)
 *	                                     %io = cumsum ones[R,n], exclusive=1 : i64[R,n]
 *	                                     %bt = before(m, j) : bool[R,n,n]
 *	                                     %rk = reduce_sum (cast %bt, i64), axes=[-1] : i64[R,n]
 *	                                     %i = scatter_elements %io, %rk, %io, axis=-1  [, slice :K]
 *	                                     %v = gather_elements %x, %i, axis=-1
 *
 * (drawn for the last axis; any axis a works alike, m along a + 1).  The
 * ranks are a permutation, so every position is written once: exact and the
 * interpreter's order, whatever the length.  Its cost: n comparisons per
 * member, n^2 per row, counted in one row-reduce kernel made here (fuse-ew
 * fuses only chains, and would write the [R,n,n] comparisons out); the
 * fusion report says so.
 */
#include <string.h>

#include "passes.h"

static Value *
reshape(Builder *b, Value *v, int rank, const Dim *dims)
{
	ir_b_dims(b, "shape", dims, rank);
	return ir_b1(b, OP_RESHAPE, v);
}

/* x with a dim of 1 inserted at `at` */
static Value *
unsqueeze(Builder *b, Value *x, int at)
{
	Dim d[MAXRANK];
	int r = x->type.rank, k = 0;

	for (int i = 0; i <= r; i++)
		d[i] = i == at ? 1 : x->type.dim[k++];
	return reshape(b, x, r + 1, d);
}

Value *
pass_iota(Builder *b, const Dim *dims, int rank, int axis)
{
	Node *one;

	ir_b_dims(b, "shape", dims, rank);
	ir_b_str(b, "to", "i64");
	ir_b_float(b, "value", 1);
	if (!(one = ir_b_node(b, OP_CONSTANT_OF_SHAPE, NULL, 0, 1)))
		return NULL;
	ir_b_int(b, "axis", axis);
	ir_b_int(b, "exclusive", 1);
	return ir_b1(b, OP_CUMSUM, one->out[0]);
}

/* Does member m (value vm, index im) come before member j?  The value
 * first (NaN, where vm != vm, largest), then the lower index. */
static Value *
before(Builder *b, Value *vm, Value *vj, Value *im, Value *ij, int largest)
{
	Value *better = ir_b2(b, largest ? OP_GREATER : OP_LESS, vm, vj);
	Value *tie = ir_b2(b, OP_EQUAL, vm, vj);

	if (!dtype_is_int(vm->type.dt)) {
		Value *nm = ir_b1(b, OP_NOT, ir_b2(b, OP_EQUAL, vm, vm));
		Value *nj = ir_b1(b, OP_NOT, ir_b2(b, OP_EQUAL, vj, vj));
		Value *nan = largest ? ir_b2(b, OP_AND, nm, ir_b1(b, OP_NOT, nj))
				     : ir_b2(b, OP_AND, nj, ir_b1(b, OP_NOT, nm));
		better = ir_b2(b, OP_OR, better, nan);
		tie = ir_b2(b, OP_OR, tie, ir_b2(b, OP_AND, nm, nj));
	}
	return ir_b2(b, OP_OR, better, ir_b2(b, OP_AND, tie, ir_b2(b, OP_LESS, im, ij)));
}

/* The comparisons and their count, from..last, into one row-reduce kernel:
 * its [R,n,n] comparisons never leave registers (fuse-ew would fuse only
 * a chain of them and write the others out). */
static int
rank_kernel(Graph *g, Node *from, Node *last)
{
	Node *set[64];
	int k = 0;

	for (Node *c = from->next; k < 64; c = c->next) {
		set[k++] = c;
		if (c == last)
			break;
	}
	if (set[k - 1] != last)
		return -1;
	ir_fill_uses(g);
	return pass_outline(g, set, k, IR_TMPL_ROW_REDUCE) ? 0 : -1;
}

static int
lower_topk(Graph *g, Node *n, PassCtx *c)
{
	Builder b = {.g = g, .before = n, .loc = n->loc, .d = c->d};
	Value *x = n->in[0], *io, *rk, *idx = NULL, *val;
	Node *sc;
	IrTopkAttrs ta;
	int64_t a, a1;
	char len[64];

	ir_topk_attrs(n, &ta);
	a = ir_axis(ta.axis, x->type.rank), a1 = a + 1;
	if (!(io = pass_iota(&b, x->type.dim, x->type.rank, (int)a)))
		return -1;
	/* member j along a, member m along a + 1 */
	Value *vj = unsqueeze(&b, x, (int)a1), *vm = unsqueeze(&b, x, (int)a);
	Value *ij = unsqueeze(&b, io, (int)a1), *im = unsqueeze(&b, io, (int)a);
	Node *from = n->prev;
	rk = before(&b, vm, vj, im, ij, ta.largest);
	ir_b_str(&b, "to", "i64");
	rk = ir_b1(&b, OP_CAST, rk);
	ir_b_ints(&b, "axes", &a1, 1);
	ir_b_int(&b, "keepdims", 0);
	if (!(rk = ir_b1(&b, OP_REDUCE_SUM, rk)))
		return -1;
	ir_b_int(&b, "axis", a);
	if ((sc = ir_b_node(&b, OP_SCATTER_ELEMENTS, (Value *[]){io, rk, io}, 3, 1)))
		idx = sc->out[0];
	if (idx && !ir_type_eq(&idx->type, &n->out[1]->type)) {	/* the k best of n */
		int64_t zero = 0, k = ta.k;
		ir_b_ints(&b, "starts", &zero, 1);
		ir_b_ints(&b, "ends", &k, 1);
		ir_b_ints(&b, "axes", &a, 1);
		idx = ir_b1(&b, OP_SLICE, idx);
	}
	ir_b_int(&b, "axis", a);
	val = idx ? ir_b2(&b, OP_GATHER_ELEMENTS, x, idx) : NULL;
	if (b.err || !val || !ir_type_eq(&val->type, &n->out[0]->type) ||
	    !ir_type_eq(&idx->type, &n->out[1]->type) || rank_kernel(g, from, rk->def))
		return -1;
	ir_dim_print(len, sizeof len, g->m, x->type.dim[a]);
	report_note(c->report, "topk %%%s (k = %lld) not fused: sorted by ranks, %s comparisons per member of its "
		    "%s-long rows (the kernel bodies select k <= %d best by k rounds)", n->out[0]->name,
		    (long long)ta.k, len, len, IR_TOPK_BODY_MAX);
	ir_replace_uses(g, n->out[1], idx);
	pass_take_over(g, n, n->out[0], val);
	return 0;
}

int
lower_sort(Module *m, PassCtx *c)
{
	int changed = 0;

	for (int i = 0; i < m->ngraph; i++) {
		Graph *g = m->graph[i];
		for (Node *n = g->first, *next; n; n = next) {
			IrTopkAttrs ta;
			next = n->next;
			if (n->op != OP_TOPK)
				continue;
			ir_topk_attrs(n, &ta);
			if ((ta.k >= 1 && ta.k <= IR_TOPK_BODY_MAX) || ir_axis(ta.axis, n->in[0]->type.rank) < 0)
				continue;
			if (lower_topk(g, n, c))
				return -1;
			changed = 1;
		}
	}
	return changed;
}
