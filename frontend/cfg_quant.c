/*
 * cfg_quant.c — quantised checkpoints (quantization_config) as the IR's
 * one quantised-weight form (docs/config.md, "Quantised checkpoints"):
 *
 *	before (checkpoint)                      after (IR)
 *	gate_proj.weight        f8e4m3[N,K]      $w   f8e4m3[N,K]     (the values, K last)
 *	gate_proj.weight_scale_inv f32[N/128,K/128]  $w.scale f32[N,K/128]  (per row, blocked along K)
 *	                                          %w.dq = dequantize $w, $w.scale, axis=-1,
 *	                                                  block_size=128, to=bf16 : bf16[N,K]
 *	                                          ... matmul %x, %w.dq, trans_b=1
 *
 * Every format is repacked at import into that form: the quantised values
 * [.., N, K] (i4/u4 packed two to a byte along K, low nibble first), a
 * scale [.., N, ceil(K/bs)] and, for asymmetric int4, a u4 zero point of the
 * scale's shape; 2-D weight blocks (fp8 128x128) are repeated over their
 * rows (synthetic ones too: Weight.row_block).  fp8 with dynamic activations also quantises each quantised linear's
 * input (quantize_dynamic then dequantize, per token and 128 columns), and
 * with static ones by the linear's fixed input_scale (quantize, dequantize).
 * compressed-tensors' config groups give each weight its group's scheme.
 * With synthetic weights the same values, scales and zero points are
 * generated in the same dtypes.
 */
#include <fnmatch.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "cfg.h"

/* What each scheme stores; one row per kind (the table of docs/config.md). */
static const struct {
	DType q;		/* the IR values */
	DType s;		/* the IR scale (NDTYPE: the checkpoint's, the model dtype) */
	int zero;		/* has zero points (u4) */
	double qmean, qscale;	/* synthetic values: mean + qscale*U(-1,1) */
} qfmt[] = {
	[Q_FP8] = {DT_F8E4M3, DT_F32, 0, 0, 448},
	[Q_FP8_CH] = {DT_F8E4M3, DT_F32, 0, 0, 448},
	[Q_MXFP4] = {DT_F4E2M1, DT_F8E8M0, 0, 0, 6},
	[Q_CT_INT4] = {DT_I4, NDTYPE, 0, 0, 8},
	[Q_GPTQ] = {DT_U4, NDTYPE, 1, 8, 8},
	[Q_AWQ] = {DT_U4, NDTYPE, 1, 8, 8},
};

/* ---- quantization_config ---- */

