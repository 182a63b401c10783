/*
 * emu.c — run kernels built for the "emu" target on the CPU.
 *
 * The builders' helper layer (target.c) turns every GPU-specific operation
 * into a call to a moec_emu_* function below; the module is compiled for
 * the host by MCJIT.  A launch runs CTAs one after another; inside a CTA
 * each GPU thread is a user-level thread (ucontext) that runs until it
 * reaches a barrier or a warp-collective operation (ldmatrix, mma), where it
 * yields to the scheduler.  The scheduler resumes threads round-robin and
 * resolves a barrier when every thread of the CTA waits at one, and a
 * collective when all 32 lanes of a warp wait at the same one.  The
 * collectives implement the PTX ISA fragment layouts independently of the
 * builders, so a wrong lane mapping in a builder gives wrong numbers here.
 *
 * cp.async copies are queued per thread and land only at the
 * cp.async.wait_group that covers them, so a missing wait reads stale
 * shared memory (which starts as 0xff bytes: NaN).  Global accesses are
 * checked against the launch's buffers, shared ones against the dynamic
 * shared size.  Errors stop the launch with a diagnostic.
 *
 * Single-threaded and not reentrant: one launch at a time per process.
 */
#define CG_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <llvm-c/Core.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "codegen.h"

enum { T_RUN, T_BAR, T_COLL, T_DONE };
enum { C_LDMATRIX = 1, C_MMA, C_SHFL_UP };
#define STACK (256 * 1024)

typedef struct Copy Copy;
struct Copy {
	char *dst;
	unsigned char data[16];
	int n, grp;
};

typedef struct Thr Thr;
struct Thr {
	ucontext_t ctx;
	char *stack;
	int tid[3], lin;
	int state, coll, ci;
	void *cp[2];
	Copy *q;
	int nq, capq, open;
};

static struct {
	Thr *thr;
	int nthr, cap;
	Thr *cur;
	ucontext_t sched;
	void (*fn)(uint64_t *);
	uint64_t *args;
	int grid[3], block[3], cta[3];
	unsigned char *smem;
	size_t smem_bytes;
	const CgEmuBuf *buf;
	int nbuf;
	int failed;
	char msg[512];
} E;

static void
fail(const char *fmt, ...)
{
	va_list ap;

	if (E.failed)
		return;
	E.failed = 1;
	va_start(ap, fmt);
	vsnprintf(E.msg, sizeof E.msg, fmt, ap);
	va_end(ap);
}

/* Stop the current thread for good (after fail()). */
static _Noreturn void
abandon(void)
{
	E.cur->state = T_DONE;
	swapcontext(&E.cur->ctx, &E.sched);
	abort();		/* never resumed */
}

static void
yield(int state)
{
	E.cur->state = state;
	swapcontext(&E.cur->ctx, &E.sched);
	if (E.failed)
		abandon();
}

/* ---- the functions emitted code calls ---- */

int32_t
moec_emu_sreg(int32_t code)
{
	Thr *t = E.cur;

	switch (code) {
	case EMU_TID: case EMU_TID + 1: case EMU_TID + 2:
		return t->tid[code - EMU_TID];
	case EMU_NTID: case EMU_NTID + 1: case EMU_NTID + 2:
		return E.block[code - EMU_NTID];
	case EMU_CTAID: case EMU_CTAID + 1: case EMU_CTAID + 2:
		return E.cta[code - EMU_CTAID];
	case EMU_NCTAID: case EMU_NCTAID + 1: case EMU_NCTAID + 2:
		return E.grid[code - EMU_NCTAID];
	}
	fail("bad special register code %d", code);
	abandon();
}

void *
moec_emu_smem(void)
{
	return E.smem;
}

static int
in_smem(const void *p, size_t n)
{
	const unsigned char *c = p;

	return c >= E.smem && c + n <= E.smem + E.smem_bytes && c + n >= c;
}

