/*
 * nccl_check.c — the runtime's NCCL path (runtime/nccl.c) on real GPUs: N
 * ranks as N threads of one process, rank r on GPU r, a communicator from
 * one unique id; all_to_all and all_gather checked byte for byte; then,
 * with --bench, the all_to_all timed at the sizes of expert-parallel
 * dispatch and combine (docs/passes.md: rows padded to T per peer) for
 * DeepSeek-V3 and Qwen3-235B-A22B layers at T = 16, 256, 4096 tokens per
 * rank, against the bandwidth of one large all_to_all measured in the same
 * run (the NVLink bound).
 *
 *	nccl_check [--ranks N] [--bench] [--one-device]
 * --one-device puts every rank on device 0 (the stand-in driver of CI has
 * one; real NCCL refuses two ranks on one GPU).  Exit 0 pass, 1 fail, 77 no
 * driver, no NCCL or fewer than N devices (CTest skip).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moert.h"

enum { MAXR = 8 };

typedef struct {
	const char *model;
	int hidden, k, experts;
} Layer;

static const Layer layers[] = {{"DeepSeek-V3", 7168, 8, 256}, {"Qwen3-235B-A22B", 4096, 8, 128}};
static const int tokens[] = {16, 256, 4096};

typedef struct {
	int rank, n, bench, one_device, rc;
	char id[MOERT_NCCL_ID_BYTES];
	char err[512];
	double us[8][4];	/* [layer*3 + t][0 dispatch, 1 combine (sum), 2 combine (slots)] */
	double bound_gbs;
} Rank;

static pthread_barrier_t bar;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Median-free and simple: the mean of iters all_to_alls after warmup, every
 * rank starting together. */
static double
time_a2a(Rank *r, moert_device *dev, moert_comm *c, uint64_t a, uint64_t b, size_t chunk, int iters)
{
	for (int i = 0; i < 3; i++)
		if (moert_all_to_all(c, a, b, chunk, NULL))
			return -1;
	if (moert_sync(dev))
		return -1;
	pthread_barrier_wait(&bar);
	double t0 = now();
	for (int i = 0; i < iters; i++)
		if (moert_all_to_all(c, a, b, chunk, NULL))
			return -1;
	if (moert_sync(dev))
		return -1;
	(void)r;
	return 1e6 * (now() - t0) / iters;
}

static int
check_data(Rank *r, moert_device *dev, moert_comm *c, uint64_t a, uint64_t b)
{
	enum { CH = 4096 };
	unsigned char *h = malloc((size_t)r->n * CH);
	uint32_t mine = 1000u + (uint32_t)r->rank, all[MAXR];
	int bad = 0;

	for (int p = 0; p < r->n; p++)
		memset(h + (size_t)p * CH, 16 * r->rank + p, CH);
	if (moert_memcpy_htod(dev, a, h, (size_t)r->n * CH) || moert_all_to_all(c, a, b, CH, NULL) ||
	    moert_memcpy_dtoh(dev, h, b, (size_t)r->n * CH))
		bad = -1;
	for (int s = 0; !bad && s < r->n; s++)
		for (int i = 0; i < CH; i++)
			if (h[(size_t)s * CH + i] != (unsigned char)(16 * s + r->rank)) {
				snprintf(r->err, sizeof r->err, "all_to_all: byte %d from rank %d is %d", i, s,
					 h[(size_t)s * CH + i]);
				bad = 1;
				break;
			}
	if (!bad && (moert_memcpy_htod(dev, a, &mine, 4) || moert_all_gather(c, a, b, 4, NULL) ||
		     moert_memcpy_dtoh(dev, all, b, 4 * (size_t)r->n) || moert_comm_check(c)))
		bad = -1;
	for (int s = 0; !bad && s < r->n; s++)
		if (all[s] != 1000u + (uint32_t)s) {
			snprintf(r->err, sizeof r->err, "all_gather: rank %d's count is %u", s, all[s]);
			bad = 1;
		}
	free(h);
	return bad;
}

static void *
rank_main(void *arg)
{
	Rank *r = arg;
	moert_device *dev = NULL;
	moert_comm *c = NULL;
	uint64_t a = 0, b = 0;
	size_t cap = (size_t)4096 * 7168 * 8 * 4;	/* the largest combine chunk */
	size_t bytes = r->bench ? cap * (size_t)r->n : (size_t)r->n * 4096;

	moert_status s;

	r->rc = 1;
	if ((s = moert_open(r->one_device ? 0 : r->rank, &dev)) ||
	    (s = moert_comm_init(dev, r->n, r->rank, r->id, &c)) || (s = moert_malloc(dev, bytes, &a)) ||
	    (s = moert_malloc(dev, bytes, &b))) {
		snprintf(r->err, sizeof r->err, "%s: %s", moert_status_name(s), moert_last_error());
		goto out;
	}
	int bad = check_data(r, dev, c, a, b);
	if (bad < 0)
		snprintf(r->err, sizeof r->err, "%s", moert_last_error());
	if (bad)
		goto out;
	for (int l = 0; r->bench && l < 2; l++)
		for (int t = 0; t < 3; t++) {
			size_t T = (size_t)tokens[t], H = (size_t)layers[l].hidden, k = (size_t)layers[l].k;
			size_t dispatch = T * H * 2 + T * k * 8, combine = T * H * 4;
			r->us[l * 3 + t][0] = time_a2a(r, dev, c, a, b, dispatch, 20);
			r->us[l * 3 + t][1] = time_a2a(r, dev, c, a, b, combine, 10);
			r->us[l * 3 + t][2] = time_a2a(r, dev, c, a, b, combine * k, 10);
		}
	if (r->bench) {	/* the bound: one large exchange, 256 MiB per peer or what fits */
		size_t chunk = cap < ((size_t)256 << 20) ? cap : (size_t)256 << 20;
		double us = time_a2a(r, dev, c, a, b, chunk, 5);
		r->bound_gbs = us > 0 ? (double)chunk * (r->n - 1) / us / 1e3 : 0;
	}
	r->rc = 0;
out:
	if (a)
		moert_free(dev, a);
	if (b)
		moert_free(dev, b);
	moert_comm_free(c);
	if (dev)
		moert_close(dev);
	return NULL;
}

