/*
 * check_limits.c — the limits of docs/limits.md, each at its edge: types
 * of 2^48 elements pass and one more is refused (parser, inference,
 * verifier, with no overflow on the way); ONNX protobuf nesting; external
 * data and safetensors shards that leave the model's folder through a
 * symbolic link; config.json nesting; tensor files that declare more data
 * than they hold (refused before allocating); bounded walks over deep and
 * diamond-shaped graphs in the passes.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "frontend.h"
#include "passes.h"

static char last[512];

/* Parse and verify text; 0 ok, else -1 with the last diagnostic in `last`. */
static int
parse_verify(const char *text)
{
	Module *m;
	Diag d;
	int rc;

	diag_init(&d, NULL);
	m = ir_parse("t.ir", text, strlen(text), &d);
	rc = m && ir_verify(m, &d) == 0 ? 0 : -1;
	snprintf(last, sizeof last, "%s", d.last);
	ir_free_module(m);
	return rc;
}

static void
expect_refused(const char *text, const char *msg)
{
	ck_assert_msg(parse_verify(text) == -1, "accepted:\n%s", text);
	ck_assert_msg(strstr(last, msg), "'%s' not in '%s'", msg, last);
}

/* --- IR types --------------------------------------------------------------- */

START_TEST(test_limits_ir_types_up_to_2_48_elements)
{
	ck_assert_int_eq(parse_verify("graph @g(%x: f32[65536,65536,65536]) -> (y: "
				      "f32[65536,65536,65536]) {\n\tret %x\n}\n"), 0);
	ck_assert_int_eq(parse_verify("graph @g(%x: f32[4096*T,65536]) -> (y: f32[4096*T,65536]) "
				      "{\n\tret %x\n}\n"), 0);
	expect_refused("graph @g(%x: f32[65536,65536,65536,2]) -> (y: f32[1]) {\n\tret %x\n}\n",
		       "t.ir:1:14: type has more than 2^48 elements");
	expect_refused("graph @g(%x: f32[281474976710657]) -> (y: f32[1]) {\n\tret %x\n}\n",
		       "type has more than 2^48 elements");
	/* a product that overflows int64 on the way */
	expect_refused("graph @g(%x: f32[4611686018427387904*4]) -> (y: f32[1]) {\n\tret %x\n}\n",
		       "type has more than 2^48 elements");
	expect_refused("graph @g(%x: f32[8192*T,65536,65536,65536]) -> (y: f32[1]) {\n\tret %x\n}\n",
		       "type has more than 2^48 elements");
	expect_refused("weight $w : bf16[9223372036854775807,0]\n", "type has more than 2^48");
}
END_TEST

START_TEST(test_limits_inference_refuses_huge_results)
{
	/* tile: 2^32 elements times 2^32 */
	expect_refused("graph @g(%x: f32[65536,65536]) -> (y: f32[1,1]) {\n"
		       "\t%y = tile %x, repeats=[65536, 65536] : f32[1,1]\n\tret %y\n}\n",
		       "t.ir:2:7: tile: result 0 would have more than 2^48 elements");
	/* concat of huge operands: the sum, not a wrapped one */
	expect_refused("graph @g(%x: f32[140737488355328,2]) -> (y: f32[1,1]) {\n"
		       "\t%y = concat %x, %x, %x, axis=0 : f32[1,1]\n\tret %y\n}\n",
		       "concat: result 0 would have more than 2^48 elements");
}
END_TEST

/* --- ONNX ------------------------------------------------------------------- */

static size_t
put_varint(unsigned char *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	return n;
}

/* A length-delimited field around buf[0..*len), built in place from the
 * end of the buffer towards its start. */
static unsigned char *
wrap(unsigned char *start, size_t *len, int field)
{
	unsigned char hdr[16];
	size_t h = put_varint(hdr, (uint64_t)field << 3 | 2);

	h += put_varint(hdr + h, *len);
	memcpy(start - h, hdr, h);
	*len += h;
	return start - h;
}

