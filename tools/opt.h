/*
 * opt.h — the one command-line parser of moec and moert.
 *
 * Each tool lists its subcommands and its options in two tables; an option
 * names the subcommands that take it.  The parser reads `--name value`,
 * `--name=value`, `-x value` and `-xvalue`, checks each value against its
 * kind (an integer in a range, one of a few words), and from the same tables
 * prints `-h/--help` (every option with its default), the errors (which name
 * the option and the bad value) and the Markdown of docs/cli.md.  Adding an
 * option is one table line, plus the code that reads it with opt_str/opt_int.
 */
#ifndef MOEC_OPT_H
#define MOEC_OPT_H

#include "util.h"

typedef enum { OPT_FLAG, OPT_INT, OPT_STR } OptKind;

typedef struct Opt Opt;
struct Opt {
	const char *name;	/* long name without the dashes: "max-tokens" */
	char shrt;		/* one-letter form ('o' for -o), or 0 */
	OptKind kind;
	const char *meta;	/* the value in help: N, FILE, LIST */
	const char *def;	/* the default (what opt_str/opt_int return when absent); NULL: none */
	const char *help;	/* one line */
	unsigned cmds;		/* bit i: subcommand i takes it */
	int64_t lo, hi;		/* OPT_INT: the accepted range */
	const char *choices;	/* OPT_STR: "ir|llvm|ptx|dot"; NULL: any value */
};

typedef struct OptCmd OptCmd;
struct OptCmd {
	const char *name;
	const char *args;	/* the positional arguments in the synopsis: "MODEL" */
	int minpos, maxpos;	/* how many positional arguments */
	const char *summary;	/* one line for the command list */
	const char *about;	/* a paragraph for its help; NULL: the summary */
};

typedef struct OptTool OptTool;
struct OptTool {
	const char *name;	/* "moec" */
	const char *about;	/* one line */
	const OptCmd *cmd;
	int ncmd;
	const Opt *opt;
	int nopt;
};

enum { OPT_MAXPOS = 64, OPT_MAXVAL = 256 };

/* One parsed command line. */
typedef struct OptArgs OptArgs;
struct OptArgs {
	const OptTool *tool;
	int cmd;		/* index into tool->cmd */
	const char *pos[OPT_MAXPOS];
	int npos;
	struct {
		const Opt *opt;
		const char *val;	/* "" for a flag */
	} val[OPT_MAXVAL];
	int nval;
};

enum { OPT_OK = 0, OPT_HELP = 1, OPT_ERROR = 2 };

/*
 * Parse the arguments of subcommand `cmd` (argv[0] is its name).  OPT_OK;
 * OPT_HELP after printing the help or the version (exit 0); OPT_ERROR after
 * printing "TOOL CMD: error: ..." (exit 2).
 */
int opt_parse(const OptTool *t, int cmd, int argc, char **argv, OptArgs *a);
int opt_find_cmd(const OptTool *t, const char *name);	/* -1 if none */

/* The last value given, else the table's default, else NULL (also when the
 * subcommand has no such option). */
const char *opt_str(const OptArgs *a, const char *name);
/* As opt_str, for OPT_INT: 1 with *v set, 0 if neither given nor defaulted. */
int opt_int(const OptArgs *a, const char *name, int64_t *v);
int opt_has(const OptArgs *a, const char *name);	/* given at least once */
int opt_takes(const OptArgs *a, const char *name);	/* the subcommand has the option */
/* Every value of a repeated option in order: *k starts at 0; NULL at the end. */
const char *opt_next(const OptArgs *a, const char *name, int *k);
/* A value the table could not check (a list, NAME=FILE): the error, exit 2. */
int opt_bad(const OptArgs *a, const char *name, const char *val, const char *why);
/* Any other usage error of the command line: "TOOL CMD: error: ...", exit 2. */
int opt_error(const OptArgs *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void opt_help(FILE *f, const OptTool *t, int cmd);	/* one subcommand's help */
void opt_tool_help(FILE *f, const OptTool *t);	/* the command list */
void opt_markdown(FILE *f, const OptTool *t);	/* docs/cli.md's part for this tool */

/*
 * `TOOL help [CMD] [--markdown]`, `TOOL --help`, `TOOL --version` and the
 * dispatch of a subcommand: returns the exit code, or -1 with *cmd set when
 * argv[1] is a subcommand for the caller to parse and run.
 */
int opt_main(const OptTool *t, int argc, char **argv, int *cmd);

#endif
