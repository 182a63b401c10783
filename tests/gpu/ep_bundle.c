/*
 * ep_bundle.c — an expert-parallel bundle (moec compile --ep=N) run on N
 * GPUs from one process, one thread per GPU, against the unpartitioned
 * bundle of the same block (issue 20; tests/gpu/ep_bundle.sh builds and
 * runs it).
 *
 *	ep_bundle EP.moeb REF.moeb X.pb
 *
 * X's rows are split evenly over the ranks (rank r gets rows r*T ..), each
 * rank loads only program rank.r (its experts' weights) onto GPU r and
 * runs it with a communicator made from one
 * unique id, plainly and then as a CUDA graph (the all_to_all steps
 * captured; the two must agree byte for byte), and the joined outputs are
 * compared with REF's on all of X: relative max error (max |a-b| / max |b|)
 * under 2e-2, bf16 tolerance.  Prints the per-rank times.  Exit 0 pass, 1
 * fail, 2 bad usage, 77 fewer GPUs than ranks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bundle.h"
#include "moert.h"
#include "util.h"

typedef struct {
	int rank, n;
	const char *path;
	const char *id;
	const unsigned char *x;	/* the rank's rows */
	int64_t T;
	unsigned char *y, *yg;	/* plain and graph outputs */
	size_t ybytes;
	double us;
	moert_status s;
	char err[512];
} Rank;

static double
now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Load `path` on GPU `ordinal`, run program `prog` (NULL: the only one) at
 * T with comm c (or none); y gets output 0.  The same run again as a CUDA
 * graph into yg when yg is given. */
static moert_status
run_one(int ordinal, const char *path, const char *prog, const char *id, int rank, int n,
	const unsigned char *x, int64_t T, unsigned char **y, unsigned char **yg, size_t *ybytes,
	double *us)
{
	moert_device *dev = NULL;
	moert_program *p = NULL, *q;
	moert_comm *c = NULL;
	moert_tensor_info ii, oi;
	uint64_t dx = 0, dy = 0;
	moert_status s;

	/* only this rank's program onto its GPU: its experts' weights alone */
	size_t len;
	int rc;
	Diag d;
	diag_init(&d, stderr);
	unsigned char *buf = bundle_read_file(path, &len, &rc, &d);
	if (!buf)
		return MOERT_EINVAL;
	if ((s = moert_load_host(buf, len, &p)))
		goto out;
	q = prog ? moert_find_program(p, prog) : p;
	if (!q) {
		s = MOERT_EINVAL;
		goto out;
	}
	if ((s = moert_open(ordinal, &dev)) || (s = moert_load_device(dev, q)))
		goto out;
	if (id && ((s = moert_comm_init(dev, n, rank, id, &c)) || (s = moert_program_set_comm(q, c))))
		goto out;
	if ((s = moert_input_info(q, 0, T, &ii)) || (s = moert_output_info(q, 0, T, &oi)) ||
	    (s = moert_malloc(dev, ii.bytes, &dx)) || (s = moert_malloc(dev, oi.bytes, &dy)) ||
	    (s = moert_memcpy_htod(dev, dx, x, ii.bytes)))
		goto out;
	*ybytes = oi.bytes;
	*y = xcalloc(1, oi.bytes);
	double t0 = now_us();
	if ((s = moert_run(q, T, &dx, &dy, NULL, 0)) || (s = moert_sync(dev)))
		goto out;
	*us = now_us() - t0;
	if ((s = moert_memcpy_dtoh(dev, *y, dy, oi.bytes)))
		goto out;
	if (yg) {
		*yg = xcalloc(1, oi.bytes);
		if ((s = moert_memset(dev, dy, 0, oi.bytes)) || (s = moert_run(q, T, &dx, &dy, NULL, 1)) ||
		    (s = moert_run(q, T, &dx, &dy, NULL, 1)) || (s = moert_sync(dev)) ||
		    (s = moert_memcpy_dtoh(dev, *yg, dy, oi.bytes)))
			goto out;
	}
out:
	if (dx)
		moert_free(dev, dx);
	if (dy)
		moert_free(dev, dy);
	moert_unload(p);
	moert_comm_free(c);
	if (dev)
		moert_close(dev);
	free(buf);
	return s;
}

