/*
 * serve.c — what a server needs beyond load-and-run: weights the framework
 * already holds, bound by pointer and checked against the manifest; one
 * caller-owned workspace shared by many programs; a run that touches no
 * mutable state of the program, so threads can share one program.
 *
 *	moert_load_host(bytes)            moert_load_host(bytes)
 *	moert_load_device(dev)            moert_bind_weight(p, "w13", ptr, "bf16", 3, dims)
 *	  mem = [weights|generated|arena] moert_set_workspace(p, ws, moert_workspace_size(p))
 *	                                  moert_load_device(dev)
 *	                                    mem = [generated weights not bound]
 *	                                  moert_run_ws(p, T, in, out, ws, stream)   (any thread)
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int
moert_num_weights(const moert_program *p)
{
	return p ? p->m->nw : 0;
}

static moert_status
weight_index(const moert_program *p, int i)
{
	if (!p || i < 0 || i >= p->m->nw)
		return moert_seterr(MOERT_EINVAL, "no weight %d (the bundle has %d)", i,
				    p ? p->m->nw : 0);
	return MOERT_OK;
}

moert_status
moert_weight_info(const moert_program *p, int i, moert_tensor_info *info)
{
	const MWeight *w;
	moert_status s;

	if ((s = weight_index(p, i)))
		return s;
	w = &p->m->w[i];
	memset(info, 0, sizeof *info);
	info->name = w->name;
	info->dtype = dtype_name(w->dt);
	info->rank = w->rank;
	memcpy(info->dim, w->dim, sizeof w->dim[0] * (size_t)w->rank);
	info->bytes = (size_t)w->bytes;
	return MOERT_OK;
}

/* Does a launch step (the run plan) read weight i? */
static int
run_reads(const Manifest *m, int i)
{
	for (int k = 0; k < m->nstep; k++)
		if (m->step[k].kind == STEP_LAUNCH)
			for (int a = 0; a < m->step[k].narg; a++)
				if (m->step[k].arg[a].kind == ARG_W && m->step[k].arg[a].index == i)
					return 1;
	return 0;
}

int
moert_weight_flags(const moert_program *p, int i)
{
	if (weight_index(p, i))
		return 0;
	return (run_reads(p->m, i) ? MOERT_WEIGHT_RUN : 0) |
	       (p->m->w[i].synth ? MOERT_WEIGHT_GENERATED : 0) |
	       (p->bound && p->bound[i] ? MOERT_WEIGHT_BOUND : 0);
}

static void
dims_string(char *buf, size_t n, const char *dtype, int rank, const int64_t *dim)
{
	size_t k = (size_t)snprintf(buf, n, "%s[", dtype);

	for (int i = 0; i < rank && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dim[i]);
	if (k < n)
		snprintf(buf + k, n - k, "]");
}

moert_status
moert_bind_weight(moert_program *p, const char *name, uint64_t ptr,
		  const char *dtype, int rank, const int64_t *dim)
{
	char want[200], got[200];
	const MWeight *w;
	int i;

	if (!p || !name || !dtype || (rank && !dim))
		return moert_seterr(MOERT_EINVAL, "bind: no program, name, dtype or dims");
	if (p->dev || !p->bytes)
		return moert_seterr(MOERT_EINVAL, "weight '%s': bind before moert_load_device "
				    "(the program is already on a device)", name);
	if ((i = bundle_find_weight(p->m, name)) < 0)
		return moert_seterr(MOERT_EINVAL, "the bundle has no weight named '%s'", name);
	w = &p->m->w[i];
	dims_string(want, sizeof want, dtype_name(w->dt), w->rank, w->dim);
	dims_string(got, sizeof got, dtype, rank < 0 || rank > MAXRANK ? 0 : rank, dim);
	if (rank != w->rank || strcmp(dtype, dtype_name(w->dt)) != 0 ||
	    memcmp(dim, w->dim, sizeof dim[0] * (size_t)rank) != 0)
		return moert_seterr(MOERT_ESHAPE, "weight '%s' is %s, the bundle declares %s",
				    name, got, want);
	if (!ptr || ptr % MOERT_WEIGHT_ALIGN)
		return moert_seterr(MOERT_EINVAL, "weight '%s': device pointer 0x%llx is not a "
				    "multiple of %d", name, (unsigned long long)ptr,
				    MOERT_WEIGHT_ALIGN);
	if (!p->bound)
		p->bound = arena_array(p->arena, uint64_t, p->m->nw + 1);
	p->bound[i] = ptr;
	return MOERT_OK;
}

