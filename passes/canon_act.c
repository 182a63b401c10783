/*
 * canon_act.c — the canon rewrites of activations: SiLU and GELU as the
 * exporters spell them, and the gated MLP (SwiGLU, GeGLU) as one GEMM with
 * gate and up columns interleaved, then swiglu.
 *
 *	%s = sigmoid %x                      %y = silu %x
 *	%y = mul %x, %s                =>
 *
 *	%d = div %x, 1.4142135               %y = gelu %x, approx=none
 *	%y = mul (mul %x, (add (erf %d), 1)), 0.5   =>
 *
 *	%g = matmul %h, $wg                  %w = reshape (concat (reshape $wg),
 *	%u = matmul %h, $wu                              (reshape $wu))
 *	%y = mul (silu %g), %u         =>    %y = swiglu (matmul %h, %w),
 *	                                              layout=interleave, act=silu
 *
 * Step-3.5's clamped SwiGLU, mul(clip(silu %g, max=l), clip(%u, min=-l,
 * max=l)), becomes the same swiglu with limit=l (act=silu's clamp).
 * x * sigmoid(alpha * x) (QuickGelu) is silu with alpha, which the GEMM
 * epilogue computes like any activation; the gated-MLP merge takes plain
 * SiLU only (swiglu has no alpha), and fuse-moe reads gpt-oss's clamped
 * SwiGLU in either spelling.  GELU constants (1/sqrt(2), sqrt(2/pi), 0.044715) match
 * to the precision of the dtype they are written in.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "match.h"

#define GELU_K (0.70710678118654752440)		/* 1/sqrt(2) */
#define GELU_T (0.79788456080286535588)		/* sqrt(2/pi) */
#define GELU_C (0.044715)

/* sigmoid's operand is alpha * x (a scalar constant alpha): alpha, or 0 */
static double
slope_of(Value *v, const Value *x)
{
	Node *m = def_op(v, OP_MUL);
	double a;
	DType dt;

	for (int i = 0; m && i < 2; i++)
		if (same_value(m->in[i], x) && type_like(m->in[i], m->out[0]) &&
		    const_scalar(m->in[1 - i], &a, &dt) && a != 0)
			return a;
	return 0;
}

/* mul(x, sigmoid(x)) -> silu(x); mul(x, sigmoid(mul(x, alpha))) -> silu(x,
 * alpha) (CLIP's quick_gelu, com.microsoft.QuickGelu: alpha 1.702) */
int
canon_silu(Canon *k, Node *n)
{
	for (int i = 0; i < 2; i++) {
		Node *s = def_op(n->in[1 - i], OP_SIGMOID);
		double alpha = 1;
		Builder b;

		if (!s || !type_like(n->in[i], n->out[0]) ||
		    !(same_value(s->in[0], n->in[i]) || (alpha = slope_of(s->in[0], n->in[i]))))
			continue;
		b = canon_builder(k, n);
		if (alpha != 1)
			ir_b_float(&b, "alpha", alpha);
		return canon_adopt(k, n, ir_b1(&b, OP_SILU, n->in[i]));
	}
	return 0;
}

/* v = add(1, f(u)) with f = op: *u gets u */
static int
one_plus(Value *v, Op op, Value **u)
{
	Node *a = def_op(v, OP_ADD), *f;

	for (int i = 0; a && i < 2; i++)
		if (const_near(a->in[1 - i], 1) && (f = def_op(a->in[i], op))) {
			*u = f->in[0];
			return 1;
		}
	return 0;
}

/* v = c * x^pw with c near want */
static int
is_monomial(Value *v, Value *x, double want, double pw)
{
	Value *base;
	double c, p;
	DType dt;

	return monomial(v, &base, &c, &p, &dt) && p == pw && same_value(base, x) &&
	       near(c, want, dt);
}

/* The tanh argument: sqrt(2/pi) * (x + 0.044715 x^3), or the "fast"
 * spelling sqrt(2/pi) * x * (1 + 0.044715 x^2). */
static int
gelu_tanh_arg(Value *u, Value *x)
{
	Prod p;
	Node *a;

	if (!prod_of(u, &p) || !near(p.coef, GELU_T, p.cdt))
		return 0;
	if (p.n == 1 && (a = def_op(p.f[0], OP_ADD))) {
		for (int i = 0; i < 2; i++)
			if (same_value(a->in[i], x) && is_monomial(a->in[1 - i], x, GELU_C, 3))
				return 1;
		return 0;
	}
	for (int i = 0; p.n == 2 && i < 2; i++)
		if (same_value(p.f[i], x) && (a = def_op(p.f[1 - i], OP_ADD)))
			for (int j = 0; j < 2; j++)
				if (const_near(a->in[j], 1) &&
				    is_monomial(a->in[1 - j], x, GELU_C, 2))
					return 1;
	return 0;
}

