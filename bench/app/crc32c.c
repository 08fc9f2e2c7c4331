/* SPDX-License-Identifier: MIT */
/*
 * crc32c.c - CRC32C (Castagnoli, reflected polynomial 0x82F63B78, initial
 * and final value ~0), the work of `bpbench app`'s jobs.
 *
 * The work is table-driven software, slice-by-8: eight table lookups per 8
 * bytes, the same code on every machine, so that the per-job cost does not
 * depend on which instructions a CPU has. The check after every run needs
 * each job's expected value computed some other way: app_crc32c_ref uses the
 * SSE4.2 crc32 instruction where the CPU has it (chosen at run time) and
 * otherwise the classic byte-at-a-time table. All of them are checked at
 * start against the standard check value, CRC32C("123456789") = 0xE3069283,
 * and against each other on buffers of every length up to 300 bytes.
 */
#include "app/app.h"

#include <string.h>

#define APP_CRC32C_POLY	 0x82F63B78u
#define APP_CRC32C_CHECK 0xE3069283u

/* t[0]: one byte; t[i]: a byte followed by i zero bytes */
static uint32_t app_crc_tab[8][256];
static uint32_t (*app_crc_ref_fn)(const void *buf, size_t len);
static const char *app_crc_ref_label;

static void app_crc32c_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (c & 1 ? APP_CRC32C_POLY : 0);
		app_crc_tab[0][i] = c;
	}
	for (int t = 1; t < 8; t++)
		for (int i = 0; i < 256; i++) {
			uint32_t c = app_crc_tab[t - 1][i];

			app_crc_tab[t][i] = (c >> 8) ^ app_crc_tab[0][c & 0xff];
		}
}

static uint32_t app_crc32c_bytewise(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t c = ~0u;

	while (len--)
		c = app_crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return ~c;
}

/* 8 bytes as a little-endian number (one load where the CPU is one) */
static inline uint64_t app_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

uint32_t app_crc32c(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t c = ~0u;

	for (; len >= 8; len -= 8, p += 8) {
		uint64_t w = app_le64(p) ^ c;

		c = app_crc_tab[7][w & 0xff] ^ app_crc_tab[6][(w >> 8) & 0xff] ^
		    app_crc_tab[5][(w >> 16) & 0xff] ^
		    app_crc_tab[4][(w >> 24) & 0xff] ^
		    app_crc_tab[3][(w >> 32) & 0xff] ^
		    app_crc_tab[2][(w >> 40) & 0xff] ^
		    app_crc_tab[1][(w >> 48) & 0xff] ^ app_crc_tab[0][w >> 56];
	}
	while (len--)
		c = app_crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
app_crc32c_sse42(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = ~0u;

	for (; len >= 8; len -= 8, p += 8) {
		uint64_t w;

		memcpy(&w, p, sizeof(w));
		c = __builtin_ia32_crc32di(c, w);
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

uint32_t app_crc32c_ref(const void *buf, size_t len)
{
	return app_crc_ref_fn(buf, len);
}

const char *app_crc32c_ref_name(void)
{
	return app_crc_ref_label;
}

/* Every implementation against the check value and against each other. */
static void app_crc32c_selftest(void)
{
	static const char check[] = "123456789";
	uint32_t (*const fns[])(const void *, size_t) = {
		app_crc32c, app_crc32c_bytewise, app_crc_ref_fn};
	const char *const names[] = {"slice-by-8", "bytewise",
				     app_crc_ref_label};
	uint8_t buf[300 + 8];
	uint64_t rng = 42;

	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)bench_rand(&rng);
	for (int f = 0; f < 3; f++) {
		uint32_t v = fns[f](check, 9);

		if (v != APP_CRC32C_CHECK)
			bench_die("bpbench app: VERIFY FAILED: CRC32C %s of "
				  "\"123456789\" is %08x, not %08x\n",
				  names[f], v, APP_CRC32C_CHECK);
		/* every length, at an odd offset too */
		for (size_t len = 0; len <= 300; len++)
			for (size_t off = 0; off < 8; off += 3)
				if (fns[f](buf + off, len) !=
				    app_crc32c_bytewise(buf + off, len))
					bench_die("bpbench app: VERIFY FAILED: "
						  "CRC32C %s differs from "
						  "bytewise at length %zu\n",
						  names[f], len);
	}
}

void app_crc32c_init(void)
{
	app_crc32c_tables();
	app_crc_ref_fn = app_crc32c_bytewise;
	app_crc_ref_label = "bytewise";
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2")) {
		app_crc_ref_fn = app_crc32c_sse42;
		app_crc_ref_label = "sse4.2";
	}
#endif
	app_crc32c_selftest();
}
