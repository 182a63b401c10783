/*
 * safetensors.c — a reader for model.safetensors and for sharded checkpoints
 * (model.safetensors.index.json: weight_map from tensor name to shard file).
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
 * {...}}), then the data.  st_open reads and checks every header up front,
 * by the safetensors library's rules: the length against the file size and
 * ST_MAX_HEADER before allocating; the header starts with '{' and is strict
 * JSON (json.c: valid UTF-8, nothing after it but spaces, no name twice, no
 * NUL in a name); each tensor's byte range matches its dtype x shape; the
 * ranges tile the data exactly (no hole, no overlap, nothing after the last).
 * Tensor bytes are read on demand with pread.  Every diagnostic names the
 * file and, where there is one, the tensor.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "frontend.h"

/* The safetensors library refuses headers above 100 MB; so do we. */
#define ST_MAX_HEADER ((uint64_t)100000000)
#define ST_MAX_INDEX ((uint64_t)100000000)	/* real ones are a few MB */
#define ST_MAX_EXACT 9007199254740992.0	/* 2^53: doubles are exact below */

typedef struct {
	char *path;		/* malloc'd */
	int fd;
	uint64_t size;		/* of the file */
	uint64_t base;		/* 8 + header length: where data starts */
	StTensor *t;		/* sorted by name; names in the arena */
	int nt;
} Shard;

typedef struct {
	const char *name;
	int shard;
	const StTensor *t;
} MapEntry;

struct StFile {
	char *path;		/* what was opened (file or index), malloc'd */
	char *dir;		/* an index's folder, which its shards must stay in */
	Arena *arena;
	Shard *shard;
	int nshard;
	MapEntry *map;		/* index only: weight_map sorted by name */
	int nmap;
	const char **meta;	/* __metadata__ (or the index's metadata) key, value pairs */
	int nmeta;
};

static const struct {
	const char *name;
	DType dt;
} dtypes[] = {
	{"BF16", DT_BF16}, {"F16", DT_F16}, {"F32", DT_F32}, {"F64", DT_F64},
	{"F8_E4M3", DT_F8E4M3}, {"F8_E5M2", DT_F8E5M2}, {"I64", DT_I64},
	{"I32", DT_I32}, {"I16", DT_I16}, {"I8", DT_I8}, {"U8", DT_U8},
	{"BOOL", DT_BOOL}, {"F8_E8M0", DT_F8E8M0}, {"F4", DT_F4E2M1},
};

/* The dtype named s, or NDTYPE for one we do not read (U16, U32, ...). */
static DType
st_dtype(const char *s)
{
	for (size_t i = 0; i < NELEM(dtypes); i++)
		if (strcmp(dtypes[i].name, s) == 0)
			return dtypes[i].dt;
	return NDTYPE;
}

static Loc
tloc(const char *file, const char *tensor)
{
	Loc l = loc_file(file);

	l.name = tensor;
	return l;
}

static int
cmp_tensor(const void *a, const void *b)
{
	return strcmp(((const StTensor *)a)->name, ((const StTensor *)b)->name);
}

static int
cmp_map(const void *a, const void *b)
{
	return strcmp(((const MapEntry *)a)->name, ((const MapEntry *)b)->name);
}

/* A JSON number that is a non-negative integer exactly representable. */
static int
json_u64(const cJSON *j, uint64_t *v)
{
	double x;

	if (!cJSON_IsNumber(j))
		return -1;
	x = j->valuedouble;
	if (!(x >= 0 && x < ST_MAX_EXACT) || x != (double)(uint64_t)x)
		return -1;
	*v = (uint64_t)x;
	return 0;
}

/* Byte size of a tensor, or -1 on overflow or an unknown element size. */
static int
tensor_bytes(const StTensor *t, uint64_t *size)
{
	uint64_t n = 1;

	for (int i = 0; i < t->rank; i++) {
		if (t->dim[i] && n > UINT64_MAX / (uint64_t)t->dim[i])
			return -1;
		n *= (uint64_t)t->dim[i];
	}
	if (t->dt == NDTYPE)
		return -1;
	if (n > UINT64_MAX / 8)
		return -1;
	*size = dtype_bytes(t->dt, (size_t)n);
	return 0;
}

