/*
 * manifest.c — parse the manifest text of docs/bundle.md §2 into a Manifest.
 *
 * One statement per line, words separated by single spaces.  Every
 * malformed line gets one diagnostic at line:col (the word or list item at
 * fault) and parsing goes on with the next line, so one run shows them all.
 * Names must be declared before use; args must match the kernel's params;
 * buffers must lie inside the arena at max_tokens.  Spellings are
 * canonical, so the printer gives back the text it was parsed from.
 *
 * What can be derived is checked, not trusted: a weight's bytes= against
 * dtype x dims, and the tokens= ranges of launch variants tiling 1..max_tokens.
 * Names are found through hash tables, so parsing is linear in the text.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

#define MAXWORDS 12
#define MAXNAME BUNDLE_MAXNAME
#define MAXNUMEL ((int64_t)1 << 48)	/* as an IR type (docs/limits.md) */

/* Name -> index, open addressing; one table per kind of name. */
typedef struct {
	const char **key;
	int *val;
	size_t n, cap;		/* cap: 0 or a power of two */
} Names;

static int
names_get(const Names *t, const char *key)
{
	if (!t->cap)
		return -1;
	for (size_t i = hash_str(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		if (!t->key[i])
			return -1;
		if (strcmp(t->key[i], key) == 0)
			return t->val[i];
	}
}

/* key must outlive the table (it lives in the manifest's arena). */
static void
names_put(Names *t, const char *key, int val)
{
	if (2 * (t->n + 1) > t->cap) {
		Names g = {xcalloc(t->cap ? 2 * t->cap : 64, sizeof *g.key),
			   xcalloc(t->cap ? 2 * t->cap : 64, sizeof *g.val), 0,
			   t->cap ? 2 * t->cap : 64};
		for (size_t i = 0; i < t->cap; i++)
			if (t->key[i])
				names_put(&g, t->key[i], t->val[i]);
		free(t->key);
		free(t->val);
		*t = g;
	}
	size_t i = hash_str(key) & (t->cap - 1);
	while (t->key[i])
		i = (i + 1) & (t->cap - 1);
	t->key[i] = key;
	t->val[i] = val;
	t->n++;
}

static void
names_free(Names *t)
{
	free(t->key);
	free(t->val);
}

typedef struct Word Word;
struct Word {
	const char *s;
	size_t n;
	int col;		/* 1-based */
};

typedef struct P P;
struct P {
	Arena *a;
	Diag *d;
	const char *file;
	Manifest *m;
	int line;
	Word w[MAXWORDS];
	int nw;
	int rank;		/* order rank of the last statement, -1: none */
	int last;		/* its keyword */
	unsigned seen, reported;	/* header keywords, by bit */
	int cin, cout, cw, cbuf, ck, cstep, croute, ctmap, ccand;	/* array capacities */
	int version;		/* set when "moeb N" has N != 1 */
	Names tensors, weights, buffers, kernels, tmaps;	/* tensors: in i, out nin + i */
	int64_t tnext;		/* tokens= variants: the next T to cover; 0: none open */
	int tline;		/* the line of the last variant */
	const char *tarch;	/* its arch= target; NULL: any */
};

/*
 * The statements: keyword, order rank, required (header lines only; every
 * header line appears at most once), and the usage named in errors.
 * ORDER STMT: the handler table below.
 */
#define STMTS(X)                                                               \
	X(moeb, 0, 1, "moeb VERSION")                                          \
	X(moec, 1, 1, "moec VERSION")                                          \
	X(source, 2, 0, "source HASH")                                         \
	X(model, 3, 0, "model NAME")                                           \
	X(synthetic, 4, 1, "synthetic SEED|none")                              \
	X(max_tokens, 5, 1, "max_tokens N")                                    \
	X(sym, 6, 1, "sym T")                                                  \
	X(arena, 7, 1, "arena BYTES")                                          \
	X(cost, 8, 0, "cost flops=E bytes=E")                                  \
	X(precision, 9, 0, "precision tf32|bf16|f16")                          \
	X(ep, 10, 0, "ep rank=R ranks=N experts=LIST")                         \
	X(input, 11, 0, "input NAME DTYPE DIMS")                               \
	X(output, 12, 0, "output NAME DTYPE DIMS")                             \
	X(weight, 13, 0, "weight NAME DTYPE DIMS bytes=N at=N|synth")          \
	X(buffer, 14, 0, "buffer NAME offset=N bytes=E")                       \
	X(kernel, 15, 0,                                                       \
	  "kernel NAME target=LIST params=LIST regs=N smem=N spills=N [cluster=N] [pdl=1]") \
	X(tensormap, 16, 0, "tensormap NAME of=REF dtype=DT dims=LIST "         \
	  "strides=LIST box=LIST swizzle=N")                                   \
	X(init, 17, 0, "init KERNEL grid=E,E,E block=N,N,N smem=N args=LIST")  \
	X(launch, 18, 0,                                                       \
	  "launch KERNEL grid=E,E,E block=N,N,N smem=N args=LIST [tokens=LO..HI] [arch=sm_XX]") \
	X(memset, 18, 0, "memset buf:NAME[+OFF] bytes=E [when=shared]")       \
	X(all_to_all, 18, 0, "all_to_all src=buf:NAME dst=buf:NAME chunk=E")   \
	X(route, 19, 0,                                                        \
	  "route logits=BUF dtype=DT ids=BUF experts=N k=N groups=N,N score=max|top2 " \
	  "[select=logit|sigmoid|softmax [bias=w:NAME]]")                      \
	X(candidate, 20, 0, "candidate KERNEL grid=E,E,E block=N,N,N smem=N "  \
	  "args=LIST of=STEP out=ARG dtype=DT key=KEY variant=VARIANT tokens=LO..HI")

enum {
#define X(kw, rank, req, use) KW_##kw,
	STMTS(X)
#undef X
	NKW
};

#define X(kw, rank, req, use) static int st_##kw(P *p);
STMTS(X)
#undef X

static const struct {
	const char *kw;
	int rank, required;
	const char *usage;
	int (*fn)(P *);
} stmt[NKW] = {
#define X(kw, rank, req, use) {#kw, rank, req, use, st_##kw},
	STMTS(X)
#undef X
};
#define HEADER_RANK 10	/* ranks up to this are header lines, once each */

static const char *const mtype_names[NMTYPE] = {"ptr", "i32", "i64", "u64",
						"f32", "tmap"};

const char *
bundle_mtype_name(MType t)
{
	return (unsigned)t < NMTYPE ? mtype_names[t] : "?";
}

size_t
bundle_mtype_size(MType t)
{
	return t == MT_TMAP ? 128 : t == MT_I32 || t == MT_F32 ? 4 : 8;
}

/* --- errors and words --------------------------------------------------- */

static int
err(P *p, int col, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_verror(p->d, loc_line(p->file, p->line, col), fmt, ap);
	va_end(ap);
	return -1;
}

/* Split a line into words, refusing anything but single spaces. */
static int
split(P *p, const char *s, size_t n)
{
	size_t i = 0, start;
	unsigned char c;

	for (p->nw = 0; i < n;) {
		if (s[i] == ' ')
			return err(p, (int)i + 1, i == 0	  ? "line starts with a space"
					 : i + 1 == n ? "trailing space"
						      : "two spaces: words are "
							"separated by single spaces");
		if (p->nw == MAXWORDS)
			return err(p, (int)i + 1, "too many words on one line");
		for (start = i; i < n && s[i] != ' '; i++) {
			c = (unsigned char)s[i];
			if (c == '\t')
				return err(p, (int)i + 1, "tab: words are "
					   "separated by single spaces");
			if (c == '\r')
				return err(p, (int)i + 1, "carriage return in line");
			if (c < 0x20 || c == 0x7f)
				return err(p, (int)i + 1, "control character 0x%02x", c);
		}
		p->w[p->nw++] = (Word){s + start, i - start, (int)start + 1};
		if (i < n && ++i == n)
			return err(p, (int)n, "trailing space");
	}
	return 0;
}

static int
eq(const Word *w, const char *s)
{
	return strlen(s) == w->n && memcmp(w->s, s, w->n) == 0;
}

/* Exactly n words, with a message naming the statement's usage. */
static int
arity(P *p, int kw, int n)
{
	const Word *last = &p->w[p->nw - 1];

	if (p->nw < n)
		return err(p, last->col + (int)last->n,
			   "missing operand: expected '%s'", stmt[kw].usage);
	if (p->nw > n)
		return err(p, p->w[n].col, "unexpected '%.*s': expected '%s'",
			   (int)p->w[n].n, p->w[n].s, stmt[kw].usage);
	return 0;
}

/* Word i is "key=VALUE": *v gets the value as a word. */
static int
kv(P *p, int i, const char *key, Word *v)
{
	const Word *w = &p->w[i];
	size_t k = strlen(key);

	if (w->n < k + 1 || memcmp(w->s, key, k) != 0 || w->s[k] != '=')
		return err(p, w->col, "expected '%s=', got '%.*s'", key,
			   (int)w->n, w->s);
	*v = (Word){w->s + k + 1, w->n - k - 1, w->col + (int)k + 1};
	return 0;
}

/* A word as a comma-separated list: "" is the empty list ("params="). */
static Word
list_of(Word w)
{
	if (w.n == 0)
		w.s = NULL;
	return w;
}

/* The next comma-separated item of list *rest; 0 when none is left. */
static int
item(Word *rest, Word *it)
{
	const char *c;

	int depth = 0;

	if (!rest->s)
		return 0;
	for (c = rest->s; c < rest->s + rest->n; c++) {
		depth += (*c == '(') - (*c == ')');
		if (*c == ',' && depth == 0)
			break;	/* commas inside cdiv(E,c) do not split */
	}
	if (c == rest->s + rest->n)
		c = NULL;
	*it = (Word){rest->s, c ? (size_t)(c - rest->s) : rest->n, rest->col};
	if (c) {
		rest->n -= it->n + 1;
		rest->col += (int)it->n + 1;
		rest->s = c + 1;
	} else {
		rest->s = NULL;
	}
	return 1;
}

static int
uint_at(P *p, const Word *w, uint64_t max, uint64_t *v)
{
	const char *why = bundle_parse_uint(w->s, w->n, max, v);

	if (why)
		return err(p, w->col, "%s: '%.*s'", why, (int)w->n, w->s);
	return 0;
}

static int
int_at(P *p, const Word *w, int64_t max, int64_t *v)
{
	uint64_t u;

	if (uint_at(p, w, (uint64_t)max, &u))
		return -1;
	*v = (int64_t)u;
	return 0;
}

static int
expr_at(P *p, const Word *w, MExpr *e)
{
	const char *why = bundle_expr_parse(w->s, w->n, e);

	if (why)
		return err(p, w->col, "bad size expression '%.*s': %s",
			   (int)w->n, w->s, why);
	return 0;
}

static int
plain_name(const char *s, size_t n)
{
	int ok = n > 0 && n <= MAXNAME;

	for (size_t i = 0; ok && i < n; i++) {
		char c = s[i];
		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		     c == '_' || c == '$' ||
		     (i > 0 && ((c >= '0' && c <= '9') || c == '.' || c == '-'));
	}
	return ok;
}

int
bundle_name_plain(const char *s, size_t n)
{
	return plain_name(s, n);
}

int
bundle_name_quoted(char *buf, size_t n, const char *name)
{
	static const char hex[] = "0123456789abcdef";
	size_t k = 0;

	if (plain_name(name, strlen(name))) {
		snprintf(buf, n, "%s", name);
		return 0;
	}
	buf[k++] = '"';
	for (const unsigned char *c = (const unsigned char *)name; *c && k + 6 < n; c++) {
		if (*c > ' ' && *c < 0x7f && *c != '"' && *c != '\\') {
			buf[k++] = (char)*c;
		} else {
			buf[k++] = '\\';
			buf[k++] = 'x';
			buf[k++] = hex[*c >> 4];
			buf[k++] = hex[*c & 15];
		}
	}
	buf[k++] = '"';
	buf[k] = 0;
	return 1;
}

static int
hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A quoted input/output name (manifest version 2): printable ASCII but
 * space, '"' and '\\', and \xHH (lower-case hex) for any other byte but
 * NUL.  The canonical spelling is bundle_name_quoted's, so a name has one. */
static int
quoted_at(P *p, const Word *w, const char **out)
{
	char buf[MAXNAME + 1], canon[4 * MAXNAME + 4];
	size_t k = 0, i = 1;

	if (p->m->version < BUNDLE_MANIFEST_QUOTED)
		return err(p, w->col, "quoted name %.*s needs manifest version %d", (int)w->n,
			   w->s, BUNDLE_MANIFEST_QUOTED);
	for (; i + 1 < w->n && k < MAXNAME; k++) {
		int hi, lo;
		if (w->s[i] != '\\') {
			buf[k] = w->s[i++];
			continue;
		}
		if (i + 4 > w->n - 1 || w->s[i + 1] != 'x' || (hi = hexval(w->s[i + 2])) < 0 ||
		    (lo = hexval(w->s[i + 3])) < 0 || (hi | lo) == 0)
			break;
		buf[k] = (char)(hi << 4 | lo);
		i += 4;
	}
	buf[k] = 0;
	if (w->n < 2 || w->s[w->n - 1] != '"' || i + 1 != w->n || k == 0 ||
	    !bundle_name_quoted(canon, sizeof canon, buf) || strlen(canon) != w->n ||
	    memcmp(canon, w->s, w->n) != 0)
		return err(p, w->col, "bad quoted name %.*s (\"...\" with \\xHH escapes, "
			   "1 to %d bytes, as docs/bundle.md spells it)", (int)w->n, w->s, MAXNAME);
	*out = arena_strndup(p->a, buf, k);
	return 0;
}

static int
name_at(P *p, const Word *w, const char **out)
{
	int ok = plain_name(w->s, w->n);

	if (!ok)
		return err(p, w->col, "bad name '%.*s' (letters, digits, _ . $ -; "
			   "not starting with a digit)", (int)w->n, w->s);
	*out = arena_strndup(p->a, w->s, w->n);
	return 0;
}

/* Printable ASCII or UTF-8 bytes (control characters are already out). */
static int
text_at(P *p, const Word *w, size_t max, const char **out)
{
	if (w->n > max)
		return err(p, w->col, "'%.*s' is longer than %zu bytes", (int)w->n,
			   w->s, max);
	*out = arena_strndup(p->a, w->s, w->n);
	return 0;
}

#define GROW(p, arr, n, cap)                                                   \
	((n) == (cap) ? ((arr) = arena_realloc((p)->a, (arr),                  \
				 sizeof(*(arr)) * (size_t)(cap),               \
				 sizeof(*(arr)) * (size_t)((cap) ? 2 * (cap) : 8)), \
			 (cap) = (cap) ? 2 * (cap) : 8)                        \
		      : 0)

/* --- header statements -------------------------------------------------- */

static int
st_moeb(P *p)
{
	uint64_t v;

	if (arity(p, KW_moeb, 2) || uint_at(p, &p->w[1], INT32_MAX, &v))
		return -1;
	p->m->version = (int)v;
	if (v != BUNDLE_VERSION && v != BUNDLE_MANIFEST_QUOTED) {
		p->version = 1;
		return err(p, p->w[1].col, "manifest format version %d, this "
			   "reader supports %d and %d", (int)v, BUNDLE_VERSION,
			   BUNDLE_MANIFEST_QUOTED);
	}
	return 0;
}

static int
st_moec(P *p)
{
	if (arity(p, KW_moec, 2))
		return -1;
	return text_at(p, &p->w[1], 15, &p->m->moec);
}

static int
st_source(P *p)
{
	if (arity(p, KW_source, 2))
		return -1;
	return text_at(p, &p->w[1], 255, &p->m->source);
}

static int
st_model(P *p)
{
	if (arity(p, KW_model, 2))
		return -1;
	return text_at(p, &p->w[1], 255, &p->m->model);
}

static int
st_synthetic(P *p)
{
	if (arity(p, KW_synthetic, 2))
		return -1;
	if (eq(&p->w[1], "none"))
		return 0;
	p->m->synthetic = 1;
	return uint_at(p, &p->w[1], UINT64_MAX, &p->m->seed);
}

static int
st_max_tokens(P *p)
{
	if (arity(p, KW_max_tokens, 2) ||
	    int_at(p, &p->w[1], INT32_MAX, &p->m->max_tokens))
		return -1;
	if (p->m->max_tokens == 0)
		return err(p, p->w[1].col, "max_tokens must be at least 1");
	return 0;
}

static int
st_sym(P *p)
{
	if (arity(p, KW_sym, 2))
		return -1;
	if (!eq(&p->w[1], "T"))
		return err(p, p->w[1].col, "unknown symbol '%.*s': the only "
			   "symbol is T", (int)p->w[1].n, p->w[1].s);
	return 0;
}

static int
st_arena(P *p)
{
	return arity(p, KW_arena, 2) ||
			       uint_at(p, &p->w[1], INT64_MAX, &p->m->arena)
		       ? -1
		       : 0;
}

/* How f32 GEMM operands were computed (absent: exactly, in f32). */
static int
st_precision(P *p)
{
	if (arity(p, KW_precision, 2))
		return -1;
	if (precision_parse(p->w[1].s, p->w[1].n, &p->m->precision) || p->m->precision == DT_F32)
		return err(p, p->w[1].col, "precision '%.*s': tf32, bf16 or f16", (int)p->w[1].n,
			   p->w[1].s);
	return 0;
}

static int
st_cost(P *p)
{
	Word v;

	if (arity(p, KW_cost, 3) || kv(p, 1, "flops", &v) ||
	    expr_at(p, &v, &p->m->flops) || kv(p, 2, "bytes", &v) ||
	    expr_at(p, &v, &p->m->bytes))
		return -1;
	p->m->has_cost = 1;
	return 0;
}

/* --- inputs, outputs, weights, buffers ---------------------------------- */

int
bundle_find_weight(const Manifest *m, const char *name)
{
	for (int i = 0; i < m->nw; i++)
		if (strcmp(m->w[i].name, name) == 0)
			return i;
	return -1;
}

int
bundle_find_buffer(const Manifest *m, const char *name)
{
	for (int i = 0; i < m->nbuf; i++)
		if (strcmp(m->buf[i].name, name) == 0)
			return i;
	return -1;
}

int
bundle_find_kernel(const Manifest *m, const char *name)
{
	for (int i = 0; i < m->nk; i++)
		if (strcmp(m->k[i].name, name) == 0)
			return i;
	return -1;
}

static int
dtype_at(P *p, const Word *w, DType *dt)
{
	if (dtype_parse(w->s, w->n, dt) != 0)
		return err(p, w->col, "unknown dtype '%.*s'", (int)w->n, w->s);
	return 0;
}

/* Dims of an input/output: n > 0, T or a*T. */
static int
tensor_dims(P *p, Word list, MTensor *t)
{
	Word it;
	MExpr e;

	for (t->rank = 0; item(&list, &it); t->rank++) {
		if (t->rank == MAXRANK)
			return err(p, it.col, "more than %d dims", MAXRANK);
		if (expr_at(p, &it, &e))
			return -1;
		if (e.div || (e.a && e.b))
			return err(p, it.col, "dim '%.*s' must be n, T or a*T",
				   (int)it.n, it.s);
		if (!e.a && !e.b)
			return err(p, it.col, "dim 0: dims are positive");
		t->dim[t->rank] = e;
	}
	return 0;
}

/* The tensor's byte size must be representable at max_tokens. */
static int
tensor_fits(P *p, const MTensor *t)
{
	int64_t v, n = 1;

	for (int i = 0; i < t->rank; i++)
		if (bundle_expr_eval(&t->dim[i], p->m->max_tokens, &v) ||
		    __builtin_mul_overflow(n, v, &n) || n > (INT64_MAX >> 4))
			return err(p, p->w[3].col, "tensor '%s' overflows 64 bits "
				   "at max_tokens %lld", t->name,
				   (long long)p->m->max_tokens);
	return 0;
}

static int
tensor(P *p, int kw, MTensor *t)
{
	if (arity(p, kw, 4) ||
	    (p->w[1].n && p->w[1].s[0] == '"' ? quoted_at(p, &p->w[1], &t->name)
					       : name_at(p, &p->w[1], &t->name)))
		return -1;
	if (names_get(&p->tensors, t->name) >= 0)
		return err(p, p->w[1].col, "duplicate input/output name '%s'",
			   t->name);
	if (dtype_at(p, &p->w[2], &t->dt) || tensor_dims(p, list_of(p->w[3]), t))
		return -1;
	return tensor_fits(p, t);
}

static int
st_input(P *p)
{
	MTensor t = {0};
	Manifest *m = p->m;

	if (tensor(p, KW_input, &t))
		return -1;
	names_put(&p->tensors, t.name, m->nin);
	GROW(p, m->in, m->nin, p->cin);
	m->in[m->nin++] = t;
	return 0;
}

static int
st_output(P *p)
{
	MTensor t = {0};
	Manifest *m = p->m;

	if (tensor(p, KW_output, &t))
		return -1;
	names_put(&p->tensors, t.name, m->nin + m->nout);
	GROW(p, m->out, m->nout, p->cout);
	m->out[m->nout++] = t;
	return 0;
}

static int
weight_dims(P *p, Word list, MWeight *w)
{
	Word it;

	for (w->rank = 0; item(&list, &it); w->rank++) {
		if (w->rank == MAXRANK)
			return err(p, it.col, "more than %d dims", MAXRANK);
		if (memchr(it.s, 'T', it.n))
			return err(p, it.col, "weight dims cannot depend on T");
		if (int_at(p, &it, INT64_MAX, &w->dim[w->rank]))
			return -1;
		if (w->dim[w->rank] == 0)
			return err(p, it.col, "dim 0: dims are positive");
	}
	return 0;
}

/* bytes= is what dtype x dims take: derived, so checked. */
static int
weight_size(P *p, const MWeight *w, const Word *bytes)
{
	int64_t n = 1;
	uint64_t want;

	for (int i = 0; i < w->rank; i++)
		if (__builtin_mul_overflow(n, w->dim[i], &n) || n > MAXNUMEL)
			return err(p, p->w[3].col, "weight '%s' has more than 2^48 "
				   "elements", w->name);
	want = dtype_bytes(w->dt, (size_t)n);
	if (w->bytes != want)
		return err(p, bytes->col, "weight '%s' is bytes=%llu, but %s[%lld "
			   "elements] takes %llu", w->name,
			   (unsigned long long)w->bytes, dtype_name(w->dt),
			   (long long)n, (unsigned long long)want);
	return 0;
}

static int
st_weight(P *p)
{
	MWeight w = {0};
	Manifest *m = p->m;
	Word v;

	if (arity(p, KW_weight, 6) || name_at(p, &p->w[1], &w.name))
		return -1;
	if (names_get(&p->weights, w.name) >= 0)
		return err(p, p->w[1].col, "duplicate weight '%s'", w.name);
	if (dtype_at(p, &p->w[2], &w.dt) || weight_dims(p, list_of(p->w[3]), &w) ||
	    kv(p, 4, "bytes", &v) || uint_at(p, &v, INT64_MAX, &w.bytes) ||
	    weight_size(p, &w, &v))
		return -1;
	if (eq(&p->w[5], "synth")) {
		w.synth = 1;
		w.at = MW_NEXT;
	} else if (p->w[5].n > 6 && !memcmp(p->w[5].s, "synth=", 6)) {
		if (kv(p, 5, "synth", &v) || uint_at(p, &v, INT64_MAX, &w.at))
			return -1;
		w.synth = 1;
		if (w.at % BUNDLE_ALIGN)
			return err(p, v.col, "weight '%s' synth=%llu is not a "
				   "multiple of %d", w.name,
				   (unsigned long long)w.at, BUNDLE_ALIGN);
	} else {
		if (kv(p, 5, "at", &v) || uint_at(p, &v, INT64_MAX, &w.at))
			return -1;
		if (w.at % BUNDLE_ALIGN)
			return err(p, v.col, "weight '%s' at=%llu is not a "
				   "multiple of %d", w.name,
				   (unsigned long long)w.at, BUNDLE_ALIGN);
	}
	names_put(&p->weights, w.name, m->nw);
	GROW(p, m->w, m->nw, p->cw);
	m->w[m->nw++] = w;
	return 0;
}

static int
st_buffer(P *p)
{
	MBuffer b = {0};
	Manifest *m = p->m;
	Word v;
	int64_t n;
	uint64_t end;

	if (arity(p, KW_buffer, 4) || name_at(p, &p->w[1], &b.name))
		return -1;
	if (names_get(&p->buffers, b.name) >= 0)
		return err(p, p->w[1].col, "duplicate buffer '%s'", b.name);
	if (kv(p, 2, "offset", &v) || uint_at(p, &v, INT64_MAX, &b.offset) ||
	    kv(p, 3, "bytes", &v) || expr_at(p, &v, &b.bytes))
		return -1;
	if (bundle_expr_eval(&b.bytes, m->max_tokens, &n) ||
	    __builtin_add_overflow(b.offset, (uint64_t)n, &end) ||
	    end > m->arena)
		return err(p, p->w[2].col, "buffer '%s' lies outside the arena "
			   "(%llu bytes) at max_tokens %lld", b.name,
			   (unsigned long long)m->arena, (long long)m->max_tokens);
	names_put(&p->buffers, b.name, m->nbuf);
	GROW(p, m->buf, m->nbuf, p->cbuf);
	m->buf[m->nbuf++] = b;
	return 0;
}

/* --- kernels ------------------------------------------------------------ */

static int
targets(P *p, Word list, MKernel *k)
{
	Word it;
	char buf[16];
	int sm, a, cap = 0;

	for (k->ntarget = 0; item(&list, &it); k->ntarget++) {
		if (it.n >= sizeof buf)
			it.n = sizeof buf - 1;	/* too long to be valid anyway */
		memcpy(buf, it.s, it.n);
		buf[it.n] = 0;
		if (!bundle_parse_sm(buf, &sm, &a))
			return err(p, it.col, "bad target '%s' (expected sm_XX "
				   "or sm_XXa)", buf);
		for (int j = 0; j < k->ntarget; j++)
			if (strcmp(k->target[j], buf) == 0)
				return err(p, it.col, "duplicate target '%s'", buf);
		GROW(p, k->target, k->ntarget, cap);
		k->target[k->ntarget] = arena_strdup(p->a, buf);
	}
	if (k->ntarget == 0)
		return err(p, list.col, "kernel '%s' has no target", k->name);
	return 0;
}

static int
params(P *p, Word list, MKernel *k)
{
	Word it;
	int cap = 0, t;

	for (k->nparam = 0; item(&list, &it); k->nparam++) {
		if (k->nparam == BUNDLE_MAXARGS)
			return err(p, it.col, "more than %d params", BUNDLE_MAXARGS);
		for (t = 0; t < NMTYPE && !eq(&it, mtype_names[t]); t++)
			;
		if (t == NMTYPE)
			return err(p, it.col, "unknown param type '%.*s' (ptr, "
				   "i32, i64, u64, f32 or tmap)", (int)it.n, it.s);
		GROW(p, k->param, k->nparam, cap);
		k->param[k->nparam] = (MType)t;
	}
	return 0;
}

static int has_key(P *p, int i, const char *key);

static int
st_kernel(P *p)
{
	MKernel k = {0};
	Manifest *m = p->m;
	int64_t v[5] = {0};
	int cl = has_key(p, 7, "cluster");
	int pd = has_key(p, 7 + cl, "pdl");
	Word w;

	if (arity(p, KW_kernel, 7 + cl + pd) || name_at(p, &p->w[1], &k.name))
		return -1;
	if (names_get(&p->kernels, k.name) >= 0)
		return err(p, p->w[1].col, "duplicate kernel '%s'", k.name);
	if (kv(p, 2, "target", &w) || targets(p, list_of(w), &k) ||
	    kv(p, 3, "params", &w) || params(p, list_of(w), &k) ||
	    kv(p, 4, "regs", &w) || int_at(p, &w, INT32_MAX, &v[0]) ||
	    kv(p, 5, "smem", &w) || int_at(p, &w, INT32_MAX, &v[1]) ||
	    kv(p, 6, "spills", &w) || int_at(p, &w, INT32_MAX, &v[2]) ||
	    (cl && (kv(p, 7, "cluster", &w) || int_at(p, &w, 8, &v[3]))) ||
	    (pd && (kv(p, 7 + cl, "pdl", &w) || int_at(p, &w, 1, &v[4]))))
		return -1;
	if (pd && v[4] != 1)	/* written only when set */
		return err(p, p->w[7 + cl].col + 4, "pdl=%lld: only pdl=1 is written", (long long)v[4]);
	if (cl && v[3] < 2)	/* a thread-block cluster of 2..8 CTAs (portable sizes) */
		return err(p, p->w[7].col + 8, "cluster=%lld: a cluster has 2..8 CTAs", (long long)v[3]);
	k.regs = (int)v[0], k.smem = (int)v[1], k.spills = (int)v[2], k.cluster = (int)v[3], k.pdl = (int)v[4];
	names_put(&p->kernels, k.name, m->nk);
	GROW(p, m->k, m->nk, p->ck);
	m->k[m->nk++] = k;
	return 0;
}

/* --- init, launch and memset steps -------------------------------------- */

static int
grid3(P *p, Word list, MStep *s)
{
	static const int64_t lim[3] = {INT32_MAX, 65535, 65535};
	static const char xyz[] = "xyz";
	int64_t lo, hi;
	Word it;
	int i, col = list.col;

	for (i = 0; item(&list, &it); i++) {
		if (i == 3)
			return err(p, it.col, "grid has more than 3 dims");
		if (expr_at(p, &it, &s->grid[i]))
			return -1;
		if (s->kind == STEP_INIT && bundle_expr_has_t(&s->grid[i]))
			return err(p, it.col, "init steps run once, without T: "
				   "grid '%.*s'", (int)it.n, it.s);
		if (bundle_expr_eval(&s->grid[i], 1, &lo) ||
		    bundle_expr_eval(&s->grid[i], p->m->max_tokens, &hi) ||
		    hi > lim[i])
			return err(p, it.col, "grid.%c '%.*s' exceeds %lld at "
				   "max_tokens", xyz[i], (int)it.n, it.s,
				   (long long)lim[i]);
		if (lo < 1)
			return err(p, it.col, "grid.%c '%.*s' is 0 at T=1",
				   xyz[i], (int)it.n, it.s);
	}
	if (i != 3)
		return err(p, col, "grid needs 3 dims (x,y,z)");
	return 0;
}

static int
block3(P *p, Word list, MStep *s)
{
	static const int64_t lim[3] = {1024, 1024, 64};
	int64_t v;
	Word it;
	int i, col = list.col;

	for (i = 0; item(&list, &it); i++) {
		if (i == 3)
			return err(p, it.col, "block has more than 3 dims");
		if (int_at(p, &it, INT32_MAX, &v))
			return -1;
		if (v < 1 || v > lim[i])
			return err(p, it.col, "block dim %lld outside 1..%lld",
				   (long long)v, (long long)lim[i]);
		s->block[i] = (int)v;
	}
	if (i != 3)
		return err(p, col, "block needs 3 dims (x,y,z)");
	if ((int64_t)s->block[0] * s->block[1] * s->block[2] > 1024)
		return err(p, col, "block has more than 1024 threads");
	return 0;
}

/* "-V" or "V", canonical, within [-max-1, max]. */
static int
signed_at(P *p, const Word *w, int64_t max, int64_t *v)
{
	Word u = *w;
	uint64_t x;
	int neg = u.n > 0 && u.s[0] == '-';

	if (neg)
		u.s++, u.n--, u.col++;
	if (uint_at(p, &u, (uint64_t)max + neg, &x))
		return -1;
	if (neg && x == 0)
		return err(p, w->col, "'-0' is not canonical: write 0");
	*v = neg ? (int64_t)(0 - x) : (int64_t)x;
	return 0;
}

static int
f32_at(P *p, const Word *w, float *f)
{
	char buf[64], canon[64];
	char *end;

	if (w->n == 0 || w->n >= sizeof buf)
		return err(p, w->col, "bad f32 literal '%.*s'", (int)w->n, w->s);
	memcpy(buf, w->s, w->n);
	buf[w->n] = 0;
	*f = strtof(buf, &end);
	if (*end || end == buf)
		return err(p, w->col, "bad f32 literal '%s'", buf);
	snprintf(canon, sizeof canon, "%.9g", *f);
	if (strcmp(canon, buf) != 0)
		return err(p, w->col, "f32 literal '%s' is not canonical "
			   "(%%.9g): write '%s'", buf, canon);
	return 0;
}

static int
prefix(Word *w, const char *pre)
{
	size_t k = strlen(pre);

	if (w->n < k || memcmp(w->s, pre, k) != 0)
		return 0;
	w->s += k, w->n -= k, w->col += (int)k;
	return 1;
}

/* buf:NAME or buf:NAME+OFF, with OFF inside the buffer at max_tokens. */
static int
buf_arg(P *p, Word w, MArg *a)
{
	const char *plus = memchr(w.s, '+', w.n);
	Word name = {w.s, plus ? (size_t)(plus - w.s) : w.n, w.col};
	int64_t size;

	a->kind = ARG_BUF;
	if (name_at(p, &name, &a->name))
		return -1;
	if ((a->index = names_get(&p->buffers, a->name)) < 0)
		return err(p, w.col, "undeclared buffer '%s'", a->name);
	if (!plus)
		return 0;
	w = (Word){plus + 1, w.n - name.n - 1, w.col + (int)name.n + 1};
	if (uint_at(p, &w, INT64_MAX, &a->off))
		return -1;
	if (a->off == 0)
		return err(p, w.col, "'+0' is not canonical: leave it out");
	bundle_expr_eval(&p->m->buf[a->index].bytes, p->m->max_tokens, &size);
	if (a->off >= (uint64_t)size)
		return err(p, w.col, "offset %llu is past the end of buffer "
			   "'%s' (%lld bytes at max_tokens)",
			   (unsigned long long)a->off, a->name, (long long)size);
	return 0;
}

static int
io_arg(P *p, Word w, MArg *a, int init, int n, const char *what)
{
	const char *plural = strcmp(what, "in") == 0 ? "inputs" : "outputs";

	uint64_t i;

	if (init)
		return err(p, w.col - (int)strlen(what) - 1, "init steps run "
			   "once at load: they cannot use %s:", what);
	if (uint_at(p, &w, INT32_MAX, &i))
		return -1;
	if ((int64_t)i >= n)
		return err(p, w.col, "%s:%llu out of range (%d %s)", what,
			   (unsigned long long)i, n, plural);
	a->index = (int)i;
	return 0;
}

/* One argument; *t gets its type. */
static int
arg(P *p, Word w, MArg *a, MType *t, int init)
{
	Word v = w;

	*t = MT_PTR;
	if (eq(&w, "T")) {
		a->kind = ARG_T, *t = MT_I32;
		return init ? err(p, w.col, "init steps run once at load, "
				  "without T") : 0;
	}
	if (prefix(&v, "in:"))
		return a->kind = ARG_IN, io_arg(p, v, a, init, p->m->nin, "in");
	if (prefix(&v, "out:"))
		return a->kind = ARG_OUT,
		       io_arg(p, v, a, init, p->m->nout, "out");
	if (prefix(&v, "w:")) {
		a->kind = ARG_W;
		if (name_at(p, &v, &a->name))
			return -1;
		if ((a->index = names_get(&p->weights, a->name)) < 0)
			return err(p, v.col, "undeclared weight '%s'", a->name);
		return 0;
	}
	if (prefix(&v, "buf:"))
		return buf_arg(p, v, a);
	if (prefix(&v, "i32:")) {
		a->kind = ARG_I32, *t = MT_I32;
		return signed_at(p, &v, INT32_MAX, &a->v.i);
	}
	if (prefix(&v, "i64:")) {
		a->kind = ARG_I64, *t = MT_I64;
		return signed_at(p, &v, INT64_MAX, &a->v.i);
	}
	if (prefix(&v, "u64:"))
		return a->kind = ARG_U64, *t = MT_U64,
		       uint_at(p, &v, UINT64_MAX, &a->v.u);
	if (prefix(&v, "f32:"))
		return a->kind = ARG_F32, *t = MT_F32, f32_at(p, &v, &a->v.f);
	if (prefix(&v, "tmap:")) {
		a->kind = ARG_TMAP, *t = MT_TMAP;
		if (name_at(p, &v, &a->name))
			return -1;
		if ((a->index = names_get(&p->tmaps, a->name)) < 0)
			return err(p, v.col, "undeclared tensormap '%s'", a->name);
		if (init && bundle_expr_has_t(&p->m->tmap[a->index].dim[0]))
			return err(p, v.col, "init steps run once, without T: tensormap '%s'", a->name);
		return 0;
	}
	return err(p, w.col, "unknown argument '%.*s' (in:N, out:N, w:NAME, "
		   "buf:NAME[+OFF], T, i32:V, i64:V, u64:V, f32:V or tmap:NAME)",
		   (int)w.n, w.s);
}

static int
args(P *p, Word list, MStep *s)
{
	const MKernel *k = &p->m->k[s->kidx];
	Word it, all = list;
	MType t;
	int n = 0;

	for (Word l = list; item(&l, &it);)
		n++;
	if (n != k->nparam)
		return err(p, all.col, "kernel '%s' takes %d params, got %d args",
			   k->name, k->nparam, n);
	s->arg = arena_array(p->a, MArg, n ? n : 1);
	for (s->narg = 0; item(&list, &it); s->narg++) {
		if (arg(p, it, &s->arg[s->narg], &t, s->kind == STEP_INIT))
			return -1;
		if (t != k->param[s->narg])
			return err(p, it.col, "argument %d '%.*s' is %s, but "
				   "param %d of kernel '%s' is %s", s->narg + 1,
				   (int)it.n, it.s, mtype_names[t], s->narg + 1,
				   k->name, mtype_names[k->param[s->narg]]);
	}
	return 0;
}

/* --- tensor maps --------------------------------------------------------- */

/* A list of at most max integers in lo..hi into v; *n gets the count. */
static int
ints_at(P *p, Word list, int max, int64_t lo, int64_t hi, int64_t *v, int *n)
{
	Word it;

	for (*n = 0; item(&list, &it); (*n)++) {
		if (*n == max)
			return err(p, it.col, "more than %d items", max);
		if (int_at(p, &it, hi, &v[*n]))
			return -1;
		if (v[*n] < lo)
			return err(p, it.col, "%lld is below %lld", (long long)v[*n], (long long)lo);
	}
	return 0;
}

static int
st_tensormap(P *p)
{
	MTmap t = {0};
	Word w, it, list;
	MType ty;
	int64_t v[MTMAP_MAXRANK];
	int n;

	if (arity(p, KW_tensormap, 8) || name_at(p, &p->w[1], &t.name))
		return -1;
	if (names_get(&p->tmaps, t.name) >= 0)
		return err(p, p->w[1].col, "duplicate tensormap '%s'", t.name);
	if (kv(p, 2, "of", &w) || arg(p, w, &t.of, &ty, 0))
		return -1;
	if (ty != MT_PTR || t.of.kind == ARG_T)
		return err(p, w.col, "tensormap '%s' maps a pointer (in:N, out:N, w:NAME, buf:NAME)", t.name);
	if (kv(p, 3, "dtype", &w))
		return -1;
	if (dtype_parse(w.s, w.n, &t.dt) || (t.dt != DT_BF16 && t.dt != DT_F16 && t.dt != DT_F32 &&
					       t.dt != DT_F8E4M3))
		return err(p, w.col, "dtype '%.*s': bf16, f16, f32 or f8e4m3", (int)w.n, w.s);
	if (kv(p, 4, "dims", &w))
		return -1;
	list = list_of(w);
	for (t.rank = 0; item(&list, &it); t.rank++) {
		if (t.rank == MTMAP_MAXRANK)
			return err(p, it.col, "more than %d dims", MTMAP_MAXRANK);
		if (expr_at(p, &it, &t.dim[t.rank]))
			return -1;
	}
	if (t.rank < 2)
		return err(p, w.col, "tensormap '%s' needs 2 or 3 dims", t.name);
	if (kv(p, 5, "strides", &w) || ints_at(p, list_of(w), MTMAP_MAXRANK - 1, 16, ((int64_t)1 << 40) - 1, v, &n))
		return -1;
	if (n != t.rank - 1)
		return err(p, w.col, "%d dims need %d strides, got %d", t.rank, t.rank - 1, n);
	for (int i = 0; i < n; i++) {
		if (v[i] % 16)
			return err(p, w.col, "stride %lld is not a multiple of 16 bytes", (long long)v[i]);
		t.stride[i] = v[i];
	}
	if (kv(p, 6, "box", &w) || ints_at(p, list_of(w), MTMAP_MAXRANK, 1, 256, v, &n))
		return -1;
	if (n != t.rank)
		return err(p, w.col, "%d dims need %d box sizes, got %d", t.rank, t.rank, n);
	for (int i = 0; i < n; i++)
		t.box[i] = (int)v[i];
	if (kv(p, 7, "swizzle", &w) || ints_at(p, w, 1, 0, 128, v, &n))
		return -1;
	t.swizzle = (int)v[0];
	if (t.swizzle != 0 && t.swizzle != 32 && t.swizzle != 64 && t.swizzle != 128)
		return err(p, w.col, "swizzle %d: 0, 32, 64 or 128", t.swizzle);
	if (t.box[0] * dtype_bits(t.dt) / 8 % 16 || (t.swizzle && t.box[0] * dtype_bits(t.dt) / 8 > t.swizzle))
		return err(p, p->w[6].col, "an inner box of %d bytes (a multiple of 16, at most the swizzle's %d)",
			   t.box[0] * dtype_bits(t.dt) / 8, t.swizzle);
	names_put(&p->tmaps, t.name, p->m->ntmap);
	GROW(p, p->m->tmap, p->m->ntmap, p->ctmap);
	p->m->tmap[p->m->ntmap++] = t;
	return 0;
}

/* tokens=LO..HI: the range of T a launch variant runs for. */
static int
tokens_range(P *p, int i, MStep *s)
{
	Word w;
	const char *dots, *why;
	uint64_t lo, hi;

	if (kv(p, i, "tokens", &w))
		return -1;
	dots = memchr(w.s, '.', w.n);
	if (!dots || (size_t)(dots - w.s) + 2 > w.n || dots[1] != '.')
		return err(p, w.col, "tokens wants LO..HI, got '%.*s'", (int)w.n, w.s);
	if ((why = bundle_parse_uint(w.s, (size_t)(dots - w.s), INT32_MAX, &lo)) ||
	    (why = bundle_parse_uint(dots + 2, w.n - (size_t)(dots - w.s) - 2, INT32_MAX, &hi)))
		return err(p, w.col, "tokens: %s", why);
	if (lo < 1 || lo > hi || (int64_t)hi > p->m->max_tokens)
		return err(p, w.col, "tokens=%llu..%llu is not a range inside 1..%lld",
			   (unsigned long long)lo, (unsigned long long)hi,
			   (long long)p->m->max_tokens);
	s->tlo = (int64_t)lo;
	s->thi = (int64_t)hi;
	return 0;
}

/*
 * Consecutive launch variants must tile 1..max_tokens: each range starts
 * where the last one ended, and the last ends at max_tokens; otherwise some
 * T would launch no variant (a gap) or two (an overlap).
 */
static int
tokens_tile(P *p, const MStep *s)
{
	int64_t want = p->tnext ? p->tnext : 1;
	const char *arch = p->tarch;
	int col = p->w[6].col;

	p->tnext = s->thi == p->m->max_tokens ? 0 : s->thi + 1;	/* also after an error */
	p->tline = p->line;
	p->tarch = s->arch;
	if (want > 1 && (arch ? !s->arch || strcmp(arch, s->arch) : s->arch != NULL))
		return err(p, col, "tokens=%lld..%lld: a launch variant for %s continues "
			   "variants for %s (each target's variants tile 1..%lld on their own)",
			   (long long)s->tlo, (long long)s->thi, s->arch ? s->arch : "any target",
			   arch ? arch : "any target", (long long)p->m->max_tokens);
	if (s->tlo > want)
		return err(p, col, "tokens=%lld..%lld leaves T=%lld..%lld to no launch "
			   "variant (the ranges must tile 1..%lld)", (long long)s->tlo,
			   (long long)s->thi, (long long)want, (long long)s->tlo - 1,
			   (long long)p->m->max_tokens);
	if (s->tlo < want)
		return err(p, col, "tokens=%lld..%lld overlaps the variant before it "
			   "(T=%lld..%lld run twice)", (long long)s->tlo, (long long)s->thi,
			   (long long)s->tlo, (long long)MIN(want - 1, s->thi));
	return 0;
}

/* A statement that is not the next variant: the ranges must be complete. */
static int
tokens_done(P *p)
{
	int64_t from = p->tnext;

	if (!from)
		return 0;
	p->tnext = 0;
	return diag_error(p->d, loc_line(p->file, p->tline, 1), "the tokens= ranges of "
			  "these launch variants end at T=%lld: T=%lld..%lld launches no "
			  "variant", (long long)from - 1, (long long)from,
			  (long long)p->m->max_tokens);
}

int
bundle_step_runs(const MStep *s, int64_t T)
{
	return !s->thi || (T >= s->tlo && T <= s->thi);
}

/* Does word i of a launch line start with "key="? */
static int
has_key(P *p, int i, const char *key)
{
	size_t k = strlen(key);

	return i < p->nw && p->w[i].n > k && memcmp(p->w[i].s, key, k) == 0 &&
	       p->w[i].s[k] == '=';
}

/* arch=sm_XX: a launch for one code target only; it must be one of the
 * kernel's targets (the runtime keeps the lines of the target it loads). */
static int
arch_at(P *p, int i, MStep *s)
{
	const MKernel *k = &p->m->k[s->kidx];
	Word w;

	if (kv(p, i, "arch", &w))
		return -1;
	for (int t = 0; t < k->ntarget; t++)
		if (eq(&w, k->target[t])) {
			s->arch = k->target[t];
			return 0;
		}
	return err(p, w.col, "arch=%.*s is not a target of kernel '%s'", (int)w.n, w.s,
		   k->name);
}

/* Word 1 of a launch, init or candidate line: a declared kernel. */
static int
kernel_at(P *p, MStep *s)
{
	if (name_at(p, &p->w[1], &s->kernel))
		return -1;
	if ((s->kidx = names_get(&p->kernels, s->kernel)) < 0)
		return err(p, p->w[1].col, "undeclared kernel '%s'", s->kernel);
	return 0;
}

/* Words 2..5 of a launch, init or candidate line: grid, block, smem, args. */
static int
launch_words(P *p, MStep *s)
{
	int64_t smem;
	Word w;

	if (kv(p, 2, "grid", &w) || grid3(p, list_of(w), s) ||
	    kv(p, 3, "block", &w) || block3(p, list_of(w), s) ||
	    kv(p, 4, "smem", &w) || int_at(p, &w, INT32_MAX, &smem) ||
	    kv(p, 5, "args", &w) || args(p, list_of(w), s))
		return -1;
	s->smem = (int)smem;
	return 0;
}

static int
step(P *p, int kw, MStepKind kind)
{
	MStep s = {.kind = kind, .line = p->line};
	Manifest *m = p->m;
	int tok = kind == STEP_LAUNCH && has_key(p, 6, "tokens");
	int arch = kind == STEP_LAUNCH && has_key(p, 6 + tok, "arch");

	if (arity(p, kw, 6 + tok + arch) || kernel_at(p, &s))
		return -1;
	if (arch && arch_at(p, 6 + tok, &s))
		return -1;
	if (tok ? tokens_range(p, 6, &s) || tokens_tile(p, &s) : tokens_done(p))
		return -1;
	if (launch_words(p, &s))
		return -1;
	GROW(p, m->step, m->nstep, p->cstep);
	m->step[m->nstep++] = s;
	return 0;
}

static int
st_init(P *p)
{
	return step(p, KW_init, STEP_INIT);
}

static int
st_launch(P *p)
{
	return step(p, KW_launch, STEP_LAUNCH);
}

/* The region must lie inside its buffer at T=1 and T=max_tokens. */
static int
memset_fits(P *p, const MStep *s, const Word *at)
{
	const MBuffer *b = &p->m->buf[s->dst.index];
	int64_t ts[2] = {1, p->m->max_tokens}, n, size;
	uint64_t end;

	for (int i = 0; i < 2; i++) {
		if (bundle_expr_eval(&s->bytes, ts[i], &n) ||
		    bundle_expr_eval(&b->bytes, ts[i], &size) ||
		    __builtin_add_overflow(s->dst.off, (uint64_t)n, &end) ||
		    end > (uint64_t)size)
			return err(p, at->col, "memset overruns buffer '%s' at "
				   "T=%lld", b->name, (long long)ts[i]);
	}
	return 0;
}

static int
st_memset(P *p)
{
	MStep s = {.kind = STEP_MEMSET, .kidx = -1, .line = p->line};
	Word v = p->w[1], w;

	if (arity(p, KW_memset, p->nw == 4 ? 4 : 3) || tokens_done(p))
		return -1;
	if (!prefix(&v, "buf:"))
		return err(p, v.col, "memset needs a buf:NAME operand, got '%.*s'",
			   (int)v.n, v.s);
	if (buf_arg(p, v, &s.dst) || kv(p, 2, "bytes", &w) ||
	    expr_at(p, &w, &s.bytes) || memset_fits(p, &s, &w))
		return -1;
	if (p->nw == 4) {	/* when=shared: only on a workspace not the program's own */
		if (kv(p, 3, "when", &w))
			return -1;
		if (w.n != 6 || memcmp(w.s, "shared", 6))
			return err(p, w.col, "memset when=%.*s: expected when=shared", (int)w.n, w.s);
		s.shared_only = 1;
	}
	GROW(p, p->m->step, p->m->nstep, p->cstep);
	p->m->step[p->m->nstep++] = s;
	return 0;
}

/* --- expert parallelism ----------------------------------------------- */

/* "ep rank=R ranks=N experts=LIST": this program is rank R of N; LIST its
 * experts, ids and ranges A-B ascending, comma-separated (informational:
 * the plan holds them already). */
static int
st_ep(P *p)
{
	Word v;
	int64_t n, r, last = -1;

	if (arity(p, KW_ep, 4) || kv(p, 2, "ranks", &v) || int_at(p, &v, 65536, &n))
		return -1;
	if (n < 1)
		return err(p, v.col, "ranks must be at least 1");
	if (kv(p, 1, "rank", &v) || int_at(p, &v, n - 1, &r) || kv(p, 3, "experts", &v))
		return -1;
	Word rest = list_of(v), it;
	while (item(&rest, &it)) {
		const char *dash;
		int64_t lo, hi;
		dash = memchr(it.s, '-', it.n);
		Word a = {it.s, dash ? (size_t)(dash - it.s) : it.n, it.col};
		if (int_at(p, &a, INT32_MAX, &lo))
			return -1;
		hi = lo;
		if (dash) {
			Word b = {dash + 1, it.n - a.n - 1, it.col + (int)a.n + 1};
			if (int_at(p, &b, INT32_MAX, &hi))
				return -1;
		}
		if (lo <= last || hi < lo)
			return err(p, it.col, "experts must ascend (ids and ranges A-B, A < B)");
		last = hi;
	}
	if (last < 0)
		return err(p, v.col, "a rank holds at least one expert");
	p->m->ep_ranks = (int)n;
	p->m->ep_rank = (int)r;
	p->m->ep_experts = arena_strndup(p->a, v.s, v.n);
	return 0;
}

/* src and dst hold N chunks at T=1 and T=max_tokens. */
static int
a2a_fits(P *p, const MStep *s, const Word *at)
{
	int64_t ts[2] = {1, p->m->max_tokens}, n, size;

	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 2; i++) {
			const MArg *a = i ? &s->dst : &s->src;
			const MBuffer *b = &p->m->buf[a->index];
			if (bundle_expr_eval(&s->bytes, ts[k], &n) ||
			    __builtin_mul_overflow(n, (int64_t)p->m->ep_ranks, &n) ||
			    bundle_expr_eval(&b->bytes, ts[k], &size) ||
			    (uint64_t)n + a->off > (uint64_t)size)
				return err(p, at->col, "all_to_all: %d chunks overrun buffer '%s' at "
					   "T=%lld", p->m->ep_ranks, b->name, (long long)ts[k]);
		}
	return 0;
}

