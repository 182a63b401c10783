/*
 * check_runtime.c — everything the runtime decides without a GPU: no
 * driver (missing or not CUDA) is MOERT_ENODRIVER with a message; code
 * choice per compute capability; bad bundles refused by moert_verify and
 * by loading before the driver is touched; shapes, dtypes and T checked;
 * grids, memsets, the memory plan and kernel params computed at T.
 */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static const char man[] =
	"moeb 1\nmoec 0.1.0\nsynthetic 7\nmax_tokens 64\nsym T\narena 8192\n"
	"cost flops=16*T bytes=64*T+1024\n"
	"input x bf16 T,8\ninput idx i32 2*T\noutput y bf16 T,8\n"
	"weight w bf16 8,8 bytes=128 at=0\nweight s f32 100 bytes=400 synth\n"
	"weight b f32 8 bytes=32 at=256\n"
	"buffer tmp offset=0 bytes=32*T\nbuffer acc offset=4096 bytes=cdiv(T,4)\n"
	"kernel k target=sm_80 params=ptr,i32,ptr,f32,i64,i32,u64 regs=0 smem=0 spills=0\n"
	"init k grid=4,1,1 block=128,1,1 smem=0 args=w:s,i32:-3,w:b,f32:0.25,i64:-9,i32:1,u64:18446744073709551615\n"
	"launch k grid=cdiv(T,4),2,1 block=128,1,1 smem=0 args=in:1,T,buf:tmp+8,f32:1,i64:5,T,u64:3\n"
	"memset buf:tmp+16 bytes=16*T\n"
	"launch k grid=T,1,1 block=32,1,1 smem=0 args=out:0,T,buf:acc,f32:-1,i64:0,i32:2,u64:0\n";

static const char ptx[] = ".version 7.0\n.target sm_80\n.address_size 64\n";
static unsigned char wts[512];

static unsigned char *
bundle(size_t *len)
{
	BundleWriter w;
	unsigned char *b;
	Diag d;

	diag_init(&d, stderr);
	bundle_writer_init(&w, NULL);
	bundle_add(&w, "manifest", man, strlen(man), &d);
	bundle_add(&w, "ptx:sm_80", ptx, strlen(ptx), &d);
	bundle_add(&w, "weights", wts, sizeof wts, &d);
	ck_assert_int_eq(bundle_write(&w, &b, len, &d), 0);
	return b;
}

static moert_program *
host(void)
{
	size_t len;
	unsigned char *b = bundle(&len);
	moert_program *p;

	ck_assert_msg(moert_load_host(b, len, &p) == MOERT_OK, "%s",
		      moert_last_error());
	free(b);	/* only moert_load_device reads the bytes again */
	return p;
}

/* --- the driver ---------------------------------------------------------- */

START_TEST(test_open_without_driver_is_enodriver)
{
	moert_device *dev = (moert_device *)1;

	setenv("MOERT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	ck_assert_int_eq(moert_open(0, &dev), MOERT_ENODRIVER);
	ck_assert_ptr_null(dev);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "cannot load the CUDA driver"));
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "/nonexistent/libcuda.so.1"));
	ck_assert_str_eq(moert_status_name(MOERT_ENODRIVER), "MOERT_ENODRIVER");
}
END_TEST

START_TEST(test_open_non_cuda_library_is_enodriver)
{
	moert_device *dev;

	setenv("MOERT_LIBCUDA", "libm.so.6", 1);
	ck_assert_int_eq(moert_open(0, &dev), MOERT_ENODRIVER);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "libm.so.6: no symbol cuInit"));
}
END_TEST

START_TEST(test_open_default_library)
{
	moert_device *dev;
	moert_status s;

	unsetenv("MOERT_LIBCUDA");
	s = moert_open(0, &dev);	/* no GPU here: refused; with one: fine */
	if (s == MOERT_OK)
		moert_close(dev);
	else
		ck_assert_msg(s == MOERT_ENODRIVER || s == MOERT_ENODEV, "%s: %s",
			      moert_status_name(s), moert_last_error());
	ck_assert(s == MOERT_OK || moert_last_error()[0]);
}
END_TEST

/* --- code choice ----------------------------------------------------------- */

static const char *
pick(const char *list, int major, int minor)
{
	static char buf[256];
	const char *names[16];
	char *tok, *save;
	int n = 0, i;

	snprintf(buf, sizeof buf, "%s", list);
	for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
		names[n++] = tok;
	if (moert_pick_code(names, n, major, minor, &i) != MOERT_OK)
		return "EARCH";
	return names[i];
}

