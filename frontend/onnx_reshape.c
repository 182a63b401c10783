/*
 * onnx_reshape.c — Reshape, Flatten, Squeeze and Unsqueeze, which all
 * become the IR's reshape.  The target is resolved against the input (0
 * copies a dim, -1 or one unknown element is inferred from the element
 * count, symbolically when need be):
 *
 *	Reshape(x[batch,seq,64], [-1, 64])	=>  reshape %x, shape=[batch*seq, 64]
 *	Squeeze(x[?,1,4], [1]) (? from NonZero)	=>  reshape %x, %c  with %c = [-1, 4]
 *
 * Only when dims known at run time sit where 0 and -1 cannot say them is
 * the shape built from `shape %x` by gather and concat.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

int
ox_same_dims(const Type *t, int rank, const Dim *dims)
{
	if (t->rank != rank)
		return 0;
	for (int i = 0; i < rank; i++)
		if (t->dim[i] != dims[i])
			return 0;
	return 1;
}

static int
has_unknown(Module *m, int rank, const Dim *dims)
{
	for (int i = 0; i < rank; i++)
		if (ir_dim_has_unknown(m, dims[i]))
			return 1;
	return 0;
}

/*
 * A constant shape operand when ONNX's Reshape rules can say it: static
 * dims as numbers, a dim equal to x's at the same position as 0 (copy),
 * and at most one other as -1.  NULL if the dims have another form.
 */
static Value *
reshape_const(ONode *n, Value *x, int rank, const Dim *dims)
{
	int64_t s[MAXRANK];
	int infer = 0;

	for (int i = 0; i < rank; i++) {
		if (i < x->type.rank && dims[i] == x->type.dim[i] && dims[i] != 0)
			s[i] = 0;
		else if (dims[i] > 0)
			s[i] = dims[i];
		else if (dims[i] < 0 && !infer++)
			s[i] = -1;
		else
			return NULL;
	}
	Value *v = ir_b2(n->b, OP_RESHAPE, x, ox_consti(n->b, s, rank));
	if (v)
		v->type = ir_type(x->type.dt, rank, dims);
	return v;
}

/*
 * x reshaped to dims.  With no unknown dim it is `reshape shape=[...]`;
 * otherwise the shape is built at run time: element j is dim src[j] of x,
 * or a literal 1 where src[j] < 0 (Squeeze, Unsqueeze).
 */
static Value *
reshape_to(ONode *n, Value *x, int rank, const Dim *dims, const int64_t *src)
{
	Builder *b = n->b;
	Value *s, *one, *cat[2], *idx, *v;
	int64_t ix[MAXRANK], lit = 1;
	Node *r;

	if (!x)
		return NULL;
	if (!has_unknown(n->c->m, rank, dims)) {
		ir_b_dims(b, "shape", dims, rank);
		return ir_b1(b, OP_RESHAPE, x);
	}
	if ((v = reshape_const(n, x, rank, dims)) != NULL || b->err)
		return v;
	for (int i = 0; i < rank; i++)
		ix[i] = src[i] < 0 ? x->type.rank : src[i];
	s = ir_b1(b, OP_SHAPE, x);
	one = ox_consti(b, &lit, 1);
	cat[0] = s;
	cat[1] = one;
	ir_b_int(b, "axis", 0);
	r = s && one ? ir_b_node(b, OP_CONCAT, cat, 2, 1) : NULL;
	idx = ox_consti(b, ix, rank);
	ir_b_int(b, "axis", 0);
	s = r && idx ? ir_b2(b, OP_GATHER, r->out[0], idx) : NULL;
	v = s ? ir_b2(b, OP_RESHAPE, x, s) : NULL;
	if (v)
		v->type = ir_type(x->type.dt, rank, dims);
	return v;
}

/* Bind a reshaped result, carrying a known value along. */
static int
done_reshape(ONode *n, int rank, const Dim *dims, const int64_t *src)
{
	const Type *t = ox_tin(n, 0);
	const Known *xk = ox_kin(n, 0);
	Known *k = NULL;

	if (xk) {
		int64_t d[MAXRANK];
		int ok = 1;
		for (int i = 0; i < rank; i++)
			ok &= (d[i] = dims[i]) >= 0;
		if (ok)
			k = ox_known_reshape(n->c, xk, rank, d);
	}
	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	if (ox_same_dims(t, rank, dims)) {
		ox_alias(n, 0, n->in[0]);
		return 0;
	}
	return ox_done(n, 0, k, reshape_to(n, ox_in(n, 0), rank, dims, src));
}

