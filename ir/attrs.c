/*
 * attrs.c — typed attribute getters: for each op family, the attributes'
 * names, types and defaults written once, decoded in one place for the
 * shape rules (infer.c), the interpreter (eval_*.c), the passes and codegen.
 *
 *	%w, %ids = route %logits, k=2, renorm=1      ir_route_attrs(n, &r)
 *	   => r.router = IR_ROUTER_SOFTMAX, r.k = 2, r.renorm = 1, r.scale = 1, ...
 */
#include <math.h>
#include <string.h>

#include "ir.h"

/*
 * Router attributes of moe and route.  name: type = default.
 *	router: str = softmax (softmax | sigmoid | topk_softmax | sparsemixer)
 *	k: int, required (-1 when absent: infer.c refuses it)
 *	renorm: int = 0; scale: float = 1
 *	n_group: int = 1; topk_group: int = n_group
 *	group_score: str = max (max | top2)
 *	group_fill: float = -inf (what the experts of dropped groups select with)
 *	jitter_eps: float = 0.01 (sparsemixer's threshold is 2 jitter_eps)
 */
const char *const ir_route_attr_names[IR_NROUTE_ATTRS] = {
	"router", "k", "renorm", "scale", "n_group", "topk_group", "group_score", "group_fill",
	"jitter_eps",
};

void
ir_route_attrs(const Node *n, IrRouteAttrs *r)
{
	const char *gs = ir_attr_str(n, "group_score", "max");

	memset(r, 0, sizeof *r);
	r->router_name = ir_attr_str(n, "router", "softmax");
	r->router = strcmp(r->router_name, "softmax") == 0 ? IR_ROUTER_SOFTMAX
		  : strcmp(r->router_name, "sigmoid") == 0 ? IR_ROUTER_SIGMOID
		  : strcmp(r->router_name, "topk_softmax") == 0 ? IR_ROUTER_TOPK_SOFTMAX
		  : strcmp(r->router_name, "sparsemixer") == 0 ? IR_ROUTER_SPARSEMIXER
		  : IR_ROUTER_UNKNOWN;
	r->k = ir_attr_int(n, "k", -1);
	r->renorm = (int)ir_attr_int(n, "renorm", 0);
	r->scale = ir_attr_float(n, "scale", 1.0);
	r->n_group = ir_attr_int(n, "n_group", 1);
	r->topk_group = ir_attr_int(n, "topk_group", r->n_group);
	r->group_score_name = gs;
	r->group_score = strcmp(gs, "max") == 0 ? IR_GROUP_MAX
		       : strcmp(gs, "top2") == 0 ? IR_GROUP_TOP2 : IR_GROUP_UNKNOWN;
	r->group_fill = ir_attr_float(n, "group_fill", -INFINITY);
	r->jitter_eps = ir_attr_float(n, "jitter_eps", 0.01);
}

/*
 * Attributes of the scalar elementwise ops (OPF_SCALAR):
 *	gelu approx: str = none (none | tanh)
 *	leaky_relu alpha: float = 0.01; hard_sigmoid alpha: float = 0.2, beta: float = 0.5
 *	clip min: float = -inf, max: float = inf
 */
int
ir_ew_attrs(const Node *n, IrEwAttrs *a, char *why, size_t whylen)
{
	const char *s = ir_attr_str(n, "approx", "none");

	memset(a, 0, sizeof *a);
	a->tanh_approx = n->op == OP_GELU && strcmp(s, "tanh") == 0;
	if (n->op == OP_GELU && !a->tanh_approx && strcmp(s, "none") != 0)
		return snprintf(why, whylen, "approx must be none or tanh, not %s", s), -1;
	a->alpha = ir_attr_float(n, "alpha", n->op == OP_HARD_SIGMOID ? 0.2 : n->op == OP_SILU ? 1.0 : 0.01);
	a->beta = ir_attr_float(n, "beta", 0.5);
	a->lo = ir_attr_float(n, "min", -INFINITY);
	a->hi = ir_attr_float(n, "max", INFINITY);
	return 0;
}

/*
 * swiglu and moe's gated activation:
 *	act: str = silu (silu | gelu | oai | relu); approx: str = none (gelu: none | tanh)
 *	layout (moe: gu_layout): str = concat (concat | interleave)
 *	alpha: float = 1.702 (oai)
 *	limit: float = 7.0 for oai, none for silu (> 0); gelu and relu take none
 * and moe's alone:
 *	gated: int = 1; 0: experts with no gate half, a = act(h) for act
 *	    relu | relu2 | silu | gelu (relu2 is ungated only; no limit, no layout)
 *	scale_input: int = 0; 1: the routing weight scales the expert's input
 *	    row, not its output (Llama 4)
 */
