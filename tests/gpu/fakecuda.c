/*
 * fakecuda.c — a stand-in libcuda.so.1 for hosts without a GPU, so the
 * runtime's device paths (load, init, run, graphs, events, errors) run in
 * CI: MOERT_LIBCUDA=./libfakecuda.so gpu_runtime_check.
 *
 * Device memory is host memory; "kernels" are the C twins of the PTX in
 * gpu_runtime_check.c, found by entry name; launches run at once, or are
 * recorded while a stream captures, and replayed by cuGraphLaunch.  It
 * checks what the real driver checks that matters here: the >48 KiB shared
 * memory opt-in, NUL-terminated PTX, frees of unknown pointers.
 *
 * With FAKECUDA_ANY=1 every other entry name is a kernel too, one that does
 * nothing (so moec's real bundles load and "run": moert tune's plumbing on
 * them), except FAKECUDA_SLOW=NAME, which takes 5 ms, and
 * FAKECUDA_WRONG=NAME:J, which writes 64 bytes of 0x3f at its pointer param J.
 * cuLaunchKernelEx takes the cluster dimension (N, 1, 1), the grid's x a
 * multiple of N, and programmatic stream serialization (1), each at most
 * once; with FAKECUDA_CLUSTER_LOG=FILE it appends "NAME GRIDX N" to FILE for
 * each cluster launch, with FAKECUDA_PDL_LOG=FILE "NAME" for each
 * programmatic one.  Launches run in order either way.
 * cuOccupancyMaxActiveClusters says FAKECUDA_MAX_CLUSTERS=N clusters of 4
 * (2N of 2, N/2 of 8: SMs in GPCs of 16), 1024 without it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { OK = 0, EINVALID = 1, EOOM = 2, ENOTFOUND = 500, EPTX = 218 };

typedef void KernelFn(unsigned gx, unsigned bx, void **p);

typedef struct Func Func;
struct Func {
	const char *name;
	KernelFn *fn;
	int nparam;
	size_t size[8];
	int smem_max;
};

typedef struct Node Node;
struct Node {
	Func *f;
	unsigned gx, bx;
	int memset;		/* else a launch */
	unsigned char value;	/* memset's */
	CUdeviceptr dst;
	size_t n;
	unsigned char pbuf[64];
	Node *next;
};

typedef struct Stream Stream;
struct Stream {
	int capturing;
	Node *head, **tail;
};

static size_t allocated;	/* atomic: serve_check allocates from 8 threads */
static const size_t total = (size_t)16 << 30;

/* --- the kernels of gpu_runtime_check.c, as C ------------------------------ */

#define ARG(T, i) (*(T *)p[i])

static void
k_synth(unsigned gx, unsigned bx, void **p)
{
	float *w = (float *)ARG(uint64_t, 0);
	uint32_t seed = (uint32_t)ARG(uint64_t, 1), n = ARG(uint32_t, 2);

	for (uint32_t j = 0; j < gx * bx && j < n; j++) {
		uint32_t x = j * 0x9E3779B1u + seed;
		x ^= x >> 16, x *= 0x7FEB352Du, x ^= x >> 15;
		x *= 0x846CA68Bu, x ^= x >> 16;
		w[j] = (float)(x >> 8) * 0x1p-24f - 0.5f;
	}
}

static void
k_axpb(unsigned gx, unsigned bx, void **p)
{
	const float *x = (const float *)ARG(uint64_t, 0);
	const float *w = (const float *)ARG(uint64_t, 1);
	float *y = (float *)ARG(uint64_t, 2);
	uint32_t n = ARG(uint32_t, 3) * ARG(uint32_t, 4), h = ARG(uint32_t, 4);

	for (uint32_t i = 0; i < gx * bx && i < n; i++) {
		volatile float t = x[i] * w[i % h];
		y[i] = t + 1.0f;
	}
}

static void
k_rowcount(unsigned gx, unsigned bx, void **p)
{
	uint32_t *cnt = (uint32_t *)ARG(uint64_t, 0);
	const uint32_t *inc = (const uint32_t *)ARG(uint64_t, 1);
	uint32_t h = ARG(uint32_t, 3), n = ARG(uint32_t, 2) * h;

	for (uint32_t i = 0; i < gx * bx && i < n; i++)
		cnt[i / h] += inc[(i % h) & 3];
}

static void
k_copy(unsigned gx, unsigned bx, void **p)
{
	const uint32_t *s = (const uint32_t *)ARG(uint64_t, 0);
	uint32_t *d = (uint32_t *)ARG(uint64_t, 1), n = ARG(uint32_t, 2);

	for (uint32_t i = 0; i < gx * bx && i < n; i++)
		d[i] = s[i];
}

