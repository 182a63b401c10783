/*
 * check_limits.c — the limits of docs/limits.md, each at its edge: types
 * of 2^48 elements pass and one more is refused (parser, inference,
 * verifier, with no overflow on the way); ONNX protobuf nesting; external
 * data and safetensors shards that leave the model's folder through a
 * symbolic link; config.json nesting; tensor files that declare more data
 * than they hold (refused before allocating); bounded walks over deep and
 * diamond-shaped graphs in the passes; memory budgets (arena limit, weights
 * held on the host) and fusion of a 100,000-node chain in bounded time and
 * arena bytes.
 */
#include <check.h>
#include <fcntl.h>
#include <setjmp.h>
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
	ck_assert_int_eq(ir_weight_only(v), 0);	/* too many to prove: "no" */
	ck_assert(clock() - t0 < CLOCKS_PER_SEC);
	/* a chain of 300000 from a parameter: would overflow the stack */
	v = x;
	for (int i = 0; i < 300000; i++)
		v = ir_b1(&b, OP_NEG, v);
	ck_assert_int_eq(ir_weight_only(v), 0);
	/* small weight preparation is still seen as such */
	v = ir_b1(&b, OP_NEG, ir_b2(&b, OP_MUL, w->value, w->value));
	ck_assert_int_eq(ir_weight_only(v), 1);
	ir_free_module(m);
}
END_TEST

/* --- memory budgets -------------------------------------------------------- */

START_TEST(test_limits_ir_statements_per_graph)
{
	size_t cap = (size_t)IR_MAX_NODES * 32 + 256, k;
	char *text = malloc(cap);

	for (int extra = 0; extra < 2; extra++) {
		k = (size_t)snprintf(text, cap, "graph @g(%%x: f32[1]) -> (y: f32[1]) {\n");
		for (int i = 0; i < IR_MAX_NODES + extra; i++)
			k += (size_t)snprintf(text + k, cap - k, "\t%%t%d = neg %%x : f32[1]\n", i);
		snprintf(text + k, cap - k, "\tret %%x\n}\n");
		if (!extra)
			ck_assert_int_eq(parse_verify(text), 0);
		else
			expect_refused(text, "t.ir:262146:13: more than 262144 statements in one graph");
	}
	free(text);
}
END_TEST

static jmp_buf oom_jmp;
static char oom_owner[64];
static size_t oom_limit;

static void
catch_oom(const char *owner, size_t bytes, size_t limit)
{
	(void)bytes;
	snprintf(oom_owner, sizeof oom_owner, "%s", owner ? owner : "");
	oom_limit = limit;
	longjmp(oom_jmp, 1);
}

START_TEST(test_limits_arena_budget_calls_the_handler)
{
	Arena *a = arena_new(0);
	volatile int n = 0;

	arena_set_limit(a, (size_t)1 << 20, "m.ir");
	mem_set_oom_handler(catch_oom);
	if (setjmp(oom_jmp) == 0) {
		for (;; n++)	/* 64 KiB chunks of 4 KiB pieces: 16 chunks fit */
			arena_alloc(a, 4096);
	}
	ck_assert_str_eq(oom_owner, "m.ir");
	ck_assert_uint_eq(oom_limit, (size_t)1 << 20);
	ck_assert_int_eq(n, 256);
	ck_assert_uint_le(arena_used(a), (size_t)1 << 20);
	/* a size read from a file: refused before any malloc, no wrap-around */
	oom_limit = 0;
	if (setjmp(oom_jmp) == 0)
		arena_alloc(a, SIZE_MAX - 3);
	ck_assert_uint_eq(oom_limit, (size_t)1 << 20);
	mem_set_oom_handler(NULL);
	arena_free(a);
}
END_TEST

/* An initializer of f32[2^32] in a 16 GiB sparse weights.bin (a few bytes
 * on disk) is refused against the host budget before anything is read:
 * it aborted in malloc under a 4 GiB ulimit.  The model, protoc-encoded:
 *	graph { node { op_type: "Add" input: "x" input: "w" output: "y" }
 *	  initializer { name: "w" data_type: 1 dims: 4294967296
 *	    data_location: EXTERNAL external_data { key: "location" value: "weights.bin" } }
 *	  input x and output y: f32[4294967296] }  (ir_version 8, opset 18) */
