/*
 * moert.c — the runtime's command line: run a bundle on the GPU, test it
 * against ONNX-layout reference outputs, benchmark it, verify it without a
 * GPU, and describe the device.
 *
 * Exit codes: 0 success, 1 a check or test failed (or no usable GPU),
 * 2 bad usage or bad input (a bundle refused by verify too).  The bundle and the inputs are checked before
 * the driver is touched, so a bad file is reported as such on any host.
 */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "moert.h"
#include "opt.h"
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

/* --- options: one table (opt.h), docs/cli.md from it --------------------------- */

enum { RUN = 1, TEST = 2, BENCH = 4, VERIFY = 8, INFO = 16, TUNE = 32 };

static const OptCmd moert_cmds[] = {	/* ORDER: the bits above, and run_cmd[] */
	{"run", "X.moeb", 1, 1, "run a bundle on the GPU",
	 "Run the bundle on the GPU.  Inputs are .npy or .pb files (f32 files are rounded for bf16/f8\n"
	 "inputs); T is read off the dims declared T.  Each output is written as DIR/NAME.npy (.pb with\n"
	 "--pb), NAME made one safe file name (docs/cli.md)."},
	{"test", "X.moeb DIR...", 2, 64, "compare a bundle's results with ONNX test sets",
	 "Run every DIR/test_data_set_*/input_N.pb (inputs in order) and compare with output_N.pb at\n"
	 "the tolerance of the output's dtype.  One line per case, then 'N passed, N failed'; exit 1\n"
	 "if any failed.  With --tile, each set runs once per T listed, its R rows repeated to T (row r\n"
	 "is row r mod R) in the inputs and the expected outputs: for blocks that act on each token alone.\n"
	 "A bundle with route lines has its routing checked first: against the set's routing_N.pb\n"
	 "(moec run --test-data writes them) exactly, else the rows that fail against the device's own\n"
	 "values: its router logits, or their sigmoids or softmax plus the selection bias, as the route\n"
	 "line says.  A flip at a near tie (within the output's tolerance) is reported and its row\n"
	 "left out of the comparison; every other mismatch fails as before."},
	{"bench", "X.moeb", 1, 1, "time a bundle's launch plan",
	 "Time the launch plan with device events on seeded random inputs (never zero).  Outputs are\n"
	 "poisoned first and must be fully written.  Prints the median in microseconds, TFLOP/s and\n"
	 "GB/s from the manifest's cost line, and a one-line 'bench key=value ...' summary."},
	{"verify", "X.moeb", 1, 1, "check a bundle without a GPU",
	 "Check the bundle's structure, checksums and manifest without a GPU and print a summary.\n"
	 "Exit 2 if the bundle is refused (a bad file, as everywhere)."},
	{"info", "", 0, 0, "describe the GPU", "Name and compute capability of the GPU."},
	{"tune", "X.moeb", 1, 1, "time candidate GEMM tilings, write a tuning table",
	 "Time every candidate kernel of a bundle compiled with `moec compile --tune-candidates` at the\n"
	 "token counts of --tokens that its key's T bucket holds (else at the bucket's last T), on seeded\n"
	 "random inputs: the plan runs up to the GEMM, the plan's own launch writes the reference\n"
	 "output, each candidate must match it (relative L2 within its dtype's tolerance; a wrong one\n"
	 "is rejected) and is timed alone (median; an L2 flush before each launch).  For each key the\n"
	 "fastest correct variant (geometric mean over those T, and the skews of --skew, of its time over\n"
	 "the plan's) goes into\n"
	 "the table -o FILE (moec-tuning 2, docs/codegen.md) for `moec compile --tuning=FILE`.  Exit 1\n"
	 "if some key has no correct candidate (the table then holds the others)."},
};

/* the range and the choices are left out where they do not apply */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const Opt moert_opts[] = {
	{"input", 0, OPT_STR, "NAME=FILE", NULL, "an input (.npy or .pb); once per input", RUN},
	{"output", 'o', OPT_STR, "DIR", ".", "write the outputs into DIR (created if missing)", RUN},
	{"pb", 0, OPT_FLAG, NULL, NULL, "write outputs as .pb (TensorProto), not .npy", RUN},
	{"tokens", 0, OPT_INT, "T", NULL, "the token count (run, test: default from the inputs' T dims)",
	 RUN | TEST | BENCH, 1, INT32_MAX},
	{"tokens", 0, OPT_STR, "T,...", "1,16,64,256,4096", "token counts to time at (each key at "
	 "those in its T bucket)", TUNE},
	{"output", 'o', OPT_STR, "FILE", NULL, "the tuning table to write", TUNE},
	{"flush-mb", 0, OPT_INT, "MB", "128", "device memory written before each timed launch "
	 "(evicts L2, as a real layer finds it; 0: none)", TUNE, 0, 65536},
	{"graph", 0, OPT_FLAG, NULL, NULL, "replay the launch plan as a CUDA graph", RUN | TEST | BENCH},
	{"iters", 0, OPT_INT, "N", "100", "timed runs", BENCH, 1, 100000},
	{"iters", 0, OPT_INT, "N", "50", "timed launches of each candidate", TUNE, 1, 10000},
	{"warmup", 0, OPT_INT, "N", "10", "untimed runs first", BENCH, 0, 100000},
	{"warmup", 0, OPT_INT, "N", "5", "untimed launches first", TUNE, 0, 10000},
	{"seed", 0, OPT_INT, "S", "1", "seed of the random inputs", BENCH | TUNE, 0, INT64_MAX},
	{"skew", 0, OPT_INT, "PCT", "0", "percent of each token shared by all (skewed routing)", BENCH,
	 0, 100},
	{"skew", 0, OPT_STR, "PCT,...", "0", "skews to time at, each the percent of each token shared by "
	 "all (skewed routing); a variant's score is over every T and skew", TUNE},
	{"tile", 0, OPT_STR, "T,...", NULL, "run each set at these token counts, its rows repeated", TEST},
	{"profile", 0, OPT_FLAG, NULL, NULL, "then time each step alone", BENCH},
	{"dump", 0, OPT_STR, "BUF=FILE", NULL, "then write arena buffer BUF at T, as the bench's inputs "
	 "leave it, to FILE (raw bytes; once per buffer)", BENCH},
	{"device", 0, OPT_INT, "N", "0", "the GPU's ordinal", RUN | TEST | BENCH | INFO | TUNE, 0, 1024},
	{"program", 0, OPT_STR, "NAME", NULL, "the program of a whole-model bundle (layer.N); verify: "
	 "its summary", RUN | TEST | BENCH | VERIFY},
	{"ep-rank", 0, OPT_INT, "R", NULL, "an expert-parallel bundle (moec compile --ep=N): run "
	 "program rank.R", RUN | TEST | BENCH, 0, 65535},
	{"ep-size", 0, OPT_INT, "N", NULL, "with --ep-rank: the ranks (must be the bundle's N; this "
	 "tool runs N = 1, on a one-rank NCCL communicator)", RUN | TEST | BENCH, 1, 65536},
};
#pragma GCC diagnostic pop

