#include "gateway/base/json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the writer ---- */

void json_buf_init(struct json_buf *j)
{
	memset(j, 0, sizeof(*j));
}

void json_buf_free(struct json_buf *j)
{
	free(j->p);
	json_buf_init(j);
}

bool json_buf_ok(const struct json_buf *j)
{
	return !j->nomem && !j->misuse && j->depth == 0 && j->len;
}

static bool reserve(struct json_buf *j, size_t more)
{
	if (j->nomem)
		return false;
	if (j->len + more + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 1024;
		char *p;

		while (cap < j->len + more + 1)
			cap *= 2;
		p = realloc(j->p, cap);
		if (!p) {
			j->nomem = true;
			return false;
		}
		j->p = p;
		j->cap = cap;
	}
	return true;
}

static void put(struct json_buf *j, const char *s, size_t n)
{
	if (!reserve(j, n))
		return;
	memcpy(j->p + j->len, s, n);
	j->len += n;
	j->p[j->len] = 0;
}

static void __attribute__((format(printf, 2, 3))) putf(struct json_buf *j, const char *fmt, ...)
{
	char buf[64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(buf))
		put(j, buf, (size_t)n);
}

/* Before any value: the comma, and the check that a value may go here. */
static bool before_value(struct json_buf *j)
{
	if (j->depth == 0) {
		if (j->len) {
			j->misuse = true; /* a second top-level value */
			return false;
		}
		return true;
	}
	typeof(j->st[0]) *s = &j->st[j->depth - 1];
	if (s->obj) {
		if (!s->want_value) {
			j->misuse = true; /* a value without its key */
			return false;
		}
		s->want_value = false;
		return true;
	}
	if (s->n++)
		put(j, ",", 1);
	return true;
}

static void put_escaped(struct json_buf *j, const char *s)
{
	put(j, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': put(j, "\\\"", 2); break;
		case '\\': put(j, "\\\\", 2); break;
		case '\n': put(j, "\\n", 2); break;
		case '\r': put(j, "\\r", 2); break;
		case '\t': put(j, "\\t", 2); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				putf(j, "\\u%04x", *p);
			else
				put(j, (const char *)p, 1);
		}
	}
	put(j, "\"", 1);
}

static void open_(struct json_buf *j, bool obj)
{
	if (!before_value(j))
		return;
	if (j->depth >= JSON_MAX_DEPTH) {
		j->misuse = true;
		return;
	}
	j->st[j->depth].n = 0;
	j->st[j->depth].obj = obj;
	j->st[j->depth].want_value = false;
	j->depth++;
	put(j, obj ? "{" : "[", 1);
}

static void close_(struct json_buf *j, bool obj)
{
	if (!j->depth || j->st[j->depth - 1].obj != obj || j->st[j->depth - 1].want_value) {
		j->misuse = true;
		return;
	}
	j->depth--;
	put(j, obj ? "}" : "]", 1);
}

void json_obj_begin(struct json_buf *j) { open_(j, true); }
void json_obj_end(struct json_buf *j) { close_(j, true); }
void json_arr_begin(struct json_buf *j) { open_(j, false); }
void json_arr_end(struct json_buf *j) { close_(j, false); }

void json_key(struct json_buf *j, const char *key)
{
	if (!j->depth || !j->st[j->depth - 1].obj || j->st[j->depth - 1].want_value || !key) {
		j->misuse = true;
		return;
	}
	typeof(j->st[0]) *s = &j->st[j->depth - 1];
	if (s->n++)
		put(j, ",", 1);
	put_escaped(j, key);
	put(j, ":", 1);
	s->want_value = true;
}

void json_str(struct json_buf *j, const char *s)
{
	if (!s)
		return json_null(j);
	if (before_value(j))
		put_escaped(j, s);
}

void json_u64(struct json_buf *j, uint64_t v)
{
	if (before_value(j))
		putf(j, "%" PRIu64, v);
}

void json_i64(struct json_buf *j, int64_t v)
{
	if (before_value(j))
		putf(j, "%" PRId64, v);
}

void json_double(struct json_buf *j, double v)
{
	if (!isfinite(v))
		return json_null(j);
	if (!before_value(j))
		return;
	/* The shortest text that reads back as v: 0.049, not 0.049000000000000002. */
	char buf[32];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	put(j, buf, strlen(buf));
}

void json_bool(struct json_buf *j, bool v)
{
	if (before_value(j))
		put(j, v ? "true" : "false", v ? 4 : 5);
}

void json_null(struct json_buf *j)
{
	if (before_value(j))
		put(j, "null", 4);
}

