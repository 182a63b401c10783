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
 * wgmma (sm_90a) is a warpgroup collective: its operands are read from
 * shared memory through the matrix descriptors as the PTX ISA defines them
 * (canonical K- and MN-major layouts, 128/64/32-byte swizzles on address
 * bits), and its result reaches the accumulators only at the
 * wgmma.wait_group that retires its group.  Shared addresses are the low
 * bits of the host addresses, and the dynamic shared memory deliberately
 * starts 384 bytes past a 1 KiB boundary, so a builder must align its
 * swizzled tiles itself.  Hazards are errors: an operand byte written by
 * the generic proxy (st.shared, cp.async) without a later
 * fence.proxy.async by the writing thread; a write to bytes an in-flight
 * wgmma reads; wgmma operations still pending when the kernel ends.
 *
 * sm_90 asynchronous copies (the warp-specialised GEMM mainloop).  An
 * mbarrier is 8 bytes of shared memory that mbarrier.init registers with
 * the emulator: an arrival count, pending arrivals, a transaction count
 * (expect_tx adds, complete_tx subtracts) and its completed phases; a phase
 * completes when pending arrivals and the transaction count both reach 0,
 * and the pending count starts over.  try_wait.parity P succeeds once the
 * number of completed phases has the other parity than P (a thread blocks
 * there, yielding, until it does) and records, per thread, how many phases
 * of that barrier it has seen.  cp.async.bulk.tensor (2d/3d tile mode) reads
 * a 128-byte tensor map in this emulator's own encoding
 * (cg_emu_tmap_encode: base, dims, byte strides, box, swizzle), copies the
 * box at the coordinates (elements outside dims read as zeros) in row-major
 * order to the 128-byte-aligned destination, swizzled on the shared address
 * bits as wgmma reads them, and subtracts the box's bytes from the
 * barrier's transaction count.  Copies are queued and land at the end of the
 * scheduler's round, through the async proxy (no fence needed before wgmma).
 * Each byte they write remembers its barrier and the phase that completes
 * it; hazards are errors: a thread (ld.shared, or a wgmma of its warpgroup)
 * reading such bytes before it has waited for that phase, a copy landing on
 * bytes an in-flight wgmma reads or a copy still pending, a generic write to
 * bytes a copy will write or to an mbarrier, more arrivals than the count,
 * a copy landing after its phase completed (expect_tx too small), and copies
 * or arrivals on an address that is not an initialised barrier.
 * cp.async.mbarrier.arrive.noinc hands the thread's queued cp.async copies
 * to the barrier: they land at the round's end like a tensor copy and then
 * arrive (one of the count), their bytes remembering the barrier and phase;
 * being generic-proxy writes, a wgmma reading them also needs a
 * fence.proxy.async by each of its threads after its wait for that phase.
 * setmaxnreg is a warpgroup collective (the count and direction uniform
 * over the warpgroup) on the CTA's register pool, as the PTX ISA has it:
 * every warpgroup starts with the kernel's pinned registers at entry
 * (.maxnreg, CgKernel.maxnreg; setmaxnreg without it is an error), .dec
 * gives (current - count) x 128 back to the pool, .inc blocks until the pool
 * holds (count - current) x 128 and takes them; the pool starts empty, so
 * the counts after the split must fit in entry x threads (a .inc that never
 * gets its registers is a deadlock, and said so).  elect.sync is a warp
 * collective that picks lane 0.  A CTA that exits with an mbarrier phase
 * partly arrived (arrivals or transaction bytes outstanding) is an error:
 * an arrival missing or one too many, which on the GPU hangs the kernel
 * once anything waits for that phase.
 * Named barriers 1..15 (bar.sync / bar.arrive id, n: the ping-pong
 * consumers' turns) count threads: a phase completes when n have arrived
 * (the first arrival sets n; another n in the same phase is an error), and
 * bar.sync blocks its thread until then.  Threads that wait forever are a
 * deadlock, and a CTA that exits with a phase partly arrived is an error
 * (an arrival without its partners).
 * Clusters (CgKernel.cluster CTAs along x): the clusters run one after
 * another, the CTAs of one together, each with its own shared memory,
 * barriers and threads (E is the running CTA's state; cta_enter swaps).  A
 * CTA runs rounds until it can go no further alone, then the next, so a CTA
 * runs as far ahead of its peers as their barriers let it (a missing one
 * shows).  barrier.cluster completes a phase when every thread of the
 * cluster has arrived; mbarrier.arrive.shared::cluster and the multicast
 * tensor copy act on each target CTA's barrier at the same offset (the copy
 * lands at the same offset in each).  Hazards are errors: a rank or mask
 * outside the cluster; a remote arrive or copy on a barrier whose
 * initialisation fence.mbarrier_init and a cluster barrier did not order
 * before it, or on a CTA that has exited; a CTA exiting before the cluster
 * phase that follows a peer's last remote operation on it.
 *
 * Single-threaded and not reentrant: one launch at a time per process.
 */
#define CG_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

#include <llvm-c/Core.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "codegen.h"

/*
 * Switching between the GPU threads.  glibc's swapcontext saves and restores
 * the signal mask, a system call each way: half the CPU time of an emulated
 * kernel whose threads meet at barriers and collectives often (perf, session
 * 31), and under AddressSanitizer its interceptor clears the shadow of the
 * whole 256 KiB stack at each switch.  On x86-64 a switch is
 * cg_emu_ctx_switch below instead: what a call must preserve (rbx, rbp,
 * r12-r15, MXCSR, the x87 control word) pushed on the stack it leaves, its
 * stack pointer stored, the other's loaded and popped; AddressSanitizer is
 * told through its fiber interface (sanitizer/common_interface_defs.h).
 * ucontext with shadow stacks (-fcf-protection) and on other machines.
 */
#if !defined(__x86_64__) || defined(__CET__)
#define EMU_UCONTEXT 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_UCONTEXT
typedef ucontext_t Ctx;
static void
ctx_swap(Ctx *from, Ctx *to)
{
	swapcontext(from, to);
}

/* Leave from for good; abandon: with frames still on its stack. */
static _Noreturn void
ctx_leave(Ctx *from, Ctx *to, int abandon)
{
	swapcontext(from, to);
	abort();		/* never resumed */
}
#else
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
typedef struct {
	void *sp;
	const void *bottom;	/* the stack, for AddressSanitizer */
	size_t size;
	int abandoned;		/* left with frames on it (their redzones poisoned) */
} Ctx;
void cg_emu_ctx_switch(void **save_sp, void *sp);
__asm__(".text\n"
	".globl cg_emu_ctx_switch\n"
	".hidden cg_emu_ctx_switch\n"
	".type cg_emu_ctx_switch, @function\n"
	".p2align 4\n"
	"cg_emu_ctx_switch:\n"
	"\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
	"\tsubq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n"
	"\tmovq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n"
	"\tldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n"
	"\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
	"\tret\n"
	".size cg_emu_ctx_switch, .-cg_emu_ctx_switch\n");

static void
ctx_swap(Ctx *from, Ctx *to)
{
#ifdef EMU_ASAN
	void *fake;

	__sanitizer_start_switch_fiber(&fake, to->bottom, to->size);
	cg_emu_ctx_switch(&from->sp, to->sp);
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
	cg_emu_ctx_switch(&from->sp, to->sp);
#endif
}

static _Noreturn void
ctx_leave(Ctx *from, Ctx *to, int abandon)
{
	from->abandoned = abandon;
#ifdef EMU_ASAN
	__sanitizer_start_switch_fiber(NULL, to->bottom, to->size);
#endif
	cg_emu_ctx_switch(&from->sp, to->sp);
	abort();		/* never resumed */
}
#endif

enum { T_RUN, T_BAR, T_COLL, T_DONE, T_SPIN };
/* collectives: of a warp, then of a warpgroup (C_WGMMA and after) */
enum { C_LDMATRIX = 1, C_MMA, C_SHFL_UP, C_SHFL_XOR, C_ELECT, C_VOTE_ANY, C_MATCH_ANY, C_REDUX_UMAX, C_WGMMA, C_WG_FENCE, C_WG_COMMIT, C_WG_WAIT,
       C_SETMAXNREG };
#define MAXBAR 64		/* mbarriers per CTA */
#define NAMED_BARS 16		/* bar.sync ids; 0 is the CTA barrier (moec_emu_barrier) */
#define TMAP_MAGIC 0x70616d74u	/* "tmap" */
#define STACK (256 * 1024)
#define SMEM_SKEW 384		/* the shared base, past a 1 KiB boundary */
#define WG_MAXOPS 256		/* wgmma operations in flight per warpgroup */

typedef struct Copy Copy;
struct Copy {
	char *dst;
	unsigned char data[16];
	int n, grp;
};

typedef struct Thr Thr;
struct Thr {
	Ctx ctx;
	char *stack;
	int tid[3], lin;
	int state, coll, ci;
	void *cp[2];
	uint64_t u[3];		/* wgmma: descriptors, scale-d */
	Copy *q;
	int nq, capq, open;
	uint32_t nfence;	/* fence.proxy.async executed so far */
	uint32_t seen[MAXBAR];	/* per mbarrier: completed phases this thread waited for */
	uint32_t fseen[MAXBAR];	/* ... as of its last fence.proxy.async */
	int nbw;		/* the named barrier it waits at (bar.sync), 0: none */
	struct { long o; size_t n; int grp; } *bs;	/* TMA stores still reading [o, o+n): bulk group, -1 open */
	int nbs, capbs, bgrp;	/* ... and the bulk groups committed so far */
	uint32_t clarr, clseen;	/* barrier.cluster: its arrivals, the phases it waited for */
	int clw;		/* 1: waiting at barrier.cluster.wait */
};

/* An mbarrier: where, its arrival count, pending arrivals, tx count, completed phases. */
typedef struct Mbar Mbar;
struct Mbar {
	long off;
	int count, pending;
	int64_t tx;
	uint32_t done;
	int by;			/* the thread that initialised it */
	uint32_t vis;		/* the cluster's peers may use it after cluster phase vis (NOVIS: not fenced) */
};
#define NOVIS UINT32_MAX

/* A tensor copy issued, not landed: the bytes for shared offsets at[]; or
 * (arrive) a thread's cp.async copies with their arrival on the barrier. */
typedef struct Bulk Bulk;
struct Bulk {
	int bar, arrive;
	uint32_t phase;		/* the barrier's phase it completes in */
	int n;
	uint32_t *at;
	unsigned char *data;
};

/* The emulator's tensor map (cg_emu_tmap_encode), in the first bytes of the 128. */
typedef struct EmuTmap EmuTmap;
struct EmuTmap {
	uint32_t magic;
	int32_t rank, esz, swizzle;
	int32_t box[3], pad;
	uint64_t base;
	int64_t dims[3];
	int64_t strides[2];
};
_Static_assert(sizeof(EmuTmap) <= 128, "a tensor map is 128 bytes");

/*
 * One wgmma.mma_async of a warpgroup, issued but not retired: its results
 * per thread, where they go, and the shared bytes it reads (marked in
 * E.rd until it retires).
 */
typedef struct WgOp WgOp;
struct WgOp {
	int grp;		/* commit group, -1 while uncommitted */
	int n;			/* accumulators per thread */
	float *dst[128];
	float *val;		/* [128][n] */
	uint32_t *rd;		/* shared offsets of the operand bytes (2 per element) */
	int nrd;
};

typedef struct Wg Wg;
struct Wg {
	WgOp op[WG_MAXOPS];
	int nop, ncommit;
	int regs;		/* per thread, after its setmaxnreg so far */
};

/*
 * The state of the CTA whose thread runs.  In a cluster each CTA has its
 * own (cta_enter swaps them), but for the fields cta_enter carries over:
 * the running thread, the scheduler's context, the failure.
 */
typedef struct Emu Emu;
struct Emu {
	Thr *thr;
	int nthr, cap;
	Thr *cur;
	Ctx sched;
	void (*fn)(uint64_t *);
	uint64_t *args;
	int grid[3], block[3], cta[3];
	unsigned char *smem, *smem_raw;
	size_t smem_bytes;
	/* per shared byte: last generic writer + 1 and its fence count then; wgmma readers */
	uint16_t *owner, *rd;
	uint32_t *epoch;
	Wg *wg;			/* per warpgroup */
	int maxnreg, pool;	/* registers per thread at entry; the CTA's pool (setmaxnreg) */
	struct { int count, arrived; uint32_t gen; } nb[NAMED_BARS];	/* named barriers */
	int woke;		/* a thread passed a wait this round (and may wait again: still progress) */
	/* mbarriers and tensor copies; per shared byte: the copy's barrier + 1 and phase, kind */
	Mbar mb[MAXBAR];
	int nmb;
	Bulk *bulk;
	int nbulk, capbulk;
	int16_t *abar;
	uint32_t *aphase;
	unsigned char *isbar;	/* 1: an mbarrier's byte */
	unsigned char *agen;	/* 1: written by cp.async through an mbarrier (generic proxy) */
	uint16_t *srd;		/* per shared byte: TMA stores that have not yet read it (wait_group.read) */
	Thr *wgthr;		/* wgmma: the issuing warpgroup's threads */
	int chk_b, chk_g;	/* wgmma: the last (barrier + 1, agen, phase) checked for all threads */
	uint32_t chk_p;
	const CgEmuBuf *buf;
	int nbuf;
	int failed;
	char msg[512];
	int rank, exited;	/* in the cluster; all its threads exited (and its end checked) */
	uint32_t clneed;	/* cluster phases it must wait for before it exits (a peer's remote operation) */
};
static Emu E;

static long shared_off(uint32_t a, int bytes);

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
	ctx_leave(&E.cur->ctx, &E.sched, 1);
}

