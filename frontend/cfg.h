/*
 * cfg.h — internals of the Hugging Face config frontend, shared by
 * config.c (reading config.json, the layer's frame), cfg_weights.c (weights
 * from safetensors or synthetic), cfg_ffn.c (norms, MLPs, router, moe) and
 * cfg_family.c (one builder per model_type).  Not part of frontend.h: only
 * the config frontend uses it.
 */
#ifndef MOEC_CFG_H
#define MOEC_CFG_H

#include <cjson/cJSON.h>

#include "frontend.h"

/* quantization_config as read (cfg_quant.c); kind Q_NONE: none.  Q_FP8_CH:
 * fp8 with a scale per output channel (or tensor): compressed-tensors'
 * float-quantized and fbgemm_fp8. */
enum { Q_NONE, Q_FP8, Q_FP8_CH, Q_MXFP4, Q_CT_INT4, Q_GPTQ, Q_AWQ, NQKIND };
/* activations quantised per token (groups of bk, a row), or by each linear's
 * fixed input_scale (fp8's static scheme) */
enum { ACT_NONE, ACT_GROUP, ACT_ROW, ACT_STATIC };
typedef struct {
	int kind;
	const char *method;	/* quant_method, for messages */
	int64_t bn, bk;		/* block rows (fp8's 2-D blocks) and columns; bk -1: the row */
	int act;		/* ACT_*: how each quantised linear's input is quantised */
	int act_down;		/* the moe's down input too (act_quant): fp8, fbgemm_fp8, c-t block */
	int sym;		/* compressed-tensors int4 without zero points */
	int v1;			/* gptq checkpoint_format gptq: qzeros hold z - 1 */
	int desc_act;		/* gptq desc_act, compressed-tensors actorder group: a g_idx,
				 * the IR's scales per column */
	int per_tensor;		/* fp8 with one scale per tensor (compressed-tensors tensor, AutoFP8) */
	const char *scale_sfx;	/* fp8 blocks' scale: <weight>_scale_inv (fp8) or _scale (c-t) */
	double ub;		/* fbgemm_fp8's activation_scale_ub: activation amax clamped to it (0: none) */
	const cJSON *skip;	/* modules_to_not_convert, or compressed-tensors' ignore */
	int skip_re;		/* "re:" entries of skip are regexes */
} QCfg;

/* A compressed-tensors config group: the modules it targets and its scheme;
 * err: why the scheme is not read (reported when a weight picks the group). */
typedef struct {
	const char *name;
	const cJSON *targets;
	QCfg s;
	const char *err;
} QGroup;
#define CFG_MAX_QGROUPS 16

/* Everything one import needs; lives on cfg_import's stack. */
typedef struct Cfg Cfg;
struct Cfg {
	const char *path;	/* config.json, for diagnostics (interned in m) */
	const char *type;	/* model_type */
	cJSON *json;		/* the config object (of the text model) */
	cJSON *outer;		/* a multimodal wrapper holding json as text_config */
	const char *nest;	/* where: "text_config", "thinker_config.text_config" */
	const FeOpts *o;
	Diag *d;
	Module *m;
	Graph *g;
	Builder b;
	StFile *st;		/* NULL with synthetic weights */
	const char *stpath;	/* the safetensors file or index, for diagnostics */
	DType dt;		/* the model's dtype (dtype / torch_dtype) */
	int layer;		/* the decoder layer built */
	int64_t hidden;		/* hidden_size */
	char pre[96];		/* checkpoint prefix of the layer: "model.layers.1." */
	int err;		/* set once any diagnostic was an error */
	QCfg q;			/* the scheme of the weight being read */
	QGroup qg[CFG_MAX_QGROUPS];	/* compressed-tensors' config groups */
	int nqg, qsel;		/* how many; the one picked first (its activations) */
	int qquiet;		/* parsing one of several groups: an error is kept in qmsg */
	const char *qmsg;
};

/* More decoder layers, and experts per layer, than any model has
 * (docs/limits.md). */
#define CFG_MAX_LAYERS 65536
#define CFG_MAX_EXPERTS 65536

/* config.c: keys of config.json.  Accessors of required keys report a
 * missing or malformed key, set c->err and return a harmless default (1),
 * so one run reports every bad key before giving up. */
