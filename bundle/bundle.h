/*
 * bundle.h — the .moeb bundle of docs/bundle.md: a writer that lays sections
 * out deterministically, a reader that checks every rule of §1, and the
 * manifest (§2) as data, with a printer and a parser that round-trip:
 * print(parse(text)) == text for every manifest the printer writes.
 *
 * libc and util only, so the runtime links it.  Bad input never aborts: it
 * is reported to a Diag and comes back as BUNDLE_EFORMAT or BUNDLE_EVERSION.
 */
#ifndef MOEC_BUNDLE_H
#define MOEC_BUNDLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

#define BUNDLE_VERSION 1
/* File format 2 is 1 plus the "programs" section: several programs (one
 * per decoder layer) in one bundle sharing their code sections (docs/
 * bundle.md §5).  moec writes 2 only for such bundles; a reader takes both. */
#define BUNDLE_VERSION_PROGRAMS 2
#define BUNDLE_MAXPROG 4096	/* programs in one bundle */
/* Manifest grammar 2 is 1 plus quoted input/output names (docs/bundle.md
 * §2); moec writes 2 only when a name needs quoting. */
#define BUNDLE_MANIFEST_QUOTED 2
#define BUNDLE_MAXNAME 255	/* bytes in a manifest name */
#define BUNDLE_ALIGN 256
/* n rounded up to a multiple of BUNDLE_ALIGN */
#define BUNDLE_ALIGN_UP(n) (((uint64_t)(n) + BUNDLE_ALIGN - 1) & ~(uint64_t)(BUNDLE_ALIGN - 1))
#define BUNDLE_MAXSEC 64
#define BUNDLE_NAMELEN 32	/* bytes in a table entry, NUL included */
#define BUNDLE_HDRSIZE 64
#define BUNDLE_ENTSIZE 64
#define BUNDLE_MAXARGS 256	/* kernel parameters per kernel */

/* Results of the reader and the manifest parser (0 is success). */
enum { BUNDLE_OK = 0, BUNDLE_EFORMAT = -1, BUNDLE_EVERSION = -2 };

/* expr.c */

/*
 * A size expression of §2: a*T + b, ceiling-divided by div when div > 0.
 * Printed canonically: "b", "T", "a*T", "T+b", "a*T+b", "cdiv(E,div)".
 * Dims are the restricted form n, T or a*T (b == 0 or a == 0, div == 0).
 */
typedef struct MExpr MExpr;
struct MExpr {
	int64_t a, b;		/* >= 0 */
	int64_t div;		/* > 0: cdiv(a*T+b, div); 0: no division */
};
#define MEXPR_INT(n) ((MExpr){0, (n), 0})
#define MEXPR_T(a) ((MExpr){(a), 0, 0})

/* 0 ok; -1 when the value overflows int64. */
int bundle_expr_eval(const MExpr *e, int64_t T, int64_t *out);
/* Canonical text into buf; returns its length like snprintf. */
int bundle_expr_print(char *buf, size_t n, const MExpr *e);
/* Parse s[0..n); NULL on success, else why it is malformed (static text). */
const char *bundle_expr_parse(const char *s, size_t n, MExpr *e);
int bundle_expr_has_t(const MExpr *e);
/* A canonical decimal (no sign, no leading zero) up to max; NULL or why. */
const char *bundle_parse_uint(const char *s, size_t n, uint64_t max,
			      uint64_t *v);

/* manifest.c: the manifest as data */

/* Kernel parameter types.  ORDER MTYPE: mtype_names in manifest.c. */
typedef enum { MT_PTR, MT_I32, MT_I64, MT_U64, MT_F32, MT_TMAP, NMTYPE } MType;
const char *bundle_mtype_name(MType t);
size_t bundle_mtype_size(MType t);	/* bytes in the kernel param buffer */

typedef struct MTensor MTensor;
struct MTensor {		/* an input or output */
	const char *name;
	DType dt;
	int rank;		/* 1..MAXRANK */
	MExpr dim[MAXRANK];	/* n, T or a*T */
};

typedef struct MWeight MWeight;
struct MWeight {
	const char *name;
	DType dt;
	int rank;		/* 1..MAXRANK */
	int64_t dim[MAXRANK];
	uint64_t bytes;
	int synth;		/* 1: filled by init steps */
	uint64_t at;		/* offset, a multiple of 256: in the weights section, or
				 * (synth) in the generated region; MW_NEXT: after the
				 * generated weights placed so far */
};
#define MW_NEXT UINT64_MAX

typedef struct MBuffer MBuffer;
struct MBuffer {		/* a region of the device arena */
	const char *name;
	uint64_t offset;
	MExpr bytes;
};

