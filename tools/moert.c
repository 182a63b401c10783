/*
 * moert.c — the runtime's command line: run a bundle on the GPU, test it
 * against ONNX-layout reference outputs, benchmark it, verify it without a
 * GPU, and describe the device.
 *
 * Exit codes: 0 success, 1 a check or test failed (or no usable GPU),
 * 2 bad usage or bad input.  The bundle and the inputs are checked before
 * the driver is touched, so a bad file is reported as such on any host.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "moert.h"
#include "util.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static int
say(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("moert: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

/* A runtime failure: bad input is 2, anything the GPU side refused is 1. */
static int
rt_fail(moert_status s)
{
	int input = s == MOERT_EFORMAT || s == MOERT_EVERSION ||
		    s == MOERT_ESHAPE || s == MOERT_ETOKENS || s == MOERT_EIO ||
		    s == MOERT_EINVAL;

	return say(input ? EXIT_USAGE : EXIT_FAIL, "%s: %s", moert_status_name(s),
		   moert_last_error());
}

/* --- options --------------------------------------------------------------- */

typedef struct Opts Opts;
struct Opts {
	const char *pos[64];	/* positional arguments */
	int npos;
	const char *inname[64], *infile[64];	/* --input NAME=FILE */
	int nin;
	const char *outdir;
	int pb, graph, device, iters, warmup, help, profile;
	int64_t tokens;
	uint64_t seed;
	int skew;		/* bench: percent of each token that is shared (0..100) */
	int64_t tile[16];	/* test: token counts each set's rows are repeated to */
	int ntile;
};

static int
num(const char *s, long long lo, long long hi, long long *v)
{
	char *end;

	*v = strtoll(s, &end, 10);
	return *s && !*end && *v >= lo && *v <= hi ? 0 : -1;
}

/* "--key=V" or "--key V": the value, advancing *i for the second form. */
static const char *
value(int argc, char **argv, int *i, const char *key)
{
	size_t k = strlen(key);

	if (strncmp(argv[*i], key, k) != 0)
		return NULL;
	if (argv[*i][k] == '=')
		return argv[*i] + k + 1;
	if (argv[*i][k] == 0 && *i + 1 < argc)
		return argv[++*i];
	return NULL;
}

static int
input_opt(Opts *o, const char *v)
{
	const char *eq = strchr(v, '=');

	if (!eq || eq == v || !eq[1] || o->nin == 64)
		return say(EXIT_USAGE, "--input wants NAME=FILE, got '%s'", v);
	o->inname[o->nin] = v;	/* NUL-terminated below, by length */
	o->infile[o->nin++] = eq + 1;
	return 0;
}

/* --tile=T,T,...: up to 16 token counts. */
static int
tile_opt(Opts *o, const char *v)
{
	char buf[256], *save = NULL;
	long long n;

	snprintf(buf, sizeof buf, "%s", v);
	o->ntile = 0;
	for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save))
		if (o->ntile == 16 || num(p, 1, INT32_MAX, &n))
			return say(EXIT_USAGE, "--tile wants up to 16 token counts "
				   "in 1..%d, got '%s'", INT32_MAX, v);
		else
			o->tile[o->ntile++] = n;
	return o->ntile ? 0 : say(EXIT_USAGE, "--tile wants token counts, got '%s'", v);
}

static int
option(Opts *o, int argc, char **argv, int *i)
{
	const char *v;
	long long n;

	if (!strcmp(argv[*i], "--help") || !strcmp(argv[*i], "-h"))
		return o->help = 1, 0;
	if (!strcmp(argv[*i], "--profile"))
		return o->profile = 1, 0;
	if (!strcmp(argv[*i], "--graph"))
		return o->graph = 1, 0;
	if (!strcmp(argv[*i], "--pb"))
		return o->pb = 1, 0;
	if ((v = value(argc, argv, i, "--input")))
		return input_opt(o, v);
	if ((v = value(argc, argv, i, "--tile")))
		return tile_opt(o, v);
	if ((v = value(argc, argv, i, "-o")) || (v = value(argc, argv, i, "--output")))
		return o->outdir = v, 0;
#define INTOPT(flag, lo, hi, dst)                                              \
	if ((v = value(argc, argv, i, flag))) {                                \
		if (num(v, lo, hi, &n))                                        \
			return say(EXIT_USAGE, "%s wants an integer in "      \
				   "%lld..%lld, got '%s'", flag, (long long)lo, \
				   (long long)hi, v);                          \
		dst = n;                                                       \
		return 0;                                                      \
	}
	INTOPT("--tokens", 1, INT32_MAX, o->tokens)
	INTOPT("--iters", 1, 100000, o->iters)
	INTOPT("--warmup", 0, 100000, o->warmup)
	INTOPT("--device", 0, 1024, o->device)
	INTOPT("--seed", 0, INT64_MAX, o->seed)
	INTOPT("--skew", 0, 100, o->skew)
#undef INTOPT
	if (argv[*i][0] == '-' && argv[*i][1])
		return say(EXIT_USAGE, "unknown option '%s' (see moert %s --help)",
			   argv[*i], argv[1]);
	if (o->npos == 64)
		return say(EXIT_USAGE, "too many arguments");
	o->pos[o->npos++] = argv[*i];
	return 0;
}

