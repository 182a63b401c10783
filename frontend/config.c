/*
 * config.c — the Hugging Face config frontend: read config.json and build
 * decoder layer N's FFN sub-block as one graph,
 *
 *	graph @<model_type>_layerN(%x: DT[T,H]) -> (y: DT[T,H])
 *
 * computing y = x + ffn(post_attention_norm(x)) (bert, post-norm: y =
 * layer_norm(x + ffn(x))).  A family whose block reads more than x adds
 * its other inputs after it (cfg_input: arctic's layer_in).  This file holds the frame: JSON and its keys,
 * the model's dtype, the layer, quantization_config, opening the weights,
 * the graph and its parameter.  cfg_family.c builds each model_type's block.
 * Every bad key is reported as `config.json: key: error: ...`; nothing
 * aborts on bad input.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cfg.h"

#define CFG_MAX_FILE ((uint64_t)16 << 20)	/* hub configs are a few KB */

static Loc
key_loc(Cfg *c, const char *key)
{
	Loc l = loc_file(c->path);

	l.name = c->outer ? arena_printf(c->m->arena, "%s.%s", c->nest, key) : key;
	return l;
}

int
cfg_error(Cfg *c, const char *key, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_verror(c->d, key_loc(c, key), fmt, ap);
	va_end(ap);
	c->err = 1;
	return -1;
}

void
cfg_note(Cfg *c, const char *key, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	diag_note(c->d, key_loc(c, key), "%s", buf);
}

const char *
cfg_name(Cfg *c, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n = snprintf(buf, sizeof buf, "%s", c->pre);

	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	va_end(ap);
	return ir_intern(c->m, buf);
}

static const cJSON *
item(Cfg *c, const char *key)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(c->json, key);

	return cJSON_IsNull(j) ? NULL : j;
}

int
cfg_has(Cfg *c, const char *key)
{
	return item(c, key) != NULL;
}

const char *
cfg_alias(Cfg *c, const char *const *keys)
{
	for (int i = 0; keys[i]; i++)
		if (cfg_has(c, keys[i]))
			return keys[i];
	return keys[0];
}

/* An integer-valued JSON number (cJSON keeps numbers as doubles). */
static int
json_int(const cJSON *j, int64_t *v)
{
	double x;

	if (!cJSON_IsNumber(j))
		return -1;
	x = j->valuedouble;
	if (!(x > -9007199254740992.0 && x < 9007199254740992.0) || x != (double)(int64_t)x)
		return -1;
	*v = (int64_t)x;
	return 0;
}

int64_t
cfg_int(Cfg *c, const char *key)
{
	const cJSON *j = item(c, key);
	int64_t v;

	if (!j && cJSON_GetObjectItemCaseSensitive(c->json, key))	/* a class default's None */
		return cfg_error(c, key, "is null: the block needs a positive integer"), 1;
	if (!j)
		return cfg_error(c, key, "missing key"), 1;
	if (json_int(j, &v))
		return cfg_error(c, key, "must be an integer"), 1;
	if (v <= 0)
		return cfg_error(c, key, "must be positive, not %lld", (long long)v), 1;
	return v;
}

int64_t
cfg_int_or(Cfg *c, const char *key, int64_t def)
{
	const cJSON *j = item(c, key);
	int64_t v;

	if (!j)
		return def;
	if (json_int(j, &v) || v < 0)
		return cfg_error(c, key, "must be a non-negative integer"), def;
	return v;
}

double
cfg_num_or(Cfg *c, const char *key, double def)
{
	const cJSON *j = item(c, key);

	if (!j)
		return def;
	if (!cJSON_IsNumber(j))
		return cfg_error(c, key, "must be a number"), def;
	if (!isfinite(j->valuedouble))	/* 1e999 or -1e999: Python reads +-inf */
		return cfg_error(c, key, "must be a finite number, not %sinf",
				 j->valuedouble < 0 ? "-" : ""), def;
	return j->valuedouble;
}

int
cfg_bool_or(Cfg *c, const char *key, int def)
{
	const cJSON *j = item(c, key);

	if (!j)
		return def;
	if (!cJSON_IsBool(j))
		return cfg_error(c, key, "must be true or false"), def;
	return cJSON_IsTrue(j);
}