static const OptTool moert_tool = {
	"moert", "the runtime of moec's kernel bundles (env MOERT_LIBCUDA overrides libcuda.so.1)",
	moert_cmds, (int)NELEM(moert_cmds), moert_opts, (int)NELEM(moert_opts),
};

typedef struct Opts Opts;
struct Opts {
	OptArgs a;
	const char *const *pos;	/* positional arguments */
	int npos;
	const char *outdir;
	const char *program;	/* --program */
	int ep_rank, ep_size;	/* --ep-rank, --ep-size (-1, 0: none) */
	char ep_prog[32];	/* "rank.R" */
	int pb, graph, device, iters, warmup, profile;
	int64_t tokens;
	uint64_t seed;
	int skew;		/* bench: percent of each token that is shared (0..100) */
	int64_t tile[16];	/* test: token counts each set's rows are repeated to */
	int ntile;
};

static int64_t
int_opt(const OptArgs *a, const char *name, int64_t none)
{
	int64_t v;

	return opt_int(a, name, &v) ? v : none;
}

/* OPT_OK, or the exit code (0 after --help). */
static int
tile_opt(Opts *o, const char *v)
{
	char buf[256], *save = NULL, *end;

	snprintf(buf, sizeof buf, "%s", v);
	o->ntile = 0;
	for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		long long n = strtoll(p, &end, 10);
		if (o->ntile == 16 || *end || n < 1 || n > INT32_MAX)
			return opt_bad(&o->a, "tile", v, "wants up to 16 token counts in 1..2147483647");
		o->tile[o->ntile++] = n;
	}
	return o->ntile ? 0 : opt_bad(&o->a, "tile", v, "wants token counts");
}

/* OPT_OK, or the exit code (0 after --help). */
static int
parse_opts(Opts *o, int cmd, int argc, char **argv)
{
	int rc = opt_parse(&moert_tool, cmd, argc, argv, &o->a);
	const char *v;

	if (rc)
		return rc == OPT_HELP ? EXIT_OK : EXIT_USAGE;
	o->pos = o->a.pos, o->npos = o->a.npos;
	o->outdir = opt_str(&o->a, "output");
	o->program = opt_str(&o->a, "program");
	o->ep_rank = (int)int_opt(&o->a, "ep-rank", -1);
	o->ep_size = (int)int_opt(&o->a, "ep-size", 0);
	if ((o->ep_rank >= 0) != (o->ep_size > 0) || (o->ep_rank >= 0 && o->program))
		return opt_error(&o->a, "--ep-rank and --ep-size go together, without --program"),
		       EXIT_USAGE;
	if (o->ep_rank >= o->ep_size && o->ep_size > 0)
		return opt_error(&o->a, "--ep-rank=%d is not a rank of --ep-size=%d", o->ep_rank,
				 o->ep_size), EXIT_USAGE;
	if (o->ep_rank >= 0) {
		snprintf(o->ep_prog, sizeof o->ep_prog, "rank.%d", o->ep_rank);
		o->program = o->ep_prog;
	}
	o->pb = opt_has(&o->a, "pb");
	o->graph = opt_has(&o->a, "graph");
	o->profile = opt_has(&o->a, "profile");
	o->tokens = 1 << cmd == TUNE ? -1 : int_opt(&o->a, "tokens", -1);	/* tune: a list */
	o->iters = (int)int_opt(&o->a, "iters", 0);
	o->warmup = (int)int_opt(&o->a, "warmup", 0);
	o->seed = (uint64_t)int_opt(&o->a, "seed", 0);
	o->skew = 1 << cmd == TUNE ? 0 : (int)int_opt(&o->a, "skew", 0);	/* tune: a list */
	o->device = (int)int_opt(&o->a, "device", 0);
	if ((v = opt_str(&o->a, "tile")) && tile_opt(o, v))
		return EXIT_USAGE;
	for (int k = 0; (v = opt_next(&o->a, "input", &k));) {
		const char *eq = strchr(v, '=');
		if (!eq || eq == v || !eq[1])
			return opt_bad(&o->a, "input", v, "is not NAME=FILE");
	}
	return -1;
}

/* --- bundle, device and tensors ------------------------------------------- */

typedef struct Ctx Ctx;
struct Ctx {
	const char *path;
	unsigned char *buf;	/* the bundle, until it is on the device */
	size_t len;
	moert_program *p;	/* the program run */
	moert_program *owner;	/* the bundle's first program, which owns p */
	moert_device *dev;
	moert_comm *comm;	/* an expert-parallel program's (one rank) */
	uint64_t in[64], out[64];	/* device buffers */
};

/* Read and verify the bundle, and pick the program (--program; a bundle of
 * several must be told which); no driver is involved yet. */
