/*
 * serve_check.c — the serving API of runtime/serve.c, through a driver
 * (the stand-in tests/gpu/fakecuda.c in CI, or a real GPU):
 *
 *	serve_check BUNDLE      (gpu_runtime_check --emit DIR writes DIR/check.moeb)
 *
 * The bundle: x f32[T,96] -> y = x*w + 1, n i32[T] = sum of inc[j%4] over
 * 96 j; w f32[96] generated at load, inc i32[4] a real weight, one arena
 * buffer.  Checked, bit for bit against C:
 *   - weight queries and flags; every refusal of moert_bind_weight;
 *   - bound weights are read where the caller put them, the init step that
 *     would overwrite one is skipped, and a program with all weights bound
 *     and a caller's workspace allocates no device memory;
 *   - two programs sharing one workspace on one stream; moving a loaded
 *     program to another workspace (graphs re-captured);
 *   - 8 threads running one program at once with moert_run_ws (a workspace
 *     each), and 8 threads each running a program of their own;
 *   - a bundle of three programs (format 2, made here from the bundle, each
 *     program with weights of its own): every program runs as the bundle
 *     does with its weights, the code is loaded once, one program alone
 *     loads and runs, unloading a program that is not the owner does nothing;
 *     weights bound per program (none, some, all) in one shared workspace.
 *     serve_check BUNDLE --write-programs OUT writes that bundle (no driver).
 * Exit 0 all passed, 1 a check failed, 77 no driver.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "moert.h"

#define H 96
#define MAXT 1000
#define NTHREAD 8
#define ITERS 200

static int failed;
static moert_device *dev;
static unsigned char *bundle;
static size_t bundle_len;

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);            \
			printf(__VA_ARGS__);                                   \
			printf(" [%s]\n", moert_last_error());                 \
			failed = 1;                                            \
		}                                                              \
	} while (0)

/* The generated weight w, as the init kernel synth_w makes it (seed 1234). */
static float
synth(uint32_t j)
{
	uint32_t x = j * 0x9E3779B1u + 1234u;

	x ^= x >> 16, x *= 0x7FEB352Du, x ^= x >> 15;
	x *= 0x846CA68Bu, x ^= x >> 16;
	return (float)(x >> 8) * 0x1p-24f - 0.5f;
}

/* Device buffers of one run: x, y, n at T, and expectations.  stream: where
 * the run went (NULL: the legacy stream, synchronised device-wide). */
typedef struct {
	int64_t T;
	uint64_t x, y, n;
	void *stream;
	float hx[MAXT * H];
} Io;

/* New inputs at T into buffers that hold MAXT rows (io_alloc). */
static void
io_fill(Io *io, int64_t T, unsigned salt)
{
	io->T = T;
	for (int64_t i = 0; i < T * H; i++)
		io->hx[i] = (float)((int)((i * 7 + salt) % 17) - 8) * 0.25f;
	moert_memcpy_htod(dev, io->x, io->hx, (size_t)T * H * 4);
}

static void
io_alloc(Io *io)
{
	io->stream = NULL;
	moert_malloc(dev, (size_t)MAXT * H * 4, &io->x);
	moert_malloc(dev, (size_t)MAXT * H * 4, &io->y);
	moert_malloc(dev, (size_t)MAXT * 4, &io->n);
}

static void
io_init(Io *io, int64_t T, unsigned salt)
{
	io_alloc(io);
	io_fill(io, T, salt);
}

static void
io_free(Io *io)
{
	moert_free(dev, io->x);
	moert_free(dev, io->y);
	moert_free(dev, io->n);
}

/* y and n of the last run against x*w+1 and the row sum of inc. */
static int
io_ok(const Io *io, const float *w, const int32_t *inc)
{
	static _Thread_local float y[MAXT * H];
	static _Thread_local int32_t n[MAXT];
	int32_t sum = 0;

	for (int j = 0; j < H; j++)
		sum += inc[j % 4];
	if (io->stream)
		moert_stream_sync(dev, io->stream);
	else
		moert_sync(dev);
	moert_memcpy_dtoh(dev, y, io->y, (size_t)io->T * H * 4);
	moert_memcpy_dtoh(dev, n, io->n, (size_t)io->T * 4);
	for (int64_t i = 0; i < io->T * H; i++) {
		volatile float t = io->hx[i] * w[i % H];
		if (y[i] != t + 1.0f)
			return 0;
	}
	for (int64_t t = 0; t < io->T; t++)
		if (n[t] != sum)
			return 0;
	return 1;
}

