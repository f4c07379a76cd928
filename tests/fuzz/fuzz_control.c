/* libFuzzer harness for the control socket's framing and the JSON parser
 * behind it.  The input is a byte stream a client sends, cut into recv
 * chunks of sizes the input chooses, with a line limit small enough to
 * be reached.  What the code claims, checked on every input:
 * - the lines taken (and the over-long refusals) are the same whatever the
 *   chunking: they match a model that splits the whole stream at once;
 * - a recv is never armed with no room (a 0-byte recv reads as EOF);
 * - a request is accepted only as an object with a string "cmd", and a
 *   line with a NUL byte is refused naming it;
 * - whatever the parser accepts, the writer prints back as one line with
 *   no control character, which parses to the same tree. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/control.h"
#include "gateway/base/json.h"
#include "gateway/base/log.h"

#include "tests/fuzz/fuzz_check.h"

static void write_val(struct json_buf *j, const struct json_val *v)
{
	switch (v->type) {
	case JSON_NULL: json_null(j); break;
	case JSON_BOOL: json_bool(j, v->b); break;
	case JSON_NUM: json_double(j, v->num); break;
	case JSON_STR: json_str(j, v->str); break;
	case JSON_ARR:
		json_arr_begin(j);
		for (size_t i = 0; i < v->nr_kids; i++)
			write_val(j, &v->kids[i]);
		json_arr_end(j);
		break;
	case JSON_OBJ:
		json_obj_begin(j);
		for (size_t i = 0; i < v->nr_kids; i++) {
			json_key(j, v->kids[i].key);
			write_val(j, &v->kids[i]);
		}
		json_obj_end(j);
		break;
	}
}

static bool same(const struct json_val *a, const struct json_val *b)
{
	if (a->type == JSON_NUM && !isfinite(a->num))
		return b->type == JSON_NULL; /* the writer prints null for it */
	if (a->type != b->type || a->nr_kids != b->nr_kids)
		return false;
	if ((a->key || b->key) && (!a->key || !b->key || strcmp(a->key, b->key)))
		return false;
	switch (a->type) {
	case JSON_BOOL: return a->b == b->b;
	case JSON_NUM: return a->num == b->num;
	case JSON_STR: return !strcmp(a->str, b->str);
	default: break;
	}
	for (size_t i = 0; i < a->nr_kids; i++)
		if (!same(&a->kids[i], &b->kids[i]))
			return false;
	return true;
}

static void check_json(const char *text, size_t len)
{
	struct json_val *v = NULL, *w = NULL;
	struct json_buf j;
	char err[128];

	if (json_parse(text, len, &v, err, sizeof(err)) < 0) {
		check(!v && !strncmp(err, "offset ", 7));
		return;
	}
	check(!memchr(text, 0, len));
	json_buf_init(&j);
	write_val(&j, v);
	check(json_buf_ok(&j));
	for (size_t i = 0; i < j.len; i++)
		check((unsigned char)j.p[i] >= 0x20 && j.p[i] != 0x7f);
	check(json_parse(j.p, j.len, &w, err, sizeof(err)) == 0);
	check(same(v, w));
	json_buf_free(&j);
	json_val_free(v);
	json_val_free(w);
}

enum { OUT_LINE, OUT_TOO_LONG };

struct outcome {
	int kind;
	size_t off, len; /* OUT_LINE: where the line is in the stream */
};

/* The whole stream split at once: lines under cap bytes are taken, longer
 * ones refused once each; a last line without newline counts. */
static size_t model(const uint8_t *s, size_t n, size_t cap, struct outcome *o)
{
	size_t pos = 0, k = 0;

	while (pos < n) {
		const uint8_t *nl = memchr(s + pos, '\n', n - pos);
		size_t l = nl ? (size_t)(nl - (s + pos)) : n - pos;
		if (l >= cap)
			o[k++] = (struct outcome){ OUT_TOO_LONG, 0, 0 };
		else
			o[k++] = (struct outcome){ OUT_LINE, pos, l };
		pos += l + 1;
	}
	return k;
}

static void check_request(const char *line, size_t len)
{
	struct json_val *req = (void *)1;
	char err[256];
	int rc = control_parse_request(line, len, &req, err, sizeof(err));

	if (memchr(line, 0, len - (len && line[len - 1] == '\r'))) {
		check(rc == -EINVAL && !req && strstr(err, "NUL byte"));
		return;
	}
	if (rc == 0) {
		check(req && req->type == JSON_OBJ && json_get_str(req, "cmd"));
		json_val_free(req);
	} else {
		check(rc == -EINVAL && !req && err[0]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct outcome want[1 << 16];
	struct control_lines lb;
	uint32_t rnd;
	size_t nwant, got = 0, pos;
	bool eof = false;

	log_set_level(LOG_LVL_ERR);
	if (size < 5 || size > sizeof(want) / sizeof(want[0]))
		return 0;
	/* byte 0: the line limit; bytes 1-4: the chunking */
	lb.cap = data[0] == 0xff ? CONTROL_LINE_MAX : 1 + data[0] % 96u;
	memcpy(&rnd, data + 1, 4);
	data += 5;
	size -= 5;
	check_json((const char *)data, size);
	lb.buf = malloc(lb.cap + 1);
	lb.len = 0;
	lb.skipping = false;
	check(lb.buf);
	nwant = model(data, size, lb.cap, want);
	pos = 0;
	for (;;) {
		char *line;
		size_t len;
		enum control_take t = control_lines_take(&lb, &line, &len);

		check(lb.len <= lb.cap);
		if (t == CONTROL_TAKE_MORE) {
			if (eof)
				break;
			if (pos == size) {
				control_lines_eof(&lb);
				eof = true;
				continue;
			}
			size_t room = lb.cap - lb.len;
			check(room > 0);
			rnd = rnd * 1103515245u + 12345u;
			size_t k = 1 + (rnd >> 8) % room;
			if (k > size - pos)
				k = size - pos;
			memcpy(lb.buf + lb.len, data + pos, k);
			lb.len += k;
			pos += k;
			continue;
		}
		check(t != CONTROL_TAKE_NOMEM);
		check(got < nwant);
		if (t == CONTROL_TAKE_TOO_LONG) {
			check(want[got].kind == OUT_TOO_LONG);
		} else {
			check(want[got].kind == OUT_LINE && want[got].len == len);
			check(!memcmp(line, data + want[got].off, len) && line[len] == 0);
			check_request(line, len);
			free(line);
		}
		got++;
	}
	check(got == nwant);
	free(lb.buf);
	return 0;
}
