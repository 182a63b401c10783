/* config.c — placeholder until the config importer lands. */
#include "frontend.h"

Module *
cfg_import(const char *path, const FeOpts *o, Diag *d)
{
	diag_error(d, loc_file(path), "config import is not built yet");
	return NULL;
}