static const cJSON *
qkey(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static int64_t
qint(const cJSON *o, const char *k, int64_t def)
{
	const cJSON *v = qkey(o, k);

	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : def;
}

static int
qbool(const cJSON *o, const char *k, int def)
{
	const cJSON *v = qkey(o, k);

	return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

static const char *
qstr(const cJSON *o, const char *k)
{
	const cJSON *v = qkey(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A "re:" pattern matched from the start of name, as Python's re.match
 * (\d written [0-9]: POSIX regexes have no \d); -1 if it does not compile. */
static int
regex_at_start(const char *pat, const char *name)
{
	char buf[1024], *o = buf;
	regex_t re;
	int hit;

	if (strlen(pat) > 150)
		return -1;
	o += sprintf(o, "^(");
	for (const char *p = pat; *p; p++)
		if (p[0] == '\\' && p[1] == 'd')
			o += sprintf(o, "[0-9]"), p++;
		else
			*o++ = *p;
	sprintf(o, ")");
	if (regcomp(&re, buf, REG_EXTENDED | REG_NOSUB))
		return -1;
	hit = regexec(&re, name, 0, NULL, 0) == 0;
	regfree(&re);
	return hit;
}

/* Parsing one of several compressed-tensors groups, the error is kept for
 * when a weight picks the group (an attention-only group moec never reads
 * may hold any scheme). */
static int
qerr(Cfg *c, const char *fmt, const char *a)
{
	if (c->qquiet) {
		c->qmsg = arena_printf(c->m->arena, fmt, a);
		return -1;
	}
	return cfg_error(c, "quantization_config", fmt, a);
}

/* [rows, cols] of positive integers (fp8's weight_block_size,
 * compressed-tensors' block_structure) into bn, bk. */
static int
qblock(Cfg *c, const cJSON *b, const char *key)
{
	if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != 2 ||
	    !cJSON_IsNumber(cJSON_GetArrayItem(b, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(b, 1)))
		return qerr(c, "%s must be [rows, cols]", key);
	c->q.bn = (int64_t)cJSON_GetArrayItem(b, 0)->valuedouble;
	c->q.bk = (int64_t)cJSON_GetArrayItem(b, 1)->valuedouble;
	if (c->q.bn <= 0 || c->q.bk <= 0 || c->q.bn > 65536 || c->q.bk > 65536)
		return qerr(c, "%s must be positive", key);
	c->q.kind = Q_FP8;
	return 0;
}

/* fp8: DeepSeek's 2-D blocks (weight_block_size), or without it AutoFP8's
 * (and transformers') one scale per tensor; activations dynamic (per token
 * and block columns; per token) or static (each linear's input_scale). */
static int
parse_fp8(Cfg *c, const cJSON *q)
{
	const cJSON *b = qkey(q, "weight_block_size");
	const char *act = qstr(q, "activation_scheme"), *fmt = qstr(q, "fmt");

	if (fmt && strcmp(fmt, "e4m3") && strcmp(fmt, "float8_e4m3fn"))
		return qerr(c, "fp8 fmt '%s' is not one moec reads (e4m3)", fmt);
	if (act && strcmp(act, "dynamic") && strcmp(act, "static"))
		return qerr(c, "fp8 activation_scheme '%s' is not read (dynamic, static)", act);
	if (qkey(q, "ignored_layers"))	/* AutoFP8's name for it */
		c->q.skip = qkey(q, "ignored_layers");
	c->q.act_down = 1;	/* as DeepSeek's kernels and transformers' FP8Experts do */
	if (!b || cJSON_IsNull(b)) {
		c->q.kind = Q_FP8_CH;
		c->q.per_tensor = 1;
		c->q.bk = -1;
		c->q.act = act && strcmp(act, "static") == 0 ? ACT_STATIC : ACT_ROW;
		return 0;
	}
	if (qblock(c, b, "fp8 weight_block_size"))
		return -1;
	if (qstr(q, "scale_fmt") && strcmp(qstr(q, "scale_fmt"), "ue8m0") == 0)
		cfg_note(c, "quantization_config", "scale_fmt ue8m0: the activation scales are "
			 "amax/448 in f32, not rounded up to powers of two (quantize_dynamic has no such "
			 "mode)");
	c->q.act = act && strcmp(act, "static") == 0 ? ACT_STATIC : ACT_GROUP;
	c->q.scale_sfx = "_scale_inv";
	return 0;
}

static int
parse_gptq_awq(Cfg *c, const cJSON *q, int kind)
{
	const char *fmt = qstr(q, kind == Q_GPTQ ? "checkpoint_format" : "version");
	int64_t bits = qint(q, kind == Q_GPTQ ? "bits" : "w_bit", qint(q, "bits", 0));

	if (bits != 4)
		return qerr(c, "%s: only bits 4 is read", c->q.method);
	c->q.bk = qint(q, kind == Q_GPTQ ? "group_size" : "q_group_size", qint(q, "group_size", -1));
	if (c->q.bk == 0 || c->q.bk < -1 || c->q.bk > (1 << 20))
		return qerr(c, "%s: group_size must be -1 (a row) or positive", c->q.method);
	if (kind == Q_GPTQ) {
		if (fmt && strcmp(fmt, "gptq") && strcmp(fmt, "gptq_v2"))
			return qerr(c, "gptq checkpoint_format '%s' is not read (gptq, gptq_v2)", fmt);
		c->q.v1 = !fmt || strcmp(fmt, "gptq") == 0;
		c->q.desc_act = qbool(q, "desc_act", 0);
	} else if (fmt && strcmp(fmt, "gemm")) {
		return qerr(c, "awq version '%s' is not read (gemm)", fmt);
	}
	if (kind == Q_AWQ && !qbool(q, "zero_point", 1))
		return qerr(c, "awq without zero points is not read%s", "");
	c->q.skip = qkey(q, "modules_to_not_convert");
	c->q.kind = kind;
	return 0;
}

/* compressed-tensors int4 (pack-quantized): group or channel, symmetric or
 * with zero points; actorder group (or its alias dynamic): a weight_g_idx. */
static int
ct_int4(Cfg *c, const cJSON *w, const cJSON *a)
{
	const char *strat = qstr(w, "strategy"), *order = qstr(w, "actorder");

	c->q.kind = Q_CT_INT4;
	c->q.sym = qbool(w, "symmetric", 1);
	if (strcmp(strat, "group") == 0)
		c->q.bk = qint(w, "group_size", 0);
	else if (strcmp(strat, "channel") == 0)
		c->q.bk = -1;
	else
		return qerr(c, "compressed-tensors int4 strategy '%s' is not read (group, channel)", strat);
	if (c->q.bk == 0 || c->q.bk > (1 << 20))
		return qerr(c, "compressed-tensors: group_size must be positive%s", "");
	if (order && strcmp(order, "weight") && strcmp(order, "static") && strcmp(order, "group") &&
	    strcmp(order, "dynamic"))
		return qerr(c, "compressed-tensors actorder '%s' is not read (group, weight)", order);
	c->q.desc_act = order && (strcmp(order, "group") == 0 || strcmp(order, "dynamic") == 0);
	if (c->q.desc_act && c->q.bk < 0)
		return qerr(c, "compressed-tensors actorder group needs strategy group, not '%s'", strat);
	if (a && !cJSON_IsNull(a))
		return qerr(c, "compressed-tensors int4 with input_activations is not read%s", "");
	return 0;
}

/* compressed-tensors fp8 (float-quantized): a scale per channel or tensor
 * (Q_FP8_CH), or per 2-D block (FP8_BLOCK: DeepSeek's form, Q_FP8, its
 * scale named weight_scale); activations none, dynamic per token, or (block)
 * dynamic per token and group_size columns, the block's. */
static int
ct_fp8(Cfg *c, const cJSON *w, const cJSON *a)
{
	const char *strat = qstr(w, "strategy"), *as = a ? qstr(a, "strategy") : NULL;
	int64_t ag = a ? qint(a, "group_size", 0) : 0;

	if (strcmp(strat, "block") == 0) {
		if (qblock(c, qkey(w, "block_structure"), "compressed-tensors fp8 block_structure"))
			return -1;
		c->q.scale_sfx = "_scale";
	} else if (strcmp(strat, "channel") == 0 || strcmp(strat, "tensor") == 0) {
		c->q.kind = Q_FP8_CH;
		c->q.bk = -1;
		c->q.per_tensor = strcmp(strat, "tensor") == 0;
	} else {
		return qerr(c, "compressed-tensors fp8 strategy '%s' is not read (channel, tensor, "
			    "block)", strat);
	}
	if (!a || cJSON_IsNull(a))
		return 0;
	if (!qbool(a, "dynamic", 0)) {	/* llm-compressor's FP8 preset: each linear's input_scale */
		if (!as || strcmp(as, "tensor") || c->q.kind != Q_FP8_CH)
			return qerr(c, "compressed-tensors fp8: static input_activations are read per tensor "
				    "with channel or tensor weights, not strategy '%s' with these weights",
				    as ? as : "?");
		c->q.act = ACT_STATIC;
		c->q.act_down = 1;	/* as the fp8 scheme's static form */
		return 0;
	}
	if (as && strcmp(as, "token") == 0) {
		c->q.act = ACT_ROW;
		return 0;
	}
	if (!as || strcmp(as, "group") || c->q.kind != Q_FP8)
		return qerr(c, "compressed-tensors fp8 input_activations strategy '%s' is not read "
			    "(token; group with block weights)", as ? as : "?");
	if (ag != c->q.bk)
		return qerr(c, "compressed-tensors fp8 input_activations group_size must be the "
			    "block's columns (block_structure[1])%s", "");
	c->q.act = ACT_GROUP;
	c->q.act_down = 1;	/* DeepSeek's form: vLLM's block fp8 MoE quantises it too */
	return 0;
}

/* One config group's scheme into c->q; its format, or the config's. */
static int
ct_scheme(Cfg *c, const cJSON *g, const char *fmt)
{
	const cJSON *w = qkey(g, "weights"), *a = qkey(g, "input_activations");
	const char *type = qstr(w, "type");
	int64_t bits = qint(w, "num_bits", 0);

	if (qstr(g, "format"))
		fmt = qstr(g, "format");
	if (!type || !qstr(w, "strategy"))
		return qerr(c, "compressed-tensors: weights needs type and strategy%s", "");
	if (strcmp(type, "int") == 0 && bits == 4 && fmt && strcmp(fmt, "pack-quantized") == 0)
		return ct_int4(c, w, a);
	if (strcmp(type, "float") == 0 && bits == 8 && fmt && strcmp(fmt, "float-quantized") == 0)
		return ct_fp8(c, w, a);
	return qerr(c, "compressed-tensors format '%s' with these weights is not read "
		    "(pack-quantized int4, float-quantized fp8)", fmt ? fmt : "?");
}

/* compressed-tensors: each config group's targets and scheme.  With one
 * group its scheme is checked now; with several each is parsed quietly and
 * a weight that picks an unreadable one is refused then, naming the group. */
static int
parse_ct(Cfg *c, const cJSON *q)
{
	const cJSON *groups = qkey(q, "config_groups"), *g, *t;
	const char *fmt = qstr(q, "format");
	QCfg base;

	if (!cJSON_IsObject(groups) || !groups->child)
		return qerr(c, "compressed-tensors needs config_groups%s", "");
	if (cJSON_GetArraySize(groups) > CFG_MAX_QGROUPS)
		return qerr(c, "compressed-tensors: more than 16 config groups%s", "");
	c->q.skip = qkey(q, "ignore");
	c->q.skip_re = 1;
	base = c->q;
	c->qquiet = cJSON_GetArraySize(groups) > 1;
	cJSON_ArrayForEach(g, groups) {
		QGroup *qg = &c->qg[c->nqg++];
		qg->name = g->string ? g->string : "?";
		qg->targets = t = qkey(g, "targets");
		if (!cJSON_IsArray(t) || !t->child) {
			c->qquiet = 0;
			return cfg_error(c, "quantization_config", "compressed-tensors group '%s': "
					 "targets must be a list of module names, \"re:\" regexes or "
					 "class names", qg->name);
		}
		cJSON_ArrayForEach(t, qg->targets)
			if (cJSON_IsString(t) && !strncmp(t->valuestring, "re:", 3) &&
			    regex_at_start(t->valuestring + 3, "") < 0) {
				c->qquiet = 0;
				return cfg_error(c, "quantization_config", "compressed-tensors group "
						 "'%s': target '%s' is not a regex moec reads", qg->name,
						 t->valuestring);
			}
		c->q = base;
		c->qmsg = NULL;
		if (ct_scheme(c, g, fmt) && !c->qquiet)
			return -1;
		qg->s = c->q;
		qg->err = c->qmsg;
	}
	c->qquiet = 0;
	c->q = base;
	c->q.kind = NQKIND;	/* some group may apply: cfg_quant_wanted picks */
	c->qsel = -1;
	return 0;
}

/* fbgemm_fp8 (transformers' FbgemmFp8Linear, Llama-4's FbgemmFp8Llama4TextExperts):
 * compressed-tensors fp8 channel's form, its input quantised per token with
 * the scale's amax clamped to activation_scale_ub. */
static int
parse_fbgemm(Cfg *c, const cJSON *q)
{
	const cJSON *ub = qkey(q, "activation_scale_ub");

	if (ub && !cJSON_IsNull(ub) && (!cJSON_IsNumber(ub) || !(ub->valuedouble > 0) ||
					 !isfinite(ub->valuedouble)))
		return qerr(c, "fbgemm_fp8 activation_scale_ub must be a positive number%s", "");
	c->q.ub = ub && cJSON_IsNumber(ub) ? ub->valuedouble : 1200.0;	/* FbgemmFp8Config's default */
	c->q.kind = Q_FP8_CH;
	c->q.bk = -1;
	c->q.act = ACT_ROW;
	c->q.act_down = 1;
	return 0;
}

int
cfg_quant_config(Cfg *c)
{
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(c->json, "quantization_config");
	const char *m;

	memset(&c->q, 0, sizeof c->q);
	if (!q || cJSON_IsNull(q))
		return 0;
	if (!cJSON_IsObject(q))
		return qerr(c, "must be an object%s", "");
	m = qstr(q, "quant_method");
	c->q.method = m ? m : "unknown";
	c->q.skip = qkey(q, "modules_to_not_convert");
	if (m && strcmp(m, "fp8") == 0)
		return parse_fp8(c, q);
	if (m && strcmp(m, "mxfp4") == 0) {
		c->q.kind = Q_MXFP4;
		c->q.bk = 32;
		return 0;
	}
	if (m && strcmp(m, "gptq") == 0)
		return parse_gptq_awq(c, q, Q_GPTQ);
	if (m && strcmp(m, "awq") == 0)
		return parse_gptq_awq(c, q, Q_AWQ);
	if (m && strcmp(m, "compressed-tensors") == 0)
		return parse_ct(c, q);
	if (m && strcmp(m, "fbgemm_fp8") == 0)
		return parse_fbgemm(c, q);
	return qerr(c, "quant_method '%s' is not one moec reads (fp8, mxfp4, gptq, awq, "
		    "compressed-tensors, fbgemm_fp8)", c->q.method);
}

/* ---- which weights ---- */

/* modules_to_not_convert (a module or a dotted part of its name, '*' any) or
 * compressed-tensors' ignore ("re:" a regex matched from the start). */
static int
skipped(Cfg *c, const char *mod)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, c->q.skip) {
		const char *p = cJSON_IsString(e) ? e->valuestring : NULL;
		char buf[512];
		int hit;
		if (!p)
			continue;
		if (c->q.skip_re && strncmp(p, "re:", 3) == 0) {
			hit = regex_at_start(p + 3, mod) == 1;
		} else {
			snprintf(buf, sizeof buf, "*.%s", p);
			hit = fnmatch(p, mod, 0) == 0 || fnmatch(buf, mod, 0) == 0;
			snprintf(buf, sizeof buf, "%s.*", p);
			hit |= fnmatch(buf, mod, 0) == 0;
			snprintf(buf, sizeof buf, "*.%s.*", p);
			hit |= fnmatch(buf, mod, 0) == 0;
		}
		if (hit)
			return 1;
	}
	return 0;
}

static const char *
module_of(Cfg *c, const char *name)
{
	size_t n = strlen(name);

	if (n > 7 && strcmp(name + n - 7, ".weight") == 0)
		n -= 7;
	return arena_strndup(c->m->arena, name, n);
}

/* How a compressed-tensors target matches module mod, ranked as
 * compressed-tensors ranks them: 3 its name, 2 a "re:" regex, 1 the class
 * Linear (every weight moec quantises is an nn.Linear's), 0 not. */
static int
target_rank(const char *t, const char *mod)
{
	if (strncmp(t, "re:", 3) == 0)
		return regex_at_start(t + 3, mod) == 1 ? 2 : 0;
	if (strcmp(t, mod) == 0)
		return 3;
	return strcmp(t, "Linear") == 0;
}

/* The group whose targets match mod best (the first of equals), or -1. */
static int
group_of(Cfg *c, const char *mod)
{
	int best = -1, rank = 0;

	for (int i = 0; i < c->nqg; i++) {
		const cJSON *t;
		cJSON_ArrayForEach(t, c->qg[i].targets) {
			int r = cJSON_IsString(t) ? target_rank(t->valuestring, mod) : 0;
			if (r > rank)
				rank = r, best = i;
		}
	}
	return best;
}

static int
same_act(const QCfg *a, const QCfg *b)
{
	return a->act == b->act && a->act_down == b->act_down &&
		(a->act != ACT_GROUP || a->bk == b->bk);
}

static int
same_scheme(const QCfg *a, const QCfg *b)
{
	return a->kind == b->kind && a->bn == b->bn && a->bk == b->bk && a->sym == b->sym &&
		a->desc_act == b->desc_act && a->per_tensor == b->per_tensor && same_act(a, b);
}

static const char *
group_name(Cfg *c, int g)
{
	return g < 0 ? "none" : arena_printf(c->m->arena, "group '%s'", c->qg[g].name);
}

/* compressed-tensors: the group of each of w's tensors (a stacked weight's
 * pieces: every expert's gate, up, ...), one scheme for all of them, and
 * the activations of the group picked first (one quantisation of a layer's
 * input serves every linear reading it).  1: quantised, c->q its scheme. */
static int
pick_group(Cfg *c, const WSpec *w)
{
	size_t n = w->piece.n ? w->piece.n : 1;
	const char *mod = module_of(c, w->name), *first = mod;
	int g0 = -1;

	for (size_t i = 0; i < n; i++) {
		int g;
		if (w->piece.n)
			mod = module_of(c, w->piece.v[i].name);
		g = skipped(c, mod) ? -1 : group_of(c, mod);
		if (i == 0)
			g0 = g, first = mod;
		else if (g != g0 && (g < 0 || g0 < 0 || !same_scheme(&c->qg[g].s, &c->qg[g0].s)))
			return cfg_error(c, "quantization_config", "compressed-tensors: weight '%s' "
					 "joins '%s' (%s) and '%s' (%s), quantised differently", w->name,
					 first, group_name(c, g0), mod, group_name(c, g)), -1;
	}
	if (g0 < 0)
		return 0;
	if (c->qg[g0].err)
		return cfg_error(c, "quantization_config", "compressed-tensors group '%s' (which "
				 "'%s' matches): %s", c->qg[g0].name, first, c->qg[g0].err), -1;
	if (c->qsel >= 0 && !same_act(&c->qg[c->qsel].s, &c->qg[g0].s))
		return cfg_error(c, "quantization_config", "compressed-tensors groups '%s' and '%s' "
				 "quantise the block's activations differently ('%s')", c->qg[c->qsel].name,
				 c->qg[g0].name, first), -1;
	if (c->qsel < 0)
		c->qsel = g0;
	c->q = c->qg[g0].s;
	return 1;
}

/* 1: w is read quantised (c->q its scheme), 0: in the model dtype, -1: refused. */
int
cfg_quant_wanted(Cfg *c, const WSpec *w)
{
	if (!c->q.kind || !w->quant || w->t.rank < 2)
		return 0;
	if (c->q.kind == Q_MXFP4 && w->quant != QW_EXPERTS)
		return 0;	/* transformers' Mxfp4 converts the experts only */
	if (skipped(c, module_of(c, w->name)))
		return 0;
	return c->nqg ? pick_group(c, w) : 1;
}

/* ---- reading one piece ---- */

typedef struct {
	int64_t N, K, nb, bs;	/* rows per matrix, columns, blocks per row, block */
	DType qdt, sdt;
	uint8_t *q, *s, *z;	/* canonical buffers */
} Canon;

static void *
read_checked(Cfg *c, const char *name, DType dt, int rank, const int64_t *dim, const char *why)
{
	const StTensor *t = st_find(c->st, name);
	char want[96], got[96];
	void *buf;

	cfg_shape_str(want, sizeof want, rank, dim);
	if (!t) {
		diag_error(c->d, cfg_tensor_loc(c, NULL, name), "tensor not found; %s implies %s%s",
			   c->q.method, dtype_name(dt), want);
		return NULL;
	}
	cfg_shape_str(got, sizeof got, t->rank, t->dim);
	if (t->dt != dt || strcmp(got, want)) {
		diag_error(c->d, cfg_tensor_loc(c, t, name), "%s%s but %s implies %s%s (%s)",
			   t->dtname, got, c->q.method, dtype_name(dt), want, why);
		return NULL;
	}
	if (!(buf = malloc(t->size ? t->size : 1))) {
		diag_error(c->d, cfg_tensor_loc(c, t, name), "out of memory");
		return NULL;
	}
	if (st_read(c->st, t, buf, c->d)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static const char *
tname(Cfg *c, const char *base, const char *suffix)
{
	return arena_printf(c->m->arena, "%s%s", base, suffix);
}

/* A checkpoint scale of any float dtype, as a double. */
static double
sload(DType dt, const void *p, int64_t i)
{
	return dtype_load(dt, p, (size_t)i);
}

static DType
scale_dtype(Cfg *c, const char *name, DType def)
{
	const StTensor *t = c->st ? st_find(c->st, name) : NULL;

	return t && dtype_is_float(t->dt) ? t->dt : def;
}

/* fp8 blocks: values as they are; scale [ceil(R/bn), nb] (any float type,
 * held f32) repeated over rows. */
static int
piece_fp8(Cfg *c, const Piece *p, int64_t r0, int64_t R, Canon *k)
{
	int64_t d[3], E = p->rank == 3 ? p->dim[0] : 1;
	int64_t Rm = R / E, srm = (Rm + c->q.bn - 1) / c->q.bn;
	const char *sn;
	DType sdt;
	void *q, *s;

	memcpy(d, p->dim, sizeof d);
	q = read_checked(c, p->name, DT_F8E4M3, p->rank, d, "the weight's shape");
	if (!q)
		return -1;
	memcpy(k->q + r0 * k->K, q, (size_t)(R * k->K));
	free(q);
	d[p->rank - 2] = srm, d[p->rank - 1] = k->nb;
	sn = tname(c, p->name, c->q.scale_sfx);
	sdt = scale_dtype(c, sn, DT_F32);
	s = read_checked(c, sn, sdt, p->rank, d, strcmp(c->q.scale_sfx, "_scale") ?
			 "weight_block_size blocks of the weight" : "block_structure blocks of the weight");
	if (!s)
		return -1;
	for (int64_t r = 0; r < R; r++)
		for (int64_t j = 0; j < k->nb; j++)
			dtype_store(DT_F32, k->s, (size_t)((r0 + r) * k->nb + j),
				    sload(sdt, s, ((r / Rm) * srm + (r % Rm) / c->q.bn) * k->nb + j));
	free(s);
	return 0;
}

/* fbgemm_fp8's Llama-4 experts (FbgemmFp8Llama4TextExperts): gate_up_proj
 * f8 [E,H,2I] with gate_up_proj_scale f32 [E,1,2I], down_proj [E,I,H] with
 * down_proj_scale [E,H,1]: held [E,K,N], transposed to the IR's rows; a
 * scale per expert and output channel (both scales are [E][N] in memory). */
static int
piece_fp8_stacked(Cfg *c, const Piece *p, Canon *k)
{
	int64_t E = p->dim[0], N = k->N, K = k->K, n = (int64_t)strlen(p->name);
	int down = n >= 9 && strcmp(p->name + n - 9, "down_proj") == 0;
	int64_t ds[3] = {E, down ? N : 1, down ? 1 : N};
	uint8_t *q, *s;

	if (p->rank != 3 || p->dim[1] != K || p->dim[2] != N)
		return diag_error(c->d, cfg_tensor_loc(c, NULL, p->name), "%s: stacked experts are "
				  "read as [E, in, out]", c->q.method);
	if (!(q = read_checked(c, p->name, DT_F8E4M3, 3, p->dim, "experts x in x out")))
		return -1;
	for (int64_t e = 0; e < E; e++)
		for (int64_t r = 0; r < N; r++)
			for (int64_t j = 0; j < K; j++)
				k->q[(e * N + r) * K + j] = q[(e * K + j) * N + r];
	free(q);
	if (!(s = read_checked(c, tname(c, p->name, "_scale"), k->sdt, 3, ds, down ?
			       "a scale per expert and output channel, [E, out, 1]" :
			       "a scale per expert and output channel, [E, 1, out]")))
		return -1;
	memcpy(k->s, s, (size_t)(E * N) * (size_t)dtype_bits(k->sdt) / 8);
	free(s);
	return 0;
}

/* gpt-oss: <w>_blocks u8 [E,N,K/32,16] are the e2m1 values, <w>_scales u8
 * [E,N,K/32] the e8m0 scales, both already in the IR's order. */
static int
piece_mxfp4(Cfg *c, const Piece *p, const WSpec *w, Canon *k)
{
	int64_t E = w->t.rank == 3 ? w->t.dim[0] : 1, M = E * k->N;
	int64_t db[4] = {E, k->N, k->nb, 16};
	void *q, *s;

	if (k->K % 32)
		return diag_error(c->d, cfg_tensor_loc(c, NULL, p->name), "mxfp4 needs K = %lld "
				  "a multiple of 32", (long long)k->K);
	q = read_checked(c, tname(c, w->name, "_blocks"), DT_U8, 4, db, "experts x N x K/32 x 16");
	if (!q)
		return -1;
	memcpy(k->q, q, (size_t)(M * k->K / 2));
	free(q);
	s = read_checked(c, tname(c, w->name, "_scales"), DT_U8, 3, db, "experts x N x K/32");
	if (!s)
		return -1;
	memcpy(k->s, s, (size_t)(M * k->nb));
	free(s);
	return 0;
}

/* The scale of fp8 weight <w> with one per row or tensor: <w>_scale_inv
 * (transformers' per-tensor fp8) or <w>_scale (compressed-tensors, AutoFP8,
 * fbgemm_fp8). */
static const char *
fp8_scale_name(Cfg *c, const char *w)
{
	const char *inv = tname(c, w, "_scale_inv");

	return c->st && st_find(c->st, inv) ? inv : tname(c, w, "_scale");
}

/* fp8 with a scale per output row ([R, 1]) or per tensor ([1] or a scalar),
 * repeated over the rows. */
static int
piece_fp8_ch(Cfg *c, const Piece *p, int64_t r0, int64_t R, Canon *k)
{
	const char *sn = fp8_scale_name(c, p->name);
	const StTensor *t = st_find(c->st, sn);
	int pt = c->q.per_tensor, rank = pt && t && t->rank == 0 ? 0 : pt ? 1 : 2;
	int64_t d[2] = {pt ? 1 : R, 1};
	uint8_t *q, *s;

	q = read_checked(c, p->name, DT_F8E4M3, 2, (int64_t[]){R, k->K}, "the weight's shape");
	if (!q)
		return -1;
	memcpy(k->q + r0 * k->K, q, (size_t)(R * k->K));
	free(q);
	if (!(s = read_checked(c, sn, k->sdt, rank, d, "one scale per output row (or tensor)")))
		return -1;
	for (int64_t r = 0; r < R; r++)
		dtype_store(k->sdt, k->s, (size_t)(r0 + r), sload(k->sdt, s, pt ? 0 : r));
	free(s);
	return 0;
}

/* An act-order g_idx i32 [K] (gptq desc_act, compressed-tensors actorder
 * group): input column i is in group g_idx[i], one of ng. */
static int32_t *
read_gidx(Cfg *c, const char *name, int64_t K, int64_t ng)
{
	int32_t *g = read_checked(c, name, DT_I32, 1, &K, "one group per input column");

	for (int64_t i = 0; g && i < K; i++)
		if (g[i] < 0 || g[i] >= ng) {
			diag_error(c->d, cfg_tensor_loc(c, NULL, name), "g_idx[%lld] is %d, not a "
				   "group of %lld", (long long)i, g[i], (long long)ng);
			free(g);
			return NULL;
		}
	return g;
}

/* compressed-tensors int4: weight_packed i32 [R, K/8] holds q+8 as u4 low
 * nibble first; weight_scale [R, ng]; weight_zero_point i32 [ceil(R/8), ng]
 * holds z+8 packed along the rows; with actorder group weight_g_idx [K]
 * gathers them per column (k->nb = K). */
static int
piece_ct(Cfg *c, const Piece *p, int64_t r0, int64_t R, Canon *k)
{
	const char *base = module_of(c, p->name);
	int64_t K = k->K, gs = c->q.bk > 0 && c->q.bk < K ? c->q.bk : K, ng = (K + gs - 1) / gs;
	int64_t dq[2] = {R, (K + 7) / 8}, ds[2] = {R, ng}, dz[2] = {(R + 7) / 8, ng};
	int32_t *grp = NULL;
	uint8_t *q = NULL, *s = NULL, *z = NULL;
	int rc = -1;

	if (K % 8)
		return diag_error(c->d, cfg_tensor_loc(c, NULL, p->name), "pack-quantized int4 "
				  "needs K = %lld a multiple of 8", (long long)K);
	if (c->q.desc_act && !(grp = read_gidx(c, tname(c, base, ".weight_g_idx"), K, ng)))
		return -1;
	if (!(q = read_checked(c, tname(c, base, ".weight_packed"), DT_I32, 2, dq,
			       "out x in/8 (8 values per int32)")))
		goto out;
	for (int64_t i = 0; i < R * K / 2; i++)	/* q + 8 -> q: flip each nibble's top bit */
		k->q[r0 * K / 2 + i] = q[i] ^ (c->q.sym ? 0x88 : 0);
	if (!(s = read_checked(c, tname(c, base, ".weight_scale"), k->sdt, 2, ds,
			       "out x in/group_size")))
		goto out;
	if (!c->q.sym && !(z = read_checked(c, tname(c, base, ".weight_zero_point"), DT_I32, 2, dz,
					    "out/8 x in/group_size (8 zero points per int32 along out)")))
		goto out;
	for (int64_t r = 0; r < R; r++)
		for (int64_t j = 0; j < k->nb; j++) {
			int64_t g = grp ? grp[j] : j, o = (r0 + r) * k->nb + j;
			dtype_store(k->sdt, k->s, (size_t)o, sload(k->sdt, s, r * ng + g));
			if (z)
				dtype_store_int(DT_U4, k->z, (size_t)o,
						(((uint32_t *)(void *)z)[(r / 8) * ng + g] >> (4 * (r % 8))) & 0xf);
		}
	rc = 0;
out:
	free(grp), free(q), free(s), free(z);
	return rc;
}

/* gptq / awq: qweight i32 (gptq [K/8, R] packed along K; awq [K, R/8]
 * packed along R in the order 0 2 4 6 1 3 5 7), qzeros i32 [K/g, R/8]
 * (gptq v1 stores z - 1), scales [K/g, R]: all transposed to rows.  gptq
 * desc_act: column i is in group g_idx[i], so the IR's scales and zero
 * points are per column (k->bs = 1) and gathered by g_idx. */
static int
piece_gptq_awq(Cfg *c, const Piece *p, int64_t r0, int64_t R, Canon *k)
{
	/* AWQ packs column 8j + {0,2,4,6,1,3,5,7}[i] into nibble i: column 8j + c is nibble awq_order[c] */
	static const int awq_order[8] = {0, 4, 1, 5, 2, 6, 3, 7};
	const char *base = module_of(c, p->name);
	int awq = c->q.kind == Q_AWQ;
	int64_t K = k->K, gs = c->q.bk > 0 && c->q.bk < K ? c->q.bk : K, ng = (K + gs - 1) / gs;
	int64_t dq[2] = {awq ? K : K / 8, awq ? R / 8 : R}, dz[2] = {ng, R / 8}, ds[2] = {ng, R};
	int32_t *grp = NULL;
	uint32_t *q = NULL, *z = NULL;
	uint8_t *s = NULL;
	int rc = -1;

	if (K % 8 || R % 8)
		return diag_error(c->d, cfg_tensor_loc(c, NULL, p->name), "%s needs in = %lld and "
				  "out = %lld multiples of 8", c->q.method, (long long)K, (long long)R);
	if (k->nb != ng && !(grp = read_gidx(c, tname(c, base, ".g_idx"), K, ng)))
		return -1;
	if (!(q = read_checked(c, tname(c, base, ".qweight"), DT_I32, 2, dq, "the packed int32 layout")))
		goto out;
	for (int64_t r = 0; r < R; r++)
		for (int64_t i = 0; i < K; i++) {
			uint32_t v = awq ? q[i * (R / 8) + r / 8] >> (4 * awq_order[r % 8])
				: q[(i / 8) * R + r] >> (4 * (i % 8));
			dtype_store_int(DT_U4, k->q, (size_t)((r0 + r) * K + i), v & 0xf);
		}
	if (!(z = read_checked(c, tname(c, base, ".qzeros"), DT_I32, 2, dz, "in/group_size x out/8")))
		goto out;
	if (!(s = read_checked(c, tname(c, base, ".scales"), k->sdt, 2, ds, "in/group_size x out")))
		goto out;
	for (int64_t r = 0; r < R; r++)
		for (int64_t j = 0; j < k->nb; j++) {
			int64_t gj = grp ? grp[j] : j;
			uint32_t v = z[gj * (R / 8) + r / 8] >> (4 * (awq ? awq_order[r % 8] : r % 8));
			int64_t zz = (int64_t)(v & 0xf) + (c->q.v1 && !awq);
			if (zz > 15) {
				diag_error(c->d, cfg_tensor_loc(c, NULL, tname(c, base, ".qzeros")), "gptq zero "
					   "point 16 (stored 15) of row %lld is not a u4 zero point", (long long)r);
				goto out;
			}
			dtype_store_int(DT_U4, k->z, (size_t)((r0 + r) * k->nb + j), zz);
			dtype_store(k->sdt, k->s, (size_t)((r0 + r) * k->nb + j), sload(k->sdt, s, gj * R + r));
		}
	rc = 0;
out:
	free(grp), free(q), free(z), free(s);
	return rc;
}

/* ---- the weight ---- */

static void
free_data(void *p, size_t n)
{
	(void)n;
	free(p);
}

static Value *
make(Cfg *c, const char *name, DType dt, int rank, const int64_t *dim, uint8_t *data,
     double mean, double scale)
{
	Dim dd[MAXRANK];
	Weight *wt;

	for (int i = 0; i < rank; i++)
		dd[i] = dim[i];
	wt = ir_add_weight(c->m, name, ir_type(dt, rank, dd));
	if (data) {
		wt->data = data;
		wt->size = dtype_bytes(dt, (size_t)ir_type_numel(&wt->value->type));
		wt->free_data = free_data;
		wt->source = ir_intern(c->m, c->stpath);
	} else {
		wt->seed = c->o->seed;
		wt->mean = mean;
		wt->scale = scale;
		wt->source = "synthetic";
	}
	return wt->value;
}

static int
read_pieces(Cfg *c, WSpec *w, Canon *k)
{
	int64_t dim[MAXRANK];

	for (int i = 0; i < w->t.rank; i++)
		dim[i] = w->t.dim[i];
	if (!w->piece.n)
		cfg_add_piece(w, w->name, 0, w->t.rank, dim, 0);
	if (c->q.kind == Q_MXFP4)
		return w->piece.n == 1 ? piece_mxfp4(c, &w->piece.v[0], w, k)
			: diag_error(c->d, cfg_tensor_loc(c, NULL, w->piece.v[0].name),
				     "mxfp4 experts must be stacked (<name>_blocks, <name>_scales)");
	for (size_t i = 0; i < w->piece.n; i++) {
		const Piece *p = &w->piece.v[i];
		int64_t R = 1;
		int rc;
		for (int d = 0; d < p->rank - 1; d++)
			R *= p->dim[d];
		if (c->q.kind == Q_FP8_CH && p->trans && p->nblk <= 1 && w->piece.n == 1) {
			if (piece_fp8_stacked(c, p, k))
				return -1;
			continue;
		}
		if (p->trans || p->nblk > 1 || p->dim[p->rank - 1] != k->K || p->off % k->K)
			return diag_error(c->d, cfg_tensor_loc(c, NULL, p->name), "%s weights are read "
					  "as [out, in] rows; this layout is not", c->q.method);
		if (c->q.kind == Q_FP8)
			rc = piece_fp8(c, p, p->off / k->K, R, k);
		else if (c->q.kind == Q_FP8_CH)
			rc = piece_fp8_ch(c, p, p->off / k->K, R, k);
		else if (c->q.kind == Q_CT_INT4)
			rc = piece_ct(c, p, p->off / k->K, R, k);
		else
			rc = piece_gptq_awq(c, p, p->off / k->K, R, k);
		if (rc)
			return -1;
	}
	return 0;
}

/* One fp8 tensor's static input scale: <module>.input_scale (AutoFP8) or
 * .activation_scale (transformers), [1] or a scalar, positive. */
static int
read_input_scale(Cfg *c, const char *mod, double *v)
{
	const char *n = tname(c, mod, ".input_scale"), *tn = tname(c, mod, ".activation_scale");
	const StTensor *t = st_find(c->st, n);
	DType dt;
	void *p;

	if (!t && (t = st_find(c->st, tn)))
		n = tn;
	dt = t && dtype_is_float(t->dt) ? t->dt : DT_F32;
	if (!(p = read_checked(c, n, dt, t && t->rank == 0 ? 0 : 1, (int64_t[]){1},
			       "activation_scheme static: a scale per tensor")))
		return -1;
	*v = sload(dt, p, 0);
	free(p);
	if (!(*v > 0) || !isfinite(*v))
		return diag_error(c->d, cfg_tensor_loc(c, t, n), "input scale %g is not a positive "
				  "number", *v);
	return 0;
}

/* fp8 static activations: the scale that quantises w's input, f32 [1].  A
 * stacked weight's experts share one quantised input: the largest of their
 * scales, as vLLM takes it (exact where they agree). */
static int
input_scale(Cfg *c, WSpec *w)
{
	size_t n = w->piece.n ? w->piece.n : 1;
	double hi = 0, v;
	uint8_t *data = NULL;

	for (size_t i = 0; c->st && i < n; i++) {
		if (read_input_scale(c, module_of(c, w->piece.n ? w->piece.v[i].name : w->name), &v))
			return -1;
		hi = fmax(hi, v);
	}
	if (c->st && !(data = malloc(sizeof(float))))
		return diag_error(c->d, cfg_tensor_loc(c, NULL, w->name), "out of memory");
	if (data)
		dtype_store(DT_F32, data, 0, hi);
	make(c, tname(c, w->name, ".input_scale"), DT_F32, 1, (int64_t[]){1}, data, 0.01, 0.0025);
	return 0;
}

Value *
cfg_quant_weight(Cfg *c, WSpec *w)
{
	int r = w->t.rank, kind = c->q.kind;
	int64_t dim[MAXRANK], sdim[MAXRANK], M, nq, ns;
	double smean;
	Canon k = {0};
	Value *in[3] = {NULL, NULL, NULL};
	const char *first = w->piece.n ? w->piece.v[0].name : w->name, *mod;
	Node *n;

	for (int i = 0; i < r; i++)
		dim[i] = sdim[i] = w->t.dim[i];
	k.N = dim[r - 2];
	k.K = dim[r - 1];
	k.bs = c->q.bk > 0 && c->q.bk < k.K ? c->q.bk : k.K;
	if (c->q.desc_act)
		k.bs = 1;	/* act-order: a scale per column, gathered by g_idx */
	k.nb = (k.K + k.bs - 1) / k.bs;
	k.qdt = qfmt[kind].q;
	k.sdt = qfmt[kind].s;
	if (k.qdt == DT_I4 && !c->q.sym)
		k.qdt = DT_U4;
	if (k.sdt == NDTYPE)	/* int4 scales: the checkpoint's float type, else the model's */
		k.sdt = scale_dtype(c, tname(c, module_of(c, first), kind == Q_CT_INT4 ? ".weight_scale"
					     : ".scales"), c->dt);
	if (kind == Q_FP8_CH)
		k.sdt = scale_dtype(c, fp8_scale_name(c, first), DT_F32);
	if (dtype_is_packed(k.qdt) && k.K % 2)
		return cfg_error(c, w->why, "%s: weight '%s' has an odd in-dimension %lld",
				 c->q.method, w->name, (long long)k.K), NULL;
	sdim[r - 1] = k.nb;
	M = ir_type_numel(&w->t) / k.K;
	nq = M * k.K;
	ns = M * k.nb;
	smean = 1.0 / (fabs(qfmt[kind].qscale) * sqrt((double)k.K));
	if (c->st) {
		int zero = qfmt[kind].zero || (kind == Q_CT_INT4 && !c->q.sym);
		k.q = calloc(dtype_bytes(k.qdt, (size_t)nq) + 1, 1);
		k.s = calloc(dtype_bytes(k.sdt, (size_t)ns) + 1, 1);
		k.z = zero ? calloc(dtype_bytes(DT_U4, (size_t)ns) + 1, 1) : NULL;
		if (!k.q || !k.s || (zero && !k.z) || read_pieces(c, w, &k)) {
			free(k.q), free(k.s), free(k.z);
			c->err = 1;
			return NULL;
		}
	}
	in[0] = make(c, w->name, k.qdt, r, dim, k.q, qfmt[kind].qmean, qfmt[kind].qscale);
	in[1] = make(c, tname(c, w->name, ".scale"), k.sdt, r, sdim, k.s, smean, 0.25 * smean);
	if (kind == Q_FP8 && !c->st && c->q.bn > 1)	/* synthetic 2-D blocks: repeated over their rows too */
		in[1]->weight->row_block = c->q.bn;
	if (k.z || (!c->st && k.qdt == DT_U4))
		in[2] = make(c, tname(c, w->name, ".zero"), DT_U4, r, sdim, k.z, 8, 2);
	if (c->q.act == ACT_STATIC && input_scale(c, w)) {
		c->err = 1;
		return NULL;
	}
	c->b.loc.name = w->name;
	ir_b_int(&c->b, "axis", r - 1);
	ir_b_int(&c->b, "block_size", k.bs);
	ir_b_str(&c->b, "to", dtype_name(c->dt));
	n = ir_b_node(&c->b, OP_DEQUANTIZE, in, in[2] ? 3 : 2, 1);
	mod = module_of(c, w->name);
	if (!strncmp(mod, c->pre, strlen(c->pre)))	/* value names are the layer's, as cfg_ffn's */
		mod += strlen(c->pre);
	return n ? cfg_named(c, n->out[0], tname(c, mod, ".dq")) : NULL;
}

/* fp8 (DeepSeek's scheme) also quantises the experts' down input, as its
 * kernels do: per token and block-size columns, inside the moe node. */
int
cfg_quant_moe_act(Cfg *c, const Value *wdown)
{
	int64_t I = wdown && wdown->type.rank == 3 ? wdown->type.dim[2] : 0;

	if (!c->q.act_down || !wdown || wdown->kind != V_RESULT || wdown->def->op != OP_DEQUANTIZE)
		return 0;
	if (c->q.ub > 0) {	/* fbgemm's experts: per token (a row), amax clamped to the bound */
		ir_b_int(&c->b, "act_quant", I);
		ir_b_float(&c->b, "act_quant_ub", c->q.ub);
		return 0;
	}
	if (c->q.act == ACT_STATIC) {	/* the node has no fixed scale for it: per token */
		cfg_note(c, "quantization_config", "activation_scheme static: the experts share one "
			 "quantised input, by the largest of their input scales (as vLLM), and their down "
			 "input is quantised per token inside the moe node, not by its input_scale");
		ir_b_int(&c->b, "act_quant", I);
		return 0;
	}
	if (c->q.act == ACT_ROW) {	/* transformers' per-tensor FP8Experts: per token */
		ir_b_int(&c->b, "act_quant", I);
		return 0;
	}
	if (I <= 0 || I % c->q.bk)
		return cfg_error(c, "quantization_config", "activation_scheme dynamic quantises the "
				 "experts' down input in groups of %lld columns; the intermediate size is %lld",
				 (long long)c->q.bk, (long long)I), -1;
	ir_b_int(&c->b, "act_quant", c->q.bk);
	return 0;
}

/* fp8 static: x / input_scale rounded to f32 and cast to e4m3, saturating
 * (quantize's saturate=1), then dequantised by the same scale. */
static Value *
static_act(Cfg *c, Value *x, const Value *w)
{
	const Weight *s = ir_find_weight(c->m, tname(c, w->def->in[0]->name, ".input_scale"));
	Value *q;

	if (!s)
		return x;
	ir_b_int(&c->b, "axis", x->type.rank - 1);
	ir_b_str(&c->b, "to", "f8e4m3");
	if (!(q = ir_b2(&c->b, OP_QUANTIZE, x, s->value)))
		return NULL;
	ir_b_int(&c->b, "axis", x->type.rank - 1);
	ir_b_str(&c->b, "to", dtype_name(x->type.dt));
	return ir_b2(&c->b, OP_DEQUANTIZE, q, s->value);
}

/* fp8 with dynamic activations: x -> quantize_dynamic -> dequantize, per
 * token and block-size columns (fp8) or per token (compressed-tensors,
 * fbgemm_fp8: x clipped to +-activation_scale_ub first). */
Value *
cfg_quant_act(Cfg *c, Value *x, const Value *w)
{
	int64_t K = x && x->type.rank ? x->type.dim[x->type.rank - 1] : 0;
	int64_t g = c->q.act == ACT_GROUP ? c->q.bk : K;

	if (!x || !w || !c->q.act || w->kind != V_RESULT || w->def->op != OP_DEQUANTIZE)
		return x;
	if (c->q.act == ACT_STATIC)
		return static_act(c, x, w);
	if (K <= 0 || K % g)
		return cfg_error(c, "quantization_config", "activation_scheme dynamic quantises "
				 "activations in groups of %lld columns; the input has %lld",
				 (long long)g, (long long)K), NULL;
	return ir_b_act_quant(&c->b, x, c->q.act == ACT_GROUP ? g : 0, c->q.ub);
}
