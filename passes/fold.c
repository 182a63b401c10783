/*
 * fold: evaluate nodes whose operands are all known — constants, or weights
 * with real data — with the interpreter.  Small results become `const`
 * nodes; results computed from real weights (a transposed or concatenated
 * weight, say) become new weights with data.  Shapes of static types fold
 * too.  Synthetic weights are never folded on the host.
 *
 *	%s = shape %x : i64[2]          (x: f32[4,8])
 *	%n = mul %s, %s            =>     %n = const value=[16, 64] : i64[2]
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

enum { SMALL = 16, MAXFOLD = 256 << 20 };

static Node *
def_const(const Value *v)
{
	return v && v->kind == V_RESULT && v->def->op == OP_CONST ? v->def : NULL;
}

static int
known(const Value *v)
{
	if (!v)
		return 1;
	if (def_const(v))
		return 1;
	return v->kind == V_WEIGHT && v->weight->data;
}

/* The value of a constant or real weight as a tensor (data not owned). */
static int
tensor_of(Value *v, Tensor *t, Diag *d)
{
	memset(t, 0, sizeof *t);
	t->dt = v->type.dt;
	t->rank = v->type.rank;
	for (int i = 0; i < t->rank; i++)
		t->dim[i] = v->type.dim[i];
	if (v->kind == V_WEIGHT) {
		t->data = v->weight->data;
		return 0;
	}
	const Attr *a = ir_attr(v->def, "value");
	int64_t dim[MAXRANK];
	memcpy(dim, t->dim, sizeof dim);	/* tensor_alloc clears *t first */
	if (tensor_alloc(t, t->dt, t->rank, dim) != 0)
		return -1;
	for (int i = 0; i < a->n; i++) {
		if (a->kind == A_INTS)
			dtype_store_int(t->dt, t->data, (size_t)i, a->u.ints[i]);
		else
			dtype_store(t->dt, t->data, (size_t)i, a->u.floats[i]);
	}
	return 0;
}

static Node *
make_const(Graph *g, Node *at, const Tensor *t, const Type *ty)
{
	int64_t n = tensor_numel(t);
	Node *c = ir_new_node(g, OP_CONST, NULL, 0, 1);

	c->loc = at->loc;
	c->out[0]->type = *ty;
	if (dtype_is_float(t->dt)) {
		double *v = arena_array(g->m->arena, double, n + 1);
		for (int64_t i = 0; i < n; i++)
			v[i] = dtype_load(t->dt, t->data, (size_t)i);
		ir_set_floats(g->m, c, "value", v, (int)n);
	} else {
		int64_t *v = arena_array(g->m->arena, int64_t, n + 1);
		for (int64_t i = 0; i < n; i++)
			v[i] = dtype_load_int(t->dt, t->data, (size_t)i);
		ir_set_ints(g->m, c, "value", v, (int)n);
	}
	ir_insert(g, at, c);
	return c;
}

static void
free_tensor_data(void *p, size_t n)
{
	(void)n;
	free(p);
}

/* Replace result k of n by the folded tensor t; 1 if replaced. */
static int
replace(Graph *g, Node *n, int k, Tensor *t, int from_weight)
{
	Value *v = n->out[k];

	if (tensor_numel(t) <= SMALL) {
		Node *c = make_const(g, n, t, &v->type);
		ir_replace_uses(g, v, c->out[0]);
		return 1;
	}
	if (!from_weight)
		return 0;	/* don't turn a small constant into a big one */
	Weight *w = ir_add_weight(g->m, v->name, v->type);
	w->data = t->data;
	w->size = tensor_nbytes(t);
	w->free_data = free_tensor_data;
	w->source = "folded";
	t->data = NULL;
	ir_replace_uses(g, v, w->value);
	return 1;
}

/*
 * A quantised weight dequantised for GEMMs only stays quantised: fuse-dequant
 * moves the dequantize into the GEMM kernel (the packed weights are read in
 * its mainloop), and what it leaves is dequantised once at load.
 */
static int
gemm_dequant(const Graph *g, const Node *n)
{
	int users = 0;

	if (n->op != OP_DEQUANTIZE || !dtype_is_quantised(n->in[0]->type.dt) || n->in[0]->kind != V_WEIGHT)
		return 0;
	for (const Node *u = g->first; u; u = u->next)
		for (int i = 0; i < u->nin; i++) {
			if (u->in[i] != n->out[0])
				continue;
			if (!(i == 1 && (u->op == OP_MATMUL || u->op == OP_GROUPED_MATMUL)) &&
			    !(i >= 2 && u->op == OP_MOE))
				return 0;
			users++;
		}
	return users > 0 && !ir_is_graph_result(g, n->out[0]);
}

