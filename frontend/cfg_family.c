/*
 * cfg_family.c — one builder per model_type: which keys it reads (with
 * transformers' defaults where a key may be absent), which layers are MoE,
 * its routing semantics and its checkpoint names.  Each builder returns y
 * for the frame in config.c; docs/config.md describes every family.
 *
 *	pre-norm decoders:  y = x + ffn(norm(x))
 *	bert (post-norm):   y = layer_norm(x + ffn(x))
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cfg.h"

typedef int MoeLayerFn(Cfg *c, int layer);

static const char *const decoder_prefixes[] = {
	"model.layers.%d.", "layers.%d.", "model.language_model.layers.%d.", NULL,
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

/* The post-attention RMSNorm of a pre-norm decoder; sets the prefix. */
static Value *
decoder_norm(Cfg *c, Value *x, double eps)
{
	set_prefix(c, decoder_prefixes, "post_attention_layernorm.weight");
	return cfg_named(c, cfg_rms_norm(c, x, "post_attention_layernorm.weight", eps), "h");
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

/* --- MoE decoders --------------------------------------------------------- */

static const char *const expert_keys[] = {
	"num_experts", "num_local_experts", "n_routed_experts", NULL,
};

/* E, k and I with the checks every router needs. */
static void
read_moe(Cfg *c, MoeSpec *s, const char *ikey)
{
	memset(s, 0, sizeof *s);
	s->ekey = cfg_alias(c, expert_keys);
	s->E = cfg_int(c, s->ekey);
	s->k = cfg_int(c, "num_experts_per_tok");
	s->ikey = ikey;
	s->I = cfg_int(c, ikey);
	s->router = "softmax";
	s->scale = 1;
	s->ngroup = s->topkgroup = 1;
	s->gscore = "max";
	s->act = "silu";
	s->layout = "concat";
	if (s->E > CFG_MAX_EXPERTS) {	/* a checkpoint tensor per expert is looked for */
		cfg_error(c, s->ekey, "%lld experts: moec reads models of at most %d",
			  (long long)s->E, CFG_MAX_EXPERTS);
		s->E = s->k = 1;
	} else if (s->k > s->E) {
		cfg_error(c, "num_experts_per_tok", "%lld is more than the %lld experts (%s)",
			  (long long)s->k, (long long)s->E, s->ekey);
	}
	if (strcmp(cfg_hf_act(c, "hidden_act", "silu"), "silu") != 0)
		cfg_error(c, "hidden_act", "the experts of %s must use silu", c->type);
}

/* Router, stacked experts and the moe node for per-expert checkpoints. */
static Value *
routed(Cfg *c, Value *h, const char *mod, const char *g, const char *u, const char *d,
       const MoeSpec *s)
{
	char gate[96], gf[96], uf[96], df[96];
	Value *wt[4] = {NULL, NULL, NULL, NULL}, *l;

	snprintf(gate, sizeof gate, "%s.gate.weight", mod);
	snprintf(gf, sizeof gf, "%s.experts.%%d.%s.weight", mod, g);
	snprintf(uf, sizeof uf, "%s.experts.%%d.%s.weight", mod, u);
	snprintf(df, sizeof df, "%s.experts.%%d.%s.weight", mod, d);
	l = cfg_named(c, cfg_router(c, h, gate, NULL, s, F32_OK), "router_logits");
	wt[0] = cfg_experts_gu(c, mod, gf, uf, s, 0);
	wt[1] = cfg_experts_down(c, mod, df, s, 0);
	c->b.loc.name = cfg_name(c, "%s", mod);
	return cfg_named(c, cfg_moe(c, h, l, NULL, wt, s), "moe");
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

/* Qwen2-MoE, Qwen3-MoE: MoE unless in mlp_only_layers or off decoder_sparse_step. */
static int
qwen_is_moe(Cfg *c, int layer)
{
	int64_t step = cfg_int_or(c, "decoder_sparse_step", 1);

	if (step < 1)
		return cfg_error(c, "decoder_sparse_step", "must be positive"), 0;
	return cfg_int_or(c, cfg_alias(c, expert_keys), 0) > 0 &&
	       !cfg_in_list(c, "mlp_only_layers", layer) && (layer + 1) % step == 0;
}

/* qwen2_moe's shared expert: sigmoid(x . w_sg^T) * mlp(x). */
static Value *
qwen_shared(Cfg *c, Value *h)
{
	int64_t I = cfg_int(c, "shared_expert_intermediate_size");
	Value *sh, *g;

	if (c->err)
		return NULL;
	sh = cfg_glu_mlp(c, h, "mlp.shared_expert", I, "silu", 0,
			 "shared_expert_intermediate_size");
	g = cfg_linear(c, h, "mlp.shared_expert_gate.weight", NULL, 1, c->hidden,
		       "1 x hidden_size");
	if (!sh || !g)
		return NULL;
	g = cfg_named(c, ir_b1(&c->b, OP_SIGMOID, g), "mlp.shared_expert_gate.sigmoid");
	return cfg_named(c, g ? ir_b2(&c->b, OP_MUL, g, sh) : NULL, "shared");
}

/* qwen2_moe, qwen3_moe, olmoe: softmax, top-k, norm_topk_prob as configured. */
static Value *
build_qwen_moe(Cfg *c, Value *x)
{
	int shared = strcmp(c->type, "qwen2_moe") == 0;
	int moe = strcmp(c->type, "olmoe") == 0 || qwen_is_moe(c, c->layer);
	double eps = eps_of(c, "rms_norm_eps", strcmp(c->type, "olmoe") ? 1e-6 : 1e-5);
	MoeSpec s;
	Value *h, *f, *sh;

	if (!moe) {
		if (c->err || !(h = decoder_norm(c, x, eps)))
			return NULL;
		return residual(c, x, dense_mlp(c, h, "intermediate_size",
						cfg_hf_act(c, "hidden_act", "silu"), 0));
	}
	/* OLMoE's experts are intermediate_size wide; Qwen's moe_intermediate_size */
	read_moe(c, &s, strcmp(c->type, "olmoe") ? "moe_intermediate_size" : "intermediate_size");
	s.renorm = cfg_bool_or(c, "norm_topk_prob", 0);
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	f = routed(c, h, "mlp", "gate_proj", "up_proj", "down_proj", &s);
	if (f && shared) {
		sh = qwen_shared(c, h);
		c->b.loc.name = NULL;
		f = cfg_named(c, sh ? ir_b2(&c->b, OP_ADD, f, sh) : NULL, "ffn");
	}
	return residual(c, x, f);
}

/* --- DeepSeek-V2 / V3 ----------------------------------------------------- */

static int
v3(Cfg *c)
{
	return strcmp(c->type, "deepseek_v3") == 0;
}

static int
deepseek_is_moe(Cfg *c, int layer)
{
	int64_t first = cfg_int_or(c, "first_k_dense_replace", v3(c) ? 3 : 0);
	int64_t freq = cfg_int_or(c, "moe_layer_freq", 1);

	if (freq < 1)
		return cfg_error(c, "moe_layer_freq", "must be positive"), 0;
	return cfg_has(c, cfg_alias(c, expert_keys)) && layer >= first && layer % freq == 0;
}

/* scoring_func, topk_method and the groups into s. */
static void
deepseek_routing(Cfg *c, MoeSpec *s, int *selbias)
{
	const char *score = cfg_str_or(c, "scoring_func", v3(c) ? "sigmoid" : "softmax");
	const char *method = cfg_str_or(c, "topk_method", v3(c) ? "noaux_tc" : "greedy");

	if (strcmp(score, "softmax") && strcmp(score, "sigmoid"))
		cfg_error(c, "scoring_func", "'%s' is not softmax or sigmoid", score);
	s->router = strcmp(score, "sigmoid") ? "softmax" : "sigmoid";
	s->renorm = cfg_bool_or(c, "norm_topk_prob", v3(c));
	s->scale = cfg_num_or(c, "routed_scaling_factor", v3(c) ? 2.5 : 1.0);
	*selbias = strcmp(method, "noaux_tc") == 0;
	if (strcmp(method, "greedy") == 0)
		return;
	if (strcmp(method, "group_limited_greedy") && !*selbias) {
		cfg_error(c, "topk_method", "'%s' is not greedy, group_limited_greedy or noaux_tc",
			  method);
		return;
	}
	s->gscore = *selbias ? "top2" : "max";
	s->ngroup = cfg_int_or(c, "n_group", v3(c) ? 8 : 1);
	s->topkgroup = cfg_int_or(c, "topk_group", v3(c) ? 4 : s->ngroup);
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

/* The routed experts of DeepSeek, plus the shared experts as one MLP. */
static Value *
deepseek_moe(Cfg *c, Value *h, const MoeSpec *s, int selbias, int64_t nshared, int bias)
{
	Value *wt[4] = {NULL, NULL, NULL, NULL}, *l, *sb = NULL, *f, *sh;
	WSpec w;

	l = cfg_named(c, cfg_router(c, h, "mlp.gate.weight", NULL, s, F32_KEEP),
		      "router_logits");
	if (selbias) {
		w = cfg_wspec(c, cfg_name(c, "mlp.gate.e_score_correction_bias"), RECIPE_BIAS, 1,
			      &s->E, s->ekey);
		w.f32ok = F32_KEEP;
		if ((sb = cfg_weight(c, &w)) && sb->type.dt != DT_F32) {
			ir_b_str(&c->b, "to", "f32");
			sb = cfg_named(c, ir_b1(&c->b, OP_CAST, sb),
				       "mlp.gate.e_score_correction_bias.f32");
		}
	}
	wt[0] = cfg_experts_gu(c, "mlp", "mlp.experts.%d.gate_proj.weight",
			       "mlp.experts.%d.up_proj.weight", s, 0);
	wt[1] = cfg_experts_down(c, "mlp", "mlp.experts.%d.down_proj.weight", s, 0);
	if (selbias && !sb)
		return NULL;
	c->b.loc.name = cfg_name(c, "mlp");
	f = cfg_named(c, cfg_moe(c, h, l, sb, wt, s), "moe");
	if (!f || nshared == 0)
		return f;
	sh = cfg_named(c, cfg_glu_mlp(c, h, "mlp.shared_experts", nshared * s->I, "silu", bias,
				      "n_shared_experts*moe_intermediate_size"), "shared");
	c->b.loc.name = NULL;
	return cfg_named(c, sh ? ir_b2(&c->b, OP_ADD, f, sh) : NULL, "ffn");
}

static Value *
build_deepseek(Cfg *c, Value *x)
{
	double eps = eps_of(c, "rms_norm_eps", 1e-6);
	int bias = cfg_bool_or(c, "mlp_bias", 0), selbias = 0;
	int64_t nshared;
	MoeSpec s;
	Value *h;

	if (!deepseek_is_moe(c, c->layer)) {
		if (c->err || !(h = decoder_norm(c, x, eps)))
			return NULL;
		return residual(c, x, dense_mlp(c, h, "intermediate_size",
						cfg_hf_act(c, "hidden_act", "silu"), bias));
	}
	read_moe(c, &s, "moe_intermediate_size");
	deepseek_routing(c, &s, &selbias);
	check_groups(c, &s);
	nshared = cfg_int_or(c, "n_shared_experts", v3(c) ? 1 : 2);
	if (c->err || !(h = decoder_norm(c, x, eps)))
		return NULL;
	return residual(c, x, deepseek_moe(c, h, &s, selbias, nshared, bias));
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
	{"deepseek_v2", build_deepseek, deepseek_is_moe},
	{"deepseek_v3", build_deepseek, deepseek_is_moe},
	{"gpt_oss", build_gpt_oss, always_moe},
	{"llama", build_llama, NULL},
	{"mistral", build_llama, NULL},
	{"qwen2", build_llama, NULL},
	{"qwen3", build_llama, NULL},
	{"gpt2", build_gpt2, NULL},
	{"bert", build_bert, NULL},
};

static int
find(const char *type)
{
	for (size_t i = 0; i < NELEM(families); i++)
		if (strcmp(families[i].type, type) == 0)
			return (int)i;
	return -1;
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
	static char buf[256];

	if (!buf[0])
		for (size_t i = 0; i < NELEM(families); i++)
			snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s",
				 i ? ", " : "", families[i].type);
	return buf;
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