static Func funcs[] = {
	{"synth_w", k_synth, 3, {8, 8, 4}, 0},
	{"axpb", k_axpb, 5, {8, 8, 8, 4, 4}, 0},
	{"rowcount", k_rowcount, 4, {8, 8, 4, 4}, 0},
	{"copy_i32", k_copy, 3, {8, 8, 4}, 0},
};

/* --- the entry points -------------------------------------------------------- */

CUresult cuInit(unsigned f) { (void)f; return OK; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return i == 0 ? OK : EINVALID; }
CUresult cuDeviceTotalMem_v2(size_t *b, int d) { (void)d; *b = total; return OK; }
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = (void *)1; return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return OK; }
CUresult cuCtxSetCurrent(void *c) { (void)c; return OK; }
CUresult cuCtxSynchronize(void) { return OK; }

CUresult
cuDeviceGetName(char *s, int n, int d)
{
	(void)d;
	strncpy(s, "Fake GPU (fakecuda.c)", (size_t)n);
	return OK;
}

CUresult
cuDeviceGetAttribute(int *v, int attr, int d)
{
	(void)d;
	*v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : attr == 97 ? 232448 : 0;
	return OK;
}

CUresult
cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	size_t used = __atomic_load_n(&allocated, __ATOMIC_RELAXED);
	/* a 16 GiB device; 256-byte aligned like the real one (the size in front) */
	size_t *b = n <= total - used ? aligned_alloc(256, (n + 511) & ~(size_t)255) : NULL;

	if (!b)
		return EOOM;
	b[0] = n;
	__atomic_add_fetch(&allocated, n, __ATOMIC_RELAXED);
	*p = (CUdeviceptr)(uintptr_t)b + 256;
	return OK;
}

CUresult
cuMemFree_v2(CUdeviceptr p)
{
	size_t *b = (size_t *)(uintptr_t)(p - 256);

	__atomic_sub_fetch(&allocated, b[0], __ATOMIC_RELAXED);
	free(b);
	return OK;
}

CUresult
cuMemGetInfo_v2(size_t *f, size_t *t)
{
	*f = total - __atomic_load_n(&allocated, __ATOMIC_RELAXED), *t = total;
	return OK;
}

CUresult
cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n)
{
	memcpy((void *)(uintptr_t)d, s, n);
	return OK;
}

CUresult
cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n)
{
	memcpy(d, (void *)(uintptr_t)s, n);
	return OK;
}

CUresult
cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
	memset((void *)(uintptr_t)d, v, n);
	return OK;
}

static void
record(Stream *s, Node *n)
{
	Node *c = malloc(sizeof *c);

	*c = *n;
	c->next = NULL;
	*s->tail = c;
	s->tail = &c->next;
}

static int log_line(const char *var, const char *line);

static void
execute(const Node *n)
{
	void *p[8];
	size_t off = 0;

	if (n->memset) {	/* each one done, plainly or by a graph's launch, logged */
		char line[64];
		snprintf(line, sizeof line, "memset %zu %u\n", n->n, n->value);
		log_line("FAKECUDA_MEMSET_LOG", line);
		memset((void *)(uintptr_t)n->dst, n->value, n->n);
		return;
	}
	if (!n->f->fn)
		return;	/* FAKECUDA_ANY's kernels do their work at launch */
	for (int i = 0; i < n->f->nparam; i++) {
		off = (off + n->f->size[i] - 1) / n->f->size[i] * n->f->size[i];
		p[i] = (void *)(n->pbuf + off);
		off += n->f->size[i];
	}
	n->f->fn(n->gx, n->bx, p);
}

CUresult
cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, Stream *s)
{
	Node x = {.memset = 1, .value = v, .dst = d, .n = n};

	if (s && s->capturing)
		record(s, &x);
	else
		execute(&x);
	return OK;
}

CUresult
cuModuleLoadDataEx(void **m, const char *img, unsigned n, int *opt, void **val)
{
	if (!strstr(img, ".version") || strstr(img, "this is not ptx")) {	/* moec opens with comments */
		for (unsigned i = 0; i < n; i++)
			if (opt[i] == 5)
				strcpy(val[i], "ptxas fatal: syntax error (fake)");
		return EPTX;
	}
	*m = malloc(1);
	return OK;
}

CUresult cuModuleUnload(void *m) { free(m); return OK; }

/* FAKECUDA_ANY's kernels, one per name asked for (kept to the end). */
static Func *any[4096];
static int nany;