/* A routing decision the plan makes (the optional "route" line, docs/bundle.md
 * §2): the router's logits and the experts it picked are arena buffers, and
 * what the choice ranks (the logits, or their sigmoids or softmax plus a
 * selection bias weight), so a test can tell a near tie from a wrong kernel. */
typedef struct MRoute MRoute;
struct MRoute {
	const char *logits, *ids;	/* buffers: DTYPE [T,experts], i32 [T,k] */
	int logits_buf, ids_buf;	/* their indices; the parser fills them */
	DType dt;			/* the logits': f32, bf16 or f16 */
	int experts, k;
	int groups, topk_group;		/* experts in groups, the best topk_group kept */
	int top2;			/* a group scores as its best two, else its best */
	RouteSelect select;		/* the scores ranked: logits, sigmoids or softmax */
	const char *bias;		/* the selection bias weight [E] added to them; NULL: none */
	int bias_w;			/* its index; the parser fills it */
};

typedef struct MKernel MKernel;
struct MKernel {
	const char *name;	/* PTX entry name */
	const char **target;	/* "sm_90a", "sm_80": code sections holding it */
	int ntarget;
	MType *param;
	int nparam;
	int regs, smem, spills;	/* from ptxas, 0 when unknown */
	int cluster;		/* CTAs per cluster along x its launches ask for (cuLaunchKernelEx);
				 * 0: none (the line's optional cluster=N, N in 2..8) */
	int pdl;		/* 1: its code for sm_90 and newer opens with griddepcontrol.wait: it may be
				 * launched with programmatic stream serialization (the optional pdl=1) */
};

typedef enum {
	ARG_IN, ARG_OUT, ARG_W, ARG_BUF, ARG_T,	/* pointers, then T (i32) */
	ARG_I32, ARG_I64, ARG_U64, ARG_F32,	/* literals */
	ARG_TMAP,				/* a tensormap line's map, by value */
} MArgKind;

typedef struct MArg MArg;
struct MArg {
	MArgKind kind;
	const char *name;	/* ARG_W, ARG_BUF, ARG_TMAP: printed; the parser fills index */
	int index;		/* ARG_IN/OUT: tensor; ARG_W/BUF/TMAP: weight/buffer/map */
	uint64_t off;		/* ARG_BUF: buf:NAME+OFF */
	union {
		int64_t i;	/* ARG_I32, ARG_I64 */
		uint64_t u;	/* ARG_U64 */
		float f;	/* ARG_F32, printed with %.9g */
	} v;
};

/*
 * A TMA tensor map (the optional "tensormap" line, docs/bundle.md §2): the
 * array behind a pointer argument as the TMA reads it, encoded by the
 * runtime with cuTensorMapEncodeTiled at each launch (the pointers of the
 * run, and T for the dims), passed by value to a `tmap` parameter.
 */
#define MTMAP_MAXRANK 3
typedef struct MTmap MTmap;
struct MTmap {
	const char *name;
	MArg of;		/* ARG_IN, ARG_OUT, ARG_W or ARG_BUF */
	DType dt;		/* bf16, f16, f32 or f8e4m3 */
	int rank;		/* 2..MTMAP_MAXRANK */
	MExpr dim[MTMAP_MAXRANK];	/* elements, innermost first */
	int64_t stride[MTMAP_MAXRANK - 1];	/* bytes, dims 1.. */
	int box[MTMAP_MAXRANK];
	int swizzle;		/* bytes: 0, 32, 64 or 128 */
};

/* STEP_ALL_TO_ALL: expert parallelism's exchange between the ranks (the
 * "all_to_all" line, docs/bundle.md §2): chunk d of src goes to rank d,
 * chunk s of dst comes from rank s; `bytes` is one chunk. */
typedef enum { STEP_INIT, STEP_LAUNCH, STEP_MEMSET, STEP_ALL_TO_ALL } MStepKind;

typedef struct MStep MStep;
struct MStep {
	MStepKind kind;
	const char *kernel;	/* INIT, LAUNCH; the parser fills kidx */
	int kidx;
	MExpr grid[3];
	int block[3];
	int smem;		/* dynamic shared memory bytes */
	MArg *arg;		/* one per kernel parameter */
	int narg;
	MArg dst;		/* MEMSET, ALL_TO_ALL: an ARG_BUF */
	MExpr bytes;		/* MEMSET; ALL_TO_ALL: bytes per peer */
	int shared_only;	/* MEMSET (when=shared): the plan leaves these bytes 0, so a run on
				 * the program's own arena (zeroed at load) skips it; a workspace
				 * given by the caller gets it */
	MArg src;		/* ALL_TO_ALL: an ARG_BUF */
	int64_t tlo, thi;	/* LAUNCH: runs only for tlo <= T <= thi; 0, 0: always */
	const char *arch;	/* LAUNCH: runs only on this code target ("sm_90a"); NULL: any */
	int line;		/* in the manifest text; 0 if built in code */
};
/* Does step s run for T tokens?  (A launch may be one of several variants
 * of a kernel, each for a range of T.) */
