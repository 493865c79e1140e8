/* tests/unit/interpose/test_config.c - VMEM_* parsing: defaults, good and
 * bad values of every kind, size suffixes, overflow, message text; and the
 * log lines VMEM_LOG governs (the cap on repeats, the uncapped form). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "interpose/config.h"
#include "interpose/log.h"
#include "interpose/trace.h"

void trace_header_fields(char *buf, size_t len) { (void)len; buf[0] = '\0'; }
void trace_end_fields(char *buf, size_t len) { (void)len; buf[0] = '\0'; }

/* A fake environment: NULL-terminated name/value pairs. */
typedef struct {
	const char *const *kv;
} env_t;

static const char *fake_get(const char *name, void *ctx)
{
	const env_t *e = ctx;

	for (int i = 0; e->kv[i]; i += 2)
		if (strcmp(e->kv[i], name) == 0)
			return e->kv[i + 1];
	return NULL;
}

typedef struct {
	int n;
	char lines[8][1024];
} errs_t;

static void fake_err(const char *line, void *ctx)
{
	errs_t *e = ctx;

	if (e->n < 8)
		snprintf(e->lines[e->n], sizeof(e->lines[0]), "%s", line);
	e->n++;
}

static int parse(vmem_config_t *cfg, errs_t *errs, const char *const *kv)
{
	env_t env = { kv };

	memset(errs, 0, sizeof(*errs));
	return vmem_config_parse(cfg, fake_get, &env, fake_err, errs);
}

static void test_defaults_when_nothing_is_set(void **state)
{
	static const char *const kv[] = { NULL };
	vmem_config_t cfg;
	errs_t errs;

	(void)state;
	assert_int_equal(parse(&cfg, &errs, kv), 0);
	assert_true(cfg.enabled);
	assert_int_equal(cfg.policy, VMEM_POLICY_NONE);
	assert_int_equal(cfg.device_limit, 0);
	assert_true(cfg.device_reserve == VMEM_SIZE_AUTO);
	assert_true(cfg.workspace_limit == VMEM_SIZE_AUTO);
	assert_int_equal(cfg.small_threshold, 1ull << 20);
	assert_int_equal(cfg.workspace, VMEM_WS_DEFAULT);
	assert_int_equal(vmem_workspace_mode(&cfg), VMEM_WS_OFF);
	assert_int_equal(cfg.microbatch, VMEM_MB_POW2);
	assert_int_equal(cfg.wr_slack, 1);
	assert_int_equal(cfg.log_level, VMEM_LOG_WARN);
	assert_false(cfg.stats);
	assert_string_equal(cfg.trace_path, "");
}

static void test_good_values_of_every_kind(void **state)
{
	static const char *const kv[] = {
		"VMEM_POLICY", "conv", "VMEM_DEVICE_LIMIT", "8G", "VMEM_HOST_LIMIT", "1.5G",
		"VMEM_CHUNK_SIZE", "4M", "VMEM_VA_SIZE", "64G", "VMEM_CONV_ALGO", "PERF",
		"VMEM_WORKSPACE", "wd", "VMEM_WORKSPACE_LIMIT", "512MiB", "VMEM_MICROBATCH", "pow2",
		"VMEM_TRACE", "/tmp/t.jsonl", "VMEM_LOG", "debug", "VMEM_STATS", "yes",
		"VMEM_SMALL_THRESHOLD", "0", NULL,
	};
	vmem_config_t cfg;
	errs_t errs;

	(void)state;
	assert_int_equal(parse(&cfg, &errs, kv), 0);
	assert_true(cfg.enabled);
	assert_int_equal(cfg.policy, VMEM_POLICY_CONV);
	assert_int_equal(cfg.device_limit, 8ull << 30);
	assert_int_equal(cfg.host_limit, 3ull << 29);
	assert_int_equal(cfg.chunk_size, 4ull << 20);
	assert_int_equal(cfg.va_size, 64ull << 30);
	assert_int_equal(cfg.conv_algo, VMEM_ALGO_PERF);
	assert_int_equal(cfg.workspace, VMEM_WS_WD);
	assert_int_equal(cfg.workspace_limit, 512ull << 20);
	assert_int_equal(cfg.microbatch, VMEM_MB_POW2);
	assert_int_equal(vmem_workspace_mode(&cfg), VMEM_WS_WD);
	assert_string_equal(cfg.trace_path, "/tmp/t.jsonl");
	assert_int_equal(cfg.log_level, VMEM_LOG_DEBUG);
	assert_true(cfg.stats);
	assert_int_equal(cfg.small_threshold, 0);
}