/*
 * 0.5 * x * (1 + erf(x / sqrt(2))) -> gelu(x); 0.5 * x * (1 + tanh(...)) ->
 * gelu(x, approx=tanh).  The product may be nested and ordered any way.
 */
int
canon_gelu(Canon *k, Node *n)
{
	Prod p;
	Value *u;
	Builder b;

	if (!prod_of(n->out[0], &p) || p.n != 2 || !near(p.coef, 0.5, p.cdt))
		return 0;
	for (int i = 0; i < 2; i++) {
		Value *x = p.f[i], *s = p.f[1 - i];
		const char *approx;

		if (!type_like(x, n->out[0]) || !dtype_is_float(x->type.dt))
			continue;
		if (one_plus(s, OP_ERF, &u) && is_monomial(u, x, GELU_K, 1))
			approx = "none";
		else if (one_plus(s, OP_TANH, &u) && gelu_tanh_arg(u, x))
			approx = "tanh";
		else
			continue;
		b = canon_builder(k, n);
		ir_b_str(&b, "approx", approx);
		return canon_adopt(k, n, ir_b1(&b, OP_GELU, x));
	}
	return 0;
}

/* One expert's matrix of a stacked [E,N,K] weight: gather(W, e, axis=0)
 * with e a scalar (DBRX's w1 and v1, separate stacks, sliced per slot). */
static Value *
expert_slice(const Value *w, Value **sel)
{
	const Node *ga = def_op(w, OP_GATHER);

	if (!ga || ir_attr_int(ga, "axis", 0) != 0 || ga->in[1]->type.rank != 0 ||
	    ga->in[0]->type.rank != 3 || !ir_weight_only(ga->in[0]))
		return NULL;
	*sel = ga->in[1];
	return ga->in[0];
}

/* The two matmuls of a gated MLP agree on everything but the weight: both
 * fixed, or both one expert's slice of two stacks by the same expert id
 * (then bias-free).  *gs, *us: the stacks, or NULL. */
static int
glu_pair(const Node *g, const Node *u, Value **gs, Value **us)
{
	const Value *gb = g->nin > 2 ? g->in[2] : NULL, *ub = u->nin > 2 ? u->in[2] : NULL;
	Value *sg = NULL, *su = NULL;

	if (!same_value(g->in[0], u->in[0]) || !type_like(g->in[1], u->in[1]) ||
	    g->in[1]->type.rank != 2 || !ir_type_static(&g->in[1]->type) ||
	    !type_like(g->out[0], u->out[0]) || !gb != !ub ||
	    (gb && !type_like(gb, ub)) || g->nattr != u->nattr)
		return 0;
	for (int i = 0; i < g->nattr; i++)
		if (!attr_same(&g->attr[i], &u->attr[i]))
			return 0;
	*gs = expert_slice(g->in[1], &sg);
	*us = expert_slice(u->in[1], &su);
	if (*gs && *us)
		return !gb && same_value(sg, su) && type_like(*gs, *us);
	*gs = *us = NULL;
	return ir_weight_only(g->in[1]) && ir_weight_only(u->in[1]) && ir_weight_only(gb) &&
	       ir_weight_only(ub);
}

/* Gate and up stacked on a new axis after axis ax, then merged: gate j and
 * up j end at 2j and 2j+1 of that axis. */
static Value *
interleave(Builder *b, Value *g, Value *u, int ax)
{
	const Type *t = &g->type;
	Dim d1[MAXRANK], d2[MAXRANK];
	Value *in[2];
	Node *c;

	if (b->err)
		return NULL;
	for (int i = 0, j = 0; i < t->rank; i++) {
		d1[j++] = t->dim[i];
		if (i == ax)
			d1[j++] = 1;
		d2[i] = i == ax ? ir_dim_mul(b->g->m, t->dim[i], 2) : t->dim[i];
	}
	in[0] = canon_reshape(b, g, t->rank + 1, d1);
	in[1] = canon_reshape(b, u, t->rank + 1, d1);
	if (!in[0] || !in[1])
		return NULL;
	ir_b_int(b, "axis", ax + 1);
	c = ir_b_node(b, OP_CONCAT, in, 2, 1);
	return c ? canon_reshape(b, c->out[0], t->rank, d2) : NULL;
}

