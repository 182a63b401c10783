/*
 * codegen.h — kernels as LLVM IR for NVPTX, PTX text, ptxas, and a CPU
 * emulator for the emitted kernels.
 *
 * A CgModule collects the kernels of one target.  Kernel builders (k_*.c)
 * are C functions parameterised by a spec struct; they emit LLVM IR through
 * the helper layer of target.c and record, for every kernel, its parameter
 * list (kind + role) and its launch geometry, which is what a bundle's
 * `kernel` and `launch` lines need (docs/bundle.md).  cg_module_ptx() runs
 * the verifier, the O3 pipeline and the NVPTX backend; cg_ptxas() assembles
 * the PTX and reports registers, shared memory and spills.
 *
 * This is codegen's internal header: codegen/, its unit tests and
 * bench/gemm include it; the driver (tools/) includes program.h only
 * (tests/layers.sh checks both).  Only codegen/ includes LLVM headers: its
 * files define CG_INTERNAL before including this header to see the helper
 * layer (LLVM types); tests see only the plain-C part.
 *
 * The target "emu" builds the same kernels for the host CPU, with every
 * GPU-specific operation (thread ids, barriers, cp.async, ldmatrix, mma)
 * turned into a call to the emulator of emu.c, which runs one CTA (or the
 * CTAs of one cluster together) at a time with one user-level thread per
 * GPU thread.  Unit tests use it to check what
 * the kernels compute on a machine without a GPU.
 */
#ifndef MOEC_CODEGEN_H
#define MOEC_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"
#include "ir.h"
#include "bundle.h"
#include "program.h"

/* target.c: targets (CgTarget: program.h) and their capabilities */

/*
 * Capabilities a builder asks for before it emits an instruction: LLVM
 * aborts the process on an instruction the target lacks, so builders gate
 * themselves with cg_target_has() / cg_require() and report a diagnostic.
 */
enum {
	CG_MMA_F16 = 1 << 0,	/* mma.sync m16n8k16 f16 (sm_80) */
	CG_MMA_BF16 = 1 << 1,	/* mma.sync m16n8k16 bf16 (sm_80) */
	CG_MMA_TF32 = 1 << 2,	/* mma.sync m16n8k8 tf32 (sm_80) */
	CG_LDMATRIX = 1 << 3,	/* ldmatrix (sm_75) */
	CG_CP_ASYNC = 1 << 4,	/* cp.async (sm_80) */
	CG_CVT_BF16 = 1 << 5,	/* cvt.rn.bf16.f32 (sm_80) */
	CG_TMA = 1 << 6,	/* cp.async.bulk.tensor + mbarrier tx (sm_90, PTX 8.0) */
	CG_CLUSTER = 1 << 7,	/* thread-block clusters (sm_90) */
	CG_WGMMA = 1 << 8,	/* wgmma.mma_async (sm_90a) */
	CG_SETMAXNREG = 1 << 9,	/* setmaxnreg (sm_90a) */
	CG_GRIDDEP = 1 << 10,	/* griddepcontrol: programmatic dependent launch (sm_90, PTX 7.8) */
	CG_CVT_F8 = 1 << 11,	/* cvt e4m3x2/e5m2x2 <-> f32 pairs, f16x2 (sm_89, PTX 7.8) */
};
int cg_target_has(const CgTarget *t, unsigned caps);	/* 1 when all of caps */
/* 0, or a diagnostic naming what needs the missing capabilities. */
int cg_require(const CgTarget *t, unsigned caps, const char *what, Diag *d);
const char *cg_cap_name(unsigned cap);		/* one bit: "wgmma" */
int cg_target_is_emu(const CgTarget *t);
/* PTX written for a is valid for b (the lower sm and PTX ISA, a not sm_90a-like). */
int cg_target_ptx_fits(const CgTarget *a, const CgTarget *b);
/* What a launch plan for the target is sized by: the opt-in dynamic shared
 * memory per block, and the number of SMs (0 for an unknown target). */
int cg_target_smem_max(const CgTarget *t);
int cg_target_sms(const CgTarget *t);

/* target.c: kernel descriptions */

/* Parameter kinds, as docs/bundle.md spells them.  ORDER CGP: param_kind_names. */
typedef enum { CGP_PTR, CGP_I32, CGP_I64, CGP_U64, CGP_F32, CGP_TMAP, NCGP } CgParamKind;
const char *cg_param_kind_name(CgParamKind k);	/* "ptr", "i32", ... */

typedef struct CgParam CgParam;
struct CgParam {
	CgParamKind kind;
	const char *role;	/* "A", "B", "C", "bias", "gather_idx", "offsets", "T" */
};

/*
 * A size expression in T, the run-time token count, is bundle.h's MExpr
 * (cdiv(a*T + b, div) when div > 0, else a*T + b; a, b >= 0), under the
 * name the builders use: one type, printed and evaluated by bundle/expr.c.
 * cg_expr_print is bundle_expr_print (docs/bundle.md's grammar: "b", "T",
 * "a*T", "T+b", "a*T+b", "cdiv(E,div)"); cg_expr_eval is bundle_expr_eval,
 * -1 when a step overflows int64.
 */
typedef MExpr CgExpr;
#define CG_EXPR_INT(n) MEXPR_INT(n)
int cg_expr_print(char *buf, size_t n, CgExpr e);
int64_t cg_expr_eval(CgExpr e, int64_t T);

/*
 * A tensor map (CGP_TMAP parameter, 128 bytes by value, .align 64): the
 * TMA's view of the array behind the pointer parameter `of`, in tiles of
 * `box` elements (innermost first), swizzled in shared memory (bytes: 0,
 * 32, 64, 128), elements outside dims read as zeros.  On a GPU the runtime
 * encodes it with cuTensorMapEncodeTiled at each launch (dims depend on
 * T); the emulator has an encoding of its own (cg_emu_tmap_encode).
 */
typedef struct CgTmap CgTmap;
struct CgTmap {
	const char *of;		/* role of the pointer parameter it maps: "A", "B" */
	DType dt;		/* bf16, f16, f32 or f8e4m3 (bytes to the TMA) */
	int rank;		/* 2 or 3 */
	CgExpr dims[3];		/* elements per dim, innermost first */
	int64_t strides[2];	/* bytes between indices of dims 1 and 2 */
	int box[3];		/* elements per dim of one copy */
	int swizzle;		/* bytes: 0, 32, 64 or 128 */
};

/* Bytes per element of a tensor map's dtype; 0: not one a map holds. */
static inline int
cg_tmap_esize(DType dt)
{
	return dt == DT_F32 ? 4 : dt == DT_BF16 || dt == DT_F16 ? 2 : dt == DT_F8E4M3 ? 1 : 0;
}

/* One emitted kernel: what the bundle's `kernel` and `launch` lines need. */
typedef struct CgKernel CgKernel;
struct CgKernel {
	const char *name;	/* the .entry name */
	int nparam;
	CgParam *param;		/* in order */
	int block[3];		/* threads per CTA */
	CgExpr grid[3];		/* CTAs, as functions of T */
	int smem;		/* dynamic shared memory, bytes */
	int min_ctas;		/* launch bound: CTAs per SM (0: none) */
	int maxnreg;		/* .maxnreg: registers per thread at entry, pinned (0: ptxas picks); cg_fn_maxnreg */
	int cluster;		/* CTAs per cluster along x the launch must ask for (cuLaunchKernelEx's cluster
				 * dimension; 0: no cluster); cg_fn_cluster */
	int pdl;		/* 1: it opens with griddepcontrol.wait (--debug=pdl), so it may be launched
				 * before its predecessor in the stream completes */
	const char *note;	/* what it is: "gemm bf16 128x256x32 s4 w8 grouped ..." */
	const CgTmap *tmap;	/* per CGP_TMAP parameter, in parameter order (NULL: none) */
	int ntmap;
	/* from ptxas, by cg_module_assemble(); -1 until then */
	int regs, spill_stores, spill_loads, stack, static_smem;
};

/* target.c: modules */

typedef struct CgModule CgModule;
CgModule *cg_module_new(const CgTarget *t, const char *name, Diag *d);
void cg_module_free(CgModule *m);
const CgTarget *cg_module_target(const CgModule *m);
void cg_module_set_debug(CgModule *m, DbgFlags debug);	/* DBG_* flags (util.h) */
void cg_module_keep_ir(CgModule *m);	/* its IR is wanted whole after codegen (--emit=llvm) */
DbgFlags cg_module_debug(const CgModule *m);
int cg_module_nkernel(const CgModule *m);
const CgKernel *cg_module_kernel(const CgModule *m, int i);
const CgKernel *cg_module_find(const CgModule *m, const char *name);
/*
 * Verify, optimise (default<O3>) and emit PTX; the text is owned by the
 * module and stays valid until cg_module_free.  A verifier failure is a
 * diagnostic.  After this call the module takes no more kernels.
 */
const char *cg_module_ptx(CgModule *m, size_t *len, Diag *d);
/* The module's LLVM IR as text (malloc'd), before or after optimisation. */
char *cg_module_llvm_ir(CgModule *m);
/* Take PTX computed elsewhere (a cache hit) instead of running LLVM: the
 * module then counts as emitted and takes no more kernels. */
void cg_module_set_ptx(CgModule *m, const char *ptx, size_t len);
/* Keep no names of local values (parameters, instructions): for modules
 * that the codegen cache compares (cache.c); the PTX is the same. */
void cg_module_discard_names(CgModule *m);
/* Free the LLVM module of a module whose PTX is made: its PTX and kernel
 * table stay (a whole-model compile holds many programs at once). */
void cg_module_release_llvm(CgModule *m);

/*
 * A tiny kernel "name(ptr x)" that uses one capability (CG_SETMAXNREG,
 * CG_WGMMA, CG_CP_ASYNC, CG_MMA_BF16, CG_MMA_TF32): for tests and for probing the
 * toolchain.  Without it on the target: a diagnostic and no kernel.
 */
int cg_emit_probe(CgModule *m, const char *name, unsigned cap, Diag *d);

/* ptxas.c: assembling PTX */

typedef struct CgPtxasInfo CgPtxasInfo;
struct CgPtxasInfo {
	char name[128];
	int regs, barriers, smem, cmem, stack, spill_stores, spill_loads;
	double ms;		/* ptxas's own time for it (0: ptxas did not say) */
};
typedef struct CgPtxasResult CgPtxasResult;
struct CgPtxasResult {
	int n;
	CgPtxasInfo *k;		/* one per entry, in ptxas's order (malloc'd) */
	unsigned char *cubin;	/* when asked for (malloc'd) */
	size_t cubin_len;
	char *log;		/* everything ptxas printed (malloc'd) */
};
/* Line l of PTX opening an entry (".entry", ".visible .entry", ".weak .entry"):
 * the entry's name that follows; NULL for any other line. */
const char *cg_ptx_entry_name(const char *l);
/* $PTXAS, else /usr/local/cuda/bin/ptxas, else ptxas on $PATH; NULL: none. */
const char *cg_ptxas_path(void);
/* ptxas -arch=SM -v on the text; 0 ok, -1 with a diagnostic (incl. ptxas's errors). */
int cg_ptxas(const char *ptx, size_t len, const char *sm, int want_cubin,
	     CgPtxasResult *r, Diag *d);
void cg_ptxas_free(CgPtxasResult *r);
/* n runs of cg_ptxas, as many at once as there are cores: r[i] for job i,
 * diagnostics in job order; 0 when every one succeeded. */
typedef struct CgPtxasJob CgPtxasJob;
struct CgPtxasJob {
	const char *ptx;
	size_t len;
	const char *sm;
	int want_cubin;
};
int cg_ptxas_many(const CgPtxasJob *job, int n, CgPtxasResult *r, Diag *d);
/* The same with the jobs given one at a time: a job starts when it is
 * given if a slot is free, else when one frees; wait reaps them all (r[i]
 * for job i, diagnostics in job order) and frees the batch.  new: NULL
 * without ptxas (add and wait then do nothing). */
typedef struct CgPtxasBatch CgPtxasBatch;
CgPtxasBatch *cg_ptxas_batch_new(int n);
void cg_ptxas_batch_add(CgPtxasBatch *b, int i, const CgPtxasJob *job);
int cg_ptxas_batch_wait(CgPtxasBatch *b, CgPtxasResult *r, Diag *d);
/* cg_module_ptx + cg_ptxas, and each CgKernel's regs/spills filled in. */
int cg_module_assemble(CgModule *m, int want_cubin, CgPtxasResult *r, Diag *d);
/* The same for n modules: each module's LLVM on a thread of its own, and
 * its ptxas started as soon as its PTX is there (a batch).  t (NULL: not
 * wanted): each module's LLVM time, the wall time until the last PTX, and
 * the wall time after it until the last ptxas ended. */
typedef struct CgAssembleTimes CgAssembleTimes;
struct CgAssembleTimes {
	double llvm[8], ptx, ptxas;
	int shared[8];		/* kernels of each module whose PTX came from another (share.c) */
};
int cg_modules_assemble(CgModule **m, int n, int want_cubin, CgPtxasResult *r,
			CgAssembleTimes *t, Diag *d);
/* Only the PTX of n modules, each on a thread of its own (no ptxas). */
int cg_modules_ptx(CgModule **m, int n, CgAssembleTimes *t, Diag *d);
/* Each CgKernel's regs/spills from a ptxas result. */
void cg_module_take_stats(CgModule *m, const CgPtxasResult *r);

/* share.c: kernels alike in several targets' modules through LLVM once.
 * plan (before LLVM): empties each module's copies of a donor module's
 * kernels; donor: the donor of module i (-1: none); splice (once both have
 * PTX): puts the donor's text of them into module i's PTX. */
typedef struct CgShare CgShare;
CgShare *cg_share_plan(CgModule **m, int n);
int cg_share_donor(const CgShare *s, int i);
int cg_share_count(const CgShare *s, int i);	/* module i's kernels taken from the donor */
int cg_share_splice(const CgShare *s, CgModule **m, int i, Diag *d);
void cg_share_free(CgShare *s);

/* tuning.c: the GEMM side of tuning tables (program.h: the table) */
typedef struct GemmSpec GemmSpec;
/* "g8.m2.n28672.k4096.bf16.bf16.nk.t1-64": what a GEMM launch for tlo <= T <= thi is. */
int cg_gemm_key(const GemmSpec *s, int64_t tlo, int64_t thi, char *buf, size_t n);
void cg_variant_of(const GemmSpec *s, CgVariant *v);
void cg_variant_apply(const CgVariant *v, GemmSpec *s);	/* split_slots is the caller's */
/* The T bucket holding t (tuning keys, version 2): 1, 2-16, 17-64, 65-256, then x4. */
void cg_tuning_bucket(int64_t t, int64_t *lo, int64_t *hi);