START_TEST(test_pick_code_by_compute_capability)
{
	const char *both = "manifest ptx:sm_90a ptx:sm_80 weights";

	ck_assert_str_eq(pick(both, 9, 0), "ptx:sm_90a");
	ck_assert_str_eq(pick(both, 8, 0), "ptx:sm_80");
	ck_assert_str_eq(pick(both, 8, 6), "ptx:sm_80");
	ck_assert_str_eq(pick(both, 8, 9), "ptx:sm_80");
	ck_assert_str_eq(pick(both, 10, 0), "ptx:sm_80");	/* 90a is 9.0 only */
	ck_assert_str_eq(pick(both, 7, 5), "EARCH");
	ck_assert_str_eq(moert_last_error(),
			 "no code for sm_75 in bundle (has: ptx:sm_90a, ptx:sm_80)");
	ck_assert_str_eq(pick("ptx:sm_80 cubin:sm_90a", 9, 0), "cubin:sm_90a");
	ck_assert_str_eq(pick("cubin:sm_90a ptx:sm_80", 8, 9), "ptx:sm_80");
	ck_assert_str_eq(pick("cubin:sm_80", 8, 6), "EARCH");	/* exact only */
	ck_assert_str_eq(pick("cubin:sm_90 cubin:sm_90a", 9, 0), "cubin:sm_90a");
	ck_assert_str_eq(pick("ptx:sm_90 ptx:sm_90a", 9, 0), "ptx:sm_90a");
	ck_assert_str_eq(pick("ptx:sm_90 ptx:sm_90a", 12, 0), "ptx:sm_90");
	ck_assert_str_eq(pick("ptx:sm_100a", 9, 0), "EARCH");
	ck_assert_str_eq(pick("ptx:sm_100a ptx:sm_90", 10, 0), "ptx:sm_100a");
	ck_assert_str_eq(pick("manifest weights", 9, 0), "EARCH");
	ck_assert_str_eq(moert_last_error(), "no code for sm_90 in bundle (has: none)");
}
END_TEST

/* Per-target launch plans: the chosen target's arch= lines and the lines
 * for any target stay, in order; the other target's go. */
START_TEST(test_keep_arch_lines)
{
	static const char text[] =
		"moeb 1\nmoec 0.1.0\nsynthetic none\nmax_tokens 64\nsym T\narena 0\n"
		"input x bf16 T,8\noutput y bf16 T,8\n"
		"kernel k target=sm_90a,sm_80 params=ptr,ptr,i32 regs=0 smem=0 spills=0\n"
		"launch k grid=T,1,1 block=32,1,1 smem=0 args=in:0,out:0,T\n"
		"launch k grid=T,1,1 block=64,1,1 smem=200000 args=in:0,out:0,T tokens=1..16 arch=sm_90a\n"
		"launch k grid=T,1,1 block=128,1,1 smem=0 args=in:0,out:0,T tokens=17..64 arch=sm_90a\n"
		"launch k grid=T,1,1 block=256,1,1 smem=100000 args=in:0,out:0,T arch=sm_80\n";
	static const struct {
		const char *target;
		int n, block[4];
	} cases[] = {{"sm_90a", 3, {32, 64, 128}}, {"sm_80", 2, {32, 256}}, {"sm_86", 1, {32}}};
	Diag d;

	for (size_t i = 0; i < NELEM(cases); i++) {
		Arena *a = arena_new(0);
		Manifest *m;
		diag_init(&d, stderr);
		ck_assert_int_eq(bundle_manifest_parse(a, "m", text, strlen(text), &m, &d), BUNDLE_OK);
		ck_assert_int_eq(m->nstep, 4);
		moert_keep_arch(m, cases[i].target);
		ck_assert_int_eq(m->nstep, cases[i].n);
		for (int s = 0; s < m->nstep; s++)
			ck_assert_int_eq(m->step[s].block[0], cases[i].block[s]);
		ck_assert(bundle_step_runs(&m->step[0], 64));
		arena_free(a);
	}
}
END_TEST

/* --- refusing bad bundles before the driver -------------------------------- */

