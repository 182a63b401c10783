/*
 * ir.h — the graph IR: types with symbolic dims, values, nodes, graphs and
 * kernels in one module, its text form (printer and parser), the verifier,
 * shape inference and the CPU reference interpreter.
 *
 * A Module owns one arena; every Graph, Node, Value, Attr and interned string
 * lives there and is released by ir_free_module.  Program order inside a
 * graph is an intrusive list that is always topological.  Use lists are
 * filled on demand (ir_fill_uses), never maintained.  docs/ir.md is the spec.
 */
#ifndef MOEC_IR_H
#define MOEC_IR_H

#include "util.h"

typedef struct Module Module;
typedef struct Graph Graph;
typedef struct Node Node;
typedef struct Value Value;
typedef struct Weight Weight;
typedef struct Attr Attr;
typedef struct Use Use;
typedef struct DimExpr DimExpr;

typedef enum {
#define OP(e, s, inmin, inmax, outmin, outmax, fl) OP_##e,
#include "ops.def"
#undef OP
	NOP
} Op;

enum {
	OPF_EW = 1,		/* elementwise (broadcasting for several operands) */
	OPF_COMMUTE = 2,	/* binary and commutative */
	OPF_REDUCE = 4,		/* reduce over axes */
	OPF_DYNSHAPE = 8,	/* result shape depends on operand data */
	OPF_SCALAR = 16,	/* on floats, an f32 function of one or two operands:
				 * codegen/ew.c emits it for kernel bodies and GEMM
				 * epilogues alike, so fuse-gemm admits exactly these */
};

typedef struct {
	const char *name;
	int inmin, inmax, outmin, outmax;	/* -1: unbounded */
	int flags;
} OpInfo;

extern const OpInfo ir_opinfo[NOP];
const char *ir_opname(Op op);
int ir_find_op(const char *name, size_t n, Op *op);	/* 0 ok, -1 unknown */

/* type.c: dims and types */

/*
 * A dim is a static size (>= 0) or symbolic (< 0): an index into the
 * module's table of products coef * atom * atom ..., where an atom is a
 * named symbol (T, batch) or an unknown "?" produced by a data-dependent op.
 * Expressions are interned, so equal dims compare with ==.
 */
typedef int64_t Dim;
#define DIM_MAXATOM 4

struct DimExpr {
	int64_t coef;
	int natom;
	int atom[DIM_MAXATOM];	/* sorted atom ids */
};

typedef struct {
	DType dt;
	int rank;
	Dim dim[MAXRANK];
} Type;

int ir_dim_is_static(Dim d);
Dim ir_dim_sym(Module *m, const char *name);	/* the atom named name */
Dim ir_dim_unknown(Module *m);	/* a fresh "?" */
int ir_dim_has_unknown(const Module *m, Dim d);
Dim ir_dim_mul(Module *m, Dim a, Dim b);
Dim ir_dim_add(Module *m, Dim a, Dim b);	/* unknown unless static or alike */
/* ONNX Slice on a dim of size dim (numpy's clamping), for inference, the
 * interpreter and the importer alike: *len elements from *first by step
 * (step != 0).  No overflow for any int64 inputs. */
void ir_slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
		    int64_t *len);
/* ONNX Range on integers: ceil((limit - start) / delta) elements, exact
 * (computed in 128 bits), saturated at INT64_MAX; delta != 0. */
int64_t ir_range_len(int64_t start, int64_t limit, int64_t delta);
Dim ir_dim_div(Module *m, Dim a, int64_t c);	/* exact division or unknown */
const DimExpr *ir_dim_expr(const Module *m, Dim d);
int ir_dim_print(char *buf, size_t n, const Module *m, Dim d);
int ir_type_print(char *buf, size_t n, const Module *m, const Type *t);
int ir_type_static(const Type *t);
/* Same dtype and dims (interned: a symbolic dim equals only itself; each "?" is its own). */
int ir_type_eq(const Type *a, const Type *b);
int64_t ir_type_numel(const Type *t);	/* -1 if symbolic (or beyond int64) */
/*
 * The most elements a type may have, counting the coefficient of each
 * symbolic dim (f32[2*T,3] counts 6).  The parser, shape inference and the
 * verifier refuse bigger types, so element counts and byte sizes of every
 * verified type fit in int64 with room to spare (docs/limits.md).
 */
