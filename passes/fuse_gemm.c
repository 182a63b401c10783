/*
 * fuse-gemm: every matmul and grouped_matmul becomes a kernel holding its
 * prologue (the MoE token gather) and its epilogue (bias, activation,
 * scales, residual, SwiGLU, output cast, the scatter back to token order),
 * applied to the accumulators before the store.  route and permute become
 * kernels of their own.
 *
 *	%h = matmul %x, $w, to=f32            %y = call @g.k0(%x, $w, $b, %r)
 *	%a = add %h, $b                 =>    kernel @g.k0(...) template=gemm {
 *	%s = gelu %a                                  matmul, add, gelu, add, cast
 *	%z = add %s, %r ; %y = cast %z
 *
 * An op joins the epilogue when it is elementwise on the accumulator, its
 * other operand is a scalar, a per-row or per-column vector, or a matrix
 * of the result's shape, and the value it extends has no other user.
 * It may end with the output quantisation: quantize to f8e4m3 or i8 with a
 * scalar scale (and zero point), or quantize_dynamic in groups of N columns
 * a GEMM tile holds whole (the kernel then also returns the scales).
 * Per-token and per-tensor scales need the whole row or tensor, across
 * every column tile: those stay kernels of their own.  Everything it
 * refuses is reported with the reason.
 */
#include <string.h>

#include "passes.h"

typedef struct {
	Node *n[64];
	int count;
} Set;

static void
add(Set *s, Node *n)
{
	for (int i = 0; i < s->count; i++)
		if (s->n[i] == n)
			return;
	if (s->count < (int)NELEM(s->n))
		s->n[s->count++] = n;
}

static int
single_use(const Graph *g, const Value *v)
{
	return v->nuse == 1 && v->use[0].node && !ir_is_graph_result(g, v);
}

/* Shape of `o` broadcasts onto acc as a scalar, row [M,1], column [N] or
 * [1,N], or a full matrix of acc's shape. */
static int
epilogue_operand(const Module *m, const Type *acc, const Type *o)
{
	int64_t n = ir_type_numel(o);
	int r = acc->rank;

	if (n == 1)
		return 1;
	if (o->rank == r) {
		int same = 1, row = o->dim[r - 1] == 1, col = 1;
		for (int i = 0; i < r; i++) {
			same &= o->dim[i] == acc->dim[i];
			if (i < r - 1)
				col &= o->dim[i] == 1;
			else
				row &= 1;
		}
		for (int i = 0; i < r - 1 && row; i++)
			row = o->dim[i] == acc->dim[i];
		col &= o->dim[r - 1] == acc->dim[r - 1];
		return same || row || col;
	}
	return o->rank == 1 && o->dim[0] == acc->dim[r - 1];
}

/* The epilogue computes in f32 with codegen/ew.c's table: OPF_SCALAR ops on floats. */
static int
epilogue_op(const Node *u)
{
	if (!(ir_opinfo[u->op].flags & OPF_SCALAR) || !dtype_is_float(u->out[0]->type.dt))
		return 0;
	for (int i = 0; i < u->nin; i++)
		if (u->in[i] && !dtype_is_float(u->in[i]->type.dt))
			return 0;
	return 1;
}

/*
 * Why the quantisation u cannot end the epilogue (NULL: it can).  Group
 * sizes must fill whole mma fragments (8 columns) and fit a tile: at most
 * 256 output columns, 128 after swiglu (the tile's columns are halved).
 */
