/*
 * opt.c — the command-line parser of moec and moert, and the help, errors
 * and docs/cli.md it prints from the tools' option tables (opt.h).
 *
 *	moec compile m.onnx --max-tokens 0
 *	moec compile: error: --max-tokens: '0' is not an integer in 1..2147483647
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "opt.h"

static int
takes(const Opt *o, int cmd)
{
	return (o->cmds >> cmd) & 1;
}

static const Opt *
find_long(const OptTool *t, int cmd, const char *name, size_t n)
{
	for (int i = 0; i < t->nopt; i++)
		if (takes(&t->opt[i], cmd) && strlen(t->opt[i].name) == n &&
		    strncmp(t->opt[i].name, name, n) == 0)
			return &t->opt[i];
	return NULL;
}

static const Opt *
find_short(const OptTool *t, int cmd, char c)
{
	for (int i = 0; i < t->nopt; i++)
		if (takes(&t->opt[i], cmd) && t->opt[i].shrt == c)
			return &t->opt[i];
	return NULL;
}

int
opt_find_cmd(const OptTool *t, const char *name)
{
	for (int i = 0; i < t->ncmd; i++)
		if (strcmp(t->cmd[i].name, name) == 0)
			return i;
	return -1;
}

static int
verror(const OptTool *t, int cmd, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s%s%s: error: ", t->name, cmd >= 0 ? " " : "",
		cmd >= 0 ? t->cmd[cmd].name : "");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	return OPT_ERROR;
}

static int
fail(const OptTool *t, int cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
fail(const OptTool *t, int cmd, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = verror(t, cmd, fmt, ap);
	va_end(ap);
	return rc;
}

int
opt_error(const OptArgs *a, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = verror(a->tool, a->cmd, fmt, ap);
	va_end(ap);
	return rc;
}

int
opt_bad(const OptArgs *a, const char *name, const char *val, const char *why)
{
	return opt_error(a, "--%s: '%s' %s", name, val, why);
}

/* An option of another subcommand, or none at all. */
static int
unknown(const OptTool *t, int cmd, const char *arg, size_t n)
{
	for (int i = 0; i < t->nopt; i++) {
		const Opt *o = &t->opt[i];
		int lng = arg[1] == '-' && strlen(o->name) == n - 2 &&
			  strncmp(o->name, arg + 2, n - 2) == 0;
		if (lng || (arg[1] != '-' && n == 2 && o->shrt == arg[1])) {
			for (int c = 0; c < t->ncmd; c++)
				if (takes(o, c))
					return fail(t, cmd, "'%.*s' is an option of '%s %s', not of '%s %s'",
						    (int)n, arg, t->name, t->cmd[c].name, t->name,
						    t->cmd[cmd].name);
		}
	}
	return fail(t, cmd, "unknown option '%.*s' (%s %s --help lists the options)", (int)n, arg,
		    t->name, t->cmd[cmd].name);
}

static int
one_of(const char *choices, const char *v)
{
	size_t n = strlen(v);

	for (const char *p = choices; p;) {
		const char *bar = strchr(p, '|');
		size_t k = bar ? (size_t)(bar - p) : strlen(p);
		if (k == n && strncmp(p, v, n) == 0)
			return 1;
		p = bar ? bar + 1 : NULL;
	}
	return 0;
}

static int
parse_int(const char *s, int64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 10);
	return *s && !*end && errno == 0 ? 0 : -1;
}

/* Check one value against its option's kind. */
static int
check(const OptTool *t, int cmd, const Opt *o, const char *v)
{
	int64_t n;

	if (o->kind == OPT_INT && (parse_int(v, &n) || n < o->lo || n > o->hi))
		return fail(t, cmd, "--%s: '%s' is not an integer in %lld..%lld", o->name, v,
			    (long long)o->lo, (long long)o->hi);
	if (o->kind == OPT_STR && o->choices && !one_of(o->choices, v))
		return fail(t, cmd, "--%s: '%s' is not one of %s", o->name, v, o->choices);
	return OPT_OK;
}

