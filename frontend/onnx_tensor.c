/*
 * onnx_tensor.c — TensorProto (initializers, Constant values) to bytes in
 * the IR's layout: raw_data, the typed fields (float_data, int32_data,
 * int64_data, double_data), and external data in a file beside the model.
 *
 * Every size is checked before anything is allocated: dims against
 * overflow and the byte limit, raw_data and typed counts against the dims,
 * external ranges against the file's size.  External paths must stay
 * inside the model's folder (no absolute paths, no ".." that leaves it, no
 * symbolic link out of it).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_int.h"

static int
terr(Ctx *c, Loc l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_verror(c->d, l, fmt, ap);
	va_end(ap);
	return -1;
}

int
ox_tensor_type(Ctx *c, const Onnx__TensorProto *t, Loc l, Type *ty)
{
	uint64_t n = 1;
	DType dt;

	memset(ty, 0, sizeof *ty);
	if (!t->has_data_type || t->data_type == 0)
		return terr(c, l, "tensor has no data_type");
	if (dtype_from_onnx(t->data_type, &dt) != 0)
		return terr(c, l, "unsupported tensor data_type %d%s", t->data_type,
			    t->data_type == 8 ? " (string)" : "");
	if (t->segment)
		return terr(c, l, "segmented tensors are not supported");
	if (t->n_dims > MAXRANK)
		return terr(c, l, "tensor rank %zu exceeds %d", t->n_dims, MAXRANK);
	for (size_t i = 0; i < t->n_dims; i++) {
		if (t->dims[i] < 0)
			return terr(c, l, "tensor dim %zu is negative (%lld)", i,
				    (long long)t->dims[i]);
		if (t->dims[i] && n > (uint64_t)c->max_bytes / (uint64_t)t->dims[i])
			return terr(c, l, "tensor dims overflow the size limit of %lld bytes",
				    (long long)c->max_bytes);
		n *= (uint64_t)t->dims[i];
	}
	if (dtype_bytes(dt, n) > (uint64_t)c->max_bytes)
		return terr(c, l, "tensor of %llu elements exceeds the size limit of %lld bytes",
			    (unsigned long long)n, (long long)c->max_bytes);
	*ty = ir_type(dt, (int)t->n_dims, t->dims);
	return 0;
}

/* --- external data ------------------------------------------------------- */

/* A relative path that never climbs above its start. */
static int
path_inside(const char *p)
{
	int depth = 0;

	if (!*p || *p == '/' || *p == '\\')
		return 0;
	while (*p) {
		size_t n = strcspn(p, "/\\");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			depth--;
		else if (n && !(n == 1 && p[0] == '.'))
			depth++;
		if (depth < 0)
			return 0;
		p += n;
		p += *p != 0;
	}
	return depth > 0;
}

/* Decimal digits only, within 64 bits: strtoull took " 5", "+5" and wrapped
 * nothing but saturated "18446744073709551616" silently. */
static int
parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return -1;
	for (*out = 0; *s; s++)
		if (*s < '0' || *s > '9' || *out > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		else
			*out = *out * 10 + (uint64_t)(*s - '0');
	return 0;
}

static int
external_spec(Ctx *c, const Onnx__TensorProto *t, Loc l, const char **loc,
	      uint64_t *off, uint64_t *len, int *haslen)
{
	*loc = NULL;
	*off = 0;
	*haslen = 0;
	for (size_t i = 0; i < t->n_external_data; i++) {
		const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
		if (!k || !v)
			continue;
		if (strcmp(k, "location") == 0)
			*loc = v;
		else if (strcmp(k, "offset") == 0 && parse_u64(v, off))
			return terr(c, l, "external data offset '%s' is not a number", v);
		else if (strcmp(k, "length") == 0) {
			if (parse_u64(v, len))
				return terr(c, l, "external data length '%s' is not a number", v);
			*haslen = 1;
		}
	}
	if (!*loc)
		return terr(c, l, "external data without a location");
	if (!path_inside(*loc))
		return terr(c, l, "external data location '%s' leaves the model's folder "
			    "(absolute paths and '..' are refused)", *loc);
	return 0;
}