static int
st_all_to_all(P *p)
{
	MStep s = {.kind = STEP_ALL_TO_ALL, .kidx = -1, .line = p->line};
	Word v, w;

	if (arity(p, KW_all_to_all, 4) || tokens_done(p))
		return -1;
	if (!p->m->ep_ranks)
		return err(p, 1, "all_to_all needs an 'ep' line (the ranks)");
	for (int i = 0; i < 2; i++) {
		if (kv(p, 1 + i, i ? "dst" : "src", &v))
			return -1;
		if (!prefix(&v, "buf:"))
			return err(p, v.col, "all_to_all needs buf:NAME operands, got '%.*s'",
				   (int)v.n, v.s);
		if (buf_arg(p, v, i ? &s.dst : &s.src))
			return -1;
	}
	if (kv(p, 3, "chunk", &w) || expr_at(p, &w, &s.bytes) || a2a_fits(p, &s, &w))
		return -1;
	GROW(p, p->m->step, p->m->nstep, p->cstep);
	p->m->step[p->m->nstep++] = s;
	return 0;
}

/* --- routing ----------------------------------------------------------- */

static int
route_buf(P *p, int i, const char *key, const char **name, int *idx)
{
	Word v;

	if (kv(p, i, key, &v) || name_at(p, &v, name))
		return -1;
	if ((*idx = names_get(&p->buffers, *name)) < 0)
		return err(p, v.col, "unknown buffer '%s'", *name);
	return 0;
}