static moert_program *
host(void)
{
	moert_program *p = NULL;

	CHECK(moert_load_host(bundle, bundle_len, &p) == MOERT_OK, "load_host");
	return p;
}

static float wsyn[H], wmine[H];
static const int32_t inc_bundle[4] = {1, 2, 3, 4}, inc_mine[4] = {5, 6, 7, 8};

static void
check_queries_and_refusals(void)
{
	moert_program *p = host();
	moert_tensor_info ti;
	int64_t d96[1] = {H}, d4[1] = {4}, d95[1] = {95}, d96x1[2] = {H, 1};
	uint64_t buf;

	CHECK(moert_num_weights(p) == 2, "2 weights");
	CHECK(moert_weight_info(p, 0, &ti) == MOERT_OK && !strcmp(ti.name, "w") &&
	      !strcmp(ti.dtype, "f32") && ti.rank == 1 && ti.dim[0] == H && ti.bytes == 4 * H,
	      "weight 0 is w f32[96]");
	CHECK(moert_weight_flags(p, 0) == (MOERT_WEIGHT_RUN | MOERT_WEIGHT_GENERATED), "w flags");
	CHECK(moert_weight_flags(p, 1) == MOERT_WEIGHT_RUN, "inc flags");
	CHECK(moert_weight_info(p, 2, &ti) == MOERT_EINVAL, "no weight 2");
	CHECK(moert_workspace_size(p) == 4000, "workspace 4000 bytes, not %llu",
	      (unsigned long long)moert_workspace_size(p));
	moert_malloc(dev, 4096, &buf);
	CHECK(moert_bind_weight(p, "w", buf, "bf16", 1, d96) == MOERT_ESHAPE &&
	      strstr(moert_last_error(), "weight 'w' is bf16[96], the bundle declares f32[96]"),
	      "wrong dtype refused");
	CHECK(moert_bind_weight(p, "w", buf, "f32", 1, d95) == MOERT_ESHAPE &&
	      strstr(moert_last_error(), "f32[95]"), "wrong dims refused");
	CHECK(moert_bind_weight(p, "w", buf, "f32", 2, d96x1) == MOERT_ESHAPE &&
	      strstr(moert_last_error(), "f32[96,1]"), "wrong rank refused");
	CHECK(moert_bind_weight(p, "w", buf + 4, "f32", 1, d96) == MOERT_EINVAL &&
	      strstr(moert_last_error(), "not a multiple of 256"), "misaligned refused");
	CHECK(moert_bind_weight(p, "w", 0, "f32", 1, d96) == MOERT_EINVAL, "null refused");
	CHECK(moert_bind_weight(p, "v", buf, "f32", 1, d96) == MOERT_EINVAL &&
	      strstr(moert_last_error(), "no weight named 'v'"), "unknown name refused");
	CHECK(moert_set_workspace(p, buf + 16, 4000) == MOERT_EINVAL, "misaligned workspace");
	CHECK(moert_set_workspace(p, buf, 3999) == MOERT_EINVAL &&
	      strstr(moert_last_error(), "needs 4000"), "small workspace");
	CHECK(moert_load_device(dev, p) == MOERT_OK, "load");
	CHECK(moert_bind_weight(p, "inc", buf, "i32", 1, d4) == MOERT_EINVAL &&
	      strstr(moert_last_error(), "before moert_load_device"), "bind after load refused");
	CHECK(moert_set_workspace(p, 0, 0) == MOERT_OK, "back to its own workspace");
	moert_unload(p);
	moert_free(dev, buf);
}

