/*
 * check_onnx.c — the ONNX importer: models built in memory with the
 * generated protobuf-c types, so each test states exactly what is wrong
 * with its model.  Bad input must give a diagnostic that names the node
 * (index, name, op type) or field, and never crash: truncations and byte
 * corruptions of a real model run in the forked test process.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend.h"
#include "onnx.pb-c.h"

/* --- building models ----------------------------------------------------- */

static Arena *A;	/* everything a test builds; freed by teardown */

static void
setup(void)
{
	A = arena_new(0);
}

static void
teardown(void)
{
	arena_free(A);
}

static char **
strs(int n, const char *const *s)
{
	char **v = arena_array(A, char *, n + 1);

	for (int i = 0; i < n; i++)
		v[i] = arena_strdup(A, s[i]);
	return v;
}

#define STRS(...) strs(NELEM(((const char *[]){__VA_ARGS__})), (const char *[]){__VA_ARGS__})
#define NSTRS(...) NELEM(((const char *[]){__VA_ARGS__}))

static Onnx__NodeProto *
node(const char *op, const char *name, int nin, char **in, int nout, char **out)
{
	Onnx__NodeProto *n = arena_alloc(A, sizeof *n);

	onnx__node_proto__init(n);
	n->op_type = arena_strdup(A, op);
	n->name = arena_strdup(A, name);
	n->n_input = (size_t)nin;
	n->input = in;
	n->n_output = (size_t)nout;
	n->output = out;
	return n;
}

#define NODE(op, name, IN, OUT) node(op, name, (int)IN##_n, IN, (int)OUT##_n, OUT)

static void
attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = arena_alloc(A, sizeof *a);
	Onnx__AttributeProto **arr = arena_array(A, Onnx__AttributeProto *, n->n_attribute + 1);

	onnx__attribute_proto__init(a);
	a->name = arena_strdup(A, name);
	a->has_type = 1;
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	a->has_i = 1;
	a->i = v;
	if (n->n_attribute)
		memcpy(arr, n->attribute, sizeof *arr * n->n_attribute);
	arr[n->n_attribute++] = a;
	n->attribute = arr;
}

static void
attr_float(Onnx__NodeProto *n, const char *name, float v)
{
	attr_int(n, name, 0);
	Onnx__AttributeProto *a = n->attribute[n->n_attribute - 1];
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
	a->has_i = 0;
	a->has_f = 1;
	a->f = v;
}

/* A tensor value_info; dims >= 0 are sizes, -1 a dim_param "batch", -2 none. */
static Onnx__ValueInfoProto *
value(const char *name, int elem, int rank, const int64_t *dims)
{
	Onnx__ValueInfoProto *v = arena_alloc(A, sizeof *v);
	Onnx__TypeProto *tp = arena_alloc(A, sizeof *tp);
	Onnx__TypeProto__Tensor *tt = arena_alloc(A, sizeof *tt);
	Onnx__TensorShapeProto *sp = arena_alloc(A, sizeof *sp);

	onnx__value_info_proto__init(v);
	onnx__type_proto__init(tp);
	onnx__type_proto__tensor__init(tt);
	onnx__tensor_shape_proto__init(sp);
	v->name = arena_strdup(A, name);
	v->type = tp;
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tp->tensor_type = tt;
	tt->has_elem_type = 1;
	tt->elem_type = elem;
	tt->shape = sp;
	sp->n_dim = (size_t)rank;
	sp->dim = arena_array(A, Onnx__TensorShapeProto__Dimension *, rank + 1);
	for (int i = 0; i < rank; i++) {
		Onnx__TensorShapeProto__Dimension *d = arena_alloc(A, sizeof *d);
		onnx__tensor_shape_proto__dimension__init(d);
		if (dims[i] >= 0) {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			d->dim_value = dims[i];
		} else if (dims[i] == -1) {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			d->dim_param = arena_strdup(A, "batch");
		}
		sp->dim[i] = d;
	}
	return v;
}