int bundle_step_runs(const MStep *s, int64_t T);

/*
 * A candidate kernel for one GEMM of the plan (the optional "candidate"
 * line, docs/bundle.md §2; moec compile --tune-candidates): a launch that is
 * never part of the plan, which `moert tune` times in place of launch step
 * `of` and checks against it.
 */
typedef struct MCand MCand;
struct MCand {
	MStep s;		/* the launch; tlo, thi: the T range of the key (tokens=) */
	int of;			/* the plan's launch step (an index into step[]) */
	int out;		/* the argument the GEMM writes (ARG_BUF or ARG_OUT) */
	DType dt;		/* its element type */
	const char *key;	/* the tuning table's key and variant (docs/codegen.md) */
	const char *variant;
};

/* An input or output name as the manifest spells it: plain, or quoted with
 * \xHH escapes (docs/bundle.md §2).  1 if it needs quoting; buf gets the
 * spelling (4 * 255 + 3 bytes suffice for any name the parser accepts). */
int bundle_name_quoted(char *buf, size_t n, const char *name);
/* 1 if s[0..n) is a plain name (letters, digits, _ . $ -; not starting with
 * a digit, '.' or '-'; 1..255 bytes). */
int bundle_name_plain(const char *s, size_t n);

/*
 * The parsed manifest.  Strings and arrays live in the arena given to the
 * parser.  The compiler may fill one itself (arrays from its own arena) and
 * print it; bundle_manifest_check then validates it by parsing the print.
 * Steps: every init step comes before every launch or memset step.
 */
typedef struct Manifest Manifest;
struct Manifest {
	int version;		/* "moeb 1" */
	const char *moec;	/* "0.1.0" */
	const char *source;	/* "fnv1a64:..."; NULL: line absent */
	const char *model;	/* NULL: line absent */
	int synthetic;		/* 1: weights generated from seed */
	uint64_t seed;
	int64_t max_tokens;	/* 1..INT32_MAX */
	uint64_t arena;		/* device arena bytes at max_tokens */
	int has_cost;
	MExpr flops, bytes;	/* cost per run, if has_cost */
	DType precision;	/* the results' rounding: f32 GEMM operands as tf32, bf16 or f16, or a graph
				 * that computes in f16/bf16 and widens its results (f32: exact) */
	MTensor *in, *out;
	int nin, nout;
	MWeight *w;
	int nw;
	MBuffer *buf;
	int nbuf;
	MKernel *k;
	int nk;
	MTmap *tmap;		/* optional "tensormap" lines */
	int ntmap;
	MStep *step;
	int nstep;
	MRoute *route;		/* optional "route" lines */
	int nroute;
	int ep_ranks, ep_rank;	/* the optional "ep" line (expert parallelism); 0: none */
	const char *ep_experts;	/* its experts: "0-3,7" (ids and ranges, ascending) */
	MCand *cand;		/* optional "candidate" lines */
	int ncand;
};

/*
 * Parse manifest text (not NUL-terminated; len bytes).  `file` names it in
 * diagnostics ("x.moeb[manifest]:12:5: error: ...").  Every malformed line
 * gets its own diagnostic.  Returns BUNDLE_OK with *out set, BUNDLE_EFORMAT,
 * or BUNDLE_EVERSION for "moeb N" with N != 1.
 */
int bundle_manifest_parse(Arena *a, const char *file, const char *text,
			  size_t len, Manifest **out, Diag *d);
/* Validate a manifest built in code: print it and parse the print. */
int bundle_manifest_check(const Manifest *m, Diag *d);
/* Offsets of the generated (synth) weights in their region, which follows
 * the packed weights on the device: woff[i] for each synth weight i; returns
 * the region's size, or UINT64_MAX when it overflows.  Generated weights
 * whose lifetimes do not overlap may share bytes (the compiler planned it). */
uint64_t bundle_generated_layout(const Manifest *m, uint64_t *woff);
int bundle_find_weight(const Manifest *m, const char *name);	/* -1 if none */
int bundle_find_buffer(const Manifest *m, const char *name);
int bundle_find_kernel(const Manifest *m, const char *name);

