/*
 * canon_linalg.c — the canon rewrites around matmul: a bias add (and the
 * alpha and beta of an ONNX Gemm) into the matmul's bias operand, a
 * transposed operand into trans_a/trans_b, and the reshapes that flatten
 * [B,S,H] to [B*S,H] around a 2-D GEMM (GPT-2's Conv1D) removed, since
 * matmul broadcasts batch dims.
 *
 *	%h = matmul %x, $w : [T,N]           %y = matmul %x, $w, $b : [T,N]
 *	%y = add $b, %h                =>
 *
 *	%wt = transpose $w, perm=[1,0]       %y = matmul %x, $w, trans_b=1
 *	%y = matmul %x, %wt            =>
 *
 *	%a = reshape %x, shape=[B*S,H]       %y = matmul %x, $w, $b : [B,S,N]
 *	%h = matmul %a, $w, $b         =>
 *	%y = reshape %h, shape=[B,S,N]
 */
#include "match.h"

/* A bias for a result [..., N]: [N], [1,N], [] or [1] (per column). */
static int
bias_like(const Value *b, const Value *y)
{
	const Type *t = &y->type;

	return b->type.dt == t->dt && per_channel(b, t->dim[t->rank - 1], t->rank);
}

/* Say why root's add stays: b is no bias, or busy has other users. */
static void
skip(Canon *k, Node *root, const Node *mm, const Value *b, const Value *busy)
{
	const char *h = mm->out[0]->name;
	char cost[200];

	if (!canon_report(k, root))
		return;
	report_trip(cost, sizeof cost, mm->out[0], 1, 1);
	if (b)
		report_skip(k->c->report, "bias add not fused into matmul %%%s: %s%s is not "
			    "a per-column bias; %s", h, b->kind == V_WEIGHT ? "$" : "%", b->name, cost);
	else
		report_skip(k->c->report, "bias add not fused into matmul %%%s: %%%s has %d users; %s",
			    h, busy->name, busy->nuse, cost);
}

/* h = matmul(...), or mul(matmul(...), alpha) for a constant alpha. */
static Node *
scaled_matmul(Value *h, Node **sc, Value **alpha)
{
	Node *m = def_op(h, OP_MUL), *mm;
	double c;
	DType dt;

	*sc = NULL;
	*alpha = NULL;
	if ((mm = def_op(h, OP_MATMUL)) || !m)
		return mm;
	for (int j = 0; j < 2; j++)
		if ((mm = def_op(m->in[j], OP_MATMUL)) && const_scalar(m->in[1 - j], &c, &dt) &&
		    c != 0 && type_like(h, mm->out[0])) {
			*sc = m;
			*alpha = m->in[1 - j];
			return mm;
		}
	return NULL;
}

/*
 * add(matmul(a, w[, b0]), b) -> matmul(a, w, b0 + b); and through the mul
 * of a Gemm's alpha: add(mul(matmul(a, w), alpha), b) -> mul(matmul(a, w,
 * b / alpha), alpha).  The new bias is computed from weights, so fold
 * evaluates it.
 */
int
canon_bias(Canon *k, Node *n)
{
	for (int i = 0; i < 2; i++) {
		Value *h = n->in[i], *b = n->in[1 - i], *alpha, *bias, *y;
		Node *sc, *mm = scaled_matmul(h, &sc, &alpha);
		double c;
		DType dt;
		Builder bd;

		if (!mm || mm->out[0]->type.rank < 1 || !type_like(h, n->out[0]))
			continue;
		if (!bias_like(b, mm->out[0])) {
			if (ir_weight_only(b))	/* a constant, but not per column */
				skip(k, n, mm, b, NULL);
			continue;
		}
		if (sole_user(mm->out[0]) != (sc ? sc : n) || (sc && sole_user(h) != n)) {
			skip(k, n, mm, NULL, sole_user(mm->out[0]) ? h : mm->out[0]);
			continue;
		}
		bd = canon_builder(k, n);
		bias = b;
		if (alpha && const_scalar(alpha, &c, &dt)) {
			Value *inv = ir_b_const_f(&bd, b->type.dt, 1 / c);
			bias = inv ? ir_b2(&bd, OP_MUL, bias, inv) : NULL;
		}
		if (mm->nin > 2 && mm->in[2] && bias)
			bias = ir_b2(&bd, OP_ADD, mm->in[2], bias);
		y = canon_matmul(&bd, mm, mm->in[0], mm->in[1], bias,
				 (int)ir_attr_int(mm, "trans_a", 0), (int)ir_attr_int(mm, "trans_b", 0));
		if (alpha && y)
			y = ir_b2(&bd, OP_MUL, y, alpha);
		return canon_adopt(k, n, y);
	}
	return 0;
}

/* transpose(w) swapping the last two axes only, of a rank >= 2 w. */
static Value *
swapped(Value *v)
{
	Node *t = def_op(v, OP_TRANSPOSE);
	int64_t perm[MAXRANK];
	int r;

	if (!t || (r = t->in[0]->type.rank) < 2)
		return NULL;
	if (ir_attr_ints(t, "perm", perm, MAXRANK) < 0) {
		if (r != 2)
			return NULL;
		return t->in[0];
	}
	for (int i = 0; i < r - 2; i++)
		if (perm[i] != i)
			return NULL;
	return perm[r - 2] == r - 1 && perm[r - 1] == r - 2 ? t->in[0] : NULL;
}