const char *
cfg_str_or(Cfg *c, const char *key, const char *def)
{
	const cJSON *j = item(c, key);

	if (!j)
		return def;
	if (!cJSON_IsString(j))
		return cfg_error(c, key, "must be a string"), def;
	return ir_intern(c->m, j->valuestring);
}

int
cfg_in_list(Cfg *c, const char *key, int64_t v)
{
	const cJSON *j = item(c, key), *e;
	int64_t x;

	if (!j)
		return 0;
	if (!cJSON_IsArray(j))
		return cfg_error(c, key, "must be a list of layer numbers"), 0;
	cJSON_ArrayForEach(e, j) {
		if (json_int(e, &x))
			return cfg_error(c, key, "must be a list of layer numbers"), 0;
		if (x == v)
			return 1;
	}
	return 0;
}

int
cfg_is_list(Cfg *c, const char *key)
{
	return cJSON_IsArray(item(c, key));
}

/* Element i of a per-layer list, or NULL after an error. */
static const cJSON *
list_at(Cfg *c, const char *key, int64_t i)
{
	const cJSON *j = item(c, key);

	if (!cJSON_IsArray(j))
		return cfg_error(c, key, "must be a list with one entry per layer"), NULL;
	if (i >= cJSON_GetArraySize(j))
		return cfg_error(c, key, "has %d entries: none for layer %lld",
				 cJSON_GetArraySize(j), (long long)i), NULL;
	return cJSON_GetArrayItem(j, (int)i);
}

int
cfg_list_str(Cfg *c, const char *key, int64_t i, const char *yes, const char *no)
{
	const cJSON *e = list_at(c, key, i);

	if (!e)
		return 0;
	if (cJSON_IsString(e) && strcmp(e->valuestring, yes) == 0)
		return 1;
	if (cJSON_IsString(e) && strcmp(e->valuestring, no) == 0)
		return 0;
	return cfg_error(c, key, "entry %lld must be \"%s\" or \"%s\"", (long long)i, yes, no), 0;
}

int64_t
cfg_list_int(Cfg *c, const char *key, int64_t i)
{
	const cJSON *e = list_at(c, key, i);
	int64_t v;

	if (!e)
		return -1;
	if (json_int(e, &v) || v < 0)
		return cfg_error(c, key, "entry %lld must be a non-negative integer", (long long)i), -1;
	return v;
}

/*
 * dtype (transformers 5) or torch_dtype (4.x).  Absent (gpt2, bert and
 * gpt-oss hub configs), it is "auto" as transformers 5 loads it: the
 * checkpoint's dtype (see auto_dtype), or with synthetic weights bf16 for a
 * quantized model (what transformers dequantizes to) and f32 otherwise.
 */
static DType
model_dtype(Cfg *c, int *autodt)
{
	static const struct { const char *name; DType dt; } names[] = {
		{"bfloat16", DT_BF16}, {"float16", DT_F16}, {"float32", DT_F32},
		{"bf16", DT_BF16}, {"fp16", DT_F16}, {"fp32", DT_F32}, {"half", DT_F16},
		{"float", DT_F32},
	};
	const char *key = cfg_alias(c, (const char *const[]){"dtype", "torch_dtype", NULL});
	const char *s = cfg_str_or(c, key, "auto");

	*autodt = strcmp(s, "auto") == 0;
	if (*autodt)
		return cfg_has(c, "quantization_config") ? DT_BF16 : DT_F32;
	for (size_t i = 0; i < NELEM(names); i++)
		if (strcmp(names[i].name, s) == 0)
			return names[i].dt;
	cfg_error(c, key, "'%s' is not a dtype moec builds (bfloat16, float16, float32)", s);
	return DT_F32;
}

/* The float dtype most of the checkpoint's tensors have. */
static DType
auto_dtype(const StFile *st, DType def)
{
	static const DType cand[] = {DT_BF16, DT_F16, DT_F32};
	int64_t count[NELEM(cand)] = {0}, best = 0;

	for (int i = 0; i < st_count(st); i++)
		for (size_t j = 0; j < NELEM(cand); j++)
			count[j] += st_get(st, i)->dt == cand[j];
	for (size_t j = 0; j < NELEM(cand); j++)
		if (count[j] > best)
			best = count[j], def = cand[j];
	return def;
}

