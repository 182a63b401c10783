/*
 * onnx_shape.c — importers of the shape ops: Shape, Size, Gather, Concat,
 * Slice, Expand, Tile, Range, ConstantOfShape, Split, Transpose, Where
 * (the Reshape family is in onnx_reshape.c).
 *
 * Each first folds over what is known (onnx_fold.c).  A result known
 * entirely stays lazy (a const appears only if something needs the
 * tensor); a shape operand known up to symbolic dims becomes an attribute
 * (reshape %x, shape=[batch*seq,32]).  Only what truly depends on data keeps
 * an operand (reshape %x, %s), with as much of the result type filled in as
 * is known.
 *
 *	%s = Shape(x)  %d = Gather(%s, 0)  %c = Concat(%d, [-1])  Reshape(y, %c)
 *		=>	%r = reshape %y, shape=[batch,64]
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* --- Shape, Size --------------------------------------------------------- */

int
imp_shape(ONode *n)
{
	const Type *t = ox_tin(n, 0);
	int64_t r = t->rank, s = ox_attr_i(n, "start", 0), e = ox_attr_i(n, "end", r), len;
	Known *all = ox_known_shape_of(n->c, t), *k;

	s = s < 0 ? MAX(0, s + r) : MIN(s, r);
	e = e < 0 ? MAX(0, e + r) : MIN(e, r);
	len = MAX(0, e - s);
	k = ox_known_new(n->c, DT_I64, 1, &len);
	for (int64_t i = 0; i < len; i++)
		k->iv[i] = all->iv[s + i];
	if (ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	if (s != 0)
		ir_b_int(n->b, "start", s);
	if (e != r)
		ir_b_int(n->b, "end", e);
	return ox_done(n, 0, k, ir_b1(n->b, OP_SHAPE, ox_in(n, 0)));
}

int
imp_size(ONode *n)
{
	const Type *t = ox_tin(n, 0);
	SInt s = ox_dim_prod(n->c->m, t, 0, t->rank);
	Known *k = ox_known_new(n->c, DT_I64, 0, NULL);

	k->iv[0] = s;
	if (s.kind == SI_NUM) {
		ox_set_known(n, 0, k);
		return 0;
	}
	return ox_done(n, 0, s.kind == SI_DIM ? k : NULL, ir_b1(n->b, OP_SIZE, ox_in(n, 0)));
}

/* --- Gather -------------------------------------------------------------- */

static Known *
fold_gather(ONode *n, const Known *x, const Known *ix, int axis)
{
	int64_t dims[MAXRANK], outer = 1, inner = 1, nidx, d;
	int r = 0;
	Known *k;

	if (!x || !ix || !ox_known_static(ix) || !ix->iv || x->rank - 1 + ix->rank > MAXRANK)
		return NULL;
	for (int i = 0; i < axis; i++)
		outer *= dims[r++] = x->dim[i];
	for (int i = 0; i < ix->rank; i++)
		dims[r++] = ix->dim[i];
	for (int i = axis + 1; i < x->rank; i++)
		inner *= dims[r++] = x->dim[i];
	nidx = ix->n;
	d = x->dim[axis];
	if (outer * nidx * inner > OX_KNOWN_MAX)
		return NULL;
	k = ox_known_new(n->c, x->dt, r, dims);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < nidx; j++) {
			int64_t id = ix->iv[j].v;
			if (id < 0)
				id += d;
			if (id < 0 || id >= d) {
				ox_err(n, "index %lld is out of range for a dim of %lld",
				       (long long)ix->iv[j].v, (long long)d);
				return NULL;
			}
			for (int64_t i = 0; i < inner; i++) {
				int64_t dst = (o * nidx + j) * inner + i, src = (o * d + id) * inner + i;
				if (k->fv)
					k->fv[dst] = x->fv[src];
				else
					k->iv[dst] = x->iv[src];
			}
		}
	return k;
}

