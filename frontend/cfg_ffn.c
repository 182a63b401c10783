/*
 * cfg_ffn.c — the pieces a config-built block is made of: norms, linear
 * layers on [out, in] weights, activations, the gated MLP, the router and
 * the moe node with its stacked expert weights.  Each builder takes the
 * checkpoint names (relative to the layer's prefix) and returns the IR
 * value, or NULL after a diagnostic.  Nodes carry the module path as their
 * location, so a shape error points at "model.layers.1.mlp".
 */
#include <stdlib.h>
#include <string.h>

#include "cfg.h"

Value *
cfg_named(Cfg *c, Value *v, const char *name)
{
	if (v)
		ir_set_name(c->g, v, name);
	return v;
}

static const char *
why(Cfg *c, const char *fmt, const char *a, const char *b)
{
	return arena_printf(c->m->arena, fmt, a, b);
}

/* A value name from a checkpoint name: "mlp.gate_proj.weight" -> "mlp.gate_proj". */
static const char *
modname(Cfg *c, const char *w)
{
	size_t n = strlen(w);

	if (n > 7 && strcmp(w + n - 7, ".weight") == 0)
		n -= 7;
	return arena_strndup(c->m->arena, w, n);
}

Value *
cfg_rms_norm(Cfg *c, Value *x, const char *w, double eps)
{
	Value *wv = cfg_vector(c, cfg_name(c, "%s", w), RECIPE_NORM, c->hidden, "hidden_size");

	if (!wv)
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", w);
	ir_b_int(&c->b, "axis", -1);
	ir_b_float(&c->b, "eps", eps);
	return ir_b2(&c->b, OP_RMS_NORM, x, wv);
}

/*
 * RMSNorm with a zero-centred weight (Qwen3-Next, Qwen3.5, Gemma): the scale
 * is 1 + w, formed in f32 as transformers does (1 + w.float()), so no bf16
 * rounding of 1 + w.
 */
Value *
cfg_rms_norm_1p(Cfg *c, Value *x, const char *w, double eps)
{
	Value *wv = cfg_vector(c, cfg_name(c, "%s", w), RECIPE_BIAS, c->hidden, "hidden_size");
	Value *one;

	if (!wv)
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", w);
	if (wv->type.dt != DT_F32) {
		ir_b_str(&c->b, "to", "f32");
		wv = cfg_named(c, ir_b1(&c->b, OP_CAST, wv), why(c, "%s.f32%s", modname(c, w), ""));
	}
	one = ir_b_const_f(&c->b, DT_F32, 1.0);
	wv = cfg_named(c, wv && one ? ir_b2(&c->b, OP_ADD, wv, one) : NULL,
		       why(c, "%s.1p%s", modname(c, w), ""));
	if (!wv)
		return NULL;
	ir_b_int(&c->b, "axis", -1);
	ir_b_float(&c->b, "eps", eps);
	return ir_b2(&c->b, OP_RMS_NORM, x, wv);
}

Value *
cfg_layer_norm(Cfg *c, Value *x, const char *w, const char *bias, double eps)
{
	Value *in[3];
	Node *n;

	in[0] = x;
	in[1] = cfg_vector(c, cfg_name(c, "%s", w), RECIPE_NORM, c->hidden, "hidden_size");
	in[2] = bias ? cfg_vector(c, cfg_name(c, "%s", bias), RECIPE_BIAS, c->hidden, "hidden_size")
		     : NULL;
	if (!in[1] || (bias && !in[2]))
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", w);
	ir_b_int(&c->b, "axis", -1);
	ir_b_float(&c->b, "eps", eps);
	n = ir_b_node(&c->b, OP_LAYER_NORM, in, bias ? 3 : 2, 1);
	return n ? n->out[0] : NULL;
}

Value *
cfg_linear(Cfg *c, Value *x, const char *w, const char *bias, int64_t out, int64_t in,
	   const char *why)
{
	Value *wv = cfg_weight2(c, cfg_name(c, "%s", w), out, in, why), *bv = NULL;

	if (bias)
		bv = cfg_vector(c, cfg_name(c, "%s", bias), RECIPE_BIAS, out, why);
	return wv && (!bias || bv) ? cfg_linear_of(c, x, wv, bv, w) : NULL;
}

Value *
cfg_linear_of(Cfg *c, Value *x, Value *w, Value *bias, const char *name)
{
	Value *op[3] = {x, w, bias};
	Node *n;

	c->b.loc.name = cfg_name(c, "%s", name);
	if (!(op[0] = cfg_quant_act(c, x, op[1])))
		return NULL;
	ir_b_int(&c->b, "trans_b", 1);
	n = ir_b_node(&c->b, OP_MATMUL, op, bias ? 3 : 2, 1);
	return n ? cfg_named(c, n->out[0], modname(c, name)) : NULL;
}

