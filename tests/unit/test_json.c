#include "gateway/base/json.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static struct json_val *parse_ok(const char *s)
{
	struct json_val *v = NULL;
	char err[128] = "";
	int ret = json_parse(s, strlen(s), &v, err, sizeof(err));

	ck_assert_msg(ret == 0, "parse '%s': %d %s", s, ret, err);
	return v;
}

static void parse_bad(const char *s, const char *why)
{
	struct json_val *v = NULL;
	char err[128] = "";
	int ret = json_parse(s, strlen(s), &v, err, sizeof(err));

	ck_assert_msg(ret == -EINVAL, "'%s' should fail (%s), got %d", s, why, ret);
	ck_assert_ptr_null(v);
	ck_assert_msg(strstr(err, why), "'%s': error '%s' lacks '%s'", s, err, why);
}

START_TEST(writer_nested)
{
	struct json_buf j;

	json_buf_init(&j);
	json_obj_begin(&j);
	json_kv_str(&j, "cmd", "status");
	json_key(&j, "list");
	json_arr_begin(&j);
	json_u64(&j, 18446744073709551615ull);
	json_i64(&j, -5);
	json_bool(&j, true);
	json_null(&j);
	json_obj_begin(&j);
	json_obj_end(&j);
	json_arr_end(&j);
	json_kv_double(&j, "x", 0.5);
	json_kv_bool(&j, "f", false);
	json_obj_end(&j);
	ck_assert(json_buf_ok(&j));
	ck_assert_str_eq(j.p, "{\"cmd\":\"status\",\"list\":[18446744073709551615,-5,true,null,{}],"
			      "\"x\":0.5,\"f\":false}");
	json_buf_free(&j);
}
END_TEST

START_TEST(writer_escapes_round_trip)
{
	const char *nasty = "a\"b\\c\nd\re\tf\x01g\x7f h/ \xc3\xa9";
	struct json_buf j;
	struct json_val *v;

	json_buf_init(&j);
	json_obj_begin(&j);
	json_kv_str(&j, "s", nasty);
	json_obj_end(&j);
	ck_assert(json_buf_ok(&j));
	/* one line: no raw control characters */
	for (size_t i = 0; i < j.len; i++)
		ck_assert_msg((unsigned char)j.p[i] >= 0x20 && j.p[i] != 0x7f, "raw byte at %zu", i);
	v = parse_ok(j.p);
	ck_assert_str_eq(json_get_str(v, "s"), nasty);
	json_val_free(v);
	json_buf_free(&j);
}
END_TEST

START_TEST(writer_misuse)
{
	struct json_buf j;

	json_buf_init(&j);
	json_obj_begin(&j);
	json_str(&j, "value without key");
	ck_assert(j.misuse);
	json_buf_free(&j);

	json_buf_init(&j);
	json_arr_begin(&j);
	json_obj_end(&j);
	ck_assert(!json_buf_ok(&j));
	json_buf_free(&j);

	json_buf_init(&j);
	json_obj_begin(&j);
	ck_assert(!json_buf_ok(&j)); /* unbalanced */
	json_obj_end(&j);
	ck_assert(json_buf_ok(&j));
	json_u64(&j, 1); /* a second document */
	ck_assert(!json_buf_ok(&j));
	json_buf_free(&j);

	json_buf_init(&j);
	json_obj_begin(&j);
	json_kv_double(&j, "nan", NAN);
	json_obj_end(&j);
	ck_assert_str_eq(j.p, "{\"nan\":null}");
	json_buf_free(&j);

	/* shortest round-trip text */
	json_buf_init(&j);
	json_arr_begin(&j);
	json_double(&j, 0.049);
	json_double(&j, 1e300);
	json_double(&j, -2.5);
	json_double(&j, 0.1 + 0.2);
	json_arr_end(&j);
	ck_assert_str_eq(j.p, "[0.049,1e+300,-2.5,0.30000000000000004]");
	json_buf_free(&j);
}
END_TEST