static const char *
quant_refusal(const Node *u, int paired, char *buf, size_t n)
{
	DType to = u->out[0]->type.dt;
	int64_t widest = paired ? 128 : 256;
	const Attr *g;

	if (to != DT_F8E4M3 && to != DT_I8) {
		snprintf(buf, n, "it quantises to %s (an epilogue writes f8e4m3 or i8)", dtype_name(to));
		return buf;
	}
	if (u->op == OP_QUANTIZE) {
		if (ir_type_numel(&u->in[1]->type) != 1 || ir_attr_int(u, "block_size", 0) ||
		    (u->nin > 2 && u->in[2] && ir_type_numel(&u->in[2]->type) != 1))
			return "its scale is per axis or blocked (a scalar scale and zero point fuse)";
		if (to == DT_F8E4M3 && !ir_attr_int(u, "saturate", 1))
			return "saturate=0 (overflow to NaN) has no epilogue form";
		return NULL;
	}
	g = ir_attr(u, "group");
	if (!g || (g->kind == A_STR && strcmp(g->u.s, "tensor") == 0))
		return "per-tensor quantisation needs the whole tensor";
	if (g->kind == A_STR && strcmp(g->u.s, "row") == 0)
		return "per-token quantisation needs the whole row";
	if (g->kind != A_INT)
		return "an unknown group";
	if (g->u.i % 8) {
		snprintf(buf, n, "groups of %lld columns do not fill whole mma fragments (8 columns)",
			 (long long)g->u.i);
		return buf;
	}
	if (g->u.i > widest) {
		snprintf(buf, n, "groups of %lld columns are wider than a GEMM tile (%lld%s)",
			 (long long)g->u.i, (long long)widest, paired ? " after swiglu" : "");
		return buf;
	}
	return NULL;
}

/* The nodes that only shape an epilogue operand (the routing weight
 * gathered through the permutation), when nothing else uses them. */
static void
operand_prep(const Graph *g, Value *v, Set *s)
{
	for (int depth = 0; depth < 4 && v->kind == V_RESULT && single_use(g, v); depth++) {
		Node *d = v->def;
		if (d->op != OP_RESHAPE && d->op != OP_GATHER && d->op != OP_CAST)
			return;
		add(s, d);
		v = d->in[0];
	}
}

/* Extend the epilogue from value v as far as the rules allow. */
static void
epilogue(Graph *g, Value *v, int grouped, Set *s, PassCtx *c)
{
	int paired = 0;		/* one swiglu per epilogue: it halves the columns */
	char cost[200];

	for (;;) {
		if (!single_use(g, v)) {
			if (v->nuse > 1)
				report_skip(c->report, "epilogue stops at %%%s: it has %d users; %s",
					    v->name, v->nuse, report_trip(cost, sizeof cost, v, 1, v->nuse));
			return;
		}
		Node *u = v->use[0].node;
		if (u->op == OP_SWIGLU && !paired &&
		    strcmp(ir_attr_str(u, "layout", "concat"), "interleave") == 0) {
			add(s, u);
			paired = 1;
		} else if (u->op == OP_SCATTER_ROWS && grouped && u->in[0] == v) {
			add(s, u);
			return;		/* the store */
		} else if ((u->op == OP_QUANTIZE || u->op == OP_QUANTIZE_DYNAMIC) && u->in[0] == v) {
			char buf[160];
			const char *why = quant_refusal(u, paired, buf, sizeof buf);
			if (why) {
				report_skip(c->report, "%s %%%s: %s: not fused into the epilogue of %%%s; %s",
					    ir_opname(u->op), u->out[0]->name, why, v->name,
					    report_trip(cost, sizeof cost, v, 1, 1));
				return;
			}
			add(s, u);
			return;		/* the quantised store ends the epilogue */
		} else if (epilogue_op(u)) {
			int ok = 1;
			for (int i = 0; i < u->nin && ok; i++)
				if (u->in[i] && u->in[i] != v)
					ok = epilogue_operand(g->m, &v->type, &u->in[i]->type);
			if (!ok || u->out[0]->type.rank != v->type.rank) {
				report_skip(c->report, "%s %%%s not fused into the epilogue of %%%s: "
					    "its other operand is not a scalar, row, column or matrix of the result; %s",
					    ir_opname(u->op), u->out[0]->name, v->name,
					    report_trip(cost, sizeof cost, v, 1, 1));
				return;
			}
			add(s, u);
			for (int i = 0; i < u->nin; i++)
				if (u->in[i] && u->in[i] != v)
					operand_prep(g, u->in[i], s);
		} else {
			return;
		}
		v = u->out[0];
	}
}

/* The grouped GEMM's prologue: A rows gathered through the permutation. */
static void
prologue(const Graph *g, Node *mm, Set *s)
{
	Value *a = mm->in[0];

	if (a->kind != V_RESULT || a->def->op != OP_GATHER || !single_use(g, a))
		return;
	add(s, a->def);
	Value *src = a->def->in[1];
	if (src->kind == V_RESULT && src->def->op == OP_DIV && single_use(g, src)) {
		add(s, src->def);
		Value *k = src->def->in[1];
		if (k->kind == V_RESULT && k->def->op == OP_CONST && single_use(g, k))
			add(s, k->def);
	}
}

