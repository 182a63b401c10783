/*
 * ir.c — building and editing the IR: modules, graphs, values, nodes,
 * attributes and the builder that frontends and passes use.
 *
 * Everything is allocated in the module's arena.  Value names are unique per
 * graph (ir_set_name appends .1, .2 ...), weight names per module, so the
 * printed text always parses back to the same module.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

const OpInfo ir_opinfo[NOP] = {
#define OP(e, s, inmin, inmax, outmin, outmax, fl) \
	[OP_##e] = {s, inmin, inmax, outmin, outmax, fl},
#include "ops.def"
#undef OP
};

const char *
ir_opname(Op op)
{
	return (unsigned)op < NOP ? ir_opinfo[op].name : "?";
}

int
ir_find_op(const char *name, size_t n, Op *op)
{
	for (int i = 0; i < NOP; i++)
		if (strlen(ir_opinfo[i].name) == n &&
		    memcmp(ir_opinfo[i].name, name, n) == 0) {
			*op = (Op)i;
			return 0;
		}
	return -1;
}

Module *
ir_new_module(void)
{
	Arena *a = arena_new(256 << 10);
	Module *m = arena_alloc(a, sizeof *m);

	arena_set_limit(a, IR_MAX_ARENA_BYTES, NULL);
	m->arena = a;
	m->strs.arena = a;
	m->wnames.arena = a;
	return m;
}

void
ir_free_module(Module *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->nweight; i++) {
		Weight *w = m->weight[i];
		if (w->data && w->free_data)
			w->free_data(w->data, w->size);
		free(w->cache);
	}
	for (int i = 0; i < m->ngraph; i++)
		str_free(&m->graph[i]->names);
	str_free(&m->strs);
	str_free(&m->wnames);
	arena_free(m->arena);
}

const char *
ir_intern(Module *m, const char *s)
{
	return str_intern(&m->strs, s);
}

void *
ir_grow(Module *m, void *arr, int n, size_t elem)
{
	if (n == 0)
		return arena_alloc(m->arena, 8 * elem);
	if (n >= 8 && (n & (n - 1)) == 0)
		return arena_realloc(m->arena, arr, (size_t)n * elem, 2 * (size_t)n * elem);
	return arr;
}

Graph *
ir_new_graph(Module *m, const char *name, GraphKind kind)
{
	Graph *g = arena_alloc(m->arena, sizeof *g);

	g->m = m;
	g->name = ir_intern(m, name);
	g->kind = kind;
	g->names.arena = m->arena;
	g->loc = LOC_NONE;
	m->graph = ir_grow(m, m->graph, m->ngraph, sizeof *m->graph);
	m->graph[m->ngraph++] = g;
	return g;
}

Graph *
ir_find_graph(const Module *m, const char *name)
{
	for (int i = 0; i < m->ngraph; i++)
		if (strcmp(m->graph[i]->name, name) == 0)
			return m->graph[i];
	return NULL;
}

Graph *
ir_main_graph(const Module *m)
{
	for (int i = 0; i < m->ngraph; i++)
		if (m->graph[i]->kind == G_GRAPH)
			return m->graph[i];
	return NULL;
}

void
ir_remove_graph(Module *m, Graph *g)
{
	for (int i = 0; i < m->ngraph; i++)
		if (m->graph[i] == g) {
			memmove(&m->graph[i], &m->graph[i + 1],
				sizeof *m->graph * (size_t)(m->ngraph - i - 1));
			m->ngraph--;
			str_free(&g->names);
			return;
		}
}

static Value *
new_value(Module *m, ValueKind kind)
{
	Value *v = arena_alloc(m->arena, sizeof *v);

	v->id = m->nvalue++;
	v->kind = kind;
	return v;
}

/* Names keep [A-Za-z0-9_.]; ONNX's "/layers.0/mlp/MatMul" reads "layers.0.mlp.MatMul". */
static void
sanitize(char *dst, size_t n, const char *src)
{
	size_t k = 0;

	while (*src == '/' || *src == '.')
		src++;
	for (; *src && k + 1 < n; src++) {
		unsigned char c = (unsigned char)*src;
		dst[k++] = isalnum(c) || c == '_' || c == '.' ? (char)c : c == '/' ? '.' : '_';
	}
	dst[k] = 0;
}