/* Reads into *data, grown to want bytes once the file is known to hold them. */
static int
read_external(Ctx *c, const Onnx__TensorProto *t, Loc l, size_t want, void **pdata)
{
	void *data;
	const char *loc;
	uint64_t off, len = 0;
	int haslen, fd, rc = -1;
	uint64_t size;
	char *path;

	if (external_spec(c, t, l, &loc, &off, &len, &haslen))
		return -1;
	if (haslen && len != want)
		return terr(c, l, "external data length %llu, dims need %zu bytes",
			    (unsigned long long)len, want);
	path = file_join(c->dir, loc);
	fd = file_open(path, c->dir, 0, &size, c->d);	/* containment: on the opened file */
	if (fd == FILE_OUTSIDE) {
		terr(c, l, "external data location '%s' leaves the model's folder through a "
		     "symbolic link", loc);
	} else if (fd < 0) {
		terr(c, l, "cannot read external data file '%s'", path);
	} else if (off > size || want > size - off) {
		terr(c, l, "external data range [%llu, +%zu) exceeds '%s' (%llu bytes)",
		     (unsigned long long)off, want, loc, (unsigned long long)size);
	} else if (!(data = realloc(*pdata, want + 8))) {	/* a diagnostic, not an abort */
		terr(c, l, "cannot allocate %zu bytes for the external data", want);
	} else {
		*pdata = data;
		rc = file_pread(fd, data, want, off) ? terr(c, l, "short read from '%s'", path) : 0;
	}
	if (fd >= 0)
		close(fd);
	free(path);
	return rc;
}

/* --- typed fields -------------------------------------------------------- */

static int
count_err(Ctx *c, Loc l, size_t got, size_t want)
{
	return terr(c, l, "tensor holds %zu values, its dims need %zu", got, want);
}

static int
typed_data(Ctx *c, const Onnx__TensorProto *t, Loc l, DType dt, size_t n, void *p)
{
	size_t want = dtype_is_packed(dt) ? (n + 1) / 2 : n;

	if (!n)
		return 0;	/* an empty tensor: the fields may hold no array at all */
	switch (dt) {
	case DT_F32:
		if (t->n_float_data != want)
			return count_err(c, l, t->n_float_data, want);
		memcpy(p, t->float_data, 4 * n);
		return 0;
	case DT_F64:
		if (t->n_double_data != want)
			return count_err(c, l, t->n_double_data, want);
		memcpy(p, t->double_data, 8 * n);
		return 0;
	case DT_I64:
		if (t->n_int64_data != want)
			return count_err(c, l, t->n_int64_data, want);
		memcpy(p, t->int64_data, 8 * n);
		return 0;
	default:
		break;
	}
	if (t->n_int32_data != want)
		return count_err(c, l, t->n_int32_data, want);
	for (size_t i = 0; i < want; i++) {
		int32_t v = t->int32_data[i];
		switch (dt) {
		case DT_F16: case DT_BF16: ((uint16_t *)p)[i] = (uint16_t)v; break;
		case DT_F8E4M3: case DT_F8E5M2: case DT_F8E8M0: case DT_I4: case DT_U4: case DT_F4E2M1:
			((uint8_t *)p)[i] = (uint8_t)v; break;
		case DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
		default: dtype_store_int(dt, p, i, v); break;
		}
	}
	return 0;
}

/* How many values the typed field for dt holds. */
static size_t
typed_count(const Onnx__TensorProto *t, DType dt)
{
	switch (dt) {
	case DT_F32: return t->n_float_data;
	case DT_F64: return t->n_double_data;
	case DT_I64: return t->n_int64_data;
	default: return t->n_int32_data;
	}
}

int
ox_tensor_data(Ctx *c, const Onnx__TensorProto *t, Loc l, const Type *ty, void **data,
	       size_t *size)
{
	size_t n = (size_t)ir_type_numel(ty), bytes = dtype_bytes(ty->dt, n);
	size_t want = dtype_is_packed(ty->dt) ? (n + 1) / 2 : n;
	int ext = t->has_data_location &&
		  t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	void *p;
	int rc;

	/* sizes are checked before anything is allocated */
	if (!ext && t->has_raw_data && t->raw_data.len != bytes)
		return terr(c, l, "raw_data holds %zu bytes, its dims need %zu", t->raw_data.len,
			    bytes);
	if (!ext && !t->has_raw_data && typed_count(t, ty->dt) != want)
		return count_err(c, l, typed_count(t, ty->dt), want);
	/* every weight is held at once: a 16 GiB external file (sparse, so
	 * cheap to make) must be refused here, not by malloc failing */
	if (bytes > c->max_host || c->host_bytes > c->max_host - bytes)
		return terr(c, l, "tensor data of %zu bytes would bring the weights held in memory "
			    "to %llu bytes, above the %llu bytes moec may use (memory and ulimit)",
			    bytes, (unsigned long long)(c->host_bytes + bytes),
			    (unsigned long long)c->max_host);
	c->host_bytes += bytes;
	p = xcalloc(1, ext ? 8 : bytes + 8);
	if (ext)
		rc = read_external(c, t, l, bytes, &p);
	else if (t->has_raw_data) {
		if (bytes)
			memcpy(p, t->raw_data.data, bytes);
		rc = 0;
	} else
		rc = typed_data(c, t, l, ty->dt, n, p);
	if (rc) {
		free(p);
		return -1;
	}
	*data = p;
	*size = bytes;
	return 0;
}