#define IR_MAX_NUMEL ((int64_t)1 << 48)
/*
 * Budgets that keep memory bounded by the input (docs/limits.md): nodes in
 * one graph (the parser, and the ONNX importer after function expansion),
 * and bytes of a module's arena (every IR object; weight data lives
 * outside it).  Passes allocate O(1) arena bytes per node they change.
 */
#define IR_MAX_NODES (1 << 18)
#define IR_MAX_ARENA_BYTES ((size_t)2 << 30)
int ir_type_ok(const Module *m, const Type *t);	/* 1 if within IR_MAX_NUMEL */
Type ir_type(DType dt, int rank, const Dim *dim);
Type ir_scalar(DType dt);
/* Dims that may be equal at run time (unknowns match anything). */
int ir_dim_compatible(const Module *m, Dim a, Dim b);

/* Values bound to the atoms at run time (T = 7, batch = 2). */
typedef struct {
	int n;
	int64_t *val;		/* by atom id; -1 when unbound */
} DimEnv;
int ir_dim_eval(const Module *m, Dim d, const DimEnv *env, int64_t *out);
int ir_natom(const Module *m);
const char *ir_atom_name(const Module *m, int atom);
int ir_atom_is_unknown(const Module *m, int atom);

/* ir.c: modules, graphs, values, nodes */

typedef enum { G_GRAPH, G_KERNEL } GraphKind;

struct Use {
	Node *node;		/* NULL: a graph result */
	int index;		/* operand (or result) position */
};

typedef enum { V_PARAM, V_RESULT, V_WEIGHT } ValueKind;

struct Value {
	uint32_t id;		/* dense in the module; index side tables with it */
	ValueKind kind;
	const char *name;	/* interned, without the sigil; unique per graph */
	Type type;
	Node *def;		/* V_RESULT: the defining node */
	int resno;		/* V_RESULT: which result of def */
	Weight *weight;		/* V_WEIGHT */
	Graph *graph;		/* owning graph; NULL for weights */
	Use *use;		/* filled by ir_fill_uses */
	int nuse;
	int usecap;		/* entries use can hold: ir_fill_uses reuses it */
};

/*
 * A weight: a named tensor of the module whose data is never printed.  With
 * data == NULL it is synthetic: element i is mean + scale * u(seed, name, i),
 * u uniform in [-1, 1) (ir_synth_value), reproducible on the device; with
 * row_block > 1 element i takes element ir_synth_index(w, i)'s value: row r
 * of each matrix (the last two dims) repeats row r - r % row_block (a
 * checkpoint's 2-D scale blocks repeated over their rows, as cfg_quant
 * imports them).  With col_repeat > 1 (dividing the last dim C) element
 * (.., c) takes the value element (.., c / col_repeat) has in the weight of
 * last dim C / col_repeat: a per-channel scale [.., N, 1] that fp8-regroup
 * widened to [.., N, K/128] keeps its bytes.
 */
struct Weight {
	Value *value;
	void *data;		/* NULL: synthetic; else owned (free_data) */
	void (*free_data)(void *data, size_t size);
	size_t size;
	uint64_t seed;
	double mean, scale;	/* scale < 0: default 1/sqrt(fan_in) */
	int64_t row_block;	/* synthetic: rows per repeated row (0, 1: none) */
	int64_t col_repeat;	/* synthetic: columns per generated column (0, 1: none) */
	const char *source;	/* where the data came from, for diagnostics */
	void *cache;		/* synthetic data generated on the host (malloc'd) */
};

typedef enum { A_INT, A_FLOAT, A_STR, A_INTS, A_FLOATS, A_DIMS } AttrKind;

struct Attr {
	const char *key;	/* interned */
	AttrKind kind;
	int n;			/* list length */
	union {
		int64_t i;
		double f;
		const char *s;
		int64_t *ints;
		double *floats;
		Dim *dims;
	} u;
};

struct Node {
	Node *prev, *next;	/* program order, always topological */
	Op op;
	Value **in;		/* NULL entries: absent optional operands */
	Value **out;
	int nin, nout, nattr;
	Attr *attr;		/* sorted by key */
	Graph *callee;		/* OP_CALL */
	Loc loc;
};

struct Graph {
	Module *m;
	const char *name;	/* without '@' */
	GraphKind kind;
	Attr *attr;		/* kernels: template=..., sorted */
	int nattr;
	Value **param;
	int nparam;
	Value **ret;
	const char **retname;	/* names of the results in the signature */
	int nret;
	Node *first, *last;
	int nnode;
	StrSet names;		/* value names in use in this graph */
	int tmpcount;
	int nextkernel;		/* passes name kernels @<name>.k<i> from here on */
	Loc loc;
};