static int
parse_opts(Opts *o, int argc, char **argv)
{
	memset(o, 0, sizeof *o);
	o->iters = 100, o->warmup = 10, o->tokens = -1, o->seed = 1;
	o->outdir = ".";
	for (int i = 2; i < argc; i++)
		if (option(o, argc, argv, &i))
			return -1;
	return 0;
}

/* --- bundle, device and tensors ------------------------------------------- */

typedef struct Ctx Ctx;
struct Ctx {
	const char *path;
	unsigned char *buf;	/* the bundle, until it is on the device */
	size_t len;
	moert_program *p;
	moert_device *dev;
	uint64_t in[64], out[64];	/* device buffers */
};

/* Read and verify the bundle; no driver is involved yet. */
static int
open_bundle(Ctx *c, const char *path)
{
	moert_status s;
	Diag d;
	int rc;

	memset(c, 0, sizeof *c);
	c->path = path;
	diag_init(&d, NULL);
	if (!(c->buf = bundle_read_file(path, &c->len, &rc, &d)))
		return say(EXIT_USAGE, "%s", d.last);
	if ((s = moert_load_host(c->buf, c->len, &c->p)))
		return say(EXIT_USAGE, "%s: %s: %s", path, moert_status_name(s),
			   moert_last_error());
	if (moert_num_inputs(c->p) > 64 || moert_num_outputs(c->p) > 64)
		return say(EXIT_USAGE, "%s: more than 64 inputs or outputs", path);
	return EXIT_OK;
}

static int
open_device(Ctx *c, int ordinal)
{
	moert_status s;

	if ((s = moert_open(ordinal, &c->dev)) || (s = moert_load_device(c->dev, c->p)))
		return rt_fail(s);
	free(c->buf);
	c->buf = NULL;
	return EXIT_OK;
}

static void
free_io(Ctx *c)
{
	for (int i = 0; i < 64; i++) {
		if (c->dev && c->in[i])
			moert_free(c->dev, c->in[i]);
		if (c->dev && c->out[i])
			moert_free(c->dev, c->out[i]);
		c->in[i] = c->out[i] = 0;
	}
}

static void
close_ctx(Ctx *c)
{
	free_io(c);
	moert_unload(c->p);
	moert_close(c->dev);
	free(c->buf);
	memset(c, 0, sizeof *c);
}

/* numpy has no bf16 or f8: such inputs come as f32 and are rounded here. */
static int
conform(Tensor *t, DType dt)
{
	Tensor u;

	if (t->dt == dt || t->dt != DT_F32 ||
	    (dt != DT_BF16 && dt != DT_F8E4M3 && dt != DT_F8E5M2))
		return 0;
	if (tensor_alloc(&u, dt, t->rank, t->dim))
		return -1;
	for (int64_t i = 0; i < tensor_numel(t); i++)
		dtype_store(dt, u.data, (size_t)i,
			    dtype_load(DT_F32, t->data, (size_t)i));
	u.name = t->name;
	t->name = NULL;
	tensor_free(t);
	*t = u;
	return 0;
}

static DType
dtype_of(const char *name)
{
	DType dt = DT_F32;

	dtype_parse(name, strlen(name), &dt);
	return dt;
}

/*
 * Read input i from `file` and check it against the bundle; *tokens in/out
 * as in moert_check_input.  On failure `why` says what (file first).
 */
