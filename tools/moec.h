/*
 * moec.h — what the driver's subcommands share: options, loading a model,
 * running the pipeline.  One file per subcommand group in tools/.
 */
#ifndef MOEC_TOOLS_H
#define MOEC_TOOLS_H

#include "frontend.h"
#include "passes.h"
#include "opt.h"

typedef struct {
	FeOpts fe;
	PassOpts pass;
	int level;		/* the Diag's level: -1 with -q, 1 with -v */
	EpOpts ep;		/* --ep=N (ranks 0: none); ep.rank set per module */
	DbgFlags debug;		/* DBG_* (util.h): --debug=LIST, and their former variables */
} MoecOpts;

/* Parse subcommand cmd's arguments (opt.h) into a and o, and set up d
 * (-q, -v): -1 to go on, else the exit code (0 after --help). */
int moec_args(const char *cmd, int argc, char **argv, OptArgs *a, MoecOpts *o, Diag *d);
/* -o checked before any work: its folder writable, not an input file. */
int moec_check_output(const OptArgs *a, const char *out, const char *model, Diag *d);
double moec_now(void);	/* seconds, monotonic */
Module *moec_load(const char *path, const MoecOpts *o, Diag *d);
int moec_passes(Module *m, const MoecOpts *o, Report *rep, Diag *d);

/* ep.c: --ep=N, one module per rank (docs/passes.md, partition-ep) */
int moec_ep_apply(const OptArgs *a, MoecOpts *o);	/* OK or BAD */
char *moec_ep_path(const char *out, int rank);	/* OUT.x -> OUT.epR.x, malloc'd */
int moec_ep_modules(const char *model, MoecOpts *o, Module **m, Report *rep, Diag *d);
int moec_ep_eval(Module *const *m, int nrank, const Tensor *in, int nin, Tensor *out,
		 const EvalOpts *eo, Diag *d);

/* test.c */
int moec_cmd_test(int argc, char **argv);

/* compile.c, inspect.c, dot.c */
int moec_cmd_compile(int argc, char **argv);
int moec_cmd_inspect(int argc, char **argv);
int moec_write_dot(FILE *f, const Module *m);

#endif
