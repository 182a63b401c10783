/*
 * fakenccl.c — a stand-in libnccl.so.2, so the runtime's NCCL path (the
 * call sequence, the data it moves, every error) runs in CI without GPUs:
 * MOERT_LIBNCCL=./libfakenccl.so, with fakecuda.c as the driver (device
 * memory is host memory there, so a "transfer" is a memcpy).
 *
 * Ranks are threads of one process: communicators made from the same
 * unique id form one clique, and a group's sends and receives (or an
 * all-gather) are matched at ncclGroupEnd across the clique, which waits
 * for every rank as NCCL does.  Knobs, read at every call:
 *	FAKENCCL_FAIL=NAME	the entry point NAME fails (ncclSystemError)
 *	FAKENCCL_ASYNC=N	ncclCommGetAsyncError reports N
 *	FAKENCCL_LOG=FILE	one line per call appended: "rank NAME args"
 * fakenccl_live() says how many communicators are not yet destroyed.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int ncclResult_t;
enum { OK = 0, ESYSTEM = 2, EINTERNAL = 3, EARG = 4, EUSAGE = 5, MAXR = 64, MAXOPS = 4 * MAXR };
typedef struct {
	char internal[128];
} ncclUniqueId;

typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char id[128];
	int n, joined, arrived;
	unsigned gen;
	/* posted at GroupEnd: what each rank sends to each peer */
	const void *sbuf[MAXR][MAXR];
	size_t scount[MAXR][MAXR];
} Clique;

typedef struct ncclComm {
	Clique *q;
	int rank, n;
} *ncclComm_t;

typedef struct {
	int send;		/* else a receive, or 2: all-gather */
	ncclComm_t comm;
	int peer;
	const void *sbuf;
	void *rbuf;
	size_t count;
} Op;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static Clique *cliques[16];
static int ncliques, live, idseq;
static _Thread_local Op ops[MAXOPS];
static _Thread_local int nops, depth;
static _Thread_local char lasterr[256];

static void
say(ncclComm_t c, const char *fmt, ...)
{
	const char *path = getenv("FAKENCCL_LOG");
	va_list ap;
	FILE *f;

	if (!path || !(f = fopen(path, "a")))
		return;
	fprintf(f, "%d ", c ? c->rank : -1);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

static int
failing(const char *name)
{
	const char *f = getenv("FAKENCCL_FAIL");

	if (f && strcmp(f, name) == 0) {
		snprintf(lasterr, sizeof lasterr, "fakenccl: %s told to fail", name);
		return 1;
	}
	return 0;
}

#define ENTER(c, name, ...)                          \
	do {                                         \
		say(c, name " " __VA_ARGS__);        \
		if (failing(name))                   \
			return ESYSTEM;              \
	} while (0)

int
fakenccl_live(void)
{
	return live;
}

const char *
ncclGetErrorString(ncclResult_t r)
{
	static const char *const s[] = {"no error", "unhandled cuda error", "unhandled system error",
					"internal error", "invalid argument", "invalid usage",
					"remote process exited or there was a network error",
					"NCCL operation in progress"};
	return r >= 0 && r < (int)(sizeof s / sizeof *s) ? s[r] : "unknown result code";
}

const char *
ncclGetLastError(ncclComm_t c)
{
	(void)c;
	return lasterr;
}

ncclResult_t
ncclGetVersion(int *v)
{
	ENTER(NULL, "ncclGetVersion", "");
	*v = 22703;
	return OK;
}

ncclResult_t
ncclGetUniqueId(ncclUniqueId *id)
{
	ENTER(NULL, "ncclGetUniqueId", "");
	memset(id, 0, sizeof *id);
	pthread_mutex_lock(&reg_mu);
	snprintf(id->internal, sizeof id->internal, "fakenccl-%d", ++idseq);
	pthread_mutex_unlock(&reg_mu);
	return OK;
}

static Clique *
clique(const ncclUniqueId *id, int n)
{
	Clique *q = NULL;

	pthread_mutex_lock(&reg_mu);
	for (int i = 0; i < ncliques && !q; i++)
		if (memcmp(cliques[i]->id, id->internal, 128) == 0)
			q = cliques[i];
	if (!q && ncliques < 16) {
		q = calloc(1, sizeof *q);
		pthread_mutex_init(&q->mu, NULL);
		pthread_cond_init(&q->cv, NULL);
		memcpy(q->id, id->internal, 128);
		q->n = n;
		cliques[ncliques++] = q;
	}
	pthread_mutex_unlock(&reg_mu);
	return q && q->n == n ? q : NULL;
}

ncclResult_t
ncclCommInitRank(ncclComm_t *out, int n, ncclUniqueId id, int rank)
{
	Clique *q;

	ENTER(NULL, "ncclCommInitRank", "n=%d rank=%d", n, rank);
	if (n < 1 || n > MAXR || rank < 0 || rank >= n || !(q = clique(&id, n))) {
		snprintf(lasterr, sizeof lasterr, "fakenccl: bad rank %d of %d, or id", rank, n);
		return EARG;
	}
	*out = calloc(1, sizeof **out);
	**out = (struct ncclComm){q, rank, n};
	pthread_mutex_lock(&reg_mu);
	live++;
	pthread_mutex_unlock(&reg_mu);
	return OK;
}

ncclResult_t
ncclCommDestroy(ncclComm_t c)
{
	say(c, "ncclCommDestroy");
	pthread_mutex_lock(&reg_mu);
	live--;
	pthread_mutex_unlock(&reg_mu);
	free(c);
	return OK;
}

ncclResult_t
ncclCommAbort(ncclComm_t c)
{
	return ncclCommDestroy(c);
}

ncclResult_t
ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r)
{
	const char *a = getenv("FAKENCCL_ASYNC");

	ENTER(c, "ncclCommGetAsyncError", "");
	*r = a ? atoi(a) : OK;
	if (*r)
		snprintf(lasterr, sizeof lasterr, "fakenccl: rank %d: a peer went away", c->rank);
	return OK;
}