/* argv[*i] is an option: find it, take its value, check and keep it. */
static int
option(const OptTool *t, int cmd, int argc, char **argv, int *i, OptArgs *a)
{
	const char *s = argv[*i], *v = NULL;
	const Opt *o;
	size_t n;
	int rc;

	if (s[1] == '-') {
		const char *eq = strchr(s, '=');
		n = eq ? (size_t)(eq - s) : strlen(s);
		o = find_long(t, cmd, s + 2, n - 2);
		v = eq ? eq + 1 : NULL;
	} else {
		n = 2;
		o = find_short(t, cmd, s[1]);
		v = s[2] ? s + 2 + (s[2] == '=') : NULL;
		if (o && o->kind == OPT_FLAG && v)	/* -qv: not a bundle of flags */
			o = NULL, n = strlen(s);
	}
	if (!o)
		return unknown(t, cmd, s, n);
	if (o->kind == OPT_FLAG && v)
		return fail(t, cmd, "--%s takes no value (got '%s')", o->name, v);
	if (o->kind != OPT_FLAG && !v) {
		if (*i + 1 >= argc)
			return fail(t, cmd, "--%s needs a value (%s)", o->name, o->meta);
		v = argv[++*i];
	}
	if ((rc = check(t, cmd, o, v ? v : "")))
		return rc;
	if (a->nval == OPT_MAXVAL)
		return fail(t, cmd, "more than %d options", OPT_MAXVAL);
	a->val[a->nval].opt = o;
	a->val[a->nval++].val = v ? v : "";
	return OPT_OK;
}

int
opt_parse(const OptTool *t, int cmd, int argc, char **argv, OptArgs *a)
{
	const OptCmd *c = &t->cmd[cmd];
	int dashdash = 0, rc;

	memset(a, 0, sizeof *a);
	a->tool = t;
	a->cmd = cmd;
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		if (!dashdash && strcmp(s, "--") == 0) {
			dashdash = 1;
		} else if (!dashdash && (!strcmp(s, "-h") || !strcmp(s, "--help"))) {
			opt_help(stdout, t, cmd);
			return OPT_HELP;
		} else if (!dashdash && !strcmp(s, "--version")) {
			printf("%s %s\n", t->name, MOEC_VERSION);
			return OPT_HELP;
		} else if (!dashdash && s[0] == '-' && s[1]) {
			if ((rc = option(t, cmd, argc, argv, &i, a)))
				return rc;
		} else if (a->npos == c->maxpos || a->npos == OPT_MAXPOS) {
			return fail(t, cmd, "unexpected argument '%s' (usage: %s %s%s%s)", s, t->name,
				    c->name, *c->args ? " " : "", c->args);
		} else {
			a->pos[a->npos++] = s;
		}
	}
	if (a->npos < c->minpos)
		return fail(t, cmd, "missing %s (usage: %s %s %s)", c->args, t->name, c->name,
			    c->args);
	return OPT_OK;
}

/* --- reading the values ------------------------------------------------------ */

/* The option as this subcommand takes it; NULL if it does not (a name no
 * subcommand takes is a slip in the tool's code). */
static const Opt *
lookup(const OptArgs *a, const char *name)
{
	const Opt *o = find_long(a->tool, a->cmd, name, strlen(name));

	for (int c = 0; !o && c < a->tool->ncmd; c++)
		if (find_long(a->tool, c, name, strlen(name)))
			return NULL;
	if (!o)
		die("%s has no option --%s", a->tool->name, name);
	return o;
}

int
opt_takes(const OptArgs *a, const char *name)
{
	return lookup(a, name) != NULL;
}

const char *
opt_next(const OptArgs *a, const char *name, int *k)
{
	const Opt *o = lookup(a, name);

	for (; o && *k < a->nval; ++*k)
		if (a->val[*k].opt == o)
			return a->val[(*k)++].val;
	return NULL;
}

const char *
opt_str(const OptArgs *a, const char *name)
{
	const char *v, *last = NULL;
	int k = 0;

	while ((v = opt_next(a, name, &k)))
		last = v;
	return last || !lookup(a, name) ? last : lookup(a, name)->def;
}

int
opt_int(const OptArgs *a, const char *name, int64_t *v)
{
	const char *s = opt_str(a, name);

	return s && parse_int(s, v) == 0;
}

int
opt_has(const OptArgs *a, const char *name)
{
	int k = 0;

	return opt_next(a, name, &k) != NULL;
}

/* --- help, and its Markdown for docs/cli.md ------------------------------------ */

/* "-o, --output=FILE" or "    --arch=LIST": the option as help shows it. */
static void
spelling(char *buf, size_t n, const Opt *o, int md)
{
	const char *tick = md ? "`" : "";
	int k = 0;

	if (o->shrt)
		k = snprintf(buf, n, "%s-%c%s, ", tick, o->shrt, tick);
	else if (!md)
		k = snprintf(buf, n, "    ");
	snprintf(buf + k, n - (size_t)k, "%s--%s%s%s%s", tick, o->name,
		 o->kind == OPT_FLAG ? "" : "=",
		 o->kind == OPT_FLAG ? "" : o->choices ? o->choices : o->meta, tick);
}

