/*
 * cfg_family.c — one builder per model_type: which keys it reads (with
 * transformers' defaults where a key may be absent), which layers are MoE,
 * its routing semantics and its checkpoint names.  Each builder returns y
 * for the frame in config.c; docs/config.md describes every family.
 *
 *	pre-norm decoders:  y = x + ffn(norm(x))
 *	bert (post-norm):   y = layer_norm(x + ffn(x))
 *
 * and the blocks that are neither, each as its table in docs/config.md says
 * (gemma4's parallel MLP and MoE; arctic's, with a second input).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cfg.h"

typedef int MoeLayerFn(Cfg *c, int layer);

static const char *const decoder_prefixes[] = {
	"model.layers.%d.", "layers.%d.", "model.language_model.layers.%d.",
	"language_model.model.layers.%d.",	/* the llama4 / kimi_k25 hub files */
	"thinker.model.layers.%d.",		/* Qwen3-Omni's thinker */
	"thinker.model.language_model.layers.%d.",
	"talker.model.layers.%d.",		/* Qwen3-Omni's talker */
	"talker.code_predictor.model.layers.%d.",	/* and its code predictor */
	"model.text_model.layers.%d.",		/* Idefics3's, SmolVLM's */
	NULL,
};

/* The layer's checkpoint prefix: the first candidate that holds probe. */
static void
set_prefix(Cfg *c, const char *const *cand, const char *probe)
{
	char name[256];

	for (int i = 0; cand[i]; i++) {
		snprintf(c->pre, sizeof c->pre, cand[i], c->layer);
		snprintf(name, sizeof name, "%s%s", c->pre, probe);
		if (!c->st || st_find(c->st, name))
			return;
	}
	snprintf(c->pre, sizeof c->pre, cand[0], c->layer);
}

static Value *
residual(Cfg *c, Value *x, Value *f)
{
	if (!f)
		return NULL;
	c->b.loc.name = NULL;
	return cfg_named(c, ir_b2(&c->b, OP_ADD, x, f), "y");
}

static double
eps_of(Cfg *c, const char *key, double def)
{
	double eps = cfg_num_or(c, key, def);

	if (!(eps > 0))
		cfg_error(c, key, "must be a positive number");
	return eps;
}

/* The pre-FFN RMSNorm (w) of a pre-norm decoder; sets the prefix. */
static Value *
decoder_norm_named(Cfg *c, Value *x, const char *w, double eps)
{
	set_prefix(c, decoder_prefixes, w);
	return cfg_named(c, cfg_rms_norm(c, x, w, eps), "h");
}

/* The post-attention RMSNorm of a pre-norm decoder; sets the prefix. */
static Value *
decoder_norm(Cfg *c, Value *x, double eps)
{
	return decoder_norm_named(c, x, "post_attention_layernorm.weight", eps);
}

/* add with the adds' location cleared: the block's own sums */
static Value *
add(Cfg *c, Value *a, Value *b, const char *name)
{
	c->b.loc.name = NULL;
	return cfg_named(c, a && b ? ir_b2(&c->b, OP_ADD, a, b) : NULL, name);
}

/* --- dense decoders: llama, mistral, qwen2, qwen3 ------------------------ */

static Value *
dense_mlp(Cfg *c, Value *h, const char *ikey, const char *act, int bias)
{
	int64_t I = cfg_int(c, ikey);

	if (c->err)
		return NULL;
	return cfg_named(c, cfg_glu_mlp(c, h, "mlp", I, act, bias, ikey), "mlp");
}

static Value *
build_llama(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	const char *act = cfg_hf_act(c, "hidden_act", "silu");
	int bias = cfg_bool_or(c, "mlp_bias", 0);
	Value *h;

	cfg_int(c, "intermediate_size");
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	return residual(c, x, dense_mlp(c, h, "intermediate_size", act, bias));
}

/*
 * Dense decoders with other norm placements (session 33), the SwiGLU MLP
 * of intermediate_size in each:
 *
 *	olmo2, olmo3, exaone4: post-norm, y = x + post_feedforward_layernorm(mlp(x))
 *	gemma2, gemma3_text: norms on both sides, zero-centred (scale 1 + w),
 *	    y = x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x))),
 *	    hidden_activation (GELU-tanh)
 *	gemma (Gemma 1): llama's placement, the norm zero-centred, hidden_act
 */
typedef struct {
	const char *pre, *post;	/* the norms' weights before and after the MLP (NULL: none) */
	int one_plus;		/* zero-centred norms: scale 1 + w */
	const char *act_key, *act;	/* the activation's key, and its class default */
	double eps;		/* rms_norm_eps's class default */
} NormedMlp;

static Value *
normed_mlp(Cfg *c, Value *x, const NormedMlp *s)
{
	Value *(*norm)(Cfg *, Value *, const char *, double) = s->one_plus ? cfg_rms_norm_1p : cfg_rms_norm;
	double eps = eps_of(c, "rms_norm_eps", s->eps);
	const char *act = cfg_hf_act(c, s->act_key, s->act);
	Value *h = x, *f;

	cfg_int(c, "intermediate_size");
	if (c->err)
		return NULL;
	set_prefix(c, decoder_prefixes, s->pre ? s->pre : s->post);
	if (s->pre)
		h = cfg_named(c, norm(c, x, s->pre, eps), "h");
	f = h ? dense_mlp(c, h, "intermediate_size", act, 0) : NULL;
	if (s->post) {
		c->b.loc.name = NULL;
		f = cfg_named(c, f ? norm(c, f, s->post, eps) : NULL, "ffn");
	}
	return residual(c, x, f);
}

static Value *
build_olmo2(Cfg *c, Value *x)
{
	static const NormedMlp s = {NULL, "post_feedforward_layernorm.weight", 0, "hidden_act", "silu", 1e-5};

	return normed_mlp(c, x, &s);
}

static Value *
build_gemma2(Cfg *c, Value *x)
{
	static const NormedMlp s = {"pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight", 1,
				    "hidden_activation", "gelu_pytorch_tanh", 1e-6};

	return normed_mlp(c, x, &s);
}

static Value *
build_gemma(Cfg *c, Value *x)
{
	static const NormedMlp s = {"post_attention_layernorm.weight", NULL, 1, "hidden_act", "gelu_pytorch_tanh",
				    1e-6};

	return normed_mlp(c, x, &s);
}

static Value *selection_bias(Cfg *c, const char *name, const MoeSpec *s);

/* --- MoE decoders --------------------------------------------------------- */

static const char *const expert_keys[] = {
	"num_experts", "num_local_experts", "n_routed_experts", NULL,
};

/* Keys some families spell otherwise (transformers' attribute_map, which
 * maps the first to the second: Kimi-Linear's hub file has the second). */
static const char *const k_keys[] = {"num_experts_per_tok", "num_experts_per_token", NULL};
static const char *const norm_keys[] = {"norm_topk_prob", "moe_renormalize", NULL};
static const char *const ngroup_keys[] = {"n_group", "num_expert_group", NULL};
static const char *const nshared_keys[] = {"n_shared_experts", "num_shared_experts", NULL};

/*
 * The families whose transformers block rounds each weighted expert output
 * to the model dtype before summing it: routing weights cast to the input
 * dtype after the softmax, so expert(x) * w is a bf16 product, index_add_
 * into a bf16 zeros (Mixtral's block, which Qwen2-MoE, Qwen3-MoE and OLMoE
 * copy), or gpt-oss's bf16 softmax over the top-k and bf16 products.  Not
 * DeepSeek-V3's block (and GLM-4.5's, its copy): f32 routing weights, f32
 * products, an f32 index_add_.  Checked in transformers' modeling code
 * (session 35); the moe then says slots=x (docs/config.md).  DeepSeek-V3's
 * block rounds each expert output to the model dtype and multiplies it by
 * the f32 weight (GLM-4.5's likewise): slots=out (lower-moe's slots_out).
 */
static const struct {
	const char *type, *slots;	/* the moe's slots attribute */
} slot_rounding[] = {
	{"mixtral", "x"}, {"qwen2_moe", "x"}, {"qwen3_moe", "x"}, {"olmoe", "x"}, {"gpt_oss", "x"},
	{"deepseek_v3", "out"}, {"glm4_moe", "out"},
};

/* E (key ekey), k (kkey) and I (ikey) as read, the router defaults and the
 * checks every router needs. */
static void
moe_spec(Cfg *c, MoeSpec *s, const char *ekey, int64_t E, const char *kkey, int64_t k,
	 const char *ikey, int64_t I)
{
	memset(s, 0, sizeof *s);
	s->ekey = ekey;
	s->E = E;
	s->k = k;
	s->ikey = ikey;
	s->I = I;
	s->router = "softmax";
	s->scale = 1;
	s->ngroup = s->topkgroup = 1;
	s->gscore = "max";
	s->act = "silu";
	s->layout = "concat";
	for (size_t i = 0; i < sizeof slot_rounding / sizeof *slot_rounding; i++)
		if (strcmp(slot_rounding[i].type, c->type) == 0)
			s->slots = slot_rounding[i].slots;
	if (s->E > CFG_MAX_EXPERTS) {	/* a checkpoint tensor per expert is looked for */
		cfg_error(c, s->ekey, "%lld experts: moec reads models of at most %d",
			  (long long)s->E, CFG_MAX_EXPERTS);
		s->E = s->k = 1;
	} else if (s->k > s->E) {
		cfg_error(c, kkey, "%lld is more than the %lld experts (%s)",
			  (long long)s->k, (long long)s->E, s->ekey);
	}
}

/* The experts' (and shared experts') activation: hidden_act, as
 * transformers' ACT2FN[config.hidden_act] of every family that reads it. */
static const char *
moe_act(Cfg *c)
{
	return cfg_hf_act(c, "hidden_act", "silu");
}

/* E, k and I from the common keys; experts of hidden_act. */
static void
read_moe(Cfg *c, MoeSpec *s, const char *ikey)
{
	const char *ekey = cfg_alias(c, expert_keys);
	const char *kkey = cfg_alias(c, k_keys);
	int64_t E = cfg_int(c, ekey), k = cfg_int(c, kkey), I = cfg_int(c, ikey);

	moe_spec(c, s, ekey, E, kkey, k, ikey, I);
	s->act = moe_act(c);
}

/* Router (<mod>.<router>.weight), stacked experts and the moe node for
 * per-expert checkpoints (strans: stacked ones held [E,H,2I] / [E,I,H]). */
static Value *
routed_gate(Cfg *c, Value *h, const char *mod, const char *router, const char *g,
	    const char *u, const char *d, const MoeSpec *s, int strans, int f32ok)
{
	char gate[96], gf[96], uf[96], df[96];
	Value *wt[4] = {NULL, NULL, NULL, NULL}, *l;

	snprintf(gate, sizeof gate, "%s.%s.weight", mod, router);
	snprintf(gf, sizeof gf, "%s.experts.%%d.%s.weight", mod, g);
	snprintf(uf, sizeof uf, "%s.experts.%%d.%s.weight", mod, u);
	snprintf(df, sizeof df, "%s.experts.%%d.%s.weight", mod, d);
	l = cfg_named(c, cfg_router(c, h, gate, NULL, s, f32ok), "router_logits");
	wt[0] = cfg_experts_gu(c, mod, gf, uf, s, strans);
	wt[1] = cfg_experts_down(c, mod, df, s, strans);
	c->b.loc.name = cfg_name(c, "%s", mod);
	return cfg_named(c, cfg_moe(c, h, l, NULL, wt, s), "moe");
}

static Value *
routed_by(Cfg *c, Value *h, const char *mod, const char *router, const char *g,
	  const char *u, const char *d, const MoeSpec *s)
{
	return routed_gate(c, h, mod, router, g, u, d, s, 0, F32_OK);
}

static Value *
routed(Cfg *c, Value *h, const char *mod, const char *g, const char *u, const char *d,
       const MoeSpec *s)
{
	return routed_by(c, h, mod, "gate", g, u, d, s);
}

/* Mixtral: softmax over all experts, top-k, renormalised; every layer MoE. */
static Value *
build_mixtral(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	const char *mod = "block_sparse_moe";
	MoeSpec s;
	Value *h;

	read_moe(c, &s, "intermediate_size");
	s.renorm = 1;
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	if (c->st && !cfg_ckpt_has(c, cfg_name(c, "block_sparse_moe.gate.weight")))
		mod = "mlp";	/* transformers 5 names */
	return residual(c, x, routed(c, h, mod, "w1", "w3", "w2", &s));
}

/*
 * Qwen-style MoE families: softmax over all experts, top-k, renormalised
 * as norm_topk_prob says (default: the family's; `fixed`: transformers
 * always renormalises and reads no key); qwen2_moe-style families add a
 * shared expert with a sigmoid gate.
 */
enum { SHARED_GATED = 1, SHARED_PLAIN };

typedef struct {
	const char *type;
	int shared;		/* SHARED_GATED: qwen2_moe's shared expert, with
				 * its sigmoid gate; SHARED_PLAIN: without */
	int norm, fixed;	/* norm_topk_prob default; fixed: always */
	double eps;		/* rms_norm_eps */
	const char *ikey;	/* the experts' intermediate size */
	int all_moe;		/* every layer MoE (no decoder_sparse_step) */
	int norm1p;		/* zero-centred RMSNorm weight: scale 1 + w */
	int strans;		/* stacked experts: 0 as is, STRANS_CHECK: [E,H,2I] /
				 * [E,I,H] unless already [E,2I,H] / [E,H,I] (the hub's
				 * Qwen3-VL-MoE / transformers 5's save_pretrained) */
	/* columns of the 2026 families (0, NULL: as Qwen) */
	const char *score;	/* the router's scores: softmax (NULL) or sigmoid */
	int gate;		/* the router weight's f32ok (0: F32_OK; cfg_router) */
	int64_t ndense;		/* mlp_only_layers absent: the first ndense layers dense */
} QwenFamily;

static const QwenFamily qwen_families[] = {
	{"qwen2_moe", SHARED_GATED, 0, 0, 1e-6, "moe_intermediate_size", 0, 0, 0, NULL, 0, 0},
	{"qwen3_moe", 0, 0, 0, 1e-6, "moe_intermediate_size", 0, 0, 0, NULL, 0, 0},
	{"olmoe", 0, 0, 0, 1e-5, "intermediate_size", 1, 0, 0, NULL, 0, 0},
	{"qwen3_next", SHARED_GATED, 1, 0, 1e-6, "moe_intermediate_size", 0, 1, 0, NULL, 0, 0},
	{"qwen3_5_moe_text", SHARED_GATED, 1, 1, 1e-6, "moe_intermediate_size", 1, 1, 0, NULL, 0, 0},
	{"qwen3_vl_moe_text", 0, 1, 1, 1e-6, "moe_intermediate_size", 0, 0, STRANS_CHECK, NULL, 0, 0},
	{"mellum", 0, 1, 0, 1e-6, "moe_intermediate_size", 0, 0, 0, NULL, 0, 0},
	{"qwen3_omni_moe_text", 0, 1, 0, 1e-6, "moe_intermediate_size", 0, 0, 0, NULL, 0, 0},
	/* Qwen3-Omni's talker: qwen2_moe's block on every layer (its decoder
	 * layer replaces the MLP that mlp_only_layers chose by the MoE) */
	{"qwen3_omni_moe_talker_text", SHARED_GATED, 0, 0, 1e-6, "moe_intermediate_size", 1, 0, 0,
	 NULL, 0, 0},
	/* dense Qwen3.5: no experts, every layer qwen3_next's 1 + w norm and SwiGLU */
	{"qwen3_5_text", 0, 0, 0, 1e-6, "intermediate_size", 0, 1, 0, NULL, 0, 0},
	/* SHARED_PLAIN: an ungated shared_expert of shared_expert_intermediate_size */
	{"flint", SHARED_PLAIN, 1, 0, 1e-6, "moe_intermediate_size", 0, 0, 0, "sigmoid", F32_KEEP, 2},
	{"lara_mini", SHARED_PLAIN, 1, 0, 1e-6, "moe_intermediate_size", 1, 0, 0, NULL, F32_KEEP, 0},
};

static const QwenFamily *
qwen_family(Cfg *c)
{
	for (size_t i = 0; i < NELEM(qwen_families); i++)
		if (strcmp(qwen_families[i].type, c->type) == 0)
			return &qwen_families[i];
	return &qwen_families[0];
}

/* mlp_layer_types ("dense" / "sparse" per layer) when present (Mellum);
 * else MoE unless in mlp_only_layers or off decoder_sparse_step. */
static int
qwen_is_moe(Cfg *c, int layer)
{
	int64_t step = cfg_int_or(c, "decoder_sparse_step", 1);

	if (qwen_family(c)->all_moe)
		return 1;
	if (cfg_has(c, "mlp_layer_types"))
		return cfg_list_str(c, "mlp_layer_types", layer, "sparse", "dense");
	if (step < 1)
		return cfg_error(c, "decoder_sparse_step", "must be positive"), 0;
	if (!cfg_has(c, "mlp_only_layers") && layer < qwen_family(c)->ndense)
		return 0;
	return cfg_int_or(c, cfg_alias(c, expert_keys), 0) > 0 &&
	       !cfg_in_list(c, "mlp_only_layers", layer) && (layer + 1) % step == 0;
}

/* qwen2_moe's shared expert: sigmoid(x . w_sg^T) * mlp(x); SHARED_PLAIN: mlp(x). */
static Value *
qwen_shared(Cfg *c, Value *h, const char *act)
{
	int64_t I = cfg_int(c, "shared_expert_intermediate_size");
	Value *sh, *g;

	if (c->err)
		return NULL;
	sh = cfg_glu_mlp(c, h, "mlp.shared_expert", I, act, 0,
			 "shared_expert_intermediate_size");
	if (qwen_family(c)->shared == SHARED_PLAIN)
		return cfg_named(c, sh, "shared");
	g = cfg_linear(c, h, "mlp.shared_expert_gate.weight", NULL, 1, c->hidden,
		       "1 x hidden_size");
	if (!sh || !g)
		return NULL;
	g = cfg_named(c, ir_b1(&c->b, OP_SIGMOID, g), "mlp.shared_expert_gate.sigmoid");
	return cfg_named(c, g ? ir_b2(&c->b, OP_MUL, g, sh) : NULL, "shared");
}

static Value *
qwen_norm(Cfg *c, Value *x, double eps)
{
	const char *w = "post_attention_layernorm.weight";

	if (!qwen_family(c)->norm1p)
		return decoder_norm(c, x, eps);
	set_prefix(c, decoder_prefixes, w);
	return cfg_named(c, cfg_rms_norm_1p(c, x, w, eps), "h");
}