static int
route_int(P *p, Word *v, int64_t max, int *out)
{
	int64_t n;

	if (int_at(p, v, max, &n))
		return -1;
	if (n < 1)
		return err(p, v->col, "must be at least 1");
	*out = (int)n;
	return 0;
}

/* Buffer b holds whole rows of `row` bytes, at least one (a static
 * model's buffer holds its fixed rows, whatever T). */
static int
route_fits(P *p, int b, int64_t row, int col)
{
	const MBuffer *buf = &p->m->buf[b];

	if (buf->bytes.div || buf->bytes.a % row || buf->bytes.b % row ||
	    buf->bytes.a + buf->bytes.b < row)
		return err(p, col, "buffer '%s' does not hold rows of %lld bytes", buf->name,
			   (long long)row);
	return 0;
}

/* The optional select= and bias=w:NAME (words 8 and 9): what the choice
 * ranks; without them, the logits.  The bias is an f32, bf16 or f16
 * weight of [experts]. */
static int
route_select(P *p, MRoute *r)
{
	Word v;
	int s;

	r->bias_w = -1;
	if (p->nw < 9)
		return 0;
	if (kv(p, 8, "select", &v))
		return -1;
	if ((s = route_select_parse(v.s, v.n)) < 0)
		return err(p, v.col, "select '%.*s': logit, sigmoid or softmax", (int)v.n, v.s);
	r->select = (RouteSelect)s;
	if (p->nw < 10)
		return 0;
	if (kv(p, 9, "bias", &v))
		return -1;
	if (!prefix(&v, "w:"))
		return err(p, v.col, "bias '%.*s': w:NAME, a weight", (int)v.n, v.s);
	if (name_at(p, &v, &r->bias))
		return -1;
	if ((r->bias_w = names_get(&p->weights, r->bias)) < 0)
		return err(p, v.col, "unknown weight '%s'", r->bias);
	const MWeight *w = &p->m->w[r->bias_w];
	if ((w->dt != DT_F32 && w->dt != DT_BF16 && w->dt != DT_F16) || w->rank != 1 ||
	    w->dim[0] != r->experts)
		return err(p, v.col, "bias weight '%s' is not f32, bf16 or f16 [%d]", r->bias,
			   r->experts);
	return 0;
}