void
ir_set_name(Graph *g, Value *v, const char *name)
{
	char base[200], buf[256];

	sanitize(base, sizeof base, name ? name : "");
	if (v->name && v->graph == g && strcmp(v->name, base) == 0)
		return;
	if (v->name && v->graph == g)
		str_remove(&g->names, v->name);	/* the old name is free again */
	if (!base[0])
		snprintf(buf, sizeof buf, "t%d", g->tmpcount++);
	else
		snprintf(buf, sizeof buf, "%s", base);
	while (str_find(&g->names, buf)) {
		if (!base[0])
			snprintf(buf, sizeof buf, "t%d", g->tmpcount++);
		else
			snprintf(buf, sizeof buf, "%s.%d", base, g->tmpcount++);
	}
	v->name = str_intern(&g->names, buf);
	v->graph = g;
}

Value *
ir_add_param(Graph *g, const char *name, Type t)
{
	Value *v = new_value(g->m, V_PARAM);

	v->type = t;
	ir_set_name(g, v, name);
	g->param = ir_grow(g->m, g->param, g->nparam, sizeof *g->param);
	g->param[g->nparam++] = v;
	return v;
}

void
ir_set_results(Graph *g, Value **v, const char **names, int n)
{
	g->ret = arena_array(g->m->arena, Value *, n);
	g->retname = arena_array(g->m->arena, const char *, n);
	g->nret = n;
	for (int i = 0; i < n; i++) {
		g->ret[i] = v[i];
		g->retname[i] = ir_intern(g->m, names && names[i] ? names[i]
							      : v[i]->name);
	}
}

Weight *
ir_add_weight(Module *m, const char *name, Type t)
{
	char base[200], buf[256];
	Weight *w;
	Value *v;
	int k = 1;

	sanitize(base, sizeof base, name);
	snprintf(buf, sizeof buf, "%s", base[0] ? base : "w");
	while (str_find(&m->wnames, buf))
		snprintf(buf, sizeof buf, "%s.%d", base[0] ? base : "w", k++);
	w = arena_alloc(m->arena, sizeof *w);
	v = new_value(m, V_WEIGHT);
	v->name = str_intern(&m->wnames, buf);
	v->type = t;
	v->weight = w;
	w->value = v;
	w->scale = -1;
	m->weight = ir_grow(m, m->weight, m->nweight, sizeof *m->weight);
	m->weight[m->nweight++] = w;
	return w;
}

Weight *
ir_find_weight(const Module *m, const char *name)
{
	for (int i = 0; i < m->nweight; i++)
		if (strcmp(m->weight[i]->value->name, name) == 0)
			return m->weight[i];
	return NULL;
}

void
ir_remove_weight(Module *m, Weight *w)
{
	for (int i = 0; i < m->nweight; i++)
		if (m->weight[i] == w) {
			memmove(&m->weight[i], &m->weight[i + 1],
				sizeof *m->weight * (size_t)(m->nweight - i - 1));
			m->nweight--;
			if (w->data && w->free_data)
				w->free_data(w->data, w->size);
			free(w->cache);
			w->data = w->cache = NULL;
			/* the name stays interned: it is never reused */
			return;
		}
}

