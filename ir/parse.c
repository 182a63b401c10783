/*
 * parse.c — reads the text form (docs/ir.md) back into a module.
 *
 * A hand-written lexer and a recursive-descent parser over statements, one
 * per line.  Every error is reported once as file:line:col: error: message
 * and parsing stops; nothing is half-built on return.  Result types come
 * from the text; ir_verify (run by callers) re-infers and compares them.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define IR_MAX_FILE ((uint64_t)1 << 30)	/* refused by size before it is read */

enum {
	TEOF, TNL, TLOCAL, TWEIGHT, TGLOBAL, TIDENT, TINT, TFLOAT, TSTRING,
	TLPAREN, TRPAREN, TLBRACK, TRBRACK, TLBRACE, TRBRACE, TCOMMA,
	TCOLON, TEQ, TSTAR, TQUEST, TARROW, TUNDER,
};

static const char *tokname[] = {
	"end of file", "end of line", "%name", "$name", "@name", "identifier",
	"integer", "number", "string", "'('", "')'", "'['", "']'", "'{'", "'}'",
	"','", "':'", "'='", "'*'", "'?'", "'->'", "'_'",
};

typedef struct {
	int kind;
	const char *p;		/* start in the text */
	size_t n;
	int line, col;
	int64_t i;
	double f;
	char *s;		/* decoded string or name, in the arena */
} Tok;

/* Name -> value, per graph: open addressing on interned name pointers. */
typedef struct {
	const char **key;
	Value **val;
	size_t cap, n;
} VMap;

typedef struct {
	const char *file, *src, *end, *p;
	int line;
	const char *linestart;
	Tok t;			/* current token */
	Module *m;
	Diag *d;
	int failed;
	VMap vars;
	Graph *g;
	struct Pending {	/* calls resolved after every graph is known */
		Node *node;
		char *name;
		Loc loc;
	} *calls;
	int ncall, capcall;
} P;

static int
err(P *p, const Tok *t, const char *fmt, ...)
{
	va_list ap;

	if (p->failed)
		return -1;
	p->failed = 1;
	va_start(ap, fmt);
	diag_verror(p->d, loc_line(p->file, t->line, t->col), fmt, ap);
	va_end(ap);
	return -1;
}

static int
namechar(int c)
{
	return isalnum(c) || c == '_' || c == '.';
}

static void
lex_string(P *p, Tok *t)
{
	char *buf = arena_alloc(p->m->arena, (size_t)(p->end - p->p) + 1);
	size_t k = 0;

	p->p++;
	while (p->p < p->end && *p->p != '"' && *p->p != '\n') {
		char c = *p->p++;
		if (c == '\\' && p->p < p->end) {
			c = *p->p++;
			if (c == 'n')
				c = '\n';
			else if (c == 'x' && p->end - p->p >= 2 &&
				 isxdigit((unsigned char)p->p[0]) &&
				 isxdigit((unsigned char)p->p[1])) {
				char hex[3] = {p->p[0], p->p[1], 0};
				c = (char)strtol(hex, NULL, 16);
				p->p += 2;
			}
		}
		buf[k++] = c;
	}
	if (p->p >= p->end || *p->p != '"') {
		err(p, t, "unterminated string");
		t->kind = TEOF;
		return;
	}
	p->p++;
	buf[k] = 0;
	t->kind = TSTRING;
	t->s = buf;
}

/* Numbers are converted from a NUL-terminated copy of their characters:
 * the text need not end in a NUL, and strtod must not read past it. */