void json_kv_str(struct json_buf *j, const char *k, const char *s) { json_key(j, k); json_str(j, s); }
void json_kv_u64(struct json_buf *j, const char *k, uint64_t v) { json_key(j, k); json_u64(j, v); }
void json_kv_i64(struct json_buf *j, const char *k, int64_t v) { json_key(j, k); json_i64(j, v); }
void json_kv_double(struct json_buf *j, const char *k, double v) { json_key(j, k); json_double(j, v); }
void json_kv_bool(struct json_buf *j, const char *k, bool v) { json_key(j, k); json_bool(j, v); }

/* ---- the parser ---- */

struct parser {
	const char *s;
	size_t len, pos;
	char *err;
	size_t errlen;
	int rc;
};

static int fail(struct parser *p, const char *why)
{
	if (!p->rc) {
		snprintf(p->err, p->errlen, "offset %zu: %s", p->pos, why);
		p->rc = -EINVAL;
	}
	return p->rc;
}

static void skip_ws(struct parser *p)
{
	while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos])
		p->pos++;
}

static int hex4(struct parser *p, unsigned *out)
{
	unsigned v = 0;

	if (p->len - p->pos < 4)
		return fail(p, "short \\u escape");
	for (int i = 0; i < 4; i++) {
		char c = p->s[p->pos++];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return fail(p, "bad \\u escape");
	}
	*out = v;
	return 0;
}

static size_t utf8_put(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* At the opening quote.  The decoded string is never longer than its
 * escaped form, so one allocation of that size is enough. */
static int parse_string(struct parser *p, char **out)
{
	size_t start = ++p->pos, n = 0;
	char *o;

	while (p->pos < p->len && p->s[p->pos] != '"') {
		if (p->s[p->pos] == '\\')
			p->pos++;
		p->pos++;
	}
	if (p->pos >= p->len)
		return fail(p, "unterminated string");
	o = malloc(p->pos - start + 1);
	if (!o)
		return p->rc = -ENOMEM;
	p->pos = start;
	while (p->s[p->pos] != '"') {
		unsigned char c = (unsigned char)p->s[p->pos++];
		if (c < 0x20) {
			free(o);
			return fail(p, "control character in a string");
		}
		if (c != '\\') {
			o[n++] = (char)c;
			continue;
		}
		c = (unsigned char)p->s[p->pos++];
		switch (c) {
		case '"': o[n++] = '"'; break;
		case '\\': o[n++] = '\\'; break;
		case '/': o[n++] = '/'; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'n': o[n++] = '\n'; break;
		case 'r': o[n++] = '\r'; break;
		case 't': o[n++] = '\t'; break;
		case 'u': {
			unsigned cp, lo;
			if (hex4(p, &cp) < 0)
				break;
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (p->len - p->pos < 6 || p->s[p->pos] != '\\' ||
				    p->s[p->pos + 1] != 'u') {
					fail(p, "lone surrogate");
					break;
				}
				p->pos += 2;
				if (hex4(p, &lo) < 0)
					break;
				if (lo < 0xdc00 || lo > 0xdfff) {
					fail(p, "bad surrogate pair");
					break;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				fail(p, "lone surrogate");
				break;
			}
			if (cp == 0) {
				fail(p, "NUL in a string");
				break;
			}
			n += utf8_put(o + n, cp);
			break;
		}
		default:
			fail(p, "bad escape");
		}
		if (p->rc) {
			free(o);
			return p->rc;
		}
	}
	p->pos++;
	o[n] = 0;
	*out = o;
	return 0;
}

static int parse_number(struct parser *p, struct json_val *v)
{
	size_t start = p->pos;
	const char *s = p->s;

	if (p->pos < p->len && s[p->pos] == '-')
		p->pos++;
	if (p->pos < p->len && s[p->pos] == '0')
		p->pos++;
	else if (p->pos < p->len && s[p->pos] >= '1' && s[p->pos] <= '9')
		while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
			p->pos++;
	else
		return fail(p, "bad number");
	if (p->pos < p->len && s[p->pos] == '.') {
		size_t d = ++p->pos;
		while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
			p->pos++;
		if (p->pos == d)
			return fail(p, "bad fraction");
	}
	if (p->pos < p->len && (s[p->pos] == 'e' || s[p->pos] == 'E')) {
		p->pos++;
		if (p->pos < p->len && (s[p->pos] == '+' || s[p->pos] == '-'))
			p->pos++;
		size_t d = p->pos;
		while (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
			p->pos++;
		if (p->pos == d)
			return fail(p, "bad exponent");
	}
	v->type = JSON_NUM;
	v->str = strndup(s + start, p->pos - start);
	if (!v->str)
		return p->rc = -ENOMEM;
	v->num = strtod(v->str, NULL);
	return 0;
}

static bool literal(struct parser *p, const char *word)
{
	size_t n = strlen(word);

	if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n))
		return false;
	p->pos += n;
	return true;
}

