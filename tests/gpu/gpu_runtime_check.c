/*
 * gpu_runtime_check.c — the runtime on a real GPU, end to end, with no
 * compiler involved: a bundle is built in memory with the bundle writer from
 * a Manifest struct and hand-written sm_80 PTX (JIT-compiled by the driver on
 * newer GPUs), then loaded, run for several T against a C reference, replayed
 * as a CUDA graph, refused for bad T / arch / PTX, timed, and loaded and
 * unloaded 1000 times while host RSS and device memory are watched; out of
 * device memory is refused cleanly.
 *
 *	gpu_runtime_check [--emit DIR]   DIR gets check.moeb and an ONNX-layout
 *	                                 case for the moert CLI (no GPU needed)
 *	gpu_runtime_check --emit-route DIR   a bundle with a route line and four
 *	                                 cases for moert test (route_fake.sh)
 * Exit 0 pass, 1 fail, 77 no driver or no device (CTest skip).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bundle.h"
#include "moert.h"

#define H 96		/* hidden size of the toy block */
#define MAXT 1000	/* max_tokens */
#define SEED 1234u
#define CYCLES 1000

/* AddressSanitizer's quarantine keeps freed memory resident: RSS says nothing */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static const char ptx_src[] =
	".version 7.0\n"
	".target sm_80\n"
	".address_size 64\n"
	"\n"
	"// w[j] = hash(seed, j) in [-0.5, 0.5): fills the synthetic weight\n"
	".visible .entry synth_w(.param .u64 p_w, .param .u64 p_seed, .param .u32 p_n)\n"
	"{\n"
	"	.reg .pred %p<2>;\n"
	"	.reg .b32 %r<12>;\n"
	"	.reg .b64 %rd<6>;\n"
	"	.reg .f32 %f<4>;\n"
	"\n"
	"	ld.param.u64 %rd1, [p_w];\n"
	"	cvta.to.global.u64 %rd1, %rd1;\n"
	"	ld.param.u64 %rd2, [p_seed];\n"
	"	ld.param.u32 %r1, [p_n];\n"
	"	mov.u32 %r2, %ctaid.x;\n"
	"	mov.u32 %r3, %ntid.x;\n"
	"	mov.u32 %r4, %tid.x;\n"
	"	mad.lo.u32 %r5, %r2, %r3, %r4;\n"
	"	setp.ge.u32 %p1, %r5, %r1;\n"
	"	@%p1 bra DONE;\n"
	"	cvt.u32.u64 %r6, %rd2;\n"
	"	mad.lo.u32 %r7, %r5, 0x9E3779B1, %r6;\n"
	"	shr.u32 %r8, %r7, 16;\n"
	"	xor.b32 %r7, %r7, %r8;\n"
	"	mul.lo.u32 %r7, %r7, 0x7FEB352D;\n"
	"	shr.u32 %r8, %r7, 15;\n"
	"	xor.b32 %r7, %r7, %r8;\n"
	"	mul.lo.u32 %r7, %r7, 0x846CA68B;\n"
	"	shr.u32 %r8, %r7, 16;\n"
	"	xor.b32 %r7, %r7, %r8;\n"
	"	shr.u32 %r9, %r7, 8;\n"
	"	cvt.rn.f32.u32 %f1, %r9;\n"
	"	mul.rn.f32 %f2, %f1, 0f33800000;\n"
	"	sub.rn.f32 %f3, %f2, 0f3F000000;\n"
	"	mul.wide.u32 %rd3, %r5, 4;\n"
	"	add.s64 %rd4, %rd1, %rd3;\n"
	"	st.global.f32 [%rd4], %f3;\n"
	"DONE:\n"
	"	ret;\n"
	"}\n"
	"\n"
	"// y[t,j] = x[t,j] * w[j] + 1 for t < T, j < H\n"
	".visible .entry axpb(.param .u64 p_x, .param .u64 p_w, .param .u64 p_y,\n"
	"		     .param .u32 p_T, .param .u32 p_H)\n"
	"{\n"
	"	.reg .pred %p<2>;\n"
	"	.reg .b32 %r<10>;\n"
	"	.reg .b64 %rd<10>;\n"
	"	.reg .f32 %f<6>;\n"
	"\n"
	"	ld.param.u64 %rd1, [p_x];\n"
	"	ld.param.u64 %rd2, [p_w];\n"
	"	ld.param.u64 %rd3, [p_y];\n"
	"	cvta.to.global.u64 %rd1, %rd1;\n"
	"	cvta.to.global.u64 %rd2, %rd2;\n"
	"	cvta.to.global.u64 %rd3, %rd3;\n"
	"	ld.param.u32 %r1, [p_T];\n"
	"	ld.param.u32 %r2, [p_H];\n"
	"	mul.lo.u32 %r3, %r1, %r2;\n"
	"	mov.u32 %r4, %ctaid.x;\n"
	"	mov.u32 %r5, %ntid.x;\n"
	"	mov.u32 %r6, %tid.x;\n"
	"	mad.lo.u32 %r7, %r4, %r5, %r6;\n"
	"	setp.ge.u32 %p1, %r7, %r3;\n"
	"	@%p1 bra DONE;\n"
	"	rem.u32 %r8, %r7, %r2;\n"
	"	mul.wide.u32 %rd4, %r7, 4;\n"
	"	add.s64 %rd5, %rd1, %rd4;\n"
	"	ld.global.f32 %f1, [%rd5];\n"
	"	mul.wide.u32 %rd6, %r8, 4;\n"
	"	add.s64 %rd7, %rd2, %rd6;\n"
	"	ld.global.f32 %f2, [%rd7];\n"
	"	mul.rn.f32 %f3, %f1, %f2;\n"
	"	add.rn.f32 %f4, %f3, 0f3F800000;\n"
	"	add.s64 %rd8, %rd3, %rd4;\n"
	"	st.global.f32 [%rd8], %f4;\n"
	"DONE:\n"
	"	ret;\n"
	"}\n"
	"\n"
	"// cnt[t] += inc[j % 4] for every (t, j): needs cnt zeroed first\n"
	".visible .entry rowcount(.param .u64 p_cnt, .param .u64 p_inc,\n"
	"			 .param .u32 p_T, .param .u32 p_H)\n"
	"{\n"
	"	.reg .pred %p<2>;\n"
	"	.reg .b32 %r<12>;\n"
	"	.reg .b64 %rd<8>;\n"
	"\n"
	"	ld.param.u64 %rd1, [p_cnt];\n"
	"	ld.param.u64 %rd2, [p_inc];\n"
	"	cvta.to.global.u64 %rd1, %rd1;\n"
	"	cvta.to.global.u64 %rd2, %rd2;\n"
	"	ld.param.u32 %r1, [p_T];\n"
	"	ld.param.u32 %r2, [p_H];\n"
	"	mul.lo.u32 %r3, %r1, %r2;\n"
	"	mov.u32 %r4, %ctaid.x;\n"
	"	mov.u32 %r5, %ntid.x;\n"
	"	mov.u32 %r6, %tid.x;\n"
	"	mad.lo.u32 %r7, %r4, %r5, %r6;\n"
	"	setp.ge.u32 %p1, %r7, %r3;\n"
	"	@%p1 bra DONE;\n"
	"	div.u32 %r8, %r7, %r2;\n"
	"	rem.u32 %r9, %r7, %r2;\n"
	"	and.b32 %r9, %r9, 3;\n"
	"	mul.wide.u32 %rd3, %r9, 4;\n"
	"	add.s64 %rd4, %rd2, %rd3;\n"
	"	ld.global.u32 %r10, [%rd4];\n"
	"	mul.wide.u32 %rd5, %r8, 4;\n"
	"	add.s64 %rd6, %rd1, %rd5;\n"
	"	red.global.add.u32 [%rd6], %r10;\n"
	"DONE:\n"
	"	ret;\n"
	"}\n"
	"\n"
	"// dst[t] = src[t] for t < T\n"
	".visible .entry copy_i32(.param .u64 p_src, .param .u64 p_dst, .param .u32 p_T)\n"
	"{\n"
	"	.reg .pred %p<2>;\n"
	"	.reg .b32 %r<8>;\n"
	"	.reg .b64 %rd<8>;\n"
	"\n"
	"	ld.param.u64 %rd1, [p_src];\n"
	"	ld.param.u64 %rd2, [p_dst];\n"
	"	cvta.to.global.u64 %rd1, %rd1;\n"
	"	cvta.to.global.u64 %rd2, %rd2;\n"
	"	ld.param.u32 %r1, [p_T];\n"
	"	mov.u32 %r4, %ctaid.x;\n"
	"	mov.u32 %r5, %ntid.x;\n"
	"	mov.u32 %r6, %tid.x;\n"
	"	mad.lo.u32 %r7, %r4, %r5, %r6;\n"
	"	setp.ge.u32 %p1, %r7, %r1;\n"
	"	@%p1 bra DONE;\n"
	"	mul.wide.u32 %rd3, %r7, 4;\n"
	"	add.s64 %rd4, %rd1, %rd3;\n"
	"	ld.global.u32 %r2, [%rd4];\n"
	"	add.s64 %rd5, %rd2, %rd3;\n"
	"	st.global.u32 [%rd5], %r2;\n"
	"DONE:\n"
	"	ret;\n"
	"}\n";

