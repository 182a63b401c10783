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

/* Every result of a split transposed by one perm: the transpose first, then
 * the split along the axis the transpose moved the split's axis to, as
 * exporters write it (onnxruntime's transpose optimizer pushes transposes
 * below splits: nonzero's token and position columns in the MoE loops).
 *
 *	%a, %b = split %x, axis=0             %t = transpose %x, perm=[1, 0]
 *	%ta = transpose %a, perm=[1, 0]  =>   %ta, %tb = split %t, axis=1
 *	%tb = transpose %b, perm=[1, 0]
 */
int
canon_split_transpose(Canon *k, Node *n)
{
	int64_t p[MAXRANK], q[MAXRANK], sizes[256];
	int r = -1, ns = ir_attr_ints(n, "sizes", sizes, (int)NELEM(sizes)), axis, to = -1;
	Node *tr[256], *s;
	Value *t;
	Builder b;

	if (n->nout > (int)NELEM(tr) || ns > (int)NELEM(sizes) ||
	    (ns < 0 && ir_attr(n, "sizes")))	/* symbolic sizes: left alone */
		return 0;
	for (int i = 0; i < n->nout; i++) {
		Value *o = n->out[i];
		if (o->nuse != 1 || !(tr[i] = o->use[0].node) || tr[i]->op != OP_TRANSPOSE ||
		    ir_is_graph_result(k->g, o))
			return 0;
		if (i == 0)
			r = perm_of(tr[0], p);
		else if (perm_of(tr[i], q) != r || memcmp(p, q, sizeof *p * (size_t)r))
			return 0;
	}
	axis = (int)ir_attr_int(n, "axis", 0);
	if (r <= 0 || (axis += axis < 0 ? r : 0) < 0 || axis >= r)
		return 0;
	for (int j = 0; j < r; j++)
		if (p[j] == axis)
			to = j;
	b = canon_builder(k, n);
	ir_b_ints(&b, "perm", p, r);
	t = ir_b1(&b, OP_TRANSPOSE, n->in[0]);
	ir_b_int(&b, "axis", to);
	if (ns > 0)
		ir_b_ints(&b, "sizes", sizes, ns);
	if (!t || !(s = ir_b_node(&b, OP_SPLIT, &t, 1, n->nout)))
		return 0;
	for (int i = 0; i < n->nout; i++)
		if (!type_like(s->out[i], tr[i]->out[0]))
			return 0;	/* the new nodes die in the sweep */
	for (int i = 0; i < n->nout; i++) {
		Value *old = tr[i]->out[0];
		ir_replace_uses(k->g, s->out[i], old);
		s->out[i] = old;
		old->def = s;
		old->resno = i;
		ir_erase(k->g, tr[i]);
	}
	return 1;
}

/* The first k of a topk along its axis are the topk of k: users route by a
 * sort or argsort over the experts (a topk with k = E), then [:, :k].
 * topk's results are always in its order (docs/ir.md: the value, then the
 * lower index), so the prefix is exact; fuse-moe then anchors on the topk
 * of k the route kernel runs (cse merges the values' and the indices' new
 * topks into one).
 *
 *	%v, %i = topk %p, axis=-1, k=4               %w, %i2 = topk %p, axis=-1, k=2
 *	%w = slice %v, axes=[1], ends=[2], starts=[0]   =>
 */
int
canon_topk_prefix(Canon *k, Node *n)
{
	Value *x = n->in[0];
	Node *tk = x->kind == V_RESULT ? x->def : NULL, *t2;
	int64_t st = -1, en = -1, ax = 0, sp = 1;
	IrTopkAttrs ta;
	Builder b;
	int a;

	if (!tk || tk->op != OP_TOPK || tk->nin != 1 || n->nin != 1 || ir_attr_ints(n, "starts", &st, 1) != 1 ||
	    ir_attr_ints(n, "ends", &en, 1) != 1 || (ir_attr(n, "axes") && ir_attr_ints(n, "axes", &ax, 1) != 1) ||
	    (ir_attr(n, "steps") && ir_attr_ints(n, "steps", &sp, 1) != 1))
		return 0;
	ir_topk_attrs(tk, &ta);
	a = (int)(ta.axis < 0 ? ta.axis + x->type.rank : ta.axis);
	ax += ax < 0 ? x->type.rank : 0;
	if (a < 0 || ax != a || st != 0 || sp != 1 || en < 1 || !ir_dim_is_static(x->type.dim[a]) ||
	    en >= x->type.dim[a])
		return 0;
	b = canon_builder(k, n);
	for (int i = 0; i < tk->nattr; i++)
		if (strcmp(tk->attr[i].key, "k") && b.npend < (int)NELEM(b.pend))
			b.pend[b.npend++] = tk->attr[i];
	ir_b_int(&b, "k", en);
	t2 = ir_b_node(&b, OP_TOPK, tk->in, 1, 2);
	return canon_adopt(k, n, t2 ? t2->out[x->resno] : NULL);
}

