/*
 * program.h — what the driver (tools/) sees of codegen: a fused module
 * compiled for some targets into kernels, a launch plan and a bundle, and
 * that plan run on the CPU emulator.  The builders, the kernel specs and the
 * LLVM helper layer are codegen's own (codegen.h: codegen/, its unit tests
 * and bench/gemm only; tests/layers.sh checks that nothing else includes it).
 */
#ifndef MOEC_PROGRAM_H
#define MOEC_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"
#include "ir.h"

/* target.c: a target */
typedef struct CgTarget CgTarget;
struct CgTarget {
	const char *sm;		/* "sm_80", "sm_90", "sm_90a"; "emu": the CPU emulator */
	const char *features;	/* "+ptx80"; NULL: the default for sm (sm_80 +ptx70, sm_90[a] +ptx80) */
	int opt;		/* 0..3: LLVM pipeline default<On> and codegen level; 3 by default */
};
int cg_target_check(const CgTarget *t, Diag *d);	/* 0 or a diagnostic */
/* Whether kernels for target sm (a --arch name) run FP8 x FP8 GEMMs
 * (GemmSpec.f8, k_gemm_wgmma.c): sm_90a, or the emulator with
 * DBG_EMU_WGMMA in debug.  The passes fuse for them (PassOpts.fp8_mma). */
int cg_arch_fp8_mma(const char *sm, DbgFlags debug);

/* program.c: a fused module into kernels, a launch plan and a bundle */

typedef struct Manifest Manifest;	/* bundle.h */
/* cache.c: codegen results reused within one compile (moec compile --layers) */
typedef struct CgCache CgCache;
/* dir: also keep results as files there for later compiles (NULL: none) */
CgCache *cg_cache_new(const char *dir);
void cg_cache_free(CgCache *c);
void cg_cache_stats(const CgCache *c, int *hits, int *misses);

/*
 * The glue between the IR and the builders: every call of a fused kernel
 * becomes one emitted kernel per target and one launch step; weights are
 * packed (real) or generated on the device (synthetic); weight preparation
 * left in the graph runs once at load (init steps); intermediate values get
 * offsets in one device arena sized for max_tokens.  Symbolic dims must be
 * products coef*T where T is the product of the model's symbols.
 */
typedef struct CgCompileOpts CgCompileOpts;
struct CgCompileOpts {
	const char *arch[8];	/* "sm_90a", "sm_80", ... in preference order */
	int narch;
	int64_t max_tokens;	/* largest T a run may use */
	int cubin;		/* also embed ptxas's cubins */
	int opt;		/* LLVM -O level */
	const char *model;	/* the model's file, hashed into the bundle */
	DType precision;	/* GEMMs with f32 operands: f32 (exact, CUDA cores), bf16 or f16
				 * (tensor cores, f32 accumulation) */
	CgCache *cache;		/* NULL, or results to reuse and add to (cache.c) */
	DbgFlags debug;		/* DBG_* flags (util.h): DBG_MANIFEST, DBG_CG_DUMP, DBG_EMU_WGMMA */
	const struct CgTuning *tuning;	/* --tuning=FILE: measured tiles first; NULL: the heuristic */
	int ep_rank;		/* --ep=N: the rank whose module this is (its "ep" line) */
	int tune_candidates;	/* --tune-candidates: "candidate" lines for moert tune (one target) */
	int keep_ir;		/* --emit=llvm: every kernel's IR stays whole (no sharing, share.c) */
};
void cg_compile_default(CgCompileOpts *o);	/* sm_90a,sm_80; 4096 tokens; O3; f32 */
/* --precision=f32|tf32|bf16|f16 (docs/codegen.md): 0, or -1 with a diagnostic */
int cg_precision_parse(const char *s, DType *precision, Diag *d);

/*
 * tuning.c: the measured tile choice (docs/codegen.md, "Tuning tables").
 * A versioned text table maps (target, GEMM key) to a tile variant;
 * cg_compile prefers it to the heuristic.
 */
