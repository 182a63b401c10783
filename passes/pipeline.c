/*
 * pipeline.c — the pass registry and the pass manager.  The whole compiler
 * middle is the one string below; `moec opt --passes=...` runs any list.
 *
 * For each pass: dump before (if asked), run, verify (if asked), compare the
 * interpreter's outputs with the first run (--check-eval), dump after.  Dump
 * banners are IR comments, so a dump can be cut out and fed back in.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "passes.h"

static const char default_pipeline[] =
	"fold,canon,cse,dce,fuse-moe,dce,fp8-regroup,lower-moe,fuse-norm,split-f32,flatten-tokens,bound-dyn,fold,canon,cse,dce,"
	"fuse-gemm,fuse-dequant,fuse-act-quant,lower-sort,fuse-ew,dce";

typedef struct {
	const char *name, *help;
	int (*fn)(Module *, PassCtx *);
} Pass;

static const Pass passes[] = {
#define PASS(fn, name, help) {name, help, fn},
#include "passes.def"
#undef PASS
};

/* Passes a test program adds (pass_register_test): never in moec. */
static Pass test_passes[4];
static int ntest_passes;

void
pass_default_opts(PassOpts *o)
{
	memset(o, 0, sizeof *o);
	o->check_seed = 1;
}

const char *
pass_default_pipeline(void)
{
	return default_pipeline;
}

void
pass_list(FILE *f)
{
	fprintf(f, "default pipeline: %s\n", default_pipeline);
	for (size_t i = 0; i < NELEM(passes); i++)
		fprintf(f, "  %-16s %s\n", passes[i].name, passes[i].help);
}

static const Pass *
find(const char *name, size_t n)
{
	for (size_t i = 0; i < NELEM(passes); i++)
		if (strlen(passes[i].name) == n && strncmp(passes[i].name, name, n) == 0)
			return &passes[i];
	for (int i = 0; i < ntest_passes; i++)
		if (strlen(test_passes[i].name) == n && strncmp(test_passes[i].name, name, n) == 0)
			return &test_passes[i];
	return NULL;
}

int
pass_register_test(const char *name, const char *help, int (*fn)(Module *, PassCtx *))
{
	if (find(name, strlen(name)))
		return 0;
	if (ntest_passes == (int)NELEM(test_passes))
		return -1;
	test_passes[ntest_passes++] = (Pass){name, help, fn};
	return 0;
}

/* Is `name` in the comma list `list` ("all" matches everything)? */
static int
listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	if (!list)
		return 0;
	if (strcmp(list, "all") == 0)
		return 1;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t k = e ? (size_t)(e - p) : strlen(p);
		if (k == n && strncmp(p, name, n) == 0)
			return 1;
		p += k + (e ? 1 : 0);
	}
	return 0;
}

static void
dump(const PassOpts *o, Module *m, const char *when, const char *name)
{
	FILE *f = o->dump ? o->dump : stderr;

	fprintf(f, "# *** IR Dump %s %s ***\n", when, name);
	ir_print(f, m, o->print_flags);
	fflush(f);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Split a comma list into passes, reporting every unknown name (what: the
 * flag it came from, for the dump lists; NULL for the pipeline). */
static int
resolve(const char *what, const char *pipeline, const Pass **list, int max, Diag *d)
{
	int n = 0, bad = 0;

	for (const char *p = pipeline; *p;) {
		const char *e = strchr(p, ',');
		size_t k = e ? (size_t)(e - p) : strlen(p);
		const Pass *ps = find(p, k);

		if (k && !ps)
			bad = diag_error(d, LOC_NONE, "%s%sunknown pass '%.*s' (see --list-passes)",
					 what ? what : "", what ? ": " : "", (int)k, p);
		else if (k && n < max)
			list[n++] = ps;
		p += k + (e ? 1 : 0);
	}
	return bad ? -1 : n;
}

static int
run_one(Module *m, const Pass *ps, const PassOpts *o, PassCtx *c, CheckRun *chk,
	double *secs)
{
	char why[512];
	double t0;
	int rc;

	if (listed(o->print_before, ps->name))
		dump(o, m, "Before", ps->name);
	t0 = now();
	rc = ps->fn(m, c);
	*secs += now() - t0;
	if (rc < 0)
		return -1;
	if (o->verify_each && ir_verify(m, c->d) != 0) {
		dump(o, m, "After", ps->name);
		fprintf(o->dump ? o->dump : stderr, "# *** IR Dump After %s Failed ***\n", ps->name);
		diag_error(c->d, LOC_NONE, "the IR is invalid after pass '%s'", ps->name);
		return 1;
	}
	if (listed(o->print_after, ps->name) && (!o->print_after_change || rc == 1))
		dump(o, m, "After", ps->name);
	else if (o->print_after_change && !o->print_after && rc == 1)
		dump(o, m, "After", ps->name);
	if (chk) {
		int k = check_eval(chk, m, why, sizeof why, c->d);
		if (k != 0) {
			diag_error(c->d, LOC_NONE, "--check-eval: pass '%s' changed the result: %s",
				   ps->name, why);
			return k < 0 ? -1 : 1;
		}
	}
	return 0;
}

int
pass_run(Module *m, const PassOpts *o, PassCtx *c)
{
	const Pass *list[256];
	double secs[256] = {0}, total = 0;
	const char *pipe = o->pipeline ? o->pipeline : default_pipeline;
	CheckRun *chk = NULL;
	char why[512];
	const Pass *named[256];
	int n = resolve(NULL, pipe, list, (int)NELEM(list), c->d), rc = 0;

	/* a dump list naming no pass would silently print nothing */
	if ((o->print_before && strcmp(o->print_before, "all") &&
	     resolve("--print-ir-before", o->print_before, named, (int)NELEM(named), c->d) < 0) ||
	    (o->print_after && strcmp(o->print_after, "all") &&
	     resolve("--print-ir-after", o->print_after, named, (int)NELEM(named), c->d) < 0))
		n = -1;
	if (n < 0)
		return -1;
	c->debug = o->debug;
	c->fp8_mma = o->fp8_mma;
	c->max_tokens = o->max_tokens;
	if (o->check_eval) {
		chk = check_new(m, o, c->d);
		if (!chk || check_eval(chk, m, why, sizeof why, c->d) != 0) {
			check_free(chk);
			return -1;
		}
	}
	for (int i = 0; i < n && rc == 0; i++)
		rc = run_one(m, list[i], o, c, chk, &secs[i]);
	check_free(chk);
	if (o->time_passes) {
		FILE *f = stderr;
		for (int i = 0; i < n; i++)
			total += secs[i];
		fprintf(f, "# pass times\n");
		for (int i = 0; i < n; i++)
			fprintf(f, "#  %9.3f ms  %5.1f%%  %s\n", 1e3 * secs[i],
				total > 0 ? 100 * secs[i] / total : 0, list[i]->name);
		fprintf(f, "#  %9.3f ms  total\n", 1e3 * total);
	}
	return rc;
}
