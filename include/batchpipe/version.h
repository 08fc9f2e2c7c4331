/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/version.h - the version of the headers being compiled against.
 *
 * BP_VERSION_* describe these headers; bp_version() and bp_version_number()
 * (error.h) describe the library actually linked, which can be newer when
 * the shared library was upgraded underneath a program. A program that needs
 * a call added in some release tests at compile time with
 * BP_VERSION_AT_LEAST(0, 2, 0) and, if it must, at run time with
 * bp_version_number() >= BP_VERSION_ENCODE(0, 2, 0).
 */
#ifndef BATCHPIPE_VERSION_H
#define BATCHPIPE_VERSION_H

#define BP_VERSION_MAJOR 0
#define BP_VERSION_MINOR 4
#define BP_VERSION_PATCH 0

/* One comparable number: 0x00MMmmpp (each part below 256). */
#define BP_VERSION_ENCODE(major, minor, patch)                                 \
	(((major) << 16) | ((minor) << 8) | (patch))
#define BP_VERSION                                                             \
	BP_VERSION_ENCODE(BP_VERSION_MAJOR, BP_VERSION_MINOR, BP_VERSION_PATCH)
#define BP_VERSION_AT_LEAST(major, minor, patch)                               \
	(BP_VERSION >= BP_VERSION_ENCODE(major, minor, patch))

/* "MAJOR.MINOR.PATCH", as bp_version() returns for the same release. */
#define BP_VERSION_STR_(x)  #x
#define BP_VERSION_XSTR_(x) BP_VERSION_STR_(x)
#define BP_VERSION_STRING                                                      \
	BP_VERSION_XSTR_(BP_VERSION_MAJOR)                                     \
	"." BP_VERSION_XSTR_(BP_VERSION_MINOR) "." BP_VERSION_XSTR_(           \
		BP_VERSION_PATCH)

#endif /* BATCHPIPE_VERSION_H */
