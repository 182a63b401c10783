/*
 * eval.c — the CPU reference interpreter, the oracle of every test: binds
 * symbolic dims from the inputs, runs the nodes in program order on host
 * tensors, and checks every result against its declared type.
 *
 * Result shapes come from ir_infer on a scratch copy of each node whose
 * operands carry the tensors' concrete types, so infer.c stays the one
 * source of truth; ops whose shapes depend on data compute their own.  Op
 * semantics live in eval_*.c.  Bad input is a diagnostic, never an abort.
 */
#include <stdlib.h>
#include <string.h>

#include "eval_impl.h"

static EvalFn ev_call;

/* own: the op allocates its results (shape depends on data or a callee) */
static const struct {
	EvalFn *fn;
	int own;
} optab[NOP] = {
	[OP_NEG] = {.fn = ev_unary}, [OP_ABS] = {.fn = ev_unary}, [OP_EXP] = {.fn = ev_unary},
	[OP_LOG] = {.fn = ev_unary}, [OP_SQRT] = {.fn = ev_unary}, [OP_RSQRT] = {.fn = ev_unary},
	[OP_FLOOR] = {.fn = ev_unary}, [OP_SIGN] = {.fn = ev_unary},
	[OP_RECIPROCAL] = {.fn = ev_unary}, [OP_ERF] = {.fn = ev_unary}, [OP_TANH] = {.fn = ev_unary},
	[OP_SIGMOID] = {.fn = ev_unary}, [OP_RELU] = {.fn = ev_unary}, [OP_SILU] = {.fn = ev_unary},
	[OP_GELU] = {.fn = ev_unary}, [OP_SOFTPLUS] = {.fn = ev_unary},
	[OP_LEAKY_RELU] = {.fn = ev_unary}, [OP_HARD_SIGMOID] = {.fn = ev_unary},
	[OP_HARD_SWISH] = {.fn = ev_unary}, [OP_CLIP] = {.fn = ev_unary}, [OP_NOT] = {.fn = ev_unary},
	[OP_CAST] = {.fn = ev_cast}, [OP_IDENTITY] = {.fn = ev_identity},
	[OP_ADD] = {.fn = ev_binary}, [OP_SUB] = {.fn = ev_binary}, [OP_MUL] = {.fn = ev_binary},
	[OP_DIV] = {.fn = ev_binary}, [OP_POW] = {.fn = ev_binary}, [OP_MIN] = {.fn = ev_binary},
	[OP_MAX] = {.fn = ev_binary}, [OP_EQUAL] = {.fn = ev_binary}, [OP_GREATER] = {.fn = ev_binary},
	[OP_LESS] = {.fn = ev_binary}, [OP_GREATER_EQUAL] = {.fn = ev_binary},
	[OP_LESS_EQUAL] = {.fn = ev_binary}, [OP_AND] = {.fn = ev_binary}, [OP_OR] = {.fn = ev_binary},
	[OP_WHERE] = {.fn = ev_where}, [OP_SWIGLU] = {.fn = ev_swiglu},
	[OP_MATMUL] = {.fn = ev_matmul}, [OP_GROUPED_MATMUL] = {.fn = ev_grouped_matmul},
	[OP_REDUCE_SUM] = {.fn = ev_reduce}, [OP_REDUCE_MEAN] = {.fn = ev_reduce},
	[OP_REDUCE_MAX] = {.fn = ev_reduce}, [OP_REDUCE_MIN] = {.fn = ev_reduce},
	[OP_ARGMAX] = {.fn = ev_argmax}, [OP_CUMSUM] = {.fn = ev_cumsum}, [OP_SOFTMAX] = {.fn = ev_softmax},
	[OP_LOG_SOFTMAX] = {.fn = ev_softmax}, [OP_RMS_NORM] = {.fn = ev_rms_norm},
	[OP_LAYER_NORM] = {.fn = ev_layer_norm}, [OP_RSTD] = {.fn = ev_rstd}, [OP_TOPK] = {.fn = ev_topk},
	[OP_GATHER] = {.fn = ev_gather}, [OP_GATHER_ELEMENTS] = {.fn = ev_gather_elements},
	[OP_GATHER_ND] = {.fn = ev_gather_nd}, [OP_SCATTER_ELEMENTS] = {.fn = ev_scatter_elements},
	[OP_SCATTER_ND] = {.fn = ev_scatter_nd}, [OP_SCATTER_ROWS] = {.fn = ev_scatter_rows},
	[OP_ONEHOT] = {.fn = ev_onehot}, [OP_NONZERO] = {.fn = ev_nonzero, .own = 1},
	[OP_TRANSPOSE] = {.fn = ev_transpose}, [OP_RESHAPE] = {.fn = ev_reshape, .own = 1},
	[OP_EXPAND] = {.fn = ev_expand, .own = 1}, [OP_CONCAT] = {.fn = ev_concat}, [OP_SPLIT] = {.fn = ev_split},
	[OP_SLICE] = {.fn = ev_slice, .own = 1}, [OP_TILE] = {.fn = ev_tile, .own = 1}, [OP_SHAPE] = {.fn = ev_shape},
	[OP_SIZE] = {.fn = ev_size}, [OP_RANGE] = {.fn = ev_range, .own = 1},
	[OP_CONSTANT_OF_SHAPE] = {.fn = ev_constant_of_shape, .own = 1}, [OP_CONST] = {.fn = ev_const},
	[OP_QUANTIZE] = {.fn = ev_quantize}, [OP_DEQUANTIZE] = {.fn = ev_dequantize},
	[OP_QUANTIZE_DYNAMIC] = {.fn = ev_quantize_dynamic, .own = 1}, [OP_MOE] = {.fn = ev_moe},
	[OP_ROUTE] = {.fn = ev_route}, [OP_PERMUTE] = {.fn = ev_permute}, [OP_CALL] = {.fn = ev_call, .own = 1},
	[OP_EP_PACK] = {.fn = ev_ep_pack}, [OP_ALL_TO_ALL] = {.fn = ev_all_to_all},
};