static Onnx__TensorProto *
tensor(const char *name, int dt, int rank, const int64_t *dims, const void *raw, size_t len)
{
	Onnx__TensorProto *t = arena_alloc(A, sizeof *t);

	onnx__tensor_proto__init(t);
	t->name = arena_strdup(A, name);
	t->has_data_type = 1;
	t->data_type = dt;
	t->n_dims = (size_t)rank;
	t->dims = arena_array(A, int64_t, rank + 1);
	if (rank)
		memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
	if (raw) {
		t->has_raw_data = 1;
		t->raw_data.len = len;
		t->raw_data.data = arena_alloc(A, len + 1);
		memcpy(t->raw_data.data, raw, len);
	}
	return t;
}

typedef struct {
	Onnx__ModelProto m;
	Onnx__GraphProto g;
	Onnx__OperatorSetIdProto os, *osp[1];
	Onnx__NodeProto *node[16];
	Onnx__ValueInfoProto *in[8], *out[8], *vi[8];
	Onnx__TensorProto *init[8];
} Model;

static Model *
model(int opset)
{
	Model *m = arena_alloc(A, sizeof *m);

	onnx__model_proto__init(&m->m);
	onnx__graph_proto__init(&m->g);
	onnx__operator_set_id_proto__init(&m->os);
	m->m.has_ir_version = 1;
	m->m.ir_version = 8;
	m->m.graph = &m->g;
	m->g.name = arena_strdup(A, "g");
	m->os.domain = arena_strdup(A, "");
	m->os.has_version = 1;
	m->os.version = opset;
	m->osp[0] = &m->os;
	m->m.n_opset_import = 1;
	m->m.opset_import = m->osp;
	m->g.node = m->node;
	m->g.input = m->in;
	m->g.output = m->out;
	m->g.value_info = m->vi;
	m->g.initializer = m->init;
	return m;
}

static uint8_t *
pack(Model *m, size_t *len)
{
	uint8_t *buf;

	*len = onnx__model_proto__get_packed_size(&m->m);
	buf = arena_alloc(A, *len + 1);
	onnx__model_proto__pack(&m->m, buf);
	return buf;
}

/* Import; the diagnostics' text goes to *err (arena), NULL module on error. */
static Module *
import(Model *m, char **err)
{
	size_t len, n;
	uint8_t *buf = pack(m, &len);
	char *text = NULL;
	FILE *f = open_memstream(&text, &n);
	FeOpts o;
	Diag d;
	Module *mod;

	fe_default_opts(&o);
	diag_init(&d, f);
	mod = onnx_import_buffer("model.onnx", buf, len, &o, &d);
	fclose(f);
	*err = arena_strdup(A, text ? text : "");
	free(text);
	return mod;
}

static char *
print_module(Module *m)
{
	char *s = ir_print_string(m, 0), *r = arena_strdup(A, s);

	free(s);
	return r;
}

/* x: f32[batch, 8] -> MatMul with w: f32[8, 3] -> y */
static Model *
matmul_model(int with_w)
{
	Model *m = model(18);
	static const int64_t xd[2] = {-1, 8}, wd[2] = {8, 3}, yd[2] = {-1, 3};
	float w[24] = {0};
	char **in = STRS("x", "w"), **out = STRS("y");

	m->in[m->g.n_input++] = value("x", 1, 2, xd);
	m->out[m->g.n_output++] = value("y", 1, 2, yd);
	if (with_w)
		m->init[m->g.n_initializer++] = tensor("w", 1, 2, wd, w, sizeof w);
	m->node[m->g.n_node++] = node("MatMul", "/mm/MatMul", 2, in, 1, out);
	return m;
}

/* --- good models --------------------------------------------------------- */

START_TEST(test_onnx_matmul_imports_with_symbolic_dims)
{
	char *err;
	Module *mod = import(matmul_model(1), &err);
	char *ir;

	ck_assert_msg(mod != NULL, "%s", err);
	ir = print_module(mod);
	ck_assert_msg(strstr(ir, "%x: f32[batch,8]"), "%s", ir);
	ck_assert_msg(strstr(ir, "%y = matmul %x, $w : f32[batch,3]"), "%s", ir);
	ir_free_module(mod);
}
END_TEST

