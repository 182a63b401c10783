/*
 * onnx_int.h — what the files of the ONNX importer share: the import
 * context, the per-value record (an IR value and/or a value known at import
 * time), node views for the per-op importers, and helpers.  Only frontend's
 * onnx*.c include it; it is the one place protobuf-c types meet the IR.
 *
 *	onnx.c		model, opsets, graph, nodes, functions, diagnostics
 *	onnx_value.c	value table, input types, value_info checks, consts/weights
 *	onnx_tensor.c	TensorProto -> bytes (raw, typed, external data)
 *	onnx_node.c	the node view: attributes, inputs, outputs, constants
 *	onnx_ops.c	the op table and elementwise/math/norm/matmul importers
 *	onnx_fold.c	values known at import and the integer arithmetic over them
 *	onnx_shape.c	Shape, Gather, Concat, Slice, Expand, Range, Split ... importers
 *	onnx_reshape.c	Reshape, Flatten, Squeeze, Unsqueeze
 *	onnx_quant.c	Quantize/DequantizeLinear, com.microsoft ops
 *	onnx_einsum.c	Einsum as transpose/reshape/matmul
 *	onnx_qop.c	the QOperator format (QLinearMatMul, QGemm, QLinear*)
 */
#ifndef MOEC_ONNX_INT_H
#define MOEC_ONNX_INT_H

#include "frontend.h"
#include "onnx.pb-c.h"

#define OX_OPSET_MIN 11		/* default domain: 11 and 12 read as 13 (ox_find_op) */
#define OX_MAX_FN_DEPTH 16	/* local functions calling functions */
#define OX_CONST_MAX 16		/* initializers up to this many elements become const nodes */
#define OX_KNOWN_MAX 1024	/* integer tensors tracked elementwise at import */
#define OX_KNOWN_FMAX 16	/* float tensors tracked elementwise at import */

/*
 * An integer element known at import time: a plain number, a symbolic dim
 * (an IR Dim < 0 over named symbols, e.g. batch*seq), or unknown.
 */
enum { SI_NUM, SI_DIM, SI_UNK };
typedef struct {
	int64_t v;		/* SI_NUM: the number; SI_DIM: the Dim */
	int kind;
} SInt;

/* A tensor (partly) known at import: static shape, small. */
typedef struct {
	DType dt;
	int rank;
	int64_t dim[MAXRANK];
	int64_t n;		/* elements */
	SInt *iv;		/* integer and bool types */
	double *fv;		/* float types: always fully known */
} Known;

/* One ONNX value name. */
typedef struct OVal OVal;
struct OVal {
	const char *name;	/* ONNX name (interned) */
	Value *v;		/* IR value; NULL until materialised (small constants) */
	Known *k;		/* what is known at import, or NULL */
	Type type;		/* type when v is NULL */
	int bad;		/* its producer failed: dependants are skipped */
	Value **seq;		/* a sequence (onnx_seq.c): its tensors, nseq of them */
	int nseq;
	int state;		/* 0 unset, 1 defined */
};

typedef struct Ctx Ctx;
struct Ctx {
	Module *m;
	Graph *g;
	Builder b;
	Diag *d;
	const FeOpts *o;
	const char *file;	/* the model path, for diagnostics (interned) */
	char *dir;		/* the model's folder, for external data (malloc'd) */
	Arena *tmp;		/* Known values and scratch; freed after import */
	int opset;		/* default domain */
	int msopset;		/* com.microsoft, 0 if not imported */
	OVal **tab;		/* open-addressed map name -> OVal */
	size_t ntab, captab;
	Onnx__ValueInfoProto **vinfo;	/* value_info and outputs by name */
	size_t nvinfo;
	const Onnx__ModelProto *model;
	Onnx__FunctionProto **fns;	/* model-local functions, sorted */
	int depth;		/* function expansion depth */
	int site;		/* index of the body node being expanded (depth > 0) */
	int initializers;	/* binding the graph's initializers (their raw_data may be taken) */
	const char *prefix;	/* value name prefix inside an expanded function */
	int64_t max_bytes;
	uint64_t host_bytes, max_host;	/* tensor data read so far; its budget */
	int64_t max_nodes;	/* nodes after function expansion */
	const Tensor *bind;	/* graph inputs bound to constants */
	int nbind;
};

/* A node as a per-op importer sees it. */
typedef struct ONode ONode;
struct ONode {
	Ctx *c;
	const Onnx__NodeProto *np;
	int index;
	int opset;		/* version of the node's domain */
	OVal **in;		/* NULL: an absent optional input */
	int nin;
	OVal **out;		/* NULL: an output the model does not name */
	int nout;
	Builder *b;
	Loc loc;
};

typedef int ImportFn(ONode *n);

typedef struct {
	const char *domain, *op;
	int minver;		/* first opset of this importer */
	ImportFn *fn;
	int minin, maxin;	/* inputs that must be present; accepted (-1: any) */
} OpEntry;