void
moec_emu_check(const void *p, int32_t bytes, int32_t space, int32_t write)
{
	const char *c = p;

	if ((uintptr_t)p % (uintptr_t)(bytes < 16 ? bytes : 16)) {
		fail("thread %d of CTA (%d,%d,%d): misaligned %d-byte %s of %s memory at %p",
		     E.cur->lin, E.cta[0], E.cta[1], E.cta[2], bytes, write ? "store" : "load",
		     space == 3 ? "shared" : "global", p);
		abandon();
	}
	if (space == 3) {
		if (!in_smem(p, (size_t)bytes)) {
			fail("thread %d of CTA (%d,%d,%d): %s of %d bytes at shared offset %td, outside %zu bytes",
			     E.cur->lin, E.cta[0], E.cta[1], E.cta[2], write ? "store" : "load",
			     bytes, (const unsigned char *)p - E.smem, E.smem_bytes);
			abandon();
		}
		return;
	}
	if (E.nbuf == 0)
		return;
	for (int i = 0; i < E.nbuf; i++) {
		const char *b = E.buf[i].p;
		if (c >= b && c + bytes <= b + E.buf[i].bytes)
			return;
	}
	fail("thread %d of CTA (%d,%d,%d): global %s of %d bytes at %p is in no buffer",
	     E.cur->lin, E.cta[0], E.cta[1], E.cta[2], write ? "store" : "load", bytes, p);
	abandon();
}

void
moec_emu_barrier(void)
{
	yield(T_BAR);
}

void
moec_emu_cp_async(void *dst, const void *src, int32_t n)
{
	Thr *t = E.cur;
	Copy *c;

	if (t->nq == t->capq) {
		t->capq = t->capq ? 2 * t->capq : 16;
		t->q = xrealloc(t->q, (size_t)t->capq * sizeof *t->q);
	}
	c = &t->q[t->nq++];
	c->dst = dst;
	c->n = n;
	c->grp = t->open;
	memcpy(c->data, src, (size_t)n);	/* inputs do not change during a kernel */
}

void
moec_emu_cp_commit(void)
{
	E.cur->open++;
}

void
moec_emu_cp_wait(int32_t n)
{
	Thr *t = E.cur;
	int k = 0;

	for (int i = 0; i < t->nq; i++) {
		Copy *c = &t->q[i];
		if (c->grp < t->open - n)
			memcpy(c->dst, c->data, (size_t)c->n);
		else
			t->q[k++] = *c;
	}
	t->nq = k;
}

void
moec_emu_ldmatrix(int32_t *out, const void *addr, int32_t trans)
{
	Thr *t = E.cur;

	t->coll = C_LDMATRIX;
	t->cp[0] = out;
	t->cp[1] = (void *)addr;
	t->ci = trans;
	yield(T_COLL);
}

void
moec_emu_mma(int32_t *ab, float *cd, int32_t kind)
{
	Thr *t = E.cur;

	t->coll = C_MMA;
	t->cp[0] = ab;
	t->cp[1] = cd;
	t->ci = kind;
	yield(T_COLL);
}

void
moec_emu_shfl_up(int32_t *io, int32_t delta)
{
	Thr *t = E.cur;

	t->coll = C_SHFL_UP;
	t->cp[0] = io;
	t->ci = delta;
	yield(T_COLL);
}

float moec_emu_exp2(float x) { return exp2f(x); }
int32_t moec_emu_f32_to_bf16(float x) { return f32_to_bf16(x); }
int32_t moec_emu_f32_to_f16(float x) { return f32_to_f16(x); }
float moec_emu_f16_to_f32(int32_t h) { return f16_to_f32((uint16_t)h); }

/* ---- collectives, from the PTX ISA's fragment layouts ---- */

static uint16_t
ld16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

/*
 * ldmatrix.m8n8.x4[.trans].b16: lanes 8j..8j+7 give the row addresses of
 * matrix j.  Lane l gets, in register j, elements (l/4, 2(l%4) + {0,1}) of
 * matrix j, or with .trans elements (2(l%4) + {0,1}, l/4); lower column
 * (row) in the low half.
 */