static const int32_t inc_w[4] = {1, 2, 3, 4};	/* the real weight */
static int nfail;

static void
check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s ", ok ? "ok  " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	nfail += !ok;
}

/* --- the C reference ------------------------------------------------------ */

static float
synth(uint32_t seed, uint32_t j)
{
	uint32_t x = j * 0x9E3779B1u + seed;

	x ^= x >> 16;
	x *= 0x7FEB352Du;
	x ^= x >> 15;
	x *= 0x846CA68Bu;
	x ^= x >> 16;
	return (float)(x >> 8) * 0x1p-24f - 0.5f;
}

static void
reference(const float *x, int64_t T, float *y, int32_t *n)
{
	for (int64_t t = 0; t < T; t++) {
		n[t] = 0;
		for (int j = 0; j < H; j++) {
			volatile float p = x[t * H + j] * synth(SEED, (uint32_t)j);
			y[t * H + j] = p + 1.0f;	/* two roundings, as in PTX */
			n[t] += inc_w[j % 4];
		}
	}
}

/* --- the bundle ------------------------------------------------------------ */

static MArg
A(MArgKind k, int index, const char *name)
{
	MArg a = {0};

	a.kind = k, a.index = index, a.name = name;
	return a;
}

static MArg
lit(MArgKind k, int64_t v)
{
	MArg a = {0};

	a.kind = k, a.v.i = v;
	return a;
}

/* A step with a 1-D grid and block. */
static MStep
step(MStepKind kind, const char *kernel, MExpr gx, int bx, int smem, MArg *a,
     int n)
{
	MStep s = {0};

	s.kind = kind, s.kernel = kernel, s.kidx = -1;
	s.grid[0] = gx, s.grid[1] = s.grid[2] = MEXPR_INT(1);
	s.block[0] = bx, s.block[1] = s.block[2] = 1;
	s.smem = smem, s.arg = a, s.narg = n;
	return s;
}

