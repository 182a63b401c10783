/*
 * check_readers.c — issue 18's reader rules, one test per root cause:
 * files opened safely (a FIFO, a link to one, a directory or a device is
 * refused at once, never waited on; sizes checked before reading; folder
 * containment checked on the opened file), JSON read as Python's json reads
 * it, safetensors by the library's rules, .npy headers by numpy's grammar,
 * and diagnostics that cannot be forged by a name with a newline.
 */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bundle.h"
#include "frontend.h"

const char *stt_dir(void);
const char *stt_path(const char *name);
void stt_write_text(const char *name, const char *text);
void stt_write_raw(const char *name, const char *header, long long len, size_t ndata);
void stt_cleanup(void);

/* Diagnostics of one call, collected in a static buffer. */
static char text[16384];
static Diag d;

static void
collect(void)
{
	memset(text, 0, sizeof text);
	diag_init(&d, fmemopen(text, sizeof text - 1, "w"));
}

static const char *
collected(void)
{
	fclose(d.out);
	d.out = NULL;
	return text;
}

#define HAS(s) ck_assert_msg(strstr(collected(), s), "want '%s', got '%s'", s, text)

static void
mkfifo_at(const char *name)
{
	ck_assert_int_eq(mkfifo(stt_path(name), 0600), 0);
}

static void
link_at(const char *target, const char *name)
{
	ck_assert_int_eq(symlink(target, stt_path(name)), 0);
}

/* --- opening files ------------------------------------------------------ */

/*
 * Every reader on a FIFO, and on a symbolic link to one: refused with "not a
 * regular file (a FIFO)" at once (the alarm fails a reader that blocks in
 * open, as they all did: open() ran before any check).
 */
START_TEST(test_readers_refuse_fifos_without_blocking)
{
	static const char *names[] = {"model.onnx", "config.json", "m.safetensors",
				      "m.safetensors.index.json", "t.npy", "t.pb", "b.moeb",
				      "g.ir"};
	FeOpts o;
	char sub[600];

	alarm(20);
	fe_default_opts(&o);
	o.synthetic = 1;
	mkfifo_at("fifo");
	snprintf(sub, sizeof sub, "%s/l", stt_dir());
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	for (size_t i = 0; i < NELEM(names); i++) {
		char link[64];
		snprintf(link, sizeof link, "l/%s", names[i]);
		mkfifo_at(names[i]);		/* the reader's file is a FIFO */
		link_at("../fifo", link);	/* or a link to one */
		for (int via = 0; via < 2; via++) {
			const char *p = stt_path(via ? link : names[i]);
			Tensor t;
			size_t len;
			int st;
			collect();
			switch (i) {
			case 0: ck_assert_ptr_null(onnx_import(p, &o, &d)); break;
			case 1: ck_assert_ptr_null(cfg_import(p, &o, &d)); break;
			case 2: case 3: ck_assert_ptr_null(st_open(p, &d)); break;
			case 4: case 5: ck_assert_int_ne(tensor_read(p, &t, &d), 0); break;
			case 6: ck_assert_ptr_null(bundle_read_file(p, &len, &st, &d)); break;
			case 7: ck_assert_ptr_null(ir_parse_file(p, &d)); break;
			}
			ck_assert_msg(strstr(collected(), "not a regular file (a FIFO)"), "%s: %s", p,
				      text);
		}
	}
	stt_cleanup();
	alarm(0);
}
END_TEST

/* A shard of an index, and ONNX external data, through a link to a FIFO. */
START_TEST(test_readers_refuse_fifo_shards_and_external_data)
{
	alarm(20);
	mkfifo_at("fifo");
	link_at("fifo", "s1.safetensors");	/* a relative link inside the folder */
	stt_write_text("m.safetensors.index.json",
		       "{\"weight_map\": {\"a\": \"s1.safetensors\"}}");
	collect();
	ck_assert_ptr_null(st_open(stt_path("m.safetensors.index.json"), &d));
	HAS("s1.safetensors: error: not a regular file (a FIFO)");
	stt_cleanup();
	alarm(0);
}
END_TEST