static int
open_bundle(Ctx *c, const char *path, const char *program, int ep_size)
{
	moert_status s;
	Diag d;
	int rc;

	memset(c, 0, sizeof *c);
	c->path = path;
	diag_init(&d, NULL);
	if (!(c->buf = bundle_read_file(path, &c->len, &rc, &d)))
		return say(EXIT_USAGE, "%s", d.last);
	if ((s = moert_load_host(c->buf, c->len, &c->owner)))
		return say(EXIT_USAGE, "%s: %s: %s", path, moert_status_name(s),
			   moert_last_error());
	c->p = c->owner;
	if (program && !(c->p = moert_find_program(c->owner, program)))
		return say(EXIT_USAGE, "%s: --program: %s", path, moert_last_error());
	if (!program && moert_num_programs(c->owner) > 1)
		return say(EXIT_USAGE, "%s holds %d programs (%s ... %s): name one with --program",
			   path, moert_num_programs(c->owner), moert_program_name(c->owner),
			   moert_program_name(moert_program_at(c->owner,
							       moert_num_programs(c->owner) - 1)));
	if (moert_num_inputs(c->p) > 64 || moert_num_outputs(c->p) > 64)
		return say(EXIT_USAGE, "%s: more than 64 inputs or outputs", path);
	int n, r = moert_ep_rank(c->p, &n);
	if (ep_size && r < 0)
		return say(EXIT_USAGE, "%s: --ep-size=%d, but program %s is not expert-parallel", path,
			   ep_size, moert_program_name(c->p));
	if (ep_size && n != ep_size)
		return say(EXIT_USAGE, "%s: --ep-size=%d, but program %s is rank %d of %d", path,
			   ep_size, moert_program_name(c->p), r, n);
	if (!ep_size && r >= 0)
		return say(EXIT_USAGE, "%s: program %s is rank %d of %d (expert parallelism): give "
			   "--ep-rank=%d --ep-size=%d", path, moert_program_name(c->p), r, n, r, n);
	return EXIT_OK;
}

/* An expert-parallel program's all_to_all steps need a communicator: with
 * one rank this tool makes one of its own (NCCL, one rank); N ranks run
 * through the API, one thread or process per GPU (docs/runtime.md §3d). */
static int
open_comm(Ctx *c)
{
	char id[MOERT_NCCL_ID_BYTES];
	int n, r = moert_ep_rank(c->p, &n);
	moert_status s;

	if (r < 0)
		return EXIT_OK;
	if (n > 1)
		return say(EXIT_USAGE, "%s: program %s is rank %d of %d: its peers run in other "
			   "threads or processes (moert_comm_init, moert_program_set_comm); this tool "
			   "runs one-rank bundles (moec compile --ep=1)", c->path,
			   moert_program_name(c->p), r, n);
	if ((s = moert_nccl_unique_id(id)) || (s = moert_comm_init(c->dev, 1, 0, id, &c->comm)) ||
	    (s = moert_program_set_comm(c->p, c->comm)))
		return rt_fail(s);
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
	return open_comm(c);
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
	moert_unload(c->owner);
	moert_comm_free(c->comm);
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
	const char *v;

	for (int k = 0; (v = opt_next(&o->a, "input", &k));) {
		const char *file = strchr(v, '=') + 1;
		if ((i = find_input(c, v)) < 0)
			return say(EXIT_USAGE, "%s has no input named '%.*s'", c->path,
				   (int)(file - v - 1), v);
		if (set[i]++)
			return say(EXIT_USAGE, "input %d given twice", i);
		if (read_input(c, i, file, &in[i], tokens, 0, why, sizeof why))
			return say(EXIT_USAGE, "%s", why);
	}
	for (i = 0; i < moert_num_inputs(c->p); i++)
		if (!set[i]) {
			moert_input_info(c->p, i, 1, &ti);
			return say(EXIT_USAGE, "missing --input %s=FILE", ti.name);
		}
	if (*tokens < 0 && moert_is_static(c->p))
		*tokens = 1;	/* a static model: T plays no part */
	if (*tokens < 0)
		return say(EXIT_USAGE, "no input has a T dim: give --tokens=T");
	return EXIT_OK;
}

/*
 * Where output i goes: DIR/NAME.npy (.pb), NAME the output's name made one
 * safe file name (file_safe_name: a bundle's names never leave DIR).
 */
static char *
output_path(Ctx *c, const Opts *o, int i)
{
	moert_tensor_info ti;
	char safe[210], file[256];

	moert_output_info(c->p, i, 1, &ti);
	file_safe_name(safe, sizeof safe, ti.name);
	snprintf(file, sizeof file, "%s.%s", safe, o->pb ? "pb" : "npy");
	return file_join(o->outdir, file);
}

/* Before the GPU is touched: DIR made, no two outputs on one file, no
 * output on an input file. */
static int
check_outputs(Ctx *c, const Opts *o)
{
	int n = moert_num_outputs(c->p), rc = EXIT_OK;
	char *path[64] = {0};
	const char *v;
	Diag d;

	diag_init(&d, NULL);
	if (file_make_dir(o->outdir, &d))
		return say(EXIT_USAGE, "%s", d.last);
	for (int i = 0; i < n && !rc; i++) {
		path[i] = output_path(c, o, i);
		for (int k = 0; k < i && !rc; k++)
			if (!strcmp(path[k], path[i]))
				rc = say(EXIT_USAGE, "%s: outputs %d and %d would both be written here",
					 path[i], k, i);
		for (int k = 0; !rc && (v = opt_next(&o->a, "input", &k));)
			if (file_same(path[i], strchr(v, '=') + 1))
				rc = say(EXIT_USAGE, "%s: output %d would overwrite an input file",
					 path[i], i);
	}
	for (int i = 0; i < n; i++)
		free(path[i]);
	return rc;
}