int
moert_init_skipped(const moert_program *p, const MStep *s)
{
	int dst = -1;

	if (!p->bound)
		return 0;
	for (int a = 0; a < s->narg; a++)
		if (s->arg[a].kind == ARG_W)
			dst = s->arg[a].index;
	return dst >= 0 && p->bound[dst] != 0;
}

void
moert_trim_plan(const moert_program *p, uint64_t wbytes, uint64_t *woff,
		uint64_t *wsize, uint64_t *total, uint64_t *upload)
{
	uint64_t base = BUNDLE_ALIGN_UP(wbytes), gen = *wsize - base;
	int real = 0, made = 0;

	for (int i = 0; i < p->m->nw; i++)
		if (!p->bound || !p->bound[i])
			*(p->m->w[i].synth ? &made : &real) = 1;
	if (!real && base) {	/* nothing to upload: the generated region moves down */
		for (int i = 0; i < p->m->nw; i++)
			if (p->m->w[i].synth)
				woff[i] -= base;
		base = 0;
	}
	*upload = real ? wbytes : 0;
	*wsize = base + (made ? gen : 0);
	*total = *wsize + (p->ws ? 0 : p->m->arena);
}

/* --- workspaces -------------------------------------------------------------- */

uint64_t
moert_workspace_size(const moert_program *p)
{
	return p ? p->m->arena : 0;
}

static moert_status
check_workspace(const moert_program *p, uint64_t ptr, uint64_t bytes)
{
	if (ptr % MOERT_WEIGHT_ALIGN)
		return moert_seterr(MOERT_EINVAL, "workspace 0x%llx is not a multiple of %d",
				    (unsigned long long)ptr, MOERT_WEIGHT_ALIGN);
	if (bytes < p->m->arena)
		return moert_seterr(MOERT_EINVAL, "workspace of %llu bytes, the program needs "
				    "%llu (moert_workspace_size)", (unsigned long long)bytes,
				    (unsigned long long)p->m->arena);
	return MOERT_OK;
}

moert_status
moert_set_workspace(moert_program *p, uint64_t ptr, uint64_t bytes)
{
	moert_status s;

	if (!p)
		return moert_seterr(MOERT_EINVAL, "no program");
	if (ptr && (s = check_workspace(p, ptr, bytes)))
		return s;
	if (!p->dev) {		/* before load: no arena of our own then */
		p->ws = ptr;
		return MOERT_OK;
	}
	if (!ptr && !p->own_arena && p->m->arena)
		return moert_seterr(MOERT_EINVAL, "the program was loaded without a workspace "
				    "of its own: give one");
	if ((s = moert_bind(p->dev)))
		return s;
	moert_drop_graphs(p);	/* they hold the old arena's pointers */
	p->ws = ptr;
	p->bases.arena = ptr ? ptr : p->own_arena;
	return MOERT_OK;
}

/* --- runs from any thread ------------------------------------------------------ */