/*
 * Gate and up B [N,K] each the dequantize of a quantised weight with scales
 * per output row ([N, K/block]: fbgemm_fp8's per channel, DeepSeek-V3's
 * blocks as cfg_quant repeats them over their rows), alike: the interleave
 * of the quantised weights and of their scales, dequantised after.  The
 * same values (each row keeps its scales), but B stays e4m3, so fp8-regroup
 * and fuse-dequant can run the merged GEMM FP8 x FP8 (glu_f8 says when);
 * otherwise the dequantised bf16 weights are interleaved (at load).  NULL
 * when they are not so.
 */
static Value *
interleave_quantised(Builder *b, Value *g, Value *u)
{
	Node *dg = def_op(g, OP_DEQUANTIZE), *du = def_op(u, OP_DEQUANTIZE);
	const Type *q, *sc;
	Value *wq, *ws;

	if (!dg || !du || dg->nin != 2 || du->nin != 2 || dg->nattr != du->nattr || dg->nattr > 16)
		return NULL;
	q = &dg->in[0]->type, sc = &dg->in[1]->type;
	if (!dtype_is_quantised(q->dt) || q->rank != 2 || sc->rank != 2 || sc->dim[0] != q->dim[0] ||
	    ir_attr_int(dg, "axis", 1) != 1 || !type_like(dg->in[0], du->in[0]) ||
	    !type_like(dg->in[1], du->in[1]) || !ir_weight_only(dg->in[0]) || !ir_weight_only(du->in[0]))
		return NULL;
	for (int i = 0; i < dg->nattr; i++)
		if (!attr_same(&dg->attr[i], &du->attr[i]))
			return NULL;
	if (!(wq = interleave(b, dg->in[0], du->in[0], 0)) || !(ws = interleave(b, dg->in[1], du->in[1], 0)))
		return NULL;
	memcpy(b->pend, dg->attr, sizeof *dg->attr * (size_t)dg->nattr);
	b->npend = dg->nattr;
	return ir_b2(b, OP_DEQUANTIZE, wq, ws);
}

/*
 * Does the merged gate|up reading a keep its weights e4m3?  FP8_GLU_DEFAULT:
 * when a is the model's own quantisation for FP8 x FP8, e4m3 with f32
 * scales per token and 128 columns (DeepSeek-V3's act_quant: transformers'
 * FP8Linear multiplies those e4m3 values by the e4m3 weights, the scales in
 * f32 after each block), so the GEMM computes what the model does;
 * --debug=fp8-glu: any input (a per-token one regrouped by fp8-regroup).
 */
static int
glu_f8(const Canon *k, const Value *a)
{
	const Node *dq = def_op(a, OP_DEQUANTIZE);
	int r = a->type.rank, axis;

	if (k->c->debug & DBG_FP8_GLU)
		return 1;
	if (!FP8_GLU_DEFAULT || !dq || (dq->nin > 2 && dq->in[2]) || r < 1)
		return 0;
	axis = (int)ir_attr_int(dq, "axis", 1);
	return dq->in[0]->type.dt == DT_F8E4M3 && dq->in[1]->type.dt == DT_F32 &&
	       dq->in[1]->type.rank == r && (axis == r - 1 || axis == -1) &&
	       ir_attr_int(dq, "block_size", 0) == 128;
}

static void
name2(Graph *g, Value *v, const char *base, const char *suffix)
{
	char buf[256];

	snprintf(buf, sizeof buf, "%s.%s", base, suffix);
	ir_set_name(g, v, buf);
}

static void
glu_skip(Canon *k, Node *n, const Node *g, const Node *u, const char *why)
{
	char sz[48];

	if (canon_report(k, n))
		report_skip(k->c->report, "gate and up matmuls %%%s, %%%s not merged: %s; cost: 2 GEMM "
			    "kernels reading their input (%s) twice, and the activation's product a kernel of "
			    "its own", g->out[0]->name, u->out[0]->name, why,
			    report_size(sz, sizeof sz, &g->in[0]->type));
}

/*
 * Step-3.5's clamp around a * u: a = clip(a', max=l), u = clip(u', min=-l,
 * max=l), each used by n alone.  Returns l and moves *a, *u to a', u'
 * (their users to *ua, *uu); 0 when there is none, or a half of it.
 */