START_TEST(test_onnx_missing_dim_gets_a_named_symbol)
{
	Model *m = matmul_model(1);
	static const int64_t xd[2] = {-2, 8};
	char *err;
	Module *mod;

	m->in[0] = value("x", 1, 2, xd);
	mod = import(m, &err);
	ck_assert_msg(mod != NULL, "%s", err);
	ck_assert_msg(strstr(print_module(mod), "%x: f32[x_d0,8]"), "%s", print_module(mod));
	ir_free_module(mod);
}
END_TEST

START_TEST(test_onnx_large_initializer_is_a_weight_with_data)
{
	Model *m = matmul_model(1);
	char *err;
	Module *mod;
	Weight *w;

	m->init[0]->raw_data.data[0] = 0x3f;	/* bytes survive as given */
	mod = import(m, &err);
	ck_assert_msg(mod != NULL, "%s", err);
	ck_assert_int_eq(mod->nweight, 1);
	w = mod->weight[0];
	ck_assert_str_eq(w->value->name, "w");
	ck_assert_uint_eq(w->size, 96);
	ck_assert_ptr_nonnull(w->data);
	ck_assert_int_eq(((unsigned char *)w->data)[0], 0x3f);
	ir_free_module(mod);
}
END_TEST

/* Shape -> Gather -> Unsqueeze -> Concat -> Reshape folds to an attribute. */
START_TEST(test_onnx_shape_chain_folds_to_symbolic_reshape)
{
	Model *m = model(18);
	static const int64_t xd[3] = {-1, 2, 4}, yd[2] = {-1, 8}, s0[1] = {1};
	int64_t zero = 0, eight = 8, ax = 0;
	char *err, *ir;
	Module *mod;

	m->in[m->g.n_input++] = value("x", 1, 3, xd);
	m->out[m->g.n_output++] = value("y", 1, 2, yd);
	m->init[m->g.n_initializer++] = tensor("i0", 7, 0, NULL, &zero, 8);
	m->init[m->g.n_initializer++] = tensor("c8", 7, 1, s0, &eight, 8);
	m->init[m->g.n_initializer++] = tensor("ax", 7, 1, s0, &ax, 8);
	m->node[m->g.n_node++] = node("Shape", "s", 1, STRS("x"), 1, STRS("sh"));
	m->node[m->g.n_node++] = node("Gather", "g", 2, STRS("sh", "i0"), 1, STRS("b"));
	m->node[m->g.n_node++] = node("Unsqueeze", "u", 2, STRS("b", "ax"), 1, STRS("b1"));
	m->node[m->g.n_node++] = node("Concat", "c", 2, STRS("b1", "c8"), 1, STRS("shape"));
	attr_int(m->node[3], "axis", 0);
	m->node[m->g.n_node++] = node("Reshape", "r", 2, STRS("x", "shape"), 1, STRS("y"));
	mod = import(m, &err);
	ck_assert_msg(mod != NULL, "%s", err);
	ir = print_module(mod);
	ck_assert_msg(strstr(ir, "%y = reshape %x, shape=[batch, 8] : f32[batch,8]"), "%s", ir);
	ck_assert_msg(!strstr(ir, "= shape ") && !strstr(ir, "gather"), "%s", ir);
	ir_free_module(mod);
}
END_TEST

/* Every IR dtype from raw_data: the weight holds the same bytes. */
START_TEST(test_onnx_every_dtype_from_raw_data)
{
	static const int codes[] = {1, 10, 16, 17, 19, 11, 7, 6, 5, 3, 2, 22, 21, 9};
	unsigned char raw[8 * 20];

	for (size_t i = 0; i < sizeof raw; i++)
		raw[i] = (unsigned char)(i * 7 + 1) & (i % 2 ? 0x7f : 0x01);
	for (size_t c = 0; c < NELEM(codes); c++) {
		Model *m = model(18);
		DType dt;
		int64_t d[1] = {20};
		char *err;
		Module *mod;

		ck_assert_int_eq(dtype_from_onnx(codes[c], &dt), 0);
		size_t n = dtype_bytes(dt, 20);
		if (dt == DT_BOOL)
			memset(raw, 1, n);
		m->init[m->g.n_initializer++] = tensor("w", codes[c], 1, d, raw, n);
		m->out[m->g.n_output++] = value("w", codes[c], 1, d);
		mod = import(m, &err);
		ck_assert_msg(mod != NULL, "%s: %s", dtype_name(dt), err);
		ck_assert_int_eq(mod->nweight, 1);
		ck_assert_int_eq(mod->weight[0]->value->type.dt, dt);
		ck_assert_uint_eq(mod->weight[0]->size, n);
		ck_assert(memcmp(mod->weight[0]->data, raw, n) == 0);
		ir_free_module(mod);
	}
}
END_TEST