/* Resolve Reshape's shape against x: 0 copies, -1 (or one unknown) infers. */
static int
reshape_dims(ONode *n, const Type *xt, const Known *sk, int allowzero, Dim *dims, int *nunk)
{
	Module *m = n->c->m;
	int infer = -1, unk = -1;
	SInt total = ox_dim_prod(m, xt, 0, xt->rank), rest = {1, SI_NUM};

	*nunk = 0;
	for (int j = 0; j < sk->n; j++) {
		SInt s = sk->iv[j];
		if (s.kind == SI_NUM && s.v == 0 && !allowzero) {
			if (j >= xt->rank)
				return ox_err(n, "shape[%d] = 0 copies a dim the input lacks", j);
			s = ox_si_dim(m, xt->dim[j]);
		} else if (s.kind == SI_NUM && s.v == -1) {
			if (infer >= 0)
				return ox_err(n, "shape has more than one -1");
			infer = j;
			continue;
		} else if (s.kind == SI_NUM && s.v < 0) {
			return ox_err(n, "shape[%d] = %lld", j, (long long)s.v);
		}
		if (s.kind == SI_UNK) {
			(*nunk)++;
			unk = j;
			dims[j] = ir_dim_unknown(m);
			continue;
		}
		dims[j] = s.v;
		if (s.kind == SI_NUM && rest.kind == SI_NUM) {
			if (__builtin_mul_overflow(rest.v, s.v, &rest.v) || rest.v > IR_MAX_NUMEL)
				return ox_err(n, "the result would have more than 2^48 elements");
		} else if (rest.kind != SI_UNK) {
			rest = ox_si_dim(m, ir_dim_mul(m, rest.v, s.v));
		}
	}
	if (infer >= 0) {
		dims[infer] = ir_dim_unknown(m);
		(*nunk)++;
		unk = infer;
	}
	if (*nunk == 1) {
		SInt q = ox_si_div(m, total, rest);
		if (total.kind == SI_NUM && rest.kind == SI_NUM && rest.v && total.v % rest.v)
			return ox_err(n, "cannot reshape %lld elements into a multiple of %lld",
				      (long long)total.v, (long long)rest.v);
		if (q.kind != SI_UNK) {
			dims[unk] = q.v;
			*nunk = 0;
		}
	}
	return 0;
}

int
imp_reshape(ONode *n)
{
	const Type *xt = ox_tin(n, 0);
	int allowzero = n->opset >= 14 && ox_attr_i(n, "allowzero", 0);
	const Known *sk = ox_kor(n, 1);
	Dim dims[MAXRANK];
	int nunk;
	Value *v;

	if (!sk || sk->rank != 1 || sk->n > MAXRANK)
		return ox_err(n, "the shape must be a 1-D tensor of static length <= %d", MAXRANK);
	if (reshape_dims(n, xt, sk, allowzero, dims, &nunk) || ox_dims_ok(n, (int)sk->n, dims))
		return -1;
	if (nunk == 0)
		return done_reshape(n, (int)sk->n, dims, NULL);
	if (allowzero)
		ir_b_int(n->b, "allowzero", 1);
	v = ir_b2(n->b, OP_RESHAPE, ox_in(n, 0), ox_in(n, 1));
	for (int i = 0; v && i < v->type.rank && i < (int)sk->n; i++)
		if (!ir_dim_has_unknown(n->c->m, dims[i]))
			v->type.dim[i] = dims[i];
	return ox_set(n, 0, v);
}

/* Product of x's dims [from, to) computed at run time: an i64[1]. */
static Value *
rt_prod(ONode *n, Value *x, int from, int to)
{
	Builder *b = n->b;
	Value *s = ir_b1(b, OP_SHAPE, x), *p = NULL;
	Dim one = 1;

	for (int i = from; i < to && s; i++) {
		int64_t ix = i;
		Value *g;
		ir_b_int(b, "axis", 0);
		g = ir_b2(b, OP_GATHER, s, ox_consti(b, &ix, 1));
		p = p ? ir_b2(b, OP_MUL, p, g) : g;
	}
	if (!p) {
		int64_t v = 1;
		return ox_consti(b, &v, 1);
	}
	ir_b_dims(b, "shape", &one, 1);
	return ir_b1(b, OP_RESHAPE, p);
}