struct Module {
	Arena *arena;
	StrSet strs;		/* interned strings */
	Graph **graph;		/* graphs and kernels, in print order */
	int ngraph;
	Weight **weight;	/* in declaration order */
	int nweight;
	StrSet wnames;
	uint32_t nvalue;	/* next value id */
	DimExpr *dimexpr;	/* symbolic dims */
	int ndimexpr;
	const char **atom;	/* atom names; "?" for unknowns */
	int natom;
	const char *file;	/* source file name, for diagnostics */
	DType widened;		/* as imported, a float result computed in a narrower
				 * type and widened on the way out (a float16 model with
				 * float32 outputs): that type (ir_widened_dtype); 0 none */
};

Module *ir_new_module(void);
void ir_free_module(Module *m);
const char *ir_intern(Module *m, const char *s);
/* Room for element n of an arena array that grows one at a time. */
void *ir_grow(Module *m, void *arr, int n, size_t elem);
Graph *ir_new_graph(Module *m, const char *name, GraphKind kind);
Graph *ir_find_graph(const Module *m, const char *name);
Graph *ir_main_graph(const Module *m);	/* the first G_GRAPH */
DType ir_widened_dtype(const Graph *g);
void ir_remove_graph(Module *m, Graph *g);
Value *ir_add_param(Graph *g, const char *name, Type t);
void ir_set_results(Graph *g, Value **v, const char **names, int n);
Weight *ir_add_weight(Module *m, const char *name, Type t);	/* name made unique */
Weight *ir_find_weight(const Module *m, const char *name);
void ir_remove_weight(Module *m, Weight *w);	/* only when unused */

/* A node with nin operands and nout untyped results, not yet in the list. */
Node *ir_new_node(Graph *g, Op op, Value *const *in, int nin, int nout);
void ir_insert(Graph *g, Node *before, Node *n);	/* before NULL: append */
void ir_erase(Graph *g, Node *n);	/* unlink; its results must be unused */
void ir_set_name(Graph *g, Value *v, const char *name);	/* made unique */
void ir_replace_uses(Graph *g, Value *old, Value *new);	/* operands and results */
void ir_fill_uses(Graph *g);
int ir_is_graph_result(const Graph *g, const Value *v);
DType ir_results_dtype(const Graph *g);	/* the narrowest float its results were computed in */

/* Attributes: setters keep the array sorted; getters take a default. */
void ir_set_int(Module *m, Node *n, const char *key, int64_t v);
void ir_set_ints(Module *m, Node *n, const char *key, const int64_t *v, int k);
void ir_set_floats(Module *m, Node *n, const char *key, const double *v, int k);
void ir_set_dims(Module *m, Node *n, const char *key, const Dim *v, int k);
const Attr *ir_attr(const Node *n, const char *key);
int64_t ir_attr_int(const Node *n, const char *key, int64_t def);
double ir_attr_float(const Node *n, const char *key, double def);
const char *ir_attr_str(const Node *n, const char *key, const char *def);
/* A list attribute: number of elements, or -1 if absent.  INTS read as
 * DIMS when non-negative; A_INT reads as a list of one. */
int ir_attr_ints(const Node *n, const char *key, int64_t *out, int max);
int ir_attr_floats(const Node *n, const char *key, double *out, int max);
int ir_attr_dims(const Node *n, const char *key, Dim *out, int max);
int ir_attr_dtype(const Node *n, const char *key, DType *out);	/* 0 ok */
void ir_attr_set(Module *m, Attr **arr, int *n, Attr a);	/* generic, sorted */
void ir_copy_attrs(Module *m, Node *dst, const Node *src);
void ir_graph_set_str(Graph *g, const char *key, const char *v);
const char *ir_graph_str(const Graph *g, const char *key, const char *def);

/* A builder: insertion point plus the location new nodes get. */
typedef struct {
	Graph *g;
	Node *before;		/* NULL: append */
	Loc loc;
	Diag *d;
	int err;		/* set when a build failed shape inference */
	Attr pend[16];		/* attributes for the next ir_b_node */
	int npend;
} Builder;

/* Build, infer and insert a node; returns its first result (NULL on error,
 * with b->err set and a diagnostic).  Attributes go in with the builder's
 * pending list: ir_b_int(b, "axis", 1) before the call. */