static int
write_outputs(Ctx *c, const Opts *o, int64_t tokens)
{
	char shape[160], *path;
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
		path = output_path(c, o, i);
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

	if (!(rc = open_bundle(c, o->pos[0], o->program, o->ep_size)) && !(rc = run_inputs(c, o, in, &tokens)) &&
	    !(rc = check_outputs(c, o)) && !(rc = open_device(c, o->device))) {
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

/* Output i at T and set/output_i.pb (its rows repeated to tile), shaped
 * alike; 0, or -1 with the reason appended to line. */
static int
output_pair(Ctx *c, const char *set, int i, int64_t tokens, int64_t tile, Tensor *got,
	    Tensor *want, char *line, size_t n)
{
	char name[32], a[160], b[160], *file;
	size_t k = strlen(line);
	Diag d;
	int rc = -1;

	memset(got, 0, sizeof *got);
	memset(want, 0, sizeof *want);
	snprintf(name, sizeof name, "output_%d.pb", i);
	file = file_join(set, name);
	diag_init(&d, NULL);
	if (tensor_read(file, want, &d))
		snprintf(line + k, n - k, "  %s", d.last);
	else if (tile && tile_rows(want, tile))
		snprintf(line + k, n - k, "  %s: cannot repeat its rows", file);
	else if (download(c, i, tokens, got))
		snprintf(line + k, n - k, "  %s", moert_last_error());
	else if (unflatten(got, want), got->rank != want->rank ||
		 tensor_numel(got) != tensor_numel(want) ||
		 memcmp(got->dim, want->dim, sizeof got->dim[0] * (size_t)got->rank)) {
		tensor_shape_string(a, sizeof a, got);
		tensor_shape_string(b, sizeof b, want);
		snprintf(line + k, n - k, "  %s: shape %s, reference %s", got->name, a, b);
	} else {
		rc = 0;
	}
	free(file);
	if (rc) {
		tensor_free(want);
		tensor_free(got);
	}
	return rc;
}

/* The dtype whose tolerance checks output t (the bundle's precision). */
static DType
tolerance_of(Ctx *c, const Tensor *t)
{
	DType prec;

	if (precision_parse(moert_precision(c->p), strlen(moert_precision(c->p)), &prec) == 0)
		return tolerance_dtype(t->dt, prec);
	return t->dt;
}

/* Output i against set/output_i.pb, without the rows rd leaves out;
 * appends "  y: rel_l2 .. max_abs ..". */
static int
compare_output(Ctx *c, const char *set, int i, int64_t tokens, int64_t tile,
	       const RouteDiff *rd, char *line, size_t n)
{
	size_t k;
	Tensor got, want;
	Compare cmp;
	int ok;

	if (output_pair(c, set, i, tokens, tile, &got, &want, line, n))
		return 0;
	ok = routing_close(&got, &want, rd, tolerance_of(c, &got), &cmp);
	k = strlen(line);
	k += (size_t)snprintf(line + k, n - k, "  %s: rel_l2 %.1e max_abs %.1e", got.name,
			      cmp.rel_l2, cmp.max_abs);
	if (!ok && k < n)
		snprintf(line + k, n - k, " (%lld outside tolerance)", (long long)cmp.nbad);
	tensor_free(&want);
	tensor_free(&got);
	return ok;
}

/* --- routing: a flip at a near tie is not a wrong kernel ----------------------- */

/* Route i's selection bias as the device holds it (f32 [E]); NULL: none
 * (or *s an error: the parser made sure the weight is there). */
static float *
device_bias(Ctx *c, const moert_route_info *ri, moert_status *s)
{
	moert_tensor_info w = {0};
	float *bias = NULL;
	void *raw;
	int i, n = moert_num_weights(c->p);

	*s = MOERT_OK;
	if (!ri->bias)
		return NULL;
	for (i = 0; i < n; i++)
		if (!moert_weight_info(c->p, i, &w) && !strcmp(w.name, ri->bias))
			break;
	raw = xmalloc((i < n ? w.bytes : 0) + 1);
	if (!(*s = moert_read_weight(c->p, ri->bias, raw, i < n ? w.bytes : 0))) {
		bias = xmalloc(sizeof *bias * (size_t)ri->experts + 1);
		for (int x = 0; x < ri->experts; x++)
			bias[x] = (float)dtype_load(dtype_of(w.dtype), raw, (size_t)x);
	}
	free(raw);
	return bias;
}

/* Route i as the device decided it at T: the experts it picked and the
 * values it ranked, from its own logits (read back by running the plan up
 * to their last use) and its selection bias (route_select). */
static moert_status
device_routing(Ctx *c, int i, int64_t tokens, Routing *r)
{
	moert_route_info ri;
	size_t lb, ib, row;
	moert_status s;
	DType dt;
	void *raw;

	memset(r, 0, sizeof *r);
	if ((s = moert_route_info_get(c->p, i, &ri)) ||
	    (s = moert_buffer_size(c->p, ri.logits, tokens, &lb)) ||
	    (s = moert_buffer_size(c->p, ri.ids, tokens, &ib)))
		return s;
	dt = dtype_of(ri.dtype);
	row = (size_t)ri.experts * (size_t)dtype_bits(dt) / 8;
	*r = (Routing){.T = (int64_t)(lb / row), .E = ri.experts, .k = ri.k, .ngroup = ri.groups,
		       .topk_group = ri.topk_group, .top2 = ri.top2, .what = "logit"};
	if (ib < (size_t)r->T * (size_t)r->k * 4)
		return MOERT_EFORMAT;
	raw = xmalloc(lb + 1);
	r->val = xmalloc(sizeof *r->val * (size_t)(r->T * r->E) + 1);
	r->ids = xmalloc(ib + 1);
	if (!(s = moert_read_buffer(c->p, ri.logits, tokens, c->in, c->out, raw, lb)) &&
	    !(s = moert_read_buffer(c->p, ri.ids, tokens, c->in, c->out, r->ids, ib)))
		for (int64_t x = 0; x < r->T * r->E; x++)
			r->val[x] = (float)dtype_load(dt, raw, (size_t)x);
	free(raw);
	float *bias = s ? NULL : device_bias(c, &ri, &s);
	if (!s)
		routing_select(r, (RouteSelect)route_select_parse(ri.select, strlen(ri.select)), bias);
	free(bias);
	return s;
}

/* Rows of output o that are outside atol + rtol*|ref|, marked in bad[T];
 * *atol, *rtol the output's tolerance. */
static void
bad_rows(Ctx *c, const char *set, int o, int64_t tokens, int64_t tile, int64_t T,
	 unsigned char *bad, double *atol, double *rtol)
{
	Tensor got, want;
	char skip[512] = "";
	double rel;

	if (output_pair(c, set, o, tokens, tile, &got, &want, skip, sizeof skip))
		return;
	tolerance_for(tolerance_of(c, &got), atol, rtol, &rel);
	int64_t rest = tensor_numel(&want) / T;
	size_t rb = (size_t)rest * (size_t)dtype_bits(want.dt) / 8;
	for (int64_t t = 0; rest * T == tensor_numel(&want) && t < T; t++) {
		Tensor ga = got, wa = want;
		Compare cmp;
		ga.rank = wa.rank = 1;
		ga.dim[0] = wa.dim[0] = rest;
		ga.data = (char *)got.data + (size_t)t * rb;
		wa.data = (char *)want.data + (size_t)t * rb;
		tensor_compare(&ga, &wa, *atol, *rtol, &cmp);
		bad[t] |= cmp.nbad > 0;
	}
	tensor_free(&got);
	tensor_free(&want);
}

/* The reference's routing decisions (moec run --test-data writes them):
 * set/routing_N.pb and routing_N_logits.pb (the values the router ranked:
 * logits, or scores plus the selection bias), each group attribute (and
 * what the values are) taken from the bundle's route of the same experts
 * and k.  0 none or unreadable. */
static int
reference_routing(const char *set, int64_t tile, const RouteLog *dev, RouteLog *ref)
{
	for (int i = 0; i < 64; i++) {
		char name[48], *f;
		Tensor ids = {0}, val = {0};
		Routing r = {0};
		Diag d;
		int bad;
		diag_init(&d, NULL);
		snprintf(name, sizeof name, "routing_%d.pb", i);
		f = file_join(set, name);
		bad = !file_exists(f) || tensor_read(f, &ids, &d);
		free(f);
		snprintf(name, sizeof name, "routing_%d_logits.pb", i);
		f = file_join(set, name);
		bad = bad || tensor_read(f, &val, &d) || ids.dt != DT_I32 || val.dt != DT_F32 ||
		      ids.rank != 2 || val.rank != 2 || ids.dim[0] != val.dim[0] ||
		      (tile && (tile_rows(&ids, tile) || tile_rows(&val, tile)));
		free(f);
		if (!bad) {
			r = (Routing){.T = ids.dim[0], .E = val.dim[1], .k = ids.dim[1], .ngroup = 1,
				      .topk_group = 1, .ids = ids.data, .val = val.data, .what = "logit"};
			ids.data = val.data = NULL;
			for (int k = 0; k < dev->n; k++)
				if (dev->r[k].E == r.E && dev->r[k].k == r.k)
					r.ngroup = dev->r[k].ngroup, r.topk_group = dev->r[k].topk_group,
					r.top2 = dev->r[k].top2, r.what = dev->r[k].what;
			route_log_push(ref, &r);
		}
		tensor_free(&ids);
		tensor_free(&val);
		if (bad)
			break;
	}
	return ref->n;
}

/*
 * Routing first, so that a flip is told from a wrong kernel.  With the
 * reference's decisions in the set, the device's are compared with them
 * (routing_compare): a flip at a near tie of the reference's values is
 * reported and its rows left out, any other flip fails the case.  Without
 * them, the rows that fail are looked at with the device's own logits: a
 * near tie there (within the output's tolerance: the precision's rounding)
 * is reported and left out.  Any other mismatch fails as before.  0 if the
 * routing itself fails the case.
 */
static int
check_routing(Ctx *c, const char *set, int64_t tokens, int64_t tile, RouteDiff *rd, char *line,
	      size_t n)
{
	RouteLog dev = {0}, ref = {0};
	unsigned char *bad = NULL;
	double atol = 0, rtol = 0;
	moert_status s = MOERT_OK;
	size_t k = strlen(line);
	int ok = 1;

	for (int i = 0; i < moert_num_routes(c->p) && !s; i++) {
		Routing r;
		if (!(s = device_routing(c, i, tokens, &r)))
			route_log_push(&dev, &r);
		routing_free(&r);
	}
	if (s) {
		snprintf(line + k, n - k, "  routing not read back: %s", moert_last_error());
	} else if (dev.n) {
		int64_t T = dev.r[0].T;
		bad = xcalloc((size_t)T + 1, 1);
		for (int o = 0; o < moert_num_outputs(c->p); o++)
			bad_rows(c, set, o, tokens, tile, T, bad, &atol, &rtol);
		if (reference_routing(set, tile, &dev, &ref)) {
			route_log_compare(&ref, &dev, atol, rtol, rd);
			ok = !rd->nbad;
		} else {
			for (int i = 0; i < dev.n; i++)
				if (dev.r[i].T == T)
					routing_near_ties(&dev.r[i], bad, atol, rtol, rd);
		}
		if (rd->nflip)
			snprintf(line + k, n - k, "  routing: %s;%s", rd->msg,
				 rd->nbad ? " (routing differs)" : " rows left out;");
	}
	free(bad);
	route_log_free(&dev);
	route_log_free(&ref);
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
	RouteDiff rd = {0};
	moert_status s;

	for (int i = 0; i < moert_num_inputs(c->p) && !rc; i++) {
		snprintf(name, sizeof name, "input_%d.pb", i);
		file = file_join(set, name);
		rc = read_input(c, i, file, &in[i], &tokens, tile, line + 2,
				sizeof line - 2);
		free(file);
	}
	if (!rc && tokens < 0 && moert_is_static(c->p))
		tokens = 1;
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
		if (moert_num_routes(c->p))
			ok = check_routing(c, set, tokens, tile, &rd, line, sizeof line);
		for (int i = 0; i < moert_num_outputs(c->p); i++)
			ok &= compare_output(c, set, i, tokens, tile, &rd, line, sizeof line);
	}
	if (tile)
		printf("%s %s T=%lld%s\n", ok ? "ok  " : "FAIL", set, (long long)tile, line);
	else
		printf("%s %s%s\n", ok ? "ok  " : "FAIL", set, line);
	fflush(stdout);
	free_tensors(in, 64);
	free_io(c);
	route_diff_free(&rd);
	return ok;
}

static int
cmd_test(Ctx *c, const Opts *o)
{
	int pass = 0, fail = 0, rc;

	if ((rc = open_bundle(c, o->pos[0], o->program, o->ep_size)) || (rc = open_device(c, o->device)))
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
		if (!(hit = malloc(n ? n : 1))) {
			rc = say(EXIT_FAIL, "output '%s': out of host memory (%zu bytes)", ti.name, n);
			break;
		}
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
	moert_status s;

	if (!us)
		return say(EXIT_FAIL, "--profile: out of host memory for %d steps", n);
	s = moert_profile(c->p, o->tokens, c->in, c->out, o->iters, us);
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

/*
 * --dump=BUF=FILE: arena buffer BUF at T as the bench's inputs leave it
 * (moert_read_buffer), raw bytes.  bench/run_bench.py reads a MoE's expert
 * offsets and permuted rows this way, so that PyTorch runs moec's routing.
 */
static int
dump_buffers(Ctx *c, const Opts *o)
{
	const char *v;

	for (int k = 0; (v = opt_next(&o->a, "dump", &k));) {
		const char *eq = strchr(v, '=');
		char name[256];
		size_t n;
		moert_status s;
		FILE *f;

		if (!eq || eq == v || !eq[1] || (size_t)(eq - v) >= sizeof name)
			return opt_bad(&o->a, "dump", v, "is not BUF=FILE");
		memcpy(name, v, (size_t)(eq - v));
		name[eq - v] = 0;
		if ((s = moert_buffer_size(c->p, name, o->tokens, &n)))
			return rt_fail(s);
		void *host = xmalloc(n + 1);
		if ((s = moert_read_buffer(c->p, name, o->tokens, c->in, c->out, host, n))) {
			free(host);
			return rt_fail(s);
		}
		int bad = !(f = fopen(eq + 1, "wb")) || fwrite(host, 1, n, f) != n;
		bad |= f && fclose(f) != 0;
		free(host);
		if (bad)
			return say(EXIT_USAGE, "%s: cannot write %s", name, eq + 1);
	}
	return EXIT_OK;
}

static int
cmd_bench(Ctx *c, const Opts *opts)
{
	Tensor in[64] = {0};
	Opts oo = *opts, *o = &oo;
	moert_status s;
	double us = 0;
	int rc;

	if ((rc = open_bundle(c, o->pos[0], o->program, o->ep_size)))
		return rc;
	if (o->tokens < 1 && moert_is_static(c->p))
		o->tokens = 1;	/* a static model: T plays no part */
	if (o->tokens < 1)
		return opt_error(&o->a, "needs --tokens=T");
	if (!(rc = bench_inputs(c, o, in)) && !(rc = open_device(c, o->device))) {
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
			if (!rc)
				rc = dump_buffers(c, o);
		}
	}
	free_tensors(in, 64);
	return rc;
}

/* --- moert verify, moert info -------------------------------------------------- */

/* A bundle of several programs: each one's size, and the kernels they share. */
static void
programs(const Bundle *b)
{
	int total = 0, distinct = 0;

	for (int i = 0; i < b->nprog; i++) {
		const Manifest *m = b->prog[i].manifest;
		for (int k = 0; k < m->nk; k++) {
			int seen = 0;
			for (int j = 0; j < i && !seen; j++)
				seen = bundle_find_kernel(b->prog[j].manifest, m->k[k].name) >= 0;
			distinct += !seen;
		}
		total += m->nk;
		printf("  program %-12s %3d kernels, %3d steps, %2d weights (%llu bytes packed)\n",
		       b->prog[i].name, m->nk, m->nstep, m->nw,
		       (unsigned long long)b->prog[i].wlen);
	}
	printf("  %d programs, %d distinct kernels (%d kernel lines)\n", b->nprog, distinct, total);
}

static void
summary(const char *path, const Bundle *b, int prog)
{
	const Manifest *m = b->prog[prog].manifest;
	uint64_t real = 0, synth = 0;
	int nreal = 0, nlaunch = 0, ninit = 0;

	printf("%s: ok: format %u, moec %s, %d sections, %llu bytes\n", path,
	       b->version, b->moec, b->nsec, (unsigned long long)b->size);
	for (int i = 0; i < b->nsec; i++)
		printf("  %-16s %12llu bytes at %-10llu crc32c %08x\n",
		       b->sec[i].name, (unsigned long long)b->sec[i].size,
		       (unsigned long long)b->sec[i].off, b->sec[i].crc);
	if (b->version == BUNDLE_VERSION_PROGRAMS)
		programs(b);
	if (b->nprog > 1)
		printf("program %s:\n", b->prog[prog].name);
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

	diag_init(&d, stderr);
	if (!(c->buf = bundle_read_file(o->pos[0], &c->len, &rc, &d)))
		return EXIT_USAGE;
	a = arena_new(0);
	rc = bundle_read(a, o->pos[0], c->buf, c->len, &b, &d);
	if (!rc) {
		int prog = o->program ? bundle_find_program(&b, o->program) : 0;
		if (prog < 0) {
			arena_free(a);
			return say(EXIT_USAGE, "%s: --program: no program '%s' in the bundle",
				   o->pos[0], o->program);
		}
		summary(o->pos[0], &b, prog);
	}
	arena_free(a);
	return rc ? EXIT_USAGE : EXIT_OK;	/* a refused bundle is bad input, as in moec inspect */
}

static int
cmd_info(Ctx *c, const Opts *o)
{
	moert_status s;

	if ((s = moert_open(o->device, &c->dev)))
		return say(EXIT_FAIL, "%s: %s", moert_status_name(s),
			   moert_last_error());
	printf("device %d: %s\n", o->device, moert_device_name(c->dev));
	return EXIT_OK;
}

/* --- moert tune ---------------------------------------------------------------- */

enum { TUNE_MAXT = 16 };
#define TUNE_MARGIN 0.02	/* a variant must beat the heuristic's by 2% */

typedef struct {
	moert_candidate_info ci;
	double us[TUNE_MAXT], plan[TUNE_MAXT];	/* by (T, skew) point; -1: not timed there */
	double err;		/* the worst relative L2 */
	int bad;		/* wrong, or a launch failed */
} TuneCand;

/* --tokens=T,...: ascending, unique, each in 1..max_tokens (larger ones dropped). */
static int
tune_tokens(Ctx *c, const Opts *o, int64_t *t, int *n)
{
	const char *v = opt_str(&o->a, "tokens");
	char buf[256], *save = NULL, *end;

	snprintf(buf, sizeof buf, "%s", v);
	*n = 0;
	for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		long long x = strtoll(p, &end, 10);
		int at = 0;
		if (*end || x < 1 || x > INT32_MAX || *n == TUNE_MAXT)
			return opt_bad(&o->a, "tokens", v, "wants up to 16 token counts in 1..2147483647");
		if (x > moert_max_tokens(c->p))
			continue;
		while (at < *n && t[at] < x)
			at++;
		if (at < *n && t[at] == x)
			continue;
		memmove(t + at + 1, t + at, sizeof *t * (size_t)(*n - at));
		t[at] = x, (*n)++;
	}
	return EXIT_OK;
}