/* cache.c: codegen results reused within one compile (program.h: the driver's part) */
/* The key of an emitted, not yet optimised module (malloc'd, *len bytes). */
char *cg_cache_key(CgModule *m, int want_cubin, size_t *len);
/* A hit: m gets the PTX, r a copy of ptxas's result, the kernels their
 * stats; returns 1.  0: not cached. */
int cg_cache_get(CgCache *c, const char *key, size_t len, CgModule *m, CgPtxasResult *r);
/* Store m's PTX and r under key (taken over). */
void cg_cache_put(CgCache *c, char *key, size_t len, CgModule *m, const CgPtxasResult *r);

/* emu.c: running "emu" kernels on the CPU */

typedef struct CgEmuBuf CgEmuBuf;
struct CgEmuBuf {
	const void *p;
	size_t bytes;
};
typedef struct CgEmuLaunch CgEmuLaunch;
struct CgEmuLaunch {
	int grid[3], block[3];
	int smem;		/* dynamic shared memory bytes */
	const uint64_t *args;	/* one slot per parameter: pointer, integer, or f32 bits */
	int nargs;
	/* when nbuf > 0, every global access must fall inside one of these */
	const CgEmuBuf *buf;
	int nbuf;
	/* CTAs per cluster along x (the manifest's cluster=N, cuLaunchKernelEx's
	 * (N, 1, 1)); 0: the kernel's own (CgKernel.cluster), 1: none */
	int cluster;
};
/*
 * Run a kernel of an "emu" module: clusters one after another, the CTAs of
 * one together (a CTA is its own cluster without one), threads as
 * user-level threads switched at barriers and warp-collective operations.
 * Out-of-bounds accesses, deadlocks and divergent collectives are
 * diagnostics.  Shared memory starts filled with 0xff bytes (NaN).
 */
int cg_emu_run(CgModule *m, const char *kernel, const CgEmuLaunch *l, Diag *d);
/* The wgmma operations (one per warpgroup) the emulator has run in this process. */
long cg_emu_wgmma_count(void);
/*
 * The emulator's encoding of tensor map t over base at T (a CGP_TMAP
 * argument's 128 bytes: its slot in CgEmuLaunch.args points at them).
 * 0, or -1 with a diagnostic (a field the TMA would refuse).
 */
int cg_emu_tmap_encode(const CgTmap *t, const void *base, int64_t T, void *out128, Diag *d);
/* The same checks as a driver's encoder makes; 0 or a diagnostic. */
int cg_tmap_check(const CgTmap *t, int64_t T, Diag *d);

/* epilogue.c: the epilogue program of a GEMM */

/*
 * A small SSA program over one output element, applied to the f32
 * accumulator in registers before the store.  Each instruction names its
 * operands by index (earlier instructions only); the last instruction is
 * the result.  ORDER CGE: ep_ops in epilogue.c.
 */
typedef enum {
	/* leaves */
	CGE_ACC,		/* the accumulator */
	CGE_IMM,		/* imm */
	CGE_COL,		/* vec[n] (+ expert * group_stride) */
	CGE_ROW,		/* vec[row(m)]: 1/rms, a routing weight */
	CGE_MAT,		/* mat[row(m) * ld + n]: a residual */
	/* every scalar IR op (OPF_SCALAR): iop, with its attributes, of a (and b); ew.c emits it */
	CGE_OP,
	/*
	 * Paired over columns (2j, 2j+1) = (gate, up) of the operand; the result
	 * is output column j, and instructions after it live in the output's
	 * column space (width N/2).  glu: act silu or oai with their limit and
	 * alpha, as swiglu's (ir_glu_scalar): silu(gate) * up, clamped after the
	 * activation when the limit is finite; oai: gate = min(gate, lim),
	 * up = clamp(up, -lim, lim), out = (up + 1) * gate * sigmoid(alpha * gate).
	 */
	CGE_SWIGLU,
	/* a rounded to dt (bf16, f16) and back: the IR rounds every bf16/f16
	 * result, the epilogue computes in f32 (a cast, an op typed bf16) */
	CGE_ROUND,
	NCGE
} CgEpOp;

/* How a row leaf finds its row from the GEMM row r.  ORDER CGR. */
typedef enum {
	CGR_DIRECT,		/* r */
	CGR_GATHER,		/* gather_idx[r] / gather_div: A's source row */
	CGR_GATHER_RAW,		/* gather_idx[r] */
	CGR_SCATTER,		/* scatter_idx[r]: the output's row */
	NCGR
} CgRowIndex;

/* ew.c emits op on f32 values: exactly the OPF_SCALAR ops (IrEwAttrs: its attributes). */
int cg_ew_has(Op op);

#define CG_EP_MAX 32
typedef struct CgEpInst CgEpInst;
struct CgEpInst {
	CgEpOp op;
	int a, b;		/* operands */
	float imm;		/* CGE_IMM */
	IrGluAttrs glu;		/* CGE_SWIGLU */
	Op iop;			/* CGE_OP: the IR op */
	IrEwAttrs ew;		/* CGE_OP: its attributes */
	/* leaves that read memory: each is one kernel parameter */
	DType dt;		/* f32, bf16 or f16; CGE_ROUND: bf16 or f16 */
	CgRowIndex rows;	/* CGE_ROW, CGE_MAT */
	int64_t ld;		/* CGE_MAT: elements between rows */
	int64_t group_stride;	/* CGE_COL: elements between experts (0: shared) */
	const char *role;	/* parameter role: "bias", "scale", "residual" */
};
typedef struct CgEpilogue CgEpilogue;
struct CgEpilogue {
	int n;
	CgEpInst in[CG_EP_MAX];
};
/* Builders; each returns the new instruction's index (or -1 when full). */
int cg_ep_acc(CgEpilogue *e);
int cg_ep_round(CgEpilogue *e, int a, DType dt);	/* CGE_ROUND; a itself for f32 */
int cg_ep_imm(CgEpilogue *e, float v);
int cg_ep_col(CgEpilogue *e, DType dt, int64_t group_stride, const char *role);
int cg_ep_row(CgEpilogue *e, DType dt, CgRowIndex rows, const char *role);
int cg_ep_mat(CgEpilogue *e, DType dt, int64_t ld, CgRowIndex rows, const char *role);
/* An IR op with its attributes' defaults; b: -1 for unary. */
int cg_ep_op(CgEpilogue *e, Op op, int a, int b);
int cg_ep_clamp(CgEpilogue *e, int a, float lo, float hi);	/* clip */
int cg_ep_gelu(CgEpilogue *e, int a, int tanh_approx);
int cg_ep_swiglu(CgEpilogue *e, int a, const IrGluAttrs *g);	/* NULL: plain silu */
/* Any scalar IR op (cg_ew_has) with its attributes, of a (and b for binary ops; else -1). */
int cg_ep_ew(CgEpilogue *e, Op op, const IrEwAttrs *at, int a, int b);
const char *cg_ep_op_name(CgEpOp op);
/* The instruction's name: its IR op's ("gelu_erf", "gelu_tanh" for gelu), or the leaf's. */
const char *cg_ep_inst_name(const CgEpInst *in);
int cg_ep_is_leaf(CgEpOp op);
int cg_ep_is_load(CgEpOp op);		/* reads memory: one kernel parameter */
int cg_ep_arity(CgEpOp op);
/* Checks operands, dtypes and the pairing rule; 0 or a diagnostic. */
int cg_ep_check(const CgEpilogue *e, Diag *d);
/* "relu(add(acc,col:bias))" — for notes, reports and tests. */
int cg_ep_print(char *buf, size_t n, const CgEpilogue *e);

/* k_gemm.c: the GEMM family */

typedef enum { CG_B_NK, CG_B_KN } CgBLayout;	/* B as [N,K] (Linear weight) or [K,N] */
typedef enum { CG_STORE_ROWS, CG_STORE_SCATTER } CgStore;
/* CG_SCHED_STREAM: `ctas` CTAs, each an equal run of the (tile, k-tile)
 * sequence (decode: stream-K; the mma.sync mainloop, cg_gemm_split_bytes) */
typedef enum { CG_SCHED_TILES, CG_SCHED_PERSISTENT, CG_SCHED_STREAM } CgSched;
/* CG_MAINLOOP_VEC: not a tensor-core mainloop but k_gemm_vec.c's warp dot
 * products (decode tiles of 1..8 rows; cg_emit_gemm hands the spec over) */
typedef enum { CG_MAINLOOP_MMA, CG_MAINLOOP_WGMMA, CG_MAINLOOP_WS, CG_MAINLOOP_VEC } CgMainloop;
/* CG_MAINLOOP_WS's consumers: the warpgroups split each tile (cooperative),
 * or two take turns, each on whole tiles of its own (ping-pong) */
typedef enum { CG_WS_COOPERATIVE, CG_WS_PINGPONG } CgWsMode;

/*
 * Output quantisation, a stage after the epilogue program: its result x
 * (rounded to in_dt first, as the IR value quantize reads) becomes c_dt =
 * f8e4m3 or i8.  Static: q = sat(rn(x / scale) + zero), scale and zero
 * immediates or one element behind a parameter.  Group: per `group`
 * consecutive output columns of a row, scale = amax / qmax (448 for f8e4m3,
 * 127 for i8; 1 where amax is 0), q = sat(rn(x / scale)), and with
 * want_scales the scales go to "C_scale", f32 [M, width / group] (rows as C's:
 * scattered too).  rn: f32 division, then nearest even (i8) or the f8 cast,
 * exactly as the quantize and quantize_dynamic ops compute.
 */
typedef enum { CG_QUANT_NONE, CG_QUANT_STATIC, CG_QUANT_GROUP } CgQuantKind;
typedef struct CgQuant CgQuant;
struct CgQuant {
	CgQuantKind kind;
	DType in_dt;		/* f32, bf16 or f16 (f32 by default: no rounding) */
	float scale, zero;	/* static: immediates, used where the role is NULL */
	const char *scale_role;	/* static: a pointer to the scale (scale_dt), or NULL */
	const char *zero_role;	/* static: a pointer to the zero point (zero_dt), or NULL */
	DType scale_dt, zero_dt;	/* any dtype but packed i4/u4 */
	int group;		/* group: columns per scale; a multiple of 8 dividing the tile */
	int want_scales;	/* group: write "C_scale" */
};

/*
 * One GEMM: C[m, :] = epilogue(A'[m, :] . B_e^T) for m < M, where
 * A'[m] = A[gather ? gather_idx[m] / gather_div : m] and e is the expert
 * that owns row m (grouped) or 0 (dense).  M = m_per_t * T with T the
 * kernel's last (i32) parameter.
 *
 * Requirements (checked): N % bn == 0, K % bk == 0, K % 8 == 0; lda, ldb,
 * ldc and the epilogue's ld are multiples of 8 elements; pointers are
 * 16-byte aligned.  M may be anything, and grouped segments any length,
 * 0 included.  The compiler pads weights to reach N % bn == 0.
 *
 * f32 inputs are converted to the mma type while they are loaded (A or B
 * f32: the other operand's type, bf16 when both are f32), through registers
 * instead of cp.async: correct, slower.  bf16 with f16 is refused.
 */
/*
 * Quantised B (a mixed-input GEMM, k_gemm_mixed.c): B's elements are b_dt,
 * one row of the format table (i4, u4, i8, u8, f8e4m3, f8e5m2), and B[n][k]
 * is (q - zero) * scale rounded to the mma type, with one scale (and zero
 * point) per `group` consecutive k of a column: the dequantize op's
 * semantics, computed in registers from the packed bytes.  B, "B_scale"
 * and "B_zero" hold the layout cg_gemm_bq_pack writes (docs/codegen.md):
 * 128-byte fragment atoms, scales and zero points [E][K/group][N] in
 * scale_dt.  group = 0: B is not quantised.
 */
/*
 * FP8 x FP8 (the sm_90a wgmma mainloop, k_gemm_wgmma.c; DeepSeek-V3's
 * scheme): A and B are f8e4m3, A [M][K] with "A_scale" f32 [rows of A][K/group]
 * (a gathered row's scales are gathered with it), B [N,K] with "B_scale" f32
 * [E][N][K/group] (the IR's layouts, nothing repacked), and
 *	C[m][n] = sum over k-blocks b of (sum over k in b of qa[m][k] qb[n][k]) * sa[m][b] * sb[n][b]
 * in f32: each block's products sum in a fresh wgmma accumulator that is
 * then scaled into the running one (DeepGEMM's promotion).  group = bk = 128.
 * b_interleave: B row n of an expert (and its scales) is stored at row
 * (n % 2) N/2 + n/2 (lower-moe's gate|up interleave, read as it is).
 */
typedef struct CgF8 CgF8;
struct CgF8 {
	int group;		/* k per scale: 128 */
	int b_interleave;
	int b_block;		/* > 1: of B's columns b_block j .. b_block (j+1) - 1 of an expert
				 * (through b_interleave) the even ones have one scale and the odd
				 * ones one (a checkpoint's 128x128 blocks, also interleaved gate|up
				 * rows): one B scale pair a warpgroup column block, one fma a
				 * promoted element; a multiple of wtn; 0: a scale a column */
	int whole;		/* a k-tile in one wgmma group a warpgroup, promoted after it
				 * (DeepGEMM's order; bench/gemm A/B); 0: two column halves, the
				 * promotion of one overlapping the other's wgmmas */
	int l2_ahead;		/* WS: the producer prefetches B's boxes into L2 a ring (stages
				 * k-tiles) ahead of its loads, 4 k-tiles at once (--debug=f8-l2pf;
				 * A/B); 0: none */
	int acc2;		/* WS, whole: two accumulator sets a warpgroup, k-tile k promoted
				 * while k + 1's wgmmas run (the default since session 35;
				 * --debug=f8-acc1 not); 0: one */
};