/* For the unit test that checks the table is complete (like infer.c's). */
int ir_eval_has_fn(Op op);
int
ir_eval_has_fn(Op op)
{
	return (unsigned)op < NOP && optab[op].fn != NULL;
}

/* Per graph run: one tensor per value id. */
/* ABSENT: a call passed `_` for a parameter; DEFERRED: a dequantize that
 * moe evaluates a row at a time (ir_eval_defers) */
enum { UNSET, PRESENT, ABSENT, DEFERRED };
/* Per value of one graph, indexed by id - lo: the ids [lo, lo + n) the
 * graph refers to.  A kernel's values are a short run of the module's ids,
 * so a call does not cost the size of the whole module (with a table per
 * call as large as the module, evaluating 3,125 fused kernels of a
 * 100,000-node graph cleared 30 GB). */
typedef struct {
	Tensor *t;
	unsigned char *own, *set;	/* set: UNSET, PRESENT, ABSENT or DEFERRED */
	int *last;		/* index of the last node that reads the value */
	uint32_t lo, n;
} Vals;

static uint32_t
ix(const Vals *vs, const Value *v)
{
	return v->id - vs->lo;
}

static int
in_window(const Vals *vs, const Value *v)
{
	return v->id >= vs->lo && v->id - vs->lo < vs->n;
}

static int run_graph(Graph *g, const Tensor *const *in, int nin, Tensor *out,
		     const EvalOpts *o, Diag *d, int depth, const DimEnv *outer);

static Type
type_of(const Tensor *t)
{
	Type ty;

	memset(&ty, 0, sizeof ty);
	ty.dt = t->dt;
	ty.rank = t->rank;
	for (int i = 0; i < t->rank; i++)
		ty.dim[i] = t->dim[i];
	return ty;
}

/* An atom's binding; -1 if unbound (or made after this run started). */
static int64_t
atom_val(const Ev *e, int a)
{
	return a < e->env.n ? e->env.val[a] : -1;
}

/* " (T=3, E=8)": the bindings of the atoms a type mentions, for messages. */
static void
env_string(const Ev *e, const Type *t, char *buf, size_t n)
{
	size_t k = 0;
	int seen[64] = {0};

	buf[0] = 0;
	for (int i = 0; i < t->rank; i++) {
		const DimExpr *x = ir_dim_expr(e->m, t->dim[i]);
		for (int j = 0; x && j < x->natom; j++) {
			int a = x->atom[j];
			if (atom_val(e, a) < 0 || (a < 64 && seen[a]++))
				continue;
			k += (size_t)snprintf(buf + MIN(k, n), n - MIN(k, n), "%s%s=%lld",
					      k ? ", " : " (", ir_atom_name(e->m, a),
					      (long long)e->env.val[a]);
		}
	}
	if (k)
		snprintf(buf + MIN(k, n), n - MIN(k, n), ")");
}

