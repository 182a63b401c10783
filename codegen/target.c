/*
 * target.c — everything that knows how LLVM becomes PTX: NVPTX setup, the
 * module and its kernel table, verify + O3 + emit, and the helper layer
 * kernel builders use (thread ids, loops, shared memory, cp.async, ldmatrix,
 * mma, conversions, math).
 *
 * Version traps handled here (see shared/research/feasibility.md):
 * kernels use the ptx_kernel calling convention (nvvm.annotations "kernel"
 * is ignored by LLVM 22); launch bounds are nvvm.annotations up to LLVM 20
 * and function attributes ("nvvm.maxntid") from 21; llvm.nvvm.barrier0 is
 * gone in 22 (barrier.cta.sync.aligned.all instead).  Intrinsics are looked
 * up by name, and a name this LLVM lacks is a diagnostic, never an abort.
 */
#define CG_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h>

#include "codegen.h"

#define TRIPLE "nvptx64-nvidia-cuda"

/* ---- targets ---- */

/*
 * smem: the opt-in dynamic shared memory per block (CUDA C Programming
 * Guide, compute capabilities table: 163 KiB on 8.0, 99 KiB on 8.6/8.9,
 * 227 KiB on 9.0); sms: the multiprocessors of the part the launch plan is
 * sized for (A100 108, RTX 3090 82, L40S 142, H100/H200 SXM 132).  The
 * emulator plans as sm_90a does, so that its tests run sm_90a's plan.
 */
static const struct {
	const char *sm;
	int num;		/* 80, 90 */
	int arch_a;		/* sm_90a */
	const char *features;
	int smem, nsm;
} sms[] = {
	{"sm_80", 80, 0, "+ptx70", 166912, 108},
	{"sm_86", 86, 0, "+ptx71", 101376, 82},
	{"sm_89", 89, 0, "+ptx78", 101376, 142},
	{"sm_90", 90, 0, "+ptx80", 232448, 132},
	{"sm_90a", 90, 1, "+ptx80", 232448, 132},
	{"emu", 80, 0, "", 232448, 132},
};

static int
find_sm(const char *sm)
{
	for (size_t i = 0; sm && i < NELEM(sms); i++)
		if (strcmp(sms[i].sm, sm) == 0)
			return (int)i;
	return -1;
}

/* PTX ISA version of a feature string, "+ptx80" -> 80; 0 when absent. */
static int
ptx_version(const char *features)
{
	const char *p = features ? strstr(features, "+ptx") : NULL;

	return p ? atoi(p + 4) : 0;
}

int
cg_target_is_emu(const CgTarget *t)
{
	return t && t->sm && strcmp(t->sm, "emu") == 0;
}

int
cg_target_smem_max(const CgTarget *t)
{
	int i = find_sm(t ? t->sm : NULL);

	return i >= 0 ? sms[i].smem : 0;
}

int
cg_target_sms(const CgTarget *t)
{
	int i = find_sm(t ? t->sm : NULL);

	return i >= 0 ? sms[i].nsm : 0;
}

int
cg_target_check(const CgTarget *t, Diag *d)
{
	int i = find_sm(t ? t->sm : NULL);

	if (i < 0)
		return diag_error(d, LOC_NONE,
				  "unknown target '%s' (have sm_80, sm_86, sm_89, sm_90, sm_90a, emu)",
				  t && t->sm ? t->sm : "(null)");
	if (t->opt < 0 || t->opt > 3)
		return diag_error(d, LOC_NONE, "optimisation level %d is not 0..3", t->opt);
	if (t->features && t->features[0] && !cg_target_is_emu(t) &&
	    ptx_version(t->features) == 0)
		return diag_error(d, LOC_NONE, "target features '%s' name no +ptxNN",
				  t->features);
	return 0;
}

/* PTX written for a is valid for b: b's sm and PTX ISA are at least a's,
 * and a has no arch-specific features (sm_90a's wgmma is not sm_100's). */
int
cg_target_ptx_fits(const CgTarget *a, const CgTarget *b)
{
	int i = find_sm(a ? a->sm : NULL), k = find_sm(b ? b->sm : NULL);

	if (i < 0 || k < 0 || cg_target_is_emu(a) || cg_target_is_emu(b) || sms[i].arch_a)
		return 0;
	return sms[i].num <= sms[k].num &&
	       ptx_version(cg_target_features(a)) <= ptx_version(cg_target_features(b));
}

const char *
cg_target_features(const CgTarget *t)
{
	int i = find_sm(t->sm);

	if (t->features && t->features[0])
		return t->features;
	return i >= 0 ? sms[i].features : "";
}

int
cg_target_has(const CgTarget *t, unsigned caps)
{
	int i = find_sm(t ? t->sm : NULL);
	unsigned have = 0;
	int num, ptx;

	if (i < 0)
		return 0;
	num = sms[i].num;
	ptx = cg_target_is_emu(t) ? 80 : ptx_version(cg_target_features(t));
	if (num >= 75)
		have |= CG_LDMATRIX;
	if (num >= 80)
		have |= CG_MMA_F16 | CG_MMA_BF16 | CG_MMA_TF32 | CG_CP_ASYNC | CG_CVT_BF16;
	if (num >= 89 && ptx >= 78 && !cg_target_is_emu(t))
		have |= CG_CVT_F8;
	if (num >= 90 && ptx >= 80 && !cg_target_is_emu(t))
		have |= CG_TMA | CG_CLUSTER | CG_GRIDDEP;
	if (sms[i].arch_a && ptx >= 80)
		have |= CG_WGMMA | CG_SETMAXNREG;
	return (have & caps) == caps;
}

const char *
cg_cap_name(unsigned cap)
{
	switch (cap) {
	case CG_MMA_F16: return "mma.sync f16";
	case CG_MMA_BF16: return "mma.sync bf16";
	case CG_MMA_TF32: return "mma.sync tf32";
	case CG_LDMATRIX: return "ldmatrix";
	case CG_CP_ASYNC: return "cp.async";
	case CG_CVT_BF16: return "cvt bf16";
	case CG_TMA: return "TMA (cp.async.bulk.tensor)";
	case CG_CLUSTER: return "thread-block clusters";
	case CG_GRIDDEP: return "griddepcontrol";
	case CG_CVT_F8: return "cvt f8";
	case CG_WGMMA: return "wgmma";
	case CG_SETMAXNREG: return "setmaxnreg";
	}
	return "?";
}

static const char *
cap_min_target(unsigned cap)
{
	switch (cap) {
	case CG_LDMATRIX: return "sm_75";
	case CG_TMA: case CG_CLUSTER: case CG_GRIDDEP: return "sm_90 with +ptx80";
	case CG_WGMMA: case CG_SETMAXNREG: return "sm_90a";
	}
	return "sm_80";
}

int
cg_require(const CgTarget *t, unsigned caps, const char *what, Diag *d)
{
	for (unsigned bit = 1; bit && bit <= caps; bit <<= 1) {
		if (!(caps & bit) || cg_target_has(t, bit))
			continue;
		return diag_error(d, LOC_NONE, "%s needs %s, which %s lacks (needs %s)",
				  what, cg_cap_name(bit), t && t->sm ? t->sm : "(null)",
				  cap_min_target(bit));
	}
	return 0;
}

/* ---- size expressions ---- */

int
cg_expr_print(char *buf, size_t n, CgExpr e)
{
	return bundle_expr_print(buf, n, &e);
}

int64_t
cg_expr_eval(CgExpr e, int64_t T)
{
	int64_t v;

	return bundle_expr_eval(&e, T, &v) == 0 ? v : -1;
}

static const char *const param_kind_names[NCGP] = {"ptr", "i32", "i64", "u64", "f32", "tmap"};

const char *
cg_param_kind_name(CgParamKind k)
{
	return (unsigned)k < NCGP ? param_kind_names[k] : "?";
}

/* ---- modules ---- */

static void
init_llvm(void)
{
	static int done;

	if (done)
		return;
	done = 1;
	LLVMInitializeNVPTXTargetInfo();
	LLVMInitializeNVPTXTarget();
	LLVMInitializeNVPTXTargetMC();
	LLVMInitializeNVPTXAsmPrinter();
}

CgModule *
cg_module_new(const CgTarget *t, const char *name, Diag *d)
{
	CgModule *m;
	LLVMTargetRef T;
	char *err = NULL, *dl;
	const char *triple = TRIPLE, *cpu, *feat;
	LLVMTargetDataRef td;

	if (cg_target_check(t, d) < 0)
		return NULL;
	m = xcalloc(1, sizeof *m);
	m->arena = arena_new(0);
	m->t.sm = arena_strdup(m->arena, t->sm);
	m->t.features = arena_strdup(m->arena, cg_target_features(t));
	m->t.opt = t->opt;
	m->emu = cg_target_is_emu(t);
	m->C = LLVMContextCreate();
	m->M = LLVMModuleCreateWithNameInContext(name ? name : "moec", m->C);
	if (m->emu) {
		if (cg_emu_init(m, d) < 0) {
			cg_module_free(m);
			return NULL;
		}
		triple = m->host_triple;
		cpu = "x86-64";
		feat = "";
	} else {
		init_llvm();
		cpu = m->t.sm;
		feat = m->t.features;
	}
	if (LLVMGetTargetFromTriple(triple, &T, &err)) {
		diag_error(d, LOC_NONE, "no LLVM target for %s: %s", triple, err);
		LLVMDisposeMessage(err);
		cg_module_free(m);
		return NULL;
	}
	m->TM = LLVMCreateTargetMachine(T, triple, cpu, feat,
					t->opt >= 3 ? LLVMCodeGenLevelAggressive :
					t->opt == 2 ? LLVMCodeGenLevelDefault :
					t->opt == 1 ? LLVMCodeGenLevelLess : LLVMCodeGenLevelNone,
					LLVMRelocDefault, LLVMCodeModelDefault);
	if (!m->TM) {
		diag_error(d, LOC_NONE, "cannot create a target machine for %s", m->t.sm);
		cg_module_free(m);
		return NULL;
	}
	LLVMSetTarget(m->M, triple);
	td = LLVMCreateTargetDataLayout(m->TM);
	dl = LLVMCopyStringRepOfTargetData(td);
	LLVMSetDataLayout(m->M, dl);
	LLVMDisposeMessage(dl);
	LLVMDisposeTargetData(td);
	return m;
}

void
cg_module_free(CgModule *m)
{
	if (!m)
		return;
	cg_emu_free(m);
	if (m->M && !m->module_owned_elsewhere)
		LLVMDisposeModule(m->M);
	if (m->TM)
		LLVMDisposeTargetMachine(m->TM);
	if (m->C)
		LLVMContextDispose(m->C);
	free(m->kern);
	free(m->ptx);
	arena_free(m->arena);
	free(m);
}

void
cg_module_discard_names(CgModule *m)
{
	LLVMContextSetDiscardValueNames(m->C, 1);
}

void
cg_module_release_llvm(CgModule *m)
{
	if (!m || m->emu || !m->ptx || m->module_owned_elsewhere)
		return;
	if (m->M)
		LLVMDisposeModule(m->M);
	if (m->TM)
		LLVMDisposeTargetMachine(m->TM);
	if (m->C)
		LLVMContextDispose(m->C);
	m->M = NULL, m->TM = NULL, m->C = NULL;
}

const CgTarget *
cg_module_target(const CgModule *m)
{
	return &m->t;
}

void
cg_module_keep_ir(CgModule *m)
{
	m->keep_ir = 1;
}

void
cg_module_set_debug(CgModule *m, DbgFlags debug)
{
	m->debug = debug;
}

DbgFlags
cg_module_debug(const CgModule *m)
{
	return m->debug;
}

int
cg_module_nkernel(const CgModule *m)
{
	return m->nkern;
}

const CgKernel *
cg_module_kernel(const CgModule *m, int i)
{
	return i >= 0 && i < m->nkern ? &m->kern[i] : NULL;
}

const CgKernel *
cg_module_find(const CgModule *m, const char *name)
{
	for (int i = 0; i < m->nkern; i++)
		if (strcmp(m->kern[i].name, name) == 0)
			return &m->kern[i];
	return NULL;
}

