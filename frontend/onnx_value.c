/*
 * onnx_value.c — the importer's values: the table from ONNX names to
 * records, graph input types (dim_param -> symbolic dims, a fresh named
 * symbol where a dim is missing), the check of each value against its
 * value_info (contradictions are errors; unknown dims take the declared
 * ones), and materialising values known at import as consts or weights.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* --- the value table: ONNX name -> OVal ---------------------------------- */

static size_t
slot(const Ctx *c, const char *name)
{
	/* mixed: FNV's low bits alone made long probe chains for the names of
	 * nested function calls, which differ only in their middles */
	size_t i = (size_t)mix64(hash_str(name)) & (c->captab - 1);

	while (c->tab[i] && strcmp(c->tab[i]->name, name) != 0)
		i = (i + 1) & (c->captab - 1);
	return i;
}

static void
grow_tab(Ctx *c)
{
	OVal **old = c->tab;
	size_t oldcap = c->captab;

	c->captab = oldcap ? 2 * oldcap : 256;
	c->tab = xcalloc(c->captab, sizeof *c->tab);
	for (size_t i = 0; i < oldcap; i++)
		if (old[i])
			c->tab[slot(c, old[i]->name)] = old[i];
	free(old);
}

static const char *
scoped(Ctx *c, const char *name)
{
	return c->prefix ? arena_printf(c->tmp, "%s%s", c->prefix, name) : name;
}

OVal *
ox_find(Ctx *c, const char *name)
{
	if (!c->captab)
		return NULL;
	return c->tab[slot(c, scoped(c, name))];
}

/* A new record for name; NULL (with no diagnostic) if it is already defined. */
OVal *
ox_define(Ctx *c, const char *name)
{
	OVal *o;
	size_t i;

	name = scoped(c, name);
	if (2 * (c->ntab + 1) > c->captab)
		grow_tab(c);
	i = slot(c, name);
	if (c->tab[i])
		return NULL;
	o = arena_alloc(c->tmp, sizeof *o);
	o->name = arena_strdup(c->tmp, name);
	c->tab[i] = o;
	c->ntab++;
	return o;
}

const Type *
ox_type(const OVal *o)
{
	return o->v ? &o->v->type : &o->type;
}

/* --- value_info ---------------------------------------------------------- */

