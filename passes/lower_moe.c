/*
 * lower-moe: one `moe` op becomes the grouped pipeline that codegen runs:
 * route, permute (per-expert offsets on the device), the gate|up grouped
 * GEMM reading tokens through the permutation with SwiGLU after it, the
 * down grouped GEMM scaled by the routing weight and scattered back to
 * token order, and the sum over the k choices.
 *
 *	%y = moe %x, %l, ...       =>   %w, %ids = route %l, ...
 *	                                %offs, %rows, %pos = permute %ids, experts=E
 *	                                %src = div %rows, k ; %xs = gather %x, %src
 *	                                %h = grouped_matmul %xs, $wgu', %offs ; %a = swiglu %h
 *	                                [act_quant=N: %a = dequantize(quantize_dynamic %a, group=N)]
 *	                                [act_quant_ub=U: %a clipped to [-U, U] first]
 *	                                %o = grouped_matmul %a, $wdown, %offs
 *	                                %os = mul %o, (gather %w, %rows)
 *	                                %ys = scatter_rows %os, %rows ; %y = reduce_sum [T,k,H] over k
 *
 * Gate and up weights are re-laid out (as weight-only ops, folded at compile
 * time or run once at load) so columns 2j and 2j+1 hold gate j and up j: a
 * GEMM tile then holds matching pairs and SwiGLU runs on its accumulators.
 *
 * With --ep=N (PassCtx.ep) a moe becomes one rank's part instead
 * (partition_ep.c), whose experts run through the same lower_moe_slots.
 */
#include <stdio.h>
#include <string.h>

#include "passes.h"

static Value *
reshape(Builder *b, Value *v, int rank, const Dim *dims)
{
	ir_b_dims(b, "shape", dims, rank);
	return ir_b1(b, OP_RESHAPE, v);
}

/* [E, 2I, ...] with gate rows 0..I-1, up rows I..2I-1 -> interleaved rows. */
static Value *
interleave(Builder *b, Value *w)
{
	const Type *t = &w->type;
	Dim d4[4] = {t->dim[0], 2, ir_dim_div(b->g->m, t->dim[1], 2), t->rank == 3 ? t->dim[2] : 1};
	int64_t perm[4] = {0, 2, 1, 3};
	Value *r = reshape(b, w, 4, d4);

	ir_b_ints(b, "perm", perm, 4);
	r = ir_b1(b, OP_TRANSPOSE, r);
	return reshape(b, r, t->rank, t->dim);
}

/*
 * A dequantized gate|up weight (blocks along K) interleaves its operands
 * instead: the scales and zero points have the weight's rows, so the
 * dequantize stays next to the GEMM that reads it (fuse-dequant moves it
 * into the kernel, which then reads the packed weights).
 */
static Value *
interleave_w(Builder *b, Value *w, DType xdt)
{
	Node *dq = w->kind == V_RESULT ? w->def : NULL;
	Value *in[3] = {NULL, NULL, NULL};
	Node *n;

	/* as fuse-dequant will take it: blocks along K, dequantised to the tokens' bf16/f16
	 * (a refused one keeps the plain interleave, which runs at load) */
	if (!dq || dq->op != OP_DEQUANTIZE || w->type.rank != 3 || ir_attr_int(dq, "block_size", 0) < PASS_DEQUANT_MIN_BLOCK ||
	    w->type.dt != xdt || (xdt != DT_BF16 && xdt != DT_F16) ||
	    (ir_attr_int(dq, "axis", 1) != 2 && ir_attr_int(dq, "axis", 1) != -1) || dq->in[1]->type.rank != 3)
		return interleave(b, w);
	for (int i = 0; i < dq->nin; i++)
		if (dq->in[i])
			in[i] = interleave(b, dq->in[i]);
	for (int i = 0; i < dq->nattr && b->npend < (int)NELEM(b->pend); i++)
		b->pend[b->npend++] = dq->attr[i];
	n = ir_b_node(b, OP_DEQUANTIZE, in, dq->nin, 1);
	return n ? n->out[0] : NULL;
}

static Value *
const_i32(Builder *b, int64_t v)
{
	return ir_b_const_i(b, DT_I32, &v, 1, 0);
}

static void
copy_router_attrs(Builder *b, const Node *moe)
{
	for (size_t i = 0; i < IR_NROUTE_ATTRS; i++) {
		const Attr *a = ir_attr(moe, ir_route_attr_names[i]);
		if (a && b->npend < (int)NELEM(b->pend))
			b->pend[b->npend++] = *a;
	}
}