/* Verify and run default<On>; once per module. */
int
cg_module_finish(CgModule *m, Diag *d)
{
	char *err = NULL, pipe[32];
	LLVMPassBuilderOptionsRef o;
	LLVMErrorRef e;

	if (m->finished)
		return m->finished < 0 ? -1 : 0;
	m->finished = -1;
	if (LLVMVerifyModule(m->M, LLVMReturnStatusAction, &err)) {
		diag_error(d, LOC_NONE, "LLVM verifier: %s", err ? err : "(no message)");
		LLVMDisposeMessage(err);
		return -1;
	}
	LLVMDisposeMessage(err);
	snprintf(pipe, sizeof pipe, "default<O%d>", m->t.opt);
	o = LLVMCreatePassBuilderOptions();
	e = LLVMRunPasses(m->M, pipe, m->TM, o);
	LLVMDisposePassBuilderOptions(o);
	if (e) {
		char *msg = LLVMGetErrorMessage(e);
		diag_error(d, LOC_NONE, "LLVM %s: %s", pipe, msg);
		LLVMDisposeErrorMessage(msg);
		return -1;
	}
	m->finished = 1;
	return 0;
}

const char *
cg_module_ptx(CgModule *m, size_t *len, Diag *d)
{
	char *err = NULL;
	LLVMMemoryBufferRef buf;
	size_t n;

	if (m->ptx) {
		if (len)
			*len = m->ptxlen;
		return m->ptx;
	}
	if (m->emu) {
		diag_error(d, LOC_NONE, "target emu has no PTX");
		return NULL;
	}
	if (cg_module_finish(m, d) < 0)
		return NULL;
	if (LLVMTargetMachineEmitToMemoryBuffer(m->TM, m->M, LLVMAssemblyFile, &err, &buf)) {
		diag_error(d, LOC_NONE, "NVPTX backend: %s", err ? err : "(no message)");
		LLVMDisposeMessage(err);
		return NULL;
	}
	n = LLVMGetBufferSize(buf);
	m->ptx = xmalloc(n + 1);
	memcpy(m->ptx, LLVMGetBufferStart(buf), n);
	m->ptx[n] = 0;
	/* the buffer may hold a trailing NUL; PTX text is NUL-free */
	m->ptxlen = strlen(m->ptx);
	LLVMDisposeMemoryBuffer(buf);
	if (len)
		*len = m->ptxlen;
	return m->ptx;
}

void
cg_module_set_ptx(CgModule *m, const char *ptx, size_t len)
{
	free(m->ptx);
	m->ptx = xmalloc(len + 1);
	memcpy(m->ptx, ptx, len);
	m->ptx[len] = 0;
	m->ptxlen = len;
	m->finished = 1;
}

char *
cg_module_llvm_ir(CgModule *m)
{
	char *s = LLVMPrintModuleToString(m->M), *r = xstrdup(s);

	LLVMDisposeMessage(s);
	return r;
}

/* ---- kernels ---- */

/*
 * A tensor map by value: `.param .align 64 .b8 name[128]`.  The IR never
 * reads it (LLVM would copy a byval parameter whose address escapes into
 * local memory); cg_tma_load names the parameter in its inline PTX.
 */
static void
tmap_param(CgFn *f, int i)
{
	unsigned byval = LLVMGetEnumAttributeKindForName("byval", 5);
	unsigned align = LLVMGetEnumAttributeKindForName("align", 5);
	LLVMTypeRef t = LLVMArrayType(f->ti8, 128);

	LLVMAddAttributeAtIndex(f->fn, (unsigned)i + 1, LLVMCreateTypeAttribute(f->C, byval, t));
	LLVMAddAttributeAtIndex(f->fn, (unsigned)i + 1, LLVMCreateEnumAttribute(f->C, align, 64));
}

/*
 * Programmatic dependent launch (--debug=pdl, docs/codegen.md): the kernel
 * opens by waiting for the grid before it in the stream to complete and
 * flush its writes (griddepcontrol.wait), then lets the grid after it launch
 * (launch_dependents).  The runtime may then launch it while its predecessor
 * still runs (the launch attribute), so launch latency and ramp-up overlap
 * the predecessor's tail; every kernel waits before its first access, so the
 * order of memory effects is the stream's.  With no programmatic predecessor
 * the wait returns at once.
 */
static void
griddep_open(CgFn *f)
{
	cg_asm(f, NULL, "griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;", "~{memory}", NULL, 0, 1);
	f->k->pdl = 1;
}

CgFn *
cg_fn_begin(CgModule *m, const char *name, const CgParam *p, int np, int threads,
	    int min_ctas, Diag *d)
{
	CgFn *f;
	LLVMTypeRef *pt, fty;

	if (m->finished || m->ptx) {
		diag_error(d, LOC_NONE, "module already emitted; cannot add kernel '%s'", name);
		return NULL;
	}
	if (cg_module_find(m, name) || LLVMGetNamedFunction(m->M, name)) {
		diag_error(d, LOC_NONE, "kernel '%s' defined twice", name);
		return NULL;
	}
	if (threads < 32 || threads > 1024 || threads % 32) {
		diag_error(d, LOC_NONE, "kernel '%s': %d threads per CTA (need a multiple of 32, <= 1024)",
			   name, threads);
		return NULL;
	}
	f = xcalloc(1, sizeof *f);
	f->m = m;
	f->d = d;
	f->C = m->C;
	f->M = m->M;
	f->emu = m->emu;
	f->nthreads = threads;
	f->tvoid = LLVMVoidTypeInContext(f->C);
	f->ti1 = LLVMInt1TypeInContext(f->C);
	f->ti8 = LLVMInt8TypeInContext(f->C);
	f->ti16 = LLVMInt16TypeInContext(f->C);
	f->ti32 = LLVMInt32TypeInContext(f->C);
	f->ti64 = LLVMInt64TypeInContext(f->C);
	f->tf32 = LLVMFloatTypeInContext(f->C);
	f->tf16 = LLVMHalfTypeInContext(f->C);
	f->tbf16 = LLVMBFloatTypeInContext(f->C);
	f->tptr = LLVMPointerTypeInContext(f->C, 0);
	f->tgptr = f->emu ? f->tptr : LLVMPointerTypeInContext(f->C, 1);
	f->tsptr = f->emu ? f->tptr : LLVMPointerTypeInContext(f->C, 3);

	f->k = arena_alloc(m->arena, sizeof *f->k);
	f->k->name = arena_strdup(m->arena, name);
	f->k->nparam = np;
	f->k->min_ctas = min_ctas;
	f->k->param = arena_array(m->arena, CgParam, np > 0 ? np : 1);
	pt = xcalloc(np > 0 ? np : 1, sizeof *pt);
	for (int i = 0; i < np; i++) {
		f->k->param[i].kind = p[i].kind;
		f->k->param[i].role = arena_strdup(m->arena, p[i].role ? p[i].role : "");
		switch (p[i].kind) {
		case CGP_PTR: pt[i] = f->tgptr; break;
		case CGP_I32: pt[i] = f->ti32; break;
		case CGP_I64: case CGP_U64: pt[i] = f->ti64; break;
		case CGP_F32: pt[i] = f->tf32; break;
		case CGP_TMAP: pt[i] = f->tptr; break;	/* GPU: byval [128 x i8], below */
		default: die("bad param kind %d", p[i].kind);
		}
	}
	fty = LLVMFunctionType(f->tvoid, pt, (unsigned)np, 0);
	free(pt);
	f->fn = LLVMAddFunction(f->M, name, fty);
	for (int i = 0; i < np && !f->emu; i++)
		if (p[i].kind == CGP_TMAP)
			tmap_param(f, i);
	for (int i = 0; i < np; i++)
		LLVMSetValueName2(LLVMGetParam(f->fn, (unsigned)i), f->k->param[i].role,
				  strlen(f->k->param[i].role));
	if (!f->emu) {
		char buf[16];
		LLVMSetFunctionCallConv(f->fn, LLVMPTXKernelCallConv);
		(void)buf;
#if LLVM_VERSION_MAJOR >= 21
		snprintf(buf, sizeof buf, "%d", threads);
		LLVMAddAttributeAtIndex(f->fn, LLVMAttributeFunctionIndex,
					LLVMCreateStringAttribute(f->C, "nvvm.maxntid", 12, buf,
								  (unsigned)strlen(buf)));
		if (min_ctas > 0) {
			snprintf(buf, sizeof buf, "%d", min_ctas);
			LLVMAddAttributeAtIndex(f->fn, LLVMAttributeFunctionIndex,
						LLVMCreateStringAttribute(f->C, "nvvm.minctasm", 13, buf,
									  (unsigned)strlen(buf)));
		}
#endif
	}
	f->B = LLVMCreateBuilderInContext(f->C);
	f->entry = LLVMAppendBasicBlockInContext(f->C, f->fn, "entry");
	LLVMPositionBuilderAtEnd(f->B, f->entry);
	if (!m->griddep_later)
		cg_fn_griddep(f);
	return f;
}

void
cg_fn_griddep(CgFn *f)
{
	if (!f->emu && (f->m->debug & DBG_PDL) && cg_target_has(&f->m->t, CG_GRIDDEP))
		griddep_open(f);
}

int
cg_fn_require(CgFn *f, unsigned caps, const char *what)
{
	if (cg_require(&f->m->t, caps, what, f->d) < 0) {
		f->err = 1;
		return -1;
	}
	return 0;
}

LLVMValueRef
cg_arg(CgFn *f, int i)
{
	return LLVMGetParam(f->fn, (unsigned)i);
}

void
cg_fn_tmaps(CgFn *f, const CgTmap *t, int n)
{
	CgTmap *c = arena_array(f->m->arena, CgTmap, n > 0 ? n : 1);

	for (int i = 0; i < n; i++) {
		c[i] = t[i];
		c[i].of = arena_strdup(f->m->arena, t[i].of);
	}
	f->k->tmap = c;
	f->k->ntmap = n;
}

int
cg_regs_per_thread(int threads)
{
	int r = threads > 0 ? 65536 / threads / 8 * 8 : 0;

	return r < 248 ? r : 248;
}

void
cg_fn_maxnreg(CgFn *f, int regs)
{
	if (regs < 24 || regs % 8 || regs > cg_regs_per_thread(f->nthreads)) {
		diag_error(f->d, LOC_NONE, "kernel '%s': %d registers per thread at entry (need a multiple of 8 "
			   "in 24..%d for %d threads)", f->k->name, regs, cg_regs_per_thread(f->nthreads),
			   f->nthreads);
		f->err = 1;
		return;
	}
	f->k->maxnreg = regs;
#if LLVM_VERSION_MAJOR >= 21
	if (!f->emu) {
		char buf[16];
		snprintf(buf, sizeof buf, "%d", regs);
		LLVMAddAttributeAtIndex(f->fn, LLVMAttributeFunctionIndex,
					LLVMCreateStringAttribute(f->C, "nvvm.maxnreg", 12, buf,
								  (unsigned)strlen(buf)));
	}
#endif
}

void
cg_arg_noalias(CgFn *f, int i)
{
	unsigned kind = LLVMGetEnumAttributeKindForName("noalias", 7);

	LLVMAddAttributeAtIndex(f->fn, (unsigned)i + 1, LLVMCreateEnumAttribute(f->C, kind, 0));
}

/* LLVM <= 20 reads launch bounds from nvvm.annotations (21+: attributes, set at begin). */
static void
launch_bounds(CgFn *f)
{
#if LLVM_VERSION_MAJOR < 21
	const char *key[3] = {"maxntidx", "minctasm", "maxnreg"};
	int val[3] = {f->nthreads, f->k->min_ctas, f->k->maxnreg};

	for (int i = 0; i < 3; i++) {
		LLVMMetadataRef ops[3];
		if (val[i] <= 0)
			continue;
		ops[0] = LLVMValueAsMetadata(f->fn);
		ops[1] = LLVMMDStringInContext2(f->C, key[i], strlen(key[i]));
		ops[2] = LLVMValueAsMetadata(LLVMConstInt(f->ti32, (unsigned)val[i], 0));
		LLVMAddNamedMetadataOperand(f->M, "nvvm.annotations",
					    LLVMMetadataAsValue(f->C, LLVMMDNodeInContext2(f->C, ops, 3)));
	}
#else
	(void)f;
#endif
}

