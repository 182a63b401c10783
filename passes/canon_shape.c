/*
 * canon_shape.c — the canon rewrites of layout and type no-ops: identity,
 * reshapes and expands to the operand's own shape, casts to its own type,
 * identity transposes; chains of reshapes, transposes and casts.
 *
 *	%a = reshape %x, shape=[T*2,4]       %b = reshape %x, shape=[T,8]
 *	%b = reshape %a, shape=[T,8]   =>
 *
 *	%a = cast %x, to=f32 (x: bf16)       (%x itself)
 *	%b = cast %a, to=bf16          =>
 *
 * A cast chain folds only when the first cast is exact (bf16 -> f32 ->
 * bf16 is the identity); f32 -> bf16 -> f32 rounds and stays.
 */
#include "match.h"

static int
identity_perm(const Node *n)
{
	int64_t perm[MAXRANK];
	int np = ir_attr_ints(n, "perm", perm, MAXRANK);

	if (np < 0)
		return n->in[0]->type.rank <= 1;
	for (int i = 0; i < np; i++)
		if (perm[i] != i)
			return 0;
	return 1;
}

/* A reshape from x to y moves nothing: the dims are the same, or all but
 * one, where a "?" stands (the element count fixes it). */
static int
reshape_noop(const Value *x, const Value *y)
{
	int differ = 0, unknown = 0;

	if (x->type.dt != y->type.dt || x->type.rank != y->type.rank)
		return 0;
	for (int i = 0; i < x->type.rank; i++) {
		Dim a = x->type.dim[i], b = y->type.dim[i];
		if (a != b) {
			differ++;
			unknown |= unknown_dim(x, a) || unknown_dim(y, b);
		}
	}
	return differ == 0 || (differ == 1 && unknown);
}

/* A node that returns its operand unchanged. */
int
canon_noop(Canon *k, Node *n)
{
	Value *x = n->in[0];
	int noop = 0;

	switch (n->op) {
	case OP_IDENTITY:
	case OP_CAST:
		noop = x->type.dt == n->out[0]->type.dt;
		break;
	case OP_RESHAPE:
		noop = reshape_noop(x, n->out[0]);
		break;
	case OP_EXPAND:
		noop = ir_type_eq(&x->type, &n->out[0]->type);
		break;
	case OP_TRANSPOSE:
		noop = identity_perm(n);
		break;
	default:
		break;
	}
	return noop && canon_forward(k, n, x);
}

int
canon_reshape2(Canon *k, Node *n)
{
	Node *inner = def_op(n->in[0], OP_RESHAPE);
	Dim dims[MAXRANK];
	int r = ir_attr_dims(n, "shape", dims, MAXRANK);
	Builder b;

	if (!inner || r < 0 || n->nin > 1)
		return 0;
	if (reshape_noop(inner->in[0], n->out[0]) && canon_forward(k, n, inner->in[0]))
		return 1;
	b = canon_builder(k, n);
	return canon_adopt(k, n, canon_reshape(&b, inner->in[0], r, dims));
}

static int
perm_of(const Node *n, int64_t *perm)
{
	int rank = n->in[0]->type.rank, np = ir_attr_ints(n, "perm", perm, MAXRANK);

	if (np < 0) {
		for (int i = 0; i < rank; i++)
			perm[i] = rank - 1 - i;
		return rank;
	}
	return np;
}

int
canon_transpose2(Canon *k, Node *n)
{
	Node *inner = def_op(n->in[0], OP_TRANSPOSE);
	int64_t p1[MAXRANK], p2[MAXRANK], p[MAXRANK];
	int r, ident = 1;
	Builder b;

	if (!inner || (r = perm_of(inner, p1)) != perm_of(n, p2))
		return 0;
	for (int i = 0; i < r; i++) {
		p[i] = p1[p2[i]];
		ident &= p[i] == i;
	}
	if (ident && canon_forward(k, n, inner->in[0]))
		return 1;
	b = canon_builder(k, n);
	ir_b_ints(&b, "perm", p, r);
	return canon_adopt(k, n, ir_b1(&b, OP_TRANSPOSE, inner->in[0]));
}

/* cast(cast(x, M), D) = cast(x, D) when x -> M loses nothing. */
int
canon_cast2(Canon *k, Node *n)
{
	Node *inner = def_op(n->in[0], OP_CAST);
	Value *x;
	Builder b;

	if (!inner)
		return 0;
	x = inner->in[0];
	if (!exact_cast(x->type.dt, inner->out[0]->type.dt))
		return 0;
	if (x->type.dt == n->out[0]->type.dt && canon_forward(k, n, x))
		return 1;
	b = canon_builder(k, n);	/* also when the cast ends a graph result */
	ir_b_str(&b, "to", dtype_name(n->out[0]->type.dt));
	return canon_adopt(k, n, ir_b1(&b, OP_CAST, x));
}