/*
 * Bind the unbound atoms of a declared type from actual dims: a dim whose
 * expression has one unbound atom (T, 2*T, batch*seq with batch known)
 * determines it.  Repeat until nothing changes, so any order of dims works.
 */
static void
bind_dims(Ev *e, const Type *t, const int64_t *dim)
{
	for (int progress = 1; progress;) {
		progress = 0;
		for (int i = 0; i < t->rank; i++) {
			const DimExpr *x = ir_dim_expr(e->m, t->dim[i]);
			int64_t prod, v;
			int free_atom = -1, nfree = 0;

			if (!x || ir_dim_has_unknown(e->m, t->dim[i]))
				continue;
			prod = x->coef;
			for (int j = 0; j < x->natom; j++) {
				v = atom_val(e, x->atom[j]);
				if (v < 0)
					free_atom = x->atom[j], nfree++;
				else
					prod *= v;
			}
			if (nfree != 1 || prod <= 0 || dim[i] % prod || free_atom >= e->env.n)
				continue;
			e->env.val[free_atom] = dim[i] / prod;
			progress = 1;
		}
	}
}

static int
unbound_atoms(const Ev *e, Dim d)
{
	const DimExpr *x = ir_dim_expr(e->m, d);
	int k = 0;

	for (int j = 0; x && j < x->natom; j++)
		k += atom_val(e, x->atom[j]) < 0;
	return k;
}

/*
 * First dim of t that disagrees with dim[] under the bindings, or -1.  A
 * dim left with one unbound atom after bind_dims could not be solved (5 for
 * 2*T); one with several (batch*seq, neither known) cannot be checked.
 */
static int
mismatch(const Ev *e, const Type *t, const int64_t *dim)
{
	int64_t v;

	for (int i = 0; i < t->rank; i++) {
		if (ir_dim_has_unknown(e->m, t->dim[i]))
			continue;
		if (ir_dim_eval(e->m, t->dim[i], &e->env, &v) == 0 ? v != dim[i]
		    : unbound_atoms(e, t->dim[i]) == 1)
			return i;
	}
	return -1;
}

static int
check_type(Ev *e, Loc loc, const char *what, const Type *want, const Tensor *got)
{
	char a[256], b[256], env[256];

	if (want->dt == got->dt && want->rank == got->rank) {
		bind_dims(e, want, got->dim);
		if (mismatch(e, want, got->dim) < 0)
			return 0;
	}
	ir_type_print(a, sizeof a, e->m, want);
	tensor_shape_string(b, sizeof b, got);
	env_string(e, want, env, sizeof env);
	return diag_error(e->d, loc, "%s is %s but declared %s%s", what, b, a, env);
}

static int
bind_inputs(Ev *e, const Tensor *const *in)
{
	Graph *g = e->g;
	char what[256];

	for (int i = 0; i < g->nparam; i++) {
		if (!in[i])
			continue;
		snprintf(what, sizeof what, "@%s: input %%%s", g->name, g->param[i]->name);
		if (check_type(e, g->loc, what, &g->param[i]->type, in[i]))
			return -1;
	}
	return 0;
}

/* Evaluate symbolic dims an inference rule passed through (rows=[T*k]). */
static int
concrete_dims(Ev *e, const Node *n, const Type *t, int64_t *dim)
{
	char buf[128];

	for (int i = 0; i < t->rank; i++)
		if (ir_dim_eval(e->m, t->dim[i], &e->env, &dim[i]) != 0) {
			ir_dim_print(buf, sizeof buf, e->m, t->dim[i]);
			return ev_err(e, n, "%s: cannot evaluate dim %s of the result",
				      ir_opname(n->op), buf);
		}
	return 0;
}

/*
 * Result shapes by shape inference on a scratch copy of n whose operands
 * have the tensors' concrete types; nothing in the graph is touched.
 */