/* The manifest, filled the way the compiler fills one; code for `target`,
 * with `extra` bytes of arena beyond what the plan needs (the OOM check).
 * other 1: one more kernel, built for sm_100a only, launched by a line of
 * that target (arch=sm_100a: never on this device); other 2: the same
 * line without arch=; other 3: the memset says when=shared (which the
 * rowcount kernel does not deserve: it leaves its counts set). */
static char *
manifest_text(const char *target, uint64_t extra, int other, size_t *len)
{
	static MType p_synth[] = {MT_PTR, MT_U64, MT_I32};
	static MType p_axpb[] = {MT_PTR, MT_PTR, MT_PTR, MT_I32, MT_I32};
	static MType p_count[] = {MT_PTR, MT_PTR, MT_I32, MT_I32};
	static MType p_copy[] = {MT_PTR, MT_PTR, MT_I32};
	static const char *sm80[1];
	static MTensor in[1], out[2];
	static MWeight w[2];
	static MBuffer buf[1];
	static const char *sm100[1] = {"sm_100a"};
	static MKernel k[5];
	static MArg a0[3], a1[5], a2[4], a3[3];
	static MStep st[6];
	Manifest m = {0};

	sm80[0] = target;
	in[0] = (MTensor){"x", DT_F32, 2, {MEXPR_T(1), MEXPR_INT(H)}};
	out[0] = (MTensor){"y", DT_F32, 2, {MEXPR_T(1), MEXPR_INT(H)}};
	out[1] = (MTensor){"n", DT_I32, 1, {MEXPR_T(1)}};
	w[0] = (MWeight){"w", DT_F32, 1, {H}, 4 * H, 1, 0};
	w[1] = (MWeight){"inc", DT_I32, 1, {4}, sizeof inc_w, 0, 0};
	buf[0] = (MBuffer){"cnt", 0, MEXPR_T(4)};
	k[0] = (MKernel){"synth_w", sm80, 1, p_synth, 3, 0, 0, 0, 0, 0};
	k[1] = (MKernel){"axpb", sm80, 1, p_axpb, 5, 0, 0, 0, 0, 0};
	k[2] = (MKernel){"rowcount", sm80, 1, p_count, 4, 0, 0, 0, 0, 0};
	k[3] = (MKernel){"copy_i32", sm80, 1, p_copy, 3, 0, 0, 0, 0, 0};
	a0[0] = A(ARG_W, 0, "w"), a0[1] = lit(ARG_U64, SEED), a0[2] = lit(ARG_I32, H);
	a1[0] = A(ARG_IN, 0, NULL), a1[1] = A(ARG_W, 0, "w");
	a1[2] = A(ARG_OUT, 0, NULL), a1[3] = A(ARG_T, 0, NULL), a1[4] = lit(ARG_I32, H);
	a2[0] = A(ARG_BUF, 0, "cnt"), a2[1] = A(ARG_W, 1, "inc");
	a2[2] = A(ARG_T, 0, NULL), a2[3] = lit(ARG_I32, H);
	a3[0] = A(ARG_BUF, 0, "cnt"), a3[1] = A(ARG_OUT, 1, NULL), a3[2] = A(ARG_T, 0, NULL);
	st[0] = step(STEP_INIT, "synth_w", MEXPR_INT(1), 128, 0, a0, 3);
	st[1] = step(STEP_LAUNCH, "axpb", (MExpr){H, 0, 128}, 128, 0, a1, 5);
	st[2] = step(STEP_MEMSET, NULL, MEXPR_INT(0), 0, 0, NULL, 0);
	st[2].dst = A(ARG_BUF, 0, "cnt"), st[2].bytes = MEXPR_T(4);
	st[2].shared_only = other == 3;
	st[3] = step(STEP_LAUNCH, "rowcount", (MExpr){H, 0, 128}, 128, 0, a2, 4);
	/* 64 KiB of dynamic shared memory: exercises the >48 KiB attribute */
	st[4] = step(STEP_LAUNCH, "copy_i32", (MExpr){1, 0, 64}, 64, 65536, a3, 3);
	m.version = 1, m.moec = MOEC_VERSION, m.model = "gpu_runtime_check";
	m.synthetic = 1, m.seed = SEED, m.max_tokens = MAXT, m.arena = 4 * MAXT + extra;
	m.has_cost = 1, m.flops = (MExpr){2 * H, 0, 0};
	m.bytes = (MExpr){8 * H + 4, 4 * H, 0};
	m.in = in, m.nin = 1, m.out = out, m.nout = 2, m.w = w, m.nw = 2;
	m.buf = buf, m.nbuf = 1, m.k = k, m.nk = 4, m.step = st, m.nstep = 5;
	if (other == 1 || other == 2) {
		k[4] = (MKernel){"copy_i32_sm100", sm100, 1, p_copy, 3, 0, 0, 0, 0, 0};
		st[5] = st[4];
		st[5].kernel = k[4].name;
		st[5].arch = other == 1 ? sm100[0] : NULL;
		m.nk = 5, m.nstep = 6;
	}
	return bundle_manifest_print(&m, len);
}

/* A bundle with PTX for `target` ("sm_80") and `extra` arena bytes; malloc'd.
 * other: manifest_text's, with a ptx:sm_100a section that is never loaded. */