int cfg_has(Cfg *c, const char *key);	/* present and not null */
const char *cfg_alias(Cfg *c, const char *const *keys);	/* first present, or keys[0] */
int64_t cfg_int(Cfg *c, const char *key);	/* required, > 0 */
int64_t cfg_int_or(Cfg *c, const char *key, int64_t def);	/* >= 0 */
double cfg_num_or(Cfg *c, const char *key, double def);
int cfg_bool_or(Cfg *c, const char *key, int def);
const char *cfg_str_or(Cfg *c, const char *key, const char *def);
int cfg_in_list(Cfg *c, const char *key, int64_t v);	/* v in the int array key */
int cfg_is_list(Cfg *c, const char *key);
/* Entry i of a per-layer list: of strings yes / no (1 / 0), of integers >= 0. */
int cfg_list_str(Cfg *c, const char *key, int64_t i, const char *yes, const char *no);
int64_t cfg_list_int(Cfg *c, const char *key, int64_t i);
int cfg_error(Cfg *c, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void cfg_note(Cfg *c, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Another input of the block after x, [T, width] in the model dtype: a
 * block that reads more than the FFN's input (arctic's layer_in, hidden
 * wide; gemma4's per_layer_input). */
Value *cfg_input(Cfg *c, const char *name, int64_t width);
/* The checkpoint name of a tensor of this layer: pre + suffix (arena). */
const char *cfg_name(Cfg *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* cfg_weights.c */

/*
 * A part of an IR weight held by one checkpoint tensor: it fills numel
 * elements from element `off` on.  With `trans` the checkpoint holds the
 * last two dims swapped (gpt-oss's [E,H,2I] for our [E,2I,H]), and the part
 * is the whole weight.
 */
typedef struct {
	const char *name;	/* checkpoint tensor name */
	int64_t off;
	int rank;
	int64_t dim[3];		/* shape in the checkpoint */
	int trans;
	/* nblk > 1: the tensor is nblk row blocks, block j filling from
	 * element off + j*bstride (dbrx's fused [E*I, H] experts: one block per
	 * expert; with trans each block's two dims are swapped; rank 3: the
	 * blocks are dim 0's, step3p5's stacked [E, I, H] gate and up) */
	int64_t nblk, bstride;
} Piece;

/* How one IR weight is made: type, synthetic recipe, and its pieces. */
typedef struct {
	const char *name;	/* IR name */
	Type t;
	double mean, scale;	/* synthetic: mean + scale*u; scale < 0: 1/sqrt(fan_in) */
	int f32ok;		/* F32_OK: the checkpoint may hold it in f32;
				 * F32_KEEP: also synthetic in f32 (HF keeps it so;
				 * a router's logits then f32, cfg_router) */
	const char *why;	/* the config keys behind the shape, for errors */
	VEC(Piece) piece;	/* none: one piece, the IR name itself */
	int quant;		/* QW_*: a weight quantization_config may quantise */
} WSpec;

enum { QW_NO, QW_LINEAR, QW_EXPERTS };

enum { RECIPE_MATRIX, RECIPE_NORM, RECIPE_BIAS };
enum { F32_NO, F32_OK, F32_KEEP };
WSpec cfg_wspec(Cfg *c, const char *name, int recipe, int rank, const int64_t *dim,
		const char *why);
void cfg_add_piece(WSpec *w, const char *name, int64_t off, int rank,
		   const int64_t *dim, int trans);
/* A checkpoint tensor of nblk blocks along dim 0 scattered bstride apart
 * (rank 2: row blocks; rank 3: one [a, b] block per index of dim 0). */
void cfg_add_blocks(WSpec *w, const char *name, int64_t off, int rank, const int64_t *dim,
		    int64_t nblk, int64_t bstride, int trans);
/* Whether the checkpoint holds this tensor (synthetic: never); a ".weight"
 * also when held quantised (".weight_packed", ".qweight"). */
int cfg_ckpt_has(Cfg *c, const char *name);
void cfg_shape_str(char *buf, size_t n, int rank, const int64_t *dim);
Loc cfg_tensor_loc(Cfg *c, const StTensor *t, const char *name);
/* The weight as an IR value: synthetic, or read and checked.  Frees
 * w->piece.  NULL with a diagnostic. */
Value *cfg_weight(Cfg *c, WSpec *w);
/* A [rows, cols] weight held as one checkpoint tensor of the same name. */
Value *cfg_weight2(Cfg *c, const char *name, int64_t rows, int64_t cols,
		   const char *why);
/* A [n] norm weight, norm bias or bias. */
Value *cfg_vector(Cfg *c, const char *name, int recipe, int64_t n, const char *why);

/* cfg_quant.c: quantised checkpoints (docs/config.md) */
int cfg_quant_config(Cfg *c);	/* read quantization_config into c->q; -1: refused */
int cfg_quant_wanted(Cfg *c, const WSpec *w);
/* The quantised weight, its scale (and zero point) and their dequantize. */
Value *cfg_quant_weight(Cfg *c, WSpec *w);
/* x quantised as the scheme quantises a quantised weight w's input; else x. */
Value *cfg_quant_act(Cfg *c, Value *x, const Value *w);
/* The moe's act_quant attribute (its down input quantised per token and
 * block) for the next node when wdown is quantised with fp8's dynamic
 * groups; 0, or -1 with a diagnostic. */
int cfg_quant_moe_act(Cfg *c, const Value *wdown);

/* cfg_ffn.c: the pieces of a block */

/* The routing and expert semantics of one moe node. */
typedef struct {
	int64_t E, k, I;	/* experts, top-k, expert intermediate size */
	const char *router;	/* softmax | sigmoid | topk_softmax | sparsemixer */
	double jitter_eps;	/* sparsemixer's threshold is 2 jitter_eps */
	int renorm;
	double scale;		/* routed_scaling_factor */
	int64_t ngroup, topkgroup;	/* group-limited selection; 1, 1: none */
	const char *gscore;	/* max | top2 */
	const char *act;	/* silu | gelu | gelu_tanh | relu | oai */
	const char *layout;	/* gu_layout: concat | interleave */
	double alpha;		/* act=oai */
	double limit;		/* act=oai's; act=silu: Step-3.5's clamp, 0 none */
	const char *ekey, *ikey;	/* the config keys of E and I, for errors */
	int f32_router;		/* the model computes the logits in f32 from a
				 * lower-precision weight: no rounding to its dtype */
	int fill0;		/* dropped groups' experts select with 0, not -inf
				 * (group_fill=0: A.X-K2's masked_fill) */
	const char *slots;	/* how the reference rounds the slots (moe slots=,
				 * NULL: f32): "x", each weighted expert output to
				 * the model dtype before the sum; "out", each
				 * expert output, then weighted in f32 */
} MoeSpec;

Value *cfg_rms_norm(Cfg *c, Value *x, const char *w, double eps);
/* RMSNorm scaled by 1 + w (a zero-centred weight), 1 + w in f32. */
Value *cfg_rms_norm_1p(Cfg *c, Value *x, const char *w, double eps);
/* LayerNorm with weight w and bias (NULL: none). */
Value *cfg_layer_norm(Cfg *c, Value *x, const char *w, const char *bias, double eps);
/* x @ W^T (+ b) for a [out, in] weight named w; bias NULL: none. */
Value *cfg_linear(Cfg *c, Value *x, const char *w, const char *bias, int64_t out,
		  int64_t in, const char *why);
/* The same with the weight (and bias, or NULL) made already; name the
 * weight's, for the node's location and the value's name. */
Value *cfg_linear_of(Cfg *c, Value *x, Value *w, Value *bias, const char *name);
Value *cfg_act(Cfg *c, Value *x, const char *act);	/* silu gelu gelu_tanh relu */
/* hidden_act / activation_function as one of cfg_act's names; NULL if unknown. */
const char *cfg_hf_act(Cfg *c, const char *key, const char *def);
/* down(act(gate(x)) * up(x)); mod is "mlp" or "mlp.shared_experts". */
Value *cfg_glu_mlp(Cfg *c, Value *x, const char *mod, int64_t inter, const char *act,
		   int bias, const char *why);
/* The same with the projections named proj[0..2] (gate, up, down) under mod
 * (Arctic's {"w1", "w3", "w2"}), and limit > 0 Step-3.5's clamp: act(gate)
 * clipped to at most limit, up to [-limit, limit] (the swiglu act's limit). */
Value *cfg_glu_mlp_as(Cfg *c, Value *x, const char *mod, const char *const proj[3],
		      int64_t inter, const char *act, int bias, const char *why, double limit);
/* Router logits in f32: [T, E]; f32ok as in WSpec. */
Value *cfg_router(Cfg *c, Value *x, const char *w, const char *bias, const MoeSpec *s,
		  int f32ok);
Value *cfg_moe(Cfg *c, Value *x, Value *logits, Value *selbias, Value *const wt[4],
	       const MoeSpec *s);
/* The stacked expert weights [E,2I,H], [E,H,I] from per-expert checkpoint
 * tensors (gate, up, down: formats with the expert number, e.g.
 * "mlp.experts.%d.gate_proj.weight"; NULL: stacked only) or from stacked
 * "<mod>.experts.gate_up_proj" / "down_proj" (strans: held [E,H,2I] and
 * [E,I,H], as gpt-oss does; STRANS_CHECK: so unless already [E,2I,H] /
 * [E,H,I], as transformers 5 reads Qwen3-VL-MoE). */
enum { STRANS_CHECK = 2 };
Value *cfg_experts_gu(Cfg *c, const char *mod, const char *gate, const char *up,
		      const MoeSpec *s, int strans);
Value *cfg_experts_down(Cfg *c, const char *mod, const char *down, const MoeSpec *s,
			int strans);
Value *cfg_named(Cfg *c, Value *v, const char *name);

/* cfg_family.c */
typedef Value *FamilyFn(Cfg *c, Value *x);
FamilyFn *cfg_family(const char *model_type);
const char *cfg_family_list(void);
/* For an unknown model_type: the nearest family the architectures class or
 * the keys point to (why: which), or NULL. */
const char *cfg_family_hint(Cfg *c, const char **why);
/* Why moec does not build a model_type transformers knows, or NULL. */
const char *cfg_family_refusal(const char *model_type);
/* The family's hub names, renamed on load (st_rename) in tensors under
 * *root; NULL: none. */
const StRule *cfg_family_hub_names(const char *model_type, const char **root);
/* The layer built when none is asked for: the first MoE layer, else 0. */
int cfg_family_default_layer(Cfg *c, int64_t nlayer);
/* The layer count a family reads from elsewhere than num_hidden_layers
 * (Nemotron-H's layer types), when that key is absent; -1: none. */
int64_t cfg_family_num_layers(Cfg *c);

#endif