static int
infer_results(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	Node s = *n;
	Value *v = xcalloc((size_t)(n->nin + n->nout) + 1, sizeof *v);
	Value **p = xcalloc((size_t)(n->nin + n->nout) + 1, sizeof *p);
	int64_t dim[MAXRANK];
	int rc;

	s.in = p;
	s.out = p + n->nin;
	s.prev = s.next = NULL;
	for (int i = 0; i < n->nin; i++)
		if (in[i]) {
			v[i] = *n->in[i];
			v[i].type = type_of(in[i]);
			p[i] = &v[i];
		}
	for (int i = 0; i < n->nout; i++) {
		v[n->nin + i] = *n->out[i];
		p[n->nin + i] = &v[n->nin + i];
	}
	rc = ir_infer(e->g, &s, e->d);
	for (int i = 0; rc == 0 && i < n->nout; i++) {
		const Type *t = &s.out[i]->type;
		rc = concrete_dims(e, n, t, dim);
		if (rc == 0)
			rc = ev_alloc(e, n, &out[i], t->dt, t->rank, dim);
	}
	free(v);
	free(p);
	return rc;
}

static const Tensor *
weight_view(Ev *e, Vals *vs, Value *v)
{
	Tensor *t = &vs->t[ix(vs, v)];
	const void *data;

	if (vs->set[ix(vs, v)] == PRESENT)
		return t;
	data = ir_weight_data(v->weight, e->d);
	if (!data)
		return NULL;
	ev_shape_of(v, t)->data = (void *)data;
	vs->set[ix(vs, v)] = PRESENT;
	return t;
}

/* Every operand below the minimum count, and all of concat's, must be there. */
static int
required(const Node *n, int i)
{
	if (n->op == OP_CALL || (n->op == OP_MOE && i == 2))
		return 0;
	return i < ir_opinfo[n->op].inmin || n->op == OP_CONCAT;
}

int
ir_eval_defers(const Graph *g, const Node *n)
{
	Value *r = n->nout == 1 ? n->out[0] : NULL;
	int readers = 0;

	if (n->op != OP_DEQUANTIZE || !r)
		return 0;
	for (int i = 0; i < n->nin; i++)
		if (n->in[i] && n->in[i]->kind != V_WEIGHT)
			return 0;
	for (int i = 0; i < g->nret; i++)
		if (g->ret[i] == r)
			return 0;
	for (const Node *m = g->first; m; m = m->next)
		for (int i = 0; i < m->nin; i++)
			if (m->in[i] == r) {
				if (m->op != OP_MOE || (i != 3 && i != 4))
					return 0;
				readers++;
			}
	return readers > 0;
}

/* moe's expert stacks, synthetic and not generated yet, or the result of a
 * deferred dequantize: ev_moe reads their rows through ir_weight_elems or
 * ev_dequant_elems, so a stack too large for the host (256 experts of
 * DeepSeek-V3, in bf16 or FP8) still runs.  The view has the shape, no data. */
static int
lazy_view(const Vals *vs, const Node *n, int i, const Value *v, Tensor *t)
{
	if (n->op != OP_MOE || (i != 3 && i != 4))
		return 0;
	if (v->kind == V_WEIGHT ? v->weight->data || v->weight->cache
				: vs->set[ix(vs, v)] != DEFERRED)
		return 0;
	ev_shape_of(v, t);
	return 1;
}

static int
gather_operands(Ev *e, Vals *vs, const Node *n, const Tensor **in, Tensor *lazy)
{
	for (int i = 0; i < n->nin; i++) {
		Value *v = n->in[i];
		in[i] = NULL;
		if (!v)
			continue;
		if ((v->kind == V_WEIGHT || in_window(vs, v)) && lazy_view(vs, n, i, v, &lazy[i])) {
			in[i] = &lazy[i];
		} else if (v->kind == V_WEIGHT) {
			if (!(in[i] = weight_view(e, vs, v)))
				return ev_err(e, n, "%s: weight $%s has no data", ir_opname(n->op),
					      v->name);
		} else if (!in_window(vs, v) || !vs->set[ix(vs, v)] || v->graph != e->g) {
			return ev_err(e, n, "%s: operand %%%s is not defined before use",
				      ir_opname(n->op), v->name);
		} else if (vs->set[ix(vs, v)] == PRESENT) {
			in[i] = &vs->t[ix(vs, v)];
		}
	}
	for (int i = 0; i < n->nin; i++)
		if (!in[i] && required(n, i))
			return ev_err(e, n, "%s: operand %d is absent", ir_opname(n->op), i);
	return 0;
}

