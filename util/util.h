/*
 * util.h — the small pieces every other directory uses: arenas, diagnostics,
 * string interning and hashing, element types and their exact conversions,
 * host tensors and the two tensor file formats (.npy and ONNX TensorProto).
 *
 * Nothing here depends on anything but libc, so the runtime can link it.
 */
#ifndef MOEC_UTIL_H
#define MOEC_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MOEC_VERSION "0.1.0"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Broken invariants, never bad input: print file:line and abort. */
#define die(...) die_(__FILE__, __LINE__, __VA_ARGS__)
_Noreturn void die_(const char *file, int line, const char *fmt, ...);

/* arena.c */

/*
 * An arena hands out memory that is released all at once.  Every IR object
 * of a module lives in the module's arena; nothing in it is freed singly.
 */
typedef struct Arena Arena;
Arena *arena_new(size_t chunk);		/* chunk: 0 for the default */
void *arena_alloc(Arena *a, size_t n);	/* zeroed, 16-byte aligned */
void *arena_realloc(Arena *a, void *p, size_t old, size_t n);
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...);
size_t arena_used(const Arena *a);
/*
 * Memory exhaustion is bad input, not a crash: an arena past its limit
 * (arena_set_limit; owner names the input in the message) or malloc
 * failing calls the handler, which must not return.  moec's reports the
 * diagnostic and exits 2; without one it is an internal error (abort).
 */
void arena_set_limit(Arena *a, size_t bytes, const char *owner);
typedef void OomHandler(const char *owner, size_t bytes, size_t limit);
void mem_set_oom_handler(OomHandler *h);
/* Bytes this process may hold: physical memory, lowered by RLIMIT_AS and
 * RLIMIT_DATA.  Readers check what a file declares against it before
 * allocating. */
uint64_t mem_host_limit(void);
void arena_free(Arena *a);
#define arena_array(a, T, n) ((T *)arena_alloc((a), sizeof(T) * (size_t)(n)))

/* Growable arrays for host-side scratch (not for IR objects). */
#define VEC(T) struct { T *v; size_t n, cap; }
#define vec_push(vec, x)                                                     \
	do {                                                                 \
		if ((vec)->n == (vec)->cap) {                                \
			(vec)->cap = (vec)->cap ? 2 * (vec)->cap : 8;        \
			(vec)->v = xrealloc((vec)->v,                        \
					    (vec)->cap * sizeof(*(vec)->v)); \
		}                                                            \
		(vec)->v[(vec)->n++] = (x);                                  \
	} while (0)
#define vec_free(vec) (free((vec)->v), (vec)->v = NULL, (vec)->n = (vec)->cap = 0)

void *xmalloc(size_t n);	/* dies on out-of-memory: that is not bad input */
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/* diag.c */

/*
 * Where something came from.  Text IR uses file:line:col; an ONNX model uses
 * the node (index, name, op type) or a field path instead of a line.
 */
typedef struct Loc Loc;
struct Loc {
	const char *file;	/* "model.onnx", "moe.ir"; NULL: none */
	int line, col;		/* 1-based; 0 when unknown */
	int node;		/* ONNX node index, -1 if none */
	const char *name;	/* ONNX node name or a field path */
	const char *optype;	/* ONNX op_type */
};
#define LOC_NONE ((Loc){NULL, 0, 0, -1, NULL, NULL})
Loc loc_file(const char *file);
Loc loc_line(const char *file, int line, int col);

/*
 * A diagnostic sink.  Library code reports bad input here and returns an
 * error; only tools/ mains exit.  Messages are written as
 *	file:line:col: error: message
 *	model.onnx: node 37 'name' (MatMul): error: message
 */