typedef struct CgBQuant CgBQuant;
struct CgBQuant {
	int group;		/* k per scale: a multiple of 16 dividing K, and bk or a multiple of it */
	DType scale_dt;		/* f32, bf16 or f16 (zero points are stored in it too) */
	int zero;		/* a "B_zero" parameter */
	int v1;			/* session 24's e2m1 layout and dequantisation (--debug=bq-v1: A/B) */
	int scales_le2;		/* every e8m0 scale is at most 2 (s <= 128; program.c proves it from the
				 * weights): MXFP4's one multiply needs no redo for larger ones */
	int vec;		/* the layout's lane vectors: a lane's words of vec consecutive atoms
				 * are adjacent (one 4*vec-byte load); 0 or 1: none (session 25's).
				 * Needs K / ka and bk / ka multiples of vec; the packing and every
				 * kernel of a weight alike (program.c) */
	int direct;		/* B's words loaded from global memory straight into registers, a
				 * k-tile ahead, not through shared memory (decode: no cp.async,
				 * ld.shared or stage of B; A and scales are staged as before) */
	int gacc;		/* group sums (--debug=bq-gacc): 4-bit integer B on the fast path
				 * (k_gemm_mixed.c) is the exact q - z in the mma, each group's
				 * products summed apart and scaled in f32 once per group; where
				 * groups are 32 deep or more and divide bk (else ignored) */
	int bulk;		/* a stage's packed words, scales and zero points by bulk copies,
				 * complete_tx on an mbarrier a stage that the consumers wait on
				 * (no LDGSTS of B): CG_QBULK_LANES, CG_QBULK_TMA (--debug=qbulk);
				 * static stream-K, sm_90 (emu); up to 8 stages; 0: cp.async */
	int bulk_mut;		/* tests only: a CG_QBULK_MUT_* fault in the bulk copies' protocol,
				 * which the emulator must catch (0: none) */
};
enum {
	CG_QBULK_LANES = 1,	/* cp.async.bulk a lane of warp 0 for each n8 block's and group row's bytes */
	CG_QBULK_TMA,		/* one cp.async.bulk.tensor a part (words, scales, zero points): three
				 * tensor maps ("B_map", "B_scale_map", "B_zero_map"), stage parts
				 * 128-byte aligned */
};
enum {
	CG_QBULK_MUT_SHORT_TX = 1,	/* expect_tx 16 bytes short of the stage's copies */
	CG_QBULK_MUT_PARITY,		/* the consumers wait on the other parity */
	CG_QBULK_MUT_NO_SKIP,		/* a stage with no k-tile gets no arrival */
};

/* The MoE combine (k_combine.c, below): here for GemmSpec.fold. */
typedef struct CgCombineSpec CgCombineSpec;
struct CgCombineSpec {
	int64_t H;		/* row length: a multiple of 4 */
	int k;			/* slots a row: 1..32 */
	DType slot_dt;		/* the slots' type: f32, or bf16/f16 cast to f32 as loaded */
	CgExpr rows;		/* a*T + b rows (div 0) */
	DType sum_dt;		/* the sum's cast (f32: none) */
	int residual;		/* y = x + the sum, rounded to y_dt */
	DType x_dt, y_dt;
	int weighted;		/* each slot times its routing weight before the sum (f32, an fmul):
				 * parameter "w" f32 [rows,k,1] after "slots" (lower-moe's slots_out) */
};

typedef struct GemmSpec GemmSpec;
struct GemmSpec {
	int64_t N, K;		/* compile-time sizes */
	int m_per_t;		/* M = m_per_t * T (1 by default) */
	int groups;		/* 0: dense; E > 0: grouped over offsets[E+1] */

	DType a_dt;
	int64_t lda;		/* 0: K (K / a_rep) */
	int a_rep;		/* R > 1: A has K / R columns, read R times along K (A's k index
				 * modulo K / R: split-f32's exact bf16 x3 GEMM); 0 or 1: none */
	int gather;		/* A rows through gather_idx (int32) */
	int gather_div;		/* source row = gather_idx[r] / gather_div (1 by default) */
	int gather_tma;		/* WS mainloop: gathered A by one-row TMA boxes, not cp.async (k_gemm_ws.c) */
	int leaf_gather;	/* A not gathered, gather_idx read by epilogue row leaves alone (CGR_GATHER_RAW) */

	DType b_dt;
	DType mma_dt;		/* f32 x f32 on tensor cores: tf32, f16, else bf16 */
	CgBLayout b_layout;
	int64_t ldb;		/* 0: K for [N,K], N for [K,N] */
	int64_t b_group_stride;	/* elements between experts' B (0: N*K) */

	CgBQuant bq;		/* group 0: B is b_dt itself */
	CgF8 f8;		/* group 0: not FP8 x FP8 */

	DType c_dt;
	int64_t ldc;		/* 0: the output width (N, or N/2 after SWIGLU) */
	CgStore store;		/* CG_STORE_SCATTER: row r goes to scatter_idx[r] */

	CgEpilogue ep;		/* empty: the accumulator */
	CgQuant quant;		/* kind NONE: C in f32, bf16 or f16 */

	/* tiling and schedule */
	CgMainloop mainloop;
	CgWsMode ws_mode;	/* CG_MAINLOOP_WS, ping-pong: warps_m x warps_n is one consumer
				 * warpgroup's (4 warps), the kernel runs two; persistent only */
	int cluster;		/* CG_MAINLOOP_WS: 2: clusters of 2 CTAs on column-tile pairs, A's box
				 * multicast (persistent); 4: dense, 2x2 (row tiles 2i + (rank & 1) of
				 * column tiles 2j + (rank >> 1)), half of A's box multicast to the row
				 * partner, half of B's to the column partner (--debug=dense-c4, .c4);
				 * 0: none */
/* A tuning variant's clusters (.c2a, .c2b, .c4): persistent over an H200's SMs.  A cluster runs inside
 * one GPC, and the H100/H200's 132 SMs sit in 8 GPCs of at most 18, so at most 32 clusters of 4 are
 * ever co-resident (31 where a GPC has 14): the runtime launches no more clusters than the device holds
 * at once (runtime/load.c cluster_room: cuOccupancyMaxActiveClusters), which the kernels' persistent
 * schedule (a stride of %nctaid.x) allows. */
#define CG_CLUSTER_CTAS 132
	int quad_fault;		/* tests of cluster 4 (CG_QUAD_*): a part of the 2x2's protocol left out, which
				 * the emulator must catch; 0 everywhere else */
#define CG_QUAD_NO_A_PARTNER 1		/* A's half multicast to this CTA alone, not its row partner */
#define CG_QUAD_NO_COL_RELEASE 2	/* consumers release a stage here and to the row partner, not the column one */
#define CG_QUAD_NO_B_PARTNER 4		/* B's half multicast to this CTA alone, not its column partner */
	int cluster_b;		/* cluster 2, dense, B [N,K]: 1: the pair is row tiles 2i, 2i + 1 of one
				 * column tile and shares B (each CTA's half of B's box multicast:
				 * cuBLAS's 2x1 cluster); 0: column tiles sharing A */
	int wg_wide;		/* wgmma, WS (bf16/f16): 1: warpgroup tiles up to 256 columns (one
				 * wgmma m64n256k16 a k-step: 128x256 over two warpgroups is two
				 * 64x256, A read once a k-step instead of B twice); 0: up to 128 */
	int tma_store;		/* WS, dense, bf16/f16 C (--debug=ws-tma-store): > 0: each consumer
				 * warpgroup's 64-row blocks through this many (1, 2) shared buffers
				 * and TMA stores (a "C_map" parameter); 0: stores from registers */
	int bm, bn, bk;		/* 16..256, 16..256, 16/32/64/128 */
	int warps_m, warps_n;	/* warps = warps_m * warps_n */
	int stages;		/* 2..5 */
	int no_frag_pipe;	/* 1: no double-buffered fragments (smaller, slower) */
	int quad_store;		/* 1: an epilogue storing C from registers swaps a row's results across its
				 * quad so that a lane stores 16 bytes (k_gemm.c quad_store; --debug=quad-store) */
	int full_blocks;	/* wgmma, WS: 1: every 64-row block of a tile, also those past its
				 * last row (0: a block without rows issues no wgmma) */
	int live_rows;		/* 1: rows past a tile's expert are not loaded at any tile height (0: only
				 * 192-row tiles skip them; gemm_live_rows); --debug=grouped-lean */
	int snake;		/* CG_SCHED_PERSISTENT: round j's items j*n .. j*n+n-1 go to the n CTAs in
				 * reverse on odd rounds (each CTA gets both parities of a work index;
				 * gemm_round_item); 0: CTA c takes c, c + n, ...; --debug=grouped-lean */
	int bands;		/* dense, no clusters: B > 0: work items in bands of B row tiles, row tiles
				 * fastest within a band, then the columns, band after band (the last band
				 * may be shorter; gemm_tile_coords); 0: every row tile of a column, column
				 * after column; a tuning table's `.bN` */
	int no_rank;		/* CG_MAINLOOP_WS, grouped: work items in expert order, not heavy-first (each
				 * CTA of the tiles schedule ranks all E experts, O(E^2 / threads), before
				 * its one tile, and every item there is one tile); --debug=grouped-lean */
	int vec_ahead;		/* CG_MAINLOOP_VEC: 1: each group of B loads is issued one group ahead of its
				 * FMAs, across items (two groups' registers); 0: the next item's first group
				 * after this item's FMAs (session 27); --debug=vec-ahead */
	int min_ctas;		/* launch bound: CTAs per SM (0: none) */
	CgSched sched;
	int sk_unroll;		/* CG_SCHED_STREAM, static: 1: the pair loop unrolled over the stages, counters
				 * carried instead of divisions, constant stage offsets (k_gemm.c's
				 * stream_unrolled); --debug=sk-unroll */
	int b_ahead;		/* CG_SCHED_STREAM, B bf16/f16 or quantised (bq), PDL: > 0: before its grid
				 * wait a CTA sends the first b_ahead k-tiles of its run's B (quantised: the
				 * packed words, scales and zero points) toward L2 (sm_90's
				 * cp.async.bulk.prefetch.L2), its run from the offsets as they read then:
				 * a hint, every address inside B (k_gemm.c's stream_ahead);
				 * --debug=down-ahead, quantised --debug=qahead */
	int ahead_table;	/* b_ahead > 0, A not gathered: the expert table built before the wait is
				 * the schedule's, not built again after it (the offsets are final before
				 * the wait: written two launches back, under PDL's chain; program.c's
				 * QAHEAD_TABLE_DEFAULT) */
	int ctas;		/* CG_SCHED_PERSISTENT, CG_SCHED_STREAM: CTAs in the grid (132 * 2 by default) */
	int tail, tail_w;	/* CG_SCHED_STREAM, static: tail > 0: the grid's last `tail` CTAs (runs v <
				 * tail, dispatched last: to the SMs that finish first) take short runs and
				 * the others runs tail_w (2..64) times as long, so the SMs' spread is
				 * filled by the short runs (k_gemm.c's stream_runs); where L is under the
				 * weights' sum, equal runs; 0: equal runs.  --debug=sk-tail */
	int split_k;		/* S > 1: K in S slices, partial sums added in slice order; 0: none;
				 * 1: none, but the "splitk_ws" parameter (kernels of one name
				 * have one parameter list on every target, and another splits) */
	int split_slots;	/* split_k > 1 or CG_SCHED_STREAM: tiles the "splitk_ws" workspace
				 * holds (cg_gemm_split_bytes) */
	int live_sums;		/* split_k > 1 or CG_SCHED_STREAM, mma.sync mainloop: 1: a hand-over of
				 * partial sums moves only the rows of the tile (row < its expert's or M's
				 * end), which are all the epilogue stores, released by thread 0's
				 * fence.acq_rel.gpu after the barrier (k_gemm.c's split_reduce); 0: all
				 * bm rows, every thread's fence.sc.gpu; --debug=live-sums */
	int units;		/* CG_SCHED_STREAM: > 0: dynamic stream-K: about units x ctas work units
				 * (a tile's k-slices of stages-1 k-tiles or more) handed out by an
				 * atomic counter, so fast SMs take more; 0: equal runs.  1..64 */
	int unit_rev;		/* units: > 1: units handed out reversed in blocks of unit_rev (tests:
				 * arrival orders the emulator's CTA-after-CTA run cannot make); 0 */
	CgCombineSpec fold;	/* CG_MAINLOOP_VEC, persistent: fold.k > 0: the combine of C (the slots)
				 * in the kernel's last CTA: every CTA adds 1 to a ticket (word 0 of
				 * "splitk_ws") when its stores are out, the last to finish sums the
				 * slots as cg_emit_combine does (parameters "fold_w" if weighted,
				 * "fold_x" if residual, "fold_y" before "splitk_ws"); --debug=combine-fold */
};
/* Defaults: bf16 everywhere, B [N,K], 128x128x32, 2x4 warps, 4 stages, tiles. */
void cg_gemm_default(GemmSpec *s);
/*
 * Emit one GEMM kernel.  Parameters, in order (roles in quotes):
 *   "A", ["gather_idx"], "B", ["B_scale"], ["B_zero"], ["A_scale"], "C", ["C_scale"], ["scatter_idx"], ["offsets"],
 *   one pointer per epilogue load leaf (its role), [quant.scale_role],
 *   [quant.zero_role], "T" (i32).
 * Grid: tiles: (cdiv(M + E*(bm-1), bm), N/bn, 1); persistent: (ctas, 1, 1).
 * Returns 0, or -1 with a diagnostic (nothing is added to the module).
 */
int cg_emit_gemm(CgModule *m, const char *name, const GemmSpec *s, Diag *d);
/* The checks of cg_emit_gemm alone. */
int cg_gemm_check(const CgTarget *t, const GemmSpec *s, Diag *d);
/* Replace the 0 defaults (lda, ldb, ldc, group stride, gather_div, m_per_t) by their values. */
void cg_gemm_resolve(GemmSpec *s);
/* Bytes of dynamic shared memory the kernel uses. */
int cg_gemm_smem(const GemmSpec *s);
/* What the tensor-core kernel's mma reads: bf16, f16 or tf32 (f32 operands: mma_dt) */
DType cg_gemm_mma_type(const GemmSpec *s);
/*
 * Split-K (split_k = S > 1, the mma.sync mainloop, tiles schedule): grid z
 * is the slice; slice z computes k-tiles [z*KT/S, (z+1)*KT/S) of its tile,
 * waits until the flag of its tile says z, adds the running sum of slices
 * 0..z-1 from the workspace to its own, and either writes it back and sets
 * the flag to z+1 or, the last slice, runs the epilogue.  The sum is
 * (((p0 + p1) + p2) + ...): the same bits every run; no atomics.  The
 * workspace ("splitk_ws"): split_slots i32 flags (zero before the launch,
 * a memset step), 16-byte aligned, then split_slots tiles of bm*bn f32.
 *
 * Stream-K (sched = CG_SCHED_STREAM, the mma.sync mainloop, no split_k):
 * the work is the sequence of (tile, k-tile) pairs, tile-major over the
 * schedule's tiles (empty experts own none); CTA c streams the run
 * [v*L/n, (v+1)*L/n) of its L pairs, v = ctas-1-c, n = min(ctas, L), with one
 * cp.async pipeline across its tiles (the next tile's loads go out while one
 * ends).  A tile cut between runs is summed along its CTAs from the one
 * holding its last k-tile to the one holding its first (each waits for the
 * next higher v: a lower CTA index, dispatched first), which runs the
 * epilogue; the same workspace and flags as split-K, one slot per tile.
 * The order is fixed by T and the routing: the same bits every run.
 *
 * Dynamic stream-K (units > 0): the work units are a tile's P k-slices
 * (unit u = tile u / P, slice u % P; P per launch from the tiles, about
 * units x ctas units, each at least stages-1 k-tiles): CTA c's first is
 * unit c, the rest are handed out in order by an atomic counter (i32 after
 * the tiles' flags), so an SM that streams faster takes more of them; one
 * cp.async pipeline across a CTA's units (the next unit is taken two pairs
 * before the load stream needs it).  A
 * slice writes its partial sums to its unit's slot, counts itself in at its
 * tile's flag (atomic), and the tile's last slice to arrive, whichever it
 * is, adds the slots in slice order and runs the epilogue: the same bits
 * every run whatever CTA took what.  Workspace: split_slots + 1 flags, then
 * units x ctas slots of bm*bn f32.  No CTA waits for another.
 */