/* Issue 12: app and fit are choices of their own; default stays the
 * default (conv_exec.c reads it as fit under a policy, app under none). */
static void test_conv_algo_accepts_app_and_fit(void **state)
{
	static const char *const app[] = { "VMEM_CONV_ALGO", "app", NULL };
	static const char *const fit[] = { "VMEM_CONV_ALGO", "Fit", NULL };
	vmem_config_t cfg;
	errs_t errs;

	(void)state;
	assert_int_equal(parse(&cfg, &errs, app), 0);
	assert_int_equal(cfg.conv_algo, VMEM_ALGO_APP);
	assert_int_equal(parse(&cfg, &errs, fit), 0);
	assert_int_equal(cfg.conv_algo, VMEM_ALGO_FIT);
	assert_int_equal(parse(&cfg, &errs, (const char *const[]){ NULL }), 0);
	assert_int_equal(cfg.conv_algo, VMEM_ALGO_DEFAULT);
}

/* Issue 12: VMEM_WORKSPACE=default is µ-cuDNN's WR under dyn (its
 * algorithm choice under the budget) and off under every other policy;
 * an explicit value wins under any policy. */
static void test_workspace_default_is_wr_under_dyn_only(void **state)
{
	static const struct {
		const char *policy, *ws;
		vmem_ws_mode_t want;
	} cases[] = {
		{ "none", NULL, VMEM_WS_OFF }, { "all", NULL, VMEM_WS_OFF },
		{ "conv", NULL, VMEM_WS_OFF }, { "dyn", NULL, VMEM_WS_WR },
		{ "dyn", "off", VMEM_WS_OFF }, { "dyn", "wd", VMEM_WS_WD },
		{ "none", "wr", VMEM_WS_WR },  { "conv", "default", VMEM_WS_OFF },
	};
	vmem_config_t cfg;
	errs_t errs;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *kv[] = { "VMEM_POLICY", cases[i].policy,
				     cases[i].ws ? "VMEM_WORKSPACE" : NULL, cases[i].ws, NULL };

		assert_int_equal(parse(&cfg, &errs, kv), 0);
		if (vmem_workspace_mode(&cfg) != cases[i].want)
			fail_msg("VMEM_POLICY=%s VMEM_WORKSPACE=%s: expected mode %s, got %s",
				 cases[i].policy, cases[i].ws ? cases[i].ws : "(unset)",
				 vmem_workspace_name(cases[i].want),
				 vmem_workspace_name(vmem_workspace_mode(&cfg)));
	}
}

static void test_disable_makes_vmem_pass_through(void **state)
{
	static const char *const kv[] = { "VMEM_DISABLE", "1", NULL };
	vmem_config_t cfg;
	errs_t errs;

	(void)state;
	assert_int_equal(parse(&cfg, &errs, kv), 0);
	assert_false(cfg.enabled);
}

static void expect_size(const char *s, uint64_t want)
{
	uint64_t got = 0;
	int rc = vmem_parse_size(s, &got);

	if (rc != 0 || got != want)
		fail_msg("vmem_parse_size(\"%s\"): expected 0 and %llu, got %d and %llu", s,
			 (unsigned long long)want, rc, (unsigned long long)got);
}

static void expect_size_error(const char *s, int want_rc)
{
	uint64_t got = 12345;
	int rc = vmem_parse_size(s, &got);

	if (rc != want_rc)
		fail_msg("vmem_parse_size(\"%s\"): expected %d, got %d (value %llu)", s, want_rc, rc,
			 (unsigned long long)got);
}

static void test_size_suffixes_are_binary(void **state)
{
	(void)state;
	expect_size("0", 0);
	expect_size("123", 123);
	expect_size("64K", 64ull << 10);
	expect_size("64k", 64ull << 10);
	expect_size("3M", 3ull << 20);
	expect_size("8G", 8ull << 30);
	expect_size("8GiB", 8ull << 30);
	expect_size("8GB", 8ull << 30);
	expect_size("2T", 2ull << 40);
	expect_size("1.5G", 3ull << 29);
	expect_size("0.5K", 512);
	expect_size("100B", 100);
	expect_size(" 16M ", 16ull << 20);
	expect_size("16777215T", 16777215ull << 40);
}

static void test_size_syntax_errors(void **state)
{
	(void)state;
	expect_size_error("", -1);
	expect_size_error("G", -1);
	expect_size_error("-1", -1);
	expect_size_error("+5", -1);
	expect_size_error("8Q", -1);
	expect_size_error("8 G B x", -1);
	expect_size_error("1.", -1);
	expect_size_error("1.5", -1);  /* a fraction of a byte */
	expect_size_error("8Gi", -1);
	expect_size_error("0x10", -1);
}

