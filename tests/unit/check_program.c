/*
 * check_program.c — whole compilation on the CPU emulator: a fused module
 * compiled for arch "emu" runs its launch plan (init steps, decode and
 * prefill GEMM variants chosen by T) and must match the interpreter on the
 * unfused module, for T on both sides of the decode threshold.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bundle.h"
#include "codegen.h"
#include "passes.h"

int ir_eval_has_fn(Op op);	/* eval.c, for tests */

static const char moe_block[] =
	"weight $g : bf16[64] mean=1.0 scale=0.2 seed=1\n"
	"weight $router : bf16[8,64] seed=2\n"
	"weight $wgu : bf16[8,64,64] seed=3\n"
	"weight $wdown : bf16[8,64,32] seed=4\n"
	"\n"
	"graph @block(%x: bf16[T,64]) -> (y: bf16[T,64]) {\n"
	"\t%h = rms_norm %x, $g, eps=1e-05 : bf16[T,64]\n"
	"\t%logits = matmul %h, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"\t%m = moe %h, %logits, _, $wgu, $wdown, k=2, renorm=1, router=softmax : bf16[T,64]\n"
	"\t%y = add %x, %m : bf16[T,64]\n"
	"\tret %y\n}\n";

static void
fill(Tensor *t, uint64_t seed)
{
	for (int64_t i = 0; i < tensor_numel(t); i++) {
		uint64_t h = mix64(seed ^ mix64((uint64_t)i));
		dtype_store(t->dt, t->data, (size_t)i, (double)(h >> 11) * 0x1p-52 - 1.0);
	}
}

static void
check_wide(CgProgram *p, Module *ref, int64_t T, int64_t width)
{
	const Manifest *man = cg_program_manifest(p);
	Tensor in, want, got;
	int64_t dim[2] = {T, width};
	Diag d;
	Compare c;

	diag_init(&d, stderr);
	ck_assert_int_eq(tensor_alloc(&in, DT_BF16, 2, dim), 0);
	fill(&in, (uint64_t)T);
	ck_assert_int_eq(ir_eval(ir_main_graph(ref), &in, 1, &want, NULL, &d), 0);
	ck_assert_int_eq(tensor_alloc(&got, man->out[0].dt, 2, dim), 0);
	memset(got.data, 0xff, tensor_nbytes(&got));	/* NaN: every element must be written */
	ck_assert_int_eq(cg_program_emulate(p, &in, &got, T, &d), 0);
	tensor_compare(&got, &want, 1e-2, 4e-2, &c);
	ck_assert_msg(tensor_close(&c, DT_BF16, tensor_numel(&want)),
		      "T=%lld: rel_l2 %g, max_abs %g", (long long)T, c.rel_l2, c.max_abs);
	tensor_free(&in);
	tensor_free(&want);
	tensor_free(&got);
}

/* check_wide at the decode variant's edges (T = 1, 5, 64) and the first
 * prefill T (65), 512 wide. */
static void
check_wide_decode(CgProgram *p, Module *ref)
{
	static const int64_t ts[] = {1, 5, 64, 65};

	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
		check_wide(p, ref, ts[i], 512);
}

static void
check_at(CgProgram *p, Module *ref, int64_t T)
{
	check_wide(p, ref, T, 64);
}

/* The block `src` through the default pipeline (m), and as parsed (*ref,
 * the interpreter's reference). */
/* The passes for a compile of up to max_tokens (0: unknown; split-f32 leaves
 * a decode-range bundle's f32 router to the decode front). */
static Module *
fused_for(const char *name, const char *src, Module **ref, Diag *d, int64_t max_tokens)
{
	Module *m = ir_parse(name, src, strlen(src), d);
	PassOpts o;
	PassCtx c = {.d = d};

	*ref = ir_parse(name, src, strlen(src), d);
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(*ref);
	pass_default_opts(&o);
	o.max_tokens = max_tokens;
	ck_assert_int_eq(pass_run(m, &o, &c), 0);
	return m;
}

static Module *
fused(const char *name, const char *src, Module **ref, Diag *d)
{
	return fused_for(name, src, ref, d, 0);
}

/* Options for the emulator alone, runs of up to max_tokens. */
static void
emu_opts(CgCompileOpts *co, int64_t max_tokens)
{
	cg_compile_default(co);
	co->arch[0] = "emu";
	co->narch = 1;
	co->max_tokens = max_tokens;
}

/* text through the default passes and codegen for one target, as moec
 * compile runs them; *m, the module, is freed after the program. */
static CgProgram *
compile_text(const char *name, const char *text, const char *arch, int64_t max_tokens, DbgFlags debug, Module **m)
{
	PassOpts o;
	Diag d;
	PassCtx c = {.d = &d};
	CgCompileOpts co;
	CgProgram *p;

	diag_init(&d, stderr);
	*m = ir_parse(name, text, strlen(text), &d);
	ck_assert_ptr_nonnull(*m);
	pass_default_opts(&o);
	ck_assert_int_eq(pass_run(*m, &o, &c), 0);
	emu_opts(&co, max_tokens);
	co.arch[0] = arch;
	co.debug = debug;
	p = cg_compile(*m, &co, &d);
	ck_assert_ptr_nonnull(p);
	return p;
}

/* K = 512: decode GEMMs too few tiles for the SMs (split-K), in a block
 * with a MoE and a dense GEMM. */
static const char split_block[] =
	"weight $g : bf16[512] mean=1.0 scale=0.2 seed=1\n"
	"weight $router : bf16[8,512] seed=2\n"
	"weight $wgu : bf16[8,64,512] seed=3\n"
	"weight $wdown : bf16[8,512,32] seed=4\n"
	"weight $wd : bf16[512,512] scale=0.05 seed=5\n"
	"weight $bd : bf16[512] seed=6\n"
	"\n"
	"graph @block(%x: bf16[T,512]) -> (y: bf16[T,512]) {\n"
	"\t%h = rms_norm %x, $g, eps=1e-05 : bf16[T,512]\n"
	"\t%logits = matmul %h, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"\t%m = moe %h, %logits, _, $wgu, $wdown, k=2, renorm=1, router=softmax : bf16[T,512]\n"
	"\t%u = matmul %m, $wd, trans_b=1 : bf16[T,512]\n"
	"\t%ub = add %u, $bd : bf16[T,512]\n"
	"\t%y = gelu %ub : bf16[T,512]\n"
	"\tret %y\n}\n";

/*
 * Split-K through the whole plan: the decode GEMMs are split (grid z > 1,
 * the workspace buffer and its flags' memset in the manifest) and the
 * program matches the interpreter at decode and prefill T.
 */
START_TEST(test_program_split_k_matches_interpreter)
{
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;
	CgProgram *p;
	int split = 0, memsets = 0, ws = 0;

	diag_init(&d, stderr);
	m = fused("split.ir", split_block, &ref, &d);
	emu_opts(&co, 256);
	p = cg_compile(m, &co, &d);
	ck_assert_ptr_nonnull(p);
	const Manifest *man = cg_program_manifest(p);
	for (int i = 0; i < man->nstep; i++) {
		const MStep *st = &man->step[i];
		if (st->kind == STEP_MEMSET)
			memsets += strcmp(st->dst.name, "splitk$ws") == 0;
		else if (st->kind == STEP_LAUNCH && st->grid[2].b > 1)
			split += st->thi == 64;		/* the decode variants */
	}
	for (int i = 0; i < man->nbuf; i++)
		ws += strcmp(man->buf[i].name, "splitk$ws") == 0;
	ck_assert_int_ge(split, 2);	/* the MoE's gate|up and the dense GEMM */
	ck_assert_int_ge(memsets, 2);
	ck_assert_int_eq(ws, 1);
	check_wide_decode(p, ref);
	cg_program_free(p);
	ir_free_module(m);
	ir_free_module(ref);
}
END_TEST

/* gpt-oss's shapes scaled down: N = 384 (gate|up) and 192 (down), which 256
 * does not divide and 192 does; 4 experts, top-2: 128 rows an expert at T = 256. */
static const char wide_moe_block[] =
	"weight $g : bf16[192] mean=1.0 scale=0.2 seed=1\n"
	"weight $router : bf16[4,192] seed=2\n"
	"weight $wgu : bf16[4,384,192] seed=3\n"
	"weight $wdown : bf16[4,192,192] seed=4\n"
	"\n"
	"graph @block(%x: bf16[T,192]) -> (y: bf16[T,192]) {\n"
	"\t%h = rms_norm %x, $g, eps=1e-05 : bf16[T,192]\n"
	"\t%logits = matmul %h, $router, to=f32, trans_b=1 : f32[T,4]\n"
	"\t%m = moe %h, %logits, _, $wgu, $wdown, k=2, renorm=1, router=softmax : bf16[T,192]\n"
	"\t%y = add %x, %m : bf16[T,192]\n"
	"\tret %y\n}\n";

/* The block's prefill GEMM launches (T > 64): how many, and how many of
 * them persistent (a grid of 132 x CTAs per SM). */
static void
prefill_launches(const CgProgram *p, int *n, int *persistent)
{
	const Manifest *man = cg_program_manifest(p);

	*n = *persistent = 0;
	for (int i = 0; i < man->nstep; i++) {
		const MStep *st = &man->step[i];
		if (st->kind != STEP_LAUNCH || st->tlo != 65)
			continue;
		(*n)++;
		*persistent += st->grid[0].a == 0 && st->grid[0].b % 132 == 0 && st->grid[1].b == 1;
	}
}

/*
 * The persistent schedule of prefill grouped GEMMs and the 192-column tile
 * (the down GEMM, N = 192; gate|up takes 128x128 here, whose 3 column
 * tiles give more CTAs) through the whole plan on the emulator (as sm_90a):
 * mma.sync, and the wgmma and warp-specialised mainloops
 * (--debug=emu-wgmma,emu-ws); with --debug=persistent-prefill persistent,
 * with --debug=full-blocks every row block.  Each matches the interpreter
 * at T = 100 (experts' second row tiles of a few rows) and 256.
 */
START_TEST(test_program_prefill_192_persistent)
{
	static const DbgFlags dbg[] = {0, DBG_PERSISTENT_PREFILL, DBG_EMU_WGMMA | DBG_EMU_WS,
				       DBG_EMU_WGMMA | DBG_EMU_WS | DBG_PERSISTENT_PREFILL, DBG_EMU_WGMMA | DBG_FULL_BLOCKS};
	Diag d;
	Module *m, *ref;

	diag_init(&d, stderr);
	m = fused("wide.ir", wide_moe_block, &ref, &d);
	for (size_t i = 0; i < sizeof dbg / sizeof dbg[0]; i++) {
		CgCompileOpts co;
		CgProgram *p;
		int n, pers;

		emu_opts(&co, 256);
		co.debug = dbg[i];
		p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		prefill_launches(p, &n, &pers);
		ck_assert_msg(n == 2, "debug set %zu: %d prefill launches", i, n);
		ck_assert_int_eq(pers, dbg[i] & DBG_PERSISTENT_PREFILL ? 2 : 0);
		check_wide(p, ref, 100, 192);
		check_wide(p, ref, 256, 192);
		cg_program_free(p);
	}
	ir_free_module(m);
	ir_free_module(ref);
}
END_TEST

/*
 * --debug=slots-x (lower-moe): the slots rounded to x's type (bf16) in the
 * down GEMM's epilogue, summed in f32 by the 16-byte combine reading them
 * as bf16 with 16-byte loads, a thread per 8 outputs (the "moe.slots"
 * buffer 2 bytes an element: 2 slots x 192 x 2 bytes a token).  On the emulator with the default mainloop and the
 * warp-specialised one (clusters sharing B), against the
 * interpreter's f32 slots within bf16's tolerance, at decode and prefill T.
 */