START_TEST(test_limits_external_data_past_the_host_budget)
{
	static const unsigned char model[] = {
		0x08, 0x08, 0x3a, 0x65, 0x0a, 0x0e, 0x0a, 0x01, 0x78, 0x0a, 0x01, 0x77, 0x12, 0x01,
		0x79, 0x22, 0x03, 0x41, 0x64, 0x64, 0x12, 0x01, 0x67, 0x2a, 0x26, 0x08, 0x80, 0x80,
		0x80, 0x80, 0x10, 0x10, 0x01, 0x42, 0x01, 0x77, 0x6a, 0x17, 0x0a, 0x08, 0x6c, 0x6f,
		0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x12, 0x0b, 0x77, 0x65, 0x69, 0x67, 0x68, 0x74,
		0x73, 0x2e, 0x62, 0x69, 0x6e, 0x70, 0x01, 0x5a, 0x13, 0x0a, 0x01, 0x78, 0x12, 0x0e,
		0x0a, 0x0c, 0x08, 0x01, 0x12, 0x08, 0x0a, 0x06, 0x08, 0x80, 0x80, 0x80, 0x80, 0x10,
		0x62, 0x13, 0x0a, 0x01, 0x79, 0x12, 0x0e, 0x0a, 0x0c, 0x08, 0x01, 0x12, 0x08, 0x0a,
		0x06, 0x08, 0x80, 0x80, 0x80, 0x80, 0x10, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x12,
	};
	FeOpts o;
	Diag d;
	int fd;

	ck_assert_int_eq(mkdir(stt_path("ext"), 0700), 0);
	diag_init(&d, stderr);
	ck_assert_int_eq(file_write(stt_path("ext/model.onnx"), model, sizeof model, &d), 0);
	ck_assert_int_ge(fd = open(stt_path("ext/weights.bin"), O_WRONLY | O_CREAT, 0600), 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)1 << 34), 0);
	close(fd);
	fe_default_opts(&o);
	o.max_host_bytes = (int64_t)4 << 30;
	diag_init(&d, NULL);
	ck_assert_ptr_null(onnx_import(stt_path("ext/model.onnx"), &o, &d));
	ck_assert_msg(strstr(d.last, "initializer 'w': tensor data of 17179869184 bytes "
			     "would bring the weights held in memory to 17179869184 bytes, above "
			     "the 4294967296 bytes moec may use"), "%s", d.last);
	ck_assert_uint_gt(mem_host_limit(), 0);
	stt_cleanup();
}
END_TEST

/* fuse-ew on a chain of 100,000 relus (and a Sum of 100,000 operands): it
 * refilled uses after every kernel, allocating them anew in the module's
 * arena each time (4 GiB and an abort) and probing kernel names from k0
 * (cubic).  Now each kernel costs O(its nodes): a few seconds, and arena
 * bytes linear in the nodes. */
START_TEST(test_limits_fuse_ew_on_100000_nodes)
{
	for (int sum = 0; sum < 2; sum++) {
		enum { N = 100000 };
		size_t cap = (size_t)N * 48 + 256, k;
		char *text = malloc(cap);
		PassOpts po;
		PassCtx pc = {0};
		Module *m;
		Diag d;
		int calls = 0;
		clock_t t0;

		k = (size_t)snprintf(text, cap, "graph @g(%%x: f32[4,8]) -> (y: f32[4,8]) {\n");
		for (int i = 0; i < N; i++) {
			char prev[16] = "x";
			if (i)
				snprintf(prev, sizeof prev, "t%d", i - 1);
			k += (size_t)snprintf(text + k, cap - k,
					      sum ? "\t%%t%d = add %%%s, %%x : f32[4,8]\n"
						  : "\t%%t%d = relu %%%s : f32[4,8]\n", i, prev);
		}
		k += (size_t)snprintf(text + k, cap - k, "\tret %%t%d\n}\n", N - 1);
		diag_init(&d, stderr);
		ck_assert_ptr_nonnull(m = ir_parse("chain.ir", text, k, &d));
		size_t before = arena_used(m->arena);
		pass_default_opts(&po);
		po.pipeline = "fuse-ew";
		pc = (PassCtx){.d = &d};
		t0 = clock();
		ck_assert_int_eq(pass_run(m, &po, &pc), 0);
		ck_assert_msg(clock() - t0 < 60 * CLOCKS_PER_SEC, "fuse-ew took %.1f s",
			      (double)(clock() - t0) / CLOCKS_PER_SEC);
		for (Node *n = ir_main_graph(m)->first; n; n = n->next)
			calls += n->op == OP_CALL;
		ck_assert_int_eq(calls, (N + 31) / 32);
		ck_assert_msg(arena_used(m->arena) - before < (size_t)N * 2048,
			      "%zu arena bytes for %d nodes", arena_used(m->arena) - before, N);
		ck_assert_int_eq(ir_verify(m, &d), 0);
		ir_free_module(m);
		free(text);
	}
}
END_TEST

Suite *
limits_suite(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("limits");

	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_limits_ir_types_up_to_2_48_elements);
	tcase_add_test(tc, test_limits_inference_refuses_huge_results);
	tcase_add_test(tc, test_limits_onnx_nesting_refused_before_parsing);
	tcase_add_test(tc, test_limits_onnx_external_data_symlink_out_refused);
	tcase_add_test(tc, test_limits_config_nesting_refused);
	tcase_add_test(tc, test_limits_tensor_files_declare_more_than_they_hold);
	tcase_add_test(tc, test_limits_weight_only_is_bounded);
	tcase_add_test(tc, test_limits_ir_statements_per_graph);
	tcase_add_test(tc, test_limits_arena_budget_calls_the_handler);
	tcase_add_test(tc, test_limits_external_data_past_the_host_budget);
	tcase_add_test(tc, test_limits_fuse_ew_on_100000_nodes);
	suite_add_tcase(s, tc);
	return s;
}