static unsigned char *
make_bundle_other(const char *target, const char *ptx, uint64_t extra, int other, size_t *len)
{
	char code[32], *man;
	unsigned char *b = NULL;
	BundleWriter w;
	Manifest *m;
	size_t mlen;
	Arena *a = arena_new(0);
	Diag d;

	diag_init(&d, stderr);
	snprintf(code, sizeof code, "ptx:%s", target);
	man = manifest_text(target, extra, other, &mlen);
	if (bundle_manifest_parse(a, "manifest", man, mlen, &m, &d) != 0)
		check(0, "the printed manifest parses back");
	bundle_writer_init(&w, NULL);
	if (bundle_add(&w, "manifest", man, mlen, &d) ||
	    bundle_add(&w, code, ptx, strlen(ptx), &d) ||
	    (other && bundle_add(&w, "ptx:sm_100a", "not loaded", 10, &d)) ||
	    bundle_add(&w, "weights", inc_w, sizeof inc_w, &d) ||
	    bundle_write(&w, &b, len, &d))
		check(0, "bundle_write");
	arena_free(a);
	free(man);
	return b;
}

static unsigned char *
make_bundle(const char *target, const char *ptx, uint64_t extra, size_t *len)
{
	return make_bundle_other(target, ptx, extra, 0, len);
}

/* --- device buffers, sized for max_tokens so graphs see one set of pointers */

typedef struct Io Io;
struct Io {
	moert_device *dev;
	uint64_t x, y, n;		/* device */
	float hx[MAXT * H], hy[MAXT * H], ry[MAXT * H];
	int32_t hn[MAXT], rn[MAXT];
};

static void
fill_x(Io *io, int64_t T, uint64_t seed)
{
	for (int64_t i = 0; i < T * H; i++)
		io->hx[i] = (float)((double)(mix64(seed + (uint64_t)i) >> 11) *
				    0x1p-53 * 4.0 - 2.0);
}

/* Run at T with the current hx; 0 when y and n match the reference. */
static int
run_t(Io *io, moert_program *p, int64_t T, int graph)
{
	uint64_t in[1] = {io->x}, out[2] = {io->y, io->n};
	moert_status s;

	memset(io->hy, 0, sizeof io->hy);
	memset(io->hn, 0, sizeof io->hn);
	if ((s = moert_memcpy_htod(io->dev, io->x, io->hx, (size_t)T * H * 4)) ||
	    (s = moert_memset(io->dev, io->y, 0xff, (size_t)T * H * 4)) ||
	    (s = moert_run(p, T, in, out, NULL, graph)) || (s = moert_sync(io->dev)) ||
	    (s = moert_memcpy_dtoh(io->dev, io->hy, io->y, (size_t)T * H * 4)) ||
	    (s = moert_memcpy_dtoh(io->dev, io->hn, io->n, (size_t)T * 4))) {
		printf("     %s: %s\n", moert_status_name(s), moert_last_error());
		return -1;
	}
	reference(io->hx, T, io->ry, io->rn);
	return memcmp(io->hy, io->ry, (size_t)T * H * 4) ||
	       memcmp(io->hn, io->rn, (size_t)T * 4);
}

static int
io_alloc(Io *io)
{
	return moert_malloc(io->dev, sizeof io->hx, &io->x) ||
	       moert_malloc(io->dev, sizeof io->hy, &io->y) ||
	       moert_malloc(io->dev, sizeof io->hn, &io->n);
}

static void
io_free(Io *io)
{
	moert_free(io->dev, io->x);
	moert_free(io->dev, io->y);
	moert_free(io->dev, io->n);
}

/* --- the checks ------------------------------------------------------------ */

static void
check_runs(Io *io, moert_program *p)
{
	static const int64_t ts[] = {1, 7, 128, 999, MAXT};

	for (size_t i = 0; i < NELEM(ts); i++) {
		fill_x(io, ts[i], 100 + i);
		check(run_t(io, p, ts[i], 0) == 0, "run T=%lld matches the C "
		      "reference bit for bit", (long long)ts[i]);
	}
}

static void
check_graphs(Io *io, moert_program *p)
{
	static float y1[MAXT * H];
	int64_t T = 37;
	int ok;

	fill_x(io, T, 7);
	ok = run_t(io, p, T, 0) == 0;
	memcpy(y1, io->hy, sizeof y1);
	ok &= run_t(io, p, T, 1) == 0;	/* captured */
	ok &= memcmp(y1, io->hy, (size_t)T * H * 4) == 0;
	ok &= run_t(io, p, T, 1) == 0;	/* replayed */
	check(ok && memcmp(y1, io->hy, (size_t)T * H * 4) == 0,
	      "graph capture and replay at T=37 give the same bytes as a plain run");
	fill_x(io, T, 8);
	ok = run_t(io, p, T, 1) == 0;
	for (int i = 0; i < 5; i++)
		ok &= run_t(io, p, T, 1) == 0;	/* memset is in the graph */
	check(ok, "replay reads new input values; counters re-zeroed each replay");
	fill_x(io, MAXT, 9);
	check(run_t(io, p, MAXT, 1) == 0 && run_t(io, p, 3, 1) == 0 &&
	      run_t(io, p, MAXT, 1) == 0, "graphs cached per T (T=1000, 3, 1000)");
}

/* moert_read_buffer: buffer cnt as the plan leaves it (copy_i32 copies it
 * to output n, so it must equal the n of a full run on the same input);
 * refusals of an unknown name, T out of range, a wrong size. */