START_TEST(test_program_slots_x_matches_interpreter)
{
	static const DbgFlags dbg[] = {0, DBG_EMU_WGMMA | DBG_EMU_WS | DBG_GROUPED_C2};
	Module *m = NULL, *ref = NULL;
	PassOpts o;
	Diag d;

	diag_init(&d, stderr);
	m = ir_parse("wide.ir", wide_moe_block, strlen(wide_moe_block), &d);
	ref = ir_parse("wide.ir", wide_moe_block, strlen(wide_moe_block), &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(ref);
	pass_default_opts(&o);
	o.debug = DBG_SLOTS_X;
	PassCtx c = {.d = &d};
	ck_assert_int_eq(pass_run(m, &o, &c), 0);
	for (size_t i = 0; i < sizeof dbg / sizeof dbg[0]; i++) {
		CgCompileOpts co;
		CgProgram *p;
		const Manifest *man;
		int slots = 0;

		emu_opts(&co, 256);
		co.debug = dbg[i];
		p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		man = cg_program_manifest(p);
		for (int b = 0; b < man->nbuf; b++)
			if (strstr(man->buf[b].name, "slots")) {
				slots++;
				ck_assert_int_eq(man->buf[b].bytes.a, 2 * 192 * 2);
			}
		ck_assert_int_eq(slots, 1);
		const MStep *last = &man->step[man->nstep - 1];	/* the combine: a thread per 8 outputs */
		ck_assert_int_eq(last->kind, STEP_LAUNCH);
		ck_assert_int_eq(last->grid[0].a, 192 / 8);
		check_wide(p, ref, 3, 192);
		check_wide(p, ref, 100, 192);
		check_wide(p, ref, 256, 192);
		cg_program_free(p);
	}
	ir_free_module(m);
	ir_free_module(ref);
}
END_TEST

/* A router-shaped dense GEMM: one column tile of 128 (Qwen3-30B-A3B's router
 * is N = 128, K = 2048), f32 logits. */
static const char router_block[] =
	"weight $router : bf16[128,128] seed=2\n"
	"\n"
	"graph @router(%x: bf16[T,128]) -> (l: f32[T,128]) {\n"
	"\t%l = matmul %x, $router, to=f32, trans_b=1 : f32[T,128]\n"
	"\tret %l\n}\n";

/*
 * rows64_prefill (program.c, session 35): planned for 4096 tokens, the
 * router's prefill launch takes 64-row tiles (128x128 would be 32 CTAs on
 * the 132 SMs the emulator plans for, 64x128 is 64), its decode launch
 * keeps its own; on the emulator the prefill tiles match the interpreter at
 * T = 65, 100 and 300, on the mma.sync and the wgmma mainloops.
 */
START_TEST(test_program_rows64_prefill_router)
{
	static const DbgFlags dbg[] = {0, DBG_EMU_WGMMA};
	Diag d;
	Module *m, *ref;

	diag_init(&d, stderr);
	m = fused("router.ir", router_block, &ref, &d);
	for (size_t i = 0; i < sizeof dbg / sizeof dbg[0]; i++) {
		CgCompileOpts co;
		CgProgram *p;
		const Manifest *man;
		int prefill = 0;

		emu_opts(&co, 4096);
		co.debug = dbg[i];
		p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		man = cg_program_manifest(p);
		for (int j = 0; j < man->nstep; j++) {
			const MStep *st = &man->step[j];
			if (st->kind != STEP_LAUNCH || st->tlo != 65)
				continue;
			prefill++;
			ck_assert_int_eq(st->thi, 4096);
			ck_assert_int_eq(st->grid[0].a, 1);	/* cdiv(T, 64): 64-row tiles */
			ck_assert_int_eq(st->grid[0].div, 64);
			ck_assert_int_eq(st->grid[1].b, 1);	/* one column tile of 128 */
		}
		ck_assert_int_eq(prefill, 1);
		check_wide(p, ref, 65, 128);
		check_wide(p, ref, 100, 128);
		check_wide(p, ref, 300, 128);
		cg_program_free(p);
	}
	ir_free_module(m);
	ir_free_module(ref);
}
END_TEST

/* --- decode fronts (k_front.c) --------------------------------------------- */

/* The routing families of the front tests: the route's attributes, E, k,
 * whether a selection bias is read, whether the router GEMM adds a bias
 * (gpt-oss: bf16, cast to f32 at init). */
static const struct {
	const char *attrs;
	int E, k, selbias, bias;
} front_fams[] = {
	{"router=softmax", 8, 2, 0, 0},						/* Mixtral */
	{"router=softmax, renorm=1", 128, 8, 0, 0},				/* Qwen3 (norm_topk_prob) */
	{"router=topk_softmax", 32, 4, 0, 1},					/* gpt-oss */
	{"router=sigmoid, renorm=1, scale=2.5", 16, 3, 0, 0},
	{"router=sigmoid, renorm=1, scale=2.5, n_group=8, topk_group=4, group_score=top2", 256, 8, 1, 0},
	/* DeepSeek-V3 */
};

/* Launches of the plan whose kernel name ends in suffix. */
static int
launches(const Manifest *man, const char *suffix)
{
	int n = 0;

	for (int i = 0; i < man->nstep; i++) {
		const MStep *st = &man->step[i];
		size_t a = st->kernel ? strlen(st->kernel) : 0, b = strlen(suffix);
		n += st->kind == STEP_LAUNCH && a >= b && strcmp(st->kernel + a - b, suffix) == 0;
	}
	return n;
}

/* Launches of the plan whose kernel's note holds `what`. */
static int
launches_noted(CgProgram *p, const char *what)
{
	const Manifest *man = cg_program_manifest(p);
	CgModule *mod = cg_program_module(p, "emu");
	int n = 0;

	for (int i = 0; i < man->nstep; i++) {
		const MStep *st = &man->step[i];
		const CgKernel *k = st->kind == STEP_LAUNCH ? cg_module_find(mod, st->kernel) : NULL;
		n += k && strstr(k->note, what) != NULL;
	}
	return n;
}

/* Values that multiply and add exactly in f32: k/8 for k in -8..8, a few of them, so ties are common. */
static void
fill_exact(Tensor *t, uint64_t seed, int levels)
{
	for (int64_t i = 0; i < tensor_numel(t); i++) {
		uint64_t h = mix64(seed ^ mix64((uint64_t)i));
		dtype_store(t->dt, t->data, (size_t)i, (double)((int)(h % (2 * levels + 1)) - levels) / 8);
	}
}

/* Routing family f's graph over rows of H: the router GEMM, route and permute. */
static void
fam_src(char *src, size_t n, size_t f, int H)
{
	int E = front_fams[f].E, k = front_fams[f].k;

	snprintf(src, n,
		 "%s"
		 "graph @r(%%x: bf16[T,%d], %%wr: bf16[%d,%d]) -> (w: f32[T,%d], ids: i32[T,%d], "
		 "offs: i32[%d], rows: i32[%d*T]) {\n"
		 "\t%%l = matmul %%x, %%wr, to=f32, trans_b=1 : f32[T,%d]\n"
		 "\t%%w, %%ids = route %%l%s, k=%d, %s : f32[T,%d], i32[T,%d]\n"
		 "\t%%offs, %%rows, %%pos = permute %%ids, experts=%d : i32[%d], i32[%d*T], i32[%d*T]\n"
		 "\tret %%w, %%ids, %%offs, %%rows\n}\n",
		 front_fams[f].selbias ? "weight $b : f32[256] scale=0.5 seed=9\n\n" : "", H, E, H, k,
		 k, E + 1, k, E, front_fams[f].selbias ? ", $b" : "", k, front_fams[f].attrs, k, k, E,
		 E + 1, k, k);
}

/* fam_src's inputs at T tokens (exact values: ties are common) and the
 * interpreter's results of them in want[4] (w, ids, offs, rows). */
static void
fam_inputs(Module *ref, Tensor in[2], Tensor want[4], int64_t T, int H, int E, Diag *d)
{
	int64_t dx[2] = {T, H}, dw[2] = {E, H};

	ck_assert_int_eq(tensor_alloc(&in[0], DT_BF16, 2, dx), 0);
	ck_assert_int_eq(tensor_alloc(&in[1], DT_BF16, 2, dw), 0);
	fill_exact(&in[0], (uint64_t)T, 2);
	fill_exact(&in[1], 7, 1);
	ck_assert_int_eq(ir_eval(ir_main_graph(ref), in, 2, want, NULL, d), 0);
}

/* got against the interpreter's want: ids, offsets and rows bit for bit, weights to f32 rounding. */
static void
fam_check(const Tensor *got, const Tensor *want, size_t f, int64_t T)
{
	for (int o = 1; o < 4; o++)
		ck_assert_msg(memcmp(got[o].data, want[o].data, tensor_nbytes(&want[o])) == 0,
			      "%s T=%lld: result %d differs from the interpreter's", front_fams[f].attrs, (long long)T, o);
	for (int64_t i = 0; i < tensor_numel(&want[0]); i++) {
		float a = ((float *)got[0].data)[i], b = ((float *)want[0].data)[i];
		ck_assert_msg(fabsf(a - b) <= 1e-6f * fmaxf(1, fabsf(b)), "%s T=%lld: weight %lld %g, want %g",
			      front_fams[f].attrs, (long long)T, (long long)i, a, b);
	}
}

/*
 * The router GEMM, route and permute as one front launch (max_tokens 64):
 * logits exact in f32 (small multiples of 1/8), so ids, offsets and rows
 * must equal the interpreter's bit for bit (ties to the lower expert, which
 * the coarse values make common), and the weights agree to f32 rounding;
 * at T = 1, 16, 64, every routing family, rows of 64 (loaded an element at
 * a time) and 2304 (16-byte loads in two batches, W not kept in registers).
 */
START_TEST(test_front_routing_is_the_interpreters)
{
	/* loop index: max_tokens 64 as it was, then --debug=vec-ahead (the butterfly top-k; the
	 * permute of a slot a thread where max_tokens * k fit the last CTA) at 64, 16 and 4, then
	 * with --debug=front-pair (two tokens a warp where a warp gets several: E = 128), then with
	 * --debug=front2 at 64 and 16 (whole rows a batch: E = 16's rows of 2304, one token a warp), then
	 * with --debug=front3 (the ticket hand-over, the slot sort 8 buckets a load: T = 5's 5 k slots
	 * padded) at 16 with front2, at 4 and at 64 (the counter sort there) */
	static const struct {
		DbgFlags debug;
		int64_t mt, ts[3];
	} arm[] = {{0, 64, {1, 16, 64}}, {DBG_VEC_AHEAD, 64, {1, 16, 64}}, {DBG_VEC_AHEAD, 16, {1, 5, 16}},
		   {DBG_VEC_AHEAD, 4, {1, 3, 4}}, {DBG_VEC_AHEAD | DBG_FRONT_PAIR, 64, {1, 16, 64}},
		   {DBG_FRONT2, 64, {1, 16, 64}}, {DBG_FRONT2, 16, {1, 5, 16}},
		   {DBG_FRONT2 | DBG_FRONT3, 16, {1, 5, 16}}, {DBG_FRONT3, 4, {1, 3, 4}},
		   {DBG_FRONT3, 64, {1, 16, 64}}};
	const int64_t *ts = arm[_i].ts;
	char src[2048];

	for (size_t f = 0; f < NELEM(front_fams); f++) {
		int E = front_fams[f].E, H = f % 2 ? 2304 : 64;	/* vector rows, or not */
		Diag d;
		Module *m, *ref;
		CgCompileOpts co;
		CgProgram *p;

		fam_src(src, sizeof src, f, H);
		diag_init(&d, stderr);
		m = fused("front.ir", src, &ref, &d);
		emu_opts(&co, arm[_i].mt);
		co.debug = arm[_i].debug;
		p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		const Manifest *man = cg_program_manifest(p);
		ck_assert_int_eq(launches(man, "_front"), 1);
		int run = 0;
		for (int i = 0; i < man->nstep; i++)
			run += man->step[i].kind != STEP_INIT;
		int two = launches(man, "_front_route");	/* CG_FRONT_SPLIT_DEFAULT: two launches */
		ck_assert_int_eq(run, 2 + two);	/* its flags' memset and the launch: nothing else */
		ck_assert_int_eq(launches_noted(p, " ticket"), !!((arm[_i].debug & DBG_FRONT3) ||
								  (CG_FRONT3_DEFAULT && E <= 128) ||	/* one a CTA */
								  CG_FRONT_SPLIT_DEFAULT));	/* its layout */
		ck_assert_int_eq(two, CG_FRONT_SPLIT_DEFAULT && launches_noted(p, " ticket"));
		/* CG_ROUTE2_DEFAULT: the route launch has a warp a token for up to 16 tokens */
		for (int i = 0; i < man->nstep; i++) {
			const char *kn = man->step[i].kernel;
			const CgKernel *rk = kn && strstr(kn, "_front_route") ? cg_module_find(cg_program_module(p, "emu"), kn)
				: NULL;
			if (rk)
				ck_assert_int_eq(rk->block[0], arm[_i].mt <= 4 ? 128
						 : arm[_i].mt <= 8 || !CG_ROUTE2_DEFAULT ? 256 : 512);
		}
		/* whole rows where a warp gets one token (E = 128 at max_tokens 4; else pairs) */
		ck_assert_int_eq(launches_noted(p, "whole rows a batch"),
				 ((arm[_i].debug & DBG_FRONT2) || CG_FRONT2_DEFAULT) && H == 2304 &&
				 (E == 16 || arm[_i].mt <= 4));
		for (size_t ti = 0; ti < NELEM(arm[0].ts); ti++) {
			int64_t T = ts[ti];
			Tensor in[2], want[4], got[4];
			fam_inputs(ref, in, want, T, H, E, &d);
			for (int o = 0; o < 4; o++) {
				ck_assert_int_eq(tensor_alloc(&got[o], want[o].dt, want[o].rank, want[o].dim), 0);
				memset(got[o].data, 0xff, tensor_nbytes(&got[o]));
			}
			ck_assert_int_eq(cg_program_emulate(p, in, got, T, &d), 0);
			fam_check(got, want, f, T);
			for (int o = 0; o < 4; o++) {
				tensor_free(&got[o]);
				tensor_free(&want[o]);
			}
			tensor_free(&in[0]);
			tensor_free(&in[1]);
		}
		cg_program_free(p);
		ir_free_module(m);
		ir_free_module(ref);
	}
}
END_TEST

/*
 * --debug=route-count: a prefill plan's route kernel also counts the grid
 * permute's slots (atomics into a table the router GEMM's flag memset
 * zeroes; the emulator starts the workspace as garbage), and the permute
 * has no count launch.  Every routing family's router GEMM at max_tokens
 * 300 (a split decode variant, so a memset), T = 1 and 64 (the split GEMM
 * writes its tiles first), 65, 129 (a partial chunk), 300: ids, offsets
 * and rows bit for bit the interpreter's and the plan without the flag's
 * (which counts too where CG_ROUTE_COUNT_DEFAULT is 1), weights to f32
 * rounding.
 */
START_TEST(test_route_counts_for_the_permute)
{
	static const int64_t ts[] = {1, 64, 65, 129, 300};
	char src[2048];
	int taken = 0;

	for (size_t f = 0; f < NELEM(front_fams); f++) {
		int E = front_fams[f].E, H = 256;
		Diag d;
		Module *m, *ref;
		CgCompileOpts co;
		CgProgram *p, *q;

		fam_src(src, sizeof src, f, H);
		diag_init(&d, stderr);
		m = fused("count.ir", src, &ref, &d);
		emu_opts(&co, 300);
		co.debug = DBG_ROUTE_COUNT;
		p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		co.debug = 0;
		q = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(q);
		int counted = launches_noted(p, " counts");
		ck_assert_int_eq(counted, launches_noted(p, "counted by the route"));
		ck_assert_int_eq(launches(cg_program_manifest(p), "_count"), !counted);
		int qc = launches_noted(q, " counts");	/* without the flag: the default's */
		ck_assert_int_eq(qc, CG_ROUTE_COUNT_DEFAULT ? counted : 0);
		ck_assert_int_eq(launches(cg_program_manifest(q), "_count"), !qc);
		taken += counted;
		for (size_t ti = 0; ti < NELEM(ts); ti++) {
			int64_t T = ts[ti];
			Tensor in[2], want[4], got[4], old[4];
			fam_inputs(ref, in, want, T, H, E, &d);
			for (int o = 0; o < 4; o++) {
				ck_assert_int_eq(tensor_alloc(&got[o], want[o].dt, want[o].rank, want[o].dim), 0);
				ck_assert_int_eq(tensor_alloc(&old[o], want[o].dt, want[o].rank, want[o].dim), 0);
				memset(got[o].data, 0xff, tensor_nbytes(&got[o]));
				memset(old[o].data, 0xee, tensor_nbytes(&old[o]));
			}
			ck_assert_int_eq(cg_program_emulate(p, in, got, T, &d), 0);
			ck_assert_int_eq(cg_program_emulate(q, in, old, T, &d), 0);
			for (int o = 0; o < 4; o++)
				ck_assert_msg(memcmp(got[o].data, old[o].data, tensor_nbytes(&want[o])) == 0,
					      "%s T=%lld: result %d differs from the count launch's",
					      front_fams[f].attrs, (long long)T, o);
			fam_check(got, want, f, T);
			for (int o = 0; o < 4; o++) {
				tensor_free(&got[o]);
				tensor_free(&old[o]);
				tensor_free(&want[o]);
			}
			tensor_free(&in[0]);
			tensor_free(&in[1]);
		}
		cg_program_free(p);
		cg_program_free(q);
		ir_free_module(m);
		ir_free_module(ref);
	}
	fprintf(stderr, "route-count taken by %d of %d families\n", taken, (int)NELEM(front_fams));
	ck_assert_int_gt(taken, 0);
}
END_TEST

/*
 * The front's logit as its warp sums it: lane L adds x*w over its elements
 * in order (16-byte groups of 8 when H % 8 == 0, group g of lane L the
 * elements (32 g + L) 8 .. + 7 inside the row, else every 32nd element),
 * then the shfl.up scan leaves the sum in lane 31.  Products go through a
 * volatile so the compiler cannot fuse them into an fma.  split: rows split
 * over the front's 4 warps (cg_front_split: max_t <= 4, H a multiple of
 * 1024): warp w's lanes sum the groups w G/4 .. (w+1) G/4 - 1 so, and the
 * warps' scans are added in warp order.
 */
static float
front_logit(const Tensor *x, int64_t t, const Tensor *w, int64_t e, int64_t H, int split)
{
	int parts = split ? 4 : 1;	/* split: the row's groups in 4 warps' quarters (H % 1024 == 0) */
	float sum = 0;

	for (int wp = 0; wp < parts; wp++) {
		float v[32];
		for (int L = 0; L < 32; L++) {
			float acc = 0;
			for (int64_t n = 0; n < (H % 8 ? (H + 31) / 32 : (H + 255) / 256 * 8); n++) {
				int64_t i = H % 8 == 0 ? (32 * (n / 8) + L) * 8 + n % 8 : 32 * n + L;
				if (i >= H)
					break;
				if (split && n / 8 * parts / (H / 256) != wp)	/* group n / 8: another warp's */
					continue;
				volatile float p = (float)dtype_load(x->dt, x->data, (size_t)(t * H + i)) *
					(float)dtype_load(w->dt, w->data, (size_t)(e * H + i));
				acc = acc + p;
			}
			v[L] = acc;
		}
		for (int d = 1; d < 32; d *= 2)
			for (int L = 31; L >= 0; L--)
				v[L] = (L >= d ? v[L - d] : 0.0f) + v[L];
		sum = wp ? sum + v[31] : v[31];
	}
	return sum;
}

/*
 * The front's logits are bit for bit the summation order it documents (and
 * had before experts were grouped: one order per expert whatever EB), on
 * random values: 8 and 32 experts (rows of 320 and gpt-oss's 2880: 16-byte
 * groups, the last one in lanes 0-7 only; 36: every 32nd element), 128 (rows
 * of 2048: W kept in registers) and 256 (rows of 2304 and 320: two experts a
 * CTA).
 */
START_TEST(test_front_logits_keep_their_order)
{
	/* split: at max_tokens 4 (the default; --debug=no-vec-gemm for the unsplit one): rows split over the
	 * warps (2048) and not (320); pair: --debug=front-pair at max_tokens 16, two tokens a warp (E = 128)
	 * or one with the sums broadcast by shuffles; pair 2: --debug=front2 (whole rows a batch: Mixtral's
	 * 4096 and gpt-oss's 2880 one token a warp, 2048 two) */
	static const struct { int E; int64_t H; int split, pair; } cs[] = {
		{8, 320, 0, 0}, {32, 2880, 0, 0}, {128, 2048, 0, 0}, {256, 2304, 0, 0}, {256, 320, 0, 0},
		{128, 2048, 1, 0}, {8, 320, 1, 0}, {8, 36, 0, 0}, {128, 2048, 0, 1}, {32, 2880, 0, 1}, {256, 2304, 0, 1},
		{8, 4096, 0, 2}, {32, 2880, 0, 2}, {128, 2048, 0, 2}, {256, 2304, 0, 2}};
	char src[1024];

	for (size_t c = 0; c < NELEM(cs); c++) {
		int E = cs[c].E, split = cs[c].split;
		int64_t H = cs[c].H, ts[] = {1, split ? 4 : 16};
		Diag d;
		Module *m, *ref;
		CgCompileOpts co;
		CgProgram *p;

		snprintf(src, sizeof src,
			 "graph @r(%%x: bf16[T,%lld], %%wr: bf16[%d,%lld]) -> (l: f32[T,%d], w: f32[T,2], "
			 "ids: i32[T,2], offs: i32[%d], rows: i32[2*T]) {\n"
			 "\t%%l = matmul %%x, %%wr, to=f32, trans_b=1 : f32[T,%d]\n"
			 "\t%%w, %%ids = route %%l, k=2, router=softmax : f32[T,2], i32[T,2]\n"
			 "\t%%offs, %%rows, %%pos = permute %%ids, experts=%d : i32[%d], i32[2*T], i32[2*T]\n"
			 "\tret %%l, %%w, %%ids, %%offs, %%rows\n}\n",
			 (long long)H, E, (long long)H, E, E + 1, E, E, E + 1);
		diag_init(&d, stderr);
		m = fused("front_order.ir", src, &ref, &d);
		emu_opts(&co, split ? 4 : 16);
		co.debug = (split ? 0 : DBG_NO_VEC_GEMM) | (cs[c].pair == 1 ? DBG_FRONT_PAIR : 0) |
			(cs[c].pair == 2 ? DBG_FRONT2 : 0);
		p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(launches(cg_program_manifest(p), "_front"), 1);
		ck_assert_int_eq(launches_noted(p, "rows split over the warps"), split && H % 1024 == 0);
		ck_assert_int_eq(launches_noted(p, "tokens in pairs"), (cs[c].pair || CG_FRONT_PAIR_DEFAULT ||
									CG_FRONT2_DEFAULT) && E == 128 &&
				 !(split && H % 1024 == 0));
		ck_assert_int_eq(launches_noted(p, "whole rows a batch"), (cs[c].pair == 2 || CG_FRONT2_DEFAULT) &&
				 !split && (E == 8 || E == 32 || E == 128) && H >= 2048);
		for (size_t ti = 0; ti < NELEM(ts); ti++) {
			int64_t T = ts[ti], dx[2] = {T, H}, dw[2] = {E, H}, dl[2] = {T, E}, dk[2] = {T, 2};
			int64_t doff[1] = {E + 1}, drow[1] = {2 * T};
			Tensor in[2], got[5];
			ck_assert_int_eq(tensor_alloc(&in[0], DT_BF16, 2, dx), 0);
			ck_assert_int_eq(tensor_alloc(&in[1], DT_BF16, 2, dw), 0);
			for (int k = 0; k < 2; k++)
				for (int64_t i = 0; i < tensor_numel(&in[k]); i++)
					dtype_store(DT_BF16, in[k].data, (size_t)i,
						    (double)(mix64((uint64_t)(k * 1000003 + i)) % 2001) / 1000 - 1);
			ck_assert_int_eq(tensor_alloc(&got[0], DT_F32, 2, dl), 0);
			ck_assert_int_eq(tensor_alloc(&got[1], DT_F32, 2, dk), 0);
			ck_assert_int_eq(tensor_alloc(&got[2], DT_I32, 2, dk), 0);
			ck_assert_int_eq(tensor_alloc(&got[3], DT_I32, 1, doff), 0);
			ck_assert_int_eq(tensor_alloc(&got[4], DT_I32, 1, drow), 0);
			ck_assert_int_eq(cg_program_emulate(p, in, got, T, &d), 0);
			for (int64_t t = 0; t < T; t++)
				for (int e = 0; e < E; e++) {
					float a = ((float *)got[0].data)[t * E + e];
					float b = front_logit(&in[0], t, &in[1], e, H, split && H % 1024 == 0);
					ck_assert_msg(memcmp(&a, &b, 4) == 0, "E=%d H=%lld T=%lld: logit [%lld,%d] %.9g, "
						      "want %.9g", E, (long long)H, (long long)T, (long long)t, e, a, b);
				}
			for (int o = 0; o < 5; o++)
				tensor_free(&got[o]);
			tensor_free(&in[0]);
			tensor_free(&in[1]);
		}
		cg_program_free(p);
		ir_free_module(m);
		ir_free_module(ref);
	}
}
END_TEST

/* A router GEMM, route (top-2 softmax) and permute over E experts: a decode front at max_tokens 16. */
static void
router_src(char *src, size_t n, int E)
{
	snprintf(src, n,
		 "graph @r(%%x: bf16[T,2304], %%wr: bf16[%d,2304]) -> (w: f32[T,2], ids: i32[T,2], "
		 "offs: i32[%d], rows: i32[2*T]) {\n"
		 "\t%%l = matmul %%x, %%wr, to=f32, trans_b=1 : f32[T,%d]\n"
		 "\t%%w, %%ids = route %%l, k=2, router=softmax : f32[T,2], i32[T,2]\n"
		 "\t%%offs, %%rows, %%pos = permute %%ids, experts=%d : i32[%d], i32[2*T], i32[2*T]\n"
		 "\tret %%w, %%ids, %%offs, %%rows\n}\n", E, E + 1, E, E, E + 1);
}

/*
 * front2's default (CG_FRONT2_DEFAULT, program.c find_fronts) takes fronts of
 * one expert a CTA only: on sm_90a at max_tokens 16, 16 experts' front has
 * its acq_rel hand-over (vec-ahead's last CTA) without a flag (the routing
 * test checks its whole rows on the emulator), DeepSeek-V3's shape (256 experts, two a CTA) keeps main's fence.sc
 * hand-over (its block was 0.3% slower with front2 on the H200, session 35);
 * --debug=front2 takes it there too.
 */
START_TEST(test_front2_default_takes_one_expert_ctas)
{
	char src[1024];

	for (int E = 16; E <= 256; E *= 16)
		for (int flag = 0; flag < 2; flag++) {
			Module *m;
			size_t len;
			router_src(src, sizeof src, E);
			CgProgram *p = compile_text("front2.ir", src, "sm_90a", 16, flag ? DBG_FRONT2 : 0, &m);
			const char *ptx = cg_program_ptx(p, 0, &len);
			/* CG_FRONT_SPLIT_DEFAULT: no hand-over in the kernel at all */
			int f2 = flag || (CG_FRONT2_DEFAULT && E == 16) || CG_FRONT_SPLIT_DEFAULT;
			ck_assert_ptr_nonnull(ptx);
			ck_assert_int_eq(launches(cg_program_manifest(p), "_front"), 1);
			/* fence.sc.gpu: main's hand-over (fence.acq_rel alone no longer tells: front3's ticket has it) */
			ck_assert_msg((strstr(ptx, "fence.sc.gpu") == NULL) == f2, "E=%d flag=%d: fence.sc %s", E,
				      flag, strstr(ptx, "fence.sc.gpu") ? "present" : "absent");
			cg_program_free(p);
			ir_free_module(m);
		}
}
END_TEST

/* Occurrences of s in the n bytes at p. */
static int
count_in(const char *p, size_t n, const char *s)
{
	int c = 0;

	for (const char *q = p; (q = memmem(q, n - (size_t)(q - p), s, strlen(s))); q++)
		c++;
	return c;
}

/*
 * --debug=front3 on sm_90a (16 experts, one a CTA, and 256, two a CTA; the
 * default, CG_FRONT3_DEFAULT, at 16 only): the front hands over by one atomic ticket (one atom.global.add, no volatile
 * spin loads: the flags are neither waited for nor cleared), and with the
 * small sort (16 experts) reads the buckets 8 a trip (two loops, two
 * ld.shared.v4 a trip; LLVM vectorised main's loops 4 a trip, with a scalar
 * remainder loop); without the flag neither the atom nor the spins' absence.  The emulator runs (tcase front3) check the bits.
 */
START_TEST(test_front3_hands_over_by_ticket)
{
	char src[1024];
	int v4[2];

	for (int E = 16; E <= 256; E *= 16)
		for (int flag = 0; flag < 2; flag++) {
			Module *m;
			size_t len;
			router_src(src, sizeof src, E);
			CgProgram *p = compile_text("front3.ir", src, "sm_90a", 16, flag ? DBG_FRONT3 : 0, &m);
			const char *ptx = cg_program_ptx(p, 0, &len), *k;
			/* the default: one expert a CTA; CG_FRONT_SPLIT_DEFAULT: every front (its layout) */
			int on = flag || (CG_FRONT3_DEFAULT && E == 16) || CG_FRONT_SPLIT_DEFAULT;
			ck_assert_ptr_nonnull(ptx);
			ck_assert_int_eq(launches(cg_program_manifest(p), "_front"), 1);
			ck_assert_ptr_nonnull(k = strstr(ptx, "_front("));	/* the front's .entry to its end */
			len -= (size_t)(k - ptx);
			ck_assert_int_eq(count_in(k, len, "atom.global.add"), on && !CG_FRONT_SPLIT_DEFAULT);
			ck_assert_int_eq(count_in(k, len, "ld.volatile") > 0, !on);
			v4[flag] = count_in(k, len, "ld.shared.v4");
			cg_program_free(p);
			ir_free_module(m);
			if (flag && E == 16)	/* the sort's two loops, two loads a trip */
				ck_assert_int_ge(v4[1], 4);
			if (flag && E == 256 && !CG_FRONT_SPLIT_DEFAULT)	/* the counter sort: as without the flag */
				ck_assert_int_eq(v4[1], v4[0]);
		}
}
END_TEST

/*
 * Whole MoE blocks with max_tokens 64: the norm, the rstd of the norm folded
 * into gate|up, the router GEMM, route and permute are one front launch
 * (no route or permute kernel left), and the block matches the interpreter
 * at T = 1, 16 for every routing family, 64 for those of up to 32 experts (rows of 256: W and gamma kept
 * in registers; DeepSeek-V3's router in f32: the norm cast to f32, f32 W);
 * with max_tokens 65 there is no front (prefill keeps its
 * kernels).
 */
/* Family f's MoE block with its router's norm (rows of 256; DeepSeek's router in f32). */
static void
front_block_src(char *src, size_t n, size_t f)
{
	int E = front_fams[f].E, k = front_fams[f].k;
	const char *rt = front_fams[f].selbias ? "f32" : "bf16";	/* DeepSeek's router is f32 */

	snprintf(src, n,
		 "weight $g : bf16[256] mean=1.0 scale=0.2 seed=1\n"
		 "weight $router : %s[%d,256] seed=2\n"
		 "weight $wgu : bf16[%d,64,256] seed=3\n"
		 "weight $wdown : bf16[%d,256,32] seed=4\n"
		 "weight $b : f32[%d] scale=0.5 seed=9\n"
		 "weight $rb : bf16[%d] scale=0.5 seed=8\n"
		 "\n"
		 "graph @block(%%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
		 "\t%%h = rms_norm %%x, $g, eps=1e-05 : bf16[T,256]\n"
		 "\t%%hr = cast %%h, to=%s : %s[T,256]\n"
		 "\t%%rbf = cast $rb, to=f32 : f32[%d]\n"
		 "\t%%logits = matmul %%hr, $router%s, to=f32, trans_b=1 : f32[T,%d]\n"
		 "\t%%m = moe %%h, %%logits, %s, $wgu, $wdown, k=%d, %s : bf16[T,256]\n"
		 "\t%%y = add %%x, %%m : bf16[T,256]\n"
		 "\tret %%y\n}\n",
		 rt, E, E, E, E, E, rt, rt, E, front_fams[f].bias ? ", %rbf" : "", E,
		 front_fams[f].selbias ? "$b" : "_", k, front_fams[f].attrs);
}

START_TEST(test_front_blocks_match_interpreter)
{
	/* loop index 1: --debug=vec-ahead,front-pair (pairs where E >= 32 at max_tokens 64); 2: --debug=front2;
	 * 3: --debug=front3 */
	static const DbgFlags dbg[] = {0, DBG_VEC_AHEAD | DBG_FRONT_PAIR, DBG_FRONT2, DBG_FRONT3};
	static const int64_t ts[] = {1, 16, 64};
	char src[2048];

	for (size_t f = 0; f < NELEM(front_fams); f++) {
		int E = front_fams[f].E;
		Diag d;
		Module *m, *ref;
		CgCompileOpts co;
		CgProgram *p;

		front_block_src(src, sizeof src, f);
		diag_init(&d, stderr);
		m = fused_for("front_block.ir", src, &ref, &d, 64);	/* DeepSeek's f32 router: not split */
		for (int64_t mt = 64; mt <= 65 - _i; mt++) {
			emu_opts(&co, mt);
			co.debug = dbg[_i];
			p = cg_compile(m, &co, &d);
			ck_assert_ptr_nonnull(p);
			const Manifest *man = cg_program_manifest(p);
			ck_assert_int_eq(launches(man, "_front"), mt <= 64);
			if (mt <= 64)	/* the front, gate|up, down, the combine: norm and rstd folded
					 * (and the front's part 2: CG_FRONT_SPLIT_DEFAULT) */
				ck_assert_int_eq(launches(man, "") - launches(man, "_front_route"), 4);
			ck_assert_int_eq(launches_noted(p, "tokens in pairs"),
					 ((_i && _i < 3) || CG_FRONT_PAIR_DEFAULT || CG_FRONT2_DEFAULT) && mt <= 64 &&
					 E >= 32 && E <= 128);
			/* T = 64 for the few-expert families (the routing test has it for all) */
			for (size_t ti = 0; mt <= 64 && ti < NELEM(ts) - (E > 32); ti++)
				check_wide(p, ref, ts[ti], 256);
			cg_program_free(p);
		}
		ir_free_module(m);
		ir_free_module(ref);
	}
}
END_TEST

/*
 * The flag chain (--debug=pdl, program.c's close_chain): at max_tokens 16
 * the block's front is followed by split GEMMs (the MoE's and the dense
 * one); without the flag each split GEMM after the first gets a memset of
 * its flags, with it none does: each has flags of its own (distinct
 * workspace offsets, below those of the GEMMs before it), all zeroed by
 * the front's last CTA.  The emulator fills the workspace with garbage
 * before a run, so a flag left unzeroed deadlocks or sums garbage; both
 * plans match the interpreter at T = 1, 5, 16.
 */
START_TEST(test_program_flag_chain)
{
	static const int64_t ts[] = {1, 5, 16};
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;

	diag_init(&d, stderr);
	m = fused_for("chain.ir", split_block, &ref, &d, 16);
	for (int pdl = 0; pdl <= 3; pdl++) {	/* 2: and --debug=kept-flags; 3: and --debug=front3 */
		int memsets = 0, split = 0, shared = 0;
		uint64_t last = UINT64_MAX;
		emu_opts(&co, 16);
		co.debug = pdl ? DBG_PDL : 0;
		co.debug |= pdl >= 2 ? DBG_KEPT_FLAGS : 0;
		co.debug |= pdl == 3 ? DBG_FRONT3 : 0;	/* the chain zeroed by every CTA */
		CgProgram *p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		const Manifest *man = cg_program_manifest(p);
		ck_assert_int_eq(launches(man, "_front"), 1);
		for (int i = 0; i < man->nstep; i++) {
			const MStep *st = &man->step[i];
			memsets += st->kind == STEP_MEMSET;
			shared += st->kind == STEP_MEMSET && st->shared_only;
			for (int a = 0; st->kind == STEP_LAUNCH && st->grid[2].b > 1 && a < st->narg; a++)
				if (st->arg[a].kind == ARG_BUF && !strcmp(st->arg[a].name, "splitk$ws")) {
					ck_assert(!pdl || st->arg[a].off < last);	/* downwards */
					last = st->arg[a].off;
					split++;
				}
		}
		ck_assert_int_ge(split, 2);
		ck_assert_int_eq(memsets, pdl ? 1 : split);	/* the front's, and one a GEMM after the first */
		ck_assert_int_eq(shared, pdl >= 2);	/* the front's, when=shared (emulate checks it is 0 after) */
		for (size_t i = 0; i < NELEM(ts); i++)
			check_wide(p, ref, ts[i], 512);
		cg_program_free(p);
	}
	ir_free_module(m);
	ir_free_module(ref);
}
END_TEST

/*
 * --debug=kept-flags on a split GEMM of its own (no front): its last parts
 * clear the flags, so its memset says when=shared and the emulator finds the
 * bytes 0 after each run.  Without the flag the kernel leaves them set: the
 * same memset marked by hand fails the emulator's check.
 */
START_TEST(test_program_kept_flags_split_gemm)
{
	static const char dense[] =
		"weight $wd : bf16[512,512] scale=0.05 seed=5\n"
		"graph @d(%x: bf16[T,512]) -> (y: bf16[T,512]) {\n"
		"\t%y = matmul %x, $wd, trans_b=1 : bf16[T,512]\n\tret %y\n}\n";
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;

	diag_init(&d, stderr);
	m = fused_for("kept.ir", dense, &ref, &d, 16);
	for (int kept = 1; kept >= 0; kept--) {
		emu_opts(&co, 16);
		co.debug = kept ? DBG_KEPT_FLAGS : 0;
		CgProgram *p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		Manifest *man = (Manifest *)cg_program_manifest(p);
		MStep *ms = NULL;
		for (int i = 0; i < man->nstep; i++)
			if (man->step[i].kind == STEP_MEMSET) {
				ck_assert_ptr_null(ms);
				ms = &man->step[i];
			}
		ck_assert_ptr_nonnull(ms);	/* the split GEMM's flags */
		ck_assert_int_eq(ms->shared_only, kept);
		if (kept) {
			check_wide(p, ref, 1, 512);
			check_wide(p, ref, 16, 512);
		} else {
			Tensor in, got;
			int64_t dim[2] = {16, 512};
			char *buf = NULL;
			size_t n = 0;
			FILE *mem = open_memstream(&buf, &n);
			Diag dm;
			diag_init(&dm, mem);
			ms->shared_only = 1;
			ck_assert_int_eq(tensor_alloc(&in, DT_BF16, 2, dim), 0);
			ck_assert_int_eq(tensor_alloc(&got, DT_BF16, 2, dim), 0);
			fill(&in, 16);
			ck_assert_int_ne(cg_program_emulate(p, &in, &got, 16, &dm), 0);
			fclose(mem);
			ck_assert_msg(strstr(buf, "after the run, not 0"), "%s", buf);
			free(buf);
			tensor_free(&in);
			tensor_free(&got);
		}
		cg_program_free(p);
	}
	ir_free_module(m);
	ir_free_module(ref);
}
END_TEST

/* The front's grid within the SMs it is sized for (CgFrontSpec.sms: the
 * bundle's fewest; 0: 132): E / EB expert groups x token slices. */
START_TEST(test_front_grid_fits_the_targets)
{
	CgFrontSpec s;

	memset(&s, 0, sizeof s);
	cg_route_default(&s.route);
	s.route.E = 256, s.route.k = 8, s.max_t = 16;
	ck_assert_int_eq(cg_front_experts(&s), 2);	/* 132 */
	ck_assert_int_eq(cg_front_ctas(&s), 128);
	s.sms = 108;					/* sm_80 in the bundle: 4 experts a CTA */
	ck_assert_int_eq(cg_front_experts(&s), 4);
	ck_assert_int_eq(cg_front_ctas(&s), 64);
	s.route.E = 8, s.route.k = 2, s.max_t = 64;	/* Mixtral: 8 token slices of 8 warps */
	s.sms = 0;
	ck_assert_int_eq(cg_front_ctas(&s), 64);
	s.sms = 32;					/* 4 slices */
	ck_assert_int_eq(cg_front_ctas(&s), 32);
	s.sms = 4;					/* fewer SMs than experts: one slice */
	ck_assert_int_eq(cg_front_experts(&s), 2);
	ck_assert_int_eq(cg_front_ctas(&s), 4);
}
END_TEST

/*
 * --debug=vec-gemm: bundles for at most 4 tokens run their GEMMs as warp dot
 * products (k_gemm_vec.c), behind the decode front: every family's block
 * (the front's gate|up and down, gpt-oss's expert biases, DeepSeek-V3's 256
 * experts) at max_tokens 1 and 4 (T = max_tokens), and a block with a dense
 * GEMM after the MoE; against the interpreter.  At 5 tokens: the tiles.
 * Loop index 1: --debug=vec-ahead (loads a group ahead).
 */
START_TEST(test_vec_gemm_blocks_match_interpreter)
{
	char src[2048];

	for (size_t f = 0; f < NELEM(front_fams); f++) {
		Diag d;
		Module *m, *ref;
		CgCompileOpts co;
		CgProgram *p;

		front_block_src(src, sizeof src, f);
		diag_init(&d, stderr);
		m = fused_for("vec_block.ir", src, &ref, &d, 4);
		for (int64_t mt = 1; mt <= 5; mt += mt == 1 ? 3 : 1) {
			emu_opts(&co, mt);
			co.debug = _i ? DBG_VEC_AHEAD : 0;
			p = cg_compile(m, &co, &d);
			ck_assert_ptr_nonnull(p);
			ck_assert_int_eq(launches_noted(p, "gemm-vec"), mt <= 4 ? 2 : 0);
			ck_assert_int_eq(launches(cg_program_manifest(p), "_front"), 1);
			if (mt <= 4)	/* T = max_tokens: 1, and 4 (experts of several rows) */
				check_wide(p, ref, mt, 256);
			cg_program_free(p);
		}
		ir_free_module(m);
		ir_free_module(ref);
	}
	{	/* rows of 1024: the front's rows split over its warps, rstd and h for gate|up */
		static const char src1k[] =
			"weight $g : bf16[1024] mean=1.0 scale=0.2 seed=1\n"
			"weight $router : bf16[16,1024] seed=2\n"
			"weight $wgu : bf16[16,64,1024] seed=3\n"
			"weight $wdown : bf16[16,1024,32] seed=4\n"
			"\n"
			"graph @block(%x: bf16[T,1024]) -> (y: bf16[T,1024]) {\n"
			"\t%h = rms_norm %x, $g, eps=1e-05 : bf16[T,1024]\n"
			"\t%logits = matmul %h, $router, to=f32, trans_b=1 : f32[T,16]\n"
			"\t%m = moe %h, %logits, _, $wgu, $wdown, k=4, renorm=1, router=softmax : bf16[T,1024]\n"
			"\t%y = add %x, %m : bf16[T,1024]\n"
			"\tret %y\n}\n";
		Diag d;
		Module *m, *ref;
		CgCompileOpts co;
		CgProgram *p;

		diag_init(&d, stderr);
		m = fused_for("vec_1k.ir", src1k, &ref, &d, 4);
		emu_opts(&co, 4);
		co.debug = _i ? DBG_VEC_AHEAD : 0;
		p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(launches_noted(p, "rows split over the warps"), 1);
		ck_assert_int_eq(launches_noted(p, "gemm-vec"), 2);
		for (int64_t T = 1; T <= 4; T += 3)
			check_wide(p, ref, T, 1024);
		cg_program_free(p);
		ir_free_module(m);
		ir_free_module(ref);
	}
	for (int64_t mt = 1; mt <= 4; mt += 3) {
		Diag d;
		Module *m, *ref;
		CgCompileOpts co;
		CgProgram *p;

		diag_init(&d, stderr);
		m = fused_for("split_block.ir", split_block, &ref, &d, mt);
		emu_opts(&co, mt);
		co.debug = _i ? DBG_VEC_AHEAD : 0;
		p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(launches_noted(p, "gemm-vec"), 3);	/* gate|up, down, the dense GEMM */
		check_wide(p, ref, mt, 512);
		cg_program_free(p);
		ir_free_module(m);
		ir_free_module(ref);
	}
}
END_TEST

/* split_block with gate|up 512 wide: its flags (8 column tiles) outnumber the front's CTAs */
static const char split_wide_block[] =
	"weight $g : bf16[512] mean=1.0 scale=0.2 seed=1\n"
	"weight $router : bf16[8,512] seed=2\n"
	"weight $wgu : bf16[8,512,512] seed=3\n"
	"weight $wdown : bf16[8,512,256] seed=4\n"
	"weight $wd : bf16[512,512] scale=0.05 seed=5\n"
	"weight $bd : bf16[512] seed=6\n"
	"\n"
	"graph @block(%x: bf16[T,512]) -> (y: bf16[T,512]) {\n"
	"\t%h = rms_norm %x, $g, eps=1e-05 : bf16[T,512]\n"
	"\t%logits = matmul %h, $router, to=f32, trans_b=1 : f32[T,8]\n"
	"\t%m = moe %h, %logits, _, $wgu, $wdown, k=2, renorm=1, router=softmax : bf16[T,512]\n"
	"\t%u = matmul %m, $wd, trans_b=1 : bf16[T,512]\n"
	"\t%ub = add %u, $bd : bf16[T,512]\n"
	"\t%y = gelu %ub : bf16[T,512]\n"
	"\tret %y\n}\n";

/* Memset steps and launches of module m compiled for the emulator at max_tokens 64. */
static CgProgram *
steps64(Module *m, DbgFlags debug, int *memsets, int *launch)
{
	CgCompileOpts co;
	Diag d;
	CgProgram *p;

	diag_init(&d, stderr);
	emu_opts(&co, 64);
	co.debug = debug;
	p = cg_compile(m, &co, &d);
	ck_assert_ptr_nonnull(p);
	const Manifest *man = cg_program_manifest(p);
	*memsets = *launch = 0;
	for (int i = 0; i < man->nstep; i++) {
		*memsets += man->step[i].kind == STEP_MEMSET;
		*launch += man->step[i].kind == STEP_LAUNCH;
	}
	return p;
}

/*
 * The front zeroes the next split GEMM's flags (its memset step dropped):
 * K = 512, so the decode GEMMs split, and gate|up has more flags than the
 * front's own memset covers, so zero_words must cover the memset it
 * replaces (the emulator runs CTAs in order, so stale flags would not show
 * in its results); against --debug=no-front, launches
 * fewer by the norm, rstd, router GEMM, route and permute (one CTA: --debug=old-rows) less the front
 * (4), no more memsets (the front's own for its flags, gate|up's folded:
 * its zero_words bound); the program matches the
 * interpreter at T = 1, 5, 64 with the flags handed over (a wrong count
 * leaves a GEMM waiting on stale flags: a wrong result).
 */
START_TEST(test_front_folds_the_split_memset)
{
	Diag d;
	Module *m, *ref;
	int ms, ml, ns, nl;

	diag_init(&d, stderr);
	m = fused("split_wide.ir", split_wide_block, &ref, &d);
	CgProgram *p = steps64(m, 0, &ms, &ml), *q = steps64(m, DBG_NO_FRONT | DBG_ROW_KERNELS | DBG_OLD_ROWS, &ns, &nl);
	ck_assert_int_eq(launches(cg_program_manifest(p), "_front"), 1);
	ck_assert_int_eq(launches(cg_program_manifest(q), "_front"), 0);
	ml -= launches(cg_program_manifest(p), "_front_route");	/* CG_FRONT_SPLIT_DEFAULT: one more */
	ck_assert_msg(ml == nl - 4 && ms <= ns, "front: %d launches, %d memsets; without: %d, %d", ml, ms,
		      nl, ns);
	/* zero_words covers the memset the old plan has before the GEMM after the front */
	const Manifest *man = cg_program_manifest(p), *old = cg_program_manifest(q);
	int fi = 0, zw, next = 0;
	while (fi < man->nstep && !(man->step[fi].kind == STEP_LAUNCH && strstr(man->step[fi].kernel, "_front")))
		fi++;
	ck_assert_int_lt(fi + 1, man->nstep);
	zw = (int)man->step[fi].arg[man->step[fi].narg - 2].v.i;
	if (strstr(man->step[fi + 1].kernel, "_front_route"))	/* CG_FRONT_SPLIT_DEFAULT's part 2 */
		fi++;
	ck_assert_int_lt(fi + 1, man->nstep);
	while (next < old->nstep && !(old->step[next].kind == STEP_LAUNCH &&
				      !strcmp(old->step[next].kernel, man->step[fi + 1].kernel)))
		next++;
	ck_assert_int_lt(next, old->nstep);
	ck_assert_int_eq(old->step[next - 1].kind, STEP_MEMSET);
	ck_assert_int_gt(4 * (int64_t)zw, old->step[next - 1].bytes.b - 4);
	ck_assert_int_gt(old->step[next - 1].bytes.b, 4 * 64);	/* more than the front's flags */
	for (int64_t T = 1; T <= 64; T += T == 1 ? 4 : 59)
		check_wide(p, ref, T, 512);
	cg_program_free(p);
	cg_program_free(q);
	ir_free_module(m);
	ir_free_module(ref);
}
END_TEST

/* A tuning table in a temporary file; its path (static). */
static const char *
table(const char *text)
{
	static char path[64];
	FILE *f;

	snprintf(path, sizeof path, "/tmp/moec-tuning-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

/* split_block fused and compiled for the emulator (runs of up to 256
 * tokens) under a tuning table given as text; tuned_free undoes it. */
typedef struct {
	const char *path;
	CgTuning *t;
	Module *m, *ref;
	CgProgram *p;
} Tuned;

static void
tuned_compile(Tuned *u, const char *text, DbgFlags debug)
{
	Diag d;
	CgCompileOpts co;

	diag_init(&d, stderr);
	u->path = table(text);
	u->t = cg_tuning_read(u->path, &d);
	ck_assert_ptr_nonnull(u->t);
	u->m = fused("split.ir", split_block, &u->ref, &d);
	emu_opts(&co, 256);
	co.tuning = u->t;
	co.debug = debug;
	u->p = cg_compile(u->m, &co, &d);
	ck_assert_ptr_nonnull(u->p);
}

static void
tuned_free(Tuned *u)
{
	cg_program_free(u->p);
	cg_tuning_free(u->t);
	ir_free_module(u->m);
	ir_free_module(u->ref);
	unlink(u->path);
}

/* Bad tables: NULL, one error naming the file and line. */
START_TEST(test_tuning_table_refusals)
{
	static const struct {
		const char *text, *line, *msg;
	} bad[] = {
		{"", ":1:", "expected 'moec-tuning 2' (or 1)"},
		{"# only a comment\n", ":1:", "expected 'moec-tuning 2' (or 1)"},
		{"moec-tuning 3\n", ":1:13:", "tuning table version is not 1 or 2"},
		{"moec-tuning 0\n", ":1:13:", "tuning table version is not 1 or 2"},
		{"moec-tuning 2.0\n", ":1:13:", "tuning table version is not 1 or 2"},
		{"moec-tune 1\n", ":1:", "expected 'moec-tuning 2' (or 1)"},
		{"moec-tuning 2\n\xff\xfe garbage\n", ":2:", "expected 'TARGET KEY VARIANT"},
		{"moec-tuning 2\nsm_90a k 16x64x64.w1x4.s3.k1.p0\n", ":2:", "bad variant"},
		{"moec-tuning 1\nsm_90a k\n", ":2:", "expected 'TARGET KEY VARIANT"},
		{"moec-tuning 1\nsm_91 k 16x64x64.w1x4.s3.k1\n", ":2:", "unknown target 'sm_91'"},
		{"moec-tuning 1\n\nsm_90a k 16x64x64.w1x4.s3\n", ":3:", "bad variant"},
		{"moec-tuning 1\nsm_90a k 16x64x64.w1x4.s9.k1\n", ":2:", "bad variant"},
		{"moec-tuning 1\nsm_90a k 16x64x64.w1x4.s3.k1.d.d\n", ":2:", "bad variant"},	/* direct B: one .d, last */
		{"moec-tuning 1\nsm_90a k 16x64x64.w1x4.s3.k1.d.p5\n", ":2:", "bad variant"},
		{"moec-tuning 1\nsm_90a k 16x64x64.w1x4.s3.k1d\n", ":2:", "bad variant"},
		{"moec-tuning 1\nsm_90a k 016x64x64.w1x4.s3.k1\n", ":2:", "bad variant"},
		{"moec-tuning 1\nsm_90a k 16x64x64.w1x4.s3.k1 us=x\n", ":2:", "bad timing"},
		{"moec-tuning 1\nsm_90a k 16x64x64.w1x4.s3.k1 ms=1\n", ":2:", "bad timing"},
		{"moec-tuning 1\nsm_90a k 16x64x64.w1x4.s3.k1\nsm_90a k 16x64x64.w1x4.s4.k1\n", ":3:",
		 "a second entry for 'k'"},
	};
	char *buf;
	size_t n;

	for (size_t i = 0; i < NELEM(bad); i++) {
		const char *path = table(bad[i].text);
		FILE *mem = open_memstream(&buf, &n);
		Diag d;
		diag_init(&d, mem);
		ck_assert_ptr_null(cg_tuning_read(path, &d));
		fclose(mem);
		ck_assert_int_eq(d.nerror, 1);
		ck_assert_msg(strstr(buf, path) && strstr(buf, bad[i].line) && strstr(buf, bad[i].msg),
			      "case %zu: %s", i, buf);
		free(buf);
		unlink(path);
	}
	Diag d;
	diag_init(&d, NULL);
	ck_assert_ptr_null(cg_tuning_read("/nonexistent/t.tuning", &d));
	ck_assert_ptr_nonnull(strstr(d.last, "cannot open"));
}
END_TEST

/*
 * --tuning: the table's variant for a key replaces the heuristic's (here
 * split-K 4 with other tiles for the dense decode GEMM); one that does not
 * fit is a warning naming the line, and the heuristic tiles that GEMM.  The
 * program still matches the interpreter.
 */
START_TEST(test_tuning_table_selects_variants)
{
	const char *text = "moec-tuning 1\n"
			   "# a comment, a blank line, then the entries\n\n"
			   "emu dense.m1.n512.k512.bf16.bf16.nk.t1-64 32x64x64.w2x2.s3.k4 us=12.5\n"
			   "emu dense.m1.n512.k512.bf16.bf16.nk.t65-256 32x64x128.w2x2.s5.k8\n"
			   "sm_90a dense.m1.n512.k512.bf16.bf16.nk.t1-64 16x64x64.w1x4.s3.k1\n";
	const char *path = table(text);
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;
	CgProgram *p;
	CgTuning *t;
	char *buf;
	size_t n;
	int found = 0;

	diag_init(&d, stderr);
	t = cg_tuning_read(path, &d);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(cg_tuning_count(t), 3);
	const CgTuningEntry *e = cg_tuning_find(t, "emu", "dense.m1.n512.k512.bf16.bf16.nk.t1-64");
	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(e->v.split, 4);
	ck_assert_int_eq(e->line, 4);
	ck_assert(e->us == 12.5);
	ck_assert_ptr_null(cg_tuning_find(t, "sm_80", "dense.m1.n512.k512.bf16.bf16.nk.t1-64"));
	m = fused("split.ir", split_block, &ref, &d);
	emu_opts(&co, 256);
	co.tuning = t;
	FILE *mem = open_memstream(&buf, &n);
	diag_init(&d, mem);
	p = cg_compile(m, &co, &d);
	fclose(mem);
	ck_assert_ptr_nonnull(p);
	/* the second entry: bk 128 with 5 stages of 32 rows fits, but 8 slices of
	 * 4 k-tiles do not divide... K=512/128 = 4 k-tiles: a warning */
	ck_assert_msg(strstr(buf, ":5:1: warning: variant 32x64x128.w2x2.s5.k8") &&
		      strstr(buf, "1 GEMM tilings taken from the tuning table (3 entries)"), "%s", buf);
	free(buf);
	const Manifest *man = cg_program_manifest(p);
	for (int i = 0; i < man->nstep; i++) {
		const MStep *st = &man->step[i];
		if (st->kind == STEP_LAUNCH && st->thi == 64 && st->grid[2].b == 4 &&
		    st->grid[1].b == 512 / 64 && st->block[0] == 128)
			found++;
	}
	ck_assert_int_eq(found, 1);
	check_wide(p, ref, 3, 512);
	check_wide(p, ref, 70, 512);
	cg_program_free(p);
	cg_tuning_free(t);
	ir_free_module(m);
	ir_free_module(ref);
	unlink(path);
}
END_TEST

/*
 * A tuning table's .tsN: the dense GEMM's C by TMA stores through N 64-row
 * buffers a consumer warpgroup (GemmSpec.tma_store; --debug=ws-tma-store is
 * .ts1 for every such GEMM), on the emulated WS mainloop: one spelling (the
 * last word, N 1 or 2), a "tensormap" line over the output, and the program
 * matching the interpreter at a ragged T (the last row block partly past M).
 */
START_TEST(test_tuning_tma_store_variant)
{
	static const char *const table_ts2 =
		"moec-tuning 1\nemu dense.m1.n512.k512.bf16.bf16.nk.t65-256 128x128x64.w2x2.s3.k1.pers.ts2\n";
	CgVariant v;
	char back[64];
	Tuned u;
	int maps = 0;

	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.ts1", &v), 0);
	ck_assert_int_eq(v.tma_store, 1);
	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s3.k1.pers.ts2", &v), 0);
	ck_assert_int_eq(v.tma_store, 2);
	ck_assert_int_eq(v.persistent, 1);
	cg_variant_print(&v, back, sizeof back);
	ck_assert_str_eq(back, "256x128x64.w4x2.s3.k1.pers.ts2");
	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.ts3", &v), -1);
	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.ts2.pers", &v), -1);
	tuned_compile(&u, table_ts2, DBG_EMU_WGMMA | DBG_EMU_WS);
	const Manifest *man = cg_program_manifest(u.p);
	for (int j = 0; j < man->ntmap; j++)
		maps += man->tmap[j].of.kind == ARG_OUT && man->tmap[j].box[1] == 64 && man->tmap[j].dt == DT_BF16;
	ck_assert_int_eq(maps, 1);
	check_wide(u.p, u.ref, 200, 512);
	tuned_free(&u);
}
END_TEST

/*
 * --debug=ws-tma-store on a cooperative tiled plan (a table's 256x128 without
 * .pers or .tsN): TMA stores, and the plan persistent over the target's SMs
 * (the stores drain under the next tile's k-tiles; tiled they measured a loss
 * on the H200), matching the interpreter.
 */
START_TEST(test_tma_store_flag_goes_persistent)
{
	static const char *const table =
		"moec-tuning 1\nemu dense.m1.n512.k512.bf16.bf16.nk.t65-256 256x128x64.w4x2.s4.k1\n";
	CgTarget emu = {"emu", NULL, 3};
	Tuned u;
	int found = 0, maps = 0;

	tuned_compile(&u, table, DBG_EMU_WGMMA | DBG_EMU_WS | DBG_WS_TMA_STORE);
	const Manifest *man = cg_program_manifest(u.p);
	for (int j = 0; j < man->nstep; j++) {
		const MStep *st = &man->step[j];
		found += st->kind == STEP_LAUNCH && st->thi == 256 && st->grid[0].a == 0 &&
			 st->grid[0].b == cg_target_sms(&emu) && st->block[0] == 384;
	}
	for (int j = 0; j < man->ntmap; j++)
		maps += man->tmap[j].of.kind == ARG_OUT;
	ck_assert_int_eq(found, 1);
	ck_assert_int_ge(maps, 1);
	check_wide(u.p, u.ref, 200, 512);
	tuned_free(&u);
}
END_TEST

/*
 * A tuning table's .pers: the dense GEMM of a tiled plan runs persistent,
 * CG_CLUSTER_CTAS CTAs striding over its tiles (for the GPU's A/B of the
 * dense up-projection, bench/dense_pers.tuning), on the mma.sync and the
 * warp-specialised mainloops; the program matches the interpreter.  One
 * spelling: .pers after .wide, never with .pN, .c2a/.c2b or split-K.
 */
START_TEST(test_tuning_persistent_variant)
{
	static const char *const tables[2] = {
		"moec-tuning 1\nemu dense.m1.n512.k512.bf16.bf16.nk.t65-256 64x64x64.w2x2.s3.k1.pers\n",
		"moec-tuning 1\nemu dense.m1.n512.k512.bf16.bf16.nk.t65-256 128x128x64.w2x2.s4.k1.pers\n",
	};
	CgVariant v;
	char back[64];

	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.pers", &v), 0);
	ck_assert_int_eq(v.persistent, 1);
	cg_variant_print(&v, back, sizeof back);
	ck_assert_str_eq(back, "256x128x64.w4x2.s4.k1.pers");
	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.wide.pers", &v), 0);
	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.pers.wide", &v), -1);
	ck_assert_int_eq(cg_variant_parse("16x64x64.w1x4.s3.k1.p7.pers", &v), -1);
	ck_assert_int_eq(cg_variant_parse("128x256x64.w2x4.s4.k1.c2b.pers", &v), -1);
	ck_assert_int_eq(cg_variant_parse("32x64x64.w2x2.s3.k4.pers", &v), -1);
	for (int i = 0; i < 2; i++) {
		Tuned u;
		int found = 0;

		tuned_compile(&u, tables[i], i ? DBG_EMU_WGMMA | DBG_EMU_WS : 0);
		const Manifest *man = cg_program_manifest(u.p);
		for (int j = 0; j < man->nstep; j++) {
			const MStep *st = &man->step[j];
			if (st->kind == STEP_LAUNCH && st->thi == 256 && st->grid[0].b == CG_CLUSTER_CTAS &&
			    st->grid[0].a == 0 && st->grid[1].b == 1 && st->block[0] == (i ? 256 : 128))
				found++;
		}
		ck_assert_int_eq(found, 1);
		check_wide(u.p, u.ref, 70, 512);
		check_wide(u.p, u.ref, 200, 512);
		tuned_free(&u);
	}
}
END_TEST

/*
 * Bands of row tiles (a tuning table's `.bN`, GemmSpec.bands): the spelling
 * round-trips after `.pers` and nowhere else, N in 1..1024; a dense GEMM's
 * tiles in bands (the cp.async wgmma mainloop, tiled and persistent, bands of
 * 2 of its 3 or 4 64-row tiles, the last band short at T = 130; the
 * warp-specialised one persistent in bands of 1: columns first) match the
 * interpreter.
 */
START_TEST(test_tuning_bands_variant)
{
	static const char *const tables[3] = {
		"moec-tuning 1\nemu dense.m1.n512.k512.bf16.bf16.nk.t65-256 64x64x64.w2x2.s3.k1.b2\n",
		"moec-tuning 1\nemu dense.m1.n512.k512.bf16.bf16.nk.t65-256 64x64x64.w2x2.s3.k1.pers.b2\n",
		"moec-tuning 1\nemu dense.m1.n512.k512.bf16.bf16.nk.t65-256 128x128x64.w2x2.s4.k1.pers.b1\n",
	};
	CgVariant v;
	char back[64];

	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.pers.b8", &v), 0);
	ck_assert_int_eq(v.persistent, 1);
	ck_assert_int_eq(v.bands, 8);
	cg_variant_print(&v, back, sizeof back);
	ck_assert_str_eq(back, "256x128x64.w4x2.s4.k1.pers.b8");
	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.b16.l1", &v), 0);
	ck_assert_int_eq(v.bands, 16);
	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.b8.pers", &v), -1);
	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.b0", &v), -1);
	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.b", &v), -1);
	ck_assert_int_eq(cg_variant_parse("256x128x64.w4x2.s4.k1.b08", &v), -1);
	for (int i = 0; i < 3; i++) {
		Tuned u;

		tuned_compile(&u, tables[i], i == 2 ? DBG_EMU_WGMMA | DBG_EMU_WS : DBG_EMU_WGMMA);
		check_wide(u.p, u.ref, 130, 512);
		check_wide(u.p, u.ref, 256, 512);
		tuned_free(&u);
	}
}
END_TEST

/*
 * Stream-K through the whole plan (a tuning table's .pN variants for the
 * three decode GEMMs: gathered SwiGLU, routing weights + scatter, dense
 * bias + GELU): stream launches over a constant grid with the workspace's
 * memset, and the program matches the interpreter at decode T (a tile cut
 * between CTAs, runs shorter than a tile, more CTAs than pairs) and prefill.
 */
START_TEST(test_program_stream_k_matches_interpreter)
{
	const char *text = "moec-tuning 1\n"
			   "emu g8.m2.n64.k512.bf16.bf16.nk.t1-64 16x64x128.w1x4.s5.k1.p7\n"
			   "emu g8.m2.n512.k32.bf16.bf16.nk.t1-64 16x64x32.w1x4.s3.k1.p132\n"
			   "emu dense.m1.n512.k512.bf16.bf16.nk.t1-64 32x64x64.w2x2.s3.k1.p5\n";
	const char *path = table(text);
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;
	CgProgram *p;
	CgTuning *t;
	int stream = 0, memsets = 0;

	diag_init(&d, stderr);
	t = cg_tuning_read(path, &d);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(cg_tuning_find(t, "emu", "dense.m1.n512.k512.bf16.bf16.nk.t1-64")->v.stream, 5);
	m = fused("split.ir", split_block, &ref, &d);
	emu_opts(&co, 256);
	co.tuning = t;
	p = cg_compile(m, &co, &d);
	ck_assert_ptr_nonnull(p);
	const Manifest *man = cg_program_manifest(p);
	for (int i = 0; i < man->nstep; i++) {
		const MStep *st = &man->step[i];
		if (st->kind == STEP_MEMSET)
			memsets += strcmp(st->dst.name, "splitk$ws") == 0;
		else if (st->kind == STEP_LAUNCH && st->thi == 64 && st->grid[0].a == 0 &&
			 (st->grid[0].b == 7 || st->grid[0].b == 132 || st->grid[0].b == 5))
			stream++;
	}
	ck_assert_int_eq(stream, 3);
	ck_assert_int_ge(memsets, 3);
	check_wide_decode(p, ref);
	cg_program_free(p);
	cg_tuning_free(t);
	ir_free_module(m);
	ir_free_module(ref);
	unlink(path);
}
END_TEST

/*
 * Stream-K in waves (docs/codegen.md): more CTAs than the SMs hold (W runs
 * a CTA slot: 2 x 132 and 3 x 132 here, each run 2-4 pairs, so a tile's
 * 16 or 32 k-tiles are handed along chains of 4-16 runs) through the whole
 * plan on the emulator, which runs CTAs in launch order as the hardware
 * dispatches them: the program matches the interpreter at T = 1, 5, 16.
 * --debug=stream-waves plans such grids for bundles of more than 4 tokens
 * (its decisions: tests/diag/cli-debug.test on the bench's Mixtral config).
 */
static const char waves_block[] =
	"weight $w1 : bf16[4096,2048] scale=0.05 seed=7\n"
	"weight $w2 : bf16[2048,4096] scale=0.05 seed=8\n"
	"\n"
	"graph @block(%x: bf16[T,2048]) -> (y: bf16[T,2048]) {\n"
	"\t%u = matmul %x, $w1, trans_b=1 : bf16[T,4096]\n"
	"\t%y = matmul %u, $w2, trans_b=1 : bf16[T,2048]\n"
	"\tret %y\n}\n";

START_TEST(test_program_stream_waves_matches_interpreter)
{
	const char *text = "moec-tuning 2\n"
			   "emu dense.m1.n4096.k2048.bf16.bf16.nk.t1-1 16x128x128.w1x4.s5.k1.p264\n"
			   "emu dense.m1.n4096.k2048.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p264\n"
			   "emu dense.m1.n2048.k4096.bf16.bf16.nk.t1-1 16x128x128.w1x4.s5.k1.p396\n"
			   "emu dense.m1.n2048.k4096.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p396\n";
	static const int64_t ts[] = {1, 5, 16};
	const char *path = table(text);
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;
	CgProgram *p;
	CgTuning *t;
	int waves = 0;

	diag_init(&d, stderr);
	t = cg_tuning_read(path, &d);
	ck_assert_ptr_nonnull(t);
	m = fused_for("waves.ir", waves_block, &ref, &d, 16);
	emu_opts(&co, 16);
	co.tuning = t;
	p = cg_compile(m, &co, &d);
	ck_assert_ptr_nonnull(p);
	const Manifest *man = cg_program_manifest(p);
	for (int i = 0; i < man->nstep; i++) {
		const MStep *st = &man->step[i];
		if (st->kind == STEP_LAUNCH && st->grid[0].a == 0 && (st->grid[0].b == 264 || st->grid[0].b == 396))
			waves++;
	}
	ck_assert_int_eq(waves, 2);
	for (size_t i = 0; i < NELEM(ts); i++)
		check_wide(p, ref, ts[i], 2048);
	cg_program_free(p);
	cg_tuning_free(t);
	ir_free_module(m);
	ir_free_module(ref);
	unlink(path);
}
END_TEST

/*
 * Stream-K with a tail (--debug=sk-tail, docs/codegen.md): the waves block's
 * two GEMMs stream-K over 7 and 5 CTAs (a tuning table), which the flag makes
 * 14 and 10: 7 and 5 long runs and as many runs 1/6 as long launched after
 * them (T = 16: 512 and 256 pairs; at T = 1, 5 the same tiles), on the
 * emulator against the interpreter at T = 1, 5, 16; without the flag the
 * table's grids.
 */
START_TEST(test_program_stream_tail_matches_interpreter)
{
	const char *text = "moec-tuning 2\n"
			   "emu dense.m1.n4096.k2048.bf16.bf16.nk.t1-16 16x128x128.w1x4.s5.k1.p7\n"
			   "emu dense.m1.n2048.k4096.bf16.bf16.nk.t1-16 16x128x128.w1x4.s5.k1.p5\n";
	static const int64_t ts[] = {1, 5, 16};
	const char *path = table(text);
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;
	CgProgram *p;
	CgTuning *t;

	diag_init(&d, stderr);
	t = cg_tuning_read(path, &d);
	ck_assert_ptr_nonnull(t);
	m = fused_for("tail.ir", waves_block, &ref, &d, 16);
	for (int flag = 0; flag < 2; flag++) {
		int grids = 0;

		emu_opts(&co, 16);
		co.tuning = t;
		co.debug = flag ? DBG_SK_TAIL : 0;
		p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		const Manifest *man = cg_program_manifest(p);
		for (int i = 0; i < man->nstep; i++) {
			const MStep *st = &man->step[i];
			if (st->kind == STEP_LAUNCH && st->grid[0].a == 0)
				grids += st->grid[0].b == (flag ? 14 : 7) || st->grid[0].b == (flag ? 10 : 5);
		}
		ck_assert_int_eq(grids, 2);
		for (size_t i = 0; i < NELEM(ts); i++)
			check_wide(p, ref, ts[i], 2048);
		cg_program_free(p);
	}
	cg_tuning_free(t);
	unlink(path);
	/* a table's tail (.pN.tXwW), no flag: 3 long runs and 9 short ones of 1/3 */
	path = table("moec-tuning 2\n"
		     "emu dense.m1.n4096.k2048.bf16.bf16.nk.t1-16 16x128x128.w1x4.s5.k1.p12.t9w3\n");
	t = cg_tuning_read(path, &d);
	ck_assert_ptr_nonnull(t);
	emu_opts(&co, 16);
	co.tuning = t;
	p = cg_compile(m, &co, &d);
	ck_assert_ptr_nonnull(p);
	int twelve = 0;
	const Manifest *man = cg_program_manifest(p);
	for (int i = 0; i < man->nstep; i++)
		twelve += man->step[i].kind == STEP_LAUNCH && man->step[i].grid[0].a == 0 && man->step[i].grid[0].b == 12;
	ck_assert_int_eq(twelve, 1);
	for (size_t i = 0; i < NELEM(ts); i++)
		check_wide(p, ref, ts[i], 2048);
	cg_program_free(p);
	cg_tuning_free(t);
	ir_free_module(m);
	ir_free_module(ref);
	unlink(path);
}
END_TEST

/*
 * Dynamic stream-K (docs/codegen.md): the same block through tuning-table
 * variants `.p132.u8` (8 units a CTA handed out by an atomic counter; its 32
 * and 16 tiles cut in 4 and 8 slices: every tile's sum reduced by its last
 * slice), both GEMMs on one workspace (each launch's counters zeroed before
 * it), on the emulator against the interpreter at T = 1, 5, 16.
 * --debug=stream-dyn plans such launches for bundles of more than 4 tokens.
 */
START_TEST(test_program_stream_dyn_matches_interpreter)
{
	const char *text = "moec-tuning 2\n"
			   "emu dense.m1.n4096.k2048.bf16.bf16.nk.t1-1 16x128x128.w1x4.s5.k1.p132.u8\n"
			   "emu dense.m1.n4096.k2048.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p132.u8\n"
			   "emu dense.m1.n2048.k4096.bf16.bf16.nk.t1-1 16x128x128.w1x4.s5.k1.p132.u8\n"
			   "emu dense.m1.n2048.k4096.bf16.bf16.nk.t2-16 16x128x128.w1x4.s5.k1.p132.u8\n";
	static const int64_t ts[] = {1, 5, 16};
	const char *path = table(text);
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;
	CgProgram *p;
	CgTuning *t;
	int dyn = 0;

	diag_init(&d, stderr);
	t = cg_tuning_read(path, &d);
	ck_assert_ptr_nonnull(t);
	m = fused_for("dyn.ir", waves_block, &ref, &d, 16);
	emu_opts(&co, 16);
	co.tuning = t;
	p = cg_compile(m, &co, &d);
	ck_assert_ptr_nonnull(p);
	const Manifest *man = cg_program_manifest(p);
	for (int i = 0; i < man->nstep; i++) {
		const MStep *st = &man->step[i];
		if (st->kind == STEP_LAUNCH && st->grid[0].a == 0 && st->grid[0].b == 132)
			dyn++;
	}
	ck_assert_int_eq(dyn, 2);
	char *ll = cg_program_llvm(p, 0);	/* the counters: atomics */
	ck_assert_ptr_nonnull(strstr(ll, "atomicrmw add"));
	free(ll);
	for (size_t i = 0; i < NELEM(ts); i++)
		check_wide(p, ref, ts[i], 2048);
	cg_program_free(p);
	cg_tuning_free(t);
	ir_free_module(m);
	ir_free_module(ref);
	unlink(path);
}
END_TEST

/*
 * --debug=down-ahead (GemmSpec.b_ahead, k_gemm.c's stream_ahead): a MoE
 * block whose two grouped GEMMs are stream-K over 7 CTAs (tuning table: runs
 * that cut tiles), with PDL.  The down projection (A not gathered) builds
 * its expert table once before the grid wait, by ld.volatile, and again
 * after it; the gate|up (A gathered, its offsets the front's) too where
 * every expert is expected to be touched at max_tokens (program.c's
 * gate_up_ahead: top-4 of 16 at 16 tokens, 15.8), not at top-2 (14.1).
 * On the emulator against the interpreter at T = 1, 5, 16; on sm_90a the
 * bulk prefetch comes before the griddepcontrol.wait and the offsets are
 * loaded again after it.
 */
static const char ahead_block[] =
	"weight $g : bf16[256] mean=1.0 scale=0.2 seed=1\n"
	"weight $router : bf16[16,256] seed=2\n"
	"weight $wgu : bf16[16,512,256] seed=3\n"
	"weight $wdown : bf16[16,256,256] seed=4\n"
	"\n"
	"graph @block(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
	"\t%h = rms_norm %x, $g, eps=1e-05 : bf16[T,256]\n"
	"\t%logits = matmul %h, $router, to=f32, trans_b=1 : f32[T,16]\n"
	"\t%m = moe %h, %logits, _, $wgu, $wdown, k=4, renorm=1, router=softmax : bf16[T,256]\n"
	"\t%y = add %m, %x : bf16[T,256]\n"
	"\tret %y\n}\n";

START_TEST(test_program_down_ahead_matches_interpreter)
{
	static const char *arch[] = {"emu", "sm_90a"};
	static const int64_t ts[] = {1, 5, 16};
	char text[2048];
	int k = snprintf(text, sizeof text, "moec-tuning 2\n");

	for (int mk = 2; mk <= 4; mk += 2)	/* top-4 and top-2 */
		for (int a = 0; a < 2; a++)
			for (int b = 0; b < 4; b++)
				k += snprintf(text + k, sizeof text - (size_t)k,
					      "%s g16.m%d.n%d.k256.bf16.bf16.nk.%s 16x64x128.w1x4.s5.k1.p7\n", arch[a],
					      mk, b % 2 ? 256 : 512, b / 2 ? "t2-16" : "t1-1");
	const char *path = table(text);
	Diag d;
	CgTuning *t;

	diag_init(&d, stderr);
	t = cg_tuning_read(path, &d);
	ck_assert_ptr_nonnull(t);
	for (int a = 0; a < 4; a++) {	/* a % 2: the emulator, sm_90a; a / 2: top-4, top-2 */
		int top2 = a / 2;
		char src[sizeof ahead_block];
		Module *m, *ref;
		CgCompileOpts co;

		snprintf(src, sizeof src, "%s", ahead_block);
		if (top2)
			src[strstr(src, "k=4") - src + 2] = '2';
		m = fused_for("ahead.ir", src, &ref, &d, 16);
		emu_opts(&co, 16);
		co.arch[0] = arch[a % 2];
		co.tuning = t;
		co.debug = DBG_PDL | DBG_DOWN_AHEAD;
		CgProgram *p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		if (a % 2 == 0) {
			ck_assert_int_eq(launches_noted(p, "B ahead 12 k-tiles"), 2 - top2);	/* 192 KB / 16 KB */
			ck_assert_int_eq(launches_noted(p, "stream-k"), 2);
			for (size_t i = 0; i < NELEM(ts); i++)
				check_wide(p, ref, ts[i], 256);
		} else {
			size_t len;
			const char *ptx = cg_program_ptx(p, 0, &len), *k3, *k4, *pf, *w;
			ck_assert_ptr_nonnull(ptx);
			k3 = strstr(ptx, ".entry block_k3");
			k4 = strstr(ptx, ".entry block_k4");
			ck_assert_ptr_nonnull(k3);
			ck_assert_ptr_nonnull(k4);
			pf = strstr(k4, "cp.async.bulk.prefetch.L2.global");
			w = strstr(k4, "griddepcontrol.wait");
			ck_assert_ptr_nonnull(pf);
			ck_assert_ptr_nonnull(w);
			ck_assert(pf < w && strstr(k4, "ld.volatile.global") < pf);
			ck_assert_ptr_nonnull(strstr(w, "ld.global.u32"));	/* the offsets again */
			pf = strstr(k3, "cp.async.bulk.prefetch");
			w = strstr(k3, "griddepcontrol.wait");
			if (top2)
				ck_assert(!pf || pf > k4);	/* none in the gate|up (k3 before k4) */
			else
				ck_assert(pf && pf < w && w < k4 && strstr(k3, "ld.volatile.global") < pf);
		}
		cg_program_free(p);
		ir_free_module(m);
		ir_free_module(ref);
	}
	cg_tuning_free(t);
	unlink(path);
}
END_TEST

/*
 * Wide decode tiles (dec_wide in program.c, session 34): a stream-K decode
 * GEMM whose 16-row tile streams under 384 KB of B between tile ends takes
 * 256 columns on 8 warps (3 stages) where N allows, else 192 on 4 warps.
 * Block A, Qwen3-30B-A3B's shapes over 16 experts: the down (N = 2048, K =
 * 768: 192 KB a 128-column tile) goes 16x256x128.w1x8.s3, the gate|up (K =
 * 2048: 512 KB) keeps 16x128x128; block B (hidden 576: 64-deep k-tiles,
 * gpt-oss-20b's kind; gate|up N = 1152, down N = 576) 16x192x64.w1x4.s5 for
 * both.  No table, no flag: the heuristic's plan through the emulator
 * against the interpreter at T = 1, 5, 16.
 */
static const char wide_block_a[] =
	"weight $g : bf16[2048] mean=1.0 scale=0.2 seed=1\n"
	"weight $router : bf16[16,2048] seed=2\n"
	"weight $wgu : bf16[16,1536,2048] seed=3\n"
	"weight $wdown : bf16[16,2048,768] seed=4\n"
	"\n"
	"graph @block(%x: bf16[T,2048]) -> (y: bf16[T,2048]) {\n"
	"\t%h = rms_norm %x, $g, eps=1e-05 : bf16[T,2048]\n"
	"\t%logits = matmul %h, $router, to=f32, trans_b=1 : f32[T,16]\n"
	"\t%m = moe %h, %logits, _, $wgu, $wdown, k=4, renorm=1, router=softmax : bf16[T,2048]\n"
	"\t%y = add %m, %x : bf16[T,2048]\n"
	"\tret %y\n}\n";
static const char wide_block_b[] =
	"weight $g : bf16[576] mean=1.0 scale=0.2 seed=1\n"
	"weight $router : bf16[16,576] seed=2\n"
	"weight $wgu : bf16[16,1152,576] seed=3\n"
	"weight $wdown : bf16[16,576,576] seed=4\n"
	"\n"
	"graph @block(%x: bf16[T,576]) -> (y: bf16[T,576]) {\n"
	"\t%h = rms_norm %x, $g, eps=1e-05 : bf16[T,576]\n"
	"\t%logits = matmul %h, $router, to=f32, trans_b=1 : f32[T,16]\n"
	"\t%m = moe %h, %logits, _, $wgu, $wdown, k=4, renorm=1, router=softmax : bf16[T,576]\n"
	"\t%y = add %m, %x : bf16[T,576]\n"
	"\tret %y\n}\n";

START_TEST(test_program_wide_decode_tiles)
{
	static const struct {
		const char *text, *tile;
		int n;
		int64_t hidden;
	} cs[] = {{wide_block_a, "16x256x128", 1, 2048}, {wide_block_b, "16x192x64", 2, 576}};
	static const int64_t ts[] = {1, 5, 16};
	Diag d;

	diag_init(&d, stderr);
	for (size_t c = 0; c < NELEM(cs); c++) {
		Module *m, *ref;
		CgCompileOpts co;

		m = fused_for("wide.ir", cs[c].text, &ref, &d, 16);
		emu_opts(&co, 16);
		CgProgram *p = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p);
		ck_assert_int_eq(launches_noted(p, "stream-k"), 2);
		ck_assert_int_eq(launches_noted(p, cs[c].tile), cs[c].n);
		ck_assert_int_eq(launches_noted(p, "16x128x128"), 2 - cs[c].n);
		for (size_t i = 0; i < NELEM(ts); i++)
			check_wide(p, ref, ts[i], cs[c].hidden);
		cg_program_free(p);
		ir_free_module(m);
		ir_free_module(ref);
	}
}
END_TEST

/* The T buckets of version-2 keys: 1, 2-16, 17-64, 65-256, then x4. */
START_TEST(test_tuning_buckets)
{
	static const int64_t t[][3] = {
		{1, 1, 1}, {2, 2, 16}, {16, 2, 16}, {17, 17, 64}, {64, 17, 64}, {65, 65, 256},
		{256, 65, 256}, {257, 257, 1024}, {4096, 1025, 4096}, {4097, 4097, 16384},
		{INT64_MAX, ((int64_t)1 << 62) + 1, INT64_MAX},
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		int64_t lo = 0, hi = 0;
		cg_tuning_bucket(t[i][0], &lo, &hi);
		ck_assert_msg(lo == t[i][1] && hi == t[i][2], "T=%lld: %lld..%lld", (long long)t[i][0],
			      (long long)lo, (long long)hi);
	}
}
END_TEST

/*
 * A version-2 table names T buckets: the dense decode GEMM gets split-K 4
 * at T=1 and stream-K over 5 CTAs at T=2..16 (the heuristic's decode plan
 * at 17..64), the grouped gate|up stream-K at 17..64 only: each bucket its
 * own launch, the program matching the interpreter in each launch (T = 1,
 * 2, 17, 65).  The same entries under a version-1 header name launch ranges
 * that do not exist: none is taken (the plan is the heuristic's, whose
 * numerics the tests above check).
 */
START_TEST(test_tuning_table_buckets)
{
	const char *entries = "emu dense.m1.n512.k512.bf16.bf16.nk.t1-1 32x64x64.w2x2.s3.k4 us=3\n"
			      "emu dense.m1.n512.k512.bf16.bf16.nk.t2-16 16x64x64.w1x4.s3.k1.p5\n"
			      "emu g8.m2.n64.k512.bf16.bf16.nk.t17-64 16x64x128.w1x4.s5.k1.p7\n";
	static const int64_t ts[] = {1, 2, 17, 65};
	char text[512];
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;
	CgProgram *p;
	char *buf;
	size_t n;

	for (int version = 2; version >= 1; version--) {
		snprintf(text, sizeof text, "moec-tuning %d\n%s", version, entries);
		const char *path = table(text);
		int split1 = 0, stream5 = 0, stream7 = 0, decode = 0;
		diag_init(&d, stderr);
		CgTuning *t = cg_tuning_read(path, &d);
		ck_assert_ptr_nonnull(t);
		ck_assert_int_eq(cg_tuning_version(t), version);
		m = fused("split.ir", split_block, &ref, &d);
		emu_opts(&co, 256);
		co.tuning = t;
		FILE *mem = open_memstream(&buf, &n);
		diag_init(&d, mem);
		p = cg_compile(m, &co, &d);
		fclose(mem);
		ck_assert_ptr_nonnull(p);
		ck_assert_msg(strstr(buf, version == 2 ? "3 GEMM tilings taken from the tuning table (3 entries)"
						       : "0 GEMM tilings taken from the tuning table (3 entries)"),
			      "%s", buf);
		free(buf);
		const Manifest *man = cg_program_manifest(p);
		for (int i = 0; i < man->nstep; i++) {
			const MStep *st = &man->step[i];
			if (st->kind != STEP_LAUNCH)
				continue;
			split1 += st->tlo == 1 && st->thi == 1 && st->grid[2].b == 4;
			stream5 += st->tlo == 2 && st->thi == 16 && st->grid[0].a == 0 && st->grid[0].b == 5;
			stream7 += st->tlo == 17 && st->thi == 64 && st->grid[0].a == 0 && st->grid[0].b == 7;
			decode += st->tlo == 1 && st->thi == 64;
		}
		ck_assert_int_eq(split1, version == 2);
		ck_assert_int_eq(stream5, version == 2);
		ck_assert_int_eq(stream7, version == 2);
		if (version == 1)
			ck_assert_int_ge(decode, 1);	/* the heuristic's decode launches, whole */
		for (size_t i = 0; i < NELEM(ts) && version == 2; i++)
			check_wide(p, ref, ts[i], 512);
		cg_program_free(p);
		cg_tuning_free(t);
		ir_free_module(m);
		ir_free_module(ref);
		unlink(path);
	}
}
END_TEST

START_TEST(test_program_matches_interpreter_for_decode_and_prefill)
{
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;
	CgProgram *p;
	int variants = 0;

	diag_init(&d, stderr);
	m = fused("block.ir", moe_block, &ref, &d);	/* the default pipeline */
	emu_opts(&co, 256);
	p = cg_compile(m, &co, &d);
	ck_assert_ptr_nonnull(p);
	const Manifest *man = cg_program_manifest(p);
	for (int i = 0; i < man->nstep; i++)
		variants += man->step[i].thi != 0;
	ck_assert_int_ge(variants, 2);	/* decode and prefill GEMMs */
	check_at(p, ref, 3);		/* decode variants */
	check_at(p, ref, 100);		/* prefill variants */
	cg_program_free(p);
	ir_free_module(m);
	ir_free_module(ref);
}
END_TEST

/* The block's expert weights are synthetic and then prepared at load (the
 * folded norm scales them): the raw ones are dead once scaled, so the
 * prepared copies take their bytes, and the emulator (which lays generated
 * weights out as the device does) still matches the interpreter. */
START_TEST(test_generated_weights_reuse_dead_ones)
{
	Diag d;
	Module *m, *ref;
	CgCompileOpts co;
	CgProgram *p;
	uint64_t sum = 0, region, off[64];
	int shared = 0;

	diag_init(&d, stderr);
	m = fused("block.ir", moe_block, &ref, &d);
	emu_opts(&co, 256);
	p = cg_compile(m, &co, &d);
	ck_assert_ptr_nonnull(p);
	const Manifest *man = cg_program_manifest(p);
	ck_assert_int_le(man->nw, 64);
	region = bundle_generated_layout(man, off);
	for (int i = 0; i < man->nw; i++) {
		ck_assert(man->w[i].synth && man->w[i].at != MW_NEXT);
		sum += man->w[i].bytes;
		for (int j = 0; j < i; j++)
			shared += off[i] < off[j] + man->w[j].bytes && off[j] < off[i] + man->w[i].bytes;
	}
	ck_assert_msg(shared > 0 && region < sum, "region %llu of %llu bytes, %d overlaps",
		      (unsigned long long)region, (unsigned long long)sum, shared);
	check_at(p, ref, 3);
	check_at(p, ref, 100);
	cg_program_free(p);
	ir_free_module(m);
	ir_free_module(ref);
}
END_TEST

START_TEST(test_compile_refuses_data_dependent_shapes)
{
	const char *text = "graph @g(%x: f32[T,4]) -> (y: i64[2,?]) {\n"
			   "\t%b = greater %x, %x : bool[T,4]\n"
			   "\t%y = nonzero %b : i64[2,?]\n\tret %y\n}\n";
	Diag d;
	Module *m;
	CgCompileOpts co;

	diag_init(&d, NULL);
	m = ir_parse("dyn.ir", text, strlen(text), &d);
	ck_assert_ptr_nonnull(m);
	cg_compile_default(&co);
	co.arch[0] = "emu";
	co.narch = 1;
	ck_assert_ptr_null(cg_compile(m, &co, &d));
	ck_assert_msg(strstr(d.last, "dyn.ir:3:7") && strstr(d.last, "nonzero"), "%s", d.last);
	ir_free_module(m);
}
END_TEST

/*
 * A DeepSeek-style FP8 block (issue 13): e4m3 weights with scales per 128
 * along K, the input of the experts and the shared expert quantised per
 * token and 128 columns (quantize_dynamic, then dequantize, as the config
 * frontend writes it), the experts' down input inside the moe (act_quant).
 * With the post-attention norm in the block (h = %h) and without it (the
 * block's input is already normalised: h = %x).
 */
#define FP8_WEIGHTS \
	"weight $g : bf16[256] mean=1.0 scale=0.1 seed=1\n" \
	"weight $router : f32[4,256] seed=2\n" \
	"weight $bias : f32[4] scale=0.05 seed=3\n" \
	"weight $wgu : f8e4m3[4,256,256] scale=448.0 seed=4\n" \
	"weight $wgu.s : f32[4,256,2] mean=0.00014 scale=3.5e-05 seed=5\n" \
	"weight $wdn : f8e4m3[4,256,128] scale=448.0 seed=6\n" \
	"weight $wdn.s : f32[4,256,1] mean=0.0002 scale=5e-05 seed=7\n" \
	"weight $sg : f8e4m3[128,256] scale=448.0 seed=8\n" \
	"weight $sg.s : f32[128,2] mean=0.00014 scale=3.5e-05 seed=9\n" \
	"weight $su : f8e4m3[128,256] scale=448.0 seed=10\n" \
	"weight $su.s : f32[128,2] mean=0.00014 scale=3.5e-05 seed=11\n" \
	"weight $sd : f8e4m3[256,128] scale=448.0 seed=12\n" \
	"weight $sd.s : f32[256,1] mean=0.0002 scale=5e-05 seed=13\n\n"
#define FP8_FFN(h) \
	"\t%gin = cast %" h ", to=f32 : f32[T,256]\n" \
	"\t%logits = matmul %gin, $router, to=f32, trans_b=1 : f32[T,4]\n" \
	"\t%wgu = dequantize $wgu, $wgu.s, axis=2, block_size=128, to=bf16 : bf16[4,256,256]\n" \
	"\t%wdn = dequantize $wdn, $wdn.s, axis=2, block_size=128, to=bf16 : bf16[4,256,128]\n" \
	"\t%q, %qs = quantize_dynamic %" h ", group=128, to=f8e4m3 : f8e4m3[T,256], f32[T,2]\n" \
	"\t%hq = dequantize %q, %qs, axis=1, block_size=128, to=bf16 : bf16[T,256]\n" \
	"\t%moe = moe %hq, %logits, $bias, %wgu, %wdn, act=silu, act_quant=128, gu_layout=concat, k=2, " \
	"renorm=1, router=sigmoid, scale=2.5 : bf16[T,256]\n" \
	"\t%sgw = dequantize $sg, $sg.s, axis=1, block_size=128, to=bf16 : bf16[128,256]\n" \
	"\t%suw = dequantize $su, $su.s, axis=1, block_size=128, to=bf16 : bf16[128,256]\n" \
	"\t%sdw = dequantize $sd, $sd.s, axis=1, block_size=128, to=bf16 : bf16[256,128]\n" \
	"\t%gp = matmul %hq, %sgw, trans_b=1 : bf16[T,128]\n" \
	"\t%up = matmul %hq, %suw, trans_b=1 : bf16[T,128]\n" \
	"\t%act = silu %gp : bf16[T,128]\n" \
	"\t%glu = mul %act, %up : bf16[T,128]\n" \
	"\t%q2, %q2s = quantize_dynamic %glu, group=128, to=f8e4m3 : f8e4m3[T,128], f32[T,1]\n" \
	"\t%gq = dequantize %q2, %q2s, axis=1, block_size=128, to=bf16 : bf16[T,128]\n" \
	"\t%sh = matmul %gq, %sdw, trans_b=1 : bf16[T,256]\n" \
	"\t%ffn = add %moe, %sh : bf16[T,256]\n" \
	"\t%y = add %x, %ffn : bf16[T,256]\n" \
	"\tret %y\n}\n"

static const char fp8_norm_block[] = FP8_WEIGHTS
	"graph @block(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n"
	"\t%h = rms_norm %x, $g, eps=1e-06 : bf16[T,256]\n" FP8_FFN("h");
static const char fp8_bare_block[] = FP8_WEIGHTS
	"graph @block(%x: bf16[T,256]) -> (y: bf16[T,256]) {\n" FP8_FFN("x");

/* Kernels of the main graph that quantize_dynamic in a pass of their own
 * (an elementwise or row kernel without a norm); *with_norm: those with one. */
static int
quant_passes(Module *m, int *with_norm)
{
	int n = 0;

	*with_norm = 0;
	for (const Node *c = ir_main_graph(m)->first; c; c = c->next) {
		IrTemplate t = c->op == OP_CALL ? ir_kernel_template(c->callee) : IR_TMPL_NONE;
		int q = 0, norm = 0;
		if (t != IR_TMPL_ELEMENTWISE && t != IR_TMPL_ROW_REDUCE)
			continue;
		for (const Node *k = c->callee->first; k; k = k->next) {
			q |= k->op == OP_QUANTIZE_DYNAMIC;
			norm |= k->op == OP_RMS_NORM;
		}
		n += q && !norm;
		*with_norm += q && norm;
	}
	return n;
}

/* src through the default pipeline (fp8: with FP8 x FP8 GEMMs, the
 * emulator standing for sm_90a's wgmma) has the report line `line`, `passes`
 * kernels that quantise by a pass of their own and `fused` norm kernels that
 * quantise; the compiled block matches the interpreter. */
static void
check_fp8_block(const char *src, int fp8, const char *line, int passes, int fused)
{
	Module *m, *ref;
	Report *r = report_new();
	PassCtx c = {.report = r};
	CgCompileOpts co;
	CgProgram *p;
	PassOpts o;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int with_norm;
	Diag d;

	diag_init(&d, stderr);
	c.d = &d;
	m = ir_parse("fp8.ir", src, strlen(src), &d);
	ref = ir_parse("fp8.ir", src, strlen(src), &d);
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(ref);
	pass_default_opts(&o);
	o.fp8_mma = fp8;
	ck_assert_int_eq(pass_run(m, &o, &c), 0);
	report_print(f, r);
	fclose(f);
	ck_assert_msg(strstr(buf, line), "no \"%s\" in\n%s", line, buf);
	ck_assert_int_eq(quant_passes(m, &with_norm), passes);
	ck_assert_int_eq(with_norm, fused);
	emu_opts(&co, 256);
	co.debug = fp8 ? DBG_EMU_WGMMA : 0;
	ck_assert_ptr_nonnull(p = cg_compile(m, &co, &d));
	check_wide(p, ref, 3, 256);	/* decode GEMMs */
	check_wide(p, ref, 70, 256);	/* prefill */
	cg_program_free(p);
	free(buf);
	report_free(r);
	ir_free_module(m);
	ir_free_module(ref);
}

/*
 * fuse-act-quant: with the norm in the block, the norm's row kernel writes
 * the e4m3 rows and their scales (and the router's f32 rows, the shared
 * expert's dequantised ones): no kernel quantises by a pass of its own, and
 * the compiled block matches the interpreter.  Without the norm the input is
 * made outside the program: one quantize kernel, and the report says why and
 * what it costs (256 bf16 read, 256 e4m3 + 2 f32 scales written per token).
 */
START_TEST(test_fp8_activations_quantised_in_the_norm_kernel)
{
	/* sm_90a: the experts' GEMMs and the shared expert's (FP8_GLU_DEFAULT:
	 * no dequantised copy of the rows) read the e4m3 rows and scales, the
	 * router the bf16 ones (split-f32: no f32 copy) */
	check_fp8_block(fp8_norm_block, 1, "quantize_dynamic %q fused into the kernel of rms_norm %h: "
			"x read once, 512 bytes per token fewer than the separate kernels moved", 0, 1);
			/* 776 with the shared expert's bf16 rows, 1800 before split-f32 */
	/* sm_80: every GEMM reads the dequantised rows, the e4m3 ones stay inside */
	check_fp8_block(fp8_norm_block, 0, "quantize_dynamic %q fused into the kernel of rms_norm %h: "
			"x read once, 1040 bytes per token fewer", 0, 1);	/* 2064 before split-f32 */
	check_fp8_block(fp8_bare_block, 1, "quantize_dynamic %q of %x not fused into the kernel that "
			"produces it: %x is a graph input, made outside this program; as a pass of its own "
			"it reads 512 and writes 264 bytes per token", 1, 0);
}
END_TEST

/*
 * Every elementwise op, walked from ops.def: the interpreter has a function
 * for it, and the scalar ops (OPF_SCALAR) are exactly those codegen/ew.c
 * emits.  Each scalar op after a matmul is fused into the GEMM's epilogue
 * (lower_gemm accepts what fuse-gemm admitted: no generic fallback), and
 * the fused result is bit-identical on the emulator to the unfused one (the
 * GEMM's f32 result read by an elementwise kernel: the matmul's value is
 * also returned, so fuse-gemm stops before the op).
 */
static const struct {
	const char *op, *attrs;
} ew_variants[] = {
	{"gelu", ", approx=tanh"}, {"clip", ", min=-0.5, max=0.75"},
	{"leaky_relu", ", alpha=0.2"}, {"hard_sigmoid", ", alpha=0.3, beta=0.4"},
	{"cast", ", to=bf16"},
};

static void
run_ew(const char *op, const char *attrs, int binary, int fused, Tensor *y)
{
	char text[1024];
	const char *ydt = strcmp(op, "cast") == 0 ? "bf16" : "f32";
	Diag d;
	Module *m;
	PassOpts o;
	PassCtx c = {0};
	CgCompileOpts co;
	CgProgram *p;
	Tensor in, out[2];
	int64_t xd[2] = {5, 64}, yd[2] = {5, 32};
	int gemms = 0;
	int pass_through = strcmp(op, "cast") == 0 || strcmp(op, "identity") == 0;	/* no instruction */

	snprintf(text, sizeof text,
		 "weight $w : bf16[32,64] seed=2\n"
		 "weight $c : f32[32] scale=2 seed=3\n"
		 "graph @g(%%x: bf16[T,64]) -> (y: %s[T,32]%s) {\n"
		 "\t%%h = matmul %%x, $w, to=f32, trans_b=1 : f32[T,32]\n"
		 "\t%%y = %s %%h%s%s : %s[T,32]\n"
		 "\tret %%y%s\n}\n",
		 ydt, fused ? "" : ", h: f32[T,32]", op, binary ? ", $c" : "", attrs, ydt,
		 fused ? "" : ", %h");
	diag_init(&d, stderr);
	m = ir_parse("ew.ir", text, strlen(text), &d);
	ck_assert_msg(m != NULL, "%s", text);
	pass_default_opts(&o);
	c = (PassCtx){.d = &d};
	ck_assert_int_eq(pass_run(m, &o, &c), 0);
	for (int i = 0; i < m->ngraph; i++) {
		Graph *k = m->graph[i];
		GemmSpec s;
		CgGemmBind gb;
		char why[640];
		if (k->kind != G_KERNEL || strcmp(ir_graph_str(k, "template", ""), "gemm"))
			continue;
		ck_assert_msg(cg_gemm_from_kernel(m, k, &s, &gb, why, sizeof why) == 0,
			      "%s%s: %s", op, attrs, why);
		ck_assert_msg(s.ep.n == (fused && !pass_through ? 2 + binary : 1),
			      "%s%s (fused %d): %d epilogue instructions", op, attrs, fused, s.ep.n);
		gemms++;
	}
	ck_assert_int_eq(gemms, 1);
	cg_compile_default(&co);
	co.arch[0] = "emu";
	co.narch = 1;
	co.max_tokens = 16;
	p = cg_compile(m, &co, &d);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(tensor_alloc(&in, DT_BF16, 2, xd), 0);
	fill(&in, 7);
	ck_assert_int_eq(tensor_alloc(&out[0], ydt[0] == 'b' ? DT_BF16 : DT_F32, 2, yd), 0);
	ck_assert_int_eq(tensor_alloc(&out[1], DT_F32, 2, yd), 0);
	ck_assert_int_eq(cg_program_emulate(p, &in, out, 5, &d), 0);
	*y = out[0];
	tensor_free(&out[1]);
	tensor_free(&in);
	cg_program_free(p);
	ir_free_module(m);
}

static void
check_ew(const char *op, const char *attrs, int binary)
{
	Tensor a, b;

	run_ew(op, attrs, binary, 1, &a);
	if (strcmp(op, "identity") == 0) {	/* a view: nothing to compare unfused */
		tensor_free(&a);
		return;
	}
	run_ew(op, attrs, binary, 0, &b);
	for (int64_t i = 0; i < tensor_numel(&a); i++) {
		double x = dtype_load(a.dt, a.data, (size_t)i), y = dtype_load(b.dt, b.data, (size_t)i);
		ck_assert_msg(memcmp(&x, &y, sizeof x) == 0 || (isnan(x) && isnan(y)),
			      "%s%s: element %lld fused %.9g, unfused %.9g", op, attrs, (long long)i, x, y);
	}
	tensor_free(&a);
	tensor_free(&b);
}

START_TEST(test_every_scalar_op_fuses_into_the_epilogue_bit_identically)
{
	int n = 0;

	for (int op = 0; op < NOP; op++) {
		int fl = ir_opinfo[op].flags;
		if (!(fl & OPF_EW))
			continue;
		ck_assert_msg(ir_eval_has_fn((Op)op), "%s: no interpreter function", ir_opname((Op)op));
		ck_assert_msg(!(fl & OPF_SCALAR) == !cg_ew_has((Op)op),
			      "%s: OPF_SCALAR and ew.c's table disagree", ir_opname((Op)op));
		if (!(fl & OPF_SCALAR))
			continue;
		if (op != OP_CAST)
			check_ew(ir_opname((Op)op), "", ir_opinfo[op].inmax == 2);
		for (size_t i = 0; i < NELEM(ew_variants); i++)
			if (strcmp(ew_variants[i].op, ir_opname((Op)op)) == 0)
				check_ew(ew_variants[i].op, ew_variants[i].attrs, 0);
		n++;
	}
	ck_assert_int_ge(n, 27);
}
END_TEST

/* --- division without a branch (cg_fdiv_fast; --debug=div-rn: div.rn) ------- */

static float f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* cg_fdiv_fast's sequence, its rcp r0 given (fix: d's mantissa of all ones
 * takes its exact reciprocal, as cg_fdiv_fast does) */
static float
fdiv_seq_fix(float n, float d, float r0, int fix)
{
	uint32_t db = u_of(d);
	float r, q;

	if (fix && (db & 0x7fffff) == 0x7fffff)
		r0 = f_of(((253u << 23) - (db & 0x7f800000)) | 1);
	r = fmaf(r0, fmaf(-d, r0, 1.0f), r0), q = n * r;
	return fmaf(r, fmaf(-d, q, n), q);
}

static float fdiv_seq(float n, float d, float r0) { return fdiv_seq_fix(n, d, r0, 1); }

/*
 * The sequence (div.rn.f32's fast path on sm_90a) is n/d rounded to nearest
 * for every mantissa of d from any rcp within 2 ulp of 1/d (n = 1; n = 2
 * and d's other binades are the same computation scaled by powers of 2,
 * exactly).  Without cg_fdiv_fast's fix an rcp an ulp off misses where d's
 * mantissa is all ones (Markstein's exception), and only there.
 */
START_TEST(test_fdiv_fast_sequence)
{
	long off = 0;

	for (uint32_t m = 0; m < 1u << 23; m++) {
		float d = f_of(0x3f800000u | m), q = 1.0f / d;
		uint32_t r0 = u_of(q);

		for (int k = -2; k <= 2; k++) {
			ck_assert_msg(u_of(fdiv_seq(1.0f, d, f_of(r0 + (uint32_t)k))) == u_of(q),
				      "mantissa %#x, rcp %+d ulp", m, k);
			if (k && k * k == 1 && u_of(fdiv_seq_fix(1.0f, d, f_of(r0 + (uint32_t)k), 0)) != u_of(q))
				ck_assert_msg(m == 0x7fffff, "mantissa %#x, rcp %+d ulp, no fix", m, k), off++;
		}
	}
	ck_assert_int_eq(off, 2);
	for (int e = 0; e <= 27; e++)	/* n = 2 over the binades tanh divides in */
		for (uint32_t m = 0; m < 1u << 23; m += 4099) {
			float d = ldexpf(f_of(0x3f800000u | m), e);
			ck_assert_uint_eq(u_of(fdiv_seq(2.0f, d, 1.0f / d)), u_of(2.0f / d));
		}
}
END_TEST

/* cg_recip and cg_fdiv_recip's sequence for n / d */
static float
fdiv_recip_seq(float n, float d)
{
	float k = d < 0x1p-64f ? 0x1p64f : 1.0f, dk = d * k, rd = 1.0f / dk;
	float a = fabsf(n) * k, q0 = a * rd, q = fmaf(fmaf(-q0, dk, a), rd, q0);

	return copysignf(rd == 0 || isinf(rd) ? q0 : q, n);
}

/*
 * A quantisation group's quotients by one reciprocal (the norm's kernel):
 * x / (amax / 448) rounded to nearest, bit for bit, for every bf16 x with
 * |x| <= amax against every bf16 amax mantissa in binades around the 2^-64
 * scaling, at 1 and at the top of bf16's range (a binade's computation is
 * another's scaled by a power of 2 exactly), and for random f32 x and amax;
 * quotients below 2^-12 within an ulp (zero in e4m3 either way).  Zeros
 * keep their sign; amax inf or a scale of 0 give n / d's inf, 0 or NaN.
 */
START_TEST(test_fdiv_recip_sequence)
{
	static const int binade[] = {-133, -126, -65, -64, -63, 0, 1, 127};
	uint64_t h = 7;

	for (size_t b = 0; b < NELEM(binade); b++)
		for (int ma = 0; ma < 128; ma++) {
			float amax = ldexpf(1.0f + (float)ma / 128, binade[b]), s = amax / 448;
			for (uint32_t xb = 0; xb < 1u << 16; xb += 1 + (b % 3 != 0)) {
				float x = f_of(xb << 16), q = x / s, got = fdiv_recip_seq(x, s);
				if (!(fabsf(x) <= amax))
					continue;
				if (fabsf(q) >= 0x1p-12f)
					ck_assert_msg(u_of(got) == u_of(q), "x %a amax %a: %a, not %a", x, amax, got, q);
				else
					ck_assert(u_of(got) - u_of(q) + 1 <= 2);	/* within an ulp */
				ck_assert_int_eq(signbit(got) != 0, signbit(x) != 0);
			}
		}
	for (int i = 0; i < 4000000; i++) {
		float x, a, s, q, got;
		h = mix64(h + (uint64_t)i);
		x = f_of((uint32_t)h), a = fabsf(f_of((uint32_t)(h >> 32)));
		if (!isfinite(x) || !isfinite(a) || a == 0)
			continue;
		if (fabsf(x) > a) {
			float t = fabsf(x);
			x = copysignf(a, x), a = t;
		}
		s = a / 448, q = x / s, got = fdiv_recip_seq(x, s);
		if (s > 0 && fabsf(q) >= 0x1p-12f)
			ck_assert_msg(u_of(got) == u_of(q), "x %a amax %a: %a, not %a", x, a, got, q);
	}
	ck_assert(isinf(fdiv_recip_seq(1.0f, 0.0f)) && isnan(fdiv_recip_seq(0.0f, 0.0f)));
	ck_assert(fdiv_recip_seq(-3.0f, INFINITY) == 0 && signbit(fdiv_recip_seq(-3.0f, INFINITY)));
	ck_assert(isnan(fdiv_recip_seq(INFINITY, INFINITY)));
}
END_TEST

/*
 * tanh, GELU (tanh and erf) and erf by default: the same bits on the
 * emulator as with --debug=div-rn over inputs of every magnitude, around the
 * clamps (|x| near 9.357, where tanh's divisor reaches 2^27, and 200050,
 * where erf's reaches 2^16), zeros, infinities and NaN; and the sm_90a PTX
 * of a GEMM with a GELU epilogue divides without div.rn (with it, with the
 * flag).  GELU in its tanh form (--debug=gelu-tanh): the default's sigmoid
 * form has no division to compare.
 */
START_TEST(test_fast_div_same_bits)
{
	static const char text[] =
		"graph @g(%x: f32[T,64]) -> (a: f32[T,64], b: f32[T,64], c: f32[T,64], e: f32[T,64]) {\n"
		"\t%a = tanh %x : f32[T,64]\n"
		"\t%b = gelu %x, approx=tanh : f32[T,64]\n"
		"\t%c = gelu %x : f32[T,64]\n"
		"\t%e = erf %x : f32[T,64]\n"
		"\tret %a, %b, %c, %e\n}\n";
	static const char gemm[] =
		"weight $w : bf16[256,64] seed=1\n"
		"weight $b : bf16[256] scale=0.1 seed=2\n"
		"graph @d(%x: bf16[T,64]) -> (y: bf16[T,256]) {\n"
		"\t%h = matmul %x, $w, $b, trans_b=1 : bf16[T,256]\n"
		"\t%y = gelu %h, approx=tanh : bf16[T,256]\n"
		"\tret %y\n}\n";
	enum { T = 128, NOUT = 4 };
	Tensor in, out[2][NOUT];
	int64_t dim[2] = {T, 64};
	uint64_t h = 1;
	Diag d;

	diag_init(&d, stderr);
	ck_assert_int_eq(tensor_alloc(&in, DT_F32, 2, dim), 0);
	for (int64_t i = 0; i < T * 64; i++) {
		float *x = (float *)in.data + i;
		h = mix64(h + (uint64_t)i);
		switch (i % 8) {
		case 0: *x = ldexpf((float)(h >> 40) * 0x1p-24f + 1.0f, (int)(h % 160) - 80); break;
		case 1: *x = 9.357f + (float)((int64_t)(h % 4001) - 2000) * 1e-5f; break;
		case 2: *x = f_of(u_of(200049.9f) + (uint32_t)(h % 41) - 20u); break;
		case 3: *x = (float)(h >> 40) * 0x1p-24f * 12.0f; break;
		default: *x = (float)(h >> 40) * 0x1p-22f - 2.0f; break;
		}
		if (h >> 63)
			*x = -*x;
	}
	((float *)in.data)[1] = 0.0f, ((float *)in.data)[3] = -0.0f;
	((float *)in.data)[5] = INFINITY, ((float *)in.data)[7] = -INFINITY, ((float *)in.data)[9] = NAN;
	((float *)in.data)[11] = 3e38f, ((float *)in.data)[13] = -1e-40f;
	for (int fast = 0; fast < 2; fast++) {
		Module *m;
		CgProgram *p = compile_text("fastdiv.ir", text, "emu", T, DBG_GELU_TANH | (fast ? 0 : DBG_DIV_RN), &m);

		for (int j = 0; j < NOUT; j++)
			ck_assert_int_eq(tensor_alloc(&out[fast][j], DT_F32, 2, dim), 0);
		ck_assert_int_eq(cg_program_emulate(p, &in, out[fast], T, &d), 0);
		cg_program_free(p);
		ir_free_module(m);
	}
	for (int j = 0; j < NOUT; j++) {
		for (int64_t i = 0; i < T * 64; i++) {
			float a = ((float *)out[0][j].data)[i], b = ((float *)out[1][j].data)[i];
			ck_assert_msg(u_of(a) == u_of(b) || (isnan(a) && isnan(b)),
				      "output %d, x = %a: div.rn %a, fast-div %a", j, (double)((float *)in.data)[i],
				      (double)a, (double)b);
		}
		tensor_free(&out[0][j]);
		tensor_free(&out[1][j]);
	}
	tensor_free(&in);
	for (int fast = 0; fast < 2; fast++) {	/* sm_90a PTX: the epilogue's division */
		Module *m;
		CgProgram *p = compile_text("fastdiv-gemm.ir", gemm, "sm_90a", 4096,
					     DBG_GELU_TANH | (fast ? 0 : DBG_DIV_RN), &m);
		size_t len;
		const char *ptx = cg_program_ptx(p, 0, &len);

		ck_assert_ptr_nonnull(ptx);
		ck_assert(!!strstr(ptx, "div.rn.f32") == !fast);
		ck_assert(!!strstr(ptx, "rcp.approx.ftz.f32") == fast);
		cg_program_free(p);
		ir_free_module(m);
	}
}
END_TEST

/*
 * GELU (tanh) as x / (1 + 2^a), the default (--debug=gelu-tanh: the tanh
 * form), on the emulator, an f32 graph over inputs of every magnitude, against x sigmoid(2u) in double
 * (the same function as 0.5 x (1 + tanh u), without its cancellation): within
 * 2^-22 (1 + |a|) (the f32 rounding of 2^a's exponent a, magnified by 2^a)
 * but in the flushed tail (x < -9.4, results below 1e-37), under 1e-5 for x
 * above -6; the tanh form off by more than 1e-3 there (1 + tanh u cancels).
 * +-0, +inf and NaN as the tanh form gives them.  The sm_90a PTX of a bias +
 * GELU GEMM by default: ex2 and rcp, no div.rn, under 5/8 of the PTX bytes
 * with --debug=gelu-tanh (the tanh form's division and sign).
 */
static double
gelu_ref(double x, double *a)
{
	double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);

	*a = -2 * u / log(2);
	return x / (1 + exp(-2 * u));
}