static int
fold_node(Graph *g, Node *n, Diag *d, DbgFlags debug)
{
	Tensor in[64], out[16];
	int from_weight = 0, changed = 0, nin = 0;
	Diag quiet;

	if (n->op == OP_CONST || n->op == OP_CALL || n->nin > 64 || n->nout > 16 ||
	    (n->nin == 0 && n->op != OP_CONSTANT_OF_SHAPE) || gemm_dequant(g, n))
		return 0;
	for (int i = 0; i < n->nout; i++) {
		int64_t e = ir_type_numel(&n->out[i]->type);
		if (e < 0 || dtype_bytes(n->out[i]->type.dt, (size_t)e) > MAXFOLD)
			return 0;
	}
	for (int i = 0; i < n->nin; i++) {
		if (!known(n->in[i]))
			return 0;
		from_weight |= n->in[i] && n->in[i]->kind == V_WEIGHT;
	}
	for (int i = 0; i < n->nin; i++) {
		memset(&in[i], 0, sizeof in[i]);
		if (n->in[i] && tensor_of(n->in[i], &in[i], d) != 0)
			goto out;
		nin = i + 1;
	}
	diag_init(&quiet, debug & DBG_FOLD ? stderr : NULL);	/* a node that fails to evaluate stays */
	if (pass_eval_node(g->m, n, in, out, &quiet) == 0) {
		for (int k = 0; k < n->nout; k++) {
			changed |= replace(g, n, k, &out[k], from_weight);
			tensor_free(&out[k]);
		}
	}
out:
	for (int i = 0; i < nin; i++)
		if (n->in[i] && n->in[i]->kind != V_WEIGHT)
			tensor_free(&in[i]);
	return changed;
}

/* shape and size of a static type are constants whatever the data. */
static int
fold_shape(Graph *g, Node *n)
{
	const Type *t = n->nin ? &n->in[0]->type : NULL;
	int64_t v[MAXRANK], k = 0;
	Tensor r;

	if ((n->op != OP_SHAPE && n->op != OP_SIZE) || !ir_type_static(t))
		return 0;
	if (n->op == OP_SIZE) {
		v[k++] = ir_type_numel(t);
	} else {
		int64_t s = ir_attr_int(n, "start", 0), e = ir_attr_int(n, "end", t->rank);
		s = s < 0 ? MAX(0, s + t->rank) : MIN(s, t->rank);
		e = e < 0 ? MAX(0, e + t->rank) : MIN(e, t->rank);
		for (int64_t i = s; i < e; i++)
			v[k++] = t->dim[i];
	}
	if (tensor_alloc(&r, DT_I64, n->op == OP_SHAPE, &k) != 0)
		return 0;
	memcpy(r.data, v, sizeof(int64_t) * (size_t)k);
	Node *c = make_const(g, n, &r, &n->out[0]->type);
	ir_replace_uses(g, n->out[0], c->out[0]);
	tensor_free(&r);
	return 1;
}

int
fold(Module *m, PassCtx *c)
{
	int changed = 0;

	for (int i = 0; i < m->ngraph; i++) {
		Graph *g = m->graph[i];
		for (Node *n = g->first; n; n = n->next) {
			if (ir_opinfo[n->op].flags & OPF_DYNSHAPE && n->op != OP_RANGE)
				continue;
			int q = n->op == OP_DEQUANTIZE && n->in[0]->kind == V_WEIGHT;
			const char *qw = q ? n->in[0]->name : NULL;
			if (fold_shape(g, n) || fold_node(g, n, c->d, c->debug)) {
				changed = 1;
				char sz[48];
				if (q)
					report_skip(c->report, "dequantize %%%s of $%s not fused into a "
						    "GEMM: folded at compile time into a %s weight; cost: its "
						    "GEMMs read %s of %s, not the quantised bytes",
						    n->out[0]->name, qw, dtype_name(n->out[0]->type.dt),
						    report_size(sz, sizeof sz, &n->out[0]->type),
						    dtype_name(n->out[0]->type.dt));
			}
		}
	}
	return changed;
}