/*
 * --tile: the rows of t (its first dim) repeated to T rows, row r being row
 * r mod R.  A block that acts on each token alone (an FFN or MoE block) maps
 * a tiled input to the tiled output, so a few reference rows check any T.
 */
static int
tile_rows(Tensor *t, int64_t T)
{
	Tensor u;
	int64_t dim[MAXRANK], R = t->rank ? t->dim[0] : 0;
	size_t row;

	if (t->rank < 1 || R < 1 || dtype_bits(t->dt) % 8)
		return -1;
	memcpy(dim, t->dim, sizeof dim);
	dim[0] = T;
	if (tensor_alloc(&u, t->dt, t->rank, dim))
		return -1;
	row = tensor_nbytes(t) / (size_t)R;
	for (int64_t r = 0; r < T; r++)
		memcpy((char *)u.data + (size_t)r * row, (char *)t->data + (size_t)(r % R) * row, row);
	u.name = t->name;
	t->name = NULL;
	tensor_free(t);
	*t = u;
	return 0;
}

static int
read_input(Ctx *c, int i, const char *file, Tensor *t, int64_t *tokens,
	   int64_t tile, char *why, size_t n)
{
	moert_tensor_info ti;
	Diag d;

	diag_init(&d, NULL);
	if (tensor_read(file, t, &d))
		return snprintf(why, n, "%s", d.last), -1;
	moert_input_info(c->p, i, 1, &ti);
	if (conform(t, dtype_of(ti.dtype)))
		return snprintf(why, n, "%s: cannot convert to %s", file,
				ti.dtype), -1;
	if (tile && tile_rows(t, tile))
		return snprintf(why, n, "%s: cannot repeat its rows to %lld", file,
				(long long)tile), -1;
	if (moert_check_input(c->p, i, dtype_name(t->dt), t->rank, t->dim,
			      tokens))
		return snprintf(why, n, "%s: %s", file, moert_last_error()), -1;
	return 0;
}

/* Device buffers for the inputs (uploaded) and the outputs at T. */
static moert_status
upload(Ctx *c, const Tensor *in, int64_t tokens)
{
	moert_tensor_info ti;
	moert_status s;

	for (int i = 0; i < moert_num_inputs(c->p); i++)
		if ((s = moert_malloc(c->dev, tensor_nbytes(&in[i]), &c->in[i])) ||
		    (s = moert_memcpy_htod(c->dev, c->in[i], in[i].data,
					   tensor_nbytes(&in[i]))))
			return s;
	for (int i = 0; i < moert_num_outputs(c->p); i++)
		if ((s = moert_output_info(c->p, i, tokens, &ti)) ||
		    (s = moert_malloc(c->dev, ti.bytes, &c->out[i])))
			return s;
	return MOERT_OK;
}

static moert_status
download(Ctx *c, int i, int64_t tokens, Tensor *t)
{
	moert_tensor_info ti;
	moert_status s;

	memset(t, 0, sizeof *t);
	if ((s = moert_output_info(c->p, i, tokens, &ti)))
		return s;
	if (tensor_alloc(t, dtype_of(ti.dtype), ti.rank, ti.dim))
		return MOERT_ENOMEM;
	t->name = xstrdup(ti.name);
	if ((s = moert_memcpy_dtoh(c->dev, t->data, c->out[i], ti.bytes)))
		tensor_free(t);
	return s;
}

static moert_status
run_once(Ctx *c, int64_t tokens, int graph)
{
	moert_status s;

	if ((s = moert_run(c->p, tokens, c->in, c->out, NULL, graph)))
		return s;
	return moert_sync(c->dev);
}

static void
free_tensors(Tensor *t, int n)
{
	for (int i = 0; i < n; i++)
		tensor_free(&t[i]);
}

/* --- moert run --------------------------------------------------------------- */

static int
find_input(Ctx *c, const char *spec)
{
	size_t n = (size_t)(strchr(spec, '=') - spec);
	moert_tensor_info ti;

	for (int i = 0; i < moert_num_inputs(c->p); i++) {
		moert_input_info(c->p, i, 1, &ti);
		if (strlen(ti.name) == n && !strncmp(ti.name, spec, n))
			return i;
	}
	return -1;
}