Node *
ir_new_node(Graph *g, Op op, Value *const *in, int nin, int nout)
{
	Module *m = g->m;
	Node *n = arena_alloc(m->arena, sizeof *n);

	n->op = op;
	n->nin = nin;
	n->nout = nout;
	n->in = arena_array(m->arena, Value *, nin);
	n->out = arena_array(m->arena, Value *, nout);
	n->loc = LOC_NONE;
	for (int i = 0; i < nin; i++)
		n->in[i] = in ? in[i] : NULL;
	for (int i = 0; i < nout; i++) {
		Value *v = new_value(m, V_RESULT);
		v->def = n;
		v->resno = i;
		ir_set_name(g, v, NULL);
		n->out[i] = v;
	}
	return n;
}

void
ir_insert(Graph *g, Node *before, Node *n)
{
	if (!before) {
		n->prev = g->last;
		n->next = NULL;
		if (g->last)
			g->last->next = n;
		else
			g->first = n;
		g->last = n;
	} else {
		n->next = before;
		n->prev = before->prev;
		if (before->prev)
			before->prev->next = n;
		else
			g->first = n;
		before->prev = n;
	}
	g->nnode++;
}

void
ir_erase(Graph *g, Node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		g->first = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		g->last = n->prev;
	n->prev = n->next = NULL;
	g->nnode--;
}

void
ir_replace_uses(Graph *g, Value *old, Value *new)
{
	for (Node *n = g->first; n; n = n->next)
		for (int i = 0; i < n->nin; i++)
			if (n->in[i] == old)
				n->in[i] = new;
	for (int i = 0; i < g->nret; i++)
		if (g->ret[i] == old)
			g->ret[i] = new;
}

int
ir_is_graph_result(const Graph *g, const Value *v)
{
	for (int i = 0; i < g->nret; i++)
		if (g->ret[i] == v)
			return 1;
	return 0;
}

/* The type whose rounding a graph's results carry: a float result that is
 * a widening cast of a narrower float computed in the graph (a float16 model with float32 inputs
 * and outputs, onnxconverter-common's keep_io_types; a bf16 block whose
 * output the model casts up) was computed in the narrower type, and is
 * compared with that type's tolerance (tolerance_dtype). */
DType
ir_results_dtype(const Graph *g)
{
	DType t = DT_F64;

	for (int i = 0; i < g->nret; i++) {
		const Value *v = g->ret[i];
		while (v->kind == V_RESULT && v->def->op == OP_CAST && dtype_is_float(v->type.dt) &&
		       v->def->in[0]->kind == V_RESULT && v->def->in[0]->type.dt != v->type.dt &&
		       tolerance_dtype(v->type.dt, v->def->in[0]->type.dt) == v->def->in[0]->type.dt)
			v = v->def->in[0];	/* widened: the narrower type's tolerance is looser */
		t = dtype_is_float(v->type.dt) ? tolerance_dtype(t, v->type.dt) : t;
	}
	return t;
}

/* The narrower type a float result of g was computed in, when g widens it
 * on the way out (ir_results_dtype coarser than a declared float result);
 * 0: none.  The bundle's manifest carries it as its precision, so that
 * `moert test` judges the outputs as `moec test` does. */
DType
ir_widened_dtype(const Graph *g)
{
	DType r = ir_results_dtype(g);

	for (int i = 0; i < g->nret; i++) {
		DType t = g->ret[i]->type.dt;
		if (dtype_is_float(t) && t != r && tolerance_dtype(t, r) == r)
			return r;
	}
	return 0;
}

static void
count_use(Value *v)
{
	if (v)
		v->nuse++;
}

static void
add_use(Value *v, Node *n, int i)
{
	if (v)
		v->use[v->nuse++] = (Use){n, i};
}

/* Room for v->nuse uses.  Passes refill uses after every change, so the
 * arrays are reused (and grow by doubling): allocating fresh ones each time
 * made memory grow with nodes times changes (a 100,000-node chain took 4 GiB
 * in fuse-ew). */
static void
use_room(Module *m, Value *v)
{
	if (v->nuse > v->usecap) {
		v->usecap = MAX(v->nuse, 2 * v->usecap);
		v->use = arena_array(m->arena, Use, v->usecap);
	}
	v->nuse = 0;
}