START_TEST(test_readers_refuse_directories_and_devices)
{
	FeOpts o;

	fe_default_opts(&o);
	o.synthetic = 1;
	collect();
	ck_assert_ptr_null(cfg_import(stt_dir(), &o, &d));
	HAS("error: not a regular file (a directory)");
	collect();
	ck_assert_ptr_null(onnx_import("/dev/null", &o, &d));
	HAS("/dev/null: error: not a regular file (a character device)");
	stt_cleanup();
}
END_TEST

/* A 3 GiB config.json or index (sparse) is refused by its size, unread. */
START_TEST(test_readers_refuse_huge_files_by_size)
{
	static const char *names[] = {"config.json", "m.safetensors.index.json"};
	FeOpts o;

	fe_default_opts(&o);
	o.synthetic = 1;
	for (size_t i = 0; i < NELEM(names); i++) {
		int fd = open(stt_path(names[i]), O_CREAT | O_WRONLY | O_TRUNC, 0600);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(ftruncate(fd, (off_t)3 << 30), 0);
		close(fd);
		collect();
		if (i == 0)
			ck_assert_ptr_null(cfg_import(stt_path(names[i]), &o, &d));
		else
			ck_assert_ptr_null(st_open(stt_path(names[i]), &d));
		HAS(i == 0 ? "file too large (3221225472 bytes, the limit is 16777216)" :
			     "file too large (3221225472 bytes, the limit is 100000000)");
	}
	stt_cleanup();
}
END_TEST

/*
 * Containment is checked on the opened file: a link inside the folder is
 * followed, one that leaves it is FILE_OUTSIDE, without a diagnostic (the
 * caller names its rule).
 */
START_TEST(test_readers_containment_on_the_opened_file)
{
	uint64_t size;
	int fd;
	char sub[600], out[] = "/tmp/moec-outside-XXXXXX";

	close(mkstemp(out));	/* a regular file outside the folder */
	stt_write_text("in.bin", "1234");
	link_at("in.bin", "inlink");
	link_at(out, "outlink");
	snprintf(sub, sizeof sub, "%s/sub", stt_dir());
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	collect();
	fd = file_open(stt_path("inlink"), stt_dir(), 0, &size, &d);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_eq(size, 4);
	close(fd);
	ck_assert_int_eq(file_open(stt_path("outlink"), stt_dir(), 0, &size, &d), FILE_OUTSIDE);
	ck_assert_int_eq(file_open(stt_path("in.bin"), sub, 0, &size, &d), FILE_OUTSIDE);
	ck_assert_int_eq(file_open(stt_path("in.bin"), NULL, 3, &size, &d), -1);
	HAS("file too large (4 bytes, the limit is 3)");
	ck_assert_int_eq(d.nerror, 1);
	unlink(out);
	stt_cleanup();
}
END_TEST

/* --- diagnostics -------------------------------------------------------- */

/* A name with a newline cannot start a line of its own. */
START_TEST(test_readers_diagnostics_escape_control_characters)
{
	Loc l = loc_file("model.onnx");

	l.node = 3;
	l.name = "n\nmodel.onnx: error: forged";
	l.optype = "Relu\x1b[2J";
	collect();
	diag_error(&d, l, "input '%s' is bad", "a\rb\tc");
	collected();
	ck_assert_str_eq(text, "model.onnx: node 3 'n\\nmodel.onnx: error: forged' "
			 "(Relu\\x1b[2J): error: input 'a\\rb\\tc' is bad\n");
}
END_TEST

/* --- JSON --------------------------------------------------------------- */