static void
lex_number(P *p, Tok *t)
{
	size_t n = 0;
	char *buf, *s, *end;
	int isfloat = 0;

	while (p->p + n < p->end && (namechar((unsigned char)p->p[n]) || p->p[n] == '-' ||
				     p->p[n] == '+'))
		n++;
	buf = xmalloc(n + 1);
	memcpy(buf, p->p, n);
	buf[n] = 0;
	s = buf + (*buf == '-');
	if (strncmp(s, "inf", 3) == 0 && !namechar((unsigned char)s[3])) {
		t->kind = TFLOAT;
		t->f = *buf == '-' ? -INFINITY : INFINITY;
		p->p += s + 3 - buf;
		free(buf);
		return;
	}
	while (isdigit((unsigned char)*s))
		s++;
	if (*s == '.' || *s == 'e' || *s == 'E')
		isfloat = 1;
	errno = 0;
	if (isfloat) {
		t->kind = TFLOAT;
		t->f = strtod(buf, &end);
	} else {
		t->kind = TINT;
		t->i = strtoll(buf, &end, 10);
	}
	if (errno == ERANGE && !isfloat)
		err(p, t, "integer out of range");
	if (end == buf)
		err(p, t, "malformed number");
	p->p += end - buf;
	free(buf);
}

static void
next(P *p)
{
	Tok *t = &p->t;

	for (;;) {
		while (p->p < p->end && (*p->p == ' ' || *p->p == '\t' || *p->p == '\r'))
			p->p++;
		if (p->p < p->end && *p->p == '#') {
			while (p->p < p->end && *p->p != '\n')
				p->p++;
			continue;
		}
		break;
	}
	memset(t, 0, sizeof *t);
	t->p = p->p;
	t->line = p->line;
	t->col = (int)(p->p - p->linestart) + 1;
	if (p->failed || p->p >= p->end) {
		t->kind = TEOF;
		return;
	}
	char c = *p->p;
	if (c == '\n') {
		p->p++;
		p->line++;
		p->linestart = p->p;
		t->kind = TNL;
	} else if (c == '%' || c == '$' || c == '@') {
		const char *s = ++p->p;
		while (p->p < p->end && namechar((unsigned char)*p->p))
			p->p++;
		if (p->p == s) {
			err(p, t, "expected a name after '%c'", c);
			t->kind = TEOF;
			return;
		}
		t->kind = c == '%' ? TLOCAL : c == '$' ? TWEIGHT : TGLOBAL;
		t->s = arena_strndup(p->m->arena, s, (size_t)(p->p - s));
	} else if (c == '"') {
		lex_string(p, t);
	} else if (isdigit((unsigned char)c) ||
		   (c == '-' && p->p + 1 < p->end &&
		    (isdigit((unsigned char)p->p[1]) || p->p[1] == 'i'))) {
		lex_number(p, t);
	} else if (c == '-' && p->p + 1 < p->end && p->p[1] == '>') {
		p->p += 2;
		t->kind = TARROW;
	} else if (isalpha((unsigned char)c) || c == '_') {
		const char *s = p->p;
		while (p->p < p->end && namechar((unsigned char)*p->p))
			p->p++;
		t->kind = p->p - s == 1 && *s == '_' ? TUNDER : TIDENT;
		t->s = arena_strndup(p->m->arena, s, (size_t)(p->p - s));
		if (strcmp(t->s, "inf") == 0 || strcmp(t->s, "nan") == 0) {
			t->kind = TFLOAT;
			t->f = t->s[0] == 'i' ? INFINITY : NAN;
		}
	} else {
		static const char punct[] = "()[]{},:=*?";
		const char *q = strchr(punct, c);
		if (!q) {
			err(p, t, "unexpected character '%c'", isprint((unsigned char)c) ? c : '?');
			t->kind = TEOF;
			return;
		}
		p->p++;
		t->kind = TLPAREN + (int)(q - punct);
	}
	t->n = (size_t)(p->p - t->p);
}

static int
expect(P *p, int kind, const char *what)
{
	if (p->t.kind != kind)
		return err(p, &p->t, "expected %s, found %s", what ? what : tokname[kind],
			   tokname[p->t.kind]);
	next(p);
	return 0;
}

static int
accept(P *p, int kind)
{
	if (p->t.kind != kind)
		return 0;
	next(p);
	return 1;
}