int
ir_glu_attrs(const Node *n, const char *laykey, IrGluAttrs *g, char *why, size_t whylen)
{
	const char *act = ir_attr_str(n, "act", "silu"), *lay = ir_attr_str(n, laykey, "concat");
	const char *ap = ir_attr_str(n, "approx", "none");
	int has_limit = ir_attr(n, "limit") != NULL;

	memset(g, 0, sizeof *g);
	int moe = strcmp(laykey, "gu_layout") == 0;

	g->gated = moe ? ir_attr_int(n, "gated", 1) != 0 : 1;
	g->scale_input = moe && ir_attr_int(n, "scale_input", 0) != 0;
	g->act = strcmp(act, "silu") == 0 ? IR_GLU_SILU : strcmp(act, "gelu") == 0 ? IR_GLU_GELU
	       : strcmp(act, "oai") == 0 ? IR_GLU_OAI : strcmp(act, "relu") == 0 ? IR_GLU_RELU
	       : strcmp(act, "relu2") == 0 ? IR_GLU_RELU2 : IR_GLU_UNKNOWN;
	if (g->gated && (g->act == IR_GLU_UNKNOWN || g->act == IR_GLU_RELU2))
		return snprintf(why, whylen, "act must be silu, gelu, oai or relu, not %s", act), -1;
	if (!g->gated && (g->act == IR_GLU_UNKNOWN || g->act == IR_GLU_OAI))
		return snprintf(why, whylen, "an ungated act must be relu, relu2, silu or gelu, not %s", act), -1;
	if (!g->gated && (has_limit || ir_attr(n, laykey)))
		return snprintf(why, whylen, "gated=0 takes no limit or %s", laykey), -1;
	g->interleave = strcmp(lay, "interleave") == 0;
	if (!g->interleave && strcmp(lay, "concat") != 0)
		return snprintf(why, whylen, "%s must be concat or interleave, not %s", laykey, lay), -1;
	g->tanh_approx = g->act == IR_GLU_GELU && strcmp(ap, "tanh") == 0;
	if (g->act == IR_GLU_GELU && !g->tanh_approx && strcmp(ap, "none") != 0)
		return snprintf(why, whylen, "approx must be none or tanh, not %s", ap), -1;
	g->alpha = ir_attr_float(n, "alpha", 1.702);
	g->limit = ir_attr_float(n, "limit", g->act == IR_GLU_OAI ? 7.0 : INFINITY);
	if (has_limit && (g->act == IR_GLU_GELU || g->act == IR_GLU_RELU || g->act == IR_GLU_RELU2))
		return snprintf(why, whylen, "limit is defined for act silu and oai, not %s", act), -1;
	if (!(g->limit > 0))
		return snprintf(why, whylen, "limit must be > 0, not %g", g->limit), -1;
	return 0;
}

/*
 * topk: k: int, required (-1: the whole axis, a sort; an export's argsort
 * of a symbolic length; absent: -2, which infer refuses); axis: int = -1;
 * largest: int = 1 (0: the k smallest).  Results sorted, ties to the lower
 * index.
 */
void
ir_topk_attrs(const Node *n, IrTopkAttrs *t)
{
	t->k = ir_attr_int(n, "k", -2);
	t->axis = ir_attr_int(n, "axis", -1);
	t->largest = (int)ir_attr_int(n, "largest", 1);
}

/*
 * ep_pack: combine: str = slots (slots | sum).
 */
int
ir_ep_sum(const Node *n)
{
	const char *c = ir_attr_str(n, "combine", "slots");

	return !strcmp(c, "sum") ? 1 : !strcmp(c, "slots") ? 0 : -1;
}

/*
 * quantize, dequantize: axis: int = 1; block_size: int = 0 (>= 0).
 */
int
ir_quant_attrs(const Node *n, int xrank, const int64_t *xdim, int srank, const int64_t *sdim,
	       IrQuantAttrs *q, char *why, size_t whylen)
{
	int one = 1;

	q->axis = ir_axis(ir_attr_int(n, "axis", 1), xrank);
	q->block_size = ir_attr_int(n, "block_size", 0);
	if (q->block_size < 0)
		return snprintf(why, whylen, "negative block_size"), -1;
	if (q->block_size > 0) {
		if (srank != xrank || q->axis < 0)
			return snprintf(why, whylen, "a blocked scale must have x's rank"), -1;
		for (int i = 0; i < xrank; i++) {
			int64_t want = i != q->axis || xdim[i] < 0 ? xdim[i]
				     : (xdim[i] + q->block_size - 1) / q->block_size;
			if (sdim[i] != want && !(i == q->axis && xdim[i] < 0))
				return snprintf(why, whylen, "scale dim %d is %lld, blocks need %lld", i,
						(long long)sdim[i], (long long)want), -1;
		}
		q->layout = IR_QUANT_BLOCK;
		return 0;
	}
	for (int i = 0; i < srank; i++)
		one &= sdim[i] == 1;
	if (one) {
		q->layout = IR_QUANT_TENSOR;
		return 0;
	}
	if (srank == 1 && q->axis >= 0 && sdim[0] == xdim[q->axis]) {
		q->layout = IR_QUANT_AXIS;
		return 0;
	}
	return snprintf(why, whylen, "the scale must be a scalar, 1-D along axis %d, or blocked",
			q->axis), -1;
}

/*
 * A kernel's template: str, absent for none.
 *	gemm | grouped_gemm (fuse-gemm: a matmul with prologue and epilogue),
 *	elementwise | row_reduce (fuse-ew), route | permute (fuse-gemm)
 */
const char *const ir_template_names[IR_NTMPL] = {
	[IR_TMPL_NONE] = "", [IR_TMPL_GEMM] = "gemm", [IR_TMPL_GROUPED_GEMM] = "grouped_gemm",
	[IR_TMPL_ELEMENTWISE] = "elementwise", [IR_TMPL_ROW_REDUCE] = "row_reduce",
	[IR_TMPL_ROUTE] = "route", [IR_TMPL_PERMUTE] = "permute",
};

IrTemplate
ir_kernel_template(const Graph *k)
{
	const char *s = ir_graph_str(k, "template", NULL);

	if (!s)
		return IR_TMPL_NONE;
	for (int t = IR_TMPL_NONE + 1; t < IR_NTMPL; t++)
		if (strcmp(s, ir_template_names[t]) == 0)
			return (IrTemplate)t;
	return IR_TMPL_UNKNOWN;
}

void
ir_set_kernel_template(Graph *k, IrTemplate t)
{
	if (t > IR_TMPL_NONE && t < IR_NTMPL)
		ir_graph_set_str(k, "template", ir_template_names[t]);
}