__attribute__((noinline)) static void
do_ldmatrix(Thr *w)
{
	const unsigned char *row[32];

	for (int l = 0; l < 32; l++) {
		row[l] = w[l].cp[1];
		if ((uintptr_t)row[l] % 16 || !in_smem(row[l], 16)) {
			fail("ldmatrix: lane %d of warp %d: row address %p is misaligned or outside shared memory",
			     l, w[0].lin / 32, (void *)row[l]);
			return;
		}
	}
	for (int l = 0; l < 32; l++) {
		int32_t *out = w[l].cp[0];
		for (int j = 0; j < 4; j++) {
			uint16_t h[2];
			for (int e = 0; e < 2; e++) {
				if (!w[0].ci)
					h[e] = ld16(row[8 * j + l / 4] + 2 * (2 * (l % 4) + e));
				else
					h[e] = ld16(row[8 * j + 2 * (l % 4) + e] + 2 * (l / 4));
			}
			out[j] = (int32_t)((uint32_t)h[0] | (uint32_t)h[1] << 16);
		}
	}
}

static double
half_val(uint32_t reg, int hi, int kind)
{
	uint16_t h = (uint16_t)(hi ? reg >> 16 : reg);

	return kind == 0 ? bf16_to_f32(h) : f16_to_f32(h);
}

/*
 * mma.m16n8k16.row.col f32 += {bf16,f16}: g = l/4, t = l%4.
 * A regs: (g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..);
 * B regs: (k 2t.., n g), (k 2t+8.., n g); C/D: (g, 2t..), (g+8, 2t..).
 */
__attribute__((noinline)) static void
do_mma(Thr *w)
{
	double A[16][16], B[16][8], C[16][8];
	int kind = w[0].ci;

	for (int l = 0; l < 32; l++) {
		const uint32_t *ab = w[l].cp[0];
		const float *cd = w[l].cp[1];
		int g = l / 4, t = l % 4;
		for (int e = 0; e < 2; e++) {
			A[g][2 * t + e] = half_val(ab[0], e, kind);
			A[g + 8][2 * t + e] = half_val(ab[1], e, kind);
			A[g][2 * t + 8 + e] = half_val(ab[2], e, kind);
			A[g + 8][2 * t + 8 + e] = half_val(ab[3], e, kind);
			B[2 * t + e][g] = half_val(ab[4], e, kind);
			B[2 * t + 8 + e][g] = half_val(ab[5], e, kind);
			C[g][2 * t + e] = cd[e];
			C[g + 8][2 * t + e] = cd[2 + e];
		}
	}
	for (int l = 0; l < 32; l++) {
		float *cd = w[l].cp[1];
		int g = l / 4, t = l % 4;
		for (int q = 0; q < 4; q++) {
			int r = g + (q >= 2 ? 8 : 0), c = 2 * t + (q & 1);
			double s = C[r][c];
			for (int k = 0; k < 16; k++)
				s += A[r][k] * B[k][c];
			cd[4 + q] = (float)s;
		}
	}
}

__attribute__((noinline)) static void
do_shfl_up(Thr *w)
{
	int32_t v[32];

	for (int l = 0; l < 32; l++)
		v[l] = *(int32_t *)w[l].cp[0];
	for (int l = 0; l < 32; l++)
		*(int32_t *)w[l].cp[0] = l >= w[0].ci ? v[l - w[0].ci] : v[l];
}

/* ---- the scheduler ---- */

static void
thr_main(void)
{
	E.fn(E.args);
	E.cur->state = T_DONE;
}

/* Resolve the collectives of warp w (lanes w*32..); 1 if it progressed. */
static int
warp_step(int w)
{
	Thr *lane = &E.thr[w * 32];
	int ncoll = 0, ndone = 0;

	for (int l = 0; l < 32; l++) {
		if (lane[l].state == T_COLL)
			ncoll++;
		else if (lane[l].state == T_DONE)
			ndone++;
		else
			return 0;	/* a lane is at a barrier or running */
	}
	if (ncoll == 0)
		return 0;
	if (ndone) {
		fail("warp %d: collective operation with %d exited lanes", w, ndone);
		return 0;
	}
	for (int l = 1; l < 32; l++)
		if (lane[l].coll != lane[0].coll || lane[l].ci != lane[0].ci) {
			fail("warp %d: divergent collective (lane 0 at %d, lane %d at %d)", w,
			     lane[0].coll, l, lane[l].coll);
			return 0;
		}
	if (lane[0].coll == C_LDMATRIX)
		do_ldmatrix(lane);
	else if (lane[0].coll == C_MMA)
		do_mma(lane);
	else
		do_shfl_up(lane);
	for (int l = 0; l < 32; l++)
		lane[l].state = T_RUN;
	return 1;
}