/* --skew=PCT,...: up to 4, each in 0..100, in the order given, unique. */
static int
tune_skews(const Opts *o, int *sk, int *n)
{
	const char *v = opt_str(&o->a, "skew");
	char buf[256], *save = NULL, *end;

	snprintf(buf, sizeof buf, "%s", v);
	*n = 0;
	for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		long x = strtol(p, &end, 10);
		if (*end || p == end || x < 0 || x > 100 || *n == 4)
			return opt_bad(&o->a, "skew", v, "wants up to 4 percentages in 0..100");
		for (int i = 0; i < *n; i++)
			if (sk[i] == x)
				return opt_bad(&o->a, "skew", v, "names a skew twice");
		sk[(*n)++] = (int)x;
	}
	return *n ? EXIT_OK : opt_bad(&o->a, "skew", v, "wants up to 4 percentages in 0..100");
}

/* The points t[0..n) (token counts, each with its skew) in candidate x's range, a bit each. */
static unsigned
tune_at(const TuneCand *x, const int64_t *t, int n)
{
	unsigned bits = 0;

	for (int i = 0; i < n; i++)
		if (t[i] >= x->ci.tlo && t[i] <= x->ci.thi)
			bits |= 1u << i;
	return bits;
}

static double
tune_tolerance(const char *dtype)
{
	return !strcmp(dtype, "bf16") ? 1e-2 : !strcmp(dtype, "f16") ? 2e-3 : 1e-4;
}