static void
yield(int state)
{
	E.cur->state = state;
	ctx_swap(&E.cur->ctx, &E.sched);
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
	case EMU_CLUSTER_CTARANK:
		return E.rank;
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

/*
 * A generic-proxy write of shared bytes by the current thread: an error
 * where an in-flight wgmma reads them; else they are marked unfenced until
 * the thread's next fence.proxy.async.
 */
static void
generic_write(const void *p, size_t n, const char *what)
{
	size_t o = (size_t)((const unsigned char *)p - E.smem);

	for (size_t i = o; i < o + n; i++)
		if (E.rd[i]) {
			fail("thread %d of CTA (%d,%d,%d): %s writes shared offset %zu, which an in-flight "
			     "wgmma reads (no wgmma.wait_group before it)", E.cur->lin, E.cta[0],
			     E.cta[1], E.cta[2], what, i);
			abandon();
		}
	for (size_t i = o; i < o + n; i++) {
		if (E.srd[i]) {
			fail("thread %d of CTA (%d,%d,%d): %s writes shared offset %zu, which a TMA store still "
			     "reads (no cp.async.bulk.wait_group.read by its thread before)", E.cur->lin, E.cta[0],
			     E.cta[1], E.cta[2], what, i);
			abandon();
		}
		if (E.isbar[i]) {
			fail("thread %d of CTA (%d,%d,%d): %s writes shared offset %zu, which holds an mbarrier",
			     E.cur->lin, E.cta[0], E.cta[1], E.cta[2], what, i);
			abandon();
		}
		if (E.abar[i] && E.aphase[i] > E.mb[E.abar[i] - 1].done) {
			fail("thread %d of CTA (%d,%d,%d): %s writes shared offset %zu, which a tensor copy "
			     "has not yet written (its barrier's phase is not complete)", E.cur->lin, E.cta[0],
			     E.cta[1], E.cta[2], what, i);
			abandon();
		}
		E.owner[i] = (uint16_t)(E.cur->lin + 1);
		E.epoch[i] = E.cur->nfence;
		E.abar[i] = 0;
		E.agen[i] = 0;
	}
}

/*
 * Bytes [o, o+n) of shared memory read by thread t: an error where a tensor
 * copy wrote (or will write) them in a phase of its barrier that t has not
 * waited for.
 */
static int
async_read_ok(const Thr *t, size_t o, size_t n, const char *what)
{
	for (size_t i = o; i < o + n; i++) {
		int b = E.abar[i] - 1;
		if (b >= 0 && t->seen[b] < E.aphase[i]) {
			fail("thread %d of CTA (%d,%d,%d): %s reads shared offset %zu before waiting for phase %u "
			     "of the mbarrier at offset %ld, which completes the tensor copy that writes it "
			     "(the thread has seen %u phases)", t->lin, E.cta[0], E.cta[1], E.cta[2], what, i,
			     E.aphase[i] - 1, E.mb[b].off, t->seen[b]);
			return -1;
		}
	}
	return 0;
}

/* Global bytes [c, c+n) lie inside one of the launch's buffers (or none are given). */
static int
global_in(const char *c, size_t n)
{
	if (E.nbuf == 0)
		return 1;
	for (int i = 0; i < E.nbuf; i++) {
		const char *b = E.buf[i].p;
		if (c >= b && c + n <= b + E.buf[i].bytes)
			return 1;
	}
	return 0;
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
		if (write)
			generic_write(p, (size_t)bytes, "st.shared");
		else if (async_read_ok(E.cur, (size_t)((const unsigned char *)p - E.smem), (size_t)bytes,
				       "ld.shared") < 0)
			abandon();
		return;
	}
	if (global_in(c, (size_t)bytes))
		return;
	fail("thread %d of CTA (%d,%d,%d): global %s of %d bytes at %p is in no buffer",
	     E.cur->lin, E.cta[0], E.cta[1], E.cta[2], write ? "store" : "load", bytes, p);
	abandon();
}

void
moec_emu_barrier(void)
{
	yield(T_BAR);
}

/* bar.sync (sync 1) or bar.arrive id, count: one thread's arrival. */
void
moec_emu_bar_named(int32_t id, int32_t count, int32_t sync)
{
	Thr *t = E.cur;
	uint32_t gen;

	if (id < 1 || id >= NAMED_BARS || count < 32 || count % 32 || count > E.nthr) {
		fail("thread %d of CTA (%d,%d,%d): bar.%s %d, %d (need an id in 1..%d and whole warps of "
		     "the %d threads)", t->lin, E.cta[0], E.cta[1], E.cta[2], sync ? "sync" : "arrive", id, count,
		     NAMED_BARS - 1, E.nthr);
		abandon();
	}
	if (E.nb[id].arrived == 0)
		E.nb[id].count = count;
	else if (E.nb[id].count != count) {
		fail("thread %d of CTA (%d,%d,%d): bar.%s %d with %d threads, while this phase of it counts %d",
		     t->lin, E.cta[0], E.cta[1], E.cta[2], sync ? "sync" : "arrive", id, count, E.nb[id].count);
		abandon();
	}
	gen = E.nb[id].gen;
	if (++E.nb[id].arrived == count) {
		E.nb[id].arrived = 0;
		E.nb[id].gen++;
	}
	t->nbw = sync ? id : 0;
	while (sync && E.nb[id].gen == gen)
		yield(T_SPIN);
	t->nbw = 0;
	E.woke = 1;
}

/* cp.async of n bytes of which the first nsrc come from src and the rest
 * are zeros (PTX's src-size operand: 0 reads nothing) */
void
moec_emu_cp_async_src(void *dst, const void *src, int32_t n, int32_t nsrc)
{
	Thr *t = E.cur;
	Copy *c;

	if (t->nq == t->capq) {
		t->capq = t->capq ? 2 * t->capq : 16;
		t->q = xrealloc(t->q, (size_t)t->capq * sizeof *t->q);
	}
	for (int i = 0; i < n; i++)
		if (E.rd[(unsigned char *)dst - E.smem + i]) {
			fail("thread %d of CTA (%d,%d,%d): cp.async into shared offset %td, which an "
			     "in-flight wgmma reads", t->lin, E.cta[0], E.cta[1], E.cta[2],
			     (unsigned char *)dst - E.smem + i);
			abandon();
		}
	c = &t->q[t->nq++];
	c->dst = dst;
	c->n = n;
	c->grp = t->open;
	memset(c->data, 0, (size_t)n);
	memcpy(c->data, src, (size_t)(nsrc < n ? nsrc : n));	/* inputs do not change during a kernel */
}

