/*
 * check_safetensors.c — the safetensors reader: good files and indexes, and
 * every kind of bad header (truncated, lying lengths, ranges past the end,
 * sizes that do not match dtype x shape, overlaps, shards outside the
 * index's folder), each refused with a diagnostic naming file and tensor.
 * The writers here (stt_*) are also used by check_config.c.
 */
#include <check.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend.h"

/* A fresh temporary folder per test (fork mode: one per process). */
static char tmpdir[64];

const char *
stt_dir(void)
{
	if (!tmpdir[0]) {
		strcpy(tmpdir, "/tmp/moec-st-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	}
	return tmpdir;
}

static int
rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	return remove(p);
}

void
stt_cleanup(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	tmpdir[0] = 0;
}

/* A path in the temporary folder (static buffer, rotating). */
const char *
stt_path(const char *name)
{
	static char buf[4][512];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof buf[k], "%s/%s", stt_dir(), name);
	return buf[k];
}

void
stt_write_text(const char *name, const char *text)
{
	FILE *f = fopen(stt_path(name), "wb");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* A file with header length `len` (or the header's own when len < 0). */
void
stt_write_raw(const char *name, const char *header, long long len, size_t ndata)
{
	FILE *f = fopen(stt_path(name), "wb");
	uint64_t n = len < 0 ? strlen(header) : (uint64_t)len;
	unsigned char b[8];

	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(n >> (8 * i));
	fwrite(b, 1, 8, f);
	fputs(header, f);
	for (size_t i = 0; i < ndata; i++)
		fputc((int)(i & 0xff), f);
	fclose(f);
}

/* One tensor for stt_write: data NULL means zeros. */
typedef struct {
	const char *name;
	const char *dtype;	/* "BF16", ... */
	int rank;
	int64_t dim[4];
	const void *data;
	size_t size;		/* bytes */
} SttTensor;

/* A well-formed file of the given tensors, laid out back to back. */
void
stt_write(const char *path, const SttTensor *t, int n)
{
	char *hdr = malloc(64 + 256 * (size_t)n);
	size_t k = 0, off = 0;
	FILE *f;

	k += (size_t)sprintf(hdr + k, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (int i = 0; i < n; i++) {
		k += (size_t)sprintf(hdr + k, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name,
				     t[i].dtype);
		for (int j = 0; j < t[i].rank; j++)
			k += (size_t)sprintf(hdr + k, "%s%lld", j ? "," : "", (long long)t[i].dim[j]);
		k += (size_t)sprintf(hdr + k, "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].size);
		off += t[i].size;
	}
	k += (size_t)sprintf(hdr + k, "}");
	while (k % 8)
		hdr[k++] = ' ';
	hdr[k] = 0;
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 8; i++)
		fputc((int)((uint64_t)k >> (8 * i) & 0xff), f);
	fwrite(hdr, 1, k, f);
	for (int i = 0; i < n; i++) {
		if (t[i].data)
			fwrite(t[i].data, 1, t[i].size, f);
		else
			for (size_t j = 0; j < t[i].size; j++)
				fputc(0, f);
	}
	fclose(f);
	free(hdr);
}

/* Open a file expecting failure; returns the diagnostics printed. */
static char *
open_fails(const char *path)
{
	static char text[4096];
	FILE *f = fmemopen(text, sizeof text, "w");
	Diag d;
	StFile *st;

	memset(text, 0, sizeof text);
	diag_init(&d, f);
	st = st_open(path, &d);
	fclose(f);
	ck_assert_ptr_null(st);
	ck_assert_int_ge(d.nerror, 1);
	return text;
}

static StFile *
open_ok(const char *path)
{
	Diag d;
	StFile *st;

	diag_init(&d, stderr);
	st = st_open(path, &d);
	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(d.nerror, 0);
	return st;
}

#define HDR_A "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}"

START_TEST(test_st_reads_tensors_and_metadata)
{
	float a[4] = {1, 2, 3, 4};
	uint16_t b[3] = {0x3f80, 0x4000, 0xbf80};
	SttTensor t[2] = {
		{"w.a", "F32", 2, {2, 2}, a, sizeof a},
		{"w.b", "BF16", 1, {3}, b, sizeof b},
	};
	const StTensor *x;
	float got[4];
	uint16_t gb[3];
	Diag d;
	StFile *st;

	stt_write(stt_path("m.safetensors"), t, 2);
	st = open_ok(stt_path("m.safetensors"));
	diag_init(&d, stderr);
	ck_assert_int_eq(st_count(st), 2);
	ck_assert_str_eq(st_metadata(st, "format"), "pt");
	ck_assert_ptr_null(st_find(st, "w.c"));
	x = st_find(st, "w.a");
	ck_assert_ptr_nonnull(x);
	ck_assert_int_eq(x->dt, DT_F32);
	ck_assert_int_eq(x->rank, 2);
	ck_assert_int_eq(x->dim[1], 2);
	ck_assert_int_eq(st_read(st, x, got, &d), 0);
	ck_assert(memcmp(got, a, sizeof a) == 0);
	x = st_find(st, "w.b");
	ck_assert_int_eq(x->dt, DT_BF16);
	ck_assert_uint_eq(x->size, 6);
	ck_assert_int_eq(st_read(st, x, gb, &d), 0);
	ck_assert(memcmp(gb, b, sizeof b) == 0);
	st_close(st);
	stt_cleanup();
}
END_TEST

START_TEST(test_st_reads_every_dtype_and_scalars)
{
	static const char *const dts[] = {"BF16", "F16", "F32", "F64", "F8_E4M3", "F8_E5M2",
					  "I64", "I32", "I16", "I8", "U8", "BOOL"};
	static const int bytes[] = {2, 2, 4, 8, 1, 1, 8, 4, 2, 1, 1, 1};
	SttTensor t[13];
	char names[12][8];
	StFile *st;

	for (int i = 0; i < 12; i++) {
		snprintf(names[i], sizeof names[i], "t%d", i);
		t[i] = (SttTensor){names[i], dts[i], 1, {3}, NULL, 3 * (size_t)bytes[i]};
	}
	t[12] = (SttTensor){"scalar", "F32", 0, {0}, NULL, 4};
	stt_write(stt_path("m.safetensors"), t, 13);
	st = open_ok(stt_path("m.safetensors"));
	ck_assert_int_eq(st_find(st, "t4")->dt, DT_F8E4M3);
	ck_assert_int_eq(st_find(st, "t5")->dt, DT_F8E5M2);
	ck_assert_int_eq(st_find(st, "t11")->dt, DT_BOOL);
	ck_assert_int_eq(st_find(st, "scalar")->rank, 0);
	st_close(st);
	stt_cleanup();
}
END_TEST

START_TEST(test_st_refuses_truncated_length)
{
	stt_write_text("m.safetensors", "abc");
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "truncated: no 8-byte header length"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_refuses_header_past_end)
{
	stt_write_raw("m.safetensors", HDR_A, (long long)strlen(HDR_A) + 100, 0);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "runs past the end of the file"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_refuses_huge_header_without_allocating)
{
	stt_write_raw("m.safetensors", HDR_A, 1LL << 50, 16);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "above the limit"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_refuses_bad_json)
{
	stt_write_raw("m.safetensors", "{\"a\": {", -1, 0);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "header is not a JSON object"));
	stt_write_raw("m.safetensors", "[1,2]", -1, 0);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "header is not a JSON object"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_refuses_range_past_end)
{
	stt_write_raw("m.safetensors", HDR_A, -1, 8);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "m.safetensors: a: error: data_offsets end 16 lies past the end"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_refuses_size_not_dtype_times_shape)
{
	stt_write_raw("m.safetensors",
		      "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", -1, 16);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "a: error: BF16 shape needs 8 bytes but data_offsets hold 16"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_refuses_overlapping_ranges)
{
	stt_write_raw("m.safetensors",
		      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
		      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", -1, 16);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "b: error: data_offsets [8, 16] overlap those of 'a'"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_refuses_out_of_order_range)
{
	stt_write_raw("m.safetensors",
		      "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,8]}}", -1, 16);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")), "out of order"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_refuses_duplicate_and_malformed_entries)
{
	stt_write_raw("m.safetensors",
		      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", -1, 8);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")), "named twice"));
	stt_write_raw("m.safetensors",
		      "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", -1, 8);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "shape entries must be non-negative integers"));
	stt_write_raw("m.safetensors",
		      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0.5,4]}}", -1, 8);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")),
				     "'data_offsets' must be two non-negative integers"));
	/* integral values written as floats: cJSON reads 4, the library refuses */
	stt_write_raw("m.safetensors",
		      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", -1, 8);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")), "a fraction or an exponent"));
	stt_write_raw("m.safetensors",
		      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4e0]},"
		      "\"__metadata__\":{\"v\":\"1.5e3\"}}", -1, 8);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")), "a fraction or an exponent"));
	stt_write_raw("m.safetensors", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 8);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")), "missing 'dtype'"));
	stt_write_raw("m.safetensors",
		      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
		      "\"data_offsets\":[0,4]}}", -1, 8);
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("m.safetensors")), "too large"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_unknown_dtype_opens_but_does_not_read)
{
	char buf[8];
	Diag d;
	StFile *st;

	stt_write_raw("m.safetensors",
		      "{\"s\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}", -1, 4);
	st = open_ok(stt_path("m.safetensors"));
	ck_assert_int_eq(st_find(st, "s")->dt, NDTYPE);
	diag_init(&d, NULL);
	ck_assert_int_eq(st_read(st, st_find(st, "s"), buf, &d), -1);
	ck_assert_ptr_nonnull(strstr(d.last, "dtype U16 is not one moec reads"));
	st_close(st);
	stt_cleanup();
}
END_TEST