/* --- values by name ------------------------------------------------------ */

static size_t
vslot(const VMap *v, const char *key)
{
	size_t i = (size_t)((uintptr_t)key >> 4) & (v->cap - 1);

	while (v->key[i] && v->key[i] != key)
		i = (i + 1) & (v->cap - 1);
	return i;
}

static void
vput(VMap *v, const char *key, Value *val)
{
	if (2 * (v->n + 1) > v->cap) {
		VMap old = *v;
		v->cap = v->cap ? 2 * v->cap : 64;
		v->key = xcalloc(v->cap, sizeof *v->key);
		v->val = xcalloc(v->cap, sizeof *v->val);
		v->n = 0;
		for (size_t i = 0; i < old.cap; i++)
			if (old.key[i])
				vput(v, old.key[i], old.val[i]);
		free(old.key);
		free(old.val);
	}
	size_t i = vslot(v, key);
	if (!v->key[i])
		v->n++;
	v->key[i] = key;
	v->val[i] = val;
}

static Value *
vget(const VMap *v, const char *key)
{
	if (!v->cap)
		return NULL;
	size_t i = vslot(v, key);
	return v->key[i] ? v->val[i] : NULL;
}

static void
vclear(VMap *v)
{
	free(v->key);
	free(v->val);
	memset(v, 0, sizeof *v);
}

/* Define a value named by token t in the current graph. */
static int
define(P *p, const Tok *t, Value *v)
{
	const char *key = ir_intern(p->m, t->s);

	if (vget(&p->vars, key))
		return err(p, t, "value %%%s is defined twice", t->s);
	ir_set_name(p->g, v, t->s);
	if (strcmp(v->name, t->s) != 0)
		return err(p, t, "invalid value name %%%s", t->s);
	vput(&p->vars, key, v);
	return 0;
}

/* --- types and attributes ------------------------------------------------ */

/* dim := term {'*' term}; term := INT | IDENT | '?' */
static int
parse_dim(P *p, Dim *out)
{
	Dim d = 1;

	for (;;) {
		Tok t = p->t;
		Dim x;

		if (t.kind == TINT && t.i >= 0)
			x = t.i;
		else if (t.kind == TIDENT)
			x = ir_dim_sym(p->m, t.s);
		else if (t.kind == TQUEST)
			x = ir_dim_unknown(p->m);
		else
			return err(p, &t, "expected a dimension, found %s", tokname[t.kind]);
		next(p);
		d = ir_dim_mul(p->m, d, x);
		if (!accept(p, TSTAR))
			break;
	}
	*out = d;
	return 0;
}

static int
parse_type(P *p, Type *ty)
{
	Tok t = p->t;

	memset(ty, 0, sizeof *ty);
	if (t.kind != TIDENT || dtype_parse(t.s, strlen(t.s), &ty->dt) != 0)
		return err(p, &t, "expected a type like f32[T,64], found %s",
			   t.kind == TIDENT ? t.s : tokname[t.kind]);
	next(p);
	if (expect(p, TLBRACK, NULL))
		return -1;
	if (!accept(p, TRBRACK)) {
		do {
			if (ty->rank == MAXRANK)
				return err(p, &p->t, "more than %d dimensions", MAXRANK);
			if (parse_dim(p, &ty->dim[ty->rank++]))
				return -1;
		} while (accept(p, TCOMMA));
		if (expect(p, TRBRACK, NULL))
			return -1;
	}
	if (!ir_type_ok(p->m, ty))
		return err(p, &t, "type has more than 2^48 elements");
	return 0;
}