static void
check_read_buffer(Io *io, moert_program *p)
{
	uint64_t in[1] = {io->x}, out[2] = {io->y, io->n};
	int32_t cnt[MAXT];
	size_t bytes = 0;
	moert_status s;

	fill_x(io, 7, 7);
	check(run_t(io, p, 7, 0) == 0, "run T=7 before reading a buffer");
	memset(cnt, 0x55, sizeof cnt);
	s = moert_buffer_size(p, "cnt", 7, &bytes);
	check(s == MOERT_OK && bytes == 28, "buffer cnt: %zu bytes at T=7", bytes);
	s = moert_read_buffer(p, "cnt", 7, in, out, cnt, bytes);
	check(s == MOERT_OK && !memcmp(cnt, io->hn, bytes), "buffer cnt read back at T=7: %s: %s",
	      moert_status_name(s), moert_last_error());
	s = moert_read_buffer(p, "nope", 7, in, out, cnt, bytes);
	check(s == MOERT_EINVAL && strstr(moert_last_error(), "no buffer 'nope'"),
	      "unknown buffer refused: %s", moert_last_error());
	s = moert_read_buffer(p, "cnt", MAXT + 1, in, out, cnt, bytes);
	check(s == MOERT_ETOKENS, "buffer at T=%d refused: %s", MAXT + 1, moert_last_error());
	s = moert_read_buffer(p, "cnt", 7, in, out, cnt, bytes - 4);
	check(s == MOERT_EINVAL && strstr(moert_last_error(), "holds 28 bytes"),
	      "wrong size refused: %s", moert_last_error());
	check(moert_num_routes(p) == 0, "no route lines: no routes");
}

/* moert_read_weight: the synthetic weight as the init step generated it on
 * the device, the real one as uploaded; refusals of an unknown name and a
 * wrong size. */
static void
check_read_weight(moert_program *p)
{
	float w[H];
	int32_t inc[4];
	int same = 1;
	moert_status s;

	memset(w, 0x55, sizeof w);
	s = moert_read_weight(p, "w", w, sizeof w);
	for (int j = 0; j < H; j++)
		same &= w[j] == synth(SEED, (uint32_t)j);
	check(s == MOERT_OK && same, "generated weight w read back: %s: %s", moert_status_name(s),
	      moert_last_error());
	s = moert_read_weight(p, "inc", inc, sizeof inc);
	check(s == MOERT_OK && !memcmp(inc, inc_w, sizeof inc), "real weight inc read back: %s",
	      moert_status_name(s));
	s = moert_read_weight(p, "nope", inc, sizeof inc);
	check(s == MOERT_EINVAL && strstr(moert_last_error(), "no weight 'nope'"),
	      "unknown weight refused: %s", moert_last_error());
	s = moert_read_weight(p, "inc", inc, sizeof inc - 4);
	check(s == MOERT_EINVAL && strstr(moert_last_error(), "holds 16 bytes"),
	      "wrong weight size refused: %s", moert_last_error());
}

static void
check_refusals(Io *io, moert_program *p)
{
	uint64_t in[1] = {io->x}, out[2] = {io->y, io->n};
	unsigned char *b;
	moert_program *q = NULL;
	moert_status s;
	size_t len;

	s = moert_run(p, MAXT + 1, in, out, NULL, 0);
	check(s == MOERT_ETOKENS, "T=%d refused: %s: %s", MAXT + 1,
	      moert_status_name(s), moert_last_error());
	s = moert_run(p, 0, in, out, NULL, 1);
	check(s == MOERT_ETOKENS, "T=0 refused: %s", moert_status_name(s));
	b = make_bundle("sm_100a", ptx_src, 0, &len);
	s = moert_load(io->dev, b, len, &q);
	check(s == MOERT_EARCH && !q, "bundle for sm_100a only refused: %s: %s",
	      moert_status_name(s), moert_last_error());
	free(b);
	/* a kernel of another target only (sm_90a's warp-specialised GEMMs in a
	 * default bundle): its arch= lines go, and it is never looked up; a line
	 * for every target naming it is refused */
	b = make_bundle_other("sm_80", ptx_src, 0, 1, &len);
	s = moert_load(io->dev, b, len, &q);
	check(s == MOERT_OK, "a kernel of sm_100a only, launched for sm_100a only, left out: %s: %s",
	      moert_status_name(s), s ? moert_last_error() : "");
	if (!s) {
		fill_x(io, 7, 11);
		check(run_t(io, q, 7, 0) == 0, "... and the program runs as without it");
	}
	moert_unload(q);
	q = NULL;
	free(b);
	b = make_bundle_other("sm_80", ptx_src, 0, 2, &len);
	s = moert_load(io->dev, b, len, &q);
	check(s == MOERT_EARCH && !q && strstr(moert_last_error(), "kernel 'copy_i32_sm100' has no code in"),
	      "a kernel of sm_100a only launched on every target refused: %s: %s",
	      moert_status_name(s), moert_last_error());
	free(b);
	b = make_bundle("sm_80", ".version 7.0\n.target sm_80\n.address_size 64\n"
			"this is not ptx;\n", 0, &len);
	s = moert_load(io->dev, b, len, &q);
	check(s == MOERT_ELOAD && strstr(moert_last_error(), "JIT log"),
	      "bad PTX refused with the JIT log: %s: %.300s", moert_status_name(s),
	      moert_last_error());
	free(b);
}

static void
check_bench(Io *io, moert_program *p)
{
	uint64_t in[1] = {io->x}, out[2] = {io->y, io->n};
	double us[2] = {0, 0};
	moert_status s;

	for (int g = 0; g < 2; g++) {
		s = moert_bench(p, MAXT, in, out, g, 10, 200, &us[g]);
		check(s == MOERT_OK && us[g] > 0, "bench T=%d%s: median %.2f us",
		      MAXT, g ? " (graph)" : "", us[g]);
	}
}

