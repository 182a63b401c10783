/*
 * check_runtime.c — everything the runtime decides without a GPU: no
 * driver (missing or not CUDA) is MOERT_ENODRIVER with a message; code
 * choice per compute capability; bad bundles refused by moert_verify and
 * by loading before the driver is touched; shapes, dtypes and T checked;
 * grids, memsets, the memory plan and kernel params computed at T.
 */
#include <check.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
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
	bundle_put32(b + 8, 3);	/* 2 is the format of several programs */
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

/* A stand-in cuTensorMapEncodeTiled: records its arguments, fills the map. */
static struct {
	int calls, dtype, swizzle, l2, oob;
	unsigned rank, box[3];
	void *base;
	unsigned long long dims[3], strides[2];
	CUresult ret;
} enc;

static CUresult
fake_encode(void *map, int dtype, unsigned rank, void *base, const unsigned long long *dims,
	    const unsigned long long *strides, const unsigned *box, const unsigned *es,
	    int interleave, int swizzle, int l2, int oob)
{
	enc.calls++;
	enc.dtype = dtype, enc.rank = rank, enc.base = base, enc.swizzle = swizzle;
	enc.l2 = l2, enc.oob = oob;
	for (unsigned i = 0; i < rank && i < 3; i++) {
		enc.dims[i] = dims[i], enc.box[i] = box[i];
		ck_assert_uint_eq(es[i], 1);
		if (i + 1 < rank)
			enc.strides[i] = strides[i];
	}
	ck_assert_int_eq(interleave, 0);
	memset(map, 0xa5, 128);
	return enc.ret;
}

/* tmap arguments: 128 bytes at 64-byte alignment, encoded at each marshal
 * from the run's pointers and T; the driver's errors and its absence are
 * statuses with messages. */
START_TEST(test_marshal_tensor_maps)
{
	static const char text[] =
		"moeb 1\nmoec 0.1.0\nsynthetic none\nmax_tokens 64\nsym T\narena 65536\n"
		"input x bf16 T,128\noutput y bf16 T,64\n"
		"kernel g target=sm_90a params=ptr,i32,tmap,i32 regs=1 smem=0 spills=0\n"
		"tensormap a of=in:0 dtype=bf16 dims=128,2*T strides=256 box=64,128 swizzle=128\n"
		"launch g grid=1,1,1 block=384,1,1 smem=0 args=in:0,T,tmap:a,T\n";
	MoertTmapEncode *saved = moert_cu.cuTensorMapEncodeTiled;
	uint64_t in[1] = {0x7f0000001000}, out[1] = {0};
	MoertBases b = {in, out, NULL, 0};
	unsigned char buf[MOERT_MAXPARAM];
	size_t off[4], size;
	Arena *a = arena_new(0);
	Manifest *m;
	Diag d;

	diag_init(&d, NULL);
	ck_assert_int_eq(bundle_manifest_parse(a, "m", text, strlen(text), &m, &d), BUNDLE_OK);
	ck_assert_int_eq(moert_param_layout(&m->k[0], off, &size), MOERT_OK);
	ck_assert(off[0] == 0 && off[1] == 8 && off[2] == 64 && off[3] == 192 && size == 196);
	memset(&enc, 0, sizeof enc);
	moert_cu.cuTensorMapEncodeTiled = fake_encode;
	memset(buf, 0, sizeof buf);
	ck_assert_int_eq(moert_marshal(m, &m->step[0], 7, &b, off, buf), MOERT_OK);
	ck_assert_int_eq(enc.calls, 1);
	ck_assert(enc.dtype == 9 && enc.rank == 2 && enc.base == (void *)(uintptr_t)0x7f0000001000);
	ck_assert(enc.dims[0] == 128 && enc.dims[1] == 14 && enc.strides[0] == 256);
	ck_assert(enc.box[0] == 64 && enc.box[1] == 128 && enc.swizzle == 3 && enc.l2 == 2 && enc.oob == 0);
	ck_assert(buf[64] == 0xa5 && buf[191] == 0xa5 && buf[63] == 0 && get4(buf + 192) == 7);
	enc.ret = 1;	/* CUDA_ERROR_INVALID_VALUE */
	ck_assert_int_eq(moert_marshal(m, &m->step[0], 7, &b, off, buf), MOERT_ELAUNCH);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "tensormap 'a'"));
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "cuTensorMapEncodeTiled"));
	moert_cu.cuTensorMapEncodeTiled = NULL;
	ck_assert_int_eq(moert_marshal(m, &m->step[0], 7, &b, off, buf), MOERT_ELAUNCH);
	ck_assert_ptr_nonnull(strstr(moert_last_error(), "lacks"));
	moert_cu.cuTensorMapEncodeTiled = saved;
	arena_free(a);
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