/* Everything bound and a workspace given: no device memory of its own. */
static void
check_all_bound(void)
{
	moert_program *p = host();
	int64_t d96[1] = {H}, d4[1] = {4};
	uint64_t w, inc, ws;
	size_t f0, f1, total;
	float back[H];
	Io io;

	moert_malloc(dev, sizeof wmine, &w);
	moert_malloc(dev, sizeof inc_mine, &inc);
	moert_malloc(dev, moert_workspace_size(p), &ws);
	moert_memcpy_htod(dev, w, wmine, sizeof wmine);
	moert_memcpy_htod(dev, inc, inc_mine, sizeof inc_mine);
	CHECK(moert_bind_weight(p, "w", w, "f32", 1, d96) == MOERT_OK, "bind w");
	CHECK(moert_bind_weight(p, "inc", inc, "i32", 1, d4) == MOERT_OK, "bind inc");
	CHECK(moert_weight_flags(p, 1) == (MOERT_WEIGHT_RUN | MOERT_WEIGHT_BOUND), "inc bound");
	CHECK(moert_set_workspace(p, ws, moert_workspace_size(p)) == MOERT_OK, "workspace");
	moert_mem_info(dev, &f0, &total);
	CHECK(moert_load_device(dev, p) == MOERT_OK, "load bound");
	moert_mem_info(dev, &f1, &total);
	CHECK(f0 == f1, "a fully bound program allocated %zu bytes", f0 - f1);
	moert_memcpy_dtoh(dev, back, w, sizeof back);
	CHECK(!memcmp(back, wmine, sizeof back), "the init step overwrote the bound weight");
	io_init(&io, 37, 0);
	CHECK(moert_run(p, 37, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, 0) == MOERT_OK,
	      "run bound");
	CHECK(io_ok(&io, wmine, inc_mine), "bound weights read");
	CHECK(moert_run(p, 37, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, 1) == MOERT_OK &&
	      io_ok(&io, wmine, inc_mine), "bound weights read in a graph");
	CHECK(moert_set_workspace(p, 0, 0) == MOERT_EINVAL &&
	      strstr(moert_last_error(), "without a workspace of its own"), "no own workspace");
	moert_unload(p);
	io_free(&io);
	moert_free(dev, w);
	moert_free(dev, inc);
	moert_free(dev, ws);
}

/* One program bound, one with its own weights, one workspace, one stream. */
static void
check_shared_workspace(void)
{
	moert_program *a = host(), *b = host();
	int64_t d96[1] = {H};
	uint64_t w, ws, ws2;
	Io io;

	moert_malloc(dev, sizeof wmine, &w);
	moert_malloc(dev, 4096, &ws);
	moert_malloc(dev, 4096, &ws2);
	moert_memcpy_htod(dev, w, wmine, sizeof wmine);
	CHECK(moert_bind_weight(a, "w", w, "f32", 1, d96) == MOERT_OK, "bind w");
	CHECK(moert_set_workspace(a, ws, 4096) == MOERT_OK && moert_set_workspace(b, ws, 4096) == MOERT_OK,
	      "one workspace for two");
	CHECK(moert_load_device(dev, a) == MOERT_OK && moert_load_device(dev, b) == MOERT_OK, "load");
	io_init(&io, 500, 3);
	for (int i = 0; i < 4; i++) {
		int g = i >= 2;
		CHECK(moert_run(a, 500, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, g) == MOERT_OK &&
		      io_ok(&io, wmine, inc_bundle), "program a, shared workspace, graph %d", g);
		CHECK(moert_run(b, 500, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, g) == MOERT_OK &&
		      io_ok(&io, wsyn, inc_bundle), "program b, shared workspace, graph %d", g);
	}
	CHECK(moert_set_workspace(b, ws2, 4096) == MOERT_OK, "move b");
	moert_memset(dev, ws, 0xAB, 4096);	/* b must no longer read or write ws */
	CHECK(moert_run(b, 500, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, 1) == MOERT_OK &&
	      io_ok(&io, wsyn, inc_bundle), "b in its new workspace, graph");
	unsigned char back[4096];
	moert_memcpy_dtoh(dev, back, ws, sizeof back);
	int same = 1;
	for (size_t i = 0; i < sizeof back; i++)
		same &= back[i] == 0xAB;
	CHECK(same, "b still used its old workspace");
	moert_unload(a);
	moert_unload(b);
	io_free(&io);
	moert_free(dev, w);
	moert_free(dev, ws);
	moert_free(dev, ws2);
}

/* --- threads ----------------------------------------------------------------- */

typedef struct {
	moert_program *p;	/* shared (run_ws) or its own (run) */
	int own;
	unsigned id;
	int bad;
} Job;

/*
 * One server thread: its own stream, its buffers allocated once.  While any
 * thread captures a graph the driver refuses a device-wide synchronisation
 * (moert_sync) and can refuse a free, so a thread syncs its own stream, and
 * the buffers are freed only after every thread has finished (docs/runtime.md).
 */