static void test_size_overflow_is_reported(void **state)
{
	(void)state;
	expect_size_error("18446744073709551616", -2);
	expect_size_error("16777216T", -2);
	expect_size_error("99999999999999999999999", -2);
	expect_size("18446744073709551615", UINT64_MAX);
}

static void expect_bad(const char *var, const char *val, const char *what)
{
	const char *kv[] = { var, val, NULL };
	char head[256];
	vmem_config_t cfg;
	errs_t errs;

	assert_int_equal(parse(&cfg, &errs, kv), 1);
	assert_false(cfg.enabled);
	assert_int_equal(errs.n, 1);
	snprintf(head, sizeof(head), "%s=%s: ", var, val);
	if (strncmp(errs.lines[0], head, strlen(head)) != 0 || !strstr(errs.lines[0], what) ||
	    !strstr(errs.lines[0], "; accepted: "))
		fail_msg("%s=%s: expected a line starting \"%s\" containing \"%s\" and \"; accepted: \", got \"%s\"",
			 var, val, head, what, errs.lines[0]);
}

static void test_bad_values_give_one_line_each(void **state)
{
	(void)state;
	expect_bad("VMEM_POLICY", "fast", "unknown value; accepted: none, all, conv, dyn");
	expect_bad("VMEM_CONV_ALGO", "best", "unknown value; accepted: default, app, mem, perf, fit");
	expect_bad("VMEM_WORKSPACE", "on", "unknown value");
	expect_bad("VMEM_MICROBATCH", "two", "unknown value; accepted: all, pow2, undivided");
	expect_bad("VMEM_WR_SLACK", "101", "out of range");
	expect_bad("VMEM_WR_SLACK", "-1", "not a size");
	expect_bad("VMEM_LOG", "loud", "unknown value; accepted: error, warn, info, debug");
	expect_bad("VMEM_STATS", "2", "not a boolean");
	expect_bad("VMEM_DISABLE", "please", "not a boolean");
	expect_bad("VMEM_DEVICE_LIMIT", "8X", "not a size");
	expect_bad("VMEM_DEVICE_LIMIT", "100", "out of range; accepted: 0 or 1M to 1024T");
	expect_bad("VMEM_HOST_LIMIT", "20000000T", "too large (overflows 64 bits)");
	expect_bad("VMEM_CHUNK_SIZE", "3M", "not a multiple of the chunk granularity; accepted: 0 or a multiple of 2M");
	expect_bad("VMEM_VA_SIZE", "512M", "out of range");
}

static void test_several_bad_values_are_all_reported(void **state)
{
	static const char *const kv[] = { "VMEM_POLICY", "x", "VMEM_LOG", "y", "VMEM_STATS", "1", NULL };
	vmem_config_t cfg;
	errs_t errs;

	(void)state;
	assert_int_equal(parse(&cfg, &errs, kv), 2);
	assert_int_equal(errs.n, 2);
	assert_false(cfg.enabled);
	assert_non_null(strstr(errs.lines[0], "VMEM_POLICY=x: "));
	assert_non_null(strstr(errs.lines[1], "VMEM_LOG=y: "));
}

static void test_settings_json_lists_every_variable(void **state)
{
	static const char *const kv[] = { "VMEM_TRACE", "/tmp/a \"b\".jsonl", "VMEM_DEVICE_LIMIT", "1G", NULL };
	vmem_config_t cfg;
	errs_t errs;
	char buf[8192];
	const char *name;
	char val[64];
	int n = 0;

	(void)state;
	assert_int_equal(parse(&cfg, &errs, kv), 0);
	assert_true(vmem_config_json(&cfg, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "\"policy\":\"none\""));
	assert_non_null(strstr(buf, "\"device_limit\":1073741824"));
	assert_non_null(strstr(buf, "\"trace\":\"/tmp/a \\\"b\\\".jsonl\""));
	assert_non_null(strstr(buf, "\"stats\":false"));
	assert_non_null(strstr(buf, "\"device_reserve\":\"auto\""));
	while (vmem_config_value(&cfg, n, &name, val, sizeof(val)) == 0)
		n++;
	if (n != 29)
		fail_msg("expected 29 VMEM_* variables listed, got %d", n);
	assert_non_null(strstr(buf, "\"map\":\"lazy\""));
	assert_non_null(strstr(buf, "\"handoff\":true"));
	assert_non_null(strstr(buf, "\"host_map\":\"auto\""));
	assert_non_null(strstr(buf, "\"range_fit\":\"pending\""));
	assert_non_null(strstr(buf, "\"dyn_trials\":1"));
	assert_non_null(strstr(buf, "\"dyn_least\":true"));
	assert_non_null(strstr(buf, "\"wr_slack\":1"));
	assert_non_null(strstr(buf, "\"workspace\":\"default\""));
	assert_int_equal(vmem_config_value(&cfg, 4, &name, val, sizeof(val)), 0);
	assert_string_equal(name, "VMEM_DEVICE_LIMIT");
	assert_string_equal(val, "1G");
}