START_TEST(test_gelu_sigmoid_accuracy)
{
	static const char text[] =
		"graph @g(%x: f32[T,64]) -> (b: f32[T,64]) {\n"
		"\t%b = gelu %x, approx=tanh : f32[T,64]\n"
		"\tret %b\n}\n";
	enum { T = 64 };
	Tensor in, out[2];
	int64_t dim[2] = {T, 64};
	double worst[2] = {0, 0};
	uint64_t h = 7;
	Diag d;
	size_t bytes[2];

	diag_init(&d, stderr);
	ck_assert_int_eq(tensor_alloc(&in, DT_F32, 2, dim), 0);
	for (int64_t i = 0; i < T * 64; i++) {
		float *x = (float *)in.data + i;
		h = mix64(h + (uint64_t)i);
		*x = i % 2 ? ldexpf((float)(h >> 40) * 0x1p-24f + 1.0f, (int)(h % 60) - 40)
			   : (float)(h >> 40) * 0x1p-24f * 24.0f - 12.0f;
		if (i % 2 && h >> 63)
			*x = -*x;
	}
	((float *)in.data)[1] = 0.0f, ((float *)in.data)[3] = -0.0f;
	((float *)in.data)[5] = INFINITY, ((float *)in.data)[9] = NAN;
	for (int sg = 0; sg < 2; sg++) {
		Module *m;
		CgProgram *p = compile_text("gelu.ir", text, "emu", T, sg ? 0 : DBG_GELU_TANH, &m);

		ck_assert_int_eq(tensor_alloc(&out[sg], DT_F32, 2, dim), 0);
		ck_assert_int_eq(cg_program_emulate(p, &in, &out[sg], T, &d), 0);
		cg_program_free(p);
		ir_free_module(m);
	}
	for (int64_t i = 0; i < T * 64; i++) {
		float x = ((float *)in.data)[i];
		double a, r = gelu_ref(x, &a);

		for (int sg = 0; sg < 2; sg++) {
			float y = ((float *)out[sg].data)[i];
			if (!isfinite(x) || x == 0) {
				ck_assert_msg(u_of(y) == u_of(((float *)out[0].data)[i]) || (isnan(x) && isnan(y)),
					      "x = %a: %a, the tanh form %a", (double)x, (double)y,
					      (double)((float *)out[0].data)[i]);
				continue;
			}
			double e = fabs(y - r) / fabs(r);
			if (x > -6.0f && e > worst[sg])
				worst[sg] = e;
			if (sg)	/* 2^a magnifies the f32 rounding of its exponent a by |a| ln 2 */
				ck_assert_msg(fabs(y - r) <= 0x1p-22 * (1 + fabs(a)) * fabs(r) + 1e-36,
					      "x = %a: %a, reference %a", (double)x, (double)y, r);
		}
	}
	ck_assert_msg(worst[1] < 1e-5 && worst[0] > 1e-3, "relative errors: sigmoid %g, tanh %g", worst[1],
		      worst[0]);
	tensor_free(&in);
	tensor_free(&out[0]);
	tensor_free(&out[1]);
	for (int sg = 0; sg < 2; sg++) {	/* sm_90a PTX of the bias + GELU epilogue */
		static const char gemm[] =
			"weight $w : bf16[256,64] seed=1\n"
			"weight $b : bf16[256] scale=0.1 seed=2\n"
			"graph @d(%x: bf16[T,64]) -> (y: bf16[T,256]) {\n"
			"\t%h = matmul %x, $w, $b, trans_b=1 : bf16[T,256]\n"
			"\t%y = gelu %h, approx=tanh : bf16[T,256]\n"
			"\tret %y\n}\n";
		Module *m;
		CgProgram *p = compile_text("gelu-gemm.ir", gemm, "sm_90a", 4096, sg ? 0 : DBG_GELU_TANH, &m);
		const char *ptx = cg_program_ptx(p, 0, &bytes[sg]);

		ck_assert_ptr_nonnull(ptx);
		ck_assert(!strstr(ptx, "div.rn.f32"));
		ck_assert(!!strstr(ptx, "ex2.approx.ftz.f32") && !!strstr(ptx, "rcp.approx.ftz.f32"));
		cg_program_free(p);
		ir_free_module(m);
	}
	ck_assert_msg(8 * bytes[1] < 5 * bytes[0], "PTX bytes: %zu sigmoid, %zu with --debug=gelu-tanh", bytes[1],
		      bytes[0]);
}
END_TEST