static void
trace(Ev *e, const Node *n, const Tensor *out)
{
	char buf[128];

	ir_print_node(stderr, e->m, n, 0);
	for (int i = 0; i < n->nout; i++) {
		tensor_shape_string(buf, sizeof buf, &out[i]);
		fprintf(stderr, "#\t-> %%%s = %s\n", n->out[i]->name, buf);
	}
}

static void
free_results(Tensor *out, int n)
{
	for (int i = 0; i < n; i++)
		tensor_free(&out[i]);
}

static int
run_node(Ev *e, Vals *vs, const Node *n, int idx)
{
	const Tensor **in = xcalloc((size_t)n->nin + 1, sizeof *in);
	Tensor *lazy = xcalloc((size_t)n->nin + 1, sizeof *lazy);
	Tensor *out = xcalloc((size_t)n->nout + 1, sizeof *out);
	char what[256];
	int rc = gather_operands(e, vs, n, in, lazy);

	/* a bounded nonzero has a declared shape: allocated like any other op's */
	if (rc == 0 && (!optab[n->op].own || (n->op == OP_NONZERO && ir_attr(n, "bound"))))
		rc = infer_results(e, n, in, out);
	if (rc == 0)
		rc = optab[n->op].fn(e, n, in, out);
	for (int i = 0; rc == 0 && i < n->nout; i++) {
		snprintf(what, sizeof what, "%s: result %%%s", ir_opname(n->op),
			 n->out[i]->name);
		rc = check_type(e, n->loc, what, &n->out[i]->type, &out[i]);
	}
	if (rc == 0 && e->o->trace)
		trace(e, n, out);
	if (rc == 0 && e->o->hook)
		e->o->hook(e->o->hook_ctx, n, in, out);
	if (rc != 0) {
		free_results(out, n->nout);
	} else {
		for (int i = 0; i < n->nout; i++) {
			uint32_t id = ix(vs, n->out[i]);
			vs->t[id] = out[i];
			vs->own[id] = 1;
			vs->set[id] = PRESENT;
		}
	}
	/* free what no later node reads */
	for (int i = 0; rc == 0 && i < n->nin + n->nout; i++) {
		Value *v = i < n->nin ? n->in[i] : n->out[i - n->nin];
		if (v && vs->own[ix(vs, v)] && vs->last[ix(vs, v)] <= idx) {
			tensor_free(&vs->t[ix(vs, v)]);
			vs->own[ix(vs, v)] = 0;
		}
	}
	free(in);
	free(lazy);
	free(out);
	return rc;
}

static void
widen(Vals *vs, const Value *v, uint32_t *hi)
{
	if (v) {
		vs->lo = MIN(vs->lo, v->id);
		*hi = MAX(*hi, v->id);
	}
}

/* The window of ids g refers to, its tables, and each value's last reader. */
static void
alloc_vals(Graph *g, Vals *vs)
{
	uint32_t hi = 0;
	int idx = 0;

	vs->lo = UINT32_MAX;
	for (int i = 0; i < g->nparam; i++)
		widen(vs, g->param[i], &hi);
	for (Node *n = g->first; n; n = n->next)
		for (int i = 0; i < n->nin + n->nout; i++)
			widen(vs, i < n->nin ? n->in[i] : n->out[i - n->nin], &hi);
	for (int i = 0; i < g->nret; i++)
		widen(vs, g->ret[i], &hi);
	if (vs->lo > hi)
		vs->lo = hi;
	vs->n = hi - vs->lo + 1;
	vs->t = xcalloc(vs->n, sizeof *vs->t);
	vs->own = xcalloc(vs->n, 1);
	vs->set = xcalloc(vs->n, 1);
	vs->last = xcalloc(vs->n, sizeof *vs->last);
	for (uint32_t i = 0; i < vs->n; i++)
		vs->last[i] = -1;
	for (Node *n = g->first; n; n = n->next, idx++)
		for (int i = 0; i < n->nin; i++)
			if (n->in[i])
				vs->last[ix(vs, n->in[i])] = idx;
	for (int i = 0; i < g->nret; i++)
		vs->last[ix(vs, g->ret[i])] = INT32_MAX;
}

static int
copy_tensor(Tensor *dst, const Tensor *src, Ev *e)
{
	if (tensor_alloc(dst, src->dt, src->rank, src->dim) != 0)
		return diag_error(e->d, e->g->loc, "@%s: out of memory copying a result",
				  e->g->name);
	memcpy(dst->data, src->data, tensor_nbytes(src));
	return 0;
}