static pthread_barrier_t done;

static void *
worker(void *arg)
{
	Job *j = arg;
	uint64_t ws = 0;
	Io *io = malloc(sizeof *io);
	void *stream = NULL;

	if (moert_stream_create(dev, &stream) != MOERT_OK)
		j->bad = 1;
	if (!j->own)
		moert_malloc(dev, moert_workspace_size(j->p), &ws);
	io_alloc(io);
	io->stream = stream;
	for (int it = 0; it < ITERS && !j->bad; it++) {
		int64_t T = 1 + (int64_t)((j->id * 131 + (unsigned)it * 17) % 200);
		io_fill(io, T, j->id * 1000 + (unsigned)it);
		moert_status s = j->own
			? moert_run(j->p, T, (uint64_t[]){io->x}, (uint64_t[]){io->y, io->n}, stream, it & 1)
			: moert_run_ws(j->p, T, (uint64_t[]){io->x}, (uint64_t[]){io->y, io->n}, ws, stream);
		if (s != MOERT_OK || !io_ok(io, wsyn, inc_bundle)) {
			printf("FAIL thread %u iteration %d T=%lld: %s %s\n", j->id, it, (long long)T,
			       moert_status_name(s), moert_last_error());
			j->bad = 1;
		}
	}
	pthread_barrier_wait(&done);
	io_free(io);
	moert_free(dev, ws);
	moert_stream_destroy(dev, stream);
	free(io);
	return NULL;
}

static void
check_threads(int own)
{
	pthread_t th[NTHREAD];
	Job job[NTHREAD];
	moert_program *shared = NULL;

	pthread_barrier_init(&done, NULL, NTHREAD);
	if (!own)
		CHECK(moert_load(dev, bundle, bundle_len, &shared) == MOERT_OK, "load shared");
	for (int i = 0; i < NTHREAD; i++) {
		job[i] = (Job){shared, own, (unsigned)i, 0};
		if (own)
			CHECK(moert_load(dev, bundle, bundle_len, &job[i].p) == MOERT_OK, "load");
		pthread_create(&th[i], NULL, worker, &job[i]);
	}
	for (int i = 0; i < NTHREAD; i++) {
		pthread_join(th[i], NULL);
		CHECK(!job[i].bad, "thread %d (%s)", i, own ? "own program" : "shared program");
		if (own)
			moert_unload(job[i].p);
	}
	moert_unload(shared);
	pthread_barrier_destroy(&done);
}

/* The bundle as three programs layer.0..2 (bundle.md §5) sharing its code;
 * program i's inc is inc_bundle + i. */
static unsigned char *
three_programs(size_t *len)
{
	Arena *a = arena_new(0);
	Bundle b;
	BundleWriter w;
	BundleProgram bp[3];
	Diag d;
	unsigned char *out = NULL, *wt = NULL;
	char *man = NULL, *prog = NULL;
	size_t plen;

	diag_init(&d, stdout);
	if (bundle_read(a, "check.moeb", bundle, bundle_len, &b, &d) == 0) {
		const BundleSection *ms = bundle_find(&b, "manifest"), *ws = bundle_find(&b, "weights");
		const MWeight *inc = &b.manifest->w[bundle_find_weight(b.manifest, "inc")];
		uint64_t wl = BUNDLE_ALIGN_UP(ws->size);
		man = malloc(3 * ms->size);
		wt = calloc(3, wl);
		for (int i = 0; i < 3; i++) {
			int32_t v[4];
			memcpy(man + i * ms->size, ms->data, ms->size);
			memcpy(wt + i * wl, ws->data, ws->size);
			for (int k = 0; k < 4; k++)
				v[k] = inc_bundle[k] + i;
			memcpy(wt + i * wl + inc->at, v, sizeof v);
			bp[i] = (BundleProgram){i == 0 ? "layer.0" : i == 1 ? "layer.1" : "layer.2", NULL,
						i * ms->size, ms->size, i * wl, ws->size};
		}
		prog = bundle_programs_print(bp, 3, &plen);
		bundle_writer_init(&w, b.moec);
		w.version = BUNDLE_VERSION_PROGRAMS;
		bundle_add(&w, "manifest", man, 3 * ms->size, &d);
		bundle_add(&w, "programs", prog, plen, &d);
		for (int i = 0; i < b.nsec; i++)
			if (!strncmp(b.sec[i].name, "ptx:", 4) || !strncmp(b.sec[i].name, "cubin:", 6))
				bundle_add(&w, b.sec[i].name, b.sec[i].data, b.sec[i].size, &d);
		bundle_add(&w, "weights", wt, 3 * wl, &d);
		if (bundle_write(&w, &out, len, &d))
			out = NULL;
	}
	CHECK(out, "a bundle of three programs");
	free(man), free(wt), free(prog);
	arena_free(a);
	return out;
}

