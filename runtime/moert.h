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
	MOERT_ECOMM,		/* an NCCL call failed (expert parallelism) */
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

/*
 * Programs.  A bundle of a whole model (moec compile --layers) holds one
 * program per decoder layer, named "layer.N", sharing their code
 * (docs/bundle.md §5); any other bundle holds one, named "main".  The
 * handle moert_load / moert_load_host return is program 0 and owns the
 * others: every function of this header works on any of them, and
 * moert_unload of the owner frees them all (of another program it does
 * nothing).  moert_load and moert_load_file put every program on the
 * device, loading the code once; moert_load_device loads the one program
 * it is given, so a tool may load a single layer of a large model.
 * moert_program_at and moert_find_program take any program of the bundle;
 * NULL (EINVAL in moert_last_error) when there is none.
 */
int moert_num_programs(const moert_program *p);
moert_program *moert_program_at(moert_program *p, int i);
moert_program *moert_find_program(moert_program *p, const char *name);
const char *moert_program_name(const moert_program *p);

int moert_num_inputs(const moert_program *p);
int moert_num_outputs(const moert_program *p);
int64_t moert_max_tokens(const moert_program *p);
/* 1 when no input or output has a T dim (a static model: T plays no part). */
int moert_is_static(const moert_program *p);
/* "f32", or "tf32"/"bf16"/"f16" when f32 GEMM operands were rounded (--precision). */
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

/*
 * Routing decisions, for tests that tell a routing flip from a wrong
 * kernel (docs/runtime.md, "Routing").  Route i names the arena buffers
 * holding the router's logits (dtype [T,experts]) and the experts it
 * picked (i32 [T,k], best first), and how it chooses: it ranks a value
 * per expert, `select` of the logits ("logit": themselves, "sigmoid",
 * "softmax": over the row, in f32) plus weight `bias` [experts] when not
 * NULL (a selection bias: moert_read_weight reads it); the best topk_group
 * of `groups` groups (a group scoring as its best value, or its best two
 * summed with top2), then the best k of the kept groups' experts.  A
 * bundle without "route" lines has none.
 */
typedef struct {
	const char *logits, *ids;	/* arena buffer names */
	const char *dtype;		/* the logits': "f32", "bf16", "f16" */
	int experts, k, groups, topk_group, top2;
	const char *select;		/* "logit", "sigmoid" or "softmax" */
	const char *bias;		/* a weight's name, or NULL */
} moert_route_info;
int moert_num_routes(const moert_program *p);
moert_status moert_route_info_get(const moert_program *p, int i, moert_route_info *info);
/* Bytes of arena buffer `name` at T (EINVAL: no such buffer). */
moert_status moert_buffer_size(const moert_program *p, const char *name,
			       int64_t tokens, size_t *bytes);
/*
 * Run the plan for T as moert_run does (default stream, no graph) but only
 * through the last step that names buffer `name`, so that no later step has
 * reused its bytes; synchronise and copy the buffer into host (`bytes`
 * must be moert_buffer_size's).  Uses the program's workspace (its own or
 * the one set).  Slow and for tests: it runs part of the plan again.
 */
moert_status moert_read_buffer(moert_program *p, const char *name, int64_t tokens,
			       const uint64_t *inputs, const uint64_t *outputs,
			       void *host, size_t bytes);

/*
 * Copy weight `name` from the device into host (`bytes` must be its
 * moert_weight_info bytes), as the program holds it: uploaded, generated
 * at load (synth), re-laid out by init steps, or the caller's (bound).
 * For tests; EINVAL: no such weight, a wrong size, not on a device.
 */
moert_status moert_read_weight(moert_program *p, const char *name, void *host, size_t bytes);

/*
 * Tuning (docs/runtime.md §7, `moert tune`): a bundle compiled with
 * `moec compile --tune-candidates` carries candidate kernels for its GEMMs,
 * each another tiling of the GEMM of one launch of the plan, named by the
 * tuning table's key and variant (docs/codegen.md) and for T in tlo..thi.
 */