/* In emu mode each kernel also gets name.emu(ptr args): unpack i64 slots, call. */
static void
emu_wrapper(CgFn *f)
{
	char name[300];
	LLVMTypeRef fty = LLVMFunctionType(f->tvoid, &f->tptr, 1, 0);
	LLVMValueRef w, *args;
	LLVMBuilderRef B = f->B;
	int np = f->k->nparam;

	snprintf(name, sizeof name, "%s.emu", f->k->name);
	w = LLVMAddFunction(f->M, name, fty);
	LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(f->C, w, "entry"));
	args = xcalloc(np > 0 ? np : 1, sizeof *args);
	for (int i = 0; i < np; i++) {
		LLVMValueRef idx = LLVMConstInt(f->ti64, (unsigned)i, 0);
		LLVMValueRef slot = LLVMBuildGEP2(B, f->ti64, LLVMGetParam(w, 0), &idx, 1, "");
		LLVMValueRef v = LLVMBuildLoad2(B, f->ti64, slot, "");
		switch (f->k->param[i].kind) {
		case CGP_PTR: case CGP_TMAP: v = LLVMBuildIntToPtr(B, v, f->tptr, ""); break;
		case CGP_I32: v = LLVMBuildTrunc(B, v, f->ti32, ""); break;
		case CGP_F32:
			v = LLVMBuildBitCast(B, LLVMBuildTrunc(B, v, f->ti32, ""), f->tf32, "");
			break;
		default: break;
		}
		args[i] = v;
	}
	LLVMBuildCall2(B, LLVMGlobalGetValueType(f->fn), f->fn, args, (unsigned)np, "");
	LLVMBuildRetVoid(B);
	free(args);
}

int
cg_fn_end(CgFn *f, const int block[3], const CgExpr grid[3], int smem, const char *note)
{
	CgModule *m = f->m;
	int ok = !f->err;

	if (ok && !LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(f->B)))
		LLVMBuildRetVoid(f->B);
	if (ok && LLVMVerifyFunction(f->fn, LLVMReturnStatusAction)) {
		char *s = LLVMPrintValueToString(f->fn);
		diag_error(f->d, LOC_NONE, "kernel '%s' fails the LLVM verifier", f->k->name);
		if (m->debug & DBG_CG_DUMP)
			fprintf(stderr, "%s\n", s);
		LLVMDisposeMessage(s);
		ok = 0;
	}
	if (ok) {
		CgKernel *k = f->k;
		for (int i = 0; i < 3; i++) {
			k->block[i] = block[i];
			k->grid[i] = grid[i];
		}
		k->smem = smem;
		k->note = note ? arena_strdup(m->arena, note) : "";
		k->regs = k->spill_stores = k->spill_loads = k->stack = k->static_smem = -1;
		if (f->emu)
			emu_wrapper(f);
		else
			launch_bounds(f);
		m->kern = xrealloc(m->kern, (size_t)(m->nkern + 1) * sizeof *m->kern);
		m->kern[m->nkern++] = *k;
	} else {
		LLVMDeleteFunction(f->fn);	/* annotations are added on success only */
	}
	LLVMDisposeBuilder(f->B);
	free(f);
	return ok ? 0 : -1;
}

/* ---- constants and arithmetic ---- */

LLVMValueRef cg_i32(CgFn *f, int64_t v) { return LLVMConstInt(f->ti32, (unsigned long long)v, 1); }
LLVMValueRef cg_i64(CgFn *f, int64_t v) { return LLVMConstInt(f->ti64, (unsigned long long)v, 1); }
LLVMValueRef cg_f32(CgFn *f, double v) { return LLVMConstReal(f->tf32, v); }
LLVMValueRef cg_add(CgFn *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(f->B, a, b, ""); }
LLVMValueRef cg_sub(CgFn *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSub(f->B, a, b, ""); }
LLVMValueRef cg_mul(CgFn *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(f->B, a, b, ""); }
LLVMValueRef cg_udiv(CgFn *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildUDiv(f->B, a, b, ""); }
LLVMValueRef cg_urem(CgFn *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildURem(f->B, a, b, ""); }
LLVMValueRef cg_select(CgFn *f, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(f->B, c, a, b, ""); }
LLVMValueRef cg_sext64(CgFn *f, LLVMValueRef a) { return LLVMBuildSExt(f->B, a, f->ti64, ""); }

static LLVMValueRef
cint(LLVMValueRef like, int64_t v)
{
	return LLVMConstInt(LLVMTypeOf(like), (unsigned long long)v, 1);
}

LLVMValueRef cg_addi(CgFn *f, LLVMValueRef a, int64_t b) { return b ? LLVMBuildAdd(f->B, a, cint(a, b), "") : a; }
LLVMValueRef cg_muli(CgFn *f, LLVMValueRef a, int64_t b) { return b == 1 ? a : LLVMBuildMul(f->B, a, cint(a, b), ""); }
LLVMValueRef cg_and(CgFn *f, LLVMValueRef a, int64_t b) { return LLVMBuildAnd(f->B, a, cint(a, b), ""); }
LLVMValueRef cg_shr(CgFn *f, LLVMValueRef a, int b) { return b ? LLVMBuildLShr(f->B, a, cint(a, b), "") : a; }
LLVMValueRef cg_shl(CgFn *f, LLVMValueRef a, int b) { return b ? LLVMBuildShl(f->B, a, cint(a, b), "") : a; }
LLVMValueRef cg_lt(CgFn *f, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(f->B, LLVMIntSLT, a, b, ""); }

LLVMValueRef
cg_min(CgFn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(f->B, LLVMBuildICmp(f->B, LLVMIntSLT, a, b, ""), a, b, "");
}

LLVMValueRef
cg_max(CgFn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(f->B, LLVMBuildICmp(f->B, LLVMIntSGT, a, b, ""), a, b, "");
}

/* ---- calls ---- */

LLVMValueRef
cg_intrinsic(CgFn *f, const char *name, LLVMTypeRef ret, LLVMTypeRef *ovl, int novl,
	     LLVMValueRef *args, int nargs)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	LLVMValueRef fn, *a;
	LLVMTypeRef fty, *pt;
	unsigned np;
	LLVMValueRef r;

	if (id == 0) {
		diag_error(f->d, LOC_NONE, "LLVM %d has no intrinsic %s", LLVM_VERSION_MAJOR, name);
		f->err = 1;
		return ret && LLVMGetTypeKind(ret) != LLVMVoidTypeKind ? LLVMGetUndef(ret) : NULL;
	}
	fn = LLVMGetIntrinsicDeclaration(f->M, id, ovl, (size_t)novl);
	fty = LLVMIntrinsicGetType(f->C, id, ovl, (size_t)novl);
	np = LLVMCountParamTypes(fty);
	if ((int)np != nargs) {
		diag_error(f->d, LOC_NONE, "intrinsic %s takes %u operands in LLVM %d, not %d",
			   name, np, LLVM_VERSION_MAJOR, nargs);
		f->err = 1;
		return ret && LLVMGetTypeKind(ret) != LLVMVoidTypeKind ? LLVMGetUndef(ret) : NULL;
	}
	pt = xcalloc(np ? np : 1, sizeof *pt);
	a = xcalloc(np ? np : 1, sizeof *a);
	LLVMGetParamTypes(fty, pt);
	for (unsigned i = 0; i < np; i++) {
		a[i] = args[i];
		/* bit-compatible operand types (i32 vs <2 x half>) are bitcast */
		if (LLVMTypeOf(a[i]) != pt[i])
			a[i] = LLVMBuildBitCast(f->B, a[i], pt[i], "");
	}
	r = LLVMBuildCall2(f->B, fty, fn, a, np, "");
	free(pt);
	free(a);
	return r;
}

LLVMValueRef
cg_asm(CgFn *f, LLVMTypeRef ret, const char *text, const char *cons, LLVMValueRef *args,
       int nargs, int side_effects)
{
	LLVMTypeRef *pt = xcalloc(nargs > 0 ? nargs : 1, sizeof *pt), fty;
	LLVMValueRef ia, r;

	for (int i = 0; i < nargs; i++)
		pt[i] = LLVMTypeOf(args[i]);
	fty = LLVMFunctionType(ret ? ret : f->tvoid, pt, (unsigned)nargs, 0);
	ia = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons),
			      side_effects, 0, LLVMInlineAsmDialectATT, 0);
	r = LLVMBuildCall2(f->B, fty, ia, args, (unsigned)nargs, "");
	free(pt);
	return r;
}

LLVMValueRef
cg_call_emu(CgFn *f, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int nargs)
{
	LLVMTypeRef *pt = xcalloc(nargs > 0 ? nargs : 1, sizeof *pt), fty;
	LLVMValueRef fn, r;

	for (int i = 0; i < nargs; i++)
		pt[i] = LLVMTypeOf(args[i]);
	fty = LLVMFunctionType(ret ? ret : f->tvoid, pt, (unsigned)nargs, 0);
	fn = LLVMGetNamedFunction(f->M, name);
	if (!fn)
		fn = LLVMAddFunction(f->M, name, fty);
	r = LLVMBuildCall2(f->B, fty, fn, args, (unsigned)nargs, "");
	free(pt);
	return r;
}

/* ---- special registers ---- */

static LLVMValueRef
sreg(CgFn *f, const char *what, int dim, int code)
{
	char name[64];

	if (f->emu) {
		LLVMValueRef c = cg_i32(f, code + dim);
		return cg_call_emu(f, "moec_emu_sreg", f->ti32, &c, 1);
	}
	snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s.%c", what, "xyz"[dim]);
	return cg_intrinsic(f, name, f->ti32, NULL, 0, NULL, 0);
}

LLVMValueRef cg_tid(CgFn *f, int dim) { return sreg(f, "tid", dim, EMU_TID); }
LLVMValueRef cg_ntid(CgFn *f, int dim) { return sreg(f, "ntid", dim, EMU_NTID); }
LLVMValueRef cg_ctaid(CgFn *f, int dim) { return sreg(f, "ctaid", dim, EMU_CTAID); }
LLVMValueRef cg_nctaid(CgFn *f, int dim) { return sreg(f, "nctaid", dim, EMU_NCTAID); }

/* ---- control flow ---- */

void
cg_if(CgFn *f, CgIf *c, LLVMValueRef cond)
{
	c->then = LLVMAppendBasicBlockInContext(f->C, f->fn, "then");
	c->els = LLVMAppendBasicBlockInContext(f->C, f->fn, "else");
	c->end = NULL;
	LLVMBuildCondBr(f->B, cond, c->then, c->els);
	LLVMPositionBuilderAtEnd(f->B, c->then);
}

void
cg_else(CgFn *f, CgIf *c)
{
	c->end = LLVMAppendBasicBlockInContext(f->C, f->fn, "endif");
	LLVMBuildBr(f->B, c->end);
	LLVMPositionBuilderAtEnd(f->B, c->els);
}

void
cg_endif(CgFn *f, CgIf *c)
{
	if (!c->end) {		/* no else: the else block is the join */
		LLVMBuildBr(f->B, c->els);
		LLVMPositionBuilderAtEnd(f->B, c->els);
		return;
	}
	LLVMBuildBr(f->B, c->end);
	LLVMPositionBuilderAtEnd(f->B, c->end);
}

LLVMValueRef
cg_loop(CgFn *f, CgLoop *l, LLVMValueRef begin, LLVMValueRef end, LLVMValueRef step)
{
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->B);
	LLVMBasicBlockRef body;

	l->head = LLVMAppendBasicBlockInContext(f->C, f->fn, "loop");
	body = LLVMAppendBasicBlockInContext(f->C, f->fn, "body");
	l->exit = LLVMAppendBasicBlockInContext(f->C, f->fn, "done");
	l->step = step;
	LLVMBuildBr(f->B, l->head);
	LLVMPositionBuilderAtEnd(f->B, l->head);
	l->i = LLVMBuildPhi(f->B, LLVMTypeOf(begin), "i");
	LLVMAddIncoming(l->i, &begin, &pre, 1);
	LLVMBuildCondBr(f->B, LLVMBuildICmp(f->B, LLVMIntSLT, l->i, end, ""), body, l->exit);
	LLVMPositionBuilderAtEnd(f->B, body);
	return l->i;
}

void
cg_endloop(CgFn *f, CgLoop *l)
{
	LLVMValueRef next = LLVMBuildAdd(f->B, l->i, l->step, "");
	LLVMBasicBlockRef from = LLVMGetInsertBlock(f->B);

	LLVMAddIncoming(l->i, &next, &from, 1);
	LLVMBuildBr(f->B, l->head);
	LLVMPositionBuilderAtEnd(f->B, l->exit);
}

void
cg_loop_while(CgFn *f, CgLoop *l, LLVMValueRef cond)
{
	LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(f->C, f->fn, "while");

	LLVMBuildCondBr(f->B, cond, go, l->exit);
	LLVMPositionBuilderAtEnd(f->B, go);
}

LLVMValueRef
cg_var(CgFn *f, LLVMTypeRef t, LLVMValueRef init)
{
	LLVMBuilderRef b = LLVMCreateBuilderInContext(f->C);
	LLVMValueRef first = LLVMGetFirstInstruction(f->entry), v;

	if (first)
		LLVMPositionBuilderBefore(b, first);
	else
		LLVMPositionBuilderAtEnd(b, f->entry);
	v = LLVMBuildAlloca(b, t, "v");
	LLVMDisposeBuilder(b);
	if (init)
		LLVMBuildStore(f->B, init, v);
	return v;
}