START_TEST(test_limits_onnx_nesting_refused_before_parsing)
{
	/* graph { node { attribute { g { node { ... } } } } }, 100000 deep:
	 * protobuf-c alone overflows the stack on this */
	size_t cap = (size_t)16 << 20, len = 0;
	unsigned char *buf = malloc(cap), *p = buf + cap;
	Module *m;
	FeOpts o;
	Diag d;

	for (int i = 0; i < 100000; i++) {
		p = wrap(p, &len, 6);	/* AttributeProto.g */
		p = wrap(p, &len, 5);	/* NodeProto.attribute */
		p = wrap(p, &len, 1);	/* GraphProto.node */
	}
	p = wrap(p, &len, 7);		/* ModelProto.graph */
	fe_default_opts(&o);
	diag_init(&d, NULL);
	m = onnx_import_buffer("deep.onnx", p, len, &o, &d);
	ck_assert_ptr_null(m);
	ck_assert_str_eq(d.last, "deep.onnx: messages nest more than 64 deep (graphs in attributes in "
			 "nodes ...): refused before parsing");
	free(buf);
}
END_TEST

/* The temporary folder of check_safetensors.c. */
const char *stt_path(const char *name);
void stt_cleanup(void);

static void
copy(const char *from, const char *to)
{
	Diag d;
	size_t n;
	char *b;

	diag_init(&d, stderr);
	ck_assert_ptr_nonnull(b = file_read(from, &n, &d));
	ck_assert_int_eq(file_write(to, b, n, &d), 0);
	free(b);
}

START_TEST(test_limits_onnx_external_data_symlink_out_refused)
{
	const char *src = MOEC_SOURCE_DIR "/tests/onnx/cases/external_data";
	FeOpts o;
	Module *m;
	Diag d;

	ck_assert_int_eq(mkdir(stt_path("m"), 0700), 0);
	copy(MOEC_SOURCE_DIR "/tests/onnx/cases/external_data/model.onnx", stt_path("m/model.onnx"));
	fe_default_opts(&o);
	diag_init(&d, NULL);
	/* the weights file as a link to the same file outside the folder */
	{
		char target[512];
		snprintf(target, sizeof target, "%s/weights.bin", src);
		ck_assert_int_eq(symlink(target, stt_path("m/weights.bin")), 0);
	}
	m = onnx_import(stt_path("m/model.onnx"), &o, &d);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(d.last, "external data location 'weights.bin' leaves the model's "
			     "folder through a symbolic link"), "%s", d.last);
	/* a link that stays inside is fine */
	ck_assert_int_eq(unlink(stt_path("m/weights.bin")), 0);
	copy(MOEC_SOURCE_DIR "/tests/onnx/cases/external_data/weights.bin", stt_path("m/real.bin"));
	ck_assert_int_eq(symlink("real.bin", stt_path("m/weights.bin")), 0);
	diag_init(&d, stderr);
	ck_assert_ptr_nonnull(m = onnx_import(stt_path("m/model.onnx"), &o, &d));
	ir_free_module(m);
	stt_cleanup();
}
END_TEST

/* --- config.json ------------------------------------------------------------ */

START_TEST(test_limits_config_nesting_refused)
{
	size_t n = 200000, k;
	char *text = malloc(2 * n + 64);
	FeOpts o;
	Diag d;

	strcpy(text, "{\"model_type\": \"llama\", \"x\": ");
	k = strlen(text);
	memset(text + k, '[', n);
	memset(text + k + n, ']', n);
	strcpy(text + k + 2 * n, "}");
	diag_init(&d, stderr);
	ck_assert_int_eq(file_write(stt_path("config.json"), text, strlen(text), &d), 0);
	fe_default_opts(&o);
	o.synthetic = 1;
	diag_init(&d, NULL);
	ck_assert_ptr_null(cfg_import(stt_path("config.json"), &o, &d));
	ck_assert_msg(strstr(d.last, "not valid JSON"), "%s", d.last);
	free(text);
	stt_cleanup();
}
END_TEST