/*
 * Indices known at import (a constant or an initializer) must lie in
 * [-d, d-1] for a static dim d, as ONNX requires: the kernels clamp, the
 * interpreter refuses, so an out-of-range one is refused here, once.
 */
static int
check_indices(ONode *n, int axis)
{
	Dim d = ox_tin(n, 0)->dim[axis];
	const Known *k = ox_kin(n, 1);
	const Value *v = n->in[1]->v;
	const Weight *w = v && v->kind == V_WEIGHT ? v->weight : NULL;
	int64_t len = k ? k->n : w && w->data ? ir_type_numel(&v->type) : 0;
	DType dt = k ? k->dt : w ? v->type.dt : DT_I64;

	if (d < 0 || (k && !k->iv) || !dtype_is_int(dt))
		return 0;
	for (int64_t j = 0; j < len; j++) {
		int64_t id;
		if (k && k->iv[j].kind != SI_NUM)
			continue;
		id = k ? k->iv[j].v : dtype_load_int(dt, w->data, (size_t)j);
		if (id < -d || id >= d)
			return ox_err(n, "index %lld (element %lld of '%s') is out of range for "
				      "dim %d of size %lld", (long long)id, (long long)j,
				      n->np->input[1], axis, (long long)d);
	}
	return 0;
}

int
imp_gather(ONode *n)
{
	int64_t axis;
	int nerr = n->c->d->nerror;
	Known *k;

	if (ox_axis(n, ox_attr_i(n, "axis", 0), ox_tin(n, 0)->rank, &axis) ||
	    check_indices(n, (int)axis))
		return -1;
	k = fold_gather(n, ox_kor(n, 0), ox_kin(n, 1), (int)axis);
	if (n->c->d->nerror != nerr)
		return -1;
	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	ir_b_int(n->b, "axis", axis);
	return ox_done(n, 0, k, ir_b2(n->b, OP_GATHER, ox_in(n, 0), ox_in(n, 1)));
}

/* --- Concat -------------------------------------------------------------- */

static Known *
fold_concat(ONode *n, int axis)
{
	Known *in[64], *k;
	int64_t dims[MAXRANK], outer = 1, inner = 1, at = 0;

	if (n->nin < 1 || n->nin > 64)
		return NULL;
	for (int i = 0; i < n->nin; i++)
		if (!(in[i] = ox_kor(n, i)) || in[i]->rank != in[0]->rank || in[i]->dt != in[0]->dt)
			return NULL;
	memcpy(dims, in[0]->dim, sizeof dims);
	dims[axis] = 0;
	for (int i = 0; i < n->nin; i++)
		dims[axis] += in[i]->dim[axis];
	for (int i = 0; i < axis; i++)
		outer *= dims[i];
	for (int i = axis + 1; i < in[0]->rank; i++)
		inner *= dims[i];
	if (outer * dims[axis] * inner > OX_KNOWN_MAX)
		return NULL;
	k = ox_known_new(n->c, in[0]->dt, in[0]->rank, dims);
	for (int64_t o = 0; o < outer; o++)
		for (int i = 0; i < n->nin; i++) {
			int64_t cnt = in[i]->dim[axis] * inner;
			for (int64_t j = 0; j < cnt; j++, at++) {
				if (k->fv)
					k->fv[at] = in[i]->fv[o * cnt + j];
				else
					k->iv[at] = in[i]->iv[o * cnt + j];
			}
		}
	return k;
}

int
imp_concat(ONode *n)
{
	int64_t axis;
	Value **in;
	Node *r;
	Known *k;

	if (n->nin < 1 || !n->in[0])
		return ox_err(n, "needs inputs");
	for (int i = 0; i < n->nin; i++)
		if (!n->in[i])
			return ox_err(n, "input %d is missing", i);
	if (ox_axis(n, ox_attr_i(n, "axis", 0), ox_tin(n, 0)->rank, &axis))
		return -1;
	k = fold_concat(n, (int)axis);
	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	if (n->nin == 1) {
		ox_alias(n, 0, n->in[0]);
		return 0;
	}
	in = arena_array(n->c->tmp, Value *, n->nin);
	for (int i = 0; i < n->nin; i++)
		in[i] = ox_in(n, i);
	ir_b_int(n->b, "axis", axis);
	r = ir_b_node(n->b, OP_CONCAT, in, n->nin, 1);
	return ox_done(n, 0, k, r ? r->out[0] : NULL);
}