/* The default weights: model.safetensors or the index next to config.json. */
static int
open_weights(Cfg *c)
{
	char *dir = file_dirname(c->path), *p = NULL;
	const StRule *hub;
	const char *root;

	if (c->o->weights) {
		p = xstrdup(c->o->weights);
	} else {
		p = file_join(dir, "model.safetensors");
		if (!file_exists(p)) {
			free(p);
			p = file_join(dir, "model.safetensors.index.json");
		}
		if (!file_exists(p)) {
			free(p);
			p = NULL;
		}
	}
	free(dir);
	if (!p)
		return diag_error(c->d, loc_file(c->path), "no model.safetensors or "
				  "model.safetensors.index.json next to the config: give "
				  "--weights PATH or --synthetic-weights=SEED");
	c->stpath = ir_intern(c->m, p);
	c->st = st_open(p, c->d);
	free(p);
	if (c->st && (hub = cfg_family_hub_names(c->type, &root)) && st_rename(c->st, root, hub, c->d))
		return -1;
	return c->st ? 0 : -1;
}

/* As transformers reads it: Python's json, so a repeated key's last value. */
static cJSON *
parse_json(const char *path, Diag *d)
{
	size_t len;
	char *text = file_read_max(path, CFG_MAX_FILE, &len, d);
	cJSON *j;

	if (!text)
		return NULL;
	j = fe_json_parse(path, text, len, FE_JSON_LAST_WINS, d);
	if (j && !cJSON_IsObject(j)) {
		diag_error(d, loc_file(path), "not a JSON object");
		cJSON_Delete(j);
		j = NULL;
	}
	free(text);
	return j;
}

/* The layer: given, or the family's default (first MoE layer; 0 if dense). */
static int
pick_layer(Cfg *c)
{
	const char *key = cfg_alias(c, (const char *const[]){"num_hidden_layers", "n_layer",
							     "n_layers", NULL});
	int64_t n = !cfg_has(c, key) && cfg_family_num_layers(c) >= 0 ? cfg_family_num_layers(c)
								      : cfg_int(c, key);

	if (n > CFG_MAX_LAYERS)	/* the default layer is searched for layer by layer */
		return cfg_error(c, key, "%lld layers: moec reads models of at most %d",
				 (long long)n, CFG_MAX_LAYERS);
	c->layer = c->o->layer >= 0 ? c->o->layer : cfg_family_default_layer(c, n);
	if (c->layer >= n)
		return cfg_error(c, key, "layer %d is out of range: the model has %lld layers",
				 c->layer, (long long)n);
	return 0;
}

Value *
cfg_input(Cfg *c, const char *name, int64_t width)
{
	Type t = c->g->param[0]->type;

	t.dim[1] = width;
	return ir_add_param(c->g, name, t);
}

static Value *
frame(Cfg *c, FamilyFn *fn)
{
	char name[128];
	Dim dim[2];
	Value *x, *y;
	const char *hkey = cfg_alias(c, (const char *const[]){"hidden_size", "n_embd", "d_model",
							      NULL});

	c->hidden = cfg_int(c, hkey);	/* on error, go on: fn reports its keys too */
	snprintf(name, sizeof name, "%s_layer%d", c->type, c->layer);
	c->g = ir_new_graph(c->m, name, G_GRAPH);
	c->b = (Builder){.g = c->g, .d = c->d, .loc = loc_file(c->path)};
	dim[0] = ir_dim_sym(c->m, "T");
	dim[1] = c->hidden;
	x = ir_add_param(c->g, "x", ir_type(c->dt, 2, dim));
	y = fn(c, x);
	if (!y || c->err || c->b.err)
		return NULL;
	ir_set_results(c->g, &y, (const char *[]){"y"}, 1);
	return y;
}

/*
 * Before reading any weights, build the block once with synthetic weights
 * in a scratch module: every bad key is then reported as a config error,
 * not hidden behind a missing file or a tensor mismatch.
 */
static void
validate(Cfg *c, FamilyFn *fn)
{
	Cfg v = *c;

	v.m = ir_new_module();
	v.m->file = c->path;
	frame(&v, fn);
	c->err |= v.err | v.b.err;
	ir_free_module(v.m);
}