static int
run_cta(void)
{
	int n = E.nthr;

	memset(E.smem, 0xff, E.smem_bytes);
	for (int i = 0; i < n; i++) {
		Thr *t = &E.thr[i];
		t->lin = i;
		t->tid[0] = i % E.block[0];
		t->tid[1] = i / E.block[0] % E.block[1];
		t->tid[2] = i / (E.block[0] * E.block[1]);
		t->state = T_RUN;
		t->nq = t->open = 0;
		getcontext(&t->ctx);
		t->ctx.uc_stack.ss_sp = t->stack;
		t->ctx.uc_stack.ss_size = STACK;
		t->ctx.uc_link = &E.sched;
		makecontext(&t->ctx, thr_main, 0);
	}
	for (;;) {
		int nbar = 0, ndone = 0, progress = 0;
		for (int i = 0; i < n && !E.failed; i++)
			if (E.thr[i].state == T_RUN) {
				E.cur = &E.thr[i];
				swapcontext(&E.sched, &E.thr[i].ctx);
			}
		if (E.failed)
			return -1;
		for (int w = 0; w < n / 32; w++)
			progress |= warp_step(w);
		if (E.failed)
			return -1;
		for (int i = 0; i < n; i++) {
			nbar += E.thr[i].state == T_BAR;
			ndone += E.thr[i].state == T_DONE;
		}
		if (ndone == n)
			return 0;
		if (!progress && nbar && nbar + ndone == n) {
			if (ndone) {
				fail("barrier reached by %d threads while %d have exited", nbar, ndone);
				return -1;
			}
			for (int i = 0; i < n; i++)
				E.thr[i].state = T_RUN;
			progress = 1;
		}
		if (!progress) {
			fail("deadlock: %d threads at a barrier, %d exited, the rest at collectives",
			     nbar, ndone);
			return -1;
		}
	}
}

/* ---- setup and launch ---- */

static const struct {
	const char *name;
	void *fn;
} syms[] = {
	{"moec_emu_sreg", (void *)moec_emu_sreg},
	{"moec_emu_smem", (void *)moec_emu_smem},
	{"moec_emu_check", (void *)moec_emu_check},
	{"moec_emu_barrier", (void *)moec_emu_barrier},
	{"moec_emu_cp_async", (void *)moec_emu_cp_async},
	{"moec_emu_cp_commit", (void *)moec_emu_cp_commit},
	{"moec_emu_cp_wait", (void *)moec_emu_cp_wait},
	{"moec_emu_ldmatrix", (void *)moec_emu_ldmatrix},
	{"moec_emu_mma", (void *)moec_emu_mma},
	{"moec_emu_shfl_up", (void *)moec_emu_shfl_up},
	{"moec_emu_exp2", (void *)moec_emu_exp2},
	{"moec_emu_f32_to_bf16", (void *)moec_emu_f32_to_bf16},
	{"moec_emu_f32_to_f16", (void *)moec_emu_f32_to_f16},
	{"moec_emu_f16_to_f32", (void *)moec_emu_f16_to_f32},
};

int
cg_emu_init(CgModule *m, Diag *d)
{
	static int done;
	char *t;

	if (!done) {
		done = 1;
		LLVMLinkInMCJIT();
		if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
			return diag_error(d, LOC_NONE, "emu: LLVM has no native target");
		for (size_t i = 0; i < NELEM(syms); i++)
			LLVMAddSymbol(syms[i].name, syms[i].fn);
	}
	t = LLVMGetDefaultTargetTriple();
	m->host_triple = arena_strdup(m->arena, t);
	LLVMDisposeMessage(t);
	return 0;
}