LLVMValueRef
cg_get(CgFn *f, LLVMValueRef var)
{
	return LLVMBuildLoad2(f->B, LLVMGetAllocatedType(var), var, "");
}

void
cg_set(CgFn *f, LLVMValueRef var, LLVMValueRef v)
{
	LLVMBuildStore(f->B, v, var);
}

/* ---- memory ---- */

LLVMValueRef
cg_gep(CgFn *f, LLVMValueRef p, LLVMValueRef idx, int elem_bytes)
{
	LLVMTypeRef t = LLVMIntTypeInContext(f->C, (unsigned)elem_bytes * 8);

	return LLVMBuildGEP2(f->B, t, p, &idx, 1, "");
}

/* emu: every access is checked against the launch's buffers */
static void
emu_check(CgFn *f, LLVMValueRef p, LLVMTypeRef t, int space, int write)
{
	LLVMValueRef a[4];
	LLVMTargetDataRef td = LLVMGetModuleDataLayout(f->M);

	a[0] = p;
	a[1] = cg_i32(f, (int64_t)LLVMStoreSizeOfType(td, t));
	a[2] = cg_i32(f, space);
	a[3] = cg_i32(f, write);
	cg_call_emu(f, "moec_emu_check", NULL, a, 4);
}

LLVMValueRef
cg_gload(CgFn *f, LLVMTypeRef t, LLVMValueRef p, int align)
{
	LLVMValueRef v;

	if (f->emu)
		emu_check(f, p, t, 1, 0);
	v = LLVMBuildLoad2(f->B, t, p, "");
	LLVMSetAlignment(v, (unsigned)align);
	return v;
}

void
cg_gload_stream(CgFn *f, LLVMValueRef p, int n, LLVMValueRef *out)
{
	static const char *const text[2][3] = {{	/* L1::no_allocate needs PTX ISA 7.4 */
		"ld.global.nc.u32 $0, [$1];",
		"ld.global.nc.v2.u32 {$0, $1}, [$2];",
		"ld.global.nc.v4.u32 {$0, $1, $2, $3}, [$4];",
	}, {
		"ld.global.nc.L1::no_allocate.u32 $0, [$1];",
		"ld.global.nc.L1::no_allocate.v2.u32 {$0, $1}, [$2];",
		"ld.global.nc.L1::no_allocate.v4.u32 {$0, $1, $2, $3}, [$4];",
	}};
	static const char *const cons[] = {"=r,l", "=r,=r,l", "=r,=r,=r,=r,l"};
	LLVMTypeRef el[4] = {f->ti32, f->ti32, f->ti32, f->ti32};
	int i = n == 4 ? 2 : n - 1;

	if (f->emu) {	/* a plain load, checked against the launch's buffers */
		LLVMValueRef v = cg_gload(f, LLVMVectorType(f->ti32, (unsigned)n), p, 4 * n);
		for (int j = 0; j < n; j++)
			out[j] = LLVMBuildExtractElement(f->B, v, cg_i32(f, j), "");
		return;
	}
	/* not volatile: the weights do not change during the kernel */
	LLVMValueRef a = LLVMBuildPtrToInt(f->B, p, f->ti64, "");
	LLVMValueRef r = cg_asm(f, n == 1 ? f->ti32 : LLVMStructTypeInContext(f->C, el, (unsigned)n, 0),
				text[ptx_version(cg_target_features(&f->m->t)) >= 74][i], cons[i], &a, 1, 0);
	for (int j = 0; j < n; j++)
		out[j] = n == 1 ? r : LLVMBuildExtractValue(f->B, r, (unsigned)j, "");
}

void
cg_gstore(CgFn *f, LLVMValueRef v, LLVMValueRef p, int align)
{
	if (f->emu)
		emu_check(f, p, LLVMTypeOf(v), 1, 1);
	LLVMSetAlignment(LLVMBuildStore(f->B, v, p), (unsigned)align);
}

/*
 * Volatile global accesses and a fence: what an ordered hand-over between
 * CTAs needs (split-K's slices).  Volatile loads and stores are ld/st
 * .volatile (coherent at the device, never served from a stale L1 line);
 * the fence is PTX's fence.sc.gpu (CUDA's __threadfence), which orders a
 * thread's earlier accesses before its later ones for every other CTA.  No atomics: each flag has one writer at a time.
 */
LLVMValueRef
cg_gload_volatile(CgFn *f, LLVMTypeRef t, LLVMValueRef p, int align)
{
	LLVMValueRef v = cg_gload(f, t, p, align);

	LLVMSetVolatile(v, 1);
	return v;
}

void
cg_gstore_volatile(CgFn *f, LLVMValueRef v, LLVMValueRef p, int align)
{
	LLVMValueRef st;

	if (f->emu)
		emu_check(f, p, LLVMTypeOf(v), 1, 1);
	st = LLVMBuildStore(f->B, v, p);
	LLVMSetAlignment(st, (unsigned)align);
	LLVMSetVolatile(st, 1);
}

void
cg_fence(CgFn *f)
{
	if (f->emu)	/* LLVM 19's NVPTX cannot select an IR fence: PTX's own */
		LLVMBuildFence(f->B, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
	else
		cg_asm(f, NULL, "fence.sc.gpu;", "~{memory}", NULL, 0, 1);
}

/* fence.acq_rel.gpu: with a strong (volatile) store after it a release, with
 * a strong load before it an acquire (PTX's atomics ABI), lighter than
 * fence.sc */
void
cg_fence_acq_rel(CgFn *f)
{
	if (f->emu)
		LLVMBuildFence(f->B, LLVMAtomicOrderingAcquireRelease, 0, "");
	else
		cg_asm(f, NULL, "fence.acq_rel.gpu;", "~{memory}", NULL, 0, 1);
}

LLVMValueRef
cg_last_cta(CgFn *f, LLVMValueRef tid, LLVMValueRef p, LLVMValueRef nctas)
{
	LLVMValueRef slot = cg_sptr(f, cg_i32(f, 0)), last;
	CgIf c, c1;

	cg_if(f, &c, LLVMBuildICmp(f->B, LLVMIntEQ, tid, cg_i32(f, 0), ""));
	cg_fence_acq_rel(f);
	last = LLVMBuildICmp(f->B, LLVMIntEQ, cg_atom_add(f, p, cg_i32(f, 1)), cg_sub(f, nctas, cg_i32(f, 1)), "");
	cg_if(f, &c1, last);
	cg_gstore_volatile(f, cg_i32(f, 0), p, 4);
	cg_fence_acq_rel(f);
	cg_endif(f, &c1);
	cg_sstore(f, LLVMBuildZExt(f->B, last, f->ti32, ""), slot, 4);
	cg_endif(f, &c);
	cg_barrier(f);
	return LLVMBuildICmp(f->B, LLVMIntNE, cg_sload(f, f->ti32, slot, 4), cg_i32(f, 0), "");
}

/* prefetch.global.L1: the line at p toward this SM's L1 (a hint; nothing on
 * the emulator) */
void
cg_prefetch_l1(CgFn *f, LLVMValueRef p)
{
	if (!f->emu)
		cg_asm(f, NULL, "prefetch.global.L1 [$0];", "l", &p, 1, 1);
}

/* cp.async.bulk.prefetch.L2: `bytes` (i32, a multiple of 16) at p (16-byte
 * aligned) toward L2 (a hint; sm_90).  The emulator checks that the range's
 * first and last bytes lie in a buffer of the launch, and prefetches nothing. */
void
cg_prefetch_l2_bulk(CgFn *f, LLVMValueRef p, LLVMValueRef bytes)
{
	LLVMValueRef a[2] = {LLVMBuildPtrToInt(f->B, p, f->ti64, ""), bytes};
	CgIf c;

	if (!f->emu) {
		cg_asm(f, NULL, "cp.async.bulk.prefetch.L2.global [$0], $1;", "l,r,~{memory}", a, 2, 1);
		return;
	}
	cg_if(f, &c, cg_lt(f, cg_i32(f, 0), bytes));
	emu_check(f, p, f->ti8, 1, 0);
	emu_check(f, cg_gep(f, p, cg_sext64(f, cg_addi(f, bytes, -1)), 1), f->ti8, 1, 0);
	cg_endif(f, &c);
}

LLVMValueRef
cg_atom_add(CgFn *f, LLVMValueRef p, LLVMValueRef v)
{
	if (f->emu)
		emu_check(f, p, f->ti32, 1, 1);
	return LLVMBuildAtomicRMW(f->B, LLVMAtomicRMWBinOpAdd, p, v, LLVMAtomicOrderingMonotonic, 0);
}

/*
 * Spin until the i32 at p equals want.  The emulator runs CTAs one after
 * another in launch order, so what an earlier CTA set is there at the first
 * look; it gives up after 2^20 looks rather than hang on a builder's bug
 * (the result is then wrong, which its tests catch).
 */
void
cg_spin_until(CgFn *f, LLVMValueRef p, LLVMValueRef want)
{
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->B);
	LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(f->C, f->fn, "spin");
	LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(f->C, f->fn, "spun");
	LLVMValueRef n, v, wait, zero = cg_i32(f, 0);

	LLVMBuildBr(f->B, head);
	LLVMPositionBuilderAtEnd(f->B, head);
	n = LLVMBuildPhi(f->B, f->ti32, "looks");
	LLVMAddIncoming(n, &zero, &pre, 1);
	v = cg_gload_volatile(f, f->ti32, p, 4);
	wait = LLVMBuildICmp(f->B, LLVMIntNE, v, want, "");
	if (f->emu)
		wait = LLVMBuildAnd(f->B, wait, cg_lt(f, n, cg_i32(f, 1 << 20)), "");
	LLVMValueRef next = LLVMBuildAdd(f->B, n, cg_i32(f, 1), "");
	LLVMBasicBlockRef from = LLVMGetInsertBlock(f->B);
	LLVMAddIncoming(n, &next, &from, 1);
	LLVMBuildCondBr(f->B, wait, head, exit);
	LLVMPositionBuilderAtEnd(f->B, exit);
}

LLVMValueRef
cg_smem(CgFn *f)
{
	LLVMValueRef g;

	if (f->emu)
		return cg_call_emu(f, "moec_emu_smem", f->tptr, NULL, 0);
	g = LLVMGetNamedGlobal(f->M, "moec_smem");
	if (!g) {
		g = LLVMAddGlobalInAddressSpace(f->M, LLVMArrayType(f->ti8, 0), "moec_smem", 3);
		LLVMSetLinkage(g, LLVMExternalLinkage);
		LLVMSetAlignment(g, 128);
	}
	return g;
}

LLVMValueRef
cg_sptr(CgFn *f, LLVMValueRef off)
{
	return LLVMBuildGEP2(f->B, f->ti8, cg_smem(f), &off, 1, "");
}

LLVMValueRef
cg_sload(CgFn *f, LLVMTypeRef t, LLVMValueRef p, int align)
{
	LLVMValueRef v;

	if (f->emu)
		emu_check(f, p, t, 3, 0);
	v = LLVMBuildLoad2(f->B, t, p, "");
	LLVMSetAlignment(v, (unsigned)align);
	return v;
}

void
cg_sstore(CgFn *f, LLVMValueRef v, LLVMValueRef p, int align)
{
	if (f->emu)
		emu_check(f, p, LLVMTypeOf(v), 3, 1);
	LLVMSetAlignment(LLVMBuildStore(f->B, v, p), (unsigned)align);
}

void
cg_barrier(CgFn *f)
{
	if (f->emu) {
		cg_call_emu(f, "moec_emu_barrier", NULL, NULL, 0);
		return;
	}
	if (LLVMLookupIntrinsicID("llvm.nvvm.barrier0", 18)) {
		cg_intrinsic(f, "llvm.nvvm.barrier0", NULL, NULL, 0, NULL, 0);
	} else {
		LLVMValueRef z = cg_i32(f, 0);
		cg_intrinsic(f, "llvm.nvvm.barrier.cta.sync.aligned.all", NULL, NULL, 0, &z, 1);
	}
}

/* bar.sync / bar.arrive id, n (emu: moec_emu_bar_named counts threads). */
static void
bar_named(CgFn *f, LLVMValueRef id, int nthreads, int sync)
{
	LLVMValueRef a[3] = {id, cg_i32(f, nthreads), cg_i32(f, sync)};

	if (f->emu) {
		cg_call_emu(f, "moec_emu_bar_named", NULL, a, 3);
		return;
	}
	cg_asm(f, NULL, sync ? "bar.sync $0, $1;" : "bar.arrive $0, $1;", "r,r,~{memory}", a, 2, 1);
}