/* --- tensor files ----------------------------------------------------------- */

START_TEST(test_limits_tensor_files_declare_more_than_they_hold)
{
	/* TensorProto: dims 2^35, f32, no data: 128 GiB declared in 9 bytes */
	static const unsigned char pb[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x10, 0x01};
	/* f32[2^33]: within TENSOR_MAX_BYTES (32 GiB), but the data is absent */
	static const unsigned char pb2[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x20, 0x10, 0x01};
	static const char hdr[] = "{'descr': '<f4', 'fortran_order': False, "
				  "'shape': (4294967296,), }";
	char npy[128] = "\x93NUMPY\x01\x00\x76\x00";
	Tensor t;
	Diag d;

	diag_init(&d, NULL);
	ck_assert_int_eq(pb_tensor_decode("a.pb", pb, sizeof pb, &t, &d), -1);
	ck_assert_str_eq(d.last, "a.pb: tensor dims are negative or too large");
	ck_assert_int_eq(pb_tensor_decode("a.pb", pb2, sizeof pb2, &t, &d), -1);
	ck_assert_str_eq(d.last, "a.pb: tensor holds 0 values, dims need 8589934592");
	memset(npy + 10, ' ', 118);
	memcpy(npy + 10, hdr, strlen(hdr));
	npy[127] = '\n';
	ck_assert_int_eq(npy_read("a.npy", npy, sizeof npy, &t, &d), -1);
	ck_assert_str_eq(d.last, "a.npy: truncated .npy data: 0 of 17179869184 bytes");
}
END_TEST

/* --- passes over deep graphs ------------------------------------------------ */

START_TEST(test_limits_weight_only_is_bounded)
{
	Module *m = ir_new_module();
	Graph *g = ir_new_graph(m, "g", G_GRAPH);
	Weight *w = ir_add_weight(m, "w", ir_type(DT_F32, 1, (Dim[]){4}));
	Builder b = {.g = g, .loc = LOC_NONE};
	Value *v = w->value, *x = ir_add_param(g, "x", ir_type(DT_F32, 1, (Dim[]){4}));
	clock_t t0;
	Diag d;

	diag_init(&d, stderr);
	b.d = &d;
	/* a diamond ladder: 2^200 paths from the top to w */
	for (int i = 0; i < 200; i++)
		v = ir_b2(&b, OP_ADD, v, v);
	t0 = clock();
	ck_assert_int_eq(pass_weight_only(v), 0);	/* too many to prove: "no" */
	ck_assert(clock() - t0 < CLOCKS_PER_SEC);
	/* a chain of 300000 from a parameter: would overflow the stack */
	v = x;
	for (int i = 0; i < 300000; i++)
		v = ir_b1(&b, OP_NEG, v);
	ck_assert_int_eq(pass_weight_only(v), 0);
	/* small weight preparation is still seen as such */
	v = ir_b1(&b, OP_NEG, ir_b2(&b, OP_MUL, w->value, w->value));
	ck_assert_int_eq(pass_weight_only(v), 1);
	ir_free_module(m);
}
END_TEST

Suite *
limits_suite(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("limits");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_limits_ir_types_up_to_2_48_elements);
	tcase_add_test(tc, test_limits_inference_refuses_huge_results);
	tcase_add_test(tc, test_limits_onnx_nesting_refused_before_parsing);
	tcase_add_test(tc, test_limits_onnx_external_data_symlink_out_refused);
	tcase_add_test(tc, test_limits_config_nesting_refused);
	tcase_add_test(tc, test_limits_tensor_files_declare_more_than_they_hold);
	tcase_add_test(tc, test_limits_weight_only_is_bounded);
	suite_add_tcase(s, tc);
	return s;
}