START_TEST(test_verify_refuses_corruption_truncation_version)
{
	size_t len;
	unsigned char *b = bundle(&len);

	ck_assert_int_eq(moert_verify(b, len), MOERT_OK);
	for (size_t i = 0; i < len; i += 7) {
		b[i] ^= 0x10;
		ck_assert_msg(moert_verify(b, len) == MOERT_EFORMAT ||
				      (i >= 8 && i < 12 && moert_verify(b, len) ==
							       MOERT_EVERSION),
			      "byte %zu", i);
		b[i] ^= 0x10;
	}
	ck_assert_int_eq(moert_verify(b, len - 1), MOERT_EFORMAT);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "file size field"));
	ck_assert_int_eq(moert_verify(b, 10), MOERT_EFORMAT);
	bundle_put32(b + 8, 3);
	ck_assert_int_eq(moert_verify(b, len), MOERT_EVERSION);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "format version 3, this reader supports 1"));
	free(b);
}
END_TEST

/* Every byte, one bit each: moert_verify and moert_load_host both refuse,
 * with the same status, a message, and nothing left allocated. */
START_TEST(test_every_flipped_byte_refused_by_verify_and_load)
{
	size_t len;
	unsigned char *b = bundle(&len);
	moert_program *p;

	for (size_t i = 0; i < len; i++) {
		unsigned char bit = (unsigned char)(1u << i % 8);
		moert_status v, l;

		b[i] ^= bit;
		v = moert_verify(b, len);
		p = (moert_program *)1;
		l = moert_load_host(b, len, &p);
		ck_assert_msg(v == MOERT_EFORMAT || (i >= 8 && i < 12 && v == MOERT_EVERSION),
			      "byte %zu: moert_verify says %s", i, moert_status_name(v));
		ck_assert_msg(l == v && !p, "byte %zu: moert_load_host says %s", i,
			      moert_status_name(l));
		ck_assert(moert_last_error()[0]);
		b[i] ^= bit;
	}
	ck_assert_int_eq(moert_verify(b, len), MOERT_OK);
	free(b);
}
END_TEST

START_TEST(test_load_host_refuses_bad_bundles)
{
	size_t len;
	unsigned char *b = bundle(&len);
	moert_program *p = (moert_program *)1;

	b[len - 1] ^= 1;	/* inside the weights: a section CRC */
	ck_assert_int_eq(moert_load_host(b, len, &p), MOERT_EFORMAT);
	ck_assert_ptr_null(p);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "section 'weights': error: CRC mismatch"));
	ck_assert_int_eq(moert_load(NULL, b, len, &p), MOERT_EFORMAT);
	b[len - 1] ^= 1;
	ck_assert_int_eq(moert_load(NULL, b, len, &p), MOERT_EINVAL);
	ck_assert_ptr_null(p);
	free(b);
}
END_TEST

/* Load from a file with no driver at all: the file's fault comes first. */
START_TEST(test_load_file_checks_bundle_before_driver)
{
	char path[] = "/tmp/check_runtime_XXXXXX";
	size_t len;
	unsigned char *b = bundle(&len);
	moert_program *p;
	int fd = mkstemp(path);

	setenv("MOERT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
	b[100] ^= 1;
	ck_assert_int_eq(write(fd, b, len), (ssize_t)len);
	close(fd);
	ck_assert_int_eq(moert_load_file(NULL, path, &p), MOERT_EFORMAT);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), path));
	b[100] ^= 1;
	bundle_put32(b + 8, 2);
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, b, len), (ssize_t)len);
	close(fd);
	ck_assert_int_eq(moert_load_file(NULL, path, &p), MOERT_EVERSION);
	unlink(path);
	ck_assert_int_eq(moert_load_file(NULL, path, &p), MOERT_EIO);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "cannot open"));
	free(b);
}
END_TEST

/* Out of device memory (the stand-in driver, tests/gpu/fakecuda.c, has 16
 * GiB): MOERT_ENOMEM naming the allocation, and nothing left on the device. */