int64_t cg_gemm_split_bytes(const GemmSpec *s);	/* the workspace */
int64_t cg_gemm_split_flag_bytes(const GemmSpec *s);	/* its flags, to zero */

/* k_gemm_mixed.c: quantised B (GemmSpec.bq) */
/* Whether dt has a row in the format table (a B the kernel dequantises). */
int cg_bq_format(DType dt);
/* Bytes of the packed B ("B"), of "B_scale" and of "B_zero" for E experts. */
size_t cg_bq_bytes(const GemmSpec *s, int E, int which);	/* 0: B, 1: scale, 2: zero */
/*
 * The compile-time repack: q [E][N][K] of s->b_dt (i4/u4: two per byte, low
 * nibble first, as dtype_store writes them), scale [E][N][K/group] of
 * s->bq.scale_dt, zero [E][N][K/group] of zero_dt (or NULL: 0) into the
 * kernel's layout (cg_bq_bytes each).  -1 with a diagnostic when the spec
 * is not a quantised one.  interleave: the rows of each expert's q, scale
 * and zero are taken interleaved (row 2j+h from source row h*N/2 + j, the
 * gate|up layout lower-moe gives the SwiGLU GEMM).
 */
int cg_bq_pack(const GemmSpec *s, int E, const void *q, const void *scale, const void *zero,
	       DType zero_dt, int interleave, void *b, void *bscale, void *bzero, Diag *d);
/*
 * The same layout generated on the device from synthetic weights: a synth
 * kernel (cg_emit_synth's parameters; "out" of cg_bq_bytes(s, E, which))
 * whose output is cg_bq_pack's part `which` (0 B, 1 B_scale, 2 B_zero) of
 * the synthetic weight of src_dt (q: s->b_dt; scale: s->bq.scale_dt; zero:
 * its IR type) that ir_weight_data would generate, bit for bit.  So a
 * bundle records seed and layout, not the bytes.  cg_bq_synth_ok: whether
 * scales of scale_src and zero points of zero_src can be (the scale's type
 * unchanged; zero points exact in it whatever the values).
 */
int cg_emit_synth_bq(CgModule *m, const char *name, const GemmSpec *s, int E, int interleave, int which,
		     DType src_dt, int64_t row_block, Diag *d);	/* row_block: Weight.row_block of the source */
int cg_bq_synth_ok(const GemmSpec *s, DType scale_src, DType zero_src);

/* k_gemm_wgmma.c: the sm_90a mainloop (GemmSpec.mainloop = CG_MAINLOOP_WGMMA) */
/*
 * wgmma.mma_async by warpgroups (4 warps each) from 128-byte-swizzled
 * shared tiles that cp.async fills; everything else as with mma.sync.
 * Tiles: bm 64/128/256, bk 64/128, 4/8/16 warps; each warpgroup takes 64k
 * rows and at most 128 columns (64 or 128 with B [K,N]), 128 accumulators
 * per thread at most.  With 4-5 stages one wgmma group stays in flight
 * across k-tiles (no_frag_pipe: none); with 2-3, none.  The kernel has the
 * parameters, block, grid and shared memory
 * of the mma.sync kernel of the same spec.  Targets: sm_90a, and the emulator.
 */
/* WGMMA where m's target has it (or, with DBG_EMU_WGMMA, is the emulator)
 * and s's tile suits it, else MMA. */
CgMainloop cg_gemm_mainloop_for(const CgModule *m, const GemmSpec *s);
/*
 * The warp-specialised mainloop (k_gemm_ws.c) for s on t: 1 with *s
 * rewritten (mainloop, the most stages up to 6 that fit, at least s's), or
 * 0 with *s unchanged where m's target lacks wgmma + TMA + setmaxnreg (the
 * emulator stands for sm_90a with DBG_EMU_WS) or the spec does not suit it.
 */
int cg_gemm_ws_for(const CgModule *m, GemmSpec *s);
/*
 * Whether ping-pong consumers pay for s's cooperative plan on t at up to
 * thi tokens (k_gemm_ws.c: grouped with A not gathered and short K; dense
 * by waves).
 * The planner requests them with s->ws_mode = CG_WS_PINGPONG, which
 * cg_gemm_ws_for honours where the warp-specialised mainloop takes the spec
 * (and every other mainloop must be given CG_WS_COOPERATIVE).
 */
int cg_gemm_pingpong_pays(const CgTarget *t, const GemmSpec *s, int64_t thi);
/* --debug=dense-c2 without the flag (issue 12, session 37; k_gemm_ws.c dense_c2_plan, program.c
 * pingpong_request, k_gemm.c gemm_epilogue's late buffer wait): dense prefill GEMMs whose plan stays
 * cooperative run in clusters of 2 sharing B (128x256, cuBLAS's shape for the dense up-projection) and
 * store C by TMA; the default since the helper's H200 A/B (dense_up M = 4096 675.0 -> 656.5 us, the
 * same bits; bench/results/2026-12-04-s37-dense-ab.txt) */
#define CG_DENSE_C2_DEFAULT 1
/* --debug=quad-store without the flag (issue 12, session 38; k_gemm.c quad_store, program.c
 * emit_kernels): the default since the helper's two H200 A/Bs (bench/ab/quadst.ab, the same bits):
 * Qwen3-30B-A3B T = 4096 736.7 -> 699.6 us (0.950x), Mixtral 0.991-0.994x, gpt-oss-20b 0.992x (noisy) */
#define CG_QUAD_STORE_DEFAULT 1
int cg_gemm_dense_c2_tile(const GemmSpec *s);
int cg_gemm_dense_c2_on(const CgModule *m);	/* the flag or CG_DENSE_C2_DEFAULT */
/* ... and m's target runs the dense clusters: a cluster target, or the emulator with the flag */
int cg_gemm_dense_c2_here(const CgModule *m);
/* FP8 grouped GEMMs with A not gathered and short tiles on ping-pong consumers (--debug=f8-pingpong) */
int cg_gemm_f8_pingpong(const CgModule *m, const GemmSpec *s);
/* Whether s, a gathered grouped GEMM (the MoE gate|up) on a cooperative
 * 128x256 plan of at most 64 k-tiles, is one --debug=gather-pingpong asks
 * ping-pong consumers for (k_gemm_ws.c says why). */
int cg_gemm_gather_pingpong(const CgTarget *t, const GemmSpec *s);
/*
 * A kernel "name(A, B, D)" of one warpgroup and one wgmma m64nNk16: D[64][n]
 * f32 = A[64][16] . B[n][16]^T, bf16 row-major, staged with a 32-byte
 * swizzle.  The flags break it on purpose (for the emulator's checks).
 */
enum {
	CG_WGPROBE_NO_FENCE = 1 << 0,		/* no fence.proxy.async after the shared stores */
	CG_WGPROBE_WRITE_IN_FLIGHT = 1 << 1,	/* a shared store before wgmma.wait_group */
	CG_WGPROBE_NO_WAIT = 1 << 2,		/* no wgmma.wait_group at all */
};
int cg_emit_wgmma_probe(CgModule *m, const char *name, int n, DbgFlags flags, Diag *d);

/*
 * A kernel "name(A, D, A_map)" of one warpgroup: thread 0 loads the 16x64
 * bf16 box of A at (0, row0) (A [rows][64], 128-byte swizzle) with
 * cp.async.bulk.tensor, the warpgroup waits on its mbarrier and copies the
 * box, unswizzled, to D [16][64] with ld.shared.  The flags break it on
 * purpose, for the emulator to notice.
 */
enum {
	CG_TMAPROBE_NO_WAIT = 1 << 0,		/* read the box without waiting on the barrier */
	CG_TMAPROBE_EXTRA_ARRIVE = 1 << 1,	/* arrive twice on a barrier of count 1 */
	CG_TMAPROBE_SHORT_TX = 1 << 2,		/* expect_tx 16 bytes short: the phase never completes */
	CG_TMAPROBE_OVERWRITE = 1 << 3,		/* st.shared into the box while the copy is in flight */
	CG_TMAPROBE_STRAY_TX = 1 << 4,		/* after the wait, arrive.expect_tx 16 that no copy completes */
};
int cg_emit_tma_probe(CgModule *m, const char *name, DbgFlags flags, Diag *d);
/* The probe's tensor map over A [rows][64] bf16. */
CgTmap cg_tma_probe_map(int rows);
/*
 * A kernel "name(D)" of three warpgroups, the warp-specialised GEMM's
 * register split: entry registers per thread pinned (0: not pinned), then
 * warpgroup 0 setmaxnreg.dec to dec, warpgroups 1 and 2 setmaxnreg.inc to
 * inc; every thread stores its index + 1 to D[384] (i32).
 */
int cg_emit_regs_probe(CgModule *m, const char *name, int entry, int dec, int inc, Diag *d);
/*
 * A kernel "name(D)" of two warpgroups taking `rounds` turns each the way the
 * ping-pong consumers do (bar.sync 1 + c, bar.arrive 2 - c, 256 threads):
 * in turn t = 2i + c, thread 128c appends to a shared counter and stores
 * its value to D[t] (i32), so D[t] = t when the turns are kept.  The flags
 * break the hand-over.
 */
enum {
	CG_TURNS_SKIP_ARRIVE = 1 << 0,	/* the last hand-over missing: the other waits forever */
	CG_TURNS_EXTRA_ARRIVE = 1 << 1,	/* a hand-over after the last turn: nobody takes it */
	CG_TURNS_HALF_COUNT = 1 << 2,	/* bar.arrive counting 128 threads, not 256 */
};
int cg_emit_turns_probe(CgModule *m, const char *name, int rounds, DbgFlags flags, Diag *d);
/*
 * A kernel "name(A, D, A_map, rounds)" in clusters of 2 over ctas CTAs of
 * 128 threads, the pipeline of a cluster sharing a tile through one stage:
 * in round i, thread 0 of rank r (once both CTAs released the stage) expects
 * 2048 bytes on its full barrier and multicasts rows 16 (c rounds + i) + 8r
 * .. + 8 of A (bf16 [rows][64], 128-byte swizzle; c: the cluster) to both
 * CTAs at 1024r; every thread waits, copies 16 bytes of the 16x64 tile,
 * unswizzled, to D[cta][i][tid], and after a CTA barrier thread 0 releases
 * the stage here and in the peer (empty, count 2).  barrier.cluster after
 * the init and before the exit.  The flags break it.
 */
enum {
	CG_CLPROBE_MASK_SELF = 1 << 0,		/* rank 0's multicast misses its peer: that half never lands there */
	CG_CLPROBE_SELF_RELEASE = 1 << 1,	/* the release meant for the peer arrives on its own barrier */
	CG_CLPROBE_NO_END_SYNC = 1 << 2,	/* no barrier.cluster before the exit */
	CG_CLPROBE_NO_INIT_SYNC = 1 << 3,	/* no fence.mbarrier_init nor barrier.cluster after the init */
	CG_CLPROBE_MASK_OUTSIDE = 1 << 4,	/* rank 0's mask names rank 2 of the pair */
};
int cg_emit_cluster_probe(CgModule *m, const char *name, int ctas, DbgFlags flags, Diag *d);
/* The cluster probe's tensor map over A [rows][64] bf16: 8-row boxes. */
CgTmap cg_cluster_probe_map(int rows);
/* The most registers per thread a CTA of that many threads can start with
 * (64K a CTA, in multiples of 8, at most 248): 168 for 384 threads. */
int cg_regs_per_thread(int threads);

/* epilogue.c: the output quantisation stage */
double cg_quant_qmax(DType c_dt);	/* 448 (f8e4m3), 127 (i8); 0: not a quantised type */
/* The spec's own rules (types, roles); tiling rules are cg_gemm_check's. */
int cg_quant_check(const CgQuant *q, DType c_dt, Diag *d);
/* "f8e4m3 group=128 scales", "i8 static scale=p3 zero=2" */
int cg_quant_print(char *buf, size_t n, const CgQuant *q, DType c_dt);

/* k_gemm_simt.c: the same GEMMs on CUDA cores (FFMA) */

/*
 * The GEMM of cg_emit_gemm, same parameters, roles and semantics, computed
 * with f32 FMAs: operands f32, bf16 or f16 in any mix (converted to f32 in
 * registers; f32 x f32 is exact f32 arithmetic, no tf32/bf16 rounding);
 * any N and K (masked tails), any lda/ldb/ldc (vector loads where they and
 * the tails allow; pointers 16-byte aligned).  swiglu needs N even.
 * The tile is bm x bn (rows x columns per CTA), 256 threads:
 *   bm, bn in 32/64/128, bk 8/16/32: a (bm/16) x (bn/16) register tile
 *     per thread, double-buffered shared k-tiles;
 *   bm * bn <= 32, bn even: split-K inside the CTA (8 warps over K, a fixed
 *     tree in shared memory adds the partials): routers, few rows.
 * warps_m/warps_n/stages are ignored.  Grid: tiles: (cdiv(M + E*(bm-1), bm),
 * cdiv(N, bn), 1); persistent: (ctas, 1, 1).
 */
int cg_emit_gemm_simt(CgModule *m, const char *name, const GemmSpec *s, Diag *d);
/* The checks of cg_emit_gemm_simt alone. */
int cg_gemm_simt_check(const CgTarget *t, const GemmSpec *s, Diag *d);
/* Choose bm, bn, bk for about `rows` rows per expert (split-K for N <= 32 or rows <= 16). */
void cg_gemm_simt_tiles(GemmSpec *s, int64_t rows);
int cg_gemm_simt_smem(const GemmSpec *s);

/* k_gemm_vec.c: decode GEMMs of a few rows as warp dot products (CG_MAINLOOP_VEC) */