/* Inputs by name from --input; every input exactly once. */
static int
run_inputs(Ctx *c, const Opts *o, Tensor *in, int64_t *tokens)
{
	int set[64] = {0}, i;
	moert_tensor_info ti;
	char why[1024];

	for (int k = 0; k < o->nin; k++) {
		if ((i = find_input(c, o->inname[k])) < 0)
			return say(EXIT_USAGE, "%s has no input named '%.*s'",
				   c->path, (int)(o->infile[k] - o->inname[k] - 1),
				   o->inname[k]);
		if (set[i]++)
			return say(EXIT_USAGE, "input %d given twice", i);
		if (read_input(c, i, o->infile[k], &in[i], tokens, 0, why, sizeof why))
			return say(EXIT_USAGE, "%s", why);
	}
	for (i = 0; i < moert_num_inputs(c->p); i++)
		if (!set[i]) {
			moert_input_info(c->p, i, 1, &ti);
			return say(EXIT_USAGE, "missing --input %s=FILE", ti.name);
		}
	if (*tokens < 0)
		return say(EXIT_USAGE, "no input has a T dim: give --tokens=T");
	return EXIT_OK;
}

static int
write_outputs(Ctx *c, const Opts *o, int64_t tokens)
{
	char name[300], shape[160], *path;
	moert_status s;
	Tensor t;
	Diag d;
	int rc;

	diag_init(&d, NULL);
	for (int i = 0; i < moert_num_outputs(c->p); i++) {
		if ((s = download(c, i, tokens, &t))) {
			tensor_free(&t);
			return rt_fail(s);
		}
		snprintf(name, sizeof name, "%s.%s", t.name, o->pb ? "pb" : "npy");
		path = file_join(o->outdir, name);
		rc = tensor_write(path, &t, &d);
		tensor_shape_string(shape, sizeof shape, &t);
		if (!rc)
			printf("wrote %s %s\n", path, shape);
		free(path);
		tensor_free(&t);
		if (rc)
			return say(EXIT_USAGE, "%s", d.last);
	}
	return EXIT_OK;
}

static int
cmd_run(Ctx *c, const Opts *o)
{
	Tensor in[64] = {0};
	int64_t tokens = o->tokens;
	moert_status s;
	int rc;

	if (o->npos != 1)
		return say(EXIT_USAGE, "run wants one bundle (moert run --help)");
	if (!(rc = open_bundle(c, o->pos[0])) &&
	    !(rc = run_inputs(c, o, in, &tokens)) &&
	    !(rc = open_device(c, o->device))) {
		if ((s = upload(c, in, tokens)) || (s = run_once(c, tokens, o->graph)))
			rc = rt_fail(s);
		else
			rc = write_outputs(c, o, tokens);
	}
	free_tensors(in, 64);
	return rc;
}

/* --- moert test -------------------------------------------------------------- */

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The test_data_set_* folders of dir, sorted; NULL-terminated, malloc'd. */
static char **
test_sets(const char *dir)
{
	VEC(char *) v = {0};
	struct dirent *e;
	DIR *dp = opendir(dir);

	if (dp) {
		while ((e = readdir(dp)))
			if (!strncmp(e->d_name, "test_data_set_", 14))
				vec_push(&v, file_join(dir, e->d_name));
		closedir(dp);
	}
	if (v.n)
		qsort(v.v, v.n, sizeof *v.v, cmp_str);
	vec_push(&v, NULL);
	return v.v;
}


/* The bundle flattens leading token dims ([T,32]); a reference written as
 * [2,8,32] holds the same row-major data, so take its shape. */
static void
unflatten(Tensor *got, const Tensor *want)
{
	if (want->rank > got->rank && tensor_numel(got) == tensor_numel(want) &&
	    got->rank >= 1 && got->dim[got->rank - 1] == want->dim[want->rank - 1]) {
		got->rank = want->rank;
		memcpy(got->dim, want->dim, sizeof got->dim[0] * (size_t)want->rank);
	}
}