static double
glu_clamp(Node *n, Value **a, Value **u, Node **ua, Node **uu)
{
	Node *ca = def_op(*a, OP_CLIP), *cu = def_op(*u, OP_CLIP);
	IrEwAttrs pa, pu;
	char why[64];

	if (!ca || !cu || ir_ew_attrs(ca, &pa, why, sizeof why) || ir_ew_attrs(cu, &pu, why, sizeof why))
		return 0;
	if (pa.lo != -INFINITY || !(pa.hi > 0 && pa.hi < INFINITY) || pu.lo != -pa.hi ||
	    pu.hi != pa.hi || sole_user(ca->out[0]) != n || sole_user(cu->out[0]) != n ||
	    !type_like(ca->in[0], ca->out[0]) || !type_like(cu->in[0], cu->out[0]))
		return 0;
	*a = ca->in[0], *u = cu->in[0], *ua = ca, *uu = cu;
	return pa.hi;
}

/*
 * mul(act(matmul(h, wg)), matmul(h, wu)), act silu or gelu -> swiglu of one
 * matmul whose N columns alternate gate and up; with silu, Step-3.5's clamp
 * (glu_clamp) as its limit.  Both matmuls and the activation must have no
 * other users.
 */
int
canon_glu(Canon *k, Node *n)
{
	for (int i = 0; i < 2; i++) {
		Value *av = n->in[i], *uv = n->in[1 - i];
		Node *ua = n, *uu = n;
		double lim = glu_clamp(n, &av, &uv, &ua, &uu);
		Node *act = av->kind == V_RESULT ? av->def : NULL;
		Node *g, *u = def_op(uv, OP_MATMUL);
		Value *w, *bias = NULL, *gs = NULL, *us = NULL;
		Builder b;
		int tb;

		if (!act || (act->op != OP_SILU && act->op != OP_GELU) || !u ||
		    (act->op == OP_SILU && ir_attr_float(act, "alpha", 1) != 1) ||
		    (lim > 0 && act->op != OP_SILU) ||
		    !(g = def_op(act->in[0], OP_MATMUL)) || !glu_pair(g, u, &gs, &us) ||
		    !type_like(av, n->out[0]))
			continue;
		if (sole_user(g->out[0]) != act || sole_user(act->out[0]) != ua ||
		    sole_user(u->out[0]) != uu) {
			glu_skip(k, n, g, u, "an intermediate has other users");
			continue;
		}
		tb = (int)ir_attr_int(g, "trans_b", 0);
		b = canon_builder(k, n);
		if (gs) {	/* interleave the stacks, then take the expert's slice */
			Value *sel = def_op(g->in[1], OP_GATHER)->in[1];
			if (!(w = interleave(&b, gs, us, tb ? 1 : 2)))
				continue;
			ir_b_int(&b, "axis", 0);
			w = ir_b2(&b, OP_GATHER, w, sel);
		} else if (!(tb && glu_f8(k, g->in[0]) && (w = interleave_quantised(&b, g->in[1], u->in[1]))) &&
			   !(w = interleave(&b, g->in[1], u->in[1], tb ? 0 : 1))) {
			continue;
		}
		if (!w)
			continue;
		if (g->nin > 2 && g->in[2]) {
			Value *gb = g->in[2], *ub = u->in[2];
			Dim nn = g->out[0]->type.dim[g->out[0]->type.rank - 1];
			if (gb->type.rank < 1 || gb->type.dim[gb->type.rank - 1] != nn)
				continue;	/* a scalar bias: leave it */
			if (gb->type.rank != 1) {
				gb = canon_reshape(&b, gb, 1, &nn);
				ub = canon_reshape(&b, ub, 1, &nn);
			}
			bias = gb && ub ? interleave(&b, gb, ub, 0) : NULL;
			if (!bias)
				continue;
		}
		Value *y = canon_matmul(&b, g, g->in[0], w, bias, (int)ir_attr_int(g, "trans_a", 0), tb);
		if (y) {
			name2(k->g, w, n->out[0]->name, "w_gate_up");
			name2(k->g, y, n->out[0]->name, "gate_up");
		}
		ir_b_str(&b, "layout", "interleave");
		ir_b_str(&b, "act", act->op == OP_SILU ? "silu" : "gelu");
		if (lim > 0)
			ir_b_float(&b, "limit", lim);
		if (act->op == OP_GELU && ir_attr(act, "approx"))
			ir_b_str(&b, "approx", ir_attr_str(act, "approx", "none"));
		return canon_adopt(k, n, y ? ir_b1(&b, OP_SWIGLU, y) : NULL);
	}
	return 0;
}
