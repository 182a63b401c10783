/*
 * fp8-regroup: FP8 weights with a scale per output channel (or per tensor,
 * which the frontends write as one per channel) whose GEMMs read activations
 * quantised per token (fbgemm_fp8, compressed-tensors float-quantized
 * channel and tensor strategies) take DeepSeek's form, the one the FP8 x FP8
 * kernels read (fuse-dequant, docs/codegen.md "FP8 x FP8"), on targets that
 * run them (PassOpts.fp8_mma: sm_90a):
 *
 *	%q, %s = quantize_dynamic %x, group=row        %q, %s = quantize_dynamic %x, group=128
 *	%a = dequantize %q, %s, block_size=K           %a = dequantize %q, %s, block_size=128
 *	weight $ws : f32[N,1]                      =>  weight $ws : f32[N,K/128]   (s[n] repeated)
 *	%w = dequantize $wq, $ws, block_size=K         %w = dequantize $wq, $ws, block_size=128
 *	%y = matmul %a, %w, trans_b=1
 *
 * and a moe node's: its x as above with the gate|up stack, and with
 * act_quant = I (the down input per token) act_quant=128 with the down stack.
 *
 * The weights' change is exact: every block of a row has the row's scale
 * (with data: repeated here; synthetic: Weight.col_repeat, the same bytes on
 * the host and the device).  The activations' is not: a scale per token and
 * 128 columns is finer than the model's per token, so the result moves by
 * e4m3 rounding noise (docs/codegen.md, "FP8 x FP8", numerics).  A clip
 * before the quantize (fbgemm's activation_scale_ub) stays: it bounds each
 * group's amax by the bound as it bounded the token's.  An activation is
 * regrouped only when every GEMM that reads it can then run FP8 x FP8 (else
 * it would change numerics for nothing); its weights only with it.
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

enum { GROUP = 128 };

/* The last axis of v's type, or -1 when symbolic. */
static int64_t
last_dim(const Value *v)
{
	const Type *t = &v->type;

	return t->rank > 0 && ir_dim_is_static(t->dim[t->rank - 1]) ? t->dim[t->rank - 1] : -1;
}

/* dq dequantizes e4m3 with f32 scales along its last axis in blocks of bs. */
static int
f8_dequant(const Node *dq, int64_t bs)
{
	int r = dq->in[0]->type.rank, axis = (int)ir_attr_int(dq, "axis", 1);

	return dq->op == OP_DEQUANTIZE && (dq->nin < 3 || !dq->in[2]) && dq->in[0]->type.dt == DT_F8E4M3 &&
	       dq->in[1]->type.dt == DT_F32 && dq->in[1]->type.rank == r && r >= 1 &&
	       (axis == r - 1 || axis == -1) && ir_attr_int(dq, "block_size", 0) == bs &&
	       last_dim(dq->in[0]) % GROUP == 0 && last_dim(dq->in[1]) == last_dim(dq->in[0]) / bs;
}

/* Is v a weight, or (prepared: 1) with --debug=fp8-glu computed from
 * weights alone (canon's interleave of a gate and an up weight, at load)? */
static int
weight_like(const Value *v, int prepared)
{
	return v->kind == V_WEIGHT || (prepared && v->kind == V_RESULT && ir_weight_only(v));
}

/* v is an e4m3 weight's dequantize per channel (its scale a weight of its
 * own, or prepared: 1), already in blocks of 128 (2), or neither (0). */
static int
weight_form(const Value *v, int prepared)
{
	const Node *dq = v->kind == V_RESULT ? v->def : NULL;
	int64_t K;

	if (!dq || dq->op != OP_DEQUANTIZE || !weight_like(dq->in[0], prepared) ||
	    !weight_like(dq->in[1], prepared) || (K = last_dim(dq->in[0])) <= 0 || dq->in[0]->type.rank < 2)
		return 0;
	if (f8_dequant(dq, GROUP))
		return 2;
	return f8_dequant(dq, K) && dq->in[1]->nuse == 1 ? 1 : 0;
}

