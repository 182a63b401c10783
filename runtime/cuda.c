/*
 * cuda.c — the CUDA driver through dlopen, and the runtime's error channel.
 *
 * libcuda.so.1 (or $MOERT_LIBCUDA) is opened on the first moert_open and
 * every entry point resolved by its ABI name; a library without one is
 * refused as a whole.  A failed open is not cached, so a later call can
 * succeed.  Errors are a status plus a thread-local message; nothing here
 * exits or aborts.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

MoertDriver moert_cu;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *lib;	/* never closed: the driver keeps threads of its own */
static _Thread_local char lasterr[2048];

static const char *const status_names[] = {
	"MOERT_OK",	 "MOERT_ENODRIVER", "MOERT_ENODEV",  "MOERT_EARCH",
	"MOERT_EFORMAT", "MOERT_EVERSION",  "MOERT_ESHAPE",  "MOERT_ETOKENS",
	"MOERT_ENOMEM",	 "MOERT_ELOAD",	    "MOERT_ELAUNCH", "MOERT_EINVAL",
	"MOERT_EIO",	 "MOERT_ECOMM",
};
_Static_assert(NELEM(status_names) == MOERT_ECOMM + 1, "ORDER STATUS: moert.h");

const char *
moert_status_name(moert_status s)
{
	return (unsigned)s < NELEM(status_names) ? status_names[s] : "MOERT_?";
}

const char *
moert_last_error(void)
{
	return lasterr;
}

moert_status
moert_seterr(moert_status s, const char *fmt, ...)
{
	char msg[sizeof lasterr];	/* an argument may be lasterr itself */
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	memcpy(lasterr, msg, sizeof msg);
	return s;
}

moert_status
moert_context(moert_status s, const char *fmt, ...)
{
	char old[sizeof lasterr], pre[512];
	va_list ap;

	memcpy(old, lasterr, sizeof old);
	va_start(ap, fmt);
	vsnprintf(pre, sizeof pre, fmt, ap);
	va_end(ap);
	/* the context goes first; what does not fit of the old message is cut */
	snprintf(lasterr, sizeof lasterr, "%.511s: %.*s", pre, (int)(sizeof lasterr - 520), old);
	return s;
}

moert_status
moert_cu_check(CUresult r, moert_status st, const char *call,
	       const char *file, int line)
{
	const char *name = NULL, *text = NULL;

	if (r == CUDA_SUCCESS)
		return MOERT_OK;
	if (moert_cu.cuGetErrorName)
		moert_cu.cuGetErrorName(r, &name);
	if (moert_cu.cuGetErrorString)
		moert_cu.cuGetErrorString(r, &text);
	snprintf(lasterr, sizeof lasterr, "%s: %s (%s) [error %d at %s:%d]",
		 call, name ? name : "CUDA_ERROR_?", text ? text : "no text",
		 r, file, line);
	return r == CUDA_ERROR_OUT_OF_MEMORY ? MOERT_ENOMEM : st;
}

/* Resolve every entry point into `d`; the first missing one fails. */
static moert_status
resolve(void *h, const char *path, MoertDriver *d)
{
#define X(name, params)                                                        \
	if (!(*(void **)&d->name = dlsym(h, #name)))                           \
		return moert_seterr(MOERT_ENODRIVER, "%s: no symbol %s (not "  \
				    "the CUDA driver, or one too old)",        \
				    path, #name);
	CU_FUNCS(X)
#undef X
	*(void **)&d->cuTensorMapEncodeTiled = dlsym(h, "cuTensorMapEncodeTiled");
	*(void **)&d->cuLaunchKernelEx = dlsym(h, "cuLaunchKernelEx");
	*(void **)&d->cuOccupancyMaxActiveClusters = dlsym(h, "cuOccupancyMaxActiveClusters");
	return MOERT_OK;
}

static moert_status
open_driver(void)
{
	const char *path = getenv("MOERT_LIBCUDA");
	MoertDriver d;
	moert_status s;
	void *h;

	if (!path || !*path)
		path = "libcuda.so.1";
	if (!(h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
		const char *e = dlerror();
		return moert_seterr(MOERT_ENODRIVER, "cannot load the CUDA "
				    "driver: %s", e ? e : path);
	}
	if ((s = resolve(h, path, &d)) != MOERT_OK) {
		dlclose(h);
		return s;
	}
	moert_cu = d;
	lib = h;
	return MOERT_OK;
}

moert_status
moert_driver_load(void)
{
	moert_status s = MOERT_OK;
	CUresult r;

	pthread_mutex_lock(&lock);
	if (!lib && (s = open_driver()) == MOERT_OK &&
	    (r = moert_cu.cuInit(0)) != CUDA_SUCCESS) {
		s = moert_cu_check(r, r == CUDA_ERROR_NO_DEVICE ? MOERT_ENODEV
								: MOERT_ENODRIVER,
				   "cuInit(0)", __FILE__, __LINE__);
		memset(&moert_cu, 0, sizeof moert_cu);
		dlclose(lib);
		lib = NULL;
	}
	pthread_mutex_unlock(&lock);
	return s;
}

/* Make the device's primary context current on this thread. */
moert_status
moert_bind(moert_device *dev)
{
	return CU(MOERT_EINVAL, cuCtxSetCurrent, (dev->ctx));
}
