/*
 * gemm_harness.h — what the GEMM unit tests share (check_codegen.c,
 * check_wgmma.c, check_gemm_simt.c, check_gemm_quant.c): seeded random
 * data, the specs several of them build, one GEMM case run on the CPU
 * emulator (random inputs, outputs poisoned with NaN first) against a
 * reference in double (the accumulator, then the epilogue program), and the
 * emit + ptxas checks of a list of specs.  Functions that assert say so;
 * the others report failures as -1 with a message.
 */
#ifndef GEMM_HARNESS_H
#define GEMM_HARNESS_H

#include <check.h>

#include "codegen.h"

extern const char *const gh_targets[3];	/* sm_80, sm_90, sm_90a */

/* ---- random data: one generator, reseeded by each case ---- */

void gh_seed(uint64_t seed);
double gh_urand(void);			/* uniform in [-1, 1) */
void *gh_rand(DType dt, size_t n, double scale);	/* uniform; calloc'd, n may be 0 */

/* ---- specs ---- */

void gh_tiles(GemmSpec *s, int bm, int bn, int bk, int wm, int wn, int st);
/* epilogue gelu_erf(acc + bias[n]) */
void gh_bias_gelu(GemmSpec *s, DType bias_dt);
/* bf16 [T,K] x [N,K]^T with bias + gelu */
void gh_spec_dense_bias_gelu(GemmSpec *s, int64_t N, int64_t K);
/* grouped over E experts, rows gathered (topk per token), interleaved SwiGLU */
void gh_spec_grouped_swiglu(GemmSpec *s, int E, int64_t N, int64_t K, int topk);
/* grouped, scattered store, times a routing weight per scattered row */
void gh_spec_grouped_scale_scatter(GemmSpec *s, int E, int64_t N, int64_t K);
/* Split-K into S slices for launches of up to T tokens (split_slots as program.c sets it). */
void gh_split(GemmSpec *s, int S, int T);
/* gpt-oss: grouped, a per-expert bias, clamped SwiGLU (limit 7, alpha 1.702) */
void gh_spec_expert_bias_swiglu(GemmSpec *s, int E, int64_t N, int64_t K);
/* dt everywhere, B [K,N], plus a residual [M,N] of dt */
void gh_spec_kn_residual(GemmSpec *s, int64_t N, int64_t K, DType dt);
/* DeepSeek-V3's shared down projection: acc + an f32 [M,N] + a bf16
 * residual [M,N]; with swiglu, the sum silu-gated (interleaved) before the
 * residual [M,N/2] */
void gh_spec_two_mats(GemmSpec *s, int64_t N, int64_t K, int swiglu);

/* ---- one case on the emulator ---- */

typedef enum { GH_MMA, GH_SIMT } GhBuilder;	/* cg_emit_gemm, cg_emit_gemm_simt */
typedef enum {
	GH_UNIFORM,	/* uniform in [-1, 1) */
	GH_NONZERO,	/* gh_nzrand: no zero products */
	GH_EXACT,	/* A = 1 + j/4096, B small integers: the f32 sums are exact */
} GhFill;

typedef struct GemmCase GemmCase;
struct GemmCase {
	const char *what;	/* what failure messages start with, or NULL */
	GemmSpec s;
	int T;
	int counts[64];		/* grouped: rows per expert (sum = M) */
	GhBuilder builder;
	GhFill fill;
	double b_scale;		/* B values times b_scale / sqrt(K) (0: 1) */
	uint64_t seed;		/* 0: 12345 */
	double scale_v, zero_v;	/* static quantisation: the values behind its roles */
	DType bq_zero_dt;	/* quantised B with zero points: their IR type (0: b_dt) */
	int bq_exact;		/* quantised B: the reference's weights (q - z) s unrounded (group sums) */
	int in_place;		/* the last MAT leaf (C's type and shape) is C itself: C starts
				 * as its values and the kernel reads it there */
};

/* Row r of the output: its expert, its A row, its C row, its raw gather index. */
typedef struct GhRow GhRow;
struct GhRow {
	int r, e, srow, drow, graw;
};

typedef struct GemmRun GemmRun;
struct GemmRun {
	GemmSpec s;		/* resolved (cg_gemm_resolve) */
	int T, E, M, msrc, sw;	/* sw: the SWIGLU instruction, or -1 */
	int tf32;		/* the mma reads tf32: the reference rounds A and B (cvt.rna) */
	int64_t width;		/* output columns: N, or N/2 after SWIGLU */
	int *gidx, *sidx, *offs;	/* NULL when the spec has none */
	void *A, *B, *C, *leaf[CG_EP_MAX];
	float *C_scale;		/* grouped quantisation with want_scales, else NULL */
	void *qscale, *qzero;	/* static quantisation parameters, or NULL */
	void *Bs, *Bz;		/* quantised B: scales and zero points, packed (cg_bq_pack); FP8: B's f32 scales */
	float *As;		/* FP8 x FP8: A's f32 scales [msrc][K/group] */
	double *Bdq;		/* quantised B dequantised (rounded to A's type): the reference's B */
	void *ws;		/* split-K's workspace (flags zeroed, partials NaN), or NULL */
	size_t wsbytes;
	size_t cbytes;
	int in_place;		/* GemmCase.in_place: the leaf's argument is C */
	char msg[600];		/* why gh_run or gh_compare failed */
};