static void
two_shards(void)
{
	float a[2] = {1, 2}, b[3] = {3, 4, 5};
	SttTensor ta = {"x.a", "F32", 1, {2}, a, sizeof a};
	SttTensor tb = {"x.b", "F32", 1, {3}, b, sizeof b};

	stt_write(stt_path("model-00001-of-00002.safetensors"), &ta, 1);
	stt_write(stt_path("model-00002-of-00002.safetensors"), &tb, 1);
}

START_TEST(test_st_index_reads_across_shards)
{
	float got[3];
	Diag d;
	StFile *st;

	two_shards();
	stt_write_text("model.safetensors.index.json",
		       "{\"metadata\": {\"total_size\": 20}, \"weight_map\": {"
		       "\"x.b\": \"model-00002-of-00002.safetensors\","
		       "\"x.a\": \"model-00001-of-00002.safetensors\"}}");
	st = open_ok(stt_path("model.safetensors.index.json"));
	diag_init(&d, stderr);
	ck_assert_int_eq(st_count(st), 2);
	ck_assert_int_eq(st_read(st, st_find(st, "x.b"), got, &d), 0);
	ck_assert(got[0] == 3 && got[2] == 5);
	ck_assert_int_eq(st_read(st, st_find(st, "x.a"), got, &d), 0);
	ck_assert(got[0] == 1 && got[1] == 2);
	ck_assert_ptr_nonnull(strstr(st_shard_path(st, st_find(st, "x.b")), "00002"));
	st_close(st);
	stt_cleanup();
}
END_TEST