/* A dense GEMM's prologue: A read r times along K, concat(x, x, x, axis=-1)
 * (split-f32's exact bf16 x3 GEMM): the kernel reads x's k index modulo its
 * columns rather than a kernel writing r copies. */
static void
prologue_repeat(const Graph *g, Node *mm, Set *s)
{
	Value *a = mm->in[0];
	Node *c = a->kind == V_RESULT ? a->def : NULL;

	if (!c || c->op != OP_CONCAT || c->nin < 2 || !single_use(g, a) ||
	    ir_axis(ir_attr_int(c, "axis", 0), a->type.rank) != a->type.rank - 1)
		return;
	for (int i = 1; i < c->nin; i++)
		if (c->in[i] != c->in[0])
			return;
	add(s, c);
}

static int
in_set(const Set *s, const Node *n)
{
	for (int i = 0; i < s->count; i++)
		if (s->n[i] == n)
			return 1;
	return 0;
}

/* The A gather's index rows/k, when every reader of it is in the set (the
 * epilogue gathers a per-row operand the same way, e.g. a folded norm's
 * 1/rms): the kernel computes it rather than a kernel of its own. */
static void
shared_index(const Graph *g, Node *mm, Set *s)
{
	Value *a = mm->in[0], *src, *k;

	if (a->kind != V_RESULT || a->def->op != OP_GATHER || !in_set(s, a->def))
		return;
	src = a->def->in[1];
	if (src->kind != V_RESULT || src->def->op != OP_DIV || in_set(s, src->def) ||
	    ir_is_graph_result(g, src))
		return;
	for (int u = 0; u < src->nuse; u++)
		if (!in_set(s, src->use[u].node))
			return;
	add(s, src->def);
	k = src->def->in[1];
	if (k->kind == V_RESULT && k->def->op == OP_CONST && single_use(g, k))
		add(s, k->def);
}

/* Program order of the set, as outline wants it. */
static void
sort(Graph *g, Set *s)
{
	int k = 0;

	for (Node *n = g->first; n && k < s->count; n = n->next)
		for (int i = k; i < s->count; i++)
			if (s->n[i] == n) {
				Node *t = s->n[k];
				s->n[k++] = n;
				s->n[i] = t;
				break;
			}
}

/* A value computed inside the set (the running epilogue value). */
static int
member_out(const Set *s, const Value *v)
{
	for (int i = 0; i < s->count; i++)
		for (int j = 0; j < s->n[i]->nout; j++)
			if (s->n[i]->out[j] == v)
				return 1;
	return 0;
}

static const char *
strip_name(const Value *v)
{
	while (v->kind == V_RESULT && ir_is_view(v->def))
		v = v->def->in[0];
	return v->name;
}

/* "softmax router, top-2 of 8 experts, renormalised" */
static size_t
route_summary(char *buf, size_t len, const Node *route)
{
	IrRouteAttrs ra;

	ir_route_attrs(route, &ra);
	return (size_t)snprintf(buf, len, "%s router, top-%lld of %lld experts%s%s%s",
				ra.router_name, (long long)ra.k, (long long)route->in[0]->type.dim[1],
				ra.renorm ? ", renormalised" : "",
				route->nin > 1 && route->in[1] ? ", selection bias" : "",
				ra.n_group > 1 ? ", group-limited" : "");
}

/* What an epilogue operand is, in words: "bias $b", "per-row %r", ... */
static void
operand_words(char *buf, size_t n, const Value *acc, const Value *v)
{
	const Value *src = v;
	int64_t numel = ir_type_numel(&v->type);
	const Type *t = &v->type;

	while (src->kind == V_RESULT && (ir_is_view(src->def) || src->def->op == OP_CAST))
		src = src->def->in[0];
	if (src->kind == V_RESULT && src->def->op == OP_GATHER) {
		snprintf(n ? buf : buf, n, "per-row %c%s gathered by %%%s",
			 src->def->in[0]->kind == V_WEIGHT ? '$' : '%', strip_name(src->def->in[0]),
			 src->def->in[1]->name);
		return;
	}
	if (numel == 1)
		snprintf(buf, n, "scalar");
	else if (t->dim[t->rank - 1] == 1)
		snprintf(buf, n, "per-row %c%s", src->kind == V_WEIGHT ? '$' : '%', src->name);
	else if (t->rank == acc->type.rank && ir_type_numel(t) != t->dim[t->rank - 1])
		snprintf(buf, n, "%c%s", src->kind == V_WEIGHT ? '$' : '%', src->name);
	else
		snprintf(buf, n, "column vector %c%s", src->kind == V_WEIGHT ? '$' : '%', src->name);
}