/* A list: ints, floats, or dims (when any element is symbolic). */
static int
parse_list(P *p, Attr *a)
{
	VEC(double) f = {0};
	VEC(Dim) d = {0};
	int isfloat = 0, isdim = 0, hasneg = 0, rc = 0;

	next(p);	/* '[' */
	if (p->t.kind != TRBRACK) {
		do {
			Tok t = p->t;
			if (t.kind == TFLOAT) {
				isfloat = 1;
				vec_push(&f, t.f);
				vec_push(&d, 0);
				next(p);
			} else if (t.kind == TINT && (p->p >= p->end || *p->p != '*')) {
				vec_push(&f, (double)t.i);
				vec_push(&d, t.i);
				hasneg |= t.i < 0;
				next(p);
			} else {
				Dim x;
				if (parse_dim(p, &x)) {
					rc = -1;
					break;
				}
				isdim = 1;
				vec_push(&f, 0);
				vec_push(&d, x);
			}
		} while (accept(p, TCOMMA));
	}
	if (!rc && isfloat && isdim)
		rc = err(p, &p->t, "a list mixes numbers and dimensions");
	if (!rc && isdim && hasneg)
		rc = err(p, &p->t, "negative value in a list of dimensions");
	if (!rc)
		rc = expect(p, TRBRACK, NULL);
	if (!rc) {
		size_t n = d.n ? d.n : 1;
		a->n = (int)d.n;
		if (isfloat) {
			a->kind = A_FLOATS;
			a->u.floats = arena_array(p->m->arena, double, n);
			if (d.n)	/* an empty list has no buffer */
				memcpy(a->u.floats, f.v, sizeof(double) * d.n);
		} else {
			a->kind = isdim ? A_DIMS : A_INTS;
			a->u.ints = arena_array(p->m->arena, int64_t, n);
			if (d.n)
				memcpy(a->u.ints, d.v, sizeof(int64_t) * d.n);
		}
	}
	vec_free(&f);
	vec_free(&d);
	return rc;
}

/* key=value, the key already consumed into *key. */
static int
parse_attr_value(P *p, const char *key, Attr *a)
{
	Tok t = p->t;

	memset(a, 0, sizeof *a);
	a->key = key;
	switch (t.kind) {
	case TINT: a->kind = A_INT; a->u.i = t.i; break;
	case TFLOAT: a->kind = A_FLOAT; a->u.f = t.f; break;
	case TSTRING: a->kind = A_STR; a->u.s = ir_intern(p->m, t.s); break;
	case TIDENT: a->kind = A_STR; a->u.s = ir_intern(p->m, t.s); break;
	case TLBRACK: return parse_list(p, a);
	default: return err(p, &t, "expected a value for '%s', found %s", key, tokname[t.kind]);
	}
	next(p);
	return 0;
}

/* --- statements ---------------------------------------------------------- */

static Value *
operand(P *p)
{
	Tok t = p->t;
	Value *v = NULL;

	if (t.kind == TLOCAL) {
		v = vget(&p->vars, ir_intern(p->m, t.s));
		if (!v)
			err(p, &t, "use of undefined value %%%s", t.s);
	} else if (t.kind == TWEIGHT) {
		Weight *w = ir_find_weight(p->m, t.s);
		if (!w)
			err(p, &t, "use of undeclared weight $%s", t.s);
		else
			v = w->value;
	} else {
		err(p, &t, "expected an operand, found %s", tokname[t.kind]);
	}
	next(p);
	return v;
}

typedef VEC(Value *) ValueVec;

typedef struct {
	ValueVec in;
	VEC(Attr) attr;
} Args;

/* operand-or-attr {',' operand-or-attr}; attributes follow operands */
/* The location clause `loc(...)`, not an attribute named loc. */
static int
at_loc(const P *p)
{
	return p->t.kind == TIDENT && strcmp(p->t.s, "loc") == 0 && p->p < p->end && *p->p == '(';
}