/* "T=16", or "T=16/skew=80" for point i. */
static const char *
tune_point(char *buf, size_t n, const int64_t *t, const int *sk, int i)
{
	if (sk[i])
		snprintf(buf, n, "T=%lld/skew=%d", (long long)t[i], sk[i]);
	else
		snprintf(buf, n, "T=%lld", (long long)t[i]);
	return buf;
}

/* Time every candidate at point ti: T tokens, skew sk[ti] (inputs seeded, uploaded for T). */
static int
tune_one_t(Ctx *c, const Opts *o, TuneCand *tc, int nc, const int64_t *t, const int *sk, int n,
	   int ti, const moert_tune_opts *to)
{
	Tensor in[64] = {0};
	Opts oo = *o;
	char pt[48];
	int rc;

	oo.tokens = t[ti];
	oo.skew = sk[ti];
	tune_point(pt, sizeof pt, t, sk, ti);
	free_io(c);
	if ((rc = bench_inputs(c, &oo, in)))
		return rc;
	moert_status s = upload(c, in, t[ti]);
	free_tensors(in, 64);
	if (s)
		return rt_fail(s);
	for (int i = 0; i < nc; i++) {
		TuneCand *x = &tc[i];
		moert_tune_opts so = *to;
		moert_tune_result r;
		if (!(tune_at(x, t, n) >> ti & 1))
			continue;
		/* the plan's launch once per key and T (with its first candidate that
		 * runs): a key's candidates are consecutive, and share plan[] */
		so.time_plan = x->plan[ti] < 0;
		s = moert_tune_candidate(c->p, i, t[ti], c->in, c->out, &so, &r);
		if (s) {
			x->bad = 1;
			printf("%-14s %-44s %-22s FAILED: %s: %s\n", pt, x->ci.key,
			       x->ci.variant, moert_status_name(s), moert_last_error());
			continue;
		}
		if (so.time_plan)
			for (int j = i; j < nc && !strcmp(tc[j].ci.key, x->ci.key); j++)
				tc[j].plan[ti] = r.plan_us;
		x->us[ti] = r.us;
		x->err = r.rel_err > x->err ? r.rel_err : x->err;
		x->bad |= !(r.rel_err <= tune_tolerance(x->ci.dtype));
		printf("%-14s %-44s %-22s %10.2f us  (plan %.2f us)  rel_err %.2e%s%s\n",
		       pt, x->ci.key, x->ci.variant, r.us, x->plan[ti], r.rel_err,
		       r.rel_err <= tune_tolerance(x->ci.dtype) ? "" : "  WRONG: rejected",
		       r.poisoned ? "" : "  (output shares an operand: not poisoned)");
	}
	return EXIT_OK;
}