/* The quantize_dynamic of x per token that the dequantize a undoes, e4m3,
 * its results read by that dequantize alone; else NULL. */
static Node *
act_quant(const Value *a)
{
	Node *dq = a->kind == V_RESULT ? a->def : NULL, *qd;
	int64_t K = last_dim(a);
	const Attr *g;

	if (!dq || K <= 0 || !f8_dequant(dq, K) || dq->in[0]->kind != V_RESULT)
		return NULL;
	qd = dq->in[0]->def;
	g = ir_attr(qd, "group");
	if (qd->op != OP_QUANTIZE_DYNAMIC || dq->in[0] != qd->out[0] || dq->in[1] != qd->out[1] ||
	    qd->out[0]->nuse != 1 || qd->out[1]->nuse != 1 || !g ||
	    !(g->kind == A_STR ? !strcmp(g->u.s, "row") : g->kind == A_INT && g->u.i == K && K != GROUP))
		return NULL;
	return qd;
}

/* The e4m3 weight dequantize that user u (reading a as operand i) multiplies
 * a with, when it is a GEMM that can run FP8 x FP8; else NULL. */
static Value *
gemm_weight(const Node *u, int i, int prepared)
{
	if (u->op == OP_MATMUL && i == 0 && ir_attr_int(u, "trans_b", 0) && weight_form(u->in[1], prepared))
		return u->in[1];
	if (u->op == OP_MOE && i == 0 && u->nin > 3 && u->in[3] && weight_form(u->in[3], 0))
		return u->in[3];
	return NULL;
}

static void
free_widened(void *p, size_t n)
{
	(void)n;
	free(p);
}

/* A prepared scale [.., N, 1] (weight_like) widened by an expand to
 * [.., N, C], computed with the rest of it (at load, or by fold). */
static int
widen_prepared(Graph *g, Node *dq, int64_t C, Diag *d)
{
	Builder b = {.g = g, .before = dq, .loc = dq->loc, .d = d};
	Type t = dq->in[1]->type;
	Value *e;

	t.dim[t.rank - 1] = C;
	ir_b_dims(&b, "shape", t.dim, t.rank);
	if (!(e = ir_b1(&b, OP_EXPAND, dq->in[1])))
		return -1;
	dq->in[1] = e;
	ir_set_int(g->m, dq, "block_size", GROUP);
	return 0;
}

/* A per-channel weight dequantize (weight_form 1) in blocks of 128: its
 * scale weight [.., N, 1] widened to [.., N, K/128], each value repeated. */
static int
widen(Module *m, Node *dq, Diag *d)
{
	Weight *w = dq->in[1]->weight;
	Type *t;
	int64_t C = last_dim(dq->in[0]) / GROUP, n;

	if (dq->in[1]->kind != V_WEIGHT)
		return widen_prepared(ir_main_graph(m), dq, C, d);
	t = &w->value->type;
	n = ir_type_numel(t);

	if (w->data) {
		float *v = malloc(sizeof *v * (size_t)(n * C) + 1);
		if (!v)
			return diag_error(d, LOC_NONE, "fp8-regroup: out of memory widening $%s", w->value->name);
		for (int64_t i = 0; i < n * C; i++)
			memcpy(&v[i], (const char *)w->data + sizeof *v * (size_t)(i / C), sizeof *v);
		if (w->free_data)
			w->free_data(w->data, w->size);
		w->data = v;
		w->size = sizeof *v * (size_t)(n * C);
		w->free_data = free_widened;
	} else {
		if (w->scale < 0)	/* the default scale follows the last dim */
			w->scale = ir_weight_scale(w);
		w->col_repeat = C * (w->col_repeat > 1 ? w->col_repeat : 1);
	}
	free(w->cache);	/* host copies of the old shape */
	w->cache = NULL;
	t->dim[t->rank - 1] = C;
	ir_set_int(m, dq, "block_size", GROUP);
	return 0;
}