void
cg_bar_sync(CgFn *f, LLVMValueRef id, int nthreads)
{
	bar_named(f, id, nthreads, 1);
}

void
cg_bar_arrive(CgFn *f, LLVMValueRef id, int nthreads)
{
	bar_named(f, id, nthreads, 0);
}

/* shfl.sync.MODE.b32 over the full warp (i32; c: the PTX clamp operand);
 * the emulator's moec_emu_shfl_MODE stands for it */
static LLVMValueRef
shfl(CgFn *f, const char *mode, const char *emu, LLVMValueRef v, int k, int c)
{
	char name[40];

	if (f->emu) {
		LLVMValueRef io = cg_var(f, f->ti32, v), e[2] = {io, cg_i32(f, k)};
		cg_call_emu(f, emu, NULL, e, 2);
		return cg_get(f, io);
	}
	snprintf(name, sizeof name, "llvm.nvvm.shfl.sync.%s.i32", mode);
	return cg_intrinsic(f, name, f->ti32, NULL, 0, (LLVMValueRef[]){cg_i32(f, -1), v, cg_i32(f, k), cg_i32(f, c)}, 4);
}

LLVMValueRef
cg_shfl_up(CgFn *f, LLVMValueRef v, int delta)
{
	return shfl(f, "up", "moec_emu_shfl_up", v, delta, 0);
}

/* shfl.sync.bfly.b32 over the full warp: lane l gets lane (l ^ mask)'s v (i32) */
LLVMValueRef
cg_shfl_xor(CgFn *f, LLVMValueRef v, int mask)
{
	return shfl(f, "bfly", "moec_emu_shfl_xor", v, mask, 31);
}

/* Lane 31's f32 v in every lane of the warp: after the bfly step of mask m
 * lane L holds lane (L | m | the masks before)'s value, so lane 31's at the
 * end (a warp's sum without a shared slot and a CTA barrier). */
LLVMValueRef
cg_bcast31(CgFn *f, LLVMValueRef v)
{
	LLVMValueRef lane = cg_and(f, cg_tid(f, 0), 31);

	for (int m = 16; m >= 1; m /= 2) {
		LLVMValueRef o = LLVMBuildBitCast(f->B, cg_shfl_xor(f, LLVMBuildBitCast(f->B, v, f->ti32, ""), m),
						  f->tf32, "");
		v = cg_select(f, LLVMBuildICmp(f->B, LLVMIntNE, cg_and(f, lane, m), cg_i32(f, 0), ""), v, o);
	}
	return v;
}

/* ---- tensor-core building blocks ---- */

/* cp.async of 16 bytes (.cg: L2 only) or 4 (.ca: 16 is the only size .cg takes) */
static void
cp_async(CgFn *f, LLVMValueRef sdst, LLVMValueRef gsrc, int bytes)
{
	LLVMValueRef a[3] = {sdst, gsrc, NULL};
	LLVMTypeRef t = bytes == 16 ? LLVMVectorType(f->ti32, 4) : f->ti32;

	if (cg_fn_require(f, CG_CP_ASYNC, "cp.async") < 0)
		return;
	if (f->emu) {
		emu_check(f, gsrc, t, 1, 0);
		emu_check(f, sdst, t, 3, 1);
		a[2] = cg_i32(f, bytes);
		cg_call_emu(f, "moec_emu_cp_async", NULL, a, 3);
		return;
	}
	cg_intrinsic(f, bytes == 16 ? "llvm.nvvm.cp.async.cg.shared.global.16" : "llvm.nvvm.cp.async.ca.shared.global.4",
		     NULL, NULL, 0, a, 2);
}

void
cg_cp_async16(CgFn *f, LLVMValueRef sdst, LLVMValueRef gsrc)
{
	cp_async(f, sdst, gsrc, 16);
}

/* cp.async.cg of 16 bytes that reads gsrc only where live (i1) and writes
 * zeros elsewhere without a global read (src-size 0).  gsrc must be a valid
 * address either way (the emulator checks it). */
void
cg_cp_async16_zfill(CgFn *f, LLVMValueRef sdst, LLVMValueRef gsrc, LLVMValueRef live)
{
	LLVMTypeRef t = LLVMVectorType(f->ti32, 4);
	LLVMValueRef n = LLVMBuildSelect(f->B, live, cg_i32(f, 16), cg_i32(f, 0), "");
	LLVMValueRef a[4] = {sdst, gsrc, n, n};

	if (cg_fn_require(f, CG_CP_ASYNC, "cp.async") < 0)
		return;
	if (f->emu) {
		emu_check(f, gsrc, t, 1, 0);
		emu_check(f, sdst, t, 3, 1);
		a[2] = cg_i32(f, 16);
		cg_call_emu(f, "moec_emu_cp_async_src", NULL, a, 4);
		return;
	}
	cg_intrinsic(f, "llvm.nvvm.cp.async.cg.shared.global.16.s", NULL, NULL, 0, a, 3);
}

/* cp.async.ca of 4 bytes (the FP8 scales the warp-specialised producer stages) */
void
cg_cp_async4(CgFn *f, LLVMValueRef sdst, LLVMValueRef gsrc)
{
	cp_async(f, sdst, gsrc, 4);
}

void
cg_cp_async_commit(CgFn *f)
{
	if (f->emu) {
		cg_call_emu(f, "moec_emu_cp_commit", NULL, NULL, 0);
		return;
	}
	cg_intrinsic(f, "llvm.nvvm.cp.async.commit.group", NULL, NULL, 0, NULL, 0);
}

void
cg_cp_async_wait(CgFn *f, int n)
{
	LLVMValueRef c = cg_i32(f, n);

	if (f->emu) {
		cg_call_emu(f, "moec_emu_cp_wait", NULL, &c, 1);
		return;
	}
	cg_intrinsic(f, "llvm.nvvm.cp.async.wait.group", NULL, NULL, 0, &c, 1);
}

void
cg_ldmatrix_x4(CgFn *f, LLVMValueRef saddr, int trans, LLVMValueRef out[4])
{
	LLVMTypeRef ret;
	LLVMValueRef r;

	if (cg_fn_require(f, CG_LDMATRIX, "ldmatrix") < 0) {
		for (int i = 0; i < 4; i++)
			out[i] = LLVMGetUndef(f->ti32);
		return;
	}
	if (f->emu) {
		LLVMTypeRef at = LLVMArrayType(f->ti32, 4);
		LLVMValueRef buf = cg_var(f, at, NULL), a[3];
		a[0] = buf;
		a[1] = saddr;
		a[2] = cg_i32(f, trans);
		emu_check(f, saddr, f->ti8, 3, 0);
		cg_call_emu(f, "moec_emu_ldmatrix", NULL, a, 3);
		for (int i = 0; i < 4; i++) {
			LLVMValueRef idx = cg_i32(f, i);
			out[i] = LLVMBuildLoad2(f->B, f->ti32,
						LLVMBuildGEP2(f->B, f->ti32, buf, &idx, 1, ""), "");
		}
		return;
	}
	{
		LLVMTypeRef i4[4] = {f->ti32, f->ti32, f->ti32, f->ti32};
		ret = LLVMStructTypeInContext(f->C, i4, 4, 0);
		r = cg_intrinsic(f, trans ? "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16"
					  : "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16",
				 ret, &f->tsptr, 1, &saddr, 1);
		for (int i = 0; i < 4; i++)
			out[i] = LLVMBuildExtractValue(f->B, r, (unsigned)i, "");
	}
}

void
cg_mma_sync(CgFn *f, DType dt, LLVMValueRef a[4], LLVMValueRef b[2], LLVMValueRef c[4],
	    LLVMValueRef d[4])
{
	LLVMValueRef args[10], r;
	LLVMTypeRef f4[4] = {f->tf32, f->tf32, f->tf32, f->tf32};
	unsigned cap = dt == DT_BF16 ? CG_MMA_BF16 : dt == DT_TF32 ? CG_MMA_TF32 : CG_MMA_F16;

	if (cg_fn_require(f, cap, dt == DT_TF32 ? "mma.sync m16n8k8" : "mma.sync m16n8k16") < 0) {
		for (int i = 0; i < 4; i++)
			d[i] = LLVMGetUndef(f->tf32);
		return;
	}
	if (f->emu) {
		LLVMValueRef ab = cg_var(f, LLVMArrayType(f->ti32, 6), NULL);
		LLVMValueRef cd = cg_var(f, LLVMArrayType(f->tf32, 8), NULL), ea[3];
		for (int i = 0; i < 6; i++) {
			LLVMValueRef idx = cg_i32(f, i);
			LLVMBuildStore(f->B, i < 4 ? a[i] : b[i - 4],
				       LLVMBuildGEP2(f->B, f->ti32, ab, &idx, 1, ""));
		}
		for (int i = 0; i < 4; i++) {
			LLVMValueRef idx = cg_i32(f, i);
			LLVMBuildStore(f->B, c[i], LLVMBuildGEP2(f->B, f->tf32, cd, &idx, 1, ""));
		}
		ea[0] = ab;
		ea[1] = cd;
		ea[2] = cg_i32(f, dt == DT_BF16 ? 0 : dt == DT_F16 ? 1 : 2);
		cg_call_emu(f, "moec_emu_mma", NULL, ea, 3);
		for (int i = 0; i < 4; i++) {
			LLVMValueRef idx = cg_i32(f, 4 + i);
			d[i] = LLVMBuildLoad2(f->B, f->tf32,
					      LLVMBuildGEP2(f->B, f->tf32, cd, &idx, 1, ""), "");
		}
		return;
	}
	for (int i = 0; i < 4; i++)
		args[i] = a[i];
	args[4] = b[0];
	args[5] = b[1];
	for (int i = 0; i < 4; i++)
		args[6 + i] = c[i];
	r = cg_intrinsic(f, dt == DT_BF16   ? "llvm.nvvm.mma.m16n8k16.row.col.bf16"
			    : dt == DT_TF32 ? "llvm.nvvm.mma.m16n8k8.row.col.tf32"
					    : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
			 LLVMStructTypeInContext(f->C, f4, 4, 0), NULL, 0, args, 10);
	for (int i = 0; i < 4; i++)
		d[i] = LLVMBuildExtractValue(f->B, r, (unsigned)i, "");
}

void
cg_setmaxnreg(CgFn *f, int inc, int nreg)
{
	LLVMValueRef n = cg_i32(f, nreg);

	if (!f->emu && cg_fn_require(f, CG_SETMAXNREG, "setmaxnreg") < 0)
		return;
	if (nreg < 24 || nreg > 256 || nreg % 8) {
		diag_error(f->d, LOC_NONE, "setmaxnreg %d: need a multiple of 8 in 24..256", nreg);
		f->err = 1;
		return;
	}
	if (!f->k->maxnreg) {	/* ptxas would guess the entry count, or ignore setmaxnreg (C7508) */
		if (!f->err)	/* else cg_fn_maxnreg said why */
			diag_error(f->d, LOC_NONE, "setmaxnreg in kernel '%s', whose registers at entry are not "
				   "pinned (cg_fn_maxnreg)", f->k->name);
		f->err = 1;
		return;
	}
	if (f->emu) {	/* a warpgroup collective there: uniformity is checked */
		LLVMValueRef c = cg_i32(f, inc << 16 | nreg);
		cg_call_emu(f, "moec_emu_setmaxnreg", NULL, &c, 1);
		return;
	}
	cg_intrinsic(f, inc ? "llvm.nvvm.setmaxnreg.inc.sync.aligned.u32"
			    : "llvm.nvvm.setmaxnreg.dec.sync.aligned.u32",
		     NULL, NULL, 0, &n, 1);
}

/* ---- mbarriers and TMA (sm_90; the emulator models them) ---- */

/* The shared-window address (i32) of dynamic shared byte off. */
static LLVMValueRef
saddr(CgFn *f, LLVMValueRef off)
{
	return LLVMBuildPtrToInt(f->B, cg_sptr(f, off), f->ti32, "");
}

static int
need_tma(CgFn *f, const char *what)
{
	return f->emu ? 0 : cg_fn_require(f, CG_TMA, what);
}