/*
 * The GEMM of cg_emit_gemm (same parameters, roles, semantics and
 * epilogue) for bm = 1..8 rows a tile: each warp takes items of bm rows x
 * bn columns (bn even, 2..8, dividing N) and streams the columns' B rows
 * with 16-byte loads (lane l: k = 8 (32 i + l) .. +7), f32 FMAs, a fixed
 * warp sum.  A and B both bf16 or both f16, B [N,K], K a multiple of 8;
 * no quantisation, FP8, a_rep or split-K.  sched = CG_SCHED_PERSISTENT
 * over `ctas` CTAs of 256 threads (8 warps); bk, warps and stages are
 * ignored.  cg_emit_gemm, cg_gemm_check and cg_gemm_smem dispatch here
 * when spec->mainloop is CG_MAINLOOP_VEC.
 */
int cg_emit_gemm_vec(CgModule *m, const char *name, const GemmSpec *s, Diag *d);
int cg_gemm_vec_check(const CgTarget *t, const GemmSpec *s, Diag *d);
int cg_gemm_vec_smem(const GemmSpec *s);

/* program.c: what unit tests see of a program beyond program.h */
const unsigned char *cg_program_weights(const CgProgram *p);	/* the packed real weights */
uint64_t cg_program_weight_bytes(const CgProgram *p);		/* ... and their size */
const CgCompileOpts *cg_program_opts(const CgProgram *p);
CgModule *cg_program_module(const CgProgram *p, const char *arch);	/* NULL if not compiled for it */

/* lower_gemm.c: a template=gemm|grouped_gemm kernel body as a GemmSpec */
typedef struct GemmSpec GemmSpec;
typedef struct CgGemmBind CgGemmBind;
struct CgGemmBind {		/* kernel parameter index of each GEMM operand; -1: none */
	int a, b, gather, scatter, offsets;
	int bscale, bzero;	/* quantised B (dequantize folded into the kernel): its scales, zero points */
	int ascale;		/* FP8 x FP8: A's scales (GemmSpec.f8); -1: none */
	int b_interleave;	/* ... read through lower-moe's gate|up interleave (cg_bq_pack's) */
	int c_scale;		/* kernel result index of the group scales ("C_scale"); -1: none */
	int64_t rows;		/* static row count (m_per_t is then 1, T = rows); 0: coef*T */
	const Node *fold;	/* GemmSpec.fold: the combine call ("fold_w" its in[1], "fold_x" its
				 * last operand, "fold_y" its result); NULL: none */
};
/* Epilogue leaves get roles "pN" (kernel parameter N); the result is C.
 * -1 with the reason in why when the builder cannot express the body. */
int cg_gemm_from_kernel(const Module *m, const Graph *k, GemmSpec *s, CgGemmBind *bind,
			char *why, size_t whylen);

/* ---- k_route.c, k_permute.c, k_synth.c, k_body*.c: the kernels around the GEMMs ---- */

/* k_route.c: the MoE router, one warp per token */
typedef enum { CG_ROUTER_SOFTMAX, CG_ROUTER_SIGMOID, CG_ROUTER_TOPK_SOFTMAX, CG_ROUTER_SPARSEMIXER } CgRouter;
typedef enum { CG_GROUP_MAX, CG_GROUP_TOP2 } CgGroupScore;
typedef struct CgRouteSpec CgRouteSpec;
struct CgRouteSpec {
	int E, k;		/* experts 1..512, choices per token 1..min(16, E) */
	CgRouter router;
	int renorm;		/* softmax, sigmoid: weights divided by their sum */
	double scale;		/* weights multiplied by it (1) */
	int n_group, topk_group;	/* groups of E/n_group experts; the best topk_group kept (1, 1) */
	CgGroupScore group_score;	/* a group's score: its best score, or its best two summed */
	double group_fill;	/* what the dropped groups' experts select with (-inf) */
	double jitter_eps;	/* sparsemixer's threshold is 2 jitter_eps (0.01) */
	int has_selbias;	/* a "selbias" [E] added to the scores for the selection only */
	DType logits_dt, selbias_dt;	/* f32, bf16 or f16 */
	int m_per_t;		/* token rows = m_per_t * T (1; 2 for [2,seq,H] with seq symbolic) */
	int bfly;		/* 1: each top-k round a butterfly arg-max of 64-bit keys in every lane, no
				 * barrier a round (the same choices); 0: a shfl.up scan and a broadcast */
	int warp_sync;		/* 1: warp sums and maxima to the warp by shuffles and warp syncs in
				 * place of CTA barriers (each warp's shared slots are its own): the
				 * prefill route kernel with no CTA barrier (--debug=prefill-small) */
	int redux;		/* with bfly and warp_sync: each top-k round's warp maximum two
				 * redux.sync.max.u32 (the key's high word, then the low word among
				 * the lanes holding that high word) and each broadcast of lane 31 one,
				 * in place of five shuffle steps (the same choices, the same bits) */
	int count_ch;		/* > 0: also the grid permute's count table, "count_ws" (i32, 0 at launch):
				 * hist[id G + slot / count_ch] += 1 by atomics, G = (T k + count_ch) /
				 * count_ch (CgPermuteSpec.counted; --debug=route-count) */
};
void cg_route_default(CgRouteSpec *s);	/* softmax, E 8, k 2, f32 */
/* The spec of an IR `route` node: its attributes and operand types. */
int cg_route_spec(const Node *n, CgRouteSpec *s, Diag *d);
/*
 * Exactly the `route` op (ir/eval_moe.c): ids best first, ties to the lower
 * expert, the weights of the chosen experts in the same order.
 * Parameters: "logits" [T,E], ["selbias" [E]], "weights" f32 [T,k] (out),
 * "ids" i32 [T,k] (out), ["count_ws" (count_ch)], "T" (i32).  Block 128
 * (4 tokens), grid cdiv(T,4); with m_per_t, T rows read m_per_t * T and
 * the grid grows with it.
 */
int cg_emit_route(CgModule *m, const char *name, const CgRouteSpec *s, Diag *d);

/* k_permute.c: token slots sorted by expert, one CTA */
typedef struct CgPermuteSpec CgPermuteSpec;
struct CgPermuteSpec {
	int E, k;		/* experts 1..1024, choices per token */
	DType ids_dt;		/* i32 or i64 */
	int want_pos;		/* also write "pos", the inverse of rows */
	int m_per_t;		/* ids rows = m_per_t * T (1) */
	int grid;		/* 1: the grid sort, two kernels NAME_count and NAME (0: one CTA) */
	int64_t max_slots;	/* grid: the slots (m_per_t*T*k) at the largest T (0: unknown) */
	int small;		/* cg_permute_block with at most one slot a thread: each slot's place and
				 * each offset counted from all the ids (no counters or scans; 0: owners) */
	int quad;		/* small: the buckets padded to a multiple of 8 and read 8 a loop trip
				 * (two 16-byte shared loads; --debug=front3) */
	int apart;		/* small: where the block has a thread for every slot and every offset
				 * besides, threads nmax .. nmax+E count the offsets while threads
				 * below nmax place the slots (not one after the other) */
	int keyed;		/* small: each slot as one word bucket << 16 | slot in shared memory, so a
				 * place and an offset are one compare an element (the same counts) */
	int counted;		/* grid: the route counted the slots (CgRouteSpec.count_ch): no NAME_count
				 * launch; NAME reads the table from "count_ws" in place of "splitk_ws" */
};
void cg_permute_default(CgPermuteSpec *s);	/* E 8, k 2, i32, pos, one CTA */
int cg_permute_spec(const Node *n, CgPermuteSpec *s, Diag *d);	/* of a `permute` node */
/*
 * Exactly the `permute` op: offsets[E+1] are the prefix sums of the
 * per-expert counts; rows[T*k] the slots sorted by (expert, slot); pos the
 * inverse.  Deterministic (no atomics), nothing read on the host, any T.
 * Ids outside 0..E-1 are clamped (the interpreter reports them).
 * Parameters: "ids" [T,k], "offsets" i32 [E+1] (out), "rows" i32 [T*k]
 * (out), ["pos" i32 [T*k] (out)], "T" (i32).  Grid 1, block 1024.
 * With s->grid, two kernels, launched in this order: NAME_count ("ids",
 * "splitk_ws", "T") and NAME (the parameters above with "splitk_ws"
 * before "T"), each a grid of cdiv(slots + 1, chunk) CTAs, for slots up
 * to s->max_slots; the workspace holds cg_permute_ws_bytes(s) bytes
 * (nothing in it is read before NAME_count writes it: no memset).  With
 * s->counted only NAME, its table "count_ws" counted by the route kernel.
 */
int cg_emit_permute(CgModule *m, const char *name, const CgPermuteSpec *s, Diag *d);
int64_t cg_permute_ws_bytes(const CgPermuteSpec *s);
int cg_permute_chunk(const CgPermuteSpec *s);	/* the grid sort's slots a CTA (CgRouteSpec.count_ch) */

/*
 * k_front.c: a decode block's front in one launch (T <= CG_FRONT_MAX_T):
 * the router's rms_norm (and the rstd of a norm folded elsewhere), the
 * router GEMM on CUDA cores, one CTA per expert, then in the last CTA the
 * route and the permutation, exactly cg_emit_route's and cg_emit_permute's.
 * Parameters: "x" [T,H], ["gamma" [H]], "w_router" [E,H] ([H,E]: w_kn),
 * ["selbias" [E]], ["h" [T,H] (out)], ["rstd" f32 [T] (out)], "logits"
 * [T,E] (out), "weights", "ids", "offsets", "rows", ["pos"] (outs, as the
 * route and permute kernels'), "flags" i32 [E] (0 at launch, 0 after),
 * "zero_words" (i32: words of flags the last CTA zeroes for the next split
 * GEMM), "T".  Grid cg_front_ctas (E x token slices), block 128 (T <= 4)
 * or 256.
 */
#define CG_FRONT_MAX_T 64
/* Fronts take a warp's tokens two at a time (cg_front_pair) without --debug=front-pair: 0 until the
 * H200's A/B (session 32), the one line to flip (tests follow it) */
#define CG_FRONT_PAIR_DEFAULT 0
/* --debug=front2 (session 35) without the flag, where a CTA has one expert (program.c find_fronts):
 * front-pair, vec-ahead's last CTA (butterfly top-k, slot sort, acq_rel hand-over) at every T, and
 * whole rows a batch (CgFrontSpec.wide); the default since the H200's A/B of session 35 (same bits;
 * Mixtral, Qwen3-30B-A3B, gpt-oss-20b at T = 16 0.983-0.993x; DeepSeek-V3's two experts a CTA 1.003x,
 * so not there) */
#define CG_FRONT2_DEFAULT 1
/* --debug=front3 (session 37) without the flag, where a CTA has one expert (program.c find_fronts): the
 * hand-over by a ticket (the last CTA to finish routes, no flag waits), the chain's flags zeroed by every
 * CTA at its start, the ids to the slot sort through shared memory, the sort 8 slots a trip, the logits
 * prefetched toward L1 (CgFrontSpec.ticket, CgPermuteSpec.quad); the default since the H200's A/B of
 * session 37 (same bits, routing dumps byte for byte; Qwen3-30B-A3B T = 1 0.986x, T = 16 0.997x, gpt-oss-20b
 * 0.996x, Mixtral and MXFP4 gpt-oss 0.999x; DeepSeek-V3 FP8's two experts a CTA 1.001x, so not there) */
#define CG_FRONT3_DEFAULT 1
/* --debug=combine-fold (session 38) without the flag (program.c fold_combine): a decode down GEMM on
 * CUDA cores runs the combine in its last CTA (GemmSpec.fold), the plan has no combine launch */
#define CG_COMBINE_FOLD_DEFAULT 0
/* The decode front in two launches (CgFrontSpec.part; session 38, no flag: its A/B compiled the arm with a
 * moec built with it 1): the expert CTAs, then one CTA that routes and sorts after their grid dependency,
 * instead of the ticket's fence, atomic and fence; every front on front3's layout (DeepSeek-V3's two
 * experts a CTA too).  H200, session 38 (bench/ab/front_split.ab; y and the routing dumps byte for byte
 * main's): Qwen3-30B-A3B T = 1 31.3 -> 30.6 us (0.977x), T = 16 0.992x, MXFP4 gpt-oss-20b 0.996x, Mixtral
 * and gpt-oss-20b bf16 0.999x, DeepSeek-V3 FP8 T = 16 0.992x; every Qwen3 round below every main round.
 * Why: the combine-fold A/B measured a ticket hand-over at the end of a grid ~0.5 us slower than a
 * programmatic grid dependency.  The default since that A/B. */
#define CG_FRONT_SPLIT_DEFAULT 1
/* The front's route launch (part 2) with a short critical path (program.c find_fronts; --debug=route2
 * where this is 0; session 39, issue 12): a warp for every token of a round of up to 16
 * (CgFrontSpec.route_warps: Qwen3-30B-A3B T = 16 in one round, not two of 8), the warps' sums and
 * maxima without CTA barriers (CgRouteSpec.warp_sync), each top-k round two redux.sync and each broadcast
 * one (CgRouteSpec.redux; DeepSeek-V3's group scores too), every front's sort a slot a thread
 * (CgPermuteSpec.small) with its offsets counted beside its places (apart), a compare an element (keyed).
 * The same bits.  H200, session 39 (bench/ab/s39-q3dec.ab; graphs, 6 interleaved rounds): Qwen3-30B-A3B
 * T = 1 0.988x, T = 16 0.985x, T = 16 skewed 0.955x; DeepSeek-V3 bf16 T = 16 0.994x; gpt-oss-20b 0.996x. */
#define CG_ROUTE2_DEFAULT 1
/* A prefill route kernel also counting the grid permute's slots
 * (program.c's route_count) by default (1: since session 39's H200 A/B, the same bits,
 * the routing buffers byte for byte: Qwen3-30B-A3B T = 4096 698.8 -> 693.3 us
 * (0.992x; skewed 0.992x), T = 256 0.990x, DeepSeek-V3 bf16 T = 4096 0.999x)
 * or with --debug=route-count only (0) */
#define CG_ROUTE_COUNT_DEFAULT 1
/*
 * Quantised B ahead of the grid wait (--debug=qahead, session 39; issue 13;
 * program.c's down_ahead): bf16's down-ahead for the stream-K mixed-input
 * decode GEMMs (GemmSpec.bq: MXFP4, GPTQ), whose fixed cost a launch (~10-11 us at T = 16: F = 2 t(k4) -
 * t(k3), docs/codegen.md "Quantised decode, session 38") holds a DRAM round
 * trip of every CTA's first k-tiles with nothing in flight: the packed
 * words, scales and zero points of the run's first AHEAD_SM bytes an SM
 * (k_gemm_mixed.c's gemm_bq_ahead), at any CTAs an SM (gpt-oss-20b's 4,
 * Mixtral GPTQ's 3).  The down, and the gate|up where gate_up_ahead says.
 * H200, session 39 (T = 16, CUDA graphs, medians of 6 interleaved rounds, the
 * same bits): gpt-oss-20b MXFP4 132.7 -> 131.9 us (0.994x; skewed 0.993x),
 * Mixtral GPTQ 222.3 -> 221.3 (0.995x; skewed 1.000x); the prefetch alone
 * (without the kept table, GemmSpec.ahead_table) 0.997-1.006x.  The default since.
 */
