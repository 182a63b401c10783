/*
 * frontend.c — picks the importer for a path: a .onnx file, a config.json,
 * or a folder holding model.onnx or config.json.
 */
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

void
fe_default_opts(FeOpts *o)
{
	memset(o, 0, sizeof *o);
	o->layer = -1;
}

static int
ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

int64_t
fe_num_layers(const char *path, Diag *d)
{
	int dir = file_is_dir(path);
	char *cfg = dir ? file_join(path, "config.json") : xstrdup(path);
	char *onnx = dir ? file_join(path, "model.onnx") : NULL;
	int64_t n = 0;

	if (ends_with(cfg, ".json") && (!dir || (file_exists(cfg) && !file_exists(onnx))))
		n = cfg_num_layers(cfg, d);
	free(cfg);
	free(onnx);
	return n;
}

Module *
fe_load(const char *path, const FeOpts *o, Diag *d)
{
	Module *m = NULL;

	if (file_is_dir(path)) {
		char *onnx = file_join(path, "model.onnx"), *cfg = file_join(path, "config.json");
		if (file_exists(onnx))
			m = onnx_import(onnx, o, d);
		else if (file_exists(cfg))
			m = cfg_import(cfg, o, d);
		else
			diag_error(d, loc_file(path), "folder holds neither model.onnx nor config.json");
		free(onnx);
		free(cfg);
		return m;
	}
	if (ends_with(path, ".json"))
		return cfg_import(path, o, d);
	if (ends_with(path, ".onnx"))
		return onnx_import(path, o, d);
	diag_error(d, loc_file(path), "not a model: expected a .onnx file, a config.json or a folder");
	return NULL;
}