static const struct {
	const char *json, *why;	/* why NULL: valid */
} json_cases[] = {
	{"{\"a\": [1, -2.5e+3, 0, true, false, null, \"\\u00e9\\n\\/\"]}", NULL},
	{" {} \n\t", NULL},
	{"{\"a\": \"caf\xc3\xa9 \xf0\x9f\x98\x80\"}", NULL},
	{"{} x", "text after the JSON value"},
	{"{}{}", "text after the JSON value"},
	{"{\"a\": 1}\n{\"b\": 2}", "text after the JSON value"},
	{"{\"a\": 01}", "bad number (a leading zero?)"},
	{"{\"a\": 1.}", "bad number"},
	{"{\"a\": .5}", "unexpected character"},
	{"{\"a\": +1}", "unexpected character"},
	{"{\"a\": NaN}", "NaN and Infinity are not JSON"},
	{"{\"a\": -Infinity}", "bad number"},
	{"{\"a\": \"mixtral\\u0000evil\"}", "\\u0000 in a string"},
	{"{\"a\": \"x\xff\"}", "invalid UTF-8"},
	{"{\"a\": \"\xed\xa0\x80\"}", "invalid UTF-8"},	/* an encoded surrogate */
	{"{\"a\": \"\xc0\xaf\"}", "invalid UTF-8"},	/* overlong */
	{"{\"a\": \"tab\there\"}", "control character in a string"},
	{"{\"a\": \"\\x41\"}", "bad escape"},
	{"{\"a\": [1,]}", "unexpected character"},
	{"{\"a\": 1,}", "expected a key"},
	{"{\"a\" 1}", "expected ':'"},
	{"{\"a\": 1 \"b\": 2}", "expected ',' or '}'"},
	{"\xef\xbb\xbf{}", "unexpected character"},	/* a byte-order mark */
	{"{\"a\": tru}", "unexpected character"},
	{"{\"a\": \"open", "unterminated string"},
	{"[[[", "unexpected end of text"},
	{"", "unexpected end of text"},
};

START_TEST(test_readers_json_grammar)
{
	cJSON *j;

	collect();
	j = fe_json_parse("c.json", json_cases[_i].json, strlen(json_cases[_i].json),
			  FE_JSON_NO_DUPS, &d);
	collected();
	if (!json_cases[_i].why) {
		ck_assert_msg(j != NULL, "case %d: %s", _i, text);
	} else {
		ck_assert_msg(!j && strstr(text, "error: not valid JSON: ") &&
			      strstr(text, json_cases[_i].why), "case %d: want '%s', got '%s'", _i,
			      json_cases[_i].why, text);
	}
	cJSON_Delete(j);
}
END_TEST

/* Duplicate keys: the last wins, at every depth, or they are refused. */
START_TEST(test_readers_json_duplicate_keys)
{
	static const char s[] = "{\"a\": 1, \"b\": {\"x\": 1, \"x\": 2, \"y\": 0, \"x\": 3}, \"a\": 2}";
	cJSON *j;

	collect();
	j = fe_json_parse("c.json", s, sizeof s - 1, FE_JSON_LAST_WINS, &d);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(cJSON_GetArraySize(j), 2);
	ck_assert(cJSON_GetObjectItem(j, "a")->valuedouble == 2);
	cJSON *b = cJSON_GetObjectItem(j, "b");
	ck_assert_int_eq(cJSON_GetArraySize(b), 2);
	ck_assert(cJSON_GetObjectItem(b, "x")->valuedouble == 3);
	cJSON_Delete(j);
	ck_assert_ptr_null(fe_json_parse("c.json", s, sizeof s - 1, FE_JSON_NO_DUPS, &d));
	HAS("c.json: error: key 'x' is named twice in one object");
}
END_TEST

/* config.json with a prefix or suffix spliced into the mixtral config. */
static Module *
mixtral(const char *prefix, const char *suffix)
{
	char path[600], *src, *s;
	size_t len;
	FeOpts o;
	Diag q;
	Module *m;

	snprintf(path, sizeof path, "%s/models/mixtral-8x7b/config.json", MOEC_SOURCE_DIR);
	diag_init(&q, stderr);
	src = file_read(path, &len, &q);
	ck_assert_ptr_nonnull(src);
	*strrchr(src, '}') = 0;
	s = xmalloc(len + strlen(prefix) + strlen(suffix) + 8);
	sprintf(s, "{%s%s%s}", prefix, src + 1, suffix);
	stt_write_text("config.json", s);
	free(s), free(src);
	fe_default_opts(&o);
	o.synthetic = 1;
	collect();
	m = cfg_import(stt_path("config.json"), &o, &d);
	collected();
	return m;
}

static int
has_hidden(Module *m, const char *dims)
{
	char *ir = ir_print_string(m, 0);
	int ok = strstr(ir, dims) != NULL;

	free(ir);
	ir_free_module(m);
	return ok;
}

/* As transformers (Python's json): a repeated key's last value counts. */
START_TEST(test_readers_config_duplicate_key_last_wins)
{
	Module *m = mixtral("\"hidden_size\": 7, ", "");

	ck_assert_msg(m, "%s", text);
	ck_assert(has_hidden(m, "%x: bf16[T,4096]"));
	m = mixtral("", ", \"hidden_size\": 64");
	ck_assert_msg(m, "%s", text);
	ck_assert(has_hidden(m, "%x: bf16[T,64]"));
	stt_cleanup();
}
END_TEST