/* --- NCCL (runtime/nccl.c) on the stand-in libnccl, tests/gpu/fakenccl.c ---- */

#define FAKENCCL MOEC_BINARY_DIR "/tests/gpu/libfakenccl.so"
#define FAKECUDA MOEC_BINARY_DIR "/tests/gpu/libfakecuda.so"

static char *
slurp_log(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = 0;
	return buf;
}

START_TEST(test_nccl_missing_library_is_enodriver)
{
	int v;

	setenv("MOERT_LIBNCCL", "/nonexistent/libnccl.so.2", 1);
	ck_assert_int_eq(moert_nccl_version(&v), MOERT_ENODRIVER);
	ck_assert_msg(strstr(moert_last_error(), "cannot load NCCL") &&
		      strstr(moert_last_error(), "MOERT_LIBNCCL"), "%s", moert_last_error());
	/* libcuda is not NCCL: refused by its missing symbol */
	setenv("MOERT_LIBNCCL", FAKECUDA, 1);
	ck_assert_int_eq(moert_nccl_version(&v), MOERT_ENODRIVER);
	ck_assert_msg(strstr(moert_last_error(), "no symbol ncclGetVersion"), "%s", moert_last_error());
	setenv("MOERT_LIBNCCL", FAKENCCL, 1);
	ck_assert_int_eq(moert_nccl_version(&v), MOERT_OK);
	ck_assert_int_eq(v, 22703);
	ck_assert_str_eq(moert_status_name(MOERT_ECOMM), "MOERT_ECOMM");
}
END_TEST

typedef struct {
	int rank, n;
	const char *id;
	size_t chunk;
	moert_status s;
	unsigned char got[8 * 64], gathered[8 * 4];
	char err[512];		/* moert_last_error() is per thread */
} RankRun;

/* One rank: open the device, join, all_to_all [n][chunk] bytes (byte =
 * 16*sender + destination), all_gather a count, leave. */
static void *
rank_main(void *arg)
{
	RankRun *r = arg;
	moert_device *dev = NULL;
	moert_comm *c = NULL;
	unsigned char send[8 * 64];
	uint64_t dsend = 0, drecv = 0, dcount = 0, dall = 0;
	uint32_t count = 100u + (uint32_t)r->rank;

	for (int p = 0; p < r->n; p++)
		memset(send + (size_t)p * r->chunk, 16 * r->rank + p, r->chunk);
	if ((r->s = moert_open(0, &dev)) || (r->s = moert_comm_init(dev, r->n, r->rank, r->id, &c)))
		goto out;
	ck_assert_int_eq(moert_comm_rank(c), r->rank);
	ck_assert_int_eq(moert_comm_size(c), r->n);
	size_t bytes = (size_t)r->n * r->chunk;
	if ((r->s = moert_malloc(dev, bytes, &dsend)) || (r->s = moert_malloc(dev, bytes, &drecv)) ||
	    (r->s = moert_malloc(dev, 4, &dcount)) || (r->s = moert_malloc(dev, 4 * (size_t)r->n, &dall)) ||
	    (r->s = moert_memcpy_htod(dev, dsend, send, bytes)) ||
	    (r->s = moert_memcpy_htod(dev, dcount, &count, 4)) ||
	    (r->s = moert_all_to_all(c, dsend, drecv, r->chunk, NULL)) ||
	    (r->s = moert_all_gather(c, dcount, dall, 4, NULL)) ||
	    (r->s = moert_comm_check(c)) ||
	    (r->s = moert_memcpy_dtoh(dev, r->got, drecv, bytes)) ||
	    (r->s = moert_memcpy_dtoh(dev, r->gathered, dall, 4 * (size_t)r->n)))
		goto out;
out:
	snprintf(r->err, sizeof r->err, "%s", r->s ? moert_last_error() : "");
	if (dsend)
		moert_free(dev, dsend);
	if (drecv)
		moert_free(dev, drecv);
	if (dcount)
		moert_free(dev, dcount);
	if (dall)
		moert_free(dev, dall);
	moert_comm_free(c);
	if (dev)
		moert_close(dev);
	return NULL;
}