void
moec_emu_cp_async(void *dst, const void *src, int32_t n)
{
	moec_emu_cp_async_src(dst, src, n, n);
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
		if (c->grp < t->open - n) {
			generic_write(c->dst, (size_t)c->n, "cp.async");
			memcpy(c->dst, c->data, (size_t)c->n);
		} else
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

/* shfl.sync.bfly: lane l gets lane l ^ mask's value */
void
moec_emu_shfl_xor(int32_t *io, int32_t mask)
{
	Thr *t = E.cur;

	t->coll = C_SHFL_XOR;
	t->cp[0] = io;
	t->ci = mask;
	yield(T_COLL);
}

/* wgmma.mma_async m64nNk16: kind = N | f16 << 9 | trans-a << 10 | trans-b << 11
 * | neg-a << 12 | neg-b << 13; e4m3 << 14: both operands e4m3, m64nNk32;
 * acc: the thread's N/2 accumulators */
void
moec_emu_wgmma(float *acc, int64_t da, int64_t db, int32_t scale_d, int32_t kind)
{
	Thr *t = E.cur;

	t->coll = C_WGMMA;
	t->cp[0] = acc;
	t->u[0] = (uint64_t)da;
	t->u[1] = (uint64_t)db;
	t->u[2] = scale_d != 0;
	t->ci = kind;
	yield(T_COLL);
}

static void
wg_coll(int coll, int n)
{
	Thr *t = E.cur;

	t->coll = coll;
	t->ci = n;
	t->u[0] = t->u[1] = t->u[2] = 0;
	yield(T_COLL);
}

void moec_emu_wg_fence(void) { wg_coll(C_WG_FENCE, 0); }
void moec_emu_wg_commit(void) { wg_coll(C_WG_COMMIT, 0); }
void moec_emu_wg_wait(int32_t n) { wg_coll(C_WG_WAIT, n); }

/* fence.proxy.async: the thread's earlier generic writes become visible to wgmma */
void
moec_emu_fence_proxy_async(void)
{
	E.cur->nfence++;
	memcpy(E.cur->fseen, E.cur->seen, sizeof E.cur->fseen);
}

/* ---- mbarriers, tensor copies, setmaxnreg, elect.sync ---- */

/* The barrier at shared address p, or -1 (a diagnostic) when none was initialised there. */
static int
mbar_find(const void *p, const char *what)
{
	long o = (long)((const unsigned char *)p - E.smem);

	for (int i = 0; i < E.nmb; i++)
		if (E.mb[i].off == o)
			return i;
	fail("thread %d of CTA (%d,%d,%d): %s on shared offset %ld, where no mbarrier was initialised",
	     E.cur->lin, E.cta[0], E.cta[1], E.cta[2], what, o);
	return -1;
}

/* Complete the phase when nothing is pending. */
static void
mbar_settle(Mbar *b)
{
	if (b->pending == 0 && b->tx == 0) {
		b->done++;
		b->pending = b->count;
	}
}

void
moec_emu_mbar_init(void *p, int32_t count)
{
	long o = (long)((unsigned char *)p - E.smem);
	int i;

	if (!in_smem(p, 8) || o % 8 || count < 1 || count > (1 << 20) - 1) {
		fail("thread %d of CTA (%d,%d,%d): mbarrier.init at shared offset %ld with count %d "
		     "(need 8 aligned bytes inside shared memory, count 1..2^20-1)", E.cur->lin, E.cta[0],
		     E.cta[1], E.cta[2], o, count);
		abandon();
	}
	for (i = 0; i < E.nmb && E.mb[i].off != o; i++)
		;
	if (i == E.nmb) {
		if (E.nmb == MAXBAR) {
			fail("more than %d mbarriers in a CTA", MAXBAR);
			abandon();
		}
		generic_write(p, 8, "mbarrier.init");
		E.nmb++;
	}
	E.mb[i] = (Mbar){o, count, count, 0, 0, E.cur->lin, NOVIS};
	for (int t = 0; t < E.nthr; t++)
		E.thr[t].seen[i] = E.thr[t].fseen[i] = 0;
	memset(E.isbar + o, 1, 8);
}

/* mbarrier.arrive, after expect_tx of tx bytes when tx >= 0 */
void
moec_emu_mbar_arrive(void *p, int32_t tx)
{
	int i = mbar_find(p, "mbarrier.arrive");
	Mbar *b;

	if (i < 0)
		abandon();
	b = &E.mb[i];
	if (tx > 0)
		b->tx += tx;
	if (b->pending == 0) {
		fail("thread %d of CTA (%d,%d,%d): more arrivals on the mbarrier at offset %ld than its count "
		     "%d in phase %u", E.cur->lin, E.cta[0], E.cta[1], E.cta[2], b->off, b->count, b->done);
		abandon();
	}
	b->pending--;
	mbar_settle(b);
}

void
moec_emu_mbar_wait(void *p, int32_t parity)
{
	int i = mbar_find(p, "mbarrier.try_wait");

	if (i < 0)
		abandon();
	while ((E.mb[i].done & 1) == (uint32_t)(parity & 1))
		yield(T_SPIN);
	E.woke = 1;
	if (E.cur->seen[i] < E.mb[i].done)
		E.cur->seen[i] = E.mb[i].done;
}

/* The swizzled shared address of byte offset a (an 18-bit address) under swizzle bytes. */
static uint32_t
swizzle_addr(uint32_t a, int swizzle)
{
	int bits = swizzle == 128 ? 3 : swizzle == 64 ? 2 : swizzle == 32 ? 1 : 0;

	return a ^ ((a >> 7 & ((1u << bits) - 1)) << 4);
}

static int
tma_map_ok(const EmuTmap *m)
{
	if (m->magic != TMAP_MAGIC || m->rank < 2 || m->rank > 3 || (m->esz != 1 && m->esz != 2 && m->esz != 4))
		return 0;
	for (int d = 0; d < m->rank; d++)
		if (m->box[d] < 1 || m->box[d] > 256 || m->dims[d] < 1)
			return 0;
	return 1;
}

static Bulk *
new_bulk(void)
{
	if (E.nbulk == E.capbulk) {
		E.capbulk = E.capbulk ? 2 * E.capbulk : 64;
		E.bulk = xrealloc(E.bulk, (size_t)E.capbulk * sizeof *E.bulk);
	}
	memset(&E.bulk[E.nbulk], 0, sizeof E.bulk[0]);
	return &E.bulk[E.nbulk++];
}

/*
 * cp.async.mbarrier.arrive.noinc [mbar]: the thread's cp.async copies so
 * far (committed or not) land at the round's end, and then arrive on the
 * barrier (one of its count).  Their bytes are generic-proxy writes that
 * complete in the barrier's current phase: a reader must wait for it, and
 * a wgmma reading them also needs a fence.proxy.async by its threads after
 * that wait.
 */
void
moec_emu_cp_mbar_arrive(void *mbar)
{
	Thr *t = E.cur;
	int bi = mbar_find(mbar, "cp.async.mbarrier.arrive");
	size_t n = 0;
	Bulk *k;

	if (bi < 0)
		abandon();
	for (int i = 0; i < t->nq; i++)
		n += (size_t)t->q[i].n;
	k = new_bulk();
	k->bar = bi;
	k->arrive = 1;
	k->phase = E.mb[bi].done + 1;
	k->n = (int)n;
	k->at = xmalloc(n * sizeof *k->at + 1);
	k->data = xmalloc(n + 1);
	n = 0;
	for (int i = 0; i < t->nq; i++)
		for (int j = 0; j < t->q[i].n; j++, n++) {
			size_t so = (size_t)(t->q[i].dst - (char *)E.smem) + (size_t)j;
			if (E.abar[so] && E.aphase[so] > E.mb[E.abar[so] - 1].done) {
				fail("thread %d of CTA (%d,%d,%d): cp.async into shared offset %zu, which an earlier "
				     "asynchronous copy has not yet written", t->lin, E.cta[0], E.cta[1], E.cta[2], so);
				abandon();
			}
			k->at[n] = (uint32_t)so;
			k->data[n] = t->q[i].data[j];
			E.abar[so] = (int16_t)(bi + 1);
			E.aphase[so] = k->phase;
			E.agen[so] = 1;
		}
	t->nq = 0;
}

/*
 * cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst],
 * [src], bytes, [mbar] (no tensor map): both addresses 16-byte aligned,
 * bytes a positive multiple of 16, the source inside one of the launch's
 * buffers; read now, landed at the round's end through the async proxy as a
 * tensor copy (complete_tx of its bytes), with the tensor copy's hazards.
 */
void
moec_emu_bulk_load(void *dst, const void *src, int32_t bytes, void *mbar)
{
	long o = (long)((unsigned char *)dst - E.smem);
	int bi = mbar_find(mbar, "cp.async.bulk");
	Bulk *k;

	if (bi < 0)
		abandon();
	if (o % 16 || (uintptr_t)src % 16 || bytes <= 0 || bytes % 16 || !in_smem(dst, (size_t)bytes) ||
	    !global_in(src, (size_t)bytes)) {
		fail("thread %d of CTA (%d,%d,%d): cp.async.bulk of %d bytes from global %p to shared offset %ld: "
		     "not 16-byte aligned, not a multiple of 16, or outside shared memory (%zu bytes) or the "
		     "launch's buffers", E.cur->lin, E.cta[0], E.cta[1], E.cta[2], bytes, src, o, E.smem_bytes);
		abandon();
	}
	k = new_bulk();
	k->bar = bi;
	k->phase = E.mb[bi].done + 1;
	k->n = bytes;
	k->at = xmalloc((size_t)bytes * sizeof *k->at);
	k->data = xmalloc((size_t)bytes);
	for (long i = 0; i < bytes; i++) {
		long so = o + i;
		if ((E.abar[so] && E.aphase[so] > E.mb[E.abar[so] - 1].done) || E.srd[so] || E.isbar[so]) {
			fail("thread %d of CTA (%d,%d,%d): cp.async.bulk into shared offset %ld, which an earlier "
			     "asynchronous copy has not yet written, a TMA store still reads, or an mbarrier holds",
			     E.cur->lin, E.cta[0], E.cta[1], E.cta[2], so);
			abandon();
		}
		k->at[i] = (uint32_t)so;
		k->data[i] = ((const unsigned char *)src)[i];
		E.abar[so] = (int16_t)(bi + 1);
		E.aphase[so] = k->phase;
		E.agen[so] = 0;
	}
}

/*
 * cp.async.bulk.tensor.{2,3}d.shared::cluster.global.tile
 * .mbarrier::complete_tx::bytes [dst], [map, {c0, c1, c2}], [mbar]:
 * read now (inputs do not change during a kernel), land at the round's end.
 */
void
moec_emu_tma_load(void *dst, const void *map, void *mbar, int32_t c0, int32_t c1, int32_t c2)
{
	const EmuTmap *m = map;
	int32_t c[3] = {c0, c1, c2};
	long o = (long)((unsigned char *)dst - E.smem);
	int bi = mbar_find(mbar, "cp.async.bulk.tensor");
	Bulk *k;
	size_t bytes, row;
	uint32_t sbase;

	if (bi < 0)
		abandon();
	if (!tma_map_ok(m)) {
		fail("thread %d of CTA (%d,%d,%d): cp.async.bulk.tensor through a tensor map that is not one "
		     "(bad magic, rank, element size, box or dims)", E.cur->lin, E.cta[0], E.cta[1], E.cta[2]);
		abandon();
	}
	row = (size_t)m->box[0] * (size_t)m->esz;
	bytes = row * (size_t)m->box[1] * (size_t)(m->rank == 3 ? m->box[2] : 1);
	if (o % 128 || !in_smem(dst, bytes)) {
		fail("thread %d of CTA (%d,%d,%d): cp.async.bulk.tensor to shared offset %ld, %zu bytes: "
		     "not 128-byte aligned or outside %zu bytes", E.cur->lin, E.cta[0], E.cta[1], E.cta[2],
		     o, bytes, E.smem_bytes);
		abandon();
	}
	k = new_bulk();
	k->bar = bi;
	k->phase = E.mb[bi].done + 1;
	k->n = (int)bytes;
	k->at = xmalloc(bytes * sizeof *k->at);
	k->data = xmalloc(bytes);
	sbase = (uint32_t)((uintptr_t)dst & 0x3ffff);
	for (int z = 0; z < (m->rank == 3 ? m->box[2] : 1); z++)
		for (int y = 0; y < m->box[1]; y++) {
			int64_t gy = (int64_t)c[1] + y, gz = m->rank == 3 ? (int64_t)c[2] + z : 0;
			size_t at = ((size_t)z * (size_t)m->box[1] + (size_t)y) * row;
			for (int x = 0; x < m->box[0]; x++) {
				int64_t gx = (int64_t)c[0] + x;
				int in = gx >= 0 && gx < m->dims[0] && gy >= 0 && gy < m->dims[1] &&
					 (m->rank < 3 || (gz >= 0 && gz < m->dims[2]));
				size_t e = at + (size_t)x * (size_t)m->esz;
				const char *src = in ? (const char *)(uintptr_t)(m->base + (uint64_t)(gx * m->esz) +
							(uint64_t)(gy * m->strides[0]) + (uint64_t)(gz * m->strides[1]))
						     : NULL;
				if (src && !global_in(src, (size_t)m->esz)) {
					fail("thread %d of CTA (%d,%d,%d): cp.async.bulk.tensor reads global %p "
					     "(element %lld,%lld,%lld), in no buffer", E.cur->lin, E.cta[0], E.cta[1],
					     E.cta[2], (const void *)src, (long long)gx, (long long)gy, (long long)gz);
					abandon();
				}
				for (int b = 0; b < m->esz; b++) {
					uint32_t a = swizzle_addr((sbase + (uint32_t)(e + (size_t)b)) & 0x3ffff, m->swizzle);
					long so = shared_off(a, 1);
					if (so < 0) {
						fail("cp.async.bulk.tensor: swizzled shared address 0x%x outside the CTA's "
						     "%zu bytes", a, E.smem_bytes);
						abandon();
					}
					if ((E.abar[so] && E.aphase[so] > E.mb[E.abar[so] - 1].done) || E.srd[so]) {
						fail("thread %d of CTA (%d,%d,%d): cp.async.bulk.tensor into shared offset %ld, "
						     "which an earlier tensor copy has not yet written or a TMA store still "
						     "reads", E.cur->lin, E.cta[0], E.cta[1], E.cta[2], so);
						abandon();
					}
					k->at[e + (size_t)b] = (uint32_t)so;
					k->data[e + (size_t)b] = src ? (unsigned char)src[b] : 0;
					E.abar[so] = (int16_t)(bi + 1);
					E.aphase[so] = k->phase;
					E.agen[so] = 0;
				}
			}
		}
}

/*
 * cp.async.bulk.tensor.{2,3}d.global.shared::cta.bulk_group [map, {c0, c1,
 * c2}], [src]: the box at the 128-byte-aligned src (swizzled on the shared
 * address bits, as the load writes it) to global memory, elements outside
 * dims not written.  Written now; its source bytes stay read (a generic
 * write to them, or a tensor load, is an error) until the issuing thread's
 * cp.async.bulk.wait_group.read covers its bulk group.  Each source byte
 * written through the generic proxy needs a fence.proxy.async by its writer
 * after the write.
 */
void
moec_emu_tma_store(const void *map, void *src, int32_t c0, int32_t c1, int32_t c2)
{
	const EmuTmap *m = map;
	int32_t c[3] = {c0, c1, c2};
	long o = (long)((unsigned char *)src - E.smem);
	Thr *t = E.cur;
	size_t bytes, row;
	uint32_t sbase;

	if (!tma_map_ok(m)) {
		fail("thread %d of CTA (%d,%d,%d): a TMA store through a tensor map that is not one "
		     "(bad magic, rank, element size, box or dims)", t->lin, E.cta[0], E.cta[1], E.cta[2]);
		abandon();
	}
	row = (size_t)m->box[0] * (size_t)m->esz;
	bytes = row * (size_t)m->box[1] * (size_t)(m->rank == 3 ? m->box[2] : 1);
	if (o % 128 || row % 128 || !in_smem(src, bytes)) {
		fail("thread %d of CTA (%d,%d,%d): a TMA store from shared offset %ld, %zu bytes: not 128-byte "
		     "aligned (or rows of %zu bytes) or outside %zu bytes", t->lin, E.cta[0], E.cta[1], E.cta[2],
		     o, bytes, row, E.smem_bytes);
		abandon();
	}
	sbase = (uint32_t)((uintptr_t)src & 0x3ffff);
	for (int z = 0; z < (m->rank == 3 ? m->box[2] : 1); z++)
		for (int y = 0; y < m->box[1]; y++)
			for (int x = 0; x < m->box[0]; x++) {
				int64_t gx = (int64_t)c[0] + x, gy = (int64_t)c[1] + y;
				int64_t gz = m->rank == 3 ? (int64_t)c[2] + z : 0;
				size_t e = ((size_t)z * (size_t)m->box[1] + (size_t)y) * row + (size_t)x * (size_t)m->esz;
				char *dst = (char *)(uintptr_t)(m->base + (uint64_t)(gx * m->esz) +
								(uint64_t)(gy * m->strides[0]) +
								(uint64_t)(gz * m->strides[1]));
				int in = gx >= 0 && gx < m->dims[0] && gy >= 0 && gy < m->dims[1] &&
					 (m->rank < 3 || (gz >= 0 && gz < m->dims[2]));
				if (in && !global_in(dst, (size_t)m->esz)) {
					fail("thread %d of CTA (%d,%d,%d): a TMA store writes global %p (element "
					     "%lld,%lld,%lld), in no buffer", t->lin, E.cta[0], E.cta[1], E.cta[2],
					     (void *)dst, (long long)gx, (long long)gy, (long long)gz);
					abandon();
				}
				for (int b = 0; b < m->esz; b++) {
					long so = shared_off(swizzle_addr((sbase + (uint32_t)(e + (size_t)b)) & 0x3ffff,
									  m->swizzle), 1);
					int w = so < 0 ? 0 : E.owner[so];
					if (so < 0 || async_read_ok(t, (size_t)so, 1, "a TMA store") < 0)
						abandon();
					if (w && E.thr[w - 1].nfence == E.epoch[so]) {
						fail("thread %d of CTA (%d,%d,%d): a TMA store reads shared offset %ld, written "
						     "by thread %d through the generic proxy with no fence.proxy.async after "
						     "it", t->lin, E.cta[0], E.cta[1], E.cta[2], so, w - 1);
						abandon();
					}
					if (in)
						dst[b] = (char)E.smem[so];
				}
			}
	for (size_t i = 0; i < bytes; i++)	/* a 128-byte swizzle keeps each 128-byte row */
		E.srd[o + (long)i]++;
	if (t->nbs == t->capbs) {
		t->capbs = t->capbs ? 2 * t->capbs : 8;
		t->bs = xrealloc(t->bs, (size_t)t->capbs * sizeof *t->bs);
	}
	t->bs[t->nbs].o = o;
	t->bs[t->nbs].n = bytes;
	t->bs[t->nbs++].grp = -1;
}

/* cp.async.bulk.commit_group: the thread's open TMA stores are a group */
void
moec_emu_bulk_commit(void)
{
	Thr *t = E.cur;

	t->bgrp++;
	for (int i = 0; i < t->nbs; i++)
		if (t->bs[i].grp < 0)
			t->bs[i].grp = t->bgrp;
}

/* cp.async.bulk.wait_group.read n: the groups but the n newest have read their shared bytes */
void
moec_emu_bulk_wait_read(int32_t n)
{
	Thr *t = E.cur;
	int k = 0;

	for (int i = 0; i < t->nbs; i++) {
		if (t->bs[i].grp >= 0 && t->bs[i].grp <= t->bgrp - n) {
			for (size_t j = 0; j < t->bs[i].n; j++)
				E.srd[t->bs[i].o + (long)j]--;
			continue;
		}
		t->bs[k++] = t->bs[i];
	}
	t->nbs = k;
	E.woke = 1;
}

/* Land the queued tensor copies: write, complete_tx (cp.async's: arrive). */
static int
land_bulk(void)
{
	int n = E.nbulk;

	for (int j = 0; j < n && !E.failed; j++) {
		Bulk *k = &E.bulk[j];
		Mbar *b = &E.mb[k->bar];
		if (b->done + 1 != k->phase)
			fail("a tensor copy lands after phase %u of the mbarrier at offset %ld completed without it "
			     "(expect_tx counted too few bytes)", k->phase - 1, b->off);
		for (int i = 0; i < k->n && !E.failed; i++) {
			if (E.rd[k->at[i]])
				fail("a tensor copy lands on shared offset %u, which an in-flight wgmma reads "
				     "(the stage was refilled before its consumers released it)", k->at[i]);
			E.smem[k->at[i]] = k->data[i];
			E.owner[k->at[i]] = 0;	/* the async proxy's write */
		}
		if (k->arrive && b->pending == 0)
			fail("cp.async.mbarrier.arrive: more arrivals on the mbarrier at offset %ld than its count %d "
			     "in phase %u", b->off, b->count, b->done);
		else if (k->arrive)
			b->pending--;
		else
			b->tx -= k->n;
		mbar_settle(b);
		free(k->at);
		free(k->data);
	}
	E.nbulk = 0;
	return n;
}

/* A warp collective of one i32 in and out (elect.sync, vote.any): the
 * scheduler computes it for the whole warp once every lane has arrived. */
static void
coll_io(int coll, int32_t *io)
{
	Thr *t = E.cur;

	t->coll = coll;
	t->cp[0] = io;
	t->ci = 0;
	yield(T_COLL);
}

void
moec_emu_elect(int32_t *io)
{
	coll_io(C_ELECT, io);
}

void
moec_emu_vote_any(int32_t *io)
{
	coll_io(C_VOTE_ANY, io);
}

void
moec_emu_match_any(int32_t *io)
{
	coll_io(C_MATCH_ANY, io);
}

void
moec_emu_redux_umax(int32_t *io)
{
	coll_io(C_REDUX_UMAX, io);
}

void
moec_emu_setmaxnreg(int32_t code)
{
	Thr *t = E.cur;

	t->coll = C_SETMAXNREG;
	t->ci = code;
	t->u[0] = t->u[1] = t->u[2] = 0;
	yield(T_COLL);
}

/*
 * ---- clusters ----
 *
 * The CTAs of a cluster run together, each with its own shared memory,
 * mbarriers, threads and copies: E holds the state of the CTA whose thread
 * runs, CL.st the others'.  An operation on a peer's shared memory enters
 * the peer's state for its length (cta_enter) and comes back.
 */
#define MAXCLUSTER 16		/* a multicast mask's 16 bits */

static struct {
	int n;			/* CTAs in the cluster */
	int at;			/* the rank whose state E holds */
	Emu st[MAXCLUSTER];	/* each rank's while another's is in E */
	uint32_t arrived, done;	/* barrier.cluster: arrivals in the current phase, phases completed */
} CL;

/* E becomes rank r's state; the running thread, the scheduler and a failure stay. */
static void
cta_enter(int r)
{
	Thr *cur = E.cur;
	Ctx sched = E.sched;
	int failed = E.failed;

	if (r == CL.at)
		return;
	CL.st[CL.at] = E;
	E = CL.st[r];
	E.cur = cur;
	E.sched = sched;
	E.failed = failed;
	memcpy(E.msg, CL.st[CL.at].msg, sizeof E.msg);
	CL.at = r;
}

/*
 * Enter rank r of the cluster for an operation of the current thread on
 * its shared memory (what, at offset o: its mbarrier when bar), the peer
 * recording that it must not exit before the cluster phase that follows
 * it.  -1 (a diagnostic, still in the caller's state) where the rank is
 * outside the cluster, the peer has exited, or its barrier's initialisation
 * is not ordered before (fence.mbarrier_init and a barrier.cluster the
 * thread waited for).
 */
static int
peer_enter(int r, long o, int bar, const char *what)
{
	Thr *t = E.cur;
	int self = E.rank, i;

	if (r < 0 || r >= CL.n) {
		fail("thread %d of CTA (%d,%d,%d): %s names cluster rank %d, outside the cluster of %d",
		     t->lin, E.cta[0], E.cta[1], E.cta[2], what, r, CL.n);
		return -1;
	}
	if (r == self)
		return 0;
	cta_enter(r);
	if (E.exited) {
		fail("thread %d of cluster rank %d: %s reaches the shared memory of rank %d, which has exited "
		     "(no barrier.cluster keeps it until its peers are done with it)", t->lin, self, what, r);
		cta_enter(self);
		return -1;
	}
	for (i = 0; bar && i < E.nmb && E.mb[i].off != o; i++)
		;
	if (bar && (i == E.nmb || E.mb[i].vis == NOVIS || t->clseen <= E.mb[i].vis)) {
		fail("thread %d of cluster rank %d: %s on the mbarrier at shared offset %ld of rank %d, %s", t->lin,
		     self, what, o, r, i == E.nmb ? "where none was initialised"
		     : "whose initialisation is not ordered before it (fence.mbarrier_init.release.cluster, then "
		       "a barrier.cluster that this thread waited for)");
		cta_enter(self);
		return -1;
	}
	E.clneed = MAX(E.clneed, t->clarr + 1);
	return 0;
}

/* %cluster_nctarank != n: the GPU traps */
void
moec_emu_cluster_check(int32_t n)
{
	if (n == CL.n)
		return;
	fail("thread %d of CTA (%d,%d,%d): the kernel runs in clusters of %d, launched in clusters of %d (trap)",
	     E.cur->lin, E.cta[0], E.cta[1], E.cta[2], n, CL.n);
	abandon();
}

/* barrier.cluster.arrive: the phase completes when every thread of the cluster has arrived */
void
moec_emu_cluster_arrive(void)
{
	Thr *t = E.cur;

	if (t->clarr > t->clseen) {
		fail("thread %d of CTA (%d,%d,%d): barrier.cluster.arrive twice without a wait between",
		     t->lin, E.cta[0], E.cta[1], E.cta[2]);
		abandon();
	}
	t->clarr++;
	if (++CL.arrived == (uint32_t)(CL.n * E.nthr)) {
		CL.arrived = 0;
		CL.done++;
	}
}

void
moec_emu_cluster_wait(void)
{
	Thr *t = E.cur;

	if (t->clarr == t->clseen) {
		fail("thread %d of CTA (%d,%d,%d): barrier.cluster.wait without an arrive", t->lin, E.cta[0],
		     E.cta[1], E.cta[2]);
		abandon();
	}
	t->clw = 1;
	while (CL.done < t->clarr)
		yield(T_SPIN);
	t->clw = 0;
	t->clseen = t->clarr;
	E.woke = 1;
}

/* fence.mbarrier_init.release.cluster: the thread's initialised barriers, to
 * the peers that wait for the cluster phase it arrives at next */
void
moec_emu_mbar_init_fence(void)
{
	for (int i = 0; i < E.nmb; i++)
		if (E.mb[i].by == E.cur->lin && E.mb[i].vis == NOVIS)
			E.mb[i].vis = E.cur->clarr;
}

/* mapa + mbarrier.arrive.shared::cluster: arrive on the barrier at p's offset in CTA rank */
void
moec_emu_mbar_arrive_cluster(void *p, int32_t rank)
{
	long o = (long)((unsigned char *)p - E.smem);
	int self = E.rank;

	if (peer_enter(rank, o, 1, "mbarrier.arrive.shared::cluster") < 0)
		abandon();
	moec_emu_mbar_arrive(E.smem + o, -1);
	cta_enter(self);
}

/*
 * cp.async.bulk.tensor ... .multicast::cluster: the box to the same shared
 * offset of every CTA of mask, complete_tx on each one's barrier at mbar's
 * offset.
 */
void
moec_emu_tma_load_multicast(void *dst, const void *map, void *mbar, int32_t c0, int32_t c1, int32_t c2,
			    int32_t mask)
{
	long o = (long)((unsigned char *)dst - E.smem), ob = (long)((unsigned char *)mbar - E.smem);
	int self = E.rank;

	if (mask <= 0 || mask >= 1 << CL.n) {
		fail("thread %d of CTA (%d,%d,%d): cp.async.bulk.tensor .multicast::cluster to CTA mask 0x%x, in "
		     "a cluster of %d", E.cur->lin, E.cta[0], E.cta[1], E.cta[2], (unsigned)mask, CL.n);
		abandon();
	}
	for (int r = 0; r < CL.n; r++) {
		if (!(mask >> r & 1))
			continue;
		if (peer_enter(r, ob, 1, "cp.async.bulk.tensor .multicast::cluster") < 0)
			abandon();
		moec_emu_tma_load(E.smem + o, map, E.smem + ob, c0, c1, c2);
		cta_enter(self);
	}
}

float moec_emu_exp2(float x) { return exp2f(x); }
/* rcp.approx.ftz.f32: 1/x rounded to nearest (the GPU's is within an ulp of
 * it; cg_fdiv_fast's sequence is exact from this one), a subnormal x as 0 */
float moec_emu_rcp(float x) { return 1.0f / (fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x); }
int32_t moec_emu_f32_to_bf16(float x) { return f32_to_bf16(x); }
int32_t moec_emu_f32_to_f16(float x) { return f32_to_f16(x); }

int32_t
moec_emu_f32_to_tf32(float x)
{
	float r = f32_to_tf32(x);
	int32_t u;

	memcpy(&u, &r, 4);
	return u;
}
float moec_emu_f16_to_f32(int32_t h) { return f16_to_f32((uint16_t)h); }

/* fma.rn.bf16x2 / f16x2: each half in double, then rounded (through f32: exact
 * where the result is exact in f32, as for the dequantisation's products) */
int32_t
moec_emu_fma16x2(int32_t bf, int32_t a, int32_t b, int32_t c)
{
	uint32_t r = 0;

	for (int h = 0; h < 2; h++) {
		uint16_t x = (uint16_t)((uint32_t)a >> 16 * h), y = (uint16_t)((uint32_t)b >> 16 * h);
		uint16_t z = (uint16_t)((uint32_t)c >> 16 * h);
		double v = bf ? (double)bf16_to_f32(x) * bf16_to_f32(y) + bf16_to_f32(z)
			      : (double)f16_to_f32(x) * f16_to_f32(y) + f16_to_f32(z);
		r |= (uint32_t)(bf ? f32_to_bf16((float)v) : f32_to_f16((float)v)) << 16 * h;
	}
	return (int32_t)r;
}

/* max.bf16x2: each half the larger, the non-NaN one when one is NaN (fmaxf) */
int32_t
moec_emu_max_bf16x2(int32_t a, int32_t b)
{
	uint32_t r = 0;

	for (int h = 0; h < 2; h++) {
		uint16_t x = (uint16_t)((uint32_t)a >> 16 * h), y = (uint16_t)((uint32_t)b >> 16 * h);
		float fx = bf16_to_f32(x), fy = bf16_to_f32(y);
		r |= (uint32_t)(isnan(fx) ? y : isnan(fy) ? x : fx >= fy ? x : y) << 16 * h;
	}
	return (int32_t)r;
}

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
 * A tf32 operand: f32 bits whose low 13 bits are 0.  The PTX ISA leaves
 * other bits to the implementation, so a builder that does not round its
 * operands (cvt.rna.tf32.f32) is a diagnostic here.
 */
static double
tf32_val(uint32_t reg, int lane, int warp)
{
	float x;

	if (reg & 0x1fff)
		fail("mma tf32: lane %d of warp %d: operand 0x%08x is not a tf32 (cvt.rna.tf32.f32 first)",
		     lane, warp, reg);
	memcpy(&x, &reg, 4);
	return x;
}

/*
 * mma.m16n8k16.row.col f32 += {bf16,f16} (kind 0, 1): g = l/4, t = l%4.
 * A regs: (g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..);
 * B regs: (k 2t.., n g), (k 2t+8.., n g); C/D: (g, 2t..), (g+8, 2t..).
 * mma.m16n8k8.row.col f32 += tf32 (kind 2): one element per register,
 * A (g, t), (g+8, t), (g, t+4), (g+8, t+4); B (k t, n g), (k t+4, n g).
 */
__attribute__((noinline)) static void
do_mma(Thr *w)
{
	double A[16][16], B[16][8], C[16][8];
	int kind = w[0].ci, K = kind == 2 ? 8 : 16;

	for (int l = 0; l < 32; l++) {
		const uint32_t *ab = w[l].cp[0];
		const float *cd = w[l].cp[1];
		int g = l / 4, t = l % 4;
		for (int e = 0; e < 2; e++) {
			C[g][2 * t + e] = cd[e];
			C[g + 8][2 * t + e] = cd[2 + e];
		}
		if (kind == 2) {
			for (int q = 0; q < 4; q++)
				A[g + (q & 1) * 8][t + (q >> 1) * 4] = tf32_val(ab[q], l, w[0].lin / 32);
			for (int q = 0; q < 2; q++)
				B[t + 4 * q][g] = tf32_val(ab[4 + q], l, w[0].lin / 32);
			continue;
		}
		for (int e = 0; e < 2; e++) {
			A[g][2 * t + e] = half_val(ab[0], e, kind);
			A[g + 8][2 * t + e] = half_val(ab[1], e, kind);
			A[g][2 * t + 8 + e] = half_val(ab[2], e, kind);
			A[g + 8][2 * t + 8 + e] = half_val(ab[3], e, kind);
			B[2 * t + e][g] = half_val(ab[4], e, kind);
			B[2 * t + 8 + e][g] = half_val(ab[5], e, kind);
		}
	}
	for (int l = 0; l < 32; l++) {
		float *cd = w[l].cp[1];
		int g = l / 4, t = l % 4;
		for (int q = 0; q < 4; q++) {
			int r = g + (q >= 2 ? 8 : 0), c = 2 * t + (q & 1);
			double s = C[r][c];
			for (int k = 0; k < K; k++)
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

__attribute__((noinline)) static void
do_shfl_xor(Thr *w)
{
	int32_t v[32];

	for (int l = 0; l < 32; l++)
		v[l] = *(int32_t *)w[l].cp[0];
	for (int l = 0; l < 32; l++)
		*(int32_t *)w[l].cp[0] = v[(l ^ w[0].ci) & 31];
}

/* match.any.sync.b32: each lane gets the mask of the lanes holding its value */
__attribute__((noinline)) static void
do_match_any(Thr *w)
{
	int32_t v[32];

	for (int l = 0; l < 32; l++)
		v[l] = *(int32_t *)w[l].cp[0];
	for (int l = 0; l < 32; l++) {
		uint32_t m = 0;
		for (int j = 0; j < 32; j++)
			m |= (uint32_t)(v[j] == v[l]) << j;
		*(int32_t *)w[l].cp[0] = (int32_t)m;
	}
}

/* redux.sync.max.u32: every lane gets the warp's largest value, unsigned */
__attribute__((noinline)) static void
do_redux_umax(Thr *w)
{
	uint32_t m = 0;

	for (int l = 0; l < 32; l++)
		m = MAX(m, *(uint32_t *)w[l].cp[0]);
	for (int l = 0; l < 32; l++)
		*(uint32_t *)w[l].cp[0] = m;
}

__attribute__((noinline)) static void
do_vote_any(Thr *w)
{
	int32_t any = 0;

	for (int l = 0; l < 32; l++)
		any |= *(int32_t *)w[l].cp[0] != 0;
	for (int l = 0; l < 32; l++)
		*(int32_t *)w[l].cp[0] = any;
}

/* ---- wgmma, from the PTX ISA's shared-memory matrix layouts ---- */

/*
 * A matrix descriptor: start address, leading and stride byte offsets
 * (bits 0-13, 16-29, 32-45, each the byte value >> 4), base offset (49-51),
 * swizzle (62-63: 0 none, 1 128-byte, 2 64-byte, 3 32-byte).
 */
typedef struct {
	uint32_t start, lbo, sbo;
	int swz, bytes;		/* swizzle mode; its row width in bytes (16: none) */
} Desc;

static int
desc_decode(uint64_t d, Desc *o, const char *which)
{
	static const int width[4] = {16, 128, 64, 32};

	o->start = (uint32_t)(d & 0x3fff) << 4;
	o->lbo = (uint32_t)(d >> 16 & 0x3fff) << 4;
	o->sbo = (uint32_t)(d >> 32 & 0x3fff) << 4;
	o->swz = (int)(d >> 62 & 3);
	o->bytes = width[o->swz];
	if (d >> 49 & 7) {
		fail("wgmma: descriptor %s has base offset %d (only 0 is emulated)", which, (int)(d >> 49 & 7));
		return -1;
	}
	return 0;
}

/*
 * The 18-bit shared address of element (r, k) of an operand of esz bytes
 * (2: bf16/f16, k 0..15; 1: e4m3, k 0..31, K-major only), r along M (or
 * N), with T = 16/esz elements per 16 bytes.  CuTe
 * notation, from the PTX ISA's canonical layouts (x = swizzle bytes / 16):
 *	K-major, none:       ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
 *	K-major, swizzled:   ((8,m),(T,2k)) : ((xT,SBO),(1,T))
 *	MN-major, none:      ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
 *	MN-major, swizzled:  ((T,x,m),(8,k)) : ((1,T,LBO),(xT,SBO))
 * then Swizzle<log2 x, 4, 3> on the byte address: bits 7.. xor into bits 4..
 */
static uint32_t
elem_addr(const Desc *d, int mn_major, int r, int k, int esz)
{
	uint32_t off, a;
	int bits = d->swz == 1 ? 3 : d->swz == 2 ? 2 : d->swz == 3 ? 1 : 0, T = 16 / esz;

	if (!mn_major) {
		if (!d->swz)
			off = (uint32_t)(r % 8 * 16 + r / 8 * (int)d->sbo + k % T * esz + k / T * (int)d->lbo);
		else
			off = (uint32_t)(r % 8 * d->bytes + r / 8 * (int)d->sbo + k * esz);
	} else {
		if (!d->swz) {
			off = (uint32_t)(r % 8 * 2 + r / 8 * (int)d->sbo + k % 8 * 16 + k / 8 * (int)d->lbo);
		} else {
			int w = d->bytes / 2;	/* elements per swizzle row */
			off = (uint32_t)(r % w * 2 + r / w * (int)d->lbo + k % 8 * d->bytes + k / 8 * (int)d->sbo);
		}
	}
	a = (d->start + off) & 0x3ffff;
	return a ^ ((a >> 7 & ((1u << bits) - 1)) << 4);
}

/* The host offset of an 18-bit shared address, or -1 outside the CTA's shared memory. */
static long
shared_off(uint32_t a, int bytes)
{
	uint32_t base = (uint32_t)((uintptr_t)E.smem & 0x3ffff);
	long o = (long)((a - base) & 0x3ffff);

	return (size_t)o + (size_t)bytes <= E.smem_bytes ? o : -1;
}

/* Read one operand element (kind: 0 bf16, 1 f16, 2 e4m3), checking bounds,
 * alignment and the proxy fence. */
static int
operand(WgOp *op, uint32_t a, int kind, double sc, double *v, const char *which)
{
	int esz = kind == 2 ? 1 : 2;
	long o = shared_off(a, esz);

	if (o < 0 || a % (uint32_t)esz) {
		fail("wgmma: operand %s reads shared address 0x%x, outside the CTA's %zu bytes or misaligned",
		     which, a, E.smem_bytes);
		return -1;
	}
	for (int i = 0; i < esz; i++) {
		int w = E.owner[o + i], b = E.abar[o + i], gen = E.agen[o + i];
		if (b && (b != E.chk_b || E.aphase[o + i] != E.chk_p || gen != E.chk_g)) {
			for (int t = 0; t < 128; t++) {
				if (async_read_ok(&E.wgthr[t], (size_t)o + (size_t)i, 1, "wgmma") < 0)
					return -1;
				if (gen && E.wgthr[t].fseen[b - 1] < E.aphase[o + i]) {
					fail("wgmma: operand %s reads shared offset %ld, written by cp.async through the "
					     "mbarrier at offset %ld, with no fence.proxy.async by thread %d after its wait",
					     which, o + i, E.mb[b - 1].off, E.wgthr[t].lin);
					return -1;
				}
			}
			E.chk_b = b;
			E.chk_g = gen;
			E.chk_p = E.aphase[o + i];
		}
		if (w && E.thr[w - 1].nfence == E.epoch[o + i]) {
			fail("wgmma: operand %s reads shared offset %ld, written by thread %d through the "
			     "generic proxy with no fence.proxy.async after it", which, o + i, w - 1);
			return -1;
		}
		op->rd[op->nrd++] = (uint32_t)(o + i);
		E.rd[o + i]++;
	}
	*v = sc * (kind == 2 ? f8e4m3_to_f32(E.smem[o]) : kind ? f16_to_f32(ld16(E.smem + o))
							       : bf16_to_f32(ld16(E.smem + o)));
	return 0;
}

/* Resolve wgmma.mma_async for the 128 threads of a warpgroup. */
__attribute__((noinline)) static void
do_wgmma(Thr *w, Wg *g)
{
	int kind = w[0].ci, N = kind & 511, f16 = kind >> 9 & 1, ta = kind >> 10 & 1, tb = kind >> 11 & 1;
	double sa = kind >> 12 & 1 ? -1 : 1, sb = kind >> 13 & 1 ? -1 : 1;
	int e4m3 = kind >> 14 & 1, ty = e4m3 ? 2 : f16, esz = e4m3 ? 1 : 2, KD = e4m3 ? 32 : 16;
	int scale_d = (int)w[0].u[2], n = N / 2;
	static double A[64][32], Bm[32][256];
	Desc da, db;
	WgOp *op;

	if (N < 8 || N > 256 || N % 8) {
		fail("wgmma: n = %d", N);
		return;
	}
	if (e4m3 && (ta || tb)) {	/* the PTX ISA: 8-bit operands are K-major only */
		fail("wgmma: e4m3 operands transposed (only K-major is allowed)");
		return;
	}
	for (int t = 1; t < 128; t++)
		if (w[t].u[0] != w[0].u[0] || w[t].u[1] != w[0].u[1] || w[t].u[2] != w[0].u[2]) {
			fail("wgmma: thread %d of the warpgroup gives other descriptors or scale-d than thread 0",
			     w[t].lin);
			return;
		}
	if (g->nop == WG_MAXOPS) {
		fail("wgmma: more than %d operations in flight", WG_MAXOPS);
		return;
	}
	if (desc_decode(w[0].u[0], &da, "A") < 0 || desc_decode(w[0].u[1], &db, "B") < 0)
		return;
	E.wgthr = w;
	E.chk_b = E.chk_g = 0;
	op = &g->op[g->nop];
	op->grp = -1;
	op->n = n;
	op->val = xmalloc(sizeof(float) * 128 * (size_t)n);
	op->rd = xmalloc(sizeof(uint32_t) * 2 * (64 * 16 + 16 * (size_t)N));	/* KD * esz = 32 bytes a row */
	op->nrd = 0;
	for (int r = 0; r < 64; r++)
		for (int k = 0; k < KD; k++)
			if (operand(op, elem_addr(&da, ta, r, k, esz), ty, sa, &A[r][k], "A") < 0)
				goto bad;
	for (int c = 0; c < N; c++)
		for (int k = 0; k < KD; k++)
			if (operand(op, elem_addr(&db, tb, c, k, esz), ty, sb, &Bm[k][c], "B") < 0)
				goto bad;
	for (int t = 0; t < 128; t++) {
		float *acc = w[t].cp[0];
		const float *in = acc;
		/* an accumulator still in flight passes through (same shape only) */
		for (int j = g->nop - 1; j >= 0; j--) {
			const WgOp *p = &g->op[j];
			if (p->dst[t] == acc && p->n == n) {
				in = p->val + (size_t)t * (size_t)n;
				break;
			}
			if (p->dst[t] < acc + n && acc < p->dst[t] + p->n) {
				fail("wgmma: thread %d: accumulators overlap those of an in-flight wgmma of "
				     "another shape", w[t].lin);
				goto bad;
			}
		}
		op->dst[t] = acc;
		for (int i = 0; i < n; i++) {
			/* row = 16 warp + lane/4 (+8), col = 8 (i/4) + 2 (lane%4) + i%2 */
			int l = t % 32, row = 16 * (t / 32) + l / 4 + 8 * (i % 4 / 2);
			int col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
			double s = scale_d ? in[i] : 0;
			for (int k = 0; k < KD; k++)
				s += A[row][k] * Bm[k][col];
			op->val[(size_t)t * (size_t)n + (size_t)i] = (float)s;
		}
	}
	g->nop++;
	return;
bad:
	for (int i = 0; i < op->nrd; i++)
		E.rd[op->rd[i]]--;
	free(op->val);
	free(op->rd);
}

/* Retire the operations of committed groups older than the newest n. */
static void
wg_retire(Wg *g, int n)
{
	int k = 0;

	for (int j = 0; j < g->nop; j++) {
		WgOp *op = &g->op[j];
		if (op->grp < 0 || op->grp >= g->ncommit - n) {
			g->op[k++] = *op;
			continue;
		}
		for (int t = 0; t < 128; t++)
			memcpy(op->dst[t], op->val + (size_t)t * (size_t)op->n, sizeof(float) * (size_t)op->n);
		for (int i = 0; i < op->nrd; i++)
			E.rd[op->rd[i]]--;
		free(op->val);
		free(op->rd);
	}
	g->nop = k;
}

static long nwgmma;	/* cg_emu_wgmma_count */

long
cg_emu_wgmma_count(void)
{
	return nwgmma;
}

static void
do_wg(Thr *w, int wg)
{
	Wg *g = &E.wg[wg];

	switch (w[0].coll) {
	case C_WGMMA:
		do_wgmma(w, g);
		nwgmma++;
		break;
	case C_WG_FENCE:
		break;
	case C_WG_COMMIT:
		for (int j = 0; j < g->nop; j++)
			if (g->op[j].grp < 0)
				g->op[j].grp = g->ncommit;
		g->ncommit++;
		break;
	case C_WG_WAIT:
		wg_retire(g, w[0].ci);
		break;
	case C_SETMAXNREG:	/* the pool: regs_step, before */
		break;
	}
}

/*
 * setmaxnreg of warpgroup g (code: inc << 16 | count) on the CTA's pool:
 * 1 once done, 0 while a .inc waits for registers (or after a failure).
 */
static int
regs_step(int g, int code)
{
	Wg *w = &E.wg[g];
	int inc = code >> 16, n = code & 0xffff;

	if (!E.maxnreg) {
		fail("warpgroup %d: setmaxnreg in a kernel whose registers at entry are not pinned (.maxnreg): "
		     "ptxas may ignore it or start its threads with fewer registers than the split needs", g);
		return 0;
	}
	if (inc ? n < w->regs : n > w->regs) {
		fail("warpgroup %d: setmaxnreg.%s %d with %d registers per thread", g, inc ? "inc" : "dec", n,
		     w->regs);
		return 0;
	}
	if ((n - w->regs) * 128 > E.pool)
		return 0;	/* blocks until another warpgroup gives some back */
	E.pool -= (n - w->regs) * 128;
	w->regs = n;
	return 1;
}

/* The warpgroup blocked at setmaxnreg.inc, or -1. */
static int
regs_blocked(void)
{
	for (int g = 0; g < E.nthr / 128; g++) {
		Thr *t = &E.thr[g * 128];
		int all = 1;
		for (int i = 0; i < 128 && all; i++)
			all = t[i].state == T_COLL && t[i].coll == C_SETMAXNREG && t[i].ci == t[0].ci;
		if (all && t[0].ci >> 16)
			return g;
	}
	return -1;
}

/* At the CTA's end: every mbarrier and named barrier phase begun was completed. */
static int
mbar_all_settled(void)
{
	for (int i = 1; i < NAMED_BARS; i++)
		if (E.nb[i].arrived) {
			fail("the CTA exits with named barrier %d partly arrived (%d of %d threads): a bar.arrive "
			     "or bar.sync without its partners", i, E.nb[i].arrived, E.nb[i].count);
			return 0;
		}
	for (int i = 0; i < E.nmb; i++) {
		const Mbar *b = &E.mb[i];
		if (b->pending != b->count || b->tx != 0) {
			fail("the CTA exits with phase %u of the mbarrier at offset %ld partly arrived (%d of its "
			     "%d arrivals, %lld transaction bytes outstanding): an arrival missing, or one too many",
			     b->done, b->off, b->count - b->pending, b->count, (long long)b->tx);
			return 0;
		}
	}
	return 1;
}

/* ---- the scheduler ---- */

static void
thr_main(void)
{
	E.fn(E.args);
	if (E.cur->nbs)
		fail("thread %d of CTA (%d,%d,%d) exits with %d TMA stores whose shared reads no "
		     "cp.async.bulk.wait_group.read waited for", E.cur->lin, E.cta[0], E.cta[1], E.cta[2],
		     E.cur->nbs);
	E.cur->state = T_DONE;
}

/* A thread that starts in thr_main on stack[0, size) and, when it returns,
 * switches to the scheduler for good. */
#ifdef EMU_UCONTEXT
static void
ctx_make(Ctx *c, char *stack, size_t size)
{
	getcontext(c);
	c->uc_stack.ss_sp = stack;
	c->uc_stack.ss_size = size;
	c->uc_link = &E.sched;
	makecontext(c, thr_main, 0);
}
#else
static _Noreturn void
thr_entry(void)
{
#ifdef EMU_ASAN
	__sanitizer_finish_switch_fiber(NULL, &E.sched.bottom, &E.sched.size);
#endif
	thr_main();
	ctx_leave(&E.cur->ctx, &E.sched, 0);
}

/* The frame cg_emu_ctx_switch pops, from the top: no return address for
 * thr_entry, thr_entry as the one `ret` takes (16-byte aligned, as after a
 * call), six registers, MXCSR and the x87 control word as they are now. */
static void
ctx_make(Ctx *c, char *stack, size_t size)
{
	uint64_t *sp = (uint64_t *)(((uintptr_t)stack + size) & ~(uintptr_t)15);
	uint32_t csr;
	uint16_t cw;

	__asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(csr), "=m"(cw));
	*--sp = 0;
	*--sp = (uint64_t)(uintptr_t)thr_entry;
	for (int i = 0; i < 6; i++)
		*--sp = 0;
	*--sp = csr | (uint64_t)cw << 32;
	c->sp = sp;
	c->bottom = stack;
	c->size = size;
#ifdef EMU_ASAN
	if (c->abandoned)	/* the redzones of its frames */
		ASAN_UNPOISON_MEMORY_REGION(stack, size);
#endif
	c->abandoned = 0;
}
#endif

/* Resolve the collective of warpgroup g (threads 128g..) once all its threads are at it. */
static int
wg_step(int g)
{
	Thr *t = &E.thr[g * 128];

	if (t[0].state != T_COLL || t[0].coll < C_WGMMA)
		return 0;
	for (int i = 1; i < 128; i++) {
		if (t[i].state == T_DONE) {
			fail("warpgroup %d: wgmma collective with exited threads", g);
			return 0;
		}
		if (t[i].state != T_COLL)
			return 0;
		if (t[i].coll != t[0].coll || t[i].ci != t[0].ci) {
			fail("warpgroup %d: divergent warpgroup collective (thread %d at %d/%d, thread %d at %d/%d)",
			     g, t[0].lin, t[0].coll, t[0].ci, t[i].lin, t[i].coll, t[i].ci);
			return 0;
		}
	}
	if (t[0].coll == C_SETMAXNREG && !regs_step(g, t[0].ci))
		return 0;
	do_wg(t, g);
	for (int i = 0; i < 128; i++)
		t[i].state = T_RUN;
	return 1;
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
	if (lane[0].coll >= C_WGMMA)
		return 0;	/* a warpgroup's: wg_step */
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
	else if (lane[0].coll == C_ELECT)
		for (int l = 0; l < 32; l++)
			*(int32_t *)lane[l].cp[0] = l == 0;
	else if (lane[0].coll == C_VOTE_ANY)
		do_vote_any(lane);
	else if (lane[0].coll == C_MATCH_ANY)
		do_match_any(lane);
	else if (lane[0].coll == C_REDUX_UMAX)
		do_redux_umax(lane);
	else if (lane[0].coll == C_SHFL_XOR)
		do_shfl_xor(lane);
	else
		do_shfl_up(lane);
	for (int l = 0; l < 32; l++)
		lane[l].state = T_RUN;
	return 1;
}

/* The current CTA's shared memory, barriers and threads as at its launch. */
static void
cta_start(void)
{
	int n = E.nthr;

	memset(E.smem, 0xff, E.smem_bytes);
	memset(E.owner, 0, E.smem_bytes * sizeof *E.owner);
	memset(E.rd, 0, E.smem_bytes * sizeof *E.rd);
	memset(E.abar, 0, E.smem_bytes * sizeof *E.abar);
	memset(E.isbar, 0, E.smem_bytes);
	memset(E.agen, 0, E.smem_bytes);
	memset(E.srd, 0, E.smem_bytes * sizeof *E.srd);
	E.nmb = 0;
	E.nbulk = 0;
	E.exited = 0;
	E.clneed = 0;
	memset(E.nb, 0, sizeof E.nb);
	for (int i = 0; i < n / 128; i++) {
		E.wg[i].nop = E.wg[i].ncommit = 0;
		E.wg[i].regs = E.maxnreg;
	}
	E.pool = 0;
	for (int i = 0; i < n; i++) {
		Thr *t = &E.thr[i];
		t->lin = i;
		t->tid[0] = i % E.block[0];
		t->tid[1] = i / E.block[0] % E.block[1];
		t->tid[2] = i / (E.block[0] * E.block[1]);
		t->state = T_RUN;
		t->nq = t->open = 0;
		t->nfence = 0;
		t->nbw = 0;
		t->nbs = t->bgrp = 0;
		t->clarr = t->clseen = 0;
		t->clw = 0;
		memset(t->seen, 0, sizeof t->seen);
		memset(t->fseen, 0, sizeof t->fseen);
		ctx_make(&t->ctx, t->stack, STACK);
	}
}

/*
 * Every thread of the CTA has exited: nothing may be left in flight, and
 * (in a cluster) no peer may still reach its shared memory: each remote
 * operation into it must precede a cluster phase its threads waited for.
 */
static int
cta_exit(void)
{
	uint32_t seen = 0;

	for (int g = 0; g < E.nthr / 128; g++)
		if (E.wg[g].nop) {
			fail("warpgroup %d ends with %d wgmma operations not retired by wgmma.wait_group", g,
			     E.wg[g].nop);
			return -1;
		}
	if (!mbar_all_settled())
		return -1;
	for (int i = 0; i < E.nthr; i++)
		seen = MAX(seen, E.thr[i].clseen);
	if (E.clneed > seen) {
		fail("cluster rank %d exits while a peer may still arrive on its mbarriers or copy into its shared "
		     "memory (no barrier.cluster after the peer's last such operation: it needs %u cluster phases, "
		     "its threads waited for %u)", E.rank, E.clneed, seen);
		return -1;
	}
	E.exited = 1;
	return 0;
}

/*
 * One round of the current CTA: its threads run until each blocks or
 * exits, its copies land, its collectives and barriers resolve.  1 if it
 * progressed (or exited), 0 if not, -1 on a failure.
 */
static int
cta_round(void)
{
	int n = E.nthr, nbar = 0, ndone = 0, progress = 0;

	E.woke = 0;
	for (int i = 0; i < n && !E.failed; i++) {
		int was = E.thr[i].state;
		if (was == T_RUN || was == T_SPIN) {
			E.cur = &E.thr[i];
			ctx_swap(&E.sched, &E.thr[i].ctx);
			if (E.failed)
				break;
			/* a spinning thread that still spins did nothing (one that
			 * passed its wait and waits again set E.woke) */
			progress |= was == T_RUN || E.thr[i].state != T_SPIN;
		}
	}
	if (E.failed)
		return -1;
	progress |= E.woke;
	progress |= land_bulk() > 0;
	if (E.failed)
		return -1;
	for (int w = 0; w < n / 32; w++)
		progress |= warp_step(w);
	for (int g = 0; g < n / 128 && !E.failed; g++)
		progress |= wg_step(g);
	if (E.failed)
		return -1;
	for (int i = 0; i < n; i++) {
		nbar += E.thr[i].state == T_BAR;
		ndone += E.thr[i].state == T_DONE;
	}
	if (ndone == n)
		return cta_exit() < 0 ? -1 : 1;
	if (!progress && nbar && nbar + ndone == n) {
		if (ndone) {
			fail("barrier reached by %d threads while %d have exited", nbar, ndone);
			return -1;
		}
		for (int i = 0; i < n; i++)
			E.thr[i].state = T_RUN;
		progress = 1;
	}
	return progress;
}

/* The current CTA's threads wait for what never comes: say what they wait for. */
static void
deadlock(void)
{
	int n = E.nthr, nbar = 0, ndone = 0, nspin = 0, nnamed = 0, ncl = 0;
	char where[64] = "";

	for (int i = 0; i < n; i++) {
		nbar += E.thr[i].state == T_BAR;
		ndone += E.thr[i].state == T_DONE;
		nspin += E.thr[i].state == T_SPIN && !E.thr[i].nbw && !E.thr[i].clw;
		nnamed += E.thr[i].state == T_SPIN && E.thr[i].nbw;
		ncl += E.thr[i].state == T_SPIN && E.thr[i].clw;
	}
	if (CL.n > 1)
		snprintf(where, sizeof where, " (cluster rank %d; %d at barrier.cluster.wait)", E.rank, ncl);
	if (regs_blocked() >= 0) {
		int g = regs_blocked(), want = E.thr[g * 128].ci & 0xffff;
		fail("deadlock: setmaxnreg.inc %d of warpgroup %d waits for %d registers, the CTA's pool has "
		     "%d (%d per thread at entry x %d threads, less what the warpgroups hold)%s", want, g,
		     (want - E.wg[g].regs) * 128, E.pool, E.maxnreg, n, where);
	} else if (nnamed) {
		int i = 0;
		while (!E.thr[i].nbw)
			i++;
		fail("deadlock: %d threads wait at named barriers (thread %d at bar.sync %d: %d of %d "
		     "arrived), %d at a barrier, %d on mbarriers, %d exited%s", nnamed, i, E.thr[i].nbw,
		     E.nb[E.thr[i].nbw].arrived, E.nb[E.thr[i].nbw].count, nbar, nspin, ndone, where);
	} else {
		fail("deadlock: %d threads at a barrier, %d waiting on mbarriers, %d exited, the rest "
		     "at collectives%s", nbar, nspin, ndone, where);
	}
}

/*
 * The CTAs of one cluster (E.cta set in each), starting with rank `first`:
 * each CTA runs rounds until it can go no further alone (or exits), then
 * the next.  A CTA running as far ahead of its peers as their barriers let
 * it is the schedule that shows a missing one: its copies into a peer's
 * stage land before the peer has read it.  No CTA progressing in a turn of
 * them all is a deadlock (reported for the first still running).
 */
static int
run_cluster(int first)
{
	CL.arrived = CL.done = 0;
	for (int r = 0; r < CL.n; r++) {
		cta_enter(r);
		cta_start();
	}
	for (;;) {
		int progress = 0, live = 0;
		for (int i = 0; i < CL.n; i++) {
			int p = 0;
			cta_enter((first + i) % CL.n);
			while (!E.exited && (p = cta_round()) > 0)
				progress = 1;
			if (p < 0)
				return -1;
			live += !E.exited;
		}
		if (!live)
			break;
		if (!progress) {
			for (int i = 0; i < CL.n; i++) {
				cta_enter((first + i) % CL.n);
				if (!E.exited)
					break;
			}
			deadlock();
			return -1;
		}
	}
	if (CL.arrived) {
		fail("the cluster ends with a barrier.cluster phase partly arrived (%u of %d threads)", CL.arrived,
		     CL.n * E.nthr);
		return -1;
	}
	return 0;
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
	{"moec_emu_bar_named", (void *)moec_emu_bar_named},
	{"moec_emu_cp_async", (void *)moec_emu_cp_async},
	{"moec_emu_cp_async_src", (void *)moec_emu_cp_async_src},
	{"moec_emu_cp_commit", (void *)moec_emu_cp_commit},
	{"moec_emu_cp_wait", (void *)moec_emu_cp_wait},
	{"moec_emu_ldmatrix", (void *)moec_emu_ldmatrix},
	{"moec_emu_mma", (void *)moec_emu_mma},
	{"moec_emu_shfl_up", (void *)moec_emu_shfl_up},
	{"moec_emu_shfl_xor", (void *)moec_emu_shfl_xor},
	{"moec_emu_wgmma", (void *)moec_emu_wgmma},
	{"moec_emu_wg_fence", (void *)moec_emu_wg_fence},
	{"moec_emu_wg_commit", (void *)moec_emu_wg_commit},
	{"moec_emu_wg_wait", (void *)moec_emu_wg_wait},
	{"moec_emu_fence_proxy_async", (void *)moec_emu_fence_proxy_async},
	{"moec_emu_mbar_init", (void *)moec_emu_mbar_init},
	{"moec_emu_mbar_arrive", (void *)moec_emu_mbar_arrive},
	{"moec_emu_cp_mbar_arrive", (void *)moec_emu_cp_mbar_arrive},
	{"moec_emu_bulk_load", (void *)moec_emu_bulk_load},
	{"moec_emu_mbar_wait", (void *)moec_emu_mbar_wait},
	{"moec_emu_tma_load", (void *)moec_emu_tma_load},
	{"moec_emu_tma_store", (void *)moec_emu_tma_store},
	{"moec_emu_bulk_commit", (void *)moec_emu_bulk_commit},
	{"moec_emu_bulk_wait_read", (void *)moec_emu_bulk_wait_read},
	{"moec_emu_elect", (void *)moec_emu_elect},
	{"moec_emu_vote_any", (void *)moec_emu_vote_any},
	{"moec_emu_redux_umax", (void *)moec_emu_redux_umax},
	{"moec_emu_match_any", (void *)moec_emu_match_any},
	{"moec_emu_setmaxnreg", (void *)moec_emu_setmaxnreg},
	{"moec_emu_cluster_check", (void *)moec_emu_cluster_check},
	{"moec_emu_cluster_arrive", (void *)moec_emu_cluster_arrive},
	{"moec_emu_cluster_wait", (void *)moec_emu_cluster_wait},
	{"moec_emu_mbar_init_fence", (void *)moec_emu_mbar_init_fence},
	{"moec_emu_mbar_arrive_cluster", (void *)moec_emu_mbar_arrive_cluster},
	{"moec_emu_tma_load_multicast", (void *)moec_emu_tma_load_multicast},
	{"moec_emu_exp2", (void *)moec_emu_exp2},
	{"moec_emu_rcp", (void *)moec_emu_rcp},
	{"moec_emu_f32_to_bf16", (void *)moec_emu_f32_to_bf16},
	{"moec_emu_f32_to_f16", (void *)moec_emu_f32_to_f16},
	{"moec_emu_f32_to_tf32", (void *)moec_emu_f32_to_tf32},
	{"moec_emu_f16_to_f32", (void *)moec_emu_f16_to_f32},
	{"moec_emu_fma16x2", (void *)moec_emu_fma16x2},
	{"moec_emu_max_bf16x2", (void *)moec_emu_max_bf16x2},
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

/* The current CTA's shared memory and the emulator's records of it. */
static void
cta_alloc(void)
{
	E.smem_raw = xmalloc(E.smem_bytes + 2048);
	E.smem = E.smem_raw + ((1024 - (uintptr_t)E.smem_raw % 1024) % 1024) + SMEM_SKEW;
	E.owner = xmalloc((E.smem_bytes + 1) * sizeof *E.owner);
	E.rd = xmalloc((E.smem_bytes + 1) * sizeof *E.rd);
	E.epoch = xmalloc((E.smem_bytes + 1) * sizeof *E.epoch);
	E.abar = xmalloc((E.smem_bytes + 1) * sizeof *E.abar);
	E.aphase = xmalloc((E.smem_bytes + 1) * sizeof *E.aphase);
	E.isbar = xmalloc(E.smem_bytes + 1);
	E.agen = xmalloc(E.smem_bytes + 1);
	E.srd = xmalloc((E.smem_bytes + 1) * sizeof *E.srd);
	E.wg = xcalloc((size_t)(E.nthr / 128 + 1), sizeof *E.wg);
	E.bulk = NULL;
	E.nbulk = E.capbulk = 0;
}

static void
cta_free(void)
{
	for (int g = 0; g < E.nthr / 128; g++)	/* a failed launch can leave operations */
		for (int j = 0; j < E.wg[g].nop; j++) {
			free(E.wg[g].op[j].val);
			free(E.wg[g].op[j].rd);
		}
	for (int j = 0; j < E.nbulk; j++) {	/* ... and copies */
		free(E.bulk[j].at);
		free(E.bulk[j].data);
	}
	free(E.bulk);
	free(E.smem_raw);
	free(E.owner);
	free(E.rd);
	free(E.epoch);
	free(E.abar);
	free(E.aphase);
	free(E.isbar);
	free(E.agen);
	free(E.srd);
	free(E.wg);
	E.bulk = NULL;
	E.nbulk = E.capbulk = 0;
	E.smem = E.smem_raw = NULL;
}

int
cg_emu_run(CgModule *m, const char *kernel, const CgEmuLaunch *l, Diag *d)
{
	const CgKernel *k = cg_module_find(m, kernel);
	char name[300];
	uint64_t addr;
	int n, ncl, at[3];
	Thr *thr;

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
	ncl = l->cluster ? l->cluster : MAX(k->cluster, 1);
	if (ncl < 1 || ncl > MAXCLUSTER || l->grid[0] % ncl)
		return diag_error(d, LOC_NONE, "emu: kernel '%s' in clusters of %d: grid.x %d is not a multiple of "
				  "it (or clusters of more than %d)", kernel, ncl, l->grid[0], MAXCLUSTER);
	if (jit(m, d) < 0)
		return -1;
	snprintf(name, sizeof name, "%s.emu", kernel);
	addr = LLVMGetFunctionAddress(m->jit, name);
	if (!addr)
		return diag_error(d, LOC_NONE, "emu: JIT has no %s", name);

	memset(&E.sched, 0, sizeof E.sched);
	if (n * ncl > E.cap) {
		E.thr = xrealloc(E.thr, (size_t)(n * ncl) * sizeof *E.thr);
		for (int i = E.cap; i < n * ncl; i++) {
			memset(&E.thr[i], 0, sizeof E.thr[i]);
			E.thr[i].stack = xmalloc(STACK);
		}
		E.cap = n * ncl;
	}
	thr = E.thr;
	E.nthr = n;
	E.maxnreg = k->maxnreg;
	*(void **)&E.fn = (void *)(uintptr_t)addr;
	E.args = xmalloc((size_t)(l->nargs > 0 ? l->nargs : 1) * sizeof *E.args);
	memcpy(E.args, l->args, (size_t)l->nargs * sizeof *E.args);
	for (int i = 0; i < 3; i++) {
		E.grid[i] = l->grid[i];
		E.block[i] = l->block[i];
	}
	E.smem_bytes = (size_t)l->smem;
	E.buf = l->buf;
	E.nbuf = l->nbuf;
	E.failed = 0;
	CL.n = ncl;
	CL.at = 0;
	for (int r = 0; r < ncl; r++) {	/* each rank its threads and shared memory */
		CL.st[r] = E;
		CL.st[r].thr = thr + r * n;
		CL.st[r].rank = r;
	}
	E = CL.st[0];
	for (int r = 0; r < ncl; r++) {
		cta_enter(r);
		cta_alloc();
	}
	for (int z = 0; z < l->grid[2] && !E.failed; z++)
		for (int y = 0; y < l->grid[1] && !E.failed; y++)
			for (int x = 0; x < l->grid[0] && !E.failed; x += ncl) {
				for (int r = 0; r < ncl; r++) {
					cta_enter(r);
					E.cta[0] = x + r;
					E.cta[1] = y;
					E.cta[2] = z;
				}
				run_cluster(x / ncl % ncl);	/* every rank first in turn */
			}
	memcpy(at, E.cta, sizeof at);	/* the failed CTA's (or a peer's it reached) */
	for (int r = 0; r < ncl; r++) {
		cta_enter(r);
		cta_free();
	}
	cta_enter(0);
	E.thr = thr;
	free(E.args);
	E.args = NULL;
	if (E.failed)
		return diag_error(d, LOC_NONE, "emu: %s: CTA (%d,%d,%d): %s", kernel, at[0], at[1], at[2], E.msg);
	return 0;
}

/* ---- tensor maps ---- */

int
cg_tmap_check(const CgTmap *t, int64_t T, Diag *d)
{
	int esz = cg_tmap_esize(t->dt);

	if (!esz)
		return diag_error(d, LOC_NONE, "tensor map of %s: element type %s (need bf16, f16, f32 or f8e4m3)",
				  t->of, dtype_name(t->dt));
	if (t->rank < 2 || t->rank > 3)
		return diag_error(d, LOC_NONE, "tensor map of %s: rank %d (need 2 or 3)", t->of, t->rank);
	if (t->swizzle != 0 && t->swizzle != 32 && t->swizzle != 64 && t->swizzle != 128)
		return diag_error(d, LOC_NONE, "tensor map of %s: swizzle %d bytes", t->of, t->swizzle);
	for (int i = 0; i < t->rank; i++) {
		int64_t v = cg_expr_eval(t->dims[i], T);
		if (v < 0 || v > ((int64_t)1 << 32))
			return diag_error(d, LOC_NONE, "tensor map of %s: dim %d is %lld at T=%lld", t->of, i,
					  (long long)v, (long long)T);
		if (t->box[i] < 1 || t->box[i] > 256)
			return diag_error(d, LOC_NONE, "tensor map of %s: box dim %d is %d (1..256)", t->of, i,
					  t->box[i]);
		if (i && (t->strides[i - 1] % 16 || t->strides[i - 1] <= 0 || t->strides[i - 1] >= ((int64_t)1 << 40)))
			return diag_error(d, LOC_NONE, "tensor map of %s: stride %d is %lld bytes (a positive "
					  "multiple of 16 below 2^40)", t->of, i, (long long)t->strides[i - 1]);
	}
	if (t->box[0] * esz % 16 || (t->swizzle && t->box[0] * esz > t->swizzle))
		return diag_error(d, LOC_NONE, "tensor map of %s: an inner box of %d bytes (a multiple of 16, "
				  "at most the swizzle's %d)", t->of, t->box[0] * esz, t->swizzle);
	return 0;
}

/* Dims evaluated at T, and at least 1 (rows past a kernel's M are never stored). */
int
cg_emu_tmap_encode(const CgTmap *t, const void *base, int64_t T, void *out128, Diag *d)
{
	EmuTmap m;

	if (cg_tmap_check(t, T, d) < 0)
		return -1;
	if ((uintptr_t)base % 16)
		return diag_error(d, LOC_NONE, "tensor map of %s: base %p is not 16-byte aligned", t->of, base);
	memset(out128, 0, 128);
	memset(&m, 0, sizeof m);
	m.magic = TMAP_MAGIC;
	m.rank = t->rank;
	m.esz = cg_tmap_esize(t->dt);
	m.swizzle = t->swizzle;
	m.base = (uint64_t)(uintptr_t)base;
	for (int i = 0; i < 3; i++) {
		m.box[i] = i < t->rank ? t->box[i] : 1;
		m.dims[i] = i < t->rank ? MAX(cg_expr_eval(t->dims[i], T), 1) : 1;
	}
	m.strides[0] = t->strides[0];
	m.strides[1] = t->rank == 3 ? t->strides[1] : 0;
	memcpy(out128, &m, sizeof m);
	return 0;
}