static int
st_route(P *p)
{
	MRoute r = {0};
	Word v, g;

	if (arity(p, KW_route, p->nw < 9 ? 8 : p->nw < 10 ? 9 : 10) ||
	    route_buf(p, 1, "logits", &r.logits, &r.logits_buf) ||
	    kv(p, 2, "dtype", &v))
		return -1;
	if (dtype_parse(v.s, v.n, &r.dt) ||
	    (r.dt != DT_F32 && r.dt != DT_BF16 && r.dt != DT_F16))
		return err(p, v.col, "dtype '%.*s': f32, bf16 or f16", (int)v.n, v.s);
	if (route_buf(p, 3, "ids", &r.ids, &r.ids_buf) || kv(p, 4, "experts", &v) ||
	    route_int(p, &v, 1024, &r.experts) || kv(p, 5, "k", &v) ||
	    route_int(p, &v, r.experts, &r.k) || kv(p, 6, "groups", &g))
		return -1;
	const char *comma = memchr(g.s, ',', g.n);
	if (!comma)
		return err(p, g.col, "groups=N,KEEP");
	v = (Word){g.s, (size_t)(comma - g.s), g.col};
	if (route_int(p, &v, r.experts, &r.groups))
		return -1;
	v = (Word){comma + 1, g.n - v.n - 1, g.col + (int)v.n + 1};
	if (route_int(p, &v, r.groups, &r.topk_group))
		return -1;
	if (r.experts % r.groups)
		return err(p, g.col, "%d groups do not divide %d experts", r.groups, r.experts);
	if (kv(p, 7, "score", &v))
		return -1;
	if (!eq(&v, "max") && !eq(&v, "top2"))
		return err(p, v.col, "score '%.*s': max or top2", (int)v.n, v.s);
	r.top2 = eq(&v, "top2");
	if (route_select(p, &r))
		return -1;
	if (route_fits(p, r.logits_buf, (int64_t)r.experts * dtype_bits(r.dt) / 8, p->w[1].col) ||
	    route_fits(p, r.ids_buf, 4 * (int64_t)r.k, p->w[3].col))
		return -1;
	GROW(p, p->m->route, p->m->nroute, p->croute);
	p->m->route[p->m->nroute++] = r;
	return 0;
}

