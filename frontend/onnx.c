/* onnx.c — placeholder until the ONNX importer lands. */
#include "frontend.h"

Module *
onnx_import(const char *path, const FeOpts *o, Diag *d)
{
	diag_error(d, loc_file(path), "ONNX import is not built yet");
	return NULL;
}