static int64_t
route_k(const Node *moe)
{
	IrRouteAttrs ra;

	ir_route_attrs(moe, &ra);
	return ra.k;
}

static const char *
route_name(const Node *moe)
{
	IrRouteAttrs ra;

	ir_route_attrs(moe, &ra);
	return ra.router_name;
}

/* gate|up weights (and bias) as the grouped GEMM's tile wants them (an
 * ungated expert's up weights as they are) */
static void
gate_up_layout(Builder *b, const Node *moe, Value **wgu, Value **bgu, DType xdt)
{
	if (strcmp(ir_attr_str(moe, "gu_layout", "concat"), "interleave") == 0 ||
	    !ir_attr_int(moe, "gated", 1))
		return;
	*wgu = interleave_w(b, *wgu, xdt);
	if (*bgu)
		*bgu = interleave(b, *bgu);
}

/* An ungated expert's act(h) as the scalar ops an epilogue holds:
 * relu2 is relu, then pow 2. */
static Value *
ungated_act(Builder *b, const Node *moe, Value *h)
{
	const char *act = ir_attr_str(moe, "act", "silu");

	if (strcmp(act, "gelu") == 0) {
		ir_b_str(b, "approx", ir_attr_str(moe, "approx", "none"));
		return ir_b1(b, OP_GELU, h);
	}
	if (strcmp(act, "silu") == 0)
		return ir_b1(b, OP_SILU, h);
	h = ir_b1(b, OP_RELU, h);
	if (strcmp(act, "relu2") == 0)
		h = ir_b2(b, OP_POW, h, ir_b_const_f(b, h->type.dt, 2));
	return h;
}

/* The gate|up GEMM's output through the activation: swiglu on matching
 * gate and up columns, or an ungated expert's act. */
static Value *
activation(Builder *b, const Node *moe, Value *h)
{
	const char *act = ir_attr_str(moe, "act", "silu");

	if (!ir_attr_int(moe, "gated", 1))
		return ungated_act(b, moe, h);
	ir_b_str(b, "layout", "interleave");
	ir_b_str(b, "act", act);
	/* swiglu's act attributes are moe's (one table, ir_glu_attrs): copied as written */
	if (ir_attr(moe, "alpha"))
		ir_b_float(b, "alpha", ir_attr_float(moe, "alpha", 0));
	if (ir_attr(moe, "limit"))
		ir_b_float(b, "limit", ir_attr_float(moe, "limit", 0));
	if (ir_attr(moe, "approx"))
		ir_b_str(b, "approx", ir_attr_str(moe, "approx", "none"));
	return ir_b1(b, OP_SWIGLU, h);
}

/* The routing weight of each sorted row, [R,1] in dtype dt. */
static Value *
row_weights(Builder *b, Value *w, Value *rows, Dim R, DType dt)
{
	Dim r1[1] = {R}, r2[2] = {R, 1};
	Value *wflat = reshape(b, w, 1, r1);

	ir_b_int(b, "axis", 0);
	Value *ws = reshape(b, ir_b2(b, OP_GATHER, wflat, rows), 2, r2);
	if (ws && dt != ws->type.dt) {
		ir_b_str(b, "to", dtype_name(dt));
		ws = ir_b1(b, OP_CAST, ws);
	}
	return ws;
}