/* Out of device memory, on a real device: a bundle that asks for more than
 * the device has, and one that fits while a first program holds all but 2
 * GiB of it, are both refused with MOERT_ENOMEM, leave device memory as it
 * was, and leave the running program and the context usable. */
static void
check_oom(Io *io, moert_program *p)
{
	size_t fr0, tot, fr1, fr2, len;
	moert_program *q = NULL, *hog = NULL;
	unsigned char *b;
	moert_status s;

	moert_mem_info(io->dev, &fr0, &tot);
	b = make_bundle("sm_80", ptx_src, (uint64_t)tot + (1ull << 30), &len);
	s = moert_load(io->dev, b, len, &q);
	moert_mem_info(io->dev, &fr1, &tot);
	check(s == MOERT_ENOMEM && !q && fr1 + (2 << 20) >= fr0,
	      "a bundle needing %.1f GiB on a %.1f GiB device: %s: %.160s; free %.1f -> "
	      "%.1f MiB", (tot + (1ull << 30)) / 1073741824.0, tot / 1073741824.0,
	      moert_status_name(s), moert_last_error(), fr0 / 1048576.0, fr1 / 1048576.0);
	free(b);
	if (strstr(moert_device_name(io->dev), "fakecuda")) {
		/* the stand-in's memory is the host's: filling it is no test */
		printf("     (a device nearly full: real GPUs only)\n");
		return;
	}
	b = make_bundle("sm_80", ptx_src, fr1 - (2ull << 30), &len);
	s = moert_load(io->dev, b, len, &hog);
	free(b);
	if (s) {
		check(0, "a program holding all but 2 GiB loads: %s: %s",
		      moert_status_name(s), moert_last_error());
		return;
	}
	moert_mem_info(io->dev, &fr1, &tot);
	b = make_bundle("sm_80", ptx_src, 4ull << 30, &len);
	s = moert_load(io->dev, b, len, &q);
	moert_mem_info(io->dev, &fr2, &tot);
	check(s == MOERT_ENOMEM && !q && fr2 + (2 << 20) >= fr1,
	      "with %.0f MiB free, a bundle needing 4 GiB: %s; free %.1f -> %.1f MiB",
	      fr1 / 1048576.0, moert_status_name(s), fr1 / 1048576.0, fr2 / 1048576.0);
	free(b);
	fill_x(io, MAXT, 11);
	check(run_t(io, hog, MAXT, 0) == 0 && run_t(io, p, MAXT, 1) == 0,
	      "after the refusal both loaded programs still run correctly");
	moert_unload(hog);
	moert_mem_info(io->dev, &fr2, &tot);
	check(fr2 + (2 << 20) >= fr0, "unloading gives the memory back: free %.1f MiB "
	      "(%.1f before)", fr2 / 1048576.0, fr0 / 1048576.0);
}