static void
help_line(FILE *f, const char *left, const char *text, const char *def)
{
	if (strlen(left) > 28)
		fprintf(f, "  %s\n  %-28s %s", left, "", text);
	else
		fprintf(f, "  %-28s %s", left, text);
	if (def)
		fprintf(f, " (default: %s)", *def ? def : "none");
	fputc('\n', f);
}

void
opt_help(FILE *f, const OptTool *t, int cmd)
{
	const OptCmd *c = &t->cmd[cmd];
	char left[128];

	fprintf(f, "usage: %s %s %s%s[options]\n\n%s\n\noptions:\n", t->name, c->name, c->args,
		*c->args ? " " : "", c->about ? c->about : c->summary);
	for (int i = 0; i < t->nopt; i++) {
		if (!takes(&t->opt[i], cmd))
			continue;
		spelling(left, sizeof left, &t->opt[i], 0);
		help_line(f, left, t->opt[i].help, t->opt[i].def);
	}
	help_line(f, "-h, --help", "print this help and exit", NULL);
	help_line(f, "    --version", "print the version and exit", NULL);
	fprintf(f, "\nexit codes: 0 ok, 1 a check or test failed, 2 bad usage or input\n");
}

void
opt_tool_help(FILE *f, const OptTool *t)
{
	fprintf(f, "%s %s — %s\n\nusage: %s COMMAND [ARGS]   (%s help COMMAND, or %s COMMAND --help, "
		   "for its options)\n\n",
		t->name, MOEC_VERSION, t->about, t->name, t->name, t->name);
	for (int i = 0; i < t->ncmd; i++)
		fprintf(f, "  %-8s %s\n", t->cmd[i].name, t->cmd[i].summary);
	fprintf(f, "\n%s --version prints the version.\n"
		   "exit codes: 0 ok, 1 a check or test failed, 2 bad usage or input\n", t->name);
}

/* Text in a Markdown table cell: '|' escaped. */
static void
cell(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', f);
		fputc(*s, f);
	}
}

void
opt_markdown(FILE *f, const OptTool *t)
{
	char left[128];

	fprintf(f, "## %s\n\n%s %s — %s.\n\n| command | what it does |\n|---|---|\n", t->name, t->name,
		MOEC_VERSION, t->about);
	for (int i = 0; i < t->ncmd; i++)
		fprintf(f, "| [`%s %s`](#%s-%s) | %s |\n", t->name, t->cmd[i].name, t->name,
			t->cmd[i].name, t->cmd[i].summary);
	for (int c = 0; c < t->ncmd; c++) {
		const OptCmd *cmd = &t->cmd[c];
		fprintf(f, "\n### %s %s\n\n```\n%s %s %s%s[options]\n```\n\n%s\n\n", t->name, cmd->name,
			t->name, cmd->name, cmd->args, *cmd->args ? " " : "",
			cmd->about ? cmd->about : cmd->summary);
		fprintf(f, "| option | default | meaning |\n|---|---|---|\n");
		for (int i = 0; i < t->nopt; i++) {
			const Opt *o = &t->opt[i];
			if (!takes(o, c))
				continue;
			spelling(left, sizeof left, o, 1);
			fprintf(f, "| %s | ", left);
			if (o->def) {
				fputc('`', f);
				cell(f, *o->def ? o->def : "none");
				fputc('`', f);
			}
			fputs(" | ", f);
			cell(f, o->help);
			fputs(" |\n", f);
		}
		fprintf(f, "| `-h`, `--help` |  | print this help and exit |\n"
			   "| `--version` |  | print the version and exit |\n");
	}
}

int
opt_main(const OptTool *t, int argc, char **argv, int *cmd)
{
	const char *a = argc > 1 ? argv[1] : "";

	if (argc < 2) {
		opt_tool_help(stderr, t);
		return OPT_ERROR;
	}
	if (!strcmp(a, "-h") || !strcmp(a, "--help"))
		return opt_tool_help(stdout, t), 0;
	if (!strcmp(a, "--version"))
		return printf("%s %s\n", t->name, MOEC_VERSION), 0;
	if (!strcmp(a, "help")) {
		if (argc == 2)
			return opt_tool_help(stdout, t), 0;
		if (argc == 3 && !strcmp(argv[2], "--markdown"))
			return opt_markdown(stdout, t), 0;
		if (argc == 3 && (*cmd = opt_find_cmd(t, argv[2])) >= 0)
			return opt_help(stdout, t, *cmd), 0;
		return fail(t, -1, "help: no command '%s' (%s --help lists them)", argv[2], t->name);
	}
	if ((*cmd = opt_find_cmd(t, a)) >= 0)
		return -1;
	return fail(t, -1, "unknown command '%s' (%s --help lists the commands)", a, t->name);
}
