/*
 * expr.c — size expressions of the manifest: n, T, a*T, T+b, a*T+b and
 * cdiv(E,c).  One canonical spelling per value, so printing what was parsed
 * gives the same text: "1*T", "T+0", "0*T" and leading zeros are refused.
 * Evaluation checks every step for 64-bit overflow.
 */
#include <string.h>

#include "bundle.h"

int
bundle_expr_eval(const MExpr *e, int64_t T, int64_t *out)
{
	int64_t v;

	if (e->a < 0 || e->b < 0 || e->div < 0 || T < 0)
		return -1;
	if (__builtin_mul_overflow(e->a, T, &v))
		return -1;
	if (__builtin_add_overflow(v, e->b, &v))
		return -1;
	if (e->div > 0)
		v = v / e->div + (v % e->div != 0);
	*out = v;
	return 0;
}

int
bundle_expr_has_t(const MExpr *e)
{
	return e->a != 0;
}

static int
print_linear(char *buf, size_t n, const MExpr *e)
{
	long long a = e->a, b = e->b;

	if (a == 0)
		return snprintf(buf, n, "%lld", b);
	if (a == 1)
		return b ? snprintf(buf, n, "T+%lld", b) : snprintf(buf, n, "T");
	return b ? snprintf(buf, n, "%lld*T+%lld", a, b)
		 : snprintf(buf, n, "%lld*T", a);
}

int
bundle_expr_print(char *buf, size_t n, const MExpr *e)
{
	char in[64];

	if (e->div <= 0)
		return print_linear(buf, n, e);
	print_linear(in, sizeof in, e);
	return snprintf(buf, n, "cdiv(%s,%lld)", in, (long long)e->div);
}

const char *
bundle_parse_uint(const char *s, size_t n, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;

	if (n == 0)
		return "expected a number";
	if (n > 1 && s[0] == '0')
		return "number with a leading zero";
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return "expected a number";
		if (__builtin_mul_overflow(x, 10, &x) ||
		    __builtin_add_overflow(x, (uint64_t)(s[i] - '0'), &x) ||
		    x > max)
			return "number out of range";
	}
	*v = x;
	return NULL;
}

static const char *
number(const char *s, size_t n, int64_t *v)
{
	uint64_t x;
	const char *why = bundle_parse_uint(s, n, INT64_MAX, &x);

	if (!why)
		*v = (int64_t)x;
	return why;
}

static const char *
linear(const char *s, size_t n, MExpr *e)
{
	const char *plus = memchr(s, '+', n), *why;
	size_t m = plus ? (size_t)(plus - s) : n;

	e->a = e->b = e->div = 0;
	if (m == 1 && s[0] == 'T') {
		e->a = 1;
	} else if (m > 2 && s[m - 2] == '*' && s[m - 1] == 'T') {
		if ((why = number(s, m - 2, &e->a)))
			return why;
		if (e->a == 0)
			return "'0*T' is not canonical: write 0";
		if (e->a == 1)
			return "'1*T' is not canonical: write T";
	} else if (!plus) {
		return number(s, n, &e->b);
	} else {
		return "expected T or a*T before '+'";
	}
	if (!plus)
		return NULL;
	if ((why = number(plus + 1, n - m - 1, &e->b)))
		return why;
	return e->b == 0 ? "'+0' is not canonical: leave it out" : NULL;
}

const char *
bundle_expr_parse(const char *s, size_t n, MExpr *e)
{
	const char *comma, *why;
	int64_t c;

	if (n < 6 || memcmp(s, "cdiv(", 5) != 0)
		return linear(s, n, e);
	if (s[n - 1] != ')')
		return "cdiv( without a closing ')'";
	comma = memchr(s + 5, ',', n - 6);
	if (!comma)
		return "cdiv needs two arguments: cdiv(E,c)";
	if ((why = linear(s + 5, (size_t)(comma - s - 5), e)))
		return why;
	if ((why = number(comma + 1, (size_t)(s + n - 1 - comma - 1), &c)))
		return why;
	if (c == 0)
		return "cdiv by zero";
	e->div = c;
	return NULL;
}
