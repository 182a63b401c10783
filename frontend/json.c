/*
 * json.c — JSON read as strictly as Python's json module (and serde_json,
 * which the safetensors library uses) reads it, before cJSON builds the tree.
 *
 * cJSON alone is lenient: it takes trailing garbage, numbers like 01 and 1.,
 * raw control characters and invalid UTF-8 in strings, and \u0000, which
 * ends a C string early ("mixtral\u0000evil" read as "mixtral").  So the text
 * is first checked against the grammar of RFC 8259 here, in one pass without
 * recursion:
 *
 *	- the text is valid UTF-8 (Python decodes it first); no byte-order mark;
 *	- one value, then only whitespace (space, tab, CR, LF) to the end;
 *	- numbers -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; NaN is
 *	  refused (Python accepts it); Infinity and -Infinity are accepted in
 *	  config.json (FE_JSON_LAST_WINS), as Python reads them and as
 *	  transformers 4's json.dumps writes an infinite value (a Mamba
 *	  layer's time_step_limit [0.0, Infinity]), and refused in safetensors
 *	  headers (serde_json refuses them);
 *	- strings: no raw control characters (Python's strict=True), only the
 *	  escapes \" \\ \/ \b \f \n \r \t \uXXXX, and no \u0000;
 *	- nesting at most FE_JSON_MAX_DEPTH (cJSON's own limit).
 *
 * Then duplicate keys in an object: Python keeps the last one; cJSON's
 * lookups find the first.  FE_JSON_LAST_WINS deletes the earlier ones, so
 * lookups see what transformers sees; FE_JSON_NO_DUPS refuses them.
 * docs/limits.md lists these rules.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "frontend.h"

#define FE_JSON_MAX_DEPTH 1000

typedef struct {
	const unsigned char *s, *end;
	const char *why;	/* set on the first error */
	const unsigned char *at;
	int inf_ok;		/* Infinity / -Infinity are values */
	int ninf;		/* how many there were */
} J;

static int
fail(J *j, const unsigned char *at, const char *why)
{
	if (!j->why)
		j->why = why, j->at = at;
	return -1;
}