static size_t
rss(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/*
 * A memset that says when=shared (docs/runtime.md, Workspaces): skipped on
 * the program's own arena, which the load zeroed, so the first run is right
 * and the second sees the counts the first left (rowcount does not clear
 * them, so the compiler would not have marked it: this shows the skip); on
 * a workspace the caller gives, it runs every time.
 */
static void
check_when_shared(Io *io)
{
	size_t len;
	unsigned char *b = make_bundle_other("sm_80", ptx_src, 0, 3, &len);
	moert_program *p;
	uint64_t ws = 0;
	int ok;

	if (moert_load(io->dev, b, len, &p)) {
		check(0, "when=shared: load: %s", moert_last_error());
		free(b);
		return;
	}
	fill_x(io, 7, 11);
	ok = run_t(io, p, 7, 0) == 0;
	check(ok && run_t(io, p, 7, 0) != 0 && run_t(io, p, 7, 1) != 0,
	      "when=shared on its own arena: the first run right (zeroed at load), later ones skip the memset");
	ok = !moert_malloc(io->dev, moert_workspace_size(p), &ws) &&
	     !moert_memset(io->dev, ws, 0x5a, moert_workspace_size(p)) &&
	     !moert_set_workspace(p, ws, moert_workspace_size(p));
	for (int i = 0; ok && i < 3; i++)
		ok = run_t(io, p, 7, i == 2) == 0;
	check(ok, "when=shared on a workspace the caller gives: the memset runs, every run right");
	moert_unload(p);
	if (ws)
		moert_free(io->dev, ws);
	free(b);
}

static void
check_cycles(Io *io, const unsigned char *b, size_t len)
{
	size_t rss0 = 0, free0 = 0, fr, tot;
	moert_program *p;
	int bad = 0;

	for (int i = 0; i < CYCLES; i++) {
		int64_t T = 1 + (i * 37) % MAXT;
		if (moert_load(io->dev, b, len, &p)) {
			check(0, "cycle %d: load: %s", i, moert_last_error());
			return;
		}
		if (i % 100 == 0)
			fill_x(io, T, (uint64_t)i);
		bad += run_t(io, p, T, i % 2) != 0;
		moert_unload(p);
		if (i == 49) {
			rss0 = rss();
			moert_mem_info(io->dev, &free0, &tot);
		}
	}
	moert_mem_info(io->dev, &fr, &tot);
	check(bad == 0, "%d load/run/unload cycles (graphs on every other) all correct",
	      CYCLES);
	check(UNDER_ASAN || rss() <= rss0 + (4 << 20), "host RSS after cycle 50: "
	      "%.1f MiB, after %d: %.1f MiB%s", rss0 / 1048576.0, CYCLES,
	      rss() / 1048576.0, UNDER_ASAN ? " (not checked under ASan)" : "");
	check(fr + (2 << 20) >= free0, "device free after cycle 50: %.1f MiB, after "
	      "%d: %.1f MiB", free0 / 1048576.0, CYCLES, fr / 1048576.0);
}

/* DIR/check.moeb and DIR/case/test_data_set_0 for the moert CLI. */
static void
emit(const char *dir, Io *io, const unsigned char *b, size_t len)
{
	char path[4096];
	int64_t T = 7, dx[2] = {T, H}, dn[1] = {T};
	Tensor x, y, n;
	Diag d;

	diag_init(&d, stderr);
	mkdir(dir, 0777);
	fill_x(io, T, 42);
	reference(io->hx, T, io->ry, io->rn);
	tensor_alloc(&x, DT_F32, 2, dx), tensor_alloc(&y, DT_F32, 2, dx);
	tensor_alloc(&n, DT_I32, 1, dn);
	memcpy(x.data, io->hx, (size_t)T * H * 4);
	memcpy(y.data, io->ry, (size_t)T * H * 4);
	memcpy(n.data, io->rn, (size_t)T * 4);
	snprintf(path, sizeof path, "%s/check.moeb", dir);
	file_write(path, b, len, &d);
	snprintf(path, sizeof path, "%s/case", dir);
	mkdir(path, 0777);
	snprintf(path, sizeof path, "%s/case/test_data_set_0", dir);
	mkdir(path, 0777);
	snprintf(path, sizeof path, "%s/case/test_data_set_0/input_0.pb", dir);
	tensor_write(path, &x, &d);
	snprintf(path, sizeof path, "%s/case/test_data_set_0/output_0.pb", dir);
	tensor_write(path, &y, &d);
	snprintf(path, sizeof path, "%s/case/test_data_set_0/output_1.pb", dir);
	tensor_write(path, &n, &d);
	tensor_free(&x), tensor_free(&y), tensor_free(&n);
	check(d.nerror == 0, "wrote %s/check.moeb and %s/case", dir, dir);
}

/*
 * --emit-route DIR: a static bundle of 4 tokens whose "router" is copy_i32
 * (the logits and the experts picked are inputs, copied into the route's
 * buffers; y is the logits again) and whose route line ranks sigmoid(logit)
 * + a selection bias that synth_w generates on the device (DeepSeek-V3's
 * router); with four cases for moert test (tests/gpu/route_fake.sh):
 *   ref/   the reference picked {0,3} for token 1 where the device picked
 *          {0,1}: scores within 2e-4 (logits 1.28 apart): a near tie, passes
 *   bare/  no reference routing; y's row 1 is off: a near tie on the
 *          device's own scores (the bias read back), passes
 *   far/   no reference routing; y's row 0 is off, a clear choice: fails
 *   wrong/ the reference picked {2,3} for token 2 where the device kept
 *          {0,1}: beyond a near tie, fails
 * and bad.moeb, whose route line says select=tanh (refused, exit 2).
 */
enum { RT = 4, RE = 4, RK = 2, RSEED = 1234 };

static const char route_manifest[] =
	"moeb 1\nmoec " MOEC_VERSION "\nmodel route_fake\nsynthetic 1234\nmax_tokens 4\nsym T\n"
	"arena 256\ninput l f32 4,4\ninput id i32 4,2\noutput y f32 4,4\n"
	"weight sb f32 4 bytes=16 synth\n"
	"buffer lg offset=0 bytes=64\nbuffer ids offset=128 bytes=32\n"
	"kernel synth_w target=sm_80 params=ptr,u64,i32 regs=0 smem=0 spills=0\n"
	"kernel copy_i32 target=sm_80 params=ptr,ptr,i32 regs=0 smem=0 spills=0\n"
	"init synth_w grid=1,1,1 block=128,1,1 smem=0 args=w:sb,u64:1234,i32:4\n"
	"launch copy_i32 grid=1,1,1 block=64,1,1 smem=0 args=in:0,buf:lg,i32:16\n"
	"launch copy_i32 grid=1,1,1 block=64,1,1 smem=0 args=in:1,buf:ids,i32:8\n"
	"launch copy_i32 grid=1,1,1 block=64,1,1 smem=0 args=buf:lg,out:0,i32:16\n"
	"route logits=lg dtype=f32 ids=ids experts=4 k=2 groups=1,1 score=max select=sigmoid "
	"bias=w:sb\n";

static void
route_set(const char *dir, const char *name, const Tensor *t, Diag *d)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/test_data_set_0", dir);
	file_make_dir(dir, d);
	file_make_dir(path, d);
	snprintf(path, sizeof path, "%s/test_data_set_0/%s.pb", dir, name);
	tensor_write(path, t, d);
}

static void
write_route_bundle(const char *dir, const char *name, const char *manifest, Diag *d)
{
	char path[4096];
	BundleWriter w;
	unsigned char *b = NULL;
	size_t len;

	bundle_writer_init(&w, NULL);
	if (bundle_add(&w, "manifest", manifest, strlen(manifest), d) ||
	    bundle_add(&w, "ptx:sm_80", ptx_src, strlen(ptx_src), d) ||
	    bundle_write(&w, &b, &len, d))
		return;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	file_write(path, b, len, d);
	free(b);
}

