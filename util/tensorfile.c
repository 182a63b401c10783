/*
 * tensorfile.c — read and write host tensors as .npy (NumPy format 1.0-3.0)
 * and as ONNX TensorProto (.pb), the layout of ONNX's backend tests.
 *
 * The TensorProto codec is a small wire-format reader for the handful of
 * fields a tensor uses, so the runtime's tools need no protobuf library.
 * Every length is checked against the buffer before it is used.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const struct {
	const char *descr;
	DType dt;
} npytab[] = {
	{"<f4", DT_F32}, {"<f8", DT_F64}, {"<f2", DT_F16}, {"<i8", DT_I64},
	{"<i4", DT_I32}, {"<i2", DT_I16}, {"<u2", DT_U16}, {"|i1", DT_I8},  {"|u1", DT_U8},
	{"|b1", DT_BOOL},
};

static int
ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

/*
 * The .npy header: a Python dict literal, as numpy reads it with
 * ast.literal_eval and then checks it: exactly the keys 'descr' (a string),
 * 'fortran_order' (True or False) and 'shape' (a tuple of non-negative
 * integers: "()", "(3,)", "(2, 3)"), each once, in any order, with an
 * optional trailing comma; whitespace between tokens, nothing after the
 * '}'.  Stricter than Python only where numpy never writes anything else:
 * strings without escapes, decimal integers.  docs/limits.md.
 */
typedef struct {
	const char *s;
	char descr[16];
	int fortran;
	int rank;
	int64_t dim[MAXRANK];
} NpyHeader;

static void
npy_ws(NpyHeader *h)
{
	while (*h->s == ' ' || *h->s == '\t' || *h->s == '\n' || *h->s == '\r')
		h->s++;
}

/* A quoted string without escapes; NULL if malformed. */
static const char *
npy_str(NpyHeader *h, size_t *n)
{
	char q = *h->s;
	const char *start = h->s + 1, *e;

	if (q != '\'' && q != '"')
		return NULL;
	for (e = start; *e && *e != q && *e != '\\' && *e != '\n'; e++)
		;
	if (*e != q)
		return NULL;
	*n = (size_t)(e - start);
	h->s = e + 1;
	return start;
}

static int
npy_int(NpyHeader *h, int64_t *v)
{
	const char *p = h->s;

	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
		return -1;
	for (*v = 0; *p >= '0' && *p <= '9'; p++)
		if (*v > (INT64_MAX - 9) / 10)
			return -1;
		else
			*v = *v * 10 + (*p - '0');
	h->s = p;
	return 0;
}

/* "()", "(n,)", "(n, m)", "(n, m,)" */
static const char *
npy_shape(NpyHeader *h)
{
	if (*h->s++ != '(')
		return "'shape' is not a tuple";
	for (h->rank = 0;;) {
		npy_ws(h);
		if (*h->s == ')')
			break;
		if (h->rank == MAXRANK)
			return "more than 8 dims";
		if (npy_int(h, &h->dim[h->rank++]))
			return "'shape' holds something other than a non-negative integer";
		npy_ws(h);
		if (*h->s == ',')
			h->s++;
		else if (*h->s != ')' || h->rank == 1)
			return "'shape' is not a tuple";	/* "(3)" is an int */
	}
	h->s++;
	return NULL;
}

static const char *
npy_entry(NpyHeader *h, unsigned *seen)
{
	static const char *const keys[] = {"descr", "fortran_order", "shape"};
	size_t n;
	const char *k = npy_str(h, &n), *v;
	int i;

	if (!k)
		return "a key is not a string";
	for (i = 0; i < 3 && !(strlen(keys[i]) == n && !memcmp(keys[i], k, n)); i++)
		;
	if (i == 3)
		return "a key other than 'descr', 'fortran_order' and 'shape'";
	if (*seen & 1u << i)
		return "a key given twice";
	*seen |= 1u << i;
	npy_ws(h);
	if (*h->s++ != ':')
		return "no ':' after a key";
	npy_ws(h);
	if (i == 0) {
		if (!(v = npy_str(h, &n)) || n >= sizeof h->descr)
			return "'descr' is not a short string";
		memcpy(h->descr, v, n);
		h->descr[n] = 0;
		return NULL;
	}
	if (i == 2)
		return npy_shape(h);
	if (!strncmp(h->s, "True", 4) || !strncmp(h->s, "False", 5)) {
		h->fortran = *h->s == 'T';
		h->s += h->fortran ? 4 : 5;
		return NULL;
	}
	return "'fortran_order' is not True or False";
}

