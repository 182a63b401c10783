/*
 * nccl.c — the collectives of expert parallelism through a dlopen'd NCCL,
 * as cuda.c does the driver: libnccl.so.2 (or $MOERT_LIBNCCL) opened on the
 * first use, every entry point resolved by name, a library without one
 * refused as a whole, a failed open not cached.  No home-made transport.
 *
 * A communicator is the caller's (moert_comm_wrap: an ncclComm_t it made,
 * never destroyed here) or the runtime's, from a unique id that rank 0 made
 * (moert_nccl_unique_id) and the caller sent to every rank
 * (moert_comm_init).  all_to_all is a grouped send/recv with every peer
 * (NCCL has no all-to-all of its own), all_gather NCCL's; both are
 * enqueued on the caller's stream with sizes the host knows (the capacity-
 * padded buffers of docs/passes.md), so they can be captured in a CUDA
 * graph.  Every NCCL error is a status with ncclGetErrorString's text, and
 * ncclGetLastError's when the library has it.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* NCCL's ABI, as nccl.h (2.x) declares it: only what is used. */
typedef struct ncclComm *ncclComm_t;
typedef struct {
	char internal[MOERT_NCCL_ID_BYTES];
} ncclUniqueId;
typedef int ncclResult_t;	/* ncclSuccess = 0 */
enum { NCCL_UINT8 = 1, NCCL_IN_PROGRESS = 7 };

#define NCCL_FUNCS(X)                                                                 \
	X(ncclGetVersion, (int *))                                                    \
	X(ncclGetUniqueId, (ncclUniqueId *))                                          \
	X(ncclCommInitRank, (ncclComm_t *, int, ncclUniqueId, int))                   \
	X(ncclCommDestroy, (ncclComm_t))                                              \
	X(ncclCommAbort, (ncclComm_t))                                                \
	X(ncclCommGetAsyncError, (ncclComm_t, ncclResult_t *))                        \
	X(ncclGroupStart, (void))                                                     \
	X(ncclGroupEnd, (void))                                                       \
	X(ncclSend, (const void *, size_t, int, int, ncclComm_t, void *))             \
	X(ncclRecv, (void *, size_t, int, int, ncclComm_t, void *))                   \
	X(ncclAllGather, (const void *, void *, size_t, int, ncclComm_t, void *))

typedef struct {
#define X(name, params) ncclResult_t(*name) params;
	NCCL_FUNCS(X)
#undef X
	const char *(*ncclGetErrorString)(ncclResult_t);
	const char *(*ncclGetLastError)(ncclComm_t);	/* 2.13 and later; optional */
} Nccl;

struct moert_comm {
	ncclComm_t comm;
	int nranks, rank, owned;	/* owned: made here, destroyed here */
};

static Nccl nc;
static void *lib;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The error's name and, where the library keeps one, its last message. */
static moert_status
check(ncclResult_t r, ncclComm_t comm, const char *call)
{
	const char *text, *last;

	if (r == 0)
		return MOERT_OK;
	text = nc.ncclGetErrorString ? nc.ncclGetErrorString(r) : NULL;
	last = nc.ncclGetLastError ? nc.ncclGetLastError(comm) : NULL;
	return moert_seterr(MOERT_ECOMM, "%s: %s (NCCL error %d)%s%s", call, text ? text : "?", r,
			    last && *last ? ": " : "", last && *last ? last : "");
}

#define NC(comm, fn, args) check(nc.fn args, comm, #fn)