/* A large raw_data initializer: its buffer is taken, not copied. */
START_TEST(test_onnx_large_raw_initializer)
{
	Model *m = model(18);
	int64_t d[2] = {512, 1024};
	size_t n = 512 * 1024;
	float *w = xmalloc(n * 4);
	char *err;
	Module *mod;

	for (size_t i = 0; i < n; i++)
		w[i] = (float)i;
	m->init[m->g.n_initializer++] = tensor("w", 1, 2, d, w, n * 4);
	m->out[m->g.n_output++] = value("w", 1, 2, d);
	mod = import(m, &err);
	ck_assert_msg(mod != NULL, "%s", err);
	ck_assert_uint_eq(mod->weight[0]->size, n * 4);
	ck_assert(memcmp(mod->weight[0]->data, w, n * 4) == 0);
	ir_free_module(mod);
	free(w);
}
END_TEST

START_TEST(test_onnx_typed_fields_decode)
{
	Model *m = model(18);
	int64_t d[1] = {20};
	int32_t *h = arena_array(A, int32_t, 20);
	char *err;
	Module *mod;
	Onnx__TensorProto *t = tensor("w", 10, 1, d, NULL, 0);	/* f16 in int32_data */

	for (int i = 0; i < 20; i++)
		h[i] = 0x3c00;	/* 1.0 */
	t->n_int32_data = 20;
	t->int32_data = h;
	m->init[m->g.n_initializer++] = t;
	m->out[m->g.n_output++] = value("w", 10, 1, d);
	mod = import(m, &err);
	ck_assert_msg(mod != NULL, "%s", err);
	ck_assert_int_eq(((uint16_t *)mod->weight[0]->data)[19], 0x3c00);
	ir_free_module(mod);
}
END_TEST

/* --- bad models ---------------------------------------------------------- */

START_TEST(test_onnx_missing_initializer_names_the_node)
{
	char *err;

	ck_assert_ptr_null(import(matmul_model(0), &err));
	ck_assert_msg(strstr(err, "model.onnx: node 0 '/mm/MatMul' (MatMul): error: input 'w' is "
			     "not defined"), "%s", err);
}
END_TEST

START_TEST(test_onnx_every_unsupported_op_is_listed)
{
	Model *m = matmul_model(1);
	char *err;

	m->node[m->g.n_node++] = node("Foo", "f1", 1, STRS("y"), 1, STRS("a"));
	m->node[m->g.n_node++] = node("Bar", "b1", 1, STRS("a"), 1, STRS("b"));
	m->node[m->g.n_node++] = node("Foo", "f2", 1, STRS("b"), 1, STRS("c"));
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "node 1 'f1' (Foo): error: unsupported operator Foo"), "%s", err);
	ck_assert_msg(strstr(err, "node 1 'f1' (Foo): note: 2 nodes use it"), "%s", err);
	ck_assert_msg(strstr(err, "node 2 'b1' (Bar): error: unsupported operator Bar"), "%s", err);
	ck_assert_msg(!strstr(err, "'f2'"), "%s", err);
}
END_TEST

START_TEST(test_onnx_opset_outside_11_to_23)
{
	Model *m = matmul_model(1);
	Module *mod;
	char *err;

	m->os.version = 12;	/* read as 13 since session 35 */
	mod = import(m, &err);
	ck_assert_ptr_nonnull(mod);
	ir_free_module(mod);
	m->os.version = 10;
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "opset 10 of the default domain is not supported (11 to 23 are)"), "%s", err);
	m->os.version = 24;
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "opset 24"), "%s", err);
}
END_TEST