static void
unknown_type(Cfg *c)
{
	const char *why, *near = cfg_family_hint(c, &why), *no = cfg_family_refusal(c->type);

	if (no)
		cfg_error(c, "model_type", "model_type '%s' is not built: %s", c->type, no);
	else if (near)
		cfg_error(c, "model_type", "unknown model_type '%s'; the nearest family moec "
			  "builds is %s (from %s); moec builds %s", c->type, near, why,
			  cfg_family_list());
	else
		cfg_error(c, "model_type", "unknown model_type '%s' (moec builds %s)", c->type,
			  cfg_family_list());
}

/*
 * Multimodal wrappers hold the text model in text_config (Qwen3-Omni: in
 * thinker_config.text_config): its keys are read there and its model_type
 * (else the wrapper's default text type) names the family.  The wrapper's
 * dtype and quantization_config apply where the text model has none.  A
 * nest of alternatives ("a|b") takes the first the config has (the original
 * Unlimited-OCR config's language_config); an empty one is the top level
 * itself (dots3_note's published config holds the text model's keys there).
 */
static void
unwrap(Cfg *c)
{
	static const struct {
		const char *type, *text, *nest;
	} wrappers[] = {
		{"llama4", "llama4_text", "text_config"},
		{"qwen3_5_moe", "qwen3_5_moe_text", "text_config"},
		{"gemma4", "gemma4_text", "text_config"}, {"mistral3", "mistral", "text_config"},
		{"kimi_k25", "deepseek_v3", "text_config"}, {"step3p7", "step3p5", "text_config"},
		{"qwen3_vl_moe", "qwen3_vl_moe_text", "text_config"},
		{"glm4v_moe", "glm4v_moe_text", "text_config"},
		{"mistral_large4", "mistral_large4_text", "text_config"},
		{"nemotron_h_omni", "nemotron_h", "text_config"},
		{"qwen3_5", "qwen3_5_text", "text_config"},
		{"aria", "aria_text", "text_config"},
		{"minimax_m3_vl", "minimax_m3_vl_text", "text_config"},
		{"dots3_note", "dots3_note_text", "text_config|"},
		{"unlimited_ocr", "unlimited_ocr_text", "text_config|language_config"},
		{"deepseek_ocr2", "deepseek_ocr2_text", "text_config"},
		{"nemo_speechlm", "nemotron_h", "text_config"},
		{"qwen3_omni_moe", "qwen3_omni_moe_text", "thinker_config.text_config"},
		{"qwen3_omni_moe_thinker", "qwen3_omni_moe_text", "text_config"},
		{"diffusion_gemma", "diffusion_gemma_text", "text_config"},
		{"idefics3", "llama", "text_config"}, {"smolvlm", "llama", "text_config"},
		{"lighton_ocr", "qwen3", "text_config"},
		{"gemma3", "gemma3_text", "text_config"},
		{"gemma4_unified", "gemma4_unified_text", "text_config"},
	};
	static const char *const inherited[] = {"dtype", "torch_dtype", "quantization_config"};
	cJSON *t = c->json, *above;
	const char *nest, *alt, *bar;
	char part[64];
	size_t i;

	for (i = 0; i < NELEM(wrappers) && strcmp(wrappers[i].type, c->type); i++)
		;
	if (i == NELEM(wrappers))
		return;
	for (alt = wrappers[i].nest;; alt = bar + 1) {	/* the first alternative present */
		bar = strchr(alt, '|') ? strchr(alt, '|') : alt + strlen(alt);
		snprintf(part, sizeof part, "%.*s", (int)strcspn(alt, ".|"), alt);
		if (bar == alt) {	/* the top level */
			c->type = wrappers[i].text;
			return;
		}
		if (cJSON_GetObjectItemCaseSensitive(c->json, part))
			break;
		if (!*bar) {	/* none: the error names the first */
			alt = wrappers[i].nest;
			bar = alt + strcspn(alt, "|");
			break;
		}
	}
	nest = arena_strndup(c->m->arena, alt, (size_t)(bar - alt));
	for (const char *p = nest, *dot; t && *p; p = *dot ? dot + 1 : dot) {
		dot = strchr(p, '.') ? strchr(p, '.') : p + strlen(p);
		snprintf(part, sizeof part, "%.*s", (int)(dot - p), p);
		above = t;
		t = cJSON_GetObjectItemCaseSensitive(t, part);
		if (!cJSON_IsObject(t)) {
			cfg_error(c, nest, "%s holds its text model in %s, and it is %s",
				  c->type, nest, t ? "not an object" : "missing");
			return;
		}
		for (size_t k = 0; k < NELEM(inherited); k++)	/* from the level above */
			if (!cJSON_GetObjectItemCaseSensitive(t, inherited[k]) &&
			    cJSON_GetObjectItemCaseSensitive(above, inherited[k]))
				cJSON_AddItemReferenceToObject(t, inherited[k],
							       cJSON_GetObjectItemCaseSensitive(
								       above, inherited[k]));
	}
	c->outer = c->json;
	c->nest = nest;
	c->json = t;
	c->type = cfg_str_or(c, "model_type", wrappers[i].text);
}