static int
emit_route(const char *dir)
{
	static const int32_t dev_ids[RT * RK] = {0, 1, 0, 1, 0, 1, 0, 1};
	int64_t dl[2] = {RT, RE}, di[2] = {RT, RK};
	Tensor l, id, y, rid, rv;
	float bias[RE];
	char sub[4096];
	Diag d;
	Routing r;

	diag_init(&d, stderr);
	for (int x = 0; x < RE; x++)
		bias[x] = synth(RSEED, (uint32_t)x);	/* about -0.25, -0.23, -0.25, 0.05 */
	tensor_alloc(&l, DT_F32, 2, dl), tensor_alloc(&y, DT_F32, 2, dl);
	tensor_alloc(&rv, DT_F32, 2, dl);
	tensor_alloc(&id, DT_I32, 2, di), tensor_alloc(&rid, DT_I32, 2, di);
	float *lv = l.data;
	for (int t = 0; t < RT; t++) {	/* expert 0 first, then 1 clearly ahead of 3 ... */
		lv[t * RE + 0] = 3.0f, lv[t * RE + 1] = 2.5f, lv[t * RE + 2] = -1.0f;
		lv[t * RE + 3] = -2.0f;
	}
	/* ... but for token 1: sigmoid(l1) + b1 2e-4 above sigmoid(0) + b3 */
	double target = 0.5 + bias[3] - bias[1] + 2e-4;
	lv[RE + 1] = (float)log(target / (1 - target)), lv[RE + 3] = 0.0f;
	memcpy(id.data, dev_ids, sizeof dev_ids);
	r = (Routing){.T = RT, .E = RE, .k = RK, .ngroup = 1, .topk_group = 1};
	r.val = xmalloc(sizeof lv[0] * RT * RE);
	memcpy(r.val, lv, sizeof lv[0] * RT * RE);
	routing_select(&r, ROUTE_SELECT_SIGMOID, bias);
	memcpy(rv.data, r.val, sizeof lv[0] * RT * RE);
	free(r.val);
	memcpy(rid.data, dev_ids, sizeof dev_ids);
	((int32_t *)rid.data)[1 * RK + 1] = 3;	/* the reference's side of the tie */
	file_make_dir(dir, &d);
	write_route_bundle(dir, "route.moeb", route_manifest, &d);
	/* and one whose route line names a ranking there is none of */
	char bad[sizeof route_manifest];
	const char *at = strstr(route_manifest, "select=sigmoid");
	snprintf(bad, sizeof bad, "%.*sselect=tanh%s", (int)(at - route_manifest), route_manifest,
		 at + strlen("select=sigmoid"));
	write_route_bundle(dir, "bad.moeb", bad, &d);
	static const char *const sets[] = {"ref", "bare", "far", "wrong"};
	for (int c = 0; c < 4; c++) {
		snprintf(sub, sizeof sub, "%s/%s", dir, sets[c]);
		memcpy(y.data, l.data, sizeof lv[0] * RT * RE);
		if (c == 1 || c == 2)	/* a row the kernels got wrong, or computed for other experts */
			((float *)y.data)[(c == 1 ? 1 : 0) * RE + 2] += 1.0f;
		route_set(sub, "input_0", &l, &d);
		route_set(sub, "input_1", &id, &d);
		route_set(sub, "output_0", &y, &d);
		if (c == 3)
			((int32_t *)rid.data)[2 * RK] = 2, ((int32_t *)rid.data)[2 * RK + 1] = 3;
		if (c == 0 || c == 3) {
			route_set(sub, "routing_0", &rid, &d);
			route_set(sub, "routing_0_logits", &rv, &d);
		}
	}
	tensor_free(&l), tensor_free(&y), tensor_free(&rv), tensor_free(&id), tensor_free(&rid);
	printf("%s %s/route.moeb and its cases\n", d.nerror ? "FAIL" : "wrote", dir);
	return d.nerror != 0;
}

int
main(int argc, char **argv)
{
	static Io io;
	moert_program *p = NULL;
	unsigned char *b;
	moert_status s;
	size_t len;

	if (argc == 3 && !strcmp(argv[1], "--emit-route"))
		return emit_route(argv[2]);	/* needs no GPU */
	b = make_bundle("sm_80", ptx_src, 0, &len);
	if (argc == 3 && !strcmp(argv[1], "--emit"))
		emit(argv[2], &io, b, len);	/* needs no GPU */
	if ((s = moert_open(0, &io.dev))) {
		printf("SKIP gpu_runtime_check: %s: %s\n", moert_status_name(s),
		       moert_last_error());
		free(b);
		return s == MOERT_ENODRIVER || s == MOERT_ENODEV ? 77 : 1;
	}
	printf("device: %s\n", moert_device_name(io.dev));
	check(moert_verify(b, len) == MOERT_OK, "bundle of %zu bytes verifies", len);
	if (io_alloc(&io) || (s = moert_load(io.dev, b, len, &p))) {
		check(0, "load: %s: %s", moert_status_name(s), moert_last_error());
		return 1;
	}
	check(1, "loaded with %s (synthetic weight from init, real weight uploaded)",
	      moert_code_section(p));
	check_runs(&io, p);
	check_graphs(&io, p);
	check_refusals(&io, p);
	check_read_buffer(&io, p);
	check_read_weight(p);
	check_bench(&io, p);
	check_oom(&io, p);
	moert_unload(p);
	check_when_shared(&io);
	check_cycles(&io, b, len);
	io_free(&io);
	free(b);
	moert_close(io.dev);
	printf("gpu_runtime_check: %d failed\n", nfail);
	return nfail ? 1 : 0;
}
