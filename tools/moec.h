/*
 * moec.h — what the driver's subcommands share: options, loading a model,
 * running the pipeline.  One file per subcommand group in tools/.
 */
#ifndef MOEC_TOOLS_H
#define MOEC_TOOLS_H

#include "frontend.h"
#include "passes.h"

typedef struct {
	FeOpts fe;
	PassOpts pass;
} MoecOpts;

void moec_default_opts(MoecOpts *o);
int moec_common_flag(int argc, char **argv, int *i, MoecOpts *o);
Module *moec_load(const char *path, const MoecOpts *o, Diag *d);
int moec_passes(Module *m, const MoecOpts *o, Report *rep, Diag *d);

/* test.c */
int moec_cmd_test(int argc, char **argv);

/* compile.c, inspect.c, dot.c */
int moec_cmd_compile(int argc, char **argv);
int moec_cmd_inspect(int argc, char **argv);
int moec_write_dot(FILE *f, const Module *m);

#endif
