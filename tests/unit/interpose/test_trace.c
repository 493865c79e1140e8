/* tests/unit/interpose/test_trace.c - the trace writer: op records are
 * valid JSON with escaped strings, memory records carry the totals, and a
 * full ring drops and counts instead of blocking. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "interpose/config.h"
#include "interpose/log.h"
#include "interpose/trace.h"

void trace_header_fields(char *buf, size_t len)
{
	snprintf(buf, len, "\"device\":{\"name\":\"fake\",\"total\":1024,\"cc\":\"9.0\"},\"cudnn\":null,\"cublas\":null,\"cudart\":13000");
}

void trace_end_fields(char *buf, size_t len)
{
	snprintf(buf, len, "\"cudnn\":90100,\"cublas\":null");
}

static char *slurp(const char *path, int *lines)
{
	FILE *f = fopen(path, "r");
	static char buf[4 << 20];
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	*lines = 0;
	for (size_t i = 0; i < n; i++)
		*lines += buf[i] == '\n';
	return buf;
}

static void test_op_record_escapes_strings(void **state)
{
	trace_ref_t refs[2] = {
		{ 3, 16, 4096, 0x7f0000001010, VMEM_ACCESS_R, "x" },
		{ 0, 0, 0, 0x1000, VMEM_ACCESS_RW, "we\"ird\n" },
	};
	char buf[2048];
	size_t n;

	(void)state;
	n = trace_format_op(buf, sizeof(buf), 17, 1000, 50, 42, VMEM_OP_CONV_FWD, "api\\x",
			    (const void *)0x10, refs, 2, "\"algo\":1");
	assert_true(n > 0);
	assert_int_equal(buf[n - 1], '\n');
	buf[n - 1] = '\0';
	assert_string_equal(buf,
		"{\"type\":\"op\",\"seq\":17,\"t\":1000,\"dur\":50,\"tid\":42,\"stream\":\"0x10\","
		"\"op\":\"conv_fwd\",\"api\":\"api\\\\x\",\"args\":{\"algo\":1},\"tensors\":["
		"{\"alloc\":3,\"off\":16,\"bytes\":4096,\"ptr\":\"0x7f0000001010\",\"acc\":\"r\",\"role\":\"x\"},"
		"{\"alloc\":0,\"off\":0,\"bytes\":0,\"ptr\":\"0x1000\",\"acc\":\"rw\",\"role\":\"we\\\"ird\\n\"}]}");
}

static void test_op_record_that_does_not_fit_is_refused(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(trace_format_op(buf, sizeof(buf), 1, 1, 1, 1, VMEM_OP_SYNC,
					 "cudaDeviceSynchronize", NULL, NULL, 0, NULL), 0);
}

static void test_full_ring_drops_and_counts(void **state)
{
	char path[] = "/tmp/vmem-test-trace-XXXXXX";
	int fd = mkstemp(path), lines, accepted = 0, dropped = 0;
	char *text, *end;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	/* 4 KiB ring, no writer thread: everything stays in the ring. */
	assert_int_equal(trace_open_ring(path, 4096, false), 0);
	assert_true(trace_enabled());
	for (int i = 0; i < 100; i++) {
		trace_ref_t r = { 1, 0, 256, 0x7f0000000000, VMEM_ACCESS_W, "dst" };

		trace_op(trace_next_seq(), trace_now_ns(), 10, VMEM_OP_MEMSET, "cudaMemset", NULL,
			 &r, 1, "\"bytes\":256");
	}
	dropped = (int)trace_dropped();
	assert_true(dropped > 0);
	accepted = 100 - dropped;
	assert_true(accepted > 0);
	trace_close();
	assert_false(trace_enabled());
	text = slurp(path, &lines);
	/* header + accepted ops + end */
	if (lines != accepted + 2)
		fail_msg("expected %d lines (header, %d ops, end), got %d", accepted + 2, accepted, lines);
	assert_true(strncmp(text, "{\"type\":\"header\",\"format\":1,\"vmem\":\"test\"", 41) == 0);
	assert_non_null(strstr(text, "\"device\":{\"name\":\"fake\""));
	assert_non_null(strstr(text, "\"settings\":{"));
	end = strstr(text, "{\"type\":\"end\"");
	assert_non_null(end);
	{
		char want[128];

		snprintf(want, sizeof(want), "\"records\":%d,\"dropped\":%d,\"cudnn\":90100", accepted + 1, dropped);
		if (!strstr(end, want))
			fail_msg("end record: expected %s, got %s", want, end);
	}
	unlink(path);
}

static void test_writer_thread_writes_everything(void **state)
{
	char path[] = "/tmp/vmem-test-trace-XXXXXX";
	int fd = mkstemp(path), lines;
	char *text;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trace_open_ring(path, 1 << 20, true), 0);
	for (int i = 0; i < 5000; i++) {
		trace_mem(TRACE_MEM_ALLOC, (uint64_t)i + 1, 0x7f0000000000 + 4096u * (unsigned)i, 0, 4096,
			  2 << 20, NULL, 1u << 30, 0, 2u << 30, "cudaMalloc");
		/* Every 500 records (about an eighth of the ring) wait for the
		 * writer to catch up: on a loaded machine it may not be
		 * scheduled for a while, and a full ring drops by design (the
		 * test above).  What is tested here is that it writes all. */
		if (i % 500 == 499) {
			for (int w = 0; w < 10000 && trace_written() < (uint64_t)i + 1; w++)
				usleep(1000);
		}
	}
	trace_close();
	text = slurp(path, &lines);
	if (lines != 5002)
		fail_msg("expected 5002 lines, got %d (dropped %llu)", lines,
			 (unsigned long long)trace_dropped());
	assert_non_null(strstr(text, "{\"type\":\"alloc\","));
	assert_non_null(strstr(text, "\"api\":\"cudaMalloc\",\"resident\":1073741824,\"host\":0,\"budget\":2147483648}"));
	assert_non_null(strstr(text, "\"dropped\":0"));
	unlink(path);
}

static char logged[4096];
static size_t logged_len;

static void capture(const char *line, size_t len, void *ctx)
{
	(void)ctx;
	if (logged_len + len < sizeof(logged)) {
		memcpy(logged + logged_len, line, len);
		logged_len += len;
		logged[logged_len] = '\0';
	}
}

static void test_unwritable_path_is_one_warning_and_tracing_off(void **state)
{
	(void)state;
	logged_len = 0;
	logged[0] = '\0';
	vmem_log_set_output(capture, NULL);
	assert_int_equal(trace_open_ring("/nonexistent-dir/t.jsonl", 4096, false), -1);
	vmem_log_set_output(NULL, NULL);
	assert_false(trace_enabled());
	assert_string_equal(logged,
		"vmem: warning: VMEM_TRACE=/nonexistent-dir/t.jsonl: cannot open for writing "
		"(No such file or directory); tracing is off\n");
	/* Records are silently ignored. */
	trace_mem(TRACE_MEM_FREE, 1, 0, 0, 0, 0, NULL, 0, 0, 0, "cudaFree");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_op_record_escapes_strings),
		cmocka_unit_test(test_op_record_that_does_not_fit_is_refused),
		cmocka_unit_test(test_full_ring_drops_and_counts),
		cmocka_unit_test(test_writer_thread_writes_everything),
		cmocka_unit_test(test_unwritable_path_is_one_warning_and_tracing_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