START_TEST(test_st_index_refuses_shards_outside_its_folder)
{
	static const char *const bad[] = {
		"../model-00001-of-00002.safetensors", "/etc/passwd",
		"sub/../../x.safetensors", "link.safetensors",
	};
	char text[512];

	two_shards();
	ck_assert_int_eq(symlink("/etc/hostname", stt_path("link.safetensors")), 0);
	for (size_t i = 0; i < NELEM(bad); i++) {
		snprintf(text, sizeof text, "{\"weight_map\": {\"x.a\": \"%s\"}}", bad[i]);
		stt_write_text("model.safetensors.index.json", text);
		ck_assert_ptr_nonnull(strstr(open_fails(stt_path("model.safetensors.index.json")),
					     "lies outside the index's folder"));
	}
	stt_cleanup();
}
END_TEST

START_TEST(test_st_index_refuses_what_its_shards_lack)
{
	two_shards();
	stt_write_text("model.safetensors.index.json",
		       "{\"weight_map\": {\"x.b\": \"model-00001-of-00002.safetensors\"}}");
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("model.safetensors.index.json")),
				     "x.b: error: weight_map puts the tensor here"));
	stt_write_text("model.safetensors.index.json",
		       "{\"weight_map\": {\"x.b\": \"nope.safetensors\"}}");
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("model.safetensors.index.json")),
				     "nope.safetensors: error: cannot open"));
	stt_write_text("model.safetensors.index.json", "{\"metadata\": {}}");
	ck_assert_ptr_nonnull(strstr(open_fails(stt_path("model.safetensors.index.json")),
				     "weight_map: error: missing or not an object"));
	stt_cleanup();
}
END_TEST

START_TEST(test_st_reads_a_fixture)
{
	char path[512];
	StFile *st;
	const StTensor *t;

	snprintf(path, sizeof path, "%s/tests/fixtures/hf/mixtral/model.safetensors", MOEC_SOURCE_DIR);
	st = open_ok(path);
	t = st_find(st, "model.layers.1.block_sparse_moe.experts.7.w2.weight");
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(t->dt, DT_BF16);
	ck_assert_int_eq(t->dim[0], 64);
	ck_assert_int_eq(t->dim[1], 16);
	st_close(st);
}
END_TEST

Suite *
safetensors_suite(void)
{
	Suite *s = suite_create("safetensors");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_st_reads_tensors_and_metadata);
	tcase_add_test(tc, test_st_reads_every_dtype_and_scalars);
	tcase_add_test(tc, test_st_refuses_truncated_length);
	tcase_add_test(tc, test_st_refuses_header_past_end);
	tcase_add_test(tc, test_st_refuses_huge_header_without_allocating);
	tcase_add_test(tc, test_st_refuses_bad_json);
	tcase_add_test(tc, test_st_refuses_range_past_end);
	tcase_add_test(tc, test_st_refuses_size_not_dtype_times_shape);
	tcase_add_test(tc, test_st_refuses_overlapping_ranges);
	tcase_add_test(tc, test_st_refuses_out_of_order_range);
	tcase_add_test(tc, test_st_refuses_duplicate_and_malformed_entries);
	tcase_add_test(tc, test_st_unknown_dtype_opens_but_does_not_read);
	tcase_add_test(tc, test_st_index_reads_across_shards);
	tcase_add_test(tc, test_st_index_refuses_shards_outside_its_folder);
	tcase_add_test(tc, test_st_index_refuses_what_its_shards_lack);
	tcase_add_test(tc, test_st_reads_a_fixture);
	suite_add_tcase(s, tc);
	return s;
}