START_TEST(test_out_of_device_memory_is_enomem)
{
	static const char big[] =
		"moeb 1\nmoec 0.1.0\nsynthetic none\nmax_tokens 64\nsym T\n"
		"arena 1099511627776\ninput x f32 T,8\noutput y f32 T,8\n";
	moert_device *dev;
	moert_program *p = (moert_program *)1;
	size_t len, before, after, total;
	unsigned char *b;
	BundleWriter w;
	Diag d;

	diag_init(&d, stderr);
	bundle_writer_init(&w, NULL);
	bundle_add(&w, "manifest", big, strlen(big), &d);
	bundle_add(&w, "ptx:sm_80", ptx, strlen(ptx), &d);
	ck_assert_int_eq(bundle_write(&w, &b, &len, &d), 0);
	setenv("MOERT_LIBCUDA", MOEC_BINARY_DIR "/tests/gpu/libfakecuda.so", 1);
	ck_assert_msg(moert_open(0, &dev) == MOERT_OK, "%s", moert_last_error());
	ck_assert_int_eq(moert_mem_info(dev, &before, &total), MOERT_OK);
	ck_assert_int_eq(moert_load(dev, b, len, &p), MOERT_ENOMEM);
	ck_assert_ptr_null(p);
	ck_assert_msg(strstr(moert_last_error(), "CUDA_ERROR_OUT_OF_MEMORY"), "%s",
		      moert_last_error());
	ck_assert_int_eq(moert_mem_info(dev, &after, &total), MOERT_OK);
	ck_assert_uint_eq(after, before);
	moert_close(dev);
	free(b);
}
END_TEST

/* --- shapes and tokens ------------------------------------------------------ */

START_TEST(test_program_queries)
{
	moert_program *p = host();
	moert_tensor_info ti;
	double f, by;

	ck_assert_int_eq(moert_num_inputs(p), 2);
	ck_assert_int_eq(moert_num_outputs(p), 1);
	ck_assert_int_eq(moert_max_tokens(p), 64);
	ck_assert_str_eq(moert_code_section(p), "");
	ck_assert_int_eq(moert_input_info(p, 1, 5, &ti), MOERT_OK);
	ck_assert_str_eq(ti.name, "idx");
	ck_assert_str_eq(ti.dtype, "i32");
	ck_assert_int_eq(ti.rank, 1);
	ck_assert_int_eq(ti.dim[0], 10);
	ck_assert_uint_eq(ti.bytes, 40);
	ck_assert_int_eq(moert_output_info(p, 0, 64, &ti), MOERT_OK);
	ck_assert_uint_eq(ti.bytes, 64 * 8 * 2);
	ck_assert_int_eq(moert_output_info(p, 0, 65, &ti), MOERT_ETOKENS);
	ck_assert_int_eq(moert_input_info(p, 2, 1, &ti), MOERT_EINVAL);
	ck_assert_int_eq(moert_cost(p, 10, &f, &by), MOERT_OK);
	ck_assert(f == 160 && by == 1664);
	moert_unload(p);
}
END_TEST

START_TEST(test_check_input_shapes_dtypes_tokens)
{
	moert_program *p = host();
	int64_t x[2] = {5, 8}, idx[1] = {10}, T = -1;

	ck_assert_int_eq(moert_check_input(p, 0, "bf16", 2, x, &T), MOERT_OK);
	ck_assert_int_eq(T, 5);
	ck_assert_int_eq(moert_check_input(p, 1, "i32", 1, idx, &T), MOERT_OK);
	idx[0] = 12;	/* 2*T with T=6: disagrees with x */
	ck_assert_int_eq(moert_check_input(p, 1, "i32", 1, idx, &T), MOERT_ESHAPE);
	ck_assert_str_eq(moert_last_error(), "input 'idx' dim 0 implies T=6, but T=5 already");
	idx[0] = 11;
	ck_assert_int_eq(moert_check_input(p, 1, "i32", 1, idx, &T), MOERT_ESHAPE);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "not a multiple of 2"));
	T = -1;
	ck_assert_int_eq(moert_check_input(p, 0, "f32", 2, x, &T), MOERT_ESHAPE);
	ck_assert_str_eq(moert_last_error(), "input 'x' has dtype f32, the bundle declares bf16[T,8]");
	ck_assert_int_eq(moert_check_input(p, 0, "bf16", 1, x, &T), MOERT_ESHAPE);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "has rank 1"));
	x[1] = 9;
	ck_assert_int_eq(moert_check_input(p, 0, "bf16", 2, x, &T), MOERT_ESHAPE);
	ck_assert_str_eq(moert_last_error(), "input 'x' dim 1 is 9, the bundle declares bf16[T,8]");
	x[0] = 65, x[1] = 8, T = -1;
	ck_assert_int_eq(moert_check_input(p, 0, "bf16", 2, x, &T), MOERT_ETOKENS);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "implies T=65, outside 1..64"));
	x[0] = 0;
	ck_assert_int_eq(moert_check_input(p, 0, "bf16", 2, x, &T), MOERT_ETOKENS);
	ck_assert_int_eq(moert_check_input(p, 3, "bf16", 2, x, &T), MOERT_EINVAL);
	x[0] = 64;
	T = -1;
	ck_assert_int_eq(moert_check_output(p, 0, "bf16", 2, x, &T), MOERT_OK);
	ck_assert_int_eq(T, 64);
	moert_unload(p);
}
END_TEST