Node *ir_b_node(Builder *b, Op op, Value *const *in, int nin, int nout);
Value *ir_b1(Builder *b, Op op, Value *a);
Value *ir_b2(Builder *b, Op op, Value *a, Value *c);
Value *ir_b_const_f(Builder *b, DType dt, double v);	/* a scalar */
Value *ir_b_const_i(Builder *b, DType dt, const int64_t *v, int n, int rank);
/* x quantised to f8e4m3 per token and group columns of its last dim (0:
 * the row) and dequantised back to x's dtype: quantize_dynamic, dequantize.
 * ub > 0 clamps each scale's amax to ub (fbgemm's scale_ub) by clipping x to
 * [-ub, ub] first: the same scales and values (what is above ub saturates
 * to +-448 either way). */
Value *ir_b_act_quant(Builder *b, Value *x, int64_t group, double ub);
void ir_b_int(Builder *b, const char *key, int64_t v);
void ir_b_float(Builder *b, const char *key, double v);
void ir_b_str(Builder *b, const char *key, const char *v);
void ir_b_ints(Builder *b, const char *key, const int64_t *v, int k);
void ir_b_dims(Builder *b, const char *key, const Dim *v, int k);

/* infer.c: shape inference */

/* Compute n's result types from its operands and attributes.  0 ok, or -1
 * with a diagnostic at n->loc.  Results of data-dependent ops get "?". */
int ir_infer(Graph *g, Node *n, Diag *d);
/* Re-infer every node in order (after a rewrite); -1 on the first error. */
int ir_infer_graph(Graph *g, Diag *d);
/* Broadcast two shapes (numpy rules); -1 if incompatible. */
int ir_broadcast(Module *m, const Type *a, const Type *b, Type *out);

/* verify.c */

/* Structural and type checks of the whole module; 0 ok, -1 with
 * diagnostics (every problem found, not just the first). */
int ir_verify(Module *m, Diag *d);

/* print.c */

enum { IR_PRINT_LOC = 1 };
void ir_print(FILE *f, const Module *m, int flags);
void ir_print_graph(FILE *f, const Graph *g, int flags);
void ir_print_node(FILE *f, const Module *m, const Node *n, int flags);
char *ir_print_string(const Module *m, int flags);	/* malloc'd */
/* A float the parser reads back bit-exactly, always with '.', 'e' or inf/nan. */
int ir_format_float(char *buf, size_t n, double v);

/* parse.c */

/* Parse a module; NULL with `file:line:col: error: message` diagnostics. */
Module *ir_parse(const char *file, const char *text, size_t len, Diag *d);
Module *ir_parse_file(const char *path, Diag *d);

/* synth.c: synthetic weights, bit-identical on the host and the device */

float ir_synth_value(uint64_t seed, uint64_t namehash, uint64_t i, float mean,
		     float scale);
double ir_weight_scale(const Weight *w);	/* resolves the default */
uint64_t ir_synth_index(const Weight *w, uint64_t i);	/* the element whose value i takes */
/* Data of a weight, generating synthetic data on first use (cached in w).
 * NULL with a diagnostic if it would be too large. */
const void *ir_weight_data(Weight *w, Diag *d);
/* Elements [first, first+n) of w as doubles, generated on the fly for a
 * synthetic weight not generated yet (a full-size expert stack need never
 * be held whole: the interpreter's moe reads its rows this way). */
void ir_weight_elems(Weight *w, int64_t first, int64_t n, double *out);

/*
 * attrs.c: typed attribute getters, each family's names, types and defaults
 * written once (the schema is in attrs.c).  The scalar ops (OPF_SCALAR):
 * the interpreter and codegen/ew.c both read IrEwAttrs.
 */
typedef struct {
	int tanh_approx;	/* gelu approx=tanh */
	double alpha, beta;	/* leaky_relu, hard_sigmoid */
	double lo, hi;		/* clip min, max */
} IrEwAttrs;
/* 0, or -1 with the reason in why (a bad approx). */
int ir_ew_attrs(const Node *n, IrEwAttrs *a, char *why, size_t whylen);
/*
 * The gated activation of swiglu and moe (attrs.c; ir_glu_scalar in
 * eval_ew.c is its arithmetic): gate and up from one [.., 2N] row, split by
 * layout (moe: gu_layout).  limit clamps: silu's gate after the activation
 * and up, min(silu(gate), limit) * clamp(up, -limit, limit) (Step-3.5); oai's
 * gate and up before it (gpt-oss).  INFINITY: no clamp.
 */