/* Emit c, fill its inputs (from its seed) and run it; 0, or -1 with r->msg.
 * Call gh_free either way. */
int gh_run(GemmRun *r, const GemmCase *c);
void gh_free(GemmRun *r);
GhRow gh_row(const GemmRun *r, int row);
/* The reference of one row in double: out[co] for co < r->width. */
void gh_ref_row(const GemmRun *r, const GhRow *w, double *out);

typedef struct GemmErr GemmErr;
struct GemmErr {
	double err;		/* relative L2 against the reference */
	int64_t mismatches;	/* elements not bit-equal to the reference rounded to c_dt */
	int64_t elems;
};
/* C against the reference; -1 with r->msg where an element was not written
 * or the padding past the width was. */
int gh_compare(GemmRun *r, GemmErr *e);
/* Asserts: the case runs, its relative L2 error is below tol, and with
 * GH_EXACT every element equals the exact result. */
void gh_check(const GemmCase *c, double tol);
/* Runs a and b; 1 when their outputs are the same bits. */
int gh_same_bits(const GemmCase *a, const GemmCase *b);

/* ---- PTX and ptxas ---- */

int gh_count(const char *s, const char *what);
/* A module of target sm holding s[0..n) as <prefix>0, <prefix>1, ...; asserts each emits. */
CgModule *gh_emit_specs(const char *sm, GhBuilder b, const GemmSpec *s, int n, const char *prefix);
/* The module's PTX; asserts there is one. */
const char *gh_ptx(CgModule *m);

enum {
	GH_CUBIN = 1,		/* want a cubin, and assert it is there */
	GH_NO_SPILLS = 2,	/* no kernel spills */
	GH_NO_SERIAL = 4,	/* ptxas did not serialise wgmma */
};
/* ptxas over the n kernels of m, asserting registers in 1..255 and the
 * flags; 0 after saying on stderr that who skipped it (no ptxas), else 1. */
int gh_assemble(CgModule *m, int n, const char *who, int flags);

/* swiglu's reference in double (the other epilogue operations: ir_ew_scalar) */
double gh_swiglu(const CgEpInst *in, double gate, double up);
/* gpt-oss's act=oai (alpha 1.702, limit 7), interleaved */
extern const IrGluAttrs gh_oai;

/*
 * Whole programs: the IR text through the default pipeline, cg_compile for
 * "emu" and the plan on the emulator at T tokens, against ir_eval of the
 * unfused graph (quantised outputs within a step of their grid, f32 within
 * 1e-5, bf16 within 1e-2).  note: a substring the note of kernel `kernel`
 * must hold (the builder that took it).  Asserts.
 */
void gh_check_program(const char *text, int T, const char *kernel, const char *note);
/* The same, each output within a relative L2 error l2 of the interpreter's
 * (blocks whose bf16 intermediates the kernels keep in f32). */
void gh_check_program_l2(const char *text, int T, const char *kernel, const char *note, double l2);
/* The same with debug flags for the passes and the compile (DBG_EMU_WGMMA:
 * the emulator stands for sm_90a, FP8 x FP8 included). */
void gh_check_program_debug(const char *text, int T, const char *kernel, const char *note, double l2,
			    DbgFlags debug);
/* The same, the plan for up to max_tokens (256 above: the prefill plan's tiles need more). */
void gh_check_program_max(const char *text, int T, int max_tokens, const char *kernel, const char *note,
			  double l2, DbgFlags debug);
/* ... with a tuning table (a file; NULL: none), as moec compile --tuning. */
void gh_check_program_tuned(const char *text, int T, int max_tokens, const char *kernel, const char *note,
			    double l2, DbgFlags debug, const char *tuning);
/* Whether the plans compiled with debug flags a and b give the same bits on
 * the emulator at T tokens (the same inputs). */
int gh_program_same_bits(const char *text, int T, int max_tokens, DbgFlags a, DbgFlags b);
/* The PTX of the text's plan for arch (malloc'd). */
char *gh_program_ptx(const char *text, const char *arch, int max_tokens, DbgFlags debug);
char *gh_step_before(const char *text, const char *arch, int max_tokens, DbgFlags debug, const char *kernel,
		     int64_t T);

#endif
