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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bundle.h"
#include "program.h"
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
	const char *layers;	/* --layers */
	int *layer, nlayer;	/* its layers, ascending (malloc'd) */
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
	/* FP8 x FP8 GEMMs where every target runs them (a kernel is fused once for all) */
	c->o.pass.fp8_mma = c->cg.narch > 0;
	for (int i = 0; i < c->cg.narch; i++)
		c->o.pass.fp8_mma &= cg_arch_fp8_mma(c->cg.arch[i], c->o.debug);
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

/*
 * --layers=all|A-B|A,B,...: items N or A-B separated by commas, or all.
 * The syntax is checked before any work (n < 0), the range once the
 * model's layer count n is known; the list comes out ascending.
 */
static int
parse_layers(Args *c, int64_t n)
{
	const char *s = c->layers, *p = s;
	int max = n > 0 ? (int)n : INT32_MAX;
	char *seen = n > 0 ? xcalloc((size_t)n, 1) : NULL;

	free(c->layer);
	c->layer = NULL, c->nlayer = 0;
	if (!strcmp(s, "all")) {
		if (n > 0) {
			c->layer = xcalloc((size_t)n, sizeof *c->layer);
			for (int i = 0; i < n; i++)
				c->layer[c->nlayer++] = i;
		}
		free(seen);
		return OK;
	}
	for (;;) {
		char *e;
		long a, b;
		if (*p < '0' || *p > '9' || (a = strtol(p, &e, 10)) > INT32_MAX)
			goto syntax;
		b = a;
		if (*e == '-' && (e[1] < '0' || e[1] > '9' || (b = strtol(e + 1, &e, 10)) > INT32_MAX))
			goto syntax;
		if (b < a) {
			free(seen);
			return opt_bad(&c->a, "layers", s, "has a range that ends before it starts");
		}
		if (n > 0) {
			if (b >= max) {
				char why[128];
				free(seen);
				snprintf(why, sizeof why, "names layer %ld, but the model has %d layers "
					 "(0-%d)", b, max, max - 1);
				return opt_bad(&c->a, "layers", s, why);
			}
			for (long l = a; l <= b; l++) {
				if (seen[l]) {
					char why[64];
					free(seen);
					snprintf(why, sizeof why, "names layer %ld twice", l);
					return opt_bad(&c->a, "layers", s, why);
				}
				seen[l] = 1;
			}
		}
		if (!*e)
			break;
		if (*e != ',')
			goto syntax;
		p = e + 1;
	}
	if (n > 0) {
		c->layer = xcalloc((size_t)n, sizeof *c->layer);
		for (int i = 0; i < n; i++)
			if (seen[i])
				c->layer[c->nlayer++] = i;
	}
	free(seen);
	return OK;
syntax:
	free(seen);
	return opt_bad(&c->a, "layers", s, "is not all, A-B or a list of layers and ranges "
		       "(0,2,5-7)");
}