/* Infinity and -Infinity in config.json, as Python's json reads them and
 * transformers 4's json.dumps writes them (a Mamba layer's time_step_limit):
 * a key moec does not read may hold one; inside a string it is text. */
START_TEST(test_readers_config_infinity)
{
	Module *m = mixtral("\"time_step_limit\": [0.0, Infinity], \"x\": -Infinity, "
			    "\"Infinity\": \"Infinity\\\"Infinity\", ", "");

	ck_assert_msg(m != NULL, "%s", text);
	ir_free_module(m);
	stt_cleanup();
}
END_TEST

START_TEST(test_readers_config_strict)
{
	static const struct {
		const char *prefix, *suffix, *msg;
	} bad[] = {
		{"", "} x", "not valid JSON: text after the JSON value"},
		{"", "}{", "not valid JSON: text after the JSON value"},
		{"\"rms_norm_eps\": 0, ", ", \"rms_norm_eps\": 1e999", "rms_norm_eps: error: must be a finite number, not inf"},
		{"", ", \"model_type\": \"mixtral\\u0000evil\"", "not valid JSON: \\u0000 in a string"},
		{"", ", \"model_type\": \"mixtr\xe1l\"", "not valid JSON: invalid UTF-8"},
		{"", ", \"rms_norm_eps\": NaN", "NaN is not read"},
		{"", ", \"rms_norm_eps\": Infinity", "rms_norm_eps: error: must be a finite number, not inf"},
		{"", ", \"rms_norm_eps\": -Infinity", "rms_norm_eps: error: must be a finite number, not -inf"},
		{"", ", \"a\": Infinit", "unexpected character"},
	};

	for (size_t i = 0; i < NELEM(bad); i++) {
		ck_assert_ptr_null(mixtral(bad[i].prefix, bad[i].suffix));
		ck_assert_msg(strstr(text, bad[i].msg), "case %zu: got '%s'", i, text);
	}
	stt_cleanup();
}
END_TEST

/* --- safetensors -------------------------------------------------------- */

#define ENTRY(name, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" #b "," #e "]}"