static int
parse_args(P *p, Args *a, int call)
{
	if (p->t.kind == TNL || p->t.kind == TCOLON || p->t.kind == TEOF || at_loc(p))
		return 0;
	if (call && !accept(p, TCOMMA))
		return 0;
	do {
		Tok t = p->t;
		if (t.kind == TIDENT) {
			Attr at;
			next(p);
			if (expect(p, TEQ, "'=' after an attribute name"))
				return -1;
			if (parse_attr_value(p, ir_intern(p->m, t.s), &at))
				return -1;
			for (size_t i = 0; i < a->attr.n; i++)
				if (a->attr.v[i].key == at.key)
					return err(p, &t, "attribute '%s' given twice", t.s);
			vec_push(&a->attr, at);
		} else if (a->attr.n) {
			return err(p, &t, "operands must come before attributes");
		} else if (call) {
			return err(p, &t, "expected an attribute after the call's operands");
		} else if (t.kind == TUNDER) {
			next(p);
			vec_push(&a->in, NULL);
		} else {
			Value *v = operand(p);
			if (!v)
				return -1;
			vec_push(&a->in, v);
		}
	} while (accept(p, TCOMMA));
	return 0;
}

static int
parse_call_operands(P *p, Args *a, Tok *callee)
{
	*callee = p->t;
	if (expect(p, TGLOBAL, "@kernel after 'call'") || expect(p, TLPAREN, NULL))
		return -1;
	if (!accept(p, TRPAREN)) {
		do {
			if (p->t.kind == TUNDER) {
				next(p);
				vec_push(&a->in, NULL);
				continue;
			}
			Value *v = operand(p);
			if (!v)
				return -1;
			vec_push(&a->in, v);
		} while (accept(p, TCOMMA));
		if (expect(p, TRPAREN, NULL))
			return -1;
	}
	return 0;
}

static int
parse_loc(P *p, Loc *l)
{
	Tok t;

	*l = LOC_NONE;
	next(p);	/* 'loc' */
	if (expect(p, TLPAREN, NULL))
		return -1;
	t = p->t;
	if (expect(p, TSTRING, "a file name"))
		return -1;
	l->file = ir_intern(p->m, t.s);
	if (accept(p, TCOLON)) {
		l->line = (int)p->t.i;
		if (expect(p, TINT, NULL) || expect(p, TCOLON, NULL))
			return -1;
		l->col = (int)p->t.i;
		if (expect(p, TINT, NULL))
			return -1;
	} else if (p->t.kind == TINT) {
		l->node = (int)p->t.i;
		next(p);
		l->name = ir_intern(p->m, p->t.s ? p->t.s : "");
		if (expect(p, TSTRING, "the node name"))
			return -1;
		l->optype = ir_intern(p->m, p->t.s ? p->t.s : "");
		if (expect(p, TSTRING, "the op type"))
			return -1;
	}
	return expect(p, TRPAREN, NULL);
}

static void
add_call(P *p, Node *n, const Tok *t)
{
	if (p->ncall == p->capcall) {
		p->capcall = p->capcall ? 2 * p->capcall : 16;
		p->calls = xrealloc(p->calls, sizeof *p->calls * (size_t)p->capcall);
	}
	p->calls[p->ncall++] = (struct Pending){n, xstrdup(t->s),
						loc_line(p->file, t->line, t->col)};
}