Value *
cfg_act(Cfg *c, Value *x, const char *act)
{
	if (!x)
		return NULL;
	if (strcmp(act, "silu") == 0)
		return ir_b1(&c->b, OP_SILU, x);
	if (strcmp(act, "relu") == 0)
		return ir_b1(&c->b, OP_RELU, x);
	if (strcmp(act, "gelu_tanh") == 0)
		ir_b_str(&c->b, "approx", "tanh");
	return ir_b1(&c->b, OP_GELU, x);
}

Value *
cfg_glu_mlp_as(Cfg *c, Value *x, const char *mod, const char *const proj[3], int64_t inter,
	       const char *act, int bias, const char *ikey, double limit)
{
	const char *w1 = why(c, "%s x %s", ikey, "hidden_size");
	const char *w2 = why(c, "%s x %s", "hidden_size", ikey);
	char gw[96], gb[96], uw[96], ub[96], dw[96], db[96];
	Value *g, *u;

	snprintf(gw, sizeof gw, "%s.%s.weight", mod, proj[0]);
	snprintf(gb, sizeof gb, "%s.%s.bias", mod, proj[0]);
	snprintf(uw, sizeof uw, "%s.%s.weight", mod, proj[1]);
	snprintf(ub, sizeof ub, "%s.%s.bias", mod, proj[1]);
	snprintf(dw, sizeof dw, "%s.%s.weight", mod, proj[2]);
	snprintf(db, sizeof db, "%s.%s.bias", mod, proj[2]);
	g = cfg_linear(c, x, gw, bias ? gb : NULL, inter, c->hidden, w1);
	u = cfg_linear(c, x, uw, bias ? ub : NULL, inter, c->hidden, w1);
	if (!g || !u)
		return NULL;
	g = cfg_named(c, cfg_act(c, g, act), why(c, "%s.act%s", mod, ""));
	if (limit > 0 && g) {	/* transformers: act(gate).clamp(max=l), up.clamp(-l, l) */
		ir_b_float(&c->b, "max", limit);
		g = cfg_named(c, ir_b1(&c->b, OP_CLIP, g), why(c, "%s.act.clamp%s", mod, ""));
		ir_b_float(&c->b, "min", -limit);
		ir_b_float(&c->b, "max", limit);
		u = cfg_named(c, ir_b1(&c->b, OP_CLIP, u), why(c, "%s.%s.clamp", mod, proj[1]));
	}
	g = cfg_named(c, g ? ir_b2(&c->b, OP_MUL, g, u) : NULL, why(c, "%s.glu%s", mod, ""));
	if (!g)
		return NULL;
	return cfg_linear(c, g, dw, bias ? db : NULL, c->hidden, inter, w2);
}

Value *
cfg_glu_mlp(Cfg *c, Value *x, const char *mod, int64_t inter, const char *act, int bias,
	    const char *ikey)
{
	static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};

	return cfg_glu_mlp_as(c, x, mod, proj, inter, act, bias, ikey, 0);
}

/* The router's [E] bias added to f32 logits. */
static Value *
router_bias(Cfg *c, Value *l, const char *bias, const MoeSpec *s, int f32ok)
{
	int64_t E = s->E;
	WSpec ws;
	Value *bv;

	ws = cfg_wspec(c, cfg_name(c, "%s", bias), RECIPE_BIAS, 1, &E, s->ekey);
	ws.f32ok = f32ok;
	if (!(bv = cfg_weight(c, &ws)))
		return NULL;
	if (bv->type.dt != DT_F32) {
		ir_b_str(&c->b, "to", "f32");
		bv = cfg_named(c, ir_b1(&c->b, OP_CAST, bv),
			       why(c, "%s.f32%s", modname(c, bias), ""));
	}
	return bv ? ir_b2(&c->b, OP_ADD, l, bv) : NULL;
}

/* Router logits in f32 ([T,E]), from a [E,H] weight (and [E] bias) in the
 * model dtype or f32: the input is cast to the weight's dtype.  The logits
 * are rounded as the model's own nn.Linear rounds them: to the weight's
 * dtype, once, after the bias (HF computes Mixtral's router in bf16 and
 * DeepSeek's in f32, whose weight is then kept f32).  A near tie decides
 * which experts a token gets, so this rounding is part of the model; a
 * model that computes its router in f32 from a bf16 weight says so: Ling's
 * router_dtype fp32 with s->f32_router, and f32ok F32_KEEP, a weight that
 * transformers keeps f32 (_keep_in_fp32_modules_strict): a checkpoint's
 * bf16 weight (DeepSeek-V3's on the hub) is upcast on load, so its logits
 * are f32 products of bf16 values, never rounded. */