START_TEST(test_readers_safetensors_library_rules)
{
	static const struct {
		const char *hdr;
		size_t ndata;
		const char *msg;	/* NULL: opens */
	} cases[] = {
		{"{" ENTRY("a", 0, 4) "," ENTRY("b", 4, 8) "}   ", 8, NULL},
		{" {" ENTRY("a", 0, 4) "}", 4, "header is not a JSON object: it does not start with '{'"},
		{"{" ENTRY("a", 0, 4) "}x", 4, "not valid JSON: text after the JSON value"},
		{"{" ENTRY("a", 0, 4) "}{}", 4, "not valid JSON: text after the JSON value"},
		{"{" ENTRY("a", 0, 4) "," ENTRY("b", 8, 12) "}", 12, "b: error: data_offsets [8, 12] leave a hole: bytes [4, 8)"},
		{"{" ENTRY("a", 4, 8) "}", 8, "a: error: data_offsets [4, 8] leave a hole: bytes [0, 4)"},
		{"{" ENTRY("a", 0, 4) "}", 12, "8 bytes after the last tensor's data"},
		{"{" ENTRY("a\\u0000b", 0, 4) "}", 4, "\\u0000 in a string"},
		{"{" ENTRY("a", 0, 4) "," ENTRY("a", 4, 8) "}", 8, "key 'a' is named twice in one object"},
		{"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "key 'dtype' is named twice"},
		{"{\"__metadata__\":{\"n\":1}," ENTRY("a", 0, 4) "}", 4, "__metadata__: error: value of 'n' is not a string"},
		{"{" ENTRY("caf\xe9", 0, 4) "}", 4, "invalid UTF-8"},
	};

	for (size_t i = 0; i < NELEM(cases); i++) {
		StFile *f;
		stt_write_raw("m.safetensors", cases[i].hdr, -1, cases[i].ndata);
		collect();
		f = st_open(stt_path("m.safetensors"), &d);
		collected();
		if (!cases[i].msg)
			ck_assert_msg(f != NULL, "case %zu: %s", i, text);
		else
			ck_assert_msg(!f && strstr(text, cases[i].msg), "case %zu: want '%s', got '%s'",
				      i, cases[i].msg, text);
		st_close(f);
	}
	stt_cleanup();
}
END_TEST

/* --- .npy --------------------------------------------------------------- */

/* A .npy file of version 1 with the given header text and 24 data bytes. */
static int
npy(const char *hdr, Tensor *t)
{
	unsigned char buf[512] = "\x93NUMPY\x01\x00";
	size_t n = strlen(hdr);

	buf[8] = (unsigned char)n;
	buf[9] = 0;
	memcpy(buf + 10, hdr, n);
	memset(buf + 10 + n, 0, 24);
	collect();
	int rc = npy_read("t.npy", buf, 10 + n + 24, t, &d);
	collected();
	return rc;
}

START_TEST(test_readers_npy_header_grammar)
{
	static const struct {
		const char *hdr, *msg;	/* msg NULL: reads */
		int rank;
	} cases[] = {
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n", NULL, 2},
		{"{\"shape\": (6,), \"descr\": \"<f4\", \"fortran_order\": False}\n", NULL, 1},
		{"{'descr': '<i8', 'fortran_order': False, 'shape': (3,)}", NULL, 1},
		{"{'descr': '|u1', 'fortran_order': False, 'shape': ()}", NULL, 0},
		{"{'descr': '<f4',\n 'fortran_order': False,\n 'shape': (2,\n 3)}\n", NULL, 2},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (3,)}", "a key given twice", 0},
		{"{'descr': \"<f4', 'shape': (2,\", 'fortran_order': False}", "'descr' is not a short string", 0},
		{"{'descr': '<f4', 'x': \"'shape': (3,)\", 'fortran_order': False, 'shape': (1,)}", "a key other than", 0},
		{"{'descr': '<f4', 'fortran_order': False}", "a key is missing", 0},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", "'shape' is not a tuple", 0},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", "something other than a non-negative integer", 0},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (03,)}", "something other than a non-negative integer", 0},
		{"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", "'fortran_order' is not True or False", 0},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x", "text after the dict", 0},
		{"{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}", "no ',' between entries", 0},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3,),,}", "a key is not a string", 0},
		{"['descr', '<f4']", "not a dict", 0},
		{"{'descr': '>f4', 'fortran_order': False, 'shape': (3,)}", "unsupported .npy dtype '>f4'", 0},
		{"{'descr': '<f4', 'fortran_order': True, 'shape': (3,)}", "fortran-order .npy is not supported", 0},
	};
	Tensor t;

	for (size_t i = 0; i < NELEM(cases); i++) {
		int rc = npy(cases[i].hdr, &t);
		if (!cases[i].msg) {
			ck_assert_msg(rc == 0, "case %zu: %s", i, text);
			ck_assert_int_eq(t.rank, cases[i].rank);
			tensor_free(&t);
		} else {
			ck_assert_msg(rc != 0 && strstr(text, cases[i].msg), "case %zu: want '%s', "
				      "got '%s'", i, cases[i].msg, text);
		}
	}
}
END_TEST

Suite *
readers_suite(void)
{
	Suite *s = suite_create("readers");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_readers_refuse_fifos_without_blocking);
	tcase_add_test(tc, test_readers_refuse_fifo_shards_and_external_data);
	tcase_add_test(tc, test_readers_refuse_directories_and_devices);
	tcase_add_test(tc, test_readers_refuse_huge_files_by_size);
	tcase_add_test(tc, test_readers_containment_on_the_opened_file);
	tcase_add_test(tc, test_readers_diagnostics_escape_control_characters);
	tcase_add_loop_test(tc, test_readers_json_grammar, 0, (int)NELEM(json_cases));
	tcase_add_test(tc, test_readers_json_duplicate_keys);
	tcase_add_test(tc, test_readers_config_duplicate_key_last_wins);
	tcase_add_test(tc, test_readers_config_strict);
	tcase_add_test(tc, test_readers_config_infinity);
	tcase_add_test(tc, test_readers_safetensors_library_rules);
	tcase_add_test(tc, test_readers_npy_header_grammar);
	suite_add_tcase(s, tc);
	return s;
}