#define CG_QAHEAD_DEFAULT 1	/* 0: with the flag only */
/*
 * Bulk copies of quantised B (--debug=qbulk, session 40; issue 13; program.c's
 * qbulk): the stream-K mixed-input decode GEMMs' stages of packed words,
 * scales and zero points filled by cp.async.bulk from one warp on an
 * mbarrier a stage (GemmSpec.bq.bulk), no LDGSTS or addresses of B in the
 * consumers, and the ring as deep as the shared memory of the CTAs an SM
 * already has allows (gpt-oss-20b's 16x192x64: 4 -> 6 stages at 4 CTAs an
 * SM, ~117 KB of B in flight an SM).  Not measured (no device in session 40).
 */
#define CG_QBULK_DEFAULT 0	/* 0: with the flag only */
/*
 * FP8 x FP8 split-K (program.c's f8_split; issue 13, session 39): the dense
 * GEMMs on the cp.async wgmma mainloop (FP8 has no mma.sync one; the WS
 * mainloop takes no split, so cg_gemm_ws_for leaves these to it).  At
 * decode DeepSeek-V3's shared gate|up (N = 4096 interleaved, K = 7168,
 * SwiGLU, its output quantised per 128) is N/256 = 16 CTAs of 64x256 (bn
 * 256: SwiGLU's 128 output columns are one quantisation group) streaming
 * 29 MB: 43-47 us on the H200 where main's bf16 split 8 (128 CTAs, 58.7 MB)
 * took 30-33.  A slice promotes its own k-tiles (scale block = k-tile) into
 * f32 sums; the slices' sums are added in slice order by split_reduce
 * (live rows), and the last slice runs SwiGLU and the group quantisation on
 * the full sums: other bits than unsplit (the f32 additions' order), within
 * the interpreter's tolerance.  S by split_time as for bf16 (16 CTAs: S = 8,
 * 128 CTAs).  Only those whose output is quantised per group (the ones the
 * bf16 path split before FP8_GLU_DEFAULT); grouped FP8 GEMMs keep their
 * tiles (DeepSeek-V3's routed ones give 128 CTAs at T = 1 already), and so
 * does the shared down (k6: 112 CTAs, which the model would split 2; the
 * A/B's tuned arm measures that).  0 until bench/ab/s39-f8dec.ab runs on a
 * GPU (emulator-checked only: the device was withdrawn in session 39); the
 * A/B's new arm is a moec built with it 1.
 */
#define CG_F8_SPLIT_DEFAULT 0
typedef struct CgFrontSpec CgFrontSpec;
struct CgFrontSpec {
	int64_t H;		/* x's row length, the router GEMM's K */
	DType x_dt, w_dt;	/* f32, bf16 or f16 */
	int w_kn;		/* the router weight is [H,E] (matmul without trans_b) */
	int bias;		/* the router GEMM adds a bias [E] (bias_dt) before its rounding (gpt-oss) */
	DType bias_dt;
	int norm;		/* the router reads rms_norm(x) * gamma rounded to h_dt */
	double eps;
	DType gamma_dt, h_dt;
	DType hout_dt;		/* ... then cast to this (the norm kernel's casts; h_dt: none) */
	int write_h;		/* ... and others read it too: store h (as hout_dt) */
	int rstd;		/* also store rstd(x) (eps rstd_eps) */
	double rstd_eps;
	DType round_dt;		/* the logits rounded to this first (f32: not) */
	DType logits_dt;	/* the logits as stored and routed */
	CgRouteSpec route;
	CgPermuteSpec perm;	/* ids i32 */
	int64_t max_t;		/* the largest T */
	int sms;		/* SMs the grid is sized for: the bundle's targets' fewest
				 * (cg_target_sms; 0: 132, an H100/H200) */
	int split;		/* max_t <= 4: a token's row split over the CTA's warps where
				 * cg_front_split allows (--debug=no-vec-gemm: not) */
	int acq_rel;		/* the hand-over's fences fence.acq_rel.gpu (a release before each
				 * flag, an acquire after the waits), not fence.sc.gpu */
	int pair;		/* --debug=front-pair: a warp's tokens two at a time where it gets
				 * more than one (cg_front_pair), sums broadcast by shuffles */
	int wide;		/* --debug=front2: with pair, a warp's whole row (up to 16 groups of 8)
				 * loaded before it is used where it takes one token and one expert */
	int ticket;		/* --debug=front3: flags[0] counts the CTAs done (atom.add between two
				 * acq_rel fences) and the last to finish routes and resets it, instead
				 * of the last launched waiting for a flag a CTA; flags[ctas ..
				 * zero_words) zeroed by every CTA at its start, a word a thread */
	int part;		/* with ticket, CG_FRONT_SPLIT_DEFAULT: the front as two launches with one
				 * parameter list: 1, the expert CTAs (norm, logits; no hand-over: they
				 * exit), 2, one CTA that routes and sorts (the ticket's last CTA), which
				 * the grid dependency orders after part 1 (PDL); 0: one launch */
	int route_warps;	/* part 2's warps (CG_ROUTE2_DEFAULT: every token of a round of up to 16
				 * at once); 0: the front's (4 for max_t <= 4, else 8) */
};
int cg_front_check(const CgFrontSpec *s, Diag *d);
int cg_front_smem(const CgFrontSpec *s);
int cg_front_ctas(const CgFrontSpec *s);	/* the grid: E / EB x token slices */
int cg_front_experts(const CgFrontSpec *s);	/* EB: experts a CTA */
int cg_front_split(const CgFrontSpec *s);	/* the CTA's warps share each token's row */
int cg_front_pair(const CgFrontSpec *s);	/* tokens a warp takes at a time: 1 or 2 */
int cg_emit_front(CgModule *m, const char *name, const CgFrontSpec *s, Diag *d);
const Node *cg_only_node(const Graph *k, Op op);	/* a kernel's one node of op (constants aside), or NULL */
int cg_param_index(const Graph *k, const Value *v);	/* v's parameter index in kernel k, or -1 (lower_gemm.c) */
/* v = concat(x, x, ..., axis=-1) of one value r times (split-f32's A): r, else 0 (lower_gemm.c) */
int cg_concat_repeats(const Value *v);
/* The calls of main-graph module m that a front replaces, found from the
 * route call: its logits' GEMM call, the rms_norm row call feeding that
 * GEMM (if any), an rstd row call of the same rows (if any), the permute
 * call of its ids.  1 when they make a front (spec filled), else 0 with
 * the reason in buf. */
typedef struct CgFrontMatch CgFrontMatch;
struct CgFrontMatch {
	const Node *norm, *rstd_call, *gemm, *route, *perm;	/* norm, rstd_call: NULL if none */
	const Value *x, *gamma, *w, *bias, *selbias, *h, *rstd_out, *logits;	/* bias: NULL if none */
	CgFrontSpec s;
};
int cg_front_match(const Module *m, const Node *route_call, int64_t max_t, CgFrontMatch *fm,
		   char *buf, size_t n);

/*
 * k_norm.c: the RMSNorm row kernels of a block (rms_norm [-> cast] and the
 * rstd of a norm folded into a GEMM) as one launch, a warp a row, 16-byte
 * loads and stores, the sum of squares combined by shuffles in the order
 * of the row-mode body kernel's 256-thread tree: the same bits as the
 * kernels it replaces.  Parameters: "x" [rows,H], ["gamma" [H]], ["h"
 * [rows,H] (out, hout_dt)], ["rstd" f32 [rows] (out)], "T" (i32).  Grid
 * cdiv(rows, 4), block 128; rows = a*T + b.
 */
typedef struct CgNormSpec CgNormSpec;
struct CgNormSpec {
	int64_t H;		/* row length: a multiple of 8, 64..2^20 */
	CgExpr rows;		/* a*T + b rows (div 0) */
	DType x_dt;		/* f32, bf16 or f16 */
	int norm;		/* h = rms_norm(x) * gamma rounded to h_dt, then to hout_dt */
	double eps;
	DType gamma_dt, h_dt, hout_dt;	/* hout_dt: the norm's cast (h_dt: none) */
	int rstd;		/* rstd(x), f32 */
	double rstd_eps;
	int no_h;		/* norm: h is not stored (only its quantisation below is) */
	/* > 0: quantize_dynamic of h (the value stored, hout_dt) per qgroup columns
	 * (8..256, a power of 2 dividing H) to q_dt (f8e4m3): scale = amax / 448
	 * (1 where amax is 0), q = sat(rn(h / scale)); stored: q (q_out), the f32
	 * scales [rows][H / qgroup] (qs_out), q * scale rounded to dq_dt (dq_out) */
	int qgroup, q_out, qs_out, dq_out;
	DType q_dt, dq_dt;
	int q_pre;		/* the quantisation reads the norm's value before its cast (h_dt) */
	int bcast;		/* the row's sum to the warp by shuffles, not a shared slot and a CTA
				 * barrier; rows of up to 64 registers a lane kept (--debug=norm-bcast) */
	int rows_warp;		/* > 1: rows a warp (the grid cdiv(rows, 4 rows_warp)), gamma copied
				 * to shared memory once a CTA, rows kept with the next row's loads
				 * ahead where two fit 128 registers a lane, sums by shuffles
				 * (--debug=prefill-small) */
};
int cg_norm_check(const CgNormSpec *s, Diag *d);
int cg_emit_norm(CgModule *m, const char *name, const CgNormSpec *s, Diag *d);
/* A row kernel computing rms_norm(p0, p1) over the last axis [-> one cast]
 * -> its one result: 1 with the spec's norm fields (H, x_dt, eps, gamma_dt,
 * h_dt, hout_dt) set, else 0. */
int cg_norm_body(const Node *call, CgNormSpec *s);
/* A row kernel computing op of its operand 0 over the last axis of rows [T,H]
 * (H < 0: any): the node, or NULL. */
const Node *cg_row_op(const Node *call, Op op, int64_t H);
/* The rms_norm or rstd row call `call` and the other one of the same x in
 * module m's main graph (if any), as one cg_emit_norm launch: 1 (match
 * filled), else 0 with the reason in buf.  skip: calls taken already. */
typedef struct CgNormMatch CgNormMatch;
struct CgNormMatch {
	const Node *norm, *rstd_call;	/* either may be NULL, not both */
	const Value *x, *gamma, *h, *rstd_out;
	const Value *q, *qs, *dq;	/* the quantisation's results (s.qgroup > 0), each NULL if not stored */
	CgNormSpec s;
};
int cg_norm_match(const Module *m, const Node *call, int (*skip)(const void *ctx, const Node *c),
		  const void *ctx, CgNormMatch *nm, char *buf, size_t n);

/*
 * k_combine.c: the MoE combine row kernel (reduce_sum over axis 1 of the f32
 * slots [rows,k,H], or of bf16/f16 slots cast to f32 (--debug=slots-x)
 * [-> cast] [+ x]) with 16-byte accesses (8 for 2-byte slots), a thread per 4
 * outputs: the same bits as the body kernel.  Parameters "slots", ["x"],
 * "y" (out), "T"; grid cdiv(rows * H/4, 256), block 256.
 */
int cg_combine_check(const CgCombineSpec *s, Diag *d);
int cg_emit_combine(CgModule *m, const char *name, const CgCombineSpec *s, Diag *d);
/* A row kernel call computing exactly that (module m: its T dims): 1 with s filled, else 0. */
int cg_combine_match(const Module *m, const Node *call, CgCombineSpec *s);
/* Outputs a thread of the combine: 4 (f32 slots) or 8 (bf16/f16). */
int cg_combine_vw(const CgCombineSpec *s);

/* k_ep_pack.c: expert parallelism's dispatch packing (the `ep_pack` op) */
#define CG_EP_MAX_EXPERTS 1024
typedef struct CgEpPackSpec CgEpPackSpec;
struct CgEpPackSpec {
	int N, E, k;		/* ranks, experts, choices per token */
	int64_t H;		/* row length */
	DType x_dt, w_dt, ids_dt;	/* rows (whole bytes), f32 weights, i32/i64 ids */
	int sum;		/* combine=sum: back[T*N], else back[T*k] */
	int64_t owner[CG_EP_MAX_EXPERTS], local[CG_EP_MAX_EXPERTS];
};
int cg_ep_pack_spec(const Node *n, CgEpPackSpec *s, Diag *d);	/* of an `ep_pack` node */
/*
 * Exactly the `ep_pack` op (docs/ir.md).  Parameters: "x" [T,H], "weights"
 * f32 [T,k], "ids" [T,k], "xs" [N,T,H], "ws" f32 [N,T,k], "is" i32 [N,T,k],
 * "back" i32 (out), "T" (i32).  Grid (cdiv(T,256), N), block 256.
 */
int cg_emit_ep_pack(CgModule *m, const char *name, const CgEpPackSpec *s, Diag *d);

/* k_synth.c: synthetic weights generated on the device */
/*
 * out[i] = ir_synth_value(seed, namehash, i, mean, scale) rounded to dt as
 * ir_weight_data does, bit for bit, for i < count; any grid (grid-stride
 * loop; packed i4/u4: one byte, two elements, per step).
 * Parameters: "out", "seed" u64, "namehash" u64, "mean" f32, "scale" f32,
 * "count" i64.  Block 256; the recorded grid (1024) may be replaced.
 */
int cg_emit_synth(CgModule *m, const char *name, DType dt, Diag *d);
/* ... of a weight with row_block rb > 1 or col_repeat cr > 1 (Weight): element
 * i takes element ir_synth_index's value for a [.., rows, cols] weight (rb,
 * cr, rows and cols in the code; not for packed types) */
int cg_emit_synth_rows(CgModule *m, const char *name, DType dt, int64_t rb, int64_t cr, int64_t rows,
		       int64_t cols, Diag *d);

