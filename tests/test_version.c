/* SPDX-License-Identifier: MIT */
/*
 * test_version - the headers' version macros, the library's bp_version()
 * and bp_version_number(), and the build's project version all agree.
 */
#include <stdio.h>
#include <string.h>

#include <batchpipe/batchpipe.h>

#ifndef BPT_PROJECT_VERSION
#error "the build passes the project version as BPT_PROJECT_VERSION"
#endif

static int failed;

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "FAIL: %s\n", what);
		failed = 1;
	}
}

int main(void)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", BP_VERSION_MAJOR,
		 BP_VERSION_MINOR, BP_VERSION_PATCH);
	check(strcmp(want, BP_VERSION_STRING) == 0,
	      "BP_VERSION_STRING matches the MAJOR/MINOR/PATCH macros");
	check(strcmp(BP_VERSION_STRING, BPT_PROJECT_VERSION) == 0,
	      "version.h matches the project version in meson.build");
	check(strcmp(bp_version(), BP_VERSION_STRING) == 0,
	      "bp_version() matches version.h");
	check(bp_version_number() == BP_VERSION,
	      "bp_version_number() matches BP_VERSION");
	check(BP_VERSION == ((BP_VERSION_MAJOR << 16) |
			     (BP_VERSION_MINOR << 8) | BP_VERSION_PATCH),
	      "BP_VERSION encodes 0x00MMmmpp");
	check(BP_VERSION_AT_LEAST(BP_VERSION_MAJOR, BP_VERSION_MINOR,
				  BP_VERSION_PATCH) &&
		      !BP_VERSION_AT_LEAST(BP_VERSION_MAJOR,
					   BP_VERSION_MINOR + 1, 0) &&
		      BP_VERSION_AT_LEAST(0, 0, 0),
	      "BP_VERSION_AT_LEAST compares");
	printf("headers %s (0x%06x), library %s (0x%06x), project %s\n",
	       BP_VERSION_STRING, (unsigned)BP_VERSION, bp_version(),
	       bp_version_number(), BPT_PROJECT_VERSION);
	return failed;
}
