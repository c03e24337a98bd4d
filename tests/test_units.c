/* test_units.c: quantity parsing. Expected values are the SI definitions written out. */
#include "tests.h"

#include <math.h>
#include <string.h>

typedef struct { const char *text; scn_unit_kind kind; double want; } ok_case;

START_TEST(parses_every_unit_family)
{
    static const ok_case cases[] = {
        {"80 GiB", SCN_UNIT_BYTES, 80.0 * 1073741824.0},
        {"80GiB", SCN_UNIT_BYTES, 80.0 * 1073741824.0},
        {"141 GB", SCN_UNIT_BYTES, 141e9},
        {"512 KiB", SCN_UNIT_BYTES, 524288.0},
        {"1.5 TiB", SCN_UNIT_BYTES, 1.5 * 1099511627776.0},
        {"3 kB", SCN_UNIT_BYTES, 3000.0},
        {"7 B", SCN_UNIT_BYTES, 7.0},
        {"3.35 TB/s", SCN_UNIT_BANDWIDTH, 3.35e12},
        {"900 GB/s", SCN_UNIT_BANDWIDTH, 9e11},
        {"10 GiB/s", SCN_UNIT_BANDWIDTH, 10.0 * 1073741824.0},
        {"989 TFLOPS", SCN_UNIT_COMPUTE, 989e12},
        {"1979 TOPS", SCN_UNIT_COMPUTE, 1979e12},
        {"67 TFLOP/s", SCN_UNIT_COMPUTE, 67e12},
        {"50 ms", SCN_UNIT_TIME, 0.05},
        {"1 s", SCN_UNIT_TIME, 1.0},
        {"250 us", SCN_UNIT_TIME, 250e-6},
        {"2 min", SCN_UNIT_TIME, 120.0},
        {"1.5 h", SCN_UNIT_TIME, 5400.0},
        {"8/s", SCN_UNIT_RATE, 8.0},
        {"120/min", SCN_UNIT_RATE, 2.0},
        {"3600 req/h", SCN_UNIT_RATE, 1.0},
        {"90%", SCN_UNIT_FRACTION, 0.9},
        {"0.9", SCN_UNIT_FRACTION, 0.9},
        {"1e3 ms", SCN_UNIT_TIME, 1.0},
        {".5 s", SCN_UNIT_TIME, 0.5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double v = -1;
        char msg[400] = "";
        int rc = scn_quantity_parse(cases[i].text, cases[i].kind, &v, msg, sizeof msg);
        ck_assert_msg(rc == 0, "'%s': %s", cases[i].text, msg);
        ck_assert_msg(fabs(v - cases[i].want) <= 1e-12 * fabs(cases[i].want), "'%s' gave %.17g, want %.17g",
                      cases[i].text, v, cases[i].want);
    }
}
END_TEST

typedef struct { const char *text; scn_unit_kind kind; const char *msg_has; } bad_case;

START_TEST(rejects_missing_wrong_and_ambiguous_units)
{
    static const bad_case cases[] = {
        {"80", SCN_UNIT_BYTES, "has no unit"},
        {"3.35", SCN_UNIT_BANDWIDTH, "has no unit"},
        {"50", SCN_UNIT_TIME, "has no unit"},
        {"8", SCN_UNIT_RATE, "has no unit"},
        {"50 ms", SCN_UNIT_BYTES, "is a duration, but this field is a byte size"},
        {"80 GiB", SCN_UNIT_TIME, "is a byte size, but this field is a duration"},
        {"3 TB/s", SCN_UNIT_COMPUTE, "is a bandwidth"},
        {"4 KB", SCN_UNIT_BYTES, "ambiguous"},
        {"4 parsecs", SCN_UNIT_BYTES, "unknown unit 'parsecs'"},
        {"lots", SCN_UNIT_BYTES, "expected a number and a unit"},
        {"", SCN_UNIT_TIME, "expected a number and a unit"},
        {"1 2 s", SCN_UNIT_TIME, "expected a number and a unit"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double v = 12345;
        char msg[400] = "";
        int rc = scn_quantity_parse(cases[i].text, cases[i].kind, &v, msg, sizeof msg);
        ck_assert_msg(rc == -1, "'%s' was accepted", cases[i].text);
        ck_assert_msg(strstr(msg, cases[i].msg_has), "'%s': message '%s' lacks '%s'", cases[i].text, msg,
                      cases[i].msg_has);
        ck_assert_msg(v == 12345, "'%s': output written on failure", cases[i].text);
    }
}
END_TEST

START_TEST(dtypes_and_edit_distance)
{
    scn_dtype d;
    ck_assert_int_eq(scn_dtype_parse("bfloat16", &d), 0);
    ck_assert_int_eq(d, SCN_DTYPE_BF16);
    ck_assert_int_eq(scn_dtype_parse("float16", &d), 0);
    ck_assert_int_eq(d, SCN_DTYPE_FP16);
    ck_assert_int_eq(scn_dtype_parse("fp7", &d), -1);
    ck_assert(scn_dtype_bytes(SCN_DTYPE_INT4) == 0.5);
    ck_assert(scn_dtype_bytes(SCN_DTYPE_FP8) == 1.0);
    ck_assert_int_eq(scn_edit_distance("kitten", "sitting"), 3);
    ck_assert_int_eq(scn_edit_distance("layers", "layres"), 2);
    ck_assert_int_eq(scn_edit_distance("", "abc"), 3);
    ck_assert_int_eq(scn_edit_distance("same", "same"), 0);
}
END_TEST

Suite *suite_units(void)
{
    Suite *s = suite_create("units");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, parses_every_unit_family);
    tcase_add_test(tc, rejects_missing_wrong_and_ambiguous_units);
    tcase_add_test(tc, dtypes_and_edit_distance);
    suite_add_tcase(s, tc);
    return s;
}