/* The activation's quantisation per token and 128 columns. */
static void
regroup_act(Module *m, Node *qd, Node *dq)
{
	Type *s = &qd->out[1]->type;

	ir_set_int(m, qd, "group", GROUP);
	s->dim[s->rank - 1] = last_dim(qd->out[0]) / GROUP;
	ir_set_int(m, dq, "block_size", GROUP);
}

/* The activation a, if every GEMM reading it can run FP8 x FP8: regrouped
 * with their weights.  1 if changed, -1 on error. */
static int
regroup_gemms(Module *m, Value *a, PassCtx *c)
{
	Node *qd = act_quant(a);
	int prepared = FP8_GLU_ON(c->debug) != 0;

	if (!qd || a->nuse == 0)
		return 0;
	for (int i = 0; i < a->nuse; i++)
		if (!a->use[i].node || !gemm_weight(a->use[i].node, a->use[i].index, prepared)) {
			report_skip(c->report, "%%%s (e4m3 per token) not regrouped per token and 128 columns: "
				    "%s is not a GEMM with an e4m3 weight per channel or in blocks of 128, so it "
				    "reads %%%s in bf16 anyway (the model's per-token scales kept)", a->name,
				    a->use[i].node ? ir_opname(a->use[i].node->op) : "a graph result", a->name);
			return 0;
		}
	if (!c->fp8_mma || (c->debug & DBG_FP8_PER_TOKEN)) {
		report_skip(c->report, "%%%s (e4m3 per token) not regrouped per token and 128 columns: %s; "
			    "cost: its GEMMs on bf16 tensor cores, not FP8", a->name, c->fp8_mma ?
			    "--debug=fp8-per-token" : "a target without FP8 x FP8 wgmma (sm_90a)");
		return 0;
	}
	for (int i = 0; i < a->nuse; i++) {
		Value *w = gemm_weight(a->use[i].node, a->use[i].index, prepared);
		if (weight_form(w, prepared) == 1) {
			const char *sigil = w->def->in[0]->kind == V_WEIGHT ? "$" : "%";
			if (widen(m, w->def, c->d))
				return -1;
			report_note(c->report, "fp8-regroup: %s%s (e4m3): its scale per channel repeated over the blocks "
				    "of 128 along K", sigil, w->def->in[0]->name);
		}
	}
	regroup_act(m, qd, a->def);
	report_note(c->report, "fp8-regroup: %%%s quantised per token and 128 columns, not per token, "
		    "for FP8 x FP8 (e4m3 rounding noise; docs/codegen.md)", a->name);
	return 1;
}

/* A moe node's down input per token (act_quant = I) per 128 columns, with
 * its down stack.  1 if changed, -1 on error. */
static int
regroup_down(Module *m, Node *moe, PassCtx *c)
{
	int64_t I = moe->nin > 4 && moe->in[4] ? last_dim(moe->in[4]) : -1;

	if (I <= GROUP || ir_attr_int(moe, "act_quant", 0) != I || !weight_form(moe->in[4], 0) ||
	    !c->fp8_mma || (c->debug & DBG_FP8_PER_TOKEN))
		return 0;
	if (weight_form(moe->in[4], 0) == 1 && widen(m, moe->in[4]->def, c->d))
		return -1;
	ir_set_int(m, moe, "act_quant", GROUP);
	report_note(c->report, "fp8-regroup: moe %%%s's down input quantised per token and 128 columns (act_quant=%d), "
		    "not per token, for FP8 x FP8", moe->out[0]->name, GROUP);
	return 1;
}

int
fp8_regroup(Module *m, PassCtx *c)
{
	Graph *g = ir_main_graph(m);
	int changed = 0, rc;

	if (!g)
		return 0;
	ir_fill_uses(g);
	for (Node *n = g->first; n; n = n->next) {
		if (n->op == OP_DEQUANTIZE && (rc = regroup_gemms(m, n->out[0], c)) != 0) {
			if (rc < 0)
				return -1;
			changed = 1;
		}
		if (n->op == OP_MOE && (rc = regroup_down(m, n, c)) != 0) {
			if (rc < 0)
				return -1;
			changed = 1;
		}
	}
	return changed;
}