static int
parse_args(int argc, char **argv, Args *c, Diag *d)
{
	int64_t n;
	int rc;

	if ((rc = moec_args("compile", argc, argv, &c->a, &c->o, d)) >= 0)
		return rc;
	cg_compile_default(&c->cg);
	c->cg.debug = c->o.debug;
	c->model = c->a.pos[0];
	c->out = opt_str(&c->a, "output");
	c->emit = opt_str(&c->a, "emit");
	c->cg.cubin = opt_has(&c->a, "cubin");
	c->cg.keep_ir = c->emit && !strcmp(c->emit, "llvm");
	if (opt_int(&c->a, "max-tokens", &n))
		c->cg.max_tokens = n;
	c->o.pass.max_tokens = c->cg.max_tokens;
	if (opt_int(&c->a, "opt-level", &n))
		c->cg.opt = (int)n;
	if (split_arch(c))
		return BAD;
	if (cg_precision_parse(opt_str(&c->a, "precision"), &c->cg.precision, d))
		return BAD;
	if (opt_str(&c->a, "cache-dir") && file_make_dir(opt_str(&c->a, "cache-dir"), d))
		return BAD;	/* checked, and made, before any work */
	if ((c->layers = opt_str(&c->a, "layers"))) {
		if (parse_layers(c, -1))
			return BAD;
		if (opt_has(&c->a, "layer"))
			return opt_error(&c->a, "--layers and --layer: give one (--layers=N compiles "
					 "layer N alone, as a program of a whole-model bundle)");
		if (c->emit)
			return opt_error(&c->a, "--layers writes one bundle: --emit takes one layer "
					 "(--layer=N)");
	}
	if (opt_str(&c->a, "tuning") && !(c->tuning = cg_tuning_read(opt_str(&c->a, "tuning"), d)))
		return BAD;
	if ((c->cg.tune_candidates = opt_has(&c->a, "tune-candidates")) &&
	    (c->cg.narch != 1 || c->layers))
		return opt_error(&c->a, c->layers ? "--tune-candidates and --layers: candidates are "
				 "for one program (--layer=N)" : "--tune-candidates needs one target "
				 "(--arch=sm_90a): a tuning table's entries are per target");
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
	if (c->cg.cache) {
		int hits, misses;
		cg_cache_stats(c->cg.cache, &hits, &misses);
		diag_remark(d, LOC_NONE, "codegen cache %s: %d modules reused, %d compiled",
			    opt_str(&c->a, "cache-dir"), hits, misses);
	}
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
	if (opt_has(&c->a, "fusion-report"))	/* the codegen section, after the passes' */
		fputs(cg_program_fusion(p), c->emit && !strcmp(c->path[0], "-") ? stderr : stdout);
	if (!c->emit)
		rc = cg_program_bundle(p, report, c->out, d) == 0 ? OK : BAD;
	cg_program_free(p);
	c->secs[T_WRITE] = moec_now() - t1;
	return rc;
}

static char *report_text(const Report *r);

/* "mixtral_layer3" -> "mixtral": layers with the same kernels then emit the
 * same IR, which the codegen cache finds (cache.c). */
static void
neutral_name(Module *m)
{
	Graph *g = ir_main_graph(m);
	const char *u = g ? strstr(g->name, "_layer") : NULL;
	char buf[128];

	if (!u || strspn(u + 6, "0123456789") != strlen(u + 6) || !u[6] ||
	    (size_t)(u - g->name) >= sizeof buf)
		return;
	snprintf(buf, sizeof buf, "%.*s", (int)(u - g->name), g->name);
	g->name = ir_intern(m, buf);
}

/* On a terminal, one line that says how far the compile is: written after a
 * layer, cleared before the next one starts, so that the next layer's notes
 * begin on a line of their own. */
static void
progress(const Args *c, int i, int layer, int reused)
{
	if (c->o.level < 0 || !isatty(2))
		return;
	fputs("\r\033[K", stderr);
	if (i >= 0)
		fprintf(stderr, "moec compile: layer %d done (%d of %d), %d reused", layer, i + 1,
			c->nlayer, reused);
	fflush(stderr);
}

/* One layer through import, passes and codegen into *p (its module in *m). */
static int
compile_layer(Args *c, int layer, Module **m, CgProgram **p, FILE *report, Diag *d)
{
	double t0 = moec_now(), t1;
	Report *rep;
	char *text;
	int rc;

	c->o.fe.layer = layer;
	*m = moec_load(c->model, &c->o, d);
	c->secs[T_IMPORT] += moec_now() - t0;
	if (!*m)
		return BAD;
	neutral_name(*m);
	rep = report_new();
	t0 = moec_now();
	rc = moec_passes(*m, &c->o, rep, d);
	c->secs[T_PASSES] += moec_now() - t0;
	if (rc == OK) {
		text = report_text(rep);
		fprintf(report, "# program layer.%d\n%s", layer, text);
		if (opt_has(&c->a, "fusion-report"))
			printf("# program layer.%d\n%s", layer, text);
		free(text);
		t0 = moec_now();
		*p = cg_compile(*m, &c->cg, d);
		t1 = moec_now();
		if (*p) {
			c->secs[T_PTXAS] += cg_program_ptxas_secs(*p);
			c->secs[T_CODEGEN] += t1 - t0 - cg_program_ptxas_secs(*p);
			cg_program_release_llvm(*p);
		}
		rc = *p ? OK : BAD;
	}
	report_free(rep);
	return rc;
}