/*
 * The kernel in an engineer's words: what the GEMM reads, then its
 * epilogue, e.g. "grouped GEMM over 8 experts, A rows gathered by
 * %moe.rows / 2; epilogue: swiglu (silu)".
 */
static void
describe(char *buf, size_t len, const Set *s, const Node *anchor)
{
	size_t k = 0;
	const Value *acc = anchor->out[0];
	char w[256];

	buf[0] = 0;
	if (anchor->op == OP_GROUPED_MATMUL)
		k += (size_t)snprintf(buf + k, len - k, "grouped GEMM over %lld experts (%c%s)",
				      (long long)anchor->in[1]->type.dim[0],
				      anchor->in[1]->kind == V_WEIGHT ? '$' : '%', anchor->in[1]->name);
	else if (anchor->op == OP_MATMUL)
		k += (size_t)snprintf(buf + k, len - k, "GEMM with %c%s",
				      anchor->in[1]->kind == V_WEIGHT ? '$' : '%', anchor->in[1]->name);
	else if (anchor->op == OP_ROUTE)
		k += route_summary(buf + k, len - k, anchor);
	else
		k += (size_t)snprintf(buf + k, len - k, "token slots sorted by expert (%lld), "
				      "per-expert offsets on the device",
				      (long long)ir_attr_int(anchor, "experts", 0));
	for (int i = 0; i < s->count && k < len; i++) {
		const Node *x = s->n[i];
		if (x->op == OP_GATHER && x->out[0] == anchor->in[0]) {
			const Value *idx = x->in[1];
			if (idx->kind == V_RESULT && idx->def->op == OP_DIV)
				idx = idx->def->in[0];
			k += (size_t)snprintf(buf + k, len - k, ", A rows gathered by %%%s", idx->name);
		}
		if (x->op == OP_CONCAT && x->out[0] == anchor->in[0])
			k += (size_t)snprintf(buf + k, len - k, ", A (%%%s) read %d times along K",
					      x->in[0]->name, x->nin);
	}
	int first = 1;
	if (anchor->nin > 2 + (anchor->op == OP_GROUPED_MATMUL) && anchor->in[2 + (anchor->op == OP_GROUPED_MATMUL)]) {
		k += (size_t)snprintf(buf + k, len - MIN(k, len), "; epilogue: + bias");
		first = 0;
	}
	for (int i = 0; i < s->count && k < len; i++) {
		const Node *x = s->n[i];
		const char *sep = first ? "; epilogue: " : ", ";
		if (x == anchor || x->op == OP_CONST || ir_is_view(x) ||
		    x->op == OP_GATHER || x->op == OP_CONCAT ||
		    (x->op == OP_DIV && x->out[0]->type.dt != acc->type.dt))
			continue;
		first = 0;
		if (x->op == OP_CAST) {
			k += (size_t)snprintf(buf + k, len - k, "%sto %s", sep, dtype_name(x->out[0]->type.dt));
		} else if (x->op == OP_SWIGLU) {
			k += (size_t)snprintf(buf + k, len - k, "%sswiglu (%s", sep, ir_attr_str(x, "act", "silu"));
			if (ir_attr(x, "limit"))	/* a clamp (ir_glu_attrs) */
				k += (size_t)snprintf(buf + k, len - k, ", limit %g", ir_attr_float(x, "limit", 0));
			k += (size_t)snprintf(buf + k, len - k, ")");
		} else if (x->op == OP_SCATTER_ROWS) {
			k += (size_t)snprintf(buf + k, len - k, "%sscatter rows to token order by %%%s",
					      sep, x->in[1]->name);
		} else if (x->nin == 2 && (x->op == OP_ADD || x->op == OP_MUL || x->op == OP_SUB ||
					   x->op == OP_DIV)) {
			const Value *o = x->in[0]->def == anchor || member_out(s, x->in[0]) ? x->in[1] : x->in[0];
			operand_words(w, sizeof w, acc, o);
			k += (size_t)snprintf(buf + k, len - k, "%s%s %s", sep,
					      x->op == OP_ADD ? "+" : x->op == OP_MUL ? "×" :
					      x->op == OP_SUB ? "-" : "/", w);
		} else if (x->op == OP_QUANTIZE) {
			operand_words(w, sizeof w, acc, x->in[1]);
			k += (size_t)snprintf(buf + k, len - k, "%squantize to %s, %s scale%s", sep,
					      dtype_name(x->out[0]->type.dt), w,
					      x->nin > 2 && x->in[2] ? " and zero point" : "");
		} else if (x->op == OP_QUANTIZE_DYNAMIC) {
			k += (size_t)snprintf(buf + k, len - k, "%squantize to %s, a scale per %lld columns of a row",
					      sep, dtype_name(x->out[0]->type.dt),
					      (long long)ir_attr_int(x, "group", 0));
		} else if (x->op == OP_GELU) {
			k += (size_t)snprintf(buf + k, len - k, "%sgelu (%s)", sep, ir_attr_str(x, "approx", "none"));
		} else if (x->op == OP_SILU && ir_attr_float(x, "alpha", 1) != 1) {	/* QuickGelu */
			k += (size_t)snprintf(buf + k, len - k, "%ssilu (alpha %g)", sep, ir_attr_float(x, "alpha", 1));
		} else {
			k += (size_t)snprintf(buf + k, len - k, "%s%s", sep, ir_opname(x->op));
		}
	}
}