Value *
cfg_router(Cfg *c, Value *x, const char *w, const char *bias, const MoeSpec *s, int f32ok)
{
	int64_t E = s->E;
	WSpec ws = cfg_wspec(c, cfg_name(c, "%s", w), RECIPE_MATRIX, 2,
			     (int64_t[]){E, c->hidden}, why(c, "%s x %s", s->ekey, "hidden_size"));
	Value *wv, *l;

	ws.f32ok = f32ok;
	if (!(wv = cfg_weight(c, &ws)))
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", w);
	if (wv->type.dt != x->type.dt) {
		ir_b_str(&c->b, "to", dtype_name(wv->type.dt));
		x = cfg_named(c, ir_b1(&c->b, OP_CAST, x), why(c, "%s.in%s", modname(c, w), ""));
	}
	ir_b_int(&c->b, "trans_b", 1);
	ir_b_str(&c->b, "to", "f32");
	l = cfg_named(c, ir_b2(&c->b, OP_MATMUL, x, wv), modname(c, w));
	if (l && bias)
		l = router_bias(c, l, bias, s, f32ok);
	if (l && wv->type.dt != DT_F32 && !s->f32_router && f32ok != F32_KEEP) {
		ir_b_str(&c->b, "to", dtype_name(wv->type.dt));
		l = cfg_named(c, ir_b1(&c->b, OP_CAST, l), why(c, "%s.round%s", modname(c, w), ""));
		ir_b_str(&c->b, "to", "f32");
		l = l ? ir_b1(&c->b, OP_CAST, l) : NULL;
	}
	return l;
}

static void
moe_attrs(Cfg *c, const MoeSpec *s)
{
	ir_b_str(&c->b, "router", s->router);
	ir_b_int(&c->b, "k", s->k);
	ir_b_int(&c->b, "renorm", s->renorm);
	if (s->scale != 1)
		ir_b_float(&c->b, "scale", s->scale);
	if (strcmp(s->router, "sparsemixer") == 0)
		ir_b_float(&c->b, "jitter_eps", s->jitter_eps);
	if (s->ngroup > 1) {
		ir_b_int(&c->b, "n_group", s->ngroup);
		ir_b_int(&c->b, "topk_group", s->topkgroup);
		ir_b_str(&c->b, "group_score", s->gscore);
		if (s->fill0)
			ir_b_float(&c->b, "group_fill", 0);
	}
	/* gelu_tanh is the moe op's act=gelu with approx=tanh */
	ir_b_str(&c->b, "act", strcmp(s->act, "gelu_tanh") ? s->act : "gelu");
	if (strcmp(s->act, "gelu_tanh") == 0)
		ir_b_str(&c->b, "approx", "tanh");
	ir_b_str(&c->b, "gu_layout", s->layout);
	if (strcmp(s->act, "oai") == 0)
		ir_b_float(&c->b, "alpha", s->alpha);
	if (strcmp(s->act, "oai") == 0 || (strcmp(s->act, "silu") == 0 && s->limit > 0))
		ir_b_float(&c->b, "limit", s->limit);
	if (s->slots)		/* lower-moe may round the slots as the reference does */
		ir_b_str(&c->b, "slots", s->slots);
}

/* wt: w_gate_up, w_down, b_gate_up (or NULL), b_down (or NULL). */
Value *
cfg_moe(Cfg *c, Value *x, Value *logits, Value *selbias, Value *const wt[4],
	const MoeSpec *s)
{
	Value *in[7] = {x, logits, selbias, wt[0], wt[1], wt[2], wt[3]};
	int nin = wt[2] || wt[3] ? 7 : 5;
	Node *n;

	if (!x || !logits || !wt[0] || !wt[1])
		return NULL;
	if (!(in[0] = cfg_quant_act(c, x, wt[0])))	/* the gate/up input; see docs/config.md */
		return NULL;
	moe_attrs(c, s);
	if (cfg_quant_moe_act(c, wt[1]) < 0)	/* the down input's quantisation */
		return NULL;
	n = ir_b_node(&c->b, OP_MOE, in, nin, 1);
	return n ? n->out[0] : NULL;
}

/*
 * The expert weights are stacked [E,2I,H] (gate rows, then up rows) and
 * [E,H,I].  Checkpoints hold them per expert (what save_pretrained writes:
 * fmt is e.g. "mlp.experts.%d.gate_proj.weight") or stacked as
 * "<mod>.experts.gate_up_proj" / "down_proj" in transformers 5's layout;
 * strans: the stacked tensor has its last two dims swapped (gpt-oss).
 */