static int
parse_shape(Shard *s, StTensor *t, const cJSON *shape, Diag *d)
{
	const cJSON *e;
	uint64_t v;

	if (!cJSON_IsArray(shape))
		return diag_error(d, tloc(s->path, t->name), "'shape' must be an array");
	t->rank = 0;
	cJSON_ArrayForEach(e, shape) {
		if (t->rank == MAXRANK)
			return diag_error(d, tloc(s->path, t->name), "rank above %d", MAXRANK);
		if (json_u64(e, &v) || v > (uint64_t)INT64_MAX)
			return diag_error(d, tloc(s->path, t->name),
					  "shape entries must be non-negative integers");
		t->dim[t->rank++] = (int64_t)v;
	}
	return 0;
}

/* One header entry: dtype, shape and a byte range that fits dtype x shape. */
static int
parse_tensor(Shard *s, Arena *a, StTensor *t, const cJSON *j, Diag *d)
{
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
	const cJSON *off = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
	uint64_t b, e, want;

	t->name = arena_strdup(a, j->string);
	if (!cJSON_IsObject(j))
		return diag_error(d, tloc(s->path, t->name), "header entry must be an object");
	if (!cJSON_IsString(dt))
		return diag_error(d, tloc(s->path, t->name), "missing 'dtype'");
	t->dtname = arena_strdup(a, dt->valuestring);
	t->dt = st_dtype(dt->valuestring);
	if (parse_shape(s, t, cJSON_GetObjectItemCaseSensitive(j, "shape"), d))
		return -1;
	if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
	    json_u64(cJSON_GetArrayItem(off, 0), &b) || json_u64(cJSON_GetArrayItem(off, 1), &e))
		return diag_error(d, tloc(s->path, t->name),
				  "'data_offsets' must be two non-negative integers");
	if (b > e)
		return diag_error(d, tloc(s->path, t->name),
				  "data_offsets [%llu, %llu] are out of order",
				  (unsigned long long)b, (unsigned long long)e);
	if (e > s->size - s->base)
		return diag_error(d, tloc(s->path, t->name),
				  "data_offsets end %llu lies past the end of the data "
				  "(%llu bytes)",
				  (unsigned long long)e, (unsigned long long)(s->size - s->base));
	if (t->dt != NDTYPE && tensor_bytes(t, &want))
		return diag_error(d, tloc(s->path, t->name), "shape is too large");
	if (t->dt != NDTYPE && want != e - b)
		return diag_error(d, tloc(s->path, t->name),
				  "%s shape needs %llu bytes but data_offsets hold %llu",
				  t->dtname, (unsigned long long)want, (unsigned long long)(e - b));
	t->offset = b;
	t->size = e - b;
	return 0;
}

static int
parse_meta(StFile *f, const char *path, const cJSON *j, Diag *d)
{
	const cJSON *e;

	if (!cJSON_IsObject(j))
		return diag_error(d, tloc(path, "__metadata__"), "must be an object");
	cJSON_ArrayForEach(e, j) {
		if (!cJSON_IsString(e))	/* the library: a map of strings to strings */
			return diag_error(d, tloc(path, "__metadata__"), "value of '%s' is not "
					  "a string", e->string);
		f->meta = arena_realloc(f->arena, f->meta, sizeof *f->meta * (size_t)f->nmeta,
					sizeof *f->meta * (size_t)(f->nmeta + 2));
		f->meta[f->nmeta++] = arena_strdup(f->arena, e->string);
		f->meta[f->nmeta++] = arena_strdup(f->arena, e->valuestring);
	}
	return 0;
}

static int
cmp_offset(const void *a, const void *b)
{
	const StTensor *x = *(StTensor *const *)a, *y = *(StTensor *const *)b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->size < y->size ? -1 : x->size > y->size;
}

/*
 * Sorted by name, no name twice; sorted by offset, the ranges tile the data
 * section: each starts where the one before ended (no hole, no overlap), and
 * the last ends at the end of the file.
 */