START_TEST(test_onnx_op_newer_than_opset)
{
	Model *m = matmul_model(1);
	char *err;

	m->os.version = 17;
	m->node[m->g.n_node++] = node("Gelu", "act", 1, STRS("y"), 1, STRS("z"));
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "(Gelu): error: operator Gelu needs a newer opset than 17"),
		      "%s", err);
}
END_TEST

START_TEST(test_onnx_raw_data_length_mismatch)
{
	Model *m = matmul_model(1);
	char *err;

	m->init[0]->raw_data.len = 40;
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "initializer 'w': error: raw_data holds 40 bytes, its dims "
			     "need 96"), "%s", err);
}
END_TEST

START_TEST(test_onnx_absurd_dims)
{
	Model *m = matmul_model(1);
	char *err;

	m->init[0]->dims[0] = (int64_t)1 << 40;
	m->init[0]->dims[1] = (int64_t)1 << 40;
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "initializer 'w': error: tensor dims overflow"), "%s", err);
	m->init[0]->dims[0] = -4;
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "negative"), "%s", err);
}
END_TEST

START_TEST(test_onnx_typed_count_mismatch_allocates_nothing)
{
	Model *m = model(18);
	int64_t d[1] = {(int64_t)1 << 34};	/* 64 GiB of f32, declared */
	char *err;

	m->init[m->g.n_initializer++] = tensor("w", 1, 1, d, NULL, 0);
	m->out[m->g.n_output++] = value("w", 1, 1, d);
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "tensor holds 0 values") || strstr(err, "size limit"), "%s", err);
}
END_TEST

static Onnx__StringStringEntryProto *
entry(const char *k, const char *v)
{
	Onnx__StringStringEntryProto *e = arena_alloc(A, sizeof *e);

	onnx__string_string_entry_proto__init(e);
	e->key = arena_strdup(A, k);
	e->value = arena_strdup(A, v);
	return e;
}

static void
make_external(Onnx__TensorProto *t, const char *loc, const char *off)
{
	t->has_raw_data = 0;
	t->has_data_location = 1;
	t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	t->n_external_data = 2;
	t->external_data = arena_array(A, Onnx__StringStringEntryProto *, 2);
	t->external_data[0] = entry("location", loc);
	t->external_data[1] = entry("offset", off);
}

START_TEST(test_onnx_external_paths_must_stay_in_the_folder)
{
	static const char *bad[] = {"../w.bin", "/etc/passwd", "a/../../w.bin", ""};

	for (size_t i = 0; i < NELEM(bad); i++) {
		Model *m = matmul_model(1);
		char *err;
		make_external(m->init[0], bad[i], "0");
		ck_assert_ptr_null(import(m, &err));
		ck_assert_msg(strstr(err, "initializer 'w': error: external data") &&
			      (strstr(err, "leaves the model's folder") || strstr(err, "location")),
			      "%s: %s", bad[i], err);
	}
}
END_TEST