/* A topk of an exact widening cast selects what the topk of the narrow
 * values selects (the cast keeps order and ties): the topk first, the cast
 * of its values after.  onnxconverter-common's float16 conversion keeps
 * TopK in f32 between a cast up and a cast down (its op block list), which
 * hid a float16 model's router from fuse-moe.
 *
 *	%w = cast %x, to=f32                   %v16, %i = topk %x, k=
 *	%v, %i = topk %w, k=          =>       %v = cast %v16, to=f32
 */
int
canon_topk_cast(Canon *k, Node *n)
{
	Node *c = def_op(n->in[0], OP_CAST), *t2;
	Value *x, *v;
	Builder b;

	if (!c || n->nin != 1 || !dtype_is_float((x = c->in[0])->type.dt) ||
	    !dtype_is_float(n->in[0]->type.dt) || !exact_cast(x->type.dt, n->in[0]->type.dt) ||
	    x->type.dt == n->in[0]->type.dt || ir_is_graph_result(k->g, n->out[0]) ||
	    ir_is_graph_result(k->g, n->out[1]))
		return 0;
	b = canon_builder(k, n);
	for (int i = 0; i < n->nattr && b.npend < (int)NELEM(b.pend); i++)
		b.pend[b.npend++] = n->attr[i];
	if (!(t2 = ir_b_node(&b, OP_TOPK, &x, 1, 2)))
		return 0;
	ir_b_str(&b, "to", dtype_name(n->out[0]->type.dt));
	if (!(v = ir_b1(&b, OP_CAST, t2->out[0])))
		return 0;
	ir_replace_uses(k->g, n->out[0], v);
	ir_replace_uses(k->g, n->out[1], t2->out[1]);
	ir_erase(k->g, n);
	return 1;
}

/* Whether v is a weight, or gathers and transposes of one. */
static int
weight_rooted(const Value *v)
{
	while (v->kind == V_RESULT && (v->def->op == OP_GATHER || v->def->op == OP_TRANSPOSE))
		v = v->def->in[0];
	return v->kind == V_WEIGHT;
}

/* A per-tensor dequantize of a gather or transpose of quantised weights is
 * the gather or transpose of the dequantised weights (it maps element by
 * element): the dequantize moves up to the weight, where fold or the GEMM
 * reads it, and the expert weights show again.  onnxruntime's
 * quantize_dynamic quantises the 3-D expert weights that a TorchScript
 * export's eager experts Gather (its Gather quantizer): fuse-moe found "expert
 * weights not found".
 *
 *	%g = gather $wq, %id, axis=0            %d = dequantize $wq, %s, %z
 *	%w = dequantize %g, %s, %z        =>    %w = gather %d, %id, axis=0
 */
int
canon_dequant_up(Canon *k, Node *n)
{
	Node *m = n->in[0]->kind == V_RESULT ? n->in[0]->def : NULL, *d, *r;
	Value *in[3];
	Builder b;

	if (!m || (m->op != OP_GATHER && m->op != OP_TRANSPOSE) || n->in[0]->nuse != 1 ||
	    !weight_rooted(m->in[0]) || n->in[1]->type.rank != 0 || (n->nin > 2 && n->in[2] && n->in[2]->type.rank != 0) ||
	    ir_attr(n, "block_size"))
		return 0;
	b = canon_builder(k, n);
	for (int i = 0; i < n->nattr && b.npend < (int)NELEM(b.pend); i++)
		if (strcmp(n->attr[i].key, "axis"))
			b.pend[b.npend++] = n->attr[i];
	in[0] = m->in[0], in[1] = n->in[1], in[2] = n->nin > 2 ? n->in[2] : NULL;
	if (!(d = ir_b_node(&b, OP_DEQUANTIZE, in, in[2] ? 3 : 2, 1)))
		return 0;
	for (int i = 0; i < m->nattr && b.npend < (int)NELEM(b.pend); i++)
		b.pend[b.npend++] = m->attr[i];
	in[0] = d->out[0];
	for (int i = 1; i < m->nin; i++)
		in[i] = m->in[i];
	if (!(r = ir_b_node(&b, m->op, in, m->nin, 1)))
		return 0;
	return canon_adopt(k, n, r->out[0]);
}