CUresult
cuModuleGetFunction(Func **f, void *m, const char *name)
{
	const char *e = getenv("FAKECUDA_ANY");

	(void)m;
	for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
		if (!strcmp(funcs[i].name, name))
			return *f = &funcs[i], OK;
	if (!e || strcmp(e, "1"))
		return ENOTFOUND;
	for (int i = 0; i < nany; i++)
		if (!strcmp(any[i]->name, name))
			return *f = any[i], OK;
	if (nany == (int)(sizeof any / sizeof any[0]))
		return EOOM;
	*f = any[nany++] = calloc(1, sizeof **f);
	(*f)->name = strdup(name);
	return OK;
}

/* A FAKECUDA_ANY kernel's launch: nothing, 5 ms, or 64 bytes of 0x3f. */
static void
any_kernel(const Func *f, void **params)
{
	const char *slow = getenv("FAKECUDA_SLOW"), *wrong = getenv("FAKECUDA_WRONG"), *colon;
	struct timespec t0, t;

	if (slow && !strcmp(slow, f->name)) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 5000000L);
	}
	if (wrong && (colon = strrchr(wrong, ':')) && strlen(f->name) == (size_t)(colon - wrong) &&
	    !strncmp(wrong, f->name, (size_t)(colon - wrong))) {
		CUdeviceptr p;
		memcpy(&p, params[atoi(colon + 1)], sizeof p);
		memset((void *)(uintptr_t)p, 0x3f, 64);
	}
}

CUresult
cuFuncSetAttribute(Func *f, int attr, int v)
{
	if (attr != 8 || v > 232448)
		return EINVALID;
	f->smem_max = v;
	return OK;
}

CUresult
cuLaunchKernel(Func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
	       unsigned by, unsigned bz, unsigned smem, Stream *s, void **params,
	       void **extra)
{
	Node x = {.f = f, .gx = gx, .bx = bx};
	size_t off = 0;

	if (!f->fn) {	/* FAKECUDA_ANY */
		if (extra || (smem > 49152 && (int)smem > f->smem_max))
			return EINVALID;
		any_kernel(f, params);
		return OK;
	}
	if (extra || gy * gz * by * bz != 1 || (smem > 49152 && (int)smem > f->smem_max))
		return EINVALID;
	for (int i = 0; i < f->nparam; i++) {	/* copy, as the driver does */
		off = (off + f->size[i] - 1) / f->size[i] * f->size[i];
		memcpy(x.pbuf + off, params[i], f->size[i]);
		off += f->size[i];
	}
	if (s && s->capturing)
		record(s, &x);
	else
		execute(&x);
	return OK;
}

/* cuLaunchKernelEx's config and attribute, as cuda.h lays them out */
typedef struct {
	int id;
	char pad[4];
	unsigned val[16];
} LaunchAttr;
typedef struct {
	unsigned gx, gy, gz, bx, by, bz, smem;
	Stream *stream;
	LaunchAttr *attrs;
	unsigned nattrs;
} LaunchConfig;

/* Append line to the file named by environment variable var (none: nothing). */
static int
log_line(const char *var, const char *line)
{
	const char *path = getenv(var);
	FILE *o;

	if (!path)
		return 0;
	if (!(o = fopen(path, "a")))
		return -1;
	fputs(line, o);
	return fclose(o);
}

CUresult
cuLaunchKernelEx(const LaunchConfig *c, Func *f, void **params, void **extra)
{
	unsigned n = 0, pdl = 0;
	char line[300];

	if (!c || c->nattrs < 1 || c->nattrs > 2)
		return EINVALID;
	for (unsigned i = 0; i < c->nattrs; i++) {
		const LaunchAttr *a = &c->attrs[i];
		if (a->id == 4 && !n && a->val[0] >= 2 && a->val[0] <= 8 && a->val[1] == 1 && a->val[2] == 1 &&
		    c->gx % a->val[0] == 0)
			n = a->val[0];
		else if (a->id == 6 && !pdl && a->val[0] == 1)
			pdl = 1;
		else
			return EINVALID;
	}
	snprintf(line, sizeof line, "%s %u %u\n", f->name, c->gx, n);
	if (n && log_line("FAKECUDA_CLUSTER_LOG", line))
		return EINVALID;
	snprintf(line, sizeof line, "%s\n", f->name);
	if (pdl && log_line("FAKECUDA_PDL_LOG", line))
		return EINVALID;
	return cuLaunchKernel(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, c->stream, params, extra);
}

CUresult
cuOccupancyMaxActiveClusters(int *n, Func *f, const LaunchConfig *c)
{
	const char *e = getenv("FAKECUDA_MAX_CLUSTERS");
	unsigned size = 0;

	if (!n || !f || !c || c->nattrs != 1 || c->attrs[0].id != 4)
		return EINVALID;
	size = c->attrs[0].val[0];
	if (size < 1 || size > 8)
		return EINVALID;
	*n = e ? (int)(strtol(e, NULL, 10) * 4 / size) : 1024;
	return OK;
}