/* Two sweeps: count, then fill the arrays. */
void
ir_fill_uses(Graph *g)
{
	Module *m = g->m;

	for (int i = 0; i < m->nweight; i++)
		m->weight[i]->value->nuse = 0;
	for (int i = 0; i < g->nparam; i++)
		g->param[i]->nuse = 0;
	for (Node *n = g->first; n; n = n->next)
		for (int i = 0; i < n->nout; i++)
			n->out[i]->nuse = 0;
	for (Node *n = g->first; n; n = n->next)
		for (int i = 0; i < n->nin; i++)
			count_use(n->in[i]);
	for (int i = 0; i < g->nret; i++)
		count_use(g->ret[i]);
	for (int i = 0; i < m->nweight; i++)
		use_room(m, m->weight[i]->value);
	for (int i = 0; i < g->nparam; i++)
		use_room(m, g->param[i]);
	for (Node *n = g->first; n; n = n->next)
		for (int i = 0; i < n->nout; i++)
			use_room(m, n->out[i]);
	for (Node *n = g->first; n; n = n->next)
		for (int i = 0; i < n->nin; i++)
			add_use(n->in[i], n, i);
	for (int i = 0; i < g->nret; i++)
		add_use(g->ret[i], NULL, i);
}

/* --- attributes ---------------------------------------------------------- */

void
ir_attr_set(Module *m, Attr **arr, int *n, Attr a)
{
	int i;

	a.key = ir_intern(m, a.key);
	for (i = 0; i < *n; i++) {
		int c = strcmp((*arr)[i].key, a.key);
		if (c == 0) {
			(*arr)[i] = a;
			return;
		}
		if (c > 0)
			break;
	}
	*arr = arena_realloc(m->arena, *arr, sizeof **arr * (size_t)*n,
			     sizeof **arr * (size_t)(*n + 1));
	memmove(*arr + i + 1, *arr + i, sizeof **arr * (size_t)(*n - i));
	(*arr)[i] = a;
	(*n)++;
}

static Attr
list_attr(Module *m, const char *key, AttrKind kind, const void *v, int k,
	  size_t elem)
{
	Attr a = {.key = key, .kind = kind, .n = k};
	void *p = arena_alloc(m->arena, elem * (size_t)(k ? k : 1));

	if (k)
		memcpy(p, v, elem * (size_t)k);
	a.u.ints = p;
	return a;
}

void
ir_set_int(Module *m, Node *n, const char *key, int64_t v)
{
	ir_attr_set(m, &n->attr, &n->nattr, (Attr){.key = key, .kind = A_INT, .u.i = v});
}

void
ir_set_ints(Module *m, Node *n, const char *key, const int64_t *v, int k)
{
	ir_attr_set(m, &n->attr, &n->nattr, list_attr(m, key, A_INTS, v, k, sizeof *v));
}

void
ir_set_floats(Module *m, Node *n, const char *key, const double *v, int k)
{
	ir_attr_set(m, &n->attr, &n->nattr, list_attr(m, key, A_FLOATS, v, k, sizeof *v));
}

void
ir_set_dims(Module *m, Node *n, const char *key, const Dim *v, int k)
{
	ir_attr_set(m, &n->attr, &n->nattr, list_attr(m, key, A_DIMS, v, k, sizeof *v));
}

const Attr *
ir_attr(const Node *n, const char *key)
{
	for (int i = 0; i < n->nattr; i++)
		if (strcmp(n->attr[i].key, key) == 0)
			return &n->attr[i];
	return NULL;
}

int64_t
ir_attr_int(const Node *n, const char *key, int64_t def)
{
	const Attr *a = ir_attr(n, key);

	if (!a)
		return def;
	if (a->kind == A_INT)
		return a->u.i;
	if (a->kind == A_FLOAT)
		return (int64_t)a->u.f;
	if (a->kind == A_INTS && a->n == 1)
		return a->u.ints[0];
	return def;
}