Value *
lower_moe_slots(Builder *b, const Node *moe, const MoeSlots *s, Value **named)
{
	Module *m = b->g->m;
	Value *wgu = s->wgu, *bgu = s->bgu, *in[4];
	int64_t k = s->ids->type.dim[1];
	Dim R = ir_dim_mul(m, s->ids->type.dim[0], k);
	DType xdt = s->x->type.dt;
	int scale_input = ir_attr_int(moe, "scale_input", 0) != 0;
	Node *n;

	ir_b_int(b, "experts", s->experts);
	n = ir_b_node(b, OP_PERMUTE, &s->ids, 1, 3);
	if (!n)
		return NULL;
	Value *offs = n->out[0], *rows = n->out[1];

	/* gate|up: tokens gathered through the permutation (scale_input: each
	 * row times its routing weight, in x's dtype), SwiGLU after */
	gate_up_layout(b, moe, &wgu, &bgu, xdt);
	Value *src = ir_b2(b, OP_DIV, rows, const_i32(b, k));
	ir_b_int(b, "axis", 0);
	Value *xs = ir_b2(b, OP_GATHER, s->x, src);
	if (scale_input)
		xs = ir_b2(b, OP_MUL, xs, row_weights(b, s->w, rows, R, xdt));
	in[0] = xs, in[1] = wgu, in[2] = offs, in[3] = bgu;
	ir_b_str(b, "to", dtype_name(xdt));
	n = ir_b_node(b, OP_GROUPED_MATMUL, in, bgu ? 4 : 3, 1);
	if (!n)
		return NULL;
	Value *a = activation(b, moe, n->out[0]);
	int64_t aq = ir_attr_int(moe, "act_quant", 0);
	if (a && aq > 0)	/* act_quant: quantised per token and aq columns, then dequantised */
		a = ir_b_act_quant(b, a, aq, ir_attr_float(moe, "act_quant_ub", 0));
	if (!a)
		return NULL;

	/* down: scaled by the routing weight (unless the input was), scattered
	 * back to slot order */
	in[0] = a, in[1] = s->wdn, in[2] = offs, in[3] = s->bdn;
	ir_b_str(b, "to", "f32");
	n = ir_b_node(b, OP_GROUPED_MATMUL, in, s->bdn ? 4 : 3, 1);
	if (!n)
		return NULL;
	Value *o = n->out[0];
	Dim r1[1] = {R};
	Value *os = scale_input || s->slots_out ? o : ir_b2(b, OP_MUL, o, row_weights(b, s->w, rows, R, DT_F32));
	if (os && (s->slots_x || s->slots_out) && xdt != DT_F32) {	/* rounded once, after the weight (slots_out: before it): the down's epilogue */
		ir_b_str(b, "to", dtype_name(xdt));
		os = ir_b1(b, OP_CAST, os);
	}
	ir_b_dims(b, "rows", r1, 1);
	Value *ys = ir_b2(b, OP_SCATTER_ROWS, os, rows);
	if (named) {
		Value *v[] = {offs, rows, src, xs, a, o, ys};
		memcpy(named, v, sizeof v);
	}
	return ys;
}

/*
 * Whether the slots are rounded to x's type: --debug=slots-x for every moe;
 * --debug=slots-ref (or SLOTS_REF_DEFAULT) for a moe the importer marked
 * slots=x, the families whose reference rounds each weighted expert output
 * to the model dtype (frontend/cfg_family.c, slots_x_types).
 */
enum { SLOTS_REF_DEFAULT = 1 };	/* since session 35 (H200: Qwen3-30B-A3B T = 4096 0.951x); 0: f32 slots unless slots-x */

int
lower_moe_slots_x(const Node *moe, DbgFlags debug)
{
	int ref = strcmp(ir_attr_str(moe, "slots", ""), "x") == 0;

	return (debug & DBG_SLOTS_X) || (ref && (SLOTS_REF_DEFAULT || (debug & DBG_SLOTS_REF)));
}

/*
 * Whether a moe's slots hold each expert's output rounded to x's type,
 * unweighted, the routing weight applied in f32 by the sum: --debug=fp8 for
 * every moe of bf16/f16 x whose slots would be f32; SLOTS_OUT_DEFAULT for
 * those the importer marked slots=out (frontend/cfg_family.c,
 * slots_out_types).
 * transformers' DeepSeek-V3 block rounds so (the expert's bf16 output times
 * the f32 weight, index_add_ into f32); half the bytes of f32 slots in the
 * down GEMM's stores and the sum's loads.
 */
/* the default since session 38's H200 A/B (bench/ab/fp8l2.ab's so arm): DeepSeek-V3 FP8 T = 4096
 * 6046.7 -> 5917.3 us (0.979x), T = 256 0.987x; the sum k8 241 -> 136 us; rel_l2 1.0e-3 against f32
 * slots (transformers' own rounding, above).  Expert parallelism (partition_ep.c) weights such slots
 * on the rank, in f32, so that its slots stay lower-moe's bit for bit (tests/ep/ep.sh). */
enum { SLOTS_OUT_DEFAULT = 1 };

int
lower_moe_slots_out(const Node *moe, int slots_x, DbgFlags debug)
{
	DType xdt = moe->in[0]->type.dt;

	int ref = strcmp(ir_attr_str(moe, "slots", ""), "out") == 0;

	return !slots_x && (xdt == DT_BF16 || xdt == DT_F16) && !ir_attr_int(moe, "scale_input", 0) &&
	       ((ref && SLOTS_OUT_DEFAULT) || (debug & DBG_FP8));
}

Value *
lower_moe_f32(Builder *b, Value *v)
{
	if (!v || v->type.dt == DT_F32)
		return v;
	ir_b_str(b, "to", "f32");
	return ir_b1(b, OP_CAST, v);
}

