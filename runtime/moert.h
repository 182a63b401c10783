/*
 * moert.h — the moec runtime: load a compiled bundle (.moeb) and run it on an
 * NVIDIA GPU through the CUDA driver API.
 *
 * This is the only header a serving program needs.  It exposes no CUDA types:
 * streams and device pointers are passed as void* / uint64_t.  libcuda.so.1 is
 * loaded with dlopen at moert_open, so linking and starting need no CUDA
 * toolkit.  Every function returns a status; on failure moert_last_error()
 * says what and where.  Nothing here exits or aborts.
 */
#ifndef MOERT_H
#define MOERT_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	MOERT_OK = 0,
	MOERT_ENODRIVER,	/* libcuda.so.1 missing or unusable */
	MOERT_ENODEV,		/* no device with that ordinal */
	MOERT_EARCH,		/* no code in the bundle for this device */
	MOERT_EFORMAT,		/* corrupt or truncated bundle, bad checksum */
	MOERT_EVERSION,		/* bundle format version not supported */
	MOERT_ESHAPE,		/* input/output shape or dtype mismatch */
	MOERT_ETOKENS,		/* T outside 1..max_tokens */
	MOERT_ENOMEM,		/* device or host out of memory */
	MOERT_ELOAD,		/* module load / JIT failed */
	MOERT_ELAUNCH,		/* a launch or a driver call during run failed */
	MOERT_EINVAL,		/* bad argument */
	MOERT_EIO,		/* file could not be read */
} moert_status;

typedef struct moert_device moert_device;
typedef struct moert_program moert_program;

/* Shape of one input or output as declared in the bundle, resolved for T. */
typedef struct {
	const char *name;
	const char *dtype;	/* "bf16", "f32", ... */
	int rank;
	int64_t dim[8];		/* with T substituted */
	size_t bytes;
} moert_tensor_info;

const char *moert_status_name(moert_status s);
/* Message of the last failure on this thread, "" if none. */
const char *moert_last_error(void);

moert_status moert_open(int ordinal, moert_device **out);
void moert_close(moert_device *dev);
/* "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB" */
const char *moert_device_name(const moert_device *dev);

/* Load from memory or a file: verify, pick code, allocate the arena, upload or
 * generate weights, run the init plan.  The bytes may be freed afterwards. */
moert_status moert_load(moert_device *dev, const void *bundle, size_t len,
			moert_program **out);
moert_status moert_load_file(moert_device *dev, const char *path,
			     moert_program **out);
void moert_unload(moert_program *p);

/*
 * Loading in two stages, so that a bad bundle or bad inputs are reported
 * before the driver is touched.  moert_load_host verifies the bundle and
 * parses its manifest: the program answers every query below but cannot
 * run.  The bytes stay borrowed until moert_load_device (which does the
 * rest of moert_load) returns or the program is unloaded.
 */
moert_status moert_load_host(const void *bundle, size_t len,
			     moert_program **out);
moert_status moert_load_device(moert_device *dev, moert_program *p);
/* The code section chosen at load ("ptx:sm_80"); "" before. */
const char *moert_code_section(const moert_program *p);

int moert_num_inputs(const moert_program *p);
int moert_num_outputs(const moert_program *p);
int64_t moert_max_tokens(const moert_program *p);
/* 1 when no input or output has a T dim (a static model: T plays no part). */
int moert_is_static(const moert_program *p);
/* "f32", or "bf16"/"f16" when f32 GEMM operands were rounded (--precision). */
const char *moert_precision(const moert_program *p);
moert_status moert_input_info(const moert_program *p, int i, int64_t tokens,
			      moert_tensor_info *info);
moert_status moert_output_info(const moert_program *p, int i, int64_t tokens,
			       moert_tensor_info *info);
/*
 * Check a host tensor (dtype name as in moert_tensor_info, dims) against
 * input or output i.  *tokens is in/out: -1 on entry if not yet known;
 * the dims declared T must agree with it and give T in 1..max_tokens.
 * MOERT_ESHAPE or MOERT_ETOKENS with a message naming the tensor.
 */
moert_status moert_check_input(const moert_program *p, int i,
			       const char *dtype, int rank,
			       const int64_t *dim, int64_t *tokens);
moert_status moert_check_output(const moert_program *p, int i,
				const char *dtype, int rank,
				const int64_t *dim, int64_t *tokens);
/* Nominal work per run at T from the manifest's cost line (EINVAL: none). */
moert_status moert_cost(const moert_program *p, int64_t tokens,
			double *flops, double *bytes);

/*
 * Run the launch plan for T tokens on `stream` (NULL: the default stream).
 * inputs/outputs are device pointers (CUdeviceptr values), in declaration
 * order.  Asynchronous: synchronise the stream before reading outputs.
 * With use_graph, the plan for this T is captured once as a CUDA graph and
 * replayed (the pointers must then stay the same between calls).
 */
moert_status moert_run(moert_program *p, int64_t tokens,
		       const uint64_t *inputs, const uint64_t *outputs,
		       void *stream, int use_graph);

/* Small helpers so tools and tests need no CUDA headers. */
moert_status moert_malloc(moert_device *dev, size_t bytes, uint64_t *ptr);
moert_status moert_free(moert_device *dev, uint64_t ptr);
moert_status moert_memcpy_htod(moert_device *dev, uint64_t dst, const void *src, size_t n);
moert_status moert_memcpy_dtoh(moert_device *dev, void *dst, uint64_t src, size_t n);
moert_status moert_memset(moert_device *dev, uint64_t dst, unsigned char byte, size_t n);
moert_status moert_sync(moert_device *dev);
/* Device memory in use and total, for leak checks. */
moert_status moert_mem_info(moert_device *dev, size_t *free_bytes, size_t *total_bytes);

/* Timing with device events: median of `iters` runs after `warmup` runs. */
moert_status moert_bench(moert_program *p, int64_t tokens, const uint64_t *inputs,
			 const uint64_t *outputs, int use_graph, int warmup,
			 int iters, double *median_us);

/* Each launch step timed alone (median of iters, microseconds): us[i] for
 * manifest step i, 0 for init steps.  moert_num_steps() entries. */
moert_status moert_profile(moert_program *p, int64_t tokens, const uint64_t *inputs,
			   const uint64_t *outputs, int iters, double *us);
int moert_num_steps(const moert_program *p);
const char *moert_step_name(const moert_program *p, int i);	/* kernel name or "memset" */

/* Verify a bundle's structure and checksums without a GPU.  MOERT_OK or the
 * error, with the message in moert_last_error(). */
moert_status moert_verify(const void *bundle, size_t len);

#endif
