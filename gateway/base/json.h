/* A small JSON writer and parser for the control socket: one JSON object
 * per line each way.  The writer escapes every string (control characters
 * as \u00XX, so a reply never contains a raw newline) and places the
 * commas itself; the parser builds a tree, which the daemon uses for
 * requests and the CLI for replies.  Numbers keep their literal text, so
 * 64-bit counters print exactly even though the tree also holds a double. */
#ifndef GW_JSON_H
#define GW_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 32

struct json_buf {
	char *p; /* NUL-terminated once anything was written */
	size_t len, cap;
	bool nomem;
	bool misuse; /* unbalanced begin/end, a value where a key belongs... */
	unsigned depth;
	/* per open container: elements written so far, and whether it is an
	 * object (then members alternate key, value) */
	struct {
		unsigned n;
		bool obj, want_value;
	} st[JSON_MAX_DEPTH];
};

void json_buf_init(struct json_buf *j);
void json_buf_free(struct json_buf *j);
/* Whether the text is a complete, balanced document (and memory held). */
bool json_buf_ok(const struct json_buf *j);

void json_obj_begin(struct json_buf *j);
void json_obj_end(struct json_buf *j);
void json_arr_begin(struct json_buf *j);
void json_arr_end(struct json_buf *j);
void json_key(struct json_buf *j, const char *key);
void json_str(struct json_buf *j, const char *s); /* NULL writes null */
void json_u64(struct json_buf *j, uint64_t v);
void json_i64(struct json_buf *j, int64_t v);
void json_double(struct json_buf *j, double v); /* NaN/inf write null */
void json_bool(struct json_buf *j, bool v);
void json_null(struct json_buf *j);

/* key + value in one call, for the common case. */
void json_kv_str(struct json_buf *j, const char *key, const char *s);
void json_kv_u64(struct json_buf *j, const char *key, uint64_t v);
void json_kv_i64(struct json_buf *j, const char *key, int64_t v);
void json_kv_double(struct json_buf *j, const char *key, double v);
void json_kv_bool(struct json_buf *j, const char *key, bool v);

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

struct json_val {
	enum json_type type;
	bool b;
	double num;
	char *str; /* STR: the decoded string; NUM: the literal */
	char *key; /* a member of an object: its name */
	struct json_val *kids; /* ARR / OBJ */
	size_t nr_kids;
};

/* Parses exactly one JSON value (surrounding whitespace allowed) of len
 * bytes.  0 with *out set (free with json_val_free), or -EINVAL with a
 * reason in err ("offset 12: expected ':'"), or -ENOMEM. */
int json_parse(const char *text, size_t len, struct json_val **out, char *err, size_t errlen);
void json_val_free(struct json_val *v);

/* Members of an object by name (NULL when absent or v is no object). */
const struct json_val *json_get(const struct json_val *v, const char *key);
/* The string member, or NULL when absent or of another type. */
const char *json_get_str(const struct json_val *v, const char *key);
/* The text of a scalar member as it should be shown: the string, the
 * number's literal, true/false, or dflt. */
const char *json_get_text(const struct json_val *v, const char *key, const char *dflt);

#endif