/* --- Slice --------------------------------------------------------------- */

static Known *
fold_slice(ONode *n, const Known *x, const int64_t *first, const int64_t *cnt,
	   const int64_t *step)
{
	int64_t total = 1, stride[MAXRANK];
	Known *k;

	if (!x)
		return NULL;
	for (int i = x->rank - 1, s = 1; i >= 0; s *= (int)x->dim[i], i--)
		stride[i] = s;
	for (int i = 0; i < x->rank; i++)
		total *= cnt[i];
	k = ox_known_new(n->c, x->dt, x->rank, cnt);
	for (int64_t o = 0; o < total; o++) {
		int64_t rem = o, src = 0;
		for (int i = x->rank - 1; i >= 0; i--) {
			int64_t ci = rem % cnt[i];
			rem /= cnt[i];
			src += (first[i] + ci * step[i]) * stride[i];
		}
		if (k->fv)
			k->fv[o] = x->fv[src];
		else
			k->iv[o] = x->iv[src];
	}
	return k;
}

static int
slice_static(ONode *n, const int64_t *st, const int64_t *en, const int64_t *ax,
	     const int64_t *sp, int ns)
{
	const Type *t = ox_tin(n, 0);
	int64_t first[MAXRANK], cnt[MAXRANK], step[MAXRANK];
	int noop = 1, allstatic = ir_type_static(t);
	Known *k = NULL;

	for (int i = 0; i < t->rank; i++)
		first[i] = 0, cnt[i] = t->dim[i], step[i] = 1;
	for (int i = 0; i < ns; i++) {
		int64_t a = ax[i], d = t->dim[a];
		if (sp[i] == 0)
			return ox_err(n, "step is 0");
		step[a] = sp[i];
		if (d >= 0)
			ir_slice_range(d, st[i], en[i], sp[i], &first[a], &cnt[a]);
		noop &= d >= 0 ? (cnt[a] == d && sp[i] == 1)
			       : (st[i] == 0 && en[i] >= INT32_MAX && sp[i] == 1);
	}
	if (noop) {
		ox_alias(n, 0, n->in[0]);
		return 0;
	}
	if (allstatic)
		k = fold_slice(n, ox_kin(n, 0), first, cnt, step);
	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	ir_b_ints(n->b, "starts", st, ns);
	ir_b_ints(n->b, "ends", en, ns);
	ir_b_ints(n->b, "axes", ax, ns);
	for (int i = 0; i < ns; i++)
		if (sp[i] != 1) {
			ir_b_ints(n->b, "steps", sp, ns);
			break;
		}
	return ox_done(n, 0, k, ir_b1(n->b, OP_SLICE, ox_in(n, 0)));
}

/* Bounds known only at run time: the operand form, dims outside the
 * sliced axes kept. */
static int
slice_dynamic(ONode *n, const int64_t *ax, int na)
{
	Value *in[5];
	Node *r;
	int nin = 3;

	for (int i = 0; i < 5; i++)
		in[i] = ox_in(n, i);
	if (in[4])
		nin = 5;
	else if (in[3])
		nin = 4;
	if (!(r = ir_b_node(n->b, OP_SLICE, in, nin, 1)))
		return -1;
	if (na >= 0) {
		int cut[MAXRANK] = {0};
		for (int i = 0; i < na; i++)
			cut[ax[i]] = 1;
		for (int i = 0; i < r->out[0]->type.rank; i++)
			if (!cut[i])
				r->out[0]->type.dim[i] = ox_tin(n, 0)->dim[i];
	}
	return ox_set(n, 0, r->out[0]);
}