double
ir_attr_float(const Node *n, const char *key, double def)
{
	const Attr *a = ir_attr(n, key);

	if (!a)
		return def;
	if (a->kind == A_FLOAT)
		return a->u.f;
	if (a->kind == A_INT)
		return (double)a->u.i;
	if (a->kind == A_FLOATS && a->n == 1)
		return a->u.floats[0];
	return def;
}

const char *
ir_attr_str(const Node *n, const char *key, const char *def)
{
	const Attr *a = ir_attr(n, key);

	return a && a->kind == A_STR ? a->u.s : def;
}

int
ir_attr_ints(const Node *n, const char *key, int64_t *out, int max)
{
	const Attr *a = ir_attr(n, key);

	if (!a)
		return -1;
	if (a->kind == A_INT) {
		if (max > 0)
			out[0] = a->u.i;
		return 1;
	}
	if (a->kind == A_DIMS) {
		for (int i = 0; i < a->n; i++)
			if (a->u.dims[i] < 0)
				return -1;	/* symbolic: not plain ints */
	} else if (a->kind != A_INTS) {
		return -1;
	}
	for (int i = 0; i < a->n && i < max; i++)
		out[i] = a->u.ints[i];
	return a->n;
}

int
ir_attr_floats(const Node *n, const char *key, double *out, int max)
{
	const Attr *a = ir_attr(n, key);

	if (!a)
		return -1;
	if (a->kind == A_FLOAT || a->kind == A_INT) {
		if (max > 0)
			out[0] = a->kind == A_FLOAT ? a->u.f : (double)a->u.i;
		return 1;
	}
	if (a->kind == A_INTS) {
		for (int i = 0; i < a->n && i < max; i++)
			out[i] = (double)a->u.ints[i];
		return a->n;
	}
	if (a->kind != A_FLOATS)
		return -1;
	for (int i = 0; i < a->n && i < max; i++)
		out[i] = a->u.floats[i];
	return a->n;
}

int
ir_attr_dims(const Node *n, const char *key, Dim *out, int max)
{
	const Attr *a = ir_attr(n, key);

	if (!a || (a->kind != A_DIMS && a->kind != A_INTS))
		return -1;
	for (int i = 0; i < a->n && i < max; i++) {
		if (a->kind == A_INTS && a->u.ints[i] < 0)
			return -1;
		out[i] = a->kind == A_DIMS ? a->u.dims[i] : a->u.ints[i];
	}
	return a->n;
}

int
ir_attr_dtype(const Node *n, const char *key, DType *out)
{
	const char *s = ir_attr_str(n, key, NULL);

	return s ? dtype_parse(s, strlen(s), out) : -1;
}

void
ir_copy_attrs(Module *m, Node *dst, const Node *src)
{
	for (int i = 0; i < src->nattr; i++)
		ir_attr_set(m, &dst->attr, &dst->nattr, src->attr[i]);
}

void
ir_graph_set_str(Graph *g, const char *key, const char *v)
{
	ir_attr_set(g->m, &g->attr, &g->nattr,
		    (Attr){.key = key, .kind = A_STR, .u.s = ir_intern(g->m, v)});
}

const char *
ir_graph_str(const Graph *g, const char *key, const char *def)
{
	for (int i = 0; i < g->nattr; i++)
		if (strcmp(g->attr[i].key, key) == 0 && g->attr[i].kind == A_STR)
			return g->attr[i].u.s;
	return def;
}

/* --- the builder --------------------------------------------------------- */

static void
pend(Builder *b, Attr a)
{
	if (b->npend == (int)NELEM(b->pend))
		die("too many pending attributes");
	b->pend[b->npend++] = a;
}

void ir_b_int(Builder *b, const char *k, int64_t v) { pend(b, (Attr){.key = k, .kind = A_INT, .u.i = v}); }
void ir_b_float(Builder *b, const char *k, double v) { pend(b, (Attr){.key = k, .kind = A_FLOAT, .u.f = v}); }