typedef enum {
	IR_GLU_UNKNOWN = -1, IR_GLU_SILU, IR_GLU_GELU, IR_GLU_OAI, IR_GLU_RELU,
	IR_GLU_RELU2		/* ungated only: relu(h)² (Nemotron-H) */
} IrGluAct;
typedef struct {
	IrGluAct act;
	int gated;		/* moe gated=0: no gate half, a = act(h) (ir_act_scalar); swiglu: 1 */
	int scale_input;	/* moe scale_input=1: the routing weight scales the expert's input (Llama 4) */
	int interleave;		/* layout=interleave: gate even columns, up odd ones */
	int tanh_approx;	/* gelu approx=tanh */
	double alpha;		/* oai */
	double limit;		/* silu, oai; INFINITY: none */
} IrGluAttrs;
/* 0, or -1 with the reason in why (an unknown act or layout, a bad approx,
 * a limit that is not > 0 or on gelu/relu). laykey: "layout" or "gu_layout". */
int ir_glu_attrs(const Node *n, const char *laykey, IrGluAttrs *g, char *why, size_t whylen);
/* act(gate, up) in double, before rounding to a dtype. */
double ir_glu_scalar(const IrGluAttrs *g, double gate, double up);
/* An ungated expert's act(h) (gated=0: relu, relu2, silu or gelu), in double. */
double ir_act_scalar(const IrGluAttrs *g, double h);
/* Router attributes of moe and route; unknown names decode to *_UNKNOWN
 * (each caller reports them in its own words). */
typedef enum {
	IR_ROUTER_UNKNOWN = -1, IR_ROUTER_SOFTMAX, IR_ROUTER_SIGMOID, IR_ROUTER_TOPK_SOFTMAX,
	IR_ROUTER_SPARSEMIXER
} IrRouter;
typedef enum { IR_GROUP_UNKNOWN = -1, IR_GROUP_MAX, IR_GROUP_TOP2 } IrGroupScore;
typedef struct {
	IrRouter router;
	const char *router_name;
	int64_t k;		/* required: -1 when absent */
	int renorm;
	double scale;
	int64_t n_group, topk_group;
	IrGroupScore group_score;
	const char *group_score_name;
	double group_fill;	/* sel of the experts of groups not kept */
	double jitter_eps;	/* sparsemixer: kept when (m - l) / max(|l|, m) <= 2 eps */
} IrRouteAttrs;
void ir_route_attrs(const Node *n, IrRouteAttrs *r);
/* topk's attributes: k required (-1 when absent: infer.c refuses it), axis = -1, largest = 1. */
typedef struct {
	int64_t k;
	int64_t axis;		/* as written: negative counts from the end */
	int largest;
} IrTopkAttrs;
void ir_topk_attrs(const Node *n, IrTopkAttrs *t);
/* The largest k kernel bodies select (k rounds of arg-best); lower-sort
 * makes any other topk of the last axis a rank sort. */
#define IR_TOPK_BODY_MAX 1024
/*
 * quantize and dequantize: axis: int = 1, block_size: int = 0, and the
 * layout of the scale (and zero point) that x's and the scale's dims give:
 * one element, one per index of axis, or one per block_size run of axis
 * (x's rank, every other dim x's).  Dims are static, or interned symbols.
 * 0, or -1 with why (a layout none of the three).
 */
typedef enum { IR_QUANT_TENSOR, IR_QUANT_AXIS, IR_QUANT_BLOCK } IrQuantLayout;
typedef struct {
	IrQuantLayout layout;
	int axis;		/* resolved against x's rank (ir_axis): -1 out of range */
	int64_t block_size;	/* 0: not blocked */
} IrQuantAttrs;
int ir_quant_attrs(const Node *n, int xrank, const int64_t *xdim, int srank, const int64_t *sdim,
		   IrQuantAttrs *q, char *why, size_t whylen);
/* A kernel's template (its "template" attribute, set by the fusion pass
 * that made it): what codegen compiles it with.  IR_TMPL_NONE when absent,
 * IR_TMPL_UNKNOWN for a name not in ir_template_names (the verifier refuses it). */