typedef struct Diag Diag;
struct Diag {
	FILE *out;		/* NULL: count only, print nothing */
	int nerror, nwarn;
	char last[512];		/* text of the last error, for tests and the runtime */
	int level;		/* -1: no notes (-q); 0: notes; 1: remarks too (-v) */
};
void diag_init(Diag *d, FILE *out);
int diag_error(Diag *d, Loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));	/* returns -1 */
void diag_warn(Diag *d, Loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void diag_note(Diag *d, Loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A note only -v shows: detail the user cannot act on, progress. */
void diag_remark(Diag *d, Loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int diag_verror(Diag *d, Loc loc, const char *fmt, va_list ap);
void diag_loc_string(char *buf, size_t n, Loc loc);

/*
 * debug.c: the debug flags (moec --debug=LIST), one table.  Libraries take
 * them in their options structs and never read the environment; the driver
 * also honours each flag's former environment variable (deprecated).
 */
/* A set of debug flags: a bit per row of debug.c's table.  128 bits: the
 * 64 of a uint64_t ran out in session 40 (each A/B of the GPU sessions takes
 * one); GCC's and Clang's unsigned __int128 keeps `flags & DBG_X` as it was. */
__extension__ typedef unsigned __int128 DbgFlags;
#define DBG_NBITS 128
#define DBG_BIT(n) ((DbgFlags)1 << (n))
#define DBG_FOLD DBG_BIT(0)	/* fold: a node that fails to evaluate says why */
#define DBG_MANIFEST DBG_BIT(1)	/* codegen: print the manifest before its check */
#define DBG_CG_DUMP DBG_BIT(2)	/* codegen: print a kernel LLVM's verifier refuses */
#define DBG_EMU_WGMMA DBG_BIT(3)	/* codegen: the emulator stands for sm_90a's wgmma mainloop */
#define DBG_ROUNDTRIP DBG_BIT(4)	/* moec opt: print(parse(print(m))) == print(m), checked */
#define DBG_EMU_WS DBG_BIT(5)	/* codegen: the emulator stands for sm_90a's warp-specialised mainloop */
#define DBG_WS_GATHER DBG_BIT(6)	/* codegen: gathered-A GEMMs may take the warp-specialised mainloop on sm_90a */
#define DBG_WS_PINGPONG DBG_BIT(7)	/* codegen: warp-specialised GEMMs take ping-pong consumers where they may */
#define DBG_BQ_V1 DBG_BIT(8)	/* codegen: quantised B in session 24's e2m1 layout and dequantisation (A/B) */
#define DBG_FULL_BLOCKS DBG_BIT(9)	/* codegen: wgmma over a tile's 64-row blocks past its rows too */
#define DBG_PERSISTENT_PREFILL DBG_BIT(10)	/* codegen: prefill grouped GEMMs persistent (measured slower) */
#define DBG_NO_FRONT DBG_BIT(11)	/* codegen: no decode fronts (k_front.c): the kernels they replace */
#define DBG_SIMT_ROUTER DBG_BIT(12)	/* split-f32: no bf16 x3 split; f32 GEMMs stay on CUDA cores */
#define DBG_ROW_KERNELS DBG_BIT(15)	/* codegen: RMSNorm/rstd keep the body's row kernels (no k_norm.c) */
#define DBG_BQ_TILES DBG_BIT(19)	/* codegen: grouped quantised decode GEMMs keep session 26's tiles (no wide stream-K: A/B) */
#define DBG_BQ_DIRECT DBG_BIT(17)	/* codegen: quantised decode GEMMs on direct B with lane vectors (opt-in: no faster yet) */
#define DBG_NO_VEC_GEMM DBG_BIT(14)	/* codegen: decode GEMMs of at most 4 tokens keep 16-row tensor-core tiles (not
				 * k_gemm_vec.c's warp dot products), fronts their unsplit rows (A/B) */
#define DBG_MID_PERSISTENT DBG_BIT(13)	/* codegen: mid-T grouped GEMMs persistent, heavy first (sm_90a default; flag: emulator too) */
#define DBG_F8_COL_SCALES DBG_BIT(16)	/* codegen: FP8 GEMMs read a B scale a column, also of 128-row blocks (A/B) */
#define DBG_OLD_ROWS DBG_BIT(23)	/* codegen: the one-CTA permute and the body kernel's combine (before session 27; A/B) */
#define DBG_F8_C2 DBG_BIT(20)	/* codegen: grouped FP8 GEMMs in clusters of 2 sharing B (cluster default; flag: emulator too) */
#define DBG_WG_WIDE DBG_BIT(22)	/* codegen: dense bf16/f16 WS GEMMs on 64x256 warpgroup tiles (GemmSpec.wg_wide; A/B) */
#define DBG_STREAM_WAVES DBG_BIT(18)	/* codegen: decode stream-K over W runs per CTA slot (max_tokens > 4; A/B) */
#define DBG_GROUPED_C2 DBG_BIT(24)	/* codegen: grouped bf16 prefill GEMMs in clusters of 2 sharing B (k_gemm_ws.c; A/B) */
#define DBG_VEC_AHEAD DBG_BIT(26)	/* codegen: fronts' barrier-free top-k and sort at every T (the default at T <= 4) */
#define DBG_SK_UNROLL DBG_BIT(29)	/* codegen: static stream-K loops unrolled over the stages (GPU default; flag: emulator too) */
#define DBG_DIV_RN DBG_BIT(25)	/* codegen: tanh/erf (GELU) divide by div.rn, not its branch-free fast path (A/B) */
#define DBG_F8_CP DBG_BIT(28)	/* codegen: FP8 gate|up keeps the cp.async wgmma mainloop, not the warp-specialised one (A/B) */
#define DBG_GROUPED_LEAN DBG_BIT(21)	/* codegen: grouped prefill GEMMs skip A rows past the expert, serpentine rounds, no ranking when tiled */
#define DBG_GELU_TANH DBG_BIT(30)	/* codegen: GELU (tanh) by tanh, not x sigmoid(2u) (session 29's kernels; A/B) */
#define DBG_SLOTS_X DBG_BIT(31)	/* lower-moe: MoE slots in x's type (bf16), summed in f32 (A/B) */
#define DBG_FP8_PER_TOKEN DBG_BIT(32)	/* fp8-regroup off: per-channel FP8 GEMMs keep per-token activations, bf16 mma (A/B) */
#define DBG_PDL DBG_BIT(27)	/* codegen: sm_90 kernels open with griddepcontrol, launched programmatically (A/B) */
#define DBG_WS_TMA_STORE DBG_BIT(33)	/* codegen: dense WS GEMMs store C through shared memory by TMA (A/B) */
#define DBG_DOWN_AHEAD DBG_BIT(35)	/* codegen: decode MoE downs send their runs' first B toward L2 before the grid wait (A/B) */
#define DBG_FRONT_PAIR DBG_BIT(34)	/* codegen: decode fronts take a warp's tokens two at a time, no barrier a token (A/B) */
#define DBG_F8_L2PF DBG_BIT(36)	/* codegen: FP8 WS GEMMs prefetch B a ring ahead into L2 (A/B) */
#define DBG_KEPT_FLAGS DBG_BIT(39)	/* codegen: a decode front's flag memset only on a shared workspace (when=shared; A/B) */
#define DBG_FP8_GLU DBG_BIT(37)	/* canon: also a gate|up whose input is per token (fbgemm): FP8 x FP8, regrouped per 128 (A/B) */
/* 1: a dense gate|up of two e4m3 weights whose input the model quantises per token and 128 columns (DeepSeek-V3's
 * fp8: transformers' FP8Linear, act_quant then the block GEMM) runs FP8 x FP8 as the model computes it, not bf16
 * on weights and an input dequantised to bf16 (session 39; H200, session 37: DeepSeek-V3 FP8 layer 0.989x at T =
 * 4096, 0.988x at 256, rel_l2 3.8e-3 against the bf16 form).  --debug=fp8-glu takes a per-token input too
 * (fp8-regroup then quantises it per 128: Maverick 0.988x / 1.006x at T = 16, session 32).  Read by canon,
 * fp8-regroup and fuse-dequant. */
enum { FP8_GLU_DEFAULT = 1 };
#define FP8_GLU_ON(debug) (FP8_GLU_DEFAULT || ((debug) & DBG_FP8_GLU))
#define DBG_GROUPED_WIDE DBG_BIT(41)	/* codegen: cooperative bf16/f16 grouped WS GEMMs under 256 columns on 64-row warpgroup tiles (A/B) */
#define DBG_F8_CVT DBG_BIT(40)	/* codegen: f32 <-> e4m3 by cvt (sm_89+) in quantisations and the norm's kernel (A/B) */
/* 1: the MoE gate|up's row gather stays a kernel of its own (x's rows copied in expert order; the
 * grouped GEMM reads them contiguous, A by TMA, its epilogue's row leaves through the index alone,
 * GemmSpec.leaf_gather), not the GEMM's prologue: issue 12's "permuted copy", a compile-time switch
 * for the GPU's A/B (bench/tma_gather_ab.sh's arm pc; 1.03-1.35x slower, session 35).  Read by
 * fuse-gemm (which leaves the gather out) and lower-gemm (which then reads the leaves by the index). */
enum { PERM_COPY_DEFAULT = 0 };
#define DBG_TMA_GATHER DBG_BIT(45)	/* codegen: gathered bf16/f16 GEMMs on the WS mainloop, A's rows by one-row TMA boxes (A/B) */
#define DBG_NORM_BCAST DBG_BIT(46)	/* codegen: the norm kernel's row sums by shuffles, longer rows kept in registers (A/B) */
#define DBG_FRONT3 DBG_BIT(54)	/* codegen: every decode front (the default where a CTA has one expert: CG_FRONT3_DEFAULT) hands over by a ticket (the last CTA to finish routes), zeroes the chain's flags in every CTA, sorts 8 slots a trip */
#define DBG_FRONT2 DBG_BIT(50)	/* codegen: decode fronts with front-pair, vec-ahead's last CTA and whole rows a batch (A/B) */
#define DBG_BQ_GACC DBG_BIT(38)	/* codegen: 4-bit integer quantised B: mma on exact q - z, the scale applied per group to f32 partial sums (A/B) */
#define DBG_SK_TAIL DBG_BIT(44)	/* codegen: static bf16/f16 stream-K GEMMs take a second wave of short runs for the SMs that finish first (A/B) */
#define DBG_F8_PINGPONG DBG_BIT(42)	/* codegen: FP8 grouped down GEMMs on ping-pong consumers, 64x128 a warpgroup (A/B) */
#define DBG_GATHER_PINGPONG DBG_BIT(43)	/* codegen: gathered grouped gate|up GEMMs of short K on ping-pong consumers (A/B) */
#define DBG_SLOTS_REF DBG_BIT(49)	/* lower-moe: MoE slots in x's type where the importer says the reference rounds them (slots=x; the default: SLOTS_REF_DEFAULT) */
#define DBG_FP8 DBG_BIT(52)	/* lower-moe: bf16/f16 MoE slots of f32 hold each expert's output rounded to x's type, weighted by the sum (A/B) */
#define DBG_F8_ACC1 DBG_BIT(47)	/* codegen: FP8 WS consumers keep one accumulator set, each promotion between two k-tiles' wgmmas (A/B) */
#define DBG_QDEC DBG_BIT(53)	/* codegen: 16-row mma.sync decode tiles load only A's live rows; decode bundles' packed B in lane vectors of 2 atoms (the default on GPUs: QDEC_DEFAULT) */
#define DBG_GROUPED DBG_BIT(48)	/* codegen: grouped bf16/f16 prefill tiles under 256 columns take the widest even column-tile count (gpt-oss-20b: 128x240; the default on sm_90a: GROUPED_COLS_DEFAULT) */
#define DBG_PREFILL_SMALL DBG_BIT(55)	/* codegen: the norm kernel 4 rows a warp (gamma in shared memory, the next row's loads ahead); the route kernel with no CTA barrier (A/B) */
#define DBG_DENSE_C2 DBG_BIT(51)	/* codegen: dense WS GEMMs in clusters of 2 store C by TMA; dense prefill plans in clusters (A/B) */
#define DBG_QUAD_STORE DBG_BIT(59)	/* codegen: grouped WS epilogues stored from registers: a quad's results swapped by shuffles, 16 bytes a lane (A/B; CG_QUAD_STORE_DEFAULT in codegen/codegen.h) */
#define DBG_F8_L2 DBG_BIT(60)	/* codegen: FP8 grouped GEMMs that gather A (the MoE gate|up) zero-fill the rows past a tile's expert without reading them (live rows), fewer bytes from L2 (A/B) */
#define DBG_LIVE_SUMS DBG_BIT(56)	/* codegen: stream-K/split-K hand-overs of mma.sync tiles move only the partial sums of the tile's rows, released by thread 0 (A/B) */
#define DBG_QBULK DBG_BIT(58)	/* codegen: stream-K quantised decode GEMMs fill B's stages by cp.async.bulk on an mbarrier a stage, the ring as deep as shared memory allows (A/B) */
#define DBG_QAHEAD DBG_BIT(61)	/* codegen: stream-K quantised decode GEMMs send their runs' first packed words and scales toward L2 before the grid wait (A/B) */
#define DBG_COMBINE_FOLD DBG_BIT(57)	/* codegen: a decode down GEMM on CUDA cores (gemm-vec) runs the combine in its last CTA (a ticket), no combine launch (A/B) */
#define DBG_ROUTE2 DBG_BIT(62)	/* codegen: the decode front's route launch (part 2) a warp a token of a round of up to 16, redux.sync top-k, no CTA barrier in the warps' sums, the sort's offsets beside its places (the default: CG_ROUTE2_DEFAULT) */
#define DBG_ROUTE_COUNT DBG_BIT(63)	/* codegen: a prefill route kernel also counts the grid permute's slots (atomics into its table, zeroed by the router GEMM's flag memset): no NAME_count launch (A/B) */
#define DBG_DENSE_C4 DBG_BIT(64)	/* codegen: dense prefill plans that take clusters of 2 sharing B run in clusters of 4, 2x2 sharing A and B (A/B) */
typedef struct {
	const char *name;	/* in --debug=LIST */
	DbgFlags bit;
	const char *env;	/* the deprecated alias: set, and not "" or "0"; NULL: none */
	const char *help;
} DebugFlag;
extern const DebugFlag debug_flags[];
extern const int ndebug_flags;
/* Add the flags of a comma list to *flags: 0, or -1 with why (an unknown name). */
int debug_parse(const char *list, DbgFlags *flags, char *why, size_t whylen);
int debug_names_line(int *next, char *buf, size_t n, size_t width);

/* str.c */

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);	/* FNV-1a, 64 bit */
uint64_t hash_str(const char *s);
uint32_t crc32c(uint32_t crc, const void *p, size_t n);	/* start with crc = 0 */
/* splitmix64 finaliser: a good integer hash (inline: synthetic weights
 * call it three times per element, billions of times at full size) */
static inline uint64_t
mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/*
 * A string set that returns one canonical copy per distinct string, so
 * interned strings compare with ==.  Copies live in the given arena.
 */
typedef struct StrSet StrSet;
struct StrSet {
	Arena *arena;
	const char **slot;
	size_t n, cap;
};
const char *str_intern(StrSet *s, const char *str);
const char *str_find(const StrSet *s, const char *str);	/* NULL if absent */
void str_remove(StrSet *s, const char *str);	/* the copy stays in the arena */
void str_free(StrSet *s);	/* frees the table, not the arena */

/* file.c */

/*
 * Open a file to read, never blocking: anything but a regular file (a FIFO,
 * a directory, a device) is refused, as is one above max bytes (0: no
 * limit).  within (NULL: anywhere): the opened file, after symbolic links,
 * must lie below that folder, else FILE_OUTSIDE and no diagnostic (the
 * caller names the rule).  Returns the fd (*size gets the file's size) or
 * -1 with a diagnostic naming the path.  docs/limits.md lists the limits.
 */
#define FILE_OUTSIDE (-2)
int file_open(const char *path, const char *within, uint64_t max, uint64_t *size, Diag *d);
int file_pread(int fd, void *buf, size_t n, uint64_t off);	/* all n bytes, or -1 */
/* Whole-file read through file_open; NULL with a diagnostic.  *len gets the size. */
char *file_read_max(const char *path, uint64_t max, size_t *len, Diag *d);
char *file_read(const char *path, size_t *len, Diag *d);	/* no size limit */
const char *file_basename(const char *path);
char *file_dirname(const char *path);	/* malloc'd */
char *file_join(const char *dir, const char *name);	/* malloc'd */
int file_is_dir(const char *path);
int file_exists(const char *path);

/* outfile.c: every output written atomically (a temporary, then rename) */

typedef struct FileOut FileOut;
struct FileOut {
	FILE *f;
	const char *path;
	char *tmp;		/* the temporary; NULL: stdout or a device, written in place */
};
/* Open the temporary for `path` ("-": stdout); NULL with a diagnostic. */
FILE *file_create(FileOut *o, const char *path, Diag *d);
/* Flush, fsync, close and rename over the target: 0, or -1 with a
 * diagnostic naming the path (and the temporary removed). */
int file_commit(FileOut *o, Diag *d);
void file_discard(FileOut *o);	/* on an error elsewhere: remove the temporary */
int file_write(const char *path, const void *p, size_t n, Diag *d);	/* the three in one */
/* Checks made before work starts, so a bad -o fails in a second. */
int file_check_output(const char *path, Diag *d);	/* its folder exists and is writable */
int file_make_dir(const char *path, Diag *d);	/* an output folder, created if missing */
int file_same(const char *a, const char *b);	/* both exist and are one file */
/* A model-chosen name as one file name inside a folder (docs/cli.md). */
void file_safe_name(char *buf, size_t n, const char *name);

/* dtype.c */

typedef enum {
#define DTYPE(e, s, bits, onnx, fl) DT_##e,
#include "dtype.def"
#undef DTYPE
	NDTYPE
} DType;

/* DTF_COMPUTE: a type GEMMs compute in, never a tensor's (tf32): dtype_parse
 * and dtype_from_onnx do not know it, precision_parse does */
enum { DTF_FLOAT = 1, DTF_INT = 2, DTF_SIGNED = 4, DTF_BOOL = 8, DTF_COMPUTE = 16 };

const char *dtype_name(DType t);
int dtype_parse(const char *s, size_t n, DType *t);	/* 0 ok, -1 unknown */
/* What GEMMs with f32 operands compute with (--precision, a bundle's
 * "precision" line): f32, tf32, bf16 or f16; 0 ok, -1 unknown */
int precision_parse(const char *s, size_t n, DType *t);
int dtype_bits(DType t);
int dtype_flags(DType t);
int dtype_from_onnx(int code, DType *t);	/* -1 if we have no such type */
int dtype_onnx(DType t);
int dtype_is_float(DType t);
int dtype_is_int(DType t);
size_t dtype_bytes(DType t, size_t nelem);	/* packed i4/u4 round up */
int dtype_is_packed(DType t);	/* 2 per byte, low nibble first: i4, u4, f4e2m1 */
int dtype_is_quantised(DType t);	/* a storage type of quantised values: 8 bits or fewer, not bool */

/*
 * Exact conversions.  Reading a low-precision value into a double is exact;
 * writing rounds to nearest even (f8e4m3 saturates to +-448, as ONNX's
 * saturate=1 cast does; integers round half to even and saturate).
 */
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
/*
 * w = hi + mid + lo in bf16 (hi = bf16(w), mid = bf16(w - hi), lo =
 * bf16(w - hi - mid)), each part zero or a normal bf16: 0.  -1 when the
 * three parts do not add up to w exactly or one would be subnormal (|w|
 * below about 2^-103, or w subnormal itself), or w is not finite or rounds
 * to infinity in bf16 (|w| >= 0x1.ffp127).  A product of a bf16 value and a
 * part is exact in f32 (8 x 8 significant bits) while it does not underflow.
 */
int bf16_split3(float w, uint16_t part[3]);
/* cvt.rna.tf32.f32: to 10 mantissa bits, to nearest, ties away from zero */
float f32_to_tf32(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float f8e4m3_to_f32(uint8_t v);
uint8_t f32_to_f8e4m3(float f);
float f8e5m2_to_f32(uint8_t v);
uint8_t f32_to_f8e5m2(float f);
float f4e2m1_to_f32(unsigned v);	/* the low 4 bits */
unsigned f32_to_f4e2m1(float f);	/* nearest even, saturating to 6; NaN -> -0 */
float f8e8m0_to_f32(uint8_t v);
uint8_t f32_to_f8e8m0(float f);	/* 2^ceil(log2 |f|), as ONNX's round_mode=up */

/* Element i of a buffer of type t, as a double (exact for every type). */
double dtype_load(DType t, const void *p, size_t i);
/* Elements i..i+n-1 as doubles, the loop specialised for the common types. */
void dtype_load_n(DType t, const void *p, size_t i, size_t n, double *out);
/* Round v to type t and store it at element i.  Floats round through f32. */
void dtype_store(DType t, void *p, size_t i, double v);
/* Integer elements without the trip through double (i64 indices). */
int64_t dtype_load_int(DType t, const void *p, size_t i);
void dtype_store_int(DType t, void *p, size_t i, int64_t v);

/* tensor.c */

#define MAXRANK 8

/* A host tensor: dense, row-major, owning its data (malloc'd). */
typedef struct Tensor Tensor;
struct Tensor {
	DType dt;
	int rank;
	int64_t dim[MAXRANK];
	void *data;
	char *name;		/* malloc'd or NULL; from a .pb file, say */
};
int64_t tensor_numel(const Tensor *t);
size_t tensor_nbytes(const Tensor *t);
/* 0 ok; -1 if the element count or byte size overflows the limits. */
int tensor_alloc(Tensor *t, DType dt, int rank, const int64_t *dim);
/* The byte size tensor_alloc would allocate, without allocating; -1 as it. */
int tensor_size(DType dt, int rank, const int64_t *dim, size_t *bytes);
void tensor_free(Tensor *t);
void tensor_shape_string(char *buf, size_t n, const Tensor *t);	/* "f32[2,3]" */

/* Largest tensor we will allocate for reading or evaluating (bytes). */
#define TENSOR_MAX_BYTES ((size_t)1 << 36)
#define TENSOR_MAX_HEADER ((size_t)1 << 20)	/* a tensor file's bytes besides the data */

/* tensorfile.c: .npy and ONNX TensorProto (.pb), chosen by extension */

int tensor_read(const char *path, Tensor *t, Diag *d);
int tensor_write(const char *path, const Tensor *t, Diag *d);
int npy_read(const char *path, const void *buf, size_t len, Tensor *t, Diag *d);
int npy_write(FILE *f, const Tensor *t);
/* A minimal TensorProto codec: dims, data_type, name, raw and typed data. */
int pb_tensor_decode(const char *path, const void *buf, size_t len, Tensor *t,
		     Diag *d);
int pb_tensor_write(FILE *f, const Tensor *t);

/*
 * Comparison used by every numeric test: relative L2 error plus a per
 * element check |a-b| <= atol + rtol*|b|.  NaNs must match positions.
 */
typedef struct Compare Compare;
struct Compare {
	double rel_l2;		/* ||a-b|| / max(||b||, tiny) */
	double max_abs;		/* largest |a-b| */
	int64_t worst;		/* element index of max_abs, -1 if none */
	int64_t nbad;		/* elements outside atol + rtol*|b| */
};
void tensor_compare(const Tensor *got, const Tensor *want, double atol,
		    double rtol, Compare *c);
/* The tolerances we state in docs/testing.md, by the dtype compared. */
void tolerance_for(DType t, double *atol, double *rtol, double *rel_l2);
/* The dtype whose tolerance checks an output of type t computed with GEMM
 * operands rounded to `precision` (f32: exact): the looser of the two. */
DType tolerance_dtype(DType t, DType precision);
/* Did a comparison pass for results of type t?  Every element within
 * atol + rtol*|want| (low-precision floats: all but 0.5% of them, since a
 * few outputs where large terms cancel carry the terms' rounding) and the
 * relative L2 error within rel_l2.  Compare with tolerance_for(t). */
int tensor_close(const Compare *c, DType t, int64_t numel);

/*
 * routing.c: routing decisions (the experts each token picks) and how two
 * compare.  A flip is a token whose experts differ; it is a near tie when
 * the reference's values put the competing experts (or their groups)
 * within atol + rtol*|value| of each other.
 */
typedef struct Routing Routing;
struct Routing {
	int64_t T, E, k;
	int64_t ngroup;		/* > 1: experts picked within the best groups */
	int64_t topk_group;	/* how many groups are kept */
	int top2;		/* a group scores as its best two, else its best */
	int32_t *ids;		/* [T,k] the experts chosen (malloc'd) */
	float *val;		/* [T,E] the values the choice ranks (malloc'd) */
	const char *what;	/* what val holds: "logit" or "score" */
};
typedef struct {
	int64_t token;
	double gap;		/* the reference's margin between the choices */
	int near_tie;		/* gap within the tolerance */
} RouteFlip;
void routing_free(Routing *r);
int routing_same_shape(const Routing *a, const Routing *b);
/* The tokens whose expert sets differ (the first max in flips); the count. */
int64_t routing_compare(const Routing *ref, const Routing *got, double atol, double rtol,
			RouteFlip *flips, int64_t max);
/* Is token t's choice clear of ties: its groups and then its experts ahead
 * of the rest by more than atol + rtol*|value|? */
int routing_clear(const Routing *r, int64_t t, double atol, double rtol);
/* "token 6: experts {2,5} vs {2,7}, logit gap 3.1e-04 (a near tie)" */
void routing_describe(char *buf, size_t n, const Routing *ref, const Routing *got,
		      const RouteFlip *f);

/*
 * What a router's choice ranks (the route line's select=, docs/bundle.md):
 * the logits, their sigmoids or their softmax over the row, plus a selection
 * bias when it has one (DeepSeek-V3's e_score_correction_bias), in f32 as
 * the kernel computes them.  routing_select turns r's values from logits
 * into those (bias: [E] or NULL); what becomes "score" unless it ranks the
 * bare logits.  Names: "logit", "sigmoid", "softmax"; parse -1 on others.
 */
typedef enum { ROUTE_SELECT_LOGIT, ROUTE_SELECT_SIGMOID, ROUTE_SELECT_SOFTMAX, NROUTE_SELECT } RouteSelect;
const char *route_select_name(RouteSelect s);
int route_select_parse(const char *s, size_t n);
void routing_select(Routing *r, RouteSelect s, const float *bias);

/* Routing decisions in the order a run made them. */
typedef struct {
	Routing *r;
	int n, cap;
} RouteLog;
void route_log_push(RouteLog *l, Routing *r);	/* takes r over */
void route_log_free(RouteLog *l);

/* How one run's routing compares with a reference run's. */
typedef struct {
	int64_t T;		/* tokens (of the first decision compared), 0: none */
	int64_t nflip, nbad;	/* tokens flipped, and flips beyond a near tie */
	unsigned char *drop;	/* [T] tokens flipped in any decision (malloc'd) */
	char msg[1024];		/* the first flips described, "; " between */
} RouteDiff;
/* Each decision of got against the first unused one of ref with the same
 * T, E and k (a pass may add or drop other top-ks); the number compared. */
int route_log_compare(const RouteLog *ref, const RouteLog *got, double atol, double rtol,
		      RouteDiff *d);
void route_diff_free(RouteDiff *d);
/*
 * Without a reference's routing: the rows that failed (bad[t]) whose own
 * routing r is a near tie (not routing_clear at atol, rtol) are put down to
 * a flip: marked in d (drop, nflip; nbad stays 0) and described ("token 6:
 * experts {2,5}, expert 7 within 3.1e-04 of 5: a near tie").  d accumulates
 * over calls (several routers); T must agree.  The count marked.
 */
int64_t routing_near_ties(const Routing *r, const unsigned char *bad, double atol, double rtol,
			  RouteDiff *d);

/* t as [T, rest] without the rows drop marks; 0 ok, -1 not T rows. */
/* Is got close to want at dt's tolerance (tensor_close) without the rows of
 * the tokens rd marks as flipped (every row when none flipped or rd is
 * NULL)?  Leaving rows out never fails what passes whole: a near-tie row
 * left out shrinks the elements a small output may have outside tolerance.
 * *c: the comparison judged. */
int routing_close(const Tensor *got, const Tensor *want, const RouteDiff *rd, DType dt,
		  Compare *c);
/* got against want at atol, rtol without the rows of the tokens rd marks as
 * flipped (every row when none flipped or rd is NULL); the number of
 * elements compared. */
int64_t routing_compare_kept(const Tensor *got, const Tensor *want, const RouteDiff *rd,
			     double atol, double rtol, Compare *c);
int tensor_drop_rows(const Tensor *t, int64_t T, const unsigned char *drop, Tensor *out);

#endif