int
imp_slice(ONode *n)
{
	int64_t st[MAXRANK], en[MAXRANK], ax[MAXRANK], sp[MAXRANK];
	int rank = ox_tin(n, 0)->rank, ns, ne, na, nsp;

	if (!ox_has(n, 1) || !ox_has(n, 2))
		return ox_err(n, "needs starts and ends");
	ns = ox_known_ints(ox_kin(n, 1), st, MAXRANK);
	ne = ox_known_ints(ox_kin(n, 2), en, MAXRANK);
	na = ox_has(n, 3) ? ox_known_ints(ox_kin(n, 3), ax, MAXRANK) : -2;
	nsp = ox_has(n, 4) ? ox_known_ints(ox_kin(n, 4), sp, MAXRANK) : -2;
	if (na == -2)
		for (int i = 0; i < MAXRANK; i++)
			ax[i] = i;
	for (int i = 0; i < na; i++)
		if (ox_axis(n, ax[i], rank, &ax[i]))
			return -1;
	if (nsp == -2)
		for (int i = 0; i < MAXRANK; i++)
			sp[i] = 1;
	if (ns < 0 || ne < 0 || na == -1 || nsp == -1)
		return slice_dynamic(n, ax, na >= 0 ? na : -1);
	if (ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns) || ns > rank)
		return ox_err(n, "starts, ends, axes and steps have different lengths");
	for (int i = 0; i < ns; i++)
		for (int j = 0; j < i; j++)
			if (ax[i] == ax[j])
				return ox_err(n, "axis %lld repeats", (long long)ax[i]);
	return slice_static(n, st, en, ax, sp, ns);
}

/* --- Expand, Tile -------------------------------------------------------- */

int
imp_expand(ONode *n)
{
	const Type *t = ox_tin(n, 0);
	const Known *sk = ox_kor(n, 1);
	Dim dims[MAXRANK];
	int r;
	Known *k = NULL;
	Value *v;

	if (!sk || sk->rank != 1 || sk->n > MAXRANK)
		return ox_err(n, "the shape must be a 1-D tensor of static length <= %d", MAXRANK);
	r = ox_known_dims(n->c, sk, dims, MAXRANK);
	if (r >= 0 && ox_dims_ok(n, r, dims))
		return -1;
	if (r >= 0) {
		Type s = ir_type(t->dt, r, dims), out;
		int64_t sd[MAXRANK];
		if (ox_kin(n, 0) && ox_known_ints(sk, sd, MAXRANK) >= 0)
			k = ox_known_expand(n->c, ox_kin(n, 0), r, sd);
		if (k && ox_known_static(k)) {
			ox_set_known(n, 0, k);
			return 0;
		}
		if (ir_broadcast(n->c->m, t, &s, &out) == 0 && ox_same_dims(t, out.rank, out.dim)) {
			ox_alias(n, 0, n->in[0]);
			return 0;
		}
		ir_b_dims(n->b, "shape", dims, r);
		return ox_done(n, 0, k, ir_b1(n->b, OP_EXPAND, ox_in(n, 0)));
	}
	v = ir_b2(n->b, OP_EXPAND, ox_in(n, 0), ox_in(n, 1));
	if (v)	/* known elements > 1 fix the result dim */
		for (int j = 0; j < (int)sk->n; j++) {
			SInt s = sk->iv[j];
			int xi = j - ((int)sk->n - t->rank);
			if (s.kind == SI_NUM && s.v > 1)
				v->type.dim[v->type.rank - (int)sk->n + j] = s.v;
			else if (s.kind == SI_NUM && s.v == 1 && xi >= 0)
				v->type.dim[v->type.rank - (int)sk->n + j] = t->dim[xi];
		}
	return ox_set(n, 0, v);	/* which refuses more than 2^48 elements */
}