static const char *
npy_header(NpyHeader *h)
{
	unsigned seen = 0;
	const char *why;

	npy_ws(h);
	if (*h->s++ != '{')
		return "not a dict";
	for (;;) {
		npy_ws(h);
		if (*h->s == '}')
			break;
		if ((why = npy_entry(h, &seen)))
			return why;
		npy_ws(h);
		if (*h->s == ',')
			h->s++;
		else if (*h->s != '}')
			return "no ',' between entries";
	}
	h->s++;
	npy_ws(h);
	if (*h->s)
		return "text after the dict";
	return seen == 7 ? NULL : "a key is missing ('descr', 'fortran_order', 'shape')";
}

int
npy_read(const char *path, const void *buf, size_t len, Tensor *t, Diag *d)
{
	const unsigned char *b = buf;
	size_t hl, off, size;
	char *text;
	const char *why;
	NpyHeader h = {0};
	int found = 0;
	DType dt = DT_F32;

	if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
		return diag_error(d, loc_file(path), "not a .npy file");
	if (b[6] == 1) {
		hl = (size_t)b[8] | (size_t)b[9] << 8;
		off = 10;
	} else if (b[6] == 2 || b[6] == 3) {
		if (len < 12)
			return diag_error(d, loc_file(path), "truncated .npy header");
		hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
		     (size_t)b[11] << 24;
		off = 12;
	} else {
		return diag_error(d, loc_file(path), "unsupported .npy version %d", b[6]);
	}
	if (hl > len - off)
		return diag_error(d, loc_file(path), "truncated .npy header");
	if (memchr(b + off, 0, hl))
		return diag_error(d, loc_file(path), "malformed .npy header: a NUL byte");
	text = xmalloc(hl + 1);
	memcpy(text, b + off, hl);
	text[hl] = 0;
	off += hl;
	h.s = text;
	why = npy_header(&h);
	free(text);
	if (why)
		return diag_error(d, loc_file(path), "malformed .npy header: %s", why);
	for (size_t i = 0; i < NELEM(npytab); i++)
		if (strcmp(h.descr, npytab[i].descr) == 0) {
			dt = npytab[i].dt;
			found = 1;
		}
	if (!found)
		return diag_error(d, loc_file(path), "unsupported .npy dtype '%s'", h.descr);
	if (h.fortran)
		return diag_error(d, loc_file(path), "fortran-order .npy is not supported");
	memset(t, 0, sizeof *t);
	if (tensor_size(dt, h.rank, h.dim, &size) != 0)
		return diag_error(d, loc_file(path), "tensor too large");
	if (len - off < size)	/* checked before anything is allocated */
		return diag_error(d, loc_file(path), "truncated .npy data: %zu of %zu bytes",
				  len - off, size);
	if (tensor_alloc(t, dt, h.rank, h.dim) != 0)
		return diag_error(d, loc_file(path), "tensor too large");
	memcpy(t->data, b + off, size);
	return 0;
}

/* Types numpy cannot hold are written as exact f32 (bf16, f8) or i8 (i4). */
int
npy_write(FILE *f, const Tensor *t)
{
	char hdr[256], shape[160];
	const char *descr = NULL;
	DType out = t->dt;
	size_t k = 0, n, hl;

	for (size_t i = 0; i < NELEM(npytab); i++)
		if (npytab[i].dt == t->dt)
			descr = npytab[i].descr;
	if (!descr) {
		out = dtype_is_float(t->dt) ? DT_F32 : DT_I8;
		descr = out == DT_F32 ? "<f4" : "|i1";
	}
	shape[0] = 0;
	for (int i = 0; i < t->rank; i++)
		k += (size_t)snprintf(shape + k, sizeof shape - k, "%lld,%s",
				      (long long)t->dim[i],
				      i + 1 < t->rank ? " " : "");
	if (t->rank > 1)
		shape[k - 1] = 0;	/* numpy writes (2, 3) but (2,) */
	n = (size_t)snprintf(hdr, sizeof hdr,
			     "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
			     descr, shape);
	hl = (n + 11 + 63) / 64 * 64 - 10;
	memset(hdr + n, ' ', hl - n);
	hdr[hl - 1] = '\n';
	fwrite("\x93NUMPY\x01\x00", 1, 8, f);
	fputc((int)(hl & 0xff), f);
	fputc((int)(hl >> 8), f);
	fwrite(hdr, 1, hl, f);
	if (out == t->dt)
		return fwrite(t->data, 1, tensor_nbytes(t), f) == tensor_nbytes(t) ? 0 : -1;
	for (int64_t i = 0; i < tensor_numel(t); i++) {
		unsigned char buf[4];
		dtype_store(out, buf, 0, dtype_load(t->dt, t->data, (size_t)i));
		fwrite(buf, 1, out == DT_F32 ? 4 : 1, f);
	}
	return ferror(f) ? -1 : 0;
}