typedef struct {
	const char *kernel;	/* the candidate's kernel */
	const char *key;	/* its GEMM's tuning key, e.g. g128.m8.n1536.k2048.bf16.bf16.nk.t1-16 */
	const char *variant;	/* its tiling, e.g. 16x128x128.w1x4.s5.k2 */
	int64_t tlo, thi;	/* the T range of the key */
	const char *plan_kernel;	/* the plan's launch it could replace */
	const char *dtype;	/* the GEMM output's element type, "bf16", "f32", ... */
} moert_candidate_info;
int moert_num_candidates(const moert_program *p);
moert_status moert_candidate_info_get(const moert_program *p, int i, moert_candidate_info *info);
typedef struct {
	int warmup, iters;	/* untimed and timed launches (1..10000) */
	uint64_t flush;		/* device memory written before each launch (L2 eviction) */
	size_t flush_bytes;	/* its size; 0: no flush */
	int time_plan;		/* also time the plan's own launch (plan_us) */
} moert_tune_opts;
typedef struct {
	double us;		/* median of the candidate's launches */
	double plan_us;		/* the plan's launch, with time_plan; else -1 */
	double rel_err;		/* relative L2 of its output against the plan's (INFINITY: an
				 * element written by one and not the other) */
	int poisoned;		/* the output was poisoned before each (0: it shares a tensor
				 * with an operand, so unwritten elements go unnoticed) */
} moert_tune_result;
/*
 * Candidate i at T: the plan's steps before its GEMM run, the plan's launch
 * writes the reference output (poisoned first), the candidate writes it
 * again and is compared; then it is timed alone (each launch after the flush
 * and split-K's workspace reset).  Runs on the program's stream and waits.
 */
moert_status moert_tune_candidate(moert_program *p, int i, int64_t tokens, const uint64_t *inputs,
				  const uint64_t *outputs, const moert_tune_opts *o,
				  moert_tune_result *r);

/*
 * Expert parallelism over NCCL (docs/runtime.md, "Expert parallelism").
 * libnccl.so.2 (or $MOERT_LIBNCCL) is loaded with dlopen on the first call;
 * NCCL_NVLS_ENABLE=0 is set then unless the caller set it.  A communicator
 * is made here from a unique id (rank 0 calls moert_nccl_unique_id and
 * sends the 128 bytes to every rank, which calls moert_comm_init with its
 * device open on that thread), or wraps the caller's ncclComm_t
 * (moert_comm_wrap; not destroyed by moert_comm_free).  The collectives
 * are enqueued on `stream` with sizes fixed by the host (CUDA-graph
 * capturable).  Any NCCL failure is MOERT_ECOMM with NCCL's message.
 */
#define MOERT_NCCL_ID_BYTES 128
typedef struct moert_comm moert_comm;
moert_status moert_nccl_version(int *version);	/* 22703 for 2.27.3 */
moert_status moert_nccl_unique_id(void *id);	/* MOERT_NCCL_ID_BYTES bytes */
moert_status moert_comm_init(moert_device *dev, int nranks, int rank, const void *id,
			     moert_comm **out);
moert_status moert_comm_wrap(void *nccl_comm, int nranks, int rank, moert_comm **out);
void moert_comm_free(moert_comm *c);
int moert_comm_rank(const moert_comm *c);
int moert_comm_size(const moert_comm *c);
/* An asynchronous error of the communicator (a peer gone, say), if any. */
moert_status moert_comm_check(moert_comm *c);
/* recv + s*chunk = rank s's send + me*chunk, for every rank s: grouped
 * ncclSend/ncclRecv with every peer, itself included. */
moert_status moert_all_to_all(moert_comm *c, uint64_t send, uint64_t recv, size_t chunk,
			      void *stream);
/*
 * A program of an expert-parallel bundle (moec compile --ep=N: programs
 * rank.0 .. rank.{N-1}, each with an "ep" line) runs its all_to_all steps
 * on a communicator of N ranks in which it is its own rank: attach it here
 * (borrowed: it must outlive the runs; NULL detaches).  A run of such a
 * program without one is MOERT_EINVAL.  moert_ep_rank gives the program's
 * rank and *nranks (-1 and 0 for a program that is not expert-parallel).
 */