/* [results '='] op args [':' types] [loc] NL */
static int
parse_stmt(P *p)
{
	VEC(Tok) res = {0};
	Args a = {0};
	Tok optok, callee = {0};
	Node *n;
	Op op;
	int rc = -1;

	if (p->t.kind == TLOCAL) {
		do {
			if (p->t.kind != TLOCAL) {
				err(p, &p->t, "expected a result name, found %s", tokname[p->t.kind]);
				goto out;
			}
			vec_push(&res, p->t);
			next(p);
		} while (accept(p, TCOMMA));
		if (expect(p, TEQ, NULL))
			goto out;
	}
	optok = p->t;
	if (optok.kind != TIDENT) {
		err(p, &optok, "expected an op name, found %s", tokname[optok.kind]);
		goto out;
	}
	if (ir_find_op(optok.s, strlen(optok.s), &op) != 0) {
		err(p, &optok, "unknown op '%s'", optok.s);
		goto out;
	}
	next(p);
	if (op == OP_CALL && parse_call_operands(p, &a, &callee))
		goto out;
	if (parse_args(p, &a, op == OP_CALL))
		goto out;
	if (p->g->nnode >= IR_MAX_NODES) {
		err(p, &optok, "more than %d statements in one graph", IR_MAX_NODES);
		goto out;
	}
	n = ir_new_node(p->g, op, a.in.v, (int)a.in.n, (int)res.n);
	n->loc = loc_line(p->file, optok.line, optok.col);
	for (size_t i = 0; i < a.attr.n; i++)
		ir_attr_set(p->m, &n->attr, &n->nattr, a.attr.v[i]);
	if (res.n) {
		if (expect(p, TCOLON, "':' and the result types"))
			goto out;
		for (size_t i = 0; i < res.n; i++) {
			if (i && expect(p, TCOMMA, "a type for every result"))
				goto out;
			if (parse_type(p, &n->out[i]->type))
				goto out;
		}
	}
	if (at_loc(p) && parse_loc(p, &n->loc))
		goto out;
	if (p->t.kind != TNL && p->t.kind != TEOF) {
		err(p, &p->t, "unexpected %s at the end of the statement", tokname[p->t.kind]);
		goto out;
	}
	for (size_t i = 0; i < res.n; i++)
		if (define(p, &res.v[i], n->out[i]))
			goto out;
	if (op == OP_CALL)
		add_call(p, n, &callee);
	ir_insert(p->g, NULL, n);
	rc = 0;
out:
	vec_free(&res);
	vec_free(&a.in);
	vec_free(&a.attr);
	return rc;
}

static int
parse_ret(P *p, ValueVec *rets)
{
	next(p);	/* 'ret' */
	if (p->t.kind != TNL) {
		do {
			Value *v = operand(p);
			if (!v)
				return -1;
			vec_push(rets, v);
		} while (accept(p, TCOMMA));
	}
	return expect(p, TNL, "end of line after ret");
}

/* '(' [%name ':' type {','}] ')' */
static int
parse_params(P *p, Graph *g)
{
	if (expect(p, TLPAREN, NULL))
		return -1;
	if (accept(p, TRPAREN))
		return 0;
	do {
		Tok t = p->t;
		Type ty;
		Value *v;

		if (expect(p, TLOCAL, "a parameter %name") || expect(p, TCOLON, NULL) ||
		    parse_type(p, &ty))
			return -1;
		v = ir_add_param(g, NULL, ty);
		if (define(p, &t, v))
			return -1;
	} while (accept(p, TCOMMA));
	return expect(p, TRPAREN, NULL);
}

typedef struct {
	VEC(const char *) name;
	VEC(Type) type;
	VEC(Tok) tok;
} Sig;

/* '->' '(' [name ':' type {','}] ')' */
static int
parse_sig(P *p, Sig *s)
{
	if (expect(p, TARROW, "'->' and the result types") || expect(p, TLPAREN, NULL))
		return -1;
	if (accept(p, TRPAREN))
		return 0;
	do {
		Tok t = p->t;
		Type ty;
		if (t.kind != TIDENT && t.kind != TSTRING)
			return err(p, &t, "expected a result name, found %s", tokname[t.kind]);
		next(p);
		if (expect(p, TCOLON, NULL) || parse_type(p, &ty))
			return -1;
		vec_push(&s->name, ir_intern(p->m, t.s));
		vec_push(&s->type, ty);
		vec_push(&s->tok, t);
	} while (accept(p, TCOMMA));
	return expect(p, TRPAREN, NULL);
}