static Value *
build_qwen_moe(Cfg *c, Value *x)
{
	const QwenFamily *fam = qwen_family(c);
	int moe = qwen_is_moe(c, c->layer);
	double eps = eps_of(c, "rms_norm_eps", fam->eps);
	MoeSpec s;
	Value *h, *f, *sh;

	if (!moe) {
		if (c->err || !(h = qwen_norm(c, x, eps)))
			return NULL;
		return residual(c, x, dense_mlp(c, h, "intermediate_size",
						cfg_hf_act(c, "hidden_act", "silu"), 0));
	}
	read_moe(c, &s, fam->ikey);
	s.renorm = fam->fixed ? fam->norm : cfg_bool_or(c, "norm_topk_prob", fam->norm);
	s.router = fam->score ? fam->score : s.router;
	if (c->err || !(h = qwen_norm(c, x, eps)))
		return NULL;
	f = routed_gate(c, h, "mlp", "gate", "gate_proj", "up_proj", "down_proj", &s,
			fam->strans, fam->gate ? fam->gate : F32_OK);
	if (f && fam->shared) {
		sh = qwen_shared(c, h, s.act);
		c->b.loc.name = NULL;
		f = cfg_named(c, sh ? ir_b2(&c->b, OP_ADD, f, sh) : NULL, "ffn");
	}
	return residual(c, x, f);
}

/*
 * Aria (rhymes-ai): top-k of the logits, softmax over the k; the experts
 * stacked as grouped_mm reads them ([E,H,2I] gate columns first, [E,I,H]:
 * transposed at import; the hub's mlp.experts.fc1 / fc2, renamed on load as
 * transformers does), always silu; shared experts of moe_num_shared_experts
 * x intermediate_size in hidden_act, added.  Every layer is MoE.
 */
static Value *
build_aria(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	int64_t E = cfg_int_or(c, "moe_num_experts", 8), k = cfg_int_or(c, "moe_topk", 2);
	int64_t I = cfg_int_or(c, "intermediate_size", 4096);
	int64_t nshared = cfg_int_or(c, "moe_num_shared_experts", 2);
	int bias = cfg_bool_or(c, "mlp_bias", 0);
	const char *act = cfg_hf_act(c, "hidden_act", "silu");
	MoeSpec s;
	Value *h, *l, *f, *sh, *wt[4] = {NULL, NULL, NULL, NULL};

	moe_spec(c, &s, "moe_num_experts", E, "moe_topk", k, "intermediate_size", I);
	s.router = "topk_softmax";
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	l = cfg_named(c, cfg_router(c, h, "mlp.router.weight", NULL, &s, F32_OK), "router_logits");
	wt[0] = cfg_experts_gu(c, "mlp", NULL, NULL, &s, 1);
	wt[1] = cfg_experts_down(c, "mlp", NULL, &s, 1);
	c->b.loc.name = cfg_name(c, "mlp");
	f = cfg_named(c, cfg_moe(c, h, l, NULL, wt, &s), "moe");
	sh = cfg_named(c, cfg_glu_mlp(c, h, "mlp.shared_experts", nshared * I, act, bias,
				      "moe_num_shared_experts*intermediate_size"), "shared");
	c->b.loc.name = NULL;
	return residual(c, x, cfg_named(c, f && sh ? ir_b2(&c->b, OP_ADD, f, sh) : NULL, "ffn"));
}

/*
 * MiniMax-M2: sigmoid scores, top-k on scores + e_score_correction_bias
 * (held by the block, not the router), the unbiased scores renormalised;
 * Mixtral's w1/w3/w2 expert names under block_sparse_moe (transformers 5:
 * mlp).  Every layer is MoE.
 */
static Value *
build_minimax_m2(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	const char *mod = "block_sparse_moe";
	char name[96], gate[96], up[96], down[96];
	MoeSpec s;
	Value *h, *l, *sb, *wt[4] = {NULL, NULL, NULL, NULL};

	read_moe(c, &s, "intermediate_size");
	s.router = "sigmoid";
	s.renorm = 1;
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	if (c->st && !cfg_ckpt_has(c, cfg_name(c, "block_sparse_moe.gate.weight")))
		mod = "mlp";	/* transformers 5 names */
	snprintf(name, sizeof name, "%s.gate.weight", mod);
	l = cfg_named(c, cfg_router(c, h, name, NULL, &s, F32_OK), "router_logits");
	snprintf(name, sizeof name, "%s.e_score_correction_bias", mod);
	sb = selection_bias(c, name, &s);
	snprintf(gate, sizeof gate, "%s.experts.%%d.w1.weight", mod);
	snprintf(up, sizeof up, "%s.experts.%%d.w3.weight", mod);
	snprintf(down, sizeof down, "%s.experts.%%d.w2.weight", mod);
	wt[0] = cfg_experts_gu(c, mod, gate, up, &s, 0);
	wt[1] = cfg_experts_down(c, mod, down, &s, 0);
	if (!sb)
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", mod);
	return residual(c, x, cfg_named(c, cfg_moe(c, h, l, sb, wt, &s), "moe"));
}

/*
 * MiniMax-M3 (the text model of minimax_m3_vl): minimax_m2's router
 * (sigmoid, top-k on scores + e_score_correction_bias, renormalised) times
 * routed_scaling_factor, RMSNorms scaled by 1 + w, and gpt-oss's clamped
 * SwiGLU, gate|up concatenated (not interleaved), in the experts, the shared
 * experts (shared_intermediate_size) and the dense layers' MLP
 * (dense_intermediate_size).  MoE layers: mlp_layer_types, else the hub's
 * moe_layer_freq list, else all.  The hub holds the MoE under
 * block_sparse_moe (Mixtral's w1/w3/w2 experts) and the MLPs' gate_proj and
 * up_proj apart (transformers 5: mlp.*, stacked experts, gate_up_proj).
 */
static int
minimax_m3_is_moe(Cfg *c, int layer)
{
	int v;

	if (cfg_has(c, "mlp_layer_types"))
		return cfg_list_str(c, "mlp_layer_types", layer, "sparse", "dense");
	if (cfg_is_list(c, "moe_layer_freq"))
		return (v = cfg_list_int(c, "moe_layer_freq", layer)) < 0 ? 0 : v != 0;
	return 1;
}

/* A clamped-SwiGLU MLP: swiglu(act=oai) of h . gate_up_proj^T, gate rows
 * first (the hub's gate_proj and up_proj, fused as transformers does). */
static Value *
oai_mlp(Cfg *c, Value *h, const char *mod, int64_t I, const char *ikey, const MoeSpec *s)
{
	int64_t H = c->hidden;
	WSpec w = cfg_wspec(c, cfg_name(c, "%s.gate_up_proj.weight", mod), RECIPE_MATRIX, 2,
			    (int64_t[]){2 * I, H}, arena_printf(c->m->arena, "2*%s x hidden_size",
								ikey));
	Value *wv, *a;

	w.quant = QW_LINEAR;
	if (c->st && !cfg_ckpt_has(c, w.name)) {
		const int64_t half[2] = {I, H};
		cfg_add_piece(&w, cfg_name(c, "%s.gate_proj.weight", mod), 0, 2, half, 0);
		cfg_add_piece(&w, cfg_name(c, "%s.up_proj.weight", mod), I * H, 2, half, 0);
	}
	if (!(wv = cfg_weight(c, &w)))
		return NULL;
	a = cfg_linear_of(c, h, wv, NULL, arena_printf(c->m->arena, "%s.gate_up_proj.weight", mod));
	ir_b_str(&c->b, "act", "oai");
	ir_b_str(&c->b, "layout", "concat");
	ir_b_float(&c->b, "alpha", s->alpha);
	ir_b_float(&c->b, "limit", s->limit);
	a = cfg_named(c, a ? ir_b1(&c->b, OP_SWIGLU, a) : NULL, arena_printf(c->m->arena, "%s.glu",
									     mod));
	return a ? cfg_linear(c, a, arena_printf(c->m->arena, "%s.down_proj.weight", mod), NULL, H,
			      I, arena_printf(c->m->arena, "hidden_size x %s", ikey)) : NULL;
}

static Value *
build_minimax_m3(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	const char *w = "post_attention_layernorm.weight";
	int moe = minimax_m3_is_moe(c, c->layer), hub;
	const char *mod;
	MoeSpec s;
	Value *h, *l, *sb, *f, *sh, *wt[4] = {NULL, NULL, NULL, NULL};

	memset(&s, 0, sizeof s);
	if (moe) {	/* read_moe's keys, but not hidden_act (the hub's swigluoai) */
		const char *ekey = cfg_alias(c, expert_keys), *kkey = cfg_alias(c, k_keys);
		moe_spec(c, &s, ekey, cfg_int(c, ekey), kkey, cfg_int(c, kkey), "intermediate_size",
			 cfg_int(c, "intermediate_size"));
		s.router = "sigmoid";
		s.renorm = 1;
		s.scale = cfg_num_or(c, "routed_scaling_factor", 2.0);
	}
	s.act = "oai";	/* hidden_act is not read, as transformers */
	s.alpha = cfg_num_or(c, "swiglu_alpha", 1.702);
	s.limit = cfg_num_or(c, "swiglu_limit", 7.0);
	if (!(s.limit > 0))
		cfg_error(c, "swiglu_limit", "must be positive");
	set_prefix(c, decoder_prefixes, w);
	h = c->err ? NULL : cfg_named(c, cfg_rms_norm_1p(c, x, w, eps), "h");
	if (!h)
		return NULL;
	if (!moe) {
		int64_t I = cfg_int_or(c, "dense_intermediate_size", 12288);
		f = oai_mlp(c, h, "mlp", I, "dense_intermediate_size", &s);
		return residual(c, x, cfg_named(c, f, "mlp"));
	}
	hub = c->st && cfg_ckpt_has(c, cfg_name(c, "block_sparse_moe.gate.weight"));
	mod = hub ? "block_sparse_moe" : "mlp";
	l = cfg_named(c, cfg_router(c, h, arena_printf(c->m->arena, "%s.gate.weight", mod), NULL,
				    &s, F32_OK), "router_logits");
	sb = selection_bias(c, hub ? "block_sparse_moe.e_score_correction_bias"
				   : "mlp.gate.e_score_correction_bias", &s);
	wt[0] = cfg_experts_gu(c, mod, hub ? "block_sparse_moe.experts.%d.w1.weight" : NULL,
			       hub ? "block_sparse_moe.experts.%d.w3.weight" : NULL, &s, 0);
	wt[1] = cfg_experts_down(c, mod, hub ? "block_sparse_moe.experts.%d.w2.weight" : NULL,
				 &s, 0);
	if (!sb)
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", mod);
	f = cfg_named(c, cfg_moe(c, h, l, sb, wt, &s), "moe");
	if (!f)
		return NULL;
	sh = oai_mlp(c, h, arena_printf(c->m->arena, "%s.shared_experts", mod),
		     cfg_int_or(c, "shared_intermediate_size", 3072), "shared_intermediate_size", &s);
	return residual(c, x, add(c, f, cfg_named(c, sh, "shared"), "ffn"));
}

/* v * a, a scalar constant of v's dtype (none when a is 1) */
static Value *
scaled(Cfg *c, Value *v, double a, const char *name)
{
	Value *k;

	if (!v || a == 1)
		return v;
	k = ir_b_const_f(&c->b, v->type.dt, a);
	return cfg_named(c, k ? ir_b2(&c->b, OP_MUL, v, k) : NULL, name);
}

/*
 * MiniMax-Text-01 / MiniMax-M1: Mixtral's MoE, both terms of the residual
 * sum scaled, and with postnorm the residual is the *normed* input:
 * y = alpha * (postnorm ? h : x) + beta * moe(h), h = norm(x).
 * transformers' minimax (the -hf repos): mlp_alpha_factor / mlp_beta_factor,
 * always postnorm; the original repos' remote code (minimax_text_01,
 * minimax_m1): layernorm_mlp_alpha / layernorm_mlp_beta and postnorm, and a
 * shared MLP when shared_intermediate_size > 0 (refused: no published model
 * has one).  Hub names are Mixtral's (block_sparse_moe.gate, experts.E.w1/w3/w2).
 */
static Value *
build_minimax(Cfg *c, Value *x)
{
	int hf = strcmp(c->type, "minimax") == 0;
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	double alpha = cfg_num_or(c, hf ? "mlp_alpha_factor" : "layernorm_mlp_alpha", 1);
	double beta = cfg_num_or(c, hf ? "mlp_beta_factor" : "layernorm_mlp_beta", 1);
	int post = hf || cfg_bool_or(c, "postnorm", 0);
	MoeSpec s;
	Value *h, *f;

	read_moe(c, &s, "intermediate_size");
	s.renorm = 1;
	if (!hf && cfg_int_or(c, "shared_intermediate_size", 0) > 0)
		cfg_error(c, "shared_intermediate_size", "MiniMax's shared MLP (%lld) is not one "
			  "moec builds (no published MiniMax model has one)",
			  (long long)cfg_int_or(c, "shared_intermediate_size", 0));
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	f = scaled(c, routed(c, h, "block_sparse_moe", "w1", "w3", "w2", &s), beta, "moe.scaled");
	return add(c, scaled(c, post ? h : x, alpha, "residual.scaled"), f, "y");
}

/*
 * JetMoE: granitemoe's experts and router under mlp (stacked input_linear
 * [E,2I,H], gate rows first; output_linear [E,H,I]; top-k over the logits,
 * softmax over the k), plus a bias mlp.bias [H] added to the routed sum.
 * The norm's eps is 1e-6 whatever rms_norm_eps says (transformers'
 * JetMoeRMSNorm is built without it).
 */
static Value *
build_jetmoe(Cfg *c, Value *x)
{
	MoeSpec s;
	Value *h, *l, *f, *b, *wt[4] = {NULL, NULL, NULL, NULL};

	read_moe(c, &s, "intermediate_size");
	s.router = "topk_softmax";
	s.act = cfg_hf_act(c, "activation_function", "silu");
	if (c->err || !(h = decoder_norm(c, x, 1e-6)))
		return NULL;
	l = cfg_named(c, cfg_router(c, h, "mlp.router.layer.weight", NULL, &s, F32_OK),
		      "router_logits");
	wt[0] = cfg_experts_gu(c, "mlp", "mlp.input_linear.weight", NULL, &s, 0);
	wt[1] = cfg_experts_down(c, "mlp", "mlp.output_linear.weight", &s, 0);
	b = cfg_vector(c, cfg_name(c, "mlp.bias"), RECIPE_BIAS, c->hidden, "hidden_size");
	c->b.loc.name = cfg_name(c, "mlp");
	f = cfg_named(c, cfg_moe(c, h, l, NULL, wt, &s), "moe");
	return residual(c, x, add(c, f, b, "ffn"));
}

/*
 * LFM2-MoE: the first num_dense_layers layers a SwiGLU feed_forward.{w1,w3,w2}
 * of intermediate_size, the others MoE: sigmoid scores, top-k on scores +
 * feed_forward.expert_bias (use_expert_bias; held by the block), the
 * unbiased scores renormalised (norm_topk_prob) times routed_scaling_factor;
 * Mixtral's expert names under feed_forward.  The norm is ffn_norm (eps
 * norm_eps).  Conv and attention layers alike have the FFN.
 */
static int
lfm2_is_moe(Cfg *c, int layer)
{
	return layer >= cfg_int_or(c, "num_dense_layers", 2);
}

static Value *
build_lfm2_moe(Cfg *c, Value *x)
{
	static const char *const w132[3] = {"w1", "w3", "w2"};
	double eps = eps_of(c, "norm_eps", 1e-5);
	MoeSpec s;
	Value *h, *l, *sb = NULL, *wt[4] = {NULL, NULL, NULL, NULL};

	if (!lfm2_is_moe(c, c->layer)) {
		int64_t I = cfg_int(c, "intermediate_size");

		if (c->err || !(h = decoder_norm_named(c, x, "ffn_norm.weight", eps)))
			return NULL;
		return residual(c, x, cfg_named(c, cfg_glu_mlp_as(c, h, "feed_forward", w132, I,
								  "silu", 0, "intermediate_size", 0),
						"mlp"));
	}
	read_moe(c, &s, "moe_intermediate_size");
	s.act = "silu";	/* transformers' LFM2-MoE: F.silu, no hidden_act */
	s.router = "sigmoid";
	s.renorm = cfg_bool_or(c, "norm_topk_prob", 1);
	s.scale = cfg_num_or(c, "routed_scaling_factor", 1.0);
	if (c->err || !(h = decoder_norm_named(c, x, "ffn_norm.weight", eps)))
		return NULL;
	l = cfg_named(c, cfg_router(c, h, "feed_forward.gate.weight", NULL, &s, F32_OK),
		      "router_logits");
	if (cfg_bool_or(c, "use_expert_bias", 1) &&
	    !(sb = selection_bias(c, "feed_forward.expert_bias", &s)))
		return NULL;
	wt[0] = cfg_experts_gu(c, "feed_forward", "feed_forward.experts.%d.w1.weight",
			       "feed_forward.experts.%d.w3.weight", &s, 0);
	wt[1] = cfg_experts_down(c, "feed_forward", "feed_forward.experts.%d.w2.weight", &s, 0);
	c->b.loc.name = cfg_name(c, "feed_forward");
	return residual(c, x, cfg_named(c, cfg_moe(c, h, l, sb, wt, &s), "moe"));
}

/*
 * FlexOlmo (OLMo 2's norm placement): no norm before the FFN, one after it:
 * y = x + post_feedforward_layernorm(moe(x)); the router and the experts
 * read x itself.  OLMoE's routing (softmax, top-k, norm_topk_prob false),
 * experts of intermediate_size, every layer MoE.
 */
static Value *
build_flex_olmo(Cfg *c, Value *x)
{
	const char *w = "post_feedforward_layernorm.weight";
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	MoeSpec s;
	Value *f;

	read_moe(c, &s, "intermediate_size");
	s.renorm = cfg_bool_or(c, "norm_topk_prob", 0);
	if (c->err)
		return NULL;
	set_prefix(c, decoder_prefixes, w);
	f = routed(c, x, "mlp", "gate_proj", "up_proj", "down_proj", &s);
	c->b.loc.name = NULL;
	return residual(c, x, cfg_named(c, f ? cfg_rms_norm(c, f, w, eps) : NULL, "ffn"));
}

/*
 * Sigmoid routers whose selection bias the MoE block holds next to a
 * router module (mlp.router.gate, mlp.expert_bias), the unbiased scores
 * always renormalised, times a scale; shared experts of n x
 * moe_intermediate_size; dense layers a SwiGLU mlp of intermediate_size.
 *
 *	afmoe (Arcee's Trinity): norms on both sides of the FFN,
 *	    y = x + post_mlp_layernorm(ffn(pre_mlp_layernorm(x)));
 *	    dense: the first num_dense_layers (1); route_scale; shared_experts
 *	hy_v3 (Hunyuan v3): y = x + ffn(post_attention_layernorm(x));
 *	    dense: mlp_layer_types (default: layer 0); router_scaling_factor;
 *	    shared_mlp; MLP biases mlp_bias
 */
typedef struct {
	const char *type;
	const char *pre, *post;	/* the norms' weights (post NULL: none) */
	const char *dense_key;	/* first-N-dense key (NULL: mlp_layer_types only) */
	int64_t ndense;		/* its default */
	const char *scale_key;
	double scale;
	const char *shared;	/* the shared experts' module */
	int64_t nshared;	/* num_shared_experts' default */
	int gate;		/* the router weight (as DsFamily's gate) */
} BiasFamily;