START_TEST(parse_request)
{
	struct json_val *v = parse_ok(" {\"cmd\" : \"export-remove\", \"name\":\"x\", \"n\": 12,"
				      " \"b\": true, \"z\": null} \n");

	ck_assert_int_eq(v->type, JSON_OBJ);
	ck_assert_uint_eq(v->nr_kids, 5);
	ck_assert_str_eq(json_get_str(v, "cmd"), "export-remove");
	ck_assert_str_eq(json_get_str(v, "name"), "x");
	ck_assert_ptr_null(json_get_str(v, "n")); /* a number is not a string */
	ck_assert_str_eq(json_get_text(v, "n", "?"), "12");
	ck_assert_str_eq(json_get_text(v, "b", "?"), "true");
	ck_assert_str_eq(json_get_text(v, "z", "?"), "?");
	ck_assert_str_eq(json_get_text(v, "absent", "-"), "-");
	ck_assert_ptr_null(json_get(v, "absent"));
	json_val_free(v);
}
END_TEST

START_TEST(parse_values)
{
	struct json_val *v = parse_ok("[1.5e3, -0, \"\\u00e9\\ud83d\\ude00\\/\", [], {\"a\":{\"b\":[false]}}]");

	ck_assert_int_eq(v->type, JSON_ARR);
	ck_assert_uint_eq(v->nr_kids, 5);
	ck_assert(v->kids[0].num == 1500.0);
	ck_assert_str_eq(v->kids[0].str, "1.5e3");
	ck_assert_str_eq(v->kids[1].str, "-0");
	ck_assert_str_eq(v->kids[2].str, "\xc3\xa9\xf0\x9f\x98\x80/");
	ck_assert_int_eq(v->kids[3].type, JSON_ARR);
	ck_assert_uint_eq(v->kids[3].nr_kids, 0);
	const struct json_val *b = json_get(json_get(&v->kids[4], "a"), "b");
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(b->kids[0].type, JSON_BOOL);
	ck_assert(!b->kids[0].b);
	json_val_free(v);

	/* big counters keep their exact text */
	v = parse_ok("{\"reads\":18446744073709551615}");
	ck_assert_str_eq(json_get_text(v, "reads", ""), "18446744073709551615");
	json_val_free(v);
}
END_TEST

START_TEST(parse_errors)
{
	parse_bad("", "expected a value");
	parse_bad("{", "expected a member name");
	parse_bad("{\"a\" 1}", "expected ':'");
	parse_bad("{\"a\":1,}", "expected a member name");
	parse_bad("{\"a\":1 \"b\":2}", "expected ',' or '}'");
	parse_bad("[1 2]", "expected ',' or ']'");
	parse_bad("{\"a\":\"x}", "unterminated string");
	parse_bad("{\"a\":\"\\q\"}", "bad escape");
	parse_bad("{\"a\":\"\\u12\"}", "bad \\u escape");
	parse_bad("\"\\ud800\"", "lone surrogate");
	parse_bad("\"\\u0000\"", "NUL");
	parse_bad("\"a\tb\"", "control character");
	parse_bad("01", "text after the value");
	parse_bad("-", "bad number");
	parse_bad("1.", "bad fraction");
	parse_bad("1e", "bad exponent");
	parse_bad("tru", "bad literal");
	parse_bad("{} {}", "text after the value");
	parse_bad("{\"a\":1}\\", "text after the value");

	char deep[200];
	memset(deep, '[', sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = 0;
	parse_bad(deep, "nested too deep");

	/* an embedded NUL is refused, not silently truncated */
	struct json_val *v = NULL;
	ck_assert_int_eq(json_parse("{}\0{}", 5, &v, NULL, 0), -EINVAL);
	ck_assert_ptr_null(v);
}
END_TEST

START_TEST(parse_length_bounded)
{
	/* only len bytes are read: the text need not be NUL-terminated */
	const char buf[] = { '{', '}', 'X' };
	struct json_val *v = NULL;

	ck_assert_int_eq(json_parse(buf, 2, &v, NULL, 0), 0);
	ck_assert_int_eq(v->type, JSON_OBJ);
	json_val_free(v);
	ck_assert_int_eq(json_parse(buf, 3, &v, NULL, 0), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, writer_nested);
	tcase_add_test(tc, writer_escapes_round_trip);
	tcase_add_test(tc, writer_misuse);
	tcase_add_test(tc, parse_request);
	tcase_add_test(tc, parse_values);
	tcase_add_test(tc, parse_errors);
	tcase_add_test(tc, parse_length_bounded);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
