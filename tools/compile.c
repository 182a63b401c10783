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
#include <sys/stat.h>

#include "bundle.h"
#include "codegen.h"
#include "moec.h"

enum { OK = 0, FAIL = 1, BAD = 2 };

typedef struct {
	MoecOpts o;
	OptArgs a;
	CgCompileOpts cg;
	const char *model, *out, *emit;
	char arch[256];	/* --arch, split in place */
	char *path[8];	/* where --emit=llvm|ptx writes each target (malloc'd) */
	double secs[5];	/* --time-passes: by stage */
	CgTuning *tuning;	/* --tuning */
} Args;

enum { T_IMPORT, T_PASSES, T_CODEGEN, T_PTXAS, T_WRITE };
static const char *const stage[] = {"import", "passes", "codegen", "ptxas", "write"};

static int
split_arch(Args *c)
{
	char *p, *save;

	if (strlen(opt_str(&c->a, "arch")) >= sizeof c->arch)
		return opt_bad(&c->a, "arch", opt_str(&c->a, "arch"), "is too long");
	snprintf(c->arch, sizeof c->arch, "%s", opt_str(&c->a, "arch"));
	c->cg.narch = 0;
	for (p = strtok_r(c->arch, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (c->cg.narch == (int)NELEM(c->cg.arch))
			return opt_bad(&c->a, "arch", opt_str(&c->a, "arch"), "names more than 8 targets");
		CgTarget t = {.sm = p, .opt = 3};
		Diag quiet;
		diag_init(&quiet, NULL);
		if (cg_target_check(&t, &quiet))	/* now, not after the import and the passes */
			return opt_bad(&c->a, "arch", p, "is not a target (have sm_80, sm_86, sm_89, "
				       "sm_90, sm_90a, emu)");
		c->cg.arch[c->cg.narch++] = p;
	}
	return c->cg.narch ? 0 : opt_bad(&c->a, "arch", opt_str(&c->a, "arch"), "names no target");
}

/* --emit=llvm|ptx with several targets: OUT.ll -> OUT.sm_90a.ll, OUT.sm_80.ll. */
static char *
target_path(const char *out, const char *arch)
{
	const char *base = file_basename(out), *dot = strrchr(base, '.');
	size_t k = dot && dot != base ? (size_t)(dot - out) : strlen(out);
	char *p = NULL;

	if (asprintf(&p, "%.*s.%s%s", (int)k, out, arch, out + k) < 0)
		die("out of memory");
	return p;
}

/* Every file the command will write, decided and checked before any work. */
static int
plan_outputs(Args *c, Diag *d)
{
	int per_target = c->emit && (!strcmp(c->emit, "llvm") || !strcmp(c->emit, "ptx"));

	if (!c->out && !c->emit) {
		opt_error(&c->a, "where to? give -o OUT.moeb (or --emit=KIND for an intermediate form)");
		return BAD;
	}
	if (per_target && c->cg.narch > 1) {
		const char *ext = !strcmp(c->emit, "ptx") ? "ptx" : "ll";
		struct stat st;
		if (!c->out || !strcmp(c->out, "-") ||
		    (stat(c->out, &st) == 0 && !S_ISREG(st.st_mode))) {
			opt_error(&c->a, "--emit=%s with %d targets writes one file per target, which "
				  "cannot all go to %s: give -o OUT.%s (written as OUT.%s.%s, ...) or "
				  "one --arch", c->emit, c->cg.narch, c->out ? c->out : "stdout", ext,
				  c->cg.arch[0], ext);
			return BAD;
		}
		for (int i = 0; i < c->cg.narch; i++) {
			c->path[i] = target_path(c->out, c->cg.arch[i]);
			for (int k = 0; k < i; k++)
				if (!strcmp(c->path[k], c->path[i])) {
					opt_error(&c->a, "--arch names %s twice", c->cg.arch[i]);
					return BAD;
				}
		}
	} else {
		c->path[0] = xstrdup(c->out ? c->out : "-");
	}
	for (int i = 0; i < 8 && c->path[i]; i++)
		if (moec_check_output(&c->a, c->path[i], c->model, d))
			return BAD;
	return OK;
}

static int
parse_args(int argc, char **argv, Args *c, Diag *d)
{
	int64_t n;
	int rc;

	if ((rc = moec_args("compile", argc, argv, &c->a, &c->o, d)) >= 0)
		return rc;
	cg_compile_default(&c->cg);
	c->model = c->a.pos[0];
	c->out = opt_str(&c->a, "output");
	c->emit = opt_str(&c->a, "emit");
	c->cg.cubin = opt_has(&c->a, "cubin");
	if (opt_int(&c->a, "max-tokens", &n))
		c->cg.max_tokens = n;
	if (opt_int(&c->a, "opt-level", &n))
		c->cg.opt = (int)n;
	if (split_arch(c))
		return BAD;
	if (cg_precision_parse(opt_str(&c->a, "precision"), &c->cg.precision, d))
		return BAD;
	if (opt_str(&c->a, "tuning") && !(c->tuning = cg_tuning_read(opt_str(&c->a, "tuning"), d)))
		return BAD;
	c->cg.tuning = c->tuning;
	return plan_outputs(c, d) == OK ? -1 : BAD;
}

/* One text to one file, atomically. */
static int
write_text(const char *path, const char *text, size_t n, Diag *d)
{
	FileOut o;
	FILE *f = file_create(&o, path, d);

	if (!f)
		return BAD;
	fwrite(text, 1, n, f);
	return file_commit(&o, d) ? BAD : OK;
}

/* --emit=ir|dot: the fused IR in one of its two pictures. */
static int
emit_ir(const Args *c, Module *m, Diag *d)
{
	FileOut o;
	FILE *f = file_create(&o, c->path[0], d);

	if (!f)
		return BAD;
	if (strcmp(c->emit, "dot") == 0)
		moec_write_dot(f, m);
	else
		ir_print(f, m, c->o.pass.print_flags);
	return file_commit(&o, d) ? BAD : OK;
}

/* --emit=llvm|ptx (one file per target) and the bundle need codegen. */
static int
emit_code(Args *c, Module *m, const char *report, Diag *d)
{
	double t0 = moec_now(), t1;
	CgProgram *p = cg_compile(m, &c->cg, d);
	int rc = OK;

	t1 = moec_now();
	if (!p)
		return BAD;
	c->secs[T_PTXAS] = cg_program_ptxas_secs(p);
	c->secs[T_CODEGEN] = t1 - t0 - c->secs[T_PTXAS];
	diag_remark(d, LOC_NONE, "codegen: %d targets (%.1f ms, ptxas %.1f ms)", c->cg.narch,
		    1e3 * c->secs[T_CODEGEN], 1e3 * c->secs[T_PTXAS]);
	for (int i = 0; c->emit && i < c->cg.narch && rc == OK; i++) {
		const char *path = c->path[c->path[1] ? i : 0];
		if (strcmp(c->emit, "ptx") == 0) {
			size_t n;
			const char *ptx = cg_program_ptx(p, i, &n);
			rc = ptx ? write_text(path, ptx, n, d) : BAD;
		} else {
			char *ll = cg_program_llvm(p, i);
			rc = ll ? write_text(path, ll, strlen(ll), d) : BAD;
			free(ll);
		}
		if (!c->path[1])	/* one target */
			break;
	}
	if (!c->emit)
		rc = cg_program_bundle(p, report, c->out, d) == 0 ? OK : BAD;
	cg_program_free(p);
	c->secs[T_WRITE] = moec_now() - t1;
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

/* --time-passes: after the table of passes, every stage of the compile. */
static void
print_times(const Args *c)
{
	double total = 0;

	for (size_t i = 0; i < NELEM(stage); i++)
		total += c->secs[i];
	fprintf(stderr, "# compile times\n");
	for (size_t i = 0; i < NELEM(stage); i++)
		fprintf(stderr, "#  %9.3f ms  %5.1f%%  %s\n", 1e3 * c->secs[i],
			total > 0 ? 100 * c->secs[i] / total : 0, stage[i]);
	fprintf(stderr, "#  %9.3f ms  total\n", 1e3 * total);
}

int
moec_cmd_compile(int argc, char **argv)
{
	Args c;
	Diag d;
	Module *m = NULL;
	Report *rep = NULL;
	char *text = NULL;
	double t0;
	int rc;

	memset(&c, 0, sizeof c);
	if ((rc = parse_args(argc, argv, &c, &d)) >= 0)
		goto out;
	t0 = moec_now();
	m = moec_load(c.model, &c.o, &d);
	c.secs[T_IMPORT] = moec_now() - t0;
	if (!m) {
		rc = BAD;
		goto out;
	}
	c.cg.model = c.model;
	rep = report_new();
	t0 = moec_now();
	rc = moec_passes(m, &c.o, rep, &d);
	c.secs[T_PASSES] = moec_now() - t0;
	if (rc == OK) {
		text = report_text(rep);
		if (opt_has(&c.a, "fusion-report"))	/* stdout, unless the IR or code goes there */
			fputs(text, c.emit && !strcmp(c.path[0], "-") ? stderr : stdout);
		if (c.emit && (!strcmp(c.emit, "ir") || !strcmp(c.emit, "dot"))) {
			t0 = moec_now();
			rc = emit_ir(&c, m, &d);
			c.secs[T_WRITE] = moec_now() - t0;
		} else {
			rc = emit_code(&c, m, text, &d);
		}
	}
	if (c.o.pass.time_passes)
		print_times(&c);
out:
	for (int i = 0; i < 8; i++)
		free(c.path[i]);
	cg_tuning_free(c.tuning);
	free(text);
	report_free(rep);
	ir_free_module(m);
	return rc;
}