/* onnx.c */
int ox_err(ONode *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ox_field_err(Ctx *c, Loc l, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
Loc ox_field(Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ox_import_node(Ctx *c, const Onnx__NodeProto *np, int index);

/* onnx_value.c */
OVal *ox_find(Ctx *c, const char *name);
OVal *ox_define(Ctx *c, const char *name);	/* NULL if already defined */
Value *ox_value(Ctx *c, OVal *o);	/* materialise (const or weight) */
const Type *ox_type(const OVal *o);
void ox_index_vinfo(Ctx *c, const Onnx__GraphProto *gp);
int ox_input_type(Ctx *c, const Onnx__ValueInfoProto *vi, Loc l, Type *t);
int ox_check_declared(Ctx *c, OVal *o, Loc l);

/* onnx_node.c */
const Onnx__AttributeProto *ox_attr(const ONode *n, const char *name);
int64_t ox_attr_i(const ONode *n, const char *name, int64_t def);
double ox_attr_f(const ONode *n, const char *name, double def);
const char *ox_attr_s(const ONode *n, const char *name, const char *def);
int ox_attr_ints(const ONode *n, const char *name, int64_t *out, int max);
Value *ox_in(ONode *n, int i);	/* materialised input i, NULL if absent */
int ox_has(const ONode *n, int i);
const Known *ox_kin(const ONode *n, int i);	/* what is known of input i */
const Type *ox_tin(const ONode *n, int i);
int ox_set(ONode *n, int i, Value *v);	/* result i of the node; -1 if v is NULL */
void ox_set_known(ONode *n, int i, Known *k);	/* lazily materialised */
void ox_alias(ONode *n, int i, OVal *src);
int ox_done(ONode *n, int i, Known *k, Value *v);	/* known: lazy; else v plus k */
Value *ox_const(Builder *b, const Known *k);	/* a const node (<= OX_CONST_MAX) */
Value *ox_scalar(Builder *b, DType dt, double v);
Value *ox_consti(Builder *b, const int64_t *v, int n);	/* i64[n] */
int ox_axis(ONode *n, int64_t axis, int rank, int64_t *out);

/* onnx.c: opset < 13 nodes with an attribute 13 made an input */
int ox_legacy(ONode *n);

/* onnx_ops.c */
const OpEntry *ox_find_op(const char *domain, const char *op, int opset);
int ox_op_known(const char *domain, const char *op);

/* onnx_tensor.c */
int ox_tensor_type(Ctx *c, const Onnx__TensorProto *t, Loc loc, Type *ty);
/* The tensor's bytes in IR layout (malloc'd, *size bytes); -1 with a diagnostic. */
int ox_tensor_data(Ctx *c, const Onnx__TensorProto *t, Loc loc, const Type *ty,
		   void **data, size_t *size);
Known *ox_known_from_data(Ctx *c, const Type *ty, const void *data);
/* An initializer or Constant value: a lazily built const, or a weight. */
int ox_bind_tensor(Ctx *c, OVal *o, const Onnx__TensorProto *t, Loc loc, const char *wname);
int ox_bind_host(Ctx *c, OVal *o, const Tensor *t);

/* onnx_fold.c */
Known *ox_known_new(Ctx *c, DType dt, int rank, const int64_t *dim);
int ox_known_static(const Known *k);	/* every element a number */
int ox_known_ints(const Known *k, int64_t *out, int max);	/* static ints; -1 if not */
int ox_known_dims(Ctx *c, const Known *k, Dim *out, int max);	/* >= 0 dims; -1 if not */
Known *ox_known_shape_of(Ctx *c, const Type *t);
Known *ox_known_or_unk(Ctx *c, const OVal *o);	/* all-unknown if nothing is known */
Known *ox_known_reshape(Ctx *c, const Known *a, int rank, const int64_t *dim);
Known *ox_known_expand(Ctx *c, const Known *a, int rank, const int64_t *dim);
Known *ox_fold_binary(Ctx *c, const char *op, const Known *a, const Known *b);
Known *ox_fold_unary(Ctx *c, const char *op, const Known *a, DType to);
Known *ox_fold_where(Ctx *c, const Known *cond, const Known *x, const Known *y);
SInt ox_si_div(Module *m, SInt a, SInt b);
SInt ox_si_dim(Module *m, Dim d);	/* a number, a symbolic dim or unknown */
SInt ox_dim_prod(Module *m, const Type *t, int from, int to);
Known *ox_kor(ONode *n, int i);	/* ox_known_or_unk of input i */
int ox_dims_ok(ONode *n, int rank, const Dim *dims);	/* < 2^48 elements */
int ox_refine(Ctx *c, Value *v, const Type *want);	/* fill "?" dims of v */

/* onnx_shape.c */
ImportFn imp_shape, imp_size, imp_gather, imp_concat, imp_slice, imp_expand, imp_tile,
	imp_range, imp_constant_of_shape, imp_split, imp_transpose, imp_where;

/* onnx_reshape.c */
int ox_same_dims(const Type *t, int rank, const Dim *dims);
ImportFn imp_reshape, imp_flatten, imp_squeeze, imp_unsqueeze;

/* onnx_quant.c */
int ox_reads_seq(const char *domain, const char *op);	/* onnx_seq.c */
int ox_split_by_data(ONode *n, Value *x, Value *sz, int64_t axis, int k, Value **out);
ImportFn imp_split_to_sequence, imp_sequence_construct, imp_sequence_insert, imp_sequence_at,
	imp_sequence_length, imp_concat_from_sequence;
ImportFn imp_quantize, imp_dequantize, imp_dynamic_quantize, imp_matmul_integer, imp_ms_matmul_nbits, imp_ms_moe, imp_ms_qmoe;

/* onnx_qop.c */
ImportFn imp_qlinear_matmul, imp_ms_qgemm, imp_ms_qlinear_binary, imp_ms_qlinear_unary,
	imp_ms_qlinear_concat, imp_ms_qlinear_where;

/* onnx_ms.c */
ImportFn imp_ms_simplified_ln, imp_ms_skip_simplified_ln, imp_ms_skip_ln, imp_ms_gelu,
	imp_ms_fast_gelu, imp_ms_quick_gelu, imp_ms_fused_matmul;

/* onnx_einsum.c */
ImportFn imp_einsum;

#endif