/* --- protobuf wire format ------------------------------------------------ */

typedef struct {
	const unsigned char *p, *end;
	int bad;
} Rd;

static uint64_t
varint(Rd *r)
{
	uint64_t v = 0;

	for (int s = 0; s < 64; s += 7) {
		if (r->p >= r->end) {
			r->bad = 1;
			return 0;
		}
		unsigned char c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return v;
	}
	r->bad = 1;
	return 0;
}

/* A length-delimited field: returns its bytes, or NULL if it overruns. */
static const unsigned char *
bytes(Rd *r, size_t *n)
{
	uint64_t len = varint(r);
	const unsigned char *s = r->p;

	if (r->bad || len > (uint64_t)(r->end - r->p)) {
		r->bad = 1;
		return NULL;
	}
	r->p += len;
	*n = (size_t)len;
	return s;
}

static void
skip(Rd *r, int wire)
{
	size_t n;

	switch (wire) {
	case 0: varint(r); break;
	case 1: if (r->end - r->p < 8) r->bad = 1; else r->p += 8; break;
	case 2: bytes(r, &n); break;
	case 5: if (r->end - r->p < 4) r->bad = 1; else r->p += 4; break;
	default: r->bad = 1; break;
	}
}

/* Values of a repeated numeric field, packed or not, collected as doubles
 * or int64s.  Fixed 32/64-bit fields are floats/doubles; varints are ints. */
typedef struct {
	VEC(int64_t) i;
	VEC(double) f;
} Nums;

static void
number(Rd *r, int wire, int isdouble, Nums *out)
{
	if (wire == 0) {
		int64_t v = (int64_t)varint(r);
		vec_push(&out->i, v);
	} else if (wire == 5 && r->end - r->p >= 4) {
		float f;
		memcpy(&f, r->p, 4);
		r->p += 4;
		vec_push(&out->f, (double)f);
	} else if (wire == 1 && r->end - r->p >= 8) {
		double g;
		uint64_t u;
		memcpy(&g, r->p, 8);
		memcpy(&u, r->p, 8);
		r->p += 8;
		if (isdouble)
			vec_push(&out->f, g);
		else
			vec_push(&out->i, (int64_t)u);
	} else {
		r->bad = 1;
	}
}

static void
repeated(Rd *r, int wire, int elemwire, int isdouble, Nums *out)
{
	if (wire == 2) {	/* packed */
		size_t n;
		const unsigned char *s = bytes(r, &n);
		Rd sub;

		if (!s)
			return;
		sub = (Rd){s, s + n, 0};
		while (sub.p < sub.end && !sub.bad)
			number(&sub, elemwire, isdouble, out);
		r->bad |= sub.bad;
	} else {
		number(r, wire, isdouble, out);
	}
}