void
cg_mbar_init(CgFn *f, LLVMValueRef off, int count)
{
	LLVMValueRef a[2] = {NULL, cg_i32(f, count)};

	if (need_tma(f, "mbarrier") < 0)
		return;
	if (f->emu) {
		a[0] = cg_sptr(f, off);
		cg_call_emu(f, "moec_emu_mbar_init", NULL, a, 2);
		return;
	}
	a[0] = saddr(f, off);
	cg_asm(f, NULL, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", a, 2, 1);
}

void
cg_mbar_init_fence(CgFn *f)
{
	if (need_tma(f, "mbarrier") < 0)
		return;
	if (f->emu) {	/* the thread's barriers become visible to the cluster's peers */
		cg_call_emu(f, "moec_emu_mbar_init_fence", NULL, NULL, 0);
		return;
	}
	cg_asm(f, NULL, "fence.mbarrier_init.release.cluster;", "~{memory}", NULL, 0, 1);
}

void
cg_mbar_arrive(CgFn *f, LLVMValueRef off)
{
	LLVMValueRef a[2] = {NULL, cg_i32(f, -1)};

	if (need_tma(f, "mbarrier") < 0)
		return;
	if (f->emu) {
		a[0] = cg_sptr(f, off);
		cg_call_emu(f, "moec_emu_mbar_arrive", NULL, a, 2);
		return;
	}
	a[0] = saddr(f, off);
	cg_asm(f, NULL, "{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [$0];\n}", "r,~{memory}",
	       a, 1, 1);
}

void
cg_cp_async_mbar_arrive(CgFn *f, LLVMValueRef off)
{
	LLVMValueRef a;

	if (need_tma(f, "cp.async.mbarrier.arrive") < 0)
		return;
	a = f->emu ? cg_sptr(f, off) : saddr(f, off);
	if (f->emu) {
		cg_call_emu(f, "moec_emu_cp_mbar_arrive", NULL, &a, 1);
		return;
	}
	cg_asm(f, NULL, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r,~{memory}", &a, 1, 1);
}

void
cg_mbar_arrive_tx(CgFn *f, LLVMValueRef off, LLVMValueRef bytes)
{
	LLVMValueRef a[2] = {NULL, bytes};

	if (need_tma(f, "mbarrier") < 0)
		return;
	if (f->emu) {
		a[0] = cg_sptr(f, off);
		cg_call_emu(f, "moec_emu_mbar_arrive", NULL, a, 2);
		return;
	}
	a[0] = saddr(f, off);
	cg_asm(f, NULL, "{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [$0], $1;\n}",
	       "r,r,~{memory}", a, 2, 1);
}

void
cg_mbar_wait(CgFn *f, LLVMValueRef off, LLVMValueRef parity)
{
	LLVMValueRef a[2] = {NULL, parity}, done;
	LLVMBasicBlockRef loop, out;

	if (need_tma(f, "mbarrier") < 0)
		return;
	if (f->emu) {	/* blocks there, yielding to the other threads */
		a[0] = cg_sptr(f, off);
		cg_call_emu(f, "moec_emu_mbar_wait", NULL, a, 2);
		return;
	}
	a[0] = saddr(f, off);
	loop = LLVMAppendBasicBlockInContext(f->C, f->fn, "mbar.wait");
	out = LLVMAppendBasicBlockInContext(f->C, f->fn, "mbar.done");
	LLVMBuildBr(f->B, loop);
	LLVMPositionBuilderAtEnd(f->B, loop);
	done = cg_asm(f, f->ti32,
		      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\n"
		      "selp.b32 $0, 1, 0, p;\n}", "=r,r,r,~{memory}", a, 2, 1);
	LLVMBuildCondBr(f->B, LLVMBuildICmp(f->B, LLVMIntNE, done, cg_i32(f, 0), ""), out, loop);
	LLVMPositionBuilderAtEnd(f->B, out);
}

/*
 * cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes: `bytes`
 * (i32, a multiple of 16) from the global p (16-byte aligned) to the shared
 * offset dst (16-byte aligned), complete_tx on the mbarrier at shared offset
 * mbar (the non-tensor bulk copy: no tensor map; sm_90).  The emulator
 * checks the range against the launch's buffers and lands it at the round's
 * end, as a tensor copy (emu.c's moec_emu_bulk_load).
 */
void
cg_bulk_load(CgFn *f, LLVMValueRef dst, LLVMValueRef p, LLVMValueRef bytes, LLVMValueRef mbar)
{
	LLVMValueRef a[4];

	if (need_tma(f, "cp.async.bulk") < 0)
		return;
	if (f->emu) {
		a[0] = cg_sptr(f, dst);
		a[1] = p;
		a[2] = bytes;
		a[3] = cg_sptr(f, mbar);
		cg_call_emu(f, "moec_emu_bulk_load", NULL, a, 4);
		return;
	}
	a[0] = saddr(f, dst);
	a[1] = LLVMBuildPtrToInt(f->B, p, f->ti64, "");
	a[2] = bytes;
	a[3] = saddr(f, mbar);
	cg_asm(f, NULL, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];",
	       "r,l,r,r,~{memory}", a, 4, 1);
}

/* The PTX name of parameter i: LLVM writes "<kernel>_param_<i>", '.' as "_$_". */
static void
param_name(CgFn *f, int i, char *buf, size_t n)
{
	size_t k = 0;

	for (const char *c = f->k->name; *c && k + 4 < n; c++) {
		if (*c == '.') {
			memcpy(buf + k, "_$_", 3);
			k += 3;
		} else {
			buf[k++] = *c;
		}
	}
	snprintf(buf + k, n - k, "_param_%d", i);
}

/* Parameter param is a tensor map of a rank TMA takes (2 or 3); else a
 * diagnostic naming the builder who asked, and the function fails. */
static int
tmap_param_ok(CgFn *f, const char *who, int param, int rank)
{
	if (rank >= 2 && rank <= 3 && param >= 0 && param < f->k->nparam && f->k->param[param].kind == CGP_TMAP)
		return 1;
	diag_error(f->d, LOC_NONE, "%s: parameter %d is no tensor map, or rank %d", who, param, rank);
	f->err = 1;
	return 0;
}

/* The inline PTX of a TMA instruction on the tensor map of kernel parameter
 * `param`: the map's generic address in m, then `before`[m, {coords}]`after`;
 * operands lead[0..nlead) ($0..), then the rank coordinates. */
static void
tmap_asm(CgFn *f, int param, const char *regs, const char *before, const char *after,
	 LLVMValueRef *lead, int nlead, int rank, LLVMValueRef *coords)
{
	LLVMValueRef a[8];
	char pname[400], text[1024], cons[64] = "";

	param_name(f, param, pname, sizeof pname);
	snprintf(text, sizeof text,
		 "{\n.reg .b64 m;\n%smov.b64 m, %s;\ncvta.param.u64 m, m;\n%s[m, {$%d, $%d%s%.0d}]%s;\n}",
		 regs, pname, before, nlead, nlead + 1, rank == 3 ? ", $" : "", rank == 3 ? nlead + 2 : 0,
		 after);
	for (int i = 0; i < nlead + rank; i++) {
		a[i] = i < nlead ? lead[i] : coords[i - nlead];
		strcat(cons, i ? ",r" : "r");
	}
	strcat(cons, ",~{memory}");
	cg_asm(f, NULL, text, cons, a, nlead + rank, 1);
}

void
cg_tma_load(CgFn *f, int param, LLVMValueRef dst, LLVMValueRef mbar, int rank, LLVMValueRef *coords)
{
	LLVMValueRef a[6];

	if (need_tma(f, "cp.async.bulk.tensor") < 0)
		return;
	if (!tmap_param_ok(f, "cg_tma_load", param, rank))
		return;
	if (f->emu) {
		a[0] = cg_sptr(f, dst);
		a[1] = cg_arg(f, param);
		a[2] = cg_sptr(f, mbar);
		for (int i = 0; i < 3; i++)
			a[3 + i] = i < rank ? coords[i] : cg_i32(f, 0);
		cg_call_emu(f, "moec_emu_tma_load", NULL, a, 6);
		return;
	}
	char op[160];
	LLVMValueRef lead[2] = {saddr(f, dst), saddr(f, mbar)};
	snprintf(op, sizeof op, "cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes "
		 "[$0], ", rank);
	tmap_asm(f, param, "", op, ", [$1]", lead, 2, rank, coords);
}

/* A hint: the emulator has no L2, so nothing to do there (the tensor map is still checked). */
void
cg_tma_prefetch(CgFn *f, int param, int rank, LLVMValueRef *coords)
{
	if (need_tma(f, "cp.async.bulk.prefetch.tensor") < 0)
		return;
	if (!tmap_param_ok(f, "cg_tma_prefetch", param, rank) || f->emu)
		return;
	char op[96];
	snprintf(op, sizeof op, "cp.async.bulk.prefetch.tensor.%dd.L2.global.tile ", rank);
	tmap_asm(f, param, "", op, "", NULL, 0, rank, coords);
}

void
cg_tma_store(CgFn *f, int param, LLVMValueRef src, int rank, LLVMValueRef *coords)
{
	LLVMValueRef a[5];

	if (need_tma(f, "cp.async.bulk.tensor (store)") < 0)
		return;
	if (!tmap_param_ok(f, "cg_tma_store", param, rank))
		return;
	if (f->emu) {
		a[0] = cg_arg(f, param);
		a[1] = cg_sptr(f, src);
		for (int i = 0; i < 3; i++)
			a[2 + i] = i < rank ? coords[i] : cg_i32(f, 0);
		cg_call_emu(f, "moec_emu_tma_store", NULL, a, 5);
		return;
	}
	char op[96];
	LLVMValueRef lead[1] = {saddr(f, src)};
	snprintf(op, sizeof op, "cp.async.bulk.tensor.%dd.global.shared::cta.bulk_group ", rank);
	tmap_asm(f, param, "", op, ", [$0]", lead, 1, rank, coords);
}

void
cg_bulk_commit(CgFn *f)
{
	if (need_tma(f, "cp.async.bulk.commit_group") < 0)
		return;
	if (f->emu)
		cg_call_emu(f, "moec_emu_bulk_commit", NULL, NULL, 0);
	else
		cg_asm(f, NULL, "cp.async.bulk.commit_group;", "~{memory}", NULL, 0, 1);
}

void
cg_bulk_wait_read(CgFn *f, int n)
{
	LLVMValueRef a = cg_i32(f, n);
	char text[64];

	if (need_tma(f, "cp.async.bulk.wait_group.read") < 0)
		return;
	if (f->emu) {
		cg_call_emu(f, "moec_emu_bulk_wait_read", NULL, &a, 1);
		return;
	}
	snprintf(text, sizeof text, "cp.async.bulk.wait_group.read %d;", n);
	cg_asm(f, NULL, text, "~{memory}", NULL, 0, 1);
}

/* ---- clusters (sm_90; the emulator runs a cluster's CTAs together: emu.c) ---- */

static int
need_cluster(CgFn *f, const char *what)
{
	return f->emu ? 0 : cg_fn_require(f, CG_TMA, what);
}

void
cg_fn_cluster(CgFn *f, int n)
{
	if (need_cluster(f, "a cluster launch") < 0)
		return;
	f->k->cluster = n;
}

void
cg_cluster_check(CgFn *f, int n)
{
	LLVMValueRef a = cg_i32(f, n);

	if (need_cluster(f, "%cluster_nctarank") < 0)
		return;
	if (f->emu) {
		cg_call_emu(f, "moec_emu_cluster_check", NULL, &a, 1);
		return;
	}
	cg_asm(f, NULL, "{\n.reg .u32 n;\n.reg .pred p;\nmov.u32 n, %cluster_nctarank;\n"
	       "setp.ne.u32 p, n, $0;\n@p trap;\n}", "r", &a, 1, 1);
}

LLVMValueRef
cg_cluster_rank(CgFn *f)
{
	LLVMValueRef c;

	if (need_cluster(f, "%cluster_ctarank") < 0)
		return LLVMGetUndef(f->ti32);
	if (f->emu) {
		c = cg_i32(f, EMU_CLUSTER_CTARANK);
		return cg_call_emu(f, "moec_emu_sreg", f->ti32, &c, 1);
	}
	return cg_asm(f, f->ti32, "mov.u32 $0, %cluster_ctarank;", "=r", NULL, 0, 0);
}

void
cg_cluster_sync(CgFn *f)
{
	if (need_cluster(f, "barrier.cluster") < 0)
		return;
	if (f->emu) {
		cg_call_emu(f, "moec_emu_cluster_arrive", NULL, NULL, 0);
		cg_call_emu(f, "moec_emu_cluster_wait", NULL, NULL, 0);
		return;
	}
	cg_asm(f, NULL, "barrier.cluster.arrive;\nbarrier.cluster.wait;", "~{memory}", NULL, 0, 1);
}

void
cg_mbar_arrive_cluster(CgFn *f, LLVMValueRef off, LLVMValueRef rank)
{
	LLVMValueRef a[2];

	if (need_cluster(f, "mbarrier.arrive.shared::cluster") < 0)
		return;
	if (f->emu) {
		a[0] = cg_sptr(f, off);
		a[1] = rank;
		cg_call_emu(f, "moec_emu_mbar_arrive_cluster", NULL, a, 2);
		return;
	}
	a[0] = saddr(f, off);
	a[1] = rank;
	/* the default semantics (.release at CTA scope), as CUTLASS's cluster
	 * pipelines arrive: ptxas compiles `.release.cluster` to MEMBAR.ALL.CTA +
	 * MEMBAR.ALL.GPU before the arrival, which in a consumer warp's per-k-tile
	 * release waits for its outstanding global stores and stalls the wgmma
	 * issue (the clusters of session 25 ran at 0.46x).  What the peer's
	 * producer waits for is only that this warp's wgmma reads of the stage
	 * are over, which wgmma.wait_group already made so. */
	cg_asm(f, NULL, "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, $0, $1;\n"
	       "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}", "r,r,~{memory}", a, 2, 1);
}

/* The multicast copy to the CTAs of mask: the constant cmask, or (vmask
 * not NULL) a value, cvt to the 16-bit register the instruction takes. */
static void
tma_multicast(CgFn *f, int param, LLVMValueRef dst, LLVMValueRef mbar, int rank, LLVMValueRef *coords, int cmask,
	      LLVMValueRef vmask)
{
	if (need_cluster(f, "cp.async.bulk.tensor .multicast::cluster") < 0)
		return;
	if (!tmap_param_ok(f, "cg_tma_load_multicast", param, rank))
		return;
	if (f->emu) {
		LLVMValueRef a[7] = {cg_sptr(f, dst), cg_arg(f, param), cg_sptr(f, mbar)};
		for (int i = 0; i < 3; i++)
			a[3 + i] = i < rank ? coords[i] : cg_i32(f, 0);
		a[6] = vmask ? vmask : cg_i32(f, cmask);
		cg_call_emu(f, "moec_emu_tma_load_multicast", NULL, a, 7);
		return;
	}
	char op[200];
	LLVMValueRef lead[3] = {saddr(f, dst), saddr(f, mbar), vmask};
	if (vmask)
		snprintf(op, sizeof op, "cvt.u16.u32 k, $2;\ncp.async.bulk.tensor.%dd.shared::cluster.global."
			 "mbarrier::complete_tx::bytes.multicast::cluster [$0], ", rank);
	else
		snprintf(op, sizeof op, "mov.b16 k, %d;\ncp.async.bulk.tensor.%dd.shared::cluster.global."
			 "mbarrier::complete_tx::bytes.multicast::cluster [$0], ", cmask, rank);
	tmap_asm(f, param, ".reg .b16 k;\n", op, ", [$1], k", lead, vmask ? 3 : 2, rank, coords);
}

void
cg_tma_load_multicast(CgFn *f, int param, LLVMValueRef dst, LLVMValueRef mbar, int rank, LLVMValueRef *coords,
		      int mask)
{
	tma_multicast(f, param, dst, mbar, rank, coords, mask, NULL);
}

void
cg_tma_load_multicast_to(CgFn *f, int param, LLVMValueRef dst, LLVMValueRef mbar, int rank, LLVMValueRef *coords,
			 LLVMValueRef mask)
{
	tma_multicast(f, param, dst, mbar, rank, coords, 0, mask);
}

LLVMValueRef
cg_elect(CgFn *f)
{
	LLVMValueRef r;

	if (!f->emu && cg_fn_require(f, CG_TMA, "elect.sync") < 0)
		return LLVMGetUndef(f->ti1);
	if (f->emu) {
		LLVMValueRef io = cg_var(f, f->ti32, cg_i32(f, 0));
		cg_call_emu(f, "moec_emu_elect", NULL, &io, 1);
		r = cg_get(f, io);
	} else {
		r = cg_asm(f, f->ti32, "{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.b32 $0, 1, 0, p;\n}",
			   "=r", NULL, 0, 1);
	}
	return LLVMBuildICmp(f->B, LLVMIntNE, r, cg_i32(f, 0), "");
}

/* vote.sync.any over the full warp (every lane must reach it): i1 */
LLVMValueRef
cg_vote_any(CgFn *f, LLVMValueRef pred)
{
	LLVMValueRef r, a[2];

	if (f->emu) {
		LLVMValueRef io = cg_var(f, f->ti32, LLVMBuildZExt(f->B, pred, f->ti32, ""));
		cg_call_emu(f, "moec_emu_vote_any", NULL, &io, 1);
		r = cg_get(f, io);
		return LLVMBuildICmp(f->B, LLVMIntNE, r, cg_i32(f, 0), "");
	}
	a[0] = cg_i32(f, -1);
	a[1] = pred;
	return cg_intrinsic(f, "llvm.nvvm.vote.any.sync", f->ti1, NULL, 0, a, 2);
}

/* A full-warp i32 operation on v (every lane must reach it): the intrinsic
 * with the full mask (first or last of its two operands), or on the
 * emulator its runtime helper, which rewrites v in place. */
static LLVMValueRef
warp_i32(CgFn *f, const char *emu, const char *intr, int mask_first, LLVMValueRef v)
{
	LLVMValueRef a[2];

	if (f->emu) {
		LLVMValueRef io = cg_var(f, f->ti32, v);
		cg_call_emu(f, emu, NULL, &io, 1);
		return cg_get(f, io);
	}
	a[!mask_first] = cg_i32(f, -1);
	a[mask_first] = v;
	return cg_intrinsic(f, intr, f->ti32, NULL, 0, a, 2);
}

/* match.any.sync.b32: the mask (i32) of the lanes whose v (i32) equals this lane's */
LLVMValueRef
cg_match_any(CgFn *f, LLVMValueRef v)
{
	return warp_i32(f, "moec_emu_match_any", "llvm.nvvm.match.any.sync.i32", 1, v);
}

/* redux.sync.max.u32: the warp's largest v (i32, unsigned) in every lane; one instruction (sm_80) */
LLVMValueRef
cg_redux_umax(CgFn *f, LLVMValueRef v)
{
	return warp_i32(f, "moec_emu_redux_umax", "llvm.nvvm.redux.sync.umax", 0, v);
}

/* bar.warp.sync over the full warp: the lanes' shared-memory accesses before
 * it are seen by every lane after it (emu: a warp collective, which orders
 * the lanes the same way) */
void
cg_syncwarp(CgFn *f)
{
	LLVMValueRef a = cg_i32(f, -1);

	if (f->emu) {
		(void)cg_vote_any(f, LLVMConstInt(f->ti1, 0, 0));
		return;
	}
	cg_intrinsic(f, "llvm.nvvm.bar.warp.sync", NULL, NULL, 0, &a, 1);
}

void
cg_wgmma_fence(CgFn *f)
{
	if (cg_fn_require(f, CG_WGMMA, "wgmma.fence") < 0)
		return;
	cg_asm(f, NULL, "wgmma.fence.sync.aligned;", "~{memory}", NULL, 0, 1);
}

/* ---- conversions ---- */

LLVMTypeRef
cg_raw_type(CgFn *f, DType dt)
{
	return dt == DT_F32 ? f->tf32 : f->ti16;
}

LLVMValueRef
cg_to_f32(CgFn *f, LLVMValueRef raw, DType dt)
{
	LLVMBuilderRef B = f->B;

	switch (dt) {
	case DT_F32:
		return raw;
	case DT_BF16:		/* exact: the high half of an f32 */
		return LLVMBuildBitCast(B, LLVMBuildShl(B, LLVMBuildZExt(B, raw, f->ti32, ""),
							cg_i32(f, 16), ""), f->tf32, "");
	case DT_F16:
		if (f->emu) {
			LLVMValueRef a = LLVMBuildZExt(B, raw, f->ti32, "");
			return cg_call_emu(f, "moec_emu_f16_to_f32", f->tf32, &a, 1);
		}
		return LLVMBuildFPExt(B, LLVMBuildBitCast(B, raw, f->tf16, ""), f->tf32, "");
	default:
		die("cg_to_f32: %s", dtype_name(dt));
	}
}

LLVMValueRef
cg_from_f32(CgFn *f, LLVMValueRef x, DType dt)
{
	LLVMBuilderRef B = f->B;

	switch (dt) {
	case DT_F32:
		return x;
	case DT_BF16:
	case DT_F16:
		if (f->emu) {
			LLVMValueRef r = cg_call_emu(f, dt == DT_BF16 ? "moec_emu_f32_to_bf16"
								      : "moec_emu_f32_to_f16",
						     f->ti32, &x, 1);
			return LLVMBuildTrunc(B, r, f->ti16, "");
		}
		if (dt == DT_BF16 && cg_fn_require(f, CG_CVT_BF16, "f32 to bf16") < 0)
			return LLVMGetUndef(f->ti16);
		return LLVMBuildBitCast(B, LLVMBuildFPTrunc(B, x, dt == DT_BF16 ? f->tbf16 : f->tf16, ""),
					f->ti16, "");
	default:
		die("cg_from_f32: %s", dtype_name(dt));
	}
}

LLVMValueRef
cg_to_tf32(CgFn *f, LLVMValueRef bits)
{
	LLVMValueRef x = LLVMBuildBitCast(f->B, bits, f->tf32, "");

	if (f->emu)
		return cg_call_emu(f, "moec_emu_f32_to_tf32", f->ti32, &x, 1);
	if (cg_fn_require(f, CG_MMA_TF32, "cvt.rna.tf32.f32") < 0)	/* both need sm_80 */
		return LLVMGetUndef(f->ti32);
	return cg_intrinsic(f, "llvm.nvvm.f2tf32.rna", f->ti32, NULL, 0, &x, 1);
}

LLVMValueRef
cg_pack16x2(CgFn *f, LLVMValueRef lo, LLVMValueRef hi)
{
	LLVMBuilderRef B = f->B;

	return LLVMBuildOr(B, LLVMBuildZExt(B, lo, f->ti32, ""),
			   LLVMBuildShl(B, LLVMBuildZExt(B, hi, f->ti32, ""), cg_i32(f, 16), ""), "");
}

LLVMValueRef
cg_fma16x2(CgFn *f, DType dt, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMValueRef x[4] = {cg_i32(f, dt == DT_BF16), a, b, c};

	if (f->emu)
		return cg_call_emu(f, "moec_emu_fma16x2", f->ti32, x, 4);
	if (cg_fn_require(f, CG_MMA_BF16, "fma.rn.bf16x2") < 0)	/* both need sm_80 */
		return LLVMGetUndef(f->ti32);
	return cg_asm(f, f->ti32, dt == DT_BF16 ? "fma.rn.bf16x2 $0, $1, $2, $3;" : "fma.rn.f16x2 $0, $1, $2, $3;",
		      "=r,r,r,r", x + 1, 3, 0);
}

LLVMValueRef
cg_max_bf16x2(CgFn *f, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef x[2] = {a, b};

	if (f->emu)
		return cg_call_emu(f, "moec_emu_max_bf16x2", f->ti32, x, 2);
	if (cg_fn_require(f, CG_MMA_BF16, "max.bf16x2") < 0)	/* sm_80 */
		return LLVMGetUndef(f->ti32);
	return cg_asm(f, f->ti32, "max.bf16x2 $0, $1, $2;", "=r,r,r", x, 2, 0);
}

LLVMValueRef
cg_lop3(CgFn *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, int lut)
{
	LLVMValueRef x[3] = {a, b, c}, r = cg_i32(f, 0);
	char text[64];

	if (f->emu) {	/* the minterms of lut, as and/or/xor (folded where constant) */
		for (int i = 0; i < 8; i++) {
			LLVMValueRef t = cg_i32(f, -1);
			if (!(lut >> i & 1))
				continue;
			for (int j = 0; j < 3; j++)
				t = LLVMBuildAnd(f->B, t, i >> (2 - j) & 1 ? x[j] : LLVMBuildNot(f->B, x[j], ""), "");
			r = LLVMBuildOr(f->B, r, t, "");
		}
		return r;
	}
	snprintf(text, sizeof text, "lop3.b32 $0, $1, $2, $3, 0x%02x;", lut & 0xff);
	return cg_asm(f, f->ti32, text, "=r,r,r,r", x, 3, 0);
}

/* ---- math ---- */

LLVMValueRef
cg_exp2(CgFn *f, LLVMValueRef x)
{
	if (f->emu)
		return cg_call_emu(f, "moec_emu_exp2", f->tf32, &x, 1);
	return cg_asm(f, f->tf32, "ex2.approx.ftz.f32 $0, $1;", "=f,f", &x, 1, 0);
}

LLVMValueRef
cg_exp(CgFn *f, LLVMValueRef x)
{
	return cg_exp2(f, LLVMBuildFMul(f->B, x, cg_f32(f, 1.4426950408889634), ""));
}

LLVMValueRef
cg_fmin(CgFn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(f->B, LLVMBuildFCmp(f->B, LLVMRealOLT, a, b, ""), a, b, "");
}

LLVMValueRef
cg_fmax(CgFn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(f->B, LLVMBuildFCmp(f->B, LLVMRealOGT, a, b, ""), a, b, "");
}

LLVMValueRef
cg_fma(CgFn *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	LLVMValueRef x[3] = {a, b, c};

	return cg_intrinsic(f, "llvm.fma", f->tf32, &f->tf32, 1, x, 3);
}

/* rcp.approx.ftz: 1/d within an ulp, subnormals flushed (the emulator: 1/d rounded to nearest) */
LLVMValueRef
cg_rcp(CgFn *f, LLVMValueRef d)
{
	if (f->emu)
		return cg_call_emu(f, "moec_emu_rcp", f->tf32, &d, 1);
	return cg_asm(f, f->tf32, "rcp.approx.ftz.f32 $0, $1;", "=f,f", &d, 1, 0);
}

/*
 * n / d rounded to nearest as div.rn.f32's fast path computes it (ptxas, sm_90a:
 * MUFU.RCP, then FFMA -d r + 1, r t + r, n r, -d q + n, r e + q): the same
 * instructions, without the FCHK range check and the call of the slow path
 * behind it.  Correctly rounded (so div.rn's bits) for n = 1 or 2 and 1 <= d
 * <= 2^87, the only range callers pass (their clamps and scalings keep it),
 * from any rcp within 2 ulp of 1/d (the PTX ISA's rcp.approx is within 1)
 * once d's one hard mantissa, all ones, takes its exact reciprocal (3 integer
 * instructions): check_program.c, test_fdiv_fast_sequence, every mantissa;
 * a binade's computation is the next one's scaled by 2 exactly, nothing
 * subnormal or overflowing on the way.  NaN stays NaN.  The emulator's rcp
 * is 1/d rounded to nearest.  The branch
 * a division kept ptxas from interleaving a GEMM epilogue's elements: 128
 * dependent chains in a row (docs/codegen.md, "Division without a branch").
 */
LLVMValueRef
cg_fdiv_fast(CgFn *f, LLVMValueRef n, LLVMValueRef d)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef nd = LLVMBuildFNeg(B, d, ""), db = LLVMBuildBitCast(B, d, f->ti32, ""), r, q, ones, fix;

	r = cg_rcp(f, d);
	/* a mantissa of all ones (the one where an rcp an ulp off misses):
	 * its reciprocal rounded to nearest, 2^-(k+1) (1 + 2^-23) */
	ones = LLVMBuildICmp(B, LLVMIntEQ, cg_and(f, db, 0x7fffff), cg_i32(f, 0x7fffff), "");
	fix = LLVMBuildOr(B, LLVMBuildSub(B, cg_i32(f, 253 << 23), cg_and(f, db, 0x7f800000), ""), cg_i32(f, 1), "");
	r = LLVMBuildSelect(B, ones, LLVMBuildBitCast(B, fix, f->tf32, ""), r, "");
	r = cg_fma(f, r, cg_fma(f, nd, r, cg_f32(f, 1.0)), r);
	q = LLVMBuildFMul(f->B, n, r, "");
	return cg_fma(f, r, cg_fma(f, nd, q, n), q);
}