static void
check_programs(void)
{
	size_t len;
	unsigned char *three = three_programs(&len);
	moert_program *p = NULL, *q;
	int32_t inc[4];
	Io io;

	if (!three)
		return;
	io_init(&io, 37, 5);
	CHECK(moert_load(dev, three, len, &p) == MOERT_OK, "load three programs");
	CHECK(moert_num_programs(p) == 3 && moert_program_at(p, 0) == p &&
	      !strcmp(moert_program_name(p), "layer.0"), "three programs, the first the handle");
	CHECK(moert_find_program(p, "layer.2") == moert_program_at(p, 2) &&
	      moert_find_program(moert_program_at(p, 1), "layer.0") == p, "found by name");
	CHECK(!moert_find_program(p, "main") && strstr(moert_last_error(), "no program 'main'"),
	      "no program main");
	CHECK(!moert_program_at(p, 3) && moert_last_error()[0], "no program 3");
	for (int i = 0; i < 3; i++) {
		q = moert_program_at(p, i);
		for (int k = 0; k < 4; k++)
			inc[k] = inc_bundle[k] + i;
		CHECK(q && !strcmp(moert_code_section(q), moert_code_section(p)), "one code section");
		CHECK(q && moert_run(q, 37, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, i == 2)
			== MOERT_OK && io_ok(&io, wsyn, inc), "program %d runs with its weights", i);
	}
	moert_unload(moert_program_at(p, 1));	/* not the owner: nothing */
	inc[0] = 2, inc[1] = 3, inc[2] = 4, inc[3] = 5;
	CHECK(moert_run(moert_program_at(p, 1), 37, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, 0)
		== MOERT_OK && io_ok(&io, wsyn, inc), "program 1 still runs");
	moert_unload(p);
	/* one program alone, the owner left on the host */
	CHECK(moert_load_host(three, len, &p) == MOERT_OK, "load_host three");
	q = moert_program_at(p, 2);
	CHECK(moert_load_device(dev, q) == MOERT_OK && !strcmp(moert_code_section(p), ""),
	      "program 2 alone");
	inc[0] = 3, inc[1] = 4, inc[2] = 5, inc[3] = 6;
	CHECK(moert_run(q, 37, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, 0) == MOERT_OK &&
	      io_ok(&io, wsyn, inc), "program 2 alone runs");
	moert_unload(p);
	io_free(&io);
	free(three);
}

/*
 * Binding in a bundle of several programs: program 1 binds inc, program 2
 * binds w and inc, program 0 keeps the bundle's; one workspace for all;
 * each program loaded with moert_load_device (the owner first) runs with
 * its own weights, and a bind after its load is refused.
 */