int
pb_tensor_decode(const char *path, const void *buf, size_t len, Tensor *t,
		 Diag *d)
{
	Rd r = {buf, (const unsigned char *)buf + len, 0};
	Nums dims = {0}, vals = {0};
	const unsigned char *raw = NULL;
	size_t rawn = 0, namen = 0;
	const unsigned char *name = NULL;
	int64_t code = 1;
	int have_data = 0, rc = -1, external = 0;
	size_t size, n, got, want;
	DType dt;

	memset(t, 0, sizeof *t);
	while (r.p < r.end && !r.bad) {
		uint64_t key = varint(&r);
		int field = (int)(key >> 3), wire = (int)(key & 7);

		switch (field) {
		case 1: repeated(&r, wire, 0, 0, &dims); break;
		case 2: code = (int64_t)varint(&r); break;
		case 4: repeated(&r, wire, 5, 0, &vals); have_data = 1; break;
		case 5: case 7: case 11:
			repeated(&r, wire, 0, 0, &vals); have_data = 1; break;
		case 10: repeated(&r, wire, 1, 1, &vals); have_data = 1; break;
		case 8: name = bytes(&r, &namen); break;
		case 9: raw = bytes(&r, &rawn); have_data = 1; break;
		case 14: external = varint(&r) == 1; break;
		case 6: diag_error(d, loc_file(path), "string tensors are not supported");
			goto out;
		default: skip(&r, wire); break;
		}
	}
	if (r.bad) {
		diag_error(d, loc_file(path), "malformed TensorProto (truncated or bad field)");
		goto out;
	}
	if (external) {
		diag_error(d, loc_file(path), "tensor with external data is not supported here");
		goto out;
	}
	if (dtype_from_onnx((int)code, &dt) != 0) {
		diag_error(d, loc_file(path), "unsupported tensor data_type %lld", (long long)code);
		goto out;
	}
	if (dims.i.n > MAXRANK) {
		diag_error(d, loc_file(path), "tensor rank %zu exceeds %d", dims.i.n, MAXRANK);
		goto out;
	}
	if (tensor_size(dt, (int)dims.i.n, dims.i.v, &size) != 0) {
		diag_error(d, loc_file(path), "tensor dims are negative or too large");
		goto out;
	}
	/* the data must be there before anything is allocated */
	n = 1;
	for (size_t i = 0; i < dims.i.n; i++)
		n *= (size_t)dims.i.v[i];	/* cannot overflow: tensor_size passed */
	got = dt == DT_F32 || dt == DT_F64 ? vals.f.n : vals.i.n;
	want = dtype_is_packed(dt) ? (n + 1) / 2 : n;
	if (raw && rawn != size) {
		diag_error(d, loc_file(path), "raw_data holds %zu bytes, dims need %zu", rawn, size);
		goto out;
	}
	if (!raw && (have_data || n) && got != want) {
		diag_error(d, loc_file(path), "tensor holds %zu values, dims need %zu", got, want);
		goto out;
	}
	if (tensor_alloc(t, dt, (int)dims.i.n, dims.i.v) != 0) {
		diag_error(d, loc_file(path), "tensor dims are negative or too large");
		goto out;
	}
	if (name)
		t->name = strndup((const char *)name, namen);
	if (raw) {
		memcpy(t->data, raw, rawn);
	} else if (have_data || n) {
		for (size_t i = 0; i < got; i++) {
			if (dt == DT_F32 || dt == DT_F64)
				dtype_store(dt, t->data, i, vals.f.v[i]);
			else if (dt == DT_F16 || dt == DT_BF16)
				((uint16_t *)t->data)[i] = (uint16_t)vals.i.v[i];
			else if ((dtype_is_float(dt) && dtype_bits(dt) == 8) || dtype_is_packed(dt))
				((uint8_t *)t->data)[i] = (uint8_t)vals.i.v[i];	/* the bits, as ONNX */
			else
				dtype_store_int(dt, t->data, i, vals.i.v[i]);
		}
	}
	rc = 0;
out:
	vec_free(&dims.i);
	vec_free(&dims.f);
	vec_free(&vals.i);
	vec_free(&vals.f);
	return rc;
}

static void
put_varint(FILE *f, uint64_t v)
{
	while (v >= 0x80) {
		fputc((int)(v & 0x7f) | 0x80, f);
		v >>= 7;
	}
	fputc((int)v, f);
}

int
pb_tensor_write(FILE *f, const Tensor *t)
{
	size_t nb = tensor_nbytes(t);

	for (int i = 0; i < t->rank; i++) {
		put_varint(f, 1 << 3 | 0);
		put_varint(f, (uint64_t)t->dim[i]);
	}
	put_varint(f, 2 << 3 | 0);
	put_varint(f, (uint64_t)dtype_onnx(t->dt));
	if (t->name) {
		put_varint(f, 8 << 3 | 2);
		put_varint(f, strlen(t->name));
		fputs(t->name, f);
	}
	put_varint(f, 9 << 3 | 2);
	put_varint(f, nb);
	fwrite(t->data, 1, nb, f);
	return ferror(f) ? -1 : 0;
}

int
tensor_read(const char *path, Tensor *t, Diag *d)
{
	size_t len;
	char *buf = file_read_max(path, TENSOR_MAX_BYTES + TENSOR_MAX_HEADER, &len, d);
	int rc;

	if (!buf)
		return -1;
	if (ends_with(path, ".npy"))
		rc = npy_read(path, buf, len, t, d);
	else
		rc = pb_tensor_decode(path, buf, len, t, d);
	free(buf);
	return rc;
}

int
tensor_write(const char *path, const Tensor *t, Diag *d)
{
	FileOut o;
	FILE *f = file_create(&o, path, d);

	if (!f)
		return -1;
	/* a write error stays set on f: file_commit reports it with its reason */
	(void)(ends_with(path, ".npy") ? npy_write(f, t) : pb_tensor_write(f, t));
	return file_commit(&o, d);
}