START_TEST(test_run_checks_tokens_and_pointers_first)
{
	moert_program *p = host();
	uint64_t in[2] = {0x1000, 0x2000}, out[1] = {0x3000}, none[2] = {0, 0};
	double us;

	ck_assert_int_eq(moert_run(p, 65, in, out, NULL, 0), MOERT_ETOKENS);
	ck_assert_str_eq(moert_last_error(), "T=65 outside 1..64 (max_tokens of the bundle)");
	ck_assert_int_eq(moert_run(p, 0, in, out, NULL, 1), MOERT_ETOKENS);
	ck_assert_int_eq(moert_run(p, -3, in, out, NULL, 0), MOERT_ETOKENS);
	ck_assert_int_eq(moert_run(p, 4, none, out, NULL, 0), MOERT_EINVAL);
	ck_assert_str_eq(moert_last_error(), "input 0 'x': no device pointer");
	ck_assert_int_eq(moert_run(p, 4, in, NULL, NULL, 0), MOERT_EINVAL);
	ck_assert_int_eq(moert_run(p, 4, in, out, NULL, 0), MOERT_EINVAL);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "not loaded on a device"));
	ck_assert_int_eq(moert_bench(p, 99, in, out, 0, 1, 1, &us), MOERT_ETOKENS);
	ck_assert_int_eq(moert_bench(p, 4, in, out, 0, 1, 0, &us), MOERT_EINVAL);
	ck_assert_int_eq(moert_load_device(NULL, p), MOERT_EINVAL);
	moert_unload(p);
}
END_TEST

START_TEST(test_read_buffer_refusals_host_only)
{
	moert_program *p = host();
	uint64_t in[2] = {0x1000, 0x2000}, out[1] = {0x3000};
	unsigned char h[256];
	size_t n = 0;

	ck_assert_int_eq(moert_buffer_size(p, "tmp", 4, &n), MOERT_OK);
	ck_assert_uint_eq(n, 128);
	ck_assert_int_eq(moert_buffer_size(p, "acc", 9, &n), MOERT_OK);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(moert_read_buffer(p, "none", 4, in, out, h, 128), MOERT_EINVAL);
	ck_assert_str_eq(moert_last_error(), "no buffer 'none' in the bundle");
	ck_assert_int_eq(moert_read_buffer(p, NULL, 4, in, out, h, 128), MOERT_EINVAL);
	ck_assert_int_eq(moert_read_buffer(p, "tmp", 65, in, out, h, 128), MOERT_ETOKENS);
	ck_assert_int_eq(moert_read_buffer(p, "tmp", 0, in, out, h, 128), MOERT_ETOKENS);
	ck_assert_int_eq(moert_read_buffer(p, "tmp", 4, in, out, h, 127), MOERT_EINVAL);
	ck_assert_int_eq(moert_read_buffer(p, "tmp", 4, in, out, NULL, 128), MOERT_EINVAL);
	ck_assert_int_eq(moert_read_buffer(p, "tmp", 4, in, out, h, 128), MOERT_EINVAL);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "not loaded on a device"));
	ck_assert_int_eq(moert_num_routes(p), 0);
	moert_unload(p);
}
END_TEST

/* --- the plan at T ---------------------------------------------------------- */

START_TEST(test_grid_and_memset_at_t)
{
	moert_program *p = host();
	const Manifest *m = p->m;
	unsigned g[3];
	uint64_t off, n;

	ck_assert_int_eq(moert_eval_grid(&m->step[1], 5, g), MOERT_OK);
	ck_assert(g[0] == 2 && g[1] == 2 && g[2] == 1);
	ck_assert_int_eq(moert_eval_grid(&m->step[3], 64, g), MOERT_OK);
	ck_assert_uint_eq(g[0], 64);
	ck_assert_int_eq(moert_eval_memset(m, &m->step[2], 3, &off, &n), MOERT_OK);
	ck_assert(off == 16 && n == 48);
	ck_assert_int_eq(moert_eval_memset(m, &m->step[2], 64, &off, &n), MOERT_OK);
	moert_unload(p);
}
END_TEST

