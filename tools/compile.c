/*
 * compile.c — `moec compile`: a model through the whole pipeline into a
 * bundle, with the fusion report and the intermediate forms on request.
 *
 *	model -> frontend -> passes (fusion) -> codegen (PTX per arch) -> .moeb
 *
 * `moec inspect` reads a bundle back: manifest, kernels, plan and sizes.
 */
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "codegen.h"
#include "moec.h"

enum { OK = 0, FAIL = 1, BAD = 2 };

static const char help[] =
	"MODEL -o OUT.moeb [--arch=sm_90a,sm_80] [--max-tokens=N] [--emit=ir|llvm|ptx|dot]\n"
	"       [--fusion-report] [--cubin] [-O0..3] [--precision=f32|bf16|f16] [import and opt flags]";

typedef struct {
	MoecOpts o;
	CgCompileOpts cg;
	const char *model, *out, *emit;
	int report;
	const char *arch;
} Args;

static int
split_arch(const char *s, CgCompileOpts *cg)
{
	static char buf[256];
	char *p, *save;

	snprintf(buf, sizeof buf, "%s", s);
	cg->narch = 0;
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (cg->narch == (int)NELEM(cg->arch))
			return -1;
		cg->arch[cg->narch++] = p;
	}
	return cg->narch ? 0 : -1;
}

static int
parse_args(int argc, char **argv, Args *a)
{
	moec_default_opts(&a->o);
	cg_compile_default(&a->cg);
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		int k = moec_common_flag(argc, argv, &i, &a->o);
		if (k < 0)
			return -1;
		if (k)
			continue;
		if (strcmp(s, "-o") == 0 && i + 1 < argc)
			a->out = argv[++i];
		else if (strncmp(s, "--arch=", 7) == 0) {
			if (split_arch(s + 7, &a->cg))
				return -1;
		} else if (strncmp(s, "--max-tokens=", 13) == 0) {
			char *end;
			a->cg.max_tokens = strtoll(s + 13, &end, 10);
			if (*end || a->cg.max_tokens < 1 || a->cg.max_tokens > INT32_MAX)
				return -1;
		} else if (strncmp(s, "--emit=", 7) == 0) {
			a->emit = s + 7;
			if (strcmp(a->emit, "ir") && strcmp(a->emit, "llvm") &&
			    strcmp(a->emit, "ptx") && strcmp(a->emit, "dot"))
				return -1;
		} else if (strcmp(s, "--fusion-report") == 0)
			a->report = 1;
		else if (strcmp(s, "--cubin") == 0)
			a->cg.cubin = 1;
		else if (strncmp(s, "--precision=", 12) == 0) {
			Diag d;
			diag_init(&d, stderr);
			if (cg_precision_parse(s + 12, &a->cg.precision, &d))
				return -1;
		}
		else if (strncmp(s, "-O", 2) == 0 && s[2] >= '0' && s[2] <= '3' && !s[3])
			a->cg.opt = s[2] - '0';
		else if (s[0] == '-' || a->model)
			return -1;
		else
			a->model = s;
	}
	return a->model ? 0 : -1;
}

static FILE *
output(const char *path, Diag *d)
{
	FILE *f = path && strcmp(path, "-") ? fopen(path, "w") : stdout;

	if (!f)
		diag_error(d, loc_file(path), "cannot create file");
	return f;
}

static int
finish(FILE *f)
{
	if (f == stdout)
		return fflush(f) ? BAD : OK;
	return fclose(f) ? BAD : OK;
}

/* --emit=ir|dot: the fused IR in one of its two pictures. */
static int
emit_ir(const Args *a, Module *m, Diag *d)
{
	FILE *f = output(a->out, d);

	if (!f)
		return BAD;
	if (strcmp(a->emit, "dot") == 0)
		moec_write_dot(f, m);
	else
		ir_print(f, m, a->o.pass.print_flags);
	return finish(f);
}

/* --emit=llvm|ptx and the bundle need codegen. */
static int
emit_code(const Args *a, Module *m, const char *report, Diag *d)
{
	CgProgram *p = cg_compile(m, &a->cg, d);
	int rc = BAD;

	if (!p)
		return BAD;
	if (a->emit) {
		FILE *f = output(a->out, d);
		if (f) {
			for (int i = 0; i < a->cg.narch; i++) {
				if (strcmp(a->emit, "ptx") == 0) {
					size_t n;
					const char *ptx = cg_program_ptx(p, i, &n);
					if (ptx)
						fwrite(ptx, 1, n, f);
				} else {
					char *ll = cg_program_llvm(p, i);
					if (ll)
						fputs(ll, f);
					free(ll);
				}
			}
			rc = finish(f);
		}
	} else if (!a->out) {
		diag_error(d, loc_file(a->model), "moec compile needs -o OUT.moeb (or --emit=...)");
	} else {
		rc = cg_program_bundle(p, report, a->out, d) == 0 ? OK : BAD;
	}
	cg_program_free(p);
	return rc;
}

static char *
report_text(const Report *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	report_print(f, r);
	fclose(f);
	return buf;
}

int
moec_cmd_compile(int argc, char **argv)
{
	Args a;
	Diag d;
	Module *m;
	Report *rep;
	char *text = NULL;
	int rc;

	memset(&a, 0, sizeof a);
	diag_init(&d, stderr);
	if (argc > 1 && strcmp(argv[1], "--help") == 0)
		return printf("usage: moec compile %s\n", help), OK;
	if (parse_args(argc, argv, &a) != 0) {
		fprintf(stderr, "usage: moec compile %s\n", help);
		return BAD;
	}
	if (!(m = moec_load(a.model, &a.o, &d)))
		return BAD;
	a.cg.model = a.model;
	rep = report_new();
	rc = moec_passes(m, &a.o, rep, &d);
	if (rc == OK) {
		text = report_text(rep);
		if (a.report)	/* stdout, unless the IR or code goes there */
			fputs(text, a.emit && !a.out ? stderr : stdout);
		if (a.emit && (!strcmp(a.emit, "ir") || !strcmp(a.emit, "dot")))
			rc = emit_ir(&a, m, &d);
		else if (a.emit || a.out)
			rc = emit_code(&a, m, text, &d);
	}
	free(text);
	report_free(rep);
	ir_free_module(m);
	return rc;
}