/* --- RMSNorm row kernels (k_norm.c) ----------------------------------------- */

/* Rows (x's dtype, gamma's, the norm's, its cast or "", H, rstd eps or 0):
 * a pair with a cast to f32 and a partial last round of groups (2880: 360
 * groups of 8, read twice), the norm alone of 64, f32 rows cast to f16 and
 * the rstd of 520 (65 groups), an f16 pair of 2048 (kept in registers),
 * 8192 (32 groups a lane, read twice), 7 static rows of 768.  Quantised
 * (qg > 0: quantize_dynamic per qg columns to f8e4m3 of the norm's value,
 * then its dequantize to dq; ret: which of h, q, scales, dequantized (hqsd)
 * the kernel returns, in that order): DeepSeek-V3's 7168 per 128 with all
 * four, 256 without h (kept in registers), 2880 per 64 cast to f32 with the
 * rstd (a partial last round of groups), 520 per 8 (one lane a group) to
 * f32 scales and f16 values only, 1024 per 256 (a warp's 32 lanes), q and
 * its scales; and quantising the norm's value while the kernel returns its
 * cast (DeepSeek-V3's with sm_80 in the bundle: the f32 router input and the
 * dequantized rows; and a narrowing cast of f32 rows to bf16). */
static const struct {
	const char *x, *g, *h, *cast;
	int H;
	double rstd_eps;
	int rows;		/* > 0: static rows (T is not a symbol) */
	int qg;			/* > 0: quantised per qg columns */
	const char *ret, *dq;	/* quantised: the results (of "hqsd"), the dequantized type */
	int qpre;		/* the quantisation reads the norm's value, not its cast */
} norm_cases[] = {
	{"bf16", "bf16", "bf16", "f32", 2880, 1e-6, 0, 0, "", ""},
	{"bf16", "bf16", "bf16", "", 64, 0, 0, 0, "", ""},
	{"f32", "f32", "f32", "f16", 520, 1e-5, 0, 0, "", ""},
	{"f16", "bf16", "f16", "", 2048, 1e-5, 0, 0, "", ""},
	{"bf16", "bf16", "bf16", "", 8192, 1e-6, 0, 0, "", ""},
	{"bf16", "bf16", "bf16", "", 768, 1e-6, 7, 0, "", ""},
	{"bf16", "bf16", "bf16", "", 7168, 0, 0, 128, "hqsd", "bf16"},
	{"bf16", "bf16", "bf16", "", 256, 0, 0, 128, "qsd", "bf16"},
	{"bf16", "bf16", "bf16", "f32", 2880, 1e-6, 0, 64, "hqs", "bf16"},
	{"f32", "f32", "f32", "", 520, 0, 0, 8, "sd", "f16"},
	{"bf16", "bf16", "bf16", "", 1024, 0, 5, 256, "qs", "bf16"},
	{"bf16", "bf16", "bf16", "f32", 7168, 0, 0, 128, "hd", "bf16", 1},
	{"f32", "f32", "f32", "bf16", 2048, 0, 0, 128, "hqsd", "bf16", 1},
};