static void test_json_escape_handles_quotes_and_controls(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(vmem_json_escape("a\"b\\c\n\x01", buf, sizeof(buf)), 17);
	assert_string_equal(buf, "\"a\\\"b\\\\c\\n\\u0001\"");
	/* Too small: cut, still a quoted string. */
	vmem_json_escape("abcdefghijkl", buf, 8);
	assert_int_equal(buf[0], '"');
	assert_int_equal(buf[strlen(buf) - 1], '"');
	assert_true(strlen(buf) < 8);
}

/* The default reserve follows the device: a fixed 512 MiB left a device
 * with less free memory no budget at all (vmem switched itself off). */
static void test_default_reserve_is_proportional_with_floor_and_cap(void **state)
{
	static const struct { uint64_t total, want; } cases[] = {
		{ 80ull << 30, 1ull << 30 },    /* H100: capped at 1 GiB */
		{ 8ull << 30, 1ull << 30 },     /* 1/8 is exactly the cap */
		{ 4ull << 30, 512ull << 20 },   /* 1/8 */
		{ 2ull << 30, 256ull << 20 },
		{ 256ull << 20, 32ull << 20 },  /* 1/8 is exactly the floor */
		{ 100ull << 20, 32ull << 20 },  /* floor */
	};
	static const char *const kv_auto[] = { NULL };
	static const char *const kv_set[] = { "VMEM_DEVICE_RESERVE", "100M", NULL };
	static const char *const kv_word[] = { "VMEM_DEVICE_RESERVE", "AUTO", NULL };
	vmem_config_t cfg;
	errs_t errs;
	const char *name;
	char val[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t got = vmem_default_reserve(cases[i].total);

		if (got != cases[i].want)
			fail_msg("default reserve of a %llu MiB device: expected %llu MiB, got %llu MiB",
				 (unsigned long long)(cases[i].total >> 20),
				 (unsigned long long)(cases[i].want >> 20),
				 (unsigned long long)(got >> 20));
	}
	assert_int_equal(parse(&cfg, &errs, kv_auto), 0);
	assert_int_equal(vmem_device_reserve(&cfg, 4ull << 30), 512ull << 20);
	assert_int_equal(vmem_config_value(&cfg, 5, &name, val, sizeof(val)), 0);
	assert_string_equal(name, "VMEM_DEVICE_RESERVE");
	assert_string_equal(val, "auto");
	assert_int_equal(parse(&cfg, &errs, kv_word), 0);
	assert_true(cfg.device_reserve == VMEM_SIZE_AUTO);
	/* a stated reserve is used as stated, whatever the device */
	assert_int_equal(parse(&cfg, &errs, kv_set), 0);
	assert_int_equal(vmem_device_reserve(&cfg, 80ull << 30), 100ull << 20);
	assert_int_equal(vmem_device_reserve(&cfg, 64ull << 20), 100ull << 20);
}

/* VMEM_WORKSPACE_LIMIT=auto: WR's per-layer limit is 1/8 of the budget
 * (none without one); a stated limit, 0 (none) included, is used as
 * stated. */
static void test_workspace_limit_auto_is_a_share_of_the_budget(void **state)
{
	static const char *const kv_auto[] = { "VMEM_WORKSPACE_LIMIT", "auto", NULL };
	static const char *const kv_none[] = { "VMEM_WORKSPACE_LIMIT", "0", NULL };
	static const char *const kv_set[] = { "VMEM_WORKSPACE_LIMIT", "64M", NULL };
	vmem_config_t cfg;
	errs_t errs;

	(void)state;
	assert_int_equal(parse(&cfg, &errs, kv_auto), 0);
	assert_int_equal(vmem_wr_limit(&cfg, 2977ull << 20), (2977ull << 20) / 8);
	assert_int_equal(vmem_wr_limit(&cfg, 12ull << 30), 1536ull << 20);
	assert_int_equal(vmem_wr_limit(&cfg, 0), 0);   /* no budget: no limit */
	assert_int_equal(parse(&cfg, &errs, kv_none), 0);
	assert_int_equal(vmem_wr_limit(&cfg, 12ull << 30), 0);
	assert_int_equal(parse(&cfg, &errs, kv_set), 0);
	assert_int_equal(vmem_wr_limit(&cfg, 12ull << 30), 64ull << 20);
	assert_int_equal(vmem_wr_limit(&cfg, 0), 64ull << 20);
}