int
imp_tile(ONode *n)
{
	int64_t rep[MAXRANK];
	int nr = ox_known_ints(ox_kin(n, 1), rep, MAXRANK);

	if (nr >= 0) {
		const Type *t = ox_tin(n, 0);
		Dim d[MAXRANK];
		for (int i = 0; i < nr && i < t->rank; i++) {
			if (rep[i] < 0 || rep[i] >> 40)
				return ox_err(n, "repeat %lld is out of range", (long long)rep[i]);
			d[i] = t->dim[i] >= 0 ? ir_dim_mul(n->c->m, t->dim[i], rep[i]) : rep[i];
		}
		if (ox_dims_ok(n, MIN(nr, t->rank), d))
			return -1;
		ir_b_ints(n->b, "repeats", rep, nr);
		return ox_set(n, 0, ir_b1(n->b, OP_TILE, ox_in(n, 0)));
	}
	return ox_set(n, 0, ir_b2(n->b, OP_TILE, ox_in(n, 0), ox_in(n, 1)));
}

/* --- Range, ConstantOfShape ---------------------------------------------- */

static int
scalar_of(const Known *k, double *f, SInt *s)
{
	if (!k || k->n != 1)
		return -1;
	if (k->fv)
		*f = k->fv[0];
	else {
		*s = k->iv[0];
		*f = (double)s->v;
	}
	return 0;
}

int
imp_range(ONode *n)
{
	const Known *ks = ox_kin(n, 0), *kl = ox_kin(n, 1), *kd = ox_kin(n, 2);
	double fs, fl, fd;
	SInt s = {0, SI_UNK}, l = {0, SI_UNK}, d = {0, SI_UNK};
	Value *in[3] = {ox_in(n, 0), ox_in(n, 1), ox_in(n, 2)};
	Node *r;
	int known = scalar_of(ks, &fs, &s) == 0 && scalar_of(kl, &fl, &l) == 0 &&
		    scalar_of(kd, &fd, &d) == 0;
	DType dt = ox_tin(n, 0)->dt;

	if (!(r = ir_b_node(n->b, OP_RANGE, in, 3, 1)))
		return -1;
	if (known && ox_known_static(ks) && ox_known_static(kl) && ox_known_static(kd) && fd != 0) {
		double c = ceil((fl - fs) / fd);
		int64_t cnt = !dtype_is_float(dt) ? ir_range_len(s.v, l.v, d.v)
			      : c > 0 ? (c < 1e18 ? (int64_t)c : INT64_MAX) : 0;
		Known *k;
		if (cnt >> 48)
			return ox_err(n, "the range would have more than 2^48 elements");
		r->out[0]->type.dim[0] = cnt;
		if (cnt <= (dtype_is_float(dt) ? OX_KNOWN_FMAX : OX_KNOWN_MAX)) {
			k = ox_known_new(n->c, dt, 1, &cnt);
			for (int64_t i = 0; i < cnt; i++) {
				if (k->fv) {
					unsigned char b[8];
					dtype_store(dt, b, 0, fs + (double)i * fd);
					k->fv[i] = dtype_load(dt, b, 0);
				} else
					k->iv[i] = (SInt){(int64_t)((uint64_t)s.v +	/* wraps, as int64 math */
								  (uint64_t)i * (uint64_t)d.v),
							  SI_NUM};
			}
			ox_set_known(n, 0, k);
			return 0;
		}
	} else if (known && s.kind == SI_NUM && s.v == 0 && d.kind == SI_NUM && d.v == 1 &&
		   l.kind == SI_DIM) {
		r->out[0]->type.dim[0] = l.v;
	}
	return ox_set(n, 0, r->out[0]);
}

static int
known_small(int rank, const Dim *dims, int isfloat)
{
	int64_t p = 1;

	for (int i = 0; i < rank; i++)
		if ((p *= dims[i]) > OX_KNOWN_MAX)
			return 0;
	return p <= (isfloat ? OX_KNOWN_FMAX : OX_KNOWN_MAX);
}