static DType
dt_of(const char *name)
{
	DType t = DT_F32;

	ck_assert_int_eq(dtype_parse(name, strlen(name), &t), 0);
	return t;
}

/* Outputs of program p at T on the emulator, poisoned first: every element must be written. */
static void
run_rows(CgProgram *p, int64_t T, Tensor *out, Tensor *in)
{
	const Manifest *man = cg_program_manifest(p);
	Diag d;

	diag_init(&d, stderr);
	ck_assert_int_eq(man->nin, 1);
	for (int i = 0; i < man->nout; i++) {
		int64_t dim[2] = {T, man->out[i].dim[1].b};
		ck_assert_int_eq(tensor_alloc(&out[i], man->out[i].dt, 2, dim), 0);
		memset(out[i].data, 0xff, tensor_nbytes(&out[i]));
	}
	ck_assert_int_eq(cg_program_emulate(p, in, out, T, &d), 0);
}

/* Case c's block: h = rms_norm(x) [-> cast], [r = rstd(x)], [its quantisation]. */
static void
norm_src(size_t c, char *src, size_t n)
{
	int H = norm_cases[c].H, rs = norm_cases[c].rstd_eps > 0, cast = *norm_cases[c].cast;
	int qg = norm_cases[c].qg;
	const char *hdt = cast ? norm_cases[c].cast : norm_cases[c].h, *ret = norm_cases[c].ret;
	const char *dq = norm_cases[c].dq, *v = cast ? "c" : "h", *qv = norm_cases[c].qpre ? "h" : v;
	char castl[128] = "", rstdl[128] = "", T[16] = "T", rl[32] = "", ql[512] = "", outs[256] = "",
	     rets[64] = "";

	if (norm_cases[c].rows)
		snprintf(T, sizeof T, "%d", norm_cases[c].rows);
	if (cast)
		snprintf(castl, sizeof castl, "\t%%c = cast %%h, to=%s : %s[%s,%d]\n", hdt, hdt, T, H);
	if (rs) {
		snprintf(rstdl, sizeof rstdl, "\t%%r = rstd %%x, eps=%g : f32[%s,1]\n", norm_cases[c].rstd_eps, T);
		snprintf(rl, sizeof rl, ", r: f32[%s,1]", T);
	}
	if (!qg) {
		snprintf(outs, sizeof outs, "h: %s[%s,%d]%s", hdt, T, H, rl);
		snprintf(rets, sizeof rets, "%%%s%s", v, rs ? ", %r" : "");
	} else {
		int at = 0, ra = 0;
		snprintf(ql, sizeof ql,
			 "\t%%q, %%qs = quantize_dynamic %%%s, group=%d, to=f8e4m3 : f8e4m3[%s,%d], f32[%s,%d]\n"
			 "\t%%d = dequantize %%q, %%qs, axis=1, block_size=%d, to=%s : %s[%s,%d]\n",
			 qv, qg, T, H, T, H / qg, qg, dq, dq, T, H);
		for (const char *r = ret; *r; r++) {
			const char *sep = r == ret ? "" : ", ";
			if (*r == 'h')
				at += snprintf(outs + at, sizeof outs - at, "%sh: %s[%s,%d]", sep, hdt, T, H),
				ra += snprintf(rets + ra, sizeof rets - ra, "%s%%%s", sep, v);
			if (*r == 'q')
				at += snprintf(outs + at, sizeof outs - at, "%sq: f8e4m3[%s,%d]", sep, T, H),
				ra += snprintf(rets + ra, sizeof rets - ra, "%s%%q", sep);
			if (*r == 's')
				at += snprintf(outs + at, sizeof outs - at, "%sqs: f32[%s,%d]", sep, T, H / qg),
				ra += snprintf(rets + ra, sizeof rets - ra, "%s%%qs", sep);
			if (*r == 'd')
				at += snprintf(outs + at, sizeof outs - at, "%sd: %s[%s,%d]", sep, dq, T, H),
				ra += snprintf(rets + ra, sizeof rets - ra, "%s%%d", sep);
		}
		if (rs) {
			snprintf(outs + at, sizeof outs - at, "%s", rl);
			snprintf(rets + ra, sizeof rets - ra, ", %%r");
		}
	}
	snprintf(src, n,
		 "weight $g : %s[%d] mean=1.0 scale=0.2 seed=1\n\n"
		 "graph @block(%%x: %s[%s,%d]) -> (%s) {\n"
		 "\t%%h = rms_norm %%x, $g, eps=1e-05 : %s[%s,%d]\n%s%s%s"
		 "\tret %s\n}\n",
		 norm_cases[c].g, H, norm_cases[c].x, T, H, outs, norm_cases[c].h, T, H, castl, ql, rstdl, rets);
}