moert_status moert_program_set_comm(moert_program *p, moert_comm *c);
int moert_ep_rank(const moert_program *p, int *nranks);
/* recv + s*bytes = rank s's `bytes` at send (ncclAllGather). */
moert_status moert_all_gather(moert_comm *c, uint64_t send, uint64_t recv, size_t bytes,
			      void *stream);

/* Verify a bundle's structure and checksums without a GPU.  MOERT_OK or the
 * error, with the message in moert_last_error(). */
moert_status moert_verify(const void *bundle, size_t len);

/*
 * Serving: weights the caller already holds, workspaces the caller owns,
 * runs from many threads (docs/runtime.md, "Serving").
 *
 * Weights.  moert_weight_info describes weight i (dims exact, bytes);
 * moert_weight_flags says how the plan uses it.  moert_bind_weight, on a
 * host-only program (after moert_load_host, before moert_load_device),
 * makes the program read weight `name` at the caller's device pointer
 * instead of a copy of its own: dtype, rank and dims must be the
 * manifest's, the pointer a multiple of MOERT_WEIGHT_ALIGN (ESHAPE or
 * EINVAL naming the weight).  The init step that would write a bound
 * weight is skipped; init steps that read it run on the caller's bytes.
 * When every real weight is bound the bundle's weights are not uploaded;
 * when every generated one is, no generated region is allocated.  The
 * memory must outlive the program and hold the weight's bytes in the
 * manifest's layout.
 */
#define MOERT_WEIGHT_ALIGN 256
enum {
	MOERT_WEIGHT_RUN = 1,		/* a launch step reads it */
	MOERT_WEIGHT_GENERATED = 2,	/* made at load (synth), not in the bundle */
	MOERT_WEIGHT_BOUND = 4,		/* the caller's memory (moert_bind_weight) */
};
int moert_num_weights(const moert_program *p);
moert_status moert_weight_info(const moert_program *p, int i,
			       moert_tensor_info *info);
int moert_weight_flags(const moert_program *p, int i);
moert_status moert_bind_weight(moert_program *p, const char *name,
			       uint64_t ptr, const char *dtype, int rank,
			       const int64_t *dim);

/*
 * Workspaces.  A run's temporaries live in one workspace (the arena) of
 * moert_workspace_size bytes, aligned to MOERT_WEIGHT_ALIGN.  Programs that
 * run one after another on one stream can share one workspace: give it with
 * moert_set_workspace before moert_load_device and the program allocates
 * none of its own (60 layers, one arena).  Set on a loaded program, it
 * replaces the current one for later runs (its cached graphs are dropped);
 * ptr 0 returns to the program's own, if it has one.  Its contents are not
 * kept between runs: the plan zeroes what it needs.
 */
uint64_t moert_workspace_size(const moert_program *p);
moert_status moert_set_workspace(moert_program *p, uint64_t ptr,
				 uint64_t bytes);

/*
 * moert_run without the program's mutable state: the plan is enqueued on
 * `stream` with `workspace` (moert_workspace_size bytes; 0: the program's
 * own or the one set), no graph.  Safe to call from several threads on one
 * program at once, provided concurrent runs use different workspaces, or
 * the same one on the same stream.  Never synchronises or allocates, so a
 * caller may capture it in a CUDA graph of its own.
 */
moert_status moert_run_ws(moert_program *p, int64_t tokens,
			  const uint64_t *inputs, const uint64_t *outputs,
			  uint64_t workspace, void *stream);

/*
 * Streams and graphs of the caller's, for programs that embed the runtime
 * without CUDA headers (examples/embed.c).  A stream is a CUstream, a graph
 * a CUgraphExec, both as void*.  moert_capture_begin/_end record what is
 * enqueued on the stream in between (moert_run_ws, or moert_run without
 * use_graph) as a graph the caller replays with moert_graph_launch.
 */
moert_status moert_stream_create(moert_device *dev, void **stream);
moert_status moert_stream_destroy(moert_device *dev, void *stream);
moert_status moert_stream_sync(moert_device *dev, void *stream);
moert_status moert_capture_begin(moert_device *dev, void *stream);
moert_status moert_capture_end(moert_device *dev, void *stream, void **graph);
moert_status moert_graph_launch(moert_device *dev, void *graph, void *stream);
moert_status moert_graph_destroy(moert_device *dev, void *graph);

#endif