/* Equal types, where a "?" matches any dim (each "?" is its own atom). */
static int
same_type(const Module *m, const Type *a, const Type *b)
{
	if (a->dt != b->dt || a->rank != b->rank)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->dim[i] != b->dim[i] && !ir_dim_has_unknown(m, a->dim[i]) &&
		    !ir_dim_has_unknown(m, b->dim[i]))
			return 0;
	return 1;
}

static int
parse_func(P *p)
{
	Tok kw = p->t, name;
	Sig sig = {0};
	ValueVec rets = {0};
	Graph *g;
	int rc = -1, sawret = 0;

	next(p);
	name = p->t;
	if (expect(p, TGLOBAL, "@name"))
		return -1;
	if (ir_find_graph(p->m, name.s))
		return err(p, &name, "@%s is defined twice", name.s);
	g = ir_new_graph(p->m, name.s, strcmp(kw.s, "kernel") == 0 ? G_KERNEL : G_GRAPH);
	g->loc = loc_line(p->file, kw.line, kw.col);
	p->g = g;
	if (parse_params(p, g) || parse_sig(p, &sig))
		goto out;
	while (p->t.kind == TIDENT) {
		Tok k = p->t;
		Attr a;
		next(p);
		if (expect(p, TEQ, NULL) || parse_attr_value(p, ir_intern(p->m, k.s), &a))
			goto out;
		ir_attr_set(p->m, &g->attr, &g->nattr, a);
	}
	if (expect(p, TLBRACE, "'{'") || expect(p, TNL, "end of line after '{'"))
		goto out;
	for (;;) {
		if (p->t.kind == TNL) {
			next(p);
			continue;
		}
		if (p->t.kind == TRBRACE || p->t.kind == TEOF)
			break;
		if (sawret) {
			err(p, &p->t, "statement after ret");
			goto out;
		}
		if (p->t.kind == TIDENT && strcmp(p->t.s, "ret") == 0) {
			if (parse_ret(p, &rets))
				goto out;
			sawret = 1;
			continue;
		}
		if (parse_stmt(p))
			goto out;
		if (p->t.kind != TEOF && expect(p, TNL, NULL))
			goto out;
	}
	if (expect(p, TRBRACE, "'}'"))
		goto out;
	if (!sawret) {
		err(p, &kw, "@%s has no ret", name.s);
		goto out;
	}
	if (rets.n != sig.name.n) {
		err(p, &kw, "@%s returns %zu values but its signature lists %zu",
		    name.s, rets.n, sig.name.n);
		goto out;
	}
	for (size_t i = 0; i < rets.n; i++)
		if (!same_type(p->m, &rets.v[i]->type, &sig.type.v[i])) {
			err(p, &sig.tok.v[i], "result '%s' is declared with another type than %%%s has",
			    sig.name.v[i], rets.v[i]->name);
			goto out;
		}
	ir_set_results(g, rets.v, sig.name.v, (int)rets.n);
	rc = 0;
out:
	vec_free(&sig.name);
	vec_free(&sig.type);
	vec_free(&sig.tok);
	vec_free(&rets);
	vclear(&p->vars);
	return rc;
}