static int64_t
get4(const unsigned char *p)
{
	int32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t
get8(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

START_TEST(test_param_layout_and_marshal)
{
	moert_program *p = host();
	const Manifest *m = p->m;
	uint64_t in[2] = {0x1111, 0x2222}, out[1] = {0x3333}, w[3] = {0xa0, 0xb0, 0xc0};
	MoertBases b = {in, out, w, 0x100000};
	unsigned char buf[MOERT_MAXPARAM];
	size_t off[8], size;
	float f;

	ck_assert_int_eq(moert_param_layout(&m->k[0], off, &size), MOERT_OK);
	/* ptr,i32,ptr,f32,i64,i32,u64: natural alignment */
	ck_assert(off[0] == 0 && off[1] == 8 && off[2] == 16 && off[3] == 24 &&
		  off[4] == 32 && off[5] == 40 && off[6] == 48 && size == 56);
	ck_assert_int_eq(moert_marshal(m, &m->step[1], 7, &b, off, buf), MOERT_OK);
	ck_assert_uint_eq(get8(buf), 0x2222);	/* in:1 */
	ck_assert_int_eq(get4(buf + 8), 7);	/* T */
	ck_assert_uint_eq(get8(buf + 16), 0x100000 + 8);	/* buf:tmp+8 */
	memcpy(&f, buf + 24, 4), ck_assert(f == 1.0f);
	ck_assert_int_eq(get8(buf + 32), 5);
	ck_assert_uint_eq(get8(buf + 48), 3);
	ck_assert_int_eq(moert_marshal(m, &m->step[0], 1, &b, off, buf), MOERT_OK);
	ck_assert_uint_eq(get8(buf), 0xb0);	/* w:s */
	ck_assert_int_eq(get4(buf + 8), -3);
	memcpy(&f, buf + 24, 4), ck_assert(f == 0.25f);
	ck_assert_int_eq(get8(buf + 32), -9);
	ck_assert_uint_eq(get8(buf + 48), UINT64_MAX);
	ck_assert_int_eq(moert_marshal(m, &m->step[3], 2, &b, off, buf), MOERT_OK);
	ck_assert_uint_eq(get8(buf), 0x3333);	/* out:0 */
	ck_assert_uint_eq(get8(buf + 16), 0x100000 + 4096);	/* buf:acc */
	moert_unload(p);
}
END_TEST

START_TEST(test_memory_plan)
{
	moert_program *p = host();
	uint64_t woff[3], wsize, total;

	ck_assert_int_eq(moert_mem_plan(p->m, 512, woff, &wsize, &total), MOERT_OK);
	ck_assert(woff[0] == 0 && woff[2] == 256);	/* real: at= */
	ck_assert_uint_eq(woff[1], 512);		/* synth: after */
	ck_assert_uint_eq(wsize, 1024);		/* 512 + 400 rounded to 256 */
	ck_assert_uint_eq(total, 1024 + 8192);
	ck_assert_int_eq(moert_mem_plan(p->m, 300, woff, &wsize, &total), MOERT_OK);
	ck_assert_uint_eq(woff[1], 512);
	moert_unload(p);
}
END_TEST

Suite *
runtime_suite(void)
{
	Suite *s = suite_create("runtime");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_open_without_driver_is_enodriver);
	tcase_add_test(tc, test_open_non_cuda_library_is_enodriver);
	tcase_add_test(tc, test_open_default_library);
	tcase_add_test(tc, test_pick_code_by_compute_capability);
	tcase_add_test(tc, test_verify_refuses_corruption_truncation_version);
	tcase_add_test(tc, test_every_flipped_byte_refused_by_verify_and_load);
	tcase_add_test(tc, test_load_host_refuses_bad_bundles);
	tcase_add_test(tc, test_load_file_checks_bundle_before_driver);
	tcase_add_test(tc, test_out_of_device_memory_is_enomem);
	tcase_add_test(tc, test_program_queries);
	tcase_add_test(tc, test_check_input_shapes_dtypes_tokens);
	tcase_add_test(tc, test_run_checks_tokens_and_pointers_first);
	tcase_add_test(tc, test_read_buffer_refusals_host_only);
	tcase_add_test(tc, test_grid_and_memset_at_t);
	tcase_add_test(tc, test_keep_arch_lines);
	tcase_add_test(tc, test_param_layout_and_marshal);
	tcase_add_test(tc, test_memory_plan);
	suite_add_tcase(s, tc);
	return s;
}
