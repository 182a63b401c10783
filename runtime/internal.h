/*
 * internal.h — what the runtime's files share and its unit tests reach:
 * the few CUDA driver types and entry points we use (declared here, since
 * cuda.h is never included), the device and program structs, and the pure
 * planning functions (code choice, shapes, grids, kernel params) that need
 * no GPU.  Not installed; serving programs include moert.h only.
 */
#ifndef MOERT_INTERNAL_H
#define MOERT_INTERNAL_H

#include "bundle.h"
#include "moert.h"

#define MOERT_INTERNAL __attribute__((visibility("hidden")))

/* --- the driver API subset, as the ABI defines it ----------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NO_DEVICE = 100,
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
	CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
	CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
	CU_JIT_ERROR_LOG_BUFFER = 5,
	CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
	CU_STREAM_NON_BLOCKING = 1,
	CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
	CU_EVENT_DEFAULT = 0,
};

/*
 * Every entry point: C name as resolved by dlsym, return, parameters.
 * The _v2 names are the ones cuda.h maps the plain names to.
 */
#define CU_FUNCS(X)                                                             \
	X(cuInit, (unsigned flags))                                             \
	X(cuDriverGetVersion, (int *v))                                         \
	X(cuDeviceGetCount, (int *n))                                           \
	X(cuDeviceGet, (CUdevice *d, int ordinal))                              \
	X(cuDeviceGetName, (char *name, int len, CUdevice d))                   \
	X(cuDeviceGetAttribute, (int *v, int attr, CUdevice d))                 \
	X(cuDeviceTotalMem_v2, (size_t *bytes, CUdevice d))                     \
	X(cuDevicePrimaryCtxRetain, (CUcontext *c, CUdevice d))                 \
	X(cuDevicePrimaryCtxRelease_v2, (CUdevice d))                           \
	X(cuCtxSetCurrent, (CUcontext c))                                       \
	X(cuCtxSynchronize, (void))                                             \
	X(cuMemAlloc_v2, (CUdeviceptr *p, size_t n))                            \
	X(cuMemFree_v2, (CUdeviceptr p))                                        \
	X(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n))        \
	X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n))              \
	X(cuMemsetD8_v2, (CUdeviceptr p, unsigned char v, size_t n))            \
	X(cuMemsetD8Async, (CUdeviceptr p, unsigned char v, size_t n,           \
			    CUstream s))                                        \
	X(cuMemGetInfo_v2, (size_t *free_bytes, size_t *total))                 \
	X(cuModuleLoadDataEx, (CUmodule *m, const void *image, unsigned n,      \
			       int *opts, void **vals))                         \
	X(cuModuleUnload, (CUmodule m))                                         \
	X(cuModuleGetFunction, (CUfunction *f, CUmodule m, const char *name))   \
	X(cuFuncSetAttribute, (CUfunction f, int attr, int v))                  \
	X(cuLaunchKernel, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, \
			   unsigned bx, unsigned by, unsigned bz,               \
			   unsigned smem, CUstream s, void **params,            \
			   void **extra))                                       \
	X(cuStreamCreate, (CUstream *s, unsigned flags))                        \
	X(cuStreamDestroy_v2, (CUstream s))                                     \
	X(cuStreamSynchronize, (CUstream s))                                    \
	X(cuEventCreate, (CUevent *e, unsigned flags))                          \
	X(cuEventDestroy_v2, (CUevent e))                                       \
	X(cuEventRecord, (CUevent e, CUstream s))                               \
	X(cuEventSynchronize, (CUevent e))                                      \
	X(cuEventElapsedTime, (float *ms, CUevent a, CUevent b))                \
	X(cuStreamBeginCapture_v2, (CUstream s, int mode))                      \
	X(cuStreamEndCapture, (CUstream s, CUgraph *g))                         \
	X(cuGraphInstantiateWithFlags, (CUgraphExec *e, CUgraph g,              \
					unsigned long long flags))              \
	X(cuGraphLaunch, (CUgraphExec e, CUstream s))                           \
	X(cuGraphExecDestroy, (CUgraphExec e))                                  \
	X(cuGraphDestroy, (CUgraph g))                                          \
	X(cuGetErrorName, (CUresult r, const char **s))                         \
	X(cuGetErrorString, (CUresult r, const char **s))

/* cuTensorMapEncodeTiled (CUDA 12+): optional, needed only by bundles with
 * tensormap lines; NULL when the driver lacks it. */
typedef CUresult MoertTmapEncode(void *map, int dtype, unsigned rank, void *base,
				 const unsigned long long *dims,
				 const unsigned long long *strides,
				 const unsigned *box, const unsigned *estrides,
				 int interleave, int swizzle, int l2promo, int oobfill);