/*
 * k_norm.c's kernel (a warp a row) gives the same bits as the body
 * compiler's row kernels it replaces (--debug=row-kernels), and the
 * interpreter's f64 sums match both within the dtype's tolerance: T = 1, 7,
 * 33, every output poisoned first; one launch for a pair.  With
 * --debug=norm-bcast (sums by shuffles, no CTA barrier) the same bits again,
 * and with --debug=prefill-small (4 rows a warp of G: T = 33 leaves warps with
 * rows past the end; gamma in shared memory; rows kept up to H = 8192 in
 * bf16, the next row ahead up to 4096).
 */
START_TEST(test_norm_rows_are_the_row_kernels_bits)
{
	for (size_t c = 0; c < NELEM(norm_cases); c++) {
		char src[2048];
		int H = norm_cases[c].H, nout = (norm_cases[c].qg ? (int)strlen(norm_cases[c].ret) : 1) +
						 (norm_cases[c].rstd_eps > 0);
		Diag d;
		Module *m, *ref;
		CgCompileOpts co;
		CgProgram *p, *q, *r, *w;

		norm_src(c, src, sizeof src);
		diag_init(&d, stderr);
		m = fused("rows.ir", src, &ref, &d);
		emu_opts(&co, 256);
		p = cg_compile(m, &co, &d);
		co.debug = DBG_ROW_KERNELS;
		q = cg_compile(m, &co, &d);
		co.debug = DBG_NORM_BCAST;
		r = cg_compile(m, &co, &d);
		co.debug = DBG_PREFILL_SMALL;
		w = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(w);
		ck_assert_int_eq(launches(cg_program_manifest(w), "_norm"), 1);
		ck_assert_ptr_nonnull(p);
		ck_assert_ptr_nonnull(q);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(launches(cg_program_manifest(r), "_norm"), 1);
		ck_assert_int_eq(launches(cg_program_manifest(p), "_norm"), 1);
		ck_assert_int_eq(launches(cg_program_manifest(q), "_norm"), 0);
		ck_assert_int_eq(cg_program_manifest(p)->nout, nout);
		for (int64_t T = 1; T <= 33; T += T == 1 ? 6 : 26) {
			Tensor in, a[5], b[5], bc[5], rw[5], want[5];
			if (norm_cases[c].rows) {	/* once, at its rows */
				if (T > 1)
					break;
				T = norm_cases[c].rows;
			}
			int64_t dim[2] = {T, H};
			Compare cmp;
			ck_assert_int_eq(tensor_alloc(&in, dt_of(norm_cases[c].x), 2, dim), 0);
			fill(&in, (uint64_t)T + 77 * c);
			run_rows(p, T, a, &in);
			run_rows(q, T, b, &in);
			run_rows(r, T, bc, &in);
			run_rows(w, T, rw, &in);
			ck_assert_int_eq(ir_eval(ir_main_graph(ref), &in, 1, want, NULL, &d), 0);
			for (int i = 0; i < nout; i++) {
				ck_assert_msg(memcmp(a[i].data, b[i].data, tensor_nbytes(&a[i])) == 0,
					      "case %zu (H=%d) T=%lld: output %d differs from the row kernels'", c, H,
					      (long long)T, i);
				ck_assert_msg(memcmp(a[i].data, bc[i].data, tensor_nbytes(&a[i])) == 0,
					      "case %zu (H=%d) T=%lld: output %d differs with norm-bcast", c, H,
					      (long long)T, i);
				ck_assert_msg(memcmp(a[i].data, rw[i].data, tensor_nbytes(&a[i])) == 0,
					      "case %zu (H=%d) T=%lld: output %d differs with prefill-small", c, H,
					      (long long)T, i);
				tensor_compare(&a[i], &want[i], 1e-2, 4e-2, &cmp);
				ck_assert_msg(tensor_close(&cmp, a[i].dt, tensor_numel(&want[i])),
					      "case %zu T=%lld output %d: rel_l2 %g", c, (long long)T, i, cmp.rel_l2);
				tensor_free(&a[i]);
				tensor_free(&b[i]);
				tensor_free(&bc[i]);
				tensor_free(&rw[i]);
				tensor_free(&want[i]);
			}
			tensor_free(&in);
		}
		cg_program_free(p);
		cg_program_free(q);
		cg_program_free(r);
		cg_program_free(w);
		ir_free_module(m);
		ir_free_module(ref);
	}
}
END_TEST