/* k_body*.c: any elementwise or row_reduce kernel body, or one op */
typedef struct CgBodySpec CgBodySpec;
struct CgBodySpec {
	int threads;		/* per CTA: 256 */
	int row_min;		/* a reduction of at least this many elements gets a CTA per row (64) */
};
void cg_body_default(CgBodySpec *s);
/*
 * Compile a kernel body (template=elementwise or row_reduce, or any other
 * body of supported ops): every result is an output.  Symbolic dims must
 * be coef*T (T: the product of the body's symbols).  Parameters: one
 * "in:NAME" pointer per kernel parameter in order, one "out:NAME" per
 * result, then "T" (i32).  Elementwise: one thread per element, grid
 * cdiv(numel, threads); with a large reduction: one CTA per row of it.
 * An op without a lowering is a diagnostic at its node's loc.
 */
int cg_emit_body(CgModule *m, const char *name, const Graph *kernel, const CgBodySpec *s,
		 Diag *d);
/*
 * One node of a graph as a kernel (weight preparation run at load):
 * "in:NAME" per operand that is not a constant, in operand order, "out:NAME"
 * per result, "T".
 */
int cg_emit_node(CgModule *m, const char *name, const Node *n, const CgBodySpec *s, Diag *d);
/* cg_emit_body's checks alone: 0, or the diagnostic it would give. */
int cg_body_check(const Graph *kernel, Diag *d);

#ifdef CG_INTERNAL
/* ---- The helper layer for kernel builders (codegen/ only) ---- */
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

struct CgModule {
	CgTarget t;		/* strings in arena */
	Arena *arena;
	LLVMContextRef C;
	LLVMModuleRef M;
	LLVMTargetMachineRef TM;
	CgKernel *kern;		/* malloc'd */
	int nkern;
	int finished;		/* 1 verified + optimised, -1 failed */
	char *ptx;
	size_t ptxlen;
	int emu;
	int module_owned_elsewhere;	/* emu: the JIT owns M */
	char *host_triple;	/* emu */
	void *jit;		/* emu: the execution engine */
	DbgFlags debug;		/* DBG_* flags (util.h) */
	int keep_ir;		/* its IR is printed after codegen: share.c takes none of its kernels */
	int griddep_later;	/* set by a builder around cg_fn_begin: the kernel's grid wait is
				 * emitted by cg_fn_griddep, after its work that needs no predecessor */
};
const char *cg_target_features(const CgTarget *t);
int cg_module_finish(CgModule *m, Diag *d);	/* verify + default<On>, once */
int cg_emu_init(CgModule *m, Diag *d);		/* emu.c: host target setup */
void cg_emu_free(CgModule *m);

/* special-register codes of moec_emu_sreg (emu.c), + dim; the cluster's: no dim */
enum { EMU_TID = 0, EMU_NTID = 3, EMU_CTAID = 6, EMU_NCTAID = 9, EMU_CLUSTER_CTARANK = 12 };

/*
 * A kernel under construction.  Builders use these helpers for everything
 * target-specific, so that the "emu" target can swap in its calls.
 * Helpers never abort: a missing intrinsic or capability records a
 * diagnostic, sets err and returns an undef of the right type, so the
 * builder runs to its end and cg_fn_end() reports failure.
 */
typedef struct CgFn CgFn;
struct CgFn {
	CgModule *m;
	Diag *d;
	LLVMContextRef C;
	LLVMModuleRef M;
	LLVMBuilderRef B;
	LLVMValueRef fn;
	LLVMBasicBlockRef entry;
	int emu;		/* building for the CPU emulator */
	int div_rn;		/* tanh/erf divide by div.rn (its fast path costs registers
				 * the tightest warp-specialised variants lack) */
	int err;
	int nthreads;
	CgKernel *k;
	/* types */
	LLVMTypeRef tvoid, ti1, ti8, ti16, ti32, ti64, tf32, tf16, tbf16;
	LLVMTypeRef tgptr;	/* global pointer: ptr addrspace(1) (emu: ptr) */
	LLVMTypeRef tsptr;	/* shared pointer: ptr addrspace(3) (emu: ptr) */
	LLVMTypeRef tptr;	/* generic */
};

/* Begin a kernel: params in order; threads per CTA; min CTAs per SM (0: none). */
CgFn *cg_fn_begin(CgModule *m, const char *name, const CgParam *p, int np,
		  int threads, int min_ctas, Diag *d);
/* The grid wait of a kernel begun with m->griddep_later set (nothing without PDL). */
void cg_fn_griddep(CgFn *f);
/* Finish it: geometry into the kernel table (block/grid/smem/note), or drop it on error. */
int cg_fn_end(CgFn *f, const int block[3], const CgExpr grid[3], int smem,
	      const char *note);
LLVMValueRef cg_arg(CgFn *f, int i);
void cg_arg_noalias(CgFn *f, int i);
/* The maps behind the kernel's CGP_TMAP parameters, in order (copied). */
void cg_fn_tmaps(CgFn *f, const CgTmap *t, int n);
/*
 * Pin the registers each thread starts with (.maxnreg, a multiple of 8 up to
 * cg_regs_per_thread(threads)).  A kernel that uses setmaxnreg must: its
 * per-CTA register pool holds only what setmaxnreg.dec gives back of those,
 * and setmaxnreg.inc blocks until the pool has enough.
 */
void cg_fn_maxnreg(CgFn *f, int regs);
const CgTarget *cg_fn_target(const CgFn *f);
int cg_fn_require(CgFn *f, unsigned caps, const char *what);

