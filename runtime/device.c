/*
 * device.c — open a device (its primary context), describe it, and the
 * small memory helpers that let tools and tests move data without CUDA
 * headers.  Each call makes the device's context current on the calling
 * thread first, so a device can be used from any thread (one at a time).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static moert_status
attrs(moert_device *d)
{
	moert_status s;

	if ((s = CU(MOERT_ENODEV, cuDeviceGetAttribute,
		    (&d->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
		     d->dev))) ||
	    (s = CU(MOERT_ENODEV, cuDeviceGetAttribute,
		    (&d->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
		     d->dev))) ||
	    (s = CU(MOERT_ENODEV, cuDeviceGetAttribute,
		    (&d->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev))) ||
	    (s = CU(MOERT_ENODEV, cuDeviceGetAttribute,
		    (&d->smem_optin,
		     CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
		     d->dev))) ||
	    (s = CU(MOERT_ENODEV, cuDeviceTotalMem_v2, (&d->total, d->dev))))
		return s;
	return MOERT_OK;
}

static moert_status
describe(moert_device *d)
{
	char name[200] = "";
	moert_status s;

	if ((s = CU(MOERT_ENODEV, cuDeviceGetName, (name, sizeof name - 1, d->dev))) ||
	    (s = attrs(d)))
		return s;
	snprintf(d->name, sizeof d->name, "%s, sm_%d%d, %d SMs, %.1f GiB", name,
		 d->major, d->minor, d->sms, (double)d->total / (1u << 30));
	return MOERT_OK;
}

moert_status
moert_open(int ordinal, moert_device **out)
{
	moert_device *d;
	moert_status s;
	int n = 0;

	*out = NULL;
	if ((s = moert_driver_load()))
		return s;
	if ((s = CU(MOERT_ENODEV, cuDeviceGetCount, (&n))))
		return s;
	if (ordinal < 0 || ordinal >= n)
		return moert_seterr(MOERT_ENODEV, "no device %d (%d present)",
				    ordinal, n);
	if (!(d = calloc(1, sizeof *d)))
		return moert_seterr(MOERT_ENOMEM, "out of host memory");
	d->ordinal = ordinal;
	if ((s = CU(MOERT_ENODEV, cuDeviceGet, (&d->dev, ordinal))) ||
	    (s = describe(d)) ||
	    (s = CU(MOERT_ENODEV, cuDevicePrimaryCtxRetain, (&d->ctx, d->dev)))) {
		free(d);
		return s;
	}
	*out = d;
	return MOERT_OK;
}

void
moert_close(moert_device *dev)
{
	if (!dev)
		return;
	moert_cu.cuDevicePrimaryCtxRelease_v2(dev->dev);
	free(dev);
}

const char *
moert_device_name(const moert_device *dev)
{
	return dev ? dev->name : "";
}

moert_status
moert_malloc(moert_device *dev, size_t bytes, uint64_t *ptr)
{
	CUdeviceptr p = 0;
	moert_status s;

	*ptr = 0;
	if ((s = moert_bind(dev)) ||
	    (s = CU(MOERT_ENOMEM, cuMemAlloc_v2, (&p, bytes ? bytes : 1))))
		return s;
	*ptr = p;
	return MOERT_OK;
}

moert_status
moert_free(moert_device *dev, uint64_t ptr)
{
	moert_status s;

	if (!ptr)
		return MOERT_OK;
	if ((s = moert_bind(dev)))
		return s;
	return CU(MOERT_EINVAL, cuMemFree_v2, (ptr));
}

moert_status
moert_memcpy_htod(moert_device *dev, uint64_t dst, const void *src, size_t n)
{
	moert_status s;

	if (!n)
		return MOERT_OK;
	if ((s = moert_bind(dev)))
		return s;
	return CU(MOERT_EINVAL, cuMemcpyHtoD_v2, (dst, src, n));
}

moert_status
moert_memcpy_dtoh(moert_device *dev, void *dst, uint64_t src, size_t n)
{
	moert_status s;

	if (!n)
		return MOERT_OK;
	if ((s = moert_bind(dev)))
		return s;
	return CU(MOERT_EINVAL, cuMemcpyDtoH_v2, (dst, src, n));
}

moert_status
moert_memset(moert_device *dev, uint64_t dst, unsigned char byte, size_t n)
{
	moert_status s;

	if (!n)
		return MOERT_OK;
	if ((s = moert_bind(dev)))
		return s;
	return CU(MOERT_EINVAL, cuMemsetD8_v2, (dst, byte, n));
}

moert_status
moert_sync(moert_device *dev)
{
	moert_status s;

	if ((s = moert_bind(dev)))
		return s;
	return CU(MOERT_ELAUNCH, cuCtxSynchronize, ());
}

moert_status
moert_mem_info(moert_device *dev, size_t *free_bytes, size_t *total_bytes)
{
	moert_status s;

	if ((s = moert_bind(dev)))
		return s;
	return CU(MOERT_EINVAL, cuMemGetInfo_v2, (free_bytes, total_bytes));
}
