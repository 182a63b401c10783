/*
 * eval_ep.c — expert parallelism in the interpreter: packing token rows by
 * destination rank (ep_pack), the exchange between ranks (all_to_all), and
 * N ranks run together in one process (ir_eval_ranks), one thread each,
 * meeting at every all_to_all as NCCL ranks meet at a grouped send/recv.
 *
 * ep_pack sends each token row once per rank that holds one of its
 * experts, not once per expert: destination d gets rows xs[d, 0..cnt) in
 * token order, padded with zero rows to T (the capacity: the worst case,
 * every token to one rank), with each slot's local expert id on d (-1 for
 * a slot d does not hold, and for padding) and its routing weight (0
 * there).  back[t*k+i] says where slot i of token t comes back: row
 * (d*T + j)*k + i of the returned [N, T*k, H] slots.  With combine=sum each
 * rank returns one partial sum per row it received instead, and
 * back[t*N+d] = d*T + j says where token t's partial from d comes back; a
 * rank d that holds none of t's experts points at row d*T + T-1, which is
 * then padding (fewer than T tokens went to d), whose partial is zero.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "eval_impl.h"

typedef struct {
	int64_t nr, ne;
	int64_t *owner, *local;
} EpMap;

static int
ep_map(Ev *e, const Node *n, EpMap *m)
{
	m->nr = ir_attr_int(n, "ranks", 1);
	m->ne = ir_attr_ints(n, "owner", NULL, 0);
	m->owner = xmalloc(sizeof(int64_t) * (size_t)(2 * m->ne + 1));
	m->local = m->owner + m->ne;
	ir_attr_ints(n, "owner", m->owner, (int)m->ne);
	ir_attr_ints(n, "local", m->local, (int)m->ne);
	for (int64_t x = 0; x < m->ne; x++)
		if (m->owner[x] < 0 || m->owner[x] >= m->nr || m->local[x] < 0) {
			free(m->owner);
			return ev_err(e, n, "ep_pack: expert %lld has owner %lld, local %lld: not a "
				      "rank in 0..%lld", (long long)x, (long long)m->owner[x],
				      (long long)m->local[x], (long long)m->nr - 1);
		}
	return 0;
}

int
ev_ep_pack(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	const Tensor *x = in[0], *w = in[1], *ids = in[2];
	int64_t nt = x->dim[0], nh = x->dim[1], k = ids->dim[1], *cnt;
	int sum = ir_ep_sum(n) == 1;
	EpMap m;

	if (ep_map(e, n, &m))
		return -1;
	for (int64_t s = 0; s < nt * k; s++) {
		int64_t id = dtype_load_int(ids->dt, ids->data, (size_t)s);
		if (id < 0 || id >= m.ne) {
			free(m.owner);
			return ev_err(e, n, "ep_pack: expert id %lld out of range for %lld experts",
				      (long long)id, (long long)m.ne);
		}
	}
	for (int64_t s = 0; s < m.nr * nt * k; s++)
		dtype_store_int(out[2].dt, out[2].data, (size_t)s, -1);
	cnt = xcalloc((size_t)m.nr + 1, sizeof *cnt);
	for (int64_t t = 0; t < nt; t++)
		for (int64_t d = 0; d < m.nr; d++) {
			int64_t j = -1;
			for (int64_t i = 0; i < k; i++) {
				int64_t id = dtype_load_int(ids->dt, ids->data, (size_t)(t * k + i));
				if (m.owner[id] != d)
					continue;
				if (j < 0) {	/* the row goes to d once */
					j = cnt[d]++;
					ev_copy(x->dt, out[0].data, (d * nt + j) * nh, x->data, t * nh, nh);
				}
				size_t at = (size_t)((d * nt + j) * k + i);
				dtype_store(out[1].dt, out[1].data, at,
					    dtype_load(w->dt, w->data, (size_t)(t * k + i)));
				dtype_store_int(out[2].dt, out[2].data, at, m.local[id]);
				if (!sum)
					dtype_store_int(out[3].dt, out[3].data, (size_t)(t * k + i),
							(int64_t)at);
			}
			if (sum)
				dtype_store_int(out[3].dt, out[3].data, (size_t)(t * m.nr + d),
						d * nt + (j < 0 ? nt - 1 : j));
		}
	free(cnt);
	free(m.owner);
	return 0;
}

/* With one rank, the identity; else the peers' exchange. */
int
ev_all_to_all(Ev *e, const Node *n, const Tensor *const *in, Tensor *out)
{
	int64_t nr = ir_attr_int(n, "ranks", 1);
	const IrComm *c = e->o->comm;
	char why[256] = "";

	if (nr == 1 && (!c || c->size == 1)) {
		memcpy(out[0].data, in[0]->data, tensor_nbytes(in[0]));
		return 0;
	}
	if (!c || c->size != nr)
		return ev_err(e, n, "all_to_all over %lld ranks needs its peers: run the ranks "
			      "together (moec run --ep=%lld)", (long long)nr, (long long)nr);
	if (c->exchange(c, in[0], &out[0], why, sizeof why))
		return ev_err(e, n, "all_to_all: %s", why);
	return 0;
}