/* weight $name ':' type {key=value} NL */
static int
parse_weight(P *p)
{
	Tok name;
	Type ty;
	Weight *w;

	next(p);
	name = p->t;
	if (expect(p, TWEIGHT, "$name") || expect(p, TCOLON, NULL) || parse_type(p, &ty))
		return -1;
	if (ir_find_weight(p->m, name.s))
		return err(p, &name, "weight $%s is declared twice", name.s);
	w = ir_add_weight(p->m, name.s, ty);
	if (strcmp(w->value->name, name.s) != 0)
		return err(p, &name, "invalid weight name $%s", name.s);
	w->source = p->file;
	while (p->t.kind == TIDENT) {
		Tok k = p->t;
		Attr a;
		next(p);
		if (expect(p, TEQ, NULL) || parse_attr_value(p, k.s, &a))
			return -1;
		if (strcmp(k.s, "seed") == 0 && a.kind == A_INT && a.u.i >= 0)
			w->seed = (uint64_t)a.u.i;
		else if (strcmp(k.s, "mean") == 0 && (a.kind == A_FLOAT || a.kind == A_INT))
			w->mean = a.kind == A_FLOAT ? a.u.f : (double)a.u.i;
		else if (strcmp(k.s, "scale") == 0 && (a.kind == A_FLOAT || a.kind == A_INT) &&
			 (a.kind == A_FLOAT ? a.u.f : (double)a.u.i) >= 0)
			w->scale = a.kind == A_FLOAT ? a.u.f : (double)a.u.i;
		else if (strcmp(k.s, "row_block") == 0 && a.kind == A_INT && a.u.i >= 0 && a.u.i <= INT32_MAX)
			w->row_block = a.u.i;
		else if (strcmp(k.s, "col_repeat") == 0 && a.kind == A_INT && a.u.i >= 1 && ty.rank >= 1 &&
			 ir_dim_is_static(ty.dim[ty.rank - 1]) && ty.dim[ty.rank - 1] % a.u.i == 0)
			w->col_repeat = a.u.i;
		else
			return err(p, &k, "bad weight attribute '%s' (seed, mean, scale >= 0, row_block >= 0, "
				   "col_repeat dividing the last dim)", k.s);
	}
	return p->t.kind == TEOF ? 0 : expect(p, TNL, NULL);
}

static int
resolve_calls(P *p)
{
	for (int i = 0; i < p->ncall; i++) {
		Graph *k = ir_find_graph(p->m, p->calls[i].name);
		if (!k) {
			p->failed = 1;
			return diag_error(p->d, p->calls[i].loc, "call of undefined @%s",
					  p->calls[i].name);
		}
		p->calls[i].node->callee = k;
	}
	return 0;
}

Module *
ir_parse(const char *file, const char *text, size_t len, Diag *d)
{
	P p;

	memset(&p, 0, sizeof p);
	p.file = file;
	p.src = p.p = p.linestart = text;
	p.end = text + len;
	p.line = 1;
	p.d = d;
	p.m = ir_new_module();
	p.m->file = ir_intern(p.m, file);
	p.file = p.m->file;
	arena_set_limit(p.m->arena, IR_MAX_ARENA_BYTES, p.file);
	if (memchr(text, 0, len)) {
		const char *z = memchr(text, 0, len);
		int line = 1;
		for (const char *s = text; s < z; s++)
			line += *s == '\n';
		diag_error(d, loc_line(file, line, 1), "NUL byte in the text");
		ir_free_module(p.m);
		return NULL;
	}
	next(&p);
	while (!p.failed && p.t.kind != TEOF) {
		if (p.t.kind == TNL) {
			next(&p);
		} else if (p.t.kind == TIDENT && strcmp(p.t.s, "weight") == 0) {
			parse_weight(&p);
		} else if (p.t.kind == TIDENT &&
			   (strcmp(p.t.s, "graph") == 0 || strcmp(p.t.s, "kernel") == 0)) {
			if (parse_func(&p) == 0 && p.t.kind != TEOF)
				expect(&p, TNL, NULL);
		} else {
			err(&p, &p.t, "expected 'weight', 'graph' or 'kernel', found %s",
			    p.t.kind == TIDENT ? p.t.s : tokname[p.t.kind]);
		}
	}
	if (!p.failed)
		resolve_calls(&p);
	for (int i = 0; i < p.ncall; i++)
		free(p.calls[i].name);
	free(p.calls);
	vclear(&p.vars);
	if (p.failed) {
		ir_free_module(p.m);
		return NULL;
	}
	return p.m;
}

Module *
ir_parse_file(const char *path, Diag *d)
{
	size_t len;
	char *text = file_read_max(path, IR_MAX_FILE, &len, d);
	Module *m;

	if (!text)
		return NULL;
	m = ir_parse(path, text, len, d);
	free(text);
	return m;
}