/* constants and arithmetic shorthands (i32 unless named) */
LLVMValueRef cg_i32(CgFn *f, int64_t v);
LLVMValueRef cg_i64(CgFn *f, int64_t v);
LLVMValueRef cg_f32(CgFn *f, double v);
LLVMValueRef cg_add(CgFn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_sub(CgFn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_mul(CgFn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_addi(CgFn *f, LLVMValueRef a, int64_t b);
LLVMValueRef cg_muli(CgFn *f, LLVMValueRef a, int64_t b);
LLVMValueRef cg_udiv(CgFn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_urem(CgFn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_and(CgFn *f, LLVMValueRef a, int64_t b);
LLVMValueRef cg_shr(CgFn *f, LLVMValueRef a, int b);
LLVMValueRef cg_shl(CgFn *f, LLVMValueRef a, int b);
LLVMValueRef cg_lt(CgFn *f, LLVMValueRef a, LLVMValueRef b);	/* signed < */
LLVMValueRef cg_min(CgFn *f, LLVMValueRef a, LLVMValueRef b);	/* signed */
LLVMValueRef cg_max(CgFn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_sext64(CgFn *f, LLVMValueRef a);
LLVMValueRef cg_select(CgFn *f, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b);

/* special registers */
LLVMValueRef cg_tid(CgFn *f, int dim);
LLVMValueRef cg_ntid(CgFn *f, int dim);
LLVMValueRef cg_ctaid(CgFn *f, int dim);
LLVMValueRef cg_nctaid(CgFn *f, int dim);

/* control flow */
typedef struct CgIf CgIf;
struct CgIf {
	LLVMBasicBlockRef then, els, end;
};
void cg_if(CgFn *f, CgIf *c, LLVMValueRef cond);	/* continue in "then" */
void cg_else(CgFn *f, CgIf *c);
void cg_endif(CgFn *f, CgIf *c);
typedef struct CgLoop CgLoop;
struct CgLoop {
	LLVMValueRef i, step;
	LLVMBasicBlockRef head, exit;
};
/* for (i = begin; i < end; i += step), i32 signed; returns i, continues in the body. */
LLVMValueRef cg_loop(CgFn *f, CgLoop *l, LLVMValueRef begin, LLVMValueRef end,
		     LLVMValueRef step);
void cg_endloop(CgFn *f, CgLoop *l);
/* Leave loop l (to its exit) unless cond (i1): a while loop is cg_loop up to INT32_MAX with this first. */
void cg_loop_while(CgFn *f, CgLoop *l, LLVMValueRef cond);
/* A mutable local (an alloca in the entry block, promoted by mem2reg). */
LLVMValueRef cg_var(CgFn *f, LLVMTypeRef t, LLVMValueRef init);
LLVMValueRef cg_get(CgFn *f, LLVMValueRef var);
void cg_set(CgFn *f, LLVMValueRef var, LLVMValueRef v);

/* memory: global pointers (addrspace 1) and shared (addrspace 3) */
LLVMValueRef cg_gep(CgFn *f, LLVMValueRef p, LLVMValueRef idx, int elem_bytes);
LLVMValueRef cg_gload(CgFn *f, LLVMTypeRef t, LLVMValueRef p, int align);
void cg_gstore(CgFn *f, LLVMValueRef v, LLVMValueRef p, int align);
/* ld/st.volatile, a seq_cst fence, and a spin until an i32 equals want:
 * ordered hand-overs between CTAs without atomics (split-K). */
LLVMValueRef cg_gload_volatile(CgFn *f, LLVMTypeRef t, LLVMValueRef p, int align);
/* n (1, 2 or 4) i32 words at p (aligned to 4n) by ld.global.nc.L1::no_allocate:
 * read-only data streamed once (quantised weights), not kept in L1. */
void cg_gload_stream(CgFn *f, LLVMValueRef p, int n, LLVMValueRef *out);
void cg_gstore_volatile(CgFn *f, LLVMValueRef v, LLVMValueRef p, int align);
void cg_fence(CgFn *f);
void cg_fence_acq_rel(CgFn *f);	/* fence.acq_rel.gpu: release and acquire patterns */
/* The grid's last CTA to get here, after the CTA's barrier: thread 0 releases the CTA's results, adds 1
 * to the ticket at p and, where it drew nctas - 1, resets it and acquires the others'; every thread
 * learns the draw through shared word 0 and a barrier.  The decode front's and the folded combine's. */
LLVMValueRef cg_last_cta(CgFn *f, LLVMValueRef tid, LLVMValueRef p, LLVMValueRef nctas);
void cg_spin_until(CgFn *f, LLVMValueRef p, LLVMValueRef want);
void cg_prefetch_l1(CgFn *f, LLVMValueRef p);	/* prefetch.global.L1 of p's line (a hint) */
void cg_prefetch_l2_bulk(CgFn *f, LLVMValueRef p, LLVMValueRef bytes);	/* bytes at p toward L2 (a hint; sm_90) */
/* atom.global.add.u32 (relaxed): the i32 at p before adding v (dynamic stream-K's counters) */
LLVMValueRef cg_atom_add(CgFn *f, LLVMValueRef p, LLVMValueRef v);
LLVMValueRef cg_smem(CgFn *f);			/* base of dynamic shared memory */
LLVMValueRef cg_sptr(CgFn *f, LLVMValueRef byte_off);	/* cg_smem + off (i32) */
LLVMValueRef cg_sload(CgFn *f, LLVMTypeRef t, LLVMValueRef p, int align);
void cg_sstore(CgFn *f, LLVMValueRef v, LLVMValueRef p, int align);
void cg_barrier(CgFn *f);			/* bar.sync 0 */
/* Named barriers (ids 1..15; i32 values, warp-uniform): bar.sync id, nthreads
 * waits until nthreads threads (whole warps) have arrived at id, counting its
 * own; bar.arrive id, nthreads counts without waiting (producer/consumer
 * hand-overs between warpgroups). */
void cg_bar_sync(CgFn *f, LLVMValueRef id, int nthreads);
void cg_bar_arrive(CgFn *f, LLVMValueRef id, int nthreads);
/* shfl.sync.up.b32 over the full warp: lane l gets lane l-delta's v (l < delta: its own) */
LLVMValueRef cg_shfl_up(CgFn *f, LLVMValueRef v, int delta);
LLVMValueRef cg_shfl_xor(CgFn *f, LLVMValueRef v, int mask);	/* shfl.sync.bfly: lane l ^ mask's v */
LLVMValueRef cg_bcast31(CgFn *f, LLVMValueRef v);	/* lane 31's f32 v in every lane (5 bfly steps) */

/* tensor-core building blocks (sm_80) */
void cg_cp_async16(CgFn *f, LLVMValueRef sdst, LLVMValueRef gsrc);
void cg_cp_async4(CgFn *f, LLVMValueRef sdst, LLVMValueRef gsrc);	/* .ca, 4 bytes */
/* 16 bytes (.cg) read only where live (i1), zeros elsewhere (src-size 0: no global read) */
void cg_cp_async16_zfill(CgFn *f, LLVMValueRef sdst, LLVMValueRef gsrc, LLVMValueRef live);
void cg_cp_async_commit(CgFn *f);
void cg_cp_async_wait(CgFn *f, int n);		/* cp.async.wait_group n */
/* ldmatrix .x4 (.trans): four i32 per lane into out */
void cg_ldmatrix_x4(CgFn *f, LLVMValueRef saddr, int trans, LLVMValueRef out[4]);
/* d = a . b + c, f32 accumulators: m16n8k16 with a/b in dt bf16 or f16,
 * m16n8k8 with dt tf32 (a/b f32 bits with the low 13 bits 0: cg_to_tf32) */
void cg_mma_sync(CgFn *f, DType dt, LLVMValueRef a[4], LLVMValueRef b[2],
		 LLVMValueRef c[4], LLVMValueRef d[4]);
/* cvt.rna.tf32.f32 of the f32 bits in an i32 (f32_to_tf32) */
LLVMValueRef cg_to_tf32(CgFn *f, LLVMValueRef bits);
/* Hopper-only, gated: a diagnostic on other targets */
void cg_setmaxnreg(CgFn *f, int inc, int nreg);	/* warpgroup-wide; needs cg_fn_maxnreg */
/*
 * sm_90 asynchronous copies and mbarriers (emu: emu.c's models).  Shared
 * locations are i32 byte offsets into the dynamic shared memory; an
 * mbarrier takes 8 bytes at an 8-byte-aligned offset.
 */
void cg_mbar_init(CgFn *f, LLVMValueRef off, int count);	/* one thread */
void cg_mbar_init_fence(CgFn *f);	/* fence.mbarrier_init.release.cluster */
void cg_mbar_arrive(CgFn *f, LLVMValueRef off);
void cg_mbar_arrive_tx(CgFn *f, LLVMValueRef off, LLVMValueRef bytes);	/* expect_tx, then arrive */
/* cp.async.mbarrier.arrive.noinc: one of the barrier's arrivals once the
 * thread's cp.async copies so far have landed (emu: they land then) */
void cg_cp_async_mbar_arrive(CgFn *f, LLVMValueRef off);
void cg_mbar_wait(CgFn *f, LLVMValueRef off, LLVMValueRef parity);	/* try_wait.parity until done */
/* cp.async.bulk.tensor.{rank}d tile load through tensor-map parameter
 * `param` at coords (i32, innermost first) into dst, complete_tx on mbar */
void cg_tma_load(CgFn *f, int param, LLVMValueRef dst, LLVMValueRef mbar, int rank,
		 LLVMValueRef *coords);
/* cp.async.bulk (no tensor map): `bytes` (i32, a multiple of 16) from the global p to shared
 * offset dst (both 16-byte aligned), complete_tx on the mbarrier at shared offset mbar */
void cg_bulk_load(CgFn *f, LLVMValueRef dst, LLVMValueRef p, LLVMValueRef bytes, LLVMValueRef mbar);
/* cp.async.bulk.prefetch.tensor.{rank}d.L2: the box at coords brought into L2, no shared
 * memory, no barrier (a hint; nothing on the emulator) */
void cg_tma_prefetch(CgFn *f, int param, int rank, LLVMValueRef *coords);
/* cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group: the box at src (i32 shared offset,
 * 128-byte aligned) stored through tensor-map parameter `param` at coords (elements outside the
 * map's dims are not written); the thread's stores join its next bulk group */
void cg_tma_store(CgFn *f, int param, LLVMValueRef src, int rank, LLVMValueRef *coords);
void cg_bulk_commit(CgFn *f);		/* cp.async.bulk.commit_group */
/* cp.async.bulk.wait_group.read n: the thread's bulk groups but the n newest have read their source */
void cg_bulk_wait_read(CgFn *f, int n);
LLVMValueRef cg_elect(CgFn *f);		/* elect.sync: i1, true in one lane of the warp */
LLVMValueRef cg_vote_any(CgFn *f, LLVMValueRef pred);	/* vote.sync.any: i1, the warp's OR of pred */
LLVMValueRef cg_match_any(CgFn *f, LLVMValueRef v);	/* match.any.sync.b32: i32 mask of the lanes with v (sm_70) */
LLVMValueRef cg_redux_umax(CgFn *f, LLVMValueRef v);	/* redux.sync.max.u32: the warp's largest i32 v, unsigned (sm_80) */
void cg_syncwarp(CgFn *f);			/* bar.warp.sync: a warp's shared accesses ordered */
/*
 * Clusters (sm_90; on "emu" the emulator runs a cluster's CTAs together).  The kernel must be
 * launched with cluster dimension (n, 1, 1) (cg_fn_cluster records n; the
 * kernel traps if launched otherwise: cg_cluster_check).  Shared offsets
 * name the same bytes in every CTA of the cluster.
 */
void cg_fn_cluster(CgFn *f, int n);
void cg_cluster_check(CgFn *f, int n);		/* trap unless %cluster_nctarank == n */
LLVMValueRef cg_cluster_rank(CgFn *f);		/* %cluster_ctarank (i32) */
void cg_cluster_sync(CgFn *f);			/* barrier.cluster.arrive + wait (every thread; not .aligned) */
/* mbarrier.arrive on the barrier at shared offset off of CTA `rank` (i32) of the cluster (mapa) */
void cg_mbar_arrive_cluster(CgFn *f, LLVMValueRef off, LLVMValueRef rank);
/* cg_tma_load, the box multicast to the CTAs of mask (i16 bits: cluster ranks), each
 * completing the bytes on its own mbarrier at the same offset */
void cg_tma_load_multicast(CgFn *f, int param, LLVMValueRef dst, LLVMValueRef mbar, int rank,
			   LLVMValueRef *coords, int mask);
/* ... with the mask a value (i32, its low 16 bits; a cluster's pairs depend on the rank) */
void cg_tma_load_multicast_to(CgFn *f, int param, LLVMValueRef dst, LLVMValueRef mbar, int rank,
			      LLVMValueRef *coords, LLVMValueRef mask);
void cg_wgmma_fence(CgFn *f);

/* conversions: "raw" values are i16 for bf16/f16 and float for f32 */
LLVMTypeRef cg_raw_type(CgFn *f, DType dt);
LLVMValueRef cg_to_f32(CgFn *f, LLVMValueRef raw, DType dt);
LLVMValueRef cg_from_f32(CgFn *f, LLVMValueRef x, DType dt);
LLVMValueRef cg_pack16x2(CgFn *f, LLVMValueRef lo, LLVMValueRef hi);	/* two i16 -> i32 */
/* a * b + c on pairs (i32 holding two bf16 or two f16), rounded once to nearest even:
 * fma.rn.bf16x2 / fma.rn.f16x2 (sm_80); the emulator computes each in double */
LLVMValueRef cg_fma16x2(CgFn *f, DType dt, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
/* max.bf16x2 (sm_80): each half the larger (the other when one is NaN) */
LLVMValueRef cg_max_bf16x2(CgFn *f, LLVMValueRef a, LLVMValueRef b);
/* lop3.b32: the 3-input bitwise function lut of a, b, c (i32; lut's bit
 * 4a+2b+c is the result bit, e.g. 0xea = (a & b) | c): one instruction where
 * ptxas would split an and/or over two constants into two. */
LLVMValueRef cg_lop3(CgFn *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, int lut);

/* f32 math (accurate to a few ulp of f32 unless noted) */
LLVMValueRef cg_exp2(CgFn *f, LLVMValueRef x);	/* ex2.approx.ftz */
LLVMValueRef cg_exp(CgFn *f, LLVMValueRef x);
LLVMValueRef cg_fmin(CgFn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_fmax(CgFn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_sigmoid(CgFn *f, LLVMValueRef x);
LLVMValueRef cg_tanh(CgFn *f, LLVMValueRef x);
/* n / d as div.rn's fast path, without its branch: exact for n = 1 or 2, 1 <= d <= 2^87 only */
LLVMValueRef cg_rcp(CgFn *f, LLVMValueRef d);	/* rcp.approx.ftz */
LLVMValueRef cg_fma(CgFn *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);	/* a b + c, f32, one rounding */
LLVMValueRef cg_fdiv_fast(CgFn *f, LLVMValueRef n, LLVMValueRef d);
/* n / d for many n over one d > 0 (a quantisation group's scale): one div.rn
 * for 1/d (cg_recip), then 3 instructions and a sign a quotient (cg_fdiv_recip),
 * rounded to nearest for quotients in 2^-12..2^120 (target.c says why) */
typedef struct CgRecip CgRecip;
struct CgRecip {
	LLVMValueRef d, rd, k, special;	/* d k, 1/(d k), the scaling (2^64 or 1), rd 0 or inf */
};
void cg_recip(CgFn *f, LLVMValueRef d, CgRecip *r);
LLVMValueRef cg_fdiv_recip(CgFn *f, LLVMValueRef n, const CgRecip *r);
LLVMValueRef cg_erf(CgFn *f, LLVMValueRef x);	/* |error| < 2e-7 */

/* ew.c: the scalar emitter, one entry per OPF_SCALAR op; x, y f32 (y NULL for unary) */
LLVMValueRef cg_ew_emit(CgFn *f, Op op, const IrEwAttrs *a, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cg_log(CgFn *f, LLVMValueRef x);	/* ~1 ulp, no special instructions */
LLVMValueRef cg_sqrt(CgFn *f, LLVMValueRef x);
LLVMValueRef cg_inv_std(CgFn *f, LLVMValueRef ms, double eps);	/* 1 / sqrt(ms + eps): the norms' */
LLVMValueRef cg_fabs(CgFn *f, LLVMValueRef x);
LLVMValueRef cg_clamp(CgFn *f, LLVMValueRef x, LLVMValueRef lo, LLVMValueRef hi);	/* NaN stays NaN */
LLVMValueRef cg_gelu(CgFn *f, LLVMValueRef x, int tanh_approx);

/* raw access */
LLVMValueRef cg_intrinsic(CgFn *f, const char *name, LLVMTypeRef ret,
			  LLVMTypeRef *ovl, int novl, LLVMValueRef *args, int nargs);
LLVMValueRef cg_asm(CgFn *f, LLVMTypeRef ret, const char *text, const char *cons,
		    LLVMValueRef *args, int nargs, int side_effects);
LLVMValueRef cg_call_emu(CgFn *f, const char *name, LLVMTypeRef ret,
			 LLVMValueRef *args, int nargs);

/* epilogue.c: code for an epilogue program */
/*
 * val[i] for the non-leaf, non-swiglu instructions in [from, to), from
 * their operands' val; leaves (and swiglu) are the caller's to fill.
 */
void cg_ep_emit_range(CgFn *f, const CgEpilogue *e, int from, int to, LLVMValueRef *val);
LLVMValueRef cg_ep_emit_op(CgFn *f, const CgEpInst *in, LLVMValueRef a, LLVMValueRef b);
/* The stored bits (i8) of f32 x under q: scale and zero are f32 values (zero may be NULL). */
LLVMValueRef cg_quant_emit(CgFn *f, const CgQuant *q, DType c_dt, LLVMValueRef x,
			   LLVMValueRef scale, LLVMValueRef zero);
/* ... of x[0..n-1] into bits[] (sm_89+: e4m3 by cvt, two an instruction) */
void cg_quant_emit_v(CgFn *f, const CgQuant *q, DType c_dt, const LLVMValueRef *x, int n,
		     LLVMValueRef scale, LLVMValueRef zero, LLVMValueRef *bits);
/* f32 values of the f8 bits[0..n-1] (sm_89+: e4m3 by cvt, two an instruction) */
void cg_f8_to_f32_v(CgFn *f, DType dt, const LLVMValueRef *bits, int n, LLVMValueRef *x);
/* x rounded to bf16/f16 and back by cvt where the target has it (the emulator's
 * moec_emu_f32_to_*; below sm_80 cg_round_dt's integer code): the values of
 * cg_round_dt, a NaN the canonical one */
LLVMValueRef cg_round_cvt(CgFn *f, LLVMValueRef x, DType dt);
/* A group's scale from its amax (f32): amax / qmax, 1 where amax is 0. */
LLVMValueRef cg_quant_emit_scale(CgFn *f, DType c_dt, LLVMValueRef amax);

/* ---- k_synth.c: elements of every dtype (for k_route, k_permute, k_synth, k_body) ---- */
/*
 * A "value" of a dtype is f32 for the float types (f64 narrowed) and i64
 * for the integer types and bool, as the interpreter computes them.
 * Conversions round exactly as dtype_store does: floats to nearest even
 * (f8e4m3 and f8e5m2 saturate), integers truncate toward zero and saturate,
 * NaN becomes 0 (bool: nonzero is 1).  Integer code only, so the device,
 * the emulator and the host agree bit for bit.
 */
int cg_dt_isint(DType dt);
LLVMTypeRef cg_dt_value_type(CgFn *f, DType dt);	/* f32 or i64 */
/* Element idx (i64) of a global array of dt, as a value (i4/u4: packed). */
LLVMValueRef cg_load_dt(CgFn *f, DType dt, LLVMValueRef base, LLVMValueRef idx);
/* Store a value of dt (made by cg_round_dt) as element idx; not i4/u4. */
void cg_store_dt(CgFn *f, DType dt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v);
/* Any value (f32 or i64) as stored in dt and read back: a value of dt. */
LLVMValueRef cg_round_dt(CgFn *f, LLVMValueRef v, DType dt);
/* f32 v rounded half to even (nearbyintf), as the interpreter rounds. */
LLVMValueRef cg_round_even(CgFn *f, LLVMValueRef v);
/* The storage bits of f32 x in a float dtype (i16 for bf16/f16, i8 for f8). */
LLVMValueRef cg_f32_to_bits(CgFn *f, LLVMValueRef x, DType dt);
LLVMValueRef cg_bits_to_f32(CgFn *f, LLVMValueRef bits, DType dt);
/*
 * The synth kernels' parts (cg_emit_synth; k_gemm_mixed.c's generator of
 * repacked quantised weights): cg_synth_begin opens a kernel with the
 * synth parameters (a[0..5]: out, seed, namehash, mean, scale, count),
 * cg_synth_loop is its grid-stride loop over `units` (i64), cg_synth_end
 * closes it (block 256, grid 1024).  cg_synth_value is element i (i64) of
 * the synthetic weight as a value of dt, cg_synth_bits its storage bits
 * (an i32; i4/u4/f4e2m1: the nibble), both as ir_weight_data stores it.
 */
CgFn *cg_synth_begin(CgModule *m, const char *name, LLVMValueRef *a, Diag *d);
LLVMValueRef cg_synth_loop(CgFn *f, CgLoop *l, LLVMValueRef units);
int cg_synth_end(CgFn *f, const char *note);
LLVMValueRef cg_synth_value(CgFn *f, DType dt, LLVMValueRef *a, LLVMValueRef i);
LLVMValueRef cg_synth_bits(CgFn *f, DType dt, LLVMValueRef *a, LLVMValueRef i);
/*
 * The router's work inside another kernel (k_front.c): the CTA's nw warps
 * route tokens 0..T-1, nw at a time, with shared memory from byte smem0
 * (16-aligned) to smem0 + cg_route_smem(s, nw).  Every thread of the CTA
 * (32 nw of them) must call it (it has barriers); T is uniform.
 */
typedef struct CgRouteIo CgRouteIo;
struct CgRouteIo {
	LLVMValueRef logits, selbias, weights, ids, T;	/* selbias NULL without one */
	int sids;	/* > 0: the ids also stored to shared memory from this byte, i32 [T*k] */
};
int cg_route_check(const CgRouteSpec *s, Diag *d);
int cg_route_smem(const CgRouteSpec *s, int nw);
void cg_route_tokens(CgFn *f, const CgRouteSpec *s, int nw, int smem0, const CgRouteIo *io);
/*
 * The permutation inside another kernel (k_front.c), by every thread of a
 * CTA of `threads` (a multiple of 32, <= 1024) whose slots number at most
 * nmax (0: any; fewer owners, so fewer counters to zero and scan), with
 * shared memory from byte smem0 to smem0 + cg_permute_smem(...).
 */
typedef struct CgPermuteIo CgPermuteIo;
struct CgPermuteIo {
	LLVMValueRef ids, offsets, rows, pos, T;	/* pos NULL unless want_pos */
	int sids;	/* > 0, the small sort: the ids read from shared memory there (the route's
			 * sids, behind a barrier), not from ids */
};
int cg_permute_check(const CgPermuteSpec *s, Diag *d);
int cg_permute_smem(const CgPermuteSpec *s, int threads, int64_t nmax);
void cg_permute_block(CgFn *f, const CgPermuteSpec *s, int threads, int64_t nmax, int smem0,
		      const CgPermuteIo *io);
int cg_permute_small(const CgPermuteSpec *s, int threads, int64_t nmax);	/* the small sort is taken */
/* k_combine.c: the combine's outputs g*V .. g*V + V-1 of the rows (g < rows
 * * H/V, the caller's test): what cg_emit_combine's thread g computes.  w, x
 * NULL when not weighted, no residual.  (GemmSpec.fold's last CTA too.) */
void cg_combine_group(CgFn *f, const CgCombineSpec *s, LLVMValueRef slots, LLVMValueRef w, LLVMValueRef x,
		      LLVMValueRef y, LLVMValueRef g);

#endif /* CG_INTERNAL */

#endif