static int
fuse_anchor(Graph *g, Node *n, PassCtx *c)
{
	int grouped = n->op == OP_GROUPED_MATMUL;
	IrTemplate tmpl = grouped ? IR_TMPL_GROUPED_GEMM : n->op == OP_MATMUL ? IR_TMPL_GEMM
			  : n->op == OP_ROUTE ? IR_TMPL_ROUTE : IR_TMPL_PERMUTE;
	Set s = {.count = 0};
	char what[512];
	Node *call;

	ir_fill_uses(g);
	add(&s, n);
	if (n->op == OP_MATMUL || grouped) {
		if (grouped && !PERM_COPY_DEFAULT)
			prologue(g, n, &s);
		else
			prologue_repeat(g, n, &s);
		epilogue(g, n->out[0], grouped, &s, c);
		if (grouped)
			shared_index(g, n, &s);
	}
	sort(g, &s);
	describe(what, sizeof what, &s, n);
	call = pass_outline(g, s.n, s.count, tmpl);
	if (!call) {
		char cost[200];
		report_skip(c->report, "%s %%%s left unfused: its region is not convex; %s",
			    ir_opname(n->op), n->out[0]->name,
			    report_trip(cost, sizeof cost, n->out[0], s.count - 1, s.count - 1));
		return 0;
	}
	report_fused(c->report, call->callee->name, "%s: %s", ir_template_names[tmpl], what);
	return 1;
}

int
fuse_gemm(Module *m, PassCtx *c)
{
	Graph *g = ir_main_graph(m);
	int changed = 0;

	if (!g)
		return 0;
	for (Node *n = g->first, *next; n; n = next) {
		next = n->next;
		if (n->op != OP_MATMUL && n->op != OP_GROUPED_MATMUL && n->op != OP_ROUTE &&
		    n->op != OP_PERMUTE)
			continue;
		if (ir_weight_only(n->out[0]))
			continue;	/* weight preparation: folded or run once at load */
		if (n->op == OP_MATMUL && n->in[1]->type.rank != 2) {
			char sz[48];
			report_skip(c->report, "matmul %%%s not a GEMM kernel: B is not a 2-D matrix; cost: "
				    "an element-wise kernel, a thread an output (%s) on CUDA cores, no tensor "
				    "cores: 2 x %lld FLOP an output, each B element read once per row of A",
				    n->out[0]->name, report_size(sz, sizeof sz, &n->out[0]->type),
				    (long long)n->in[0]->type.dim[n->in[0]->type.rank - 1]);
			continue;
		}
		if (fuse_anchor(g, n, c)) {
			changed = 1;
			next = g->first;	/* the list changed: rescan; fused nodes are calls now */
		}
	}
	return changed;
}