int
canon_matmul_trans(Canon *k, Node *n)
{
	Value *a = n->in[0], *w = n->in[1], *sa = swapped(a), *sw = swapped(w);
	int ta = (int)ir_attr_int(n, "trans_a", 0), tb = (int)ir_attr_int(n, "trans_b", 0);
	Builder b;

	if (!sa && !sw)
		return 0;
	b = canon_builder(k, n);
	return canon_adopt(k, n, canon_matmul(&b, n, sa ? sa : a, sw ? sw : w,
					      n->nin > 2 ? n->in[2] : NULL, sa ? !ta : ta,
					      sw ? !tb : tb));
}

/* reshape(matmul(reshape(x, [B*S,H]), w), [B,S,N]) -> matmul(x, w) */
int
canon_matmul_flatten(Canon *k, Node *n)
{
	Node *mm = def_op(n->in[0], OP_MATMUL), *fl;
	const Type *y = &n->out[0]->type, *x;
	Value *bias;
	Builder b;

	if (!mm || sole_user(mm->out[0]) != n || !(fl = def_op(mm->in[0], OP_RESHAPE)) ||
	    ir_attr_int(mm, "trans_a", 0) || mm->in[0]->type.rank != 2 ||
	    mm->in[1]->type.rank != 2)
		return 0;
	x = &fl->in[0]->type;
	bias = mm->nin > 2 ? mm->in[2] : NULL;
	if (x->rank < 3 || y->rank != x->rank ||
	    x->dim[x->rank - 1] != mm->in[0]->type.dim[1] ||
	    y->dim[y->rank - 1] != mm->out[0]->type.dim[1])
		return 0;
	for (int i = 0; i + 1 < x->rank; i++)
		if (x->dim[i] != y->dim[i])
			return 0;
	if (bias && !per_channel(bias, y->dim[y->rank - 1], y->rank))
		return 0;
	b = canon_builder(k, n);
	return canon_adopt(k, n, canon_matmul(&b, mm, fl->in[0], mm->in[1], bias, 0,
					      (int)ir_attr_int(mm, "trans_b", 0)));
}

/* A [K,N] quantised weight (DequantizeLinear keeps the initializer's x @ W
 * order: blocks along axis 0) read as B without trans_b: the same matmul
 * over the transposed weight, scales and zero points ([N,K], blocks along
 * axis 1) with trans_b, the layout the quantised GEMM reads (fold transposes
 * the weights at compile time).
 *
 *	%w = dequantize $q, $s, axis=0, block_size=32     %w = dequantize (transpose $q), (transpose $s), axis=1, ...
 *	%y = matmul %x, %w                          =>    %y = matmul %x, %w, trans_b=1
 */
int
canon_dequant_kn(Canon *k, Node *n)
{
	static const int64_t swap[2] = {1, 0};
	Node *dq = def_op(n->in[1], OP_DEQUANTIZE), *nd;
	Value *in[3] = {NULL, NULL, NULL};
	Builder b;

	if (!dq || ir_attr_int(n, "trans_b", 0) || sole_user(n->in[1]) != n ||
	    dq->in[0]->kind != V_WEIGHT || dq->in[0]->type.rank != 2 ||
	    !dtype_is_quantised(dq->in[0]->type.dt) || ir_attr_int(dq, "block_size", 0) <= 0 ||
	    (ir_attr_int(dq, "axis", 1) != 0 && ir_attr_int(dq, "axis", 1) != -2))
		return 0;
	/* Only weights with data: fold transposes those; a synthetic weight
	 * (mean=, scale=) has no bytes to move, and a transpose of packed codes
	 * left for the GPU has no kernel. */
	for (int i = 0; i < dq->nin; i++)
		if (dq->in[i] && (dq->in[i]->kind != V_WEIGHT || dq->in[i]->type.rank != 2 || !dq->in[i]->weight->data))
			return 0;
	b = canon_builder(k, n);
	for (int i = 0; i < dq->nin; i++) {
		ir_b_ints(&b, "perm", swap, 2);
		in[i] = ir_b1(&b, OP_TRANSPOSE, dq->in[i]);
	}
	for (int i = 0; i < dq->nattr; i++)
		if (strcmp(dq->attr[i].key, "axis") && b.npend < (int)NELEM(b.pend))
			b.pend[b.npend++] = dq->attr[i];
	ir_b_int(&b, "axis", 1);
	if (b.err || !(nd = ir_b_node(&b, OP_DEQUANTIZE, in, dq->nin, 1)))
		return 0;
	return canon_adopt(k, n, canon_matmul(&b, n, n->in[0], nd->out[0], n->nin > 2 ? n->in[2] : NULL,
					      (int)ir_attr_int(n, "trans_a", 0), 1));
}