/*
 * One divisor d > 0 for many quotients n / d (a quantisation group's scale):
 * rd = 1/d rounded to nearest once (div.rn), then for each n Markstein's
 * correction, q0 = |n| rd, e = fma(-q0, d, |n|), q = fma(e, rd, q0), with
 * n's sign put back (so -0 stays -0): 3 instructions and a sign where
 * div.rn's fast path is 6 behind a range check and a branch that ptxas
 * schedules nothing across.  n / d rounded to nearest when the quotient is
 * at least 2^-12 and at most 2^120 (a quantisation's |n| <= amax, d =
 * amax / qmax: at most ~qmax); below 2^-12 (n an f32 subnormal) within an
 * ulp, which no 8-bit format tells apart from 0.  d below 2^-64 is scaled
 * with n by 2^64 (exact); d = 0 or inf (rd inf or 0): q0 is the quotient
 * (inf, 0, NaN as n / d).  Checked: tests/unit/check_program.c,
 * test_fdiv_recip_sequence (every bf16 n against every bf16 amax's scale
 * over 121 binades, random f32), and the emulator runs these instructions.
 */
void
cg_recip(CgFn *f, LLVMValueRef d, CgRecip *r)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef tiny = LLVMBuildFCmp(B, LLVMRealOLT, d, cg_f32(f, 0x1p-64), "");

	r->k = LLVMBuildSelect(B, tiny, cg_f32(f, 0x1p64), cg_f32(f, 1), "");
	r->d = LLVMBuildFMul(B, d, r->k, "");
	r->rd = LLVMBuildFDiv(B, cg_f32(f, 1), r->d, "");
	r->special = LLVMBuildOr(B, LLVMBuildFCmp(B, LLVMRealOEQ, r->rd, cg_f32(f, 0), ""),
				 LLVMBuildFCmp(B, LLVMRealOEQ, r->rd, cg_f32(f, INFINITY), ""), "");
}