static const BiasFamily bias_families[] = {
	{"afmoe", "pre_mlp_layernorm.weight", "post_mlp_layernorm.weight", "num_dense_layers", 1,
	 "route_scale", 1.0, "mlp.shared_experts", 2, F32_OK},
	{"hy_v3", "post_attention_layernorm.weight", NULL, NULL, 1,
	 "router_scaling_factor", 2.826, "mlp.shared_mlp", 1, F32_KEEP},
};

static const BiasFamily *
bias_family(Cfg *c)
{
	for (size_t i = 0; i < NELEM(bias_families); i++)
		if (strcmp(bias_families[i].type, c->type) == 0)
			return &bias_families[i];
	return &bias_families[0];
}

static int
bias_is_moe(Cfg *c, int layer)
{
	const BiasFamily *f = bias_family(c);

	if (cfg_has(c, "mlp_layer_types"))
		return cfg_list_str(c, "mlp_layer_types", layer, "sparse", "dense");
	return layer >= (f->dense_key ? cfg_int_or(c, f->dense_key, f->ndense) : f->ndense);
}

static Value *
build_bias_moe(Cfg *c, Value *x)
{
	const BiasFamily *fam = bias_family(c);
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	int64_t nshared = cfg_int_or(c, "num_shared_experts", fam->nshared);
	int bias = cfg_bool_or(c, "mlp_bias", 0);
	MoeSpec s;
	Value *h, *f, *l, *sb, *wt[4] = {NULL, NULL, NULL, NULL};

	if (!bias_is_moe(c, c->layer)) {
		if (c->err || !(h = decoder_norm_named(c, x, fam->pre, eps)))
			return NULL;
		f = dense_mlp(c, h, "intermediate_size", moe_act(c), bias);
	} else {
		read_moe(c, &s, "moe_intermediate_size");
		s.router = "sigmoid";
		s.renorm = 1;
		s.scale = cfg_num_or(c, fam->scale_key, fam->scale);
		if (c->err || !(h = decoder_norm_named(c, x, fam->pre, eps)))
			return NULL;
		l = cfg_named(c, cfg_router(c, h, "mlp.router.gate.weight", NULL, &s, fam->gate),
			      "router_logits");
		sb = selection_bias(c, "mlp.expert_bias", &s);
		wt[0] = cfg_experts_gu(c, "mlp", "mlp.experts.%d.gate_proj.weight",
				       "mlp.experts.%d.up_proj.weight", &s, 0);
		wt[1] = cfg_experts_down(c, "mlp", "mlp.experts.%d.down_proj.weight", &s, 0);
		if (!sb)
			return NULL;
		c->b.loc.name = cfg_name(c, "mlp");
		f = cfg_named(c, cfg_moe(c, h, l, sb, wt, &s), "moe");
		if (f && nshared > 0)
			f = add(c, f, cfg_named(c, cfg_glu_mlp(c, h, fam->shared, nshared * s.I, s.act,
							       bias, "num_shared_experts*"
							       "moe_intermediate_size"),
						"shared"), "ffn");
	}
	c->b.loc.name = NULL;
	if (fam->post)
		f = cfg_named(c, f ? cfg_rms_norm(c, f, fam->post, eps) : NULL, "ffn.norm");
	return residual(c, x, f);
}

/* The layer's entry of a per-layer SwiGLU clamp list (Step 3.5's swiglu_limits,
 * Ling's expert_swiglu_limit_list, ...): 0 (absent, null or 0) none. */
static double
swiglu_limit(Cfg *c, const char *key)
{
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(c->json, key);
	const cJSON *e;

	if (!l || cJSON_IsNull(l))
		return 0;
	if (!cJSON_IsArray(l) || c->layer >= cJSON_GetArraySize(l))
		return cfg_error(c, key, "must be a list with an entry for layer %d", c->layer), 0;
	e = cJSON_GetArrayItem(l, c->layer);
	if (cJSON_IsNull(e))
		return 0;
	if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0) || !isfinite(e->valuedouble))
		return cfg_error(c, key, "entry %d must be a non-negative number or null", c->layer), 0;
	return e->valuedouble;
}

/* --- DeepSeek-V2 / V3 and the families built like them ------------------- */

/*
 * Families whose MoE is DeepSeek's: softmax or sigmoid scores, optional
 * selection bias and expert groups, routed_scaling_factor, shared experts
 * as one SwiGLU MLP.  Each row holds the defaults of the family's
 * transformers configuration class (remote-code families: their own code's);
 * `fixed`: transformers ignores scoring_func / topk_method for the family
 * (its router is always sigmoid + correction bias + top-2 group scores).
 */
typedef struct {
	const char *type;
	int64_t first_dense;	/* first_k_dense_replace */
	const char *score, *method;	/* scoring_func, topk_method */
	int fixed;
	int64_t ngroup, topkgroup;	/* n_group, topk_group (-1: n_group) */
	int norm;		/* norm_topk_prob (-1: always, the key not read) */
	double scale;		/* routed_scaling_factor */
	int64_t nshared;	/* n_shared_experts (-1: required) */
	double eps;		/* rms_norm_eps */
	const char *shared_key;	/* the config key of the shared experts */
	const char *bias;	/* the selection bias tensor, under the MoE module */
	const char *hubmod;	/* the hub's MoE module (NULL: mlp; transformers 5's
				 * names, mlp, read too), its experts Mixtral's
				 * w1 / w3 / w2 (Kimi-Linear's remote code) */
	int gate;		/* the router weight: F32_KEEP, kept f32 and the
				 * logits computed in f32 (transformers'
				 * _keep_in_fp32_modules_strict); F32_OK, the
				 * logits in the weight's dtype */
	/* columns of the 2026 families (NULL: as DeepSeek) */
	const char *scale_key;	/* routed_scaling_factor's key */
	const char *softcap_key;	/* router logit softcapping: tanh(l / c) * c */
	const char *shared_ikey;	/* each shared expert's width (NULL: the routed ones') */
	const char *post;	/* a norm on the MoE layer's FFN output */
	const char *const *limit, *const *shared_limit;	/* the keys of the per-layer
				 * SwiGLU clamp lists of the routed and the shared
				 * experts (NULL: none) */
} DsFamily;

/* Ling's clamp lists and transformers' attribute_map names of them */
static const char *const ling_limit[] = {"expert_swiglu_limit_list", "swiglu_limits", NULL};
static const char *const ling_shared_limit[] = {"share_expert_swiglu_limit_list",
						"swiglu_limits_shared", NULL};