/* ConstantOfShape's value attribute: type and the one element. */
static int
cos_value(ONode *n, DType *dt, double *v)
{
	const Onnx__AttributeProto *a = ox_attr(n, "value");
	Type ty;
	void *data;
	size_t size;

	*dt = DT_F32;
	*v = 0;
	if (!a)
		return 0;
	if (!a->t)
		return ox_err(n, "value must be a tensor");
	if (ox_tensor_type(n->c, a->t, n->loc, &ty) ||
	    ox_tensor_data(n->c, a->t, n->loc, &ty, &data, &size))
		return -1;
	if (ir_type_numel(&ty) != 1) {
		free(data);
		return ox_err(n, "value must hold one element");
	}
	*dt = ty.dt;
	*v = dtype_load(ty.dt, data, 0);
	free(data);
	return 0;
}

int
imp_constant_of_shape(ONode *n)
{
	const Known *sk = ox_kor(n, 0);
	Dim dims[MAXRANK];
	DType dt;
	double v;
	int r;
	Value *out;

	if (cos_value(n, &dt, &v))
		return -1;
	if (!sk || sk->rank != 1 || sk->n > MAXRANK)
		return ox_err(n, "the shape must be a 1-D tensor of static length <= %d", MAXRANK);
	r = ox_known_dims(n->c, sk, dims, MAXRANK);
	if (r >= 0 && ox_dims_ok(n, r, dims))
		return -1;
	if (r >= 0 && ox_known_static(sk) && known_small(r, dims, dtype_is_float(dt))) {
		Known *k = ox_known_new(n->c, dt, r, dims);
		for (int64_t i = 0; i < k->n; i++) {
			if (k->fv)
				k->fv[i] = v;
			else
				k->iv[i] = (SInt){(int64_t)v, SI_NUM};
		}
		ox_set_known(n, 0, k);
		return 0;
	}
	if (dtype_is_float(dt))
		ir_b_float(n->b, "value", v);
	else
		ir_b_int(n->b, "value", (int64_t)v);
	ir_b_str(n->b, "to", dtype_name(dt));
	if (r >= 0) {
		ir_b_dims(n->b, "shape", dims, r);
		Node *nd = ir_b_node(n->b, OP_CONSTANT_OF_SHAPE, NULL, 0, 1);
		return ox_set(n, 0, nd ? nd->out[0] : NULL);
	}
	out = ir_b1(n->b, OP_CONSTANT_OF_SHAPE, ox_in(n, 0));
	if (out)
		for (int i = 0; i < (int)sk->n; i++)
			if (sk->iv[i].kind == SI_DIM || (sk->iv[i].kind == SI_NUM && sk->iv[i].v >= 0))
				out->type.dim[i] = sk->iv[i].v;
	return ox_set(n, 0, out);
}

/* --- Split, Transpose, Where --------------------------------------------- */

/* Sizes computed from data (JetMoE's rows per expert, by dynamo): output i
 * is slice(x, c_0+..+c_{i-1}, c_0+..+c_i) along the axis, the running sum
 * of the sizes, as DeepSeek-V2's TorchScript export writes the same cut.
 * k <= 64 pieces, into out[]. */
int
ox_split_by_data(ONode *n, Value *x, Value *sz, int64_t axis, int k, Value **out)
{
	Builder *b = n->b;
	int64_t zero = 0, one = 1, ones[64];
	Value *in[5] = {x, ir_b_const_i(b, DT_I64, &zero, 1, 1), NULL, ir_b_const_i(b, DT_I64, &axis, 1, 1),
			ir_b_const_i(b, DT_I64, &one, 1, 1)};
	Node *parts;

	if (sz->type.dt != DT_I64) {
		ir_b_str(b, "to", "i64");
		sz = ir_b1(b, OP_CAST, sz);
	}
	for (int i = 0; i < k; i++)
		ones[i] = 1;
	ir_b_int(b, "axis", 0);
	ir_b_ints(b, "sizes", ones, k);
	if (!sz || !in[1] || !in[3] || !in[4] || !(parts = ir_b_node(b, OP_SPLIT, &sz, 1, k)))
		return -1;
	for (int i = 0; i < k; i++) {
		Node *r;
		in[2] = i ? ir_b2(b, OP_ADD, in[1], parts->out[i]) : parts->out[0];
		if (!in[2] || !(r = ir_b_node(b, OP_SLICE, in, 5, 1)))
			return -1;
		out[i] = r->out[0];
		in[1] = in[2];
	}
	return 0;
}