/* --- tuning candidates ------------------------------------------------- */

/*
 * candidate KERNEL grid= block= smem= args= of=STEP out=ARG dtype=DT key=KEY
 * variant=VARIANT tokens=LO..HI: another kernel for the GEMM of launch step
 * STEP (an index into the steps, init lines included), which `moert tune`
 * times and checks against it at T in LO..HI (the key's range; the step must
 * run there); never run by the plan.  The plan must have no arch= lines
 * (a candidate bundle is for one target), ARG is a pointer argument.
 */
static int
st_candidate(P *p)
{
	MCand c = {.s = {.kind = STEP_LAUNCH, .line = p->line}};
	Manifest *m = p->m;
	int64_t of, out;
	Word w;

	if (arity(p, KW_candidate, 12) || tokens_done(p) || kernel_at(p, &c.s) ||
	    launch_words(p, &c.s) || kv(p, 6, "of", &w))
		return -1;
	if (!m->nstep || int_at(p, &w, m->nstep - 1, &of))
		return m->nstep ? -1 : err(p, w.col, "of=%.*s: the plan has no steps", (int)w.n, w.s);
	if (m->step[of].kind != STEP_LAUNCH)
		return err(p, w.col, "of=%lld is not a launch step", (long long)of);
	for (int i = 0; i < m->nstep; i++)
		if (m->step[i].arch)
			return err(p, 1, "candidate lines need a plan without arch= lines "
				   "(line %d has one): compile for one target", m->step[i].line);
	if (kv(p, 7, "out", &w) || int_at(p, &w, c.s.narg - 1, &out))
		return -1;
	if (c.s.arg[out].kind != ARG_BUF && c.s.arg[out].kind != ARG_OUT)
		return err(p, w.col, "out=%lld: argument %lld is not a buf: or out: pointer",
			   (long long)out, (long long)out + 1);
	if (kv(p, 8, "dtype", &w) || dtype_at(p, &w, &c.dt) || kv(p, 9, "key", &w) ||
	    text_at(p, &w, 255, &c.key) || kv(p, 10, "variant", &w) ||
	    text_at(p, &w, 63, &c.variant))
		return -1;
	if (tokens_range(p, 11, &c.s))
		return -1;
	if (m->step[of].thi && (c.s.tlo < m->step[of].tlo || c.s.thi > m->step[of].thi))
		return err(p, p->w[11].col, "tokens=%lld..%lld: launch step %lld runs for T=%lld..%lld "
			   "only", (long long)c.s.tlo, (long long)c.s.thi, (long long)of,
			   (long long)m->step[of].tlo, (long long)m->step[of].thi);
	c.of = (int)of;
	c.out = (int)out;
	GROW(p, m->cand, m->ncand, p->ccand);
	m->cand[m->ncand++] = c;
	return 0;
}