/* dbrx keeps its FFN keys in ffn_config: they are read as top-level keys. */
static void
flatten(Cfg *c, const char *key)
{
	cJSON *o = cJSON_GetObjectItemCaseSensitive(c->json, key), *e;

	if (!o)
		return;
	if (!cJSON_IsObject(o)) {
		cfg_error(c, key, "must be an object");
		return;
	}
	for (e = o->child; e; e = e->next)
		if (e->string && !cJSON_GetObjectItemCaseSensitive(c->json, e->string))
			cJSON_AddItemReferenceToObject(c->json, e->string, e);
}

int64_t
cfg_num_layers(const char *path, Diag *d)
{
	FeOpts o;
	Cfg c = {.o = &o, .d = d};
	int64_t n = -1;

	fe_default_opts(&o);
	if (!(c.json = parse_json(path, d)))
		return -1;
	c.m = ir_new_module();
	c.path = c.m->file = ir_intern(c.m, path);
	c.type = cfg_str_or(&c, "model_type", NULL);
	if (c.type)
		unwrap(&c);
	if (c.type && strcmp(c.type, "dbrx") == 0)
		flatten(&c, "ffn_config");
	if (!c.err) {
		const char *key = cfg_alias(&c, (const char *const[]){"num_hidden_layers", "n_layer",
								      "n_layers", NULL});
		n = cfg_int(&c, key);
		if (!c.err && n > CFG_MAX_LAYERS)
			cfg_error(&c, key, "%lld layers: moec reads models of at most %d",
				  (long long)n, CFG_MAX_LAYERS);
	}
	cJSON_Delete(c.outer ? c.outer : c.json);
	ir_free_module(c.m);
	return c.err ? -1 : n;
}

Module *
cfg_import(const char *path, const FeOpts *o, Diag *d)
{
	Cfg c = {.o = o, .d = d};
	FamilyFn *fn = NULL;
	int nerr = d->nerror, autodt = 0;

	if (!(c.json = parse_json(path, d)))
		return NULL;
	c.m = ir_new_module();
	c.path = c.m->file = ir_intern(c.m, path);
	c.type = cfg_str_or(&c, "model_type", NULL);
	if (c.type)
		unwrap(&c);
	if (c.type && strcmp(c.type, "dbrx") == 0)
		flatten(&c, "ffn_config");
	if (!c.type)
		cfg_error(&c, "model_type", "missing key");
	else if (!c.err && !(fn = cfg_family(c.type)))
		unknown_type(&c);
	if (fn) {
		c.dt = model_dtype(&c, &autodt);
		pick_layer(&c);
		cfg_quant_config(&c);
	}
	if (!c.err && !o->synthetic)
		validate(&c, fn);
	if (!c.err && !o->synthetic && open_weights(&c))
		c.err = 1;
	if (!c.err && c.st && autodt)
		c.dt = auto_dtype(c.st, c.dt);
	if (!c.err)
		frame(&c, fn);
	st_close(c.st);
	cJSON_Delete(c.outer ? c.outer : c.json);
	if (c.err || c.b.err || d->nerror > nerr) {
		ir_free_module(c.m);
		return NULL;
	}
	return c.m;
}