typedef enum {
	IR_TMPL_UNKNOWN = -1, IR_TMPL_NONE, IR_TMPL_GEMM, IR_TMPL_GROUPED_GEMM,
	IR_TMPL_ELEMENTWISE, IR_TMPL_ROW_REDUCE, IR_TMPL_ROUTE, IR_TMPL_PERMUTE, IR_NTMPL
} IrTemplate;
extern const char *const ir_template_names[IR_NTMPL];	/* "", "gemm", ... */
IrTemplate ir_kernel_template(const Graph *k);
void ir_set_kernel_template(Graph *k, IrTemplate t);
#define IR_NROUTE_ATTRS 9
extern const char *const ir_route_attr_names[IR_NROUTE_ATTRS];	/* what lower-moe copies to route */

/*
 * pred.c: facts about values and nodes, one meaning each.
 * ir_weight_only: v is computed from weights and constants alone (no call, no
 * data-dependent shape, a static type), so fold can evaluate it once at
 * compile time; past IR_WEIGHT_ONLY_VISITS values visited the answer is 0.
 * ir_is_view: n moves no data (a reshape).
 */
#define IR_WEIGHT_ONLY_VISITS 4096
int ir_weight_only(const Value *v);
int ir_is_view(const Node *n);
/* An axis attribute against a rank: negative counts from the end; -1 when out of range. */
int ir_axis(int64_t a, int rank);

/* eval_ew.c: x op y (y unused for unary ops; cast and identity: x), before rounding to a dtype. */
double ir_ew_scalar(Op op, const IrEwAttrs *a, double x, double y);

/* eval.c: the CPU reference interpreter */

/* Called after every node that ran (kernel bodies' too) with its operands
 * and results, e.g. to record routing decisions (ir_routing_of). */
typedef void EvalHook(void *ctx, const Node *n, const Tensor *const *in, const Tensor *out);

/* The other ranks of an expert-parallel run (eval_ep.c): all_to_all asks
 * exchange() for out[s] = rank s's in[rank].  NULL: one rank alone. */
#define IR_EP_MAX_RANKS 64
/* ep_pack's combine attribute (attrs.c): "slots" (the default: back[T*k], each
 * slot returned) 0, "sum" (back[T*N], one partial sum per token and rank) 1,
 * anything else -1. */
int ir_ep_sum(const Node *n);
typedef struct IrComm IrComm;
struct IrComm {
	int rank, size;
	int (*exchange)(const IrComm *c, const Tensor *in, Tensor *out, char *why, size_t n);
	void *ctx;
};

typedef struct {
	int64_t max_bytes;	/* per tensor; 0: TENSOR_MAX_BYTES */
	int trace;		/* print each node as it runs */
	EvalHook *hook;		/* NULL: none */
	void *hook_ctx;
	const IrComm *comm;	/* all_to_all's peers; NULL: ranks=1 only */
} EvalOpts;

/*
 * Run graph g on host tensors.  Inputs must match the parameters' dtypes and
 * ranks; symbolic dims are bound from them.  outs[0..nret) are allocated
 * here (caller frees with tensor_free).  Floats compute in f32, reductions
 * and matmuls accumulate in f64; every result is rounded to its dtype.
 */
int ir_eval(Graph *g, const Tensor *in, int nin, Tensor *out,
	    const EvalOpts *o, Diag *d);

/*
 * 1 if the interpreter defers dequantize node n: its operands are weights and
 * only moe's expert stacks read its result, so moe dequantises their rows as
 * it reads them (a full-size FP8 stack of DeepSeek-V3, 22.5 GB in bf16, is
 * never held).  Same numbers as running it: eval_quant.c's formula.
 */
int ir_eval_defers(const Graph *g, const Node *n);

/*
 * eval_ep.c: N ranks' graphs run together, one thread per rank, as N
 * processes on N GPUs would: each all_to_all meets the others' (emulated
 * NCCL).  in[r] holds rank r's nin inputs, out[r] gets its results.  0 ok;
 * -1 with a diagnostic naming the rank that failed first.
 */
int ir_eval_ranks(Graph *const *g, int nrank, Tensor *const *in, int nin, Tensor *const *out,
		  const EvalOpts *o, Diag *d);

/* eval_moe.c: the routing decision of a node that ran: route and moe (the
 * router's logits, or scores for a sigmoid router, and the experts chosen)
 * and a top-k over the last axis of a [T,E] value (an exported router).
 * 1 recorded in *r (free with routing_free), 0 not a routing node. */
int ir_routing_of(const Node *n, const Tensor *const *in, const Tensor *out, Routing *r);

/* An EvalHook that appends the routing decisions to a RouteLog (util.h). */
void ir_route_log_hook(void *log, const Node *n, const Tensor *const *in, const Tensor *out);

#endif