/* Program p's y at T (x filled from seed T) on the emulator into *y. */
static void
emu_y(CgProgram *p, int64_t T, int64_t H, Tensor *y)
{
	Tensor in;
	int64_t dim[2] = {T, H};

	ck_assert_int_eq(tensor_alloc(&in, DT_BF16, 2, dim), 0);
	fill(&in, (uint64_t)T);
	run_rows(p, T, y, &in);
	tensor_free(&in);
}

/*
 * --debug=combine-fold: the decode down GEMM on CUDA cores runs the combine
 * in its last CTA (a ticket): no combine kernel, y bit for bit the plan with
 * the combine as a kernel (old-rows' row kernel: the same bits as k_combine.c),
 * at T = 1 and max_tokens.  The five front families'
 * blocks (all but Qwen3's at max_tokens 4 alone) at rows of 256 (f32 slots, 4 outputs a thread: one round of the
 * CTA's 256 threads at T <= 4); rows of 1024 at max_tokens 2 (two rounds),
 * not at 4 (four).  With pdl and kept-flags (Qwen3's family) the ticket lies
 * in the front's chain, zeroed by the front (the workspace starts as 0xa5
 * garbage); without a front (no-front) nothing is folded (the ticket would
 * need a memset step), nor over VEC_T tokens (no gemm-vec).  Rows of 4096
 * with bf16 slots and top-8 of 16 give every warp of the down items, so the
 * emulator's last CTA stores slots too: a combine in any other CTA (a wrong
 * ticket) misses them.
 */