/* Output i against set/output_i.pb; appends "  y: rel_l2 .. max_abs ..". */
static int
compare_output(Ctx *c, const char *set, int i, int64_t tokens, int64_t tile, char *line,
	       size_t n)
{
	char name[32], a[160], b[160], *file;
	size_t k = strlen(line);
	double atol, rtol, rel;
	Tensor got = {0}, want = {0};
	moert_status s;
	Compare cmp;
	Diag d;
	int ok = 0;

	snprintf(name, sizeof name, "output_%d.pb", i);
	file = file_join(set, name);
	diag_init(&d, NULL);
	if (tensor_read(file, &want, &d))
		snprintf(line + k, n - k, "  %s", d.last);
	else if (tile && tile_rows(&want, tile))
		snprintf(line + k, n - k, "  %s: cannot repeat its rows", file);
	else if ((s = download(c, i, tokens, &got)))
		snprintf(line + k, n - k, "  %s", moert_last_error());
	else if (unflatten(&got, &want), got.rank != want.rank ||
		 tensor_numel(&got) != tensor_numel(&want) ||
		 memcmp(got.dim, want.dim, sizeof got.dim[0] * (size_t)got.rank)) {
		tensor_shape_string(a, sizeof a, &got);
		tensor_shape_string(b, sizeof b, &want);
		snprintf(line + k, n - k, "  %s: shape %s, reference %s",
			 got.name, a, b);
	} else {
		tolerance_for(got.dt, &atol, &rtol, &rel);
		tensor_compare(&got, &want, atol, rtol, &cmp);
		ok = tensor_close(&cmp, got.dt, tensor_numel(&want));
		k += (size_t)snprintf(line + k, n - k, "  %s: rel_l2 %.1e "
				      "max_abs %.1e", got.name, cmp.rel_l2,
				      cmp.max_abs);
		if (!ok && k < n)
			snprintf(line + k, n - k, " (%lld outside tolerance)",
				 (long long)cmp.nbad);
	}
	free(file);
	tensor_free(&want);
	tensor_free(&got);
	return ok;
}

/* One test_data_set_N folder (its rows repeated to `tile` tokens, if not
 * 0): 1 passed, 0 failed; prints its line. */
static int
test_case(Ctx *c, const Opts *o, const char *set, int64_t tile)
{
	Tensor in[64] = {0};
	char line[4096] = "", name[32], *file;
	int64_t tokens = tile ? tile : o->tokens;
	int ok = 1, rc = 0;
	moert_status s;

	for (int i = 0; i < moert_num_inputs(c->p) && !rc; i++) {
		snprintf(name, sizeof name, "input_%d.pb", i);
		file = file_join(set, name);
		rc = read_input(c, i, file, &in[i], &tokens, tile, line + 2,
				sizeof line - 2);
		free(file);
	}
	if (!rc && tokens < 0)
		rc = -1, snprintf(line + 2, sizeof line - 2, "no input has a T dim");
	if (rc) {
		line[0] = line[1] = ' ';
		ok = 0;
	} else if ((s = upload(c, in, tokens)) || (s = run_once(c, tokens, o->graph))) {
		snprintf(line, sizeof line, "  %s: %s", moert_status_name(s),
			 moert_last_error());
		ok = 0;
	} else {
		for (int i = 0; i < moert_num_outputs(c->p); i++)
			ok &= compare_output(c, set, i, tokens, tile, line, sizeof line);
	}
	if (tile)
		printf("%s %s T=%lld%s\n", ok ? "ok  " : "FAIL", set, (long long)tile, line);
	else
		printf("%s %s%s\n", ok ? "ok  " : "FAIL", set, line);
	fflush(stdout);
	free_tensors(in, 64);
	free_io(c);
	return ok;
}

static int
cmd_test(Ctx *c, const Opts *o)
{
	int pass = 0, fail = 0, rc;

	if (o->npos < 2)
		return say(EXIT_USAGE, "test wants a bundle and test folders "
			   "(moert test --help)");
	if ((rc = open_bundle(c, o->pos[0])) || (rc = open_device(c, o->device)))
		return rc;
	for (int d = 1; d < o->npos; d++) {
		char **sets = test_sets(o->pos[d]);
		if (!sets[0]) {
			printf("FAIL %s  no test_data_set_* folders\n", o->pos[d]);
			fail++;
		}
		for (int i = 0; sets[i]; i++) {
			for (int k = 0; k < MAX(o->ntile, 1); k++)
				if (test_case(c, o, sets[i], o->ntile ? o->tile[k] : 0))
					pass++;
				else
					fail++;
			free(sets[i]);
		}
		free(sets);
	}
	printf("%d passed, %d failed\n", pass, fail);
	return fail ? EXIT_FAIL : EXIT_OK;
}