static int parse_value(struct parser *p, struct json_val *v, unsigned depth);

static struct json_val *add_kid(struct parser *p, struct json_val *v, size_t *cap)
{
	if (v->nr_kids == *cap) {
		size_t nc = *cap ? *cap * 2 : 4;
		struct json_val *k = realloc(v->kids, nc * sizeof(*k));
		if (!k) {
			p->rc = -ENOMEM;
			return NULL;
		}
		v->kids = k;
		*cap = nc;
	}
	struct json_val *k = &v->kids[v->nr_kids++];
	memset(k, 0, sizeof(*k));
	return k;
}

static int parse_container(struct parser *p, struct json_val *v, unsigned depth, bool obj)
{
	size_t cap = 0;
	char close = obj ? '}' : ']';

	if (depth >= JSON_MAX_DEPTH)
		return fail(p, "nested too deep");
	v->type = obj ? JSON_OBJ : JSON_ARR;
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->s[p->pos] == close) {
		p->pos++;
		return 0;
	}
	for (;;) {
		struct json_val *k = add_kid(p, v, &cap);
		if (!k)
			return p->rc;
		skip_ws(p);
		if (obj) {
			if (p->pos >= p->len || p->s[p->pos] != '"')
				return fail(p, "expected a member name");
			if (parse_string(p, &k->key) < 0)
				return p->rc;
			skip_ws(p);
			if (p->pos >= p->len || p->s[p->pos] != ':')
				return fail(p, "expected ':'");
			p->pos++;
		}
		if (parse_value(p, k, depth + 1) < 0)
			return p->rc;
		skip_ws(p);
		if (p->pos < p->len && p->s[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->s[p->pos] == close) {
			p->pos++;
			return 0;
		}
		return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static int parse_value(struct parser *p, struct json_val *v, unsigned depth)
{
	skip_ws(p);
	if (p->pos >= p->len)
		return fail(p, "expected a value");
	switch (p->s[p->pos]) {
	case '{': return parse_container(p, v, depth, true);
	case '[': return parse_container(p, v, depth, false);
	case '"':
		v->type = JSON_STR;
		return parse_string(p, &v->str);
	case 't':
	case 'f':
	case 'n':
		if (literal(p, "true")) {
			v->type = JSON_BOOL;
			v->b = true;
		} else if (literal(p, "false")) {
			v->type = JSON_BOOL;
		} else if (literal(p, "null")) {
			v->type = JSON_NULL;
		} else {
			return fail(p, "bad literal");
		}
		return 0;
	default:
		return parse_number(p, v);
	}
}

static void val_release(struct json_val *v)
{
	for (size_t i = 0; i < v->nr_kids; i++)
		val_release(&v->kids[i]);
	free(v->kids);
	free(v->str);
	free(v->key);
}

void json_val_free(struct json_val *v)
{
	if (!v)
		return;
	val_release(v);
	free(v);
}

int json_parse(const char *text, size_t len, struct json_val **out, char *err, size_t errlen)
{
	char dummy[8];
	struct parser p = { .s = text, .len = len, .err = err ? err : dummy,
			    .errlen = err ? errlen : sizeof(dummy) };
	struct json_val *v = calloc(1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	if (memchr(text, 0, len)) {
		p.pos = (size_t)((const char *)memchr(text, 0, len) - text);
		fail(&p, "NUL byte");
	} else if (parse_value(&p, v, 0) == 0) {
		skip_ws(&p);
		if (p.pos != len)
			fail(&p, "text after the value");
	}
	if (p.rc) {
		if (p.rc == -ENOMEM)
			snprintf(p.err, p.errlen, "out of memory");
		json_val_free(v);
		return p.rc;
	}
	*out = v;
	return 0;
}

const struct json_val *json_get(const struct json_val *v, const char *key)
{
	if (!v || v->type != JSON_OBJ)
		return NULL;
	for (size_t i = 0; i < v->nr_kids; i++)
		if (!strcmp(v->kids[i].key, key))
			return &v->kids[i];
	return NULL;
}

const char *json_get_str(const struct json_val *v, const char *key)
{
	const struct json_val *m = json_get(v, key);

	return m && m->type == JSON_STR ? m->str : NULL;
}

const char *json_get_text(const struct json_val *v, const char *key, const char *dflt)
{
	const struct json_val *m = json_get(v, key);

	if (!m)
		return dflt;
	switch (m->type) {
	case JSON_STR:
	case JSON_NUM: return m->str;
	case JSON_BOOL: return m->b ? "true" : "false";
	default: return dflt;
	}
}