static int
cmp_vinfo(const void *a, const void *b)
{
	const Onnx__ValueInfoProto *x = *(Onnx__ValueInfoProto *const *)a;
	const Onnx__ValueInfoProto *y = *(Onnx__ValueInfoProto *const *)b;

	return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

void
ox_index_vinfo(Ctx *c, const Onnx__GraphProto *gp)
{
	size_t n = gp->n_value_info + gp->n_output;

	c->vinfo = arena_array(c->tmp, Onnx__ValueInfoProto *, n ? n : 1);
	for (size_t i = 0; i < gp->n_value_info; i++)
		c->vinfo[c->nvinfo++] = gp->value_info[i];
	for (size_t i = 0; i < gp->n_output; i++)
		c->vinfo[c->nvinfo++] = gp->output[i];
	qsort(c->vinfo, c->nvinfo, sizeof *c->vinfo, cmp_vinfo);
}

static const Onnx__ValueInfoProto *
find_vinfo(const Ctx *c, const char *name)
{
	Onnx__ValueInfoProto key = {.name = (char *)name}, *kp = &key, **r;

	r = bsearch(&kp, c->vinfo, c->nvinfo, sizeof *c->vinfo, cmp_vinfo);
	return r ? *r : NULL;
}

/* --- symbolic dims ------------------------------------------------------- */

static int
find_atom(const Module *m, const char *name, size_t n)
{
	for (int i = 0; i < ir_natom(m); i++)
		if (strlen(ir_atom_name(m, i)) == n && memcmp(ir_atom_name(m, i), name, n) == 0)
			return i;
	return -1;
}

/*
 * A dim_param as a product of integers and names ("batch", "2*batch*seq"),
 * the form our dims have.  With existing_only, every name must already be
 * a symbol of the module.  -1 if it has another form.
 */
static int
parse_dim_param(Module *m, const char *s, int existing_only, Dim *out)
{
	Dim d = 1;

	for (;;) {
		while (*s == ' ')
			s++;
		const char *t = s;
		if (isdigit((unsigned char)*s)) {
			int64_t v = 0;
			for (; isdigit((unsigned char)*s); s++) {
				if (v > (INT64_MAX - 9) / 10)
					return -1;
				v = 10 * v + (*s - '0');
			}
			d = ir_dim_mul(m, d, v);
		} else if (isalpha((unsigned char)*s) || *s == '_') {
			while (isalnum((unsigned char)*s) || *s == '_')
				s++;
			if (existing_only && find_atom(m, t, (size_t)(s - t)) < 0)
				return -1;
			char name[128];
			if (s - t >= (long)sizeof name)
				return -1;
			memcpy(name, t, (size_t)(s - t));
			name[s - t] = 0;
			d = ir_dim_mul(m, d, ir_dim_sym(m, name));
		} else {
			return -1;
		}
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		if (*s++ != '*')
			return -1;
	}
	if (ir_dim_has_unknown(m, d))
		return -1;
	*out = d;
	return 0;
}

/* A symbol name the text IR can print: [A-Za-z_][A-Za-z0-9_]*. */
static Dim
named_dim(Module *m, const char *s)
{
	char buf[128];
	size_t k = 0;

	if (!isalpha((unsigned char)*s) && *s != '_')
		buf[k++] = 'd';
	for (; *s && k + 1 < sizeof buf; s++)
		buf[k++] = isalnum((unsigned char)*s) || *s == '_' ? *s : '_';
	buf[k] = 0;
	if (strcmp(buf, "inf") == 0 || strcmp(buf, "nan") == 0)
		buf[0] = 'N';
	return ir_dim_sym(m, buf);
}

/* --- types from TypeProto ------------------------------------------------ */

static int
tensor_typeproto(Ctx *c, const Onnx__TypeProto *tp, Loc l, const char *what,
		 const Onnx__TypeProto__Tensor **out)
{
	if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
		return ox_field_err(c, l, "%s is not a tensor (sequence, map, optional and sparse "
				 "values are not supported)", what);
	*out = tp->tensor_type;
	return 0;
}

static int
elem_dtype(Ctx *c, int code, Loc l, DType *dt)
{
	if (dtype_from_onnx(code, dt) != 0)
		return ox_field_err(c, l, "unsupported element type %d (%s)", code,
				 code == 8 ? "string" : code == 0 ? "undefined" : "no IR dtype");
	return 0;
}

/* A graph input's type: named dims from dim_param, fresh ones where missing. */
int
ox_input_type(Ctx *c, const Onnx__ValueInfoProto *vi, Loc l, Type *t)
{
	const Onnx__TypeProto__Tensor *tt = NULL;
	const Onnx__TensorShapeProto *sp;

	if (tensor_typeproto(c, vi->type, l, "graph input", &tt) ||
	    elem_dtype(c, tt->elem_type, l, &t->dt))
		return -1;
	sp = tt->shape;
	if (!sp)
		return ox_field_err(c, l, "graph input has no shape (unknown rank)");
	if (sp->n_dim > MAXRANK)
		return ox_field_err(c, l, "rank %zu exceeds %d", sp->n_dim, MAXRANK);
	t->rank = (int)sp->n_dim;
	for (int i = 0; i < t->rank; i++) {
		const Onnx__TensorShapeProto__Dimension *dp = sp->dim[i];
		if (dp->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
			if (dp->dim_value < 0 || dp->dim_value > ((int64_t)1 << 40))
				return ox_field_err(c, l, "dim %d is %lld", i, (long long)dp->dim_value);
			t->dim[i] = dp->dim_value;
		} else if (dp->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
			   dp->dim_param && *dp->dim_param) {
			if (parse_dim_param(c->m, dp->dim_param, 0, &t->dim[i]))
				t->dim[i] = named_dim(c->m, dp->dim_param);
		} else {
			char buf[200];
			snprintf(buf, sizeof buf, "%s_d%d", vi->name, i);
			t->dim[i] = named_dim(c->m, buf);
		}
	}
	for (int i = 0, p = 0; i < t->rank; i++)	/* p: bits of the static product */
		if (t->dim[i] > 0 && (p += 64 - __builtin_clzll((unsigned long long)t->dim[i])) > 48)
			return ox_field_err(c, l, "the static dims exceed 2^48 elements");
	return 0;
}

/*
 * Check a value against its value_info (or graph output) entry: element
 * type, rank and static dims must agree.  Unknown dims ("?") of the IR
 * type take the declared size when it is static or a product of symbols
 * the module already has.
 */
int
ox_check_declared(Ctx *c, OVal *o, Loc l)
{
	const Onnx__ValueInfoProto *vi = find_vinfo(c, o->name);
	const Onnx__TypeProto__Tensor *tt;
	Type *t = o->v ? &o->v->type : &o->type, want;
	char a[256], b[256];

	if (!vi || !vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
	    !(tt = vi->type->tensor_type))
		return 0;
	want = *t;
	if (tt->elem_type && dtype_from_onnx(tt->elem_type, &want.dt) != 0)
		want.dt = NDTYPE;
	if (tt->shape) {
		want.rank = (int)tt->shape->n_dim;
		for (int i = 0; i < want.rank && i < MAXRANK; i++) {
			const Onnx__TensorShapeProto__Dimension *dp = tt->shape->dim[i];
			want.dim[i] = i < t->rank ? t->dim[i] : 0;
			if (dp->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
				want.dim[i] = dp->dim_value;
			else if (dp->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
				 dp->dim_param && i < t->rank && ir_dim_has_unknown(c->m, t->dim[i]))
				parse_dim_param(c->m, dp->dim_param, 1, &want.dim[i]);
		}
	}
	ir_type_print(a, sizeof a, c->m, t);
	if (want.dt != t->dt || want.rank != t->rank || want.rank > MAXRANK) {
		if (want.dt == NDTYPE || want.rank > MAXRANK)
			return diag_error(c->d, l, "'%s' is declared with an unsupported type", o->name);
		ir_type_print(b, sizeof b, c->m, &want);
		return diag_error(c->d, l, "'%s' is declared %s but computes %s", o->name, b, a);
	}
	for (int i = 0; i < t->rank; i++) {
		if (want.dim[i] < 0 || want.dim[i] == t->dim[i])
			continue;
		if (t->dim[i] >= 0) {
			ir_type_print(b, sizeof b, c->m, &want);
			return diag_error(c->d, l, "'%s' is declared %s but computes %s", o->name, b, a);
		}
	}
	return ox_refine(c, o->v, &want);
}

/* --- materialising values ------------------------------------------------ */

static void
free_data(void *p, size_t n)
{
	(void)n;
	free(p);
}

/* A known tensor too large for a const node, or of a packed 4-bit type (an
 * int4 zero point: kernels cannot hold one), becomes a weight with data. */
static Value *
known_weight(Ctx *c, OVal *o)
{
	const Known *k = o->k;
	Type t = ir_type(k->dt, k->rank, k->dim);
	size_t size = dtype_bytes(k->dt, (size_t)k->n);
	void *data = xcalloc(1, size + 1);
	Weight *w = ir_add_weight(c->m, o->name, t);

	for (int64_t i = 0; i < k->n; i++) {
		if (k->fv)
			dtype_store(k->dt, data, (size_t)i, k->fv[i]);
		else
			dtype_store_int(k->dt, data, (size_t)i, k->iv[i].v);
	}
	w->data = data;
	w->size = size;
	w->free_data = free_data;
	w->source = ir_intern(c->m, "folded at import");
	return w->value;
}

Value *
ox_value(Ctx *c, OVal *o)
{
	if (o->v || !o->k)
		return o->v;
	if (!ox_known_static(o->k))
		die("value '%s' is partly known but has no IR value", o->name);
	if (o->k->n > OX_CONST_MAX || dtype_is_packed(o->k->dt)) {	/* no packed const nodes in kernels */
		o->v = known_weight(c, o);
	} else {
		o->v = ox_const(&c->b, o->k);
		if (o->v)
			ir_set_name(c->g, o->v, o->name);
	}
	return o->v;
}