static int
check_layout(Shard *s, Diag *d)
{
	uint64_t end = 0;
	StTensor **by = xmalloc(sizeof *by * (size_t)(s->nt ? s->nt : 1));
	int rc = 0;

	qsort(s->t, (size_t)s->nt, sizeof *s->t, cmp_tensor);
	for (int i = 1; i < s->nt && !rc; i++)
		if (strcmp(s->t[i - 1].name, s->t[i].name) == 0)
			rc = diag_error(d, tloc(s->path, s->t[i].name),
					"tensor named twice in the header");
	for (int i = 0; i < s->nt; i++)
		by[i] = &s->t[i];
	qsort(by, (size_t)s->nt, sizeof *by, cmp_offset);
	for (int i = 0; i < s->nt && !rc; i++) {
		const StTensor *t = by[i];
		if (t->offset < end)
			rc = diag_error(d, tloc(s->path, t->name),
					"data_offsets [%llu, %llu] overlap those of '%s'",
					(unsigned long long)t->offset,
					(unsigned long long)(t->offset + t->size), by[i - 1]->name);
		else if (t->offset > end)
			rc = diag_error(d, tloc(s->path, t->name),
					"data_offsets [%llu, %llu] leave a hole: bytes [%llu, %llu) "
					"of the data belong to no tensor",
					(unsigned long long)t->offset,
					(unsigned long long)(t->offset + t->size),
					(unsigned long long)end, (unsigned long long)t->offset);
		end = t->offset + t->size;
	}
	if (!rc && end != s->size - s->base)
		rc = diag_error(d, loc_file(s->path), "%llu bytes after the last tensor's data "
				"(the tensors must cover the data section exactly)",
				(unsigned long long)(s->size - s->base - end));
	free(by);
	return rc;
}

/*
 * Every number in a header is a shape entry or an offset, an integer: the
 * library (serde, usize) refuses "4.0" and "4e0", which cJSON would read as
 * 4.  So a number token with a fraction or an exponent is an error; the
 * scan skips strings, where '.' and 'e' are ordinary.
 */
static int
integers_only(const Shard *s, const char *text, size_t n, Diag *d)
{
	int in_str = 0, in_num = 0;

	for (size_t i = 0; i < n; i++) {
		char c = text[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
			continue;
		}
		if (c == '"')
			in_str = 1;
		if (in_num && (c == '.' || c == 'e' || c == 'E'))
			return diag_error(d, loc_file(s->path), "header byte %zu: a number with a fraction "
					  "or an exponent (shapes and offsets are integers)", i);
		in_num = (c >= '0' && c <= '9') || (!in_num && c == '-');
	}
	return 0;
}

static int
parse_header(StFile *f, Shard *s, int shardno, const char *text, size_t n, Diag *d)
{
	cJSON *root, *e;
	int rc = 0, k = 0;

	if (n == 0 || text[0] != '{')	/* the library's InvalidHeaderStart */
		return diag_error(d, loc_file(s->path), "header is not a JSON object: it does "
				  "not start with '{'");
	if (!(root = fe_json_parse(s->path, text, n, FE_JSON_NO_DUPS, d)))
		return diag_error(d, loc_file(s->path), "header is not a JSON object");
	s->t = xcalloc((size_t)cJSON_GetArraySize(root) + 1, sizeof *s->t);
	cJSON_ArrayForEach(e, root) {
		if (strcmp(e->string, "__metadata__") == 0) {
			rc = parse_meta(f, s->path, e, d);
		} else {
			s->t[k].shard = shardno;
			rc = parse_tensor(s, f->arena, &s->t[k++], e, d);
		}
		if (rc)
			break;
	}
	s->nt = k;
	cJSON_Delete(root);
	if (!rc && integers_only(s, text, n, d))
		return -1;
	return rc ? rc : check_layout(s, d);
}

/* Open one .safetensors file and check its header. */
static int
open_shard(StFile *f, Shard *s, int shardno, Diag *d)
{
	unsigned char len8[8];
	uint64_t n = 0;
	char *hdr;
	int rc;

	s->fd = file_open(s->path, f->dir, 0, &s->size, d);
	if (s->fd == FILE_OUTSIDE)
		return diag_error(d, tloc(f->path, "weight_map"), "shard '%s' lies outside the "
				  "index's folder (through a symbolic link)", s->path);
	if (s->fd < 0)
		return -1;
	if (s->size < 8 || file_pread(s->fd, len8, 8, 0))
		return diag_error(d, loc_file(s->path), "truncated: no 8-byte header length");
	for (int i = 7; i >= 0; i--)
		n = n << 8 | len8[i];
	if (n > ST_MAX_HEADER)
		return diag_error(d, loc_file(s->path),
				  "header length %llu is above the limit of %llu bytes",
				  (unsigned long long)n, (unsigned long long)ST_MAX_HEADER);
	if (n > s->size - 8)
		return diag_error(d, loc_file(s->path),
				  "header length %llu runs past the end of the file (%llu bytes)",
				  (unsigned long long)n, (unsigned long long)s->size);
	s->base = 8 + n;
	hdr = xmalloc((size_t)n + 1);
	errno = 0;
	if (file_pread(s->fd, hdr, (size_t)n, 8)) {
		free(hdr);
		return diag_error(d, loc_file(s->path), "cannot read the header: %s",
				  errno ? strerror(errno) : "file truncated");
	}
	hdr[n] = 0;
	rc = parse_header(f, s, shardno, hdr, (size_t)n, d);
	free(hdr);
	return rc;
}