CUresult
cuStreamCreate(Stream **s, unsigned f)
{
	(void)f;
	*s = calloc(1, sizeof **s);
	return OK;
}

CUresult cuStreamDestroy_v2(Stream *s) { free(s); return OK; }
CUresult cuStreamSynchronize(Stream *s) { (void)s; return OK; }

CUresult
cuStreamBeginCapture_v2(Stream *s, int mode)
{
	(void)mode;
	if (!s || s->capturing)
		return EINVALID;
	s->capturing = 1, s->head = NULL, s->tail = &s->head;
	return OK;
}

CUresult
cuStreamEndCapture(Stream *s, Node **g)
{
	*g = s->head;
	s->capturing = 0;
	return OK;
}

CUresult
cuGraphInstantiateWithFlags(Node ***e, Node *g, unsigned long long f)
{
	(void)f;
	*e = malloc(sizeof **e);
	**e = NULL;
	for (Node **t = *e; g; g = g->next, t = &(*t)->next) {	/* a copy */
		*t = malloc(sizeof **t);
		**t = *g;
		(*t)->next = NULL;
	}
	return OK;
}

static void
free_nodes(Node *n)
{
	while (n) {
		Node *x = n->next;
		free(n);
		n = x;
	}
}

CUresult cuGraphDestroy(Node *g) { free_nodes(g); return OK; }
CUresult cuGraphExecDestroy(Node **e) { free_nodes(*e); free(e); return OK; }

CUresult
cuGraphLaunch(Node **e, Stream *s)
{
	(void)s;
	for (Node *n = *e; n; n = n->next)
		execute(n);
	return OK;
}

CUresult
cuEventCreate(double **e, unsigned f)
{
	(void)f;
	*e = calloc(1, sizeof **e);
	return OK;
}

CUresult cuEventDestroy_v2(double *e) { free(e); return OK; }
CUresult cuEventSynchronize(double *e) { (void)e; return OK; }

CUresult
cuEventRecord(double *e, Stream *s)
{
	struct timespec ts;

	(void)s;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	*e = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
	return OK;
}

CUresult
cuEventElapsedTime(float *ms, double *a, double *b)
{
	*ms = (float)(*b - *a);
	return OK;
}

CUresult
cuGetErrorName(CUresult r, const char **s)
{
	*s = r == EINVALID ? "CUDA_ERROR_INVALID_VALUE" : r == EOOM ? "CUDA_ERROR_OUT_OF_MEMORY"
	     : r == EPTX ? "CUDA_ERROR_INVALID_PTX" : r == ENOTFOUND ? "CUDA_ERROR_NOT_FOUND"
	     : "CUDA_ERROR_UNKNOWN";
	return OK;
}

CUresult
cuGetErrorString(CUresult r, const char **s)
{
	*s = r == EPTX ? "a PTX JIT compilation failed" : "fake driver error";
	return OK;
}

/*
 * cuTensorMapEncodeTiled: the checks the driver documents for tile mode
 * (rank 1..5, a 16-byte-aligned base and strides, boxes of 1..256 whose
 * inner extent is a multiple of 16 bytes and fits the swizzle span, element
 * strides 1..8), then an opaque map: no fake kernel reads one.
 */
CUresult
cuTensorMapEncodeTiled(void *map, int dtype, unsigned rank, void *base,
		       const unsigned long long *dims, const unsigned long long *strides,
		       const unsigned *box, const unsigned *es, int interleave, int swizzle,
		       int l2, int oob)
{
	static const int esz[13] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
	static const unsigned span[4] = {0, 32, 64, 128};

	if (!map || (uintptr_t)map % 64 || dtype < 0 || dtype > 12 || rank < 1 || rank > 5 ||
	    (uintptr_t)base % 16 || interleave != 0 || swizzle < 0 || swizzle > 3 || l2 < 0 ||
	    l2 > 3 || oob < 0 || oob > 1)
		return EINVALID;
	for (unsigned i = 0; i < rank; i++) {
		if (dims[i] < 1 || dims[i] > (1ull << 32) || box[i] < 1 || box[i] > 256 || es[i] < 1 ||
		    es[i] > 8)
			return EINVALID;
		if (i + 1 < rank && (strides[i] % 16 || strides[i] >= (1ull << 40)))
			return EINVALID;
	}
	if (box[0] * (unsigned)esz[dtype] % 16 || (swizzle && box[0] * (unsigned)esz[dtype] > span[swizzle]))
		return EINVALID;
	memset(map, 0, 128);
	memcpy(map, &base, sizeof base);
	return OK;
}