/* --- N ranks in one process ---------------------------------------------- */

/* A barrier that a failing rank can break, so the others do not wait for
 * it forever: wait() returns -1 once any rank has failed. */
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int n, arrived, failed;
	unsigned gen;
	const Tensor *slot[IR_EP_MAX_RANKS];
} Peers;

static int
peers_wait(Peers *p)
{
	int rc;

	pthread_mutex_lock(&p->mu);
	unsigned gen = p->gen;
	if (++p->arrived == p->n) {
		p->arrived = 0;
		p->gen++;
		pthread_cond_broadcast(&p->cv);
	} else {
		while (gen == p->gen && !p->failed)
			pthread_cond_wait(&p->cv, &p->mu);
	}
	rc = p->failed ? -1 : 0;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

static void
peers_fail(Peers *p)
{
	pthread_mutex_lock(&p->mu);
	p->failed = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static int
same_shape(const Tensor *a, const Tensor *b)
{
	return a->dt == b->dt && a->rank == b->rank &&
	       memcmp(a->dim, b->dim, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* Everyone posts its tensor, copies chunk [me] of each peer's, and waits
 * again so that no tensor is freed while a peer still reads it.  A shape
 * mismatch is seen by every rank alike (they read the same slots), and is
 * reported only after the second wait: a rank that returned at once would
 * free its tensor while a peer still compares it. */
static int
exchange(const IrComm *c, const Tensor *in, Tensor *out, char *why, size_t n)
{
	Peers *p = c->ctx;
	size_t chunk = tensor_nbytes(in) / (size_t)c->size;
	int bad = -1;

	p->slot[c->rank] = in;
	if (peers_wait(p)) {
		snprintf(why, n, "another rank failed");
		return -1;
	}
	for (int s = 0; s < c->size && bad < 0; s++)
		if (!same_shape(p->slot[s], in))
			bad = s;
	for (int s = 0; s < c->size && bad < 0; s++)
		memcpy((char *)out->data + (size_t)s * chunk,
		       (const char *)p->slot[s]->data + (size_t)c->rank * chunk, chunk);
	if (peers_wait(p)) {
		snprintf(why, n, "another rank failed");
		return -1;
	}
	if (bad >= 0) {
		snprintf(why, n, "rank %d sends a different shape than rank %d (every rank "
			 "must run the same token count)", bad, c->rank);
		peers_fail(p);
		return -1;
	}
	return 0;
}

typedef struct {
	Graph *g;
	Tensor *in, *out;
	int nin, rc;
	IrComm comm;
	EvalOpts o;
	Diag d;
	Peers *p;
} Rank;

static void *
run_rank(void *arg)
{
	Rank *r = arg;

	r->rc = ir_eval(r->g, r->in, r->nin, r->out, &r->o, &r->d);
	if (r->rc)
		peers_fail(r->p);
	return NULL;
}

int
ir_eval_ranks(Graph *const *g, int nrank, Tensor *const *in, int nin, Tensor *const *out,
	      const EvalOpts *o, Diag *d)
{
	EvalOpts base = {0};
	Peers p;
	Rank *r;
	pthread_t *th;
	int rc = 0, started = 0;

	if (nrank < 1 || nrank > IR_EP_MAX_RANKS)
		return diag_error(d, LOC_NONE, "ranks must be in 1..%d, not %d", IR_EP_MAX_RANKS, nrank);
	memset(&p, 0, sizeof p);
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	p.n = nrank;
	r = xcalloc((size_t)nrank, sizeof *r);
	th = xcalloc((size_t)nrank, sizeof *th);
	for (int i = 0; i < nrank; i++) {
		r[i] = (Rank){.g = g[i], .in = in[i], .out = out[i], .nin = nin, .p = &p};
		r[i].comm = (IrComm){.rank = i, .size = nrank, .exchange = exchange, .ctx = &p};
		r[i].o = o ? *o : base;
		r[i].o.comm = &r[i].comm;
		diag_init(&r[i].d, NULL);
		r[i].d.level = d->level;
	}
	for (; started < nrank; started++)
		if (pthread_create(&th[started], NULL, run_rank, &r[started])) {
			peers_fail(&p);
			rc = diag_error(d, LOC_NONE, "could not start the thread of rank %d", started);
			break;
		}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < started && !rc; i++)	/* the first real failure, not its echo */
		if (r[i].rc && !strstr(r[i].d.last, "another rank failed"))
			rc = diag_error(d, LOC_NONE, "rank %d: %s", i, r[i].d.last);
	for (int i = 0; i < started && !rc; i++)
		if (r[i].rc)
			rc = diag_error(d, LOC_NONE, "rank %d: %s", i, r[i].d.last);
	for (int i = 0; i < started && rc; i++)	/* all or nothing */
		for (int j = 0; !r[i].rc && j < g[i]->nret; j++)
			tensor_free(&out[i][j]);
	pthread_mutex_destroy(&p.mu);
	pthread_cond_destroy(&p.cv);
	free(r);
	free(th);
	return rc;
}