static void
check_programs_bound(void)
{
	static const int32_t inc1[4] = {9, 10, 11, 12};
	size_t len;
	unsigned char *three = three_programs(&len);
	moert_program *p = NULL, *q[3];
	int64_t d96[1] = {H}, d4[1] = {4};
	uint64_t w, inc, incb, ws;
	int32_t inc0[4];
	Io io;

	if (!three)
		return;
	moert_malloc(dev, sizeof wmine, &w);
	moert_malloc(dev, sizeof inc_mine, &inc);
	moert_malloc(dev, sizeof inc1, &incb);
	moert_memcpy_htod(dev, w, wmine, sizeof wmine);
	moert_memcpy_htod(dev, inc, inc_mine, sizeof inc_mine);
	moert_memcpy_htod(dev, incb, inc1, sizeof inc1);
	CHECK(moert_load_host(three, len, &p) == MOERT_OK, "load_host three");
	moert_malloc(dev, moert_workspace_size(p), &ws);
	for (int i = 0; i < 3; i++)
		q[i] = moert_program_at(p, i);
	CHECK(moert_bind_weight(q[1], "inc", incb, "i32", 1, d4) == MOERT_OK, "bind inc of layer.1");
	CHECK(moert_bind_weight(q[2], "w", w, "f32", 1, d96) == MOERT_OK &&
	      moert_bind_weight(q[2], "inc", inc, "i32", 1, d4) == MOERT_OK, "bind w, inc of layer.2");
	CHECK(!(moert_weight_flags(q[0], 1) & MOERT_WEIGHT_BOUND) &&
	      (moert_weight_flags(q[1], 1) & MOERT_WEIGHT_BOUND) &&
	      !(moert_weight_flags(q[1], 0) & MOERT_WEIGHT_BOUND) &&
	      (moert_weight_flags(q[2], 0) & MOERT_WEIGHT_BOUND), "flags per program");
	for (int i = 0; i < 3; i++)
		CHECK(moert_set_workspace(q[i], ws, moert_workspace_size(q[i])) == MOERT_OK &&
		      moert_load_device(dev, q[i]) == MOERT_OK, "load layer.%d", i);
	CHECK(moert_bind_weight(q[1], "w", w, "f32", 1, d96) == MOERT_EINVAL &&
	      strstr(moert_last_error(), "before moert_load_device"), "bind after load refused");
	io_init(&io, 37, 3);
	for (int k = 0; k < 4; k++)
		inc0[k] = inc_bundle[k];
	for (int g = 0; g < 2; g++) {
		CHECK(moert_run(q[0], 37, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, g)
			== MOERT_OK && io_ok(&io, wsyn, inc0), "layer.0, the bundle's weights, graph %d", g);
		CHECK(moert_run(q[1], 37, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, g)
			== MOERT_OK && io_ok(&io, wsyn, inc1), "layer.1, inc bound, graph %d", g);
		CHECK(moert_run(q[2], 37, (uint64_t[]){io.x}, (uint64_t[]){io.y, io.n}, NULL, g)
			== MOERT_OK && io_ok(&io, wmine, inc_mine), "layer.2, both bound, graph %d", g);
	}
	moert_unload(p);
	io_free(&io);
	moert_free(dev, w);
	moert_free(dev, inc);
	moert_free(dev, incb);
	moert_free(dev, ws);
	free(three);
}

/* serve_check BUNDLE --write-programs OUT: the three-program bundle to OUT
 * (for python/tests), no driver needed. */
static int
write_programs(const char *path)
{
	size_t len;
	unsigned char *three = three_programs(&len);
	FILE *f = three ? fopen(path, "wb") : NULL;
	int ok = f && fwrite(three, 1, len, f) == len;

	if (f && fclose(f) != 0)
		ok = 0;
	free(three);
	if (!ok)
		fprintf(stderr, "serve_check: cannot write %s\n", path);
	return ok ? 0 : 1;
}

int
main(int argc, char **argv)
{
	FILE *f;
	moert_status s;
	long n;

	if ((argc != 2 && !(argc == 4 && !strcmp(argv[2], "--write-programs"))) ||
	    !(f = fopen(argv[1], "rb"))) {
		fprintf(stderr, "usage: serve_check BUNDLE [--write-programs OUT] "
			"(gpu_runtime_check --emit DIR makes one)\n");
		return 2;
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	bundle = malloc((size_t)n);
	bundle_len = fread(bundle, 1, (size_t)n, f);
	fclose(f);
	if (argc == 4) {
		int rc = write_programs(argv[3]);
		free(bundle);
		return rc;
	}
	if ((s = moert_open(0, &dev))) {
		printf("SKIP serve_check: %s: %s\n", moert_status_name(s), moert_last_error());
		free(bundle);
		return 77;
	}
	for (int j = 0; j < H; j++)
		wsyn[j] = synth((uint32_t)j), wmine[j] = (float)(j % 13) * 0.5f - 3.0f;
	check_queries_and_refusals();
	check_all_bound();
	check_shared_workspace();
	check_threads(0);
	check_threads(1);
	check_programs();
	check_programs_bound();
	printf("%s serve_check: bind, workspaces, %d threads x %d runs (shared and own programs), "
	       "a bundle of three programs (own and bound weights)\n",
	       failed ? "FAIL" : "ok  ", NTHREAD, ITERS);
	moert_close(dev);
	free(bundle);
	return failed;
}
