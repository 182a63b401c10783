/*
 * pred.c — facts about values and nodes that passes and codegen share,
 * each with one meaning and one limit.
 *
 *	%w2 = transpose $w          ir_weight_only(%w2) = 1: fold can make it a weight
 *	%y = reshape %x             ir_is_view(%y's node) = 1: no data moves
 */
#include "ir.h"

/*
 * Bounded, since graphs come from strangers: a chain of a million nodes
 * would overflow the stack, and a ladder of diamonds has 2^n paths.  Past
 * IR_WEIGHT_ONLY_VISITS values the answer is "no", which at worst keeps
 * weight preparation in the kernels that run every time (docs/limits.md).
 */
static int
weight_only(const Value *v, int *budget)
{
	const Node *n;

	if (!v || v->kind == V_WEIGHT)
		return 1;
	if (v->kind != V_RESULT || --*budget < 0)
		return 0;
	n = v->def;
	if (n->op == OP_CALL || ir_opinfo[n->op].flags & OPF_DYNSHAPE)
		return 0;
	if (!ir_type_static(&v->type))
		return 0;	/* sized by T (constant_of_shape [T,H]): made every run */
	for (int i = 0; i < n->nin; i++)
		if (!weight_only(n->in[i], budget))
			return 0;
	return 1;
}

int
ir_weight_only(const Value *v)
{
	int budget = IR_WEIGHT_ONLY_VISITS;

	return weight_only(v, &budget);
}

int
ir_is_view(const Node *n)
{
	return n->op == OP_RESHAPE && n->nin == 1;
}

int
ir_axis(int64_t a, int rank)
{
	if (a < 0)
		a += rank;
	return a >= 0 && a < rank ? (int)a : -1;
}