void
cg_emu_free(CgModule *m)
{
	if (m->jit) {
		LLVMDisposeExecutionEngine(m->jit);	/* and the module it owns */
		m->jit = NULL;
		m->M = NULL;
	}
}

static int
jit(CgModule *m, Diag *d)
{
	struct LLVMMCJITCompilerOptions o;
	LLVMExecutionEngineRef ee;
	char *err = NULL;

	if (m->jit)
		return 0;
	if (cg_module_finish(m, d) < 0)
		return -1;
	LLVMInitializeMCJITCompilerOptions(&o, sizeof o);
	o.OptLevel = 1;
	if (LLVMCreateMCJITCompilerForModule(&ee, m->M, &o, sizeof o, &err)) {
		diag_error(d, LOC_NONE, "emu: MCJIT: %s", err ? err : "?");
		LLVMDisposeMessage(err);
		return -1;
	}
	m->jit = ee;
	m->module_owned_elsewhere = 1;
	return 0;
}

int
cg_emu_run(CgModule *m, const char *kernel, const CgEmuLaunch *l, Diag *d)
{
	const CgKernel *k = cg_module_find(m, kernel);
	char name[300];
	uint64_t addr;
	int n;

	if (!m->emu)
		return diag_error(d, LOC_NONE, "cg_emu_run: module is for %s, not emu", m->t.sm);
	if (!k)
		return diag_error(d, LOC_NONE, "emu: no kernel '%s'", kernel);
	if (l->nargs != k->nparam)
		return diag_error(d, LOC_NONE, "emu: kernel '%s' takes %d arguments, got %d",
				  kernel, k->nparam, l->nargs);
	n = l->block[0] * l->block[1] * l->block[2];
	if (n <= 0 || n > 1024 || n % 32)
		return diag_error(d, LOC_NONE, "emu: %d threads per CTA (need a multiple of 32 up to 1024)", n);
	if (jit(m, d) < 0)
		return -1;
	snprintf(name, sizeof name, "%s.emu", kernel);
	addr = LLVMGetFunctionAddress(m->jit, name);
	if (!addr)
		return diag_error(d, LOC_NONE, "emu: JIT has no %s", name);

	memset(&E.sched, 0, sizeof E.sched);
	if (n > E.cap) {
		E.thr = xrealloc(E.thr, (size_t)n * sizeof *E.thr);
		for (int i = E.cap; i < n; i++) {
			memset(&E.thr[i], 0, sizeof E.thr[i]);
			E.thr[i].stack = xmalloc(STACK);
		}
		E.cap = n;
	}
	E.nthr = n;
	*(void **)&E.fn = (void *)(uintptr_t)addr;
	E.args = xmalloc((size_t)(l->nargs > 0 ? l->nargs : 1) * sizeof *E.args);
	memcpy(E.args, l->args, (size_t)l->nargs * sizeof *E.args);
	for (int i = 0; i < 3; i++) {
		E.grid[i] = l->grid[i];
		E.block[i] = l->block[i];
	}
	E.smem_bytes = (size_t)l->smem;
	E.smem = xmalloc(E.smem_bytes + 16);
	E.buf = l->buf;
	E.nbuf = l->nbuf;
	E.failed = 0;
	for (int z = 0; z < l->grid[2] && !E.failed; z++)
		for (int y = 0; y < l->grid[1] && !E.failed; y++)
			for (int x = 0; x < l->grid[0] && !E.failed; x++) {
				E.cta[0] = x;
				E.cta[1] = y;
				E.cta[2] = z;
				run_cta();
			}
	free(E.smem);
	free(E.args);
	E.smem = NULL;
	E.args = NULL;
	if (E.failed)
		return diag_error(d, LOC_NONE, "emu: %s: CTA (%d,%d,%d): %s", kernel, E.cta[0],
				  E.cta[1], E.cta[2], E.msg);
	return 0;
}