START_TEST(test_onnx_external_range_beyond_the_file)
{
	char dir[] = "/tmp/check_onnx_XXXXXX", path[64], model[64];
	Model *m = matmul_model(1);
	float w[24] = {1};
	size_t len;
	uint8_t *buf;
	FeOpts o;
	Diag d;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/w.bin", dir);
	snprintf(model, sizeof model, "%s/model.onnx", dir);
	f = fopen(path, "wb");
	fwrite(w, 1, sizeof w, f);
	fclose(f);
	make_external(m->init[0], "w.bin", "8");	/* 96 bytes from 8: past the end */
	buf = pack(m, &len);
	fe_default_opts(&o);
	diag_init(&d, NULL);
	ck_assert_ptr_null(onnx_import_buffer(model, buf, len, &o, &d));
	ck_assert_msg(strstr(d.last, "exceeds 'w.bin' (96 bytes)"), "%s", d.last);
	make_external(m->init[0], "w.bin", "0");	/* the whole file: fine */
	buf = pack(m, &len);
	Module *mod = onnx_import_buffer(model, buf, len, &o, &d);
	ck_assert_msg(mod != NULL, "%s", d.last);
	ck_assert(((float *)mod->weight[0]->data)[0] == 1);
	ir_free_module(mod);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* External data through a link to a FIFO: refused at once, not waited on. */
START_TEST(test_onnx_external_data_fifo_is_refused)
{
	char dir[] = "/tmp/check_onnx_XXXXXX", fifo[64], link[64], model[64];
	Model *m = matmul_model(1);
	size_t len;
	uint8_t *buf;
	FeOpts o;
	Diag d;

	alarm(20);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	snprintf(link, sizeof link, "%s/w.bin", dir);
	snprintf(model, sizeof model, "%s/model.onnx", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	ck_assert_int_eq(symlink("fifo", link), 0);
	make_external(m->init[0], "w.bin", "0");
	buf = pack(m, &len);
	fe_default_opts(&o);
	diag_init(&d, NULL);
	ck_assert_ptr_null(onnx_import_buffer(model, buf, len, &o, &d));
	ck_assert_int_eq(d.nerror, 2);	/* why, then which initializer */
	ck_assert_msg(strstr(d.last, "initializer 'w': cannot read external data file"),
		      "%s", d.last);
	unlink(link);
	unlink(fifo);
	rmdir(dir);
	alarm(0);
}
END_TEST

/* External data offsets: decimal digits within 64 bits, never saturated or wrapped. */
START_TEST(test_onnx_external_offset_out_of_range)
{
	static const char *bad[] = {"18446744073709551616", "99999999999999999999999", "+5", " 5",
				    "-1", "0x10", ""};

	for (size_t i = 0; i < NELEM(bad); i++) {
		Model *m = matmul_model(1);
		char *err;
		make_external(m->init[0], "w.bin", bad[i]);
		ck_assert_ptr_null(import(m, &err));
		ck_assert_msg(strstr(err, "initializer 'w': error: external data offset") &&
			      strstr(err, "is not a number"), "'%s': %s", bad[i], err);
	}
}
END_TEST

/* ONNX's SSA rule: a name is listed once among the graph inputs. */
START_TEST(test_onnx_duplicate_graph_input)
{
	Model *m = matmul_model(1);
	static const int64_t xd[2] = {4, 8};
	char *err;

	m->in[m->g.n_input++] = value("x", 1, 2, xd);
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "model.onnx: graph input 'x': error: listed twice among the "
			     "graph inputs"), "%s", err);
}
END_TEST

/* "Relu\0evil" would be read as "Relu": a NUL in any string field is refused. */
START_TEST(test_onnx_nul_in_a_string_field)
{
	Model *m = matmul_model(1);
	size_t len;
	uint8_t *buf, *hit;
	FeOpts o;
	Diag d;

	m->node[0]->op_type = arena_strdup(A, "MatMulXevil");
	buf = pack(m, &len);
	hit = memmem(buf, len, "MatMulXevil", 11);
	ck_assert_ptr_nonnull(hit);
	hit[6] = 0;
	fe_default_opts(&o);
	diag_init(&d, NULL);
	ck_assert_ptr_null(onnx_import_buffer("model.onnx", buf, len, &o, &d));
	ck_assert_msg(strstr(d.last, "model.onnx: a string field (NodeProto.op_type) "
			     "holds a NUL byte"), "%s", d.last);
}
END_TEST

/* A node name with a newline cannot forge a diagnostic line of its own. */
START_TEST(test_onnx_newline_in_a_name_is_escaped)
{
	Model *m = matmul_model(1);
	char *err;

	m->node[m->g.n_node++] = node("Foo", "f\nmodel.onnx: error: forged", 1, STRS("y"), 1,
				      STRS("a"));
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "node 1 'f\\nmodel.onnx: error: forged' (Foo): error: "
			     "unsupported operator Foo"), "%s", err);
	ck_assert_msg(!strstr(err, "\nmodel.onnx: error: forged"), "%s", err);
}
END_TEST