void
ir_b_str(Builder *b, const char *k, const char *v)
{
	pend(b, (Attr){.key = k, .kind = A_STR, .u.s = ir_intern(b->g->m, v)});
}

void
ir_b_ints(Builder *b, const char *k, const int64_t *v, int n)
{
	pend(b, list_attr(b->g->m, k, A_INTS, v, n, sizeof *v));
}

void
ir_b_dims(Builder *b, const char *k, const Dim *v, int n)
{
	pend(b, list_attr(b->g->m, k, A_DIMS, v, n, sizeof *v));
}

Node *
ir_b_node(Builder *b, Op op, Value *const *in, int nin, int nout)
{
	Node *n = ir_new_node(b->g, op, in, nin, nout);
	int npend = b->npend;

	n->loc = b->loc;
	for (int i = 0; i < npend; i++)
		ir_attr_set(b->g->m, &n->attr, &n->nattr, b->pend[i]);
	b->npend = 0;
	if (ir_infer(b->g, n, b->d) != 0) {
		b->err = 1;
		return NULL;
	}
	ir_insert(b->g, b->before, n);
	return n;
}

Value *
ir_b1(Builder *b, Op op, Value *a)
{
	Node *n = ir_b_node(b, op, &a, 1, 1);

	return n ? n->out[0] : NULL;
}

Value *
ir_b_act_quant(Builder *b, Value *x, int64_t group, double ub)
{
	int r = x ? x->type.rank : 0;
	Node *q, *n;

	if (!x || r < 1)
		return NULL;
	if (ub > 0) {
		ir_b_float(b, "min", -ub);
		ir_b_float(b, "max", ub);
		if (!(x = ir_b1(b, OP_CLIP, x)))
			return NULL;
	}
	ir_b_str(b, "to", "f8e4m3");
	if (group > 0)
		ir_b_int(b, "group", group);
	else
		ir_b_str(b, "group", "row");
	if (!(q = ir_b_node(b, OP_QUANTIZE_DYNAMIC, &x, 1, 2)))
		return NULL;
	ir_b_int(b, "axis", r - 1);
	if (group > 0 || ir_dim_is_static(x->type.dim[r - 1]))
		ir_b_int(b, "block_size", group > 0 ? group : x->type.dim[r - 1]);
	ir_b_str(b, "to", dtype_name(x->type.dt));
	n = ir_b_node(b, OP_DEQUANTIZE, q->out, 2, 1);
	return n ? n->out[0] : NULL;
}

Value *
ir_b2(Builder *b, Op op, Value *a, Value *c)
{
	Value *in[2] = {a, c};
	Node *n = ir_b_node(b, op, in, 2, 1);

	return n ? n->out[0] : NULL;
}

/* A constant's type is its result type; `value` holds the elements. */
static Value *
build_const(Builder *b, Type t, Attr value)
{
	Node *n = ir_new_node(b->g, OP_CONST, NULL, 0, 1);

	n->loc = b->loc;
	n->out[0]->type = t;
	ir_attr_set(b->g->m, &n->attr, &n->nattr, value);
	if (ir_infer(b->g, n, b->d) != 0) {
		b->err = 1;
		return NULL;
	}
	ir_insert(b->g, b->before, n);
	return n->out[0];
}

Value *
ir_b_const_f(Builder *b, DType dt, double v)
{
	return build_const(b, ir_scalar(dt),
			   list_attr(b->g->m, "value", A_FLOATS, &v, 1, sizeof v));
}

Value *
ir_b_const_i(Builder *b, DType dt, const int64_t *v, int k, int rank)
{
	Dim d = k;

	return build_const(b, ir_type(dt, rank ? 1 : 0, &d),
			   list_attr(b->g->m, "value", A_INTS, v, k, sizeof *v));
}
