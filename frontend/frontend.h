/*
 * frontend.h — model importers: ONNX (onnx.c, protobuf-c) and Hugging Face
 * config.json + safetensors (config.c, safetensors.c).  Each turns a file
 * into an ir Module whose main graph is the model, or returns NULL after
 * reporting every problem it found (file, node or field named).
 */
#ifndef MOEC_FRONTEND_H
#define MOEC_FRONTEND_H

#include "ir.h"

typedef struct {
	int layer;		/* config: decoder layer N; -1: the default (first MoE layer) */
	const char *weights;	/* config: safetensors file or index; NULL: next to config */
	int synthetic;		/* config: build without reading weights */
	uint64_t seed;		/* with synthetic */
	int64_t max_bytes;	/* refuse tensors larger than this; 0: default */
	int64_t max_host_bytes;	/* tensor data held in memory at once; 0: mem_host_limit() */
	int64_t max_nodes;	/* ONNX: nodes after function expansion; 0: IR_MAX_NODES */
} FeOpts;

void fe_default_opts(FeOpts *o);

/* Any model: a .onnx file, a config.json, or a folder holding either. */
Module *fe_load(const char *path, const FeOpts *o, Diag *d);

/* The decoder layers of a config.json model (a file, or a folder holding
 * one and no model.onnx): n > 0; 0: not a config.json model; -1 with a
 * diagnostic. */
int64_t fe_num_layers(const char *path, Diag *d);

/* onnx.c */
Module *onnx_import(const char *path, const FeOpts *o, Diag *d);
Module *onnx_import_buffer(const char *path, const void *buf, size_t len,
			   const FeOpts *o, Diag *d);
/* With graph inputs bound to constants (by Tensor.name): shape tensors an
 * ahead-of-time compile must know (axes, split sizes).  They stop being
 * parameters. */
Module *onnx_import_bound(const char *path, const FeOpts *o, const Tensor *bind,
			  int nbind, Diag *d);
/* Whether op (domain "" or "com.microsoft") imports at that opset. */
int onnx_op_supported(const char *domain, const char *op, int opset);

/* config.c */
Module *cfg_import(const char *path, const FeOpts *o, Diag *d);
int64_t cfg_num_layers(const char *path, Diag *d);	/* -1 with a diagnostic */

/*
 * safetensors.c: a model.safetensors file, or a sharded checkpoint through
 * its model.safetensors.index.json (shards must lie in the index's folder).
 * st_open checks every header up front; st_read reads one tensor's bytes.
 */
typedef struct StFile StFile;
typedef struct {
	const char *name;
	const char *stored;	/* the name in the file when st_rename changed it, else NULL */
	DType dt;		/* NDTYPE: a dtype moec does not read (dtname says which) */
	const char *dtname;	/* as written: "BF16", "F8_E4M3", ... */
	int rank;
	int64_t dim[MAXRANK];
	uint64_t offset, size;	/* byte range in its shard's data */
	int shard;
} StTensor;
StFile *st_open(const char *path, Diag *d);	/* .safetensors or .index.json */
void st_close(StFile *f);
const StTensor *st_find(const StFile *f, const char *name);	/* NULL if absent */
int st_count(const StFile *f);
const StTensor *st_get(const StFile *f, int i);
const char *st_shard_path(const StFile *f, const StTensor *t);
const char *st_metadata(const StFile *f, const char *key);	/* __metadata__ */
/* Rename as transformers' conversion mappings do on load: in every name
 * that starts with `root`, each rule {from, to} in turn replaces the first
 * occurrence of `from` (the list ends with {NULL, NULL}).  -1 with a
 * diagnostic if two tensors end up with one name. */
typedef const char *const StRule[2];	/* {from, to} */
int st_rename(StFile *f, const char *root, const StRule *rule, Diag *d);
/* Read a tensor's bytes into buf (t->size bytes); -1 with a diagnostic. */
int st_read(StFile *f, const StTensor *t, void *buf, Diag *d);

/*
 * json.c: JSON checked as strictly as Python's json reads it (one value,
 * valid UTF-8, no NaN, no \u0000, ...; docs/limits.md), then parsed by
 * cJSON.  Duplicate keys: the last wins (Python) or they are refused.
 * NULL with a diagnostic at path:line:col.
 */
enum { FE_JSON_LAST_WINS, FE_JSON_NO_DUPS };
struct cJSON *fe_json_parse(const char *path, const char *text, size_t len, int mode, Diag *d);

#endif