static void *
rank_main(void *arg)
{
	Rank *r = arg;
	char prog[32];

	snprintf(prog, sizeof prog, "rank.%d", r->rank);
	r->s = run_one(r->rank, r->path, prog, r->id, r->rank, r->n, r->x, r->T, &r->y, &r->yg,
		       &r->ybytes, &r->us);
	snprintf(r->err, sizeof r->err, "%s", r->s ? moert_last_error() : "");
	return NULL;
}

static int
fail(const char *what, moert_status s)
{
	printf("FAIL %s: %s: %s\n", what, moert_status_name(s), moert_last_error());
	return 1;
}

int
main(int argc, char **argv)
{
	Rank r[64];
	pthread_t th[64];
	Tensor x;
	Diag d;
	moert_device *dev;
	moert_program *p;
	char id[MOERT_NCCL_ID_BYTES];
	int n, gpus = 0, bad = 0;
	unsigned char *ref = NULL;
	size_t refbytes = 0;
	double refus = 0;
	moert_status s;

	if (argc != 4) {
		fprintf(stderr, "usage: ep_bundle EP.moeb REF.moeb X.pb\n");
		return 2;
	}
	diag_init(&d, stderr);
	if (tensor_read(argv[3], &x, &d))
		return 2;
	/* N from the bundle's first program (host only); the GPUs there are */
	size_t len;
	int rc;
	unsigned char *buf = bundle_read_file(argv[1], &len, &rc, &d);
	if (!buf)
		return 2;
	if ((s = moert_load_host(buf, len, &p)))
		return fail(argv[1], s);
	moert_ep_rank(p, &n);
	moert_unload(p);
	free(buf);
	if ((s = moert_open(0, &dev)))
		return printf("SKIP no GPU: %s\n", moert_last_error()), 77;
	moert_close(dev);
	if (n < 1 || n > 64 || x.rank < 1 || x.dim[0] % n)
		return printf("FAIL %s: %d ranks for %lld rows\n", argv[1], n,
			      (long long)(x.rank ? x.dim[0] : 0)), 1;
	for (moert_device *g; gpus < n && moert_open(gpus, &g) == MOERT_OK; gpus++)
		moert_close(g);
	if (gpus < n)
		return printf("SKIP %d ranks, %d GPUs\n", n, gpus), 77;
	s = run_one(0, argv[2], NULL, NULL, 0, 1, x.data, x.dim[0], &ref, NULL, &refbytes, &refus);
	if (s)
		return fail(argv[2], s);
	if ((s = moert_nccl_unique_id(id)))
		return fail("ncclGetUniqueId", s);
	size_t row = tensor_nbytes(&x) / (size_t)x.dim[0];
	int64_t T = x.dim[0] / n;
	for (int i = 0; i < n; i++) {
		r[i] = (Rank){.rank = i, .n = n, .path = argv[1], .id = id, .T = T,
			      .x = (const unsigned char *)x.data + (size_t)i * (size_t)T * row};
		pthread_create(&th[i], NULL, rank_main, &r[i]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	double maxd = 0, maxr = 0;
	for (int i = 0; i < n; i++) {
		if (r[i].s) {
			printf("FAIL rank %d: %s: %s\n", i, moert_status_name(r[i].s), r[i].err);
			bad = 1;
			continue;
		}
		if (memcmp(r[i].y, r[i].yg, r[i].ybytes)) {
			printf("FAIL rank %d: the CUDA-graph run differs from the plain run\n", i);
			bad = 1;
		}
		size_t ne = r[i].ybytes / 2;	/* bf16 output [T,H] */
		for (size_t k = 0; k < ne && !bad; k++) {
			double a = dtype_load(DT_BF16, r[i].y, k);
			double b = dtype_load(DT_BF16, ref, (size_t)i * ne + k);
			maxd = MAX(maxd, a > b ? a - b : b - a);
			maxr = MAX(maxr, b < 0 ? -b : b);
		}
		printf("rank %d: %lld tokens, %.1f us (first run, with NCCL set-up)\n", i, (long long)T,
		       r[i].us);
	}
	double rel = maxr > 0 ? maxd / maxr : maxd;
	if (!bad)
		printf("%s %d ranks vs the unpartitioned bundle: rel max err %.3g (max |d| %.3g)\n",
		       rel < 2e-2 ? "ok  " : "FAIL", n, rel, maxd);
	for (int i = 0; i < n; i++)
		free(r[i].y), free(r[i].yg);
	free(ref);
	tensor_free(&x);
	return bad || rel >= 2e-2;
}