static int
stacked(Cfg *c, const char *fmt)
{
	return !fmt || !strstr(fmt, "%d") || (c->st && !cfg_ckpt_has(c, cfg_name(c, fmt, 0)));
}

/* The stacked tensor's name: <mod>.experts.<def>, or fmt when it names one
 * stacked tensor (no %d: granitemoe's input_linear / output_linear). */
static const char *
stacked_name(Cfg *c, const char *mod, const char *fmt, const char *def)
{
	if (fmt && !strstr(fmt, "%d"))
		return cfg_name(c, "%s", fmt);
	return cfg_name(c, "%s.experts.%s", mod, def);
}

/*
 * STRANS_CHECK: transformers 5's Transpose(check_dims): a stacked tensor
 * already in the in-memory layout is read as is, another transposed (the
 * Qwen3-VL-MoE hub holds [E,H,2I], transformers 5's save_pretrained writes
 * [E,2I,H]; with H = 2I both read as is, as transformers does).
 */
static int
strans_of(Cfg *c, const char *name, int strans, const int64_t mem[3])
{
	const StTensor *t = c->st ? st_find(c->st, name) : NULL;

	if (strans != STRANS_CHECK)
		return strans;
	return !(t && t->rank == 3 && t->dim[0] == mem[0] && t->dim[1] == mem[1] &&
		 t->dim[2] == mem[2]);
}

Value *
cfg_experts_gu(Cfg *c, const char *mod, const char *gate, const char *up,
	       const MoeSpec *s, int strans)
{
	int64_t E = s->E, I = s->I, H = c->hidden;
	WSpec w = cfg_wspec(c, stacked_name(c, mod, gate, "gate_up_proj"), RECIPE_MATRIX, 3,
			    (int64_t[]){E, 2 * I, H},
			    why(c, "%s x 2*%s x hidden_size", s->ekey, s->ikey));

	int st = stacked(c, gate);

	w.quant = QW_EXPERTS;
	strans = strans_of(c, w.name, strans, (int64_t[]){E, 2 * I, H});
	if (c->st && st)
		cfg_add_piece(&w, w.name, 0, 3,
			      strans ? (int64_t[]){E, H, 2 * I} : (int64_t[]){E, 2 * I, H}, strans);
	for (int64_t e = 0; c->st && !st && e < E; e++) {
		cfg_add_piece(&w, cfg_name(c, gate, (int)e), e * 2 * I * H, 2,
			      (int64_t[]){I, H}, 0);
		cfg_add_piece(&w, cfg_name(c, up, (int)e), e * 2 * I * H + I * H, 2,
			      (int64_t[]){I, H}, 0);
	}
	return cfg_weight(c, &w);
}

Value *
cfg_experts_down(Cfg *c, const char *mod, const char *down, const MoeSpec *s, int strans)
{
	int64_t E = s->E, I = s->I, H = c->hidden;
	WSpec w = cfg_wspec(c, stacked_name(c, mod, down, "down_proj"), RECIPE_MATRIX, 3,
			    (int64_t[]){E, H, I},
			    why(c, "%s x hidden_size x %s", s->ekey, s->ikey));

	int st = stacked(c, down);

	w.quant = QW_EXPERTS;
	strans = strans_of(c, w.name, strans, (int64_t[]){E, H, I});
	if (c->st && st)
		cfg_add_piece(&w, w.name, 0, 3,
			      strans ? (int64_t[]){E, I, H} : (int64_t[]){E, H, I}, strans);
	for (int64_t e = 0; c->st && !st && e < E; e++)
		cfg_add_piece(&w, cfg_name(c, down, (int)e), e * H * I, 2, (int64_t[]){H, I}, 0);
	return cfg_weight(c, &w);
}

const char *
cfg_hf_act(Cfg *c, const char *key, const char *def)
{
	static const char *const map[][2] = {
		{"silu", "silu"}, {"swish", "silu"}, {"gelu", "gelu"},
		{"gelu_new", "gelu_tanh"}, {"gelu_pytorch_tanh", "gelu_tanh"},
		{"gelu_fast", "gelu_tanh"}, {"relu", "relu"},
	};
	const char *s = cfg_str_or(c, key, def);

	for (size_t i = 0; i < NELEM(map); i++)
		if (strcmp(map[i][0], s) == 0)
			return map[i][1];
	cfg_error(c, key, "activation '%s' is not one moec builds (silu, gelu, gelu_new, "
		  "gelu_pytorch_tanh, relu)", s);
	return def;
}