static const DsFamily ds_families[] = {
	{"deepseek_v2", 0, "softmax", "greedy", 0, 1, -1, 0, 1.0, 2, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"deepseek_v3", 3, "sigmoid", "noaux_tc", 0, 8, 4, 1, 2.5, 1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"deepseek_v32", 3, "sigmoid", "noaux_tc", 0, 8, 4, 1, 2.5, 1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"kimi_k2", 3, "sigmoid", "noaux_tc", 0, 8, 4, 1, 2.5, 1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"glm4_moe", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 1.0, 1, 1e-5,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	/* Param2 (BharatGen): transformers runs it as glm4_moe */
	{"param2moe", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 2.5, 2, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	/* MiniCPM5-MoE: DeepSeek-V3's MoE (its router always sigmoid and f32) */
	{"minicpm5_moe", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 3.66, 1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"glm4_moe_lite", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 1.8, 1, 1e-5,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"glm_moe_dsa", 3, "sigmoid", "noaux_tc", 1, 1, 1, 1, 2.5, 1, 1e-5,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"dots1", 0, "sigmoid", "noaux_tc", 1, 1, 1, 0, 1.0, -1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"mimo_v2_flash", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 1.0, 0, 1e-5,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"bailing_moe", 0, "softmax", "greedy", 0, 1, -1, 1, 1.0, 0, 1e-6,
	 "num_shared_experts", "gate.expert_bias", NULL, F32_OK,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"glm4v_moe_text", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 1.0, 1, 1e-5,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"exaone_moe", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 2.5, 1, 1e-5,
	 "num_shared_experts", "e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"solar_open", 0, "sigmoid", "noaux_tc", 1, 1, 1, 1, 1.0, 1, 1e-5,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"mistral4", 0, "softmax", "group_top2", 1, 1, 1, 1, 1.0, 1, 1e-6,
	 "n_shared_experts", NULL, NULL, F32_OK,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"kimi_linear", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 2.446, 1, 1e-5,
	 "num_shared_experts", "gate.e_score_correction_bias", "block_sparse_moe", F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"mistral_large4_text", 1, "softmax", "group_top2", 1, 1, 1, -1, 1.0, 1, 1e-5,
	 "n_shared_experts", NULL, NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	/* Sarvam-30B / -105B: transformers runs them as glm4_moe / deepseek_v3 */
	{"sarvam_moe", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 2.5, 1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"sarvam_mla", 1, "sigmoid", "noaux_tc", 0, 1, 1, 1, 2.5, 1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	/* Laguna (poolside): the hub's names renamed on load (hub_names) */
	{"laguna", 1, "sigmoid", "noaux_tc", 1, 1, 1, -1, 1.0, 1, 1e-6,
	 NULL, "gate.e_score_correction_bias", NULL, F32_OK,
	 "moe_routed_scaling_factor", "moe_router_logit_softcapping",
	 "shared_expert_intermediate_size", NULL, NULL, NULL},
	/* Beam (Reflection): DeepSeek-V3's router, no shared experts; its own
	 * block (build_beam) */
	{"beam", 3, "sigmoid", "noaux_tc", 1, 8, 4, 1, 2.5, 0, 1e-6,
	 NULL, "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	/* A.X-K2 (SKT): DeepSeek-V3's MoE after a gated norm (build_axk2);
	 * n_group null: no groups */
	{"axk2", 1, "sigmoid", "noaux_tc", 1, 1, -1, 1, 2.5, 1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	/* dots3 (the text model of dots3_note): shared experts n_shared_experts x
	 * shared_experts_intermediate_size (its hub: moe_shared_expert_...) */
	{"dots3_note_text", 1, "sigmoid", "noaux_tc", 1, 1, 1, 1, 1.0, 1, 1e-5,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, "shared_experts_intermediate_size", NULL, NULL, NULL},
	/* Unlimited-OCR's and DeepSeek-OCR-2's text models: deepseek_v2's router
	 * (transformers never renormalises; the key is read, as for deepseek_v2) */
	{"unlimited_ocr_text", 1, "softmax", "greedy", 0, 1, -1, 0, 1.0, 2, 1e-6,
	 "n_shared_experts", NULL, NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	{"deepseek_ocr2_text", 1, "softmax", "greedy", 0, 1, -1, 0, 1.0, 2, 1e-6,
	 "n_shared_experts", NULL, NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, NULL, NULL},
	/* Ling's hybrid (linear attention) models: DeepSeek-V3's MoE under
	 * Ling's key spellings (num_experts, num_expert_group, moe_renormalize,
	 * num_shared_experts); transformers 5.25 clamps the experts' SwiGLU as
	 * Step 3.5 does (a dense layer's MLP never) */
	{"bailing_hybrid", 2, "sigmoid", "noaux_tc", 1, 8, 4, 1, 2.5, 1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, NULL, ling_limit, ling_shared_limit},
	/* A.X-K1 (SKT): DeepSeek-V3's MoE and an RMSNorm on its output */
	{"axk1", 1, "sigmoid", "noaux_tc", 1, 8, 4, 1, 2.5, 1, 1e-6,
	 "n_shared_experts", "gate.e_score_correction_bias", NULL, F32_KEEP,
	 NULL, NULL, NULL, "post_mlp_layernorm.weight", NULL, NULL},
};

static const DsFamily *
ds_family(Cfg *c)
{
	for (size_t i = 0; i < NELEM(ds_families); i++)
		if (strcmp(ds_families[i].type, c->type) == 0)
			return &ds_families[i];
	return &ds_families[0];
}

/*
 * Which layers are MoE: a per-layer list when the config has one
 * (mlp_layer_types "dense" / "sparse"; MiMo-V2-Flash's hub file:
 * moe_layer_freq as a list of 0 / 1), else layer >= first_k_dense_replace
 * and layer % moe_layer_freq == 0.
 */
static int
deepseek_is_moe(Cfg *c, int layer)
{
	const DsFamily *f = ds_family(c);
	int64_t first, freq;
	int v;

	if (!cfg_has(c, cfg_alias(c, expert_keys)))
		return 0;
	if (cfg_has(c, "mlp_layer_types"))
		return cfg_list_str(c, "mlp_layer_types", layer, "sparse", "dense");
	if (cfg_is_list(c, "moe_layer_freq"))
		return (v = cfg_list_int(c, "moe_layer_freq", layer)) < 0 ? 0 : v != 0;
	first = cfg_int_or(c, "first_k_dense_replace", f->first_dense);
	freq = cfg_int_or(c, "moe_layer_freq", 1);
	if (freq < 1)
		return cfg_error(c, "moe_layer_freq", "must be positive"), 0;
	return layer >= first && layer % freq == 0;
}

/* scoring_func, topk_method and the groups into s. */
static void
deepseek_routing(Cfg *c, MoeSpec *s, int *selbias)
{
	const DsFamily *f = ds_family(c);
	const char *skey = cfg_alias(c, (const char *const[]){"scoring_func", "score_function",
							       NULL});
	const char *score = f->fixed ? f->score : cfg_str_or(c, skey, f->score);
	const char *method = f->fixed ? f->method : cfg_str_or(c, "topk_method", f->method);

	if (strcmp(score, "softmax") && strcmp(score, "sigmoid"))
		cfg_error(c, skey, "'%s' is not softmax or sigmoid", score);
	s->router = strcmp(score, "sigmoid") ? "softmax" : "sigmoid";
	s->renorm = f->norm < 0 ? 1 : cfg_bool_or(c, cfg_alias(c, norm_keys), f->norm);
	s->scale = cfg_num_or(c, f->scale_key ? f->scale_key : "routed_scaling_factor", f->scale);
	*selbias = strcmp(method, "noaux_tc") == 0;
	/* Ling (vLLM's bailing_moe.py): the bias is moe_router_enable_expert_bias;
	 * with n_group the groups are scored by their top 2 with the bias, by
	 * their best expert without it; router_dtype fp32: f32 logits */
	if (!strcmp(f->type, "bailing_moe")) {
		*selbias = cfg_bool_or(c, "moe_router_enable_expert_bias", 0);
		method = !cfg_has(c, "n_group") ? "greedy" : *selbias ? "noaux_tc"
								: "group_limited_greedy";
		s->f32_router = !strcmp(cfg_str_or(c, "router_dtype", "bf16"), "fp32");
	}
	if (strcmp(method, "greedy") == 0)
		return;
	if (strcmp(method, "group_limited_greedy") && strcmp(method, "group_top2") && !*selbias) {
		cfg_error(c, "topk_method", "'%s' is not greedy, group_limited_greedy or noaux_tc",
			  method);
		return;
	}
	/* group_top2 (Mistral 4, fixed): groups by the sum of their top 2
	 * scores, no selection bias */
	s->gscore = strcmp(method, "group_limited_greedy") ? "top2" : "max";
	s->ngroup = cfg_int_or(c, cfg_alias(c, ngroup_keys), f->ngroup);
	s->topkgroup = cfg_int_or(c, "topk_group", f->topkgroup < 0 ? s->ngroup : f->topkgroup);
}

static void
check_groups(Cfg *c, const MoeSpec *s)
{
	if (s->ngroup < 1 || s->E % s->ngroup)
		cfg_error(c, "n_group", "%lld does not divide the %lld experts (%s)",
			  (long long)s->ngroup, (long long)s->E, s->ekey);
	else if (s->topkgroup < 1 || s->topkgroup > s->ngroup)
		cfg_error(c, "topk_group", "%lld is not in 1..n_group (%lld)",
			  (long long)s->topkgroup, (long long)s->ngroup);
	else if (s->k > s->topkgroup * (s->E / s->ngroup))
		cfg_error(c, "num_experts_per_tok", "%lld is more than the %lld experts of "
			  "topk_group groups", (long long)s->k,
			  (long long)(s->topkgroup * (s->E / s->ngroup)));
	else if (s->ngroup > 1 && !strcmp(s->gscore, "top2") && s->E / s->ngroup < 2)
		cfg_error(c, "n_group", "noaux_tc scores a group by its top 2 experts, but "
			  "groups hold %lld", (long long)(s->E / s->ngroup));
}

/* The selection bias [E] as f32 (held f32 by transformers; bf16 on some hubs). */
static Value *
selection_bias(Cfg *c, const char *name, const MoeSpec *s)
{
	WSpec w = cfg_wspec(c, cfg_name(c, "%s", name), RECIPE_BIAS, 1, &s->E, s->ekey);
	Value *sb;

	w.f32ok = F32_KEEP;
	if ((sb = cfg_weight(c, &w)) && sb->type.dt != DT_F32) {
		ir_b_str(&c->b, "to", "f32");
		sb = cfg_named(c, ir_b1(&c->b, OP_CAST, sb), arena_printf(c->m->arena, "%s.f32",
									   name));
	}
	return sb;
}

/* Router logit softcapping (Laguna): l = tanh(l / c) * c in f32 before the
 * scores, when the family has the key and it is > 0. */
static Value *
softcapped(Cfg *c, Value *l, const char *mod)
{
	const char *key = ds_family(c)->softcap_key;
	double cap = key ? cfg_num_or(c, key, 0) : 0;
	Value *k;

	if (!l || !(cap > 0))
		return cap < 0 ? cfg_error(c, key, "must not be negative"), NULL : l;
	c->b.loc.name = cfg_name(c, "%s.gate", mod);
	k = ir_b_const_f(&c->b, DT_F32, cap);
	l = cfg_named(c, k ? ir_b2(&c->b, OP_DIV, l, k) : NULL, "router_logits.div");
	l = cfg_named(c, l ? ir_b1(&c->b, OP_TANH, l) : NULL, "router_logits.tanh");
	return cfg_named(c, l ? ir_b2(&c->b, OP_MUL, l, k) : NULL, "router_logits.softcapped");
}

/* A family's shared-expert width key, or the hub's spelling of it (dots3). */
static const char *
shared_width_key(Cfg *c, const char *key)
{
	return cfg_alias(c, (const char *const[]){key, "moe_shared_expert_intermediate_size",
						   NULL});
}

/* The routed experts of DeepSeek, plus the shared experts as one MLP. */
static Value *
deepseek_moe(Cfg *c, Value *h, const MoeSpec *s, int selbias, int64_t nshared, int bias)
{
	const DsFamily *fam = ds_family(c);
	int hub = fam->hubmod && (!c->st || cfg_ckpt_has(c, cfg_name(c, "%s.gate.weight", fam->hubmod)));
	const char *mod = hub ? fam->hubmod : "mlp";
	Value *wt[4] = {NULL, NULL, NULL, NULL}, *l, *sb = NULL, *f, *sh;
	/* Ling: the shared experts' own width when the config gives one */
	const char *swkey = !strcmp(c->type, "bailing_moe") &&
				    cfg_has(c, "moe_shared_expert_intermediate_size")
			    ? "moe_shared_expert_intermediate_size"
			    : fam->shared_ikey ? shared_width_key(c, fam->shared_ikey)
			    : "moe_intermediate_size";
	int64_t sw = strcmp(swkey, "moe_intermediate_size") ? cfg_int(c, swkey) : s->I;
	double shlim = fam->shared_limit ? swiglu_limit(c, cfg_alias(c, fam->shared_limit)) : 0;

	const char *ex[3] = {"gate_proj", "up_proj", "down_proj"};
	const char *w132[3] = {"w1", "w3", "w2"};
	const char *const *e = hub ? w132 : ex;
	char *name[4];

	for (int i = 0; i < 3; i++)
		name[i] = arena_printf(c->m->arena, "%s.experts.%%d.%s.weight", mod, e[i]);
	name[3] = arena_printf(c->m->arena, "%s.gate.weight", mod);
	l = softcapped(c, cfg_named(c, cfg_router(c, h, name[3], NULL, s, fam->gate),
				    "router_logits"), mod);
	if (selbias)
		sb = selection_bias(c, arena_printf(c->m->arena, "%s.%s", mod, fam->bias), s);
	wt[0] = cfg_experts_gu(c, mod, name[0], name[1], s, 0);
	wt[1] = cfg_experts_down(c, mod, name[2], s, 0);
	if (selbias && !sb)
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", mod);
	f = cfg_named(c, cfg_moe(c, h, l, sb, wt, s), "moe");
	if (!f || nshared == 0)
		return f;
	sh = cfg_named(c, cfg_glu_mlp_as(c, h, arena_printf(c->m->arena, "%s.shared_experts", mod),
					 ex, nshared * sw, s->act, bias, fam->shared_key ?
					 arena_printf(c->m->arena, "%s*%s", fam->shared_key, swkey)
					 : swkey, shlim), "shared");
	c->b.loc.name = NULL;
	return cfg_named(c, sh ? ir_b2(&c->b, OP_ADD, f, sh) : NULL, "ffn");
}

static Value *
build_deepseek(Cfg *c, Value *x)
{
	const DsFamily *fam = ds_family(c);
	double eps = eps_of(c, "rms_norm_eps", fam->eps);
	/* Ling's MLP biases are use_bias */
	int bias = cfg_bool_or(c, strcmp(fam->type, "bailing_moe") ? "mlp_bias" : "use_bias", 0);
	int selbias = 0;
	int64_t nshared;
	const char *skey;
	MoeSpec s;
	Value *h, *f;

	if (!deepseek_is_moe(c, c->layer)) {
		if (c->err || !(h = decoder_norm(c, x, eps)))
			return NULL;
		return residual(c, x, dense_mlp(c, h, "intermediate_size",
						cfg_hf_act(c, "hidden_act", "silu"), bias));
	}
	read_moe(c, &s, "moe_intermediate_size");
	deepseek_routing(c, &s, &selbias);
	check_groups(c, &s);
	if (fam->limit)
		s.limit = swiglu_limit(c, cfg_alias(c, fam->limit));
	skey = !fam->shared_key || strcmp(fam->shared_key, nshared_keys[0]) ? fam->shared_key
									     : cfg_alias(c, nshared_keys);
	nshared = !skey ? fam->nshared : fam->nshared < 0 ? cfg_int(c, skey)
							  : cfg_int_or(c, skey, fam->nshared);
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	f = deepseek_moe(c, h, &s, selbias, nshared, bias);
	if (fam->post)
		f = cfg_named(c, f ? cfg_rms_norm(c, f, fam->post, eps) : NULL, "ffn.norm");
	return residual(c, x, f);
}

/*
 * Beam (Reflection): norms on both sides of the FFN and a depth-scaled
 * residual, the FFN's n-th residual add of the model (n = 2 (L + 1) + 1):
 *
 *	y = post_feedforward_layernorm(ffn(pre_feedforward_layernorm(x))) / sqrt(n)
 *	    + x * sqrt((n - 1) / n)
 *
 * ffn: DeepSeek-V3's routed experts (the beam row) on MoE layers, else a
 * SwiGLU of intermediate_size.
 */
static Value *
build_beam(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6), n = 2.0 * (c->layer + 1) + 1;
	int moe = deepseek_is_moe(c, c->layer), selbias = 0;
	MoeSpec s;
	Value *h, *f;

	if (moe) {
		read_moe(c, &s, "moe_intermediate_size");
		deepseek_routing(c, &s, &selbias);
		check_groups(c, &s);
	} else {
		cfg_int(c, "intermediate_size");
	}
	if (c->err || !(h = decoder_norm_named(c, x, "pre_feedforward_layernorm.weight", eps)))
		return NULL;
	f = moe ? deepseek_moe(c, h, &s, selbias, 0, 0)
		: dense_mlp(c, h, "intermediate_size", moe_act(c), 0);
	c->b.loc.name = NULL;
	f = cfg_named(c, f ? cfg_rms_norm(c, f, "post_feedforward_layernorm.weight", eps) : NULL,
		      "ffn.norm");
	return add(c, scaled(c, f, 1 / sqrt(n), "ffn.scaled"),
		   scaled(c, x, sqrt((n - 1) / n), "residual.scaled"), "y");
}

/*
 * A.X-K2 (SKT): DeepSeek-V3's MoE (groups, when n_group is set, masked with
 * 0: group_fill=0) whose input is a gated RMSNorm on the MoE layers,
 *
 *	y = rms(x) * sigmoid(fc2(silu(fc1(rms(x)))))     the gate in f32
 *
 * fc1 / fc2 a low rank (gated_norm_rank) MLP; the hub's W_down / W_up
 * (renamed on load, hub_names).  Dense layers: a plain RMSNorm.
 */
static Value *
axk2_gated_norm(Cfg *c, Value *x, double eps)
{
	const char *w = "post_attention_layernorm.norm.weight";
	int64_t r = cfg_int_or(c, "gated_norm_rank", 16), H = c->hidden;
	Value *y, *g;

	if (r < 1)
		return cfg_error(c, "gated_norm_rank", "must be positive"), NULL;
	set_prefix(c, decoder_prefixes, w);
	y = cfg_named(c, cfg_rms_norm(c, x, w, eps), "post_attention_layernorm.norm");
	g = y ? cfg_linear(c, y, "post_attention_layernorm.mlp.fc1.weight", NULL, r, H,
			   "gated_norm_rank x hidden_size") : NULL;
	g = cfg_named(c, g ? ir_b1(&c->b, OP_SILU, g) : NULL, "post_attention_layernorm.mlp.act");
	g = g ? cfg_linear(c, g, "post_attention_layernorm.mlp.fc2.weight", NULL, H, r,
			   "hidden_size x gated_norm_rank") : NULL;
	if (!g)
		return NULL;
	c->b.loc.name = cfg_name(c, "post_attention_layernorm");
	ir_b_str(&c->b, "to", "f32");
	g = ir_b1(&c->b, OP_CAST, g);
	g = cfg_named(c, g ? ir_b1(&c->b, OP_SIGMOID, g) : NULL, "post_attention_layernorm.gate");
	ir_b_str(&c->b, "to", "f32");
	y = g ? ir_b1(&c->b, OP_CAST, y) : NULL;
	y = y ? ir_b2(&c->b, OP_MUL, y, g) : NULL;
	ir_b_str(&c->b, "to", dtype_name(x->type.dt));
	return cfg_named(c, y ? ir_b1(&c->b, OP_CAST, y) : NULL, "h");
}

static Value *
build_axk2(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	int selbias = 0, bias = cfg_bool_or(c, "mlp_bias", 0);
	MoeSpec s;
	Value *h;

	if (!deepseek_is_moe(c, c->layer)) {
		if (c->err || !(h = decoder_norm(c, x, eps)))
			return NULL;
		return residual(c, x, dense_mlp(c, h, "intermediate_size", moe_act(c), bias));
	}
	read_moe(c, &s, "moe_intermediate_size");
	deepseek_routing(c, &s, &selbias);
	s.fill0 = 1;
	check_groups(c, &s);
	if (c->err || !(h = axk2_gated_norm(c, x, eps)))
		return NULL;
	return residual(c, x, deepseek_moe(c, h, &s, selbias, cfg_int_or(c, "n_shared_experts", 1),
					   bias));
}

/* --- gpt-oss -------------------------------------------------------------- */

/*
 * Router with bias, top-k over the logits then softmax over the k; experts
 * stacked [E,H,2I] with interleaved gate/up columns and biases, and the
 * clamped SwiGLU (up+1) * gate*sigmoid(alpha*gate).
 */
static Value *
build_gpt_oss(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	MoeSpec s;
	Value *h, *l, *wt[4];
	WSpec w;

	read_moe(c, &s, "intermediate_size");
	s.router = "topk_softmax";
	s.act = "oai";
	s.layout = "interleave";
	s.alpha = cfg_num_or(c, "swiglu_alpha", 1.702);
	s.limit = cfg_num_or(c, "swiglu_limit", 7.0);
	if (!(s.limit > 0))
		cfg_error(c, "swiglu_limit", "must be positive");
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	l = cfg_named(c, cfg_router(c, h, "mlp.router.weight", "mlp.router.bias", &s, F32_OK),
		      "router_logits");
	wt[0] = cfg_experts_gu(c, "mlp", NULL, NULL, &s, 1);
	wt[1] = cfg_experts_down(c, "mlp", NULL, &s, 1);
	w = cfg_wspec(c, cfg_name(c, "mlp.experts.gate_up_proj_bias"), RECIPE_BIAS, 2,
		      (int64_t[]){s.E, 2 * s.I}, "num_local_experts x 2*intermediate_size");
	wt[2] = cfg_weight(c, &w);
	w = cfg_wspec(c, cfg_name(c, "mlp.experts.down_proj_bias"), RECIPE_BIAS, 2,
		      (int64_t[]){s.E, c->hidden}, "num_local_experts x hidden_size");
	wt[3] = cfg_weight(c, &w);
	if (!wt[2] || !wt[3])
		return NULL;
	c->b.loc.name = cfg_name(c, "mlp");
	return residual(c, x, cfg_named(c, cfg_moe(c, h, l, NULL, wt, &s), "moe"));
}

/* --- granitemoe, jamba, ernie4_5_moe, hunyuan_v1_moe ---------------------- */

/*
 * GraniteMoE: top-k over the logits, softmax over the k (router=topk_softmax);
 * experts stacked in the checkpoint as input_linear [E,2I,H] (gate rows
 * first) and output_linear [E,H,I]; the block's output is scaled by
 * residual_multiplier: y = x + m * ffn(norm(x)).  granitemoeshared adds a
 * dense shared_mlp (input_linear [2S,H], output_linear [H,S]).
 */
/* A GLU MLP whose gate and up are one [2I, H] weight, gate rows first:
 * down(act(gate) * up) with gate, up the halves of h . gu^T (mod: the
 * module, for value names; ikey: I's key, for diagnostics). */
static Value *
fused_glu(Cfg *c, Value *h, const char *mod, const char *gu_w, const char *down_w, int64_t I,
	  const char *act, const char *ikey)
{
	Value *gu, *a;
	Node *n;

	gu = cfg_linear(c, h, gu_w, NULL, 2 * I, c->hidden,
			arena_printf(c->m->arena, "2*%s x hidden_size", ikey));
	if (!gu)
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", mod);
	ir_b_int(&c->b, "axis", -1);
	if (!(n = ir_b_node(&c->b, OP_SPLIT, &gu, 1, 2)))
		return NULL;
	a = cfg_named(c, cfg_act(c, n->out[0], act), arena_printf(c->m->arena, "%s.act", mod));
	a = cfg_named(c, a ? ir_b2(&c->b, OP_MUL, a, n->out[1]) : NULL,
		      arena_printf(c->m->arena, "%s.glu", mod));
	return cfg_linear(c, a, down_w, NULL, c->hidden, I,
			  arena_printf(c->m->arena, "hidden_size x %s", ikey));
}

static Value *
granite_shared(Cfg *c, Value *h)
{
	int64_t S = cfg_int(c, "shared_intermediate_size");

	if (c->err)
		return NULL;
	return fused_glu(c, h, "shared_mlp", "shared_mlp.input_linear.weight",
			 "shared_mlp.output_linear.weight", S, moe_act(c), "shared_intermediate_size");
}

/*
 * granitemoehybrid (Granite 4.0-H): every layer, mamba or attention, has
 * the FFN; the shared MLP is always there, and the MoE only when
 * num_local_experts > 0 (Granite-4.0-H-Micro: 0, the shared MLP alone).
 */
static Value *
build_granitemoe(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	double mult = cfg_num_or(c, "residual_multiplier", 1.0);
	int hybrid = strcmp(c->type, "granitemoehybrid") == 0;
	int shared = hybrid || ((strcmp(c->type, "granitemoeshared") == 0 ||
				 strcmp(c->type, "granitemoe_swa") == 0) &&
				cfg_int_or(c, "shared_intermediate_size", 0) > 0);
	int mem;
	MoeSpec s;
	Value *h, *l, *f, *wt[4] = {NULL, NULL, NULL, NULL};

	if (hybrid && cfg_int_or(c, "num_local_experts", 8) == 0) {
		if (c->err || !(h = decoder_norm(c, x, eps)))
			return NULL;
		f = cfg_named(c, granite_shared(c, h), "ffn");
		return residual(c, x, scaled(c, f, mult, "ffn.scaled"));
	}
	read_moe(c, &s, "intermediate_size");
	s.router = "topk_softmax";
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	/* the hub's names, or transformers 5's in-memory ones (what it saves
	 * for granitemoe_swa, which has no conversion mapping) */
	mem = c->st && !cfg_ckpt_has(c, cfg_name(c, "block_sparse_moe.router.layer.weight")) &&
	      cfg_ckpt_has(c, cfg_name(c, "block_sparse_moe.router.weight"));
	l = cfg_named(c, cfg_router(c, h, mem ? "block_sparse_moe.router.weight"
					      : "block_sparse_moe.router.layer.weight",
				    NULL, &s, F32_OK), "router_logits");
	wt[0] = cfg_experts_gu(c, "block_sparse_moe", mem ? NULL : "block_sparse_moe.input_linear.weight",
			       NULL, &s, 0);
	wt[1] = cfg_experts_down(c, "block_sparse_moe",
				 mem ? NULL : "block_sparse_moe.output_linear.weight", &s, 0);
	c->b.loc.name = cfg_name(c, "block_sparse_moe");
	f = cfg_named(c, cfg_moe(c, h, l, NULL, wt, &s), "moe");
	if (f && shared)
		f = add(c, f, granite_shared(c, h), "ffn");
	return residual(c, x, scaled(c, f, mult, "ffn.scaled"));
}

/*
 * Dense decoders of other layouts (session 33):
 *
 *	granite: llama's block scaled by residual_multiplier, y = x + m * mlp(h)
 *	phi3 (Phi-3, Phi-3.5, Phi-4-mini), glm (GLM-4-9B): gate and up fused,
 *	    mlp.gate_up_proj [2I, H] (gate rows first), then mlp.down_proj;
 *	    glm4 (GLM-4-0414) adds post_mlp_layernorm on the MLP's output
 *	lfm2 (LFM2): feed_forward.{w1,w3,w2} SwiGLU (silu always) after ffn_norm
 *	    (eps norm_eps), on conv and attention layers alike; its width is
 *	    intermediate_size, or with block_auto_adjust_ff_dim int(2I/3), times
 *	    block_ffn_dim_multiplier rounded up to block_multiple_of
 *	lfm3 (LFM3): lfm2's FFN of intermediate_size, and with use_sandwich_norm
 *	    (true) post_ffn_norm on its output
 */
static Value *
build_granite(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	double mult = cfg_num_or(c, "residual_multiplier", 1.0);
	const char *act = cfg_hf_act(c, "hidden_act", "silu");
	int bias = cfg_bool_or(c, "mlp_bias", 0);
	Value *h;

	cfg_int(c, "intermediate_size");
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	return residual(c, x, scaled(c, dense_mlp(c, h, "intermediate_size", act, bias), mult,
				     "mlp.scaled"));
}

static Value *
build_phi3(Cfg *c, Value *x)
{
	int glm = strncmp(c->type, "glm", 3) == 0, post = strcmp(c->type, "glm4") == 0;
	double eps = eps_of(c, "rms_norm_eps", glm ? 1.5625e-7 : 1e-5);	/* the classes' */
	const char *act = cfg_hf_act(c, "hidden_act", "silu");
	int64_t I = cfg_int(c, "intermediate_size");
	Value *h, *f;

	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	f = cfg_named(c, fused_glu(c, h, "mlp", "mlp.gate_up_proj.weight", "mlp.down_proj.weight",
				   I, act, "intermediate_size"), "mlp");
	if (f && post)
		f = cfg_named(c, cfg_rms_norm(c, f, "post_mlp_layernorm.weight", eps), "ffn");
	return residual(c, x, f);
}

static int64_t
lfm2_width(Cfg *c)
{
	int64_t I = cfg_int(c, "intermediate_size"), k;
	double mult;

	if (!cfg_bool_or(c, "block_auto_adjust_ff_dim", 1))
		return I;
	I = (int64_t)(2.0 * (double)I / 3);
	if (!cfg_has(c, "block_ffn_dim_multiplier"))
		return I;
	mult = cfg_num_or(c, "block_ffn_dim_multiplier", 1.0);
	k = cfg_int_or(c, "block_multiple_of", 256);
	I = (int64_t)(mult * (double)I);
	if (k < 1 || I < 1)
		return cfg_error(c, "block_ffn_dim_multiplier", "gives a width of %lld (multiple "
				 "of %lld)", (long long)I, (long long)k), 1;
	return k * ((I + k - 1) / k);
}

static Value *
build_lfm2(Cfg *c, Value *x)
{
	static const char *const w132[3] = {"w1", "w3", "w2"};
	int v3 = strcmp(c->type, "lfm3") == 0;
	double eps = eps_of(c, "norm_eps", 1e-5);
	int64_t I = v3 ? cfg_int(c, "intermediate_size") : lfm2_width(c);
	Value *h, *f;

	if (c->err || !(h = decoder_norm_named(c, x, "ffn_norm.weight", eps)))
		return NULL;
	f = cfg_named(c, cfg_glu_mlp_as(c, h, "feed_forward", w132, I, "silu", 0,
					v3 ? "intermediate_size" : "intermediate_size (block_*)", 0),
		      "mlp");
	if (f && v3 && cfg_bool_or(c, "use_sandwich_norm", 1))
		f = cfg_named(c, cfg_rms_norm(c, f, "post_ffn_norm.weight", eps), "ffn");
	return residual(c, x, f);
}

/*
 * PhiMoE: LayerNorm with bias before the FFN; sparsemixer top-2 (eval mode:
 * router_jitter_noise only sets the threshold, docs/ir.md).  The logits
 * stay in the model's dtype (the round trip to f32 cfg_router ends with is
 * dropped): the model computes sparsemixer's threshold in bf16.  Hub and
 * save_pretrained names are Mixtral's (block_sparse_moe.gate, experts.E.w1/
 * w3/w2); transformers 5 in memory: mlp.router, mlp.experts.gate_up_proj.
 */
static Value *
build_phimoe(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	int hub;
	const char *mod, *router;
	char gf[96], uf[96], df[96], gate[96];
	MoeSpec s;
	Value *h, *l, *wt[4] = {NULL, NULL, NULL, NULL};

	read_moe(c, &s, "intermediate_size");
	s.router = "sparsemixer";
	s.jitter_eps = cfg_num_or(c, "router_jitter_noise", 0.01);
	if (!(s.jitter_eps >= 0))
		cfg_error(c, "router_jitter_noise", "must be a number >= 0");
	if (s.k != 2)
		cfg_error(c, "num_experts_per_tok", "PhiMoE's sparsemixer chooses exactly 2 experts, not %lld",
			  (long long)s.k);
	set_prefix(c, decoder_prefixes, "post_attention_layernorm.weight");
	h = cfg_named(c, cfg_layer_norm(c, x, "post_attention_layernorm.weight",
					"post_attention_layernorm.bias", eps), "h");
	if (c->err || !h)
		return NULL;
	hub = !c->st || cfg_ckpt_has(c, cfg_name(c, "block_sparse_moe.gate.weight"));
	mod = hub ? "block_sparse_moe" : "mlp";
	router = hub ? "gate" : "router";
	snprintf(gate, sizeof gate, "%s.%s.weight", mod, router);
	snprintf(gf, sizeof gf, "%s.experts.%%d.w1.weight", mod);
	snprintf(uf, sizeof uf, "%s.experts.%%d.w3.weight", mod);
	snprintf(df, sizeof df, "%s.experts.%%d.w2.weight", mod);
	l = cfg_router(c, h, gate, NULL, &s, F32_OK);
	if (l && l->def && l->def->op == OP_CAST && l->def->in[0]->type.dt == h->type.dt) {
		Node *back = l->def;
		l = back->in[0];
		ir_erase(c->b.g, back);
	}
	l = cfg_named(c, l, "router_logits");
	wt[0] = cfg_experts_gu(c, mod, gf, uf, &s, 0);
	wt[1] = cfg_experts_down(c, mod, df, &s, 0);
	c->b.loc.name = cfg_name(c, "%s", mod);
	return residual(c, x, cfg_named(c, cfg_moe(c, h, l, NULL, wt, &s), "moe"));
}

/*
 * Nemotron-H (hybrid Mamba/attention/MLP/MoE): each layer is one mixer,
 * y = x + mixer(norm(x)); only "moe" and "mlp" layers have an FFN.  Layer
 * types from layers_block_type (what transformers 5 writes), else the hub's
 * hybrid_override_pattern (E moe, - mlp, M mamba, * attention); the layer
 * count is theirs when num_hidden_layers is absent.  Experts and the shared
 * MLP are non-gated relu²: down(relu(up(h))²).  The moe op is gated, so
 * each expert's up projection is both its gate and up half with act=relu
 * (relu(u)·u = relu(u)²): exact, at the cost of running the up GEMM twice.
 * Routing is DeepSeek-V3's (sigmoid, selection bias, groups by top 2).
 */
static const char *const nemotron_prefixes[] = {"backbone.layers.%d.", "model.layers.%d.",
						"language_model.backbone.layers.%d.",	/* the omni wrapper's */
						/* Nemotron 3.5 Transcribe (nemo_speechlm):
						 * the hub's, transformers' */
						"llm.model.layers.%d.", "model.language_model.layers.%d.",
						NULL};

static const char *
nemotron_layer_type(Cfg *c, int layer)
{
	static const struct { char ch; const char *type; } pat[] = {
		{'E', "moe"}, {'-', "mlp"}, {'M', "mamba"}, {'*', "attention"},
	};
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(c->json, "layers_block_type");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(c->json, "hybrid_override_pattern");

	if (cJSON_IsArray(l)) {
		const cJSON *e = cJSON_GetArrayItem(l, layer);
		if (!e || !cJSON_IsString(e))
			return cfg_error(c, "layers_block_type", "no layer type (a string) for layer %d",
					 layer), NULL;
		return e->valuestring;
	}
	if (cJSON_IsString(p)) {
		if (layer < 0 || (size_t)layer >= strlen(p->valuestring))
			return cfg_error(c, "hybrid_override_pattern", "has no character for layer %d",
					 layer), NULL;
		for (size_t i = 0; i < NELEM(pat); i++)
			if (p->valuestring[layer] == pat[i].ch)
				return pat[i].type;
		return cfg_error(c, "hybrid_override_pattern", "'%c' (layer %d) is not one of E - M *",
				 p->valuestring[layer], layer), NULL;
	}
	return cfg_error(c, "layers_block_type", "missing key (nor hybrid_override_pattern)"), NULL;
}

static int
nemotron_is_moe(Cfg *c, int layer)
{
	const char *t = nemotron_layer_type(c, layer);

	return t && strcmp(t, "moe") == 0;
}

/* down(relu(up(h))²), non-gated (the dense layers and the shared experts). */
static Value *
relu2_mlp(Cfg *c, Value *h, const char *mod, int64_t I, const char *ikey, int bias)
{
	char up[96], upb[96], dn[96], dnb[96];
	Value *u, *r;

	snprintf(up, sizeof up, "%s.up_proj.weight", mod);
	snprintf(upb, sizeof upb, "%s.up_proj.bias", mod);
	snprintf(dn, sizeof dn, "%s.down_proj.weight", mod);
	snprintf(dnb, sizeof dnb, "%s.down_proj.bias", mod);
	u = cfg_linear(c, h, up, bias ? upb : NULL, I, c->hidden,
		       arena_printf(c->m->arena, "%s x hidden_size", ikey));
	c->b.loc.name = cfg_name(c, "%s", mod);
	r = cfg_named(c, cfg_act(c, u, "relu"), arena_printf(c->m->arena, "%s.relu", mod));
	r = cfg_named(c, r ? ir_b2(&c->b, OP_MUL, r, r) : NULL, arena_printf(c->m->arena, "%s.act", mod));
	return cfg_linear(c, r, dn, bias ? dnb : NULL, c->hidden, I,
			  arena_printf(c->m->arena, "hidden_size x %s", ikey));
}

static Value *
build_nemotron_h(Cfg *c, Value *x)
{
	double eps = eps_of(c, "layer_norm_epsilon", 1e-5);
	const char *type = nemotron_layer_type(c, c->layer);
	int bias = cfg_bool_or(c, "mlp_bias", 0);
	int64_t E = cfg_int(c, "n_routed_experts"), k = cfg_int(c, "num_experts_per_tok");
	MoeSpec s;
	Value *h, *l, *sb, *f, *sh, *wt[4] = {NULL, NULL, NULL, NULL};

	if (strcmp(cfg_str_or(c, "mlp_hidden_act", "relu2"), "relu2"))
		cfg_error(c, "mlp_hidden_act", "moec builds Nemotron-H's relu2 MLPs only, not %s",
			  cfg_str_or(c, "mlp_hidden_act", "relu2"));
	if (type && strcmp(type, "moe") && strcmp(type, "mlp"))
		return cfg_error(c, cfg_has(c, "layers_block_type") ? "layers_block_type" :
				 "hybrid_override_pattern", "layer %d is a %s layer: it has no FFN",
				 c->layer, type), NULL;
	if (c->err || !type)
		return NULL;
	set_prefix(c, nemotron_prefixes, "norm.weight");
	h = cfg_named(c, cfg_rms_norm(c, x, "norm.weight", eps), "h");
	if (!h)
		return NULL;
	if (strcmp(type, "mlp") == 0)
		return residual(c, x, cfg_named(c, relu2_mlp(c, h, "mixer", cfg_int(c, "intermediate_size"),
							   "intermediate_size", bias), "mlp"));
	if (cfg_has(c, "moe_latent_size"))
		return cfg_error(c, "moe_latent_size", "latent expert projections are not built yet"), NULL;
	moe_spec(c, &s, "n_routed_experts", E, "num_experts_per_tok", k, "moe_intermediate_size",
		 cfg_int(c, "moe_intermediate_size"));
	s.router = "sigmoid";
	s.act = "relu";
	s.renorm = cfg_bool_or(c, "norm_topk_prob", 1);
	s.scale = cfg_num_or(c, "routed_scaling_factor", 1.0);
	s.ngroup = cfg_int_or(c, "n_group", 1);
	s.topkgroup = cfg_int_or(c, "topk_group", 1);
	s.gscore = "top2";
	check_groups(c, &s);
	if (c->err)
		return NULL;
	l = cfg_named(c, cfg_router(c, h, "mixer.gate.weight", NULL, &s, F32_KEEP), "router_logits");
	sb = selection_bias(c, "mixer.gate.e_score_correction_bias", &s);
	wt[0] = cfg_experts_gu(c, "mixer", "mixer.experts.%d.up_proj.weight",
			       "mixer.experts.%d.up_proj.weight", &s, 0);
	wt[1] = cfg_experts_down(c, "mixer", "mixer.experts.%d.down_proj.weight", &s, 0);
	if (!sb)
		return NULL;
	c->b.loc.name = cfg_name(c, "mixer");
	f = cfg_named(c, cfg_moe(c, h, l, sb, wt, &s), "moe");
	sh = f ? cfg_named(c, relu2_mlp(c, h, "mixer.shared_experts",
					 cfg_int(c, "moe_shared_expert_intermediate_size"),
					 "moe_shared_expert_intermediate_size", bias), "shared") : NULL;
	c->b.loc.name = NULL;
	return residual(c, x, cfg_named(c, sh ? ir_b2(&c->b, OP_ADD, f, sh) : NULL, "ffn"));
}

/*
 * Step 3.5 (step3p5; the text model of the step3p7 wrapper): zero-centred
 * RMSNorm (1 + w, in f32); MoE layers "sparse" in mlp_layer_types, else
 * those in the hub's moe_layers_enum ("3,4,...,44"), else layers 3 on
 * (transformers 5.24's default); the others a dense SwiGLU of
 * intermediate_size; sigmoid router with e_score_correction_bias, top-k,
 * always renormalised, the routed sum times moe_router_scaling_factor (the
 * moe's scale); stacked experts gate_up_proj [E,2I,H] (gate rows first),
 * down_proj [E,H,I]; an always-on shared SwiGLU of share_expert_dim.  The
 * hub's checkpoints name them moe.gate (router), moe.router_bias,
 * moe.{gate,up,down}_proj.weight (each stacked, [E,I,H] / [E,H,I]) and
 * share_expert.*, and its config moe_num_experts and moe_top_k (aliases,
 * as transformers' attribute_map).  swiglu_limits (the routed experts) and
 * swiglu_limits_shared (the shared expert, and a dense layer's MLP) clamp
 * min(silu(gate), l) * clamp(up, -l, l) where the layer's entry is non-zero
 * (Step-3.5-Flash: 7 and 16 on layers 43-44): the moe's act=silu with
 * limit=l, and clip nodes in the MLP (canon-glu makes them swiglu's limit).
 */

/* Layer in the hub's moe_layers_enum: "3,4,5" or a list of layer numbers. */
static int
step3p5_in_enum(Cfg *c, int layer)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(c->json, "moe_layers_enum");
	const char *p;

	if (cJSON_IsArray(j))
		return cfg_in_list(c, "moe_layers_enum", layer);
	if (!cJSON_IsString(j))
		return cfg_error(c, "moe_layers_enum", "must be a string of layer numbers "
				 "(\"3,4,5\") or a list"), 0;
	for (p = j->valuestring; *p;) {
		char *end;
		long v = strtol(p, &end, 10);
		while (*end == ' ')
			end++;
		if (end == p || (*end && *end != ','))
			return cfg_error(c, "moe_layers_enum", "'%s' is not a list of layer numbers "
					 "(\"3,4,5\")", j->valuestring), 0;
		if (v == layer)
			return 1;
		p = *end ? end + 1 : end;
	}
	return 0;
}

static int
step3p5_is_moe(Cfg *c, int layer)
{
	if (cfg_has(c, "mlp_layer_types"))
		return cfg_list_str(c, "mlp_layer_types", layer, "sparse", "dense");
	if (cfg_has(c, "moe_layers_enum"))
		return step3p5_in_enum(c, layer);
	return layer >= 3;
}

/* The hub's stacked moe.gate_proj and moe.up_proj [E,I,H] as gate_up [E,2I,H]. */
static Value *
step3p5_hub_gu(Cfg *c, const MoeSpec *s)
{
	int64_t E = s->E, I = s->I, H = c->hidden, dim[3] = {E, I, H};
	WSpec w = cfg_wspec(c, cfg_name(c, "moe.gate_up_proj"), RECIPE_MATRIX, 3,
			    (int64_t[]){E, 2 * I, H}, arena_printf(c->m->arena, "%s x %s x hidden_size",
								   s->ekey, s->ikey));

	w.quant = QW_EXPERTS;
	cfg_add_blocks(&w, cfg_name(c, "moe.gate_proj.weight"), 0, 3, dim, E, 2 * I * H, 0);
	cfg_add_blocks(&w, cfg_name(c, "moe.up_proj.weight"), I * H, 3, dim, E, 2 * I * H, 0);
	return cfg_weight(c, &w);
}

static Value *
build_step3p5(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	int bias = cfg_bool_or(c, "mlp_bias", 0), moe = step3p5_is_moe(c, c->layer), hub;
	double shlim = swiglu_limit(c, "swiglu_limits_shared");
	static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
	MoeSpec s;
	Value *h, *l, *sb, *f, *sh, *wt[4] = {NULL, NULL, NULL, NULL};

	if (moe) {
		const char *ekey = cfg_alias(c, (const char *const[]){"n_routed_experts",
					      "num_local_experts", "moe_num_experts", NULL});
		const char *kkey = cfg_alias(c, (const char *const[]){"num_experts_per_tok",
					      "moe_top_k", NULL});
		moe_spec(c, &s, ekey, cfg_int(c, ekey), kkey, cfg_int(c, kkey),
			 "moe_intermediate_size", cfg_int(c, "moe_intermediate_size"));
		s.router = "sigmoid";
		s.renorm = 1;
		s.scale = cfg_num_or(c, "moe_router_scaling_factor", 1.0);
		s.limit = swiglu_limit(c, "swiglu_limits");
	}
	set_prefix(c, decoder_prefixes, "post_attention_layernorm.weight");
	h = c->err ? NULL : cfg_named(c, cfg_rms_norm_1p(c, x, "post_attention_layernorm.weight", eps), "h");
	if (!h)
		return NULL;
	if (!moe)
		return residual(c, x, cfg_named(c, cfg_glu_mlp_as(c, h, "mlp", proj,
					 cfg_int(c, "intermediate_size"), "silu", bias, "intermediate_size",
					 shlim), "mlp"));
	hub = c->st && cfg_ckpt_has(c, cfg_name(c, "moe.gate.weight"));
	l = cfg_named(c, cfg_router(c, h, hub ? "moe.gate.weight" : "mlp.gate.weight", NULL, &s,
				    F32_OK), "router_logits");
	sb = selection_bias(c, hub ? "moe.router_bias" : "mlp.gate.e_score_correction_bias", &s);
	wt[0] = hub ? step3p5_hub_gu(c, &s) : cfg_experts_gu(c, "mlp", NULL, NULL, &s, 0);
	wt[1] = cfg_experts_down(c, "mlp", hub ? "moe.down_proj.weight" : NULL, &s, 0);
	if (!sb)
		return NULL;
	c->b.loc.name = cfg_name(c, hub ? "moe" : "mlp");
	f = cfg_named(c, cfg_moe(c, h, l, sb, wt, &s), "moe");
	sh = f ? cfg_named(c, cfg_glu_mlp_as(c, h, hub ? "share_expert" : "mlp.shared_experts", proj,
					      cfg_int(c, "share_expert_dim"), "silu", bias,
					      "share_expert_dim", shlim), "shared") : NULL;
	return residual(c, x, sh ? add(c, f, sh, "ffn") : NULL);
}

/*
 * Jamba: layer L is MoE when L % expert_layer_period == expert_layer_offset
 * (and num_experts > 1); softmax, top-k, not renormalised; the FFN is the
 * layer's feed_forward after pre_ff_layernorm; router feed_forward.router.
 */
static int
jamba_is_moe(Cfg *c, int layer)
{
	int64_t period = cfg_int_or(c, "expert_layer_period", 2);
	int64_t offset = cfg_int_or(c, "expert_layer_offset", 1);

	if (period < 1 || offset >= period)
		return cfg_error(c, "expert_layer_offset", "must be below expert_layer_period "
				 "(%lld)", (long long)period), 0;
	return cfg_int_or(c, cfg_alias(c, expert_keys), 16) > 1 && layer % period == offset;
}

static Value *
build_jamba(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	MoeSpec s;
	Value *h;

	if (!jamba_is_moe(c, c->layer)) {
		int64_t I = cfg_int(c, "intermediate_size");
		if (c->err || !(h = decoder_norm_named(c, x, "pre_ff_layernorm.weight", eps)))
			return NULL;
		return residual(c, x, cfg_named(c, cfg_glu_mlp(c, h, "feed_forward", I,
							       cfg_hf_act(c, "hidden_act", "silu"),
							       0, "intermediate_size"), "mlp"));
	}
	read_moe(c, &s, "intermediate_size");
	if (c->err || !(h = decoder_norm_named(c, x, "pre_ff_layernorm.weight", eps)))
		return NULL;
	return residual(c, x, routed_by(c, h, "feed_forward", "router", "gate_proj", "up_proj",
					"down_proj", &s));
}

/*
 * ERNIE 4.5 MoE: softmax scores (f32), selection on scores +
 * e_score_correction_bias (held [1,E] as mlp.moe_statics.*), weights the
 * unbiased scores renormalised (by max(sum, moe_norm_min): the sum of k
 * softmax scores is at least k/E, far above any moe_norm_min a config
 * has, so it is renorm=1); shared experts of moe_num_shared_experts x
 * moe_intermediate_size; MoE layers: (L+1) % moe_layer_interval == 0 and
 * moe_layer_start_index <= L <= moe_layer_end_index (-1: the last).
 */
static int
ernie_is_moe(Cfg *c, int layer)
{
	int64_t every = cfg_int_or(c, "moe_layer_interval", 1);
	int64_t first = cfg_int_or(c, "moe_layer_start_index", 1);
	double last = cfg_num_or(c, "moe_layer_end_index", -1);

	if (every < 1)
		return cfg_error(c, "moe_layer_interval", "must be positive"), 0;
	return (layer + 1) % every == 0 && layer >= first && (last < 0 || layer <= last);
}

static Value *
build_ernie_moe(Cfg *c, Value *x)
{
	static const char *const ek[] = {"moe_num_experts", "num_experts", NULL};
	static const char *const kk[] = {"moe_k", "num_experts_per_tok", NULL};
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	int bias = cfg_bool_or(c, "use_bias", 0);
	double normmin = cfg_num_or(c, "moe_norm_min", 1e-12);
	int64_t nshared;
	MoeSpec s;
	Value *h, *l, *sb, *f, *wt[4] = {NULL, NULL, NULL, NULL};
	WSpec w;

	if (!ernie_is_moe(c, c->layer)) {
		if (c->err || !(h = decoder_norm(c, x, eps)))
			return NULL;
		return residual(c, x, dense_mlp(c, h, "intermediate_size",
						cfg_hf_act(c, "hidden_act", "silu"), bias));
	}
	{
		const char *ekey = cfg_alias(c, ek), *kkey = cfg_alias(c, kk);
		int64_t E = cfg_int(c, ekey), k = cfg_int(c, kkey);
		moe_spec(c, &s, ekey, E, kkey, k, "moe_intermediate_size",
			 cfg_int(c, "moe_intermediate_size"));
	}
	s.renorm = 1;
	s.act = moe_act(c);
	if (!(normmin >= 0 && normmin < 1.0 / (double)s.E))
		cfg_error(c, "moe_norm_min", "%g would clamp the renormalisation; moec builds "
			  "moe_norm_min below 1/%s", normmin, s.ekey);
	nshared = cfg_int_or(c, "moe_num_shared_experts", 2);
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	l = cfg_named(c, cfg_router(c, h, "mlp.gate.weight", NULL, &s, F32_KEEP),
		      "router_logits");
	w = cfg_wspec(c, cfg_name(c, "mlp.moe_statics.e_score_correction_bias"), RECIPE_BIAS, 1,
		      &s.E, s.ekey);
	w.f32ok = F32_KEEP;
	if (c->st)
		cfg_add_piece(&w, w.name, 0, 2, (int64_t[]){1, s.E}, 0);
	sb = cfg_weight(c, &w);
	if (sb && sb->type.dt != DT_F32) {
		ir_b_str(&c->b, "to", "f32");
		sb = cfg_named(c, ir_b1(&c->b, OP_CAST, sb), "mlp.moe_statics.f32");
	}
	wt[0] = cfg_experts_gu(c, "mlp", "mlp.experts.%d.gate_proj.weight",
			       "mlp.experts.%d.up_proj.weight", &s, 0);
	wt[1] = cfg_experts_down(c, "mlp", "mlp.experts.%d.down_proj.weight", &s, 0);
	if (!sb)
		return NULL;
	c->b.loc.name = cfg_name(c, "mlp");
	f = cfg_named(c, cfg_moe(c, h, l, sb, wt, &s), "moe");
	if (f && nshared > 0)
		f = add(c, f, cfg_named(c, cfg_glu_mlp(c, h, "mlp.shared_experts", nshared * s.I,
						       "silu", bias, "moe_num_shared_experts*"
						       "moe_intermediate_size"), "shared"), "ffn");
	return residual(c, x, f);
}

/*
 * Hunyuan (HunYuan-MoE-V1, Hunyuan-A13B): every layer MoE; num_experts and
 * moe_topk are an int or a per-layer list; softmax (f32 router mlp.gate.wg),
 * top-k, renormalised; experts and the always-on shared_mlp are
 * intermediate_size wide (transformers' reading; the hub's
 * moe_intermediate_size lists are not read).
 */
static int64_t
per_layer(Cfg *c, const char *key)
{
	int64_t v = cfg_is_list(c, key) ? cfg_list_int(c, key, c->layer) : cfg_int(c, key);

	if (v < 1 && !c->err)
		cfg_error(c, key, "must be positive for layer %d", c->layer);
	return v < 1 ? 1 : v;
}

static Value *
build_hunyuan_moe(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	MoeSpec s;
	Value *h, *f;

	{
		int64_t E = per_layer(c, "num_experts"), k = per_layer(c, "moe_topk");
		moe_spec(c, &s, "num_experts", E, "moe_topk", k, "intermediate_size",
			 cfg_int(c, "intermediate_size"));
	}
	s.renorm = 1;
	s.act = moe_act(c);
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	{
		Value *l = cfg_named(c, cfg_router(c, h, "mlp.gate.wg.weight", NULL, &s, F32_KEEP),
				     "router_logits");
		Value *wt[4] = {NULL, NULL, NULL, NULL};
		wt[0] = cfg_experts_gu(c, "mlp", "mlp.experts.%d.gate_proj.weight",
				       "mlp.experts.%d.up_proj.weight", &s, 0);
		wt[1] = cfg_experts_down(c, "mlp", "mlp.experts.%d.down_proj.weight", &s, 0);
		c->b.loc.name = cfg_name(c, "mlp");
		f = cfg_named(c, cfg_moe(c, h, l, NULL, wt, &s), "moe");
	}
	if (f)
		f = add(c, f, cfg_named(c, cfg_glu_mlp(c, h, "mlp.shared_mlp", s.I, s.act, 0,
						       "intermediate_size"), "shared"), "ffn");
	return residual(c, x, f);
}

/* --- llama4 ---------------------------------------------------------------- */

/*
 * Llama 4 (text model; the llama4 wrapper is read through text_config).
 * MoE layers: moe_layers, else every interleave_moe_layer_step-th
 * (step-1, 2*step-1, ...); others a dense SwiGLU of intermediate_size_mlp.
 * The MoE block is not weighted experts: the chosen expert's *input* is
 * scaled by the sigmoid of its logit, and an always-on shared expert adds:
 *
 *	s   = sigmoid(max(logits))              top-1: the chosen logit
 *	ffn = expert_argmax(h * s) + shared_expert(h)
 *
 * built as generic ops before a moe node whose router is top-1 over the
 * logits with weight 1 (topk_softmax, k=1).  top-k > 1 (each chosen expert
 * fed its own scaled input) is refused.  Experts are fused [E,H,2I] (gate
 * columns first) and [E,I,H], transposed at import.
 */
static int
llama4_is_moe(Cfg *c, int layer)
{
	int64_t step = cfg_int_or(c, "interleave_moe_layer_step", 1);

	if (cfg_has(c, "moe_layers"))
		return cfg_in_list(c, "moe_layers", layer);
	if (step < 1)
		return cfg_error(c, "interleave_moe_layer_step", "must be positive"), 0;
	return (layer + 1) % step == 0;
}

static Value *
llama4_scaled_input(Cfg *c, Value *h, Value *logits)
{
	Value *m, *sg;

	c->b.loc.name = cfg_name(c, "feed_forward.router");
	ir_b_ints(&c->b, "axes", (const int64_t[]){-1}, 1);
	ir_b_int(&c->b, "keepdims", 1);
	m = cfg_named(c, ir_b1(&c->b, OP_REDUCE_MAX, logits), "router_top1");
	sg = cfg_named(c, m ? ir_b1(&c->b, OP_SIGMOID, m) : NULL, "router_scores");
	if (sg && sg->type.dt != h->type.dt) {
		ir_b_str(&c->b, "to", dtype_name(h->type.dt));
		sg = cfg_named(c, ir_b1(&c->b, OP_CAST, sg), "router_scores.cast");
	}
	return cfg_named(c, sg ? ir_b2(&c->b, OP_MUL, h, sg) : NULL, "routed_in");
}

static Value *
build_llama4(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	const char *act = cfg_hf_act(c, "hidden_act", "silu");
	MoeSpec s;
	Value *h, *l, *in, *f, *wt[4] = {NULL, NULL, NULL, NULL};

	if (!llama4_is_moe(c, c->layer)) {
		int64_t I = cfg_int_or(c, "intermediate_size_mlp", 16384);
		if (I < 1)
			cfg_error(c, "intermediate_size_mlp", "must be positive");
		if (c->err || !(h = decoder_norm(c, x, eps)))
			return NULL;
		return residual(c, x, cfg_named(c, cfg_glu_mlp(c, h, "feed_forward", I, act, 0,
							       "intermediate_size_mlp"), "mlp"));
	}
	read_moe(c, &s, "intermediate_size");
	s.router = "topk_softmax";	/* top-1 over the logits, weight 1 */
	if (s.k != 1)
		cfg_error(c, "num_experts_per_tok", "llama4 feeds each chosen expert its own "
			  "sigmoid-scaled input; moec builds top-1 only, not %lld", (long long)s.k);
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	l = cfg_named(c, cfg_router(c, h, "feed_forward.router.weight", NULL, &s, F32_OK),
		      "router_logits");
	in = l ? llama4_scaled_input(c, h, l) : NULL;
	wt[0] = cfg_experts_gu(c, "feed_forward", NULL, NULL, &s, 1);
	wt[1] = cfg_experts_down(c, "feed_forward", NULL, &s, 1);
	c->b.loc.name = cfg_name(c, "feed_forward");
	f = cfg_named(c, in ? cfg_moe(c, in, l, NULL, wt, &s) : NULL, "moe");
	if (f)
		f = add(c, f, cfg_named(c, cfg_glu_mlp(c, h, "feed_forward.shared_expert", s.I, act,
						       0, "intermediate_size"), "shared"), "ffn");
	return residual(c, x, f);
}

/* --- gemma4 ---------------------------------------------------------------- */

/*
 * Gemma 4 (text model gemma4_text).  The FFN sub-block has four norms, and
 * with enable_moe_block a MoE runs in parallel with the dense MLP, both on
 * the block input x:
 *
 *	m  = mlp(pre_feedforward_layernorm(x))                   GELU-tanh GLU
 *	m1 = post_feedforward_layernorm_1(m)
 *	l  = router.proj(rms(x) * router.scale * hidden_size^-0.5)   its own norm
 *	e  = moe(pre_feedforward_layernorm_2(x), l)   softmax, top-k, renormalised,
 *	     weights times router.per_expert_scale[expert]
 *	y  = layer_scalar * (x + post_feedforward_layernorm(m1 + post_feedforward_layernorm_2(e)))
 *
 * The router norm's scale is one f32 vector (router.scale * hidden_size^-0.5);
 * per_expert_scale is folded into the experts' down projection (the weight
 * of expert e times its scale: the same sum).
 *
 * The small dense models (Gemma 4 E2B, E4B) add a per-layer input (PLE,
 * hidden_size_per_layer_input P > 0) after the FFN's residual sum s, before
 * layer_scalar:
 *
 *	s' = s + post_per_layer_input_norm(per_layer_projection(
 *		act(per_layer_input_gate(s)) * per_layer_input))
 *
 * per_layer_input [T, P] is the layer's slice of the per-layer embeddings
 * the model computes from the token ids: the block's second input.  With
 * use_double_wide_mlp the layers that reuse another layer's KV cache (the
 * last num_kv_shared_layers) have a dense MLP of 2 * intermediate_size.
 *
 * DiffusionGemma (diffusion_gemma_text) has Gemma 4's MoE block on every
 * layer, without per-layer inputs or double-wide MLPs (those keys are not
 * its config's); its encoder and decoder share the layers' weights, saved
 * under the decoder (model.decoder.layers.N.).  Gemma 4 Unified
 * (gemma4_unified_text) has the dense block alone, double-wide MLPs
 * included: no per-layer inputs, no MoE keys.
 */
enum { G4_MOE_KEY, G4_MOE_ALL, G4_MOE_NONE };	/* enable_moe_block says; always; never */

typedef struct {
	int64_t ple;	/* hidden_size_per_layer_input's default; -1: none */
	int moe;	/* G4_MOE_*: the keys its config class has */
	const char *const *prefix;
} Gemma4Spec;

static const char *const diffusion_prefixes[] = {"model.decoder.layers.%d.",
						 "decoder.layers.%d.", NULL};
static Value *
scaled_vector(Cfg *c, const char *name, int64_t n, double k, const char *why)
{
	Value *v = cfg_vector(c, cfg_name(c, "%s", name), RECIPE_NORM, n, why), *kv;

	if (!v)
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", name);
	if (v->type.dt != DT_F32) {
		ir_b_str(&c->b, "to", "f32");
		v = ir_b1(&c->b, OP_CAST, v);
	}
	kv = ir_b_const_f(&c->b, DT_F32, k);
	return v && kv ? ir_b2(&c->b, OP_MUL, v, kv) : NULL;
}

static Value *
gemma4_moe(Cfg *c, Value *x, double eps, const MoeSpec *s)
{
	Value *rs, *l, *h2, *pes, *wt[4] = {NULL, NULL, NULL, NULL};

	rs = cfg_named(c, scaled_vector(c, "router.scale", c->hidden,
					1 / sqrt((double)c->hidden), "hidden_size"),
		       "router.scale.scaled");
	c->b.loc.name = cfg_name(c, "router.norm");
	ir_b_int(&c->b, "axis", -1);
	ir_b_float(&c->b, "eps", eps);
	l = cfg_named(c, rs ? ir_b2(&c->b, OP_RMS_NORM, x, rs) : NULL, "router.in");
	l = l ? cfg_named(c, cfg_router(c, l, "router.proj.weight", NULL, s, F32_OK),
			  "router_logits") : NULL;
	h2 = cfg_named(c, cfg_rms_norm(c, x, "pre_feedforward_layernorm_2.weight", eps), "h2");
	wt[0] = cfg_experts_gu(c, "", "experts.gate_up_proj", NULL, s, 0);
	wt[1] = cfg_experts_down(c, "", "experts.down_proj", s, 0);
	pes = cfg_vector(c, cfg_name(c, "router.per_expert_scale"), RECIPE_NORM, s->E,
			 s->ekey);
	if (!l || !h2 || !wt[1] || !pes)
		return NULL;
	c->b.loc.name = cfg_name(c, "router.per_expert_scale");
	ir_b_ints(&c->b, "shape", (const int64_t[]){s->E, 1, 1}, 3);
	pes = ir_b1(&c->b, OP_RESHAPE, pes);
	if (pes && pes->type.dt != wt[1]->type.dt) {
		ir_b_str(&c->b, "to", dtype_name(wt[1]->type.dt));
		pes = ir_b1(&c->b, OP_CAST, pes);
	}
	wt[1] = cfg_named(c, pes ? ir_b2(&c->b, OP_MUL, wt[1], pes) : NULL,
			  "experts.down_proj.scaled");
	c->b.loc.name = cfg_name(c, "experts");
	return cfg_named(c, cfg_moe(c, h2, l, NULL, wt, s), "moe");
}

/* The per-layer input branch after s (above). */
static Value *
gemma4_ple(Cfg *c, Value *s, int64_t P, const char *act, double eps)
{
	Value *p = cfg_input(c, "per_layer_input", P), *g;

	g = cfg_linear(c, s, "per_layer_input_gate.weight", NULL, P, c->hidden,
		       "hidden_size_per_layer_input x hidden_size");
	g = cfg_named(c, cfg_act(c, g, act), "per_layer_input_gate.act");
	c->b.loc.name = cfg_name(c, "per_layer_input_gate");
	g = cfg_named(c, g && p ? ir_b2(&c->b, OP_MUL, g, p) : NULL, "per_layer_input.gated");
	g = g ? cfg_linear(c, g, "per_layer_projection.weight", NULL, c->hidden, P,
			   "hidden_size x hidden_size_per_layer_input") : NULL;
	g = g ? cfg_named(c, cfg_rms_norm(c, g, "post_per_layer_input_norm.weight", eps),
			  "per_layer_input.out") : NULL;
	return add(c, s, g, "s.ple");
}

/* The dense MLP's width: doubled on a KV-sharing layer with double-wide MLPs. */
static int64_t
gemma4_inter(Cfg *c, const Gemma4Spec *g, const char **ikey)
{
	int64_t I = cfg_int(c, "intermediate_size"), nshared;

	*ikey = "intermediate_size";
	if (g->moe != G4_MOE_ALL && cfg_bool_or(c, "use_double_wide_mlp", 0)) {
		nshared = cfg_int_or(c, "num_kv_shared_layers", 0);
		if (c->layer >= cfg_int(c, "num_hidden_layers") - nshared) {
			*ikey = "2 * intermediate_size (use_double_wide_mlp, a KV-sharing layer)";
			return 2 * I;
		}
	}
	return I;
}

static Value *
gemma4_block(Cfg *c, Value *x, const Gemma4Spec *g)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	const char *act = cfg_hf_act(c, "hidden_activation", "gelu_pytorch_tanh"), *ikey;
	int moe = g->moe == G4_MOE_ALL ||
		  (g->moe == G4_MOE_KEY && cfg_bool_or(c, "enable_moe_block", 0));
	int64_t P = g->ple < 0 ? 0 : cfg_int_or(c, "hidden_size_per_layer_input", g->ple);
	int64_t I = gemma4_inter(c, g, &ikey);
	MoeSpec s;
	Value *h, *m, *f, *ls;

	memset(&s, 0, sizeof s);
	if (moe) {
		int64_t E = cfg_int(c, "num_experts"), k = cfg_int(c, "top_k_experts");
		moe_spec(c, &s, "num_experts", E, "top_k_experts", k, "moe_intermediate_size",
			 cfg_int(c, "moe_intermediate_size"));
		s.renorm = 1;
		s.act = act;
		if (strcmp(act, "silu") && strcmp(act, "gelu") && strcmp(act, "gelu_tanh"))
			cfg_error(c, "hidden_activation", "the experts of gemma4 must use silu or gelu");
	}
	if (c->err)
		return NULL;
	set_prefix(c, g->prefix, "pre_feedforward_layernorm.weight");
	h = cfg_named(c, cfg_rms_norm(c, x, "pre_feedforward_layernorm.weight", eps), "h");
	m = h ? cfg_named(c, cfg_glu_mlp(c, h, "mlp", I, act, 0, ikey), "mlp") : NULL;
	if (m && moe) {
		Value *m1 = cfg_named(c, cfg_rms_norm(c, m, "post_feedforward_layernorm_1.weight",
						      eps), "mlp.post_norm");
		Value *e = gemma4_moe(c, x, eps, &s);
		e = e ? cfg_named(c, cfg_rms_norm(c, e, "post_feedforward_layernorm_2.weight", eps),
				  "moe.post_norm") : NULL;
		m = add(c, m1, e, "ffn");
	}
	f = m ? cfg_named(c, cfg_rms_norm(c, m, "post_feedforward_layernorm.weight", eps),
			  "ffn.post_norm") : NULL;
	f = add(c, x, f, "s");
	if (f && P > 0)
		f = gemma4_ple(c, f, P, act, eps);
	ls = cfg_vector(c, cfg_name(c, "layer_scalar"), RECIPE_NORM, 1, "1");
	if (!f || !ls)
		return NULL;
	c->b.loc.name = cfg_name(c, "layer_scalar");
	return cfg_named(c, ir_b2(&c->b, OP_MUL, f, ls), "y");
}

static Value *
build_gemma4(Cfg *c, Value *x)
{
	static const Gemma4Spec g = {256, G4_MOE_KEY, decoder_prefixes};

	return gemma4_block(c, x, &g);
}

static Value *
build_gemma4_unified(Cfg *c, Value *x)
{
	static const Gemma4Spec g = {-1, G4_MOE_NONE, decoder_prefixes};

	return gemma4_block(c, x, &g);
}

static Value *
build_diffusion_gemma(Cfg *c, Value *x)
{
	static const Gemma4Spec g = {-1, G4_MOE_ALL, diffusion_prefixes};

	return gemma4_block(c, x, &g);
}

/* --- dbrx ------------------------------------------------------------------ */

/*
 * DBRX: keys d_model, n_layers and ffn_config {moe_num_experts, moe_top_k,
 * ffn_hidden_size, moe_normalize_expert_weights, ffn_act_fn}; every layer MoE;
 * softmax, top-k, weights divided by their L1 norm (= renormalised; null:
 * not; another p is refused); LayerNorm without bias (norm_attn_norm.norm_2, eps 1e-5).
 * Experts fused per kind: w1 (gate), v1 (up) and w2 (down, held
 * transposed) are [E*I, H], one row block per expert, scattered into the
 * stacked [E,2I,H] and [E,H,I] weights at import.
 */
static Value *
build_dbrx(Cfg *c, Value *x)
{
	static const char *const pre[] = {"transformer.blocks.%d.", "blocks.%d.", NULL};
	const char *act = "silu";
	double p = cfg_num_or(c, "moe_normalize_expert_weights", 1.0);
	MoeSpec s;
	Value *h, *l, *in[2], *wt[4] = {NULL, NULL, NULL, NULL};
	WSpec w;
	Node *n;

	{
		int64_t E = cfg_int_or(c, "moe_num_experts", 4), k = cfg_int_or(c, "moe_top_k", 1);
		moe_spec(c, &s, "moe_num_experts", E, "moe_top_k", k, "ffn_hidden_size",
			 cfg_int_or(c, "ffn_hidden_size", 3584));
	}
	{
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(c->json, "ffn_act_fn");
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(a, "name");
		if (cJSON_IsString(nm))
			act = nm->valuestring;
	}
	if (strcmp(act, "silu"))
		cfg_error(c, "ffn_act_fn", "the experts of dbrx must use silu, not %s", act);
	if (cfg_has(c, "moe_normalize_expert_weights") && p != 1)
		cfg_error(c, "moe_normalize_expert_weights", "moec builds the L1 norm (1), not %g", p);
	/* absent: transformers' default 1.0; null: no normalisation */
	s.renorm = !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c->json,
								   "moe_normalize_expert_weights"));
	if (s.E < 1 || s.k < 1 || s.I < 1)
		cfg_error(c, "ffn_config", "moe_num_experts, moe_top_k and ffn_hidden_size must be "
			  "positive");
	if (c->err)
		return NULL;
	set_prefix(c, pre, "norm_attn_norm.norm_2.weight");
	in[0] = x;
	in[1] = cfg_vector(c, cfg_name(c, "norm_attn_norm.norm_2.weight"), RECIPE_NORM, c->hidden,
			   "d_model");
	if (!in[1])
		return NULL;
	c->b.loc.name = cfg_name(c, "norm_attn_norm.norm_2");
	ir_b_int(&c->b, "axis", -1);
	ir_b_float(&c->b, "eps", 1e-5);
	n = ir_b_node(&c->b, OP_LAYER_NORM, in, 2, 1);
	h = cfg_named(c, n ? n->out[0] : NULL, "h");
	if (!h)
		return NULL;
	l = cfg_named(c, cfg_router(c, h, "ffn.router.layer.weight", NULL, &s, F32_OK),
		      "router_logits");
	{
		int64_t E = s.E, I = s.I, H = c->hidden, fused[2] = {E * I, H};
		w = cfg_wspec(c, cfg_name(c, "ffn.experts.gate_up_proj"), RECIPE_MATRIX, 3,
			      (int64_t[]){E, 2 * I, H}, "moe_num_experts x 2*ffn_hidden_size x d_model");
		if (c->st) {
			cfg_add_blocks(&w, cfg_name(c, "ffn.experts.mlp.w1"), 0, 2, fused, E, 2 * I * H, 0);
			cfg_add_blocks(&w, cfg_name(c, "ffn.experts.mlp.v1"), I * H, 2, fused, E, 2 * I * H,
				       0);
		}
		wt[0] = cfg_weight(c, &w);
		w = cfg_wspec(c, cfg_name(c, "ffn.experts.down_proj"), RECIPE_MATRIX, 3,
			      (int64_t[]){E, H, I}, "moe_num_experts x d_model x ffn_hidden_size");
		if (c->st)
			cfg_add_blocks(&w, cfg_name(c, "ffn.experts.mlp.w2"), 0, 2, fused, E, H * I, 1);
		wt[1] = cfg_weight(c, &w);
	}
	c->b.loc.name = cfg_name(c, "ffn");
	return residual(c, x, cfg_named(c, cfg_moe(c, h, l, NULL, wt, &s), "moe"));
}

/* --- arctic ---------------------------------------------------------------- */

/*
 * Snowflake Arctic (remote code: the hub's modeling_arctic.py, vLLM's
 * arctic.py).  Layer L is MoE when (L + 1) % moe_layer_frequency == 0 (2);
 * the others are a dense SwiGLU block_sparse_moe.mlp.{w1,w3,w2} of
 * intermediate_size.  Router block_sparse_moe.gate: softmax, top-k,
 * renormalised when k > 1 (vLLM; DeepSpeed's top-2 gating the model was
 * trained with); Mixtral's w1/w3/w2 experts.  A MoE layer with
 * parallel_attn_mlp_res also runs a dense residual MLP, hidden_size wide,
 * on the attention output, while the MoE reads the decoder layer's input
 * from before attention, a second input of the block:
 *
 *	y = x + residual_mlp(residual_layernorm(x))
 *	      + moe(post_attention_layernorm(layer_in))
 */
static int
arctic_is_moe(Cfg *c, int layer)
{
	int64_t f = cfg_int_or(c, "moe_layer_frequency", 2);

	if (f == 0)
		return cfg_error(c, "moe_layer_frequency", "must be positive"), 0;
	return (layer + 1) % f == 0;
}

/* parallel_attn_mlp_res (the hub's code) as vLLM's use_residual must agree. */
static int
arctic_parallel(Cfg *c)
{
	int par = cfg_bool_or(c, "parallel_attn_mlp_res", 0);

	if (cfg_has(c, "use_residual") && cfg_bool_or(c, "use_residual", 0) != par)
		cfg_error(c, "use_residual", "is %s but parallel_attn_mlp_res is %s: the hub's "
			  "modeling_arctic.py reads parallel_attn_mlp_res and vLLM use_residual, "
			  "so the two disagree on the block", par ? "false" : "true",
			  par ? "true" : "false");
	return par;
}

static Value *
build_arctic(Cfg *c, Value *x)
{
	static const char *const w132[3] = {"w1", "w3", "w2"};
	double eps = eps_of(c, "rms_norm_eps", 1e-5);
	const char *act = cfg_hf_act(c, "hidden_act", "silu");
	int par = arctic_parallel(c), moe = arctic_is_moe(c, c->layer);
	MoeSpec s;
	Value *in = x, *h, *r;

	if (cfg_has(c, "quantization"))
		cfg_error(c, "quantization", "DeepSpeed's FP quantization is applied when "
			  "DeepSpeed loads the model; moec reads the bf16 checkpoint (null)");
	if (moe) {
		read_moe(c, &s, "intermediate_size");
		s.renorm = s.k > 1;
	} else {
		cfg_int(c, "intermediate_size");
	}
	if (c->err)
		return NULL;
	if (moe && par)
		in = cfg_input(c, "layer_in", c->hidden);
	if (!(h = decoder_norm(c, in, eps)))
		return NULL;
	if (!moe)
		return residual(c, x, cfg_named(c, cfg_glu_mlp_as(c, h, "block_sparse_moe.mlp", w132,
					 cfg_int(c, "intermediate_size"), act, 0,
					 "intermediate_size", 0), "mlp"));
	if (!par)
		return residual(c, x, routed(c, h, "block_sparse_moe", "w1", "w3", "w2", &s));
	r = cfg_named(c, cfg_rms_norm(c, x, "residual_layernorm.weight", eps), "r");
	r = r ? cfg_named(c, cfg_glu_mlp_as(c, r, "residual_mlp", w132, c->hidden, act, 0,
					    "hidden_size", 0), "residual_mlp") : NULL;
	return residual(c, add(c, x, r, "s"), routed(c, h, "block_sparse_moe", "w1", "w3", "w2",
						       &s));
}

/* --- cohere2_moe ------------------------------------------------------------ */

/*
 * Cohere Command A+ (cohere2_moe): attention and the FFN run in parallel on
 * the decoder layer's normed input, y = layer_in + attn(h) + ffn(h) with
 * h = input_layernorm(layer_in).  As a block of two inputs (arctic's), x the
 * residual stream after attention (layer_in + attn(h)) and layer_in:
 *
 *	y = x + ffn(input_layernorm(layer_in))
 *
 * input_layernorm: RMSNorm when rms_norm_eps is set, else LayerNorm without
 * bias (layer_norm_eps).  MoE layers (mlp_layer_types, else all): top-k of
 * the logits (model dtype), softmax over the k (expert_selection_fn softmax)
 * or each one's sigmoid (sigmoid; renormalised as norm_topk_prob says);
 * shared experts num_shared_experts x intermediate_size, added, or averaged
 * with the routed sum (shared_expert_combination_strategy).  Dense layers: a
 * SwiGLU of prefix_dense_intermediate_size.
 */
static int
cohere2_is_moe(Cfg *c, int layer)
{
	if (cfg_has(c, "mlp_layer_types"))
		return cfg_list_str(c, "mlp_layer_types", layer, "sparse", "dense");
	return 1;
}

/* rms: an RMSNorm (cohere2_moe with rms_norm_eps), else Cohere's LayerNorm */
static Value *
cohere2_norm(Cfg *c, Value *x, int rms)
{
	const char *w = "input_layernorm.weight";

	set_prefix(c, decoder_prefixes, w);
	if (rms)
		return cfg_named(c, cfg_rms_norm(c, x, w, eps_of(c, "rms_norm_eps", 1e-6)), "h");
	return cfg_named(c, cfg_layer_norm(c, x, w, NULL, eps_of(c, "layer_norm_eps", 1e-5)), "h");
}

static Value *
cohere2_moe(Cfg *c, Value *h, const MoeSpec *s)
{
	int64_t nshared = cfg_int_or(c, "num_shared_experts", 0);
	const char *comb = cfg_str_or(c, "shared_expert_combination_strategy", "average");
	int avg = !strcmp(comb, "average");
	Value *f = routed(c, h, "mlp", "gate_proj", "up_proj", "down_proj", s), *sh;

	if (!avg && strcmp(comb, "sum"))
		return cfg_error(c, "shared_expert_combination_strategy", "'%s' is not sum or "
				 "average", comb), NULL;
	if (!f || nshared == 0)
		return f;
	sh = cfg_named(c, cfg_glu_mlp(c, h, "mlp.shared_experts", nshared * s->I, s->act, 0,
				      "num_shared_experts*intermediate_size"), "shared");
	f = add(c, f, sh, avg ? "ffn.sum" : "ffn");
	return avg ? scaled(c, f, 0.5, "ffn") : f;
}

static Value *
build_cohere2_moe(Cfg *c, Value *x)
{
	const char *sel = cfg_str_or(c, "expert_selection_fn", "softmax");
	int moe = cohere2_is_moe(c, c->layer);
	MoeSpec s;
	Value *in, *h;

	if (moe) {
		read_moe(c, &s, "intermediate_size");
		if (!strcmp(sel, "sigmoid")) {
			s.router = "sigmoid";
			s.renorm = cfg_bool_or(c, "norm_topk_prob", 1);
		} else if (!strcmp(sel, "softmax")) {
			s.router = "topk_softmax";
		} else {
			cfg_error(c, "expert_selection_fn", "'%s' is not softmax or sigmoid", sel);
		}
	} else {
		cfg_int(c, "prefix_dense_intermediate_size");
	}
	if (c->err || !(in = cfg_input(c, "layer_in", c->hidden)) ||
	    !(h = cohere2_norm(c, in, cfg_has(c, "rms_norm_eps"))))
		return NULL;
	if (!moe)
		return residual(c, x, dense_mlp(c, h, "prefix_dense_intermediate_size", moe_act(c), 0));
	return residual(c, x, cohere2_moe(c, h, &s));
}

/* Command R (cohere), Command R7B and Command A (cohere2), dense: the same
 * parallel block, a SwiGLU of intermediate_size on every layer after
 * Cohere's LayerNorm (no bias, layer_norm_eps; session 33). */
static Value *
build_cohere(Cfg *c, Value *x)
{
	const char *act = cfg_hf_act(c, "hidden_act", "silu");
	Value *in, *h;

	cfg_int(c, "intermediate_size");
	if (c->err || !(in = cfg_input(c, "layer_in", c->hidden)) || !(h = cohere2_norm(c, in, 0)))
		return NULL;
	return residual(c, x, dense_mlp(c, h, "intermediate_size", act, 0));
}

/* --- gpt2, bert ----------------------------------------------------------- */

/* GPT-2's Conv1D: x @ W + b with W held [in, out]. */
static Value *
conv1d(Cfg *c, Value *x, const char *w, const char *b, int64_t in, int64_t out,
       const char *why)
{
	WSpec ws = cfg_wspec(c, cfg_name(c, "%s", w), RECIPE_MATRIX, 2, (int64_t[]){in, out}, why);
	Value *op[3] = {x, NULL, NULL};

	ws.scale = 1 / sqrt((double)in);
	op[1] = cfg_weight(c, &ws);
	op[2] = cfg_vector(c, cfg_name(c, "%s", b), RECIPE_BIAS, out, why);
	if (!x || !op[1] || !op[2])
		return NULL;
	c->b.loc.name = cfg_name(c, "%s", w);
	Node *n = ir_b_node(&c->b, OP_MATMUL, op, 3, 1);
	return n ? cfg_named(c, n->out[0], arena_strndup(c->m->arena, w, strlen(w) - 7)) : NULL;
}

static Value *
build_gpt2(Cfg *c, Value *x)
{
	static const char *const pre[] = {"transformer.h.%d.", "h.%d.", NULL};
	double eps = eps_of(c, "layer_norm_epsilon", 1e-5);
	const char *act = cfg_hf_act(c, "activation_function", "gelu_new");
	int64_t inner = cfg_int_or(c, "n_inner", 4 * c->hidden);
	Value *h, *a;

	if (inner == 0)
		cfg_error(c, "n_inner", "must be positive");
	if (c->err)
		return NULL;
	set_prefix(c, pre, "ln_2.weight");
	h = cfg_named(c, cfg_layer_norm(c, x, "ln_2.weight", "ln_2.bias", eps), "h");
	a = conv1d(c, h, "mlp.c_fc.weight", "mlp.c_fc.bias", c->hidden, inner,
		   "n_embd x n_inner");
	a = cfg_named(c, cfg_act(c, a, act), "mlp.act");
	a = conv1d(c, a, "mlp.c_proj.weight", "mlp.c_proj.bias", inner, c->hidden,
		   "n_inner x n_embd");
	return residual(c, x, cfg_named(c, a, "mlp"));
}

static Value *
build_bert(Cfg *c, Value *x)
{
	static const char *const pre[] = {"bert.encoder.layer.%d.", "encoder.layer.%d.", NULL};
	double eps = eps_of(c, "layer_norm_eps", 1e-12);
	const char *act = cfg_hf_act(c, "hidden_act", "gelu");
	int64_t I = cfg_int(c, "intermediate_size");
	const char *lnw = "output.LayerNorm.weight", *lnb = "output.LayerNorm.bias";
	Value *a, *s;

	if (c->err)
		return NULL;
	set_prefix(c, pre, "intermediate.dense.weight");
	/* the hub checkpoint keeps TF's names, which transformers renames on load */
	if (c->st && !cfg_ckpt_has(c, cfg_name(c, "%s", lnw)) &&
	    cfg_ckpt_has(c, cfg_name(c, "output.LayerNorm.gamma")))
		lnw = "output.LayerNorm.gamma", lnb = "output.LayerNorm.beta";
	a = cfg_linear(c, x, "intermediate.dense.weight", "intermediate.dense.bias", I,
		       c->hidden, "intermediate_size x hidden_size");
	a = cfg_named(c, cfg_act(c, a, act), "intermediate.act");
	a = cfg_linear(c, a, "output.dense.weight", "output.dense.bias", c->hidden, I,
		       "hidden_size x intermediate_size");
	if (!a)
		return NULL;
	c->b.loc.name = NULL;
	s = cfg_named(c, ir_b2(&c->b, OP_ADD, cfg_named(c, a, "mlp"), x), "s");
	if (!s)
		return NULL;
	return cfg_named(c, cfg_layer_norm(c, s, lnw, lnb, eps), "y");
}

/* --- the table ------------------------------------------------------------ */

static int
always_moe(Cfg *c, int layer)
{
	return 1;
}

static const struct {
	const char *type;
	FamilyFn *build;
	MoeLayerFn *is_moe;	/* NULL: dense */
} families[] = {
	{"mixtral", build_mixtral, always_moe},
	{"qwen2_moe", build_qwen_moe, qwen_is_moe},
	{"qwen3_moe", build_qwen_moe, qwen_is_moe},
	{"olmoe", build_qwen_moe, always_moe},
	{"qwen3_next", build_qwen_moe, qwen_is_moe},
	{"qwen3_5_moe_text", build_qwen_moe, qwen_is_moe},
	{"minimax_m2", build_minimax_m2, always_moe},
	{"minimax_m3_vl_text", build_minimax_m3, minimax_m3_is_moe},
	{"granitemoe", build_granitemoe, always_moe},
	{"phimoe", build_phimoe, always_moe},
	{"nemotron_h", build_nemotron_h, nemotron_is_moe},
	{"step3p5", build_step3p5, step3p5_is_moe},
	{"granitemoeshared", build_granitemoe, always_moe},
	{"granitemoehybrid", build_granitemoe, always_moe},
	{"granitemoe_swa", build_granitemoe, always_moe},
	{"minimax", build_minimax, always_moe},
	{"minimax_text_01", build_minimax, always_moe},
	{"minimax_m1", build_minimax, always_moe},
	{"jetmoe", build_jetmoe, always_moe},
	{"lfm2_moe", build_lfm2_moe, lfm2_is_moe},
	{"flex_olmo", build_flex_olmo, always_moe},
	{"jamba", build_jamba, jamba_is_moe},
	{"ernie4_5_moe", build_ernie_moe, ernie_is_moe},
	{"hunyuan_v1_moe", build_hunyuan_moe, always_moe},
	{"llama4_text", build_llama4, llama4_is_moe},
	{"gemma4_text", build_gemma4, always_moe},
	{"diffusion_gemma_text", build_diffusion_gemma, always_moe},
	{"gemma4_unified_text", build_gemma4_unified, NULL},
	{"dbrx", build_dbrx, always_moe},
	{"arctic", build_arctic, arctic_is_moe},
	{"cohere2_moe", build_cohere2_moe, cohere2_is_moe},
	{"deepseek_v2", build_deepseek, deepseek_is_moe},
	{"deepseek_v3", build_deepseek, deepseek_is_moe},
	{"deepseek_v32", build_deepseek, deepseek_is_moe},
	{"kimi_k2", build_deepseek, deepseek_is_moe},
	{"glm4_moe", build_deepseek, deepseek_is_moe},
	{"glm4_moe_lite", build_deepseek, deepseek_is_moe},
	{"glm_moe_dsa", build_deepseek, deepseek_is_moe},
	{"dots1", build_deepseek, deepseek_is_moe},
	{"mimo_v2_flash", build_deepseek, deepseek_is_moe},
	{"bailing_moe", build_deepseek, deepseek_is_moe},
	{"glm4v_moe_text", build_deepseek, deepseek_is_moe},
	{"exaone_moe", build_deepseek, deepseek_is_moe},
	{"solar_open", build_deepseek, deepseek_is_moe},
	{"mistral4", build_deepseek, deepseek_is_moe},
	{"mistral_large4_text", build_deepseek, deepseek_is_moe},
	{"kimi_linear", build_deepseek, deepseek_is_moe},
	{"sarvam_moe", build_deepseek, deepseek_is_moe},
	{"sarvam_mla", build_deepseek, deepseek_is_moe},
	{"laguna", build_deepseek, deepseek_is_moe},
	{"axk1", build_deepseek, deepseek_is_moe},
	{"beam", build_beam, deepseek_is_moe},
	{"axk2", build_axk2, deepseek_is_moe},
	{"dots3_note_text", build_deepseek, deepseek_is_moe},
	{"unlimited_ocr_text", build_deepseek, deepseek_is_moe},
	{"deepseek_ocr2_text", build_deepseek, deepseek_is_moe},
	{"bailing_hybrid", build_deepseek, deepseek_is_moe},
	{"param2moe", build_deepseek, deepseek_is_moe},
	{"minicpm5_moe", build_deepseek, deepseek_is_moe},
	{"afmoe", build_bias_moe, bias_is_moe},
	{"hy_v3", build_bias_moe, bias_is_moe},
	{"mellum", build_qwen_moe, qwen_is_moe},
	{"qwen3_omni_moe_text", build_qwen_moe, qwen_is_moe},
	{"qwen3_vl_moe_text", build_qwen_moe, qwen_is_moe},
	{"flint", build_qwen_moe, qwen_is_moe},
	{"lara_mini", build_qwen_moe, qwen_is_moe},
	{"qwen3_5_text", build_qwen_moe, qwen_is_moe},
	{"qwen3_omni_moe_talker_text", build_qwen_moe, qwen_is_moe},
	{"aria_text", build_aria, always_moe},
	{"gpt_oss", build_gpt_oss, always_moe},
	{"llama", build_llama, NULL},
	{"mistral", build_llama, NULL},
	{"qwen2", build_llama, NULL},
	{"qwen3", build_llama, NULL},
	{"seed_oss", build_llama, NULL},
	{"qwen3_omni_moe_talker_code_predictor", build_llama, NULL},
	{"smollm3", build_llama, NULL},
	{"ministral3", build_llama, NULL},
	{"hunyuan_v1_dense", build_llama, NULL},
	{"cwm", build_llama, NULL},
	{"helium", build_llama, NULL},
	{"granite", build_granite, NULL},
	{"phi3", build_phi3, NULL},
	{"glm", build_phi3, NULL},
	{"glm4", build_phi3, NULL},
	{"gemma", build_gemma, NULL},
	{"lfm2", build_lfm2, NULL},
	{"lfm3", build_lfm2, NULL},
	{"youtu", build_llama, NULL},
	{"cohere", build_cohere, NULL},
	{"cohere2", build_cohere, NULL},
	{"ministral", build_llama, NULL},
	{"olmo2", build_olmo2, NULL},
	{"olmo3", build_olmo2, NULL},
	{"exaone4", build_olmo2, NULL},
	{"gemma2", build_gemma2, NULL},
	{"gemma3_text", build_gemma2, NULL},
	{"gpt2", build_gpt2, NULL},
	{"bert", build_bert, NULL},
};

/* Types transformers knows whose FFN moec does not build, and why (the
 * zoo hunt, docs/config.md): named, rather than "unknown", so that nobody
 * relabels one as the nearest family that would build something else. */
#define HC(m) m "'s decoder layers use hyper-connections: the FFN reads and writes several " \
	"residual streams mixed by weights computed from them, not one stream x + ffn(norm(x))"
#define MUSE "Muse Spark's MoE runs its experts in a latent width (pre_expert_proj, a " \
	"centred RMSNorm, post_expert_proj), normalises each expert's output before the weighted " \
	"sum (post_expert_norm), and mixes the residual through learned sigmoid gates"
#define INKLING "Inkling's FFN output passes a short causal convolution over the sequence " \
	"(mlp_sconv), so a token's output depends on the tokens before it, and its shared experts " \
	"are weighted by router logits normalised together with the routed ones"
#define INKLING2 "Inkling 2's FFN input is an attention over earlier blocks' outputs (block " \
	"attention residuals), a short causal convolution follows the FFN, and its experts use a " \
	"softcapped SwiGLU"
#define ERNIE_VL "ERNIE-4.5-VL routes each token to text or vision experts by its modality " \
	"(its text-only sibling ernie4_5_moe is built)"
/* session 33: the sub-configs of multimodal and speech models that the
 * class-default sweep meets: encoders, whose FFN blocks (even dots3-note's
 * MoE ones) are no decoder's; the wrapper's config.json builds its text model */
#define SUB(what, wrapper) what ", a sub-config of the " wrapper " model: an encoder, not a " \
	"decoder layer; moec builds decoder FFN blocks (a wrapper's text model, from the " \
	"wrapper's config.json)"
static const char *const refused[][2] = {
	{"longcat_flash", "LongCat-Flash's MoE has zero-computation (identity) experts "
	 "(zero_expert_num) and runs beside two dense MLPs per layer (the shortcut-connected MoE)"},
	{"doge", "Doge's FFN is a cross-domain MoE (product-key retrieval of single-vector "
	 "experts) with learned residual weights"},
	{"apertus", "Apertus' MLP is not gated and uses xIELU, an activation with learned "
	 "per-layer parameters"},
	{"ernie4_5_vl_moe", ERNIE_VL}, {"ernie4_5_vl_moe_text", ERNIE_VL},
	{"switch_transformers", "an encoder-decoder (T5) MoE; moec builds decoder FFN blocks"},
	{"nllb-moe", "an encoder-decoder MoE; moec builds decoder FFN blocks"},
	/* hyper-connections: the residual is hc_mult streams mixed in and out of
	 * the FFN by weights computed from the streams themselves, so the block
	 * is not y = x + ffn(norm(x)) on one [T, H] stream */
	{"deepseek_v4", HC("DeepSeek-V4")},
	{"glm5_next", HC("GLM-5-Next")},
	{"glm5_next_text", HC("GLM-5-Next")},
	{"hy_v4", HC("HY-V4")},
	{"hy_v4_vl", HC("HY-V4-VL")},
	{"hy_v4_vl_text", HC("HY-V4-VL")},
	{"qwen4_exp", HC("Qwen4-Exp")},
	{"qwen4_exp_text", HC("Qwen4-Exp")},
	/* session 31: the 2026 types whose FFN is not a block moec builds */
	{"kolibri1", "Kolibri-1's router selects the top-k of logits + expert bias and weighs each "
	 "choice by the sigmoid of its logit; moec's routers add the selection bias to the scores "
	 "(sigmoid(logit) + bias), which choose other experts when the bias is not zero"},
	{"kolibri1_1", "Kolibri-1.1's MoE is Kolibri-1's: its router selects the top-k of logits + "
	 "expert bias and weighs each choice by the sigmoid of its logit; moec's routers add the "
	 "selection bias to the scores (sigmoid(logit) + bias)"},
	{"ergo", "Ergo's experts normalise each routed output by a per-expert RMSNorm before the "
	 "weighted sum (post_expert_norm), its shared expert ends in an RMSNorm, and the residual "
	 "is mixed through learned sigmoid gates (feedforward_residual_gate)"},
	{"muse_spark", MUSE}, {"muse_spark_text", MUSE},
	{"inkling", INKLING}, {"inkling_text", INKLING}, {"inkling_mm_model", INKLING},
	{"inkling2", INKLING2}, {"inkling2_text", INKLING2},
	{"inkling2_loop", INKLING2}, {"inkling2_loop_text", INKLING2},
	{"openai_privacy_filter", "OpenAI's privacy filter is a bidirectional token classifier "
	 "whose experts compute in f32 from bf16 weights (no rounding to the model dtype between "
	 "the GEMMs); moec builds decoder FFN blocks in the model dtype"},
	{"zaya", "ZAYA1's router is an MLP over a state carried over from the previous layer's "
	 "router, with a 'skip' choice that computes nothing, and its residual sums have learned "
	 "per-channel scales and biases: the block reads more than the layer's residual stream"},
	{"deepseek_ocr2_encoder", SUB("DeepSeek-OCR-2's vision encoder", "deepseek_ocr2")},
	{"deepseek_ocr2_sam_vision_model", SUB("DeepSeek-OCR-2's SAM vision encoder", "deepseek_ocr2")},
	{"deepseek_ocr2_vision", SUB("DeepSeek-OCR-2's vision tower", "deepseek_ocr2")},
	{"dots3_note_audio_encoder", SUB("dots3-note's audio encoder", "dots3_note")},
	{"dots3_note_vision_encoder", SUB("dots3-note's vision encoder (MoE layers included)",
					  "dots3_note")},
	{"ernie4_5_vl_moe_vision", SUB("ERNIE-4.5-VL's vision encoder", "ernie4_5_vl_moe")},
	{"gemma4_audio", SUB("Gemma 4's audio encoder", "gemma4")},
	{"gemma4_vision", SUB("Gemma 4's vision encoder", "gemma4")},
	{"glm4v_moe_vision", SUB("GLM-4.5V's vision encoder", "glm4v_moe")},
	{"glm5_next_vision", SUB("GLM-5-Next's vision encoder", "glm5_next")},
	{"hy_v4_vl_vision", SUB("HY-V4-VL's vision encoder", "hy_v4_vl")},
	{"idefics3_vision", SUB("Idefics3's and SmolVLM's vision encoder", "idefics3")},
	{"inkling_audio", SUB("Inkling's audio encoder", "inkling")},
	{"inkling_vision", SUB("Inkling's vision encoder", "inkling")},
	{"inkling2_vision", SUB("Inkling 2's vision encoder", "inkling2")},
	{"llama4_vision_model", SUB("Llama 4's vision encoder", "llama4")},
	{"minimax_m3_vl_vision", SUB("MiniMax-M3-VL's vision encoder", "minimax_m3_vl")},
	{"muse_spark_audio", SUB("Muse Spark's audio encoder", "muse_spark")},
	{"muse_spark_vision", SUB("Muse Spark's vision encoder", "muse_spark")},
	{"nemotron3_5_transcribe_asr_audio", SUB("Nemotron-3.5-Transcribe's speech encoder",
						 "nemo_speechlm")},
	{"nemotron3_5_transcribe_audio", SUB("Nemotron-3.5-Transcribe's audio model (speech and "
					     "diarization encoders)", "nemo_speechlm")},
	{"nemotron3_5_transcribe_word_timestamp", SUB("Nemotron-3.5-Transcribe's word-timestamp "
						      "encoder and head", "nemo_speechlm")},
	{"pixtral", SUB("Pixtral's vision encoder", "mistral3 or lighton_ocr")},
	{"qwen3_5_moe_vision", SUB("Qwen3.5-MoE's vision encoder", "qwen3_5_moe")},
	{"qwen3_omni_moe_audio_encoder", SUB("Qwen3-Omni's audio encoder", "qwen3_omni_moe")},
	{"qwen3_omni_moe_vision_encoder", SUB("Qwen3-Omni's vision encoder", "qwen3_omni_moe")},
	{"qwen3_vl_moe_vision", SUB("Qwen3-VL-MoE's vision encoder", "qwen3_vl_moe")},
	{"qwen4_exp_vision", SUB("Qwen4-Exp's vision encoder", "qwen4_exp")},
	{"step3p5_vision", SUB("Step-3.7's vision encoder", "step3p7")},
	{"unlimited_ocr_sam_vision_model", SUB("Unlimited-OCR's SAM vision encoder",
					       "unlimited_ocr")},
	{"unlimited_ocr_vision", SUB("Unlimited-OCR's vision tower", "unlimited_ocr")},
	{"unlimited_ocr_vision_encoder", SUB("Unlimited-OCR's vision encoder", "unlimited_ocr")},
	{"vitpose_backbone", SUB("ViTPose's ViT backbone (ViTPose+'s MoE FFN included)", "vitpose")},
	{"vitpose", "ViTPose is a pose-estimation model, a ViT encoder and a keypoint head: no "
	 "decoder layer; moec builds decoder FFN blocks"},
	{"nemotron3_diarization", "Nemotron-3-Diarization is a speaker-diarization model, an audio "
	 "encoder and a classification head: no decoder layer; moec builds decoder FFN blocks"},
};
#undef HC
#undef SUB
#undef ERNIE_VL
#undef MUSE
#undef INKLING
#undef INKLING2

const char *
cfg_family_refusal(const char *type)
{
	for (size_t i = 0; i < NELEM(refused); i++)
		if (strcmp(refused[i][0], type) == 0)
			return refused[i][1];
	return NULL;
}

static int
find(const char *type)
{
	for (size_t i = 0; i < NELEM(families); i++)
		if (strcmp(families[i].type, type) == 0)
			return (int)i;
	return -1;
}

/*
 * Checkpoints in a model's own format, which transformers renames on load
 * (its conversion_mapping.py) and writes back on save_pretrained: renamed
 * here the same way, so that a builder reads one set of names.  Mistral
 * Large 4 (native Mistral names at the root: layers.N.ffn_norm,
 * layers.N.experts.E.w1, layers.N.gate, layers.N.feed_forward.w1, ...).
 */
static const StRule mistral_native[] = {
	{".ffn_norm.", ".post_attention_layernorm."}, {".feed_forward.", ".mlp."},
	{".gate.", ".mlp.gate."}, {".experts.", ".mlp.experts."},
	{".shared_experts.", ".mlp.shared_experts."},
	{".w1.", ".gate_proj."}, {".w2.", ".down_proj."}, {".w3.", ".up_proj."}, {NULL, NULL},
};

/* Aria's stacked experts (transformers' aria_text mapping). */
static const StRule aria_hub[] = {
	{".mlp.experts.fc1.weight", ".mlp.experts.gate_up_proj"},
	{".mlp.experts.fc2.weight", ".mlp.experts.down_proj"}, {NULL, NULL},
};

/* Laguna's selection bias and shared expert (transformers' laguna mapping). */
static const StRule laguna_hub[] = {
	{".mlp.experts.e_score_correction_bias", ".mlp.gate.e_score_correction_bias"},
	{".mlp.shared_expert.", ".mlp.shared_experts."}, {NULL, NULL},
};

/* A.X-K1's output norm, at the layer on the hub: read there (cfg_family.c's
 * axk1 row), so the in-memory name is renamed back. */
static const StRule axk1_hub[] = {
	{".mlp.post_mlp_layernorm.", ".post_mlp_layernorm."}, {NULL, NULL},
};

/* A.X-K2's gated norms' low-rank MLP (transformers' axk2 mapping). */
static const StRule axk2_hub[] = {
	{"W_down", "mlp.fc1"}, {"W_up", "mlp.fc2"}, {NULL, NULL},
};

/* Sarvam-30B's, Ling-hybrid's and Param2's selection bias (transformers'
 * sarvam_moe, bailing_hybrid and param2moe mappings). */
static const StRule sarvam_hub[] = {
	{".mlp.gate.expert_bias", ".mlp.gate.e_score_correction_bias"}, {NULL, NULL},
};

static const struct {
	const char *type, *root;
	const StRule *rule;
} hub_names[] = {
	{"mistral_large4_text", "layers.", mistral_native},
	{"aria_text", "", aria_hub},
	{"sarvam_moe", "", sarvam_hub},
	{"bailing_hybrid", "", sarvam_hub},
	{"param2moe", "", sarvam_hub},
	{"laguna", "", laguna_hub},
	{"axk1", "", axk1_hub},
	{"axk2", "", axk2_hub},
};

const StRule *
cfg_family_hub_names(const char *type, const char **root)
{
	for (size_t i = 0; i < NELEM(hub_names); i++)
		if (strcmp(hub_names[i].type, type) == 0)
			return *root = hub_names[i].root, hub_names[i].rule;
	return NULL;
}

FamilyFn *
cfg_family(const char *type)
{
	int i = find(type);

	return i < 0 ? NULL : families[i].build;
}

const char *
cfg_family_list(void)
{
	static char buf[2048];	/* the families (about 1100 bytes now) */

	if (!buf[0])
		for (size_t i = 0; i < NELEM(families); i++)
			snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s",
				 i ? ", " : "", families[i].type);
	return buf;
}

/* Nemotron-H's configs saved by transformers 5 have no num_hidden_layers:
 * the layer types say how many there are.  -1: no such list. */
int64_t
cfg_family_num_layers(Cfg *c)
{
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(c->json, "layers_block_type");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(c->json, "hybrid_override_pattern");

	if (strcmp(c->type, "nemotron_h"))
		return -1;
	return cJSON_IsArray(l) ? cJSON_GetArraySize(l) : cJSON_IsString(p) ? (int64_t)strlen(p->valuestring) : -1;
}

int
cfg_family_default_layer(Cfg *c, int64_t nlayer)
{
	int i = find(c->type);

	for (int l = 0; i >= 0 && families[i].is_moe && l < nlayer && !c->err; l++)
		if (families[i].is_moe(c, l))
			return l;
	return 0;
}

/* name without '_' and lower case, for comparing with architecture classes */
static void
squash(char *out, size_t n, const char *s, size_t len)
{
	size_t k = 0;

	for (size_t i = 0; i < len && s[i] && k + 1 < n; i++)
		if (s[i] != '_' && s[i] != '-')
			out[k++] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
	out[k] = 0;
}

/* The family an architectures class names ("DeepseekV3ForCausalLM"): the
 * longest family whose squashed name starts the class's. */
static const char *
arch_family(const char *arch)
{
	char a[128], f[64];
	const char *best = NULL;
	size_t bestlen = 0;

	squash(a, sizeof a, arch, strlen(arch));
	for (size_t i = 0; i < NELEM(families); i++) {
		squash(f, sizeof f, families[i].type, strlen(families[i].type));
		if (strlen(f) > bestlen && strncmp(a, f, strlen(f)) == 0)
			best = families[i].type, bestlen = strlen(f);
	}
	return best;
}

/* The MoE family the keys point to (of the text model, for a wrapper
 * moec does not know), or NULL. */
static const char *
keys_family(Cfg *c)
{
	cJSON *t = cJSON_GetObjectItemCaseSensitive(c->json, "text_config");
	Cfg k = *c;
	const char *f = NULL;

	if (cJSON_IsObject(t))
		k.json = t;
	if (cfg_has(&k, "n_routed_experts"))
		f = cfg_has(&k, "n_group") ? "deepseek_v3" : "deepseek_v2";
	else if (cfg_has(&k, "shared_expert_intermediate_size"))
		f = "qwen2_moe";
	else if (cfg_has(&k, "num_experts") && cfg_has(&k, "moe_intermediate_size"))
		f = "qwen3_moe";
	else if (cfg_has(&k, "num_local_experts"))
		f = "mixtral";
	return f;
}

/* The architectures class names a family; a dense one (Qwen3VLMoe... starts
 * like qwen3) gives way to the MoE family the keys point to. */
const char *
cfg_family_hint(Cfg *c, const char **why)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(c->json, "architectures"), *e;
	const char *f, *k = keys_family(c);

	for (e = cJSON_IsArray(a) ? a->child : NULL; e; e = e->next)
		if (cJSON_IsString(e) && (f = arch_family(e->valuestring)) &&
		    (families[find(f)].is_moe || !k))
			return *why = arena_printf(c->m->arena, "architectures: %s", e->valuestring), f;
	*why = "keys";
	return k;
}