/* --- binding ------------------------------------------------------------- */

Known *
ox_known_from_data(Ctx *c, const Type *ty, const void *data)
{
	int64_t n = ir_type_numel(ty);
	int isf = dtype_is_float(ty->dt);
	Dim dims[MAXRANK];
	Known *k;

	if (n < 0 || n > (isf ? OX_KNOWN_FMAX : OX_KNOWN_MAX))
		return NULL;
	for (int i = 0; i < ty->rank; i++)
		dims[i] = ty->dim[i];
	k = ox_known_new(c, ty->dt, ty->rank, dims);
	for (int64_t i = 0; i < n; i++) {
		if (isf)
			k->fv[i] = dtype_load(ty->dt, data, (size_t)i);
		else
			k->iv[i] = (SInt){dtype_load_int(ty->dt, data, (size_t)i), SI_NUM};
	}
	return k;
}

static void
free_data(void *p, size_t n)
{
	(void)n;
	free(p);
}

/*
 * A large graph initializer's raw_data is taken from protobuf-c's buffer
 * (malloc'd, freed with free) instead of copied: one copy of the weights
 * fewer at the peak.  Only graph initializers, which are read once.
 */
static int
steal_raw(Onnx__TensorProto *t, const Type *ty, void **data, size_t *size)
{
	size_t bytes = dtype_bytes(ty->dt, (size_t)ir_type_numel(ty));

	if (!t->has_raw_data || t->raw_data.len != bytes || bytes < (1u << 20) ||
	    (t->has_data_location &&
	     t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
		return -1;
	*data = t->raw_data.data;
	*size = bytes;
	t->raw_data.data = NULL;
	t->raw_data.len = 0;
	t->has_raw_data = 0;
	return 0;
}

int
ox_bind_tensor(Ctx *c, OVal *o, const Onnx__TensorProto *t, Loc l, const char *wname)
{
	Type ty;
	void *data;
	size_t size;
	Weight *w;

	if (ox_tensor_type(c, t, l, &ty) ||
	    (!(c->depth == 0 && c->initializers && steal_raw((Onnx__TensorProto *)t, &ty, &data,
							     &size) == 0) &&
	     ox_tensor_data(c, t, l, &ty, &data, &size))) {
		o->bad = 1;
		return -1;
	}
	o->type = ty;
	o->k = ox_known_from_data(c, &ty, data);
	if (ir_type_numel(&ty) <= OX_CONST_MAX && o->k) {
		free(data);
		return 0;
	}
	w = ir_add_weight(c->m, wname, ty);
	w->data = data;
	w->size = size;
	w->free_data = free_data;
	w->source = l.name;
	o->v = w->value;
	return 0;
}

/* A host tensor standing in for a graph input. */
int
ox_bind_host(Ctx *c, OVal *o, const Tensor *t)
{
	Type ty = ir_type(t->dt, t->rank, t->dim);
	size_t size = tensor_nbytes(t);
	Weight *w;

	o->type = ty;
	o->state = 1;
	o->k = ox_known_from_data(c, &ty, t->data);
	if (ir_type_numel(&ty) <= OX_CONST_MAX && o->k)
		return 0;
	w = ir_add_weight(c->m, o->name, ty);
	w->data = xmalloc(size + 1);
	memcpy(w->data, t->data, size);
	w->size = size;
	w->free_data = free_data;
	w->source = ir_intern(c->m, "bound input");
	o->v = w->value;
	return 0;
}