/* Move the results out; copy those we do not own or that are returned twice. */
static int
take_results(Ev *e, Vals *vs, Tensor *out)
{
	Graph *g = e->g;

	for (int i = 0; i < g->nret; i++) {
		Value *v = g->ret[i];
		const Tensor *t;

		if (out[i].data)
			continue;	/* a second return of a value, copied below */
		t = v->kind == V_WEIGHT ? weight_view(e, vs, v) : &vs->t[ix(vs, v)];
		if (!t || vs->set[ix(vs, v)] != PRESENT || !t->data)
			return diag_error(e->d, g->loc, "@%s: result '%s' has no value", g->name,
					  g->retname[i]);
		if (vs->own[ix(vs, v)]) {
			out[i] = *t;
			vs->own[ix(vs, v)] = 0;
			memset(&vs->t[ix(vs, v)], 0, sizeof *t);
		} else if (copy_tensor(&out[i], t, e)) {
			return -1;
		}
		for (int j = i + 1; j < g->nret; j++)
			if (g->ret[j] == v && copy_tensor(&out[j], &out[i], e))
				return -1;
	}
	return 0;
}

static void
free_vals(Vals *vs)
{
	for (uint32_t i = 0; i < vs->n; i++)
		if (vs->own[i])
			tensor_free(&vs->t[i]);
	free(vs->t);
	free(vs->own);
	free(vs->set);
	free(vs->last);
}

static int
run_body(Ev *e, Vals *vs, const Tensor *const *in, Tensor *out)
{
	Graph *g = e->g;
	int idx = 0;

	for (int i = 0; i < g->nparam; i++) {
		uint32_t id = ix(vs, g->param[i]);
		if (in[i])
			vs->t[id] = *in[i];
		vs->set[id] = in[i] ? PRESENT : ABSENT;
	}
	for (Node *n = g->first; n; n = n->next, idx++)
		if (ir_eval_defers(g, n))
			vs->set[ix(vs, n->out[0])] = DEFERRED;
		else if (run_node(e, vs, n, idx))
			return -1;
	return take_results(e, vs, out);
}

/* outer: the caller's bindings, for a kernel whose parameters carry only
 * products (batch*seq) of the symbols its body names one by one. */
static int
run_graph(Graph *g, const Tensor *const *in, int nin, Tensor *out,
	  const EvalOpts *o, Diag *d, int depth, const DimEnv *outer)
{
	Module *m = g->m;
	Ev e = {g, m, o, d, {ir_natom(m), NULL}, depth};
	Vals vs;
	int rc;

	if (nin != g->nparam)
		return diag_error(d, g->loc, "@%s takes %d inputs, not %d", g->name,
				  g->nparam, nin);
	e.env.val = xmalloc(sizeof(int64_t) * (size_t)(e.env.n + 1));
	for (int i = 0; i < e.env.n; i++)
		e.env.val[i] = outer && i < outer->n ? outer->val[i] : -1;
	alloc_vals(g, &vs);
	rc = bind_inputs(&e, in);
	if (rc == 0)
		rc = run_body(&e, &vs, in, out);
	if (rc != 0)
		free_results(out, g->nret);
	free_vals(&vs);
	free(e.env.val);
	return rc;
}

static int
ev_call(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	Graph *k = n->callee;

	if (!k)
		return ev_err(e, n, "call: no kernel");
	if (k->nret != n->nout)
		return ev_err(e, n, "call: @%s returns %d results, not %d", k->name, k->nret,
			      n->nout);
	if (e->depth >= 64)
		return ev_err(e, n, "call: @%s nests too deeply (recursion?)", k->name);
	if (run_graph(k, in, n->nin, out, e->o, e->d, e->depth + 1, &e->env) != 0) {
		diag_note(e->d, n->loc, "in call of @%s", k->name);
		return -1;
	}
	return 0;
}

int
ir_eval(Graph *g, const Tensor *in, int nin, Tensor *out, const EvalOpts *o,
	Diag *d)
{
	static const EvalOpts defaults;
	const Tensor **pin = xcalloc((size_t)nin + 1, sizeof *pin);
	int rc;

	memset(out, 0, sizeof *out * (size_t)g->nret);
	for (int i = 0; i < nin; i++)
		pin[i] = &in[i];
	rc = run_graph(g, pin, nin, out, o ? o : &defaults, d, 0, NULL);
	free(pin);
	return rc;
}