LLVMValueRef
cg_fdiv_recip(CgFn *f, LLVMValueRef n, const CgRecip *r)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef a = LLVMBuildFMul(B, cg_fabs(f, n), r->k, ""), q0 = LLVMBuildFMul(B, a, r->rd, ""), q, sg[2];

	q = cg_fma(f, cg_fma(f, LLVMBuildFNeg(B, q0, ""), r->d, a), r->rd, q0);
	sg[0] = LLVMBuildSelect(B, r->special, q0, q, "");
	sg[1] = n;
	return cg_intrinsic(f, "llvm.copysign", f->tf32, &f->tf32, 1, sg, 2);
}

/* n / d for tanh and erf: cg_fdiv_fast of d clamped to at most hi, where the
 * caller shows the clamp changes no result (or div.rn: --debug=div-rn) */
static LLVMValueRef
fdiv_clamped(CgFn *f, LLVMValueRef n, LLVMValueRef d, double hi)
{
	LLVMValueRef h = cg_f32(f, hi);

	if ((cg_module_debug(f->m) & DBG_DIV_RN) || f->div_rn)
		return LLVMBuildFDiv(f->B, n, d, "");
	d = LLVMBuildSelect(f->B, LLVMBuildFCmp(f->B, LLVMRealOGT, d, h, ""), h, d, "");	/* NaN stays */
	return cg_fdiv_fast(f, n, d);
}

/* 1 / (1 + e^-x): e^-x overflows to inf for x < -88 and the result is 0.
 * div.rn: its quotient is the result, subnormal for x in -88.7..-87.3, where
 * only div.rn's slow path rounds it right; an exact branch-free form (the
 * divisor scaled by 2^-64, the one double rounding corrected) measured
 * slower in the SwiGLU epilogues on the H200 (session 28: Qwen3-30B-A3B's
 * gate|up 509 -> 562 us; docs/codegen.md, "Division without a branch"). */
LLVMValueRef
cg_sigmoid(CgFn *f, LLVMValueRef x)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef e = cg_exp(f, LLVMBuildFNeg(B, x, ""));

	return LLVMBuildFDiv(B, cg_f32(f, 1.0), LLVMBuildFAdd(B, cg_f32(f, 1.0), e, ""), "");
}

/* sign(x) (1 - 2 / (e^2|x| + 1)): no cancellation for large |x|, inf -> 1.
 * The divisor is >= 2; clamped at 2^27 the quotient is 2^-26 where
 * it was smaller, and 1 - q rounds to 1 either way. */
LLVMValueRef
cg_tanh(CgFn *f, LLVMValueRef x)
{
	LLVMBuilderRef B = f->B;
	LLVMValueRef ax = cg_fmax(f, x, LLVMBuildFNeg(B, x, ""));
	LLVMValueRef e = cg_exp(f, LLVMBuildFMul(B, ax, cg_f32(f, 2.0), ""));
	LLVMValueRef t = LLVMBuildFSub(B, cg_f32(f, 1.0),
				       fdiv_clamped(f, cg_f32(f, 2.0),
						    LLVMBuildFAdd(B, e, cg_f32(f, 1.0), ""), 134217728.0), "");
	LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, x, cg_f32(f, 0.0), "");

	return LLVMBuildSelect(B, neg, LLVMBuildFNeg(B, t, ""), t, "");
}

/*
 * erf by Abramowitz & Stegun 7.1.26 on |x| (|error| <= 1.5e-7), odd
 * extension: 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^-x^2.
 * t = 1 / (1 + 0.3275911 |x|), its divisor >= 1; clamped at 2^16
 * only where |x| > 2e5, whose e^-x^2 is 0: the result is 1 either way.
 */
LLVMValueRef
cg_erf(CgFn *f, LLVMValueRef x)
{
	static const double a[5] = {0.254829592, -0.284496736, 1.421413741,
				    -1.453152027, 1.061405429};
	LLVMBuilderRef B = f->B;
	LLVMValueRef ax = cg_fmax(f, x, LLVMBuildFNeg(B, x, ""));
	LLVMValueRef t = fdiv_clamped(f, cg_f32(f, 1.0),
				      LLVMBuildFAdd(B, cg_f32(f, 1.0),
						    LLVMBuildFMul(B, ax, cg_f32(f, 0.3275911), ""), ""), 65536.0);
	LLVMValueRef p = cg_f32(f, a[4]), y, neg;

	for (int i = 3; i >= 0; i--)
		p = LLVMBuildFAdd(B, LLVMBuildFMul(B, p, t, ""), cg_f32(f, a[i]), "");
	p = LLVMBuildFMul(B, p, t, "");
	y = LLVMBuildFSub(B, cg_f32(f, 1.0),
			  LLVMBuildFMul(B, p, cg_exp(f, LLVMBuildFNeg(B, LLVMBuildFMul(B, ax, ax, ""), "")), ""), "");
	neg = LLVMBuildFCmp(B, LLVMRealOLT, x, cg_f32(f, 0.0), "");
	return LLVMBuildSelect(B, neg, LLVMBuildFNeg(B, y, ""), y, "");
}

/* ---- probes ---- */

int
cg_emit_probe(CgModule *m, const char *name, unsigned cap, Diag *d)
{
	CgParam p[1] = {{CGP_PTR, "x"}};
	int block[3] = {128, 1, 1};
	CgExpr grid[3] = {CG_EXPR_INT(1), CG_EXPR_INT(1), CG_EXPR_INT(1)};
	CgFn *f = cg_fn_begin(m, name, p, 1, 128, 1, d);
	LLVMValueRef x;

	if (!f)
		return -1;
	x = cg_arg(f, 0);
	switch (cap) {
	case CG_SETMAXNREG:	/* the registers it starts with: .inc takes none from the pool */
		cg_fn_maxnreg(f, 240);
		cg_setmaxnreg(f, 1, 240);
		break;
	case CG_WGMMA:
		cg_wgmma_fence(f);
		break;
	case CG_CP_ASYNC:
		cg_cp_async16(f, cg_sptr(f, cg_muli(f, cg_tid(f, 0), 16)),
			      cg_gep(f, x, cg_tid(f, 0), 16));
		cg_cp_async_commit(f);
		cg_cp_async_wait(f, 0);
		cg_barrier(f);
		cg_gstore(f, cg_sload(f, f->ti32, cg_sptr(f, cg_i32(f, 0)), 4), x, 4);
		break;
	case CG_MMA_BF16:
	case CG_MMA_TF32: {	/* tf32: the words as they are, not rounded (cg_to_tf32) */
		LLVMValueRef a[4], b[2], c[4], o[4];
		for (int i = 0; i < 4; i++) {
			a[i] = cg_gload(f, f->ti32, cg_gep(f, x, cg_i32(f, i), 4), 4);
			c[i] = cg_f32(f, 0);
		}
		b[0] = a[0];
		b[1] = a[1];
		cg_mma_sync(f, cap == CG_MMA_TF32 ? DT_TF32 : DT_BF16, a, b, c, o);
		cg_gstore(f, o[0], x, 4);
		break;
	}
	default:
		diag_error(d, LOC_NONE, "cg_emit_probe: no probe for %s", cg_cap_name(cap));
		f->err = 1;
	}
	return cg_fn_end(f, block, grid, 128 * 16, cg_cap_name(cap));
}