/* Geometric mean over the timed points of x's time over the plan's; -1 if x is out. */
static double
tune_score(const TuneCand *x, int n)
{
	double logsum = 0;
	int k = 0;

	if (x->bad)
		return -1;
	for (int i = 0; i < n; i++) {
		if (x->us[i] < 0)
			continue;
		if (!(x->us[i] > 0) || !(x->plan[i] > 0))
			return x->us[i] >= 0 && x->plan[i] >= 0 ? 1 : -1;	/* a fake clock's zeros */
		logsum += log(x->us[i] / x->plan[i]);
		k++;
	}
	return k ? exp(logsum / k) : -1;
}

/* The table: per key (candidates of a key are consecutive) its best variant. */
static int
tune_write(Ctx *c, const Opts *o, const TuneCand *tc, int nc, const int64_t *t, const int *sk, int n)
{
	const char *code = moert_code_section(c->p), *target = strchr(code, ':');
	FileOut fo;
	Diag d;
	FILE *f;
	int missing = 0;

	diag_init(&d, stderr);
	if (!(f = file_create(&fo, opt_str(&o->a, "output"), &d)))
		return EXIT_USAGE;
	target = target ? target + 1 : code;
	fprintf(f, "moec-tuning 2\n# moert tune %s on %s (%s), --iters=%d, --flush-mb=%lld, --skew=%s\n",
		c->path, moert_device_name(c->dev), code, o->iters,
		(long long)int_opt(&o->a, "flush-mb", 0), opt_str(&o->a, "skew"));
	for (int i = 0, j; i < nc; i = j) {
		int best = -1;
		double bs = 0;
		for (j = i; j < nc && !strcmp(tc[j].ci.key, tc[i].ci.key); j++) {
			double sc = tune_score(&tc[j], n);
			if (sc >= 0 && (best < 0 || sc < bs))
				best = j, bs = sc;
		}
		/* the heuristic's own variant (a key's first) unless another beats it
		 * by TUNE_MARGIN: timing noise does not rewrite the table */
		if (best > i && tune_score(&tc[i], n) >= 0 && bs > (1 - TUNE_MARGIN) * tune_score(&tc[i], n))
			best = i, bs = tune_score(&tc[i], n);
		fprintf(f, "# %s (plan %s): %d candidates", tc[i].ci.key, tc[i].ci.plan_kernel, j - i);
		if (best < 0) {
			fprintf(f, ", none correct\n");
			fprintf(stderr, "moert tune: %s: no candidate gave the plan's output\n", tc[i].ci.key);
			missing++;
			continue;
		}
		int last = -1;
		for (int k = 0; k < n; k++)
			if (tc[best].us[k] >= 0) {
				char pt[48];
				fprintf(f, "; %s %.2f us (plan %.2f)", tune_point(pt, sizeof pt, t, sk, k),
					tc[best].us[k], tc[best].plan[k]);
				last = k;
			}
		fprintf(f, "; %.3fx the plan's time\n%s %s %s us=%.2f\n", bs, target, tc[best].ci.key,
			tc[best].ci.variant, last >= 0 ? tc[best].us[last] : 0.0);
		printf("%s %s: %s, %.3fx the plan's time\n", target, tc[i].ci.key, tc[best].ci.variant, bs);
	}
	if (file_commit(&fo, &d))
		return EXIT_USAGE;
	return missing ? EXIT_FAIL : EXIT_OK;
}