/* --layers: every selected layer a program of one bundle (codegen/whole.c). */
static int
compile_layers(Args *c, Diag *d)
{
	int64_t n = fe_num_layers(c->model, d);
	CgProgram **p;
	Module **m;
	const char **name;
	char *report = NULL;
	size_t rlen = 0;
	FILE *rf;
	int rc = OK, nk = 0, hits, misses;
	double t0;

	if (n < 0)
		return BAD;
	if (n == 0)
		return opt_bad(&c->a, "layers", c->layers, "needs a config.json model (an ONNX "
			       "model is one graph: compile it without --layers)");
	if (parse_layers(c, n))
		return BAD;
	if (c->nlayer > BUNDLE_MAXPROG) {
		char why[96];
		snprintf(why, sizeof why, "selects %d layers: a bundle holds at most %d programs",
			 c->nlayer, BUNDLE_MAXPROG);
		return opt_bad(&c->a, "layers", c->layers, why);
	}
	p = xcalloc((size_t)c->nlayer, sizeof *p);
	m = xcalloc((size_t)c->nlayer, sizeof *m);
	name = xcalloc((size_t)c->nlayer, sizeof *name);
	c->cg.cache = cg_cache_new(opt_str(&c->a, "cache-dir"));
	c->cg.model = c->model;
	rf = open_memstream(&report, &rlen);
	for (int i = 0; i < c->nlayer && rc == OK; i++) {
		progress(c, -1, 0, 0);
		if (i == 1 && d->level == 0)	/* the notes of one layer, of every one with -v */
			d->level = -1;
		if (asprintf((char **)&name[i], "layer.%d", c->layer[i]) < 0)
			die("out of memory");
		if ((rc = compile_layer(c, c->layer[i], &m[i], &p[i], rf, d)))
			diag_error(d, loc_file(c->model), "layer %d: not compiled (see above)",
				   c->layer[i]);
		cg_cache_stats(c->cg.cache, &hits, &misses);
		progress(c, i, c->layer[i], hits / MAX(c->cg.narch, 1));
	}
	progress(c, -1, 0, 0);
	d->level = c->o.level;
	fclose(rf);
	if (rc == OK) {
		t0 = moec_now();
		rc = cg_programs_bundle(p, name, c->nlayer, report, c->out, &nk, d) ? BAD : OK;
		c->secs[T_WRITE] += moec_now() - t0;
	}
	cg_cache_stats(c->cg.cache, &hits, &misses);
	if (rc == OK) {
		int total = 0;
		for (int i = 0; i < c->nlayer; i++)
			total += cg_program_manifest(p[i])->nk;
		diag_remark(d, LOC_NONE, "%d programs, %d distinct kernels of %d; codegen ran for "
			    "%d modules and reused %d", c->nlayer, nk, total, misses, hits);
	}
	for (int i = 0; i < c->nlayer; i++) {
		cg_program_free(p[i]);
		ir_free_module(m[i]);
		free((char *)name[i]);
	}
	cg_cache_free(c->cg.cache);
	free(p), free(m), free(name), free(report);
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

/* The process's CPU time so far, its ptxas runs included: with codegen's
 * threads and ptxas's processes overlapping, what the stages cost. */
static void
print_cpu(void)
{
	struct rusage self, kids;
	double u, s;

	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	u = (double)(self.ru_utime.tv_sec + kids.ru_utime.tv_sec) +
	    1e-6 * (double)(self.ru_utime.tv_usec + kids.ru_utime.tv_usec);
	s = (double)(self.ru_stime.tv_sec + kids.ru_stime.tv_sec) +
	    1e-6 * (double)(self.ru_stime.tv_usec + kids.ru_stime.tv_usec);
	fprintf(stderr, "#  %9.3f ms  CPU (user %.3f s, sys %.3f s; ptxas %.3f s of it)\n", 1e3 * (u + s),
		u, s, (double)(kids.ru_utime.tv_sec + kids.ru_stime.tv_sec) +
		1e-6 * (double)(kids.ru_utime.tv_usec + kids.ru_stime.tv_usec));
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
	print_cpu();
}

/*
 * --ep=N -o X.moeb: every rank's program in one bundle (format 2, programs
 * rank.0 ... rank.{N-1}, kernels shared; docs/bundle.md), each with its
 * experts' weights, its "ep" line and its all_to_all steps.
 */
static int
bundle_ep(Args *c, Module **m, const char *text, Diag *d)
{
	int nr = c->o.ep.ranks, rc = OK, nk = 0;
	CgProgram *p[IR_EP_MAX_RANKS] = {0};
	char *name[IR_EP_MAX_RANKS] = {0}, *report = NULL;
	size_t rlen = 0;
	FILE *rf = open_memstream(&report, &rlen);

	for (int r = 0; r < nr && rc == OK; r++) {
		c->cg.ep_rank = r;
		if (!(p[r] = cg_compile(m[r], &c->cg, d)))
			rc = BAD;
		if (asprintf(&name[r], "rank.%d", r) < 0)
			die("out of memory");
		fprintf(rf, "# program %s\n%s", name[r], r ? "(rank.0's report, with this rank's "
			"experts)\n" : text);
	}
	fclose(rf);
	if (rc == OK && cg_programs_bundle(p, (const char *const *)name, nr, report, c->out, &nk, d))
		rc = BAD;
	for (int r = 0; r < nr; r++) {
		cg_program_free(p[r]);
		free(name[r]);
	}
	free(report);
	return rc;
}

/*
 * --ep=N: one module per rank; a bundle holding them all, or (--emit=ir|dot)
 * one file per rank, OUT.ep0.x ... OUT.ep{N-1}.x, all or none: every rank
 * is compiled before the first file is written.
 */
static int
compile_ep(Args *c, Report *rep, Diag *d)
{
	int nr = c->o.ep.ranks, rc, ir = c->emit && (!strcmp(c->emit, "ir") || !strcmp(c->emit, "dot"));
	Module *m[IR_EP_MAX_RANKS] = {0};
	char *path[IR_EP_MAX_RANKS] = {0}, *text = NULL;
	FileOut fo[IR_EP_MAX_RANKS];
	int nopen = 0;

	if (c->emit && !ir)
		return opt_error(&c->a, "--ep=%d with --emit=%s: the ranks' code goes into the bundle "
				 "(-o OUT.moeb); --emit=ir or dot writes each rank's IR", nr, c->emit), BAD;
	if (ir && (!c->path[0] || !strcmp(c->path[0], "-")))
		return opt_error(&c->a, "--ep=%d writes one file per rank: give -o OUT", nr), BAD;
	if ((rc = moec_ep_modules(c->model, &c->o, m, rep, d)) != OK)
		goto out;
	text = report_text(rep);
	if (opt_has(&c->a, "fusion-report"))
		fputs(text, stdout);
	if (!ir) {
		rc = bundle_ep(c, m, text, d);
		goto out;
	}
	for (int r = 0; r < nr; r++)
		path[r] = moec_ep_path(c->path[0], r);
	for (int r = 0; r < nr && rc == OK; r++, nopen++) {
		FILE *f = file_create(&fo[r], path[r], d);
		if (!f) {
			rc = BAD;
			break;
		}
		if (strcmp(c->emit, "dot") == 0)
			moec_write_dot(f, m[r]);
		else
			ir_print(f, m[r], c->o.pass.print_flags);
	}
	for (int r = 0; r < nopen; r++)
		if (rc != OK)
			file_discard(&fo[r]);
		else if (file_commit(&fo[r], d))
			rc = BAD;
out:
	for (int r = 0; r < nr; r++) {
		ir_free_module(m[r]);
		free(path[r]);
	}
	free(text);
	return rc;
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
	if (c.layers && c.o.ep.ranks) {
		opt_error(&c.a, "--layers and --ep=%d: one at a time (an EP compile is of one layer)", c.o.ep.ranks);
		rc = BAD;
		goto out;
	}
	if (c.layers) {
		rc = compile_layers(&c, &d);
		if (c.o.pass.time_passes)
			print_times(&c);
		goto out;
	}
	if (c.o.ep.ranks) {
		c.cg.model = c.model;
		rep = report_new();
		rc = compile_ep(&c, rep, &d);
		goto out;
	}
	t0 = moec_now();
	m = moec_load(c.model, &c.o, &d);
	c.secs[T_IMPORT] = moec_now() - t0;
	if (!m) {
		rc = BAD;
		goto out;
	}
	c.cg.model = c.model;
	if (opt_str(&c.a, "cache-dir") && !c.emit)	/* --emit shows the IR as built */
		c.cg.cache = cg_cache_new(opt_str(&c.a, "cache-dir"));
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
	free(c.layer);
	if (!c.layers)
		cg_cache_free(c.cg.cache);
	cg_tuning_free(c.tuning);
	free(text);
	report_free(rep);
	ir_free_module(m);
	return rc;
}