static moert_status
open_nccl(void)
{
	const char *path = getenv("MOERT_LIBNCCL");
	Nccl n = {0};
	void *h;

	if (!path || !*path)
		path = "libnccl.so.2";
	if (!(h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
		const char *e = dlerror();
		return moert_seterr(MOERT_ENODRIVER, "cannot load NCCL: %s (set MOERT_LIBNCCL to "
				    "libnccl.so.2's path: docs/runtime.md)", e ? e : path);
	}
#define X(name, params)                                                                 \
	if (!(*(void **)&n.name = dlsym(h, #name))) {                                     \
		dlclose(h);                                                               \
		return moert_seterr(MOERT_ENODRIVER, "%s: no symbol %s (not NCCL 2, or one " \
				    "too old)", path, #name);                             \
	}
	NCCL_FUNCS(X)
	X(ncclGetErrorString, ())
#undef X
	*(void **)&n.ncclGetLastError = dlsym(h, "ncclGetLastError");
	nc = n;
	lib = h;
	return MOERT_OK;
}

/* NVLink multicast (NVLS) stays off unless the caller chose: these
 * machines' fabric does not give it (KINDS.md), and NCCL reads the
 * variable when the first communicator is made. */
static moert_status
nccl_load(void)
{
	moert_status s = MOERT_OK;

	pthread_mutex_lock(&lock);
	setenv("NCCL_NVLS_ENABLE", "0", 0);
	if (!lib)
		s = open_nccl();
	pthread_mutex_unlock(&lock);
	return s;
}

moert_status
moert_nccl_version(int *version)
{
	moert_status s;

	if (!version)
		return moert_seterr(MOERT_EINVAL, "moert_nccl_version: NULL");
	if ((s = nccl_load()) != MOERT_OK)
		return s;
	return NC(NULL, ncclGetVersion, (version));
}

moert_status
moert_nccl_unique_id(void *id)
{
	ncclUniqueId u;
	moert_status s;

	if (!id)
		return moert_seterr(MOERT_EINVAL, "moert_nccl_unique_id: NULL");
	if ((s = nccl_load()) != MOERT_OK || (s = NC(NULL, ncclGetUniqueId, (&u))) != MOERT_OK)
		return s;
	memcpy(id, &u, sizeof u);
	return MOERT_OK;
}

static moert_status
check_rank(int nranks, int rank, const char *fn)
{
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return moert_seterr(MOERT_EINVAL, "%s: rank %d of %d ranks", fn, rank, nranks);
	return MOERT_OK;
}

/*
 * Collective over all ranks: each calls it with the same id, with its own
 * device's context current (moert_open made it so on this thread).
 */
moert_status
moert_comm_init(moert_device *dev, int nranks, int rank, const void *id, moert_comm **out)
{
	ncclUniqueId u;
	ncclComm_t comm = NULL;
	moert_status s;

	if (!out || !id || !dev)
		return moert_seterr(MOERT_EINVAL, "moert_comm_init: NULL argument");
	*out = NULL;
	if ((s = check_rank(nranks, rank, "moert_comm_init")) != MOERT_OK || (s = nccl_load()) != MOERT_OK)
		return s;
	if ((s = CU(MOERT_ELAUNCH, cuCtxSetCurrent, (dev->ctx))) != MOERT_OK)
		return s;
	memcpy(&u, id, sizeof u);
	if ((s = NC(NULL, ncclCommInitRank, (&comm, nranks, u, rank))) != MOERT_OK)
		return moert_context(s, "rank %d of %d", rank, nranks);
	if (!(*out = calloc(1, sizeof **out))) {
		nc.ncclCommDestroy(comm);
		return moert_seterr(MOERT_ENOMEM, "moert_comm_init: out of host memory");
	}
	**out = (moert_comm){.comm = comm, .nranks = nranks, .rank = rank, .owned = 1};
	return MOERT_OK;
}

moert_status
moert_comm_wrap(void *nccl_comm, int nranks, int rank, moert_comm **out)
{
	moert_status s;

	if (!out || !nccl_comm)
		return moert_seterr(MOERT_EINVAL, "moert_comm_wrap: NULL argument");
	*out = NULL;
	if ((s = check_rank(nranks, rank, "moert_comm_wrap")) != MOERT_OK || (s = nccl_load()) != MOERT_OK)
		return s;
	if (!(*out = calloc(1, sizeof **out)))
		return moert_seterr(MOERT_ENOMEM, "moert_comm_wrap: out of host memory");
	**out = (moert_comm){.comm = nccl_comm, .nranks = nranks, .rank = rank};
	return MOERT_OK;
}

void
moert_comm_free(moert_comm *c)
{
	if (!c)
		return;
	if (c->owned)
		nc.ncclCommDestroy(c->comm);
	free(c);
}

int
moert_comm_rank(const moert_comm *c)
{
	return c ? c->rank : -1;
}

int
moert_comm_size(const moert_comm *c)
{
	return c ? c->nranks : 0;
}

/* An error a peer or the network raised since the last call: a status. */
moert_status
moert_comm_check(moert_comm *c)
{
	ncclResult_t r = 0;
	moert_status s;

	if (!c)
		return moert_seterr(MOERT_EINVAL, "moert_comm_check: NULL");
	if ((s = NC(c->comm, ncclCommGetAsyncError, (c->comm, &r))) != MOERT_OK)
		return s;
	return r == NCCL_IN_PROGRESS ? MOERT_OK : check(r, c->comm, "ncclCommGetAsyncError");
}

/*
 * recv[s] = send[me] of rank s, chunks of `chunk` bytes: one ncclSend and
 * one ncclRecv per peer (itself included) in one group, so NCCL runs them
 * together and no pair waits on another.
 */
moert_status
moert_all_to_all(moert_comm *c, uint64_t send, uint64_t recv, size_t chunk, void *stream)
{
	moert_status s, e;

	if (!c || (chunk && (!send || !recv)))
		return moert_seterr(MOERT_EINVAL, "moert_all_to_all: NULL argument");
	if ((s = NC(c->comm, ncclGroupStart, ())) != MOERT_OK)
		return s;
	for (int p = 0; p < c->nranks && s == MOERT_OK; p++) {
		s = NC(c->comm, ncclSend, ((const void *)(uintptr_t)(send + (uint64_t)p * chunk), chunk,
					   NCCL_UINT8, p, c->comm, stream));
		if (s == MOERT_OK)
			s = NC(c->comm, ncclRecv, ((void *)(uintptr_t)(recv + (uint64_t)p * chunk), chunk,
						   NCCL_UINT8, p, c->comm, stream));
	}
	e = NC(c->comm, ncclGroupEnd, ());	/* always closes the group it opened */
	return s != MOERT_OK ? s : e;
}

/* recv[s] = rank s's `bytes` at send: the per-rank counts, say. */
moert_status
moert_all_gather(moert_comm *c, uint64_t send, uint64_t recv, size_t bytes, void *stream)
{
	if (!c || (bytes && (!send || !recv)))
		return moert_seterr(MOERT_EINVAL, "moert_all_gather: NULL argument");
	return NC(c->comm, ncclAllGather, ((const void *)(uintptr_t)send, (void *)(uintptr_t)recv,
					   bytes, NCCL_UINT8, c->comm, stream));
}

moert_status
moert_program_set_comm(moert_program *p, moert_comm *c)
{
	const Manifest *m = p ? p->m : NULL;

	if (!m)
		return moert_seterr(MOERT_EINVAL, "moert_program_set_comm: no program");
	if (c && !m->ep_ranks)
		return moert_seterr(MOERT_EINVAL, "program '%s' is not expert-parallel (no ep "
				    "line): it has no all_to_all to run", p->name);
	if (c && (moert_comm_size(c) != m->ep_ranks || moert_comm_rank(c) != m->ep_rank))
		return moert_seterr(MOERT_EINVAL, "program '%s' is rank %d of %d; the "
				    "communicator is rank %d of %d", p->name, m->ep_rank,
				    m->ep_ranks, moert_comm_rank(c), moert_comm_size(c));
	if (c != p->comm)	/* a captured graph holds the old communicator */
		moert_drop_graphs(p);
	p->comm = c;
	return MOERT_OK;
}

int
moert_ep_rank(const moert_program *p, int *nranks)
{
	if (nranks)
		*nranks = p && p->m ? p->m->ep_ranks : 0;
	return p && p->m && p->m->ep_ranks ? p->m->ep_rank : -1;
}