/* --- the driver --------------------------------------------------------- */

static int
keyword(const Word *w)
{
	for (int k = 0; k < NKW; k++)
		if (eq(w, stmt[k].kw))
			return k;
	return -1;
}

/* Required header lines ranked before `rank` that have not appeared. */
static void
missing(P *p, int rank, const char *before)
{
	for (int k = 0; k < NKW; k++) {
		unsigned bit = 1u << k;
		if (!stmt[k].required || stmt[k].rank >= rank ||
		    (p->seen | p->reported) & bit)
			continue;
		p->reported |= bit;
		if (before)
			err(p, 1, "missing '%s' line before '%s'", stmt[k].kw,
			    before);
		else
			err(p, 1, "missing '%s' line", stmt[k].kw);
	}
}

/* Statement order: header lines once each, in order; then the body. */
static int
order(P *p, int k)
{
	int r = stmt[k].rank;

	if (p->rank < 0 && k != KW_moeb) {
		p->seen |= 1u << KW_moeb;
		p->reported |= 1u << KW_moeb;
		err(p, 1, "the manifest must start with 'moeb %d'", BUNDLE_VERSION);
	}
	if (r < p->rank)
		return err(p, 1, "'%s' must come before '%s'", stmt[k].kw,
			   stmt[p->last].kw);
	if (r == p->rank && r <= HEADER_RANK)
		return err(p, 1, "duplicate '%s' line", stmt[k].kw);
	missing(p, r, stmt[k].kw);
	return 0;
}