moert_status
moert_run_ws(moert_program *p, int64_t tokens, const uint64_t *inputs,
	     const uint64_t *outputs, uint64_t workspace, void *stream)
{
	unsigned char pbuf[MOERT_MAXPARAM] __attribute__((aligned(16)));
	void *pptr[BUNDLE_MAXARGS];
	MoertBases b;
	moert_status s;

	if (!p)
		return moert_seterr(MOERT_EINVAL, "no program");
	if (!p->dev)
		return moert_seterr(MOERT_EINVAL, "the program is not loaded on a device "
				    "(moert_load_host only)");
	if ((s = moert_check_tokens(p->m, tokens)))
		return s;
	for (int i = 0; i < p->m->nin; i++)
		if (!inputs || !inputs[i])
			return moert_seterr(MOERT_EINVAL, "input %d '%s': no device pointer", i,
					    p->m->in[i].name);
	for (int i = 0; i < p->m->nout; i++)
		if (!outputs || !outputs[i])
			return moert_seterr(MOERT_EINVAL, "output %d '%s': no device pointer", i,
					    p->m->out[i].name);
	if (workspace && (s = check_workspace(p, workspace, p->m->arena)))
		return s;
	if ((s = moert_bind(p->dev)))
		return s;
	b.in = inputs, b.out = outputs;
	b.w = p->wptr;
	b.arena = workspace ? workspace : p->bases.arena;
	for (int i = 0; i < p->m->nstep; i++) {
		const MStep *st = &p->m->step[i];
		if (st->kind != STEP_INIT && bundle_step_runs(st, tokens) &&
		    (s = moert_launch_with(p, st, tokens, (CUstream)stream, &b, pbuf, pptr)))
			return s;
	}
	return MOERT_OK;
}

/* --- the caller's streams and graphs, without CUDA headers ---------------------- */

moert_status
moert_stream_create(moert_device *dev, void **stream)
{
	CUstream s = NULL;
	moert_status st;

	*stream = NULL;
	if (!dev)
		return moert_seterr(MOERT_EINVAL, "no device");
	if ((st = moert_bind(dev)) ||
	    (st = CU(MOERT_ENOMEM, cuStreamCreate, (&s, CU_STREAM_NON_BLOCKING))))
		return st;
	*stream = s;
	return MOERT_OK;
}

moert_status
moert_stream_destroy(moert_device *dev, void *stream)
{
	moert_status st;

	if (!dev || !stream)
		return MOERT_OK;
	if ((st = moert_bind(dev)))
		return st;
	return CU(MOERT_EINVAL, cuStreamDestroy_v2, ((CUstream)stream));
}

moert_status
moert_stream_sync(moert_device *dev, void *stream)
{
	moert_status st;

	if (!dev)
		return moert_seterr(MOERT_EINVAL, "no device");
	if ((st = moert_bind(dev)))
		return st;
	return CU(MOERT_ELAUNCH, cuStreamSynchronize, ((CUstream)stream));
}

moert_status
moert_capture_begin(moert_device *dev, void *stream)
{
	moert_status st;

	if (!dev || !stream)
		return moert_seterr(MOERT_EINVAL, "capture needs a device and a stream of "
				    "its own (not the legacy default stream)");
	if ((st = moert_bind(dev)))
		return st;
	return CU(MOERT_ELAUNCH, cuStreamBeginCapture_v2,
		  ((CUstream)stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
}

moert_status
moert_capture_end(moert_device *dev, void *stream, void **graph)
{
	CUgraph g = NULL;
	CUgraphExec e = NULL;
	moert_status st;

	*graph = NULL;
	if (!dev || !stream)
		return moert_seterr(MOERT_EINVAL, "no device or stream");
	if ((st = moert_bind(dev)))
		return st;
	st = CU(MOERT_ELAUNCH, cuStreamEndCapture, ((CUstream)stream, &g));
	if (!st)
		st = CU(MOERT_ELAUNCH, cuGraphInstantiateWithFlags, (&e, g, 0));
	if (g)
		moert_cu.cuGraphDestroy(g);
	if (st)
		return moert_context(st, "ending the capture");
	*graph = e;
	return MOERT_OK;
}

moert_status
moert_graph_launch(moert_device *dev, void *graph, void *stream)
{
	moert_status st;

	if (!dev || !graph)
		return moert_seterr(MOERT_EINVAL, "no device or graph");
	if ((st = moert_bind(dev)))
		return st;
	return CU(MOERT_ELAUNCH, cuGraphLaunch, ((CUgraphExec)graph, (CUstream)stream));
}

moert_status
moert_graph_destroy(moert_device *dev, void *graph)
{
	moert_status st;

	if (!dev || !graph)
		return MOERT_OK;
	if ((st = moert_bind(dev)))
		return st;
	return CU(MOERT_EINVAL, cuGraphExecDestroy, ((CUgraphExec)graph));
}