int
imp_split(ONode *n)
{
	const Type *t = ox_tin(n, 0);
	int64_t axis, sizes[64], d;
	int ns = -1, k = n->nout;
	Value *x = ox_in(n, 0), *parts[64];
	Node *r;

	if (ox_axis(n, ox_attr_i(n, "axis", 0), t->rank, &axis))
		return -1;
	if (k < 1 || k > 64)
		return ox_err(n, "%d outputs: 1 to 64 are supported", k);
	d = t->dim[axis];
	if (ox_has(n, 1)) {
		ns = ox_known_ints(ox_kin(n, 1), sizes, 64);
		if (ns < 0 && ox_tin(n, 1)->rank == 1 && ox_tin(n, 1)->dim[0] == k &&
		    !dtype_is_float(ox_tin(n, 1)->dt)) {
			if (ox_split_by_data(n, x, ox_in(n, 1), axis, k, parts))
				return -1;
			for (int i = 0; i < k; i++)
				ox_set(n, i, parts[i]);
			return 0;
		}
		if (ns < 0)
			return ox_err(n, "split sizes must be a constant (or a computed [%d] vector)", k);
		if (ns != k)
			return ox_err(n, "%d split sizes for %d outputs", ns, k);
		for (int i = 0; i < ns; i++)
			if (sizes[i] < 0)
				return ox_err(n, "split size %lld is negative", (long long)sizes[i]);
	} else if (n->opset >= 18 && ox_attr(n, "num_outputs")) {
		if (ox_attr_i(n, "num_outputs", 0) != k)
			return ox_err(n, "num_outputs=%lld but the node has %d outputs",
				      (long long)ox_attr_i(n, "num_outputs", 0), k);
		if (d >= 0 && d % k) {	/* the last chunk is smaller */
			int64_t chunk = (d + k - 1) / k;
			for (int i = 0; i < k; i++)
				sizes[i] = MAX(0, MIN(chunk, d - i * chunk));
			ns = k;
		}
	}
	ir_b_int(n->b, "axis", axis);
	if (ns >= 0)
		ir_b_ints(n->b, "sizes", sizes, ns);
	if (!(r = ir_b_node(n->b, OP_SPLIT, &x, 1, k)))
		return -1;
	for (int i = 0; i < k; i++)
		ox_set(n, i, r->out[i]);
	return 0;
}

int
imp_transpose(ONode *n)
{
	int64_t perm[MAXRANK];
	int np = ox_attr_ints(n, "perm", perm, MAXRANK);

	if (np > MAXRANK)
		return ox_err(n, "perm is too long");
	if (np >= 0)
		ir_b_ints(n->b, "perm", perm, np);
	return ox_set(n, 0, ir_b1(n->b, OP_TRANSPOSE, ox_in(n, 0)));
}

int
imp_where(ONode *n)
{
	Known *k = ox_fold_where(n->c, ox_kin(n, 0), ox_kor(n, 1), ox_kor(n, 2));
	Value *in[3];
	Node *r;

	if (k && ox_known_static(k)) {
		ox_set_known(n, 0, k);
		return 0;
	}
	for (int i = 0; i < 3; i++)
		in[i] = ox_in(n, i);
	r = ir_b_node(n->b, OP_WHERE, in, 3, 1);
	return ox_done(n, 0, k, r ? r->out[0] : NULL);
}