/*
 * Load imbalance of a routing (max/mean rows received per rank, contiguous
 * slices), for tokens drawn as the router of an E-expert top-k layer would
 * spread them: uniform, or skewed (expert popularity ~ 1/(rank+1)^1.2, the
 * hot experts together in the first slices).  Synthetic: real imbalance
 * depends on real weights and data.
 */
static double
imbalance(int n, int E, int k, int T, int skew, unsigned seed)
{
	double w[512], cum[513], rows[MAXR] = {0}, sum = 0, mx = 0;
	int pick[16];

	for (int e = 0; e < E; e++)
		w[e] = skew ? 1.0 / __builtin_pow(e + 1, 1.2) : 1.0;
	for (int t = 0; t < T * n; t++) {	/* every rank's T tokens */
		int seen[MAXR] = {0};
		for (int j = 0; j < k; j++) {	/* k distinct experts, by weight */
			double tot = 0;
			for (int e = 0; e < E; e++) {
				int used = 0;
				for (int q = 0; q < j; q++)
					used |= pick[q] == e;
				cum[e] = tot += used ? 0 : w[e];
			}
			seed = seed * 1103515245u + 12345u;
			double u = tot * (double)(seed >> 8) / (double)(1u << 24);
			int e = 0;
			while (e < E - 1 && cum[e] <= u)
				e++;
			pick[j] = e;
			seen[e / (E / n)] = 1;
		}
		for (int d = 0; d < n; d++)
			rows[d] += seen[d];
	}
	for (int d = 0; d < n; d++)
		sum += rows[d], mx = rows[d] > mx ? rows[d] : mx;
	return sum > 0 ? mx / (sum / n) : 0;
}

static void
table(const Rank *r0, int n)
{
	double bound = r0->bound_gbs;

	printf("# ranks %d, NVLink bound (one all_to_all of 256 MiB per peer): %.1f GB/s out of each rank\n",
	       n, bound);
	printf("| model | T/rank | dispatch bytes/rank | us | GB/s | combine (sum) bytes/rank | us | GB/s | "
	       "combine (slots) bytes/rank | us | GB/s | imbalance uniform | skewed |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (int l = 0; l < 2; l++)
		for (int t = 0; t < 3; t++) {
			double T = tokens[t], H = layers[l].hidden, k = layers[l].k;
			double d = (T * H * 2 + T * k * 8) * n, c = T * H * 4 * n, cs = c * k;
			const double *us = r0->us[l * 3 + t];
			double off = n > 1 ? (double)(n - 1) / n : 0;	/* what leaves the rank */
			int E = layers[l].experts;
			printf("| %s | %d | %.3g | %.1f | %.1f | %.3g | %.1f | %.1f | %.3g | %.1f | %.1f | %.2f | "
			       "%.2f |\n",
			       layers[l].model, tokens[t], d, us[0], us[0] > 0 ? d * off / us[0] / 1e3 : 0, c,
			       us[1], us[1] > 0 ? c * off / us[1] / 1e3 : 0, cs,
			       us[2], us[2] > 0 ? cs * off / us[2] / 1e3 : 0,
			       imbalance(n, E, (int)k, tokens[t], 0, 7), imbalance(n, E, (int)k, tokens[t], 1, 7));
		}
}

int
main(int argc, char **argv)
{
	Rank r[MAXR];
	pthread_t th[MAXR];
	int n = 1, bench = 0, one = 0, fail = 0, version = 0;
	char id[MOERT_NCCL_ID_BYTES];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--bench"))
			bench = 1;
		else if (!strcmp(argv[i], "--one-device"))
			one = 1;
		else {
			fprintf(stderr, "usage: nccl_check [--ranks N] [--bench] [--one-device]\n");
			return 2;
		}
	}
	if (n < 1 || n > MAXR)
		return fprintf(stderr, "nccl_check: --ranks 1..%d\n", MAXR), 2;
	if (moert_nccl_version(&version) || moert_nccl_unique_id(id)) {
		printf("SKIP %s\n", moert_last_error());
		return 77;
	}
	moert_device *last = NULL;
	if (moert_open(one ? 0 : n - 1, &last)) {	/* rank n-1's GPU must exist */
		printf("SKIP %d ranks: %s\n", n, moert_last_error());
		return 77;
	}
	moert_close(last);
	printf("NCCL %d, %d ranks\n", version, n);
	pthread_barrier_init(&bar, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		memset(&r[i], 0, sizeof r[i]);
		r[i].rank = i, r[i].n = n, r[i].bench = bench, r[i].one_device = one;
		memcpy(r[i].id, id, sizeof id);
		pthread_create(&th[i], NULL, rank_main, &r[i]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < n; i++)
		if (r[i].rc) {
			printf("FAIL rank %d: %s\n", i, r[i].err);
			fail = 1;
		}
	if (!fail && (bench || getenv("NCCL_CHECK_TABLE")))	/* the latter: the table's layout, in CI */
		table(&r[0], n);
	if (!fail)
		printf("ok   all_to_all and all_gather over %d ranks\n", n);
	return fail;
}