START_TEST(test_onnx_value_info_contradiction)
{
	Model *m = matmul_model(1);
	static const int64_t wrong[2] = {-1, 5};	/* y is [batch,3] */
	char *err;

	m->out[0] = value("y", 1, 2, wrong);
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "'y' is declared f32[batch,5] but computes f32[batch,3]"), "%s",
		      err);
}
END_TEST

START_TEST(test_onnx_dangling_output_and_double_definition)
{
	Model *m = matmul_model(1);
	char *err;

	m->out[m->g.n_output++] = value("nowhere", 1, 0, NULL);
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "graph output 'nowhere': error: no node, input or initializer "
			     "defines it"), "%s", err);
	m = matmul_model(1);
	m->node[m->g.n_node++] = node("Relu", "again", 1, STRS("x"), 1, STRS("y"));
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "node 1 'again' (Relu): error: output 'y' is defined twice"),
		      "%s", err);
}
END_TEST

START_TEST(test_onnx_independent_errors_are_all_reported)
{
	Model *m = model(18);
	static const int64_t xd[2] = {2, 3};
	char *err;

	m->in[m->g.n_input++] = value("x", 1, 2, xd);
	m->node[m->g.n_node++] = node("MatMul", "bad1", 2, STRS("x", "x"), 1, STRS("a"));
	m->node[m->g.n_node++] = node("Relu", "dep", 1, STRS("a"), 1, STRS("b"));
	m->node[m->g.n_node++] = node("Transpose", "bad2", 1, STRS("x"), 1, STRS("c"));
	attr_int(m->node[2], "perm", 0);
	m->node[2]->attribute[0]->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
	m->node[2]->attribute[0]->has_i = 0;
	m->node[2]->attribute[0]->n_ints = 3;
	m->node[2]->attribute[0]->ints = arena_array(A, int64_t, 3);
	m->out[m->g.n_output++] = value("b", 1, 0, NULL);
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "node 0 'bad1' (MatMul): error: matmul: inner dims differ"), "%s",
		      err);
	ck_assert_msg(strstr(err, "node 2 'bad2' (Transpose)"), "%s", err);
	ck_assert_msg(!strstr(err, "'dep'"), "%s", err);
}
END_TEST

START_TEST(test_onnx_attribute_of_the_wrong_kind)
{
	Model *m = matmul_model(1);
	char *err;

	m->node[m->g.n_node++] = node("Softmax", "sm", 1, STRS("y"), 1, STRS("z"));
	attr_float(m->node[1], "axis", 1.5f);
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "node 1 'sm' (Softmax): error: attribute 'axis' must be an "
			     "integer"), "%s", err);
}
END_TEST

START_TEST(test_onnx_unsupported_element_type)
{
	Model *m = matmul_model(1);
	static const int64_t xd[2] = {2, 4};
	char *err;

	m->in[0] = value("x", 12, 2, xd);	/* uint32 (uint16 is read since session 35) */
	ck_assert_ptr_null(import(m, &err));
	ck_assert_msg(strstr(err, "graph input 'x': error: unsupported element type 12"), "%s", err);
}
END_TEST

START_TEST(test_onnx_not_a_model)
{
	static const char junk[] = "\xff\xff\xff\xff this is not a protobuf";
	FeOpts o;
	Diag d;

	fe_default_opts(&o);
	diag_init(&d, NULL);
	ck_assert_ptr_null(onnx_import_buffer("junk.onnx", junk, sizeof junk, &o, &d));
	ck_assert_msg(strstr(d.last, "junk.onnx: not an ONNX model"), "%s", d.last);
	ck_assert_ptr_null(onnx_import_buffer("empty.onnx", "", 0, &o, &d));
	ck_assert_msg(strstr(d.last, "the model has no graph"), "%s", d.last);
}
END_TEST

/* --- never crash --------------------------------------------------------- */

static char *
read_fixture(const char *rel, size_t *len)
{
	char path[512];
	Diag d;

	snprintf(path, sizeof path, "%s/%s", MOEC_SOURCE_DIR, rel);
	diag_init(&d, stderr);
	return file_read(path, len, &d);
}