/* --- moert bench ------------------------------------------------------------- */

/*
 * Seeded uniform values in [-1, 1) (1..3 for integers), never zero.  With
 * skew, each row is skew% a vector shared by all rows: tokens alike route
 * alike, so a few experts get most of the work (skewed routing).
 */
static void
fill_random(Tensor *t, uint64_t seed, int skew)
{
	int64_t cols = t->rank ? t->dim[t->rank - 1] : 1;

	for (int64_t i = 0; i < tensor_numel(t); i++) {
		uint64_t r = mix64(seed ^ mix64((uint64_t)i));
		uint64_t c = mix64(~seed ^ mix64((uint64_t)(i % cols)));
		double v = (double)(r >> 11) * 0x1p-52 - 1.0;
		double shared = (double)(c >> 11) * 0x1p-52 - 1.0;
		v = (skew * shared + (100 - skew) * v) / 100;
		if (!dtype_is_float(t->dt))
			v = (double)(1 + r % 3);
		dtype_store(t->dt, t->data, (size_t)i, v);
		if (dtype_load(t->dt, t->data, (size_t)i) == 0)
			dtype_store(t->dt, t->data, (size_t)i, 0.5);
	}
}

static int
bench_inputs(Ctx *c, const Opts *o, Tensor *in)
{
	moert_tensor_info ti;
	moert_status s;

	for (int i = 0; i < moert_num_inputs(c->p); i++) {
		if ((s = moert_input_info(c->p, i, o->tokens, &ti)))
			return rt_fail(s);
		if (tensor_alloc(&in[i], dtype_of(ti.dtype), ti.rank, ti.dim))
			return say(EXIT_USAGE, "input '%s' too large", ti.name);
		fill_random(&in[i], o->seed + (uint64_t)i, o->skew);
	}
	return EXIT_OK;
}

/* Elements whose bytes are all `byte` (after a run over that poison). */
static void
mark_poison(const Tensor *t, unsigned char byte, unsigned char *hit)
{
	size_t es = (size_t)(dtype_bits(t->dt) + 7) / 8, n = tensor_nbytes(t) / es;
	const unsigned char *p = t->data;

	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		while (k < es && p[i * es + k] == byte)
			k++;
		hit[i] &= k == es;
	}
}

/*
 * Every output element written: run once over 0xFF and once over 0x00;
 * an element is unwritten only if it kept the poison both times.
 */
static int
check_written(Ctx *c, int64_t tokens, int graph)
{
	static const unsigned char poison[2] = {0xff, 0x00};
	int rc = EXIT_OK;

	for (int i = 0; i < moert_num_outputs(c->p) && !rc; i++) {
		moert_tensor_info ti;
		unsigned char *hit;
		size_t n, bad = 0;
		Tensor t;
		moert_status s = moert_output_info(c->p, i, tokens, &ti);

		n = ti.bytes;
		hit = malloc(n ? n : 1);
		memset(hit, 1, n);
		for (int k = 0; k < 2 && !s; k++) {
			if ((s = moert_memset(c->dev, c->out[i], poison[k], ti.bytes)) ||
			    (s = run_once(c, tokens, graph)) ||
			    (s = download(c, i, tokens, &t)))
				break;
			mark_poison(&t, poison[k], hit);
			n = tensor_nbytes(&t) / ((size_t)(dtype_bits(t.dt) + 7) / 8);
			tensor_free(&t);
		}
		for (size_t e = 0; !s && e < n; e++)
			bad += hit[e];
		free(hit);
		if (s)
			rc = rt_fail(s);
		else if (bad)
			rc = say(EXIT_FAIL, "output '%s': %zu of %zu elements "
				 "never written", ti.name, bad, n);
	}
	return rc;
}

static void
report(Ctx *c, const Opts *o, double us)
{
	double flops = 0, bytes = 0, tf = 0, gb = 0;

	if (moert_cost(c->p, o->tokens, &flops, &bytes) == MOERT_OK && us > 0) {
		tf = flops / (us * 1e-6) / 1e12;
		gb = bytes / (us * 1e-6) / 1e9;
	}
	printf("%s: T=%lld%s: median %.2f us over %d runs", c->path,
	       (long long)o->tokens, o->graph ? " (graph)" : "", us, o->iters);
	if (flops > 0 || bytes > 0)
		printf(", %.2f TFLOP/s, %.1f GB/s", tf, gb);
	printf("\nbench bundle=%s device=\"%s\" code=%s tokens=%lld graph=%d "
	       "iters=%d warmup=%d median_us=%.3f flops=%.0f bytes=%.0f "
	       "tflops=%.3f gbps=%.1f\n", c->path, moert_device_name(c->dev),
	       moert_code_section(c->p), (long long)o->tokens, o->graph,
	       o->iters, o->warmup, us, flops, bytes, tf, gb);
}