/* cuLaunchKernelEx (CUDA 12+): optional, needed only by kernels launched in
 * thread-block clusters (a kernel line's cluster=N) and asked for by pdl=1
 * kernels (programmatic launches; without it they launch plainly); its
 * config as the driver's cuda.h lays it out. */
typedef struct {
	int id;			/* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
				 * CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 */
	char pad[4];
	unsigned val[16];	/* the 64-byte value union: x, y, z */
} MoertLaunchAttr;
typedef struct {
	unsigned grid[3], block[3], smem;
	CUstream stream;
	MoertLaunchAttr *attrs;
	unsigned nattrs;
} MoertLaunchConfig;
typedef CUresult MoertLaunchEx(const MoertLaunchConfig *cfg, CUfunction f, void **params, void **extra);
/* cuOccupancyMaxActiveClusters (CUDA 12+): optional; how many clusters of cfg's cluster dimension the
 * device holds at once (a cluster runs inside one GPC: clusters of 4 leave SMs of some GPCs idle) */
typedef CUresult MoertMaxClusters(int *n, CUfunction f, const MoertLaunchConfig *cfg);

typedef struct MoertDriver MoertDriver;
struct MoertDriver {
#define X(name, params) CUresult (*name) params;
	CU_FUNCS(X)
#undef X
	MoertTmapEncode *cuTensorMapEncodeTiled;
	MoertLaunchEx *cuLaunchKernelEx;
	MoertMaxClusters *cuOccupancyMaxActiveClusters;
};
extern MoertDriver moert_cu MOERT_INTERNAL;

/*
 * Call a driver entry point; on failure record the call, the error's name
 * and text and file:line in the thread's last error, and yield `st` (or
 * MOERT_ENOMEM when the driver is out of memory).  MOERT_OK on success.
 *	if ((s = CU(MOERT_ELOAD, cuModuleUnload, (mod))))
 *		return s;
 */
