/*
 * passes.h — the pass manager and every pass.
 *
 * A pass takes the module and a context; it returns < 0 on error (with a
 * diagnostic), 0 if it changed nothing, 1 if it changed the module.  Fusion
 * passes never fail on a pattern that does not match: they leave it alone
 * and say why in the fusion report.
 */
#ifndef MOEC_PASSES_H
#define MOEC_PASSES_H

#include "ir.h"

/* report.c: the fusion report, one entry per decision */
typedef struct Report Report;
Report *report_new(void);
void report_free(Report *r);
/* What a kernel fused ("kernel @moe.k2 grouped_gemm: gate|up matmul, swiglu"). */
void report_fused(Report *r, const char *kernel, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A candidate left alone, and why ("bias add not fused into matmul %h: ..."). */
void report_skip(Report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A rewrite that is not a kernel itself ("moe %y recognised at TopK ..."). */
void report_note(Report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void report_print(FILE *f, const Report *r);
int report_count(const Report *r);
/* What a "not fused" line costs, in words for its last clause.  The bytes of
 * a tensor of type t ("12 KB", or "512 B a token" when its leading dims are
 * symbolic); the unfused path's extra kernels and the round trip of v
 * through memory (written once, read by `readers` kernels). */
const char *report_size(char *buf, size_t n, const Type *t);
const char *report_trip(char *buf, size_t n, const Value *v, int launches, int readers);

/* Expert parallelism (partition_ep.c): lower-moe splits each moe's experts
 * over `ranks` and writes rank `rank`'s part. */
typedef struct {
	int ranks, rank;
	const char *placement;	/* a placement file; NULL: contiguous slices */
	int slots;		/* combine every slot home (exact); 0: one partial sum per
				 * token and rank (docs/passes.md, "Traffic") */
} EpOpts;

/* The shortest blocks along K that fuse-dequant moves into a GEMM (and that
 * lower-moe keeps quantised through its gate|up interleave): shorter ones
 * (act-order g_idx gives a scale per element) are as large as the weight. */
#define PASS_DEQUANT_MIN_BLOCK 16

typedef struct {
	Diag *d;
	Report *report;		/* may be NULL: decisions are not recorded */
	const EpOpts *ep;	/* NULL: no expert parallelism */
	DbgFlags debug;		/* DBG_* (util.h): set by pass_run from PassOpts.debug */
	int fp8_mma;		/* PassOpts.fp8_mma, set by pass_run */
	int64_t max_tokens;	/* PassOpts.max_tokens, set by pass_run */
} PassCtx;

#define PASS(fn, name, help) int fn(Module *m, PassCtx *c);
#include "passes.def"
#undef PASS

typedef struct {
	const char *pipeline;	/* "fold,cse,dce"; NULL: the default; "": none */
	const char *print_before;	/* comma list of pass names, or "all" */
	const char *print_after;
	int print_after_change;	/* dump only after passes that changed the IR */
	int verify_each;	/* ir_verify after every pass */
	int time_passes;	/* a table of pass times on stderr */
	int check_eval;		/* interpreter before/after every pass */
	const char *check_dims;	/* "T=7,batch=2": symbol values for check_eval */
	uint64_t check_seed;
	const Tensor *check_inputs;	/* given inputs instead of random ones */
	int ncheck_inputs;
	int print_flags;	/* IR_PRINT_LOC */
	FILE *dump;		/* where dumps go; NULL: stderr */
	DbgFlags debug;		/* DBG_* flags (util.h): DBG_FOLD */
	int fp8_mma;		/* every target runs FP8 x FP8 GEMMs (sm_90a): fuse-dequant also
				 * moves an fp8 activation's dequantize into the GEMM */
	int64_t max_tokens;	/* compile --max-tokens (0: unknown): split-f32 leaves a decode-only
				 * bundle's router to the decode front */
} PassOpts;

/* A pass of a test program's own (a deliberately wrong rewrite, to show
 * --check-eval names it: tests/unit/check_passes.c), runnable by name from
 * then on; the shipped table (passes.def) holds none.  0, or -1 when full. */
int pass_register_test(const char *name, const char *help, int (*fn)(Module *, PassCtx *));

void pass_default_opts(PassOpts *o);
const char *pass_default_pipeline(void);
void pass_list(FILE *f);
/* Run the pipeline.  0 ok; 1 a check failed (verifier or check-eval, named);
 * -1 bad usage or input (unknown pass), with diagnostics. */
int pass_run(Module *m, const PassOpts *o, PassCtx *c);

/* checkeval.c: run the main graph on seeded random inputs */
typedef struct CheckRun CheckRun;
CheckRun *check_new(Module *m, const PassOpts *o, Diag *d);
/* Evaluate the main graph and remember (first call) or compare (later
 * calls) its outputs.  0 same within tolerance, 1 differs (with a message
 * in *why), -1 could not evaluate. */
int check_eval(CheckRun *r, Module *m, char *why, size_t n, Diag *d);
void check_free(CheckRun *r);

/* outline.c: analyses every fusion pass shares */
/* Marks by value id (malloc'd): the values a routing decision is computed
 * from (route's and moe's logits, a top-k's values, and all they read). */
unsigned char *pass_feeds_routing(const Graph *g);
/* Erase `dead` and let y's node produce `old` in y's place: the rewrite's
 * last node takes over the old value, with its name and its users. */
void pass_take_over(Graph *g, Node *dead, Value *old, Value *y);

/* outline.c: move nodes (in program order) into a new kernel and call it.
 * The results keep their values; NULL if the region is not convex.  Needs
 * g's uses (ir_fill_uses) current, and keeps them so. */
Node *pass_outline(Graph *g, Node **set, int n, IrTemplate tmpl);

/* lower_sort.c: 0, 1, .. n-1 along `axis` of an i64 tensor of the given
 * dims (static or symbolic: a constant_of_shape of ones and its exclusive
 * cumsum, which fold folds when static). */
Value *pass_iota(Builder *b, const Dim *dims, int rank, int axis);

/* lower_moe.c: the pieces of a lowered moe, shared with partition_ep.c.
 * The experts over token rows x[T',H] routed by w[T',k] (f32) and ids[T',k]
 * (negative: the slot is dropped), weight stacks of `experts` experts. */
typedef struct {
	Value *x, *w, *ids, *wgu, *wdn, *bgu, *bdn;
	int64_t experts;
	int slots_x;		/* the slots rounded to x's type (when not f32): lower_moe_slots_x */
	int slots_out;		/* the slots each expert's unweighted output rounded to x's type,
				 * the weight applied in f32 by the sum (lower_moe_sum's w) */
} MoeSlots;
/* --debug=slots-x, or slots-ref on a moe marked slots=x (SLOTS_REF_DEFAULT) */
int lower_moe_slots_x(const Node *moe, DbgFlags debug);
Node *lower_moe_route(Builder *b, const Node *moe);	/* route: weights, ids */
/* Each slot's weighted expert output, [T'*k, H] f32 (slots_x: x's type) in slot order (named:
 * offs, rows, src, xs, act, down, slots, if not NULL). */
Value *lower_moe_slots(Builder *b, const Node *moe, const MoeSlots *s, Value **named);
/* v cast to f32 (as it is when f32 already, or NULL). */
Value *lower_moe_f32(Builder *b, Value *v);
/* slots [T*k,H] (times w [T,k] f32 when not NULL) summed in f32 over k in choice order, cast to dt. */
Value *lower_moe_sum(Builder *b, Value *ys, Dim T, int64_t k, DType dt, Value *w);
/* --debug=fp8 on a moe of bf16/f16 x with f32 slots: MoeSlots.slots_out */
int lower_moe_slots_out(const Node *moe, int slots_x, DbgFlags debug);
/* v[i] named "<moe's result>.suffix[i]" (NULL entries skipped). */
void lower_moe_names(Graph *g, const Node *moe, Value *const *v, const char *const *suffix, int n);

/* partition_ep.c: rank c->ep->rank's part of an expert-parallel moe (the
 * moe's replacement value), NULL on error. */
Value *partition_ep(Graph *g, Node *moe, PassCtx *c);
/* The experts of each rank: owner[E] and local[E] filled; 0 ok, -1 with a
 * diagnostic naming the file and line (placement) or the sizes. */
int ep_placement(const EpOpts *o, int64_t experts, int64_t *owner, int64_t *local, Diag *d);

/* evalnode.c: evaluate one node on host tensors (constant folding) */
int pass_eval_node(Module *m, Node *n, const Tensor *in, Tensor *out, Diag *d);

#endif