static StFile *
new_file(const char *path)
{
	StFile *f = xcalloc(1, sizeof *f);

	f->path = xstrdup(path);
	f->arena = arena_new(0);
	return f;
}

static int
add_shard(StFile *f, const char *path)
{
	for (int i = 0; i < f->nshard; i++)
		if (strcmp(f->shard[i].path, path) == 0)
			return i;
	f->shard = xrealloc(f->shard, sizeof *f->shard * (size_t)(f->nshard + 1));
	memset(&f->shard[f->nshard], 0, sizeof *f->shard);
	f->shard[f->nshard].path = xstrdup(path);
	f->shard[f->nshard].fd = -1;
	return f->nshard++;
}

/*
 * A shard named in an index must stay inside the index's folder: no absolute
 * path, no ".." component here; symbolic links are checked on the opened
 * file (open_shard).
 */
static char *
shard_path(const char *index, const char *dir, const char *name, Diag *d)
{
	for (const char *c = name; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
		if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == 0))
			goto out;
	if (name[0] == '/' || name[0] == 0)
		goto out;
	return file_join(dir, name);
out:
	diag_error(d, tloc(index, "weight_map"), "shard '%s' lies outside the index's folder",
		   name);
	return NULL;
}

static int
parse_index(StFile *f, const char *text, size_t len, Diag *d)
{
	cJSON *root = fe_json_parse(f->path, text, len, FE_JSON_NO_DUPS, d), *map, *e;
	const char *dir = f->dir;
	int rc = 0;

	map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(map)) {
		rc = diag_error(d, tloc(f->path, "weight_map"),
				root ? "missing or not an object" : "not JSON");
		map = NULL;
	} else {
		f->map = xcalloc((size_t)cJSON_GetArraySize(map) + 1, sizeof *f->map);
	}
	cJSON_ArrayForEach(e, map) {
		char *p;
		if (!cJSON_IsString(e)) {
			rc = diag_error(d, tloc(f->path, e->string),
					"weight_map values must be file names");
			break;
		}
		if (!(p = shard_path(f->path, dir, e->valuestring, d))) {
			rc = -1;
			break;
		}
		f->map[f->nmap].name = arena_strdup(f->arena, e->string);
		f->map[f->nmap++].shard = add_shard(f, p);
		free(p);
	}
	cJSON_Delete(root);
	return rc;
}

/* Every weight_map entry must be in the shard it names. */
static int
resolve_map(StFile *f, Diag *d)
{
	qsort(f->map, (size_t)f->nmap, sizeof *f->map, cmp_map);
	for (int i = 0; i < f->nmap; i++) {
		Shard *s = &f->shard[f->map[i].shard];
		StTensor key = {.name = f->map[i].name};
		if (i && strcmp(f->map[i - 1].name, f->map[i].name) == 0)
			return diag_error(d, tloc(f->path, f->map[i].name),
					  "named twice in weight_map");
		f->map[i].t = bsearch(&key, s->t, (size_t)s->nt, sizeof *s->t, cmp_tensor);
		if (!f->map[i].t)
			return diag_error(d, tloc(s->path, f->map[i].name),
					  "weight_map puts the tensor here but the file does not "
					  "hold it");
	}
	return 0;
}

static int
open_index(StFile *f, Diag *d)
{
	size_t len;
	char *text;
	int rc;

	f->dir = file_dirname(f->path);
	if (!(text = file_read_max(f->path, ST_MAX_INDEX, &len, d)))
		return -1;
	rc = parse_index(f, text, len, d);
	free(text);
	for (int i = 0; i < f->nshard && !rc; i++)
		rc = open_shard(f, &f->shard[i], i, d);
	return rc ? rc : resolve_map(f, d);
}

static int
ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