Value *
lower_moe_sum(Builder *b, Value *ys, Dim T, int64_t k, DType dt, Value *w)
{
	Dim tkh[3] = {T, k, ys->type.dim[1]}, tk1[3] = {T, k, 1};
	int64_t ax = 1;
	Value *y3 = reshape(b, ys, 3, tkh);

	y3 = lower_moe_f32(b, y3);	/* slots in x's type (slots_x): the sum in f32 */
	if (w)	/* slots_out: each slot times its routing weight, in f32 */
		y3 = ir_b2(b, OP_MUL, y3, reshape(b, w, 3, tk1));
	ir_b_ints(b, "axes", &ax, 1);
	ir_b_int(b, "keepdims", 0);
	Value *y = ir_b1(b, OP_REDUCE_SUM, y3);
	if (y && dt != DT_F32) {
		ir_b_str(b, "to", dtype_name(dt));
		y = ir_b1(b, OP_CAST, y);
	}
	return y;
}

Node *
lower_moe_route(Builder *b, const Node *moe)
{
	Value *in[2] = {moe->in[1], moe->in[2]};

	copy_router_attrs(b, moe);
	return ir_b_node(b, OP_ROUTE, in, in[1] ? 2 : 1, 2);
}

void
lower_moe_names(Graph *g, const Node *moe, Value *const *v, const char *const *suffix, int n)
{
	for (int i = 0; i < n; i++) {
		char nm[256];
		snprintf(nm, sizeof nm, "%s.%s", moe->out[0]->name, suffix[i]);
		if (v[i])
			ir_set_name(g, v[i], nm);
	}
}

static Value *
lower(Graph *g, Node *moe, PassCtx *c)
{
	Builder b = {.g = g, .before = moe, .loc = moe->loc, .d = c->d};
	Value *x = moe->in[0];
	int64_t k = route_k(moe), E = moe->in[3]->type.dim[0];
	Value *v[9];
	Node *n;

	/* route and permute: all on the device, nothing read on the host */
	if (!(n = lower_moe_route(&b, moe)))
		return NULL;
	MoeSlots s = {.x = x, .w = n->out[0], .ids = n->out[1], .wgu = moe->in[3],
		      .wdn = moe->in[4], .bgu = moe->nin > 5 ? moe->in[5] : NULL,
		      .bdn = moe->nin > 6 ? moe->in[6] : NULL, .experts = E,
		      .slots_x = lower_moe_slots_x(moe, c->debug)};
	s.slots_out = lower_moe_slots_out(moe, s.slots_x, c->debug);
	v[0] = s.w, v[1] = s.ids;
	Value *ys = lower_moe_slots(&b, moe, &s, &v[2]);
	/* the sum over the k choices, in a fixed order: deterministic */
	Value *y = ys ? lower_moe_sum(&b, ys, x->type.dim[0], k, x->type.dt, s.slots_out ? s.w : NULL) : NULL;
	if (y) {
		static const char *const suffix[] = {"w", "ids", "offs", "rows", "src", "xs", "act",
						     "down", "slots"};
		lower_moe_names(g, moe, v, suffix, (int)NELEM(suffix));
	}
	int gated = ir_attr_int(moe, "gated", 1) != 0, sin = ir_attr_int(moe, "scale_input", 0) != 0;
	if (y && c->report)
		report_note(c->report, "moe %%%s lowered: route (%s, top-%lld of %lld), permute, "
			    "%s%s grouped GEMM + %s (%s), down grouped GEMM%s "
			    "+ scatter to token order, sum over k",
			    moe->out[0]->name, route_name(moe), (long long)k, (long long)E,
			    sin ? "rows scaled by the routing weight, " : "", gated ? "gate|up" : "up",
			    gated ? "swiglu" : "ungated act", ir_attr_str(moe, "act", "silu"),
			    sin ? "" : " + routing weight");
	return b.err ? NULL : y;
}

int
lower_moe(Module *m, PassCtx *c)
{
	int changed = 0;

	for (int i = 0; i < m->ngraph; i++) {
		Graph *g = m->graph[i];
		for (Node *n = g->first, *next; n; n = next) {
			next = n->next;
			if (n->op != OP_MOE || n->in[0]->type.rank != 2 || n->in[3]->type.dim[0] < 0)
				continue;
			Value *y = c->ep ? partition_ep(g, n, c) : lower(g, n, c);
			if (!y)
				return -1;
			pass_take_over(g, n, n->out[0], y);
			changed = 1;
		}
	}
	return changed;
}