/* mprint.c */

void bundle_manifest_fprint(FILE *f, const Manifest *m);
/* The manifest as text, malloc'd and NUL-terminated; *len its length. */
char *bundle_manifest_print(const Manifest *m, size_t *len);

/* Little-endian fields of the header and the section table. */
static inline void
bundle_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> 8 * i);
}

static inline void
bundle_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> 8 * i);
}

static inline uint32_t
bundle_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t
bundle_get64(const unsigned char *p)
{
	return (uint64_t)bundle_get32(p) | (uint64_t)bundle_get32(p + 4) << 32;
}

/* write.c */

typedef struct BundleWriter BundleWriter;
struct BundleWriter {
	char moec[16];		/* NUL-padded, as in the header */
	uint32_t version;	/* the header's: BUNDLE_VERSION unless set */
	int nsec;
	struct {
		char name[BUNDLE_NAMELEN];
		const void *data;	/* borrowed: must outlive the write */
		size_t size;
	} sec[BUNDLE_MAXSEC];
};

void bundle_writer_init(BundleWriter *w, const char *moec_version);
/* Sections are laid out in the order added; data is not copied. */
int bundle_add(BundleWriter *w, const char *name, const void *data,
	       size_t size, Diag *d);
/* The whole bundle in a malloc'd buffer. */
int bundle_write(const BundleWriter *w, unsigned char **out, size_t *len,
		 Diag *d);
/* Streamed to a file, so gigabytes of weights are not copied. */
int bundle_write_file(const BundleWriter *w, const char *path, Diag *d);
uint64_t bundle_size(const BundleWriter *w);

/* read.c */

typedef struct BundleSection BundleSection;
struct BundleSection {
	char name[BUNDLE_NAMELEN];
	uint64_t off, size;
	uint32_t crc;
	const unsigned char *data;	/* into the bytes given to the reader */
};

/* One program of a bundle (§5): its manifest is bytes [moff, moff+mlen) of
 * the "manifest" section, its weights bytes [woff, woff+wlen) of "weights"
 * (its at= offsets count from woff).  A format-1 bundle has one program,
 * "main", spanning both sections. */
typedef struct BundleProgram BundleProgram;
struct BundleProgram {
	const char *name;
	Manifest *manifest;
	uint64_t moff, mlen, woff, wlen;
};

typedef struct Bundle Bundle;
struct Bundle {
	uint32_t version;	/* 1, or BUNDLE_VERSION_PROGRAMS */
	char moec[17];
	uint64_t size;
	int nsec;
	BundleSection sec[BUNDLE_MAXSEC];
	Manifest *manifest;	/* bundle_read only: program 0's */
	BundleProgram *prog;	/* bundle_read only: nprog >= 1 */
	int nprog;
};

/* §1 structure: header, table, every section's CRC.  `file` for messages. */
int bundle_check(const char *file, const void *buf, size_t len, Bundle *b,
		 Diag *d);
/* bundle_check, then parse the manifest into `a` and cross-check it with
 * the sections (code targets present, weights inside "weights"). */
int bundle_read(Arena *a, const char *file, const void *buf, size_t len,
		Bundle *b, Diag *d);
const BundleSection *bundle_find(const Bundle *b, const char *name);
/* Program i seen as a bundle of its own: the same sections, but "manifest"
 * and "weights" narrowed to its bytes, manifest and prog its own (nprog 1). */
void bundle_program_view(const Bundle *b, int i, Bundle *view);
int bundle_find_program(const Bundle *b, const char *name);	/* -1 if none */
/* The "programs" section of a format-2 bundle into b->prog (bundle_read). */
int bundle_programs_parse(Arena *a, const char *file, Bundle *b, Diag *d);
/* The "programs" section's text for n programs (malloc'd, *len). */
char *bundle_programs_print(const BundleProgram *p, int n, size_t *len);
/* 1 if a valid section name: manifest, report, weights, programs,
 * ptx:sm_XX[a], cubin:sm_XX[a]. */
int bundle_name_valid(const char *name);
/* 1 if "sm_XX" or "sm_XXa"; *sm gets XX, *arch_specific the 'a'. */
int bundle_parse_sm(const char *s, int *sm, int *arch_specific);
/*
 * Read a bundle file, checking the header's magic, version and size field
 * against the file's size before allocating.  malloc'd; NULL with a
 * diagnostic.  *status gets BUNDLE_EFORMAT, BUNDLE_EVERSION, or 1 when the
 * file could not be read at all.
 */
unsigned char *bundle_read_file(const char *path, size_t *len, int *status,
				Diag *d);

#endif