#define CU(st, fn, args)                                                       \
	moert_cu_check(moert_cu.fn args, (st), #fn #args, __FILE__, __LINE__)

/* --- the device and the program ----------------------------------------- */

struct moert_device {
	int ordinal;
	CUdevice dev;
	CUcontext ctx;
	int major, minor, sms;
	int smem_optin;		/* max dynamic shared memory per block */
	size_t total;
	char name[256];		/* "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB" */
};

typedef struct GraphEnt GraphEnt;
struct GraphEnt {
	int64_t tokens;
	uint64_t key;		/* hash of the input/output pointers */
	CUgraphExec exec;
};
#define MOERT_MAXGRAPHS 64

/* Pointers a kernel param can take, for marshalling. */
typedef struct MoertBases MoertBases;
struct MoertBases {
	const uint64_t *in, *out;	/* caller's device pointers */
	const uint64_t *w;		/* one per weight */
	uint64_t arena;			/* buffers are offsets from here */
};

struct moert_program {
	Arena *arena;		/* the manifest and every host-side table */
	Manifest *m;
	Bundle b;		/* sections point into `bytes` until loaded */
	const unsigned char *bytes;	/* borrowed: NULL once on the device */
	unsigned char *owned;	/* bytes read by moert_load_file */
	moert_device *dev;	/* NULL: host only (moert_load_host) */
	char code[BUNDLE_NAMELEN];	/* the section chosen, "ptx:sm_80" */
	int griddep;		/* its target is sm_90 or newer: pdl=1 kernels wait (programmatic launches) */
	CUmodule mod;
	CUfunction *fn;		/* per kernel */
	int *maxcl;		/* per kernel of clusters: the clusters the device holds at once (0: unknown) */
	CUdeviceptr mem;	/* the one allocation: weights, then arena */
	size_t memsize;
	uint64_t *wptr;		/* per weight */
	MoertBases bases;
	size_t **param_off;	/* per kernel, per param: offset in pbuf */
	unsigned char *pbuf;	/* param buffer, MOERT_MAXPARAM bytes */
	void **pptr;		/* per param: pointer into pbuf, for a launch */
	CUstream stream;	/* ours: init, graph capture, bench */
	GraphEnt graph[MOERT_MAXGRAPHS];
	int ngraph;
	/* serving (serve.c) */
	uint64_t *bound;	/* per weight: the caller's pointer, 0 if none */
	uint64_t ws;		/* the caller's workspace, 0 if none */
	uint64_t own_arena;	/* our arena in `mem`, 0 if none */
	/* several programs in one bundle (docs/bundle.md §5) */
	const char *name;	/* "layer.3"; "main" in a format-1 bundle */
	moert_program *owner;	/* NULL: this is the handle moert_load_host gave */
	moert_program **prog;	/* the owner's: every program, prog[0] itself */
	int nprog;
	int mod_borrowed;	/* mod is the owner's (same code section) */
	moert_comm *comm;	/* expert parallelism: the all_to_all steps' (borrowed) */
};
#define MOERT_MAXPARAM 4096	/* the driver's kernel parameter limit */

/* cuda.c */
moert_status moert_cu_check(CUresult r, moert_status st, const char *call,
			    const char *file, int line) MOERT_INTERNAL;
moert_status moert_driver_load(void) MOERT_INTERNAL;
moert_status moert_seterr(moert_status s, const char *fmt, ...)
	MOERT_INTERNAL __attribute__((format(printf, 2, 3)));
/* Prefix the last error with context: "loading weights: <old message>". */
moert_status moert_context(moert_status s, const char *fmt, ...)
	MOERT_INTERNAL __attribute__((format(printf, 2, 3)));
moert_status moert_bind(moert_device *dev) MOERT_INTERNAL;

/* load.c */
/* Free what moert_load_device made; the program is host-only again. */
void moert_release_device(moert_program *p) MOERT_INTERNAL;

/* run.c */
/* Enqueue step s (launch or memset) at `tokens` on `stream`. */
moert_status moert_launch_step(moert_program *p, const MStep *s,
			       int64_t tokens, CUstream stream) MOERT_INTERNAL;
/* The same with the pointers b and a param buffer of the caller's
 * (MOERT_MAXPARAM bytes, BUNDLE_MAXARGS pointers): reentrant. */
moert_status moert_launch_with(moert_program *p, const MStep *s, int64_t tokens,
			       CUstream stream, const MoertBases *b,
			       unsigned char *pbuf, void **pptr) MOERT_INTERNAL;
/* The checks every run makes before touching the device. */
moert_status moert_check_run(const moert_program *p, int64_t tokens, const uint64_t *in,
			     const uint64_t *out) MOERT_INTERNAL;
/* Drop every cached graph (the pointers they were captured with changed). */
void moert_drop_graphs(moert_program *p) MOERT_INTERNAL;

/* serve.c */
/* Does init step s write a weight the caller bound?  (The last w: arg of
 * an init step is the weight it writes: bundle.md.) */
int moert_init_skipped(const moert_program *p, const MStep *s) MOERT_INTERNAL;
/* Shrink the memory plan by what bindings and a workspace make unneeded:
 * *upload the bytes of the weights section still to copy. */
void moert_trim_plan(const moert_program *p, uint64_t wbytes, uint64_t *woff,
		     uint64_t *wsize, uint64_t *total, uint64_t *upload)
	MOERT_INTERNAL;

/* plan.c: pure functions, no GPU */
moert_status moert_pick_code(const char *const *names, int n, int major,
			     int minor, int *pick) MOERT_INTERNAL;
moert_status moert_check_tokens(const Manifest *m, int64_t tokens)
	MOERT_INTERNAL;
/* Keep the launch lines for code target `target` ("sm_90a") and those for any. */
void moert_keep_arch(Manifest *m, const char *target) MOERT_INTERNAL;
moert_status moert_tensor_resolve(const MTensor *t, int64_t tokens,
				  moert_tensor_info *info) MOERT_INTERNAL;
moert_status moert_eval_grid(const MStep *s, int64_t tokens,
			     unsigned grid[3]) MOERT_INTERNAL;
moert_status moert_eval_memset(const Manifest *m, const MStep *s,
			       int64_t tokens, uint64_t *off,
			       uint64_t *bytes) MOERT_INTERNAL;
/* Offsets of a kernel's params in the param buffer; *size the total. */
moert_status moert_param_layout(const MKernel *k, size_t *off, size_t *size)
	MOERT_INTERNAL;
/* Write step s's args at tokens into buf at the offsets of the layout. */
moert_status moert_marshal(const Manifest *m, const MStep *s, int64_t tokens,
			   const MoertBases *b, const size_t *off,
			   unsigned char *buf) MOERT_INTERNAL;
/* Arena buffer `name`: *b its index, *bytes its size at T. */
moert_status moert_find_buffer(const Manifest *m, const char *name, int64_t tokens,
			       int *b, size_t *bytes) MOERT_INTERNAL;
/* The last step running at T that names buffer b (arg or memset); -1: none. */
int moert_last_use(const Manifest *m, int b, int64_t tokens) MOERT_INTERNAL;
/* Device bytes for the weights (real at their at=, synth after) and the
 * arena; *wsize the weights part, woff[i] each weight's offset. */
moert_status moert_mem_plan(const Manifest *m, uint64_t weights_size,
			    uint64_t *woff, uint64_t *wsize,
			    uint64_t *total) MOERT_INTERNAL;

#endif