static void
run_ranks(int n, RankRun *r)
{
	char id[MOERT_NCCL_ID_BYTES];
	pthread_t th[8];

	ck_assert_msg(moert_nccl_unique_id(id) == MOERT_OK, "%s", moert_last_error());
	for (int i = 0; i < n; i++) {
		r[i] = (RankRun){.rank = i, .n = n, .id = id, .chunk = 48};
		ck_assert_int_eq(pthread_create(&th[i], NULL, rank_main, &r[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
}

START_TEST(test_nccl_all_to_all_over_ranks)
{
	char logp[] = "/tmp/fakenccl.XXXXXX";
	int fd = mkstemp(logp);
	RankRun r[4];

	ck_assert_int_ge(fd, 0);
	close(fd);
	setenv("MOERT_LIBCUDA", FAKECUDA, 1);
	setenv("MOERT_LIBNCCL", FAKENCCL, 1);
	setenv("FAKENCCL_LOG", logp, 1);
	unsetenv("NCCL_NVLS_ENABLE");
	for (int n = 1; n <= 4; n *= 2) {
		run_ranks(n, r);
		for (int i = 0; i < n; i++) {
			ck_assert_msg(r[i].s == MOERT_OK, "rank %d of %d: %s", i, n, r[i].err);
			for (int s = 0; s < n; s++) {	/* chunk s came from rank s, meant for i */
				ck_assert_int_eq(r[i].got[(size_t)s * r[i].chunk], 16 * s + i);
				ck_assert_int_eq(r[i].got[(size_t)s * r[i].chunk + r[i].chunk - 1], 16 * s + i);
				ck_assert_int_eq(r[i].gathered[4 * s], 100 + s);
			}
		}
	}
	/* NVLink multicast off, as the runtime sets it when the caller has not */
	ck_assert_str_eq(getenv("NCCL_NVLS_ENABLE"), "0");
	/* one group per all_to_all: a send and a receive for every peer */
	const char *log = slurp_log(logp);
	ck_assert_msg(strstr(log, "0 ncclSend peer=0 count=48 dtype=1\n0 ncclRecv peer=0 count=48 dtype=1\n"
			      "0 ncclSend peer=1 count=48 dtype=1\n0 ncclRecv peer=1 count=48 dtype=1\n"), "%s", log);
	ck_assert_msg(strstr(log, "3 ncclRecv peer=3 count=48"), "%s", log);
	ck_assert_msg(strstr(log, "2 ncclAllGather count=4 dtype=1"), "%s", log);
	ck_assert_msg(strstr(log, "ncclCommInitRank n=4 rank=3"), "%s", log);
	unlink(logp);
	unsetenv("FAKENCCL_LOG");
	typedef int LiveFn(void);
	void *h = dlopen(FAKENCCL, RTLD_NOW);
	LiveFn *live = h ? (LiveFn *)dlsym(h, "fakenccl_live") : NULL;
	ck_assert_ptr_nonnull(live);
	ck_assert_int_eq(live(), 0);	/* every communicator made was destroyed */
}
END_TEST

/* Every NCCL failure is MOERT_ECOMM with NCCL's message. */
START_TEST(test_nccl_errors_are_statuses)
{
	static const char *const fail[] = {"ncclCommInitRank", "ncclGroupStart", "ncclSend", "ncclRecv",
					    "ncclGroupEnd", "ncclAllGather", "ncclCommGetAsyncError",
					    "ncclGetUniqueId"};
	RankRun r[2];
	char id[MOERT_NCCL_ID_BYTES];

	setenv("MOERT_LIBCUDA", FAKECUDA, 1);
	setenv("MOERT_LIBNCCL", FAKENCCL, 1);
	setenv("NCCL_NVLS_ENABLE", "1", 1);	/* the caller's choice stays */
	for (size_t i = 0; i < NELEM(fail); i++) {
		setenv("FAKENCCL_FAIL", fail[i], 1);
		const char *e = r[0].err;
		if (strcmp(fail[i], "ncclGetUniqueId") == 0) {
			ck_assert_int_eq(moert_nccl_unique_id(id), MOERT_ECOMM);
			e = moert_last_error();
		} else {
			run_ranks(1, r);
			ck_assert_msg(r[0].s == MOERT_ECOMM, "%s: %s", fail[i], moert_status_name(r[0].s));
		}
		ck_assert_msg(strstr(e, fail[i]) && strstr(e, "unhandled system error") &&
			      strstr(e, "told to fail"), "%s: %s", fail[i], e);
	}
	unsetenv("FAKENCCL_FAIL");
	setenv("FAKENCCL_ASYNC", "6", 1);	/* a peer went away */
	run_ranks(1, r);
	ck_assert_int_eq(r[0].s, MOERT_ECOMM);
	ck_assert_msg(strstr(r[0].err, "remote process exited"), "%s", r[0].err);
	unsetenv("FAKENCCL_ASYNC");
	ck_assert_str_eq(getenv("NCCL_NVLS_ENABLE"), "1");
	unsetenv("NCCL_NVLS_ENABLE");
	/* bad arguments, before NCCL is asked */
	moert_comm *c = (moert_comm *)1;
	ck_assert_int_eq(moert_comm_init(NULL, 2, 0, id, &c), MOERT_EINVAL);
	ck_assert_ptr_eq(c, (moert_comm *)1);
	ck_assert_int_eq(moert_comm_wrap((void *)8, 2, 2, &c), MOERT_EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(moert_all_to_all(NULL, 0, 0, 16, NULL), MOERT_EINVAL);
}
END_TEST

/* The caller's communicator: used, and left for the caller to destroy. */
START_TEST(test_nccl_callers_communicator)
{
	typedef struct {
		char b[MOERT_NCCL_ID_BYTES];
	} Uid;
	typedef int InitFn(void **, int, Uid, int);
	typedef int IdFn(void *);
	typedef int LiveFn(void);
	typedef int DestroyFn(void *);
	Uid uid;
	void *h = dlopen(FAKENCCL, RTLD_NOW), *comm = NULL;
	moert_comm *c = NULL;
	moert_device *dev = NULL;
	uint64_t a = 0, b = 0;
	unsigned char in[16] = "caller's bytes!", out[16] = {0};

	setenv("MOERT_LIBCUDA", FAKECUDA, 1);
	setenv("MOERT_LIBNCCL", FAKENCCL, 1);
	ck_assert_ptr_nonnull(h);
	IdFn *getid = (IdFn *)dlsym(h, "ncclGetUniqueId");
	InitFn *init = (InitFn *)dlsym(h, "ncclCommInitRank");
	LiveFn *live = (LiveFn *)dlsym(h, "fakenccl_live");
	DestroyFn *destroy = (DestroyFn *)dlsym(h, "ncclCommDestroy");
	ck_assert_int_eq(getid(&uid), 0);
	ck_assert_int_eq(init(&comm, 1, uid, 0), 0);
	ck_assert_int_eq(moert_comm_wrap(comm, 1, 0, &c), MOERT_OK);
	ck_assert_int_eq(moert_open(0, &dev), MOERT_OK);
	ck_assert_int_eq(moert_malloc(dev, 16, &a), MOERT_OK);
	ck_assert_int_eq(moert_malloc(dev, 16, &b), MOERT_OK);
	ck_assert_int_eq(moert_memcpy_htod(dev, a, in, 16), MOERT_OK);
	ck_assert_int_eq(moert_all_to_all(c, a, b, 16, NULL), MOERT_OK);
	ck_assert_int_eq(moert_memcpy_dtoh(dev, out, b, 16), MOERT_OK);
	ck_assert_mem_eq(in, out, 16);
	int before = live();
	moert_comm_free(c);
	ck_assert_int_eq(live(), before);	/* not ours to destroy */
	destroy(comm);
	moert_free(dev, a);
	moert_free(dev, b);
	moert_close(dev);
}
END_TEST


/* --- an expert-parallel program: its all_to_all steps on NCCL -------------- */

/* Rank r of n: x (i32 [n*T]) copied to `send`, all_to_all to `recv`, copied
 * to y; "copy_i32" is fakecuda's kernel (gpu_runtime_check.c's PTX). */
static unsigned char *
ep_bundle(int rank, int n, size_t *len)
{
	BundleWriter w;
	unsigned char *b;
	char *m, dims[16];
	Diag d;

	snprintf(dims, sizeof dims, n > 1 ? "%d*T" : "T", n);
	ck_assert_int_ge(asprintf(&m,
		"moeb 1\nmoec 0.1.0\nsynthetic none\nmax_tokens 64\nsym T\narena 4096\n"
		"ep rank=%d ranks=%d experts=%d,%d-%d\n"
		"input x i32 %s\noutput y i32 %s\n"
		"buffer send offset=0 bytes=%d*T\nbuffer recv offset=2048 bytes=%d*T\n"
		"kernel copy_i32 target=sm_80 params=ptr,ptr,i32 regs=0 smem=0 spills=0\n"
		"launch copy_i32 grid=1,1,1 block=256,1,1 smem=0 args=in:0,buf:send,i32:%d\n"
		"all_to_all src=buf:send dst=buf:recv chunk=4*T\n"
		"launch copy_i32 grid=1,1,1 block=256,1,1 smem=0 args=buf:recv,out:0,i32:%d\n",
		rank, n, 2 * rank, 2 * n + rank, 2 * n + rank + 1, dims, dims, 4 * n, 4 * n, 8 * n,
		8 * n), 0);
	diag_init(&d, stderr);
	bundle_writer_init(&w, NULL);
	bundle_add(&w, "manifest", m, strlen(m), &d);
	bundle_add(&w, "ptx:sm_80", ptx, strlen(ptx), &d);
	bundle_add(&w, "weights", wts, sizeof wts, &d);
	ck_assert_int_eq(bundle_write(&w, &b, len, &d), 0);
	free(m);
	return b;
}

typedef struct {
	int rank, n, graph;
	const char *id;
	moert_status s, nocomm;
	int32_t y[8 * 8];
	char err[512], nocomm_err[512];
} EpRun;

/* One rank at T = 8: x[d*T + j] = 1000*rank + 100*d + j. */
static void *
ep_rank_main(void *arg)
{
	EpRun *r = arg;
	moert_device *dev = NULL;
	moert_program *p = NULL;
	moert_comm *c = NULL;
	int32_t x[8 * 8];
	uint64_t dx = 0, dy = 0;
	size_t len, bytes = 4 * 8 * (size_t)r->n;
	unsigned char *b = ep_bundle(r->rank, r->n, &len);
	int nr;

	for (int d = 0; d < r->n; d++)
		for (int j = 0; j < 8; j++)
			x[d * 8 + j] = 1000 * r->rank + 100 * d + j;
	if ((r->s = moert_open(0, &dev)) || (r->s = moert_load(dev, b, len, &p)) ||
	    (r->s = moert_malloc(dev, bytes, &dx)) || (r->s = moert_malloc(dev, bytes, &dy)) ||
	    (r->s = moert_memcpy_htod(dev, dx, x, bytes)))
		goto out;
	ck_assert_int_eq(moert_ep_rank(p, &nr), r->rank);
	ck_assert_int_eq(nr, r->n);
	r->nocomm = moert_run(p, 8, &dx, &dy, NULL, 0);	/* no communicator yet */
	snprintf(r->nocomm_err, sizeof r->nocomm_err, "%s", moert_last_error());
	if ((r->s = moert_comm_init(dev, r->n, r->rank, r->id, &c)) ||
	    (r->s = moert_program_set_comm(p, c)) ||
	    (r->s = moert_run(p, 8, &dx, &dy, NULL, r->graph)) ||
	    (r->s = moert_sync(dev)) || (r->s = moert_memcpy_dtoh(dev, r->y, dy, bytes)))
		goto out;
out:
	snprintf(r->err, sizeof r->err, "%s", r->s ? moert_last_error() : "");
	if (dx)
		moert_free(dev, dx);
	if (dy)
		moert_free(dev, dy);
	moert_unload(p);
	moert_comm_free(c);
	if (dev)
		moert_close(dev);
	free(b);
	return NULL;
}

static void
ep_ranks(int n, int graph, EpRun *r)
{
	char id[MOERT_NCCL_ID_BYTES];
	pthread_t th[8];

	ck_assert_msg(moert_nccl_unique_id(id) == MOERT_OK, "%s", moert_last_error());
	for (int i = 0; i < n; i++) {
		r[i] = (EpRun){.rank = i, .n = n, .graph = graph, .id = id};
		ck_assert_int_eq(pthread_create(&th[i], NULL, ep_rank_main, &r[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
}

START_TEST(test_ep_program_all_to_all_steps)
{
	EpRun r[4];

	setenv("MOERT_LIBCUDA", FAKECUDA, 1);
	setenv("MOERT_LIBNCCL", FAKENCCL, 1);
	/* plain runs only: fakenccl's exchanges run at once, not into a stream's
	 * capture, so the CUDA-graph path (use_graph) is for the GPU check */
	for (int n = 1; n <= 4; n *= 2) {
		ep_ranks(n, 0, r);
		for (int i = 0; i < n; i++) {
			ck_assert_msg(r[i].s == MOERT_OK, "rank %d of %d: %s", i, n, r[i].err);
			ck_assert_int_eq(r[i].nocomm, MOERT_EINVAL);
			ck_assert_msg(strstr(r[i].nocomm_err, "attach a communicator"), "%s",
				      r[i].nocomm_err);
			for (int s = 0; s < n; s++)	/* chunk s: rank s's chunk i */
				for (int j = 0; j < 8; j++)
					ck_assert_int_eq(r[i].y[s * 8 + j], 1000 * s + 100 * i + j);
		}
	}
	/* an NCCL failure in the step: MOERT_ECOMM, naming the step */
	setenv("FAKENCCL_FAIL", "ncclSend", 1);
	ep_ranks(2, 0, r);
	unsetenv("FAKENCCL_FAIL");
	ck_assert_int_eq(r[0].s, MOERT_ECOMM);
	ck_assert_msg(strstr(r[0].err, "all_to_all (manifest line 14)"), "%s", r[0].err);
}
END_TEST

/* The manifest's ep and all_to_all lines: what the parser refuses. */
START_TEST(test_ep_manifest_refusals)
{
	static const struct {
		const char *from, *to, *want;
	} bad[] = {
		{"ep rank=1 ranks=2 experts=2,5-6\n", "", "all_to_all needs an 'ep' line"},
		{"ep rank=1 ranks=2", "ep rank=2 ranks=2", "out of range"},
		{"experts=2,5-6", "experts=5,4", "experts must ascend"},
		{"experts=2,5-6", "experts=7-5", "experts must ascend"},
		{"chunk=4*T", "chunk=8*T", "2 chunks overrun buffer 'send'"},
		{"src=buf:send", "src=in:0", "needs buf:NAME operands"},
		{"dst=buf:recv", "dst=buf:nope", "undeclared buffer 'nope'"},
	};
	size_t len;
	unsigned char *b = ep_bundle(1, 2, &len);
	const BundleSection *ms;
	Bundle bb;
	Diag d;
	Arena *a = arena_new(0);

	diag_init(&d, NULL);
	ck_assert_int_eq(bundle_read(a, "ep.moeb", b, len, &bb, &d), BUNDLE_OK);
	ck_assert_int_eq(bb.manifest->ep_ranks, 2);
	ck_assert_int_eq(bb.manifest->ep_rank, 1);
	ck_assert_str_eq(bb.manifest->ep_experts, "2,5-6");
	ms = bundle_find(&bb, "manifest");
	for (size_t i = 0; i < NELEM(bad); i++) {
		char *t = strndup((const char *)ms->data, ms->size), *at = strstr(t, bad[i].from), *u;
		Manifest *m;
		ck_assert_ptr_nonnull(at);
		ck_assert_int_ge(asprintf(&u, "%.*s%s%s", (int)(at - t), t, bad[i].to,
					  at + strlen(bad[i].from)), 0);
		char *msg = NULL;
		size_t mlen = 0;
		FILE *f = open_memstream(&msg, &mlen);
		diag_init(&d, f);
		ck_assert_int_ne(bundle_manifest_parse(a, "m", u, strlen(u), &m, &d), BUNDLE_OK);
		fclose(f);
		ck_assert_msg(strstr(msg, bad[i].want), "%s: %s", bad[i].want, msg);
		free(t), free(u), free(msg);
	}
	arena_free(a);
	free(b);
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
	tcase_add_test(tc, test_marshal_tensor_maps);
	tcase_add_test(tc, test_memory_plan);
	tcase_add_test(tc, test_nccl_missing_library_is_enodriver);
	tcase_add_test(tc, test_nccl_all_to_all_over_ranks);
	tcase_add_test(tc, test_nccl_errors_are_statuses);
	tcase_add_test(tc, test_nccl_callers_communicator);
	tcase_add_test(tc, test_ep_program_all_to_all_steps);
	tcase_add_test(tc, test_ep_manifest_refusals);
	suite_add_tcase(s, tc);
	return s;
}