START_TEST(test_combine_fold_is_the_combine)
{
	static const DbgFlags dbg[] = {DBG_COMBINE_FOLD, DBG_COMBINE_FOLD | DBG_PDL | DBG_KEPT_FLAGS,
				       DBG_COMBINE_FOLD | DBG_PDL | DBG_KEPT_FLAGS | DBG_NO_FRONT};
	char src[2048];

	for (size_t f = 0; f < NELEM(front_fams) + 1; f++) {
		int64_t H = f < NELEM(front_fams) ? 256 : 1024;
		Diag d;
		Module *m, *ref;

		if (f < NELEM(front_fams))
			front_block_src(src, sizeof src, f);
		else
			snprintf(src, sizeof src, "weight $g : bf16[1024] mean=1.0 scale=0.2 seed=1\n"
				 "weight $router : bf16[16,1024] seed=2\n"
				 "weight $wgu : bf16[16,64,1024] seed=3\n"
				 "weight $wdown : bf16[16,1024,32] seed=4\n\n"
				 "graph @block(%%x: bf16[T,1024]) -> (y: bf16[T,1024]) {\n"
				 "\t%%h = rms_norm %%x, $g, eps=1e-05 : bf16[T,1024]\n"
				 "\t%%logits = matmul %%h, $router, to=f32, trans_b=1 : f32[T,16]\n"
				 "\t%%m = moe %%h, %%logits, _, $wgu, $wdown, k=4, renorm=1, router=softmax : bf16[T,1024]\n"
				 "\t%%y = add %%x, %%m : bf16[T,1024]\n"
				 "\tret %%y\n}\n");
		diag_init(&d, stderr);
		m = fused_for("fold_block.ir", src, &ref, &d, 4);
		for (int64_t mt = 1; mt <= 5; mt += H > 256 ? mt : mt == 1 ? 3 : 1) {
			/* f32 slots here: 4 outputs a thread, at most two rounds of 256 (H = 1024: T <= 2) */
			int want = mt <= 4 && mt * H / 4 <= 512;
			CgCompileOpts co;
			CgProgram *p0, *p1;

			if (f != 1 && f < NELEM(front_fams) && mt != 4)
				continue;	/* the other families folded once (CI's time): at 4 tokens, T = 1 and 4 */
			emu_opts(&co, mt);
			for (size_t j = 0; j < (f == 1 ? NELEM(dbg) : 1); j++) {	/* the chains: Qwen3's family */
				/* the reference: the combine as the row kernel (old-rows: the same bits as
				 * k_combine.c's, and never folded, whatever CG_COMBINE_FOLD_DEFAULT says) */
				co.debug = (dbg[j] & ~DBG_COMBINE_FOLD) | DBG_OLD_ROWS;
				p0 = cg_compile(m, &co, &d);
				ck_assert_ptr_nonnull(p0);
				co.debug = dbg[j];
				p1 = cg_compile(m, &co, &d);
				ck_assert_ptr_nonnull(p1);
				int w = want && !(dbg[j] & DBG_NO_FRONT);	/* no front to zero the ticket */
				ck_assert_msg(launches_noted(p1, "the combine in the last CTA") == w,
					      "family %zu, max_tokens %lld, flags %zu: folded %d", f, (long long)mt, j,
					      launches_noted(p1, "the combine in the last CTA"));
				ck_assert_int_eq(launches_noted(p1, "combine k="), !w);	/* k_combine.c's kernel */
				for (int64_t T = 1; T <= mt; T += mt - 1 > 1 ? mt - 1 : 1) {	/* T = 1 and max_tokens */
					Tensor y0, y1;
					emu_y(p0, T, H, &y0);
					emu_y(p1, T, H, &y1);
					ck_assert_msg(memcmp(y0.data, y1.data, tensor_nbytes(&y0)) == 0,
						      "family %zu, max_tokens %lld, T = %lld: y differs", f, (long long)mt,
						      (long long)T);
					tensor_free(&y0);
					tensor_free(&y1);
				}
				cg_program_free(p0);
				cg_program_free(p1);
			}
		}
		ir_free_module(m);
		ir_free_module(ref);
	}
	{	/* every warp of the down with items (8 experts x 4096 / 8 columns: 4096 for 2112 warps), so
		 * the emulator's last CTA has slots to store too: a combine in any other CTA misses them */
		static const char big[] =
			"weight $g : bf16[4096] mean=1.0 scale=0.2 seed=1\n"
			"weight $router : bf16[16,4096] seed=2\n"
			"weight $wgu : bf16[16,64,4096] seed=3\n"
			"weight $wdown : bf16[16,4096,32] seed=4\n\n"
			"graph @block(%x: bf16[T,4096]) -> (y: bf16[T,4096]) {\n"
			"\t%h = rms_norm %x, $g, eps=1e-05 : bf16[T,4096]\n"
			"\t%logits = matmul %h, $router, to=f32, trans_b=1 : f32[T,16]\n"
			"\t%m = moe %h, %logits, _, $wgu, $wdown, k=8, renorm=1, router=softmax, slots=x : bf16[T,4096]\n"
			"\t%y = add %x, %m : bf16[T,4096]\n"
			"\tret %y\n}\n";
		Diag d;
		Module *m, *ref;
		CgCompileOpts co;
		CgProgram *p0, *p1;
		Tensor y0, y1;

		diag_init(&d, stderr);
		m = fused_for("fold_big.ir", big, &ref, &d, 1);
		emu_opts(&co, 1);
		co.debug = DBG_OLD_ROWS;
		p0 = cg_compile(m, &co, &d);
		co.debug = DBG_COMBINE_FOLD;
		p1 = cg_compile(m, &co, &d);
		ck_assert_ptr_nonnull(p0);
		ck_assert_ptr_nonnull(p1);
		ck_assert_int_eq(launches_noted(p1, "the combine in the last CTA"), 1);
		emu_y(p0, 1, 4096, &y0);
		emu_y(p1, 1, 4096, &y1);
		ck_assert_msg(memcmp(y0.data, y1.data, tensor_nbytes(&y0)) == 0, "rows of 4096: y differs");
		tensor_free(&y0);
		tensor_free(&y1);
		cg_program_free(p0);
		cg_program_free(p1);
		ir_free_module(m);
		ir_free_module(ref);
	}
}
END_TEST

Suite *
program_suite(void)
{
	Suite *s = suite_create("program");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_program_matches_interpreter_for_decode_and_prefill);
	tcase_add_test(tc, test_program_split_k_matches_interpreter);
	tcase_add_test(tc, test_tuning_table_refusals);
	tcase_add_test(tc, test_tuning_table_selects_variants);
	tcase_add_test(tc, test_tuning_persistent_variant);
	tcase_add_test(tc, test_tuning_bands_variant);
	tcase_add_test(tc, test_program_stream_k_matches_interpreter);
	tcase_add_test(tc, test_tuning_buckets);
	tcase_add_test(tc, test_tuning_table_buckets);
	tcase_add_test(tc, test_generated_weights_reuse_dead_ones);
	tcase_add_test(tc, test_compile_refuses_data_dependent_shapes);
	tcase_add_test(tc, test_every_scalar_op_fuses_into_the_epilogue_bit_identically);
	suite_add_tcase(s, tc);
	tc = tcase_create("front");	/* decode fronts: every routing family */
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_front_routing_is_the_interpreters, 0, 4);
	tcase_add_loop_test(tc, test_front_blocks_match_interpreter, 0, 1);
	suite_add_tcase(s, tc);
	tc = tcase_create("front_pair");	/* the same with --debug=front-pair (a case of its own for ctest -j) */
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_front_routing_is_the_interpreters, 4, 5);
	tcase_add_loop_test(tc, test_front_blocks_match_interpreter, 1, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("front2");	/* the same with --debug=front2 (whole rows a batch) */
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_front_routing_is_the_interpreters, 5, 7);
	tcase_add_loop_test(tc, test_front_blocks_match_interpreter, 2, 3);
	tcase_add_test(tc, test_front2_default_takes_one_expert_ctas);
	suite_add_tcase(s, tc);
	tc = tcase_create("front3");	/* the same with --debug=front3 (the ticket hand-over) */
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_front_routing_is_the_interpreters, 7, 10);
	tcase_add_loop_test(tc, test_front_blocks_match_interpreter, 3, 4);
	tcase_add_test(tc, test_front3_hands_over_by_ticket);
	suite_add_tcase(s, tc);
	tc = tcase_create("vec_gemm");	/* decode GEMMs as warp dot products (--debug=vec-gemm) */
	tcase_set_timeout(tc, 1800);	/* 264 CTAs of 8 warps a GEMM on the emulator: ~1 min alone, 10+ loaded */
	tcase_add_loop_test(tc, test_vec_gemm_blocks_match_interpreter, 0, 1);
	tcase_add_test(tc, test_front_grid_fits_the_targets);
	suite_add_tcase(s, tc);
	tc = tcase_create("vec_ahead");	/* the same, _i = 1: --debug=vec-ahead (a case of its own for ctest -j) */
	tcase_set_timeout(tc, 1800);
	tcase_add_loop_test(tc, test_vec_gemm_blocks_match_interpreter, 1, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("combine_fold");	/* --debug=combine-fold: the combine in the down's last CTA */
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_combine_fold_is_the_combine);
	suite_add_tcase(s, tc);
	tc = tcase_create("route_count");	/* --debug=route-count: the route counts the permute's slots */
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_route_counts_for_the_permute);
	suite_add_tcase(s, tc);
	tc = tcase_create("front_order");	/* the logits' summation order, bit for bit */
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_front_logits_keep_their_order);
	suite_add_tcase(s, tc);
	tc = tcase_create("front_fold");	/* the split-K workspace starts as garbage */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_front_folds_the_split_memset);
	tcase_add_test(tc, test_program_flag_chain);
	tcase_add_test(tc, test_program_kept_flags_split_gemm);
	suite_add_tcase(s, tc);
	tc = tcase_create("fp8");	/* three blocks, two on emulated wgmma */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_fp8_activations_quantised_in_the_norm_kernel);
	suite_add_tcase(s, tc);
	tc = tcase_create("prefill");	/* 192-column tiles, persistent, four plans */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_program_prefill_192_persistent);
	suite_add_tcase(s, tc);
	tc = tcase_create("slots_x");	/* apart from prefill: two long ones, for ctest -j */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_program_slots_x_matches_interpreter);
	tcase_add_test(tc, test_program_rows64_prefill_router);
	suite_add_tcase(s, tc);
	tc = tcase_create("waves");	/* stream-K over more CTAs than the SMs hold */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_program_stream_waves_matches_interpreter);
	tcase_add_test(tc, test_program_stream_dyn_matches_interpreter);
	suite_add_tcase(s, tc);
	tc = tcase_create("wide_decode");	/* wide decode tiles for short tiles (dec_wide) */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_program_wide_decode_tiles);
	suite_add_tcase(s, tc);
	tc = tcase_create("sk_tail");	/* stream-K with a tail of short runs through the plan */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_program_stream_tail_matches_interpreter);
	suite_add_tcase(s, tc);
	tc = tcase_create("down_ahead");	/* B ahead of the grid wait: emulator and sm_90a PTX */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_program_down_ahead_matches_interpreter);
	suite_add_tcase(s, tc);
	tc = tcase_create("fast_div");	/* division without a branch: the same bits as div.rn */
	tcase_set_timeout(tc, 900);	/* ~20 s of CPU: 60M divisions, an emulated body kernel */
	tcase_add_test(tc, test_fdiv_fast_sequence);
	tcase_add_test(tc, test_fdiv_recip_sequence);
	tcase_add_test(tc, test_fast_div_same_bits);
	tcase_add_test(tc, test_gelu_sigmoid_accuracy);
	suite_add_tcase(s, tc);
	tc = tcase_create("norm");	/* k_norm.c against the row kernels, bit for bit */
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_norm_rows_are_the_row_kernels_bits);
	suite_add_tcase(s, tc);
	tc = tcase_create("tma_store");	/* C by TMA stores, a tuning table's .tsN (CK_RUN_CASE=tma_store) */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_tuning_tma_store_variant);
	tcase_add_test(tc, test_tma_store_flag_goes_persistent);
	suite_add_tcase(s, tc);
	return s;
}