typedef struct CgVariant CgVariant;
struct CgVariant {
	int bm, bn, bk, wm, wn, stages, split;	/* split 1: no split-K */
	int stream;				/* > 0: stream-K over this many CTAs (.pN) */
	int units;				/* stream-K: > 0: dynamic, units a CTA (.uN: GemmSpec.units) */
	int direct;				/* quantised B loaded straight into registers (.d) */
	int cluster;				/* 2: clusters of 2 on the WS mainloop (.c2a sharing A, .c2b B); 4: 2x2 (.c4) */
	int cluster_b;
	int wide;				/* 64x256 warpgroup tiles (.wide: GemmSpec.wg_wide) */
	int f8whole;				/* FP8 x FP8: a k-tile one wgmma group a warpgroup (.fw:
						 * GemmSpec.f8.whole) */
	int minctas;				/* > 0: a launch bound of this many CTAs an SM (.lN:
						 * GemmSpec.min_ctas; not the vec mainloop's own) */
	int persistent;				/* persistent over CG_CLUSTER_CTAS CTAs, where the plan
						 * tiles (.pers; A/B: never the heuristic's own spelling) */
	int bands;				/* dense: > 0: tiles in bands of this many row tiles (.bN:
						 * GemmSpec.bands; A/B: never the heuristic's own) */
	int tma_store;				/* WS, dense: C by TMA stores through this many 64-row
						 * buffers a warpgroup (.tsN: GemmSpec.tma_store; A/B) */
	int tail, tail_w;			/* static stream-K: the last `tail` of the .pN CTAs take runs
						 * 1/tail_w of the others' (.tXwW: GemmSpec.tail; A/B) */
};
typedef struct CgTuningEntry CgTuningEntry;
struct CgTuningEntry {
	const char *arch, *key;
	CgVariant v;
	double us;		/* the measured median, or -1 */
	int line;
};
typedef struct CgTuning CgTuning;
/* The table, or NULL with a diagnostic naming the file and line (bad input: exit 2). */
CgTuning *cg_tuning_read(const char *path, Diag *d);
const CgTuningEntry *cg_tuning_find(const CgTuning *t, const char *arch, const char *key);
int cg_tuning_count(const CgTuning *t);
int cg_tuning_version(const CgTuning *t);	/* 1 or 2 (the header's) */
const char *cg_tuning_path(const CgTuning *t);
void cg_tuning_free(CgTuning *t);
/* "128x256x64.w2x4.s4.k1": tile, warps, stages, split-K slices (one spelling). */
int cg_variant_print(const CgVariant *v, char *buf, size_t n);
int cg_variant_parse(const char *s, CgVariant *v);	/* 0, or -1 */

typedef struct CgProgram CgProgram;
CgProgram *cg_compile(Module *m, const CgCompileOpts *o, Diag *d);
const char *cg_program_ptx(CgProgram *p, int arch, size_t *len);
char *cg_program_llvm(CgProgram *p, int arch);	/* malloc'd */
/* Write the bundle (manifest, report, PTX per arch, cubins, weights). */
int cg_program_bundle(CgProgram *p, const char *report, const char *path, Diag *d);
void cg_program_free(CgProgram *p);
double cg_program_ptxas_secs(const CgProgram *p);	/* of cg_compile's time, ptxas's */
const Manifest *cg_program_manifest(const CgProgram *p);
/* The fusion report's codegen section: what the launch plan fused beyond
 * the passes' kernels (decode fronts) and what not, and why; "" if nothing. */
const char *cg_program_fusion(CgProgram *p);
void cg_program_release_llvm(CgProgram *p);	/* cg_module_release_llvm of each */
/*
 * whole.c: n programs compiled with the same options (moec compile
 * --layers) into one bundle of format 2 (docs/bundle.md §5), program i
 * named name[i]: kernels the same in text are kept once, the others renamed
 * apart.  *nkernels gets the number of distinct kernels.
 */
int cg_programs_bundle(CgProgram **p, const char *const *name, int n, const char *report,
		       const char *path, int *nkernels, Diag *d);

/* emulate.c: the launch plan on the CPU emulator (arch "emu") */
/* in: the manifest's inputs at T (row-major, any leading dims); out: allocated
 * by the caller to the manifest's outputs at T.  0, or -1 with a diagnostic. */
int cg_program_emulate(CgProgram *p, const Tensor *in, Tensor *out, int64_t T, Diag *d);
/* The n ranks of an expert-parallel compile (--ep=n) run together, in[i]
 * and out[i] rank i's, each rank's plan up to its next all_to_all, then
 * the exchange between their memories (emulated NCCL), and so on. */
int cg_programs_emulate(CgProgram *const *p, int n, const Tensor *const *in, Tensor *const *out,
			int64_t T, Diag *d);

#endif