static void
import_quietly(const char *buf, size_t len)
{
	FeOpts o;
	Diag d;
	Module *m;

	fe_default_opts(&o);
	diag_init(&d, NULL);
	m = onnx_import_buffer("fuzz.onnx", buf, len, &o, &d);
	if (m)
		ir_verify(m, &d);
	else
		ck_assert_int_gt(d.nerror, 0);
	ir_free_module(m);
}

START_TEST(test_onnx_every_truncation_is_handled)
{
	size_t len;
	char *buf = read_fixture("tests/fixtures/onnx/gpt2_mlp_dynamo/model.onnx", &len);

	ck_assert_ptr_nonnull(buf);
	for (size_t n = 0; n < len; n += n < 4096 ? 1 : 997)
		import_quietly(buf, n);
	free(buf);
}
END_TEST

START_TEST(test_onnx_corrupt_bytes_are_handled)
{
	size_t len;
	char *buf = read_fixture("tests/fixtures/onnx/mixtral_moe/model.onnx", &len);
	char *copy = xmalloc(len);
	uint64_t r = 0x9e3779b97f4a7c15ull;

	ck_assert_ptr_nonnull(buf);
	for (int iter = 0; iter < 2000; iter++) {
		memcpy(copy, buf, len);
		for (int k = 0; k < 1 + iter % 8; k++) {
			r = mix64(r + (uint64_t)iter);
			copy[r % len] = (char)(r >> 32);
		}
		import_quietly(copy, len);
	}
	free(copy);
	free(buf);
}
END_TEST

Suite *
onnx_suite(void)
{
	Suite *s = suite_create("onnx");
	TCase *tc = tcase_create("import");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_onnx_matmul_imports_with_symbolic_dims);
	tcase_add_test(tc, test_onnx_missing_dim_gets_a_named_symbol);
	tcase_add_test(tc, test_onnx_large_initializer_is_a_weight_with_data);
	tcase_add_test(tc, test_onnx_shape_chain_folds_to_symbolic_reshape);
	tcase_add_test(tc, test_onnx_every_dtype_from_raw_data);
	tcase_add_test(tc, test_onnx_large_raw_initializer);
	tcase_add_test(tc, test_onnx_typed_fields_decode);
	tcase_add_test(tc, test_onnx_missing_initializer_names_the_node);
	tcase_add_test(tc, test_onnx_every_unsupported_op_is_listed);
	tcase_add_test(tc, test_onnx_opset_outside_11_to_23);
	tcase_add_test(tc, test_onnx_op_newer_than_opset);
	tcase_add_test(tc, test_onnx_raw_data_length_mismatch);
	tcase_add_test(tc, test_onnx_absurd_dims);
	tcase_add_test(tc, test_onnx_typed_count_mismatch_allocates_nothing);
	tcase_add_test(tc, test_onnx_external_paths_must_stay_in_the_folder);
	tcase_add_test(tc, test_onnx_external_range_beyond_the_file);
	tcase_add_test(tc, test_onnx_external_data_fifo_is_refused);
	tcase_add_test(tc, test_onnx_external_offset_out_of_range);
	tcase_add_test(tc, test_onnx_duplicate_graph_input);
	tcase_add_test(tc, test_onnx_nul_in_a_string_field);
	tcase_add_test(tc, test_onnx_newline_in_a_name_is_escaped);
	tcase_add_test(tc, test_onnx_value_info_contradiction);
	tcase_add_test(tc, test_onnx_dangling_output_and_double_definition);
	tcase_add_test(tc, test_onnx_independent_errors_are_all_reported);
	tcase_add_test(tc, test_onnx_attribute_of_the_wrong_kind);
	tcase_add_test(tc, test_onnx_unsupported_element_type);
	tcase_add_test(tc, test_onnx_not_a_model);
	tcase_add_test(tc, test_onnx_every_truncation_is_handled);
	tcase_add_test(tc, test_onnx_corrupt_bytes_are_handled);
	suite_add_tcase(s, tc);
	return s;
}