StFile *
st_open(const char *path, Diag *d)
{
	StFile *f = new_file(path);
	int rc;

	if (ends_with(path, ".json")) {
		rc = open_index(f, d);
	} else {
		add_shard(f, path);
		rc = open_shard(f, &f->shard[0], 0, d);
	}
	if (rc) {
		st_close(f);
		return NULL;
	}
	return f;
}

void
st_close(StFile *f)
{
	if (!f)
		return;
	for (int i = 0; i < f->nshard; i++) {
		if (f->shard[i].fd >= 0)
			close(f->shard[i].fd);
		free(f->shard[i].path);
		free(f->shard[i].t);
	}
	free(f->shard);
	free(f->map);
	free(f->path);
	free(f->dir);
	arena_free(f->arena);
	free(f);
}

const StTensor *
st_find(const StFile *f, const char *name)
{
	if (f->map) {
		MapEntry key = {.name = name}, *e;
		e = bsearch(&key, f->map, (size_t)f->nmap, sizeof *f->map, cmp_map);
		return e ? e->t : NULL;
	}
	StTensor key = {.name = name};
	return bsearch(&key, f->shard[0].t, (size_t)f->shard[0].nt, sizeof key, cmp_tensor);
}

/* name with rule's `from` replaced by `to` (first occurrence), in the arena;
 * name itself when it has no `from`. */
static const char *
rename_one(StFile *f, const char *name, const char *from, const char *to)
{
	const char *at = strstr(name, from);
	size_t a, nf = strlen(from), nt = strlen(to), n = strlen(name);
	char *s;

	if (!at)
		return name;
	a = (size_t)(at - name);
	s = arena_alloc(f->arena, n - nf + nt + 1);
	memcpy(s, name, a);
	memcpy(s + a, to, nt);
	memcpy(s + a + nt, at + nf, n - a - nf + 1);
	return s;
}

int
st_rename(StFile *f, const char *root, const StRule *rule, Diag *d)
{
	int n = st_count(f);

	for (int i = 0; i < n; i++) {
		StTensor *t = (StTensor *)st_get(f, i);
		const char *name = t->name;

		if (strncmp(name, root, strlen(root)))
			continue;
		for (int r = 0; rule[r][0]; r++)
			name = rename_one(f, name, rule[r][0], rule[r][1]);
		if (name == t->name)
			continue;
		if (!t->stored)
			t->stored = t->name;
		t->name = name;
		if (f->map)
			f->map[i].name = name;
	}
	/* an index's shards are not searched by name after open: its map is */
	if (f->map)
		qsort(f->map, (size_t)f->nmap, sizeof *f->map, cmp_map);
	else
		qsort(f->shard[0].t, (size_t)f->shard[0].nt, sizeof *f->shard[0].t, cmp_tensor);
	for (int i = 1; i < n; i++) {
		const StTensor *a = st_get(f, i - 1), *b = st_get(f, i), *r = b->stored ? b : a;
		const StTensor *o = r == b ? a : b;
		if (strcmp(a->name, b->name) == 0)
			return diag_error(d, tloc(st_shard_path(f, r), r->stored), "renamed on load "
					  "to '%s', which '%s' is too", r->name,
					  o->stored ? o->stored : o->name);
	}
	return 0;
}

int
st_count(const StFile *f)
{
	return f->map ? f->nmap : f->shard[0].nt;
}

const StTensor *
st_get(const StFile *f, int i)
{
	if (i < 0 || i >= st_count(f))
		return NULL;
	return f->map ? f->map[i].t : &f->shard[0].t[i];
}

const char *
st_shard_path(const StFile *f, const StTensor *t)
{
	return f->shard[t->shard].path;
}

const char *
st_metadata(const StFile *f, const char *key)
{
	for (int i = 0; i + 1 < f->nmeta; i += 2)
		if (strcmp(f->meta[i], key) == 0)
			return f->meta[i + 1];
	return NULL;
}

int
st_read(StFile *f, const StTensor *t, void *buf, Diag *d)
{
	Shard *s = &f->shard[t->shard];

	if (t->dt == NDTYPE)
		return diag_error(d, tloc(s->path, t->name), "dtype %s is not one moec reads",
				  t->dtname);
	errno = 0;
	if (file_pread(s->fd, buf, (size_t)t->size, s->base + t->offset))
		return diag_error(d, tloc(s->path, t->name),
				  "cannot read %llu bytes at offset %llu: %s",
				  (unsigned long long)t->size,
				  (unsigned long long)(s->base + t->offset),
				  errno ? strerror(errno) : "file truncated");
	return 0;
}