/* --profile: each step timed alone, after the bench's runs. */
static int
profile(Ctx *c, const Opts *o)
{
	int n = moert_num_steps(c->p);
	double *us = calloc((size_t)n + 1, sizeof *us), sum = 0;
	moert_status s = moert_profile(c->p, o->tokens, c->in, c->out, o->iters, us);

	if (s) {
		free(us);
		return rt_fail(s);
	}
	for (int i = 0; i < n; i++)
		sum += us[i];
	printf("profile (T=%lld, each step alone, median us):\n", (long long)o->tokens);
	for (int i = 0; i < n; i++)
		if (us[i] > 0)
			printf("  %-40s %10.2f  %5.1f%%\n", moert_step_name(c->p, i), us[i],
			       sum > 0 ? 100 * us[i] / sum : 0);
	printf("  %-40s %10.2f\n", "sum", sum);
	free(us);
	return EXIT_OK;
}

static int
cmd_bench(Ctx *c, const Opts *o)
{
	Tensor in[64] = {0};
	moert_status s;
	double us = 0;
	int rc;

	if (o->npos != 1 || o->tokens < 1)
		return say(EXIT_USAGE, "bench wants one bundle and --tokens=T "
			   "(moert bench --help)");
	if (!(rc = open_bundle(c, o->pos[0])) && !(rc = bench_inputs(c, o, in)) &&
	    !(rc = open_device(c, o->device))) {
		if ((s = upload(c, in, o->tokens)))
			rc = rt_fail(s);
		else if (!(rc = check_written(c, o->tokens, o->graph))) {
			if ((s = moert_bench(c->p, o->tokens, c->in, c->out, o->graph,
					     o->warmup, o->iters, &us)))
				rc = rt_fail(s);
			else
				report(c, o, us);
			if (!rc && o->profile)
				rc = profile(c, o);
		}
	}
	free_tensors(in, 64);
	return rc;
}

/* --- moert verify, moert info -------------------------------------------------- */

static void
summary(const char *path, const Bundle *b)
{
	const Manifest *m = b->manifest;
	uint64_t real = 0, synth = 0;
	int nreal = 0, nlaunch = 0, ninit = 0;

	printf("%s: ok: format %u, moec %s, %d sections, %llu bytes\n", path,
	       b->version, b->moec, b->nsec, (unsigned long long)b->size);
	for (int i = 0; i < b->nsec; i++)
		printf("  %-16s %12llu bytes at %-10llu crc32c %08x\n",
		       b->sec[i].name, (unsigned long long)b->sec[i].size,
		       (unsigned long long)b->sec[i].off, b->sec[i].crc);
	for (int i = 0; i < m->nw; i++) {
		if (m->w[i].synth)
			synth += m->w[i].bytes;
		else
			real += m->w[i].bytes, nreal++;
	}
	for (int i = 0; i < m->nstep; i++)
		m->step[i].kind == STEP_INIT ? ninit++ : nlaunch++;
	printf("  %d inputs, %d outputs, max_tokens %lld, arena %llu bytes\n",
	       m->nin, m->nout, (long long)m->max_tokens,
	       (unsigned long long)m->arena);
	printf("  %d weights: %d real (%llu bytes), %d synthetic (%llu bytes", m->nw,
	       nreal, (unsigned long long)real, m->nw - nreal,
	       (unsigned long long)synth);
	if (m->synthetic)
		printf(", seed %llu", (unsigned long long)m->seed);
	printf(")\n  %d kernels, %d init steps, %d run steps\n", m->nk, ninit,
	       nlaunch);
}