static void
statement(P *p, const char *s, size_t n)
{
	int k;

	if (n == 0 || s[0] == '#')
		return;		/* blank and comment lines carry nothing */
	if (split(p, s, n))
		return;
	k = keyword(&p->w[0]);
	if (k < 0) {
		err(p, 1, "unknown statement '%.*s'", (int)p->w[0].n, p->w[0].s);
		return;
	}
	if (order(p, k))
		return;
	stmt[k].fn(p);
	p->seen |= 1u << k;
	p->rank = stmt[k].rank;
	p->last = k;
}

int
bundle_manifest_parse(Arena *a, const char *file, const char *text,
		      size_t len, Manifest **out, Diag *d)
{
	P p = {.a = a, .d = d, .file = file, .rank = -1};
	const char *s = text, *end = text + len, *nl;
	int nerr = d->nerror;

	p.m = arena_alloc(a, sizeof *p.m);
	if (memchr(text, 0, len))
		return diag_error(d, loc_file(file), "NUL byte at offset %zu of "
				  "the manifest", (size_t)((const char *)memchr(
							 text, 0, len) - text));
	for (p.line = 1; s < end; p.line++, s = nl + 1) {
		nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl)
			nl = end;
		statement(&p, s, (size_t)(nl - s));
		if (p.version)
			break;	/* the rest is another grammar */
	}
	p.line = p.line > 1 ? p.line - 1 : 1;
	names_free(&p.tensors);
	names_free(&p.weights);
	names_free(&p.buffers);
	names_free(&p.kernels);
	names_free(&p.tmaps);
	if (p.version)
		return BUNDLE_EVERSION;
	tokens_done(&p);
	if (p.rank < 0)
		err(&p, 1, "empty manifest: it must start with 'moeb %d'",
		    BUNDLE_VERSION);
	else
		missing(&p, 99, NULL);
	if (p.version)
		return BUNDLE_EVERSION;
	if (d->nerror != nerr)
		return BUNDLE_EFORMAT;
	*out = p.m;
	return BUNDLE_OK;
}