int
imp_flatten(ONode *n)
{
	const Type *t = ox_tin(n, 0);
	int64_t axis = ox_attr_i(n, "axis", 1);
	SInt h, w;
	Dim dims[2];
	Value *parts[2], *s;
	Node *r;

	if (axis < -t->rank || axis > t->rank)
		return ox_err(n, "axis %lld is out of range for rank %d", (long long)axis, t->rank);
	if (axis < 0)
		axis += t->rank;
	h = ox_dim_prod(n->c->m, t, 0, (int)axis);
	w = ox_dim_prod(n->c->m, t, (int)axis, t->rank);
	if (h.kind != SI_UNK && w.kind != SI_UNK) {
		dims[0] = h.v;
		dims[1] = w.v;
		return done_reshape(n, 2, dims, NULL);
	}
	dims[0] = h.kind == SI_UNK ? ir_dim_unknown(n->c->m) : h.v;
	dims[1] = w.kind == SI_UNK ? ir_dim_unknown(n->c->m) : w.v;
	if ((s = reshape_const(n, ox_in(n, 0), 2, dims)) != NULL || n->b->err)
		return ox_set(n, 0, s);
	parts[0] = rt_prod(n, ox_in(n, 0), 0, (int)axis);
	parts[1] = rt_prod(n, ox_in(n, 0), (int)axis, t->rank);
	ir_b_int(n->b, "axis", 0);
	r = parts[0] && parts[1] ? ir_b_node(n->b, OP_CONCAT, parts, 2, 1) : NULL;
	s = r ? ir_b2(n->b, OP_RESHAPE, ox_in(n, 0), r->out[0]) : NULL;
	if (s) {
		if (h.kind != SI_UNK)
			s->type.dim[0] = h.v;
		if (w.kind != SI_UNK)
			s->type.dim[1] = w.v;
	}
	return ox_set(n, 0, s);
}

static int
axes_of(ONode *n, int i, int rank, int64_t *axes, int *na)
{
	*na = ox_known_ints(ox_kin(n, i), axes, MAXRANK);
	if (*na < 0)
		return ox_err(n, "axes must be a constant of at most %d values", MAXRANK);
	for (int j = 0; j < *na; j++)
		if (ox_axis(n, axes[j], rank, &axes[j]))
			return -1;
	for (int j = 0; j < *na; j++)
		for (int k = 0; k < j; k++)
			if (axes[j] == axes[k])
				return ox_err(n, "axis %lld repeats", (long long)axes[j]);
	return 0;
}

int
imp_squeeze(ONode *n)
{
	const Type *t = ox_tin(n, 0);
	int64_t axes[MAXRANK], src[MAXRANK];
	int na = 0, sq[MAXRANK] = {0}, r = 0;
	Dim dims[MAXRANK];

	if (ox_has(n, 1) && axes_of(n, 1, t->rank, axes, &na))
		return -1;
	if (!ox_has(n, 1))
		for (int i = 0; i < t->rank; i++)
			if (t->dim[i] == 1)
				axes[na++] = i;
	for (int j = 0; j < na; j++) {
		if (t->dim[axes[j]] >= 0 && t->dim[axes[j]] != 1)
			return ox_err(n, "cannot squeeze dim %lld of size %lld", (long long)axes[j],
				      (long long)t->dim[axes[j]]);
		sq[axes[j]] = 1;
	}
	for (int i = 0; i < t->rank; i++)
		if (!sq[i]) {
			src[r] = i;
			dims[r++] = t->dim[i];
		}
	return done_reshape(n, r, dims, src);
}

int
imp_unsqueeze(ONode *n)
{
	const Type *t = ox_tin(n, 0);
	int64_t axes[MAXRANK], src[MAXRANK];
	int na, r, nw[MAXRANK] = {0};
	Dim dims[MAXRANK];

	if (!ox_has(n, 1))
		return ox_err(n, "needs axes");
	na = ox_known_ints(ox_kin(n, 1), axes, MAXRANK);
	if (na < 0 || t->rank + na > MAXRANK)
		return ox_err(n, "axes must be a constant and the result rank at most %d", MAXRANK);
	r = t->rank + na;
	if (axes_of(n, 1, r, axes, &na))
		return -1;
	for (int j = 0; j < na; j++)
		nw[axes[j]] = 1;
	for (int i = 0, k = 0; i < r; i++) {
		src[i] = nw[i] ? -1 : k;
		dims[i] = nw[i] ? 1 : t->dim[k++];
	}
	return done_reshape(n, r, dims, src);
}