/* Only VMEM_DEVICE_RESERVE and VMEM_WORKSPACE_LIMIT take "auto"; the
 * other sizes refuse it. */
static void test_auto_is_refused_where_it_has_no_meaning(void **state)
{
	(void)state;
	expect_bad("VMEM_DEVICE_LIMIT", "auto", "not a size; accepted: bytes");
	expect_bad("VMEM_DEVICE_RESERVE", "automatic", "not a size; accepted: auto, or bytes");
}

/* ---- vmem's log lines (interpose/log.c): the cap on repeats of one
 * format, and the uncapped form a listing of one format uses (the plan
 * dump at VMEM_LOG=debug). */

static int nlines, nsuppressed;
static char last[256];

static void capture(const char *line, size_t len, void *ctx)
{
	(void)ctx;
	nlines++;
	if (strstr(line, "further messages like this one are suppressed"))
		nsuppressed++;
	snprintf(last, sizeof(last), "%.*s", (int)len, line);
}

static void reset(void)
{
	nlines = nsuppressed = 0;
	last[0] = 0;
}

static void test_repeats_of_one_format_are_capped(void **state)
{
	(void)state;
	vmem_log_set_output(capture, NULL);
	vmem_log_set_level(VMEM_LOG_DEBUG);
	reset();
	for (int i = 0; i < 30; i++)
		vmem_debug("capped line %d", i);
	if (nlines != 11 || nsuppressed != 1)
		fail_msg("30 lines of one format: expected 10 and one 'suppressed' line, got %d lines, "
			 "%d of them 'suppressed'", nlines, nsuppressed);
	vmem_log_set_level(VMEM_LOG_WARN);
	vmem_log_set_output(NULL, NULL);
}

static void test_uncapped_lines_all_go_out_with_the_prefix(void **state)
{
	(void)state;
	vmem_log_set_output(capture, NULL);
	vmem_log_set_level(VMEM_LOG_DEBUG);
	reset();
	for (int i = 0; i < 30; i++)
		vmem_log_uncapped(VMEM_LOG_DEBUG, "policy: step %d", i);
	if (nlines != 30 || nsuppressed)
		fail_msg("30 uncapped lines: expected all 30, got %d (%d 'suppressed')", nlines,
			 nsuppressed);
	if (strcmp(last, "vmem: debug: policy: step 29\n") != 0)
		fail_msg("expected the last line \"vmem: debug: policy: step 29\\n\", got \"%s\"", last);
	/* below the level in force: nothing */
	vmem_log_set_level(VMEM_LOG_WARN);
	reset();
	vmem_log_uncapped(VMEM_LOG_DEBUG, "policy: step %d", 0);
	assert_int_equal(nlines, 0);
	vmem_log_set_output(NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_repeats_of_one_format_are_capped),
		cmocka_unit_test(test_uncapped_lines_all_go_out_with_the_prefix),
		cmocka_unit_test(test_defaults_when_nothing_is_set),
		cmocka_unit_test(test_good_values_of_every_kind),
		cmocka_unit_test(test_conv_algo_accepts_app_and_fit),
		cmocka_unit_test(test_workspace_default_is_wr_under_dyn_only),
		cmocka_unit_test(test_disable_makes_vmem_pass_through),
		cmocka_unit_test(test_size_suffixes_are_binary),
		cmocka_unit_test(test_size_syntax_errors),
		cmocka_unit_test(test_size_overflow_is_reported),
		cmocka_unit_test(test_bad_values_give_one_line_each),
		cmocka_unit_test(test_several_bad_values_are_all_reported),
		cmocka_unit_test(test_settings_json_lists_every_variable),
		cmocka_unit_test(test_json_escape_handles_quotes_and_controls),
		cmocka_unit_test(test_default_reserve_is_proportional_with_floor_and_cap),
		cmocka_unit_test(test_workspace_limit_auto_is_a_share_of_the_budget),
		cmocka_unit_test(test_auto_is_refused_where_it_has_no_meaning),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