ncclResult_t
ncclGroupStart(void)
{
	ENTER(NULL, "ncclGroupStart", "");
	if (!depth++)
		nops = 0;
	return OK;
}

static ncclResult_t
post(int kind, ncclComm_t c, int peer, const void *sbuf, void *rbuf, size_t count)
{
	if (nops == MAXOPS || !c || peer < 0 || peer >= c->n) {
		snprintf(lasterr, sizeof lasterr, "fakenccl: bad peer %d", peer);
		return EARG;
	}
	ops[nops++] = (Op){kind, c, peer, sbuf, rbuf, count};
	return OK;
}

ncclResult_t
ncclSend(const void *buf, size_t count, int dt, int peer, ncclComm_t c, void *stream)
{
	(void)stream;
	ENTER(c, "ncclSend", "peer=%d count=%zu dtype=%d", peer, count, dt);
	return dt == 1 ? post(1, c, peer, buf, NULL, count) : EARG;
}

ncclResult_t
ncclRecv(void *buf, size_t count, int dt, int peer, ncclComm_t c, void *stream)
{
	(void)stream;
	ENTER(c, "ncclRecv", "peer=%d count=%zu dtype=%d", peer, count, dt);
	return dt == 1 ? post(0, c, peer, NULL, buf, count) : EARG;
}

/* Every rank of q arrives; the last one releases them. */
static void
meet(Clique *q)
{
	pthread_mutex_lock(&q->mu);
	unsigned gen = q->gen;
	if (++q->arrived == q->n) {
		q->arrived = 0;
		q->gen++;
		pthread_cond_broadcast(&q->cv);
	} else {
		while (gen == q->gen)
			pthread_cond_wait(&q->cv, &q->mu);
	}
	pthread_mutex_unlock(&q->mu);
}

/* Post this rank's sends, meet, take the receives, meet again (so no one
 * reuses a buffer a peer still reads).  One communicator per group. */
static ncclResult_t
run_group(void)
{
	ncclComm_t c = nops ? ops[0].comm : NULL;
	ncclResult_t r = OK;

	if (!c)
		return OK;
	for (int p = 0; p < c->n; p++)
		c->q->sbuf[c->rank][p] = NULL, c->q->scount[c->rank][p] = 0;
	for (int i = 0; i < nops; i++)
		if (ops[i].send == 1) {
			c->q->sbuf[c->rank][ops[i].peer] = ops[i].sbuf;
			c->q->scount[c->rank][ops[i].peer] = ops[i].count;
		}
	meet(c->q);
	for (int i = 0; i < nops; i++)
		if (ops[i].send == 0) {
			int p = ops[i].peer;
			if (c->q->scount[p][c->rank] != ops[i].count) {
				snprintf(lasterr, sizeof lasterr, "fakenccl: rank %d receives %zu bytes "
					 "from %d, which sends %zu", c->rank, ops[i].count, p,
					 c->q->scount[p][c->rank]);
				r = EUSAGE;
			} else if (ops[i].count) {
				memcpy(ops[i].rbuf, c->q->sbuf[p][c->rank], ops[i].count);
			}
		}
	meet(c->q);
	return r;
}

ncclResult_t
ncclGroupEnd(void)
{
	ENTER(NULL, "ncclGroupEnd", "");
	if (depth < 1)
		return EUSAGE;
	if (--depth)
		return OK;
	ncclResult_t r = run_group();
	nops = 0;
	return r;
}

ncclResult_t
ncclAllGather(const void *sbuf, void *rbuf, size_t count, int dt, ncclComm_t c, void *stream)
{
	(void)stream;
	ENTER(c, "ncclAllGather", "count=%zu dtype=%d", count, dt);
	if (dt != 1)
		return EARG;
	/* a send of the same bytes to every peer and a receive from each */
	int outer = depth == 0;
	if (outer)
		depth++, nops = 0;
	for (int p = 0; p < c->n; p++) {
		post(1, c, p, sbuf, NULL, count);
		post(0, c, p, NULL, (char *)rbuf + (size_t)p * count, count);
	}
	if (!outer)
		return OK;
	depth--;
	ncclResult_t r = run_group();
	nops = 0;
	return r;
}