static int
cmd_tune(Ctx *c, const Opts *opts)
{
	Opts oo = *opts, *o = &oo;
	int64_t t[TUNE_MAXT + 1], pt[TUNE_MAXT];
	int n, nc, rc, sk[4], ns, psk[TUNE_MAXT], np = 0;
	TuneCand *tc;
	moert_tune_opts to = {0};
	uint64_t flush = 0;
	moert_status s;

	if (!opt_str(&o->a, "output"))
		return opt_error(&o->a, "needs -o FILE, the tuning table to write");
	if ((rc = tune_skews(o, sk, &ns)) || (rc = open_bundle(c, o->pos[0], o->program, 0)) ||
	    (rc = tune_tokens(c, o, t, &n)))
		return rc;
	if (!(nc = moert_num_candidates(c->p)))
		return say(EXIT_USAGE, "%s: no candidate kernels: compile it with moec compile "
			   "--tune-candidates --arch=TARGET", c->path);
	tc = xcalloc((size_t)nc, sizeof *tc);
	for (int i = 0; i < nc; i++) {
		moert_candidate_info_get(c->p, i, &tc[i].ci);
		for (int k = 0; k < TUNE_MAXT; k++)
			tc[i].us[k] = tc[i].plan[k] = -1;
	}
	/* a key's T bucket without a listed T is timed at its last T */
	for (int i = 0; i < nc; i++) {
		if (tune_at(&tc[i], t, n))
			continue;
		if (n == TUNE_MAXT) {
			free(tc);
			return opt_bad(&o->a, "tokens", opt_str(&o->a, "tokens"), "leaves a key's "
				       "range without a token count, and the list is full");
		}
		int at = 0;
		while (at < n && t[at] < tc[i].ci.thi)
			at++;
		memmove(t + at + 1, t + at, sizeof *t * (size_t)(n - at));
		t[at] = tc[i].ci.thi, n++;
	}
	/* the points: each T at each skew */
	if (n * ns > TUNE_MAXT) {
		free(tc);
		return opt_bad(&o->a, "skew", opt_str(&o->a, "skew"), "makes more than 16 (T, skew) points "
			       "with the token counts");
	}
	for (int i = 0; i < n; i++)
		for (int k = 0; k < ns; k++)
			pt[np] = t[i], psk[np++] = sk[k];
	to.warmup = o->warmup, to.iters = o->iters;
	to.flush_bytes = (size_t)int_opt(&o->a, "flush-mb", 0) << 20;
	if (!(rc = open_device(c, o->device)) && to.flush_bytes &&
	    (s = moert_malloc(c->dev, to.flush_bytes, &flush)))
		rc = rt_fail(s);
	to.flush = flush;
	printf("moert tune %s: %d candidates, T =", c->path, nc);
	for (int i = 0; i < n; i++)
		printf(" %lld", (long long)t[i]);
	if (ns > 1 || sk[0])
		for (int k = 0; k < ns; k++)
			printf("%s%d", k ? "," : ", skew ", sk[k]);
	printf(", %s\n", c->dev ? moert_device_name(c->dev) : "");
	for (int i = 0; !rc && i < np; i++)
		rc = tune_one_t(c, o, tc, nc, pt, psk, np, i, &to);
	if (!rc)
		rc = tune_write(c, o, tc, nc, pt, psk, np);
	if (flush)
		moert_free(c->dev, flush);
	free(tc);
	return rc;
}

/* --- main ------------------------------------------------------------------- */

static int (*const run_cmd[])(Ctx *, const Opts *) = {	/* ORDER: moert_cmds */
	cmd_run, cmd_test, cmd_bench, cmd_verify, cmd_info, cmd_tune,
};

int
main(int argc, char **argv)
{
	static Opts o;
	Ctx c = {0};
	int cmd, rc = opt_main(&moert_tool, argc, argv, &cmd);

	if (rc >= 0)
		return rc;
	if ((rc = parse_opts(&o, cmd, argc - 1, argv + 1)) >= 0)
		return rc;
	rc = run_cmd[cmd](&c, &o);
	close_ctx(&c);
	return rc;
}