int
bundle_manifest_check(const Manifest *m, Diag *d)
{
	size_t n;
	char *text = bundle_manifest_print(m, &n);
	Arena *a = arena_new(0);
	Manifest *back;
	int rc = bundle_manifest_parse(a, "manifest", text, n, &back, d);

	arena_free(a);
	free(text);
	return rc;
}

uint64_t
bundle_generated_layout(const Manifest *m, uint64_t *woff)
{
	uint64_t end = 0;

	for (int i = 0; i < m->nw; i++) {	/* placed by the compiler */
		const MWeight *w = &m->w[i];
		if (!w->synth || w->at == MW_NEXT)
			continue;
		if (w->at > UINT64_MAX / 4 || w->bytes > UINT64_MAX / 4)
			return UINT64_MAX;
		woff[i] = w->at;
		end = MAX(end, BUNDLE_ALIGN_UP(w->at + w->bytes));
	}
	for (int i = 0; i < m->nw; i++) {	/* one after another */
		const MWeight *w = &m->w[i];
		if (!w->synth || w->at != MW_NEXT)
			continue;
		if (w->bytes > UINT64_MAX / 4 - end)
			return UINT64_MAX;
		woff[i] = end;
		end = BUNDLE_ALIGN_UP(end + w->bytes);
	}
	return end;
}