static int
cmd_verify(Ctx *c, const Opts *o)
{
	Arena *a;
	Bundle b;
	Diag d;
	int rc;

	if (o->npos != 1)
		return say(EXIT_USAGE, "verify wants one bundle (moert verify --help)");
	diag_init(&d, stderr);
	if (!(c->buf = bundle_read_file(o->pos[0], &c->len, &rc, &d)))
		return rc == 1 ? EXIT_USAGE : EXIT_FAIL;
	a = arena_new(0);
	rc = bundle_read(a, o->pos[0], c->buf, c->len, &b, &d);
	if (!rc)
		summary(o->pos[0], &b);
	arena_free(a);
	return rc ? EXIT_FAIL : EXIT_OK;
}

static int
cmd_info(Ctx *c, const Opts *o)
{
	moert_status s;

	if (o->npos)
		return say(EXIT_USAGE, "info takes no arguments");
	if ((s = moert_open(o->device, &c->dev)))
		return say(EXIT_FAIL, "%s: %s", moert_status_name(s),
			   moert_last_error());
	printf("device %d: %s\n", o->device, moert_device_name(c->dev));
	return EXIT_OK;
}

/* --- main ------------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(Ctx *, const Opts *);
	const char *usage, *help;
} cmds[] = {
	{"run", cmd_run, "run X.moeb --input NAME=FILE ... [-o DIR] [--pb] [--graph] [--tokens=T]",
	 "Run the bundle on the GPU.  Inputs are .npy or .pb files (f32 files are\n"
	 "rounded for bf16/f8 inputs); T is read off the dims declared T.  Each output\n"
	 "is written as DIR/NAME.npy (or .pb with --pb); DIR defaults to '.'."},
	{"test", cmd_test, "test X.moeb DIR... [--graph] [--tile=T,...]",
	 "Run every DIR/test_data_set_*/input_N.pb (inputs in order) and compare with\n"
	 "output_N.pb at the tolerance of the output's dtype.  One line per case, then\n"
	 "'N passed, N failed'; exit 1 if any failed.  With --tile, each set runs once\n"
	 "per T listed, its R rows repeated to T (row r is row r mod R) in the inputs\n"
	 "and the expected outputs: for blocks that act on each token alone."},
	{"bench", cmd_bench, "bench X.moeb --tokens=T [--graph] [--iters=N] [--warmup=N] [--seed=S] [--skew=PCT] [--profile]",
	 "Time the launch plan with device events on seeded random inputs (never zero).\n"
	 "Outputs are poisoned first and must be fully written.  Prints the median in\n"
	 "microseconds, TFLOP/s and GB/s from the manifest's cost line, and a one-line\n"
	 "'bench key=value ...' summary.  Defaults: 100 iters, 10 warmup."},
	{"verify", cmd_verify, "verify X.moeb",
	 "Check the bundle's structure, checksums and manifest without a GPU and print\n"
	 "a summary.  Exit 1 if the bundle is refused."},
	{"info", cmd_info, "info [--device=N]", "Name and compute capability of the GPU."},
};

static int
usage(FILE *f, int code)
{
	fputs("usage: moert COMMAND [ARGS]   (moert COMMAND --help for more)\n", f);
	for (size_t i = 0; i < NELEM(cmds); i++)
		fprintf(f, "  moert %s\n", cmds[i].usage);
	fputs("options everywhere: --device=N (default 0); env MOERT_LIBCUDA "
	      "overrides libcuda.so.1\nexit: 0 ok, 1 check failed, 2 bad usage "
	      "or input\n", f);
	return code;
}

int
main(int argc, char **argv)
{
	Opts o;
	Ctx c = {0};
	int rc;

	if (argc < 2)
		return usage(stderr, EXIT_USAGE);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		for (size_t i = 0; argc > 2 && i < NELEM(cmds); i++)
			if (!strcmp(argv[2], cmds[i].name))
				return printf("usage: moert %s\n\n%s\n", cmds[i].usage,
					      cmds[i].help), EXIT_OK;
		return usage(stdout, EXIT_OK);
	}
	for (size_t i = 0; i < NELEM(cmds); i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		if (parse_opts(&o, argc, argv))
			return EXIT_USAGE;
		if (o.help)
			return printf("usage: moert %s\n\n%s\n", cmds[i].usage,
				      cmds[i].help), EXIT_OK;
		rc = cmds[i].fn(&c, &o);
		close_ctx(&c);
		return rc;
	}
	say(EXIT_USAGE, "unknown command '%s'", argv[1]);
	return usage(stderr, EXIT_USAGE);
}