/* Length of the UTF-8 sequence at p (Python's decoder: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0. */
static int
utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0], lo = 0x80, hi = 0xbf;
	int n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (end - p < n || p[1] < lo || p[1] > hi)
		return 0;
	for (int i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

static void
skip_ws(J *j)
{
	while (j->s < j->end && (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r'))
		j->s++;
}

static int
hex4(const unsigned char *p, const unsigned char *end, unsigned *v)
{
	*v = 0;
	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		unsigned c = p[i];
		int d = c >= '0' && c <= '9' ? (int)(c - '0') :
			(c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (int)((c | 0x20) - 'a' + 10) : -1;
		if (d < 0)
			return -1;
		*v = *v << 4 | (unsigned)d;
	}
	return 0;
}

static int
string(J *j)
{
	const unsigned char *p = j->s + 1;	/* past the quote */
	unsigned v;
	int n;

	while (p < j->end && *p != '"') {
		if (*p < 0x20)
			return fail(j, p, "control character in a string (write it as an escape)");
		if (*p == '\\') {
			if (p + 1 >= j->end || !strchr("\"\\/bfnrtu", p[1]))
				return fail(j, p, "bad escape in a string");
			if (p[1] == 'u') {
				if (hex4(p + 2, j->end, &v))
					return fail(j, p, "bad \\u escape in a string");
				if (v == 0)
					return fail(j, p, "\\u0000 in a string");
				p += 4;
			}
			p += 2;
			continue;
		}
		if (!(n = utf8_len(p, j->end)))
			return fail(j, p, "invalid UTF-8");
		p += n;
	}
	if (p >= j->end)
		return fail(j, j->s, "unterminated string");
	j->s = p + 1;
	return 0;
}

static int
digits(J *j)
{
	const unsigned char *p = j->s;

	while (j->s < j->end && *j->s >= '0' && *j->s <= '9')
		j->s++;
	return j->s > p ? 0 : fail(j, j->s, "bad number");
}

static int
number(J *j)
{
	const unsigned char *start = j->s;

	if (*j->s == '-')
		j->s++;
	if (j->s < j->end && *j->s == '0')
		j->s++;
	else if (digits(j))
		return -1;
	if (j->s < j->end && *j->s == '.') {
		j->s++;
		if (digits(j))
			return -1;
	}
	if (j->s < j->end && (*j->s == 'e' || *j->s == 'E')) {
		j->s++;
		if (j->s < j->end && (*j->s == '+' || *j->s == '-'))
			j->s++;
		if (digits(j))
			return -1;
	}
	if (j->s < j->end && ((*j->s >= '0' && *j->s <= '9') || *j->s == '.'))
		return fail(j, start, "bad number (a leading zero?)");
	return 0;
}

static int
literal(J *j, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(j->end - j->s) < n || memcmp(j->s, word, n) != 0)
		return fail(j, j->s, "unexpected character");
	j->s += n;
	return 0;
}

/* A scalar value, or the opening of a container (pushed on stack). */
static int
value(J *j, char *stack, int *depth)
{
	if (j->s >= j->end)
		return fail(j, j->s, "unexpected end of text");
	switch (*j->s) {
	case '{':
	case '[':
		if (*depth == FE_JSON_MAX_DEPTH)
			return fail(j, j->s, "nested more than 1000 deep");
		stack[(*depth)++] = (char)*j->s++;
		return 0;
	case '"':
		return string(j);
	case 't':
		return literal(j, "true");
	case 'f':
		return literal(j, "false");
	case 'n':
		return literal(j, "null");
	default:
		if (j->inf_ok && (*j->s == 'I' || (*j->s == '-' && j->s + 1 < j->end &&
						    j->s[1] == 'I'))) {
			j->s += *j->s == '-';
			j->ninf++;
			return literal(j, "Infinity");
		}
		if (*j->s == '-' || (*j->s >= '0' && *j->s <= '9'))
			return number(j);
		if (*j->s == 'N' && j->inf_ok)
			return fail(j, j->s, "NaN is not read (no config needs it)");
		return fail(j, j->s, *j->s == 'N' || *j->s == 'I' ?
			    "NaN and Infinity are not JSON" : "unexpected character");
	}
}

/*
 * A copy of checked text with each Infinity outside strings written as
 * 1e999 (strtod's inf, which cJSON parses), padded to the same length.
 */
static char *
inf_as_number(const char *text, size_t len)
{
	char *t = malloc(len + 1);
	int in = 0;

	if (!t)
		return NULL;
	memcpy(t, text, len);
	t[len] = 0;
	for (size_t i = 0; i < len; i++) {
		if (in && t[i] == '\\')
			i++;
		else if (t[i] == '"')
			in = !in;
		else if (!in && t[i] == 'I' && len - i >= 8 && memcmp(t + i, "Infinity", 8) == 0)
			memcpy(t + i, "1e999   ", 8), i += 7;
	}
	return t;
}

/*
 * The grammar, iteratively: after each value, close containers or go on.
 * The stack holds '{' or '[' for a container with no element yet, '}' or
 * ']' once it has one (a comma must then come first).
 */
static int
check(J *j)
{
	char *stack = xmalloc(FE_JSON_MAX_DEPTH);
	int depth = 0, rc = -1;

	skip_ws(j);
	if (value(j, stack, &depth))
		goto out;
	for (;;) {
		skip_ws(j);
		if (depth == 0)
			break;
		char *top = &stack[depth - 1];
		int obj = *top == '{' || *top == '}', empty = *top == '{' || *top == '[';
		if (j->s >= j->end) {
			fail(j, j->s, "unexpected end of text");
			goto out;
		}
		if (*j->s == (obj ? '}' : ']')) {
			j->s++;
			depth--;
			continue;
		}
		if (!empty && *j->s++ != ',') {
			fail(j, j->s - 1, obj ? "expected ',' or '}'" : "expected ',' or ']'");
			goto out;
		}
		*top = obj ? '}' : ']';
		skip_ws(j);
		if (obj) {
			if (j->s >= j->end || *j->s != '"') {
				fail(j, j->s, "expected a key (a string)");
				goto out;
			}
			if (string(j))
				goto out;
			skip_ws(j);
			if (j->s >= j->end || *j->s++ != ':') {
				fail(j, j->s - 1, "expected ':'");
				goto out;
			}
			skip_ws(j);
		}
		if (value(j, stack, &depth))
			goto out;
	}
	rc = j->s == j->end ? 0 : fail(j, j->s, "text after the JSON value");
out:
	free(stack);
	return rc;
}

typedef struct {
	cJSON *c;
	int pos;		/* in the object: ties keep the text's order */
} Member;

static int
cmp_key(const void *a, const void *b)
{
	const Member *x = a, *y = b;
	int r = strcmp(x->c->string, y->c->string);

	return r ? r : (x->pos > y->pos) - (x->pos < y->pos);
}

/*
 * Duplicate keys in every object below j: deleted but the last (keep_last),
 * or the first duplicate's key returned.  O(n log n) per object.
 */
static const char *
dups(cJSON *j, int keep_last)
{
	cJSON *c;
	Member *v;
	int n = 0, k = 0;
	const char *dup = NULL;

	if (!cJSON_IsObject(j) && !cJSON_IsArray(j))
		return NULL;
	for (c = j->child; c; c = c->next) {
		n++;
		if ((dup = dups(c, keep_last)))
			return dup;
	}
	if (!cJSON_IsObject(j) || n < 2)
		return NULL;
	v = xmalloc(sizeof *v * (size_t)n);
	for (c = j->child; c; c = c->next, k++)
		v[k] = (Member){c, k};
	qsort(v, (size_t)n, sizeof *v, cmp_key);	/* equal keys: in text order */
	for (int i = 1; i < n; i++) {
		if (strcmp(v[i - 1].c->string, v[i].c->string) != 0)
			continue;
		if (!keep_last) {
			dup = v[i].c->string;
			break;
		}
		cJSON_Delete(cJSON_DetachItemViaPointer(j, v[i - 1].c));	/* the earlier goes */
	}
	free(v);
	return dup;
}

cJSON *
fe_json_parse(const char *path, const char *text, size_t len, int mode, Diag *d)
{
	J j = {(const unsigned char *)text, (const unsigned char *)text + len, NULL, NULL,
	       mode == FE_JSON_LAST_WINS, 0};
	cJSON *root;
	const char *dup;
	char *num = NULL;

	if (check(&j)) {
		int line = 1, col = 1;
		for (const char *p = text; p < (const char *)j.at; p++)
			*p == '\n' ? (line++, col = 1) : col++;
		diag_error(d, loc_line(path, line, col), "not valid JSON: %s", j.why);
		return NULL;
	}
	if (j.ninf && !(num = inf_as_number(text, len))) {
		diag_error(d, loc_file(path), "out of memory");
		return NULL;
	}
	root = cJSON_ParseWithLength(num ? num : text, len);
	free(num);
	if (!root) {	/* a lone surrogate \ud800 */
		diag_error(d, loc_file(path), "not valid JSON: a \\u escape cJSON cannot decode");
		return NULL;
	}
	if ((dup = dups(root, mode == FE_JSON_LAST_WINS))) {
		diag_error(d, loc_file(path), "key '%s' is named twice in one object", dup);
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}
